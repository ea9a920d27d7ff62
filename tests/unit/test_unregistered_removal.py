"""The scale-down's remove_unregistered step (spillway.act.unregistered) on the Kubernetes API emulator and a
fake Auto Scaling, and how a plan's unregistered instances reach it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fakes import FakeCloud, FakeLedger
from plan_world import NOW

from spillway.act.drain import Drainer, run_action, summarize
from spillway.act.planning import PlanSettings, execution_requests
from spillway.adapters.kube import KubeClient
from spillway.config import PlannerConfig
from spillway.errors import AwsThrottled, InvalidDrainRequest
from spillway.local import objects
from spillway.local.kubeapi import KubeApiServer
from spillway.planner import ScalingPlan
from spillway.planner.types import Drain as PlannedDrain
from spillway.planner.types import Unregistered

CLUSTER = "prod"
LOST, FINE = "i-0a1b2c3d4e5f60718", "i-0a1b2c3d4e5f60719"


@dataclass
class Rig:
    api: KubeApiServer
    cloud: FakeCloud
    drainer: Drainer
    outcomes: list[str]

    def request(self, **changes: Any) -> dict[str, Any]:
        return {
            "cluster": CLUSTER,
            "plan_id": "p-1",
            "instance_id": LOST,
            "group": "gpu",
            "region": "us-east-1",
            "reason": "no Node has joined for it in 15m",
        } | changes

    def set_state(self, instance_id: str, state: str) -> None:
        for instance in self.cloud.groups[("us-east-1", "gpu")]["Instances"]:
            if instance["InstanceId"] == instance_id:
                instance["LifecycleState"] = state


@pytest.fixture
def rig() -> Iterator[Rig]:
    with KubeApiServer() as api:
        kube = KubeClient.for_url(api.url, max_attempts=1, sleep=lambda _: None)
        cloud = FakeCloud()
        cloud.add_group("gpu", [LOST, FINE], desired=2, min_size=0, max_size=4)
        api.add(objects.node(f"node-{FINE}", instance=FINE, zone="us-east-1a"))
        outcomes: list[str] = []
        drainer = Drainer(
            kube,
            cloud,
            ledger=FakeLedger(),
            cluster=CLUSTER,
            regions=["us-east-1", "us-west-2"],
            on_outcome=lambda outcome, _: outcomes.append(outcome),
        )
        yield Rig(api, cloud, drainer, outcomes)
        kube.close()


def _desired(rig: Rig) -> int:
    return int(rig.cloud.groups[("us-east-1", "gpu")]["DesiredCapacity"])


def test_an_instance_still_without_a_node_is_terminated_decrementing_its_group(rig: Rig) -> None:
    line = rig.drainer.remove_unregistered(rig.request())

    assert rig.cloud.terminated() == [("us-east-1", LOST, True)]
    assert _desired(rig) == 1
    assert line["outcome"] == "removed" and line["instance_id"] == LOST and line["node"] is None
    assert "no Node has joined" in line["note"]
    assert rig.outcomes == ["unregistered-removed"]


def test_a_retry_after_the_terminate_finds_it_gone_and_terminates_nothing_more(rig: Rig) -> None:
    rig.drainer.remove_unregistered(rig.request())

    again = rig.drainer.remove_unregistered(rig.request())

    assert again["outcome"] == "gone"
    assert rig.cloud.terminated() == [("us-east-1", LOST, True)]
    assert _desired(rig) == 1


def test_an_instance_already_terminating_is_gone(rig: Rig) -> None:
    rig.set_state(LOST, "Terminating:Wait")

    line = rig.drainer.remove_unregistered(rig.request())

    assert line["outcome"] == "gone" and "Terminating:Wait" in line["note"]
    assert rig.cloud.terminated() == [] and _desired(rig) == 2


def test_an_instance_whose_node_joined_since_the_snapshot_is_left_alone(rig: Rig) -> None:
    rig.api.add(objects.node(f"node-{LOST}", instance=LOST, zone="us-east-1a", ready=False))

    line = rig.drainer.remove_unregistered(rig.request())

    assert line["outcome"] == "joined" and f"node-{LOST}" in line["note"]
    assert rig.cloud.terminated() == [] and _desired(rig) == 2


def test_a_node_of_that_name_on_another_instance_is_not_the_instance_joining(rig: Rig) -> None:
    rig.api.add(objects.node(f"node-{LOST}", instance="i-0fffffffffffffff0", zone="us-east-1a"))

    assert rig.drainer.remove_unregistered(rig.request())["outcome"] == "removed"


def test_a_node_of_that_name_whose_provider_id_names_no_instance_counts_as_joined(rig: Rig) -> None:
    node = objects.node(f"node-{LOST}", instance=LOST, zone="us-east-1a")
    node["spec"]["providerID"] = "kind://docker/ml/node-1"
    rig.api.add(node)

    assert rig.drainer.remove_unregistered(rig.request())["outcome"] == "joined"
    assert rig.cloud.terminated() == []


def test_an_instance_no_longer_in_its_group_is_gone(rig: Rig) -> None:
    line = rig.drainer.remove_unregistered(rig.request(instance_id="i-0123456789abcdef0"))

    assert line["outcome"] == "gone" and "no longer in Auto Scaling group gpu" in line["note"]
    assert rig.cloud.terminated() == []


def test_at_its_min_size_the_group_replaces_the_instance(rig: Rig) -> None:
    rig.cloud.groups[("us-east-1", "gpu")]["MinSize"] = 2  # AWS refuses to decrement below it

    line = rig.drainer.remove_unregistered(rig.request())  # the plan saw it above MinSize: live wins

    assert line["outcome"] == "replaced" and "MinSize 2" in line["note"]
    assert "AWS refused the decrement" in line["note"]
    # the decrement asked first, refused (nothing done), then the termination without it
    assert rig.cloud.terminated() == [("us-east-1", LOST, True), ("us-east-1", LOST, False)]
    assert _desired(rig) == 2


def _read_as(rig: Rig, **stale: int) -> None:
    """The step's DescribeAutoScalingGroups answers the group with ``stale`` fields (eventually consistent:
    an older picture of its sizes, or one a terminate or a scale-up moved since); AWS judges the live."""
    real = rig.cloud.describe_group

    def describe(region: str, group: str) -> Any:
        return real(region, group).model_copy(update=stale)

    rig.cloud.describe_group = describe  # type: ignore[method-assign]


def test_a_read_above_the_min_size_that_aws_finds_at_it_terminates_without_the_decrement(rig: Rig) -> None:
    """The read says desired 2 above MinSize 0; the live group is at its MinSize 2 (raised meanwhile). AWS
    refuses the decrement and does nothing: the instance is terminated without it, not left running
    until a later plan (the refusal failed the step)."""
    rig.cloud.groups[("us-east-1", "gpu")]["MinSize"] = 2
    _read_as(rig, MinSize=0)

    line = rig.drainer.remove_unregistered(rig.request())

    assert line["outcome"] == "replaced" and "the group launches a replacement" in line["note"]
    assert rig.cloud.terminated() == [("us-east-1", LOST, True), ("us-east-1", LOST, False)]
    assert _desired(rig) == 2 and rig.outcomes == ["unregistered-replaced"]


def test_a_read_at_the_min_size_that_the_group_is_above_by_now_decrements_it(rig: Rig) -> None:
    """The read says desired 2 at MinSize 2; the live group's MinSize is 0 (lowered meanwhile). Terminated
    without the decrement on the read's word, the instance's capacity stayed and the group launched a
    replacement nobody asked for (which may not join either)."""
    _read_as(rig, MinSize=2)

    line = rig.drainer.remove_unregistered(rig.request())

    assert line["outcome"] == "removed"
    assert rig.cloud.terminated() == [("us-east-1", LOST, True)] and _desired(rig) == 1


def test_a_plan_that_says_not_to_decrement_is_obeyed(rig: Rig) -> None:
    line = rig.drainer.remove_unregistered(rig.request(decrement=False))

    assert line["outcome"] == "replaced"
    assert rig.cloud.terminated() == [("us-east-1", LOST, False)] and _desired(rig) == 2


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"cluster": "other"}, "cluster"),
        ({"region": "eu-west-1"}, "region"),
        ({"instance_id": "node-1"}, "instance_id"),
        ({"group": ""}, "group"),
        ({"extra": 1}, "extra"),
    ],
)
def test_a_bad_request_is_refused_naming_the_field_and_nothing_is_terminated(
    rig: Rig, changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidDrainRequest) as caught:
        rig.drainer.remove_unregistered(rig.request(**changes))

    assert caught.value.field == field
    assert rig.cloud.terminated() == []


def test_a_group_of_another_cluster_is_refused(rig: Rig) -> None:
    rig.cloud.add_group("theirs", [LOST], desired=1, cluster="other")
    del rig.cloud.groups[("us-east-1", "gpu")]

    with pytest.raises(InvalidDrainRequest, match="not a managed group of cluster 'prod'") as caught:
        rig.drainer.remove_unregistered(rig.request(group="theirs"))

    assert caught.value.field == "group" and rig.cloud.terminated() == []


def test_an_aws_error_is_raised_as_ours_for_the_state_machine_to_retry(rig: Rig) -> None:
    rig.cloud.fail("terminate_instance", AwsThrottled("Rate exceeded"), times=1)

    with pytest.raises(AwsThrottled):
        rig.drainer.remove_unregistered(rig.request())
    assert rig.drainer.remove_unregistered(rig.request())["outcome"] == "removed"


def test_the_step_is_an_action_of_the_drain_function_and_its_line_joins_the_summary(rig: Rig) -> None:
    line = run_action(rig.drainer, {"action": "remove_unregistered", "request": rig.request()})

    summary = summarize(CLUSTER, "p-1", [{"output": line}])  # the Map result, as the ResultSelector makes it

    (entry,) = summary["drains"]
    assert entry["instance_id"] == LOST and entry["outcome"] == "removed" and entry["node"] is None
    assert summary["counts"] == {"removed": 1}


def _plan(*entries: Unregistered, drains: tuple[PlannedDrain, ...] = ()) -> ScalingPlan:
    return ScalingPlan(drain=drains, unregistered=entries)


SETTINGS = PlanSettings(
    PlannerConfig(), scale_down_arn="arn:aws:states:us-east-1:123456789012:stateMachine:down"
)


def test_a_plan_sends_the_instances_it_removes_through_the_scale_down_after_its_drains() -> None:
    removed = Unregistered(LOST, "gpu", "us-east-1", True, "no Node joined")
    replaced = Unregistered(FINE, "gpu", "us-east-1", False, "at MinSize")
    drain = PlannedDrain("node-a", "i-0aaaaaaaaaaaaaaaa", "gpu", "us-east-1", "idle")

    (request,) = execution_requests(
        CLUSTER, "p-1", "k", _plan(removed, replaced, drains=(drain,)), [], SETTINGS, NOW
    )

    items = request.input["drains"]
    assert items[0]["node"] == "node-a"
    assert items[1:] == [
        {"unregistered": True, "instance_id": LOST, "group": "gpu", "region": "us-east-1", "decrement": True,
         "reason": "no Node joined"},
        {"unregistered": True, "instance_id": FINE, "group": "gpu", "region": "us-east-1", "decrement": False,
         "reason": "at MinSize"},
    ]  # fmt: skip


def test_a_plan_without_drains_or_removals_starts_no_scale_down() -> None:
    assert execution_requests(CLUSTER, "p-1", "k", _plan(), [], SETTINGS, NOW) == []


def _suspend_terminate(rig: Rig) -> None:
    """Terminate suspended on the group since the plan (the plan's snapshot showed it running)."""
    rig.cloud.groups[("us-east-1", "gpu")]["SuspendedProcesses"] = [
        {"ProcessName": "Terminate", "SuspensionReason": "User suspended at 2026-01-01T00:00:00Z"}
    ]


def test_an_in_service_instance_is_held_while_its_groups_terminate_process_is_suspended(rig: Rig) -> None:
    """EC2 Auto Scaling User Guide, "Considerations for suspending processes": suspending Terminate applies
    to the InService instances; TerminateInstanceInAutoScalingGroup would not end it (and a decrement
    applied without the termination leaves the group above its desired capacity, scaled in by its
    termination policy once Terminate resumes). Auto Scaling is not asked; the line says why."""
    _suspend_terminate(rig)

    line = rig.drainer.remove_unregistered(rig.request())

    assert rig.cloud.terminated() == [] and _desired(rig) == 2
    assert line["outcome"] == "held" and "Terminate process is suspended" in line["note"]
    assert rig.outcomes == ["unregistered-held"]


def test_a_pending_instance_is_terminated_though_terminate_is_suspended(rig: Rig) -> None:
    """The suspension "does not prevent the termination of instances in other states, such as Pending":
    one stuck in Pending:Wait (a launch lifecycle hook never completed) is terminated as usual."""
    _suspend_terminate(rig)
    rig.set_state(LOST, "Pending:Wait")

    line = rig.drainer.remove_unregistered(rig.request())

    assert line["outcome"] == "removed" and rig.cloud.terminated() == [("us-east-1", LOST, True)]
