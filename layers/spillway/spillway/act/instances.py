"""EC2 instances and the Nodes on them, as the act steps look them up live.

EKS names a Node after its instance's private DNS name, and the Node's ``spec.providerID`` names the
instance: :func:`nodes_on` finds a Node that way. :func:`where_gone` says when an instance is no longer
one to act on (out of its group, or terminating already). Used by the scale-up and gang launch checks,
the drain's terminate and the removal of instances that never joined. :func:`give_back_in_group`
terminates what a launch did not deliver (a scale-up's back-off, a gang's give-back), best-effort, and
leaves the InService ones of a group whose Terminate process is suspended.

A give-back never terminates an instance whose Node runs work (:func:`working_instances`), and judges
it with the Node cordoned (:func:`judged_for_give_back`): cordon each Node, read its pods, let the
caller terminate the idle instances, then take the give-back's cordon off every Node whose instance it
did not terminate, also when something raises on the way. Read without the cordon, a Node could take a
pending pod between the read and the terminate, and the pod died with the instance.

A give-back's cordon names it (its reason: :data:`~spillway.model.k8s.GANG_GIVE_BACK` or
:data:`~spillway.model.k8s.BACKOFF_GIVE_BACK`, with its attempt or its owner: one execution's, the same
in every retry of the step). It is written only on a Node schedulable at the patch, and taken off only
while it still holds those words (:meth:`Cluster.cordon`, :meth:`Cluster.uncordon`, each in one
resourceVersion-guarded patch): a retry finds a cordon its first try left as its own, and a drain's
cordon, made before or meanwhile, is never taken over nor taken off. The planner leaves a Node with a
give-back's cordon alone for :data:`~spillway.model.k8s.GIVE_BACK_LEASE_MINUTES`; a cordon left past
that (the uncordon failed, the Lambda died) is an orphan the next plan restores or drains.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from spillway.act.deadline import NO_DEADLINE, Deadline
from spillway.errors import (
    AsgLimitExceeded,
    AwsThrottled,
    AwsUnavailable,
    InstanceNotFound,
    KubeError,
    NodeNotFound,
    SpillwayError,
)
from spillway.model.aws import AutoScalingGroup, ScalingActivity
from spillway.model.cluster import NodeInfo, PodInfo, instance_id_from_provider_id
from spillway.model.drain import Placement
from spillway.model.k8s import GIVE_BACK_LEASE_MINUTES, Node
from spillway.model.nodegroup import TERMINATE, terminate_holds
from spillway.planner.disruption import dead, keeps_node_busy
from spillway.ports import Cloud, Cluster

log = logging.getLogger(__name__)


def nodes_on(kube: Cluster, cloud: Cloud, region: str, instance_ids: Sequence[str]) -> dict[str, Node]:
    """Instance id → the Node named after its private DNS name, for those of ``instance_ids`` that have
    one, unless that Node's ``spec.providerID`` names another instance. (A providerID that names no
    instance at all is not told apart: callers that need the instance named say so.)"""
    if not instance_ids:
        return {}
    found: dict[str, Node] = {}
    for iid, dns in cloud.private_dns_names(region, instance_ids).items():
        if not dns:
            continue
        try:
            node = kube.get_node(dns)
        except NodeNotFound:
            continue
        if instance_id_from_provider_id(node.spec.provider_id) in (iid, None):
            found[iid] = node
    return dict(sorted(found.items()))


@dataclass
class Judged:
    """What a give-back found of the instances it is about to terminate (:func:`judged_for_give_back`):
    ``reason`` (the give-back's cordon's words), ``working`` (instance id → why it must not be
    terminated: :func:`working_instances`), ``cordons`` (instance id → the name of its Node, for each
    Node carrying the give-back's own cordon), ``found`` (those of them whose cordon was there before
    this try's: another try's of the same give-back, maybe still running), ``busy`` (those this try
    read running work), ``gone`` (those the caller reported terminated: their cordons stay) and
    ``left_cordoned`` (Nodes whose cordon could not be taken off again)."""

    reason: str = ""
    working: dict[str, str] = field(default_factory=dict)
    cordons: dict[str, str] = field(default_factory=dict)
    found: set[str] = field(default_factory=set)
    busy: set[str] = field(default_factory=set)
    gone: set[str] = field(default_factory=set)
    left_cordoned: list[str] = field(default_factory=list)

    def idle(self, instance_ids: Iterable[str]) -> list[str]:
        """Those of ``instance_ids`` the give-back may terminate: not ``working``, in their order."""
        return [iid for iid in instance_ids if iid not in self.working]

    def terminated(self, instance_ids: Iterable[str]) -> None:
        """Report instances terminated: their Nodes keep the give-back's cordon."""
        self.gone.update(instance_ids)

    def said(self) -> str:
        """What the give-back's cause or reason adds: the instances left running
        (:func:`left_running`), and the Nodes whose cordon could not be taken off."""
        if not self.left_cordoned:
            return left_running(self.working)
        return left_running(self.working) + (
            f"; Spillway's cordon left on {', '.join(self.left_cordoned[:5])}: it could not be taken off "
            f"(a plan restores or drains such a Node {GIVE_BACK_LEASE_MINUTES} minutes after the cordon)"
        )


@contextmanager
def judged_for_give_back(
    kube: Cluster, cloud: Cloud, region: str, instance_ids: Collection[str], now: datetime, reason: str
) -> Iterator[Judged]:
    """Judge ``instance_ids`` with their Nodes cordoned, for the caller to terminate the idle ones (and
    report them: :meth:`Judged.terminated`) inside the ``with`` block. Each Node is cordoned before its
    pods are read (:func:`working_instances`): kube-scheduler binds a pending pod to any Ready Node
    until it is unschedulable, and one bound after the pods were read died with the instance, as
    ``kubectl drain`` and cluster-autoscaler's taint avoid by marking the node before they look. When
    the block ends, or anything raises after the first cordon, every cordon of the give-back's (its
    ``reason``: one the give-back made, or found made by its own first try) on a Node whose instance
    was not reported terminated (kept, held, refused, failed) is taken off again, best-effort
    (:func:`_uncordon_kept`): the error, if one, is the one raised."""
    judged = Judged(reason=reason)
    try:
        judged.working = working_instances(kube, cloud, region, instance_ids, now, judged)
        yield judged
    finally:
        _uncordon_kept(kube, judged)


def working_instances(
    kube: Cluster,
    cloud: Cloud,
    region: str,
    instance_ids: Collection[str],
    now: datetime,
    judged: Judged,
) -> dict[str, str]:
    """Of ``instance_ids``, those a give-back must not terminate, each with why: its Node runs a pod that
    keeps a node busy at ``now`` (:func:`~spillway.planner.disruption.keeps_node_busy`: not a DaemonSet's
    or a mirror, not finished or stuck terminating), named with its first such pods; or its Node could
    not be cordoned, or it or its pods could not be read, so whether it runs work is not known. A
    launch's capacity goes back, never a running pod: kube-scheduler binds any pending pod to a new
    Node once it is Ready, and a Node that was Ready may run pods while NotReady for a moment. Each
    Node is cordoned (``judged.reason`` names the give-back) before its pods are read, so no pod is
    bound to it after they were: one schedulable when its cordon is written is cordoned, and recorded
    in ``judged.cordons`` (instance id → Node name); one carrying the cordon for that reason already
    (another try of the same give-back made it) is recorded too, and in ``judged.found``; one cordoned
    otherwise (a drain's, a person's) is
    left as it is, never recorded, whatever the read found (:meth:`Cluster.cordon` decides in its
    guarded patch); one gone by its cordon (``NodeNotFound``) is taken for no Node. On a
    NotReady Node a pod that never started (:func:`~spillway.planner.disruption.never_started`:
    Pending, no container ever ran) does not count, however short the Node has been NotReady
    (:func:`~spillway.planner.disruption.dead` with no wait: the launch did not deliver, so the instance
    goes back anyway): one whose tolerations admit everything, the not-ready taint too, is bound to a
    Node that never becomes Ready (its CNI never starts) and stays Pending there, never run; kept for
    it, the instance would run until scale-down or the gang sweep judged the Node, past
    ``scale_down_unready_minutes``. Only while its kubelet reports it not ready (Ready ``False``): on a
    Node whose Ready is ``Unknown`` (the kubelet silent) such a pod's status is stale, it may run now,
    and it counts as work. Only instances EC2 shows running are looked up (DescribeInstances
    refuses a batch naming an id it does not know). After one cordon or read fails the others are not
    tried (each failure costs the client's whole retry budget, and the step must end within its
    Lambda's timeout): they are kept, neither cordoned nor read. What is kept is judged later by the
    scale-down (in its group) or the gang sweep (outside it), which read its pods again."""
    if not instance_ids:
        return {}
    states = cloud.instance_states(region, sorted(instance_ids))
    running = sorted(i for i, state in states.items() if i in instance_ids and state == "running")
    try:
        nodes = nodes_on(kube, cloud, region, running)
    except KubeError as exc:  # which of them run Nodes is not known: none is taken for idle
        return {iid: f"the cluster could not be read: {type(exc).__name__}" for iid in running}
    working: dict[str, str] = {}
    failed: KubeError | None = None
    for iid, node in nodes.items():
        if failed is not None:  # one cordon or read failed: the others are not tried, nor taken for idle
            working[iid] = f"its Node was not cordoned nor its pods read: {type(failed).__name__} for another"
            continue
        step = "its Node could not be cordoned"
        try:
            if not _cordon(kube, iid, node, judged):
                continue  # the Node is gone: no kubelet to run a pod there
            step = "its pods could not be read"
            work = _work_on(kube, node, now)
        except KubeError as exc:  # whether it runs work is not known: it is not taken for idle either
            working[iid] = f"{step}: {type(exc).__name__}"
            failed = exc
            continue
        if work:
            working[iid] = work
            judged.busy.add(iid)
    return working


def _cordon(kube: Cluster, iid: str, node: Node, judged: Judged) -> bool:
    """Make the instance's Node unschedulable (:func:`working_instances`); False when it is gone. The
    cordon is the give-back's (recorded) when the Node is schedulable as the patch finds it, or carries
    the give-back's own cordon already (``found`` when the Node was read cordoned: another try's); any
    other is left as it is, never taken off here. A cordon whose answer was lost (the client's retries
    spent) may have landed: it is recorded, since the uncordon takes off only the give-back's own."""
    name = node.metadata.name
    try:
        ours = kube.cordon(name, judged.reason, only_if_schedulable=True)
    except NodeNotFound:
        return False
    except KubeError:
        judged.cordons[iid] = name
        raise
    if ours:
        judged.cordons[iid] = name
        if node.spec.unschedulable:
            judged.found.add(iid)
    return True


def _uncordon_kept(kube: Cluster, judged: Judged) -> None:
    """Take the give-back's cordon off each Node whose instance it did not terminate, while the Node
    still carries it (``if_reason``: a drain that took the Node over meanwhile keeps its cordon); a Node
    gone meanwhile needs none. Best-effort, as the cordons were made: after one fails the others are
    not tried (each failure costs the client's whole retry budget), and those left are named in
    ``left_cordoned`` (a plan restores or drains such a Node once the cordon is older than
    :data:`~spillway.model.k8s.GIVE_BACK_LEASE_MINUTES`); nothing raises, so an error the block raised
    is the one seen."""
    failed: KubeError | None = None
    for iid, name in judged.cordons.items():
        # another try's cordon is left to its lease (that try may be terminating the instance now), but
        # on a Node this try read running work: that try read the same, under the same cordon
        if iid in judged.gone or (iid in judged.found and iid not in judged.busy):
            continue
        if failed is None:
            try:
                with suppress(NodeNotFound):
                    kube.uncordon(name, if_reason=judged.reason)
                continue
            except KubeError as exc:
                failed = exc
        judged.left_cordoned.append(name)
    if failed is not None:
        log.warning("give-back: cordon left on %s: %s", ", ".join(judged.left_cordoned), failed)


def _work_on(kube: Cluster, node: Node, now: datetime) -> str:
    """The first pods on ``node`` that keep it busy (:func:`working_instances`), named; "" when none."""
    # a NotReady Node's pods that never started are no work: no wait, the launch did not deliver (only
    # while its kubelet reports it not ready: with Ready Unknown they count, their statuses are stale)
    dead_node = dead(NodeInfo.from_node(node), now, timedelta(0))
    pods = [PodInfo.from_pod(p) for p in kube.pods_on_node(node.metadata.name)]
    keys = sorted(p.key for p in pods if keeps_node_busy(p, now, dead_node=dead_node))
    return ", ".join(keys[:3]) + (" ..." if len(keys) > 3 else "")


def left_running(working: Mapping[str, str]) -> str:
    """What a give-back's cause or reason adds for the instances it left running
    (:func:`working_instances`)."""
    if not working:
        return ""
    return f"; left running, their Nodes run pods: {'; '.join(f'{i} ({why})' for i, why in working.items())}"


def ready_nodes(kube: Cluster, cloud: Cloud, region: str, instance_ids: Sequence[str]) -> dict[str, str]:
    """Instance id → name of the Ready Node it runs, whose providerID names it."""
    return {
        iid: node.metadata.name
        for iid, node in nodes_on(kube, cloud, region, instance_ids).items()
        if node.is_ready() and instance_id_from_provider_id(node.spec.provider_id) == iid
    }


def where_gone(placement: Placement | None, instance_id: str, group: str, region: str) -> str | None:
    """Where the instance is, when that is no longer in ``group`` or already terminating; else None."""
    if placement is None or placement.group != group:
        return f"no longer in Auto Scaling group {group} ({region})"
    if placement.lifecycle_state.startswith("Terminat"):
        return f"{placement.lifecycle_state} in {group} ({region})"
    return None


@dataclass
class Terminated:
    """What a give-back's terminations came to: ``terminated`` (every instance whose termination was
    accepted), ``replaced`` (those of them terminated without the decrement: the group keeps their
    capacity and launches replacements), ``refused`` (decrements refused, retried without),
    ``held`` (InService in a group whose Terminate process is suspended: not asked for, left running
    with their capacity), ``not_found`` (no longer in a group: left to the caller) and ``errors`` (the
    instances still running, and why)."""

    terminated: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    # those of ``held`` the group read did not list (a fleet's members, maybe attached since the read,
    # maybe in no group): not said to be in the group
    unlisted: list[str] = field(default_factory=list)
    not_found: list[str] = field(default_factory=list)  # in no group any more (left it, or gone)
    errors: list[tuple[list[str], SpillwayError]] = field(default_factory=list)

    def raise_first(self) -> None:
        """The first error, a retryable one first (GiveBack retries it), naming every instance left."""
        if not self.errors:
            return
        retryable = [e for e in self.errors if isinstance(e[1], AwsThrottled | AwsUnavailable)]
        _, first = (retryable or self.errors)[0]
        left = sorted({i for ids, _ in self.errors for i in ids})
        raise type(first)(f"{first} (still running: {', '.join(left[:20])})") from first

    def kept(self, min_size: int, desired: int) -> str:
        """What could not be given back, for the cause: the capacity of the instances replaced, and the
        instances held by a suspended Terminate process."""
        said = ""
        if self.replaced:
            said += (
                f"; {len(self.replaced)} instance(s) terminated without decrement: MinSize {min_size} "
                f"holds the desired capacity at {desired}, and Auto Scaling launches a replacement for each"
            )
        listed = [i for i in self.held if i not in self.unlisted]
        if listed:
            said += (
                f"; {len(listed)} instance(s) left running in the group: its {TERMINATE} process is "
                f"suspended, and Auto Scaling terminates no InService instance until it is resumed; resume "
                f"it or terminate them by hand ({', '.join(listed[:5])})"
            )
        if self.unlisted:
            said += (
                f"; {len(self.unlisted)} instance(s) left running that the group's read did not list: "
                f"attached since the read, or in no group if the attach did not land; with the group's "
                f"{TERMINATE} process suspended none was asked of Auto Scaling, and one in no group is the "
                f"gang sweep's once gang_orphan_minutes pass ({', '.join(self.unlisted[:5])})"
            )
        return said


def terminate_held(asg: AutoScalingGroup, lifecycle_state: str | None) -> bool:
    """Whether Auto Scaling would not terminate an instance of ``asg`` in ``lifecycle_state`` (None: not
    known): :func:`~spillway.model.nodegroup.terminate_holds` on the group as read now.
    TerminateInstanceInAutoScalingGroup's reference names no error that would say the instance was kept,
    so such an instance is not asked for (a decrement applied without its termination would leave the
    group above its desired capacity, scaled in by its termination policy, any node, once Terminate
    resumes). One rule for every caller: a drain's validation
    (:func:`spillway.act.drain._terminate_suspended`), a give-back (:func:`give_back_in_group`), the
    removal of an instance that never joined (:mod:`spillway.act.unregistered`), and the plan that
    lists such removals (:meth:`spillway.model.nodegroup.NodeGroup.terminate_held`)."""
    return terminate_holds(asg.suspended(TERMINATE), lifecycle_state)


def terminate_in_group(
    cloud: Cloud, region: str, instance_id: str, *, decrement: bool = True, fall_back: bool = True
) -> tuple[ScalingActivity, bool]:
    """TerminateInstanceInAutoScalingGroup of one instance: (the termination, whether it decremented the
    group). With ``decrement`` it is asked with ShouldDecrementDesiredCapacity; AWS refuses that of a group
    whose live desired capacity is at its MinSize (a ValidationError, ``AsgLimitExceeded``) and does
    nothing, and with ``fall_back`` the instance is then terminated without it, as the refusal offers: the
    group launches a replacement. Without ``fall_back`` the refusal is raised. Whether AWS will refuse is
    never judged from a group read: DescribeAutoScalingGroups is eventually consistent, and the desired
    capacity and MinSize move after it (another terminate, a scale-up, a person)."""
    if decrement:
        try:
            return cloud.terminate_instance(region, instance_id, decrement=True), True
        except AsgLimitExceeded:
            if not fall_back:
                raise
    return cloud.terminate_instance(region, instance_id, decrement=False), False


def give_back_in_group(
    cloud: Cloud,
    asg: AutoScalingGroup,
    instance_ids: Sequence[str],
    unlisted: Collection[str] = (),
    deadline: Deadline = NO_DEADLINE,
) -> Terminated:
    """Terminate instances of the Auto Scaling group ``asg`` (as read now) that a launch did not
    deliver, best-effort: one refused does not stop the others. While the group's Terminate process is
    suspended its InService instances are not asked for (``held``): Auto Scaling terminates none of them
    then (EC2 Auto Scaling User Guide, "Considerations for suspending processes": the suspension applies
    to InService instances only, not to Pending ones), the API reference of
    TerminateInstanceInAutoScalingGroup names no error that would say so, and a decrement applied
    without the termination would leave the group above its desired capacity, to be scaled in by its
    termination policy (any node, undrained) once Terminate is resumed. They keep their capacity, and
    the caller says so (:meth:`Terminated.kept`). Spillway resumes no process. ``unlisted``: those of
    ``instance_ids`` the read may be too old to list (just attached); their lifecycle state is not
    known, so while Terminate is suspended they are held too (one in no group after all is left to the
    gang sweep). TerminateInstanceInAutoScalingGroup with the decrement first; where
    AWS refuses the decrement (the MinSize, raised meanwhile or reached: ``AsgLimitExceeded``), once
    the others were tried, without it, as AWS's refusal offers: the group keeps the capacity its
    MinSize asks for and launches a replacement, an ordinary node. (DetachInstances first would gain
    nothing: without its decrement the group replaces the instance the same way, with it the desired
    capacity would go below the MinSize, and it needs one more permission.) No call is started that may
    not end before the step's ``deadline`` (:class:`~spillway.act.deadline.Deadline`): one not started is
    an error, ``AwsUnavailable`` (unsent), for the step's retry. Errors are recorded, not raised: the
    caller raises them (:meth:`Terminated.raise_first`) once it did the rest."""
    gone = Terminated()
    region = asg.region
    states: dict[str, str | None] = {i.InstanceId: i.LifecycleState for i in asg.Instances}
    states.update(dict.fromkeys(unlisted))  # listed by no read: their state is not known
    gone.held = sorted(i for i in instance_ids if terminate_held(asg, states.get(i, "")))
    gone.unlisted = sorted(set(gone.held) & set(unlisted))
    todo = [iid for iid in instance_ids if iid not in gone.held]
    refused = [iid for iid in todo if _terminate_one(cloud, region, iid, True, gone, deadline) == "refused"]
    for iid in refused:
        _terminate_one(cloud, region, iid, False, gone, deadline)
    return gone


def _terminate_one(
    cloud: Cloud, region: str, iid: str, decrement: bool, gone: Terminated, deadline: Deadline
) -> str:
    """One TerminateInstanceInAutoScalingGroup, if it ends in time; what became of it is recorded in
    ``gone``."""
    try:
        deadline.require(1, f"TerminateInstanceInAutoScalingGroup({region}, {iid})")
        cloud.terminate_instance(region, iid, decrement=decrement)
    except InstanceNotFound:
        gone.not_found.append(iid)
        return "not found"
    except AsgLimitExceeded as exc:
        if decrement:
            gone.refused.append(iid)
            return "refused"
        gone.errors.append(([iid], exc))
        return "failed"
    except SpillwayError as exc:
        gone.errors.append(([iid], exc))
        return "failed"
    gone.terminated.append(iid)
    if not decrement:
        gone.replaced.append(iid)
    return "terminated"
