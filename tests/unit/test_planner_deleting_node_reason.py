"""A pending pod that fits only a node on its way out: the reason names that node.

A node being deleted takes no pod (``WorkNode.schedulable``): its ``deletionTimestamp`` is set, or it
carries the taint of the autoscaler removing it (cluster-autoscaler's ``ToBeDeletedByClusterAutoscaler``,
Karpenter's ``karpenter.sh/disrupted``, Spillway's own ``spillway.io/draining``). A pod that would fit
there gets a new node, and the reason says which node it was not given, as cluster-autoscaler's and
Karpenter's events name what they considered.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from plan_world import NOW, World, pending_codes, pending_reasons, scale_up

from spillway.local import objects as o
from spillway.planner import codes


def _one_node_world() -> tuple[World, str]:
    w = World(regions=("us-east-1",))
    (node,) = w.group("web", "m5.2xlarge", nodes=1, max_size=5)
    return w, node


def _deleted(w: World, node: str) -> None:
    w.node(node)["metadata"]["deletionTimestamp"] = o.iso(NOW)


def _tainted(key: str) -> Callable[[World, str], None]:
    def mark(w: World, node: str) -> None:
        w.node(node)["spec"].setdefault("taints", []).append({"key": key, "effect": "NoSchedule"})

    return mark


MARKS = pytest.mark.parametrize(
    "mark",
    [_deleted, _tainted("ToBeDeletedByClusterAutoscaler"), _tainted("karpenter.sh/disrupted")],
    ids=["deletionTimestamp", "cluster-autoscaler", "karpenter"],
)


@MARKS
def test_the_scale_up_reason_names_the_node_being_deleted_that_fits(
    mark: Callable[[World, str], None],
) -> None:
    w, node = _one_node_world()
    mark(w, node)
    pods = w.pods("api", 1, cpu="2", memory="4Gi")

    result = w.plan()

    assert scale_up(result)["web"] == (1, 2, pods)
    (action,) = result.scale_up
    assert action.reason == (
        f"1 pending pod(s) need 1 new m5.2xlarge node in us-east-1; {node} fits but is being deleted"
    )


def test_a_node_being_deleted_that_the_pod_does_not_fit_is_not_named() -> None:
    w, node = _one_node_world()
    _deleted(w, node)
    w.items.append(o.pod("big-0", cpu="7", memory="4Gi", node_name=node))  # leaves 910m free
    w.pods("api", 1, cpu="2", memory="4Gi")

    (action,) = w.plan().scale_up

    assert node not in action.reason


def test_a_pod_that_stays_pending_names_the_node_being_deleted_that_fits() -> None:
    w = World(regions=("us-east-1",))
    (node,) = w.group("web", "m5.2xlarge", nodes=1, max_size=1)  # at its maximum
    _deleted(w, node)
    (pod,) = w.pods("api", 1, cpu="2", memory="4Gi")

    result = w.plan()

    assert result.scale_up == ()
    assert pending_codes(result)[pod] == codes.MAX_SIZE
    assert pending_reasons(result)[pod].endswith(f"; {node} fits but is being deleted")
