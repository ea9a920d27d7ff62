"""Expendable pods (priority below expendable_priority_cutoff) on a node, as cluster-autoscaler takes them
(FAQ, "How does Cluster Autoscaler work with Pod Priority and Preemption?": they "don't prevent scale
downs"; core/utils/expendable.go FilterOutExpendablePods leaves them out of its scale-down snapshot): an
idle node that runs only such pods is drained, and its drain evicts them. A pod the drain may not evict
(the disruption rules) still keeps its node."""

from __future__ import annotations

from typing import Any

import pytest
from plan_world import World, kept_reasons

from spillway.act.drain import parse_request
from spillway.act.planning import drain_item
from spillway.local import objects as o
from spillway.planner import codes
from spillway.planner.types import ScalingPlan

SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"


def kept_codes(result: ScalingPlan) -> dict[str, str]:
    return {k.node: k.code for k in result.kept}


def backfill(node: str, **kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("owner", ("ReplicaSet", "bf"))
    kwargs.setdefault("priority", -100)
    return o.pod("backfill-0", cpu="100m", memory="128Mi", node_name=node, **kwargs)


def two_nodes() -> tuple[World, str, str]:
    """A node kept busy by a service, and one whose only pod is whatever the test puts there, idle for
    an hour."""
    w = World(regions=("us-east-1",))
    keep, idle = w.group("cpu", "m5.2xlarge", nodes=2, min_size=0, max_size=10)
    w.items.append(o.pod("svc-0", cpu="2", memory="2Gi", node_name=keep, owner=("ReplicaSet", "svc")))
    w.idle_since(idle, 60)
    return w, keep, idle


def test_a_node_running_only_an_expendable_pod_is_drained_when_idle() -> None:
    w, keep, idle = two_nodes()
    w.items.append(backfill(idle))

    result = w.plan(max_scale_in_fraction=1.0)

    [drain] = result.drain
    assert drain.node == idle, kept_reasons(result).get(idle)
    # the drain evicts the pod the plan saw there (and is cancelled if any other arrived since)
    assert (drain.code, drain.pods) == (codes.EXPENDABLE_PODS, ("default/backfill-0",))
    assert "expendable" in drain.reason
    assert kept_codes(result)[keep] == codes.WORKLOAD


def test_a_node_running_only_an_expendable_pod_counts_as_idle() -> None:
    """Its idle time runs while the expendable pod does: the pod is not workload."""
    w, _, idle = two_nodes()
    w.items.append(backfill(idle))
    w.state["nodes"] = {}  # seen for the first time

    result = w.plan()

    assert kept_codes(result)[idle] == codes.IDLE_BELOW_THRESHOLD
    assert idle in result.state.nodes


@pytest.mark.parametrize(
    "pod",
    [
        {"annotations": {SAFE_TO_EVICT: "false"}},
        {"annotations": {"karpenter.sh/do-not-disrupt": "true"}},
        {"labels": {"app": "backfill", "openai/do-not-drain": "true"}},
        {"owner": None},  # no controller would recreate it: the drain does not evict it
    ],
    ids=["safe-to-evict-false", "do-not-disrupt", "do-not-drain", "no-controller"],
)
def test_an_expendable_pod_the_drain_may_not_evict_still_keeps_its_node(pod: dict[str, Any]) -> None:
    w, _, idle = two_nodes()
    w.items.append(backfill(idle, **pod))

    result = w.plan(max_scale_in_fraction=1.0)

    assert result.drain == ()
    assert kept_codes(result)[idle] == codes.WORKLOAD


def test_an_expendable_pods_local_storage_does_not_keep_its_node() -> None:
    """Its priority says the workload tolerates losing it, scratch data and all (cluster-autoscaler
    leaves expendable pods out of its drain rules, local storage's too); the drain of its node evicts it
    as the plan names it (spillway.act.drain.classify, ``planned``)."""
    w, _, idle = two_nodes()
    pod = backfill(idle)
    pod["spec"]["volumes"] = [
        {"name": "scratch", "emptyDir": {}},
        {"name": "logs", "hostPath": {"path": "/x"}},
    ]
    w.items.append(pod)

    result = w.plan(max_scale_in_fraction=1.0)

    [drain] = result.drain
    assert (drain.node, drain.code, drain.pods) == (idle, codes.EXPENDABLE_PODS, ("default/backfill-0",))


def test_an_expendable_pod_its_budget_holds_still_keeps_its_node() -> None:
    w, _, idle = two_nodes()
    w.items.append(backfill(idle, labels={"app": "backfill"}))
    w.items.append(o.pdb("bf", "default", {"app": "backfill"}, min_available=1, disruptions_allowed=0))

    result = w.plan(max_scale_in_fraction=1.0)

    assert result.drain == ()
    assert kept_codes(result)[idle] == codes.WORKLOAD


def test_a_budget_that_allows_one_disruption_lets_one_drain_of_the_plan_evict_its_pods() -> None:
    """Two idle nodes, each running only an expendable pod of one PodDisruptionBudget that allows one
    disruption, and a node whose movable replica that budget guards too. Each pod a drain evicts spends
    one of its disruptions (README "Consolidation"); the
    plan drained all three: the Eviction API answers 429 to the second and third until the first's
    replacement is Ready, which an expendable pod's may never be, and those drains time out. Only the
    first goes now. (Found by the shared-cluster properties, test_planner_shared_properties.)"""
    w = World(regions=("us-east-1",))
    keep, first, second, busy = sorted(w.group("cpu", "m5.2xlarge", nodes=4, min_size=0, max_size=10))
    w.items.append(o.pod("svc-0", cpu="2", memory="2Gi", node_name=keep, owner=("ReplicaSet", "svc")))
    for i, node in enumerate((first, second)):
        w.items.append(backfill(node, labels={"app": "backfill"}))
        w.items[-1]["metadata"]["name"] = f"backfill-{i}"
        w.idle_since(node, 60)
    w.items.append(o.pod("web-0", cpu="1", memory="1Gi", node_name=busy, owner=("ReplicaSet", "web"),
                         labels={"app": "backfill"}, annotations={SAFE_TO_EVICT: "true"}))  # fmt: skip
    w.items.append(o.pdb("bf", "default", {"app": "backfill"}, max_unavailable=1, disruptions_allowed=1))

    result = w.plan(max_scale_in_fraction=1.0, consolidation="when-underutilized",
                    consolidation_utilization_threshold=1.0)  # fmt: skip

    [drain] = result.drain
    assert drain.node in (first, second) and drain.code == codes.EXPENDABLE_PODS
    other = second if drain.node == first else first
    assert kept_codes(result)[other] == codes.POD_NEVER
    assert "PodDisruptionBudget default/bf allows 1 disruption(s) now" in kept_reasons(result)[other]
    assert kept_codes(result)[busy] == codes.POD_NEVER
    # with two disruptions allowed, two drains take the budget's pods (one pod each)
    w.items[-1]["status"]["disruptionsAllowed"] = 2
    assert len(w.plan(max_scale_in_fraction=1.0, consolidation="when-underutilized",
                      consolidation_utilization_threshold=1.0).drain) == 2  # fmt: skip


def test_a_drain_spends_one_disruption_for_each_pod_of_the_budget_it_evicts() -> None:
    """Two idle nodes, each running two expendable pods of one budget that allows two disruptions. A
    drain's round evicts every pod it may (DrainNode evicts them all, and the Eviction API lets each go
    while the budget allows), so the first drain takes both disruptions at once and a second drain's
    evictions would get 429 until the first's replacements are Ready: it would wait on another drain's
    disruptions. cluster-autoscaler spends a budget per pod (kubernetes/autoscaler
    cluster-autoscaler/core/scaledown/pdb/basic.go, ``RemovePods`` takes one for each pod a removed node
    reschedules); so does the plan: one drain now."""
    w = World(regions=("us-east-1",))
    keep, first, second = sorted(w.group("cpu", "m5.2xlarge", nodes=3, min_size=0, max_size=10))
    w.items.append(o.pod("svc-0", cpu="2", memory="2Gi", node_name=keep, owner=("ReplicaSet", "svc")))
    for n, node in enumerate((first, second)):
        for i in range(2):
            w.items.append(backfill(node, labels={"app": "backfill"}))
            w.items[-1]["metadata"]["name"] = f"backfill-{n}-{i}"
        w.idle_since(node, 60)
    w.items.append(o.pdb("bf", "default", {"app": "backfill"}, max_unavailable=2, disruptions_allowed=2))

    result = w.plan(max_scale_in_fraction=1.0)

    [drain] = result.drain
    assert drain.node in (first, second) and len(drain.pods) == 2
    other = second if drain.node == first else first
    assert kept_codes(result)[other] == codes.POD_NEVER
    assert "PodDisruptionBudget default/bf allows 2 disruption(s) now" in kept_reasons(result)[other]
    # with four allowed, both drains evict all their pods at once
    w.items[-1]["status"]["disruptionsAllowed"] = 4
    assert len(w.plan(max_scale_in_fraction=1.0).drain) == 2


def test_a_lone_drain_may_evict_more_pods_of_a_budget_than_it_allows_at_once() -> None:
    """One drain alone evicts a budget's pods as it allows, round after round (each replacement Ready
    gives the next disruption), waiting on no other drain: the plan takes it as cluster-autoscaler
    takes such a node (``CanRemovePods``: removable while the budget allows one, not in parallel)."""
    w, _, idle = two_nodes()
    for i in range(3):
        w.items.append(backfill(idle, labels={"app": "backfill"}))
        w.items[-1]["metadata"]["name"] = f"backfill-{i}"
    w.items.append(o.pdb("bf", "default", {"app": "backfill"}, max_unavailable=1, disruptions_allowed=1))

    [drain] = w.plan(max_scale_in_fraction=1.0).drain

    assert (drain.node, len(drain.pods)) == (idle, 3)


def test_an_expendable_pod_beside_a_workload_pod_changes_nothing() -> None:
    w, _, idle = two_nodes()
    w.items.append(backfill(idle))
    w.items.append(o.pod("job-0", cpu="1", memory="1Gi", node_name=idle))

    result = w.plan(max_scale_in_fraction=1.0)

    assert result.drain == ()
    assert kept_reasons(result)[idle].startswith("runs 1 workload pod(s)")


def test_the_drain_of_such_a_node_evicts_the_pods_it_names_and_only_those() -> None:
    """It reaches DrainNode as a consolidation's does: the pods it evicts, cancelled when any other
    workload pod runs there by then, or one of them may no longer be evicted."""
    w, _, idle = two_nodes()
    w.items.append(backfill(idle))
    [drain] = w.plan(max_scale_in_fraction=1.0).drain

    item = drain_item(drain, {})

    assert item["consolidation"] is True and item["pods"] == ["default/backfill-0"]
    assert "terminate" not in item and "uncordon" not in item  # the node goes, as an empty node's does


def test_an_expendable_pod_that_tolerates_the_drain_goes_with_its_idle_node() -> None:
    """It tolerates the drain's cordon and taint: the drain neither evicts it nor waits for it
    (spillway.planner.disruption.comes_back), and it ends with its node, as cluster-autoscaler ends
    expendable pods; a pod of the same kind that is not expendable is work, and keeps its node."""
    w, _, idle = two_nodes()
    w.items.append(backfill(idle, tolerations=[{"operator": "Exists"}]))

    [drain] = w.plan(max_scale_in_fraction=1.0).drain
    assert (drain.node, drain.code) == (idle, codes.EXPENDABLE_PODS)

    w, _, idle = two_nodes()
    w.items.append(backfill(idle, tolerations=[{"operator": "Exists"}], priority=0))
    result = w.plan(max_scale_in_fraction=1.0)
    assert result.drain == ()
    assert kept_codes(result)[idle] == codes.WORKLOAD


def test_the_drain_of_such_a_node_names_the_pods_controller_so_its_successor_counts_as_named() -> None:
    """Its controller may replace it under a new name on the same node before the drain (it tolerates
    the cordon and taint, so the replacement may land right back): the drain takes a pod of the same
    controller (kind, name and uid) as its successor (spillway.act.drain.successors), instead of
    cancelling for an unplanned pod and leaving the node to the next plan, again and again."""
    w, _, idle = two_nodes()
    w.items.append(backfill(idle, tolerations=[{"operator": "Exists"}]))
    [drain] = w.plan(max_scale_in_fraction=1.0).drain

    item = drain_item(drain, {})

    uid = o._uid("ReplicaSet", "default", "bf")
    assert item["controllers"] == {
        "default/backfill-0": {"kind": "ReplicaSet", "name": "bf", "uid": uid, "priority": -100}
    }
    request = parse_request({"cluster": "c", "plan_id": "p", **item})
    assert request.controllers["default/backfill-0"].uid == uid


def test_a_drain_names_no_controller_for_a_pod_it_evicts_and_reads_as_before() -> None:
    """An evicted pod's replacement is kept away by the cordon: no successor to recognise, and the
    request stays what an older drain function reads."""
    w, _, idle = two_nodes()
    w.items.append(backfill(idle))
    [drain] = w.plan(max_scale_in_fraction=1.0).drain

    assert "controllers" not in drain_item(drain, {})
    assert "controllers" not in drain.to_dict()


def test_an_expendable_pod_that_tolerates_the_drain_spends_no_budget() -> None:
    """The drain neither evicts such a pod nor asks its PodDisruptionBudget (it goes with its node,
    disruption.goes_with_its_node), so its budget, even one that allows no disruption now, keeps no
    idle node and is left whole for the plan's other drains."""
    w, _, idle = two_nodes()
    w.items.append(backfill(idle, labels={"app": "backfill"}, tolerations=[{"operator": "Exists"}]))
    w.items.append(o.pdb("bf", "default", {"app": "backfill"}, min_available=1, disruptions_allowed=0))

    result = w.plan(max_scale_in_fraction=1.0)

    [drain] = result.drain
    assert (drain.node, drain.code) == (idle, codes.EXPENDABLE_PODS), kept_reasons(result).get(idle)
