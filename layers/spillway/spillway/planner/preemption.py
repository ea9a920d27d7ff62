"""Preemption: a pending pod takes the room of running expendable pods of lower priority.

cluster-autoscaler scales up on a snapshot without the scheduled pods below its
``--expendable-pods-priority-cutoff`` (FilterOutExpendablePods in core/utils/expendable.go):
kube-scheduler preempts them for a pod of higher priority, so a pod that fits once they are gone needs
no new node. kube-scheduler's DefaultPreemption preempts only for a pod whose ``preemptionPolicy`` is not
``Never``, takes only pods of lower priority than the preemptor, all on one node, and holds
PodDisruptionBudgets as a preference only: it takes every pod of lower priority away, then gives back
(reprieves) one at a time the pods a budget protects first, then the others, highest priority first,
each one the preemptor still fits without; a protected pod is preempted when nothing else makes room.

Here only after free room (kube-scheduler preempts only when no node fits the pod as it is), and
only the expendable pods of the node (:attr:`~spillway.planner.context.WorkNode.victims`): the room of
other pods of lower priority is not counted, as cluster-autoscaler does not count it. A class's pods
go, first fit, to a node whose free room plus its victims of lower priority hold them; the victims are
chosen as kube-scheduler chooses them for those pods and leave the node's list for good, their room
becoming free room less what the preemptors take. So no pod of the plan takes one pod's room twice,
and what a preempted pod leaves beyond its preemptor is free room for the pods placed after.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from spillway.model.resources import (
    ATTACH_LIMIT_PREFIX,
    Resources,
    add_room,
    fit_count,
    unchecked_when_unknown,
)
from spillway.planner import codes
from spillway.planner.classes import PodClass
from spillway.planner.context import Context, Victim, WorkNode
from spillway.planner.placement import FREE_ROOM_NOTE, Pool, TrialFit

SHOWN = 3  # victims a reason names; the rest are counted


@dataclass(slots=True)
class VictimPool:
    """The nodes of one :class:`Pool` (one shape) that run victims, in the pool's order, and a ceiling on
    their room: per resource, at least what any of them would have with every victim gone. That room
    never grows while the scale-up stage places pods: free room placements and nominated pods take from
    it, and a preemption only turns victims' room into free room less what its preemptors take; a trial
    that is undone puts back a state from after the ceiling was taken. So a class one pod of which does
    not fit in the ceiling fits on none of the nodes, whatever its priority, and the pool is passed over
    whole. Attach limits are left out (any amount fits): a victim's share of one grows when another pod
    using its volume leaves the node (:meth:`Context.share_victims`)."""

    pool: Pool
    nodes: list[WorkNode]
    ceiling: Resources


def victim_pools(pool_list: Iterable[Pool]) -> list[VictimPool]:
    """The pools' nodes with victims, pool by pool in the pools' order, with their ceilings."""
    out = []
    for pool in pool_list:
        nodes = [n for n in pool.nodes if n.victims]
        if nodes:
            out.append(VictimPool(pool, nodes, ceiling_of(nodes)))
    return out


def ceiling_of(nodes: Sequence[WorkNode]) -> Resources:
    """Per resource, the most room any of ``nodes`` has with all its victims gone, but attach limits
    (:class:`VictimPool`). A resource checked only where reported that one of them does not report is
    left out too: that node takes any amount."""
    ceiling: Resources = {}
    for node in nodes:
        room = dict(node.free)
        for victim in node.victims:
            add_room(room, victim.requests)
        for name, value in room.items():
            if value > ceiling.get(name, value - 1):
                ceiling[name] = value
    for name in [n for n in ceiling if unchecked_when_unknown(n)]:
        if name.startswith(ATTACH_LIMIT_PREFIX) or any(name not in node.free for node in nodes):
            del ceiling[name]
    return ceiling


def room_below(node: WorkNode, priority: int) -> Resources:
    """The node's free room plus the room of its victims of lower priority than ``priority``."""
    room = dict(node.free)
    for victim in node.victims:
        if victim.priority < priority:
            add_room(room, victim.requests)
    return room


def one_fits_below(node: WorkNode, requests: Resources, priority: int) -> bool:
    """Whether one pod of ``requests`` fits in :func:`room_below` (``fit_count(requests,
    room_below(node, priority), 1) > 0``), found without building that room: a class passes over
    every node with victims, and most take none of it (it is placed where it fits first)."""
    for name, want in requests.items():
        if want <= 0:
            continue
        have = node.free.get(name)
        if have is None and unchecked_when_unknown(name):
            continue  # not reported by the node: any amount fits, with or without victims
        room = have or 0  # none reported, and no victim's: 0, which takes no pod
        for victim in node.victims:
            if victim.priority < priority:
                room += victim.requests.get(name, 0)
        if room < want:
            return False
    return True


def choose_victims(node: WorkNode, requests: Resources, count: int, priority: int) -> list[Victim]:
    """The victims kube-scheduler takes on ``node`` for ``count`` pods of ``requests`` at ``priority``
    (SelectVictimsOnNode): every one of lower priority away, then each given back, those a budget
    protects first, then highest priority first, while the pods still fit without it."""
    candidates = [v for v in node.victims if v.priority < priority]
    room = room_below(node, priority)
    victims: list[Victim] = []
    for victim in sorted(candidates, key=lambda v: (not v.guarded, -v.priority, v.pod)):
        add_room(room, victim.requests, -1)
        if fit_count(requests, room, count) < count:
            add_room(room, victim.requests)
            victims.append(victim)
    return sorted(victims, key=lambda v: (v.priority, v.pod))


def place_by_preemption(
    ctx: Context, cls: PodClass, pools: Iterable[VictimPool], where: Callable[[WorkNode], bool]
) -> None:
    """The class's remaining pods, first fit, on the schedulable nodes with victims (``pools``; only
    those ``where`` admits) whose free room plus their victims of lower priority hold them; nothing for
    a class that may not preempt. A pool whose ceiling does not hold one pod, or whose shape the class's
    constraints rule out, has none of its nodes looked at: none would take a pod."""
    if not cls.preempts:
        return
    least = cls.least_requests
    for victims in pools:
        if not cls.remaining:
            return
        if fit_count(least, victims.ceiling, 1) == 0 or _shape_ruled_out(cls, victims.nodes[0]):
            continue
        for node in victims.nodes:
            if not cls.remaining:
                return
            if where(node):
                _place_on(ctx, cls, victims.pool, node)


def _shape_ruled_out(cls: PodClass, node: WorkNode) -> bool:
    """Whether the class's constraints keep it off every node of ``node``'s shape (one that names a
    node is judged node by node, by :func:`_limit`)."""
    info = node.info
    return not cls.node_specific and cls.blocker(info.labels, info.taints, info.name) is not None


def _place_on(ctx: Context, cls: PodClass, pool: Pool, node: WorkNode) -> None:
    """As many of the class's remaining pods as ``node`` takes by preemption."""
    requests = cls.requests_on(node.info.name)
    if not one_fits_below(node, requests, cls.preempts_below):
        return  # not one pod, even with every victim of lower priority gone: nothing to do here
    limit = _limit(cls, node)
    count = fit_count(requests, room_below(node, cls.preempts_below), limit)
    if count > 0:
        _preempt_on(ctx, cls, node, count, limit)
        pool.widen(node)


def _preempt_on(ctx: Context, cls: PodClass, node: WorkNode, count: int, limit: int) -> None:
    """``count`` pods of the class on ``node``, at most ``limit`` of them there (:func:`_limit`). The
    first brings the node the volumes the class's pods share that it has not got, and the others find
    them there: it is placed alone first, and the others as the room left takes them."""
    if cls.brings_volumes(node.info.name):
        _take(ctx, cls, node, 1)
        count = fit_count(cls.requests_on(node.info.name), room_below(node, cls.preempts_below), limit - 1)
    if count > 0:
        _take(ctx, cls, node, count)


def trial_by_preemption(trial: TrialFit, cls: PodClass, nodes: Iterable[WorkNode]) -> None:
    """As :func:`place_by_preemption`, in a :class:`TrialFit` (a ProvisioningRequest's booking): the
    class's remaining pods, first fit, on the ``nodes`` whose victims of lower priority make room."""
    if not cls.preempts:
        return
    for node in nodes:
        if not cls.remaining:
            return
        count = _fits(cls, node) if node.victims else 0
        if count > 0:
            trial.preempt(
                cls,
                node,
                count,
                choose_victims(node, cls.requests_on(node.info.name), count, cls.preempts_below),
            )


def _fits(cls: PodClass, node: WorkNode) -> int:
    """How many of the class's remaining pods the node takes once its victims of lower priority go."""
    limit = _limit(cls, node)
    return (
        fit_count(cls.requests_on(node.info.name), room_below(node, cls.preempts_below), limit)
        if limit > 0
        else 0
    )


def _limit(cls: PodClass, node: WorkNode) -> int:
    """How many of the class's remaining pods the node may take, room aside (0: none)."""
    info = node.info
    if cls.blocker(info.labels, info.taints, info.name) is not None or cls.domains.marks.repels(node.marks):
        return 0
    return max(0, min(cls.remaining, cls.domains.cap(info.name), cls.room_in(info.labels)))


def _take(ctx: Context, cls: PodClass, node: WorkNode, count: int) -> None:
    """``count`` pods of the class go on ``node``, preempting the victims they need there."""
    requests = cls.requests_on(node.info.name)
    victims = choose_victims(node, requests, count, cls.preempts_below)
    for victim in victims:
        node.victims.remove(victim)
        add_room(node.free, victim.requests)
        ctx.volumes_left(node.info.name, victim.volumes)
    add_room(node.free, requests, -count)
    ctx.note_volumes(node.info.name, cls.volumes, count)
    node.receives += count
    node.marks = node.marks | cls.domains.marks
    cls.note_placed(node.info.labels, count)
    name = node.info.name
    group = node.group.key if node.group else None
    if not victims:  # the room a victim left to an earlier pod of the plan: free room now
        ctx.record(cls.take(count), name, group, FREE_ROOM_NOTE.format(node=name), codes.FITS_FREE_ROOM)
        return
    ctx.record(cls.take(count), name, group, preemption_note(name, victims, cls), codes.FITS_BY_PREEMPTION)


def preemption_note(node: str, victims: Sequence[Victim], cls: PodClass) -> str:
    """The reason of a pod that fits by preemption: the node and the pods kube-scheduler takes away."""
    named = ", ".join(f"{v.pod} (priority {v.priority})" for v in victims[:SHOWN])
    if len(victims) > SHOWN:
        named += f" and {len(victims) - SHOWN} more"
    lower = (
        f"of lower priority than its {cls.priority}"
        if cls.preempts_below == cls.priority
        else "preempted for the request's consumers, which are not expendable"
    )
    return (
        f"fits on Ready node {node} once kube-scheduler preempts {named}: expendable (below "
        f"expendable_priority_cutoff) and {lower}; nothing to launch"
    )
