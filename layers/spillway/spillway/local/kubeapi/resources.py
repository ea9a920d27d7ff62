"""The resources the emulator serves, their REST names, and discovery documents.

Objects are stored in one canonical shape per *store kind* (``Node``, ``Pod``, ``PodDisruptionBudget``,
``Event``, ``Namespace``). ``events.k8s.io/v1`` Events share the store with ``v1`` Events, as on a real
cluster, and are converted on the way in and out (``regarding`` <-> ``involvedObject``, ``note`` <->
``message`` ...).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

JsonObj = dict[str, Any]

# events.k8s.io/v1 field -> v1 field (the conversion the API server applies between the two versions)
_EVENTS_V1_TO_CORE = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_CORE_TO_EVENTS_V1 = {v: k for k, v in _EVENTS_V1_TO_CORE.items()}


def event_to_core(obj: JsonObj) -> JsonObj:
    """An ``events.k8s.io/v1`` Event in its ``v1`` shape."""
    out: JsonObj = {_EVENTS_V1_TO_CORE.get(k, k): v for k, v in obj.items()}
    out["apiVersion"] = "v1"
    out["kind"] = "Event"
    out.setdefault("involvedObject", {})
    return out


def event_to_events_v1(obj: JsonObj) -> JsonObj:
    """A ``v1`` Event in its ``events.k8s.io/v1`` shape (``eventTime`` is null when never set, as real)."""
    out: JsonObj = {_CORE_TO_EVENTS_V1.get(k, k): v for k, v in obj.items()}
    out["apiVersion"] = "events.k8s.io/v1"
    out["kind"] = "Event"
    out.setdefault("eventTime", None)
    return out


def _identity(obj: JsonObj) -> JsonObj:
    return obj


@dataclass(frozen=True)
class ResourceType:
    kind: str
    plural: str
    singular: str
    group: str  # "" for the core group
    version: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ("create", "delete", "deletecollection", "get", "list", "patch", "update")
    store_kind: str = ""
    #: status is a subresource: writes to the main resource keep the old status, and ``/status`` only
    #: changes status (as the registry strategies of Pod, Node and PodDisruptionBudget do)
    has_status: bool = False
    #: strategic-merge-patch merge keys by field path (list elements add no path component);
    #: ``None`` marks a list of scalars merged as a set; lists not named here are atomic (replaced)
    merge_keys: dict[tuple[str, ...], str | None] = field(default_factory=dict)
    to_external: Callable[[JsonObj], JsonObj] = _identity
    to_internal: Callable[[JsonObj], JsonObj] = _identity

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """``pods``, ``poddisruptionbudgets.policy``: the resource name error messages use."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def identity(self) -> bool:
        return self.to_external is _identity

    @property
    def canonical(self) -> str:
        return self.store_kind or self.kind


_META_KEYS: dict[tuple[str, ...], str | None] = {
    ("metadata", "ownerReferences"): "uid",
    ("metadata", "finalizers"): None,
}

NODES = ResourceType(
    "Node",
    "nodes",
    "node",
    "",
    "v1",
    namespaced=False,
    short_names=("no",),
    has_status=True,
    merge_keys={
        **_META_KEYS,
        ("spec", "podCIDRs"): None,
        ("status", "conditions"): "type",
        ("status", "addresses"): "type",
        ("status", "images"): None,
        ("status", "volumesAttached"): "name",
    },
)
PODS = ResourceType(
    "Pod",
    "pods",
    "pod",
    "",
    "v1",
    namespaced=True,
    short_names=("po",),
    has_status=True,
    merge_keys={
        **_META_KEYS,
        ("spec", "containers"): "name",
        ("spec", "initContainers"): "name",
        ("spec", "ephemeralContainers"): "name",
        ("spec", "containers", "env"): "name",
        ("spec", "initContainers", "env"): "name",
        ("spec", "containers", "ports"): "containerPort",
        ("spec", "initContainers", "ports"): "containerPort",
        ("spec", "containers", "volumeMounts"): "mountPath",
        ("spec", "initContainers", "volumeMounts"): "mountPath",
        ("spec", "volumes"): "name",
        ("spec", "imagePullSecrets"): "name",
        ("spec", "hostAliases"): "ip",
        ("status", "conditions"): "type",
        ("status", "podIPs"): "ip",
    },
)
PDBS = ResourceType(
    "PodDisruptionBudget",
    "poddisruptionbudgets",
    "poddisruptionbudget",
    "policy",
    "v1",
    namespaced=True,
    short_names=("pdb",),
    has_status=True,
    merge_keys={**_META_KEYS, ("status", "conditions"): "type"},
)
EVENTS = ResourceType(
    "Event", "events", "event", "", "v1", namespaced=True, short_names=("ev",), merge_keys=dict(_META_KEYS)
)
EVENTS_V1 = ResourceType(
    "Event",
    "events",
    "event",
    "events.k8s.io",
    "v1",
    namespaced=True,
    short_names=("ev",),
    store_kind="Event",
    merge_keys=dict(_META_KEYS),
    to_external=event_to_events_v1,
    to_internal=event_to_core,
)
NAMESPACES = ResourceType(
    "Namespace",
    "namespaces",
    "namespace",
    "",
    "v1",
    namespaced=False,
    short_names=("ns",),
    verbs=("create", "delete", "get", "list", "patch", "update"),
    merge_keys=dict(_META_KEYS),
)

ALL: tuple[ResourceType, ...] = (NODES, PODS, PDBS, EVENTS, EVENTS_V1, NAMESPACES)
BY_STORE_KIND: dict[str, ResourceType] = {rt.kind: rt for rt in ALL if rt.identity}
_BY_PATH: dict[tuple[str, str], ResourceType] = {(rt.api_version, rt.plural): rt for rt in ALL}


def by_path(group_version: str, plural: str) -> ResourceType | None:
    return _BY_PATH.get((group_version, plural))


def by_api_version(api_version: str, kind: str) -> ResourceType | None:
    for rt in ALL:
        if rt.api_version == api_version and rt.kind == kind:
            return rt
    return None


def resolve_kind(name: str) -> ResourceType:
    """The store resource for a kind (``Pod``), plural (``pods``) or short name (``po``), any case."""
    wanted = name.lower()
    for rt in ALL:
        if rt.identity and wanted in (rt.kind.lower(), rt.plural, rt.singular, *rt.short_names):
            return rt
    raise KeyError(f"unknown kind {name!r}; the emulator serves {', '.join(BY_STORE_KIND)}")


# --- discovery -------------------------------------------------------------------------------

SUBRESOURCES: dict[tuple[str, str], list[JsonObj]] = {
    ("v1", "pods"): [
        {
            "name": "pods/eviction",
            "group": "policy",
            "version": "v1",
            "kind": "Eviction",
            "verbs": ["create"],
        },
        {"name": "pods/binding", "kind": "Binding", "verbs": ["create"]},
        {"name": "pods/status", "kind": "Pod", "verbs": ["get", "patch", "update"]},
    ],
    ("v1", "nodes"): [{"name": "nodes/status", "kind": "Node", "verbs": ["get", "patch", "update"]}],
    ("policy/v1", "poddisruptionbudgets"): [
        {
            "name": "poddisruptionbudgets/status",
            "kind": "PodDisruptionBudget",
            "verbs": ["get", "patch", "update"],
        }
    ],
}


def resource_list(group_version: str) -> JsonObj | None:
    """``APIResourceList`` for ``/api/v1`` or ``/apis/<group>/<version>``."""
    resources: list[JsonObj] = []
    for rt in ALL:
        if rt.api_version != group_version:
            continue
        entry: JsonObj = {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(rt.verbs),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        resources.append(entry)
        for sub in SUBRESOURCES.get((group_version, rt.plural), []):
            resources.append({"singularName": "", "namespaced": rt.namespaced, **sub})
    if not resources:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


def api_groups() -> list[JsonObj]:
    groups: dict[str, JsonObj] = {}
    for rt in ALL:
        if rt.group and rt.group not in groups:
            gv = {"groupVersion": rt.api_version, "version": rt.version}
            groups[rt.group] = {"name": rt.group, "versions": [gv], "preferredVersion": gv}
    return list(groups.values())


def api_group(name: str) -> JsonObj | None:
    for group in api_groups():
        if group["name"] == name:
            return {"kind": "APIGroup", "apiVersion": "v1", **group}
    return None


VERSION_INFO: JsonObj = {
    "major": "1",
    "minor": "33",
    "emulationMajor": "1",
    "emulationMinor": "33",
    "gitVersion": "v1.33.0-spillway-emulator",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.24.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}
