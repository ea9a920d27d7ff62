"""EC2 interruption notices → drains: what the interrupt function does with each SQS message.

The messages are EventBridge events (the queue's rules forward them unchanged), one per message:

=======================  ==============================================  ==================================
source / detail-type     what it means                                   what Spillway does
=======================  ==============================================  ==================================
``aws.ec2`` EC2 Spot     EC2 reclaims the instance two minutes after     drain now, ``force``, deadline
Instance Interruption    the event's ``time``                            ``interruption_deadline_seconds``
Warning                                                                  (90) counted from that time; back
                                                                         off the Spot pool of the instance
                                                                         type in its zone
``aws.ec2`` EC2 Instance the instance is at elevated risk of             drain, no ``force``, deadline
Rebalance Recommendation interruption (no deadline from AWS)             ``rebalance_deadline_seconds``;
                                                                         no terminate when its group has
                                                                         Capacity Rebalancing (the group
                                                                         replaces and terminates it; so
                                                                         for a Spot warning too); a node
                                                                         annotated ``scale-down-disabled``
                                                                         or ``do-not-disrupt``, or one
                                                                         protected from scale-in that it
                                                                         would terminate, is left alone
                                                                         (the drain ends ``cancelled``)
``aws.health`` AWS       a scheduled change (retirement, reboot,         drain with a deadline before the
Health Event (EC2,       maintenance) of the ``affectedEntities``        change's ``startTime`` (``force``
scheduledChange)                                                         when it is within a day, else a
                                                                         protected node is left alone as
                                                                         for a rebalance recommendation,
                                                                         and a forced drain that waits
                                                                         for the last day is started
                                                                         too: :func:`forced_later`);
                                                                         none once its ``statusCode`` is
                                                                         ``closed`` (done, or cancelled)
``aws.ec2`` EC2 Instance the instance is ``stopping``, ``stopped``,      nothing left to drain: logged and
State-change             ``shutting-down`` or ``terminated``             counted when it is still a Node
Notification
``aws.autoscaling`` EC2  the group is terminating the instance and a     drain, ``force``, no terminate,
Instance-terminate       terminate lifecycle hook holds it in            deadline inside the hook's
Lifecycle Action         ``Terminating:Wait``                            HeartbeatTimeout; the drain ends
                                                                         with CompleteLifecycleAction
                                                                         CONTINUE; when a Spillway drain
                                                                         cordoned the node, only while
                                                                         it still runs pods to evict
                                                                         (else no drain: the action is
                                                                         completed CONTINUE at once);
                                                                         an instance with no Node: no
                                                                         drain, completed at once
=======================  ==============================================  ==================================

An instance is ours when the latest snapshot has a Node whose ``spec.providerID`` names it; any other
instance is ignored, but a notice that asks for a drain (a Spot warning, a rebalance recommendation, a
scheduled change) of one AWS puts in a group tagged for the cluster is tried again (its Node may have
joined since the snapshot) while the drain still has time, at most ``JOIN_RETRY_SECONDS`` after the
notice. A terminate lifecycle action of one of Spillway's hooks for an instance of a group tagged for
the cluster that no Node backs (it never joined, or its Node is gone) has nothing to drain: it is
completed CONTINUE at once (``no_node``), but only on a snapshot taken after the notice (see
:meth:`Interrupter._no_node`). A Node of
no group the snapshot knows is drained only when AWS says its instance is in an Auto Scaling group
tagged for the cluster (one launched since the snapshot); another (a standalone instance, a group not
tagged for Spillway, a Karpenter node) is ``not_managed``: its drain would be refused, and its failure
would raise the drain alarm for nothing Spillway owns. A lifecycle action is judged first by the hook it
names: only Spillway's (``InterruptSettings.lifecycle_hooks``, LIFECYCLE_HOOK_NAMES) are acted on; each
hook of a group sends its own event and CONTINUE ends that hook's wait, so another team's hook on the
same group is ``not_our_hook``, neither drained for nor completed. Then by the group it names, which
is the one terminating the instance.

A drain is one DrainNode execution named after the notice and the instance
(``interrupt-i-0abc…``), so a message delivered twice starts nothing new (a scheduled change more than
a day away starts two: the drain without force now, and the forced one of its last day). Its request names the
notice's kind (``notice``), and the drain's own validation judges the node as it is when the drain
starts: a check that refuses it only for what the node is now (its operator protected it, which a drain
without force respects; it is gone or replaced; it is in another group, unless that is one of the
cluster's and the drain is forced; it is in no group, unless its group
detached it since the snapshot and the notice is a Spot warning; its group terminates it, for a drain
without force) cancels the drain,
touching nothing: the execution succeeds ``cancelled``, DrainOutcome counts it, and the Node gets a
``SpillwayDrainSkipped`` Event saying why (:func:`spillway.act.drain._left_alone`). No alarm goes off for
a node left alone on purpose; the Spot warning's drain, forced, still drains it. This function does not
read the annotations itself: its snapshot may be up to a minute old, the drain reads the Node.

Messages are untrusted input. :func:`parse_notice` tells two kinds of message apart, each error naming the
field. :class:`IrrelevantNotice`: an event of a kind Spillway does not act on (another source or
detail-type, a Health event of another service or category or one that is over, a lifecycle transition
other than terminate); nothing was missed, so the handler counts it and lets it go. :class:`MalformedNotice`:
a message that should be a notice Spillway acts on (a Spot warning, rebalance recommendation, state
change, Health event or lifecycle action, or a body that is not an event at all: only Spillway's rules
may send to the queue) whose fields do not parse. It never succeeds, but it may be a real warning
Spillway failed to read, so the handler reports it as failed: after the queue's maxReceiveCount receives
it sits in the dead-letter queue, which is alarmed. Anything else that fails (the snapshot table, Step
Functions, the state table, a notice asking for a drain of an instance of a managed group the snapshot
does not show yet) raises and the message is retried (then DLQ). A Spot warning's drain is started
before its back-off is written: a state table that fails the put fails the record, and the retry finds
the drain started (a duplicate) and writes the back-off. A Spot warning of an instance of a
managed group that no Node names backs off its Spot pool all the same (:meth:`Interrupter._back_off_unobserved`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from spillway.act.backoff import Pool, back_off
from spillway.act.deadline import NO_DEADLINE, Deadline
from spillway.errors import AsgNotFound, InputError, LifecycleActionNotFound, NodeNotObserved
from spillway.model.act import ExecutionRequest, StartedExecution
from spillway.model.aws import INSTANCE_ID_FORM, REGION_FORM, RFC3339_FORM, AutoScalingGroup
from spillway.model.cluster import NodeInfo
from spillway.model.drain import (
    DEFAULT_LIFECYCLE_HOOKS,
    HOOK_WAIT_STATES,
    MAX_DEADLINE_SECONDS,
    MAX_WAIT_SECONDS,
    LifecycleHook,
    Placement,
)
from spillway.model.history import MAX_ROUNDS
from spillway.model.k8s import GROUP_REPLACED_PREFIXES, GROUP_REPLACES
from spillway.model.nodegroup import INSTANCE_TYPE_LABEL, NodeGroup, is_managed
from spillway.model.snapshot import Snapshot
from spillway.model.utc import aware
from spillway.planner.disruption import MOVABLE, assess
from spillway.ports import Cloud, Ledger, Snapshots, Workflows

Kind = Literal["interruption", "rebalance", "scheduled", "state_change", "lifecycle"]

# (source, detail-type) → kind
KINDS: dict[tuple[str, str], Kind] = {
    ("aws.ec2", "EC2 Spot Instance Interruption Warning"): "interruption",
    ("aws.ec2", "EC2 Instance Rebalance Recommendation"): "rebalance",
    ("aws.ec2", "EC2 Instance State-change Notification"): "state_change",
    ("aws.health", "AWS Health Event"): "scheduled",
    ("aws.autoscaling", "EC2 Instance-terminate Lifecycle Action"): "lifecycle",
}
# States in which the instance's pods are gone with it (aws-node-termination-handler drains on the same
# four: a stopped instance's Node is as empty as a terminated one's)
GONE_STATES = frozenset({"stopping", "stopped", "shutting-down", "terminated"})
# A snapshot at most this old at a lifecycle notice's time may complete the action on a node it shows
# emptied by a Spillway drain (own_drain): observe writes one every 20 s by default; an older one
# leaves the node to a lifecycle drain, which reads the cluster as it is
OWN_DRAIN_SNAPSHOT_SECONDS = 60
# A notice that asks for a drain (Spot warning, rebalance recommendation, scheduled change) of an
# instance of a group tagged for the cluster that no Node of the snapshot names yet (it joined after the
# snapshot, which observe replaces every 20 s) is tried again at most this long after the notice's time,
# and less when the drain it asks for would have no time left (a Spot warning's deadline, a change's
# start). It must end within the queue's redrive (maxReceiveCount 10 receives, VisibilityTimeout 40 s apart): the try
# that drops it comes before the dead-letter queue, with receives to spare for passing failures.
JOIN_RETRY_SECONDS = 240
# The calls a read of the latest snapshot may make: its Query, and the Query of its chunks
SNAPSHOT_CALLS = 2
ZONE_LABEL = "topology.kubernetes.io/zone"
# Matched whole (fullmatch) and in ASCII: ``$`` also matches before a trailing newline and ``\d`` any
# Unicode digit, so "us-east-1\n" or one with an Arabic-Indic digit passed as a region and the notice was dropped as
# another region's, silently, instead of reaching the dead-letter queue as malformed.
_INSTANCE_ID = re.compile(INSTANCE_ID_FORM)
_TOKEN = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_REGION = re.compile(REGION_FORM)
NAME_PREFIX: dict[Kind, str] = {
    "interruption": GROUP_REPLACED_PREFIXES[0],
    "rebalance": GROUP_REPLACED_PREFIXES[1],
    "scheduled": "scheduled",
    "lifecycle": "lifecycle",
}


class MalformedNotice(InputError):
    """A notice of a kind Spillway acts on (or a body that is not an event at all) whose fields do not
    parse. No retry fixes it, but it may be a real warning Spillway failed to read: reported as a failed
    record, so it reaches the (alarmed) dead-letter queue instead of vanishing."""


class IrrelevantNotice(InputError):
    """An event Spillway does not act on, now or ever: another kind, or a Health event that is over.
    Nothing was missed: dropped and counted, never retried."""


@dataclass(frozen=True, slots=True)
class Notice:
    """One EventBridge event, reduced to what a drain needs."""

    kind: Kind
    event_id: str
    region: str
    time: datetime
    instance_ids: tuple[str, ...]
    start: datetime | None = None  # a scheduled change's startTime
    state: str = ""  # a state-change notification's new state
    group: str = ""  # a lifecycle action's group
    hook: str = ""  # a lifecycle action's hook
    code: str = ""  # a health event's eventTypeCode (or its eventArn, which names it)
    event_type: str = ""  # a health event's eventTypeCode (AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED...)
    token: str = ""  # a lifecycle action's LifecycleActionToken


@dataclass(frozen=True, slots=True)
class InterruptSettings:
    interruption_deadline_seconds: int = 90
    rebalance_deadline_seconds: int = 600
    scheduled_margin_seconds: int = 300
    poll_seconds: int = 5
    backoff_minutes: float = 15.0
    lifecycle_deadline_seconds: int = 600
    lifecycle_margin_seconds: int = 30
    # the terminate hooks Spillway owns (LIFECYCLE_HOOK_NAMES): it drains for and completes only these
    lifecycle_hooks: tuple[str, ...] = DEFAULT_LIFECYCLE_HOOKS


# --- parsing ---------------------------------------------------------------------------------------


def _text(doc: Mapping[str, Any], key: str, where: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not value:
        raise MalformedNotice(f"must be a non-empty string, got {json.dumps(value)[:80]}", field=where)
    return value


def _instance(value: Any, where: str) -> str:
    if not isinstance(value, str) or not _INSTANCE_ID.fullmatch(value):
        raise MalformedNotice(f"not an instance id: {json.dumps(value)[:80]}", field=where)
    return value


# AWS Health's EventBridge events write ``detail.startTime`` (endTime, lastUpdatedTime alike) as an
# HTTP date in GMT, "Wed, 16 Aug 2023 23:18:51 GMT" (AWS Health user guide, "Reference: AWS Health
# events Amazon EventBridge schema", its sample payloads; aws-node-termination-handler's scheduled-change
# example): RFC 7231's IMF-fixdate, two-digit day, four-digit year, the zone always GMT. The Health API
# returns epoch seconds instead, which no EventBridge event carries. The day name is not checked against
# the date, as Go's time.Parse does not check it: AWS-written samples carry mismatched ones.
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_HEALTH_TIME = re.compile(
    r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), ([0-9]{2}) (" + "|".join(_MONTHS) + r") ([0-9]{4}) "
    r"([0-9]{2}):([0-9]{2}):([0-9]{2}) GMT"
)


def _health_time(value: Any, where: str) -> datetime:
    """An AWS Health time ("Wed, 04 Mar 2026 09:00:00 GMT"), in UTC; any other form is malformed: a
    date alone or a time without its zone was read as UTC, moving a drain's deadline by hours."""
    found = _HEALTH_TIME.fullmatch(value) if isinstance(value, str) else None
    if found is not None:
        day, month, year, hour, minute, second = found.groups()
        try:
            return datetime(
                int(year), _MONTHS.index(month) + 1, int(day), int(hour), int(minute), int(second), tzinfo=UTC
            )
        except ValueError:  # a 31 February, a 24th hour, year 0
            pass
    raise MalformedNotice(
        f"not an AWS Health time in GMT such as 'Wed, 04 Mar 2026 09:00:00 GMT': {json.dumps(value)[:80]}",
        field=where,
    )


# EventBridge's ``time``: RFC 3339 (PutEvents' Time; AWS Health's EventBridge schema writes it
# yyyy-mm-ddThh:mm:ssZ), a date and a time with its zone, in ASCII digits.
_RFC3339 = re.compile(RFC3339_FORM)
# How far an event's ``time`` may be ahead of the function's clock: both are NTP-synced, and AWS
# itself refuses a signed request more than 5 minutes off its clock (SigV4, RequestTimeTooSkewed). A
# later time is no notice EC2 sent: it would stretch a Spot warning's drain and its back-off.
MAX_CLOCK_SKEW_SECONDS = 300


def _event_time(value: Any, now: datetime | None) -> datetime:
    """The event's ``time``: RFC 3339 with its zone, and not after ``now`` (plus the clock skew)."""
    if not isinstance(value, str) or not _RFC3339.fullmatch(value):
        raise MalformedNotice(
            f"not an RFC 3339 time with its zone such as 2026-03-02T09:30:00Z: {json.dumps(value)[:80]}",
            field="time",
        )
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:  # a month 13, a 25th hour
        raise MalformedNotice(f"not a time: {json.dumps(value)[:80]}", field="time") from None
    if now is not None and (parsed - now).total_seconds() > MAX_CLOCK_SKEW_SECONDS:
        raise MalformedNotice(
            f"{value} is more than {MAX_CLOCK_SKEW_SECONDS} s after this function's clock "
            f"({now.isoformat()}): no event comes from the future",
            field="time",
        )
    return parsed


def parse_notice(body: Any, now: datetime | None = None) -> Notice:
    """An SQS message body (the EventBridge event as JSON) → :class:`Notice`; :class:`IrrelevantNotice`
    for an event Spillway does not act on, :class:`MalformedNotice` for one it cannot read. ``now``:
    the function's clock, which the event's ``time`` may not be ahead of (:func:`_event_time`)."""
    try:
        event = json.loads(body) if isinstance(body, str | bytes) else body
    except ValueError:
        raise MalformedNotice("not JSON", field="body") from None
    if not isinstance(event, Mapping):
        raise MalformedNotice("not a JSON object", field="body")
    source, detail_type = _text(event, "source", "source"), _text(event, "detail-type", "detail-type")
    kind = KINDS.get((source, detail_type))
    if kind is None:
        raise IrrelevantNotice(
            f"{source} / {detail_type!r} is not a notice Spillway handles", field="detail-type"
        )
    detail = event.get("detail")
    if not isinstance(detail, Mapping):
        raise MalformedNotice("must be an object", field="detail")
    region = _text(event, "region", "region")
    if not _REGION.fullmatch(region):
        raise MalformedNotice(f"not a region: {region[:40]!r}", field="region")
    base = {
        "kind": kind,
        "event_id": _text(event, "id", "id"),
        "region": region,
        "time": _event_time(event.get("time"), now),
    }
    return Notice(**{**base, **_PARSE_DETAIL[kind](detail)})


def _ec2_detail(detail: Mapping[str, Any]) -> dict[str, Any]:
    return {"instance_ids": (_instance(detail.get("instance-id"), "detail.instance-id"),)}


def _state_detail(detail: Mapping[str, Any]) -> dict[str, Any]:
    return {**_ec2_detail(detail), "state": _text(detail, "state", "detail.state")}


def _health_detail(detail: Mapping[str, Any]) -> dict[str, Any]:
    service = _text(detail, "service", "detail.service")
    category = _text(detail, "eventTypeCategory", "detail.eventTypeCategory")
    if (service, category) != ("EC2", "scheduledChange"):
        raise IrrelevantNotice(
            f"only EC2 scheduledChange events are handled, got {service[:40]!r}/{category[:40]!r}",
            field="detail.eventTypeCategory",
        )
    if detail.get("statusCode") == "closed":
        # AWS Health sends an event again as closed once the change is done (or cancelled): draining
        # then, with its startTime past, would force-drain a node that came through it
        raise IrrelevantNotice("the scheduled change is over (closed)", field="detail.statusCode")
    entities = detail.get("affectedEntities")
    if not isinstance(entities, list) or not entities:
        raise MalformedNotice("must be a non-empty list", field="detail.affectedEntities")
    ids = []
    for i, entity in enumerate(entities):
        value = entity.get("entityValue") if isinstance(entity, Mapping) else None
        if isinstance(value, str) and value.startswith("i-"):
            ids.append(_instance(value, f"detail.affectedEntities[{i}].entityValue"))
    if not ids:  # a Dedicated Host's, say: no instance of it is a Node to drain
        raise IrrelevantNotice("names no EC2 instance", field="detail.affectedEntities")
    code = detail.get("eventArn") or detail.get("eventTypeCode")
    event_type = detail.get("eventTypeCode")
    return {
        **_event_region(detail),
        "event_type": event_type if isinstance(event_type, str) else "",
        "instance_ids": tuple(dict.fromkeys(ids)),
        "start": _health_time(detail.get("startTime"), "detail.startTime"),
        "code": _text({"code": code}, "code", "detail.eventArn"),
    }


def _event_region(detail: Mapping[str, Any]) -> dict[str, Any]:
    """The Region a Health event is about: ``detail.eventRegion``. The event's own ``region`` is the
    Region it was delivered to (AWS Health user guide, "Reference: AWS Health events Amazon EventBridge
    schema"), and AWS Health delivers every event to its Region and to a backup Region (US West
    (Oregon), which US East (N. Virginia) backs up: "Creating EventBridge rules for AWS Region
    coverage"), so a backup copy read by ``region`` named the instance in the wrong Region and was
    dropped. Without ``eventRegion`` the event's ``region`` stands."""
    if "eventRegion" not in detail:
        return {}
    value = detail["eventRegion"]
    if not isinstance(value, str) or not _REGION.fullmatch(value):
        raise MalformedNotice(f"not a region: {json.dumps(value)[:40]}", field="detail.eventRegion")
    return {"region": value}


def _lifecycle_detail(detail: Mapping[str, Any]) -> dict[str, Any]:
    transition = _text(detail, "LifecycleTransition", "detail.LifecycleTransition")
    if transition != "autoscaling:EC2_INSTANCE_TERMINATING":
        raise IrrelevantNotice(
            f"not a terminate transition: {transition[:80]!r}", field="detail.LifecycleTransition"
        )
    return {
        "instance_ids": (_instance(detail.get("EC2InstanceId"), "detail.EC2InstanceId"),),
        "group": _text(detail, "AutoScalingGroupName", "detail.AutoScalingGroupName"),
        "hook": _text(detail, "LifecycleHookName", "detail.LifecycleHookName"),
        "token": _token(detail.get("LifecycleActionToken")),
    }


def _token(value: Any) -> str:
    if not isinstance(value, str) or not _TOKEN.fullmatch(value):
        raise MalformedNotice(
            f"not a lifecycle action token (a UUID): {json.dumps(value)[:80]}",
            field="detail.LifecycleActionToken",
        )
    return value


_PARSE_DETAIL: dict[Kind, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
    "interruption": _ec2_detail,
    "rebalance": _ec2_detail,
    "state_change": _state_detail,
    "scheduled": _health_detail,
    "lifecycle": _lifecycle_detail,
}


# --- the drain a notice asks for -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DrainPlan:
    """How to drain for a notice: deadline (seconds from its start), poll, force; ``not_before``: when
    the drain starts (None: now)."""

    deadline_seconds: int
    poll_seconds: int
    force: bool
    reason: str
    not_before: datetime | None = None


def drain_plan(notice: Notice, now: datetime, settings: InterruptSettings) -> DrainPlan | None:
    """The drain ``notice`` calls for, or None (state changes and lifecycle actions drain nothing)."""
    if notice.kind == "interruption":
        # The two minutes run from the event's time, not from when the message reached us.
        left = settings.interruption_deadline_seconds - (now - notice.time).total_seconds()
        return _plan(left, settings, force=True, reason=f"spot interruption warning {notice.event_id}")
    if notice.kind == "rebalance":
        return _plan(
            settings.rebalance_deadline_seconds,
            settings,
            force=False,
            reason=f"rebalance recommendation {notice.event_id}",
        )
    if notice.kind == "scheduled" and notice.start is not None:
        left = (notice.start - now).total_seconds() - settings.scheduled_margin_seconds
        # A change more than a day out: drain without force (a timeout undoes the cordon, and the next
        # notice or a person tries again); within a day the instance goes whatever the pods say.
        return _plan(
            left, settings, force=left <= MAX_DEADLINE_SECONDS, reason=f"scheduled change {notice.code}"[:256]
        )
    return None


def forced_later(notice: Notice, now: datetime, settings: InterruptSettings) -> DrainPlan | None:
    """The forced drain of a scheduled change more than a day away, started with the notice: it waits
    (``not_before``) until a day before the change's start less the margin, and its deadline is that
    end. None for any other notice, and for a change within a day (:func:`drain_plan` forces it now).

    The drain without force that the notice starts now is advice: a PodDisruptionBudget that holds it
    for a day times it out and gives the node back, and AWS Health need not send the event again in
    its last day. EC2 stops or terminates the instance at the start whatever its pods are (EC2 user
    guide, "Scheduled events for your instances"), so this drain evicts with force at the end, as a
    Spot warning's does. A change further than the drain may wait (:data:`MAX_WAIT_SECONDS`) gets
    none: None."""
    if notice.kind != "scheduled" or notice.start is None:
        return None
    end = notice.start - timedelta(seconds=settings.scheduled_margin_seconds)
    begin = end - timedelta(seconds=MAX_DEADLINE_SECONDS)
    if begin <= now or (begin - now).total_seconds() > MAX_WAIT_SECONDS:
        return None
    plan = _plan(MAX_DEADLINE_SECONDS, settings, force=True, reason=f"scheduled change {notice.code}"[:256])
    return replace(plan, not_before=begin)


def _plan(seconds: float, settings: InterruptSettings, *, force: bool, reason: str) -> DrainPlan:
    deadline = int(min(max(seconds, 0), MAX_DEADLINE_SECONDS))
    # The drain refuses more than MAX_ROUNDS eviction rounds, and 0 s polls for long deadlines.
    poll = max(settings.poll_seconds, math.ceil(deadline / MAX_ROUNDS), 1)
    return DrainPlan(deadline_seconds=deadline, poll_seconds=poll, force=force, reason=reason)


def lifecycle_plan(
    notice: Notice, hook: LifecycleHook, now: datetime, settings: InterruptSettings
) -> DrainPlan:
    """A lifecycle action's drain: it must end (and complete the action) inside what is left of the
    hook's HeartbeatTimeout, counted from the event's time, less a margin for the last steps (the drain
    also records heartbeats while it evicts); at most ``lifecycle_deadline_seconds``. ``force``: the
    group terminates the instance whatever the pods say."""
    left = hook.heartbeat_timeout - (now - notice.time).total_seconds() - settings.lifecycle_margin_seconds
    plan = _plan(
        min(left, settings.lifecycle_deadline_seconds),
        settings,
        force=True,
        reason=f"{notice.group} is terminating it (lifecycle hook {notice.hook})"[:256],
    )
    # a heartbeat goes with an eviction round: at least one round every third of the HeartbeatTimeout,
    # as the drain requires (spillway.act.drain._heartbeat_refusal), whatever INTERRUPT_POLL_SECONDS says
    return replace(plan, poll_seconds=max(1, min(plan.poll_seconds, hook.heartbeat_timeout // 3)))


def execution_name(notice: Notice, instance_id: str, *, forced: bool = False) -> str:
    """Deterministic: the same notice for the same instance always has the same name (≤ 80 chars). A
    scheduled change's forced drain (within a day of it) has a name of its own: AWS Health sends every
    update of an event under the same ARN, and the update that comes within the day must start the
    forced drain the first notice's drain without force did not replace; it is named after the change's
    start as well, so that an update moving the start has a forced drain of its own."""
    prefix = NAME_PREFIX.get(notice.kind, notice.kind)
    if notice.kind == "scheduled" and forced:
        # of the change's start too: an update that moves the start starts a forced drain for it (the
        # one waiting for the old start follows the move too, and of the two, both following one EC2
        # event, only one drains: spillway.act.drain._taken_over_by)
        start = notice.start.isoformat() if notice.start is not None else ""
        digest = hashlib.sha256(f"{notice.code} {start}".encode()).hexdigest()[:10]
        return f"{prefix}-{instance_id}-{digest}-force"
    if notice.kind in ("scheduled", "lifecycle"):
        digest = hashlib.sha256((notice.code or notice.token).encode()).hexdigest()[:10]
        return f"{prefix}-{instance_id}-{digest}"
    return f"{prefix}-{instance_id}"


# AWS Health's EC2 scheduled-change event types whose EC2 scheduled event (DescribeInstanceStatus,
# InstanceStatusEvent.Code) is plain from their names; another type's drain follows whichever event of
# the instance EC2 still lists (spillway.act.drain.follow_change), so a type missing here only loses the
# choice between two events of one instance. A retirement comes under two types: an instance-store
# backed instance's, and an EBS-backed one's (PERSISTENT: AWS Health user guide, "Running operations on
# EC2 instances automatically in response to events in AWS Health"), which EC2 stops rather than
# terminates; EC2 lists both as instance-retirement.
EC2_EVENT_CODES = {
    "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED": "instance-retirement",
    "AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED": "instance-retirement",
    "AWS_EC2_INSTANCE_STOP_SCHEDULED": "instance-stop",
    "AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED": "instance-reboot",
    "AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED": "system-reboot",
}


def _change(notice: Notice) -> dict[str, str]:
    """What names a scheduled change to its forced drain, the one that waits for its last day or the one
    a notice within that day starts: its start as AWS Health announced it and, when the event type says,
    EC2's event code. When it starts (its wait over) the drain reads the instance's scheduled events and
    follows what EC2 says then: a change canceled or completed meanwhile cancels it, a start moved later
    makes it wait again (spillway.act.drain.follow_change), and its cordon names the EC2 event it
    follows, so that of two forced drains of one event only one drains (spillway.act.drain._taken_over_by).
    Empty for any other notice."""
    if notice.kind != "scheduled" or notice.start is None:
        return {}
    change = {"scheduled_start": _utc(notice.start)}
    code = EC2_EVENT_CODES.get(notice.event_type)
    return {**change, "event_code": code} if code else change


def _utc(moment: datetime) -> str:
    """``2026-03-03T08:55:00Z``: whole seconds in UTC, the form Step Functions' Wait state takes."""
    return moment.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


# --- mapping to the cluster ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    """A node of the cluster backed by the notice's instance, and where it is."""

    node: NodeInfo
    instance_id: str
    region: str
    zone: str
    instance_type: str
    group: NodeGroup | None


def _zone(node: NodeInfo) -> str:
    provider = (node.provider_id or "").removeprefix("aws://").strip("/").split("/")
    return provider[0] if len(provider) == 2 and provider[0] else node.labels.get(ZONE_LABEL, "")


def find_target(snapshot: Snapshot, instance_id: str, region: str) -> Target | None:
    """The Node whose providerID names ``instance_id`` (in ``region``), or None: not our node."""
    node = next((n for n in snapshot.cluster.nodes if n.instance_id == instance_id), None)
    if node is None:
        return None
    zone = _zone(node)
    if zone and not zone.startswith(region):
        return None
    group = next((g for g in snapshot.groups if instance_id in g.instance_ids), None)
    itype = node.labels.get(INSTANCE_TYPE_LABEL) or (group.instance_type if group else None) or ""
    return Target(node, instance_id, region, zone, itype, group)


def backoff_groups(snapshot: Snapshot, region: str, zone: str, instance_type: str) -> list[NodeGroup]:
    """The groups an interruption of an instance of ``instance_type`` in ``zone`` backs off whole: those
    in its region whose next launch is Spot (:attr:`NodeGroup.spot`) of that type only, in that zone
    only. Others (more zones or types) are covered by the Spot pool's back-off, which the planner weighs
    per group; an on-demand group of the type in the zone is not touched: Spot capacity taken back says
    nothing of on-demand capacity."""
    if not instance_type or not zone:
        return []
    return [
        g
        for g in snapshot.groups
        if g.region == region and g.spot and g.launch_types() == (instance_type,) and g.zones == (zone,)
    ]


def _backs_off(notice: Notice, extra: Mapping[str, Any]) -> bool:
    """Whether the notice backs off the Spot pool of its instance: a Spot warning always; a rebalance
    recommendation when Spillway terminates the instance (its group has no Capacity Rebalancing, which
    would replace it itself: ``terminate`` false). EC2 says such an instance is at elevated risk of
    interruption and its work is to move to instances that are not (EC2 user guide, "EC2 instance
    rebalance recommendations"): without the back-off the planner launched room for the evicted pods in
    the same pool, whose new instance could get a recommendation of its own. As long as a warning's
    back-off: it covers the recommendation's drain (REBALANCE_DEADLINE_SECONDS, 600), while its pods
    are evicted and launched for."""
    if notice.kind == "interruption":
        return True
    return notice.kind == "rebalance" and extra.get("terminate", True) is not False


# --- acting ----------------------------------------------------------------------------------------

Metric = Callable[[str, float], None]


def _no_metric(name: str, value: float) -> None:
    return None


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Interrupter:
    """Handles notices for one cluster. Build per invocation: the snapshot is read once, on first need."""

    snapshots: Snapshots
    workflows: Workflows
    ledger: Ledger
    cluster: str
    regions: Sequence[str]
    drain_node_arn: str
    cloud: Cloud | None = None  # DescribeLifecycleHooks (None: lifecycle actions are only logged)
    settings: InterruptSettings = field(default_factory=InterruptSettings)
    clock: Callable[[], datetime] = utcnow
    metric: Metric = _no_metric
    # the invocation's time (Clients.deadline): no call is started that could still run when Lambda
    # stops the function, and no record either (AwsUnavailable, unsent: reported failed, SQS brings it
    # back); a batch cut by the Timeout came back whole, each message one receive nearer the DLQ
    deadline: Deadline = NO_DEADLINE
    _snapshot: Snapshot | None = None

    def _start(self, request: ExecutionRequest) -> StartedExecution:
        """StartExecution, only in time (:attr:`deadline`)."""
        self.deadline.require(1, f"StartExecution({request.name})")
        return self.workflows.start(request)

    def _placement(self, region: str, instance_id: str) -> Placement | None:
        """DescribeAutoScalingInstances, only in time."""
        assert self.cloud is not None
        self.deadline.require(1, f"DescribeAutoScalingInstances({region}, {instance_id})")
        return self.cloud.placement(region, instance_id)

    def _describe_group(self, region: str, group: str) -> AutoScalingGroup:
        """DescribeAutoScalingGroups, only in time."""
        assert self.cloud is not None
        self.deadline.require(1, f"DescribeAutoScalingGroups({region}/{group})")
        return self.cloud.describe_group(region, group)

    def _lifecycle_hooks(self, region: str, group: str) -> list[LifecycleHook]:
        """DescribeLifecycleHooks, only in time."""
        assert self.cloud is not None
        self.deadline.require(1, f"DescribeLifecycleHooks({region}/{group})")
        return self.cloud.describe_lifecycle_hooks(region, group)

    def snapshot(self) -> Snapshot:
        if self._snapshot is None:
            from spillway.errors import SnapshotNotFound

            self.deadline.require(SNAPSHOT_CALLS, f"the latest snapshot of {self.cluster} (Query)")
            latest = self.snapshots.latest(self.cluster)
            if latest is None:  # observe has not run yet: retry later
                raise SnapshotNotFound(f"no snapshot of cluster {self.cluster!r} yet")
            self._snapshot = latest
        return self._snapshot

    def handle(self, notice: Notice) -> list[dict[str, Any]]:
        """One outcome per instance the notice names (see the module docstring). Not started without
        time for a call (:attr:`deadline`)."""
        self.deadline.require(1, f"the {notice.kind} notice {notice.event_id}")
        if notice.region not in self.regions:
            self.metric("InterruptIgnored", 1)
            return [{"instance_id": i, "outcome": "other_region"} for i in notice.instance_ids]
        if notice.kind == "lifecycle" and notice.hook not in self.settings.lifecycle_hooks:
            self.metric("InterruptIgnored", 1)
            return [self._not_our_hook(notice, i) for i in notice.instance_ids]
        return [self._one(notice, instance_id) for instance_id in notice.instance_ids]

    def _not_our_hook(self, notice: Notice, instance_id: str) -> dict[str, Any]:
        """A terminate hook Spillway does not own (another team's, on a group of ours or not): every hook
        of a group sends its own event, and CompleteLifecycleAction ends that hook's wait, so a drain
        for it, or its completion, would cut its owner's action short. Left alone, said in the log."""
        owned = ", ".join(self.settings.lifecycle_hooks)
        return {
            "instance_id": instance_id,
            "kind": notice.kind,
            "group": notice.group,
            "hook": notice.hook,
            "outcome": "not_our_hook",
            "note": f"lifecycle hook {notice.hook!r} of {notice.group} is not Spillway's (LIFECYCLE_HOOK_NAMES: "
            f"{owned}): no drain for it, its owner completes it",
        }

    def _one(self, notice: Notice, instance_id: str) -> dict[str, Any]:
        target = find_target(self.snapshot(), instance_id, notice.region)
        out: dict[str, Any] = {"instance_id": instance_id, "kind": notice.kind}
        if target is None:
            return {**out, **self._unobserved(notice, instance_id)}
        out["node"] = target.node.name
        if notice.kind == "state_change":
            # a node Spillway cordoned was drained (its own drain terminated it, or one was under way)
            gone = notice.state in GONE_STATES and not target.node.cordoned_by_spillway
            if gone:
                self.metric("InstanceGoneUndrained", 1)
            return {**out, "outcome": "gone_undrained" if gone else "ignored", "state": notice.state}
        # the group AWS puts the instance in when the snapshot knows none (launched since): read once,
        # for whether it is ours, the group the request names and its Capacity Rebalancing
        placed = self._placed_now(notice, target)
        if not self._ours(notice, target, placed):
            self.metric("InterruptIgnored", 1)
            return {**out, "outcome": "not_managed"}
        if notice.kind == "lifecycle":
            self.metric("LifecycleActionSeen", 1)
            return {**out, **self._lifecycle(notice, target)}
        plan = drain_plan(notice, self.clock(), self.settings)
        assert plan is not None
        extra = self._extra(notice, placed)
        if notice.kind in ("rebalance", "interruption") and self._group_replaces(target, placed):
            # the group launches the replacement and terminates the instance itself, through its
            # terminate lifecycle hooks: drained (cordon, evict) for that, never terminated here
            replaced = f"{plan.reason}; {GROUP_REPLACES}"
            plan = replace(plan, reason=replaced[:256])
            extra["terminate"], out["group_replaces"] = False, True
        started = self._start(self._request(notice, target, plan, **extra))
        self.metric("InterruptDrainsStarted" if started.started else "InterruptDuplicates", 1)
        out.update(self._force_later(notice, target, extra))  # a scheduled change's last day
        if _backs_off(notice, extra):
            # after the drain, which must not wait for it: a back-off that fails fails the record, and
            # its retry (the drain then a duplicate) writes it
            out["backed_off"] = self._back_off(
                notice, target.region, target.zone, target.instance_type, target.instance_id
            )
        return {
            **out,
            "outcome": "drain_started" if started.started else "duplicate",
            "execution": started.arn,
            "deadline_seconds": plan.deadline_seconds,
        }

    def _extra(self, notice: Notice, placed: AutoScalingGroup | None) -> dict[str, Any]:
        """What a notice's drain request names besides :meth:`_request`'s: the group AWS puts the instance
        in when the snapshot knows none (``placed``: the drain checks the group it names, and the detach
        of one in none), and a Spot warning's ``deadline_by``, its time plus the deadline: the drain
        counts ``deadline_seconds`` from its own validation, and one that starts late (a throttled
        StartExecution the SDK retried, a cold start, a retried validation) must still end before EC2
        reclaims the instance, two minutes after that time."""
        extra: dict[str, Any] = {}
        if placed is not None:
            extra["group"] = placed.AutoScalingGroupName
        if notice.kind == "interruption":
            end = notice.time + timedelta(seconds=self.settings.interruption_deadline_seconds)
            extra["deadline_by"] = _utc(end)
        return extra

    def _force_later(self, notice: Notice, target: Target, extra: Mapping[str, Any]) -> dict[str, Any]:
        """A scheduled change more than a day away: besides its drain without force, the forced drain of
        its last day (:func:`forced_later`), started now as a DrainNode execution that waits until then
        (``not_before``). An update of the event names the same execution (a duplicate). Its outcome's
        ``forced_execution`` and ``forced_from`` (when it starts); nothing for a change within a day,
        whose drain is forced already, nor for any other notice."""
        plan = forced_later(notice, self.clock(), self.settings)
        if plan is None or plan.not_before is None:
            return {}
        started = self._start(self._request(notice, target, plan, **extra))
        self.metric("InterruptDrainsStarted" if started.started else "InterruptDuplicates", 1)
        return {"forced_execution": started.arn, "forced_from": _utc(plan.not_before)}

    def _placed_now(self, notice: Notice, target: Target) -> AutoScalingGroup | None:
        """:meth:`_placed`, asked only where the notice's group is AWS's to say: a notice other than a
        lifecycle action (which names its group) of a Node no group of the snapshot holds (launched
        since), with a cloud to ask; else None."""
        if notice.kind == "lifecycle" or target.group is not None or self.cloud is None:
            return None
        return self._placed(notice.region, target.instance_id)

    def _placed(self, region: str, instance_id: str) -> AutoScalingGroup | None:
        """The group AWS puts the instance in now, when it is tagged for the cluster
        (DescribeAutoScalingInstances, DescribeAutoScalingGroups; a group deleted since is none); else
        None. The drain request names it as it names the snapshot's group."""
        assert self.cloud is not None
        placement = self._placement(region, instance_id)
        if placement is None:
            return None
        try:
            group = self._describe_group(region, placement.group)
        except AsgNotFound:
            return None
        return group if is_managed(group, self.cluster) else None

    def _group_replaces(self, target: Target, placed: AutoScalingGroup | None) -> bool:
        """Whether the instance's group has Capacity Rebalancing (``CapacityRebalance``): on a rebalance
        recommendation the group launches a replacement, waits for it to pass its health check, then
        terminates the at-risk instance through its terminate lifecycle hooks, its desired capacity
        unchanged; on the two-minute interruption notice it calls the terminate hook and launches a
        replacement at once (EC2 Auto Scaling User Guide, "Use Capacity Rebalancing to handle Amazon EC2
        Spot Interruptions"). A drain that terminated it with ShouldDecrementDesiredCapacity lowered the
        desired capacity under the group's replacement: the group then stood one instance above it and
        scaled in one of its own choosing, undrained. aws-node-termination-handler terminates no
        instance at all: on a rebalance recommendation it only cordons, since it cannot tell whether an
        Auto Scaling group will replace the instance, and its README has users of a group with Capacity
        Rebalancing turn on ``enableRebalanceDraining`` to cordon and drain. The snapshot's group says;
        a node of no group the snapshot knows (launched since), the group AWS puts it in now
        (``placed``: :meth:`_placed`)."""
        if target.group is not None:
            return target.group.capacity_rebalance
        return placed is not None and placed.CapacityRebalance is True

    def _unobserved(self, notice: Notice, instance_id: str) -> dict[str, Any]:
        """A notice of an instance no Node of the snapshot backs (here, in its region): a lifecycle
        action of a Node-less instance of the cluster's groups is completed (:meth:`_no_node`); a
        notice that asks for a drain of an instance that may have joined since is tried again
        (:meth:`_joining`); anything else is not our node."""
        if notice.kind == "lifecycle" and self._nodeless(notice, instance_id):
            return self._no_node(notice, instance_id)
        backed_off = self._back_off_unobserved(notice, instance_id)
        if self._joining(notice, instance_id):
            raise NodeNotObserved(
                f"{instance_id} is in a group of cluster {self.cluster!r} but backs no Node of the "
                f"latest snapshot yet: its {notice.kind} notice is tried again with a later one"
            )
        self.metric("InterruptIgnored", 1)
        return {"outcome": "not_our_node", **({"backed_off": backed_off} if backed_off else {})}

    def _back_off_unobserved(self, notice: Notice, instance_id: str) -> list[str]:
        """A Spot warning of an instance no Node of the snapshot names (it has not joined yet, or never
        will): its Spot pool is backed off all the same when AWS puts it in a group tagged for the
        cluster, with the type and zone AWS gives (DescribeAutoScalingInstances), whether or not the
        notice is tried again for its Node. A pool short of capacity takes back instances soon after
        launch, before their Nodes join; Karpenter marks the offering unavailable for a NodeClaim it
        finds by providerID, which it has from launch (aws/karpenter-provider-aws,
        pkg/controllers/interruption/controller.go). Without it, the group's replacement and the
        planner's next launches went to the same pool."""
        if notice.kind != "interruption" or self.cloud is None:
            return []
        placement = self._placement(notice.region, instance_id)
        if placement is None or not self._group_managed(notice.region, placement.group):
            return []
        return self._back_off(notice, notice.region, placement.zone, placement.instance_type, instance_id)

    def _ours(self, notice: Notice, target: Target, placed: AutoScalingGroup | None) -> bool:
        """Whether the group the notice concerns is one Spillway manages. A lifecycle action names the
        group that terminates the instance: that group's, tagged for the cluster, or the drain's
        validation would refuse it (a self-managed group with a hook of its own, say), a failed
        execution and a drain alarm for nothing Spillway owns. Another notice: the instance's group in
        the snapshot, or the group AWS puts it in now (one launched since the snapshot: ``placed``,
        :meth:`_placed`; without a cloud the drain judges)."""
        if notice.kind == "lifecycle":
            known = target.group
            if known is not None and (known.name, known.region) == (notice.group, notice.region):
                return True
            return self._group_managed(notice.region, notice.group)
        return target.group is not None or self.cloud is None or placed is not None

    def _joining(self, notice: Notice, instance_id: str) -> bool:
        """Whether a notice of an instance no Node of the snapshot names is worth another try: it asks for
        a drain, the instance is in a group tagged for the cluster (its Node may have joined since the
        snapshot, which observe replaces every 20 s), and its :meth:`_retry_window` has not passed (after
        it the notice is dropped as ``not_our_node``, before the DLQ). A rebalance recommendation is sent
        once, best effort, and a scheduled change days ahead: dropped, a just-launched node got no drain
        before the interruption or the change itself."""
        if notice.kind not in ("interruption", "rebalance", "scheduled") or self.cloud is None:
            return False
        age = (self.clock() - notice.time).total_seconds()
        return age < self._retry_window(notice) and self._managed(notice.region, instance_id)

    def _retry_window(self, notice: Notice) -> float:
        """Seconds after the notice's time it is tried again for a Node not observed yet: at most
        :data:`JOIN_RETRY_SECONDS`, and no longer than the drain it asks for has time (a Spot warning's
        deadline; a scheduled change's start less the margin its drain ends by)."""
        if notice.kind == "interruption":
            return min(JOIN_RETRY_SECONDS, self.settings.interruption_deadline_seconds)
        if notice.kind == "scheduled" and notice.start is not None:
            left = (notice.start - notice.time).total_seconds() - self.settings.scheduled_margin_seconds
            return min(JOIN_RETRY_SECONDS, left)
        return JOIN_RETRY_SECONDS

    def _managed(self, region: str, instance_id: str) -> bool:
        """Whether the instance is in an Auto Scaling group tagged for the cluster, as AWS says now
        (:meth:`_placed`); without a cloud, the drain judges."""
        return self.cloud is None or self._placed(region, instance_id) is not None

    def _group_managed(self, region: str, group: str) -> bool:
        """Whether ``group`` is tagged for the cluster (DescribeAutoScalingGroups); a group deleted since
        is not. Without a cloud, the drain judges."""
        if self.cloud is None:
            return True
        try:
            return is_managed(self._describe_group(region, group), self.cluster)
        except AsgNotFound:
            return False

    def _lifecycle(self, notice: Notice, target: Target) -> dict[str, Any]:
        """A terminate lifecycle action on one of our nodes: a drain that completes it (see the module
        docstring). A node a Spillway drain cordoned and emptied gets no drain (``own_drain``): its
        own terminate started the action, after its evictions; the action is completed here at once
        (``completed``), as that drain may not complete it (:meth:`_complete_emptied`). A node such a
        drain is still evicting is another
        matter: the group terminates it on its own (capacity rebalancing's replacement, AZ
        rebalancing, an instance refresh, a scale-in), and the earlier drain holds no token, records no
        heartbeat, and without force would uncordon the node at its deadline. The lifecycle drain
        starts anyway and takes the node over (``taken_over``): see :func:`spillway.act.drain.holds`."""
        out: dict[str, Any] = {"group": notice.group, "hook": notice.hook}
        taken_over = target.node.cordoned_by_spillway
        if taken_over and not self._evictable(target.node.name) and self._fresh(notice):
            return {**out, "outcome": "own_drain", **self._complete_emptied(notice, target.instance_id)}
        if self.cloud is None:
            return {**out, "outcome": "hook_governs"}
        hook = next(
            (h for h in self._lifecycle_hooks(notice.region, notice.group) if h.name == notice.hook),
            None,
        )
        if hook is None or not hook.terminating:
            return {**out, "outcome": "hook_gone"}  # deleted since: nothing waits for us
        plan = lifecycle_plan(notice, hook, self.clock(), self.settings)
        lifecycle = {"hook": notice.hook, "token": notice.token, "heartbeat_seconds": hook.heartbeat_timeout}
        request = self._request(
            notice, target, plan, terminate=False, group=notice.group, lifecycle=lifecycle
        )
        started = self._start(request)
        self.metric("InterruptDrainsStarted" if started.started else "InterruptDuplicates", 1)
        return {
            **out,
            "outcome": "drain_started" if started.started else "duplicate",
            "execution": started.arn,
            "deadline_seconds": plan.deadline_seconds,
            **({"taken_over": True} if taken_over else {}),
        }

    def _nodeless(self, notice: Notice, instance_id: str) -> bool:
        """Whether a lifecycle action of one of Spillway's hooks names an instance of a group of the
        cluster that backs no Node at all in the snapshot (none names it, in any zone). Such an action
        is Spillway's to complete (:meth:`_no_node`); a group not tagged for the cluster is not (another
        cluster's Spillway may use the same hook name, and its Node is in that cluster), and without a
        cloud nothing can be completed: both stay ``not_our_node``, as before."""
        if self.cloud is None or any(n.instance_id == instance_id for n in self.snapshot().cluster.nodes):
            return False
        return self._group_managed(notice.region, notice.group)

    def _no_node(self, notice: Notice, instance_id: str) -> dict[str, Any]:
        """A terminate lifecycle action of one of Spillway's hooks whose instance backs no Node: it never
        registered (a broken bootstrap: the group, a health check or a person terminates it), or its Node
        was deleted. Nothing is there to drain, so the action is completed CONTINUE by its token at once
        (outcome ``no_node``, ``completed``) instead of holding the instance, billed, in
        ``Terminating:Wait`` for the hook's whole HeartbeatTimeout. aws-node-termination-handler's queue
        processor, when the node of an ASG lifecycle event is not found, completes the action with
        CONTINUE only with ``delete-sqs-msg-if-node-not-found`` (else the hook times out: its issue
        #575, "NTH doesn't complete lifecycle hooks for instances that failed to join cluster");
        Karpenter reads no Auto Scaling lifecycle events and skips any message whose instance has no
        NodeClaim.

        The order of events decides what "no Node" proves. The instance entered ``Terminating:Wait``
        at about the notice's time (EventBridge's ``time``, in whole seconds); observe lists the Nodes
        after a snapshot's ``taken_at``. So a snapshot taken at or after the notice's time shows every
        Node that registered before the group began terminating the instance, the ones pods may have
        been scheduled on: only such a snapshot is trusted. An older one (observe writes one every
        20 s; the message came within a second or two) may miss a Node that joined since, so the
        notice is tried again (:class:`NodeNotObserved`, back after the queue's visibility timeout,
        40 s), with a later snapshot: if that shows the Node, the ordinary lifecycle drain starts. After
        :data:`JOIN_RETRY_SECONDS` with no such snapshot (observe failing) it is dropped as before,
        the hook's timeout deciding. A Node that registers only after that snapshot joined an instance
        its group was already terminating: CONTINUE and the hook's DefaultResult both terminate it, so
        completing now only shortens the time such a Node could take pods (it is not Ready yet when
        it registers). First of all AWS must say the action still waits (the instance is
        ``Terminating:Wait``, or ``Warmed:Terminating:Wait`` or ``Warmed:Pending:Wait`` for an instance its
        warm pool terminates or takes back on scale-in (:data:`HOOK_WAIT_STATES`), in the notice's
        group): else it was completed (Spillway's own drain does,
        after deleting the Node) or timed out, and there is nothing to do (``completed: false``)."""
        assert self.cloud is not None  # _nodeless
        self.metric("LifecycleNoNode", 1)
        out: dict[str, Any] = {"group": notice.group, "hook": notice.hook, "outcome": "no_node"}
        placement = self._placement(notice.region, instance_id)
        where = (placement.group, placement.lifecycle_state) if placement is not None else None
        if where is None or where[0] != notice.group or where[1] not in HOOK_WAIT_STATES:
            state = f"{where[1]} in {where[0]}" if where is not None else "in no Auto Scaling group"
            return {**out, "completed": False, "note": f"no action waits: the instance is {state}"}
        taken = self.snapshot().cluster.taken_at
        if aware(taken) < notice.time:
            if (self.clock() - notice.time).total_seconds() < JOIN_RETRY_SECONDS:
                raise NodeNotObserved(
                    f"{instance_id} backs no Node of a snapshot taken before its lifecycle action "
                    f"({notice.hook}): tried again with a later one before the action is completed"
                )
            return {
                **out,
                "completed": False,
                "note": "no snapshot taken since the notice: left to the hook's timeout",
            }
        return {**out, **self._complete_emptied(notice, instance_id)}

    def _fresh(self, notice: Notice) -> bool:
        """Whether the snapshot is recent enough, at the notice's time, to complete an action on what it
        shows (:data:`OWN_DRAIN_SNAPSHOT_SECONDS`). An older one may show cordoned and empty a node
        uncordoned since (a failed drain's compensation, a make-room release) that took pods again:
        then the lifecycle drain, which reads the cluster as it is, decides instead."""
        taken = self.snapshot().cluster.taken_at
        age = notice.time - aware(taken)
        return age <= timedelta(seconds=OWN_DRAIN_SNAPSHOT_SECONDS)

    def _complete_emptied(self, notice: Notice, instance_id: str) -> dict[str, Any]:
        """Complete (CONTINUE, by its token) the action on a node a Spillway drain emptied, or on an
        instance with no Node (:meth:`_no_node`): nothing is left on it to protect, and that drain
        completes by instance id only the hooks it knows of, or is a lifecycle drain for another hook,
        so this hook's action would wait out its HeartbeatTimeout
        with the instance billed. An action that no longer waits (the drain completed it) is done."""
        if self.cloud is None:
            return {}
        try:
            self.deadline.require(
                1, f"CompleteLifecycleAction({notice.region}/{notice.group}, {instance_id})"
            )
            self.cloud.complete_lifecycle_action(
                notice.region, notice.group, notice.hook, instance_id, token=notice.token, result="CONTINUE"
            )
        except LifecycleActionNotFound as exc:
            return {"completed": False, "note": f"the action no longer waits (completed or timed out): {exc}"}
        self.metric("LifecycleActionsCompleted", 1)
        return {"completed": True}

    def _evictable(self, node: str) -> list[str]:
        """The pods on ``node`` in the snapshot that a lifecycle drain (forced) would evict: any that
        keeps the node busy and is not terminating already. A node the snapshot shows cordoned takes no
        new pod, so an empty one stays empty; a snapshot older than the earlier drain's last
        evictions only starts a lifecycle drain that finds nothing to evict."""
        now = self.clock()
        return [
            p.key
            for p in self.snapshot().cluster.pods
            if p.node_name == node and assess(p, force=True, now=now).verdict == MOVABLE
        ]

    def _request(self, notice: Notice, target: Target, plan: DrainPlan, **extra: Any) -> ExecutionRequest:
        group = target.group
        # Terminating decrements the group; at its MinSize the drain only drains, and EC2 reclaims the
        # instance (the group then replaces it). The drain judges that (leaving) from the group as it is
        # when it starts, not from this snapshot: another instance of the pool may have gone since, or
        # the group may have grown.
        request: dict[str, Any] = {
            "cluster": self.cluster,
            "node": target.node.name,
            "instance_id": target.instance_id,
            "region": target.region,
            "reason": plan.reason,
            "deadline_seconds": plan.deadline_seconds,
            "poll_seconds": plan.poll_seconds,
            "force": plan.force,
            "terminate": True,
            "leaving": True,
        }
        if group is not None:
            request["group"] = group.name
        if plan.not_before is not None:  # DrainNode waits until then (DrainRequest.not_before)
            request["not_before"] = _utc(plan.not_before)
        if plan.force:  # a scheduled change's forced drain, now or waiting: it reads EC2's events of it
            request.update(_change(notice))
        if notice.kind != "lifecycle":  # a lifecycle drain has its ``lifecycle``, and its own refusals
            request["notice"] = notice.kind
        request.update(extra)
        return ExecutionRequest(
            kind="drain_node",
            state_machine_arn=self.drain_node_arn,
            name=execution_name(notice, target.instance_id, forced=plan.force),
            input=request,
        )

    def _back_off(
        self, notice: Notice, region: str, zone: str, instance_type: str, instance_id: str
    ) -> list[str]:
        """Back off the Spot pool of the instance type in its zone (``State.pools``: every group that may
        launch Spot of it there avoids it), and the Spot groups that launch nothing else (as before pools
        existed). On-demand capacity of the type in the zone is another pool, left alone."""
        until = notice.time + timedelta(minutes=self.settings.backoff_minutes)
        what = "rebalance recommendation" if notice.kind == "rebalance" else "spot interruption"
        reason = (
            f"{what} of {instance_type} in {zone} "
            f"({instance_id}, {notice.time.isoformat().replace('+00:00', 'Z')})"
        )
        pools: list[Pool] = [("spot", zone, instance_type)] if instance_type and zone else []
        # the clock: a notice handled late (redriven) backs off until a time already over, which must
        # not replace a live back-off of the pool (Ledger.put_backoff)
        now = self.clock()
        self.deadline.require(1, f"the back-off of the Spot pool {instance_type} in {zone}")
        names = back_off(self.ledger, self.cluster, None, until, reason, region=region, pools=pools, now=now)
        groups = backoff_groups(self.snapshot(), region, zone, instance_type)
        for group in groups:
            self.deadline.require(1, f"the back-off of {group.region}/{group.name}")
            names += back_off(
                self.ledger, self.cluster, group.name, until, reason, region=group.region, now=now
            )
        if groups:
            # not GroupsBackedOff: that one is alarmed, and a Spot interruption is routine, nothing to fix
            self.metric("SpotGroupsBackedOff", len(groups))
        return names
