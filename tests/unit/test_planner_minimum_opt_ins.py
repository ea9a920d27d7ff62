"""What counts toward an elastic job's or a gang's minimum when a plan moves its pods.

The product's promise: no scale-down (consolidation, make room) kills a running job or takes it below
its minimum, whatever marks its pods carry. Built like test_planner_consolidation (m5.2xlarge nodes,
7910m CPU); each test reproduces a fault the adversarial review of the opt-ins found.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from plan_world import NOW, World
from test_disruption_move import RESTARTS, _operator_worker, judge, pytorchjob
from test_planner_consolidation import (
    UNDER,
    VOLCANO_PG,
    _db_world,
    _terminating,
    _volcano_gang,
    elastic_workers,
    kept,
    replicas,
)

from spillway.local import objects as o
from spillway.model.k8s import CORDONED_BY_SPILLWAY
from spillway.planner import codes

SAFE = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}


def _mark(w: World, prefix: str, annotations: dict[str, str]) -> None:
    for item in w.items:
        if item["kind"] == "Pod" and item["metadata"]["name"].startswith(prefix):
            item["metadata"].setdefault("annotations", {}).update(annotations)


def _idle_or_busy(w: World, a: str, b: str, path: str) -> None:
    """Nodes a and b idle for an hour (``path`` "idle": their expendable pods go with an idle drain), or
    busy with a replica each that fits on the third node (a consolidation moves them)."""
    if path == "idle":
        w.idle_since(a, 60)
        w.idle_since(b, 60)
    else:
        replicas(w, a, "web-a", 1, cpu="1")
        replicas(w, b, "web-b", 1, cpu="1")


def test_a_volcano_gang_member_both_safe_to_evict_and_preemptable_counts_toward_min_member() -> None:
    """A Volcano job of four tasks at its minMember (4), two on a, two on b, c with room for two; each
    task is Volcano-preemptable and annotated safe-to-evict "true" as well. The safe-to-evict rule
    matched first, so the move's code was safe-to-evict and the gang count (kept for the preemptable
    code only) left it out: the plan drained a node and broke the gang at its minimum. Volcano's
    preemptable still holds for such a pod: it goes only while its gang keeps more than minMember."""
    w = World(regions=("us-east-1",))
    a, b, c = sorted(w.group("cpu", "m5.2xlarge", nodes=3, max_size=10))
    w.pod_group(VOLCANO_PG, "train", spec={"minMember": 4}, phase="Running")
    _volcano_gang(w, a, ["train-0", "train-1"])
    _volcano_gang(w, b, ["train-2", "train-3"])
    _mark(w, "train-", SAFE)
    replicas(w, c, "pin", 1, cpu="4", annotations={})  # may not move: c stays, with room for two tasks

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    moved = [p for d in result.drain for p in d.pods if "/train-" in p]
    assert moved == [], f"evicted {moved} of a gang running at its minMember: {result.drain}"
    assert {kept(result)[a][0], kept(result)[b][0]} <= {codes.POD_NEVER, codes.RECEIVES_MOVED_PODS}


def _elastic(w: World, node: str, names: list[str], cpu: str, **kw: Any) -> None:
    elastic_workers(w, node, names, cpu=cpu)
    for item in w.items:
        if item["kind"] == "Pod" and item["metadata"]["name"] in names:
            item["spec"].update(kw)


@pytest.mark.parametrize("path", ["idle", "consolidation"])
def test_expendable_workers_are_evicted_free_but_never_below_their_elastic_jobs_minimum(path: str) -> None:
    """Four workers of an elastic job (2 to 4), priority -100, below expendable_priority_cutoff (-10):
    two on a, two on b. cluster-autoscaler kills expendable pods "without any consideration during
    scale down" (its --expendable-pods-priority-cutoff), and the plan took them so, counted toward
    nothing: alone on their nodes (idle for an hour) both nodes' drains evicted them, and beside a
    movable replica both nodes were consolidated, all four workers of a job whose minimum is 2 gone at
    once. Free they stay (no room is needed for them elsewhere), but each counts toward its job's
    minimum: one node goes, the other is kept `elastic-min`."""
    w = World(regions=("us-east-1",))
    a, b, c = sorted(w.group("cpu", "m5.2xlarge", nodes=3, max_size=10))
    _elastic(w, a, ["w-0", "w-1"], cpu="3", priority=-100)
    _elastic(w, b, ["w-2", "w-3"], cpu="3", priority=-100)
    replicas(w, c, "pin", 1, cpu="1", annotations={})
    _idle_or_busy(w, a, b, path)

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    (drain,) = [d for d in result.drain if d.node in (a, b)]
    code, reason = kept(result)[b if drain.node == a else a]
    assert code == codes.ELASTIC_MIN and "may lose 0" in reason, reason


@pytest.mark.parametrize(
    "mark",
    [SAFE, {"volcano.sh/preemptable": "true"}, "expendable"],
    ids=["safe-to-evict", "preemptable", "expendable"],
)
def test_the_rendezvous_host_is_never_moved_whatever_opts_it_in(mark: dict[str, str] | str) -> None:
    """Worker 0 hosts the elastic job's c10d rendezvous: evicted, every worker of the job stops and
    restarts (test_disruption_move). Its safe-to-evict "true" (or Volcano preemptable, or a priority
    below the cutoff) was read first and moved it as one worker, counted as one toward the minimum.
    The opt-in lets the pod go, not the job's other workers: counted as what it is, the whole job
    stopping, it takes the job below any minimum, so it is never moved, as a Volcano Job whose policy
    restarts the job on an eviction is not. An ordinary worker with the same mark still moves."""
    extra: dict[str, Any] = {"priority": -100} if mark == "expendable" else {"annotations": mark}
    items = (pytorchjob("train", {"minReplicas": 1, "maxReplicas": 4}, workers=3),
             *(_operator_worker("train", i, env=RESTARTS, **extra) for i in range(3)))  # fmt: skip

    host, other = judge(*items, name="train-worker-0"), judge(*items, name="train-worker-1")

    assert (host.movable, host.code, host.member) == (False, codes.POD_NOT_KNOWN_MOVABLE, None), host
    assert "rendezvous" in host.reason
    assert other.movable and other.member == "PyTorchJob/ml/train", other


def test_a_torchrun_node_with_no_restart_left_is_never_moved_on_its_safe_to_evict() -> None:
    """A node of a torchrun job on several nodes that restarts no worker group: evicting it fails the
    others' workers, and the job ends. Its safe-to-evict "true" moved it all the same."""
    raw = _operator_worker("train", 1, env={"PET_MAX_RESTARTS": "0", "PET_NNODES": "2"}, annotations=SAFE)

    move = judge(raw)

    assert (move.movable, move.code) == (False, codes.POD_NOT_KNOWN_MOVABLE), move
    assert "no restart allowed" in move.reason
    # the reason says what lets it move, for the user who marked it and sees it kept
    assert "--max-restarts=N" in move.reason and "elasticPolicy.maxRestarts" in move.reason


def test_after_a_make_room_only_the_workers_it_moves_leave_their_elastic_job() -> None:
    """An elastic job (2 to 4) runs four workers: one on a, one on c, two on b. A pending pod fits b once
    one of b's workers goes (make room: the worker is given up, the job runs 3). A minute on, the
    make-room drain has cordoned b and evicted that worker; a's pin is gone, so a may be consolidated,
    its worker given up (the job at 2, its minimum). The next plan took every worker on b as leaving
    (the node was cordoned by a drain), counted the job at 2 running workers and kept a `elastic-min`;
    only the pods the make room moves leave its node (``RoomState.moved``), so the job runs 3 and may
    lose 1."""
    w = World(regions=("us-east-1",))
    a, b, c = sorted(w.group("cpu", "m5.2xlarge", nodes=3, max_size=10))
    elastic_workers(w, a, ["w-0"], cpu="2500m")
    replicas(w, a, "pin-a", 1, cpu="5", annotations={})  # a stays, this plan; no room for the pod there
    elastic_workers(w, c, ["w-1"], cpu="2500m")
    replicas(w, c, "stay", 1, cpu="5", annotations={})  # nor on c, whatever moves
    elastic_workers(w, b, ["w-2", "w-3"], cpu="2500m")
    replicas(w, b, "pin-b", 1, cpu="1", annotations={})
    (big,) = w.pods("big", 1, cpu="3", memory="1Gi")

    first = w.plan(max_scale_in_fraction=1.0, **UNDER)

    ((node, code, moved),) = [(d.node, d.code, d.pods) for d in first.drain]
    assert (node, code, len(moved)) == (b, codes.MAKE_ROOM, 1), first.drain
    assert first.state.rooms[b].moved == moved
    w.state = first.state.to_wire()
    w.cordon(b, by_spillway=True)
    w.pod_item(moved[0])["metadata"]["deletionTimestamp"] = o.iso(NOW + timedelta(seconds=30))
    w.items = [i for i in w.items if not (i["kind"] == "Pod" and i["metadata"]["name"] == "pin-a-0")]

    second = w.plan(NOW + timedelta(minutes=1), max_scale_in_fraction=1.0, **UNDER)

    assert [(d.node, d.code) for d in second.drain] == [(a, codes.CONSOLIDATION)], kept(second).get(a)
    assert "gives up 1 worker" in second.drain[0].reason
    assert {p.pod: p.code for p in second.pending}[big] == codes.MAKING_ROOM


def _made_room_on_b() -> tuple[World, str, str, Any]:
    """The world of the test above a minute on: b given to ``big`` by a make room that moved one of b's
    two workers, a's pin gone (a could be consolidated, its worker given up), and the plan's state."""
    w = World(regions=("us-east-1",))
    a, b, c = sorted(w.group("cpu", "m5.2xlarge", nodes=3, max_size=10))
    elastic_workers(w, a, ["w-0"], cpu="2500m")
    replicas(w, a, "pin-a", 1, cpu="5", annotations={})
    elastic_workers(w, c, ["w-1"], cpu="2500m")
    replicas(w, c, "stay", 1, cpu="5", annotations={})
    elastic_workers(w, b, ["w-2", "w-3"], cpu="2500m")
    replicas(w, b, "pin-b", 1, cpu="1", annotations={})
    w.pods("big", 1, cpu="3", memory="1Gi")
    first = w.plan(max_scale_in_fraction=1.0, **UNDER)
    ((drain),) = first.drain
    w.state = first.state.to_wire()
    w.cordon(b, by_spillway=True)
    w.pod_item(drain.pods[0])["metadata"]["deletionTimestamp"] = o.iso(NOW + timedelta(seconds=30))
    w.items = [i for i in w.items if not (i["kind"] == "Pod" and i["metadata"]["name"] == "pin-a-0")]
    return w, a, b, first


def test_a_make_room_node_whose_instance_terminates_takes_all_its_workers() -> None:
    """As above, but b's instance is terminating in its group (a scale-in of its own): the worker the make
    room left on b goes with the instance too, so the job runs w-0 and w-1 only, its minimum, and a is
    kept. Only the moved pods of a make room leave its node while the node stays; counting only them
    when the node itself goes would let the plan take the job below its minimum."""
    w, a, b, _ = _made_room_on_b()
    _terminating(w, "cpu", b)

    second = w.plan(NOW + timedelta(minutes=1), max_scale_in_fraction=1.0, **UNDER)

    assert a not in {d.node for d in second.drain}, second.drain
    assert kept(second)[a][0] == codes.ELASTIC_MIN


def test_a_make_room_under_way_spends_a_budget_only_for_the_pods_it_moves() -> None:
    """A make-room drain under way on a moves a's filler (state ``rooms``, ``moved``) and leaves a's db
    replica running: it spends none of the db budget's one disruption, and b may be drained for it. A
    room recorded without ``moved`` (an older state) still counts its whole node, and b is kept."""
    w, a, b = _db_world()
    since = (NOW - timedelta(minutes=2)).isoformat()
    (wanting,) = w.pods("want", 1, cpu="1", memory="1Gi", node_selector={"kubernetes.io/hostname": a})
    w.state["nodes"][a] = {"idle_since": NOW.isoformat(), "draining_since": since}
    w.state["rooms"] = {a: {"pods": [wanting], "since": since, "moved": ["default/dbafill-0"]}}

    assert b in {d.node for d in w.plan(max_scale_in_fraction=1.0, **UNDER).drain}

    # the filler moved and gone: the db replica the room leaves on a still spends nothing
    w.items = [i for i in w.items if not (i["kind"] == "Pod" and i["metadata"]["name"] == "dbafill-0")]
    assert b in {d.node for d in w.plan(max_scale_in_fraction=1.0, **UNDER).drain}

    w.state["rooms"] = {a: {"pods": [wanting], "since": since}}
    result = w.plan(max_scale_in_fraction=1.0, **UNDER)
    assert b not in {d.node for d in result.drain}
    assert "drains under way evict 1" in kept(result)[b][1]


def test_an_idle_nodes_drain_leaves_an_expendable_rendezvous_host_and_its_node() -> None:
    """An idle node's drain evicts its expendable pods (priority below the cutoff) and terminates it. One
    of them hosted its elastic job's c10d rendezvous (PET_RDZV_ENDPOINT names it): the drain evicted it
    and every worker of the job stopped. It is workload: the node is kept, as for a pod whose eviction
    ends its job."""
    w = World(regions=("us-east-1",))
    a, b = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10))
    elastic_workers(w, a, ["w-0"], cpu="3")
    elastic_workers(w, b, ["w-1", "w-2"], cpu="3")
    for item in w.items:
        if item["kind"] == "Pod" and item["metadata"]["name"].startswith("w-"):
            item["spec"]["priority"] = -100
            item["spec"]["containers"][0]["env"].append({"name": "PET_RDZV_ENDPOINT", "value": "w-0:29400"})
    w.idle_since(a, 60)

    result = w.plan(max_scale_in_fraction=1.0)

    assert a not in {d.node for d in result.drain}, result.drain
    assert kept(result)[a][0] == codes.WORKLOAD


def test_after_a_make_room_only_the_gang_members_it_moves_leave_their_gang() -> None:
    """The same for a Volcano gang (minMember 2) of four preemptable tasks: one on a, one on c, two on b;
    make room moves one of b's to d. A minute on, a's and c's pins are gone: either node's task may move (the
    gang runs 3, and may lose 1), not both. Every task on b was taken as leaving, the gang counted at 2,
    and neither node was consolidated."""
    w = World(regions=("us-east-1",))
    a, b, c, d = sorted(w.group("cpu", "m5.2xlarge", nodes=4, max_size=10))
    w.pod_group(VOLCANO_PG, "train", spec={"minMember": 2}, phase="Running")
    replicas(w, d, "pin-d", 1, cpu="5", annotations={})  # room for the moved task, not for the pod
    _volcano_gang(w, a, ["train-0"], cpu="2500m")
    replicas(w, a, "pin-a", 1, cpu="5", annotations={})
    _volcano_gang(w, c, ["train-1"], cpu="2500m")
    replicas(w, c, "pin-c", 1, cpu="5", annotations={})
    _volcano_gang(w, b, ["train-2", "train-3"], cpu="2500m")
    replicas(w, b, "pin-b", 1, cpu="1", annotations={})
    w.pods("big", 1, cpu="3", memory="1Gi")

    first = w.plan(max_scale_in_fraction=1.0, **UNDER)

    ((node, code, moved),) = [(d.node, d.code, d.pods) for d in first.drain]
    assert (node, code, len(moved)) == (b, codes.MAKE_ROOM, 1), first.drain
    w.state = first.state.to_wire()
    w.cordon(b, by_spillway=True)
    w.pod_item(moved[0])["metadata"]["deletionTimestamp"] = o.iso(NOW + timedelta(seconds=30))
    w.items = [
        i for i in w.items if not (i["kind"] == "Pod" and i["metadata"]["name"] in ("pin-a-0", "pin-c-0"))
    ]

    second = w.plan(NOW + timedelta(minutes=1), max_scale_in_fraction=1.0, **UNDER)

    drained = [d.node for d in second.drain if d.code == codes.CONSOLIDATION]
    assert len(drained) == 1 and drained[0] in (a, c), (second.drain, kept(second))
    assert kept(second)[c if drained[0] == a else a][0] in (codes.POD_NEVER, codes.RECEIVES_MOVED_PODS)


@pytest.mark.parametrize("path", ["idle", "consolidation"])
def test_an_expendable_volcano_gang_member_that_is_preemptable_counts_toward_min_member(path: str) -> None:
    """A Volcano job of four preemptable tasks at its minMember (4), two on a, two on b, each of a
    priority below expendable_priority_cutoff (a batch PriorityClass of -100). The low priority moved
    them first, as expendable pods (free), and the gang was counted for the preemptable code only: alone
    on their nodes (idle) both nodes' drains evicted them, and beside a movable replica a node was
    consolidated, a gang at its minimum broken. Volcano's preemptable rule (a member only above
    minMember) holds for the pod whatever its priority: no node goes, each kept `pod-never`."""
    w = World(regions=("us-east-1",))
    a, b, c = sorted(w.group("cpu", "m5.2xlarge", nodes=3, max_size=10))
    w.pod_group(VOLCANO_PG, "train", spec={"minMember": 4}, phase="Running")
    _volcano_gang(w, a, ["train-0", "train-1"])
    _volcano_gang(w, b, ["train-2", "train-3"])
    for item in w.items:
        if item["kind"] == "Pod" and item["metadata"]["name"].startswith("train-"):
            item["spec"]["priority"] = -100
    replicas(w, c, "pin", 1, cpu="1", annotations={})  # may not move: c stays, with room
    _idle_or_busy(w, a, b, path)

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    moved = [p for d in result.drain for p in d.pods if "/train-" in p]
    assert moved == [], f"evicted {moved} of a gang running at its minMember: {result.drain}"
    assert kept(result)[a][0] == kept(result)[b][0] == codes.POD_NEVER, kept(result)
    assert "minMember" in kept(result)[a][1], kept(result)[a][1]


def test_a_worker_a_make_room_moved_counts_again_once_made_again_on_another_node() -> None:
    """As above, without w-1 (the job runs w-0 on a and w-3 on b besides the worker moved off b). The
    training operator makes the moved worker again under the same name, and it runs on c while b's
    room still waits for its pod. The plans after took ``RoomState.moved`` by name alone: the worker
    running on c counted as leaving, the job at 2 (its minimum), and a was kept `elastic-min` for as
    long as the room was held. A moved pod leaves only the node it was moved off: the job runs 3, and
    a's worker may be given up."""
    w, a, b, first = _made_room_on_b()
    w.items = [i for i in w.items if not (i["kind"] == "Pod" and i["metadata"]["name"] == "w-1")]
    (moved,) = first.state.rooms[b].moved
    again = w.pod_item(moved)
    del again["metadata"]["deletionTimestamp"]
    again["spec"]["nodeName"] = w.pod_item("default/stay-0")["spec"]["nodeName"]

    second = w.plan(NOW + timedelta(minutes=1), max_scale_in_fraction=1.0, **UNDER)

    assert [(d.node, d.code) for d in second.drain] == [(a, codes.CONSOLIDATION)], kept(second).get(a)
    assert "gives up 1 worker" in second.drain[0].reason


def test_a_released_make_room_leaves_its_nodes_other_workers_counted() -> None:
    """As above, two minutes on: the make-room drain on b is over (released: the moved worker gone, b
    uncordoned, ``big`` bound there), so the plan forgets the room, but b's claim lasts
    drain_claim_minutes from the first plan. The plans after took that claim for a drain still to run
    and every worker on b as leaving: the job at 2, a kept `elastic-min` for up to 20 minutes. A
    released drain now writes its ended mark (``State.ended_drains``: Drainer._note_ended) as a failed
    one does; with it the worker left on b counts, the job runs 3 and a's worker may be given up."""
    w, a, b, first = _made_room_on_b()
    (moved,) = first.state.rooms[b].moved
    w.items = [i for i in w.items if not (i["kind"] == "Pod" and i is w.pod_item(moved))]
    node = w.node(b)
    node["spec"].pop("unschedulable")
    node["spec"]["taints"] = []
    node["metadata"]["annotations"].pop(CORDONED_BY_SPILLWAY)
    w.pod_item("default/big-0")["spec"]["nodeName"] = b
    replicas(w, a, "hold-a", 1, cpu="5", annotations={})  # a stays in this plan, which drops the room
    released = w.plan(NOW + timedelta(minutes=2), max_scale_in_fraction=1.0, **UNDER)
    assert b not in released.state.rooms  # released: the room is forgotten, the claim is not
    w.state = released.state.to_wire()
    w.items = [i for i in w.items if not (i["kind"] == "Pod" and i["metadata"]["name"] == "hold-a-0")]
    later = NOW + timedelta(minutes=3)

    assert kept(w.plan(later, max_scale_in_fraction=1.0, **UNDER))[a][0] == codes.ELASTIC_MIN  # no mark

    w.state["ended_drains"] = {b: {"since": o.iso(first.state.nodes[b].draining_since)}}
    after = w.plan(later, max_scale_in_fraction=1.0, **UNDER)

    assert [(d.node, d.code) for d in after.drain] == [(a, codes.CONSOLIDATION)], kept(after).get(a)
    assert "gives up 1 worker" in after.drain[0].reason
