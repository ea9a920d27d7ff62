"""What a group's launch template version or launch configuration says, read cheaply, against moto.

EC2 throttles its API per account and region, each action with its own token bucket (EC2 Developer
Guide, "Request throttling for the Amazon EC2 API"): reading every group's launch template version on
every observation (every 20 s, in every region) spends DescribeLaunchTemplateVersions tokens for
nothing, and a throttled read fails the region's observation. A version, once created, never changes
(EC2 User Guide, "Modify a launch template": to change one, create a new version), nor does a launch
configuration: what a numbered version or a configuration says is kept for the container's life, and
only ``$Latest`` and ``$Default`` are resolved again, by one DescribeLaunchTemplates for the region.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from fakes import calls, refuse
from moto import mock_aws

from spillway.adapters.aws import AwsAdapter, AwsClients, AwsSettings
from spillway.adapters.launch_cache import DEFAULT_RECHECK_SECONDS, DEFAULT_RECHECK_SPREAD, LaunchCache
from spillway.errors import AwsError, AwsThrottled
from spillway.local.rig import create_group
from spillway.model.aws import AutoScalingGroup

REGION = "us-east-1"
NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
RESERVE = {"cpu": 100, "memory": 2**30 * 1000}
AMI = "ami-12c6146b"
SPOT = {"MarketType": "spot", "SpotOptions": {"SpotInstanceType": "one-time"}}
MANAGED = [{"Key": "k8s.io/cluster-autoscaler/enabled", "Value": "true"},
           {"Key": "k8s.io/cluster-autoscaler/prod", "Value": "owned"}]  # fmt: skip


@pytest.fixture
def world() -> Any:
    with mock_aws():
        clients = AwsClients([REGION], boto3.Session(), AwsSettings(max_attempts=1))
        yield clients, AwsAdapter(clients, "prod")


def observe(adapter: AwsAdapter) -> dict[str, Any]:
    return {g.name: g for g in adapter.node_groups_in(REGION, RESERVE, NOW)}


def template_group(
    clients: Any, name: str, version: str | None, data: dict[str, Any], desired: int = 0
) -> str:
    """A group without a mixed instances policy on its own template ``lt-<name>`` (``version`` None: the
    group names none, so ``$Default``); returns the template's id."""
    made = clients.ec2(REGION).create_launch_template(
        LaunchTemplateName=f"lt-{name}", LaunchTemplateData={"ImageId": AMI, **data}
    )
    spec: dict[str, str] = {"LaunchTemplateName": f"lt-{name}"}
    if version is not None:
        spec["Version"] = version
    clients.autoscaling(REGION).create_auto_scaling_group(
        AutoScalingGroupName=name, LaunchTemplate=spec, MinSize=0, MaxSize=5, DesiredCapacity=desired,
        AvailabilityZones=[f"{REGION}a"], Tags=MANAGED,
    )  # fmt: skip
    return str(made["LaunchTemplate"]["LaunchTemplateId"])


def new_version(clients: Any, name: str, data: dict[str, Any]) -> None:
    clients.ec2(REGION).create_launch_template_version(
        LaunchTemplateName=f"lt-{name}", LaunchTemplateData={"ImageId": AMI, **data}
    )


def config_group(clients: Any, name: str, config: str) -> None:
    clients.autoscaling(REGION).create_auto_scaling_group(
        AutoScalingGroupName=name, LaunchConfigurationName=config, MinSize=0, MaxSize=5, DesiredCapacity=0,
        AvailabilityZones=[f"{REGION}a"], Tags=MANAGED,
    )  # fmt: skip


def facts(groups: dict[str, Any]) -> dict[str, tuple[str | None, str, tuple[str, ...]]]:
    return {name: (g.instance_type, g.capacity_type, g.problems) for name, g in groups.items()}


def test_a_second_observation_of_unchanged_templates_reads_no_version(world: Any) -> None:
    """Five groups, four templates: the first observation reads each version once (a version two
    groups share, once); the second reads none, and resolves $Latest and $Default with one
    DescribeLaunchTemplates for the region. What the groups are does not change."""
    clients, adapter = world
    template_group(clients, "latest", "$Latest", {"InstanceType": "g5.xlarge"})
    template_group(clients, "default", None, {"InstanceType": "m5.xlarge", "InstanceMarketOptions": SPOT})
    template_group(clients, "pinned", "1", {"InstanceType": "c5.xlarge"})
    create_group("running", region=REGION, cluster="prod", desired=1, mixed=False)  # read for its market
    create_group("mixed", region=REGION, cluster="prod", desired=0, mixed=True)  # its override types it
    ec2 = clients.ec2(REGION)
    versions = calls(ec2, "DescribeLaunchTemplateVersions")
    templates = calls(ec2, "DescribeLaunchTemplates")

    first = observe(adapter)
    read_first = len(versions)
    second = observe(adapter)

    assert read_first == 4  # one per template a group without a type or market needs
    assert len(versions) == read_first  # nothing read again
    assert len(templates) == 2  # one per observation, for every template of the region
    assert facts(second) == facts(first)
    assert facts(first)["latest"] == ("g5.xlarge", "on-demand", ())
    assert facts(first)["default"] == ("m5.xlarge", "spot", ())
    assert facts(first)["pinned"] == ("c5.xlarge", "on-demand", ())


def test_a_new_latest_version_is_read_and_only_it(world: Any) -> None:
    clients, adapter = world
    lt = template_group(clients, "gpu", "$Latest", {"InstanceType": "g5.xlarge"})
    assert facts(observe(adapter))["gpu"] == ("g5.xlarge", "on-demand", ())
    versions = calls(clients.ec2(REGION), "DescribeLaunchTemplateVersions")

    new_version(clients, "gpu", {"InstanceType": "g5.2xlarge", "InstanceMarketOptions": SPOT})

    assert facts(observe(adapter))["gpu"] == ("g5.2xlarge", "spot", ())
    assert versions == [{"LaunchTemplateId": lt, "Versions": ["2"]}]


def test_a_changed_default_version_is_followed(world: Any) -> None:
    """$Default is what the template's DefaultVersionNumber says now: a new version changes nothing
    until it is made the default, and then it is what the group launches (its facts already known from
    a group on $Latest: no version read at all)."""
    clients, adapter = world
    lt = template_group(clients, "web", None, {"InstanceType": "m5.large"})
    new_version(clients, "web", {"InstanceType": "m5.2xlarge", "InstanceMarketOptions": SPOT})
    clients.autoscaling(REGION).create_auto_scaling_group(
        AutoScalingGroupName="web-next", LaunchTemplate={"LaunchTemplateId": lt, "Version": "$Latest"},
        MinSize=0, MaxSize=5, DesiredCapacity=0, AvailabilityZones=[f"{REGION}a"], Tags=MANAGED,
    )  # fmt: skip
    before = facts(observe(adapter))
    assert before["web"] == ("m5.large", "on-demand", ())
    assert before["web-next"] == ("m5.2xlarge", "spot", ())
    versions = calls(clients.ec2(REGION), "DescribeLaunchTemplateVersions")

    clients.ec2(REGION).modify_launch_template(LaunchTemplateId=lt, DefaultVersion="2")

    assert facts(observe(adapter))["web"] == ("m5.2xlarge", "spot", ())
    assert versions == []


def test_the_cache_is_bounded_and_what_it_dropped_is_read_again(world: Any) -> None:
    clients, _ = world
    adapter = AwsAdapter(clients, "prod", launch_cache_size=2)
    for name, itype in (("a", "m5.large"), ("b", "c5.large"), ("c", "r5.large")):
        template_group(clients, name, "$Latest", {"InstanceType": itype})
    versions = calls(clients.ec2(REGION), "DescribeLaunchTemplateVersions")

    first = facts(observe(adapter))
    assert len(versions) == 3 and len(adapter._launch_cache) <= 2
    second = facts(observe(adapter))

    assert 3 < len(versions) <= 6  # what the bound dropped is asked again, not served as unknown
    assert len(adapter._launch_cache) <= 2
    assert second == first == {
        "a": ("m5.large", "on-demand", ()), "b": ("c5.large", "on-demand", ()), "c": ("r5.large", "on-demand", ())
    }  # fmt: skip


def test_versions_of_one_template_are_read_in_one_call(world: Any) -> None:
    clients, adapter = world
    lt = template_group(clients, "v1", "1", {"InstanceType": "m5.large"})
    new_version(clients, "v1", {"InstanceType": "m5.xlarge"})
    for name, version in (("v2", "2"), ("v-latest", "$Latest")):
        clients.autoscaling(REGION).create_auto_scaling_group(
            AutoScalingGroupName=name, LaunchTemplate={"LaunchTemplateId": lt, "Version": version},
            MinSize=0, MaxSize=5, DesiredCapacity=0, AvailabilityZones=[f"{REGION}a"], Tags=MANAGED,
        )  # fmt: skip
    versions = calls(clients.ec2(REGION), "DescribeLaunchTemplateVersions")

    seen = facts(observe(adapter))

    assert versions == [{"LaunchTemplateId": lt, "Versions": ["1", "2"]}]
    assert {n: t for n, (t, _, _) in seen.items()} == {
        "v1": "m5.large",
        "v2": "m5.xlarge",
        "v-latest": "m5.xlarge",
    }


def test_a_template_deleted_after_it_was_read_is_not_served_from_the_cache(world: Any) -> None:
    clients, adapter = world
    template_group(clients, "gone", "$Latest", {"InstanceType": "g5.xlarge", "InstanceMarketOptions": SPOT})
    assert facts(observe(adapter))["gone"] == ("g5.xlarge", "spot", ())

    clients.ec2(REGION).delete_launch_template(LaunchTemplateName="lt-gone")
    (problem,) = observe(adapter)["gone"].problems

    assert problem.startswith(
        "LaunchTemplate: lt-gone ($Latest) not found (InvalidLaunchTemplateId.NotFound)"
    )


def delete_last_version(template_id: str) -> None:
    """DeleteLaunchTemplateVersions of the template's last version, in moto's backend (moto 5 does not
    implement the call): DescribeLaunchTemplateVersions naming it then fails with
    ``InvalidLaunchTemplateId.VersionNotFound``, as EC2 answers for a version that does not exist (EC2 API
    Reference, "Error codes for the Amazon EC2 API": "The specified launch template version does not
    exist")."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    ec2_backends[DEFAULT_ACCOUNT_ID][REGION].launch_templates[template_id].versions.pop()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_pinned_version_deleted_after_it_was_read_is_named_once_asked_again_and_then_read_anew(
    world: Any,
) -> None:
    """A group pins version 2; the version is deleted afterwards (EC2 allows deleting any version but
    the default), and the group launches nothing from then on. Kept for the container's life, the facts
    hid that until a new container read them. A kept version is asked again once it was read
    DEFAULT_RECHECK_SECONDS ago: EC2's VersionNotFound drops it from the cache and names the group's
    problem, and the next observation asks for it anew (not served from the cache). Before the re-check
    it is served as read, with no call. (No spread: the re-check falls due at DEFAULT_RECHECK_SECONDS.)"""
    clients, adapter = world
    clock = Clock()
    adapter._launch_cache = LaunchCache(clock=clock, recheck_spread=0)
    lt = template_group(clients, "pinned", "2", {"InstanceType": "m5.large"})
    new_version(clients, "pinned", {"InstanceType": "g5.xlarge", "InstanceMarketOptions": SPOT})
    assert facts(observe(adapter))["pinned"] == ("g5.xlarge", "spot", ())
    versions = calls(clients.ec2(REGION), "DescribeLaunchTemplateVersions")

    delete_last_version(lt)
    clock.now += DEFAULT_RECHECK_SECONDS - 1
    assert facts(observe(adapter))["pinned"] == ("g5.xlarge", "spot", ())  # not asked yet
    assert versions == []
    clock.now += 1
    (problem,) = observe(adapter)["pinned"].problems
    again = observe(adapter)["pinned"].problems

    assert problem.startswith(
        "LaunchTemplate: lt-pinned (2) not found (InvalidLaunchTemplateId.VersionNotFound)"
    )
    assert again == (problem,)
    assert versions == [{"LaunchTemplateId": lt, "Versions": ["2"]}] * 2  # re-checked, then read anew


def test_a_recheck_that_ec2_throttles_keeps_what_the_version_says_and_fails_no_read(world: Any) -> None:
    """What a version says cannot change: a re-check refused for its rate fails nothing and serves the
    facts as read; it is pushed back a whole period (not asked at the next read), then asked again."""
    clients, adapter = world
    clock = Clock()
    adapter._launch_cache = LaunchCache(clock=clock, recheck_spread=0)
    template_group(clients, "gpu", "1", {"InstanceType": "g5.xlarge", "InstanceMarketOptions": SPOT})
    observe(adapter)
    real = clients.ec2(REGION).describe_launch_template_versions
    refuse(clients.ec2(REGION), "describe_launch_template_versions", "RequestLimitExceeded", 503)
    clock.now += DEFAULT_RECHECK_SECONDS

    assert facts(observe(adapter))["gpu"] == ("g5.xlarge", "spot", ())
    clients.ec2(REGION).describe_launch_template_versions = real
    versions = calls(clients.ec2(REGION), "DescribeLaunchTemplateVersions")
    clock.now += DEFAULT_RECHECK_SECONDS - 1
    assert facts(observe(adapter))["gpu"] == ("g5.xlarge", "spot", ()) and versions == []  # pushed back
    clock.now += 1
    assert facts(observe(adapter))["gpu"] == ("g5.xlarge", "spot", ())
    assert len(versions) == 1  # asked again, and kept as read now
    assert facts(observe(adapter))["gpu"] == ("g5.xlarge", "spot", ()) and len(versions) == 1


def test_a_throttled_recheck_is_not_repeated_on_every_observation(world: Any) -> None:
    """Review r27. EC2 throttles each action per account and region with a token bucket (EC2 Developer
    Guide, "Request throttling for the Amazon EC2 API": 100 for a non-mutating action, refilled 20 a
    second, RequestLimitExceeded past it). Every version read at a container's start falls due within
    one period of spread, one call per template; throttled, _recheck kept the old read time, so every
    following observation (every 20 s) sent the whole burst again, each call through the SDK's
    retries, for as long as the throttling lasted. Now a throttled re-check is pushed back a period:
    three observations within 40 s ask each template at most once, and serve what it says."""
    clients, adapter = world
    clock = Clock()
    adapter._launch_cache = LaunchCache(clock=clock)
    for i in range(30):
        template_group(clients, f"g{i:02d}", "1", {"InstanceType": "m5.large"})
    observe(adapter)  # every version read and kept
    attempts = refuse(clients.ec2(REGION), "describe_launch_template_versions", "RequestLimitExceeded", 503)

    clock.now += DEFAULT_RECHECK_SECONDS * (1 + DEFAULT_RECHECK_SPREAD)  # every template's re-check due
    for _ in range(3):
        assert facts(observe(adapter))["g00"][0] == "m5.large"  # served as read: no failure
        clock.now += 20  # observe's interval

    asked = [a["LaunchTemplateId"] for a in attempts]
    assert len(set(asked)) == 30 and len(asked) == 30, f"{len(asked)} DescribeLaunchTemplateVersions in 40 s"


def ec2_refuses_missing_ids(clients: Any) -> list[list[str]]:
    """Make DescribeLaunchTemplates answer as EC2 does for ids one of which does not exist: the whole
    request fails with InvalidLaunchTemplateId.NotFound (moto leaves the missing id out). Returns the
    ids each call asked for."""
    ec2 = clients.ec2(REGION)
    real = ec2.describe_launch_templates
    asked: list[list[str]] = []

    def describe(**params: Any) -> Any:
        ids = list(params.get("LaunchTemplateIds") or [])
        asked.append(ids)
        answer = real(**params)
        known = {t["LaunchTemplateId"] for t in answer["LaunchTemplates"]}
        if set(ids) - known:
            raise ClientError(
                {"Error": {"Code": "InvalidLaunchTemplateId.NotFound", "Message": "At least one ..."},
                 "ResponseMetadata": {"HTTPStatusCode": 400}},
                "DescribeLaunchTemplates",
            )  # fmt: skip
        return answer

    ec2.describe_launch_templates = describe
    return asked


def test_one_template_that_no_longer_exists_leaves_only_its_group_unread_and_is_then_asked_alone(
    world: Any,
) -> None:
    """EC2 fails the whole DescribeLaunchTemplates when one id it names does not exist, without saying
    which: each is then asked alone. An id EC2 said does not exist is asked alone from then on (still
    asked: EC2's reads are eventually consistent, and a template it has just made may not be seen yet),
    so that it cannot fail the batch of the others on every observation."""
    clients, adapter = world
    kept = template_group(clients, "kept", "$Latest", {"InstanceType": "m5.large"})
    gone = template_group(clients, "gone", "$Latest", {"InstanceType": "g5.xlarge"})
    clients.ec2(REGION).delete_launch_template(LaunchTemplateId=gone)
    asked = ec2_refuses_missing_ids(clients)

    first = observe(adapter)
    asked_first = [sorted(ids) for ids in asked]
    second = observe(adapter)

    assert facts(first)["kept"] == facts(second)["kept"] == ("m5.large", "on-demand", ())
    assert first["gone"].problems == second["gone"].problems
    assert first["gone"].problems[0].startswith("LaunchTemplate: lt-gone ($Latest) not found")
    assert asked_first[0] == sorted([kept, gone]) and sorted(asked_first[1:]) == sorted([[kept], [gone]])
    assert asked[len(asked_first) :] == [[kept], [gone]]


def test_a_template_named_by_name_and_made_again_under_that_name_is_read_anew(world: Any) -> None:
    """A group may name its template by name (spillway plan's input, an ASG created so): a template
    deleted and created again under the name is another template, whose version 1 says something else.
    What is kept is keyed by the template's id, which DescribeLaunchTemplates gives for the name."""
    clients, adapter = world
    ec2 = clients.ec2(REGION)
    raw = create_group("named", region=REGION, cluster="prod", desired=0, mixed=False)  # lt-named, m5.large
    raw["LaunchTemplate"] = {"LaunchTemplateName": "lt-named", "Version": "1"}
    asg = AutoScalingGroup.model_validate(raw)
    assert adapter._with_launch_settings(REGION, [asg])[0].LaunchInstanceType == "m5.large"

    ec2.delete_launch_template(LaunchTemplateName="lt-named")
    ec2.create_launch_template(
        LaunchTemplateName="lt-named",
        LaunchTemplateData={"ImageId": AMI, "InstanceType": "g5.xlarge", "InstanceMarketOptions": SPOT},
    )
    (again,) = adapter._with_launch_settings(REGION, [asg])

    assert (again.LaunchInstanceType, again.LaunchMarketType) == ("g5.xlarge", "spot")


def test_a_template_named_by_a_name_that_does_not_exist_is_named_in_the_groups_problems(world: Any) -> None:
    _, adapter = world
    raw = create_group("named", region=REGION, cluster="prod", desired=0, mixed=False)
    raw["LaunchTemplate"] = {"LaunchTemplateName": "lt-nowhere", "Version": "$Latest"}

    (group,) = adapter._with_launch_settings(REGION, [AutoScalingGroup.model_validate(raw)])

    assert group.LaunchSettingsProblem is not None
    assert group.LaunchSettingsProblem.startswith(
        "LaunchTemplate: lt-nowhere ($Latest) not found (InvalidLaunchTemplateName.NotFoundException)"
    )


@pytest.mark.parametrize(
    ("code", "status", "error"),
    [("RequestLimitExceeded", 503, AwsThrottled), ("UnauthorizedOperation", 403, AwsError)],
)
def test_a_describe_launch_templates_that_fails_fails_the_regions_read(
    world: Any, code: str, status: int, error: type[AwsError]
) -> None:
    """Throttled, or refused (the role lacks ec2:DescribeLaunchTemplates): the region's read fails, as
    when the version read fails; nothing is guessed from what was read before."""
    clients, adapter = world
    template_group(clients, "gpu", "$Latest", {"InstanceType": "g5.xlarge", "InstanceMarketOptions": SPOT})
    observe(adapter)
    refuse(clients.ec2(REGION), "describe_launch_templates", code, status)

    with pytest.raises(error, match=f"DescribeLaunchTemplates.*{code}") as failed:
        observe(adapter)

    assert type(failed.value) is error


def test_launch_configurations_are_read_in_one_call_and_then_kept(world: Any) -> None:
    clients, adapter = world
    auto = clients.autoscaling(REGION)
    for name, itype in (("old-a", "m5.large"), ("old-b", "c5.large"), ("old-c", "r5.large")):
        auto.create_launch_configuration(
            LaunchConfigurationName=f"lc-{name}", ImageId=AMI, InstanceType=itype
        )
        config_group(clients, name, f"lc-{name}")
    configs = calls(auto, "DescribeLaunchConfigurations")

    first = facts(observe(adapter))
    second = facts(observe(adapter))

    assert [sorted(c["LaunchConfigurationNames"]) for c in configs] == [["lc-old-a", "lc-old-b", "lc-old-c"]]
    assert first == second
    assert {n: t for n, (t, _, _) in first.items()} == {
        "old-a": "m5.large",
        "old-b": "c5.large",
        "old-c": "r5.large",
    }


def test_a_launch_configuration_made_again_under_its_name_is_read_anew_once_no_group_named_it(
    world: Any,
) -> None:
    """A configuration in use cannot be deleted; to make one again under its name, its groups move to
    another first. What is kept of a name no group names any more is dropped, so the name is read anew
    when a group names it again."""
    clients, adapter = world
    auto = clients.autoscaling(REGION)
    auto.create_launch_configuration(LaunchConfigurationName="lc-web", ImageId=AMI, InstanceType="m5.large")
    auto.create_launch_configuration(LaunchConfigurationName="lc-tmp", ImageId=AMI, InstanceType="c5.large")
    config_group(clients, "web", "lc-web")
    assert observe(adapter)["web"].instance_type == "m5.large"

    auto.update_auto_scaling_group(AutoScalingGroupName="web", LaunchConfigurationName="lc-tmp")
    assert observe(adapter)["web"].instance_type == "c5.large"
    auto.delete_launch_configuration(LaunchConfigurationName="lc-web")
    auto.create_launch_configuration(
        LaunchConfigurationName="lc-web", ImageId=AMI, InstanceType="g5.xlarge", SpotPrice="0.5"
    )
    auto.update_auto_scaling_group(AutoScalingGroupName="web", LaunchConfigurationName="lc-web")

    assert facts(observe(adapter))["web"] == ("g5.xlarge", "spot", ())
