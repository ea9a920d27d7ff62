"""A failed pod its Job's controller has not counted yet still spends one of the Job's failures.

The job controller puts the ``batch.kubernetes.io/job-tracking`` finalizer on every pod it makes. A pod
that finished and still carries it is one the controller has not counted: ``syncJob`` adds such failed
pods not already in ``status.uncountedTerminatedPods.failed`` (``getNewFinishedPods``, pods with the
finalizer only) to ``status.failed`` and ``uncountedTerminatedPods.failed`` before it compares with
``spec.backoffLimit`` (``exceedsBackoffLimit``), and removes the finalizer only once the pod's uid is in
``uncountedTerminatedPods`` (kubernetes pkg/controller/job/job_controller.go,
``trackJobStatusAndRemoveFinalizers``). Such a pod, dropped from the snapshot as finished, was counted
nowhere: its Job's eviction room was one too many, and a plan could spend the Job's last failure.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fakes import FakeCloud, FakeCluster

from spillway.local import objects as o
from spillway.model.cluster import ClusterSnapshot
from spillway.model.jobs import JOB_TRACKING_FINALIZER, JobInfo
from spillway.model.k8s import iter_kube_list
from spillway.observe import ObserveConfig, observe_once
from spillway.planner import codes
from spillway.planner.disruption import assess_move

CLUSTER = "ml"
INSTANCE = "i-0a1b2c3d4e5f60718"
NODE = "ip-10-0-1-10.ec2.internal"
NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
CUTOFF = -10
KEY = "Job/default/etl"


def job(limit: int, *, failed: int = 0, uncounted: list[str] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"startTime": "2026-11-02T11:00:00Z", "active": 1, "failed": failed}
    if uncounted is not None:
        status["uncountedTerminatedPods"] = {"failed": uncounted}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "etl", "namespace": "default", "uid": "uid-etl"},
        "spec": {"backoffLimit": limit, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}},
        "status": status,
    }


def job_pod(name: str, *, phase: str = "Running", tracked: bool = True) -> dict[str, Any]:
    """A pod of Job etl (expendable: movable unless its Job says no), with the tracking finalizer."""
    labels = {"batch.kubernetes.io/job-name": "etl", "job-name": "etl"}
    raw = o.pod(name, node_name=NODE, owner=("Job", "etl"), labels=labels, priority=-100,
                created=NOW - timedelta(minutes=5))  # fmt: skip
    raw["metadata"]["uid"] = f"uid-{name}"
    if tracked:
        raw["metadata"]["finalizers"] = [JOB_TRACKING_FINALIZER]
    raw["status"]["phase"] = phase
    return raw


def from_objects(*items: dict[str, Any]) -> ClusterSnapshot:
    objs = [o.node(NODE, instance=INSTANCE, zone="us-east-1a"), *items]
    snap = ClusterSnapshot.from_objects(CLUSTER, NOW, iter_kube_list({"kind": "List", "items": objs}))
    return ClusterSnapshot.from_dict(snap.to_dict())  # the stored form, as the planner reads it


def observed(*items: dict[str, Any]) -> ClusterSnapshot:
    pods = [i for i in items if i["kind"] == "Pod"]
    custom = [i for i in items if i["kind"] != "Pod"]
    kube = FakeCluster([o.node(NODE, instance=INSTANCE, zone="us-east-1a")], pods, custom=custom)
    cloud = FakeCloud(cluster=CLUSTER)
    cloud.add_group("gpu", [INSTANCE], region="us-east-1", desired=1, max_size=3, instance_type="g5.xlarge")
    return observe_once(kube, cloud, ObserveConfig(cluster=CLUSTER), lambda: NOW).cluster


def movable(snap: ClusterSnapshot, name: str = "etl-run") -> tuple[bool, str]:
    pod = next(p for p in snap.pods if p.name == name)
    node = next(n for n in snap.nodes if n.name == NODE)
    move = assess_move(pod, node, snap.pdb_allowance(pod), NOW, CUTOFF, snap.jobs_by_key())
    return move.movable, move.code


def test_a_failed_pod_not_yet_counted_leaves_its_job_no_eviction_to_spend() -> None:
    """backoffLimit 1, status.failed 0, and one failed pod that still has the finalizer: the controller
    will count it, so one more failure fails the Job; its running pod must not move."""
    items = (job(1), job_pod("etl-run"), job_pod("etl-failed", phase="Failed"))
    for snap in (from_objects(*items), observed(*items)):
        assert snap.jobs == (JobInfo(KEY, evictions_left=0),)
        assert movable(snap) == (False, codes.POD_ENDS_JOB)


def test_a_failed_pod_already_in_uncounted_terminated_pods_is_counted_once() -> None:
    """Its uid in ``uncountedTerminatedPods.failed`` (the finalizer not removed yet): taken off once."""
    items = (job(2, uncounted=["uid-etl-failed"]), job_pod("etl-run"), job_pod("etl-failed", phase="Failed"))
    for snap in (from_objects(*items), observed(*items)):
        assert snap.jobs == (JobInfo(KEY, evictions_left=1),)
        assert movable(snap) == (True, codes.POD_EXPENDABLE)


def test_succeeded_pods_and_counted_failed_pods_take_nothing() -> None:
    """A Succeeded pod with the finalizer is a completion, not a failure; a Failed pod without it is in
    ``status.failed`` already."""
    items = (
        job(2, failed=1),
        job_pod("etl-run"),
        job_pod("etl-done", phase="Succeeded"),
        job_pod("etl-failed", phase="Failed", tracked=False),
    )
    for snap in (from_objects(*items), observed(*items)):
        assert snap.jobs == (JobInfo(KEY, evictions_left=1),)
        assert movable(snap)[0]
