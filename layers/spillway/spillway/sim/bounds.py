"""Lower bounds on node-hours and cost, computed from the trace alone, over every group's node type.

Demand at time ``t`` is what the jobs running at ``t`` request when every job starts at its submit time
and runs for its duration (no waiting at all). For each resource ``r`` (GPUs, CPU, memory) the fleet
offers node types with ``cap_g(r)`` allocatable room and ``price_g`` USD an hour:

* the **step** lower bound on node-hours is ``∫ max_r ⌈demand_r(t) / max_g cap_g(r)⌉ dt``: at every
  instant no fewer whole nodes can hold the demand of any one resource, even with free migration of
  pods and the largest node type for each resource; the resource giving the maximum is the one that
  binds at that step;
* the **step** lower bound on cost is ``∫ max_r cost_r(t) dt`` where ``cost_r`` is the cheapest way to
  hold ``demand_r`` with whole nodes when a single node type offers ``r`` (``⌈demand / cap⌉ * price``),
  and its fluid form ``demand_r * min_g price_g / cap_g(r)`` when several do (a cheaper type could
  take a remainder, so rounding up one type is not a bound there);
* a resource offered by a node type **without a price** has no cost bound (that type could be the
  cheapest way to hold it): the cost bounds are over the other resources only, still lower bounds
  (the fleet must hold each resource's demand with the types offering it, whatever the others cost),
  weaker ones; ``cost_resources`` says which resources they are over and ``unpriced`` which types
  lack a price. With no resource left they are None;
* the **fluid** lower bound is ``∫ max_r demand_r(t) / max_g cap_g(r) dt``;
* the **peak** is ``max`` of the step bound's nodes; ``peak_demand`` is each resource's own peak
  (``max_t demand_r(t)``), which need not fall at the same time for every resource: what static
  provisioning must hold of each.

With one node type (any number of groups of it) this is the single-type bound. With a mixed fleet
(a CPU group and a GPU group) each resource is measured against the types that offer it: the GPUs'
demand against the GPU nodes, so a CPU group listed first no longer makes the bound meaningless, and
the cost bound weighs a $31 node and a $0.77 node for what they cost.

The step bound assumes every job starts at its submit; it is not a floor for a policy that makes jobs
wait. Jobs that wait for a launch (the next tick, then the boot) can line up on fewer nodes than at
their submits, and node-hours run from the launch, not the first submit, so a policy can come out
slightly under the step bound without moving a pod: by at most about a tick plus a boot per launch
while jobs wait only for launches (jobs held longer, by a MaxSize or a limit, can take it further).
What no policy goes under however long jobs wait is the trace's work over the largest node's room:
on a trace where one resource binds throughout (GPUs on Philly) that is the fluid bound. The ratio of
a policy's node-hours to the step bound is the report's main figure. :mod:`spillway.sim.packers`
gives what packing jobs at their submits without moving them reaches, with instant nodes (the same
caveat holds: a policy that delays jobs can come out under it too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from spillway.model.resources import CPU, MEMORY, NVIDIA_GPU, Resources
from spillway.sim.trace import Job

BOUND_RESOURCES = (NVIDIA_GPU, CPU, MEMORY)


@dataclass(frozen=True, slots=True)
class NodeType:
    """A node type the fleet may launch: its allocatable room and its price (None: unknown)."""

    name: str  # "" for a room alone (lower_bounds(jobs, room)): no type the notes can name
    allocatable: Resources
    price: float | None = None
    groups: tuple[str, ...] = ()  # the simulator's groups of this type at this price (run.fleet)


@dataclass(frozen=True, slots=True)
class Bounds:
    step_node_hours: float
    fluid_node_hours: float
    peak_nodes: int
    start: int
    end: int  # the last job's end when every job starts at submit
    # (time, nodes by the step bound, demand in node units) at every change, for the chart
    series: tuple[tuple[int, int, float], ...]
    resource: str  # the resource that bound most often (the one the node bound is mostly about)
    step_cost_usd: float | None = None  # None when every demanded resource is offered by an unpriced type
    fluid_cost_usd: float | None = None
    # hours each resource bound the node bound (steps needing no node: none)
    binding_hours: Mapping[str, float] | None = None
    # each demanded resource's own peak (every job at its submit), in its units (milli-units)
    peak_demand: Mapping[str, int] | None = None
    # the resources the cost bounds are over: those whose every offering node type has a price
    cost_resources: tuple[str, ...] = ()
    unpriced: tuple[str, ...] = ()  # node types offering a demanded resource, without a price
    unpriced_groups: Mapping[str, str] = field(default_factory=dict)  # their groups: group -> type

    def cost_note(self) -> str:
        """Why the cost bound is missing or over some resources only, naming the unpriced groups (a type
        may have a price in one group and none in another) or types; "" when whole."""
        if self.step_cost_usd is not None and not self.unpriced:
            return ""
        if not self.unpriced:  # a room alone: no type to name
            return "no cost bound: the node type has no price"
        names = ", ".join(
            [f"group {g} ({t})" for g, t in self.unpriced_groups.items()]
            + [t for t in self.unpriced if t not in self.unpriced_groups.values()]
        )
        if not self.cost_resources:
            return f"no cost bound: no price for {names} (--price TYPE=USD)"
        return (
            f"cost bound over {', '.join(self.cost_resources)} only: no price for {names} (--price TYPE=USD)"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "resource": self.resource,
            "step_node_hours": round(self.step_node_hours, 3),
            "fluid_node_hours": round(self.fluid_node_hours, 3),
            "step_cost_usd": None if self.step_cost_usd is None else round(self.step_cost_usd, 2),
            "fluid_cost_usd": None if self.fluid_cost_usd is None else round(self.fluid_cost_usd, 2),
            "peak_nodes": self.peak_nodes,
            "binding_hours": {k: round(v, 3) for k, v in (self.binding_hours or {}).items()},
            "cost_bound_over": list(self.cost_resources),
            "unpriced_types": list(self.unpriced),
            "unpriced_groups": dict(self.unpriced_groups),
            "hours": round(self.end / 3600, 3),
        }


@dataclass(frozen=True, slots=True)
class _Offer:
    """What the fleet offers of one resource."""

    resource: str
    max_cap: int  # the largest room a node type has of it
    single: tuple[int, float] | None  # (room, price) when one node type alone offers it
    usd_per_unit: float | None  # cheapest price per unit; None when a type offering it has no price
    unpriced: tuple[NodeType, ...] = ()  # the types offering it without a price


def _offers(jobs: Sequence[Job], types: Sequence[NodeType]) -> list[_Offer]:
    out = []
    for r in BOUND_RESOURCES:
        offering = [t for t in types if t.allocatable.get(r, 0) > 0]
        if not offering or not any(j.total(r) for j in jobs):
            continue
        priced = all(t.price is not None for t in offering)
        per_unit = (
            min(t.price / t.allocatable[r] for t in offering if t.price is not None) if priced else None
        )
        distinct = {(t.allocatable[r], t.price) for t in offering}
        single = None
        if len(distinct) == 1 and priced:
            cap, price = next(iter(distinct))
            single = (cap, float(price or 0.0))
        unpriced = tuple(t for t in offering if t.price is None)
        out.append(_Offer(r, max(t.allocatable[r] for t in offering), single, per_unit, unpriced))
    return out


def lower_bounds(jobs: Sequence[Job], fleet: Sequence[NodeType] | Resources) -> Bounds:
    """The step and fluid lower bounds (node-hours and USD) and the peak, for the fleet's node types.

    ``fleet`` may be a single node type's allocatable room (a one-type fleet without prices).
    """
    types = [NodeType("", fleet)] if isinstance(fleet, Mapping) else list(fleet)
    offers = _offers(jobs, types)
    if not jobs or not offers:
        return Bounds(0.0, 0.0, 0, 0, 0, (), offers[0].resource if offers else NVIDIA_GPU, 0.0, 0.0, {}, {})
    costed = tuple(o.resource for o in offers if o.usd_per_unit is not None)
    priced = bool(costed)
    resources = [o.resource for o in offers]
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
    step_usd_seconds = 0.0
    fluid_usd_seconds = 0.0
    peak = 0
    series: list[tuple[int, int, float]] = []
    binding_seconds = [0] * len(resources)
    peaks = [0] * len(resources)
    for i, t in enumerate(times):
        slot = deltas[t]
        for k in range(len(resources)):
            demand[k] += slot[k]
            peaks[k] = max(peaks[k], demand[k])
        nodes, fluid, binding, step_usd, fluid_usd = _at_step(offers, demand, priced)
        peak = max(peak, nodes)
        series.append((t, nodes, fluid))
        if i + 1 < len(times):
            dt = times[i + 1] - t
            step_seconds += nodes * dt
            fluid_seconds += fluid * dt
            step_usd_seconds += step_usd * dt
            fluid_usd_seconds += fluid_usd * dt
            if nodes:  # a step that needs no node binds no resource
                binding_seconds[binding] += dt
    most = max(range(len(resources)), key=lambda k: binding_seconds[k])
    return Bounds(
        step_node_hours=step_seconds / 3600,
        fluid_node_hours=fluid_seconds / 3600,
        peak_nodes=peak,
        start=times[0],
        end=times[-1],
        series=tuple(series),
        resource=resources[most],
        step_cost_usd=step_usd_seconds / 3600 if priced else None,
        fluid_cost_usd=fluid_usd_seconds / 3600 if priced else None,
        binding_hours={r: s / 3600 for r, s in zip(resources, binding_seconds, strict=True)},
        peak_demand=dict(zip(resources, peaks, strict=True)),
        cost_resources=costed,
        unpriced=tuple(sorted({t.name for o in offers for t in o.unpriced if t.name})),
        unpriced_groups=dict(sorted({(g, t.name) for o in offers for t in o.unpriced for g in t.groups})),
    )


def _at_step(
    offers: Sequence[_Offer], demand: Sequence[int], priced: bool
) -> tuple[int, float, int, float, float]:
    """Nodes, fluid nodes, binding resource index, USD an hour (step and fluid) for one demand vector."""
    nodes = 0
    fluid = 0.0
    binding = 0
    step_usd = 0.0
    fluid_usd = 0.0
    for k, offer in enumerate(offers):
        d = demand[k]
        whole = -(-d // offer.max_cap)
        if whole > nodes:
            nodes, binding = whole, k
        fluid = max(fluid, d / offer.max_cap)
        if priced and offer.usd_per_unit is not None:
            share = d * offer.usd_per_unit
            exact = -(-d // offer.single[0]) * offer.single[1] if offer.single is not None else share
            step_usd = max(step_usd, exact)
            fluid_usd = max(fluid_usd, share)
    return nodes, fluid, binding, step_usd, fluid_usd
