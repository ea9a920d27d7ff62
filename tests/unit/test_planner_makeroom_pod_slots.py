"""Make room must count pod slots in the unit the node's free room uses (milli-units: one pod, 1000)."""

from __future__ import annotations

from plan_world import World
from test_planner_consolidation import MOVABLE, UNDER

from spillway.planner import codes

CPU_POOL = {"pool": "cpu"}


def test_make_room_counts_the_pod_slots_the_pending_pods_take() -> None:
    """Node ``a`` (m5.2xlarge: 7910m CPU, 58 pods allocatable) runs 57 pods: one movable 3500m replica
    and 56 pods of 70m that may not move, so 490m and one pod slot are free. Three pending 1-CPU pods
    (selected to a's group) need 3 CPU and three slots: none fits as a is, so the plan opens a node for
    them. Moving the replica (to the other group's node) frees 3.5 CPU and one slot: a then has 2 slots
    for 3 pods, and kube-scheduler's NodeResourcesFit ("Too many pods": a node
    takes at most ``status.allocatable.pods`` pods) binds only two of them; the third waits for a node
    that this plan, having swapped its launch away, never opens.

    The rule: every pod takes one of the node's ``pods`` slots (kube-scheduler's noderesources fit,
    ``len(nodeInfo.Pods)+1 > allowedPodNumber``), and the planner keeps that slot in milli-units
    (``spillway.planner.context.ONE_POD`` = 1000, ``WorkNode.free["pods"]``). ``makeroom._needs`` adds
    ``len(pods)`` (3) against a free room of 1000 (one slot), so the three pods look as if they had slots
    to spare and the move is planned. The correct plan launches a node for them instead."""
    w = World(regions=("us-east-1",))
    (a,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10, labels=CPU_POOL)
    w.group("other", "m5.2xlarge", nodes=1, max_size=10)  # room for the moved replica
    w.pods(
        "mover", 1, cpu="3500m", memory="1Gi", node_name=a, owner=("ReplicaSet", "mover"), annotations=MOVABLE
    )
    w.pods("tiny", 56, cpu="70m", memory="10Mi", node_name=a, owner=("ReplicaSet", "tiny"), annotations={})
    pending = w.pods("job", 3, cpu="1", memory="1Gi", node_selector=CPU_POOL)

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    room = [d for d in result.drain if d.code == codes.MAKE_ROOM]
    placed_on_a = [p.pod for p in result.placements if p.node == a and p.pod in pending]
    assert room == [] and placed_on_a == [], (room, placed_on_a)
    assert [(s.group, s.to_size - s.from_size) for s in result.scale_up] == [("cpu", 1)]
