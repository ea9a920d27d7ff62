"""The resources the emulator serves, their REST names, and discovery documents.

Objects are stored in one canonical shape per *store kind* (``Node``, ``Pod``, ``PodDisruptionBudget``,
``Event``, ``Namespace``, ``PodTemplate``, and ``<Kind>.<group>`` for the custom and alpha resources, so
that the three kinds named ``PodGroup`` stay apart). ``events.k8s.io/v1`` Events share the store with
``v1`` Events, as on a real cluster, and are converted on the way in and out (``regarding`` <->
``involvedObject``, ``note`` <-> ``message`` ...).

The *optional* resources (custom resources, and the alpha ``scheduling.k8s.io`` APIs a cluster must
switch on) are served only when installed: see ``KubeApiServer(optional_resources=...)``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from spillway.local.kubeapi import crds, pods
from spillway.local.kubeapi import labels as label_rules
from spillway.local.kubeapi.status import FieldError, KubeApiError, bad_request

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


_DNS_SUBDOMAIN = re.compile(crds.DNS_SUBDOMAIN_PATTERN)
_DNS_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
    "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def event_name_problems(group: str, name: str) -> list[FieldError]:
    """What the API server says of a new Event's ``metadata.name``, by the API it is created through.

    ``events.k8s.io/v1``: ``ValidateEventCreate`` (kubernetes/kubernetes pkg/apis/core/validation/
    events.go) validates its ObjectMeta with ``NameIsDNSSubdomain``: at most 253 characters, a lowercase
    RFC 1123 subdomain (k8s.io/apimachinery pkg/util/validation ``IsDNS1123Subdomain``). ``v1`` (and
    ``events.k8s.io/v1beta1``): that strict validation is skipped for backwards compatibility, and only
    the check every create gets remains (``rest.BeforeCreate``: ``ValidateObjectMetaAccessor`` with
    ``path.ValidatePathSegmentName``): not ``.`` or ``..``, no ``/`` or ``%``, any length."""
    where = "metadata.name"
    if group == "events.k8s.io":
        found = []
        if len(name) > 253:
            found.append(FieldError(where, f'Invalid value: "{name}": must be no more than 253 characters'))
        if not _DNS_SUBDOMAIN.match(name):
            found.append(FieldError(where, f'Invalid value: "{name}": {_DNS_SUBDOMAIN_MESSAGE}'))
        return found
    if name in (".", ".."):
        return [FieldError(where, f"Invalid value: \"{name}\": may not be '{name}'")]
    return [
        FieldError(where, f"Invalid value: \"{name}\": may not contain '{bad}'")
        for bad in ("/", "%")
        if bad in name
    ]


def event_object_problems(obj: JsonObj) -> list[FieldError]:
    """What the API server says of a new Event in its ``v1`` shape, whichever API created it
    (``legacyValidateEvent``, kubernetes/kubernetes pkg/apis/core/validation/events.go; field paths are
    the internal type's, ``reportingController`` for ``v1``'s ``reportingComponent``).

    Without ``eventTime`` (an old-style Event, as client-go's recorder and Spillway post) it must sit in
    its object's namespace, or, about a cluster-scoped object, in ``default`` (or none). With one (a
    "new" Event), its object's namespace is free, but one about a cluster-scoped object sits in
    ``default`` or ``kube-system``, and it must name its reporting controller (a qualified name) and
    instance, its action and its reason, each of at most 128 bytes, with a message of at most 1024. The
    object's kind and apiVersion are free: an Event may be about any object, a custom resource's (a
    CapacityBuffer) as well as a Pod."""
    involved = obj.get("involvedObject")
    wanted = str(involved.get("namespace") or "") if isinstance(involved, dict) else ""
    namespace = str(_meta_of(obj).get("namespace") or "")
    if not obj.get("eventTime"):
        fits = namespace == wanted or (not wanted and namespace == "default")
        return [] if fits else [_not_its_namespace(wanted)]
    fits = bool(wanted) or namespace in ("default", "kube-system")
    return ([] if fits else [_not_its_namespace(wanted)]) + _new_event_problems(obj)


def _not_its_namespace(wanted: str) -> FieldError:
    return FieldError(
        "involvedObject.namespace", f'Invalid value: "{wanted}": does not match event.namespace'
    )


# the fields an Event with eventTime must set, in the order checked, and the most bytes each may have
_NEW_EVENT_FIELDS = (("reportingInstance", 128), ("action", 128), ("reason", 128))


def _new_event_problems(obj: JsonObj) -> list[FieldError]:
    """``legacyValidateEvent``'s checks of an Event with ``eventTime``, after its namespace's, in order."""
    controller = str(obj.get("reportingComponent") or "")
    found = [] if controller else [FieldError("reportingController", "Required value")]
    found += [
        FieldError("reportingController", f'Invalid value: "{controller}": {why}')
        for why in label_rules.key_problems(controller)
    ]
    for key, most in _NEW_EVENT_FIELDS:
        value = str(obj.get(key) or "")
        if not value:
            found.append(FieldError(key, "Required value"))
        if len(value.encode()) > most:  # Go's len(): bytes
            found.append(FieldError(key, f'Invalid value: "": can have at most {most} characters'))
    if len(str(obj.get("message") or "").encode()) > 1024:
        found.append(FieldError("message", 'Invalid value: "": can have at most 1024 characters'))
    return found


def _meta_of(obj: JsonObj) -> JsonObj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _identity(obj: JsonObj) -> JsonObj:
    return obj


# --- the status a create over the wire leaves: each kind's registry strategy (PrepareForCreate) ---
# Called with the status the create sent and the server's clock; ``None`` stores no status at all.


def _cleared(sent: JsonObj, now: str) -> JsonObj | None:
    """What a controller writes through ``/status`` starts empty: apps and batch workloads, quotas,
    budgets (an empty Go struct, so ``{}`` on the wire)."""
    return {}


def _dropped(sent: JsonObj, now: str) -> JsonObj | None:
    """A custom resource with a status subresource: the status a create sends is dropped."""
    return None


def _pending(sent: JsonObj, now: str) -> JsonObj | None:
    """Claims: cleared, then ``phase`` defaulted by the v1 defaults."""
    return {"phase": "Pending"}


def _pod_pending(sent: JsonObj, now: str) -> JsonObj | None:
    """Pods: ``Pending`` and the QoS class of ``qos.GetPodQOS``, which is the class the status sent
    carries when it has one (the store computes it from the spec otherwise: :func:`pods.pod_qos`)."""
    given = sent.get("qosClass")
    return {"phase": "Pending", **({"qosClass": given} if given else {})}


def _volume_pending(sent: JsonObj, now: str) -> JsonObj | None:
    """PersistentVolumes: cleared, then ``Pending`` with the transition stamped by the server."""
    return {"phase": "Pending", "lastPhaseTransitionTime": now}


def _registered(sent: JsonObj, now: str) -> JsonObj | None:
    """Nodes keep the status they register with (the kubelet's), less the dropped ``config``."""
    return {k: v for k, v in sent.items() if k != "config"} or None


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
    #: a custom resource (CRD): strategic merge patch answers 415, as on a real server
    custom: bool = False
    #: served only when installed (a CRD, or an alpha API that must be switched on)
    optional: bool = False
    #: fields that may not change once created (a CRD's ``self == oldSelf`` validation rule, a built-in
    #: kind's ``ValidateImmutableField``)
    immutable: tuple[tuple[str, ...], ...] = ()
    #: fields a write that leaves them out keeps from the stored object (what a strategy's
    #: PrepareForUpdate or an admission plugin puts back)
    kept: tuple[tuple[str, ...], ...] = ()
    #: the kind's defaults (a built-in kind's ``SetDefaults_*``, a CRD's schema defaults), applied to
    #: every body the server decodes: a create's, an update's, a patched object
    defaults: Callable[[JsonObj], JsonObj] = _identity
    #: a CRD's ``subresources.scale``: (specReplicasPath, statusReplicasPath, labelSelectorPath)
    scale: tuple[str, str, str] | None = None
    #: the status a create over the wire stores, from the one it sent and the clock (the kind's
    #: registry strategy, ``PrepareForCreate``); ``None`` keeps the status sent (a kind without one).
    #: The in-process ``add`` keeps the status given: it seeds what a controller already wrote
    create_status: Callable[[JsonObj, str], JsonObj | None] | None = None
    #: a deprecated version's warning, sent in a ``Warning`` header with every answer through it
    deprecation: str = ""
    #: another project's CRD of the same name (``qualified``), installed instead of the default one only
    #: when named as ``<qualified>/<version>`` (:data:`ALTERNATIVES`): a cluster has one or the other
    alternative: bool = False
    #: an alternative's release where two of one version differ (``capacityquotas.autoscaling.x-k8s.io/
    #: v1alpha1+status``): the install name ends ``+<release>``
    release: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """``pods``, ``poddisruptionbudgets.policy``: the resource name error messages use."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def install_name(self) -> str:
        """The name that installs it (``KubeApiServer.optional_resources``)."""
        if not self.alternative:
            return self.qualified
        return f"{self.qualified}/{self.version}" + (f"+{self.release}" if self.release else "")

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
    create_status=_registered,
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
    create_status=_pod_pending,
    defaults=pods.with_defaults,
    # the status strategy keeps the QoS class a status write leaves out and refuses to change it; the
    # Priority plugin keeps the priority an update leaves out
    immutable=(("status", "qosClass"),),
    kept=(("status", "qosClass"), ("spec", "priority"), ("spec", "preemptionPolicy")),
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
    create_status=_cleared,
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

POD_TEMPLATES = ResourceType(
    "PodTemplate",
    "podtemplates",
    "podtemplate",
    "",
    "v1",
    namespaced=True,
    merge_keys={
        **_META_KEYS,
        ("template", "spec", "containers"): "name",
        ("template", "spec", "initContainers"): "name",
        ("template", "spec", "containers", "env"): "name",
        ("template", "spec", "volumes"): "name",
        ("template", "spec", "tolerations"): None,
    },
)

#: core/v1 ResourceQuota: ``spec.hard``, ``spec.scopes``, ``spec.scopeSelector``; ``status.hard`` and
#: ``status.used`` (a subresource) are written by the quota controller on a real cluster: stored as
#: written here, never computed
RESOURCE_QUOTAS = ResourceType(
    "ResourceQuota",
    "resourcequotas",
    "resourcequota",
    "",
    "v1",
    namespaced=True,
    short_names=("quota",),
    has_status=True,
    create_status=_cleared,
    merge_keys=dict(_META_KEYS),
)

#: core/v1 PersistentVolumeClaims and PersistentVolumes (observe reads which volume a claim is bound to,
#: and where the volume can be used: ``spec.nodeAffinity``); both have a status subresource
PERSISTENT_VOLUME_CLAIMS = ResourceType(
    "PersistentVolumeClaim",
    "persistentvolumeclaims",
    "persistentvolumeclaim",
    "",
    "v1",
    namespaced=True,
    short_names=("pvc",),
    has_status=True,
    create_status=_pending,
    merge_keys=dict(_META_KEYS),
)
PERSISTENT_VOLUMES = ResourceType(
    "PersistentVolume",
    "persistentvolumes",
    "persistentvolume",
    "",
    "v1",
    namespaced=False,
    short_names=("pv",),
    has_status=True,
    create_status=_volume_pending,
    merge_keys=dict(_META_KEYS),
)

#: core/v1 ConfigMaps (observe reads cluster-autoscaler's priority expander's)
CONFIG_MAPS = ResourceType(
    "ConfigMap",
    "configmaps",
    "configmap",
    "",
    "v1",
    namespaced=True,
    short_names=("cm",),
    merge_keys=dict(_META_KEYS),
)


def _storage_class_defaults(obj: JsonObj) -> JsonObj:
    return {"reclaimPolicy": "Delete", "volumeBindingMode": "Immediate", **obj}


#: storage.k8s.io/v1 StorageClasses (built in, cluster-scoped, no status; observe reads when claims
#: bind, ``volumeBindingMode``, defaulted to ``Immediate``, and ``allowedTopologies``)
STORAGE_CLASSES = ResourceType(
    "StorageClass",
    "storageclasses",
    "storageclass",
    "storage.k8s.io",
    "v1",
    namespaced=False,
    short_names=("sc",),
    merge_keys=dict(_META_KEYS),
    defaults=_storage_class_defaults,
)

#: storage.k8s.io/v1 CSINodes (built in, cluster-scoped, named as their Node, no status): the kubelet
#: writes one per node with an entry per CSI driver registered there (``spec.drivers[]``: ``name``,
#: ``nodeID``, ``topologyKeys``, ``allocatable.count``); observe reads each driver's attach limit.
#: ``spec.drivers`` merges by ``name`` (k8s.io/api storage/v1 CSINodeSpec's patch strategy)
CSI_NODES = ResourceType(
    "CSINode",
    "csinodes",
    "csinode",
    "storage.k8s.io",
    "v1",
    namespaced=False,
    merge_keys={**_META_KEYS, ("spec", "drivers"): "name"},
)


def _not_attached(sent: JsonObj, now: str) -> JsonObj | None:
    """VolumeAttachments: the status a create sends is reset, ``attached`` (no omitempty) false; the
    external attacher writes it through ``/status``."""
    return {"attached": False}


#: storage.k8s.io/v1 VolumeAttachments (built in, cluster-scoped, status a subresource): the attach/detach
#: controller's intent to attach a PersistentVolume (``spec.source.persistentVolumeName``) to a node
#: (``spec.nodeName``) through a CSI driver (``spec.attacher``); its spec may not change
#: (ValidateVolumeAttachmentUpdate). Observe counts the volumes one holds against the node's limit
VOLUME_ATTACHMENTS = ResourceType(
    "VolumeAttachment",
    "volumeattachments",
    "volumeattachment",
    "storage.k8s.io",
    "v1",
    namespaced=False,
    has_status=True,
    create_status=_not_attached,
    merge_keys=dict(_META_KEYS),
    immutable=(("spec",),),
)

#: scheduling.k8s.io/v1 PriorityClasses (built in, cluster-scoped, no status): what the Priority
#: admission plugin resolves a pod's ``priorityClassName`` with (:mod:`.pods`); the API server's own
#: two system classes exist from the start
PRIORITY_CLASSES = ResourceType(
    "PriorityClass",
    "priorityclasses",
    "priorityclass",
    "scheduling.k8s.io",
    "v1",
    namespaced=False,
    short_names=("pc",),
    merge_keys=dict(_META_KEYS),
    defaults=pods.priority_class_defaults,
)

#: batch/v1 Jobs (built in; observe reads ``spec.podFailurePolicy``)
JOBS = ResourceType(
    "Job",
    "jobs",
    "job",
    "batch",
    "v1",
    namespaced=True,
    has_status=True,
    create_status=_cleared,
    merge_keys={
        **_META_KEYS,
        ("spec", "template", "spec", "containers"): "name",
        ("spec", "template", "spec", "initContainers"): "name",
        ("spec", "template", "spec", "containers", "env"): "name",
        ("spec", "template", "spec", "volumes"): "name",
        ("status", "conditions"): "type",
    },
)

# --- optional resources: CRDs of the shared-cluster ecosystem and alpha upstream APIs ----------------

#: scheduler-plugins coscheduling (CRD ``podgroups.scheduling.x-k8s.io``: status subresource; its
#: structural schema validates, prunes and defaults every write, :mod:`.crds`)
COSCHEDULING_PODGROUPS = ResourceType(
    "PodGroup",
    "podgroups",
    "podgroup",
    "scheduling.x-k8s.io",
    "v1alpha1",
    namespaced=True,
    short_names=("pg", "pgs"),
    store_kind="PodGroup.scheduling.x-k8s.io",
    has_status=True,
    create_status=_dropped,
    custom=True,
    optional=True,
    to_internal=functools.partial(crds.pruned, crds.COSCHEDULING_PODGROUP),
    defaults=functools.partial(crds.with_defaults, crds.COSCHEDULING_PODGROUP),
)
#: Volcano (CRD ``podgroups.scheduling.volcano.sh``: ``subresources: {}``, no status subresource; its
#: structural schema validates, prunes and defaults every write, :mod:`.crds`)
VOLCANO_PODGROUPS = ResourceType(
    "PodGroup",
    "podgroups",
    "podgroup",
    "scheduling.volcano.sh",
    "v1beta1",
    namespaced=True,
    short_names=("pg", "podgroup-v1beta1"),
    store_kind="PodGroup.scheduling.volcano.sh",
    custom=True,
    optional=True,
    to_internal=functools.partial(crds.pruned, crds.VOLCANO_PODGROUP),
    defaults=functools.partial(crds.with_defaults, crds.VOLCANO_PODGROUP),
)
#: upstream Kubernetes gang scheduling (built in, alpha: a cluster must enable it)
UPSTREAM_PODGROUPS = ResourceType(
    "PodGroup",
    "podgroups",
    "podgroup",
    "scheduling.k8s.io",
    "v1alpha2",
    namespaced=True,
    store_kind="PodGroup.scheduling.k8s.io",
    has_status=True,
    create_status=_cleared,
    optional=True,
    merge_keys={**_META_KEYS, ("status", "conditions"): "type"},
)
WORKLOADS = ResourceType(
    "Workload",
    "workloads",
    "workload",
    "scheduling.k8s.io",
    "v1alpha1",
    namespaced=True,
    store_kind="Workload.scheduling.k8s.io",
    optional=True,
    merge_keys={**_META_KEYS, ("spec", "podGroups"): "name"},
)
#: sig-autoscaling granular resource limits (CRD ``capacityquotas.autoscaling.x-k8s.io``, cluster-scoped)
CAPACITY_QUOTAS = ResourceType(
    "CapacityQuota",
    "capacityquotas",
    "capacityquota",
    "autoscaling.x-k8s.io",
    "v1beta1",
    namespaced=False,
    store_kind="CapacityQuota.autoscaling.x-k8s.io",
    has_status=True,
    create_status=_dropped,
    custom=True,
    optional=True,
    to_internal=functools.partial(crds.pruned, crds.CAPACITY_QUOTA),
    defaults=functools.partial(crds.with_defaults, crds.CAPACITY_QUOTA),
)


def _older_crd(current: ResourceType, version: str, schema: str, release: str = "") -> ResourceType:
    """The CRD of ``current``'s kind as an older release published it, serving ``version`` alone with
    its own ``schema`` (a :mod:`.crds` kind): an alternative, installed only by its full name
    (``<plural>.<group>/<version>``, ``+<release>`` after it where two releases of one version
    differ) in place of ``current``."""
    return dataclasses.replace(
        current,
        version=version,
        store_kind=schema,
        alternative=True,
        release=release,
        to_internal=functools.partial(crds.pruned, schema),
        defaults=functools.partial(crds.with_defaults, schema),
    )


#: the CapacityQuota CRD as cluster-autoscaler first published it (v1alpha1 alone, a status with no
#: field): installed only as ``capacityquotas.autoscaling.x-k8s.io/v1alpha1``, in place of CAPACITY_QUOTAS
CAPACITY_QUOTAS_V1ALPHA1 = _older_crd(CAPACITY_QUOTAS, "v1alpha1", crds.CAPACITY_QUOTA_V1ALPHA1)
#: the CapacityQuota CRD as cluster-autoscaler published it later, still v1alpha1 alone, its status with
#: ``used`` and ``conditions`` (the version its own quota controller writes status.used through):
#: installed only as ``capacityquotas.autoscaling.x-k8s.io/v1alpha1+status``, in place of CAPACITY_QUOTAS
CAPACITY_QUOTAS_V1ALPHA1_STATUS = _older_crd(
    CAPACITY_QUOTAS, "v1alpha1", crds.CAPACITY_QUOTA_V1ALPHA1_STATUS, release="status"
)


def _stored(store_kind: str, obj: JsonObj, api_version: str) -> JsonObj:
    """A custom resource (its CRD's ``store_kind``) as the server decodes a write of it: pruned to what
    its CRD's structural schema declares (:func:`crds.pruned`), in the storage version ``api_version`` (the CRD converts with
    strategy ``None``: the apiVersion alone changes)."""
    stored = crds.pruned(store_kind, obj)
    if "apiVersion" in stored:
        stored["apiVersion"] = api_version
    return stored


def _provreq_stored(obj: JsonObj) -> JsonObj:
    """A ProvisioningRequest written through v1 or v1beta1 (one schema), stored as v1."""
    return _stored(crds.PROVISIONING_REQUEST, obj, PROVISIONING_REQUESTS.api_version)


def _provreq_v1beta1(obj: JsonObj) -> JsonObj:
    return {**obj, "apiVersion": PROVISIONING_REQUESTS_SERVED_V1BETA1.api_version}


#: cluster-autoscaler's ProvisioningRequest (CRD; ``spec.provisioningClassName``, ``spec.podSets`` and
#: ``spec.parameters`` carry the rule ``self == oldSelf``: immutable; its schema is :mod:`.crds`). As
#: kubernetes/autoscaler publishes it today (cluster-autoscaler/apis/config/crd/
#: autoscaling.x-k8s.io_provisioningrequests.yaml) it serves v1, the storage version, and v1beta1,
#: ``deprecated: true`` with its own ``deprecationWarning``, one schema, ``/status`` on both:
#: PROVISIONING_REQUESTS_SERVED_V1BETA1, over the same objects
PROVISIONING_REQUESTS = ResourceType(
    "ProvisioningRequest",
    "provisioningrequests",
    "provisioningrequest",
    "autoscaling.x-k8s.io",
    "v1",
    namespaced=True,
    short_names=("provreq", "provreqs"),
    store_kind="ProvisioningRequest.autoscaling.x-k8s.io",
    has_status=True,
    create_status=_dropped,
    custom=True,
    optional=True,
    immutable=(("spec", "provisioningClassName"), ("spec", "podSets"), ("spec", "parameters")),
    to_internal=_provreq_stored,
    defaults=functools.partial(crds.with_defaults, crds.PROVISIONING_REQUEST),
)
PROVISIONING_REQUESTS_SERVED_V1BETA1 = dataclasses.replace(
    PROVISIONING_REQUESTS,
    version="v1beta1",
    to_external=_provreq_v1beta1,
    deprecation="autoscaling.k8s.io/v1beta1 API is deprecated",  # the CRD's deprecationWarning, verbatim
)
#: the ProvisioningRequest CRD as cluster-autoscaler published it before v1 (v1beta1 alone, v1's schema:
#: :mod:`.crds`): installed only as ``provisioningrequests.autoscaling.x-k8s.io/v1beta1``, in place of
#: PROVISIONING_REQUESTS
PROVISIONING_REQUESTS_V1BETA1 = _older_crd(
    PROVISIONING_REQUESTS, "v1beta1", crds.PROVISIONING_REQUEST_V1BETA1
)


def _buffer_stored(obj: JsonObj) -> JsonObj:
    """A CapacityBuffer written through any served version, stored in the storage version."""
    return _stored(crds.CAPACITY_BUFFER, obj, CAPACITY_BUFFERS.api_version)


def _buffer_v1alpha1(obj: JsonObj) -> JsonObj:
    return {**obj, "apiVersion": CAPACITY_BUFFERS_V1ALPHA1.api_version}


def deprecation_warning(group: str, version: str, kind: str, instead: str) -> str:
    """The warning a CRD's deprecated version answers with when it sets no ``deprecationWarning`` of
    its own: it names the newest served version of equal or greater stability (apiextensions v1
    CustomResourceDefinitionVersion.deprecationWarning)."""
    return f"{group}/{version} {kind} is deprecated; use {group}/{instead} {kind}"


#: sig-autoscaling CapacityBuffer (CRD ``capacitybuffers.autoscaling.x-k8s.io``). As kubernetes/autoscaler
#: publishes it (cluster-autoscaler/apis/config/crd/autoscaling.x-k8s.io_capacitybuffers.yaml) it serves
#: v1beta1, the storage version, and v1alpha1, ``deprecated: true``, with one schema and conversion
#: ``None``: both versions over the same objects
CAPACITY_BUFFERS = ResourceType(
    "CapacityBuffer",
    "capacitybuffers",
    "capacitybuffer",
    "autoscaling.x-k8s.io",
    "v1beta1",
    namespaced=True,
    short_names=("cb",),
    store_kind="CapacityBuffer.autoscaling.x-k8s.io",
    has_status=True,
    create_status=_dropped,
    custom=True,
    optional=True,
    to_internal=_buffer_stored,
    defaults=functools.partial(crds.with_defaults, crds.CAPACITY_BUFFER),
)
CAPACITY_BUFFERS_V1ALPHA1 = dataclasses.replace(
    CAPACITY_BUFFERS,
    version="v1alpha1",
    to_external=_buffer_v1alpha1,
    deprecation=deprecation_warning("autoscaling.x-k8s.io", "v1alpha1", "CapacityBuffer", "v1beta1"),
)


#: Argo Rollouts' Rollout (CRD ``rollouts.argoproj.io``): a custom kind with a scale subresource
#: (``specReplicasPath: .spec.replicas``, ``statusReplicasPath: .status.HPAReplicas``,
#: ``labelSelectorPath: .status.selector``), which a CapacityBuffer's ``scalableRef`` may name
ROLLOUTS = ResourceType(
    "Rollout",
    "rollouts",
    "rollout",
    "argoproj.io",
    "v1alpha1",
    namespaced=True,
    short_names=("ro",),
    store_kind="Rollout.argoproj.io",
    has_status=True,
    create_status=_dropped,
    custom=True,
    optional=True,
    scale=(".spec.replicas", ".status.HPAReplicas", ".status.selector"),
)

# --- a CRD's scale subresource (apiextensions-apiserver pkg/registry/customresource/etcd.go ScaleREST,
# scaleFromCustomResource, scaleUpdatedObjectInfo; validator.go ValidateScaleSpec/ValidateScaleStatus)

#: ``invalidSpecReplicas`` (the smallest int32): the spec replicas of the Scale an update starts from
#: when the custom resource holds no value at its spec replicas path
MISSING_REPLICAS = -(2**31)
_MAX_INT32 = 2**31 - 1
_GO_TYPES = {str: "string", bool: "bool", int: "int64", float: "float64", list: "[]interface {}"}


class ScaleFieldError(ValueError):
    """``unstructured.NestedInt64``/``NestedString`` failing: a value (or a parent) of another type."""


def _go_type(value: Any) -> str:
    if value is None:
        return "<nil>"
    return _GO_TYPES.get(type(value), "map[string]interface {}")


def _nested(obj: JsonObj, path: str, want: type) -> tuple[Any, bool]:
    """The value at a scale path (``.spec.replicas``) and whether it is there, as ``NestedInt64`` (``want``
    int) or ``NestedString`` read it; :class:`ScaleFieldError` worded as their accessor errors."""
    fields = path.lstrip(".").split(".")
    found: Any = obj
    for i, part in enumerate(fields):
        if not isinstance(found, dict):
            where = "." + ".".join(fields[: i + 1])
            raise ScaleFieldError(
                f"{where} accessor error: {found} is of the type {_go_type(found)}, "
                "expected map[string]interface{}"
            )
        if part not in found:
            return None, False
        found = found[part]
    if not isinstance(found, want) or isinstance(found, bool):
        expected = "int64" if want is int else "string"
        raise ScaleFieldError(
            f"{path} accessor error: {found} is of the type {_go_type(found)}, expected {expected}"
        )
    return found, True


def scale_of(rt: ResourceType, obj: JsonObj, *, missing: int | None = None) -> JsonObj:
    """The ``autoscaling/v1`` Scale the API server makes of a custom resource: its replicas at the
    status path (0 when absent), the string at the label selector path ("" when absent or none), the
    replicas at the spec path. A GET (``missing`` None) of an object with no spec replicas fails: 500
    "the spec replicas field ... does not exist" (the CRD API documents that ``specReplicasPath`` must
    hold a value); an update starts from ``missing`` instead. A value of another type is a 500 too."""
    assert rt.scale is not None
    spec_path, status_path, selector_path = rt.scale
    try:
        spec, found = _nested(obj, spec_path, int)
        status, _ = _nested(obj, status_path, int)
        selector = _nested(obj, selector_path, str)[0] if selector_path else ""
    except ScaleFieldError as exc:  # not an API status: ErrorToAPIStatus answers 500 of reason Unknown
        raise KubeApiError(500, str(exc), reason="Unknown") from None
    if not found and missing is None:
        raise KubeApiError(
            500, f'Internal error occurred: the spec replicas field "{spec_path}" does not exist'
        )
    meta = obj.get("metadata") or {}
    kept = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {k: meta[k] for k in kept if k in meta},
        "spec": {"replicas": spec if found else missing},
        "status": {"replicas": status or 0, "selector": selector or ""},
    }


def scale_replicas(rt: ResourceType, scale: Any) -> int:
    """The ``spec.replicas`` of a Scale sent to (or patched through) ``<plural>/scale``, as the handler
    decodes it (absent: 0, Go's zero value); 400 when it is no Scale or the value no int32, and when it
    is still :data:`MISSING_REPLICAS` (the object had none and the write gave none)."""
    assert rt.scale is not None
    if not isinstance(scale, dict):
        raise bad_request("the request body must be a JSON object")
    for key, wanted in (("apiVersion", "autoscaling/v1"), ("kind", "Scale")):
        if scale.get(key) and scale[key] != wanted:
            raise bad_request(
                f"the {key} in the data ({scale[key]}) does not match the expected {key} ({wanted})"
            )
    spec = scale.get("spec") or {}
    replicas = spec.get("replicas", 0) if isinstance(spec, dict) else spec
    if (
        not isinstance(replicas, int)
        or isinstance(replicas, bool)
        or not MISSING_REPLICAS <= replicas <= _MAX_INT32
    ):
        raise bad_request(
            f'Scale in version "v1" cannot be handled as a Scale: spec.replicas: {json.dumps(replicas)} is '
            "not an int32"
        )
    if replicas == MISSING_REPLICAS:
        raise bad_request(f'the spec replicas field "{rt.scale[0]}" cannot be empty')
    return replicas


def scale_problems(rt: ResourceType, obj: JsonObj) -> list[FieldError]:
    """``ValidateScaleSpec`` and ``ValidateScaleStatus``: every write of a custom resource with a scale
    subresource keeps its replicas (when set) an int in [0, 2^31-1] and its label selector a string."""
    if rt.scale is None or not rt.custom:
        return []
    found = []
    for path, want in zip(rt.scale, (int, int, str), strict=True):
        if not path:
            continue
        try:
            value, _ = _nested(obj, path, want)
        except ScaleFieldError as exc:
            zero = "0" if want is int else '""'  # the value NestedInt64/NestedString return with the error
            found.append(FieldError(path, f"Invalid value: {zero}: {exc}"))
            continue
        if want is int and value is not None and value < 0:
            found.append(FieldError(path, f"Invalid value: {value}: should be a non-negative integer"))
        elif want is int and value is not None and value > _MAX_INT32:
            found.append(
                FieldError(path, f"Invalid value: {value}: should be less than or equal to {_MAX_INT32}")
            )
    return found


def _zero_status(
    fields: tuple[str, ...],
) -> tuple[Callable[[JsonObj, str], JsonObj | None], Callable[[JsonObj], JsonObj]]:
    """A workload's status as its Go type serialises it: the fields without ``omitempty`` are always
    written, 0 until its controller counts something (staging/src/k8s.io/api/apps/v1/types.go
    ``ReplicaSetStatus.replicas``, ``StatefulSetStatus.replicas`` and ``availableReplicas``, the four
    ``DaemonSetStatus`` counts; core/v1 ``ReplicationControllerStatus.replicas``). The strategy's
    PrepareForCreate resets a created object's status to that zero value; every stored status keeps
    those fields (as ``rt.defaults``)."""

    def created(sent: JsonObj, now: str) -> JsonObj | None:
        return dict.fromkeys(fields, 0)

    def defaults(obj: JsonObj) -> JsonObj:
        status = obj.get("status")
        if not fields or not isinstance(status, dict | None) or all(f in (status or {}) for f in fields):
            return obj
        return {**obj, "status": {**dict.fromkeys(fields, 0), **(status or {})}}

    return created, defaults


def _apps(kind: str, plural: str, short: str, counts: tuple[str, ...] = ()) -> ResourceType:
    """An ``apps/v1`` workload (served by every cluster): CapacityBuffers' ``scalableRef`` names one, and
    observe reads DaemonSets. ``counts``: its status fields never omitted (:func:`_zero_status`)."""
    created, defaults = _zero_status(counts)
    return ResourceType(
        kind,
        plural,
        kind.lower(),
        "apps",
        "v1",
        namespaced=True,
        short_names=(short,),
        has_status=True,
        create_status=created,
        defaults=defaults,
        merge_keys={
            **_META_KEYS,
            ("spec", "template", "spec", "containers"): "name",
            ("status", "conditions"): "type",
        },
    )


DEPLOYMENTS = _apps("Deployment", "deployments", "deploy")
STATEFULSETS = _apps("StatefulSet", "statefulsets", "sts", ("replicas", "availableReplicas"))
REPLICASETS = _apps("ReplicaSet", "replicasets", "rs", ("replicas",))
DAEMONSETS = _apps(
    "DaemonSet",
    "daemonsets",
    "ds",
    ("currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady"),
)
_RC_CREATED, _RC_DEFAULTS = _zero_status(("replicas",))
#: core/v1 ReplicationController (a CapacityBuffer's ``scalableRef`` may name one too)
REPLICATION_CONTROLLERS = ResourceType(
    "ReplicationController",
    "replicationcontrollers",
    "replicationcontroller",
    "",
    "v1",
    namespaced=True,
    short_names=("rc",),
    has_status=True,
    create_status=_RC_CREATED,
    defaults=_RC_DEFAULTS,
    merge_keys={
        **_META_KEYS,
        ("spec", "template", "spec", "containers"): "name",
        ("status", "conditions"): "type",
    },
)

#: Kubeflow training operator v1 (CRDs ``pytorchjobs.kubeflow.org``, ``paddlejobs.kubeflow.org``:
#: status subresource; their structural schemas validate, prune and default every write, and
#: ``runPolicy.schedulingPolicy.queue`` carries ``self == oldSelf``, :mod:`.crds`); observe reads
#: ``spec.elasticPolicy`` and the Worker replicas. Both declare a scale subresource over their Worker
#: replicas (the ``+kubebuilder:subresource:scale`` markers of pkg/apis/kubeflow.org/v1/pytorch_types.go
#: and paddlepaddle_types.go; ``subresources.scale`` of manifests/base/crds/kubeflow.org_pytorchjobs.yaml
#: at c20bf65e03b8 and kubeflow.org_paddlejobs.yaml at 7cc5d04bab51), which the elastic jobs' HPA scales
#: and the disruption controller reads for a budget over their pods
PYTORCH_JOBS = ResourceType(
    "PyTorchJob",
    "pytorchjobs",
    "pytorchjob",
    "kubeflow.org",
    "v1",
    namespaced=True,
    store_kind="PyTorchJob.kubeflow.org",
    has_status=True,
    create_status=_dropped,
    custom=True,
    optional=True,
    immutable=(crds.QUEUE_PATH,),
    to_internal=functools.partial(crds.pruned, crds.PYTORCH_JOB),
    defaults=functools.partial(crds.with_defaults, crds.PYTORCH_JOB),
    scale=(
        ".spec.pytorchReplicaSpecs.Worker.replicas",
        ".status.replicaStatuses.Worker.active",
        ".status.replicaStatuses.Worker.selector",
    ),
)
PADDLE_JOBS = ResourceType(
    "PaddleJob",
    "paddlejobs",
    "paddlejob",
    "kubeflow.org",
    "v1",
    namespaced=True,
    store_kind="PaddleJob.kubeflow.org",
    has_status=True,
    create_status=_dropped,
    custom=True,
    optional=True,
    immutable=(crds.QUEUE_PATH,),
    to_internal=functools.partial(crds.pruned, crds.PADDLE_JOB),
    defaults=functools.partial(crds.with_defaults, crds.PADDLE_JOB),
    scale=(
        ".spec.paddleReplicaSpecs.Worker.replicas",
        ".status.replicaStatuses.Worker.active",
        ".status.replicaStatuses.Worker.selector",
    ),
)


def _kubeflow_job(kind: str, store_kind: str) -> ResourceType:
    """A training operator kind observe reads only for its replica types' restart rules (TFJob, XGBoostJob,
    JAXJob: spillway.model.jobs), served as its published CRD is (:mod:`.crds`): status subresource,
    pruned and defaulted by its schema, the queue immutable; no scale subresource."""
    plural = kind.lower() + "s"
    return ResourceType(
        kind,
        plural,
        kind.lower(),
        "kubeflow.org",
        "v1",
        namespaced=True,
        store_kind=store_kind,
        has_status=True,
        create_status=_dropped,
        custom=True,
        optional=True,
        immutable=(crds.QUEUE_PATH,),
        to_internal=functools.partial(crds.pruned, store_kind),
        defaults=functools.partial(crds.with_defaults, store_kind),
    )


TF_JOBS = _kubeflow_job("TFJob", crds.TF_JOB)
XGBOOST_JOBS = _kubeflow_job("XGBoostJob", crds.XGBOOST_JOB)
JAX_JOBS = _kubeflow_job("JAXJob", crds.JAX_JOB)
#: kubeflow/mpi-operator's MPIJob (CRD ``mpijobs.kubeflow.org``, served and stored at ``v2beta1`` only;
#: no short names; status subresource, no scale subresource, no CEL rule: :mod:`.crds`); observe reads
#: whether it finished (``status.conditions``)
MPI_JOBS = ResourceType(
    "MPIJob",
    "mpijobs",
    "mpijob",
    "kubeflow.org",
    "v2beta1",
    namespaced=True,
    store_kind=crds.MPI_JOB,
    has_status=True,
    create_status=_dropped,
    custom=True,
    optional=True,
    to_internal=functools.partial(crds.pruned, crds.MPI_JOB),
    defaults=functools.partial(crds.with_defaults, crds.MPI_JOB),
)
#: the training operator's MPIJob (kubeflow.org/v1), the CRD a cluster without kubeflow/mpi-operator's has
#: under the same name: installed only as ``mpijobs.kubeflow.org/v1``, in place of MPI_JOBS
MPI_JOBS_V1 = dataclasses.replace(_kubeflow_job("MPIJob", crds.MPI_JOB_V1), alternative=True)

ALL: tuple[ResourceType, ...] = (
    NODES,
    PODS,
    PDBS,
    EVENTS,
    EVENTS_V1,
    NAMESPACES,
    POD_TEMPLATES,
    RESOURCE_QUOTAS,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    STORAGE_CLASSES,
    CSI_NODES,
    VOLUME_ATTACHMENTS,
    PRIORITY_CLASSES,
    CONFIG_MAPS,
    JOBS,
    COSCHEDULING_PODGROUPS,
    VOLCANO_PODGROUPS,
    UPSTREAM_PODGROUPS,
    WORKLOADS,
    CAPACITY_QUOTAS,
    CAPACITY_QUOTAS_V1ALPHA1,
    CAPACITY_QUOTAS_V1ALPHA1_STATUS,
    PROVISIONING_REQUESTS,
    PROVISIONING_REQUESTS_V1BETA1,
    PROVISIONING_REQUESTS_SERVED_V1BETA1,
    PYTORCH_JOBS,
    PADDLE_JOBS,
    TF_JOBS,
    XGBOOST_JOBS,
    JAX_JOBS,
    MPI_JOBS,
    MPI_JOBS_V1,
    CAPACITY_BUFFERS,
    CAPACITY_BUFFERS_V1ALPHA1,
    ROLLOUTS,
    DEPLOYMENTS,
    STATEFULSETS,
    REPLICASETS,
    DAEMONSETS,
    REPLICATION_CONTROLLERS,
)
BY_STORE_KIND: dict[str, ResourceType] = {rt.canonical: rt for rt in ALL if rt.identity}
#: qualified names (``podgroups.scheduling.volcano.sh``) of the resources served only when installed
OPTIONAL: tuple[str, ...] = tuple(
    dict.fromkeys(rt.qualified for rt in ALL if rt.optional and not rt.alternative)
)
#: install names (``mpijobs.kubeflow.org/v1``) of the CRDs served only when named, each instead of the
#: one of the same qualified name in OPTIONAL
ALTERNATIVES: tuple[str, ...] = tuple(rt.install_name for rt in ALL if rt.alternative)
_BY_PATH: dict[tuple[str, str], list[ResourceType]] = {}
for _rt in ALL:
    _BY_PATH.setdefault((_rt.api_version, _rt.plural), []).append(_rt)


def _the_served(found: Sequence[ResourceType], installed: frozenset[str] | None) -> ResourceType | None:
    """Of the resources of one path (two releases of one CRD version), the one served, else the first."""
    return next((rt for rt in found if served(rt, installed)), found[0] if found else None)


def by_path(group_version: str, plural: str, installed: frozenset[str] | None = None) -> ResourceType | None:
    return _the_served(_BY_PATH.get((group_version, plural), ()), installed)


def by_api_version(
    api_version: str, kind: str, installed: frozenset[str] | None = None
) -> ResourceType | None:
    return _the_served([rt for rt in ALL if rt.api_version == api_version and rt.kind == kind], installed)


def resolve_kind(name: str) -> ResourceType:
    """The store resource for a kind (``Pod``), plural (``pods``) or short name (``po``), any case;
    ``<kind or plural>.<group>`` (``podgroups.scheduling.volcano.sh``) picks one of several kinds that
    share a name; an alternative CRD (:data:`ALTERNATIVES`) is named by its install name
    (``capacityquotas.autoscaling.x-k8s.io/v1alpha1``), never by a name the default one has."""
    wanted = name.lower()
    found = []
    for rt in BY_STORE_KIND.values():
        if rt.alternative:
            if wanted == rt.install_name:
                return rt
            continue
        names = (rt.kind.lower(), rt.plural, rt.singular, *rt.short_names)
        qualified = {f"{n}.{rt.group}" for n in names[:3]} if rt.group else set()
        if wanted in qualified:
            return rt
        if wanted in names:
            found.append(rt)
    if len(found) == 1:
        return found[0]
    if found:
        options = ", ".join(rt.qualified for rt in found)
        raise KeyError(f"kind {name!r} is ambiguous: name its group ({options})")
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


def served(rt: ResourceType, installed: frozenset[str] | None = None) -> bool:
    """Whether ``rt`` is served: always unless optional, then when named in ``installed`` (all but the
    alternatives when ``None``)."""
    if not rt.optional:
        return True
    return not rt.alternative if installed is None else rt.install_name in installed


def resource_list(group_version: str, installed: frozenset[str] | None = None) -> JsonObj | None:
    """``APIResourceList`` for ``/api/v1`` or ``/apis/<group>/<version>``."""
    resources: list[JsonObj] = []
    for rt in ALL:
        if rt.api_version != group_version or not served(rt, installed):
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
        subresources = SUBRESOURCES.get((group_version, rt.plural))
        if subresources is None and rt.has_status:
            subresources = [
                {"name": f"{rt.plural}/status", "kind": rt.kind, "verbs": ["get", "patch", "update"]}
            ]
        if rt.scale is not None:
            scale = {"name": f"{rt.plural}/scale", "group": "autoscaling", "version": "v1", "kind": "Scale"}
            subresources = [*(subresources or []), {**scale, "verbs": ["get", "patch", "update"]}]
        for sub in subresources or []:
            resources.append({"singularName": "", "namespaced": rt.namespaced, **sub})
    if not resources:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int]:
    """Sort key (highest first) of Kubernetes versions: GA before beta before alpha, then by number."""
    match = _VERSION.match(version)
    if match is None:
        return (0, 0, 0)
    level = {"alpha": 1, "beta": 2}.get(match.group(2) or "", 3)
    return (level, int(match.group(1)), int(match.group(3) or 0))


def api_groups(installed: frozenset[str] | None = None) -> list[JsonObj]:
    """The ``APIGroupList`` entries: each group with its served versions, preferred (highest) first."""
    versions: dict[str, list[str]] = {}
    for rt in ALL:
        if rt.group and served(rt, installed) and rt.version not in versions.setdefault(rt.group, []):
            versions[rt.group].append(rt.version)
    groups = []
    for name, found in versions.items():
        ordered = sorted(found, key=version_priority, reverse=True)
        gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in ordered]
        groups.append({"name": name, "versions": gvs, "preferredVersion": gvs[0]})
    return groups


def api_group(name: str, installed: frozenset[str] | None = None) -> JsonObj | None:
    for group in api_groups(installed):
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
