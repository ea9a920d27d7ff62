"""Scale-up: each pod class goes through the placement stages in order, then to new nodes.

1. free room on Ready, schedulable nodes (the scheduler will get there; nothing to launch);
2. capacity already launching (desired minus Ready nodes, per group), as empty template nodes;
3. nodes Spillway itself cordoned, which are uncordoned instead of launching;
4. new nodes: first fit into nodes this plan already opens, then more nodes of the groups the expander
   ranks first. A group never passes MaxSize, a backed-off group is skipped, and what does not fit
   goes on to the next group — which is how demand spills into the secondary region.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from spillway.model.nodegroup import NodeGroup
from spillway.model.resources import PODS, Resources, describe, fit_count
from spillway.planner import codes
from spillway.planner.classes import PodClass
from spillway.planner.context import Context, WorkNode
from spillway.planner.expander import Expander, options
from spillway.planner.groups import backoff_reason, empty_room
from spillway.planner.limits import Limits
from spillway.planner.placement import (
    UNBOUNDED,
    Bin,
    Pool,
    fill_bins,
    launching_bins,
    place_on_launching,
    place_on_nodes,
    pools,
    reclaimable_pools,
    schedulable_pools,
)
from spillway.planner.types import GangLaunch, PendingPod, Placement, ScaleUp

REGION_LABEL = "topology.kubernetes.io/region"


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
        self.schedulable: list[Pool] = schedulable_pools(ctx)
        self.reclaimable: list[Pool] = reclaimable_pools(ctx)
        self.empty: dict[str, Resources] = empty_room(ctx)
        self.launching: dict[str, list[Bin]] = launching_bins(ctx, self.empty)
        # new nodes per (group, gang): a gang's new nodes are its own, launched together
        self.new_bins: dict[tuple[str, str | None], list[Bin]] = {(g.name, None): [] for g in ctx.groups}
        self.room: dict[str, int] = {g.name: max(0, g.max_size - g.desired) for g in ctx.groups}
        self.backoff: dict[str, str | None] = {g.name: backoff_reason(ctx, g) for g in ctx.groups}
        self.limits = Limits(ctx)
        self.region: str | None = None  # while a gang is placed: the one region it may use

    def run(self, classes: Sequence[PodClass]) -> list[ScaleUp]:
        gangs: dict[str, list[PodClass]] = {}
        for cls in classes:
            if cls.gang is not None:
                gangs.setdefault(cls.gang, []).append(cls)
        for cls in classes:
            if cls.gang is None:
                self.place(cls)
            elif cls is gangs[cls.gang][0]:
                GangPlacement(self, cls.gang, gangs[cls.gang]).run()
        return scale_up_actions(self.ctx)

    def place(self, cls: PodClass) -> tuple[str, str] | None:
        """Place the class; returns (code, reason) when pods remain, after recording them pending
        (unless a gang is being placed: the gang reports for all its pods)."""
        place_on_nodes(self.ctx, cls, self._in_region(self.schedulable))
        if not cls.remaining:
            return None
        choices, rejected = options(self.ctx, cls, self.empty)
        choices = [c for c in choices if self.region is None or c.group.region == self.region]
        candidates = self.expander.order(self.ctx, cls, choices)
        place_on_launching(self.ctx, cls, candidates, self.backoff, self.launching)
        if not cls.remaining:
            return None
        place_on_nodes(self.ctx, cls, self._in_region(self.reclaimable), uncordon=True)
        if not cls.remaining:
            return None
        skipped = self._new_nodes(cls, candidates)
        if not cls.remaining:
            return None
        verdict = why_unplaceable(cls, candidates, rejected, skipped)
        if cls.gang is None:
            for pod in cls.take(cls.remaining):
                self.ctx.pending_out.append(PendingPod(pod, verdict[1], verdict[0]))
        return verdict

    def _in_region(self, pool_list: list[Pool]) -> list[Pool]:
        if self.region is None:
            return pool_list
        return pools(n for pool in pool_list for n in pool.nodes if node_region(n) == self.region)

    def _new_nodes(self, cls: PodClass, candidates: Sequence[NodeGroup]) -> list[Skip]:
        """First fit into nodes this plan opens already, then open more, best group first."""
        for group in candidates:
            if cls.remaining and self.new_bins.get((group.name, cls.gang)):
                self._fill_new(cls, group)
        skipped: list[Skip] = []
        for group in candidates:
            if not cls.remaining:
                break
            skip = self._why_skip(group)
            if skip is None:
                skip = self._open(cls, group)
                if skipped:
                    self.ctx.overflow_notes.setdefault(group.name, set()).update(s.reason for s in skipped)
            if skip is not None and cls.remaining:
                skipped.append(skip)
        return skipped

    def _why_skip(self, group: NodeGroup) -> Skip | None:
        backoff = self.backoff[group.name]
        if backoff:
            return Skip(codes.BACKED_OFF, backoff)
        if self.room[group.name] <= 0:
            return _at_max_size(group)
        return None

    def _open(self, cls: PodClass, group: NodeGroup) -> Skip | None:
        """Open as many new nodes of ``group`` as the class needs and MaxSize and the limits allow,
        fill them, and say why it stopped short (if it did)."""
        ctx, name = self.ctx, group.name
        per_node = fit_count(cls.requests, self.empty[name], UNBOUNDED)
        need = math.ceil(cls.remaining / per_node)
        opening, binding = self.limits.allowed(cls.tenant, group, min(self.room[name], need))
        if opening > 0:
            self.room[name] -= opening
            opened = ctx.new_nodes.get(name, 0)
            ctx.new_nodes[name] = opened + opening
            if cls.gang is not None:
                ctx.gang_nodes[(name, cls.gang)] = ctx.gang_nodes.get((name, cls.gang), 0) + opening
            ids = [f"{name}/new-{opened + i + 1}" for i in range(opening)]
            self.new_bins.setdefault((name, cls.gang), []).append(Bin(dict(self.empty[name]), ids))
            self.limits.charge(cls.tenant, group, opening)
            self._fill_new(cls, group)
        if binding is not None:
            return Skip(binding.code, self.limits.reason(binding, group))
        return _at_max_size(group) if self.room[name] <= 0 else None

    def _fill_new(self, cls: PodClass, group: NodeGroup) -> None:
        bins = self.new_bins[(group.name, cls.gang)]
        for node_id, count in fill_bins(cls.requests, bins, cls.remaining):
            pods = cls.take(count)
            self.ctx.placements.extend(Placement(pod, node_id, group.name) for pod in pods)
            self.ctx.new_pods.setdefault(group.name, []).extend(pods)
            if cls.gang is not None:
                self.ctx.gang_pods.setdefault((group.name, cls.gang), []).extend(pods)


def node_region(node: WorkNode) -> str | None:
    return node.group.region if node.group else node.info.labels.get(REGION_LABEL)


class GangPlacement:
    """A gang's classes placed all or none, in one region: each region in preference order is tried
    on a checkpoint of the stage, and rolled back when any pod of the gang is left over."""

    def __init__(self, stage: ScaleUpStage, gang: str, classes: list[PodClass]) -> None:
        self.stage = stage
        self.gang = gang
        self.classes = classes

    def regions(self) -> list[str | None]:
        ctx = self.stage.ctx
        found = {g.region for g in ctx.groups} | {node_region(n) for n in ctx.nodes.values()}
        named = sorted(
            (r for r in found if r), key=lambda r: (ctx.region_rank.get(r, len(ctx.region_rank)), r)
        )
        return list(named) or [None]

    def run(self) -> None:
        first: tuple[str, str] | None = None
        for region in self.regions():
            saved = self._save()
            self.stage.region = region
            failure = self._try()
            self.stage.region = None
            if failure is None:
                return
            self._restore(saved)
            first = first or (failure[0], f"in {region}: {failure[1]}" if region else failure[1])
        assert first is not None
        size = sum(len(c.pods) for c in self.classes)
        reason = f"gang {self.gang} ({size} pods) cannot be placed whole, so nothing is added; {first[1]}"
        for cls in self.classes:
            for pod in cls.take(cls.remaining):
                self.stage.ctx.pending_out.append(PendingPod(pod, reason, first[0]))

    def _try(self) -> tuple[str, str] | None:
        for cls in self.classes:
            failure = self.stage.place(cls)
            if failure is not None:
                return failure
        return None

    def _save(self) -> dict[str, object]:
        stage, ctx = self.stage, self.stage.ctx
        return {
            "nodes": {name: (dict(n.free), n.receives) for name, n in ctx.nodes.items()},
            "launching": _copy_bins(stage.launching),
            "new_bins": _copy_bins(stage.new_bins),
            "room": dict(stage.room),
            "limits": stage.limits.save(),
            "new_nodes": dict(ctx.new_nodes),
            "new_pods": {k: list(v) for k, v in ctx.new_pods.items()},
            "gang_nodes": dict(ctx.gang_nodes),
            "gang_pods": {k: list(v) for k, v in ctx.gang_pods.items()},
            "notes": {k: set(v) for k, v in ctx.overflow_notes.items()},
            "uncordoned": dict(ctx.uncordoned),
            "lengths": (len(ctx.placements), len(ctx.pending_out)),
            "next": [c.next for c in self.classes],
        }

    def _restore(self, saved: dict[str, Any]) -> None:
        stage, ctx = self.stage, self.stage.ctx
        for name, (free, receives) in saved["nodes"].items():
            ctx.nodes[name].free, ctx.nodes[name].receives = free, receives
        stage.launching, stage.new_bins, stage.room = saved["launching"], saved["new_bins"], saved["room"]
        stage.limits.restore(saved["limits"])
        ctx.new_nodes, ctx.new_pods = saved["new_nodes"], saved["new_pods"]
        ctx.gang_nodes, ctx.gang_pods = saved["gang_nodes"], saved["gang_pods"]
        ctx.overflow_notes, ctx.uncordoned = saved["notes"], saved["uncordoned"]
        placements, pending = saved["lengths"]
        del ctx.placements[placements:]
        del ctx.pending_out[pending:]
        for cls, index in zip(self.classes, saved["next"], strict=True):
            cls.next = index


K = TypeVar("K")


def _copy_bins(bins: Mapping[K, list[Bin]]) -> dict[K, list[Bin]]:
    return {k: [Bin(dict(b.free), list(b.ids)) for b in v] for k, v in bins.items()}


def _at_max_size(group: NodeGroup) -> Skip:
    return Skip(codes.MAX_SIZE, f"{group.name} at MaxSize {group.max_size}")


def why_unplaceable(
    cls: PodClass,
    candidates: Sequence[NodeGroup],
    rejected: dict[str, str],
    skipped: list[Skip],
) -> tuple[str, str]:
    """Why nothing can run the rest of the class now: (code, reason)."""
    needs = describe(cls.requests, [r for r in sorted(cls.requests) if r != PODS])
    if not candidates:
        why = "; ".join(rejected[name] for name in sorted(rejected))
        code = codes.NO_GROUP_FITS if rejected else codes.NO_MANAGED_GROUPS
        return code, f"no node group can ever run this pod ({needs}): {why or 'no managed node groups'}"
    kinds = {s.code for s in skipped}
    code = kinds.pop() if len(kinds) == 1 else codes.GROUPS_EXHAUSTED
    return code, f"every node group that fits is exhausted ({needs}): {'; '.join(s.reason for s in skipped)}"


def scale_up_actions(ctx: Context) -> list[ScaleUp]:
    """One action per group that gets new nodes, preferred region first."""
    actions: list[ScaleUp] = []
    for group in sorted(ctx.groups, key=lambda g: (ctx.region_key(g), g.name)):
        count = ctx.new_nodes.get(group.name, 0)
        if count <= 0:
            continue
        pods = sorted(ctx.new_pods.get(group.name, []))
        actions.append(
            ScaleUp(
                group=group.name,
                region=group.region,
                from_size=group.desired,
                to_size=group.desired + count,
                pods=tuple(pods),
                reason=_scale_up_reason(ctx, group, count, len(pods)),
                gangs=tuple(
                    GangLaunch(
                        gang,
                        nodes,
                        tuple(sorted(ctx.gang_pods.get((g, gang), ()))),
                        dict(ctx.gang_labels.get(gang, {})),
                    )
                    for (g, gang), nodes in sorted(ctx.gang_nodes.items())
                    if g == group.name and nodes > 0
                ),
            )
        )
    return actions


def _scale_up_reason(ctx: Context, group: NodeGroup, count: int, pods: int) -> str:
    noun = "node" if count == 1 else "nodes"
    reason = f"{pods} pending pod(s) need {count} new {group.instance_type} {noun} in {group.region}"
    if ctx.primary and group.region != ctx.primary:
        reason += f" (overflow from primary region {ctx.primary})"
    notes = sorted(ctx.overflow_notes.get(group.name, ()))
    if notes:
        reason += "; skipped: " + "; ".join(notes)
    return reason
