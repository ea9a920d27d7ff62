"""Terminate a fleet gang's instance left outside every group (the scale-down's ``remove_gang_orphan`` step).

A plan lists the instances a fleet-mode gang launch left in no Auto Scaling group past
``gang_orphan_minutes`` (:mod:`spillway.planner.gangsweep`); the scale-down state machine gives each one
the plan terminates to this step, on the drain function, beside ``remove_unregistered``. The plan's
snapshot is older than the world, so the step reads it again first:

* EC2 no longer shows the instance alive or stopped, tagged with this cluster and the plan's attempt:
  ``gone``, nothing done (a retry after the terminate lands here, and so does an instance somebody
  retagged: the tags are what ``ec2:TerminateInstances`` is granted on);
* Auto Scaling places it in a group now (DescribeAutoScalingInstances: an attach that landed since the
  plan, or any group of the region), or it carries a group's ``aws:autoscaling:groupName`` tag:
  ``attached``, nothing done;
* its Node, if one, is cordoned first (kube-scheduler could bind a pod to it until then; a cordon
  somebody else made, or any of Spillway's but an earlier sweep's, a drain's say, stays theirs); a
  Node that runs pods keeping a node busy
  (:func:`spillway.planner.disruption.keeps_node_busy` at ``now``, as the plan judged them: a pod stuck
  terminating, its kubelet gone, is none, and so is a pod that never started on a Node still NotReady
  for the plan's ``unready_minutes``): ``busy``, the sweep's cordon taken off again, nothing else done
  (the next plan reports it until they end); a failure before the terminate also takes it off;
* else EC2 ``TerminateInstances``, and its Node, if one, is deleted: ``terminated``.

Idempotent: a retry after the terminate finds the instance shutting down (``gone``). A removal that fails
is tried again by the next plan, which still finds the instance outside every group.

**One sweep of an instance at a time.** Plans run every minute and a scale-down can outlast the next plan's
start, so two executions may sweep one orphan at once, and their steps would undo each other: the cordon does
not tell them apart (:meth:`Cluster.cordon` answers True to both, the Node carrying Spillway's cordon
already), so one that found the Node busy took its cordon off while the other, which had looked at the pods
before, terminated the instance under the pod kube-scheduler had just bound; two idle sweeps both terminated
it, counted twice. So the step first claims the instance in the state table
(``gangsweep#<region>#<instance>`` in the partition :data:`SWEEP_PARTITION`, a conditional put: first wins),
before anything is read, and releases the
claim when it ends, whatever the outcome, a failure too, and only while it is still its own (a conditional
delete: one taken over after it lapsed is the new holder's). The claim names its sweep (a random token): a put
whose answer was lost is sent again by botocore and finds the claim it wrote, which is its own. A sweep that
finds the claim held does nothing: ``held``, and the next plan's sweep tries again. The claim is a lease of
:data:`HOLD`: no Lambda invocation runs longer, so one still there past it is a sweep whose Lambda died (timed
out) without releasing it, and the next sweep takes it over (until then, a Step Functions retry of that step,
or the next plans' sweeps, are ``held``; a cordon the dead sweep made stays on the Node until a sweep runs, on
a Node busy by then until its work ends and the sweep of the idle Node terminates it).

The claims have a partition of their own so that the drain function's role may delete them and nothing
else of the state table (``dynamodb:LeadingKeys``: IAM has no condition on a sort key). Builds before it
claimed in the cluster's own partition: a sweep also honours such a claim while its lease lasts (an older
build's sweep still running while ``sam deploy`` switches the function over), and is ``held``. A build
rolled back to one before reads no claim of this partition: for the length of the invocations running
then, two sweeps of one orphan may overlap, as before the claims.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextlib import suppress
from datetime import datetime, timedelta
from typing import Any, Literal
from uuid import uuid4

from pydantic import Field

from spillway.act.instances import nodes_on
from spillway.act.unregistered import InstanceRequest, parse_instance_request
from spillway.errors import NodeNotFound, SpillwayError, StateConflict
from spillway.model.cluster import NodeInfo, PodInfo, format_time, instance_id_from_provider_id, parse_time
from spillway.planner.disruption import dead, keeps_node_busy
from spillway.ports import Cloud, Cluster, Ledger

log = logging.getLogger(__name__)

Sweep = Literal["terminated", "gone", "attached", "busy", "held"]
NAMED_PODS = 3
SWEEP_PREFIX = "gangsweep#"  # the claim on one instance's sweep: gangsweep#<region>#<instance>
# ... in this partition of the state table, beside the cluster's own (whose items no sweep may delete)
SWEEP_PARTITION = "{cluster}#gangsweep"
# The words every sweep's cordon begins with (``gang orphan <instance> (plan <id>)``): the one cordon of
# Spillway's a sweep takes over (a dead sweep's); any other (a drain's, a give-back's) it leaves as it is.
ORPHAN_CORDON = "gang orphan "
# How long a sweep's claim holds: no Lambda invocation runs longer than 15 minutes (the drain function's
# own timeout is far shorter), so a claim still there past it is one whose sweep died without releasing it.
HOLD = timedelta(minutes=15)


class SweepRequest(InstanceRequest):
    """One ``gang_orphans`` entry a plan terminates, with the cluster it is of."""

    attempt: str = Field(min_length=1, max_length=255)
    gang: str = Field(default="", max_length=255)
    node: str | None = None
    # the plan found the Node NotReady past this (scale_down_unready_minutes): a pod that never started on
    # it is no work while the Node still is (spillway.planner.disruption.dead, never_started)
    unready_minutes: float | None = Field(default=None, ge=0, allow_inf_nan=False)


def remove_gang_orphan(
    kube: Cluster,
    cloud: Cloud,
    ledger: Ledger,
    cluster: str,
    regions: tuple[str, ...],
    raw: Any,
    now: datetime,
) -> dict[str, Any]:
    """Claim, check, then terminate (see the module docstring). The result is one line of the
    scale-down's summary: ``{node, instance_id, group: None, region, outcome, note}``, its outcome
    ``gang-orphan-<terminated|gone|attached|busy|held>`` (as the DrainOutcome metric names it), so the
    summary's counts never mix an orphan with a drained node's ``terminated`` or an unregistered
    instance's ``gone``."""
    request = parse_instance_request(SweepRequest, raw, cluster, regions)
    outcome, node, note = _claimed_sweep(kube, cloud, ledger, cluster, request, now)
    return {
        "node": node,
        "instance_id": request.instance_id,
        "group": None,
        "region": request.region,
        "outcome": f"gang-orphan-{outcome}",
        "note": note[:1024],
    }


def _claimed_sweep(
    kube: Cluster, cloud: Cloud, ledger: Ledger, cluster: str, request: SweepRequest, now: datetime
) -> tuple[Sweep, str | None, str]:
    """:func:`_sweep` under the instance's claim, released when it ends (see the module docstring); a
    claim another sweep holds: ``held``, nothing read or done."""
    iid = request.instance_id
    item = f"{SWEEP_PREFIX}{request.region}#{iid}"
    # ``sweep`` tells this sweep's claim from any other's, of its plan too (a retry of its step): a put
    # whose answer was lost is sent again by botocore and finds the claim it wrote, not written by it
    token = uuid4().hex
    mine = {"plan": request.plan_id or "-", "at": format_time(now), "sweep": token}
    try:
        holder, created = ledger.claim(
            SWEEP_PARTITION.format(cluster=cluster), item, mine, expires=now + HOLD, now=now
        )
    except StateConflict:  # released between its put and its read: that sweep has just ended
        holder, created = {}, False
    ours = created or holder.get("sweep") == token
    if ours and (older := _older_builds_claim(ledger, cluster, item, now)) is not None:
        _let_go(ledger, cluster, item, mine)
        holder, ours = older, False
    if not ours:
        by = f"plan {holder.get('plan')}'s, since {holder.get('at')}" if holder else "one that just ended"
        return "held", request.node, f"another sweep of {iid} holds it ({by}): left to it, for the next plan"
    try:
        return _sweep(kube, cloud, request, now)
    finally:
        _let_go(ledger, cluster, item, mine)


def _older_builds_claim(ledger: Ledger, cluster: str, item: str, now: datetime) -> dict[str, object] | None:
    """The claim a build before :data:`SWEEP_PARTITION` holds on the instance in the cluster's own
    partition, while its lease lasts (its ``at`` plus :data:`HOLD`); None when there is none, or it has
    no time. One that cannot be read counts as held: the sweep is ``held``, and the next plan's tries
    again."""
    try:
        held = ledger.claims(cluster, item).get(item)
    except SpillwayError as exc:
        return {"plan": "unknown", "at": f"unknown: an older build's claim could not be read ({exc})"[:300]}
    if held is None:
        return None
    try:
        at = parse_time(str(held.get("at") or ""))
    except ValueError:  # no time: not a claim of a sweep's (every build's names its time), not a lease
        at = None
    return held if at is not None and at + HOLD > now else None


def _let_go(ledger: Ledger, cluster: str, item: str, mine: Mapping[str, object]) -> None:
    """Release the sweep's claim, only while it is still this sweep's (``mine``): one that lapsed while
    this sweep ran may have been taken over, and deleting the new holder's claim would let a third
    sweep overlap it. Best effort: the step's outcome stands (a retry would find the claim and do
    nothing), and the claim lapses after :data:`HOLD`."""
    try:
        if not ledger.release(SWEEP_PARTITION.format(cluster=cluster), item, held_as=mine):
            log.info("gang sweep: claim %s is no longer this sweep's (taken over or gone): left", item)
    except SpillwayError as exc:
        log.warning("gang sweep: claim %s not released (it lapses in %s): %s", item, HOLD, exc)


def _sweep(
    kube: Cluster, cloud: Cloud, request: SweepRequest, now: datetime
) -> tuple[Sweep, str | None, str]:
    iid, region = request.instance_id, request.region
    live = [i for i in cloud.fleet_instances(region, [iid]) if i.instance_id == iid]
    if not live or live[0].attempt != request.attempt:
        return (
            "gone",
            request.node,
            f"{iid}: EC2 shows it no longer alive and tagged with attempt {request.attempt}",
        )
    placed = cloud.placement(region, iid)
    group = placed.group if placed is not None else live[0].group
    if group:
        return "attached", request.node, f"{iid} is in Auto Scaling group {group} now: left alone"
    name = _node_of(kube, cloud, request)
    if name is None:
        cloud.terminate_instances(region, [iid])
        return "terminated", None, f"terminated {iid}: {request.reason}"
    return _sweep_node(kube, cloud, request, name, now)


def _sweep_node(
    kube: Cluster, cloud: Cloud, request: SweepRequest, name: str, now: datetime
) -> tuple[Sweep, str | None, str]:
    """Cordon the orphan's Node, look at its pods once more, then terminate the instance and delete the
    Node; a busy Node, or any failure before the terminate is done, gets its cordon back off. The cordon
    comes first because kube-scheduler may bind a pod to the idle Node at any moment until it is
    unschedulable (its NodeUnschedulable filter), as ``kubectl drain`` cordons before it lists pods. A
    cordon somebody else made is left as it is (:meth:`Cluster.cordon` answers False for it), and so is
    any of Spillway's but a sweep's (:data:`ORPHAN_CORDON`): a drain's is evicting the pods (a Spot
    warning's drains an instance its group detached, which is what an orphan looks like), and releasing
    it as the sweep's own would let their replacements schedule back onto the Node; the sweep takes over
    only a dead sweep's cordon, and releases it on a busy Node. A cordon of Spillway's that took the
    Node over while the sweep looked stays too (:func:`_release`). An idle orphan is terminated under
    whichever cordon holds it."""
    reason = f"{ORPHAN_CORDON}{request.instance_id} (plan {request.plan_id or '-'})"
    try:
        ours = kube.cordon(name, reason, take_over_only=ORPHAN_CORDON)
    except NodeNotFound:  # gone since it was found: no kubelet there
        return _terminate_gone(cloud, request)
    try:
        try:
            dead_node = _dead(kube, name, request.unready_minutes, now)
        except NodeNotFound:  # gone since its cordon: no kubelet there either
            return _terminate_gone(cloud, request)
        pods = [PodInfo.from_pod(p) for p in kube.pods_on_node(name)]
        busy = sorted(info.key for info in pods if keeps_node_busy(info, now, dead_node=dead_node))
        if not busy:
            cloud.terminate_instances(request.region, [request.instance_id])
    except BaseException:
        if ours:
            _release(kube, name, reason)
        raise
    if busy:
        if ours:
            _release(kube, name, reason)
        named = ", ".join(busy[:NAMED_PODS]) + (" ..." if len(busy) > NAMED_PODS else "")
        return "busy", name, f"its Node {name} runs {named} now: left running"
    kube.delete_node(name)
    return "terminated", name, f"terminated {request.instance_id}; Node {name} deleted: {request.reason}"


def _terminate_gone(cloud: Cloud, request: SweepRequest) -> tuple[Sweep, str | None, str]:
    """The orphan's Node is gone (by its cordon, or by the read after it): terminate the instance."""
    cloud.terminate_instances(request.region, [request.instance_id])
    return "terminated", None, f"terminated {request.instance_id}: {request.reason}"


def _dead(kube: Cluster, name: str, unready_minutes: float | None, now: datetime) -> bool:
    """The Node is NotReady, and has been for the plan's ``unready_minutes``, as read now (never when the
    plan named no such time: an older build's, or a Node the plan saw Ready; then it is not read)."""
    if unready_minutes is None:
        return False
    return dead(NodeInfo.from_node(kube.get_node(name)), now, timedelta(minutes=unready_minutes))


def _release(kube: Cluster, name: str, reason: str) -> None:
    """Take the sweep's cordon off the Node again, only while it still carries the sweep's words
    (``reason``): another of Spillway's cordons that took the Node over meanwhile (a drain's) stays.
    Gone meanwhile: nothing to do."""
    with suppress(NodeNotFound):
        kube.uncordon(name, if_reason=reason)


def _node_of(kube: Cluster, cloud: Cloud, request: SweepRequest) -> str | None:
    """The Node on the instance now: the one named after its private DNS name (:func:`nodes_on`), else
    the one the plan named, if its ``spec.providerID`` still names the instance (a kubelet registered
    under another name, ``--hostname-override``)."""
    iid = request.instance_id
    node = nodes_on(kube, cloud, request.region, [iid]).get(iid)
    if node is not None:
        return node.metadata.name
    if request.node is None:
        return None
    try:
        named = kube.get_node(request.node)
    except NodeNotFound:
        return None
    return request.node if instance_id_from_provider_id(named.spec.provider_id) == iid else None
