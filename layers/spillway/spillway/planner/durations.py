"""What is known of how long a running pod has left: its deadlines.

Kubernetes bounds a pod's run in two places, each counted in seconds from a start time:

* the pod's ``spec.activeDeadlineSeconds``, from its ``status.startTime``: the kubelet then fails it;
* its ``batch/v1`` Job's ``spec.activeDeadlineSeconds``, from the Job's ``status.startTime``: the Job
  controller then terminates the Job's pods (a suspended Job's timer is stopped: it is not read).

Whichever comes first ends the pod, so the pod has at most ``min(deadline) - now`` left: an upper bound
on its remaining time (users set deadlines generously: a pod usually ends well before). A deadline
already passed means the pod is being ended now (0 left). A pod with neither deadline, or whose start
time is unknown, has no known end (None). Pure: ``now`` is an argument.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from spillway.model.cluster import PodInfo
from spillway.model.jobs import JobInfo, job_key


def batch_job_of(pod: PodInfo, jobs: Mapping[str, JobInfo]) -> JobInfo | None:
    """The pod's batch/v1 Job (its ``batch.kubernetes.io/job-name`` label, else its controller owner)."""
    name = pod.batch_job or (pod.owner_name if pod.controlled and pod.owner_kind == "Job" else None)
    return jobs.get(job_key("Job", pod.namespace, name)) if name else None


def remaining_seconds(pod: PodInfo, jobs: Mapping[str, JobInfo], now: datetime) -> float | None:
    """At most how many seconds ``pod`` has left (0 when a deadline has passed), or None if unknown."""
    bounds: list[float] = []
    if pod.active_deadline is not None and pod.started_at is not None:
        bounds.append(pod.active_deadline - (now - pod.started_at).total_seconds())
    job = batch_job_of(pod, jobs)
    if job is not None and job.active_deadline is not None and job.started_at is not None:
        bounds.append(job.active_deadline - (now - job.started_at).total_seconds())
    return max(0.0, min(bounds)) if bounds else None


def all_end_within(pods: Iterable[PodInfo], jobs: Mapping[str, JobInfo], now: datetime) -> float | None:
    """Seconds until every one of ``pods`` has ended by its deadline (the largest remaining time; 0 for
    none), or None when one of them has no known end. A terminating pod is already leaving (0)."""
    longest = 0.0
    for pod in pods:
        if pod.terminating:
            continue
        left = remaining_seconds(pod, jobs, now)
        if left is None:
            return None
        longest = max(longest, left)
    return longest
