"""`spillway simulate` on hand-made traces whose answers are worked out by hand.

Conventions of every scenario: p3.16xlarge nodes (8 GPUs; a GPU row gets 7.9 CPU and 56 GiB per GPU),
120 s from launch to Ready, a decision every 60 s, ticks at multiples of 60 s from the first submit
(generic traces start at 0, a tick). Node-hours count every instance from launch until the last job
completes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_world import gpu_world

from spillway.config import PlannerConfig
from spillway.sim import engine
from spillway.sim.report import format_table
from spillway.sim.run import Report, SimConfig, simulate
from spillway.sim.trace import read_trace
from spillway.sim.world import (
    BOOT,
    COMPLETE,
    GroupSpec,
    Outage,
    SchedulerConfig,
    SimJob,
    World,
)

HEADER = "submit_time,duration,cpu,memory_gib,gpus,count,namespace,priority\n"
EAST = GroupSpec("gpu-east", "us-east-1", "p3.16xlarge", 0, 10)
WEST = GroupSpec("gpu-west", "us-west-2", "p3.16xlarge", 0, 10)


def trace_file(tmp_path: Path, rows: list[str], name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text(HEADER + "".join(r + "\n" for r in rows))
    return path


def run(tmp_path: Path, rows: list[str], **overrides: object) -> Report:
    settings: dict[str, object] = {"groups": (EAST,), "policies": ("spillway",)}
    settings.update(overrides)
    config = SimConfig(**settings)  # type: ignore[arg-type]
    return simulate(config, read_trace(trace_file(tmp_path, rows)))


def test_one_job_one_node(tmp_path: Path) -> None:
    # t=0 the job arrives, nothing runs it: pending. Tick 0: one node launched. Ready at 120, the job
    # starts (120 s pending) and ends at 3720, when the replay ends: one node for 3720 s.
    report = run(tmp_path, ["0,3600,,,1,1,ml,0"])
    result = report.results[0]
    assert result.node_hours == pytest.approx(3720 / 3600)
    assert result.pending_seconds == {"p50": 120.0, "p90": 120.0, "p99": 120.0}
    assert result.pending_weighted_seconds == {"p50": 120.0, "p90": 120.0, "p99": 120.0}
    assert report.bounds.step_node_hours == pytest.approx(1.0)
    assert result.ratio_to_step_bound == pytest.approx(3720 / 3600)
    assert result.cost_usd == pytest.approx(3720 / 3600 * 24.48)
    assert result.utilisation == pytest.approx(3600 / (8 * 3720))
    assert result.actions["scale_up_calls"] == 1
    assert result.actions["nodes_launched"] == 1
    assert result.pods_killed == 0
    assert result.jobs_started == 1 and result.jobs_unstarted == 0


def test_burst_launches_exactly_what_fits_and_reuses_free_room(tmp_path: Path) -> None:
    # 20 one-GPU jobs at t=0 need ceil(20/8) = 3 nodes, launched in one plan at tick 0 and Ready at
    # 120. Four more jobs at 600 fit in the 4 GPUs left: they start at once, nothing is launched.
    rows = ["0,3600,,,1,1,ml,0"] * 20 + ["600,1800,,,1,1,ml,0"] * 4
    report = run(tmp_path, rows)
    result = report.results[0]
    assert result.actions["scale_up_calls"] == 1
    assert result.actions["nodes_launched"] == 3
    assert result.node_hours == pytest.approx(3 * 3720 / 3600)
    # 20 jobs waited 120 s, 4 waited 0: nearest rank p50 is 120 (12 of 24 jobs), and so is p90.
    assert result.pending_seconds["p50"] == 120.0
    assert result.pending_seconds["p90"] == 120.0
    assert sorted(w for w, _ in report.runs[0].world.waits.values()) == [0] * 4 + [120] * 20
    assert report.bounds.step_node_hours == pytest.approx(3.0)
    assert report.bounds.peak_nodes == 3


def test_a_count_row_is_a_gang_that_starts_together(tmp_path: Path) -> None:
    # One job of 3 pods of 8 GPUs: 3 nodes, and it starts only when all three are Ready.
    report = run(tmp_path, ["0,600,,,8,3,ml,0"])
    world = report.runs[0].world
    assert report.pods == 3
    assert world.counters.nodes_launched == 3
    assert list(world.waits.values()) == [(120, 24)]


def test_outage_spills_to_the_secondary_region_then_comes_back(tmp_path: Path) -> None:
    # The primary group cannot launch during the first 30 minutes.
    # t=0    job A (1 GPU, 1 h) pending; tick 0 raises gpu-east: the launch fails (Failed activity).
    # t=60   the plan sees the failure, skips gpu-east and launches in gpu-west: Ready at 180, A starts.
    # t=3600 job B (8 GPUs) cannot fit beside A; gpu-east has had no failure for 15 minutes and the
    #        outage is over: launched there, Ready at 3720, B starts.
    # t=3780 A ends; the overflow node is idle, and is drained 10 minutes later, at 4380.
    # t=7320 B ends: the replay ends with one node, at home.
    rows = ["0,3600,,,1,1,ml,0", "3600,3600,,,8,1,ml,0"]
    report = run(tmp_path, rows, groups=(EAST, WEST), outages=(Outage("gpu-east", 0, 1800),))
    result = report.results[0]
    world = report.runs[0].world
    assert world.counters.failed_launch_calls == 1
    assert (
        world.groups["gpu-east"]
        .failures[0]
        .message.startswith("We currently do not have sufficient p3.16xlarge capacity")
    )
    assert world.series == [(0, 0), (60, 1), (3600, 2), (4380, 1)]
    assert len(world.groups["gpu-east"].instances) == 1
    assert len(world.groups["gpu-west"].instances) == 0
    assert sorted(world.waits.values()) == [(120, 8), (180, 1)]
    assert result.node_hours == pytest.approx(((4380 - 60) + (7320 - 3600)) / 3600)
    assert result.node_hours_by_group == pytest.approx(
        {"gpu-east": (7320 - 3600) / 3600, "gpu-west": (4380 - 60) / 3600}
    )
    assert result.pods_killed == 0


def test_a_group_at_max_size_spills_too(tmp_path: Path) -> None:
    small_east = GroupSpec("gpu-east", "us-east-1", "p3.16xlarge", 0, 1)
    report = run(tmp_path, ["0,600,,,8,2,ml,0"], groups=(small_east, WEST))
    world = report.runs[0].world
    assert world.counters.nodes_launched == 2
    assert world.counters.failed_launch_calls == 0
    # both launched by one plan, one in each region
    assert world.series == [(0, 2)]


def test_idle_nodes_are_drained_after_the_idle_time_and_nothing_is_killed(tmp_path: Path) -> None:
    # A one-hour job and a two-hour job on separate nodes (8 GPUs each). The first node is idle from
    # 3720 and drained at 3720 + 10 min; the replay ends at 7320.
    report = run(tmp_path, ["0,3600,,,8,1,ml,0", "0,7200,,,8,1,ml,0"])
    world = report.runs[0].world
    assert world.series == [(0, 2), (4320, 1)]
    assert world.counters.nodes_terminated == 1
    assert report.results[0].pods_killed == 0
    assert report.results[0].node_hours == pytest.approx((4320 + 7320) / 3600)


def test_shorter_idle_time_in_the_planner_config_drains_sooner(tmp_path: Path) -> None:
    planner = PlannerConfig(scale_down_idle_minutes=2, scale_down_delay_after_launch_minutes=0)
    report = run(tmp_path, ["0,3600,,,8,1,ml,0", "0,7200,,,8,1,ml,0"], planner=planner)
    assert report.runs[0].world.series == [(0, 2), (3720 + 120, 1)]


def test_a_pod_no_group_can_run_never_starts_and_holds_nothing_up(tmp_path: Path) -> None:
    # A generic row's gpus are per pod: 16 GPUs fit no p3.16xlarge. The other job runs as usual, the
    # replay ends when it completes, and the bound leaves the impossible job out.
    rows = ["0,3600,,,16,1,ml,0", "0,3600,,,1,1,ml,0"]
    report = run(tmp_path, rows, policies=("spillway", "ec2-autoscaler", "cluster-autoscaler"))
    assert report.unrunnable == 1
    assert report.bounds.step_node_hours == pytest.approx(1.0)
    for result, replay in zip(report.results, report.runs, strict=True):
        assert result.jobs_started == 1 and result.jobs_unstarted == 0
        assert replay.end == 3720


def test_a_policy_that_delays_jobs_can_come_out_under_the_step_bound_by_a_tick_and_a_boot(
    tmp_path: Path,
) -> None:
    # As bounds.py and the README say: the bound starts every job at its submit. Two 4-GPU jobs of
    # 1000 s submitted at 1 and 170 s: the bound (and First Fit) hold one node from 1 to 1170 s. Spillway
    # launches one node at the tick at 60 s, Ready at 180, where both jobs start, ending at 1180 s: 1120
    # node-seconds, 49 under the bound without a move, less than the tick and the boot of its launch.
    report = run(tmp_path, ["1,1000,,,4,1,ml,0", "170,1000,,,4,1,ml,0"])
    result = report.results[0]
    first_fit = next(p for p in report.packers if p.packer == "first-fit")
    assert round(report.bounds.step_node_hours * 3600) == round(first_fit.node_hours * 3600) == 1169
    assert round(result.node_hours * 3600) == 1120
    assert result.moves == 0 and result.actions["nodes_launched"] == 1
    assert (report.bounds.step_node_hours - result.node_hours) * 3600 <= 60 + 120


def starved_gang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policies: tuple[str, ...]) -> Report:
    """Two groups of one node each, the second's launches failing throughout: a gang of two 8-GPU pods
    (job 0) and a 1-GPU job (job 1), both of 1000 s at 0; the replays' horizon cut to 8200 s."""
    monkeypatch.setattr(engine, "HORIZON_SLACK", 7200)
    groups = (
        GroupSpec("gpu", "us-east-1", "p3.16xlarge", 0, 1),
        GroupSpec("gpu2", "us-west-2", "p3.16xlarge", 0, 1),
    )
    rows = ["0,1000,,,8,2,ml,0", "0,1000,,,1,1,ml,0"]
    outages = (Outage("gpu2", 0, 10**6),)
    return run(tmp_path, rows, groups=groups, outages=outages, packers=False, policies=policies)


def test_a_job_that_never_starts_counts_as_waiting_until_the_horizon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two groups of one node each, the second's launches failing throughout: the gang of two 8-GPU
    # pods never starts, the 1-GPU job waits 120 s. The gang waits from its submit (0) to the horizon
    # (censored there: the last end at submit, 1000 s, plus the slack, cut to two hours), weighing 16
    # GPUs: every weighted percentile is that wait, and so is the plain p90 of the two jobs. (A gang
    # larger than the groups at their MaxSize is refused before the replay: test_sim_cli.)
    report = starved_gang(tmp_path, monkeypatch, ("spillway",))
    result, end = report.results[0], 8200.0
    assert (result.jobs_started, result.jobs_unstarted) == (1, 1)
    assert report.runs[0].horizon == end
    assert result.pending_seconds == {"p50": 120.0, "p90": end, "p99": end}
    assert result.pending_weighted_seconds == {"p50": end, "p90": end, "p99": end}
    assert result.max_pending_seconds == end
    assert result.tenants["ml"].pending_weighted_seconds["p50"] == end
    assert (
        "spillway: 1 job(s) never started and 0 sent back never started again, counted as waiting until "
        "the horizon (2.3 h, the same for every policy)"
    ) in format_table(report.results, report.bounds)


def test_a_job_no_policy_starts_waits_until_one_horizon_common_to_every_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The gang above never starts under any autoscaling policy, but each replay's last event falls apart
    # (the ec2-autoscaler reference's at 7260 s, Spillway's and cluster-autoscaler's at 8160 s):
    # censored there, the same starved job waited 900 s less under one policy than under the others.
    # Every policy counts it to the same instant, the replays' horizon: the last job's end at its
    # submit (1000 s) plus the slack (here 7200 s), and reports it apart from the jobs sent back.
    report = starved_gang(tmp_path, monkeypatch, ("spillway", "ec2-autoscaler", "cluster-autoscaler"))
    for result in report.results:
        assert result.max_pending_seconds == 8200.0, result.policy
        assert result.pending_weighted_seconds["p50"] == 8200.0, result.policy
        assert (result.jobs_unstarted, result.jobs_not_restarted) == (1, 0), result.policy
    assert report.to_dict()["waits_censored_at_hours"] == round(8200 / 3600, 3)


def test_nodes_still_up_when_a_job_is_left_waiting_are_billed_to_the_same_horizon_for_every_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The gang above starves under every policy. Spillway and the ec2-autoscaler reference each keep the
    # gpu node launched at 0 to the end; cluster-autoscaler's last node was launched at 8160 s. Each
    # replay stopped at its own last event (the ec2-autoscaler reference's at 7260 s, the others' at
    # 8160 s) and billed the nodes still up to there: the same node, up and frozen (nothing more could
    # happen before the horizon), cost 900 s less under the ec2-autoscaler reference than under
    # Spillway, and cluster-autoscaler's last node nothing. The books close at the horizon for every
    # policy, where the waits are cut.
    report = starved_gang(tmp_path, monkeypatch, ("spillway", "ec2-autoscaler", "cluster-autoscaler"))
    launched = {}
    for replay, result in zip(report.runs, report.results, strict=True):
        assert replay.end == 8200 and result.hours == pytest.approx(8200 / 3600), result.policy
        (node,) = [node for group in replay.world.groups.values() for node in group.instances.values()]
        launched[result.policy] = node.launched
    assert launched == {"spillway": 0, "ec2-autoscaler": 0, "cluster-autoscaler": 8160}
    spillway, ec2, _ = report.results
    assert spillway.node_hours == ec2.node_hours == pytest.approx(8200 / 3600)


def test_a_job_sent_back_and_never_started_again_is_counted_apart_from_those_never_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One Spot node (MinSize = MaxSize 1), taken back within the hour, its replacements failing from
    # 60 s on: the job started at 0 and went back to the queue for good. It started, so it is no job
    # that never started (it was counted as one), but one not started again; it waits until the horizon.
    monkeypatch.setattr(engine, "HORIZON_SLACK", 7200)
    groups = (GroupSpec("gpu", "us-east-1", "p3.16xlarge", 1, 1, spot_rate=50.0),)
    policies = ("spillway", "static", "ec2-autoscaler", "cluster-autoscaler")
    report = run(
        tmp_path,
        ["0,36000,,,8,1,ml,0"],
        groups=groups,
        outages=(Outage("gpu", 60, 10**6),),
        policies=policies,
    )
    for result in report.results:
        assert result.interruptions >= 1 and result.jobs_started == 1, result.policy
        assert (result.jobs_unstarted, result.jobs_not_restarted) == (0, 1), result.policy
        assert result.to_dict()["jobs_not_restarted"] == 1
    assert len({r.max_pending_seconds for r in report.results}) == 1


def test_reference_policies_follow_their_published_rules(tmp_path: Path) -> None:
    rows = ["0,3600,,,1,1,ml,0"]
    report = run(tmp_path, rows, policies=("static", "ec2-autoscaler", "cluster-autoscaler"))
    static, ec2, ca = (r.world for r in report.runs)
    # static: the peak (1 node) from the start, so no pending at all
    assert static.counters.nodes_launched == 1 and list(static.waits.values()) == [(0, 1)]
    # kubernetes-ec2-autoscaler: what is needed plus an over-provision of 5
    assert ec2.counters.nodes_launched == 6
    # cluster-autoscaler: what the bin-packing estimate says
    assert ca.counters.nodes_launched == 1
    assert all(r.pods_killed == 0 for r in report.results)


@pytest.mark.parametrize("policy", ["ec2-autoscaler", "cluster-autoscaler"])
def test_reference_policies_spill_during_an_outage(tmp_path: Path, policy: str) -> None:
    report = run(
        tmp_path,
        ["0,3600,,,1,1,ml,0"],
        policies=(policy,),
        groups=(EAST, WEST),
        outages=(Outage("gpu-east", 0, 1800),),
    )
    world = report.runs[0].world
    (wait, _) = world.waits[0]
    if world.counters.failed_launch_calls:  # tried the primary first: spilled at the next loop
        assert wait == 180
    else:  # cluster-autoscaler's random expander may pick the secondary region at once
        assert wait == 120
    assert world.groups["gpu-west"].instances or world.counters.nodes_terminated
    assert report.results[0].pods_killed == 0


def test_cluster_autoscaler_deletes_empty_nodes_after_ten_minutes(tmp_path: Path) -> None:
    report = run(tmp_path, ["0,3600,,,8,1,ml,0", "0,7200,,,8,1,ml,0"], policies=("cluster-autoscaler",))
    assert report.runs[0].world.series == [(0, 2), (4320, 1)]


def test_determinism_same_seed_same_report(tmp_path: Path) -> None:
    # 150 jobs of assorted sizes and lengths, pseudo-random but fixed (no RNG in the test itself)
    rows = []
    for i in range(150):
        gpus = (1, 1, 2, 1, 4, 1, 8, 16)[i % 8]
        rows.append(f"{(i * 97) % 7200},{300 + (i * 53) % 5400},,,{gpus},1,ns{i % 3},{i % 2}")
    config = {"groups": (EAST, WEST), "outages": (Outage("gpu-east", 1200, 2400),)}
    first = run(
        tmp_path,
        rows,
        seed=7,
        policies=("spillway", "static", "ec2-autoscaler", "cluster-autoscaler"),
        **config,
    )
    second = run(
        tmp_path,
        rows,
        seed=7,
        policies=("spillway", "static", "ec2-autoscaler", "cluster-autoscaler"),
        **config,
    )
    assert first.to_dict() == second.to_dict()
    assert [r.world.series for r in first.runs] == [r.world.series for r in second.runs]


def _world(scoring: str, nodes: int = 2) -> World:
    return gpu_world(nodes, group=EAST, scoring=scoring, seed=0)


def _job(job_id: int, gpus: int, pods: int = 1) -> SimJob:
    from spillway.sim.trace import Job

    request = {
        "cpu": 7900 * gpus,
        "memory": 56 * 2**30 * 1000 * gpus,
        "nvidia.com/gpu": 1000 * gpus,
        "pods": 1000,
    }
    return SimJob(Job(job_id, f"job-{job_id}", "ml", 0, 60, 0, (request,) * pods))


@pytest.mark.parametrize(("scoring", "same_node"), [("least-allocated", False), ("most-allocated", True)])
def test_scheduler_scoring_spreads_or_packs(scoring: str, same_node: bool) -> None:
    world = _world(scoring)
    first, second = _job(1, 4), _job(2, 1)
    for job in (first, second):
        world.arrive(job)
        world.schedule()
    assert first.state == second.state == "running"
    assert (first.nodes[0] is second.nodes[0]) is same_node


def test_a_gang_waits_for_room_for_all_its_pods() -> None:
    world = _world("most-allocated", nodes=1)
    gang = _job(1, 8, pods=2)
    world.arrive(gang)
    world.schedule()
    assert gang.state == "pending" and gang.attempted
    assert world.nodes[next(iter(world.nodes))].free[2] == 8000  # nothing held while waiting
    world.t = 60
    world.set_desired("gpu-east", 2)
    t, kind, _, node = world.events[0]
    assert (t, kind) == (180, BOOT)
    world.t = 180
    world.boot(node)
    world.schedule()
    assert gang.state == "running" and gang.start == 180
    assert {n.name for n in gang.nodes} == set(world.nodes)


def test_terminating_a_busy_node_kills_its_pods_and_requeues_the_job() -> None:
    world = _world("least-allocated", nodes=2)
    job = _job(1, 2)
    world.arrive(job)
    world.schedule()
    node = job.nodes[0]
    world.t = 30
    world.terminate(node.name)
    assert world.counters.pods_killed == 1 and world.counters.jobs_killed == 1
    # back in the queue, then started over on the other node
    world.schedule()
    assert job.state == "running" and job.start == 30 and job.nodes[0] is not node
    stale = [e for e in world.events if e[1] == COMPLETE]
    assert len(stale) == 2  # the killed run's completion is ignored when it comes
    world.t = 60
    world.complete(job, 0)
    assert job.state == "running"


# team-b's two long jobs come first in the queue; team-a's three one-node jobs may add one node (8 GPUs).
TENANT_ROWS = [
    "0,7300,,,8,1,team-b,0",
    "0,7300,,,8,1,team-b,0",
    "0,3600,,,8,1,team-a,0",
    "0,3600,,,8,1,team-a,0",
    "0,3600,,,8,1,team-a,0",
]
TEAM_A_LIMIT = PlannerConfig.model_validate({"tenants": {"team-a": {"limits": {"nvidia.com/gpu": "8"}}}})


def test_a_tenant_limit_holds_its_pods_and_caps_its_node_hours(tmp_path: Path) -> None:
    # Tick 0: team-b opens two nodes, team-a one (its limit); team-a's other two pods are held
    # (tenant-limit). Ready at 120: team-a's jobs run one after another on its node (120, 3720, 7320;
    # the replay ends at 10920), team-b's both from 120 to 7420, then idle from the tick at 7440: drained
    # 10 minutes later, one a plan (max_scale_in_fraction), at 8040 and 8100.
    limited = run(tmp_path, TENANT_ROWS, planner=TEAM_A_LIMIT).results[0]
    team_a, team_b = limited.tenants["team-a"], limited.tenants["team-b"]
    assert team_a.node_hours == pytest.approx(10920 / 3600)
    assert team_a.pods_held == 2
    assert team_a.pods_held_by_code == {"tenant-limit": 2}
    assert team_a.pending_weighted_seconds == {"p50": 3720.0, "p90": 7320.0, "p99": 7320.0}
    assert team_b.pods_held == 0
    assert team_b.pending_weighted_seconds["p90"] == 120.0
    assert team_b.node_hours == pytest.approx((8040 + 8100) / 3600)
    assert sum(t.node_hours or 0 for t in limited.tenants.values()) == pytest.approx(limited.node_hours)
    out = limited.to_dict()["tenants"]["team-a"]
    assert out["pods_held_by_limits"] == 2 and out["node_hours_charged"] == pytest.approx(3.033, abs=1e-3)

    # Unlimited, team-a opens three nodes and nothing waits; team-b waits no more either way.
    free = run(tmp_path, TENANT_ROWS).results[0]
    # idle at 3720, drained one a plan from 4320
    assert free.tenants["team-a"].node_hours == pytest.approx((4320 + 4380 + 4440) / 3600)
    assert free.tenants["team-a"].pods_held == 0
    assert free.tenants["team-a"].pending_weighted_seconds["p90"] == 120.0
    assert free.tenants["team-b"].pending_weighted_seconds == team_b.pending_weighted_seconds


def test_reference_policies_report_waiting_per_tenant_but_charge_no_node_hours(tmp_path: Path) -> None:
    report = run(tmp_path, TENANT_ROWS, planner=TEAM_A_LIMIT, policies=("cluster-autoscaler",))
    tenants = report.results[0].tenants
    assert set(tenants) == {"team-a", "team-b"}
    assert tenants["team-a"].node_hours is None and tenants["team-a"].pods_held == 0
    assert tenants["team-a"].jobs == 3 and tenants["team-a"].jobs_started == 3


# --- the scale-down candidate taint (PreferNoSchedule) ----------------------------------------------


def test_the_scheduler_puts_a_pod_elsewhere_than_a_candidate_node_unless_only_it_fits() -> None:
    world = _world("least-allocated")
    busy_job = _job(1, 4)
    world.arrive(busy_job)
    world.schedule()
    busy = busy_job.nodes[0]
    (idle,) = (n for n in world.nodes.values() if n is not busy)
    world.track = True
    world.set_candidate_taint(idle.name, True)
    assert ("spillway.io/scale-down-candidate", None, "PreferNoSchedule") in world.node_infos[
        idle.name
    ].taints

    small = _job(2, 1)  # LeastAllocated alone would pick the empty node
    world.arrive(small)
    world.schedule()
    assert small.nodes[0] is busy
    large = _job(3, 8)  # fits only the candidate: the taint is a preference, never a block
    world.arrive(large)
    world.schedule()
    assert large.nodes[0] is idle
    world.set_candidate_taint(idle.name, False)
    assert world.node_infos[idle.name].taints == () and world.counters.soft_taints == 2


# Two nodes from t=0 (Ready at 120): a long 4-GPU job on one, an 8-GPU job that ends at 720 on the
# other. At 900 a long 1-GPU job arrives: LeastAllocated prefers the idle node, which then stays.
CANDIDATE_ROWS = ["0,20000,,,4,1,ml,0", "0,600,,,8,1,ml,0", "900,20000,,,1,1,ml,0"]


@pytest.mark.parametrize("policy", ["spillway", "cluster-autoscaler"])
def test_a_marked_idle_node_is_passed_over_and_removed_on_time(tmp_path: Path, policy: str) -> None:
    scheduler = SchedulerConfig("least-allocated")
    marked = run(tmp_path, CANDIDATE_ROWS, policies=(policy,), scheduler=scheduler)
    world = marked.runs[0].world
    assert world.series[:2] == [(0, 2), (720 + 600, 1)]  # idle from 720, gone after 10 idle minutes
    assert world.counters.soft_taints >= 1 and marked.results[0].pods_killed == 0

    if policy == "spillway":  # the same replay without marking keeps both nodes for the long job
        unmarked = run(tmp_path, CANDIDATE_ROWS, scheduler=scheduler,
                       planner=PlannerConfig(max_bulk_soft_taint_count=0))  # fmt: skip
        assert unmarked.runs[0].world.series[1][0] > 20000  # both up until the 4-GPU job ends
        assert unmarked.results[0].node_hours > marked.results[0].node_hours + 5


@pytest.mark.parametrize("policy", ["spillway", "cluster-autoscaler"])
def test_a_launch_that_never_joins_is_removed_after_the_provision_time(tmp_path: Path, policy: str) -> None:
    # Seed 0's join draws are 0.422, 0.432, ...: at a rate of 0.425 the first launch is broken, the
    # second is not. t=0 the job's node is launched (whichever group); it never becomes a node. t=60
    # the policy first sees the instance without a node; 15 minutes later, at t=960, it removes it,
    # backs that group off and launches in the other, Ready at 1080, when the job starts.
    report = run(
        tmp_path, ["0,3600,,,1,1,ml,0"], groups=(EAST, WEST), join_failure_rate=0.425, policies=(policy,)
    )
    world, result = report.runs[0].world, report.results[0]

    assert (world.counters.never_joined, world.counters.unregistered_removed) == (1, 1)
    assert world.waits[0] == (1080, 1)
    assert sorted(result.node_hours_by_group.values())[0] == pytest.approx(960 / 3600)  # the broken one
    assert result.pods_killed == 0 and result.jobs_unstarted == 0


def test_without_the_provision_time_a_launch_that_never_joins_holds_its_pods_for_ever(tmp_path: Path) -> None:
    never = PlannerConfig(max_node_provision_minutes=5_000_000)
    report = run(tmp_path, ["0,3600,,,1,1,ml,0"], groups=(EAST, WEST), join_failure_rate=0.425, planner=never)
    world, result = report.runs[0].world, report.results[0]

    assert world.counters.never_joined == 1 and world.counters.unregistered_removed == 0
    assert result.jobs_unstarted == 1  # its pod waited on capacity "launching" until the replay gave up
    assert len(world.groups["gpu-east"].instances) == 1


def test_removing_a_broken_instance_at_min_size_launches_a_replacement() -> None:
    from datetime import UTC, datetime

    world = World(
        (GroupSpec("gpu-east", "us-east-1", "p3.16xlarge", 1, 10),),
        epoch=datetime(2026, 1, 1, tzinfo=UTC),
        boot_seconds=120,
        scheduler=SchedulerConfig("most-allocated"),
        join_failure_rate=0.425,  # seed 0's draws: 0.422 (broken), 0.432 (joins)
    )
    world.set_desired("gpu-east", 1)
    (broken,) = world.unregistered()
    assert world.counters.never_joined == 1 and not world.events  # no boot coming

    world.remove_instance("gpu-east", broken.instance_id, decrement=False)

    group = world.groups["gpu-east"]
    (replacement,) = world.unregistered()
    assert group.desired == 1 and replacement.instance_id != broken.instance_id
    assert [(t, kind) for t, kind, _, _ in world.events] == [(120, BOOT)]
    assert world.counters.unregistered_removed == 1


@pytest.mark.parametrize("policy", ["spillway", "cluster-autoscaler"])
def test_a_gpu_node_waiting_for_its_device_plugin_is_not_launched_again(tmp_path: Path, policy: str) -> None:
    # t=0 an 8-GPU job; its node is launched, registers at 120 without GPUs, and its device plugin adds
    # them at 210, when the job starts. The plan at 120 sees a Ready node without GPUs: still starting,
    # so capacity launching, not a node that lacks room for the job.
    report = run(tmp_path, ["0,3600,,,8,1,ml,0"], plugin_seconds=90, policies=(policy,))
    world, result = report.runs[0].world, report.results[0]

    assert result.actions["nodes_launched"] == 1
    assert world.waits[0] == (210, 8)
    assert result.node_hours == pytest.approx(3810 / 3600)


@pytest.mark.parametrize("drain_seconds", [0, 300])
def test_a_gpu_node_whose_device_plugin_is_later_than_its_idle_time_is_drained_without_a_crash(
    tmp_path: Path, drain_seconds: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # t=0 an 8-GPU job; each node registers 120 s after its launch without GPUs and its device plugin
    # adds them 2400 s later. Past the start window (15 min) the plan counts a node without room: it
    # launches another and, the node idle for 10 min, drains it, which DrainNode cordons and terminates
    # as any empty node (no pod was ever placed there). Every node goes so before its GPUs come, so the
    # job never starts and the replay runs to its horizon (cut to a day here): what the report then shows.
    monkeypatch.setattr(engine, "HORIZON_SLACK", 86_400)
    report = run(tmp_path, ["0,3600,,,8,1,ml,0"], plugin_seconds=2400, drain_seconds=drain_seconds)
    world, result = report.runs[0].world, report.results[0]

    assert result.jobs_started == 0 and result.pods_killed == 0
    leaving = world.leaving(EAST.name)  # drains still under way at the horizon (drain_seconds)
    assert result.actions["cordons"] == result.actions["nodes_terminated"] + leaving > 1
    assert result.actions["nodes_launched"] == result.actions["nodes_terminated"] + len(world.registering())


def test_without_the_start_window_the_job_gets_a_second_node(tmp_path: Path) -> None:
    no_window = PlannerConfig(max_node_startup_minutes=0)
    report = run(tmp_path, ["0,3600,,,8,1,ml,0"], plugin_seconds=90, planner=no_window)
    world, result = report.runs[0].world, report.results[0]

    assert result.actions["nodes_launched"] == 2  # the second for a job the first was launched for
    assert world.waits[0] == (210, 8)  # it starts on the first all the same
    assert result.node_hours > 3810 / 3600 + 0.1
