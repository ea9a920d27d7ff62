"""The AWS adapter's lifecycle-hook calls: DescribeLifecycleHooks against moto; CompleteLifecycleAction and
RecordLifecycleActionHeartbeat (which moto lacks) with botocore's Stubber: the parameters sent, and each
SDK error translated to the error a state machine matches."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from spillway.adapters.aws import AwsAdapter, AwsClients, AwsSettings
from spillway.errors import AwsError, AwsThrottled, AwsUnavailable, LifecycleActionNotFound
from spillway.local.rig import create_group

TOKEN = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"
INSTANCE = "i-0a1b2c3d4e5f60718"


@pytest.fixture
def clients(moto_aws: None) -> AwsClients:
    return AwsClients(["us-east-1"], boto3.Session(), AwsSettings(max_attempts=1))


@pytest.fixture
def adapter(clients: AwsClients) -> AwsAdapter:
    return AwsAdapter(clients, "prod")


def test_describe_lifecycle_hooks_reads_both_transitions(
    adapter: AwsAdapter, two_regions: dict[str, Any]
) -> None:
    autoscaling = boto3.client("autoscaling", region_name="us-east-1")
    autoscaling.put_lifecycle_hook(
        LifecycleHookName="drain", AutoScalingGroupName="general",
        LifecycleTransition="autoscaling:EC2_INSTANCE_TERMINATING", HeartbeatTimeout=300, DefaultResult="CONTINUE",
    )  # fmt: skip
    autoscaling.put_lifecycle_hook(
        LifecycleHookName="warm-up", AutoScalingGroupName="general",
        LifecycleTransition="autoscaling:EC2_INSTANCE_LAUNCHING",
    )  # fmt: skip
    hooks = {h.name: h for h in adapter.describe_lifecycle_hooks("us-east-1", "general")}
    assert hooks["drain"].terminating and hooks["drain"].heartbeat_timeout == 300
    assert hooks["drain"].default_result == "CONTINUE"
    assert not hooks["warm-up"].terminating
    assert adapter.describe_lifecycle_hooks("us-east-1", "gpu") == []


def test_complete_sends_the_token_and_the_instance_and_continue(
    adapter: AwsAdapter, clients: AwsClients
) -> None:
    with Stubber(clients.autoscaling("us-east-1")) as stub:
        stub.add_response(
            "complete_lifecycle_action", {},
            {"AutoScalingGroupName": "general", "LifecycleHookName": "drain", "LifecycleActionResult": "CONTINUE",
             "InstanceId": INSTANCE, "LifecycleActionToken": TOKEN},
        )  # fmt: skip
        stub.add_response(
            "complete_lifecycle_action", {},
            {"AutoScalingGroupName": "general", "LifecycleHookName": "drain", "LifecycleActionResult": "CONTINUE",
             "InstanceId": INSTANCE},
        )  # fmt: skip
        stub.add_response(
            "record_lifecycle_action_heartbeat", {},
            {"AutoScalingGroupName": "general", "LifecycleHookName": "drain", "InstanceId": INSTANCE,
             "LifecycleActionToken": TOKEN},
        )  # fmt: skip
        adapter.complete_lifecycle_action("us-east-1", "general", "drain", INSTANCE, TOKEN)
        adapter.complete_lifecycle_action("us-east-1", "general", "drain", INSTANCE)  # by instance id
        adapter.record_heartbeat("us-east-1", "general", "drain", INSTANCE, TOKEN)
        stub.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("code", "message", "status", "error"),
    [
        ("ValidationError", f"No active Lifecycle Action found with instance ID {INSTANCE}", 400,
         LifecycleActionNotFound),
        ("ValidationError", f"No active Lifecycle Action found with token {TOKEN}", 400, LifecycleActionNotFound),
        ("Throttling", "Rate exceeded", 400, AwsThrottled),
        ("InternalFailure", "oops", 500, AwsUnavailable),
        ("AccessDenied", "not authorized to perform: autoscaling:CompleteLifecycleAction", 403, AwsError),
    ],
)  # fmt: skip
@pytest.mark.parametrize("operation", ["complete_lifecycle_action", "record_lifecycle_action_heartbeat"])
def test_lifecycle_errors_become_named_errors(
    adapter: AwsAdapter, clients: AwsClients, operation: str, code: str, message: str, status: int,
    error: type[Exception],
) -> None:  # fmt: skip
    with Stubber(clients.autoscaling("us-east-1")) as stub:
        stub.add_client_error(
            operation, service_error_code=code, service_message=message, http_status_code=status
        )
        with pytest.raises(error) as caught:
            if operation == "complete_lifecycle_action":
                adapter.complete_lifecycle_action("us-east-1", "general", "drain", INSTANCE, TOKEN)
            else:
                adapter.record_heartbeat("us-east-1", "general", "drain", INSTANCE, TOKEN)
    assert type(caught.value) is error and message in str(caught.value)


def test_placement_reads_the_group_state_zone_and_type_aws_gives(
    adapter: AwsAdapter, two_regions: dict[str, Any]
) -> None:
    """DescribeAutoScalingInstances (AutoScalingInstanceDetails: AutoScalingGroupName, LifecycleState,
    AvailabilityZone, InstanceType): a Spot warning of an instance with no Node yet backs off the pool
    of this type in this zone."""
    autoscaling = boto3.client("autoscaling", region_name="us-east-1")
    [instance] = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["gpu"])["AutoScalingGroups"][
        0
    ]["Instances"]
    placement = adapter.placement("us-east-1", instance["InstanceId"])
    assert placement is not None
    assert (placement.group, placement.lifecycle_state) == ("gpu", "InService")
    assert (placement.zone, placement.instance_type) == (instance["AvailabilityZone"], "g5.xlarge")
    assert placement.zone.startswith("us-east-1")
    assert adapter.placement("us-east-1", "i-0ffffffffffffffff") is None


def _hook(name: str, transition: str = "autoscaling:EC2_INSTANCE_TERMINATING") -> None:
    boto3.client("autoscaling", region_name="us-east-1").put_lifecycle_hook(
        LifecycleHookName=name, AutoScalingGroupName="batch", LifecycleTransition=transition,
        HeartbeatTimeout=300, DefaultResult="CONTINUE",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("hooks", "flagged"),
    [
        ([], True),
        ([("drain-before-terminate", "autoscaling:EC2_INSTANCE_TERMINATING")], False),
        ([("ship-logs", "autoscaling:EC2_INSTANCE_TERMINATING")], True),  # another team's: no drain
        ([("drain-before-terminate", "autoscaling:EC2_INSTANCE_LAUNCHING")], True),  # not a terminate hook
    ],
    ids=["no-hook", "spillways-hook", "another-hook", "launch-hook"],
)
def test_a_group_over_two_zones_with_spillways_terminate_hook_is_not_flagged_for_az_rebalance(
    adapter: AwsAdapter, moto_aws: None, hooks: list[tuple[str, str]], flagged: bool
) -> None:
    """AZRebalance runs on a group over two zones: observe flagged it in the group's problems, and every
    plan drain of it said Auto Scaling may then terminate a node nobody drained. With Spillway's own
    terminate hook (LIFECYCLE_HOOK_NAMES) on the group, that termination waits in Terminating:Wait and
    the interrupt function drains the node before completing the action: a terminate hook holds every
    termination, automatic or manual, but for a detach, standby or a forced delete (EC2 Auto Scaling
    User Guide, "Amazon EC2 Auto Scaling lifecycle hooks", lifecycle hook availability). Observe reads
    the group's hooks (DescribeLifecycleHooks) and flags it only without such a hook."""
    create_group("batch", instance_type="m5.large", desired=2, zone="ab", mixed=False, cluster="prod")
    for name, transition in hooks:
        _hook(name, transition)

    (group,) = [g for g in adapter.node_groups_in("us-east-1", {}) if g.name == "batch"]

    assert group.zones == ("us-east-1a", "us-east-1b")
    assert group.zone_rebalance is flagged
    assert any("AZRebalance is not suspended" in p for p in group.problems) is flagged


def test_a_group_whose_hooks_cannot_be_read_stays_flagged_and_the_regions_read_goes_on(
    adapter: AwsAdapter, moto_aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flag is advice: a DescribeLifecycleHooks refused (or throttled past its retries) leaves the
    group flagged as before, and fails no observation."""
    create_group("batch", instance_type="m5.large", desired=2, zone="ab", mixed=False, cluster="prod")
    _hook("drain-before-terminate")

    def refused(region: str, group: str) -> list[Any]:
        raise AwsError(f"DescribeLifecycleHooks({region}, {group}): AccessDenied")

    monkeypatch.setattr(adapter, "describe_lifecycle_hooks", refused)
    (group,) = [g for g in adapter.node_groups_in("us-east-1", {}) if g.name == "batch"]
    assert group.zone_rebalance is True


def test_a_one_zone_group_an_action_is_about_to_lower_has_its_terminate_hooks_read(
    adapter: AwsAdapter, moto_aws: None
) -> None:
    """A group in one zone has no AZRebalance to flag, but a scheduled action lowering its desired
    capacity terminates instances at its run: with Spillway's terminate hook on it the hook drains them,
    and the plan needs no drain ahead (planner.schedshrink), so observe reads its hooks too. A group
    whose actions lower nothing (MinSize only) is not asked."""
    create_group("batch", instance_type="m5.large", desired=2, zone="a", mixed=False, cluster="prod")
    create_group("other", instance_type="m5.large", desired=2, zone="a", mixed=False, cluster="prod")
    _hook("drain-before-terminate")
    autoscaling = boto3.client("autoscaling", region_name="us-east-1")
    autoscaling.put_lifecycle_hook(
        LifecycleHookName="drain-before-terminate", AutoScalingGroupName="other",
        LifecycleTransition="autoscaling:EC2_INSTANCE_TERMINATING", HeartbeatTimeout=300,
    )  # fmt: skip
    autoscaling.put_scheduled_update_group_action(
        AutoScalingGroupName="batch", ScheduledActionName="night", Recurrence="0 20 * * *", DesiredCapacity=0,
        MinSize=0,
    )  # fmt: skip
    autoscaling.put_scheduled_update_group_action(
        AutoScalingGroupName="other", ScheduledActionName="day", Recurrence="0 8 * * *", MinSize=1
    )  # fmt: skip

    groups = {g.name: g for g in adapter.node_groups_in("us-east-1", {})}

    assert groups["batch"].drain_hooks == ("drain-before-terminate",)
    assert groups["batch"].zone_rebalance is False
    assert groups["other"].drain_hooks == ()  # not read: nothing it does depends on them
