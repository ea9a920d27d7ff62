"""observe lists the pods' owners (jobs, pod groups, Workloads, namespaces) after the pods, never before.

Every list reads the cluster at its own resourceVersion: nothing makes two kinds' lists one picture
(*Kubernetes API concepts*, resource versions; a paged list alone is one, at its first page's). A Job is
made before its pods, so an owner list read after the pods' first page has every owner of a listed pod
(unless it was deleted since). Read before, as it could be when the two ran side by side (the pod list's
first page retried after a 429, a slow page), a Job made between the two reads was missing while its
pod was there, and a missing job says nothing: its pod moved as any opted-in pod, although the Job
fails on one evicted pod (``backoffLimit: 0``). The drain takes the plan's word for such a pod (it reads
no Job again: spillway.act.drain.classify), so the Job failed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from fakes import FakeCloud, FakeCluster

import spillway.adapters.kube  # noqa: F401  (imported now, not in the owners' read: the fake's list imports it)
from spillway.local import objects as o
from spillway.model.cluster import ClusterSnapshot
from spillway.model.jobs import JobInfo
from spillway.model.k8s import Pod
from spillway.observe import ObserveConfig, observe_once
from spillway.planner import codes
from spillway.planner.disruption import Move, assess_move

CLUSTER = "ml"
INSTANCE = "i-0a1b2c3d4e5f60718"
NODE = "ip-10-0-1-10.ec2.internal"
NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
CUTOFF = -10


def strict_job(name: str) -> dict[str, Any]:
    """A running batch/v1 Job that fails on its first failed pod (``backoffLimit: 0``)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"backoffLimit": 0, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}},
        "status": {"startTime": "2026-11-02T11:59:00Z", "active": 1},
    }


def its_pod(job: str) -> dict[str, Any]:
    """The Job's pod, bound and running, expendable (below the cutoff): movable unless its Job says no."""
    labels = {"batch.kubernetes.io/job-name": job, "job-name": job}
    return o.pod(f"{job}-abcde", node_name=NODE, owner=("Job", job), labels=labels, priority=-100,
                 created=NOW - timedelta(seconds=30))  # fmt: skip


class ChangedMeanwhile(FakeCluster):
    """A cluster that ``meanwhile`` changes while observe reads: after an owner list that started before
    the pods' first page had come (the page waits for that list a moment), before that page."""

    def __init__(
        self,
        meanwhile: Callable[[FakeCluster], None],
        pods: Sequence[dict[str, Any]] = (),
        custom: Sequence[dict[str, Any]] = (),
    ) -> None:
        super().__init__([o.node(NODE, instance=INSTANCE, zone="us-east-1a")], pods, custom=custom)
        self.meanwhile = meanwhile
        self.owners_listed = threading.Event()
        self.changed = False

    def iter_shared_objects(self, served: set[str] | None = None) -> Iterator[Any]:
        yield from super().iter_shared_objects(served)
        self.owners_listed.set()

    def iter_pods(self) -> Iterator[Pod]:
        self.owners_listed.wait(timeout=0.3)  # a first page answered late: the owners' read went first
        if not self.changed:
            self.changed = True
            self.meanwhile(self)
        yield from super().iter_pods()


def observe(kube: FakeCluster) -> ClusterSnapshot:
    cloud = FakeCloud(cluster=CLUSTER)
    cloud.add_group("gpu", [INSTANCE], region="us-east-1", desired=1, max_size=3, instance_type="g5.xlarge")
    return observe_once(kube, cloud, ObserveConfig(cluster=CLUSTER), lambda: NOW).cluster


def judged(snap: ClusterSnapshot, name: str) -> Move:
    pod = next(p for p in snap.pods if p.name == name)
    node = next(n for n in snap.nodes if n.name == NODE)
    return assess_move(pod, node, snap.pdb_allowance(pod), NOW, CUTOFF, snap.jobs_by_key())


def test_a_job_made_between_its_owner_list_and_the_pod_list_is_in_the_snapshot() -> None:
    """The Job and its pod made while observe reads: the pod is never moved (one eviction fails the Job),
    where the Job left out of the snapshot let it move as any expendable pod."""

    def make_job(kube: FakeCluster) -> None:
        kube.custom.append(strict_job("train"))
        kube.pods.append(its_pod("train"))

    snap = observe(ChangedMeanwhile(make_job))

    assert snap.jobs == (JobInfo("Job/default/train", evictions_left=0),)
    move = judged(snap, "train-abcde")
    assert not move.movable and move.code == codes.POD_ENDS_JOB


def test_a_failure_its_job_counted_meanwhile_leaves_no_eviction_to_spend() -> None:
    """A Job that survives one failed pod (``backoffLimit: 1``) whose pod failed while observe read: the
    Job read before the pods said one failure was left, and the failed pod, dropped from the snapshot as
    finished, was counted nowhere, so its sibling moved and the Job failed. Read after the pods, its
    ``status.failed`` counts it."""
    job = strict_job("etl") | {"spec": {**strict_job("etl")["spec"], "backoffLimit": 1}}
    first, second = its_pod("etl"), its_pod("etl")
    second["metadata"] |= {"name": "etl-fghij", "uid": "uid-etl-fghij"}

    def one_fails(kube: FakeCluster) -> None:
        job["status"] = {**job["status"], "failed": 1, "active": 1}
        kube.pods[0]["status"]["phase"] = "Failed"

    snap = observe(ChangedMeanwhile(one_fails, [first, second], [job]))

    assert snap.jobs == (JobInfo("Job/default/etl", evictions_left=0),)
    move = judged(snap, "etl-fghij")
    assert not move.movable and move.code == codes.POD_ENDS_JOB


def test_owners_are_listed_when_the_cluster_has_no_pod() -> None:
    """The owners' read waits for the pods' first page; an empty pod list still starts it."""
    kube = FakeCluster([o.node(NODE, instance=INSTANCE, zone="us-east-1a")], custom=[strict_job("idle")])
    cloud = FakeCloud(cluster=CLUSTER)
    cloud.add_group("gpu", [INSTANCE], region="us-east-1", desired=1, max_size=3, instance_type="g5.xlarge")

    snap = observe_once(kube, cloud, ObserveConfig(cluster=CLUSTER), lambda: NOW).cluster

    assert snap.pods == ()
    assert snap.jobs == (JobInfo("Job/default/idle", evictions_left=0),)
