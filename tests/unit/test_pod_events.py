"""Pod Events of a committed plan (spillway.act.events): what they say, how few, and when not.

The pure part (plan_events) runs on plans the real planner makes of plan_world clusters; the cycle
(run_plan with a cluster) runs on the recording fakes, as test_planning does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from fakes import FakeCluster, FakeLedger, FakeSnapshots, FakeWorkflows
from plan_world import NOW, World

from spillway.act.events import (
    NOT_TRIGGERED,
    TRIGGERED,
    EventPolicy,
    PodEvent,
    plan_events,
    post_events,
)
from spillway.act.planning import PlanSettings, SnapshotRef, run_plan
from spillway.adapters.state_store import Backoff, merge_backoffs
from spillway.config import PlannerConfig
from spillway.errors import KubeAuthError, KubeUnavailable, PodNotFound, StateConflict
from spillway.local import objects as o
from spillway.model.act import StoredState
from spillway.model.cluster import PodInfo
from spillway.model.k8s import Pod
from spillway.model.snapshot import Snapshot
from spillway.model.state import EventMark, GroupState, State
from spillway.ports import ERRORS

UP_ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:spillway-ScaleUpStateMachine"
DOWN_ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:spillway-ScaleDownStateMachine"


def gpu_world(pods: int = 3, *, max_size: int = 8) -> World:
    """A busy CPU node; empty GPU groups in two regions; ``pods`` pending 1-GPU pods, the last oldest."""
    w = World()
    [busy] = w.group("general", "m5.2xlarge", nodes=1)
    w.pods("web", 1, cpu="6", memory="20Gi", node_name=busy, owner=("ReplicaSet", "web"))
    w.group("gpu-east", "g5.xlarge", max_size=max_size, gpu_taint=True, desired=0)
    w.group("gpu-west", "g5.xlarge", region="us-west-2", max_size=max_size, gpu_taint=True, desired=0)
    for i in range(pods):
        w.gpu_pods(
            f"train{i:02d}", 1, gpus=1, cpu="3", memory="12Gi", created=NOW - timedelta(minutes=10 + i)
        )
    return w


def events_of(
    w: World, ledger: dict[str, EventMark] | None = None, now: datetime = NOW, **policy: Any
) -> Any:
    snapshot, groups, cfg, state = w.parsed()
    from spillway.planner import plan

    result = plan(snapshot, groups, cfg, state, now)
    return plan_events(result, snapshot, groups, ledger or {}, EventPolicy(**policy), now)


# --- what the Events say ------------------------------------------------------------------------


def test_each_pod_of_a_scale_up_hears_which_group_grows_from_what_to_what() -> None:
    batch = events_of(gpu_world())

    assert [e.pod for e in batch.events] == [f"default/train{i:02d}-0" for i in (2, 1, 0)]
    for e in batch.events:
        assert e.reason == TRIGGERED and e.type == "Normal"
        assert e.message == "pod triggered scale-up: [{gpu-east (us-east-1) 0->3 (max: 8)}]"
        assert e.uid == o.pod(e.name)["metadata"]["uid"]  # kubectl describe pod selects on it
    assert set(batch.ledger) == {e.pod for e in batch.events}


def test_a_pod_no_group_can_run_hears_why_with_the_code() -> None:
    w = gpu_world(0)
    w.pods("huge", 1, cpu="500", memory="2Gi")

    [event] = events_of(w).events

    assert (event.pod, event.reason) == ("default/huge-0", NOT_TRIGGERED)
    assert event.message.startswith("pod didn't trigger scale-up: ")
    assert event.message.endswith("(code: no-group-fits)")


def test_pods_held_back_by_max_size_or_back_off_hear_that() -> None:
    at_max = gpu_world(1, max_size=0)
    [event] = events_of(at_max).events
    assert event.message.endswith("(code: max-size)")

    backed_off = gpu_world(1)
    until = (NOW + timedelta(minutes=10)).isoformat()
    backed_off.state["groups"] = {
        g: {"backoff_until": until, "reason": "ICE"} for g in ("gpu-east", "gpu-west")
    }
    [event] = events_of(backed_off).events
    assert event.reason == NOT_TRIGGERED and event.message.endswith("(code: backed-off)")


def test_a_pod_that_fits_free_room_gets_no_event() -> None:
    w = World()
    w.group("general", "m5.2xlarge", nodes=1)
    w.pods("small", 2, cpu="1", memory="1Gi")

    batch = events_of(w)

    assert batch.events == () and batch.ledger == {}


def test_a_pod_that_fits_by_preempting_expendable_pods_hears_where_and_whom() -> None:
    """No node is launched for it: kube-scheduler is to preempt the backfill pod; if it never does (a
    pod affinity to its victim, another scheduler), the pod tells why nothing came."""
    w = World(regions=("us-east-1",))
    [node] = w.group("general", "m5.2xlarge", nodes=1)
    w.items.append(o.pod("backfill-0", cpu="6", node_name=node, priority=-100, owner=("ReplicaSet", "bf")))
    w.pods("train", 1, cpu="4", memory="2Gi")

    [event] = events_of(w).events

    assert (event.pod, event.reason) == ("default/train-0", NOT_TRIGGERED)
    assert node in event.message and "default/backfill-0" in event.message
    assert event.message.endswith("(code: fits-by-preemption)")


# --- how few --------------------------------------------------------------------------------------


def test_a_burst_posts_at_most_the_cap_oldest_pending_first_and_the_rest_on_later_plans() -> None:
    w = gpu_world(10)
    first = events_of(w, max_per_plan=3)
    assert [e.name for e in first.events] == ["train09-0", "train08-0", "train07-0"]  # waited longest
    assert first.capped == 7

    second = events_of(w, first.ledger, NOW + timedelta(minutes=1), max_per_plan=3)
    assert [e.name for e in second.events] == ["train06-0", "train05-0", "train04-0"]
    assert second.suppressed == 3 and len(second.ledger) == 6


def test_the_same_thing_is_not_said_again_within_the_window_but_a_change_is_said_at_once() -> None:
    w = gpu_world(2)
    first = events_of(w)
    again = events_of(w, first.ledger, NOW + timedelta(minutes=9))
    assert again.events == () and again.suppressed == 2 and again.ledger == first.ledger

    later = events_of(w, first.ledger, NOW + timedelta(minutes=10))
    assert [e.reason for e in later.events] == [TRIGGERED, TRIGGERED]

    # the groups fill up: a new reason, told at once although the window has not passed
    changed = gpu_world(2, max_size=0)
    now = NOW + timedelta(minutes=1)
    assert [e.reason for e in events_of(changed, first.ledger, now).events] == [NOT_TRIGGERED] * 2


def test_the_ledger_forgets_pods_no_longer_pending_and_keeps_only_the_newest_marks() -> None:
    w = gpu_world(2)
    ledger = {
        "default/train00-0": EventMark(fingerprint="old", posted_at=NOW - timedelta(minutes=1)),
        "default/gone-0": EventMark(fingerprint="old", posted_at=NOW - timedelta(minutes=1)),
    }
    batch = events_of(w, ledger)
    assert set(batch.ledger) == {"default/train00-0", "default/train01-0"}
    assert all(m.posted_at == NOW for m in batch.ledger.values())

    small = events_of(gpu_world(5), ledger_size=2)
    assert len(small.events) == 5 and len(small.ledger) == 2


def test_posting_nothing_when_the_cap_is_zero() -> None:
    batch = events_of(gpu_world(), max_per_plan=0)
    assert batch.events == () and batch.ledger == {} and batch.capped == 3


# --- the ledger in the state --------------------------------------------------------------------


def test_the_ledger_travels_in_the_state_wire_form_and_survives_merged_back_offs() -> None:
    state = State(events={"ml/a": EventMark(fingerprint="0123abcd", posted_at=NOW)})
    wire = json.loads(json.dumps(state.to_wire()))
    assert wire["events"] == {"ml/a": {"fingerprint": "0123abcd", "posted_at": "2026-11-02T12:00:00Z"}}
    assert State.model_validate(wire) == state
    assert "events" not in State().to_wire()  # an empty ledger leaves the wire form as it was

    merged = merge_backoffs(state, [Backoff("gpu-east", NOW + timedelta(minutes=5), "ICE")])
    assert merged.events == state.events and set(merged.groups) == {"gpu-east"}


def test_the_snapshot_keeps_the_uid_of_pending_pods_only() -> None:
    pending = PodInfo.from_pod(Pod.model_validate(o.pod("p", "ml")))
    running = PodInfo.from_pod(Pod.model_validate(o.pod("r", "ml", node_name="n1")))
    assert pending.uid == o.pod("p", "ml")["metadata"]["uid"] and running.uid == ""
    assert PodInfo.from_dict(pending.to_dict()) == pending
    assert "uid" not in running.to_dict()


# --- the cycle: commit first, then post -----------------------------------------------------------


@dataclass
class Rig:
    snapshots: FakeSnapshots = field(default_factory=FakeSnapshots)
    ledger: FakeLedger = field(default_factory=FakeLedger)
    executions: FakeWorkflows = field(default_factory=FakeWorkflows)
    cluster: FakeCluster = field(default_factory=FakeCluster)
    policy: EventPolicy = field(default_factory=EventPolicy)
    built: int = 0  # times the Kubernetes client was asked for

    def kube(self) -> FakeCluster:
        self.built += 1
        return self.cluster

    def run(self, ref: SnapshotRef, now: datetime = NOW + timedelta(seconds=20)) -> Any:
        settings = PlanSettings(
            planner=PlannerConfig(cluster="ml", regions=("us-east-1", "us-west-2")),
            scale_up_arn=UP_ARN,
            scale_down_arn=DOWN_ARN,
            events=self.policy,
        )
        return run_plan(
            ref,
            snapshots=self.snapshots,
            ledger=self.ledger,
            executions=self.executions,
            settings=settings,
            now=now,
            cluster=self.kube,
        )


def snapshot_of(w: World, taken_at: datetime = NOW) -> Snapshot:
    cluster, groups, _, _ = w.parsed()
    return Snapshot.build(cluster, groups, taken_at)


def test_the_plan_posts_its_events_on_the_pods_after_committing_the_ledger() -> None:
    rig = Rig()
    ref = rig.snapshots.add(snapshot_of(gpu_world()))

    outcome = rig.run(ref)

    assert outcome.status == "acted" and rig.ledger.commits == 1
    assert [(e["kind"], e["namespace"], e["name"], e["reason"]) for e in rig.cluster.posted] == [
        ("Pod", "default", f"train{i:02d}-0", TRIGGERED) for i in (2, 1, 0)
    ]
    assert all(e["uid"] == o.pod(e["name"])["metadata"]["uid"] for e in rig.cluster.posted)
    assert outcome.to_dict()["events"] == {
        "posted": 3, "failed": 0, "skipped": 0, "errors": [], "suppressed": 0, "capped": 0,
    }  # fmt: skip
    assert set(rig.ledger.stored.state.events) == {f"default/train{i:02d}-0" for i in range(3)}

    # a minute later, the pods still pending and the raise not in the snapshot yet: it is assumed under
    # way (State.raises), the pods fit on it, nothing is scaled or said again
    rig.ledger.stored = replace(rig.ledger.stored, executions=())
    later = rig.snapshots.add(snapshot_of(gpu_world(), NOW + timedelta(minutes=1)))
    second = rig.run(later, now=NOW + timedelta(minutes=1, seconds=5))
    assert (
        len(rig.cluster.posted) == 3 and second.events["posted"] == 0 and second.summary.scale_up_nodes == 0
    )
    # six minutes later the raise never showed (past scale_up_claim_minutes): scaled for again, but the
    # same Event inside the window is not posted twice
    rig.ledger.stored = replace(rig.ledger.stored, executions=())
    much_later = rig.snapshots.add(snapshot_of(gpu_world(), NOW + timedelta(minutes=6)))
    third = rig.run(much_later, now=NOW + timedelta(minutes=6, seconds=5))
    assert third.summary.scale_up_nodes == 3
    assert len(rig.cluster.posted) == 3 and third.events["suppressed"] == 3


def test_a_planner_that_loses_the_commit_race_posts_nothing() -> None:
    rig = Rig()
    w = gpu_world()
    mine = rig.snapshots.add(snapshot_of(w))
    theirs = rig.snapshots.add(snapshot_of(w, NOW + timedelta(seconds=1)))
    other = Rig(snapshots=rig.snapshots, ledger=rig.ledger, executions=rig.executions)
    rig.ledger.before_commit = lambda: other.run(theirs)

    with pytest.raises(StateConflict):
        rig.run(mine)

    assert rig.built == 0 and rig.cluster.posted == []
    assert len(other.cluster.posted) == 3  # the winner told the pods, once


def test_a_plan_with_nothing_to_say_never_builds_a_kubernetes_client() -> None:
    rig = Rig()
    w = World()
    [node] = w.group("general", "m5.2xlarge", nodes=1)
    w.pods("web", 1, cpu="2", memory="2Gi", node_name=node, owner=("ReplicaSet", "web"))  # no taint to set
    ref = rig.snapshots.add(snapshot_of(w))

    outcome = rig.run(ref)

    assert rig.built == 0 and outcome.events["posted"] == 0 and outcome.soft_taints is None


def test_an_api_that_takes_no_events_fails_no_plan() -> None:
    rig = Rig()
    rig.cluster.fail("record_event", KubeUnavailable("record event: 503 after 4 attempts"))
    ref = rig.snapshots.add(snapshot_of(gpu_world()))

    outcome = rig.run(ref)

    assert outcome.status == "acted" and rig.executions.started  # the plan stands
    assert len(rig.cluster.called("record_event")) == 1  # it stopped at the first sign
    assert (outcome.events["posted"], outcome.events["failed"], outcome.events["skipped"]) == (0, 1, 2)
    assert "KubeUnavailable" in outcome.events["errors"][0]


def pod_events(n: int) -> list[PodEvent]:
    return [PodEvent("ml", f"p{i}", None, TRIGGERED, "m", f"fp{i}") for i in range(n)]


@pytest.mark.parametrize("error", ERRORS["Cluster"], ids=lambda e: e.__name__)
def test_posting_raises_nothing_whatever_the_cluster_port_raises(error: type[Exception]) -> None:
    cluster = FakeCluster()
    cluster.fail("record_event", error("refused"))

    result = post_events(lambda: cluster, pod_events(3), budget_seconds=5)

    stops = error in (KubeUnavailable, KubeAuthError)
    assert (result.posted, result.failed, result.skipped) == ((0, 1, 2) if stops else (0, 3, 0))


def test_one_refused_event_does_not_stop_the_others() -> None:
    cluster = FakeCluster()
    cluster.fail("record_event", PodNotFound("namespace gone"), times=1)

    result = post_events(lambda: cluster, pod_events(3), budget_seconds=5)

    assert (result.posted, result.failed) == (2, 1) and [e["name"] for e in cluster.posted] == ["p1", "p2"]


def test_posting_stops_when_its_time_budget_is_spent() -> None:
    cluster = FakeCluster()
    ticks = iter(range(100))

    result = post_events(lambda: cluster, pod_events(10), budget_seconds=3, clock=lambda: float(next(ticks)))

    assert (result.posted, result.skipped) == (2, 8) and "budget" in result.errors[-1]


def test_no_kubernetes_client_skips_every_event() -> None:
    def broken() -> FakeCluster:
        raise KubeAuthError("DescribeCluster: access denied")

    result = post_events(broken, pod_events(4), budget_seconds=5)

    assert (result.posted, result.skipped) == (0, 4) and "KubeAuthError" in result.errors[0]


def test_the_ledger_committed_with_a_back_off_in_the_state_is_kept() -> None:
    """The stored state merges back-off items in on load; the ledger must come through that."""
    rig = Rig()
    marks = {"default/train00-0": EventMark(fingerprint="x", posted_at=NOW)}
    rig.ledger.stored = StoredState(
        state=State(
            groups={"gpu-west": GroupState(backoff_until=NOW + timedelta(minutes=5), reason="ICE")},
            events=marks,
        )
    )
    ref = rig.snapshots.add(snapshot_of(gpu_world(1)))

    rig.run(ref)

    # a new fingerprint (the scale-up) replaced the old mark, posted now
    assert rig.ledger.stored.state.events["default/train00-0"].fingerprint != "x"
