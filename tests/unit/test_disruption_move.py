"""assess_move: may consolidation move a pod to save cost, and at what cost (one test per rule).

Each case goes the whole way a live pod goes: API objects (pod, node, PDBs, job objects) → a snapshot →
its stored form → the predicate, so a rule is exercised together with the fields it reads.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from spillway.act.drain import classify
from spillway.local import objects
from spillway.model.cluster import ClusterSnapshot, PodInfo
from spillway.model.jobs import JobInfo
from spillway.model.k8s import Pod, iter_kube_list
from spillway.planner import codes
from spillway.planner.disruption import ElasticRef, Move, assess, assess_move, elastic_room, move_cost

NODE = "ip-10-0-0-1.ec2.internal"
NS = "ml"
NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
CUTOFF = -10
SAFE = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
EVERYTHING = {"operator": "Exists"}


def node(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    raw = objects.node(NODE, instance="i-0abc")
    if annotations:
        raw["metadata"].setdefault("annotations", {}).update(annotations)
    return raw


def pod(
    name: str = "p-0",
    *,
    owner: tuple[str, str] | None = ("ReplicaSet", "web-5d9c"),
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
    command: list[str] | None = None,
    args: list[str] | None = None,
    owner_api: str | None = None,
    deleting: bool = False,
    **kw: Any,
) -> dict[str, Any]:
    raw = objects.pod(
        name, NS, node_name=kw.pop("node_name", NODE), owner=owner, labels=labels or {"app": "x"},
        annotations=annotations, created=NOW - timedelta(hours=1), **kw,
    )  # fmt: skip
    container = raw["spec"]["containers"][0]
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    if command:
        container["command"] = command
    if args:
        container["args"] = args
    if owner_api:
        raw["metadata"]["ownerReferences"][0]["apiVersion"] = owner_api
    if deleting:
        raw["metadata"]["deletionTimestamp"] = "2026-11-02T11:59:00Z"
    return raw


def grace_ends(raw: dict[str, Any], at: datetime) -> dict[str, Any]:
    """The pod is being deleted, its grace period ending ``at`` (its ``metadata.deletionTimestamp``)."""
    raw["metadata"]["deletionTimestamp"] = at.isoformat().replace("+00:00", "Z")
    return raw


def scratch(raw: dict[str, Any], medium: str | None = None) -> dict[str, Any]:
    """The pod keeps scratch data in an emptyDir volume (on the node's disk unless ``medium``)."""
    source = {"medium": medium} if medium else {}
    raw["spec"]["volumes"] = [*raw["spec"].get("volumes", []), {"name": "scratch", "emptyDir": source}]
    return raw


def pdb(
    name: str,
    allowed: int,
    selector: dict[str, Any] | None,
    *,
    policy: str | None = None,
    healthy: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """A budget as the API serves it; ``healthy``: its status (currentHealthy, desiredHealthy)."""
    spec: dict[str, Any] = {"minAvailable": 1}
    if selector is not None:
        spec["selector"] = selector
    if policy is not None:
        spec["unhealthyPodEvictionPolicy"] = policy
    status: dict[str, Any] = {"disruptionsAllowed": allowed}
    if healthy is not None:
        status |= {"currentHealthy": healthy[0], "desiredHealthy": healthy[1]}
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
        "status": status,
    }


def unready(raw: dict[str, Any]) -> dict[str, Any]:
    """The pod runs and is not Ready (a crash loop, a failing readiness probe)."""
    for condition in raw["status"]["conditions"]:
        if condition["type"] in ("Ready", "ContainersReady"):
            condition["status"] = "False"
    return raw


def pytorchjob(name: str, elastic: dict[str, int] | None, workers: int = 4) -> dict[str, Any]:
    spec: dict[str, Any] = {"pytorchReplicaSpecs": {"Worker": {"replicas": workers, "template": {}}}}
    if elastic is not None:
        spec["elasticPolicy"] = {**elastic, "rdzvBackend": "c10d"}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": NS},
            "spec": spec}  # fmt: skip


def paddlejob(name: str, elastic: dict[str, int]) -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PaddleJob", "metadata": {"name": name, "namespace": NS},
            "spec": {"elasticPolicy": elastic, "paddleReplicaSpecs": {"Worker": {"replicas": 3}}}}  # fmt: skip


def batch_job(name: str, rules: list[dict[str, Any]] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}
    if rules is not None:
        spec["podFailurePolicy"] = {"rules": rules}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


def kubeflow_pod(job: str, role: str = "Worker", kind: str = "PyTorchJob", **kw: Any) -> dict[str, Any]:
    labels = {
        "training.kubeflow.org/job-name": job,
        "training.kubeflow.org/replica-type": role.lower(),
        "training.kubeflow.org/operator-name": f"{kind.lower()}-controller",
    }
    return pod(f"{job}-{role.lower()}-0", owner=(kind, job), owner_api="kubeflow.org/v1", labels=labels, **kw)


def job_pod(job: str, **kw: Any) -> dict[str, Any]:
    labels = {"batch.kubernetes.io/job-name": job, "job-name": job}
    return pod(f"{job}-abcde", owner=("Job", job), labels=labels, **kw)


RESTARTS = {"PET_MAX_RESTARTS": "3"}  # torchrun may restart the workers a moved one leaves
IGNORE_DISRUPTION = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
FAIL_ON_EXIT = {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}


def snapshot(*items: dict[str, Any]) -> ClusterSnapshot:
    snap = ClusterSnapshot.from_objects("c", NOW, iter_kube_list({"kind": "List", "items": list(items)}))
    return ClusterSnapshot.from_dict(snap.to_dict())  # decide on the stored form, as the planner does


def judge(*items: dict[str, Any], name: str | None = None) -> Move:
    snap = snapshot(*items)
    [target] = [p for p in snap.pods if name is None or p.name == name]
    host = next((n for n in snap.nodes if n.name == target.node_name), None)
    return assess_move(target, host, snap.pdb_allowance(target), NOW, CUTOFF, snap.jobs_by_key())


CASES: list[tuple[str, list[dict[str, Any]], bool, str]] = [
    # -- not busy, or already leaving: nothing to move --
    ("finished", [pod(phase="Succeeded")], True, codes.POD_FINISHED),
    ("daemonset", [objects.daemonset_pod("ds", NODE)], True, codes.POD_DAEMONSET),
    ("terminating", [pod(deleting=True, annotations={"karpenter.sh/do-not-disrupt": "true"})], True,
     codes.POD_TERMINATING),
    # its grace period ends (deletionTimestamp) within LEAVING_WITHIN of the plan: leaving; past it, not moved
    ("terminating-for-two-minutes-more", [grace_ends(pod(), NOW + timedelta(minutes=2))], True,
     codes.POD_TERMINATING),
    ("terminating-for-an-hour-more", [grace_ends(pod(annotations=SAFE), NOW + timedelta(hours=1))], False,
     codes.POD_TERMINATING_LATE),
    # -- never; each wins over a reason to move (safe-to-evict=true, expendable priority) --
    ("node-do-not-disrupt", [node({"karpenter.sh/do-not-disrupt": "true"}), pod(annotations=SAFE)], False,
     codes.NODE_DO_NOT_DISRUPT),
    ("pod-do-not-disrupt", [pod(priority=-100, annotations={"karpenter.sh/do-not-disrupt": "true"})], False,
     codes.POD_DO_NOT_DISRUPT),
    ("safe-to-evict-false", [pod(priority=-100, annotations={
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"})], False, codes.POD_NOT_SAFE_TO_EVICT),
    ("openai-do-not-drain-label", [pod(annotations=SAFE, labels={"openai/do-not-drain": "true"})], False,
     codes.POD_DO_NOT_DRAIN),
    ("openai-do-not-drain-annotation", [pod(annotations={**SAFE, "openai/do-not-drain": "True"})], False,
     codes.POD_DO_NOT_DRAIN),
    ("openai-do-not-drain-label-1", [pod(annotations=SAFE, labels={"app": "x", "openai/do-not-drain": "1"})],
     False, codes.POD_DO_NOT_DRAIN),
    ("pdb-allows-none", [pod(annotations=SAFE, labels={"app": "x"}),
                         pdb("x", 0, {"matchLabels": {"app": "x"}})], False, codes.POD_PDB_ALLOWS_NONE),
    ("pdb-expression-allows-none", [pod(priority=-100, labels={"app": "x", "tier": "db"}),
                                    pdb("x", 0, {"matchExpressions": [
                                        {"key": "tier", "operator": "In", "values": ["db"]}]})], False,
     codes.POD_PDB_ALLOWS_NONE),
    ("pdb-empty-selector-selects-all", [pod(annotations=SAFE), pdb("all", 0, {})], False,
     codes.POD_PDB_ALLOWS_NONE),
    # -- a budget that allows one, selects another pod, or has no selector does not block --
    ("pdb-allows-one", [pod(annotations=SAFE, labels={"app": "x"}), pdb("x", 1, {"matchLabels": {"app": "x"}})],
     True, codes.POD_SAFE_TO_EVICT),
    ("pdb-other-pods", [pod(annotations=SAFE, labels={"app": "x"}), pdb("y", 0, {"matchLabels": {"app": "y"}})],
     True, codes.POD_SAFE_TO_EVICT),
    ("pdb-null-selector", [pod(annotations=SAFE), pdb("none", 0, None)], True, codes.POD_SAFE_TO_EVICT),
    # -- the Eviction API's own rules: one budget at most; a pod not Ready under its budget's
    # unhealthyPodEvictionPolicy; a pod not running yet goes whatever its budgets say --
    ("two-pdbs", [pod(annotations=SAFE, labels={"app": "x", "tier": "web"}),
                  pdb("by-app", 1, {"matchLabels": {"app": "x"}}), pdb("by-tier", 5, {"matchLabels": {"tier": "web"}})],
     False, codes.POD_PDB_MULTIPLE),
    ("two-pdbs-unready-always-allow", [unready(pod(annotations=SAFE, labels={"app": "x", "tier": "web"})),
                                       pdb("by-app", 0, {"matchLabels": {"app": "x"}}, policy="AlwaysAllow"),
                                       pdb("by-tier", 0, {"matchLabels": {"tier": "web"}}, policy="AlwaysAllow")],
     False, codes.POD_PDB_MULTIPLE),
    ("unready-always-allow", [unready(pod(annotations=SAFE)),
                              pdb("x", 0, {"matchLabels": {"app": "x"}}, policy="AlwaysAllow", healthy=(0, 1))],
     True, codes.POD_SAFE_TO_EVICT),
    ("ready-always-allow", [pod(annotations=SAFE),
                            pdb("x", 0, {"matchLabels": {"app": "x"}}, policy="AlwaysAllow", healthy=(1, 1))],
     False, codes.POD_PDB_ALLOWS_NONE),
    ("unready-if-healthy-budget-met", [unready(pod(annotations=SAFE)),
                                       pdb("x", 0, {"matchLabels": {"app": "x"}}, policy="IfHealthyBudget",
                                           healthy=(2, 2))], True, codes.POD_SAFE_TO_EVICT),
    ("unready-default-policy-met", [unready(pod(annotations=SAFE)),
                                    pdb("x", 0, {"matchLabels": {"app": "x"}}, healthy=(3, 2))], True,
     codes.POD_SAFE_TO_EVICT),
    ("unready-if-healthy-budget-short", [unready(pod(annotations=SAFE)),
                                         pdb("x", 0, {"matchLabels": {"app": "x"}}, healthy=(1, 2))], False,
     codes.POD_PDB_ALLOWS_NONE),
    ("unready-if-healthy-budget-desires-none", [unready(pod(annotations=SAFE)),
                                                pdb("x", 0, {"matchLabels": {"app": "x"}}, healthy=(0, 0))],
     False, codes.POD_PDB_ALLOWS_NONE),
    ("bound-not-running-yet", [unready(pod(annotations=SAFE, phase="Pending")), pdb("x", 0, {"matchLabels": {"app": "x"}}),
                               pdb("y", 0, {"matchLabels": {"app": "x"}})], True, codes.POD_SAFE_TO_EVICT),
    # -- may move --
    ("expendable", [pod(priority=-11)], True, codes.POD_EXPENDABLE),
    ("at-the-cutoff-is-not-expendable", [pod(priority=-10)], False, codes.POD_NOT_KNOWN_MOVABLE),
    # a pod no controller recreates is gone for good once evicted, and the drain keeps it without
    # force: a plan that named it would see its drain refuse it (only safe-to-evict=true lets it go)
    ("expendable-bare", [pod(priority=-11, owner=None)], False, codes.POD_NO_CONTROLLER),
    ("expendable-bare-safe-to-evict", [pod(priority=-11, owner=None, annotations=SAFE)], True,
     codes.POD_EXPENDABLE),
    ("preemptable-bare", [pod(owner=None, annotations={"volcano.sh/preemptable": "true"})], False,
     codes.POD_NO_CONTROLLER),
    ("safe-to-evict-true", [pod(annotations=SAFE)], True, codes.POD_SAFE_TO_EVICT),
    ("safe-to-evict-true-bare", [pod(owner=None, annotations=SAFE)], True, codes.POD_SAFE_TO_EVICT),
    ("volcano-preemptable-annotation", [pod(annotations={"volcano.sh/preemptable": "true"})], True,
     codes.POD_PREEMPTABLE),
    ("volcano-preemptable-label", [pod(labels={"volcano.sh/preemptable": "true"})], True, codes.POD_PREEMPTABLE),
    ("volcano-preemptable-false", [pod(annotations={"volcano.sh/preemptable": "false"})], False,
     codes.POD_NOT_KNOWN_MOVABLE),
    # Volcano's reading (volcano-sh/volcano pkg/scheduler/api/pod_info.go, GetPodPreemptable): the
    # annotation decides when present, the label only without one; values as Go's strconv.ParseBool
    # reads them, a value it refuses being false
    ("volcano-annotation-false-beats-label-true", [pod(labels={"app": "x", "volcano.sh/preemptable": "true"},
                                                   annotations={"volcano.sh/preemptable": "false"})], False,
     codes.POD_NOT_KNOWN_MOVABLE),
    ("volcano-annotation-unparsable-beats-label", [pod(labels={"app": "x", "volcano.sh/preemptable": "true"},
                                                   annotations={"volcano.sh/preemptable": "yes"})], False,
     codes.POD_NOT_KNOWN_MOVABLE),
    ("volcano-go-true-T", [pod(annotations={"volcano.sh/preemptable": "T"})], True, codes.POD_PREEMPTABLE),
    ("volcano-go-true-1", [pod(labels={"app": "x", "volcano.sh/preemptable": "1"})], True, codes.POD_PREEMPTABLE),
    ("volcano-not-go-tRuE", [pod(annotations={"volcano.sh/preemptable": "tRuE"})], False,
     codes.POD_NOT_KNOWN_MOVABLE),
    ("elastic-pet-nnodes", [pod(owner=("StatefulSet", "trainer"), env={"PET_NNODES": "2:8", **RESTARTS})], True,
     codes.POD_ELASTIC),
    ("elastic-no-restarts", [pod(owner=("StatefulSet", "trainer"), env={"PET_NNODES": "2:8"})], False,
     codes.POD_NOT_KNOWN_MOVABLE),
    ("elastic-torchrun-command", [pod(owner=("StatefulSet", "trainer"), command=[
        "torchrun", "--nnodes=1:4", "--max-restarts=3", "--nproc-per-node=8", "train.py"])], True,
     codes.POD_ELASTIC),
    ("elastic-torchrun-shell", [pod(owner=("StatefulSet", "trainer"), command=["sh", "-c"], args=[
        "python -m torch.distributed.run --nnodes 2:6 --max_restarts 3 train.py"])], True, codes.POD_ELASTIC),
    ("torchrun-fixed-size", [pod(owner=("StatefulSet", "trainer"), command=["torchrun", "--nnodes=4", "t.py"])],
     False, codes.POD_NOT_KNOWN_MOVABLE),
    ("pet-nnodes-min-equals-max", [pod(owner=("StatefulSet", "trainer"), env={"PET_NNODES": "4:4"})], False,
     codes.POD_NOT_KNOWN_MOVABLE),
    # numbers torchrun's int() refuses (past 4,300 digits) are unreadable to it too: no elastic range, no
    # restarts, so the pod stays (before, the same ValueError out of the snapshot stopped every observation)
    ("pet-max-restarts-unreadable", [pod(owner=("StatefulSet", "trainer"), env={
        "PET_NNODES": "2:8", "PET_MAX_RESTARTS": "1" * 5000})], False, codes.POD_NOT_KNOWN_MOVABLE),
    ("pet-nnodes-unreadable", [pod(owner=("StatefulSet", "trainer"), env={
        "PET_NNODES": "2:" + "9" * 5000, **RESTARTS})], False, codes.POD_NOT_KNOWN_MOVABLE),
    ("torchrun-nnodes-unreadable", [pod(owner=("StatefulSet", "trainer"), command=[
        "torchrun", "--nnodes=" + "1" * 5000, "--max-restarts=3", "t.py"])], False, codes.POD_NOT_KNOWN_MOVABLE),
    ("elastic-pytorchjob", [pytorchjob("bert", {"minReplicas": 2, "maxReplicas": 8}), kubeflow_pod("bert")],
     True, codes.POD_ELASTIC),
    # the training operator passes a PaddleJob's elasticPolicy to no pod (PADDLE_NNODES is its total
    # replicas, and Paddle's launcher takes it over its flags): a fixed-size job (spillway.model.jobs)
    ("paddlejob-elastic-policy-not-applied", [paddlejob("ernie", {"minReplicas": 1, "maxReplicas": 3}),
                                              kubeflow_pod("ernie", kind="PaddleJob")], False,
     codes.POD_NOT_KNOWN_MOVABLE),
    ("pytorchjob-elastic-min-defaults-to-max", [pytorchjob("bert", {"maxReplicas": 8}, workers=2),
                                                kubeflow_pod("bert")], False, codes.POD_NOT_KNOWN_MOVABLE),
    ("pytorchjob-elastic-max-defaults-to-min", [pytorchjob("bert", {"minReplicas": 2}, workers=4),
                                                kubeflow_pod("bert")], False, codes.POD_NOT_KNOWN_MOVABLE),
    ("paddlejob-elastic-max-defaults-to-min", [paddlejob("ernie", {"minReplicas": 1}),
                                               kubeflow_pod("ernie", kind="PaddleJob")], False,
     codes.POD_NOT_KNOWN_MOVABLE),
    ("pytorchjob-master-never-shrunk", [pytorchjob("bert", {"minReplicas": 2, "maxReplicas": 8}),
                                        kubeflow_pod("bert", role="Master")], False, codes.POD_NOT_KNOWN_MOVABLE),
    ("pytorchjob-not-elastic", [pytorchjob("bert", None), kubeflow_pod("bert")], False,
     codes.POD_NOT_KNOWN_MOVABLE),
    ("job-ignores-disruption", [batch_job("etl", [FAIL_ON_EXIT, IGNORE_DISRUPTION]), job_pod("etl")], True,
     codes.POD_DISRUPTION_TOLERATED),
    ("job-exit-code-rule-fails-evicted-pod-first", [batch_job("etl", [
        {"action": "FailJob", "onExitCodes": {"containerName": "c", "operator": "NotIn", "values": [0]}},
        IGNORE_DISRUPTION]), job_pod("etl")], False, codes.POD_NOT_KNOWN_MOVABLE),
    ("job-disruption-fails-first", [batch_job("etl", [
        {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]}, IGNORE_DISRUPTION]),
        job_pod("etl")], False, codes.POD_NOT_KNOWN_MOVABLE),
    ("job-ignores-only-disruption-false", [batch_job("etl", [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "False"}]}]),
        job_pod("etl")], False, codes.POD_NOT_KNOWN_MOVABLE),
    ("job-other-job-ignores", [batch_job("other", [IGNORE_DISRUPTION]), job_pod("etl")], False,
     codes.POD_NOT_KNOWN_MOVABLE),
    # -- the default: a pod of no kind known to tolerate a move is never moved to save cost --
    ("plain-job", [batch_job("etl", None), job_pod("etl")], False, codes.POD_NOT_KNOWN_MOVABLE),
    ("replicaset", [pod()], False, codes.POD_NOT_KNOWN_MOVABLE),
    ("statefulset", [pod(owner=("StatefulSet", "db"))], False, codes.POD_NOT_KNOWN_MOVABLE),
    ("bare", [pod(owner=None)], False, codes.POD_NO_CONTROLLER),
    # -- local storage (an emptyDir on disk, a hostPath) keeps a pod no opt-in moves; every opt-in,
    # -- tolerates the drain's cordon (node.kubernetes.io/unschedulable:NoSchedule) and its taint
    # (spillway.io/draining:NoSchedule): no drain evicts it (its replacement could land straight back),
    # so no plan moves it, whatever opts it in; a make-room would free nothing --
    ("tolerates-drain", [pod(tolerations=[EVERYTHING])], False, codes.POD_TOLERATES_DRAIN),
    ("tolerates-drain-safe-to-evict", [pod(annotations=SAFE, tolerations=[EVERYTHING])], False,
     codes.POD_TOLERATES_DRAIN),
    ("tolerates-drain-expendable", [pod(priority=-11, tolerations=[EVERYTHING])], False, codes.POD_TOLERATES_DRAIN),
    ("tolerates-only-the-draining-taint", [pod(annotations=SAFE, tolerations=[
        {"key": "spillway.io/draining", "operator": "Exists", "effect": "NoSchedule"}])], True, codes.POD_SAFE_TO_EVICT),
    ("tolerates-drain-terminating", [pod(deleting=True, tolerations=[EVERYTHING])], True, codes.POD_TERMINATING),
    # saying the workload tolerates losing the pod, overrides it --
    ("local-storage", [scratch(pod())], False, codes.POD_LOCAL_STORAGE),
    ("local-storage-shm-only", [scratch(pod(), "Memory")], False, codes.POD_NOT_KNOWN_MOVABLE),
    ("local-storage-bare", [scratch(pod(owner=None))], False, codes.POD_NO_CONTROLLER),
    ("local-storage-expendable", [scratch(pod(priority=-11))], True, codes.POD_EXPENDABLE),
    ("local-storage-safe-to-evict", [scratch(pod(annotations=SAFE))], True, codes.POD_SAFE_TO_EVICT),
    ("local-storage-preemptable", [scratch(pod(annotations={"volcano.sh/preemptable": "true"}))], True,
     codes.POD_PREEMPTABLE),
    ("local-storage-elastic", [scratch(pod(owner=("StatefulSet", "trainer"), env={"PET_NNODES": "2:8", **RESTARTS}))],
     True, codes.POD_ELASTIC),
    ("local-storage-job-ignores-disruption", [batch_job("etl", [IGNORE_DISRUPTION]), scratch(job_pod("etl"))],
     True, codes.POD_DISRUPTION_TOLERATED),
    # a job's label is no controller: a pod left by `kubectl delete job --cascade=orphan` keeps its labels,
    # a new Job of that name does not adopt it (kubernetes/kubernetes pkg/controller/job/job_controller.go,
    # getPodsForJob claims by selector and controller ownerReference), and nothing recreates it
    ("orphaned-job-pod", [batch_job("etl", [IGNORE_DISRUPTION]), pod("etl-abcde", owner=None, labels={
        "batch.kubernetes.io/job-name": "etl", "job-name": "etl", "batch.kubernetes.io/controller-uid": "old"})],
     False, codes.POD_NO_CONTROLLER),
    ("orphaned-elastic-worker", [pytorchjob("bert", {"minReplicas": 1, "maxReplicas": 4}), pod(owner=None, labels={
        "training.kubeflow.org/job-name": "bert", "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/operator-name": "pytorchjob-controller"})], False,
     codes.POD_NO_CONTROLLER),
]  # fmt: skip


@pytest.mark.parametrize(("items", "movable", "code"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_rule_of_assess_move(items: list[dict[str, Any]], movable: bool, code: str) -> None:
    got = judge(*items)
    assert (got.movable, got.code) == (movable, code), got.reason
    assert got.reason
    assert got.code in codes.MOVE_CODES
    if not movable:
        assert got.cost == math.inf
    elif code in (codes.POD_FINISHED, codes.POD_DAEMONSET, codes.POD_TERMINATING, codes.POD_EXPENDABLE):
        assert got.cost == 0.0
    else:
        assert 0.0 < got.cost < math.inf
    assert (got.elastic is not None) == (code == codes.POD_ELASTIC)


@pytest.mark.parametrize(
    ("value", "protected"),
    [("1", True), ("true", True), ("TRUE", True), ("True", True), ("0", False), ("yes", False), ("t", False)],
)
def test_openai_do_not_drain_reads_as_the_seed_autoscaler_reads_it(value: str, protected: bool) -> None:
    """kubernetes-ec2-autoscaler reads the label through autoscaler/utils.py parse_bool_label,
    ``str(value).lower() in ('1', 'true')`` (autoscaler/kube.py KubePod.is_critical: a critical pod is
    never drained). Spillway read only "true": a "1" it never drained was moved by consolidation and
    evicted by an operator's DrainNode. (Found by review.)"""
    raw = pod("db-0", labels={"app": "db", "openai/do-not-drain": value}, annotations=SAFE)
    [info] = snapshot(raw).pods

    move = judge(raw)

    assert (move.code == codes.POD_DO_NOT_DRAIN) == protected == (not move.movable), move
    assert (assess(info, now=NOW).verdict == "never") == protected


def test_a_rule_before_the_ignore_decides_only_if_an_eviction_may_match_it() -> None:
    # an evicted container exits 143 (SIGTERM) or 137 (SIGKILL after the grace period); the job
    # controller takes the first rule the failed pod matches, exit codes and conditions alike
    def rule(action: str, **on: Any) -> dict[str, Any]:
        return {"action": action, **on}

    def exits(operator: str, *values: int) -> dict[str, Any]:
        return {"onExitCodes": {"operator": operator, "values": list(values)}}

    def conditions(kind: str, status: str = "True") -> dict[str, Any]:
        return {"onPodConditions": [{"type": kind, "status": status}]}

    table: list[tuple[str, list[dict[str, Any]], bool]] = [
        ("the Kubernetes docs' example: FailJob on In [42]", [rule("FailJob", **exits("In", 42))], True),
        ("FailJob on SIGTERM's exit", [rule("FailJob", **exits("In", 143))], False),
        ("Count on SIGKILL's exit", [rule("Count", **exits("In", 1, 137))], False),
        ("FailIndex on another signal's exit", [rule("FailIndex", **exits("In", 255))], False),
        ("FailJob on NotIn both signal exits", [rule("FailJob", **exits("NotIn", 0, 137, 143))], True),
        ("FailJob on NotIn SIGTERM's exit only", [rule("FailJob", **exits("NotIn", 0, 143))], False),
        ("an Ignore on exit codes first", [rule("Ignore", **exits("NotIn", 0))], True),
        ("FailJob on a condition no eviction sets", [rule("FailJob", **conditions("ConfigIssue"))], True),
        (
            "FailJob on DisruptionTarget=False",
            [rule("FailJob", **conditions("DisruptionTarget", "False"))],
            True,
        ),
        ("FailJob on a condition every pod has", [rule("FailJob", **conditions("Ready", "False"))], False),
    ]
    got = {name: judge(batch_job("etl", [*rules, IGNORE_DISRUPTION]), job_pod("etl")).movable
           for name, rules, _ in table}  # fmt: skip
    assert got == {name: tolerated for name, _, tolerated in table}


def test_the_elastic_range_comes_from_the_job_before_the_pods_env() -> None:
    ref = judge(pytorchjob("bert", {"minReplicas": 2, "maxReplicas": 8}),
                kubeflow_pod("bert", env={"PET_NNODES": "1:16", **RESTARTS})).elastic  # fmt: skip
    assert ref == ElasticRef("PyTorchJob/ml/bert", 2, 8)
    # without the job object (CRD not installed, not granted) the pod's own word is used
    assert judge(kubeflow_pod("bert", env={"PET_NNODES": "1:16", **RESTARTS})).elastic == ElasticRef(
        "PyTorchJob/ml/bert", 1, 16
    )
    # torchrun's --nnodes beats PET_NNODES, which is only the flag's default (pytorch/pytorch
    # torch/distributed/argparse_util.py, class env: "PET_FOO=env_bar ./program --foo baz -> baz")
    both = pod(
        owner=("StatefulSet", "t"),
        env={"PET_NNODES": "3:5", **RESTARTS},
        command=["torchrun", "--nnodes=1:9"],
    )
    assert judge(both).elastic == ElasticRef("StatefulSet/ml/t", 1, 9)
    spaced = pod(owner=("StatefulSet", "t"), env={"PET_NNODES": "3:5", **RESTARTS}, command=["sh", "-c"],
                 args=["torchrun --nnodes 2:6 train.py"])  # fmt: skip
    assert judge(spaced).elastic == ElasticRef("StatefulSet/ml/t", 2, 6)
    fixed = pod(owner=("StatefulSet", "t"), env={"PET_NNODES": "3:5"}, command=["torchrun", "--nnodes=4"])
    assert judge(fixed).elastic is None  # the flag's fixed count wins over the env's range


def test_the_launchers_own_node_count_beats_the_jobs_elastic_policy() -> None:
    """A PyTorchJob with an ``elasticPolicy`` whose workers run ``torchrun --nnodes=4`` was read as elastic
    from the policy's minimum: the job's range came first. torchrun takes ``--nnodes`` from its command
    line over ``PET_NNODES``, the operator's only way to pass the range (pytorch/pytorch
    torch/distributed/argparse_util.py, class ``env``), so such a job runs 4 nodes fixed and stalls without
    any of them: it must not be shrunk. A count in a variable is read from the container's env, as the
    kubelet expands ``$(VAR)`` and a shell ``$VAR``; one that cannot be read is no elastic range."""
    job = pytorchjob("bert", {"minReplicas": 2, "maxReplicas": 8})

    def worker(*args: str, env: dict[str, str] | None = None) -> Move:
        return judge(
            job, kubeflow_pod("bert", command=["torchrun", *args, "train.py"], env=RESTARTS | (env or {}))
        )

    assert worker("--nnodes=4").elastic is None
    assert worker("--nnodes", "4:4").elastic is None
    assert worker("--nnodes=3:6").elastic == ElasticRef("PyTorchJob/ml/bert", 3, 6)
    # the operator's PET_NNODES, expanded by the kubelet or a shell, is the job's range
    for ref in ("$(PET_NNODES)", "${PET_NNODES}", "$PET_NNODES"):
        assert worker(f"--nnodes={ref}", env={"PET_NNODES": "2:8"}).elastic == ElasticRef(
            "PyTorchJob/ml/bert", 2, 8
        ), ref
    assert worker("--nnodes=$(NNODES)", env={"NNODES": "4"}).elastic is None
    assert worker("--nnodes=${NNODES}").elastic is None  # unset: not a range anyone can read
    assert worker("--nnodes=$(A):${B}", env={"A": "1", "B": "4"}).elastic == ElasticRef(
        "PyTorchJob/ml/bert", 1, 4
    )
    assert worker("--nnodes=$(A):$(C)", env={"A": "1"}).elastic is None
    # a shell string may quote the value
    shell = kubeflow_pod("bert", command=["sh", "-c"], args=['torchrun --nnodes="4" train.py'])
    assert judge(job, shell).elastic is None
    shell = kubeflow_pod(
        "bert", command=["sh", "-c"], args=["torchrun --nnodes '3:6' train.py"], env=RESTARTS
    )
    assert judge(job, shell).elastic == ElasticRef("PyTorchJob/ml/bert", 3, 6)
    # without --nnodes on the command line the job's range stands
    assert worker("--nproc-per-node=8").elastic == ElasticRef("PyTorchJob/ml/bert", 2, 8)
    # what the launcher says is kept in the snapshot
    snap = snapshot(job, kubeflow_pod("bert", command=["torchrun", "--nnodes=4", "train.py"]))
    assert snap.pods[0].by_launcher and ClusterSnapshot.from_dict(snap.to_dict()) == snap
    # a rendezvous endpoint that cannot be read may be this worker's own: it is never moved
    host = judge(
        job, kubeflow_pod("bert", command=["torchrun", "--nnodes=2:8", "--rdzv-endpoint=$(HOST):29400"])
    )
    assert (host.movable, host.elastic) == (False, None)


def test_the_last_definition_of_an_env_variable_is_the_one_read() -> None:
    """A container that defines PET_NNODES twice runs with the last value (the kubelet builds the env in
    order, a later entry replacing an earlier one: kubernetes/kubernetes pkg/kubelet/kubelet_pods.go,
    ``makeEnvironmentVariables``); the first was read. One set from ``valueFrom`` is not known here."""
    raw = pod(owner=("StatefulSet", "t"), command=["torchrun", "--max-restarts=3", "train.py"])
    container = raw["spec"]["containers"][0]
    container["env"] = [{"name": "PET_NNODES", "value": "1:16"}, {"name": "PET_NNODES", "value": "2:4"}]
    assert judge(raw).elastic == ElasticRef("StatefulSet/ml/t", 2, 4)
    container["env"].append({"name": "PET_NNODES", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
    assert judge(raw).elastic is None
    # a value naming other variables is read as the kubelet expands it
    container["env"] = [{"name": "LOW", "value": "2"}, {"name": "PET_NNODES", "value": "$(LOW):4"}]
    assert judge(raw).elastic == ElasticRef("StatefulSet/ml/t", 2, 4)
    # a rendezvous endpoint set from valueFrom may name this pod: it is not moved
    container["env"].append({"name": "PET_RDZV_ENDPOINT", "valueFrom": {"fieldRef": {"fieldPath": "x"}}})
    assert (judge(raw).movable, judge(raw).elastic) == (False, None)


PADDLE_LAUNCH = ["python", "-m", "paddle.distributed.launch"]


def test_paddles_launcher_is_read_as_paddle_reads_it() -> None:
    """A pod running Paddle's launcher with ``--nnodes=2:4`` was read as torchrun reads it, elastic from 2.
    Paddle's launcher sets its arguments from its PADDLE_ variables over its flags (PaddlePaddle/Paddle
    python/paddle/distributed/launch/context/__init__.py, set_env_in_args), and runs elastic only with an
    etcd:// master (launch/controllers/collective.py, CollectiveElasticController.enable): any other
    master waits for MAX peers (launch/job/job.py, set_replicas). The training operator gives a PaddleJob's
    pods PADDLE_NNODES (its total replicas) and PADDLE_MASTER (worker 0's address), so they are fixed."""
    operator_env = {"PADDLE_NNODES": "3", "PADDLE_MASTER": "ernie-worker-0:36543", "PADDLE_JOB_ID": "ernie"}
    paddlejob_pod = kubeflow_pod("ernie", kind="PaddleJob", env=operator_env,
                                 command=[*PADDLE_LAUNCH, "--nnodes=2:4", "--master=etcd://etcd:2379", "train.py"])  # fmt: skip
    assert judge(paddlejob_pod).code == codes.POD_NOT_KNOWN_MOVABLE
    # a range with a plain (HTTP) master is no elastic job either
    http = pod(owner=("StatefulSet", "p"), command=[*PADDLE_LAUNCH, "--master=10.0.0.1:8090", "--nnodes=2:4"])
    assert judge(http).elastic is None
    # with an etcd master the range is elastic, from the flags or from the variables
    flags = pod(owner=("StatefulSet", "p"), command=["sh", "-c"],
                args=["python -m paddle.distributed.launch --master etcd://etcd:2379 --nnodes 2:4 train.py"])  # fmt: skip
    assert judge(flags).elastic == ElasticRef("StatefulSet/ml/p", 2, 4)
    env = pod(owner=("StatefulSet", "p"), env={"PADDLE_NNODES": "1:3", "PADDLE_MASTER": "etcd://etcd:2379"},
              command=[*PADDLE_LAUNCH, "--nnodes=4", "train.py"])  # fmt: skip
    assert judge(env).elastic == ElasticRef("StatefulSet/ml/p", 1, 3)
    # torchrun's PET_NNODES means nothing to Paddle's launcher
    pet = pod(owner=("StatefulSet", "p"), env={"PET_NNODES": "1:3"}, command=[*PADDLE_LAUNCH, "train.py"])
    assert judge(pet).elastic is None


def test_a_batch_jobs_elastic_pod_moves_only_when_its_job_tolerates_the_eviction() -> None:
    """A pod of a batch/v1 Job that runs ``torchrun --nnodes=MIN:MAX`` was moved as an elastic worker,
    though its Job counts a deleted pod as failed (kubernetes/kubernetes pkg/controller/job/
    job_controller.go, isPodFailed) and fails past backoffLimit: here 0, so one move fails the Job and
    its other workers with it. Only an Ignore rule on DisruptionTarget keeps an eviction from
    counting. A TrainJob's pods are such pods (its JobSet's child Jobs). (Found by review.)"""
    indexed = batch_job("train", None)
    indexed["spec"] |= {"completionMode": "Indexed", "completions": 3, "parallelism": 3, "backoffLimit": 0}
    workers = [job_pod("train", command=["torchrun", "--nnodes=1:3", "--nproc-per-node=8", "train.py"])
               for _ in range(3)]  # fmt: skip
    for i, worker in enumerate(workers):
        worker["metadata"]["name"] = f"train-{i}-abcde"
        worker["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] = str(i)
    plain = judge(indexed, *workers, name="train-1-abcde")
    assert (plain.movable, plain.code, plain.elastic) == (False, codes.POD_NOT_KNOWN_MOVABLE, None), plain

    # a TrainJob's pod as Kubeflow Trainer writes it (PET_NNODES the fixed numNodes), whose command runs
    # torchrun with a range: elastic only once its child Job ignores DisruptionTarget
    def trainjob_pod() -> dict[str, Any]:
        labels = {"jobset.sigs.k8s.io/jobset-name": "llm", "batch.kubernetes.io/job-name": "llm-node-0"}
        return pod("llm-node-0-0-x7k2p", owner=("Job", "llm-node-0"), owner_api="batch/v1", labels=labels,
                   env={"PET_NNODES": "2", **RESTARTS}, command=["torchrun", "--nnodes=2:4", "train.py"])  # fmt: skip

    assert judge(batch_job("llm-node-0", None), trainjob_pod()).code == codes.POD_NOT_KNOWN_MOVABLE
    tolerant = judge(batch_job("llm-node-0", [IGNORE_DISRUPTION]), trainjob_pod())
    assert (tolerant.code, tolerant.elastic) == (codes.POD_ELASTIC, ElasticRef("JobSet/ml/llm", 2, 4))
    # without the torchrun range, Trainer's fixed PET_NNODES makes no elastic worker
    fixed = trainjob_pod()
    fixed["spec"]["containers"][0]["command"] = ["torchrun", "train.py"]
    assert judge(batch_job("llm-node-0", [IGNORE_DISRUPTION]), fixed).code == codes.POD_DISRUPTION_TOLERATED


def _worker(job: str, index: int, **kw: Any) -> dict[str, Any]:
    raw = kubeflow_pod(job, **kw)
    raw["metadata"]["name"] = f"{job}-worker-{index}"
    return raw


def test_elastic_room_counts_running_workers_above_the_minimum() -> None:
    snap = snapshot(
        pytorchjob("bert", {"minReplicas": 2, "maxReplicas": 8}),
        *[_worker("bert", i) for i in range(5)],
        _worker("bert", 5, deleting=True),  # leaving: does not count
        _worker("bert", 6, node_name=None),  # pending: does not count
        kubeflow_pod("bert", role="Master"),  # not a worker
        pytorchjob("gpt", {"minReplicas": 3, "maxReplicas": 4}),
        *[_worker("gpt", i) for i in range(2)],  # below its minimum: no room, never negative
        pod("solo", owner=("StatefulSet", "solo"), env={"PET_NNODES": "1:2"}),
        pod("web"),  # not elastic: absent
    )
    room = elastic_room(snap.pods, snap.jobs_by_key())
    assert room == {"PyTorchJob/ml/bert": 3, "PyTorchJob/ml/gpt": 0, "StatefulSet/ml/solo": 0}
    # without the job objects, only the pods' own word counts (here: none for bert and gpt)
    assert elastic_room(snap.pods) == {"StatefulSet/ml/solo": 0}


def _operator_worker(job: str, index: int, **kw: Any) -> dict[str, Any]:
    """A worker of an elastic PyTorchJob with no ``rdzvHost``, as the training operator creates it: name
    ``<job>-worker-<i>``, its labels, and the env its ElasticEnvVarGenerator adds (kubeflow/training-operator
    pkg/controller.v1/pytorch/elastic.go: PET_RDZV_ENDPOINT is ``<job>-worker-0:<port>`` on every pod)."""
    labels = {
        "training.kubeflow.org/job-name": job,
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": str(index),
    }
    env = {"PET_RDZV_ENDPOINT": f"{job}-worker-0:23456", "PET_RDZV_BACKEND": "c10d", "PET_NNODES": "1:4"}
    return pod(f"{job}-worker-{index}", owner=("PyTorchJob", job), owner_api="kubeflow.org/v1", labels=labels,
               env=env | kw.pop("env", {}), **kw)  # fmt: skip


def test_the_worker_that_hosts_the_rendezvous_is_never_moved_nor_given_up() -> None:
    """Worker 0 of an elastic PyTorchJob without a Master hosts the job's c10d rendezvous: its agent runs
    the TCPStore the others talk to (pytorch/pytorch torch/distributed/elastic/rendezvous/
    c10d_rendezvous_backend.py, _create_tcp_store: the agent whose host name matches the endpoint's
    host serves it). Evicting it stops the whole job; it was moved, or given up by a shrink, as any
    elastic worker: the fixed roles were read from the replica type only. (Found by review.)"""
    items = (pytorchjob("train", {"minReplicas": 1, "maxReplicas": 4}, workers=3),
             *(_operator_worker("train", i, env=RESTARTS) for i in range(3)))  # fmt: skip

    host, other = judge(*items, name="train-worker-0"), judge(*items, name="train-worker-1")

    assert other.code == codes.POD_ELASTIC  # an ordinary worker stays movable within the range
    assert (host.movable, host.code, host.elastic) == (False, codes.POD_NOT_KNOWN_MOVABLE, None), host
    # it still runs as one of the job's workers: 3 running, minimum 1, room for 2
    snap = snapshot(*items)
    assert elastic_room(snap.pods, snap.jobs_by_key()) == {"PyTorchJob/ml/train": 2}
    # torchrun's flag names the host as well, and beats the env (a DNS name's first label is the pod)
    flagged = _operator_worker(
        "train", 1, command=["torchrun", "--rdzv_endpoint=train-worker-1.ml.svc:29400"], env=RESTARTS
    )
    elsewhere = _operator_worker("train", 0, args=["--rdzv-endpoint", "etcd-0:2379"], env=RESTARTS)
    assert (judge(flagged).elastic, judge(elsewhere).code) == (None, codes.POD_ELASTIC)
    # a JobSet pod's host name, not its generated name, is what an endpoint names
    jobset = pod("llm-node-0-0-x7k2p", owner=("StatefulSet", "llm"), env={"PET_NNODES": "1:4",
                 "PET_RDZV_ENDPOINT": "llm-node-0-0.llm:29400"})  # fmt: skip
    jobset["spec"]["hostname"] = "llm-node-0-0"
    assert judge(jobset).elastic is None


def test_the_cost_grows_with_priority_deletion_cost_and_age() -> None:
    def cost(priority: int = 0, deletion: int = 0, age_h: float = 1.0) -> float:
        info = PodInfo("ml", "p", {}, node_name=NODE, phase="Running", priority=priority, owner_kind="ReplicaSet",
                       owner_name="w", deletion_cost=deletion, started_at=NOW - timedelta(hours=age_h))  # fmt: skip
        return move_cost(info, NOW)

    assert cost(priority=0) < cost(priority=100) < cost(priority=1_000_000)
    assert cost(priority=-100) < cost(priority=0)
    assert cost(deletion=-5) < cost(deletion=0) < cost(deletion=7)
    assert cost(age_h=0.1) < cost(age_h=1) < cost(age_h=20) < cost(age_h=24) == cost(age_h=240)
    assert cost(priority=-(10**9), deletion=-(10**9), age_h=0) >= 0
    # expendable pods are free to move, whatever their age
    expendable = judge(pod(priority=-11, annotations={"controller.kubernetes.io/pod-deletion-cost": "100"}))
    assert expendable.cost == 0.0


def test_older_pods_cost_more_to_move_through_the_snapshot() -> None:
    young, old = pod("young", annotations=SAFE), pod("old", annotations=SAFE)
    young["status"]["startTime"] = "2026-11-02T11:55:00Z"
    old["status"]["startTime"] = "2026-11-02T02:00:00Z"
    assert judge(young, old, name="young").cost < judge(young, old, name="old").cost


def test_new_fields_are_written_only_when_set_and_old_snapshots_read() -> None:
    plain = ClusterSnapshot.from_objects("c", NOW, iter_kube_list({"kind": "List", "items": [
        pod("pending", node_name=None), objects.daemonset_pod("ds", NODE), node()]}))  # fmt: skip
    for info in plain.pods:
        assert {"odn", "vp", "st", "job", "jr", "bj", "el", "pdb"}.isdisjoint(info.to_dict())
    assert "dnd" not in plain.nodes[0].to_dict()
    assert "jobs" not in plain.to_dict()
    # a controller owner that is the job itself is not stored twice
    kf = snapshot(pytorchjob("bert", {"minReplicas": 1, "maxReplicas": 2}), kubeflow_pod("bert")).pods[0]
    assert (kf.job, kf.job_role) == (None, "worker")
    etl = snapshot(job_pod("etl")).pods[0]
    assert (etl.job, etl.batch_job) == (None, None)
    # a snapshot stored before these fields decides "not known movable" for a ReplicaSet pod
    old = {
        "ns": "ml",
        "n": "web-0",
        "r": {"cpu": 1000},
        "node": NODE,
        "ph": "Running",
        "ok": "ReplicaSet",
        "on": "w",
    }
    info = PodInfo.from_dict(old)
    assert info.to_dict() == old
    assert assess_move(info, None, None, NOW, CUTOFF).code == codes.POD_NOT_KNOWN_MOVABLE


def test_every_new_field_round_trips() -> None:
    snap = snapshot(
        node({"karpenter.sh/do-not-disrupt": "true"}),
        pod("a", labels={"openai/do-not-drain": "true", "volcano.sh/preemptable": "true", "app": "a",
                         "training.kubeflow.org/job-name": "bert", "training.kubeflow.org/replica-type": "Worker",
                         "batch.kubernetes.io/job-name": "etl"},
            env={"PET_NNODES": "1:3"}),
        pdb("a", 1, {"matchLabels": {"app": "a"}}),
        batch_job("etl", [IGNORE_DISRUPTION]),
        pytorchjob("bert", {"minReplicas": 1, "maxReplicas": 4}),
    )  # fmt: skip
    [info] = snap.pods
    assert (info.do_not_drain, info.preemptable, info.started_at) == (True, True, NOW - timedelta(hours=1))
    assert (info.job, info.job_role, info.batch_job) == ("KubeflowJob/ml/bert", "worker", "etl")
    assert (info.elastic_min, info.elastic_max, info.pdbs) == (1, 3, ("a",))
    assert snap.nodes[0].do_not_disrupt
    assert snap.jobs == (
        JobInfo("Job/ml/etl", tolerates_disruption=True),
        JobInfo("PyTorchJob/ml/bert", 1, 4),
    )
    assert snap.pdb_allowance(info) == 1
    assert ClusterSnapshot.from_dict(snap.to_dict()) == snap


def test_a_pod_under_two_budgets_never_moves_and_the_reason_names_both() -> None:
    # the Eviction API refuses such a pod whatever the budgets allow (500 "This pod has more than one
    # PodDisruptionBudget, which the eviction subresource does not support."): a drain could only
    # time out on it
    labels = {"app": "x", "tier": "web"}
    items = [pod(annotations=SAFE, labels=labels), pdb("by-tier", 3, {"matchLabels": {"tier": "web"}}),
             pdb("by-app", 2, {"matchLabels": {"app": "x"}})]  # fmt: skip
    move = judge(*items)
    assert (move.movable, move.code, move.cost) == (False, codes.POD_PDB_MULTIPLE, math.inf)
    assert "by-app" in move.reason and "by-tier" in move.reason, move.reason
    snap = snapshot(*items)
    assert snap.pdb_allowance(snap.pods[0]) == 0  # no eviction of it passes


def test_the_budget_fields_are_written_only_when_set_and_old_snapshots_read() -> None:
    snap = snapshot(unready(pod(annotations=SAFE)), pod("ok", annotations=SAFE),
                    pdb("x", 0, {"matchLabels": {"app": "x"}}, policy="AlwaysAllow", healthy=(1, 2)),
                    pdb("y", 0, {"matchLabels": {"app": "y"}}))  # fmt: skip
    sick, well = (next(p for p in snap.pods if p.name == n) for n in ("p-0", "ok"))
    assert (sick.ready, well.ready) == (False, True)
    assert "nr" in sick.to_dict() and "nr" not in well.to_dict()
    budgets = {b.name: b for b in snap.pdbs}
    assert (budgets["x"].unhealthy_policy, budgets["x"].current_healthy, budgets["x"].desired_healthy) == (
        "AlwaysAllow", 1, 2)  # fmt: skip
    assert {"up", "ch", "dh"}.isdisjoint(budgets["y"].to_dict())
    # stored before these fields: every pod reads Ready and every budget holds (the old verdicts)
    old = ClusterSnapshot.from_dict({**snap.to_dict(),
        "pods": [{k: v for k, v in p.to_dict().items() if k != "nr"} for p in snap.pods],
        "pdbs": [{"ns": NS, "n": "x", "ml": [["app", "x"]], "da": 0}, {"ns": NS, "n": "y", "ml": [["app", "y"]], "da": 0}],
    })  # fmt: skip
    assert all(p.ready for p in old.pods)
    [sick_then] = [p for p in old.pods if p.name == "p-0"]
    assert (
        assess_move(sick_then, None, old.pdb_allowance(sick_then), NOW, CUTOFF).code
        == codes.POD_PDB_ALLOWS_NONE
    )


def test_a_budget_change_that_lets_an_unready_pod_go_changes_the_fingerprint() -> None:
    from spillway.model.snapshot import fingerprint

    sick = unready(pod(annotations=SAFE))
    short = fingerprint(snapshot(sick, pdb("x", 0, {"matchLabels": {"app": "x"}}, healthy=(1, 2))), [])
    met = fingerprint(snapshot(sick, pdb("x", 0, {"matchLabels": {"app": "x"}}, healthy=(2, 2))), [])
    always = fingerprint(snapshot(sick, pdb("x", 0, {"matchLabels": {"app": "x"}}, policy="AlwaysAllow",
                                            healthy=(1, 2))), [])  # fmt: skip
    assert len({short, met, always}) == 3


def test_the_operator_drain_predicate_is_unchanged_by_the_move_rules() -> None:
    # assess (scale-down's busy test, DrainNode's classification) still evicts a ReplicaSet pod, as
    # kubectl drain does; consolidation never moves it to save cost
    info = snapshot(pod()).pods[0]
    assert assess(info).verdict == "movable"
    assert assess_move(info, None, None, NOW, CUTOFF).movable is False


def test_a_job_that_changes_what_may_move_changes_the_fingerprint() -> None:
    from spillway.model.snapshot import fingerprint

    workers = [_worker("bert", i) for i in range(3)]
    plain = fingerprint(snapshot(*workers), [])
    elastic = fingerprint(snapshot(pytorchjob("bert", {"minReplicas": 1, "maxReplicas": 4}), *workers), [])
    wider = fingerprint(snapshot(pytorchjob("bert", {"minReplicas": 1, "maxReplicas": 8}), *workers), [])
    assert len({plain, elastic, wider}) == 3
    # a job that says nothing about moving its pods is not kept, and changes nothing
    assert fingerprint(snapshot(pytorchjob("bert", None), *workers), []) == plain


@pytest.mark.parametrize(("items", "movable", "code"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_drain_evicts_every_pod_a_plan_moves(
    items: list[dict[str, Any]], movable: bool, code: str
) -> None:
    """The planner never plans a drain the drain then refuses: a pod assess_move finds movable, named
    in a plan's drain (``planned``), is one the drain evicts, or leaves alone as nothing to move; local
    storage, which keeps a pod from a drain without force, does not keep the pods the plan's opt-ins
    move."""
    [raw] = [i for i in items if i["kind"] == "Pod"]
    key = f"{NS}/{raw['metadata']['name']}"
    verdict = classify(Pod.model_validate(raw), force=False, now=NOW, planned={key})
    action = verdict.action
    if movable:
        assert action in ("evict", "ignore", "wait"), (code, action)
    # a pod the drain leaves running on its node (it tolerates the drain's cordon and taint) is one no
    # plan counts on moving: a make-room would free nothing, a consolidation would move it only by
    # terminating it with its node
    if verdict.reason.startswith("tolerates"):
        assert not movable, code
    if code in (codes.POD_LOCAL_STORAGE, codes.POD_NOT_KNOWN_MOVABLE):  # an operator's drain still judges it
        unplanned = classify(Pod.model_validate(raw), force=False, now=NOW).action
        assert unplanned == ("keep" if code == codes.POD_LOCAL_STORAGE else "evict")


def test_an_elastic_worker_moves_only_when_torchrun_may_restart_the_workers_it_leaves() -> None:
    """An elastic PyTorchJob's worker above the minimum was moved whatever torchrun's ``--max-restarts``.
    A worker leaving makes the others' workers fail, and each agent restarts its workers only while it
    has restarts left; at 0, torchrun's default, the agent stops, closes the rendezvous and the job ends
    (pytorch/pytorch torch/distributed/elastic/__init__.py: "If TE agent launched with max_restarts=0, it
    relies on the underlying scheduler to handle job restart"; agent/server/api.py ``_invoke_run``;
    run.py ``--max-restarts``, default 0, env ``PET_MAX_RESTARTS``). The training operator sets
    ``PET_MAX_RESTARTS`` only when ``elasticPolicy.maxRestarts`` is set (kubeflow/training-operator
    pkg/controller.v1/pytorch/elastic.go, ``Generate``)."""
    items = (pytorchjob("train", {"minReplicas": 1, "maxReplicas": 4}, workers=3),)

    def worker(env: dict[str, str] | None = None, **kw: Any) -> Move:
        return judge(*items, _operator_worker("train", 1, env=env or {}, **kw))

    unset = worker()  # elasticPolicy without maxRestarts: torchrun runs with 0
    assert (unset.movable, unset.code, unset.elastic) == (False, codes.POD_NOT_KNOWN_MOVABLE, None), unset
    assert "max-restarts" in unset.reason
    assert worker({"PET_MAX_RESTARTS": "0"}).movable is False
    assert worker({"PET_MAX_RESTARTS": "3"}).code == codes.POD_ELASTIC
    # torchrun's flag beats the env, either spelling; one that cannot be read allows none
    assert (
        worker({"PET_MAX_RESTARTS": "3"}, command=["torchrun", "--max-restarts=0", "t.py"]).movable is False
    )
    assert worker({"PET_MAX_RESTARTS": "0"}, args=["--max_restarts", "2"]).code == codes.POD_ELASTIC
    assert worker(command=["torchrun", "--max-restarts=$(R)", "t.py"]).movable is False
    assert worker({"R": "1"}, command=["torchrun", "--max-restarts=$(R)", "t.py"]).code == codes.POD_ELASTIC
    # what the launcher allows is kept in the snapshot
    snap = snapshot(*items, _operator_worker("train", 1))
    assert snap.pods[0].no_restarts and ClusterSnapshot.from_dict(snap.to_dict()) == snap


def test_a_member_of_an_elastic_job_a_shrink_may_not_give_up_is_not_moved_as_disruption_tolerant() -> None:
    """A pod of a batch/v1 Job that ignores DisruptionTarget, and that runs as a worker of an elastic
    torchrun job, was moved as ``disruption-tolerated`` when a shrink may not give it up: it hosts the
    c10d rendezvous (the whole job stops while it is away) or its torchrun allows no restart (the job
    ends). The Job's rule keeps the eviction from counting; it does not keep the job running."""
    labels = {"jobset.sigs.k8s.io/jobset-name": "llm", "batch.kubernetes.io/job-name": "llm-node-0"}

    def member(**env: str) -> Move:
        raw = pod("llm-node-0-0-x7k2p", owner=("Job", "llm-node-0"), owner_api="batch/v1", labels=labels,
                  env={"PET_RDZV_ENDPOINT": "llm-node-0-1.llm:29400", "PET_MAX_RESTARTS": "3"} | env,
                  command=["torchrun", "--nnodes=2:4", "train.py"])  # fmt: skip
        raw["spec"]["hostname"] = "llm-node-0-0"
        return judge(batch_job("llm-node-0", [IGNORE_DISRUPTION]), raw)

    assert member().code == codes.POD_ELASTIC
    host = member(PET_RDZV_ENDPOINT="llm-node-0-0.llm:29400")
    assert (host.movable, host.elastic) == (False, None), host
    alone = member(PET_MAX_RESTARTS="0")
    assert (alone.movable, alone.elastic) == (False, None), alone


def volcano_job(name: str, policies: list[dict[str, Any]], tasks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "namespace": NS},
            "spec": {"minAvailable": 2, "schedulerName": "volcano", "policies": policies, "tasks": tasks}}  # fmt: skip


def volcano_pod(job: str, task: str, **kw: Any) -> dict[str, Any]:
    """A pod of Volcano Job ``job`` as its controller makes it (job_controller_util.go, createJobPod)."""
    annotations = {"volcano.sh/task-spec": task, "volcano.sh/job-name": job, "volcano.sh/job-version": "0",
                   "scheduling.k8s.io/group-name": f"{job}-0b1c", **kw.pop("annotations", {})}  # fmt: skip
    labels = {"volcano.sh/job-name": job, "volcano.sh/job-namespace": NS, "volcano.sh/task-spec": task}
    return pod(f"{job}-{task}-0", owner=("Job", job), owner_api="batch.volcano.sh/v1alpha1", labels=labels,
               annotations=annotations, **kw)  # fmt: skip


def test_a_pod_whose_volcano_job_restarts_on_eviction_is_never_moved() -> None:
    """A preemptable pod of a Volcano Job whose policy on ``PodEvicted`` is RestartJob was moved: its
    job controller calls any deletion of the Job's pod PodEvicted (volcano-sh/volcano
    pkg/controllers/job/job_controller_handler.go, deletePod) and applies the pod's task's policies,
    then the Job's, the first naming PodEvicted or ``*`` deciding, else SyncJob (job_controller_util.go,
    applyPolicies): RestartJob restarts every pod of the Job, RestartTask every pod of the task, AbortJob,
    TerminateJob and CompleteJob end the rest (volcano-sh/apis pkg/apis/bus/v1alpha1/actions.go). One
    move to save a node took the whole gang's work with it."""
    preemptable = {"annotations": {"volcano.sh/preemptable": "true"}}
    tasks = [{"name": "worker", "replicas": 2}, {"name": "ps", "replicas": 1}]
    restart_job = [{"event": "PodEvicted", "action": "RestartJob"}]

    def move(policies: list[dict[str, Any]], task: str = "worker", job_tasks: Any = None, **kw: Any) -> Move:
        job = volcano_job("mnist", policies, tasks if job_tasks is None else job_tasks)
        return judge(job, volcano_pod("mnist", task, **(kw or preemptable)))

    refused = move(restart_job)
    assert (refused.movable, refused.code) == (False, codes.POD_NOT_KNOWN_MOVABLE), refused
    assert "RestartJob" in refused.reason
    assert move([{"events": ["PodFailed", "PodEvicted"], "action": "RestartTask"}]).movable is False
    assert move([{"event": "*", "action": "AbortJob"}]).movable is False
    # whatever opt-in the pod has: an expendable or safe-to-evict pod takes the others with it too
    assert move(restart_job, priority=-100).movable is False
    assert (
        move(restart_job, annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}).movable
        is False
    )
    # a task's own policy comes first
    worker_pod_only = [{"name": "worker", "policies": [{"event": "PodEvicted", "action": "RestartPod"}]}]
    assert move(restart_job, job_tasks=worker_pod_only).code == codes.POD_PREEMPTABLE
    ps_restarts = [{"name": "ps", "policies": [{"event": "PodEvicted", "action": "RestartJob"}]}, tasks[0]]
    assert move([], job_tasks=ps_restarts).code == codes.POD_PREEMPTABLE
    assert move([], task="ps", job_tasks=ps_restarts).movable is False
    # a policy on another event, or none: the controller makes the pod again (SyncJob)
    assert move([{"event": "PodFailed", "action": "RestartJob"}]).code == codes.POD_PREEMPTABLE
    assert move([]).code == codes.POD_PREEMPTABLE
    # without the Job object (CRD not installed, not granted) the pod's own word stands
    assert judge(volcano_pod("mnist", "worker", **preemptable)).code == codes.POD_PREEMPTABLE
    # an elastic worker of such a Job is not given up either
    elastic = volcano_pod("mnist", "worker", command=["torchrun", "--nnodes=1:4", "--max-restarts=3", "t.py"])
    assert judge(volcano_job("mnist", [], tasks), elastic).code == codes.POD_ELASTIC
    assert judge(volcano_job("mnist", restart_job, tasks), elastic).movable is False
    # what the Job says is kept in the snapshot
    snap = snapshot(volcano_job("mnist", restart_job, tasks), volcano_pod("mnist", "worker"))
    assert snap.jobs_by_key()["VolcanoJob/ml/mnist"].eviction_action("worker") == "RestartJob"
    assert ClusterSnapshot.from_dict(snap.to_dict()) == snap


def test_a_node_of_a_multi_node_torchrun_job_that_restarts_nothing_is_not_moved_as_disruption_tolerated() -> (
    None
):
    """A pod of a batch/v1 Job that ignores DisruptionTarget was moved as ``disruption-tolerated`` when it
    is one node of a torchrun job on several nodes whose torchrun restarts no worker group: the Job does
    not count the evicted pod, but the workers on the other nodes fail (torch/distributed/run.py,
    "Failure Modes": all workers stop and restart up to max_restarts; 0 by default), their agents exit,
    and those pods' failures count, failing the Job (and a JobSet with it: a Kubeflow Trainer TrainJob,
    whose torch plugin gives every node ``PET_NNODES`` = numNodes and no ``PET_MAX_RESTARTS``)."""
    labels = {"jobset.sigs.k8s.io/jobset-name": "llm", "batch.kubernetes.io/job-name": "llm-node-0"}

    def node_pod(**env: str) -> Move:
        raw = pod("llm-node-0-1-x7k2p", owner=("Job", "llm-node-0"), owner_api="batch/v1", labels=labels,
                  env={"PET_NNODES": "2", "PET_MASTER_ADDR": "llm-node-0-0.llm"} | env,
                  command=["torchrun", "train.py"])  # fmt: skip
        return judge(batch_job("llm-node-0", [IGNORE_DISRUPTION]), raw)

    refused = node_pod()
    assert (refused.movable, refused.code) == (False, codes.POD_NOT_KNOWN_MOVABLE), refused
    assert "max-restarts" in refused.reason
    assert node_pod(PET_MAX_RESTARTS="3").code == codes.POD_DISRUPTION_TOLERATED
    assert node_pod(PET_NNODES="1").code == codes.POD_DISRUPTION_TOLERATED  # alone: no peer to fail
    assert node_pod(PET_NNODES="1:1").code == codes.POD_DISRUPTION_TOLERATED
    assert node_pod(PET_NNODES="$(N)").movable is False  # a count that cannot be read may be several
    # nor does a low priority (nor an opt-in: test_planner_minimum_opt_ins): the pod's, not its peers'
    expendable = judge(batch_job("llm-node-0", [IGNORE_DISRUPTION]),
                       job_pod("llm-node-0", env={"PET_NNODES": "2"}, priority=-100))  # fmt: skip
    assert (expendable.movable, expendable.code) == (False, codes.POD_NOT_KNOWN_MOVABLE), expendable


def test_a_pod_of_a_pytorchjob_replica_that_never_restarts_is_never_moved() -> None:
    """An elastic PyTorchJob's worker above the minimum was moved whatever its replica's restartPolicy.
    The training operator counts a Running pod with a deletionTimestamp as a failed replica
    (kubeflow/training-operator pkg/core/status.go, ``UpdateJobReplicaStatuses``), and its
    ``UpdateJobStatus`` marks the PyTorchJob Failed when a replica type with ``restartPolicy: Never`` has a
    failed pod and fewer running than its replicas (pkg/controller.v1/pytorch/pytorchjob_controller.go):
    the first eviction ends the job. OnFailure (the default, ``PytorchJobDefaultRestartPolicy``), Always
    and ExitCode mark it Restarting and make the pod again."""

    def job(policy: str | None) -> dict[str, Any]:
        raw = pytorchjob("train", {"minReplicas": 1, "maxReplicas": 4}, workers=3)
        if policy is not None:
            raw["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = policy
        return raw

    worker = _operator_worker("train", 1, env=RESTARTS)
    never = judge(job("Never"), worker)
    assert (never.movable, never.code, never.elastic) == (False, codes.POD_ENDS_JOB, None), never
    assert "restartPolicy Never" in never.reason
    # whatever else would move it: safe-to-evict=true, an expendable priority
    assert judge(job("Never"), _operator_worker("train", 1, env=RESTARTS, annotations=SAFE)).code == (
        codes.POD_ENDS_JOB
    )
    assert judge(job("Never"), _operator_worker("train", 1, env=RESTARTS, priority=-100)).code == (
        codes.POD_ENDS_JOB
    )
    for policy in (None, "OnFailure", "Always", "ExitCode"):
        assert judge(job(policy), worker).code == codes.POD_ELASTIC, policy
    # a fixed-size job's pod the user lets go (safe-to-evict=true) ends it just the same
    fixed = pytorchjob("train", None, workers=3)
    fixed["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = "Never"
    assert judge(fixed, _operator_worker("train", 1, annotations=SAFE)).code == codes.POD_ENDS_JOB
    # the Master's policy is the Master's: a worker of a job whose Master never restarts may move
    master = job(None)
    master["spec"]["pytorchReplicaSpecs"]["Master"] = {"replicas": 1, "restartPolicy": "Never"}
    assert judge(master, worker).code == codes.POD_ELASTIC


def counted_job(
    name: str, *, limit: int | None, failed: int = 0, rules: list[dict[str, Any]] | None = None, **status: Any
) -> dict[str, Any]:
    """A running batch/v1 Job as the API serves it: ``spec.backoffLimit`` (defaulted to 6 by the API
    server when unset), ``status.failed`` and the other ``status`` fields given."""
    raw = batch_job(name, rules)
    if limit is not None:
        raw["spec"]["backoffLimit"] = limit
    raw["status"] = {"startTime": "2026-11-02T11:00:00Z", "active": 2, **status}
    if failed:
        raw["status"]["failed"] = failed
    return raw


def test_a_pod_whose_eviction_fails_its_batch_job_is_never_moved() -> None:
    """A pod of a batch/v1 Job that counts an evicted pod as failed (no podFailurePolicy rule ignores
    DisruptionTarget) moved whenever it was ``safe-to-evict=true``, Volcano preemptable or expendable.
    The job controller counts a deleted pod as failed (pkg/controller/job/job_controller.go,
    ``isPodFailed``; with a podFailurePolicy, ``matchPodFailurePolicy`` decides) and fails the Job once
    ``failed > spec.backoffLimit`` (``exceedsBackoffLimit``, ``status.failed`` plus the failed pods not
    yet counted), or at once on a FailJob rule (``getFailJobMessage``): a Job at its backoffLimit, or
    whose first rule an eviction may match is FailJob or FailIndex, was ended by one move. A JobSet
    (a TrainJob) restarts or fails with its child Job."""
    at_limit = judge(counted_job("etl", limit=2, failed=2), job_pod("etl", annotations=SAFE))
    assert (at_limit.movable, at_limit.code) == (False, codes.POD_ENDS_JOB), at_limit
    assert "backoffLimit" in at_limit.reason
    # the failed pods the controller has not counted yet count too
    uncounted = counted_job("etl", limit=2, failed=1, uncountedTerminatedPods={"failed": ["u-1"]})
    assert judge(uncounted, job_pod("etl", annotations=SAFE)).code == codes.POD_ENDS_JOB
    # an expendable or preemptable pod too: its opt-in lets the pod go, not the Job
    assert judge(counted_job("etl", limit=0), job_pod("etl", priority=-100)).code == codes.POD_ENDS_JOB
    preemptable = job_pod("etl", annotations={"volcano.sh/preemptable": "true"})
    assert judge(counted_job("etl", limit=0), preemptable).code == codes.POD_ENDS_JOB
    # below its limit the move is allowed, and says which Job counts it
    room = judge(counted_job("etl", limit=2, failed=1), job_pod("etl", annotations=SAFE))
    assert (room.code, room.counts) == (codes.POD_SAFE_TO_EVICT, "Job/ml/etl")
    assert judge(counted_job("etl", limit=None, failed=5), job_pod("etl", annotations=SAFE)).movable
    assert judge(counted_job("etl", limit=None, failed=6), job_pod("etl", annotations=SAFE)).movable is False
    # the first rule an eviction may match decides: FailJob or FailIndex ends it at once, Count counts
    fail_job = {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [0]}}
    ended = judge(counted_job("etl", limit=6, rules=[fail_job]), job_pod("etl", annotations=SAFE))
    assert (ended.code, "FailJob" in ended.reason) == (codes.POD_ENDS_JOB, True), ended
    fail_index = {**fail_job, "action": "FailIndex"}
    assert judge(counted_job("etl", limit=6, rules=[fail_index]), job_pod("etl", annotations=SAFE)).code == (
        codes.POD_ENDS_JOB
    )
    count = {**fail_job, "action": "Count"}
    counted = judge(counted_job("etl", limit=6, rules=[count, fail_job]), job_pod("etl", annotations=SAFE))
    assert (counted.code, counted.counts) == (codes.POD_SAFE_TO_EVICT, "Job/ml/etl")
    # a Job that ignores DisruptionTarget counts nothing; a finished Job has no pod left to end it
    tolerant = judge(counted_job("etl", limit=0, rules=[IGNORE_DISRUPTION]), job_pod("etl", annotations=SAFE))
    assert (tolerant.code, tolerant.counts) == (codes.POD_SAFE_TO_EVICT, None)
    done = counted_job("etl", limit=0, failed=1, conditions=[{"type": "Failed", "status": "True"}])
    assert judge(done, job_pod("etl", annotations=SAFE)).code == codes.POD_SAFE_TO_EVICT
    # what the Job allows is kept in the snapshot
    snap = snapshot(counted_job("etl", limit=2, failed=1, rules=[count]), job_pod("etl"))
    assert ClusterSnapshot.from_dict(snap.to_dict()) == snap
    assert snap.jobs == (JobInfo("Job/ml/etl", evictions_left=1),)
    # a suspended Job, or one not started yet, runs no pod to end it
    assert snapshot(counted_job("etl", limit=0) | {"status": {}}).jobs == ()
    suspended = counted_job("etl", limit=0)
    suspended["spec"]["suspend"] = True
    assert snapshot(suspended).jobs == ()


def test_a_pod_of_a_paddlejob_replica_that_never_restarts_is_never_moved() -> None:
    """The training operator's PaddleJob ``UpdateJobStatus`` (pkg/controller.v1/paddlepaddle/
    paddlepaddle_controller.go) fails the job as the PyTorchJob's does: a failed pod (an evicted one
    counts, pkg/core/status.go) of a replica type whose ``restartPolicy`` is ``Never``. PaddleJobs were
    read for nothing, so a safe-to-evict pod of such a job was moved and the job ended."""
    job = paddlejob("ernie", {"minReplicas": 1, "maxReplicas": 3})
    job["spec"]["paddleReplicaSpecs"]["Worker"]["restartPolicy"] = "Never"
    worker = kubeflow_pod("ernie", kind="PaddleJob", annotations=SAFE)
    never = judge(job, worker)
    assert (never.movable, never.code) == (False, codes.POD_ENDS_JOB), never
    job["spec"]["paddleReplicaSpecs"]["Worker"]["restartPolicy"] = "OnFailure"
    assert judge(job, worker).code == codes.POD_SAFE_TO_EVICT
    # a PaddleJob whose pods' failures restart them says nothing: not kept
    assert snapshot(job).jobs == ()


def test_a_pod_whose_eviction_fails_its_index_is_never_moved() -> None:
    """An Indexed Job with ``backoffLimitPerIndex`` fails an index once a pod of it fails while its
    ``batch.kubernetes.io/job-index-failure-count`` annotation (the index's failures so far, which the
    job controller writes on each pod it creates) is at the limit, an evicted pod counted as failed
    (pkg/controller/job/indexed_job_utils.go, ``isIndexFailed``); the Job then ends Failed
    (``JobReasonFailedIndexes``). Spillway read no per-index limit, so such a pod moved on its opt-in."""
    job = counted_job("etl", limit=None)
    job["spec"] |= {"completionMode": "Indexed", "completions": 4, "backoffLimitPerIndex": 1}

    def index_pod(failures: str | None) -> dict[str, Any]:
        annotations = {**SAFE, "batch.kubernetes.io/job-completion-index": "2"}
        if failures is not None:
            annotations["batch.kubernetes.io/job-index-failure-count"] = failures
        return job_pod("etl", annotations=annotations)

    spent = judge(job, index_pod("1"))
    assert (spent.movable, spent.code) == (False, codes.POD_ENDS_JOB), spent
    assert "backoffLimitPerIndex" in spent.reason
    assert judge(job, index_pod("0")).code == codes.POD_SAFE_TO_EVICT
    assert judge(job, index_pod(None)).code == codes.POD_SAFE_TO_EVICT  # no failure written: none yet
    # past int32, which the job controller parses it as (strconv.ParseInt(v, 10, 32), 0 on an error): no
    # count; 5,000 digits raised ValueError out of the snapshot before, and every observation failed
    assert judge(job, index_pod("1" * 5000)).code == codes.POD_SAFE_TO_EVICT
    assert judge(job, index_pod("0" * 5000 + "1")).code == codes.POD_ENDS_JOB  # leading zeros: still 1
    job["spec"]["backoffLimitPerIndex"] = 0
    assert judge(job, index_pod(None)).code == codes.POD_ENDS_JOB
    # the snapshot keeps the limit and the pod's count
    snap = snapshot(job, index_pod("1"))
    assert ClusterSnapshot.from_dict(snap.to_dict()) == snap and snap.pods[0].index_failures == 1


def mpi_pod(job: str, role: str, **kw: Any) -> dict[str, Any]:
    """A pod of an MPIJob as kubeflow/mpi-operator v2beta1 makes it (pkg/controller/mpi_job_controller.go,
    ``defaultLabels``): a worker controlled by the MPIJob, the launcher by its batch/v1 launcher Job."""
    labels = {
        "training.kubeflow.org/operator-name": "mpi-operator",
        "training.kubeflow.org/job-name": job,
        "training.kubeflow.org/job-role": role,
    }
    if role == "launcher":
        labels |= {"batch.kubernetes.io/job-name": f"{job}-launcher", "job-name": f"{job}-launcher"}
        return pod(f"{job}-launcher-x7k2p", owner=("Job", f"{job}-launcher"), labels=labels, **kw)
    return pod(
        f"{job}-worker-0", owner=("MPIJob", job), owner_api="kubeflow.org/v2beta1", labels=labels, **kw
    )


def test_no_pod_of_an_mpijob_is_moved() -> None:
    """An MPIJob's worker or launcher moved on its opt-in (safe-to-evict=true, an expendable priority).
    The launcher's mpirun runs one rank set over every worker; a worker that goes takes its ranks, and
    MPI's default error handler (MPI_ERRORS_ARE_FATAL) aborts them all, so mpirun fails and the launcher
    Job runs it again from the start, or the MPIJob fails past runPolicy.backoffLimit; the launcher
    evicted takes mpirun itself. The mpi-operator also fails the MPIJob outright on a worker the kubelet
    evicted (updateMPIJobStatus, reason MPIJobEvicted). One move costs the whole job's running work."""
    for raw in (
        mpi_pod("allreduce", "worker", annotations=SAFE),
        mpi_pod("allreduce", "worker", priority=-100),
        mpi_pod("allreduce", "launcher", annotations=SAFE),
    ):
        move = judge(raw)
        assert (move.movable, move.code) == (False, codes.POD_ENDS_JOB), (raw["metadata"]["name"], move)
        assert "MPIJob/ml/allreduce" in move.reason


def kubeflow_job(kind: str, specs: dict[str, dict[str, Any]], **spec: Any) -> dict[str, Any]:
    field = {"TFJob": "tfReplicaSpecs", "XGBoostJob": "xgbReplicaSpecs", "JAXJob": "jaxReplicaSpecs"}[kind]
    return {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": "train", "namespace": NS},
            "spec": {field: specs, **spec}}  # fmt: skip


def test_a_tfjobs_evicted_pod_fails_it_whatever_its_restart_policy() -> None:
    """A safe-to-evict (or expendable) TFJob pod moved, and the TFJob failed. The training operator counts
    a Running pod with a deletionTimestamp as a failed replica (pkg/core/status.go), sets the Restarting
    condition only for a pod already in phase Failed (pkg/controller.v1/common/pod.go, ReconcilePods),
    and the TFJob's UpdateJobStatus (pkg/controller.v1/tensorflow/tfjob_controller.go) marks it Failed on
    any failed replica when no Restarting condition is held, whatever the replica's restartPolicy, but for
    a Worker with enableDynamicWorker. kubeflow/trainer#2124 is an OnFailure worker so deleted."""
    specs = {"PS": {"replicas": 1, "restartPolicy": "OnFailure"}, "Worker": {"replicas": 4, "restartPolicy": "OnFailure"}}  # fmt: skip
    for role, kw in (
        ("Worker", {"annotations": SAFE}),
        ("Worker", {"priority": -100}),
        ("PS", {"annotations": SAFE}),
    ):
        move = judge(kubeflow_job("TFJob", specs), kubeflow_pod("train", role, kind="TFJob", **kw))
        assert (move.movable, move.code) == (False, codes.POD_ENDS_JOB), (role, move)
    dynamic = kubeflow_job("TFJob", specs, enableDynamicWorker=True)
    assert judge(dynamic, kubeflow_pod("train", "Worker", kind="TFJob", annotations=SAFE)).code == (
        codes.POD_SAFE_TO_EVICT
    )
    assert (
        judge(dynamic, kubeflow_pod("train", "PS", kind="TFJob", annotations=SAFE)).code == codes.POD_ENDS_JOB
    )


def test_an_xgboostjob_pod_moves_only_under_exitcode_and_a_jaxjob_pod_not_under_never() -> None:
    """An XGBoostJob's UpdateJobStatus (pkg/controller.v1/xgboost/xgboostjob_controller.go) marks the job
    Restarting on a failed replica only when its restartPolicy is ExitCode, and Failed otherwise (Never,
    its default, OnFailure, Always); a JAXJob's (pkg/controller.v1/jax/jaxjob_controller.go) fails it on a
    replica type whose policy is Never, its default (JAXJobDefaultRestartPolicy). An evicted pod counts as
    failed (pkg/core/status.go), so one safe-to-evict pod's move ended the job."""
    worker = {"XGBoostJob": kubeflow_pod("train", kind="XGBoostJob", annotations=SAFE),
              "JAXJob": kubeflow_pod("train", kind="JAXJob", annotations=SAFE)}  # fmt: skip
    cases = [("XGBoostJob", None, False), ("XGBoostJob", "OnFailure", False), ("XGBoostJob", "ExitCode", True),
             ("JAXJob", None, False), ("JAXJob", "Never", False), ("JAXJob", "OnFailure", True)]  # fmt: skip
    for kind, policy, moves in cases:
        spec = {"replicas": 2} | ({"restartPolicy": policy} if policy else {})
        move = judge(
            kubeflow_job(kind, {"Master": {"replicas": 1, "restartPolicy": "ExitCode"}, "Worker": spec}),
            worker[kind],
        )
        assert move.code == (codes.POD_SAFE_TO_EVICT if moves else codes.POD_ENDS_JOB), (kind, policy, move)
    # a job none of whose replicas fails it says nothing: not kept
    assert snapshot(kubeflow_job("XGBoostJob", {"Worker": {"restartPolicy": "ExitCode"}})).jobs == ()


def test_a_pod_left_running_by_a_finished_kubeflow_job_moves_on_its_opt_in() -> None:
    """A finished job's leftover pod was kept as if its eviction would end the job: a TFJob's parameter
    server (it never exits) runs on after the job Succeeded or Failed, as every Kubeflow kind's default
    ``runPolicy.cleanPodPolicy`` is None (pkg/apis/kubeflow.org/v1/*_defaults.go), and its node was held
    for good though the pod said safe-to-evict. The training operator's ReconcileJobs
    (pkg/controller.v1/common/job.go) returns for a job whose Succeeded or Failed condition is True
    before ReconcilePods and UpdateJobStatus: nothing counts the evicted pod, and nothing fails the
    job. A condition that is not True (Running False) leaves the rule as it is."""
    tf = {"PS": {"replicas": 1, "restartPolicy": "OnFailure"}, "Worker": {"replicas": 2}}
    jobs = {
        "TFJob": (kubeflow_job("TFJob", tf), "PS"),
        "XGBoostJob": (kubeflow_job("XGBoostJob", {"Worker": {"replicas": 2}}), "Worker"),
        "JAXJob": (kubeflow_job("JAXJob", {"Worker": {"replicas": 2}}), "Worker"),
        "PyTorchJob": (pytorchjob("train", None, workers=2), "Worker"),
    }
    jobs["PyTorchJob"][0]["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = "Never"
    for kind, (raw, role) in jobs.items():
        leftover = kubeflow_pod("train", role, kind=kind, annotations=SAFE)
        assert judge(raw, leftover).code == codes.POD_ENDS_JOB, kind  # running: the rule holds
        for ended in ("Succeeded", "Failed"):
            conditions = [{"type": "Running", "status": "False"}, {"type": ended, "status": "True"}]
            finished = {**raw, "status": {"conditions": conditions}}
            move = judge(finished, leftover)
            assert (move.movable, move.code) == (True, codes.POD_SAFE_TO_EVICT), (kind, ended, move)
        running = {**raw, "status": {"conditions": [{"type": "Succeeded", "status": "False"}]}}
        assert judge(running, leftover).code == codes.POD_ENDS_JOB, kind


def test_a_dynamic_tfjob_worker_moves_whatever_the_case_its_replica_type_is_written_in() -> None:
    """A TFJob written with ``worker`` (any case) under ``enableDynamicWorker`` had its workers kept as
    ends-job. The operator's defaulting renames a replica type written in any case to its own spelling
    (pkg/apis/kubeflow.org/v1 setTypeNameToCamelCase: strings.EqualFold) before its UpdateJobStatus
    compares it with Worker, so such a worker's failure does not fail the job; the stored object keeps
    the user's spelling, and its pods are labelled in lower case either way."""
    for spelling in ("worker", "WORKER"):
        specs = {"PS": {"replicas": 1}, spelling: {"replicas": 4}}
        dynamic = kubeflow_job("TFJob", specs, enableDynamicWorker=True)
        worker = kubeflow_pod("train", "Worker", kind="TFJob", annotations=SAFE)
        assert judge(dynamic, worker).code == codes.POD_SAFE_TO_EVICT, spelling
        ps = kubeflow_pod("train", "PS", kind="TFJob", annotations=SAFE)
        assert judge(dynamic, ps).code == codes.POD_ENDS_JOB, spelling


def mpijob(name: str, *conditions: tuple[str, str]) -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": name, "namespace": NS},
            "spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 1}, "Worker": {"replicas": 2}}},
            "status": {"conditions": [{"type": t, "status": s} for t, s in conditions]}}  # fmt: skip


def test_a_worker_a_finished_mpijob_leaves_running_moves_on_its_opt_in() -> None:
    """An MPIJob's worker was ends-job whatever became of the job, and a finished MPIJob leaves its
    workers running: runPolicy.cleanPodPolicy defaults to None (kubeflow/mpi-operator
    pkg/apis/kubeflow/v2beta1/default.go, setDefaultsRunPolicy) and a worker runs sshd until it is
    deleted, so a safe-to-evict worker held its node (a GPU node) for as long as the MPIJob object
    stayed. The operator's syncHandler (pkg/controller/mpi_job_controller.go) returns for a finished
    MPIJob (a Succeeded or Failed condition True, and a completionTime) before it reads a pod: no
    mpirun runs there any more, and nothing fails the job."""
    worker = mpi_pod("allreduce", "worker", annotations=SAFE)
    for ended in ("Succeeded", "Failed"):
        finished = mpijob("allreduce", ("Created", "True"), ("Running", "False"), (ended, "True"))
        move = judge(finished, worker)
        assert (move.movable, move.code) == (True, codes.POD_SAFE_TO_EVICT), (ended, move)
    running = mpijob("allreduce", ("Created", "True"), ("Running", "True"))
    assert judge(running, worker).code == codes.POD_ENDS_JOB
    assert judge(worker).code == codes.POD_ENDS_JOB  # the MPIJob not read (its CRD, RBAC): kept as before
    other = mpijob("other", ("Succeeded", "True"))  # another MPIJob's end is not this one's
    assert judge(other, worker).code == codes.POD_ENDS_JOB
