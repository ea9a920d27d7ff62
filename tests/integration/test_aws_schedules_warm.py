"""The AWS adapter's scheduled actions and warm pools, against moto (warm instances: CloudSim)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from fakes import FakeCluster, FakeLedger, calls, refuse
from moto import mock_aws

from spillway.act import gang
from spillway.adapters.aws import AwsAdapter, AwsClients, AwsSettings
from spillway.errors import AwsError, AwsThrottled, AwsUnavailable
from spillway.local.cloud import CloudSim
from spillway.local.rig import create_group
from spillway.model.aws import AutoScalingGroup
from spillway.model.nodegroup import TAG_ATOMIC_LAUNCH

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
RESERVE = {"cpu": 100, "memory": 2**30 * 1000}


@pytest.fixture
def world() -> Any:
    with mock_aws(), CloudSim():
        clients = AwsClients(["us-east-1"], boto3.Session(), AwsSettings(max_attempts=1))
        yield clients, AwsAdapter(clients, "prod")


def test_scheduled_actions_reach_their_group_with_time_zone_and_recurrence(world: Any) -> None:
    clients, adapter = world
    create_group("day", region="us-east-1", cluster="prod", desired=1, max_size=10, mixed=False)
    create_group("other", region="us-east-1", cluster="prod", desired=1, max_size=10, mixed=False)
    create_group("foreign", region="us-east-1", cluster="staging", desired=1, mixed=False)
    asg = clients.autoscaling("us-east-1")
    asg.put_scheduled_update_group_action(
        AutoScalingGroupName="day", ScheduledActionName="morning", Recurrence="0 8 * * 1-5",
        MinSize=4, DesiredCapacity=4, TimeZone="Europe/Berlin",
    )  # fmt: skip
    asg.put_scheduled_update_group_action(
        AutoScalingGroupName="foreign", ScheduledActionName="x", Recurrence="0 8 * * *", MinSize=9
    )
    seen = calls(asg, "DescribeScheduledActions")

    by_name = {g.name: g for g in adapter.node_groups(RESERVE, NOW)}

    (morning,) = by_name["day"].scheduled
    assert (morning.name, morning.min_size, morning.desired) == ("morning", 4, 4)
    assert (morning.recurrence, morning.timezone) == ("0 8 * * 1-5", "Europe/Berlin")
    assert by_name["other"].scheduled == ()
    assert "foreign" not in by_name
    assert len(seen) == 1  # one call for the region, not one per group


def test_warm_pool_instances_are_counted_only_for_groups_with_a_pool(world: Any) -> None:
    clients, adapter = world
    create_group("warm", region="us-east-1", cluster="prod", desired=2, max_size=5, mixed=False)
    create_group("cold", region="us-east-1", cluster="prod", desired=1, max_size=5, mixed=False)
    asg = clients.autoscaling("us-east-1")
    asg.put_warm_pool(AutoScalingGroupName="warm", MinSize=1, PoolState="Stopped")
    seen = calls(asg, "DescribeWarmPool")

    by_name = {g.name: g for g in adapter.node_groups(RESERVE, NOW)}

    assert by_name["warm"].warm_instances == 3  # MaxSize 5 - desired 2 (above the pool's MinSize 1)
    assert by_name["cold"].warm_instances == 0
    assert [c["AutoScalingGroupName"] for c in seen] == ["warm"]


def test_warm_pool_errors_are_translated(world: Any) -> None:
    _, adapter = world
    with pytest.raises(AwsError, match=r"DescribeWarmPool\(us-east-1, ghost\)"):
        adapter.describe_warm_pool("us-east-1", "ghost")


def test_mixed_policy_spot_distribution_and_smallest_override(world: Any) -> None:
    clients, adapter = world
    ec2 = clients.ec2("us-east-1")
    ec2.create_launch_template(
        LaunchTemplateName="spot-lt",
        LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "m5.large"},
    )
    clients.autoscaling("us-east-1").create_auto_scaling_group(
        AutoScalingGroupName="spot",
        MinSize=0, MaxSize=5, DesiredCapacity=0, AvailabilityZones=["us-east-1a", "us-east-1b"],
        MixedInstancesPolicy={
            "LaunchTemplate": {
                "LaunchTemplateSpecification": {"LaunchTemplateName": "spot-lt"},
                "Overrides": [{"InstanceType": "m5.2xlarge"}, {"InstanceType": "m5.large"}, {"InstanceType": "m5.xlarge"}],
            },
            "InstancesDistribution": {"OnDemandBaseCapacity": 0, "OnDemandPercentageAboveBaseCapacity": 0},
        },
        Tags=[{"Key": "k8s.io/cluster-autoscaler/enabled", "Value": "true"},
              {"Key": "k8s.io/cluster-autoscaler/prod", "Value": "owned"}],
    )  # fmt: skip

    (group,) = adapter.node_groups(RESERVE, NOW + timedelta(minutes=1))

    assert group.capacity_type == "spot"
    assert group.instance_type == "m5.large"  # the smallest override, not the first
    assert group.instance_types == ("m5.2xlarge", "m5.large", "m5.xlarge")


def test_a_mixed_groups_launch_template_is_resolved_in_the_same_call_and_a_throttle_leaves_it_unknown(
    world: Any,
) -> None:
    """What a group launches from (spillway.model.nodecache) is resolved for a mixed group too, whose
    launch settings are not read otherwise: in the region's one DescribeLaunchTemplates. That call being
    throttled fails nothing when only such groups need it: their source is not known, and a remembered
    template of theirs holds by type and age as before."""
    clients, adapter = world
    create_group("plain", region="us-east-1", cluster="prod", desired=0, mixed=False)
    create_group("mixed", region="us-east-1", cluster="prod", desired=0, mixed=True)
    ec2 = clients.ec2("us-east-1")
    ids = {
        t["LaunchTemplateName"]: t["LaunchTemplateId"]
        for t in ec2.describe_launch_templates()["LaunchTemplates"]
    }
    ec2.create_launch_template_version(
        LaunchTemplateId=ids["lt-mixed"],
        LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "m5.large"},
    )
    seen = calls(ec2, "DescribeLaunchTemplates")

    by_name = {g.name: g for g in adapter.node_groups(RESERVE, NOW)}

    assert by_name["plain"].launch_source == f"{ids['lt-plain']}@1"
    assert by_name["mixed"].launch_source == f"{ids['lt-mixed']}@2"  # $Latest
    assert len(seen) == 1  # both templates in the call that reads the plain group's
    clients.autoscaling("us-east-1").delete_auto_scaling_group(AutoScalingGroupName="plain", ForceDelete=True)
    refuse(ec2, "describe_launch_templates", "RequestLimitExceeded", 503)

    (mixed,) = adapter.node_groups(RESERVE, NOW + timedelta(minutes=1))

    assert (mixed.name, mixed.launch_source) == ("mixed", "")


# --- scaling from zero: the instance type of a group's launch template or configuration ------------


def test_a_group_at_zero_takes_its_instance_type_from_its_launch_template(world: Any) -> None:
    """No instance, no MixedInstancesPolicy override, no node-template tag: the type was unknown and the
    group had no template node, so it could never be scaled from zero, though cluster-autoscaler reads
    the launch template for it. (Found by review.)"""
    clients, adapter = world
    create_group("gpu-zero", region="us-east-1", cluster="prod", desired=0, max_size=10, mixed=False,
                 instance_type="g5.xlarge")  # fmt: skip
    described = calls(clients.ec2("us-east-1"), "DescribeLaunchTemplateVersions")

    (group,) = adapter.node_groups_in("us-east-1", RESERVE, NOW)

    assert group.instance_type == "g5.xlarge" and group.template is not None
    assert group.template.allocatable.get("nvidia.com/gpu") == 1000
    assert [c["Versions"] for c in described] == [["1"]]  # the group's own version ($Latest is 1)


def test_a_group_whose_launch_template_now_names_another_type_is_planned_as_that_type(world: Any) -> None:
    """Auto Scaling launches new instances from the launch template version the group names now; its
    running instances keep the type they were launched with (EC2 Auto Scaling API Reference,
    UpdateAutoScalingGroup; "Change the launch configuration for an Auto Scaling group" says the same of a
    launch configuration). The template node was the
    type most of the running instances have, so after the template moved from m5.2xlarge to m5.large a
    pod needing 6 CPUs was planned onto the group, and every instance launched for it was an m5.large
    it does not fit."""
    clients, adapter = world
    create_group("moved", region="us-east-1", cluster="prod", desired=2, max_size=10, mixed=False,
                 instance_type="m5.2xlarge")  # fmt: skip
    ec2 = clients.ec2("us-east-1")
    ec2.create_launch_template_version(
        LaunchTemplateName="lt-moved", SourceVersion="1",
        LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "m5.large"},
    )  # fmt: skip

    (group,) = adapter.node_groups_in("us-east-1", RESERVE, NOW)

    assert group.instance_type == "m5.large"  # the group names $Latest: version 2
    assert group.template is not None and group.template.allocatable["cpu"] < 2000
    assert group.template.labels["node.kubernetes.io/instance-type"] == "m5.large"
    # its m5.2xlarge nodes do not stand for what it launches now (spillway.model.livetemplate)
    assert len(group.instance_ids) == 2 and set(group.other_type_instances) == set(group.instance_ids)


def planned_and_fleet(adapter: Any, group: str) -> tuple[Any, dict[str, Any]]:
    """The region's one group as observe gives it to the plan, and the fleet a gang's prepare asks for
    2 of its nodes."""
    steps = gang.GangSteps(kube=FakeCluster(), aws=adapter, ledger=FakeLedger(), cluster="prod",
                           clock=lambda: NOW)  # fmt: skip
    (planned,) = adapter.node_groups_in("us-east-1", RESERVE, NOW)
    prep = steps.prepare({"group": group, "region": "us-east-1", "count": 2, "gang": "ml/train",
                          "mode": "fleet", "deadline_seconds": 60, "poll_seconds": 1, "plan_id": "p-1",
                          "execution": "arn:aws:states:us-east-1:123456789012:execution:g:e-1"})  # fmt: skip
    return planned, prep


def test_a_fleet_gang_asks_for_the_type_the_groups_launch_template_names_now(world: Any) -> None:
    """The plan places a gang on the template of the type the group launches now (its launch template's);
    the fleet asked for the type most of its running instances have, launched before the template
    changed, so a gang planned for g5.2xlarge nodes got g5.xlarge ones its pods do not fit."""
    clients, adapter = world
    create_group("gang", region="us-east-1", cluster="prod", desired=1, max_size=10, mixed=False,
                 instance_type="g5.xlarge", tags={TAG_ATOMIC_LAUNCH: "fleet"})  # fmt: skip
    clients.ec2("us-east-1").create_launch_template_version(
        LaunchTemplateName="lt-gang", SourceVersion="1",
        LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "g5.2xlarge"},
    )  # fmt: skip
    planned, prep = planned_and_fleet(adapter, "gang")

    assert planned.instance_type == prep["fleet"]["instance_type"] == "g5.2xlarge"


def test_a_fleet_gang_of_a_group_whose_launch_template_asks_for_spot_asks_for_spot(world: Any) -> None:
    """Observe reads the launch template's InstanceMarketOptions, so the plan prices, taints and places
    pods on the group as Spot; gang_prepare read the group without it and, with no capacity-type tag,
    asked the fleet for on-demand: the gang got nodes of another capacity type (and price) than the
    ones the plan was made for."""
    _, adapter = world
    create_group("spotgang", region="us-east-1", cluster="prod", desired=0, max_size=10, mixed=False,
                 spot=True, instance_type="g5.xlarge", tags={TAG_ATOMIC_LAUNCH: "fleet"})  # fmt: skip
    planned, prep = planned_and_fleet(adapter, "spotgang")

    assert planned.capacity_type == prep["fleet"]["capacity_type"] == "spot"


def test_a_group_at_zero_with_a_launch_configuration_takes_its_type(world: Any) -> None:
    clients, adapter = world
    asg = clients.autoscaling("us-east-1")
    asg.create_launch_configuration(
        LaunchConfigurationName="lc-old", ImageId="ami-12c6146b", InstanceType="m5.xlarge"
    )
    asg.create_auto_scaling_group(
        AutoScalingGroupName="old", LaunchConfigurationName="lc-old", MinSize=0, MaxSize=5, DesiredCapacity=0,
        AvailabilityZones=["us-east-1a"],
        Tags=[{"Key": "k8s.io/cluster-autoscaler/enabled", "Value": "true"},
              {"Key": "k8s.io/cluster-autoscaler/prod", "Value": "owned"}],
    )  # fmt: skip

    (group,) = adapter.node_groups_in("us-east-1", RESERVE, NOW)

    assert group.instance_type == "m5.xlarge" and group.template is not None


def test_a_group_whose_type_is_known_asks_nothing_more(world: Any) -> None:
    clients, adapter = world
    create_group("tagged", region="us-east-1", cluster="prod", desired=0, max_size=10, mixed=True,
                 instance_type="m5.large")  # fmt: skip
    described = calls(clients.ec2("us-east-1"), "DescribeLaunchTemplateVersions")

    (group,) = adapter.node_groups_in("us-east-1", RESERVE, NOW)

    assert group.instance_type == "m5.large" and described == []


def test_a_group_at_zero_with_attribute_overrides_does_not_take_its_launch_templates_type(world: Any) -> None:
    """Overrides by attributes (InstanceRequirements) replace the launch template's type: reading the
    template would give the group a type it never launches. It asks nothing. (Found by review.)"""
    clients, adapter = world
    raw = create_group("attr", region="us-east-1", cluster="prod", desired=0, max_size=10, mixed=True)
    raw["MixedInstancesPolicy"]["LaunchTemplate"]["Overrides"] = [
        {"InstanceRequirements": {"VCpuCount": {"Min": 16}, "MemoryMiB": {"Min": 65536}}}
    ]
    asg = AutoScalingGroup.model_validate(raw)
    described = calls(clients.ec2("us-east-1"), "DescribeLaunchTemplateVersions")

    (read,) = adapter._with_launch_settings("us-east-1", [asg])

    assert read.LaunchInstanceType is None and described == []
    # only the version it launches from is resolved (spillway.model.nodecache), nothing else changes
    assert read.model_copy(update={"ResolvedLaunchTemplates": {}}) == asg


# --- Spot requested by the launch template or configuration (no mixed instances policy) -------------

MANAGED = [{"Key": "k8s.io/cluster-autoscaler/enabled", "Value": "true"},
           {"Key": "k8s.io/cluster-autoscaler/prod", "Value": "owned"}]  # fmt: skip
SPOT_MARKET = {"MarketType": "spot", "SpotOptions": {"SpotInstanceType": "one-time"}}


def spot_template_group(clients: Any, name: str, desired: int, tags: list[dict[str, str]] = MANAGED) -> None:
    clients.ec2("us-east-1").create_launch_template(
        LaunchTemplateName=f"lt-{name}",
        LaunchTemplateData={
            "ImageId": "ami-12c6146b",
            "InstanceType": "g5.xlarge",
            "InstanceMarketOptions": SPOT_MARKET,
        },
    )
    clients.autoscaling("us-east-1").create_auto_scaling_group(
        AutoScalingGroupName=name, LaunchTemplate={"LaunchTemplateName": f"lt-{name}", "Version": "$Latest"},
        MinSize=0, MaxSize=5, DesiredCapacity=desired, AvailabilityZones=["us-east-1a"], Tags=tags,
    )  # fmt: skip


def test_a_group_whose_launch_template_requests_spot_is_a_spot_group(world: Any) -> None:
    """AWS: an Auto Scaling group launches only Spot Instances when its launch template says so
    (``InstanceMarketOptions.MarketType: spot``; autoscaling userguide, launch-template-spot-instances).
    Spillway read the version only for its instance type and counted the group on-demand. (Review r11.)"""
    clients, adapter = world
    spot_template_group(clients, "gpu-spot", 0)
    described = calls(clients.ec2("us-east-1"), "DescribeLaunchTemplateVersions")

    (group,) = adapter.node_groups_in("us-east-1", RESERVE, NOW)

    assert group.instance_type == "g5.xlarge"  # the launch template was read
    assert group.capacity_type == "spot" and group.problems == ()
    assert [c["Versions"] for c in described] == [["1"]]  # $Latest, resolved by DescribeLaunchTemplates


def test_the_launch_template_is_read_for_its_market_even_when_instances_give_the_type(world: Any) -> None:
    clients, adapter = world
    spot_template_group(
        clients, "gpu-spot", 2, [*MANAGED, {"Key": "spillway.io/capacity-type", "Value": "on-demand"}]
    )

    (group,) = adapter.node_groups_in("us-east-1", RESERVE, NOW)

    assert len(group.instance_ids) == 2 and group.capacity_type == "spot"
    (problem,) = group.problems  # the tag says otherwise: named, and what EC2 is told to launch wins
    assert problem.startswith("Tags[spillway.io/capacity-type]: 'on-demand' says on-demand")


def spot_price_group(clients: Any) -> Any:
    """A group launched from a launch configuration with a SpotPrice (the older way to ask for Spot);
    its Auto Scaling client back."""
    asg = clients.autoscaling("us-east-1")
    asg.create_launch_configuration(
        LaunchConfigurationName="lc-spot", ImageId="ami-12c6146b", InstanceType="m5.xlarge", SpotPrice="0.10"
    )
    asg.create_auto_scaling_group(
        AutoScalingGroupName="old-spot", LaunchConfigurationName="lc-spot", MinSize=0, MaxSize=5,
        DesiredCapacity=1, AvailabilityZones=["us-east-1a"], Tags=MANAGED,
    )  # fmt: skip
    return asg


def test_a_launch_configuration_with_a_spot_price_makes_a_spot_group(world: Any) -> None:
    clients, adapter = world
    spot_price_group(clients)

    (group,) = adapter.node_groups_in("us-east-1", RESERVE, NOW)

    assert group.capacity_type == "spot"


def test_a_plain_launch_template_without_spot_makes_an_on_demand_group_whatever_a_tag_says(
    world: Any,
) -> None:
    clients, adapter = world
    create_group("plain", region="us-east-1", cluster="prod", desired=1, max_size=5, mixed=False,
                 tags={"spillway.io/capacity-type": "spot"})  # fmt: skip
    described = calls(clients.ec2("us-east-1"), "DescribeLaunchTemplateVersions")

    (group,) = adapter.node_groups_in("us-east-1", RESERVE, NOW)

    assert len(described) == 1  # read though its instance gives the type
    assert group.capacity_type == "on-demand"
    (problem,) = group.problems
    assert problem == (
        "Tags[spillway.io/capacity-type]: 'spot' says spot, but the launch template launches on-demand; ignored"
    )


# --- a launch template or configuration that cannot be read ---------------------------------------


@pytest.mark.parametrize(
    ("code", "status", "error"),
    [("RequestLimitExceeded", 503, AwsThrottled), ("InternalError", 500, AwsUnavailable),
     ("UnauthorizedOperation", 403, AwsError)],
)  # fmt: skip
def test_a_launch_template_read_that_fails_fails_the_regions_read(
    world: Any, code: str, status: int, error: type[AwsError]
) -> None:
    """One throttled DescribeLaunchTemplateVersions made an all-Spot group on-demand for a tick (the
    group was kept unread and its tags decided), sending pods that may not move to Spot: what a7136ba
    made the launch settings decide. Throttled, unavailable, or not permitted (the function's role lacks
    ec2:DescribeLaunchTemplateVersions): the region's read fails, as every other AWS read in observe
    does, and no snapshot is built on a guess. (Review r15-5.)"""
    clients, adapter = world
    spot_template_group(clients, "gpu-spot", 1)
    refuse(clients.ec2("us-east-1"), "describe_launch_template_versions", code, status)

    with pytest.raises(error, match=f"DescribeLaunchTemplateVersions.*{code}") as failed:
        adapter.node_groups_in("us-east-1", RESERVE, NOW)

    assert type(failed.value) is error


def test_a_launch_configuration_read_that_is_throttled_fails_the_regions_read(world: Any) -> None:
    clients, adapter = world
    asg = spot_price_group(clients)
    refuse(asg, "describe_launch_configurations", "Throttling", 400)

    with pytest.raises(AwsThrottled, match="DescribeLaunchConfigurations"):
        adapter.node_groups_in("us-east-1", RESERVE, NOW)


def test_a_launch_template_that_no_longer_exists_leaves_the_group_to_its_tags_and_names_it(
    world: Any,
) -> None:
    """Deleted (or the group names a version that is gone): EC2 answers InvalidLaunchTemplateName.
    NotFoundException (InvalidLaunchTemplateId.NotFound, .VersionNotFound), and so will every launch the
    group tries until somebody fixes it. Nothing can be known of what it would launch, and failing the
    region would stop every other group's plans: its tags decide, and its problems say why."""
    clients, adapter = world
    spot_template_group(
        clients, "gpu-spot", 1, [*MANAGED, {"Key": "spillway.io/capacity-type", "Value": "spot"}]
    )
    clients.ec2("us-east-1").delete_launch_template(LaunchTemplateName="lt-gpu-spot")

    (group,) = adapter.node_groups_in("us-east-1", RESERVE, NOW)

    assert group.capacity_type == "spot"  # by its tag
    (problem,) = group.problems
    assert problem.startswith("LaunchTemplate: lt-gpu-spot ($Latest) not found")
    assert "(InvalidLaunchTemplateId.NotFound)" in problem  # the group names its template by id


def test_a_group_whose_launch_template_attaches_efa_interfaces_offers_them_at_zero(world: Any) -> None:
    """The EFA device plugin advertises one vpc.amazonaws.com/efa for each EFA interface the node was
    launched with, and the launch template attaches them (NetworkInterfaces, InterfaceType efa or
    efa-only): observe reads them with the template's type, so a pod asking for EFA scales the group
    from zero; a group whose template attaches none offers none."""
    clients, adapter = world
    create_group("fabric", region="us-east-1", cluster="prod", desired=0, max_size=4, mixed=False,
                 instance_type="p4d.24xlarge")  # fmt: skip
    create_group("plain", region="us-east-1", cluster="prod", desired=0, max_size=4, mixed=False,
                 instance_type="p4d.24xlarge")  # fmt: skip
    interfaces = [
        {"NetworkCardIndex": card, "DeviceIndex": 0 if card == 0 else 1,
         "InterfaceType": "efa" if card == 0 else "efa-only"}
        for card in range(4)
    ]  # fmt: skip
    clients.ec2("us-east-1").create_launch_template_version(
        LaunchTemplateName="lt-fabric", SourceVersion="1",
        LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "p4d.24xlarge", "NetworkInterfaces": interfaces},
    )  # fmt: skip

    by_name = {g.name: g for g in adapter.node_groups_in("us-east-1", RESERVE, NOW)}

    assert by_name["fabric"].template is not None and by_name["plain"].template is not None
    assert by_name["fabric"].template.allocatable["vpc.amazonaws.com/efa"] == 4000
    assert "vpc.amazonaws.com/efa" not in by_name["plain"].template.allocatable
