"""Planner time per plan in a replay: ``spillway simulate`` with each Spillway ``plan(...)`` call timed.

It runs ``spillway simulate`` with the arguments given (add ``--json --no-progress``; the report is
not printed) and prints the number of plans and the CPU seconds (``time.process_time``, steady on a
machine shared with other work) and wall seconds (``time.perf_counter``) spent inside the planner's
entry point, in all and per plan. Figures, not pass/fail: run the builds being compared one after
the other, more than once, and compare the CPU milliseconds per plan.

Run (the README's "tight" slice of the Philly trace):
`PYTHONPATH=layers/spillway .venv/bin/python bench/plan_times.py ../shared/traces/philly.csv --limit 3000
--scheduler-scoring most-allocated --movable-fraction 0.5 --restart-penalty 10 --policies static
--variant tight=TIGHT.yaml --seed 0 --json --no-progress`
"""

from __future__ import annotations

import contextlib
import io
import sys
import time
from typing import Any

import spillway.sim.policies as policies
from spillway import cli

planned = {"plans": 0, "cpu": 0.0, "wall": 0.0}
_plan = policies.plan


def timed_plan(*args: Any, **kwargs: Any) -> Any:
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        return _plan(*args, **kwargs)
    finally:
        planned["cpu"] += time.process_time() - cpu
        planned["wall"] += time.perf_counter() - wall
        planned["plans"] += 1


def main(argv: list[str]) -> int:
    policies.plan = timed_plan  # type: ignore[assignment]  # the name SpillwayPolicy.decide calls
    with contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(["simulate", *argv])
    n = planned["plans"]
    if not n:
        print("no Spillway plan in this replay (--policies spillway, or a --variant)", file=sys.stderr)
        return 1
    print(
        f"plans {n}  planner CPU {planned['cpu']:.2f} s ({1000 * planned['cpu'] / n:.3f} ms a plan)  "
        f"wall {planned['wall']:.2f} s ({1000 * planned['wall'] / n:.3f} ms a plan)"
    )
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
