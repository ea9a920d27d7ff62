"""Capacity by the clock, found by review: cron day-of-week steps and scheduled floors of suspended groups."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

from plan_world import World

from spillway.config import DisruptionBudget
from spillway.model.schedule import Cron, ScheduledFloor
from spillway.planner import codes, plan


def test_day_of_week_step_from_a_day_stops_at_saturday_as_robfig_cron() -> None:
    """A day-of-week ``N/step`` means ``N-max/step``, and robfig/cron, which reads Karpenter's budget
    schedules (``cron.ParseStandard``), bounds the day of week 0-6 (robfig/cron v3 spec.go ``dow =
    bounds{0, 6, ...}``; parser.go ``getRange``: "if singleDigit { end = r.max }"). So ``1/2`` is
    Monday, Wednesday and Friday. Spillway stepped to 7 and folded 7 into Sunday: a budget
    ``schedule: "0 0 * * 1/2"``, ``duration: 24h``, ``nodes: 0`` (no disruption on those days) also
    froze every Sunday, which Karpenter does not (and ``3/4``, Wednesday only there, froze Sundays too)."""
    sunday = date(2026, 3, 8)
    assert sunday.isoweekday() == 7
    assert not Cron.parse("0 0 * * 1/2").on(sunday)
    assert not Cron.parse("0 0 * * mon/2").on(sunday)
    assert not Cron.parse("0 0 * * 3/4").on(sunday)
    assert Cron.parse("0 0 * * 1/2").on(date(2026, 3, 6))  # a Friday
    assert Cron.parse("0 0 * * */2").on(sunday)  # 0, 2, 4, 6: Sunday is one
    assert Cron.parse("0 0 * * 0/3").on(sunday)  # 0, 3, 6
    assert Cron.parse("0 0 * * 7").on(sunday)  # 7 written out is still Sunday (Vixie cron)

    freeze = DisruptionBudget(nodes="0", schedule="0 0 * * 1/2", duration="24h")
    noon = datetime(2026, 3, 8, 12, tzinfo=UTC)
    assert not freeze.active_at(noon)
    assert freeze.active_at(noon - timedelta(days=2))  # Friday noon
    assert freeze.next_edge(noon) == datetime(2026, 3, 9, tzinfo=UTC)  # Monday 00:00


def test_no_scheduled_floor_while_the_groups_scheduled_actions_process_is_suspended() -> None:
    """EC2 Auto Scaling User Guide, "Suspend and resume Amazon EC2 Auto Scaling processes": the
    ScheduledActions process "performs the scheduled scaling actions"; suspended, Auto Scaling runs none
    of them (the page's use: troubleshoot "without interference from scaling policies or scheduled
    actions"), so an action due within the idle threshold sets no MinSize, and nothing would launch a
    drained node again. Spillway still kept idle nodes at the action's MinSize (``scheduled-min``) and
    reported a floor that will not come, paying for them until the suspension ends. With the process
    running, the floor holds as before."""
    world = World()
    nodes = world.group("web", "m5.2xlarge", nodes=4)
    morning = datetime.fromisoformat("2026-11-03T06:55:00+00:00")  # Tuesday 07:55 Berlin
    for node in nodes:
        world.state["nodes"][node] = {"idle_since": (morning - timedelta(hours=1)).isoformat()}
    day = ScheduledFloor("day", min_size=2, recurrence="0 8 * * mon-fri", timezone="Europe/Berlin")
    snapshot, groups, cfg, state = world.parsed(max_scale_in_fraction=1.0)

    running = [replace(g, scheduled=(day,)) for g in groups]
    held = plan(snapshot, running, cfg, state, morning)
    assert len(held.drain) == 2 and held.floors

    suspended = (("ScheduledActions", "User suspended at 2026-11-02T10:00:00Z"),)
    paused = [replace(g, scheduled=(day,), suspended=suspended) for g in groups]
    result = plan(snapshot, paused, cfg, state, morning)
    assert codes.SCHEDULED_MIN not in {k.code for k in result.kept}
    assert len(result.drain) == 4 and not result.floors
