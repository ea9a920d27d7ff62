"""The simulator's bound over mixed fleets, its ideal packers, movable jobs, drains that evict, Spot.

Hand-computed on tiny traces. Node types (allocatable as an EKS node's, spillway.model.reserve):
p3.16xlarge (8 GPUs, 63.77 CPU, 448.5 GiB, $24.48/h) and m5.xlarge (3.92 CPU, 13.8 GiB, no GPU,
$0.192/h). A GPU row gets 7.9 CPU and 56 GiB a GPU.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sim_world import GPU, gpu_world

from spillway.config import PlannerConfig
from spillway.errors import InputError
from spillway.planner import ScalingPlan, codes
from spillway.planner.types import Drain
from spillway.sim import policies
from spillway.sim.bounds import lower_bounds
from spillway.sim.command import check_arguments, parse_groups
from spillway.sim.packers import pack
from spillway.sim.run import SimConfig, fleet, mark_jobs, simulate
from spillway.sim.trace import Job, build_jobs, read_trace
from spillway.sim.world import GroupSpec, Outage, SchedulerConfig, SimJob, World

HEADER = "submit_time,duration,cpu,memory_gib,gpus,count,namespace,priority\n"
CPU = GroupSpec("cpu", "us-east-1", "m5.xlarge", 0, 10)
GIB = 2**30 * 1000


def trace(tmp_path: Path, rows: list[str]) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(HEADER + "".join(r + "\n" for r in rows))
    return path


def jobs_of(tmp_path: Path, rows: list[str], config: SimConfig) -> list[Job]:
    types = fleet(config)
    gpu_type = next(t for t in types if t.name == "p3.16xlarge")
    return build_jobs(read_trace(trace(tmp_path, rows)), gpu_type.allocatable)


# -- the bound over every group, per resource, in node-hours and USD --

MIXED_ROWS = ["0,3600,1,4,0,2,web,0", "0,3600,,,4,1,ml,0"]  # two 1-CPU 4-GiB pods; one 4-GPU pod


def test_the_bound_of_a_mixed_fleet_counts_gpus_on_gpu_nodes(tmp_path: Path) -> None:
    # CPU group listed first. Over [0, 3600): 4 GPUs -> 1 p3 node (the only GPU type); CPU 31.6 + 2 =
    # 33.6 < 63.77 and memory 224 + 8 GiB fit one p3 too: 1 node-hour. Cost: the GPUs alone need a p3,
    # $24.48; CPU and memory are offered by two types, so their fluid cost (at m5's cheaper rate) is
    # the bound there: 33.6 CPU * 0.192 / 3.92 = $1.65 < $24.48.
    config = SimConfig(groups=(CPU, GPU))
    jobs = jobs_of(tmp_path, MIXED_ROWS, config)
    bounds = lower_bounds(jobs, fleet(config))
    assert bounds.step_node_hours == pytest.approx(1.0)
    assert bounds.step_cost_usd == pytest.approx(24.48)
    assert bounds.resource == "nvidia.com/gpu"
    assert bounds.binding_hours == {"nvidia.com/gpu": 1.0, "cpu": 0.0, "memory": 0.0}
    # The old bound, on the first group's node type alone, left the GPUs out and counted the GPU
    # pod's 31.6 CPU and 224 GiB against m5.xlarge nodes of 13.8 GiB: 17 nodes by memory.
    old = lower_bounds(jobs, fleet(config)[0].allocatable)
    assert old.step_node_hours == pytest.approx(17.0)


def test_the_bound_of_one_node_type_is_the_single_type_bound(tmp_path: Path) -> None:
    # Two groups of one type (two regions) give the bound one group gives: 13 GPUs -> 2 nodes.
    rows = ["0,3600,,,8,1,ml,0", "0,3600,,,5,1,ml,0"]
    two = SimConfig(groups=(GPU, GroupSpec("gpu-west", "us-west-2", "p3.16xlarge")))
    jobs = jobs_of(tmp_path, rows, two)
    bounds = lower_bounds(jobs, fleet(two))
    single = lower_bounds(jobs, fleet(two)[0].allocatable)
    assert bounds.step_node_hours == single.step_node_hours == pytest.approx(2.0)
    assert bounds.step_cost_usd == pytest.approx(2 * 24.48)


def test_a_memory_bound_step_names_memory() -> None:
    # m5.xlarge alone: two pods of 1 CPU and 10 GiB: CPU needs 1 node, memory 2.
    req = {"cpu": 1000, "memory": 10 * GIB, "pods": 1000}
    job = Job(1, "j", "a", 0, 3600, 0, (req, req))
    m5 = fleet(SimConfig(groups=(CPU,)))
    bounds = lower_bounds([job], m5)
    assert bounds.step_node_hours == pytest.approx(2.0)
    assert bounds.resource == "memory"
    assert bounds.step_cost_usd == pytest.approx(2 * 0.192)


def test_a_gpu_trace_replays_on_a_mixed_fleet_with_its_cpu_group_listed_first(tmp_path: Path) -> None:
    # The group order is a region preference, not the node type a trace is sized for: a Philly job of
    # 16 GPUs is two pods of 8 (the GPU group's node), each with 8 GPUs' share of a p3's CPU and memory.
    path = tmp_path / "philly.csv"
    path.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-03 00:00:00,1000,16,16000,a\n")
    config = SimConfig(groups=(CPU, GPU), policies=("spillway",), packers=False)
    report = simulate(config, read_trace(path))
    assert (report.unrunnable, report.pods) == (0, 2)
    assert report.results[0].jobs_started == 1
    pods = report.runs[0].world.jobs[0].job.pods
    assert [p["nvidia.com/gpu"] for p in pods] == [8000, 8000]
    assert {(p["cpu"], p["memory"]) for p in pods} == {(8 * 7900, 8 * 56 * GIB)}


def test_each_row_is_sized_on_the_first_node_type_that_holds_its_pods(tmp_path: Path) -> None:
    # A g4dn.xlarge (1 GPU: 3.92 CPU, 14.4 GiB allocatable) listed first: a 1-GPU row takes its share
    # of that node, a row of 4-GPU pods the p3's (the first type holding such a pod); a row that says
    # its CPU and memory keeps them.
    small = GroupSpec("g4", "us-east-1", "g4dn.xlarge", 0, 10)
    config = SimConfig(groups=(CPU, small, GPU))
    rows = ["0,60,,,1,1,ml,0", "0,60,,,4,1,ml,0", "0,60,1,4,0,1,web,0"]
    types = [t.allocatable for t in fleet(config)]
    one, four, web = (job.pods[0] for job in build_jobs(read_trace(trace(tmp_path, rows)), types))
    assert (one["cpu"], one["memory"]) == (3900, 14 * GIB)
    assert (four["cpu"], four["memory"]) == (4 * 7900, 4 * 56 * GIB)
    assert (web["cpu"], web["memory"]) == (1000, 4 * GIB)


# -- ideal packers --


def test_packers_open_the_cheapest_type_that_fits(tmp_path: Path) -> None:
    # The CPU job (first row) opens the cheapest fitting type, an m5.xlarge; the GPU pod needs a p3:
    # 2 node-hours, $24.672, where the bound is 1 node-hour and $24.48.
    config = SimConfig(groups=(GPU, CPU))
    jobs = jobs_of(tmp_path, MIXED_ROWS, config)
    for name in ("first-fit", "best-fit"):
        result = pack(jobs, fleet(config), name)
        assert result.node_hours == pytest.approx(2.0)
        assert result.cost_usd == pytest.approx(24.48 + 0.192)
        assert result.nodes_opened == 2


def test_best_fit_beats_first_fit_where_the_tightest_node_matters(tmp_path: Path) -> None:
    # Every job ends at 3600. t=0: 3 GPUs -> N1 (5 free). t=1: 6 -> N2 (2 free). t=2: 2 GPUs: first
    # fit takes N1 (3 left), best fit N2 (0 left). t=3: 5 GPUs: first fit opens N3, best fit fits N1.
    rows = ["0,3600,,,3,1,a,0", "1,3599,,,6,1,a,0", "2,3598,,,2,1,a,0", "3,3597,,,5,1,a,0"]
    config = SimConfig(groups=(GPU,))
    jobs = jobs_of(tmp_path, rows, config)
    first = pack(jobs, fleet(config), "first-fit")
    best = pack(jobs, fleet(config), "best-fit")
    assert first.node_hours == pytest.approx((3600 + 3599 + 3597) / 3600)
    assert best.node_hours == pytest.approx((3600 + 3599) / 3600)
    assert (first.peak_nodes, best.peak_nodes) == (3, 2)
    # the bound: 3 GPUs on [0,1), then at most 16: 2 nodes
    bounds = lower_bounds(jobs, fleet(config))
    assert bounds.step_node_hours == pytest.approx((1 + 2 * 3599) / 3600)


def test_the_report_carries_the_packers_and_the_cost_bound(tmp_path: Path) -> None:
    report = simulate(
        SimConfig(groups=(GPU,), policies=("spillway",)), read_trace(trace(tmp_path, ["0,3600,,,1,1,ml,0"]))
    )
    data = report.to_dict()
    assert data["lower_bound"]["step_cost_usd"] == pytest.approx(24.48)
    assert data["ideal_packers"]["first-fit"]["node_hours"] == pytest.approx(1.0)
    assert data["ideal_packers"]["best-fit"]["ratio_to_step_bound"] == pytest.approx(1.0)
    result = report.results[0]
    assert result.ratio_to_cost_bound == pytest.approx(3720 / 3600)


# -- movable jobs --


def test_a_seeded_fraction_of_jobs_is_movable_and_their_pods_say_so() -> None:
    req = {"nvidia.com/gpu": 1000, "pods": 1000}
    jobs = [Job(i, f"j{i}", "a", i, 60, 0, (req,)) for i in range(10)]
    marked = mark_jobs(jobs, SimConfig(movable_fraction=0.3, seed=7))
    again = mark_jobs(jobs, SimConfig(movable_fraction=0.3, seed=7))
    assert sum(j.movable for j in marked) == 3
    assert [j.movable for j in marked] == [j.movable for j in again]
    assert [j.movable for j in marked] != [
        j.movable for j in mark_jobs(jobs, SimConfig(movable_fraction=0.3))
    ]
    world = _world(nodes=1, track=True)
    sim_job = SimJob(next(j for j in marked if j.movable))
    world.arrive(sim_job)
    world.schedule()
    pod = next(iter(world.pod_infos.values()))
    assert pod.safe_to_evict is True  # the planner reads safe-to-evict: "true"


def test_duration_noise_is_kept_as_the_known_duration() -> None:
    req = {"nvidia.com/gpu": 1000, "pods": 1000}
    jobs = [Job(i, f"j{i}", "a", 0, 3600, 0, (req,)) for i in range(50)]
    noisy = mark_jobs(jobs, SimConfig(duration_noise=0.5))
    assert all(j.expected is not None and j.expected > 0 for j in noisy)
    assert len({j.expected for j in noisy}) > 10
    assert all(j.duration == 3600 for j in noisy)  # the real durations do not change
    assert all(j.expected is None for j in mark_jobs(jobs, SimConfig()))


# -- drains that evict --


def _world(nodes: int = 2, penalty: int = 0, track: bool = False) -> World:
    return gpu_world(nodes, restart_penalty=penalty, track_infos=track)


def _running(world: World, movable: bool, gpus: int = 4, duration: int = 3600, ident: int = 1) -> SimJob:
    request = {"cpu": 7900 * gpus, "memory": 56 * GIB * gpus, "nvidia.com/gpu": 1000 * gpus, "pods": 1000}
    sim_job = SimJob(Job(ident, f"job-{ident}", "ml", 0, duration, 0, (request,), movable=movable))
    world.jobs.append(sim_job)
    world.arrive(sim_job)
    world.schedule()
    assert sim_job.state == "running"
    return sim_job


def test_a_drain_moves_a_movable_job_which_resumes_with_the_penalty() -> None:
    # Started at 0 for 3600 s; drained at 600 with a 600 s penalty: 3000 s left + 600 = 3600 s more,
    # on the other node from 600: done at 4200. 4 GPUs x 600 s lost = 2400 GPU-seconds.
    world = _world(penalty=600)
    job = _running(world, movable=True)
    first = job.nodes[0]
    world.t = 600
    world.drain(first.name)
    assert job.state == "pending" and job.moves == 1
    world.schedule()
    assert job.state == "running" and job.nodes[0] is not first
    assert (world.counters.moves, world.counters.unmovable_killed, world.counters.pods_killed) == (1, 0, 0)
    assert world.counters.lost_gpu_seconds == 4 * 600
    completion = [e for e in world.events if e[3] == (job, job.generation)]
    assert completion[0][0] == 4200
    assert first.name not in world.nodes and world.groups["gpu"].desired == 1


def _completion(world: World, job: SimJob) -> int:
    return next(e[0] for e in world.events if e[3] == (job, job.generation))


@pytest.mark.parametrize(("movable", "pods"), [(False, None), (True, ("ml/other-0",))])
def test_a_pod_a_drain_kills_kills_its_job_which_starts_over(movable: bool, pods: tuple[str] | None) -> None:
    # Started at 0 for 3600 s on 4 GPUs, drained at 600 with a 60 s penalty. A pod that may not move, or
    # one the plan did not name, dies with its node and its job with it, as on a terminated node: the
    # job starts over on the other node (done at 600 + 3600), counts as killed and not as moved, and
    # the 600 s of progress it had on 4 GPUs are lost (not the penalty).
    world = _world(penalty=60)
    job = _running(world, movable=movable)
    world.t = 600
    world.drain(job.nodes[0].name, pods)
    world.schedule()
    counters = world.counters
    assert job.state == "running"
    assert (counters.pods_killed, counters.jobs_killed, counters.moves, job.moves) == (1, 1, 0, 0)
    assert counters.unmovable_killed == (0 if movable else 1)
    assert _completion(world, job) == 600 + 3600
    assert counters.lost_gpu_seconds == 4 * 600


def test_the_penalty_is_charged_whole_to_a_job_moved_before_it_ran_that_long() -> None:
    # As the report says: moved 60 s after its start with a 600 s penalty, the 3600 s job loses 600 s
    # on 4 GPUs though it had run 60 s, and needs 3540 + 600 s more: it ends at 4200.
    world = _world(penalty=600)
    job = _running(world, movable=True)
    world.t = 60
    world.drain(job.nodes[0].name)
    world.schedule()
    assert world.counters.lost_gpu_seconds == 4 * 600
    assert _completion(world, job) == 60 + 3540 + 600


@pytest.mark.parametrize("movable", [False, True])
def test_terminating_a_busy_node_counts_the_unmovable_pods_it_kills(movable: bool) -> None:
    # Every reference policy removes nodes only by terminating them, and so does Spillway a node it
    # believes empty: an unmovable pod killed that way breaks the same rule as one a drain evicts.
    world = _world()
    job = _running(world, movable=movable)
    world.t = 600
    world.terminate(job.nodes[0].name)
    counters = world.counters
    assert (counters.pods_killed, counters.jobs_killed) == (1, 1)
    assert counters.unmovable_killed == (0 if movable else 1)
    assert counters.lost_gpu_seconds == 4 * 600  # it starts over: its progress is lost


def test_a_make_room_moves_the_named_job_keeps_the_others_and_gives_the_node_back() -> None:
    # Two 4-GPU jobs on one node (most-allocated packs them); the make-room names the first one only.
    world = _world(penalty=600)
    moved = _running(world, movable=True)
    stays = _running(world, movable=True, ident=2)
    node = moved.nodes[0]
    assert stays.nodes[0] is node
    world.t = 600
    world.cordon(node.name, "spillway")  # as the policy does before any drain
    world.drain(node.name, [moved.pod_keys[0]], terminate=False)
    assert moved.state == "running" and moved.nodes[0] is not node  # placed again while node was cordoned
    assert stays.state == "running" and stays.nodes[0] is node  # not named: it stays
    assert node.name in world.nodes and not node.cordoned  # kept, and schedulable again
    assert world.groups["gpu"].desired == 2
    assert (world.counters.moves, world.counters.pods_killed) == (1, 0)


def _plan_draining(node: str) -> ScalingPlan:
    return ScalingPlan(
        drain=(Drain(node=node, instance_id="i-x", group="gpu", region="us-east-1", reason="x"),)
    )


def test_spillway_policy_carries_out_a_drain_of_a_busy_node(monkeypatch: pytest.MonkeyPatch) -> None:
    world = _world(track=True)
    job = _running(world, movable=True)
    node = job.nodes[0].name
    monkeypatch.setattr(policies, "plan", lambda *args: _plan_draining(node))
    policies.SpillwayPolicy(PlannerConfig()).decide(world)
    assert node not in world.nodes
    assert world.counters.moves == 1 and world.counters.unmovable_killed == 0


def test_spillway_policy_draining_an_unmovable_pod_breaks_the_invariant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What the report checks: a drain that evicts a pod not marked movable shows as unmovable killed.
    world = _world(track=True)
    job = _running(world, movable=False)
    node = job.nodes[0].name
    monkeypatch.setattr(policies, "plan", lambda *args: _plan_draining(node))
    policies.SpillwayPolicy(PlannerConfig()).decide(world)
    assert world.counters.unmovable_killed == 1


def test_a_plan_s_drain_of_a_node_that_got_pods_since_the_plan_is_cancelled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One plan makes room on the busy node (moving job 1) and drains the other node, empty when planned.
    # Job 1 is placed again on that node, the only one with room: as DrainNode does with a plan's drain
    # whose node runs work the plan did not plan to move, the drain is cancelled, touching nothing, and
    # job 1 is moved once (one penalty), not twice.
    world = _world(penalty=600, track=True)
    moved = _running(world, movable=True)
    stays = _running(world, movable=True, ident=2)  # most-allocated: on the same node
    busy = moved.nodes[0]
    empty = next(n for n in world.nodes.values() if n is not busy)
    assert stays.nodes[0] is busy and not empty.pods
    plan = ScalingPlan(
        drain=(
            Drain(
                busy.name, busy.instance_id, "gpu", "us-east-1", "x", codes.MAKE_ROOM, (moved.pod_keys[0],)
            ),
            Drain(empty.name, empty.instance_id, "gpu", "us-east-1", "idle"),
        )
    )
    monkeypatch.setattr(policies, "plan", lambda *args: plan)
    policies.SpillwayPolicy(PlannerConfig()).decide(world)
    assert moved.nodes == [empty] and moved.moves == 1
    assert (world.counters.moves, world.counters.pods_killed, world.counters.drains_cancelled) == (1, 0, 1)
    assert world.counters.lost_gpu_seconds == 4 * 600
    assert empty.name in world.nodes and not empty.cordoned  # not touched


def _make_room_on_both_nodes_of_a_gang(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> tuple[SimJob, Any, Any]:
    """A movable gang of two 8-GPU pods placed on nodes A and B; one plan makes room on B (naming pod 1),
    then on A (naming pod 0), and is carried out. Returns the gang and its first two nodes."""
    request = {"cpu": 7900 * 8, "memory": 56 * GIB * 8, "nvidia.com/gpu": 8000, "pods": 1000}
    gang = SimJob(Job(1, "job-1", "ml", 0, 3600, 0, (request, request), movable=True))
    world.jobs.append(gang)
    world.arrive(gang)
    world.schedule()
    a, b = gang.nodes
    plan = ScalingPlan(
        drain=tuple(
            Drain(n.name, n.instance_id, "gpu", "us-east-1", "x", codes.MAKE_ROOM, (key,))
            for n, key in ((b, gang.pod_keys[1]), (a, gang.pod_keys[0]))
        )
    )
    monkeypatch.setattr(policies, "plan", lambda *args: plan)
    policies.SpillwayPolicy(PlannerConfig()).decide(world)
    return gang, a, b


def test_a_make_room_leaves_running_a_pod_placed_since_the_plan_under_a_name_it_gave(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A movable gang of two 8-GPU pods on nodes A and B; a third node is empty. One plan makes room on
    # B (naming pod 1), then on A (naming pod 0). The first restarts the whole gang, placed again on A
    # and the empty node while B is cordoned: the pod 0 now on A is a new pod, not the one the plan
    # named, so the second make room leaves it running (its drain ignores pods it does not plan to
    # move) and the gang is moved once.
    world = _world(nodes=3, penalty=600, track=True)
    gang, a, _ = _make_room_on_both_nodes_of_a_gang(world, monkeypatch)
    assert gang.state == "running" and gang.nodes[0] is a and gang.generation == 1
    assert (world.counters.moves, gang.moves, world.counters.lost_gpu_seconds) == (1, 1, 16 * 600)


def test_a_make_room_whose_node_was_emptied_since_the_plan_keeps_the_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The same gang on the only two nodes; the plan makes room on B, then on A. The first restarts the
    # gang, which cannot be placed while B is cordoned: A is empty when its make room starts, and a
    # make room keeps its node whatever it evicts.
    world = _world(nodes=2, penalty=600, track=True)
    gang, a, b = _make_room_on_both_nodes_of_a_gang(world, monkeypatch)
    assert set(world.nodes) == {a.name, b.name} and world.groups["gpu"].desired == 2
    assert not a.cordoned and not b.cordoned
    world.schedule()
    assert gang.state == "running" and world.counters.moves == 1


def test_the_planner_kills_no_unmovable_pod_with_half_the_jobs_movable(tmp_path: Path) -> None:
    rows = [f"{60 * i},{600 + 300 * (i % 7)},,,{1 + i % 4},1,ml,0" for i in range(40)]
    report = simulate(
        SimConfig(groups=(GPU,), policies=("spillway",), movable_fraction=0.5, restart_penalty=600),
        read_trace(trace(tmp_path, rows)),
    )
    result = report.results[0]
    assert report.movable_jobs == 20
    assert result.unmovable_killed == 0 and result.pods_killed == 0
    assert result.jobs_started == 40


# -- Spot --


def test_spot_instances_are_interrupted_replaced_and_their_jobs_restarted(tmp_path: Path) -> None:
    # Ten interruptions an instance-hour: the 2-hour movable jobs on a Spot group are interrupted many
    # times; each restart loses the 5-minute penalty, the group replaces every instance it lost.
    spot = GroupSpec("spot", "us-east-1", "p3.16xlarge", 0, 10, spot_rate=10.0, price=7.5)
    rows = ["0,7200,,,8,1,ml,0", "0,7200,,,8,1,ml,0"]
    report = simulate(
        SimConfig(
            groups=(spot,), policies=("cluster-autoscaler",), restart_penalty=300, movable_fraction=1.0
        ),
        read_trace(trace(tmp_path, rows)),
    )
    result = report.results[0]
    counters = report.runs[0].world.counters
    assert result.interruptions > 0 and result.interruption_restarts > 0
    assert result.gpu_hours_lost == pytest.approx(result.interruption_restarts * 8 * 300 / 3600)
    # restarts are counted each time, jobs once: two jobs, interrupted again and again
    assert result.interruption_restarts > 2 and result.jobs_interrupted == 2
    out = result.to_dict()
    assert (out["jobs_restarted_by_interruptions"], out["restarts_by_interruptions"]) == (
        2,
        result.interruption_restarts,
    )
    assert result.jobs_started == 2 and result.jobs_unstarted == 0
    assert counters.nodes_launched >= 2 + result.interruptions - 1
    assert (result.moves, result.jobs_moved) == (0, 0)  # interruptions are not moves
    assert result.cost_usd == pytest.approx(result.node_hours * 7.5)


@pytest.mark.parametrize(
    ("movable", "done", "lost"), [(True, 600 + 3000 + 60, 4 * 60), (False, 600 + 3600, 4 * 600)]
)
def test_an_interrupted_job_resumes_only_when_it_may_move(movable: bool, done: int, lost: int) -> None:
    # Started at 0 for 3600 s on 4 GPUs, its node taken back at 600 with a 60 s penalty. A movable job
    # resumes from its checkpoint (3000 s left + 60); a job not marked movable has nothing to resume
    # from and starts over, its 600 s on 4 GPUs lost. Either way EC2 did it: interrupted, not a move
    # and not a policy's kill.
    world = _world(penalty=60)
    job = _running(world, movable=movable)
    first = job.nodes[0]
    world.t = 600
    world.interrupt(first)
    assert job.state == "pending"
    world.schedule()
    assert job.state == "running" and job.nodes[0] is not first
    counters = world.counters
    assert (counters.interruptions, counters.interruption_restarts, job.interruptions) == (1, 1, 1)
    assert (counters.moves, counters.jobs_killed, counters.pods_killed, counters.unmovable_killed) == (
        0,
        0,
        0,
        0,
    )
    assert counters.lost_gpu_seconds == lost
    assert _completion(world, job) == done


def test_a_spot_replacement_in_an_outage_fails_as_a_launch_does() -> None:
    # EC2 takes the node back while its pool has no capacity: Auto Scaling's replacement launch fails
    # with a Failed activity (InsufficientInstanceCapacity) that the planner backs the group off for,
    # as a raise's does; the group gives the slot back. It used to shrink silently, no failure seen.
    world = gpu_world(2, restart_penalty=60, outages=(Outage("gpu", 0, 3600),))
    job = _running(world, movable=True)
    group = world.groups["gpu"]
    world.t = 600
    world.interrupt(job.nodes[0])
    assert (group.desired, len(group.instances)) == (1, 1)
    [failure] = group.failures
    assert "sufficient p3.16xlarge capacity" in failure.message and failure.at == world.at(600)


def test_spot_draws_follow_the_seed(tmp_path: Path) -> None:
    spot = GroupSpec("spot", "us-east-1", "p3.16xlarge", 0, 10, spot_rate=2.0)
    rows = ["0,7200,,,8,1,ml,0"]

    def interruptions(seed: int) -> int:
        config = SimConfig(groups=(spot,), policies=("spillway",), seed=seed)
        return simulate(config, read_trace(trace(tmp_path, rows))).results[0].interruptions

    assert interruptions(3) == interruptions(3)


# -- flags --


def test_group_spot_form_is_parsed() -> None:
    groups = parse_groups(
        [
            "gpu:us-east-1:p3.16xlarge",
            "spot:us-east-1:p3.16xlarge:0:50:spot=0.05/h:price=7.34",
            "s2:us-west-2:spot=1.2/d",
        ],
        None,
        1000,
    )
    assert (groups[0].spot_rate, groups[0].price) == (0.0, None)
    assert (groups[1].spot_rate, groups[1].price, groups[1].max_size) == (0.05, 7.34, 50)
    assert groups[2].spot_rate == pytest.approx(0.05)
    assert groups[2].instance_type == "p3.16xlarge"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("s:us-east-1:p3.16xlarge:spot=often", "spot rate"),
        ("s:us-east-1:p3.16xlarge:spot=-1/h", "spot rate"),
        ("s:us-east-1:p3.16xlarge:price=x", "price"),
        ("s:us-east-1:p3.16xlarge:colour=red", "unknown or repeated option"),
    ],
)
def test_bad_group_options_name_the_group(spec: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as caught:
        parse_groups([spec], None, 1000)
    assert caught.value.field == f"--group {spec}"


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("movable_fraction", 1.5),
        ("movable_fraction", -0.1),
        ("restart_penalty", -1.0),
        ("duration_noise", -1.0),
    ],
)
def test_bad_move_flags_are_refused_before_the_replay(flag: str, value: float) -> None:
    import argparse

    from spillway.sim.command import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["t.csv"])
    setattr(args, flag, value)
    with pytest.raises(InputError) as caught:
        check_arguments(args)
    assert caught.value.field == "--" + flag.replace("_", "-")


def test_variants_and_the_pareto_chart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    from spillway.cli import main

    config = tmp_path / "idle.yaml"
    config.write_text("scale_down_idle_minutes: 1\n")
    chart = tmp_path / "pareto.png"
    path = trace(tmp_path, ["0,3600,,,1,1,ml,0", "4000,600,,,1,1,ml,0"])
    code = main(
        [
            "simulate",
            str(path),
            "--group",
            "gpu:us-east-1:p3.16xlarge",
            "--policies",
            "spillway,cluster-autoscaler",
            "--variant",
            f"idle1={config}",
            "--movable-fraction",
            "0.5",
            "--restart-penalty",
            "10",
            "--pareto",
            str(chart),
            "--json",
            "--no-progress",
        ]
    )
    assert code == 0
    assert chart.read_bytes()[:4] == b"\x89PNG"
    data = json.loads(capsys.readouterr().out)
    assert [p["policy"] for p in data["policies"]] == ["spillway", "cluster-autoscaler", "spillway[idle1]"]
    assert data["config"]["variants"]["idle1"]["scale_down_idle_minutes"] == 1
    assert data["config"]["movable_jobs"] == 1 and data["config"]["restart_penalty_seconds"] == 600


def test_a_spot_group_is_spot_to_the_planner_and_running_pods_have_an_age() -> None:
    world = World(
        (GroupSpec("spot", "us-east-1", "p3.16xlarge", 0, 10, spot_rate=0.05),),
        epoch=datetime(2026, 1, 1, tzinfo=UTC),
        boot_seconds=120,
        scheduler=SchedulerConfig("most-allocated"),
        track_infos=True,
    )
    world.preprovision("spot", 1)
    assert world.node_groups(timedelta(minutes=15))[0].spot
    world.t = 300
    _running(world, movable=True)
    pod = next(iter(world.pod_infos.values()))
    assert pod.started_at == datetime(2026, 1, 1, 0, 5, tzinfo=UTC)


def test_consolidation_moves_a_movable_job_and_kills_nothing(tmp_path: Path) -> None:
    # Two 7-GPU jobs of 10 minutes and two 1-GPU jobs of 5 hours (movable): two nodes, each left with
    # one 1-GPU pod once the big jobs end. With consolidation, one of them moves and a node goes.
    rows = ["0,600,,,7,1,ml,0", "0,18000,,,1,1,ml,0", "0,600,,,7,1,ml,0", "0,18000,,,1,1,ml,0"]
    config = PlannerConfig(consolidation="when-underutilized")
    results = {}
    for fraction in (0.0, 1.0):
        report = simulate(
            SimConfig(
                groups=(GPU,),
                policies=("spillway",),
                planner=config,
                movable_fraction=fraction,
                restart_penalty=600,
                scheduler=SchedulerConfig("most-allocated"),
            ),
            read_trace(trace(tmp_path, rows)),
        )
        results[fraction] = report.results[0]
    assert results[0.0].moves == 0 and results[0.0].unmovable_killed == 0
    moved = results[1.0]
    assert moved.moves >= 1 and moved.unmovable_killed == 0 and moved.pods_killed == 0
    assert moved.node_hours < results[0.0].node_hours
    assert moved.gpu_hours_lost == pytest.approx(moved.moves * 600 / 3600)


def test_an_idle_gap_binds_no_resource() -> None:
    """m5.xlarge alone (3.92 CPU, 13.8 GiB): a job of two 1-CPU 10-GiB pods over [0, 1 h) and another over
    [4 h, 5 h), nothing in between. Memory binds both busy hours (2 nodes, where CPU needs 1); over the
    3 idle hours the bound needs no node and no resource binds. Right: binding hours memory 2.0, CPU 0.0,
    and the resource that bound most is memory. The idle steps were credited to the first resource
    (CPU: 3 h), which then read as the one that bound most."""
    req = {"cpu": 1000, "memory": 10 * GIB, "pods": 1000}
    jobs = [Job(1, "a", "a", 0, 3600, 0, (req, req)), Job(2, "b", "a", 4 * 3600, 3600, 0, (req, req))]
    bounds = lower_bounds(jobs, fleet(SimConfig(groups=(CPU,))))
    assert bounds.step_node_hours == pytest.approx(4.0)
    assert bounds.binding_hours == {"cpu": 0.0, "memory": 2.0}
    assert bounds.resource == "memory"
