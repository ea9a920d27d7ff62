"""A PNG chart of demand, capacity and the step lower bound over time (matplotlib, Agg backend).

Long replays are drawn as time averages over at most ``points`` equal slices, so a three-month trace
stays readable; a short one is drawn step by step.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from spillway.sim.bounds import Bounds
from spillway.sim.engine import Replay


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
