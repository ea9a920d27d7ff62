"""The object store behind the emulator: resource versions, list snapshots, and the write rules.

Stored objects are never mutated in place: every write stores a new dict (untouched sub-trees may be
shared), so a list snapshot is a tuple of references that stays consistent while writes go on, and the
JSON text of an object is computed once and reused by every page that contains it.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import random
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from spillway.local.kubeapi import crds, deletion, disruption, nodelifecycle, pods, resources
from spillway.local.kubeapi import labels as label_rules
from spillway.local.kubeapi.patch import PatchError, json_patch, merge_patch, strategic_merge_patch
from spillway.local.kubeapi.resources import NAMESPACES, PODS, PRIORITY_CLASSES, ResourceType
from spillway.local.kubeapi.selectors import FieldQuery, LabelQuery, fields_match, labels_match
from spillway.local.kubeapi.status import (
    STALE_OBJECT,
    FieldError,
    KubeApiError,
    already_exists,
    bad_request,
    conflict,
    expired_continue,
    forbidden,
    invalid,
    invalid_fields,
    not_found,
    patch_not_applied,
    status_object,
)

JsonObj = dict[str, Any]
Key = tuple[str, str]  # (namespace or "", name)

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = ("application/apply-patch+yaml", "application/apply-patch+cbor")

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
#: seconds the emulated kubelet takes to stop a terminating pod's containers and confirm its deletion
#: (never more than the pod's grace period): long enough that a drain's next read still finds the
#: evicted pod terminating, short enough not to slow the demo and the end-to-end tests
DEFAULT_KUBELET_EXIT_DELAY = 0.5
_NAME_SUFFIX = "bcdfghjklmnpqrstvwxz2456789"
#: the built-in kinds whose strategies start ``metadata.generation`` at 1 on create (and bump it on a
#: spec change, a PodTemplate's on a ``template`` change: pkg/registry/core/podtemplate/strategy.go);
#: custom resources do too
_GENERATION_FROM_ONE = (
    "PodDisruptionBudget",
    "Pod",
    "Job",
    "Deployment",
    "StatefulSet",
    "ReplicaSet",
    "ReplicationController",
    "PodTemplate",
)
# metadata the server owns: writes cannot change it
_SERVER_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation")


def _new_generation(kind: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether an update bumps ``metadata.generation``: a spec change, and for a Deployment an
    annotation change too (its strategy's PrepareForUpdate: the annotations are copied to its
    ReplicaSets, so the controller must act on them); for a PodTemplate, which has no spec, a change of
    its ``template``."""
    field = "template" if kind == "PodTemplate" else "spec"
    if old.get(field) != new.get(field):
        return True
    return kind == "Deployment" and _annotations(old) != _annotations(new)


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_TYPE_META = ("apiVersion", "kind")


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


class Entry:
    """A stored object and its JSON text as an item of a list, serialised once on first need."""

    __slots__ = ("_text", "obj")

    def __init__(self, obj: JsonObj) -> None:
        self.obj = obj
        self._text: str | None = None

    def item_text(self, typed: bool) -> str:
        """The object as a list's item. A built-in kind's list is encoded with its items' TypeMeta
        empty: ``apiVersion`` and ``kind`` only on the list (kubernetes/kubernetes#3030); a custom
        resource's items are unstructured objects and keep both (``typed``). An entry is only ever
        listed one way (its kind's), so one text is kept."""
        if self._text is None:
            shown = self.obj if typed else {k: v for k, v in self.obj.items() if k not in _TYPE_META}
            self._text = dumps(shown)
        return self._text


@dataclass(frozen=True)
class _Snapshot:
    kind: str
    api_version: str
    items: tuple[Entry, ...]
    resource_version: int
    filtered: bool


@dataclass(frozen=True)
class ListResult:
    items: Sequence[Entry]
    resource_version: str
    continue_token: str | None = None
    remaining: int | None = None


def _same_names(rt: ResourceType, given: Mapping[str, Any], namespace: str | None, name: str) -> None:
    """A PUT's body names the object the URL names, or nothing (as the API server's update checks)."""
    if given.get("name") and given["name"] != name:
        raise bad_request(
            f"the name of the object ({given['name']}) does not match the name on the URL ({name})"
        )
    if rt.namespaced and given.get("namespace") and given["namespace"] != namespace:
        raise bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )


def _meta(obj: Mapping[str, Any]) -> JsonObj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _omit_empty(obj: JsonObj) -> JsonObj:
    """Drop the empty fields a Go server omits (``omitempty``), so that writing ``{}`` or ``false`` where
    nothing was is a no-op and reads look like a real server's."""
    meta = _meta(obj)
    if any(meta.get(k) in ({}, None) for k in ("labels", "annotations") if k in meta):
        obj = {
            **obj,
            "metadata": {k: v for k, v in meta.items() if not (k in ("labels", "annotations") and not v)},
        }
    spec = obj.get("spec")
    if obj.get("kind") == "Node" and isinstance(spec, dict):
        empty = [k for k in ("taints", "unschedulable", "podCIDRs") if k in spec and not spec[k]]
        if empty:
            obj = {**obj, "spec": {k: v for k, v in spec.items() if k not in empty}}
    return obj


def _dig(obj: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _with(obj: JsonObj, path: tuple[str, ...], value: Any) -> JsonObj:
    """``obj`` with ``value`` at ``path``: new dicts along the path, the rest shared."""
    head, *rest = path
    inner = obj.get(head)
    return {
        **obj,
        head: _with(inner if isinstance(inner, dict) else {}, tuple(rest), value) if rest else value,
    }


#: the workload kinds the disruption controller reads the scale of itself, by the API groups it accepts
_SCALED_BUILTINS: dict[str, tuple[str, ...]] = {
    "ReplicationController": ("",),
    "ReplicaSet": ("apps", "extensions"),
    "StatefulSet": ("apps",),
    "Deployment": ("apps",),
}


#: the condition the eviction subresource puts on the pod it deletes (eviction.go addConditionAndDeletePod)
_EVICTION_CONDITION = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "EvictionByEvictionAPI",
    "message": "Eviction API: evicting",
}


def _can_ignore_budgets(pod: Mapping[str, Any]) -> bool:
    """``canIgnorePDB``: a pod not running yet or any more, or already being deleted, is evicted without
    a look at its budgets."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Pending", "Succeeded", "Failed") or bool(_meta(pod).get("deletionTimestamp"))


def _replicas(workload: Mapping[str, Any]) -> int:
    """A workload's ``spec.replicas``, 1 when unset (the v1 defaults of every workload kind)."""
    replicas = (workload.get("spec") or {}).get("replicas")
    return replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 1


def _without_rv(obj: JsonObj) -> JsonObj:
    meta = {k: v for k, v in _meta(obj).items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


def _patched(rt: ResourceType, current: JsonObj, content_type: str, body: Any) -> Any:
    """``current`` with a PATCH ``body`` of ``content_type`` applied, or the error the API server answers:
    415 for a strategic merge patch of a custom resource (no Go type to merge by) and for apply."""
    try:
        if content_type == JSON_PATCH:
            return json_patch(current, body)
        if content_type == MERGE_PATCH:
            if not isinstance(body, dict):
                raise PatchError("a merge patch must be a JSON object", bad_request=True)
            return merge_patch(current, body)
        if content_type == STRATEGIC_MERGE_PATCH and not rt.custom:
            return strategic_merge_patch(current, body, rt.merge_keys)
    except PatchError as exc:
        if exc.bad_request:
            raise bad_request(str(exc)) from None
        if content_type == JSON_PATCH:
            raise patch_not_applied() from None
        raise KubeApiError(422, str(exc)) from None
    if content_type in APPLY_PATCH:
        raise KubeApiError(415, "server-side apply is not supported by the emulator")
    # a custom resource has no Go type to merge strategically: a real server refuses
    accepted = (JSON_PATCH, MERGE_PATCH, APPLY_PATCH[0] if rt.custom else STRATEGIC_MERGE_PATCH)
    raise KubeApiError(
        415,
        f"the body of the request was in an unknown format - accepted media types include: {', '.join(accepted)}",
    )


class Store:
    def __init__(self, *, clock: Callable[[], datetime], max_snapshots: int = 64) -> None:
        self.lock = threading.RLock()
        self._clock = clock
        #: the emulated kubelet: a pod deleted gracefully is removed once ``min(its grace period, this)``
        #: seconds of the store's clock have passed (checked at the next read or write); tests set it
        #: long to hold pods terminating, or 0
        self.kubelet_exit_delay: float = DEFAULT_KUBELET_EXIT_DELAY
        #: seconds after the containers stopped before the kubelet's final delete reaches the API (its
        #: pod worker tears the pod down and the status manager deletes it once it may: a real pod is
        #: listed a moment past its deletionTimestamp); 0 by default
        self.kubelet_confirm_delay: float = 0.0
        #: pods deleted gracefully through the API: key -> (when, grace period, uid)
        self._terminating: dict[Key, tuple[datetime, int, str]] = {}
        #: the evictions each budget let go (its ``status.disruptedPods``): budget uid -> (namespace,
        #: {pod name: when}); the disruption controller drops a pod once it is being deleted or gone
        self._disrupted: dict[str, tuple[str, dict[str, datetime]]] = {}
        #: seconds after a Node's change before the node lifecycle controller's NoSchedule tainting pass
        #: reaches it (:mod:`.nodelifecycle`): its worker reads the Node from an informer, so its taint
        #: follows the write that called for it; 0 by default (the next read or write sees it)
        self.node_controller_delay: float = 0.0
        #: Nodes written since the controller's last pass over them: name -> when first queued
        self._node_updates: dict[str, datetime] = {}
        self._objects: dict[str, dict[Key, Entry]] = {kind: {} for kind in resources.BY_STORE_KIND}
        self._rv = 100
        self._kind_version = dict.fromkeys(resources.BY_STORE_KIND, 0)
        self._sorted: dict[str, tuple[int, tuple[Entry, ...]]] = {}
        self._snapshots: OrderedDict[int, _Snapshot] = OrderedDict()
        self._next_snapshot = 1
        self._expired_below = 0
        self._max_snapshots = max_snapshots
        for name in DEFAULT_NAMESPACES:
            self.create(NAMESPACES, None, {"metadata": {"name": name}}, via_api=False)
        for system_class in pods.SYSTEM_PRIORITY_CLASSES:
            self.create(PRIORITY_CLASSES, None, system_class, via_api=False)

    # --- basics --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _session(self) -> Iterator[None]:
        """The store's lock, after the emulated kubelet confirmed the deletions now due and the node
        lifecycle controller tainted the Nodes due."""
        with self.lock:
            self._reap()
            self._taint_nodes()
            self._forget_disruptions()
            yield

    def _forget_disruptions(self) -> None:
        """The disruption controller's ``buildDisruptedPodMap`` as it resyncs on each pod's change: a pod
        being deleted, or gone, or recorded ``DeletionTimeout`` ago, leaves its budget's record (so a pod
        made again under its name later is not held by an eviction of its predecessor)."""
        if not self._disrupted:
            return
        now = self._clock()
        budgets = {_meta(e.obj).get("uid") for e in self._objects["PodDisruptionBudget"].values()}
        for uid, (namespace, record) in list(self._disrupted.items()):
            if uid not in budgets:  # the budget is gone, its status with it
                record.clear()
            for name, since in list(record.items()):
                entry = self._objects["Pod"].get((namespace, name))
                leaving = entry is None or bool(_meta(entry.obj).get("deletionTimestamp"))
                if leaving or since + disruption.DELETION_TIMEOUT <= now:
                    del record[name]
            if not record:
                del self._disrupted[uid]

    def _disruptions(self, pdb: Mapping[str, Any]) -> dict[str, str]:
        """The budget's ``status.disruptedPods`` that stand (pod name -> when, RFC 3339)."""
        found = self._disrupted.get(str(_meta(pdb).get("uid") or ""))
        return {name: iso(since) for name, since in sorted(found[1].items())} if found else {}

    def _taint_nodes(self) -> None:
        """The node lifecycle controller's NoSchedule tainting pass (:mod:`.nodelifecycle`) over each
        Node written at least :attr:`node_controller_delay` seconds ago: its cordon and condition taints
        swapped in as one more write (a new resourceVersion), every other taint kept."""
        if not self._node_updates:
            return
        now = self._clock()
        for name, since in list(self._node_updates.items()):
            if now < since + timedelta(seconds=max(0.0, self.node_controller_delay)):
                continue
            del self._node_updates[name]
            entry = self._objects["Node"].get(("", name))
            updated = None if entry is None else nodelifecycle.tainted(entry.obj, iso(now))
            if updated is not None:
                self._write("Node", ("", name), updated, queue=False)

    def _reap(self) -> None:
        """The kubelet's side of a graceful deletion: a pod whose containers have stopped (its grace
        period or :attr:`kubelet_exit_delay` after the delete, the shorter) is deleted with grace 0,
        :attr:`kubelet_confirm_delay` later."""
        if not self._terminating:
            return
        now = self._clock()
        for key, (since, grace, uid) in list(self._terminating.items()):
            stopped = max(0.0, min(grace, self.kubelet_exit_delay))
            if now < since + timedelta(seconds=stopped + max(0.0, self.kubelet_confirm_delay)):
                continue
            del self._terminating[key]
            entry = self._objects["Pod"].get(key)
            if entry is not None and _meta(entry.obj).get("uid") == uid:
                self._remove("Pod", key)

    @property
    def resource_version(self) -> str:
        return str(self._rv)

    def now(self) -> str:
        return iso(self._clock())

    @staticmethod
    def key(rt: ResourceType, namespace: str | None, name: str) -> Key:
        return (namespace or "" if rt.namespaced else "", name)

    def _entry(self, rt: ResourceType, namespace: str | None, name: str) -> Entry:
        entry = self._objects[rt.canonical].get(self.key(rt, namespace, name))
        if entry is None:
            raise not_found(rt.qualified, name)
        return entry

    def _write(self, kind: str, key: Key, obj: JsonObj, *, queue: bool = True) -> Entry:
        """Store ``obj`` under a new resourceVersion; a Node written (but by the node lifecycle
        controller's own pass) is queued for that pass, as its informer's update handler queues it."""
        if kind == "Node" and queue:
            self._node_updates.setdefault(key[1], self._clock())
        self._rv += 1
        stored = {**obj, "metadata": {**_meta(obj), "resourceVersion": str(self._rv)}}
        entry = Entry(stored)
        self._objects[kind][key] = entry
        self._kind_version[kind] += 1
        return entry

    def _remove(self, kind: str, key: Key) -> int:
        del self._objects[kind][key]
        self._kind_version[kind] += 1
        self._rv += 1
        return self._rv

    def _sorted_entries(self, kind: str) -> tuple[Entry, ...]:
        version = self._kind_version[kind]
        cached = self._sorted.get(kind)
        if cached is not None and cached[0] == version:
            return cached[1]
        objects = self._objects[kind]
        entries = tuple(objects[k] for k in sorted(objects))
        self._sorted[kind] = (version, entries)
        return entries

    def _pods_by_namespace(self) -> dict[str, list[JsonObj]]:
        out: dict[str, list[JsonObj]] = {}
        for (namespace, _), entry in self._objects["Pod"].items():
            out.setdefault(namespace, []).append(entry.obj)
        return out

    def present(
        self, rt: ResourceType, obj: JsonObj, pods: Mapping[str, list[JsonObj]] | None = None
    ) -> JsonObj:
        """An object as the API returns it: PDB status computed, converted to ``rt``'s version."""
        if rt.canonical == "PodDisruptionBudget":
            namespace = _meta(obj).get("namespace", "")
            in_namespace = (pods if pods is not None else self._pods_by_namespace()).get(namespace, [])
            numbers = disruption.budget(obj, in_namespace, self._find_scale, self._disruptions(obj))
            obj = disruption.with_status(obj, numbers)
        return rt.to_external(obj)

    def _controller(self, kind: str, namespace: str, ref: Mapping[str, Any]) -> JsonObj | None:
        """The stored object a controller reference names, when its uid is the reference's."""
        entry = self._objects[kind].get((namespace, str(ref.get("name") or "")))
        return entry.obj if entry is not None and _meta(entry.obj).get("uid") == ref.get("uid") else None

    def _deployment_of(self, replica_set: JsonObj, namespace: str) -> JsonObj | None:
        """The Deployment that controls a ReplicaSet (``getPodDeployment``), when it exists."""
        parent = disruption.controller_of(replica_set)
        if parent is None or parent.get("kind") != "Deployment":
            return None
        if str(parent.get("apiVersion") or "").rpartition("/")[0] not in ("apps", "extensions"):
            return None
        return self._controller("Deployment", namespace, parent)

    def _find_scale(self, ref: Mapping[str, Any], namespace: str) -> tuple[str, int] | None:
        """The disruption controller's finders (kubernetes/kubernetes pkg/controller/disruption/
        disruption.go ``finders``): the ReplicationController, the Deployment of a ReplicaSet (else
        the ReplicaSet itself, as its ``scale`` subresource reads it), the StatefulSet, else the
        ``scale`` subresource of the kind named. ``(controller uid, spec.replicas)``; None when no such
        controller exists; :class:`disruption.ScaleUnknown` for a kind with no scale to read."""
        api_version = str(ref.get("apiVersion") or "")
        group, kind = api_version.rpartition("/")[0], str(ref.get("kind") or "")
        if group in _SCALED_BUILTINS.get(kind, ()):
            found = self._controller(kind, namespace, ref)
            if found is None:
                return None
            if kind == "ReplicaSet":
                found = self._deployment_of(found, namespace) or found
            return _meta(found).get("uid", ""), _replicas(found)
        rt = resources.by_api_version(api_version, kind)
        if rt is None:
            raise disruption.ScaleUnknown(f'no matches for kind "{kind}" in version "{api_version}"')
        if rt.scale is None:
            raise disruption.ScaleUnknown(f"{rt.qualified} does not implement the scale subresource")
        found = self._controller(rt.canonical, namespace, ref)
        if found is None:
            return None
        try:  # the scale client's GET: its error (no spec replicas: 500) fails the sync with its message
            replicas = int(resources.scale_of(rt, found)["spec"]["replicas"])
        except KubeApiError as exc:
            raise disruption.ScaleUnknown(exc.message) from None
        return _meta(found).get("uid", ""), replicas

    # --- reads ---------------------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> JsonObj:
        with self._session():
            return self.present(rt, self._entry(rt, namespace, name).obj)

    def find(self, rt: ResourceType, namespace: str | None, name: str) -> JsonObj | None:
        with self._session():
            entry = self._objects[rt.canonical].get(self.key(rt, namespace, name))
            return None if entry is None else self.present(rt, entry.obj)

    def list_page(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        labels: LabelQuery = (),
        fields: FieldQuery = (),
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> ListResult:
        with self._session():
            ident: int | None = None
            if continue_token:
                ident, snapshot, offset = self._resume(rt, continue_token)
            else:
                snapshot, offset = self._take_snapshot(rt, namespace, labels, fields), 0
            items = snapshot.items
            end = len(items) if not limit or limit <= 0 else min(len(items), offset + limit)
            token = None
            remaining = None
            if end < len(items):
                token = self._issue_token(snapshot, ident, end)
                remaining = None if snapshot.filtered else len(items) - end
            return ListResult(items[offset:end], str(snapshot.resource_version), token, remaining)

    def _take_snapshot(
        self, rt: ResourceType, namespace: str | None, labels: LabelQuery, fields: FieldQuery
    ) -> _Snapshot:
        entries: Sequence[Entry] = self._sorted_entries(rt.canonical)
        if namespace is not None and rt.namespaced:
            entries = [e for e in entries if _meta(e.obj).get("namespace") == namespace]
        if labels:
            entries = [e for e in entries if labels_match(labels, _meta(e.obj).get("labels"))]
        if fields:
            entries = [e for e in entries if fields_match(fields, e.obj)]
        if rt.canonical == "PodDisruptionBudget" or not rt.identity:
            pods = self._pods_by_namespace() if rt.canonical == "PodDisruptionBudget" else None
            entries = [Entry(self.present(rt, e.obj, pods)) for e in entries]
        return _Snapshot(rt.canonical, rt.api_version, tuple(entries), self._rv, bool(labels or fields))

    def _issue_token(self, snapshot: _Snapshot, ident: int | None, offset: int) -> str:
        """A token for ``snapshot`` from ``offset``; the snapshot is registered once per list (LRU)."""
        if ident is None:
            ident = self._next_snapshot
            self._next_snapshot += 1
            self._snapshots[ident] = snapshot
            while len(self._snapshots) > self._max_snapshots:
                self._snapshots.popitem(last=False)
        start = snapshot.items[offset].obj.get("metadata", {})
        body = {
            "v": "meta.k8s.io/v1",
            "rv": snapshot.resource_version,
            "start": f"{start.get('namespace', '')}/{start.get('name', '')}",
            "snapshot": ident,
            "offset": offset,
        }
        return base64.urlsafe_b64encode(dumps(body).encode()).decode().rstrip("=")

    def _resume(self, rt: ResourceType, token: str) -> tuple[int, _Snapshot, int]:
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            body = json.loads(raw)
            ident, offset = int(body["snapshot"]), int(body["offset"])
        except (binascii.Error, ValueError, KeyError, TypeError) as exc:
            raise bad_request(f"continue key is not valid: {exc}") from None
        if body.get("v") != "meta.k8s.io/v1":
            raise bad_request(
                f"continue key is not valid: incorrect encoded start resourceVersion (version {body.get('v')})"
            )
        if ident < self._expired_below:
            raise expired_continue()
        snapshot = self._snapshots.get(ident)
        if snapshot is None:
            raise expired_continue()
        if snapshot.kind != rt.canonical or snapshot.api_version != rt.api_version:
            raise bad_request("continue key is not valid: it was issued for another resource")
        if not 0 <= offset <= len(snapshot.items):
            raise bad_request("continue key is not valid: offset out of range")
        self._snapshots.move_to_end(ident)
        return ident, snapshot, offset

    def expire_snapshots(self) -> None:
        """Every continue token issued so far answers 410 Expired from now on."""
        with self._session():
            self._expired_below = self._next_snapshot
            self._snapshots.clear()

    def all_objects(self, rt: ResourceType, namespace: str | None = None) -> list[JsonObj]:
        with self._session():
            pods = self._pods_by_namespace() if rt.canonical == "PodDisruptionBudget" else None
            return [
                self.present(rt, e.obj, pods)
                for e in self._sorted_entries(rt.canonical)
                if namespace is None or _meta(e.obj).get("namespace") == namespace
            ]

    # --- writes --------------------------------------------------------------------------------

    def _check_type(self, rt: ResourceType, body: JsonObj) -> None:
        api_version, kind = body.get("apiVersion"), body.get("kind")
        if api_version and api_version != rt.api_version:
            raise bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({rt.api_version})"
            )
        if kind and kind != rt.kind:
            raise bad_request(f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})")

    @staticmethod
    def _immutable_problems(rt: ResourceType, current: JsonObj, updated: JsonObj) -> list[FieldError]:
        """A CRD's ``self == oldSelf`` rule, a built-in kind's ``ValidateImmutableField``: one error per
        field changed, worded as CEL validation or the kind's validation words it. A CEL rule reading
        ``oldSelf`` is a transition rule, evaluated only where both the old and the new object hold the
        field: a CRD's optional field may be set once, or dropped."""
        found = []
        for path in rt.immutable:
            old, new = _dig(current, path), _dig(updated, path)
            if rt.custom and (old is None or new is None):
                continue
            if old != new:
                shown = crds.json_type(new, integers=False) if rt.custom else new
                why = crds.immutable_message(rt.canonical, path) if rt.custom else "field is immutable"
                found.append(FieldError(".".join(path), f'Invalid value: "{shown}": {why}'))
        return found

    @staticmethod
    def _keep_left_out(rt: ResourceType, current: JsonObj, updated: JsonObj) -> JsonObj:
        """``updated`` with the fields of ``rt.kept`` it leaves out (absent, null or empty) put back."""
        for path in rt.kept:
            old = _dig(current, path)
            if _dig(updated, path) in (None, "") and old is not None:
                updated = _with(updated, path, old)
        return updated

    def _validate(
        self, rt: ResourceType, obj: JsonObj, *, via_api: bool, current: JsonObj | None = None
    ) -> None:
        """The kind's validation of a create, or of an update of ``current``: every problem found, in
        one 422 (``errors.NewInvalid``), as the API server's validation collects a ``field.ErrorList``."""
        if rt.canonical == "PriorityClass":
            undecodable = pods.check_priority_class(obj)
            if undecodable:
                raise undecodable
        undecodable = label_rules.undecodable(rt.kind, rt.version, obj)
        if undecodable:
            raise undecodable
        problems = self._problems(rt, obj, current)
        if problems:
            kind = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
            raise invalid_fields(kind, _meta(obj).get("name", ""), problems)

    def _problems(self, rt: ResourceType, obj: JsonObj, current: JsonObj | None) -> list[FieldError]:
        """Every validation error of ``obj`` (an update of ``current`` when given): a built-in kind's
        and its immutable fields'; a CRD's schema errors, then its CEL rules, transition rules included,
        unless a blocking schema error kept them from running (:func:`crds.check`)."""
        problems: list[FieldError] = label_rules.problems(obj)
        if rt.canonical == "Event" and current is None:  # a create through either Events API
            problems += resources.event_name_problems(rt.group, str(_meta(obj).get("name") or ""))
            problems += resources.event_object_problems(obj)
        if rt.canonical == "PodDisruptionBudget":
            problems += disruption.check_spec(obj.get("spec") or {})
        if rt.canonical == "Pod":  # add() too: the official client cannot parse a pod without containers
            containers = (obj.get("spec") or {}).get("containers")
            if not isinstance(containers, list) or not containers:
                problems.append(FieldError("spec.containers", "Required value"))
            resized = pods.resize_problem(current, obj) if current is not None else None
            if resized:
                problems.append(FieldError(*resized))
        problems += [FieldError(*found) for found in pods.requirement_problems(obj, rt.canonical)]
        scale = resources.scale_problems(rt, obj)
        problems += crds.check(rt.canonical, obj, rt.version, scale)  # add() too: never held if refused
        cel_ran = not crds.has_cel_rules(rt.canonical) or crds.CEL_NOT_RUN not in problems
        if current is not None and (cel_ran or not rt.custom):
            problems += self._immutable_problems(rt, current, obj)
        return problems

    def create(
        self,
        rt: ResourceType,
        namespace: str | None,
        body: Any,
        *,
        via_api: bool = True,
        dry_run: bool = False,
    ) -> JsonObj:
        """POST: store a new object. ``via_api=False`` is the in-process ``add``: the namespace is
        created when missing and the status given is kept (over the wire, ``rt.create_status`` says
        what the kind's strategy leaves of it)."""
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        self._check_type(rt, body)
        obj = rt.to_internal(body)
        meta = dict(_meta(obj))
        with self._session():
            if rt.namespaced:
                given = meta.get("namespace")
                if namespace is not None and given and given != namespace:
                    raise bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request"
                    )
                namespace = namespace or given or "default"
                meta["namespace"] = namespace
                if ("", namespace) not in self._objects["Namespace"]:
                    if via_api:
                        raise not_found("namespaces", namespace)
                    self.create(NAMESPACES, None, {"metadata": {"name": namespace}}, via_api=False)
                elif via_api:
                    self._refuse_if_terminating(
                        rt.qualified, namespace, meta.get("name") or meta.get("generateName")
                    )
            else:
                meta.pop("namespace", None)
            name = meta.get("name")
            if not name:
                prefix = meta.get("generateName")
                if not prefix:
                    raise invalid(
                        rt.kind, "", "metadata.name", "Required value: name or generateName is required"
                    )
                name = prefix + "".join(random.choices(_NAME_SUFFIX, k=5))
                meta["name"] = name
            key = self.key(rt, namespace, name)
            if key in self._objects[rt.canonical]:
                raise already_exists(rt.qualified, name)
            meta.pop("resourceVersion", None)
            for server_owned in ("deletionTimestamp", "deletionGracePeriodSeconds"):
                meta.pop(server_owned, None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = self.now()
            if rt.canonical in _GENERATION_FROM_ONE or rt.optional:
                meta["generation"] = 1
            obj = {**obj, "apiVersion": resources.BY_STORE_KIND[rt.canonical].api_version, "kind": rt.kind}
            obj["metadata"] = meta
            self._defaults(rt, obj, via_api=via_api)
            obj = _omit_empty(obj)
            meta = _meta(obj)
            self._validate(rt, obj, via_api=via_api)
            if dry_run:
                return self.present(
                    rt, {**obj, "metadata": {**meta, "resourceVersion": self.resource_version}}
                )
            return self.present(rt, self._write(rt.canonical, key, obj).obj)

    def _defaults(self, rt: ResourceType, obj: JsonObj, *, via_api: bool) -> None:
        """What a create stores beyond what it sends: the kind's defaults, then what its admission and
        its strategy (``rt.create_status``) set; ``add()`` keeps the status given."""
        obj.update(rt.defaults(obj))
        if via_api and rt.create_status is not None:
            status = rt.create_status(dict(obj.pop("status", None) or {}), self.now())
            if status is not None:
                obj["status"] = status
        if rt.canonical == "Pod":
            self._admit_pod(obj, via_api=via_api)
        elif rt.canonical == "PodDisruptionBudget":
            obj.pop("status", None)  # always computed on read
        elif rt.canonical == "Namespace":
            meta = obj["metadata"]  # the API server labels every namespace with its own name
            meta["labels"] = {
                **(meta.get("labels") or {}),
                "kubernetes.io/metadata.name": meta.get("name", ""),
            }
            obj["spec"] = {"finalizers": ["kubernetes"], **(obj.get("spec") or {})}
            obj["status"] = {"phase": "Active"}  # as its strategy sets it on every create

    def _admit_pod(self, obj: JsonObj, *, via_api: bool) -> None:
        """The admission plugins (DefaultTolerationSeconds, Priority), then the class ``GetPodQOS`` gives
        (the status's, else computed). The seeding path stands for a pod already stored, so admitted
        when it was created: DefaultTolerationSeconds is on by default since Kubernetes 1.6
        (kubernetes/kubernetes#41815), so it gets the same tolerations (a pod that has them keeps its
        own); Priority keeps what it states and fills only what it lacks, and its status is kept."""
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return  # refused by validation
        spec = pods.admit_default_tolerations(spec)
        classes = [entry.obj for entry in self._objects["PriorityClass"].values()]
        spec, refusal = pods.admit_priority(spec, classes, strict=via_api)
        if refusal:
            raise forbidden(PODS.qualified, _meta(obj).get("name", ""), refusal)
        status = dict(obj.get("status") or {})
        status.setdefault("phase", "Pending")
        status["qosClass"] = pods.pod_qos(status, spec)
        obj["spec"], obj["status"] = spec, status

    def replace(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> JsonObj:
        """PUT: optimistic concurrency on ``metadata.resourceVersion`` (empty means unconditional)."""
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        self._check_type(rt, body)
        given = _meta(body)
        _same_names(rt, given, namespace, name)
        with self._session():
            entry = self._entry(rt, namespace, name)
            proposed = rt.to_internal(body)
            proposed = {**proposed, "metadata": {"name": name, **_meta(proposed)}}
            return self._commit(rt, entry.obj, proposed, subresource=subresource, dry_run=dry_run)

    def patch(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        content_type: str,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> JsonObj:
        with self._session():
            entry = self._entry(rt, namespace, name)
            patched = _patched(rt, self.present(rt, entry.obj), content_type, body)
            if not isinstance(patched, dict):
                raise KubeApiError(422, "the patched object is not a JSON object")
            meta = _meta(patched)
            if meta.get("name") != name or (rt.namespaced and meta.get("namespace") != namespace):
                raise invalid(rt.kind, name, "metadata.name", "field is immutable")
            return self._commit(
                rt, entry.obj, rt.to_internal(patched), subresource=subresource, dry_run=dry_run, patch=True
            )

    def get_scale(self, rt: ResourceType, namespace: str | None, name: str) -> JsonObj:
        """GET ``<plural>/scale`` (a CRD's ``subresources.scale``): :func:`resources.scale_of`."""
        with self._session():
            return resources.scale_of(rt, self._entry(rt, namespace, name).obj)

    def update_scale(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        change: Callable[[JsonObj], Any],
        *,
        dry_run: bool = False,
    ) -> JsonObj:
        """PUT or PATCH of ``<plural>/scale`` (``ScaleREST.Update``): ``change`` makes the new Scale of the
        current one (whose ``spec.replicas`` is :data:`resources.MISSING_REPLICAS` when the object has
        none); its ``spec.replicas`` is written at the spec replicas path (the path made when missing),
        its ``resourceVersion``, when set, is the update's precondition, and the object is updated as a
        write of the resource itself is (validated, its status kept). Answers the Scale written."""
        assert rt.scale is not None
        path = tuple(rt.scale[0].lstrip(".").split("."))
        with self._session():
            current = self._entry(rt, namespace, name).obj
            scale = change(resources.scale_of(rt, current, missing=resources.MISSING_REPLICAS))
            replicas = resources.scale_replicas(rt, scale)
            meta = dict(_meta(current))
            meta["resourceVersion"] = _meta(scale).get("resourceVersion") or meta.get("resourceVersion")
            proposed = {**_with(current, path, replicas), "metadata": meta}
            written = self._commit(rt, current, proposed, subresource=None, dry_run=dry_run)
            return resources.scale_of(rt, written)

    def replace_scale(
        self, rt: ResourceType, namespace: str | None, name: str, body: Any, *, dry_run: bool = False
    ) -> JsonObj:
        """PUT ``<plural>/scale``: the Scale sent, named as the URL names it."""
        given = _meta(body) if isinstance(body, dict) else {}
        _same_names(rt, given, namespace, name)
        return self.update_scale(rt, namespace, name, lambda _: body, dry_run=dry_run)

    def patch_scale(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        content_type: str,
        body: Any,
        *,
        dry_run: bool = False,
    ) -> JsonObj:
        """PATCH ``<plural>/scale``: the patch applied to the current Scale (a custom resource's scale
        takes JSON and merge patches, as the resource does)."""
        return self.update_scale(
            rt, namespace, name, lambda scale: _patched(rt, scale, content_type, body), dry_run=dry_run
        )

    def overwrite(self, rt: ResourceType, obj: Any) -> JsonObj:
        """The in-process ``update``: replace an object whole (status included), unconditionally."""
        if not isinstance(obj, dict):
            raise bad_request("the object must be a JSON object")
        internal = rt.to_internal(obj)
        meta = _meta(internal)
        name = meta.get("name") or ""
        with self._session():
            entry = self._entry(rt, meta.get("namespace") or "default", name)
            cur_meta = _meta(entry.obj)
            new_meta = {k: v for k, v in meta.items() if k != "resourceVersion"}
            for field in ("uid", "creationTimestamp"):
                new_meta[field] = cur_meta.get(field)
            if rt.namespaced:
                new_meta["namespace"] = cur_meta["namespace"]
            if "generation" in cur_meta:
                bumped = _new_generation(rt.canonical, entry.obj, {**internal, "metadata": new_meta})
                new_meta["generation"] = cur_meta["generation"] + (1 if bumped else 0)
            updated = {
                **internal,
                "apiVersion": entry.obj["apiVersion"],
                "kind": entry.obj["kind"],
                "metadata": new_meta,
            }
            updated = _omit_empty(rt.defaults(updated))
            self._validate(rt, updated, via_api=False)
            key = self.key(rt, cur_meta.get("namespace"), name)
            return self.present(rt, self._write(rt.canonical, key, updated).obj)

    def _commit(
        self,
        rt: ResourceType,
        current: JsonObj,
        proposed: JsonObj,
        *,
        subresource: str | None,
        dry_run: bool,
        patch: bool = False,
    ) -> JsonObj:
        """The update rules shared by PUT and PATCH: preconditions, server-owned fields, status.

        A ``resourceVersion`` in the object written (sent, or left by a patch) must be the stored one
        (registry/generic/registry/store.go Update: 409). Its ``uid`` is a precondition of a PUT only
        (rest.defaultUpdatedObjectInfo.Preconditions: 409); a PATCH has none (endpoints/handlers/patch.go
        builds its DefaultUpdatedObjectInfo from nil): on ``/status`` the stored metadata is kept whole
        (status_strategy.go PrepareForUpdate), on the object a uid changed is an immutable field (422)."""
        cur_meta, new_meta = _meta(current), dict(_meta(proposed))
        name = cur_meta["name"]
        version = new_meta.get("resourceVersion")
        if version and version != cur_meta.get("resourceVersion"):
            raise conflict(rt.qualified, name, STALE_OBJECT)
        uid = new_meta.get("uid")
        if uid and uid != cur_meta.get("uid") and not patch:
            raise conflict(
                rt.qualified,
                name,
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: {cur_meta.get('uid')}",
            )
        if uid and uid != cur_meta.get("uid") and subresource != "status":
            kind = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
            raise invalid(kind, name, "metadata.uid", f'Invalid value: "{uid}": field is immutable')
        if subresource == "status":
            updated = rt.defaults({**current, "status": proposed.get("status") or {}})
        else:
            for field in _SERVER_META:
                new_meta.pop(field, None)
                if field in cur_meta:
                    new_meta[field] = cur_meta[field]
            if rt.namespaced:
                new_meta["namespace"] = cur_meta["namespace"]
            updated = {
                **proposed,
                "apiVersion": current["apiVersion"],
                "kind": current["kind"],
                "metadata": new_meta,
            }
            if rt.has_status:
                updated.pop("status", None)
                if "status" in current:
                    updated["status"] = current["status"]
            updated = rt.defaults(updated)  # an update is defaulted as a create is
            if rt.canonical == "Pod" and isinstance(updated.get("spec"), dict):
                # DefaultTolerationSeconds admits updates of the pod itself too, not of its subresources
                updated["spec"] = pods.admit_default_tolerations(updated["spec"])
            if "generation" in cur_meta and _new_generation(rt.canonical, current, updated):
                new_meta["generation"] = cur_meta["generation"] + 1
        updated = _omit_empty(self._keep_left_out(rt, current, updated))
        self._validate(rt, updated, via_api=True, current=current)
        if _without_rv(updated) == _without_rv(current):
            return self.present(rt, current)  # a no-op write does not bump the resourceVersion
        if dry_run:
            return self.present(rt, updated)
        key = self.key(rt, cur_meta.get("namespace"), name)
        return self.present(rt, self._write(rt.canonical, key, updated).obj)

    def delete(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        options: Mapping[str, Any] | None = None,
        *,
        dry_run: bool = False,
    ) -> JsonObj:
        """DELETE (``options`` a DeleteOptions: preconditions, ``dryRun``, and for a Pod
        ``gracePeriodSeconds``). A Pod is deleted gracefully (see :mod:`.deletion`) and answered as
        stored, ``deletionTimestamp`` set; other kinds go at once. A Namespace is answered itself,
        ``Terminating``, and its contents go with it; other kinds answer a ``Status`` of ``Success``."""
        options = options or {}
        dry_run = dry_run or deletion.dry_run_of(options)
        with self._session():
            entry = self._entry(rt, namespace, name)
            self._check_preconditions(rt, entry.obj, options)
            if rt.canonical == "Pod":
                return self._delete_pod(self.key(rt, namespace, name), entry.obj, options, dry_run=dry_run)
            obj = entry.obj
            key = self.key(rt, namespace, name)
            version = self._rv if dry_run else self._remove(rt.canonical, key)
            if rt.canonical == "Namespace" and not dry_run:
                for kind, objects in self._objects.items():
                    if resources.BY_STORE_KIND[kind].namespaced:
                        for gone in [k for k in objects if k[0] == name]:
                            self._remove(kind, gone)
            meta = _meta(obj)
            if rt.canonical == "Namespace":
                deleted = {
                    **obj,
                    "metadata": {
                        **meta,
                        "resourceVersion": str(version),
                        "deletionTimestamp": self.now(),
                        "deletionGracePeriodSeconds": 0,
                    },
                    "status": {"phase": "Terminating"},
                }
                return self.present(rt, deleted)
            details: JsonObj = {"name": name}
            if rt.group:
                details["group"] = rt.group
            details["kind"] = rt.plural
            details["uid"] = meta.get("uid", "")
            return status_object(200, status="Success", details=details)

    def _delete_pod(self, key: Key, pod: JsonObj, options: Mapping[str, Any], *, dry_run: bool) -> JsonObj:
        """A Pod's DELETE: marked terminating for its grace period (the emulated kubelet removes it,
        :meth:`_reap`), or removed now (grace 0: not scheduled, finished, or asked for). Answers the pod
        as the registry returns it: the stored mark, or the last state with ``deletionTimestamp``."""
        now = self._clock()
        planned = deletion.plan(pod, options, now)
        if planned.pending:
            return self.present(PODS, pod)
        if not planned.remove:
            if dry_run:
                return self.present(PODS, planned.pod)
            stored = self._write("Pod", key, planned.pod).obj
            since = self._terminating.get(key, (now, 0, ""))[0]
            self._terminating[key] = (since, planned.grace, _meta(pod).get("uid", ""))
            return self.present(PODS, stored)
        version = self._rv
        if not dry_run:
            version = self._remove("Pod", key)
            self._terminating.pop(key, None)
        meta = _meta(planned.pod)
        gone = {
            **planned.pod,
            "metadata": {
                **meta,
                "resourceVersion": str(version),
                "deletionTimestamp": meta.get("deletionTimestamp") or iso(now),
                "deletionGracePeriodSeconds": 0,
            },
        }
        return self.present(PODS, gone)

    def _check_preconditions(self, rt: ResourceType, obj: JsonObj, options: Mapping[str, Any] | None) -> None:
        pre = (options or {}).get("preconditions") or {}
        meta = _meta(obj)
        name = meta.get("name", "")
        if pre.get("uid") and pre["uid"] != meta.get("uid"):
            raise conflict(
                rt.qualified,
                name,
                f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {meta.get('uid')}",
            )
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
            raise conflict(
                rt.qualified,
                name,
                f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
            )

    def delete_collection(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        labels: LabelQuery = (),
        fields: FieldQuery = (),
        dry_run: bool = False,
        options: Mapping[str, Any] | None = None,
    ) -> JsonObj:
        """DELETE on a collection: each object selected is deleted as a DELETE with ``options`` (the
        request's DeleteOptions body) deletes it."""
        with self._session():
            doomed = self._take_snapshot(rt, namespace, labels, fields).items
            for entry in doomed:
                meta = _meta(entry.obj)
                self.delete(rt, meta.get("namespace"), meta["name"], options, dry_run=dry_run)
            return status_object(200, status="Success")

    # --- pods: eviction and binding ------------------------------------------------------------

    def evict(self, namespace: str, name: str, body: Any, *, dry_run: bool = False) -> JsonObj:
        """The ``pods/eviction`` subresource (policy/v1): PDB-aware graceful deletion, after
        kubernetes/kubernetes pkg/registry/core/pod/storage/eviction.go.

        A pod that ``canIgnorePDB`` (phase Pending, Succeeded or Failed, or already terminating) is
        deleted without looking at budgets; a pod covered by no budget is deleted; a pod covered by more
        than one is refused with 500, as the real server does; an unready pod may go when the budget is
        already met (``IfHealthyBudget``) or always (``AlwaysAllow``); otherwise the budget must allow a
        disruption or the answer is 429. The pod is then marked ``DisruptionTarget=True`` (reason
        ``EvictionByEvictionAPI``, ``addConditionAndDeletePod``) and deleted with the Eviction's
        ``deleteOptions`` (its grace period; its ``dryRun``, or the request's, makes it all a dry run).
        Their ``preconditions`` (uid, resourceVersion) are the deletion's: checked after the budget, so a
        stale one on a pod its budget holds answers the budget's 429, else 409.
        """
        if not isinstance(body, dict):
            raise bad_request("the request body must be an Eviction object")
        if _meta(body).get("name", "") != name:  # compared whatever they are: a body naming none too
            raise bad_request("name in URL does not match name in Eviction object")
        options = body.get("deleteOptions") or {}
        if not isinstance(options, dict):
            raise bad_request("deleteOptions must be a DeleteOptions object")
        dry_run = deletion.eviction_dry_run(options, dry_run)
        with self._session():
            self._refuse_if_terminating(PODS.qualified, namespace, name)  # admission runs first
            pod = self._entry(PODS, namespace, name).obj
            if not _can_ignore_budgets(pod):
                self._check_budgets(namespace, pod, dry_run=dry_run)
            # the preconditions are the deletion's, checked after the budget (addConditionAndDeletePod)
            self._check_preconditions(PODS, pod, options)
            key = self.key(PODS, namespace, name)
            if not dry_run:
                marked = deletion.with_condition(pod, _EVICTION_CONDITION, self.now())
                if marked != pod:
                    pod = self._write("Pod", key, marked).obj
            self._delete_pod(key, pod, options, dry_run=dry_run)
            return status_object(201, status="Success")

    def _check_budgets(self, namespace: str, pod: JsonObj, *, dry_run: bool) -> None:
        """The budget part of an eviction: 500 for a pod more than one budget selects, else the one
        budget's verdict (:meth:`_check_budget`)."""
        budgets = [
            e.obj
            for k, e in self._objects["PodDisruptionBudget"].items()
            if k[0] == namespace and disruption.selects(e.obj, pod)
        ]
        if len(budgets) > 1:  # a Status of code 500 and this message only: no reason, no details
            raise KubeApiError(
                500,
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                reason="",
            )
        if budgets:
            pods = [e.obj for k, e in self._objects["Pod"].items() if k[0] == namespace]
            self._check_budget(budgets[0], pod, pods, dry_run=dry_run)

    def _refuse_if_terminating(self, qualified: str, namespace: str, name: str | None) -> None:
        """The NamespaceLifecycle admission plugin: no create (an eviction is one) in a namespace that
        is being deleted; 403 Forbidden with a ``NamespaceTerminating`` cause."""
        entry = self._objects["Namespace"].get(("", namespace))
        if entry is None or (entry.obj.get("status") or {}).get("phase") != "Terminating":
            return
        raise forbidden(
            qualified,
            name or "Unknown",
            f"unable to create new content in namespace {namespace} because it is being terminated",
            causes=[
                {
                    "reason": "NamespaceTerminating",
                    "message": f"namespace {namespace} is being terminated",
                    "field": "metadata.namespace",
                }
            ],
        )

    def _check_budget(self, pdb: JsonObj, pod: JsonObj, pods: list[JsonObj], *, dry_run: bool) -> None:
        """The one budget's verdict (``checkAndDecrement``): an unready pod its unhealthy pod eviction
        policy lets go, 403 for a status that refuses every eviction, 429 when it allows none; else the
        pod is recorded in ``disruptedPods`` (not for a dry run), before any precondition is checked."""
        numbers = disruption.budget(pdb, pods, self._find_scale, self._disruptions(pdb))
        status = disruption.with_status(pdb, numbers)["status"]
        current, desired = status["currentHealthy"], status["desiredHealthy"]
        if not disruption.pod_is_ready(pod):  # eviction.go: IsPodReady, the same test as the budget's
            policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
            if policy == "AlwaysAllow" or (current >= desired and desired > 0):
                return
        why = disruption.eviction_forbidden({"status": status})
        if why is not None:
            raise forbidden("poddisruptionbudget.policy", _meta(pdb).get("name", ""), why)
        if status["disruptionsAllowed"] > 0:
            if not dry_run:
                namespace = str(_meta(pdb).get("namespace") or "")
                record = self._disrupted.setdefault(str(_meta(pdb).get("uid") or ""), (namespace, {}))[1]
                record[str(_meta(pod).get("name") or "")] = self._clock()
            return
        raise KubeApiError(
            429,
            "Cannot evict pod as it would violate the pod's disruption budget.",
            details={
                "causes": [
                    {
                        "reason": "DisruptionBudget",
                        "message": disruption.eviction_blocked_message(pdb, numbers),
                    }
                ]
            },
        )

    def bind(self, namespace: str, name: str, node: str, *, running: bool, dry_run: bool = False) -> JsonObj:
        """Assign a pod to a node. ``running=False`` is the ``pods/binding`` subresource (what a
        scheduler does: ``spec.nodeName`` and ``PodScheduled``); ``running=True`` also plays the
        kubelet: phase ``Running`` with ``Initialized``, ``ContainersReady`` and ``Ready`` true."""
        with self._session():
            pod = self._entry(PODS, namespace, name).obj
            assigned = (pod.get("spec") or {}).get("nodeName")
            if not running and assigned:
                raise conflict("pods", name, f'pod {name} is already assigned to node "{assigned}"')
            now = self.now()
            status = dict(pod.get("status") or {})
            conditions = {c.get("type"): c for c in status.get("conditions") or []}
            wanted = ["PodScheduled"]
            if running:
                wanted = [
                    "PodReadyToStartContainers",
                    "Initialized",
                    "Ready",
                    "ContainersReady",
                    "PodScheduled",
                ]
                status["phase"] = "Running"
                status.setdefault("startTime", now)
            for kind in wanted:
                old = conditions.get(kind)
                if old is None or old.get("status") != "True":
                    conditions[kind] = {
                        "type": kind,
                        "status": "True",
                        "lastProbeTime": None,
                        "lastTransitionTime": now,
                    }
            status["conditions"] = list(conditions.values())
            updated = {**pod, "spec": {**(pod.get("spec") or {}), "nodeName": node}, "status": status}
            if dry_run:
                return updated
            key = self.key(PODS, namespace, name)
            return self._write("Pod", key, updated).obj
