"""A warm-pool instance whose kubelet registered a Node that is Ready (a pool whose PoolState is Running,
and a bootstrap that does not check the instance's lifecycle state: kubernetes/kops PR 11216 keeps
kubelet from starting on a Warmed:* instance for this reason). Such a Node is outside its group
(DescribeAutoScalingGroups does not list pool instances; DescribeWarmPool does), kube-scheduler binds
pods to it, and a scale-out that draws the instance adds a node whose room is already counted."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from plan_world import NOW, World, pending_codes, scale_up

from spillway.config import PlannerConfig
from spillway.inputs import node_groups
from spillway.local import objects as o
from spillway.model.aws import WarmPool, bundled_instance_types, parse_asgs
from spillway.model.cluster import ClusterSnapshot
from spillway.model.k8s import parse_kube_list
from spillway.model.nodegroup import NodeGroup
from spillway.model.state import State
from spillway.planner import ScalingPlan, codes, plan


def _pool(*instances: tuple[str, str]) -> WarmPool:
    """DescribeWarmPool's answer for a Running pool of m5.2xlarge instances (id, lifecycle state)."""
    return WarmPool.model_validate(
        {
            "WarmPoolConfiguration": {"MinSize": 0, "PoolState": "Running"},
            "Instances": [
                {"InstanceId": iid, "InstanceType": "m5.2xlarge", "LifecycleState": state}
                for iid, state in instances
            ],
        }
    )


def _read(w: World, pools: dict[str, WarmPool]) -> tuple[ClusterSnapshot, list[NodeGroup], PlannerConfig]:
    """The world as `spillway plan` reads it, with ``pools`` (group name -> DescribeWarmPool)."""
    cfg = PlannerConfig(cluster=w.cluster, regions=w.regions)
    objects = parse_kube_list(o.kube_list(w.items))
    snapshot = ClusterSnapshot.build(
        w.cluster, NOW, objects.nodes, objects.pods, objects.pdbs, others=objects.others
    )
    asgs = parse_asgs(o.asgs_output(list(w.groups.values())))
    groups = node_groups(asgs, [], bundled_instance_types(), cfg, warm_pools=pools, nodes=snapshot.nodes)
    return snapshot, groups, cfg


def _plan(w: World, pools: dict[str, WarmPool]) -> ScalingPlan:
    snapshot, groups, cfg = _read(w, pools)
    return plan(snapshot, groups, cfg, State.model_validate(w.state), NOW)


def _busy_warm_node(w: World, group: str, seed: str, **kwargs: Any) -> tuple[str, str]:
    """A Warmed:Running instance of ``group``'s pool whose Node registered at warm-up and is Ready, one
    pod kube-scheduler bound there filling it."""
    iid = o.instance_id(seed)
    node = w.node_for(group, iid, "m5.2xlarge", created=NOW - timedelta(minutes=600), **kwargs)
    w.pods(f"on-{seed}", 1, cpu="7", node_name=node)
    return iid, node


def test_a_warm_instance_whose_node_is_ready_is_named_in_its_groups_problems() -> None:
    w = World()
    w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    iid, node = _busy_warm_node(w, "cpu", "cpu-warm-0")
    stopped = o.instance_id("cpu-warm-1")  # its Node NotReady while it sits stopped: no problem
    w.node_for("cpu", stopped, "m5.2xlarge", ready=False, created=NOW - timedelta(minutes=600))

    _, (group,), _ = _read(w, {"cpu": _pool((iid, "Warmed:Running"), (stopped, "Warmed:Stopped"))})

    (problem,) = group.problems
    assert problem.startswith(f"WarmPool.Instances[{iid}]: ")
    assert f"Node {node}" in problem and "Ready" in problem and stopped not in problem
    assert NodeGroup.from_dict(group.to_dict()).problems == group.problems


def test_a_warm_instance_whose_node_is_ready_is_no_warm_new_node_of_its_group() -> None:
    """Groups cpu-a and cpu-z are alike (region, type, waste), cpu-z's pool holds one Warmed:Running
    instance whose Ready Node a pod fills. A pod that needs a new node went to cpu-z, whose warm pool
    seemed to hold it: but the instance its raise draws is that full node, counted already as a node of
    the cluster, so the pod waited a plan for nothing before cpu-z launched cold. The new node is cpu-a's
    (the name breaks the tie)."""
    w = World()
    for name in ("cpu-a", "cpu-z"):
        for i, node in enumerate(w.group(name, "m5.2xlarge", nodes=1, max_size=10)):
            w.pods(f"busy-{name}-{i}", 1, cpu="7", node_name=node)
    iid, _ = _busy_warm_node(w, "cpu-z", "cpu-z-warm-0")
    w.pods("web", 1, cpu="7")

    result = _plan(w, {"cpu-z": _pool((iid, "Warmed:Running"))})

    assert {g: (f, t) for g, (f, t, _) in scale_up(result).items()} == {"cpu-a": (1, 2)}


def test_a_warm_instance_with_no_ready_node_still_holds_a_warm_new_node() -> None:
    w = World()
    for name in ("cpu-a", "cpu-z"):
        for i, node in enumerate(w.group(name, "m5.2xlarge", nodes=1, max_size=10)):
            w.pods(f"busy-{name}-{i}", 1, cpu="7", node_name=node)
    w.pods("web", 1, cpu="7")

    result = _plan(w, {"cpu-z": _pool((o.instance_id("cpu-z-warm-0"), "Warmed:Running"))})

    assert {g: (f, t) for g, (f, t, _) in scale_up(result).items()} == {"cpu-z": (1, 2)}


def test_the_ready_node_of_a_warm_instance_is_kept_naming_its_pool_not_a_missing_group() -> None:
    """Kept as "not in a managed node group", the Node sent the operator looking for a group's missing
    tags, though its instance is in a managed group's warm pool, which is why it is never drained."""
    w = World()
    w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    iid, node = _busy_warm_node(w, "cpu", "cpu-warm-0")

    result = _plan(w, {"cpu": _pool((iid, "Warmed:Running"))})

    (kept,) = [k for k in result.kept if k.node == node]
    assert kept.code == codes.UNMANAGED
    assert f"instance {iid} is in the warm pool of group cpu (us-east-1)" in kept.reason


def test_a_pools_reuse_on_scale_in_is_read_into_its_group_and_kept_in_the_snapshot() -> None:
    """DescribeWarmPool's ``InstanceReusePolicy.ReuseOnScaleIn`` (PutWarmPool: absent, a scale-in
    terminates) reaches the group, and a stored snapshot keeps it: a scheduled shrink reads it to know
    that a terminate hook drains none of the instances the action scales in."""
    w = World()
    w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    reusing = _pool()
    assert reusing.WarmPoolConfiguration is not None
    reusing.WarmPoolConfiguration = reusing.WarmPoolConfiguration.model_validate(
        {"MinSize": 0, "PoolState": "Stopped", "InstanceReusePolicy": {"ReuseOnScaleIn": True}}
    )

    _, (group,), _ = _read(w, {"cpu": reusing})
    _, (plain,), _ = _read(w, {"cpu": _pool()})

    assert group.reuse_on_scale_in and not plain.reuse_on_scale_in
    assert NodeGroup.from_dict(group.to_dict()).reuse_on_scale_in
    assert "reuse_on_scale_in" not in plain.to_dict()


def _stopping_pool(pool_state: str, *instances: tuple[str, str], reuse: bool = True) -> WarmPool:
    """DescribeWarmPool's answer for a pool of m5.2xlarge instances in ``pool_state`` that takes back the
    instances its group scales in (``reuse``)."""
    return WarmPool.model_validate(
        {
            "WarmPoolConfiguration": {
                "MinSize": 0,
                "PoolState": pool_state,
                "InstanceReusePolicy": {"ReuseOnScaleIn": reuse},
            },
            "Instances": [
                {"InstanceId": iid, "InstanceType": "m5.2xlarge", "LifecycleState": state}
                for iid, state in instances
            ],
        }
    )


def _returned_world() -> tuple[World, str, str]:
    """One busy node of group cpu, a pending pod that needs a whole m5.2xlarge, and an idle instance of
    cpu's warm pool whose Node, in service until a moment ago, is still Ready."""
    w = World()
    (busy,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    w.pods("busy", 1, cpu="7", node_name=busy)
    iid = o.instance_id("cpu-returned")
    node = w.node_for("cpu", iid, "m5.2xlarge", created=NOW - timedelta(minutes=600))
    w.pods("web", 1, cpu="7")
    return w, iid, node


@pytest.mark.parametrize(
    ("pool_state", "lifecycle"),
    [
        ("Stopped", "Warmed:Pending:Wait"),  # a terminate hook holds it on its way back (scale-in)
        ("Stopped", "Warmed:Pending"),
        ("Stopped", "Warmed:Stopped"),  # stopped, the Node not NotReady yet (node-monitor-grace-period)
        ("Hibernated", "Warmed:Hibernated"),
        ("Running", "Warmed:Terminating"),
    ],
)
def test_the_ready_node_of_an_instance_stopping_in_its_warm_pool_holds_no_room(
    pool_state: str, lifecycle: str
) -> None:
    """An instance a scale-in returns to a Stopped (or Hibernated) pool stops there, and its Node stays
    Ready until the node lifecycle controller's node-monitor-grace-period passes. Its free room was
    counted as where the pending pod fits: nothing launched for it that plan, and a pod kube-scheduler
    binds there never runs. The pod now gets a new node of its own."""
    w, iid, _ = _returned_world()

    result = _plan(w, {"cpu": _stopping_pool(pool_state, (iid, lifecycle))})

    assert {g: (f, t) for g, (f, t, _) in scale_up(result).items()} == {"cpu": (1, 2)}


@pytest.mark.parametrize(
    ("pool_state", "lifecycle"),
    [("Running", "Warmed:Running"), ("Running", "Warmed:Pending:Wait"), ("Stopped", "Warmed:Running")],
)
def test_the_ready_node_of_an_instance_running_in_its_warm_pool_still_holds_room(
    pool_state: str, lifecycle: str
) -> None:
    """Running in the pool (or on its way into a Running pool), the instance keeps its kubelet, and a pod
    bound to its Ready Node runs there: its room is room, as kube-scheduler sees it."""
    w, iid, node = _returned_world()

    result = _plan(w, {"cpu": _stopping_pool(pool_state, (iid, lifecycle))})

    assert scale_up(result) == {}
    (waiting,) = result.pending
    assert waiting.code == codes.FITS_FREE_ROOM and node in waiting.reason


def test_a_ready_node_returned_to_a_stopped_pool_on_scale_in_is_named_so_not_as_a_bootstrap_fault() -> None:
    """The advice to start kubelet only outside Warmed:* is wrong for a node just returned from service:
    its kubelet ran until the instance stopped. The problem says what happens instead; a pool that takes
    back nothing on scale-in, or an instance running in the pool, keeps the bootstrap problem."""
    w, iid, node = _returned_world()

    _, (returned,), _ = _read(w, {"cpu": _stopping_pool("Stopped", (iid, "Warmed:Pending:Wait"))})
    _, (warming,), _ = _read(w, {"cpu": _stopping_pool("Stopped", (iid, "Warmed:Pending"), reuse=False)})
    _, (running,), _ = _read(w, {"cpu": _stopping_pool("Running", (iid, "Warmed:Running"))})

    (problem,) = returned.problems
    assert problem.startswith(f"WarmPool.Instances[{iid}]: Node {node} ")
    assert "returned to the warm pool on scale-in" in problem and "Warmed:Pending:Wait" in problem
    assert "start kubelet" not in problem
    for group in (warming, running):
        (problem,) = group.problems
        assert "start kubelet only once" in problem and "scale-in" not in problem


def test_pooled_lifecycle_states_are_kept_in_the_snapshot_and_old_snapshots_read_as_before() -> None:
    """The stored snapshot keeps each pooled instance's state and the PoolState; one stored before they
    were read has neither, and each of its pooled instances is planned as it was then (as running)."""
    w, iid, _ = _returned_world()
    _, (group,), _ = _read(w, {"cpu": _stopping_pool("Stopped", (iid, "Warmed:Stopped"))})

    stored = group.to_dict()
    assert stored["pooled_states"] == {iid: "Warmed:Stopped"} and stored["warm_pool_state"] == "Stopped"
    assert NodeGroup.from_dict(stored) == group and not group.pooled_runs(iid)
    old = {k: v for k, v in stored.items() if k not in ("pooled_states", "warm_pool_state")}
    assert NodeGroup.from_dict(old).pooled_runs(iid)


def test_an_instance_stopping_in_its_warm_pool_with_a_ready_node_is_still_a_warm_new_node() -> None:
    """Groups cpu-a and cpu-z are alike; cpu-z's Stopped pool holds an instance a scale-in just returned,
    its Node still Ready. That Node holds no room, so the draw that takes the instance back adds a node:
    it is a warm new node, and the pod that needs one goes to cpu-z (a warm pool wins the tie). Taken
    for a node of the cluster already, it sent the pod to cpu-a's cold launch."""
    w = World()
    for name in ("cpu-a", "cpu-z"):
        for i, node in enumerate(w.group(name, "m5.2xlarge", nodes=1, max_size=10)):
            w.pods(f"busy-{name}-{i}", 1, cpu="7", node_name=node)
    iid = o.instance_id("cpu-z-returned")
    w.node_for("cpu-z", iid, "m5.2xlarge", created=NOW - timedelta(minutes=600))
    w.pods("web", 1, cpu="7")

    result = _plan(w, {"cpu-z": _stopping_pool("Stopped", (iid, "Warmed:Stopped"))})

    assert {g: (f, t) for g, (f, t, _) in scale_up(result).items()} == {"cpu-z": (1, 2)}


def test_a_pod_nominated_to_the_ready_node_of_an_instance_stopping_in_its_pool_gets_a_new_node() -> None:
    """kube-scheduler nominated the pending pod to the Node while it was in service (a preemption). Its
    instance, returned to the Stopped pool, stops there: the Node holds no room, and the pod can never
    run there. Taken for a preemption under way (codes.NOMINATED), the pod was not scaled for until the
    Node turned NotReady, a plan later; it now gets a new node at once."""
    w, iid, node = _returned_world()
    web = "default/web-0"  # _returned_world's pending pod
    w.pod_item(web)["status"]["nominatedNodeName"] = node

    result = _plan(w, {"cpu": _stopping_pool("Stopped", (iid, "Warmed:Pending:Wait"))})

    assert pending_codes(result).get(web) != codes.NOMINATED
    assert {g: (f, t) for g, (f, t, _) in scale_up(result).items()} == {"cpu": (1, 2)}


def test_the_workers_on_a_node_stopping_in_its_warm_pool_are_not_counted_as_elastic_room() -> None:
    """An elastic job of three workers (minimum two): w-0 on the Node of an instance a scale-in returned
    to its Stopped pool (Ready until node-monitor-grace-period passes), w-1 on b, w-2 on c. w-0 stops
    with its instance: only the minimum stays. It was counted as running, and b was drained, giving up
    w-1: one worker left."""
    w = World()
    b, c = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10))
    iid = o.instance_id("cpu-returned")
    stopping = w.node_for("cpu", iid, "m5.2xlarge", created=NOW - timedelta(minutes=600))
    env = [{"name": "PET_NNODES", "value": "2:4"}, {"name": "PET_MAX_RESTARTS", "value": "3"}]
    for node, name in ((stopping, "w-0"), (b, "w-1"), (c, "w-2")):
        item = o.pod(name, cpu="1", memory="1Gi", node_name=node, owner=("PyTorchJob", "train"),
                     labels={"training.kubeflow.org/job-name": "train",
                             "training.kubeflow.org/replica-type": "worker"})  # fmt: skip
        item["spec"]["containers"][0]["env"] = [dict(e) for e in env]
        w.items.append(item)
    w.pods("big", 1, cpu="6", node_name=c, owner=("ReplicaSet", "big"),
           annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"})  # fmt: skip
    snapshot, groups, cfg = _read(w, {"cpu": _stopping_pool("Stopped", (iid, "Warmed:Pending:Wait"))})
    cfg = cfg.model_copy(
        update={
            "consolidation": "when-underutilized",
            "consolidation_utilization_threshold": 1.0,
            "max_scale_in_fraction": 1.0,
        }
    )

    result = plan(snapshot, groups, cfg, State.model_validate(w.state), NOW)

    assert [(d.node, d.pods) for d in result.drain] == []
    assert {k.node: k.code for k in result.kept}[b] == codes.ELASTIC_MIN
