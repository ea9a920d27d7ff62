"""Lower bounds on node-hours, computed from the trace alone.

Demand at time ``t`` is what the jobs running at ``t`` request when every job starts at its submit time
and runs for its duration (no waiting at all). With ``cap`` a node's allocatable room:

* the **step** lower bound is ``∫ ⌈demand(t) / cap⌉ dt`` over the dominant resource: at every instant no
  fewer whole nodes can hold the demand, even with free migration of pods;
* the **fluid** lower bound is ``∫ demand(t) / cap dt`` (for a GPU trace: requested GPU-time / GPUs a node);
* the **peak** is ``max ⌈demand(t) / cap⌉``: what static provisioning for the peak keeps all the time.

No autoscaler can beat the step bound without moving running pods; the ratio of a policy's node-hours
to it is the report's main figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spillway.model.resources import CPU, MEMORY, NVIDIA_GPU, Resources
from spillway.sim.trace import Job

BOUND_RESOURCES = (NVIDIA_GPU, CPU, MEMORY)


@dataclass(frozen=True, slots=True)
class Bounds:
    step_node_hours: float
    fluid_node_hours: float
    peak_nodes: int
    start: int
    end: int  # the last job's end when every job starts at submit
    # (time, nodes by the step bound, demand in node units) at every change, for the chart
    series: tuple[tuple[int, int, float], ...]
    resource: str  # the resource that dominated most often (the one the bound is about)


def lower_bounds(jobs: Sequence[Job], capacity: Resources) -> Bounds:
    """The step and fluid lower bounds and the peak, for nodes with ``capacity`` allocatable room."""
    resources = [r for r in BOUND_RESOURCES if capacity.get(r, 0) > 0 and any(j.total(r) for j in jobs)]
    caps = [capacity[r] for r in resources]
    if not jobs or not resources:
        return Bounds(0.0, 0.0, 0, 0, 0, (), resources[0] if resources else NVIDIA_GPU)
    deltas: dict[int, list[int]] = {}
    for job in jobs:
        totals = [job.total(r) for r in resources]
        for t, sign in ((job.submit, 1), (job.submit + job.duration, -1)):
            slot = deltas.setdefault(t, [0] * len(resources))
            for i, value in enumerate(totals):
                slot[i] += sign * value
    times = sorted(deltas)
    demand = [0] * len(resources)
    step_seconds = 0
    fluid_seconds = 0.0
    peak = 0
    series: list[tuple[int, int, float]] = []
    dominant_seconds = [0] * len(resources)
    for i, t in enumerate(times):
        slot = deltas[t]
        for k in range(len(resources)):
            demand[k] += slot[k]
        nodes = 0
        fluid = 0.0
        dominant = 0
        for k, cap in enumerate(caps):
            whole = -(-demand[k] // cap)
            if whole > nodes:
                nodes = whole
            share = demand[k] / cap
            if share > fluid:
                fluid, dominant = share, k
        peak = max(peak, nodes)
        series.append((t, nodes, fluid))
        if i + 1 < len(times):
            dt = times[i + 1] - t
            step_seconds += nodes * dt
            fluid_seconds += fluid * dt
            dominant_seconds[dominant] += dt
    resource = resources[max(range(len(resources)), key=lambda k: dominant_seconds[k])]
    return Bounds(
        step_node_hours=step_seconds / 3600,
        fluid_node_hours=fluid_seconds / 3600,
        peak_nodes=peak,
        start=times[0],
        end=times[-1],
        series=tuple(series),
        resource=resource,
    )
