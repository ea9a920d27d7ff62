"""What ``expander_priorities`` and cluster-autoscaler's priority expander ConfigMap accept, as
cluster-autoscaler reads its ConfigMap (expander/priority/priority.go): YAML unmarshalled into
``map[int][]string`` by gopkg.in/yaml.v2, every regex compiled by Go's ``regexp`` (RE2 syntax); any
entry it cannot read refuses the whole ConfigMap, no entry is skipped."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from plan_world import World

from spillway.config import load_config_file
from spillway.errors import ConfigurationError
from spillway.model.priorities import parse_priorities, priority_of, re2_refusal

# --- the priority: an integer, as yaml.v2 reads a key into Go's int --------------------------------


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("true:\n  - a\n", "priority True: a boolean"),  # yaml.v2: cannot unmarshal !!bool into int
        ("yes:\n  - a\n", "priority True: a boolean"),  # YAML 1.1, both readers: a boolean
        ("1.5:\n  - a\n", "priority 1.5: not a whole number"),  # yaml.v2 would cut it to 1
        ("-2.5:\n  - a\n", "priority -2.5: not a whole number"),
        (".inf:\n  - a\n", "priority inf: not a whole number"),
        ("9223372036854775808:\n  - a\n", "outside a 64-bit integer"),  # Go's int on 64 bits
        ("'10':\n  - a\n", "priority '10': a string"),  # yaml.v2: cannot unmarshal !!str into int
    ],
)
def test_a_priority_that_is_not_an_integer_is_refused_naming_it(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=re.escape(words)):
        parse_priorities(text + "50:\n  - b\n")


def test_an_integer_priority_reads_as_yaml_v2_reads_it() -> None:
    """Hex, a whole float and a key with nothing under it (yaml.v2: an empty list) read as Go does."""
    ranks = parse_priorities("0x10:\n  - a\n2.0:\n  - b\n-5:\n  - c\n7:\n")
    assert ranks == {16: ("a",), 2: ("b",), -5: ("c",), 7: ()}
    assert priority_of(ranks, "a-b") == 16 and priority_of(ranks, "nothing") is None


def test_the_configuration_takes_json_keys_and_refuses_what_is_not_an_integer(tmp_path: Path) -> None:
    path = tmp_path / "spillway.json"
    path.write_text(json.dumps({"expander_priorities": {"50": ["p4d"], "-10": [".*"]}}))
    assert load_config_file(path).expander_priorities == {50: ("p4d",), -10: (".*",)}

    for text, words in (("{true: [a]}", "priority True: a boolean"), ("{1.5: [a]}", "priority 1.5"),
                        ("{'1.5': [a]}", "'1.5' is not an integer priority"),
                        ("{10: [a], '+10': [b]}", "priority 10 is given twice")):  # fmt: skip
        yaml_path = tmp_path / "spillway.yaml"
        yaml_path.write_text(f"expander_priorities: {text}\n")
        with pytest.raises(ConfigurationError, match=re.escape(words)) as raised:
            load_config_file(yaml_path)
        assert raised.value.field == "expander_priorities"


def test_a_pattern_that_is_not_a_string_is_refused_naming_its_index() -> None:
    """yaml.v2 would read ``~`` as "" (matching every group) where Python reads None: quoted, both
    read the same text."""
    for item in ("~", "[a, b]", "10"):
        with pytest.raises(ValueError, match=r"priority 5, pattern 1: .* not a string"):
            parse_priorities(f"5:\n  - ok\n  - {item}\n")


# --- the patterns: what Python's re compiles and Go's regexp (RE2) refuses or reads otherwise -------

REFUSED = [
    ("(?=p4d)", "lookahead"),
    ("gpu(?!-spot)", "negative lookahead"),
    ("(?<=gpu-)p4d", "lookbehind"),
    ("(?<!cpu-)p4d", "negative lookbehind"),
    (r"(gpu)-\1", "backreference"),
    (r"(a)(b)(c)(d)(e)(f)(g)(h)\8", "backreference"),
    ("(?P<f>p4d)-(?P=f)", "named backreference"),
    ("p4d*+", "possessive"),
    ("p4d++", "possessive"),
    ("p4d?+", "possessive"),
    ("p{2}+", "possessive"),
    ("(?>gpu|gpu-p4d)", "atomic group"),
    ("(gpu)?(?(1)-p4d|cpu)", "conditional"),
    (r"p4d\Z", r"\Z"),
    (r"caf\u00e9", r"\u"),
    (r"\U0001F600", r"\U"),
    (r"\N{LATIN SMALL LETTER E WITH ACUTE}", r"\N"),
    (r"[\b]", r"[\b]"),
    (r"[\1]", "backreference"),
    ("caf\\\u00e9", "non-ASCII"),
    ("(?#a comment)p4d", "comment"),
    ("(?x) p4d", "flag x"),
    (r"(?a)\w", "flag a"),
    ("(?P<famille\u00e9>p4d)", "group name"),
    ("a{1001}", "above 1000"),
    ("a{2,1001}", "above 1000"),
    ("(a{100}){11}", "counts that multiply to 1100"),
    ("((a{10}b){10}){11}", "counts that multiply to 1100"),
]


@pytest.mark.parametrize(("pattern", "words"), REFUSED)
def test_a_pattern_re2_refuses_or_reads_otherwise_is_named(pattern: str, words: str) -> None:
    re.compile(pattern)  # Python takes it: only the RE2 check can refuse it
    why = re2_refusal(pattern)
    assert why is not None and words in why

    with pytest.raises(ValueError, match=r"priority 5, pattern 1: .*RE2") as raised:
        parse_priorities(f"{{5: {json.dumps(['ok', pattern])}}}")
    assert words in str(raised.value)


ACCEPTED = [
    r".*t2\.large.*",
    r"^gpu-(p4d|p5)\b",
    "(?i)GPU",
    "(?i:gpu)-(?-i:P4D)",
    "(?s:.)",
    "(?m)^x$",
    r"(?P<family>m5)\.",
    "[a-z0-9-]+",
    r"[\d_\]\\]",
    r"[\101-\132]",  # octal, three digits: a range in both
    r"\d{2,3}",
    r"\x41\x{42}",
    r"\101",
    r"\0",
    r"\_",
    "a{1000}",
    "(a{10}){100}",
    "((a{600}){0}){5}",  # a count of 0 cuts the product, as Go's repeatIsValid
    "(a{500}){1,}",
    "a+?b??c*?d{2,}?",
    "x{}",  # literal braces in both
    "x{a}",
    r"\{,3\}",
]


@pytest.mark.parametrize("pattern", ACCEPTED)
def test_a_pattern_both_read_alike_is_accepted(pattern: str) -> None:
    assert re2_refusal(pattern) is None
    assert parse_priorities(f"{{5: {json.dumps([pattern])}}}") == {5: (pattern,)}


def test_a_pattern_is_searched_anywhere_in_the_group_name_as_go_findstringindex() -> None:
    """priority.go matches with ``FindStringIndex(id) != nil``: unanchored, as ``re.search``."""
    ranks = parse_priorities("10:\n  - p4d\n20:\n  - ^gpu-.*-east$\n")
    assert priority_of(ranks, "team-a-p4d-west") == 10
    assert priority_of(ranks, "gpu-p4d-east") == 20
    assert priority_of(ranks, "x-gpu-p5-east") is None


# --- the ConfigMap, read from a cluster List (spillway plan) -----------------------------------------


def test_the_configmap_is_refused_whole_naming_the_entry() -> None:
    """One bad entry refuses the ConfigMap, as cluster-autoscaler's parsePrioritiesYAMLString returns
    an error for it and keeps none of the others; the snapshot keeps why."""
    w = World()
    w.items.append({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "cluster-autoscaler-priority-expander", "namespace": "kube-system"},
                    "data": {"priorities": "50:\n  - p4d\n10:\n  - ok\n  - (?=gpu)\n"}})  # fmt: skip
    snapshot = w.parsed()[0]
    assert snapshot.expander_priorities == {}
    assert re.match(r"priority 10, pattern 1: '\(\?=gpu\)'", snapshot.expander_problem)


def test_posix_classes_are_read_as_go_reads_them() -> None:
    # Go's regexp takes [[:digit:]] as a class of ASCII digits (perl_groups.go posixGroup); Python's re
    # alone would read the set "[:digt" then a literal "]", and the group would silently lose its priority
    priorities = parse_priorities("10:\n  - ^gpu-[[:digit:]]+$\n20:\n  - ^[[:^digit:]]+$\n")

    assert priority_of(priorities, "gpu-123") == 10
    assert priority_of(priorities, "gpu-1]") is None
    assert priority_of(priorities, "cpu-spot") == 20  # a class of one negated POSIX class
    assert priority_of(priorities, "cpu-1") is None  # a digit: neither
    with pytest.raises(ValueError, match=r"pattern 0: .*\[:foo:\], which is no POSIX class"):
        parse_priorities("1:\n  - '[[:foo:]]'\n")  # Go refuses a name it does not know
