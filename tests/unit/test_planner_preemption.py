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
from plan_world import World, kept_reasons, pending_codes, pending_reasons, scale_up

from spillway.local import objects as o
from spillway.model.cluster import ClusterSnapshot
from spillway.model.k8s import parse_kube_list
from spillway.planner import codes
from spillway.planner.types import ScalingPlan


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


def placed_on(result: ScalingPlan) -> dict[str, str]:
    return {p.pod: p.node for p in result.placements}


def test_a_pod_that_fits_once_an_expendable_pod_is_preempted_launches_nothing() -> None:
    w, node = one_busy_node()
    (pod,) = w.pods("train", 1, cpu="4", memory="2Gi")

    result = w.plan()

    assert result.scale_up == (), scale_up(result)
    assert pending_codes(result)[pod] == codes.FITS_BY_PREEMPTION
    reason = pending_reasons(result)[pod]
    assert node in reason and "default/backfill-0" in reason
    assert placed_on(result)[pod] == node


def test_a_pod_whose_preemption_policy_is_never_does_not_preempt() -> None:
    """kube-scheduler's DefaultPreemption: a pod with preemptionPolicy Never is not eligible to preempt."""
    w, node = one_busy_node()
    (pod,) = w.pods("train", 1, cpu="4", memory="2Gi")
    w.pod_item(pod)["spec"]["preemptionPolicy"] = "Never"

    result = w.plan()

    assert scale_up(result) == {"cpu": (1, 2, [pod])}
    assert placed_on(result)[pod] != node


@pytest.mark.parametrize("running", [-100, -50], ids=["equal", "higher"])
def test_an_expendable_pending_pod_does_not_take_the_room_of_an_expendable_pod_of_its_priority_or_higher(
    running: int,
) -> None:
    w = World(regions=("us-east-1",))
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=5)
    w.items.append(backfill(node, priority=running))
    (pod,) = w.pods("batch", 1, cpu="4", memory="2Gi", priority=-100)

    result = w.plan()

    assert pending_codes(result)[pod] == codes.EXPENDABLE
    assert pod not in placed_on(result) and result.scale_up == ()


def test_two_pending_pods_do_not_both_take_one_expendable_pods_room() -> None:
    """7910m once the backfill goes: one 4-CPU pod fits there, not two; the higher priority one gets it."""
    w, node = one_busy_node()
    (first,) = w.pods("urgent", 1, cpu="4", memory="2Gi", priority=100)
    (second,) = w.pods("later", 1, cpu="4", memory="2Gi", priority=0)

    result = w.plan()

    assert pending_codes(result)[first] == codes.FITS_BY_PREEMPTION
    assert placed_on(result)[first] == node
    assert scale_up(result) == {"cpu": (1, 2, [second])}


@pytest.mark.parametrize("policy", ["PreemptLowerPriority", "Never"])
def test_the_room_an_expendable_pod_leaves_beyond_its_preemptor_is_free_room_for_the_next_pod(
    policy: str,
) -> None:
    """The preempted pod goes whole: 7910m less the 4 CPUs of the preemptor leaves 3910m, which a 3-CPU
    pod of lower priority takes without preempting anything more, even one that never preempts."""
    w, node = one_busy_node()
    (first,) = w.pods("urgent", 1, cpu="4", memory="2Gi", priority=100)
    (second,) = w.pods("later", 1, cpu="3", memory="2Gi", priority=0)
    w.pod_item(second)["spec"]["preemptionPolicy"] = policy

    result = w.plan()

    assert result.scale_up == ()
    assert pending_codes(result) == {first: codes.FITS_BY_PREEMPTION, second: codes.FITS_FREE_ROOM}
    assert placed_on(result) == {first: node, second: node}


def test_free_room_elsewhere_comes_before_preemption() -> None:
    """kube-scheduler preempts only when no node fits the pod as it is."""
    w = World(regions=("us-east-1",))
    (busy, empty) = w.group("cpu", "m5.2xlarge", nodes=2, max_size=5)
    w.items.append(backfill(busy))
    (pod,) = w.pods("train", 1, cpu="4", memory="2Gi")

    result = w.plan()

    assert pending_codes(result)[pod] == codes.FITS_FREE_ROOM
    assert placed_on(result)[pod] == empty


def test_a_budget_is_a_preference_among_victims_not_a_block() -> None:
    """Two backfill pods, either of which makes room: the one no budget protects is the victim, though
    the other has the lower priority (kube-scheduler reprieves the pods a budget protects first). With
    only the protected one there, it is preempted all the same."""
    w = World(regions=("us-east-1",))
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=5)
    guarded = o.pod(
        "guarded-0", cpu="3", memory="1Gi", node_name=node, priority=-100, owner=("ReplicaSet", "g")
    )
    w.items += [guarded, backfill(node, cpu="3", priority=-50)]  # 1910m free, 4910m with either gone
    w.items.append(o.pdb("guard", "default", {"app": "guarded"}, min_available=1))
    (pod,) = w.pods("train", 1, cpu="4", memory="2Gi")

    result = w.plan()

    reason = pending_reasons(result)[pod]
    assert pending_codes(result)[pod] == codes.FITS_BY_PREEMPTION, reason
    assert "default/backfill-0" in reason and "default/guarded-0" not in reason

    alone = World(regions=("us-east-1",))
    (node,) = alone.group("cpu", "m5.2xlarge", nodes=1, max_size=5)
    alone.items += [guarded, o.pdb("guard", "default", {"app": "guarded"}, min_available=1)]
    alone.pods("train", 1, cpu="6", memory="2Gi")

    assert pending_codes(alone.plan())[pod] == codes.FITS_BY_PREEMPTION


def test_the_node_a_pod_fits_by_preemption_is_kept_from_scale_down() -> None:
    """Its only pod expendable, the node is idle and would be drained (expendable-pods); a pending pod
    that preempts there needs it: kept as pending-fits, as a node a pending pod fits on is."""
    w, node = one_busy_node(min_size=0)
    w.idle_since(node, 60)
    (pod,) = w.pods("train", 1, cpu="4", memory="2Gi")

    result = w.plan(max_scale_in_fraction=1.0)

    assert node not in [d.node for d in result.drain]
    assert {k.node: k.code for k in result.kept}[node] == codes.PENDING_FITS, kept_reasons(result)
    assert result.scale_up == () and pending_codes(result)[pod] == codes.FITS_BY_PREEMPTION


def test_a_gang_that_cannot_be_placed_whole_gives_the_expendable_room_back() -> None:
    """A gang of two 4-CPU pods: one fits by preemption, the other has no room (the group is at MaxSize),
    so the gang is rolled back; a later pod of lower priority still finds the backfill's room."""
    w, node = one_busy_node(max_size=1)
    gang = w.pods("gang", 2, cpu="4", memory="2Gi", priority=100)
    w.pod_group(
        "scheduling.x-k8s.io/v1alpha1", "train", spec={"minMember": 2}
    )  # scheduler-plugins' coscheduling
    for pod in gang:
        w.join_gang(pod, "coscheduling")
    (later,) = w.pods("later", 1, cpu="4", memory="2Gi", priority=0)

    result = w.plan()

    assert {pending_codes(result)[p] for p in gang} == {codes.MAX_SIZE}, pending_reasons(result)
    assert pending_codes(result)[later] == codes.FITS_BY_PREEMPTION
    assert placed_on(result)[later] == node


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


def test_the_room_of_an_expendable_pod_being_deleted_is_a_pending_pods_too() -> None:
    """cluster-autoscaler's FilterOutExpendablePods drops every scheduled pod below the cutoff, being
    deleted or not: its room comes free by itself, so a pod that fits once it is gone launches nothing
    (nominated pods, which may wait for it, are charged before; review19)."""
    w = World(regions=("us-east-1",))
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=5)
    backfill = o.pod(
        "backfill-0", cpu="6", memory="1Gi", node_name=node, priority=-100, owner=("ReplicaSet", "bf")
    )
    backfill["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    w.items.append(backfill)
    (pod,) = w.pods("train", 1, cpu="4", memory="2Gi")

    result = w.plan()

    assert result.scale_up == (), (scale_up(result), pending_codes(result))
    assert pending_codes(result)[pod] == codes.FITS_BY_PREEMPTION
