"""``expander_priorities`` patterns match group names in time linear in the name, as Go's regexp does
("guaranteed to run in time linear in the size of the input", pkg.go.dev/regexp): cluster-autoscaler
matches each pattern against each group's name on every loop, and so does the plan Lambda. Python's re
backtracks: ``^([a-z0-9]+-?)*$`` against 30 characters ending in "!" took it some 50 s, on every plan.

The matcher (:class:`spillway.model.goregex.Matcher`) runs the pattern as an NFA over the name, each
instruction at most once per position; its answer is the one Python's re gives for the translated pattern
(:func:`python_pattern`, checked against Go), which serves as the oracle where it is fast: short names."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_priorities_go_syntax import MATCHES, NAMES, REAL_WORLD

from spillway.model.goregex import compiled
from spillway.model.priorities import priority_of, python_pattern, re2_refusal

# AWS: an Auto Scaling group's name is up to 255 characters (ASCII 33 to 126)
LONGEST = 255

# patterns on which a backtracking matcher takes time exponential in the name (or a high power of it)
PATHOLOGICAL = [
    ("^([a-z0-9]+-?)*$", "a" * 29 + "!"),
    ("^([a-z0-9]+-?)*$", "a" * (LONGEST - 1) + "!"),
    ("(a|a)*b", "a" * LONGEST),
    ("(a+)+$", "a" * (LONGEST - 1) + "!"),
    ("(.*a){20}", "a" * 19 + "!" * (LONGEST - 19)),  # 19 a: one short
    ("(?i)^(x+x+)+y$", "X" * LONGEST),
    (r"^(\w|\d)*[.]$", "9" * LONGEST),
]


@pytest.mark.parametrize(("pattern", "name"), PATHOLOGICAL)
def test_a_backtracking_pattern_is_matched_in_steps_linear_in_the_name(pattern: str, name: str) -> None:
    """Each instruction of the program is visited at most once per position of the name: the work is
    bounded by the program's size times the name's length, whatever the pattern."""
    matcher = compiled(pattern)
    matched, steps = matcher.run(name)
    assert not matched  # none of these names holds what the pattern needs at its end
    assert steps <= matcher.size * (len(name) + 1)
    assert priority_of({9: (pattern,)}, name) is None  # the planner's path


def test_the_steps_grow_linearly_with_the_name() -> None:
    matcher = compiled("^([a-z0-9]+-?)*$")
    steps = [matcher.run("a" * n + "!")[1] for n in (20, 40, 80, 160)]
    growth = [b - a for a, b in itertools.pairwise(steps)]  # for 20, 40, 80 more characters
    assert growth == [growth[0], 2 * growth[0], 4 * growth[0]]


def test_a_pattern_that_backtracks_on_a_miss_still_matches_what_it_should() -> None:
    name = "-".join(["ab12"] * 51)[:LONGEST]
    for pattern in ("^([a-z0-9]+-?)*$", "(a|b)*2", "(.*a){20}"):
        assert compiled(pattern).search(name)
        assert priority_of({3: (pattern,)}, name) == 3
    assert compiled(pattern) is compiled(pattern)  # compiled once per pattern


# --- the same answer as the translation, read by Python's re ----------------------------------------

TABLE_PATTERNS = sorted({p for p, _, _ in MATCHES} | {p for p, _ in REAL_WORLD})
TABLE_NAMES = sorted({n for _, hits, misses in MATCHES for n in hits + misses} | set(NAMES))


def _agrees(pattern: str, name: str) -> None:
    expected = re.search(python_pattern(pattern), name) is not None
    assert compiled(pattern).search(name) is expected, (pattern, name)


@pytest.mark.parametrize("pattern", TABLE_PATTERNS)
def test_every_table_pattern_matches_the_names_its_translation_matches(pattern: str) -> None:
    for name in TABLE_NAMES:
        _agrees(pattern, name)


_NAME_CHARS = "abAB019-_.\n k\u212a\u017f\u00e9"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=st.sampled_from(TABLE_PATTERNS), name=st.text(_NAME_CHARS + "pdgustn", max_size=20))
def test_table_patterns_agree_with_their_translation_on_random_names(pattern: str, name: str) -> None:
    _agrees(pattern, name)


# fmt: off
ATOMS = ["a", "b", "A", "-", ".", "[ab]", "[^a]", "[a-c]", r"\d", r"\w", r"\W", r"\s", "^", "$", r"\b",
         r"\B", r"\A", r"\z", r"\n", "[[:alpha:]]", r"\x{212A}", "k", "(?i:k)", "(?i:a)", "(?s:.)", ""]
# fmt: on
_SHORT_NAMES = st.text("abAB1-_k\n \u212a", max_size=10)  # short: Python's re is the oracle only there
REPEATS = ["*", "+", "?", "*?", "{2}", "{0,2}", "{1,}", "{0}", "{2,3}?"]


def _patterns() -> st.SearchStrategy[str]:
    def grow(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.lists(inner, min_size=2, max_size=3).map("".join),
            st.lists(inner, min_size=2, max_size=3).map("|".join),
            st.tuples(inner, st.sampled_from(["(", "(?:", "(?m:", "(?s:", "(?i:", "(?U:"])).map(
                lambda t: f"{t[1]}{t[0]})"
            ),
            st.tuples(inner, st.sampled_from(REPEATS)).map(lambda t: f"(?:{t[0]}){t[1]}"),
        )

    flags = st.sampled_from(["", "(?m)", "(?s)", "(?i)", "(?ms)"])
    body = st.recursive(st.sampled_from(ATOMS), grow, max_leaves=8)
    return st.tuples(flags, body).map("".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=_patterns(), names=st.lists(_SHORT_NAMES, min_size=1, max_size=6))
def test_random_patterns_agree_with_their_translation(pattern: str, names: list[str]) -> None:
    assert re2_refusal(pattern) is None, pattern  # the grammar writes only what Go accepts
    for name in names:
        _agrees(pattern, name)
