"""Raises under way: what recent plans asked of each group that the snapshot may not show yet.

A scale-up raises its group by its own count relative to the live desired capacity (so it composes with
gangs and other executions growing the same group: :mod:`spillway.act.claims`). The price is that two
plans of two snapshots both taken before the first raise landed would each add the same pods' nodes.
The state remembers each raise (``State.raises``: the desired capacity planned and when); a later plan
whose snapshot shows the group below it, within ``scale_up_claim_minutes`` and with the group not
backed off, takes the planned value as the group's desired capacity: the difference is capacity still
launching, which its pods fit on, so nothing is added twice. An entry ends when a snapshot shows the
raise (the desired capacity at or above it), when the window passes or when the group backs off, or
when a scheduled action that sets the group's DesiredCapacity or MaxSize ran since the raise: Auto
Scaling set the group's size then, over the raise, so the snapshot's desired capacity is what holds and
the nodes the raise asked for beyond it are not coming. A one-time action is no longer listed once it
ran; the scaling activities of the instances its run scaled in still name it.

A group carried from an earlier read (its region's read failed: :mod:`spillway.planner.unread`) can
show no raise made after that read: the window is judged at the read (``NodeGroup.read_at``), so such a
raise counts for as long as the group is carried (at most ``max_node_provision_minutes``), and its
pods are not launched for again in another region. Not a raise the scale-up kept unsettled (its answer
lost, AWS may never have applied it) and claimed no instance for (``RaiseState.unsettled``, read from the
ledger at load): its window is judged at ``now``, as a read group's, so its pods are planned again after
``scale_up_claim_minutes`` rather than held on a raise that may not exist; unless a Node registered since
the raise, Ready or not, may be the group's launch (in no group, of its region, a zone and a type it
launches: :func:`spillway.planner.context.launched_since_read`): the raise landed, and counts as a settled
one does. cluster-autoscaler counts a scale-up as upcoming until ``max-node-provision-time`` and a Node
registered but not started among a group's upcoming nodes (clusterstate ``GetUpcomingNodes``); without
that Node, a raise whose Node has not registered within the window is launched for again elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from spillway.model.cluster import NodeInfo
from spillway.model.nodegroup import SCHEDULED_ACTIONS, NodeGroup
from spillway.model.schedule import ceiling_of, size_refusal
from spillway.model.state import RaiseState, State
from spillway.planner.context import aware, launched_since_read
from spillway.planner.types import ScaleUp


def _live(
    entry: RaiseState, group: NodeGroup | None, state: State, now: datetime, minutes: float, landed: bool
) -> bool:
    if group is None or group.desired >= entry.to:
        return False  # gone, or the snapshot shows the raise
    # carried: as its last read saw it, unless the raise is unsettled and no Node says it landed (it may
    # never have applied: judged as a read group's, whose snapshot would show it by the window's end)
    seen = aware(group.read_at) if group.read_at is not None and (landed or not entry.unsettled) else now
    if seen - aware(entry.since) >= timedelta(minutes=minutes):
        return False
    if _resized_since(group, aware(entry.since), now, entry.to):
        return False
    backoff = state.groups.get(group.key.stored)
    return backoff is None or aware(backoff.backoff_until) <= now


def _resized_since(group: NodeGroup, since: datetime, now: datetime, to: int) -> bool:
    """A scheduled action that sets the group's DesiredCapacity or MaxSize below the raise's ``to``
    ran after ``since`` and by ``now`` (while the group's ScheduledActions process runs). One that
    sets them at or above it leaves the raise standing: a MaxSize above the desired capacity changes
    nothing, and a DesiredCapacity at or above ``to`` takes the raise's nodes in; nor does one Auto
    Scaling refuses, a size outside the limits in force (:func:`~spillway.model.schedule.size_refusal`):
    its run changes no size. A one-time action is
    gone from DescribeScheduledActions once it ran, so the actions listed show only recurring runs
    (and one-time ones a snapshot read before their run still lists); any action's run that lowered
    the desired capacity is also in the Causes of the activities it started
    (:attr:`NodeGroup.scheduled_cuts`), read for a cut after ``since`` below ``to``."""
    if now <= since:
        return False
    if any(since < aware(at) <= now and size < to for at, size in group.scheduled_cuts):
        return True
    if not group.scheduled or group.suspension(SCHEDULED_ACTIONS) is not None:
        return False
    for action in group.scheduled:
        size = ceiling_of(action)
        if size is None or size[0] >= to or size_refusal(action, group.max_size, group.min_size):
            continue
        try:
            if action.next_fire(since, now - since) is not None:
                return True
        except ValueError:  # a cron or zone that cannot be read (named in the group's problems)
            continue
    return False


def _registered_since(
    entry: RaiseState, group: NodeGroup, nodes: Sequence[NodeInfo], listed: set[str]
) -> bool:
    """Whether a Node in no group (no instance ``listed``), registered after ``entry``'s raise, Ready or
    not, may be a launch of ``group`` (carried) its read did not see: the raise landed."""
    since = aware(entry.since)
    return any(
        info.created_at is not None
        and aware(info.created_at) > since
        and (info.instance_id or "") not in listed
        and launched_since_read(group, info)
        for info in nodes
    )


def pending_raises(
    groups: Sequence[NodeGroup],
    state: State,
    now: datetime,
    minutes: float,
    nodes: Sequence[NodeInfo] = (),
    every_group: Sequence[NodeGroup] = (),
) -> dict[str, RaiseState]:
    """The raises still under way and not yet in the snapshot, by group (:attr:`GroupKey.stored`).
    ``nodes``: the snapshot's, read for a Node that says a carried group's unsettled raise landed;
    ``every_group``: every group, refused ones too, whose instances (warm pools' too) such a Node is not
    (``groups`` when not given)."""
    by_key = {g.key.stored: g for g in groups}
    listed = {iid for g in every_group or groups for iid in (*g.instance_ids, *g.pooled_instances)}
    out: dict[str, RaiseState] = {}
    for key, entry in sorted(state.raises.items()):
        group = by_key.get(key)
        landed = (
            entry.unsettled
            and group is not None
            and group.read_at is not None
            and _registered_since(entry, group, nodes, listed)
        )
        if _live(entry, group, state, now, minutes, landed):
            out[key] = entry
    return out


def with_raises(groups: Sequence[NodeGroup], raises: Mapping[str, RaiseState]) -> list[NodeGroup]:
    """The groups with the desired capacity recent plans raised them to (never above MaxSize)."""
    out = []
    for g in groups:
        entry = raises.get(g.key.stored)
        out.append(replace(g, desired=min(entry.to, g.max_size)) if entry else g)
    return out


def next_raises(
    still: Mapping[str, RaiseState], scale_up: Iterable[ScaleUp], now: datetime
) -> dict[str, RaiseState]:
    """The state's raises after this plan: the ones still under way, and this plan's own."""
    out = dict(still)
    for s in scale_up:
        out[s.key.stored] = RaiseState(to=s.to_size, since=now, group=s.group, region=s.region)
    return dict(sorted(out.items()))
