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
from collections.abc import Sequence
from dataclasses import dataclass

from spillway.model.nodegroup import NodeGroup
from spillway.model.resources import PODS, Resources, describe, fit_count
from spillway.planner import codes
from spillway.planner.classes import PodClass
from spillway.planner.context import Context
from spillway.planner.expander import Expander, options
from spillway.planner.groups import backoff_reason, empty_room
from spillway.planner.placement import (
    UNBOUNDED,
    Bin,
    Pool,
    fill_bins,
    launching_bins,
    place_on_launching,
    place_on_nodes,
    reclaimable_pools,
    schedulable_pools,
)
from spillway.planner.types import PendingPod, Placement, ScaleUp


@dataclass(frozen=True, slots=True)
class Skip:
    """A group that fits a class but gives it no (more) nodes, and why."""

    code: str  # codes.BACKED_OFF or codes.MAX_SIZE
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
        self.new_bins: dict[str, list[Bin]] = {g.name: [] for g in ctx.groups}
        self.room: dict[str, int] = {g.name: max(0, g.max_size - g.desired) for g in ctx.groups}
        self.backoff: dict[str, str | None] = {g.name: backoff_reason(ctx, g) for g in ctx.groups}

    def run(self, classes: Sequence[PodClass]) -> list[ScaleUp]:
        for cls in classes:
            self.place(cls)
        return scale_up_actions(self.ctx)

    def place(self, cls: PodClass) -> None:
        place_on_nodes(self.ctx, cls, self.schedulable)
        if not cls.remaining:
            return
        choices, rejected = options(self.ctx, cls, self.empty)
        candidates = self.expander.order(self.ctx, cls, choices)
        place_on_launching(self.ctx, cls, candidates, self.backoff, self.launching)
        if not cls.remaining:
            return
        place_on_nodes(self.ctx, cls, self.reclaimable, uncordon=True)
        if not cls.remaining:
            return
        skipped = self._new_nodes(cls, candidates)
        if cls.remaining:
            unplaceable(self.ctx, cls, candidates, rejected, skipped)

    def _new_nodes(self, cls: PodClass, candidates: Sequence[NodeGroup]) -> list[Skip]:
        """First fit into nodes this plan opens already, then open more, best group first."""
        for group in candidates:
            if cls.remaining and self.new_bins[group.name]:
                self._fill_new(cls, group)
        skipped: list[Skip] = []
        for group in candidates:
            if not cls.remaining:
                break
            skip = self._why_skip(group)
            if skip is not None:
                skipped.append(skip)
                continue
            self._open(cls, group)
            if skipped:
                self.ctx.overflow_notes.setdefault(group.name, set()).update(s.reason for s in skipped)
            if cls.remaining and self.room[group.name] <= 0:
                skipped.append(_at_max_size(group))
        return skipped

    def _why_skip(self, group: NodeGroup) -> Skip | None:
        backoff = self.backoff[group.name]
        if backoff:
            return Skip(codes.BACKED_OFF, backoff)
        if self.room[group.name] <= 0:
            return _at_max_size(group)
        return None

    def _open(self, cls: PodClass, group: NodeGroup) -> None:
        """Open as many new nodes of ``group`` as the class needs and MaxSize allows, and fill them."""
        ctx, name = self.ctx, group.name
        per_node = fit_count(cls.requests, self.empty[name], UNBOUNDED)
        opening = min(self.room[name], math.ceil(cls.remaining / per_node))
        self.room[name] -= opening
        opened = ctx.new_nodes.get(name, 0)
        ctx.new_nodes[name] = opened + opening
        ids = [f"{name}/new-{opened + i + 1}" for i in range(opening)]
        self.new_bins[name].append(Bin(dict(self.empty[name]), ids))
        self._fill_new(cls, group)

    def _fill_new(self, cls: PodClass, group: NodeGroup) -> None:
        for node_id, count in fill_bins(cls.requests, self.new_bins[group.name], cls.remaining):
            pods = cls.take(count)
            self.ctx.placements.extend(Placement(pod, node_id, group.name) for pod in pods)
            self.ctx.new_pods.setdefault(group.name, []).extend(pods)


def _at_max_size(group: NodeGroup) -> Skip:
    return Skip(codes.MAX_SIZE, f"{group.name} at MaxSize {group.max_size}")


def unplaceable(
    ctx: Context,
    cls: PodClass,
    candidates: Sequence[NodeGroup],
    rejected: dict[str, str],
    skipped: list[Skip],
) -> None:
    """The pods of the class nothing can run now, with why."""
    needs = describe(cls.requests, [r for r in sorted(cls.requests) if r != PODS])
    if not candidates:
        why = "; ".join(rejected[name] for name in sorted(rejected))
        code = codes.NO_GROUP_FITS if rejected else codes.NO_MANAGED_GROUPS
        reason = f"no node group can ever run this pod ({needs}): {why or 'no managed node groups'}"
    else:
        kinds = {s.code for s in skipped}
        code = kinds.pop() if len(kinds) == 1 else codes.GROUPS_EXHAUSTED
        reason = f"every node group that fits is exhausted ({needs}): {'; '.join(s.reason for s in skipped)}"
    for pod in cls.take(cls.remaining):
        ctx.pending_out.append(PendingPod(pod, reason, code))


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
