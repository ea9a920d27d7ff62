"""Elastic jobs a consolidation shrank stay shrunk for the horizon the saving was counted on.

A consolidation may drain a node whose elastic workers fit nowhere else: their job runs with fewer
workers, never below its minimum (:mod:`spillway.planner.consolidation`). The job's operator keeps its
replica count, so it creates each evicted worker again, and the new pod is pending. Planned as any
pending pod it would get a node of its own in the next plan, and the drain would have saved nothing: a
node paid for again, the workers restarted twice.

So each drain that shrinks a job is remembered (``State.shrunk``: the job, how many workers it gave
up, since when). Only the workers the plan did not re-place count: one it placed on another node
moved, and its recreated pod is planned as any pending pod. For ``consolidation_horizon_minutes`` (the
time the drain's saving was counted on) that many of the job's pending workers take free room only
(code ``elastic-shrunk``): they run as soon as the cluster has room for them, and never launch a node.
A job below its minimum (a worker failed, a node was lost) launches for what it lacks, as always. After
the horizon, or once the job has no pod left, the record goes.

Pure: the pending pods and the jobs from the context, ``now`` from the caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from spillway.model.state import ShrinkState
from spillway.planner import codes
from spillway.planner.context import Context, aware, minutes
from spillway.planner.disruption import elastic_member, elastic_of
from spillway.planner.health import out_of_service


def hold_shrunk(ctx: Context) -> dict[str, ShrinkState]:
    """Mark the pending workers of recently shrunk jobs as free room only (``ctx.free_only``, with
    why); the records that still hold, for the next state."""
    if not ctx.state.shrunk:
        return {}
    horizon = timedelta(minutes=ctx.config.consolidation_horizon_minutes)
    running, waiting, minimum = _workers(ctx)
    pending = {p.key for p in ctx.pending}
    kept: dict[str, ShrinkState] = {}
    for job, shrink in sorted(ctx.state.shrunk.items()):
        age = ctx.now - aware(shrink.since)
        if age >= horizon or job not in minimum:
            continue  # the horizon passed, or the job has no pod left
        kept[job] = shrink
        lacking = max(0, minimum[job] - running.get(job, 0))  # below its minimum: launched for
        held = sorted(k for k in waiting.get(job, []) if k in pending)[lacking:][: shrink.workers]
        why = (
            f"elastic job {job} gave up {shrink.workers} worker(s) to a consolidation "
            f"{minutes(age)} ago; until {minutes(horizon - age)} from now its recreated workers take free "
            "room only, and launch no node (consolidation_horizon_minutes)"
        )
        ctx.free_only.update(dict.fromkeys(held, (codes.ELASTIC_SHRUNK, why)))
    return kept


def _workers(ctx: Context) -> tuple[dict[str, int], dict[str, list[str]], dict[str, int]]:
    """For each shrunk job with a pod left: its running workers, its pending workers a shrink may have
    given up (never the rendezvous host), and its minimum. A worker is running when bound, not
    terminating (leaving) and on a node in service: one on a node NotReady past registering, or being
    deleted, runs nowhere (:func:`~spillway.planner.health.out_of_service`), and one on a node going
    away (its instance terminating or stopping in its warm pool) runs there not much longer."""
    jobs = ctx.snapshot.jobs_by_key()
    running: dict[str, int] = {}
    waiting: dict[str, list[str]] = {}
    minimum: dict[str, int] = {}
    for pod in ctx.snapshot.pods:
        ref = elastic_member(pod, jobs) if not pod.terminal else None
        if ref is None or ref.job not in ctx.state.shrunk:
            continue
        minimum[ref.job] = ref.min
        if pod.node_name is None:
            if elastic_of(pod, jobs) is not None:
                waiting.setdefault(ref.job, []).append(pod.key)
        elif not pod.terminating and _in_service(ctx, pod.node_name):
            running[ref.job] = running.get(ref.job, 0) + 1
    return running, waiting, minimum


def _in_service(ctx: Context, name: str) -> bool:
    """The node runs its pods and keeps them: not out of service, not going away without a drain
    (:attr:`~spillway.planner.context.WorkNode.going_away`: its instance terminating or stopping in its
    warm pool while its Node is Ready yet)."""
    node = ctx.nodes.get(name)
    return node is None or not (node.going_away or out_of_service(node.info, ctx.config, ctx.now))


def shrunk_after(held: Mapping[str, ShrinkState], ctx: Context) -> dict[str, ShrinkState]:
    """The next state's records: those that still hold, and this plan's drains' (a job shrunk again
    adds up, from now)."""
    out = dict(held)
    for job, workers in ctx.shrunk_out.items():
        before = out.get(job)
        out[job] = ShrinkState(workers=workers + (before.workers if before else 0), since=ctx.now)
    return dict(sorted(out.items()))
