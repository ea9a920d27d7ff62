"""Fleet-mode gang instances left outside every Auto Scaling group.

A fleet-mode gang launch (:mod:`spillway.act.gang`) runs its instances outside the group from its
CreateFleet until its AttachInstances, each tagged with the attempt (``spillway.io/gang-attempt``) and the
cluster; anything short of the whole gang ends in its GiveBack, which terminates them. An execution
stopped meanwhile (StopExecution), or whose GiveBack failed for good (``GiveBackFailed``), leaves them
running, paid for, in no group. They were launched from the group's launch template, so their kubelets
join the cluster and kube-scheduler may put pods on them; but their Nodes are in no managed group, which
scale-down never drains. Nothing else would ever remove them (Karpenter's garbage collection likewise
terminates its tagged instances that no NodeClaim owns).

observe reads every instance tagged with a gang attempt of the cluster (``ClusterSnapshot.fleet_instances``).
Once one has been running ``gang_orphan_minutes`` (60) since its launch and is still in no group (no
managed group lists it, in any lifecycle state, and it carries no ``aws:autoscaling:groupName`` tag), its attempt is over: an
execution attaches its fleet only before its deadline (``GANG_DEADLINE_SECONDS``, 10 min), and a step's
retries end well within the hour. Then:

* no Node runs on it, or its Node runs no pod that keeps a node busy
  (:func:`spillway.planner.disruption.keeps_node_busy`: DaemonSet, mirror, finished and stuck-terminating
  pods keep none): ``terminate`` (``gang-orphan``), by the scale-down's ``remove_gang_orphan`` step, which
  checks the live world again first (:mod:`spillway.act.gangsweep`);
* on a Node NotReady past ``scale_down_unready_minutes`` a pod that never started (Pending, no container
  ever ran: :func:`spillway.planner.disruption.never_started`) is none: it tolerates the not-ready taint,
  was bound to a Node that never became Ready, and would stay there for good; the reason names it, and the
  entry carries the unready time (``unready_minutes``), against which the sweep reads the Node again.
  Not while the cluster is unhealthy (:mod:`spillway.planner.health`: too many nodes unready, the
  snapshot a poor picture), when the scale-down's unready rule is off too: then such a pod is work;
* its Node runs such pods: left and reported (``gang-orphan-busy``), every plan, until they end. It is
  not drained: the pods are running work that nobody asked to move (the gang's own workers, which
  kube-scheduler may have bound before the attach, among them), the drain's termination is the group's
  (TerminateInstanceInAutoScalingGroup), and an eviction here would be a disruption no budget or plan
  of the workload chose. Once they end, the next plan terminates it.

Pure: ``now`` comes from the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from spillway.config import PlannerConfig
from spillway.model.cluster import ClusterSnapshot, NodeInfo
from spillway.model.fleet import FleetInstance
from spillway.model.nodegroup import NodeGroup
from spillway.planner import codes
from spillway.planner.context import aware, minutes
from spillway.planner.disruption import dead, keeps_node_busy, never_started
from spillway.planner.types import GangOrphan

NAMED_PODS = 3  # the busy pods a reason names


def sweep_gang_orphans(
    snapshot: ClusterSnapshot,
    groups: Sequence[NodeGroup],
    config: PlannerConfig,
    now: datetime,
    *,
    unhealthy: bool = False,
) -> tuple[GangOrphan, ...]:
    """The fleet instances whose attempt is over and which no group holds, by region and instance id.
    ``unhealthy``: the cluster is (:func:`spillway.planner.health.judge_health`): no Node is dead to the
    sweep, so a pod that never started keeps its orphan, as it keeps a node from scale-down."""
    limit = timedelta(minutes=config.gang_orphan_minutes)
    # every instance a group lists, whatever its lifecycle state (Standby, Detaching, Terminating too)
    members = {iid for g in groups for iid in (*g.instance_ids, *g.terminating_instances, *g.held_instances)}
    nodes = {n.instance_id: n for n in snapshot.nodes if n.instance_id}
    out: list[GangOrphan] = []
    for inst in sorted(snapshot.fleet_instances, key=lambda i: (i.region, i.instance_id)):
        age = now - aware(inst.launched_at)
        if inst.instance_id in members or inst.group or age < limit:
            continue
        what = (
            f"instance {inst.instance_id} ({inst.region}) of gang {inst.gang or '?'} (attempt "
            f"{inst.attempt}) is in no Auto Scaling group {minutes(age)} after its launch "
            f"(gang_orphan_minutes {config.gang_orphan_minutes:g}): no gang launch attaches it any more"
        )
        info = nodes.get(inst.instance_id)
        out.append(
            _judge(inst, info, what, snapshot, None if unhealthy else _unready(info, config, now), now)
        )
    return tuple(out)


def _judge(
    inst: FleetInstance,
    info: NodeInfo | None,
    what: str,
    snapshot: ClusterSnapshot,
    unready: tuple[float, str] | None,
    now: datetime,
) -> GangOrphan:
    """Terminate the orphan, or leave it while its Node (``info``) runs work; ``what`` says what it is;
    ``unready``: the Node is dead to the sweep (:func:`_unready`)."""
    node = info.name if info else None
    busy, unstarted = _busy_pods(snapshot, info, now, unready is not None)
    if busy:
        reason = f"{what}; left running: its Node {node} runs {_named(busy)}; terminated once they end"
        return GangOrphan(inst.instance_id, inst.region, inst.gang, inst.attempt, node, False,
                          codes.GANG_ORPHAN_BUSY, reason)  # fmt: skip
    on_node = f"; its Node {node} runs no work and goes with it" if node else "; no Node runs on it"
    if unstarted and unready is not None:
        on_node = f"; its Node {node}, not Ready for {unready[1]}, runs no work (its pods never started: "
        on_node += f"{_named(unstarted)}) and goes with it"
    return GangOrphan(inst.instance_id, inst.region, inst.gang, inst.attempt, node, True, codes.GANG_ORPHAN,
                      f"{what}{on_node}; terminate it", unready[0] if unready else None)  # fmt: skip


def _unready(node: NodeInfo | None, config: PlannerConfig, now: datetime) -> tuple[float, str] | None:
    """For a Node NotReady past ``scale_down_unready_minutes`` (:func:`~spillway.planner.disruption.dead`):
    that time, and how long the Node has been NotReady; else None."""
    limit = config.scale_down_unready_minutes
    if node is None or not dead(node, now, timedelta(minutes=limit)):
        return None
    since = node.ready_changed_at or node.created_at
    assert since is not None  # dead: it is known
    return limit, minutes(now - aware(since))


def _busy_pods(
    snapshot: ClusterSnapshot, node: NodeInfo | None, now: datetime, dead_node: bool
) -> tuple[list[str], list[str]]:
    """The pods on ``node`` that keep a node busy, and (on a ``dead_node``) those that never started, by
    key."""
    if node is None:
        return [], []
    pods = [p for p in snapshot.pods if p.node_name == node.name]
    busy = sorted(p.key for p in pods if keeps_node_busy(p, now, dead_node=dead_node))
    unstarted = sorted(p.key for p in pods if dead_node and never_started(p))
    return busy, unstarted


def _named(pods: list[str]) -> str:
    more = len(pods) - NAMED_PODS
    return ", ".join(pods[:NAMED_PODS]) + (f" and {more} more" if more > 0 else "")
