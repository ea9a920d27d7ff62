"""Stage 0: launches that never became nodes — cluster-autoscaler's ``--max-node-provision-time``.

The planner counts a group's capacity still launching as its desired capacity less its Ready nodes, and
plans pending pods onto it rather than launching again. An instance that never joins the cluster (a
broken AMI or bootstrap script, a GPU driver that does not load, a node role the cluster does not map)
would stay "launching" for ever: its pods would wait on it, nothing else would be launched for them, and
the instance would be paid for. So each instance of a managed group that no Node names
(``spec.providerID``) is remembered from the first plan that sees it (``State.joining``); once it has
been missing for ``max_node_provision_minutes`` (15, as cluster-autoscaler's flag and Karpenter's
registration timeout):

* it is no longer capacity coming: pending pods are planned elsewhere;
* its group backs off for ``launch_failure_backoff_minutes``, as after a failed launch (launching again
  would most likely fail the same way), so the pods go to another group or region;
* the plan removes it (``unregistered``: TerminateInstanceInAutoScalingGroup, decrementing the desired
  capacity; at the group's MinSize, which AWS will not decrement below, without: the group then
  launches a replacement, as after a failed health check). The removal step checks first that no Node
  runs on the instance by now. Not an InService one while the group's Terminate process is suspended
  (Auto Scaling would not terminate it: :meth:`NodeGroup.terminate_held`, the rule the removal step
  follows): it is only no longer capacity coming, and the back-off's reason says so. One still Pending
  (a launch lifecycle hook holds it in Pending:Wait) is removed all the same, as AWS terminates it.
  Nor while the group is carried from an earlier read (its region's read failed:
  :mod:`spillway.planner.unread`): it is only no longer capacity coming, and nothing backs off on a
  picture that old.

An instance in a warm pool is remembered too, with the time of the last plan that saw it there. One
drawn into service may have a Node from its warm-up (a bootstrap that does not check its lifecycle
state registers it before the instance stops), NotReady since then, which its kubelet brings back once
the instance starts: that Node is judged as registered when the plan last saw the instance in its pool
(:func:`drawn_from_pools`), so it is capacity launching, as a new instance's Node is, and neither an
unready node nor a dead one. Judged by its old creation time it was no longer capacity coming, and the
plan launched another node for the pods the drawn instance was raised for.

A Node that registered but is not Ready counts as launching while it is younger than
``max_node_startup_minutes`` (cluster-autoscaler's ``--max-node-startup-time``, 15: a kubelet takes a
moment to become Ready); after that it is no longer capacity coming either (cluster-autoscaler's
"unready" nodes). Being a Node, it is scale-down's: idle for ``scale_down_unready_minutes`` while
NotReady, it is drained (:mod:`spillway.planner.scaledown`).

Pure: what was seen when comes from the state, ``now`` from the caller.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from spillway.config import PlannerConfig
from spillway.model.cluster import NodeInfo
from spillway.model.groupkey import GroupKey
from spillway.model.nodegroup import NodeGroup
from spillway.model.state import GroupState, Since, State
from spillway.planner.context import aware, iso, minutes
from spillway.planner.startup import EPHEMERAL_TAINTS
from spillway.planner.types import Unregistered


@dataclass(slots=True)
class Joins:
    """What the plan makes of the managed groups' instances that are not Ready nodes."""

    joining: dict[str, Since] = field(default_factory=dict)  # next state: unregistered, since when
    stale: dict[GroupKey, int] = field(
        default_factory=dict
    )  # group -> instances not capacity coming, not removed
    removed: dict[GroupKey, int] = field(
        default_factory=dict
    )  # group -> instances removed, desired decremented
    backoffs: dict[GroupKey, GroupState] = field(default_factory=dict)  # group -> its new back-off
    unregistered: list[Unregistered] = field(default_factory=list)  # overdue instances, all removed

    def backed_off(self, state: State) -> State:
        """``state`` with this plan's back-offs (an existing longer one stays)."""
        if not self.backoffs:
            return state
        groups = dict(state.groups)
        for key, entry in self.backoffs.items():
            current = groups.get(key.stored)
            if current is None or aware(current.backoff_until) < entry.backoff_until:
                groups[key.stored] = entry
        return state.model_copy(update={"groups": dict(sorted(groups.items()))})

    @property
    def overdue(self) -> list[str]:
        """The instances no Node joined for within ``max_node_provision_minutes``."""
        return [u.instance_id for u in self.unregistered]

    def shrunk(self, groups: Sequence[NodeGroup]) -> list[NodeGroup]:
        """``groups`` as they are once this plan's removals are done: the desired capacity each
        decrement takes off, and without the instances removed with it (a live instance above the
        desired capacity is capacity launching, :attr:`NodeGroup.expected_size`, which a removed one is
        not)."""
        gone = {u.instance_id for u in self.unregistered if u.decrement}
        return [
            replace(
                g,
                desired=g.desired - self.removed[g.key],
                instance_ids=tuple(i for i in g.instance_ids if i not in gone),
            )
            if g.key in self.removed
            else g
            for g in groups
        ]


def warm_without_nodes(groups: Sequence[NodeGroup], nodes: Iterable[NodeInfo]) -> list[NodeGroup]:
    """``groups`` with their warm instances less those whose Node is Ready (:attr:`NodeGroup.warm_ids`)
    while they run in the pool (:meth:`NodeGroup.pooled_runs`). Such an instance (a Running pool whose
    bootstrap started kubelet at warm-up) is a node of the cluster already: its room is free room, its
    pods run there. A scale-out that draws it adds no room, so it is no warm new node for the expander,
    which otherwise sent a class to its group for nodes the pool did not hold (the pods waited a plan for
    the draw, then for a cold launch). One stopped in the pool whose Node is not NotReady yet holds no
    room (:attr:`~spillway.planner.context.WorkNode.pool_stopping`): drawn, it is a new node."""
    ready = {n.instance_id for n in nodes if n.ready and n.instance_id}
    out = []
    for group in groups:
        taken = sum(1 for iid in group.warm_ids if iid in ready and group.pooled_runs(iid))
        out.append(replace(group, warm_instances=max(0, group.warm_instances - taken)) if taken else group)
    return out


def drawn_from_pools(nodes: Sequence[NodeInfo], groups: Sequence[NodeGroup], state: State) -> list[NodeInfo]:
    """``nodes`` as the plan judges them: a Node of an instance of ``groups`` still coming back
    (:func:`_coming_back`) registered before the last plan that saw the instance not yet a node of its
    group (in its warm pool: its Node is from the warm-up) registers at that time (creation, and a
    NotReady one's Ready condition), as the instance's new life in the group began then."""
    instances = {iid for g in groups for iid in g.instance_ids}
    out = []
    for node in nodes:
        seen = state.joining.get(node.instance_id or "") if _coming_back(node) else None
        if seen is not None and node.instance_id in instances and node.created_at is not None:
            since = aware(seen.since)
            if since > aware(node.created_at):
                changed = node.ready_changed_at if node.ready else since
                node = replace(node, created_at=since, ready_changed_at=changed)
        out.append(node)
    return out


def _coming_back(node: NodeInfo) -> bool:
    """NotReady, or Ready and still carrying a taint the control plane lifts once the node is set up
    (:data:`~spillway.planner.startup.EPHEMERAL_TAINTS`): the node lifecycle controller put
    ``node.kubernetes.io/unreachable`` on a warm instance's Node when its kubelet stopped with the
    instance, and lifts it a moment after the kubelet reports Ready again. Such a node is starting
    (:mod:`spillway.planner.startup`) for ``max_node_startup_minutes`` from the draw."""
    return not node.ready or any(key in EPHEMERAL_TAINTS for key, _, _ in node.taints)


def watch_joins(
    nodes: Iterable[NodeInfo], groups: Sequence[NodeGroup], config: PlannerConfig, state: State, now: datetime
) -> Joins:
    """Judge every instance of ``groups`` that is not a Ready node (see the module docstring)."""
    startup = timedelta(minutes=config.max_node_startup_minutes)
    registered = {n.instance_id: n for n in nodes if n.instance_id}
    out = Joins()
    for group in sorted(groups, key=lambda g: g.key):
        for iid in group.pooled_instances:  # last seen in the warm pool now (drawn_from_pools)
            out.joining[iid] = Since(since=now)
        limit = timedelta(minutes=config.with_options(group.options).max_node_provision_minutes)
        removable = group.desired - group.min_size
        for iid in group.instance_ids:
            node = registered.get(iid)
            if node is not None:
                _registered(out, group.key, node, state, now - startup)
                continue
            previous = state.joining.get(iid)
            since = aware(previous.since) if previous is not None else now
            out.joining[iid] = Since(since=since)
            if now - since < limit:
                continue
            if group.unread:  # carried from an earlier read: no capacity coming, nothing asked of AWS
                out.stale[group.key] = out.stale.get(group.key, 0) + 1
                continue
            kept = group.terminate_held(iid)  # Auto Scaling would not terminate it: left, not counted
            decrement = removable > 0 and kept is None
            removable -= decrement
            counts = out.removed if decrement else out.stale  # a replacement shows in a later snapshot
            counts[group.key] = counts.get(group.key, 0) + 1
            if kept is None:
                out.unregistered.append(_overdue(group, iid, now - since, decrement))
            out.backoffs[group.key] = GroupState(
                group=group.name,
                region=group.region,
                backoff_until=now + timedelta(minutes=config.launch_failure_backoff_minutes),
                reason=f"instance {iid} did not join the cluster within {minutes(limit)} "
                f"(max_node_provision_minutes) since {iso(since)}"
                + (f"; not removed: {kept}" if kept is not None else ""),
            )
    return out


def _registered(out: Joins, group: GroupKey, node: NodeInfo, state: State, started_by: datetime) -> None:
    """A Node of an instance of ``group``: judged when NotReady (:func:`_not_ready`); a drawn instance's
    memory kept while its Node is Ready with a taint of its start still on (:func:`_coming_back`)."""
    iid = node.instance_id or ""
    if not node.ready:
        _not_ready(out, group, node, state, started_by)
    elif iid in state.joining and _coming_back(node):
        out.joining[iid] = state.joining[iid]


def _not_ready(out: Joins, group: GroupKey, node: NodeInfo, state: State, started_by: datetime) -> None:
    """A NotReady Node of an instance of ``group``: no longer capacity coming once registered before
    ``started_by``; the instance's memory kept while it registers (:func:`drawn_from_pools`)."""
    iid = node.instance_id or ""
    if iid in state.joining:
        out.joining[iid] = state.joining[iid]
    if node.created_at is not None and aware(node.created_at) <= started_by:
        out.stale[group] = out.stale.get(group, 0) + 1


def _overdue(group: NodeGroup, iid: str, missing: timedelta, decrement: bool) -> Unregistered:
    what = (
        "terminate it, decrementing the desired capacity"
        if decrement
        else f"terminate it; group {group.name} is at its MinSize {group.min_size}, so it launches a replacement"
    )
    reason = (
        f"no Node has joined for instance {iid} of {group.name} ({group.region}) in {minutes(missing)} "
        f"(max_node_provision_minutes): not counted as capacity coming; the group backs off; {what}"
    )
    return Unregistered(iid, group.name, group.region, decrement, reason)
