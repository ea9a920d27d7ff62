"""Time windows: when a buffer, a tenant limit or a disruption budget applies, in a named time zone.

One type for every "by the clock" setting (issue 12)::

    {"days": ["mon", "tue", "wed", "thu", "fri"], "start": "08:00", "end": "20:00",
     "timezone": "Europe/Berlin"}

- ``days``: the days the window *opens* on, local time (default: every day), each ``mon`` .. ``sun``
  or its full English name (``Monday``), in any case; any other word is refused;
- ``start``/``end``: local wall-clock times ``HH:MM``; an ``end`` at or before ``start`` runs past
  midnight into the next day (``22:00``-``06:00``); ``00:00``-``00:00`` is the whole day;
- ``timezone``: an IANA name (default ``UTC``). Local times are resolved with :mod:`zoneinfo`, so the
  window follows daylight saving time: 08:00 Berlin is 07:00 UTC in winter and 06:00 UTC in summer.
  A wall-clock time that does not exist (skipped at the spring change) opens the window at the first
  instant after the gap; one that occurs twice (the autumn change) opens it at the first occurrence.

:meth:`TimeWindow.active` is pure: the caller passes ``now`` (the planner's clock argument), so tests walk
a simulated week across a DST change without touching a real clock. Karpenter's disruption budgets take a
UTC-only cron; users ask for zones (karpenter#2711, #2590, #1177), hence named zones here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, time, timedelta
from typing import Any

from pydantic import Field, field_validator

from spillway.model.quantity import is_digits
from spillway.model.schedule import local_instant, zone_of
from spillway.model.settings import Settings
from spillway.model.utc import aware

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
DAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def _clock(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        raise ValueError(_unquoted(value))
    text = str(value).strip()
    hours, sep, minutes = text.partition(":")
    if not (sep and is_digits(hours) and is_digits(minutes) and len(minutes) == 2 and len(hours) <= 2):
        raise ValueError(f"expected a time HH:MM, got {text!r}"[:80])
    if int(hours) > 23 or int(minutes) > 59:
        raise ValueError(f"no such time of day: {text!r}")
    return f"{int(hours):02d}:{minutes}"


def _unquoted(number: int) -> str:
    """Why a number is no time: YAML 1.1, which PyYAML reads, takes an unquoted ``20:00`` for the
    base-60 integer 1200 (https://yaml.org/type/int.html, sexagesimal form: a first digit of 1-9, so
    ``08:00`` stays a string and ``8:00`` is 480); say what was written."""
    if 60 <= number < 24 * 60:
        written = f"{number // 60}:{number % 60:02d}"
        return (
            f"a time must be quoted: YAML reads an unquoted {written} as the number {number} "
            f'(base 60); write "{number // 60:02d}:{number % 60:02d}"'
        )
    return f'expected a time "HH:MM" (quoted in YAML), got the number {number}'[:120]


class TimeWindow(Settings):
    """A weekly window of local time in a named zone (see the module docstring)."""

    days: tuple[str, ...] = DAYS
    start: str = "00:00"
    end: str = "00:00"
    timezone: str = "UTC"

    @field_validator("days", mode="before")
    @classmethod
    def _days(cls, value: Any) -> tuple[str, ...]:
        if isinstance(value, str) or not isinstance(value, Sequence) or not value:
            raise ValueError(f"expected a non-empty list of days ({', '.join(DAYS)})")
        out = []
        for day in value:
            word = str(day).strip().lower()
            name = DAYS[DAY_NAMES.index(word)] if word in DAY_NAMES else word
            if name not in DAYS:
                raise ValueError(f"{day!r} is not a day ({', '.join(DAYS)}, or the full name)"[:120])
            out.append(name)
        return tuple(sorted(set(out), key=DAYS.index))

    @field_validator("start", "end", mode="before")
    @classmethod
    def _time(cls, value: Any) -> str:
        return _clock(value)

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            zone_of(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an IANA time zone (e.g. Europe/Berlin)"[:120]) from None
        return value

    def _local(self, day: datetime, clock: str) -> datetime:
        """The instant of ``clock`` local time on ``day``'s date, in UTC. A time the spring change skips
        resolves to the first minute after the gap; one the autumn change repeats, to its first time."""
        hours, minutes = (int(x) for x in clock.split(":"))
        return local_instant(zone_of(self.timezone), day.date(), time(hours, minutes))

    def opening(self, day: datetime) -> tuple[datetime, datetime] | None:
        """The window that opens on ``day``'s local date, as UTC instants, or None on other days."""
        if DAYS[day.weekday()] not in self.days:
            return None
        opens = self._local(day, self.start)
        closes_on = day if self.end > self.start else day + timedelta(days=1)
        return opens, self._local(closes_on, self.end)

    def edges(self, after: datetime) -> list[datetime]:
        """Every instant the window opens or closes from the window that may still run at ``after`` to
        the ones that open within the next week, ascending; computed from the definition, one day at a
        time (a few local-date resolutions), never by walking the clock."""
        instant = aware(after)
        local = instant.astimezone(zone_of(self.timezone))
        out: set[datetime] = set()
        for shift in range(-1, EDGE_HORIZON_DAYS):
            span = self.opening(local + timedelta(days=shift))
            if span is not None:
                out.update(span)
        return sorted(out)

    def next_edge(self, after: datetime) -> datetime | None:
        """The first instant after ``after`` when the window opens or closes (it becomes active or stops
        being), in UTC; None for a window that never does (every day, ``00:00``-``00:00``)."""
        return next_edge((self,), after)

    def active(self, now: datetime) -> bool:
        """Whether ``now`` (aware, or naive UTC) falls inside the window."""
        instant = aware(now)
        local = instant.astimezone(zone_of(self.timezone))
        for back in (0, 1):  # a window that opened yesterday may still run past midnight
            span = self.opening(local - timedelta(days=back))
            if span is not None and span[0] <= instant < span[1]:
                return True
        return False


class Windowed(Settings):
    """Mixin for settings that may carry ``windows``: active when any window is (always, without)."""

    windows: tuple[TimeWindow, ...] = Field(default=())

    def active_at(self, now: datetime) -> bool:
        return not self.windows or any(w.active(now) for w in self.windows)

    def next_edge(self, after: datetime) -> datetime | None:
        """The first instant after ``after`` when the setting turns on or off (None without windows, or
        when its windows together never change)."""
        return next_edge(self.windows, after)


# A weekly window opens again within 7 days: a day more covers one that opened the day before ``after``
# and a DST change on the way.
EDGE_HORIZON_DAYS = 9
_TICK = timedelta(microseconds=1)


def next_edge(windows: Sequence[TimeWindow], after: datetime) -> datetime | None:
    """The first instant after ``after`` (aware, or naive UTC) when "any of ``windows`` is active"
    changes, in UTC, or None when it never does. Pure and DST-correct: candidate instants are the
    windows' openings and closings (:meth:`TimeWindow.edges`); one where the union does not change (a
    window closing as another opens, a whole-day window on consecutive days) is skipped."""
    instant = aware(after)
    candidates = sorted({edge for w in windows for edge in w.edges(instant) if edge > instant})
    for edge in candidates:
        now_on = any(w.active(edge) for w in windows)
        if now_on != any(w.active(edge - _TICK) for w in windows):
            return edge.astimezone(UTC)
    return None
