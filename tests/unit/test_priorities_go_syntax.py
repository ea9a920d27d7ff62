"""Patterns of ``expander_priorities`` (and cluster-autoscaler's priority expander ConfigMap) read as Go's
regexp reads them: cluster-autoscaler compiles each with ``regexp.Compile`` (regexp/syntax parse.go, Perl
flags) and matches a node group's name with ``FindStringIndex(id) != nil`` (expander/priority/priority.go),
so a group must get the same priority here. The syntax is pkg.go.dev/regexp/syntax's; what Python's ``re``
would read otherwise (3.11 and 3.13 alike) is translated, and what it cannot read is refused naming the
construct, the priority and the pattern's index."""

from __future__ import annotations

import json
import re

import pytest

from spillway.model.priorities import parse_priorities, priority_of, python_pattern, re2_refusal


def _matches(pattern: str, name: str) -> bool:
    """Whether the group ``name`` gets the pattern's priority, through the same path the planner uses."""
    ranks = parse_priorities(f"{{7: {json.dumps([pattern])}}}")
    return priority_of(ranks, name) == 7


def _refused(pattern: str) -> str:
    with pytest.raises(ValueError, match=r"priority 5, pattern 1: ") as raised:
        parse_priorities(f"{{5: {json.dumps(['ok', pattern])}}}")
    return str(raised.value)


# --- what Go accepts and Python's re refuses or reads otherwise: translated -------------------------

MATCHES = [
    # \z is Go's end of text; Python 3.11 has no \z (3.13's is an alias of \Z)
    (r"p4d\z", ["gpu-p4d"], ["gpu-p4d-east", "gpu-p4d\n"]),
    # Go's $ without (?m) is end of text only; Python's $ also matches before a final newline
    (r"p4d$", ["gpu-p4d"], ["gpu-p4d\n"]),
    ("(?m)p4d$", ["gpu-p4d", "gpu-p4d\nx"], ["gpu-p4d-east"]),
    # \Q...\E is literal text; without \E it runs to the end of the pattern
    (r"\Qt2.large\E$", ["cpu-t2.large"], ["cpu-t2xlarge"]),
    (r"^\Q(a|b)*", ["(a|b)*-east"], ["a", "ab"]),
    (r"\Q.\E*x", ["x", "..x"], []),  # the * repeats the last literal character
    # (?U) swaps greedy and lazy: it cannot change whether a name matches
    ("(?U)^gpu-.+-east$", ["gpu-p4d-east"], ["gpu--east"]),
    ("(?U)a+?b", ["aab"], ["b"]),
    # \x{...} hex escapes, up to U+10FFFF
    (r"\x{41}\x{0042}", ["xAB"], ["xab"]),
    (r"^[\x{61}-\x{63}]+$", ["abc"], ["abd"]),
    (r"\x{10FFFF}", ["a\U0010ffff"], ["a"]),
    # named groups, both spellings; Go takes names Python does not (a leading digit, a name twice)
    (r"(?P<family>p4d|p5)\.", ["gpu-p5.48xlarge"], ["gpu-p3.2xlarge"]),
    (r"(?<family>p4d|p5)\.", ["gpu-p4d.24xlarge"], ["gpu-p3.2xlarge"]),
    (r"(?P<1st>a)|(?P<1st>b)", ["b"], ["c"]),
    # negated POSIX classes, alone or among other members
    ("^[[:^alpha:]]+$", ["123-_"], ["a1"]),
    ("^gpu-[[:digit:]_-]+$", ["gpu-1_2-3"], ["gpu-1a"]),
    ("^[a[:^digit:]]+$", ["a-b", "xyz"], ["a1"]),
    ("^[^[:^digit:]]+$", ["123"], ["12a"]),
    # flag groups: scoped, set mid-pattern (Python 3.11 refuses a global flag not at the start), cleared
    ("(?i:GPU)-p4d", ["gpu-p4d", "GpU-p4d"], ["gpu-P4D"]),
    ("^gpu-(?i)P4D$", ["gpu-p4d", "gpu-P4d"], ["GPU-p4d"]),
    ("(?i)gpu-(?-i)p4d", ["GPU-p4d"], ["GPU-P4D"]),
    ("a(?i)b|c", ["C", "aB"], ["AB"]),  # the flag holds past | to the group's end, as Go's parser keeps it
    ("(?:(?i)a)b", ["Ab"], ["AB"]),  # and no further than the group
    ("(?s)a.b", ["a\nb"], []),
    ("a.b", ["a-b"], ["a\nb"]),
    ("(?m)^east", ["x\neast"], ["x-east"]),
    ("(?)p4d", ["p4d"], []),  # an empty flag group: nothing set
    # Go's case folding: k and s also match the Kelvin sign and the long s, and nothing else folds to ASCII
    ("(?i)^k8s$", ["K8S", "\u212a8\u017f"], ["k8z"]),
    ("(?i)^[^k]$", ["x"], ["K", "\u212a"]),  # folded first, then negated
    ("(?i)^\\W$", ["-"], ["\u212a", "\u017f"]),
    ("(?i)^\u0131$", ["\u0131"], ["i", "I"]),  # the dotless i folds to nothing else
    # octal: \12 is a newline to Go (a backreference to Python); up to \777
    (r"a\12b", ["a\nb"], ["ab"]),
    (r"\101\0", ["A\x00"], ["A"]),
    (r"\400", ["\u0100"], []),
    (r"\v\f\a", ["\x0b\x0c\x07"], []),
    # Go's \d \s \w \b are ASCII; Python's are Unicode
    (r"gpu-\d", ["gpu-3"], ["gpu-\u0663"]),
    (r"a\sb", ["a b", "a\tb"], ["a\x0bb", "a\u00a0b"]),
    (r"^\B$", [""], ["a"]),  # no word boundary in an empty text: Python's \B (before 3.14) fails there
    (r"\bp4d\b", ["gpu-p4d-east", "\u00e9p4d"], ["xp4d"]),  # \u00e9 is no ASCII word character
    (r"[\d\W]x", ["1x", "-x", "\u00e9x"], ["ax", "_x"]),
    # counts Go reads as literal text: Python would repeat
    ("a{,3}", ["x-a{,3}"], ["aaa"]),
    ("a{01}", ["a{01}"], ["a"]),
    ("a{,}", ["a{,}"], ["a"]),
    # a repetition Go takes where Python finds nothing to repeat
    ("^*gpu", ["gpu-a", "x-gpu"], ["gp"]),  # ^ repeated, so maybe not at all
    ("(?:a*)*b", ["aab"], ["c"]),
    (r"[]a]", ["]"], ["b"]),
    (r"[^]a]", ["b"], ["]", "a"]),
    ("", ["anything"], []),
]


@pytest.mark.parametrize(("pattern", "hits", "misses"), MATCHES)
def test_a_pattern_go_accepts_matches_the_names_go_matches(
    pattern: str, hits: list[str], misses: list[str]
) -> None:
    assert re2_refusal(pattern) is None
    assert [name for name in hits + misses if _matches(pattern, name)] == hits


# --- what Go refuses, or Python cannot read: refused, naming the construct ---------------------------

REFUSED = [
    # Unicode classes: Go reads them, Python's re has none
    (r"\pL", r"\pL"),
    (r"\p{Greek}", r"\p{Greek}"),
    (r"\PL", r"\PL"),
    (r"\p{^Greek}", r"\p{^Greek}"),
    (r"[\p{Han}a]", r"\p{Han}"),
    # Go refuses these
    (r"\C", r"\C"),
    (r"[\Q]\E]", r"\Q"),
    (r"\x{110000}", r"\x{110000}"),
    (r"\x{}", r"\x{}"),
    (r"\xg1", r"\x"),
    ("(?P<na-me>a)", "group name"),
    ("(?<>a)", "group name"),
    ("(?i-)a", "(?i-)"),
    ("(?--i)a", "(?--"),
    ("a**", "a repetition on a repetition"),
    ("(?i)*", "nothing before"),
    ("(|*)", "nothing before"),
    ("a{3,2}", "{3,2}"),
    ("(((a{600}){0}){5}b){300}", "counts that multiply to 1500"),
    ("[[:foo:]]", "[:foo:]"),
    ("[z-a]", "z-a"),
    ("(gpu", "closing )"),
    ("gpu)", ")"),
    ("[gpu", "closing ]"),
    ("gpu\\", "backslash"),
    (r"\e", r"\e"),
]


@pytest.mark.parametrize(("pattern", "words"), REFUSED)
def test_a_pattern_go_refuses_or_python_cannot_read_is_refused_naming_it(pattern: str, words: str) -> None:
    message = _refused(pattern)
    assert words in message
    assert "pattern 1" in message and "priority 5" in message


def test_a_unicode_class_is_refused_saying_python_cannot_read_it() -> None:
    assert "Python" in _refused(r"^\p{Greek}+$")


# --- real-world patterns: the names they match keep matching, the others keep not matching ----------

NAMES = [
    "eks-prod-ng-gpu-p4d-20240101-abc",
    "eks-prod-spot-m5-2xlarge-7f3a",
    "eks-prod-on-demand-m5.4xlarge",
    "cpu-t2.large-us-east-1a",
    "cpu-t2xlarge-us-east-1a",
    "k8s-Spot-GPU-p5",
    "nodes.dev.example.com",
    "team_a-c5.9xlarge-spot",
]

REAL_WORLD = [
    (r".*t2\.large.*", {"cpu-t2.large-us-east-1a"}),
    (".*p4d.*", {"eks-prod-ng-gpu-p4d-20240101-abc"}),
    ("^eks-prod-spot-.*$", {"eks-prod-spot-m5-2xlarge-7f3a"}),
    (".*spot.*", {"eks-prod-spot-m5-2xlarge-7f3a", "team_a-c5.9xlarge-spot"}),
    ("(?i).*spot.*", {"eks-prod-spot-m5-2xlarge-7f3a", "team_a-c5.9xlarge-spot", "k8s-Spot-GPU-p5"}),
    (r"^.*m5[\.-](2|4)xlarge.*$", {"eks-prod-spot-m5-2xlarge-7f3a", "eks-prod-on-demand-m5.4xlarge"}),
    (r"\bspot\b", {"eks-prod-spot-m5-2xlarge-7f3a", "team_a-c5.9xlarge-spot"}),
    (r"^[[:alnum:]_-]+$", {n for n in NAMES if "." not in n}),
    (r"nodes\.dev\.example\.com$", {"nodes.dev.example.com"}),
    (r"\Qnodes.dev.example.com\E\z", {"nodes.dev.example.com"}),
    (r"^(?P<pool>[a-z0-9]+)-t2\.", {"cpu-t2.large-us-east-1a"}),
    (r"[cm]\d\.\d?xlarge", {"eks-prod-on-demand-m5.4xlarge", "team_a-c5.9xlarge-spot"}),
    (r"(?i)gpu-p[45]", {"eks-prod-ng-gpu-p4d-20240101-abc", "k8s-Spot-GPU-p5"}),
    (".*", set(NAMES)),
]


@pytest.mark.parametrize(("pattern", "matching"), REAL_WORLD)
def test_real_world_patterns_keep_matching_the_same_group_names(pattern: str, matching: set[str]) -> None:
    assert {name for name in NAMES if _matches(pattern, name)} == matching


def test_the_translation_is_one_python_pattern_compiled_by_both_supported_pythons() -> None:
    """One translator serves the check and the match: what it writes uses only syntax Python 3.11 has
    (no \\z, no global flag past the start, no (?<name>...))."""
    translated = python_pattern(r"^gpu-(?i)P4D\z|(?<n>x)\Qa.b\E")
    assert r"\z" not in translated and "(?<n>" not in translated and "(?i)" not in translated
    assert re.compile(translated).search("gpu-p4D")


def test_wide_classes_under_i_fold_as_rune_by_rune_and_in_bounded_time() -> None:
    """Go folds a class under (?i) rune by rune (parse.go appendFoldedRange), which is cheap in Go; done
    so in Python each class past ASCII took a third of a second, and a ConfigMap pattern with forty of
    them held the planner Lambda for over ten seconds on every cold start. They fold the same, in
    bounded time."""
    import time

    from spillway.model import goregex

    def brute(lo: int, hi: int) -> list[tuple[int, int]]:
        runes = [(cp, cp) for cp in range(lo, hi + 1)]
        runes += [(f, f) for cp in range(max(lo, 0x41), min(hi, 0x1E943) + 1) for f in goregex._orbit(cp)]
        return goregex._clean(runes)

    for lo, hi in [(0x80, 0x10FFFF), (0x61, 0xFFFF), (0x1000, 0x2200), (0x42, 0x1E942)]:
        assert goregex._fold([(lo, hi)]) == brute(lo, hi)
    pattern = "(?i)" + r"[\x{80}-\x{10FFFF}]" * 40
    started = time.process_time()
    python_pattern(pattern)
    assert time.process_time() - started < 5
    assert _matches(pattern, "\u00c9" * 40) and _matches(pattern, "\u00e9" * 40)
