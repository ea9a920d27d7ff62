# ruff: noqa: F811  (the rig fixture of test_drain_steps is imported and taken by name)
"""What a drain does with the pods it finds (review r25): the grace period it gives an evicted pod,
pods a DaemonSet-like controller marks as DaemonSet pods, and pods with local storage. On the rig of
test_drain_steps (the Kubernetes API emulator, which deletes pods gracefully, and a fake Auto Scaling)."""

from __future__ import annotations

from typing import Any

import pytest
from test_drain_steps import NODE, Rig, rig  # noqa: F401 (the fixture)

from spillway.act.drain import classify
from spillway.errors import DrainTimeout, InvalidDrainRequest
from spillway.local import objects
from spillway.model.cluster import PodInfo
from spillway.model.drain import Drain
from spillway.model.k8s import DAEMONSET_POD, Pod


def evictions(rig: Rig, name: str) -> list[Any]:
    return [r for r in rig.api.requests if r.method == "POST" and r.path.endswith(f"/pods/{name}/eviction")]


# --- pods a DaemonSet-like controller marks as DaemonSet pods -------------------------------------


def custom_daemonset_pod(value: str = "true") -> dict[str, Any]:
    """A pod of Datadog's ExtendedDaemonSet, which tolerates the cordon as a DaemonSet's pods do."""
    raw = objects.pod(
        "datadog-agent-x7k2p",
        "monitoring",
        node_name=NODE,
        labels={"app": "datadog-agent"},
        owner=("ExtendedDaemonSetReplicaSet", "datadog-agent-6f8d"),
        annotations={DAEMONSET_POD: value},
        tolerations=[{"operator": "Exists"}],
    )
    raw["metadata"]["ownerReferences"][0]["apiVersion"] = "datadoghq.com/v1alpha1"
    return raw


def test_a_pod_annotated_daemonset_pod_is_left_alone_as_a_daemonset_pod(rig: Rig) -> None:
    """cluster-autoscaler takes a pod annotated ``cluster-autoscaler.kubernetes.io/daemonset-pod:
    "true"`` as a DaemonSet's (utils/pod IsDaemonSetPod); evicted, its controller would put it straight
    back on the cordoned node, round after round, until the drain timed out and was undone."""
    judged = classify(Pod.model_validate(custom_daemonset_pod()), force=False)
    assert (judged.action, judged.reason.startswith(f"annotated {DAEMONSET_POD}=true")) == ("ignore", True)

    rig.api.add(custom_daemonset_pod())
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=60)
    first = rig.drainer.evict(drain)
    assert evictions(rig, "datadog-agent-x7k2p") == []
    assert first["done"] is True


def test_only_the_value_true_marks_a_daemonset_pod_as_cluster_autoscaler_compares_it() -> None:
    for value in ("True", "1", "yes", ""):
        raw = custom_daemonset_pod(value)
        # without its toleration of everything: that alone keeps it on the node (it would come back)
        raw["spec"]["tolerations"] = []
        assert classify(Pod.model_validate(raw), force=False).action == "evict", value
        judged = classify(Pod.model_validate(custom_daemonset_pod(value)), force=False)
        assert (judged.action, judged.reason.startswith("tolerates the drain's cordon")) == ("ignore", True)


# --- the grace period an eviction gives ------------------------------------------------------------


def long_grace_pod(rig: Rig, name: str, grace: int) -> None:
    raw = objects.pod(
        name, "team-a", node_name=NODE, labels={"app": "train"}, owner=("ReplicaSet", "train-5d9c")
    )
    raw["spec"]["terminationGracePeriodSeconds"] = grace
    rig.api.add(raw)


def deletion_grace(rig: Rig, name: str) -> Any:
    pod = rig.api.get("Pod", name, "team-a")
    assert pod is not None and pod["metadata"].get("deletionTimestamp"), f"{name} is not terminating"
    return pod["metadata"]["deletionGracePeriodSeconds"]


def test_an_eviction_gives_no_more_grace_than_the_time_left_so_the_pod_is_gone_by_the_deadline(
    rig: Rig,
) -> None:
    """A pod whose terminationGracePeriodSeconds (an hour) outlasts the drain's deadline (60 s): given
    its whole hour, it was still terminating at the deadline, and the drain failed and gave the node
    back with the pod stopped for nothing. Karpenter clamps the grace to the time left."""
    rig.api.kubelet_exit_delay = 10**6  # the kubelet takes the whole grace period the API gives the pod
    long_grace_pod(rig, "train-0", 3600)
    long_grace_pod(rig, "train-1", 20)  # its own grace fits: it gets it, no more
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=60)

    first = rig.drainer.evict(drain)
    assert sorted(first["evicted"]) == ["team-a/train-0", "team-a/train-1"]
    assert (deletion_grace(rig, "train-0"), deletion_grace(rig, "train-1")) == (60, 20)

    rig.clock.advance(61)
    last = rig.drainer.evict(drain, first)
    assert (last["done"], last["forced"]) == (True, False)


def test_a_pod_whose_grace_ran_out_at_the_deadline_is_leaving_and_does_not_time_the_drain_out(
    rig: Rig,
) -> None:
    """Its eviction gave it the time left, so its grace ends at the deadline; the kubelet kills it
    then, but its final delete (grace 0) reaches the API only once the pod is torn down
    (kubernetes/kubernetes pkg/kubelet/status/status_manager.go: syncPod deletes a pod only when
    canBeDeleted, "Pod fully terminated and removed from etcd"), a moment past its deletionTimestamp.
    The round at the deadline found it still listed: the drain timed out and gave the node back,
    though the pod was about to be gone. Karpenter likewise stops waiting for a pod once its
    terminationGracePeriod has run out (pkg/utils/pod/scheduling.go IsStuckTerminating)."""
    rig.api.kubelet_exit_delay = 10**6  # the kubelet takes the whole grace the API gives the pod
    rig.api.kubelet_confirm_delay = 2  # and confirms a moment later
    long_grace_pod(rig, "train-0", 3600)
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=60)
    first = rig.drainer.evict(drain)
    assert deletion_grace(rig, "train-0") == 60

    rig.clock.advance(60)
    assert rig.api.get("Pod", "train-0", "team-a") is not None  # still listed, its grace over
    last = rig.drainer.evict(drain, first)
    assert (last["done"], last["forced"], last["remaining"]) == (True, False, [])
    assert rig.drainer.check(drain)["ready"] is True


def test_before_the_deadline_a_pod_whose_grace_ran_out_is_still_waited_for(rig: Rig) -> None:
    rig.api.kubelet_exit_delay = 10**6
    rig.api.kubelet_confirm_delay = 5
    long_grace_pod(rig, "train-0", 10)
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=60)
    first = rig.drainer.evict(drain)

    rig.clock.advance(12)  # its grace is over, the kubelet has not confirmed yet: waiting costs nothing
    again = rig.drainer.evict(drain, first)
    assert (again["done"], [r["pod"] for r in again["remaining"]]) == (False, ["team-a/train-0"])
    assert rig.drainer.check(drain)["ready"] is False


def test_a_pod_deleted_by_someone_else_with_a_grace_past_the_deadline_still_times_the_drain_out(
    rig: Rig,
) -> None:
    """Only a pod whose grace has run out is leaving: one deleted with more time than the drain has
    (by its owner, not by the drain, which caps the grace) is not gone by the deadline."""
    rig.api.kubelet_exit_delay = 10**6
    long_grace_pod(rig, "train-0", 3600)
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=60)
    rig.kube.evict("team-a", "train-0", grace_period_seconds=3600)  # another hand, its whole grace

    rig.clock.advance(60)
    with pytest.raises(DrainTimeout, match="train-0"):
        rig.drainer.evict(drain)


def test_later_rounds_give_only_what_is_left_of_the_time(rig: Rig) -> None:
    rig.api.kubelet_exit_delay = 10**6
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=60)
    rig.clock.advance(45.5)
    long_grace_pod(rig, "train-0", 3600)  # came late (a budget held it, or it was bound before the cordon)

    rig.drainer.evict(drain)
    assert deletion_grace(rig, "train-0") == 14


def test_at_the_deadline_a_drain_without_force_evicts_nothing_more(rig: Rig) -> None:
    """A drain out of time fails and gives its node back: a pod evicted then is stopped for nothing."""
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=60)
    rig.clock.advance(60)
    long_grace_pod(rig, "train-0", 30)

    with pytest.raises(DrainTimeout, match=r"train-0 \(not evicted: the deadline has come\)"):
        rig.drainer.evict(drain)
    assert evictions(rig, "train-0") == []
    pod = rig.api.get("Pod", "train-0", "team-a")
    assert pod is not None and not pod["metadata"].get("deletionTimestamp")


def test_at_the_deadline_a_forced_drain_evicts_with_no_grace_left(rig: Rig) -> None:
    """A forced drain goes on to terminate the instance at its deadline: what it evicts then has no
    time left, and is deleted at once (its controller recreates it elsewhere without waiting for the
    node to go)."""
    rig.api.kubelet_exit_delay = 10**6
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=60, force=True)
    rig.clock.advance(60)
    long_grace_pod(rig, "train-0", 30)

    last = rig.drainer.evict(drain)
    assert last["evicted"] == ["team-a/train-0"]
    assert rig.api.get("Pod", "train-0", "team-a") is None
    assert last["done"] is True


# --- local storage ---------------------------------------------------------------------------------


def scratch_pod(rig: Rig, name: str, *, annotations: dict[str, str] | None = None, **kw: Any) -> None:
    """A pod keeping scratch data in an emptyDir on the node's disk (and shared memory in another)."""
    raw = objects.pod(name, "team-a", node_name=NODE, annotations=annotations, **kw)
    raw["spec"]["volumes"] = [
        {"name": "scratch", "emptyDir": {}},
        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
    ]
    raw["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "scratch", "mountPath": "/scratch"},
        {"name": "dshm", "mountPath": "/dev/shm"},
    ]
    rig.api.add(raw)


def test_a_drain_without_force_keeps_a_pod_with_emptydir_data(rig: Rig) -> None:
    """kubectl drain refuses such a pod without --delete-emptydir-data, and cluster-autoscaler keeps its
    node (skip-nodes-with-local-storage, true by default) unless it is safe-to-evict=true: an operator's
    DrainNode evicted it, and its data was gone. Kept, the drain times out and is undone, the pod
    running."""
    scratch_pod(rig, "cache-0", labels={"app": "cache"}, owner=("ReplicaSet", "cache-5d9c"))
    scratch_pod(rig, "cache-1", labels={"app": "cache"}, owner=("ReplicaSet", "cache-5d9c"),
                annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"})  # fmt: skip
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=60)

    first = rig.drainer.evict(drain)
    assert evictions(rig, "cache-0") == [], "the drain evicted a pod with emptyDir data without force"
    assert first["evicted"] == ["team-a/cache-1"]  # safe-to-evict=true lets it go, as in cluster-autoscaler
    [left] = [r for r in first["remaining"] if r["pod"] == "team-a/cache-0"]
    assert left["reason"].startswith("local storage: volume(s) scratch (")  # not dshm: tmpfs is not counted

    rig.clock.advance(61)
    with pytest.raises(DrainTimeout, match="cache-0"):
        rig.drainer.evict(drain, first)
    pod = rig.api.get("Pod", "cache-0", "team-a")
    assert pod is not None and not pod["metadata"].get("deletionTimestamp")


def test_a_forced_drain_evicts_a_pod_with_local_storage(rig: Rig) -> None:
    scratch_pod(rig, "cache-0", labels={"app": "cache"}, owner=("ReplicaSet", "cache-5d9c"))
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=60, force=True)
    assert rig.drainer.evict(drain)["evicted"] == ["team-a/cache-0"]


def test_a_plans_drain_moves_the_pods_it_names_whatever_their_local_storage(rig: Rig) -> None:
    """A consolidation moves an elastic job's worker (and an idle node's drain its expendable pods): the
    plan found a move opt-in for it, which says the workload tolerates losing the pod and its scratch
    data; the drain cannot read the Job or the config again, and takes the plan's word. A pod it does
    not name is judged as any: local storage keeps it."""
    scratch_pod(rig, "bert-worker-3", labels={"app": "bert"}, owner=("StatefulSet", "bert"))
    drain = rig.cordoned(consolidation=True, pods=["team-a/bert-worker-3"], plan_id="20261102T100000Z-abc",
                         poll_seconds=1, deadline_seconds=30)  # fmt: skip
    assert rig.drainer.evict(drain)["evicted"] == ["team-a/bert-worker-3"]


def test_a_consolidation_whose_node_runs_an_unnamed_pod_with_local_storage_is_cancelled(rig: Rig) -> None:
    scratch_pod(rig, "bert-worker-3", labels={"app": "bert"}, owner=("StatefulSet", "bert"))
    scratch_pod(rig, "cache-0", labels={"app": "cache"}, owner=("ReplicaSet", "cache-5d9c"))
    out = rig.drainer.validate({"cluster": "prod", "node": NODE, "consolidation": True,
                                "pods": ["team-a/bert-worker-3"], "plan_id": "20261102T100000Z-abc"})  # fmt: skip
    assert "cache-0" in out["cancelled"]["note"]
    assert evictions(rig, "bert-worker-3") == []


# --- pods that tolerate the drain's own cordon and taint ----------------------------------------------


def agent_pod(
    rig: Rig,
    name: str,
    tolerations: list[dict[str, Any]],
    owner: tuple[str, str] = ("ReplicaSet", "agent-7c9f"),
    priority: int = 0,
) -> None:
    """A Deployment's pod, as a monitoring agent often runs: it tolerates every taint."""
    raw = objects.pod(name, "monitoring", node_name=NODE, labels={"app": "agent"}, tolerations=tolerations,
                      owner=owner, priority=priority)  # fmt: skip
    rig.api.add(raw)


def test_a_pod_that_tolerates_the_cordon_and_the_draining_taint_is_neither_evicted_nor_waited_for(
    rig: Rig,
) -> None:
    """Evicted, its ReplicaSet's replacement (the same tolerations) may be scheduled straight back onto
    the cordoned, tainted node (kube-scheduler's NodeUnschedulable and TaintToleration filters admit
    it), round after round, until the drain times out and is undone. Karpenter neither evicts nor
    waits for a pod that tolerates its own NoSchedule taint, as it would immediately reschedule
    (kubernetes-sigs/karpenter pkg/utils/pod/scheduling.go, IsEvictable and IsDrainable through
    ToleratesDisruptedNoScheduleTaint; designs/no-schedule-taint.md): it goes with the node."""
    agent_pod(rig, "agent-0", [{"operator": "Exists"}])
    long_grace_pod(rig, "train-0", 30)
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=60)

    first = rig.drainer.evict(drain)

    assert evictions(rig, "agent-0") == []
    assert first["evicted"] == ["team-a/train-0"]
    assert [r["pod"] for r in first["remaining"]] == ["team-a/train-0"]  # the agent is not waited for
    rig.clock.advance(31)
    last = rig.drainer.evict(drain, first)
    assert (last["done"], last["remaining"]) == (True, [])
    assert rig.drainer.check(drain)["ready"] is True
    assert rig.api.get("Pod", "agent-0", "monitoring") is not None  # it goes with the node


def test_a_pod_that_tolerates_only_the_draining_taint_is_evicted_the_cordon_keeps_it_away(rig: Rig) -> None:
    agent_pod(rig, "agent-0", [{"key": "spillway.io/draining", "operator": "Exists", "effect": "NoSchedule"}])
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=60)

    assert rig.drainer.evict(drain)["evicted"] == ["monitoring/agent-0"]


# --- a plan's drain and work that tolerates the drain's marks (audit) ------------------------------

PLAN = "20261102T100000Z-abc"


def test_a_plans_idle_drain_is_cancelled_when_a_pod_that_tolerates_everything_arrived_since(rig: Rig) -> None:
    """The planner calls no node idle that runs such a pod (disruption: ``stays`` keeps its node busy),
    so one on the node at validation arrived after the plan: a scale-down must not terminate it."""
    agent_pod(rig, "train-0", [{"operator": "Exists"}])
    rig.api.clear_requests()

    out = rig.drainer.validate({"cluster": "prod", "node": NODE, "plan_id": PLAN, "reason": "idle"})

    assert set(out) == {"cancelled"}, out
    assert "monitoring/train-0" in out["cancelled"]["note"]
    assert [r for r in rig.api.requests if r.method != "GET"] == []


def test_a_consolidation_is_cancelled_when_a_pod_that_tolerates_everything_arrived_since(rig: Rig) -> None:
    rig.pod("web-0")
    agent_pod(rig, "train-0", [{"operator": "Exists"}])

    out = rig.drainer.validate(
        {"cluster": "prod", "node": NODE, "plan_id": PLAN, "consolidation": True, "pods": ["team-a/web-0"]}
    )

    assert set(out) == {"cancelled"}, out
    assert "monitoring/train-0" in out["cancelled"]["note"]


def test_a_plans_drain_keeps_its_node_for_a_pod_that_tolerates_everything_bound_after_the_cordon(
    rig: Rig,
) -> None:
    """The cordon and the taint keep no such pod away: one bound while the plan's drain runs keeps the
    node from termination; the drain is abandoned at once and its node given back, the pod running."""
    drain = rig.cordoned(plan_id=PLAN, reason="idle", poll_seconds=5, deadline_seconds=30)
    agent_pod(rig, "train-0", [{"operator": "Exists"}])

    first = rig.drainer.evict(drain)
    assert [r["pod"] for r in first["remaining"]] == ["monitoring/train-0"]
    assert "monitoring/train-0" in first["abandon"] and first["done"] is False, first
    assert evictions(rig, "train-0") == []
    assert rig.drainer.check(drain)["ready"] is False
    assert rig.api.get("Pod", "train-0", "monitoring") is not None


def test_a_plans_drain_still_lets_the_expendable_pods_it_names_go_with_the_node(rig: Rig) -> None:
    agent_pod(rig, "agent-0", [{"operator": "Exists"}])
    drain = rig.cordoned(plan_id=PLAN, consolidation=True, pods=["monitoring/agent-0"], poll_seconds=5,
                         deadline_seconds=30)  # fmt: skip
    assert rig.drainer.evict(drain)["done"] is True
    assert rig.drainer.check(drain)["ready"] is True
    assert evictions(rig, "agent-0") == []


# --- a named pod's successor: its controller replaced it under a new name since the plan --------------


def controller_of(
    name: str = "agent-7c9f", kind: str = "ReplicaSet", namespace: str = "monitoring", priority: int = 0
) -> dict[str, Any]:
    """The controller ownerReference a plan's drain carries for a named pod (kind, name and uid), and
    the named pod's priority."""
    return {"kind": kind, "name": name, "uid": objects._uid(kind, namespace, name), "priority": priority}


def named_agent(**request: Any) -> dict[str, Any]:
    """A plan's drain of an idle node naming its expendable agent-0 (which tolerates everything), as the
    planner writes it, with the pod's controller."""
    return {"cluster": "prod", "node": NODE, "plan_id": PLAN, "reason": "idle", "consolidation": True,
            "pods": ["monitoring/agent-0"], "controllers": {"monitoring/agent-0": controller_of()}, **request}  # fmt: skip


def test_a_plans_drain_lets_the_successor_of_a_named_pod_go_with_the_node(rig: Rig) -> None:
    """agent-0's ReplicaSet deleted it and made agent-1 on the same node between the plan and the drain:
    the same workload's replacement, treated as the plan treated agent-0. Unplanned, it cancelled the
    drain, the next plan named agent-1, and a pod that churned kept its node from scale-down for good."""
    agent_pod(rig, "agent-1", [{"operator": "Exists"}])

    out = rig.drainer.validate(named_agent(poll_seconds=5, deadline_seconds=30))

    assert set(out) == {"drain", "preview"}, out
    drain = Drain.model_validate(out["drain"])
    rig.drainer.cordon(drain)
    assert rig.drainer.evict(drain)["done"] is True
    assert rig.drainer.check(drain)["ready"] is True
    assert evictions(rig, "agent-1") == []


def test_a_successor_bound_while_the_drain_runs_goes_with_the_node(rig: Rig) -> None:
    agent_pod(rig, "agent-0", [{"operator": "Exists"}])
    drain = Drain.model_validate(
        rig.drainer.validate(named_agent(poll_seconds=5, deadline_seconds=30))["drain"]
    )
    rig.drainer.cordon(drain)
    rig.api.delete("Pod", "agent-0", "monitoring")
    # its toleration of everything lets it through the cordon
    agent_pod(rig, "agent-1", [{"operator": "Exists"}])

    assert rig.drainer.evict(drain)["done"] is True
    assert rig.drainer.check(drain)["ready"] is True


def test_a_successor_with_local_storage_is_opted_in_as_its_predecessor_was(rig: Rig) -> None:
    """The plan found a move opt-in for agent-0 (its priority), which local storage does not outweigh;
    its successor, made from the same template, has the same emptyDir and the same opt-in."""
    raw = objects.pod("agent-1", "monitoring", node_name=NODE, labels={"app": "agent"},
                      tolerations=[{"operator": "Exists"}], owner=("ReplicaSet", "agent-7c9f"))  # fmt: skip
    raw["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    rig.api.add(raw)

    out = rig.drainer.validate(named_agent())

    assert set(out) == {"drain", "preview"}, out


@pytest.mark.parametrize(
    "owner",
    [("ReplicaSet", "other-5b7d"), ("Job", "agent-7c9f"), None],
    ids=["another-replicaset", "another-kind-same-name", "bare"],
)
def test_a_new_pod_of_another_controller_still_cancels_the_plans_drain(
    rig: Rig, owner: tuple[str, str] | None
) -> None:
    raw = objects.pod("intruder-0", "monitoring", node_name=NODE, labels={"app": "intruder"},
                      tolerations=[{"operator": "Exists"}], owner=owner)  # fmt: skip
    if owner is None:  # bare: kept anyway (no controller would recreate it); safe-to-evict lets it stay
        raw["metadata"]["annotations"] = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
    rig.api.add(raw)

    out = rig.drainer.validate(named_agent())

    assert set(out) == {"cancelled"}, out
    assert "monitoring/intruder-0" in out["cancelled"]["note"]


def test_a_controller_recreated_under_the_same_name_is_another_workload(rig: Rig) -> None:
    """Same kind and name, another uid: the ReplicaSet the plan saw was deleted and a new one made."""
    agent_pod(rig, "agent-1", [{"operator": "Exists"}])
    request = named_agent()
    request["controllers"]["monitoring/agent-0"]["uid"] = "0f0e0d0c-0000-4000-8000-000000000000"

    out = rig.drainer.validate(request)

    assert set(out) == {"cancelled"}, out
    assert "monitoring/agent-1" in out["cancelled"]["note"]


def test_a_named_pod_still_there_has_no_successor_a_second_pod_of_its_controller_arrived(rig: Rig) -> None:
    agent_pod(rig, "agent-0", [{"operator": "Exists"}])
    agent_pod(rig, "agent-1", [{"operator": "Exists"}])  # the ReplicaSet scaled up: new work

    out = rig.drainer.validate(named_agent())

    assert set(out) == {"cancelled"}, out
    assert "monitoring/agent-1" in out["cancelled"]["note"]


def test_one_named_pod_gone_has_one_successor_not_two(rig: Rig) -> None:
    agent_pod(rig, "agent-1", [{"operator": "Exists"}])
    agent_pod(rig, "agent-2", [{"operator": "Exists"}])

    out = rig.drainer.validate(named_agent())

    assert set(out) == {"cancelled"}, out


def test_a_successor_that_does_not_tolerate_the_drain_is_still_unplanned_work(rig: Rig) -> None:
    agent_pod(rig, "agent-1", [])  # evicted, the cordon would keep its replacement away: it is work to move

    out = rig.drainer.validate(named_agent())

    assert set(out) == {"cancelled"}, out
    assert "monitoring/agent-1" in out["cancelled"]["note"]


WORKFLOW = ("Workflow", "etl-nightly")


def test_a_pod_of_higher_priority_of_the_same_controller_is_other_work_not_a_successor(rig: Rig) -> None:
    """One controller may make pods of several templates and priorities (an Argo Workflow's steps, a
    RayCluster's head and workers, a training job's launcher and workers). The plan named the expendable
    step etl-nightly-prep-1 (priority -100), which finished and was deleted; the Workflow's next step, a
    training pod of priority 1000 that tolerates everything, landed on the node. The plan never judged
    it: taken for prep-1's successor, it went with the node, the job killed by a scale-down."""
    agent_pod(rig, "etl-nightly-train-2", [{"operator": "Exists"}], owner=WORKFLOW, priority=1000)
    request = named_agent(
        pods=["monitoring/etl-nightly-prep-1"],
        controllers={"monitoring/etl-nightly-prep-1": controller_of(*reversed(WORKFLOW), priority=-100)},
    )

    out = rig.drainer.validate(request)

    assert set(out) == {"cancelled"}, out
    assert "monitoring/etl-nightly-train-2" in out["cancelled"]["note"]


def test_such_a_pod_bound_through_the_cordon_holds_the_node(rig: Rig) -> None:
    agent_pod(rig, "etl-nightly-prep-1", [{"operator": "Exists"}], owner=WORKFLOW, priority=-100)
    request = named_agent(
        pods=["monitoring/etl-nightly-prep-1"],
        controllers={"monitoring/etl-nightly-prep-1": controller_of(*reversed(WORKFLOW), priority=-100)},
        poll_seconds=5,
        deadline_seconds=30,
    )
    drain = Drain.model_validate(rig.drainer.validate(request)["drain"])
    rig.drainer.cordon(drain)
    rig.api.delete("Pod", "etl-nightly-prep-1", "monitoring")
    agent_pod(rig, "etl-nightly-train-2", [{"operator": "Exists"}], owner=WORKFLOW, priority=1000)

    first = rig.drainer.evict(drain)

    assert [r["pod"] for r in first["remaining"]] == ["monitoring/etl-nightly-train-2"], first


def test_a_successor_of_equal_or_lower_priority_goes_with_the_node(rig: Rig) -> None:
    agent_pod(rig, "etl-nightly-prep-2", [{"operator": "Exists"}], owner=WORKFLOW, priority=-200)
    request = named_agent(
        pods=["monitoring/etl-nightly-prep-1"],
        controllers={"monitoring/etl-nightly-prep-1": controller_of(*reversed(WORKFLOW), priority=-100)},
    )

    assert set(rig.drainer.validate(request)) == {"drain", "preview"}


def test_a_successor_being_deleted_itself_takes_no_place_from_the_next(rig: Rig) -> None:
    """A churning agent: named agent-0 is gone, its replacement agent-1 is being deleted already and
    agent-2 replaced that. agent-1 (first by name) took agent-0's one place, so agent-2 was unplanned
    and the drain cancelled: the churn the successor rule is for, back by the luck of names."""
    agent_pod(rig, "agent-1", [{"operator": "Exists"}])
    rig.api.kubelet_exit_delay = 10**6  # agent-1 stays terminating
    rig.kube.evict("monitoring", "agent-1")
    leaving = rig.api.get("Pod", "agent-1", "monitoring")
    assert leaving is not None and leaving["metadata"].get("deletionTimestamp")
    agent_pod(rig, "agent-2", [{"operator": "Exists"}])

    out = rig.drainer.validate(named_agent())

    assert set(out) == {"drain", "preview"}, out.get("cancelled", {}).get("note")


def test_an_older_plans_request_without_controllers_keeps_the_node_for_the_successor_as_before(
    rig: Rig,
) -> None:
    """A request written by a planner before controllers existed validates, and a pod the plan did not
    name cancels the drain as it always did; so does a drain validated before (no controllers in flight)."""
    agent_pod(rig, "agent-1", [{"operator": "Exists"}])
    request = named_agent()
    del request["controllers"]

    out = rig.drainer.validate(request)

    assert set(out) == {"cancelled"}, out
    assert "monitoring/agent-1" in out["cancelled"]["note"]

    rig.api.delete("Pod", "agent-1", "monitoring")
    agent_pod(rig, "agent-0", [{"operator": "Exists"}])
    drain = rig.cordoned(**{k: v for k, v in request.items() if k not in ("cluster", "node")},
                         poll_seconds=5, deadline_seconds=30)  # fmt: skip
    assert "controllers" not in Drain.model_fields or not drain.model_dump().get("controllers")
    rig.api.delete("Pod", "agent-0", "monitoring")
    agent_pod(rig, "agent-1", [{"operator": "Exists"}])
    first = rig.drainer.evict(drain)
    assert [r["pod"] for r in first["remaining"]] == ["monitoring/agent-1"]


def test_a_controller_for_a_pod_the_request_does_not_name_is_refused() -> None:
    from spillway.act.drain import parse_request

    request = named_agent()
    request["controllers"]["monitoring/other-0"] = controller_of()
    with pytest.raises(InvalidDrainRequest) as refused:
        parse_request(request)
    assert refused.value.field == "controllers"
    assert "monitoring/other-0 is not among them" in str(refused.value)


# --- a node long NotReady whose pods never started ----------------------------------------------------


def not_ready(rig: Rig, minutes: float, status: str = "False") -> None:
    """NODE's Ready condition turned False ``minutes`` before the drain's clock (its CNI never started),
    or ``Unknown`` (its kubelet went silent)."""
    from datetime import timedelta

    node = rig.node()
    since = rig.clock() - timedelta(minutes=minutes)
    reason = "KubeletNotReady" if status == "False" else "NodeStatusUnknown"
    node["status"]["conditions"] = [
        {"type": "Ready", "status": status, "reason": reason,
         "lastTransitionTime": since.isoformat().replace("+00:00", "Z")}
    ]  # fmt: skip
    rig.api.update("Node", node)


def never_started(rig: Rig, name: str = "train-0", annotations: dict[str, str] | None = None) -> None:
    """Bound by kube-scheduler (it tolerates everything, the not-ready taint too), never run by the
    kubelet: Pending, its container waiting."""
    raw = objects.pod(name, "team-a", node_name=NODE, phase="Pending", tolerations=[{"operator": "Exists"}],
                      annotations=annotations)  # fmt: skip
    raw["status"]["containerStatuses"] = [{"name": "main", "restartCount": 0, "state": {"waiting": {}}}]
    rig.api.add(raw)


def test_a_plans_drain_of_a_node_long_not_ready_lets_the_pods_that_never_started_go_with_it(
    rig: Rig,
) -> None:
    """As the plan judged them: nothing to evict or wait for (evicted, such a pod would only stay
    Terminating for want of a kubelet); the node is terminated and the pod garbage collector deletes
    the pods with it, and their controllers, if any, recreate them. One marked never to be disturbed
    too: it never started, so no work of it is lost."""
    not_ready(rig, 25)
    never_started(rig, "train-0")
    never_started(rig, "train-1", annotations={"karpenter.sh/do-not-disrupt": "true"})
    request = {"plan_id": PLAN, "reason": "not Ready", "unready_minutes": 20, "poll_seconds": 5,
               "deadline_seconds": 60}  # fmt: skip

    drain = rig.cordoned(**request)
    evicted = rig.drainer.evict(drain)

    assert (evicted["done"], evicted["remaining"]) == (True, [])
    assert evictions(rig, "train-0") == [] and evictions(rig, "train-1") == []
    assert rig.drainer.check(drain)["ready"] is True


@pytest.mark.parametrize(
    ("minutes", "unready_minutes", "status"), [(5, 20, "False"), (25, None, "False"), (25, 20, "Unknown")]
)
def test_a_plans_drain_is_cancelled_for_a_pod_that_never_started_unless_its_node_is_long_not_ready(
    rig: Rig, minutes: float, unready_minutes: float | None, status: str
) -> None:
    """NotReady for a moment (a freshly bound pod pulling its image is Pending too), a drain that names
    no unready time (by hand, or an older plan's), or a Node whose kubelet went silent meanwhile (Ready
    Unknown: its pods' statuses are stale, it may have started them): the pod is work, as before."""
    not_ready(rig, minutes, status)
    never_started(rig)
    extra = {"unready_minutes": unready_minutes} if unready_minutes is not None else {}

    out = rig.drainer.validate({"cluster": "prod", "node": NODE, "plan_id": PLAN, "reason": "r", **extra})

    assert set(out) == {"cancelled"} and "team-a/train-0" in out["cancelled"]["note"]


def test_a_plans_idle_drain_never_evicts_a_job_pod_bound_after_validation(rig: Rig) -> None:
    """A plan drains an idle node (no pods named). Validation finds the node empty; before the cordon
    step a batch Job's pod is bound to it (kube-scheduler prefers the emptiest node; the cordon is the
    next Lambda step, so the window is a state transition, and wider when a retry of the cordon step
    backs off). The idle drain's eviction round then evicted that running Job pod: "no running job is
    ever killed by a scale-down" (README, the product's promise), and the plan saw the node empty, so
    every workload pod on it came after the plan. A consolidation's drain already keeps such a pod
    (``ARRIVED``: left running, the drain abandoned and the node given back); a plan's idle drain, whose
    premise is an empty node, must do no less."""
    rig.api.add(objects.daemonset_pod("aws-node-x", NODE))
    drain = rig.validated(plan_id=PLAN, reason="idle 12 min", poll_seconds=5, deadline_seconds=60)
    # bound by name after validation, before the cordon (a plain Job's pod: of no kind known to move)
    rig.api.add(objects.pod("job-0", "team-a", node_name=NODE, owner=("Job", "train")))
    rig.drainer.cordon(drain)

    first = rig.drainer.evict(drain)

    assert first["evicted"] == [] and "team-a/job-0" in first["abandon"], first
    assert "scale-down is abandoned" in first["abandon"]
    assert rig.api.get("Pod", "job-0", "team-a") is not None


# --- a DaemonSet named by an ownerReference that is not its controller ------------------------------


def bare_pod_owned_by_a_daemonset(controller: bool | None) -> dict[str, Any]:
    """A pod a node agent (run by DaemonSet ``build-agent``) started on its node, with an ownerReference
    to the DaemonSet for garbage collection only (``controller`` not true): nothing recreates it."""
    raw = objects.pod("build-7f3a", "ci", node_name=NODE, labels={"app": "build"}, owner=None)
    ref = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "build-agent", "uid": "ds-uid-1"}
    if controller is not None:
        ref["controller"] = controller
    raw["metadata"]["ownerReferences"] = [ref]
    return raw


@pytest.mark.parametrize("controller", [None, False])
def test_a_pod_a_daemonset_owns_but_does_not_control_is_no_daemonset_pod(
    rig: Rig, controller: bool | None
) -> None:
    """A pod whose only ownerReference names a DaemonSet without ``controller: true`` is no DaemonSet
    pod: no DaemonSet controller manages it, and nothing recreates it once it is gone. The rule, as both
    tools Spillway follows read it, takes the *controller* reference only: cluster-autoscaler's
    IsDaemonSetPod (kubernetes/autoscaler cluster-autoscaler/utils/pod/pod.go: ``metav1.GetControllerOf
    (pod)``, kind DaemonSet, or the daemonset-pod annotation) and kubectl drain's daemonSetFilter
    (kubernetes/kubectl pkg/drain/filters.go: ``GetControllerOf``; without one the pod goes on to the
    unreplicated filter, which refuses it without --force). Spillway took the first ownerReference when
    none is a controller, so the pod was ignored as a DaemonSet's: its node looked idle to the planner
    and the drain terminated it, killing a running pod nothing recreates, without an eviction."""
    raw = bare_pod_owned_by_a_daemonset(controller)
    judged = classify(Pod.model_validate(raw), force=False)
    assert judged.action == "keep", judged
    assert "no controller would recreate it" in judged.reason
    assert PodInfo.from_pod(Pod.model_validate(raw)).daemonset is False

    rig.api.add(raw)
    out = rig.drainer.validate({"cluster": "prod", "node": NODE, "plan_id": PLAN, "reason": "idle 12 min"})
    assert set(out) == {"cancelled"} and "ci/build-7f3a" in out["cancelled"]["note"], out


# --- the order pods are evicted in: critical pods last ----------------------------------------------


def critical_pod(rig: Rig, name: str, priority_class: str = "system-cluster-critical") -> None:
    """A cluster add-on's pod (CoreDNS, a CSI controller): the API server's Priority admission gives a
    pod of a system class that class's value (system-cluster-critical 2000000000, system-node-critical
    2000001000), above any class a user may make (at most 1000000000)."""
    value = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}[priority_class]
    raw = objects.pod(
        name, "kube-system", node_name=NODE, priority=value, owner=("ReplicaSet", f"{name}-5d9c")
    )
    raw["spec"]["priorityClassName"] = priority_class
    rig.api.add(raw)


def test_a_critical_pod_is_evicted_only_once_every_other_pod_is_gone(rig: Rig) -> None:
    """CoreDNS evicted beside the application pods leaves them without DNS while they shut down.
    Karpenter evicts critical pods (priority class system-cluster-critical or system-node-critical)
    only once the node's other pods are gone (kubernetes-sigs/karpenter
    pkg/controllers/node/termination/terminator: groupPodsByPriority); so does the drain, in a later
    round, and each still gets its grace within the deadline."""
    rig.api.kubelet_exit_delay = 10**6  # held terminating until their grace is over
    long_grace_pod(rig, "train-0", 20)
    critical_pod(rig, "coredns-0")
    critical_pod(rig, "csi-ctl-0", "system-node-critical")
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=60)

    first = rig.drainer.evict(drain)
    assert first["evicted"] == ["team-a/train-0"]
    assert evictions(rig, "coredns-0") == [] and evictions(rig, "csi-ctl-0") == []
    why = {entry["pod"]: entry["reason"] for entry in first["remaining"]}
    assert why["kube-system/coredns-0"].startswith("critical")
    assert first["blocked"] == [] and first["done"] is False

    rig.clock.advance(10)
    second = rig.drainer.evict(drain, first)  # train-0 still terminating: the critical pods wait
    assert second["evicted"] == ["team-a/train-0"]
    assert evictions(rig, "coredns-0") == []

    rig.clock.advance(11)  # train-0's grace is over: the kubelet removed it
    third = rig.drainer.evict(drain, second)
    assert sorted(third["evicted"][1:]) == ["kube-system/coredns-0", "kube-system/csi-ctl-0"]
    assert deletion_grace_in(rig, "coredns-0", "kube-system") == 30  # its own, within the 39 s left


def test_a_drain_that_times_out_leaves_its_critical_pods_running(rig: Rig) -> None:
    """A pod that may not go (``karpenter.sh/do-not-disrupt``) holds the node to the deadline, and the
    drain fails and gives the node back: the critical pods it never got to were not stopped for nothing."""
    rig.api.add(
        objects.pod(
            "train-0", "team-a", node_name=NODE, owner=("ReplicaSet", "train-5d9c"),
            annotations={"karpenter.sh/do-not-disrupt": "true"},
        )
    )  # fmt: skip
    critical_pod(rig, "coredns-0")
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=60)
    first = rig.drainer.evict(drain)
    rig.clock.advance(60)
    with pytest.raises(DrainTimeout, match="coredns-0"):
        rig.drainer.evict(drain, first)
    assert evictions(rig, "coredns-0") == []
    pod = rig.api.get("Pod", "coredns-0", "kube-system")
    assert pod is not None and not pod["metadata"].get("deletionTimestamp")


def test_at_the_deadline_a_forced_drain_evicts_critical_pods_with_the_others(rig: Rig) -> None:
    """No time is left to go in order: a forced drain at its deadline evicts every pod that may go."""
    rig.api.kubelet_exit_delay = 10**6
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=60, force=True)
    rig.clock.advance(60)
    long_grace_pod(rig, "train-0", 30)
    critical_pod(rig, "coredns-0")

    last = rig.drainer.evict(drain)
    assert sorted(last["evicted"]) == ["kube-system/coredns-0", "team-a/train-0"]
    assert last["done"] is True


def deletion_grace_in(rig: Rig, name: str, namespace: str) -> Any:
    pod = rig.api.get("Pod", name, namespace)
    assert pod is not None and pod["metadata"].get("deletionTimestamp"), f"{name} is not terminating"
    return pod["metadata"]["deletionGracePeriodSeconds"]
