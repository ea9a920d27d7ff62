"""The event loop: simulated time jumps from one thing happening to the next.

Things that happen: a job arrives, a job completes, an instance finishes booting, a Spot instance is
taken back, a drained node's instance is terminated (``World.drain_seconds`` after its drain started),
an autoscaler tick.
All events at one instant are handled together, in this order: completions and boots (capacity frees
up), then Spot interruptions, GPUs registering and drained nodes' terminations, in that order, arrivals,
one scheduling pass, then the tick if one falls there.

Ticks are ``interval`` seconds apart, but a policy only decides at a tick where something it looks
at changed since its last decision (``World.dirty``: a pod became pending or started, a node became idle
or busy, a node joined or left, a launch failed; and, while pods are pending or the policy consolidates
busy nodes, any change of free room),
where its last decision acted, or where one of its own timers runs out (``Policy.wakeup``: an idle
timer, a backoff, a cooldown; for Spillway also the next edge of a time window in its config, as a
buffer opening changes its plan though nothing in the world does). At any other tick it would see the same inputs and decide the same, so
the loop skips it and per-tick work follows what changed. Between events nothing is computed at all.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from spillway.sim.policies import Policy
from spillway.sim.trace import Job
from spillway.sim.world import BOOT, COMPLETE, INTERRUPT, PLUGIN, TERMINATE, SimJob, World, runnable

# A replay stops this long after the last submit plus the longest duration, whatever is left.
HORIZON_SLACK = 30 * 24 * 3600


def horizon(jobs: Sequence[Job]) -> int:
    """Where every replay of ``jobs`` stops at the latest: the last job's end when every job starts at
    its submit, plus :data:`HORIZON_SLACK`. It depends on the trace alone, so it is the same for every
    policy: a job still waiting when a replay stops is counted as waiting until then (report.job_waits)."""
    return max((j.submit + j.duration for j in jobs), default=0) + HORIZON_SLACK


@dataclass(frozen=True, slots=True)
class Replay:
    policy: str
    world: World
    end: int  # when the last job completed, or the horizon when some job was left waiting
    decisions: int
    wall_seconds: float
    unstarted: int  # jobs some group could run that never started at all
    horizon: int  # the trace's horizon (:func:`horizon`), the same for every policy
    not_restarted: int = 0  # jobs that started, were sent back to the queue and never started again
    charges_tenants: bool = False  # the policy said which tenant opened each node


def _ceil_tick(t: int, interval: int) -> int:
    return -(-t // interval) * interval


def replay(
    jobs: Sequence[Job],
    policy: Policy,
    world: World,
    interval: int,
    progress: Callable[[int], None] | None = None,
) -> Replay:
    """Run ``jobs`` through ``world`` under ``policy``; ``progress(t)`` is called now and then."""
    started_wall = time.perf_counter()
    sim_jobs = [SimJob(j) for j in sorted(jobs, key=lambda j: (j.submit, j.id))]
    world.jobs = sim_jobs
    allocatables = [g.alloc for g in world.groups.values() if g.spec.max_size > 0]  # MaxSize 0: no node ever
    for sim_job in sim_jobs:
        sim_job.runnable = runnable(sim_job.job, allocatables)
    count = len(sim_jobs)
    total = sum(1 for j in sim_jobs if j.runnable)  # the replay ends when these are done
    last = horizon(jobs)
    events = world.events
    world.t = 0
    policy.start(world)
    world.dirty = False
    next_arrival = 0
    next_tick: int | None = None
    decisions = 0
    handled = 0
    while world.done < total:
        candidates = []
        if next_arrival < count:
            candidates.append(sim_jobs[next_arrival].job.submit)
        if events:
            candidates.append(events[0][0])
        if next_tick is not None:
            candidates.append(next_tick)
        if not candidates:
            break  # nothing left can happen: the rest never starts
        t = min(candidates)
        if t > last:
            break
        world.t = t
        while events and events[0][0] == t:
            _, kind, _, payload = heapq.heappop(events)
            if kind == COMPLETE:
                sim_job, generation = payload
                world.complete(sim_job, generation)
            elif kind == BOOT:
                world.boot(payload)
            elif kind == INTERRUPT:
                world.interrupt(payload)
            elif kind == PLUGIN:
                world.plugin(payload)
            elif kind == TERMINATE:
                world.terminated(payload)
            handled += 1
        while next_arrival < count and sim_jobs[next_arrival].job.submit == t:
            world.arrive(sim_jobs[next_arrival])
            next_arrival += 1
            handled += 1
        world.schedule()
        if world.done == total:
            break
        if world.dirty and policy.reactive:
            due = _ceil_tick(t, interval)
            next_tick = due if next_tick is None else min(next_tick, due)
        if next_tick == t:
            world.dirty = False
            policy.decide(world)
            decisions += 1
            world.schedule()
            next_tick = t + interval if world.dirty else None
            wake = policy.wakeup(world)
            if wake is not None and wake > t:
                due = _ceil_tick(wake, interval)
                next_tick = due if next_tick is None else min(next_tick, due)
        if progress is not None and handled >= 2000:
            handled = 0
            progress(t)
    if world.done < total:
        # jobs left waiting: nothing more happens before the horizon (no event was due by then), so the
        # nodes still up stay up until it; the books close there, as the waits are cut there, the same
        # instant for every policy (closed at this replay's own last event, a node kept for a starved
        # job cost less under the policy whose last event fell earlier)
        world.t = last
    world.finish()
    waiting = [j for j in sim_jobs if j.runnable and j.state in ("waiting", "pending")]
    unstarted = sum(1 for j in waiting if j.job.id not in world.waits)  # waits: every job that started
    return Replay(
        policy=policy.name,
        world=world,
        end=world.t,
        decisions=decisions,
        wall_seconds=time.perf_counter() - started_wall,
        unstarted=unstarted,
        horizon=last,
        not_restarted=len(waiting) - unstarted,
        charges_tenants=policy.charges_tenants,
    )
