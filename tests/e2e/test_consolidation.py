"""Consolidation end to end: the real plan function on a snapshot of two half-empty nodes drains one
through the real scale-down and DrainNode state machines on moto. Its pods move under a
PodDisruptionBudget that allows one disruption: evicted one at a time (a 429 in between), the instance
terminated and the group shrunk; the other node's pod, which may not be moved, is never touched."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from conftest import CLUSTER, HOME, Cloud, running
from test_drain import ReplicaSetController

from spillway.act.planning import claim_fields, drain_item
from spillway.local import objects as o
from spillway.planner import codes
from spillway.planner.types import Drain

PLANNER = {"consolidation": "when-underutilized"}
MOVABLE = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}


@pytest.fixture
def cloud() -> Iterator[Cloud]:
    with running(
        PLANNER_CONFIG=json.dumps(PLANNER),
        SCALE_DOWN_DELAY_AFTER_LAUNCH_MINUTES="0",  # the rig's nodes are seconds old
        MAX_SCALE_IN_FRACTION="1.0",
        DRAIN_POLL_SECONDS="1",
        # the pods' default grace (30 s) plus the 60 s a plan leaves a drain before it evicts
        # (planner.disruption.GRACE_MARGIN_SECONDS): a shorter deadline moves no such pod
        DRAIN_DEADLINE_SECONDS="90",
    ) as rig:
        yield rig


def two_movable_pods_under_a_budget(
    cloud: Cloud, movable: dict[str, str] = MOVABLE, volumes: list[dict[str, Any]] | None = None
) -> tuple[str, str, str]:
    """Two m5.xlarge nodes; on the first, two movable ReplicaSet replicas (annotated ``movable``, with
    ``volumes``) whose PodDisruptionBudget allows one of them to go at a time. Returns (that node, the
    other node, the first node's instance id)."""
    cloud.group("general", instance_type="m5.xlarge", desired=2, gpu=False)
    busy, spare = sorted(cloud.wait_nodes(2))
    instance = {name: iid for iid, name in dict(cloud.registrar.registered).items()}[busy]
    for i in range(2):
        raw = o.pod(f"web-{i}", "team-a", cpu="500m", memory="512Mi", node_name=busy, labels={"app": "web"},
                    owner=("ReplicaSet", "web-5d9c"), annotations=movable)  # fmt: skip
        if volumes:
            raw["spec"]["volumes"] = volumes
        cloud.kube.add(raw)
    cloud.kube.add(o.pdb("web", "team-a", {"app": "web"}, min_available=1))  # allows one of two
    return busy, spare, instance


def plan_and_scale_down(cloud: Cloud, spare: str) -> dict[str, Any]:
    """One plan that acts, with the web replicas recreated on ``spare`` as they are evicted, and its
    scale-down execution's result, which succeeded."""
    with ReplicaSetController(cloud.kube, "web", 2, spare):
        [outcome] = cloud.plan(cloud.stream_event(cloud.snapshot()))["results"]
        assert outcome["status"] == "acted", [json.loads(p["plan"]["S"])["kept"] for p in cloud.plans()]
        [down] = cloud.executions("ScaleDownStateMachine")
        result: dict[str, Any] = cloud.stack.wait(down["executionArn"], 60)
    assert result["status"] == "SUCCEEDED", result
    return result


def test_a_plan_consolidates_a_node_through_its_pods_budget_and_touches_nothing_unmovable(
    cloud: Cloud,
) -> None:
    busy, spare, instance = two_movable_pods_under_a_budget(cloud)
    # On the other node: a pod of no kind known to tolerate a move (a plain replica), and a DaemonSet's.
    cloud.kube.add(o.pod("db-0", "team-a", cpu="500m", memory="512Mi", node_name=spare,
                         labels={"app": "db"}, owner=("ReplicaSet", "db-7f8e")))  # fmt: skip
    cloud.kube.add(o.daemonset_pod("aws-node-spare", spare))
    cloud.kube.clear_requests()

    result = plan_and_scale_down(cloud, spare)
    [line] = result["output"]["drains"]
    assert line["node"] == busy and line["outcome"] == "terminated", line
    assert line["evicted_count"] == 2
    [record] = [json.loads(p["plan"]["S"]) for p in cloud.plans()]
    [drain] = record["drain"]
    assert drain["code"] == "consolidation" and drain["pods"] == ["team-a/web-0", "team-a/web-1"]
    kept = {k["node"]: k["code"] for k in record["kept"]}
    assert kept[spare] == "pod-never"
    # One at a time: the budget refused the second eviction until the first replica ran elsewhere.
    evictions = [(r.path, r.status) for r in cloud.kube.requests if r.path.endswith("/eviction")]
    assert {p for p, s in evictions if s == 201} == {
        "/api/v1/namespaces/team-a/pods/web-0/eviction",
        "/api/v1/namespaces/team-a/pods/web-1/eviction",
    }
    assert 429 in [s for _, s in evictions]
    # Nothing unmovable was touched: only the web pods saw an eviction, the spare node kept running.
    assert all("/pods/web-" in p for p, _ in evictions)
    assert cloud.kube.get("Pod", "db-0", "team-a") is not None
    node = cloud.kube.get("Node", spare)
    assert node is not None and not node["spec"].get("unschedulable")
    asg = cloud.asg("general", HOME)
    assert asg["DesiredCapacity"] == 1
    assert instance not in {i["InstanceId"] for i in asg["Instances"]}


def test_pods_whose_opt_in_overrides_their_local_storage_are_consolidated_end_to_end(cloud: Cloud) -> None:
    """Volcano preemptable replicas keeping scratch data in an emptyDir on disk: local storage keeps a
    pod from a drain without force, but the opt-in says the workload tolerates losing the pod, so the
    plan moves them and its DrainNode, which the plan names them to, evicts them (the planner never
    plans a drain the drain then refuses: README, "Local storage"). A plain replica with the same
    scratch on the other node is kept, ``local-storage`` its reason."""
    scratch = [{"name": "scratch", "emptyDir": {}}, {"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    busy, spare, instance = two_movable_pods_under_a_budget(
        cloud, {"volcano.sh/preemptable": "true"}, scratch
    )
    db = o.pod("db-0", "team-a", cpu="500m", memory="512Mi", node_name=spare, labels={"app": "db"},
               owner=("ReplicaSet", "db-7f8e"))  # fmt: skip
    db["spec"]["volumes"] = scratch
    cloud.kube.add(db)

    result = plan_and_scale_down(cloud, spare)
    [line] = result["output"]["drains"]
    assert (line["node"], line["outcome"], line["evicted_count"]) == (busy, "terminated", 2), line
    [record] = [json.loads(p["plan"]["S"]) for p in cloud.plans()]
    [kept] = [k for k in record["kept"] if k["node"] == spare]
    assert kept["code"] == "pod-never" and "local storage: volume(s) scratch" in kept["reason"], kept
    assert cloud.kube.get("Pod", "db-0", "team-a") is not None
    assert instance not in {i["InstanceId"] for i in cloud.asg("general", HOME)["Instances"]}


def test_a_consolidation_gives_up_rather_than_evict_a_pod_with_less_than_its_whole_grace(
    cloud: Cloud,
) -> None:
    """A replica the plan moves at a cost (whole_grace) behind a budget that allows no disruption: while
    its 30 s of grace are left the drain asks with all of them; once fewer are, it gives up as at its
    deadline (DrainTimeout naming the pod), compensated: the node uncordoned, the pod never evicted."""
    cloud.group("general", instance_type="m5.xlarge", desired=2, gpu=False)
    busy, _ = sorted(cloud.wait_nodes(2))
    instance = {name: iid for iid, name in dict(cloud.registrar.registered).items()}[busy]
    cloud.kube.add(o.pod("web-0", "team-a", cpu="500m", memory="512Mi", node_name=busy, labels={"app": "web"},
                         owner=("ReplicaSet", "web-5d9c"), annotations=MOVABLE))  # fmt: skip
    cloud.kube.add(o.pdb("web", "team-a", {"app": "web"}, min_available=1))  # allows none
    moved = Drain(node=busy, instance_id=instance, group="general", region=HOME, reason="consolidation",
                  code=codes.CONSOLIDATION, pods=("team-a/web-0",), whole_grace=("team-a/web-0",))  # fmt: skip
    item = drain_item(moved, claim_fields(datetime.now(UTC), 60))
    plan = {"cluster": CLUSTER, "plan_id": "ml-2026-12-01T08:00:00Z", "drains": [item], "poll_seconds": 1,
            "deadline_seconds": 34}  # fmt: skip
    cloud.kube.clear_requests()

    started = time.monotonic()
    result = cloud.stack.run("ScaleDownStateMachine", plan, timeout=60)
    took = time.monotonic() - started

    assert result["status"] == "SUCCEEDED", result  # the scale-down reports its drains' failures
    [line] = result["output"]["drains"]
    assert (line["outcome"], line["error"]) == ("timeout", "DrainTimeout"), line
    assert "team-a/web-0 has terminationGracePeriodSeconds 30" in line["cause"], line
    assert took < 25, took  # at once (about 4 s in), not held to its 34 s deadline
    node = cloud.kube.get("Node", busy)
    assert node is not None and not node["spec"].get("unschedulable")
    pod = cloud.kube.get("Pod", "web-0", "team-a")
    assert pod is not None and not pod["metadata"].get("deletionTimestamp")
    evictions = [r.status for r in cloud.kube.requests if r.path.endswith("/eviction")]
    assert evictions and 201 not in evictions  # asked (with its whole grace), refused, never taken
    assert cloud.desired("general") == 2
