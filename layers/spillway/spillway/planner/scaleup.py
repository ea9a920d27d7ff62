"""Scale-up: each pod class goes through the placement stages in order, then to new nodes.

1. free room on Ready, schedulable nodes (the scheduler will get there; nothing to launch);
2. capacity already launching (desired minus Ready nodes, per group), as empty template nodes;
3. nodes Spillway itself cordoned, which are uncordoned instead of launching;
4. new nodes: first fit into nodes this plan already opens, then more nodes of the groups the expander
   ranks first. A group never passes MaxSize, a backed-off group is skipped, and what does not fit
   goes on to the next group — which is how demand spills into the secondary region.

Gangs (:class:`GangPlacement`) are placed all or none in one region, or one zone when their pods ask
for it; a best-effort-atomic ProvisioningRequest's new nodes all come from one node group, the one whose
option for the whole request the expander ranks best (:class:`OneGroup`). A gang a recent plan launched
atomically (``State.gangs``, a group tagged
``spillway.io/atomic-launch``) is not placed again while its launch may still be under way
(:class:`InFlight`): its pods stay pending (``gang-launching``) and the launching capacity of its group
is kept for it.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from spillway.model.cluster import TaintT
from spillway.model.groupkey import GroupKey
from spillway.model.k8s import DELETION_TAINTS
from spillway.model.nodegroup import NodeGroup
from spillway.model.resources import PODS, Resources, add_into, describe, fit_count, room_less
from spillway.model.state import GangState
from spillway.planner import codes
from spillway.planner.buffers import busy_first
from spillway.planner.classes import NOT_ASKABLE, Gangs, PodClass
from spillway.planner.context import Context, WorkNode, aware, iso, minutes
from spillway.planner.expander import (
    Expander,
    WholeOption,
    class_not_movable,
    on_demand_cap,
    options,
    spot_reuse_refusal,
)
from spillway.planner.groups import (
    backoff_reason,
    empty_room,
    fresh_node_selected,
    fresh_node_unsure,
    fresh_selected_at,
    gang_backoff,
    group_ceiling,
    launch_labels,
    launching_places,
    new_node_labels,
    place_labels,
    similar_groups,
    zone_backoff,
)
from spillway.planner.limits import Limits
from spillway.planner.minresources import balance, bound_own, min_room
from spillway.planner.placement import (
    Bin,
    DomainPools,
    Pool,
    copy_bins,
    fill_bins,
    launching_bins,
    place_on_launching,
    place_on_nodes,
    pools,
    reclaimable_pools,
    registered_launching,
    room_bound,
    schedulable_pools,
    unmarked_first,
)
from spillway.planner.predicates import why_not_placeable
from spillway.planner.preemption import VictimPool, place_by_preemption, victim_pools
from spillway.planner.topology import Spot
from spillway.planner.types import GangLaunch, PendingPod, Placement, ScaleUp
from spillway.planner.unread import unread_reason

REGION_LABEL = "topology.kubernetes.io/region"
NO_GROUP = GroupKey("", "")  # ScaleUpStage.group naming no group: new nodes nowhere
ZONE_LABEL = "topology.kubernetes.io/zone"
FOLLOWS_LEADER = (
    "waits for {pod}, the first of its group: its required pod affinity on kubernetes.io/hostname selects "
    "its own pods and none runs yet, so kube-scheduler binds it only to the node that one runs on; no "
    "node is added for it"
)

FOLLOWS_ZONE_LEADER = (
    "waits for {pod}, the first of its group: its required pod affinity on {key} selects its own pods "
    "and none runs yet, so kube-scheduler runs it only in that pod's domain, not known until it runs (a "
    "new node of a group over several zones comes up in a zone EC2 picks); no node is added for it"
)


@dataclass(frozen=True, slots=True)
class Skip:
    """A group that fits a class but gives it no (more) nodes, and why."""

    code: str  # codes.BACKED_OFF, codes.MAX_SIZE or a limit's code (codes.TENANT_LIMIT, ...)
    reason: str


class ScaleUpStage:
    """Places every class; decides how many new nodes each group gets. Every attribute set here."""

    def __init__(self, ctx: Context, expander: Expander) -> None:
        self.ctx = ctx
        self.expander = expander
        schedulable = schedulable_pools(ctx)
        # the schedulable nodes that run expendable pods a pending pod may preempt, with their pools
        # (kube-scheduler's preemption picks its node by its victims, whatever the node's taints score)
        self.preemptible: list[VictimPool] = victim_pools(schedulable)
        self.schedulable: list[Pool] = unmarked_first(schedulable)  # free room: as kube-scheduler scores
        self.reclaimable: list[Pool] = reclaimable_pools(ctx)
        self.empty: dict[GroupKey, Resources] = empty_room(ctx)
        self.launching = launching_bins(ctx, self.empty)
        # new nodes per (group, gang): a gang's new nodes are its own, launched together
        self.new_bins: dict[tuple[GroupKey, str | None], list[Bin]] = {(g.key, None): [] for g in ctx.groups}
        # MaxSize, or the lower size a scheduled action sets within the idle threshold: a node launched
        # above it now is one Auto Scaling terminates, with its pods, when the action runs
        # (none in a group carried from an earlier read: spillway.planner.unread)
        self.room: dict[GroupKey, int] = {
            g.key: 0 if g.unread else max(0, _top(ctx, g) - g.desired) for g in ctx.groups
        }
        self.backoff: dict[GroupKey, str | None] = {g.key: backoff_reason(ctx, g) for g in ctx.groups}
        self.limits = Limits(ctx)
        # Ready, initialized nodes on their way out: named when a pod they would take gets a new node
        self.leaving: list[WorkNode] = [n for n in ctx.nodes.values() if _leaving(n)]
        self.region: str | None = None  # while a gang is placed: the one region it may use
        # while a started gang's pending members are placed: the regions they may use, the one with
        # the most members first (None: an unknown region, :func:`home_regions`); None: any
        self.regions: tuple[str | None, ...] | None = None
        self.zone: str | None = None  # ... and the one zone, when its pods ask for one
        # ... and the one group it may open new nodes in (Context.one_group)
        self.group: GroupKey | None = None
        # per coscheduling gang with minResources: its bound pods' room per node (planner.minresources)
        self.bound: dict[str, dict[str, Resources]] = {}

    @property
    def launching(self) -> dict[GroupKey, list[Bin]]:
        """Per group, the room left on its nodes already launching: the context's, which charges a pod
        nominated to a registered one there (:meth:`Context.charge_nominated`)."""
        return self.ctx.launching_bins

    @launching.setter
    def launching(self, bins: dict[GroupKey, list[Bin]]) -> None:
        self.ctx.launching_bins = bins

    def run(self, classes: Sequence[PodClass]) -> list[ScaleUp]:
        self._count_launching_fresh()
        gangs: dict[str, list[PodClass]] = {}
        for cls in classes:
            if cls.gang is not None:
                gangs.setdefault(cls.gang, []).append(cls)
        started = {cls.started_gang for cls in classes if cls.started_gang is not None}
        in_flight = InFlight(self, gangs.keys(), started)
        known = (self.ctx.gangs or Gangs(self.ctx)) if gangs else None  # pod_classes read them
        held = HeldByLimits(self)
        for cls in _leaders_first(classes):
            # pods nominated to a node take its room from pods of their priority or lower on (a gang's
            # lower members meet more of them: charged member by member in its trial)
            self.ctx.charge_nominated(_placed_at(cls, gangs))
            if cls.started_gang is not None and in_flight.hold(cls.started_gang, [cls]):
                continue
            with held.serving(cls):
                if cls.gang is None:
                    self._place_loose(cls)
                elif cls is gangs[cls.gang][0] and not in_flight.hold(cls.gang, gangs[cls.gang]):
                    assert known is not None
                    self._place_gang(cls.gang, gangs[cls.gang], known)
        held.settle()
        self.ctx.charge_nominated()  # the rest: their nodes' room is theirs for scale-down and moves
        # what each gang's minResources leaves to spare once every pod is placed (pods placed after a
        # gang take room it counted): scale-down spends no more of it (planner.minresources)
        for gang, (need, placed) in sorted(self.ctx.min_room_wanted.items()):
            self.ctx.min_room_slack[gang] = min_room_balance(self, gang, need, placed)
        actions = scale_up_actions(self.ctx)
        record_gang_launches(self.ctx, actions)
        return actions

    def _count_launching_fresh(self) -> None:
        """The instances already launching that have no Node yet register running the pods a new node
        runs first (their DaemonSets'): recorded where they come up (:meth:`Planned.record_fresh`,
        the template's zone), so a zone spread that selects those pods counts them there for every
        class, as kube-scheduler will (podtopologyspread/common.go, countPodsMatchSelector). A node
        registered but not Ready yet is launching too, and its pods are in the snapshot already. Of a
        group over several zones or types, an instance Auto Scaling has launched is in the zone, and of
        the type, its answer gives (:func:`launching_places`), and runs the pods that run there; one
        not launched yet is in none EC2 has picked (no zone spread counts it until it is)."""
        registered: dict[GroupKey, int] = {}
        for node in self.ctx.nodes.values():
            if node.group is not None and not (node.info.ready and node.starting is None):
                registered[node.group.key] = registered.get(node.group.key, 0) + 1
        for group in self.ctx.groups:
            bins, fresh = self.launching.get(group.key), self._fresh(group)
            coming = sum(len(b.ids) for b in bins or ()) - registered.get(group.key, 0)
            if coming > 0 and fresh and group.template is not None:
                self._record_launching(group, coming)

    def _record_launching(self, group: NodeGroup, coming: int) -> None:
        """:meth:`_count_launching_fresh` for ``coming`` instances of ``group`` that have no Node yet."""
        template = group.template
        assert template is not None
        for (zone, kind), count in launching_places(self.ctx, group, coming).items():
            labels = place_labels(group, zone, kind)
            spot = Spot(labels, template.taints)
            self.ctx.planned.record_fresh(spot, fresh_selected_at(self.ctx, group, labels), count)
            coming -= count
        if coming > 0:
            spot = Spot(template.labels, template.taints)
            self.ctx.planned.record_fresh(
                spot, self._fresh(group), coming, fresh_node_unsure(self.ctx, group)
            )

    def _place_gang(self, gang: str, classes: list[PodClass], known: Gangs) -> None:
        """A gang's classes, all or none (:class:`GangPlacement`), with the pods this plan placed before
        them counted as a loose class counts them (:meth:`~spillway.planner.topology.Domains.after`: a gang whose pods must share
        a pending cache's zone follows the cache's new node); where its pods went counts for the pod
        topology of the classes after it (:meth:`_join`: its new nodes of a fleet group in the zone its
        launch is kept to)."""
        for cls in classes:
            cls.domains = cls.domains.after(self.ctx.planned)
        start = len(self.ctx.placements)
        GangPlacement(self, gang, classes, known).run()
        for cls in classes:
            self._join(cls, start)

    def _place_loose(self, cls: PodClass) -> None:
        """A class no gang places all or none (:meth:`_place_anywhere`); the pending members of a gang
        whose minimum runs (:attr:`PodClass.started_gang`: an elastic job's pods beyond its minimum, a
        worker recreated) only in the regions its running members are in (:func:`home_regions`: new
        nodes in the region of the most members first; members all on nodes of unknown region: room on
        such nodes only): placed one by one as any pod, but in a preferred region with room they would
        join one job over two regions (or a third), which the README's "one region" rule for gangs
        keeps out, as :meth:`GangPlacement.domains` does for a gang that has not started. Those the
        regions cannot hold stay pending, their reason naming them, ``gang-home-full`` (or
        ``gang-home-unknown``) when the groups there stopped them (:func:`_held_home`)."""
        gangs = self.ctx.gangs
        if cls.started_gang is None or gangs is None:
            self._place_anywhere(cls)
            return
        homes = home_regions(self.ctx, gangs.members_on.get(cls.started_gang, {}))
        if not homes:
            self._place_anywhere(cls)
            return
        before = len(self.ctx.pending_out)
        self.regions = homes
        try:
            self._place_anywhere(cls)
        finally:
            self.regions = None
        note = (
            f"its gang {cls.started_gang} {home_clause(homes)}, so its pending members are placed there only"
        )
        note += " (a gang is not split over regions)" if len(homes) == 1 else " (a gang is not split further)"
        mine = set(cls.pods)
        self.ctx.pending_out[before:] = [
            _held_home(p, note, homes) if p.pod in mine else p for p in self.ctx.pending_out[before:]
        ]

    def _place_anywhere(self, cls: PodClass) -> None:
        """A loose class, in the region set (any when none); the members of a coscheduling PodGroup with
        ``minResources`` with the room it asks (:class:`MemberPlacement`)."""
        cls.domains = cls.domains.after(self.ctx.planned)
        start = len(self.ctx.placements)
        if cls.min_room_gang is not None and cls.free_only is None:
            MemberPlacement(self, cls, cls.min_room_gang).run()
        elif (cls.domains.leads_group or cls.domains.leads_zone) and cls.remaining > 1:
            self._place_leader(cls)
        else:
            self.place(cls)
        self._join(cls, start)

    def _place_leader(self, cls: PodClass) -> None:
        """A class whose required pod affinity selects its own pods, none running: its first pod is
        placed first. kube-scheduler lets the first of such a group go to any node and then runs the
        others only in its domains (interpodaffinity/filtering.go, satisfyPodAffinity: the exception
        holds only while no pod matches). On the hostname, only the first is placed: the others bind
        only beside it, and cluster-autoscaler's estimator finds them no room on a second template
        node; nodes launched for them would stay empty. They follow it once it runs (its node's free
        room). Over a zone (any other key), the others follow it into its node's zone in this plan
        when that zone is known (an existing node's, a one-zone group's); a new node of a group over
        several zones comes up in a zone EC2 picks, so they wait for the first to run there, as more
        new nodes of that group might come up elsewhere."""
        followers = cls.pods[cls.next + 1 :]
        del cls.pods[cls.next + 1 :]
        start = len(self.ctx.placements)
        verdict = self.place(cls)
        cls.pods.extend(followers)
        where = self._leader_domains(cls, start) if verdict is None and cls.domains.leads_zone else None
        if where is not None:
            cls.domains = cls.domains.led_to(where)
            for pool in (*self.schedulable, *self.reclaimable):
                pool.blocked.pop(id(cls), None)  # judged for the first pod, anywhere
            self.place(cls)
            return
        leader = cls.pods[cls.next - 1]
        if cls.domains.leads_zone:
            keys = ", ".join(sorted({key for _, key in cls.domains.leads_zone}))
            default = FOLLOWS_ZONE_LEADER.format(pod=leader, key=keys)
        else:
            default = FOLLOWS_LEADER.format(pod=leader)
        code, why = verdict or (codes.POD_TOPOLOGY, default)
        for pod in cls.take(len(followers)):
            self.ctx.pending_out.append(PendingPod(pod, why, code))

    def _leader_domains(self, cls: PodClass, start: int) -> dict[str, str] | None:
        """The domains (key -> value, for each key of the class's waived pod affinity) of the node its
        first pod was placed on since ``start``; None when one is unknown (a new or launching node of a
        group whose template has no zone)."""
        leader = cls.pods[cls.next - 1]
        placement = next((p for p in self.ctx.placements[start:] if p.pod == leader), None)
        if placement is None:
            return None
        node = self.ctx.nodes.get(placement.node)
        if node is not None:
            labels: Mapping[str, str] = node.info.labels
        else:
            group = next((g for g in self.ctx.groups if g.key == placement.group), None)
            labels = group.template.labels if group is not None and group.template is not None else {}
        where = {key: labels.get(key) for _, key in cls.domains.leads_zone}
        return {k: v for k, v in where.items() if v is not None} if None not in where.values() else None

    def place(self, cls: PodClass) -> tuple[str, str] | None:
        """Place the class; returns (code, reason) when pods remain, after recording them pending
        (unless a gang is being placed: the gang reports for all its pods)."""
        if cls.free_only is not None:
            return self._place_free_only(cls, cls.free_only)
        if cls.domains.counted:
            return self._place_in_rounds(cls)
        start = len(self.ctx.placements)
        self._place_existing(cls)
        while cls.remaining:  # under a hostname spread, each pass raises the least loaded node
            before = cls.remaining
            self._raise_spread_caps(cls, start)
            if not cls.domains.host_spreads:
                break
            self._place_existing(cls)
            if cls.remaining == before:
                break
        if not cls.remaining:
            return None
        candidates, rejected = self._choices(cls)
        leaving = self._leaving_fits(cls)
        skipped = self._place_more(cls, candidates)
        self._note_leaving(leaving, start)
        return self._left(cls, candidates, rejected, skipped, leaving) if cls.remaining else None

    def _place_free_only(self, cls: PodClass, held: tuple[str, str]) -> tuple[str, str] | None:
        """Free room on Ready nodes, nothing more (:mod:`spillway.planner.shrinks`,
        :func:`spillway.planner.classes.held_young`); ``held``: the code and reason of the pods left."""
        self._place_existing(cls)
        if not cls.remaining:
            return None
        code, why = held
        for pod in cls.take(cls.remaining):
            self.ctx.pending_out.append(PendingPod(pod, why, code))
        return held

    def _place_in_rounds(self, cls: PodClass) -> tuple[str, str] | None:
        """A class with a zone spread (or one pod per zone) is placed in rounds until one places nothing:
        a round gives each zone what its skew allows above the least loaded zone as the round began,
        free room before launching capacity before new nodes; the next round starts from the zones the
        last one filled (:class:`spillway.planner.topology.ZoneSpread`). Free room binds now, so it is
        judged on the domains there are; launching and new nodes also count the zones the class's
        groups may still open a node in (once one registers, the scheduler counts its zone), and a zone
        none of them could open after all is dropped for one more round."""
        candidates, rejected = self._choices(cls)
        opening = self._opening(candidates)
        skipped: list[Skip] = []
        existing = DomainPools(cls, self._in_region(self.schedulable))
        start = len(self.ctx.placements)
        leaving = self._leaving_fits(cls)
        while cls.remaining:
            before, settled = cls.remaining, dict(cls.placed_in)
            cls.next_round(settled)
            self._fill_existing(cls, existing, start)
            if not cls.remaining:
                return None
            cls.next_round(settled, opening)  # the same round: free room first
            skipped = self._place_more(cls, candidates)
            if cls.remaining == before:
                opened = [labels for labels in opening if self._opened_in(cls, labels)]
                if len(opened) == len(opening):
                    break
                opening = opened
            else:
                opening = self._opening(candidates)
        self._note_leaving(leaving, start)
        return self._left(cls, candidates, rejected, skipped, leaving) if cls.remaining else None

    def _fill_existing(self, cls: PodClass, existing: DomainPools, start: int) -> None:
        """A round's free room, in passes while the class's hostname spreads let existing nodes take
        more (each pass's placements raise the least loaded node, :meth:`_raise_spread_caps`), before
        launching capacity and new nodes: kube-scheduler binds the waiting pods to that room one at a
        time, and a new node would get none of them. The round's zone ceilings bound every pass."""
        while True:
            before = cls.remaining
            self._place_existing(cls, existing.round())
            self._raise_spread_caps(cls, start)
            if not cls.domains.host_spreads or not cls.remaining or cls.remaining == before:
                return

    def _confined_out(
        self, cls: PodClass, candidates: list[NodeGroup], rejected: Mapping[GroupKey, str]
    ) -> tuple[str, str] | None:
        """Why the class gets no new node when a gang's new nodes are confined to one group
        (:class:`OneGroup`) that may not run it: that group and its refusal. None otherwise. The
        class's other groups were never offered new nodes, so "exhausted" would send the reader after
        MaxSize and back-off that are not there. When pod topology alone keeps the class off that
        group's new nodes (the pods that close its zone may leave), the code is the one
        :func:`why_unplaceable` gives such a pod, ``pod-topology``, not ``no-group-fits``."""
        confined = self.group
        if confined is None or confined == NO_GROUP or any(g.key == confined for g in candidates):
            return None
        needs = describe(cls.requests, [r for r in sorted(cls.requests) if r != PODS])
        why = rejected.get(confined) or f"{confined.name}: not a group this pod may use here"
        group = next((g for g in self.ctx.groups if g.key == confined), None)
        if group is not None and cls.topology_closes(group):
            code, can = codes.POD_TOPOLOGY, "cannot run its pods now"
        else:
            code, can = codes.NO_GROUP_FITS, "can never run its pods"
        return (
            code,
            f"node group {confined.name}, the one the gang's new nodes come from, {can} of {needs}: {why}",
        )

    def _left(
        self,
        cls: PodClass,
        candidates: list[NodeGroup],
        rejected: dict[GroupKey, str],
        skipped: list[Skip],
        leaving: str | None = None,
    ) -> tuple[str, str]:
        """Why the class's remaining pods get no place (recorded pending, but a gang's); ``leaving``: the
        clause naming nodes on their way out that would take them (:meth:`_leaving_fits`)."""
        closed = any(cls.topology_closes(g) for g in self.ctx.groups)
        verdict = self._confined_out(cls, candidates, rejected) or why_unplaceable(
            cls, candidates, rejected, skipped, closed=closed
        )
        if leaving is not None:
            verdict = (verdict[0], f"{verdict[1]}; {leaving}")
        if cls.gang is None:
            for pod in cls.take(cls.remaining):
                self.ctx.pending_out.append(PendingPod(pod, verdict[1], verdict[0]))
        return verdict

    def _leaving_fits(self, cls: PodClass) -> str | None:
        """The clause naming the nodes on their way out (:func:`_leaving`) that would take a pod of the
        class were they staying: room for one, and nothing but their deletion taint or cordon keeps it
        off. cluster-autoscaler's and Karpenter's events name the nodes they considered; a pod that gets
        a new node while one it fits is going says which."""
        names = [
            node.info.name
            for node in self.leaving
            if self._node_in_domain(node)
            and fit_count(cls.requests_on(node.info.name), node.free, 1) > 0
            and cls.room_in(node.info.labels) > 0
            and cls.blocker(node.info.labels, _staying(node.info.taints), node.info.name) is None
        ]
        return leaving_clause(names)

    def _note_leaving(self, leaving: str | None, start: int) -> None:
        """The groups whose new nodes took the class's pods since ``start`` say so in their reason."""
        if leaving is None:
            return
        for placement in self.ctx.placements[start:]:
            group = placement.group
            if group is not None and placement.node.startswith(f"{group.name}/new-"):
                self.ctx.leaving_notes.setdefault(group, set()).add(leaving)

    def _join(self, cls: PodClass, start: int) -> None:
        """Record where the class's pods went (:class:`spillway.planner.topology.Planned`)."""
        if cls.buffer or not (cls.domains.marks.selected or cls.domains.zone_anti or cls.domains.affinity):
            return  # a buffer's virtual pods come last, and no move waits for them
        templates = {g.key: self._new_spot(cls, g) for g in self.ctx.groups if g.template is not None}
        mine = set(cls.pods)  # a gang's classes are joined after it is placed whole
        # node (a new or launching node's id is its group's own) -> where, the class's pods there
        on: dict[tuple[GroupKey | None, str], tuple[Spot, int]] = {}
        for placement in self.ctx.placements[start:]:
            if placement.pod not in mine:
                continue
            node = self.ctx.nodes.get(placement.node)
            group = None if node is not None else placement.group
            spot = node.spot if node is not None else self._spot_of(placement.node, group, templates)
            where = (group, placement.node)
            if spot is not None:
                on[where] = (spot, on[where][1] + 1 if where in on else 1)
        for spot, count in on.values():
            self.ctx.planned.record(cls.domains, spot, count)

    def _spot_of(self, node: str, group: GroupKey | None, templates: Mapping[GroupKey, Spot]) -> Spot | None:
        """The new or launching node ``node`` of ``group`` as pod topology sees it: its template's, or,
        launching in a zone Auto Scaling's answer gives, at the labels it registers with."""
        spot = templates.get(group) if group is not None else None
        labels = self.ctx.launching_labels.get(node)
        return Spot(labels, spot.taints) if labels is not None and spot is not None else spot

    def _opening(self, candidates: Sequence[NodeGroup]) -> list[Mapping[str, str]]:
        """The template labels of the candidate groups that may still open a node (room below MaxSize,
        not backed off): for a zone spread, a zone one of them is in is a domain already."""
        return [
            g.template.labels
            for g in candidates
            if g.template is not None and self.room[g.key] > 0 and not self.backoff[g.key]
        ]

    @staticmethod
    def _opened_in(cls: PodClass, labels: Mapping[str, str]) -> bool:
        """Whether the class has pods in the domains of a template with ``labels``."""
        return any((rule.key, labels.get(rule.key)) in cls.placed_in for rule in cls.domains.counted)

    def _place_existing(self, cls: PodClass, existing: Iterable[Pool] | None = None) -> None:
        """Free room on Ready nodes (a buffer's pods: busy nodes first; a class placed in rounds: the
        round's pools), then the room of expendable pods kube-scheduler would preempt for the rest."""
        start = len(self.ctx.placements)
        if existing is None:
            pool_list = self._in_region(self.schedulable)
            existing = busy_first(self.ctx, pool_list) if cls.buffer else pool_list
        place_on_nodes(self.ctx, cls, existing)
        if cls.remaining and self.preemptible:
            place_by_preemption(self.ctx, cls, self.preemptible, self._node_in_domain)
        self._claim(cls, start)

    def _choices(self, cls: PodClass) -> tuple[list[NodeGroup], dict[GroupKey, str]]:
        """The groups that may run the class, best first, and why each other may not."""
        choices, rejected = options(self.ctx, cls, self.empty, self.zone)
        ordered = self.expander.order(self.ctx, cls, [c for c in choices if self._in_domain(c.group)])
        if self.regions is not None and len(self.regions) > 1:  # the region of most members first
            rank = {region: i for i, region in enumerate(self.regions)}
            ordered = sorted(ordered, key=lambda g: rank.get(g.region, len(rank)))
        return ordered, rejected

    def _place_more(self, cls: PodClass, candidates: list[NodeGroup]) -> list[Skip]:
        """Launching capacity, then nodes to uncordon, then new nodes; the groups that gave no more."""
        launching = [g for g in candidates if self.zone is None or g.zones == (self.zone,)]
        place_on_launching(self.ctx, cls, launching, self.backoff, self.launching, self.limits)
        if not cls.remaining:
            return []
        reusable = [
            p for p in self.reclaimable if spot_reuse_refusal(self.ctx, cls, p.nodes[0].group) is None
        ]
        refused = self._reuse(cls, self._in_region(reusable))
        if not cls.remaining:
            return []
        # new nodes only in the one group a gang confined to one is being tried in (OneGroup)
        return refused + self._new_nodes(cls, [g for g in candidates if self.group in (None, g.key)])

    def _reuse(self, cls: PodClass, pool_list: list[Pool]) -> list[Skip]:
        """Uncordon nodes Spillway cordoned for the class, first fit; each is the tenant's from then on
        (:meth:`_claim`). A limited tenant's class is given a node no tenant is charged for yet only
        within its limits, as a new node (:meth:`Limits.claim_refusal`): node by node, in pool order,
        so each claim counts before the next node is judged. The first refusal of a node a pod of the
        class would go on (:func:`_takes_one`), for the reason of pods that then stay pending."""
        if cls.tenant is None or not self.limits.per_tenant:
            start = len(self.ctx.placements)
            place_on_nodes(self.ctx, cls, pool_list, uncordon=True)
            self._claim(cls, start)  # a node reused for the class is the tenant's as a Ready node it takes
            return []
        refused: list[Skip] = []
        for pool, node in ((p, n) for p in pool_list for n in p.nodes):
            if not cls.remaining:
                break
            why = self._reuse_one(cls, pool, node)
            if why is not None and not refused and _takes_one(cls, node):  # else no reason of the class's
                refused = [Skip(why[0], f"node {node.info.name}, cordoned by Spillway, not reused: {why[1]}")]
        return refused

    def _reuse_one(self, cls: PodClass, pool: Pool, node: WorkNode) -> tuple[str, str] | None:
        """Uncordon ``node``, of ``pool``, for the limited tenant's class if its limits let it take the
        node (:meth:`_reuse`); else the code and reason of the limit that refuses it."""
        info = node.info
        if fit_count(cls.requests_on(info.name), node.free, 1) == 0:
            return None  # no room for a pod of the class: nothing to judge (most nodes, for most classes)
        why = self.limits.claim_refusal(cls.tenant, node.group, info.name, info.allocatable, info.labels)
        if why is not None:
            return why
        start = len(self.ctx.placements)
        # the stage's own pool when it is this node alone (reclaimable_pools makes one per node): what it
        # knows of the node's room and of the class's constraints there is kept, as a plain reuse keeps it
        one = pool if len(pool.nodes) == 1 else Pool([node], room_bound([node]))
        place_on_nodes(self.ctx, cls, [one], uncordon=True)
        self._claim(cls, start)
        return None

    def _raise_spread_caps(self, cls: PodClass, start: int) -> None:
        """The class's pods placed on existing nodes since ``start`` raise the least loaded node of its
        hostname spreads, and so what each existing node and a new node take (:meth:`Domains.raised`)."""
        if not cls.domains.host_spreads:
            return
        placed: dict[str, int] = {}
        for placement in self.ctx.placements[start:]:
            if placement.node in self.ctx.nodes:
                placed[placement.node] = placed.get(placement.node, 0) + 1
        cls.domains = cls.domains.raised(placed)

    def _claim(self, cls: PodClass, start: int) -> None:
        """Charge the class's tenant for the unclaimed Ready nodes its pods were just placed on, free room,
        preemption or uncordoned (launching capacity is charged by :func:`place_on_launching`, within
        the tenant's limits)."""
        if not self.limits.active:
            return
        for placement in self.ctx.placements[start:]:
            node = self.ctx.nodes.get(placement.node)
            if node is not None:
                self.limits.claim(
                    cls.tenant, node.group, node.info.name, node.info.allocatable, node.info.labels
                )

    def _in_domain(self, group: NodeGroup) -> bool:
        """May ``group`` open nodes in the region (and zone) being tried, and in :attr:`regions`?"""
        homes = self.regions
        return group_in_domain(group, self.region, self.zone) and (homes is None or group.region in homes)

    def _in_region(self, pool_list: list[Pool]) -> list[Pool]:
        if self.region is None and self.regions is None:
            return pool_list
        return pools(n for pool in pool_list for n in pool.nodes if self._node_in_domain(n))

    def _node_in_domain(self, node: WorkNode) -> bool:
        """Is ``node`` in the region (and zone) being tried (any node when none is), and in
        :attr:`regions` (a node of unknown region is when they hold None)?"""
        homes = self.regions
        return node_in_domain(node, self.region, self.zone) and (homes is None or node_region(node) in homes)

    def _new_nodes(self, cls: PodClass, candidates: Sequence[NodeGroup]) -> list[Skip]:
        """First fit into nodes this plan opens already, then open more, best group first."""
        for group in candidates:
            if cls.remaining and self.new_bins.get((group.key, cls.gang)):
                self._fill_new(cls, group)
        skipped: list[Skip] = []
        for group in candidates:
            if not cls.remaining:
                break
            skip = self._why_skip(group)
            if skip is None:
                twins = similar_groups(self.ctx, group, candidates) if cls.gang is None else []
                skip = self._open_balanced(cls, [group, *twins]) if twins else self._open(cls, group)
                spilled = [s.reason for s in skipped if s.code != codes.POD_TOPOLOGY]  # a spread is no spill
                if spilled:
                    self.ctx.overflow_notes.setdefault(group.key, set()).update(spilled)
            if skip is not None and cls.remaining:
                skipped.append(skip)
        return skipped

    def _backoff(self, group: NodeGroup) -> str | None:
        """Why ``group`` is backed off (:func:`backoff_reason`), or, for a gang kept to the zone being
        tried of a group spanning several, why that zone is (:func:`zone_backoff`: its fleet would ask
        for that zone only); None when it is not."""
        backoff = self.backoff[group.key]
        if not backoff and self.zone is not None and len(group.zones) > 1:
            backoff = zone_backoff(self.ctx, group, self.zone)
        return backoff

    def _why_skip(self, group: NodeGroup) -> Skip | None:
        if group.unread:
            return Skip(codes.REGION_UNREAD, unread_reason(self.ctx, group))
        backoff = self._backoff(group)
        if backoff:
            return Skip(codes.BACKED_OFF, backoff)
        if self.room[group.key] <= 0:
            return _at_max_size(self.ctx, group)
        return None

    def _open_balanced(self, cls: PodClass, groups: list[NodeGroup]) -> Skip | None:
        """Open the class's new nodes one at a time in the smallest of ``groups`` (its desired capacity
        plus what this plan opens there), as cluster-autoscaler's balancing does; a group that can open
        no more leaves the set. The skip of the last group to leave, if pods remain."""
        skip: Skip | None = None
        left = list(groups)
        while cls.remaining and left:
            group = min(left, key=lambda g: (g.desired + self.ctx.new_nodes.get(g.key, 0), g.key))
            before = self.ctx.new_nodes.get(group.key, 0)
            skip = self._why_skip(group) or self._open(cls, group, at_most=1)
            if self.ctx.new_nodes.get(group.key, 0) == before:
                left.remove(group)
        return skip if cls.remaining else None

    def _open(self, cls: PodClass, group: NodeGroup, at_most: int | None = None) -> Skip | None:
        """Open as many new nodes of ``group`` as the class needs (at most ``at_most``) and MaxSize and
        the limits allow, fill them, and say why it stopped short (if it did)."""
        ctx, key = self.ctx, group.key
        labels = group.template.labels if group.template else {}
        need = self._nodes_needed(cls, group)
        if need <= 0:
            return _spread_full(group)
        need = need if at_most is None else min(need, at_most)
        cap = on_demand_cap(ctx, cls, group)
        opening, binding = self.limits.allowed(
            cls.tenant, group, min(self.room[key], need, _or(cap, need)), zone=self._kept_zone(cls, group)
        )
        if held := self._gang_held(cls, group, opening):
            return held
        if opening > 0:
            self._add_nodes(cls, group, opening)
        if binding is not None:
            return Skip(binding.code, self.limits.reason(binding, group))
        if cap is not None and opening >= cap and cls.remaining:
            return _base_filled(group)
        if self.room[key] <= 0:
            return _at_max_size(ctx, group)
        return _spread_full(group) if cls.remaining and cls.room_in(labels) <= 0 else None

    def _nodes_needed(self, cls: PodClass, group: NodeGroup) -> int:
        """How many new nodes of ``group`` the class's remaining pods fill, as far as its room on a new
        node and its zone spreads' room in the group's zone go (0: none). The pods a new node runs
        first that a zone spread counts take places of the class's in its zone: a node whose own pods
        leave its zone no room for one of the class is not opened (it would stay empty; kube-scheduler
        counts them as any pod of the zone, podtopologyspread/common.go countPodsMatchSelector)."""
        per_node = cls.fit_with(self.empty[group.key], self._new_node_cap(cls, group))
        labels = group.template.labels if group.template else {}
        fits = min(cls.remaining, cls.room_in(labels))
        if fits <= 0 or per_node <= 0:
            return 0
        spot, fresh = self._new_spot(cls, group), self._fresh(group)
        taken = cls.domains.zone_fresh(spot, fresh)
        if taken and cls.room_opened(spot, fresh, fresh_node_unsure(self.ctx, group)) <= 0:
            return 0
        return math.ceil(fits / (per_node + taken))

    def _gang_held(self, cls: PodClass, group: NodeGroup, opening: int) -> Skip | None:
        """Why a gang's ``opening`` more new nodes of ``group`` must not be opened: with those it opens
        there already they are one launch, all at once, that every pool it may launch from holds back
        (:func:`gang_backoff`: a gang's refusal holds back gangs as big or bigger); None when not, or
        for a class of no gang (its raise takes what there is)."""
        if cls.gang is None or opening <= 0:
            return None
        nodes = self.ctx.gang_nodes.get((group.key, cls.gang), 0) + opening
        zone = self.zone if self.zone is not None and len(group.zones) > 1 else None
        why = gang_backoff(self.ctx, group, nodes, zone)
        return Skip(codes.BACKED_OFF, why) if why else None

    def _kept_zone(self, cls: PodClass, group: NodeGroup) -> str | None:
        """The one zone of ``group`` a gang's new nodes launch in (its fleet kept to the zone being
        tried), else None: any of the group's zones."""
        if cls.gang is not None and self.zone is not None and len(group.zones) > 1:
            return self.zone
        return None

    def _add_nodes(self, cls: PodClass, group: NodeGroup, opening: int) -> None:
        """``opening`` new nodes of ``group`` for the class (a gang's are its own), filled."""
        ctx, key = self.ctx, group.key
        self.room[key] -= opening
        opened = ctx.new_nodes.get(key, 0)
        ctx.new_nodes[key] = opened + opening
        if cls.gang is not None:
            ctx.gang_nodes[(key, cls.gang)] = ctx.gang_nodes.get((key, cls.gang), 0) + opening
            if self.zone is not None and len(group.zones) > 1:
                ctx.gang_zones[(key, cls.gang)] = self.zone
        ids = [f"{group.name}/new-{opened + i + 1}" for i in range(opening)]
        self.new_bins.setdefault((key, cls.gang), []).append(Bin(dict(self.empty[key]), ids))
        self.limits.charge(cls.tenant, group, opening, zone=self._kept_zone(cls, group))
        fresh = self._fresh(group)
        if fresh:  # they register running them: the pod topology of this class and those after counts them
            spot, unsure = self._new_spot(cls, group), fresh_node_unsure(ctx, group)
            ctx.planned.record_fresh(spot, fresh, opening, unsure)
            cls.opened(spot, fresh, opening, unsure)
        self._fill_new(cls, group)

    def _fresh(self, group: NodeGroup) -> tuple[frozenset[int], ...]:
        """Per pod a new node of ``group`` runs first, the terms selecting it (:func:`fresh_node_selected`)."""
        return fresh_node_selected(self.ctx, group)

    def _new_spot(self, cls: PodClass, group: NodeGroup) -> Spot:
        """A new node of ``group`` for ``cls`` as pod topology sees it: its template's labels and taints,
        with the zone its gang's fleet is kept to (the zone being tried, :meth:`_kept_zone`, or the one
        it was placed in, :attr:`Context.gang_zones`; EC2 picks the zone of any other new node of a
        group over several)."""
        template = group.template
        if template is None:
            return Spot({})
        zone = self._kept_zone(cls, group)
        if zone is None and cls.gang is not None:
            zone = self.ctx.gang_zones.get((group.key, cls.gang))
        return Spot(new_node_labels(group, zone), template.taints)

    def _new_node_cap(self, cls: PodClass, group: NodeGroup) -> int:
        """How many of the class a new node of ``group`` takes for its pod topology, the pods the node
        runs first counted (:meth:`~spillway.planner.topology.Domains.new_node_cap`)."""
        return cls.domains.new_node_cap(fresh_node_selected(self.ctx, group))

    def _fill_new(self, cls: PodClass, group: NodeGroup) -> None:
        """Fill the new nodes of ``group`` this plan opened (for this class or one before it), each up
        to the class's cap on a new node: the pods a new node runs first count for it whichever class
        opened the node (:meth:`_new_node_cap`)."""
        bins = self.new_bins[(group.key, cls.gang)]
        labels = group.template.labels if group.template else {}
        cap = self._new_node_cap(cls, group)
        for node_id, count in fill_bins(cls, bins, min(cls.remaining, cls.room_in(labels)), cap):
            cls.note_placed(labels, count)
            pods = cls.take(count)
            self.ctx.placements.extend(Placement(pod, node_id, group.key) for pod in pods)
            self.ctx.new_pods.setdefault(group.key, []).extend(pods)
            if cls.gang is not None:
                self.ctx.gang_pods.setdefault((group.key, cls.gang), []).extend(pods)


class HeldByLimits:
    """The pods of limited tenants' classes left pending, looked at again once every class is served,
    when a class served after them made room that adds nothing for their tenant: a node Spillway
    cordoned that it uncordons, a booting node it takes, new nodes it opens (README, *Tenants, limits
    and gangs*).

    A tenant at its limit is refused a cordoned node no tenant is charged for (uncordoning it would add
    a node for it) and the booting or new nodes nobody took. Once another tenant's pods take such a
    node it is theirs, and its room left is what any Ready node's free room is to the held pods: no
    addition, so kube-scheduler binds them there when it comes, as the held pods wait in its queue
    (moved back to be tried on any Node update, such as the uncordon). Classes are served one by one,
    so a held class served before the class that takes the node never saw that room: it stayed
    ``tenant-limit`` while its pods went on the node. Each held class gets one look at that room, once
    every class is served, so it takes only what no class of the plan needs: given it as soon as the
    room was made, it took room a class served later then opened another node for, so the limit added
    nodes for the held tenant after all. Only that room is looked at: free room,
    preemption and opening nodes of its own were judged when it was served and nothing since makes
    them give more. Only plain loose classes are held (no gang, buffer, zone spread or pod-affinity
    leader, nothing kept to free room): the others place their pods by rules a second look would have
    to repeat. The look runs only when such room was made while some class is held, so a plan without
    limits pays nothing."""

    def __init__(self, stage: ScaleUpStage) -> None:
        self.stage = stage
        self.classes: list[PodClass] = []  # each holding only its pods still held
        self.placed: set[str] = set()  # held pods the look placed: their first verdict goes
        self.mark: tuple[int, int, int] | None = None  # the room made when the first class was held

    @contextmanager
    def serving(self, cls: PodClass) -> Iterator[None]:
        """Serve ``cls`` (the body); then note its held pods."""
        ctx = self.stage.ctx
        before = len(ctx.pending_out)
        yield
        if self._holdable(cls):
            mine = set(cls.pods)
            left = [p.pod for p in ctx.pending_out[before:] if p.pod in mine and p.code not in _PLACED]
            if left:
                self.mark = self._room() if self.mark is None else self.mark
                self.classes.append(replace(cls, pods=left, next=0, placed_in={}, settled={}, ceilings={}))

    def settle(self) -> None:
        """Once every class is served, look again at the room made since a class was held, and drop the
        first verdict of each held pod the look placed (its placement says where)."""
        if self.mark is not None and self._room() != self.mark:
            self._look_again()
        if self.placed:
            ctx = self.stage.ctx
            kept = [p for p in ctx.pending_out if p.pod not in self.placed or p.code in _PLACED]
            ctx.pending_out[:] = kept

    def _holdable(self, cls: PodClass) -> bool:
        limited = cls.tenant is not None and self.stage.limits.per_tenant
        plain = cls.gang is None and cls.started_gang is None and cls.min_room_gang is None
        plain = plain and cls.buffer is None and cls.free_only is None and not cls.domains.counted
        return limited and plain and not (cls.domains.leads_group or cls.domains.leads_zone)

    def _room(self) -> tuple[int, int, int]:
        """What the classes served make that a held class may share: nodes uncordoned, new nodes
        opened, launching nodes taken."""
        stage = self.stage
        taken = sum(len(b.ids) for bins in stage.launching.values() for b in bins if not b.fresh)
        return len(stage.ctx.uncordoned), sum(stage.ctx.new_nodes.values()), taken

    def _look_again(self) -> None:
        stage, ctx = self.stage, self.stage.ctx
        uncordoned = [p for p in stage.reclaimable if p.nodes[0].info.name in ctx.uncordoned]
        for cls in self.classes:
            reusable = [p for p in uncordoned if spot_reuse_refusal(ctx, cls, p.nodes[0].group) is None]
            candidates, _ = stage._choices(cls)
            start = len(ctx.placements)
            cls.domains = cls.domains.after(ctx.planned)
            place_on_launching(ctx, cls, candidates, stage.backoff, stage.launching, stage.limits)
            if cls.remaining and reusable:
                stage._reuse(cls, stage._in_region(reusable))
            for group in candidates:
                if cls.remaining and stage.new_bins.get((group.key, None)):
                    stage._fill_new(cls, group)
            stage._join(cls, start)
            self.placed.update(cls.pods[: cls.next])
            del cls.pods[: cls.next]
            cls.next = 0
        self.classes = [cls for cls in self.classes if cls.pods]


# the codes of pending pods the plan places (free room, launching, uncordoned, preemption)
_PLACED = frozenset(
    {codes.FITS_FREE_ROOM, codes.FITS_LAUNCHING, codes.FITS_UNCORDONED, codes.FITS_BY_PREEMPTION}
)


class InFlight:
    """Gangs a recent plan launched atomically (``State.gangs``) whose launch may still be under way.

    In fleet mode a gang's instances join its group only once all of them run, so the snapshot shows
    nothing launching: without this, every plan until then would launch the gang again. An entry holds
    while it is younger than ``gang_launch_minutes`` and its group is not backed off (a failed gang
    launch backs the group off: the gang is then placed afresh, elsewhere); it is dropped when the gang
    has no pending pod left. A held gang's pods stay pending (``gang-launching``) and the launching
    capacity of its group (rollback mode raises the desired capacity) is kept for it, not for others.
    So are the pods of a gang whose minimum runs (:attr:`PodClass.started_gang`), placed one by one
    otherwise: the minimum may run on room that was free while the launch brings the rest's nodes. A
    launch for no more than the pods the gang needed to start (:attr:`GangState.minimum_only`) brings
    nothing more for the rest: its entry is dropped once the minimum runs and the launch's nodes have
    joined (:func:`_arrived`), and the rest are placed at once, on those nodes if the minimum ran on
    room that was free meanwhile. Before they join, the rest wait for them.
    """

    def __init__(self, stage: ScaleUpStage, gangs: Collection[str], started: Collection[str] = ()) -> None:
        ctx = stage.ctx
        self.stage = stage
        window = ctx.config.gang_launch_minutes
        self.entries: dict[str, GangState] = {}
        for key, entry in sorted(ctx.state.gangs.items()):
            if key in started and entry.minimum_only and _arrived(ctx, entry):
                continue  # the pods it was for run and its nodes are here: nothing more is coming
            pending = key in gangs or key in started
            if not pending or entry.key not in stage.backoff or stage.backoff[entry.key]:
                continue  # scheduled (no pending pod left), a group gone, or backed off
            if (ctx.now - aware(entry.since)).total_seconds() >= window * 60:
                continue
            self.entries[key] = entry
            bins = stage.launching.get(entry.key, [])
            _reserve(bins, entry.count)

    def hold(self, gang: str, classes: Sequence[PodClass]) -> bool:
        """True (and the gang's pods pending, its entry kept) when ``gang`` is being launched."""
        entry = self.entries.get(gang)
        if entry is None:
            return False
        ctx = self.stage.ctx
        ctx.gangs_out[gang] = entry
        age = minutes(ctx.now - aware(entry.since))
        reason = (
            f"gang {gang} is being launched atomically in {entry.group} ({entry.count} node(s)) since "
            f"{iso(entry.since)} ({age} ago): not launched again until it is scheduled, "
            f"gang_launch_minutes ({ctx.config.gang_launch_minutes:g}) pass or {entry.group} backs off"
        )
        for cls in classes:
            for pod in cls.take(cls.remaining):
                ctx.pending_out.append(PendingPod(pod, reason, codes.GANG_LAUNCHING))
        return True


def _arrived(ctx: Context, entry: GangState) -> bool:
    """The launch ``entry`` records has joined its group: as many of the group's nodes as it launched
    were created at its time or since."""
    since = aware(entry.since)
    joined = sum(
        1
        for node in ctx.nodes.values()
        if node.group is not None
        and node.group.key == entry.key
        and node.info.created_at is not None
        and aware(node.info.created_at) >= since
    )
    return joined >= entry.count


def record_gang_launches(ctx: Context, actions: Sequence[ScaleUp]) -> None:
    """An entry per gang this plan launches atomically (its group's tag is fleet or rollback), recorded
    again when the actions change (make room may take some of a gang's new nodes, or all of them)."""
    placed = {gang for _, gang in ctx.gang_nodes}  # a gang held as launching is not placed again
    ctx.gangs_out = {gang: entry for gang, entry in ctx.gangs_out.items() if gang not in placed}
    by_key = {g.key: g for g in ctx.groups}
    for action in actions:
        group = by_key[action.key]
        if group.atomic_launch == "off":
            continue
        for launch in action.gangs:
            known = ctx.gangs_out.get(launch.gang)
            if known is None or launch.nodes > known.count:  # a gang over two groups: the larger
                ctx.gangs_out[launch.gang] = GangState(
                    group=group.name,
                    region=group.region,
                    count=launch.nodes,
                    since=ctx.now,
                    minimum_only=launch.gang in ctx.minimum_gangs,
                )


def _placed_at(cls: PodClass, gangs: Mapping[str, list[PodClass]]) -> int:
    """The priority whose nominated pods every pod of the class meets: a gang's are placed together, and
    its highest member meets the fewest (each meets those of its own priority or higher, charged in
    the gang's trial: :meth:`GangPlacement._place_members`)."""
    return max(c.priority for c in gangs[cls.gang]) if cls.gang is not None else cls.priority


def _takes_one(cls: PodClass, node: WorkNode) -> bool:
    """Whether a pod of the class would go on ``node`` as it is now (room for one, its constraints
    and pod topology let it): a node that would not is no reason of the class's to stay pending."""
    info = node.info
    return (
        fit_count(cls.requests_on(info.name), node.free, 1) > 0
        and cls.room_in(info.labels) > 0
        and not cls.domains.marks.repels(node.marks)
        and cls.blocker(info.labels, info.taints, info.name) is None
    )


def _leaders_first(classes: Sequence[PodClass]) -> list[PodClass]:
    """The classes in service order, but a class whose required pod affinity has no domain yet and
    selects the pods of a later class moves to just after it (gangs keep their place): it may follow
    where this plan places them (:meth:`spillway.planner.topology.Domains.after`). Passes repeat until
    nothing moves, so a chain (web follows api, which follows cache) ends in order; affinities that
    select each other in a ring stop after as many passes as there are classes."""
    order = list(classes)
    followers = [c for c in order if c.gang is None and c.domains.affinity]
    for _ in range(len(followers)):
        moved = False
        for cls in followers:
            at = next(i for i, other in enumerate(order) if other is cls)
            last = max(
                (
                    i
                    for i, other in enumerate(order)
                    if i > at and cls.domains.follows(other.domains.marks.selected)
                ),
                default=None,
            )
            if last is not None:
                order.insert(last + 1, cls)
                del order[at]
                moved = True
        if not moved:
            break
    return order


def _reserve(bins: list[Bin], count: int) -> None:
    """Take ``count`` launching nodes out of ``bins`` (they are a held gang's)."""
    while count > 0 and bins:
        first = bins[0]
        taken = min(count, len(first.ids))
        del first.ids[:taken]
        count -= taken
        if not first.ids:
            del bins[0]


def _group_zones(groups: Sequence[NodeGroup]) -> set[tuple[str | None, str | None]]:
    """(region, zone) a one-zone gang can get new nodes in: single-AZ groups, and every zone of a
    fleet-mode group."""
    found: set[tuple[str | None, str | None]] = {(g.region, g.zones[0]) for g in groups if len(g.zones) == 1}
    return found | {(g.region, z) for g in groups if g.atomic_launch == "fleet" for z in g.zones}


def _fleet_in(group: NodeGroup, zone: str) -> bool:
    """A fleet-mode group spanning ``zone`` among others: its gang launch can be kept to that zone."""
    return group.atomic_launch == "fleet" and len(group.zones) > 1 and zone in group.zones


def gang_homes(ctx: Context, nodes: Collection[str]) -> set[tuple[str, str | None]]:
    """(region, zone) of ``nodes``, those a gang's members run on (or are nominated to:
    :attr:`Gangs.running_on`), whose region is known; the zone None where the node carries no zone
    label. The rest of the gang goes there only (:meth:`GangPlacement.domains`), and so do members
    consolidation or make room moves (:meth:`~spillway.planner.consolidation.Consolidation._fit`)."""
    found: set[tuple[str, str | None]] = set()
    for name in nodes:
        node = ctx.nodes.get(name)
        region = node_region(node) if node is not None else None
        if node is not None and region:
            found.add((region, node_zone(node)))
    return found


UNKNOWN_REGION = "no node group, no label topology.kubernetes.io/region"


def home_regions(ctx: Context, members_on: Mapping[str, int]) -> tuple[str | None, ...]:
    """The regions a gang's running members are in (``members_on``: members per node, those on nodes
    leaving left out, :attr:`Gangs.members_on`), the one with the most members first, then in
    preference order: the regions the rest of the gang may go to. A member on a node whose region is
    unknown (no node group, no ``topology.kubernetes.io/region`` label) adds none: the known regions
    of the others still hold the rest. When every member runs on such nodes, (None,): the rest may not
    go to any known region (one could split the gang), only to room on nodes of no known region. ()
    when no member runs (a node gone from the snapshot holds none), or in a cluster of one region,
    where there is nothing to split."""
    if len(gang_regions(ctx)) < 2:
        return ()
    count: dict[str, int] = {}
    unknown = 0
    for name, members in members_on.items():
        node = ctx.nodes.get(name)
        if node is None:
            continue
        region = node_region(node)
        if region:
            count[region] = count.get(region, 0) + members
        else:
            unknown += members
    if not count:
        return (None,) if unknown else ()
    rank = ctx.region_rank
    return tuple(sorted(count, key=lambda r: (-count[r], rank.get(r, len(rank)), r)))


def home_clause(homes: Sequence[str | None]) -> str:
    """Where a gang runs (:func:`home_regions`), for a reason: "runs in us-west-2", "runs in eu-west-1,
    us-west-2 (most members first)", or that its nodes' region is unknown."""
    if homes == (None,):
        return f"runs only on nodes whose region is unknown ({UNKNOWN_REGION})"
    return f"runs in {', '.join(str(h) for h in homes)}" + (" (most members first)" if len(homes) > 1 else "")


# the codes of a gang member kept where its gang runs, stopped by the groups there: gang-home-full instead
_HOME_CODES = frozenset({codes.MAX_SIZE, codes.BACKED_OFF, codes.GROUPS_EXHAUSTED, codes.NO_GROUP_FITS})


def _held_home(pending: PendingPod, note: str, homes: Sequence[str | None]) -> PendingPod:
    """A pending member of a gang kept to where the gang runs (``homes``, :func:`home_regions`):
    ``note`` appended to its reason, and its code ``gang-home-full`` when what stopped it is the room
    or the groups there (a limit's, pod topology's and other codes are kept). Kept to nodes of unknown
    region, which no group holds, it is ``gang-home-unknown``: their free room did not hold it."""
    if homes == (None,) and pending.code in (*_HOME_CODES, codes.NO_MANAGED_GROUPS):
        return replace(
            pending, reason=f"{note}; the free room there does not hold it, and no region gets a node for it",
            code=codes.GANG_HOME_UNKNOWN,
        )  # fmt: skip
    held = codes.GANG_HOME_FULL if pending.code in _HOME_CODES else pending.code
    return replace(pending, reason=f"{pending.reason}; {note}", code=held)


def at_home(
    homes: Collection[tuple[str | None, str | None]], region: str | None, zone: str | None, one_zone: bool
) -> bool:
    """Is (``region``, ``zone``) where a gang runs (``homes``, :func:`gang_homes`; a gang whose pods ask
    for one zone: its zone too, where known)? Anywhere when ``homes`` is empty."""
    if not homes:
        return True
    zones = {home for home in homes if home[1] is not None}
    return region in {r for r, _ in homes} and (not one_zone or not zones or (region, zone) in zones)


def node_region(node: WorkNode) -> str | None:
    return node.group.region if node.group else node.info.labels.get(REGION_LABEL)


def node_zone(node: WorkNode) -> str | None:
    return node.info.labels.get(ZONE_LABEL)


def group_in_domain(group: NodeGroup, region: str | None, zone: str | None) -> bool:
    """May ``group`` open nodes in ``region`` (and ``zone``; None: any)? A group spanning several zones
    may for one of them only in fleet mode (its gang launch is kept to the zone)."""
    if region is not None and group.region != region:
        return False
    return zone is None or group.zones == (zone,) or _fleet_in(group, zone)


def node_in_domain(node: WorkNode, region: str | None, zone: str | None) -> bool:
    """Is ``node`` in ``region`` (and ``zone``)? Any node is when no region is named."""
    if region is None:
        return True
    return node_region(node) == region and (zone is None or node_zone(node) == zone)


def gang_regions(ctx: Context) -> list[str | None]:
    """The regions a gang may be placed in, preferred first; [None] when nothing names one."""
    found = {g.region for g in ctx.groups} | {node_region(n) for n in ctx.nodes.values()}
    named = sorted((r for r in found if r), key=lambda r: (ctx.region_rank.get(r, len(ctx.region_rank)), r))
    return list(named) or [None]


def gang_domains(ctx: Context, one_zone: bool) -> list[tuple[str | None, str | None]]:
    """(region, zone) to place a gang in, in order; zone None for a gang that may spread over a region."""
    if not one_zone:
        return [(r, None) for r in gang_regions(ctx)]
    found = _group_zones(ctx.groups) | {(node_region(n), node_zone(n)) for n in ctx.nodes.values()}
    rank = {r: i for i, r in enumerate(gang_regions(ctx))}
    named = [(r, z) for r, z in found if r and z]
    return sorted(named, key=lambda d: (rank.get(d[0], len(rank)), d[0] or "", d[1] or ""))


def could_ever_hold(ctx: Context, classes: Sequence[PodClass]) -> bool:
    """Whether a gang's classes could be placed whole in one of the domains it may use, were every
    node group whose template runs them empty and grown to its MaxSize, with no back-off, limit or
    quota in the way, and every node outside the managed groups empty. The classes share that room,
    so two pod sets that each fit a group alone but not together do not fit.

    What it guarantees: True exactly when, in some domain, one of two first fits (:func:`fill_bins`)
    places every pod: (1) the most constrained classes first, those with room on the fewest of the
    domain's nodes (a driver only one small group admits goes before workers any group takes), each
    class filling first the nodes the fewest classes after it admit; (2) biggest first into the groups
    in name order, the one order this check used before, so it fails no gang it did not fail before.
    False means neither first fit holds the gang; it is not a proof that no placement exists (that is
    bin packing): a gang only some third order packs, e.g. sets whose sizes interlock across nodes, still
    reads as impossible.
    """
    empty = empty_room(ctx)
    one_zone = any(c.one_zone for c in classes)
    biggest = sorted(classes, key=PodClass.sort_key)
    for region, zone in gang_domains(ctx, one_zone):
        probe = _empty_bins(ctx, empty, region, zone)
        room = {id(c): _nodes_with_room(c, probe) for c in classes}
        constrained = sorted(classes, key=lambda c: (room[id(c)], c.sort_key()))
        if _fits_when_empty(constrained, probe, spare_shared=True):
            return True
        if _fits_when_empty(biggest, _empty_bins(ctx, empty, region, zone), spare_shared=False):
            return True
    return False


@dataclass(slots=True)
class _EmptyNodes:
    """The nodes of one group (or one node of no group) in a domain, all empty: what a class may use."""

    labels: Mapping[str, str]
    taints: Sequence[Any]
    name: str | None  # the node's, for a node of no group
    bins: list[Bin]
    group: NodeGroup | None = None  # whose template nodes these are
    zone: str | None = None  # the one zone of the group they are kept to (a one-zone gang's fleet)


def _empty_bins(
    ctx: Context, empty: Mapping[GroupKey, Resources], region: str | None, zone: str | None
) -> list[_EmptyNodes]:
    """The domain's groups at MaxSize (their template nodes, empty), then its nodes of no group."""
    out: list[_EmptyNodes] = []
    for group in ctx.groups:
        template = group.template
        if template is None or group.max_size <= 0 or not group_in_domain(group, region, zone):
            continue
        ids = [f"{group.name}/ever-{i + 1}" for i in range(group.max_size)]
        bins = [Bin(dict(empty[group.key]), ids)]
        out.append(_EmptyNodes(template.labels, template.taints, None, bins, group, zone))
    for node in ctx.nodes.values():
        if node.group is None and node_in_domain(node, region, zone):
            info = node.info
            room = room_less(info.allocatable, node.daemon_used)
            out.append(_EmptyNodes(info.labels, info.taints, info.name, [Bin(room, [info.name])]))
    return out


def _admits(cls: PodClass, where: _EmptyNodes) -> bool:
    """Whether the class's selectors, affinity and tolerations let its pods onto ``where``'s nodes: a
    group's on each zone and type it may launch them with (:meth:`PodClass.node_blocker_on_new`), as
    scale-up judges it."""
    if where.group is not None:
        return cls.node_blocker_on_new(where.group, launch_labels(where.group, where.zone)) is None
    return not why_not_placeable(
        cls.node_selector, cls.terms, cls.tolerations, where.labels, where.taints, where.name
    )


def _nodes_with_room(cls: PodClass, nodes: Sequence[_EmptyNodes]) -> int:
    """How many of the (empty) nodes admit the class and have room for one of its pods."""
    return sum(
        len(b.ids)
        for where in nodes
        if _admits(cls, where)
        for b in where.bins
        if fit_count(cls.requests, b.free, cls.per_node) > 0
    )


def _fits_when_empty(
    classes: Sequence[PodClass], nodes: Sequence[_EmptyNodes], *, spare_shared: bool
) -> bool:
    """Whether the classes' pods all fit, in order, first fit, in ``nodes`` (which they fill). With
    ``spare_shared`` each class tries first the nodes the fewest classes after it admit, else the
    nodes in their order."""
    for i, cls in enumerate(classes):
        want = len(cls.pods)
        order = list(nodes)
        if spare_shared:
            later = classes[i + 1 :]
            order.sort(key=lambda where: sum(_admits(c, where) for c in later))  # stable: ties by name
        for where in order:
            if want <= 0:
                break
            if _admits(cls, where):
                want -= sum(count for _, count in fill_bins(cls, where.bins, want))
        if want > 0:
            return False
    return True


class RoomTrial:
    """Places classes on a checkpoint of the stage, and when they are of a coscheduling PodGroup that
    sets ``minResources``, opens the room it asks the cluster to have free beside them
    (:mod:`spillway.planner.minresources`); rolled back when that cannot be had."""

    def __init__(self, stage: ScaleUpStage, gang: str, classes: list[PodClass]) -> None:
        self.stage = stage
        self.gang = gang
        self.classes = classes
        self.min_room = min_room(stage.ctx, gang)  # coscheduling's minResources (planner.minresources)

    def _cover_min_room(self, starts: Sequence[int]) -> tuple[str, str] | None:
        """Once the gang is placed, the room its coscheduling PodGroup's ``minResources`` asks the
        cluster to have free (:mod:`spillway.planner.minresources`): counted on every node but those
        on their way out, on launching capacity and on this plan's new nodes, the gang's own pods given
        back; what that lacks is opened as more nodes of one group, with the gang (those it uses first,
        then those its pods may use, best first). None when covered, else why not (code, reason)."""
        stage, ctx = self.stage, self.stage.ctx
        # with what members of the gang classes placed before this one put on nodes (MemberPlacement)
        placed: Resources = dict(ctx.min_room_wanted.get(self.gang, ({}, {}))[1])
        for cls, start in zip(self.classes, starts, strict=True):
            add_into(placed, cls.requests, cls.next - start)
        left = min_room_balance(stage, self.gang, self.min_room, placed)
        lack = {name: -value for name, value in left.items() if value < 0}
        if not lack:
            ctx.min_room_wanted[self.gang] = (self.min_room, placed)
            return None
        first: Skip | None = None
        for group in self._room_groups():
            skip = stage._why_skip(group) or self._open_room(group, lack)
            if skip is None:
                ctx.min_room_wanted[self.gang] = (self.min_room, placed)
                return None
            first = first or skip
        why = first.reason if first else "no node group's nodes have it"
        return (
            first.code if first else codes.NO_GROUP_FITS,
            f"its PodGroup's minResources and minMember pod slots ({describe(self.min_room)}) must be "
            "free in the cluster for "
            f"coscheduling to admit its pods, {describe(lack)} more than the gang's nodes and the free "
            f"room there is: {why}",
        )

    def _room_groups(self) -> list[NodeGroup]:
        """The groups that may open the room a gang's ``minResources`` lacks: those the gang opens
        nodes in, then those its pods may use, in the expander's order (in the domain being tried)."""
        stage = self.stage
        used = {name for name, gang in stage.ctx.gang_nodes if gang == self.gang}
        out = [g for g in stage.ctx.groups if g.key in used]
        for cls in self.classes:
            out += [g for g in stage._choices(cls)[0] if g not in out]
        return out

    def _open_room(self, group: NodeGroup, lack: Mapping[str, int]) -> Skip | None:
        """Open as many empty nodes of ``group`` with the gang as ``lack`` takes, all or none."""
        stage = self.stage
        per_node = stage.empty[group.key]
        missing = sorted(name for name in lack if per_node.get(name, 0) <= 0)
        if missing:
            return Skip(codes.NO_GROUP_FITS, f"{group.name}'s nodes have no {', '.join(missing)}")
        want = max(math.ceil(value / per_node[name]) for name, value in lack.items())
        cls = self.classes[0]
        opening, binding = stage.limits.allowed(
            cls.tenant, group, min(stage.room[group.key], want), zone=stage._kept_zone(cls, group)
        )
        if opening >= want and (held := stage._gang_held(cls, group, want)):
            return held
        if opening >= want:
            stage._add_nodes(cls, group, want)  # the class's pods are all placed: the nodes stay empty
            stage.ctx.room_notes.setdefault(group.key, set()).add(
                f"{want} of them for gang {self.gang}'s minResources, which coscheduling admits its pods "
                "only once the cluster has free"
            )
            return None
        if binding is not None:
            return Skip(binding.code, stage.limits.reason(binding, group))
        return Skip(
            codes.MAX_SIZE, f"{group.name} has room for {stage.room[group.key]} of the {want} more nodes"
        )

    def _save(self) -> dict[str, object]:
        stage, ctx = self.stage, self.stage.ctx
        return {
            "nodes": {
                name: (dict(n.free), n.receives, n.marks, list(n.victims)) for name, n in ctx.nodes.items()
            },
            # what the stage's pools know of their nodes' room (Pool.bound, Pool.full): a trial that
            # fills a node tightens them, and its undoing gives the room back
            "pools": [(p, dict(p.bound), dict(p.full)) for p in (*stage.schedulable, *stage.reclaimable)],
            # which volumes each node has, for the attach limits (the classes read volume_nodes itself)
            "volume_nodes": {k: set(v) for k, v in ctx.volume_nodes.items()},
            "volume_users": dict(ctx.volume_users),
            "launching": copy_bins(stage.launching),
            "new_bins": copy_bins(stage.new_bins),
            "room": dict(stage.room),
            "limits": stage.limits.save(),
            "new_nodes": dict(ctx.new_nodes),
            "new_pods": {k: list(v) for k, v in ctx.new_pods.items()},
            "gang_nodes": dict(ctx.gang_nodes),
            "gang_pods": {k: list(v) for k, v in ctx.gang_pods.items()},
            "gang_zones": dict(ctx.gang_zones),
            "planned": ctx.planned.copy(),  # a new node's DaemonSet pods (ScaleUpStage._add_nodes)
            "notes": {k: set(v) for k, v in ctx.overflow_notes.items()},
            "leaving": {k: set(v) for k, v in ctx.leaving_notes.items()},
            "room_notes": {k: set(v) for k, v in ctx.room_notes.items()},
            "min_room_wanted": dict(ctx.min_room_wanted),
            "uncordoned": dict(ctx.uncordoned),
            "nominated": list(ctx.nominated),  # those not charged yet (GangPlacement._place_members)
            "lengths": (len(ctx.placements), len(ctx.pending_out)),
            "next": [(c.next, dict(c.placed_in), dict(c.settled), c.domains) for c in self.classes],
        }

    def _restore(self, saved: dict[str, Any]) -> None:
        stage, ctx = self.stage, self.stage.ctx
        for name, (free, receives, marks, victims) in saved["nodes"].items():
            node = ctx.nodes[name]
            node.free, node.receives, node.marks, node.victims = free, receives, marks, victims
        for pool, bound, full in saved["pools"]:
            pool.bound, pool.full = dict(bound), dict(full)
        ctx.volume_nodes.clear()  # in place: every PodClass holds it
        ctx.volume_nodes.update({k: set(v) for k, v in saved["volume_nodes"].items()})
        ctx.volume_users.clear()
        ctx.volume_users.update(saved["volume_users"])
        stage.launching, stage.new_bins, stage.room = saved["launching"], saved["new_bins"], saved["room"]
        stage.limits.restore(saved["limits"])
        ctx.new_nodes, ctx.new_pods = saved["new_nodes"], saved["new_pods"]
        ctx.gang_nodes, ctx.gang_pods = saved["gang_nodes"], saved["gang_pods"]
        ctx.gang_zones, ctx.planned = saved["gang_zones"], saved["planned"]
        ctx.overflow_notes, ctx.uncordoned = saved["notes"], saved["uncordoned"]
        ctx.leaving_notes, ctx.room_notes = saved["leaving"], saved["room_notes"]
        ctx.min_room_wanted, ctx.nominated = saved["min_room_wanted"], list(saved["nominated"])
        placements, pending = saved["lengths"]
        del ctx.placements[placements:]
        del ctx.pending_out[pending:]
        for cls, (index, placed, settled, domains) in zip(self.classes, saved["next"], strict=True):
            cls.next, cls.placed_in, cls.domains = index, placed, domains  # a raised cap goes too
            cls.next_round(settled)


class GangPlacement(RoomTrial):
    """A gang's classes placed all or none, in one region: each region in preference order is tried
    on a checkpoint of the stage, and rolled back when any pod of the gang is left over. A gang some
    of whose members run already is tried only where they run (:meth:`domains`).

    A gang whose pods ask for one zone (:attr:`PodClass.one_zone`) tries (region, zone) domains instead:
    free room only on nodes labelled with that zone, launching nodes only from groups confined to it (a
    single-AZ group), new nodes from those and from groups tagged ``spillway.io/atomic-launch: fleet``
    that span the zone among others: the gang launch then gets the zone (:attr:`GangLaunch.zone`) and
    asks CreateFleet for that zone's subnets only. Other groups spanning several zones cannot promise
    one, so they are not used for such a gang.

    A gang whose pending pods outnumber what its minimum still needs (a PodGroup's ``minMember`` of 4,
    six pods) that cannot be placed whole is tried again with only those it needs: coscheduling and
    Volcano start the group once its minimum is placed, and the others wait for room. For a Volcano job
    those are first the pods of each task short of its ``minTaskMember``, as many as it lacks
    (:meth:`Gangs.shortfall`): its job is ready only with each task's minimum (JobInfo.CheckTaskReady),
    and its allocation stops at a task that fails to fit below its minimum (NeedContinueAllocating). A
    ProvisioningRequest's gang has no minimum but its whole. (A gang whose minimum already runs is
    not placed here: its pending pods are classes of their own, :meth:`Gangs.started`.)"""

    def __init__(self, stage: ScaleUpStage, gang: str, classes: list[PodClass], gangs: Gangs) -> None:
        # highest priority first, as kube-scheduler queues the gang's pods (:meth:`_place_members`)
        super().__init__(stage, gang, sorted(classes, key=lambda c: -c.priority))
        self.task_of = gangs.task_of
        # what the gang still needs to start, less those running: the pods each Volcano task lacks of
        # its minTaskMember, and more of any task for its minimum (none: no minimum known, all needed:
        # a ProvisioningRequest's gang); pending members this plan does not place (not yet tried by
        # the scheduler, waiting for a volume) are not running
        self.lacking, self.more = gangs.shortfall(gang)
        self.needed = sum(self.lacking.values()) + self.more
        self.ready = gangs.ready_pending  # counted already (a Volcano member requesting nothing)
        self.one_launch = False  # its new nodes were kept to one group, for its atomic launch
        # where its running members are (:meth:`homes`): the only domains the rest may go to
        self.homes = gang_homes(stage.ctx, gangs.running_on.get(gang, set()))
        # ... their regions, most members first ((None,): only nodes of unknown region: :func:`home_regions`)
        self.home_order = home_regions(stage.ctx, gangs.members_on.get(gang, {}))

    def domains(self) -> list[tuple[str | None, str | None]]:
        """(region, zone) to try in order; zone None for a gang that may spread over a region.

        A gang that has not started but has members running already (some bound, a minimum not yet
        met: members recreated, or placed on room that came free) is kept to the region they run in,
        and a gang whose pods ask for one zone to their zone too: the rest placed in a preferred
        region would split one training job over two regions, which its all-reduce cannot span (the
        README's "one region" rule for gangs). Kubernetes' topology-aware workload scheduling does
        the same for a PodGroup whose pods are partly scheduled: new pods go to the domain where the
        others reside, or stay pending (kubernetes.io, "Topology-Aware Workload Scheduling"). When
        that domain cannot hold them, nothing is added elsewhere (:meth:`_report` says why). Members
        running in several regions keep the rest to those, the region of the most members first
        (:func:`home_regions`); members all on nodes of unknown region keep the rest out of every
        region, to the free room of nodes of unknown region: one domain, (None, None), tried with
        :attr:`ScaleUpStage.regions` (None,) (:meth:`_in_some_domain`), as their started gang's pending
        members are (:meth:`ScaleUpStage._place_loose`)."""
        if self.home_order == (None,):
            return [(None, None)]
        one_zone = any(c.one_zone for c in self.classes)
        domains = gang_domains(self.stage.ctx, one_zone)
        if not self.homes:
            return domains
        rank = {region: i for i, region in enumerate(self.home_order)}
        kept = [(region, zone) for region, zone in domains if at_home(self.homes, region, zone, one_zone)]
        return sorted(kept, key=lambda d: rank.get(d[0], len(rank)))

    def _home_text(self) -> str:
        """Where the gang's running members are, for a reason ("" when none is known)."""
        if self.home_order == (None,):
            return (
                f"its running members are only on nodes whose region is unknown ({UNKNOWN_REGION}), so "
                "the rest are placed only in the free room of such nodes, and no region gets a node for "
                "them (any could split the gang); "
            )
        if not self.homes:
            return ""
        one_zone = any(c.one_zone for c in self.classes)
        if len(self.home_order) > 1 and not one_zone:  # split already: it is not denied, nor made worse
            return (
                f"its running members are in {', '.join(str(r) for r in self.home_order)} (most members "
                "first), so the rest are placed there only (a gang is not split further); "
            )
        places = sorted({zone if one_zone and zone else region for region, zone in self.homes})
        return (
            f"its running members are in {', '.join(places)}, so the rest are placed there only (a gang "
            "is not split over regions or zones); "
        )

    def run(self) -> None:
        size = sum(c.remaining for c in self.classes)
        needed = self._needed_pods()
        if needed is None:  # its other pending pods wait for the scheduler: the gang cannot start yet
            self._pend(
                codes.GANG_INCOMPLETE,
                f"gang {self.gang} needs {self.needed} more pod(s){self._tasks_text()} to start and the "
                f"{size} ready to place do not hold them (the others wait for the scheduler, a volume or "
                "their scheduling gates): "
                "nothing is added until they are",
            )
            return
        domains = self.domains()
        placed, first = self._in_some_domain(domains)
        if placed:
            if self.needed > 0 and len(needed) == size:  # no pod beyond what it needs to start
                self.stage.ctx.minimum_gangs.add(self.gang)
            return
        if first is not None and self.needed > 0 and len(needed) < size:
            cut = self._keep_only(needed)
            placed, _ = self._in_some_domain(domains)
            if placed:
                self.stage.ctx.minimum_gangs.add(self.gang)
                code, why = self._held(first)
                why = (
                    f"gang {self.gang} starts with the {self.needed} pod(s) it still needs"
                    f"{self._tasks_text()} of its {size} pending; the others wait for room, since the whole "
                    f"gang cannot be placed: {self._home_text()}{why}"
                )
                for _, pods in cut:
                    for pod in pods:
                        self.stage.ctx.pending_out.append(PendingPod(pod, why, code))
                return
            for cls, pods in cut:  # the classes are as before either attempt, but for their pods
                cls.pods += pods
        self._report(first, size, len(domains))

    def _in_some_domain(
        self, domains: list[tuple[str | None, str | None]]
    ) -> tuple[bool, tuple[str, str] | None]:
        """Place the gang whole in the first domain that holds it; else (False, the first refusal). A
        gang whose members run only on nodes of unknown region is kept to such nodes' free room."""
        if self.home_order != (None,):
            return self._in_domains(domains)
        self.stage.regions = self.home_order
        try:
            return self._in_domains(domains)
        finally:
            self.stage.regions = None

    def _in_domains(
        self, domains: list[tuple[str | None, str | None]]
    ) -> tuple[bool, tuple[str, str] | None]:
        first: tuple[str, str] | None = None
        for region, zone in domains:
            if self.gang in self.stage.ctx.one_group:
                placed, failure = OneGroup(self, region, zone, refused=first is not None).run()
            else:
                failure, saved = self._attempt(region, zone, None)
                failure = self._where(failure, region, zone, None)
                placed = failure is None
                if placed and self._split_atomic():  # one launch brings all its new nodes, or none
                    self._restore(saved)
                    self.one_launch = True
                    placed, failure = OneGroup(self, region, zone, refused=first is not None).run()
            if placed:
                return True, None
            first = first or failure
        return False, first

    def _split_atomic(self) -> bool:
        """Whether the gang's new nodes, as a trial kept them, are in more than one group, one of them
        tagged for atomic launch: each group's part would be launched all or none alone (one gang-launch
        execution per group, or a plain raise beside it), so one part could run, paid for, while another
        failed. Such a gang takes its new nodes from one group instead (:class:`OneGroup`)."""
        ctx = self.stage.ctx
        used = {name for (name, gang), nodes in ctx.gang_nodes.items() if gang == self.gang and nodes > 0}
        if len(used) <= 1:
            return False
        return any(g.atomic_launch != "off" for g in ctx.groups if g.key in used)

    def _attempt(
        self, region: str | None, zone: str | None, group: GroupKey | None
    ) -> tuple[tuple[str, str] | None, dict[str, object]]:
        """One trial of the gang on a checkpoint of the stage, in ``region`` and ``zone``, its new nodes
        in ``group`` only (None: wherever the expander sends each class): its failure (rolled back) or
        None (kept), and the checkpoint, to roll back a trial kept."""
        saved = self._save()
        self.stage.region, self.stage.zone, self.stage.group = region, zone, group
        failure = self._try()
        self.stage.region = self.stage.zone = self.stage.group = None
        if failure is not None:
            self._restore(saved)
        return failure, saved

    @staticmethod
    def _where(
        failure: tuple[str, str] | None, region: str | None, zone: str | None, group: GroupKey | None
    ) -> tuple[str, str] | None:
        """The failure of a trial, saying where it was tried."""
        if failure is None:
            return None
        where = "/".join(w for w in (region, zone, group.name if group else None) if w)
        return (failure[0], f"in {where}: {failure[1]}") if where else failure

    def _candidates(
        self, region: str | None, zone: str | None
    ) -> tuple[list[NodeGroup], dict[int, set[GroupKey]]]:
        """The groups the gang's classes may use in the domain, in the expander's order for its first
        class, then for the next; and per class (by id) the names of those it may use."""
        stage = self.stage
        stage.region, stage.zone = region, zone
        groups: list[NodeGroup] = []
        admitted: dict[int, set[GroupKey]] = {}
        for cls in self.classes:
            choices = stage._choices(cls)[0]
            admitted[id(cls)] = {g.key for g in choices}
            known = {g.key for g in groups}
            groups += [g for g in choices if g.key not in known]
        stage.region = stage.zone = None
        return groups, admitted

    def _needed_pods(self) -> set[str] | None:
        """The pending pods that start the gang: those of each task short of its minimum, as many as it
        lacks, then the first others in line (leaders first) for the rest of the minimum. None when the
        pods ready to place cannot start it. Pods counted as ready already (:attr:`Gangs.ready_pending`)
        take no room and are always in."""
        lacking = dict(self.lacking)
        chosen: set[str] = set()
        others: list[str] = []
        for cls in self.classes:
            for pod in cls.pods[cls.next :]:
                task = self.task_of.get(pod, "")
                if pod in self.ready:
                    chosen.add(pod)
                elif lacking.get(task, 0) > 0:
                    lacking[task] -= 1
                    chosen.add(pod)
                else:
                    others.append(pod)
        if any(lacking.values()) or len(others) < self.more:
            return None
        return chosen.union(others[: self.more])

    def _tasks_text(self) -> str:
        """The tasks short of their minimum, for a reason: " (task ps: 1)"; "" for none."""
        if not self.lacking:
            return ""
        return f" (task {', '.join(f'{task}: {n}' for task, n in self.lacking.items())})"

    def _keep_only(self, keep: set[str]) -> list[tuple[PodClass, list[str]]]:
        """Shorten the classes to the pods in ``keep``, in their order; each class's pods cut."""
        cut: list[tuple[PodClass, list[str]]] = []
        for cls in self.classes:
            rest = cls.pods[cls.next :]
            cut.append((cls, [pod for pod in rest if pod not in keep]))
            cls.pods[cls.next :] = [pod for pod in rest if pod in keep]
        return cut

    def _report(self, first: tuple[str, str] | None, size: int, tried: int) -> None:
        if first is None:  # one zone asked, and no zone known: no single-AZ group, no labelled node
            first = (
                codes.GANG_NO_ZONE,
                "its pods require one zone (topology.kubernetes.io/zone) and no node group is confined "
                "to one zone and no node carries the zone label",
            )
        elif self.gang in self.stage.ctx.one_group:
            first = (
                first[0],
                "no one node group takes every pod the room there is leaves over (all or none within one "
                f"group, as cluster-autoscaler's best-effort-atomic class scales up); first: {first[1]}",
            )
        elif self.one_launch:
            first = (
                first[0],
                "its new nodes must all come from one node group, which launches them atomically (all or "
                f"none), and no one group takes every pod the room there is leaves over; first: {first[1]}",
            )
        elif any(c.one_zone for c in self.classes):
            first = (
                codes.GANG_NO_ZONE,
                f"its pods require one zone and none of the {tried} zone(s) holds it whole "
                f"(groups spanning several zones are used only in fleet mode); first: {first[1]}",
            )
        code, why = self._held(first)
        self._pend(
            code,
            f"gang {self.gang} ({size} pods) cannot be placed whole, so nothing is added; {self._home_text()}{why}",
        )

    def _held(self, refusal: tuple[str, str]) -> tuple[str, str]:
        """The code and words of a gang kept where its members run (:attr:`home_order`) for ``refusal``
        (code, why) of its trial there: ``gang-home-full`` when the groups there stopped it;
        ``gang-home-unknown`` when it was kept to the free room of nodes of unknown region (no group
        may take it there, so a refusal saying none exists is replaced). Other codes are kept."""
        code, why = refusal
        if self.home_order == (None,) and code in (*_HOME_CODES, codes.NO_MANAGED_GROUPS):
            return codes.GANG_HOME_UNKNOWN, "the free room of those nodes does not hold it"
        if self.home_order and code in _HOME_CODES:  # kept to its regions (none in one region)
            return codes.GANG_HOME_FULL, why
        return code, why

    def _pend(self, code: str, reason: str) -> None:
        """Every pod the gang has left, pending with one code and reason."""
        for cls in self.classes:
            for pod in cls.take(cls.remaining):
                self.stage.ctx.pending_out.append(PendingPod(pod, reason, code))

    def _try(self) -> tuple[str, str] | None:
        starts = [cls.next for cls in self.classes]
        failure = self._place_members()
        if failure is not None:
            return failure
        return self._cover_min_room(starts) if self.min_room else None

    def _place_members(self) -> tuple[str, str] | None:
        """The gang's classes, highest priority first, as kube-scheduler queues its pods; each meets the
        nominated pods of its own priority or higher (addGENominatedPods), charged just before it is
        placed: a launcher above a pod nominated to a node takes the room that pod waits for, a worker
        below it does not. The trial's checkpoint holds what was charged (:meth:`_save`)."""
        for cls in self.classes:
            self.stage.ctx.charge_nominated(cls.priority)
            failure = self.stage.place(cls)
            if failure is not None:
                return failure
        return None


class OneGroup:
    """The one node group a best-effort-atomic ProvisioningRequest's new nodes come from, in one domain
    (region, or zone), as cluster-autoscaler's ``ScaleUp`` with ``allOrNothing`` picks it
    (kubernetes/autoscaler cluster-autoscaler/core/scaleup/orchestrator/orchestrator.go): one expansion
    option per group for all the request's pods (``ComputeExpansionOption``: every pod set bin-packed
    into new nodes of that group, after the room the snapshot holds), those that do not take every pod
    dropped, and the expander's best of the rest (``ExpanderStrategy.BestOption``). Here each option is
    a trial of the whole gang with its new nodes in that group only (:meth:`GangPlacement._attempt`:
    free room, capacity already launching and nodes to uncordon count wherever they are), and the
    expander ranks the trials that hold it whole (:meth:`Expander.whole_key`).

    Unlike cluster-autoscaler, a trial applies MaxSize, the tenant, cluster and CapacityQuota limits and
    the on-demand cap as it opens nodes, so an option they cut is no option and the next best is taken.
    cluster-autoscaler's expander picks before its cluster-wide limits are applied (``applyLimits``), and
    when they cut the option it picked it refuses the scale-up ("Not attempting scale-up due to
    all-or-nothing strategy"), though another group held every pod within them.

    Trials are costly (a checkpoint of every node), so not every group is tried: one trial with new
    nodes nowhere (:meth:`_probe`) tells which pods the one group must open nodes for; a group backed
    off, or whose nodes, even to its MaxSize, cannot hold them, is skipped, and the others are tried best
    bound first (their option with as few nodes as those pods allow, :meth:`_bound`): once a trial holds
    the gang, a group whose bound does not rank before it cannot do better."""

    def __init__(
        self, placement: GangPlacement, region: str | None, zone: str | None, *, refused: bool
    ) -> None:
        self.placement = placement
        self.stage = placement.stage
        self.region, self.zone = region, zone
        # a refusal to report is had already (an earlier domain's): no group that cannot hold the gang
        # is tried for one
        self.refused = refused
        self.refusal: tuple[str, str] | None = None  # the first trial's failure here
        # the pods each class's new nodes must take (:meth:`_probe`), for the classes that is known of
        self.known: list[tuple[PodClass, int]] = []
        self.exact = False  # every class's pods on new nodes are known, not only the first short one's
        # per class (by id): how many of its pods a new node takes once free room has taken its share
        # (a hostname spread's cap rises with the pods placed on existing nodes, Domains.raised), as the
        # probe left it: a trial opens its nodes with that cap, and the rollback lowers it again
        self.per_node: dict[int, int] = {}
        self.movable = False  # every pod of the gang may move (spot first), when there are spot groups
        self.bounds: dict[GroupKey, tuple[Any, ...]] = {}
        # new nodes per group the plan opens before the gang: their warm instances are not the gang's
        self.opened = dict(self.stage.ctx.new_nodes)

    def run(self) -> tuple[bool, tuple[str, str] | None]:
        """Place the gang with the best whole option (kept): (True, None); else (False, why not)."""
        groups, admitted = self.placement._candidates(self.region, self.zone)
        if len(groups) <= 1:
            return self._only(groups[0].key if groups else NO_GROUP)
        able = self._probe(groups, admitted)
        if able is None:
            return self._only(NO_GROUP)  # free room, launching capacity and nodes to uncordon hold it
        ctx = self.stage.ctx
        if any(g.spot for g in groups):
            self.movable = all(class_not_movable(ctx, c) is None for c in self.placement.classes)
        if self._best(sorted(able, key=self._bound)):
            return True, None
        if self.refusal is None and not self.refused:  # the refusal of the group the expander ranks first
            return self._only(groups[0].key)
        return False, self.refusal

    def _only(self, group: GroupKey) -> tuple[bool, tuple[str, str] | None]:
        failure, _ = self.placement._attempt(self.region, self.zone, group)
        return failure is None, self._where(failure, group)

    def _where(self, failure: tuple[str, str] | None, group: GroupKey) -> tuple[str, str] | None:
        return GangPlacement._where(failure, self.region, self.zone, group)

    def _probe(
        self, groups: list[NodeGroup], admitted: Mapping[int, set[GroupKey]]
    ) -> list[NodeGroup] | None:
        """One trial with new nodes nowhere, every class placed as far as free room, launching capacity
        and nodes to uncordon take it, rolled back: None when they take it whole; else the groups that
        may hold what they leave (:meth:`_may_hold`).

        What they leave is :attr:`known`: the first class they leave pods of, and how many. Every class
        before it was placed whole without a new node, so a trial in any one group places them, and that
        class up to its new nodes, just the same. So it does the classes after it (:attr:`exact`), unless
        a class is placed in zone rounds (which open new nodes between their passes: the zones they open
        change what free room takes next) or a tenant's limits may cut the launching capacity its
        classes take (:meth:`_launching_limited`); then only the first is known, and only if no class up
        to it has rounds. When no group may hold the first, the classes after it are not placed."""
        placement, stage = self.placement, self.stage
        rounds = [bool(c.domains.counted) for c in placement.classes]
        self.exact = not any(rounds) and not self._launching_limited()
        saved = placement._save()
        stage.region, stage.zone, stage.group = self.region, self.zone, NO_GROUP
        able = list(groups)
        left: list[tuple[PodClass, int]] = []
        for i, cls in enumerate(placement.classes):
            stage.ctx.charge_nominated(cls.priority)  # as the trials do (GangPlacement._place_members)
            stage.place(cls)
            self.per_node[id(cls)] = cls.per_node
            if cls.remaining:
                left.append((cls, cls.remaining))
            if len(left) == 1 and cls.remaining and not any(rounds[: i + 1]):
                self.known = left[:1]
                able = [g for g in groups if self._may_hold(g, admitted)]
                if not able:
                    break  # what the classes after it leave changes nothing
        stage.region = stage.zone = stage.group = None
        placement._restore(saved)
        if not left:
            return None
        if self.exact:
            self.known = left
        return [g for g in able if self._may_hold(g, admitted)]

    def _launching_limited(self) -> bool:
        """Whether a tenant's limits bind one of the gang's classes and there are fresh launching nodes:
        then the new nodes an earlier class opens count against the fresh launching nodes a later class
        may take (:func:`~spillway.planner.placement.place_on_launching`), and a later class may leave
        more pods for new nodes in one group than in another. Cluster limits and CapacityQuotas count
        new nodes only (they can only make a trial fail), and a tenant's take of launching capacity
        some class topped up already, or of Ready nodes, is not limited."""
        stage = self.stage
        if not stage.limits.per_tenant or all(c.tenant is None for c in self.placement.classes):
            return False
        return any(b.fresh and b.ids for bins in stage.launching.values() for b in bins)

    def _least_nodes(self, group: NodeGroup) -> int | None:
        """The fewest new nodes of ``group`` that hold the pods :attr:`known`: as many as each class
        needs alone, and as the pods' requests summed need of a node's room; None when a node takes no
        pod of some class."""
        empty = self.stage.empty[group.key]
        nodes = 0
        total: Resources = {}
        for cls, count in self.known:
            per_node = fit_count(cls.requests, empty, min(count, self.per_node.get(id(cls), cls.per_node)))
            if per_node <= 0:
                return None
            nodes = max(nodes, -(-count // per_node))
            add_into(total, cls.requests, count)
        for name, value in total.items():
            if empty.get(name, 0) > 0:
                nodes = max(nodes, -(-value // empty[name]))
        return nodes

    def _may_hold(self, group: NodeGroup, admitted: Mapping[int, set[GroupKey]]) -> bool:
        """Could new nodes of ``group`` alone take the pods :attr:`known`? Not when it is backed off (or
        the zone being tried is, of a group spanning several), a class among them may not use it, or even
        empty nodes to its room below MaxSize hold fewer (limits, caps and spreads only lower that)."""
        stage = self.stage
        if stage.backoff[group.key] or any(group.key not in admitted[id(c)] for c, _ in self.known):
            return False
        if self.zone is not None and len(group.zones) > 1 and zone_backoff(stage.ctx, group, self.zone):
            return False  # its fleet would ask for this zone only (ScaleUpStage._backoff)
        nodes = self._least_nodes(group)
        return nodes is not None and nodes <= stage.room[group.key]

    def _option(self, group: NodeGroup, nodes: int, requests: Resources) -> WholeOption:
        warm = group.warm_instances - self.opened.get(group.key, 0)
        return WholeOption(group, nodes, requests, self.stage.empty[group.key], self.movable, warm)

    def _bound(self, group: NodeGroup) -> tuple[Any, ...]:
        """The best rank ``group``'s whole option could have: with the fewest nodes that hold the pods
        known to go on them, when all are (:attr:`exact`); else as an option not known yet (no waste,
        warm: :class:`WholeOption`)."""
        bound = self.bounds.get(group.key)
        if bound is None:
            total: Resources = {}
            for cls, count in self.known:
                add_into(total, cls.requests, count)
            option = self._option(group, self._least_nodes(group) or 0, total) if self.exact else None
            option = option or self._option(group, 0, {})
            bound = self.bounds[group.key] = self.stage.expander.whole_key(self.stage.ctx, option)
        return bound

    def _best(self, ranked: list[NodeGroup]) -> bool:
        """Try the groups best bound first, skipping those whose bound does not rank before the best
        whole option had; keep the best placed. A trial kept as the best so far is rolled back when
        another group is tried, and tried again at the end when it stays the best. False: no trial
        holds the gang whole."""
        placement = self.placement
        best: tuple[tuple[Any, ...], GroupKey] | None = None
        kept: dict[str, object] | None = None  # the checkpoint before the best trial, while it is kept
        for group in ranked:
            if best is not None and self._bound(group) >= best[0]:
                continue
            if kept is not None:
                placement._restore(kept)
                kept = None
            failure, saved = placement._attempt(self.region, self.zone, group.key)
            if failure is not None:
                self.refusal = self.refusal or self._where(failure, group.key)
                continue
            key = self._placed_key(group)
            if best is None or key < best[0]:
                best, kept = (key, group.key), saved
            else:
                placement._restore(saved)
        if best is not None and kept is None:
            # the same trial on the same stage holds it again; were it not to (a checkpoint that missed
            # something), the request waits for the next plan rather than the plan failing
            failure, _ = placement._attempt(self.region, self.zone, best[1])
            if failure is not None:
                self.refusal = self.refusal or self._where(failure, best[1])
                return False
        return best is not None

    def _placed_key(self, group: NodeGroup) -> tuple[Any, ...]:
        """The rank of the whole option the trial just kept in ``group`` made: its new nodes and the
        requests of the pods they got. A trial whose new nodes got other pods than :meth:`_probe` said
        makes the bounds guesses: from then on each is the best its group could be."""
        ctx, gang = self.stage.ctx, self.placement.gang
        on_new = set(ctx.gang_pods.get((group.key, gang), ()))
        total: Resources = {}
        counts: dict[int, int] = {}
        for cls in self.placement.classes:
            count = sum(1 for pod in cls.pods if pod in on_new)
            add_into(total, cls.requests, count)
            if count:
                counts[id(cls)] = count
        if self.exact and counts != {id(c): n for c, n in self.known}:
            self.exact, self.bounds = False, {}
        nodes = ctx.gang_nodes.get((group.key, gang), 0)
        return self.stage.expander.whole_key(ctx, self._option(group, nodes, total))


class MemberPlacement(RoomTrial):
    """The pending members of a coscheduling PodGroup that sets ``minResources`` and is no gang to place
    all or none: its minimum runs (:attr:`PodClass.started_gang`, a worker recreated), or its
    ``minMember`` is 1. They are placed one by one, as any pod, but coscheduling's PreFilter checks
    the group's ``minResources`` for each of them (kubernetes-sigs/scheduler-plugins
    pkg/coscheduling/core/core.go ``PreFilter``): it skips the check only while the group is in its
    permitted cache, for ``PermitWaitingTimeSeconds`` (60 s by default, apis/config/v1/defaults.go)
    after a pod of it passed, and the PostFilter and Unreserve of a failed attempt drop it from there
    (pkg/coscheduling/coscheduling.go). A member pending for lack of a node has no node before that
    window ends: a node launched for it is judged with the check, so the plan opens the room the check
    asks beside it, or gives it no node (a node it would be refused). A class taking free room only
    (:attr:`PodClass.free_only`) launches nothing and is placed as it is."""

    def __init__(self, stage: ScaleUpStage, cls: PodClass, gang: str) -> None:
        super().__init__(stage, gang, [cls])

    def run(self) -> None:
        (cls,) = self.classes
        saved = self._save()
        start = cls.next
        self.stage.place(cls)  # the pods left over are pending, with their reason
        if cls.next == start:
            return
        failure = self._cover_min_room([start])
        if failure is None:
            return
        self._restore(saved)
        code, why = failure
        reason = f"no node is added for this member of gang {self.gang}: {why}"
        for pod in cls.take(cls.remaining):
            self.stage.ctx.pending_out.append(PendingPod(pod, reason, code))


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


def _base_filled(group: NodeGroup) -> Skip:
    return Skip(
        codes.ON_DEMAND_BASE,
        f"{group.name} launches on-demand only up to OnDemandBaseCapacity {group.on_demand_base}; "
        "beyond it EC2 may launch spot, and this pod may not move",
    )


def _top(ctx: Context, group: NodeGroup) -> int:
    """The most nodes the group may have after this plan: its MaxSize, or the lower size a scheduled
    action takes it to within the idle threshold (:func:`~spillway.planner.groups.group_ceiling`)."""
    ceiling = group_ceiling(ctx, group)
    return min(group.max_size, ceiling.min_size) if ceiling is not None else group.max_size


def _at_max_size(ctx: Context, group: NodeGroup) -> Skip:
    ceiling = group_ceiling(ctx, group)
    if ceiling is not None and ceiling.min_size < group.max_size:
        return Skip(
            codes.MAX_SIZE,
            f"{group.name} at {ceiling.min_size}: {ceiling.describe()}, and Auto Scaling then terminates "
            "the nodes above it with their pods",
        )
    return Skip(codes.MAX_SIZE, f"{group.name} at MaxSize {group.max_size}")


def _spread_full(group: NodeGroup) -> Skip:
    zone = group.zones[0] if group.zones else "its zone"
    return Skip(
        codes.POD_TOPOLOGY,
        f"{group.name}: its topology spread lets {zone} take no more of it until the least loaded zone "
        "takes more (maxSkew), which nothing in this plan gives it",
    )


def why_unplaceable(
    cls: PodClass,
    candidates: Sequence[NodeGroup],
    rejected: dict[GroupKey, str],
    skipped: list[Skip],
    *,
    closed: bool = False,
) -> tuple[str, str]:
    """Why nothing can run the rest of the class now: (code, reason). ``closed``: pod topology rules
    out some group's template (for as long as the pods that close its domain run there). With no
    group that fits, ``skipped`` holds only the refusal of a node Spillway cordoned that would take a
    pod (:meth:`ScaleUpStage._reuse`, a tenant at its limit): that limit, not the groups, is what keeps
    the pod pending, so its code leads and the reason names the node, then why no group runs the pod."""
    needs = describe(cls.requests, [r for r in sorted(cls.requests) if r != PODS])
    if not candidates:
        code, why = _no_group(needs, rejected, closed)
        if skipped:
            return skipped[0].code, f"{'; '.join(s.reason for s in skipped)}; {why}"
        return code, why
    kinds = {s.code for s in skipped}
    code = kinds.pop() if len(kinds) == 1 else codes.GROUPS_EXHAUSTED
    return code, f"every node group that fits is exhausted ({needs}): {'; '.join(s.reason for s in skipped)}"


def _no_group(needs: str, rejected: Mapping[GroupKey, str], closed: bool) -> tuple[str, str]:
    """Why no node group can run a pod needing ``needs``: each group's refusal in ``rejected``."""
    why = "; ".join(rejected[key] for key in sorted(rejected))
    if closed:
        return codes.POD_TOPOLOGY, f"no node group can run this pod now ({needs}): {why}"
    code = codes.NO_GROUP_FITS if rejected else codes.NO_MANAGED_GROUPS
    if any(NOT_ASKABLE in r for r in rejected.values()):  # a group whose zone or type EC2 picks
        return code, f"no node group can be asked for a node that runs this pod ({needs}): {why}"
    return code, f"no node group can ever run this pod ({needs}): {why or 'no managed node groups'}"


def scale_up_actions(ctx: Context) -> list[ScaleUp]:
    """One action per group that gets new nodes, preferred region first."""
    actions: list[ScaleUp] = []
    for group in sorted(ctx.groups, key=lambda g: (ctx.region_key(g), g.name)):
        count = ctx.new_nodes.get(group.key, 0)
        if count <= 0:
            continue
        placed = ctx.new_pods.get(group.key, [])
        pods = sorted(p for p in placed if p not in ctx.buffer_pods)
        buffers = _buffers_on(ctx, placed)
        actions.append(
            ScaleUp(
                group=group.name,
                region=group.region,
                from_size=group.desired,
                to_size=group.desired + count,
                pods=tuple(pods),
                reason=_scale_up_reason(ctx, group, count, len(pods), buffers),
                gangs=tuple(
                    GangLaunch(
                        gang,
                        nodes,
                        tuple(sorted(ctx.gang_pods.get((g, gang), ()))),
                        dict(ctx.gang_labels.get(gang, {})),
                        zone=ctx.gang_zones.get((g, gang)),
                    )
                    for (g, gang), nodes in sorted(ctx.gang_nodes.items())
                    if g == group.key and nodes > 0
                ),
                tenants=opened_by(ctx, group.key),
                buffers=tuple(sorted(buffers.items())),
            )
        )
    return actions


def opened_by(ctx: Context, group: GroupKey) -> tuple[tuple[str, int], ...]:
    """New nodes of ``group`` per tenant whose pods opened them, as the limits charge them.

    A class opens nodes and is the first to fill them (later classes only top them up), so the
    first pod placed on each ``<group>/new-<n>`` names the node's tenant.
    """
    prefix = f"{group.name}/new-"
    owners: dict[str, str] = {}
    for p in ctx.placements:
        if p.group == group and p.node.startswith(prefix) and p.node not in owners:
            buffer = ctx.buffer_pods.get(p.pod)
            namespace = p.pod.split("/", 1)[0] if buffer is None else buffer.namespace
            owners[p.node] = ctx.snapshot.tenant(namespace) if namespace else ""
    owners = {node: tenant for node, tenant in owners.items() if tenant}  # a configured buffer's: nobody's
    counts: dict[str, int] = {}
    for tenant in owners.values():
        counts[tenant] = counts.get(tenant, 0) + 1
    return tuple(sorted(counts.items()))


def reused_by(ctx: Context) -> dict[str, str]:
    """Node Spillway cordoned that this plan uncordons for pending pods -> the tenant whose pods it is
    uncordoned for: the first pod placed there (the class whose reuse uncordoned it; a cordoned node takes
    no pod before), as :func:`opened_by` names a new node's. A configured buffer's node is nobody's."""
    owners: dict[str, str] = {}
    for p in ctx.placements:
        if p.node in ctx.uncordoned and p.node not in owners:
            buffer = ctx.buffer_pods.get(p.pod)
            namespace = p.pod.split("/", 1)[0] if buffer is None else buffer.namespace
            owners[p.node] = ctx.snapshot.tenant(namespace) if namespace else ""
    return {node: tenant for node, tenant in owners.items() if tenant}


def _buffers_on(ctx: Context, pods: Sequence[str]) -> dict[str, int]:
    """Capacity buffers whose virtual pods go to new nodes: buffer key -> pods."""
    out: dict[str, int] = {}
    for pod in pods:
        buffer = ctx.buffer_pods.get(pod)
        if buffer is not None:
            out[buffer.key] = out.get(buffer.key, 0) + 1
    return out


def min_room_balance(stage: ScaleUpStage, gang: str, need: Resources, placed: Resources) -> Resources:
    """What the room the plan leaves so far (every node but those on their way out, launching capacity,
    the plan's new nodes; a registered node still launching once, as its launching bin: counted as a
    node's free room too, its room was summed twice, where coscheduling sums each node once) and the ``gang``'s own pods (those ``placed`` by the plan and those bound to
    the nodes counted, :func:`~spillway.planner.minresources.bound_own`) have beyond its
    ``minResources`` ``need``, per resource (:func:`~spillway.planner.minresources.balance`; negative
    where short)."""
    nodes = stage.ctx.nodes
    # a node still launching counts once, as its launching bin (placement.registered_launching)
    rooms = [
        (n.free, 1) for n in nodes.values() if not _leaving(n) and not registered_launching(stage.ctx, n)
    ]
    bins = [*stage.launching.values(), *stage.new_bins.values()]
    rooms += [(b.free, len(b.ids)) for group_bins in bins for b in group_bins]
    bound = stage.bound.get(gang)
    if bound is None:
        bound = stage.bound[gang] = bound_own(stage.ctx.snapshot.pods, gang)
    own = dict(placed)
    for name, taken in bound.items():
        if name in nodes and not _leaving(nodes[name]):
            add_into(own, taken)
    return balance(need, rooms, own)


def _leaving(node: WorkNode) -> bool:
    """A Ready, initialized node on its way out: being deleted (``deletionTimestamp``), or tainted by the
    autoscaler removing it (Spillway's drain, cluster-autoscaler's ``ToBeDeletedByClusterAutoscaler``,
    Karpenter's ``karpenter.sh/disrupted``)."""
    if not node.info.ready or node.starting is not None:
        return False
    return node.info.deleting or any(t[0] in DELETION_TAINTS for t in node.info.taints)


def _staying(taints: Sequence[TaintT]) -> tuple[TaintT, ...]:
    """A node's taints but those that say it is going."""
    return tuple(t for t in taints if t[0] not in DELETION_TAINTS)


def leaving_clause(names: Sequence[str], shown: int = 3) -> str | None:
    """ "ip-a fits but is being deleted", or "ip-a, ip-b fit but are being deleted" (at most ``shown``
    named, then how many more); None for no node."""
    if not names:
        return None
    ordered = sorted(names)
    listed = ", ".join(ordered[:shown])
    if len(ordered) > shown:
        listed += f" and {len(ordered) - shown} more"
    return f"{listed} {'fits but is' if len(ordered) == 1 else 'fit but are'} being deleted"


def _scale_up_reason(
    ctx: Context, group: NodeGroup, count: int, pods: int, buffers: Mapping[str, int]
) -> str:
    noun = "node" if count == 1 else "nodes"
    who = [f"{pods} pending pod(s)"] if pods or not buffers else []
    who += [f"capacity buffer {key} ({n} virtual pod(s))" for key, n in sorted(buffers.items())]
    need = "needs" if len(who) == 1 and buffers and not pods else "need"
    reason = f"{' and '.join(who)} {need} {count} new {group.types_text()} {noun} in {group.region}"
    if ctx.primary and group.region != ctx.primary:
        reason += f" (overflow from primary region {ctx.primary})"
    return reason + "".join(f"; {note}" for note in _scale_up_notes(ctx, group))


def _scale_up_notes(ctx: Context, group: NodeGroup) -> list[str]:
    """The clauses after a scale-up's reason: nodes on their way out its pods fit, where its template
    came from, the better groups skipped."""
    notes = sorted(ctx.leaving_notes.get(group.key, ())) + sorted(ctx.room_notes.get(group.key, ()))
    if group.template is not None and group.template.source:  # spillway.model.nodecache
        notes.append(f"a node's shape {group.template.source}")
    elif group.template is not None and group.template.forgotten:  # a new launch template version
        notes.append(group.template.forgotten)
    skipped = sorted(ctx.overflow_notes.get(group.key, ()))
    if skipped:
        notes.append("skipped: " + "; ".join(skipped))
    return notes
