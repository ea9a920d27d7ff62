"""A drain's data: the request a person or a plan writes, the validated drain every step carries, where
an instance is in Auto Scaling, and what a drain does with one pod. Plain data; the steps are
:mod:`spillway.act.drain`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from spillway.model.cluster import DEFAULT_GRACE_SECONDS

DEFAULT_DEADLINE_SECONDS = 900
DEFAULT_POLL_SECONDS = 15
MAX_DEADLINE_SECONDS = 86_400
MAX_POLL_SECONDS = 3_600
# No DrainNode execution runs longer (its TimeoutSeconds): the longest deadline, one more poll, and an
# hour for retries, termination and recording. Past it, a node still carrying Spillway's cordon has
# no drain that owns it (the planner's orphaned_drain_minutes is above this).
MAX_EXECUTION_SECONDS = MAX_DEADLINE_SECONDS + MAX_POLL_SECONDS + 3_600
# A drain with ``not_before`` waits for it (DrainNode's Wait state) before its validation, touching
# nothing: a scheduled change's forced drain, started with the notice, waits for the change's last day.
# At most this long: a Standard execution runs at most a year, and DrainNode's TimeoutSeconds is this
# wait plus MAX_EXECUTION_SECONDS, which still bounds a drain from its validation (and so its cordon) on.
MAX_WAIT_SECONDS = 360 * 86_400
MAX_WAITING_EXECUTION_SECONDS = MAX_WAIT_SECONDS + MAX_EXECUTION_SECONDS
# The form Step Functions' Wait takes (Timestamp, TimestampPath): RFC 3339 with an uppercase T and Z,
# no offset (Amazon States Language, Wait state).
WAIT_TIMESTAMP_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?Z$"
# InstanceStatusEvent.Code's values (EC2 API reference)
EventCode = Literal[
    "instance-reboot", "system-reboot", "system-maintenance", "instance-retirement", "instance-stop"
]
LIST_LIMIT = 100  # pod names kept in a step's output: a state machine's state is at most 256 KiB
MAX_EXPECTED_PODS = 1_000  # a consolidation's pods to move (a node runs at most a few hundred)


# A terminate lifecycle hook's HeartbeatTimeout is 30 s to 7,200 s (PutLifecycleHook); its action token a UUID.
MIN_HEARTBEAT_SECONDS = 30
MAX_HEARTBEAT_SECONDS = 7_200
LIFECYCLE_CONTINUE = "CONTINUE"
GLOBAL_TIMEOUT_SECONDS = 172_800  # a lifecycle action waits at most 48 h (or 100 heartbeat timeouts)
# A lifecycle hook's name (PutLifecycleHook: 1 to 255 of these characters).
HOOK_NAME_PATTERN = r"^[A-Za-z0-9\-_/]+$"
# A Node's name: Kubernetes validates it as a DNS subdomain (ValidateNodeName = NameIsDNSSubdomain:
# lowercase letters, digits, '-' and '.', each label starting and ending alphanumeric, at most 253).
# Any other name names no Node; "." or ".." would be a path segment the client resolves to another URL.
NODE_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# The terminate hooks Spillway owns unless LIFECYCLE_HOOK_NAMES names others: the one the README tells
# users to create. Spillway drains for and completes only these; another team's hook on the same group
# (log shipping, say) is its owner's to complete.
DEFAULT_LIFECYCLE_HOOKS: tuple[str, ...] = ("drain-before-terminate",)


def parse_iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class LifecycleAction(BaseModel):
    """A terminate lifecycle action that holds the node's instance in ``Terminating:Wait``: the group is
    terminating it (scale-in by someone else, AZ rebalance, instance refresh, capacity rebalancing) and
    waits for ``CompleteLifecycleAction`` on ``hook`` (or the hook's ``HeartbeatTimeout``, after which its
    DefaultResult applies). A drain that carries one never terminates the instance: it evicts, then
    completes the action with CONTINUE; ``heartbeat_seconds`` (the hook's HeartbeatTimeout) says how
    often it must record a heartbeat to keep the instance waiting."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    hook: str = Field(min_length=1, max_length=255, pattern=HOOK_NAME_PATTERN)
    token: str = Field(
        min_length=36,
        max_length=36,
        pattern=r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
    )
    heartbeat_seconds: int = Field(ge=MIN_HEARTBEAT_SECONDS, le=MAX_HEARTBEAT_SECONDS)


class PodController(BaseModel):
    """A pod's controller, as its ownerReference with ``controller: true`` names it: a plan's drain
    carries it for a named pod, so that the pod's successor (the same controller's new pod, under a new
    name) counts as named (:func:`spillway.act.drain.successors`). The uid tells a controller deleted
    and made again under the same name (another workload) from the one the plan saw."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    kind: str = Field(min_length=1, max_length=100)
    name: str = Field(min_length=1, max_length=253)
    uid: str = Field(min_length=1, max_length=64)
    # the named pod's priority: a pod of that controller with a higher one is other work, not its successor
    # (a Workflow, a RayCluster or a training job makes pods of several templates and priorities)
    priority: int = Field(ge=-(2**31), le=2**31 - 1)  # a pod's spec.priority is an int32


class DrainRequest(BaseModel):
    """A drain as a person (``aws stepfunctions start-execution``) or the scale-down Map writes it.

    ``instance_id``, ``group`` and ``region`` come from a plan: when given they must still match the
    node, so a plan never drains a node that changed since it was made (another instance or group
    cancels its drain, touching nothing, and rejects a drain by hand; a region that is not the node's
    is a bug, rejected).

    ``consolidation`` (a plan's drain of a node that runs work, ``pods`` the pods it moves; or of an idle
    node, ``pods`` the expendable pods it runs): the drain evicts those pods and no others; it is cancelled before touching anything when the node runs any
    other workload pod, or when one of them may no longer be evicted.

    ``uncordon`` (with ``terminate`` false; never with ``lifecycle``): once the pods are evicted the node
    is uncordoned and its draining taint lifted, and it stays in service (a plan's make-room: the node
    is given to pending pods instead of launching one). Failures compensate as any drain's.

    ``leaving``: the instance is going away whatever the drain does (a Spot warning, a rebalance
    recommendation, a scheduled change; a ``lifecycle`` drain is leaving too). Its pods are evicted all
    the same, so two refusals give way: when terminating would take the group below its MinSize it
    drains without terminating (EC2 reclaims the instance and the group replaces it; the interrupt
    function decides from a snapshot up to a minute old, and Spot reclaims several instances of a pool
    at once), or, when the group reached its MinSize only by the time it terminates, terminates without
    decrementing; and a node somebody else cordoned is drained with their cordon left in place (never
    taken over, never undone). A scheduled change's drain (``notice`` ``scheduled``) terminates at
    MinSize too, without decrementing: EC2 acts only at the change's start, days or weeks later, and the
    group launches the replacement now.

    ``notice`` (a drain the interrupt function started: ``interruption``, ``rebalance`` or ``scheduled``,
    the kind of EC2 or AWS Health notice that asked for it; a lifecycle drain has its ``lifecycle``):
    a validation check that refuses it only for what the node is now (its operator protected it with
    ``scale-down-disabled`` or ``karpenter.sh/do-not-disrupt``, or its instance from scale-in, which a
    drain without force respects; or it is gone or replaced; or in another group, but for a forced
    drain's of one moved to another managed group (drained as that group's); or in no group, but for
    a Spot warning's of an instance its group detached since the snapshot; or, without force,
    terminating) cancels it
    touching nothing, as it cancels a plan's drain, and the record step puts a ``SpillwayDrainSkipped``
    Event on the Node. A drain without it (a person's) is rejected for those refusals as before, naming
    the field (scale-in protection holds no drain by hand).

    ``claim_until`` (a plan's drain; RFC 3339 with its zone): when the plan's claim on the node lapses,
    its time ``planned_at`` plus ``drain_claim_minutes`` (``claim_minutes``). Until then later plans leave
    the node alone unless the drain has cordoned it. A drain that starts at or after it, queued behind
    other drains, is cancelled before it touches anything: the next plan judges the node again.

    ``controllers`` (a plan's drain, with ``pods``; an optional field): the controller of each named pod
    that tolerates the drain's cordon and taint, keyed by the pod (``<namespace>/<name>``). Such a pod's
    controller may replace it under a new name on the same node between the plan and the drain (a
    controller that tolerates everything, a Job recreating a pod): a pod the plan did not name that
    tolerates the drain, whose controller (kind, name and uid) is one of these, whose priority is no
    higher than that named pod's (``priority``) and whose named pod is gone (or terminating), is that
    pod's successor, and the drain treats it as the plan treated its predecessor: it goes with the node.
    One successor per named pod gone. Without it (a drain by hand, an older build's plan) every pod the
    plan did not name is unplanned, as before.

    ``whole_grace`` (a plan's consolidation or make-room drain, with ``consolidation``; an optional
    field): the pods of ``pods`` the plan moves at a cost (:func:`spillway.planner.disruption.assess_move`:
    not an expendable pod, killed at will, nor one already terminating). Each is evicted with its whole
    ``terminationGracePeriodSeconds`` or not at all: when one still to be evicted (a budget held it, a
    round was throttled) no longer has that much time before the deadline, the drain gives up at once,
    as at its deadline (:class:`~spillway.errors.DrainTimeout`: the node given back, its pods running),
    since keeping the node is the safe outcome of a drain to save cost. Any other pod a drain evicts gets
    its grace cut to the time left (a drain ahead of a scheduled action, a notice's, a lifecycle hook's,
    one by hand: the instance goes anyway, and a shortened grace beats none). Without it (an older
    build's plan) every pod is cut so, as before.

    ``not_before`` (RFC 3339 in UTC with ``Z``, as Step Functions' Wait state takes it; at most
    :data:`MAX_WAIT_SECONDS` ahead; never with ``lifecycle``, whose hook would time out): the drain
    waits until then before its validation, touching nothing, and is judged as the node is then (a
    drain by hand is checked when it starts too, so that a bad request fails at once). The
    interrupt function's forced drain of a scheduled change days away waits for the change's last day.

    ``deadline_by`` (RFC 3339 with its zone): the latest the deadline may be, whenever the drain starts.
    The deadline is ``deadline_seconds`` after the validation, or this time when that is sooner (now,
    when it is past). The interrupt function's drain of a Spot warning sets it to the warning's time
    plus INTERRUPTION_DEADLINE_SECONDS: EC2 reclaims the instance two minutes after that time, and a
    drain that starts late (a throttled StartExecution retried, a cold start, a retried validation)
    must not count its seconds from its own start.

    ``scheduled_start`` (with ``instance_id`` and ``region``; RFC 3339 in UTC with ``Z``) and
    ``event_code`` (an EC2 event code, when the AWS Health event gave one): the scheduled change the
    drain is for, its start as announced. Once its wait is over, the drain reads the instance's
    scheduled events from EC2 (DescribeInstanceStatus) and follows them: none left that is not
    completed or canceled cancels it, touching nothing; a start moved later waits again, until that
    much later, the deadline kept; a start moved earlier shortens the deadline by as much. When EC2
    cannot be read it drains as planned, saying so in its reason.

    ``unready_minutes`` (a plan's drain of a NotReady node: its group's ``scale_down_unready_minutes``):
    while the node is still NotReady for at least that long, a pod on it that never started (Pending, no
    container ever ran: :func:`spillway.planner.disruption.never_started`) is no work, as the plan judged
    it: neither evicted nor waited for, it goes with the node. Without it (a drain by hand, an older
    build's plan) such a pod is evicted as any other, and cancels a plan's drain.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    cluster: str = Field(min_length=1, max_length=100)
    node: str = Field(min_length=1, max_length=253, pattern=NODE_NAME_PATTERN)
    reason: str = Field(default="", max_length=256)
    deadline_seconds: int = Field(default=DEFAULT_DEADLINE_SECONDS, ge=0, le=MAX_DEADLINE_SECONDS)
    poll_seconds: int = Field(default=DEFAULT_POLL_SECONDS, ge=0, le=MAX_POLL_SECONDS)
    terminate: bool = True
    force: bool = False
    dry_run: bool = False
    instance_id: str | None = Field(default=None, min_length=3, max_length=32)
    group: str | None = Field(default=None, min_length=1, max_length=255)
    region: str | None = Field(default=None, min_length=1, max_length=32)
    plan_id: str | None = Field(default=None, max_length=200)
    consolidation: bool = False
    pods: list[str] = Field(default_factory=list, max_length=MAX_EXPECTED_PODS)
    controllers: dict[str, PodController] = Field(default_factory=dict, max_length=MAX_EXPECTED_PODS)
    whole_grace: list[str] = Field(default_factory=list, max_length=MAX_EXPECTED_PODS)
    lifecycle: LifecycleAction | None = None
    uncordon: bool = False
    leaving: bool = False
    notice: Literal["interruption", "rebalance", "scheduled"] | None = None
    planned_at: str | None = Field(default=None, max_length=40)
    claim_minutes: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    claim_until: str | None = Field(default=None, max_length=40)
    unready_minutes: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    not_before: str | None = Field(default=None, max_length=40)
    deadline_by: str | None = Field(default=None, max_length=40)
    scheduled_start: str | None = Field(default=None, max_length=40)
    event_code: EventCode | None = None


class Drain(BaseModel):
    """The validated drain every later step receives: the request plus what validation found."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    cluster: str
    node: str
    node_uid: str
    reason: str
    deadline_seconds: int
    poll_seconds: int
    terminate: bool
    force: bool
    dry_run: bool
    instance_id: str
    # None: the instance is in no group (a Spot warning's drain of one its group detached since the
    # snapshot: spillway.act.drain._drains_outside_group); such a drain never terminates
    group: str | None
    region: str
    plan_id: str | None = None
    # the time of the plan that claimed the node (DrainRequest.planned_at, RFC 3339 in whole seconds):
    # a drain that ends keeping its node names it, so later plans free exactly that claim
    # (spillway.act.drain.Drainer._note_ended). None: no claim (a drain by hand, drain_claim_minutes 0),
    # or a drain validated before the field
    planned_at: str | None = None
    started_at: str
    deadline_at: str
    consolidation: bool = False
    pods: tuple[str, ...] = ()  # a consolidation's pods to move ("<namespace>/<name>")
    # the controllers of named pods that tolerate the drain, by pod: their successors count as named
    # (DrainRequest.controllers); none in a drain validated before the field
    controllers: dict[str, PodController] = Field(default_factory=dict)
    # the named pods the plan moves at a cost: each evicted with its whole grace or the drain gives up
    # (DrainRequest.whole_grace); none in a drain validated before the field, which cuts every grace
    whole_grace: tuple[str, ...] = ()
    lifecycle: LifecycleAction | None = None  # the group is terminating it: complete, never terminate
    uncordon: bool = False  # once empty: uncordon and keep the node (never with terminate or lifecycle)
    leaving: bool = False  # the instance goes whatever the drain does (DrainRequest.leaving, lifecycle)
    # the notice that asked for the drain (DrainRequest.notice): only a Spot warning's instance surely
    # goes, in a group or out of it (a scheduled reboot or stop leaves it running)
    notice: Literal["interruption", "rebalance", "scheduled"] | None = None
    # the node is dead once NotReady this long: its pods that never started go with it (DrainRequest)
    unready_minutes: float | None = None
    # The drain's own name, which its cordon carries so that it undoes only its own: its DrainNode
    # execution's name. "" for a drain validated before drains had names (an execution in flight then).
    name: str = ""
    # A scheduled change's drain, its wait over: the EC2 scheduled event (InstanceEventId) it follows, as
    # DescribeInstanceStatus listed it then (spillway.act.drain.follow_change). A forced one's cordon names
    # it, and of two forced drains following one event the one whose cordon is not on the node stops
    # (spillway.act.drain._taken_over_by). None: EC2 was not read (any other drain, or EC2 unreadable).
    scheduled_event: str | None = None

    @property
    def deadline(self) -> datetime:
        return parse_iso(self.deadline_at)


@dataclass(frozen=True, slots=True)
class Placement:
    """Where an instance is: its Auto Scaling group and its lifecycle state there, and its zone and
    instance type (DescribeAutoScalingInstances' AutoScalingInstanceDetails: AvailabilityZone is always
    given, InstanceType may be absent; "" when unknown)."""

    instance_id: str
    group: str
    lifecycle_state: str
    zone: str = ""
    instance_type: str = ""


# What EC2 puts before a scheduled event's Description once it is over (DescribeInstanceStatus,
# InstanceStatusEvent: "[Completed]" for up to a week after the event; "[Canceled]" for one AWS called off).
EVENT_OVER_PREFIXES = ("[Completed]", "[Canceled]")


@dataclass(frozen=True, slots=True)
class ScheduledEvent:
    """One of an instance's scheduled events as EC2 describes it (DescribeInstanceStatus,
    ``InstanceStatuses[].Events[]``, an InstanceStatusEvent): ``code`` instance-reboot | system-reboot |
    system-maintenance | instance-retirement | instance-stop; ``not_before`` its start (None when EC2
    gives none); ``live`` unless EC2 marks it completed or canceled."""

    event_id: str
    code: str
    description: str
    not_before: datetime | None
    not_after: datetime | None = None
    deadline: datetime | None = None  # NotBeforeDeadline: the latest start the customer may move it to

    @property
    def live(self) -> bool:
        return not self.description.startswith(EVENT_OVER_PREFIXES)


def scheduled_event(raw: Mapping[str, Any]) -> ScheduledEvent:
    """An InstanceStatusEvent as boto3 returns it (timestamps as datetimes)."""

    def moment(key: str) -> datetime | None:
        value = raw.get(key)
        return value if isinstance(value, datetime) else None

    return ScheduledEvent(
        event_id=str(raw.get("InstanceEventId") or ""),
        code=str(raw.get("Code") or ""),
        description=str(raw.get("Description") or ""),
        not_before=moment("NotBefore"),
        not_after=moment("NotAfter"),
        deadline=moment("NotBeforeDeadline"),
    )


# The Auto Scaling lifecycle states in which a terminate hook holds an instance (AutoScalingInstanceDetails,
# LifecycleState): in service, and in a warm pool (an instance the pool terminates; its lifecycle event's
# Origin is WarmPool). A Warmed:Running pool instance may run a kubelet, its Node taking pods. And an
# instance a scale-in returns to a warm pool that reuses instances (InstanceReusePolicy.ReuseOnScaleIn):
# it is not terminated, yet the EC2_INSTANCE_TERMINATING hook holds it, in Warmed:Pending:Wait (EC2 Auto
# Scaling User Guide, "Use lifecycle hooks with a warm pool"), its pods still on it until the hook lets go.
HOOK_WAIT_STATES = frozenset({"Terminating:Wait", "Warmed:Terminating:Wait", "Warmed:Pending:Wait"})


@dataclass(frozen=True, slots=True)
class LifecycleHook:
    """A group's lifecycle hook (DescribeLifecycleHooks), reduced to what a drain needs."""

    name: str
    transition: str  # autoscaling:EC2_INSTANCE_TERMINATING | autoscaling:EC2_INSTANCE_LAUNCHING
    heartbeat_timeout: int
    global_timeout: int
    default_result: str

    @property
    def terminating(self) -> bool:
        return self.transition == "autoscaling:EC2_INSTANCE_TERMINATING"


def lifecycle_hook(doc: Mapping[str, Any]) -> LifecycleHook:
    """One hook of DescribeLifecycleHooks' ``LifecycleHooks`` (AWS's defaults for what it leaves out:
    HeartbeatTimeout 3600 s, GlobalTimeout the smaller of 48 h and 100 heartbeats, ABANDON)."""
    heartbeat = int(doc.get("HeartbeatTimeout") or 3600)
    return LifecycleHook(
        name=str(doc.get("LifecycleHookName") or ""),
        transition=str(doc.get("LifecycleTransition") or ""),
        heartbeat_timeout=heartbeat,
        global_timeout=int(doc.get("GlobalTimeout") or min(172_800, 100 * heartbeat)),
        default_result=str(doc.get("DefaultResult") or "ABANDON"),
    )


def drain_hooks(hooks: Iterable[LifecycleHook], owned: Collection[str]) -> list[str]:
    """Of a group's lifecycle hooks, the terminate hooks that are Spillway's (``owned``:
    LIFECYCLE_HOOK_NAMES), sorted: :attr:`spillway.model.aws.AutoScalingGroup.DrainHooks`, as observe
    and ``spillway plan --lifecycle-hooks`` give it."""
    return sorted(h.name for h in hooks if h.terminating and h.name in owned)


Action = Literal["ignore", "evict", "wait", "keep"]


@dataclass(frozen=True, slots=True)
class PodVerdict:
    """What a drain does with one pod: ``ignore`` it (it does not keep the node busy), ``evict`` it,
    ``wait`` for it (already terminating), or ``keep`` it (protected; it keeps the node busy).
    ``grace``: the pod's ``terminationGracePeriodSeconds`` (the API's default, 30, when unset), which
    its eviction gives it at most (:meth:`spillway.act.drain.Drainer._evict_round`). ``grace_ends``: a
    terminating pod's ``deletionTimestamp``, when its grace period runs out. ``uid``: the pod's
    ``metadata.uid`` as listed, which its eviction names, so that another pod made under its name since
    is not evicted in its place."""

    pod: str
    action: Action
    reason: str
    priority: int = 0
    grace: int = DEFAULT_GRACE_SECONDS
    grace_ends: datetime | None = None
    uid: str = ""
