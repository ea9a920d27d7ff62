"""Charts (matplotlib, Agg backend): demand, capacity and the step lower bound over time; and the
Pareto chart of cost against GPU-weighted p90 pending, one point a run.

Long replays are drawn as time averages over at most ``points`` equal slices, so a three-month trace
stays readable; a short one is drawn step by step.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from spillway.sim.bounds import Bounds
from spillway.sim.engine import Replay
from spillway.sim.packers import PackerResult
from spillway.sim.report import PolicyResult


def average_steps(
    series: Sequence[tuple[int, float]], start: int, end: int, points: int
) -> tuple[list[float], list[float]]:
    """Time averages of a step function (value holds from each time to the next) over equal slices."""
    if end <= start:
        return [], []
    width = (end - start) / points
    xs = [start + (i + 0.5) * width for i in range(points)]
    sums = [0.0] * points
    for k, (t, value) in enumerate(series):
        seg_start = max(t, start)
        seg_end = min(series[k + 1][0] if k + 1 < len(series) else end, end)
        if seg_end <= seg_start or not value:
            continue
        first = int((seg_start - start) // width)
        last = min(points - 1, int((seg_end - start) // width))
        for i in range(first, last + 1):
            lo = max(seg_start, start + i * width)
            hi = min(seg_end, start + (i + 1) * width)
            if hi > lo:
                sums[i] += value * (hi - lo)
    return xs, [s / width for s in sums]


def write_chart(
    path: str | Path, bounds: Bounds, runs: Sequence[Replay], title: str, points: int = 2000
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    end = max([bounds.end, *(r.end for r in runs)])
    points = max(1, min(points, end // 60 or 1))
    day = 86400.0
    fig, ax = plt.subplots(figsize=(14, 6), dpi=110)
    demand = [(t, fluid) for t, _, fluid in bounds.series]
    step = [(t, float(nodes)) for t, nodes, _ in bounds.series]
    xs, ys = average_steps(demand, 0, end, points)
    ax.fill_between(
        [x / day for x in xs], ys, step="mid", color="0.85", label="demand (jobs started at submit), nodes"
    )
    xs, ys = average_steps(step, 0, end, points)
    ax.plot([x / day for x in xs], ys, color="black", linewidth=1.0, label="step lower bound")
    styles = {"spillway": ("tab:blue", "-", 1.4, 5), "static": ("tab:orange", "-", 0.9, 3)}
    others = iter([("tab:green", "--", 0.9, 3), ("tab:red", ":", 1.2, 4), ("tab:purple", "-.", 0.9, 3)])
    for run in runs:
        color, style, width, order = styles.get(run.policy) or next(others, ("tab:gray", "-", 0.9, 3))
        series = [(t, float(n)) for t, n in run.world.series]
        xs, ys = average_steps(series, 0, run.end, points)
        ax.plot(
            [x / day for x in xs],
            ys,
            color=color,
            linestyle=style,
            linewidth=width,
            zorder=order,
            label=f"capacity: {run.policy}",
        )
    ax.set_xlabel("days from the start of the trace")
    ax.set_ylabel("nodes")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(str(path))
    plt.close(fig)


def pareto_points(results: Sequence[PolicyResult]) -> list[tuple[str, float, float, bool]]:
    """(policy, cost, GPU-weighted p90 minutes, is a Spillway run) per result; cost in USD when every
    run has one, else node-hours."""
    usd = all(r.cost_usd is not None for r in results)
    return [
        (
            r.policy,
            float(r.cost_usd) if usd and r.cost_usd is not None else r.node_hours,
            r.pending_weighted_seconds["p90"] / 60,
            r.policy == "spillway" or r.policy.startswith("spillway["),
        )
        for r in results
    ]


def write_pareto(
    path: str | Path,
    results: Sequence[PolicyResult],
    bounds: Bounds,
    packers: Sequence[PackerResult],
    title: str,
) -> None:
    """Cost against GPU-weighted p90 pending: Spillway's runs joined by a line (in cost order), the
    reference policies as their own markers, the ideal packers (no waiting) and the cost bound."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = pareto_points(results)
    usd = all(r.cost_usd is not None for r in results)
    # A run costing over twice the cheapest (static provisioning) would squeeze the others together:
    # it is named in a note instead of drawn.
    cheapest = min((x for _, x, _, _ in points if x > 0), default=0.0)
    far = [p for p in points if cheapest and p[1] > 2 * cheapest]
    points = [p for p in points if p not in far]
    fig, ax = plt.subplots(figsize=(9, 6), dpi=110)
    ours = sorted((x, y, name) for name, x, y, spill in points if spill)
    if ours:
        ax.plot([p[0] for p in ours], [p[1] for p in ours], "-o", color="tab:blue", label="spillway runs")
        for x, y, name in ours:
            ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    markers = iter(["s", "^", "D", "v", "P", "X"])
    for name, x, y, spill in points:
        if not spill:
            ax.plot([x], [y], next(markers, "x"), linestyle="none", label=name)
    for p in packers:
        at = p.cost_usd if usd else p.node_hours
        if at is not None:
            ax.plot([at], [0.0], "*", markersize=10, linestyle="none", label=f"ideal {p.packer} (no boot)")
    bound = bounds.step_cost_usd if usd else bounds.step_node_hours
    if bound:
        partial = f" (over {', '.join(bounds.cost_resources)} only)" if usd and bounds.unpriced else ""
        ax.axvline(bound, color="black", linewidth=0.8, linestyle=":", label=f"step lower bound{partial}")
    if far:
        unit = "$" if usd else ""
        note = "; ".join(f"{name}: {unit}{x:,.0f}, p90 {y:.1f} min" for name, x, y, _ in far)
        ax.text(0.99, 0.01, f"off the chart: {note}", transform=ax.transAxes, ha="right", fontsize=7)
    ax.set_xlabel("cost, USD" if usd else "node-hours")
    ax.set_ylabel("GPU-weighted p90 pending added, minutes")
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(str(path))
    plt.close(fig)
