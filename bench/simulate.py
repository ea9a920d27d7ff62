"""Simulation benchmark: the whole Philly trace under every policy, as a Markdown table.

For each scheduler scoring strategy it replays ``../shared/traces/philly.csv`` (8-GPU p3.16xlarge
nodes, 120 s boot, 60 s interval) under Spillway and the reference policies and prints one table row
per policy, with the replay's wall time. ``--floor`` adds Spillway with every delay of its own taken
out (no idle time, no launch delay, no scale-in cap; the same boot time): what is left above the step
lower bound is boot time and the scheduler's packing, which no autoscaler removes without moving
running pods.
``--profile`` prints where the time of one Spillway replay goes (cProfile). Figures, not pass/fail.

Run: `.venv/bin/python bench/simulate.py [--trace PATH] [--limit N] [--floor] [--profile]`
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from dataclasses import replace
from pathlib import Path

from spillway.config import PlannerConfig
from spillway.sim.report import PolicyResult
from spillway.sim.run import SimConfig, simulate
from spillway.sim.trace import read_trace
from spillway.sim.world import SchedulerConfig

TRACE = Path(__file__).resolve().parents[2] / "shared" / "traces" / "philly.csv"


def row(scoring: str, r: PolicyResult) -> str:
    pend = "/".join(f"{r.pending_seconds[k] / 60:.1f}" for k in ("p50", "p90", "p99"))
    weighted = "/".join(f"{r.pending_weighted_seconds[k] / 60:.1f}" for k in ("p50", "p90", "p99"))
    cost = "-" if r.cost_usd is None else f"{r.cost_usd / 1e6:.2f}"
    ratio = "-" if r.ratio_to_step_bound is None else f"{r.ratio_to_step_bound:.3f}"
    util = "-" if r.utilisation is None else f"{100 * r.utilisation:.1f}%"
    return (
        f"| {scoring} | {r.policy} | {r.node_hours:,.0f} | {ratio} | {cost} | {pend} | {weighted} | "
        f"{util} | {r.actions_per_hour:.2f} | {r.pods_killed} | {r.decisions:,} | {r.wall_seconds:.1f} |"
    )


def build_parser() -> argparse.ArgumentParser:
    """The script's flags (the README's test reads them from here)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--trace", default=str(TRACE))
    parser.add_argument("--limit", type=int)
    parser.add_argument("--floor", action="store_true")
    parser.add_argument("--profile", action="store_true")
    return parser


def main() -> int:
    args = build_parser().parse_args()
    if not Path(args.trace).exists():
        print(f"no trace at {args.trace}", file=sys.stderr)
        return 1
    trace = read_trace(args.trace, limit=args.limit)
    print(
        "| scoring | policy | node-hours | x step bound | cost $M | pending min p50/p90/p99 | "
        "GPU-weighted p50/p90/p99 | GPU util | actions/h | pods killed | decisions | replay s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    bound = 0.0
    for scoring in ("least-allocated", "most-allocated"):
        started = time.perf_counter()
        report = simulate(SimConfig(scheduler=SchedulerConfig(scoring)), trace)
        bound = report.bounds.step_node_hours
        for result in report.results:
            print(row(scoring, result))
        print(f"| {scoring} | all four | | | | | | | | | | {time.perf_counter() - started:.1f} |")
    if args.floor:
        planner = PlannerConfig(
            scale_down_idle_minutes=0, scale_down_delay_after_launch_minutes=0, max_scale_in_fraction=1
        )
        for scoring in ("least-allocated", "most-allocated"):
            config = SimConfig(scheduler=SchedulerConfig(scoring), planner=planner, policies=("spillway",))
            report = simulate(config, trace)
            print(row(scoring, replace(report.results[0], policy="spillway, no idle time (floor)")))
    print(f"\nstep lower bound: {bound:,.0f} node-hours")
    if args.profile:
        profile = cProfile.Profile()
        profile.enable()
        simulate(SimConfig(scheduler=SchedulerConfig("most-allocated"), policies=("spillway",)), trace)
        profile.disable()
        pstats.Stats(profile, stream=sys.stdout).sort_stats("tottime").print_stats(15)
    return 0


if __name__ == "__main__":
    sys.exit(main())
