"""The node lifecycle controller's NoSchedule tainting pass, as kube-controller-manager runs it.

kubernetes/kubernetes pkg/controller/nodelifecycle/node_lifecycle_controller.go
``doNoScheduleTaintingPass``, run by a worker for every Node added or updated (its informer queues the
name): the taints a Node should carry are

* ``node.kubernetes.io/unschedulable:NoSchedule`` while ``spec.unschedulable`` is true (the cordon);
* one per node condition of ``nodeConditionToTaintKeyStatusMap``: ``Ready`` ``False`` gives
  ``node.kubernetes.io/not-ready``, ``Ready`` ``Unknown`` ``node.kubernetes.io/unreachable``,
  ``MemoryPressure``, ``DiskPressure``, ``PIDPressure`` and ``NetworkUnavailable`` ``True`` give
  ``node.kubernetes.io/memory-pressure``, ``disk-pressure``, ``pid-pressure`` and
  ``network-unavailable`` (key names: k8s.io/api core/v1 well_known_taints.go), all ``NoSchedule``.

The controller compares them with the Node's NoSchedule taints of those keys (``TaintSetDiff``: by key
and effect, a value ignored) and swaps the difference in (``SwapNodeControllerTaint``): a taint added
is appended to the list with ``timeAdded`` now (``AddOrUpdateTaint``), one no longer due is removed
(``RemoveTaintOffNode``); every other taint is kept as it is. Its write is a patch guarded by the
resourceVersion it read, retried on conflict, so it never loses another writer's change.

Not modelled: the NoExecute taints of taint-based eviction (``node.kubernetes.io/not-ready`` and
``unreachable`` with effect NoExecute, which ``monitorNodeHealth`` adds through a per-zone rate-limited
queue, and the taint eviction controller that deletes the pods not tolerating them): the emulator
runs neither node heartbeats nor the taint manager, so those taints would stand for an eviction that
never comes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

JsonObj = dict[str, Any]

UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
NO_SCHEDULE = "NoSchedule"

#: nodeConditionToTaintKeyStatusMap: condition type -> status -> taint key
CONDITION_TAINTS: Mapping[str, Mapping[str, str]] = {
    "Ready": {"False": "node.kubernetes.io/not-ready", "Unknown": "node.kubernetes.io/unreachable"},
    "MemoryPressure": {"True": "node.kubernetes.io/memory-pressure"},
    "DiskPressure": {"True": "node.kubernetes.io/disk-pressure"},
    "NetworkUnavailable": {"True": "node.kubernetes.io/network-unavailable"},
    "PIDPressure": {"True": "node.kubernetes.io/pid-pressure"},
}
#: the keys the pass owns (taintKeyToNodeConditionMap, and the cordon's)
OWNED_KEYS = frozenset({UNSCHEDULABLE, *(key for by in CONDITION_TAINTS.values() for key in by.values())})


def due_keys(node: Mapping[str, Any]) -> list[str]:
    """The keys of the NoSchedule taints the pass says ``node`` carries now, in the pass's order
    (conditions as listed, then the cordon)."""
    status = node.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    keys: list[str] = []
    for condition in conditions if isinstance(conditions, list) else []:
        if not isinstance(condition, dict):
            continue
        key = CONDITION_TAINTS.get(str(condition.get("type")), {}).get(str(condition.get("status")))
        if key is not None and key not in keys:
            keys.append(key)
    spec = node.get("spec")
    if isinstance(spec, dict) and spec.get("unschedulable") is True:
        keys.append(UNSCHEDULABLE)
    return keys


def tainted(node: JsonObj, now: str) -> JsonObj | None:
    """``node`` after the pass (``now`` the ``timeAdded`` of a taint it adds), or None when it has
    nothing to change."""
    spec = node.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    raw = spec.get("taints")
    taints = [t for t in raw if isinstance(t, dict)] if isinstance(raw, list) else []
    due = due_keys(node)
    owned = [t for t in taints if t.get("effect") == NO_SCHEDULE and t.get("key") in OWNED_KEYS]
    present = {t.get("key") for t in owned}
    stale = [t for t in owned if t.get("key") not in due]
    missing = [key for key in due if key not in present]
    if not stale and not missing:
        return None
    kept = [t for t in taints if not any(t is gone for gone in stale)]
    kept += [{"key": key, "effect": NO_SCHEDULE, "timeAdded": now} for key in missing]
    new_spec = {k: v for k, v in spec.items() if k != "taints"}
    if kept:
        new_spec["taints"] = kept
    return {**node, "spec": new_spec}
