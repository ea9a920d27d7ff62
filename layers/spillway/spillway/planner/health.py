"""Stage 0b: is the cluster, and is each group, healthy enough to act on? (cluster-autoscaler's
``--max-total-unready-percentage`` and ``--ok-total-unready-count``).

When many nodes are unready at once, the cause is rarely the nodes: a network partition between the
kubelets and the API server, a CNI or DNS outage, an expired node credential, a broken AMI rolled out to
a whole group. The snapshot is then a poor picture of the cluster, and the rule that drains idle
unready nodes (:mod:`spillway.planner.scaledown`'s ``scale_down_unready_minutes``) would delete
capacity whose pods may come back the moment the fault is mended. So, as cluster-autoscaler does:

* **unready** counts the registered nodes that are not Ready, except those still registering (never
  Ready yet, and younger than ``max_node_startup_minutes``), the Ready nodes that never initialized
  within that time (:mod:`spillway.planner.startup`), and the instances no Node joined for that long;
  a Ready node of no managed group with the GPU label and no GPUs (:func:`spillway.planner.limits.
  gpus_unknown`) counts past that time too, as cluster-autoscaler takes any such node as unready
  (``FilterOutNodesWithUnreadyResources``) and its cluster state counts it once it is older than
  ``--max-node-startup-time``; nodes Spillway is draining are not counted (they are going anyway), nor
  are the Nodes of instances in a group's warm pool (:attr:`NodeGroup.pooled_instances`: one whose
  bootstrap registered it at warm-up stays NotReady while it sits stopped there, outside the group's
  capacity by design);
* the **cluster** is unhealthy when its unready count is above ``ok_total_unready_count`` (3) **and**
  above ``max_total_unready_percentage`` (45 %) of its nodes. Then the plan drains no node: no drain of
  any kind (idle, unready, consolidation, make room), and idle times start again (cluster-autoscaler
  forgets its unneeded nodes too), so nothing is drained in a burst the moment the cluster is healthy
  again. Instances that never joined are still removed, as cluster-autoscaler removes them before it
  judges health: no pod can come back to an instance that never was a node, and a rollout whose
  instances never join must not leave them running and billed because it made the cluster unhealthy;
  the gang sweep (:mod:`spillway.planner.gangsweep`) goes on too, but with the unready rule off as in
  scale-down: a pod that never started on a long NotReady Node keeps its orphan;
* a **group** is unhealthy by the same two thresholds over its own nodes and instances. It gets no new
  nodes (cluster-autoscaler's "node group not safe to scale up"): its pods go to another group or
  region, as from a group backed off (:func:`spillway.planner.groups.backoff_reason`).

One deliberate difference: cluster-autoscaler stops scaling up as well while the cluster is unhealthy.
Spillway keeps scaling up in healthy groups, so the region whose nodes are all unready spills its
pending pods over to the next one: that is what the overflow region is for.

Pure: counts from the snapshot and :class:`~spillway.planner.joins.Joins`, ``now`` from the caller.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from spillway.config import PlannerConfig
from spillway.model.cluster import NodeInfo
from spillway.model.groupkey import GroupKey
from spillway.model.nodegroup import NodeGroup
from spillway.planner.context import aware
from spillway.planner.limits import gpus_unknown
from spillway.planner.startup import starting, uninitialized
from spillway.planner.types import Unhealthy


@dataclass(frozen=True, slots=True)
class Count:
    unready: int = 0
    nodes: int = 0


@dataclass(slots=True)
class Health:
    """The plan's verdicts: the whole cluster, and each group found unhealthy."""

    cluster: Unhealthy | None = None
    groups: dict[GroupKey, Unhealthy] = field(default_factory=dict)

    def report(self) -> tuple[Unhealthy, ...]:
        head = (self.cluster,) if self.cluster is not None else ()
        return (*head, *(self.groups[name] for name in sorted(self.groups)))


def judge_health(
    nodes: Iterable[NodeInfo],
    groups: Sequence[NodeGroup],
    overdue: Iterable[str],
    config: PlannerConfig,
    now: datetime,
) -> Health:
    """Count unready nodes and overdue instances (``overdue``: instance ids no Node joined for within
    ``max_node_provision_minutes``, :attr:`spillway.planner.joins.Joins.overdue`), for the cluster and
    for each group, and judge each count against the thresholds."""
    window = timedelta(minutes=config.max_node_startup_minutes)
    by_instance = {iid: g for g in groups for iid in g.instance_ids}
    pooled = {iid for g in groups for iid in g.pooled_instances}
    # [unready, nodes], counted in place: a frozen Count made anew for every node cost more than the count
    total = [0, 0]
    per_group: dict[GroupKey, list[int]] = {}
    for node in nodes:
        if _left_out(node, pooled):
            continue
        group = by_instance.get(node.instance_id) if node.instance_id else None
        unready = int(_unready(node, group, config, window, now))
        total[0] += unready
        total[1] += 1
        if group is not None:
            count = per_group.setdefault(group.key, [0, 0])
            count[0] += unready
            count[1] += 1
    for iid in overdue:
        total[0] += 1
        key = by_instance[iid].key if iid in by_instance else None
        if key is not None:
            per_group.setdefault(key, [0, 0])[0] += 1
    health = Health(cluster=_verdict(None, Count(*total), config))
    for key, (unready_nodes, counted) in sorted(per_group.items()):
        verdict = _verdict(key, Count(unready_nodes, counted), config)
        if verdict is not None:
            health.groups[key] = verdict
    return health


def _left_out(node: NodeInfo, pooled: Collection[str]) -> bool:
    """Not counted at all: being drained (going anyway; cluster-autoscaler leaves out nodes being
    deleted), or the Node of an instance in a warm pool (``pooled``: outside its group's capacity,
    stopped there by design)."""
    return (node.unschedulable and node.cordoned_by_spillway) or node.instance_id in pooled


def _unready(
    node: NodeInfo, group: NodeGroup | None, config: PlannerConfig, window: timedelta, now: datetime
) -> bool:
    """NotReady and not still registering; or Ready, never initialized (:mod:`spillway.planner.startup`,
    or GPUs its label promises on a node of no managed group) and past the start window
    (cluster-autoscaler's "long not started")."""
    if not node.ready:
        return not _registering(node, window, now)
    if gpus_unknown(node, group) is not None:  # of no managed group: no template, the label says GPUs
        return node.created_at is None or now - aware(node.created_at) >= window
    return uninitialized(node, group, config) is not None and starting(node, group, config, now) is None


def out_of_service(node: NodeInfo, config: PlannerConfig, now: datetime) -> bool:
    """Disrupted already, as Karpenter's disruption budgets count it: being deleted, or NotReady (but
    still registering, which a launch is, not a disruption)."""
    if node.deleting:
        return True
    if node.ready:  # most nodes: no start window to make (asked three times a node a plan)
        return False
    return not _registering(node, timedelta(minutes=config.max_node_startup_minutes), now)


def registering(node: NodeInfo, config: PlannerConfig, now: datetime) -> bool:
    """NotReady and still registering (see :func:`_registering`): a launch not yet initialized."""
    window = timedelta(minutes=config.max_node_startup_minutes)
    return not node.ready and _registering(node, window, now)


def _registering(node: NodeInfo, window: timedelta, now: datetime) -> bool:
    """A NotReady node that has never been Ready (:meth:`NodeInfo.never_ready`) and is younger than
    ``max_node_startup_minutes`` is still registering. One that was Ready and is not any more, or whose
    creation time is unknown, counts as unready at once."""
    return node.never_ready() and node.created_at is not None and now - aware(node.created_at) < window


def _verdict(group: GroupKey | None, count: Count, config: PlannerConfig) -> Unhealthy | None:
    ok, percentage = config.ok_total_unready_count, config.max_total_unready_percentage
    if count.unready <= ok or count.unready <= percentage / 100 * count.nodes:
        return None
    what = "the cluster" if group is None else f"group {group.name}"
    effect = (
        "nothing is drained or removed until it recovers; idle times start again"
        if group is None
        else "it gets no new nodes until it recovers"
    )
    reason = (
        f"{what} is unhealthy: {count.unready} of {count.nodes} node(s) unready or never joined, above "
        f"ok_total_unready_count {ok} and max_total_unready_percentage {percentage:g}%; {effect}"
    )
    if group is None:
        return Unhealthy(None, count.unready, count.nodes, reason)
    return Unhealthy(group.name, count.unready, count.nodes, reason, region=group.region)
