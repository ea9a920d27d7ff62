"""A gang whose members partly finished: what each scheduler counts toward the gang's minimum.

- Volcano counts a Succeeded task as ready toward ``minMember`` (JobInfo.ReadyTaskNum) and as valid
  (ValidTaskNum), and per task toward ``minTaskMember`` (getJobAllocatedRoles); a Failed one not at all.
- Kueue's plain pod group holds its Pending, Running and Succeeded pods against
  ``pod-group-total-count``; a Failed pod is to be replaced.
- scheduler-plugins' coscheduling and kube-scheduler's GangScheduling count the pods of the scheduler's
  own pod informer, which lists no Succeeded or Failed pod: a finished member counts for nothing.

A finished member never holds a node, whatever its scheduler counts.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from plan_world import World, pending_codes, pending_reasons, scale_up

from spillway.model.cluster import ClusterSnapshot
from spillway.model.snapshot import fingerprint
from spillway.planner import codes

BIG = {"cpu": "5", "memory": "4Gi"}  # one per m5.2xlarge
VOLCANO = "scheduling.volcano.sh/v1beta1"
COSCHED = "scheduling.x-k8s.io/v1alpha1"


def _group(w: World, convention: str, min_member: int = 4, **volcano: Any) -> None:
    if convention == "volcano":
        w.pod_group(VOLCANO, "train", spec={"minMember": min_member, **volcano}, phase="Running")
    elif convention == "coscheduling":
        w.pod_group(COSCHED, "train", spec={"minMember": min_member})
    elif convention == "workload":
        w.workload("train", "default", [{"name": "workers", "policy": {"gang": {"minCount": min_member}}}])
    elif convention == "podgroup-v1alpha2":
        spec = {"schedulingPolicy": {"gang": {"minCount": min_member}}}
        w.pod_group("scheduling.k8s.io/v1alpha2", "train", spec=spec)


def _finished(
    w: World, convention: str, count: int, phase: str, node: str | None = None, task: str | None = None
) -> None:
    """``count`` members that ended in ``phase``, still bound to ``node`` (a finished pod keeps its
    spec.nodeName until it is deleted)."""
    prefix = f"train-{phase.lower()}-{task or 'any'}-{node or 'none'}"
    for key in w.pods(prefix, count, node_name=node, phase=phase, **BIG):
        w.join_gang(key, convention, task)


def _pending(w: World, convention: str, count: int, task: str | None = None) -> list[str]:
    keys = w.pods("train-wait", count, **BIG)
    for key in keys:
        w.join_gang(key, convention, task)
    return keys


COUNTING = ["volcano", "kueue"]
NOT_COUNTING = ["coscheduling", "workload", "podgroup-v1alpha2"]


@pytest.mark.parametrize("convention", COUNTING)
def test_a_gang_asks_only_for_what_its_finished_members_leave(convention: str) -> None:
    """Minimum 4: two members Succeeded, two wait. Volcano's job is ready with the two placed (two
    Succeeded + two allocated), Kueue's group has its four pods; Spillway called the gang incomplete
    ("2 of its 4 pods") and the two waited for good. (Found by review.)"""
    w = World()
    w.group("cpu-east", "m5.2xlarge", max_size=10)
    _group(w, convention)
    _finished(w, convention, 2, "Succeeded")
    pods = _pending(w, convention, 2)

    result = w.plan()

    assert scale_up(result)["cpu-east"] == (0, 2, pods), sorted(pending_reasons(result).items())
    assert [(g.gang, g.pods) for g in result.scale_up[0].gangs] == [("default/train", tuple(pods))]


@pytest.mark.parametrize("convention", COUNTING)
def test_a_finished_member_counts_toward_the_minimum_but_holds_no_node(convention: str) -> None:
    """The two Succeeded members are still bound to the two nodes there are: their room is free, and
    the two waiting members go there, launching nothing."""
    w = World()
    nodes = w.group("cpu-east", "m5.2xlarge", nodes=2, max_size=2)
    _group(w, convention)
    for node in nodes:
        _finished(w, convention, 1, "Succeeded", node=node)
    pods = _pending(w, convention, 2)

    result = w.plan()

    assert result.scale_up == ()
    assert sorted(p.node for p in result.placements if p.pod in pods) == sorted(nodes)


@pytest.mark.parametrize("convention", COUNTING)
def test_no_gang_launch_for_a_minimum_its_finished_members_satisfy(convention: str) -> None:
    """Minimum 4 and four members Succeeded: the two more that wait start on their own, one by one, as
    far as room allows (one node left below MaxSize); Spillway launched for a gang of two that could
    not fit whole, and added nothing."""
    w = World()
    w.group("cpu-east", "m5.2xlarge", max_size=1)
    _group(w, convention)
    _finished(w, convention, 4, "Succeeded")
    pods = _pending(w, convention, 2)

    result = w.plan()

    assert scale_up(result)["cpu-east"] == (0, 1, pods[:1]), sorted(pending_reasons(result).items())
    assert result.scale_up[0].gangs == ()
    assert pending_codes(result)[pods[1]] == codes.MAX_SIZE
    assert "gang" not in pending_reasons(result)[pods[1]]


@pytest.mark.parametrize(
    ("convention", "phase"),
    [(c, "Failed") for c in COUNTING + NOT_COUNTING] + [(c, "Succeeded") for c in NOT_COUNTING],
)
def test_members_a_scheduler_does_not_count_leave_the_gang_incomplete(convention: str, phase: str) -> None:
    """A Failed member counts for no scheduler; a Succeeded one not for coscheduling and GangScheduling,
    whose scheduler lists only pods that are not Succeeded or Failed: two finished and two waiting of a
    minimum 4 never pass PreFilter (PreEnqueue), so nothing is launched for them."""
    w = World()
    w.group("cpu-east", "m5.2xlarge", max_size=10)
    _group(w, convention)
    _finished(w, convention, 2, phase)
    pods = _pending(w, convention, 2)

    result = w.plan()

    assert result.scale_up == ()
    assert {pending_codes(result)[p] for p in pods} == {codes.GANG_INCOMPLETE}
    assert "has 2 of its 4 pods" in pending_reasons(result)[pods[0]]


def test_a_volcano_task_counts_its_succeeded_pods_toward_its_minimum() -> None:
    """minMember 4, minTaskMember ps 1, worker 3: the ps runs, two workers Succeeded, two workers wait;
    room for one node. The job lacks one worker (three with the two finished): that one goes as the
    gang, the other waits for room."""
    w = World()
    nodes = w.group("cpu-east", "m5.2xlarge", nodes=1, max_size=2)
    _group(w, "volcano", minTaskMember={"ps": 1, "worker": 3})
    (ps,) = w.pods("train-ps", 1, node_name=nodes[0], **BIG)
    w.join_gang(ps, "volcano", "ps")
    _finished(w, "volcano", 2, "Succeeded", task="worker")
    workers = _pending(w, "volcano", 2, task="worker")

    result = w.plan()

    assert scale_up(result)["cpu-east"] == (1, 2, workers[:1]), sorted(pending_reasons(result).items())
    assert result.scale_up[0].gangs[0].pods == tuple(workers[:1])
    why = pending_reasons(result)[workers[1]]
    assert "starts with the 1 pod(s) it still needs (task worker: 1) of its 2 pending" in why


def test_succeeded_members_are_kept_as_counts_of_gangs_that_still_have_live_members() -> None:
    """The snapshot keeps no finished pod for gangs, only how many Succeeded per gang and Volcano task,
    and only for gangs with a member not finished: a finished gang's pods cost nothing."""
    w = World()
    w.group("cpu-east", "m5.2xlarge", max_size=10)
    _group(w, "volcano", minTaskMember={"worker": 2})
    _finished(w, "volcano", 2, "Succeeded", task="worker")
    _finished(w, "volcano", 1, "Succeeded")
    _finished(w, "volcano", 3, "Failed", task="worker")
    _pending(w, "volcano", 1, task="worker")
    w.pods("old", 1, phase="Succeeded", annotations={"scheduling.k8s.io/group-name": "old"})
    snapshot = w.parsed()[0]

    assert snapshot.gang_succeeded == {"default/train": {"": 1, "worker": 2}}
    assert ClusterSnapshot.from_dict(snapshot.to_dict()) == snapshot
    older = {k: v for k, v in snapshot.to_dict().items() if k != "gang_succeeded"}
    assert ClusterSnapshot.from_dict(older).gang_succeeded == {}
    assert fingerprint(snapshot, []) != fingerprint(replace(snapshot, gang_succeeded={}), [])
