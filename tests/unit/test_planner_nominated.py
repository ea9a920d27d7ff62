"""Pods waiting for preemption (status.nominatedNodeName), as cluster-autoscaler and kube-scheduler see
them: nominated to a node that exists, a pod is not scaled for, and its requests are that node's from
then on for every pending pod of equal or lower priority; nominated to a node that is gone, or cordoned
for it, it is an ordinary pending pod."""

from __future__ import annotations

from plan_world import World, kept_reasons, pending_codes, scale_up

from spillway.local import objects as o
from spillway.planner import codes


def test_a_pod_nominated_to_a_node_that_is_gone_triggers_scale_up() -> None:
    """cluster-autoscaler's FilterOutExpendableAndSplit: a nomination to a node no longer in the cluster
    (reclaimed, scaled down) is no preemption under way; kube-scheduler clears it only at the pod's next
    attempt that finds nothing to preempt, which may be 5 minutes away in its unschedulable queue."""
    w = World(regions=("us-east-1",))
    w.group("cpu", "m5.2xlarge", nodes=0, max_size=5)
    (pod,) = w.pods("train", 1, cpu="2", memory="2Gi", priority=1000)
    w.pod_item(pod)["status"]["nominatedNodeName"] = "ip-10-0-0-1.ec2.internal"  # not in the cluster

    result = w.plan()

    assert pod in scale_up(result).get("cpu", (0, 0, []))[2], pending_codes(result)


def _nominated_to_a_cordoned_node(tolerates: bool = False) -> tuple[World, str]:
    w = World(regions=("us-east-1",))
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=5)
    w.cordon(node, by_spillway=False)  # by a person: no plan uncordons it
    (pod,) = w.pods("train", 1, cpu="6", memory="2Gi", priority=1000)
    w.pod_item(pod)["status"]["nominatedNodeName"] = node
    if tolerates:
        w.pod_item(pod)["spec"]["tolerations"] = [
            {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
        ]
    return w, pod


def test_a_pod_nominated_to_a_node_cordoned_since_triggers_scale_up() -> None:
    """kube-scheduler's NodeUnschedulable filter never places the pod on a cordoned node (by a drain, or
    by a person), so its nomination is no preemption under way: ordinary demand (review18)."""
    w, pod = _nominated_to_a_cordoned_node()
    result = w.plan()
    assert pending_codes(result).get(pod) != codes.NOMINATED
    assert pod in scale_up(result).get("cpu", (0, 0, []))[2], pending_codes(result)


def test_a_pod_that_tolerates_the_cordon_still_waits_for_its_nomination() -> None:
    w, pod = _nominated_to_a_cordoned_node(tolerates=True)
    result = w.plan()
    assert pending_codes(result)[pod] == codes.NOMINATED and result.scale_up == ()


def test_a_pod_nominated_to_an_existing_node_is_not_scaled_for() -> None:
    w = World(regions=("us-east-1",))
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=5)
    w.items.append(
        o.pod("low-0", cpu="7", memory="2Gi", node_name=node, priority=-5, owner=("ReplicaSet", "low"))
    )
    (pod,) = w.pods("train", 1, cpu="2", memory="2Gi", priority=1000)
    w.pod_item(pod)["status"]["nominatedNodeName"] = node

    result = w.plan()

    assert pending_codes(result)[pod] == codes.NOMINATED
    assert result.scale_up == ()


def preempting(preemptor_priority: int, other_priority: int) -> tuple[World, str, str, str]:
    """One m5.2xlarge (7910m) whose 5-CPU victim is terminating; a 6-CPU preemptor nominated there, and
    another pending pod of 2 CPUs that fits the 2.9 CPUs free now."""
    w = World(regions=("us-east-1",))
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=5)
    victim = o.pod("low-0", cpu="5", memory="2Gi", node_name=node, priority=-5, owner=("ReplicaSet", "low"))
    victim["metadata"]["deletionTimestamp"] = "2026-11-02T11:59:50Z"  # preempted, in its grace period
    victim["spec"]["terminationGracePeriodSeconds"] = 600
    w.items.append(victim)
    (preemptor,) = w.pods("train", 1, cpu="6", memory="2Gi", priority=preemptor_priority)
    w.pod_item(preemptor)["status"]["nominatedNodeName"] = node
    (other,) = w.pods("web", 1, cpu="2", memory="2Gi", priority=other_priority)
    return w, node, preemptor, other


def test_room_a_nominated_pod_is_taking_is_not_given_to_a_lower_priority_pod() -> None:
    """cluster-autoscaler adds the pod to its snapshot on the nominated node before it packs the other
    pending pods; kube-scheduler adds it to the node when it filters the node for a pod of equal or lower
    priority (addGENominatedPods). The 2.9 CPUs left are the preemptor's once the victim goes."""
    w, _, preemptor, other = preempting(1000, 0)

    result = w.plan()

    assert pending_codes(result)[preemptor] == codes.NOMINATED
    assert scale_up(result) == {"cpu": (1, 2, [other])}, (pending_codes(result), result.pending)


def test_a_pod_of_the_nominated_pods_priority_does_not_get_its_room_either() -> None:
    w, _, _, other = preempting(500, 500)

    assert scale_up(w.plan()) == {"cpu": (1, 2, [other])}


def test_a_higher_priority_pod_may_take_the_room_a_nominated_pod_waits_for() -> None:
    """kube-scheduler counts a nominated pod only against pods of equal or lower priority: one of higher
    priority is bound to the free room (and the nominated pod preempts again if it must)."""
    w, node, _, other = preempting(1000, 2000)

    result = w.plan()

    assert result.scale_up == ()
    assert pending_codes(result)[other] == codes.FITS_FREE_ROOM
    assert {p.pod: p.node for p in result.placements}[other] == node


def test_the_node_a_nominated_pod_waits_for_is_not_drained() -> None:
    """Its victims gone, the node looks empty until the preemptor binds: cluster-autoscaler's snapshot
    holds the nominated pod there, so its scale-down does not remove the node; neither does Spillway."""
    w = World(regions=("us-east-1",))
    (node, _) = w.group("cpu", "m5.2xlarge", nodes=2, min_size=0, max_size=5)
    (pod,) = w.pods("train", 1, cpu="6", memory="2Gi", priority=1000)
    w.pod_item(pod)["status"]["nominatedNodeName"] = node
    w.idle_since(node, 60)

    result = w.plan(max_scale_in_fraction=1.0)

    assert node not in [d.node for d in result.drain]
    assert "pending pod" in kept_reasons(result)[node]


def test_a_pod_nominated_to_a_node_tainted_since_triggers_scale_up() -> None:
    """kube-scheduler's TaintToleration filter keeps the pod off its nominated node as the cordon does:
    cluster-autoscaler's ToBeDeletedByClusterAutoscaler:NoSchedule comes without a cordon (review19)."""
    w = World(regions=("us-east-1",))
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=5)
    w.node(node)["spec"]["taints"] = [
        {"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"}
    ]
    (pod,) = w.pods("train", 1, cpu="6", memory="2Gi", priority=1000)
    w.pod_item(pod)["status"]["nominatedNodeName"] = node

    result = w.plan()

    assert pending_codes(result).get(pod) != codes.NOMINATED
    assert pod in scale_up(result).get("cpu", (0, 0, []))[2], pending_codes(result)


def test_each_gang_member_meets_only_the_nominated_pods_of_its_priority_or_higher() -> None:
    """kube-scheduler filters each pod of a coscheduling gang on its own: addGENominatedPods adds to a
    node only the nominated pods of priority equal or higher than that pod's (pkg/scheduler/framework/
    runtime/framework.go). A launcher at 2000 takes the 2.9 CPUs free beside a preemptor at 1000
    nominated there; its worker at 0 meets the preemptor and gets a new node. Charged at the gang's
    lowest member, the launcher was refused that room too and a second node was launched for it, to
    stay empty once the launcher binds to the free room."""
    w, node, preemptor, other = preempting(1000, 0)
    w.items.remove(w.pod_item(other))  # the gang instead
    w.pod_group("scheduling.x-k8s.io/v1alpha1", "train", spec={"minMember": 2})
    gang = {"labels": {"scheduling.x-k8s.io/pod-group": "train"}, "memory": "1Gi"}
    (launcher,) = w.pods("launcher", 1, cpu="2", priority=2000, **gang)
    (worker,) = w.pods("worker", 1, cpu="6", priority=0, **gang)

    result = w.plan()

    assert pending_codes(result)[preemptor] == codes.NOMINATED
    assert scale_up(result) == {"cpu": (1, 2, [worker])}, result.pending
    assert {p.pod: p.node for p in result.placements}[launcher] == node


def test_a_gang_that_cannot_be_placed_gives_back_the_nominated_pods_it_met() -> None:
    """The nominated pods a gang's members met in a trial are charged on the trial's checkpoint: when
    the gang cannot be placed (its worker fits no group) they are charged again for the pods after it,
    and a loose pod at 0 still does not get the room the preemptor at 1000 waits for."""
    w, _, preemptor, other = preempting(1000, 0)
    w.pod_group("scheduling.x-k8s.io/v1alpha1", "train", spec={"minMember": 2})
    gang = {"labels": {"scheduling.x-k8s.io/pod-group": "train"}, "memory": "1Gi"}
    w.pods("launcher", 1, cpu="2", priority=2000, **gang)
    w.pods("worker", 1, cpu="9", priority=0, **gang)  # more than an m5.2xlarge has

    result = w.plan()

    assert pending_codes(result)[preemptor] == codes.NOMINATED
    assert scale_up(result) == {"cpu": (1, 2, [other])}, result.pending


def test_a_gang_member_nominated_to_a_node_counts_toward_the_gang_and_the_rest_get_nodes() -> None:
    """A coscheduling gang of two at 1000: one member preempted a victim and is nominated to its node,
    the other has nowhere to go. The nominated member takes no new node (its room is its node's once
    the victim leaves), but it is one of the gang's pods that will have room: the gang needs a node
    for the other only. It was taken as not ready to place, so the gang was gang-incomplete ('needs 2
    more pod(s)') and nothing was launched, plan after plan, the pair waiting for good (coscheduling's
    Permit holds the nominated member until its partner is placed). cluster-autoscaler puts the
    nominated pod on its node and scales up for the other (FilterOutExpendableAndSplit)."""
    w, node, preemptor, other = preempting(1000, 0)
    w.items.remove(w.pod_item(other))
    w.items.remove(w.pod_item(preemptor))
    w.pod_group("scheduling.x-k8s.io/v1alpha1", "train", spec={"minMember": 2})
    gang = {"labels": {"scheduling.x-k8s.io/pod-group": "train"}, "memory": "1Gi"}
    (first,) = w.pods("first", 1, cpu="6", priority=1000, **gang)
    (second,) = w.pods("second", 1, cpu="6", priority=1000, **gang)
    w.pod_item(first)["status"]["nominatedNodeName"] = node

    result = w.plan()

    assert pending_codes(result)[first] == codes.NOMINATED
    assert scale_up(result) == {"cpu": (1, 2, [second])}, result.pending


def test_a_pod_nominated_to_a_node_its_group_is_terminating_is_ordinary_demand() -> None:
    """An instance its group terminates (Terminating:Wait while a terminate hook holds it) cannot be put
    back into service, and the plan gives its Node no room (WorkNode.schedulable); a pod nominated there
    was still taken for a preemption under way (nominated), not scaled for, its requests charged to a
    Node about to go. It is ordinary demand: the group launches a node in its place (its desired
    capacity stands), and the pod is planned onto it."""
    w = World(regions=("us-east-1",))
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=5)
    w.groups["cpu"]["Instances"][0]["LifecycleState"] = "Terminating:Wait"
    (pod,) = w.pods("train", 1, cpu="6", memory="2Gi", priority=1000)
    w.pod_item(pod)["status"]["nominatedNodeName"] = node

    result = w.plan()

    assert pending_codes(result)[pod] == codes.FITS_LAUNCHING
