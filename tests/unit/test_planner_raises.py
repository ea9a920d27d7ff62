"""Raises under way (``State.raises``): a scale-up raises its group relative to the live desired
capacity, so a later plan of a snapshot taken before the raise landed must not add the same pods again."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from plan_world import NOW, World, pending_codes, scale_up

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


def test_a_scheduled_action_that_set_the_groups_size_since_the_raise_ends_it() -> None:
    """A raise to 3 three minutes ago; at 11:59 a recurring scheduled action set DesiredCapacity 1, which
    the snapshot shows. Auto Scaling set the size over the raise, so the nodes the raise asked for are
    not coming: they are planned again instead of counted as launching until the window ends. An action
    that did not run since leaves the raise under way."""
    from dataclasses import replace

    from spillway.model.schedule import ScheduledFloor
    from spillway.planner import plan

    w = World()
    w.group("cpu-east", "m5.2xlarge", max_size=10, desired=1)
    pods = w.pods("web", 3, **BIG)
    since = NOW - timedelta(minutes=3)
    w.state["raises"] = {
        "us-east-1/cpu-east": {
            "to": 3,
            "since": since.isoformat(),
            "group": "cpu-east",
            "region": "us-east-1",
        }
    }

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
    for action in (
        ScheduledFloor("limits", min_size=0, max_size=10, recurrence="59 11 * * *"),
        ScheduledFloor("morning", desired=4, recurrence="59 11 * * *"),
    ):
        snapshot, groups, cfg, state = w.parsed()
        groups = [replace(g, scheduled=(action,)) for g in groups]
        result = plan(snapshot, groups, cfg, state, NOW)

        assert result.scale_up == (), action
        assert {pending_codes(result)[p] for p in pods} == {"fits-launching"}
