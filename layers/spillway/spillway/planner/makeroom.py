"""Stage 4a: make room — give pending pods a node some of whose pods move, instead of launching one.

When this plan opens a new node in a group that consolidates (``when-underutilized``), and a busy node
of that group would hold the new node's pending pods once some of its own pods moved elsewhere, the plan
swaps the launch for the move: those pods are evicted (drain code ``make-room``, ``terminate`` false:
the drain uncordons the node once they are gone, and leaves every other pod running), the pending pods
are planned onto the node, and the group grows by one node less. Without it the pending pods wait for a
boot while free room lies scattered over busy nodes; with it they start once the evictions are done,
and one node is never paid for.

The pods moved are the fewest resources that cover what the node lacks (the smallest single pod that
covers it, else the largest first): each may move (:func:`spillway.planner.disruption.assess_move`; a
pod that may not stays where it is), their restart cost obeys the saving rule, an elastic job keeps its
minimum, and the rest of the cluster holds them (the consolidation's own fit, on the room of this plan:
:class:`spillway.planner.consolidation.Consolidation`, which make room and consolidation share). Of the
nodes that qualify, the cheapest move wins. The utilization threshold does not apply: it judges whether
a node is worth emptying, and make room empties none.

The plan remembers each node it makes room on (``State.rooms``: the node, its pending pods, since when).
While the drain still has the node cordoned (at most ``drain_claim_minutes``), a later plan places those
pods, while still pending, on that node (``making-room``) instead of scaling for them again: the
evicted pods take their grace period to leave, and a snapshot taken meanwhile shows the node cordoned
and still full. Once the node is released they are planned as any pending pod (the scheduler may have
given the room to another).

**Gangs.** A gang runs only once all of its pods do: room made for some of its workers while the others
wait for a boot saves no time and moves pods for nothing. So a gang's new nodes are swapped all or none
(after the pods of no gang): each gets a host as above, and if one finds none every move made for the
gang is undone (:meth:`Consolidation.checkpoint`) and the gang launches as planned. A gang the plan keeps
to one zone gets room in that zone only, and a gang given room is not recorded as launching.

Only new nodes whose every pod is a real pending pod are swapped (never a capacity buffer's room or a
provisioning request's booking), and only onto a node of the
same group, whose template they were placed on, that kube-scheduler would give them as it is: its labels
(a zone, what its kubelet added) pass their node selector and required affinity, they tolerate its
taints, and their pod topology (anti-affinity, spread, host ports) leaves it open to them. A swap counts
against the group's disruption budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from spillway.model.cluster import ZONE_LABEL, PodInfo
from spillway.model.resources import PODS, Resources, add_into, dominant_share
from spillway.model.state import RoomState
from spillway.planner import codes
from spillway.planner.classes import PodClass, new_class
from spillway.planner.consolidation import WHEN_UNDERUTILIZED, Candidate, mode
from spillway.planner.context import Context, WorkNode, aware, minutes
from spillway.planner.disruption import Move
from spillway.planner.topology import UNBOUNDED
from spillway.planner.types import PendingPod, Placement

if TYPE_CHECKING:
    from spillway.planner.consolidation import Consolidation
    from spillway.planner.scaledown import ScaleDownStage

NewNode = tuple[str, str, list[PodInfo]]  # a new node: its group, its id, its pods


def make_room(stage: ScaleDownStage) -> bool:
    """Swap new nodes of this plan for moves where the rules allow; True if any was swapped (the
    scale-up actions must then be computed again). Pods that are no gang's first, then each gang whole."""
    ctx = stage.ctx
    groups = [g for g in ctx.groups if ctx.new_nodes.get(g.name) and mode(ctx, g) == WHEN_UNDERUTILIZED]
    if not groups or ctx.cluster_unhealthy is not None:  # an unhealthy cluster moves no pod
        return False
    singles, gangs = _swappable(stage, {g.name for g in groups})
    if not singles and not gangs:
        return False
    judge = stage.consolidation()
    judge.reset_room()
    hosts = _Hosts(judge)
    swapped = False
    for group in groups:
        # (host, what the new node holds) found wanting: a burst opens many alike new nodes, and nothing
        # changes for them until a swap succeeds (each try fits the moved pods on a copy of the room)
        refused: set[tuple[str, Signature]] = set()
        for node_id in sorted(singles.get(group.name, {}), key=_newest_first):
            pods = singles[group.name][node_id]
            candidate = _swap_one(judge, hosts.of(group.name), pods, refused)
            if candidate is not None:
                _move_placements(stage, candidate, node_id, pods, group.name)
                hosts.of(group.name).remove(candidate.node)
                swapped = True
    for gang, nodes in sorted(gangs.items()):
        swapped = _swap_gang(stage, judge, hosts, gang, nodes) or swapped
    return swapped


class _Hosts:
    """Per group, the busy nodes that may still give room (:meth:`Consolidation.hosts`), found once."""

    def __init__(self, judge: Consolidation) -> None:
        self.judge = judge
        self.by_group: dict[str, list[WorkNode]] = {}

    def of(self, group: str) -> list[WorkNode]:
        if group not in self.by_group:
            self.by_group[group] = self.judge.hosts(group)
        return self.by_group[group]


def _swap_one(
    judge: Consolidation,
    hosts: Sequence[WorkNode],
    pods: Sequence[PodInfo],
    refused: set[tuple[str, Signature]],
) -> Candidate | None:
    """Make room for ``pods`` (one new node's) on the host whose move is cheapest and fits; the swapped
    candidate (its move committed in ``judge``), or None. Clears ``refused`` on a swap."""
    shape = _signature(pods)
    classes = _classes(judge.ctx, pods)
    options = []
    for node in hosts:
        skip = (node.info.name, shape) in refused or _refuses(classes, node)
        candidate = None if skip else _room_on(judge, node, pods)
        if candidate is None:
            refused.add((node.info.name, shape))
        else:
            options.append(candidate)
    for candidate in sorted(options, key=Candidate.order):
        if judge.swap(candidate) is None:
            refused.clear()
            return candidate
        refused.add((candidate.node.info.name, shape))
    return None


def _swap_gang(
    stage: ScaleDownStage, judge: Consolidation, hosts: _Hosts, gang: str, nodes: Sequence[NewNode]
) -> bool:
    """Every new node of ``gang`` swapped for room on busy nodes, or none: a gang runs only once all of
    its pods do, so room made for part of it while the rest boots saves nothing and moves pods for
    nothing. A gang this plan keeps to one zone gets room in that zone only."""
    ctx = stage.ctx
    mark = judge.checkpoint()
    done: list[tuple[Candidate, NewNode]] = []
    used: set[str] = set()
    refused: set[tuple[str, Signature]] = set()
    for entry in nodes:
        group, _, pods = entry
        zone = ctx.gang_zones.get((group, gang))
        free = [
            h
            for h in hosts.of(group)
            if h.info.name not in used and (zone is None or h.info.labels.get(ZONE_LABEL) == zone)
        ]
        candidate = _swap_one(judge, free, pods, refused)
        if candidate is None:
            judge.restore(mark)
            return False
        used.add(candidate.node.info.name)
        done.append((candidate, entry))
    for candidate, (group, node_id, pods) in done:
        _move_placements(stage, candidate, node_id, pods, group)
        hosts.of(group).remove(candidate.node)
        ctx.gang_nodes[(group, gang)] -= 1
        moved = {p.key for p in pods}
        ctx.gang_pods[(group, gang)] = [k for k in ctx.gang_pods.get((group, gang), []) if k not in moved]
    launch = ctx.gangs_out.get(gang)
    if launch is not None and launch.since == ctx.now:  # recorded for the launch this swap replaces
        del ctx.gangs_out[gang]
    return True


Signature = tuple[tuple[Any, ...], ...]


def _signature(pods: Sequence[PodInfo]) -> Signature:
    """What a make-room has to hold for these pods: their requests and constraints, in any order."""
    return tuple(sorted((p.scheduling_key() for p in pods), key=repr))


def _classes(ctx: Context, pods: Sequence[PodInfo]) -> list[tuple[PodClass, int]]:
    """The pods as classes (with their pod topology as it is now), and how many of each."""
    out: dict[tuple[Any, ...], tuple[PodClass, int]] = {}
    for pod in pods:
        key = pod.scheduling_key()
        cls, count = out.get(key) or (new_class(pod, domains=ctx.topology.domains(pod)), 0)
        out[key] = (cls, count + 1)
    return list(out.values())


def _refuses(classes: Sequence[tuple[PodClass, int]], node: WorkNode) -> bool:
    """Whether kube-scheduler would refuse one of the pods on ``node`` whatever moved off it: its node
    selector or required affinity, a taint it does not tolerate, or its pod topology (a domain closed to
    it, or more of it than the node may take). The new node they were placed on is the group's template;
    a real node of the group may carry other labels (its zone, what its kubelet added) and other pods."""
    info = node.info
    return any(
        cls.blocker(info.labels, info.taints, info.name) is not None or count > cls.domains.cap(info.name)
        for cls, count in classes
    )


def hold_rooms(ctx: Context) -> dict[str, RoomState]:
    """Pending pods an earlier plan made room for go to that node again (taken out of the demand);
    returns the rooms still being made, for the next state."""
    pending = {p.key: p for p in ctx.pending}
    kept: dict[str, RoomState] = {}
    for name, room in sorted(ctx.state.rooms.items()):
        node = _still_draining(ctx, name, room)
        waiting = [k for k in room.pods if k in pending]
        if node is None or not waiting:
            continue  # released (its room may be another pod's now), gone or too old: planned as any pod
        kept[name] = RoomState(pods=tuple(waiting), since=room.since)
        note = (
            f"a make-room drain planned {minutes(ctx.now - aware(room.since))} ago is emptying node {name} "
            "for it; waiting for its pods to leave"
        )
        ctx.record(waiting, name, node.group.name if node.group else None, note, codes.MAKING_ROOM)
        for key in waiting:
            del pending[key]
    ctx.pending[:] = [p for p in ctx.pending if p.key in pending]
    return kept


def _still_draining(ctx: Context, name: str, room: RoomState) -> WorkNode | None:
    """The node, while the make-room drain still has it cordoned and the claim has not lapsed."""
    node = ctx.nodes.get(name)
    if node is None or not node.info.ready or not node.info.cordoned_by_spillway:
        return None
    if ctx.now - aware(room.since) >= timedelta(minutes=ctx.config.drain_claim_minutes):
        return None
    return node


def _newest_first(node_id: str) -> tuple[int, str]:
    tail = node_id.rsplit("-", 1)[-1]
    return (-int(tail) if tail.isdigit() else 0, node_id)


def _swappable(
    stage: ScaleDownStage, consolidating: set[str]
) -> tuple[dict[str, dict[str, list[PodInfo]]], dict[str, list[NewNode]]]:
    """The new nodes that hold real pending pods only: group -> node id -> pods for pods of no gang, and
    gang -> its new nodes, for gangs whose every new node is in a group that consolidates."""
    ctx = stage.ctx
    gang_of = {pod: gang for (_, gang), pods in ctx.gang_pods.items() for pod in pods}
    singles: dict[str, dict[str, list[PodInfo]]] = {}
    gangs: dict[str, list[NewNode]] = {}
    for group, node_id, pods in _new_nodes(stage):
        gang = gang_of.get(pods[0].key)
        if gang is None:
            singles.setdefault(group, {})[node_id] = pods
        else:
            gangs.setdefault(gang, []).append((group, node_id, pods))
    opened: dict[str, int] = {}  # gang -> its new nodes, in every group
    for (group, gang), count in ctx.gang_nodes.items():
        opened[gang] = opened.get(gang, 0) + (count if group in consolidating else UNBOUNDED)
    whole = {
        gang: sorted(nodes, key=lambda n: (n[0], _newest_first(n[1])))
        for gang, nodes in gangs.items()
        if len(nodes) == opened.get(gang)  # every one of them may be swapped
    }
    return {g: n for g, n in singles.items() if g in consolidating}, whole


def _new_nodes(stage: ScaleDownStage) -> list[NewNode]:
    """This plan's new nodes whose every pod is a real pending pod (no capacity buffer's virtual pod, no
    provisioning request's booking): (group, node id, pods)."""
    ctx = stage.ctx
    pending = {p.key: p for p in ctx.snapshot.pods if p.node_name is None}
    by_node: dict[str, NewNode] = {}
    excluded: set[str] = set()
    for placement in ctx.placements:
        if "/new-" not in placement.node or placement.group is None:
            continue
        pod = pending.get(placement.pod)
        if pod is None or placement.pod in ctx.buffer_pods:
            excluded.add(placement.node)
        else:
            by_node.setdefault(placement.node, (placement.group, placement.node, []))[2].append(pod)
    return [entry for node_id, entry in by_node.items() if node_id not in excluded]


def _needs(pods: Sequence[PodInfo], free: Resources) -> Resources:
    """What ``pods`` need beyond ``free`` (one node: requests add up), per resource; empty if they fit."""
    need: Resources = {PODS: len(pods)} if PODS in free else {}
    for pod in pods:
        add_into(need, pod.requests, 1)
    return {k: v - free.get(k, 0) for k, v in need.items() if v > free.get(k, 0)}


def _covers(pods: Sequence[PodInfo], lack: Resources) -> bool:
    got: Resources = {PODS: len(pods)} if PODS in lack else {}
    for pod in pods:
        add_into(got, pod.requests, 1)
    return all(got.get(k, 0) >= v for k, v in lack.items())


def _room_on(judge: Consolidation, node: WorkNode, pods: Sequence[PodInfo]) -> Candidate | None:
    """The cheapest move that lets ``node`` hold ``pods``, as a candidate; None if no such move obeys
    the rules (where the moved pods go is checked later, by the swap)."""
    lack = _needs(pods, node.free)
    if not lack:
        return None  # they fit already: the scale-up would have placed them here
    movable = [(p, m) for p, m in judge.moves(node) if m.movable]
    chosen = _victims(movable, lack, node)
    if chosen is None:
        return None
    candidate = Candidate.of(node, chosen, judge.restart_cost(node, chosen))
    if judge.refuse_move(candidate):
        return None
    return candidate


def _victims(
    movable: list[tuple[PodInfo, Move]], lack: Resources, node: WorkNode
) -> list[tuple[PodInfo, Move]] | None:
    """The pods to move: the smallest one that covers ``lack`` alone, else the largest first until
    covered (None if all of them do not)."""
    alloc = node.info.allocatable

    def size(item: tuple[PodInfo, Move]) -> tuple[float, float, str]:
        return (dominant_share(item[0].requests, alloc)[1], item[1].cost, item[0].key)

    singles = [item for item in movable if _covers([item[0]], lack)]
    if singles:
        return [min(singles, key=size)]
    chosen: list[tuple[PodInfo, Move]] = []
    for item in sorted(movable, key=size, reverse=True):
        chosen.append(item)
        if _covers([p for p, _ in chosen], lack):
            return chosen
    return None


def _move_placements(
    stage: ScaleDownStage, candidate: Candidate, node_id: str, pods: Sequence[PodInfo], group: str
) -> None:
    """The pending pods go to the candidate's node instead of the new node (whose room its moved pods
    leave); the group opens one node less."""
    ctx, node = stage.ctx, candidate.node
    for pod in candidate.pods:
        add_into(node.free, pod.requests, 1)
    keys = {p.key for p in pods}
    target = node.info.name
    ctx.placements[:] = [
        Placement(p.pod, target, p.group) if p.node == node_id else p for p in ctx.placements
    ]
    ctx.new_pods[group] = [p for p in ctx.new_pods.get(group, []) if p not in keys]
    ctx.new_nodes[group] -= 1
    node.receives += len(pods)
    for pod in pods:
        add_into(node.free, pod.requests, -1)
    stage.rooms[target] = RoomState(pods=tuple(sorted(keys)), since=ctx.now)
    note = f"make room: node {target} is given to it once {len(candidate.pods)} of its pod(s) move"
    ctx.pending_out.extend(PendingPod(p.key, note, codes.MAKING_ROOM) for p in pods)
