"""Graceful deletion of a Pod and the eviction's dry run, after the real API server:

* ``CheckGracefulDelete`` (kubernetes/kubernetes pkg/registry/core/pod/strategy.go): the grace period is
  the delete options' ``gracePeriodSeconds``, else the pod's ``spec.terminationGracePeriodSeconds``
  (defaulted to 30 on every write, see :mod:`.pods`); 0 for a pod not scheduled (no ``nodeName``) or
  already ``Succeeded``/``Failed``; a negative one, from either, is 1 s.
* ``BeforeDelete`` (staging/src/k8s.io/apiserver/pkg/registry/rest/delete.go): a negative grace period
  counts as 1 s; a first graceful delete sets ``metadata.deletionTimestamp`` to now plus the grace
  period and ``deletionGracePeriodSeconds`` to it, and bumps ``metadata.generation``; a pod already
  terminating may only have its grace period shortened (its deletionTimestamp moved earlier by the
  difference), another delete changes nothing; one whose recorded grace period is 0 goes now. A grace
  period of 0 removes the object at once (the generic registry store's ``Delete``). Otherwise the pod
  stays listed until the kubelet confirms with a delete of grace 0 once its containers have stopped.
* ``propagateDryRun`` (pkg/registry/core/pod/storage/eviction.go): an Eviction's ``deleteOptions.dryRun``
  is the eviction's dry run; the request's ``?dryRun`` fills it when the body has none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from spillway.local.kubeapi.status import invalid

JsonObj = dict[str, Any]


def dry_run_of(options: Mapping[str, Any], kind: str = "DeleteOptions") -> bool:
    """Whether ``DeleteOptions.dryRun`` asks for a dry run: ``["All"]``; empty or absent is none, any
    other value is refused as ``ValidateDeleteOptions`` refuses it (422)."""
    values = options.get("dryRun") or []
    if not isinstance(values, list):
        values = [values]
    for value in values:
        if value != "All":
            raise invalid(kind, "", "dryRun", f'Unsupported value: "{value}": supported values: "All"')
    return bool(values)


def eviction_dry_run(options: Mapping[str, Any], query_dry_run: bool) -> bool:
    """``propagateDryRun``: the body's ``dryRun`` when it has one, else the request's (the only value
    either may hold is ``All``, so they cannot disagree)."""
    return dry_run_of(options) or query_dry_run


@dataclass(frozen=True)
class Deletion:
    """What a DELETE does to a pod: ``remove`` it now, or store ``pod`` (the graceful deletion's mark;
    ``pending``: an earlier graceful delete already stands and nothing changes)."""

    pod: JsonObj
    remove: bool
    pending: bool = False
    grace: int = 0


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(stamp: str) -> datetime | None:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def grace_period(pod: Mapping[str, Any], requested: int | None) -> int:
    """``CheckGracefulDelete``: a negative period is 1 s, whether the options or the pod's own
    ``terminationGracePeriodSeconds`` gave it (an API server before 1.27 stored a negative one as sent)."""
    spec = pod.get("spec") or {}
    period = requested if requested is not None else spec.get("terminationGracePeriodSeconds")
    period = period if isinstance(period, int) and not isinstance(period, bool) else 0
    if not spec.get("nodeName"):
        return 0
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return 0
    return 1 if period < 0 else period


def _requested(options: Mapping[str, Any]) -> int | None:
    value = options.get("gracePeriodSeconds")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(
            "DeleteOptions", "", "gracePeriodSeconds", f"Invalid value: {value!r}: must be an integer"
        )
    return 1 if value < 0 else value


def _marked(pod: JsonObj, deleted_at: datetime, grace: int, *, first: bool) -> JsonObj:
    meta = dict(pod.get("metadata") or {})
    meta["deletionTimestamp"] = _stamp(deleted_at)
    meta["deletionGracePeriodSeconds"] = grace
    if first and isinstance(meta.get("generation"), int) and meta["generation"] > 0:
        meta["generation"] += 1
    return {**pod, "metadata": meta}


def plan(pod: JsonObj, options: Mapping[str, Any], now: datetime) -> Deletion:
    """``BeforeDelete`` with the Pod strategy: what a DELETE with ``options`` does to ``pod`` at ``now``."""
    requested = _requested(options)
    meta = pod.get("metadata") or {}
    stamped = meta.get("deletionTimestamp")
    if stamped:
        current = meta.get("deletionGracePeriodSeconds")
        if not current:
            return Deletion(pod, remove=True)
        if requested is None or requested >= current:
            return Deletion(pod, remove=False, pending=True, grace=current)
        when = _parse(stamped) or now
        shortened = _marked(pod, when - timedelta(seconds=current - requested), requested, first=False)
        return Deletion(shortened, remove=requested == 0, grace=requested)
    grace = grace_period(pod, requested)
    marked = _marked(pod, now + timedelta(seconds=grace), grace, first=True)
    return Deletion(marked, remove=grace == 0, grace=grace)


def with_condition(pod: JsonObj, condition: Mapping[str, str], now: str) -> JsonObj:
    """``UpdatePodCondition`` (pkg/api/pod/util.go): add or replace the condition of that type; its
    ``lastTransitionTime`` is now unless its status is unchanged."""
    status = dict(pod.get("status") or {})
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    old = next((c for c in conditions if c.get("type") == condition["type"]), None)
    since = old.get("lastTransitionTime") if old and old.get("status") == condition["status"] else now
    new = {
        "type": condition["type"],
        "status": condition["status"],
        "lastProbeTime": None,
        "lastTransitionTime": since,
        "reason": condition["reason"],
        "message": condition["message"],
    }
    status["conditions"] = [new if c is old else c for c in conditions] if old else [*conditions, new]
    return {**pod, "status": status}
