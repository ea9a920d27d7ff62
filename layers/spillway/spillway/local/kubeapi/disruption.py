"""PodDisruptionBudget arithmetic, after the disruption controller and the eviction subresource.

* Pods of a budget: pods in its namespace whose labels match ``spec.selector`` (a null selector matches
  none, an empty one all).
* Healthy pod (``countHealthyPods`` in kubernetes/kubernetes pkg/controller/disruption/disruption.go):
  not being deleted and ``IsPodReady`` (pkg/api/v1/pod/util.go: a ``Ready`` condition whose status is
  ``True``; a pod without one is not ready, whatever its phase).
* ``expectedPods`` (``getExpectedPodCount``): with an integer ``minAvailable``, the number of matching
  pods; with ``maxUnavailable`` or a percentage ``minAvailable``, the sum of the scales of the pods'
  controllers (``getExpectedScale``): each controller (``metadata.ownerReferences`` entry with
  ``controller: true``) counted once with its ``spec.replicas`` (1 when unset, the v1 default) — a
  ReplicaSet's Deployment stands for it when the Deployment exists; StatefulSets and
  ReplicationControllers; any other kind through its ``scale`` subresource (a Rollout, a PyTorchJob or
  PaddleJob: its Worker replicas). A pod without a controller adds nothing (the controller warns
  ``UnmanagedPods``). A controller that cannot be found, of a kind without a ``scale`` subresource (a
  Job), or whose scale GET fails (a training job without Worker replicas: 500), fails the controller's
  sync: it writes
  ``disruptionsAllowed: 0`` and a ``DisruptionAllowed=False`` condition of reason ``SyncFailed``
  (``failSafe``), and leaves the other numbers as its last good sync wrote them, which the emulator
  cannot know: they read ``expectedPods`` and ``desiredHealthy`` 0.
* ``minAvailable``: ``desiredHealthy = minAvailable`` (a percentage of ``expectedPods``, rounded up).
  ``maxUnavailable``: ``desiredHealthy = expectedPods - maxUnavailable`` (a percentage, rounded up).
  Neither set: nothing may be disrupted.
* ``disruptionsAllowed = max(0, currentHealthy - desiredHealthy)``, and 0 when ``expectedPods`` is 0.
* ``disruptedPods``: the pods the eviction subresource let go (``checkAndDecrement`` records each before
  the deletion, which may still fail: a precondition not met) that are not being deleted, for
  :data:`DELETION_TIMEOUT` after their eviction (``buildDisruptedPodMap``); such a pod is not healthy
  meanwhile (``countHealthyPods``), so an eviction whose deletion failed keeps its budget spent that
  long. The store keeps the record and says which entries stand (:func:`budget`'s ``disrupted``).
* A status written through the ``status`` subresource (or by a test's hand) stands for what another
  writer put there, and its fields win over the computed ones: that is how a budget gets the statuses the
  eviction subresource refuses with 403 Forbidden (``disruptionsAllowed`` negative, ``disruptedPods``
  over :data:`MAX_DISRUPTED_PODS` entries), which the real controller never writes itself.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from spillway.local.kubeapi.selectors import label_selector_matches
from spillway.local.kubeapi.status import FieldError

JsonObj = dict[str, Any]
_PERCENT = re.compile(r"^(\d+)%$", re.ASCII)  # intstr: strconv.Atoi
# pkg/registry/core/pod/storage/eviction.go MaxDisruptedPodSize: past it the eviction subresource
# refuses every pod of the budget until the disruption controller confirms the evictions it approved
MAX_DISRUPTED_PODS = 2000
# pkg/controller/disruption/disruption.go DeletionTimeout: how long a pod the eviction subresource let go
# stays in ``disruptedPods``, not healthy, when it is not deleted meanwhile
DELETION_TIMEOUT = timedelta(minutes=2)


def _conditions(pod: Mapping[str, Any]) -> list[JsonObj]:
    return list((pod.get("status") or {}).get("conditions") or [])


def pod_is_ready(pod: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in _conditions(pod))


def pod_is_healthy(pod: Mapping[str, Any]) -> bool:
    """``countHealthyPods``: not being deleted, and Ready (no phase test: a Ready pod runs)."""
    return not (pod.get("metadata") or {}).get("deletionTimestamp") and pod_is_ready(pod)


def check_int_or_percent(value: Any) -> str | None:
    """Why ``value`` is not a valid ``minAvailable``/``maxUnavailable`` (``None`` when it is)."""
    if isinstance(value, bool):
        return "must be an integer or a percentage"
    if isinstance(value, int):
        return None if value >= 0 else "must be greater than or equal to 0"
    if isinstance(value, str):
        match = _PERCENT.match(value)
        if not match:
            return "a valid percent string must be a numeric string followed by an ending '%'"
        return None if int(match[1]) <= 100 else "must not be greater than 100%"
    return "must be an integer or a percentage"


def scaled_value(value: int | str, total: int, *, round_up: bool) -> int:
    """``intstr.GetScaledValueFromIntOrPercent``."""
    if isinstance(value, int):
        return value
    percent = int(value.rstrip("%"))
    scaled = percent * total / 100
    return math.ceil(scaled) if round_up else math.floor(scaled)


def check_spec(spec: Mapping[str, Any]) -> list[FieldError]:
    """Every validation error of a PDB spec, in the order ``ValidatePodDisruptionBudgetSpec``
    (kubernetes/kubernetes pkg/apis/policy/validation/validation.go) appends them."""
    found = []
    min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
    if min_available is not None and max_unavailable is not None:
        found.append(FieldError("spec", "minAvailable and maxUnavailable cannot be both set"))
    for name, value in (("minAvailable", min_available), ("maxUnavailable", max_unavailable)):
        if value is not None and (why := check_int_or_percent(value)):
            found.append(FieldError(f"spec.{name}", why))
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy not in (None, "IfHealthyBudget", "AlwaysAllow"):
        found.append(FieldError("spec.unhealthyPodEvictionPolicy", f'Unsupported value: "{policy}"'))
    return found


def selects(pdb: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    if (pdb.get("metadata") or {}).get("namespace") != (pod.get("metadata") or {}).get("namespace"):
        return False
    selector = (pdb.get("spec") or {}).get("selector")
    return label_selector_matches(selector, (pod.get("metadata") or {}).get("labels"))


@dataclass(frozen=True)
class Budget:
    expected: int
    desired: int
    current: int
    allowed: int
    #: why the disruption controller's sync failed (its ``failSafe`` status), or None
    failure: str | None = None
    #: ``status.disruptedPods``: pod name -> when the eviction subresource let it go
    disrupted: Mapping[str, str] = field(default_factory=dict)


class ScaleUnknown(Exception):
    """The disruption controller could not find a pod's controller's scale: its sync fails."""


#: ``(controllerRef, namespace) -> (controller uid, scale)``, or None when no controller of that name
#: and uid exists; raises :class:`ScaleUnknown` when the kind has no scale to read
ScaleFinder = Callable[[Mapping[str, Any], str], "tuple[str, int] | None"]


def controller_of(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``metav1.GetControllerOf``: the owner reference with ``controller: true``."""
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


def expected_scale(pods: Iterable[Mapping[str, Any]], find: ScaleFinder) -> int:
    """``getExpectedScale``: the sum of the scales of the pods' controllers, each counted once; pods
    without a controller add nothing. Raises :class:`ScaleUnknown` for a controller not found."""
    scales: dict[str, int] = {}
    for pod in pods:
        ref = controller_of(pod)
        if ref is None or ref.get("uid") in scales:
            continue
        meta = pod.get("metadata") or {}
        found = find(ref, meta.get("namespace", ""))
        if found is None:
            raise ScaleUnknown(f'found no controllers for pod "{meta.get("name", "")}"')
        scales[found[0]] = found[1]
    return sum(scales.values())


def _no_scales(ref: Mapping[str, Any], namespace: str) -> tuple[str, int] | None:
    return None


def _expected_and_desired(
    spec: Mapping[str, Any], mine: list[Mapping[str, Any]], find: ScaleFinder
) -> tuple[int, int]:
    """``getExpectedPodCount``: (expectedPods, desiredHealthy); raises :class:`ScaleUnknown`."""
    max_unavailable, min_available = spec.get("maxUnavailable"), spec.get("minAvailable")
    if max_unavailable is not None:
        expected = expected_scale(mine, find)
        return expected, max(0, expected - scaled_value(max_unavailable, expected, round_up=True))
    if isinstance(min_available, int):
        return len(mine), min_available
    if min_available is not None:
        expected = expected_scale(mine, find)
        return expected, scaled_value(min_available, expected, round_up=True)
    return 0, 0


def budget(
    pdb: Mapping[str, Any],
    pods: Iterable[Mapping[str, Any]],
    find: ScaleFinder = _no_scales,
    disrupted: Mapping[str, str] | None = None,
) -> Budget:
    """The budget's numbers given the pods of its namespace (others are ignored), a way to read their
    controllers' scale, and the evictions it let go that stand (pod name -> when: each such pod is not
    healthy, ``countHealthyPods``)."""
    disrupted = dict(disrupted or {})
    mine = [p for p in pods if selects(pdb, p)]
    current = sum(1 for p in mine if pod_is_healthy(p) and _name(p) not in disrupted)
    try:
        expected, desired = _expected_and_desired(pdb.get("spec") or {}, mine, find)
    except ScaleUnknown as exc:
        return Budget(
            expected=0, desired=0, current=current, allowed=0, failure=str(exc), disrupted=disrupted
        )
    allowed = current - desired
    if expected <= 0 or allowed <= 0:
        allowed = 0
    return Budget(expected=expected, desired=desired, current=current, allowed=allowed, disrupted=disrupted)


def _name(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("name") or "")


def with_status(pdb: JsonObj, numbers: Budget) -> JsonObj:
    """A copy of ``pdb`` whose ``status`` is what the disruption controller would have written."""
    meta = pdb.get("metadata") or {}
    generation = meta.get("generation", 1)
    allowed = numbers.allowed > 0
    reason = "SufficientPods" if allowed else "InsufficientPods"
    if numbers.failure is not None:  # failSafe's condition (component-helpers SyncFailedReason)
        reason = "SyncFailed"
    status: JsonObj = {
        "observedGeneration": generation,
        # omitempty; the type's field order
        **({"disruptedPods": dict(sorted(numbers.disrupted.items()))} if numbers.disrupted else {}),
        "disruptionsAllowed": numbers.allowed,
        "currentHealthy": numbers.current,
        "desiredHealthy": numbers.desired,
        "expectedPods": numbers.expected,
        "conditions": [
            {
                "type": "DisruptionAllowed",
                "status": "True" if allowed else "False",
                "observedGeneration": generation,
                "lastTransitionTime": meta.get("creationTimestamp") or "1970-01-01T00:00:00Z",
                "reason": reason,
                "message": numbers.failure or "",
            }
        ],
    }
    written = pdb.get("status")
    if isinstance(written, dict):
        status = {**status, **written}
    return {**pdb, "status": status}


def eviction_forbidden(pdb: Mapping[str, Any]) -> str | None:
    """Why the eviction subresource answers 403 Forbidden for this budget's pods, from its status as
    :func:`with_status` presents it; None when it does not."""
    status = pdb.get("status") or {}
    allowed = status.get("disruptionsAllowed")
    if isinstance(allowed, int) and allowed < 0:
        return "pdb disruptions allowed is negative"
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS:
        return "DisruptedPods map too big - too many evictions not confirmed by PDB controller"
    return None


def eviction_blocked_message(pdb: Mapping[str, Any], numbers: Budget) -> str:
    name = (pdb.get("metadata") or {}).get("name", "")
    return f"The disruption budget {name} needs {numbers.desired} healthy pods and has {numbers.current} currently"
