"""Slim a built Lambda layer: drop what the Lambdas never load, ship compiled bytecode.

Run by the layer's Makefile on ``$(ARTIFACTS_DIR)/python``. What goes and why:

* ``kubernetes/aio`` (the client's asyncio twin, ~64 MB) and the aiohttp stack it alone needs;
* ``botocore``/``boto3``/``s3transfer``: the Lambda runtime provides them, and a second copy would
  shadow the runtime's matched pair;
* tests, ``__pycache__`` of other interpreters, type stubs;
* Spillway's own modules that no Lambda imports (``DROP_OWN``): the embedded local stack, the
  simulator, the offline CLI. The packaging test computes what the handlers import and checks that
  the layer ships exactly that, so a new module of either kind is noticed.

Bytecode for CPython 3.13 with ``unchecked-hash`` invalidation, so the read-only layer never
recompiles at cold start. The generated ``kubernetes/client`` (~54 MB of source) is shipped as
sourceless ``.pyc`` with docstrings stripped; its tracebacks lose source lines, which nobody reads.
"""

from __future__ import annotations

import compileall
import py_compile
import shutil
import sys
from pathlib import Path

DROP_TOP = (
    "aiohttp", "aiohappyeyeballs", "aiohttp_retry", "aiosignal", "frozenlist", "multidict", "propcache", "yarl",
    "botocore", "boto3", "s3transfer",
)  # fmt: skip
DROP_PATHS = ("kubernetes/aio", "kubernetes/test", "kubernetes/e2e_test")
SOURCELESS = ("kubernetes/client",)
DROP_OWN = (
    "spillway/local", "spillway/sim", "spillway/cli.py", "spillway/inputs.py", "spillway/perf.py",
)  # fmt: skip


def prune(root: Path) -> None:
    for entry in list(root.iterdir()):
        base = entry.name.split("-")[0].lower()
        if base in DROP_TOP or (
            entry.suffix == ".dist-info" and base.replace("_", "-") in {d.replace("_", "-") for d in DROP_TOP}
        ):
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    for rel in DROP_PATHS + DROP_OWN:
        if (root / rel).is_file():
            (root / rel).unlink()
        shutil.rmtree(root / rel, ignore_errors=True)
    for cache in root.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)
    for pattern in ("tests", "test"):
        for directory in root.glob(f"*/{pattern}"):
            if directory.is_dir():
                shutil.rmtree(directory)
    for stub in root.rglob("*.pyi"):
        stub.unlink()


def compile_all(root: Path) -> None:
    for rel in SOURCELESS:
        for source in (root / rel).rglob("*.py"):
            py_compile.compile(
                str(source),
                cfile=str(source.with_suffix(".pyc")),
                doraise=True,
                optimize=2,
                invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
            )
            source.unlink()
    ok = compileall.compile_dir(
        str(root), quiet=1, workers=0, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH
    )
    if not ok:
        raise SystemExit("compileall failed")


def main() -> None:
    if sys.version_info[:2] != (3, 13):
        raise SystemExit(
            f"compile the layer with Python 3.13 (the Lambda runtime), not {sys.version.split()[0]}"
        )
    root = Path(sys.argv[1])
    prune(root)
    compile_all(root)


if __name__ == "__main__":
    main()
