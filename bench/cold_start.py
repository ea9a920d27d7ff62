"""Cold start of the built Lambdas: the layer's unzipped size and each handler's import time.

Imports each built handler (`make build` first) in fresh Python 3.13 processes with only the function,
the layer and the runtime's boto3 on sys.path, five times, and prints the median; for the functions
that talk to Kubernetes also the import of the Kubernetes adapter, which their first invocation pays.
Figures, not pass/fail. Run: `.venv/bin/python bench/cold_start.py`
"""

from __future__ import annotations

import statistics
import sys
import zipfile
from io import BytesIO
from pathlib import Path

from spillway.local.lambda_sandbox import import_handler, python313, runtime_stub, tree_size

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / ".aws-sam" / "build"
KUBE_FACING = {"ObserveFunction", "ScaleFunction", "DrainFunction"}


def zipped_size(path: Path) -> int:
    buf = BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(path.rglob("*")):
            if file.is_file():
                archive.write(file, file.relative_to(path))
    return len(buf.getvalue())


def main() -> int:
    python = python313()
    layer = BUILD / "SpillwayLayer"
    if python is None or not layer.is_dir():
        print("needs Python 3.13 and `make build` first", file=sys.stderr)
        return 2
    print(f"layer: {tree_size(layer) / 2**20:.1f} MiB unzipped, {zipped_size(layer) / 2**20:.1f} MiB zipped")
    stub = runtime_stub()
    print(f"{'function':<16} {'handler import s (median of 5)':>31} {'+ Kubernetes adapter s':>23}")
    for function in sorted(BUILD.glob("*Function")):
        runs = [
            import_handler(python, function, layer, stub, kube=function.name in KUBE_FACING) for _ in range(5)
        ]
        imports = statistics.median(r["import_s"] for r in runs)
        kube = [r["kube_import_s"] for r in runs if "kube_import_s" in r]
        kube_text = f"{statistics.median(kube):.2f}" if kube else "-"
        print(f"{function.name:<16} {imports:>31.2f} {kube_text:>23}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
