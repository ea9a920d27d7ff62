"""What is known of durations: a pod's and its Job's ``activeDeadlineSeconds``, read from the API objects,
stored, and used by consolidation's saving rule (a node whose pods all end soon is not worth draining)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from plan_world import NOW, World
from test_disruption_move import IGNORE_DISRUPTION, batch_job, job_pod, pod, snapshot
from test_sim_moves import GPU, HEADER
from test_sim_moves import _world as sim_world

from spillway.config import PlannerConfig
from spillway.model.cluster import ClusterSnapshot, PodInfo
from spillway.model.jobs import JobInfo
from spillway.model.k8s import iter_kube_list
from spillway.model.snapshot import Snapshot
from spillway.planner import codes
from spillway.planner.durations import all_end_within, remaining_seconds
from spillway.sim.run import SimConfig, mark_jobs, simulate
from spillway.sim.trace import Job, read_trace
from spillway.sim.world import SchedulerConfig, SimJob

T0 = datetime(2026, 11, 2, 11, 0, tzinfo=UTC)  # the pods of test_disruption_move start an hour before noon
NOON = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
MOVABLE = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}


def with_deadline(raw: dict[str, Any], seconds: int) -> dict[str, Any]:
    raw["spec"]["activeDeadlineSeconds"] = seconds
    return raw


def running_job(
    name: str, deadline: int | None, started: datetime | None = T0, **spec: Any
) -> dict[str, Any]:
    raw = batch_job(name, None)
    if deadline is not None:
        raw["spec"]["activeDeadlineSeconds"] = deadline
    raw["spec"].update(spec)
    if started is not None:
        raw["status"] = {"startTime": started.isoformat().replace("+00:00", "Z")}
    return raw


# -- the model --


def test_a_bound_pods_deadline_is_read_stored_and_read_back() -> None:
    snap = snapshot(with_deadline(pod("a"), 5400), with_deadline(pod("pending", node_name=None), 60))
    bound, pending = sorted(snap.pods, key=lambda p: p.name != "a")
    assert (bound.active_deadline, bound.started_at) == (5400, T0)
    assert bound.to_dict()["ads"] == 5400
    assert pending.active_deadline is None  # no start time yet: nothing to count from
    # the stored snapshot (as the snapshots table holds it) carries it
    whole = Snapshot.build(snap, (), NOON)
    again = Snapshot.from_dict(json.loads("".join(whole.iter_json())))  # the stream the store compresses
    assert again.cluster == snap
    assert next(p for p in again.cluster.pods if p.name == "a").active_deadline == 5400
    # a pod without one writes nothing, and an older stored pod reads as unknown
    plain = snapshot(pod("b")).pods[0]
    assert plain.active_deadline is None and "ads" not in plain.to_dict()
    assert PodInfo.from_dict({"ns": "ml", "n": "old", "r": {}}).active_deadline is None


def test_a_running_jobs_deadline_and_start_are_kept_a_suspended_or_unstarted_one_is_not() -> None:
    snap = snapshot(
        running_job("etl", 7200),
        running_job("paused", 7200, suspend=True),
        running_job("queued", 7200, started=None),
        running_job("plain", None),
        running_job("both", 600, podFailurePolicy={"rules": [IGNORE_DISRUPTION]}),
    )
    # a running Job that counts an evicted pod as failed keeps its room before backoffLimit (6 unset)
    assert snap.jobs == (
        JobInfo("Job/ml/both", tolerates_disruption=True, active_deadline=600, started_at=T0),
        JobInfo("Job/ml/etl", active_deadline=7200, started_at=T0, evictions_left=6),
        JobInfo("Job/ml/plain", evictions_left=6),
    )
    assert ClusterSnapshot.from_dict(snap.to_dict()) == snap
    assert snap.to_dict()["jobs"][1] == {"k": "Job/ml/etl", "ad": 7200, "st": "2026-11-02T11:00:00Z", "bl": 6}


@pytest.mark.parametrize("value", [0, -30, "600", 1.5, True, 2**63])
@pytest.mark.parametrize("kind", ["Pod", "Job"])
def test_a_bad_deadline_is_refused_naming_the_field(kind: str, value: Any) -> None:
    raw = with_deadline(pod("a"), 1) if kind == "Pod" else running_job("etl", 1)
    raw["spec"]["activeDeadlineSeconds"] = value
    with pytest.raises(ValueError, match=r"^items\[0\]\.spec\.activeDeadlineSeconds: "):
        list(iter_kube_list({"kind": "List", "items": [raw]}))


# -- what is known of a pod's remaining time --


def test_the_tighter_of_the_pods_and_its_jobs_deadline_bounds_what_is_left() -> None:
    def left(*items: dict[str, Any]) -> float | None:
        snap = snapshot(*items)
        return remaining_seconds(snap.pods[0], snap.jobs_by_key(), NOON)

    assert left(pod("a")) is None
    assert left(with_deadline(pod("a"), 3900)) == 300  # started an hour ago, 65 minutes allowed
    assert left(with_deadline(job_pod("etl"), 3900), running_job("etl", 4200)) == 300
    assert left(with_deadline(job_pod("etl"), 3900), running_job("etl", 3720)) == 120  # the Job's is tighter
    assert left(job_pod("etl"), running_job("etl", 3720)) == 120  # the Job's alone
    assert left(job_pod("etl"), running_job("other", 3720)) is None  # another Job's says nothing
    assert left(with_deadline(pod("a"), 1800)) == 0  # passed: the kubelet is failing it now


def test_a_node_empties_when_its_last_known_pod_ends_and_never_with_an_unknown_one() -> None:
    snap = snapshot(with_deadline(pod("a"), 3660), with_deadline(pod("b"), 4200), pod("c", deleting=True))
    by_name = {p.name: p for p in snap.pods}
    jobs = snap.jobs_by_key()
    assert all_end_within([by_name["a"], by_name["b"]], jobs, NOON) == 600
    assert all_end_within([by_name["a"], by_name["c"]], jobs, NOON) == 60  # terminating: leaving already
    assert all_end_within([by_name["a"], *snapshot(pod("d")).pods], jobs, NOON) is None
    assert all_end_within([], jobs, NOON) == 0


# -- consolidation --

IDLE = 1.0  # minutes a node must be idle before scale-down takes it
CONSOLIDATE: dict[str, Any] = {
    "consolidation": "when-underutilized",
    "consolidation_utilization_threshold": 1.0,
    "max_scale_in_fraction": 1.0,
    "scale_down_idle_minutes": IDLE,
}


def two_half_full(deadline: int | None, node_b_deadline: int | None = None, job: int | None = None) -> World:
    """Two m5.2xlarge nodes, each running two movable pods (1500m of 7910m: moving both costs 3.8
    node-minutes with the default 10-minute restart) that started 50 minutes ago with ``deadline``
    seconds each; with ``job``, the pods belong to a running batch Job with that deadline."""
    w = World(regions=("us-east-1",))
    nodes = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10))
    started = NOW - timedelta(minutes=50)
    for i, (node, seconds) in enumerate(zip(nodes, (deadline, node_b_deadline), strict=True)):
        owner = ("Job", f"etl{i}") if job is not None else ("ReplicaSet", f"web{i}")
        labels = {"batch.kubernetes.io/job-name": f"etl{i}"} if job is not None else None
        w.pods(f"w{i}", 2, cpu="1500m", memory="1Gi", node_name=node, owner=owner, annotations=MOVABLE,
               labels=labels, created=started)  # fmt: skip
        if seconds is not None:
            for item in w.items[-2:]:
                item["spec"]["activeDeadlineSeconds"] = seconds
        if job is not None:
            raw = running_job(f"etl{i}", job, started=started)
            raw["metadata"]["namespace"] = "default"
            w.items.append(raw)
    return w


def kept(w: World) -> dict[str, tuple[str, str]]:
    result = w.plan(**CONSOLIDATE)
    assert result.drain == () or len(result.drain) == 1
    return {k.node: (k.code, k.reason) for k in result.kept} | {
        d.node: (d.code, d.reason) for d in result.drain
    }


def test_a_node_whose_pods_end_within_minutes_is_kept_as_not_worth_draining() -> None:
    w = two_half_full(deadline=52 * 60, node_b_deadline=52 * 60)  # 2 minutes left: saving 3 < 3.8
    verdicts = kept(w)
    assert {code for code, _ in verdicts.values()} == {codes.SAVING_TOO_SMALL}
    reason = next(iter(verdicts.values()))[1]
    assert "end within 2 minute(s)" in reason and "saves 3.0 node-minutes" in reason, reason


def test_the_same_nodes_without_deadlines_or_with_far_ones_are_consolidated() -> None:
    for w in (two_half_full(None, None), two_half_full(24 * 3600, 24 * 3600)):
        assert sorted(code for code, _ in kept(w).values()) == [
            codes.CONSOLIDATION,
            codes.RECEIVES_MOVED_PODS,
        ]


def test_only_the_node_whose_pods_end_soon_is_kept_the_other_moves_onto_it() -> None:
    w = two_half_full(52 * 60, None)
    a, b = sorted(kept(w))
    assert kept(w)[a][0] == codes.SAVING_TOO_SMALL
    assert kept(w)[b][0] == codes.CONSOLIDATION and f"fit on {a}" in kept(w)[b][1]


def test_a_passed_deadline_leaves_only_the_idle_time_to_save() -> None:
    w = two_half_full(deadline=30 * 60, node_b_deadline=30 * 60)  # passed 20 minutes ago
    code, reason = next(iter(kept(w).values()))
    assert code == codes.SAVING_TOO_SMALL and "end within 0 minute(s)" in reason and "saves 1.0" in reason
    # with a longer idle time the saving (10 node-minutes) outlasts the restarts again
    assert len(w.plan(**{**CONSOLIDATE, "scale_down_idle_minutes": 10}).drain) == 1


def test_the_jobs_deadline_counts_when_the_pods_have_none() -> None:
    assert {c for c, _ in kept(two_half_full(None, None, job=52 * 60)).values()} == {codes.SAVING_TOO_SMALL}
    assert len(two_half_full(None, None, job=24 * 3600).plan(**CONSOLIDATE).drain) == 1


# -- the simulator: --duration-noise publishes deadlines --


def _sim_jobs(count: int = 40) -> list[Job]:
    req = {"nvidia.com/gpu": 1000, "pods": 1000}
    return [Job(i, f"j{i}", "ml", 0, 600 + 97 * i, 0, (req,)) for i in range(count)]


def test_without_duration_noise_no_pod_has_a_deadline() -> None:
    world = sim_world(track=True)
    for job in mark_jobs(_sim_jobs(), SimConfig()):
        world.arrive(SimJob(job))
    world.schedule()
    assert world.pod_infos and all(p.active_deadline is None for p in world.pod_infos.values())


@pytest.mark.parametrize("sigma", [0.0, 0.5])
def test_with_duration_noise_every_started_pod_ends_before_its_deadline(sigma: float) -> None:
    jobs = mark_jobs(_sim_jobs(), SimConfig(duration_noise=sigma, seed=3))
    assert jobs == mark_jobs(_sim_jobs(), SimConfig(duration_noise=sigma, seed=3))  # seeded
    world = sim_world(track=True)
    sims = [SimJob(job) for job in jobs]
    for sim_job in sims:
        world.arrive(sim_job)
    world.schedule()
    started = [s for s in sims if s.state == "running"]
    assert len(started) == 16  # two 8-GPU nodes
    for sim_job in started:
        [key] = sim_job.pod_keys
        deadline = world.pod_infos[key].active_deadline
        assert deadline is not None and deadline >= sim_job.remaining
        if sigma == 0.0:
            assert deadline == sim_job.remaining  # exact
    if sigma:
        assert sum(world.pod_infos[s.pod_keys[0]].active_deadline != s.remaining for s in started) > 8


def test_a_moved_jobs_new_pods_get_a_deadline_from_their_new_remaining_time() -> None:
    # mark_jobs decides movability (the fraction), so the job is made movable there
    config = SimConfig(duration_noise=0.0, movable_fraction=1.0)
    [job] = mark_jobs([replace(_sim_jobs(1)[0], duration=3600)], config)
    assert job.movable
    world = sim_world(penalty=600, track=True)
    sim_job = SimJob(job)
    world.jobs.append(sim_job)
    world.arrive(sim_job)
    world.schedule()
    assert world.pod_infos[sim_job.pod_keys[0]].active_deadline == 3600
    world.t = 1000
    world.drain(sim_job.nodes[0].name)
    world.schedule()
    assert sim_job.state == "running"
    assert world.pod_infos[sim_job.pod_keys[0]].active_deadline == 3600 - 1000 + 600


def test_known_durations_spare_a_move_that_saves_less_than_it_costs(tmp_path: Path) -> None:
    # Two 7-GPU jobs of 10 minutes and two 1-GPU jobs of 12 (movable): two nodes, each left with one
    # 1-GPU pod with 2 minutes to run when the big jobs end. Moving one costs 120 min x 1/8 = 15
    # node-minutes: worth it against the 60-minute horizon (durations unknown), not against the 2 + 10
    # minutes until its node would go by itself (durations known).
    path = tmp_path / "trace.csv"
    path.write_text(HEADER + "0,600,,,7,1,ml,0\n0,720,,,1,1,ml,0\n0,600,,,7,1,ml,0\n0,720,,,1,1,ml,0\n")
    planner = PlannerConfig(consolidation="when-underutilized", consolidation_restart_minutes=120)
    results = {}
    for noise in (None, 0.0, 0.5):
        config = SimConfig(groups=(GPU,), policies=("spillway",), planner=planner, movable_fraction=1.0,
                           restart_penalty=600, scheduler=SchedulerConfig("most-allocated"),
                           duration_noise=noise)  # fmt: skip
        report = simulate(config, read_trace(path))
        results[noise] = report.results[0]
        assert report.to_dict()["config"]["duration_noise"] == noise
    assert results[None].moves >= 1
    assert results[0.0].moves == 0 and results[0.0].unmovable_killed == 0
    assert results[0.5].moves <= results[None].moves
