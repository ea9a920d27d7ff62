"""Drains that take time in the simulator (``--drain-seconds``): the drained node is cordoned, billed and
counted until its instance is terminated S seconds after the drain; its evicted pods are back in the queue
at once; 0 is the instant drain of before.

Node type p3.16xlarge (8 GPUs); a GPU row gets 7.9 CPU and 56 GiB a GPU.
"""

from __future__ import annotations

import heapq
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sim_world import GPU, gpu_world

from spillway.errors import InputError
from spillway.sim.run import Report, SimConfig, simulate
from spillway.sim.trace import Job, read_trace
from spillway.sim.world import TERMINATE, GroupSpec, SchedulerConfig, SimError, SimJob, SimNode, World

HEADER = "submit_time,duration,cpu,memory_gib,gpus,count,namespace,priority\n"
GIB = 2**30 * 1000


def _world(drain_seconds: int, nodes: int = 1, penalty: int = 0) -> World:
    return gpu_world(nodes, restart_penalty=penalty, drain_seconds=drain_seconds)


def _submit(world: World, ident: int, movable: bool = True, gpus: int = 4) -> SimJob:
    request = {"cpu": 7900 * gpus, "memory": 56 * GIB * gpus, "nvidia.com/gpu": 1000 * gpus, "pods": 1000}
    sim_job = SimJob(Job(ident, f"job-{ident}", "ml", world.t, 3600, 0, (request,), movable=movable))
    world.jobs.append(sim_job)
    world.arrive(sim_job)
    world.schedule()
    return sim_job


def _run_due_terminations(world: World, until: int) -> None:
    """What the engine does with the drain's event when its time comes."""
    while world.events and world.events[0][0] <= until:
        t, kind, _, payload = heapq.heappop(world.events)
        if kind == TERMINATE:
            world.t = t
            world.terminated(payload)
    world.t = until


def _drained_at_600(world: World) -> tuple[SimJob, SimNode]:
    """A movable 4-GPU job placed at 0, its node cordoned and drained by Spillway at 600."""
    job = _submit(world, 1)
    node = job.nodes[0]
    world.t = 600
    world.cordon(node.name, "spillway")
    world.drain(node.name)
    return job, node


def test_a_drained_node_bills_s_more_seconds_and_takes_no_new_pod_meanwhile() -> None:
    # One node, a movable 4-GPU job on it from 0. Drained at 600 with 60 s of drain time: the job is
    # back in the queue at once (moved, penalty 0), but the node is cordoned, so neither it nor a job
    # arriving at 630 is placed there; the node stays in its group, desired capacity 1, until 660, when
    # its instance is terminated: billed 660 s, not 600.
    world = _world(drain_seconds=60)
    job, node = _drained_at_600(world)
    assert job.state == "pending" and world.counters.moves == 1
    world.schedule()
    assert job.state == "pending"  # not back on the node being drained
    world.t = 630
    late = _submit(world, 2)
    assert late.state == "pending" and not node.pods
    assert node.name in world.nodes and node.cordoned
    assert world.groups["gpu"].desired == 1 and world.alive == 1
    assert world.counters.nodes_terminated == 0
    _run_due_terminations(world, 659)
    assert node.name in world.nodes  # still there one second before
    _run_due_terminations(world, 660)
    assert node.name not in world.nodes and world.groups["gpu"].desired == 0
    assert world.counters.nodes_terminated == 1
    assert world.counters.node_seconds == {"p3.16xlarge": 660}
    assert world.series[-1] == (660, 0)


def test_with_no_drain_time_the_node_goes_at_the_drain() -> None:
    world = _world(drain_seconds=0)
    _, node = _drained_at_600(world)
    assert node.name not in world.nodes and world.groups["gpu"].desired == 0
    assert world.counters.node_seconds == {"p3.16xlarge": 600}
    assert not any(kind == TERMINATE for _, kind, _, _ in world.events)


def test_an_uncordon_during_the_drain_stops_it_and_the_node_stays() -> None:
    # As DrainNode's steps stop once the node is no longer cordoned by Spillway (the planner reclaimed
    # it for pending pods): the node stays, schedulable, and its termination never comes.
    world = _world(drain_seconds=60)
    node = next(iter(world.nodes.values()))
    world.t = 600
    world.cordon(node.name, "spillway")
    world.terminate(node.name)
    world.t = 620
    world.uncordon(node.name)
    assert world.counters.drains_reclaimed == 1
    waiting = _submit(world, 1)
    assert waiting.state == "running" and waiting.nodes[0] is node
    _run_due_terminations(world, 700)
    assert node.name in world.nodes and world.groups["gpu"].desired == 1
    assert world.counters.nodes_terminated == 0


def test_a_node_being_drained_counts_against_min_size_and_is_not_drained_twice() -> None:
    world = World(
        (GroupSpec("gpu", "us-east-1", "p3.16xlarge", 1, 10),),
        epoch=datetime(2026, 1, 1, tzinfo=UTC),
        boot_seconds=120,
        scheduler=SchedulerConfig("most-allocated"),
        drain_seconds=60,
    )
    world.preprovision("gpu", 2)
    first, second = list(world.nodes)
    world.terminate(first)
    assert world.leaving("gpu") == 1
    with pytest.raises(SimError, match="being drained already"):
        world.terminate(first)
    with pytest.raises(SimError, match="below MinSize"):
        world.terminate(second)  # the desired capacity is still 2, but one of the two is going


def test_a_negative_drain_time_is_refused() -> None:
    with pytest.raises(SimError, match="drain time"):
        _world(drain_seconds=-1)
    import argparse

    from spillway.sim.command import add_arguments, check_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["t.csv", "--drain-seconds", "-5"])
    with pytest.raises(InputError) as caught:
        check_arguments(args)
    assert caught.value.field == "--drain-seconds"


def _replay(tmp_path: Path, rows: list[str], **overrides: object) -> Report:
    path = tmp_path / "trace.csv"
    path.write_text(HEADER + "".join(r + "\n" for r in rows))
    settings: dict[str, object] = {"groups": (GPU,), "policies": ("spillway",)}
    settings.update(overrides)
    return simulate(SimConfig(**settings), read_trace(path))  # type: ignore[arg-type]


@pytest.mark.parametrize("policy", ["spillway", "cluster-autoscaler"])
@pytest.mark.parametrize("drain_seconds", [0, 60, 300])
def test_every_policy_s_idle_node_is_billed_its_drain_time(
    tmp_path: Path, policy: str, drain_seconds: int
) -> None:
    # A one-hour job and a two-hour job on two nodes. The first node is idle from 3720 and drained 10
    # minutes later, at 4320 (both policies), then terminated drain_seconds later; the replay ends at
    # 7320, when the second job completes. 0: as before the option.
    report = _replay(
        tmp_path, ["0,3600,,,8,1,ml,0", "0,7200,,,8,1,ml,0"], policies=(policy,), drain_seconds=drain_seconds
    )
    world = report.runs[0].world
    assert world.series == [(0, 2), (4320 + drain_seconds, 1)]
    assert world.counters.nodes_terminated == 1
    assert report.results[0].node_hours == pytest.approx((4320 + drain_seconds + 7320) / 3600)
    assert report.results[0].pods_killed == 0
    assert report.to_dict()["config"]["drain_seconds"] == drain_seconds


def test_drain_time_keeps_the_replay_deterministic(tmp_path: Path) -> None:
    rows = [
        f"{(i * 97) % 7200},{300 + (i * 53) % 5400},,,{(1, 1, 2, 1, 4, 1, 8)[i % 7]},1,ns{i % 3},0"
        for i in range(80)
    ]
    settings = {
        "seed": 3,
        "policies": ("spillway", "cluster-autoscaler", "ec2-autoscaler"),
        "drain_seconds": 90,
    }
    first = _replay(tmp_path, rows, **settings)
    second = _replay(tmp_path, rows, **settings)
    assert first.to_dict() == second.to_dict()
    assert [r.world.series for r in first.runs] == [r.world.series for r in second.runs]
    instant = _replay(tmp_path, rows, **{**settings, "drain_seconds": 0})
    assert [r.node_hours for r in instant.results] != [r.node_hours for r in first.results]
