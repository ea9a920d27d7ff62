"""Launches and nodes that broke, end to end, on snapshots the real observe code takes:

* an instance that never becomes a Node: the real plan function stops counting it as capacity coming
  once max_node_provision_minutes pass, backs its group off and removes it through the real scale-down
  state machine (moto runs the ASL), whose step, on the real drain function, checks again that no Node
  joined before it terminates the instance;
* Nodes NotReady for longer than scale_down_unready_minutes, idle or with only a pod stuck terminating:
  drained through the real DrainNode state machine, their instances terminated and Nodes deleted; one
  whose pod still runs as far as the API knows stays."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from conftest import HOME, Cloud, running

from spillway.local import objects as o

LIMIT_MINUTES = 0.02  # 1.2 s


@pytest.fixture
def cloud() -> Iterator[Cloud]:
    with running(MAX_NODE_PROVISION_MINUTES=str(LIMIT_MINUTES)) as rig:
        yield rig


def plan_once(cloud: Cloud) -> dict[str, Any]:
    [outcome] = cloud.plan(cloud.stream_event(cloud.snapshot()))["results"]
    return dict(outcome)


def records(cloud: Cloud) -> list[dict[str, Any]]:
    items = sorted(cloud.plans(), key=lambda p: p["snapshot_key"]["S"])
    return [json.loads(p["plan"]["S"]) for p in items]


def test_an_instance_that_never_joins_is_removed_and_its_group_backs_off(cloud: Cloud) -> None:
    cloud.group("gpu", desired=1)
    (joined,) = cloud.wait_nodes(1)
    before = set(cloud.instances())
    cloud.registrar.stop()  # the next instance's kubelet never comes up
    boto3.client("autoscaling", region_name=HOME).set_desired_capacity(
        AutoScalingGroupName="gpu", DesiredCapacity=2
    )
    (lost,) = set(cloud.instances()) - before

    first = plan_once(cloud)
    assert first["summary"]["unregistered"] == 0 and first["status"] == "idle", first

    time.sleep(LIMIT_MINUTES * 60 + 0.5)
    second = plan_once(cloud)

    assert second["summary"]["unregistered"] == 1 and second["status"] == "acted", second
    (entry,) = records(cloud)[-1]["unregistered"]
    assert entry["instance_id"] == lost and entry["decrement"] is True
    [down] = cloud.executions("ScaleDownStateMachine")
    execution = cloud.stack.wait(down["executionArn"], 60)
    assert execution["status"] == "SUCCEEDED", execution
    (line,) = execution["output"]["drains"]
    assert (line["instance_id"], line["outcome"]) == (lost, "removed"), line
    assert cloud.desired("gpu") == 1
    states = cloud.instances()
    assert states.get(lost, "gone").startswith(("Terminat", "gone")) and states[before.pop()] == "InService"
    assert [n["metadata"]["name"] for n in cloud.kube.list("Node")] == [joined]
    item = cloud.state_item("state")
    assert item is not None and "state" in item  # small enough to be stored plain
    state = json.loads(item["state"]["S"])
    assert lost in state["groups"]["us-east-1/gpu"]["reason"], state[
        "groups"
    ]  # the next plans launch elsewhere


@pytest.fixture
def eager() -> Iterator[Cloud]:
    """Idle nodes go at once (no idle time, no launch delay, no scale-in cap), NotReady ones too (their
    idle time is scale_down_unready_minutes, 0 here, whose kubelets stopped long before); a node is past
    its start (max_node_startup_minutes) in a second."""
    with running(
        SCALE_DOWN_IDLE_MINUTES="0",
        SCALE_DOWN_DELAY_AFTER_LAUNCH_MINUTES="0",
        MAX_SCALE_IN_FRACTION="1",
        PLANNER_CONFIG=json.dumps(
            {"max_node_startup_minutes": LIMIT_MINUTES, "scale_down_unready_minutes": 0}
        ),
    ) as rig:
        yield rig


def kubelet_stopped(cloud: Cloud, node: str, minutes_ago: float) -> None:
    """The node lifecycle controller's mark once the kubelet stops posting status."""
    _ready_condition(
        cloud, node, minutes_ago, "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."
    )


def network_not_ready(cloud: Cloud, node: str, minutes_ago: float) -> None:
    """The kubelet's own report while its CNI never started: Ready False, its pods' statuses current."""
    message = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady"
    _ready_condition(cloud, node, minutes_ago, "False", "KubeletNotReady", message)


def _ready_condition(
    cloud: Cloud, node: str, minutes_ago: float, status: str, reason: str, message: str
) -> None:
    obj = cloud.kube.get("Node", node)
    assert obj is not None
    since = datetime.now(UTC) - timedelta(minutes=minutes_ago)
    obj["status"]["conditions"] = [
        {
            "type": "Ready",
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": o.iso(since),
        }
    ]
    cloud.kube.update("Node", obj)


def test_dead_nodes_past_the_unready_time_are_drained_unless_a_pod_still_needs_them(eager: Cloud) -> None:
    """Three nodes whose kubelets stopped half an hour ago: one idle, one whose pod the node controller
    evicted and which stays Terminating for want of a kubelet (stuck), one whose pod is still Running
    as far as the API knows. The first two are drained and terminated; the third stays."""
    cloud = eager
    cloud.group("general", instance_type="m5.xlarge", desired=4, gpu=False)
    idle_dead, stuck_dead, busy_dead, alive = sorted(cloud.wait_nodes(4))
    for node in (stuck_dead, busy_dead, alive):
        cloud.kube.add(o.pod(f"web-{node[3:12]}", "team-a", cpu="500m", memory="512Mi", node_name=node,
                             owner=("ReplicaSet", "web-5d9c")))  # fmt: skip
    stuck = cloud.kube.get("Pod", f"web-{stuck_dead[3:12]}", "team-a")
    assert stuck is not None
    stuck["metadata"]["deletionTimestamp"] = o.iso(datetime.now(UTC) - timedelta(minutes=25))
    cloud.kube.update("Pod", stuck)
    cloud.registrar.stop()
    time.sleep(LIMIT_MINUTES * 60 + 0.5)  # past max_node_startup_minutes: a NotReady one is not starting
    for node in (idle_dead, stuck_dead, busy_dead):
        kubelet_stopped(cloud, node, 30)
    instance = {
        n["metadata"]["name"]: n["spec"]["providerID"].rsplit("/", 1)[1] for n in cloud.kube.list("Node")
    }

    outcome = plan_once(cloud)

    assert outcome["summary"]["drains"] == 2, outcome
    (record,) = records(cloud)
    assert sorted(d["node"] for d in record["drain"]) == sorted([idle_dead, stuck_dead])
    kept = {k["node"]: k for k in record["kept"]}
    assert kept[busy_dead]["code"] == "not-ready" and "runs 1 workload pod(s)" in kept[busy_dead]["reason"]
    [down] = cloud.executions("ScaleDownStateMachine")
    result = cloud.stack.wait(down["executionArn"], 60)
    assert result["status"] == "SUCCEEDED", result
    lines = {line["node"]: line for line in result["output"]["drains"]}
    for node in (idle_dead, stuck_dead):
        assert (lines[node]["outcome"], lines[node]["node_deleted"]) == ("terminated", True), lines
        assert cloud.instances().get(instance[node], "gone").startswith(("Terminat", "gone"))
    assert lines[stuck_dead].get("evicted_count", 0) == 0  # nothing to evict: it was ignored, not waited for
    assert cloud.desired("general") == 2
    assert sorted(n["metadata"]["name"] for n in cloud.kube.list("Node")) == sorted([busy_dead, alive])


def test_when_most_kubelets_are_gone_nothing_is_drained(eager: Cloud) -> None:
    """Four of six idle nodes lost their kubelets half an hour ago (a network fault, not four broken
    nodes): the cluster is unhealthy, so the real plan function drains none of them, though each is
    past scale_down_unready_minutes, nor the idle Ready ones; it says why and counts it. (The rig's nodes
    are seconds old: once past max_node_startup_minutes, a NotReady one is not still starting.)"""
    cloud = eager
    cloud.group("general", instance_type="m5.xlarge", desired=6, gpu=False)
    nodes = sorted(cloud.wait_nodes(6))
    cloud.registrar.stop()
    time.sleep(LIMIT_MINUTES * 60 + 0.5)
    for node in nodes[:4]:
        kubelet_stopped(cloud, node, 30)

    outcome = plan_once(cloud)

    assert outcome["summary"]["drains"] == 0, outcome
    assert (outcome["summary"]["cluster_unhealthy"], outcome["summary"]["unhealthy_groups"]) == (1, 1)
    (record,) = records(cloud)
    assert [(u["group"], u["unready"], u["nodes"]) for u in record["unhealthy"]] == [
        (None, 4, 6),
        ("general", 4, 6),
    ]
    assert {k["code"] for k in record["kept"]} == {"cluster-unhealthy"}
    assert cloud.executions("ScaleDownStateMachine") == []
    assert cloud.desired("general") == 6 and len(cloud.kube.list("Node")) == 6


def test_a_dead_node_whose_only_pod_never_started_is_drained_and_the_pod_goes_with_it(eager: Cloud) -> None:
    """A training pod that tolerates everything, the not-ready taint too, bound to a Node whose kubelet
    never ran it (Pending, its container only waiting) and reports its network not ready (Ready False;
    Unknown, a silent kubelet, would leave the pod's status stale): past the unready time the plan drains the node,
    naming the pod, and the real DrainNode state machine terminates it without evicting or waiting for
    the pod (the pod garbage collector's to delete once the Node is gone)."""
    cloud = eager
    cloud.group("general", instance_type="m5.xlarge", desired=2, gpu=False)
    dead, alive = sorted(cloud.wait_nodes(2))
    pod = o.pod("train-0", "team-a", cpu="500m", memory="512Mi", node_name=dead, phase="Pending",
                tolerations=[{"operator": "Exists"}])  # fmt: skip
    pod["status"]["containerStatuses"] = [{"name": "main", "restartCount": 0, "state": {"waiting": {}}}]
    cloud.kube.add(pod)
    cloud.kube.add(o.pod("web-0", "team-a", cpu="500m", memory="512Mi", node_name=alive,
                         owner=("ReplicaSet", "web-5d9c")))  # fmt: skip
    cloud.registrar.stop()
    time.sleep(LIMIT_MINUTES * 60 + 0.5)  # past max_node_startup_minutes: a NotReady one is not starting
    network_not_ready(cloud, dead, 30)

    plan_once(cloud)

    (record,) = records(cloud)
    (drain,) = record["drain"]
    assert drain["node"] == dead and drain["code"] == "never-started-pods"
    assert "its pods never started: team-a/train-0" in drain["reason"]
    [down] = cloud.executions("ScaleDownStateMachine")
    result = cloud.stack.wait(down["executionArn"], 60)
    assert result["status"] == "SUCCEEDED", result
    (line,) = result["output"]["drains"]
    assert (line["outcome"], line["node_deleted"], line.get("evicted_count", 0)) == ("terminated", True, 0), (
        line
    )
    assert [n["metadata"]["name"] for n in cloud.kube.list("Node")] == [alive]
