"""The validation, pruning and defaults of the CRDs the emulator serves, as a real API server applies
their published schemas and CEL rules: the sig-autoscaling ones (kubernetes/autoscaler
``cluster-autoscaler/apis/config/crd/*.yaml``, generated from the kubebuilder markers of
``cluster-autoscaler/apis``), both PodGroups, the training operator's Kubeflow jobs and
kubeflow/mpi-operator's MPIJob.

One mechanism serves every kind: its CRD's ``openAPIV3Schema`` written once as data (only what
validation, pruning and defaulting read; descriptions are left out), walked by :func:`conforms` (type,
``required``, ``properties``, ``additionalProperties``, ``maxProperties``, ``items``, ``minItems``,
``maxItems``, ``x-kubernetes-list-type: map``, ``minLength``, ``maxLength``, ``pattern``, ``enum``,
``format: date-time``, ``minimum``), then the kind's CEL rules (``x-kubernetes-validations``), a small
function each. The schemas are structural and set no ``x-kubernetes-preserve-unknown-fields`` (but on
``metadata``, which the server keeps as ObjectMeta, and, a difference from the published CRDs, deep in
the Kubeflow jobs' pod templates), so every write is pruned of what they do not
declare (:func:`pruned`; a whole float at an ``integer`` field is kept as the integer, as the server
takes and stores JSON ``1.0``) and given their ``default`` s (:func:`with_defaults`), on every write and on
``add()`` alike. The whole object is validated, status included, so a ``/status`` write too.

* ProvisioningRequest ``v1`` (:data:`PROVISIONING_REQUEST_SCHEMA`): ``spec.provisioningClassName`` (a DNS
  subdomain of at most 253 characters) and ``spec.podSets`` (1 to 32 items, each a ``podTemplateRef``
  whose ``name`` is a DNS subdomain and a ``count`` of at least 1) required; ``spec.parameters`` at most
  100 strings of at most 255 characters; ``status.conditions`` ``metav1.Condition`` s in a list keyed by
  ``type``; ``status.provisioningClassDetails`` at most 64 strings of at most 32768 characters. Its CEL
  rules are the transition rules ``self == oldSelf`` on ``provisioningClassName``, ``podSets`` and
  ``parameters``: the kind's ``immutable`` in ``resources``, checked by the store.
* CapacityQuota ``v1beta1`` (:data:`CAPACITY_QUOTA_SCHEMA`, from ``capacityquota_types.go``):
  ``spec.limits.resources`` required, at most 20 quantities; ``spec.selector`` a ``metav1.LabelSelector``;
  ``status.used.resources``, ``status.conditions``, ``status.observedGeneration``. CEL: the names at most
  63 characters, each quantity a non-negative integer. The rule reads ``quantity(v).isInteger()``, which
  holds only when the API server's parser keeps the value as an exact int64 at scale 0: ``32Gi``,
  ``2k``, ``1.5k`` and ``10`` are integers, ``500m``, ``1000m`` (any milli value), ``0.3``, ``2.0`` and
  ``3.67Gi`` are not (:func:`integer_quantity`).
* CapacityBuffer ``v1beta1`` and the deprecated ``v1alpha1`` (one schema, :data:`BUFFER_SCHEMA`):
  ``replicas`` and ``percentage`` integers >= 0, the refs' names (and ``scalableRef.kind``) non-empty,
  ``limits`` quantities (a sign allowed), ``provisioningStrategy`` defaulted to
  ``buffer.x-k8s.io/active-capacity``; ``status.podTemplateRef.name`` required. CEL: a
  ``podTemplateRef`` needs ``replicas`` or ``limits``; not both ``podTemplateRef`` and ``scalableRef``
  (v1alpha1 keeps the message the rule had before v1beta1 corrected it).

* PodGroup ``scheduling.volcano.sh/v1beta1`` (:data:`VOLCANO_PODGROUP_SCHEMA`) and
  ``scheduling.x-k8s.io/v1alpha1`` (:data:`COSCHEDULING_PODGROUP_SCHEMA`), from volcano-sh/volcano's and
  kubernetes-sigs/scheduler-plugins' published CRDs: no CEL rules, no ``spec`` required.
* PyTorchJob, PaddleJob, TFJob, XGBoostJob and JAXJob ``kubeflow.org/v1`` (:data:`PYTORCH_JOB_SCHEMA`,
  :data:`PADDLE_JOB_SCHEMA`, :data:`TF_JOB_SCHEMA`, ...), from the training operator's published CRDs: ``spec`` not required, its replica specs are; one CEL
  rule, ``self == oldSelf`` on ``spec.runPolicy.schedulingPolicy.queue`` (the store's ``immutable``,
  with the rule's own message); the embedded pod template served compactly, as the comment above the
  schemas says.
* MPIJob ``kubeflow.org/v2beta1`` (:data:`MPI_JOB_SCHEMA`), from kubeflow/mpi-operator's published CRD:
  ``spec.mpiReplicaSpecs`` required (the same replica specs), the same ``runPolicy``, schema defaults for
  ``slotsPerWorker``, ``runLauncherAsWorker``, ``sshAuthMountPath``, ``launcherCreationPolicy`` and
  ``mpiImplementation`` (an enum); its conditions a list keyed by ``type``, ``status`` an enum; no CEL rules.

Each check answers every problem it finds, as :class:`~.status.FieldError` s worded as the API server
words them, in the order kube-openapi's validators find them (at one value, a wrong type is the only
error; a string gets at most one of ``maxLength``, ``minLength`` and ``pattern``, then its format's and
its enum's; an object over ``maxProperties`` no other): the store answers them all in one 422. As
apiextensions-apiserver's custom resource strategy (``pkg/registry/customresource/strategy.go``) does,
a kind's CEL rules run only when the schema found no blocking error (a wrong type, a required field
missing, a value not in the enum, too long, too many); after one, a last error says that they did not.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from spillway.local.kubeapi.status import REQUIRED, TYPE_INVALID, FieldError

JsonObj = dict[str, Any]
Problem = FieldError
Schema = Mapping[str, Any]

PROVISIONING_REQUEST = "ProvisioningRequest.autoscaling.x-k8s.io"
# cluster-autoscaler's CRD of the same name before v1 came, serving v1beta1 alone
PROVISIONING_REQUEST_V1BETA1 = "ProvisioningRequest.autoscaling.x-k8s.io/v1beta1"
CAPACITY_QUOTA = "CapacityQuota.autoscaling.x-k8s.io"
# cluster-autoscaler's first CRD of the same name, serving v1alpha1 alone
CAPACITY_QUOTA_V1ALPHA1 = "CapacityQuota.autoscaling.x-k8s.io/v1alpha1"
# its later release, still v1alpha1 alone, whose status declares used and conditions
CAPACITY_QUOTA_V1ALPHA1_STATUS = "CapacityQuota.autoscaling.x-k8s.io/v1alpha1+status"
CAPACITY_BUFFER = "CapacityBuffer.autoscaling.x-k8s.io"
VOLCANO_PODGROUP = "PodGroup.scheduling.volcano.sh"
COSCHEDULING_PODGROUP = "PodGroup.scheduling.x-k8s.io"
PYTORCH_JOB = "PyTorchJob.kubeflow.org"
PADDLE_JOB = "PaddleJob.kubeflow.org"
TF_JOB = "TFJob.kubeflow.org"
XGBOOST_JOB = "XGBoostJob.kubeflow.org"
JAX_JOB = "JAXJob.kubeflow.org"
MPI_JOB = "MPIJob.kubeflow.org"
MPI_JOB_V1 = "MPIJob.kubeflow.org/v1"  # the training operator's: another CRD of the same name
ACTIVE_CAPACITY = "buffer.x-k8s.io/active-capacity"
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
REASON_PATTERN = "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)


def json_type(value: Any, *, integers: bool = True) -> str:
    """The JSON type of a decoded value, as the API server's errors name it: an OpenAPI schema error
    tells ``integer`` from ``number``; a CEL rule's error says ``number`` for both (``integers``
    False)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) and integers:
        return "integer"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return "null" if value is None else "string"


def _shown(value: Any) -> str:
    """How a schema error shows the value it refuses: a string quoted, a number as is."""
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return f'"{json_type(value)}"'


def _wrong_type(field: str, value: Any, wanted: str) -> Problem:
    """kube-openapi's InvalidTypeCode, which the API server reports as ``field.TypeInvalid``."""
    found = json_type(value)
    return FieldError(
        field, f'Invalid value: "{found}": {field} in body must be of type {wanted}: "{found}"', TYPE_INVALID
    )


def _cel(field: str, message: str) -> Problem:
    """A CEL rule on an object refusing it: the server shows the JSON type, not the value."""
    return FieldError(field, f'Invalid value: "object": {message}')


#: what the strategy adds when a blocking schema error kept the CEL rules from running
#: (``field.Invalid(nil, nil, ...)``: no path, a null value)
CEL_NOT_RUN = FieldError(
    "<nil>",
    'Invalid value: "null": some validation rules were not checked because the object was invalid; '
    "correct the existing errors to complete validation",
)
#: ``hasBlockingErr``: the types of schema errors after which the CEL rules are not run
_BLOCKING = frozenset(
    {"FieldValueNotSupported", REQUIRED, "FieldValueTooLong", "FieldValueTooMany", TYPE_INVALID}
)


# --- the structural schema walker ------------------------------------------------------------------


def _at(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key


def _of_type(value: Any, wanted: str) -> bool:
    if wanted == "int-or-string":  # the CRD's anyOf [integer, string] with x-kubernetes-int-or-string
        return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
    if wanted == "number":
        return json_type(value) in ("integer", "number")
    return json_type(value) == wanted


def conforms(field: str, value: Any, schema: Schema) -> list[Problem]:
    """Every way ``value`` (at ``field``, "" for the object itself) breaks ``schema``, worded as the
    API server's schema validation words it; empty when it keeps it."""
    wanted = str(schema.get("type", ""))
    if wanted and not _of_type(value, wanted):
        return [_wrong_type(field, value, "integer,string" if wanted == "int-or-string" else wanted)]
    if isinstance(value, dict):
        return _object_conforms(field, value, schema)
    if isinstance(value, list):
        return _array_conforms(field, value, schema)
    if isinstance(value, str):
        return _string_conforms(field, value, schema)
    minimum = schema.get("minimum")
    if isinstance(value, (int, float)) and minimum is not None and value < minimum:
        message = f"Invalid value: {value}: {field} in body should be greater than or equal to {minimum}"
        return [FieldError(field, message)]
    return []


def _object_conforms(field: str, value: JsonObj, schema: Schema) -> list[Problem]:
    """``maxProperties`` first (kube-openapi's object validator stops there), then every ``required``
    key missing, then each declared (or ``additionalProperties``) value's problems."""
    most = schema.get("maxProperties")
    if most is not None and len(value) > most:
        return [FieldError(field, f"Too many: {len(value)}: must have at most {most} items")]
    found = [
        FieldError(_at(field, key), "Required value")
        for key in schema.get("required", ())
        if key not in value
    ]
    properties: Mapping[str, Schema] = schema.get("properties") or {}
    extra: Schema | None = schema.get("additionalProperties")
    for key, item in value.items():
        declared = properties.get(key, extra)
        if declared is not None:
            found += conforms(_at(field, key), item, declared)
    return found


def _array_conforms(field: str, value: list[Any], schema: Schema) -> list[Problem]:
    """The items' problems, then ``minItems`` and ``maxItems`` (kube-openapi's order), then each item
    repeating a key of a ``x-kubernetes-list-type: map``."""
    found = [
        p for index, item in enumerate(value) for p in conforms(f"{field}[{index}]", item, schema["items"])
    ]
    if len(value) < schema.get("minItems", 0):
        least = schema["minItems"]
        found.append(
            FieldError(
                field, f"Invalid value: {len(value)}: {field} in body should have at least {least} items"
            )
        )
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        found.append(
            FieldError(field, f"Too many: {len(value)}: must have at most {schema['maxItems']} items")
        )
    keys = schema.get("x-kubernetes-list-map-keys")
    if schema.get("x-kubernetes-list-type") != "map" or not keys:
        return found
    seen: set[str] = set()
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            continue  # already a wrong type
        key = json.dumps({k: item.get(k) for k in keys}, separators=(",", ":"))
        if key in seen:  # how the server shows the key: a Go map's %#v
            found.append(FieldError(f"{field}[{index}]", f"Duplicate value: map[string]interface {{}}{key}"))
        seen.add(key)
    return found


def _string_conforms(field: str, value: str, schema: Schema) -> list[Problem]:
    """kube-openapi's string validator (the first of ``maxLength``, in characters as it counts runes,
    ``minLength`` and ``pattern``), then its format validator (``date-time``: a type error), then its
    enum: each validator adds its own."""
    found = []
    pattern = schema.get("pattern")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        found.append(FieldError(field, f"Too long: may not be more than {schema['maxLength']} bytes"))
    elif len(value) < schema.get("minLength", 0):
        least = schema["minLength"]
        found.append(
            FieldError(
                field,
                f"Invalid value: {_shown(value)}: {field} in body should be at least {least} chars long",
            )
        )
    elif pattern and not _regex(pattern).search(value):
        found.append(
            FieldError(field, f"Invalid value: {_shown(value)}: {field} in body should match '{pattern}'")
        )
    if schema.get("format") == "date-time" and not _date_time(value):
        message = (
            f"Invalid value: {_shown(value)}: {field} in body must be of type date-time: {_shown(value)}"
        )
        found.append(FieldError(field, message, TYPE_INVALID))
    enum = schema.get("enum")
    if enum and value not in enum:
        supported = ", ".join(f'"{v}"' for v in enum)
        found.append(FieldError(field, f"Unsupported value: {_shown(value)}: supported values: {supported}"))
    return found


@functools.cache
def _regex(pattern: str) -> re.Pattern[str]:
    """A schema ``pattern`` as Go's RE2 reads it: ``$`` is the end of the text (Python's ``$`` also
    matches before a final newline)."""
    return re.compile(pattern[:-1] + r"\Z" if pattern.endswith("$") else pattern)


_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})\Z", re.ASCII)


def _date_time(text: str) -> bool:
    """RFC 3339, as the ``date-time`` format the server checks (a real date and time of day)."""
    if not _RFC3339.match(text):
        return False
    try:
        datetime.fromisoformat(text.replace("z", "Z").replace("t", "T"))
    except ValueError:
        return False
    return True


def _pruned(value: Any, schema: Schema) -> Any:
    """``value`` as a structural schema keeps it: fields the schema does not declare are dropped at
    every depth (an ``additionalProperties`` schema declares any key), and so is a null given to a
    field that is not nullable (none is here). See
    https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#field-pruning
    """
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return value
    if isinstance(value, dict) and schema.get("type") == "object":
        properties: Mapping[str, Schema] = schema.get("properties") or {}
        extra: Schema | None = schema.get("additionalProperties")
        out: JsonObj = {}
        for key, item in value.items():
            declared = properties.get(key, extra)
            if declared is not None and (item is not None or declared.get("nullable")):
                out[key] = _pruned(item, declared)
        return out
    if isinstance(value, list) and schema.get("type") == "array":
        return [_pruned(item, schema["items"]) for item in value]
    if schema.get("type") == "integer" and _json_integer(value):
        return int(value)
    return value


#: the largest whole float kube-openapi takes for an integer (swag's maxJSONFloat, 2^53 - 1)
_MAX_JSON_FLOAT = float(2**53 - 1)


def _json_integer(value: Any) -> bool:
    """A float a ``type: integer`` field takes: the API server decodes JSON ``1.0`` (or ``1e0``) into
    an unstructured object as a float64, kube-openapi's type validator takes a float that is a JSON
    integer for ``integer`` (k8s.io/kube-openapi pkg/validation/validate/type.go ``isFloatInt``;
    go-openapi/swag ``IsFloat64AJSONInteger``: whole and within 2^53 - 1), and Go's encoder writes the
    float64 back as ``1``. So the stored object holds the integer; ``1.5`` or ``1e300`` stays a
    number, which the schema refuses."""
    return isinstance(value, float) and value.is_integer() and -_MAX_JSON_FLOAT <= value <= _MAX_JSON_FLOAT


def _defaulted(value: Any, schema: Schema) -> Any:
    """``value`` with the ``default`` of every declared property it leaves out, at every depth an
    object is given (a default fills a field of an object that is there, never the object itself)."""
    if isinstance(value, list) and "items" in schema:
        return [_defaulted(item, schema["items"]) for item in value]
    if not isinstance(value, dict) or schema.get("x-kubernetes-preserve-unknown-fields"):
        return value
    properties: Mapping[str, Schema] = schema.get("properties") or {}
    extra: Schema = schema.get("additionalProperties") or {}
    out = {key: _defaulted(item, properties.get(key, extra)) for key, item in value.items()}
    for key, declared in properties.items():
        if key not in out and "default" in declared:
            out[key] = copy.deepcopy(declared["default"])
    return out


# --- the published schemas, as data ----------------------------------------------------------------

_STRING: Schema = {"type": "string"}
_NAME: Schema = {"type": "string", "minLength": 1}
_QUANTITY: Schema = {"type": "int-or-string", "pattern": QUANTITY_PATTERN}
# a ResourceList (map[ResourceName]resource.Quantity): any name is declared
_RESOURCE_LIST: Schema = {"type": "object", "additionalProperties": _QUANTITY}
# []metav1.Condition with +listType=map +listMapKey=type, as controller-gen writes it (k8s.io/apimachinery
# pkg/apis/meta/v1/types.go, Condition's kubebuilder markers)
_CONDITIONS: Schema = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ("lastTransitionTime", "message", "reason", "status", "type"),
        "properties": {
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "message": {"type": "string", "maxLength": 32768},
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
            "reason": {"type": "string", "maxLength": 1024, "minLength": 1, "pattern": REASON_PATTERN},
            "status": {"type": "string", "enum": ("True", "False", "Unknown")},
            "type": {"type": "string", "maxLength": 316, "pattern": CONDITION_TYPE_PATTERN},
        },
    },
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ("type",),
}
# metav1.LabelSelector, as controller-gen writes it
_LABEL_SELECTOR: Schema = {
    "type": "object",
    "properties": {
        "matchExpressions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ("key", "operator"),
                "properties": {
                    "key": _STRING,
                    "operator": _STRING,
                    "values": {"type": "array", "items": _STRING, "x-kubernetes-list-type": "atomic"},
                },
            },
            "x-kubernetes-list-type": "atomic",
        },
        "matchLabels": {"type": "object", "additionalProperties": _STRING},
    },
    "x-kubernetes-map-type": "atomic",
}
_LOCAL_REF: Schema = {"type": "object", "required": ("name",), "properties": {"name": _NAME}}
_DNS_NAME: Schema = {"type": "string", "maxLength": 253, "pattern": DNS_SUBDOMAIN_PATTERN}


def _custom_resource(spec: Schema, status: Schema, *, spec_required: bool = True) -> Schema:
    """The root every kind here shares: ``spec`` required (unless not), ``metadata`` kept whole (the
    server keeps it as ObjectMeta, not by this schema)."""
    return {
        "type": "object",
        "required": ("spec",) if spec_required else (),
        "properties": {
            "apiVersion": _STRING,
            "kind": _STRING,
            "metadata": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "spec": spec,
            "status": status,
        },
    }


# autoscaling.x-k8s.io_provisioningrequests.yaml, version v1
PROVISIONING_REQUEST_SCHEMA = _custom_resource(
    spec={
        "type": "object",
        "required": ("podSets", "provisioningClassName"),
        "properties": {
            "parameters": {
                "type": "object",
                "maxProperties": 100,
                "additionalProperties": {"type": "string", "maxLength": 255},
            },
            "podSets": {
                "type": "array",
                "minItems": 1,
                "maxItems": 32,
                "items": {
                    "type": "object",
                    "required": ("count", "podTemplateRef"),
                    "properties": {
                        "count": {"type": "integer", "format": "int32", "minimum": 1},
                        "podTemplateRef": {
                            "type": "object",
                            "required": ("name",),
                            "properties": {"name": _DNS_NAME},
                        },
                    },
                },
            },
            "provisioningClassName": _DNS_NAME,
        },
    },
    status={
        "type": "object",
        "properties": {
            "conditions": _CONDITIONS,
            "provisioningClassDetails": {
                "type": "object",
                "maxProperties": 64,
                "additionalProperties": {"type": "string", "maxLength": 32768},
            },
        },
    },
)
# The CRD as cluster-autoscaler published it before v1 (v1beta1/types.go: introduced 1.29.0) serves
# v1beta1 alone, served and stored. Its schema is v1's: the same spec (podSets, provisioningClassName,
# parameters, the same bounds and immutability rules) and status (metav1.Condition conditions keyed by
# type, provisioningClassDetails); v1 copied it when it came, and the CRD of today serves both with one
# schema, v1beta1 deprecated. So PROVISIONING_REQUEST_V1BETA1 uses PROVISIONING_REQUEST_SCHEMA. (The
# package's first draft, kubernetes/autoscaler#5848, named the fields provisioningClass,
# additionalParameters and additionalStatus, its classes check-capacity.kubernetes.io and
# atomic-scale-up.kubernetes.io: not modelled; Spillway reads none of those names.)
# autoscaling.x-k8s.io_capacityquotas.yaml, version v1beta1 (capacityquota_types.go): structural, no
# x-kubernetes-preserve-unknown-fields
CAPACITY_QUOTA_SCHEMA = _custom_resource(
    spec={
        "type": "object",
        "required": ("limits",),
        "properties": {
            "limits": {
                "type": "object",
                "required": ("resources",),
                "properties": {"resources": {**_RESOURCE_LIST, "maxProperties": 20}},
            },
            "selector": _LABEL_SELECTOR,
        },
    },
    status={
        "type": "object",
        "properties": {
            "conditions": _CONDITIONS,
            "observedGeneration": {"type": "integer", "format": "int64"},
            "used": {
                "type": "object",
                "required": ("resources",),
                "properties": {"resources": _RESOURCE_LIST},
            },
        },
    },
)
# autoscaling.x-k8s.io_capacityquotas.yaml as kubernetes/autoscaler first published it: v1alpha1 alone,
# served and stored; the spec of v1beta1's without what came with v1beta1 (limits.resources has no
# maxProperties, no CEL rule), and a status with no field (capacityquota_types.go v1alpha1: its comment
# leaves reporting the resources in use for later), so the API server prunes any status written
# through it
CAPACITY_QUOTA_V1ALPHA1_SCHEMA = _custom_resource(
    spec={
        **CAPACITY_QUOTA_SCHEMA["properties"]["spec"],
        "properties": {
            "limits": {
                "type": "object",
                "required": ("resources",),
                "properties": {"resources": _RESOURCE_LIST},
            },
            "selector": _LABEL_SELECTOR,
        },
    },
    status={"type": "object"},
)
# The same CRD as kubernetes/autoscaler published it later, v1alpha1 still alone: its status declares
# used.resources and conditions (metav1.Condition, a list keyed by type), which cluster-autoscaler's own
# quota controller writes through v1alpha1 (cluster-autoscaler/resourcequotas/capacityquota/
# controller.go, Reconcile: a status merge patch of the v1alpha1 object); observedGeneration came with
# v1beta1. The spec is the first release's (the CEL rules later v1alpha1 releases added on the limits
# and the selector are not modelled).
CAPACITY_QUOTA_V1ALPHA1_STATUS_SCHEMA = _custom_resource(
    spec=CAPACITY_QUOTA_V1ALPHA1_SCHEMA["properties"]["spec"],
    status={
        "type": "object",
        "properties": {
            "conditions": _CONDITIONS,
            "used": CAPACITY_QUOTA_SCHEMA["properties"]["status"]["properties"]["used"],
        },
    },
)
# autoscaling.x-k8s.io_capacitybuffers.yaml as generated since the v1beta1 graduation (kubernetes/
# autoscaler#9062; checked in the copy devantler-tech/ksail vendors, pkg/svc/installer/clusterautoscaler):
# v1alpha1 and v1beta1 have one schema, only a CEL rule's message differs; structural, no
# x-kubernetes-preserve-unknown-fields
BUFFER_SCHEMA = _custom_resource(
    spec={
        "type": "object",
        "properties": {
            "limits": _RESOURCE_LIST,
            "percentage": {"type": "integer", "format": "int32", "minimum": 0},
            "podTemplateRef": _LOCAL_REF,
            "provisioningStrategy": {"type": "string", "default": ACTIVE_CAPACITY},
            "replicas": {"type": "integer", "format": "int32", "minimum": 0},
            "scalableRef": {
                "type": "object",
                "required": ("kind", "name"),
                "properties": {"apiGroup": _STRING, "kind": _NAME, "name": _NAME},
            },
        },
    },
    status={
        "type": "object",
        "properties": {
            "conditions": _CONDITIONS,
            "podTemplateGeneration": {"type": "integer", "format": "int64"},
            "podTemplateRef": _LOCAL_REF,
            "provisioningStrategy": _STRING,
            "replicas": {"type": "integer", "format": "int32"},
        },
    },
)


_INT32: Schema = {"type": "integer", "format": "int32"}
# volcano-sh/volcano config/crd/volcano/bases/scheduling.volcano.sh_podgroups.yaml, version v1beta1
# (controller-gen v0.18.0; checked at commit 096235e19d45): structural, no x-kubernetes-preserve-unknown-
# fields, no CEL rules, spec not required; ``queue`` and networkTopology's fields carry defaults
VOLCANO_PODGROUP_SCHEMA = _custom_resource(
    spec={
        "type": "object",
        "properties": {
            "minMember": _INT32,
            "minResources": _RESOURCE_LIST,
            "minTaskMember": {"type": "object", "additionalProperties": _INT32},
            "networkTopology": {
                "type": "object",
                "properties": {
                    "highestTierAllowed": {"type": "integer", "default": 1},
                    "mode": {"type": "string", "enum": ("hard", "soft"), "default": "hard"},
                },
            },
            "preemptable": {"type": "boolean"},
            "priorityClassName": _STRING,
            "queue": {"type": "string", "default": "default"},
        },
    },
    status={
        "type": "object",
        "properties": {
            "conditions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "lastTransitionTime": {"type": "string", "format": "date-time"},
                        "message": _STRING,
                        "reason": _STRING,
                        "status": _STRING,
                        "transitionID": _STRING,
                        "type": _STRING,
                    },
                },
            },
            "failed": _INT32,
            "phase": _STRING,
            "running": _INT32,
            "succeeded": _INT32,
        },
    },
    spec_required=False,
)
# kubernetes-sigs/scheduler-plugins config/crd/bases/scheduling.x-k8s.io_podgroups.yaml, version
# v1alpha1 (controller-gen v0.18.0): structural, no x-kubernetes-preserve-unknown-fields, no CEL rules,
# spec not required; ``minMember`` at least 1
COSCHEDULING_PODGROUP_SCHEMA = _custom_resource(
    spec={
        "type": "object",
        "properties": {
            "minMember": {**_INT32, "minimum": 1},
            "minResources": _RESOURCE_LIST,
            "scheduleTimeoutSeconds": _INT32,
        },
    },
    status={
        "type": "object",
        "properties": {
            "failed": _INT32,
            "occupiedBy": _STRING,
            "phase": _STRING,
            "running": _INT32,
            "scheduleStartTime": {"type": "string", "format": "date-time"},
            "succeeded": _INT32,
        },
    },
    spec_required=False,
)


# --- Kubeflow training operator v1: PyTorchJob and PaddleJob -----------------------------------------
# kubeflow/training-operator manifests/base/crds/kubeflow.org_pytorchjobs.yaml (checked at c20bf65e03b8)
# and kubeflow.org_paddlejobs.yaml (at 7cc5d04bab51), controller-gen v0.16.5: structural, no
# x-kubernetes-preserve-unknown-fields anywhere (the pod template included), ``spec`` not required, the
# replica specs required in it, one CEL rule (``runPolicy.schedulingPolicy.queue``: ``self == oldSelf``),
# one default (``runPolicy.suspend``: false). Served here as published but for the embedded
# PodTemplateSpec, which the real CRD spells out to every depth (some 550K of its 609K characters, the
# k8s.io/api 1.31 PodSpec: no pod-level ``resources``): ``template.metadata`` is as published
# (annotations, finalizers, labels, name, namespace); ``template.spec`` declares every PodSpec field
# with its type, ``containers`` required; its ``containers`` and ``initContainers`` declare every
# Container field, ``name`` required, and a list keyed by name; ``resources`` (requests, limits,
# claims), ``tolerations``, ``nodeSelector`` and ``overhead`` are as published. Below that, where the real
# CRD declares a field's own fields (affinity, probes, env's sources, volumes' sources, security
# contexts, ephemeralContainers ...), the emulator keeps the value whole
# (``x-kubernetes-preserve-unknown-fields``): an unknown field there is kept where a cluster would drop
# it, and a wrong type there is not refused. A Pod itself is validated by no schema here either
# (``store._problems``: containers required), so nothing finer is known about a pod to reuse.
#
# The training operator's own defaults are not applied here, as a cluster stores none of them: its
# admission webhooks only validate (pkg/webhooks/pytorch and paddlepaddle, ``mutating=false``; in
# manifests/base/webhook a ValidatingWebhookConfiguration alone, v1.8 and v1.9; v1.7 had no webhook),
# and its reconcilers default their in-memory copy (``r.Scheme.Default(job)`` in Reconcile, then
# ``SetDefaults_PyTorchJob``/``SetDefaults_PaddleJob``: Worker ``replicas`` 1, ``restartPolicy``
# OnFailure, ``cleanPodPolicy`` None, the default port, the elasticPolicy bounds, ``nprocPerNode``
# "auto") and write back only the status subresource. A reader of the object sees the user's fields
# and the schema's ``runPolicy.suspend`` default alone (spillway.model.jobs applies the elastic rule).

_INT64: Schema = {"type": "integer", "format": "int64"}
_BOOLEAN: Schema = {"type": "boolean"}
_STRINGS: Schema = {"type": "array", "items": _STRING}
_STRING_MAP: Schema = {"type": "object", "additionalProperties": _STRING}
_DATE_TIME: Schema = {"type": "string", "format": "date-time"}
#: a value the emulator keeps whole where the published CRD declares its fields (see above)
_KEPT_OBJECT: Schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_KEPT_OBJECTS: Schema = {"type": "array", "items": _KEPT_OBJECT}


def _keyed_by_name(item: Schema) -> Schema:
    """``+listType=map +listMapKey=name``: a list whose items must not repeat a name."""
    return {
        "type": "array",
        "items": item,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ("name",),
    }


# core/v1 ResourceRequirements, Container and Toleration as the CRD embeds them
_RESOURCE_REQUIREMENTS: Schema = {
    "type": "object",
    "properties": {
        "claims": _keyed_by_name({"type": "object", "required": ("name",), "properties": {"name": _STRING}}),
        "limits": _RESOURCE_LIST,
        "requests": _RESOURCE_LIST,
    },
}
_CONTAINER: Schema = {
    "type": "object",
    "required": ("name",),
    "properties": {
        "args": _STRINGS,
        "command": _STRINGS,
        "env": _keyed_by_name({**_KEPT_OBJECT, "required": ("name",)}),
        "envFrom": _KEPT_OBJECTS,
        "image": _STRING,
        "imagePullPolicy": _STRING,
        "lifecycle": _KEPT_OBJECT,
        "livenessProbe": _KEPT_OBJECT,
        "name": _STRING,
        "ports": _KEPT_OBJECTS,
        "readinessProbe": _KEPT_OBJECT,
        "resizePolicy": _KEPT_OBJECTS,
        "resources": _RESOURCE_REQUIREMENTS,
        "restartPolicy": _STRING,
        "securityContext": _KEPT_OBJECT,
        "startupProbe": _KEPT_OBJECT,
        "stdin": _BOOLEAN,
        "stdinOnce": _BOOLEAN,
        "terminationMessagePath": _STRING,
        "terminationMessagePolicy": _STRING,
        "tty": _BOOLEAN,
        "volumeDevices": _KEPT_OBJECTS,
        "volumeMounts": _KEPT_OBJECTS,
        "workingDir": _STRING,
    },
}
_TOLERATION: Schema = {
    "type": "object",
    "properties": {
        "effect": _STRING,
        "key": _STRING,
        "operator": _STRING,
        "tolerationSeconds": _INT64,
        "value": _STRING,
    },
}
_POD_SPEC: Schema = {
    "type": "object",
    "required": ("containers",),
    "properties": {
        "activeDeadlineSeconds": _INT64,
        "affinity": _KEPT_OBJECT,
        "automountServiceAccountToken": _BOOLEAN,
        "containers": _keyed_by_name(_CONTAINER),
        "dnsConfig": _KEPT_OBJECT,
        "dnsPolicy": _STRING,
        "enableServiceLinks": _BOOLEAN,
        "ephemeralContainers": {"type": "array", "items": {**_KEPT_OBJECT, "required": ("name",)}},
        "hostAliases": _KEPT_OBJECTS,
        "hostIPC": _BOOLEAN,
        "hostNetwork": _BOOLEAN,
        "hostPID": _BOOLEAN,
        "hostUsers": _BOOLEAN,
        "hostname": _STRING,
        "imagePullSecrets": _KEPT_OBJECTS,
        "initContainers": _keyed_by_name(_CONTAINER),
        "nodeName": _STRING,
        "nodeSelector": _STRING_MAP,
        "os": _KEPT_OBJECT,
        "overhead": _RESOURCE_LIST,
        "preemptionPolicy": _STRING,
        "priority": _INT32,
        "priorityClassName": _STRING,
        "readinessGates": _KEPT_OBJECTS,
        "resourceClaims": _keyed_by_name({**_KEPT_OBJECT, "required": ("name",)}),
        "restartPolicy": _STRING,
        "runtimeClassName": _STRING,
        "schedulerName": _STRING,
        "schedulingGates": _keyed_by_name({**_KEPT_OBJECT, "required": ("name",)}),
        "securityContext": _KEPT_OBJECT,
        "serviceAccount": _STRING,
        "serviceAccountName": _STRING,
        "setHostnameAsFQDN": _BOOLEAN,
        "shareProcessNamespace": _BOOLEAN,
        "subdomain": _STRING,
        "terminationGracePeriodSeconds": _INT64,
        "tolerations": {"type": "array", "items": _TOLERATION},
        "topologySpreadConstraints": _KEPT_OBJECTS,
        "volumes": _keyed_by_name({**_KEPT_OBJECT, "required": ("name",)}),
    },
}
# the training operator's ReplicaSpec: replicas, restartPolicy, and the pod template
_REPLICA_SPECS: Schema = {
    "type": "object",
    "additionalProperties": {
        "type": "object",
        "properties": {
            "replicas": _INT32,
            "restartPolicy": _STRING,
            "template": {
                "type": "object",
                "properties": {
                    "metadata": {
                        "type": "object",
                        "properties": {
                            "annotations": _STRING_MAP,
                            "finalizers": _STRINGS,
                            "labels": _STRING_MAP,
                            "name": _STRING,
                            "namespace": _STRING,
                        },
                    },
                    "spec": _POD_SPEC,
                },
            },
        },
    },
}
# autoscaling/v2 MetricSpec (elasticPolicy.metrics), as the CRD embeds it
_METRIC_TARGET: Schema = {
    "type": "object",
    "required": ("type",),
    "properties": {
        "averageUtilization": _INT32,
        "averageValue": _QUANTITY,
        "type": _STRING,
        "value": _QUANTITY,
    },
}
_METRIC_IDENTIFIER: Schema = {
    "type": "object",
    "required": ("name",),
    "properties": {"name": _STRING, "selector": _LABEL_SELECTOR},
}
_METRIC_SOURCE: Schema = {
    "type": "object",
    "required": ("metric", "target"),
    "properties": {"metric": _METRIC_IDENTIFIER, "target": _METRIC_TARGET},
}
_METRIC_SPEC: Schema = {
    "type": "object",
    "required": ("type",),
    "properties": {
        "containerResource": {
            "type": "object",
            "required": ("container", "name", "target"),
            "properties": {"container": _STRING, "name": _STRING, "target": _METRIC_TARGET},
        },
        "external": _METRIC_SOURCE,
        "object": {
            "type": "object",
            "required": ("describedObject", "metric", "target"),
            "properties": {
                "describedObject": {
                    "type": "object",
                    "required": ("kind", "name"),
                    "properties": {"apiVersion": _STRING, "kind": _STRING, "name": _STRING},
                },
                "metric": _METRIC_IDENTIFIER,
                "target": _METRIC_TARGET,
            },
        },
        "pods": _METRIC_SOURCE,
        "resource": {
            "type": "object",
            "required": ("name", "target"),
            "properties": {"name": _STRING, "target": _METRIC_TARGET},
        },
        "type": _STRING,
    },
}
# the operator's RunPolicy and JobStatus, common to every kubeflow.org/v1 job
_RUN_POLICY: Schema = {
    "type": "object",
    "properties": {
        "activeDeadlineSeconds": _INT64,
        "backoffLimit": _INT32,
        "cleanPodPolicy": _STRING,
        "managedBy": _STRING,
        "schedulingPolicy": {
            "type": "object",
            "properties": {
                "minAvailable": _INT32,
                "minResources": _RESOURCE_LIST,
                "priorityClass": _STRING,
                "queue": _STRING,  # CEL: self == oldSelf (the store's ``immutable``)
                "scheduleTimeoutSeconds": _INT32,
            },
        },
        "suspend": {"type": "boolean", "default": False},
        "ttlSecondsAfterFinished": _INT32,
    },
}
_JOB_STATUS: Schema = {
    "type": "object",
    "properties": {
        "completionTime": _DATE_TIME,
        "conditions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ("status", "type"),
                "properties": {
                    "lastTransitionTime": _DATE_TIME,
                    "lastUpdateTime": _DATE_TIME,
                    "message": _STRING,
                    "reason": _STRING,
                    "status": _STRING,
                    "type": _STRING,
                },
            },
        },
        "lastReconcileTime": _DATE_TIME,
        "replicaStatuses": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "properties": {
                    "active": _INT32,
                    "failed": _INT32,
                    "labelSelector": _LABEL_SELECTOR,
                    "selector": _STRING,
                    "succeeded": _INT32,
                },
            },
        },
        "startTime": _DATE_TIME,
    },
}
_ELASTIC_BOUNDS: Mapping[str, Schema] = {
    "maxReplicas": _INT32,
    "maxRestarts": _INT32,
    "metrics": {"type": "array", "items": _METRIC_SPEC},
    "minReplicas": _INT32,
}
PYTORCH_JOB_SCHEMA = _custom_resource(
    spec={
        "type": "object",
        "required": ("pytorchReplicaSpecs",),
        "properties": {
            "elasticPolicy": {
                "type": "object",
                "properties": {
                    **_ELASTIC_BOUNDS,
                    "nProcPerNode": _INT32,  # deprecated for spec.nprocPerNode, still served
                    "rdzvBackend": _STRING,
                    "rdzvConf": {
                        "type": "array",
                        "items": {"type": "object", "properties": {"key": _STRING, "value": _STRING}},
                    },
                    "rdzvHost": _STRING,
                    "rdzvId": _STRING,
                    "rdzvPort": _INT32,
                    "standalone": _BOOLEAN,
                },
            },
            "nprocPerNode": _STRING,
            "pytorchReplicaSpecs": _REPLICA_SPECS,
            "runPolicy": _RUN_POLICY,
        },
    },
    status=_JOB_STATUS,
    spec_required=False,
)
PADDLE_JOB_SCHEMA = _custom_resource(
    spec={
        "type": "object",
        "required": ("paddleReplicaSpecs",),
        "properties": {
            "elasticPolicy": {"type": "object", "properties": dict(_ELASTIC_BOUNDS)},
            "paddleReplicaSpecs": _REPLICA_SPECS,
            "runPolicy": _RUN_POLICY,
        },
    },
    status=_JOB_STATUS,
    spec_required=False,
)
# TFJob, XGBoostJob and JAXJob (kubeflow.org_tfjobs.yaml, kubeflow.org_xgboostjobs.yaml,
# kubeflow.org_jaxjobs.yaml): the same ``runPolicy`` and replica specs (one ReplicaSpec type, each
# ``restartPolicy`` "Default to Never"), their own map of them required in ``spec``, and a TFJob's
# ``enableDynamicWorker`` (boolean) and ``successPolicy`` (string) besides (pkg/apis/kubeflow.org/v1
# tensorflow_types.go, xgboost_types.go, jax_types.go); status subresource only.


def _replica_job(specs_field: str, **more: Schema) -> Schema:
    return _custom_resource(
        spec={
            "type": "object",
            "required": (specs_field,),
            "properties": {**more, specs_field: _REPLICA_SPECS, "runPolicy": _RUN_POLICY},
        },
        status=_JOB_STATUS,
        spec_required=False,
    )


TF_JOB_SCHEMA = _replica_job("tfReplicaSpecs", enableDynamicWorker=_BOOLEAN, successPolicy=_STRING)
XGBOOST_JOB_SCHEMA = _replica_job("xgbReplicaSpecs")
JAX_JOB_SCHEMA = _replica_job("jaxReplicaSpecs")

# --- kubeflow/mpi-operator v2beta1: MPIJob ---------------------------------------------------------
# manifests/base/kubeflow.org_mpijobs.yaml (the CRD deploy/v2beta1/mpi-operator.yaml installs), generated
# by controller-gen from pkg/apis/kubeflow/v2beta1/types.go: one version, v2beta1, served and stored (the
# operator's v1alpha1, v1alpha2 and v1 are served no more; the training operator's own MPIJob is a
# kubeflow.org/v1 CRD of the same name, so a cluster has one or the other); status subresource only, no
# scale subresource, no CEL rule (the queue is not immutable here). Defaults: ``slotsPerWorker`` 1,
# ``runLauncherAsWorker`` false, ``sshAuthMountPath`` "/root/.ssh", ``launcherCreationPolicy`` AtStartup,
# ``mpiImplementation`` OpenMPI (enum OpenMPI, Intel, MPICH), ``runPolicy.suspend`` false. The marker
# meant to make ``launcherCreationPolicy`` an enum is written ``Enum:AtStartup;...`` (no ``=``), a name
# controller-tools' marker registry does not know, so it is not one. Its own ReplicaSpec and RunPolicy have
# the training operator's fields (served here as above). Conditions are a list keyed
# by ``type``, ``status`` one of True, False, Unknown (the types Created, Running, Restarting, Succeeded,
# Suspended, Failed are not an enum). The operator's checks (mpiReplicaSpecs.Launcher required, restart
# policies Never or OnFailure ...) are its controller's (pkg/apis/kubeflow/validation), not the API server's.

_MPI_JOB_STATUS: Schema = {
    **_JOB_STATUS,
    "properties": {
        **_JOB_STATUS["properties"],
        "conditions": {
            **_JOB_STATUS["properties"]["conditions"],
            "items": {
                **_JOB_STATUS["properties"]["conditions"]["items"],
                "properties": {
                    **_JOB_STATUS["properties"]["conditions"]["items"]["properties"],
                    "status": {"type": "string", "enum": ("True", "False", "Unknown")},
                },
            },
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ("type",),
        },
    },
}
MPI_JOB_SCHEMA = _custom_resource(
    spec={
        "type": "object",
        "required": ("mpiReplicaSpecs",),
        "properties": {
            "launcherCreationPolicy": {"type": "string", "default": "AtStartup"},
            "mpiImplementation": {
                "type": "string",
                "default": "OpenMPI",
                "enum": ("OpenMPI", "Intel", "MPICH"),
            },
            "mpiReplicaSpecs": _REPLICA_SPECS,
            "runLauncherAsWorker": {"type": "boolean", "default": False},
            "runPolicy": _RUN_POLICY,
            "slotsPerWorker": {**_INT32, "default": 1},
            "sshAuthMountPath": {"type": "string", "default": "/root/.ssh"},
        },
    },
    status=_MPI_JOB_STATUS,
    spec_required=False,
)

# --- kubeflow/training-operator v1: MPIJob --------------------------------------------------------------
# manifests/base/crds/kubeflow.org_mpijobs.yaml (at 7cc5d04bab51), generated from
# pkg/apis/kubeflow.org/v1/mpi_types.go: the training operator's own MPIJob, a CRD named
# mpijobs.kubeflow.org as kubeflow/mpi-operator's is, so a cluster installs one or the other (the emulator
# serves this one only when named, :data:`resources.ALTERNATIVES`). One version, v1; status subresource;
# the other training operator kinds' replica specs, run policy, status and queue rule, with its own
# ``cleanPodPolicy`` (deprecated beside ``runPolicy.cleanPodPolicy``), ``mainContainer`` and
# ``slotsPerWorker``, none defaulted by the schema (the controller's SetDefaults_MPIJob fills them);
# conditions a plain list, ``status`` any string.
MPI_JOB_V1_SCHEMA = _replica_job(
    "mpiReplicaSpecs", cleanPodPolicy=_STRING, mainContainer=_STRING, slotsPerWorker=_INT32
)
#: the CEL rule the kubeflow.org CRDs carry, with its message (the store's ``immutable`` check)
QUEUE_PATH = ("spec", "runPolicy", "schedulingPolicy", "queue")
QUEUE_IMMUTABLE = "spec.runPolicy.schedulingPolicy.queue is immutable"

# --- the CEL rules (x-kubernetes-validations), run on an object its schema keeps --------------------

_PARTS = re.compile(r"^[+-]?([0-9]*)(?:\.([0-9]*))?(.*)$")
_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SI = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_INT64_MAX = 2**63 - 1
_MAX_INT64_FACTORS = 18  # decimal digits an int64 always holds (k8s.io/apimachinery resource)


def integer_quantity(text: str) -> bool:
    """Whether the API server's ``quantity(text).isInteger()`` holds: the parser's fast path keeps the
    value as an int64 amount at a scale >= 0 (``AsInt64``); a negative scale (a milli value, a
    fraction) or the slow path (a binary suffix with a fraction, too many digits) is no integer."""
    if not _regex(QUANTITY_PATTERN).search(text) or text.startswith("-"):
        return False
    parts = _PARTS.match(text)
    assert parts is not None  # the pattern matched
    whole, fraction, suffix = parts.group(1), parts.group(2) or "", parts.group(3)
    num = whole.lstrip("0") or "0"
    value = int(num + fraction)
    if suffix in _BINARY_SI:
        exponent = _BINARY_SI[suffix]
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
        return not fraction and precision >= 0 and value << exponent <= _INT64_MAX
    decimal = _DECIMAL_SI[suffix] if suffix in _DECIMAL_SI else _exponent(suffix)
    if decimal is None or _MAX_INT64_FACTORS - len(num) - len(fraction) < 0:
        return False
    scale = decimal - len(fraction)
    return scale >= 0 and value * 10**scale <= _INT64_MAX  # a scale below 0 is kept as such: no int64


def _exponent(suffix: str) -> int | None:
    """``e3`` → 3; a fractional exponent (which the pattern lets through) does not parse."""
    try:
        return int(suffix[1:])
    except ValueError:
        return None


def _quota_rules(obj: JsonObj, _version: str) -> list[Problem]:
    """``spec.limits.resources``: ``self.all(key, size(key) <= 63)``, then ``self.all(key,
    type(self[key]) == int ? self[key] >= 0 : (!self[key].startsWith('-') &&
    quantity(self[key]).isInteger()))``."""
    field, resources = "spec.limits.resources", obj["spec"]["limits"]["resources"]
    found = []
    if any(len(name) > 63 for name in resources):
        found.append(_cel(field, "Resource names must be 63 characters or less."))
    if not all(v >= 0 if isinstance(v, int) else integer_quantity(v) for v in resources.values()):
        found.append(_cel(field, "All resource quantities must be non-negative integers."))
    return found


# the spec's rules by served version: v1alpha1 kept the message the rule had before v1beta1 corrected it
_NEEDS_COUNT = "If X is set, replicas or limits must also be set"
_ONE_REF = {
    "v1alpha1": "You must define both PodTemplateRef and ScalableRef",
    "v1beta1": "You must define either PodTemplateRef or ScalableRef, but not both",
}


def _buffer_rules(obj: JsonObj, version: str) -> list[Problem]:
    """``spec``: a ``podTemplateRef`` needs ``replicas`` or ``limits``; not both refs."""
    spec, found = obj["spec"], []
    if "podTemplateRef" in spec and "replicas" not in spec and "limits" not in spec:
        found.append(_cel("spec", _NEEDS_COUNT))
    if "podTemplateRef" in spec and "scalableRef" in spec:
        found.append(_cel("spec", _ONE_REF.get(version, _ONE_REF["v1beta1"])))
    return found


def _transition_rules_only(obj: JsonObj, version: str) -> list[Problem]:
    """A CRD whose only CEL rules are ``self == oldSelf`` transition rules (the store's ``immutable``
    check): nothing to check on the object alone, but the rules are there, so a blocking schema error
    is still reported as keeping them from running."""
    return []


# --- the kinds -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Crd:
    schema: Schema
    #: the CEL rules (``x-kubernetes-validations``) on the object, None when the CRD has none
    rules: Callable[[JsonObj, str], list[Problem]] | None = None
    #: the messages of its ``self == oldSelf`` rules by field, where not "Value is immutable"
    immutable_messages: Mapping[tuple[str, ...], str] = dataclasses.field(default_factory=dict)


_CRDS: Mapping[str, _Crd] = {
    PROVISIONING_REQUEST: _Crd(PROVISIONING_REQUEST_SCHEMA, _transition_rules_only),
    PROVISIONING_REQUEST_V1BETA1: _Crd(PROVISIONING_REQUEST_SCHEMA, _transition_rules_only),
    CAPACITY_QUOTA: _Crd(CAPACITY_QUOTA_SCHEMA, _quota_rules),
    CAPACITY_QUOTA_V1ALPHA1: _Crd(CAPACITY_QUOTA_V1ALPHA1_SCHEMA),
    CAPACITY_QUOTA_V1ALPHA1_STATUS: _Crd(CAPACITY_QUOTA_V1ALPHA1_STATUS_SCHEMA),
    CAPACITY_BUFFER: _Crd(BUFFER_SCHEMA, _buffer_rules),
    VOLCANO_PODGROUP: _Crd(VOLCANO_PODGROUP_SCHEMA),
    COSCHEDULING_PODGROUP: _Crd(COSCHEDULING_PODGROUP_SCHEMA),
    PYTORCH_JOB: _Crd(PYTORCH_JOB_SCHEMA, _transition_rules_only, {QUEUE_PATH: QUEUE_IMMUTABLE}),
    PADDLE_JOB: _Crd(PADDLE_JOB_SCHEMA, _transition_rules_only, {QUEUE_PATH: QUEUE_IMMUTABLE}),
    TF_JOB: _Crd(TF_JOB_SCHEMA, _transition_rules_only, {QUEUE_PATH: QUEUE_IMMUTABLE}),
    XGBOOST_JOB: _Crd(XGBOOST_JOB_SCHEMA, _transition_rules_only, {QUEUE_PATH: QUEUE_IMMUTABLE}),
    JAX_JOB: _Crd(JAX_JOB_SCHEMA, _transition_rules_only, {QUEUE_PATH: QUEUE_IMMUTABLE}),
    MPI_JOB: _Crd(MPI_JOB_SCHEMA),
    MPI_JOB_V1: _Crd(MPI_JOB_V1_SCHEMA, _transition_rules_only, {QUEUE_PATH: QUEUE_IMMUTABLE}),
}


def has_cel_rules(store_kind: str) -> bool:
    crd = _CRDS.get(store_kind)
    return crd is not None and crd.rules is not None


def immutable_message(store_kind: str, path: tuple[str, ...]) -> str:
    """What the CRD's ``self == oldSelf`` rule on ``path`` says when a write changes the field: its
    ``message``, "Value is immutable" as the sig-autoscaling CRDs word it."""
    crd = _CRDS.get(store_kind)
    return (crd.immutable_messages if crd else {}).get(path, "Value is immutable")


def blocks_cel(problems: list[Problem]) -> bool:
    """``hasBlockingErr``: whether the schema's errors keep the CEL rules from running."""
    return any(p.reason in _BLOCKING for p in problems)


def check(store_kind: str, obj: JsonObj, version: str = "", scale: Sequence[Problem] = ()) -> list[Problem]:
    """Every way ``obj`` breaks its CRD's schema, then ``scale`` (its scale subresource's checks, which
    the API server's validator runs after the schema's), then its CEL rules (written through
    ``version``), or :data:`CEL_NOT_RUN` when the schema's errors block them; empty when it keeps them
    (or is no kind modelled here but for ``scale``)."""
    crd = _CRDS.get(store_kind)
    if crd is None:
        return list(scale)
    problems = conforms("", obj, crd.schema) + list(scale)
    if crd.rules is None:
        return problems
    if blocks_cel(problems):
        return [*problems, CEL_NOT_RUN]
    return problems + crd.rules(obj, version)


def pruned(store_kind: str, obj: JsonObj) -> JsonObj:
    """``obj`` as the API server decodes every write of it (a create, an update, a patched object, a
    ``/status`` write): pruned to what its CRD's structural schema declares."""
    crd = _CRDS.get(store_kind)
    return obj if crd is None else dict(_pruned(obj, crd.schema))


def with_defaults(store_kind: str, obj: JsonObj) -> JsonObj:
    """``obj`` with its CRD's schema defaults filled in (a CapacityBuffer's ``spec.provisioningStrategy``)."""
    crd = _CRDS.get(store_kind)
    return obj if crd is None else dict(_defaulted(obj, crd.schema))
