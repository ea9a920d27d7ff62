"""bench/planner.py prints each time as wall and as CPU seconds: the README's table gives CPU seconds
(the machine shared), which a reader running the script must find in its output."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_planner_times", ROOT / "bench/planner.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_planner_bench_prints_cpu_seconds_beside_wall_seconds(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = _load_bench()
    ticks = {"wall": 0.0, "cpu": 0.0}

    def wall() -> float:  # each reading 3 s on: a loaded machine's wall clock
        ticks["wall"] += 3.0
        return ticks["wall"]

    def cpu() -> float:  # and 1 s of this process's CPU
        ticks["cpu"] += 1.0
        return ticks["cpu"]

    monkeypatch.setattr(bench, "time", SimpleNamespace(perf_counter=wall, process_time=cpu))
    assert bench.main(["--sizes", "100"]) == 0
    header, row = capsys.readouterr().out.splitlines()[:2]
    assert "parse CPU s" in header and "plan CPU s" in header and "exp. plan CPU s" in header
    cells = row.split()
    # nodes pods pending classes MiB | parse wall, parse CPU, plan wall, plan CPU, plan/parse
    assert cells[5:10] == ["3.00", "1.00", "3.00", "1.00", "1.00"]
    # ... exp. plan wall, exp. plan CPU, exp./plain (of CPU seconds)
    assert cells[14:17] == ["3.00", "1.00", "1.00"]
