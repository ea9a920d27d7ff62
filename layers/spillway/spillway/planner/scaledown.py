"""Stage 4: scale-down — which nodes to drain, and why every other node is kept.

A node is a candidate when nothing keeps it: it is managed, Ready, has no pod that keeps it busy
(:func:`spillway.planner.disruption.assess`), no pending pod is placed on it, nobody else owns it
(a drain in flight, a human cordon, ``scale-down-disabled``), it is not freshly launched, and it has
been idle for ``scale_down_idle_minutes``. Candidates are ordered overflow regions first (bring work
home), then least useful, then oldest; then a group never goes below MinSize and loses at most
``max_scale_in_fraction`` of its nodes per plan.

Each check is a small function in :data:`IN_USE` or :data:`PROTECTIONS`: a new reason to keep a node
is one more function, not a branch in a loop.

A group's ``consolidation`` mode (config, or its ``spillway.io/consolidation`` tag) decides what may go:
``off`` keeps even its empty nodes (``consolidation-off``), ``when-empty`` is the above, and
``when-underutilized`` also hands its busy nodes to :class:`~spillway.planner.consolidation.Consolidation`
once the empty ones are chosen. Every drain, empty or not, is within the disruption budgets
(:class:`~spillway.planner.consolidation.Budgets`).

Orphaned drains: a node carrying Spillway's cordon longer than ``orphaned_drain_minutes`` (above the
longest a DrainNode execution can run) whose drain no recent plan claimed has no drain that owns it
(the execution was stopped, or its compensation could not reach the API). It goes through the same
checks, minus "being drained": if it would be drained now it is (the drain accepts a node Spillway
cordoned; reason ``orphaned-drain-finished``), else it is restored: uncordoned and untainted by the
scale-up execution (``orphaned-drain-restored``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from spillway.config import EMPTY, BudgetReason
from spillway.model.cluster import NodeInfo, PodInfo
from spillway.model.groupkey import GroupKey
from spillway.model.k8s import DO_NOT_DISRUPT
from spillway.model.resources import CPU, MEMORY, NVIDIA_GPU, dominant_share, room_less
from spillway.model.state import NodeState, RoomState, Since
from spillway.planner import codes
from spillway.planner.buffers import held_here
from spillway.planner.consolidation import (
    OFF,
    WHEN_UNDERUTILIZED,
    Budgets,
    Consolidation,
    PodBudgets,
    backoff_refusal,
    counted_by_job,
    elastic_refusal,
    gang_refusal,
    gang_room,
    members_evicted,
    mode,
)
from spillway.planner.context import (
    Context,
    WorkNode,
    awaits_replacement,
    aware,
    cordon_bound,
    minutes,
    orphaned_cordon,
)
from spillway.planner.cooldown import cooldown
from spillway.planner.disruption import (
    comes_back,
    elastic_room,
    eviction_room,
    keeps_node_busy,
    workers_evicted,
)
from spillway.planner.groups import scheduled_min
from spillway.planner.health import out_of_service, registering
from spillway.planner.limits import Floors
from spillway.planner.minresources import spends
from spillway.planner.placement import Bin
from spillway.planner.startup import uninitialized
from spillway.planner.types import Drain, GroupShrink, KeptNode, Uncordon
from spillway.planner.unread import unread_verdict

Verdict = tuple[str, str] | None  # (code, reason) when the node is kept
Check = Callable[[Context, WorkNode], Verdict]
TimedCheck = Callable[[Context, WorkNode, datetime], Verdict]
# what evicting an idle node's expendable pods takes: (batch/v1 Job -> pods it counts as failed, elastic
# job -> running workers, gang -> running preemptable members): ScaleDownStage.expendable_taken
Taken = tuple[dict[str, int], dict[str, int], dict[str, int]]


def _uncordoned(ctx: Context, node: WorkNode) -> Verdict:
    if node.info.name in ctx.uncordoned:
        return codes.UNCORDONED, "uncordoned: pending pods fit on it"
    return None


def _unmanaged(ctx: Context, node: WorkNode) -> Verdict:
    if node.group is not None:
        return None
    refused = ctx.refused_by_instance.get(node.info.instance_id or "")
    if refused is not None:
        return codes.UNMANAGED, f"group {refused.name} is not scaled by Spillway: {refused.refusal}"
    pooled = ctx.pooled_by_instance.get(node.info.instance_id or "")
    if pooled is not None:  # started at warm-up, or back from service (the group's problems name it)
        return codes.UNMANAGED, (
            f"instance {node.info.instance_id} is in the warm pool of group {pooled.name} ({pooled.region}), "
            "outside the group: Spillway does not drain it (TerminateInstanceInAutoScalingGroup refuses "
            "warm-pool instances)"
        )
    return codes.UNMANAGED, "not in a managed node group"


def _unread(ctx: Context, node: WorkNode) -> Verdict:
    """Its group was carried from an earlier read (its region's read failed), or it is in no group
    while its region was not read: nothing is removed on a picture that old (spillway.planner.unread).
    In use, so no idle time is kept: timers start again once the region is read."""
    return unread_verdict(ctx, node)


def _cluster_unhealthy(ctx: Context, node: WorkNode) -> Verdict:
    """Too many unready nodes (:mod:`spillway.planner.health`): the snapshot is a poor picture of the
    cluster, and nothing is removed. In use, so no idle time is kept: timers start again after."""
    unhealthy = ctx.cluster_unhealthy
    return (codes.CLUSTER_UNHEALTHY, unhealthy.reason) if unhealthy is not None else None


def _not_ready(ctx: Context, node: WorkNode) -> Verdict:
    """A NotReady node is kept while it may still come: while it is still registering (never Ready yet
    and younger than ``max_node_startup_minutes``: :func:`~spillway.planner.health.registering`; the
    plan counts it as capacity launching, as cluster-autoscaler leaves a node not started out of its
    scale-down candidates). Past that an idle one is idle as a Ready one is: its idle timer runs, and it
    is drained once idle for ``scale_down_unready_minutes`` instead of ``scale_down_idle_minutes`` while
    it is unready (:func:`unready_now`, :func:`_not_idle_long_enough`). One that runs workload pods is
    left alone (its pods cannot be evicted without a kubelet; neither scale-down nor consolidation
    touches it), as is one whose NotReady time is unknown. A pod that never started
    (:func:`~spillway.planner.disruption.never_started`: Pending, no container ever ran) is no workload
    once the node has been NotReady for ``scale_down_unready_minutes`` (since its Ready condition last
    changed, else since it was created): the node is judged as an idle one, and its drain lets such
    pods go with it (the pod garbage collector deletes them once the Node is gone, and their
    controllers, if any, recreate them). Before that time it is work: a Ready node may miss heartbeats
    for a moment while a freshly bound pod pulls its image, Pending too; the node's idle timer runs
    meanwhile when such pods are its only work (:meth:`ScaleDownStage.judge`). Expendable pods keep it
    no more than a Ready node (cluster-autoscaler removes such a node whatever they are): its drain's
    evictions only mark them terminating, and once past their grace period plus 30 s with no kubelet to
    stop them the drain ignores them as stuck (:func:`~spillway.planner.disruption.stuck`) and
    terminates the node."""
    info = node.info
    if info.ready:
        return None
    if registering(info, ctx.config, ctx.now):  # capacity launching (Context.launching), not unready yet
        return (
            codes.NOT_READY,
            f"never Ready yet, registered {minutes(ctx.now - aware(info.created_at or ctx.now))} ago: still "
            "starting (max_node_startup_minutes)",
        )
    since = info.ready_changed_at or info.created_at
    if since is None:
        return codes.NOT_READY, "not Ready, since when unknown"
    if not node.workload:  # a pod that never started there is no work past its unready time
        return None
    unready = ctx.now - aware(since)
    if node.workload == node.unstarted:
        limit = timedelta(minutes=ctx.config_for(node.group).scale_down_unready_minutes)
        return (
            codes.NOT_READY,
            f"not Ready for {minutes(unready)}; its {node.workload} pod(s) that never started are work until "
            f"it has been for {minutes(limit)} (scale_down_unready_minutes)",
        )
    return codes.NOT_READY, f"not Ready for {minutes(unready)} and runs {node.workload} workload pod(s)"


def unready_now(ctx: Context, node: WorkNode) -> bool:
    """The node is unready now: NotReady (past registering, which :func:`_not_ready` keeps), or Ready and
    past ``max_node_startup_minutes`` without initializing (:func:`~spillway.planner.startup.uninitialized`:
    GPUs or another extended resource of its template its device plugin never registered, a startup
    taint still on; a starting node is kept before). cluster-autoscaler takes both as unready
    (processors/customresources ``FilterOutNodesWithUnreadyResources`` and taints
    ``FilterOutNodesWithStartupTaints`` replace a node that never initialized by a copy NotReady since
    its creation, utils/kubernetes ``GetUnreadyNodeCopy``), and removes an unready node once unneeded
    for ``--scale-down-unready-time`` in place of ``--scale-down-unneeded-time``, judging readiness as
    it is now and counting from when the node became unneeded (core/scaledown/unneeded
    ``unremovableReason``; ``Nodes.Update`` keeps that time while it stays unneeded)."""
    return not node.info.ready or uninitialized(node.info, node.group, ctx.config) is not None


def idle_needed(ctx: Context, node: WorkNode) -> tuple[timedelta, str]:
    """How long ``node`` must be idle before it is drained, and what a reason adds to say why: nothing
    for ``scale_down_idle_minutes``, which any idle node waits."""
    config = ctx.config_for(node.group)
    unready = timedelta(minutes=config.scale_down_unready_minutes)
    if not node.info.ready:
        return unready, " (not Ready: scale_down_unready_minutes)"
    why = uninitialized(node.info, node.group, ctx.config)
    if why is not None:
        return unready, f" (Ready but never initialized, {why}: scale_down_unready_minutes)"
    return timedelta(minutes=config.scale_down_idle_minutes), ""


def _starting(ctx: Context, node: WorkNode) -> Verdict:
    """Ready but not initialized (:mod:`spillway.planner.startup`): capacity launching, not idle."""
    return (codes.STARTING, node.starting) if node.starting is not None else None


def _busy(ctx: Context, node: WorkNode) -> Verdict:
    """Workload runs on it. The reason is left for :meth:`ScaleDownStage._in_use` to write
    (:func:`busy_reason`): a busy node of a group that consolidates gets consolidation's reason instead,
    and formatting the use of every busy node a plan cost a few per cent of the plan."""
    return (codes.WORKLOAD, "") if node.workload else None


def busy_reason(node: WorkNode) -> str:
    return f"runs {node.workload} workload pod(s); {utilisation(node)}"


def _receives(ctx: Context, node: WorkNode) -> Verdict:
    if node.receives:
        return codes.PENDING_FITS, f"a pending pod fits on it ({node.receives} pod(s) planned here)"
    return None


def _draining(ctx: Context, node: WorkNode, idle_since: datetime) -> Verdict:
    info = node.info
    if info.giving_back(ctx.now):
        at = (
            f"{minutes(ctx.now - aware(info.cordoned_at))} ago" if info.cordoned_at else "at a time not known"
        )
        return codes.DRAINING, f"being given back: a launch's give-back cordoned it {at}"
    if info.unschedulable and info.cordoned_by_spillway:
        return codes.DRAINING, "being drained by Spillway"
    if info.unschedulable:
        return codes.CORDONED_BY_OTHERS, "cordoned by someone else; Spillway leaves it alone"
    return None


def _disabled(ctx: Context, node: WorkNode, idle_since: datetime) -> Verdict:
    if node.info.scale_down_disabled:
        return (
            codes.SCALE_DOWN_DISABLED,
            "annotated cluster-autoscaler.kubernetes.io/scale-down-disabled=true",
        )
    if node.info.do_not_disrupt:  # Karpenter disrupts such a node for nothing, empty or not
        return codes.NODE_DO_NOT_DISRUPT, f"annotated {DO_NOT_DISRUPT}=true"
    return None


def _pinned(ctx: Context, node: WorkNode, idle_since: datetime) -> Verdict:
    """A DaemonSet or static (mirror) pod on it, running and not terminating, annotated
    ``karpenter.sh/do-not-disrupt=true``. Such a pod keeps no node busy and no drain evicts it, but it
    dies with the node: Karpenter reads the annotation on every active pod of a node before it disrupts
    the node, these included (kubernetes-sigs/karpenter pkg/controllers/state/statenode.go,
    ``ValidatePodsDisruptable``), so a drain that removes the node is refused; make room keeps it."""
    for pod in ctx.node_daemons.get(node.info.name, ()):
        if pod.do_not_disrupt:
            kind = "static (mirror)" if pod.mirror else "DaemonSet"
            return codes.POD_NEVER, f"runs {pod.key}, a {kind} pod annotated {DO_NOT_DISRUPT}=true"
    return None


def _scale_in_protected(ctx: Context, node: WorkNode, idle_since: datetime) -> Verdict:
    """Its instance is protected from scale-in on its own (:func:`~spillway.model.nodegroup.scale_in_protected`):
    the protection does not stop TerminateInstanceInAutoScalingGroup, so it is the planner's to keep."""
    group, instance = node.group, node.info.instance_id
    if group is None or instance is None or instance not in group.protected_instances:
        return None
    return (
        codes.SCALE_IN_PROTECTED,
        f"instance {instance} is protected from scale-in (ProtectedFromScaleIn) in group {group.name}",
    )


def _consolidation_off(ctx: Context, node: WorkNode, idle_since: datetime) -> Verdict:
    if node.group is None or mode(ctx, node.group) != OFF:
        return None
    problem = f" ({node.group.consolidation_problem})" if node.group.consolidation_problem else ""
    return codes.CONSOLIDATION_OFF, f"consolidation is off for group {node.group.name}{problem}"


def _young(ctx: Context, node: WorkNode, idle_since: datetime) -> Verdict:
    created = node.info.created_at
    if created is None:
        return None
    delay = ctx.launch_delay
    age = ctx.now - aware(created)
    if age < delay:
        return codes.RECENTLY_LAUNCHED, f"launched {minutes(age)} ago, younger than {minutes(delay)}"
    return None


def _not_idle_long_enough(ctx: Context, node: WorkNode, idle_since: datetime) -> Verdict:
    """Idle, but not for ``scale_down_idle_minutes`` yet, or ``scale_down_unready_minutes`` while it is
    unready (:func:`unready_now`: that time replaces the idle time, it does not come after it)."""
    needed, setting = idle_needed(ctx, node)
    idle_for = ctx.now - idle_since
    if idle_for < needed:
        return (
            codes.IDLE_BELOW_THRESHOLD,
            f"idle for {minutes(idle_for)} of the {minutes(needed)} needed{setting}",
        )
    return None


def _holds_buffer(ctx: Context, node: WorkNode) -> Verdict:
    """Its free room holds an active capacity buffer's virtual pods: draining it would only make the
    buffer open a node again. The node counts as in use (no idle time) until the buffer lets go."""
    held = held_here(ctx, node.info.name)
    if held is not None:
        return codes.BUFFER, f"holds room for capacity buffer {held}"
    return None


# Checked in order; the first that holds keeps the node. IN_USE nodes are not idle at all (no idle
# time is kept for them); PROTECTIONS apply to idle nodes.
IN_USE: tuple[Check, ...] = (
    _uncordoned,
    _unread,
    _unmanaged,
    _cluster_unhealthy,
    _not_ready,
    _starting,
    _busy,
    _receives,
    _holds_buffer,
)
PROTECTIONS: tuple[TimedCheck, ...] = (
    _draining,
    _scale_in_protected,
    _consolidation_off,
    _disabled,
    _pinned,
    _young,
    _not_idle_long_enough,
)
# What keeps a busy node of a consolidating group (spillway.planner.consolidation) from being judged.
BUSY_PROTECTIONS: tuple[TimedCheck, ...] = (_draining, _disabled, _young)
# The protections no timer ends: an idle node they keep stays however long it is idle.
LASTING: tuple[TimedCheck, ...] = (_scale_in_protected, _consolidation_off, _disabled, _pinned)


def _budgeted_on(pod: PodInfo, nodes: set[str], given: set[str], now: datetime) -> bool:
    """A pod of ``nodes`` that a PodDisruptionBudget selects and that keeps its node busy (not finished,
    mirror, DaemonSet nor stuck terminating), but for one of the pods a make-room node was ``given``
    to (:meth:`ScaleDownStage._budgeted_leaving`)."""
    if not pod.pdbs or pod.node_name not in nodes or pod.key in given:
        return False
    return keeps_node_busy(pod, now)


def stays_anyway(ctx: Context, node: WorkNode) -> bool:
    """Whether scale-down keeps ``node`` idle or not, for good: it is in no managed group (or in one
    Spillway refuses), or a lasting protection keeps it. A capacity buffer's room goes there before it
    goes on a node scale-down would remove (:func:`spillway.planner.buffers.busy_first`)."""
    return _unmanaged(ctx, node) is not None or any(check(ctx, node, ctx.now) for check in LASTING)


def utilisation(node: WorkNode) -> str:
    alloc = node.info.allocatable
    parts = [
        f"{r} {100 * node.used.get(r, 0) / alloc[r]:.0f}%" for r in (CPU, MEMORY, NVIDIA_GPU) if alloc.get(r)
    ]
    return "requests " + ", ".join(parts)


def usefulness(node: WorkNode) -> float:
    _, share = dominant_share(node.used, node.info.allocatable)
    return share


class ScaleDownStage:
    """Judges every node once; drains the best candidates within MinSize and the scale-in cap."""

    def __init__(self, ctx: Context, launching: Mapping[GroupKey, list[Bin]] | None = None) -> None:
        self.ctx = ctx
        self.launching: Mapping[GroupKey, list[Bin]] = launching or {}  # room left on launching nodes
        # node -> (the NodeInfo judged, claimed_at's answer for it): asked several times a node a plan
        self._claims: dict[str, tuple[NodeInfo, datetime | None]] = {}
        self.drains: list[Drain] = []
        self.kept: list[KeptNode] = []
        self.idle_state: dict[str, NodeState] = {}
        self.underutilized: dict[str, Since] = {}  # consolidation candidates, since when (next state)
        self.movable: set[str] = set()  # busy nodes of consolidating groups whose every pod may move
        # busy nodes of consolidating groups whose pods that may not move all started recently (the
        # config's consolidation_recent_pods_minutes): marked as likely to empty soon
        self.recent: set[str] = set()
        self.rooms: dict[str, RoomState] = {}  # nodes this plan makes room on (planner.makeroom)
        self.candidates: list[tuple[WorkNode, datetime]] = []
        self.taken: dict[GroupKey, int] = {}  # group -> nodes drained by this plan (make room's too)
        self.removed: dict[GroupKey, int] = {}  # group -> nodes this plan's drains terminate
        self.draining_now: dict[GroupKey, int] = {}  # group -> nodes Spillway is draining already
        # group -> those of them a make-room drain empties for pending pods: they stay in the group
        self.making_room_now: dict[GroupKey, int] = {}
        self.orphans: set[str] = self._orphans()  # Spillway's cordons no drain owns any more
        self.restored: list[Uncordon] = []  # orphans this plan uncordons
        self.busy: list[WorkNode] = []  # busy nodes of groups that consolidate when underutilized
        # idle nodes kept only by a disruption budget a later plan's drains will find room in
        self.budget_held: set[str] = set()
        self._evictions_left: dict[str, int] | None = None
        self._elastic_left: dict[str, int] | None = None
        self._gang_left: dict[str, int] | None = None
        self._leaving: tuple[set[str], frozenset[str]] | None = None
        self._rooms_moving: set[str] = set()  # make-room nodes whose moved pods alone leave (leaving_pods)
        self.budgets = Budgets(ctx, self.draining_now)
        # the PodDisruptionBudgets every drain of the plan spends, less what drains under way and nodes
        # going away take of them
        self.pod_budgets = PodBudgets(ctx.snapshot, *self._budgeted_leaving())
        self.floors = Floors(
            ctx,
            leaving=lambda node: (
                node.info.deleting
                or node.terminating
                or (self.drain_under_way(node) and node.info.name not in ctx.state.rooms)
            ),
        )
        self._consolidation: Consolidation | None = None
        self.shrinks: list[GroupShrink] = []  # scheduled actions that lower groups (planner.schedshrink)
        self._count_draining()  # before make room, which drains within the same budgets

    def run(self) -> tuple[list[Drain], list[KeptNode], dict[str, NodeState]]:
        for node in self.ctx.nodes.values():
            self.judge(node)
        self.candidates.sort(key=self._order)
        for node, idle_since in self.candidates:
            self.choose(node, idle_since)
        if self.busy:
            judged = self.consolidation().run(self.busy)  # busy nodes were kept as "workload" so far
            drained = {d.node for d in self.drains}
            self.kept = [judged.get(k.node) or self._reasoned(k) for k in self.kept if k.node not in drained]
        from spillway.planner.schedshrink import ScheduledShrinks  # it builds on this module

        self.shrinks = ScheduledShrinks(self).run()  # ahead of scheduled actions that lower groups
        receiving = self.receiving()
        self.kept = [self._receiving(k) if k.node in receiving else k for k in self.kept]
        return self.drains, self.kept, self.idle_state

    def _receiving(self, kept: KeptNode) -> KeptNode:
        """``kept``, a node this plan moves pods onto: an idle one, judged before consolidation (or a drain
        ahead of a scheduled action) moved them, is kept for receiving them, as make room's receiving
        nodes are (:meth:`judge`); a busy one keeps what its consolidation said."""
        if kept.code == codes.RECEIVES_MOVED_PODS or self.ctx.nodes[kept.node].workload:
            return kept
        return KeptNode(
            kept.node, "consolidation moves another node's pods onto it", codes.RECEIVES_MOVED_PODS
        )

    def _reasoned(self, kept: KeptNode) -> KeptNode:
        """``kept``, a busy node consolidation left without a reason (it gives every one it judges one)
        with the workload's."""
        if kept.code != codes.WORKLOAD or kept.reason:
            return kept
        return KeptNode(kept.node, busy_reason(self.ctx.nodes[kept.node]), kept.code)

    def evictions_left(self) -> dict[str, int]:
        """batch/v1 Job -> how many more of its pods this plan's drains may evict before the Job fails
        (:func:`~spillway.planner.disruption.eviction_room`): one dict, which every drain of the plan
        spends, an idle node's expendable pods as consolidation's moves."""
        if self._evictions_left is None:
            leaving, moved = self.leaving_pods()
            self._evictions_left = eviction_room(
                self.ctx.snapshot.pods, self.ctx.snapshot.jobs_by_key(), leaving, moved
            )
        return self._evictions_left

    def elastic_left(self) -> dict[str, int]:
        """Elastic job -> how many more of its running workers this plan's drains may take before its
        minimum (:func:`~spillway.planner.disruption.elastic_room`, the workers leaving not counted:
        :meth:`leaving_pods`): one dict, which every drain of the plan spends, an idle node's expendable
        workers as consolidation's and make room's moves."""
        if self._elastic_left is None:
            leaving, moved = self.leaving_pods()
            pods = (p for p in self.ctx.snapshot.pods if p.node_name not in leaving and p.key not in moved)
            self._elastic_left = elastic_room(pods, self.ctx.snapshot.jobs_by_key())
        return self._elastic_left

    def gang_left(self) -> dict[str, int]:
        """Gang -> how many more of its running members this plan's drains may take before its
        minMember (:func:`~spillway.planner.consolidation.gang_room`, the members leaving not counted:
        :meth:`leaving_pods`): one dict, which every drain of the plan spends, an idle node's expendable
        Volcano-preemptable members as consolidation's and make room's moves."""
        if self._gang_left is None:
            self._gang_left = gang_room(self.ctx.snapshot, *self.leaving_pods())
        return self._gang_left

    def leaving_pods(self) -> tuple[set[str], frozenset[str]]:
        """The pods leaving, or running nowhere: (the nodes all of whose pods are, :meth:`workers_leaving`;
        the pods a make-room drain under way moves off a node that stays, ``RoomState.moved``). A make
        room evicts only the pods it names and leaves the others running, so only those leave its node;
        a room recorded before its moved pods were (``moved`` empty) counts its whole node, as before.
        A moved pod leaves only while it is on that node: its controller may make it again under the same
        name (a StatefulSet's, a training operator's or Volcano's pod), and running elsewhere it counts."""
        if self._leaving is None:
            nodes: set[str] = set()
            moved: dict[str, str] = {}  # pod key -> the room node it is moved off
            for name, node in self.ctx.nodes.items():
                if not self.workers_leaving(node):
                    continue
                room = self.ctx.state.rooms.get(name)
                if (
                    room is not None
                    and room.moved
                    and not node.going_away
                    and not out_of_service(node.info, self.ctx.config, self.ctx.now)
                ):
                    moved.update(dict.fromkeys(room.moved, name))
                else:
                    nodes.add(name)
            self._rooms_moving = set(moved.values())
            pods = self.ctx.snapshot.pods if moved else ()
            self._leaving = (
                nodes,
                frozenset(p.key for p in pods if p.key in moved and moved[p.key] == p.node_name),
            )
        return self._leaving

    def consolidation(self) -> Consolidation:
        """The plan's one consolidation: make-room swaps and consolidation drains share its room."""
        if self._consolidation is None:
            self._consolidation = Consolidation(self)
        return self._consolidation

    def receiving(self) -> frozenset[str]:
        """The nodes this plan's drains (consolidation, make room) move pods onto."""
        return frozenset(self._consolidation.receiving) if self._consolidation is not None else frozenset()

    def keep(self, node: WorkNode, verdict: tuple[str, str]) -> None:
        code, reason = verdict
        self.kept.append(KeptNode(node.info.name, reason, code))

    def judge(self, node: WorkNode) -> None:
        """Keep the node with a reason (an orphan: restore it), or make it a candidate."""
        orphan = node.info.name in self.orphans
        for check in IN_USE:
            verdict = check(self.ctx, node)
            if verdict is not None:
                self._in_use(node, check, verdict, orphan=orphan)
                return
        if self._consolidation is not None and node.info.name in self._consolidation.receiving:
            self.keep(node, (codes.RECEIVES_MOVED_PODS, "make room moves another node's pods onto it"))
            return  # in use from now on (a busy node's consolidation says the same)
        idle_since = self._idle_since(node)
        if self._claimed(node, idle_since):
            return
        for protection in PROTECTIONS:
            verdict = None if orphan and protection is _draining else protection(self.ctx, node, idle_since)
            if verdict is not None:
                self._keep_or_restore(node, verdict, orphan=orphan)
                return
        self.candidates.append((node, idle_since))

    def _in_use(self, node: WorkNode, check: Check, verdict: tuple[str, str], *, orphan: bool) -> None:
        """Keep a node ``check`` found in use: a busy node of a group that consolidates when underutilized
        is judged by consolidation next; a NotReady node whose only work is pods that never started
        (work until its unready time, :func:`_not_ready`) is unneeded all the same, as cluster-autoscaler
        counts it when they may move, so its idle timer runs; but not while it is still registering
        (:func:`~spillway.planner.health.registering`: capacity launching, whose idle timer starts at the
        end of its start window, as an empty one's does)."""
        if check is _busy:
            if not orphan and mode(self.ctx, node.group) == WHEN_UNDERUTILIZED:
                self.busy.append(node)  # consolidation judges it in run(), and gives the reason
                self.kept.append(KeptNode(node.info.name, "", codes.WORKLOAD))
                return
            verdict = (codes.WORKLOAD, busy_reason(node))
        self._keep_or_restore(node, verdict, orphan=orphan)
        if orphan:
            return
        unstarted_only = node.workload and node.workload == node.unstarted
        if (
            check is _not_ready
            and unstarted_only
            and not registering(node.info, self.ctx.config, self.ctx.now)
        ):
            self._idle_since(node)

    def _keep_or_restore(self, node: WorkNode, verdict: tuple[str, str], *, orphan: bool) -> None:
        """Keep the node; an orphaned drain's node that cannot be drained now is restored instead."""
        code, why = verdict
        if not orphan or node.group is None or code == codes.UNCORDONED:
            self.keep(node, verdict)
            return
        reason = (
            f"{codes.ORPHANED_DRAIN_RESTORED}: {self._orphan_age(node)}; it is not drained now ({why}), "
            "so it is uncordoned and its draining taint lifted"
        )
        self.restored.append(
            Uncordon(node.info.name, node.group.name, reason, node.info.cordon_digest, node.group.region)
        )
        self.kept.append(KeptNode(node.info.name, reason, codes.ORPHANED_DRAIN_RESTORED))

    def _orphans(self) -> set[str]:
        """Nodes whose Spillway cordon no drain owns any more (:func:`orphaned_cordon`)."""
        ctx = self.ctx
        return {
            name for name, node in ctx.nodes.items() if orphaned_cordon(node, ctx.state, ctx.config, ctx.now)
        }

    def _orphan_bound(self, node: WorkNode) -> timedelta:
        """How long Spillway's cordon on the node may be its drain's or its give-back's (:func:`cordon_bound`)."""
        return cordon_bound(node, self.ctx.config)

    def _orphan_age(self, node: WorkNode) -> str:
        bound = minutes(self._orphan_bound(node))
        if node.info.cordoned_at is None or aware(node.info.cordoned_at) > self.ctx.now:
            return f"a give-back cordoned it at a time not known or ahead, and left it (its lease {bound})"
        age = self.ctx.now - aware(node.info.cordoned_at)
        if node.info.cordon_give_back:
            return f"a give-back cordoned it {minutes(age)} ago and left it (its lease {bound})"
        if awaits_replacement(node):
            return (
                f"Spillway emptied it {minutes(age)} ago for its group to replace (a rebalance recommendation), and "
                f"the group has not replaced it (REPLACEMENT_WAIT_MINUTES {bound})"
            )
        return (
            f"Spillway cordoned it {minutes(age)} ago and no drain owns it (orphaned_drain_minutes {bound})"
        )

    def _idle_since(self, node: WorkNode) -> datetime:
        previous = self.ctx.state.nodes.get(node.info.name)
        idle_since = aware(previous.idle_since) if previous else self.ctx.now
        self.idle_state[node.info.name] = NodeState(idle_since=idle_since)
        return idle_since

    def _claimed(self, node: WorkNode, idle_since: datetime) -> bool:
        """A recent plan drained the node and its drain has not cordoned it yet: the drain owns it."""
        verdict = self._claim(node, idle_since)
        if verdict is not None:
            self.keep(node, verdict)
        return verdict is not None

    def claimed_at(self, node: WorkNode) -> datetime | None:
        """When a recent plan drained the node, if its drain has not cordoned it yet: the drain owns it
        (no drain of this plan takes it; the drain evicts only the pods it was planned for, and
        cancels when it finds others there)."""
        info = node.info
        known = self._claims.get(info.name)
        if known is not None and known[0] is info:
            return known[1]
        previous = self.ctx.state.nodes.get(info.name)
        claimed = aware(previous.draining_since) if previous and previous.draining_since else None
        claim = self.ctx.drain_claim
        if claimed is None or self.ctx.now - claimed >= claim or info.unschedulable:
            claimed = None
        self._claims[info.name] = (info, claimed)
        return claimed

    def claim_ended(self, node: WorkNode) -> bool:
        """The drain that claimed the node (:meth:`claimed_at`) has ended keeping it: it failed, timed
        out, was cancelled or rejected, its node given back uncordoned and its remaining pods running; or
        a make-room drain was released, its moved pods evicted and the node uncordoned (the plan forgets the
        room then: :func:`~spillway.planner.makeroom.hold_rooms`; its claim ended, no pod of the node
        counts as leaving, :meth:`workers_leaving`).
        It evicts nothing more and takes nothing away; its claim still keeps the node from another drain
        until it lapses (it just ended there). The drain names its plan's time (``State.ended_drains``,
        the request's ``planned_at``: this claim's time, to the whole second), so an older plan's drain
        that ended after a newer plan claimed the node again (queued past its own claim, cancelled at
        validation) frees nothing of the newer claim, whose drain is still to run; no clock of the
        drain's is compared with the plan's."""
        claimed = self.claimed_at(node)
        ended = self.ctx.state.ended_drains.get(node.info.name)
        return (
            claimed is not None and ended is not None and aware(ended.since) == claimed.replace(microsecond=0)
        )

    def live_claim(self, node: WorkNode) -> bool:
        """A recent plan's claim on the node whose drain is waiting to start or running (not ended:
        :meth:`claim_ended`)."""
        return self.claimed_at(node) is not None and not self.claim_ended(node)

    def terminating_claim(self, node: WorkNode) -> bool:
        """A recent plan's drain that will take the node away owns it, and has not cordoned it yet: a
        disruption under way, and no room for anything. (A make-room drain, which keeps the node and
        gives it to the pods it was made for, is neither once it uncordons the node; its claim only
        keeps the node from a drain of its own. Nor is a drain that ended keeping the node:
        :meth:`claim_ended`.)"""
        return self.live_claim(node) and node.info.name not in self.ctx.state.rooms

    def _claim(self, node: WorkNode, idle_since: datetime) -> Verdict:
        """Why a recent plan's drain owns the node (its claim carried into the next state), or None."""
        ctx, name = self.ctx, node.info.name
        claimed = self.claimed_at(node)
        if claimed is None:
            return None
        self.idle_state[name] = NodeState(idle_since=idle_since, draining_since=claimed)
        if self.claim_ended(node):
            return codes.DRAIN_PLANNED, (
                f"drain planned {minutes(ctx.now - claimed)} ago ended without removing the node; "
                "not drained again until its claim lapses"
            )
        return codes.DRAIN_PLANNED, f"drain planned {minutes(ctx.now - claimed)} ago; the drain owns it"

    def _order(self, candidate: tuple[WorkNode, datetime]) -> tuple[object, ...]:
        """Orphaned drains first (already cordoned and emptied), then unready nodes (of no use: NotReady,
        or Ready and never initialized, :func:`unready_now`), then overflow regions (bring work
        home), then the least useful, then the oldest."""
        node = candidate[0]
        created = node.info.created_at
        return (
            node.info.name not in self.orphans,
            not unready_now(self.ctx, node),
            -self.ctx.region_key(node.group) if node.group else 0,
            usefulness(node),
            aware(created) if created else self.ctx.now,
            node.info.name,
        )

    def drain_under_way(self, node: WorkNode) -> bool:
        """A drain that will take the node away is under way: Spillway cordoned it (but an orphan, which
        is restored or counted when drained again, and a node this plan uncordons), or a recent plan
        drained it and has not cordoned it yet (:meth:`terminating_claim`)."""
        name = node.info.name
        if name in self.ctx.uncordoned:
            return False
        return (node.info.cordoned_by_spillway and name not in self.orphans) or self.terminating_claim(node)

    def workers_leaving(self, node: WorkNode) -> bool:
        """The node's pods are leaving, or run nowhere: a drain under way (:meth:`drain_under_way`), a
        recent make-room drain's claim (it evicts the pods it names before it cordons the node, as a
        consolidation's does: :meth:`claimed_at`), the node is out of service (NotReady past
        registering, or being deleted: :func:`~spillway.planner.health.out_of_service`; its kubelet
        runs nothing, and the taint manager evicts its pods once their not-ready toleration, 300 s by
        default, runs out), or it goes away without a drain (its instance terminating in its group or
        stopping in its warm pool, its Node Ready for a while yet: :attr:`WorkNode.going_away`). An
        elastic job counts none of its workers there toward its minimum, a gang none of its members, a
        batch/v1 Job its pods there as failed already (the pod garbage collector deletes them with
        the Node)."""
        return (
            self.drain_under_way(node)
            or self.live_claim(node)
            or node.going_away
            or out_of_service(node.info, self.ctx.config, self.ctx.now)
        )

    def _budgeted_leaving(self) -> tuple[list[PodInfo], list[PodInfo]]:
        """The pods under a PodDisruptionBudget that are on their way out, not counted off its
        ``disruptionsAllowed`` yet (:class:`~spillway.planner.consolidation.PodBudgets`): those of nodes
        a drain of an earlier plan will still evict (:meth:`drain_under_way`, or a recent plan's claim
        whose drain has not ended, :meth:`live_claim`; not the pods a make-room drain's node was given to, which it does not evict),
        and those of nodes going away without a drain (being deleted, their instance terminating or
        stopping in its warm pool: :attr:`WorkNode.going_away`). None when no budget is read (most
        snapshots)."""
        ctx = self.ctx
        if not ctx.snapshot.pdbs:
            return [], []
        draining, going = self._draining_or_going()
        if not draining and not going:
            return [], []
        given = {key for room in ctx.state.rooms.values() for key in room.pods}
        stay = self._staying_on_rooms()
        pods = [p for p in ctx.snapshot.pods if _budgeted_on(p, draining | going, given | stay, ctx.now)]
        return [p for p in pods if p.node_name in draining], [p for p in pods if p.node_name in going]

    def _staying_on_rooms(self) -> set[str]:
        """The pods a make-room drain under way leaves running on its node: all but the ones it moves
        (``RoomState.moved``; none for a room recorded before they were, nor on a node out of service or
        going away, whose pods all leave: :meth:`leaving_pods`)."""
        _, moved = self.leaving_pods()
        rooms = self._rooms_moving  # set by leaving_pods: its moved pods may all be gone already
        if not rooms:
            return set()
        return {p.key for p in self.ctx.snapshot.pods if p.node_name in rooms and p.key not in moved}

    def _draining_or_going(self) -> tuple[set[str], set[str]]:
        """The nodes a drain under way or claimed (and not ended) will still empty, and the others going away without
        a drain (:attr:`WorkNode.going_away`)."""
        draining: set[str] = set()
        going: set[str] = set()
        for name, node in self.ctx.nodes.items():
            if self.drain_under_way(node) or self.live_claim(node):
                draining.add(name)
            elif node.going_away:
                going.add(name)
        return draining, going

    def going_now(self) -> dict[GroupKey, int]:
        """Per group, the nodes drains under way remove (a make-room drain's node stays in its group)."""
        return {key: n - self.making_room_now.get(key, 0) for key, n in self.draining_now.items()}

    def _count_draining(self) -> None:
        """The drains under way per group, and the other nodes out of service (NotReady, being deleted:
        :func:`~spillway.planner.health.out_of_service`), for the budgets."""
        for node in self.ctx.nodes.values():
            if node.group is None:
                continue
            if self.drain_under_way(node):
                self.draining_now[node.group.key] = self.draining_now.get(node.group.key, 0) + 1
                if node.info.name in self.ctx.state.rooms:  # a make-room drain's cordon: the node stays
                    self.making_room_now[node.group.key] = self.making_room_now.get(node.group.key, 0) + 1
            elif out_of_service(node.info, self.ctx.config, self.ctx.now):
                if node.info.name not in self.budgets.outside:  # never initialized: no budget counts it
                    self.budgets.out.setdefault(node.group.key, set()).add(node.info.name)
                if self._out_for_good(node):
                    self.budgets.dead.add(node.info.name)

    def _out_for_good(self, node: WorkNode) -> bool:
        """Out of service and not coming back (:meth:`Budgets.refusal` exempts its idle drain): being
        deleted, or NotReady (kubelet's False or the node controller's Unknown) for the group's
        ``scale_down_unready_minutes`` since its Ready condition last changed (else since it was
        created; never when neither is known)."""
        info = node.info
        since = info.ready_changed_at or info.created_at
        if info.deleting:
            return True
        if info.ready or since is None:
            return False
        unready = timedelta(minutes=self.ctx.config_for(node.group).scale_down_unready_minutes)
        return self.ctx.now - aware(since) >= unready

    def protected(
        self, node: WorkNode, *, removes: bool = True, young: bool = True, buffer: bool = True
    ) -> Verdict:
        """What keeps a busy node from consolidation before its pods are looked at: a drain a recent
        plan claimed, a pending pod planned onto it, room it holds for a capacity buffer (unless
        ``buffer`` is False), a cordon, ``scale-down-disabled`` or ``do-not-disrupt``, its youth (unless
        ``young`` is False; both are False for a drain ahead of a scheduled action, which removes a node
        anyway, and a buffer's virtual pods are the lowest of all demand); and, for a drain that
        terminates it (``removes``; make room keeps its node), its instance's own scale-in protection
        and a DaemonSet or mirror pod annotated ``do-not-disrupt`` (:func:`_pinned`)."""
        previous = self.ctx.state.nodes.get(node.info.name)
        verdict = self._claim(node, aware(previous.idle_since)) if previous is not None else None
        verdict = verdict or _receives(self.ctx, node) or (_holds_buffer(self.ctx, node) if buffer else None)
        for protection in BUSY_PROTECTIONS:
            if young or protection is not _young:
                verdict = verdict or protection(self.ctx, node, self.ctx.now)
        if removes:
            verdict = verdict or _scale_in_protected(self.ctx, node, self.ctx.now)
            verdict = verdict or _pinned(self.ctx, node, self.ctx.now)
        return verdict

    def take(self, node: WorkNode, *, removes: bool = True) -> None:
        """Count a drain of ``node`` against its group, and claim the node in the next state;
        ``removes``: the drain terminates it (a make-room drain keeps it)."""
        assert node.group is not None
        self.taken[node.group.key] = self.taken.get(node.group.key, 0) + 1
        if removes:
            self.removed[node.group.key] = self.removed.get(node.group.key, 0) + 1
            self.floors.remove(node.info, node.group)
            gone = room_less(node.info.allocatable, node.daemon_used)
            for slack in self.ctx.min_room_slack.values():
                for name in slack:
                    slack[name] -= gone.get(name, 0)
        self.budgets.out.get(node.group.key, set()).discard(node.info.name)  # counted as taken now
        previous = self.ctx.state.nodes.get(node.info.name)
        idle_since = aware(previous.idle_since) if previous else self.ctx.now
        self.idle_state[node.info.name] = NodeState(idle_since=idle_since, draining_since=self.ctx.now)

    def limit(self, node: WorkNode, reason: BudgetReason = EMPTY) -> Verdict:
        """The group's Terminate process, MinSize, the per-plan scale-in cap, an instance to terminate, and
        the disruption budgets that limit disruptions of ``reason`` (an empty node's drain, unless
        consolidation says otherwise). A make-room drain keeps its node, so only the budgets bind it.
        The Terminate process holds the node's instance by the one rule the drain step follows
        (:meth:`~spillway.model.nodegroup.NodeGroup.terminate_held`): InService, not Pending:Wait."""
        group = node.group
        assert group is not None
        suspended = group.terminate_held(node.info.instance_id or "")
        if suspended is not None:  # drained, its instance would stay and be paid for, its node empty
            return (
                codes.TERMINATE_SUSPENDED,
                f"group {group.name}: {suspended}: Auto Scaling does not terminate its InService instances "
                "to scale in until it is resumed",
            )
        # MinSize and the scale-in cap count the nodes that go: a make-room drain, this plan's or one
        # under way, keeps its node (the pending pods take it), so only the disruption budgets count it
        taken, removed = self.taken.get(group.key, 0), self.removed.get(group.key, 0)
        left = group.desired - self.going_now().get(group.key, 0) - removed
        if left <= group.min_size:
            return codes.MIN_SIZE, f"group {group.name} at MinSize {group.min_size}"
        floor = scheduled_min(self.ctx, group, left) or self.floors.refusal(node.info, group)
        if floor is not None:
            return floor
        cap = max(1, math.floor(self.ctx.config.max_scale_in_fraction * group.desired))
        if removed >= cap:
            return (
                codes.SCALE_IN_CAP,
                f"scale-in of {group.name} capped at {cap} node(s) per plan (max_scale_in_fraction)",
            )
        if node.info.instance_id is None:
            return codes.NO_INSTANCE_ID, "no EC2 instance id in spec.providerID"
        return self._min_room(node) or self.budgets.refusal(group.key, taken, reason, node.info.name)

    def _min_room(self, node: WorkNode) -> Verdict:
        """A coscheduling gang this plan places needs the cluster's free room to cover its PodGroup's
        ``minResources`` (:mod:`spillway.planner.minresources`): a node whose removal takes all it
        gives besides its DaemonSets (its pods move into the room of others) stays when that would
        leave the gang short."""
        gone = room_less(node.info.allocatable, node.daemon_used)
        for gang, slack in sorted(self.ctx.min_room_slack.items()):
            short = spends(slack, gone)
            if short:
                return (
                    codes.MIN_RESOURCES,
                    f"gang {gang}'s PodGroup minResources counts its room ({', '.join(short)}), which "
                    "coscheduling asks the cluster to have free before it admits the gang's pods",
                )
        return None

    def _expendable_refusal(self, node: WorkNode, taken: Taken) -> Verdict:
        """Why the drain may not evict the node's expendable pods: past their budgets, past their Jobs'
        backoffLimits (the pods each batch/v1 Job counts as failed, :meth:`evictions_left`), below their
        elastic jobs' minimums (the running workers of each, :meth:`elastic_left`) or below their gangs'
        minMember (their Volcano-preemptable members, :meth:`gang_left`): a low priority lets the pod
        go, not its job or gang below its minimum."""
        counted, workers, members = taken
        return (
            self.pod_budgets.refusal(node.expendable)
            or backoff_refusal(counted, self.evictions_left())
            or elastic_refusal(workers, self.elastic_left())
            or gang_refusal(members, self.gang_left())
        )

    def expendable_taken(self, node: WorkNode) -> Taken:
        """What evicting the node's expendable pods takes: (batch/v1 Job -> its pods it counts as failed,
        elastic job -> its running workers, gang -> its running preemptable members)."""
        if not node.expendable:
            return {}, {}, {}
        jobs = self.ctx.snapshot.jobs_by_key()
        return (
            counted_by_job(node.expendable, jobs),
            workers_evicted(node.expendable, jobs),
            members_evicted(node.expendable),
        )

    def spend_expendable(self, node: WorkNode, taken: Taken) -> None:
        """A drain evicts the node's expendable pods: their budgets, Jobs' failures, elastic jobs'
        workers and gangs' members are spent."""
        counted, workers, members = taken
        self.pod_budgets.spend(node.expendable)
        for job, evicted in counted.items():
            self.evictions_left()[job] -= evicted
        for job, n in workers.items():
            self.elastic_left()[job] = self.elastic_left().get(job, 0) - n
        for gang, n in members.items():
            if gang in self.gang_left():
                self.gang_left()[gang] -= n

    def _note_budget(self, node: WorkNode, code: str) -> None:
        """An idle node a disruption budget keeps is held only until a later drain finds room in it
        (drains under way end, a window closes), unless the budget allows none for good."""
        group = node.group
        if (
            code == codes.DISRUPTION_BUDGET
            and group is not None
            and not self.budgets.lasting(group.key, EMPTY)
        ):
            self.budget_held.add(node.info.name)

    def choose(self, node: WorkNode, idle_since: datetime) -> None:
        orphan = node.info.name in self.orphans
        taken = self.expendable_taken(node)
        verdict = self.limit(node) or self._expendable_refusal(node, taken)
        # an orphan's drain started before: it is finished, not restored only to be drained again
        verdict = verdict or (None if orphan else cooldown(self.ctx))
        if verdict is not None:
            self._note_budget(node, verdict[0])
            self._keep_or_restore(node, verdict, orphan=orphan)
            return
        ctx, info, group = self.ctx, node.info, node.group
        assert group is not None and info.instance_id is not None
        self.take(node)
        self.spend_expendable(node, taken)
        self.idle_state[info.name] = NodeState(idle_since=idle_since, draining_since=ctx.now)
        where = group.region
        if ctx.primary and group.region != ctx.primary:
            where += f", overflow region (bringing work home to {ctx.primary})"
        needed, setting = idle_needed(ctx, node)
        reason = (
            f"no workload pods for {minutes(ctx.now - idle_since)} "
            f"(threshold {minutes(needed)}{setting}); group {group.name} in {where}"
        )
        code, pods = "", tuple(sorted(p.key for p in node.expendable))
        if pods:  # they keep no node: the drain evicts them (and no pod that came since)
            code = codes.EXPENDABLE_PODS
            reason += (
                f"; evicts its {len(pods)} expendable pod(s) (priority below expendable_priority_cutoff)"
            )
        if node.never_started:  # what made it removable: they go with it, nothing to evict (it evicts `pods`)
            code, reason = codes.NEVER_STARTED, f"{self._never_started(node)}; {reason}"
        if orphan:
            reason = f"{codes.ORPHANED_DRAIN_FINISHED}: {self._orphan_age(node)}; {reason}"
        unready = ctx.config_for(group).scale_down_unready_minutes if not info.ready else None
        controllers = controllers_of_staying(node)
        self.drains.append(
            Drain(
                info.name,
                info.instance_id,
                group.name,
                group.region,
                reason,
                code,
                pods,
                unready,
                controllers,
            )
        )

    def _never_started(self, node: WorkNode) -> str:
        """Why a NotReady node's pods that never started keep it from nothing, naming them."""
        since = node.info.ready_changed_at or node.info.created_at
        assert since is not None  # it is past its unready time
        named = ", ".join(node.never_started[:3]) + (" ..." if len(node.never_started) > 3 else "")
        return (
            f"not Ready for {minutes(self.ctx.now - aware(since))}; its pods never started: {named} (they go "
            "with the node: the pod garbage collector deletes them with the Node, and their controllers, if "
            "any, recreate them)"
        )


def controllers_of_staying(node: WorkNode) -> tuple[tuple[str, str, str, str, int], ...]:
    """(pod, kind, name, uid, priority): the controller of each expendable pod of ``node`` that goes
    with it (it tolerates the drain's cordon and taint: :func:`~spillway.planner.disruption.comes_back`),
    and the pod's priority. Its controller may replace such a pod on the node before the drain; the
    drain takes a replacement of no higher priority as the same workload (``spillway.act.drain.successors``:
    one controller may make pods of several priorities, an expendable step and then a training one).
    None for a pod whose controller's uid the snapshot does not hold (one written before it)."""
    return tuple(
        (p.key, p.owner_kind, p.owner_name, p.owner_uid, p.priority)
        for p in sorted(node.expendable, key=lambda p: p.key)
        if p.controlled and p.owner_kind and p.owner_name and p.owner_uid and comes_back(p)
    )
