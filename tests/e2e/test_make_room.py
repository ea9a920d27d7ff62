"""Make-room end to end: a plan's make-room drain (planner.types.Drain with code make-room, through
act.planning.drain_item) runs through the real scale-down and DrainNode state machines on moto. Its pods
move under a PodDisruptionBudget that allows one disruption (a ReplicaSet stand-in runs each replacement on
the other node); then the node is uncordoned and its draining taint lifted: it stays Ready and schedulable
for the pending pod the plan gave it to, its instance InService and the group's desired capacity as it
was. Nothing is launched, nothing terminated. A make-room that cannot empty its node is compensated as any
drain (uncordoned, pods left running), and a drain with terminate false but no uncordon still leaves its
node cordoned."""

from __future__ import annotations

from datetime import UTC, datetime

from conftest import CLUSTER, HOME, Cloud
from test_consolidation import two_movable_pods_under_a_budget
from test_drain import ReplicaSetController

from spillway.act.planning import claim_fields, drain_item
from spillway.local import objects as o
from spillway.model.k8s import CORDONED_BY_SPILLWAY, DRAINING_TAINT
from spillway.planner import codes
from spillway.planner.types import Drain

MOVABLE = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
PLAN_ID = "ml-2026-12-01T08:00:00Z"


def in_time() -> dict[str, object]:
    """The claim of a plan made now (an hour's drain_claim_minutes): its drains start well within it."""
    return claim_fields(datetime.now(UTC), 60)


def test_a_make_room_moves_its_pods_and_keeps_the_node_ready_and_schedulable(cloud: Cloud) -> None:
    busy, spare, instance = two_movable_pods_under_a_budget(cloud)
    cloud.kube.add(o.pod("train-0", "ml", cpu="3", memory="12Gi"))  # pending: the pod the room is for
    pods = ("team-a/web-0", "team-a/web-1")
    room = Drain(node=busy, instance_id=instance, group="general", region=HOME,
                 reason="make-room: its pods fit on other nodes; given to ml/train-0", code=codes.MAKE_ROOM,
                 pods=pods)  # fmt: skip
    plan = {"cluster": CLUSTER, "plan_id": PLAN_ID, "drains": [drain_item(room, in_time())],
            "poll_seconds": 1, "deadline_seconds": 30}  # fmt: skip
    cloud.kube.clear_requests()

    with ReplicaSetController(cloud.kube, "web", 2, spare) as controller:
        result = cloud.stack.run("ScaleDownStateMachine", plan, timeout=60)

    assert result["status"] == "SUCCEEDED", result
    [line] = result["output"]["drains"]
    assert (line["node"], line["outcome"], line["evicted_count"]) == (busy, "released", 2), line
    assert line["uncordoned"] is True
    assert result["output"]["counts"] == {"released": 1}
    # The pods moved, one at a time under their budget, to the other node.
    evictions = [(r.path, r.status) for r in cloud.kube.requests if r.path.endswith("/eviction")]
    assert {p for p, s in evictions if s == 201} == {
        "/api/v1/namespaces/team-a/pods/web-0/eviction",
        "/api/v1/namespaces/team-a/pods/web-1/eviction",
    }
    # the budget let the second pod go only once the first one's replacement ran (the second one's may
    # still be on its way when the release is done: the make-room does not wait for it)
    assert 429 in [s for _, s in evictions] and controller.created >= 1
    assert not [p for p in cloud.kube.list("Pod", "team-a") if p["spec"].get("nodeName") == busy]
    # The node is kept: Ready, schedulable, without Spillway's cordon or taint.
    node = cloud.kube.get("Node", busy)
    assert node is not None
    assert not node["spec"].get("unschedulable")
    assert CORDONED_BY_SPILLWAY not in node["metadata"].get("annotations", {})
    assert all(t["key"] != DRAINING_TAINT for t in node["spec"].get("taints") or [])
    ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"]
    assert ready == "True"
    # Nothing terminated, nothing launched: the instance InService, the group as it was.
    asg = cloud.asg("general", HOME)
    assert asg["DesiredCapacity"] == 2
    assert {i["InstanceId"]: i["LifecycleState"] for i in asg["Instances"]}[instance] == "InService"
    actions = [c.event.get("action") for c in cloud.stack.calls("DrainFunction")]
    assert "uncordon" in actions and not {"terminate", "delete_node", "complete_lifecycle"} & set(actions)
    [drain_execution] = cloud.executions("DrainNodeStateMachine")
    history = cloud.stack.history(drain_execution["executionArn"])
    entered = [e["stateEnteredEventDetails"]["name"] for e in history if "stateEnteredEventDetails" in e]
    assert "Release" in entered and "Compensate" not in entered
    assert not [n for n in entered if n.startswith("Terminate")]
    reasons = [e.get("reason") for e in cloud.kube.list("Event") if e["involvedObject"]["name"] == busy]
    assert "SpillwayDraining" in reasons and "SpillwayReleased" in reasons


def test_a_make_room_that_cannot_empty_its_node_is_compensated_and_changes_nothing(cloud: Cloud) -> None:
    cloud.group("general", instance_type="m5.xlarge", desired=2, gpu=False)
    busy, _ = sorted(cloud.wait_nodes(2))
    instance = {name: iid for iid, name in dict(cloud.registrar.registered).items()}[busy]
    cloud.kube.add(o.pod("db-0", "team-a", cpu="500m", memory="512Mi", node_name=busy, labels={"app": "db"},
                         owner=("ReplicaSet", "db-7f8e"), annotations=MOVABLE))  # fmt: skip
    cloud.kube.add(o.pdb("db", "team-a", {"app": "db"}, min_available=1))  # allows none: never evicted
    room = Drain(node=busy, instance_id=instance, group="general", region=HOME, reason="make-room",
                 code=codes.MAKE_ROOM, pods=("team-a/db-0",))  # fmt: skip
    plan = {"cluster": CLUSTER, "plan_id": PLAN_ID, "drains": [drain_item(room, in_time())],
            "poll_seconds": 1, "deadline_seconds": 2}  # fmt: skip

    result = cloud.stack.run("ScaleDownStateMachine", plan, timeout=60)

    assert result["status"] == "SUCCEEDED", result  # the scale-down reports its drains' failures
    [line] = result["output"]["drains"]
    assert (line["outcome"], line["error"]) == ("timeout", "DrainTimeout"), line
    assert "uncordoned" in line["cause"]
    node = cloud.kube.get("Node", busy)
    assert node is not None and not node["spec"].get("unschedulable")
    assert all(t["key"] != DRAINING_TAINT for t in node["spec"].get("taints") or [])
    assert cloud.kube.get("Pod", "db-0", "team-a") is not None
    assert cloud.desired("general") == 2
    [drain_execution] = cloud.executions("DrainNodeStateMachine")
    history = cloud.stack.history(drain_execution["executionArn"])
    entered = [e["stateEnteredEventDetails"]["name"] for e in history if "stateEnteredEventDetails" in e]
    assert "Compensate" in entered and "Release" not in entered


def test_a_drain_with_terminate_false_and_no_uncordon_still_leaves_its_node_cordoned(cloud: Cloud) -> None:
    cloud.group("general", instance_type="m5.xlarge", desired=2, gpu=False)
    node, _ = sorted(cloud.wait_nodes(2))

    result = cloud.stack.run("DrainNodeStateMachine", {"cluster": CLUSTER, "node": node, "terminate": False,
                                                        "poll_seconds": 1, "deadline_seconds": 10})  # fmt: skip

    assert result["status"] == "SUCCEEDED", result
    assert result["output"]["outcome"] == "drained"
    after = cloud.kube.get("Node", node)
    assert after is not None and after["spec"].get("unschedulable") is True
    assert cloud.desired("general") == 2
