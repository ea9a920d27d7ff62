"""GPUs a node has but does not report yet, in the cluster totals (``gpu_total``).

A GPU node registers, and goes Ready, before its device plugin publishes ``nvidia.com/gpu``. As
cluster-autoscaler counts GPUs for ``--gpu-total`` (``GetNodeGpuTarget``, used by its scale-up resource
manager and its scale-down limits), such a node of an autoscaled group has the GPUs of its group's
template; a node of no autoscaled group with the GPU label and no GPUs has no template to count, and
cluster-autoscaler grows no GPU group under the limit while it is so. So a node whose GPUs are not
registered yet neither leaves room under the maximum nor is free to remove under the minimum.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from plan_world import NOW, World, pending_codes, pending_reasons, scale_up

from spillway.local import objects as o
from spillway.planner import ScalingPlan, codes

ACCELERATOR = {"k8s.amazonaws.com/accelerator": "nvidia-a10g"}
ALL_AT_ONCE: dict[str, Any] = {"max_scale_in_fraction": 1.0}
WHOLE_NODE: dict[str, Any] = {"cpu": "40", "memory": "160Gi"}  # with 4 GPUs: a g5.12xlarge each
# each total in both forms: the accelerator label's value (cluster-autoscaler's), or the resource name
BY_LABEL = ("nvidia-a10g", ACCELERATOR)
BY_RESOURCE = ("nvidia.com/gpu", None)
FORMS = pytest.mark.parametrize(("kind", "labels"), [BY_LABEL, BY_RESOURCE], ids=["label", "resource"])


def _without_gpus(w: World, node: str, joined_minutes_ago: float) -> None:
    """``node`` joined ``joined_minutes_ago`` and is Ready, its device plugin not registered (yet)."""
    item = w.node(node)
    item["metadata"]["creationTimestamp"] = o.iso(NOW - timedelta(minutes=joined_minutes_ago))
    for key in ("allocatable", "capacity"):
        item["status"][key].pop("nvidia.com/gpu")


def _kept(result: ScalingPlan) -> dict[str, tuple[str, str]]:
    return {k.node: (k.code, k.reason) for k in result.kept}


@FORMS
def test_gpus_not_registered_yet_count_toward_the_maximum(kind: str, labels: dict[str, str] | None) -> None:
    w = World(regions=("us-east-1",))
    ready, starting = w.group("gpu", "g5.12xlarge", nodes=2, max_size=10, gpu_taint=True, labels=labels)
    _without_gpus(w, starting, joined_minutes_ago=1)
    w.gpu_pods("busy", 1, 4, node_name=ready, **WHOLE_NODE)
    jobs = w.gpu_pods("train", 3, 4, **WHOLE_NODE)

    result = w.plan(gpu_total=[f"{kind}:0:12"])

    # 4 GPUs on the Ready node, 4 coming on the starting one: room for one more node, not two
    from_size, to_size, opened_for = scale_up(result)["gpu"]
    assert (from_size, to_size, len(opened_for)) == (2, 3, 1)
    waiting = pending_codes(result)
    assert sorted(waiting.values()) == [codes.CLUSTER_LIMIT, codes.FITS_LAUNCHING]
    assert set(waiting) | set(opened_for) == set(jobs)
    (held,) = (p for p, c in waiting.items() if c == codes.CLUSTER_LIMIT)
    used = "gpus" if labels else "nvidia.com/gpu"
    assert pending_reasons(result)[held].endswith(
        f"cluster gpu_total {kind} limit {used}=12 reached ({used}=12 used)"
    )


@FORMS
def test_a_node_without_its_gpus_is_not_free_to_remove_under_the_minimum(
    kind: str, labels: dict[str, str] | None
) -> None:
    w = World(regions=("us-east-1",))
    busy, broken = w.group("gpu", "g5.12xlarge", nodes=2, max_size=10, gpu_taint=True, labels=labels)
    _without_gpus(w, broken, joined_minutes_ago=90)  # its driver never loaded: an ordinary idle node
    w.gpu_pods("busy", 1, 4, node_name=busy, **WHOLE_NODE)
    w.idle_since(broken, 60)

    result = w.plan(gpu_total=[f"{kind}:8:64"], **ALL_AT_ONCE)

    assert result.drain == ()  # cluster-autoscaler counts its template's 4: 8, at the minimum
    code, reason = _kept(result)[broken]
    assert code == codes.CLUSTER_MIN
    assert reason.endswith("minimum gpus=8 (gpus=8 now, gpus=4 on this node)") or reason.endswith(
        "minimum nvidia.com/gpu=8 (nvidia.com/gpu=8 now, nvidia.com/gpu=4 on this node)"
    )
    # with no minimum it goes as any idle node does
    assert [d.node for d in w.plan(gpu_total=[f"{kind}:0:64"], **ALL_AT_ONCE).drain] == [broken]


@FORMS
def test_a_starting_nodes_gpus_count_in_the_total_other_nodes_are_removed_from(
    kind: str, labels: dict[str, str] | None
) -> None:
    w = World(regions=("us-east-1",))
    idle, starting = w.group("gpu", "g5.12xlarge", nodes=2, max_size=10, gpu_taint=True, labels=labels)
    _without_gpus(w, starting, joined_minutes_ago=1)
    w.idle_since(idle, 60)

    result = w.plan(gpu_total=[f"{kind}:4:64"], **ALL_AT_ONCE)

    # 8 GPUs with the starting node's 4: the idle node's 4 are above the minimum
    assert [d.node for d in result.drain] == [idle]
    assert _kept(result)[starting][0] == codes.STARTING


SELF_MANAGED = "ip-10-0-9-9.ec2.internal"


def _self_managed(w: World, labels: dict[str, str] | None, gpus: int = 0) -> None:
    """A Ready g5.12xlarge of no managed group (self-managed, or of an ASG not tagged for Spillway)."""
    w.items.append(
        o.node(SELF_MANAGED, instance="i-0selfmanaged", instance_type="g5.12xlarge", labels=labels, gpus=gpus)
    )


@FORMS
def test_a_gpu_labelled_node_of_no_managed_group_without_gpus_stops_gpu_scale_up_under_the_total(
    kind: str, labels: dict[str, str] | None
) -> None:
    """cluster-autoscaler's GetNodeGpuTarget fails for a node with its GPU label, no GPUs in allocatable
    and no autoscaled group (no template to read its GPUs from): the scale-up resource manager then
    takes every GPU limit as unknown, and no group whose nodes have GPUs grows while that node is so.
    Counting the node's 0 instead would let the total pass its maximum once its GPUs register."""
    w = World(regions=("us-east-1",))
    w.group("gpu", "g5.12xlarge", max_size=10, gpu_taint=True, labels=labels)
    w.group("cpu", "m5.2xlarge", max_size=10)
    _self_managed(w, ACCELERATOR)  # labelled, its device plugin not registered yet
    jobs = w.gpu_pods("train", 3, 4, **WHOLE_NODE)
    web = w.pods(
        "web", 1, cpu="6", memory="8Gi", node_selector={"node.kubernetes.io/instance-type": "m5.2xlarge"}
    )

    result = w.plan(gpu_total=[f"{kind}:0:12"])

    assert "gpu" not in scale_up(result)
    assert scale_up(result)["cpu"] == (0, 1, web)  # a group without GPUs grows as ever
    assert {pending_codes(result)[p] for p in jobs} == {codes.CLUSTER_LIMIT}
    assert pending_reasons(result)[jobs[0]].endswith(
        f"cluster gpu_total {kind} cannot be counted: node {SELF_MANAGED} has the GPU label "
        "k8s.amazonaws.com/accelerator but no GPUs registered yet, and no managed group's template "
        "says how many it will have"
    )


def test_a_gpu_node_of_no_managed_group_counts_the_gpus_it_reports() -> None:
    w = World(regions=("us-east-1",))
    w.group("gpu", "g5.12xlarge", max_size=10, gpu_taint=True, labels=ACCELERATOR)
    _self_managed(w, ACCELERATOR, gpus=4)
    jobs = w.gpu_pods("train", 3, 4, **WHOLE_NODE)

    result = w.plan(gpu_total=["nvidia-a10g:0:12"])

    # its 4 GPUs count: room for two g5.12xlarge more
    from_size, to_size, opened_for = scale_up(result)["gpu"]
    assert (from_size, to_size) == (0, 2)
    assert pending_codes(result) == {p: codes.CLUSTER_LIMIT for p in jobs if p not in opened_for}


def test_a_node_without_the_gpu_label_or_of_another_gpu_kind_leaves_the_total_countable() -> None:
    w = World(regions=("us-east-1",))
    w.group("gpu", "g5.12xlarge", max_size=10, gpu_taint=True, labels=ACCELERATOR)
    _self_managed(w, {"k8s.amazonaws.com/accelerator": "nvidia-t4"})  # counts under a t4 total only
    w.items.append(o.node("ip-10-0-9-8.ec2.internal", instance="i-0selfmanaged2"))  # no GPU label: no GPUs
    jobs = w.gpu_pods("train", 3, 4, **WHOLE_NODE)

    result = w.plan(gpu_total=["nvidia-a10g:0:12"])

    assert scale_up(result)["gpu"] == (0, 3, jobs)


def _straggler_world(joined_minutes_ago: float) -> tuple[World, str]:
    """A g5.12xlarge group of three busy nodes still running one m5.2xlarge (its launch template moved)."""
    w = World(regions=("us-east-1",))
    busy = w.group("gpu", "g5.12xlarge", nodes=3, max_size=10, gpu_taint=True)
    straggler_id = o.instance_id("gpu-m5")
    group = w.groups["gpu"]
    group["Instances"].append(
        {**group["Instances"][0], "InstanceId": straggler_id, "InstanceType": "m5.2xlarge"}
    )
    group["DesiredCapacity"] += 1
    straggler = w.node_for(
        "gpu", straggler_id, "m5.2xlarge", created=NOW - timedelta(minutes=joined_minutes_ago)
    )
    for i, node in enumerate(busy):
        w.gpu_pods(f"busy{i}", 1, 4, node_name=node, **WHOLE_NODE)
    return w, straggler


def test_a_node_of_another_type_than_its_groups_template_counts_the_gpus_it_reports() -> None:
    """A group whose launch template moved from m5 to g5 still runs an m5 instance: the template (the type
    most of its instances run) has GPUs, that node never will. The template says nothing of a node of
    another type (NodeGroup.other_type_instances), so it counts what it reports, not 4 GPUs forever."""
    w, straggler = _straggler_world(joined_minutes_ago=90)
    w.items.append(o.pod("svc-0", cpu="1", memory="1Gi", node_name=straggler, owner=("ReplicaSet", "svc")))
    jobs = w.gpu_pods("train", 1, 4, **WHOLE_NODE)

    result = w.plan(gpu_total=["nvidia.com/gpu:0:16"])

    # 12 GPUs registered, none coming on the m5 node: room for one more g5.12xlarge
    assert scale_up(result)["gpu"] == (4, 5, jobs), pending_reasons(result)


def test_a_young_node_of_another_type_is_not_a_gpu_node_still_starting() -> None:
    """The same reader says when a node's device plugin has not registered its template's GPUs yet, for
    its start too: a young m5 of the g5 group is no GPU node starting (capacity launching that a GPU job
    would wait for), it is an m5, and the job gets a g5 of its own."""
    w, straggler = _straggler_world(joined_minutes_ago=2)
    jobs = w.gpu_pods("train", 1, 4, **WHOLE_NODE)

    result = w.plan()

    assert scale_up(result)["gpu"] == (4, 5, jobs), pending_reasons(result)
    assert _kept(result)[straggler][0] != codes.STARTING
