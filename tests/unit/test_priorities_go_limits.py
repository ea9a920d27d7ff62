"""Go's limits on a parsed regexp (regexp/syntax parse.go), which cluster-autoscaler's priority expander
meets through ``regexp.Compile``: a parse tree at most ``maxHeight`` (1000) high (Go 1.17.8 on,
CVE-2022-24921; ``expression nests too deeply`` from Go 1.19) and a program at most ``maxSize`` =
128 MB / 40-byte Inst = 3,355,443 instructions by parse.go's ``calcSize`` (Go 1.19.2 on, CVE-2022-41715;
``expression too large`` from Go 1.20). Spillway refuses what Go refuses, and reads what Go reads at
any depth Go allows, without Python's recursion limit coming first."""

from __future__ import annotations

import json

import pytest

from spillway.model.goregex import MAX_HEIGHT, MAX_PROGRAM, MAX_SIZE, compiled, go_refusal, python_pattern
from spillway.model.priorities import configmap_priorities, parse_priorities, re2_refusal


def _captures(depth: int, core: str = "a") -> str:
    return "(" * depth + core + ")" * depth


def _stars(depth: int) -> str:
    pattern = "a"
    for _ in range(depth):
        pattern = f"(?:{pattern})*"
    return pattern


def test_the_limits_are_go_s() -> None:
    assert MAX_HEIGHT == 1000
    assert MAX_SIZE == (128 << 20) // (5 * 8) == 3_355_443


# --- nesting: parse.go maxHeight, the height of Go's parse tree ----------------------------------


def test_captures_nested_to_go_s_height_are_read_and_match() -> None:
    pattern = _captures(999)  # 999 captures over a literal: a tree 1000 high, as Go allows
    assert re2_refusal(pattern) is None
    matcher = compiled(pattern)
    assert matcher.search("xay") and not matcher.search("xy")
    assert python_pattern(pattern).count("(?:") == 999


def test_one_level_past_go_s_height_is_refused_naming_the_depth() -> None:
    why = re2_refusal(_captures(1000))
    assert why is not None and "1001" in why and "nests too deeply" in why
    with pytest.raises(ValueError, match=r"priority 5, pattern 1: '\(\(\(.*1001 levels"):
        parse_priorities(f"{{5: {json.dumps(['ok', _captures(1000)])}}}")


def test_repetitions_count_a_level_each() -> None:
    assert re2_refusal(_stars(999)) is None
    assert compiled(_stars(999)).search("b")  # (a)* matches the empty string anywhere
    why = re2_refusal(_stars(1000))
    assert why is not None and "1001" in why


def test_a_literal_string_is_one_node_and_two_pieces_are_a_concatenation() -> None:
    assert re2_refusal(_captures(999, "abc")) is None  # Go's literal string "abc": one node
    assert compiled(_captures(999, "abc")).search("xabcx")
    why = re2_refusal(_captures(999, "a."))  # a concatenation of two nodes: one level more
    assert why is not None and "1001" in why


def test_non_capturing_groups_add_no_level_at_any_depth() -> None:
    # Go's parser collapses a group of one piece into that piece: (?:(?:ab)) is the literal "ab"
    pattern = "(?:" * 5000 + "ab" + ")" * 5000
    assert re2_refusal(pattern) is None
    assert compiled(pattern).search("xaby") and not compiled(pattern).search("a b")
    assert python_pattern(pattern).endswith("ab" + ")" * 5000)


# --- size: parse.go maxSize, the program calcSize estimates -------------------------------------


def test_a_program_up_to_go_s_size_is_read_and_one_past_it_is_refused() -> None:
    at_limit = "a{1000}" * 3355 + "a" * 443  # 3,355,000 + 443 instructions
    assert go_refusal(at_limit) is None
    why = go_refusal(at_limit + "a")
    assert why is not None and "3355444" in why and "expression too large" in why


def test_the_size_is_go_s_estimate_captures_and_repetitions_included() -> None:
    # a capture costs 2 more than its contents (calcSize's OpCapture): 3349 x 1002 passes the limit
    assert go_refusal("(?:a{1000})" * 3349) is None
    assert "3355698" in (go_refusal("(a{1000})" * 3349) or "")
    # x{2,5} is xx(x(x(x)?)?)?: 5 copies and 3 splits, 8; a hundred of it 800
    assert go_refusal("(?:a{2,5}){100}" * 4194) is None  # 3,355,200
    assert "3356000" in (go_refusal("(?:a{2,5}){100}" * 4195) or "")
    # x* is 2 more than x: (?:ab)* 4, a thousand of it 4000
    assert go_refusal("(?:(?:ab)*){1000}" * 838) is None  # 3,352,000
    assert "3356000" in (go_refusal("(?:(?:ab)*){1000}" * 839) or "")


def test_an_alternation_of_single_characters_is_one_class() -> None:
    # parse.go factor (round 3) merges a|b|c|d into [a-d]: one instruction, not 4 and 3 splits
    assert go_refusal("(?:a|b|c|d){1000}" * 3355) is None
    assert "expression too large" in (go_refusal("(?:a|bc){1000}" * 3355) or "")


# --- Spillway's own budget: a program Go takes that compiling in Python would hold the plan for ----------


def test_a_program_above_spillway_s_budget_is_refused_though_go_takes_it() -> None:
    within, above = "a{1000}" * (MAX_PROGRAM // 1000), "a{1000}" * (MAX_PROGRAM // 1000) + "a"
    assert re2_refusal(within) is None and not compiled(within).search("gpu-" + "a" * 99)
    assert go_refusal(above) is None  # Go compiles it
    why = re2_refusal(above)
    assert why is not None and f"{MAX_PROGRAM + 1} instructions" in why and str(MAX_SIZE) in why
    with pytest.raises(ValueError, match=r"above the 100000 Spillway compiles"):
        compiled(above)


def test_a_configmap_with_a_pattern_above_the_budget_is_read_as_none_and_says_why() -> None:
    # 1,000 branches repeated 1,000 times: 3 KB of text, about 3 million instructions (28 s and 640 MB
    # to compile before the budget)
    pattern = "(?:" + "ab|" * 1000 + "c){1000}"
    assert go_refusal(pattern) is None
    priorities, why = configmap_priorities({"priorities": f"10: [{json.dumps(pattern)}]\n5: ['.*']\n"})
    assert priorities == {} and "Spillway compiles" in why and "priority 10, pattern 0" in why


@pytest.mark.parametrize("count", ["{" + "9" * 5000 + "}", "{1," + "9" * 5000 + "}", "{" + "9" * 5000 + ",}"])
def test_a_count_of_thousands_of_digits_is_refused_as_go_refuses_it_naming_the_pattern(count: str) -> None:
    """Go's parseInt stops counting at 10^8 and parseRepeat refuses the count (invalid repeat size);
    Spillway converted the digits with int(), which Python refuses past 4,300 of them, so the refusal
    said that and named neither the priority nor the pattern."""
    priorities, why = configmap_priorities({"priorities": f"10: [{json.dumps('gpu' + count)}]\n"})
    assert priorities == {} and why.startswith("priority 10, pattern 0") and "above 1000 times" in why
