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
pod that may not stays where it is, and a pod already terminating whose grace period ends later than
:data:`~spillway.planner.disruption.LEAVING_WITHIN` or the drains' deadline is one: its room is not
counted on), each leaves within ``LEAVING_WITHIN`` (a pod the drain evicts is given its
``terminationGracePeriodSeconds``, up to the drain's deadline, and may take all of it:
:func:`~spillway.planner.disruption.evicted_late`), their restart cost obeys the saving rule, an elastic
job keeps its minimum, and the rest of the cluster holds them (the consolidation's own fit, on the room
of this plan: :class:`spillway.planner.consolidation.Consolidation`, which make room and consolidation
share). Of the
nodes that qualify, the cheapest move wins. The utilization threshold does not apply: it judges whether
a node is worth emptying, and make room empties none.

The plan remembers each node it makes room on (``State.rooms``: the node, its pending pods, since when).
While the drain still has the node cordoned (at most ``drain_claim_minutes``), a later plan places those
pods, while still pending, on that node (``making-room``) instead of scaling for them again: the
evicted pods take their grace period to leave, and a snapshot taken meanwhile shows the node cordoned
and still full. Their room is charged to the node while it is held (no other pending pod is given it,
nor the node uncordoned for one); a room whose pods are all bound or gone is forgotten. Once the node
is released they are planned as any pending pod (the scheduler may have given the room to another).

**Gangs.** A gang's new nodes are swapped one by one as any other: each swap saves a node whether or
not the rest of the gang must still boot (on the Philly trace's first 20,000 jobs, half of them
movable and their multi-pod jobs labelled as gangs, swapping only whole gangs cost 1 % more node-hours
than this, at the same waiting). The gang launches one node less for each (its atomic launch is
recorded again from the actions after make room), and a gang the plan keeps to one zone gets room in
that zone only. While a coscheduling gang whose PodGroup sets ``minResources`` is planned, the plan
makes no room: scale-up counted the room of the plan's new nodes, and of the nodes moved pods would
fill, toward what coscheduling asks the cluster to have free (:mod:`spillway.planner.minresources`),
and a swap takes room away without opening any.

Only new nodes whose every pod is a real pending pod are swapped (never a capacity buffer's room or a
provisioning request's booking), and only onto a node of the same group, whose template they were
placed on, that kube-scheduler would give them as it is: its labels (a zone, what its kubelet added)
pass their node selector and required affinity, they tolerate its taints, and their pod topology
(anti-affinity, spread, host ports) leaves it open to them. A swap counts against the group's
disruption budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from spillway.model.cluster import ZONE_LABEL, PodInfo
from spillway.model.groupkey import GroupKey
from spillway.model.resources import (
    PODS,
    Resources,
    add_into,
    add_room,
    attach_limit_key,
    dominant_share,
    unchecked_when_unknown,
)
from spillway.model.state import RoomState
from spillway.planner import codes
from spillway.planner.classes import PodClass, new_class
from spillway.planner.consolidation import WHEN_UNDERUTILIZED, Candidate, mode
from spillway.planner.context import ONE_POD, Context, WorkNode, aware, minutes
from spillway.planner.disruption import Move, evicted_late, room_behind_others, waits_for_others
from spillway.planner.types import PendingPod, Placement

if TYPE_CHECKING:
    from spillway.planner.consolidation import Consolidation
    from spillway.planner.scaledown import ScaleDownStage


def make_room(stage: ScaleDownStage) -> bool:
    """Swap new nodes of this plan for moves where the rules allow; True if any was swapped (the
    scale-up actions must then be computed again)."""
    ctx = stage.ctx
    groups = [g for g in ctx.groups if ctx.new_nodes.get(g.key) and mode(ctx, g) == WHEN_UNDERUTILIZED]
    if not groups or ctx.cluster_unhealthy is not None:  # an unhealthy cluster moves no pod
        return False
    if ctx.min_room_slack:  # a gang's minResources counts this plan's room (module docstring, Gangs)
        return False
    new = _swappable(stage)
    if not new:
        return False
    judge = stage.consolidation()
    judge.reset_room()
    gang_of = {pod: gang for (_, gang), pods in ctx.gang_pods.items() for pod in pods}
    swapped = False
    for group in groups:
        swapped = _swap_group(stage, judge, group.key, new.get(group.key, {}), gang_of) or swapped
    return swapped


def _swap_group(
    stage: ScaleDownStage,
    judge: Consolidation,
    group: GroupKey,
    new: Mapping[str, list[PodInfo]],
    gang_of: Mapping[str, str],
) -> bool:
    """Swap the group's new nodes (id -> pods), newest first, onto busy nodes of the group."""
    ctx = stage.ctx
    hosts = judge.hosts(group)
    # (host, what the new node holds) found wanting: a burst opens many alike new nodes, and nothing
    # changes for them until a swap succeeds (each try fits the moved pods on a copy of the room)
    refused: set[tuple[str, Signature]] = set()
    swapped = False
    for node_id in sorted(new, key=_newest_first):
        pods = new[node_id]
        gang = gang_of.get(pods[0].key)  # a gang's new nodes hold its pods only
        zone = ctx.gang_zones.get((group, gang)) if gang is not None else None
        options = [h for h in hosts if zone is None or h.info.labels.get(ZONE_LABEL) == zone]
        candidate = _swap_one(judge, options, pods, refused)
        if candidate is None:
            continue
        _move_placements(stage, candidate, node_id, pods, group)
        hosts.remove(candidate.node)
        if gang is not None:
            _one_node_less(ctx, group, gang, pods)
        swapped = True
    return swapped


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


def _one_node_less(ctx: Context, group: GroupKey, gang: str, pods: Sequence[PodInfo]) -> None:
    """A gang's new node swapped: the gang launches one node less in ``group`` (its atomic launch is
    recorded again from the actions computed after make room)."""
    ctx.gang_nodes[(group, gang)] -= 1
    moved = {p.key for p in pods}
    ctx.gang_pods[(group, gang)] = [k for k in ctx.gang_pods.get((group, gang), []) if k not in moved]


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
    it, or more of it than the node or its zone may take). The new node they were placed on is the
    group's template; a real node of the group may carry other labels (its zone, what its kubelet added)
    and other pods."""
    info = node.info
    return any(
        cls.blocker(info.labels, info.taints, info.name) is not None
        or count > min(cls.domains.cap(info.name), cls.room_in(info.labels))
        for cls, count in classes
    )


def hold_rooms(ctx: Context) -> dict[str, RoomState]:
    """Pending pods an earlier plan made room for go to that node again (taken out of the demand, and
    charged to the node's free room: :func:`_charge`); returns the rooms still being made, for the next
    state. A pod kube-scheduler has nominated to a node since (``Context.nominated``: it preempted there
    while the room was being made) is that node's, charged there by scale-up, and is not held here too."""
    pending = {p.key: p for p in ctx.pending}
    nominated = {p.key for p in ctx.nominated}
    kept: dict[str, RoomState] = {}
    for name, room in sorted(ctx.state.rooms.items()):
        node = _still_draining(ctx, name, room)
        waiting = [k for k in room.pods if k in pending and k not in nominated]
        if node is None or not waiting:
            continue  # released (its room may be another pod's now), gone or too old: planned as any pod
        kept[name] = RoomState(pods=tuple(waiting), since=room.since, moved=room.moved)
        note = (
            f"a make-room drain planned {minutes(ctx.now - aware(room.since))} ago is emptying node {name} "
            "for it; waiting for its pods to leave"
        )
        ctx.record(waiting, name, node.group.key if node.group else None, note, codes.MAKING_ROOM)
        _charge(ctx, node, [pending.pop(key) for key in waiting])
    ctx.pending[:] = [p for p in ctx.pending if p.key in pending]
    return kept


def _charge(ctx: Context, node: WorkNode, pods: Sequence[PodInfo]) -> None:
    """The room held on ``node`` is its pods': what they take comes off its free room (their requests,
    a volume they share or the node has counted once, a pod slot each), and the node receives them, as
    when the plan made the room (:func:`_move_placements`). Otherwise the node, emptied and still
    cordoned by the drain, showed its room free, and a plan gave it to another pending pod (uncordoned
    it for that pod, which kube-scheduler then binds there) while the pods it was made for still came."""
    add_room(node.free, ctx.arriving_share(pods, node.info.name), -1)
    if PODS in node.free:
        node.free[PODS] -= len(pods) * ONE_POD
    node.receives += len(pods)
    for pod in pods:
        ctx.note_volumes(node.info.name, pod.volumes)


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


def _swappable(stage: ScaleDownStage) -> dict[GroupKey, dict[str, list[PodInfo]]]:
    """group -> new node id -> its pods, for new nodes that hold real pending pods only (no capacity
    buffer's virtual pod, no provisioning request's booking)."""
    ctx = stage.ctx
    pending = {p.key: p for p in ctx.snapshot.pods if p.node_name is None}
    out: dict[GroupKey, dict[str, list[PodInfo]]] = {}
    excluded: set[tuple[GroupKey, str]] = set()  # a new node's id is its group's own
    for placement in ctx.placements:
        if "/new-" not in placement.node or placement.group is None:
            continue
        pod = pending.get(placement.pod)
        if pod is None or placement.pod in ctx.buffer_pods:
            excluded.add((placement.group, placement.node))
            continue
        out.setdefault(placement.group, {}).setdefault(placement.node, []).append(pod)
    return {g: {n: p for n, p in nodes.items() if (g, n) not in excluded} for g, nodes in out.items()}


def _needs(ctx: Context, pods: Sequence[PodInfo], node: WorkNode, moved: Sequence[PodInfo] = ()) -> Resources:
    """What ``pods`` need beyond ``node``'s free room once its bound pods ``moved`` have left it, per
    resource; empty if they fit. Their requests add up, a volume they share counts once
    (:meth:`Context.arriving_share`) and a volume a pod staying on the node uses counts none: kube-
    scheduler takes the node's volumes out of a pod's new ones (nodevolumelimits/csi.go, Filter). The
    moved pods give back their requests less a volume a pod staying there keeps attached
    (:meth:`Context.leaving_share`). A resource checked only where reported that the node does not
    report (a CSI driver's attach limit its CSINode gives no count for) is never lacking: the node
    takes any amount of it."""
    free = dict(node.free)
    add_into(free, ctx.leaving_share(moved), 1)
    need: Resources = {}
    if PODS in node.free:
        need[PODS] = len(pods) * ONE_POD
        free[PODS] += len(moved) * ONE_POD
    add_into(need, ctx.arriving_share(pods), 1)
    add_into(need, _kept_there(ctx, pods, node.info.name, moved), -1)
    return {
        k: v - free.get(k, 0)
        for k, v in need.items()
        if v > free.get(k, 0) and (k in node.free or not unchecked_when_unknown(k))
    }


def _kept_there(ctx: Context, pods: Sequence[PodInfo], name: str, moved: Sequence[PodInfo]) -> Resources:
    """One of each attach limit for each volume of ``pods`` that a pod of node ``name`` other than the
    ``moved`` ones uses (or a VolumeAttachment holds there): it is the node's, no new one."""
    out: Resources = {}
    for volume in {v for pod in pods for v in pod.volumes}:
        users = ctx.volume_users.get((name, volume), 0) - sum(volume in p.volumes for p in moved)
        if users > 0:
            key = attach_limit_key(volume.partition("/")[0])
            out[key] = out.get(key, 0) + 1000
    return out


def _room_on(judge: Consolidation, node: WorkNode, pods: Sequence[PodInfo]) -> Candidate | None:
    """The cheapest move that lets ``node`` hold ``pods``, as a candidate; None if no such move obeys
    the rules (where the moved pods go is checked later, by the swap)."""
    if not _needs(judge.ctx, pods, node):
        return None  # they fit already: the scale-up would have placed them here
    # a pod the drain evicts must leave as soon as a new node would be Ready (a terminating one: assess_move)
    deadline = judge.ctx.config.drain_deadline_seconds
    movable = [
        (p, m)
        for p, m in judge.moves_alone(node)
        if m.movable and (p.terminating or evicted_late(p, deadline) is None)
    ]
    chosen = _victims_in_time(judge.ctx, movable, pods, node)
    if chosen is None:
        return None
    candidate = Candidate.of(node, chosen, judge.restart_cost(node, chosen))
    if judge.refuse_move(candidate):
        return None
    return candidate


def _victims_in_time(
    ctx: Context, movable: list[tuple[PodInfo, Move]], pods: Sequence[PodInfo], node: WorkNode
) -> list[tuple[PodInfo, Move]] | None:
    """:func:`_victims` whose drain can give each its whole grace. A make room's drain evicts only the
    pods it moves and leaves the others running (``spillway.act.drain._only_expected``), so a critical
    pod it moves waits only for the other pods it moves (:func:`~spillway.planner.disruption
    .waits_for_others` of the chosen, not of the whole node's as consolidation's :meth:`~spillway.planner
    .consolidation.Consolidation.moves` judges them: a pod that stays held no critical pod back). A
    critical pod whose wait for the chosen others is too long for its grace, or makes its room come later
    than a new node's (:func:`~spillway.planner.disruption.room_behind_others`), is left out and the pods
    chosen again."""
    deadline = ctx.config.drain_deadline_seconds
    chosen = _victims(ctx, movable, pods, node)
    while chosen is not None:
        late = {p.key for p, m in waits_for_others(chosen, ctx.now, deadline) if not m.movable}
        late |= room_behind_others(chosen, ctx.now, deadline)
        if not late:
            return chosen
        movable = [(p, m) for p, m in movable if p.key not in late]
        chosen = _victims(ctx, movable, pods, node)
    return None


def _victims(
    ctx: Context, movable: list[tuple[PodInfo, Move]], pods: Sequence[PodInfo], node: WorkNode
) -> list[tuple[PodInfo, Move]] | None:
    """The pods to move: the smallest one whose leaving alone lets ``node`` hold ``pods``, else the
    largest first until it does (None if all of them do not)."""
    alloc = node.info.allocatable

    def size(item: tuple[PodInfo, Move]) -> tuple[float, float, str]:
        return (dominant_share(item[0].requests, alloc)[1], item[1].cost, item[0].key)

    singles = [item for item in movable if not _needs(ctx, pods, node, [item[0]])]
    if singles:
        return [min(singles, key=size)]
    chosen: list[tuple[PodInfo, Move]] = []
    for item in sorted(movable, key=size, reverse=True):
        chosen.append(item)
        if not _needs(ctx, pods, node, [p for p, _ in chosen]):
            return chosen
    return None


def _move_placements(
    stage: ScaleDownStage, candidate: Candidate, node_id: str, pods: Sequence[PodInfo], group: GroupKey
) -> None:
    """The pending pods go to the candidate's node instead of the new node (whose room its moved pods
    leave); the group opens one node less."""
    ctx, node = stage.ctx, candidate.node
    target = node.info.name
    add_room(node.free, ctx.leaving_share(candidate.pods), 1)
    for pod in candidate.pods:
        ctx.volumes_left(target, pod.volumes)
    keys = {p.key for p in pods}
    ctx.placements[:] = [
        Placement(p.pod, target, p.group) if (p.group, p.node) == (group, node_id) else p
        for p in ctx.placements
    ]
    ctx.new_pods[group] = [p for p in ctx.new_pods.get(group, []) if p not in keys]
    ctx.new_nodes[group] -= 1
    node.receives += len(pods)
    add_room(node.free, ctx.arriving_share(pods, target), -1)
    for pod in pods:
        ctx.note_volumes(target, pod.volumes)
    moved = tuple(
        sorted(p.key for p in candidate.pods)
    )  # only these leave the node (ScaleDownStage.leaving_pods)
    stage.rooms[target] = RoomState(pods=tuple(sorted(keys)), since=ctx.now, moved=moved)
    note = f"make room: node {target} is given to it once {len(candidate.pods)} of its pod(s) move"
    ctx.pending_out.extend(PendingPod(p.key, note, codes.MAKING_ROOM) for p in pods)
