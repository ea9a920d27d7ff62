"""What a replay measured, as a table and as JSON.

* **node-hours**: every instance from launch to termination (booting time included: it is billed), an
  instance still up at the end up to then: the last job's completion, or, with a job left waiting,
  the horizon, the same for every policy, where the waits are cut (nothing more happened to it before);
  and cost at on-demand prices (``spillway.sim.prices``);
* **x bound**: node-hours over the step lower bound computed from the same trace (``spillway.sim.bounds``),
  which starts every job at its submit: a policy that makes jobs wait can come out slightly under it
  without moving a pod (by about a tick plus a boot per launch at most, while jobs wait only for
  launches), so a ratio near or under 1 is partly waiting, not packing;
* **pending added**: per job, every second it spent pending: from submit to its first start, plus,
  each time a move, a kill or a Spot interruption sent it back to the queue, from then to its next
  start (every job would start at submit and never stop on an infinite cluster, so all of it is added
  by the autoscaler). A job some group can run that never started, or never started again, counts
  as waiting until the horizon (``spillway.sim.engine.horizon``: the trace's last end at submit plus
  30 days), censored there, a lower bound of its wait. The horizon depends on the trace alone, so every
  policy's starved job is counted to the same instant: a replay's own end depends on where that
  policy's last event fell, and censoring there compared policies on different terms. The report
  counts both apart (``jobs_never_started``, ``jobs_not_restarted``). p50/p90/p99 over those jobs, and weighted by the job's GPUs (a 32-GPU
  job weighs 32 one-GPU jobs, a job without GPUs 1); jobs no group can run are left out. Percentiles are nearest-rank: the
  smallest value with at least that share of the (weighted) jobs at or below it;
* **utilisation**: resource-seconds requested by running pods over resource-seconds of every instance,
  for the measured resource (GPUs on a GPU trace, else CPU);
* **actions/h**: SetDesiredCapacity calls (failed ones too), uncordons and node terminations, per hour;
* **killed**: pods running on a node when it was terminated, and pods a drain evicted that could not
  move (not marked movable, or not among the pods its plan named); each kills its job, which starts
  over from the beginning and counts as killed, not moved; **unmovable killed**: the pods not marked movable
  among them, whichever way the policy removed their node (a drain's eviction or a termination, for
  every policy alike): must stay 0;
* **moves/job**: moves over every job of the trace (those no group can run included). A move is a
  restart elsewhere of a movable job whose pods a drain evicted as its plan said, counted each time
  (JSON ``jobs_moved`` counts the jobs moved at least once); jobs restarted because their Spot node
  was interrupted are not moves (**interrupted**, counted apart: JSON ``restarts_by_interruptions``
  each time, ``jobs_restarted_by_interruptions`` the jobs interrupted at least once), nor are killed jobs;
* **GPU-h lost**: GPU-hours of progress lost to restarts: for a move or an interruption of a movable
  job the restart penalty times the job's GPUs, each time, charged whole even to a job that had run
  less than the penalty since it (re)started (its remaining time then grows past what it had: the
  penalty stands for the restart's own cost too); for a killed job, or an interrupted one not marked
  movable, the progress it had made, times its GPUs;
* **x cost bound**: cost over the step lower bound on cost (``spillway.sim.bounds``).

Per tenant (a namespace: Philly's virtual clusters are ``vc-<name>``):

* **node-hours charged**: the node-hours of the nodes the tenant's pods opened, a node's whole life
  charged to the tenant the planner charged when it opened it (the plan's ``ScaleUp.tenants``); only
  for a policy that says who opened a node (Spillway). Nodes nobody opened (MinSize) are charged to none;
* **pods held by limits**: distinct pods some plan left pending because a limit binds (codes
  ``tenant-limit``, ``cluster-limit``, ``capacity-quota``), in total and per code;
* **waiting**: the tenant's jobs' pending added, GPU-weighted p50/p90/p99 as above.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spillway.sim.bounds import Bounds
from spillway.sim.engine import Replay
from spillway.sim.packers import PackerResult


def percentile(samples: Sequence[tuple[int, int]], share: float) -> float:
    """Nearest-rank percentile of ``(value, weight)`` samples; 0 with no samples."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    total = sum(w for _, w in ordered)
    need = share * total
    running = 0
    for value, weight in ordered:
        running += weight
        if running >= need - 1e-9:
            return float(value)
    return float(ordered[-1][0])


@dataclass(frozen=True, slots=True)
class TenantResult:
    tenant: str
    jobs: int
    jobs_started: int
    node_hours: float | None  # charged: nodes the tenant's pods opened; None when the policy does not say
    pods_held: int  # distinct pods held by a limit at some plan
    pods_held_by_code: dict[str, int]
    pending_weighted_seconds: dict[str, float]  # p50/p90/p99, GPU-weighted

    def to_dict(self) -> dict[str, Any]:
        return {
            "jobs": self.jobs,
            "jobs_started": self.jobs_started,
            "node_hours_charged": None if self.node_hours is None else round(self.node_hours, 3),
            "pods_held_by_limits": self.pods_held,
            "pods_held_by_limit_code": dict(self.pods_held_by_code),
            "pending_added_gpu_weighted_seconds": {
                k: round(v, 1) for k, v in self.pending_weighted_seconds.items()
            },
        }


@dataclass(frozen=True, slots=True)
class PolicyResult:
    policy: str
    node_hours: float
    node_hours_by_group: dict[str, float]
    cost_usd: float | None
    ratio_to_step_bound: float | None
    pending_seconds: dict[str, float]  # p50/p90/p99
    pending_weighted_seconds: dict[str, float]
    max_pending_seconds: float
    utilisation: float | None
    actions: dict[str, int]
    actions_per_hour: float
    pods_killed: int
    jobs_killed: int
    jobs_started: int
    jobs_unstarted: int  # never started at all (runnable)
    decisions: int
    hours: float
    wall_seconds: float
    tenants: dict[str, TenantResult] = field(default_factory=dict)
    ratio_to_cost_bound: float | None = None
    moves: int = 0
    moves_per_job: float = 0.0
    jobs_moved: int = 0
    unmovable_killed: int = 0
    interruptions: int = 0
    interruption_restarts: int = 0  # each time a job went back to the queue for an interruption
    jobs_interrupted: int = 0  # jobs interrupted at least once
    gpu_hours_lost: float = 0.0
    never_joined: int = 0  # launches that never became a node (--join-failure-rate)
    unregistered_removed: int = 0  # of those, instances the policy removed
    jobs_not_restarted: int = 0  # started, sent back to the queue, never started again
    # groups whose instances ran without a price, by group: their node type (why cost_usd is None)
    unpriced_groups: dict[str, str] = field(default_factory=dict)
    censored_at: int = 0  # the horizon: when the waits of jobs still waiting are cut (seconds)

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "node_hours": round(self.node_hours, 3),
            "node_hours_by_group": {k: round(v, 3) for k, v in self.node_hours_by_group.items()},
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 2),
            "cost_unpriced_groups": dict(self.unpriced_groups),
            "ratio_to_step_bound": None
            if self.ratio_to_step_bound is None
            else round(self.ratio_to_step_bound, 4),
            "pending_added_seconds": {k: round(v, 1) for k, v in self.pending_seconds.items()},
            "pending_added_gpu_weighted_seconds": {
                k: round(v, 1) for k, v in self.pending_weighted_seconds.items()
            },
            "pending_added_max_seconds": round(self.max_pending_seconds, 1),
            "utilisation": None if self.utilisation is None else round(self.utilisation, 4),
            "actions": dict(self.actions),
            "actions_per_hour": round(self.actions_per_hour, 3),
            "ratio_to_cost_bound": None
            if self.ratio_to_cost_bound is None
            else round(self.ratio_to_cost_bound, 4),
            "pods_killed_by_scale_down": self.pods_killed,
            "jobs_killed_by_scale_down": self.jobs_killed,
            "unmovable_pods_killed": self.unmovable_killed,
            "moves": self.moves,
            "moves_per_job": round(self.moves_per_job, 4),
            "jobs_moved": self.jobs_moved,
            "spot_interruptions": self.interruptions,
            "jobs_restarted_by_interruptions": self.jobs_interrupted,
            "restarts_by_interruptions": self.interruption_restarts,
            "gpu_hours_lost_to_restarts": round(self.gpu_hours_lost, 3),
            "launches_never_joined": self.never_joined,
            "never_joined_removed": self.unregistered_removed,
            "jobs_started": self.jobs_started,
            "jobs_never_started": self.jobs_unstarted,
            "jobs_not_restarted": self.jobs_not_restarted,
            "decisions": self.decisions,
            "simulated_hours": round(self.hours, 3),
            "tenants": {name: t.to_dict() for name, t in sorted(self.tenants.items())},
        }


def measure(run: Replay, bounds: Bounds, prices: Mapping[str, float | None]) -> PolicyResult:
    """What one replay measured; ``prices`` is USD an hour by group name (None: unknown)."""
    world = run.world
    counters = world.counters
    node_hours = sum(counters.node_seconds.values()) / 3600
    ran = {g: s for g, s in sorted(counters.group_seconds.items()) if s}
    unpriced = {g: world.groups[g].spec.instance_type for g in ran if prices.get(g) is None}
    cost = None if unpriced else sum((s / 3600 * (prices.get(g) or 0.0) for g, s in ran.items()), 0.0)
    waits = job_waits(run)
    plain = [(wait, 1) for wait, _ in waits.values()]
    weighted = list(waits.values())
    hours = run.end / 3600
    actions = {
        "scale_up_calls": counters.scale_up_calls,
        "failed_launch_calls": counters.failed_launch_calls,
        "nodes_launched": counters.nodes_launched,
        "nodes_terminated": counters.nodes_terminated,
        "cordons": counters.cordons,
        "uncordons": counters.uncordons,
        "soft_taints": counters.soft_taints,
        "drains_cancelled": counters.drains_cancelled,
        "drains_reclaimed": counters.drains_reclaimed,
    }
    acted = (
        counters.scale_up_calls
        + counters.failed_launch_calls
        + counters.nodes_terminated
        + counters.uncordons
    )
    return PolicyResult(
        policy=run.policy,
        node_hours=node_hours,
        node_hours_by_group={g: counters.group_seconds.get(g, 0) / 3600 for g in world.groups},
        cost_usd=cost,
        ratio_to_step_bound=node_hours / bounds.step_node_hours if bounds.step_node_hours else None,
        pending_seconds={f"p{p}": percentile(plain, p / 100) for p in (50, 90, 99)},
        pending_weighted_seconds={f"p{p}": percentile(weighted, p / 100) for p in (50, 90, 99)},
        max_pending_seconds=float(max((w for w, _ in waits.values()), default=0)),
        utilisation=counters.used_seconds / counters.capacity_seconds if counters.capacity_seconds else None,
        actions=actions,
        actions_per_hour=acted / hours if hours else 0.0,
        pods_killed=counters.pods_killed,
        jobs_killed=counters.jobs_killed,
        jobs_started=len(world.waits),
        jobs_unstarted=run.unstarted,
        decisions=run.decisions,
        hours=hours,
        wall_seconds=run.wall_seconds,
        tenants=measure_tenants(run, waits),
        ratio_to_cost_bound=cost / bounds.step_cost_usd
        if cost is not None and bounds.step_cost_usd
        else None,
        moves=counters.moves,
        moves_per_job=counters.moves / len(world.jobs) if world.jobs else 0.0,
        jobs_moved=sum(1 for j in world.jobs if j.moves),
        unmovable_killed=counters.unmovable_killed,
        interruptions=counters.interruptions,
        interruption_restarts=counters.interruption_restarts,
        jobs_interrupted=sum(1 for j in world.jobs if j.interruptions),
        gpu_hours_lost=counters.lost_gpu_seconds / 3600,
        never_joined=counters.never_joined,
        unregistered_removed=counters.unregistered_removed,
        jobs_not_restarted=run.not_restarted,
        censored_at=run.horizon,
        unpriced_groups=unpriced,
    )


def job_waits(run: Replay) -> dict[int, tuple[int, int]]:
    """Seconds each job some group can run spent pending, by job id, with its weight (its GPUs, at least
    1): every wait up to its last start, and for a job still waiting when the replay ended (it never
    started, or was requeued and never started again) the wait until the horizon, the same instant for
    every policy, censored there: a job a policy starves weighs in the percentiles instead of dropping
    out of them, and weighs alike whichever policy starved it."""
    world = run.world
    waits = dict(world.waits)
    for sim_job in world.jobs:
        if sim_job.runnable and sim_job.state == "pending":
            wait = sim_job.waited + max(0, run.horizon - sim_job.queued)
            waits[sim_job.job.id] = (wait, max(1, sim_job.job.gpus))
    return waits


def measure_tenants(run: Replay, waits: Mapping[int, tuple[int, int]]) -> dict[str, TenantResult]:
    """Per tenant (namespace): node-hours charged, pods held by limits, GPU-weighted waiting
    (``waits``: :func:`job_waits`)."""
    world = run.world
    counters = world.counters
    jobs: dict[str, list[int]] = {}
    for sim_job in world.jobs:
        jobs.setdefault(sim_job.job.namespace, []).append(sim_job.job.id)
    out: dict[str, TenantResult] = {}
    for tenant in sorted(set(jobs) | set(counters.held)):
        ids = jobs.get(tenant, [])
        samples = [waits[i] for i in ids if i in waits]
        held = counters.held.get(tenant, {})
        pods = set().union(*held.values()) if held else set()
        out[tenant] = TenantResult(
            tenant=tenant,
            jobs=len(ids),
            jobs_started=sum(1 for i in ids if i in world.waits),
            node_hours=counters.tenant_seconds.get(tenant, 0) / 3600 if run.charges_tenants else None,
            pods_held=len(pods),
            pods_held_by_code={code: len(p) for code, p in sorted(held.items())},
            pending_weighted_seconds={f"p{p}": percentile(samples, p / 100) for p in (50, 90, 99)},
        )
    return out


def format_tenants(result: PolicyResult) -> str:
    """The per-tenant table of one policy's run."""
    head = [
        "tenant",
        "jobs",
        "started",
        "node-hours charged",
        "share",
        "pods held",
        "GPU-weighted p50/p90 min",
    ]
    total = sum(t.node_hours or 0.0 for t in result.tenants.values())
    rows = [head]
    for t in result.tenants.values():
        rows.append(
            [
                t.tenant,
                f"{t.jobs:,}",
                f"{t.jobs_started:,}",
                "-" if t.node_hours is None else f"{t.node_hours:,.1f}",
                "-" if t.node_hours is None or not total else f"{100 * t.node_hours / total:.1f}%",
                f"{t.pods_held:,}",
                "/".join(_minutes(t.pending_weighted_seconds[k]) for k in ("p50", "p90")),
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = [f"per tenant, {result.policy}:"]
    for n, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [cell.rjust(widths[i]) for i, cell in enumerate(row) if i]
        lines.append("  ".join(cells))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f}"


def format_table(
    results: Sequence[PolicyResult],
    bounds: Bounds,
    *,
    timing: bool = True,
    packers: Sequence[PackerResult] = (),
) -> str:
    head = [
        "policy",
        "node-hours",
        "x bound",
        "cost $",
        "x cost bound",
        "pending min p50/p90/p99",
        "GPU-weighted p50/p90/p99",
        "util",
        "actions/h",
        "killed",
        "moves/job",
        "GPU-h lost",
        "decisions",
    ]
    if timing:
        head.append("wall s")
    rows = [head]
    for r in results:
        row = [
            r.policy,
            f"{r.node_hours:,.1f}",
            "-" if r.ratio_to_step_bound is None else f"{r.ratio_to_step_bound:.3f}",
            "-" if r.cost_usd is None else f"{r.cost_usd:,.0f}",
            "-" if r.ratio_to_cost_bound is None else f"{r.ratio_to_cost_bound:.3f}",
            "/".join(_minutes(r.pending_seconds[k]) for k in ("p50", "p90", "p99")),
            "/".join(_minutes(r.pending_weighted_seconds[k]) for k in ("p50", "p90", "p99")),
            "-" if r.utilisation is None else f"{100 * r.utilisation:.1f}%",
            f"{r.actions_per_hour:.2f}",
            str(r.pods_killed),
            f"{r.moves_per_job:.3f}",
            f"{r.gpu_hours_lost:,.1f}",
            f"{r.decisions:,}",
        ]
        if timing:
            row.append(f"{r.wall_seconds:.1f}")
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = []
    for n, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [cell.rjust(widths[i]) for i, cell in enumerate(row) if i]
        lines.append("  ".join(cells))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("")
    usd = "" if bounds.step_cost_usd is None else f", ${bounds.step_cost_usd:,.0f}"
    binding = ", ".join(f"{k} {v:,.1f} h" for k, v in (bounds.binding_hours or {}).items() if v)
    lines.append(
        f"step lower bound {bounds.step_node_hours:,.1f} node-hours{usd}; fluid {bounds.fluid_node_hours:,.1f}; "
        f"peak {bounds.peak_nodes} nodes; over {bounds.end / 3600:,.1f} h (binding: {binding or bounds.resource})"
    )
    if bounds.cost_note():
        lines.append(bounds.cost_note())
    for p in packers:
        ratio = f"{p.node_hours / bounds.step_node_hours:.3f} x bound" if bounds.step_node_hours else "-"
        cost = "" if p.cost_usd is None else f", ${p.cost_usd:,.0f}"
        if p.cost_usd is not None and bounds.step_cost_usd:
            cost += f" ({p.cost_usd / bounds.step_cost_usd:.3f} x cost bound)"
        lines.append(
            f"ideal {p.packer} (no boot, no moves): {p.node_hours:,.1f} node-hours ({ratio}){cost}; "
            f"peak {p.peak_nodes} nodes"
        )
    for r in results:
        if r.unpriced_groups:
            named = ", ".join(f"{g} ({t})" for g, t in r.unpriced_groups.items())
            lines.append(f"{r.policy}: cost unknown: no price for group {named} (--price TYPE=USD)")
        if r.unmovable_killed:
            lines.append(
                f"{r.policy}: {r.unmovable_killed} unmovable pod(s) killed by drains or terminations"
            )
    for r in results:
        if r.jobs_unstarted or r.jobs_not_restarted:
            lines.append(
                f"{r.policy}: {r.jobs_unstarted} job(s) never started and {r.jobs_not_restarted} sent back "
                f"never started again, counted as waiting until the horizon ({r.censored_at / 3600:,.1f} h, "
                "the same for every policy)"
            )
    return "\n".join(lines)


def round_floats(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: round_floats(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [round_floats(v) for v in value]
    return value
