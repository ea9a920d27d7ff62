"""Time windows in a named zone: a simulated week walked minute by minute, DST changes included."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from spillway.config import load_config_file
from spillway.errors import ConfigurationError
from spillway.model.windows import TimeWindow, Windowed

BERLIN_WEEKDAYS = TimeWindow(days=["mon", "tue", "wed", "thu", "fri"], start="08:00", end="20:00",
                             timezone="Europe/Berlin")  # fmt: skip


def walk(window: TimeWindow, start: datetime, days: int) -> list[tuple[datetime, datetime]]:
    """The UTC spans the window is active in, found by checking every minute."""
    spans: list[tuple[datetime, datetime]] = []
    t, opened = start, None
    while t < start + timedelta(days=days):
        on = window.active(t)
        if on and opened is None:
            opened = t
        if not on and opened is not None:
            spans.append((opened, t))
            opened = None
        t += timedelta(minutes=1)
    return spans


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_a_weekday_window_in_berlin_follows_daylight_saving_across_the_spring_change() -> None:
    # 2026-03-29 (Sunday) 02:00 CET -> 03:00 CEST. Week of Mon 23 March .. Sun 5 April.
    spans = walk(BERLIN_WEEKDAYS, utc(2026, 3, 23), 14)
    assert len(spans) == 10  # ten weekdays, none at the weekend
    assert spans[0] == (utc(2026, 3, 23, 7), utc(2026, 3, 23, 19))  # winter: UTC+1
    assert spans[4] == (utc(2026, 3, 27, 7), utc(2026, 3, 27, 19))  # Friday before the change
    assert spans[5] == (utc(2026, 3, 30, 6), utc(2026, 3, 30, 18))  # Monday after: UTC+2
    assert all(b - a == timedelta(hours=12) for a, b in spans)


def test_the_autumn_change_gives_a_weekday_window_its_winter_offset() -> None:
    # 2026-10-25 (Sunday) 03:00 CEST -> 02:00 CET
    spans = walk(BERLIN_WEEKDAYS, utc(2026, 10, 22), 5)
    assert spans == [
        (utc(2026, 10, 22, 6), utc(2026, 10, 22, 18)),
        (utc(2026, 10, 23, 6), utc(2026, 10, 23, 18)),
        (utc(2026, 10, 26, 7), utc(2026, 10, 26, 19)),
    ]


def test_a_night_window_runs_past_midnight_and_a_dst_night_is_an_hour_short_or_long() -> None:
    night = TimeWindow(start="22:00", end="06:00", timezone="Europe/Berlin")
    spans = walk(night, utc(2026, 3, 27, 12), 3)
    lengths = [b - a for a, b in spans]
    # Fri->Sat 8 h; Sat->Sun crosses the spring change: 7 h; Sun->Mon 8 h
    assert lengths == [timedelta(hours=8), timedelta(hours=7), timedelta(hours=8)]
    autumn = [b - a for a, b in walk(night, utc(2026, 10, 24, 12), 2)]
    assert autumn == [timedelta(hours=9), timedelta(hours=8)]


def test_a_window_opening_in_the_skipped_hour_opens_when_the_gap_ends() -> None:
    w = TimeWindow(days=["sun"], start="02:30", end="04:00", timezone="Europe/Berlin")
    # 02:30 does not exist on 2026-03-29: the window opens at 03:00 CEST = 01:00 UTC
    assert walk(w, utc(2026, 3, 28), 2) == [(utc(2026, 3, 29, 1), utc(2026, 3, 29, 2))]


def test_whole_day_utc_default_and_naive_times_are_utc() -> None:
    always = TimeWindow()
    assert always.active(datetime(2026, 1, 1, 0, 0)) and always.active(utc(2026, 7, 4, 23, 59))
    assert not TimeWindow(days=["sat"]).active(utc(2026, 12, 4, 12))  # a Friday


def test_windowed_settings_apply_always_without_windows_and_in_any_of_theirs() -> None:
    assert Windowed().active_at(utc(2026, 1, 1))
    w = Windowed.model_validate(
        {"windows": [{"start": "08:00", "end": "09:00"}, {"start": "20:00", "end": "21:00"}]}
    )
    assert w.active_at(utc(2026, 1, 1, 8, 30)) and w.active_at(utc(2026, 1, 1, 20, 0))
    assert not w.active_at(utc(2026, 1, 1, 12))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("timezone", "Mars/Olympus", "not an IANA time zone"),
        # files of the zoneinfo directory that are no place's zone: "localtime" is the host's own (a
        # laptop's and Lambda's differ), so a window would mean different hours where it is planned
        ("timezone", "localtime", "not an IANA time zone"),
        ("timezone", "posixrules", "not an IANA time zone"),
        ("timezone", "right/Europe/Berlin", "not an IANA time zone"),
        ("timezone", "", "not an IANA time zone"),  # was read as UTC here and crashed every plan
        # a folder of the zone database (US/Eastern is a zone, US is not): opening it failed with
        # IsADirectoryError, a crash of the configuration's load naming no field
        ("timezone", "US", "not an IANA time zone"),
        ("timezone", "Europe", "not an IANA time zone"),
        ("start", "25:00", "no such time of day"),
        ("end", "8h", "expected a time HH:MM"),
        ("days", ["mon", "someday"], "is not a day"),
        # a day is its name or its first three letters, nothing else that starts like one
        ("days", ["Saturn"], "is not a day"),
        ("days", ["Monkey"], "is not a day"),
        ("days", ["sunrise"], "is not a day"),
        ("days", ["wedge"], "is not a day"),
        ("days", ["tues"], "is not a day"),
        ("days", [], "non-empty list"),
    ],
)
def test_bad_windows_are_refused_naming_the_field(field: str, value: object, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        TimeWindow.model_validate({field: value})
    [error] = info.value.errors()
    assert error["loc"] == (field,) and message in error["msg"]


@pytest.mark.parametrize(
    ("written", "said"),
    [
        ("20:00", 'YAML reads an unquoted 20:00 as the number 1200 (base 60); write "20:00"'),
        ("8:00", 'YAML reads an unquoted 8:00 as the number 480 (base 60); write "08:00"'),
        ("20:00:00", 'expected a time "HH:MM" (quoted in YAML), got the number 72000'),
    ],
)
def test_an_unquoted_yaml_time_is_named_as_written(tmp_path: Path, written: str, said: str) -> None:
    """PyYAML reads YAML 1.1, whose int type has a sexagesimal form (https://yaml.org/type/int.html): an
    unquoted ``end: 20:00`` arrives as 1200, and the error named a value the user never wrote
    ("got '1200'", review r21). It names the field and says the time must be quoted."""
    path = tmp_path / "c.yaml"
    path.write_text(
        f"buffers:\n  - name: s\n    pod: {{cpu: '1'}}\n    replicas: 1\n"
        f"    windows: [{{start: '08:00', end: {written}}}]\n"
    )
    with pytest.raises(ConfigurationError) as caught:
        load_config_file(path)
    text = str(caught.value)
    assert "buffers.0.windows.0.end" in text
    message = text.split("buffers.0.windows.0.end", 1)[1]  # not the file's path
    assert said in message and "quote" in message, text
    # quoted, or with a leading 0 (no base-60 number in YAML 1.1), the time is read
    path.write_text(path.read_text().replace(f"start: '08:00', end: {written}", "start: 08:00, end: '20:00'"))
    [window] = load_config_file(path).buffers[0].windows
    assert (window.start, window.end) == ("08:00", "20:00")


@pytest.mark.parametrize("word", ["mon", "Monday", "THU", " thursday ", "SUNDAY"])
def test_a_day_is_read_by_its_name_or_its_three_letters_in_any_case(word: str) -> None:
    assert len(TimeWindow(days=[word]).days) == 1


# --- next_edge: the instants a window turns on or off, computed from its definition ------------------

EDGE_CASES = [
    (BERLIN_WEEKDAYS, utc(2026, 3, 23)),  # across the spring change
    (BERLIN_WEEKDAYS, utc(2026, 10, 19)),  # across the autumn change
    (TimeWindow(start="22:00", end="06:00", timezone="America/New_York"), utc(2026, 10, 28)),
    (TimeWindow(start="02:30", end="04:00", timezone="Europe/Berlin"), utc(2026, 3, 26)),  # in the gap
    (
        TimeWindow(days=["sun"], start="02:30", end="02:45", timezone="Europe/Berlin"),
        utc(2026, 10, 20),
    ),  # repeated hour
    (TimeWindow(days=["sat"], start="00:00", end="00:00", timezone="Asia/Kolkata"), utc(2026, 6, 1)),
]


def chained_edges(window: TimeWindow, start: datetime, days: int) -> list[datetime]:
    edges, t = [], start
    while (edge := window.next_edge(t)) is not None and edge < start + timedelta(days=days):
        edges.append(edge)
        t = edge
    return edges


@pytest.mark.parametrize(("window", "start"), EDGE_CASES)
def test_next_edge_finds_every_opening_and_closing_the_minute_walk_finds(
    window: TimeWindow, start: datetime
) -> None:
    walked = [edge for span in walk(window, start, 14) for edge in span]
    if window.active(start):
        walked = walked[1:]  # the walk starts inside a window: its first "opening" is the start
    assert chained_edges(window, start, 14) == [e for e in walked if e < start + timedelta(days=14)]


def test_next_edge_is_strictly_after_and_none_when_nothing_ever_changes() -> None:
    monday_8 = utc(2026, 11, 2, 7)  # 08:00 Berlin: the window opens now; the next edge is its closing
    assert BERLIN_WEEKDAYS.next_edge(monday_8) == utc(2026, 11, 2, 19)
    assert BERLIN_WEEKDAYS.next_edge(monday_8 - timedelta(seconds=1)) == monday_8
    friday_night = utc(2026, 11, 6, 19)
    assert BERLIN_WEEKDAYS.next_edge(friday_night) == utc(2026, 11, 9, 7)  # over the weekend
    assert BERLIN_WEEKDAYS.next_edge(datetime(2026, 11, 6, 19)) == utc(2026, 11, 9, 7)  # naive: UTC
    assert TimeWindow().next_edge(monday_8) is None  # every day, all day
    assert Windowed().next_edge(monday_8) is None  # no windows: always on


def test_a_windowed_settings_edge_skips_instants_where_its_windows_hand_over() -> None:
    morning = TimeWindow(start="08:00", end="12:00")
    afternoon = TimeWindow(start="12:00", end="18:00")
    both = Windowed(windows=(morning, afternoon))
    assert both.next_edge(utc(2026, 11, 2, 9)) == utc(2026, 11, 2, 18)  # not 12:00: still on
    assert both.next_edge(utc(2026, 11, 2, 18)) == utc(2026, 11, 3, 8)
