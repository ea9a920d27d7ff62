"""The shortcuts that make a plan cheaper answer as the long way did: a group's key kept on the group,
a working node copied for consolidation's room, a node's shape (made once a node), its startup reasons
and its health count."""

from __future__ import annotations

from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta

from spillway.config import PlannerConfig
from spillway.model.cluster import NodeInfo, PodInfo
from spillway.model.groupkey import GroupKey
from spillway.model.nodegroup import NodeGroup, TemplateNode
from spillway.planner import codes
from spillway.planner.context import Victim, WorkNode, has_taint, shape_of, with_own_free
from spillway.planner.disruption import Move, assess_move
from spillway.planner.health import judge_health, out_of_service
from spillway.planner.predicates import HOSTNAME_LABEL
from spillway.planner.startup import uninitialized

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def _group(name: str = "gpu", region: str = "us-east-1", **kw: object) -> NodeGroup:
    base: dict[str, object] = {"min_size": 0, "max_size": 10, "desired": 1, "instance_type": "p3.16xlarge"}
    base.update({"template": None, **kw})
    return NodeGroup(name, region, **base)  # type: ignore[arg-type]


def _node(name: str, **kw: object) -> NodeInfo:
    base: dict[str, object] = {
        "name": name,
        "labels": {HOSTNAME_LABEL: name, "zone": "a", "arch": "amd64"},
        "allocatable": {"cpu": 64000, "nvidia.com/gpu": 8000},
        "created_at": NOW - timedelta(hours=1),
        "provider_id": f"aws:///us-east-1a/i-{name}",
    }
    base.update(kw)
    return NodeInfo(**base)  # type: ignore[arg-type]


def test_a_groups_key_follows_its_region_and_name_through_replace_and_leaves_equality_alone() -> None:
    group = _group()
    assert group.key == GroupKey("us-east-1", "gpu")
    moved = replace(group, region="eu-west-1", name="gpu-eu")
    assert moved.key == GroupKey("eu-west-1", "gpu-eu")
    assert replace(group, desired=1) == group and hash(replace(group, desired=1)) == hash(group)
    assert "_key" not in repr(group)


def test_a_copy_for_the_room_shares_every_field_but_gets_its_own_free_room() -> None:
    node = WorkNode(info=_node("n1"), group=_group(), used={"cpu": 1000}, workload=2, free={"cpu": 63000})
    node.victims.append(Victim("ns/p", -20, {"cpu": 1000}, False))
    node.receives, node.starting, node.terminating = 3, "starting", True
    copy = with_own_free(node)
    for f in fields(WorkNode):
        if f.name != "free":
            assert getattr(copy, f.name) is getattr(node, f.name), f.name
    assert copy.free == node.free and copy.free is not node.free
    copy.free["cpu"] -= 1000
    assert node.free["cpu"] == 63000
    assert copy == replace(copy, free=dict(copy.free))  # what reset_room made before


def test_a_nodes_shape_leaves_out_its_hostname_and_sorts_the_rest() -> None:
    one, two = _node("n1"), _node("n2", labels={"arch": "amd64", "zone": "a", HOSTNAME_LABEL: "n2"})
    assert shape_of(one) == shape_of(two) == ((("arch", "amd64"), ("zone", "a")), ())
    assert shape_of(_node("n3", labels={"zone": "b"})) != shape_of(one)


def test_a_nodes_shape_is_made_once_and_a_replaced_node_gets_its_own() -> None:
    node = _node("n1", taints=(("a", "", "NoSchedule"),))
    first = node.shape()
    assert node.shape() is first  # kept, not made again
    relabelled = replace(node, labels={HOSTNAME_LABEL: "n1", "zone": "b"})
    assert relabelled.shape() == ((("zone", "b"),), (("a", "", "NoSchedule"),))
    untainted = replace(node, taints=())
    assert untainted.shape() == ((("arch", "amd64"), ("zone", "a")), ())
    assert node.shape() is first and node == replace(node) and "_shape" not in repr(node)


def test_has_taint_finds_a_key_among_several() -> None:
    node = _node("n1", taints=(("a", "", "NoSchedule"), ("b", "x", "NoExecute")))
    assert has_taint(node, "b") and has_taint(node, "a") and not has_taint(node, "c")
    assert not has_taint(_node("n2"), "a")


def test_uninitialized_names_startup_and_passing_taints_sorted_and_missing_devices() -> None:
    config = PlannerConfig()
    template = TemplateNode(allocatable={"cpu": 64000, "nvidia.com/gpu": 8000}, labels={}, taints=())
    group = _group(template=template)
    startup = _node(
        "n1",
        taints=(
            ("startup-taint.cluster-autoscaler.kubernetes.io/z", "", "NoSchedule"),
            ("startup-taint.cluster-autoscaler.kubernetes.io/a", "", "NoSchedule"),
            ("nvidia.com/gpu", "", "NoSchedule"),
        ),
    )
    assert uninitialized(startup, group, config) == (
        "startup taint startup-taint.cluster-autoscaler.kubernetes.io/a, "
        "startup-taint.cluster-autoscaler.kubernetes.io/z"
    )
    passing = _node(
        "n2",
        taints=(("node.kubernetes.io/not-ready", "", "NoSchedule"), ("nvidia.com/gpu", "", "NoSchedule")),
    )
    assert uninitialized(passing, group, config) == (
        "taint node.kubernetes.io/not-ready (the control plane lifts it once the node is set up)"
    )
    no_gpus = _node("n3", allocatable={"cpu": 64000}, taints=(("nvidia.com/gpu", "", "NoSchedule"),))
    assert uninitialized(no_gpus, group, config) == "nvidia.com/gpu not registered yet (device plugin)"
    assert uninitialized(_node("n4", taints=(("nvidia.com/gpu", "", "NoSchedule"),)), group, config) is None


def test_out_of_service_counts_deleting_and_notready_but_not_registering_nodes() -> None:
    config = PlannerConfig()
    assert out_of_service(_node("n1", deleting=True), config, NOW)
    assert not out_of_service(_node("n2"), config, NOW)
    was_ready = _node("n3", ready=False, ready_changed_at=NOW - timedelta(minutes=1))
    assert out_of_service(was_ready, config, NOW)
    young = _node("n4", ready=False, created_at=NOW - timedelta(minutes=1))
    assert young.never_ready() and not out_of_service(young, config, NOW)


def test_judge_health_counts_per_group_and_cluster() -> None:
    config = PlannerConfig(ok_total_unready_count=0, max_total_unready_percentage=10)
    group = _group(instance_ids=("i-n1", "i-n2", "i-n3"))
    nodes = [
        _node("n1"),
        _node("n2", ready=False, ready_changed_at=NOW - timedelta(minutes=30)),
        _node("n3", ready=False, ready_changed_at=NOW - timedelta(minutes=30)),
        _node("n4"),  # of no group
    ]
    health = judge_health(nodes, [group], (), config, NOW)
    assert health.cluster is not None and (health.cluster.unready, health.cluster.nodes) == (2, 4)
    verdict = health.groups[group.key]
    assert (verdict.unready, verdict.nodes) == (2, 3)
    assert "2 of 3 node(s)" in verdict.reason


def test_the_refusals_made_once_read_as_each_pods_own_did() -> None:
    """assess_move's refusals whose reason names nothing of the pod are made once a process; each
    still carries its own rule's code and words, and the node's refusal names the node."""
    tolerates = (
        ("spillway.io/draining", "Exists", None, None),
        ("node.kubernetes.io/unschedulable", "Exists", None, None),
    )
    cases: list[tuple[dict[str, object], int | None, str, str]] = [
        (
            {"do_not_disrupt": True},
            None,
            codes.POD_DO_NOT_DISRUPT,
            "annotated karpenter.sh/do-not-disrupt=true",
        ),
        (
            {"safe_to_evict": False},
            None,
            codes.POD_NOT_SAFE_TO_EVICT,
            "annotated cluster-autoscaler.kubernetes.io/safe-to-evict=false",
        ),
        (
            {"do_not_drain": True},
            None,
            codes.POD_DO_NOT_DRAIN,
            "marked openai/do-not-drain: 1 or true, in any case (kubernetes-ec2-autoscaler's reading)",
        ),
        ({"tolerations": tolerates}, None, codes.POD_TOLERATES_DRAIN, "tolerates the drain's cordon"),
        ({"pdbs": ("one",)}, 0, codes.POD_PDB_ALLOWS_NONE, "a PodDisruptionBudget selecting it allows no"),
    ]
    for fields_, allowance, code, why in cases:
        pod = PodInfo("ns", "p", {"cpu": 1000}, node_name="n1", phase="Running", **fields_)  # type: ignore[arg-type]
        move = assess_move(pod, _node("n1"), allowance, NOW, -10)
        assert (move.movable, move.code, move.cost) == (False, code, float("inf")), code
        assert move.reason.startswith(why), code
    node = replace(_node("n7"), do_not_disrupt=True)
    pinned = assess_move(PodInfo("ns", "p", {}, node_name="n7", phase="Running"), node, None, NOW, -10)
    assert pinned == Move(
        False,
        "its node n7 is annotated karpenter.sh/do-not-disrupt=true",
        codes.NODE_DO_NOT_DISRUPT,
        float("inf"),
    )
