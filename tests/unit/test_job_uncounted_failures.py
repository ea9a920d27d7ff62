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


# -- what the controller does not count (kubernetes pkg/controller/job/job_controller.go,
# nonIgnoredFailedPodsCount, getValidPodsWithFilter, trackJobStatusAndRemoveFinalizers; pod_failure_policy.go,
# matchPodFailurePolicy): a failed pod the first matching podFailurePolicy rule Ignores, and a failed pod of
# an Indexed Job whose completion index is missing or not below spec.completions


def with_policy(raw: dict[str, Any], *rules: dict[str, Any]) -> dict[str, Any]:
    raw["spec"]["podFailurePolicy"] = {"rules": list(rules)}
    return raw


def failed_with(
    name: str, *, exit_code: int | None = None, conditions: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A Failed pod of Job etl still tracked, its container terminated with ``exit_code`` (a terminated
    state without one when None) and holding ``conditions`` (type, status True)."""
    raw = job_pod(name, phase="Failed")
    terminated: dict[str, Any] = {"reason": "Error"}
    if exit_code is not None:
        terminated["exitCode"] = exit_code
    raw["status"]["containerStatuses"] = [{"name": "c", "state": {"terminated": terminated}}]
    raw["status"]["conditions"] = [{"type": t, "status": "True"} for t in conditions]
    return raw


IGNORE_42 = {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [42]}}


def test_a_failed_pod_an_ignore_rule_matches_spends_no_failure_of_its_job() -> None:
    """backoffLimit 1, an Ignore rule on exit code 42 (the Job still counts evictions): a pod that exited
    42 is not counted by the controller, so one failure is still left; one that exited 1 is counted."""
    ignored = (with_policy(job(1), IGNORE_42), job_pod("etl-run"), failed_with("etl-failed", exit_code=42))
    for snap in (from_objects(*ignored), observed(*ignored)):
        assert snap.jobs == (JobInfo(KEY, evictions_left=1),)
        assert movable(snap) == (True, codes.POD_EXPENDABLE)
    counted = (with_policy(job(1), IGNORE_42), job_pod("etl-run"), failed_with("etl-failed", exit_code=1))
    for snap in (from_objects(*counted), observed(*counted)):
        assert snap.jobs == (JobInfo(KEY, evictions_left=0),)


def test_an_ignore_rule_on_a_pod_condition_is_read_as_the_controller_reads_it() -> None:
    """``onPodConditions`` matches a condition of that type and status on the failed pod: shown, the
    failure is ignored; not shown, it is counted."""
    rule = {"action": "Ignore", "onPodConditions": [{"type": "ConfigIssue", "status": "True"}]}
    for conditions, left in (("ConfigIssue",), 1), ((), 0):
        items = (
            with_policy(job(1), rule),
            job_pod("etl-run"),
            failed_with("etl-failed", conditions=conditions),
        )
        for snap in (from_objects(*items), observed(*items)):
            assert snap.jobs == (JobInfo(KEY, evictions_left=left),), conditions


def test_the_first_matching_rule_decides_and_an_unreadable_one_keeps_the_failure_counted() -> None:
    """A Count rule before the Ignore rule that both match counts the failure; an exit-code rule met by
    a terminated container without its exit code cannot be judged, and the failure stays counted."""
    count_42 = {"action": "Count", "onExitCodes": {"operator": "In", "values": [42]}}
    for rules, exit_code in (((count_42, IGNORE_42), 42), ((IGNORE_42,), None)):
        items = (
            with_policy(job(1), *rules),
            job_pod("etl-run"),
            failed_with("etl-failed", exit_code=exit_code),
        )
        for snap in (from_objects(*items), observed(*items)):
            assert snap.jobs == (JobInfo(KEY, evictions_left=0),), rules


def indexed(raw: dict[str, Any], completions: int) -> dict[str, Any]:
    raw["spec"].update(completionMode="Indexed", completions=completions)
    return raw


def test_a_failed_pod_of_an_invalid_completion_index_spends_no_failure() -> None:
    """An Indexed Job of 2 completions: a failed pod of index 5, or of none, or one Go's Atoi refuses, is
    not counted; one of index 1 is."""
    for index, left in (("5", 1), (None, 1), ("1_0", 1), ("1", 0)):
        failed = job_pod("etl-failed", phase="Failed")
        if index is not None:
            failed["metadata"].setdefault("annotations", {})["batch.kubernetes.io/job-completion-index"] = (
                index
            )
        items = (indexed(job(1), 2), job_pod("etl-run"), failed)
        for snap in (from_objects(*items), observed(*items)):
            assert snap.jobs == (JobInfo(KEY, evictions_left=left),), index


def test_a_terminating_pod_already_in_uncounted_terminated_pods_is_taken_off_once() -> None:
    """Its uid in ``uncountedTerminatedPods.failed`` (in ``evictions_left`` already) while its finalizer is
    still on: the eviction room does not take it off a second time. One not in it still is."""
    from spillway.planner.disruption import eviction_room

    for uncounted, room in ((["uid-etl-going"], 1), ([], 1)):
        going = job_pod("etl-going")
        going["metadata"]["deletionTimestamp"] = "2026-11-02T11:59:00Z"
        items = (job(2, uncounted=uncounted), job_pod("etl-run"), going)
        for snap in (from_objects(*items), observed(*items)):
            assert eviction_room(snap.pods, snap.jobs_by_key(), set())[KEY] == room, uncounted
