"""A running gang member that consolidation or make room moves goes only where the rest of its gang runs.

Pending members of a gang with members running are placed in their region only (a gang is not split
over regions: test_planner_gang_home). Consolidation and make room placed the pods they move on any
node of the room: a member that may move (Volcano-preemptable above its job's minMember, an opt-in
worker, an elastic worker above its minimum) was planned onto a node in another region than the rest
of its gang, and its node drained on the strength of that room, splitting one job over two regions.
"""

from __future__ import annotations

from typing import Any

from plan_world import World
from test_planner_consolidation import (
    UNDER,
    VOLCANO_PG,
    _volcano_gang,
    elastic_workers,
    kept,
    replicas,
)
from test_planner_gang_home import _unknown_region_node
from test_planner_gang_launch import ZONE_TOPOLOGY

from spillway.planner import codes


def _west_gang(*, west_room: bool) -> tuple[World, str, str, str, str | None]:
    """Volcano job ``train`` (minMember 2, three preemptable tasks of 3 CPU) runs in us-west-2: two
    tasks on a (full for a third), one on b (underutilized: it may go, the job keeping 2). us-east-1's
    c has room for it; with ``west_room``, us-west-2's d too. Returns the world and a, b, c, d."""
    w = World()
    west = w.group("cpu-west", "m5.2xlarge", region="us-west-2", nodes=3 if west_room else 2)
    (c,) = w.group("cpu-east", "m5.2xlarge", nodes=1)
    a, b = west[0], west[1]
    d = west[2] if west_room else None
    w.pod_group(VOLCANO_PG, "train", spec={"minMember": 2}, phase="Running")
    _volcano_gang(w, a, ["train-0", "train-1"], cpu="3")
    _volcano_gang(w, b, ["train-2"], cpu="3")
    replicas(w, a, "fill", 1, cpu="1500m", annotations={})  # a holds no third task
    replicas(w, c, "pin-c", 1, cpu="1", annotations={})  # may not move: c stays, with room for one
    if d is not None:
        replicas(w, d, "pin-d", 1, cpu="1", annotations={})
    return w, a, b, c, d


CONFIG: dict[str, Any] = {"max_scale_in_fraction": 1.0, **UNDER}


def test_a_gang_member_is_not_moved_to_another_region_than_its_gang() -> None:
    w, _, b, _, _ = _west_gang(west_room=False)

    result = w.plan(**CONFIG)

    # before: b was drained, train-2 planned onto c in us-east-1 while train-0 and train-1 ran in us-west-2
    moved = [p for dr in result.drain for p in dr.pods if "/train-" in p]
    assert moved == [], result.drain
    code, reason = kept(result)[b]
    assert code == codes.DOES_NOT_FIT, reason
    assert "default/train-2" in reason and "default/train runs in us-west-2" in reason, reason
    assert "not split over regions" in reason, reason


def test_a_gang_member_moves_to_room_in_its_gangs_region() -> None:
    w, _, b, _, d = _west_gang(west_room=True)

    result = w.plan(**CONFIG)

    (drain,) = [dr for dr in result.drain if dr.node == b]
    assert drain.pods == ("default/train-2",)
    assert f"fit on {d}" in drain.reason, drain.reason


def test_an_elastic_gang_worker_with_room_only_in_another_region_is_given_up_not_moved_there() -> None:
    """Elastic job ``train`` (2 to 4 workers), a Volcano gang: w-0 and w-1 on a in us-west-2, w-2 on b;
    room only on c in us-east-1. The drain of b stays as it was (the job gives up a worker above its
    minimum), but the worker is not counted as re-placed on c, across regions from the rest of its job:
    it is given up, and comes back pending, to be placed in the gang's region."""
    w = World()
    a, b = w.group("cpu-west", "m5.2xlarge", region="us-west-2", nodes=2)
    (c,) = w.group("cpu-east", "m5.2xlarge", nodes=1)
    elastic_workers(w, a, ["w-0", "w-1"], cpu="3")
    elastic_workers(w, b, ["w-2"], cpu="3")
    for key in ("default/w-0", "default/w-1", "default/w-2"):
        w.join_gang(key, "volcano")
    w.pod_group(VOLCANO_PG, "train", spec={"minMember": 2}, phase="Running")
    replicas(w, a, "fill", 1, cpu="1500m", annotations={})
    replicas(w, c, "pin-c", 1, cpu="1", annotations={})

    result = w.plan(**CONFIG)

    (drain,) = [dr for dr in result.drain if dr.node == b]
    assert drain.pods == ("default/w-2",)
    # before: "its 1 pod(s) fit on <c>", the worker counted as running on in us-east-1
    assert "gives up 1 worker" in drain.reason and c not in drain.reason, drain.reason
    assert {job: s.workers for job, s in result.state.shrunk.items()} == {"KubeflowJob/default/train": 1}


def test_make_room_does_not_move_a_gang_member_to_another_region_than_its_gang() -> None:
    """As above, and a pending 7-CPU pod asks for us-west-2: b would hold it once train-2 moves, and
    the only room for train-2 is c, in us-east-1. Make room swapped b for the new node and planned
    train-2 onto c; now the pod gets a new node in us-west-2 and the job stays whole there."""
    w, _, b, _, _ = _west_gang(west_room=False)
    (big,) = w.pods(
        "big", 1, cpu="7", memory="1Gi", node_selector={"topology.kubernetes.io/region": "us-west-2"}
    )

    result = w.plan(**CONFIG)

    moved = [(dr.node, dr.code, p) for dr in result.drain for p in dr.pods if "/train-" in p]
    assert moved == [], result.drain  # before: [(b, make-room, default/train-2)]
    assert [(s.group, s.to_size - s.from_size) for s in result.scale_up] == [("cpu-west", 1)]
    assert {p.pod: p.node for p in result.placements}.get(big) != b


def test_a_one_zone_gang_member_moves_only_into_its_gangs_zone_even_in_one_region() -> None:
    """One region, two single-zone groups; the gang's pods ask for one zone (Kueue's required
    topology): train-0 and train-1 on a in us-east-1a, train-2 on b (also 1a); the only room is c, in
    us-east-1b. b stays, its reason naming the zone (before: train-2 planned onto c)."""
    w = World(regions=("us-east-1",))
    a, b = w.group("zone-a", "m5.2xlarge", nodes=2, zones=["us-east-1a"])
    (c,) = w.group("zone-b", "m5.2xlarge", nodes=1, zones=["us-east-1b"])
    w.node(c)["metadata"]["labels"]["topology.kubernetes.io/zone"] = "us-east-1b"
    w.pod_group(VOLCANO_PG, "train", spec={"minMember": 2}, phase="Running")
    _volcano_gang(w, a, ["train-0", "train-1"], cpu="3")
    _volcano_gang(w, b, ["train-2"], cpu="3")
    for name in ("train-0", "train-1", "train-2"):
        w.pod_item(f"default/{name}")["metadata"]["annotations"].update(ZONE_TOPOLOGY)
    replicas(w, a, "fill", 1, cpu="1500m", annotations={})
    replicas(w, c, "pin-c", 1, cpu="1", annotations={})

    result = w.plan(**CONFIG)

    assert [p for dr in result.drain for p in dr.pods if "/train-" in p] == [], result.drain
    code, reason = kept(result)[b]
    assert code == codes.DOES_NOT_FIT and "default/train runs in us-east-1a" in reason, reason


def test_a_gang_member_is_not_moved_into_a_region_while_the_rest_run_on_nodes_of_unknown_region() -> None:
    # train-0 and train-1 run on a node of no group whose labels name no region; b (us-west-2) holds
    # train-2 and is underutilized, c (us-east-1) has room for it. Where the rest run is unknown, so
    # any region could split the job: train-2 stays (before: moved to c, b drained)
    w = World()
    (b,) = w.group("cpu-west", "m5.2xlarge", region="us-west-2", nodes=1)
    (c,) = w.group("cpu-east", "m5.2xlarge", nodes=1)
    a = _unknown_region_node(w, "onprem-0")
    w.pod_group(VOLCANO_PG, "train", spec={"minMember": 2}, phase="Running")
    _volcano_gang(w, a, ["train-0", "train-1"], cpu="3")
    _volcano_gang(w, b, ["train-2"], cpu="3")
    replicas(w, c, "pin-c", 1, cpu="1", annotations={})

    result = w.plan(**CONFIG)

    assert [p for dr in result.drain for p in dr.pods if "/train-" in p] == [], result.drain
    code, reason = kept(result)[b]
    assert code == codes.DOES_NOT_FIT, reason
    assert "default/train runs only on nodes whose region is unknown" in reason, reason


def test_a_member_of_a_gang_over_two_regions_keeps_its_node_with_a_reason_that_does_not_deny_the_split() -> (
    None
):
    # train-0 runs on a (us-west-2), train-1 on e (eu-west-1), train-2 on b (us-west-2, underutilized);
    # only us-east-1's c has room: train-2 stays, and the reason names both regions without saying the
    # gang is not split over regions (before: "(a gang is not split over regions or zones)")
    w = World()
    a, b = w.group("cpu-west", "m5.2xlarge", region="us-west-2", nodes=2)
    (e,) = w.group("cpu-eu", "m5.2xlarge", region="eu-west-1", nodes=1)
    (c,) = w.group("cpu-east", "m5.2xlarge", nodes=1)
    w.pod_group(VOLCANO_PG, "train", spec={"minMember": 2}, phase="Running")
    _volcano_gang(w, a, ["train-0"], cpu="3")
    _volcano_gang(w, e, ["train-1"], cpu="3")
    _volcano_gang(w, b, ["train-2"], cpu="3")
    replicas(w, a, "fill-a", 1, cpu="4", annotations={})  # a holds no other task
    replicas(w, e, "fill-e", 1, cpu="4", annotations={})  # nor e
    replicas(w, c, "pin-c", 1, cpu="1", annotations={})

    result = w.plan(**CONFIG)

    assert [p for dr in result.drain for p in dr.pods if "/train-" in p] == [], result.drain
    code, reason = kept(result)[b]
    assert code == codes.DOES_NOT_FIT, reason
    assert (
        "whose gang default/train runs in eu-west-1, us-west-2: its members move there only (a gang is "
        "not split further)" in reason
    ), reason
