"""``spillway demo`` in its short form, end to end (moto, the real handlers and state machines, the
Kubernetes API emulator): its timeline tells the story in order, and nothing is lost on the way."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from spillway.local.demo import TRACE, DemoOptions, DemoResult, run_demo
from spillway.local.rig import HOME, WEST

STORY = ("scale_up", "overflow", "drain_plan", "drain", "terminate", "manual")


def seen_first(result: DemoResult, kinds: tuple[str, ...], timeline: str) -> list[float]:
    """When the demo first saw each of ``kinds``, every one of which it must have seen."""
    firsts = [result.first(kind) for kind in kinds]
    assert None not in firsts, (dict(zip(kinds, firsts, strict=True)), timeline)
    return [f for f in firsts if f is not None]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[DemoResult, str]:
    if not TRACE.exists():
        pytest.skip(f"the Philly trace is not at {TRACE}")
    out = io.StringIO()
    chart = tmp_path_factory.mktemp("demo") / "demo.png"
    result = run_demo(DemoOptions.short(chart), out)
    return result, out.getvalue()


def test_the_burst_scales_up_overflows_to_the_secondary_region_then_drains_and_terminates(
    demo: tuple[DemoResult, str],
) -> None:
    result, timeline = demo
    assert result.complete, timeline
    firsts = seen_first(result, STORY, timeline)
    assert firsts == sorted(firsts), (dict(zip(STORY, firsts, strict=True)), timeline)
    # The first scale-up is in the primary region; the overflow lands in the secondary one.
    first_up = next(e.text for e in result.events if e.kind == "scale_up")
    assert f"({HOME})" in first_up
    assert any(WEST in e.text for e in result.events if e.kind == "overflow")
    assert any(e.kind == "outage" for e in result.events)
    # A drain plan that lists both regions lists the overflow region first (the planner's order).
    for e in result.events:
        if e.kind == "drain_plan" and f"({HOME})" in e.text and f"({WEST})" in e.text:
            assert e.text.index(f"({WEST})") < e.text.index(f"({HOME})"), e.text
    for line in ("plan: grow gpu-east (us-east-1)", "InsufficientInstanceCapacity", "overflow region"):
        assert line in timeline, line


def test_every_job_ran_to_completion_exactly_once_and_no_instance_is_unaccounted_for(
    demo: tuple[DemoResult, str],
) -> None:
    result, timeline = demo
    assert result.jobs
    for job in result.jobs:
        assert job.starts == 1 and job.finished_at is not None and not job.lost, (job, timeline)
    assert {job.region for job in result.jobs} == {HOME, WEST}
    assert result.evicted_job_pods == []  # no eviction ever touched a job's pod
    assert result.instances_seen
    # the summary counts agree: every instance a drain terminated was seen joining a group (a gang
    # fleet's instances join by an attach, not a launch)
    assert result.instances_drained <= result.instances_seen, timeline
    leaked = result.instances_seen - result.instances_running - result.instances_drained
    assert leaked == set(), timeline
    assert len(result.instances_running) == 1  # one CPU node left: the operator drained the other


def test_the_chart_is_a_png(demo: tuple[DemoResult, str]) -> None:
    result, _ = demo
    assert result.chart is not None
    assert Path(result.chart).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert result.samples and max(sum(s.ready_gpus.values()) for s in result.samples) >= 16


SCENE = ("scene", "held", "pod_event", "gang_runs", "shortfall", "gang_failed", "gang_cancel", "scene_done")
# The GangLaunch execution's output is read when the demo polls executions: its workers may be seen
# running before that poll, so "gang_launched" is only ordered within the scene, not against "gang_runs".


def test_scene_two_teams_burst_one_is_held_by_its_limit_a_gang_launches_whole_another_leaves_nothing(
    demo: tuple[DemoResult, str],
) -> None:
    result, timeline = demo
    scene = result.scene
    assert scene is not None and scene.done, timeline
    firsts = seen_first(result, SCENE, timeline)
    assert firsts == sorted(firsts), (dict(zip(SCENE, firsts, strict=True)), timeline)
    assert result.first("scene") > result.first("manual")  # type: ignore[operator]
    launched = result.first("gang_launched")
    assert launched is not None and firsts[0] < launched < result.first("scene_done"), timeline  # type: ignore[operator]
    # Both teams' pods appeared at once; team-b's two over its 2-GPU limit were held, the limit named,
    # and kubectl describe shows why; team-a was never held.
    submitted = {
        p.key: p.submitted_at for p in scene.pods if p.namespace == "team-b" or p.name.startswith("a-")
    }
    assert len(submitted) == 7 and len(set(submitted.values())) == 1
    assert sorted(scene.held) == ["team-b/b-2", "team-b/b-3"], scene.held
    for pod, reason in scene.held.items():
        assert "tenant team-b limit nvidia.com/gpu=2 reached" in reason, reason
        assert "(code: tenant-limit)" in scene.events[pod] and "nvidia.com/gpu=2" in scene.events[pod]
    # The atomic gang: one GangLaunch execution succeeded with all three instances; their nodes came up
    # together, one tick apart at most (the scene looks at the Nodes once a tick, while the rig's
    # node-registrar thread adds them one by one, each after a DescribeInstances: on a loaded machine a
    # tick may fall between two of them) and its workers all ran and completed.
    ok = scene.gang_executions["team-a/train-llm"]
    assert ok["status"] == "SUCCEEDED" and len(ok["output"]["instances"]) == 3, ok
    ready = scene.gang_nodes_ready["gpu-gang"]
    assert len(ready) == 3 and ready[-1] - ready[0] < 1.5 * DemoOptions().tick_seconds, ready
    workers = [p for p in scene.pods if p.gang == "train-llm"]
    assert all(p.started_at is not None and p.finished_at is not None for p in workers)
    assert len({p.node for p in workers}) == 3
    # The failed atomic launch: EC2 was short of capacity, so the gang was given back (the execution
    # succeeds: a shortage is nothing to fix), the group was backed off, and from EC2's view none of the
    # gang's instances is running (nor any instance but the last CPU node).
    failed = scene.gang_executions["team-a/train-vision"]
    assert failed["status"] == "SUCCEEDED" and failed["output"]["outcome"] == "given_back", failed
    assert failed["error"] == "CapacityUnavailable", failed
    assert "launched 1 of the gang's 2" in str(failed["cause"])
    assert "backed-off" in scene.gang_waits, scene.gang_waits
    assert len(scene.failed_gang_instances) == 2
    assert scene.failed_gang_instances.isdisjoint(scene.running_at_end)
    assert not [i for i, tags in scene.running_at_end.items() if tags.get("spillway.io/gang")]
    assert len(scene.running_at_end) == 1
    assert not any(p.started_at for p in scene.pods if p.gang == "train-vision")
    # Every team pod ran once and completed; only the failed gang's pods were deleted.
    assert all(p.finished_at is not None for p in scene.pods if p.gang != "train-vision")


NIGHT = ("night", "night_held", "buffer_kept", "dusk", "serving_drain", "nightfall", "train_runs",
         "consolidate_plan", "spot_warning", "consolidated", "spot_drained", "job_done", "night_done")  # fmt: skip


def test_scene_three_dusk_scales_serving_in_training_takes_the_night_an_elastic_job_shrinks_spot_is_drained(
    demo: tuple[DemoResult, str],
) -> None:
    result, timeline = demo
    night = result.night
    assert night is not None and night.done, timeline
    seen_first(result, NIGHT, timeline)
    # The spot drain runs beside the consolidation's: only its warning follows the consolidation plan.
    order = [k for k in NIGHT if k not in ("consolidated", "spot_drained")]
    at = {k: result.first(k) for k in NIGHT}
    assert [at[k] for k in order] == sorted(at[k] for k in order), (at, timeline)  # type: ignore[type-var]
    assert at["consolidate_plan"] < at["consolidated"] < at["job_done"]  # type: ignore[operator]
    assert at["spot_warning"] < at["spot_drained"] < at["job_done"]  # type: ignore[operator]
    assert result.first("night") > result.first("scene_done")  # type: ignore[operator]
    # (1) By day the buffer held two serving nodes; after dusk scale-down drained exactly those.
    assert len(night.buffer_kept) == 2 and all("config:serving" in r for r in night.buffer_kept.values())
    assert set(night.serving_drains) == set(night.buffer_kept), night.serving_drains
    # (2) By day training was held by its limit, naming it; at night all three pods ran.
    assert sorted(night.held_by_day) == ["train/train-0", "train/train-1", "train/train-2"]
    assert all("tenant train limit nvidia.com/gpu=0 reached" in r for r in night.held_by_day.values())
    # (3) One elastic node consolidated: its two workers (the room above the minimum) evicted through
    # the PDB and the instance terminated; the other node kept; the job never below its minimum.
    drain = night.consolidation
    assert drain["code"] == "consolidation" and len(drain["pods"]) == 2, drain
    assert all(p.startswith("nlp/bert-worker-") for p in drain["pods"])
    # both fit on the other elastic node: the plan moves them there and the job gives up none (it is
    # not held shrunk); the demo has no training operator to create them again, so it runs on at its
    # minimum
    assert "fit on ip-" in drain["reason"] and "gives up" not in drain["reason"], drain
    assert f"fit on {drain['node']}" not in drain["reason"]
    assert night.consolidated["outcome"] == "terminated" and night.consolidated["evicted_count"] == 2
    assert night.min_workers_running == 2
    evicted_workers = [p for p in night.pods if p.role == "worker" and p.evicted]
    assert sorted(p.key for p in evicted_workers) == sorted(drain["pods"])
    # (4) The spot warning reached the queue and the interrupt function; the DrainNode terminated the
    # node inside the deadline, its crawlers moved and were replaced.
    spot = night.interrupt
    assert spot["messages"] == 1 and spot["status"] == "SUCCEEDED" and spot["outcome"] == "terminated", spot
    assert spot["took"] < 90
    assert sorted(spot["evicted"]) == ["crawl/crawl-0", "crawl/crawl-1"]
    assert spot["instance"] in night.drained_instances
    # (5) Nothing lost: every pod that may not move ran once and completed, none was evicted; every
    # instance of the scene was terminated by a drain, none is left running.
    fixed = [p for p in night.pods if not p.movable]
    assert len(fixed) == 5 and all(
        p.starts == 1 and p.finished_at is not None and not p.evicted for p in fixed
    )
    evicted = {pod for pod, status in night.evictions if status == 201}
    assert evicted == {p.name for p in night.pods if p.evicted}, night.evictions
    assert not evicted & {p.name for p in fixed}
    assert night.instances and set(night.instances) <= night.drained_instances, night.instances
    assert not night.running_at_end
