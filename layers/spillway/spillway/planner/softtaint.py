"""Stage 5: mark the nodes a plan expects to remove, so new pods go to nodes that stay first.

A node the plan would remove but for something that passes gets the taint
``spillway.io/scale-down-candidate:PreferNoSchedule``, as cluster-autoscaler gives its unneeded nodes
``DeletionCandidateOfClusterAutoscaler``:

* kept only by a timer: ``idle-below-threshold`` (empty, not idle for ``scale_down_idle_minutes`` yet)
  or ``underutilized-not-long-enough`` (a consolidation candidate inside ``consolidation_after_minutes``).
  A Ready node that never initialized (GPUs its device plugin never registered, a startup taint still
  on: :func:`spillway.planner.scaledown.unready_now`) waits ``scale_down_unready_minutes`` so, and is
  marked meanwhile: cluster-autoscaler holds such a node (the NotReady copy
  ``FilterOutNodesWithUnreadyResources`` makes of it) unneeded while ``--scale-down-unready-time`` runs
  and marks it as any other unneeded node; without the mark, a pod needing no GPU lands on the one node
  whose GPUs never came and keeps it busy. A NotReady node is not marked: the node lifecycle
  controller's ``NoSchedule`` taint (``node.kubernetes.io/not-ready`` for Ready False, ``unreachable``
  for Unknown: nodelifecycle ``nodeConditionToTaintKeyStatusMap``) keeps new pods off it already;
* kept only by the per-plan cap, ``scale-in-cap`` (``max_scale_in_fraction``), or by a disruption
  budget (``disruption-budget``) a later plan's drains find room in (drains under way end, a window
  closes; not one of 0 nodes that never turns off): a later plan drains it, as cluster-autoscaler keeps
  every unneeded node it did not delete for ``--max-empty-bulk-delete`` marked (``UnneededNodes``);
* in a group that consolidates (``when-underutilized``), a busy node whose every pod may move
  (:func:`spillway.planner.disruption.assess_move`) and that no drain, cordon, pending pod or pod this
  plan moves claims,
  whatever keeps it now (``utilized``, ``does-not-fit``, its youth, ...): the rest of the cluster lacks
  the room today, and every new pod placed on it is one more to move. New pods then fill the holes of
  nodes that must stay, the ones running pods that may not move, which no plan can ever empty;
* in such a group, a busy node whose pods that may not move all started less than
  ``consolidation_recent_pods_minutes`` ago (30 by default; its pods that may move, whatever their age,
  can be moved off it): new pods then fill first the nodes pinned by work that has run longer. Batch
  work that has run a short while ends soon more often than work that has run long (on the Philly
  trace half the jobs end within 19 minutes; of those still running at 30 minutes, 44 % end within the
  next 30, of those running at 2 hours, 10 %), so such a node is the likelier to empty of itself, and a
  new pod placed there would keep it. It is the idea of lifetime-aware placement with repredictions by
  age (NILAS and LAVA, Google, MLSys 2025), carried out with the one lever an autoscaler has on
  kube-scheduler. The mark is lifted once one of those pods is older (a plan at every tick sees it:
  the replay wakes for it, :meth:`spillway.sim.policies.SpillwayPolicy.wakeup`).

The effect is soft: kube-scheduler's TaintToleration score ranks every node without the taint above
it, and still uses it when nothing else fits, so no pod waits for it. Without it, kube-scheduler's
default scoring (``LeastAllocated``) puts each new pod on the emptiest node, which is the idle one: the
idle timer starts again with every arrival and the node is kept for a pod the rest of the cluster had
room for; and ``MostAllocated`` puts it on the fullest node, which may be one consolidation could empty.

Every node carrying the taint that is no longer such a node (a pod landed on it anyway, pending pods
are planned onto it, this plan's drains move pods onto it, it is protected now, its group's MinSize or a minimum of the totals keeps it)
loses it, in the same plan and without a cap: a stale taint would keep pods away from a node that
stays. Additions are capped at ``max_bulk_soft_taint_count`` a plan (cluster-autoscaler's flag of that
name; 0 turns marking off and lifts every mark, as cluster-autoscaler then cleans every
``DeletionCandidateOfClusterAutoscaler`` taint, core static_autoscaler.go ``cleanUpIfRequired``), the
longest-idle first, and never take a group's untainted nodes below its MinSize (or a scheduled
action's within the idle threshold, as scale-down keeps), nor the cluster's below a minimum of its
totals (``cluster-min``, :class:`~spillway.planner.limits.Floors`), both counting the nodes drains
under way remove as gone: a node kept anyway is not marked. That room goes first to the nodes a later
plan removes (kept by something that passes), then to the busy nodes, whose marks only guess that they
may empty: a busy node's mark that stays gives way to an idle node's new one. A node this plan drains is left alone (the drain
cordons it), unless the drain makes room on it for pending pods (``make-room``): that node stays, and
its mark is lifted.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime

from spillway.model.groupkey import GroupKey
from spillway.model.k8s import CANDIDATE_TAINT
from spillway.model.nodegroup import NodeGroup
from spillway.planner import codes
from spillway.planner.context import Context, aware, has_taint
from spillway.planner.groups import group_floor
from spillway.planner.limits import Floors
from spillway.planner.types import Drain, KeptNode, SoftTaint

TIMERS = frozenset({codes.IDLE_BELOW_THRESHOLD, codes.UNDERUTILIZED_NOT_LONG_ENOUGH})
# what keeps a node only until a later plan: its timer, this plan's scale-in cap, or scale-down's wait
# after a removal or a failed drain (cluster-autoscaler updates its soft taints in its cooldown too)
PASSING = TIMERS | {codes.SCALE_IN_CAP, codes.SCALE_DOWN_COOLDOWN}
# the plan expects pods on these nodes (pending pods, or pods it moves there): never steer them away
PLANNED_ONTO = frozenset({codes.PENDING_FITS, codes.RECEIVES_MOVED_PODS})
OFF = "max_bulk_soft_taint_count is 0: no node is marked as a scale-down candidate"


def soft_taints(
    ctx: Context,
    drains: Sequence[Drain],
    kept: Iterable[KeptNode],
    since: Mapping[str, datetime],
    movable: Collection[str] = (),
    floors: Floors | None = None,
    going: Mapping[GroupKey, int] | None = None,
    budget_held: Collection[str] = (),
    recent: Collection[str] = (),
    receiving: Collection[str] = (),
) -> tuple[SoftTaint, ...]:
    """The taints to add and remove; ``since``: when each timer-kept node's timer started; ``movable``:
    the busy nodes of consolidating groups whose every pod may move; ``floors``: the cluster totals'
    minimums after this plan's drains (a node they would keep is not marked); ``going``: per group, the
    nodes drains under way remove; ``budget_held``: the idle nodes kept only by a disruption budget that
    a later plan's drains will find room in; ``recent``: the busy nodes of consolidating groups whose pods
    that may not move all started recently; ``receiving``: the nodes this plan's drains (consolidation,
    make room) move pods onto, which are never marked: the mark would send those pods elsewhere first,
    into room the plan counted on for others."""
    drained = {d.node for d in drains if d.terminate}  # make room keeps its node, for pending pods
    kept_by = {k.node: k for k in kept}
    waiting = _waiting(ctx, kept_by, {*movable, *recent}, budget_held, receiving)
    tainted = {name for name, node in ctx.nodes.items() if has_taint(node.info, CANDIDATE_TAINT)}
    lifted = [
        SoftTaint(
            name, False, f"no longer a scale-down candidate: {_why(kept_by.get(name), name in receiving)}"
        )
        for name in sorted(tainted - drained - set(waiting))
    ]
    if ctx.config.max_bulk_soft_taint_count == 0:  # marking is off: no mark stays either
        off = [SoftTaint(name, False, OFF) for name in sorted(tainted & set(waiting))]
        return tuple(sorted([*lifted, *off], key=lambda t: t.node))
    room = _room_above_min(ctx, drains, going or {})
    floors = floors.fork() if floors is not None else None
    longest_first = {n: (aware(since.get(n, ctx.now)), n) for n in waiting}
    passing = {name for name, k in waiting.items() if _passes(k, budget_held)}
    marks: list[SoftTaint] = []
    # the nodes a later plan removes take the room first, then the busy ones that might empty
    for part in (passing, set(waiting) - passing):
        staying = sorted(tainted & part, key=longest_first.__getitem__)
        lifted += _beyond_room(ctx, staying, room, floors)
        order = sorted(part - tainted, key=longest_first.__getitem__)
        marks += _marks(ctx, order, waiting, room, floors, recent, len(marks))
    return (*sorted(lifted, key=lambda t: t.node), *marks)


def _beyond_room(
    ctx: Context, staying: Sequence[str], room: dict[GroupKey, int], floors: Floors | None
) -> list[SoftTaint]:
    """Of the marked nodes still waiting (``staying``, in order), each spends its group's ``room`` and
    the cluster totals' ``floors``, as a new mark does; those left without are lifted: their group's
    MinSize, or a minimum of the totals, keeps them (raised since they were marked, or reached by drains
    under way)."""
    out = []
    for name in staying:
        node = ctx.nodes[name]
        group = node.group
        if group is None or room.get(group.key, 0) <= 0:
            where = f"group {group.name} keeps it at MinSize {_min_size(ctx, group)}" if group else "no group"
            out.append(SoftTaint(name, False, f"no longer a scale-down candidate: {where}"))
            continue
        refused = floors.refusal(node.info, group) if floors is not None else None
        if refused is not None:
            out.append(
                SoftTaint(name, False, f"no longer a scale-down candidate: {refused[0]} ({refused[1]})")
            )
            continue
        room[group.key] -= 1
        if floors is not None:
            floors.remove(node.info, group)
    return out


def _waiting(
    ctx: Context,
    kept_by: Mapping[str, KeptNode],
    movable: Collection[str],
    budget_held: Collection[str],
    receiving: Collection[str],
) -> dict[str, KeptNode]:
    """The kept nodes the plan would remove but for something that passes (a timer,
    the cap, the cooldown, a disruption budget that lets a later drain through), or whose pods may all
    move; but no NotReady node, which the node lifecycle controller's NoSchedule taint marks already,
    and no node this plan moves pods onto (``receiving``), whatever it was kept for."""
    return {
        name: k
        for name, k in kept_by.items()
        if (_passes(k, budget_held) or (name in movable and k.code not in PLANNED_ONTO))
        and (name not in ctx.nodes or ctx.nodes[name].info.ready)
        and name not in receiving
    }


def _passes(kept: KeptNode, budget_held: Collection[str]) -> bool:
    if kept.code in PASSING:
        return True
    return kept.code == codes.DISRUPTION_BUDGET and kept.node in budget_held


def _marks(
    ctx: Context, order: Sequence[str], waiting: Mapping[str, KeptNode], room: dict[GroupKey, int],
    floors: Floors | None, recent: Collection[str], made: int = 0,
) -> list[SoftTaint]:  # fmt: skip
    """New marks in ``order``, within ``max_bulk_soft_taint_count`` (less the ``made`` already), each
    group's ``room`` and what the cluster totals have above their minimums (``floors``, spent by each
    mark); a node of ``recent`` is marked for its recent pods."""
    out: list[SoftTaint] = []
    # a passing budget (a node kept by a budget is in waiting only so)
    held = {name for name in order if waiting[name].code == codes.DISRUPTION_BUDGET}
    cap = ctx.config.max_bulk_soft_taint_count - made
    for name in order:
        node = ctx.nodes[name]
        group = node.group
        if len(out) >= cap or group is None or room.get(group.key, 0) <= 0:
            continue
        if floors is not None:
            if floors.refusal(node.info, group) is not None:
                continue  # the minimum keeps it: it is not marked for removal
            floors.remove(node.info, group)
        room[group.key] -= 1
        why = waiting[name]
        passing = why.code in PASSING or name in held
        what = f"{why.code}: {why.reason}" if passing else _busy_mark(ctx, name, why, recent)
        out.append(SoftTaint(name, True, f"{what}; new pods go elsewhere first (PreferNoSchedule)"))
    return out


def _busy_mark(ctx: Context, name: str, why: KeptNode, recent: Collection[str]) -> str:
    """Why a busy node of a consolidating group is marked."""
    if name not in recent:
        return f"every pod on it may move ({why.code})"
    window = ctx.config_for(ctx.nodes[name].group).consolidation_recent_pods_minutes
    return (
        f"the pods on it that may not move all started less than {window:g} minutes ago ({why.code}): "
        "work that has run a short while ends soon more often than work that has run long"
    )


def _room_above_min(
    ctx: Context, drains: Sequence[Drain], going: Mapping[GroupKey, int]
) -> dict[GroupKey, int]:
    """Per group, how many nodes may be marked: its size less MinSize (or the MinSize a scheduled action
    sets within the idle threshold, which scale-down keeps too: :func:`~spillway.planner.groups.group_floor`)
    and the nodes drains under way (``going``) and this plan's drains terminate (a make-room drain's
    node stays)."""
    room = {g.key: g.desired - _min_size(ctx, g) - going.get(g.key, 0) for g in ctx.groups}
    for name in [d.node for d in drains if d.terminate]:
        group = ctx.nodes[name].group if name in ctx.nodes else None
        if group is not None and group.key in room:
            room[group.key] -= 1
    return room


def _min_size(ctx: Context, group: NodeGroup) -> int:
    floor = group_floor(ctx, group)
    return max(group.min_size, floor.min_size) if floor is not None else group.min_size


def _why(kept: KeptNode | None, receiving: bool = False) -> str:
    if receiving:
        return f"{codes.RECEIVES_MOVED_PODS} (this plan moves another node's pods onto it)"
    return f"{kept.code} ({kept.reason})" if kept is not None else f"{codes.MAKE_ROOM}: pending pods take it"
