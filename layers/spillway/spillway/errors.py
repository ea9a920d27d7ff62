"""One error hierarchy for everything Spillway raises on purpose.

A Lambda's exception *class name* is what a Step Functions ``Retry``/``Catch`` matches
(``"ErrorEquals": ["KubeUnavailable"]``), exactly and not by subclass, so the names are part of the
contract: do not rename them. Which errors each Lambda step may raise is declared beside the step
(``RAISES`` in :mod:`spillway.act.scale` and :mod:`spillway.act.drain`), and
``tests/unit/test_error_contract.py`` checks the state machines retry or catch every one of them.
Transient failures (what a ``Retry`` names) are ``KubeUnavailable``, ``KubeConflict``, ``AwsThrottled``
and ``AwsUnavailable``; every store raises DynamoDB throttling as ``AwsThrottled``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class SpillwayError(Exception):
    """Base of every error Spillway raises on purpose."""


class InputError(SpillwayError):
    """Input that cannot be used. The message names the file (when there is one) and the field."""

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None) -> None:
        self.source = source
        self.field = field
        where = ": ".join(p for p in (source, field) if p)
        super().__init__(f"{where}: {message}" if where else message)


def refused_input(exc: ValidationError, *, what: str = "input") -> InputError:
    """A pydantic refusal of an event as one :class:`InputError` naming its first bad field, dotted
    ("group.to", "prep.before.0"): what a Lambda step raises instead of pydantic's own error."""
    err = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in err["loc"]) or None
    if err["type"] == "missing":
        return InputError("required", field=where)
    if err["type"] == "extra_forbidden":
        return InputError(f"not a key the {what} takes", field=where)
    return InputError(f"{err['msg']}, got {repr(err.get('input'))[:80]}", field=where)


class ConfigurationError(InputError):
    """Deployment configuration (environment, config file) that cannot be used."""


# --- Kubernetes -------------------------------------------------------------------------------


class KubeError(SpillwayError):
    """A Kubernetes API call failed."""


class KubeUnavailable(KubeError):
    """The API server did not answer usefully (connection errors, timeouts, 5xx after retries).
    ``sent``: False when no attempt of the call can have been applied: a client bound by an invocation's
    time had too little left to start its first (``KubeClient.within``), or was answered before that."""

    def __init__(self, *args: object, sent: bool = True) -> None:
        super().__init__(*args)
        self.sent = sent


class ListExpired(KubeUnavailable):
    """A paged list's continue token expired (410 Expired: etcd compacted the revision the list reads)
    after part of the list was handed out. What was handed out belongs to a list that can no longer be
    finished consistently: the reader drops it and reads again from the start, without ``continue``,
    as the Kubernetes API concepts page tells a client that needs a consistent list. A
    ``KubeUnavailable``, so a reader that does not start again fails as for an outage; only the
    adapter's streams raise it (its lists start again themselves, and raise plain ``KubeUnavailable``
    when they cannot finish)."""


class KubeAuthError(KubeError):
    """Credentials were refused (401/403) or could not be made."""


class NodeNotFound(KubeError):
    """The named Node does not exist."""


class PodNotFound(KubeError):
    """The named Pod does not exist (already gone is often fine for a drain)."""


class EvictionBlocked(KubeError):
    """The Eviction API answered 429 for a PodDisruptionBudget (its Status carries a cause of reason
    ``DisruptionBudget``): the budget allows no disruption right now."""


class EvictionRefused(KubeError):
    """The Eviction API refuses this pod until its budgets change: it answers 500 "This pod has more
    than one PodDisruptionBudget, which the eviction subresource does not support." to every attempt.
    Not an outage, and not retried."""


class EvictionThrottled(KubeError):
    """The Eviction API answered 429 without a PodDisruptionBudget cause: the API server limits the
    request rate (API Priority and Fairness); or 504 "couldn't update PodDisruptionBudget ... due to
    conflicts": other evictions under the budget kept winning its update. Try again later."""


class EvictionBudgetForbidden(KubeError):
    """The Eviction API answered 403 Forbidden naming the pod's PodDisruptionBudget (its Status's
    ``details`` are group ``policy``, kind ``poddisruptionbudget``): the budget's status refuses every
    eviction until the disruption controller writes it again (``disruptionsAllowed`` negative, or
    ``disruptedPods`` holding more evictions than the API server lets wait for the controller). A budget's
    refusal, not RBAC's: try later."""


class EvictionNamespaceTerminating(KubeError):
    """The Eviction API answered 403 Forbidden with a status cause of type ``NamespaceTerminating``: the
    pod's namespace is being deleted, no eviction can be created in it, and the namespace controller
    deletes the pod. Wait for it to go (``kubectl drain`` does the same)."""


class ObjectNotFound(KubeError):
    """The named Kubernetes object (a custom resource, a pod template ...) does not exist."""


class ObjectReplaced(ObjectNotFound):
    """The object read is gone: another one of the same name (another ``metadata.uid``) took its place,
    and a write conditional on the uid read was refused. For the caller, as good as not found."""


class KubeConflict(KubeError):
    """A write lost a race (409 Conflict)."""


# --- AWS --------------------------------------------------------------------------------------


class AwsError(SpillwayError):
    """An AWS API call failed."""


class AwsThrottled(AwsError):
    """An AWS API (Auto Scaling, EC2, DynamoDB, Step Functions) refused the call for its rate."""


class AwsUnavailable(AwsError):
    """An AWS endpoint did not answer (connection errors, timeouts, 5xx after the SDK's retries).

    ``unsent``: no try of the call reached AWS (its endpoint could not be reached or connected to, or
    the call was never asked), so a write that failed so certainly applied nothing; else a write may
    have been applied and its answer lost. Read by the caller only: a state machine matches the name."""

    def __init__(self, message: str, *, unsent: bool = False) -> None:
        super().__init__(message)
        self.unsent = unsent


class ReadCut(SpillwayError):
    """A read its caller stopped waiting for (:mod:`spillway.cutoff`) tried to send a call or use an
    answer after the cut: raised in that read's own thread, which it ends; nobody waits for it. Not an
    :class:`AwsError`, so that no handler of a failed call takes it for AWS's answer (a region read's
    ``except AwsError`` would go on to its next call, or note what a failure says in a cache)."""


class AsgNotFound(AwsError):
    """The named Auto Scaling group does not exist in that region."""


class AsgLimitExceeded(AwsError):
    """A desired capacity outside [MinSize, MaxSize]: AWS refuses it, and so do we, before asking."""


class InstanceNotFound(AwsError):
    """The instance is not (or no longer) in any Auto Scaling group of that region."""


class LifecycleActionNotFound(AwsError):
    """No lifecycle action waits for that instance (or token) under that hook: it was completed, timed
    out (the hook's DefaultResult applied) or never started. AWS answers it with a ValidationError."""


class LifecycleActionPending(AwsError):
    """The instance Spillway terminated is not in ``Terminating:Wait`` yet (it is ``Terminating``): its
    terminate lifecycle action cannot be completed until it is; the state machine retries."""


class CapacityUnavailable(AwsError):
    """EC2 has not the capacity asked for (InsufficientInstanceCapacity, UnfulfillableCapacity...): this
    group cannot grow right now. A gang launch fails with it (after giving back every instance of the
    attempt) when EC2 launched fewer instances than the gang needs for capacity
    (:mod:`spillway.model.launcherror`)."""


class QuotaExceeded(AwsError):
    """An account quota refused the launch (VcpuLimitExceeded, InstanceLimitExceeded,
    MaxSpotInstanceCountExceeded): no pool of the region launches more until instances end or the quota
    is raised. Backed off as capacity is, but named so an operator raises the quota."""


class LaunchMisconfigured(AwsError):
    """EC2 refused the launch for its settings or the caller's permissions (UnauthorizedOperation,
    AuthFailure.*, InvalidLaunchTemplateId.*, InvalidAMIID.*, InvalidParameterValue, a KMS key's state, a
    subnet without free addresses...): it will not heal by waiting. The message carries EC2's code and
    words; fix the group, its launch template or Spillway's role."""


class GangIncomplete(SpillwayError):
    """A gang was not whole (every instance InService and its Node Ready) by its deadline; every
    instance of the attempt was given back and the group backed off."""


# --- Snapshots and state ----------------------------------------------------------------------


class SnapshotError(SpillwayError):
    """A snapshot could not be taken, stored or read whole."""


class ObservationFailed(SnapshotError):
    """Observing the cluster failed; nothing was stored."""


class SnapshotNotFound(SnapshotError):
    """No complete snapshot for that cluster (and time)."""


class NodeNotObserved(SnapshotError):
    """An instance of a group Spillway manages backs no Node of the latest snapshot yet (its Node joined,
    or is joining, after it): the interrupt function tries its Spot warning, rebalance recommendation or
    scheduled change again with a later one."""


class StaleSnapshot(SnapshotError):
    """The newest snapshot is older than the planner may act on."""


class StateConflict(SpillwayError):
    """Another planner wrote the state first (conditional write failed)."""


class StateTooLarge(SpillwayError):
    """The planner's state item would pass DynamoDB's 400 KB item limit even compressed: refused before
    it is written, naming its size and its biggest parts. The stored state is left as it was."""


class StateCorrupt(SpillwayError):
    """The stored state item cannot be read (malformed JSON or fields)."""


# --- Drains -----------------------------------------------------------------------------------


class InvalidDrainRequest(InputError):
    """A drain request that names an unknown node, a node outside a managed group, or is malformed.

    ``stale``: the request may have been right when a plan made it, and the world changed since (the
    node is gone or replaced, cordoned by somebody, ...): a plan's drain is cancelled for it instead
    (nothing touched, no alarm), a drain started by hand is rejected. ``detail`` is the message without
    the field."""

    def __init__(
        self, message: str, *, source: str | None = None, field: str | None = None, stale: bool = False
    ) -> None:
        super().__init__(message, source=source, field=field)
        self.detail = message
        self.stale = stale


class DrainTimeout(SpillwayError):
    """Pods were still on the node at the deadline."""


class DrainCancelled(SpillwayError):
    """The drain stopped without terminating: the node was uncordoned, cordoned by somebody else,
    replaced or removed while it drained. Nothing is terminated; the node is left schedulable."""


class DrainSuperseded(SpillwayError):
    """Another Spillway drain took the node over while this one drained (Spillway's cordon names that
    drain now): this one stops, and leaves the node, its cordon and its taint to the other. Not a
    failure: DrainNode records it ``superseded`` and undoes nothing."""


class PartBeforeUnknown(SpillwayError):
    """A part of a split scale-down could not learn whether a part before it was stopped: DescribeExecution
    of the part before failed past its retries, or the part before failed with this error. Raised by
    scale_down.asl.json's Fail state, not by a Lambda: the part drains nothing, and the part after it,
    reading this error, fails the same way, so an operator's stop is never drained past unseen."""


# The errors each state machine's Lambda steps raise as an answer the state machine takes by name: a
# Retry names it (a transient failure, or LifecycleActionPending: the instance is still Terminating),
# or a named Catch (DrainSuperseded: another drain has the node; AsgLimitExceeded, AsgNotFound: the
# group is refused or backed off). Lambda counts each in the function's Errors all the same (AWS Lambda
# Developer Guide, "Types of metrics for Lambda functions": an exception the code throws is a function
# error), so the handlers count them apart (observability.counting_answers, metric AnsweredErrors) and
# the function's errors alarm leaves them out. A Retry that runs out ends where the state machine's
# Catch sends it (a failed execution, which its own alarm counts). Keyed by the function's short name;
# tests/unit/test_error_contract.py checks each set against the state machines' Retry and Catch.
STEP_ANSWERS: dict[str, frozenset[str]] = {
    "scale": frozenset(
        {
            "AsgLimitExceeded",
            "AsgNotFound",
            "AwsThrottled",
            "AwsUnavailable",
            "KubeConflict",
            "KubeUnavailable",
            "SnapshotError",
            "StateConflict",
        }
    ),
    "drain": frozenset(
        {
            "AwsThrottled",
            "AwsUnavailable",
            "DrainSuperseded",
            "KubeConflict",
            "KubeUnavailable",
            "LifecycleActionPending",
        }
    ),
}
