"""The plan cycle (spillway.act.planning) with fake stores and a fake Step Functions: fast, no moto.

The fakes keep the contracts of the real adapters: the ledger's commit is conditional on the version
and writes the plan record with the state (all or nothing); the execution starter refuses a second
start under a used name (``started=False``), as Step Functions does.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeCloud, FakeCluster, FakeLedger, FakeSnapshots, FakeWorkflows, unschedulable_at_terminate
from kubernetes.client import CoreV1Api
from plan_world import NOW, PLAN_DRAIN_CORDON, World

from spillway.act.claims import RAISE_PREFIX
from spillway.act.drain import DRAIN_LINE_BYTES, parse_request
from spillway.act.planning import (
    AFTER_POLL_SECONDS,
    PlanSettings,
    SnapshotRef,
    drain_item,
    execution_raises,
    plan_id_for,
    run_plan,
    summarize,
)
from spillway.act.scale import ScaleSteps, _owner_id, parse_step
from spillway.adapters.kube import KubeClient
from spillway.adapters.sfn import NAME_PATTERN
from spillway.adapters.store import snapshot_inserts
from spillway.config import PlannerConfig
from spillway.errors import (
    AsgLimitExceeded,
    AwsThrottled,
    AwsUnavailable,
    ConfigurationError,
    KubeConflict,
    KubeUnavailable,
    NodeNotFound,
    SnapshotNotFound,
    StaleSnapshot,
    StateConflict,
)
from spillway.local import objects as o
from spillway.local.kubeapi import KubeApiServer
from spillway.model.act import StoredState
from spillway.model.cluster import NodeInfo, cordon_digest
from spillway.model.history import MAX_SCALE_UP_GROUPS
from spillway.model.k8s import CORDONED_BY_SPILLWAY, DRAINING_TAINT
from spillway.model.nodegroup import NodeGroup, with_zone_ids
from spillway.model.snapshot import Snapshot
from spillway.model.state import GroupState, RaiseState, State
from spillway.planner import codes
from spillway.planner import plan as run_planner
from spillway.planner.core import UNCORDON_REASON
from spillway.planner.types import (
    Drain,
    GangLaunch,
    GangOrphan,
    PendingPod,
    ScaleUp,
    ScalingPlan,
    SoftTaint,
    Unregistered,
)

UP_ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:spillway-ScaleUpStateMachine"
DOWN_ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:spillway-ScaleDownStateMachine"


def settings(**kw: Any) -> PlanSettings:
    base = PlanSettings(
        planner=PlannerConfig(cluster="ml", regions=("us-east-1", "us-west-2")),
        scale_up_arn=UP_ARN,
        scale_down_arn=DOWN_ARN,
        poll_seconds=1,
        launch_timeout_seconds=30,
    )
    return replace(base, **kw)


def gpu_world() -> World:
    """A CPU group with one busy node; GPU groups in both regions, empty; 3 pending 1-GPU pods."""
    w = World()
    [busy] = w.group("general", "m5.2xlarge", nodes=1)
    w.pods("web", 1, cpu="6", memory="20Gi", node_name=busy, owner=("ReplicaSet", "web"))
    w.group("gpu-east", "g5.xlarge", max_size=8, gpu_taint=True, desired=0)
    w.group("gpu-west", "g5.xlarge", region="us-west-2", max_size=8, gpu_taint=True, desired=0)
    w.gpu_pods("train", 3, gpus=1, cpu="3", memory="12Gi")
    return w


def snapshot_of(w: World, taken_at: datetime = NOW) -> Snapshot:
    cluster, groups, _, _ = w.parsed()
    return Snapshot.build(cluster, groups, taken_at)


@dataclass
class Rig:
    snapshots: FakeSnapshots = field(default_factory=FakeSnapshots)
    ledger: FakeLedger = field(default_factory=FakeLedger)
    executions: FakeWorkflows = field(default_factory=FakeWorkflows)
    settings: PlanSettings = field(default_factory=settings)

    def run(self, ref: SnapshotRef, now: datetime = NOW + timedelta(seconds=20)) -> Any:
        return run_plan(
            ref,
            snapshots=self.snapshots,
            ledger=self.ledger,
            executions=self.executions,
            settings=self.settings,
            now=now,
        )


# --- behaviour ----------------------------------------------------------------------------------


def test_a_gpu_burst_commits_the_plan_and_starts_one_scale_up_named_after_it() -> None:
    rig = Rig()
    ref = rig.snapshots.add(snapshot_of(gpu_world()))

    outcome = rig.run(ref)

    assert outcome.status == "acted"
    assert outcome.plan_id == plan_id_for("ml", ref.key)
    [request] = rig.executions.requests
    assert request.kind == "scale_up" and request.state_machine_arn == UP_ARN
    assert request.name == f"up-{outcome.plan_id}"
    assert request.input["groups"] == [
        {"group": "gpu-east", "region": "us-east-1", "from": 0, "to": 3, "grow": True, "new_nodes": 3,
         "pods": 3, "uncordon": [], "reasons": {}},
    ]  # fmt: skip
    assert request.input["poll_seconds"] == 1 and request.input["launch_timeout_seconds"] == 30
    assert (request.input["round"], request.input["max_rounds"], request.input["done"]) == (1, 3, False)
    # The plan record (every action and reason, the snapshot it came from) went in with the state.
    record = rig.ledger.plans[ref.key]
    assert record.snapshot_key == ref.key and record.plan_id == outcome.plan_id
    assert record.plan["scale_up"][0]["reason"].startswith("3 pending pod(s) need 3 new g5.xlarge nodes")
    assert record.executions == (request.name,)
    assert record.summary["scale_up_nodes"] == 3 and record.summary["unplaceable"] == 0
    assert rig.ledger.stored.version == outcome.state_version == 1
    assert rig.ledger.stored.snapshot_key == ref.key
    assert outcome.summary.scale_up_nodes == 3 and outcome.summary.overflow_nodes == 0


def test_a_snapshot_older_than_the_limit_is_refused_and_nothing_is_written_or_started() -> None:
    w = gpu_world()
    [general] = [n["metadata"]["name"] for n in w.items if n["kind"] == "Node"]
    w.idle_since(general, 60)  # would be drained on fresh data
    rig = Rig()
    ref = rig.snapshots.add(snapshot_of(w))

    with pytest.raises(StaleSnapshot, match="181s old"):
        rig.run(ref, now=NOW + timedelta(seconds=181))

    assert rig.ledger.commits == 0 and rig.ledger.plans == {}
    assert rig.executions.requests == []
    assert rig.run(ref, now=NOW + timedelta(seconds=180)).status == "acted"  # the limit itself is fine


def test_the_same_snapshot_twice_plans_once_and_the_duplicate_start_is_a_no_op() -> None:
    rig = Rig()
    ref = rig.snapshots.add(snapshot_of(gpu_world()))

    first = rig.run(ref)
    second = rig.run(ref, now=NOW + timedelta(seconds=40))

    assert (first.status, second.status) == ("acted", "resumed")
    assert rig.ledger.commits == 1 and len(rig.ledger.plans) == 1
    assert [e.started for e in first.executions] == [True]
    assert [e.started for e in second.executions] == [False]  # Step Functions refused the used name
    assert rig.executions.started == [f"up-{first.plan_id}"]


def test_a_failed_start_after_the_commit_is_finished_by_the_retry() -> None:
    rig = Rig()
    ref = rig.snapshots.add(snapshot_of(gpu_world()))
    rig.executions.fail("start", AwsThrottled("StartExecution: Throttling: Rate exceeded"), times=1)

    with pytest.raises(AwsThrottled):
        rig.run(ref)
    assert rig.ledger.commits == 1 and rig.executions.started == []

    retry = rig.run(ref)
    assert retry.status == "resumed" and [e.started for e in retry.executions] == [True]
    assert rig.executions.started == [f"up-{retry.plan_id}"] and rig.ledger.commits == 1


def start_failed_then_newer(later: timedelta) -> tuple[Rig, SnapshotRef, SnapshotRef]:
    """A plan committed at NOW whose StartExecution failed, and a snapshot ``later`` to plan next: the
    rig, the older snapshot and the newer."""
    rig = Rig()
    w = gpu_world()
    older = rig.snapshots.add(snapshot_of(w))
    newer = rig.snapshots.add(snapshot_of(w, NOW + later))
    rig.executions.fail("start", AwsThrottled("StartExecution: Throttling: Rate exceeded"), times=1)
    with pytest.raises(AwsThrottled):
        rig.run(older)
    return rig, older, newer


def test_a_plan_whose_start_failed_has_its_executions_started_by_the_next_snapshots_plan() -> None:
    """A retried stream batch holding a newer snapshot plans only that one (the older is superseded):
    the older plan's raise is committed and counted by the newer plan, so its execution must start."""
    rig, older, newer = start_failed_then_newer(timedelta(seconds=60))

    outcome = rig.run(newer, now=NOW + timedelta(seconds=70))

    assert outcome.status == "idle"  # the older plan's raise covers the pods
    assert rig.executions.started == [f"up-{plan_id_for('ml', older.key)}"]


def test_a_plan_past_the_claim_window_of_the_last_one_does_not_start_its_executions() -> None:
    """Past ``scale_up_claim_minutes`` the newer plan counts the older raise no more and plans the pods
    itself: starting the older execution too would launch them twice."""
    rig, _, newer = start_failed_then_newer(timedelta(minutes=6))

    outcome = rig.run(newer, now=NOW + timedelta(minutes=6, seconds=10))

    assert outcome.status == "acted"
    assert rig.executions.started == [f"up-{plan_id_for('ml', newer.key)}"]


def test_a_last_plan_whose_snapshot_key_is_unreadable_has_nothing_started_and_the_plan_goes_on() -> None:
    """A state item whose ``snapshot_key`` is not a key this code writes: the age of its claims is
    unknown, so none of its executions is started again, and the new plan is made as ever."""
    rig = Rig()
    w = gpu_world()
    rig.run(rig.snapshots.add(snapshot_of(w)))
    rig.ledger.stored = replace(rig.ledger.stored, snapshot_key="2026-11-02T12:00Z")
    asked = [r.name for r in rig.executions.requests]

    outcome = rig.run(
        rig.snapshots.add(snapshot_of(w, NOW + timedelta(seconds=60))), now=NOW + timedelta(seconds=70)
    )

    assert outcome.status == "idle" and [r.name for r in rig.executions.requests] == asked


def test_a_plan_after_one_whose_executions_started_starts_each_of_them_once() -> None:
    rig = Rig()
    w = gpu_world()
    first = rig.run(rig.snapshots.add(snapshot_of(w)))
    rig.run(rig.snapshots.add(snapshot_of(w, NOW + timedelta(seconds=60))), now=NOW + timedelta(seconds=70))

    assert rig.executions.started == [f"up-{first.plan_id}"]  # the second start was refused by name


def test_of_two_planners_only_the_one_that_commits_first_acts() -> None:
    """Both load version 0; the other commits first; this one gets StateConflict and starts nothing."""
    rig = Rig()
    w = gpu_world()
    mine = rig.snapshots.add(snapshot_of(w))
    theirs = rig.snapshots.add(snapshot_of(w, NOW + timedelta(seconds=1)))
    other = Rig(snapshots=rig.snapshots, ledger=rig.ledger, executions=rig.executions)

    rig.ledger.before_commit = lambda: other.run(theirs)
    with pytest.raises(StateConflict):
        rig.run(mine)

    assert rig.ledger.commits == 1 and list(rig.ledger.plans) == [theirs.key]
    assert rig.executions.started == [f"up-{plan_id_for('ml', theirs.key)}"]


def test_an_older_snapshot_than_the_last_planned_is_superseded() -> None:
    rig = Rig()
    w = gpu_world()
    older = rig.snapshots.add(snapshot_of(w))
    newer = rig.snapshots.add(snapshot_of(w, NOW + timedelta(seconds=20)))
    rig.run(newer, now=NOW + timedelta(seconds=30))

    outcome = rig.run(older, now=NOW + timedelta(seconds=31))

    assert outcome.status == "superseded" and newer.key in outcome.note
    assert rig.ledger.commits == 1 and len(rig.executions.requests) == 1


def test_a_backed_off_group_sends_the_burst_to_the_secondary_region() -> None:
    rig = Rig()
    rig.ledger.stored = StoredState(
        state=State(groups={"gpu-east": GroupState(backoff_until=NOW + timedelta(minutes=10), reason="ICE")}),
        version=4,
        snapshot_key="2026-11-02T11:00:00.000000Z",
    )
    ref = rig.snapshots.add(snapshot_of(gpu_world()))

    outcome = rig.run(ref)

    [request] = rig.executions.requests
    assert [(g["group"], g["region"], g["to"]) for g in request.input["groups"]] == [
        ("gpu-west", "us-west-2", 3)
    ]
    assert outcome.summary.overflow_nodes == 3 and outcome.state_version == 5
    assert "gpu-east backed off until" in rig.ledger.plans[ref.key].plan["scale_up"][0]["reason"]
    # The back-off is still running, so the committed state carries it on.
    assert "us-east-1/gpu-east" in rig.ledger.stored.state.groups


def test_idle_nodes_are_drained_through_the_scale_down_execution() -> None:
    w = World()
    nodes = w.group("general", "m5.2xlarge", nodes=3)
    for n in nodes:
        w.idle_since(n, 30)
    planner = PlannerConfig(cluster="ml", regions=("us-east-1", "us-west-2"), drain_deadline_seconds=120)
    rig = Rig(settings=settings(planner=planner, drain_poll_seconds=2))
    cluster, groups, _, state = w.parsed()
    rig.ledger.stored = StoredState(state=state, version=1, snapshot_key="2026-11-02T11:00:00.000000Z")
    ref = rig.snapshots.add(Snapshot.build(cluster, groups, NOW))

    outcome = rig.run(ref)

    [request] = rig.executions.requests
    assert request.kind == "scale_down" and request.name == f"down-{outcome.plan_id}"
    assert request.state_machine_arn == DOWN_ARN
    assert request.input["cluster"] == "ml" and request.input["plan_id"] == outcome.plan_id
    assert request.input["deadline_seconds"] == 120 and request.input["poll_seconds"] == 2
    [drain] = request.input["drains"]  # max_scale_in_fraction caps at one node of three
    assert set(drain) == {"node", "instance_id", "group", "region", "reason", "planned_at", "claim_minutes",
                          "claim_until"}  # fmt: skip
    assert drain["group"] == "general" and drain["region"] == "us-east-1" and drain["node"] in nodes
    assert outcome.summary.drains == 1


def test_a_consolidation_reaches_the_drain_with_the_pods_it_moves_and_a_drain_sized_reason() -> None:
    w = World()
    a, b = sorted(w.group("general", "m5.2xlarge", nodes=2))
    for i, node in enumerate((a, b)):
        w.pods(f"web{i}", 2, cpu="1500m", memory="1Gi", node_name=node, owner=("ReplicaSet", f"web{i}"),
               annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"})  # fmt: skip
    rig = Rig(settings=settings(planner=PlannerConfig(cluster="ml", regions=("us-east-1",),
                                                      consolidation="when-underutilized")))  # fmt: skip
    cluster, groups, _, state = w.parsed()
    rig.ledger.stored = StoredState(state=state, version=1, snapshot_key="2026-11-02T11:00:00.000000Z")
    ref = rig.snapshots.add(Snapshot.build(cluster, groups, NOW))

    rig.run(ref)

    [request] = rig.executions.requests
    [drain] = request.input["drains"]
    assert drain["node"] == a and drain["consolidation"] is True
    assert drain["pods"] == ["default/web0-0", "default/web0-1"]
    assert "code" not in drain and len(drain["reason"]) <= 256
    [record] = rig.ledger.plans.values()
    [recorded] = record.plan["drain"]  # the plan record keeps the code and the whole reason
    assert recorded["code"] == "consolidation" and recorded["pods"] == drain["pods"]


def test_a_make_room_drain_moves_its_pods_and_asks_to_keep_the_node_uncordoned() -> None:
    pods = ("team-a/web-0", "team-a/web-1")
    where = {"node": "ip-10-0-1-10.ec2.internal", "instance_id": "i-0a1b2c3d4e5f60718", "group": "general",
             "region": "us-east-1", "reason": "make-room: gives the node to ml/train-0"}  # fmt: skip
    claim = {"planned_at": "2026-11-02T10:00:00Z", "claim_minutes": 20, "claim_until": "2026-11-02T10:20:00Z"}
    room = drain_item(Drain(**where, code=codes.MAKE_ROOM, pods=pods), claim)
    moved = drain_item(Drain(**where, code=codes.CONSOLIDATION, pods=pods), claim)

    assert room == {**where, "consolidation": True, "pods": list(pods), "terminate": False, "uncordon": True,
                    **claim}  # fmt: skip
    assert moved == {**where, "consolidation": True, "pods": list(pods), **claim}  # terminates, as before
    request = parse_request({"cluster": "ml", "plan_id": "p", **room})  # DrainNode accepts it as it is
    assert (request.consolidation, request.terminate, request.uncordon) == (True, False, True)
    assert request.pods == list(pods)


def test_a_plan_with_nothing_to_do_still_records_the_plan_and_the_idle_clock() -> None:
    w = World()
    [node] = w.group("general", "m5.2xlarge", nodes=1)
    rig = Rig()
    ref = rig.snapshots.add(snapshot_of(w))

    outcome = rig.run(ref)

    assert outcome.status == "idle" and outcome.executions == ()
    assert rig.ledger.plans[ref.key].plan["kept"][0]["node"] == node
    assert node in rig.ledger.stored.state.nodes  # idle since now: counted from here on


def test_uncordoning_without_growing_is_a_scale_up_item_that_does_not_grow() -> None:
    w = World()
    nodes = w.group("general", "m5.2xlarge", nodes=2)
    w.cordon(nodes[0], by_spillway=True)
    w.pods("busy", 1, cpu="7", memory="20Gi", node_name=nodes[1], owner=("ReplicaSet", "busy"))
    w.pods("job", 2, cpu="2", memory="4Gi")
    rig = Rig()
    ref = rig.snapshots.add(snapshot_of(w))

    rig.run(ref)

    [request] = rig.executions.requests
    assert request.input["groups"] == [
        {"group": "general", "region": "us-east-1", "from": 2, "to": 2, "grow": False, "new_nodes": 0,
         "pods": 0, "uncordon": [nodes[0]], "reasons": {nodes[0]: UNCORDON_REASON},
         "cordons": {nodes[0]: cordon_digest(PLAN_DRAIN_CORDON)}},
    ]  # fmt: skip


def test_a_snapshot_written_before_cordon_digests_were_kept_uncordons_as_before() -> None:
    """Which cordon the plan saw survives the snapshot (key ``scd``). A snapshot without it (observe
    older than the plan) gives the plan none to pass on: its scale-up entry has no ``cordons`` (a scale
    function older than the key would refuse one) and prepare takes off whichever Spillway cordon it
    finds, as before."""
    w = World()
    nodes = w.group("general", "m5.2xlarge", nodes=2)
    w.cordon(nodes[0], by_spillway=True)
    w.pods("busy", 1, cpu="7", memory="20Gi", node_name=nodes[1], owner=("ReplicaSet", "busy"))
    w.pods("job", 2, cpu="2", memory="4Gi")
    snapshot = snapshot_of(w)
    [info] = [n for n in snapshot.cluster.nodes if n.name == nodes[0]]
    assert (
        info.cordon_digest == cordon_digest(PLAN_DRAIN_CORDON) and NodeInfo.from_dict(info.to_dict()) == info
    )
    before = [
        NodeInfo.from_dict({k: v for k, v in n.to_dict().items() if k != "scd"})
        for n in snapshot.cluster.nodes
    ]
    older = replace(snapshot, cluster=replace(snapshot.cluster, nodes=tuple(before)))
    rig = Rig()

    rig.run(rig.snapshots.add(older))

    [request] = rig.executions.requests
    [group] = request.input["groups"]
    assert group["uncordon"] == [nodes[0]] and "cordons" not in group


def test_a_plan_that_drains_without_a_scale_down_machine_fails_before_committing() -> None:
    w = World()
    nodes = w.group("general", "m5.2xlarge", nodes=3)
    for n in nodes:
        w.idle_since(n, 30)
    rig = Rig(settings=settings(scale_down_arn=None))
    cluster, groups, _, state = w.parsed()
    rig.ledger.stored = StoredState(state=state, version=1, snapshot_key="2026-11-02T11:00:00.000000Z")
    ref = rig.snapshots.add(Snapshot.build(cluster, groups, NOW))

    with pytest.raises(ConfigurationError, match="SCALE_DOWN_STATE_MACHINE_ARN"):
        rig.run(ref)
    assert rig.ledger.commits == 0 and rig.executions.requests == []


def test_a_plan_that_grows_without_a_scale_up_machine_fails_before_committing() -> None:
    rig = Rig(settings=settings(scale_up_arn=None))
    ref = rig.snapshots.add(snapshot_of(gpu_world()))

    message = r"^SCALE_UP_STATE_MACHINE_ARN: the plan grows groups but no scale-up state machine"
    with pytest.raises(ConfigurationError, match=message):
        rig.run(ref)
    assert rig.ledger.commits == 0 and rig.executions.requests == []


def test_pods_no_group_can_run_are_counted_unplaceable() -> None:
    w = gpu_world()
    w.gpu_pods("huge", 2, gpus=8, cpu="90", memory="1000Gi")
    rig = Rig()
    ref = rig.snapshots.add(snapshot_of(w))

    outcome = rig.run(ref)

    assert outcome.summary.unplaceable == 2 and outcome.summary.scale_up_nodes == 3


def test_plan_ids_are_deterministic_and_make_valid_execution_names() -> None:
    key = "2026-11-02T12:00:00.123456Z"
    pid = plan_id_for("a" * 100, key)
    assert pid == plan_id_for("a" * 100, key) != plan_id_for("b", key)
    assert pid.startswith("20261102T120000123456Z-")
    for name in (f"up-{pid}", f"down-{pid}"):
        assert NAME_PATTERN.match(name) and len(name) <= 80


def test_an_unknown_snapshot_is_reported_as_such() -> None:
    rig = Rig()
    with pytest.raises(SnapshotNotFound):
        rig.run(SnapshotRef("ml", "2026-11-02T12:00:00.000000Z"))
    assert rig.ledger.loads == 0


# --- the plan function's reading of stream records ----------------------------------------------

REPO = Path(__file__).resolve().parents[2]


def plan_app() -> Any:
    spec = importlib.util.spec_from_file_location("plan_app_under_test", REPO / "functions/plan/app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_only_inserts_of_complete_snapshots_are_planned_the_newest_per_cluster() -> None:
    sample = json.loads((REPO / "events/stream-record.json").read_text())
    [record] = sample["Records"]

    def variant(
        cluster: str, key: str, *, name: str = "INSERT", kind: str = "snapshot", seq: str = "1"
    ) -> Any:
        image = {**record["dynamodb"]["NewImage"], "cluster": {"S": cluster}, "taken_at": {"S": key},
                 "kind": {"S": kind}}  # fmt: skip
        return {**record, "eventName": name, "dynamodb": {**record["dynamodb"], "NewImage": image,
                                                          "SequenceNumber": seq}}  # fmt: skip

    refs = snapshot_inserts(
        [
            record,
            variant("ml", "2026-11-02T12:00:20.000000Z", seq="3"),
            variant("ml", "2026-11-02T12:00:10.000000Z", seq="2"),
            variant("ml#chunks", "2026-11-02T12:00:30.000000Z#ab12#0000", kind="chunk", seq="4"),
            variant("ml", "2026-11-02T12:00:40.000000Z", name="REMOVE", seq="5"),
            variant("other", "2026-11-02T12:00:00.000000Z", seq="6"),
        ]
    )

    assert [(r.cluster, r.key, seq) for r, seq in refs] == [
        ("ml", "2026-11-02T12:00:20.000000Z", "3"),
        ("other", "2026-11-02T12:00:00.000000Z", "6"),
    ]
    [(only, _)] = snapshot_inserts(sample["Records"])
    assert (only.cluster, only.key) == ("ml", "2026-11-02T12:00:00.123456Z")


# --- the scale-up steps (spillway.act.scale) with fakes -----------------------------------------


WRITES = ("set_desired_capacity", "terminate_instance")


def gpu_cloud(instances: int, desired: int | None = None, max_size: int = 8) -> FakeCloud:
    cloud = FakeCloud(cluster="ml")
    ids = [o.instance_id(f"gpu-{i}") for i in range(instances)]
    cloud.add_group("gpu", ids, region="us-east-1", desired=instances if desired is None else desired,
                    max_size=max_size, instance_type="g5.xlarge")  # fmt: skip
    return cloud


def writes(cloud: FakeCloud) -> list[tuple[str, Any]]:
    return [(name, args[-2] if name == "terminate_instance" else args[-1])
            for name, args in cloud.calls if name in WRITES]  # fmt: skip


def steps(cloud: FakeCloud, kube: FakeCluster | None = None, ledger: FakeLedger | None = None) -> ScaleSteps:
    return ScaleSteps(
        kube=kube or FakeCluster(), aws=cloud, ledger=ledger or FakeLedger(), snapshots=FakeSnapshots(),
        settings=settings(), clock=lambda: NOW,
    )  # fmt: skip


GROUP = {"group": "gpu", "region": "us-east-1", "from": 1, "to": 3, "grow": True, "uncordon": []}


def test_prepare_uncordons_the_planned_nodes_and_refuses_a_target_above_max_size() -> None:
    name = "ip-10-0-0-1.ec2.internal"
    kube = FakeCluster([o.node(name, instance="i-0abc", unschedulable=True,
                               annotations={CORDONED_BY_SPILLWAY: "2026-11-02T11:00:00Z drain"},
                               taints=[{"key": DRAINING_TAINT, "effect": "NoSchedule"}])])  # fmt: skip
    cloud = gpu_cloud(1, max_size=2)

    with pytest.raises(AsgLimitExceeded, match="above MaxSize 2"):
        steps(cloud, kube).prepare({"group": {**GROUP, "uncordon": [name, "gone-node"]}})

    node = kube.get_node(name)
    assert not node.spec.unschedulable and node.spec.taints == []  # uncordoned before the refusal
    assert kube.events == [f"SpillwayUncordoned {name}"] and writes(cloud) == []


def test_prepare_takes_off_only_the_cordon_the_plan_saw() -> None:
    """The plan reused a node its own scale-down was draining; before prepare ran, a Spot warning's
    drain took the node over (its cordon and taint). Prepare uncordoned it by name, and the warning's
    drain then found the node no longer its own and stopped: pods kept landing on an instance EC2 was
    reclaiming. The uncordon is compare-and-set on the words the plan saw: the warning's cordon and
    taint stay, and no Event says the node was uncordoned; a node still carrying what the plan saw is
    uncordoned and untainted."""
    taken, reused = "ip-10-0-0-1.ec2.internal", "ip-10-0-0-2.ec2.internal"
    warning = "2026-11-02T11:59:10Z held drain spot-i-0ab0-w1: spot interruption warning w-1"
    kube = FakeCluster([
        o.node(name, instance=f"i-0ab{i}", unschedulable=True, annotations={CORDONED_BY_SPILLWAY: value},
               taints=[{"key": DRAINING_TAINT, "effect": "NoSchedule"}])
        for i, (name, value) in enumerate(((taken, warning), (reused, PLAN_DRAIN_CORDON)))
    ])  # fmt: skip
    seen = cordon_digest(PLAN_DRAIN_CORDON)  # the plan saw its own drain's cordon on both
    group = {**GROUP, "grow": False, "to": 1, "uncordon": [taken, reused],
             "reasons": {taken: UNCORDON_REASON, reused: UNCORDON_REASON},
             "cordons": {taken: seen, reused: seen}}  # fmt: skip

    prep = steps(gpu_cloud(1), kube).prepare({"plan_id": "ml-p1", "group": group})

    assert prep["uncordoned"] == [reused] and kube.events == [f"SpillwayUncordoned {reused}"]
    held = kube.get_node(taken)
    assert held.spec.unschedulable and [t.key for t in held.spec.taints] == [DRAINING_TAINT]
    assert held.metadata.annotations[CORDONED_BY_SPILLWAY] == warning
    free = kube.get_node(reused)
    assert not free.spec.unschedulable and free.spec.taints == []
    assert CORDONED_BY_SPILLWAY not in free.metadata.annotations


def test_the_uncordon_event_shows_in_kubectl_describe_node() -> None:
    """``kubectl describe node`` lists the Events whose ``involvedObject.uid`` is the Node's uid, or its
    name as kubelet writes it (kubernetes/kubectl pkg/describe/describe.go, NodeDescriber.Describe: two
    field-selector searches, merged). Prepare's SpillwayUncordoned Event named no uid, so neither search
    found it: the note of why a node was given back never showed where an operator looks. It names
    the uncordoned Node's uid, as the drain's Events do."""
    name = "ip-10-0-0-2.ec2.internal"
    with KubeApiServer() as api:
        node = api.add(o.node(name, instance="i-0ab2", unschedulable=True,
                              annotations={CORDONED_BY_SPILLWAY: PLAN_DRAIN_CORDON},
                              taints=[{"key": DRAINING_TAINT, "effect": "NoSchedule"}]))  # fmt: skip
        kube = KubeClient.for_url(api.url)
        try:
            scale = ScaleSteps(kube=kube, aws=gpu_cloud(1), ledger=FakeLedger(), snapshots=FakeSnapshots(),
                               settings=settings(), clock=lambda: NOW)  # fmt: skip
            group = {**GROUP, "grow": False, "to": 1, "uncordon": [name], "reasons": {name: UNCORDON_REASON},
                     "cordons": {name: cordon_digest(PLAN_DRAIN_CORDON)}}  # fmt: skip
            assert scale.prepare({"plan_id": "ml-p1", "group": group})["uncordoned"] == [name]
            core = CoreV1Api(api.api_client())
            found = [
                e.reason
                for uid in (node["metadata"]["uid"], name)
                for e in core.list_event_for_all_namespaces(
                    field_selector=f"involvedObject.name={name},involvedObject.namespace=,"
                    f"involvedObject.kind=Node,involvedObject.uid={uid}"
                ).items
            ]
        finally:
            kube.close()
    assert found == ["SpillwayUncordoned"]


def test_the_uncordon_event_goes_without_the_uid_when_the_node_cannot_be_read_again() -> None:
    """The uid is read only for the Event, a courtesy: a read that fails after the uncordon leaves the
    Event without it, and the step does not fail for it."""
    name = "ip-10-0-0-2.ec2.internal"
    kube = FakeCluster([o.node(name, instance="i-0ab2", unschedulable=True,
                               annotations={CORDONED_BY_SPILLWAY: PLAN_DRAIN_CORDON},
                               taints=[{"key": DRAINING_TAINT, "effect": "NoSchedule"}])])  # fmt: skip
    kube.fail("get_node", KubeUnavailable("get node: no useful answer after 4 attempts"))
    group = {**GROUP, "grow": False, "to": 1, "uncordon": [name], "reasons": {name: UNCORDON_REASON},
             "cordons": {name: cordon_digest(PLAN_DRAIN_CORDON)}}  # fmt: skip

    prep = steps(gpu_cloud(1), kube).prepare({"plan_id": "ml-p1", "group": group})

    assert prep["uncordoned"] == [name] and kube.events == [f"SpillwayUncordoned {name}"]
    assert kube.posted[0]["uid"] is None


@pytest.mark.parametrize(
    "value",
    [
        # cut at 256 characters on a space, as cordon() cuts a long plan reason: the words compared by
        # reason would lose the trailing space to strip(), and never match their own annotation
        ("2026-11-02T11:00:00Z drain dn-p1: ".ljust(255, "x") + " and more")[:256],
        "2026-11-02T11:00:00Z drain dn-p1: " + "z" * 400,  # longer than Spillway writes (by hand)
        "drain",  # written before cordons had a time
    ],
)
def test_prepare_uncordons_the_cordon_the_plan_saw_whatever_its_value(value: str) -> None:
    """Which cordon the plan saw goes through the snapshot and the execution input as a digest of the
    whole value, so prepare recognises it however it was cut or written; a value over 256 characters
    no longer makes the step input refuse the group."""
    name = "ip-10-0-0-1.ec2.internal"
    kube = FakeCluster([o.node(name, instance="i-0ab1", unschedulable=True,
                               annotations={CORDONED_BY_SPILLWAY: value},
                               taints=[{"key": DRAINING_TAINT, "effect": "NoSchedule"}])])  # fmt: skip
    seen = NodeInfo.from_dict(NodeInfo.from_node(kube.get_node(name)).to_dict()).cordon_digest
    assert seen is not None
    group = {**GROUP, "grow": False, "to": 1, "uncordon": [name], "reasons": {name: UNCORDON_REASON},
             "cordons": {name: seen}}  # fmt: skip

    prep = steps(gpu_cloud(1), kube).run(  # as the state machine sends it: validated first
        {"action": "prepare", "cluster": "ml", "plan_id": "ml-p1", "round": 1, "launch_timeout_seconds": 600,
         "group": {**group, "new_nodes": 0, "pods": 0}}
    )  # fmt: skip

    assert prep["uncordoned"] == [name]
    assert not kube.get_node(name).spec.unschedulable and kube.get_node(name).spec.taints == []


class EventsCluster(FakeCluster):
    """A FakeCluster that keeps each event's message too."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.messages: dict[str, str] = {}

    def record_event(
        self, kind: str, name: str, namespace: str | None, reason: str, *args: Any, **kw: Any
    ) -> None:
        super().record_event(kind, name, namespace, reason, *args, **kw)
        self.messages[name] = str(args[0])


def test_prepare_says_in_each_uncordon_event_why_the_plan_uncordoned_the_node() -> None:
    reused, orphan, old = "ip-10-0-0-1.ec2.internal", "ip-10-0-0-2.ec2.internal", "ip-10-0-0-3.ec2.internal"
    kube = EventsCluster([
        o.node(name, instance=f"i-0ab{i}", unschedulable=True,
               annotations={CORDONED_BY_SPILLWAY: "2026-11-01T08:00:00Z drain: idle"},
               taints=[{"key": DRAINING_TAINT, "effect": "NoSchedule"}])
        for i, name in enumerate((reused, orphan, old))
    ])  # fmt: skip
    restored = (
        "orphaned-drain-restored: Spillway cordoned it 27 h ago and no drain owns it (orphaned_drain_minutes"
        " 27 h); it is not drained now (runs 1 workload pod(s)), so it is uncordoned and its draining taint lifted"
    )
    group = {**GROUP, "grow": False, "to": 1, "uncordon": [reused, orphan, old],
             "reasons": {reused: UNCORDON_REASON, orphan: restored}}  # fmt: skip

    prep = steps(gpu_cloud(1), kube).prepare({"plan_id": "ml-p1", "group": group})

    assert prep["uncordoned"] == [reused, orphan, old]
    assert kube.messages[orphan] == f"uncordoned by Spillway plan ml-p1: {restored}"
    assert kube.messages[reused] == f"uncordoned by Spillway plan ml-p1: {UNCORDON_REASON}"
    assert "orphaned" not in kube.messages[reused]
    # An execution started before plans carried reasons: the message it always had.
    assert kube.messages[old] == "uncordoned by Spillway plan ml-p1: pending pods fit on it"


def test_prepare_refuses_to_raise_a_group_whose_launch_process_is_suspended() -> None:
    """A raise there launches nothing (EC2 Auto Scaling User Guide, "Suspend and resume ... processes":
    Launch suspended, the group cannot scale out) and would count as launching until the deadline; the
    refusal (AsgLimitExceeded: the state machine's Refused, then a re-plan on the live groups) names the
    process and AWS's reason. A group that grows nothing is not refused. (Review r24.)"""
    cloud = gpu_cloud(1)
    cloud.groups[("us-east-1", "gpu")]["SuspendedProcesses"] = [
        {"ProcessName": "Launch", "SuspensionReason": "Administrative suspension at 2026-11-01T08:00:00Z"}
    ]

    with pytest.raises(
        AsgLimitExceeded, match=r"its Launch process is suspended \(Administrative suspension"
    ):
        steps(cloud).prepare({"group": GROUP})

    assert writes(cloud) == []
    assert steps(cloud).prepare({"group": {**GROUP, "grow": False}})["set"] is False


def test_prepare_refuses_to_raise_a_group_being_deleted() -> None:
    """DeleteAutoScalingGroup with ForceDelete deletes the group asynchronously, terminating its instances;
    meanwhile DescribeAutoScalingGroups still lists it with ``Status`` set ("The current state of the
    group when the DeleteAutoScalingGroup operation is in progress", EC2 Auto Scaling API Reference,
    AutoScalingGroup), and Auto Scaling refuses every change ("ValidationError: The AutoScaling group may
    not be modified while it is pending delete"). The plans leave such a group out; a scale-up planned
    before the delete raised it anyway, AWS refused, and the plain AwsError ended the group in ``error``:
    backed off as a failed launch (GroupsBackedOff, and the scale function's error alarm) for an
    operator's delete. Refused now, as for a suspended Launch: the re-plan sends the pods elsewhere."""
    cloud = gpu_cloud(1)
    cloud.groups[("us-east-1", "gpu")]["Status"] = "Delete in progress"

    with pytest.raises(
        AsgLimitExceeded, match=r"us-east-1/gpu is being deleted \(Status 'Delete in progress'\)"
    ):
        steps(cloud).prepare({"group": GROUP})

    assert writes(cloud) == []


def test_prepare_says_what_to_set_and_verify_sees_a_capacity_failure_since_then() -> None:
    cloud = gpu_cloud(1)
    asg = cloud.groups[("us-east-1", "gpu")]
    prep = steps(cloud).prepare({"group": GROUP, "launch_timeout_seconds": 60})
    assert prep["set"] and prep["target"] == 3 and prep["before"] == [o.instance_id("gpu-0")]
    assert prep["deadline"] == "2026-11-02T12:01:00Z"

    old = o.failed_launch(asg, NOW - timedelta(minutes=20))
    assert steps(cloud).verify({"group": GROUP, "prep": prep})["status"] == "launching"  # nothing yet
    cloud.activities[("us-east-1", "gpu")] = [old]
    assert steps(cloud).verify({"group": GROUP, "prep": prep})["status"] == "launching"  # old news
    cloud.activities[("us-east-1", "gpu")] = [old, o.failed_launch(asg, NOW)]
    failed = steps(cloud).verify({"group": GROUP, "prep": prep})
    assert failed["status"] == "failed" and "launch failed" in failed["reason"]


def test_scale_up_verify_sees_a_launch_that_failed_for_a_reason_other_than_capacity() -> None:
    """EC2 Auto Scaling API Reference, DescribeScalingActivities: a launch fails as StatusCode Failed
    with EC2's StatusMessage, whatever the reason. verify answers ``failed`` at the first such activity
    since ``prepare`` (the group is backed off, the pods overflow now), where it kept answering
    ``launching`` until the launch deadline for anything but a capacity message; its reason says why the
    whole group backs off. (Review r24.)"""
    cloud = gpu_cloud(0, max_size=8)
    group = {**GROUP, "from": 0, "to": 1}
    prep = steps(cloud).prepare({"group": group})
    asg = cloud.groups[("us-east-1", "gpu")]
    cloud.activities[("us-east-1", "gpu")] = [o.failed_launch(asg, NOW, message=o.MISSING_AMI)]

    out = steps(cloud).verify({"group": group, "prep": prep})

    assert out["status"] == "failed" and out["failure"] == o.MISSING_AMI
    assert out["reason"].startswith("us-east-1/gpu: launch failed, not for capacity")


def test_backoff_terminates_only_new_instances_without_a_ready_node_and_lowers_the_rest() -> None:
    cloud = gpu_cloud(3, desired=4)  # one instance before; two launched; one never launched
    before, ready_new, stuck = (i["InstanceId"] for i in cloud.groups[("us-east-1", "gpu")]["Instances"])
    kube = FakeCluster([
        o.node(f"node-{iid}", instance=iid, ready=(iid != stuck)) for iid in (before, ready_new, stuck)
    ])  # fmt: skip
    ledger = FakeLedger()
    ledger.claimed[("ml", "raise#up-p1")] = {"before": 1, "after": 4, "count": 3}  # it raised 3

    out = steps(cloud, kube, ledger).backoff(
        {"cluster": "ml", "group": {**GROUP, "to": 4}, "prep": {"before": [before], "owner": "up-p1", "count": 3},
         "launch": {"status": "timeout", "reason": "1 of 3 new node(s) Ready by the launch deadline"}}
    )  # fmt: skip

    assert writes(cloud) == [("terminate_instance", stuck), ("set_desired_capacity", 2)]
    assert out["outcome"] == "backed_off" and out["desired"] == 2 and out["terminated"] == [stuck]
    [(group, until, reason)] = ledger.backoffs
    assert group == "gpu" and until == NOW + timedelta(minutes=15) and reason.startswith("1 of 3")


def timed_out_backoff(
    launched: int,
    pods: Callable[[list[str]], list[dict[str, Any]]],
    before: Callable[[FakeCloud, FakeCluster], None] = lambda *_: None,
) -> tuple[FakeCloud, list[str], dict[str, Any]]:
    """A scale-up of group gpu that launched ``launched`` instances beside the one it had, none of whose
    Nodes turned Ready by the deadline, with ``pods`` (of the instance ids, the first the old one) bound:
    the cloud, the ids and the back-off's result. ``before`` sees the cloud and the cluster just before
    the back-off runs."""
    cloud = gpu_cloud(launched + 1, desired=launched + 1)
    ids = [i["InstanceId"] for i in cloud.groups[("us-east-1", "gpu")]["Instances"]]
    cloud.ec2.update({iid: {"region": "us-east-1", "state": "running", "tags": {}} for iid in ids})
    kube = FakeCluster([o.node(f"node-{iid}", instance=iid, ready=(iid == ids[0])) for iid in ids], pods(ids))
    before(cloud, kube)
    ledger = FakeLedger()
    ledger.claimed[("ml", "raise#up-p1")] = {"before": 1, "after": launched + 1, "count": launched}
    out = steps(cloud, kube, ledger).backoff(
        {"cluster": "ml", "group": {**GROUP, "to": launched + 1},
         "prep": {"before": [ids[0]], "owner": "up-p1", "count": launched},
         "launch": {"status": "timeout", "reason": f"0 of {launched} new node(s) Ready by the launch deadline"}}
    )  # fmt: skip
    return cloud, ids, out


def test_backoff_leaves_running_a_new_instance_whose_notready_node_runs_a_pod() -> None:
    """Both new nodes were Ready and took pending pods; by the deadline one of them reports NotReady for
    a moment (a kubelet restart): not a launch that never came up, a node with work on it. Terminated as
    undelivered, it killed its pod: it is left running (scale-down judges it once idle), and the reason
    names it with its pod. The stuck one with no pod is given back as before."""
    cloud, (_, busy, stuck), out = timed_out_backoff(
        2,
        lambda ids: [
            o.pod("train-0", "ml", node_name=f"node-{ids[1]}", owner=("Job", "train"), phase="Running")
        ],
    )

    assert out["terminated"] == [stuck] and writes(cloud) == [("terminate_instance", stuck)]
    assert f"left running, their Nodes run pods: {busy} (ml/train-0)" in out["reason"]


def _train_on_second(ids: list[str]) -> list[dict[str, Any]]:
    """A running Job pod on the second new instance's Node (the one a back-off keeps)."""
    return [o.pod("train-0", "ml", node_name=f"node-{ids[1]}", owner=("Job", "train"), phase="Running")]


def test_backoff_terminates_a_stuck_instance_only_while_its_node_is_cordoned_and_uncordons_the_kept_one() -> (
    None
):
    """A NotReady Node may turn Ready again at any moment (a kubelet restart), and kube-scheduler then
    binds a pending pod to it: the back-off cordons each new instance's Node before it reads its pods,
    terminates the idle one while it is cordoned, and takes its cordon off the one kept for its pod."""
    seen: dict[str, dict[str, bool]] = {}
    kube_seen: list[FakeCluster] = []

    def record(cloud: FakeCloud, kube: FakeCluster) -> None:
        seen["at_terminate"] = unschedulable_at_terminate(cloud, kube)
        kube_seen.append(kube)

    _, (_, busy, stuck), out = timed_out_backoff(2, _train_on_second, record)

    kube = kube_seen[0]
    assert out["terminated"] == [stuck] and seen["at_terminate"] == {stuck: True}
    assert not kube.nodes[f"node-{busy}"]["spec"].get("unschedulable")
    assert kube.called("uncordon") == [(f"node-{busy}",)]
    assert {why for _, why in kube.called("cordon")} == {"scale-up back-off gpu (up-p1)"}


def test_a_retried_backoff_takes_off_the_cordon_its_first_try_left_on_the_kept_node() -> None:
    """The first try cordoned both Nodes, then failed (throttled, and its uncordon too): the retry finds
    the kept one carrying its own cordon (the same reason: this plan's owner), takes it for its own and
    takes it off once it keeps the node for its pod; it does not leave it cordoned for good."""
    kube_seen: list[FakeCluster] = []

    def first_try(_: FakeCloud, kube: FakeCluster) -> None:
        for name in list(kube.nodes)[1:]:
            kube.cordon(name, "scale-up back-off gpu (up-p1)")
        kube_seen.append(kube)

    _, (_, busy, stuck), out = timed_out_backoff(2, _train_on_second, first_try)

    kube = kube_seen[0]
    assert out["terminated"] == [stuck]
    assert not kube.nodes[f"node-{busy}"]["spec"].get("unschedulable")


def test_backoff_keeps_an_instance_whose_node_cannot_be_cordoned_and_fails_no_step() -> None:
    """A refused cordon leaves the Node open to kube-scheduler: its instance stays, the reason says why,
    and the group is still backed off."""

    def refuse(_: FakeCloud, kube: FakeCluster) -> None:
        kube.fail("cordon", KubeUnavailable("patch node: no useful answer after 4 attempts"))

    cloud, (_, stuck), out = timed_out_backoff(1, lambda _: [], refuse)

    assert out["terminated"] == [] and writes(cloud) == []
    assert f"{stuck} (its Node could not be cordoned: KubeUnavailable)" in out["reason"]
    assert out["outcome"] == "backed_off"


def test_a_backoff_that_fails_to_terminate_leaves_no_cordon_of_its_own() -> None:
    """AWS failing the terminate fails the step (it is retried), and the Node it cordoned is
    schedulable again."""
    kube_seen: list[FakeCluster] = []

    def refuse(cloud: FakeCloud, kube: FakeCluster) -> None:
        cloud.fail("terminate_instance", AwsThrottled("TerminateInstanceInAutoScalingGroup: Rate exceeded"))
        kube_seen.append(kube)

    with pytest.raises(AwsThrottled):
        timed_out_backoff(1, lambda _: [], refuse)

    kube = kube_seen[0]
    assert len(kube.called("cordon")) == 1
    assert not any(node["spec"].get("unschedulable") for node in kube.nodes.values())


def test_backoff_gives_back_every_stuck_instance_though_the_min_size_refuses_one_decrement() -> None:
    """A MinSize raised meanwhile (a scheduled action, an operator) makes AWS refuse the decrementing
    terminate of the first stuck instance: the others are still given back, and that one is terminated
    without the decrement, as AWS's refusal offers (the group launches an ordinary replacement). Before,
    the refusal left the loop and every later stuck instance ran on, outside any plan."""
    cloud = gpu_cloud(4, desired=4)  # one instance before; three launched, none joined
    raw = cloud.groups[("us-east-1", "gpu")]
    before, *stuck = (i["InstanceId"] for i in raw["Instances"])
    kube = FakeCluster(
        [o.node(f"node-{iid}", instance=iid, ready=(iid == before)) for iid in (before, *stuck)]
    )
    ledger = FakeLedger()
    ledger.claimed[("ml", "raise#up-p1")] = {"before": 1, "after": 4, "count": 3}
    raw["MinSize"] = 3  # raised since the launch: one decrement goes through, the next are refused

    out = steps(cloud, kube, ledger).backoff(
        {"cluster": "ml", "group": {**GROUP, "to": 4}, "prep": {"before": [before], "owner": "up-p1", "count": 3},
         "launch": {"status": "timeout", "reason": "0 of 3 new node(s) Ready by the launch deadline"}}
    )  # fmt: skip

    assert sorted(out["terminated"]) == sorted(stuck)
    terminations = [args for name, args in cloud.calls if name == "terminate_instance"]
    decremented = [iid for _, iid, decrement in terminations if decrement]
    replaced = [iid for _, iid, decrement in terminations if not decrement]
    assert len(replaced) == 2 and set(replaced) < set(stuck) == set(decremented)  # refused: without
    assert raw["DesiredCapacity"] == 3  # the MinSize holds: Auto Scaling replaces those two
    assert out["outcome"] == "backed_off"


SPOT_ICE = (
    "Could not launch Spot Instances. InsufficientInstanceCapacity - There is no Spot capacity available that "
    "matches your request. Launching EC2 instance failed."
)


def failed_launch_backoffs(
    message: str | None,
    zones: tuple[str, ...] = ("us-east-1a",),
    metrics: list[str] | None = None,
    template_type: str | None = None,
) -> list[str]:
    """The back-offs a scale-up writes once verify found a launch of group gpu (g5.xlarge) failed with
    ``message`` (a Failed scaling activity as AWS words it); None: the launch timed out instead. The
    metrics its backoff step emits go to ``metrics``. ``template_type``: the type its launch template
    names now, other than its running instance's (the failed launch is of that type)."""
    cloud = gpu_cloud(1)
    raw = cloud.groups[("us-east-1", "gpu")]
    raw["AvailabilityZones"] = list(zones)
    if template_type is not None:
        raw["LaunchInstanceType"] = template_type
    prep = steps(cloud).prepare({"group": GROUP, "launch_timeout_seconds": 60})
    if message is None:
        launch = {"status": "timeout", "reason": "0 of 2 new node(s) Ready by the launch deadline"}
    else:
        activity = o.failed_launch(raw, NOW, instance_type=template_type or "g5.xlarge")
        cloud.activities[("us-east-1", "gpu")] = [{**activity, "StatusMessage": message}]
        launch = steps(cloud).verify({"group": GROUP, "prep": prep})
        assert launch["status"] == "failed"
    ledger = FakeLedger()
    backoff = steps(cloud, ledger=ledger)
    backoff.metric = lambda name, _: (metrics if metrics is not None else []).append(name)
    backoff.backoff({"cluster": "ml", "group": GROUP, "prep": prep, "launch": launch})
    return sorted(g for g, _, _ in ledger.backoffs)


@pytest.mark.parametrize(
    ("message", "misconfigured"),
    [(o.MISSING_AMI, True), (SPOT_ICE, False), (None, False), ("Server.InternalError: Internal error", False)],
    ids=["ami", "capacity", "timeout", "internal"],
)  # fmt: skip
def test_a_launch_refused_for_its_settings_is_counted_apart_from_a_shortage(
    message: str | None, misconfigured: bool
) -> None:
    """GroupsBackedOff fires for a shortage as for a launch template whose AMI is gone, but only the
    second needs somebody: it fails again at every launch until fixed. ``LaunchesMisconfigured`` (its own
    alarm) counts those alone."""
    metrics: list[str] = []
    failed_launch_backoffs(message, metrics=metrics)
    assert "GroupsBackedOff" in metrics
    assert ("LaunchesMisconfigured" in metrics) is misconfigured


def test_a_launch_that_failed_for_capacity_backs_off_the_pool_of_the_capacity_type_that_failed() -> None:
    """EC2 names the type and zone it has no on-demand capacity of; a Spot failure names neither, so its
    pool is known only for a group of one type in one zone. The pool back-off keeps other groups of that
    capacity type, type and zone from trying it, and leaves the other capacity type alone, as Karpenter
    marks the offering (capacity type, type, zone) a launch found without capacity. (Review r11.)"""
    on_demand = (
        "We currently do not have sufficient g5.xlarge capacity in the Availability Zone you requested "
        "(us-east-1b). Our system will be working on provisioning additional capacity. Launching EC2 "
        "instance failed."
    )
    assert failed_launch_backoffs(on_demand, ("us-east-1a", "us-east-1b")) == [
        "gpu", "pool#on-demand/us-east-1b/g5.xlarge"
    ]  # fmt: skip
    assert failed_launch_backoffs(SPOT_ICE) == ["gpu", "pool#spot/us-east-1a/g5.xlarge"]
    # which zone a Spot launch of a group of two zones failed in is not said: the group alone
    assert failed_launch_backoffs(SPOT_ICE, ("us-east-1a", "us-east-1b")) == ["gpu"]
    # a quota is the account's, not a pool's; a launch that timed out says nothing of capacity
    assert failed_launch_backoffs("You have requested more vCPU capacity than your current vCPU limit of "
                                  "32 allows (VcpuLimitExceeded). Launching EC2 instance failed.") == ["gpu"]  # fmt: skip
    assert failed_launch_backoffs(None) == ["gpu"]
    # a launch that failed for the group's own settings: the group, none of whose pools can launch
    assert failed_launch_backoffs(o.SUBNET_FULL) == ["gpu"]


def test_a_raise_whose_launches_failed_in_two_zones_backs_off_both_pools() -> None:
    """A raise of two whose launches both Failed, one in us-east-1a and one in us-east-1b, each zone
    named short of g5.xlarge in its own activity (Auto Scaling writes one per instance launch). The
    back-off took its pool from verify's one failure and backed off us-east-1a's alone: other groups
    of g5.xlarge in us-east-1b kept being raised into the pool EC2 had just refused."""
    cloud = gpu_cloud(1)
    raw = cloud.groups[("us-east-1", "gpu")]
    raw["AvailabilityZones"] = ["us-east-1a", "us-east-1b"]
    prep = steps(cloud).prepare({"group": GROUP, "launch_timeout_seconds": 60})
    zone_b_short = ZONE_A_SHORT.replace("(us-east-1a)", "(us-east-1b)")
    cloud.activities[("us-east-1", "gpu")] = [
        {**o.failed_launch(raw, NOW + timedelta(seconds=1)), "StatusMessage": zone_b_short},
        {**o.failed_launch(raw, NOW), "StatusMessage": ZONE_A_SHORT},
    ]
    launch = steps(cloud).verify({"group": GROUP, "prep": prep})
    assert launch["status"] == "failed"
    ledger = FakeLedger()

    steps(cloud, ledger=ledger).backoff({"cluster": "ml", "group": GROUP, "prep": prep, "launch": launch})

    assert sorted(g for g, _, _ in ledger.backoffs) == [
        "gpu", "pool#on-demand/us-east-1a/g5.xlarge", "pool#on-demand/us-east-1b/g5.xlarge"
    ]  # fmt: skip


def test_a_spot_failure_of_a_group_whose_template_changed_type_backs_off_the_type_it_launches_now() -> None:
    """A Spot shortage names no type: the pool is the group's one type in its one zone, which is the type
    its launch template names now, as observe gives the plan (spillway.model.nodegroup
    resolve_instance_type), not the type its older instances still run. Backing off the old type's pool
    kept every group of the new type in that zone launching into the shortage, and skipped the groups of
    the old type that had capacity."""
    # the template changed to g6.xlarge after gpu-0 (a g5.xlarge) launched
    backoffs = failed_launch_backoffs(SPOT_ICE, template_type="g6.xlarge")
    assert backoffs == ["gpu", "pool#spot/us-east-1a/g6.xlarge"]


def test_a_spot_shortfall_worded_unfulfillable_backs_off_its_pool_as_insufficient_capacity_does() -> None:
    """A mixed group's Spot launch fails "UnfulfillableCapacity" (EC2 API error codes: not enough spare
    Spot capacity) as often as InsufficientInstanceCapacity: the same classification as a gang's fleet
    (spillway.model.launcherror) reads both as capacity, so the pool is backed off for both; a full quota
    or a settings code is the group's alone."""
    unfulfillable = (
        "Could not launch Spot Instances. UnfulfillableCapacity - Unable to fulfill capacity due to your "
        "request configuration. Please adjust your request and try again. Launching EC2 instance failed."
    )
    assert failed_launch_backoffs(unfulfillable) == ["gpu", "pool#spot/us-east-1a/g5.xlarge"]
    assert failed_launch_backoffs("Could not launch Spot Instances. MaxSpotInstanceCountExceeded - Max spot "
                                  "instance count exceeded. Launching EC2 instance failed.") == ["gpu"]  # fmt: skip
    assert failed_launch_backoffs(f"InvalidParameterValue - bad block device. {SPOT_ICE}") == ["gpu"]


def test_a_capacity_failure_worded_without_its_code_backs_off_its_pool_as_the_coded_one_does() -> None:
    """DescribeScalingActivities does not always put EC2's code before its words: the Auto Scaling
    User Guide's own example of a failed Spot launch reads "Your Spot request price of 0.001 is lower
    than the minimum required Spot request fulfillment price of 0.0031. Launching EC2 instance failed.",
    and its troubleshooting page words an instance type not offered in a zone without ``Unsupported``.
    The classification (spillway.model.launcherror) calls SpotMaxPriceTooLow and Unsupported capacity,
    but read these words as the group's own settings, so the Spot pool was not backed off and other
    groups of it kept trying it. An EC2 state reason code (``Server.InsufficientInstanceCapacity``)
    was capacity to the substring match before the classification and settings after it."""
    price = (
        "Your Spot request price of 0.001 is lower than the minimum required Spot request fulfillment "
        "price of 0.0031. Launching EC2 instance failed."
    )
    assert failed_launch_backoffs(price) == ["gpu", "pool#spot/us-east-1a/g5.xlarge"]
    assert failed_launch_backoffs(f"Could not launch Spot Instances. SpotMaxPriceTooLow - {price}") == [
        "gpu", "pool#spot/us-east-1a/g5.xlarge"
    ]  # fmt: skip
    unsupported = (
        "Your requested instance type (g5.xlarge) is not supported in your requested Availability Zone "
        "(us-east-1a). Please retry your request by not specifying an Availability Zone or choosing "
        "us-east-1b, us-east-1c. Launching EC2 instance failed."
    )
    assert failed_launch_backoffs(unsupported) == ["gpu", "pool#on-demand/us-east-1a/g5.xlarge"]
    state_reason = (
        "Instance became unhealthy while waiting for instance to be in InService state. Termination "
        "Reason: Server.InsufficientInstanceCapacity: Insufficient capacity to satisfy launch request"
    )
    assert failed_launch_backoffs(state_reason) == ["gpu", "pool#on-demand/us-east-1a/g5.xlarge"]


def test_a_type_not_offered_in_one_zone_of_a_group_of_several_backs_off_that_pool() -> None:
    """EC2 names the instance type and the zone that does not offer it ("Your requested instance type
    (g5.xlarge) is not supported in your requested Availability Zone (us-east-1a)", Unsupported), as it
    names them for an on-demand shortage; the pool was read only from the shortage's words, so for a
    group of several zones only the group backed off, and every other group of that type kept launching
    into the zone that will never have it."""
    unsupported = (
        "Could not launch On-Demand Instances. Unsupported - Your requested instance type (g5.xlarge) is not "
        "supported in your requested Availability Zone (us-east-1a). Please retry your request by not "
        "specifying an Availability Zone or choosing us-east-1b, us-east-1c. Launching EC2 instance failed."
    )
    assert failed_launch_backoffs(unsupported, ("us-east-1a", "us-east-1b")) == [
        "gpu", "pool#on-demand/us-east-1a/g5.xlarge"
    ]  # fmt: skip


ZONE_A_SHORT = (
    "We currently do not have sufficient g5.xlarge capacity in the Availability Zone you requested "
    "(us-east-1a). Our system will be working on provisioning additional capacity. You can currently get "
    "g5.xlarge capacity by not specifying an Availability Zone in your request or choosing us-east-1b. "
    "Launching EC2 instance failed."
)


def zone_failed_backoff(
    zones: tuple[str, ...], message: str, overrides: tuple[str, ...] = ()
) -> tuple[FakeCloud, str, dict[str, Any], FakeLedger]:
    """Group gpu (one instance before) raised by 2: one launch failed with ``message``, the other started
    in the group's last zone and is booting (its Node registered, not Ready yet), as the last of
    ``overrides`` when the group has a mixed instances policy of those types. The cloud, the booting
    instance, the back-off's result and the ledger."""
    cloud = gpu_cloud(1)
    raw = cloud.groups[("us-east-1", "gpu")]
    raw["AvailabilityZones"] = list(zones)
    if overrides:
        raw["MixedInstancesPolicy"] = {
            "LaunchTemplate": {"LaunchTemplateSpecification": raw.pop("LaunchTemplate"),
                               "Overrides": [{"InstanceType": t} for t in overrides]},
            "InstancesDistribution": {"OnDemandBaseCapacity": 0, "OnDemandPercentageAboveBaseCapacity": 100},
        }  # fmt: skip
    prep = steps(cloud).prepare({"group": GROUP, "launch_timeout_seconds": 60, "plan_id": "p1"})
    booting = o.instance_id("gpu-b")
    raw["Instances"].append({**raw["Instances"][0], "InstanceId": booting, "AvailabilityZone": zones[-1],
                             "InstanceType": (overrides or ("g5.xlarge",))[-1],
                             "LifecycleState": "Pending"})  # fmt: skip
    raw["DesiredCapacity"] = 3
    cloud.dns[booting] = f"node-{booting}"
    cloud.ec2[booting] = {"region": "us-east-1", "state": "running", "tags": {}}
    kube = FakeCluster([o.node(f"node-{iid}", instance=iid, ready=(iid != booting))
                        for iid in (o.instance_id("gpu-0"), booting)])  # fmt: skip
    cloud.activities[("us-east-1", "gpu")] = [{**o.failed_launch(raw, NOW), "StatusMessage": message}]
    launch = steps(cloud).verify({"group": GROUP, "prep": prep})
    assert launch["status"] == "failed"
    ledger = FakeLedger()
    ledger.claimed[("ml", f"raise#{prep['owner']}")] = {"before": 1, "after": 3, "count": 2}
    out = steps(cloud, kube, ledger).backoff(
        {"cluster": "ml", "group": GROUP, "prep": prep, "launch": launch}
    )
    return cloud, booting, out, ledger


def test_a_launch_short_in_one_zone_of_two_keeps_the_instance_the_other_zone_launched() -> None:
    """A raise of 2 in a group over us-east-1a and us-east-1b: EC2 had no g5.xlarge in us-east-1a, and
    Auto Scaling started the other in us-east-1b (its default balanced-best-effort strategy launches in
    another zone when one fails: AWS::AutoScaling::AutoScalingGroup AvailabilityZoneDistribution). The
    back-off terminated that booting instance as undelivered, and its pod overflowed to another region
    while the instance would have joined a minute later; cluster-autoscaler removes only the desired
    capacity never started (its placeholders) and keeps it. Now it is kept (the plans count it as
    capacity launching), only the capacity never started is given back, and the group and the pool
    EC2 named are backed off as before."""
    cloud, booting, out, ledger = zone_failed_backoff(("us-east-1a", "us-east-1b"), ZONE_A_SHORT)

    assert writes(cloud) == [("set_desired_capacity", 2)]  # the one never started, nothing terminated
    assert out["kept"] == [booting] and out["terminated"] == [] and out["desired"] == 2
    assert "kept 1 instance(s) Auto Scaling did launch for this raise, still booting" in out["reason"]
    assert sorted(g for g, _, _ in ledger.backoffs) == ["gpu", "pool#on-demand/us-east-1a/g5.xlarge"]


def test_a_launch_short_of_one_type_of_a_mixed_group_keeps_the_instance_another_type_launched() -> None:
    """A one-zone group of g5.xlarge and g5.2xlarge overrides: EC2 had no g5.xlarge, and Auto Scaling
    launched the raise's other instance as g5.2xlarge (its allocation strategy goes on to the next
    override when one type has no capacity: EC2 Auto Scaling user guide, "Allocation strategies for
    multiple instance types"). As with another zone, that instance is capacity booting for the pods,
    not a launch that failed: it was terminated, only the multi-zone case kept it. (Found by review.)"""
    cloud, booting, out, ledger = zone_failed_backoff(
        ("us-east-1a",), ZONE_A_SHORT, ("g5.xlarge", "g5.2xlarge")
    )

    assert out["kept"] == [booting] and out["terminated"] == [] and out["desired"] == 2
    assert writes(cloud) == [("set_desired_capacity", 2)]
    assert sorted(g for g, _, _ in ledger.backoffs) == ["gpu", "pool#on-demand/us-east-1a/g5.xlarge"]


@pytest.mark.parametrize(
    ("zones", "message"),
    [(("us-east-1a",), ZONE_A_SHORT), (("us-east-1a", "us-east-1b"), SPOT_ICE), (("us-east-1a", "us-east-1b"), o.MISSING_AMI)],
    ids=["one-zone", "no-zone-named", "settings"],
)  # fmt: skip
def test_a_failed_launch_keeps_the_instances_the_raise_did_start_whatever_the_failure(
    zones: tuple[str, ...], message: str
) -> None:
    """A raise of 2: one launch activity Failed (the one zone short, a Spot shortage naming no zone, a
    subnet or AMI setting in one place), and Auto Scaling started the other, booting. DescribeScalingActivities
    has one activity per instance launch, and a Failed one says that launch did not start: it says
    nothing of the instance another activity did start. The back-off terminated that instance with the
    rest of the raise unless EC2 named a pool of a group over several zones or types, so a raise short of
    one node lost both, and their pods overflowed to another region though one node would have joined.
    cluster-autoscaler keeps a group's real instances whatever its failed activity says (its AWS
    provider marks only the placeholders for desired capacity never started unfulfillable:
    auto_scaling_groups.go, createPlaceholdersForDesiredNonStartedInstances and isNodeGroupAvailable).
    Now the instance is kept, counted by the plans as capacity launching (and removed by them if it
    never joins: max_node_provision_minutes), and only the capacity never started is given back."""
    cloud, booting, out, _ = zone_failed_backoff(zones, message)

    assert out["kept"] == [booting] and out["terminated"] == [] and out["desired"] == 2
    assert writes(cloud) == [("set_desired_capacity", 2)]


def launch_activity(group: dict[str, Any], iid: str, at: datetime, status: str) -> dict[str, Any]:
    """The ``describe-scaling-activities`` entry of a raise's launch of ``iid`` (one per instance), in
    ``status`` (``InProgress``, ``PreInService``, ``Successful``, ...)."""
    return {
        "ActivityId": f"act-{iid}", "AutoScalingGroupName": group["AutoScalingGroupName"],
        "AutoScalingGroupARN": group["AutoScalingGroupARN"],
        "Description": f"Launching a new EC2 instance: {iid}",
        "Cause": f"At {at.isoformat()} an instance was started in response to a difference between desired "
                 "and actual capacity, increasing the capacity from 1 to 3.",
        "StartTime": at.isoformat(), "StatusCode": status, "Progress": 50,
        **({"EndTime": at.isoformat()} if status in ("Successful", "Failed", "Cancelled") else {}),
    }  # fmt: skip


def partly_failed(status: str, count: int = 2) -> tuple[FakeCloud, dict[str, Any], dict[str, Any], str]:
    """Group gpu over us-east-1a and us-east-1b (one instance before) raised by ``count``: one launch
    Failed for g5.xlarge in us-east-1a, and one instance (in us-east-1b, its Node not Ready yet) whose
    launch activity is in ``status``. The cloud, the group entry, prepare's answer and that instance."""
    cloud = gpu_cloud(1)
    raw = cloud.groups[("us-east-1", "gpu")]
    raw["AvailabilityZones"] = ["us-east-1a", "us-east-1b"]
    group = {**GROUP, "to": 1 + count}
    prep = steps(cloud).prepare({"group": group, "launch_timeout_seconds": 60, "plan_id": "p1"})
    other = o.instance_id("gpu-b")
    state = "InService" if status == "Successful" else "Pending"
    raw["Instances"].append({**raw["Instances"][0], "InstanceId": other, "AvailabilityZone": "us-east-1b",
                             "LifecycleState": state})  # fmt: skip
    raw["DesiredCapacity"] = 1 + count
    cloud.dns[other] = f"node-{other}"
    cloud.ec2[other] = {"region": "us-east-1", "state": "running", "tags": {}}
    cloud.activities[("us-east-1", "gpu")] = [
        launch_activity(raw, other, NOW + timedelta(seconds=2), status),
        {**o.failed_launch(raw, NOW), "StatusMessage": ZONE_A_SHORT},
    ]
    return cloud, group, prep, other


@pytest.mark.parametrize("status", ["InProgress", "PreInService", "WaitingForInstanceWarmup"])
def test_a_failed_launch_beside_one_still_in_progress_is_not_yet_a_failed_raise(status: str) -> None:
    """One activity per instance launch (DescribeScalingActivities): the raise's launch in us-east-1a
    Failed while its other launch, in us-east-1b, is still under way (StatusCode InProgress,
    PreInService, ...: not one of the ended Successful, Failed, Cancelled). verify answered ``failed``
    at the first Failed activity, and the back-off then took the desired capacity never started back
    while Auto Scaling was still launching (its balanced-best-effort strategy tries another zone when
    one fails: AWS::AutoScaling::AutoScalingGroup AvailabilityZoneDistribution). Now the raise is
    ``launching`` while a launch of it is under way, and ``failed`` once none is (or at its deadline)."""
    cloud, group, prep, _ = partly_failed(status)
    kube = FakeCluster()

    assert steps(cloud, kube).verify({"group": group, "prep": prep})["status"] == "launching"

    past = ScaleSteps(kube=kube, aws=cloud, ledger=FakeLedger(), snapshots=FakeSnapshots(), settings=settings(),
                      clock=lambda: NOW + timedelta(seconds=61))  # fmt: skip
    assert past.verify({"group": group, "prep": prep})["status"] == "failed"  # the deadline ends the wait


def test_a_failed_launch_the_raise_made_good_elsewhere_is_no_failed_raise() -> None:
    """A raise of 1: its launch in us-east-1a Failed and Auto Scaling launched the instance in
    us-east-1b instead (Successful). The raise delivered every instance it asked for, so verify
    answered ``failed`` for nothing: the back-off backed the group off and the plans skipped a group
    that had launched. Now it waits for the instance's Node, ``ready`` once it is."""
    cloud, group, prep, other = partly_failed("Successful", count=1)
    kube = FakeCluster([o.node(f"node-{other}", instance=other, ready=False)])

    assert steps(cloud, kube).verify({"cluster": "ml", "group": group, "prep": prep})["status"] == "launching"

    kube = FakeCluster([o.node(f"node-{other}", instance=other, ready=True)])
    ready = steps(cloud, kube).verify({"cluster": "ml", "group": group, "prep": prep})
    assert ready["status"] == "ready" and ready["nodes"] == [f"node-{other}"]


def test_a_failed_launch_made_good_in_another_zone_backs_off_the_pool_it_found_short_not_the_group() -> None:
    """The raise's launch in us-east-1a Failed for g5.xlarge capacity and Auto Scaling launched in
    us-east-1b instead. The group is no failure (the plans skip it no longer once it runs its desired
    capacity), but EC2 said on-demand g5.xlarge in us-east-1a had none: that pool is backed off as a
    failed raise's would be (act.backoff.failed_pool), from the failure's time for
    launch_failure_backoff_minutes, so other groups that launch only there skip it and a gang's fleet
    asks elsewhere. Nothing at all was backed off: the made-good failure was forgotten with its pool."""
    cloud, group, prep, other = partly_failed("Successful", count=1)
    kube = FakeCluster([o.node(f"node-{other}", instance=other, ready=True)])
    ledger = FakeLedger()

    ready = steps(cloud, kube, ledger).verify({"cluster": "ml", "group": group, "prep": prep})

    assert ready["status"] == "ready"
    window = timedelta(
        minutes=PlannerConfig(cluster="ml", regions=["us-east-1"]).launch_failure_backoff_minutes
    )
    assert [(name, until) for name, until, _ in ledger.backoffs] == [
        ("pool#on-demand/us-east-1a/g5.xlarge", NOW + window)
    ]
    assert ledger.backoff_regions == ["us-east-1"]


ZONE_C_SHORT = ZONE_A_SHORT.replace("(us-east-1a)", "(us-east-1c)")


def test_failed_launches_made_good_back_off_every_pool_they_found_short() -> None:
    """The raise's launches Failed in us-east-1a and then in us-east-1c (EC2 named each zone short of
    g5.xlarge) before Auto Scaling launched the instance in us-east-1b. Each failure is its own pool
    (act.backoff keys a pool by capacity type, zone and type, one state item each), but verify backed
    off only the first failure's: a one-zone group of g5.xlarge in us-east-1c was raised into the pool
    EC2 had just refused."""
    cloud, group, prep, other = partly_failed("Successful", count=1)
    raw = cloud.groups[("us-east-1", "gpu")]
    raw["AvailabilityZones"] = ["us-east-1a", "us-east-1b", "us-east-1c"]
    cloud.activities[("us-east-1", "gpu")].append(
        {**o.failed_launch(raw, NOW + timedelta(seconds=1)), "StatusMessage": ZONE_C_SHORT}
    )
    kube = FakeCluster([o.node(f"node-{other}", instance=other, ready=True)])
    ledger = FakeLedger()

    assert (
        steps(cloud, kube, ledger).verify({"cluster": "ml", "group": group, "prep": prep})["status"]
        == "ready"
    )
    assert sorted(name for name, _, _ in ledger.backoffs) == [
        "pool#on-demand/us-east-1a/g5.xlarge",
        "pool#on-demand/us-east-1c/g5.xlarge",
    ]


def test_a_failed_launch_made_good_in_the_pool_it_failed_in_backs_nothing_off() -> None:
    """Auto Scaling launched the raise's node in the very pool EC2 refused a moment before: capacity came
    back there, and nothing is backed off."""
    cloud, group, prep, other = partly_failed("Successful", count=1)
    raw = cloud.groups[("us-east-1", "gpu")]
    raw["Instances"][-1]["AvailabilityZone"] = "us-east-1a"
    kube = FakeCluster([o.node(f"node-{other}", instance=other, ready=True)])
    ledger = FakeLedger()

    assert (
        steps(cloud, kube, ledger).verify({"cluster": "ml", "group": group, "prep": prep})["status"]
        == "ready"
    )
    assert ledger.backoffs == []


def test_a_failed_launch_made_good_backs_off_its_pool_when_the_raise_then_times_out() -> None:
    """The raise's launch in us-east-1a Failed for g5.xlarge capacity, Auto Scaling launched in us-east-1b
    instead, and that node was not Ready by the deadline: verify answers ``timeout`` and the back-off
    backs the group off, but a timeout names no pool, so the pool EC2 had just said was short was
    forgotten (only a raise ending ``ready`` backed it off): a one-zone group of that pool was raised
    into it at once. It is backed off at the timeout as at the Ready answer."""
    cloud, group, prep, _ = partly_failed("Successful", count=1)
    ledger = FakeLedger()
    late = ScaleSteps(kube=FakeCluster(), aws=cloud, ledger=ledger, snapshots=FakeSnapshots(), settings=settings(),
                      clock=lambda: NOW + timedelta(seconds=61))  # fmt: skip

    assert late.verify({"cluster": "ml", "group": group, "prep": prep})["status"] == "timeout"
    window = timedelta(
        minutes=PlannerConfig(cluster="ml", regions=["us-east-1"]).launch_failure_backoff_minutes
    )
    assert [(name, until) for name, until, _ in ledger.backoffs] == [
        ("pool#on-demand/us-east-1a/g5.xlarge", NOW + window)
    ]


SPOT_SHORT = (
    "Could not launch Spot Instances. InsufficientInstanceCapacity - There is no Spot capacity available "
    "that matches your request. Launching EC2 instance failed."
)


@pytest.mark.parametrize(
    ("message", "pool"),
    [(SPOT_SHORT, "pool#spot/us-east-1a/g5.xlarge"), (ZONE_A_SHORT, "pool#on-demand/us-east-1a/g5.xlarge")],
)
def test_a_failed_launch_made_good_as_the_other_capacity_type_still_backs_off_its_pool(
    message: str, pool: str
) -> None:
    """A group of g5.xlarge in us-east-1a whose mixed instances policy launches half Spot, half
    on-demand: a launch of its raise Failed for one capacity type and the raise was made good by an
    instance of the other, in the same zone and type. Spot and on-demand of a type in a zone are two
    pools (their capacity is not the same: a Spot shortage says nothing of on-demand, and the
    reverse), but the instance there was taken for capacity come back to the failed pool, and nothing
    was backed off: a Spot-only group of g5.xlarge there was raised into the pool EC2 had just refused.
    An instance proves its pool had capacity only where the group launches one capacity type."""
    cloud, group, prep, other = partly_failed("Successful", count=1)
    raw = cloud.groups[("us-east-1", "gpu")]
    raw["AvailabilityZones"] = ["us-east-1a"]
    raw["Instances"][-1]["AvailabilityZone"] = "us-east-1a"
    raw["MixedInstancesPolicy"] = {
        "LaunchTemplate": {"LaunchTemplateSpecification": raw.pop("LaunchTemplate"),
                           "Overrides": [{"InstanceType": "g5.xlarge"}]},
        "InstancesDistribution": {"OnDemandBaseCapacity": 0, "OnDemandPercentageAboveBaseCapacity": 50},
    }  # fmt: skip
    cloud.activities[("us-east-1", "gpu")][1]["StatusMessage"] = message
    kube = FakeCluster([o.node(f"node-{other}", instance=other, ready=True)])
    ledger = FakeLedger()

    assert (
        steps(cloud, kube, ledger).verify({"cluster": "ml", "group": group, "prep": prep})["status"]
        == "ready"
    )
    assert [name for name, _, _ in ledger.backoffs] == [pool]


def test_a_failed_launch_with_none_under_way_and_the_raise_short_is_a_failed_raise() -> None:
    """The other launch of the raise ended Successful and nothing more is under way: the raise is one
    node short, and the failure is what it is (the back-off keeps the launched instance)."""
    cloud, group, prep, _ = partly_failed("Successful")

    out = steps(cloud).verify({"group": group, "prep": prep})

    assert out["status"] == "failed" and out["failure"] == ZONE_A_SHORT


def test_next_round_ends_when_every_group_launched_or_the_rounds_are_spent() -> None:
    cloud = gpu_cloud(1)
    base = {"cluster": "ml", "plan_id": "p", "snapshot_key": "k", "poll_seconds": 1,
            "launch_timeout_seconds": 5, "rounds": []}  # fmt: skip

    launched = steps(cloud).next_round({**base, "round": 1, "max_rounds": 3,
                                        "results": [{"group": "gpu", "outcome": "ready"}]})  # fmt: skip
    spent = steps(cloud).next_round({**base, "round": 3, "max_rounds": 3,
                                     "results": [{"group": "gpu", "outcome": "backed_off"}]})  # fmt: skip

    assert launched["done"] and launched["result"] == "launched" and launched["groups"] == []
    assert spent["done"] and spent["result"] == "gave up after 3 round(s)"
    assert [r["round"] for r in spent["rounds"]] == [3]
    assert cloud.called("node_groups_in") == []  # no re-plan (it reads region by region)


def planned_east_and_west(seconds: int) -> tuple[Rig, SnapshotRef, Any, ScaleSteps]:
    """gpu_world planned at NOW + 5 s, and the scale-up's steps ``seconds`` after NOW over a cloud of its
    two groups (gpu-east, gpu-west) and a store holding its snapshot."""
    rig = Rig()
    first = snapshot_of(gpu_world(), NOW)
    ref = rig.snapshots.add(first)
    plan = rig.run(ref, now=NOW + timedelta(seconds=5))
    cloud = FakeCloud(cluster="ml")
    for group in first.groups:
        cloud.node_groups_by_region.setdefault(group.region, []).append(group)
    snapshots = FakeSnapshots()
    snapshots.add(first)
    scale = ScaleSteps(kube=FakeCluster(), aws=cloud, ledger=rig.ledger, snapshots=snapshots,
                       settings=settings(), clock=lambda: NOW + timedelta(seconds=seconds))  # fmt: skip
    return rig, ref, plan, scale


def test_a_group_whose_raise_errored_is_backed_off_and_its_pods_overflow() -> None:
    """SetDesiredCapacity failed for good (AccessDenied): the group's iteration ended in Errored, and no
    back-off was written, so the re-plan (and every plan until the raise aged out) still counted the
    plan's nodes as launching there and nothing spilled over to the other region. (Found by review.)"""
    rig, ref, plan, scale = planned_east_and_west(seconds=30)
    error = {"group": "gpu-east", "region": "us-east-1", "outcome": "error", "error": "AwsError",
             "cause": "SetDesiredCapacity(us-east-1, gpu-east, 3): AccessDenied: not authorized"}  # fmt: skip

    out = scale.next_round({"cluster": "ml", "plan_id": plan.plan_id, "snapshot_key": ref.key, "round": 1,
                            "max_rounds": 3, "poll_seconds": 1, "launch_timeout_seconds": 30, "rounds": [],
                            "results": [error]})  # fmt: skip

    assert [g["group"] for g in out["groups"]] == ["gpu-west"]
    [(group, _, reason)] = rig.ledger.backoffs
    assert group == "gpu-east" and "AccessDenied" in reason

    # an error that says nothing of the group (the Kubernetes API down while verifying a raise that
    # landed) backs nothing off: the same pods would get nodes in both regions
    rig.ledger.backoffs.clear()
    kube_down = {**error, "error": "KubeUnavailable", "cause": "list nodes: 503"}
    scale.next_round({"cluster": "ml", "plan_id": plan.plan_id, "snapshot_key": ref.key, "round": 1,
                      "max_rounds": 3, "poll_seconds": 1, "launch_timeout_seconds": 30, "rounds": [],
                      "results": [kube_down]})  # fmt: skip
    assert rig.ledger.backoffs == []


def test_the_overflow_re_plan_counts_gang_members_held_at_home_as_the_plan_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The scale function's overflow re-plan is a plan: UnplaceablePods and, of them, GangPodsHeldAtHome
    (gang members kept to a full home region, or to nodes of unknown region). It emitted
    UnplaceablePods only, so the dashboard's held-at-home line had a gap at every overflow round."""
    import spillway.act.scale as scale_module

    def holding(*args: Any, **kwargs: Any) -> ScalingPlan:
        result = run_planner(*args, **kwargs)
        held = (
            PendingPod("ml/w-2", "r", codes.GANG_HOME_FULL),
            PendingPod("ml/w-3", "r", codes.GANG_HOME_UNKNOWN),
        )
        return replace(result, pending=(*result.pending, *held))

    monkeypatch.setattr(scale_module, "run_planner", holding)
    _rig, ref, plan, scale = planned_east_and_west(seconds=30)
    counted: dict[str, float] = {}
    scale.metric = lambda name, value: counted.__setitem__(name, value)
    refused = {"group": "gpu-east", "region": "us-east-1", "outcome": "backed_off", "reason": "no capacity"}

    scale.next_round({"cluster": "ml", "plan_id": plan.plan_id, "snapshot_key": ref.key, "round": 1,
                      "max_rounds": 3, "poll_seconds": 1, "launch_timeout_seconds": 30, "rounds": [],
                      "results": [refused]})  # fmt: skip

    assert counted["GangPodsHeldAtHome"] == 2.0
    assert counted["UnplaceablePods"] >= 2.0


def test_a_group_whose_raise_landed_is_not_backed_off_for_an_aws_error_after_it() -> None:
    """The plan's raise of gpu-east landed (its marker is kept), then verify's DescribeScalingActivities
    was refused (AccessDenied: a role missing one permission). The iteration ended in Errored with
    AwsError and next_round backed the group off as if the raise had been refused, so the re-plan
    raised gpu-west for the same pods while gpu-east launched them: two nodes paid for one pod. An
    error reading a group says nothing of its launch (cluster-autoscaler takes a group whose scaling
    activities it cannot read as available: auto_scaling_groups.go, isNodeGroupAvailable); the raise
    stays capacity launching, and nothing is launched twice."""
    rig, ref, plan, scale = planned_east_and_west(seconds=60)
    rig.ledger.claim("ml", f"{RAISE_PREFIX}up-{plan.plan_id}-1-us-east-1-gpu-east"[: len(RAISE_PREFIX) + 200],
                     {"before": 1, "after": 3, "count": 2}, expires=NOW + timedelta(days=2))  # fmt: skip
    error = {"group": "gpu-east", "region": "us-east-1", "outcome": "error", "error": "AwsError",
             "cause": "DescribeScalingActivities(us-east-1, gpu-east): AccessDenied: not authorized"}  # fmt: skip

    out = scale.next_round({"cluster": "ml", "plan_id": plan.plan_id, "snapshot_key": ref.key, "round": 1,
                            "max_rounds": 3, "poll_seconds": 1, "launch_timeout_seconds": 30, "rounds": [],
                            "results": [error]})  # fmt: skip

    assert [g["group"] for g in out["groups"] if g.get("grow", True)] == [], out
    assert rig.ledger.backoffs == []


def overflow(
    rig: Rig, ref: SnapshotRef, plan_id: str, now: datetime, failed: str = "gpu-east"
) -> tuple[ScaleSteps, dict[str, Any]]:
    """The first round's launch in ``failed`` (us-east-1) failed: it backed off, the execution re-plans."""
    cloud = FakeCloud(cluster="ml")
    for group in rig.snapshots.get("ml", ref.key).groups:
        cloud.node_groups_by_region.setdefault(group.region, []).append(group)
    rig.ledger.put_backoff("ml", failed, now + timedelta(minutes=15), "launch failed: no capacity",
                           region="us-east-1")  # fmt: skip
    scale = ScaleSteps(kube=FakeCluster(), aws=cloud, ledger=rig.ledger, snapshots=rig.snapshots,
                       settings=settings(), clock=lambda: now)  # fmt: skip
    event = {"cluster": "ml", "plan_id": plan_id, "snapshot_key": ref.key, "round": 1, "max_rounds": 3,
             "poll_seconds": 1, "launch_timeout_seconds": 30, "rounds": [],
             "results": [{"group": failed, "region": "us-east-1", "outcome": "backed_off"}]}  # fmt: skip
    return scale, event


def test_an_overflow_replans_raise_is_recorded_so_the_next_plan_does_not_launch_its_pods_again() -> None:
    """The re-plan raised gpu-west for the 3 pods but recorded nothing in the state: the next plan,
    on a snapshot read before that raise landed, saw the pods pending, gpu-east backed off and gpu-west
    at 0, and raised gpu-west by 3 more. (Found by review.)"""
    rig = Rig()
    ref = rig.snapshots.add(snapshot_of(gpu_world(), NOW))
    plan = rig.run(ref, now=NOW + timedelta(seconds=5))
    scale, event = overflow(rig, ref, plan.plan_id, NOW + timedelta(seconds=30))

    out = scale.next_round(event)
    assert [(g["group"], g["from"], g["to"]) for g in out["groups"]] == [("gpu-west", 0, 3)]

    later = rig.snapshots.add(snapshot_of(gpu_world(), NOW + timedelta(seconds=40)))  # gpu-west still 0
    outcome = rig.run(later, now=NOW + timedelta(seconds=45))

    assert outcome.summary is not None and outcome.summary.scale_up_nodes == 0
    # the later plan starts nothing of its own (it asks for the earlier plan's again: refused by name)
    assert {r.name for r in rig.executions.requests} == {f"up-{plan.plan_id}"}
    assert rig.executions.started == [f"up-{plan.plan_id}"]
    record = rig.ledger.plans[later.key]
    assert {p["code"] for p in record.plan["pending"]} == {codes.FITS_LAUNCHING}
    assert all("gpu-west" in p["reason"] for p in record.plan["pending"])


def test_an_overflow_replan_commits_its_raise_with_its_record_and_the_plan_it_continues_still_resumes() -> (
    None
):
    rig = Rig()
    ref = rig.snapshots.add(snapshot_of(gpu_world(), NOW))
    plan = rig.run(ref, now=NOW + timedelta(seconds=5))
    scale, event = overflow(rig, ref, plan.plan_id, NOW + timedelta(seconds=30))

    scale.next_round(event)

    stored = rig.ledger.stored
    assert stored.version == 2 and stored.state.raises["us-west-2/gpu-west"].to == 3
    assert (stored.snapshot_key, stored.plan_id) == (ref.key, plan.plan_id)
    replan = rig.ledger.plans[f"{ref.key}#replan-2"]
    assert replan.kind == "replan" and replan.state_version == 2
    assert rig.run(ref, now=NOW + timedelta(seconds=35)).status == "resumed"


def test_an_overflow_replan_that_loses_the_state_to_a_plan_writes_nothing_and_its_retry_defers_to_it() -> (
    None
):
    rig = Rig()
    ref = rig.snapshots.add(snapshot_of(gpu_world(), NOW))
    plan = rig.run(ref, now=NOW + timedelta(seconds=5))
    scale, event = overflow(rig, ref, plan.plan_id, NOW + timedelta(seconds=30))
    later = rig.snapshots.add(snapshot_of(gpu_world(), NOW + timedelta(seconds=25)))
    rig.ledger.before_commit = lambda: rig.run(later, now=NOW + timedelta(seconds=28))  # it raises gpu-west

    with pytest.raises(StateConflict):
        scale.next_round(event)
    assert f"{ref.key}#replan-2" not in rig.ledger.plans

    retried = scale.next_round(event)  # NextRound retries StateConflict
    assert (
        retried["done"]
        and retried["groups"] == []
        and retried["result"] == "re-plan found nothing more to launch"
    )
    machine = json.loads((Path(__file__).parents[2] / "statemachines" / "scale_up.asl.json").read_text())
    assert any("StateConflict" in r["ErrorEquals"] for r in machine["States"]["NextRound"]["Retry"])


def test_an_overflow_replan_whose_commit_landed_with_its_answer_lost_launches_on_its_retry() -> None:
    """The re-plan's TransactWriteItems (its raise of gpu-west with its record) landed, but its answer
    was lost past botocore's retries (a read timeout: AwsUnavailable, which NextRound retries). The retry
    re-planned on the state its own commit wrote, took its own raise for capacity launching, found
    nothing to launch and ended: gpu-west was never raised, and the pods waited until the raise aged
    out (scale_up_claim_minutes) for a later plan. The record the commit wrote with the state
    (its key the plan's snapshot and the round, the plan's id in it) now carries the groups the round
    maps over, and the retry that finds it maps over them: the raise the state holds is made, once."""
    rig = Rig()
    ref = rig.snapshots.add(snapshot_of(gpu_world(), NOW))
    plan = rig.run(ref, now=NOW + timedelta(seconds=5))
    scale, event = overflow(rig, ref, plan.plan_id, NOW + timedelta(seconds=30))
    commit = rig.ledger.commit

    def answer_lost(cluster: str, state: State, **kw: Any) -> int:
        commit(cluster, state, **kw)
        raise AwsUnavailable("TransactWriteItems: Read timeout on endpoint URL")

    rig.ledger.commit = answer_lost  # type: ignore[method-assign]
    with pytest.raises(AwsUnavailable):
        scale.next_round(event)
    rig.ledger.commit = commit  # type: ignore[method-assign]
    assert rig.ledger.stored.state.raises["us-west-2/gpu-west"].to == 3  # it did land

    retried = scale.next_round(event)

    assert not retried["done"] and retried["round"] == 2
    assert [(g["group"], g["from"], g["to"]) for g in retried["groups"]] == [("gpu-west", 0, 3)]
    assert rig.ledger.stored.version == 2 and rig.ledger.commits == 2  # the plan's and the re-plan's, once


def pools_world(count: int) -> World:
    """``count`` groups, each with one pending pod only it can take (a node selector of its own)."""
    w = World()
    for i in range(count):
        w.group(f"pool-{i:02d}", "m5.xlarge", labels={"pool": f"p{i:02d}"})
        w.pods(f"job-{i:02d}", 1, cpu="2", memory="4Gi", node_selector={"pool": f"p{i:02d}"})
    return w


def test_a_plan_growing_more_groups_than_a_scale_up_round_holds_starts_them_in_parts() -> None:
    """Each group a scale-up round maps over adds its checks to the execution's history, which AWS
    caps at 25,000 events: an execution takes MAX_SCALE_UP_GROUPS groups, a plan growing more starts
    the rest as up-<plan>-2, -3 ... (named in order: a resumed plan starts the same ones)."""
    rig = Rig()
    ref = rig.snapshots.add(snapshot_of(pools_world(MAX_SCALE_UP_GROUPS * 2 + 1)))

    outcome = rig.run(ref)

    ups = [r for r in rig.executions.requests if r.kind == "scale_up"]
    pid = outcome.plan_id
    assert [r.name for r in ups] == [f"up-{pid}", f"up-{pid}-2", f"up-{pid}-3"]
    assert [len(r.input["groups"]) for r in ups] == [MAX_SCALE_UP_GROUPS, MAX_SCALE_UP_GROUPS, 1]
    grown = [g["group"] for r in ups for g in r.input["groups"]]
    assert sorted(grown) == [f"pool-{i:02d}" for i in range(MAX_SCALE_UP_GROUPS * 2 + 1)]
    assert all(NAME_PATTERN.match(r.name) for r in ups)
    assert {r.input["plan_id"] for r in ups} == {pid} and {r.input["round"] for r in ups} == {1}
    assert rig.run(ref).status == "resumed"
    assert [r.name for r in rig.executions.requests if r.kind == "scale_up"][3:] == [r.name for r in ups]


def test_an_overflow_replan_maps_over_a_rounds_groups_at_most_and_records_only_their_raises() -> None:
    """A re-plan growing more groups than a round holds keeps the first MAX_SCALE_UP_GROUPS; the others'
    raises are not recorded, so the next plan, seeing their pods still pending, launches them."""
    w = pools_world(MAX_SCALE_UP_GROUPS + 2)
    rig = Rig()
    ref = rig.snapshots.add(snapshot_of(w, NOW))
    cloud = FakeCloud(cluster="ml")
    for group in rig.snapshots.get("ml", ref.key).groups:
        cloud.node_groups_by_region.setdefault(group.region, []).append(group)
    scale = ScaleSteps(kube=FakeCluster(), aws=cloud, ledger=rig.ledger, snapshots=rig.snapshots,
                       settings=settings(), clock=lambda: NOW + timedelta(seconds=30))  # fmt: skip
    event = {"cluster": "ml", "plan_id": "p-1", "snapshot_key": ref.key, "round": 1, "max_rounds": 3,
             "poll_seconds": 1, "launch_timeout_seconds": 30, "rounds": [],
             "results": [{"group": "gone", "region": "us-east-1", "outcome": "refused"}]}  # fmt: skip

    out = scale.next_round(event)

    kept = [g["group"] for g in out["groups"]]
    assert len(kept) == MAX_SCALE_UP_GROUPS and not out["done"]
    assert set(rig.ledger.stored.state.raises) == {f"{g['region']}/{g['group']}" for g in out["groups"]}
    later = rig.snapshots.add(snapshot_of(w, NOW + timedelta(seconds=40)))
    rig.run(later, now=NOW + timedelta(seconds=45))
    [up] = [r for r in rig.executions.requests if r.kind == "scale_up"]
    assert sorted(g["group"] for g in up.input["groups"]) == sorted(
        {f"pool-{i:02d}" for i in range(MAX_SCALE_UP_GROUPS + 2)} - set(kept)
    )


def test_a_scale_down_too_large_for_one_execution_is_split_before_the_commit() -> None:
    """300 consolidations of nodes running 40 pods each: one scale-down input over Step Functions' 256 KB.
    The plan was committed, then StartExecution refused it for good, on every resume: the drains never
    ran. The drains go in as many executions as keep each input small, named in order. (Found by
    review.)"""
    drains = tuple(
        Drain(f"ip-10-1-{i // 250}-{i % 250}.ec2.internal", f"i-0{i:016x}", "general", "us-east-1",
              "consolidation: its pods fit on other nodes", codes.CONSOLIDATION,
              tuple(f"team-{i % 20:02d}/job-{i:04d}-worker-{j:03d}" for j in range(40)))
        for i in range(300)
    )  # fmt: skip

    downs = scale_down_parts(drains)
    plan_id = downs[0].name.removeprefix("down-")
    assert [r.name for r in downs] == [f"down-{plan_id}"] + [
        f"down-{plan_id}-{n}" for n in range(2, len(downs) + 1)
    ]
    assert len(downs) > 1 and all(len(json.dumps(r.input)) < 128 * 1024 for r in downs)
    assert [d["node"] for r in downs for d in r.input["drains"]] == [d.node for d in drains]
    # each part drains once the part before it ended: the plan drains at most DrainConcurrency nodes at
    # a time, as one execution would, not that many per part (found by review)
    executions = "arn:aws:states:us-east-1:123456789012:execution:spillway-ScaleDownStateMachine"
    assert executions.replace(":execution:", ":stateMachine:") == DOWN_ARN
    assert "after" not in downs[0].input
    assert [r.input["after"] for r in downs[1:]] == [f"{executions}:{r.name}" for r in downs[:-1]]


def test_a_scale_down_part_leaves_room_in_its_map_for_every_drains_line() -> None:
    """The Map state's output is its input and every drain's result, and Step Functions refuses a state
    over 256 KB with States.DataLimitExceeded, which no Catch takes (AWS Step Functions Developer Guide,
    "Handling errors in Step Functions workflows"; "Service quotas"). Parts were cut at 96 KB of input
    alone: 600 idle nodes' drains, about 300 bytes each, went some 330 to a part, and their results (a
    failed drain's held the child execution's whole DescribeExecution, up to 32,000 characters of cause)
    could not fit beside them: the part failed after its drains ran, its summary never written. Each
    drain's result is now its summary line, at most DRAIN_LINE_BYTES (the drain function's ``line``
    step), or its request echoed with the error when that step fails; a part holds no more drains than
    leave room for the worst of them."""
    drains = tuple(
        Drain(f"ip-10-2-{i // 250}-{i % 250}.ec2.internal", f"i-0{i:016x}", "general", "us-east-1",
              "no workload pods for 60m (threshold 10m); group general in us-east-1")
        for i in range(600)
    )  # fmt: skip

    downs = scale_down_parts(drains)
    assert [d["node"] for r in downs for d in r.input["drains"]] == [d.node for d in drains]
    for part in downs:
        items = part.input["drains"]
        worst = _bytes(part.input) + sum(_bytes(d) + 64 + DRAIN_LINE_BYTES for d in items)
        assert worst <= 256 * 1024, (len(items), worst)


def scale_down_parts(drains: tuple[Drain, ...]) -> list[Any]:
    """The scale-down executions a plan of ``drains`` starts, in order."""
    rig = Rig()
    ref = rig.snapshots.add(snapshot_of(gpu_world()))
    run_plan(ref, snapshots=rig.snapshots, ledger=rig.ledger, executions=rig.executions, settings=rig.settings,
             now=NOW + timedelta(seconds=20), planner=lambda *a: replace(run_planner(*a), drain=drains))  # fmt: skip
    return [r for r in rig.executions.requests if r.kind == "scale_down"]


def _bytes(doc: Any) -> int:
    return len(json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode())


def test_every_drain_of_a_scale_down_carries_when_its_plans_claim_on_the_node_lapses() -> None:
    """The Map drains MaxDrainConcurrency nodes at a time, and a part waits for the part before it: a
    drain late in the queue may start after drain_claim_minutes, when later plans judge its node again
    and its consolidation's premise (the pods fit elsewhere) is as old. So every drain item, in every
    part (the first included), carries when the plan's claim lapses (the plan's time plus
    drain_claim_minutes, as the planner's claimed_at counts it), and DrainNode's validation cancels a
    drain that starts after it. An unregistered instance's removal carries none: its step checks the
    instance again when it runs, and no claim keeps later plans off it."""
    drains = _consolidations(150)
    gone = Unregistered("i-0ffffffffffffffff", "general", "us-east-1", True, "no Node joined in 15 min")
    rig = Rig(settings=settings(planner=PlannerConfig(cluster="ml", drain_claim_minutes=12.5)))
    ref = rig.snapshots.add(snapshot_of(gpu_world()))
    planned = NOW + timedelta(seconds=20, microseconds=700_000)

    run_plan(ref, snapshots=rig.snapshots, ledger=rig.ledger, executions=rig.executions, settings=rig.settings,
             now=planned, planner=lambda *a: replace(run_planner(*a), drain=drains, unregistered=(gone,)))  # fmt: skip

    downs = [r for r in rig.executions.requests if r.kind == "scale_down"]
    assert len(downs) > 1
    until = (planned + timedelta(minutes=12.5)).replace(microsecond=0)  # whole seconds, never later
    claim = {"planned_at": planned.replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ"),
             "claim_minutes": 12.5, "claim_until": until.strftime("%Y-%m-%dT%H:%M:%SZ")}  # fmt: skip
    items = [d for r in downs for d in r.input["drains"]]
    assert [d["node"] for d in items if "node" in d] == [d.node for d in drains]
    for item in items:
        if item.get("unregistered"):
            assert not set(claim) & set(item), item
        else:
            assert {k: item[k] for k in claim} == claim
    assert [d["instance_id"] for d in items if d.get("unregistered")] == [gone.instance_id]
    for part in downs:  # the claim is the drains', not the parts'
        assert not set(claim) & set(part.input)
    # DrainNode accepts the item as it is
    assert parse_request({"cluster": "ml", "plan_id": "p", **items[0]}).claim_until == claim["claim_until"]
    # the claim is committed with the executions: a resumed plan restarts its drains with it
    assert rig.ledger.stored.executions[-1]["input"]["drains"][0]["claim_until"] == claim["claim_until"]


def _consolidations(count: int) -> tuple[Drain, ...]:
    """``count`` consolidations naming 40 pods each: too many for one scale-down input from about 60."""
    return tuple(
        Drain(f"ip-10-1-{i // 250}-{i % 250}.ec2.internal", f"i-0{i:016x}", "general", "us-east-1",
              "consolidation: its pods fit on other nodes", codes.CONSOLIDATION,
              tuple(f"team-{i % 20:02d}/job-{i:04d}-worker-{j:03d}" for j in range(40)))
        for i in range(count)
    )  # fmt: skip


@pytest.mark.parametrize(("claim_minutes", "budget"), [(12.5, 12), (0.5, 0), (0, None)])
def test_a_split_scale_downs_later_parts_wait_for_the_part_before_no_longer_than_the_plans_claim(
    claim_minutes: float, budget: int | None
) -> None:
    """A part after the first polled the part before for as long as that one ran, past the plan's claim
    on its nodes, and then started a DrainNode execution per node only for its validation to cancel
    each. Each part after the first now gets a poll budget: the claim time left at the plan's time
    (claim_until, whole seconds rounded down, less the plan's 20.7 s) divided by the wait between looks,
    rounded down, so that budget waits take no longer than the claim and one more wait would outlast
    it. The part stops once it is spent (scale_down.asl.json, ClaimLapsed). No claim, no budget."""
    rig = Rig(settings=settings(planner=PlannerConfig(cluster="ml", drain_claim_minutes=claim_minutes)))
    ref = rig.snapshots.add(snapshot_of(gpu_world()))
    planned = NOW + timedelta(seconds=20, microseconds=700_000)

    run_plan(ref, snapshots=rig.snapshots, ledger=rig.ledger, executions=rig.executions, settings=rig.settings,
             now=planned, planner=lambda *a: replace(run_planner(*a), drain=_consolidations(150)))  # fmt: skip

    downs = [r for r in rig.executions.requests if r.kind == "scale_down"]
    assert len(downs) > 2
    assert not {"poll_budget", "after_poll_seconds"} & set(downs[0].input)  # it waits for nothing
    if budget is None:
        assert all(not {"poll_budget", "after_poll_seconds"} & set(r.input) for r in downs)
        return
    assert [(r.input["poll_budget"], r.input["after_poll_seconds"]) for r in downs[1:]] == [
        (budget, AFTER_POLL_SECONDS)
    ] * (len(downs) - 1)
    left = claim_minutes * 60 - 0.7
    assert budget * AFTER_POLL_SECONDS <= left < (budget + 1) * AFTER_POLL_SECONDS


def test_a_zero_drain_claim_claims_nothing_so_no_drain_is_cancelled_for_it() -> None:
    """drain_claim_minutes 0: later plans may judge a drained node at once (the planner's claimed_at
    keeps nothing), so the plan's drains carry no claim; with a claim ending at the plan's own second,
    DrainNode would cancel every drain, even the first one started at once, and nothing would scale down."""
    drain = Drain("ip-10-1-0-1.ec2.internal", "i-0aaaaaaaaaaaaaaaa", "general", "us-east-1", "idle 10 min")
    rig = Rig(settings=settings(planner=PlannerConfig(cluster="ml", drain_claim_minutes=0)))
    ref = rig.snapshots.add(snapshot_of(gpu_world()))
    run_plan(ref, snapshots=rig.snapshots, ledger=rig.ledger, executions=rig.executions, settings=rig.settings,
             now=NOW, planner=lambda *a: replace(run_planner(*a), drain=(drain,)))  # fmt: skip
    [down] = [r for r in rig.executions.requests if r.kind == "scale_down"]
    [item] = down.input["drains"]
    assert not {"planned_at", "claim_minutes", "claim_until"} & set(item)
    assert parse_request({"cluster": "ml", "plan_id": "p", **item}).claim_until is None


# --- gangs launched atomically ------------------------------------------------------------------

GANG_ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:spillway-GangLaunchStateMachine"


def gang_world(mode: str) -> tuple[World, list[str], list[str]]:
    """A gang of 2 on one group tagged ``mode``, and 1 loose pod: 3 new nodes of one group."""
    w = World()
    w.group("cpu-east", "m5.2xlarge", max_size=8)
    w.groups["cpu-east"]["Tags"].append({"ResourceId": "cpu-east", "ResourceType": "auto-scaling-group",
                                         "Key": "spillway.io/atomic-launch", "Value": mode,
                                         "PropagateAtLaunch": False})  # fmt: skip
    w.pod_group("scheduling.x-k8s.io/v1alpha1", "train", spec={"minMember": 2})
    gang = w.pods("train", 2, labels={"scheduling.x-k8s.io/pod-group": "train"}, cpu="5", memory="4Gi")
    loose = w.pods("web", 1, cpu="5", memory="4Gi")
    return w, gang, loose


def gang_launch_not_started() -> tuple[Rig, World, str]:
    """A fleet-mode gang's plan committed at NOW whose StartExecution failed: the rig, its world and the
    gang launch's execution name, never started."""
    rig = Rig(settings=settings(gang_launch_arn=GANG_ARN, gang_deadline_seconds=600))
    w, _, _ = gang_world("fleet")
    older = rig.snapshots.add(snapshot_of(w))
    rig.executions.fail("start", AwsThrottled("StartExecution: Throttling: Rate exceeded"), times=1)
    with pytest.raises(AwsThrottled):
        rig.run(older)
    [lost] = [e["name"] for e in rig.ledger.stored.executions if e["kind"] == "gang_launch"]
    return rig, w, lost


def test_a_previous_plans_gang_launch_is_started_only_when_it_ends_within_the_plans_hold_on_it() -> None:
    """A fleet-mode gang shows nothing in its group until it attaches, so plans hold its pods
    (``gang_launch_minutes``, from the plan) instead of launching it again, and the gang's deadline is
    kept below that hold (README). Started late by the next plan (8 minutes on, deadline 10 minutes) it
    could run until minute 18, while the plan at minute 15.5 no longer holds the gang and launches it a
    second time: two whole gangs at once. Not started, the gang is late (the plan at 15.5 launches it),
    never launched twice."""
    rig, w, lost = gang_launch_not_started()

    rig.run(
        rig.snapshots.add(snapshot_of(w, NOW + timedelta(minutes=8))),
        now=NOW + timedelta(minutes=8, seconds=10),
    )
    third = rig.run(rig.snapshots.add(snapshot_of(w, NOW + timedelta(minutes=15, seconds=30))),
                    now=NOW + timedelta(minutes=15, seconds=40))  # fmt: skip

    gangs = [name for name in rig.executions.started if name.startswith("gang-")]
    assert lost not in gangs
    assert len(gangs) == 1 and gangs[0].startswith(f"gang-{third.plan_id}-")


def test_a_previous_plans_gang_launch_that_ends_within_the_hold_is_started() -> None:
    rig, w, lost = gang_launch_not_started()

    rig.run(
        rig.snapshots.add(snapshot_of(w, NOW + timedelta(minutes=2))),
        now=NOW + timedelta(minutes=2, seconds=10),
    )

    assert lost in rig.executions.started


def test_a_gang_on_a_fleet_group_gets_its_own_gang_launch_and_the_scale_up_only_the_rest() -> None:
    rig = Rig(settings=settings(gang_launch_arn=GANG_ARN, gang_deadline_seconds=300, gang_poll_seconds=5))
    w, _, _ = gang_world("fleet")
    ref = rig.snapshots.add(snapshot_of(w))

    outcome = rig.run(ref)

    up, gang = rig.executions.requests
    assert up.kind == "scale_up"
    assert up.input["groups"] == [
        {"group": "cpu-east", "region": "us-east-1", "from": 0, "to": 1, "grow": True, "new_nodes": 1,
         "pods": 1, "uncordon": [], "reasons": {}},
    ]  # fmt: skip
    assert gang.kind == "gang_launch" and gang.state_machine_arn == GANG_ARN
    assert gang.name.startswith(f"gang-{outcome.plan_id}-") and NAME_PATTERN.match(gang.name)
    assert gang.input == {"group": "cpu-east", "region": "us-east-1", "count": 2, "gang": "default/train",
                          "mode": "fleet", "deadline_seconds": 300, "poll_seconds": 5,
                          "plan_id": outcome.plan_id}  # fmt: skip
    # committed with the state: a resumed plan restarts the gang launch too (a no-op by name)
    assert [e["name"] for e in rig.ledger.stored.executions] == [up.name, gang.name]
    assert rig.ledger.stored.state.gangs["default/train"].count == 2
    again = rig.run(ref, now=NOW + timedelta(seconds=40))
    assert again.status == "resumed" and [e.name for e in again.executions] == [up.name, gang.name]


def test_a_group_that_only_launches_a_gang_has_no_scale_up_entry() -> None:
    rig = Rig(settings=settings(gang_launch_arn=GANG_ARN))
    w, _, _ = gang_world("rollback")
    w.items = [i for i in w.items if not i["metadata"]["name"].startswith("web")]
    ref = rig.snapshots.add(snapshot_of(w))

    rig.run(ref)

    [gang] = rig.executions.requests
    assert gang.kind == "gang_launch" and gang.input["mode"] == "rollback" and gang.input["count"] == 2


def test_a_gang_on_an_untagged_group_stays_in_the_ordinary_scale_up() -> None:
    rig = Rig()
    w, _, _ = gang_world("off")
    ref = rig.snapshots.add(snapshot_of(w))

    rig.run(ref)

    [up] = rig.executions.requests
    assert up.input["groups"][0]["to"] == 3 and up.input["groups"][0]["pods"] == 3


def test_an_overflow_replans_raise_leaves_out_the_gang_it_leaves_to_the_next_plan() -> None:
    """The re-plan starts no gang launch (the next plan does): the raise it records for a fleet group is
    its scale-up's alone, or the next plan would count the gang's nodes as launching and not launch it."""
    rig = Rig(settings=settings(gang_launch_arn=GANG_ARN))
    w, _, _ = gang_world("off")  # cpu-east launches the gang in its ordinary scale-up
    w.group("cpu-west", "m5.2xlarge", region="us-west-2", max_size=8)
    w.groups["cpu-west"]["Tags"].append({"ResourceId": "cpu-west", "ResourceType": "auto-scaling-group",
                                         "Key": "spillway.io/atomic-launch", "Value": "fleet",
                                         "PropagateAtLaunch": False})  # fmt: skip
    ref = rig.snapshots.add(snapshot_of(w, NOW))
    plan = rig.run(ref, now=NOW + timedelta(seconds=5))
    scale, event = overflow(rig, ref, plan.plan_id, NOW + timedelta(seconds=30), failed="cpu-east")

    out = scale.next_round(event)

    assert [(g["group"], g["from"], g["to"]) for g in out["groups"]] == [("cpu-west", 0, 1)]  # the loose pod
    assert rig.ledger.stored.state.raises["us-west-2/cpu-west"].to == 1
    later = rig.snapshots.add(snapshot_of(w, NOW + timedelta(seconds=40)))  # cpu-west still at 0
    outcome = rig.run(later, now=NOW + timedelta(seconds=45))
    # 3 pods, 1 node launching: 2 more, the gang's launched atomically (none waits on a node not coming)
    assert outcome.summary is not None and outcome.summary.scale_up_nodes == 2
    assert [r.input["gang"] for r in rig.executions.requests if r.kind == "gang_launch"] == ["default/train"]


def test_execution_raises_leave_out_atomic_gangs_and_a_group_left_with_none_keeps_its_earlier_raise() -> None:
    def group(name: str, mode: str) -> NodeGroup:
        return NodeGroup(name, "us-west-2", 0, 8, 0, "m5.2xlarge", None, atomic_launch=mode)

    def up(name: str, from_: int, to: int, *gangs: int) -> ScaleUp:
        launches = tuple(GangLaunch(f"ml/g{n}", n, ()) for n in gangs)
        return ScaleUp(name, "us-west-2", from_, to, (), "", gangs=launches)

    now, earlier = NOW + timedelta(seconds=30), NOW - timedelta(minutes=1)
    raises = {
        f"us-west-2/{name}": RaiseState(to=to, since=now, group=name, region="us-west-2")
        for name, to in (("off", 5), ("mixed", 4), ("gangs", 3), ("new", 2))
    }
    plan = ScalingPlan(scale_up=(up("off", 0, 5, 2), up("mixed", 1, 4, 2), up("gangs", 1, 3, 2), up("new", 0, 2, 2)),
                       state=State(raises=raises))  # fmt: skip
    groups = [group("off", "off"), group("mixed", "fleet"), group("gangs", "rollback"), group("new", "fleet")]

    out = execution_raises(plan, groups, {"us-west-2/gangs": RaiseState(to=1, since=earlier)})

    assert {key: (r.to, r.since) for key, r in out.items()} == {
        "us-west-2/off": (5, now),  # its gangs go in its scale-up
        "us-west-2/mixed": (2, now),  # 1 + its scale-up's 1
        "us-west-2/gangs": (1, earlier),  # nothing of this plan's: the earlier plan's raise
    }  # and "new", only a gang's, has none


def test_a_plan_that_launches_a_gang_without_a_gang_machine_fails_before_committing() -> None:
    rig = Rig()
    w, _, _ = gang_world("fleet")
    ref = rig.snapshots.add(snapshot_of(w))

    with pytest.raises(ConfigurationError, match=r"^GANG_LAUNCH_STATE_MACHINE_ARN: the plan launches gang"):
        rig.run(ref)
    assert rig.ledger.commits == 0 and rig.executions.requests == []


# --- per-tenant numbers and metrics -------------------------------------------------------------


def two_tenant_world() -> World:
    """team-a (limited to one node) and team-b burst together on an empty 1-GPU group."""
    w = World()
    w.group("gpu-east", "g5.xlarge", max_size=8, gpu_taint=True, desired=0)
    w.gpu_pods("a", 3, gpus=1, cpu="3", memory="12Gi", namespace="team-a")
    w.gpu_pods("b", 2, gpus=1, cpu="3", memory="12Gi", namespace="team-b")
    return w


def test_the_outcome_gives_each_tenant_of_the_plan_its_added_capacity_and_held_pods() -> None:
    planner = PlannerConfig(
        cluster="ml", regions=("us-east-1",), tenants={"team-a": {"limits": {"nodes": "1"}}}
    )
    rig = Rig(settings=settings(planner=planner))
    snapshot = snapshot_of(two_tenant_world())
    [group] = snapshot.groups
    assert group.template is not None
    cores = group.template.allocatable["cpu"] / 1000

    outcome = rig.run(rig.snapshots.add(snapshot))

    assert outcome.tenants == {
        "team-a": {"nodes": 1, "gpus": 1, "cpu": cores, "uncordoned": 0, "held": {"tenant-limit": 2}},
        "team-b": {"nodes": 2, "gpus": 2, "cpu": 2 * cores, "uncordoned": 0, "held": {}},
    }
    assert outcome.to_dict()["tenants"]["team-a"]["held"] == {"tenant-limit": 2}
    # A plan that adds nothing and holds nothing says nothing of tenants.
    quiet = Rig()
    assert "tenants" not in quiet.run(quiet.snapshots.add(snapshot_of(World()))).to_dict()


def test_a_node_uncordoned_for_a_tenants_pods_is_counted_apart_from_its_new_nodes() -> None:
    """Spillway reuses a node it cordoned before launching one: the plan uncordons it for team-a's pod
    and charges it to team-a as a new node (README "Tenants, limits and gangs"). The outcome's tenants
    counted new nodes only, so team-a, given a node, was not named at all (nor in the TenantScaleUp*
    metrics). It is counted as ``uncordoned``, not among the new ``nodes``, and the plan's uncordon
    entry names the tenant; team-b's pod gets a new node, counted as before."""
    w = World()
    running, cordoned = w.group("cpu-east", "m5.2xlarge", max_size=10, nodes=2)
    w.pods("run", 1, cpu="7", memory="20Gi", node_name=running, phase="Running", namespace="team-c")
    w.cordon(cordoned, by_spillway=True)
    w.pods("a", 1, cpu="7", memory="20Gi", namespace="team-a")
    w.pods("b", 1, cpu="7", memory="20Gi", namespace="team-b")
    rig = Rig()

    outcome = rig.run(rig.snapshots.add(snapshot_of(w)))

    assert {t: (n["nodes"], n["uncordoned"]) for t, n in outcome.tenants.items()} == {
        "team-a": (0, 1),
        "team-b": (1, 0),
    }
    assert [(u["node"], u["tenant"]) for u in w.plan().to_dict()["uncordon"]] == [(cordoned, "team-a")]


def emf_lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith('{"_aws"')]


def test_the_plan_function_emits_per_tenant_metrics_with_a_tenant_dimension(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from spillway.observability import metrics

    app = plan_app()
    metrics.set_default_dimensions(Cluster="ml")
    tenants = {
        "team-a": {"nodes": 1, "gpus": 8, "cpu": 63.9, "uncordoned": 2,
                   "held": {"tenant-limit": 2, "cluster-limit": 1}},
        "team-b": {"nodes": 3, "gpus": 24, "cpu": 191.7, "held": {}},
    }  # fmt: skip
    try:
        app.record_outcome({"summary": {}, "tenants": tenants})
        lines = emf_lines(capsys.readouterr().out)
        assert metrics.metric_set["PodsHeldByLimits"]["Value"] == [3.0]
    finally:
        metrics.clear_metrics()
        metrics.set_default_dimensions()

    by_tenant = {(d["Tenant"], d.get("Limit")): d for d in lines}
    assert set(by_tenant) == {("team-a", None), ("team-a", "tenant-limit"), ("team-a", "cluster-limit"),
                              ("team-b", None)}  # fmt: skip
    a, b = by_tenant[("team-a", None)], by_tenant[("team-b", None)]
    assert (a["TenantScaleUpNodes"], a["TenantScaleUpGPUs"], a["TenantPodsHeld"]) == ([1.0], [8.0], [3.0])
    assert (b["TenantScaleUpNodes"], b["TenantScaleUpGPUs"], b["TenantPodsHeld"]) == ([3.0], [24.0], [0.0])
    assert b["TenantScaleUpCPU"] == [191.7]
    assert (a["TenantUncordonedNodes"], b["TenantUncordonedNodes"]) == ([2.0], [0.0])  # apart from new nodes
    assert by_tenant[("team-a", "tenant-limit")]["TenantPodsHeld"] == [2.0]
    assert "TenantScaleUpNodes" not in by_tenant[("team-a", "tenant-limit")]
    for line in lines:
        [directive] = line["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == "Spillway"
        assert line["Cluster"] == "ml" and line["service"] == "spillway"
        assert "Tenant" in directive["Dimensions"][0]


# --- the scale-down candidate taint, written after the commit ------------------------------------


def idle_world() -> World:
    w = World(regions=("us-east-1",))
    idle, busy = w.group("cpu", "m5.2xlarge", nodes=2, max_size=10)
    w.idle_since(idle, 3)
    w.node(busy)["spec"]["taints"] = [
        {"key": "spillway.io/scale-down-candidate", "effect": "PreferNoSchedule"}
    ]
    w.pods("web", 1, cpu="2", memory="2Gi", node_name=busy, owner=("ReplicaSet", "web"))
    return w


def test_the_plan_marks_an_idle_node_and_unmarks_a_busy_one_after_its_commit() -> None:
    w = idle_world()
    idle, busy = (n["metadata"]["name"] for n in w.items if n["kind"] == "Node")
    w.state["nodes"] = {}  # the plan's own idle clock starts now: still below the threshold
    rig = Rig(settings=settings(planner=PlannerConfig(cluster="ml", regions=("us-east-1",))))
    ref = rig.snapshots.add(snapshot_of(w))
    kube = FakeCluster([i for i in w.items if i["kind"] == "Node"])

    outcome = run_plan(ref, snapshots=rig.snapshots, ledger=rig.ledger, executions=rig.executions,
                       settings=rig.settings, now=NOW + timedelta(seconds=20), cluster=lambda: kube)  # fmt: skip

    assert outcome.soft_taints == {"written": 2, "failed": 0, "errors": []}
    taints = {n: [t["key"] for t in kube.get_node(n).model_dump(by_alias=True)["spec"]["taints"] or []]
              for n in (idle, busy)}  # fmt: skip
    assert taints == {idle: ["spillway.io/scale-down-candidate"], busy: []}
    assert rig.ledger.plans[ref.key].plan["soft_taint"][0]["node"] in (idle, busy)
    assert outcome.to_dict()["soft_taints"]["written"] == 2


@pytest.mark.parametrize("error", [KubeUnavailable("no API server"), KubeConflict("kept changing")], ids=type)
def test_a_taint_that_cannot_be_written_never_fails_the_plan(error: Exception) -> None:
    rig = Rig(settings=settings(planner=PlannerConfig(cluster="ml", regions=("us-east-1",))))
    ref = rig.snapshots.add(snapshot_of(idle_world()))
    kube = FakeCluster([i for i in idle_world().items if i["kind"] == "Node"])
    kube.fail("set_candidate_taint", error, times=1)

    outcome = run_plan(ref, snapshots=rig.snapshots, ledger=rig.ledger, executions=rig.executions,
                       settings=rig.settings, now=NOW + timedelta(seconds=20), cluster=lambda: kube)  # fmt: skip

    assert rig.ledger.plans[ref.key]  # committed all the same
    stops = isinstance(error, KubeUnavailable)  # the API is down: the other write is not tried
    assert outcome.soft_taints["failed"] == (2 if stops else 1)  # type: ignore[index]
    assert outcome.soft_taints["written"] == (0 if stops else 1)  # type: ignore[index]
    assert type(error).__name__ in outcome.soft_taints["errors"][0]  # type: ignore[index]
    counted = record_metrics(outcome.to_dict())
    assert (counted["CandidateTaintsWritten"], counted["CandidateTaintsFailed"]) == (
        (0.0, 2.0) if stops else (1.0, 1.0)
    )


def test_a_taint_on_a_node_gone_since_the_snapshot_is_moot_not_failed() -> None:
    """A node the plan marked or unmarked was deleted before the write (a drain ended, the instance was
    terminated): the write answers 404. It was counted in CandidateTaintsFailed and logged as a warning,
    though there is nothing left to taint; the metric's runbook sends the reader to the role's RBAC. (Found
    in `make demo`'s function log: four such warnings in one run.)"""
    rig = Rig(settings=settings(planner=PlannerConfig(cluster="ml", regions=("us-east-1",))))
    ref = rig.snapshots.add(snapshot_of(idle_world()))
    kube = FakeCluster([i for i in idle_world().items if i["kind"] == "Node"])
    kube.fail("set_candidate_taint", NodeNotFound("get node x: not found"), times=1)

    outcome = run_plan(ref, snapshots=rig.snapshots, ledger=rig.ledger, executions=rig.executions,
                       settings=rig.settings, now=NOW + timedelta(seconds=20), cluster=lambda: kube)  # fmt: skip

    assert outcome.soft_taints == {"written": 1, "failed": 0, "gone": 1, "errors": []}
    counted = record_metrics(outcome.to_dict())
    assert (counted["CandidateTaintsWritten"], counted["CandidateTaintsFailed"]) == (1.0, 0.0)


def test_candidate_taints_are_written_within_a_time_budget_lifts_first() -> None:
    """Lifting is never capped, so one plan may lift hundreds of marks (a burst landing on nodes earlier
    plans marked), each a read and a patch of the Node after the commit, in a plan function of 60 s
    that has posted its Events (10 s) before: against a slow API server the invocation ran out of time
    after its commit, failing without its outcome and metrics. cluster-autoscaler bounds its soft-taint
    updates in time too (``--max-bulk-soft-taint-time``, 3 s, shared by lifting and marking:
    core/scaledown/actuation/softtaint.go, budgetTracker). The writes stop once the budget is spent, the
    rest counted failed with a note, and the plan's list puts the lifts first."""
    from spillway.act import planning

    nodes = [o.node(f"n{i}", instance=o.instance_id(f"n{i}")) for i in range(5)]
    for n in nodes[:3]:
        n["spec"]["taints"] = [{"key": "spillway.io/scale-down-candidate", "effect": "PreferNoSchedule"}]
    kube = FakeCluster(nodes)
    ticks = iter(range(100))
    clock = lambda: 4.0 * next(ticks)  # noqa: E731  read once to start, then before each write
    taints = [SoftTaint(f"n{i}", False, "lift") for i in range(3)] + [
        SoftTaint(f"n{i}", True, "mark") for i in (3, 4)
    ]

    written = planning.write_soft_taints(lambda: kube, taints, budget_seconds=13, clock=clock)

    assert written is not None
    assert (written["written"], written["failed"]) == (3, 2)
    assert written["errors"] == ["time budget of 13s spent: 2 not tried"]
    assert [c[1][0] for c in kube.calls if c[0] == "set_candidate_taint"] == ["n0", "n1", "n2"]


def test_a_provisioning_request_that_ended_a_week_ago_is_deleted_after_the_commit_and_counted() -> None:
    """cluster-autoscaler deletes a ProvisioningRequest provisioned or failed over 7 days ago
    (processors/provreq/processor.go DeleteOldProvReqs); the plan function does it after its commit,
    only for the request of the uid the snapshot saw, and counts it (ProvisioningRequestsDeleted)."""
    from dataclasses import replace

    from spillway.model.provreq import request_infos

    ended = {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
             "metadata": {"name": "done", "namespace": "default", "uid": "u-done",
                          "creationTimestamp": "2026-01-01T00:00:00Z"},
             "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                      "podSets": [{"podTemplateRef": {"name": "t"}, "count": 1}]},
             "status": {"conditions": [{"type": "Failed", "status": "True", "reason": "Expired", "message": "",
                                        "lastTransitionTime": (NOW - timedelta(days=8)).isoformat()}]}}  # fmt: skip
    rig = Rig(settings=settings(planner=PlannerConfig(cluster="ml", regions=("us-east-1",))))
    cluster, groups, _, _ = idle_world().parsed()
    cluster = replace(cluster, provreqs=request_infos([ended], []))
    ref = rig.snapshots.add(Snapshot.build(cluster, groups, NOW))
    kube = FakeCluster([i for i in idle_world().items if i["kind"] == "Node"], custom=[ended])

    outcome = run_plan(ref, snapshots=rig.snapshots, ledger=rig.ledger, executions=rig.executions,
                       settings=rig.settings, now=NOW + timedelta(seconds=20), cluster=lambda: kube)  # fmt: skip

    assert outcome.provisioning_deleted == {"written": 1, "failed": 0, "errors": []}
    assert kube.custom == []
    assert rig.ledger.plans[ref.key].plan["provisioning_deleted"][0]["request"] == "default/done"
    counted = record_metrics(outcome.to_dict())
    assert (counted["ProvisioningRequestsDeleted"], counted["ProvisioningRequestDeletesFailed"]) == (1.0, 0.0)


def record_metrics(outcome: dict[str, Any]) -> dict[str, float]:
    """What the plan function's ``record_outcome`` counts for one outcome."""
    from spillway.observability import metrics

    try:
        plan_app().record_outcome(outcome)
        return {name: sum(m["Value"]) for name, m in metrics.metric_set.items()}
    finally:
        metrics.clear_metrics()


def test_an_unhealthy_cluster_and_group_are_summarized_and_counted() -> None:
    """Five of six nodes lost their kubelets: the plan drains nothing, and the plan function counts
    ClusterUnhealthy (the alarm's metric) and UnhealthyGroups from the plan's summary."""
    w = World()
    names = w.group("cpu", "m5.2xlarge", nodes=6)
    for name in names[:5]:
        (condition,) = w.node(name)["status"]["conditions"]
        condition.update(status="Unknown", lastTransitionTime="2026-11-02T11:00:00Z")
    result = w.plan()

    summary = summarize(result, "us-east-1").to_dict()

    assert (summary["cluster_unhealthy"], summary["unhealthy_groups"], summary["drains"]) == (1, 1, 0)
    counted = record_metrics({"summary": summary})
    assert (counted["ClusterUnhealthy"], counted["UnhealthyGroups"]) == (1.0, 1.0)
    healthy = record_metrics({"summary": summarize(World().plan(), "us-east-1").to_dict()})
    assert (healthy["ClusterUnhealthy"], healthy["UnhealthyGroups"]) == (0.0, 0.0)


def test_gang_orphans_are_summarized_and_counted_terminated_and_left_apart() -> None:
    """The plan function counts the fleet gang instances a plan sweeps (GangOrphans) and those it
    leaves because their Node runs work (GangOrphansBusy), 0 too."""
    swept = GangOrphan("i-0a1b2c3d4e5f60718", "us-east-1", "g", "a", None, True, codes.GANG_ORPHAN, "r")
    busy = GangOrphan("i-0a1b2c3d4e5f60719", "us-east-1", "g", "a", "n", False, codes.GANG_ORPHAN_BUSY, "r")

    summary = summarize(ScalingPlan(gang_orphans=(swept, busy, busy)), "us-east-1").to_dict()

    assert (summary["gang_orphans"], summary["gang_orphans_busy"]) == (1, 2)
    counted = record_metrics({"summary": summary})
    assert (counted["GangOrphans"], counted["GangOrphansBusy"]) == (1.0, 2.0)
    none = record_metrics({"summary": summarize(ScalingPlan(), "us-east-1").to_dict()})
    assert (none["GangOrphans"], none["GangOrphansBusy"]) == (0.0, 0.0)


def test_gang_members_held_where_their_gang_runs_are_summarized_and_counted_apart() -> None:
    """UnplaceablePods counts a started gang's members waiting for the full region their gang runs in
    among every other pod with no place; GangPodsHeldAtHome counts them alone (gang-home-full, and
    gang-home-unknown: their gang runs on nodes of unknown region), 0 too."""
    pending = (
        PendingPod("ml/w-2", "r", codes.GANG_HOME_FULL),
        PendingPod("ml/w-3", "r", codes.GANG_HOME_UNKNOWN),
        PendingPod("ml/other", "r", codes.MAX_SIZE),
    )

    summary = summarize(ScalingPlan(pending=pending), "us-east-1").to_dict()

    assert (summary["unplaceable"], summary["gang_home_held"]) == (3, 2)
    counted = record_metrics({"summary": summary})
    assert (counted["UnplaceablePods"], counted["GangPodsHeldAtHome"]) == (3.0, 2.0)
    none = record_metrics({"summary": summarize(ScalingPlan(), "us-east-1").to_dict()})
    assert none["GangPodsHeldAtHome"] == 0.0


def test_buffer_chunks_with_no_room_are_summarized_and_counted() -> None:
    """A configured buffer of six one-node chunks in a group of MaxSize 4 with one idle node: the plan
    holds one on the node and launches three; the plan function counts the two short in
    BufferChunksShort, 0 too. Before, a buffer short of room said so nowhere."""
    w = World()
    w.group("cpu", "m5.2xlarge", nodes=1, max_size=4)
    serving = {"name": "serving", "pod": {"cpu": "5", "memory": "4Gi"}, "replicas": 6}

    summary = summarize(w.plan(buffers=[serving]), "us-east-1").to_dict()

    assert (summary["buffer_chunks_short"], summary["unplaceable"]) == (2, 0)  # virtual pods: no pods
    assert record_metrics({"summary": summary})["BufferChunksShort"] == 2.0
    none = record_metrics({"summary": summarize(World().plan(), "us-east-1").to_dict()})
    assert none["BufferChunksShort"] == 0.0


def test_backoff_gives_back_a_new_instance_whose_never_ready_node_has_a_pod_bound() -> None:
    """A Node that registers but never becomes Ready (its CNI never starts: the commonest broken launch)
    still takes a pod whose tolerations admit everything (the not-ready taint too): kube-scheduler binds
    it, and it stays Pending there, never started. That is no work to keep: left running, the instance
    was kept for good (scale-down leaves a NotReady node with a workload pod alone) and the pod never ran.
    Only a started pod (phase Running) keeps a NotReady node's instance (review2)."""
    cloud, (_, broken), out = timed_out_backoff(
        1, lambda ids: [o.pod("train-0", "ml", node_name=f"node-{ids[1]}", owner=("Job", "train"), phase="Pending",
                              tolerations=[{"operator": "Exists"}])],
    )  # fmt: skip

    assert out["terminated"] == [broken] and writes(cloud) == [("terminate_instance", broken)]
    assert "left running" not in out["reason"]


def test_an_overflow_replan_judges_a_zone_id_quota_by_the_ids_observe_read() -> None:
    """The re-plan reads the groups live, and a live read carries no zone ids (observe reads them from
    EC2, for the snapshot): it takes the snapshot's, so a quota on gpu-west's zone id counts its new
    nodes as the plan would. Without them us-west-2a's id was unknown (no node there), and all three
    pods' nodes went past a quota of one."""
    w = gpu_world()
    general = next(i for i in w.items if i["kind"] == "Node")
    general["metadata"]["labels"]["topology.k8s.aws/zone-id"] = "use1-az4"  # the nodes carry zone ids
    w.capacity_quota("west-zone", {"nodes": "1"}, match_labels={"topology.k8s.aws/zone-id": "usw2-az2"})
    cluster, groups, _, _ = w.parsed()
    rig = Rig()
    ref = rig.snapshots.add(
        Snapshot.build(cluster, with_zone_ids(groups, {"us-west-2": {"us-west-2a": "usw2-az2"}}), NOW)
    )
    plan = rig.run(ref, now=NOW + timedelta(seconds=5))
    scale, event = overflow(rig, ref, plan.plan_id, NOW + timedelta(seconds=30))
    live = scale.aws.node_groups_by_region  # as the adapter reads them: no zone ids
    for region in live:
        live[region] = [replace(g, zone_ids=()) for g in live[region]]

    out = scale.next_round(event)

    assert [(g["group"], g["from"], g["to"]) for g in out["groups"]] == [("gpu-west", 0, 1)]


PROVISION_TAG = "k8s.io/cluster-autoscaler/node-template/autoscaling-options/maxnodeprovisiontime"


def provision_tagged(cloud: FakeCloud, value: str) -> None:
    cloud.groups[("us-east-1", "gpu")]["Tags"].append(
        {"ResourceId": "gpu", "ResourceType": "auto-scaling-group", "Key": PROVISION_TAG, "Value": value,
         "PropagateAtLaunch": False}
    )  # fmt: skip


def test_a_group_whose_nodes_take_longer_than_the_launch_timeout_is_waited_for_that_long() -> None:
    """A group tagged maxnodeprovisiontime=20m (a large GPU AMI) is given 20 minutes to bring its nodes
    up, as the plans give its instances before they are unregistered (planner.joins reads the same
    option); the launch timeout of 600 s gave them back after 10, still booting. Its checks are spread
    out so that it makes no more of them than the launch timeout's (15 s, 40 checks: every 30 s), which
    keeps the execution's history within what the configuration was checked for."""
    cloud = gpu_cloud(1)
    provision_tagged(cloud, "20m0s")
    event = {"group": GROUP, "launch_timeout_seconds": 600, "poll_seconds": 15}

    prep = steps(cloud).prepare(event)

    assert prep["deadline"] == iso_z(NOW + timedelta(minutes=20))
    assert prep["poll_seconds"] == 30
    group = {**GROUP, "new_nodes": 2, "pods": 2}
    parse_step({"action": "verify", "cluster": "ml", "group": group, "prep": prep})  # the ASL passes it on
    late = steps(cloud)
    late.clock = lambda: NOW + timedelta(minutes=15)
    assert late.verify({"group": group, "prep": prep})["status"] == "launching"  # not timed out at 10


def test_a_group_without_a_provision_time_keeps_the_launch_timeout() -> None:
    """No maxnodeprovisiontime tag: the launch timeout and its poll."""
    prep = steps(gpu_cloud(1)).prepare({"group": GROUP, "launch_timeout_seconds": 600, "poll_seconds": 15})
    assert prep["deadline"] == iso_z(NOW + timedelta(minutes=10))
    assert prep["poll_seconds"] == 15


@pytest.mark.parametrize("poll", [15, None])
def test_a_group_tagged_a_shorter_provision_time_is_backed_off_after_it(poll: int | None) -> None:
    """A group tagged maxnodeprovisiontime=5m: cluster-autoscaler takes its scale-up as timed out after
    5 minutes (the option overrides the flag for the group, shorter or longer), backs it off and sends
    the pods elsewhere. The launch timeout of 600 s kept them waiting 10. Its checks keep the poll (a
    shorter wait makes fewer); an execution whose definition passes no poll is shortened too."""
    cloud = gpu_cloud(1)
    provision_tagged(cloud, "5m")
    event: dict[str, object] = {"group": GROUP, "launch_timeout_seconds": 600}
    if poll is not None:
        event["poll_seconds"] = poll

    prep = steps(cloud).prepare(event)

    assert prep["deadline"] == iso_z(NOW + timedelta(minutes=5))
    if poll is not None:
        assert prep["poll_seconds"] == poll
    group = {**GROUP, "new_nodes": 2, "pods": 2}
    late = steps(cloud)
    late.clock = lambda: NOW + timedelta(minutes=5, seconds=1)
    assert late.verify({"group": group, "prep": prep})["status"] == "timeout"


def iso_z(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


@pytest.mark.parametrize(("timeout", "poll"), [(600, 15), (1800, 15), (60, 1), (600, 7), (86_400, 3600)])
def test_a_longer_launch_window_makes_no_more_checks_than_the_launch_timeout_it_was_checked_for(
    timeout: int, poll: int
) -> None:
    """Whatever a group's provision time (up to the day prepare allows), its checks fit the history the
    configuration's launch timeout and poll were checked to fit (spillway.model.history)."""
    from spillway.model.history import poll_count, stretched_poll

    for deadline in (timeout, timeout + 1, 2 * timeout, 20 * 60, 3 * 3600 + 7, 86_400):
        if deadline < timeout:
            continue
        every = stretched_poll(deadline, poll, timeout)
        assert every >= poll
        assert poll_count(deadline, every) <= poll_count(timeout, poll)


def test_a_drain_ahead_of_a_scheduled_action_carries_the_pods_it_moves_and_an_idle_one_none() -> None:
    """A scheduled-shrink drain of a busy node names the pods it moves, as a consolidation does: without
    them DrainNode takes the node for one the plan saw empty and cancels on its pods (found by the e2e
    test). One of an idle node with nothing to evict asks nothing more than an empty node's drain."""
    pods = ("team-a/web-0",)
    where = {"node": "ip-10-0-1-10.ec2.internal", "instance_id": "i-0a1b2c3d4e5f60718", "group": "general",
             "region": "us-east-1", "reason": "scheduled-shrink: scheduled action evening ..."}  # fmt: skip
    claim = {"planned_at": "2026-11-02T10:00:00Z", "claim_minutes": 20, "claim_until": "2026-11-02T10:20:00Z"}
    busy = drain_item(Drain(**where, code=codes.SCHEDULED_SHRINK, pods=pods), claim)
    idle = drain_item(Drain(**where, code=codes.SCHEDULED_SHRINK), claim)

    assert busy == {**where, "consolidation": True, "pods": list(pods), **claim}
    assert idle == {**where, **claim}
    assert parse_request({"cluster": "ml", "plan_id": "p", **busy}).pods == list(pods)


def test_finishing_the_previous_plan_logs_an_execution_found_there_as_started_before(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The newer plan starts the last committed plan's executions again; Step Functions answers one of
    that name still running with its start date, which the adapter reports started=False, as it does a
    closed one. The log said "had run" for it, of an execution still running; it says started before
    (running or ended) now, and "started now" for one this call started."""
    import logging

    from spillway.act.planning import finish_previous
    from spillway.model.act import ExecutionRequest, format_key

    arn = "arn:aws:states:us-east-1:123456789012:stateMachine:spillway-ml-scale-up"
    requests = [ExecutionRequest("scale_up", arn, name, {}).to_dict() for name in ("up-p1", "up-p1-2")]
    stored = StoredState(
        snapshot_key=format_key(NOW - timedelta(seconds=30)), plan_id="p1", executions=requests
    )
    workflows = FakeWorkflows()
    workflows.names.add("up-p1")  # still running (or ended): Step Functions has one of that name

    with caplog.at_level(logging.INFO, logger="spillway.act.planning"):
        finish_previous(stored, workflows, PlannerConfig(), NOW)

    assert "up-p1 started before (running or ended)" in caplog.text
    assert "up-p1-2 started now" in caplog.text


def test_a_raise_entry_is_marked_unsettled_only_by_its_own_scale_ups_raise() -> None:
    """The plan raised gpu-east; its scale-up (owner ``up-<plan>-1-us-east-1-gpu-east``) raises it. The
    load marks the entry ``unsettled`` (a carried group's raise then holds its pods only for the claim
    window) from the ledger's ``unsettled#<owner>`` items; it matched them by group and time, so another
    owner's raise of gpu-east kept unsettled after the plan (an earlier plan's re-plan round whose answer
    was lost, retried past this plan) marked this plan's raise, which AWS had answered. The plan now
    records its scale-up's owner in the entry, and only that owner's mark marks it."""
    rig = Rig()
    ref = rig.snapshots.add(snapshot_of(gpu_world(), NOW))
    plan = rig.run(ref, now=NOW + timedelta(seconds=5))
    later = NOW + timedelta(minutes=1)
    expires = NOW + timedelta(days=1)
    rig.ledger.claim(
        "ml", "unsettled#up-20260302T085800000000Z-0a1b2c3d-2-us-east-1-gpu-east",
        {"group": "us-east-1/gpu-east", "at": later.isoformat()}, expires=expires,
    )  # fmt: skip

    assert rig.ledger.load("ml", later).state.raises["us-east-1/gpu-east"].unsettled is False

    own = f"up-{plan.plan_id}-1-us-east-1-gpu-east"
    rig.ledger.claim("ml", f"unsettled#{own}", {"group": "us-east-1/gpu-east", "at": later.isoformat()},
                     expires=expires)  # fmt: skip

    assert rig.ledger.load("ml", later).state.raises["us-east-1/gpu-east"].unsettled is True


def test_a_raise_entry_names_the_owner_its_scale_up_rounds_prepare_names() -> None:
    """The owner a raise entry names is the one the scale-up's own steps raise under (``prepare``'s
    ``owner``, :func:`spillway.act.scale._owner_id`): the plan's entry, its first round's; an overflow
    re-plan's, the next round's (the map it starts)."""
    rig = Rig()
    ref = rig.snapshots.add(snapshot_of(gpu_world(), NOW))
    plan = rig.run(ref, now=NOW + timedelta(seconds=5))
    scale, event = overflow(rig, ref, plan.plan_id, NOW + timedelta(seconds=30))
    first = rig.executions.requests[0].input

    assert rig.ledger.stored.state.raises["us-east-1/gpu-east"].owner == _owner_id(
        first, "us-east-1", "gpu-east"
    )

    out = scale.next_round(event)

    assert rig.ledger.stored.state.raises["us-west-2/gpu-west"].owner == _owner_id(
        out, "us-west-2", "gpu-west"
    )
    assert out["round"] == 2 and _owner_id(out, "us-west-2", "gpu-west").startswith(f"up-{plan.plan_id}-2-")
