"""The architecture, checked: what each part may import, and that no shipped function is hard to read.

* the planner is pure: it imports no I/O (no AWS or Kubernetes SDK, no os, no clock, no adapters) and
  calls no clock; what it imports, transitively, never reaches an SDK;
* each part imports only what the table in ``spillway/__init__.py`` allows (the act layer and observe
  reach the world only through ports; adapters never import the act layer or the planner; the model
  imports no SDK);
* handlers are thin: they import no SDK and none of their functions branches much;
* no function shipped to Lambda has a cyclomatic complexity (radon) over 15.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from radon.complexity import cc_visit

from spillway.local.lambda_sandbox import import_closure

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_ROOT = ROOT / "layers" / "spillway"
PACKAGE = PACKAGE_ROOT / "spillway"
HANDLERS = sorted((ROOT / "functions").glob("*/app.py"))

SDKS = {"boto3", "botocore", "kubernetes", "urllib3", "requests"}
IO = SDKS | {"os", "time", "socket", "subprocess", "random", "threading", "pathlib", "io", "logging"}
CLOCK_CALLS = {"now", "utcnow", "today", "time", "monotonic", "perf_counter"}


def imports_of(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module)
    return out


def top(names: set[str]) -> set[str]:
    return {n.split(".")[0] for n in names}


def module_file(module: str) -> Path:
    base = PACKAGE_ROOT.joinpath(*module.split("."))
    return base / "__init__.py" if (base / "__init__.py").is_file() else base.with_suffix(".py")


PLANNER = sorted((PACKAGE / "planner").glob("*.py"))


@pytest.mark.parametrize("path", PLANNER, ids=lambda p: p.name)
def test_the_planner_imports_no_io(path: Path) -> None:
    names = imports_of(path)
    assert top(names) & IO == set()
    assert not {n for n in names if n.startswith(("spillway.adapters", "spillway.act", "spillway.local"))}


@pytest.mark.parametrize("path", PLANNER, ids=lambda p: p.name)
def test_the_planner_reads_no_clock(path: Path) -> None:
    calls = [
        node.func.attr
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    ]
    assert CLOCK_CALLS.isdisjoint(calls), f"{path.name} reads a clock: `now` is the planner's argument"


def test_nothing_the_planner_imports_reaches_an_sdk() -> None:
    closure = import_closure(PLANNER, PACKAGE_ROOT)
    reached = set().union(*(top(imports_of(module_file(m))) for m in closure))
    assert reached & SDKS == set(), f"the planner's imports reach {sorted(reached & SDKS)}"


# part -> (its source files, the top-level names and spillway packages it must never import)
NEVER = {
    "model": (
        (PACKAGE / "model").glob("*.py"),
        SDKS,
        ("spillway.adapters", "spillway.act", "spillway.planner"),
    ),
    "adapters": ((PACKAGE / "adapters").glob("*.py"), set(), ("spillway.act", "spillway.planner")),
    "ports": ([PACKAGE / "ports.py"], SDKS, ("spillway.adapters", "spillway.act")),
    "act": ((PACKAGE / "act").glob("*.py"), SDKS, ("spillway.adapters", "spillway.local", "spillway.sim")),
    "observe": ([PACKAGE / "observe.py"], SDKS, ("spillway.adapters", "spillway.local", "spillway.sim")),
}
LAYERED = [(part, path, sdks, packages) for part, (files, sdks, packages) in NEVER.items() for path in files]


@pytest.mark.parametrize(
    ("part", "path", "sdks", "packages"), LAYERED, ids=[f"{p}/{f.name}" for p, f, _, _ in LAYERED]
)
def test_each_part_imports_only_what_it_may(
    part: str, path: Path, sdks: set[str], packages: tuple[str, ...]
) -> None:
    names = imports_of(path)
    assert top(names) & sdks == set(), f"{part} must not import an SDK"
    assert [n for n in names if n.startswith(packages)] == [], f"{part} must not import {packages}"


def test_nothing_shipped_imports_the_local_stack_or_the_simulator() -> None:
    shipped = import_closure(HANDLERS, PACKAGE_ROOT)
    tools = ("spillway.local", "spillway.sim", "spillway.cli", "spillway.inputs")
    assert not {m for m in shipped if m in tools or m.startswith(tuple(f"{t}." for t in tools))}


@pytest.mark.parametrize("path", HANDLERS, ids=lambda p: p.parent.name)
def test_handlers_are_thin(path: Path) -> None:
    assert top(imports_of(path)) & SDKS == set(), "a handler gets its clients from spillway's wiring"
    busy = [(b.name, b.complexity) for b in cc_visit(path.read_text(encoding="utf-8")) if b.complexity > 6]
    assert busy == [], f"logic belongs in spillway, not in the handler: {busy}"


def test_no_shipped_function_is_over_complexity_15() -> None:
    shipped = import_closure(HANDLERS, PACKAGE_ROOT)
    over = set()
    for module in sorted(shipped):
        path = module_file(module)
        for block in cc_visit(path.read_text(encoding="utf-8")):
            for item in [block, *getattr(block, "methods", [])]:
                if item.complexity > 15:
                    over.add(f"{module}:{item.lineno} {item.name} ({item.complexity})")
    assert sorted(over) == []
