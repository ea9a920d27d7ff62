"""``spillway demo`` in its short form, end to end (moto, the real handlers and state machines, the
Kubernetes API emulator): its timeline tells the story in order, and nothing is lost on the way."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from spillway.local.demo import HOME, TRACE, WEST, DemoOptions, DemoResult, run_demo

STORY = ("scale_up", "overflow", "drain_plan", "drain", "terminate", "manual")


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
    firsts = [result.first(kind) for kind in STORY]
    assert None not in firsts, (dict(zip(STORY, firsts, strict=True)), timeline)
    assert firsts == sorted(firsts), (dict(zip(STORY, firsts, strict=True)), timeline)  # type: ignore[type-var]
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
    leaked = result.instances_seen - result.instances_running - result.instances_drained
    assert leaked == set(), timeline
    assert len(result.instances_running) == 1  # one CPU node left: the operator drained the other


def test_the_chart_is_a_png(demo: tuple[DemoResult, str]) -> None:
    result, _ = demo
    assert result.chart is not None
    assert Path(result.chart).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert result.samples and max(sum(s.ready_gpus.values()) for s in result.samples) >= 16
