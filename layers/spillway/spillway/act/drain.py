"""Drain one node, step by step: what the DrainNode state machine runs, one Lambda action per step.

::

    validate ─▶ cordon + taint ─▶ evict ⟲ wait poll_seconds ─▶ check ─▶ terminate ─▶ delete_node ─▶ record
       │            │                   │                         └─(uncordon: true)─▶ uncordon ─▶ record "released"
       │            │                   └─ another drain took the node over ─▶ record "superseded" (nothing undone)
       │            └───── any failure before termination ─────▶ uncordon (compensation) ─▶ record ─▶ Fail
       └─ its plan's premise is gone (claim lapsed, work came, node changed) ─▶ record "cancelled" (a success)

A drain with ``uncordon`` (a plan's make-room, or a person's "empty it and keep it") ends with the
compensation's own step run as a success: the node is uncordoned, its taint lifted and it stays in
service; nothing is terminated.

Every step is a method of :class:`Drainer` and takes/returns plain JSON-able dicts, because the state
machine carries them from one Lambda invocation to the next (the normalised request, :class:`Drain`, is
the ``drain`` of every step's input). Failures are our named errors, whose class names the state
machine's ``Retry``/``Catch`` match: :class:`~spillway.errors.InvalidDrainRequest` (rejected, nothing
touched), :class:`~spillway.errors.DrainTimeout` (pods left at the deadline),
:class:`~spillway.errors.DrainCancelled` (the node stopped being ours to drain), ``KubeUnavailable``,
``AwsThrottled``...

Safety rules, checked by the steps themselves (not left to the state machine):

* only nodes of Auto Scaling groups tagged for the cluster (cluster-autoscaler auto-discovery tags),
  in a configured region, whose instance is the one a plan named (node names are private DNS names, and
  EC2 reuses addresses), never below the group's MinSize, never to terminate in a group whose
  Terminate process is suspended (Auto Scaling would leave the instance running), never a node somebody
  else cordoned, and not one annotated ``cluster-autoscaler.kubernetes.io/scale-down-disabled=true``
  unless ``force``; but a Spot warning's forced drain also drains a node whose instance a managed group
  detached since the snapshot and EC2 still runs, never terminating it (:func:`_drains_outside_group`);
* DaemonSet pods, mirror (static) pods and finished pods are left alone, and so are pods whose
  tolerations admit the drain's cordon and taint (evicted, they or their replacements could be
  scheduled straight back: they go with the node, as in Karpenter); but once the rest is gone a plan's
  drain or one by hand that terminates its node evicts the DaemonSet pods cluster-autoscaler would (its
  ``--daemonset-eviction-for-*-nodes`` and ``enable-ds-eviction`` annotation: :meth:`Drainer._daemonsets`),
  once and best effort, waiting for none of them; everything else goes through the
  Eviction API, so PodDisruptionBudgets hold: a budget's 429 is retried next round, and so is a pod
  the API refuses while more than one budget selects it (500) or while its budget's status forbids
  evictions (403 naming the budget); the round goes on with the other pods, and such a pod is left to
  the deadline. A pod whose namespace is being deleted (403, cause ``NamespaceTerminating``) is waited
  for: the namespace takes it. A 429 of the server's rate limiting ends the round, and the next round
  tries again; RBAC's 403 fails the step (``KubeAuthError``). Each eviction gives the pod its
  ``terminationGracePeriodSeconds`` but no more than the seconds left before the deadline, so that it
  is gone by then, and from the deadline on a terminating pod past its grace is leaving, not left
  (:func:`_grace_over`); at the deadline a drain without force evicts nothing; but a pod a plan moves
  at a cost (``whole_grace``: a consolidation's, a make room's) gets its whole grace or no eviction:
  once one still to be evicted has less time left than its grace, the drain gives up as at its deadline
  (:func:`_grace_cut`);
* pods annotated ``karpenter.sh/do-not-disrupt=true`` or
  ``cluster-autoscaler.kubernetes.io/safe-to-evict=false``, pods no controller would recreate, and pods
  with local storage (an emptyDir on disk, a hostPath: unless safe-to-evict=true, or a plan's drain
  names them, having found a move opt-in for each) are evicted only with ``force``: until then they
  keep the node busy, up to the deadline;
* a plan's drain that starts at or after its ``claim_until`` (the plan's time plus
  ``drain_claim_minutes``; it waited behind the scale-down's other drains) is cancelled before anything
  is read: later plans judge its node again, and the plan's premise is as old (:func:`_lapsed_claim`);
  so is one whose node runs work the plan did not plan to move (:func:`_busy_planned_drain`), and one
  a validation check refuses only because the world changed since the plan (a ``stale`` refusal: the
  node is gone or replaced, its instance left its group or is terminating, somebody cordoned it,
  scale-down was disabled on it, its group is at MinSize or its Terminate process was suspended). So
  is a notice's drain (``notice``: the interrupt function's, for a Spot warning, a rebalance
  recommendation or a scheduled change) refused for what its node is now: without force, a node its
  operator annotated ``scale-down-disabled`` or ``karpenter.sh/do-not-disrupt``, or whose instance
  they protected from scale-in (a drain that terminates: :func:`_scale_in_protected`), is left alone, as
  Karpenter disrupts such a node only involuntarily (the Spot warning's forced drain still drains it);
  forced or not, a node gone or replaced has nothing to drain, nor, without force, one in another group
  (with force, one moved to another managed group is drained as that group's), nor one whose
  instance is in no group (but a Spot warning's of one its group detached since the snapshot and EC2
  still runs: drained and left to EC2, which takes the instance whatever its group), and one its group
  terminates is left to the group without force (with force its pods are evicted: the hook holding
  it may not be Spillway's, and EC2 takes it within minutes); the
  record step puts a ``SpillwayDrainSkipped`` Event on the Node. A
  drain started by hand is rejected for those, and any drain for a request that could never have been right (another cluster, a node
  outside EC2 or the managed groups and regions, malformed fields). Such a
  cancellation touched nothing: validation answers ``cancelled`` (no error) and the drain ends as a
  success recorded ``cancelled``, as a superseded one does; normal operation raises no alarm;
* every step after the cordon re-reads the node and stops with ``DrainCancelled`` when it is no longer
  cordoned by Spillway (the planner or a person uncordoned it), was replaced (a new uid) or is gone,
  and with :class:`~spillway.errors.DrainSuperseded` when another Spillway drain took it over (the
  cordon names that drain: a scheduled change's forced drain, a Spot warning's): not a failure, the
  other drain holds the node, so nothing is undone and the outcome is ``superseded`` (a lifecycle
  drain, or one with ``force``, goes on, but for a forced drain that follows the same EC2 scheduled
  event as the one holding the node: :func:`_taken_over_by`, which stands by while that one's execution
  runs and takes the node over when it ended without succeeding: :meth:`Drainer._superseded`);
  right before termination, :meth:`Drainer.check` also requires that no workload pod is left (unless
  ``force`` and the deadline passed);
* the compensation (:meth:`Drainer.uncordon`) removes the draining taint and Spillway's cordon, never
  a cordon somebody else made nor one another drain of the node made since (the cordon names its
  drain's execution: :func:`cordon_reason`), and never touches a Node that replaced the drained one. A
  lifecycle drain, and a forced drain of a leaving instance (a Spot warning's, a scheduled change's
  within a day), keep the cordon and the taint: the instance goes whatever the drain does.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from pydantic import ValidationError

from spillway.act.deadline import NO_DEADLINE, Deadline
from spillway.act.gangsweep import remove_gang_orphan
from spillway.act.instances import terminate_held, terminate_in_group, where_gone
from spillway.act.unregistered import remove_unregistered
from spillway.errors import (
    AsgNotFound,
    AwsError,
    AwsThrottled,
    AwsUnavailable,
    DrainCancelled,
    DrainSuperseded,
    DrainTimeout,
    EvictionBlocked,
    EvictionBudgetForbidden,
    EvictionNamespaceTerminating,
    EvictionRefused,
    EvictionThrottled,
    InstanceNotFound,
    InvalidDrainRequest,
    KubeConflict,
    KubeError,
    KubeUnavailable,
    LifecycleActionNotFound,
    LifecycleActionPending,
    NodeNotFound,
    PodNotFound,
    SpillwayError,
    StateCorrupt,
)
from spillway.model.aws import REGION_FORM, AutoScalingGroup, ScalingActivity
from spillway.model.cluster import (
    DEFAULT_GRACE_SECONDS,
    NodeInfo,
    PodInfo,
    cordoned_for,
    instance_id_from_provider_id,
    is_critical,
)
from spillway.model.drain import (
    DEFAULT_LIFECYCLE_HOOKS,
    GLOBAL_TIMEOUT_SECONDS,
    HOOK_WAIT_STATES,
    LIFECYCLE_CONTINUE,
    LIST_LIMIT,
    MAX_DEADLINE_SECONDS,
    MAX_EXECUTION_SECONDS,
    MAX_POLL_SECONDS,
    MAX_WAIT_SECONDS,
    WAIT_TIMESTAMP_PATTERN,
    Action,
    Drain,
    DrainRequest,
    LifecycleAction,
    Placement,
    PodVerdict,
    ScheduledEvent,
    parse_iso,
)
from spillway.model.history import drain_refusal
from spillway.model.jobs import flag
from spillway.model.k8s import (
    CORDONED_BY_SPILLWAY,
    DO_NOT_DISRUPT,
    DRAINING_TAINT,
    ENABLE_DS_EVICTION,
    EXCLUDE_FROM_LB_LABEL,
    EXCLUDE_FROM_LB_VALUE,
    HELD_DRAIN,
    LB_EXCLUDED_BY_SPILLWAY,
    SCALE_DOWN_DISABLED,
    Node,
    Pod,
)
from spillway.model.nodegroup import (
    LIVE_STATES,
    TAG_CLUSTER_PREFIX,
    TAG_ENABLED,
    TERMINATE,
    is_managed,
    scale_in_protected,
)
from spillway.model.state import DRAIN_ENDED_PREFIX, DRAINS_PARTITION, SCALE_DOWN_FAILED_PREFIX
from spillway.model.utc import aware
from spillway.planner.disruption import TOLERATES_DRAIN, assess, comes_back, dead, marked_never
from spillway.ports import ERRORS, Cloud, Cluster, Ledger

STARTED_BY = "AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID"  # added by a parent execution (.sync)
ACTIONS = (
    "validate",
    "cordon",
    "evict",
    "check",
    "terminate",
    "complete_lifecycle",
    "delete_node",
    "uncordon",
    "hand_over",
    "record",
    "summarize",
    "line",
    "remove_unregistered",
    "remove_gang_orphan",
    "undrained",
)

# What each step may raise, by exact class (a state machine matches names, not subclasses):
# tests/unit/test_error_contract.py checks every one is retried or caught where drain_node.asl.json
# and scale_down.asl.json run that step, and that a step given any port error raises nothing else.
# what a step may raise is what the ports it calls may raise (spillway.ports.ERRORS)
_KUBE = ERRORS["Cluster"]
_AWS = ERRORS["Cloud"]
_ALWAYS = (InvalidDrainRequest,)  # an unknown action or a malformed drain
RAISES: dict[str, frozenset[type[SpillwayError]]] = {
    "validate": frozenset({*_ALWAYS, *_KUBE, *_AWS}),  # a cancellation is an answer, not an error
    "cordon": frozenset({*_ALWAYS, DrainCancelled, *_KUBE}),
    "evict": frozenset({*_ALWAYS, DrainCancelled, DrainSuperseded, DrainTimeout, *_KUBE}),
    "check": frozenset({*_ALWAYS, DrainCancelled, DrainSuperseded, *_KUBE}),
    # its own check first (a pod that came since the check keeps the node): check's errors too
    "terminate": frozenset({*_ALWAYS, DrainCancelled, DrainSuperseded, *_KUBE, *_AWS}),
    "complete_lifecycle": frozenset({*_ALWAYS, *_AWS, LifecycleActionPending}),
    "delete_node": frozenset({*_ALWAYS, *_KUBE}),
    "uncordon": frozenset({*_ALWAYS, *_KUBE, *_AWS}),  # AWS only after a failed terminate
    "hand_over": frozenset({*_ALWAYS, *_KUBE}),
    "record": frozenset(_ALWAYS),
    "summarize": frozenset(_ALWAYS),
    "line": frozenset(_ALWAYS),
    "remove_unregistered": frozenset({*_ALWAYS, *_KUBE, *_AWS}),  # spillway.act.unregistered
    # spillway.act.gangsweep; its claim is the state table's (one released as it was read is held)
    "remove_gang_orphan": frozenset({*_ALWAYS, *_KUBE, *_AWS, StateCorrupt}),
    "undrained": frozenset(_ALWAYS),  # a scale-down part that drained nothing: its metric, no port
}

Outcome = Literal[
    "terminated",
    "drained",
    "released",
    "superseded",
    "gone",
    "dry_run",
    "timeout",
    "cancelled",
    "rejected",
    "failed",
]
log = logging.getLogger(__name__)

OUTCOME_OF_ERROR: dict[str, Outcome] = {
    "DrainTimeout": "timeout",
    "DrainCancelled": "cancelled",
    "InvalidDrainRequest": "rejected",
}
_REGION = re.compile(f"^({REGION_FORM})")
_FIELD_HELP = {
    "cluster": "the cluster's name",
    "node": "the name of the Node to drain, as `kubectl get nodes` shows it: a DNS subdomain",
    "reason": "a short text saying why, kept in the node's events",
    "deadline_seconds": f"whole seconds the pods have to leave, 0 to {MAX_DEADLINE_SECONDS}",
    "poll_seconds": f"whole seconds between eviction rounds, 0 to {MAX_POLL_SECONDS}",
    "terminate": "true or false",
    "force": "true or false",
    "dry_run": "true or false",
    "uncordon": "true or false",
    "not_before": "when the drain starts, in UTC such as 2026-11-02T10:20:00Z",
    "deadline_by": "the latest the deadline may be, such as 2026-11-02T10:21:30Z",
    "scheduled_start": "the scheduled change's start as announced, in UTC such as 2026-11-03T10:20:00Z",
    "whole_grace": "those of the pods named in pods that the plan moves at a cost, each as <namespace>/<name>",
    "event_code": "an EC2 event code: instance-reboot, system-reboot, system-maintenance, instance-retirement "
    "or instance-stop",
}


# A plan's drain that ends so failed as a scale-down (cluster-autoscaler's scale-down failure): it timed
# out or a step failed, and its node was given back. Cancelled, superseded and rejected drains did not fail.
SCALE_DOWN_FAILURES = frozenset({"failed", "timeout"})
# How long the state table keeps a failed scale-down drain's item (its TTL): above any failure delay in use
SCALE_DOWN_FAILURE_KEPT = timedelta(days=1)
# The state table's partition, beside the cluster's own, of the marks that a DrainNode execution's outcome
# was counted (Drainer._count: one item per execution, so a record step run again counts nothing more).
# Apart from the cluster's partition, which every plan's state load reads whole.
DRAIN_COUNTED_PARTITION = "{cluster}#drain-counted"
# How long such a mark is kept: past the 14 days after its end in which Step Functions may redrive an
# execution under the same ARN, running a record step again (AWS Step Functions API Reference,
# RedriveExecution); far above a record step's retries (seconds). One small item per execution.
DRAIN_COUNTED_KEPT = timedelta(days=15)
# The key of the validation's answer giving when a mark DrainNode writes itself may expire (epoch
# seconds, a string as DynamoDB's N takes it): its Mark* states, which count a drain whose record step
# failed for good, have no clock (JSONPath gives none as a number), the validation has. From there the
# execution runs at most MAX_EXECUTION_SECONDS, then the mark is kept DRAIN_COUNTED_KEPT.
COUNTED_EXPIRES_AT = "counted_expires_at"
# A plan's drain that ends keeping its node and its remaining pods running (failed, timed out, cancelled,
# rejected, or a make-room drain released: its moved pods evicted, the node uncordoned): later plans stop
# taking its claim for a drain under way, counting its evictions against the PodDisruptionBudgets and
# the node's pods as leaving (State.ended_drains). Kept by the state table as long as a failure's item.
ENDED_KEEPING = frozenset({"failed", "timeout", "cancelled", "rejected", "released"})


def _scales_down(drain: Drain) -> bool:
    """A plan's drain that removes its node: not a make-room drain (it keeps the node), not a notice's
    or a lifecycle hook's (the instance goes anyway), not one started by hand (no plan)."""
    return (
        drain.plan_id is not None
        and drain.terminate
        and not drain.uncordon
        and drain.notice is None
        and drain.lifecycle is None
        and not drain.leaving
    )


@dataclass(frozen=True, slots=True)
class DaemonSetEviction:
    """Whether a drain that removes its node evicts the node's DaemonSet pods by default once the other
    pods are gone: when it evicted none (``empty``) and when it evicted some (``occupied``).
    cluster-autoscaler's --daemonset-eviction-for-empty-nodes (default false) and
    --daemonset-eviction-for-occupied-nodes (default true); the configuration's keys of those names."""

    empty: bool = False
    occupied: bool = True


def _evicted_as_listed(pod: Pod) -> PodVerdict:
    """A pod the drain evicts as it was listed (a DaemonSet pod :func:`daemonsets_to_evict` chose)."""
    grace = pod.spec.termination_grace_period_seconds
    return PodVerdict(
        f"{pod.metadata.namespace}/{pod.metadata.name}",
        "evict",
        "",
        PodInfo.from_pod(pod).priority,
        DEFAULT_GRACE_SECONDS if grace is None else grace,
        uid=pod.metadata.uid or "",
    )


def daemonsets_to_evict(pods: Sequence[Pod], by_default: bool, *, force: bool = False) -> list[Pod]:
    """The node's DaemonSet pods (running or pending, not terminating) a drain evicts before the node
    goes, by name: each annotated ``cluster-autoscaler.kubernetes.io/enable-ds-eviction: "true"``, none
    annotated with another value, and the others when ``by_default`` (cluster-autoscaler's
    simulator/utils/daemonset ``PodsToEvict``). Never, without ``force``, one marked never to be
    disturbed (``karpenter.sh/do-not-disrupt``, ``safe-to-evict: "false"``, ``openai/do-not-drain``:
    :func:`~spillway.planner.disruption.marked_never`), whatever ``enable-ds-eviction`` says: Karpenter's
    drain evicts no pod annotated do-not-disrupt, a DaemonSet's included (kubernetes-sigs/karpenter
    pkg/utils/pod/scheduling.go, ``IsEvictable``); it goes with the instance."""
    chosen = []
    for pod in pods:
        info = PodInfo.from_pod(pod)
        if not info.daemonset or info.mirror or info.terminal or info.terminating:
            continue
        if not force and marked_never(info) is not None:
            continue
        note = pod.metadata.annotations.get(ENABLE_DS_EVICTION)
        if note == "true" or (note is None and by_default):
            chosen.append(pod)
    return sorted(chosen, key=lambda p: (p.metadata.namespace or "", p.metadata.name))


def _terminates_as_autoscaler(drain: Drain) -> bool:
    """A drain that terminates its node itself, a plan's or one by hand: the drains cluster-autoscaler
    does. Not a make-room drain (the node stays), nor a notice's (a Spot warning's, a scheduled
    change's) or a lifecycle hook's, which drain as aws-node-termination-handler does, leaving
    DaemonSet pods to go with the instance."""
    return drain.terminate and not drain.uncordon and drain.notice is None and drain.lifecycle is None


def node_goes(drain: Drain) -> bool:
    """Whether the drain ends with its node gone: it terminates the instance, or the instance goes
    whatever the drain does (a notice's, a lifecycle action's). Not a make-room drain (``uncordon``) nor
    one by hand with ``terminate: false``, which keep their node. Such a drain labels the node
    ``node.kubernetes.io/exclude-from-external-load-balancers``: Kubernetes' service controller and the
    AWS Load Balancer Controller deregister a node by that label, and know nothing of Spillway's cordon
    annotation or draining taint (the controller deregisters a node on cluster-autoscaler's and
    Karpenter's deletion taints, but reads no other taint)."""
    if drain.uncordon:
        return False
    return drain.terminate or drain.leaving or drain.lifecycle is not None


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


# --- the request and the normalised drain ------------------------------------------------------


def parse_request(raw: Any) -> DrainRequest:
    """The request, or :class:`InvalidDrainRequest` naming every bad field in words a person follows."""
    if not isinstance(raw, Mapping):
        raise InvalidDrainRequest(
            'a drain request is a JSON object such as {"cluster": "prod", "node": "ip-10-0-1-2.ec2.internal"}'
            f", not {type(raw).__name__}"
        )
    data = {k: v for k, v in raw.items() if k != STARTED_BY}
    try:
        request = DrainRequest.model_validate(data)
    except ValidationError as exc:
        problems = [_problem(err) for err in exc.errors()]
        first_field, first_text = problems[0]
        rest = "".join(f"; {f}: {t}" for f, t in problems[1:])
        raise InvalidDrainRequest(first_text + rest, field=first_field) from None
    _refuse(_too_many_rounds(request))
    _refuse(_consolidation_refusal(request))
    _refuse(_lifecycle_refusal(request))
    _refuse(_uncordon_refusal(request))
    _refuse(_timestamp_refusal(request, "planned_at"))
    _refuse(_timestamp_refusal(request, "claim_until"))
    _refuse(_timestamp_refusal(request, "deadline_by"))
    _refuse(_not_before_refusal(request))
    _refuse(_scheduled_refusal(request))
    _refuse(_controllers_refusal(request))
    _refuse(_whole_grace_refusal(request))
    _refuse(_pods_refusal(request))
    return request


def _pods_refusal(request: DrainRequest) -> Refusal:
    """``pods`` confines the drain to the pods it names only with ``consolidation``: a drain without it
    evicts every pod of its node, the names ignored. Spillway's plans send ``pods`` only with it
    (:func:`spillway.act.planning.drain_item`), so a request naming pods without it is a person's, who
    meant those pods and no others."""
    if not request.pods or request.consolidation:
        return None
    return InvalidDrainRequest(
        "names the pods to evict only with consolidation: true (then the others are left running); "
        "without it a drain evicts every pod of the node: remove pods, or add consolidation: true",
        field="pods",
    )


def _not_before_refusal(request: DrainRequest) -> Refusal:
    """``not_before`` is what Step Functions' Wait state takes (:data:`WAIT_TIMESTAMP_PATTERN`: a
    timestamp it cannot read fails the execution at the Wait, with no field named and nothing
    recorded), and never comes with ``lifecycle``: the hook holding the instance would time out."""
    if request.not_before is None:
        return None
    if not re.fullmatch(WAIT_TIMESTAMP_PATTERN, request.not_before) or _timestamp(request.not_before) is None:
        return InvalidDrainRequest(
            f"a date and time in UTC such as 2026-11-02T10:20:00Z (an uppercase T and Z, no offset: the form "
            f"Step Functions' Wait state takes), got {json.dumps(request.not_before)[:80]}",
            field="not_before",
        )
    if request.lifecycle is not None:
        return InvalidDrainRequest(
            "not with lifecycle: the group's hook holds the instance for its HeartbeatTimeout, not until then",
            field="not_before",
        )
    return None


def _scheduled_refusal(request: DrainRequest) -> Refusal:
    """``scheduled_start`` is a UTC time as ``not_before`` is, and names the instance and its region whose
    scheduled events the drain reads (:func:`follow_change`)."""
    if request.scheduled_start is None:
        return None
    value = request.scheduled_start
    if not re.fullmatch(WAIT_TIMESTAMP_PATTERN, value) or _timestamp(value) is None:
        return InvalidDrainRequest(
            f"a date and time in UTC such as 2026-11-03T10:20:00Z, got {json.dumps(value)[:80]}",
            field="scheduled_start",
        )
    if request.instance_id is None or request.region is None:
        return InvalidDrainRequest(
            "needs instance_id and region: the instance whose scheduled events EC2 is asked for",
            field="scheduled_start",
        )
    return None


# How far the drain function's clock may be behind Step Functions' at the end of the Wait (which ends at
# the second: it truncates milliseconds) for the drain to go on instead of waiting again.
WAIT_SLACK_SECONDS = 1


def waiting(request: DrainRequest, raw: Mapping[str, Any], now: datetime) -> dict[str, Any] | None:
    """A drain whose ``not_before`` is still ahead: ``{"waiting": {"until", "request"}}``, which DrainNode
    waits out (its Wait state) before it validates ``request`` (the request as given) again; else None.
    Nothing is read or touched before then: the node is judged as it is when the drain starts. Refused
    (naming ``not_before``) more than :data:`MAX_WAIT_SECONDS` ahead, past the execution's timeout."""
    if request.not_before is None:
        return None
    until = _timestamp(request.not_before)
    assert until is not None  # parse_request refused it otherwise
    ahead = (until - now).total_seconds()
    if ahead > MAX_WAIT_SECONDS:
        raise InvalidDrainRequest(
            f"{request.not_before} is more than {MAX_WAIT_SECONDS // 86_400} days after {iso(now)}: a drain "
            "waits at most that long (a Standard execution runs at most a year)",
            field="not_before",
        )
    if ahead <= WAIT_SLACK_SECONDS:
        return None
    return {"waiting": {"until": request.not_before, "request": dict(raw)}}


# A scheduled event whose start EC2 gives within this of the start announced is the same start (AWS
# Health writes it in whole seconds; EC2 in milliseconds).
SAME_START_SECONDS = 60


def follow_change(
    request: DrainRequest, raw: Mapping[str, Any], events: Sequence[ScheduledEvent], now: datetime
) -> dict[str, Any] | DrainRequest:
    """A scheduled change's drain (``scheduled_start``), its wait over, judged by the instance's scheduled
    events as EC2 lists them now (DescribeInstanceStatus): cancelled (``{"cancelled": ...}``, nothing
    touched) when none is left that is not ``[Completed]`` or ``[Canceled]``: AWS called the change off,
    or it is done (a stop and start moves the instance to other hardware and completes it), and a forced
    drain would only kill pods a budget holds. Of the events left, the one of the notice's
    ``event_code`` (else any) that starts first: started later than announced (the customer moved it:
    ModifyInstanceEventStartTime), the drain waits again (``{"waiting": ...}``) as much longer, its
    request's ``not_before`` and ``scheduled_start`` moved alike, so that it still ends its deadline
    before the new start; started earlier, it goes on with its deadline shortened by as much; else it
    goes on as requested."""
    assert request.scheduled_start is not None
    announced = _timestamp(request.scheduled_start)
    assert announced is not None  # parse_request refused it otherwise
    event = followed_event(request, events)
    if event is None:
        over = "; ".join(f"{e.code}: {e.description}"[:120] for e in events[:2]) or "none at all"
        return _cancelled(
            _requested(request),
            f"EC2 lists no scheduled event of {request.instance_id} still to come ({over}): the change "
            f"announced for {request.scheduled_start} was canceled or is done; nothing was drained",
        )
    return _follow_start(request, raw, event, _event_start(event) - announced, now)


def followed_event(request: DrainRequest, events: Sequence[ScheduledEvent]) -> ScheduledEvent | None:
    """The event a scheduled change's drain follows (:func:`follow_change`): of the instance's events EC2
    does not mark completed or canceled, the first to start of the request's ``event_code``, else the
    first to start; None when none is left."""
    live = sorted((e for e in events if e.live and e.not_before is not None), key=_event_start)
    return next((e for e in live if e.code == request.event_code), live[0] if live else None)


def _follow_start(
    request: DrainRequest, raw: Mapping[str, Any], event: ScheduledEvent, shift: timedelta, now: datetime
) -> dict[str, Any] | DrainRequest:
    """:func:`follow_change` for the live ``event``, which starts ``shift`` after the start announced."""
    moved = f"EC2 moved {event.code} {event.event_id} from {request.scheduled_start} to {iso(_event_start(event))}"
    if shift.total_seconds() > SAME_START_SECONDS:
        base = _timestamp(request.not_before) if request.not_before else now
        assert base is not None
        later = {**raw, "not_before": iso(base + shift), "scheduled_start": iso(_event_start(event))}
        answer = waiting(parse_request(later), later, now)
        if answer is not None:
            answer["waiting"]["note"] = f"{moved}: the drain waits until {later['not_before']}"
            return answer
    if shift.total_seconds() < -SAME_START_SECONDS:
        deadline = max(0, request.deadline_seconds + int(shift.total_seconds()))
        reason = f"{_reason_of(request)}; {moved}: deadline {deadline} s"[:256]
        return request.model_copy(update={"deadline_seconds": deadline, "reason": reason})
    return request


def _event_start(event: ScheduledEvent) -> datetime:
    assert event.not_before is not None
    start = event.not_before
    return aware(start)


def _controllers_refusal(request: DrainRequest) -> Refusal:
    """``controllers`` names the controllers of pods the request names, and only those."""
    unnamed = sorted(set(request.controllers) - set(request.pods))
    if unnamed:
        return InvalidDrainRequest(
            f"names the controllers of pods the request names (pods), and {', '.join(unnamed[:3])} is not "
            "among them",
            field="controllers",
        )
    return None


def _whole_grace_refusal(request: DrainRequest) -> Refusal:
    """``whole_grace`` names pods the request moves (``pods``), and only in a drain whose giving up leaves
    the node as it was: never with ``leaving`` (the instance goes whatever the drain does, so a grace cut
    short beats none: such a drain cuts every grace to the time left)."""
    if not request.whole_grace:
        return None
    unnamed = sorted(set(request.whole_grace) - set(request.pods))
    if unnamed:
        return InvalidDrainRequest(
            f"names pods the request moves (pods), and {', '.join(unnamed[:3])} is not among them",
            field="whole_grace",
        )
    if request.leaving:
        return InvalidDrainRequest(
            "not with leaving: the instance goes whatever the drain does, so its pods get what is left of "
            "their grace rather than none; remove whole_grace or leaving",
            field="whole_grace",
        )
    return None


def _problem(err: Mapping[str, Any]) -> tuple[str, str]:
    """One validation error as (field, words a person follows)."""
    field = ".".join(str(p) for p in err["loc"]) or "input"
    kind = err["type"]
    if kind == "missing":
        return field, f"required ({_FIELD_HELP.get(field, 'see the drain input contract')})"
    if kind == "extra_forbidden":
        return field, "not a field of a drain request (known: " + ", ".join(DrainRequest.model_fields) + ")"
    got = json.dumps(err.get("input"), default=str)[:80]
    hint = _FIELD_HELP.get(field)
    return field, f"{err['msg']}, got {got}" + (f" ({hint})" if hint else "")


def _too_many_rounds(request: DrainRequest) -> Refusal:
    """The eviction rounds a deadline and a poll make must fit an execution's history
    (:mod:`spillway.model.history`)."""
    refusal = drain_refusal(request.deadline_seconds, request.poll_seconds)
    return InvalidDrainRequest(refusal, field="poll_seconds") if refusal else None


def _timestamp(text: str) -> datetime | None:
    """An RFC 3339 date and time with its zone (``Z`` or an offset), or None."""
    try:
        parsed = datetime.fromisoformat(text) if "T" in text else None
    except ValueError:
        return None
    return parsed if parsed is not None and parsed.tzinfo is not None else None


def _deadline(request: DrainRequest, now: datetime) -> datetime:
    """When the drain validated at ``now`` meets its deadline: ``deadline_seconds`` from now, but no
    later than ``deadline_by`` (and not before now). A Spot warning's drain that starts late (a
    throttled StartExecution the SDK retried, a cold start, a retried validation) so keeps to the end
    the interrupt function counted from the warning's time, before EC2 reclaims the instance."""
    deadline = now + timedelta(seconds=request.deadline_seconds)
    by = _timestamp(request.deadline_by) if request.deadline_by is not None else None
    return max(now, min(deadline, by)) if by is not None else deadline


def _timestamp_refusal(request: DrainRequest, field: str) -> Refusal:
    value = getattr(request, field)
    if value is None or _timestamp(value) is not None:
        return None
    return InvalidDrainRequest(
        f"an RFC 3339 date and time with its zone such as 2026-11-02T10:20:00Z, got {json.dumps(value)[:80]}",
        field=field,
    )


def _by_hand(request: DrainRequest | Drain) -> bool:
    """A drain a person started: no plan's, no notice's, no lifecycle action's."""
    return request.plan_id is None and request.notice is None and request.lifecycle is None


def _hands_over(drain: Drain) -> bool:
    """Whether the drain leaves its node to the operator when it ends: one by hand that keeps it."""
    return _by_hand(drain) and not drain.terminate and not drain.uncordon


def _lapsed_claim(request: DrainRequest, now: datetime) -> str | None:
    """Why the drain is cancelled when its plan's claim lapsed, else None. A plan claims the nodes it drains until ``claim_until``: later plans leave them alone until then,
    unless the drain has cordoned them. A drain that starts at or after it (it waited behind other
    drains of its scale-down, MaxDrainConcurrency at a time, or behind the part before) has not cordoned
    its node, so later plans judge it again, and a consolidation's premise (its pods fit elsewhere) is
    as old as the plan: cancelled, before anything is touched. At ``claim_until`` exactly, as the
    planner counts it (:meth:`spillway.planner.scaledown.ScaleDown.claimed_at`). A drain without one
    (started by hand) has no claim to lapse."""
    if request.claim_until is None:
        return None
    until = _timestamp(request.claim_until)
    assert until is not None  # parse_request refused it otherwise
    if now < until:
        return None
    if request.planned_at is not None and request.claim_minutes is not None:
        claim = (
            f"the plan made at {request.planned_at} claimed Node {request.node!r} for drain_claim_minutes "
            f"({request.claim_minutes:g}), until {request.claim_until}"
        )
    else:
        claim = f"the plan's claim on Node {request.node!r} lapsed at {request.claim_until}"
    return (
        f"{claim}; this drain could start only at {iso(now)}, after other drains of its scale-down, "
        "with the node still uncordoned: it touched nothing, and the next plan judges the node again"
    )


def _reason_of(request: DrainRequest) -> str:
    return request.reason or ("a plan's scale-down" if request.plan_id else "requested")


# What a drain cancelled at validation carries (the record step's output, a scale-down's line).
CANCELLED_KEYS = ("node", "instance_id", "group", "region", "plan_id", "reason")


def _requested(request: DrainRequest) -> dict[str, Any]:
    """The drain as its request names it: what a drain cancelled before anything was read carries."""
    return {
        "node": request.node,
        "instance_id": request.instance_id,
        "group": request.group,
        "region": request.region,
        "plan_id": request.plan_id,
        "reason": _reason_of(request),
        "planned_at": request.planned_at,
    }


def _cancelled(identity: Mapping[str, Any], why: str) -> dict[str, Any]:
    """Validation's answer for a drain it cancels: every key present (null when unknown), as the state
    machine's fallback Pass state reads them, and why as the note; and the time of the plan that
    claimed the node (``planned_at``) when there is one, which the record step writes for later plans
    (:meth:`Drainer._note_ended`)."""
    answer = {**{key: identity.get(key) for key in CANCELLED_KEYS}, "note": why}
    if isinstance(identity.get("planned_at"), str):
        answer["planned_at"] = identity["planned_at"]
    return {"cancelled": answer}


def _stale_premise(refusal: InvalidDrainRequest) -> str:
    """Why a plan's drain is cancelled for a refusal that only says the world changed since the plan."""
    return (
        f"{refusal.detail}; the plan's premise is gone: this drain touched nothing, and plans judge "
        "the node again once its claim lapses"
    )


def _left_alone(request: DrainRequest, refusal: InvalidDrainRequest) -> str:
    """Why a notice's drain is cancelled for a refusal that only says what its node is now: protected by
    its operator (a drain without force respects ``scale-down-disabled`` and ``do-not-disrupt``, as
    Karpenter disrupts such a node only involuntarily; and scale-in protection, for a drain that
    terminates), or gone or changed since the interrupt function's snapshot (nothing left to drain,
    forced or not)."""
    if request.force:
        return (
            f"{refusal.detail}; the {request.notice} notice's drain has nothing to drain: it touched nothing"
        )
    return (
        f"{refusal.detail}; the {request.notice} notice's drain, without force, leaves the node as it is: "
        "it touched nothing, and a Spot interruption warning (or a scheduled change within a day) still "
        "drains it with force"
    )


def parse_drain(raw: Any) -> Drain:
    if not isinstance(raw, Mapping):
        raise InvalidDrainRequest("the step's input has no drain object", field="drain")
    try:
        return Drain.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise InvalidDrainRequest(f"{where}: {err['msg']}", field="drain") from None


def region_of(node: Node) -> str | None:
    """The node's region: its ``topology.kubernetes.io/region`` label, else its zone in ``providerID``."""
    label = node.metadata.labels.get("topology.kubernetes.io/region")
    if label:
        return label
    provider = node.spec.provider_id or ""
    parts = provider.removeprefix("aws://").strip("/").split("/")
    zone = parts[0] if len(parts) == 2 else node.metadata.labels.get("topology.kubernetes.io/zone", "")
    match = _REGION.match(zone)
    return match.group(1) if match else None


# --- validation: each check returns a refusal (nothing is touched) or None; the first refusal wins ------

Refusal = InvalidDrainRequest | None


def _refuse(refusal: Refusal) -> None:
    if refusal is not None:
        raise refusal


def _first_refusal(checks: Sequence[Callable[..., Refusal]], *facts: Any) -> Refusal:
    return next((r for r in (check(*facts) for check in checks) if r is not None), None)


def _other_cluster(request: DrainRequest, cluster: str) -> Refusal:
    if request.cluster == cluster:
        return None
    return InvalidDrainRequest(
        f"this Spillway manages cluster {cluster!r}, not {request.cluster!r}", field="cluster"
    )


def _located(node: Node) -> tuple[str, str]:
    """The node's instance and region, once :data:`NODE_CHECKS` passed (both are known then)."""
    instance_id, region = instance_id_from_provider_id(node.spec.provider_id), region_of(node)
    assert instance_id is not None and region is not None
    return instance_id, region


def _not_ec2(request: DrainRequest, node: Node, regions: tuple[str, ...]) -> Refusal:
    provider = node.spec.provider_id
    if instance_id_from_provider_id(provider) is not None:
        return None
    return InvalidDrainRequest(
        f"Node {request.node!r} is not an EC2 instance (spec.providerID is {provider!r}); Spillway drains "
        "only nodes of the Auto Scaling groups it manages",
        field="node",
    )


def _other_instance(request: DrainRequest, node: Node, regions: tuple[str, ...]) -> Refusal:
    instance_id = instance_id_from_provider_id(node.spec.provider_id)
    if request.instance_id is None or request.instance_id == instance_id:
        return None
    return InvalidDrainRequest(
        f"Node {request.node!r} is instance {instance_id} now, not {request.instance_id} as requested "
        "(the name was reused by a new instance?); nothing was done",
        field="instance_id",
        stale=True,
    )


def _unknown_region(request: DrainRequest, node: Node, regions: tuple[str, ...]) -> Refusal:
    if region_of(node) is not None:
        return None
    return InvalidDrainRequest(
        f"cannot tell the region of Node {request.node!r} (no topology.kubernetes.io/region label and no "
        "zone in spec.providerID)",
        field="node",
    )


def _other_region(request: DrainRequest, node: Node, regions: tuple[str, ...]) -> Refusal:
    region = region_of(node)
    if request.region is None or request.region == region:
        return None
    return InvalidDrainRequest(
        f"Node {request.node!r} is in {region}, not {request.region} as requested", field="region"
    )


def _unmanaged_region(request: DrainRequest, node: Node, regions: tuple[str, ...]) -> Refusal:
    region = region_of(node)
    if region in regions:
        return None
    return InvalidDrainRequest(
        f"Node {request.node!r} is in {region}, a region this Spillway does not manage "
        f"(it manages {', '.join(regions)})",
        field="node",
    )


# Read from the Node alone, in order.
NODE_CHECKS = (_not_ec2, _other_instance, _unknown_region, _other_region, _unmanaged_region)

# What EC2 says of an instance that still runs (DescribeInstances' State.Name).
EC2_RUNNING = frozenset({"pending", "running"})
# what EC2 says of an instance its termination took out of its group (None: EC2 no longer knows it)
EC2_GONE: frozenset[str | None] = frozenset({"shutting-down", "terminated", None})


# How far back a Spot warning's drain looks for the group's detach of its instance: the interrupt
# function's snapshot (observe writes one every 20 s) saw the instance in the group, so the detach is
# younger than the snapshot; this leaves room for a late notice and the queue's retries.
DETACH_LOOKBACK = timedelta(minutes=30)


def _drains_outside_group(request: DrainRequest) -> bool:
    """Whether the drain may go on when no Auto Scaling group lists the node's instance any more: only a
    Spot interruption warning's forced drain (EC2 takes the instance back two minutes later whatever
    group it is in), which names the instance and the managed group it was in at the interrupt
    function's snapshot. Whether it goes on is :meth:`Drainer._detached_refusal`'s: that group must exist,
    be managed for the cluster and have detached the instance (its scaling activities say so), and EC2
    must still run it. aws-node-termination-handler cordons and drains the node of such a notice: its
    pods are evicted, the instance left to EC2 (no group to terminate it through). A scheduled change
    (a reboot or a stop leaves the instance running, and the node would stay emptied and cordoned),
    advice without force, a plan's drain, one by hand and a lifecycle drain (its group holds the
    instance in Terminating:Wait: one in no group is done) have nothing to drain, as before; and no
    request drains a node no group of the cluster ever held (a Karpenter node, a standalone instance)."""
    return (
        request.notice == "interruption"
        and request.force
        and request.leaving
        and request.lifecycle is None
        and request.plan_id is None
        and request.instance_id is not None
        and request.group is not None
    )


def _follows_instance(request: DrainRequest) -> bool:
    """Whether a notice's forced drain of a leaving instance (a Spot warning's, a scheduled change's
    within a day) drains it in the group it is in now when that is not the one the request names (moved
    to another group since the interrupt function's snapshot): it goes anyway, and the drain is the one
    a request naming its group now would be, every check of that group included (a group not managed
    for the cluster has nothing to drain, as before)."""
    return (
        request.notice is not None
        and request.force
        and request.leaving
        and request.lifecycle is None
        and request.plan_id is None
        and request.instance_id is not None
    )


def _outside_group_refusal(request: DrainRequest, node: Node, why: str) -> Refusal:
    """The refusal of a drain of an instance in no group: as for any such instance, ``why`` added."""
    instance_id, region = _located(node)
    return InvalidDrainRequest(
        f"instance {instance_id} of Node {request.node!r} is in no Auto Scaling group in {region} ({why}); "
        "Spillway drains only nodes of the groups it manages",
        field="node",
        stale=True,  # the group the request names no longer holds it
    )


def _placement_refusal(request: DrainRequest, node: Node, placement: Placement | None) -> Refusal:
    instance_id, region = _located(node)
    if placement is None:
        return InvalidDrainRequest(
            f"instance {instance_id} of Node {request.node!r} is in no Auto Scaling group in {region}; "
            "Spillway drains only nodes of the groups it manages",
            field="node",
            stale=True,  # a plan saw it in a managed group: it left it
        )
    if _moved(request, placement) and not _follows_instance(request):
        return _other_group(request, placement)
    return None


def _moved(request: DrainRequest, placement: Placement) -> bool:
    """Whether the instance is in another group than the one the request names."""
    return request.group is not None and request.group != placement.group


def _other_group(request: DrainRequest, placement: Placement) -> InvalidDrainRequest:
    return InvalidDrainRequest(
        f"instance {placement.instance_id} is in Auto Scaling group {placement.group!r}, not "
        f"{request.group!r} as requested",
        field="group",
        stale=True,
    )


def _terminates(request: DrainRequest, placement: Placement | None, asg: AutoScalingGroup | None) -> bool:
    """Whether the drain terminates the instance. Not one in no group (detached: EC2 reclaims it, and
    there is no group to terminate it through). An instance going away anyway is only drained at MinSize
    (EC2 reclaims it, the group replaces it) and out of its group's service (Standby is out of the
    desired capacity already); nor one a Spot notice's drain finds moved since the snapshot into a group
    with Capacity Rebalancing, which replaces it itself (the interrupt function judged the group it left:
    terminating with the decrement would leave that group one over, to scale in one of its choosing).
    But a scheduled change's instance at MinSize is terminated: EC2 acts only at the event's start, up to
    weeks later (and a reboot leaves it running), so the emptied node would stay cordoned and paid for
    until then; its terminate, refused the decrement, goes without it and the group launches a
    replacement (:meth:`Drainer._terminate_instance`). So is a rebalance recommendation's: advice, which
    no interruption need follow (a group with Capacity Rebalancing replaces the instance itself, and
    its drain terminates nothing)."""
    if not request.terminate or placement is None or asg is None:
        return False
    at_min = _below_min(asg, placement.instance_id) and request.notice not in ("scheduled", "rebalance")
    leaves = at_min or placement.lifecycle_state not in LIVE_STATES
    replaces = request.notice in ("interruption", "rebalance") and asg.CapacityRebalance is True
    return not (request.leaving and leaves) and not (_moved(request, placement) and replaces)


def _unmanaged_group(
    request: DrainRequest, node: Node, placement: Placement, asg: AutoScalingGroup, cluster: str
) -> Refusal:
    if is_managed(asg, cluster):
        return None
    return InvalidDrainRequest(
        f"Node {request.node!r} belongs to Auto Scaling group {placement.group!r} ({region_of(node)}), "
        f"which is not tagged for cluster {cluster!r} (it needs the tags {TAG_ENABLED} and "
        f"{TAG_CLUSTER_PREFIX}{cluster}); Spillway drains only nodes of the groups it manages",
        field="node",
    )


# A Node of the group out of its service, by hand (Standby) or leaving the group (Detaching), still runs
# pods. A drain of an instance leaving anyway (a Spot warning, a scheduled change) evicts them and leaves
# the instance to EC2, as aws-node-termination-handler drains any node an interruption notice names.
OUT_OF_SERVICE_STATES = frozenset({"EnteringStandby", "Standby", "Detaching"})


def _leaving_group(
    request: DrainRequest, node: Node, placement: Placement, asg: AutoScalingGroup, cluster: str
) -> Refusal:
    if request.lifecycle is not None:  # the group is terminating it: it must be waiting for the hook
        if placement.lifecycle_state in HOOK_WAIT_STATES:
            return None
        return InvalidDrainRequest(
            f"instance {placement.instance_id} of Node {request.node!r} is {placement.lifecycle_state} in "
            f"its group, not {WAITING} (nor Warmed:Terminating:Wait or Warmed:Pending:Wait of a warm pool): lifecycle hook {request.lifecycle.hook!r} holds it no longer "
            "(completed, or timed out and its DefaultResult applied); nothing was done",
            field="lifecycle",
            stale=True,
        )
    # Only a live instance (Pending*, InService) is its group's to drain: one Terminating*, Detach*,
    # EnteringStandby or Standby is leaving the group's service (Auto Scaling user guide, "Amazon EC2
    # Auto Scaling instance lifecycle"; entering standby decrements the desired capacity by default, so
    # terminating it with the decrement took a second one), and a warm pool's (Warmed:*) is outside its
    # capacity: TerminateInstanceInAutoScalingGroup "cannot be called on instances in a warm pool".
    if placement.lifecycle_state in LIVE_STATES:
        return None
    if request.leaving and placement.lifecycle_state in OUT_OF_SERVICE_STATES:
        return None  # EC2 takes it whatever its group does: drained, never terminated (Drainer.validate)
    if request.leaving and request.force and placement.lifecycle_state.startswith("Terminating"):
        # its group terminates it, under a hook that may not be Spillway's, and EC2 takes it within
        # minutes (a Spot warning): its pods are evicted now, the instance left to its group; a lifecycle
        # drain of Spillway's own hook takes such a node over (Drainer._taken_over_by)
        return None
    return InvalidDrainRequest(
        f"instance {placement.instance_id} of Node {request.node!r} is {placement.lifecycle_state} in its "
        "group, not in its service (Pending or InService); there is nothing to drain",
        field="node",
        stale=True,
    )


def _cordoned_by_others(
    request: DrainRequest, node: Node, placement: Placement, asg: AutoScalingGroup, cluster: str
) -> Refusal:
    if not node.spec.unschedulable or CORDONED_BY_SPILLWAY in node.metadata.annotations:
        return None
    if request.leaving or request.lifecycle is not None:
        return None  # its pods go with the instance anyway: drained, their cordon left as it is
    return InvalidDrainRequest(
        f"Node {request.node!r} was cordoned by somebody else (it has no {CORDONED_BY_SPILLWAY} "
        "annotation); Spillway never undoes another's cordon, so it does not drain such a node: uncordon "
        "it first, or drain it with kubectl",
        field="node",
        stale=True,
    )


def protected_node(drain: Drain | DrainRequest, node: Node) -> str | None:
    """The node-level mark that keeps a drain without ``force`` off ``node`` (its annotation's name), or
    None: ``cluster-autoscaler.kubernetes.io/scale-down-disabled`` or ``karpenter.sh/do-not-disrupt``
    ``true``, read as the planner reads them (``NodeInfo``). The validation refuses such a drain
    (:func:`_scale_down_disabled`, :func:`_do_not_disrupt`), and every eviction round asks again
    (:meth:`Drainer.evict`): a mark put on the node while it drains stops it there."""
    if drain.force:
        return None
    annotations = node.metadata.annotations
    if annotations.get(SCALE_DOWN_DISABLED, "").lower() == "true":
        return SCALE_DOWN_DISABLED
    return DO_NOT_DISRUPT if flag(annotations.get(DO_NOT_DISRUPT)) else None


def _scale_down_disabled(
    request: DrainRequest, node: Node, placement: Placement, asg: AutoScalingGroup, cluster: str
) -> Refusal:
    if protected_node(request, node) != SCALE_DOWN_DISABLED:
        return None
    return InvalidDrainRequest(
        f'Node {request.node!r} is annotated {SCALE_DOWN_DISABLED}=true; pass "force": true to drain '
        "it anyway",
        field="node",
        stale=True,
    )


def _do_not_disrupt(
    request: DrainRequest, node: Node, placement: Placement, asg: AutoScalingGroup, cluster: str
) -> Refusal:
    """A node annotated ``karpenter.sh/do-not-disrupt=true`` (the node-level form): the planner neither
    scales it down nor moves a pod off it (``node-do-not-disrupt``), so a plan's drain of one annotated
    since is stale, and a person's needs ``force``, as with ``scale-down-disabled``."""
    if protected_node(request, node) != DO_NOT_DISRUPT:
        return None
    return InvalidDrainRequest(
        f'Node {request.node!r} is annotated {DO_NOT_DISRUPT}=true; pass "force": true to drain it anyway',
        field="node",
        stale=True,
    )


def _at_min_size(
    request: DrainRequest, node: Node, placement: Placement, asg: AutoScalingGroup, cluster: str
) -> Refusal:
    if (
        not request.terminate
        or request.lifecycle
        or request.leaving
        or not _below_min(asg, placement.instance_id)
    ):
        return None
    return InvalidDrainRequest(
        f"Auto Scaling group {placement.group!r} ({region_of(node)}) is at its minimum size "
        f"(MinSize {asg.MinSize}, desired {asg.DesiredCapacity}): terminating {placement.instance_id} "
        'would take it below; lower MinSize, or drain with "terminate": false',
        field="node",
        stale=True,
    )


def _terminate_suspended(
    request: DrainRequest, node: Node, placement: Placement, asg: AutoScalingGroup, cluster: str
) -> Refusal:
    """A drain that would terminate an instance of a group whose Terminate process is suspended: Auto
    Scaling does not terminate InService instances then (EC2 Auto Scaling User Guide, "Considerations for
    suspending processes": only a forced delete of the group does), so the node would be emptied and its
    instance left running. An instance leaving anyway (a Spot warning, a lifecycle hook) is drained, and
    so is one Auto Scaling still terminates, not InService (Pending, Pending:Wait: :func:`terminate_held`)."""
    if (
        not request.terminate
        or request.lifecycle
        or request.leaving
        or not terminate_held(asg, placement.lifecycle_state)
    ):
        return None
    return InvalidDrainRequest(
        f"{_suspended(placement.group, region_of(node), placement.instance_id)}; resume the process, or drain "
        'with "terminate": false',
        field="node",
        stale=True,
    )


def _suspended(group: str, region: str | None, instance_id: str) -> str:
    """Why a drain does not terminate ``instance_id``: its group's Terminate process is suspended."""
    return (
        f"Auto Scaling group {group!r} ({region}) has its {TERMINATE} process suspended: it would not "
        f"terminate {instance_id}"
    )


def _below_min(asg: AutoScalingGroup, instance_id: str) -> bool:
    """Terminating the instance with ShouldDecrementDesiredCapacity takes the group below its MinSize
    (AWS refuses the call): the decrement is the instance's weight in a weighted group's units."""
    return asg.DesiredCapacity - asg.instance_weight(instance_id) < asg.MinSize


def cordon_reason(drain: Drain) -> str:
    """What the drain writes after the time in Spillway's cordon annotation: the node is its own, and
    which drain it is (``drain <name>: <reason>``; two drains of one node may share a reason, as the
    two of one scheduled change do). A drain no plan started holds it (:data:`HELD_DRAIN`): a plan must
    not uncordon it to reuse its room. A drain without a name (validated before drains had one) writes
    ``drain: <reason>`` as it did then."""
    held = "" if drain.plan_id else f"{HELD_DRAIN} "
    named = f" {drain.name}" if drain.name else ""
    return f"{held}drain{named}{_following(drain)}: {drain.reason}"


# An EC2 InstanceEventId (instance-event-0d59937288b749b32) as a cordon may carry it: no whitespace or ``:``
_EVENT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _following(drain: Drain) -> str:
    """`` for <event id>`` in a forced drain's cordon, after its name, when it follows an EC2 scheduled
    event (:attr:`Drain.scheduled_event`); else "". It comes before the reason, which the annotation's
    256 characters may cut."""
    return f" for {drain.scheduled_event}" if drain.force and drain.scheduled_event else ""


def holds(drain: Drain, annotation: str) -> bool:
    """Whether Spillway's cordon ``annotation`` (``<time> <reason>``, at most 256 characters) is the
    drain's own, not a later drain's that took the node over (a Spot warning's, say, beside a
    rebalance recommendation's): a drain undoes only its own cordon. The name comes before the reason,
    which the 256 characters may cut; a name has no ``:`` (:func:`drain_name`), so a named drain never
    reads an unnamed one's ``drain: ...`` as its own, nor an unnamed one a named one's."""
    return cordoned_for(annotation, cordon_reason(drain))


def _taken_over_by(drain: Drain, node: Node) -> str | None:
    """The cordon of another Spillway drain that took the node over from ``drain`` (the node is
    cordoned, and Spillway's annotation is not the drain's own: :func:`holds`), else None. A node a
    person uncordoned, or that somebody else cordoned (no annotation), is no hand-over.

    Two drains are never superseded. A lifecycle drain: the action it holds is completed by its token,
    by it alone; it also takes over a node another drain is still emptying when the group terminates
    it (:meth:`spillway.act.interrupt.Interrupter._lifecycle`), and that drain, without force, stops. A forced drain: the one that took over may be without force (a rebalance
    recommendation's after the Spot warning's), and would leave the pods only force evicts to die
    with the instance; a forced drain never times out, so going on costs no alarm.

    But a forced drain that follows an EC2 scheduled event stops for another forced drain following
    the same event (its cordon says ``for <event id>``: :func:`_following`): two of them wake together
    when a change moved later is announced again (each start has its forced drain, the one of the old
    start waiting on for the new one) or EC2 replaced the event with another, and the two ran side by
    side to the same deadline, both reaching TerminateInstanceInAutoScalingGroup with the decrement at
    once. The first to cordon goes on (the other's cordon step leaves that cordon: :meth:`Drainer.cordon`);
    the other stands by until that one's execution ends, and stops then, or takes the node over when it
    did not succeed (:meth:`Drainer._superseded`)."""
    if drain.lifecycle is not None:
        return None
    holder = node.metadata.annotations.get(CORDONED_BY_SPILLWAY)
    if not node.spec.unschedulable or holder is None or holds(drain, holder):
        return None
    words = holder.split(" ", 1)[-1]
    if drain.force and not (_following(drain) and f"{_following(drain)}: " in words):
        return None
    return words


# The words of a forced drain's cordon that names the EC2 event it follows (cordon_reason): its execution
_FOLLOWING_HOLDER = re.compile(r"^(?:held )?drain (?P<name>[^\s:]{1,80}) for [A-Za-z0-9_-]{1,64}: ")
# DescribeExecution's statuses of an execution that ended without succeeding, and MISSING
# (ExecutionDoesNotExist): nobody drains for it any more. Not PENDING_REDRIVE: somebody redrove it
# (RedriveExecution), and it runs again from the step that failed
ENDED_UNDRAINED = frozenset({"FAILED", "TIMED_OUT", "ABORTED", "MISSING"})


def holder_execution(words: str, own: str | None) -> str | None:
    """The ARN of the execution whose forced drain holds the node (``words``: its cordon after the
    time, which names its execution and the EC2 event it follows: :func:`cordon_reason`), an execution
    of the same state machine as ``own`` (the asking drain's execution ARN,
    ``arn:<partition>:states:<region>:<account>:execution:<machine>:<name>``); None when either is
    not of that form (a step called by hand, an execution started before Step Functions passed it)."""
    held = _FOLLOWING_HOLDER.match(words)
    if held is None or own is None or own.count(":") != 7 or ":execution:" not in own:
        return None
    return f"{own.rsplit(':', 1)[0]}:{held['name']}"


class _StandingBy(Exception):  # not an error: caught by evict and check alone
    """A forced drain whose node another forced drain following the same EC2 event holds, while that
    one's execution runs (:meth:`Drainer._superseded`): it evicts nothing and polls on."""

    def __init__(self, holder: str, status: str) -> None:
        super().__init__(holder)
        self.holder = holder
        self.status = status

    def note(self) -> str:
        how = "runs" if self.status == "RUNNING" else f"could not be read ({self.status[:80]})"
        return (
            f"the node is held by another forced drain following the same EC2 event ({self.holder[:160]}), "
            f"whose execution {how}: this drain evicts nothing and takes the node over if that one "
            "ends without succeeding"
        )


def _gone_round(previous: Mapping[str, Any]) -> dict[str, Any]:
    """The eviction round of a leaving instance whose Node is gone: done, nothing left to evict."""
    return {**_GONE, "rounds": int(previous.get("rounds") or 0), "evicted": previous.get("evicted") or [],
            "evicted_count": int(previous.get("evicted_count") or 0),
            **_carried(previous, "daemonsets", EVICTED_OR_DELETED)}  # fmt: skip


def _carried(previous: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    """What the rounds before evicted of the node's DaemonSet pods (``daemonsets``) and left to the next
    (``daemonsets_left``), and the pods whose lost eviction answer found them gone or deleted otherwise
    (``evicted_or_deleted``: :func:`_confirmed`), of ``keys``, carried by a round that does not come to
    them itself (it stands by, abandons the drain, finds the Node gone): the drain's record lists those
    pods with the others it evicted, and dropped here they were in no record or Event."""
    return {key: previous[key] for key in keys if key in previous}


def _standing_by(previous: Mapping[str, Any], standby: _StandingBy) -> dict[str, Any]:
    """An eviction round of a drain standing by (:class:`_StandingBy`): nothing evicted, not done."""
    remaining = list(previous.get("remaining") or [])
    return {
        "rounds": int(previous.get("rounds") or 0) + 1,
        "evicted": previous.get("evicted") or [],
        "evicted_count": int(previous.get("evicted_count") or 0),
        "blocked": [],
        "remaining": remaining[:LIST_LIMIT],
        "remaining_count": int(previous.get("remaining_count") or len(remaining)),
        "done": False,
        "forced": False,
        "standing_by": standby.holder[:200],
        "note": standby.note(),
        **_carried(previous, "daemonsets", "daemonsets_left", EVICTED_OR_DELETED),
        **_unconfirmed(_Evictions(), previous),
    }


_DRAIN_NAME = re.compile(r"^[^\s:]{1,80}$")


def drain_name(execution: Any) -> str:
    """The drain's name: its execution's (Step Functions names are 1 to 80 characters, no whitespace
    and no ``:``), or, when none is given (a step called by hand), a new unique one."""
    if execution is None:
        return f"drain-{uuid.uuid4().hex[:12]}"
    if not isinstance(execution, str) or not _DRAIN_NAME.match(execution):
        raise InvalidDrainRequest(
            f"an execution name of 1 to 80 characters without whitespace or ':', got {json.dumps(execution)[:100]}",
            field="execution",
        )
    return execution


_GONE: dict[str, Any] = {
    "blocked": [],
    "remaining": [],
    "remaining_count": 0,
    "done": True,
    "forced": False,
    "note": "the Node is gone: its instance went (reclaimed, or terminated by another drain of it)",
}


def _scale_in_protected(
    request: DrainRequest, node: Node, placement: Placement, asg: AutoScalingGroup, cluster: str
) -> Refusal:
    """A plan's drain that would terminate an instance protected from scale-in on its own since the plan
    (:func:`~spillway.model.nodegroup.scale_in_protected`: the planner keeps such a node, code
    ``scale-in-protected``; TerminateInstanceInAutoScalingGroup would not), or a notice's drain without
    force (a rebalance recommendation's, a scheduled change's more than a day out: advice, which leaves
    a protected node alone). A drain by hand names its node, and one of an instance leaving anyway (a
    Spot warning's) or held by a lifecycle hook goes whatever it says."""
    advice = request.notice is not None and not request.force
    planned = bool(request.plan_id) and not request.leaving
    if not (planned or advice) or not request.terminate or request.lifecycle:
        return None
    if placement.instance_id not in scale_in_protected(asg):
        return None
    return InvalidDrainRequest(
        f"instance {placement.instance_id} of Node {request.node!r} is protected from scale-in "
        f"(ProtectedFromScaleIn) in {placement.group}; nothing was done",
        field="node",
        stale=True,
    )


# With the instance's group read, in order.
GROUP_CHECKS = (
    _unmanaged_group,
    _leaving_group,
    _cordoned_by_others,
    _scale_down_disabled,
    _do_not_disrupt,
    _scale_in_protected,
    _terminate_suspended,
    _at_min_size,
)


def _busy_planned_drain(
    request: DrainRequest, verdicts: Sequence[PodVerdict], named: Collection[str] | None = None
) -> str | None:
    """Why a plan's drain is cancelled because its node runs work it did not plan to move, else None.
    A plan drains only nodes it saw empty; work that landed since must not be evicted by a scale-down
    ("no running job killed"). Nothing has been touched yet. A consolidation saw the node busy, and an
    idle node's drain saw the expendable pods it evicts: each moves the pods it names and only those
    (:func:`_changed_consolidation`; ``named``: those and their successors, :func:`_named`)."""
    if request.consolidation:
        return _changed_consolidation(request, verdicts, named)
    busy = [v.pod for v in verdicts if v.action != "ignore"]
    if request.plan_id and busy and not request.force:
        return (
            f"Node {request.node!r} runs {len(busy)} workload pod(s) now ({', '.join(busy[:3])}); the plan "
            "that chose it saw it empty, so this scale-down leaves it alone"
        )
    return None


def _pinned_refusal(drain: Drain, verdicts: Sequence[PodVerdict]) -> str | None:
    """Why a plan's drain is cancelled for a DaemonSet or static pod annotated do-not-disrupt since the
    plan (:func:`_pinned`), else None."""
    pinned = [v.pod for v in verdicts if v.reason == PINNED]
    if not pinned:
        return None
    return f"Node {drain.node!r} runs {pinned[0]}, {PINNED}; the plan's drain leaves the node alone"


def _changed_consolidation(
    request: DrainRequest, verdicts: Sequence[PodVerdict], named: Collection[str] | None = None
) -> str | None:
    """A consolidation is cancelled, before it touches anything, when the node runs a workload pod the
    plan did not plan to move, or when one it planned to move may no longer be evicted. A drain that
    keeps its node (``uncordon``: make room) moves the pods it names and leaves the others running, so
    other pods do not cancel it, protected ones included (the planner makes room on a node whose pods
    that may not move stay: those cancelled every such make room). ``named``: the pods it names and
    their successors (:func:`_named`)."""
    expected = set(request.pods if named is None else named)
    arrived = [v.pod for v in verdicts if v.action != "ignore" and v.pod not in expected]
    if arrived and not request.uncordon:
        return (
            f"Node {request.node!r} runs {len(arrived)} workload pod(s) the plan did not plan to move "
            f"({', '.join(arrived[:3])}); the consolidation leaves it alone"
        )
    protected = [v for v in verdicts if v.action == "keep" and (v.pod in expected or not request.uncordon)]
    if protected:
        what = "make room" if request.uncordon else "consolidation"
        return (
            f"Node {request.node!r}: {protected[0].pod} may no longer be evicted ({protected[0].reason}); "
            f"the {what} leaves the node alone"
        )
    return None


def _consolidation_refusal(request: DrainRequest) -> Refusal:
    if request.consolidation and request.force:
        return InvalidDrainRequest(
            "a consolidation moves only pods that may be evicted: it is never forced", field="force"
        )
    return None


WAITING = "Terminating:Wait"


def _lifecycle_refusal(request: DrainRequest) -> Refusal:
    """A lifecycle drain names the group whose hook holds the instance, and is no consolidation."""
    if request.lifecycle is None:
        return None
    if request.group is None:
        return InvalidDrainRequest(
            "required with lifecycle (the Auto Scaling group whose hook holds the instance)", field="group"
        )
    if request.consolidation:
        return InvalidDrainRequest(
            "a consolidation chooses its nodes; a lifecycle action's node is chosen by its group",
            field="lifecycle",
        )
    return _heartbeat_refusal(request.lifecycle, request)


def _foreign_hook(request: DrainRequest, owned: Sequence[str]) -> Refusal:
    """A lifecycle drain ends by completing its action with CONTINUE (its compensation too), and that
    ends the hook's wait: each terminate hook of a group holds the instance for its own owner (Auto
    Scaling user guide, "Complete a lifecycle action"). So a drain may name only a hook Spillway owns
    (``LIFECYCLE_HOOK_NAMES``); another team's (a log shipper's, say), named in a drain started by hand,
    would have its wait cut short. The interrupt function never asks for one (``not_our_hook``)."""
    if request.lifecycle is None or request.lifecycle.hook in owned:
        return None
    return InvalidDrainRequest(
        f"{request.lifecycle.hook!r} is not one of Spillway's lifecycle hooks ({', '.join(owned)}: the "
        "stack's LifecycleHookNames); the drain would complete it with CONTINUE and end its owner's wait. "
        "Name one of those, or add the hook to LifecycleHookNames if it is Spillway's; nothing was done",
        field="lifecycle.hook",
    )


def _heartbeat_refusal(lifecycle: LifecycleAction, request: DrainRequest) -> Refusal:
    """Heartbeats go with eviction rounds: a round at least every third of the HeartbeatTimeout, and no
    drain past the hook's global timeout (48 hours or 100 heartbeat timeouts, whichever is smaller)."""
    heartbeat = lifecycle.heartbeat_seconds
    if request.poll_seconds > heartbeat // 3:
        return InvalidDrainRequest(
            f"at most {heartbeat // 3} with a lifecycle action whose HeartbeatTimeout is {heartbeat} s "
            f"(a heartbeat goes with an eviction round), got {request.poll_seconds}",
            field="poll_seconds",
        )
    ceiling = min(GLOBAL_TIMEOUT_SECONDS, 100 * heartbeat)
    if request.deadline_seconds >= ceiling:
        return InvalidDrainRequest(
            f"below {ceiling} with a lifecycle action whose HeartbeatTimeout is {heartbeat} s (the hook's "
            f"global timeout, after which its DefaultResult applies whatever the heartbeats), got "
            f"{request.deadline_seconds}",
            field="deadline_seconds",
        )
    return None


def _uncordon_refusal(request: DrainRequest) -> Refusal:
    """A drain that uncordons keeps its node: it never terminates it, and a lifecycle action's node is
    being terminated by its group whatever the drain does."""
    if not request.uncordon:
        return None
    if request.lifecycle is not None:
        return InvalidDrainRequest(
            "not with lifecycle: the group is terminating the instance, so its node is never given back "
            "(uncordon keeps a node in service)",
            field="uncordon",
        )
    if request.terminate:
        return InvalidDrainRequest(
            'only with "terminate": false (uncordon keeps the node in service once its pods are evicted; '
            "a drain that terminates has no node to give back)",
            field="uncordon",
        )
    if request.leaving and request.force:
        return InvalidDrainRequest(
            'not with "leaving" and "force": EC2 takes the instance whatever the drain does, so its node is '
            "never given back (uncordon keeps a node in service)",
            field="uncordon",
        )
    return None


ARRIVED = "not among the pods the consolidation moves (it arrived after the plan): left running"
# a drain by hand that names its pods (consolidation: true, no plan) keeps the others the same way
UNNAMED = "not among the pods the drain names (it arrived after the drain was asked for): left running"
STAYS = "not among the pods that make room: it stays, as the node does"


# --- pods --------------------------------------------------------------------------------------


# a pod that stays (it tolerates the drain's cordon and taint) is neither evicted nor waited for: it
# goes with the node (spillway.planner.disruption.comes_back)
_ACTION: dict[str, Action] = {
    "ignore": "ignore",
    "wait": "wait",
    "never": "keep",
    "movable": "evict",
    "stays": "ignore",
}


def classify(
    pod: Pod,
    *,
    force: bool,
    now: datetime | None = None,
    planned: Collection[str] = (),
    dead_node: bool = False,
) -> PodVerdict:
    """What the drain does with ``pod``: the planner's disruption predicate, mapped one to one
    (ignore→ignore, wait→wait, never→keep, movable→evict, stays→ignore: a pod that tolerates the
    drain's cordon and taint would come straight back). An evictable pod needs no reason. ``now``:
    a pod stuck terminating (its kubelet gone) is ignored, not waited for. ``dead_node``
    (:func:`dead_node`): a pod that never started is ignored, as the plan judged it. ``planned``: the pods a
    plan's drain moves (a consolidation's, a make-room's, an idle node's expendable pods), each of
    which the plan found a move opt-in for (:func:`spillway.planner.disruption.assess_move`), which its
    local storage does not outweigh; the drain cannot read them again itself (the Jobs, the config's
    expendable cutoff), so the plan's word stands, as it does for the room they find elsewhere."""
    info = PodInfo.from_pod(pod)
    judged = assess(info, force=force, now=now, opted_in=info.key in planned, dead_node=dead_node)
    action = _ACTION[judged.verdict]
    grace = pod.spec.termination_grace_period_seconds
    return PodVerdict(
        info.key,
        action,
        "" if action == "evict" else judged.reason,
        info.priority,
        DEFAULT_GRACE_SECONDS if grace is None else grace,
        pod.metadata.deletion_timestamp,
        pod.metadata.uid or "",
    )


def dead_node(drain: Drain | DrainRequest, node: Node, now: datetime) -> bool:
    """The Node is NotReady, and has been for the plan's ``unready_minutes`` (its group's
    ``scale_down_unready_minutes``) as the drain reads it now: the planner's
    :func:`spillway.planner.disruption.dead`, so a pod that never started there goes with the node, as
    the plan judged it. Never for a drain that names no unready time (by hand, an older plan's), nor for a
    Node whose kubelet went silent meanwhile (Ready Unknown: its pods' statuses are stale)."""
    if drain.unready_minutes is None:
        return False
    return dead(NodeInfo.from_node(node), now, timedelta(minutes=drain.unready_minutes))


def _judge(
    drain: Drain, node: Node, pods: Sequence[Pod], now: datetime, named: frozenset[str]
) -> list[PodVerdict]:
    """What the drain does with each of ``pods`` (the node's, or one read again before its eviction):
    :func:`classify`, a consolidation evicting only its own pods (:func:`_only_expected`), from the
    deadline on a pod past its grace leaving (:func:`_grace_over`), on a ``node`` long NotReady a pod
    that never started going with it (:func:`dead_node`), a pod the plan did not name that tolerates
    the drain kept (:func:`_unplanned_stays`), a marked DaemonSet pod kept (:func:`_pinned`).
    ``named``: the pods the plan names and their successors on the node (:func:`_named`)."""
    planned, dead = _planned(drain, named), dead_node(drain, node, now)
    verdicts = [classify(p, force=drain.force, now=now, planned=planned, dead_node=dead) for p in pods]
    verdicts = _unplanned_stays(drain, _only_expected(drain, _grace_over(drain, verdicts, now)), named)
    return _pinned(drain, pods, verdicts)


GRACE_OVER = "terminating, its grace period over: leaving (its kubelet confirms the deletion after it)"


def _grace_over(drain: Drain, verdicts: list[PodVerdict], now: datetime) -> list[PodVerdict]:
    """From the deadline on, a terminating pod whose grace period has run out (its ``deletionTimestamp``
    has passed) no longer holds the drain: it has had all its time, and its kubelet kills it, then
    deletes it from the API once it has torn it down (kubernetes/kubernetes
    pkg/kubelet/status/status_manager.go, canBeDeleted), a moment after. Every pod the drain evicted
    is one by the deadline (:meth:`Drainer._evict_round` gives no grace past it), so the round at the
    deadline does not time out for a pod still being removed; one deleted by another hand with a grace
    past the deadline still does. Before the deadline such a pod is waited for: that costs nothing.
    Karpenter likewise stops waiting for a terminating pod past its grace (kubernetes-sigs/karpenter
    pkg/utils/pod/scheduling.go, IsStuckTerminating)."""
    if now < drain.deadline:
        return verdicts
    return [
        PodVerdict(v.pod, "ignore", GRACE_OVER, v.priority, v.grace, v.grace_ends)
        if v.action == "wait" and v.grace_ends is not None and v.grace_ends <= now
        else v
        for v in verdicts
    ]


def seconds_left(drain: Drain, now: datetime) -> int:
    """Whole seconds before the drain's deadline, the grace an eviction may give at most: 0 only once
    the deadline has come (less than a second left still gives one, so a pod is never killed without
    notice while there is time)."""
    left = (drain.deadline - now).total_seconds()
    return 0 if left <= 0 else max(1, int(left))


def _planned(drain: Drain, named: Collection[str] | None = None) -> frozenset[str]:
    """The pods a plan's drain moves (``consolidation``), with their successors when ``named`` says
    them (:func:`_named`): none for any other drain."""
    if not drain.consolidation:
        return frozenset()
    return frozenset(drain.pods if named is None else named)


def _controller(pod: Pod) -> tuple[str, str, str] | None:
    """The pod's controller ownerReference (``controller: true``) as (kind, name, uid), else None."""
    ref = next((o for o in pod.metadata.owner_references if o.controller), None)
    return None if ref is None else (ref.kind, ref.name, ref.uid)


def successors(drain: Drain | DrainRequest, pods: Sequence[Pod]) -> frozenset[str]:
    """The pods on the node that replace pods the plan named: a pod the plan did not name, that
    tolerates the drain's cordon and taint (:func:`spillway.planner.disruption.comes_back`), whose
    controller (kind, name and uid) is the one the plan's ``controllers`` gives for a named pod that is
    gone or terminating, and whose priority is no higher than that pod's. Its controller deleted the
    named pod and made this one on the same node (a DaemonSet-like controller of another kind, a Job or
    ReplicaSet recreating it): the same workload, so the drain treats it as the plan treated its
    predecessor. A pod of higher priority is other work of that controller (a Workflow's next step, a
    RayCluster's head), which the plan never judged. One successor per named pod gone, in name order: a
    controller that has more pods there now than the plan saw runs new work; a candidate being deleted
    itself is leaving, counts as named and takes no named pod's place. Never one for a request without
    ``controllers`` (a drain by hand, an older build's plan)."""
    if not drain.controllers:
        return frozenset()
    here = {f"{p.metadata.namespace or 'default'}/{p.metadata.name}": p for p in pods}
    gone: dict[tuple[str, str, str], list[int]] = {}  # a controller's named pods gone: their priorities
    for key, ctl in drain.controllers.items():
        pod = here.get(key)
        if key in drain.pods and (pod is None or pod.metadata.deletion_timestamp is not None):
            gone.setdefault((ctl.kind, ctl.name, ctl.uid), []).append(ctl.priority)
    found = set[str]()
    for key in sorted(set(here) - set(drain.pods)):
        ref = _controller(here[key])
        info = PodInfo.from_pod(here[key])
        places = gone.get(ref, []) if ref is not None else []
        # the lowest place it may take, so a higher one stays for a successor of higher priority
        fits = sorted(p for p in places if info.priority <= p)
        if not fits or not comes_back(info):
            continue
        found.add(key)
        if not info.terminating:
            places.remove(fits[0])
    return frozenset(found)


def _named(drain: Drain, pods: Sequence[Pod]) -> frozenset[str]:
    """The pods the plan's drain names and their successors on the node now (:func:`successors`)."""
    return frozenset(drain.pods) | successors(drain, pods)


def _only_expected(drain: Drain, verdicts: list[PodVerdict]) -> list[PodVerdict]:
    """A consolidation's pods to evict are the plan's: any other workload pod is kept (it keeps the node
    busy: at the deadline the drain fails and is compensated, the pod still running). A plan's drain of
    a node it saw idle (no pods named, not forced) expects none: a pod to evict there came after the
    plan (bound between validation and the cordon, which :func:`_busy_planned_drain` cannot see), and is
    kept the same way."""
    if not drain.consolidation:
        if drain.plan_id is None or drain.force:
            return verdicts
        return [
            PodVerdict(v.pod, "keep", ARRIVED, v.priority) if v.action == "evict" else v for v in verdicts
        ]
    expected = set(drain.pods)
    if drain.uncordon:  # make room: the node stays, and so do the pods the plan does not move
        return [
            PodVerdict(v.pod, "ignore", STAYS, v.priority) if v.pod not in expected else v for v in verdicts
        ]
    arrived = ARRIVED if drain.plan_id is not None else UNNAMED
    return [
        PodVerdict(v.pod, "keep", arrived, v.priority) if v.action == "evict" and v.pod not in expected else v
        for v in verdicts
    ]


def _arrivals(drain: Drain, verdicts: Sequence[PodVerdict]) -> list[str]:
    """The pods a plan's drain keeps because they came after the plan (:data:`ARRIVED`,
    :data:`UNPLANNED_STAYS`): the node runs work its plan never judged, so the drain is abandoned at once
    and the node given back, instead of holding it cordoned to the deadline (its pending pods kept off
    the node's free room meanwhile) and failing there as a timeout."""
    if drain.uncordon:  # make room: the node stays, and so do the pods it does not move
        return []
    return [v.pod for v in verdicts if v.action == "keep" and v.reason in _ARRIVAL_REASONS]


def _protected_since(drain: Drain, verdicts: Sequence[PodVerdict]) -> PodVerdict | None:
    """The first pod a drain that moves only the pods it expects (a consolidation, a make room, a plan's
    drain of a node it saw idle: :func:`_only_expected`) keeps for a protection (``do-not-disrupt``,
    ``safe-to-evict=false``, ``openai/do-not-drain``, no controller left): one it names that was marked
    since its validation (which cancels such a drain: :func:`_changed_consolidation`), or one that came
    so marked. The drain can no longer free the node (or the room), so it is abandoned at once, as for
    work that came after the plan, instead of evicting the others for nothing and failing at its deadline
    as a timeout. None for any other drain: one by hand waits for a protected pod to its deadline."""
    if not (drain.consolidation or (drain.plan_id is not None and not drain.force)):
        return None
    return next((v for v in verdicts if v.action == "keep" and v.reason not in _ARRIVAL_REASONS), None)


def _abandon(
    drain: Drain,
    previous: Mapping[str, Any],
    verdicts: Sequence[PodVerdict],
    why: str,
    evicted_now: Sequence[str] = (),
    refused: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The round that abandons the drain (:func:`_abandon_why`): nothing more evicted; the state machine
    gives the node back (GiveBack) and records the drain ``cancelled``, a success. ``evicted_now``,
    ``refused``: what the round did before it stopped, when a pod or the node was marked mid-round
    (:meth:`Drainer._evict_round`)."""
    evicted = [*(previous.get("evicted") or []), *evicted_now]
    return {
        "rounds": int(previous.get("rounds") or 0) + (1 if evicted_now else 0),
        "evicted": evicted[:LIST_LIMIT],
        "evicted_count": int(previous.get("evicted_count") or 0) + len(evicted_now),
        "blocked": [],
        "remaining": _remaining(verdicts, evicted_now, refused or {})[:LIST_LIMIT],
        "remaining_count": len([v for v in verdicts if v.action != "ignore"]),
        "done": False,
        "forced": False,
        "abandon": why,
        **_carried(previous, "daemonsets", EVICTED_OR_DELETED),
    }


def _abandon_why(drain: Drain, node: Node, verdicts: Sequence[PodVerdict]) -> str | None:
    """Why the round abandons the drain, or None: its node was annotated ``karpenter.sh/do-not-disrupt``
    or ``scale-down-disabled`` since its validation (:func:`protected_node`), a pod it expects may no
    longer be evicted (:func:`_protected_since`), or work came after the plan (:func:`_arrivals`)."""
    what = "consolidation" if drain.consolidation else "scale-down"
    if drain.plan_id is None:
        what = "drain"
    if drain.uncordon:
        what = "make room"
    given_back = f"the {what} is abandoned and the node given back"
    protected = protected_node(drain, node)
    if protected is not None:
        return (
            f"Node {drain.node!r} was annotated {protected}=true while it drained: {given_back}, its pods "
            'left running (pass "force": true to drain it anyway)'
        )
    kept = _protected_since(drain, verdicts)
    if kept is not None:
        return f"Node {drain.node!r}: {kept.pod} may no longer be evicted ({kept.reason}); {given_back}"
    arrived = _arrivals(drain, verdicts)
    if not arrived:
        return None
    since = "the plan" if drain.plan_id is not None else "the drain was asked for"
    return (
        f"Node {drain.node!r} runs {len(arrived)} pod(s) that came after {since} "
        f"({', '.join(arrived[:3])}): {given_back}, those pods running"
    )


UNPLANNED_STAYS = (
    "tolerates the drain's cordon and taint, and the plan did not name it (it arrived after the plan): "
    "it keeps the node, left running"
)
# why a drain that moves only the pods it expects keeps a pod that came after it was planned or asked for
_ARRIVAL_REASONS = (ARRIVED, UNNAMED, UNPLANNED_STAYS)


def _unplanned_stays(
    drain: Drain | DrainRequest, verdicts: list[PodVerdict], named: Collection[str] | None = None
) -> list[PodVerdict]:
    """A plan's drain that terminates its node keeps a pod that tolerates the drain's cordon and taint
    (``stays``: neither evicted nor waited for, it goes with the node) unless the plan named it: the
    planner calls no node idle, nor moves a pod, for such a pod of work (only an expendable one, which
    it names), so one on the node arrived after the plan, before the cordon or through it (its
    tolerations admit both). Kept, it cancels the drain at validation and holds the node to the
    deadline after the cordon: the drain fails and is undone, the pod running. ``named``: the pods the
    plan named and their successors (:func:`_named`: a named pod's controller replaced it under a new
    name), else ``drain.pods``. A drain by hand, a forced one, one of an instance leaving anyway and a
    make-room (its node stays) let it go with the node."""
    if not drain.plan_id or drain.force or drain.leaving or drain.uncordon or drain.lifecycle is not None:
        return verdicts
    expected = set(drain.pods if named is None else named)
    return [
        PodVerdict(v.pod, "keep", UNPLANNED_STAYS, v.priority, v.grace, v.grace_ends)
        if v.action == "ignore" and v.reason == TOLERATES_DRAIN and v.pod not in expected
        else v
        for v in verdicts
    ]


PINNED = (
    f"a DaemonSet or static pod annotated {DO_NOT_DISRUPT}=true: no drain evicts it, and it would die with "
    "the node this plan's drain removes (the planner keeps such a node, pod-never)"
)


def _pinned(drain: Drain, pods: Sequence[Pod], verdicts: list[PodVerdict]) -> list[PodVerdict]:
    """A plan's drain that removes its node (:func:`_scales_down`) keeps a DaemonSet or static (mirror)
    pod annotated ``karpenter.sh/do-not-disrupt=true`` (running or pending, not terminating): the planner
    drains no such node (:func:`spillway.planner.scaledown._pinned`, as Karpenter's
    ``ValidatePodsDisruptable`` reads every active pod of a node), so one annotated since the plan
    cancels the drain at its validation and abandons it at a round after the cordon
    (:func:`_protected_since`), instead of terminating the node with the pod on it. No drain evicts such
    a pod (:func:`daemonsets_to_evict`); a drain by hand, a forced one, a make room (its node stays)
    and a notice's or a lifecycle hook's (the instance goes anyway) let it go with the node."""
    if drain.force or not _scales_down(drain):
        return verdicts
    pinned = set()
    for pod in pods:
        info = PodInfo.from_pod(pod)
        if (
            (info.daemonset or info.mirror)
            and info.do_not_disrupt
            and not (info.terminal or info.terminating)
        ):
            pinned.add(info.key)
    if not pinned:
        return verdicts
    return [
        PodVerdict(v.pod, "keep", PINNED, v.priority, v.grace, v.grace_ends) if v.pod in pinned else v
        for v in verdicts
    ]


def _split(key: str) -> tuple[str, str]:
    namespace, _, name = key.partition("/")
    return namespace, name


# why the Eviction API turned a pod away this round (spillway.adapters.kube.KubeClient.evict)
BUDGET_ALLOWS_NONE = "a PodDisruptionBudget allows no disruption now"
MULTIPLE_BUDGETS = (
    "more than one PodDisruptionBudget selects it: the Eviction API refuses such a pod (HTTP 500) until "
    "only one does"
)
THROTTLED = (
    "throttled: the API server limits the request rate (HTTP 429, not a budget's), or other evictions under "
    "its budget kept winning the budget's update (HTTP 504); retried next round"
)
BUDGET_FORBIDS = (
    "its PodDisruptionBudget refuses every eviction (HTTP 403) until the disruption controller rewrites "
    "its status; retried next round"
)
NAMESPACE_TERMINATING = (
    "its namespace {namespace} is being deleted: the Eviction API refuses (HTTP 403) and the namespace "
    "controller deletes the pod; waited for"
)
_GONE_ALREADY = ""  # _try_evict: the pod was gone before the eviction
# A round starts no eviction once it has run this long (:meth:`Drainer._evict_round`): the drain
# function times out at 120 s (template.yaml, DrainFunction; tests/unit/test_template_contract.py holds
# this to under half of it), and an eviction without force costs three calls, each of which may be
# retried. A round cut there is lost whole (Step Functions catches the timeout and compensates), so each
# of those calls also ends by the invocation's time left (KubeClient.within, wired by Clients.drainer),
# and one cut there ends the round as any API error does, reporting the pods it evicted.
ROUND_SECONDS = 60
ROUND_SPENT = (
    f"not evicted yet: the round ran {ROUND_SECONDS} s, the most one may (the drain function's time), "
    "before it came to this pod; the next round evicts it"
)


INTERRUPTED = (
    "not evicted yet: the round stopped at an error of the API server after it had evicted others "
    "({error}); the next round evicts it"
)
INTERRUPTED_START = INTERRUPTED.partition("{")[0]
UNCONFIRMED = (
    "its eviction was sent and its answer lost ({error}): the API server may have applied it; the next "
    "round counts it evicted if the pod is terminating or gone, and evicts it if it is still running"
)


def _unconfirmed(done: _Evictions, previous: Mapping[str, Any]) -> dict[str, Any]:
    """A round's ``unconfirmed``: the pods whose eviction was sent and whose answer was lost
    (:data:`UNCONFIRMED`), each with the uid it was sent for, and those a round before left unresolved
    (one that stood by lists no pods: :func:`_standing_by`). At most one a round (the lost answer
    ends it), so the list stays short; capped all the same."""
    carried = [u for u in previous.get("unconfirmed") or [] if isinstance(u, Mapping)]
    both = [*carried, *_sent_unanswered(done)][:LIST_LIMIT]
    return {"unconfirmed": both} if both else {}


def _sent_unanswered(done: _Evictions, *, daemonsets: bool = False) -> list[dict[str, Any]]:
    """The entries of ``unconfirmed`` for the evictions of ``done`` whose answer was lost: the pod and
    the uid it was sent for, and ``daemonset`` for a DaemonSet pod evicted once the rest was gone
    (:meth:`Drainer._daemonsets`), which the next round counts among ``daemonsets`` if it landed."""
    flag = {"daemonset": True} if daemonsets else {}
    return [{"pod": pod, "uid": uid, **flag} for pod, uid in done.unconfirmed.items()]


# A round's (and a drain record's) pods whose eviction's answer was lost and which the next round found
# gone, or terminating with no sign of an eviction (:func:`_evicted_by_api`): this drain's eviction may
# have stopped them, or another hand deleted them; nothing tells which (:func:`_confirmed`).
EVICTED_OR_DELETED = "evicted_or_deleted"
# The pod condition the API server writes on a pod right before an eviction deletes it
# (pkg/registry/core/pod/storage/eviction.go, addConditionAndDeletePod; the PodDisruptionConditions
# feature, on by default since Kubernetes 1.26 and GA in 1.31), and its reason for an eviction.
DISRUPTION_TARGET, BY_EVICTION_API = "DisruptionTarget", "EvictionByEvictionAPI"


def _evicted_by_api(pod: Pod) -> bool:
    """The pod carries ``DisruptionTarget=True`` of reason ``EvictionByEvictionAPI``: an eviction was
    applied to it (the API server writes it before the eviction's deletion, whether the pod was running
    or already terminating). A deletion by another hand (``kubectl delete``, its controller scaling
    down, the namespace going) writes none, and the other disruptions their own reasons
    (``DeletionByTaintManager``, ``PreemptionByScheduler``, ``DeletionByPodGC``, ``TerminationByKubelet``)."""
    return any(
        c.type == DISRUPTION_TARGET and c.status == "True" and c.reason == BY_EVICTION_API
        for c in pod.status.conditions
    )


def _still_running(sent: Mapping[str, Any], running: Sequence[tuple[str, str | None]]) -> bool:
    """The pod an eviction was sent for (``sent``: its name and uid) is among the ``running`` pods (name,
    uid; not terminating): the eviction never landed. By name alone when it was sent with no uid."""
    return any(
        key == sent.get("pod") and (not sent.get("uid") or uid == sent.get("uid")) for key, uid in running
    )


def _not_landed(previous: Mapping[str, Any], pods: Sequence[Pod]) -> frozenset[str]:
    """The pods of ``previous``'s ``unconfirmed`` found running (the same uid, not terminating) among the
    node's ``pods``: their evictions never landed, and this round evicts them again
    (:meth:`Drainer._evict_round`, its ``again``)."""
    sent = [u for u in previous.get("unconfirmed") or [] if isinstance(u, Mapping)]
    running = _running(pods)
    return frozenset(str(u.get("pod")) for u in sent if _still_running(u, running))


def _landed_before(previous: Mapping[str, Any], again: frozenset[str]) -> bool:
    """Whether an eviction of ``previous``'s ``unconfirmed`` landed: its pod is not among those found
    running (``again``: :func:`_not_landed`). The round that learns it counts it (:func:`_confirmed`)
    in its output, which a raise would drop: the Catch keeps the round before's, which named the pod
    an eviction whose answer was lost. So that round reports, and the error is the next round's."""
    sent = [u for u in previous.get("unconfirmed") or [] if isinstance(u, Mapping)]
    return any(str(u.get("pod")) not in again for u in sent)


def _running(pods: Sequence[Pod] | None) -> list[tuple[str, str | None]]:
    """Name and uid of each of ``pods`` not terminating."""
    return [
        (f"{p.metadata.namespace}/{p.metadata.name}", p.metadata.uid)
        for p in pods or []
        if p.metadata.deletion_timestamp is None
    ]


def _confirmed(previous: Mapping[str, Any], pods: Sequence[Pod] | None) -> dict[str, Any]:
    """``previous`` with the pods of its ``unconfirmed`` (:data:`UNCONFIRMED`) that landed counted among
    those it evicted, judged by the node's pods listed now (``pods``; None: the Node is gone, and every
    pod with it). The pod of the uid sent is terminating with the mark the API server writes before an
    eviction deletes a pod (:func:`_evicted_by_api`): the eviction landed (the answer was lost after the
    API server applied it), and counted here it is named in the drain's record and Event as the pods it
    evicted are; it is evicted no more (the round's listing finds it terminating), so its budget is not
    charged twice. Terminating without that mark, or gone: this eviction may have stopped it, or another
    hand deleted it in that moment (``kubectl delete``, its controller); once it is gone its conditions
    went with it, and a cluster with the PodDisruptionConditions feature off (before 1.31) marks no
    eviction, so it is named apart (``evicted_or_deleted``), not counted evicted. Found running, the
    eviction never landed: dropped here, it is the round's to evict as any pod. A pod made again under
    its name (another uid) is another pod: the one sent for is gone."""
    sent = [u for u in previous.get("unconfirmed") or [] if isinstance(u, Mapping)]
    if not sent:
        return dict(previous)
    landed, unsure = _judged_sent(sent, pods)
    pods_ = [str(u.get("pod")) for u in landed if not u.get("daemonset")]
    agents = [str(u.get("pod")) for u in landed if u.get("daemonset")]
    out = {k: v for k, v in previous.items() if k != "unconfirmed"}
    out["evicted"] = [*(previous.get("evicted") or []), *pods_][:LIST_LIMIT]
    out["evicted_count"] = int(previous.get("evicted_count") or 0) + len(pods_)
    # a DaemonSet pod evicted once the rest was gone (:meth:`Drainer._daemonsets`)
    return out | _appended(previous, "daemonsets", agents) | _appended(previous, EVICTED_OR_DELETED, unsure)


def _appended(previous: Mapping[str, Any], key: str, more: Sequence[str]) -> dict[str, Any]:
    """``previous``'s list ``key`` with ``more`` after it, when there are more."""
    return {key: [*(previous.get(key) or []), *more][:LIST_LIMIT]} if more else {}


def _judged_sent(
    sent: Sequence[Mapping[str, Any]], pods: Sequence[Pod] | None
) -> tuple[list[Mapping[str, Any]], list[str]]:
    """Of the evictions ``sent`` whose answer was lost, those whose pod is terminating with an eviction's
    mark (:func:`_marked_evicted`), and the names of those whose pod is neither that nor running:
    gone, or deleted otherwise (:func:`_confirmed`)."""
    running, evicted = _running(pods), _marked_evicted(pods)
    landed = [u for u in sent if (str(u.get("pod")), u.get("uid") or None) in evicted]
    unsure = [str(u.get("pod")) for u in sent if u not in landed and not _still_running(u, running)]
    return landed, unsure


def _marked_evicted(pods: Sequence[Pod] | None) -> set[tuple[str, str | None]]:
    """Name and uid (and name alone: an eviction sent without a uid) of each of ``pods`` terminating with
    the mark of an eviction (:func:`_evicted_by_api`)."""
    keys: set[tuple[str, str | None]] = set()
    for p in pods or []:
        if p.metadata.deletion_timestamp is not None and _evicted_by_api(p):
            name = f"{p.metadata.namespace}/{p.metadata.name}"
            keys.update({(name, p.metadata.uid), (name, None)})
    return keys


@dataclass(slots=True)
class _Evictions:
    """What a round's evictions did (:meth:`Drainer._evict_round`): the pods evicted, in order; those
    not evicted, each with why; why the drain stops here (a pod or the node marked since the listing:
    :func:`_abandon_why`), else None; the error of the API server that ended the round after it had
    evicted pods (:data:`INTERRUPTED`), else None; the pods it left for the next round for its own
    sake (its time spent, the server throttling), the one throttled and every one after it; when it
    began, which bounds the DaemonSet evictions after it too (:meth:`Drainer._daemonsets`); the
    ``metadata.uid`` of each pod evicted, by its name ("" when the listing gave none), by which the
    listing after the evictions tells that pod from another made under its name since
    (:func:`_marked_as_evicted`); the pod whose eviction was sent and whose answer was lost, with the
    uid it was sent for (:data:`UNCONFIRMED`: the next round tells by the pod whether it landed); and
    whether the round learnt that an eviction a round before lost the answer of landed
    (:func:`_landed_before`), which it reports rather than raise an error that would drop it."""

    pods: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    stop: str | None = None
    interrupted: str | None = None
    later: list[str] = field(default_factory=list)
    started: datetime | None = None
    uids: dict[str, str] = field(default_factory=dict)
    unconfirmed: dict[str, str] = field(default_factory=dict)
    learnt: bool = False

    def has_news(self, again: frozenset[str]) -> bool:
        """Whether the round has anything to report that an error raised now would drop: pods it
        evicted, an eviction whose answer it lost (not one of ``again``: :meth:`Drainer._evict_round`),
        or a lost answer of a round before that it found landed (``learnt``)."""
        return bool(self.pods or self.learnt or set(self.unconfirmed) - again)


def _agents(pods: Sequence[Pod], untried: Any) -> list[PodVerdict]:
    """The DaemonSet pods a round evicts (:meth:`Drainer._daemonsets`): those chosen, and when a round
    before left some (``untried``, their names), only those."""
    agents = [_evicted_as_listed(pod) for pod in pods]
    return [a for a in agents if a.pod in untried] if isinstance(untried, list) else agents


def _daemonsets_out(before: Sequence[str], done: _Evictions, round_: Mapping[str, Any]) -> dict[str, Any]:
    """A round's DaemonSet evictions (:meth:`Drainer._daemonsets`) as its output: ``before``, those of
    the rounds before it; ``round_``, the round's output so far. A DaemonSet pod whose eviction was sent
    and whose answer was lost is ``unconfirmed``, and the next round's (``daemonsets_left``, the drain not
    done), with those the error left untried: that round counts it evicted if it finds it terminating
    or gone (:func:`_confirmed`), else evicts it again (a second failure is raised, the DaemonSet
    evictions best effort as ever). Before, it was in no list: never looked at again, nor named in a
    failed drain's record."""
    out: dict[str, Any] = {"daemonsets": [*before, *done.pods][:LIST_LIMIT]}
    if done.interrupted:
        out["daemonsets_error"] = done.interrupted
    lost = _sent_unanswered(done, daemonsets=True)
    if lost:
        out["unconfirmed"] = [*(round_.get("unconfirmed") or []), *lost][:LIST_LIMIT]
        untried = [p for p, why in done.refused.items() if why.startswith(INTERRUPTED_START)]
        done.later = [*done.unconfirmed, *untried, *done.later]
    if done.stop is not None:
        out.update(abandon=done.stop, done=False)
    elif done.later:
        out.update(daemonsets_left=done.later[:LIST_LIMIT], done=False)
    return out


def _marked_as_evicted(drain: Drain, pods: Sequence[Pod], evicted: Mapping[str, str]) -> list[dict[str, str]]:
    """The pods of ``evicted`` (name → the ``metadata.uid`` evicted) that the listing after their
    eviction finds marked never to be disturbed (:func:`~spillway.planner.disruption.marked_never`),
    each with its mark. The round read each pod again right before its eviction and evicted none so
    marked, so the mark came after that read: in the moment before the eviction, which no read can
    close (a ``resourceVersion`` precondition spends the pod's budget before the API server checks it:
    :meth:`Drainer._judged_again`), or on the pod already leaving. Either way whoever marked it should
    hear that it was evicted. None of a forced drain, which evicts marked pods on purpose.

    A pod is matched by its uid: one made again under the name of a pod evicted (a StatefulSet's
    ordinal, a training operator's ``<job>-worker-0``, back on the node it tolerates) is another pod,
    never evicted, whose mark (its template's, say) says nothing of the eviction; by name only when the
    listing gave the evicted pod no uid. What it cannot see: a pod already deleted by that listing (a
    grace of 0, a quick shutdown) is gone from the API with its metadata, and the eviction's answer is a
    Status, not the pod, so a mark put on it in that moment is known to nobody but its kubelet."""
    if drain.force:
        return []
    marked = []
    for pod in pods:
        info = PodInfo.from_pod(pod)
        uid = evicted.get(info.key)
        same = uid is not None and (not uid or uid == pod.metadata.uid)
        mark = marked_never(info) if same else None
        if mark is not None:
            marked.append({"pod": info.key, "mark": mark[1]})
    return marked


def _marked_message(marked: Sequence[Mapping[str, str]]) -> str:
    named = "; ".join(f"{m['pod']} ({m['mark']})" for m in marked[:EVENT_PODS])
    more = f" and {len(marked) - EVENT_PODS} more" if len(marked) > EVENT_PODS else ""
    return (
        f"Evicted pod(s) marked never to be disturbed as they were evicted: {named}{more}. The drain read "
        "each again right before its eviction, unmarked; the mark came after that read"
    )


def _server_words(exc: KubeError) -> str:
    """What the API server said, without our operation's prefix."""
    return str(exc).rpartition(" Forbidden: ")[2][:300]


def _held_by_budget(why: str) -> bool:
    """A refusal that a PodDisruptionBudget makes (what a round reports as ``blocked``)."""
    return why in (BUDGET_ALLOWS_NONE, MULTIPLE_BUDGETS) or why.startswith(BUDGET_FORBIDS)


def _remaining(
    verdicts: Sequence[PodVerdict], evicted_now: Sequence[str], refused: Mapping[str, str]
) -> list[dict[str, str]]:
    """The pods that still keep the node busy after a round, each with why it is still there."""
    remaining = []
    for verdict in (v for v in verdicts if v.action != "ignore"):
        if verdict.pod in refused:
            reason = refused[verdict.pod]
        elif verdict.pod in evicted_now:
            reason = "evicted, terminating"
        else:
            reason = verdict.reason or "not evicted yet"
        remaining.append({"pod": verdict.pod, "reason": reason})
    return remaining


CRITICAL_LAST = "critical (priority class system-cluster-critical or system-node-critical): evicted once the other pods are gone"


def _critical_held(verdicts: Sequence[PodVerdict]) -> dict[str, str]:
    """The critical pods a round does not evict yet (pod → why): while any other pod is still on the
    node (to evict, terminating, or kept), none. A critical pod (:func:`~spillway.model.cluster.is_critical`:
    priority at least SystemCriticalPriority, which only the system-cluster-critical and system-node-critical classes
    give: CoreDNS, a CSI or CNI controller) serves the others while they shut down; Karpenter evicts
    such pods only once the rest are gone (kubernetes-sigs/karpenter
    pkg/controllers/node/termination/terminator/terminator.go, groupPodsByPriority), as the kubelet's
    graceful node shutdown stops them last (kubernetes/kubernetes pkg/kubelet/types IsCriticalPod).
    A forced drain at its deadline has no time for turns and evicts all (the caller's ``left`` 0). The
    planner judges a node so: a critical pod it moves at a cost must have its grace left once the others
    had theirs (:func:`spillway.planner.disruption.waits_for_others`)."""
    others_left = any(v.action != "ignore" and not is_critical(v.priority) for v in verdicts)
    if not others_left:
        return {}
    return {v.pod: CRITICAL_LAST for v in verdicts if is_critical(v.priority) and v.action == "evict"}


OUT_OF_TIME = "not evicted: the deadline has come"


GRACE_CUT_NEXT = "not evicted: the next round gives the drain up ({cut})"


def _out_of_time(
    verdicts: Sequence[PodVerdict], previous: Mapping[str, Any], cut: str | None = None
) -> dict[str, str]:
    """Why each pod a drain without force no longer evicts at its deadline is still there: what the
    round before said of it (a budget held it...), else that the time is up (``cut``: that a pod's
    whole grace no longer fits, :func:`_grace_cut`)."""
    earlier = {
        entry.get("pod"): entry.get("reason")
        for entry in previous.get("remaining") or []
        if isinstance(entry, Mapping)
    }
    why = OUT_OF_TIME if cut is None else GRACE_CUT_NEXT.format(cut=cut[:300])
    return {v.pod: str(earlier.get(v.pod) or why) for v in verdicts if v.action == "evict"}


def _grace_cut(
    drain: Drain, verdicts: Sequence[PodVerdict], left: int, previous: Mapping[str, Any]
) -> str | None:
    """Why the drain gives up now rather than cut a pod's shutdown short, or None: a pod of its
    ``whole_grace`` (one its plan moves at a cost: :attr:`DrainRequest.whole_grace`) is still to be
    evicted (a budget held it, a round was throttled, it is a critical pod waiting for the others) and
    its ``terminationGracePeriodSeconds`` is more than the ``left`` seconds before the deadline. Its
    eviction would give it only those (:meth:`Drainer._evict_round`), and the kubelet would kill it
    mid-shutdown: a move to save cost become a killed job. Giving up leaves the node as it was, its
    pods running, which is what such a drain (a consolidation's, a make room's) is for when it cannot
    finish: cluster-autoscaler gives every eviction the same grace, capped by
    --max-graceful-termination-sec, whenever it comes (core/scaledown/actuation evictPod), and Karpenter
    clamps it only to a node's own terminationGracePeriod, which a consolidation does not set. Every
    other drain cuts (its instance goes anyway; a shortened grace beats none), and so does one without
    ``whole_grace`` (an older build's plan)."""
    if not drain.whole_grace or drain.force or drain.leaving:
        return None
    whole = set(drain.whole_grace)
    short = [v for v in verdicts if v.action == "evict" and v.pod in whole and v.grace > left]
    if not short:
        return None
    pod = min(short, key=lambda v: (v.priority, v.pod))
    earlier = {
        e.get("pod"): e.get("reason") for e in previous.get("remaining") or [] if isinstance(e, Mapping)
    }
    still = f", still there: {earlier[pod.pod]}" if earlier.get(pod.pod) else ""
    more = f" (and {len(short) - 1} more such pod(s))" if len(short) > 1 else ""
    return (
        f"Node {drain.node!r}: {pod.pod} has terminationGracePeriodSeconds {pod.grace} and only {left} s are "
        f"left before the deadline ({drain.deadline_seconds} s{still}){more}; the plan moves it at a cost, "
        "so it is evicted with its whole grace or not at all: the drain gives up rather than cut its "
        "shutdown short, and its node is given back, its pods running"
    )


def _listing(verdicts: Sequence[PodVerdict]) -> list[dict[str, str]]:
    return [{"pod": v.pod, "reason": v.reason} for v in verdicts[:LIST_LIMIT]]


def _describe_pods(entries: Sequence[Mapping[str, str]], limit: int = 5) -> str:
    shown = ", ".join(f"{e['pod']} ({e['reason']})" for e in entries[:limit])
    more = len(entries) - limit
    return shown + (f" and {more} more" if more > 0 else "")


# --- the steps -------------------------------------------------------------------------------------


class OutcomeHook(Protocol):
    """Told each drain's outcome and who it was (the outcome's identity: ``node``, ``plan_id``, ...;
    None for counts that name no drain: ``count`` drains at once for a scale-down part that drained
    none, an unregistered instance's removal)."""

    def __call__(self, outcome: str, who: Mapping[str, Any] | None, count: int = 1, /) -> None: ...


def _no_hook(outcome: str, who: Mapping[str, Any] | None, count: int = 1, /) -> None:
    return None


# The outcomes of a scale-down part that drained none of its nodes (scale_down.asl.json): skipped, a part
# before it was stopped (ABORTED); lapsed, it waited for a part before that still ran until its plan's
# claim on its nodes lapsed (its output's lapsed_behind names that part). Each is its own Outcome
# dimension of DrainOutcome: the one is an operator's choice, the other a drain slower than the claim.
UNDRAINED = ("skipped", "lapsed")


class Drainer:
    """The drain steps for one cluster. Build once per container; every method is one Lambda action."""

    def __init__(
        self,
        kube: Cluster,
        cloud: Cloud,
        *,
        ledger: Ledger,
        cluster: str,
        regions: Sequence[str],
        clock: Callable[[], datetime] = utcnow,
        on_outcome: OutcomeHook = _no_hook,
        lifecycle_hooks: Sequence[str] = DEFAULT_LIFECYCLE_HOOKS,
        daemonset_eviction: DaemonSetEviction | None = None,
        executions: Callable[[str], str] | None = None,
        deadline: Deadline = NO_DEADLINE,
    ) -> None:
        self.kube = kube
        self.cloud = cloud
        self.ledger = ledger  # the state table: a gang orphan's sweep claims its instance there
        self.cluster = cluster
        self.regions = tuple(regions)
        self.clock = clock
        self.on_outcome = on_outcome
        self.lifecycle_hooks = tuple(lifecycle_hooks)  # the terminate hooks Spillway owns
        self.daemonset_eviction = daemonset_eviction or DaemonSetEviction()
        # an execution's status by its ARN (DescribeExecution: spillway.adapters.sfn.Executions.status),
        # read by a forced drain standing by for another (_superseded); None: it never stands by
        self.executions = executions
        # the invocation's time (spillway.clients.Clients.drainer, which bounds the kube calls by it too):
        # a lifecycle heartbeat is started only when one AWS call fits in it
        self.deadline = deadline

    # validate ----------------------------------------------------------------------------------

    def validate(self, raw: Any, execution: Any = None) -> dict[str, Any]:
        """Check the request against the cluster and AWS, reading only. Returns ``{"drain", "preview"}``:
        the normalised drain, and what the drain would do (the whole answer of a ``dry_run``); or
        ``{"cancelled": {node, instance_id, group, region, plan_id, reason, note}}`` when the plan's
        premise is gone (its claim lapsed, its node runs work it did not plan to move, or a check
        refused it ``stale``: the node or its group changed since the plan): nothing is touched, plans
        judge the node again once the plan's claim on it lapses (at once for a lapsed claim), and the
        drain ends as a success recorded
        ``cancelled`` (an answer, not an error: normal operation raises no alarm); or, before anything
        is read, ``{"waiting": {until, request}}`` for a request whose ``not_before`` is still ahead
        (:func:`waiting`): DrainNode waits until then and validates it again. A drain by hand that waits
        is checked first as it would be without ``not_before`` (the node read, touching nothing), so
        that a bad request fails at once, and it is checked again when it wakes.
        ``execution``: the DrainNode execution's name, which becomes the drain's (one is made up when
        none is given)."""
        request = parse_request(raw)
        name = drain_name(execution)
        _refuse(_other_cluster(request, self.cluster))
        _refuse(_foreign_hook(request, self.lifecycle_hooks))
        early = self._not_yet(request, raw)
        if isinstance(early, dict):
            if "waiting" in early and _by_hand(request):
                self._checked(request)  # a bad request fails at once, as without not_before
            return early
        request, followed = early
        lapsed = _lapsed_claim(request, self.clock())
        if lapsed is not None:
            return _cancelled(_requested(request), lapsed)
        try:
            node, placement, asg = self._checked(request)
        except InvalidDrainRequest as refusal:
            if refusal.stale and request.plan_id:
                return _cancelled(_requested(request), _stale_premise(refusal))
            if refusal.stale and request.notice is not None:
                return self._skipped(request, refusal)
            raise
        terminate = _terminates(request, placement, asg)
        drain = self._new_drain(request, node, placement, terminate=terminate, name=name)
        if followed is not None:
            drain = drain.model_copy(update={"scheduled_event": followed})
        now = self.clock()
        pods = self.kube.pods_on_node(drain.node)
        named = _named(drain, pods)
        planned, dead = _planned(drain, named), dead_node(drain, node, now)
        verdicts = [classify(p, force=request.force, now=now, planned=planned, dead_node=dead) for p in pods]
        verdicts = _pinned(drain, pods, _unplanned_stays(request, verdicts, named))
        busy = _pinned_refusal(drain, verdicts) or _busy_planned_drain(request, verdicts, named)
        if busy is not None:
            return _cancelled({**self._identity(drain), "planned_at": drain.planned_at}, busy)
        verdicts = _only_expected(drain, verdicts)
        if request.dry_run:
            self.on_outcome("dry_run", self._identity(drain))
        return {"drain": drain.model_dump(), "preview": self._preview(drain, verdicts, asg)}

    def _not_yet(
        self, request: DrainRequest, raw: Mapping[str, Any]
    ) -> dict[str, Any] | tuple[DrainRequest, str | None]:
        """Before anything of the node is read: ``{"waiting": ...}`` while ``not_before`` is ahead
        (:func:`waiting`); then, for a scheduled change's drain, what EC2's scheduled events of the
        instance say now (:func:`follow_change`): cancelled, waiting again, or the request to drain for,
        with the id of the event it follows (:func:`followed_event`; None for any other drain).
        EC2 unreadable (an error after the SDK's retries): the request as planned, its reason saying so,
        since AWS retiring the instance with its pods on it is worse than a drain it no longer needed."""
        later = waiting(request, raw, self.clock())
        if later is not None or request.scheduled_start is None:
            return later if later is not None else (request, None)
        assert request.region is not None and request.instance_id is not None  # _scheduled_refusal
        try:
            events = self.cloud.scheduled_events(request.region, request.instance_id)
        except AwsError as exc:
            note = f"; EC2's scheduled events unread ({str(exc)[:100]}): drained as planned"
            return request.model_copy(update={"reason": (_reason_of(request) + note)[:256]}), None
        answer = follow_change(request, raw, events, self.clock())
        if isinstance(answer, dict):
            return answer
        event = followed_event(request, events)
        named = event.event_id if event is not None and _EVENT_ID.fullmatch(event.event_id) else None
        return answer, named

    def _skipped(self, request: DrainRequest, refusal: InvalidDrainRequest) -> dict[str, Any]:
        """A notice's drain its node refuses (:func:`_left_alone`): cancelled, with the notice and the
        Node's uid for the record step's ``SpillwayDrainSkipped`` Event, when the Node is still there and
        still the notice's instance's (a Node of another instance by its name is no business of it)."""
        answer = _cancelled(_requested(request), _left_alone(request, refusal))
        answer["cancelled"]["notice"] = request.notice
        try:
            node = self.kube.get_node(request.node)
        except NodeNotFound:
            return answer
        if request.instance_id in (None, instance_id_from_provider_id(node.spec.provider_id)):
            answer["cancelled"]["node_uid"] = node.metadata.uid
        return answer

    def _checked(self, request: DrainRequest) -> tuple[Node, Placement | None, AutoScalingGroup | None]:
        """The node, its instance's place in its group and the group, once every check of them passed;
        else the first refusal, raised (``stale`` when only the world changed since a plan). No place
        and no group for an instance its group detached since the snapshot that EC2 still runs, when the
        drain is one that drains it all the same (:func:`_drains_outside_group`,
        :meth:`_detached_refusal`). The group the instance is in now, every check of it run, for a
        forced notice's drain of one moved to another managed group since (:func:`_follows_instance`)."""
        node = self._named_node(request)
        _refuse(_first_refusal(NODE_CHECKS, request, node, self.regions))
        instance_id, region = _located(node)
        placement = self.cloud.placement(region, instance_id)
        if placement is None and _drains_outside_group(request):
            _refuse(self._detached_refusal(request, node))
            return node, None, None
        _refuse(_placement_refusal(request, node, placement))
        assert placement is not None
        asg = self.cloud.describe_group(region, placement.group)
        if _moved(request, placement) and not is_managed(asg, self.cluster):
            _refuse(_other_group(request, placement))  # moved out of the cluster's groups: not ours
        _refuse(_first_refusal(GROUP_CHECKS, request, node, placement, asg, self.cluster))
        return node, placement, asg

    def _detached_refusal(self, request: DrainRequest, node: Node) -> Refusal:
        """Why a Spot warning's forced drain of an instance in no group has nothing to drain, else None
        (it is drained, never terminated): the group the request names (the interrupt function's
        snapshot's, or the one AWS put the instance in) must exist and be managed for the cluster, its
        scaling activities must show it detached the instance within :data:`DETACH_LOOKBACK`
        (:meth:`~spillway.ports.Cloud.detach_recorded`), and
        EC2 must still run it (``pending`` or ``running``). A node no group of the cluster ever held, or
        one that left it by termination, is refused as before, whatever the request says."""
        instance_id, region = _located(node)
        group = request.group
        assert group is not None  # _drains_outside_group
        try:
            asg = self.cloud.describe_group(region, group)
        except AsgNotFound:
            return _outside_group_refusal(request, node, f"Auto Scaling group {group!r} does not exist")
        if not is_managed(asg, self.cluster):
            return _outside_group_refusal(
                request, node, f"Auto Scaling group {group!r} is not managed for cluster {self.cluster!r}"
            )
        if not self.cloud.detach_recorded(region, group, instance_id, self.clock() - DETACH_LOOKBACK):
            return _outside_group_refusal(
                request, node, f"no recent scaling activity of {group!r} detached it"
            )
        state = self.cloud.instance_states(region, [instance_id]).get(instance_id)
        if state not in EC2_RUNNING:
            return _outside_group_refusal(request, node, f"EC2: {state or 'unknown'}")
        return None

    def _new_drain(
        self, request: DrainRequest, node: Node, placement: Placement | None, *, terminate: bool, name: str
    ) -> Drain:
        now = self.clock()
        deadline = _deadline(request, now)
        instance_id, region = _located(node)
        return Drain(
            cluster=self.cluster,
            node=request.node,
            node_uid=node.metadata.uid,
            reason=_reason_of(request),
            deadline_seconds=int((deadline - now).total_seconds()),
            poll_seconds=request.poll_seconds,
            terminate=terminate and request.lifecycle is None,  # the group terminates it
            force=request.force,
            dry_run=request.dry_run,
            instance_id=instance_id,
            group=placement.group if placement is not None else None,
            region=region,
            plan_id=request.plan_id,
            planned_at=request.planned_at,
            consolidation=request.consolidation,
            pods=tuple(request.pods),
            controllers=dict(request.controllers),
            whole_grace=tuple(request.whole_grace),
            lifecycle=request.lifecycle,
            uncordon=request.uncordon,
            leaving=request.leaving or request.lifecycle is not None,
            notice=request.notice,
            unready_minutes=request.unready_minutes,
            name=name,
            started_at=iso(now),
            deadline_at=iso(deadline),
        )

    def _preview(
        self, drain: Drain, verdicts: Sequence[PodVerdict], asg: AutoScalingGroup | None
    ) -> dict[str, Any]:
        """What the drain would do: the whole answer of a ``dry_run``."""
        evict = sorted((v for v in verdicts if v.action == "evict"), key=lambda v: (v.priority, v.pod))
        keep = [v for v in verdicts if v.action in ("keep", "wait")]
        terminates = (
            None
            if asg is None
            else {
                "instance_id": drain.instance_id,
                "group": drain.group,
                "region": drain.region,
                "desired_capacity": {
                    "from": asg.DesiredCapacity,
                    "to": asg.DesiredCapacity - asg.instance_weight(drain.instance_id),
                },
            }
        )
        return {
            **self._identity(drain),
            "outcome": "dry_run",
            "changed": "nothing (dry run)",
            "would_evict": [v.pod for v in evict[:LIST_LIMIT]],
            "would_evict_count": len(evict),
            "would_keep": _listing(keep),
            "would_ignore": _listing([v for v in verdicts if v.action == "ignore"]),
            "would_terminate": terminates if drain.terminate else None,
            **_outside_group(drain),
            "would_uncordon": drain.uncordon,
            "would_complete": (
                {"hook": drain.lifecycle.hook, "result": LIFECYCLE_CONTINUE} if drain.lifecycle else None
            ),
            "would_time_out": bool(keep) and not drain.force,
        }

    def _named_node(self, request: DrainRequest) -> Node:
        try:
            return self.kube.get_node(request.node)
        except NodeNotFound:
            raise InvalidDrainRequest(
                f"no Node named {request.node!r} in cluster {self.cluster!r} (`kubectl get nodes` lists them)",
                field="node",
                stale=True,  # a plan saw it: it is gone
            ) from None

    # remove an instance no Node joined for ------------------------------------------------------

    def remove_unregistered(self, raw: Any) -> dict[str, Any]:
        """A plan's ``unregistered`` entry: checked again, then terminated (:mod:`spillway.act.unregistered`).
        Its outcome goes to the ``DrainOutcome`` metric as ``unregistered-<outcome>``."""
        line = remove_unregistered(self.kube, self.cloud, self.cluster, self.regions, raw)
        self.on_outcome(f"unregistered-{line['outcome']}", None)
        return line

    def remove_gang_orphan(self, raw: Any) -> dict[str, Any]:
        """A plan's ``gang_orphans`` entry to terminate: claimed, checked again, then terminated
        (:mod:`spillway.act.gangsweep`). Its outcome, ``gang-orphan-<outcome>``, goes to the
        ``DrainOutcome`` metric as it is."""
        line = remove_gang_orphan(
            self.kube, self.cloud, self.ledger, self.cluster, self.regions, raw, self.clock()
        )
        self.on_outcome(str(line["outcome"]), None)
        return line

    def undrained(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """A scale-down part that ended without draining (``outcome`` skipped: a part before it was
        stopped; lapsed: it waited behind a part that still ran until its plan's claim lapsed:
        :data:`UNDRAINED`, scale_down.asl.json): its ``nodes`` go to the ``DrainOutcome`` metric under
        that outcome, as drains that did not happen, so operators see them beside the drains' own outcomes
        (a drain that started after its plan's claim lapsed is one of those: ``cancelled``)."""
        outcome, nodes = event.get("outcome"), event.get("nodes")
        if outcome not in UNDRAINED:
            raise InvalidDrainRequest(
                f"outcome must be one of {', '.join(UNDRAINED)}, got {outcome!r}", field="outcome"
            )
        if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 0:
            raise InvalidDrainRequest(f"nodes must be a count of nodes, got {nodes!r}", field="nodes")
        if nodes:
            self.on_outcome(outcome, None, nodes)
        return {"outcome": outcome, "nodes": nodes}

    # cordon ------------------------------------------------------------------------------------

    def cordon(self, drain: Drain) -> dict[str, Any]:
        """Cordon (``spec.unschedulable`` + the ``spillway.io/cordoned`` annotation) and taint
        ``spillway.io/draining:NoSchedule``; an event on the node says why and until when. A drain whose
        node goes away (:func:`node_goes`) labels it out of load balancers with the taint, before any
        pod is evicted (:meth:`~spillway.ports.Cluster.add_draining_taint`).

        A forced drain following an EC2 scheduled event does not take the node over from another forced
        drain following the same event (its cordon says ``for <event id>``: :func:`_following`): the
        first to cordon goes on, and the other writes nothing and stands by from here (``standing_by``,
        which DrainNode's first eviction round carries: :meth:`_superseded`). Taking the node over, as a
        drain takes it from an earlier one of another kind, let the later of two drains woken together
        overwrite a cordon whose drain was already past its last look at it, and both terminated.
        ``standing_by`` is None for every other drain."""
        if self._present(drain, require_cordon=False) is None:
            return {"cordoned": False, "tainted": False, "standing_by": None, "note": _GONE["note"]}
        following = _following(drain)
        mine = self.kube.cordon(
            drain.node, reason=cordon_reason(drain), leave_containing=f"{following}: " if following else None
        )
        holder = None if mine or not following else self._same_event_holder(drain)
        if holder is not None:
            note = (
                f"the node is held by another forced drain following the same EC2 event, which cordoned it "
                f"first ({holder[:160]}): this drain writes no cordon, evicts nothing while that one's "
                "execution runs, and takes the node over if it ends without succeeding"
            )
            return {"cordoned": False, "tainted": False, "standing_by": holder[:200], "note": note}
        if not mine and not drain.leaving:
            raise DrainCancelled(
                f"Node {drain.node!r} was cordoned by somebody else after the drain was validated; "
                "Spillway leaves it alone"
            )
        tainted = self.kube.add_draining_taint(drain.node, exclude_from_load_balancers=node_goes(drain))
        target = (
            f"then terminate {drain.instance_id} ({drain.group}, {drain.region})"
            if drain.terminate
            else "and leave the node cordoned"
        )
        if drain.group is None:
            target += f" ({OUTSIDE_GROUP.format(instance=drain.instance_id)})"
        if drain.uncordon:
            target = "then uncordon the node and lift the taint: it stays in service for pending pods"
        if drain.lifecycle is not None:
            target = (
                f"then complete lifecycle hook {drain.lifecycle.hook} of {drain.group} with CONTINUE "
                f"(the group is terminating {drain.instance_id})"
            )
        self._event(
            drain,
            "SpillwayDraining",
            f"Draining ({drain.reason}): evicting pods until {drain.deadline_at}, {target}",
        )
        return {"cordoned": True, "tainted": tainted, "standing_by": None}

    def _same_event_holder(self, drain: Drain) -> str | None:
        """The words of the cordon of another forced drain following the same EC2 event as ``drain``
        that holds its node (:func:`_taken_over_by`), as read after the cordon left it; None when the
        Node is gone since or the cordon is somebody else's."""
        try:
            return _taken_over_by(drain, self.kube.get_node(drain.node))
        except NodeNotFound:
            return None

    # evict -------------------------------------------------------------------------------------

    def evict(
        self, drain: Drain, previous: Mapping[str, Any] | None = None, *, execution: str | None = None
    ) -> dict[str, Any]:
        """One eviction round: evict every pod that may go (lowest priority first; a critical pod only once
        every other pod is gone: :func:`_critical_held`), each given its grace
        period but no more than the time left before the deadline (:meth:`_evict_round`), then report
        what is left. ``done`` when nothing is left; ``abandon`` (evicting nothing more) when work the
        plan did not see came to the node (:func:`_arrivals`); :class:`DrainTimeout` when pods are left at
        the deadline, where a drain without force evicts nothing more (with ``force``, it evicts what may go
        with no grace period, and is ``done`` and ``forced`` instead). A leaving instance whose Node is gone (EC2
        reclaimed it, another drain of it terminated it) is done: nothing is left to evict. ``execution``:
        the drain's own execution ARN, by which a forced drain stands by for another forced drain of the
        same EC2 event (:meth:`_superseded`): a round that evicts nothing, ``standing_by`` naming it."""
        previous = previous or {}
        try:
            node = self._present(drain, execution=execution)
            if node is None:
                return self._gone_round(drain, _confirmed(previous, None), execution)
        except _StandingBy as standby:
            return _standing_by(previous, standby)
        beat = self._beat(drain, previous)
        before, named, pods = self._listing(drain, node)
        again = _not_landed(previous, pods)
        learnt = _landed_before(previous, again)
        previous = _confirmed(previous, pods)
        why = _abandon_why(drain, node, before)
        if why is not None:
            return _abandon(drain, previous, before, why)
        done = self._evict_in_time(drain, before, previous, named, again, learnt)
        evicted_now, refused = done.pods, done.refused
        if done.stop is not None:  # a pod or the node marked since the listing: the round stops there
            return _abandon(drain, previous, before, done.stop, evicted_now, refused)
        after, marked = self._after(drain, node, before, done)
        remaining = _remaining(after, evicted_now, refused)
        blocked = [pod for pod, why in refused.items() if _held_by_budget(why)]
        forced = self._forced_at_deadline(drain, remaining, done, previous)
        evicted = [*(previous.get("evicted") or []), *evicted_now]
        heartbeat = self._beat(drain, {**previous, **beat})
        out = {
            **heartbeat,
            "rounds": int(previous.get("rounds") or 0) + 1,
            "evicted": evicted[:LIST_LIMIT],
            "evicted_count": int(previous.get("evicted_count") or 0) + len(evicted_now),
            "blocked": sorted(blocked)[:LIST_LIMIT],
            "remaining": remaining[:LIST_LIMIT],
            "remaining_count": len(remaining),
            "done": not remaining or forced,
            "forced": forced,
            **self._interruption(drain, done),
            **_unconfirmed(done, previous),
            **_carried(previous, EVICTED_OR_DELETED),
            **({"evicted_marked": marked[:LIST_LIMIT]} if marked else {}),
        }
        return out | self._daemonsets(drain, previous, out, named, done.started, again)

    def _gone_round(self, drain: Drain, previous: Mapping[str, Any], execution: str | None) -> dict[str, Any]:
        """A leaving instance's Node is gone: the round is done (:func:`_gone_round`). But a drain that
        stood by for another (its previous round's ``standing_by``) leaves the node to that one, whose
        terminate took it: :class:`DrainSuperseded` once that one succeeded, standing by while it still
        runs (it records its outcome), done only when it ended without succeeding (:meth:`_superseded`)."""
        holder = previous.get("standing_by")
        if isinstance(holder, str):
            self._superseded(drain, holder, execution)
        return _gone_round(previous)

    def _daemonsets(
        self,
        drain: Drain,
        previous: Mapping[str, Any],
        round_: Mapping[str, Any],
        named: frozenset[str],
        started: datetime | None = None,
        again: frozenset[str] = frozenset(),
    ) -> dict[str, Any]:
        """The round that finds the node empty of every other pod (``done``, not ``forced``) of a drain
        that terminates its node as cluster-autoscaler would (:func:`_terminates_as_autoscaler`) evicts
        its DaemonSet pods once (``daemonsets``: the pods evicted; a later
        round carries it and evicts none again), as cluster-autoscaler does before it deletes a node
        (core/scaledown/actuation/drain.go: DrainNode evicts them beside an occupied node's other pods,
        EvictDaemonSetPods an empty node's), so that an agent (a log shipper, a metrics exporter) is
        stopped with its grace period instead of with its instance. Which ones: a pod annotated
        ``cluster-autoscaler.kubernetes.io/enable-ds-eviction`` ``"true"``, none with another value of it,
        else every one when the drain evicted pods (``occupied``, or a plan's consolidation, or a pod
        whose eviction's answer was lost found gone or deleted otherwise: ``evicted_or_deleted``, a pod
        to drain whoever stopped it) and none when it evicted none (``empty``), cluster-autoscaler's
        defaults (:class:`DaemonSetEviction`).
        Best effort, as there: a refusal (a budget, RBAC, the API down) is noted and the drain goes on,
        and nothing waits for them (their controller may put them straight back on the cordoned node).

        They are evicted as the round's other pods are (:meth:`_evict_round`): each read again right
        before its eviction, with the node, so that one marked never to be disturbed since the listing
        is not evicted (it goes with the instance, as one found marked does), and a node annotated
        ``do-not-disrupt`` or ``scale-down-disabled`` meanwhile, or a plan's DaemonSet pod annotated
        ``do-not-disrupt`` (:func:`_pinned`), stops them there and abandons the drain (``abandon``), as
        it would at the next round's start. cluster-autoscaler evicts them from the node's snapshot,
        reading none again, and Karpenter from each reconcile's listing of the node's pods
        (terminator.go, ``Drain``: ``IsEvictable``); neither evicts one it found so marked.

        Within the round's time (``started``: the drain function's timeout bounds the whole
        invocation), and those the round leaves for its own sake (its time spent, the server
        throttling: :attr:`_Evictions.later`) are the next round's, by name (``daemonsets_left``; a
        pod their DaemonSet made since has another), the round not ``done`` until then: that round was
        the last, and they went with the instance untried. cluster-autoscaler retries each until its
        MaxPodEvictionTime (``evictPod``) and Karpenter queues every one (terminator.go, ``Evict``).
        One whose eviction's answer was lost is the next round's too (:func:`_daemonsets_out`), and
        ``again`` (:func:`_not_landed`) names those a round before lost and this one found running: a
        second failure of such an eviction ends the DaemonSet evictions here, best effort."""
        if "daemonsets" in previous and not previous.get("daemonsets_left"):
            return {"daemonsets": previous["daemonsets"]}
        carried = {k: previous[k] for k in ("daemonsets", "daemonsets_left") if k in previous}
        if not round_["done"] or round_["forced"] or not _terminates_as_autoscaler(drain):
            return carried
        left = seconds_left(drain, self.clock())
        # a pod whose lost eviction answer the next round found gone (evicted_or_deleted) was a pod to
        # drain all the same: the node was occupied, whoever stopped it
        occupied = (
            drain.consolidation or int(round_["evicted_count"]) > 0 or bool(round_.get(EVICTED_OR_DELETED))
        )
        by_default = self.daemonset_eviction.occupied if occupied else self.daemonset_eviction.empty
        untried = previous.get("daemonsets_left")
        before = list(previous.get("daemonsets") or [])

        def chosen(pod: Pod) -> bool:
            return bool(daemonsets_to_evict([pod], by_default, force=drain.force))

        try:
            pods = self.kube.pods_on_node(drain.node) if left else []
            agents = _agents(daemonsets_to_evict(pods, by_default, force=drain.force), untried)
            done = self._evict_round(drain, agents, left, named, chosen, started, again)
        except KubeError as exc:
            return {"daemonsets": before[:LIST_LIMIT], "daemonsets_error": str(exc)[:300]}
        return _daemonsets_out(before, done, round_)

    def _beat(self, drain: Drain, previous: Mapping[str, Any]) -> dict[str, Any]:
        """A lifecycle drain's heartbeat when owed (:meth:`_heartbeat`), else nothing. A round asks it
        twice: at its start, before its Kubernetes calls, when the invocation has its time, and at its
        end, for one owed by then (a round that ran long), if one AWS call still fits. At the end alone,
        a round whose calls ran long (a slow API server: they may run to the invocation's end) left no
        time for it (:class:`~spillway.act.deadline.Deadline`) and skipped it, and the next round, up to
        a third of the HeartbeatTimeout later, could come after the hook lapsed: Auto Scaling then
        terminates the instance with its pods."""
        return self._heartbeat(drain, previous) if drain.lifecycle is not None else {}

    def _heartbeat(self, drain: Drain, previous: Mapping[str, Any]) -> dict[str, Any]:
        """Keep the lifecycle action waiting while pods leave: RecordLifecycleActionHeartbeat once half
        the hook's HeartbeatTimeout has passed since the last one (or since the drain started, which is
        at most a few seconds after the group began waiting). Best effort: a failed heartbeat is retried
        next round, and an action that no longer waits is noted (the group proceeds whatever we do)."""
        assert drain.lifecycle is not None and drain.group is not None  # the group holding the instance
        last_text = previous.get("heartbeat_at")
        last = parse_iso(last_text) if isinstance(last_text, str) else parse_iso(drain.started_at)
        now = self.clock()
        if (
            previous.get("lifecycle_gone")
            or (now - last).total_seconds() < drain.lifecycle.heartbeat_seconds / 2
        ):
            return {k: previous[k] for k in ("heartbeat_at", "lifecycle_gone") if k in previous}
        try:
            self.deadline.require(1, "RecordLifecycleActionHeartbeat")
            self.cloud.record_heartbeat(
                drain.region, drain.group, drain.lifecycle.hook, drain.instance_id, drain.lifecycle.token
            )
        except LifecycleActionNotFound as exc:
            return {"heartbeat_at": iso(last), "lifecycle_gone": str(exc)[:300]}
        except AwsError as exc:
            return {"heartbeat_at": iso(last), "heartbeat_error": str(exc)[:300]}
        return {"heartbeat_at": iso(now)}

    def _evict_in_time(
        self,
        drain: Drain,
        verdicts: Sequence[PodVerdict],
        previous: Mapping[str, Any],
        named: frozenset[str],
        again: frozenset[str] = frozenset(),
        learnt: bool = False,
    ) -> _Evictions:
        """:meth:`_evict_round` with the seconds left (``again``: as there). Out of time, a drain without force evicts nothing:
        it is about to fail and give the node back, and a pod evicted now would be stopped for nothing.
        Nor does a drain one of whose ``whole_grace`` pods no longer has its whole grace left
        (:func:`_grace_cut`): it gives up, as at its deadline. ``learnt``: the round found an eviction
        whose answer a round before lost landed (:func:`_landed_before`); it reports that, evicting
        nothing more, where it would raise (the grace cut, an error before its first eviction), and
        the next round raises (:meth:`_forced_at_deadline` likewise waits a round)."""
        left = seconds_left(drain, self.clock())
        cut = _grace_cut(drain, verdicts, left, previous)
        if cut is not None and not learnt:
            raise DrainTimeout(cut)
        if cut is not None or (not left and not drain.force):
            return _Evictions(refused=_out_of_time(verdicts, previous, cut), learnt=learnt)
        held = _critical_held(verdicts) if left else {}
        evicting = [v for v in verdicts if v.pod not in held]
        done = self._evict_round(drain, evicting, left, named, again=again, learnt=learnt)
        done.refused = {**held, **done.refused}
        return done

    def _evict_round(
        self,
        drain: Drain,
        verdicts: Sequence[PodVerdict],
        left: int,
        named: frozenset[str],
        chosen: Callable[[Pod], bool] | None = None,
        started: datetime | None = None,
        again: frozenset[str] = frozenset(),
        learnt: bool = False,
    ) -> _Evictions:
        """Evict every pod given, lowest priority first (:class:`_Evictions`: the pods evicted, those
        refused and why, why the drain stops here, the error that ended the round). A pod a budget
        holds, or more than one budget selects, or whose budget's status forbids evictions, is left for
        a later round, and so is one whose namespace is being deleted (it goes with the namespace); the
        round goes on. A throttled eviction ends the round (the server asks to slow down).

        Each pod is read again right before its eviction, with the node, and judged as the round judged
        the listing (:meth:`_judged_again`; ``chosen``: the DaemonSet pods' choice on top of it): one
        gone is passed over; one that may no longer be evicted (marked never to be disturbed since the
        listing) is not evicted, kept as the round's start would keep it; and where the round's start
        would abandon the drain (a plan's pod so marked, a node annotated since), the round stops there
        and says why, evicting nothing more. A node gone ends the round: the next says what that means
        for the drain.

        A round that has run :data:`ROUND_SECONDS` (since ``started``, else since it began) starts no
        more evictions: the pods left are the next round's (:data:`ROUND_SPENT`). Each eviction costs up
        to three calls, one after another, and a node of a few hundred pods behind a slow API server
        (500 pods at 80 ms a call) ran past the drain function's 120 s, where the round is lost whole:
        Step Functions catches the timeout and compensates, the pods evicted so far stopped for nothing.

        A call that fails (the API server gone, a timeout past the client's retries, RBAC) once the
        round has evicted a pod ends the round there, the error named (:data:`INTERRUPTED`): raised, it
        took with it the pods evicted so far, which no output, record or Event then named (a Lambda's
        error carries only its message, and a Retry runs the step again on the round's input). The
        next round meets the error again before it evicts anything, and raises it. Before the first
        eviction the error is raised at once, for the state machine's Retry, unless it is that of an
        eviction whose answer was lost (``KubeUnavailable`` from the eviction itself: a timeout, a call
        cut at the invocation's time left), which the API server may have applied: the round ends as
        above, the pod in ``unconfirmed`` (:func:`_unconfirmed`), and the next round counts it evicted
        or evicts it, as it finds the pod (:func:`_confirmed`). But not for a pod of ``again``, whose
        lost answer the round before reported and which this round found running (:func:`_not_landed`):
        an eviction that fails for good (a 503 past the retries) is raised at its second try, for the
        Retry and Catch, as any error met before an eviction, instead of a round reported each
        ``poll_seconds`` until the deadline. The Retry runs on the round before's output, which still
        names the pod, so a second eviction that landed after all is counted there. Nor when the
        round ``learnt`` that a lost answer's eviction landed (:func:`_landed_before`): raised, the error
        took that with it. A repeated eviction of a pod already
        terminating deletes it without a look at its budget (eviction.go ``canIgnorePDB``), so the
        client's own retry of a lost answer charges no budget twice.

        Each eviction gives the pod its ``terminationGracePeriodSeconds``, but never more than the
        ``left`` seconds before the drain's deadline, so that it is gone by then: Karpenter clamps a
        pod's grace period to the time left before its node must go (kubernetes-sigs/karpenter
        pkg/controllers/node/termination/terminator/terminator.go, DeleteExpiringPods), and
        cluster-autoscaler caps it at its MaxGracefulTerminationSec (core/scaledown/actuation/drain.go,
        evictPod). The Eviction API deletes the pod with the Eviction's deleteOptions
        (deletionTimestamp = now + that grace). Without the cap a pod whose grace outlasts the deadline
        was still terminating then: the drain failed and gave the node back, its pod stopped for
        nothing. 0 (deleted at once) only when no time is left, which only a forced drain evicts in."""
        began = self.clock() if started is None else started
        done = _Evictions(started=began, learnt=learnt)
        queue = sorted((v for v in verdicts if v.action == "evict"), key=lambda v: (v.priority, v.pod))
        for at, verdict in enumerate(queue):
            if (self.clock() - began).total_seconds() >= ROUND_SECONDS:
                done.refused.update(dict.fromkeys((v.pod for v in queue[at:]), ROUND_SPENT))
                done.later = [v.pod for v in queue[at:]]
                break
            try:
                if not self._evict_one(drain, named, verdict, left, chosen, done):
                    if done.refused.get(verdict.pod) == THROTTLED:
                        done.later = [v.pod for v in queue[at:]]
                    break
            except KubeError as exc:
                if not done.has_news(again):
                    raise
                done.interrupted = f"{type(exc).__name__}: {exc}"[:300]
                why = INTERRUPTED.format(error=done.interrupted)
                done.refused.update(dict.fromkeys((v.pod for v in queue[at:]), why))
                lost = UNCONFIRMED.format(error=done.interrupted)
                done.refused.update(dict.fromkeys(done.unconfirmed, lost))
                break
        return done

    def _evict_one(
        self,
        drain: Drain,
        named: frozenset[str],
        verdict: PodVerdict,
        left: int,
        chosen: Callable[[Pod], bool] | None,
        done: _Evictions,
    ) -> bool:
        """One pod of :meth:`_evict_round`: read again and judged, then evicted if it still may be,
        noted in ``done``. False when the round ends here (the drain stops, the node is gone, the
        server throttles)."""
        try:
            fresh, stop = self._judged_again(drain, named, verdict, chosen)
        except NodeNotFound:
            return False
        if fresh is not None and fresh.action != "evict":
            done.refused[verdict.pod] = fresh.reason
        if stop is not None:
            done.stop = stop
            return False
        if fresh is None or fresh.action != "evict":
            return True
        try:
            why = self._try_evict(verdict.pod, min(verdict.grace, left), verdict.uid)
        except KubeUnavailable as exc:
            if exc.sent:  # sent, its answer lost: it may have landed (one not sent did not)
                done.unconfirmed[verdict.pod] = verdict.uid
            raise
        if why is None:
            done.pods.append(verdict.pod)
            done.uids[verdict.pod] = verdict.uid
        elif why != _GONE_ALREADY:
            done.refused[verdict.pod] = why
            return why != THROTTLED
        return True

    def _try_evict(self, pod: str, grace: int, uid: str) -> str | None:
        """Evict one pod, giving it ``grace`` seconds to stop: None when the API took it,
        ``_GONE_ALREADY`` (gone, or another pod made under its name since: ``uid`` is the one listed),
        or why the API turned it away
        (:meth:`~spillway.adapters.kube.KubeClient.evict` names each answer; RBAC's 403 raises)."""
        namespace, name = _split(pod)
        try:
            self.kube.evict(namespace, name, grace_period_seconds=grace, uid=uid)
        except EvictionBlocked:
            return BUDGET_ALLOWS_NONE
        except EvictionRefused:
            return MULTIPLE_BUDGETS
        except EvictionBudgetForbidden as exc:
            return f"{BUDGET_FORBIDS} ({_server_words(exc)})"
        except EvictionNamespaceTerminating:
            return NAMESPACE_TERMINATING.format(namespace=namespace)
        except EvictionThrottled:
            return THROTTLED
        except PodNotFound:
            return _GONE_ALREADY
        return None

    def _verdicts(self, drain: Drain, node: Node) -> list[PodVerdict]:
        """What to do with each pod on the node now (:func:`_judge`)."""
        return self._listing(drain, node)[0]

    def _listing(self, drain: Drain, node: Node) -> tuple[list[PodVerdict], frozenset[str], list[Pod]]:
        """The node's pods listed now and judged (:func:`_judge`), with the pods the plan names among
        them (:func:`_named`), by which a pod read again before its eviction is judged the same way
        (:meth:`_judged_again`), and the pods as listed."""
        now = self.clock()
        pods = self.kube.pods_on_node(drain.node)
        named = _named(drain, pods)
        return _judge(drain, node, pods, now, named), named, pods

    def _after(
        self, drain: Drain, node: Node, before: list[PodVerdict], done: _Evictions
    ) -> tuple[list[PodVerdict], list[dict[str, str]]]:
        """The node's pods judged again after the round's evictions (``before`` when it evicted none, or
        when the API server failed it: it reports what it did without asking more), and the pods it
        evicted that now carry a mark never to be disturbed (:func:`_marked_as_evicted`), which an Event
        on the Node names. A listing that fails ends the round as any call after an eviction does
        (``interrupted``: :meth:`_evict_round`), not to take the round's evictions with it."""
        if not done.pods or done.interrupted:
            return before, []
        try:
            after, _, pods = self._listing(drain, node)
        except KubeError as exc:
            done.interrupted = f"{type(exc).__name__}: {exc}"[:300]
            return before, []
        marked = _marked_as_evicted(drain, pods, done.uids)
        if marked:
            log.warning("evicted pods marked never to be disturbed as they were evicted: %s", marked)
            self._event(drain, "SpillwayEvictedMarked", _marked_message(marked), "Warning")
        return after, marked

    def _judged_again(
        self,
        drain: Drain,
        named: frozenset[str],
        listed: PodVerdict,
        chosen: Callable[[Pod], bool] | None = None,
    ) -> tuple[PodVerdict | None, str | None]:
        """The pod the round listed, read again right before its eviction and judged by the round's own
        predicate (:func:`_judge`, with the node read again too), and why the drain stops there
        (:func:`_abandon_why`), else None. The pod is None when it is gone, or another was made under
        its name since (not evicted: the one listed is gone). A round lists the pods once and evicts
        them one by one, seconds or minutes apart (each eviction may wait on its budget's update), so a
        pod or node marked never to be disturbed meanwhile was evicted. A ``resourceVersion``
        precondition on the eviction would not do: the API server spends the pod's budget
        (``disruptionsAllowed``, ``disruptedPods``) before the deletion checks the preconditions
        (pkg/registry/core/pod/storage/eviction.go: ``checkAndDecrement``, then
        ``addConditionAndDeletePod``), so each conflict, a kubelet's status write included, would hold
        the budget two minutes for nothing. A forced drain evicts marked pods anyway and reads nothing
        again. Raises ``NodeNotFound`` when the node is gone.

        ``chosen``: a DaemonSet pod the drain evicts once the rest is gone (:meth:`_daemonsets`), which
        the round's predicate ignores (it keeps no node busy) unless it keeps it (:func:`_pinned`): it is
        evicted only if it is still chosen (:func:`daemonsets_to_evict`: not marked never to be disturbed
        since, not terminating, still opted in), and the node's marks stop the drain as for any pod."""
        if drain.force:
            return listed, None
        pod = self.kube.read_pod(*_split(listed.pod))
        if pod is None or (listed.uid and pod.metadata.uid != listed.uid):
            return None, None  # as the eviction's uid precondition would answer (none without a uid)
        node = self.kube.get_node(drain.node)
        [fresh] = _judge(drain, node, [pod], self.clock(), named)
        if chosen is not None and fresh.action == "ignore" and chosen(pod):
            fresh = listed
        return fresh, _abandon_why(drain, node, [fresh])

    def _interruption(self, drain: Drain, done: _Evictions) -> dict[str, Any]:
        """The round's ``interrupted`` (:data:`INTERRUPTED`), and ``interrupted_past_deadline`` for a
        forced drain's round cut short past its deadline, the one after which a round cut short too goes
        on to terminate (:meth:`_forced_at_deadline`): one cut short before the deadline is no round past
        it, and counted as one, the first round past it cut short terminated at once, its pods not
        reached going with the instance untried."""
        if not done.interrupted:
            return {}
        past = drain.force and self.clock() >= drain.deadline
        return {"interrupted": done.interrupted, **({"interrupted_past_deadline": True} if past else {})}

    def _forced_at_deadline(
        self,
        drain: Drain,
        remaining: Sequence[Mapping[str, str]],
        done: _Evictions,
        previous: Mapping[str, Any],
    ) -> bool:
        """Pods left at the deadline: :class:`DrainTimeout`, or with ``force`` go on (True). Not yet in
        a round that evicted pods (it began before the deadline and ran past it): raised there, the error
        took those pods with it, named by no output, record or Event; the round reports them and the
        next, which evicts nothing past the deadline, raises for the pods still there then (those just
        evicted, given no grace past the deadline, are leaving by then: :func:`_grace_over`). Nor, with
        ``force``, in a round the API server cut off (``interrupted``): the next evicts the pods it did
        not reach. But only the next: a forced drain whose round before was cut off too past the
        deadline (``interrupted_past_deadline``: :meth:`_interruption`) goes on, the pods left going
        with the instance. Nor in a round that learnt a lost answer's eviction landed (``learnt``:
        :func:`_landed_before`), which it counts in its output. Each cut-off round evicted a pod or sent one whose answer was lost (else it
        raised; the next raises when that pod is still running), and a pod
        that tolerates the cordon comes back to be evicted the next round: a forced drain whose other
        eviction failed every round was never done, and polled until its execution's history ran out
        (25,000 events), its node cordoned and its instance running."""
        if not remaining or self.clock() < drain.deadline:
            return False
        if (done.pods or done.learnt) and not drain.force:
            return False
        if done.interrupted and not previous.get("interrupted_past_deadline"):
            return False
        if not drain.force:
            raise DrainTimeout(
                f"Node {drain.node!r}: {len(remaining)} pod(s) still there at the deadline "
                f"({drain.deadline_seconds} s): {_describe_pods(remaining)}"
            )
        return True

    # check -------------------------------------------------------------------------------------

    def check(self, drain: Drain, *, execution: str | None = None) -> dict[str, Any]:
        """Right before termination: still our cordon, still the same instance, not annotated
        ``karpenter.sh/do-not-disrupt`` or ``scale-down-disabled`` since (a drain without force:
        :func:`protected_node`), and empty (or ``force`` past the deadline). ``ready`` false sends the
        drain back to evicting, where a protected node's round abandons it. A leaving instance whose Node
        is gone is ready: the terminate step finds the instance gone and records it terminated. A forced
        drain standing by for another (``execution``, as for :meth:`evict`) is not ready."""
        try:
            node = self._present(drain, execution=execution)
        except _StandingBy as standby:
            return {"ready": False, "forced": False, "remaining": [], "standing_by": standby.holder[:200],
                    "note": standby.note()}  # fmt: skip
        if node is None:
            return {"ready": True, "forced": False, "remaining": [], "note": _GONE["note"]}
        now_instance = instance_id_from_provider_id(node.spec.provider_id)
        if now_instance != drain.instance_id:
            raise DrainCancelled(
                f"Node {drain.node!r} is instance {now_instance} now, not {drain.instance_id}; nothing terminated"
            )
        protected = protected_node(drain, node)
        if protected is not None:  # annotated since the last round: that round abandons the drain
            note = f"the node was annotated {protected}=true since the last round"
            return {"ready": False, "forced": False, "remaining": [], "note": note}
        verdicts = self._verdicts(drain, node)
        remaining = [{"pod": v.pod, "reason": v.reason} for v in verdicts if v.action != "ignore"]
        forced = bool(remaining) and drain.force and self.clock() >= drain.deadline
        return {"ready": not remaining or forced, "forced": forced, "remaining": remaining[:LIST_LIMIT]}

    # terminate ---------------------------------------------------------------------------------

    def terminate(
        self, drain: Drain, attempt: int | None = None, *, execution: str | None = None
    ) -> dict[str, Any]:
        """TerminateInstanceInAutoScalingGroup with ShouldDecrementDesiredCapacity: every drain that
        terminates does it here, in any region (the adapter names Auto Scaling's errors, which the state
        machine retries). ``{activity_id, status, description}``, with a ``note`` when it did not
        decrement; the record step and the drain's outcome read it.

        Idempotent: an instance already terminating, or out of its group and no longer run by EC2 (a
        retry after the first call terminated it and then timed out), is terminated: the step succeeds
        and says so (``AlreadyTerminating``). ``attempt`` is the step's retry count (the context
        object's ``$$.State.RetryCount``; None when unknown): on its first attempt (0) no earlier call
        of this drain can have terminated the instance, so one found already gone was terminated by
        another (another drain of it, EC2's reclaim, a person) and the answer says so
        (``by_another``): DrainNode records it ``gone``, not ``terminated``, which whoever terminated
        it counts. One that left its group alive since the validation (detached, or attached to
        another group) is not Spillway's to terminate: a Spot warning's drain ends ``drained`` with
        ``outside_group`` (EC2 takes the instance back; the node stays cordoned, as when the detach came
        before the validation), any other's is :class:`DrainCancelled` and its compensation gives the
        node back. A drain of an instance in no group (validation never lets one terminate) is refused,
        touching nothing.

        Right before the call it asks the check's question again (:meth:`check`, ``execution`` as
        there): a pod may have come to the node since the check found it ready (one that tolerates the
        cordon and the draining taint, which kube-scheduler may well put on the emptied node; one bound
        by ``spec.nodeName``, which skips both), or the node may have been annotated since, and this
        step runs seconds to minutes after the check (Auto Scaling's throttling is retried here). Not
        ready, it terminates nothing and answers ``ready`` false (status ``NotTerminated``): the state
        machine goes back to the eviction rounds, which abandon the drain or wait, as after a check not
        ready. Before, the instance was terminated with such a pod on it. A check the API server could
        not answer is not ready either (:meth:`_check_again`)."""
        if drain.group is None:
            raise InvalidDrainRequest(
                f"instance {drain.instance_id} is in no Auto Scaling group: there is none to terminate it "
                "through, and EC2 takes it back; nothing was done",
                field="drain",
            )
        already = self._not_to_terminate(drain)
        if already is not None:
            return _by_another(already) if attempt == 0 else already
        again = self._check_again(drain, execution)
        if not again["ready"]:
            return _not_terminated(again)
        held = self._terminate_held(drain)
        if held is not None:
            raise DrainCancelled(held)
        try:
            activity, decremented = self._terminate_instance(drain)
        except InstanceNotFound:
            already = self._not_to_terminate(drain)
            if already is None:
                raise
            return already
        out = {
            "activity_id": activity.ActivityId,
            "status": activity.StatusCode,
            "description": activity.Description,
        }
        if not decremented:
            out["note"] = (
                f"terminated without decrementing {drain.group}: it is at its MinSize (a scheduled change's "
                "instance, or another of its instances went since the drain began), so it launches a "
                "replacement"
            )
        return out

    def _terminate_held(self, drain: Drain) -> str | None:
        """Why the instance is not asked for now, else None: its group's Terminate process was suspended
        since the validation, which refuses such a drain (:func:`_terminate_suspended`), and the group's
        read right before the call lists it InService, which Auto Scaling does not terminate then
        (:func:`terminate_held`, one rule). The drain is cancelled and its compensation gives the node
        back, as for an instance that left its group alive (:meth:`_not_to_terminate`). A drain whose
        instance leaves anyway (a Spot warning) is terminated, as the validation lets it be; so is one
        the read does not list (left since: the call says so)."""
        if drain.leaving or drain.group is None:
            return None
        asg = self.cloud.describe_group(drain.region, drain.group)
        state = next((i.LifecycleState for i in asg.Instances if i.InstanceId == drain.instance_id), "")
        if not terminate_held(asg, state):
            return None
        return (
            f"{_suspended(drain.group, drain.region, drain.instance_id)}, {state} now; nothing terminated, "
            'the node given back; resume the process, or drain with "terminate": false'
        )

    def _check_again(self, drain: Drain, execution: str | None) -> dict[str, Any]:
        """:meth:`check` for the terminate step. An API server that cannot answer it now
        (``KubeUnavailable``, ``KubeConflict``) leaves the node not ready while the deadline is ahead: the
        drain goes back to its rounds, whose own steps retry the API. Past the deadline the error
        stands and the drain fails, its compensation giving the node back (the rounds would find the node
        empty and send it here again, with no deadline left to end the loop). The state machine retries
        no Kubernetes error on this step: its ``$$.State.RetryCount`` would then tell a retry that an
        earlier attempt may have terminated the instance when none called AWS, and one that another
        terminated meanwhile (EC2's reclaim, another drain) was recorded ``terminated``, counted twice,
        instead of ``gone``."""
        try:
            return self.check(drain, execution=execution)
        except (KubeUnavailable, KubeConflict) as exc:
            if self.clock() >= drain.deadline:
                raise
            note = f"the node could not be checked ({type(exc).__name__}: {str(exc)[:200]})"
            return {"ready": False, "forced": False, "remaining": [], "note": note}

    def _terminate_instance(self, drain: Drain) -> tuple[ScalingActivity, bool]:
        """(the termination, whether it decremented the group). AWS refuses the decrement of a group at
        its MinSize (:class:`AsgLimitExceeded`) and does nothing: a drain that keeps its node then fails
        and its compensation gives the node back; a leaving instance goes anyway (Spot reclaims several
        of a pool at once, each drain judged MinSize from the group as it was before the others'
        terminates; a scheduled change's drain terminates at MinSize: :func:`_terminates`), so its drain
        terminates it without the decrement and the group replaces it."""
        return terminate_in_group(self.cloud, drain.region, drain.instance_id, fall_back=drain.leaving)

    def _not_to_terminate(self, drain: Drain) -> dict[str, Any] | None:
        """The terminate step's result without a TerminateInstanceInAutoScalingGroup, else None: the
        instance is gone already (:meth:`_whereabouts`), or it left its group alive and EC2 reclaims
        it after a Spot warning (``LeftGroup``, ``outside_group``: the state machine records the drain
        ``drained``); left alive after anything else, :class:`DrainCancelled`."""
        gone, left = self._whereabouts(drain)
        if gone is not None or left is None:
            return gone
        if drain.notice == "interruption":
            return {"activity_id": None, "status": "LeftGroup", "outside_group": True, "description": left}
        raise DrainCancelled(
            f"{left}: it is not Spillway's to terminate through {drain.group}; nothing terminated"
        )

    def _instance_gone(self, drain: Drain) -> dict[str, Any] | None:
        """The terminate result when the drained instance is already terminating, or out of its group
        and EC2 no longer runs it (None for a drain of an instance in no group: it terminates nothing)."""
        return self._whereabouts(drain)[0]

    def _whereabouts(self, drain: Drain) -> tuple[dict[str, Any] | None, str | None]:
        """(the terminate result when the instance is gone already, why it is not Spillway's to terminate
        when it left its group alive); (None, None) while its group holds it, live. Terminating in any
        group, or out of its group with EC2 no longer running it (shutting down, terminated, unknown):
        gone. Out of its group with EC2 still holding it (detached, or attached to another group): left
        (:func:`_left_alive`). EC2 is read only for an instance out of its group."""
        if drain.group is None:
            return None, None
        placement = self.cloud.placement(drain.region, drain.instance_id)
        where = where_gone(placement, drain.instance_id, drain.group, drain.region)
        if where is None:
            return None, None
        elsewhere_live = placement is None or (
            placement.group != drain.group and not placement.lifecycle_state.startswith("Terminat")
        )
        if elsewhere_live:
            state = self.cloud.instance_states(drain.region, [drain.instance_id]).get(drain.instance_id)
            if state not in EC2_GONE:
                return None, _left_alive(drain, placement, str(state))
        gone = {
            "activity_id": None,
            "status": "AlreadyTerminating",
            "description": f"instance {drain.instance_id} was already {where}",
        }
        return gone, None

    # complete_lifecycle ------------------------------------------------------------------------

    def complete_lifecycle(self, drain: Drain) -> dict[str, Any]:
        """CompleteLifecycleAction with CONTINUE: the group may go on terminating the instance.

        A lifecycle drain completes its own action (by its token) once the pods are evicted or the
        deadline passed. Any other drain runs this right after its own TerminateInstanceInAutoScalingGroup:
        on a group with terminate hooks the instance then waits in Terminating:Wait, and the drain
        completes the action of each terminate hook Spillway owns (``lifecycle_hooks``) for it (by
        instance id), so a scale-down never waits out a HeartbeatTimeout. Another team's hook (log
        shipping, say) is left to its owner: CONTINUE would end its wait before its own action ran. :class:`LifecycleActionPending` while the instance is still ``Terminating``
        (the state machine retries). An action that no longer waits is done already: not an error."""
        if drain.lifecycle is not None:
            done = self._complete(drain, drain.lifecycle.hook, drain.lifecycle.token)
            return {"status": "LifecycleCompleted", "hooks": [done], **_lifecycle_identity(drain)}
        if drain.group is None:  # no group, no hooks (such a drain never terminates: never run)
            return {"status": "NoGroup", "hooks": []}
        hooks = [
            h
            for h in self.cloud.describe_lifecycle_hooks(drain.region, drain.group)
            if h.terminating and h.name in self.lifecycle_hooks
        ]
        if not hooks:
            return {"status": "NoTerminateHook", "hooks": []}
        placement = self.cloud.placement(drain.region, drain.instance_id)
        state = placement.lifecycle_state if placement is not None else "gone"
        if state in ("Terminating", "Pending", "InService"):  # not waiting for the hooks yet
            raise LifecycleActionPending(
                f"instance {drain.instance_id} is {state} in {drain.group}, not {WAITING} yet; "
                f"its terminate hooks ({', '.join(h.name for h in hooks)}) cannot be completed until it is"
            )
        if state not in HOOK_WAIT_STATES:
            return {"status": "NotWaiting", "lifecycle_state": state, "hooks": []}
        return {"status": "LifecycleCompleted", "hooks": [self._complete(drain, h.name, None) for h in hooks]}

    def _complete(self, drain: Drain, hook: str, token: str | None) -> dict[str, Any]:
        assert drain.group is not None  # a lifecycle drain's group holds it; a drain that terminated had one
        try:
            self.cloud.complete_lifecycle_action(
                drain.region, drain.group, hook, drain.instance_id, token, LIFECYCLE_CONTINUE
            )
        except LifecycleActionNotFound as exc:
            return {"hook": hook, "result": None, "note": f"no action waited any more ({exc})"[:300]}
        return {"hook": hook, "result": LIFECYCLE_CONTINUE}

    # delete_node -------------------------------------------------------------------------------

    def delete_node(self, drain: Drain) -> dict[str, Any]:
        """Delete the Node object of the terminated instance (not one that took its name since)."""
        node, why = self._validated_node(drain)
        if node is None:
            return {"deleted": False, "note": why}
        return {"deleted": self.kube.delete_node(drain.node)}

    def _validated_node(self, drain: Drain) -> tuple[Node | None, str]:
        """The drain's Node as read now, while it is the one the drain validated (its uid); else None and
        why: it is gone, or a new Node took its name (which the drain leaves alone)."""
        try:
            node = self.kube.get_node(drain.node)
        except NodeNotFound:
            return None, "the Node is gone"
        if node.metadata.uid != drain.node_uid:
            return None, "a new Node took the name; left alone"
        return node, ""

    # uncordon (compensation) -------------------------------------------------------------------

    def uncordon(self, drain: Drain, *, after_terminate: bool = False) -> dict[str, Any]:
        """Undo the drain's marks, Spillway's cordon and the draining taint, in one compare-and-set patch
        (never another drain's, nor another's cordon).

        ``after_terminate`` (the terminate step failed): first ask Auto Scaling whether the instance is
        gone anyway (the call terminated it, then timed out or was throttled on a retry); then nothing is
        undone and ``instance_gone`` sends the drain on to delete the Node and record it terminated. An
        instance that left its group alive stays, and its node is given back even after a forced notice
        that is not a Spot warning's (a scheduled reboot or stop leaves it running)."""
        if drain.lifecycle is not None:
            return self._release(drain)
        left = None
        if after_terminate:
            gone, left = self._whereabouts(drain)
            if gone is not None:
                return {"untainted": False, "uncordoned": False, "instance_gone": True, "terminated": gone}
        node, why = self._validated_node(drain)
        if node is None:
            return {"untainted": False, "uncordoned": False, "note": why}
        holder = node.metadata.annotations.get(CORDONED_BY_SPILLWAY)
        if holder is not None and not holds(drain, holder):
            return {
                "untainted": False,
                "uncordoned": False,
                "note": f"another drain holds the node now ({holder[:120]}): its cordon and taint stay",
            }
        if drain.leaving and drain.force and (left is None or drain.notice == "interruption"):
            return _keep_leaving(drain)
        if holder is None:  # no Spillway annotation (somebody else's cordon, or deleted): only the taint
            return {
                "untainted": self.kube.remove_draining_taint(drain.node),
                "uncordoned": False,
                "note": _NOT_OURS,
            }
        # compare-and-set, the cordon and the taint in one patch: a drain that took the node over since
        # the read keeps both
        if not self.kube.uncordon(drain.node, if_reason=cordon_reason(drain)):
            return {"untainted": False, "uncordoned": False, "note": _CORDON_CHANGED}
        return {"untainted": any(t.key == DRAINING_TAINT for t in node.spec.taints), "uncordoned": True}

    # hand over (a drain by hand that keeps its node) ----------------------------------------------

    def hand_over(self, drain: Drain) -> dict[str, Any]:
        """A drain by hand that keeps its node (``terminate`` and ``uncordon`` false) ends with the node
        the operator's: still cordoned, but without Spillway's annotation and draining taint
        (:meth:`~spillway.ports.Cluster.hand_over`), as ``kubectl drain`` leaves a node. Plans then
        read it as cordoned by somebody else and leave it alone: no orphaned drain to finish or
        undo after ``orphaned_drain_minutes``, and no instance a Capacity Rebalancing group replaces;
        ``kubectl uncordon`` gives it back. Any other drain (a plan's, a notice's, a lifecycle
        action's: their instance is going away) keeps Spillway's cordon."""
        if not _hands_over(drain):
            return {"handed_over": False}
        node, why = self._validated_node(drain)
        if node is None:
            return {"handed_over": False, "note": why}
        if not self.kube.hand_over(drain.node, if_reason=cordon_reason(drain)):
            return {"handed_over": False, "note": _NOT_HANDED}
        return {"handed_over": True}

    def _release(self, drain: Drain) -> dict[str, Any]:
        """A lifecycle drain that failed: the group terminates the instance whatever the drain says
        (CONTINUE and ABANDON both end in termination for a terminating instance; ABANDON would also
        skip the group's other terminate hooks, or retain the instance where the group's instance
        lifecycle policy says so), so the compensation completes the action with CONTINUE at once and
        leaves the cordon and taint: nothing may be scheduled on a node that is going away."""
        assert drain.lifecycle is not None
        done = self._complete(drain, drain.lifecycle.hook, drain.lifecycle.token)
        how = "completed with CONTINUE" if done["result"] else "its action no longer waited"
        return {
            "untainted": False,
            "uncordoned": False,
            "lifecycle": done,
            "note": (
                f"the group is terminating {drain.instance_id} (lifecycle hook {drain.lifecycle.hook}, "
                f"{how}): the node stays cordoned and its remaining pods go with it"
            ),
        }

    # record ------------------------------------------------------------------------------------

    def record(
        self, state: Mapping[str, Any], outcome: str | None = None, execution: str | None = None
    ) -> dict[str, Any]:
        """The drain's outcome: returned (the execution's output, or the Fail state's error and cause),
        an event on the node when the drain touched it, and the ``DrainOutcome`` metric, once for the
        ``execution`` (:meth:`_count`).

        ``state`` is the state machine's whole state; a failure is its ``error`` (``Error``/``Cause``
        as a Catch records them), the compensation's result is ``compensation`` or
        ``compensation_error``. Recording the event is best effort: the outcome is never lost to it.
        """
        count, key = self._counter(execution), _record_key(execution)
        if outcome == "cancelled":
            return self._record_cancel(state, count, key)
        # A rejected request touched nothing, not even an Event: a ``drain`` in it is only its input.
        has_drain = outcome != "rejected" and isinstance(state.get("drain"), Mapping)
        drain = parse_drain(state["drain"]) if has_drain else None
        error = state.get("error") if isinstance(state.get("error"), Mapping) else None
        if outcome == "terminated":
            error = None  # the terminate step failed, but the instance is gone all the same
        summary: dict[str, Any] = (
            self._identity(drain)
            if drain is not None
            else _request_identity(_request_of(state), self.cluster)
        )
        if drain is not None:
            summary.update(_evicted_by(_mapping(state.get("round"))))
        if error is not None:
            summary.update(self._failure(drain, state, error))
        elif outcome == "superseded":
            summary.update(_superseded(_mapping(state.get("superseded"))))
        else:
            summary.update(_success(state, outcome, drain))
        final: Outcome = summary["outcome"]
        if drain is not None:  # its Event named by the execution: a run again puts none more
            self._event(drain, *_event_for(final, summary), key=key)
            self._note_scale_down_failure(drain, final)
        self._note_ended(summary, final, drain.planned_at if drain is not None else state.get("planned_at"))
        count(final, summary)
        return summary

    def _counter(self, execution: str | None) -> OutcomeHook:
        """The ``DrainOutcome`` hook of a record step of ``execution`` (its ARN, ``$$.Execution.Id``):
        counts only when this run is the first of the execution's record steps to count.

        Step Functions runs a Task again when its Retry matches the error, and the record step retries
        Lambda's transient service errors, the invoke's 500s (``Lambda.ClientExecutionTimeoutException``,
        ``Lambda.ServiceException``, ...: AWS Step Functions Developer Guide, "Handle Lambda service
        exceptions"), which say nothing of whether the function ran: a client timeout leaves it
        running. So a drain whose record ran and whose answer was lost was counted once per run. The first run
        to count writes a mark (a claim on ``drain-counted`` items, with a token of its own, so a put
        botocore sent again is still known as its own: ``Ledger.claim``); a later run finds it and
        counts nothing, as does a redrive's run (the same ARN, up to 14 days on: :data:`DRAIN_COUNTED_KEPT`).
        A mark that cannot be written counts anyway: a rare count too many is better
        than a drain nobody counted. No ``execution`` (a caller of an older state machine) counts.
        The state machine's own count, when the record step failed for good, first writes the same
        mark where there is none (its ``Mark*`` states: value ``{"by": "DrainNode", "outcome": ...}``,
        no token, so a later run here finds it and counts nothing; expiring at the validation's
        :meth:`counted_expiry`) and counts only then."""
        if execution is None:
            return self.on_outcome

        def count(outcome: str, who: Mapping[str, Any] | None, n: int = 1, /) -> None:
            token = uuid.uuid4().hex
            now = self.clock()
            try:
                stored, _ = self.ledger.claim(
                    DRAIN_COUNTED_PARTITION.format(cluster=self.cluster),
                    execution,
                    {"token": token, "outcome": outcome, "at": iso(now)},
                    expires=now + DRAIN_COUNTED_KEPT,
                )
            except SpillwayError as exc:
                log.warning("DrainOutcome of %s counted without its mark: %s", execution, exc)
                stored = {"token": token}
            if stored.get("token") != token:
                log.info("DrainOutcome of %s counted already (%s)", execution, stored.get("outcome"))
            elif n == 1:
                self.on_outcome(outcome, who)
            else:
                self.on_outcome(outcome, who, n)

        return count

    def counted_expiry(self) -> dict[str, str]:
        """What the validation answers beside its answer: when a mark of the execution's count that
        DrainNode writes itself (its ``Mark*`` states) may expire, :data:`COUNTED_EXPIRES_AT`. A state
        machine has no clock it can write as a number; this answer gives it this function's."""
        until = self.clock() + timedelta(seconds=MAX_EXECUTION_SECONDS) + DRAIN_COUNTED_KEPT
        return {COUNTED_EXPIRES_AT: str(int(aware(until).timestamp()))}

    def _note_ended(self, summary: Mapping[str, Any], outcome: str, planned_at: object) -> None:
        """When a plan's drain (``summary`` names its ``plan_id`` and ``node``) ends keeping its node
        (:data:`ENDED_KEEPING`), tell later plans, so that its claim on the node, which lasts
        ``drain_claim_minutes`` from the plan, no longer counts the pods it would have evicted against
        their PodDisruptionBudgets, nor the node's pods as leaving (a released make room's too: the plan
        forgot its room, and its claim took every worker on the node off its elastic job)
        (:meth:`spillway.planner.scaledown.ScaleDownStage.claim_ended`): an
        item of the state table per plan and node (a claim, so the step run again writes it once, in
        :data:`~spillway.model.state.DRAINS_PARTITION`), which the state store merges into ``State.ended_drains`` at load. A write throttled or unanswered
        past botocore's retries (:class:`AwsThrottled`, :class:`AwsUnavailable`) fails the record step,
        whose Retry runs it again, nothing counted yet (the count comes last, and once:
        :meth:`_counter`; its Event, put before, is named by the execution, so the run again puts none
        more: :func:`_record_key`);
        past those retries the state machine's Catch ends the drain as it ended (a success stays one)
        and counts it. Any other failure, or that one at last, only leaves the claim spending until it
        lapses, as before.

        The item names the claim it ends by the plan's time (``planned_at``, which the plan put in the
        request from the same ``now`` it wrote as the node's ``draining_since``), not by when the drain
        ended: a later plan's claim on the node made before this drain ended (this one queued past its
        claim, cancelled at validation once a newer plan had claimed the node again) is another drain,
        still to run, and keeps spending. A drain without a readable ``planned_at`` (no claim: a drain
        by hand, ``drain_claim_minutes`` 0; or validated before the field) writes nothing."""
        node, plan_id = summary.get("node"), summary.get("plan_id")
        if outcome not in ENDED_KEEPING or not isinstance(node, str) or not isinstance(plan_id, str):
            return
        claimed = _timestamp(planned_at) if isinstance(planned_at, str) else None
        if claimed is None:
            return
        now = self.clock()
        try:
            self.ledger.claim(
                DRAINS_PARTITION.format(cluster=self.cluster),
                f"{DRAIN_ENDED_PREFIX}{plan_id}#{node}",
                {"at": iso(now), "node": node, "planned_at": iso(claimed)},
                expires=now + SCALE_DOWN_FAILURE_KEPT,
            )
        except (AwsThrottled, AwsUnavailable):
            raise  # the record step's Retry runs it again; past its retries the drain ends as it is
        except SpillwayError as exc:
            log.warning("ended drain of %s not recorded for later plans: %s", node, exc)

    def _note_scale_down_failure(self, drain: Drain, outcome: Outcome) -> None:
        """When ``outcome`` is a plan's scale-down drain failing (:data:`SCALE_DOWN_FAILURES`,
        :func:`_scales_down`), tell later plans, so that they wait
        ``scale_down_delay_after_failure_minutes`` (cluster-autoscaler's ``lastScaleDownFailTime``): an
        item of the state table per drain (a claim, so the step run again writes it once, in
        :data:`~spillway.model.state.DRAINS_PARTITION`), which the
        state store merges into ``State.scale_down`` at load. Best effort, as the Event: the outcome
        stands, and a write that fails only costs the wait."""
        if outcome not in SCALE_DOWN_FAILURES or not _scales_down(drain):
            return
        now = self.clock()
        item = f"{SCALE_DOWN_FAILED_PREFIX}{drain.name or f'{drain.node}@{drain.started_at}'}"
        try:
            self.ledger.claim(
                DRAINS_PARTITION.format(cluster=self.cluster),
                item,
                {"at": iso(now), "node": drain.node},
                expires=now + SCALE_DOWN_FAILURE_KEPT,
            )
        except SpillwayError as exc:
            log.warning("failed scale-down drain of %s not recorded for later plans: %s", drain.node, exc)

    def _record_cancelled(
        self, state: Mapping[str, Any], count: OutcomeHook, key: str | None = None
    ) -> dict[str, Any]:
        """A drain its validation cancelled (``state`` is that answer): a success that touched nothing,
        so no event on the node; the reason is the note, and DrainOutcome counts it once."""
        cancelled = state.get("cancelled")
        if not isinstance(cancelled, Mapping):
            raise InvalidDrainRequest(
                "record of a cancelled drain needs validation's cancelled answer in the state",
                field="state.cancelled",
            )
        summary: dict[str, Any] = {"cluster": self.cluster, **{k: cancelled.get(k) for k in CANCELLED_KEYS}}
        summary.update(
            outcome="cancelled", note=str(cancelled.get("note") or "cancelled at validation")[:2000]
        )
        if cancelled.get("notice"):
            summary["notice"] = str(cancelled["notice"])
            self._skipped_event(summary, cancelled.get("node_uid"), key)
        self._note_ended(summary, "cancelled", cancelled.get("planned_at"))
        count("cancelled", summary)
        return summary

    def _record_cancel(
        self, state: Mapping[str, Any], count: OutcomeHook, key: str | None = None
    ) -> dict[str, Any]:
        """A drain cancelled at its validation (its answer in the state), or abandoned after its cordon
        (its last round's ``abandon``)."""
        if "cancelled" not in state and _mapping(state.get("round")).get("abandon"):
            return self._record_abandoned(state, count, key)
        return self._record_cancelled(state, count, key)

    def _record_abandoned(
        self, state: Mapping[str, Any], count: OutcomeHook, key: str | None = None
    ) -> dict[str, Any]:
        """A plan's drain abandoned after its cordon because work came to the node since the plan (the
        round's ``abandon``), its node given back (``compensation``, GiveBack's answer): ``cancelled``, a
        success, with the pods it evicted before, an Event on the Node and the DrainOutcome metric. A
        GiveBack that failed (``compensation_error``) does not come here: the state machine fails the
        drain ``DrainCancelled`` (GiveBackFailed, RecordFailure), the node still cordoned."""
        drain = parse_drain(state["drain"])
        rounds = _mapping(state.get("round"))
        summary: dict[str, Any] = {
            **self._identity(drain),
            **_evicted_by(rounds),
            "outcome": "cancelled",
            "note": (str(rounds.get("abandon") or "abandoned") + self._compensation_note(drain, state))[
                :2000
            ],
        }
        if rounds.get("remaining"):
            summary["remaining"] = list(rounds["remaining"])
        self._event(
            drain,
            "SpillwayDrainCancelled",
            f"Cancelled ({drain.reason}) after evicting {_evicted_words(summary)}: {summary['note']}",
            "Normal",
            key=key,
        )
        self._note_ended(summary, "cancelled", drain.planned_at)
        count("cancelled", summary)
        return summary

    def _skipped_event(self, summary: Mapping[str, Any], uid: Any, key: str | None = None) -> None:
        """A notice's drain left its node alone (:meth:`_skipped`): its operator sees why on the Node,
        which ``kubectl describe node`` lists by uid. A Node that is gone gets none."""
        if not isinstance(uid, str) or not isinstance(summary.get("node"), str):
            return
        message = f"Skipped ({summary.get('reason')}): {summary.get('note')}"
        with contextlib.suppress(KubeError):
            self.kube.record_event(
                "Node", summary["node"], None, "SpillwayDrainSkipped", message, uid=uid, key=key
            )

    def _failure(
        self, drain: Drain | None, state: Mapping[str, Any], error: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A failed drain's outcome, error and cause (with what became of the compensation)."""
        name = str(error.get("Error") or "States.TaskFailed")
        cause = cause_message(error.get("Cause"))
        out: dict[str, Any] = {}
        if drain is not None:
            cause += self._compensation_note(drain, state)
            remaining = _mapping(state.get("round")).get("remaining")
            if remaining:
                out["remaining"] = list(remaining)
        out.update(outcome=OUTCOME_OF_ERROR.get(name, "failed"), error=name, cause=cause[:32_000])
        return out

    # helpers -----------------------------------------------------------------------------------

    def _our_node(self, drain: Drain, *, require_cordon: bool = True, execution: str | None = None) -> Node:
        """The node, still the one validated and (after the cordon) still cordoned by Spillway; a leaving
        instance's drain goes on whoever cordoned or uncordoned it (the instance goes anyway).
        :class:`DrainSuperseded` (after the cordon) when another Spillway drain took the node over."""
        try:
            node = self.kube.get_node(drain.node)
        except NodeNotFound:
            raise DrainCancelled(
                f"Node {drain.node!r} disappeared while it drained; nothing terminated"
            ) from None
        if node.metadata.uid != drain.node_uid:
            raise DrainCancelled(
                f"Node {drain.node!r} was replaced while it drained (a new uid); nothing terminated"
            )
        holder = _taken_over_by(drain, node) if require_cordon else None
        if holder is not None:
            self._superseded(drain, holder, execution)
            return self._take_over(drain, holder)
        if (
            require_cordon
            and not drain.leaving
            and not (node.spec.unschedulable and CORDONED_BY_SPILLWAY in node.metadata.annotations)
        ):
            raise DrainCancelled(
                f"Node {drain.node!r} is no longer cordoned by Spillway (the planner or a person uncordoned "
                "it while it drained): the drain stops and nothing is terminated"
            )
        return node

    def _present(
        self, drain: Drain, *, require_cordon: bool = True, execution: str | None = None
    ) -> Node | None:
        """:meth:`_our_node`, or None when a leaving instance's Node is gone: EC2 reclaimed the instance,
        or another drain of it terminated it; for any other drain that is a cancellation."""
        if drain.leaving:
            try:
                self.kube.get_node(drain.node)
            except NodeNotFound:
                return None
        return self._our_node(drain, require_cordon=require_cordon, execution=execution)

    def _superseded(self, drain: Drain, holder: str, execution: str | None) -> None:
        """Another Spillway drain holds the node (``holder``, its cordon's words: :func:`_taken_over_by`).
        :class:`DrainSuperseded`, but for a forced drain, which another forced drain following the same EC2
        event holds: it stands by (:class:`_StandingBy`) while that one's execution runs, or while it
        cannot be read, and returns when that one ended without succeeding (failed, timed out, stopped,
        or unknown to Step Functions), to take the node over (:meth:`_take_over`). Otherwise nobody would
        drain for the event: a forced drain that fails keeps its cordon and taint (EC2 takes the
        instance), so the pods it left would go down with the instance at the event's start."""
        winner = holder_execution(holder, execution) if drain.force and self.executions else None
        if winner is not None and self.executions is not None:
            try:
                status = self.executions(winner)
            except AwsError as exc:
                status = f"{type(exc).__name__}: {exc}"
            if status not in ENDED_UNDRAINED and status != "SUCCEEDED":
                raise _StandingBy(holder, status)
            if status != "SUCCEEDED":
                return
        raise DrainSuperseded(
            f"Node {drain.node!r} is held by another Spillway drain now ({holder[:200]}): this drain "
            "stops and leaves the node, its cordon and its taint to that one"
        )

    def _take_over(self, drain: Drain, holder: str) -> Node:
        """Cordon the node for ``drain`` again (its words replace those of the forced drain whose
        execution ended without succeeding) and taint it; a Node event says so. The node as read now."""
        self.kube.cordon(drain.node, reason=cordon_reason(drain))
        self.kube.add_draining_taint(drain.node, exclude_from_load_balancers=node_goes(drain))
        self._event(
            drain,
            "SpillwayDraining",
            f"Taking the node over ({drain.reason}) from a drain that ended without draining it "
            f"({holder[:120]}): evicting pods until {drain.deadline_at}",
        )
        return self.kube.get_node(drain.node)

    def _event(
        self, drain: Drain, reason: str, message: str, type: str = "Normal", *, key: str | None = None
    ) -> None:
        # An event is a courtesy: the outcome is in the execution and the metric. ``key``: one Event
        # for every run of a step with it (KubeClient.record_event)
        with contextlib.suppress(KubeError):
            self.kube.record_event(
                "Node", drain.node, None, reason, message, type, uid=drain.node_uid, key=key
            )

    def _identity(self, drain: Drain) -> dict[str, Any]:
        return (
            {
                "cluster": drain.cluster,
                "node": drain.node,
                "instance_id": drain.instance_id,
                "group": drain.group,
                "region": drain.region,
                "reason": drain.reason,
                "plan_id": drain.plan_id,
                "started_at": drain.started_at,
                "deadline_at": drain.deadline_at,
            }
            | ({"consolidation": True} if drain.consolidation else {})
            | ({"uncordon": True} if drain.uncordon else {})
            | _lifecycle_identity(drain)
        )

    def _compensation_note(self, drain: Drain, state: Mapping[str, Any]) -> str:
        done = state.get("compensation")
        if isinstance(done, Mapping):
            if done.get("note"):
                return f"; {done['note']}"
            return "; the node was uncordoned and its remaining pods left running"
        if state.get("compensation_error"):
            why = cause_message(_mapping(state.get("compensation_error")).get("Cause"))[:300]
            if drain.leaving and drain.force:  # nothing to undo: the node goes with its instance
                return f"; {_keep_leaving(drain)['note']} (the compensation failed: {why})"
            return (
                f"; undoing the cordon failed too ({why}): run `kubectl taint node {drain.node} "
                f"{DRAINING_TAINT}- ; kubectl uncordon {drain.node} ; kubectl annotate node {drain.node} "
                f"{CORDONED_BY_SPILLWAY}-`{_label_note(drain)}"
            )
        return ""


def _label_note(drain: Drain) -> str:
    """What a person runs to take off the load balancer exclusion label the drain may have added (only
    while the node carries the drain's record of it and the value the drain set: a label without one, or
    of another value, is an operator's)."""
    if not node_goes(drain):
        return ""
    return (
        f", and if it carries the annotation {LB_EXCLUDED_BY_SPILLWAY}: `kubectl annotate node {drain.node} "
        f"{LB_EXCLUDED_BY_SPILLWAY}-`, then, if its label {EXCLUDE_FROM_LB_LABEL} is still "
        f'"{EXCLUDE_FROM_LB_VALUE}": `kubectl label node {drain.node} {EXCLUDE_FROM_LB_LABEL}-`'
    )


# the compensation found no Spillway cordon on the node (a stray draining taint is lifted, nothing else)
_NOT_OURS = (
    "the node carries no Spillway cordon (somebody uncordoned it, or cordoned it themselves): left as it "
    "is, its remaining pods running"
)
# the compensation's uncordon found another cordon than the one it read (compare-and-set)
_NOT_HANDED = (
    "the node no longer carries this drain's cordon (somebody uncordoned it, or another drain took it "
    "over): left as it is"
)

_CORDON_CHANGED = (
    "Spillway's cordon on the node changed since the compensation read it (another drain took it over, "
    "or it was taken off): left as it is"
)


def _left_alive(drain: Drain, placement: Placement | None, state: str) -> str:
    """Where the instance went: it left its group alive during the drain."""
    where = f"is in {placement.group} now" if placement is not None else "is in no group now"
    return (
        f"instance {drain.instance_id} left Auto Scaling group {drain.group} during the drain and {where} "
        f"(EC2: {state})"
    )


def _not_terminated(check: Mapping[str, Any]) -> dict[str, Any]:
    """The terminate step's answer when its own check found the node not ready (:meth:`Drainer.terminate`):
    nothing terminated; ``ready`` false sends the drain back to its eviction rounds."""
    remaining = list(check.get("remaining") or [])
    why = str(
        check.get("note")
        or f"{len(remaining)} pod(s) came to the node since the check: {_describe_pods(remaining)}"
    )
    return {
        "ready": False,
        "status": "NotTerminated",
        "remaining": remaining,
        "note": f"not terminated: {why}; back to the eviction rounds",
        **({"standing_by": check["standing_by"]} if "standing_by" in check else {}),
    }


def _keep_leaving(drain: Drain) -> dict[str, Any]:
    """The compensation of a forced drain of a leaving instance (a Spot warning's, a scheduled change's
    within a day): EC2 takes the instance whatever the drain did, so the cordon and the draining taint
    stay; uncordoning would only let new pods land on a node about to go. A drain without force (a
    rebalance recommendation's, a change more than a day out) is undone as usual: that instance may stay."""
    return {
        "untainted": False,
        "uncordoned": False,
        "note": (
            f"EC2 takes the instance {drain.instance_id} anyway ({drain.reason}): the node stays cordoned "
            "and tainted, and its remaining pods go with it"
        ),
    }


OUTSIDE_GROUP = (
    "not terminated: instance {instance} is in no Auto Scaling group (detached from its group since the "
    "snapshot), so there is no group to terminate it through; EC2 takes it back"
)


def _outside_group(drain: Drain, terminated: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What a drain of an instance in no group says of it (:func:`_drains_outside_group`), or of one that
    left its group alive before its terminate step (``terminated``, that step's ``LeftGroup`` result):
    drained, the node left cordoned, nothing terminated. Nothing for any other drain."""
    if terminated and terminated.get("outside_group"):
        why = terminated.get("description")
        return {
            "outside_group": True,
            "note": f"not terminated: {why}, after a Spot warning; EC2 takes it back",
        }
    if drain.group is not None:
        return {}
    return {"outside_group": True, "note": OUTSIDE_GROUP.format(instance=drain.instance_id)}


def _lifecycle_identity(drain: Drain) -> dict[str, Any]:
    if drain.lifecycle is None:
        return {}
    return {"lifecycle": {"hook": drain.lifecycle.hook, "result": LIFECYCLE_CONTINUE}}


def _field(doc: Mapping[str, Any], name: str) -> Any:
    """``Name`` or ``name``: AWS's service integrations answer PascalCase, the SDK camelCase."""
    value = doc.get(name)
    return doc.get(name[:1].lower() + name[1:]) if value is None else value


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def cause_message(cause: Any) -> str:
    """A failure's message for people: a Lambda's ``errorMessage`` (its Cause is that JSON), else as is."""
    if not isinstance(cause, str):
        return "" if cause is None else json.dumps(cause, default=str)
    try:
        doc = json.loads(cause)
    except ValueError:
        return cause
    if isinstance(doc, dict):
        if isinstance(doc.get("errorMessage"), str):
            return str(doc["errorMessage"])
        nested = _field(doc, "Cause")
        if isinstance(nested, str) and _field(doc, "ExecutionArn"):  # a child execution's description
            return cause_message(nested)
    return cause


def _by_another(already: dict[str, Any]) -> dict[str, Any]:
    """The first attempt of a terminate step found the instance already terminating, before any call of
    its own: somebody else terminated it (``by_another``). Any other answer as it is."""
    if already.get("status") != "AlreadyTerminating":
        return already
    return {
        **already,
        "by_another": True,
        "note": "terminated before this drain came to terminate it, not by this drain (another drain of the "
        "instance, EC2 reclaiming it, or a person): recorded gone, counted terminated by whoever terminated it",
    }


def _request_of(state: Mapping[str, Any]) -> Any:
    """The request a refused drain's state carries: under ``request``, where DrainNode's first state
    (Request) puts the execution's input, whatever JSON it is; the state itself in an execution started
    before that state (it had the request's fields at the top, beside ``error``). A request has no
    ``request`` of its own: DrainRequest refuses keys it does not know."""
    return state.get("request", state)


def _request_identity(request: Any, cluster: str) -> dict[str, Any]:
    """What a rejected request said about itself (it may be malformed: only strings are kept; a request
    that is no JSON object says nothing)."""
    out: dict[str, Any] = {"cluster": cluster}
    if not isinstance(request, Mapping):
        return out
    for key in ("node", "instance_id", "group", "region", "plan_id", "reason"):
        value = request.get(key)
        if isinstance(value, str):
            out[key] = value[:253]
    return out


def _success(state: Mapping[str, Any], outcome: str | None, drain: Drain | None) -> dict[str, Any]:
    """A drain that ended well: drained (``terminate`` false; why, for an instance in no group),
    released (``uncordon``: the node emptied, uncordoned and kept), terminated, or gone (its instance
    terminated by another before its terminate step: :func:`_by_another`), and the Node's fate."""
    if outcome == "drained":
        left = _mapping(state.get("terminated"))
        return {
            "outcome": "drained",
            **(_outside_group(drain, left) if drain is not None else {}),
            **(_handed_over(drain, state) if drain is not None and _hands_over(drain) else {}),
        }
    if outcome == "released":
        return _released(_mapping(state.get("released")))
    compensation = _mapping(state.get("compensation"))
    terminated = state.get("terminated") or compensation.get("terminated")
    out: dict[str, Any] = {
        "outcome": "gone" if outcome == "gone" else "terminated",
        "terminated": terminated,
        "node_deleted": bool(_mapping(state.get("deleted")).get("deleted")),
    }
    if outcome == "gone":
        out["note"] = str(_mapping(terminated).get("note") or "the instance was terminated by another")
    error = _mapping(state.get("error"))
    if error:
        out["note"] = (
            f"the terminate step failed ({error.get('Error')}: {cause_message(error.get('Cause'))[:300]}), "
            "but the instance was terminated all the same"
        )
    if state.get("delete_error"):
        out["note"] = (
            "the instance is terminated but deleting the Node failed ("
            + cause_message(_mapping(state.get("delete_error")).get("Cause"))[:300]
            + "); the cloud node lifecycle controller removes it"
        )
    return out


def _handed_over(drain: Drain, state: Mapping[str, Any]) -> dict[str, Any]:
    """A drain by hand that kept its node: whether its hand-over step left the node the operator's."""
    done, caught = _mapping(state.get("handed_over")), _mapping(state.get("hand_over_error"))
    if done.get("handed_over"):
        return {"handed_over": True}
    if caught:
        why = f"{caught.get('Error')}: {cause_message(caught.get('Cause'))[:300]}"
        note = (
            f"the node stays cordoned by Spillway: its cordon could not be handed over ({why}), so a "
            "plan takes it for an orphaned drain after orphaned_drain_minutes"
        )
        return {"handed_over": False, "note": note}
    return {"handed_over": False, **({"note": str(done["note"])} if done.get("note") else {})}


def _released(done: Mapping[str, Any]) -> dict[str, Any]:
    """An ``uncordon`` drain's success: what its uncordon step undid (it finds the node as the check
    before it left it, cordoned by Spillway; a note says otherwise)."""
    out: dict[str, Any] = {
        "outcome": "released",
        "uncordoned": bool(done.get("uncordoned")),
        "untainted": bool(done.get("untainted")),
    }
    if done.get("note"):
        out["note"] = str(done["note"])
    return out


def _superseded(caught: Mapping[str, Any]) -> dict[str, Any]:
    """A drain another Spillway drain took the node from (the ``DrainSuperseded`` a step raised, as the
    Catch records it): a success, nothing undone; the note names the drain that holds the node."""
    why = cause_message(caught.get("Cause")) or "another Spillway drain took the node over"
    return {"outcome": "superseded", "note": f"{why}; nothing was undone"[:2000]}


def _evicted_by(rounds: Mapping[str, Any]) -> dict[str, Any]:
    """What a drain's rounds evicted, for its record (``rounds``: its last round's output): the pods of its
    rounds (``evicted``, ``evicted_count``), the rounds, and the DaemonSet pods evicted once the rest was
    gone (``daemonsets``, when any: :meth:`Drainer._daemonsets`), which go in no ``evicted``; and the pods
    whose eviction was sent and whose answer was lost, which no round after looked at (``unconfirmed``,
    when any: :data:`UNCONFIRMED`): the drain ended first, and the pod may have been stopped by it; and
    those a round after found gone or deleted otherwise (``evicted_or_deleted``: :func:`_confirmed`)."""
    daemonsets = [str(pod) for pod in rounds.get("daemonsets") or []]
    lost = [str(u.get("pod")) for u in rounds.get("unconfirmed") or [] if isinstance(u, Mapping)]
    unsure = [str(pod) for pod in rounds.get(EVICTED_OR_DELETED) or []]
    return {
        "evicted": list(rounds.get("evicted") or []),
        "evicted_count": int(rounds.get("evicted_count") or 0),
        "rounds": int(rounds.get("rounds") or 0),
        **({"daemonsets": daemonsets} if daemonsets else {}),
        **({"unconfirmed": lost} if lost else {}),
        **({EVICTED_OR_DELETED: unsure} if unsure else {}),
    }


def _evicted_words(summary: Mapping[str, Any]) -> str:
    """How many pods a drain evicted, as its Event says it: its rounds' and its DaemonSet pods, and the
    evictions whose answer was lost that no round looked at again (:func:`_lost_answers`: a forced
    drain that went on past its deadline), which may have stopped their pods."""
    agents = len(summary.get("daemonsets") or [])
    also = f" and {agents} DaemonSet pod(s)" if agents else ""
    lost = _lost_answers(summary)
    return f"{int(summary.get('evicted_count') or 0)} pod(s){also}" + (f", and {lost}" if lost else "")


def _event_for(outcome: str, summary: Mapping[str, Any]) -> tuple[str, str, str]:
    evicted = _evicted_words(summary)
    if outcome == "terminated":
        return (
            "SpillwayDrained",
            f"Drained ({summary.get('reason')}): evicted {evicted}, terminated "
            f"{summary.get('instance_id')} ({summary.get('group')}, {summary.get('region')}) and "
            "removed the Node",
            "Normal",
        )
    if outcome == "gone":
        return (
            "SpillwayDrained",
            f"Drained ({summary.get('reason')}): evicted {evicted}; {summary.get('instance_id')} "
            "was already terminating, terminated by another, not by this drain",
            "Normal",
        )
    if outcome == "drained":
        why = f"; {summary['note']}" if summary.get("outside_group") or summary.get("note") else ""
        if summary.get("handed_over"):
            why = "; the node stays cordoned, yours now: `kubectl uncordon` gives it back"
        return (
            "SpillwayDrained",
            f"Drained ({summary.get('reason')}): evicted {evicted}{why}",
            "Normal",
        )
    if outcome == "superseded":
        return (
            "SpillwayDrainSuperseded",
            f"Superseded ({summary.get('reason')}) after evicting {evicted}: {summary.get('note')}",
            "Normal",
        )
    if outcome == "released":
        undone = (
            "then uncordoned the node and lifted its draining taint; it stays in service for pending pods"
            if summary.get("uncordoned")
            else f"then left the node as it is ({summary.get('note') or 'Spillway no longer held it'})"
        )
        return (
            "SpillwayReleased",
            f"Released ({summary.get('reason')}): evicted {evicted}, {undone}",
            "Normal",
        )
    reason = {"timeout": "SpillwayDrainTimeout", "cancelled": "SpillwayDrainCancelled"}.get(
        outcome, "SpillwayDrainFailed"
    )
    return (reason, f"{summary.get('error')}{_evicted_before(summary)}: {summary.get('cause')}", "Warning")


EVENT_PODS = 10  # pods a failed drain's Event names (its message is cut at 1024 characters)
EVENT_PODS_CHARS = 400  # of those 1024, at most this much for their names: the cause comes after them


def _evicted_before(summary: Mapping[str, Any]) -> str:
    """The pods a failed drain evicted, named in its Event before the cause (which may be long): the
    node is given back with those pods stopped, and ``kubectl describe node`` should say which. As many
    names as fit in ``EVENT_PODS_CHARS`` (at least one), so that long names leave the cause its room."""
    evicted, agents = summary.get("evicted") or [], summary.get("daemonsets") or []
    count = int(summary.get("evicted_count") or 0) + len(agents)
    lost = _lost_answers(summary)
    if not count:
        return f" after {lost}" if lost else ""
    names: list[str] = []
    for pod in [str(p) for p in [*evicted, *agents]][:EVENT_PODS]:
        if names and len(", ".join([*names, pod])) > EVENT_PODS_CHARS:
            break
        names.append(pod[:EVENT_PODS_CHARS])
    more = f" and {count - len(names)} more" if count > len(names) else ""
    also = f", and {lost}" if lost else ""
    return f" after evicting {count} pod(s) ({', '.join(names)}{more}){also}"


def _lost_answers(summary: Mapping[str, Any]) -> str:
    """The evictions a drain sent whose answer was lost and which no round after looked at
    (``unconfirmed``: a failed drain's, a forced drain's that went on to terminate), and those whose
    pod a round after found gone or deleted otherwise (``evicted_or_deleted``: nothing tells whether
    the eviction or another hand stopped it): they may have stopped their pods, so its Event names
    them after those evicted."""
    lost = _two_named(summary.get("unconfirmed"), "eviction(s) whose answer was lost")
    unsure = _two_named(summary.get(EVICTED_OR_DELETED), "pod(s) evicted or deleted by another hand")
    return ", and ".join(part for part in (lost, unsure) if part)


def _two_named(pods: Any, what: str) -> str:
    """``pods`` counted as ``what``, the first two named."""
    names = [str(pod)[:120] for pod in pods or []]
    if not names:
        return ""
    more = f" and {len(names) - 2} more" if len(names) > 2 else ""
    return f"{len(names)} {what} ({', '.join(names[:2])}{more})"


def summarize(cluster: Any, plan_id: Any, results: Any) -> dict[str, Any]:
    """The scale-down's output: one line per drain, whatever became of it, and counts per outcome.

    A Map item is ``{"line"}``, made in the Map by :func:`line` from the drain's result, or that result
    itself when its Line step failed: ``{"execution", "output"}`` (the DrainNode execution succeeded;
    ``output`` is its outcome), ``{"output"}`` (an unregistered instance's removal), or ``{"request",
    "error"}`` (it failed: for a failed execution the Catch's Cause is that execution's DescribeExecution
    output, whose ``error`` and ``cause`` are the drain's own).
    """
    drains: list[dict[str, Any]] = []
    for item in results if isinstance(results, list) else []:
        drains.append(_summarize_one(item))
    counts: dict[str, int] = {}
    for entry in drains:
        counts[entry["outcome"]] = counts.get(entry["outcome"], 0) + 1
    return {"cluster": cluster, "plan_id": plan_id, "drains": drains, "counts": dict(sorted(counts.items()))}


# A drain's line in a scale-down's summary is at most this many bytes of JSON (UTF-8): the scale-down Map
# keeps every drain's result in its output, and Step Functions refuses a state over 256 KB
# (States.DataLimitExceeded, which no Catch takes); spillway.act.planning sizes its parts by it.
DRAIN_LINE_BYTES = 3 * 1024
_CUT = "…"


def line(result: Any) -> dict[str, Any]:
    """One scale-down Map result as its summary line (what :func:`summarize` makes of it), at most
    :data:`DRAIN_LINE_BYTES`: the scale-down's ``Line`` step, run on every drain's result in the Map, so
    the Map keeps lines, not a DrainNode execution's whole output (every pod it evicted) or a failure's
    whole error (the child execution's DescribeExecution, its input and a cause of up to 32,000
    characters). Its cause, then its note, is cut to fit."""
    out = _summarize_one(result)
    for key in ("cause", "note"):
        text = str(out.get(key) or "")
        while text and _json_bytes(out) > DRAIN_LINE_BYTES:
            text = text[: max(0, len(text) - max(_json_bytes(out) - DRAIN_LINE_BYTES, 16))]
            out[key] = text + _CUT if text else _CUT
    return out


def _json_bytes(doc: Any) -> int:
    return len(json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode())


def _summarize_one(item: Any) -> dict[str, Any]:
    if isinstance(item, Mapping) and isinstance(item.get("line"), Mapping):
        return dict(item["line"])  # made already, in the Map (:func:`line`)
    if not isinstance(item, Mapping):
        return {
            "outcome": "failed",
            "error": "States.Runtime",
            "cause": f"unexpected Map result {item!r}"[:300],
        }
    output = item.get("output")
    if isinstance(output, Mapping):
        return _succeeded_line(output, item.get("execution"))
    return _failed_line(item)


def _succeeded_line(output: Mapping[str, Any], execution: Any) -> dict[str, Any]:
    line = {k: output.get(k) for k in ("node", "instance_id", "group", "region", "outcome")}
    line.update(
        {key: output[key] for key in ("evicted_count", "node_deleted", "uncordoned", "note") if key in output}
    )
    line["outcome"] = str(line.get("outcome") or "terminated")
    line["execution"] = execution
    return line


def _failed_line(item: Mapping[str, Any]) -> dict[str, Any]:
    request = _mapping(item.get("request"))
    line = {k: request.get(k) for k in ("node", "instance_id", "group", "region")}
    error = _mapping(item.get("error"))
    name = str(error.get("Error") or "States.TaskFailed")
    cause: Any = error.get("Cause")
    child = _child_execution(cause)
    if child is not None:
        # The failed DrainNode execution, as DescribeExecution (PascalCase from a .sync:2 task).
        line["execution"] = _field(child, "ExecutionArn")
        status = _field(child, "Status") or "?"
        name = str(_field(child, "Error") or status)
        cause = _field(child, "Cause") or f"the drain's execution ended {status}"
    outcome: Outcome = OUTCOME_OF_ERROR.get(name, "failed")
    line.update(outcome=outcome, error=name, cause=cause_message(cause)[:2000])
    return line


def _child_execution(cause: Any) -> Mapping[str, Any] | None:
    """A Catch's Cause that is a child execution's DescribeExecution output, parsed; else None."""
    try:
        child = json.loads(cause) if isinstance(cause, str) else None
    except ValueError:
        return None
    return child if isinstance(child, Mapping) and _field(child, "ExecutionArn") else None


# steps that read their event, not a drain
_EVENT_ACTIONS: dict[str, Callable[[Drainer, Mapping[str, Any]], dict[str, Any]]] = {
    "remove_unregistered": lambda drainer, event: drainer.remove_unregistered(event.get("request")),
    "remove_gang_orphan": lambda drainer, event: drainer.remove_gang_orphan(event.get("request")),
    "undrained": lambda drainer, event: drainer.undrained(event),
    "line": lambda _drainer, event: {"line": line(event.get("result"))},
}


# steps that take the drain alone
_DRAIN_STEPS: dict[str, Callable[[Drainer, Drain], dict[str, Any]]] = {
    "cordon": Drainer.cordon,
    "complete_lifecycle": Drainer.complete_lifecycle,
    "delete_node": Drainer.delete_node,
    "hand_over": Drainer.hand_over,
}


def _attempt(value: Any) -> int | None:
    """A terminate step's retry count (``$$.State.RetryCount``), None when absent or not a count."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _action_of(event: Mapping[str, Any]) -> str | None:
    """The step's name; a list or an object (which could not even be looked up) is refused."""
    action = event.get("action")
    if action is not None and not isinstance(action, str):
        raise InvalidDrainRequest(f"a step's name (one of: {', '.join(ACTIONS)})", field="action")
    return action


def _record_key(execution: str | None) -> str | None:
    """The key of a record step's Event (``KubeClient.record_event``): the same for every run of the
    execution's record, so a run again (a Retry of a Lambda service error that came after the function
    ran, or of an ended mark not written: :meth:`Drainer._note_ended`) puts no second Event on the
    Node. None without an execution (an older state machine's): each run its own Event, as before."""
    return f"{execution}#record" if execution else None


def _record_step(drainer: Drainer, event: Mapping[str, Any]) -> dict[str, Any]:
    """A record step: the state machine's ``state``, the ``outcome`` its state names, and its
    ``execution`` (ARN), which the count is kept to once (:meth:`Drainer.record`)."""
    state = event.get("state")
    if not isinstance(state, Mapping):
        raise InvalidDrainRequest("record needs the state machine's state", field="state")
    outcome, execution = event.get("outcome"), event.get("execution")
    return drainer.record(
        state,
        outcome if isinstance(outcome, str) else None,
        execution if isinstance(execution, str) and execution else None,
    )


def run_action(drainer: Drainer, event: Mapping[str, Any]) -> dict[str, Any]:
    """Dispatch one state machine step: ``{"action": ..., ...}`` to the :class:`Drainer` method."""
    action = _action_of(event)
    if action == "summarize":
        return summarize(event.get("cluster"), event.get("plan_id"), event.get("results"))
    if action == "validate":
        return {**drainer.validate(event.get("request"), event.get("execution")), **drainer.counted_expiry()}
    if action in _EVENT_ACTIONS:
        return _EVENT_ACTIONS[action](drainer, event)
    if action == "record":
        return _record_step(drainer, event)
    if action not in ACTIONS:
        raise InvalidDrainRequest(f"unknown action {action!r} (one of: {', '.join(ACTIONS)})", field="action")
    drain = parse_drain(event.get("drain"))
    execution = event.get("execution") if isinstance(event.get("execution"), str) else None
    if action == "terminate":
        return drainer.terminate(drain, _attempt(event.get("attempt")), execution=execution)
    if action in _DRAIN_STEPS:
        return _DRAIN_STEPS[action](drainer, drain)
    if action == "check":
        return drainer.check(drain, execution=execution)
    if action == "evict":
        previous = event.get("round")
        return drainer.evict(drain, previous if isinstance(previous, Mapping) else None, execution=execution)
    return drainer.uncordon(drain, after_terminate=event.get("after_terminate") is True)
