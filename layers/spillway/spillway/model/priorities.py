"""cluster-autoscaler's priority expander: its ConfigMap, and the priorities it holds.

cluster-autoscaler (``--expander=priority``) reads the ConfigMap ``cluster-autoscaler-priority-expander``
in its own namespace (``kube-system`` by default); its ``data.priorities`` is YAML mapping an integer
priority to a list of regular expressions over node group names (a higher number wins; a group
matching none has no priority)::

    priorities: |-
      10:
        - .*t2\\.large.*
      50:
        - .*p4d.*

Spillway takes the same block from its configuration (``expander_priorities``) or, without one, from
that ConfigMap (observe reads it; the planner ranks groups with it: :mod:`spillway.planner.expander`).

Both are read as cluster-autoscaler reads its ConfigMap (expander/priority/priority.go): the YAML
unmarshalled into ``map[int][]string`` by gopkg.in/yaml.v2, each regex compiled by Go's ``regexp``
(RE2 syntax, regexp/syntax/parse.go), a group matching a regex found anywhere in its name
(``FindStringIndex``, as ``re.search``). What it cannot read refuses the whole block, naming the
priority and the pattern's index: cluster-autoscaler too drops the whole ConfigMap then.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import yaml

CONFIGMAP_NAME = "cluster-autoscaler-priority-expander"
CONFIGMAP_NAMESPACE = "kube-system"

Priorities = dict[int, tuple[str, ...]]

# Go's int on the 64-bit platforms cluster-autoscaler runs on: yaml.v2 refuses a key outside it
INT64 = 2**63
# regexp/syntax maxRepeat: the largest count of x{n,m}, and of the product of nested counts
MAX_REPEAT = 1000
_DECIMAL = re.compile(r"[+-]?[0-9]+")  # a JSON object's key: the priority written out


def check_priorities(value: Mapping[Any, Any], *, text_keys: bool = True) -> Priorities:
    """The priorities as ``{int: (regex, ...)}``; ``ValueError`` naming the priority, and the pattern
    by its index, that cluster-autoscaler could not read: it refuses the whole ConfigMap then
    (priority.go's parsePrioritiesYAMLString), so no entry is skipped here either. ``text_keys``: a
    key may be a decimal string (a JSON configuration's); a YAML ConfigMap's may not (yaml.v2 does not
    unmarshal a ``!!str`` into an int)."""
    out: Priorities = {}
    for key, patterns in value.items():
        priority = _priority(key, text_keys)
        if priority in out:
            raise ValueError(f"priority {priority} is given twice")
        out[priority] = _patterns(priority, patterns)
    return out


def _priority(key: Any, text_keys: bool) -> int:
    """The key as yaml.v2 reads it into Go's int, but for a fractional number: yaml.v2 cuts 1.5 to 1,
    and two lists would silently become one; refused here."""
    if isinstance(key, bool):  # before int: a bool is one in Python; yaml.v2 refuses it
        raise ValueError(f"priority {key}: a boolean is not an integer priority (YAML reads true/false, "
                         "yes/no, on/off as booleans)")  # fmt: skip
    if isinstance(key, float):
        if not key.is_integer():
            cut = f" (cluster-autoscaler's yaml.v2 would cut it to {int(key)})" if math.isfinite(key) else ""
            raise ValueError(f"priority {key}: not a whole number{cut}")
        key = int(key)
    elif isinstance(key, str) and not text_keys:
        raise ValueError(f"priority {key[:32]!r}: a string, not an integer priority (unquote it)")
    elif isinstance(key, str) and _DECIMAL.fullmatch(key):
        key = int(key)
    if not isinstance(key, int):
        raise ValueError(f"{str(key)[:32]!r} is not an integer priority")
    if not -INT64 <= key < INT64:
        raise ValueError(f"priority {key}: outside a 64-bit integer")
    return key


def _patterns(priority: int, patterns: Any) -> tuple[str, ...]:
    """The priority's regexes, each compiled by Python and checked against RE2 (:func:`re2_refusal`)."""
    if patterns is None:  # ``10:`` with nothing under it: yaml.v2 reads an empty list
        return ()
    if isinstance(patterns, str) or not isinstance(patterns, list | tuple):
        raise ValueError(f"priority {priority}: expected a list of regular expressions")
    for index, pattern in enumerate(patterns):
        where = f"priority {priority}, pattern {index}: {str(pattern)[:64]!r}"
        if not isinstance(pattern, str):  # yaml.v2 takes a scalar's text (``~``: ""), Python its value
            raise ValueError(f"{where} is not a string (quote it)")
        try:
            python = python_pattern(pattern)
            re.compile(python)
        except (re.error, ValueError) as exc:
            raise ValueError(f"{where} is not a regular expression: {exc}") from None
        if why := re2_refusal(python):
            raise ValueError(f"{where} {why} (cluster-autoscaler compiles the patterns with Go's regexp)")
    return tuple(patterns)


# What Python's re takes and Go's regexp/syntax (parse.go) refuses, or reads otherwise.
_EXTENSIONS = {
    "=": "lookahead (?=...)",
    "!": "negative lookahead (?!...)",
    "<=": "lookbehind (?<=...)",
    "<!": "negative lookbehind (?<!...)",
    ">": "an atomic group (?>...)",
    "(": "a conditional (?(...)...)",
    "#": "a comment (?#...)",
    "P=": "a named backreference (?P=...)",
}
_ESCAPES = {"Z": r"\Z (RE2 writes \z)", "u": r"\u (RE2 writes \x{...})", "U": r"\U (RE2 writes \x{...})",
            "N": r"\N{...}"}  # fmt: skip
_CLASS_ESCAPES = {**_ESCAPES, "b": r"[\b] (a backspace; RE2 writes \x08)"}
_GO_FLAGS = frozenset("imsU-")  # Python's a, L, u and x are Python's alone
# One token of a pattern Python compiles: a class, an escape (a three-digit octal one whole), a group's
# opening with its extension, a repetition with its lazy ? and possessive +, or one character.
_TOKEN = re.compile(
    r"""\[\^?\]?(?:\\.|[^\]\\])*\]
    | \\(?:[1-7][0-7]{2}|.)
    | \(\?(?:P<[^>]*>|P=|<[=!]|[aiLmsux-]*[:)]|.)
    | (?:[*+?]|\{(?=[0-9,])[0-9]*(?:,[0-9]*)?\})\??\+?
    | .""",
    re.VERBOSE | re.DOTALL,
)
_COUNTS = re.compile(r"\{([0-9]*)(,?)([0-9]*)\}")


def re2_refusal(pattern: str) -> str | None:
    r"""Why Go's regexp (RE2 syntax: what cluster-autoscaler compiles the priorities with) refuses
    ``pattern`` or reads it otherwise than Python's re, or None when both read it alike. ``pattern``
    must compile in Python: only what Python accepts is looked at. Go refuses lookaround,
    backreferences (``\1`` to ``\9``; ``\101`` is octal in both), possessive quantifiers, atomic groups,
    conditionals, comments, the flags a, L, u and x, group names beyond ``[A-Za-z0-9_]``, ``\Z``,
    ``\u``, ``\U``, ``\N{...}``, ``[\b]``, an escaped non-ASCII character, and counts above 1000, alone
    or multiplied by nesting; it reads ``{,n}`` and a count with a leading zero as literal text."""
    counts = _Counts()
    for token in _TOKEN.findall(pattern):
        why = _token_refusal(token) or counts.take(token)
        if why:
            return why
    return None


def _token_refusal(token: str) -> str | None:
    if token.startswith("["):
        return _class_refusal(token)
    if token.startswith("\\"):
        return _escape_refusal(token[1], _ESCAPES, lone_digit=len(token) == 2)
    if token.startswith("(?"):
        return _extension_refusal(token[2:])
    if len(token) > 1 and token[0] in "*+?{":
        return _repetition_refusal(token)
    return None


def _escape_refusal(char: str, escapes: Mapping[str, str], *, lone_digit: bool) -> str | None:
    if char in "123456789" and lone_digit:
        return f"uses a backreference \\{char}, which RE2 lacks"
    if char in escapes:
        return f"uses {escapes[char]}, which RE2 lacks"
    if not char.isascii():
        return f"escapes the non-ASCII character {char!r}, which RE2 refuses"
    return None


def _class_refusal(token: str) -> str | None:
    r"""In a class Python reads a lone ``\1`` to ``\7`` as octal; Go only with an octal digit after."""
    for escape in re.finditer(r"\\(.)(?=(.?))", token[1:-1], re.DOTALL):
        char, after = escape.groups()
        if why := _escape_refusal(char, _CLASS_ESCAPES, lone_digit=after == "" or after not in "01234567"):
            return why
    return None


def _extension_refusal(extension: str) -> str | None:
    if extension.startswith("P<"):
        name = extension[2:-1]
        if not re.fullmatch(r"[A-Za-z0-9_]+", name):
            return f"has a group name {name!r}; RE2 takes only [A-Za-z0-9_]"
        return None
    for start, what in _EXTENSIONS.items():
        if extension.startswith(start):
            return f"uses {what}, which RE2 lacks"
    flags = sorted(set(extension[:-1]) - _GO_FLAGS)
    return f"sets flag {flags[0]}, which RE2 lacks: it has i, m, s and U" if flags else None


def _repetition_refusal(token: str) -> str | None:
    if token.endswith("+"):
        return f"uses a possessive quantifier {token}, which RE2 lacks"
    bounds = _COUNTS.match(token)
    if bounds is None:
        return None
    low, _, high = bounds.groups()
    if not low or any(len(n) > 1 and n.startswith("0") for n in (low, high)):
        return f"uses {bounds.group()}, which RE2 reads as literal text, not a repetition"
    if max(int(low), int(high or 0)) > MAX_REPEAT:
        return f"repeats {bounds.group()}: above 1000 times, which RE2 refuses"
    return None


class _Counts:
    """The product of nested counts ``{n,m}`` along a pattern, which Go keeps within 1000 (regexp/syntax
    repeatIsValid: each count's m, or n when there is no m; a count of at most 0 cuts the product);
    ``*``, ``+`` and ``?`` do not count."""

    def __init__(self) -> None:
        self.outer: list[int] = []  # per open group, the largest product its enclosing group held
        self.most = 1  # the largest product in the group open now
        self.last = 0  # the product of the item a repetition applies to

    def take(self, token: str) -> str | None:
        bounds = _COUNTS.match(token)
        if bounds is not None:
            return self._repeat(*bounds.groups())
        if token[0] in "*+?":
            return None
        self.most = max(self.most, self.last)  # the item before is complete
        if token == ")":
            self.last, self.most = self.most, self.outer.pop()
        elif token.startswith("(") and not token.endswith(")"):  # a group opens; (?i) does not
            self.outer.append(self.most)
            self.most, self.last = 1, 0
        else:
            self.last = 0 if token == "|" else 1
        return None

    def _repeat(self, low: str, comma: str, high: str) -> str | None:
        most = int(high) if high else (-1 if comma else int(low))  # Go's Max: -1 for {n,}
        count = int(low) if most < 0 else most
        self.last = 0 if most == 0 else self.last * max(count, 1)
        if self.last > MAX_REPEAT:
            return f"nests counts that multiply to {self.last}: above 1000 times, which RE2 refuses"
        return None


def parse_priorities(text: str) -> Priorities:
    """The ConfigMap's ``data.priorities`` (YAML); ``ValueError`` naming what is wrong."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(
            f"not YAML: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None
    if not isinstance(doc, dict):
        raise ValueError("expected a mapping of priorities to lists of regular expressions")
    return check_priorities(doc, text_keys=False)


# Go's ASCII classes within a bracket expression (regexp/syntax perl_groups.go posixGroup); Python's re
# has none and reads [[:alpha:]] as the set "[:alph" followed by a literal "]"
_POSIX = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7f", "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f", "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~",
    "punct": "!-/:-@\\[-`{-~", "space": "\\t-\\r ", "upper": "A-Z", "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}  # fmt: skip
_NAMED = re.compile(r"\[:(\^?)([^:\]]*):\]")


def python_pattern(pattern: str) -> str:
    """``pattern`` as Python's re must be given it to read it as Go does: each POSIX class ``[:alpha:]``
    in a bracket expression written out as its ASCII ranges (``[[:^alpha:]]``, a class of one negated
    POSIX class, as ``[^A-Za-z]``). ``ValueError`` for a name Go does not know, or a negated one among
    other items, which Python cannot write as one set."""
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            out.append(pattern[i : i + 2])
            i += 2
        elif char == "[":
            end = _class_end(pattern, i)
            out.append(_posix_class(pattern[i:end]))
            i = end
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _class_end(pattern: str, start: int) -> int:
    """Where the bracket expression opening at ``start`` ends, as Go reads it (a leading ``]`` is a
    member; ``[:name:]`` is one item); the pattern's end when it does not (re.compile says why)."""
    i = start + 1
    i += pattern.startswith("^", i)
    i += pattern.startswith("]", i)
    while i < len(pattern) and pattern[i] != "]":
        named = _NAMED.match(pattern, i)
        i = named.end() if named else i + (2 if pattern[i] == "\\" else 1)
    return i + 1


def _posix_class(token: str) -> str:
    named = list(_NAMED.finditer(token, 1))
    if not named:
        return token
    if len(named) == 1 and named[0].group(1) and named[0].span() == (1, len(token) - 1):
        return f"[^{_posix_ranges(named[0].group(2))}]"
    for found in named:
        if found.group(1):
            raise ValueError(f"{found.group()} among other members of a class: write it as its own [^...]")
    return _NAMED.sub(lambda m: _posix_ranges(m.group(2)), token)


def _posix_ranges(name: str) -> str:
    if name not in _POSIX:
        raise ValueError(f"[:{name}:] is no POSIX class Go knows")
    return _POSIX[name]


def priority_of(priorities: Mapping[int, tuple[str, ...]], group: str) -> int | None:
    """The highest priority whose regexes match the group's name (searched anywhere in it, as
    priority.go's ``FindStringIndex(id) != nil``), or None when none does."""
    matching = [
        p for p, patterns in priorities.items() if any(re.search(python_pattern(x), group) for x in patterns)
    ]
    return max(matching, default=None)
