"""model.schedule: the 5-field cron of ASG scheduled actions, in a named zone, and the MinSize floor."""

from __future__ import annotations

from bisect import bisect_right
from datetime import UTC, date, datetime, timedelta
from itertools import pairwise

import pytest

from spillway.local import objects as o
from spillway.model.aws import AutoScalingGroup, ScheduledAction, bundled_instance_types
from spillway.model.nodegroup import build_node_groups
from spillway.model.schedule import (
    Cron,
    ScheduledFloor,
    check_actions,
    cron_runs,
    next_change,
    scheduled_ceiling,
    scheduled_floor,
    zone_of,
)

H = timedelta(hours=1)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "day", "fires"),
    [
        ("0 8 * * 1-5", date(2026, 3, 6), True),  # a Friday
        ("0 8 * * 1-5", date(2026, 3, 7), False),  # a Saturday
        ("0 8 * * sat,sun", date(2026, 3, 8), True),
        ("0 8 * * 7", date(2026, 3, 8), True),  # 7 is Sunday too
        ("0 0 1 jan-mar *", date(2026, 2, 1), True),
        ("0 0 1 jan-mar *", date(2026, 4, 1), False),
        ("0 0 1 * mon", date(2026, 3, 2), True),  # both day fields set: either matches (a Monday)
        ("0 0 1 * mon", date(2026, 3, 1), True),  # the 1st (a Sunday)
        ("0 0 1 * mon", date(2026, 3, 3), False),
        ("0 0 */10 * *", date(2026, 3, 21), True),
        ("0 0 */10 * *", date(2026, 3, 20), False),
        ("0 0 1 * */1", date(2026, 3, 2), False),  # */1 is *: the 1st only, not the 1st or any day
        ("0 0 */1 * mon", date(2026, 3, 3), False),  # Mondays only
    ],
)
def test_cron_days(text: str, day: date, fires: bool) -> None:
    assert Cron.parse(text).on(day) is fires


def test_cron_times_steps_lists_and_ranges() -> None:
    cron = Cron.parse("*/20 8-9,18 * * *")
    assert [t.strftime("%H:%M") for t in cron.times()] == [
        "08:00", "08:20", "08:40", "09:00", "09:20", "09:40", "18:00", "18:20", "18:40",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "same_as"),
    [
        ("0 9 ? * MON-FRI", "0 9 * * mon-fri"),  # Karpenter's and Kubernetes CronJobs' spelling
        ("0 0 1 * ?", "0 0 1 * *"),  # an unrestricted day field: the 1st only, not the 1st or any day
        ("?/15 * * * *", "*/15 * * * *"),
    ],
)
def test_a_question_mark_is_a_star(text: str, same_as: str) -> None:
    assert Cron.parse(text) == Cron.parse(same_as)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("0 8 * *", "5 fields"),
        ("60 8 * * *", "minute"),
        ("0 24 * * *", "hour"),
        ("0 8 0 * *", "day-of-month"),
        ("0 8 * 13 *", "month"),
        ("0 8 * * 8", "day-of-week"),
        ("0 8 * * fri-mon", "day-of-week: range"),
        ("*/0 8 * * *", "minute: step"),
    ],
)
def test_bad_cron_names_the_field(text: str, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        Cron.parse(text)


def test_recurrence_runs_in_its_time_zone_across_dst() -> None:
    action = ScheduledFloor("day", min_size=6, recurrence="0 8 * * *", timezone="Europe/Berlin")
    # winter: 08:00 Berlin is 07:00 UTC; summer (after 2026-03-29): 06:00 UTC
    assert action.next_fire(utc(2026, 3, 27), 24 * H) == utc(2026, 3, 27, 7)
    assert action.next_fire(utc(2026, 3, 30), 24 * H) == utc(2026, 3, 30, 6)
    assert action.next_fire(utc(2026, 3, 28, 12), 24 * H) == utc(2026, 3, 29, 6)


def test_a_time_the_spring_change_skips_runs_right_after_the_gap() -> None:
    action = ScheduledFloor("x", min_size=1, recurrence="30 2 * * *", timezone="Europe/Berlin")
    # 2026-03-29 02:30 Berlin does not exist: the clocks jump from 02:00 to 03:00 (01:00 UTC)
    assert action.next_fire(utc(2026, 3, 28, 12), 24 * H) == utc(2026, 3, 29, 1)


def test_a_time_the_autumn_change_repeats_runs_once() -> None:
    action = ScheduledFloor("x", min_size=1, recurrence="30 2 * * *", timezone="Europe/Berlin")
    # 2026-10-25 02:30 Berlin happens twice (00:30 and 01:30 UTC): the first one only
    assert action.next_fire(utc(2026, 10, 25, 0), 3 * H) == utc(2026, 10, 25, 0, 30)
    assert action.next_fire(utc(2026, 10, 25, 0, 31), 3 * H) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # hour (or minute) field a wildcard: every reading of the clock runs, the repeated hour's too
        ("0 * * * *", ["23:00", "00:00", "01:00", "02:00"]),
        ("*/30 * * * *", ["23:00", "23:30", "00:00", "00:30", "01:00", "01:30", "02:00", "02:30"]),
        ("0 */2 * * *", ["00:00", "01:00"]),  # 02:00 Berlin, both times; 00:00 and 04:00 are outside
        ("30 2 * * *", ["00:30"]),  # a fixed time: once, at its first reading
        ("0 1-3 * * *", ["23:00", "00:00", "02:00"]),  # fixed hours: 02:00 once
    ],
)
def test_a_cron_run_every_hour_also_runs_in_the_hour_the_autumn_change_repeats(
    text: str, expected: list[str]
) -> None:
    """2026-10-25, Berlin: 03:00 CEST (01:00 UTC) turns back to 02:00 CET, so 02:00-02:59 reads twice.
    Vixie cron runs a job whose minute or hour field starts with ``*`` in both (its "wildcard" jobs)
    and a fixed-time job once; Spillway's runs are the same instants. (Found by review.)"""
    runs = cron_runs(
        Cron.parse(text), zone_of("Europe/Berlin"), utc(2026, 10, 24, 23), utc(2026, 10, 25, 2, 59)
    )
    assert [r.strftime("%H:%M") for r in runs] == expected


def test_a_minute_wildcard_with_a_fixed_hour_runs_through_both_readings_of_that_hour() -> None:
    berlin = zone_of("Europe/Berlin")
    runs = list(cron_runs(Cron.parse("* 2 * * *"), berlin, utc(2026, 10, 24, 12), utc(2026, 10, 25, 12)))
    assert len(runs) == 120 and runs[0] == utc(2026, 10, 25, 0) and runs[-1] == utc(2026, 10, 25, 1, 59)
    assert all(b - a == M for a, b in pairwise(runs))


def test_end_time_stops_the_recurrence_and_start_time_is_a_run() -> None:
    action = ScheduledFloor(
        "x", min_size=2, recurrence="0 * * * *", start=utc(2026, 3, 2, 9, 15), end=utc(2026, 3, 2, 12)
    )
    assert action.next_fire(utc(2026, 3, 2, 9, 10), H) == utc(2026, 3, 2, 9, 15)
    assert action.next_fire(utc(2026, 3, 2, 11, 30), 6 * H) == utc(2026, 3, 2, 12)
    assert action.next_fire(utc(2026, 3, 2, 12), 6 * H) is None
    once = ScheduledFloor("once", min_size=2, start=utc(2026, 3, 2, 10))
    assert once.next_fire(utc(2026, 3, 2, 9), 2 * H) == utc(2026, 3, 2, 10)
    assert once.next_fire(utc(2026, 3, 2, 10), 2 * H) is None


def test_a_recurrence_that_starts_later_does_not_run_before_and_a_described_next_run_does() -> None:
    """AWS: StartTime and EndTime bound a recurring action. An action created on 2 November for an
    office opening on 1 December (daily at 08:00) must not run before then. Described, a running
    recurring action may show its next run as its StartTime: with no cron run before it, the cron
    runs on. (Found by review.)"""
    now = utc(2026, 11, 2, 12)
    later = ScheduledFloor("office", min_size=10, recurrence="0 8 * * *", start=utc(2026, 12, 1, 8))
    described = ScheduledFloor("office", min_size=10, recurrence="0 8 * * *", start=utc(2026, 11, 3, 8))

    assert later.next_fire(now, 24 * H) is None
    assert later.next_fire(utc(2026, 11, 30, 12), 24 * H) == utc(2026, 12, 1, 8)
    assert described.next_fire(utc(2026, 11, 3, 9), 24 * H) == utc(2026, 11, 4, 8)
    assert scheduled_floor([later], now, 24 * H) is None


# --- next_change: when "ran less than a duration ago" turns on or off (Karpenter's schedule + duration) --

M = timedelta(minutes=1)
CHANGE_CASES = [
    ("* * * * *", M, "Europe/Berlin", utc(2026, 10, 20)),  # one block a day, through the repeated hour
    ("* 2 * * *", M, "Europe/Berlin", utc(2026, 10, 20)),  # the repeated hour: one block of two hours
    ("0 * * * *", H, "Europe/Berlin", utc(2026, 10, 20)),  # back to back, the repeated hour too
    ("30 2 * * *", 10 * M, "Europe/Berlin", utc(2026, 10, 20)),  # a fixed time, once in autumn
    ("*/15 9-17 * * mon-fri", 30 * M, "Europe/Berlin", utc(2026, 3, 23)),  # across the spring change
    ("0 */2 * * *", 150 * M, "America/New_York", utc(2026, 10, 28)),  # 3 h apart once, on 1 November
    ("30 2 * * *", H, "Europe/Berlin", utc(2026, 3, 26)),  # a run the spring change skips
    ("0 9,17 * * *", 4 * H, "Australia/Lord_Howe", utc(2026, 9, 30)),  # a half-hour DST change
    ("0 0 * * *", 24 * H, "UTC", utc(2026, 6, 1)),  # back to back: always on
]


def walked_changes(cron: Cron, zone: str, span: timedelta, start: datetime, days: int) -> list[datetime]:
    """Every minute in ``(start, start + days)`` where "a run less than ``span`` ago" differs from the
    minute before, from the runs themselves."""
    runs = list(cron_runs(cron, zone_of(zone), start - span - M, start + timedelta(days=days)))

    def on(t: datetime) -> bool:
        i = bisect_right(runs, t)
        return i > 0 and runs[i - 1] > t - span

    minutes = [(t, on(t)) for t in (start + k * M for k in range(days * 1440))]
    return [t for (_, was), (t, now) in pairwise(minutes) if now != was]


@pytest.mark.parametrize(("text", "span", "zone", "start"), CHANGE_CASES)
def test_next_change_finds_every_change_the_minute_walk_finds(
    text: str, span: timedelta, zone: str, start: datetime
) -> None:
    cron, days = Cron.parse(text), 10
    found, t = [], start
    while (edge := next_change(cron, zone_of(zone), span, t)) is not None and edge < start + timedelta(
        days=days
    ):
        found.append(edge)
        t = edge
    assert found == walked_changes(cron, zone, span, start, days)


def test_next_change_looks_as_far_ahead_as_the_next_run() -> None:
    utc_zone = zone_of("UTC")
    assert next_change(Cron.parse("0 0 1 1 *"), utc_zone, H, utc(2026, 1, 2)) == utc(2027, 1, 1)
    # 29 February: none in 2100, so eight years from 2096 to 2104
    assert next_change(Cron.parse("0 0 29 2 *"), utc_zone, H, utc(2096, 3, 1)) == utc(2104, 2, 29)
    assert next_change(Cron.parse("0 0 31 2 *"), utc_zone, H, utc(2026, 1, 1)) is None  # never runs
    # the 1st of January and of February, 40 days each: on until 40 days after 1 February
    assert next_change(Cron.parse("0 0 1 1,2 *"), utc_zone, 40 * 24 * H, utc(2027, 1, 5)) == utc(2027, 3, 13)


DAY_NIGHT = (
    ScheduledFloor("day", min_size=6, recurrence="0 8 * * mon-fri", timezone="Europe/Berlin"),
    ScheduledFloor("night", min_size=1, recurrence="0 20 * * *", timezone="Europe/Berlin"),
)


def test_an_action_that_ran_sets_no_floor() -> None:
    """AWS sets MinSize once, at the run, and keeps no old values: what a run set is the group's MinSize
    now (or what somebody changed it to since), so the actions' past runs say nothing more."""
    assert scheduled_floor(DAY_NIGHT, utc(2026, 3, 3, 12), 10 * M) is None  # Tue 13:00 Berlin
    assert scheduled_floor(DAY_NIGHT, utc(2026, 3, 3, 21), 10 * M) is None
    once = ScheduledFloor("once", min_size=3, start=utc(2026, 3, 3, 11, 59))
    assert scheduled_floor([once], utc(2026, 3, 3, 12), 10 * M) is None


def test_the_floor_is_the_highest_min_size_set_within_the_horizon() -> None:
    # Wed 07:55 Berlin (06:55 UTC): the day action runs in 5 minutes
    now = utc(2026, 3, 4, 6, 55)
    floor = scheduled_floor(DAY_NIGHT, now, 10 * M)
    assert floor is not None and (floor.min_size, floor.action.name) == (6, "day")
    assert floor.at == utc(2026, 3, 4, 7)
    assert floor.describe() == (
        "scheduled action day (cron '0 8 * * mon-fri' Europe/Berlin) runs at 2026-03-04T07:00:00Z"
        " with MinSize 6"
    )
    assert scheduled_floor(DAY_NIGHT, now, 4 * M) is None
    # until the night action (20:00 Berlin) too: the day's MinSize is the higher
    both = scheduled_floor(DAY_NIGHT, now, 13 * H)
    assert both is not None and (both.min_size, both.at) == (6, utc(2026, 3, 4, 7))
    # Saturday: no day action
    assert scheduled_floor(DAY_NIGHT, utc(2026, 3, 7, 6, 55), 10 * M) is None


def test_the_floor_is_the_size_the_group_has_once_the_action_ran() -> None:
    """A DesiredCapacity is the group's size after the run; a MinSize alone raises the desired capacity
    to it; with both, the higher (AWS refuses a desired capacity below the MinSize)."""
    now = utc(2026, 3, 2)
    cases = [
        (ScheduledFloor("d", desired=5, recurrence="30 0 * * *"), (5, "DesiredCapacity")),
        (ScheduledFloor("m", min_size=2, recurrence="30 0 * * *"), (2, "MinSize")),
        (
            ScheduledFloor("b", min_size=2, desired=4, max_size=9, recurrence="30 0 * * *"),
            (4, "DesiredCapacity"),
        ),
    ]
    for action, (size, field) in cases:
        floor = scheduled_floor([action], now, H)
        assert floor is not None and (floor.min_size, floor.field) == (size, field), action
        assert floor.describe().endswith(f"runs at 2026-03-02T00:30:00Z with {field} {size}")


def test_actions_setting_only_max_size_or_unreadable_set_no_floor() -> None:
    actions = (
        ScheduledFloor("max-only", max_size=5, recurrence="* * * * *"),
        ScheduledFloor("broken", min_size=9, recurrence="every day"),
    )
    assert scheduled_floor(actions, utc(2026, 3, 2), H) is None
    assert check_actions(actions) == [
        "ScheduledActions[broken]: expected 5 fields (minute hour day month weekday), got 2"
    ]
    assert check_actions([ScheduledFloor("z", min_size=1, timezone="Mars/Olympus")]) == [
        "ScheduledActions[z]: 'Mars/Olympus' is not an IANA time zone"
    ]


def test_an_action_sized_above_the_maxsize_in_force_sets_no_floor_and_is_named() -> None:
    """A run applies the action's sizes within the MaxSize in force (its own, else the group's) and
    Auto Scaling refuses a MinSize or DesiredCapacity above it (UpdateAutoScalingGroup's
    ValidationError): such an action sets nothing. It was taken as a floor above the group's MaxSize."""
    now = utc(2026, 3, 2)
    high = ScheduledFloor("high", min_size=8, recurrence="30 0 * * *")
    want = ScheduledFloor("want", desired=8, recurrence="30 0 * * *")
    raised = ScheduledFloor("raised", min_size=8, max_size=8, recurrence="30 0 * * *")
    assert scheduled_floor([high], now, H, max_size=5) is None
    assert scheduled_floor([want], now, H, max_size=5) is None
    floor = scheduled_floor([high, raised], now, H, max_size=5)
    assert floor is not None and (floor.action.name, floor.min_size) == ("raised", 8)
    assert scheduled_floor([high], now, H, max_size=8) is not None  # at MaxSize: runs
    assert [p.split(":")[0:2] for p in check_actions([high, want, raised], max_size=5)] == [
        ["ScheduledActions[high]", " MinSize 8 is above the group's MaxSize 5"],
        ["ScheduledActions[want]", " DesiredCapacity 8 is above the group's MaxSize 5"],
    ]
    assert check_actions([ScheduledFloor("own", min_size=8, max_size=6)], max_size=10) == [
        "ScheduledActions[own]: MinSize 8 is above its own MaxSize 6: Auto Scaling refuses these sizes "
        "when it runs (ValidationError), so the action changes nothing and sets no floor; give it a "
        "MaxSize at least as high, or lower its sizes"
    ]


def test_an_action_sized_below_the_minsize_in_force_is_no_ceiling_and_is_named() -> None:
    """The same rule from below: Auto Scaling refuses a DesiredCapacity or a MaxSize below the MinSize
    in force (its own, else the group's), and the run terminates nothing. A DesiredCapacity 2 on a group
    of MinSize 3 was taken as a ceiling of 3 (clamped), so the plan drained down to it ahead of a run
    that never comes."""
    now = utc(2026, 3, 2)
    low = ScheduledFloor("low", desired=2, recurrence="30 0 * * *")
    cap = ScheduledFloor("cap", max_size=2, recurrence="30 0 * * *")
    own = ScheduledFloor("own", min_size=1, desired=2, recurrence="30 0 * * *")
    assert scheduled_ceiling([low], now, H, 3) is None
    assert scheduled_ceiling([cap], now, H, 3) is None
    ceiling = scheduled_ceiling([low, cap, own], now, H, 3)
    assert ceiling is not None and (ceiling.action.name, ceiling.min_size) == ("own", 2)
    assert scheduled_ceiling([low], now, H, 2) is not None  # at MinSize: runs
    assert scheduled_floor([low], now, H, 10, 3) is None
    assert [p.split(":")[0:2] for p in check_actions([low, cap, own], 10, 3)] == [
        ["ScheduledActions[low]", " DesiredCapacity 2 is below the group's MinSize 3"],
        ["ScheduledActions[cap]", " MaxSize 2 is below the group's MinSize 3"],
    ]
    assert check_actions([ScheduledFloor("mine", min_size=4, desired=3)], 10, 0) == [
        "ScheduledActions[mine]: DesiredCapacity 3 is below its own MinSize 4: Auto Scaling refuses these "
        "sizes when it runs (ValidationError), so the action changes nothing and sets no floor; give it a "
        "MinSize at least as low, or raise its sizes"
    ]


def test_a_group_read_with_an_action_above_its_max_size_names_it_in_its_problems() -> None:
    raw = o.asg("batch", max_size=5)
    action = ScheduledAction(AutoScalingGroupName="batch", ScheduledActionName="morning", MinSize=8,
                             Recurrence="0 8 * * *")  # fmt: skip
    (group,) = build_node_groups(
        [AutoScalingGroup.model_validate(raw)], [], bundled_instance_types(), {}, "ml", scheduled=[action]
    )
    assert [p for p in group.problems if p.startswith("ScheduledActions[")] == [
        "ScheduledActions[morning]: MinSize 8 is above the group's MaxSize 5: Auto Scaling refuses these "
        "sizes when it runs (ValidationError), so the action changes nothing and sets no floor; give it "
        "a MaxSize at least as high, or lower its sizes"
    ]
    # and one below its MinSize
    raw = o.asg("batch", min_size=3, max_size=5)
    evening = ScheduledAction(AutoScalingGroupName="batch", ScheduledActionName="evening", DesiredCapacity=1,
                              Recurrence="0 20 * * *")  # fmt: skip
    (group,) = build_node_groups(
        [AutoScalingGroup.model_validate(raw)], [], bundled_instance_types(), {}, "ml", scheduled=[evening]
    )
    assert [p.split(":")[1] for p in group.problems if p.startswith("ScheduledActions[")] == [
        " DesiredCapacity 1 is below the group's MinSize 3"
    ]


def test_wire_form_round_trips() -> None:
    action = ScheduledFloor(
        "x", min_size=2, desired=3, recurrence="0 8 * * *", start=utc(2026, 3, 2), timezone="Asia/Tokyo"
    )
    assert ScheduledFloor.from_dict(action.to_dict()) == action
    assert ScheduledFloor("y").to_dict() == {"name": "y"}
