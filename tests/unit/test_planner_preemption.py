"""A pending pod that fits once expendable pods are preempted launches nothing.

cluster-autoscaler leaves the scheduled pods below --expendable-pods-priority-cutoff out of the snapshot it
scales up on (core/utils/expendable.go FilterOutExpendablePods), because kube-scheduler preempts them for a
pod of higher priority. kube-scheduler's DefaultPreemption preempts only for a pod whose preemptionPolicy
is not Never, takes only pods of lower priority than the preemptor, and respects PodDisruptionBudgets as a
preference only (it reprieves the victims a budget protects first, and evicts them when nothing else
makes room). Each expendable pod's room is taken once per plan.
"""

from __future__ import annotations

from typing import Any

import pytest
from plan_world import World

from spillway.local import objects as o
from spillway.model.cluster import ClusterSnapshot
from spillway.model.k8s import parse_kube_list


def backfill(node: str, name: str = "backfill-0", cpu: str = "6", priority: int = -100) -> dict[str, Any]:
    """An expendable pod (below the default cutoff of -10) of ``cpu`` on ``node``."""
    return o.pod(name, cpu=cpu, memory="1Gi", node_name=node, priority=priority, owner=("ReplicaSet", "bf"))


def one_busy_node(**group: Any) -> tuple[World, str]:
    """One m5.2xlarge (7910m allocatable) running a 6-CPU backfill pod: 1910m free, 7910m once it goes."""
    w = World(regions=("us-east-1",))
    group.setdefault("max_size", 5)
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, **group)
    w.items.append(backfill(node))
    return w, node


def test_the_preemption_policy_is_read_and_survives_the_snapshot() -> None:
    """The plan Lambda reads the snapshot observe stored: a policy lost on the way would preempt for a pod
    that never preempts."""
    w, _ = one_busy_node()
    (never,) = w.pods("never", 1, cpu="4", memory="2Gi")
    (lower,) = w.pods("lower", 1, cpu="4", memory="2Gi")
    w.pod_item(never)["spec"]["preemptionPolicy"] = "Never"
    w.pod_item(lower)["spec"]["preemptionPolicy"] = "PreemptLowerPriority"
    snapshot, *_ = w.parsed()

    again = ClusterSnapshot.from_dict(snapshot.to_dict())

    policies = {p.key: p.never_preempts for p in again.pods if p.node_name is None}
    assert policies == {never: True, lower: False}
    assert again == snapshot


def test_a_preemption_policy_the_api_does_not_know_is_refused_naming_the_field() -> None:
    pod = o.pod("train-0")
    pod["spec"]["preemptionPolicy"] = "Sometimes"

    with pytest.raises(ValueError, match=r"items\[0\]\.spec\.preemptionPolicy"):
        parse_kube_list(o.kube_list([pod]))
