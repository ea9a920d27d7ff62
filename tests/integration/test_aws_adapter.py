"""The AWS adapter against moto: discovery by tags in two regions, activities, instance types, writes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError, EndpointConnectionError
from botocore.stub import Stubber
from fakes import FakeLedger, refuse

from spillway.act.claims import Owner, raise_once
from spillway.adapters.aws import AwsAdapter, AwsClients, AwsSettings
from spillway.errors import AsgLimitExceeded, AsgNotFound, AwsError, AwsThrottled, AwsUnavailable
from spillway.model.aws import FleetRequest, ScalingActivity
from spillway.model.cluster import format_time
from spillway.model.resources import NVIDIA_GPU

REGIONS = ("us-east-1", "us-west-2")
NOW = datetime.now(UTC)
RESERVE = {"cpu": 100, "memory": 2**30 * 1000}


@pytest.fixture
def clients(moto_aws: None) -> AwsClients:
    return AwsClients(
        REGIONS, boto3.Session(), AwsSettings(max_attempts=2, connect_timeout=1, read_timeout=2)
    )


@pytest.fixture
def adapter(clients: AwsClients) -> AwsAdapter:
    return AwsAdapter(clients, "prod", activity_window=timedelta(minutes=30), max_activities=5)


def count_calls(client: Any, operation: str) -> list[dict[str, Any]]:
    """Record the parameters of every call of ``operation`` on ``client`` (the call still goes to moto)."""
    seen: list[dict[str, Any]] = []

    def hook(params: dict[str, Any], **_: Any) -> None:
        seen.append(params)

    client.meta.events.register(f"provide-client-params.*.{operation}", hook)
    return seen


def answer(client: Any, operation: str, respond: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Short-circuit ``operation`` on ``client`` with ``respond(params)`` as the parsed response (as a
    real service would have returned it: datetimes, NextToken...); moto does not record activities."""
    pending: dict[str, Any] = {}

    def remember(params: dict[str, Any], **_: Any) -> None:
        pending["params"] = dict(params)

    def reply(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        body = respond(pending["params"])
        status = body.get("ResponseMetadata", {}).get("HTTPStatusCode", 200)
        return AWSResponse("https://example.invalid", status, {}, None), body

    client.meta.events.register(f"provide-client-params.*.{operation}", remember)
    client.meta.events.register(f"before-call.*.{operation}", reply)


def answer_invalid(client: Any, operation: str, message: str) -> None:
    """``operation`` on ``client`` answers a ValidationError (HTTP 400) with AWS's ``message``."""
    answer(
        client,
        operation,
        lambda params: {
            "Error": {"Code": "ValidationError", "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": 400},
        },
    )


def activity(group: str, minutes_ago: float, *, failed: bool = False, n: int = 0) -> dict[str, Any]:
    start = NOW - timedelta(minutes=minutes_ago)
    message = (
        "We currently do not have sufficient g5.xlarge capacity in the Availability Zone you requested "
        "(us-east-1a). Launching EC2 instance failed. InsufficientInstanceCapacity"
    )
    return {
        "ActivityId": f"act-{group}-{n}",
        "AutoScalingGroupName": group,
        "Description": "Launching a new EC2 instance." + (" Status Reason: capacity" if failed else ""),
        "Cause": "At 2026-03-02T09:00:00Z a user request update of AutoScalingGroup constraints ...",
        "StartTime": start,
        "EndTime": start + timedelta(seconds=30),
        "StatusCode": "Failed" if failed else "Successful",
        "StatusMessage": message if failed else None,
        "Progress": 100,
    }


# --- discovery -------------------------------------------------------------------------------------


def test_finds_only_the_clusters_tagged_groups_in_every_region(
    adapter: AwsAdapter, two_regions: dict[str, Any]
) -> None:
    groups = adapter.node_groups(RESERVE, NOW)

    assert [(g.region, g.name) for g in groups] == [
        ("us-east-1", "general"),
        ("us-east-1", "gpu"),
        ("us-west-2", "p3"),
    ]
    general = groups[0]
    assert (general.min_size, general.max_size, general.desired) == (0, 20, 2)
    assert len(general.instance_ids) == 2
    assert general.instance_type == "m5.large"
    assert general.arn.startswith("arn:aws:autoscaling:us-east-1:")


def test_autoscaling_options_tags_reach_the_group_through_moto(
    adapter: AwsAdapter, two_regions: dict[str, Any]
) -> None:
    """cluster-autoscaler's per-ASG autoscaling-options tags, written with CreateOrUpdateTags, come back
    through DescribeAutoScalingGroups as the group's options; a bad one is named in its problems."""
    prefix = "k8s.io/cluster-autoscaler/node-template/autoscaling-options/"
    boto3.client("autoscaling", region_name="us-east-1").create_or_update_tags(
        Tags=[
            {"ResourceId": "general", "ResourceType": "auto-scaling-group", "Key": prefix + key, "Value": value,
             "PropagateAtLaunch": False}
            for key, value in (("scaledownunneededtime", "2m0s"), ("scaledownunreadytime", "soon"))
        ]
    )  # fmt: skip

    general = next(g for g in adapter.node_groups(RESERVE, NOW) if g.name == "general")

    assert dict(general.options) == {"scale_down_idle_minutes": 2.0, "consolidation_after_minutes": 2.0}
    assert any("scaledownunreadytime]: 'soon' is not a duration" in p for p in general.problems)


def test_capacity_rebalancing_protection_and_standby_reach_the_group_through_moto(
    adapter: AwsAdapter, two_regions: dict[str, Any]
) -> None:
    """What DescribeAutoScalingGroups says of a group's own replacements and protections reaches the
    snapshot's group: CapacityRebalance, an instance protected from scale-in with SetInstanceProtection,
    and an instance put in Standby (no longer live: it is neither desired nor one of the group's nodes)."""
    from moto.autoscaling.models import autoscaling_backends

    client = boto3.client("autoscaling", region_name="us-east-1")
    first, second = sorted(
        i["InstanceId"]
        for i in client.describe_auto_scaling_groups(AutoScalingGroupNames=["general"])["AutoScalingGroups"][
            0
        ]["Instances"]
    )
    # moto's UpdateAutoScalingGroup does not take CapacityRebalance (AWS's does): set it on its model
    autoscaling_backends["123456789012"]["us-east-1"].autoscaling_groups["general"].capacity_rebalance = True
    client.set_instance_protection(
        InstanceIds=[first], AutoScalingGroupName="general", ProtectedFromScaleIn=True
    )
    client.enter_standby(
        InstanceIds=[second], AutoScalingGroupName="general", ShouldDecrementDesiredCapacity=True
    )

    general = next(g for g in adapter.node_groups(RESERVE, NOW) if g.name == "general")

    assert general.capacity_rebalance is True
    assert general.protected_instances == (first,)
    assert general.instance_ids == (first,) and general.desired == 1


def test_termination_policies_and_a_protect_all_groups_protections_reach_the_group_through_moto(
    adapter: AwsAdapter, two_regions: dict[str, Any]
) -> None:
    """The group's TerminationPolicies, and of a group that protects every instance it launches, the
    instances protected from scale-in (which protected_instances leaves out: Spillway chooses among them
    itself, but a scheduled action's scale-in takes none of them)."""
    from moto.autoscaling.models import autoscaling_backends

    client = boto3.client("autoscaling", region_name="us-east-1")
    policies = ["OldestLaunchTemplate", "Default"]
    client.update_auto_scaling_group(AutoScalingGroupName="general", NewInstancesProtectedFromScaleIn=True)
    # moto's UpdateAutoScalingGroup does not take TerminationPolicies (AWS's does): set it on its model
    autoscaling_backends["123456789012"]["us-east-1"].autoscaling_groups[
        "general"
    ].termination_policies = policies
    instances = client.describe_auto_scaling_groups(AutoScalingGroupNames=["general"])["AutoScalingGroups"][
        0
    ]["Instances"]
    first = sorted(i["InstanceId"] for i in instances)[0]
    client.set_instance_protection(
        InstanceIds=[first], AutoScalingGroupName="general", ProtectedFromScaleIn=True
    )

    general = next(g for g in adapter.node_groups(RESERVE, NOW) if g.name == "general")

    assert general.termination_policies == tuple(policies)
    assert general.shielded_instances == (first,) and general.protected_instances == ()
    assert general.mixed_policy is False


def test_tag_filters_are_applied_by_aws_not_after_the_fact(
    adapter: AwsAdapter, clients: AwsClients, two_regions: dict[str, Any]
) -> None:
    calls = count_calls(clients.autoscaling("us-east-1"), "DescribeAutoScalingGroups")

    raw = adapter.describe_groups("us-east-1")

    assert sorted(g.AutoScalingGroupName for g in raw) == ["general", "gpu"]
    assert calls[0]["Filters"] == [
        {"Name": "tag-key", "Values": ["k8s.io/cluster-autoscaler/enabled"]},
        {"Name": "tag-key", "Values": ["k8s.io/cluster-autoscaler/prod"]},
    ]


def test_discovery_pages_through_many_groups(adapter: AwsAdapter, make_asg: Callable[..., Any]) -> None:
    for i in range(120):
        make_asg("us-west-2", f"batch-{i:03d}", desired=0)

    groups = adapter.describe_groups("us-west-2")

    assert len(groups) == 120


def test_gpu_templates_come_from_ec2_and_p3_from_the_bundled_catalogue(
    adapter: AwsAdapter, two_regions: dict[str, Any]
) -> None:
    by_name = {g.name: g for g in adapter.node_groups(RESERVE, NOW)}

    gpu = by_name["gpu"].template
    p3 = by_name["p3"].template
    assert gpu is not None and p3 is not None
    assert gpu.allocatable[NVIDIA_GPU] == 1000  # g5.xlarge: one A10G, from moto's DescribeInstanceTypes
    assert gpu.taints == (("nvidia.com/gpu", "present", "NoSchedule"),)
    assert p3.allocatable[NVIDIA_GPU] == 1000  # p3.2xlarge: one V100, from the bundled catalogue
    assert p3.labels["topology.kubernetes.io/region"] == "us-west-2"


def test_instance_types_are_asked_once_per_container(
    adapter: AwsAdapter, clients: AwsClients, two_regions: dict[str, Any]
) -> None:
    east = count_calls(clients.ec2("us-east-1"), "DescribeInstanceTypes")
    west = count_calls(clients.ec2("us-west-2"), "DescribeInstanceTypes")

    adapter.node_groups(RESERVE, NOW)
    first = (len(east), len(west))
    adapter.node_groups(RESERVE, NOW)

    assert first[0] == 1  # m5.large and g5.xlarge in one call
    assert first[1] >= 1  # p3.2xlarge: refused, remembered as unknown
    assert (len(east), len(west)) == first


def test_a_failing_describe_instance_types_falls_back_to_the_bundled_catalogue(
    adapter: AwsAdapter, clients: AwsClients, two_regions: dict[str, Any]
) -> None:
    def refuse(params: dict[str, Any]) -> dict[str, Any]:
        return {
            "Error": {"Code": "UnauthorizedOperation", "Message": "not allowed"},
            "ResponseMetadata": {"HTTPStatusCode": 403},
        }

    answer(clients.ec2("us-east-1"), "DescribeInstanceTypes", refuse)

    by_name = {g.name: g for g in adapter.node_groups(RESERVE, NOW)}

    gpu = by_name["gpu"].template
    assert gpu is not None and gpu.allocatable[NVIDIA_GPU] == 1000


# --- scaling activities ----------------------------------------------------------------------------


def test_recent_launch_failures_reach_the_node_group(
    adapter: AwsAdapter, clients: AwsClients, two_regions: dict[str, Any]
) -> None:
    def respond(params: dict[str, Any]) -> dict[str, Any]:
        if params["AutoScalingGroupName"] == "gpu":
            return {"Activities": [activity("gpu", 2, failed=True), activity("gpu", 50, failed=True, n=1)]}
        return {"Activities": [activity(params["AutoScalingGroupName"], 1)]}

    answer(clients.autoscaling("us-east-1"), "DescribeScalingActivities", respond)

    by_name = {g.name: g for g in adapter.node_groups(RESERVE, NOW)}

    failures = by_name["gpu"].launch_failures
    assert len(failures) == 1  # the one 50 minutes ago is outside the 30-minute window
    assert "InsufficientInstanceCapacity" in failures[0].message
    assert by_name["general"].launch_failures == ()


def test_activities_are_paged_until_older_than_the_window(adapter: AwsAdapter, clients: AwsClients) -> None:
    pages = {
        None: {"Activities": [activity("g", 1, n=1), activity("g", 3, n=2)], "NextToken": "p2"},
        "p2": {"Activities": [activity("g", 10, n=3), activity("g", 45, n=4)], "NextToken": "p3"},
        "p3": {"Activities": [activity("g", 50, n=5)]},
    }
    seen: list[str | None] = []

    def respond(params: dict[str, Any]) -> dict[str, Any]:
        seen.append(params.get("NextToken"))
        return pages[params.get("NextToken")]

    answer(clients.autoscaling("us-east-1"), "DescribeScalingActivities", respond)

    got = adapter.describe_activities("us-east-1", "g", NOW)

    assert [a.ActivityId for a in got] == ["act-g-1", "act-g-2", "act-g-3"]
    assert seen == [None, "p2"]  # stopped at the first activity older than 30 minutes


def test_an_old_activity_in_progress_does_not_hide_the_recent_failures_behind_it(
    adapter: AwsAdapter, clients: AwsClients
) -> None:
    """AWS lists the activities still in progress first. A terminate waiting 40 minutes on its lifecycle
    hook ended the read at once: the two capacity failures behind it were never seen, so the group never
    backed off and nothing spilled over. (Found by review.)"""
    waiting = activity("g", 40, n=0) | {"StatusCode": "WaitingForTerminateLifecycleAction", "Progress": 50}
    del waiting["EndTime"]
    launching = activity("g", 1, n=3) | {"StatusCode": "InProgress"}
    del launching["EndTime"]
    page = {"Activities": [waiting, launching, activity("g", 2, failed=True, n=1), activity("g", 50, n=2)]}
    answer(clients.autoscaling("us-east-1"), "DescribeScalingActivities", lambda params: page)

    got = adapter.describe_activities("us-east-1", "g", NOW)

    # the recent one in progress, then the ended ones within the window; the old waiting one is passed over
    assert [a.ActivityId for a in got] == ["act-g-3", "act-g-1"]


def test_activities_stop_after_max_items(adapter: AwsAdapter, clients: AwsClients) -> None:
    answer(
        clients.autoscaling("us-east-1"),
        "DescribeScalingActivities",
        lambda params: {"Activities": [activity("g", i / 10, n=i) for i in range(10)], "NextToken": "more"},
    )

    assert len(adapter.describe_activities("us-east-1", "g", NOW)) == 5


def test_activities_parse_from_sdk_datetimes_and_cli_strings() -> None:
    sdk = activity("g", 1)
    cli = {**sdk, "StartTime": "2026-03-02T09:00:00.123Z", "EndTime": "2026-03-02T09:00:30+00:00"}

    assert ScalingActivity.model_validate(sdk).StartTime == sdk["StartTime"]
    assert ScalingActivity.model_validate(cli).StartTime == datetime(2026, 3, 2, 9, 0, 0, 123000, tzinfo=UTC)


# --- writes ----------------------------------------------------------------------------------------


def test_set_desired_capacity_within_limits(adapter: AwsAdapter, two_regions: dict[str, Any]) -> None:
    previous = adapter.set_desired_capacity("us-east-1", "general", 5)

    assert previous == 2
    assert adapter.describe_group("us-east-1", "general").DesiredCapacity == 5


def test_set_desired_capacity_above_max_is_refused_before_asking_aws(
    adapter: AwsAdapter, clients: AwsClients, two_regions: dict[str, Any]
) -> None:
    calls = count_calls(clients.autoscaling("us-east-1"), "SetDesiredCapacity")

    with pytest.raises(AsgLimitExceeded, match=r"21 outside \[0, 20\]"):
        adapter.set_desired_capacity("us-east-1", "general", 21)
    with pytest.raises(AsgLimitExceeded):
        adapter.set_desired_capacity("us-east-1", "general", -1)

    assert calls == []
    group = adapter.describe_group("us-east-1", "general")
    assert (group.DesiredCapacity, len(group.Instances)) == (2, 2)


def test_set_desired_capacity_of_an_unknown_group(adapter: AwsAdapter, moto_aws: None) -> None:
    with pytest.raises(AsgNotFound, match="us-west-2/nope"):
        adapter.set_desired_capacity("us-west-2", "nope", 1)


def test_terminate_instance_decrements_the_group(adapter: AwsAdapter, two_regions: dict[str, Any]) -> None:
    victim = two_regions["general"]["Instances"][0]["InstanceId"]

    result = adapter.terminate_instance("us-east-1", victim, decrement=True)

    group = adapter.describe_group("us-east-1", "general")
    assert victim in result.Description
    assert group.DesiredCapacity == 1
    assert victim not in {i.InstanceId for i in group.Instances}


def test_terminate_refused_at_min_size_becomes_asg_limit_exceeded(
    adapter: AwsAdapter, clients: AwsClients, two_regions: dict[str, Any]
) -> None:
    """AWS's ValidationError when the decrement would take the group below MinSize: a drain of an
    instance leaving anyway tells it from any other failure (it then terminates without decrementing)."""
    victim = two_regions["general"]["Instances"][0]["InstanceId"]
    message = (
        "Currently, desiredSize equals minSize (2). Terminating instance without replacement will violate "
        "group's min size constraint. Either set shouldDecrementDesiredCapacity flag to false or lower "
        "group's min size."
    )
    answer_invalid(clients.autoscaling("us-east-1"), "TerminateInstanceInAutoScalingGroup", message)

    with pytest.raises(AsgLimitExceeded, match=f"{victim}.*min size constraint"):
        adapter.terminate_instance("us-east-1", victim, decrement=True)


# --- errors ----------------------------------------------------------------------------------------


def test_throttling_becomes_aws_throttled(moto_aws: None) -> None:
    clients = AwsClients(["us-east-1"], boto3.Session())
    adapter = AwsAdapter(clients, "prod")
    with Stubber(clients.autoscaling("us-east-1")) as stub:
        stub.add_client_error(
            "describe_auto_scaling_groups",
            service_error_code="Throttling",
            service_message="Rate exceeded",
            http_status_code=400,
        )
        with pytest.raises(AwsThrottled, match="Rate exceeded") as caught:
            adapter.describe_groups("us-east-1")

    assert isinstance(caught.value.__cause__, ClientError)


def test_throttled_write_becomes_aws_throttled(
    adapter: AwsAdapter, clients: AwsClients, two_regions: Any
) -> None:
    answer(
        clients.autoscaling("us-east-1"),
        "SetDesiredCapacity",
        lambda params: {
            "Error": {"Code": "Throttling", "Message": "Rate exceeded"},
            "ResponseMetadata": {"HTTPStatusCode": 400},
        },
    )

    with pytest.raises(AwsThrottled):
        adapter.set_desired_capacity("us-east-1", "general", 3)


@pytest.mark.parametrize(
    ("desired", "words"),
    [(3, "New SetDesiredCapacity value 3 is above max value 2 for the AutoScalingGroup."),
     (1, "New SetDesiredCapacity value 1 is below min value 2 for the AutoScalingGroup.")],
)  # fmt: skip
def test_a_set_desired_capacity_out_of_bounds_in_aws_own_words_is_asg_limit_exceeded(
    adapter: AwsAdapter, clients: AwsClients, two_regions: Any, desired: int, words: str
) -> None:
    """EC2 Auto Scaling API Reference, SetDesiredCapacity: a value outside [MinSize, MaxSize] is refused
    with a ValidationError, which says "above max value" or "below min value" (it names neither MaxSize
    nor MinSize). The adapter's own check reads the group first, so AWS answers it only when the group's
    bounds or desired capacity moved between that read and the call. It was an AwsError: the state
    machine took the refusal for an error and backed the group off as a failed launch, not "Refused"."""
    answer_invalid(clients.autoscaling("us-east-1"), "SetDesiredCapacity", words)

    with pytest.raises(AsgLimitExceeded, match="value"):
        adapter.set_desired_capacity("us-east-1", "general", desired)


def test_a_set_desired_capacity_of_a_group_pending_delete_is_asg_not_found(
    adapter: AwsAdapter, clients: AwsClients, two_regions: Any
) -> None:
    """Auto Scaling refuses any change to a group being deleted with a ValidationError (HTTP 400) "The
    AutoScaling group may not be modified while it is pending delete". It was a plain AwsError, which the
    scale-up took for a raise AWS refused for good and backed the group off for (the state machine's
    Errored): the group is going away, which the state machine's Refused (a re-plan) answers."""
    answer_invalid(clients.autoscaling("us-east-1"), "SetDesiredCapacity",
                   "The AutoScaling group may not be modified while it is pending delete")  # fmt: skip

    with pytest.raises(AsgNotFound, match="pending delete"):
        adapter.set_desired_capacity("us-east-1", "general", 3)


def test_a_raise_refused_with_resource_contention_is_raised_again_by_the_retry(
    adapter: AwsAdapter, clients: AwsClients, make_asg: Callable[..., Any]
) -> None:
    """EC2 Auto Scaling API Reference, SetDesiredCapacity, Errors: ``ResourceContention`` (HTTP 500)
    "You already have a pending update to an Amazon EC2 Auto Scaling resource": refused, nothing applied;
    it happens precisely while another execution updates the same group. Read as AwsUnavailable (its
    500), raise_once took it for an answer lost, found the other execution's marker in its window, kept
    its own as unsettled, and the state machine's retry raised nothing: the scale-up never happened.
    (Review r24.)"""
    make_asg("us-east-1", "gpu", instance_type="g5.xlarge", desired=0, max_size=8)
    auto = clients.autoscaling("us-east-1")
    ledger = FakeLedger()
    # a gang on the same group raised two minutes ago (its raise is what holds the group busy)
    ledger.claimed[("prod", "raise#gang-a1")] = {"before": 0, "after": 0, "count": 0, "group": "us-east-1/gpu",
                                                 "at": format_time(NOW - timedelta(minutes=2))}  # fmt: skip
    owner = Owner(ledger, "prod", "us-east-1", "gpu", "up-p1-1-us-east-1-gpu")
    original = auto.set_desired_capacity
    refuse(auto, "set_desired_capacity", "ResourceContention", 500)
    with pytest.raises(AwsThrottled, match="ResourceContention"):  # retried by the state machine
        raise_once(adapter, owner, 2, NOW)
    auto.set_desired_capacity = original  # the other update is done

    raise_once(adapter, owner, 2, NOW)  # the state machine retries the step

    assert adapter.describe_group("us-east-1", "gpu").DesiredCapacity == 2


def test_a_terminate_refused_with_resource_contention_is_retried(
    adapter: AwsAdapter, clients: AwsClients, two_regions: dict[str, Any]
) -> None:
    """TerminateInstanceInAutoScalingGroup answers ResourceContention (500) too (API Reference, Errors):
    nothing was terminated, the drain's terminate step retries it (AwsThrottled), as for AttachInstances."""
    victim = two_regions["general"]["Instances"][0]["InstanceId"]
    refuse(
        clients.autoscaling("us-east-1"),
        "terminate_instance_in_auto_scaling_group",
        "ResourceContention",
        500,
    )

    with pytest.raises(AwsThrottled, match="ResourceContention"):
        adapter.terminate_instance("us-east-1", victim, decrement=True)

    assert adapter.describe_group("us-east-1", "general").DesiredCapacity == 2


def test_unreachable_endpoint_becomes_aws_unavailable(adapter: AwsAdapter, clients: AwsClients) -> None:
    def boom(**_: Any) -> None:
        raise EndpointConnectionError(endpoint_url="https://autoscaling.us-east-1.amazonaws.com")

    clients.autoscaling("us-east-1").meta.events.register("before-call.*.DescribeAutoScalingGroups", boom)

    with pytest.raises(AwsUnavailable):
        adapter.describe_groups("us-east-1")


def test_clients_are_built_once_with_adaptive_retries_and_timeouts(clients: AwsClients) -> None:
    first = clients.autoscaling("us-west-2")

    assert clients.autoscaling("us-west-2") is first
    assert clients.autoscaling("us-east-1") is not first
    config = first.meta.config
    assert config.retries == {"mode": "adaptive", "total_max_attempts": 2}
    assert (config.connect_timeout, config.read_timeout) == (1, 2)
    assert first.meta.region_name == "us-west-2"


def test_subnet_zones_reads_each_subnets_zone_and_an_unknown_subnet_is_a_named_error(
    adapter: AwsAdapter,
) -> None:
    ec2 = boto3.client("ec2", region_name="us-east-1")
    vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    a = ec2.create_subnet(VpcId=vpc, CidrBlock="10.9.1.0/24", AvailabilityZone="us-east-1a")["Subnet"][
        "SubnetId"
    ]
    b = ec2.create_subnet(VpcId=vpc, CidrBlock="10.9.2.0/24", AvailabilityZone="us-east-1b")["Subnet"][
        "SubnetId"
    ]

    assert adapter.subnet_zones("us-east-1", [a, b]) == {a: "us-east-1a", b: "us-east-1b"}
    assert adapter.subnet_zones("us-east-1", []) == {}
    with pytest.raises(AwsError, match="DescribeSubnets"):
        adapter.subnet_zones("us-east-1", ["subnet-0000000000000dead"])


def test_instance_states_of_ids_ec2_does_not_show_yet_leaves_them_out(moto_aws: None) -> None:
    """DescribeInstances given an id it does not know yet (just launched: eventual consistency) as
    InstanceIds fails the whole call with InvalidInstanceID.NotFound; the adapter asks through an
    instance-id filter, which leaves that id out and answers for the others."""
    clients = AwsClients(
        REGIONS, boto3.Session(), AwsSettings(max_attempts=2, connect_timeout=1, read_timeout=2)
    )
    ec2 = boto3.client("ec2", region_name="us-east-1")
    image = ec2.describe_images()["Images"][0]["ImageId"]
    known = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
    adapter = AwsAdapter(clients, "prod")

    states = adapter.instance_states("us-east-1", [known, "i-0123456789abcdef0"])

    assert states == {known: "running"}


def test_the_dns_names_of_instances_ec2_does_not_show_yet_leave_them_out(moto_aws: None) -> None:
    """A scale-up's back-off looks up the Nodes of its own instances, Pending ones too, which its group
    may have launched a moment ago: DescribeInstances given such an id as InstanceIds fails the whole
    call (InvalidInstanceID.NotFound, EC2's eventual consistency), so the give-back failed; through an
    instance-id filter that id is left out (no Node yet) and the others are answered."""
    clients = AwsClients(
        REGIONS, boto3.Session(), AwsSettings(max_attempts=2, connect_timeout=1, read_timeout=2)
    )
    ec2 = boto3.client("ec2", region_name="us-east-1")
    image = ec2.describe_images()["Images"][0]["ImageId"]
    known = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1)["Instances"][0]
    adapter = AwsAdapter(clients, "prod")

    names = adapter.private_dns_names("us-east-1", [known["InstanceId"], "i-0123456789abcdef0"])

    assert names == {known["InstanceId"]: known["PrivateDnsName"]}


# --- gang launches (act/gang.py) ----------------------------------------------------------------------


def test_observe_reads_suspended_processes_and_a_fleet_group_rebalancing_two_zones_is_off(
    adapter: AwsAdapter, make_asg: Callable[..., Any]
) -> None:
    """DescribeAutoScalingGroups' SuspendedProcesses reach the group: a fleet-tagged group spanning two
    zones with AZRebalance active (which would terminate a gang packed into one zone) is read as off
    with the reason; suspending the process makes it a fleet group."""
    make_asg(
        "us-east-1", "gang", instance_type="g5.xlarge", desired=0, tags={"spillway.io/atomic-launch": "fleet"}
    )
    autoscaling = boto3.client("autoscaling", region_name="us-east-1")
    autoscaling.update_auto_scaling_group(
        AutoScalingGroupName="gang", AvailabilityZones=["us-east-1a", "us-east-1b"]
    )

    def gang() -> Any:
        return next(g for g in adapter.node_groups(RESERVE, NOW) if g.name == "gang")

    assert adapter.describe_group("us-east-1", "gang").SuspendedProcesses == []
    assert (
        gang().atomic_launch == "off"
        and "AZRebalance is not in its SuspendedProcesses" in gang().atomic_launch_problem
    )
    autoscaling.suspend_processes(AutoScalingGroupName="gang", ScalingProcesses=["AZRebalance"])
    assert adapter.describe_group("us-east-1", "gang").suspended("AZRebalance")
    assert gang().atomic_launch == "fleet" and gang().atomic_launch_problem == ""


def test_a_spot_gang_fleet_request_is_accepted_and_launches_spot_instances(
    adapter: AwsAdapter, make_asg: Callable[..., Any]
) -> None:
    """The Spot form of the gang's CreateFleet passes the SDK's validation of EC2's API and moto launches
    Spot instances from it."""
    make_asg("us-east-1", "gang", instance_type="g5.xlarge", desired=0)
    request = FleetRequest(
        launch_template={"LaunchTemplateName": "lt-gang", "Version": "$Latest"}, count=2, client_token="spillway-t",
        instance_type="g5.xlarge", zones=("us-east-1a",), tags={"spillway.io/cluster": "prod"},
        capacity_type="spot", spot_allocation_strategy="price-capacity-optimized",
    )  # fmt: skip

    result = adapter.create_fleet_instant("us-east-1", request)

    assert len(result.instance_ids) == 2
    described = boto3.client("ec2", region_name="us-east-1").describe_instances(
        InstanceIds=result.instance_ids
    )
    assert [i.get("InstanceLifecycle") for r in described["Reservations"] for i in r["Instances"]] == [
        "spot"
    ] * 2


def test_zone_ids_are_what_ec2_names_each_zone_of_the_region_in_this_account(adapter: AwsAdapter) -> None:
    """A zone's name maps to another id in each account (moto's us-east-1a is use1-az6); EC2's
    DescribeAvailabilityZones says which, once per call for the whole region."""
    ec2 = adapter._clients.ec2("us-east-1")
    seen = count_calls(ec2, "DescribeAvailabilityZones")

    ids = adapter.zone_ids_in("us-east-1")

    assert ids["us-east-1a"] == "use1-az6" and ids["us-east-1b"] == "use1-az1"
    assert all(zone.startswith("us-east-1") and i.startswith("use1-az") for zone, i in ids.items())
    assert len(seen) == 1
    assert adapter.zone_ids_in("us-west-2")["us-west-2a"] == "usw2-az2"


@pytest.mark.parametrize(
    ("code", "status", "error"),
    [("UnauthorizedOperation", 403, AwsError), ("RequestLimitExceeded", 503, AwsThrottled)],
)
def test_zone_ids_refused_or_throttled_is_one_of_our_errors_naming_the_call_and_region(
    adapter: AwsAdapter, code: str, status: int, error: type[AwsError]
) -> None:
    refuse(adapter._clients.ec2("us-west-2"), "describe_availability_zones", code, status)

    with pytest.raises(error, match=rf"DescribeAvailabilityZones\(us-west-2\): {code}"):
        adapter.zone_ids_in("us-west-2")


def test_zone_ids_are_asked_of_ec2_until_it_answers_then_kept(adapter: AwsAdapter) -> None:
    """An account's zone names never change ids: once EC2 has answered, observe's later asks cost no
    call (and a call failing on and off no longer flips the snapshot's groups between with and without
    ids, each flip a write and a plan). A refused call is asked again."""
    ec2 = adapter._clients.ec2("us-west-2")
    refused = refuse(ec2, "describe_availability_zones", "RequestLimitExceeded", 503)
    with pytest.raises(AwsThrottled):
        adapter.zone_ids_in("us-west-2")
    del ec2.describe_availability_zones  # EC2 answers again
    seen = count_calls(ec2, "DescribeAvailabilityZones")

    first = adapter.zone_ids_in("us-west-2")
    first["us-west-2a"] = "changed by the caller"
    again = adapter.zone_ids_in("us-west-2")

    assert len(refused) == 1 and len(seen) == 1
    assert again["us-west-2a"] == "usw2-az2"


# --- DescribeInstanceStatus: an instance's scheduled events ------------------------------------------


def test_scheduled_events_of_an_instance_moto_runs_are_none(
    adapter: AwsAdapter, two_regions: dict[str, Any]
) -> None:
    """moto models no scheduled events: DescribeInstanceStatus lists its instances with no ``Events``
    (moto/ec2/responses/instances.py, describe_instance_status). The adapter reads that as none."""
    instance = boto3.client("autoscaling", region_name="us-east-1").describe_auto_scaling_groups(
        AutoScalingGroupNames=["general"]
    )["AutoScalingGroups"][0]["Instances"][0]["InstanceId"]
    assert adapter.scheduled_events("us-east-1", instance) == []


def test_scheduled_events_are_read_as_ec2_describes_them(adapter: AwsAdapter, clients: AwsClients) -> None:
    """The parameters sent (the one instance; IncludeAllInstances, so that a stopped instance answers)
    and InstanceStatusEvent read field by field (EC2 API reference): a canceled or completed event is
    still listed, its Description prefixed "[Canceled]" / "[Completed]", and is not live."""
    instance = "i-0a1b2c3d4e5f60718"
    start = datetime(2026, 11, 3, 10, 5, tzinfo=UTC)
    events = [
        {"InstanceEventId": "instance-event-1", "Code": "instance-retirement",
         "Description": "The instance is running on degraded hardware", "NotBefore": start,
         "NotAfter": start + timedelta(days=1), "NotBeforeDeadline": start + timedelta(days=14)},
        {"InstanceEventId": "instance-event-2", "Code": "system-reboot",
         "Description": "[Canceled] scheduled reboot", "NotBefore": start},
    ]  # fmt: skip
    with Stubber(clients.ec2("us-east-1")) as stub:
        stub.add_response(
            "describe_instance_status",
            {"InstanceStatuses": [{"InstanceId": instance, "Events": events}]},
            {"InstanceIds": [instance], "IncludeAllInstances": True},
        )
        stub.add_client_error(
            "describe_instance_status", service_error_code="InvalidInstanceID.NotFound",
            service_message=f"The instance ID '{instance}' does not exist", http_status_code=400,
        )  # fmt: skip
        stub.add_client_error(
            "describe_instance_status", service_error_code="RequestLimitExceeded",
            service_message="Request limit exceeded.", http_status_code=503,
        )  # fmt: skip
        retirement, reboot = adapter.scheduled_events("us-east-1", instance)
        gone = adapter.scheduled_events("us-east-1", instance)
        with pytest.raises(AwsThrottled, match="DescribeInstanceStatus"):
            adapter.scheduled_events("us-east-1", instance)

    assert (retirement.event_id, retirement.code, retirement.live) == (
        "instance-event-1",
        "instance-retirement",
        True,
    )
    assert (retirement.not_before, retirement.deadline) == (start, start + timedelta(days=14))
    assert (reboot.code, reboot.live, reboot.not_after) == ("system-reboot", False, None)
    assert gone == []
