"""The one disruption predicate, and the drain's pod classification that is that predicate mapped one to one."""

from __future__ import annotations

from typing import Any

import pytest

from spillway.act.drain import classify
from spillway.local import objects
from spillway.model.cluster import PodInfo
from spillway.model.k8s import Pod
from spillway.planner import codes
from spillway.planner.disruption import assess

NODE = "ip-10-0-0-1.ec2.internal"
DRAIN_ACTION = {"ignore": "ignore", "wait": "wait", "never": "keep", "movable": "evict", "stays": "ignore"}
# what a drain puts on its node: the cordon (kube-scheduler's NodeUnschedulable filter reads
# spec.unschedulable as the taint node.kubernetes.io/unschedulable:NoSchedule) and its own taint
CORDON = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
DRAINING = {"key": "spillway.io/draining", "operator": "Exists", "effect": "NoSchedule"}
EVERYTHING = {"operator": "Exists"}  # common on agents and monitoring Deployments


def _raw(**kw: Any) -> dict[str, Any]:
    annotations = kw.pop("annotations", None)
    deleting = kw.pop("deleting", False)
    raw = objects.pod("p", "team-a", node_name=NODE, annotations=annotations, **kw)
    if deleting:
        raw["metadata"]["deletionTimestamp"] = "2026-11-02T10:00:00Z"
    return raw


def _volumes(raw: dict[str, Any], *volumes: dict[str, Any]) -> dict[str, Any]:
    raw["spec"]["volumes"] = list(volumes)
    return raw


SCRATCH = {"name": "scratch", "emptyDir": {}}
SHM = {"name": "dshm", "emptyDir": {"medium": "Memory"}}
HUGE = {"name": "huge", "emptyDir": {"medium": "HugePages"}}
HOST = {"name": "logs", "hostPath": {"path": "/var/log/app"}}
CLAIM = {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}
LOCAL_OK = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"


def _not_controller(raw: dict[str, Any]) -> dict[str, Any]:
    for ref in raw["metadata"].get("ownerReferences", []):
        ref["controller"] = False
    return raw


CASES = [
    ("replicaset", _raw(owner=("ReplicaSet", "web")), False, "movable", codes.POD_MOVABLE),
    ("job", _raw(owner=("Job", "train")), False, "movable", codes.POD_MOVABLE),
    ("daemonset", objects.daemonset_pod("ds", NODE), False, "ignore", codes.POD_DAEMONSET),
    ("mirror", _raw(annotations={"kubernetes.io/config.mirror": "abc"}, owner=None), False, "ignore", codes.POD_MIRROR),
    ("succeeded", _raw(phase="Succeeded"), False, "ignore", codes.POD_FINISHED),
    ("failed", _raw(phase="Failed"), True, "ignore", codes.POD_FINISHED),
    ("terminating", _raw(deleting=True), False, "wait", codes.POD_TERMINATING),
    ("terminating-forced", _raw(deleting=True, owner=None), True, "wait", codes.POD_TERMINATING),
    ("do-not-disrupt", _raw(annotations={"karpenter.sh/do-not-disrupt": "true"}), False, "never", codes.POD_DO_NOT_DISRUPT),
    ("do-not-disrupt-forced", _raw(annotations={"karpenter.sh/do-not-disrupt": "true"}), True, "movable", codes.POD_FORCED),
    ("not-safe", _raw(annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}), False, "never", codes.POD_NOT_SAFE_TO_EVICT),
    ("not-safe-forced", _raw(annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}), True, "movable", codes.POD_FORCED),
    ("do-not-drain", _raw(labels={"openai/do-not-drain": "true"}), False, "never", codes.POD_DO_NOT_DRAIN),
    ("do-not-drain-annotated", _raw(annotations={"openai/do-not-drain": "true"}), False, "never", codes.POD_DO_NOT_DRAIN),
    ("do-not-drain-forced", _raw(labels={"openai/do-not-drain": "true"}), True, "movable", codes.POD_FORCED),
    ("odd-safe-value", _raw(annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "yes"}), False, "movable", codes.POD_MOVABLE),
    ("bare", _raw(owner=None), False, "never", codes.POD_NO_CONTROLLER),
    ("bare-forced", _raw(owner=None), True, "movable", codes.POD_FORCED),
    ("bare-safe-to-evict", _raw(owner=None, annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}), False, "movable", codes.POD_MOVABLE),
    # cluster-autoscaler lets a pod go for "true" exactly (utils/drain HasSafeToEvictAnnotation); a pod it
    # keeps for "True" was evicted, and a bare one lost for good (found by review: input fuzzing)
    ("bare-safe-to-evict-other-case", _raw(owner=None, annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "True"}), False, "never", codes.POD_NO_CONTROLLER),
    ("emptydir-safe-to-evict-other-case", _volumes(_raw(annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "TRUE"}), SCRATCH), False, "never", codes.POD_LOCAL_STORAGE),
    ("not-safe-other-case", _raw(annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "False"}), False, "never", codes.POD_NOT_SAFE_TO_EVICT),
    ("owner-not-controller", _not_controller(_raw(owner=("ReplicaSet", "web"))), False, "never", codes.POD_NO_CONTROLLER),
    # local storage: an emptyDir on the node's disk (any medium but Memory) or a hostPath, as
    # cluster-autoscaler's HasBlockingLocalStorage counts it; safe-to-evict=true or naming every such
    # volume in safe-to-evict-local-volumes lets the pod go
    ("emptydir", _volumes(_raw(owner=("ReplicaSet", "web")), SCRATCH), False, "never", codes.POD_LOCAL_STORAGE),
    ("emptydir-forced", _volumes(_raw(owner=("ReplicaSet", "web")), SCRATCH), True, "movable", codes.POD_FORCED),
    ("emptydir-hugepages", _volumes(_raw(owner=("ReplicaSet", "web")), HUGE), False, "never", codes.POD_LOCAL_STORAGE),
    ("hostpath", _volumes(_raw(owner=("ReplicaSet", "web")), HOST), False, "never", codes.POD_LOCAL_STORAGE),
    ("emptydir-memory", _volumes(_raw(owner=("Job", "train")), SHM, CLAIM), False, "movable", codes.POD_MOVABLE),
    ("emptydir-safe-to-evict", _volumes(_raw(annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}), SCRATCH), False, "movable", codes.POD_MOVABLE),
    ("emptydir-listed-safe", _volumes(_raw(annotations={LOCAL_OK: "scratch,logs"}), SCRATCH, HOST), False, "movable", codes.POD_MOVABLE),
    ("emptydir-one-listed-safe", _volumes(_raw(annotations={LOCAL_OK: "scratch"}), SCRATCH, HOST), False, "never", codes.POD_LOCAL_STORAGE),
    ("emptydir-listed-with-space", _volumes(_raw(annotations={LOCAL_OK: "logs, scratch"}), SCRATCH, HOST), False, "never", codes.POD_LOCAL_STORAGE),
    ("emptydir-bare", _volumes(_raw(owner=None), SCRATCH), False, "never", codes.POD_NO_CONTROLLER),
    ("emptydir-finished", _volumes(_raw(phase="Succeeded"), SCRATCH), False, "ignore", codes.POD_FINISHED),
    ("emptydir-daemonset", _volumes(objects.daemonset_pod("ds", NODE), SCRATCH, HOST), False, "ignore", codes.POD_DAEMONSET),
    ("daemonset-annotated", _raw(owner=("ExtendedDaemonSetReplicaSet", "agent"), annotations={"cluster-autoscaler.kubernetes.io/daemonset-pod": "true"}), False, "ignore", codes.POD_DAEMONSET),
    ("daemonset-annotated-bare", _raw(owner=None, annotations={"cluster-autoscaler.kubernetes.io/daemonset-pod": "true"}), False, "ignore", codes.POD_DAEMONSET),
    # tolerates both the drain's cordon and its taint: evicted, its controller's replacement could be
    # scheduled straight back; it is not evicted and not waited for, and goes with the node
    ("tolerates-everything", _raw(owner=("ReplicaSet", "agent"), tolerations=[EVERYTHING]), False, "stays", codes.POD_TOLERATES_DRAIN),
    ("tolerates-cordon-and-taint", _raw(owner=("ReplicaSet", "agent"), tolerations=[CORDON, DRAINING]), False, "stays", codes.POD_TOLERATES_DRAIN),
    ("tolerates-every-noschedule", _raw(owner=("ReplicaSet", "agent"), tolerations=[{"operator": "Exists", "effect": "NoSchedule"}]), False, "stays", codes.POD_TOLERATES_DRAIN),
    ("tolerates-only-the-taint", _raw(owner=("ReplicaSet", "agent"), tolerations=[DRAINING]), False, "movable", codes.POD_MOVABLE),
    ("tolerates-only-the-cordon", _raw(owner=("ReplicaSet", "agent"), tolerations=[CORDON]), False, "movable", codes.POD_MOVABLE),
    ("tolerates-only-noexecute", _raw(owner=("ReplicaSet", "agent"), tolerations=[{"operator": "Exists", "effect": "NoExecute"}]), False, "movable", codes.POD_MOVABLE),
    ("tolerates-everything-protected", _raw(owner=("ReplicaSet", "agent"), tolerations=[EVERYTHING], annotations={"karpenter.sh/do-not-disrupt": "true"}), False, "never", codes.POD_DO_NOT_DISRUPT),
    ("tolerates-everything-protected-forced", _raw(owner=("ReplicaSet", "agent"), tolerations=[EVERYTHING], annotations={"karpenter.sh/do-not-disrupt": "true"}), True, "stays", codes.POD_TOLERATES_DRAIN),
    ("tolerates-everything-bare", _raw(owner=None, tolerations=[EVERYTHING]), False, "never", codes.POD_NO_CONTROLLER),
    ("tolerates-everything-terminating", _raw(owner=("ReplicaSet", "agent"), tolerations=[EVERYTHING], deleting=True), False, "wait", codes.POD_TERMINATING),
    ("daemonset-annotated-other-case", _raw(owner=("ExtendedDaemonSetReplicaSet", "agent"), annotations={"cluster-autoscaler.kubernetes.io/daemonset-pod": "TRUE"}), False, "movable", codes.POD_MOVABLE),
]  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "force", "verdict", "code"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_assess_decides_and_the_drain_acts_on_its_verdict(
    raw: dict[str, Any], force: bool, verdict: str, code: str
) -> None:
    pod = Pod.model_validate(raw)
    info = PodInfo.from_pod(pod)
    got = assess(info, force=force)
    assert (got.verdict, got.code) == (verdict, code)
    assert got.reason
    assert got.keeps_node_busy == (verdict != "ignore")
    # the stored form decides the same
    assert assess(PodInfo.from_dict(info.to_dict()), force=force) == got
    # the drain asks the same predicate: its action is the verdict mapped, with the predicate's reason
    drain = classify(pod, force=force)
    assert (drain.pod, drain.action) == (info.key, DRAIN_ACTION[verdict])
    assert drain.reason == ("" if verdict == "movable" else got.reason)


def test_the_drain_keeps_the_pods_priority_to_evict_the_cheapest_first() -> None:
    raw = _raw(owner=("ReplicaSet", "web"), priority=1000)
    assert classify(Pod.model_validate(raw), force=False).priority == 1000


def test_cost_orders_by_priority_then_pod_deletion_cost() -> None:
    def cost(priority: int, deletion_cost: str | None) -> tuple[int, int]:
        annotations = {"controller.kubernetes.io/pod-deletion-cost": deletion_cost} if deletion_cost else None
        return assess(
            PodInfo.from_pod(Pod.model_validate(_raw(priority=priority, annotations=annotations)))
        ).cost

    assert cost(0, None) == (0, 0)
    assert cost(0, "-5") < cost(0, None) < cost(0, "7") < cost(100, "-1000")
    assert cost(0, "not a number") == (0, 0)


def test_a_pod_stored_before_the_new_facts_reads_as_controlled_and_not_terminating() -> None:
    old = {
        "ns": "team-a",
        "n": "web-0",
        "r": {"cpu": 1000},
        "node": NODE,
        "ph": "Running",
        "ok": "ReplicaSet",
        "on": "web",
    }
    info = PodInfo.from_dict(old)
    assert (info.terminating, info.controlled, info.deletion_cost) == (False, True, 0)
    assert info.to_dict() == old
    assert assess(info).verdict == "movable"


# --- stuck terminating: deleted, and still listed well past its grace period -----------------------


def _deleted(at: str, grace: int | None = None, **kw: Any) -> dict[str, Any]:
    raw = _raw(owner=("ReplicaSet", "web"), **kw)
    raw["metadata"]["deletionTimestamp"] = at
    if grace is not None:
        raw["spec"]["terminationGracePeriodSeconds"] = grace
    return raw


def test_a_terminating_pod_becomes_stuck_its_grace_period_and_30_s_after_its_deletion_timestamp() -> None:
    from datetime import UTC, datetime, timedelta

    deleted = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
    default = PodInfo.from_pod(Pod.model_validate(_deleted("2026-11-02T10:00:00Z")))
    long_grace = PodInfo.from_pod(Pod.model_validate(_deleted("2026-11-02T10:00:00Z", grace=600)))
    assert default.stuck_after == deleted + timedelta(seconds=60)  # the default 30 s, and 30 s more
    assert long_grace.stuck_after == deleted + timedelta(seconds=630)
    assert PodInfo.from_dict(default.to_dict()) == default
    assert PodInfo.from_pod(Pod.model_validate(_raw())).stuck_after is None

    before, after = deleted + timedelta(seconds=60), deleted + timedelta(seconds=61)
    assert assess(default, now=before).verdict == "wait"
    judged = assess(default, now=after)
    assert (judged.verdict, judged.code) == ("ignore", codes.POD_STUCK) and "no kubelet" in judged.reason
    assert assess(default).verdict == "wait"  # without a clock nothing is stuck
    pod = Pod.model_validate(_deleted("2026-11-02T10:00:00Z"))
    assert (classify(pod, force=False, now=before).action, classify(pod, force=False, now=after).action) == (
        "wait",
        "ignore",
    )


# --- a pod that never started, on a node long NotReady ---------------------------------------------


def test_a_pod_that_never_started_keeps_no_dead_node_busy_and_the_drain_lets_it_go() -> None:
    raw = _raw(phase="Pending", tolerations=[EVERYTHING], annotations={"karpenter.sh/do-not-disrupt": "true"})
    info = PodInfo.from_pod(Pod.model_validate(raw))

    judged = assess(info, dead_node=True)
    assert (judged.verdict, judged.code) == (
        "ignore",
        codes.POD_NEVER_STARTED,
    ) and "never started" in judged.reason
    assert assess(info).verdict == "never"  # on a node that may still come back it is work, protected
    assert classify(Pod.model_validate(raw), force=False, dead_node=True).action == "ignore"
    running = PodInfo.from_pod(Pod.model_validate(_raw(tolerations=[EVERYTHING])))
    assert assess(running, dead_node=True).verdict == "stays"
