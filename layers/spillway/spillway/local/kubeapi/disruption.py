"""PodDisruptionBudget arithmetic, after the disruption controller and the eviction subresource.

* Pods of a budget: pods in its namespace whose labels match ``spec.selector`` (a null selector matches
  none, an empty one all).
* Healthy pod: not being deleted, phase ``Running``, and a ``Ready`` condition that is ``True`` — or no
  ``Ready`` condition at all (a bare ``Running`` pod counts; an explicit ``Ready=False`` does not).
* ``expectedPods`` is the number of matching pods (the real controller asks the pods' controllers for
  their scale; with no controllers in the emulator, the pods themselves are the count).
* ``minAvailable``: ``desiredHealthy = minAvailable`` (a percentage of ``expectedPods``, rounded up).
  ``maxUnavailable``: ``desiredHealthy = expectedPods - maxUnavailable`` (a percentage, rounded up).
  Neither set: nothing may be disrupted.
* ``disruptionsAllowed = max(0, currentHealthy - desiredHealthy)``, and 0 when ``expectedPods`` is 0.
* A status written through the ``status`` subresource (or by a test's hand) stands for what another
  writer put there, and its fields win over the computed ones: that is how a budget gets the statuses the
  eviction subresource refuses with 403 Forbidden (``disruptionsAllowed`` negative, ``disruptedPods``
  over :data:`MAX_DISRUPTED_PODS` entries), which the real controller never writes itself.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from spillway.local.kubeapi.selectors import label_selector_matches

JsonObj = dict[str, Any]
_PERCENT = re.compile(r"^(\d+)%$")
# pkg/registry/core/pod/storage/eviction.go MaxDisruptedPodSize: past it the eviction subresource
# refuses every pod of the budget until the disruption controller confirms the evictions it approved
MAX_DISRUPTED_PODS = 2000


def _conditions(pod: Mapping[str, Any]) -> list[JsonObj]:
    return list((pod.get("status") or {}).get("conditions") or [])


def pod_is_ready(pod: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in _conditions(pod))


def pod_is_healthy(pod: Mapping[str, Any]) -> bool:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    if (pod.get("status") or {}).get("phase") != "Running":
        return False
    ready = [c for c in _conditions(pod) if c.get("type") == "Ready"]
    return not ready or ready[0].get("status") == "True"


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


def check_spec(spec: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(field, message)`` of the first validation error of a PDB spec, or ``None``."""
    min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
    if min_available is not None and max_unavailable is not None:
        return "spec", "minAvailable and maxUnavailable cannot be both set"
    for name, value in (("minAvailable", min_available), ("maxUnavailable", max_unavailable)):
        if value is not None and (why := check_int_or_percent(value)):
            return f"spec.{name}", why
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy not in (None, "IfHealthyBudget", "AlwaysAllow"):
        return "spec.unhealthyPodEvictionPolicy", f'Unsupported value: "{policy}"'
    return None


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


def budget(pdb: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> Budget:
    """The budget's numbers given the pods of its namespace (others are ignored)."""
    mine = [p for p in pods if selects(pdb, p)]
    spec = pdb.get("spec") or {}
    expected = len(mine)
    desired = 0
    if spec.get("maxUnavailable") is not None:
        desired = max(0, expected - scaled_value(spec["maxUnavailable"], expected, round_up=True))
    elif spec.get("minAvailable") is not None:
        desired = scaled_value(spec["minAvailable"], expected, round_up=True)
    else:
        expected = 0
    current = sum(1 for p in mine if pod_is_healthy(p))
    allowed = current - desired
    if expected <= 0 or allowed <= 0:
        allowed = 0
    return Budget(expected=expected, desired=desired, current=current, allowed=allowed)


def with_status(pdb: JsonObj, numbers: Budget) -> JsonObj:
    """A copy of ``pdb`` whose ``status`` is what the disruption controller would have written."""
    meta = pdb.get("metadata") or {}
    generation = meta.get("generation", 1)
    allowed = numbers.allowed > 0
    status: JsonObj = {
        "observedGeneration": generation,
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
                "reason": "SufficientPods" if allowed else "InsufficientPods",
                "message": "",
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
