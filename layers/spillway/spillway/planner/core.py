"""The planner: ``plan(snapshot, groups, config, state, now) -> ScalingPlan``.

Pure and deterministic: no I/O, no clock (``now`` is an argument), no environment; the same input
gives the same plan, byte for byte. It works on throw-away working copies of the snapshot
(:class:`~spillway.planner.context.Context`), through stages in the spirit of cluster-autoscaler's
estimator / expander / scale-down split:

1. :mod:`~spillway.planner.classes`: pending pods → equivalence classes, in service order;
2. :mod:`~spillway.planner.placement`: placement on what exists (free room, capacity already launching,
   nodes Spillway cordoned);
3. :mod:`~spillway.planner.expander`: which groups get new nodes (region, then least waste, then name);
4. :mod:`~spillway.planner.scaledown`: which idle nodes to drain, within MinSize and the scale-in cap;
5. :mod:`~spillway.planner.softtaint`: which nodes kept only by a timer new pods should avoid.

First, a group none of whose nodes stands for its template takes the template its last such node
showed, while that is recent (:mod:`spillway.model.nodecache`, remembered in ``State.templates``). Then
:mod:`~spillway.planner.joins` finds launches no Node joined: not capacity coming, their
group backed off, the instance removed (and :mod:`~spillway.planner.gangsweep` finds a fleet gang's
instances left outside every group); then :mod:`~spillway.planner.health` counts unready nodes: an
unhealthy cluster drains no node, an unhealthy group gets no new nodes. A Ready node that is not
initialized yet (a startup taint, GPUs not registered) is capacity launching
(:mod:`~spillway.planner.startup`).

:mod:`~spillway.planner.scaleup` runs 2 and 3 class by class. Every path that asks whether a pod may
be disturbed asks :func:`spillway.planner.disruption.assess`. Every kept node and pending pod carries a
reason and a code (:mod:`spillway.planner.codes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from spillway.config import PlannerConfig
from spillway.model.cluster import DEFAULT_GRACE_SECONDS, ClusterSnapshot
from spillway.model.nodecache import recall, remember
from spillway.model.nodegroup import NodeGroup
from spillway.model.priorities import CONFIGMAP_KEY, CONFIGMAP_NAME, CONFIGMAP_NAMESPACE
from spillway.model.state import GroupState, NodeState, PoolState, State, keyed_by_region
from spillway.planner.buffers import buffer_classes
from spillway.planner.buffers import holds as buffer_holds
from spillway.planner.buffers import settle as settle_buffers
from spillway.planner.classes import gang_priorities, in_service_order, pod_classes
from spillway.planner.consolidation import WHEN_UNDERUTILIZED, group_mode
from spillway.planner.context import Context, aware, first_regions
from spillway.planner.cooldown import scale_down_marks
from spillway.planner.disruption import GRACE_MARGIN_SECONDS, fits_default_grace
from spillway.planner.expander import Expander, RegionThenLeastWaste
from spillway.planner.gangsweep import sweep_gang_orphans
from spillway.planner.groups import floor_report
from spillway.planner.health import judge_health
from spillway.planner.joins import drawn_from_pools, warm_without_nodes, watch_joins
from spillway.planner.makeroom import hold_rooms, make_room
from spillway.planner.provreq import Provisioning, with_request_gang_keys
from spillway.planner.raises import next_raises, pending_raises, with_raises
from spillway.planner.scaledown import ScaleDownStage
from spillway.planner.scaleup import ScaleUpStage, record_gang_launches, reused_by, scale_up_actions
from spillway.planner.shrinks import hold_shrunk, shrunk_after
from spillway.planner.softtaint import soft_taints
from spillway.planner.startup import sanitized, starting_nodes
from spillway.planner.types import (
    DRAIN_DEADLINE_TOO_SHORT,
    UNKNOWN_GROUP_NAMES,
    ConfigProblem,
    Drain,
    GroupFloor,
    PendingPod,
    RefusedGroup,
    ScalingPlan,
    Uncordon,
)
from spillway.planner.unread import unread_problems

UNCORDON_REASON = "Spillway cordoned it; pending pods fit on it, so it is reused before launching"


def plan(
    snapshot: ClusterSnapshot,
    groups: Sequence[NodeGroup],
    config: PlannerConfig,
    state: State,
    now: datetime,
    *,
    expander: Expander | None = None,
) -> ScalingPlan:
    """Decide what to grow, uncordon and drain, with a reason for every pod and node."""
    now = aware(now)
    state = keyed_by_region(state, first_regions(config, groups))  # entries a build keyed by name wrote
    state = with_request_gang_keys(state, snapshot.provreqs)  # a request's launch a build keyed ns/name
    keep = config.node_info_cache_minutes  # templates learned from nodes (cluster-autoscaler's cache)
    templates = remember(groups, snapshot.nodes, state.templates, now, keep)
    # a group with no node of its own: the one it had (from the memory before this plan, so that a plan
    # dropping an entry for the group's new launch template version says so)
    groups = recall(groups, state.templates, now, keep)
    every_group = groups  # the gang sweep's: every group's members, refused ones too
    refused = [g for g in groups if g.refusal]  # neither grown nor drained: their nodes are unmanaged
    groups = sanitized([g for g in groups if not g.refusal], config)  # templates without startup taints
    groups = warm_without_nodes(groups, snapshot.nodes)  # a warm instance's Ready Node: no new node
    # the Node of an instance drawn from a warm pool registers anew (its old one is from the warm-up)
    snapshot = replace(snapshot, nodes=tuple(drawn_from_pools(snapshot.nodes, groups, state)))
    joins = watch_joins(snapshot.nodes, groups, config, state, now)
    health = judge_health(snapshot.nodes, groups, joins.overdue, config, now)
    # the cluster unhealthy: no Node is dead to the sweep either (the scale-down's unready rule is off)
    orphans = sweep_gang_orphans(snapshot, every_group, config, now, unhealthy=health.cluster is not None)
    starting = starting_nodes(snapshot.nodes, groups, config, now)  # Ready, not initialized: launching
    state = joins.backed_off(state)  # a group whose launch never joined backs off from this plan on
    raises = pending_raises(groups, state, now, config.scale_up_claim_minutes, snapshot.nodes, every_group)
    groups = with_raises(joins.shrunk(groups), raises)
    ctx = Context(
        snapshot, groups, config, state, now, stale=joins.stale, unhealthy=health.report(), starting=starting,
        refused=refused,
    )  # fmt: skip
    rooms = hold_rooms(ctx)  # pods an earlier plan made room for wait for that room
    shrunk = hold_shrunk(ctx)  # workers of jobs a consolidation shrank take free room only
    provisioning = Provisioning(ctx)  # bookings first: the room they hold is not free for others
    demand = [*provisioning.book(), *pod_classes(ctx), *buffer_classes(ctx)]  # buffers sort last
    up = ScaleUpStage(ctx, expander or RegionThenLeastWaste())
    scale_up = up.run(in_service_order(demand, gang_priorities(ctx)))
    scale_down = ScaleDownStage(ctx, launching=up.launching)  # what launching capacity has left
    if make_room(scale_down):  # new nodes swapped for moves: the scale-ups change
        scale_up = scale_up_actions(ctx)
        record_gang_launches(ctx, scale_up)
    provisioning.settle()
    settle_buffers(ctx)  # the room each node holds for buffers; their virtual pods out of pending
    drains, kept, idle_state = scale_down.run()
    drains = rebalance_noted(drains, groups)
    buffers = buffer_holds(ctx, drains)  # what each active buffer holds, its room on drained nodes not
    since = {n: s.idle_since for n, s in idle_state.items()} | {
        n: s.since for n, s in scale_down.underutilized.items()
    }
    tenants = reused_by(ctx)
    uncordon = [
        Uncordon(
            node,
            group.name,
            UNCORDON_REASON,
            ctx.nodes[node].info.cordon_digest,
            group.region,
            tenants.get(node, ""),
        )
        for node, group in ctx.uncordoned.items()
    ]
    uncordon = sorted([*uncordon, *scale_down.restored], key=lambda u: u.node)  # + orphaned drains
    return ScalingPlan(
        scale_up=tuple(scale_up),
        uncordon=tuple(uncordon),
        drain=tuple(drains),
        pending=_with_problems(ctx),
        kept=tuple(sorted(kept, key=lambda k: k.node)),
        state=_next_state(ctx, idle_state).model_copy(
            update={
                "raises": next_raises(raises, scale_up, ctx.now),
                "underutilized": dict(sorted(scale_down.underutilized.items())),
                "rooms": dict(sorted({**rooms, **scale_down.rooms}.items())),
                "joining": dict(sorted(joins.joining.items())),
                "shrunk": shrunk_after(shrunk, ctx),
                "bookings": provisioning.bookings(),
                "templates": templates,
                "scale_down": scale_down_marks(ctx, drains),
            }
        ),
        placements=tuple(sorted(ctx.placements, key=lambda p: p.pod)),
        provisioning=provisioning.updates(),
        provisioning_deleted=provisioning.deletions(),
        floors=tuple(GroupFloor(*f) for f in floor_report(ctx)),
        shrinks=tuple(scale_down.shrinks),
        soft_taint=soft_taints(
            ctx,
            drains,
            kept,
            since,
            scale_down.movable,
            scale_down.floors,
            scale_down.going_now(),
            scale_down.budget_held,
            scale_down.recent,
            scale_down.receiving(),
        ),
        unregistered=tuple(joins.unregistered),
        gang_orphans=orphans,
        unhealthy=health.report(),
        refused_groups=tuple(RefusedGroup(g.name, g.region, g.refusal) for g in ctx.refused),
        buffers=buffers,
        problems=(
            *_problems(snapshot, config),
            *unknown_group_names(config, every_group),
            *drain_deadline_problem(config, groups),
            *unread_problems(snapshot),
        ),
    )


def _with_problems(ctx: Context) -> tuple[PendingPod, ...]:
    """The pending pods, sorted, each reason followed by what of the pod's metadata could not be read
    (PodInfo.problem: a malformed Kueue pod-group-total-count names the annotation and its value)."""
    problems = {p.key: p.problem for p in ctx.snapshot.pods if p.problem}
    return tuple(
        replace(p, reason=f"{p.reason}; {problems[p.pod]}") if p.pod in problems else p
        for p in sorted(ctx.pending_out, key=lambda p: p.pod)
    )


def rebalance_noted(drains: Sequence[Drain], groups: Sequence[NodeGroup]) -> list[Drain]:
    """``drains``, each that terminates its node in a group whose AZRebalance process runs over several
    zones (:attr:`NodeGroup.zone_rebalance`) saying so in its reason: Auto Scaling may then even the
    zones out by terminating a node of the group nobody drained (spillway.model.nodegroup
    ``rebalance_problem``). The drain goes on: it is the node the plan chose, and keeping it would not
    keep Auto Scaling from rebalancing for other causes."""
    flagged = {g.key for g in groups if g.zone_rebalance}
    if not flagged:
        return list(drains)
    note = (
        "; AZRebalance is not suspended on the group: after this termination Auto Scaling may terminate "
        "an undrained node in its fullest zone (suspend AZRebalance)"
    )
    return [
        replace(d, reason=d.reason + note) if d.terminate and (d.region, d.group) in flagged else d
        for d in drains
    ]


def _problems(snapshot: ClusterSnapshot, config: PlannerConfig) -> tuple[ConfigProblem, ...]:
    """The priority expander's ConfigMap when cluster-autoscaler could not read it and the configuration
    gives no priorities of its own: the groups were ranked without priorities, as cluster-autoscaler
    passes every option on to its next expander then (priority.go BestOptions)."""
    if not snapshot.expander_problem or config.expander_priorities:
        return ()
    why = (
        f"{snapshot.expander_problem}; groups are ranked without priorities, as cluster-autoscaler does then"
    )
    return (ConfigProblem(f"ConfigMap {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}", f"data.{CONFIGMAP_KEY}", why),)


def unknown_group_names(config: PlannerConfig, groups: Sequence[NodeGroup]) -> tuple[ConfigProblem, ...]:
    """A disruption budget's ``groups`` or a tenant scope's ``node_groups`` naming a group no managed
    group (of any region, refused ones too) is called: the name matches nothing, so the budget or the
    limit holds none of the groups meant (a typo, a group renamed or no longer tagged). One problem per
    field, naming the field and the names; the plan goes on as written."""
    managed = {g.name for g in groups}
    fields = [(f"disruption_budgets[{i}].groups", b.groups) for i, b in enumerate(config.disruption_budgets)]
    for tenant in sorted(config.tenants):
        scopes = config.tenants[tenant].scopes
        fields += [(f"tenants.{tenant}.scopes[{i}].node_groups", s.node_groups) for i, s in enumerate(scopes)]
    out = []
    for field, names in fields:
        unknown = sorted({n for n in names if n not in managed})
        if unknown:
            why = (
                f"{', '.join(repr(n) for n in unknown)}: no managed group has that name (in any region), so "
                "this entry holds no group by it; the plan goes on as written"
            )
            out.append(ConfigProblem("configuration", field, why[:1000], UNKNOWN_GROUP_NAMES))
    return tuple(out)


def drain_deadline_problem(config: PlannerConfig, groups: Sequence[NodeGroup]) -> tuple[ConfigProblem, ...]:
    """The drains' deadline (``drain_deadline_seconds``, DRAIN_DEADLINE_SECONDS) too short for a pod with
    Kubernetes' default grace, 30 s, plus what a drain spends before it evicts
    (:data:`~spillway.planner.disruption.GRACE_MARGIN_SECONDS`), while a group the plan scales
    consolidates ``when-underutilized``: consolidation and make room then move no pod at a cost
    (:func:`~spillway.planner.disruption.cut_short`), and those groups' busy nodes are all kept, each
    for ``grace-past-deadline``, with nothing else saying why. One problem, naming the field, the
    groups and the least deadline that lets them move; the plan goes on as written."""
    if fits_default_grace(config.drain_deadline_seconds):
        return ()
    consolidating = sorted({g.name for g in groups if group_mode(config, g) == WHEN_UNDERUTILIZED})
    if not consolidating:
        return ()
    named = ", ".join(consolidating[:5]) + (
        f" and {len(consolidating) - 5} more" if len(consolidating) > 5 else ""
    )
    least = DEFAULT_GRACE_SECONDS + GRACE_MARGIN_SECONDS
    why = (
        f"{config.drain_deadline_seconds:g} s (DRAIN_DEADLINE_SECONDS) is less than Kubernetes' default "
        f"terminationGracePeriodSeconds ({DEFAULT_GRACE_SECONDS} s) plus the {GRACE_MARGIN_SECONDS} s a drain "
        f"spends before it evicts: consolidation and make room move no pod at a cost in {named} (each kept "
        f"grace-past-deadline), though they consolidate when-underutilized; the plan goes on as written. A "
        f"deadline of at least {least} s lets such pods move"
    )
    return (ConfigProblem("configuration", "drain_deadline_seconds", why[:1000], DRAIN_DEADLINE_TOO_SHORT),)


def _next_state(ctx: Context, idle_state: dict[str, NodeState]) -> State:
    """Idle times of idle nodes, the backoffs that have not expired, and gang launches under way."""
    groups_state = {
        key: GroupState(
            backoff_until=entry.backoff_until, reason=entry.reason, group=entry.group, region=entry.region
        )
        for key, entry in sorted(ctx.state.groups.items())
        if aware(entry.backoff_until) > ctx.now
    }
    pools = {  # how many nodes EC2 refused at once too: what each holds back (PoolState.nodes)
        key: PoolState(backoff_until=entry.backoff_until, reason=entry.reason, nodes=entry.nodes)
        for key, entry in sorted(ctx.state.pools.items())
        if aware(entry.backoff_until) > ctx.now
    }
    gangs = dict(sorted(ctx.gangs_out.items()))
    return State(nodes=dict(sorted(idle_state.items())), groups=groups_state, gangs=gangs, pools=pools)
