"""Launches that never became nodes (spillway.planner.joins): cluster-autoscaler's max-node-provision-time."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from plan_world import NOW, World, pending_codes, scale_up
from pydantic import ValidationError

from spillway.config import PlannerConfig
from spillway.local import objects as o
from spillway.model.state import State
from spillway.planner import ScalingPlan, codes


def _world(*, min_size: int = 0) -> tuple[World, str, list[str]]:
    """Group ``cpu`` with one full node and one instance that has not joined; six pods wait for it
    (three fit a node); group ``spare`` (second choice, another region) can hold them."""
    w = World()
    (full,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10, min_size=min_size)
    w.group("spare", "m5.2xlarge", region="us-west-2", max_size=10)
    w.items.append(_resident(full))
    iid = w.add_instance("cpu", register=False)
    pods = w.pods("batch", 3, cpu="2", memory="4Gi")
    return w, iid, pods


def _resident(node: str) -> dict[str, Any]:
    return o.pod("resident", cpu="7", memory="8Gi", node_name=node)


def _carry(w: World, result: ScalingPlan) -> None:
    """The next plan sees the state this plan committed."""
    w.state = result.state.to_wire()


def test_an_instance_that_has_not_joined_yet_is_capacity_coming_and_its_timer_starts() -> None:
    w, iid, pods = _world()

    result = w.plan()

    assert result.scale_up == ()
    assert {pending_codes(result)[p] for p in pods} == {codes.FITS_LAUNCHING}
    assert result.state.joining[iid].since == NOW
    assert result.unregistered == ()
    assert "us-east-1/cpu" not in result.state.groups


def test_within_max_node_provision_minutes_it_still_counts() -> None:
    w, iid, pods = _world()
    _carry(w, w.plan())

    result = w.plan(NOW + timedelta(minutes=14, seconds=59))

    assert result.scale_up == () and result.unregistered == ()
    assert {pending_codes(result)[p] for p in pods} == {codes.FITS_LAUNCHING}
    assert result.state.joining[iid].since == NOW  # the first sighting is kept, not moved


def test_overdue_instance_is_removed_its_group_backs_off_and_the_pods_go_elsewhere() -> None:
    w, iid, pods = _world()
    _carry(w, w.plan())
    later = NOW + timedelta(minutes=15)

    result = w.plan(later)

    (entry,) = result.unregistered
    assert (entry.instance_id, entry.group, entry.region, entry.decrement) == (iid, "cpu", "us-east-1", True)
    assert "in 15m (" in entry.reason and "max_node_provision_minutes" in entry.reason
    backoff = result.state.groups["us-east-1/cpu"]
    assert backoff.backoff_until == later + timedelta(minutes=15)
    assert iid in backoff.reason
    # the pods no longer wait on it: the backed-off group is skipped, the other one launches
    assert scale_up(result) == {"spare": (0, 1, sorted(pods))}
    assert result.state.joining[iid].since == NOW  # retried by the next plan if the removal fails
    assert result.to_dict()["unregistered"] == [entry.to_dict()]


def test_a_removed_instance_is_not_counted_as_launching_against_the_cluster_totals() -> None:
    """The removal takes the instance off with the decrement: it is neither desired nor launching. A
    group counts its live instances above its desired capacity as launching (the group's own
    replacements, NodeGroup.expected_size), so the removed one, still live in this snapshot, counted
    again once the plan lowered the desired capacity for it: max_nodes_total held the pods back."""
    w, iid, pods = _world()
    _carry(w, w.plan())

    result = w.plan(NOW + timedelta(minutes=15), max_nodes_total=2)

    assert [u.instance_id for u in result.unregistered] == [iid]
    assert scale_up(result) == {"spare": (0, 1, sorted(pods))}


def test_the_removal_counts_against_min_size_for_scale_down() -> None:
    """The group's desired capacity is taken as it is after the removal: an idle node of the group is not
    drained below MinSize on top of it."""
    w = World()
    (idle,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10, min_size=1)
    iid = w.add_instance("cpu", register=False)
    w.idle_since(idle, 60)
    _carry(w, w.plan())
    w.idle_since(idle, 60 + 15)

    result = w.plan(NOW + timedelta(minutes=15))

    assert [(u.instance_id, u.decrement) for u in result.unregistered] == [(iid, True)]
    assert result.drain == ()
    assert {k.node: k.code for k in result.kept}[idle] == codes.MIN_SIZE


def test_at_min_size_the_instance_is_replaced_and_no_longer_capacity_coming() -> None:
    w, iid, pods = _world(min_size=2)  # desired 2 = MinSize: removing it would go below
    _carry(w, w.plan())

    result = w.plan(NOW + timedelta(minutes=20))

    (entry,) = result.unregistered
    assert entry.instance_id == iid and not entry.decrement  # AWS would refuse: the group replaces it
    assert "MinSize 2" in entry.reason and "launches a replacement" in entry.reason
    assert scale_up(result) == {"spare": (0, 1, sorted(pods))}


def test_with_terminate_suspended_an_overdue_instance_is_not_removed_but_no_longer_counted() -> None:
    """Auto Scaling would not terminate it while the group's Terminate process is suspended (EC2 Auto
    Scaling User Guide, "Considerations for suspending processes"): the plan asks for no removal, yet the
    instance is no capacity coming and the group backs off, saying why it stays. (Review r24.)"""
    w, iid, pods = _world()
    w.groups["cpu"]["SuspendedProcesses"] = [{"ProcessName": "Terminate"}]
    _carry(w, w.plan())

    result = w.plan(NOW + timedelta(minutes=15))

    assert result.unregistered == ()
    reason = result.state.groups["us-east-1/cpu"].reason
    assert iid in reason and "not removed: its Terminate process is suspended" in reason
    assert scale_up(result) == {"spare": (0, 1, sorted(pods))}


@pytest.mark.parametrize("lifecycle", ["Pending", "Pending:Wait", "Pending:Proceed"])
def test_with_terminate_suspended_an_overdue_pending_instance_is_removed_all_the_same(lifecycle: str) -> None:
    """The suspension "applies only to instances that are currently in the InService state" and does not
    prevent the termination of instances in other states, such as Pending (EC2 Auto Scaling User Guide,
    "Considerations for suspending processes"): the one rule the removal step follows
    (spillway.model.nodegroup.terminate_holds). An instance a launch lifecycle hook keeps in Pending:Wait,
    whose Node never joins, is removed as in a group whose Terminate runs; it was held, and paid for,
    until the hook's heartbeat ran out."""
    w, iid, pods = _world()
    w.groups["cpu"]["SuspendedProcesses"] = [{"ProcessName": "Terminate"}]
    next(i for i in w.groups["cpu"]["Instances"] if i["InstanceId"] == iid)["LifecycleState"] = lifecycle
    _carry(w, w.plan())

    result = w.plan(NOW + timedelta(minutes=15))

    (entry,) = result.unregistered
    assert entry.instance_id == iid and entry.decrement
    reason = result.state.groups["us-east-1/cpu"].reason
    assert iid in reason and "not removed" not in reason
    assert scale_up(result) == {"spare": (0, 1, sorted(pods))}


def test_an_instance_a_failed_raise_kept_counts_as_launching_only_until_max_node_provision_minutes() -> None:
    """A raise of ``cpu`` failed (a Failed launch activity, the group backed off) and its back-off kept the
    instance Auto Scaling did start, with its desired capacity above it given back but one: the plans
    count the booting instance as capacity launching (groups.launched_only), as cluster-autoscaler's
    upcoming nodes do, and only while no Node has joined for it for max_node_provision_minutes since
    the first plan saw it, as cluster-autoscaler removes an unregistered node after
    --max-node-provision-time (clusterstate, UnregisteredSince: the time it first noticed it). After that
    its pods go elsewhere and it is removed: no pod waits on a node that never joins."""
    w, iid, pods = _world()
    w.groups["cpu"]["DesiredCapacity"] += 1  # one never started, not yet given back
    w.launch_failure("cpu", minutes_ago=0)
    w.state["groups"]["us-east-1/cpu"] = {
        "backoff_until": (NOW + timedelta(minutes=40)).isoformat(),
        "reason": "us-east-1/cpu: launch failed for capacity",
    }
    first = w.plan()
    assert {pending_codes(first)[p] for p in pods} == {codes.FITS_LAUNCHING} and first.scale_up == ()
    _carry(w, first)

    within = w.plan(NOW + timedelta(minutes=14))
    assert {pending_codes(within)[p] for p in pods} == {codes.FITS_LAUNCHING}
    _carry(w, within)

    overdue = w.plan(NOW + timedelta(minutes=15))
    assert [u.instance_id for u in overdue.unregistered] == [iid]
    assert scale_up(overdue) == {"spare": (0, 1, sorted(pods))}


def test_an_instance_that_joins_is_forgotten() -> None:
    w, iid, _ = _world()
    _carry(w, w.plan())
    w.node_for("cpu", iid, "m5.2xlarge")

    result = w.plan(NOW + timedelta(minutes=30))

    assert iid not in result.state.joining
    assert result.unregistered == ()
    assert "us-east-1/cpu" not in result.state.groups


def test_a_node_not_ready_long_after_it_joined_is_not_capacity_coming_but_is_left_alone() -> None:
    w = World()
    (full,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    w.items.append(_resident(full))
    w.add_instance("cpu", register=True, ready=False)  # joined a minute before NOW
    pods = w.pods("batch", 3, cpu="2", memory="4Gi")

    soon = w.plan(NOW + timedelta(minutes=13))
    late = w.plan(NOW + timedelta(minutes=14))

    assert soon.scale_up == ()
    assert {pending_codes(soon)[p] for p in pods} == {codes.FITS_LAUNCHING}
    assert scale_up(late) == {"cpu": (2, 3, sorted(pods))}
    assert late.unregistered == () and "us-east-1/cpu" not in late.state.groups and late.drain == ()


def test_the_limit_is_a_setting() -> None:
    w, iid, _ = _world()
    _carry(w, w.plan())

    assert w.plan(NOW + timedelta(minutes=20), max_node_provision_minutes=30).unregistered == ()
    assert [
        u.instance_id for u in w.plan(NOW + timedelta(minutes=5), max_node_provision_minutes=5).unregistered
    ] == [iid]


@pytest.mark.parametrize("value", [0, -1, float("inf")])
def test_a_limit_that_would_remove_every_launch_is_refused_naming_the_field(value: float) -> None:
    with pytest.raises(ValidationError, match="max_node_provision_minutes"):
        PlannerConfig(max_node_provision_minutes=value)


def test_the_state_keeps_the_timer_on_the_wire() -> None:
    w, iid, _ = _world()
    wire = w.plan().state.to_wire()

    assert wire["joining"] == {iid: {"since": "2026-11-02T12:00:00Z"}}
    assert State.model_validate(wire).joining[iid].since == NOW


def test_an_overdue_join_at_either_end_of_the_times_spillway_plan_takes_plans_without_overflow() -> None:
    """``spillway plan --now`` takes EARLIEST_NOW up to LATEST_NOW (spillway.inputs.parse_now): at both
    ends a plan reaching back (max_node_provision_minutes) and ahead (the back-off) of its time by the
    longest setting allowed, ten years, stays inside the years datetime holds. Near 9999-12-31 the
    back-off overflowed, and at 0001-01-01 the look back did."""
    from spillway.inputs import EARLIEST_NOW, LATEST_NOW
    from spillway.model.options import MAX_MINUTES

    longest = {"max_node_provision_minutes": MAX_MINUTES, "launch_failure_backoff_minutes": MAX_MINUTES,
               "disruption_budgets": [{"nodes": "1", "schedule": "0 9 29 2 *", "duration": f"{MAX_MINUTES // 60}h"}]}  # fmt: skip
    for start, now in (
        (EARLIEST_NOW, EARLIEST_NOW + timedelta(minutes=MAX_MINUTES)),
        (LATEST_NOW - timedelta(minutes=MAX_MINUTES, microseconds=1), LATEST_NOW - timedelta(microseconds=1)),
    ):
        w, iid, _ = _world()
        _carry(w, w.plan(start, **longest))

        result = w.plan(now, **longest)

        assert [u.instance_id for u in result.unregistered] == [iid], now
        assert result.state.groups["us-east-1/cpu"].backoff_until == now + timedelta(minutes=MAX_MINUTES)
