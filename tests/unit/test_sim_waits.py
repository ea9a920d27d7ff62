"""GPU-weighted pending added, worked out by hand: a moved job's second wait adds to its first, and a job
still waiting when the replay ends counts its wait until then, weighted by its GPUs."""

from __future__ import annotations

import pytest
from sim_world import gpu_world

from spillway.sim.engine import Replay
from spillway.sim.report import job_waits, percentile
from spillway.sim.trace import Job
from spillway.sim.world import SimJob, World

GIB = 2**30 * 1000


def _pod(gpus: int) -> dict[str, int]:
    return {"cpu": 7900 * gpus, "memory": 56 * GIB * gpus, "nvidia.com/gpu": 1000 * gpus, "pods": 1000}


def _arrive(world: World, ident: int, gpus: tuple[int, ...], movable: bool = False) -> SimJob:
    job = SimJob(
        Job(ident, f"j{ident}", "ml", world.t, 36000, 0, tuple(_pod(g) for g in gpus), movable=movable)
    )
    world.jobs.append(job)
    world.arrive(job)
    world.schedule()
    return job


def test_waits_add_a_moved_job_s_second_wait_and_censor_a_job_still_waiting() -> None:
    # One 8-GPU node. t=0: A (4 GPUs, movable) arrives and starts: waits 0. t=600: its node is drained
    # (A back in the queue, no node left). t=700: B (2 GPUs) arrives, nothing to run on. t=900: a node
    # joins; A starts again (waited 0 + 300) and B (waited 200). t=1000: D, a gang of two 8-GPU pods,
    # arrives; the node has 2 GPUs free: it waits, until the replay ends at 1500 (500 s, censored).
    world = gpu_world(1, restart_penalty=0)
    a = _arrive(world, 1, (4,), movable=True)
    world.t = 600
    world.drain(next(iter(world.nodes)))
    world.t = 700
    b = _arrive(world, 2, (2,))
    world.t = 900
    world.preprovision("gpu", 1)
    world.schedule()
    assert (a.state, b.state) == ("running", "running")
    world.t = 1000
    d = _arrive(world, 3, (8, 8))
    assert d.state == "pending"
    run = Replay("x", world, end=1500, decisions=0, wall_seconds=0.0, unstarted=1, horizon=1500)
    waits = job_waits(run)
    assert waits == {1: (300, 4), 2: (200, 2), 3: (500, 16)}
    # GPU-weighted, nearest rank over 22 GPUs: 200 s holds 2, 300 s 6, 500 s 22.
    weighted = list(waits.values())
    assert percentile(weighted, 0.09) == 200  # 1.98 of 22: within the first 2
    assert percentile(weighted, 0.10) == 300  # 2.2: past them
    assert percentile(weighted, 0.50) == 500
    plain = [(w, 1) for w, _ in waits.values()]
    assert percentile(plain, 0.5) == 300 and percentile(plain, 0.34) == 300 and percentile(plain, 0.33) == 200
    assert world.counters.moves == 1 and world.counters.lost_gpu_seconds == 0


@pytest.mark.parametrize(("share", "value"), [(0.0, 0.0), (0.5, 120.0), (1.0, 120.0)])
def test_nearest_rank_percentile_weighs_each_sample(share: float, value: float) -> None:
    # one 1-GPU job waiting 0 s, one 9-GPU job waiting 120 s: 9 of the 10 GPU-weights waited 120 s
    assert percentile([(0, 1), (120, 9)], share) == value
