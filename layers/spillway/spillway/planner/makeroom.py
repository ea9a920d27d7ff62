"""Stage 4a: make room — give pending pods a node whose pods move, instead of launching one.

When this plan opens a new node in a group that consolidates (``when-underutilized``), and a busy node
of that group would be a consolidation candidate (underutilized, every pod on it may move, the saving
rule holds, the disruption budget allows it) whose pods the rest of the cluster holds, the plan swaps
the launch for a move: the node's pods are evicted (drain code ``make-room``, ``terminate`` false: the
drain uncordons the node once they are gone), the new node's pending pods are planned onto it, and the
group grows by one node less. Without it the pending pods wait for a boot while the underutilized node
waits to be consolidated later; with it they start as soon as the evictions are done, and one node is
never paid for.

Only new nodes whose every pod is a real pending pod are swapped (never a gang's nodes, which launch
together, a capacity buffer's room or a provisioning request's booking), and only onto a node of the
same group, whose template they were placed on. A swap counts against the group's disruption budget and
scale-in cap as a drain does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from spillway.model.cluster import PodInfo
from spillway.model.resources import PODS, Resources, add_into
from spillway.planner.consolidation import WHEN_UNDERUTILIZED, Candidate, mode
from spillway.planner.context import WorkNode
from spillway.planner.types import Placement

if TYPE_CHECKING:
    from spillway.planner.scaledown import ScaleDownStage


def make_room(stage: ScaleDownStage) -> bool:
    """Swap new nodes of this plan for moves where the saving rule allows; True if any was swapped
    (the scale-up actions must then be computed again)."""
    ctx = stage.ctx
    groups = [g for g in ctx.groups if ctx.new_nodes.get(g.name) and mode(ctx, g) == WHEN_UNDERUTILIZED]
    if not groups:
        return False
    new = _swappable(stage)
    if not new:
        return False
    judge = stage.consolidation()
    judge.reset_room()
    swapped = False
    for group in groups:
        candidates = sorted(judge.candidates(group.name), key=Candidate.order)
        for node_id in sorted(new.get(group.name, {}), key=_newest_first):
            pods = new[group.name][node_id]
            for candidate in candidates:
                if _holds(candidate, pods) and judge.swap(candidate) is None:
                    _move_placements(stage, candidate, node_id, pods, group.name)
                    candidates.remove(candidate)
                    swapped = True
                    break
    return swapped


def _newest_first(node_id: str) -> tuple[int, str]:
    tail = node_id.rsplit("-", 1)[-1]
    return (-int(tail) if tail.isdigit() else 0, node_id)


def _swappable(stage: ScaleDownStage) -> dict[str, dict[str, list[PodInfo]]]:
    """group -> new node id -> its pods, for new nodes that hold real pending pods only."""
    ctx = stage.ctx
    pending = {p.key: p for p in ctx.snapshot.pods if p.node_name is None}
    gang = {pod for pods in ctx.gang_pods.values() for pod in pods}
    out: dict[str, dict[str, list[PodInfo]]] = {}
    excluded: set[str] = set()
    for placement in ctx.placements:
        if "/new-" not in placement.node or placement.group is None:
            continue
        pod = pending.get(placement.pod)
        if pod is None or placement.pod in gang or placement.pod in ctx.buffer_pods:
            excluded.add(placement.node)
            continue
        out.setdefault(placement.group, {}).setdefault(placement.node, []).append(pod)
    return {g: {n: p for n, p in nodes.items() if n not in excluded} for g, nodes in out.items()}


def _holds(candidate: Candidate, pods: Sequence[PodInfo]) -> bool:
    """Does the candidate, its moved pods gone, hold all of ``pods``? (One node: requests add up.)"""
    room: Resources = dict(candidate.node.free)
    for pod in candidate.pods:  # what stays (DaemonSet pods) keeps its room
        add_into(room, pod.requests, 1)
    if PODS in room:
        room[PODS] += len(candidate.pods)
    need: Resources = {PODS: len(pods)} if PODS in room else {}
    for pod in pods:
        add_into(need, pod.requests, 1)
    return all(room.get(k, 0) >= v for k, v in need.items() if v > 0)


def _move_placements(
    stage: ScaleDownStage, candidate: Candidate, node_id: str, pods: Sequence[PodInfo], group: str
) -> None:
    """The pending pods go to the candidate instead of the new node; the group opens one node less."""
    ctx = stage.ctx
    keys = {p.key for p in pods}
    target = candidate.node.info.name
    ctx.placements[:] = [
        Placement(p.pod, target, p.group) if p.node == node_id else p for p in ctx.placements
    ]
    ctx.new_pods[group] = [p for p in ctx.new_pods.get(group, []) if p not in keys]
    ctx.new_nodes[group] -= 1
    candidate.node.receives += len(pods)
    _claim_room(candidate.node, pods)


def _claim_room(node: WorkNode, pods: Sequence[PodInfo]) -> None:
    for pod in pods:
        add_into(node.free, pod.requests, -1)
