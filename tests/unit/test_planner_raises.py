"""Raises under way (``State.raises``): a scale-up raises its group relative to the live desired
capacity, so a later plan of a snapshot taken before the raise landed must not add the same pods again."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from plan_world import NOW, World, pending_codes, scale_up

from spillway.model.nodegroup import NodeGroup

BIG = {"cpu": "5", "memory": "4Gi"}  # one per m5.2xlarge


def burst() -> tuple[World, list[str]]:
    w = World()
    w.group("cpu-east", "m5.2xlarge", max_size=10)
    return w, w.pods("web", 3, **BIG)


def test_a_scale_up_records_the_desired_capacity_it_raises_to() -> None:
    w, _ = burst()
    result = w.plan()
    assert scale_up(result)["cpu-east"][:2] == (0, 3)
    entry = result.state.raises["us-east-1/cpu-east"]
    assert (entry.to, entry.since) == (3, NOW)
    assert result.state.to_wire()["raises"] == {
        "us-east-1/cpu-east": {
            "to": 3,
            "since": "2026-11-02T12:00:00Z",
            "group": "cpu-east",
            "region": "us-east-1",
        }
    }


def test_a_stale_snapshot_planned_after_the_raise_adds_nothing_again() -> None:
    w, pods = burst()
    w.state = w.plan().state.to_wire()  # the same snapshot's world: desired still 0

    again = w.plan(now=NOW + timedelta(seconds=40))

    assert again.scale_up == ()
    assert {pending_codes(again)[p] for p in pods} == {"fits-launching"}
    assert again.state.raises["us-east-1/cpu-east"].since == NOW  # still under way, from the first plan


def test_more_pods_since_then_add_only_their_own_nodes_on_top_of_the_raise() -> None:
    w, _ = burst()
    w.state = w.plan().state.to_wire()
    w.pods("api", 2, **BIG)

    again = w.plan(now=NOW + timedelta(seconds=40))

    assert scale_up(again)["cpu-east"][:2] == (3, 5)  # from the raised value: +2, not +5
    assert again.state.raises["us-east-1/cpu-east"].to == 5


def test_the_entry_ends_when_a_snapshot_shows_the_raise() -> None:
    w, _ = burst()
    w.state = w.plan().state.to_wire()
    w.groups["cpu-east"]["DesiredCapacity"] = 3  # the raise landed; instances still booting

    again = w.plan(now=NOW + timedelta(seconds=40))

    assert again.scale_up == () and "us-east-1/cpu-east" not in again.state.raises


def test_past_the_window_a_raise_that_never_showed_is_planned_again() -> None:
    w, _ = burst()
    w.state = w.plan().state.to_wire()

    later = w.plan(now=NOW + timedelta(minutes=5))
    assert scale_up(later)["cpu-east"][:2] == (0, 3)
    shorter = w.plan(now=NOW + timedelta(minutes=2), scale_up_claim_minutes=1)
    assert scale_up(shorter)["cpu-east"][:2] == (0, 3)


def test_a_backed_off_group_has_no_raise_under_way_and_its_pods_go_elsewhere() -> None:
    w, _ = burst()
    w.group("cpu-west", "m5.2xlarge", region="us-west-2", max_size=10)
    w.state = w.plan().state.to_wire()
    w.state["groups"]["cpu-east"] = {"backoff_until": (NOW + timedelta(minutes=15)).isoformat(),
                                     "reason": "InsufficientInstanceCapacity"}  # fmt: skip

    again = w.plan(now=NOW + timedelta(seconds=40))

    assert scale_up(again)["cpu-west"][:2] == (0, 3) and "us-east-1/cpu-east" not in again.state.raises


def raised_three_minutes_ago() -> tuple[World, list[str]]:
    """cpu-east at DesiredCapacity 1, three pending pods of a node each, and the raise to 3 that the
    plan of three minutes ago made (the snapshot does not show it yet)."""
    w = World()
    w.group("cpu-east", "m5.2xlarge", max_size=10, desired=1)
    pods = w.pods("web", 3, **BIG)
    w.state["raises"] = {
        "us-east-1/cpu-east": {
            "to": 3,
            "since": (NOW - timedelta(minutes=3)).isoformat(),
            "group": "cpu-east",
            "region": "us-east-1",
        }
    }
    return w, pods


def test_a_scheduled_action_that_set_the_groups_size_since_the_raise_ends_it() -> None:
    """A raise to 3 three minutes ago; at 11:59 a recurring scheduled action set DesiredCapacity 1, which
    the snapshot shows. Auto Scaling set the size over the raise, so the nodes the raise asked for are
    not coming: they are planned again instead of counted as launching until the window ends. An action
    that did not run since leaves the raise under way."""
    from dataclasses import replace

    from spillway.model.schedule import ScheduledFloor
    from spillway.planner import plan

    w, pods = raised_three_minutes_ago()

    def planned(action: ScheduledFloor) -> Any:
        snapshot, groups, cfg, state = w.parsed()
        groups = [replace(g, scheduled=(action,)) for g in groups]
        return plan(snapshot, groups, cfg, state, NOW)

    ran = planned(ScheduledFloor("shrink", desired=1, recurrence="59 11 * * *"))
    assert scale_up(ran)["cpu-east"][:2] == (1, 3)
    assert len(scale_up(ran)["cpu-east"][2]) == 2  # the third fits the one instance launching

    not_yet = planned(ScheduledFloor("shrink", desired=1, recurrence="0 3 * * *"))
    assert not_yet.scale_up == ()
    assert {pending_codes(not_yet)[p] for p in pods} == {"fits-launching"}


def test_a_scheduled_action_that_sets_max_size_above_the_raise_leaves_it_under_way() -> None:
    """A raise to 3 three minutes ago that the snapshot does not show yet (desired 1); at 11:59 a
    recurring action set MaxSize 10 (and MinSize 0), as a daily schedule that only moves the limits
    does. A MaxSize above the desired capacity changes no size (Auto Scaling sets the sizes an action
    names: "Scheduled scaling"), so the raise's nodes are still coming. Ended, the plan raised the group
    again for the same pods, and the scale-up step raises relative to the live desired capacity: two
    more nodes paid for and idle. Nor does a DesiredCapacity above the raise end it."""
    from dataclasses import replace

    from spillway.model.schedule import ScheduledFloor
    from spillway.planner import plan

    w, pods = raised_three_minutes_ago()
    for action in (
        ScheduledFloor("limits", min_size=0, max_size=10, recurrence="59 11 * * *"),
        ScheduledFloor("morning", desired=4, recurrence="59 11 * * *"),
    ):
        snapshot, groups, cfg, state = w.parsed()
        groups = [replace(g, scheduled=(action,)) for g in groups]
        result = plan(snapshot, groups, cfg, state, NOW)

        assert result.scale_up == (), action
        assert {pending_codes(result)[p] for p in pods} == {"fits-launching"}


def test_a_scheduled_action_auto_scaling_refuses_leaves_the_raise_under_way() -> None:
    """A raise to 3 three minutes ago that the snapshot does not show yet; at 11:59 a recurring action
    set DesiredCapacity 0 on a group of MinSize 1. Auto Scaling refuses a desired capacity below the
    MinSize in force (EC2 Auto Scaling User Guide, "Set scaling limits" and "Scheduled scaling"), so the
    run changed no size and the raise's nodes are still coming. It was read as a cut: the raise ended
    and the plan raised the group again for the same pods, two more nodes paid for."""
    from dataclasses import replace

    from spillway.model.schedule import ScheduledFloor
    from spillway.planner import plan

    w, pods = raised_three_minutes_ago()
    snapshot, groups, cfg, state = w.parsed()
    refused = ScheduledFloor("night", desired=0, recurrence="59 11 * * *")
    groups = [replace(g, scheduled=(refused,), min_size=1) for g in groups]
    result = plan(snapshot, groups, cfg, state, NOW)

    assert result.scale_up == ()
    assert {pending_codes(result)[p] for p in pods} == {"fits-launching"}


def _terminate_for_schedule(w: World, at_minutes_ago: float, change: tuple[int, int]) -> None:
    """The activity Auto Scaling writes for an instance a scheduled action scaled in: its Cause names
    the action's update and the change of desired capacity (AWS Knowledge Center, "Why did my Auto
    Scaling group scale down?": "At <time> a scheduled action update of AutoScalingGroup constraints
    to min: ..., changing the desired capacity from ... to ...")."""
    group = w.groups["cpu-east"]
    at = (NOW - timedelta(minutes=at_minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    w.activities.append(
        {
            "ActivityId": f"act-cut-{at_minutes_ago}",
            "AutoScalingGroupName": "cpu-east",
            "AutoScalingGroupARN": group["AutoScalingGroupARN"],
            "Description": "Terminating EC2 instance: i-0cut",
            "Cause": f"At {at} a scheduled action update of AutoScalingGroup constraints to min: 0, max: 10, "
            f"desired: {change[1]} changing the desired capacity from {change[0]} to {change[1]}.  At {at} an "
            "instance was taken out of service in response to a difference between desired and actual "
            f"capacity, shrinking the capacity from {change[0]} to {change[1]}.",
            "StartTime": at,
            "EndTime": at,
            "StatusCode": "Successful",
        }
    )


def test_a_one_time_action_gone_from_the_snapshot_ends_the_raise_it_cut() -> None:
    """A raise to 3 three minutes ago; at 11:59 a one-time scheduled action set DesiredCapacity 1. A
    one-time action is gone from DescribeScheduledActions once it ran, so the snapshot lists no action,
    but the activity of the instance it scaled in names it. The raise's nodes are not coming: planned
    again rather than counted as launching until the claim window ends (the pods waited for nothing).
    A scheduled cut from before the raise, or one that left the raise's size standing, ends nothing."""

    for when, change in ((4, (3, 1)), (1, (6, 4))):
        w, pods = raised_three_minutes_ago()
        _terminate_for_schedule(w, when, change)
        result = w.plan()
        assert result.scale_up == (), when
        assert {pending_codes(result)[p] for p in pods} == {"fits-launching"}

    w, pods = raised_three_minutes_ago()
    _terminate_for_schedule(w, 1, (3, 1))
    ran = w.plan()

    assert scale_up(ran)["cpu-east"][:2] == (1, 3)
    assert ran.state.raises["us-east-1/cpu-east"].since == NOW  # the new raise, from now
    # one entry for the run, however many instances' activities repeat it; kept in a stored snapshot
    _terminate_for_schedule(w, 1, (3, 1))  # the second instance the run scaled in
    (group,) = w.parsed()[1]
    assert group.scheduled_cuts == ((NOW - timedelta(minutes=1), 1),)
    assert NodeGroup.from_dict(group.to_dict()).scheduled_cuts == group.scheduled_cuts
