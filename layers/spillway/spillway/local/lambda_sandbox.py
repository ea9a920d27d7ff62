"""Import a built handler the way Lambda does: only the function, the layer and the runtime's boto3.

Used by the packaging test and ``bench/cold_start.py``; :func:`import_closure` says which of
Spillway's modules a Lambda can load at all (the layer ships exactly those). The child interpreter
is Python 3.13 (the runtime), started isolated (``-I -S``: no site-packages, no environment paths), with ``sys.path`` =
the built function, the built layer's ``python/``, and a directory standing in for what the Lambda
runtime itself provides (boto3, botocore, s3transfer).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

RUNTIME_PACKAGES = ("boto3", "botocore", "s3transfer")
FIND_PYTHON = Path(__file__).resolve().parents[4] / "deploy" / "find_python.py"

_CHILD = r"""
import json, sys, time
roots = sys.argv[1:4]
sys.path[:0] = roots
t0 = time.perf_counter()
import app
t1 = time.perf_counter()
handler = getattr(app, "handler")
assert callable(handler)
stray = sorted({m.__file__ for m in list(sys.modules.values())
                if getattr(m, "__file__", None) and not m.__file__.startswith((sys.base_prefix, *roots))})
extra = {}
if sys.argv[4] == "kube":
    t2 = time.perf_counter()
    import spillway.adapters.kube  # what the first invocation of a Kubernetes-facing handler loads
    extra["kube_import_s"] = time.perf_counter() - t2
print(json.dumps({"import_s": t1 - t0, "stray": stray, "python": sys.version.split()[0], **extra}))
"""


def python313() -> list[str] | None:
    """A command that runs CPython 3.13, or None when the machine has none: what ``deploy/find_python.py``
    (the one search, shared with ``sam build``) finds."""
    try:
        out = subprocess.run([sys.executable, str(FIND_PYTHON)],
                             capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = out.stdout.strip()
    return [found] if out.returncode == 0 and found else None


def runtime_stub() -> Path:
    """A directory of links to boto3/botocore/s3transfer: what the Lambda runtime ships."""
    stub = Path(tempfile.mkdtemp(prefix="lambda-runtime-"))
    for name in RUNTIME_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise RuntimeError(f"{name} is not installed here")
        os.symlink(Path(spec.origin).parent, stub / name)
    return stub


def import_handler(
    python: list[str], function_dir: Path, layer_dir: Path, stub: Path, *, kube: bool = False
) -> dict[str, Any]:
    env = {
        "AWS_DEFAULT_REGION": "us-east-1",
        "POWERTOOLS_SERVICE_NAME": "spillway",
        "PATH": os.environ.get("PATH", ""),
    }
    if "PYENV_VERSION=3.13.0" in " ".join(python):
        env["PYENV_VERSION"] = "3.13.0"
    out = subprocess.run(
        [*python, "-I", "-S", "-c", _CHILD, str(function_dir), str(layer_dir / "python"), str(stub), "kube" if kube else "-"],
        capture_output=True, text=True, timeout=120, check=False, env=env, cwd=function_dir,
    )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"{function_dir.name}: import failed:\n{out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def tree_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def import_closure(entry_files: Sequence[Path], package_root: Path, package: str = "spillway") -> set[str]:
    """The modules of ``package`` (under ``package_root``) that ``entry_files`` import, directly or not.

    Static, over the source: every ``import`` and ``from … import`` anywhere in a module (inside
    functions too, which is how the handlers defer the Kubernetes client), ``from a import b`` counting
    ``a.b`` when that is a module. A module's parent packages count as imported (Python runs their
    ``__init__``). This is what a Lambda can load from the layer; the layer build ships nothing else.
    """

    def source(name: str) -> Path | None:
        base = package_root.joinpath(*name.split("."))
        for candidate in (base / "__init__.py", base.with_suffix(".py")):
            if candidate.is_file():
                return candidate
        return None

    def imported(path: Path, module: str) -> Iterator[str]:
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                yield from (alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = module.split(".")
                    anchor = parts[: len(parts) - node.level + (1 if is_package else 0)]
                    target = ".".join(anchor + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                yield target
                yield from (f"{target}.{alias.name}" for alias in node.names)

    seen: set[str] = set()
    todo = [name for path in entry_files for name in imported(path, "")]
    while todo:
        name = todo.pop()
        if name != package and not name.startswith(package + "."):
            continue
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):
            module = ".".join(parts[:depth])
            path = source(module)
            if path is not None and module not in seen:
                seen.add(module)
                todo.extend(imported(path, module))
    return seen


def package_modules(package_root: Path, package: str = "spillway") -> set[str]:
    """Every module of ``package`` that has source under ``package_root``."""
    out = set()
    for path in (package_root / package).rglob("*.py"):
        parts = path.relative_to(package_root).with_suffix("").parts
        out.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out
