"""Gang members held by scheduling gates, and members that request nothing, as each scheduler counts them.

- Volcano's scheduler counts a member pending under scheduling gates as a valid task (a gated pod is
  Pending, and JobInfo.ValidTaskNum and CheckTaskValid count Pending tasks), and counts a pending member
  that requests no resources as ready toward ``minMember`` (PendingBestEffortTaskNum, in IsReady) and
  toward its task's ``minTaskMember`` (getJobAllocatedRoles): such a pod needs no room to be bound.
- scheduler-plugins' coscheduling (PodGroupManager.PreFilter lists the group's pods from the scheduler's
  pod informer, every pod not Succeeded or Failed, gated ones too, against ``minMember``) and
  kube-scheduler's GangScheduling (PreEnqueue: the pod group state's AllPodsCount, every pod the
  scheduler's informer saw, against ``minCount``) count a gated member as one of the gang's pods; their
  Permit counts only assigned or assumed pods, so the gang starts only once the gated member is placed
  too, and a member that requests nothing is no exception.
- Kueue is left as it was: a gated member does not count toward the total.
- A Volcano PodGroup still ``Pending`` whose pods exist, all gated, is no demand: Volcano's allocate
  skips scheduling-gated tasks, and DeductSchGatedResources only takes their share of ``minResources``
  off what the job holds of its queue once enqueued (proportion, capacity, overcommit plugins).
"""

from __future__ import annotations

from typing import Any

import pytest
from plan_world import World, pending_codes, pending_reasons, scale_up

from spillway.planner import codes

BIG = {"cpu": "5", "memory": "4Gi"}  # one per m5.2xlarge
VOLCANO = "scheduling.volcano.sh/v1beta1"
COSCHED = "scheduling.x-k8s.io/v1alpha1"


def _members(
    w: World, prefix: str, count: int, convention: str = "volcano", *, task: str | None = None,
    gated: bool = False, best_effort: bool = False, **kw: Any,
) -> list[str]:  # fmt: skip
    keys = w.pods(prefix, count, **({} if best_effort else BIG), **kw)
    for key in keys:
        w.join_gang(key, convention, task=task)  # kueue: admitted (gated only by another gate)
        item = w.pod_item(key)
        spec = item["spec"]
        if best_effort:
            spec["containers"][0].pop("resources", None)
        if gated:
            spec["schedulingGates"] = [{"name": "example.com/launcher-ready"}]
            item["status"]["conditions"] = [
                {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
            ]
    return keys


def _volcano(w: World, min_member: int = 4, **spec: Any) -> None:
    w.pod_group(VOLCANO, "train", spec={"minMember": min_member, **spec}, phase="Inqueue")


@pytest.mark.parametrize("tasks", [False, True])
def test_a_volcano_gang_counts_its_gated_best_effort_member(tasks: bool) -> None:
    """minMember 4: three workers wait, the launcher (no requests) is gated. Volcano's job is valid
    (four Pending tasks) and ready once the three workers are allocated (three allocated + one pending
    best-effort task), also per task (launcher 1, worker 3); Spillway left the launcher out and called
    the gang incomplete ("3 of its 4 pods"), so the workers waited for good."""
    w = World()
    w.group("cpu-east", "m5.2xlarge", max_size=10)
    _volcano(w, **({"minTaskMember": {"launcher": 1, "worker": 3}} if tasks else {}))
    (launcher,) = _members(
        w, "train-launcher", 1, task="launcher" if tasks else None, gated=True, best_effort=True
    )
    workers = _members(w, "train-worker", 3, task="worker" if tasks else None)

    result = w.plan()

    assert scale_up(result)["cpu-east"] == (0, 3, workers), sorted(pending_reasons(result).items())
    assert [(g.gang, g.pods) for g in result.scale_up[0].gangs] == [("default/train", tuple(workers))]
    assert pending_codes(result)[launcher] == codes.SCHEDULING_GATED


def test_a_gated_volcano_member_with_requests_is_valid_but_must_be_placed_for_the_job_to_start() -> None:
    """minMember 4: three wait, the fourth (with requests) is gated. Volcano finds the job valid but it
    cannot be ready before the gated task is allocated: nothing is launched, and the reason says that
    the gang has its pods but one waits for its gates (not that a pod is missing)."""
    w = World()
    w.group("cpu-east", "m5.2xlarge", max_size=10)
    _volcano(w)
    _members(w, "train-held", 1, gated=True)
    workers = _members(w, "train-worker", 3)

    result = w.plan()

    assert result.scale_up == ()
    assert {pending_codes(result)[p] for p in workers} == {codes.GANG_INCOMPLETE}
    why = pending_reasons(result)[workers[0]]
    assert "needs 4 more pod(s)" in why and "scheduling gates" in why, why


def test_no_gang_launch_for_a_minimum_pending_best_effort_members_satisfy() -> None:
    """minMember 2: one member runs and one that requests nothing waits. Volcano's job is ready (one
    running + one pending best-effort task), so the two further members start one by one, as far as
    room allows (one node below MaxSize): no gang launch; Spillway launched for them as a gang."""
    w = World()
    w.group("cpu-east", "m5.2xlarge", max_size=1)
    _volcano(w, min_member=2)
    _members(w, "train-run", 1, phase="Running", node_name="elsewhere")
    _members(w, "train-be", 1, best_effort=True)
    workers = _members(w, "train-worker", 2)

    result = w.plan()

    assert result.scale_up and result.scale_up[0].gangs == (), sorted(pending_reasons(result).items())
    assert pending_codes(result)[workers[1]] == codes.MAX_SIZE


def _group(w: World, convention: str) -> None:
    if convention == "coscheduling":
        w.pod_group(COSCHED, "train", spec={"minMember": 4})
    elif convention == "workload":
        w.workload("train", "default", [{"name": "workers", "policy": {"gang": {"minCount": 4}}}])
    elif convention == "podgroup-v1alpha2":
        spec = {"schedulingPolicy": {"gang": {"minCount": 4}}}
        w.pod_group("scheduling.k8s.io/v1alpha2", "train", spec=spec)


@pytest.mark.parametrize("best_effort", [False, True])
@pytest.mark.parametrize("convention", ["coscheduling", "workload", "podgroup-v1alpha2"])
def test_coscheduling_and_gang_scheduling_count_a_gated_member_among_the_gangs_pods(
    convention: str, best_effort: bool
) -> None:
    """Minimum 4: three wait, the fourth is gated. Coscheduling's PreFilter and GangScheduling's
    PreEnqueue find four pods (their informer lists gated pods), so the gang is not short of pods; it
    still cannot start before the gated one is placed (Permit counts assigned pods only, requests or
    none): nothing is launched, and the reason names the gates, not a missing pod ("has 3 of its 4")."""
    w = World()
    w.group("cpu-east", "m5.2xlarge", max_size=10)
    _group(w, convention)
    (held,) = _members(w, "train-held", 1, convention, gated=True, best_effort=best_effort)
    workers = _members(w, "train-worker", 3, convention)

    result = w.plan()

    assert result.scale_up == ()
    assert {pending_codes(result)[p] for p in workers} == {codes.GANG_INCOMPLETE}
    assert pending_codes(result)[held] == codes.SCHEDULING_GATED
    why = pending_reasons(result)[workers[0]]
    assert "needs 4 more pod(s)" in why and "scheduling gates" in why, why


def test_kueue_still_counts_no_gated_member() -> None:
    w = World()
    w.group("cpu-east", "m5.2xlarge", max_size=10)
    _members(w, "train-held", 1, "kueue", gated=True)
    workers = _members(w, "train-worker", 3, "kueue")

    result = w.plan()

    assert result.scale_up == ()
    assert "has 3 of its 4 pods" in pending_reasons(result)[workers[0]]


@pytest.mark.parametrize("ungated", [0, 1])
def test_a_pending_volcano_pod_group_whose_pods_exist_gated_has_no_virtual_pods(ungated: int) -> None:
    """A PodGroup still Pending whose pods exist but are gated: Volcano's allocate skips gated tasks,
    so they use no capacity until their gates lift (DeductSchGatedResources only takes them off what
    the job holds of its queue). Spillway made minMember virtual pods of minResources for it, as for a
    PodGroup with no pods, and launched two nodes for pods Volcano would not place."""
    w = World()
    w.group("cpu-east", "m5.2xlarge", max_size=10)
    spec = {"minMember": 2, "minResources": {"cpu": "10", "memory": "8Gi"}}
    w.pod_group(VOLCANO, "train", spec=spec, phase="Pending")
    held = _members(w, "train-held", 2 - ungated, gated=True)
    workers = _members(w, "train-worker", ungated)

    result = w.plan()

    assert result.scale_up == (), sorted(pending_reasons(result).items())
    codes_of = pending_codes(result)
    assert not [p for p in codes_of if p.startswith("default/train[")], sorted(codes_of)
    assert {codes_of[p] for p in held} == {codes.SCHEDULING_GATED}
    assert {codes_of[p] for p in workers} <= {codes.GANG_INCOMPLETE}
