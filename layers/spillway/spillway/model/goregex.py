r"""Go's regular expressions (``regexp.Compile``: RE2 syntax, regexp/syntax with its Perl flags) read into
Python's ``re``, so that a pattern matches the same strings in both.

cluster-autoscaler compiles its priority expander's patterns with Go's ``regexp`` (:mod:`.priorities`).
:func:`python_pattern` parses a pattern as Go's parser does (regexp/syntax/parse.go; the syntax is the one
pkg.go.dev/regexp/syntax documents) and writes each construct out in syntax that Python 3.11 and later
read alike:

- every character class as its code point ranges: Go's ``\d \s \w``, POSIX classes (``[[:^alpha:]]``,
  ``[[:digit:]_-]``) and ``\b`` are ASCII, Python's Unicode, and Python has no POSIX classes;
- case folding (``(?i)``) done here, as Go does it while parsing (a class folded, then negated), with Go's
  simple folding of ASCII: ``k`` and ``s`` also match the Kelvin sign and the long s, and no other
  character folds into ASCII (the dotless i folds to nothing); outside ASCII the letters' Python case
  pairs stand in for Go's orbits. AWS limits an Auto Scaling group's name to ASCII 33 to 126, so a name
  is matched exactly;
- ``^ $ .`` for the flags in force (Go's ``$`` without ``(?m)`` is ``\z``, Python's ``\Z``; Python's
  ``$`` also matches before a final newline), ``(?U)`` by swapping greedy and lazy, a flag set mid-group
  held to the group's end (past ``|``, as Go keeps it), and every group non-capturing (names and
  numbers match nothing: ``(?<n>...)``, ``(?P<1st>...)`` and a name used twice read as Go reads them);
- ``\Q...\E``, ``\x{10FFFF}``, octal ``\123`` (``\12`` is a newline, not a backreference), ``\a \f \v``,
  and what Go reads as literal text (``a{,3}``, ``a{01}``) as the characters they stand for.

What Go refuses raises :class:`GoRegexError` naming the construct; so do Unicode classes (``\pL``,
``\p{Greek}``), which Go reads and Python's ``re`` has no equivalent of. So do Go's limits on a parsed
pattern: its parse tree at most 1000 high (``MAX_HEIGHT``) and its program at most 3,355,443 instructions
(``MAX_SIZE``), both counted as parse.go counts them (:class:`_Item`); a whole pattern above
``MAX_PROGRAM`` (100,000) instructions is refused too, by Spillway alone (compiling it would hold the plan); Go's third limit, 32M runes in
character classes, takes more than 7 runes per byte of pattern, which no class reaches within a
ConfigMap's 1 MiB. Nothing here recurses over the tree, so any depth Go allows is read.

The parser builds a syntax tree; :func:`python_pattern` writes it out, and :func:`compiled` compiles it to a
:class:`Matcher` that runs as Go's regexp does, without backtracking, in time linear in the name: the
planner matches with that, never with Python's ``re``, which can take exponential time.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, cast

MAX_REPEAT = 1000  # regexp/syntax maxRepeat: the largest count, and product of nested counts
# parse.go maxHeight: the height of Go's parse tree (Go 1.17.8 on, CVE-2022-24921; "expression nests too
# deeply" from Go 1.19), and maxSize: 128 MB of 40-byte Insts, by parse.go's calcSize estimate of the
# program (Go 1.19.2 on, CVE-2022-41715; "expression too large" from Go 1.20)
MAX_HEIGHT = 1000
MAX_SIZE = (128 << 20) // (5 * 8)
# Spillway's own bound on a whole pattern's program (the same estimate): the planner compiles each pattern
# in Python, about 10 us and 200 bytes an instruction, so a pattern Go takes at its limit would hold a plan
# for half a minute and most of its memory; a priority pattern for Auto Scaling group names (255
# characters at most) needs far less
MAX_PROGRAM = 100_000
MAX_RUNE = 0x10FFFF
_MIN_FOLD, _MAX_FOLD = 0x41, 0x1E943  # parse.go minFold, maxFold: no rune outside folds

Ranges = list[tuple[int, int]]


class GoRegexError(ValueError):
    """A pattern Go's regexp refuses, or one Python's re cannot read as Go does; says which construct."""


def _table(*pairs: int) -> tuple[tuple[int, int], ...]:
    return tuple(zip(pairs[::2], pairs[1::2], strict=True))


# regexp/syntax perl_groups.go: perlGroup and posixGroup, all ASCII
_PERL = {"d": _table(0x30, 0x39), "s": _table(0x9, 0xA, 0xC, 0xD, 0x20, 0x20),
         "w": _table(0x30, 0x39, 0x41, 0x5A, 0x5F, 0x5F, 0x61, 0x7A)}  # fmt: skip
_POSIX = {
    "alnum": _table(0x30, 0x39, 0x41, 0x5A, 0x61, 0x7A), "alpha": _table(0x41, 0x5A, 0x61, 0x7A),
    "ascii": _table(0x0, 0x7F), "blank": _table(0x9, 0x9, 0x20, 0x20), "cntrl": _table(0x0, 0x1F, 0x7F, 0x7F),
    "digit": _table(0x30, 0x39), "graph": _table(0x21, 0x7E), "lower": _table(0x61, 0x7A),
    "print": _table(0x20, 0x7E), "punct": _table(0x21, 0x2F, 0x3A, 0x40, 0x5B, 0x60, 0x7B, 0x7E),
    "space": _table(0x9, 0xD, 0x20, 0x20), "upper": _table(0x41, 0x5A), "word": _PERL["w"],
    "xdigit": _table(0x30, 0x39, 0x41, 0x46, 0x61, 0x66),
}  # fmt: skip
# Go's caseOrbit (unicode/tables.go): the only runes outside ASCII that fold into it
_INTO_ASCII = {0x17F: "sS", 0x212A: "kK", 0x73: "\u017f", 0x53: "\u017f", 0x6B: "\u212a", 0x4B: "\u212a"}

# What Python's re takes and Go's parser refuses, after "(?" (named for the message)
_EXTENSIONS = {
    "=": "lookahead (?=...)", "!": "negative lookahead (?!...)", "<=": "lookbehind (?<=...)",
    "<!": "negative lookbehind (?<!...)", ">": "an atomic group (?>...)", "(": "a conditional (?(...)...)",
    "#": "a comment (?#...)", "P=": "a named backreference (?P=...)",
}  # fmt: skip
_ESCAPES = {"Z": r"\Z (RE2 writes \z)", "u": r"\u (RE2 writes \x{...})", "U": r"\U (RE2 writes \x{...})",
            "N": r"\N{...}", "C": r"\C (any byte)"}  # fmt: skip
_CHAR_ESCAPES = {"a": 0x7, "f": 0xC, "n": 0xA, "r": 0xD, "t": 0x9, "v": 0xB}
# Empty-width assertions (regexp/syntax EmptyOp), by the escape Go writes them with (^ and $ under (?m)),
# in Python: Go's \b is ASCII; its \B matches in an empty text, where Python's (before 3.14) does not
_ASSERTIONS = {"A": r"\A", "z": r"\Z", "b": r"(?a:\b)", "B": r"(?a:(?!\b))", "^": "(?m:^)", "$": "(?m:$)"}
_COUNTS = re.compile(r"\{(0|[1-9][0-9]*)(?:(,)(0|[1-9][0-9]*)?)?\}")  # parse.go parseRepeat, parseInt


def _count(digits: str) -> int:
    """A repeat count's digits as a number, any past nine digits as 10^9: parse.go's parseInt stops at
    10^8 and parseRepeat refuses the count, as above 1000 refuses it here (``int`` would refuse more than
    4,300 digits itself, with a message naming no pattern)."""
    return int(digits) if len(digits) <= 9 else 10**9


_NAME = re.compile(r"[A-Za-z0-9_]+")
_OCTAL = re.compile(r"0[0-7]{0,2}|[1-7][0-7]{1,2}")  # \1 to \7 alone would be a backreference
_HEX = re.compile(r"\{([0-9A-Fa-f]+)\}|[0-9A-Fa-f]{2}")


def python_pattern(pattern: str) -> str:
    """``pattern``, a Go regular expression, as a Python one that matches the same strings;
    :class:`GoRegexError` for what Go refuses or Python cannot read."""
    return "|".join(map(_python, _Parser(pattern).parse().branches))


def go_refusal(pattern: str) -> str | None:
    """Why Go's regexp refuses ``pattern`` (or Python cannot read it as Go does), or None: the parse alone,
    without Spillway's own ``MAX_PROGRAM``."""
    try:
        _Parser(pattern).parse()
    except GoRegexError as exc:
        return str(exc)
    return None


def check(pattern: str) -> None:
    """:class:`GoRegexError` when Go refuses ``pattern``, Python cannot read it as Go does, or its program
    is above ``MAX_PROGRAM``: the parse alone, no program built (:func:`compiled` builds it when a name is
    matched)."""
    _Parser(pattern).within_budget()


@functools.lru_cache(maxsize=1024)
def compiled(pattern: str) -> Matcher:
    """``pattern`` compiled to a :class:`Matcher` (cached: the planner matches every group against every
    pattern); :class:`GoRegexError` as :func:`python_pattern`."""
    return Matcher(_Parser(pattern).within_budget())


# --- character classes: sorted, merged code point ranges, as parse.go's cleanClass keeps them -------


def _clean(ranges: Iterable[tuple[int, int]]) -> Ranges:
    out: Ranges = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(hi, out[-1][1]))
        else:
            out.append((lo, hi))
    return out


def _negate(ranges: Ranges) -> Ranges:
    out, lo = [], 0
    for start, end in ranges:
        if lo < start:
            out.append((lo, start - 1))
        lo = end + 1
    return [*out, (lo, MAX_RUNE)] if lo <= MAX_RUNE else out


def _orbit(cp: int) -> Iterator[int]:
    """The runes ``cp`` matches under (?i) besides itself (Go: unicode.SimpleFold's orbit)."""
    char = chr(cp)
    for other in (char.lower(), char.upper()):
        if len(other) == 1 and other.isascii() == char.isascii():
            yield ord(other)
    yield from map(ord, _INTO_ASCII.get(cp, ""))


_WIDE = 4096  # a range wider than this is folded through the table of runes that fold (_folding)


@functools.cache
def _folding() -> tuple[int, ...]:
    """Every rune between minFold and maxFold that folds to another, in order: built once, so that a
    wide class under (?i) costs a lookup, not a pass over some 120,000 runes each time."""
    return tuple(cp for cp in range(_MIN_FOLD, _MAX_FOLD + 1) if any(f != cp for f in _orbit(cp)))


def _fold(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """The ranges with every rune's case-folding equivalents added (parse.go appendFoldedRange)."""
    out: Ranges = []
    for lo, hi in ranges:
        out.append((lo, hi))
        if lo <= _MIN_FOLD and hi >= _MAX_FOLD:
            continue  # folding adds nothing to a range this wide
        low, high = max(lo, _MIN_FOLD), min(hi, _MAX_FOLD)
        if high - low > _WIDE:
            table = _folding()
            runes: Iterable[int] = table[bisect.bisect_left(table, low) : bisect.bisect_right(table, high)]
        else:
            runes = range(low, high + 1)
        for cp in runes:
            out.extend((f, f) for f in _orbit(cp))
    return _clean(out)


def _group(table: Iterable[tuple[int, int]], negated: bool, fold: bool) -> Ranges:
    """A Perl or POSIX class: folded first, then negated (parse.go appendGroup)."""
    ranges = _fold(table) if fold else _clean(table)
    return _negate(ranges) if negated else ranges


def _char(cp: int) -> str:
    char = chr(cp)
    if char.isascii() and (char.isalnum() or char == "_"):
        return char
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"


def _class_text(ranges: Ranges) -> str:
    if not ranges:
        return "(?!)"  # an empty class matches nothing, as Go's [^\x00-\x{10FFFF}]
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _char(ranges[0][0])
    return "[" + "".join(_char(lo) if lo == hi else f"{_char(lo)}-{_char(hi)}" for lo, hi in ranges) + "]"


# --- what the parser reads: a syntax tree, written out for Python's re and compiled for the Matcher --


@dataclass(frozen=True)
class Chars:
    """One character of the ranges (a literal is a class of one; no range: matches nothing)."""

    ranges: tuple[tuple[int, int], ...]
    spelled: str = ""  # its Python text when not the ranges' own (. and (?s).)


@dataclass(frozen=True)
class Assert:
    """An empty-width assertion, by its key in ``_ASSERTIONS``."""

    kind: str


@dataclass(frozen=True)
class Concat:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Alternate:
    branches: tuple[Concat, ...]


@dataclass(frozen=True)
class Repeat:
    """``node`` ``low`` to ``high`` times (-1: unbounded); lazy or not, which no match's existence
    depends on; ``counted``: written {n,m}."""

    node: Node
    low: int
    high: int
    lazy: bool = False
    counted: bool = False


Node = Chars | Assert | Concat | Alternate | Repeat
_ANY = Chars(((0, MAX_RUNE),), "(?s:.)")
_NOT_NEWLINE = Chars(((0, 0x9), (0xB, MAX_RUNE)), r"[^\n]")


def _python(root: Node) -> str:
    """The node in Python's re syntax: every group non-capturing, each repeated item grouped. Written
    from a stack, not by recursion: a tree as deep as Go allows is written too."""
    out: list[str] = []
    todo: list[Node | str] = [root]
    while todo:
        item = todo.pop()
        if isinstance(item, str):
            out.append(item)
        else:
            todo.extend(reversed(_python_parts(item)))
    return "".join(out)


def _python_parts(node: Node) -> list[Node | str]:
    """The node's text, its children left to be written in their place."""
    match node:
        case Chars(ranges, spelled):
            return [spelled or _class_text(list(ranges))]
        case Assert(kind):
            return [_ASSERTIONS[kind]]
        case Concat(items):
            return list(items)
        case Alternate(branches):
            parts: list[Node | str] = ["(?:"]
            for index, branch in enumerate(branches):
                parts += ["|", branch] if index else [branch]
            return [*parts, ")"]
        case Repeat(inner, low, high, lazy, counted):
            if not counted:
                op = {(0, -1): "*", (1, -1): "+", (0, 1): "?"}[low, high]
            else:
                op = f"{{{low}}}" if low == high else f"{{{low},{'' if high < 0 else high}}}"
            return ["(?:", inner, ")" + op + "?" * lazy]
    raise TypeError(node)  # pragma: no cover - Node is closed


# --- the parser ------------------------------------------------------------------------------------


@dataclass
class _Item:
    """A piece of the pattern, with what Go's parser counts of the node it makes of it (parse.go):
    ``weight`` the product of the counts {n,m} nested in it (0 under a {0}: repeatIsValid stops);
    ``height`` that node's height (checkHeight) and ``size`` the instructions calcSize estimates for it
    (checkSize). To count them as Go does, it also says how Go's tree holds it: ``literal`` "c" or "i"
    for a literal character (its FoldCase flag: a run of them with one flag is one literal string),
    "" otherwise; ``char`` for one character or class (factor's round 3 merges a run of such
    alternatives into one class); ``kind`` "concat" or "alt" for a concatenation or alternation of
    several pieces, which an enclosing one of the same kind takes in as its own (collapse)."""

    node: Node
    weight: int = 1
    height: int = 1
    size: int = 1
    literal: str = ""
    char: bool = False
    kind: str = ""


def _concat(items: list[_Item]) -> _Item:
    """The items in sequence: one piece per run of literals of one flag (Go's literal strings), an
    empty match for none, the piece itself for one, else a concatenation one level above its pieces."""
    node = Concat(tuple(item.node for item in items))
    weight = max((item.weight for item in items), default=1)
    pieces, height, last = 0, 0, ""
    for item in items:
        if not (item.literal and item.literal == last):
            pieces += 1
            height = max(height, item.height - (item.kind == "concat"))
        last = item.literal
    size = max(1, sum(item.size for item in items))
    if pieces > 1:
        return _Item(node, weight, height + 1, size, kind="concat")
    if len(items) == 1:
        only = items[0]
        return _Item(node, weight, only.height, only.size, only.literal, only.char, only.kind)
    return _Item(node, weight, 1, size, items[0].literal if items else "")  # a string, or empty


def _alternate(branches: list[_Item]) -> _Item:
    """The branches as alternatives: a run of one-character branches merged into one class, a single
    piece as itself, else an alternation one level above its pieces and a split between each two."""
    node = Alternate(tuple(cast(Concat, branch.node) for branch in branches))  # made by _concat
    weight = max(branch.weight for branch in branches)
    if len(branches) == 1:
        return replace(branches[0], node=node)
    pieces, height, size, run = 0, 0, 0, False
    for branch in branches:
        if not (branch.char and run):
            pieces += 1
            height = max(height, branch.height - (branch.kind == "alt"))
            size += branch.size
        run = branch.char
    if pieces == 1:
        return _Item(node, weight, char=True)
    return _Item(node, weight, height + 1, size + pieces - 1, kind="alt")


def _repeated(item: _Item, low: int, high: int, counted: bool) -> tuple[int, int]:
    """(height, size) of the item repeated: calcSize's x* 2 more than x, x+ and x? 1 more, x{n,} 1 more
    than n copies, x{n,m} m copies and m-n splits."""
    sub = item.size
    if not counted:
        size = 2 + sub if high < 0 and low == 0 else 1 + sub
    elif high < 0:
        size = 2 + sub if low == 0 else 1 + low * sub
    else:
        size = high * sub + high - low
    return item.height + 1, max(1, size)


def _check_limits(item: _Item) -> None:
    """Go's checkLimits on the node made: its compiled size, then its height."""
    if item.size > MAX_SIZE:
        raise GoRegexError(f"compiles to {item.size} instructions: above {MAX_SIZE} (128 MB), which RE2 "
                           "refuses (Go's regexp: expression too large)")  # fmt: skip
    if item.height > MAX_HEIGHT:
        raise GoRegexError(f"nests {item.height} levels deep: above {MAX_HEIGHT}, which RE2 refuses (Go's "
                           "regexp: expression nests too deeply)")  # fmt: skip


@dataclass
class _Group:
    flags: frozenset[str]  # the flags in force where it opened, restored at its ) (parseRightParen)
    capturing: bool = False  # a capture is a node of Go's tree (OpCapture); (?:...) is none
    branches: list[list[_Item]] = field(default_factory=list)
    items: list[_Item] = field(default_factory=list)

    def item(self) -> _Item:
        inner = _alternate([_concat(branch) for branch in [*self.branches, self.items]])
        if self.capturing:  # OpCapture: a level, and calcSize's 2 more
            inner = replace(inner, height=inner.height + 1, size=inner.size + 2)
            inner.literal, inner.char, inner.kind = "", False, ""
        _check_limits(inner)
        return inner


class _Parser:
    """Go's parse loop (parse.go ``parse``) over one pattern, writing Python as it goes."""

    def __init__(self, pattern: str) -> None:
        self.text = pattern
        self.at = 0
        self.flags: frozenset[str] = frozenset()  # Go's i, m, s, U set now
        self.groups = [_Group(frozenset())]
        self.last_repeat = ""  # the repetition just read, as parse.go's lastRepeat
        self.size = 0  # the whole program's size, as calcSize estimates it, once parsed

    def parse(self) -> Alternate:
        if any(0xD800 <= ord(char) <= 0xDFFF for char in self.text):
            raise GoRegexError("is not valid UTF-8 text, which RE2 refuses")
        while self.at < len(self.text):
            self.last_repeat = self._step()
        if len(self.groups) > 1:
            raise GoRegexError("misses a closing ), which RE2 refuses")
        whole = self.groups[0].item()
        self.size = whole.size
        node = whole.node
        assert isinstance(node, Alternate)
        return node

    def within_budget(self) -> Alternate:
        """:meth:`parse`, and :class:`GoRegexError` for a program above ``MAX_PROGRAM`` too."""
        node = self.parse()
        if self.size > MAX_PROGRAM:
            raise GoRegexError(f"compiles to {self.size} instructions: above the {MAX_PROGRAM} Spillway "
                               f"compiles (Go's regexp takes up to {MAX_SIZE})")  # fmt: skip
        return node

    def _step(self) -> str:
        """Reads one construct; returns it when it was a repetition."""
        char = self.text[self.at]
        if char in "*+?" or (char == "{" and _COUNTS.match(self.text, self.at)):
            return self._repeat()
        handlers = {"(": self._open, ")": self._close, "|": self._bar, "[": self._class, "\\": self._escape}
        handlers.get(char, self._plain)()
        return ""

    def _push(self, node: Node, literal: str = "") -> None:
        self.groups[-1].items.append(_Item(node, literal=literal, char=isinstance(node, Chars)))

    def _literal(self, cp: int) -> None:
        fold = "i" in self.flags  # Go's literal keeps the flag, whether or not the rune folds
        self._push(Chars(tuple(_fold([(cp, cp)]) if fold else [(cp, cp)])), "i" if fold else "c")

    def _plain(self) -> None:
        char = self.text[self.at]
        self.at += 1
        lines = "m" in self.flags
        spelled: dict[str, Node] = {"^": Assert("^" if lines else "A"), "$": Assert("$" if lines else "z"),
                                    ".": _ANY if "s" in self.flags else _NOT_NEWLINE}  # fmt: skip
        if char in spelled:
            self._push(spelled[char])
        else:
            self._literal(ord(char))  # "{" too when no count follows: parse.go reads it as text

    # -- repetitions: * + ? {n} {n,} {n,m}, lazy with ?, swapped by (?U) --

    def _repeat(self) -> str:
        start = self.at
        counts = _COUNTS.match(self.text, self.at) if self.text[start] == "{" else None
        if counts:
            low, comma, high = counts.groups()
            most = _count(high) if high else (-1 if comma else _count(low))
            bounds, self.at = (_count(low), most), counts.end()
        else:
            bounds = {"*": (0, -1), "+": (1, -1), "?": (0, 1)}[self.text[start]]
            self.at += 1
        lazy = self.text.startswith("?", self.at)
        self.at += lazy
        token = self.text[start : self.at]
        self._check_repeat(token, bounds, counted=counts is not None)
        item = self.groups[-1].items[-1]
        item.node = Repeat(item.node, *bounds, lazy=lazy != ("U" in self.flags), counted=counts is not None)
        item.height, item.size = _repeated(item, *bounds, counts is not None)
        item.literal, item.char, item.kind = "", False, ""
        _check_limits(item)  # before the counts' product, as parse.go's repeat
        if token[0] == "{":
            item.weight = _weight(token, bounds, item.weight)
        return token

    def _check_repeat(self, token: str, bounds: tuple[int, int], *, counted: bool) -> None:
        if self.last_repeat:
            if token == "+":
                raise GoRegexError(f"uses a possessive quantifier {self.last_repeat}+, which RE2 lacks")
            raise GoRegexError(f"stacks a repetition on a repetition ({self.last_repeat}{token}), which RE2 "
                               "refuses: write (?:x*)* to repeat one")  # fmt: skip
        low, high = bounds
        if counted and max(low, high) > MAX_REPEAT:
            raise GoRegexError(f"repeats {token}: above 1000 times, which RE2 refuses")
        if counted and 0 <= high < low:
            raise GoRegexError(f"repeats {token}: fewer at most than at least, which RE2 refuses")
        if not self.groups[-1].items:
            raise GoRegexError(f"has nothing before {token} to repeat, which RE2 refuses")

    # -- groups and alternation --

    def _open(self) -> None:
        rest = self.text[self.at + 2 :] if self.text.startswith("(?", self.at) else None
        if rest is None:
            self._open_group(self.at + 1, capturing=True)
            return
        for start, what in _EXTENSIONS.items():
            if rest.startswith(start):
                raise GoRegexError(f"uses {what}, which RE2 lacks")
        if (rest.startswith("P<") and len(rest) > 2) or (rest.startswith("<") and len(rest) > 1):
            self._named_group(rest.startswith("P") + 3)
        else:
            self._flags()

    def _open_group(self, end: int, flags: frozenset[str] | None = None, *, capturing: bool = False) -> None:
        self.groups.append(_Group(self.flags, capturing))
        self.flags = self.flags if flags is None else flags
        self.at = end

    def _named_group(self, name_at: int) -> None:
        """(?P<name>...) or (?<name>...) (Go 1.22 on): a name of [A-Za-z0-9_]; Go takes a leading digit
        and a name given twice, which Python's re refuses: the group is written without its name."""
        end = self.text.find(">", self.at)
        name = self.text[self.at + name_at : end] if end >= 0 else self.text[self.at + name_at :]
        if end < 0 or not _NAME.fullmatch(name):
            raise GoRegexError(f"has a group name {name!r}; RE2 takes only [A-Za-z0-9_]")
        self._open_group(end + 1, capturing=True)

    def _flags(self) -> None:
        """(?flags) or (?flags:...): i m s U, some after one -; nothing else (parse.go parsePerlFlags)."""
        flags, sign, seen, at = set(self.flags), 1, False, self.at + 2
        while at < len(self.text):
            char, at = self.text[at], at + 1
            if char in "imsU":
                (flags.add if sign > 0 else flags.discard)(char)
                seen = True
            elif char == "-" and sign > 0:
                sign, seen = -1, False
            elif char in ":)" and (sign > 0 or seen):
                if char == ":":
                    self._open_group(at, frozenset(flags))
                else:
                    self.flags, self.at = frozenset(flags), at
                return
            else:
                break
        token = self.text[self.at : at]
        if token[-1:].isalpha():
            raise GoRegexError(f"sets flag {token[-1]}, which RE2 lacks: it has i, m, s and U")
        raise GoRegexError(f"uses {token}, which RE2 refuses")

    def _close(self) -> None:
        if len(self.groups) == 1:
            raise GoRegexError("has a ) that closes no group, which RE2 refuses")
        group = self.groups.pop()
        self.flags = group.flags
        self.groups[-1].items.append(group.item())
        self.at += 1

    def _bar(self) -> None:
        group = self.groups[-1]
        group.branches.append(group.items)
        group.items = []
        self.at += 1

    # -- escapes --

    def _escape(self) -> None:
        kind = self.text[self.at + 1 : self.at + 2]
        if kind and kind in _ASSERTIONS:
            self._push(Assert(kind))
            self.at += 2
        elif kind == "Q":  # literal text up to \E, or to the end
            end = self.text.find(r"\E", self.at + 2)
            stop = len(self.text) if end < 0 else end
            for char in self.text[self.at + 2 : stop]:
                self._literal(ord(char))
            self.at = stop if end < 0 else end + 2
        elif perl := self._perl_class(self.at):
            self._push(Chars(tuple(perl)))
            self.at += 2
        else:
            self._unicode_class(self.at)
            self._literal(self._escaped_char(in_class=False))

    def _perl_class(self, at: int) -> Ranges | None:
        kind = self.text[at + 1 : at + 2]
        if not kind or kind.lower() not in _PERL:
            return None
        return _group(_PERL[kind.lower()], kind.isupper(), "i" in self.flags)

    def _unicode_class(self, at: int) -> None:
        if self.text[at + 1 : at + 2] in ("p", "P"):
            braced = self.text.startswith("{", at + 2)
            end = self.text.find("}", at) + 1 if braced else at + 3
            spelled = self.text[at : end if end > at else len(self.text)]
            raise GoRegexError(f"uses the Unicode class {spelled}, which Go's regexp reads and Python's re has "
                               "no equivalent of: write its characters out (e.g. [a-z])")  # fmt: skip

    def _escaped_char(self, *, in_class: bool) -> int:
        """The character an escape stands for (parse.go parseEscape); advances past it."""
        char = self.text[self.at + 1 : self.at + 2]
        start, self.at = self.at, self.at + 2
        if not char:
            raise GoRegexError("ends in a lone \\ (trailing backslash), which RE2 refuses")
        if char.isascii() and not char.isalnum():
            return ord(char)  # punctuation stands for itself, \_ too
        if char in _CHAR_ESCAPES:
            return _CHAR_ESCAPES[char]
        if octal := _OCTAL.match(self.text, start + 1):
            self.at = octal.end()
            return int(octal.group(), 8)
        if char == "x":
            return self._hex(start)
        raise GoRegexError(_escape_refusal(char, in_class))

    def _hex(self, start: int) -> int:
        """\\x41, or \\x{...} of one hex digit or more up to 10FFFF."""
        hexa = _HEX.match(self.text, self.at)
        value = int(hexa.group(1) or hexa.group(), 16) if hexa else MAX_RUNE + 1
        if hexa is None or value > MAX_RUNE:
            braced = self.text.startswith("{", self.at)
            end = self.text.find("}", self.at) + 1 if braced else self.at + 2
            spelled = self.text[start : end if end > start else len(self.text)]
            raise GoRegexError(f"has a malformed hex escape {spelled} (RE2 takes \\x41, or \\x{{41}} up to "
                               "\\x{10FFFF})")  # fmt: skip
        self.at = hexa.end()
        return value

    # -- bracket expressions --

    def _class(self) -> None:
        """[...] as parse.go parseClass: a leading ] is a member, [:name:] one item, a-z a range,
        folded item by item under (?i), then negated for [^...]."""
        start, self.at = self.at, self.at + 1
        negated = self.text.startswith("^", self.at)
        self.at += negated
        ranges: Ranges = []
        first = True
        while first or self.text[self.at : self.at + 1] != "]":
            if self.at >= len(self.text):
                raise GoRegexError(
                    f"misses the closing ] of {self.text[start : start + 16]!r}, which RE2 refuses"
                )
            first = False
            ranges.extend(self._class_item())
        self.at += 1
        ranges = _clean(ranges)
        ranges = _negate(ranges) if negated else ranges
        self._push(Chars(tuple(ranges)), _class_literal(ranges))

    def _class_item(self) -> Ranges:
        fold = "i" in self.flags
        if self.text.startswith("[:", self.at) and (end := self.text.find(":]", self.at + 2)) >= 0:
            spelled = self.text[self.at : end + 2]
            name = spelled[2:-2].removeprefix("^")
            if name not in _POSIX:
                raise GoRegexError(f"uses {spelled}, which is no POSIX class RE2 knows")
            self.at = end + 2
            return _group(_POSIX[name], spelled.startswith("[:^"), fold)
        if self.text.startswith("\\", self.at):
            self._unicode_class(self.at)
            if perl := self._perl_class(self.at):
                self.at += 2
                return perl
        start = self.at
        low = high = self._class_char()
        if self.text.startswith("-", self.at) and self.text[self.at + 1 : self.at + 2] not in ("", "]"):
            self.at += 1
            high = self._class_char()
            if high < low:
                spelled = self.text[start : self.at]
                raise GoRegexError(
                    f"has the range {spelled}, whose end comes before its start, which RE2 refuses"
                )
        return _fold([(low, high)]) if fold else [(low, high)]

    def _class_char(self) -> int:
        if self.at >= len(self.text):
            raise GoRegexError("misses the closing ] of a class, which RE2 refuses")
        if self.text[self.at] == "\\":
            return self._escaped_char(in_class=True)
        self.at += 1
        return ord(self.text[self.at - 1])


def _class_literal(ranges: Ranges) -> str:
    """What Go's push makes of a class: a literal for one rune ("c") or a pair that fold to each other
    only, [Aa] ("i"); else it stays a class ("")."""
    runes = [cp for lo, hi in ranges for cp in range(lo, min(hi, lo + 2) + 1)][:3]
    if len(runes) == 1:
        return "c"
    first, second = runes[0], runes[-1]
    pair = set(_orbit(first)) - {first} == {second} and set(_orbit(second)) - {second} == {first}
    if len(runes) == 2 and pair:
        return "i"
    return ""


def _weight(token: str, bounds: tuple[int, int], inner: int) -> int:
    """The product of nested counts Go keeps within 1000 (parse.go repeatIsValid: each count's most,
    or least when unbounded; a {0} stops the walk)."""
    low, high = bounds
    count = low if high < 0 else high
    weight = 0 if count == 0 else count * max(inner, 1)
    if weight > MAX_REPEAT:
        raise GoRegexError(f"nests counts that multiply to {weight} ({token} outermost): above 1000 times, "
                           "which RE2 refuses")  # fmt: skip
    return weight


def _escape_refusal(char: str, in_class: bool) -> str:
    if char in "123456789":
        return f"uses a backreference \\{char}, which RE2 lacks"
    if in_class and char == "b":
        return r"uses [\b] (a backspace; RE2 writes \x08), which RE2 lacks"
    if char in _ESCAPES:
        return f"uses {_ESCAPES[char]}, which RE2 lacks"
    if not char.isascii():
        return f"escapes the non-ASCII character {char!r}, which RE2 refuses"
    return f"uses \\{char}, an escape RE2 does not know"


# --- the matcher: Go's, in time linear in the name ------------------------------------------------
#
# Python's re backtracks: ``^([a-z0-9]+-?)*$`` against 30 characters ending in "!" tries some 2**30 ways.
# Go's regexp takes time linear in the text, whatever the pattern (pkg.go.dev/regexp's package doc;
# swtch.com/~rsc/regexp/regexp1.html): it compiles a pattern to a program, an NFA, and runs every
# thread of it in step over the text, one thread per instruction at a time (regexp/exec.go: the
# machine's add follows empty-width instructions once per position, step advances each thread by one
# rune). The Matcher does that, answering only whether a match exists, as cluster-autoscaler's
# FindStringIndex(id) != nil does: at most len(program) instructions per position of the name.

_CHAR, _SPLIT, _JUMP, _EMPTY, _MATCH = range(5)
# (_CHAR, lows, highs), (_SPLIT, pc, pc), (_JUMP, pc, None), (_EMPTY, kind, None), (_MATCH, None, None)
Instruction = tuple[int, Any, Any]
_WORD = frozenset("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz")  # Go's isWordChar


Task = Node | Callable[[], None]  # a node to compile, or a fix-up once what precedes it is compiled


class _Compiler:
    """A syntax tree to a program (regexp/syntax compile.go's shape: split and jump; a count written out,
    x{2,4} as xx(x(x)?)?, which the parser keeps within 1000 copies). Compiled from a stack of tasks,
    not by recursion: a tree as deep as Go allows compiles too."""

    def __init__(self) -> None:
        self.program: list[Instruction] = []

    def hole(self) -> int:
        self.program.append((_JUMP, -1, None))
        return len(self.program) - 1

    def emit(self, root: Node) -> None:
        todo: list[Task] = [root]
        while todo:
            task = todo.pop()
            if callable(task):
                task()
            else:
                todo.extend(reversed(self.expand(task)))

    def expand(self, node: Node) -> list[Task]:
        """Emits what the node is itself; returns its children and fix-ups, to be done in order."""
        match node:
            case Chars(ranges):
                self.program.append((_CHAR, tuple(lo for lo, _ in ranges), tuple(hi for _, hi in ranges)))
            case Assert(kind):
                self.program.append((_EMPTY, kind, None))
            case Concat(items):
                return list(items)
            case Alternate(branches):
                return self.alternate(branches)
            case Repeat(inner, low, high):
                rest = self.optional(inner, high - low) if high >= 0 else self.star(inner)
                return [*([inner] * low), *rest]
        return []

    def alternate(self, branches: tuple[Concat, ...]) -> list[Task]:
        """Each branch but the last behind a split to the next, each ending in a jump past the last."""
        jumps: list[int] = []
        tasks: list[Task] = []
        for branch in branches[:-1]:
            split: list[int] = []
            tasks += [partial(self.open, split), branch, partial(self.next_branch, split, jumps)]
        return [*tasks, branches[-1], partial(self.land, jumps)]

    def star(self, inner: Node) -> list[Task]:
        loop: list[int] = []
        return [partial(self.open, loop), inner, partial(self.loop_back, loop)]

    def optional(self, inner: Node, times: int) -> list[Task]:
        splits: list[int] = []
        return [*[task for _ in range(times) for task in (partial(self.open, splits), inner)],
                partial(self.skip_here, splits)]  # fmt: skip

    def open(self, holes: list[int]) -> None:
        holes.append(self.hole())

    def next_branch(self, split: list[int], jumps: list[int]) -> None:
        jumps.append(self.hole())
        self.program[split[0]] = (_SPLIT, split[0] + 1, len(self.program))

    def land(self, jumps: list[int]) -> None:
        for jump in jumps:
            self.program[jump] = (_JUMP, len(self.program), None)

    def loop_back(self, loop: list[int]) -> None:
        self.program.append((_JUMP, loop[0], None))
        self.program[loop[0]] = (_SPLIT, loop[0] + 1, len(self.program))

    def skip_here(self, splits: list[int]) -> None:
        for split in splits:
            self.program[split] = (_SPLIT, split + 1, len(self.program))


def _holds(kind: str, text: str, at: int) -> bool:
    """Whether the empty-width assertion holds between text[at - 1] and text[at] (regexp/syntax
    EmptyOpContext: Go's \\b and \\B over ASCII word characters)."""
    before, after = text[at - 1 : at], text[at : at + 1]
    if kind in "bB":
        return ((before in _WORD) != (after in _WORD)) == (kind == "b")  # "" (no character): no word
    return {"A": at == 0, "z": not after, "^": at == 0 or before == "\n", "$": not after or after == "\n"}[
        kind
    ]


class Matcher:
    """A pattern compiled to a program run as Go's regexp runs it (no backtracking): whether it matches
    anywhere in a text, in at most ``size`` steps per position of the text."""

    def __init__(self, tree: Alternate) -> None:
        compiler = _Compiler()
        compiler.emit(tree)
        compiler.program.append((_MATCH, None, None))
        self.program = compiler.program

    @property
    def size(self) -> int:
        return len(self.program)

    def search(self, text: str) -> bool:
        """Whether the pattern matches somewhere in ``text`` (Go's MatchString, FindStringIndex != nil)."""
        return self.run(text)[0]

    def run(self, text: str) -> tuple[bool, int]:
        """Whether the pattern matches somewhere in ``text``, and how many instructions that visited."""
        seen = [-1] * len(self.program)
        threads: list[int] = []
        steps = 0
        for at in range(len(text) + 1):
            threads.append(0)  # a match may begin at any position: the search is unanchored
            threads, matched, visited = self._closure(threads, text, at, seen)
            steps += visited
            if matched:
                return True, steps
            if at < len(text):
                threads = [pc + 1 for pc in threads if _takes(self.program[pc], ord(text[at]))]
        return False, steps

    def _closure(self, starts: list[int], text: str, at: int, seen: list[int]) -> tuple[list[int], bool, int]:
        """The character instructions the threads reach at ``at`` without consuming a character, each
        once (``seen``), and whether one reaches the match (exec.go's add)."""
        program, stack, out, visited = self.program, starts[::-1], [], 0
        while stack:
            pc = stack.pop()
            if seen[pc] == at:
                continue
            seen[pc] = at
            visited += 1
            op, first, second = program[pc]
            if op == _CHAR:
                out.append(pc)
            elif op == _SPLIT:
                stack += (second, first)
            elif op == _JUMP:
                stack.append(first)
            elif op == _EMPTY:
                if _holds(first, text, at):
                    stack.append(pc + 1)
            else:
                return out, True, visited
        return out, False, visited


def _takes(instruction: Instruction, cp: int) -> bool:
    _, lows, highs = instruction
    index = bisect.bisect_right(lows, cp) - 1
    return index >= 0 and cp <= highs[index]
