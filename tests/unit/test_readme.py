"""README.md's examples are true of the code, and stay true.

Each check is a function from the README's text to the problems it finds (empty: the README holds), so
that the same function runs on the real README and, in ``test_each_check_fails_on_a_broken_line``, on a
copy with one line broken: every check is shown able to fail. Extraction is kept simple: fenced blocks by
their language tag, tables by their header row, commands from ``sh`` blocks and inline code spans, and
the README in document order (headings, paragraphs, list items, table rows, sh command lines) for the
flags its prose names, each owned by the command named before it (:func:`bare_flags`).
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib.util
import re
import shlex
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from examples import EXAMPLE
from pydantic import BaseModel, ValidationError

from spillway.act.events import QUIET_CODES
from spillway.cli import build_parser
from spillway.config import PlannerConfig
from spillway.local.cfn import load_template
from spillway.local.kubeapi import resources
from spillway.model import provreq
from spillway.model.k8s import _model_for
from spillway.model.windows import TimeWindow
from spillway.planner import codes
from spillway.planner.types import KeptNode, PendingPod, ScalingPlan
from spillway.runtime import _PLANNER_VARS, _RESERVE_VARS, _RUNTIME_VARS, PLANNER_CONFIG_VAR, RuntimeConfig

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
TEMPLATE = load_template(ROOT / "template.yaml")


# --- extraction --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    lang: str
    line: int  # of the opening fence, 1-based
    text: str


@dataclass(frozen=True)
class Table:
    line: int  # of the header row, 1-based
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def column(self, index: int) -> list[str]:
        return [row[index] for row in self.rows if len(row) > index]


def fenced_blocks(text: str) -> list[Block]:
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("```"):
            lang, start, body = lines[i][3:].strip(), i, []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            blocks.append(Block(lang, start + 1, "\n".join(body)))
        i += 1
    return blocks


def _cells(row: str) -> tuple[str, ...]:
    """A GFM table row's cells: split at pipes that are not escaped (``\\|`` stays in the cell)."""
    inner = row.strip()[1:-1] if row.strip().endswith("|") else row.strip()[1:]
    return tuple(c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner))


_DELIMITER = re.compile(r"^\|[\s:|-]+\|$")


def tables(text: str) -> list[Table]:
    """Every table outside fenced blocks: a header row, a delimiter row, then the ``|`` rows that follow."""
    found: list[Table] = []
    lines = text.splitlines()
    fenced = False
    i = 0
    while i < len(lines) - 1:
        line = lines[i]
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("|") and _DELIMITER.match(lines[i + 1].strip()):
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            rows = tuple(_cells(r) for r in lines[i + 2 : j])
            found.append(Table(i + 1, _cells(line), rows))
            i = j
            continue
        i += 1
    return found


def table(text: str, *header: str) -> Table:
    """The one table whose header row starts with these cells."""
    matches = [t for t in tables(text) if t.header[: len(header)] == header]
    assert len(matches) == 1, f"README: {len(matches)} tables with header {header} (expected one)"
    return matches[0]


@dataclass(frozen=True)
class Unit:
    """A heading (``level`` 1-6), a paragraph or list item or table row (``level`` 0), or one command of
    an ``sh`` block (``level`` -1): the places a code span cannot cross."""

    line: int
    level: int
    text: str


_ITEM = re.compile(r"^\s*(?:[-*]|\d+\.)\s")


def units(text: str) -> Iterator[Unit]:
    """The README in document order, as :class:`Unit`s (a paragraph's lines joined by spaces)."""
    commands = dict(shell_commands(text))
    lines = text.splitlines()
    fenced, start = False, 0
    body: list[str] = []
    for number, line in enumerate([*lines, ""], 1):
        breaks = not line.strip() or line.startswith(("```", "#", "|")) or _ITEM.match(line)
        if body and (breaks or fenced):
            yield Unit(start, 0, " ".join(body))
            body = []
        if line.startswith("```"):
            fenced = not fenced
        elif fenced:
            if number in commands:
                yield Unit(number, -1, commands[number])
        elif line.startswith("#"):
            yield Unit(number, len(line) - len(line.lstrip("#")), line.lstrip("#").strip())
        elif line.startswith("|"):
            yield Unit(number, 0, line)
        elif line.strip():
            start = start if body else number
            body.append(line.strip())


_SPAN = re.compile(r"(?<!`)`([^`]+)`(?!`)")


def spans(text: str) -> list[str]:
    """Inline code spans (single backticks) outside fenced blocks; a span may run over lines of its
    paragraph (CommonMark: the line ending is read as a space)."""
    return [s for unit in units(text) if unit.level >= 0 for s in _SPAN.findall(unit.text)]


def first_span(cell: str) -> str:
    found = re.findall(r"`([^`]+)`", cell)
    return found[0] if found else cell


def all_spans(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


# --- 1. configuration: the fenced YAML/JSON blocks, and the table of keys ------------------------

CONFIG_KEYS = set(PlannerConfig.model_fields)
PLAN_KEYS = {"scale_up", "uncordon", "drain", "pending", "kept"} | {
    f for f in ScalingPlan.__dataclass_fields__ if f not in {"state", "placements"}
}


def documents(text: str) -> Iterator[tuple[int, Any]]:
    """Every document of every ``yaml``/``json`` block, with the block's line."""
    for block in fenced_blocks(text):
        if block.lang in ("yaml", "yml", "json"):
            try:
                for doc in yaml.safe_load_all(block.text):  # the loader config files are read with
                    yield block.line, doc
            except yaml.YAMLError as exc:
                yield block.line, exc


def _plan_problems(line: int, doc: dict[str, Any]) -> list[str]:
    """The plan output the README shows: its lists, and the keys and codes of its pending/kept entries."""
    shapes = {
        "pending": (PendingPod("p", "r", "c"), codes.PENDING_CODES),
        "kept": (KeptNode("n", "r", "c"), codes.KEPT_CODES),
    }
    out = []
    for key, (sample, known) in shapes.items():
        for entry in doc.get(key) or []:
            if set(entry) != set(sample.to_dict()):
                out.append(
                    f"line {line}: a {key} entry has keys {sorted(entry)}, the plan {sorted(sample.to_dict())}"
                )
            if entry.get("code") not in known:
                out.append(f"line {line}: {key} code {entry.get('code')!r} is not in planner/codes.py")
    return out


def config_block_problems(text: str) -> list[str]:
    """A block is a Spillway config (or part of one) when a top-level key is a config key: then it must
    load through :class:`PlannerConfig` whole. A Kubernetes manifest (``apiVersion`` and ``kind``) is
    checked by :func:`manifest_problems`, the plan's output by its keys; anything else is a problem, so a
    config block whose only key is misspelt cannot slip through as "not a config"."""
    out: list[str] = []
    for line, doc in documents(text):
        if isinstance(doc, Exception):
            out.append(f"line {line}: does not parse: {str(doc).splitlines()[0]}")
        elif isinstance(doc, dict) and {"apiVersion", "kind"} <= set(doc):
            continue
        elif isinstance(doc, dict) and set(doc) & CONFIG_KEYS:
            try:
                PlannerConfig.model_validate(doc)
            except ValidationError as exc:
                err = exc.errors()[0]
                where = ".".join(str(p) for p in err["loc"])
                out.append(f"line {line}: config {where}: {err['msg']}")
        elif isinstance(doc, dict) and set(doc) <= PLAN_KEYS and doc:
            out.extend(_plan_problems(line, doc))
        else:
            keys = sorted(doc) if isinstance(doc, dict) else type(doc).__name__
            out.append(f"line {line}: neither a config, a manifest nor the plan output: {keys}")
    return out


def _default_of(cell: str) -> tuple[bool, Any]:
    """The default a config table's cell states, when it states one plainly: (known, value)."""
    word = first_span(cell) if cell.startswith("`") else re.split(r"[\s(:]", cell, maxsplit=1)[0]
    if word in ("none", "unset"):
        return True, None
    if word in ("true", "false"):
        return True, word == "true"
    if word in ("[]", "{}"):
        return True, [] if word == "[]" else {}
    if re.fullmatch(r"-?\d+(\.\d+)?", word):
        return True, float(word)
    if cell.startswith("`"):
        return True, word
    return False, None


def _model_default(name: str) -> Any:
    field = PlannerConfig.model_fields[name]
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):  # node_reserve: a model all of whose fields are unset is "unset"
        return None if not any(value.model_dump().values()) else value
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, bool) or value is None or isinstance(value, str | dict | list):
        return value
    return float(value)


def config_table_problems(text: str) -> list[str]:
    """The Configuration table names every key of the model, each once, with the model's default."""
    rows = table(text, "key", "default", "meaning").rows
    named = [first_span(row[0]) for row in rows]
    out = [f"config table: {k!r} is not a key of PlannerConfig" for k in named if k not in CONFIG_KEYS]
    out += [
        f"config table: key {k!r} of PlannerConfig is in no row" for k in sorted(CONFIG_KEYS - set(named))
    ]
    out += [f"config table: {k!r} has two rows" for k in sorted({k for k in named if named.count(k) > 1})]
    for key, row in zip(named, rows, strict=True):
        known, value = _default_of(row[1])
        if known and key in CONFIG_KEYS and value != _model_default(key):
            out.append(f"config table: {key} default {row[1]!r}, the model's {_model_default(key)!r}")
    return out


def _models(annotation: Any) -> Iterator[type[BaseModel]]:
    """The pydantic models a field's type holds (``tuple[BufferConfig, ...]``, ``dict[str, TenantLimits]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _models(arg)


def _nested_fields(
    model: type[BaseModel], seen: set[type[BaseModel]]
) -> Iterator[tuple[type[BaseModel], str]]:
    for name, field in model.model_fields.items():
        yield model, field.alias or name
        for sub in _models(field.annotation):
            if sub not in seen:
                seen.add(sub)
                yield from _nested_fields(sub, seen)


def _names(word: str, text: str) -> bool:
    return re.search(r"(?<![\w.-])" + re.escape(word) + r"(?![\w-])", text) is not None


def nested_key_problems(text: str) -> list[str]:
    """A key that holds a structure (``buffers``, ``tenants``, ``node_reserve``...) names every field of
    it in its row; a time window's fields, shared by several keys, in the README's **Windows.** paragraph."""
    rows = {first_span(row[0]): row[2] for row in table(text, "key", "default", "meaning").rows}
    windows = re.search(r"^\*\*Windows\.\*\*.*?(?=\n\n)", text, flags=re.S | re.M)
    out: list[str] = [] if windows else ["the README has no **Windows.** paragraph"]
    for key, field in PlannerConfig.model_fields.items():
        for top in _models(field.annotation):
            for owner, name in _nested_fields(top, {top}):
                where = windows.group(0) if owner is TimeWindow and windows else rows.get(key, "")
                if not _names(name, where):
                    place = "the Windows paragraph" if owner is TimeWindow else f"the {key} row"
                    out.append(f"config: {key}: {owner.__name__}.{name} is not named in {place}")
    return sorted(set(out))


# --- 2. codes --------------------------------------------------------------------------------


def codes_problems(text: str) -> list[str]:
    """The pending and kept code tables list planner/codes.py's codes, all of them (the README says
    every pod and node carries "one of these"); the move-rule table's codes are Move codes, all of them."""
    checks = (
        (("`pending` code",), 0, codes.PENDING_CODES),
        (("`kept` code",), 0, codes.KEPT_CODES),
        # and assess's never-started (a pod on a dead node: no Move has it), which the table lists too
        (("rule", "movable", "code"), 2, (*codes.MOVE_CODES, codes.POD_NEVER_STARTED)),
    )
    out: list[str] = []
    for header, column, known in checks:
        listed = [c for cell in table(text, *header).column(column) for c in all_spans(cell)]
        name = header[0].replace("`", "").split()[0]
        out += [f"{name} table: code {c!r} is not in planner/codes.py" for c in listed if c not in known]
        out += [f"{name} table: code {c!r} of planner/codes.py is missing" for c in known if c not in listed]
    return out


def pod_event_problems(text: str) -> list[str]:
    """ "Why is my pod pending?": the codes it says get no Event are act/events.py's QUIET_CODES, all of
    them, and those it lists under ``NotTriggerScaleUp`` are pending codes that do get one."""
    found = re.search(r"^## Why is my pod pending\?\n(.*?)^## ", text, re.S | re.M)
    if found is None:
        return ["the 'Why is my pod pending?' section is gone"]
    section = found.group(1)
    quiet = re.search(r"^A pod that fits free room(.*?)gets no\s+Event", section, re.S | re.M)
    said = set(re.findall(r"`([a-z-]+)`", quiet.group(1))) if quiet else set()
    out = [
        f"pod Events: {c!r} gets no Event (act/events.py) but is not said so"
        for c in sorted(QUIET_CODES - said)
    ]
    out += [
        f"pod Events: {c!r} is said to get no Event, act/events.py posts one"
        for c in sorted(said - QUIET_CODES)
    ]
    row = table(section, "reason", "message", "when")
    for cells in row.rows:
        if first_span(cells[0]) == "NotTriggerScaleUp":
            for c in all_spans(cells[2].partition(":")[2]):  # the codes after "the `pending` table:"
                if c not in codes.PENDING_CODES or c in QUIET_CODES:
                    out.append(f"pod Events: NotTriggerScaleUp lists {c!r}, which gets none")
    return out


# --- 3. the command line ------------------------------------------------------------------------


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


PARSER = build_parser()
COMMANDS = subparsers(PARSER)


def options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings if o.startswith("--") and o != "--help"}


_INVOCATION = re.compile(r"^(?:\S*/)?spillway\s+(\S+)(.*)")  # a command starts with it
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def shell_commands(text: str) -> Iterator[tuple[int, str]]:
    """The commands of ``sh`` blocks: continuation lines joined, comments and pipes cut off."""
    for block in fenced_blocks(text):
        if block.lang not in ("sh", "bash", "shell", "console"):
            continue
        joined, first = "", 0
        for offset, line in enumerate(block.text.splitlines()):
            first = offset if not joined else first
            joined += line.removesuffix("\\") + " "
            if line.endswith("\\"):
                continue
            command, joined = re.split(r"\s#|\s\||\s&&|;", joined)[0].strip(), ""
            if command:
                yield block.line + 1 + first, command  # the line it starts on


def invocations(text: str) -> Iterator[tuple[str, str, str]]:
    """(where, subcommand or "", the rest) of every ``spillway`` command in a sh block or code span that
    starts with one. A span like ``spillway plan:`` (an error line) is no command."""
    sources = [(f"line {n}", c) for n, c in shell_commands(text)] + [("`" + s + "`", s) for s in spans(text)]
    for where, source in sources:
        match = _INVOCATION.search(re.split(r"\s\|", source)[0])
        if match is None or match.group(1).endswith(":"):
            continue
        word, rest = match.groups()
        if word.startswith("--"):  # spillway --version
            yield where, "", f"{word} {rest}"
        else:
            yield where, word, rest


def _invocation_problems(text: str) -> tuple[list[str], dict[str, set[str]]]:
    """Flags of every ``spillway <cmd>`` shown that the command lacks; and the flags shown, by command."""
    out: list[str] = []
    shown: dict[str, set[str]] = {name: set() for name in COMMANDS}
    for where, command, rest in invocations(text):
        parser = COMMANDS.get(command, PARSER if not command else None)
        if parser is None:
            out.append(f"{where}: spillway has no command {command!r}")
            continue
        flags = set(_FLAG.findall(rest))
        out += [f"{where}: spillway {command} has no flag {f}" for f in sorted(flags - options(parser))]
        shown.setdefault(command, set()).update(flags)
    return out, shown


def _parse_problems(text: str) -> list[str]:
    """Every ``spillway`` command of a sh block parses with the real parser."""
    out: list[str] = []
    for line, command in shell_commands(text):
        tokens = shlex.split(command)
        if tokens and tokens[0].endswith("spillway"):
            try:
                PARSER.parse_args(tokens[1:])
            except SystemExit:
                out.append(f"line {line}: the parser refuses {command!r}")
    return out


def cli_problems(text: str) -> list[str]:
    """Every ``spillway <cmd> --flag`` exists; every sh-block command parses with the real parser; the
    flag tables of ``plan`` and ``simulate`` name real flags; every flag of those two is documented."""
    out, shown = _invocation_problems(text)
    out += _parse_problems(text)
    for command, header in (("plan", ("flag", "what it reads")), ("simulate", ("flag", "meaning"))):
        real = options(COMMANDS[command])
        rows = table(text, *header).rows
        first = {f for row in rows for f in _FLAG.findall(row[0])}
        out += [f"{command} flag table: spillway {command} has no flag {f}" for f in sorted(first - real)]
        anywhere = {f for row in rows for cell in row for f in _FLAG.findall(cell)}
        missing = real - anywhere - shown[command]
        out += [f"spillway {command} {f}: in no flag table row nor example" for f in sorted(missing)]
    return out


def make_targets() -> set[str]:
    makefile = (ROOT / "Makefile").read_text()
    return {m.group(1) for m in re.finditer(r"^([a-z][\w-]*):", makefile, flags=re.M)}


def make_problems(text: str) -> list[str]:
    """Every ``make <target>`` the README shows is a target of the Makefile."""
    commands = [c for _, c in shell_commands(text)] + spans(text)
    named = {m.group(1) for c in commands for m in re.finditer(r"(?:^|\s)make ([a-z][\w-]*)", c)}
    return [f"make {t}: no such target in the Makefile" for t in sorted(named - make_targets())]


def first_plan_problems(text: str) -> list[str]:
    """The "A first plan" command reads the very files of :data:`examples.EXAMPLE` (which the CLI tests
    run), each of which exists."""
    for _, command in shell_commands(text):
        tokens = shlex.split(command)
        if tokens and tokens[0].endswith("spillway") and "events/example-cluster.json" in tokens:
            files = {t for t in tokens if t.startswith("events/")}
            example = {str(Path(p).relative_to(ROOT)) for p in EXAMPLE if p.startswith(str(ROOT))}
            out = [f"first plan: {f} does not exist" for f in sorted(files) if not (ROOT / f).is_file()]
            if files != example:
                out.append(f"first plan: reads {sorted(files)}, tests/unit/examples.py {sorted(example)}")
            return out
    return ["the README shows no `spillway plan` of events/example-cluster.json"]


# --- 3b. the bench/ scripts the README runs ----------------------------------------------------

_BENCH = re.compile(r"(?:\S*python3?\s+)?(?:\./)?(bench/\w+\.py)(?=\s|$)")


@functools.cache
def bench_parser(script: str) -> argparse.ArgumentParser | None:
    """A bench/ script's parser, from its ``build_parser()``; None when it defines none (takes no flags)."""
    path = ROOT / script
    if "def build_parser(" not in path.read_text():
        return None
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    parser: argparse.ArgumentParser = module.build_parser()
    return parser


def bench_problems(text: str) -> list[str]:
    """Every bench/ script the README runs (a sh command line, or a span with arguments) exists, has
    the flags shown, and, given no placeholders (``[--limit N]``, ``<file>``, ``...``), parses."""
    sources = [(f"line {n}", c) for n, c in shell_commands(text)] + [(f"`{s}`", s) for s in spans(text)]
    out: list[str] = []
    for where, source in sources:
        match = _BENCH.match(source)
        if match is None:
            continue
        script, rest = match.group(1), source[match.end() :].strip()
        if not (ROOT / script).is_file():
            out.append(f"{where}: {script} does not exist")
            continue
        parser = bench_parser(script)
        flags = _FLAG.findall(rest)
        if parser is None:
            out += [f"{where}: {script} has no build_parser() to check its flag {f} against" for f in flags]
            continue
        out += [f"{where}: {script} has no flag {f}" for f in flags if f not in options(parser)]
        if rest and not re.search(r"[\[<…]|\.\.\.", rest):
            try:
                parser.parse_args(shlex.split(rest))
            except SystemExit:
                out.append(f"{where}: {script}'s parser refuses {rest!r}")
    return out


# --- 3c. flags named in prose --------------------------------------------------------------------

# Programs other than Spillway whose flags the README cites. A flag whose sentence names one of them
# before it ("as `kubectl drain` needs `--delete-emptydir-data`", "cluster-autoscaler's
# `--max-node-startup-time`") is that program's.
OTHER_PROGRAMS = (
    "aws",
    "sam",
    "make",
    "python",
    "kubectl",
    "kubelet",
    "torchrun",
    "checkov",
    "cluster-autoscaler",
    "karpenter",
    "ec2-autoscaler",
)
_OTHER = re.compile(r"(?<![\w/.-])(?:" + "|".join(map(re.escape, OTHER_PROGRAMS)) + r")(?![\w-])", re.I)
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")
_SPILLWAY = re.compile(r"(?:\S*/)?spillway\s+(--[a-z][\w-]*|[a-z][\w-]*)")  # `spillway plan:` too


def _command(span: str) -> str | None:
    """The Spillway command (``spillway plan``; ``spillway`` for the program's own flags) or bench/
    script a span or sh command line starts with."""
    if match := _SPILLWAY.match(span):
        word = match.group(1)
        return "spillway" if word.startswith("--") else f"spillway {word}"
    if match := _BENCH.match(span):
        return match.group(1)
    return None


def _names_other(prose: str, other: bool) -> bool:
    """Whether, after this prose, its sentence has named another program: after the last sentence end
    in it, or (no end in it) before it too."""
    ends = [m.end() for m in _SENTENCE_END.finditer(prose)]
    named = [m.start() for m in _OTHER.finditer(prose)]
    if ends:
        return bool(named) and named[-1] > ends[-1]
    return other or bool(named)


def bare_flags(text: str) -> Iterator[tuple[str, str, str]]:
    """(where, command, span) of every span of bare flags (one that starts ``--``) the README attributes
    to a Spillway command or a bench/ script. A command is named by a span that starts with it
    (``spillway plan``, a heading's ``spillway plan``, ``spillway simulate:`` of an error line,
    ``bench/simulate.py --floor``) or a command line of a sh block. The last command named owns the bare
    flags that follow, up to a ``#``/``##`` heading or a sh block of another program; but a flag whose
    sentence (or table row) names another program before it (:data:`OTHER_PROGRAMS`, in prose or as a
    span's first word) is that program's, not Spillway's."""
    owner: str | None = None
    for unit in units(text):
        if 0 < unit.level <= 2:
            owner = None
        if unit.level == -1:  # a sh block's command line
            owner = _command(unit.text)
            continue
        other = False
        for index, piece in enumerate(_SPAN.split(unit.text)):
            if index % 2 == 0:  # prose between spans
                other = _names_other(piece, other)
            elif command := _command(piece):
                # a table row's command is a cross-reference ("as for `spillway plan`"): the row's
                # flags stay the table's
                owner, other = (owner, other) if unit.text.startswith("|") else (command, False)
            elif _OTHER.match(piece):
                other = True
            elif piece.startswith("--") and owner is not None and not other:
                yield f"line {unit.line}", owner, piece


def _parser(command: str) -> argparse.ArgumentParser | None:
    if command.startswith("bench/"):
        return bench_parser(command) if (ROOT / command).is_file() else None
    sub = command.removeprefix("spillway").strip()
    return COMMANDS.get(sub) if sub else PARSER


def prose_flag_problems(text: str) -> list[str]:
    """Every bare flag the README attributes to a Spillway command or bench/ script (:func:`bare_flags`)
    is one of that command's parser."""
    out: list[str] = []
    for where, command, span in bare_flags(text):
        parser = _parser(command)
        known = options(parser) if parser else set()
        out += [
            f"{where}: `{span}`: {command} has no flag {f}" for f in _FLAG.findall(span) if f not in known
        ]
    return out


# --- 3d. spillway.io/ keys -----------------------------------------------------------------------

_KEY = re.compile(r"spillway\.io/[A-Za-z0-9](?:[\w.-]*[A-Za-z0-9])?")


@functools.cache
def code_keys() -> frozenset[str]:
    """The ``spillway.io/`` keys (labels, annotations, taints, tags) the code defines: its string
    constants that are such a key and nothing more (``TAG_ATOMIC_LAUNCH = "spillway.io/atomic-launch"``)."""
    sources = (p.read_text() for p in (ROOT / "layers" / "spillway" / "spillway").rglob("*.py"))
    trees = [ast.parse(source) for source in sources if "spillway.io/" in source]
    return frozenset(
        node.value
        for tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _KEY.fullmatch(node.value)
    )


def key_problems(text: str) -> list[str]:
    """Every ``spillway.io/<name>`` the README names (prose, spans, manifests) is a key the code
    defines; and every key the code puts on or reads from an object is named, so a user can find it."""
    named = set(_KEY.findall(text))
    out = [f"{k}: no constant of the code is this key" for k in sorted(named - code_keys())]
    out += [f"{k}: a key of the code the README never names" for k in sorted(code_keys() - named)]
    return out


# --- 3e. upper-case names: environment variables and the code's constants ----------------------

_UPPER = re.compile(r"`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?:=[^`]*)?`(?:\s+\((\d+(?:\.\d+)?)\))?")
# names of other programs the README quotes, with whose they are
OTHER_PROGRAMS = {
    "CAPABILITY_IAM": "CloudFormation (sam deploy --capabilities)",
    "CAPABILITY_AUTO_EXPAND": "CloudFormation (sam deploy --capabilities)",
    "API_AND_CONFIG_MAP": "EKS (accessConfig.authenticationMode)",
    "ON_DEMAND": "EKS (a value of the eks.amazonaws.com/capacityType label)",
    "NO_SCHEDULE": "EKS (Taint.effect, DescribeNodegroup)",
    "NO_EXECUTE": "EKS (Taint.effect, DescribeNodegroup)",
    "PREFER_NO_SCHEDULE": "EKS (Taint.effect, DescribeNodegroup)",
    "ENABLE_POD_ENI": "the VPC CNI (an environment variable of its aws-node DaemonSet)",
    "AWS_DEFAULT_REGION": "the AWS SDKs and CLI (a kubeconfig exec plugin's env, as eksctl writes it)",
    "AWS_STS_REGIONAL_ENDPOINTS": "the AWS SDKs and CLI (a kubeconfig exec plugin's env, as eksctl writes it)",
    "AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED": "AWS Health (an EC2 event's eventTypeCode)",
}


@functools.cache
def code_constants() -> dict[str, object]:
    """Module-level upper-case names the code assigns, with their value when it is a literal."""
    out: dict[str, object] = {}
    for folder in ("layers/spillway/spillway", "functions", "bench", "deploy"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.parse(path.read_text()).body:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                    node, ast.AnnAssign) else []  # fmt: skip
                for target in targets:
                    if isinstance(target, ast.Name) and target.id.isupper():
                        value = node.value
                        out[target.id] = value.value if isinstance(value, ast.Constant) else None
    return out


@functools.cache
def variables_tests_read() -> frozenset[str]:
    """The environment variables the tests read (``os.environ.get("NAME"``)."""
    sources = (p.read_text() for p in (ROOT / "tests").rglob("*.py"))
    return frozenset(n for s in sources for n in re.findall(r"environ(?:\.get\(|\[)\"([A-Z_0-9]+)\"", s))


def upper_name_problems(text: str) -> list[str]:
    """Every upper-case name the README quotes (`MAX_SNAPSHOT_AGE_SECONDS`, `JOIN_RETRY_SECONDS` (240))
    is a variable the functions (or the tests) read, a constant of the code, or another program's
    (OTHER_PROGRAMS); a value given in parentheses after it is the code's (a runtime variable's default,
    a constant's value)."""
    variables = {*_RUNTIME_VARS, *_PLANNER_VARS, *_RESERVE_VARS, PLANNER_CONFIG_VAR} | variables_tests_read()
    out = []
    for match in _UPPER.finditer(text):
        name, stated = match.groups()
        if name in OTHER_PROGRAMS or (name in variables and name not in _RUNTIME_VARS):
            continue
        if name in _RUNTIME_VARS:
            value = RuntimeConfig.model_fields[_RUNTIME_VARS[name]].default
        elif name in code_constants():
            value = code_constants()[name]
        else:
            out.append(f"{name}: no variable the functions read, no constant of the code")
            continue
        if stated is not None and isinstance(value, int | float) and float(stated) != float(value):
            out.append(f"{name}: README says {stated}, the code {value}")
    return out


# --- 4. the runbook: alarms and metrics ----------------------------------------------------------


def _expanded_template() -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location("expand_foreach", ROOT / "deploy" / "expand_foreach.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    expanded: dict[str, Any] = module.expand(TEMPLATE, {"ClusterName": "CLUSTER", "Regions": "us-east-1"})
    return expanded


@functools.cache
def template_alarms() -> set[str]:
    """The template's alarm names, ``spillway-<cluster>-`` taken off (the ForEach blocks expanded)."""
    names = set()
    for resource in _expanded_template()["Resources"].values():
        if resource.get("Type") == "AWS::CloudWatch::Alarm":
            name = resource["Properties"]["AlarmName"]
            name = name.get("Fn::Sub", name) if isinstance(name, dict) else name
            names.add(name.removeprefix("spillway-${ClusterName}-"))
    return names


_METRIC_CALLS = {"add_count", "add_seconds", "add_bytes", "metric", "add_metric", "single_metric"}


def _constants(node: ast.AST | None) -> Iterator[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.IfExp):
        yield from _constants(node.body)
        yield from _constants(node.orelse)


def _metric_names(tree: ast.AST) -> Iterator[str]:
    """Literal names given to EMF calls, and the strings of ``*_METRICS`` tuples, in one module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            named = [k.value for k in node.keywords if k.arg == "name"]
            if func in _METRIC_CALLS and (node.args or named):
                yield from _constants((node.args[:1] + named)[0])
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id.endswith("_METRICS") for t in node.targets
        ):
            constants = (c for c in ast.walk(node.value) if isinstance(c, ast.Constant))
            yield from (c.value for c in constants if isinstance(c.value, str))


@functools.cache
def code_metrics() -> set[str]:
    """The names Spillway's own code emits in its namespace (EMF): metric names are CamelCase, the
    ``*_METRICS`` tables' other strings are keys."""
    sources = [
        *(ROOT / "layers" / "spillway" / "spillway").rglob("*.py"),
        *(ROOT / "functions").rglob("*.py"),
    ]
    names = {name for path in sources for name in _metric_names(ast.parse(path.read_text()))}
    return {name for name in names if re.fullmatch(r"[A-Z][A-Za-z]+", name)}


@functools.cache
def emitted_metrics() -> set[str]:
    """Metric names the code emits, and those the template and state machines name (alarms,
    PutMetricData)."""
    names = set(code_metrics())
    for path in [ROOT / "template.yaml", *(ROOT / "statemachines").glob("*.json")]:
        names.update(re.findall(r'"?MetricName"?\s*:\s*"?([A-Za-z]+)"?', path.read_text()))
    return names


def _pattern(name: str) -> re.Pattern[str]:
    """``<fn>-errors`` stands for any alarm that ends so."""
    return re.compile(
        "".join(".+" if p.startswith("<") else re.escape(p) for p in re.split(r"(<[^>]+>)", name))
    )


def runbook_problems(text: str) -> list[str]:
    """The runbook's alarms are the template's, all of them; its metrics are those the code emits, all of them."""
    alarms = template_alarms()
    listed = [_pattern(first_span(c)) for c in table(text, "alarm", "means", "do").column(0)]
    out = [
        f"runbook: alarm {p.pattern!r} is not in template.yaml"
        for p in listed
        if not any(p.fullmatch(a) for a in alarms)
    ]
    out += [
        f"runbook: template alarm {a!r} has no row"
        for a in sorted(alarms)
        if not any(p.fullmatch(a) for p in listed)
    ]
    emitted = emitted_metrics()
    metrics = [m for c in table(text, "metric", "from", "meaning").column(0) for m in all_spans(c)]
    out += [f"runbook: metric {m!r} is emitted by no code" for m in metrics if m not in emitted]
    out += [f"runbook: metric {m!r} is emitted but has no row" for m in sorted(code_metrics() - set(metrics))]
    return out


# --- 5. deploy parameters ---------------------------------------------------------------------------


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _planner_run_problems(run: list[str]) -> list[str]:
    """The threshold parameters default to the planner's defaults (``ScaleDownIdleMinutes``:
    ``scale_down_idle_minutes``)."""
    params = TEMPLATE["Parameters"]
    return [
        f"parameter {name} default {params[name]['Default']}, the planner's {_model_default(_snake(name))}"
        for name in run
        if float(params[name]["Default"]) != _model_default(_snake(name))
    ]


def _default_problems(names: list[str], cell: str) -> list[str]:
    """A row's defaults (``—``: none, ``empty``: "", else the code span; several names, several
    comma-separated defaults) against template.yaml's."""
    params = TEMPLATE["Parameters"]
    stated = [d.strip() for d in cell.split(",")] if len(names) > 1 else [cell.strip()]
    out = []
    for name, said in zip(names, stated, strict=False):
        want = params[name].get("Default")
        value = None if said in ("—", "") else "" if said == "empty" else first_span(said)
        if str(value) != str(want):
            out.append(f"parameter {name}: README default {said!r}, template.yaml {want!r}")
    return out


def parameter_problems(text: str) -> list[str]:
    """The Deployment configuration table names template.yaml's Parameters, all of them, with their
    defaults; ``A`` … ``B`` is the run of parameters from A to B, whose defaults are the planner's."""
    order = list(TEMPLATE["Parameters"])
    out: list[str] = []
    covered: set[str] = set()
    for row in table(text, "parameter", "default", "meaning").rows:
        names = all_spans(row[0])
        unknown = [n for n in names if n not in order]
        out += [f"parameters table: {n!r} is not a template parameter" for n in unknown]
        if unknown:
            continue
        if "…" in row[0] and len(names) == 2:
            run = order[order.index(names[0]) : order.index(names[1]) + 1]
            out += _planner_run_problems(run)
        else:
            run = names
            out += _default_problems(names, row[1])
        covered.update(run)
    out += [f"template parameter {p!r} has no row" for p in order if p not in covered]
    return out


def variables_the_stack_sets() -> set[str]:
    """The environment variables template.yaml gives the functions (Globals and each function's)."""
    template = _expanded_template()
    functions = [template.get("Globals", {}).get("Function") or {}] + [
        r.get("Properties") or {}
        for r in template["Resources"].values()
        if r.get("Type") == "AWS::Serverless::Function"
    ]
    return {name for f in functions for name in ((f.get("Environment") or {}).get("Variables") or {})}


FUNCTIONS = {p.name for p in (ROOT / "functions").iterdir() if (p / "app.py").is_file()}
# every variable the functions read: spillway/runtime.py's own, one per planner key it takes, and the
# planner's JSON (no other module reads the environment: test_only_runtime_reads_the_environment)
VARIABLES_READ = {*_RUNTIME_VARS, *_PLANNER_VARS, *_RESERVE_VARS, PLANNER_CONFIG_VAR}
_VARIABLE_ROW = re.compile(r"^\| `([A-Z][A-Z0-9_]+)` \|(.*)$", flags=re.M)


def _variable_default(var: str) -> object:
    if var in _RUNTIME_VARS:
        return RuntimeConfig.model_fields[_RUNTIME_VARS[var]].default
    return _model_default(_PLANNER_VARS[var]) if var in _PLANNER_VARS else None


def runtime_variable_problems(text: str) -> list[str]:
    """Every variable the functions read has a row of its own in a README table (the one after "Runtime
    variables with defaults", or the interrupt function's); a row of either that gives a number gives
    the code's default; and the first table's rows name only variables read, each with the functions
    that read it.

    Before, only spillway/runtime.py's own variables that the stack does not set had to be named, in a
    paragraph: the variables of planner keys (DRAIN_CLAIM_MINUTES, ORPHANED_DRAIN_MINUTES,
    NODE_RESERVE_CPU, NODE_RESERVE_MEMORY) were checked only when named, so nothing said they were not."""
    found = re.search(r"^Runtime variables with defaults[\s\S]*?\n\n((?:\|[^\n]*\n?)+)", text, flags=re.M)
    if found is None:
        return ["the README has no 'Runtime variables with defaults' table"]
    rows = _VARIABLE_ROW.findall(text)
    out = [
        f"variable {var} (read by the functions) has no row in a README table"
        for var in sorted(VARIABLES_READ - {var for var, _ in rows})
    ]
    for var, rest in rows:  # both tables' rows: the interrupt function's defaults are the code's too
        number = re.match(r"\s*(-?\d+(?:\.\d+)?)(?=\s|\|)", rest)
        code = _variable_default(var)
        if (
            var in VARIABLES_READ
            and number
            and (not isinstance(code, int | float) or float(number.group(1)) != float(code))
        ):
            out.append(f"runtime variable {var}: README default {number.group(1)}, the code {code}")
    for line in found.group(1).splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        named = re.fullmatch(r"`([A-Z][A-Z0-9_]+)`", cells[0])
        if named is None or len(cells) != 4:
            out.append(
                f"runtime variables: a row that is no | `VARIABLE` | default | read by | meaning |: {line}"
            )
            continue
        var, readers = named.group(1), cells[2]
        if var not in VARIABLES_READ:
            out.append(f"runtime variable {var} is read by nothing (spillway/runtime.py)")
            continue
        unknown = set(readers.split(", ")) - FUNCTIONS - {"every function"}
        if unknown:
            out.append(f"runtime variable {var}: read by {sorted(unknown)}, no function (functions/)")
    return out


# what of os (or posix/nt, which os re-exports) reads or changes the process environment
_ENV_NAMES = frozenset({"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"})
_OS_MODULES = frozenset({"os", "posix", "nt"})


def _os_aliases(tree: ast.AST) -> set[str]:
    """The names ``tree`` binds to os itself: ``import os``, ``import os.path`` (binds ``os``), ``import
    os as o``; not ``import os.path as p`` (that is os.path)."""
    bound = (
        (alias.name, alias.asname) if alias.asname else (alias.name.split(".")[0],) * 2
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    )
    return {name for module, name in bound if module in _OS_MODULES}


def _env_reference(node: ast.AST, aliases: set[str]) -> bool:
    """``node`` names os's environment: ``from os import environ`` (any alias, or ``*``),
    ``<os>.environ``, or ``getattr(<os>, "environ")``."""
    if isinstance(node, ast.ImportFrom):
        return (
            node.level == 0
            and node.module in _OS_MODULES
            and any(a.name in _ENV_NAMES or a.name == "*" for a in node.names)
        )
    if isinstance(node, ast.Attribute):
        return node.attr in _ENV_NAMES and isinstance(node.value, ast.Name) and node.value.id in aliases
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
        target, name = [*node.args, None, None][:2]
        return (
            isinstance(target, ast.Name)
            and target.id in aliases
            and isinstance(name, ast.Constant)
            and name.value in _ENV_NAMES
        )
    return False


def reads_environment(source: str) -> bool:
    """``source`` refers to the process environment through os, however os or its names are imported."""
    tree = ast.parse(source)
    aliases = _os_aliases(tree)
    return any(_env_reference(node, aliases) for node in ast.walk(tree))


@pytest.mark.parametrize(
    ("source", "reads"),
    [
        ("import os\nx = os.environ['A']", True),
        ("import os\nx = os.getenv('A')", True),
        ("import os\nos.putenv('A', '1')", True),
        ("from os import environ\nx = environ.get('A')", True),
        ("from os import getenv as g\nx = g('A')", True),
        ("import os as o\nx = o.environ.get('A')", True),
        ("import os as o\nx = o.getenv('A')", True),
        ("import os.path\nx = os.environ", True),
        ("from os import *\nx = environ", True),
        ("import os\nx = getattr(os, 'environ')", True),
        ("import os\nx = os.path.join('a', 'b')", False),
        ("import os.path as p\nx = p.join('a', 'environ')", False),
        ("x = self.environ['A']  # os.environ in a comment", False),
        ("from spillway.runtime import environ_of\nx = environ_of()", False),
    ],
)
def test_the_environment_check_sees_any_reference(source: str, reads: bool) -> None:
    """A regex on the text matched only ``os.environ``, ``getenv(`` and ``environ[``: ``from os import
    environ`` then ``environ.get(...)``, or ``import os as o`` then ``o.environ``, escaped it, and a
    comment naming os.environ was a reader. The source is parsed: any reference to os's environment."""
    assert reads_environment(source) is reads


def test_only_runtime_reads_the_environment() -> None:
    """VARIABLES_READ is every variable only while spillway/runtime.py is the one module of the functions
    that reads the environment (the local stack, spillway/local, sets it for the demo)."""
    readers = [
        str(path.relative_to(ROOT))
        for folder in ("layers/spillway/spillway", "functions")
        for path in (ROOT / folder).rglob("*.py")
        if "local" not in path.relative_to(ROOT / folder).parts[:-1] and reads_environment(path.read_text())
    ]
    assert readers == ["layers/spillway/spillway/runtime.py"]


# --- 6. Kubernetes manifests and what `kubectl get` collects --------------------------------------

SERVED_GROUPS = {rt.group for rt in resources.ALL}


def _read_by_spillway(kind: str, api_version: str) -> bool:
    item = {"kind": kind, "apiVersion": api_version}
    return _model_for(kind, api_version) is not None or bool(provreq._ours(item, ("", "")))


def _provisioning_config_problems(line: int, spec: dict[str, Any]) -> list[str]:
    """Kueue's ProvisioningRequestConfig asks for a class Spillway serves, and pins pods by the label
    and class detail Spillway publishes (Kueue's ``podSetUpdates.nodeSelector``: ``key`` and
    ``valueFromProvisioningClassDetail``, kueue apis/kueue/v1beta1 ProvisioningRequestPodSetUpdates)."""
    out = []
    if spec.get("provisioningClassName") not in provreq.CLASSES:
        out.append(f"line {line}: provisioningClassName {spec.get('provisioningClassName')!r} is not served")
    for selector in (spec.get("podSetUpdates") or {}).get("nodeSelector") or []:
        pair = (selector.get("key"), selector.get("valueFromProvisioningClassDetail"))
        if pair != (provreq.NODE_LABEL, provreq.DETAIL_LABEL_VALUE):
            out.append(f"line {line}: podSetUpdates {pair} is not the label and detail Spillway publishes")
    return out


def manifest_problems(text: str) -> list[str]:
    """A manifest of a group the emulator serves uses a version and kind it serves and Spillway reads.
    Kueue's objects (not Spillway's to read) must name what Spillway publishes."""
    out: list[str] = []
    for line, doc in documents(text):
        if not (isinstance(doc, dict) and {"apiVersion", "kind"} <= set(doc)):
            continue
        api_version, kind = str(doc["apiVersion"]), str(doc["kind"])
        if not (doc.get("metadata") or {}).get("name"):
            out.append(f"line {line}: {kind} has no metadata.name")
        served = resources.by_api_version(api_version, kind) and _read_by_spillway(kind, api_version)
        if api_version.rpartition("/")[0] in SERVED_GROUPS and not served:
            out.append(
                f"line {line}: {api_version} {kind} is not served by the emulator or not read by Spillway"
            )
        if kind == "ProvisioningRequestConfig":
            out += _provisioning_config_problems(line, doc.get("spec") or {})
    return out


def kubectl_problems(text: str) -> list[str]:
    """What the README says to collect with ``kubectl get ... -o json`` for ``spillway plan`` is served by
    the emulator, and read by Spillway."""
    commands = [c for _, c in shell_commands(text)] + spans(text)
    out: list[str] = []
    for command in commands:
        for match in re.finditer(r"kubectl get (\S+) -A -o json", command):
            for name in match.group(1).split(","):
                try:
                    rt = resources.resolve_kind(name)
                except KeyError as exc:
                    out.append(f"kubectl get {name}: {exc}")
                    continue
                if not _read_by_spillway(rt.kind, rt.api_version):
                    out.append(f"kubectl get {name}: {rt.api_version} {rt.kind} is read by no Spillway model")
    return out


RBAC_FUNCTIONS = ("observe", "plan", "scale", "drain")


def _granted(function: str) -> list[str]:
    """The resources (subresources as ``<resource>/<sub>``) deploy/rbac.yaml's ClusterRole of ``function``
    grants any verb on."""
    for doc in yaml.safe_load_all((ROOT / "deploy" / "rbac.yaml").read_text(encoding="utf-8")):
        role = isinstance(doc, dict) and doc.get("kind") == "ClusterRole"
        if role and doc["metadata"]["name"] == f"spillway-{function}":
            return sorted({r for rule in doc["rules"] for r in rule["resources"]})
    return []


def rbac_grant_problems(text: str) -> list[str]:
    """The Deploy section's account of what each function's ClusterRole grants (what an operator checks
    an existing role, or an upgrade, against) names every resource deploy/rbac.yaml grants it: a
    subresource by its own name (``evictions``), a status by ``<resource>/status``; a plural matches
    its singular (``the three kinds of PodGroup``)."""
    found = re.search(r"Each role\s+grants exactly what its function sends \((.*?)\);", text, re.S)
    if found is None:
        return ["Deploy: the account of each function's ClusterRole is gone"]
    parts = re.split(r"(?:^|;\s*)(" + "|".join(RBAC_FUNCTIONS) + r"): ", found.group(1))
    said = {
        fn: re.sub(r"[\s`/]", "", body).lower() for fn, body in zip(parts[1::2], parts[2::2], strict=True)
    }
    out = []
    for function in RBAC_FUNCTIONS:
        for resource in _granted(function):
            sub = resource.partition("/")[2]
            name = sub if sub and sub != "status" else resource
            stem = (name[:-1] if name.endswith("s") else name).replace("/", "")
            if stem not in said.get(function, ""):
                out.append(f"Deploy: {function}'s grants do not name {resource} (deploy/rbac.yaml grants it)")
    return out


def plan_section_problems(text: str) -> list[str]:
    """The ``spillway plan`` section names every list the plan may print (:data:`PLAN_KEYS`, the
    ScalingPlan's fields that ``to_dict`` prints), each as a code span, so a reader meeting one in the
    output finds what it is."""
    found = re.search(r"^## `spillway plan`.*?(?=^### )", text, re.S | re.M)
    if found is None:
        return ["the `spillway plan` section is gone"]
    named = set(spans(found.group(0)))
    return [f"`spillway plan`: the plan's `{key}` list is not named" for key in sorted(PLAN_KEYS - named)]


# --- the Layout section -------------------------------------------------------------------------

# (folder, suffix): every entry of the folder whose name ends so (a folder when the suffix is "/") is
# named in the Layout block, by its name with the suffix taken off
LAYOUT_FOLDERS = (
    ("functions", "/"),
    ("statemachines", ".asl.json"),
    ("deploy", ".py"),
    ("deploy", ".yaml"),
    ("bench", ".py"),
    ("bench/tools", ".py"),
    ("layers/spillway", ".py"),
    ("layers/spillway/spillway", ".py"),
    ("layers/spillway/spillway", "/"),
    ("layers/spillway/spillway/local", ".py"),
    ("tests", "/"),
)

# the Layout block's "N functions, N state machines, N tables" against the template's resources
LAYOUT_COUNTS = {
    "functions": "AWS::Serverless::Function",
    "state machines": "AWS::Serverless::StateMachine",
    "tables": "AWS::DynamoDB::Table",
}


def _layout_block(text: str) -> str | None:
    found = re.search(r"^## Layout\n(.*?)^## ", text, re.S | re.M)
    blocks = fenced_blocks(found.group(1)) if found else []
    return blocks[0].text if blocks else None


def _entries(folder: str, suffix: str) -> list[str]:
    out = []
    for entry in sorted((ROOT / folder).iterdir()):
        if entry.name.startswith(("_", ".")):
            continue
        if suffix == "/" and entry.is_dir():
            out.append(entry.name)
        elif suffix != "/" and entry.is_file() and entry.name.endswith(suffix):
            out.append(entry.name.removesuffix(suffix))
    return out


def layout_problems(text: str) -> list[str]:
    """The Layout block names every handler, state machine, deploy file, bench script and module of the
    package's top level and of local/; each file it names (``x.py``, ``x.yaml``, ``x.json``, ``x.toml``)
    exists; and its template line counts the template's functions, state machines and tables."""
    block = _layout_block(text)
    if block is None:
        return ["Layout: the section or its block is gone"]
    words = set(re.findall(r"[\w.-]+", block))
    out = [
        f"Layout: {folder}/{name}{'' if suffix == '/' else suffix} is not named"
        for folder, suffix in LAYOUT_FOLDERS
        for name in _entries(folder, suffix)
        if name not in words and f"{name}{suffix}" not in words and f"{name}/" not in block
    ]
    files = {
        p.name
        for p in ROOT.rglob("*")
        if not any(part.startswith(".") or part == "build" for part in p.relative_to(ROOT).parts)
    }
    for named in sorted(set(re.findall(r"[\w-]+\.(?:py|yaml|json|toml)\b", block))):
        if named not in files:
            out.append(f"Layout: {named} does not exist")
    resources = _expanded_template()["Resources"].values()
    for noun, kind in LAYOUT_COUNTS.items():
        count = sum(1 for r in resources if r.get("Type") == kind)
        said = re.search(rf"(\d+) {noun}\b", block)
        if said is None or int(said.group(1)) != count:
            out.append(f"Layout: template.yaml has {count} {noun}, the block says {said and said.group(1)}")
    return out


# --- the tests -------------------------------------------------------------------------------------

CHECKS = {
    "config blocks": config_block_problems,
    "config table": config_table_problems,
    "nested keys": nested_key_problems,
    "codes": codes_problems,
    "cli": cli_problems,
    "make": make_problems,
    "prose flags": prose_flag_problems,
    "bench": bench_problems,
    "keys": key_problems,
    "upper-case names": upper_name_problems,
    "first plan": first_plan_problems,
    "runbook": runbook_problems,
    "parameters": parameter_problems,
    "runtime variables": runtime_variable_problems,
    "manifests": manifest_problems,
    "kubectl": kubectl_problems,
    "rbac grants": rbac_grant_problems,
    "layout": layout_problems,
    "plan sections": plan_section_problems,
    "pod events": pod_event_problems,
}


@pytest.mark.parametrize("check", CHECKS)
def test_the_readme_holds(check: str) -> None:
    assert CHECKS[check](README) == []


# (check, a README line's text, what it is broken into, a word the problem must name)
BREAKS = [
    ("config blocks", "    replicas: 6\n", "    replica: 6\n", "replica"),
    ("config blocks", "tenants:\n  vc-ee9e8c", "tenant:\n  vc-ee9e8c", "neither"),
    ("config blocks", '"code": "max-size"}', '"code": "max-sized"}', "max-sized"),
    ("config table", "| `max_nodes_total` |", "| `max_node_total` |", "max_node"),
    (
        "config table",
        "| `max_scale_in_fraction` | 0.1 |",
        "| `max_scale_in_fraction` | 0.2 |",
        "max_scale_in_fraction",
    ),
    ("nested keys", "duration: 8h, timezone: UTC}", "duration: 8h, zone: UTC}", "DisruptionBudget.timezone"),
    ("nested keys", "timezone: <IANA> (default UTC)}", "tz: <IANA> (default UTC)}", "TimeWindow.timezone"),
    ("codes", "| `utilized` |", "| `utilised` |", "utili"),
    ("codes", "`finished`, `mirror`, `daemonset` |", "`finished`, `mirror` |", "daemonset"),
    (
        "cli",
        "--scheduler-scoring most-allocated --chart philly.png",
        "--scheduler-score most-allocated --chart philly.png",
        "--scheduler-score",
    ),
    ("cli", "[--no-teams]", "[--no-team]", "--no-team"),
    ("cli", "| `--drain-seconds S` |", "| `--drain-second S` |", "--drain-second"),
    (
        "cli",
        "| `--scheduled-actions FILE` (repeatable) |",
        "| `--scheduled-action FILE` (repeatable) |",
        "--scheduled-actions",
    ),
    ("make", "make bench` runs", "make benchmark` runs", "benchmark"),
    # a bare flag, owned by the command named before it: a paragraph's, a heading's, a sh block's
    (
        "prose flags",
        "`--movable-fraction` must be within",
        "`--movable-fractions` must be within",
        "fractions",
    ),
    (
        "prose flags",
        "after it reads `--cluster`,",
        "after it reads `--clusters`,",
        "plan has no flag --clusters",
    ),
    ("prose flags", "`--no-night` skips it", "`--no-nights` skips it", "demo has no flag --no-nights"),
    ("prose flags", "GROUP is a group's name in `--asgs`", "GROUP is a group's name in `--asg`", "--asg"),
    # a table row's cross-reference ("as for `spillway plan`") leaves its flags the table's command's
    ("prose flags", "within one `--interval`, even", "within one `--intervals`, even", "simulate has no"),
    # a span over two lines
    (
        "prose flags",
        "most-allocated --movable-fraction 0.5 --restart-penalty 10 --policies spillway,cluster-autoscaler`",
        "most-allocated --movable-fractions 0.5 --restart-penalty 10 --policies spillway,cluster-autoscaler`",
        "--movable-fractions",
    ),
    # another program's flag is told apart only by its sentence naming the program
    ("prose flags", "host names (torchrun's `--rdzv-endpoint`", "host names (`--rdzv-endpoint`", "rdzv"),
    ("bench", "`bench/simulate.py --floor`", "`bench/simulate.py --flor`", "--flor"),
    ("bench", "`bench/simulate.py --floor`", "`bench/simulate.py --limit`", "refuses"),
    ("bench", "(`bench/cold_start.py`,", "(`bench/coldstart.py`,", "coldstart"),
    (
        "keys",
        "(annotation `spillway.io/cordoned`)",
        "(annotation `spillway.io/cordon`)",
        "spillway.io/cordon:",
    ),
    ("keys", " (and `spillway.io/gang`, the gang's name)", "", "spillway.io/gang:"),
    ("upper-case names", "after `JOIN_RETRY_SECONDS` (240)", "after `JOIN_RETRY_SECONDS` (300)", "300"),
    ("upper-case names", "(`OWN_DRAIN_SNAPSHOT_SECONDS`;", "(`OWN_DRAIN_SNAPSHOT_SECS`;", "SECS"),
    ("upper-case names", "`MAX_SNAPSHOT_AGE_SECONDS` (180)", "`MAX_SNAPSHOT_AGE` (180)", "MAX_SNAPSHOT_AGE"),
    ("upper-case names", "`MAX_SNAPSHOT_AGE_SECONDS` (180)", "`MAX_SNAPSHOT_AGE_SECONDS` (120)", "120"),
    (
        "first plan",
        "--state events/example-state.json",
        "--state events/example-state2.json",
        "example-state2",
    ),
    ("runbook", "| `drain-timeout` |", "| `drain-timeouts` |", "drain-timeout"),
    ("runbook", "| `TenantPodsHeld` |", "| `TenantPodHeld` |", "TenantPodHeld"),
    ("runbook", "| `GangsLaunched`, `GangsGivenBack` |", "| `GangsLaunched` |", "GangsGivenBack"),
    ("parameters", "| `DrainConcurrency` | 5 |", "| `DrainConcurrency` | 6 |", "DrainConcurrency"),
    ("parameters", "| `AlarmEmail` |", "| `AlarmMail` |", "Alarm"),
    ("runtime variables", "| `HEARTBEAT_MINUTES` | 5 |", "| `HEARTBEAT_MINUTES` | 6 |", "HEARTBEAT_MINUTES"),
    (
        "runtime variables",
        "| `SNAPSHOT_TTL_HOURS` | 24 |",
        "| `SNAPSHOT_TTL_HOUR` | 24 |",
        "SNAPSHOT_TTL_HOUR",
    ),
    (
        "runtime variables",
        "| `EXPENDABLE_PRIORITY_CUTOFF` | -10 ",
        "| `EXPENDABLE_PRIORITY_CUTOFF` | -1 ",
        "-1",
    ),
    (
        "runtime variables",
        "| `POD_EVENTS_LEDGER_SIZE` | 2000 | plan |",
        "| `POD_EVENTS_LEDGER_SIZE` | 2000 | plans |",
        "plans",
    ),
    # a planner key's variable left out: before, nothing asked for one
    (
        "runtime variables",
        "| `DRAIN_CLAIM_MINUTES` |",
        "| `DRAIN_CLAIM_MINS` |",
        "DRAIN_CLAIM_MINUTES (read by the functions) has no row",
    ),
    (
        "runtime variables",
        "| `NODE_RESERVE_MEMORY` |",
        "| `NODE_RESERVE_MEM` |",
        "NODE_RESERVE_MEMORY (read by the functions) has no row",
    ),
    # the interrupt function's table counts too, its defaults as well (its rows' defaults went unchecked)
    (
        "runtime variables",
        "| `INTERRUPTION_DEADLINE_SECONDS` | 90 ",
        "| `INTERRUPTION_DEADLINE_SECONDS` | 95 ",
        "INTERRUPTION_DEADLINE_SECONDS: README default 95",
    ),
    (
        "runtime variables",
        "| `LIFECYCLE_DEADLINE_SECONDS` | 600 ",
        "| `LIFECYCLE_DEADLINE_SECONDS` | 900 ",
        "LIFECYCLE_DEADLINE_SECONDS: README default 900",
    ),
    (
        "runtime variables",
        "| `REBALANCE_DEADLINE_SECONDS` |",
        "| `REBALANCE_DEADLINE` |",
        "REBALANCE_DEADLINE_SECONDS",
    ),
    ("manifests", "provisioningClassName: best-effort-atomic", "provisioningClassName: atomic", "atomic"),
    (
        "manifests",
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: AdmissionCheck",
        "apiVersion: autoscaling.x-k8s.io/v1\nkind: AdmissionCheck",
        "not served",
    ),
    ("manifests", "- key: spillway.io/provisioning-request", "- key: spillway.io/request", "podSetUpdates"),
    (
        "kubectl",
        "capacityquotas.autoscaling.x-k8s.io -A",
        "capacityquotas.autoscaling.k8s.io -A",
        "capacityquotas",
    ),
    ("rbac grants", ", PriorityClasses; get the priority", "; get the priority", "priorityclasses"),
    ("rbac grants", "evictions and events); `tests/e2e", "events); `tests/e2e", "pods/eviction"),
    ("layout", ", drain_node, gang_launch (ASL)", ", drain_node (ASL)", "gang_launch"),
    (
        "layout",
        "    perf.py                 bulk_allocation",
        "    perfs.py                bulk_allocation",
        "perf",
    ),
    ("pod events", "`fits-uncordoned`, `making-room`) gets no", "`fits-uncordoned`) gets no", "making-room"),
    ("pod events", "`tenant-limit`, `gang-home-full`, ... |", "`fits-launching`, ... |", "fits-launching"),
    ("plan sections", "A `floors` list (only", "A floors list (only", "floors"),
    ("layout", "SAM: layer, 5 functions, 4 state", "SAM: layer, 4 functions, 4 state", "5 functions"),
]


@pytest.mark.parametrize(("check", "line", "broken", "named"), BREAKS)
def test_each_check_fails_on_a_broken_line(check: str, line: str, broken: str, named: str) -> None:
    assert README.count(line) == 1, f"the README no longer holds {line!r} once: pick another line to break"
    problems = CHECKS[check](README.replace(line, broken))
    assert problems, f"{check}: breaking {line!r} went unnoticed"
    assert any(named in p for p in problems), problems


def test_a_span_runs_over_the_lines_of_its_paragraph_and_no_further() -> None:
    text = "a `spillway plan\n--cluster` b `make demo`\n\n`x\n\ny`\n\n| `--c` |\n|---|\n"
    assert spans(text) == ["spillway plan --cluster", "make demo", "--c"]


def test_a_sh_command_is_found_at_the_line_it_starts_on() -> None:
    text = "text\n```sh\nspillway plan \\\n  --cluster c.json\nmake demo  # the demo\n```\n"
    found = [(line, command.split()) for line, command in shell_commands(text)]
    assert found == [(3, ["spillway", "plan", "--cluster", "c.json"]), (5, ["make", "demo"])]
