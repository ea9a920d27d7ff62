"""ASG scheduled actions: when they run, and the MinSize floor the coming runs put under a group.

A scheduled action sets a group's MinSize / MaxSize / DesiredCapacity once (at ``StartTime``) or at
every occurrence of ``Recurrence``, a 5-field Unix cron (``minute hour day-of-month month
day-of-week``) read in ``TimeZone`` (IANA; UTC without one), never before ``StartTime`` nor after
``EndTime``. :class:`Cron` is a small parser for that format: ``*``, lists (``,``), ranges (``-``),
steps (``/``), month and day names (``jan``, ``mon``), day-of-week ``0``-``7`` (0 and 7 are Sunday; a
step from a day, ``1/2``, ends at Saturday, as in robfig/cron); as
in Vixie cron, when both day fields are restricted a day matching either one fires. ``?`` is ``*``, as
in robfig/cron, which reads Karpenter's budget schedules and Kubernetes CronJobs (``0 9 ? * MON-FRI``);
AWS's traditional cron has no ``?``, so a Recurrence AWS accepted reads the same either way. A day
field is unrestricted when it is ``*`` or ``?`` with no step or step 1 (robfig/cron; Vixie cron
agrees on ``*/1`` and differs only on ``*/2`` and wider steps, which it also takes as unrestricted).

Daylight saving time: a run is an instant at which the zone's wall clock reads a time the cron names.
The autumn change makes the clock read an hour (or so) twice: a cron whose minute or hour field starts
with ``*`` or ``?`` (every minute or every hour, steps such as ``*/15`` included) runs at both readings,
and a cron of fixed minute and hour runs once, at the first. That is Vixie (ISC) cron's rule: such jobs
are its "wildcard" jobs (flags ``MIN_STAR``/``HR_STAR``), the only ones it runs again when the clock
goes back, so ``0 * * * *`` runs every hour of a 25-hour day and ``30 2 * * *`` once. A time the
spring change skips runs at the first instant after the gap (Vixie cron runs its skipped fixed-time
jobs then too); windows (:mod:`spillway.model.windows`) open at a time's first reading.

:func:`scheduled_floor` is pure: the planner passes ``now``. It looks ahead only: AWS sets a group's
MinSize once, when an action runs, and keeps no old values, so what a past run set is the group's
MinSize now (or what somebody changed it to since), which the planner already honours.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from itertools import pairwise
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from spillway.model.cluster import format_time, parse_time
from spillway.model.quantity import is_digits
from spillway.model.utc import aware

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# (field name, lowest, highest, names for lowest.. )
_FIELDS: tuple[tuple[str, int, int, tuple[str, ...]], ...] = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day-of-month", 1, 31, ()),
    ("month", 1, 12, _MONTHS),
    ("day-of-week", 0, 7, _DAYS),
)

# ``N/step`` runs from N to the field's end; day-of-week's 7 (Sunday again) is no step's end: robfig/cron
# bounds the field 0-6 (spec.go ``dow``, parser.go ``getRange``), so ``1/2`` is Monday, Wednesday, Friday
_STEP_END = {"day-of-week": 6}


def _value(text: str, name: str, low: int, high: int, names: tuple[str, ...]) -> int:
    lowered = text.lower()
    if lowered in names:
        return low + names.index(lowered)
    if not is_digits(text) or not low <= int(text) <= high:
        raise ValueError(f"{name}: {text!r} is not a number in {low}-{high}")
    return int(text)


def _field(text: str, name: str, low: int, high: int, names: tuple[str, ...]) -> tuple[frozenset[int], bool]:
    """The values ``text`` names, and whether it is unrestricted: an item ``*`` or ``?`` without a
    step or with step 1 (robfig/cron's star bit). ``*/1`` is every value, as ``*`` is, so a day field
    written that way must not turn on the "either day field matches" rule; ``*/2`` names some days only
    and does."""
    values: set[int] = set()
    star = False
    for part in text.split(","):
        span, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not is_digits(step_text) or int(step_text) < 1:
                raise ValueError(f"{name}: step {step_text!r} is not a positive number")
            step = int(step_text)
        if span in ("*", "?"):
            first, last = low, high
            star = star or step == 1
        elif "-" in span:
            a, _, b = span.partition("-")
            first, last = _value(a, name, low, high, names), _value(b, name, low, high, names)
            if first > last:
                raise ValueError(f"{name}: range {span!r} runs backwards")
        else:
            first = _value(span, name, low, high, names)
            last = max(first, _STEP_END.get(name, high)) if slash else first  # 7/2 is Sunday
        values.update(range(first, last + 1, step))
    return frozenset(values), star


@dataclass(frozen=True, slots=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool  # day-of-month is unrestricted: * or ?, step 1 at most (see _field)
    any_weekday: bool  # day-of-week is unrestricted
    repeats: bool = False  # minute or hour starts with * or ?: runs at both readings of a repeated time

    @classmethod
    def parse(cls, text: str) -> Cron:
        """``ValueError`` naming the field when ``text`` is not a 5-field cron expression."""
        parts = text.split()
        if len(parts) != 5:
            raise ValueError(f"expected 5 fields (minute hour day month weekday), got {len(parts)}")
        fields = [_field(p, *spec) for p, spec in zip(parts, _FIELDS, strict=True)]
        sets = [values for values, _ in fields]
        weekdays = frozenset(d % 7 for d in sets[4])
        repeats = parts[0][0] in "*?" or parts[1][0] in "*?"  # Vixie cron's MIN_STAR | HR_STAR
        return cls(sets[0], sets[1], sets[2], sets[3], weekdays, fields[2][1], fields[4][1], repeats)

    def on(self, day: date) -> bool:
        """Whether the cron fires at some time of ``day`` (a local date)."""
        if day.month not in self.months:
            return False
        by_date = day.day in self.days
        by_weekday = (day.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return by_date and by_weekday
        return by_date or by_weekday

    def runs_ever(self) -> bool:
        """Whether some date matches: a day of month restricted to days none of the months named has
        (``30 2``, ``31 apr``), with the day of week unrestricted, never does. A leap year holds every
        (month, day) there is, and every month every weekday, so checking its days answers for all."""
        leap = date(2024, 1, 1)
        return any(self.on(leap + timedelta(days=offset)) for offset in range(366))

    def times(self) -> list[time]:
        return [time(h, m) for h in sorted(self.hours) for m in sorted(self.minutes)]

    def runs_on(self, zone: ZoneInfo, day: date) -> list[datetime]:
        """Every run on ``day`` (a local date of ``zone``, which the cron must match), ascending, as UTC
        instants: each of its times at every reading of the wall clock that counts (module docstring)."""
        runs = {at for clock in self.times() for at in wall_instants(zone, day, clock, both=self.repeats)}
        return sorted(runs)


# robfig/cron's descriptors (Karpenter's budget schedules take them): each a 5-field expression.
CRON_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def cron_runs(cron: Cron, zone: ZoneInfo, lo: datetime, hi: datetime) -> Iterator[datetime]:
    """Every run of ``cron`` (read in ``zone``) in ``[lo, hi]``, ascending, as UTC instants."""
    first, last = lo.astimezone(zone).date(), hi.astimezone(zone).date()
    for offset in range((last - first).days + 1):
        day = first + timedelta(days=offset)
        if cron.on(day):
            yield from (at for at in cron.runs_on(zone, day) if lo <= at <= hi)


# The longest a 5-field cron that runs at all can go without running: one that runs only on 29 February
# skips the eight years around a century that is not a leap year (2096 to 2104).
RUN_GAP_DAYS = 8 * 366


def _run_blocks(
    cron: Cron, zone: ZoneInfo, lo: datetime, hi: datetime, span: timedelta
) -> Iterator[tuple[datetime, datetime]]:
    """The runs of ``cron`` from the local date of ``lo`` until one is after ``hi``, ascending, as
    blocks ``(first, last)`` of consecutive runs no more than ``span`` apart: "a run less than ``span``
    ago" holds from ``first`` to ``last + span`` without a break. A day whose runs all lie that close
    is one block found with a few time-zone conversions, however many times it runs; a day whose clock
    gaps are wider, or whose UTC offset changes between its first and last run (which stretches or
    shrinks the gaps, or reads some times twice), gives each run as a block of its own."""
    clocks = cron.times()
    walls = [datetime.combine(date.min, clock) for clock in clocks]
    wall_span = walls[-1] - walls[0]
    widest = max((b - a for a, b in pairwise(walls)), default=timedelta(0))
    first, last = lo.astimezone(zone).date(), hi.astimezone(zone).date()
    for offset in range((last - first).days + 1):
        day = first + timedelta(days=offset)
        if not cron.on(day):
            continue
        block = (
            wall_instants(zone, day, clocks[0], both=cron.repeats)[0],
            wall_instants(zone, day, clocks[-1], both=cron.repeats)[-1],
        )
        if widest <= span and block[1] - block[0] == wall_span:
            blocks = [block]
        else:
            blocks = [(at, at) for at in cron.runs_on(zone, day)]
        for start, end in blocks:
            if start > hi:
                return
            yield start, end


def next_change(cron: Cron, zone: ZoneInfo, span: timedelta, after: datetime) -> datetime | None:
    """The first instant after ``after`` (aware) when "``cron``, read in ``zone``, ran less than ``span``
    ago" turns true or false, in UTC; None when it never does.

    It holds on the union of ``[run, run + span)``: it turns true at a run more than ``span`` after
    the one before, and false ``span`` after a run when the next one is more than ``span`` later. The
    runs are searched from ``span`` before ``after`` to ``RUN_GAP_DAYS`` past ``after + span``, long
    enough to find the next run of any cron that runs at all (``@monthly``, ``@yearly``, 29 February),
    so None means what callers read it as: the cron never runs, or its runs overlap all that time. A
    shorter horizon would answer None for a cron that does run later, and answering "look again at
    the horizon" instead would name an instant at which nothing changes."""
    lo, hi = after - span, after + span + timedelta(days=RUN_GAP_DAYS)
    before: datetime | None = None  # the last run so far
    for start, end in _run_blocks(cron, zone, lo, hi, span):
        if before is None or start - before > span:
            if before is not None and before + span > after:
                return (before + span).astimezone(UTC)
            if start > after:
                return start.astimezone(UTC)
        before = end
    return None


def wall_instants(zone: ZoneInfo, day: date, clock: time, *, both: bool = False) -> tuple[datetime, ...]:
    """The UTC instants at which ``zone``'s wall clock reads ``clock`` on ``day``, ascending: one; for
    a time the autumn change repeats, its first reading, and its second too when ``both``; for a time
    the spring change skips, the first instant after the gap."""
    wall = datetime.combine(day, clock)
    first = wall.replace(tzinfo=zone).astimezone(UTC)  # fold=0: the first reading
    if first.astimezone(zone).replace(tzinfo=None) == wall:
        second = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)  # the same instant unless repeated
        return (first, second) if both and second != first else (first,)
    probe = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)  # in the gap: just before it ends
    while probe.astimezone(zone).replace(tzinfo=None) < wall:
        probe += timedelta(minutes=1)
    return (probe,)


def local_instant(zone: ZoneInfo, day: date, clock: time) -> datetime:
    """``clock`` on ``day`` in ``zone`` as a UTC instant: its first reading (see :func:`wall_instants`)."""
    return wall_instants(zone, day, clock)[0]


# files of the zoneinfo directory that are not zones of the IANA database: "localtime" is the host's own
# zone (a laptop's and Lambda's differ), "posixrules" a default rule, "Factory" a zone of no place; the
# "posix/" and "right/" trees are copies (the latter counting leap seconds)
NOT_ZONES = frozenset({"localtime", "posixrules", "Factory"})


def zone_of(name: str | None) -> ZoneInfo:
    """The IANA time zone ``name`` (UTC for None); ValueError for a name that is not one, the empty
    string included (no zone of that name; AWS's ``TimeZone`` has at least one character)."""
    key = "UTC" if name is None else name
    if not key.strip() or key in NOT_ZONES or key.startswith(("posix/", "right/")):
        raise ValueError(f"{name!r} is not an IANA time zone")
    try:
        return ZoneInfo(key)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        # OSError: a folder of the database ("US", "Europe", "America"; US/Eastern is a zone), which
        # zoneinfo opens as a file and fails with IsADirectoryError, not ZoneInfoNotFoundError
        raise ValueError(f"{name!r} is not an IANA time zone") from None


_TICK = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class ScheduledFloor:
    """One scheduled action of a group, as much of it as the planner needs."""

    name: str
    min_size: int | None = None
    desired: int | None = None
    max_size: int | None = None
    recurrence: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    timezone: str | None = None

    def _starts_later(self, now: datetime) -> bool:
        """A recurring action whose recurrence has not begun: ``StartTime`` is ahead and the cron runs
        before it. DescribeScheduledActions may show a recurring action's next run as its StartTime, so a
        StartTime ahead is not a bound by itself; but when the cron runs between now and then, StartTime
        is not that next run, and it bounds the recurrence as PutScheduledUpdateGroupAction documents
        ("they form the boundaries of when the recurring action starts and stops")."""
        if not self.recurrence or self.start is None:
            return False
        start = aware(self.start)
        if start <= now:
            return False
        return self._cron_run(now + _TICK, start - _TICK) is not None

    def _cron_run(self, lo: datetime, hi: datetime) -> datetime | None:
        """The recurrence's first run in ``[lo, hi]``."""
        assert self.recurrence
        return next(cron_runs(Cron.parse(self.recurrence), zone_of(self.timezone), lo, hi), None)

    def next_fire(self, now: datetime, horizon: timedelta) -> datetime | None:
        """When the action runs next, after ``now`` and at most ``horizon`` later.

        ``StartTime`` is a run of its own (for a recurring action too, as PutScheduledUpdateGroupAction
        documents); it bounds the recurrence from below only when the recurrence has not begun
        (:meth:`_starts_later`). ``EndTime`` ends the recurrence."""
        lo, hi = now + _TICK, now + horizon
        runs = []
        start = aware(self.start) if self.start else None
        if start is not None and self._starts_later(now):
            lo = max(lo, start)
        if start is not None and lo <= start <= hi:
            runs.append(start)
        if self.recurrence:
            cron = self._cron_run(lo, min(hi, aware(self.end)) if self.end else hi)
            if cron is not None:
                runs.append(cron)
        return min(runs, default=None)

    def describe(self) -> str:
        when = f"cron {self.recurrence!r} {self.timezone or 'UTC'}" if self.recurrence else "once"
        return f"scheduled action {self.name} ({when})"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        for key, value in (
            ("min", self.min_size),
            ("desired", self.desired),
            ("max", self.max_size),
            ("recurrence", self.recurrence),
            ("timezone", self.timezone),
        ):
            if value is not None:
                out[key] = value
        if self.start is not None:
            out["start"] = format_time(self.start)
        if self.end is not None:
            out["end"] = format_time(self.end)
        return out

    @classmethod
    def from_dict(cls, d: Any) -> ScheduledFloor:
        return cls(
            name=str(d["name"]),
            min_size=d.get("min"),
            desired=d.get("desired"),
            max_size=d.get("max"),
            recurrence=d.get("recurrence"),
            start=parse_time(d["start"]) if d.get("start") else None,
            end=parse_time(d["end"]) if d.get("end") else None,
            timezone=d.get("timezone"),
        )


@dataclass(frozen=True, slots=True)
class Floor:
    """The size a scheduled action takes the group to within the horizon (``field``: the MinSize or
    DesiredCapacity it sets, the higher), which action, and when it runs."""

    min_size: int
    action: ScheduledFloor
    at: datetime
    field: str = "MinSize"

    def describe(self) -> str:
        return f"{self.action.describe()} runs at {format_time(self.at)} with {self.field} {self.min_size}"


def floor_of(action: ScheduledFloor) -> tuple[int, str] | None:
    """(the size the group has once ``action`` ran, the field that sets it), or None when it sets no
    floor. Auto Scaling sets each size the action names at its run ("Scheduled scaling": an action may
    name only one of them): a DesiredCapacity is the group's size then, and a MinSize raises the desired
    capacity to it when below; a MaxSize alone lowers sizes only."""
    sizes = [
        (n, f)
        for n, f in ((action.desired, "DesiredCapacity"), (action.min_size, "MinSize"))
        if n is not None
    ]
    return max(sizes, key=lambda s: s[0], default=None)


def scheduled_floor(
    actions: Sequence[ScheduledFloor],
    now: datetime,
    horizon: timedelta,
    max_size: int | None = None,
    min_size: int | None = None,
) -> Floor | None:
    """The highest size (:func:`floor_of`: its MinSize or DesiredCapacity) an action takes the group to
    when it runs after ``now`` and within ``horizon`` (the earliest such run, then the action's name, on
    a tie); None when none does. Past runs set no floor: AWS applied them to the group's sizes, which
    may have been changed since. An action whose cron or zone cannot be read is skipped (it was checked
    when the group was read), and so is one Auto Scaling will refuse when it runs
    (:func:`size_refusal`, against the group's ``max_size`` and ``min_size``): it sets no size at all."""

    def valid_floor(action: ScheduledFloor) -> tuple[int, str] | None:
        return None if size_refusal(action, max_size, min_size) else floor_of(action)

    coming = _runs(actions, now, horizon, valid_floor)
    return max(coming, key=lambda f: (f.min_size, -f.at.timestamp(), f.action.name), default=None)


# What a user changes so that Auto Scaling accepts the action's sizes: for a size above the maximum
# in force, and for one below the minimum in force.
_RAISE_MAX = "give it a MaxSize at least as high, or lower its sizes"
_LOWER_MIN = "give it a MinSize at least as low, or raise its sizes"


def _refusal(action: ScheduledFloor, max_size: int | None, min_size: int | None) -> tuple[str, str]:
    """(:func:`size_refusal`'s reason, the remedy), or ``("", "")``."""
    top = action.max_size if action.max_size is not None else max_size
    low = action.min_size if action.min_size is not None else min_size
    tops = "its own MaxSize" if action.max_size is not None else "the group's MaxSize"
    lows = "its own MinSize" if action.min_size is not None else "the group's MinSize"
    if top is not None:
        if action.min_size is not None and action.min_size > top:
            return f"MinSize {action.min_size} is above {tops} {top}", _RAISE_MAX
        if action.desired is not None and action.desired > top:
            return f"DesiredCapacity {action.desired} is above {tops} {top}", _RAISE_MAX
    if low is not None:
        if action.max_size is not None and action.max_size < low:
            return f"MaxSize {action.max_size} is below {lows} {low}", _LOWER_MIN
        if action.desired is not None and action.desired < low:
            return f"DesiredCapacity {action.desired} is below {lows} {low}", _LOWER_MIN
    return "", ""


def size_refusal(action: ScheduledFloor, max_size: int | None, min_size: int | None = None) -> str:
    """Why Auto Scaling cannot apply ``action``'s sizes to a group whose MaxSize is ``max_size`` and
    MinSize ``min_size`` when it runs, else ``""``: a MinSize or a DesiredCapacity above the MaxSize in
    force then, or a MaxSize or a DesiredCapacity below the MinSize in force then, the action's own,
    else the group's (EC2 Auto Scaling User Guide, "Set scaling limits": a scheduled action that names
    no new limit runs within the group's current ones, and the desired capacity must lie within them;
    "Scheduled scaling", Considerations: an action may name only a desired capacity, but must name the
    minimum and maximum too where its desired capacity would otherwise fall outside them). A run sets
    the sizes it names as UpdateAutoScalingGroup does, and that refuses a maximum below the minimum
    (ValidationError "Max bound, M, must be greater than or equal to min bound, N") and a desired
    capacity outside them: no size changes, no instance is launched and none is terminated, so such
    an action is neither a floor nor a ceiling. PutScheduledUpdateGroupAction already refuses an action
    whose own sizes disagree; DescribeScheduledActions can still list one that disagrees with the
    group's: its limits may have changed after the action was put. moto runs no scheduled action, so
    Spillway applies the rule itself. The limits in force are the group's as read: another action
    that changes them before this one runs is not counted."""
    return _refusal(action, max_size, min_size)[0]


def _runs(
    actions: Sequence[ScheduledFloor],
    now: datetime,
    horizon: timedelta,
    size_of: Callable[[ScheduledFloor], tuple[int, str] | None],
) -> list[Floor]:
    """A :class:`Floor` for each action ``size_of`` gives a size for and that runs after ``now`` and
    within ``horizon``, at its next run; an action whose cron or zone cannot be read is skipped."""
    now = aware(now)
    coming: list[Floor] = []
    for action in actions:
        size = size_of(action)
        if size is None:
            continue
        try:
            upcoming = action.next_fire(now, horizon)
        except ValueError:
            continue
        if upcoming is not None:
            coming.append(Floor(size[0], action, upcoming, size[1]))
    return coming


def check_actions(
    actions: Iterable[ScheduledFloor], max_size: int | None = None, min_size: int | None = None
) -> list[str]:
    """Problems with the actions, naming the action (empty when all read): a recurrence or time zone
    that cannot be read, and sizes Auto Scaling will refuse when the action runs on a group
    whose MaxSize is ``max_size`` and MinSize ``min_size`` (:func:`size_refusal`)."""
    problems = []
    for action in actions:
        try:
            if action.recurrence:
                Cron.parse(action.recurrence)
            zone_of(action.timezone)
        except ValueError as exc:
            problems.append(f"ScheduledActions[{action.name}]: {exc}")
        refused, remedy = _refusal(action, max_size, min_size)
        if refused:
            problems.append(
                f"ScheduledActions[{action.name}]: {refused}: Auto Scaling refuses these sizes when it "
                f"runs (ValidationError), so the action changes nothing and sets no floor; {remedy}"
            )
    return problems


def ceiling_of(action: ScheduledFloor) -> tuple[int, str] | None:
    """(the most instances the group may keep once ``action`` ran, the field that says so), or None
    when it lowers nothing. A DesiredCapacity is the group's size then ("Scheduled scaling": the action
    sets the desired capacity, and Auto Scaling terminates instances down to it); a MaxSize below the
    desired capacity takes the group down to it ("current capacity must fall within the minimum and
    maximum capacity that was set by your scheduled action"). Of the two, the lower; a MinSize alone
    lowers nothing."""
    sizes = [
        (n, f)
        for n, f in ((action.desired, "DesiredCapacity"), (action.max_size, "MaxSize"))
        if n is not None
    ]
    return min(sizes, key=lambda s: s[0], default=None)


def scheduled_ceiling(
    actions: Sequence[ScheduledFloor],
    now: datetime,
    horizon: timedelta,
    min_size: int = 0,
    max_size: int | None = None,
) -> Floor | None:
    """The lowest size (:func:`ceiling_of`: its DesiredCapacity or MaxSize) an action takes the group to
    when it runs after ``now`` and within ``horizon`` (the earliest such run, then the action's name, on
    a tie); None when none does. Its ``min_size`` is that ceiling. Past runs are not read, as for
    :func:`scheduled_floor`; an action whose cron or zone cannot be read is skipped, and so is one Auto
    Scaling will refuse when it runs (:func:`size_refusal`, against the group's ``min_size`` and
    ``max_size``): a DesiredCapacity or MaxSize below the MinSize in force fails the whole run, which
    terminates nothing, so nothing is drained ahead of it."""

    def valid_ceiling(action: ScheduledFloor) -> tuple[int, str] | None:
        return None if size_refusal(action, max_size, min_size) else ceiling_of(action)

    coming = _runs(actions, now, horizon, valid_ceiling)
    return min(coming, key=lambda f: (f.min_size, f.at.timestamp(), f.action.name), default=None)
