"""The overflow re-plan (``next_round``) within its Lambda invocation's time.

The re-plan re-read every region's groups with no bound: a slow or unreachable region's calls may each
take their worst case (49 s at the defaults), and Lambda stopped the step at the scale function's
Timeout (``Sandbox.Timedout``), which NextRound does not retry: the execution ended ReplanFailed, and
a commit cut there could land with nobody to raise what it recorded. Now a region not read in the time
the step has (less what its commit needs) is unread, its groups carried from the snapshot as observe
carries a failed read, and no write starts without time for it (AwsUnavailable, retried, instead).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from fakes import FakeCloud, FakeLedger, FakeSnapshots
from plan_world import NOW, World
from test_scale_replan_unread import east_backed_off

from spillway.act import scale
from spillway.act.deadline import Deadline
from spillway.act.scale import ScaleSteps
from spillway.errors import AwsUnavailable
from spillway.model.calltime import REPLAN_ROOM_SECONDS, STEP_MARGIN_SECONDS
from spillway.model.nodegroup import NodeGroup
from spillway.model.snapshot import Snapshot
from spillway.planner import plan as run_planner

EAST, WEST = "us-east-1", "us-west-2"
CALL = 0.5  # one AWS call at its longest, in these tests


class SlowCloud(FakeCloud):
    """Reads ``slow`` regions' groups only once ``release`` is set (a region whose endpoint hangs);
    nothing else is slow."""

    def __init__(self, *slow: str) -> None:
        super().__init__(regions=(EAST, WEST), cluster="ml")
        self.slow = set(slow)
        self.release = threading.Event()

    def node_groups_in(
        self, region: str, reserve: Mapping[str, int], now: datetime | None = None
    ) -> list[NodeGroup]:
        if region in self.slow:
            self.release.wait(timeout=3)
        return super().node_groups_in(region, reserve, now)


class Clock:
    """The invocation's remaining seconds, as a test sets them."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self) -> float:
        return self.seconds


@pytest.fixture
def cloud() -> Iterator[SlowCloud]:
    made = SlowCloud()
    yield made
    made.release.set()  # a read left behind ends with the test


def steps_for(cloud: SlowCloud, remaining: Clock) -> tuple[ScaleSteps, FakeLedger, str]:
    """Round 1 backed gpu-east off (two pods pending, gpu-west empty); the re-plan runs 90 s after the
    snapshot, within ``remaining``."""
    w = World(regions=(EAST, WEST))
    w.group("gpu-east", "g5.xlarge", region=EAST)
    w.group("gpu-west", "g5.xlarge", region=WEST)
    w.gpu_pods("train", 2, gpus=1, cpu="2", memory="8Gi")
    cluster, groups, _, _ = w.parsed()
    now = NOW + timedelta(seconds=90)
    snapshots = FakeSnapshots()
    ref = snapshots.add(Snapshot.build(cluster, groups, NOW))
    cloud.node_groups_by_region = {r: [replace(g, read_at=None) for g in groups if g.region == r]
                                   for r in (EAST, WEST)}  # fmt: skip
    steps, ledger = east_backed_off(cloud, snapshots, ref.key, now, Deadline(remaining, CALL))
    return steps, ledger, ref.key


def event(key: str, *results: dict[str, Any]) -> dict[str, Any]:
    backed_off = {"group": "gpu-east", "region": EAST, "outcome": "backed_off", "new_nodes": 2}
    return {"action": "next_round", "cluster": "ml", "plan_id": "p1", "snapshot_key": key, "round": 1,
            "max_rounds": 3, "rounds": [], "results": list(results) or [backed_off]}  # fmt: skip


def test_a_region_not_read_in_time_is_unread_and_the_replan_goes_on(
    cloud: SlowCloud, caplog: pytest.LogCaptureFixture
) -> None:
    """us-west-2 hangs: the step waits for it no longer than its time less its commit, and plans with
    us-west-2 unread (its groups carried from the snapshot, not grown), committing in time."""
    cloud.slow = {WEST}
    # the state's read, the plan's room, then CALL s to read in
    remaining = Clock(STEP_MARGIN_SECONDS + 2 * CALL + REPLAN_ROOM_SECONDS)
    steps, ledger, key = steps_for(cloud, remaining)

    started = time.monotonic()
    out = steps.next_round(event(key))

    assert time.monotonic() - started < 2.0  # the hung read was not waited for (it would end at 3 s)
    assert "the Auto Scaling groups of us-west-2 not read in time" in caplog.text
    (record,) = ledger.plans.values()
    assert record.plan["scale_up"] == []  # gpu-west, carried, is not grown
    assert all("neither grown nor shrunk" in p["reason"] for p in record.plan["pending"]), record.plan
    assert out["done"] is True and out["groups"] == [], out


def test_every_region_not_read_in_time_fails_the_step_before_any_write(cloud: SlowCloud) -> None:
    cloud.slow = {EAST, WEST}
    steps, ledger, key = steps_for(cloud, Clock(STEP_MARGIN_SECONDS + 2 * CALL + REPLAN_ROOM_SECONDS))

    with pytest.raises(AwsUnavailable, match="not read in time"):
        steps.next_round(event(key))

    assert ledger.plans == {} and ledger.stored.version == 2


def test_no_commit_is_started_when_the_replan_left_no_time_for_it(
    cloud: SlowCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reads answered in time, but the plan took the time the commit needed: the step fails with
    AwsUnavailable (retried by NextRound, fresh) and writes nothing, where Lambda would have cut the
    commit."""
    remaining = Clock(60.0)

    def slow_plan(*args: Any, **kwargs: Any) -> Any:
        remaining.seconds = STEP_MARGIN_SECONDS + CALL / 2
        return run_planner(*args, **kwargs)

    monkeypatch.setattr(scale, "run_planner", slow_plan)
    steps, ledger, key = steps_for(cloud, remaining)

    with pytest.raises(AwsUnavailable, match="not started"):
        steps.next_round(event(key))

    assert ledger.plans == {} and ledger.stored.version == 2
    assert ledger.stored.state.raises == {}


def test_no_back_off_is_written_without_time_for_it(cloud: SlowCloud) -> None:
    """A group whose raise AWS refused for good is backed off at next_round: a write, started only with
    time for it."""
    steps, ledger, key = steps_for(cloud, Clock(STEP_MARGIN_SECONDS + CALL / 2))
    refused = {
        "group": "gpu-east",
        "region": EAST,
        "outcome": "error",
        "error": "AwsError",
        "cause": "denied",
    }

    with pytest.raises(AwsUnavailable, match="not started"):
        steps.next_round(event(key, refused))

    assert ledger.backoffs == [] and ledger.plans == {} and ledger.stored.version == 2


class LiveClock(Clock):
    """The invocation's remaining seconds running down as the step runs, as Lambda's context has them."""

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)
        self.started = time.monotonic()

    def __call__(self) -> float:
        return self.seconds - (time.monotonic() - self.started)


def test_a_region_not_read_in_time_leaves_the_replan_time_to_plan_and_commit(
    cloud: SlowCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The invocation's time runs on while the step waits for a hung region: the wait ends with the
    plan's room left as well as its commit's, and the re-plan goes on with us-west-2 unread, where a
    wait to the last moment the commit fits left the commit no time once the step had planned
    (AwsUnavailable, and every retry of NextRound the same while the region hangs: ReplanFailed)."""
    cloud.slow = {WEST}
    monkeypatch.setattr(scale, "REPLAN_ROOM_SECONDS", 1.0, raising=False)  # the plan's room, in this test
    remaining = LiveClock(STEP_MARGIN_SECONDS + 2 * CALL + 1.0)  # the state's read, its room, CALL s to read
    steps, ledger, key = steps_for(cloud, remaining)
    remaining.started = time.monotonic()

    out = steps.next_round(event(key))

    (record,) = ledger.plans.values()
    assert record.plan["scale_up"] == [], record.plan  # gpu-west, carried, is not grown
    assert out["done"] is True and out["groups"] == [], out


def test_no_state_read_is_started_without_time_for_it_and_the_commit(cloud: SlowCloud) -> None:
    """The state is read before the groups, only with time for it and the commit after it: the step
    fails with AwsUnavailable (retried, fresh) before reading anything, where a read cut by Lambda's
    Timeout ended the execution."""
    steps, ledger, key = steps_for(cloud, Clock(STEP_MARGIN_SECONDS + 1.5 * CALL))

    with pytest.raises(AwsUnavailable, match="Query state of ml not started"):
        steps.next_round(event(key))

    assert ledger.loads == 0 and cloud.called("node_groups_in") == [] and ledger.plans == {}


def test_a_region_read_given_up_does_nothing_when_the_next_invocation_thaws_it(cloud: SlowCloud) -> None:
    """Lambda freezes a thread still running when the handler returns and resumes it in the next
    invocation of the container: the us-west-2 read the first re-plan gave up went on there, calling
    AWS in that invocation's time. Cut, it reads nothing more once its hung call returns."""
    cloud.slow = {WEST}
    steps, _, key = steps_for(cloud, Clock(STEP_MARGIN_SECONDS + 2 * CALL + REPLAN_ROOM_SECONDS))
    steps.next_round(event(key))  # the first invocation: us-west-2 unread, the step ends
    assert cloud.called("node_groups_in") == [(EAST,)]

    # the next invocation in the same process: us-west-2 answers at once now, and the hung read resumes
    cloud.slow = set()
    cloud.release.set()
    steps, _, key = steps_for(cloud, Clock(60.0))
    steps.next_round(event(key))
    for thread in threading.enumerate():
        if thread.name.startswith("groups-read"):
            thread.join(timeout=5)

    assert cloud.called("node_groups_in").count((WEST,)) == 1  # the second re-plan's own


def test_each_query_of_the_state_load_starts_only_with_time_for_it_and_the_commit(
    cloud: SlowCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state load is three Queries (the state's partition, the drains', the back-offs'; more with
    pages), each of which may take a call's worst case: counted as one, its last ones could start with
    no time left for themselves and the commit, and Lambda's Timeout cut the step (Sandbox.Timedout,
    not retried). Each query now starts only with time for it and the commit (AwsUnavailable, unsent,
    which NextRound retries in a fresh invocation)."""
    remaining = Clock(STEP_MARGIN_SECONDS + 3.5 * CALL)  # two queries and the commit, not three
    steps, ledger, key = steps_for(cloud, remaining)
    load = ledger.load
    started: list[float] = []

    def timed_load(cluster: str, now: datetime | None = None, before_call: Any = None) -> Any:
        def query(what: str) -> None:  # each query takes CALL s, at its longest
            if before_call is not None:
                before_call(what)
            started.append(remaining())
            remaining.seconds -= CALL

        return load(cluster, now, before_call=query)

    monkeypatch.setattr(ledger, "load", timed_load)

    with pytest.raises(AwsUnavailable, match="Query state of ml#backoffs not started"):
        steps.next_round(event(key))

    assert len(started) == 2 and min(started) >= STEP_MARGIN_SECONDS + 2 * CALL, started
    assert cloud.called("node_groups_in") == [] and ledger.plans == {} and ledger.stored.version == 2
