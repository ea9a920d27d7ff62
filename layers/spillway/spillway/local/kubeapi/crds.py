"""The validation and defaults of the sig-autoscaling CRDs the emulator serves, as a real API server
applies their published schemas and CEL rules (the kubebuilder markers of kubernetes/autoscaler
``cluster-autoscaler/apis``):

* ProvisioningRequest ``v1`` (``autoscaling.x-k8s.io_provisioningrequests.yaml``, generated from
  ``apis/provisioningrequest/autoscaling.x-k8s.io/v1/types.go``): ``spec`` with ``provisioningClassName``
  (a DNS subdomain of at most 253 characters) and ``podSets`` (1 to 32 items, each a ``podTemplateRef``
  whose ``name`` is a DNS subdomain and a ``count`` of at least 1) required; ``parameters`` at most 100
  strings of at most 255 characters. ``status.conditions`` are ``metav1.Condition`` s in a list keyed
  by ``type`` (:func:`condition_list`); ``status.provisioningClassDetails`` at most 64 strings of at most
  32768 characters. ``podSets`` and ``parameters`` (and ``provisioningClassName``) are immutable, a CEL
  transition rule ``self == oldSelf`` (the kind's ``immutable``, see ``resources``).
* CapacityQuota ``v1beta1`` (``capacityquota_types.go``): ``spec.limits.resources`` required, at most 20
  names of at most 63 characters, each a quantity that is a non-negative integer. The rule reads
  ``quantity(v).isInteger()``, which holds only when the API server's parser keeps the value as an exact
  int64 at scale 0: ``32Gi``, ``2k``, ``1.5k`` and ``10`` are integers, ``500m``, ``1000m`` (any milli
  value), ``0.3``, ``2.0`` and ``3.67Gi`` are not (:func:`integer_quantity`).
* CapacityBuffer ``v1beta1`` and the deprecated ``v1alpha1`` (``types.go``; one schema,
  :data:`BUFFER_SCHEMA`): the whole object against the CRD's structural schema, spec and status alike
  (so a ``/status`` write too: ``status.replicas`` an integer, each condition with its required
  ``type``, ``status`` (``True``, ``False`` or ``Unknown``), ``reason`` (CamelCase pattern), ``message``
  and ``lastTransitionTime``, one condition per type; ``status.podTemplateRef.name`` required); then
  the spec's CEL rules: a ``podTemplateRef`` needs ``replicas`` or ``limits``; not both
  ``podTemplateRef`` and ``scalableRef``. ``replicas`` and ``percentage`` are integers >= 0, the refs'
  names (and ``scalableRef.kind``) non-empty strings, ``limits`` quantities (a sign allowed);
  ``provisioningStrategy`` is defaulted to ``buffer.x-k8s.io/active-capacity``, and every write is
  pruned of the fields the schema does not declare (:func:`pruned`).

Each check answers the first problem as ``(field, message)``, worded as the API server words it (a real
server lists every problem; the emulator names one).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

JsonObj = dict[str, Any]
Problem = tuple[str, str]

PROVISIONING_REQUEST = "ProvisioningRequest.autoscaling.x-k8s.io"
CAPACITY_QUOTA = "CapacityQuota.autoscaling.x-k8s.io"
CAPACITY_BUFFER = "CapacityBuffer.autoscaling.x-k8s.io"
ACTIVE_CAPACITY = "buffer.x-k8s.io/active-capacity"
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_QUANTITY = re.compile(QUANTITY_PATTERN)
_PARTS = re.compile(r"^[+-]?([0-9]*)(?:\.([0-9]*))?(.*)$")
_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SI = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_INT64_MAX = 2**63 - 1
_MAX_INT64_FACTORS = 18  # decimal digits an int64 always holds (k8s.io/apimachinery resource)


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
    return (
        field,
        f'Invalid value: "{json_type(value)}": {field} in body must be of type {wanted}: "{json_type(value)}"',
    )


def integer_quantity(text: str) -> bool:
    """Whether the API server's ``quantity(text).isInteger()`` holds: the parser's fast path keeps the
    value as an int64 amount at a scale >= 0 (``AsInt64``); a negative scale (a milli value, a
    fraction) or the slow path (a binary suffix with a fraction, too many digits) is no integer."""
    if not _QUANTITY.match(text) or text.startswith("-"):
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


def _quantity(field: str, value: Any) -> Problem | None:
    """An int-or-string quantity (``anyOf: [integer, string]`` with the quantity pattern)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return _wrong_type(field, value, "integer,string")
    if isinstance(value, str) and not _QUANTITY.match(value):
        return field, f"Invalid value: {_shown(value)}: {field} in body should match '{QUANTITY_PATTERN}'"
    return None


def _quantities(field: str, value: Any) -> Problem | None:
    if not isinstance(value, dict):
        return _wrong_type(field, value, "object")
    for name, quantity in value.items():
        problem = _quantity(f"{field}.{name}", quantity)
        if problem:
            return problem
    return None


def _cel(field: str, message: str) -> Problem:
    return field, f'Invalid value: "object": {message}'


# --- CapacityQuota ---------------------------------------------------------------------------------


def _quota(obj: JsonObj) -> Problem | None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return ("spec", "Required value") if spec is None else _wrong_type("spec", spec, "object")
    limits = spec.get("limits")
    if not isinstance(limits, dict):
        return (
            ("spec.limits", "Required value")
            if limits is None
            else _wrong_type("spec.limits", limits, "object")
        )
    resources = limits.get("resources")
    field = "spec.limits.resources"
    if resources is None:
        return field, "Required value"
    problem = _quantities(field, resources)
    if problem:
        return problem
    if len(resources) > 20:
        return field, f"Too many: {len(resources)}: must have at most 20 items"
    if any(len(name) > 63 for name in resources):
        return _cel(field, "Resource names must be 63 characters or less.")
    if not all(_non_negative_integer(v) for v in resources.values()):
        return _cel(field, "All resource quantities must be non-negative integers.")
    return None


def _non_negative_integer(value: int | str) -> bool:
    return value >= 0 if isinstance(value, int) else integer_quantity(value)


# --- metav1.Condition ------------------------------------------------------------------------------
# The schema controller-gen writes for a []metav1.Condition field (k8s.io/apimachinery
# pkg/apis/meta/v1/types.go, Condition's kubebuilder markers) with +listType=map +listMapKey=type.

CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
CONDITION_REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
CONDITION_STATUSES = ("True", "False", "Unknown")
# RFC 3339, as the OpenAPI ``date-time`` format accepts it
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})\Z")


def _go_regex(pattern: str) -> re.Pattern[str]:
    """A schema ``pattern`` as Go's RE2 reads it: ``$`` is the end of the text (Python's ``$`` also
    matches before a final newline)."""
    return re.compile(pattern[:-1] + r"\Z" if pattern.endswith("$") else pattern)


_PATTERNS: dict[str, re.Pattern[str]] = {}


def _text(
    field: str, value: Any, *, max_length: int, min_length: int = 0, pattern: str | None = None
) -> Problem | None:
    """A string field: its type, ``minLength``, ``maxLength`` and ``pattern``, checked in the order the
    schema validator reports them."""
    if not isinstance(value, str):
        return _wrong_type(field, value, "string")
    if len(value) > max_length:
        return field, f"Too long: may not be more than {max_length} bytes"
    if len(value) < min_length:
        return (
            field,
            f"Invalid value: {_shown(value)}: {field} in body should be at least {min_length} chars long",
        )
    if pattern is not None:
        regex = _PATTERNS.setdefault(pattern, _go_regex(pattern))
        if not regex.match(value):
            return field, f"Invalid value: {_shown(value)}: {field} in body should match '{pattern}'"
    return None


def _date_time_field(field: str, value: Any) -> Problem | None:
    if not isinstance(value, str):
        return _wrong_type(field, value, "string")
    try:
        valid = bool(_DATE_TIME.match(value)) and bool(datetime.fromisoformat(value.replace("z", "Z")))
    except ValueError:
        valid = False
    if not valid:
        return (
            field,
            f"Invalid value: {_shown(value)}: {field} in body must be of type date-time: {_shown(value)}",
        )
    return None


def _condition_status(field: str, value: Any) -> Problem | None:
    if not isinstance(value, str):
        return _wrong_type(field, value, "string")
    if value not in CONDITION_STATUSES:
        supported = ", ".join(f'"{s}"' for s in CONDITION_STATUSES)
        return field, f"Unsupported value: {_shown(value)}: supported values: {supported}"
    return None


def _generation(field: str, value: Any) -> Problem | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return _wrong_type(field, value, "integer")
    if value < 0:
        return field, f"Invalid value: {value}: {field} in body should be greater than or equal to 0"
    return None


# a metav1.Condition's fields: the required ones in the order the schema lists them, then the optional
_CONDITION_FIELDS: dict[str, tuple[bool, Callable[[str, Any], Problem | None]]] = {
    "lastTransitionTime": (True, _date_time_field),
    "message": (True, lambda f, v: _text(f, v, max_length=32768)),
    "reason": (
        True,
        lambda f, v: _text(f, v, max_length=1024, min_length=1, pattern=CONDITION_REASON_PATTERN),
    ),
    "status": (True, _condition_status),
    "type": (True, lambda f, v: _text(f, v, max_length=316, pattern=CONDITION_TYPE_PATTERN)),
    "observedGeneration": (False, _generation),
}


def condition(field: str, value: Any) -> Problem | None:
    """One ``metav1.Condition``: ``type``, ``status`` (True, False or Unknown), ``reason`` (CamelCase, not
    empty), ``message`` and ``lastTransitionTime`` (RFC 3339) required; ``observedGeneration`` >= 0. A
    null is no value (the API server drops nulls of fields that are not nullable)."""
    if not isinstance(value, dict):
        return _wrong_type(field, value, "object")
    for key, (required, rule) in _CONDITION_FIELDS.items():
        if value.get(key) is None:
            if required:
                return f"{field}.{key}", "Required value"
            continue
        problem = rule(f"{field}.{key}", value[key])
        if problem:
            return problem
    return None


def condition_list(field: str, value: Any) -> Problem | None:
    """A ``[]metav1.Condition`` with ``x-kubernetes-list-type: map`` keyed by ``type``: each item a
    condition (:func:`condition`), no two of one type."""
    if not isinstance(value, list):
        return _wrong_type(field, value, "array")
    seen: set[str] = set()
    for index, item in enumerate(value):
        problem = condition(f"{field}[{index}]", item)
        if problem:
            return problem
        if item["type"] in seen:
            return (
                f"{field}[{index}]",
                f'Duplicate value: map[string]interface {{}}{{"type":"{item["type"]}"}}',
            )
        seen.add(item["type"])
    return None


# --- ProvisioningRequest ---------------------------------------------------------------------------

DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


def _string_map(field: str, value: Any, *, max_properties: int, max_length: int) -> Problem | None:
    """An object of strings (``additionalProperties: {type: string, maxLength}``, ``maxProperties``)."""
    if not isinstance(value, dict):
        return _wrong_type(field, value, "object")
    if len(value) > max_properties:
        return field, f"Too many: {len(value)}: must have at most {max_properties} items"
    for key, item in value.items():
        problem = _text(f"{field}.{key}", item, max_length=max_length)
        if problem:
            return problem
    return None


def _pod_set(field: str, value: Any) -> Problem | None:
    """``{podTemplateRef: {name}, count}``: both required, ``count`` at least 1, the name a DNS subdomain."""
    if not isinstance(value, dict):
        return _wrong_type(field, value, "object")
    for key in ("count", "podTemplateRef"):
        if value.get(key) is None:
            return f"{field}.{key}", "Required value"
    count = value["count"]
    if isinstance(count, bool) or not isinstance(count, int):
        return _wrong_type(f"{field}.count", count, "integer")
    if count < 1:
        return (
            f"{field}.count",
            f"Invalid value: {count}: {field}.count in body should be greater than or equal to 1",
        )
    ref = value["podTemplateRef"]
    if not isinstance(ref, dict):
        return _wrong_type(f"{field}.podTemplateRef", ref, "object")
    if ref.get("name") is None:
        return f"{field}.podTemplateRef.name", "Required value"
    return _text(f"{field}.podTemplateRef.name", ref["name"], max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)


def _pod_sets(value: Any) -> Problem | None:
    field = "spec.podSets"
    if value is None:
        return field, "Required value"
    if not isinstance(value, list):
        return _wrong_type(field, value, "array")
    if len(value) > 32:
        return field, f"Too many: {len(value)}: must have at most 32 items"
    if not value:
        return field, f"Invalid value: 0: {field} in body should have at least 1 items"
    for index, item in enumerate(value):
        problem = _pod_set(f"{field}[{index}]", item)
        if problem:
            return problem
    return None


def _provisioning_spec(spec: Any) -> Problem | None:
    if not isinstance(spec, dict):
        return ("spec", "Required value") if spec is None else _wrong_type("spec", spec, "object")
    name = spec.get("provisioningClassName")
    if name is None:
        return "spec.provisioningClassName", "Required value"
    problem = _text("spec.provisioningClassName", name, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)
    problem = problem or _pod_sets(spec.get("podSets"))
    if problem or spec.get("parameters") is None:
        return problem
    return _string_map("spec.parameters", spec["parameters"], max_properties=100, max_length=255)


def _provisioning_status(status: Any) -> Problem | None:
    if status is None:
        return None
    if not isinstance(status, dict):
        return _wrong_type("status", status, "object")
    if status.get("conditions") is not None:
        problem = condition_list("status.conditions", status["conditions"])
        if problem:
            return problem
    details = status.get("provisioningClassDetails")
    if details is None:
        return None
    return _string_map("status.provisioningClassDetails", details, max_properties=64, max_length=32768)


def _provisioning_request(obj: JsonObj) -> Problem | None:
    """A ProvisioningRequest against the published CRD's schema: its spec, and its status (a ``/status``
    write is validated as the whole object is)."""
    return _provisioning_spec(obj.get("spec")) or _provisioning_status(obj.get("status"))


# --- CapacityBuffer --------------------------------------------------------------------------------
# The CRD's openAPIV3Schema, kubernetes/autoscaler cluster-autoscaler/apis/config/crd/
# autoscaling.x-k8s.io_capacitybuffers.yaml as generated since the v1beta1 graduation (kubernetes/
# autoscaler#9062; checked in the copy devantler-tech/ksail vendors, pkg/svc/installer/clusterautoscaler):
# v1alpha1 and v1beta1 have one schema, only a CEL rule's message differs. It is structural and sets no
# x-kubernetes-preserve-unknown-fields, so the server prunes what it does not declare (:func:`pruned`).
# Only what validation and pruning read is written here; descriptions are left out.

REASON_PATTERN = "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
Schema = Mapping[str, Any]
_STRING: Schema = {"type": "string"}
_NAME: Schema = {"type": "string", "minLength": 1}
_LOCAL_REF: Schema = {"type": "object", "required": ("name",), "properties": {"name": _NAME}}
# metav1.Condition (k8s.io/apimachinery meta/v1 types.go), as controller-gen writes it into a CRD
_CONDITION: Schema = {
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
}
BUFFER_SCHEMA: Schema = {
    "type": "object",
    "required": ("spec",),
    "properties": {
        "apiVersion": _STRING,
        "kind": _STRING,
        # kept whole here: the server keeps metadata as ObjectMeta, not by this schema
        "metadata": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "spec": {
            "type": "object",
            "properties": {
                "limits": {
                    "type": "object",
                    "additionalProperties": {"type": "int-or-string", "pattern": QUANTITY_PATTERN},
                },
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
        "status": {
            "type": "object",
            "properties": {
                "conditions": {
                    "type": "array",
                    "items": _CONDITION,
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ("type",),
                },
                "podTemplateGeneration": {"type": "integer", "format": "int64"},
                "podTemplateRef": _LOCAL_REF,
                "provisioningStrategy": _STRING,
                "replicas": {"type": "integer", "format": "int32"},
            },
        },
    },
}
# the spec's CEL rules (x-kubernetes-validations), by served version: v1alpha1 kept the message the
# rule had before v1beta1 corrected it
_NEEDS_COUNT = "If X is set, replicas or limits must also be set"
_ONE_REF = {
    "v1alpha1": "You must define both PodTemplateRef and ScalableRef",
    "v1beta1": "You must define either PodTemplateRef or ScalableRef, but not both",
}


def pruned(value: Any, schema: Schema = BUFFER_SCHEMA) -> Any:
    """``value`` as a structural schema keeps it, the way the API server decodes every write (a
    create, an update, a patched object, a ``/status`` write): fields the schema does not declare are
    dropped at every depth (an ``additionalProperties`` schema declares any key), and so is a null
    given to a field that is not nullable (none is here). See
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
                out[key] = pruned(item, declared)
        return out
    if isinstance(value, list) and schema.get("type") == "array":
        return [pruned(item, schema["items"]) for item in value]
    return value


def _at(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key


def _of_type(value: Any, wanted: str) -> bool:
    if wanted == "int-or-string":
        return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
    return json_type(value) == wanted


def conforms(field: str, value: Any, schema: Schema) -> Problem | None:
    """The first way ``value`` (at ``field``, "" for the object itself) breaks ``schema``, worded as
    the API server's schema validation words it; None when it keeps it."""
    wanted = str(schema.get("type", ""))
    if wanted and not _of_type(value, wanted):
        return _wrong_type(field, value, "integer,string" if wanted == "int-or-string" else wanted)
    if isinstance(value, dict):
        return _object_conforms(field, value, schema)
    if isinstance(value, list):
        return _array_conforms(field, value, schema)
    if isinstance(value, str):
        return _string_conforms(field, value, schema)
    minimum = schema.get("minimum")
    if isinstance(value, int) and minimum is not None and value < minimum:
        return field, f"Invalid value: {value}: {field} in body should be greater than or equal to {minimum}"
    return None


def _object_conforms(field: str, value: JsonObj, schema: Schema) -> Problem | None:
    for key in schema.get("required", ()):
        if key not in value:
            return _at(field, key), "Required value"
    properties: Mapping[str, Schema] = schema.get("properties") or {}
    extra: Schema | None = schema.get("additionalProperties")
    for key, item in value.items():
        declared = properties.get(key, extra)
        problem = conforms(_at(field, key), item, declared) if declared is not None else None
        if problem:
            return problem
    return None


def _array_conforms(field: str, value: list[Any], schema: Schema) -> Problem | None:
    for index, item in enumerate(value):
        problem = conforms(f"{field}[{index}]", item, schema["items"])
        if problem:
            return problem
    keys = schema.get("x-kubernetes-list-map-keys")
    if schema.get("x-kubernetes-list-type") != "map" or not keys:
        return None
    seen: set[str] = set()
    for index, item in enumerate(value):
        key = json.dumps({k: item.get(k) for k in keys}, separators=(",", ":"))
        if key in seen:  # how the server shows the key: a Go map's %#v
            return f"{field}[{index}]", f"Duplicate value: map[string]interface {{}}{key}"
        seen.add(key)
    return None


def _string_conforms(field: str, value: str, schema: Schema) -> Problem | None:
    enum = schema.get("enum")
    if enum and value not in enum:
        supported = ", ".join(f'"{v}"' for v in enum)
        return field, f'Unsupported value: "{value}": supported values: {supported}'
    if len(value) < schema.get("minLength", 0):
        return (
            field,
            f'Invalid value: "{value}": {field} in body should be at least {schema["minLength"]} chars long',
        )
    if "maxLength" in schema and len(value.encode()) > schema["maxLength"]:
        return field, f"Too long: may not be more than {schema['maxLength']} bytes"
    pattern = schema.get("pattern")
    if pattern and not re.search(pattern, value):
        return field, f"Invalid value: {_shown(value)}: {field} in body should match '{pattern}'"
    if schema.get("format") == "date-time" and not _date_time(value):
        return field, f'Invalid value: "{value}": {field} in body must be of type date-time: "{value}"'
    return None


_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def _date_time(text: str) -> bool:
    """RFC 3339, as the ``date-time`` format the server checks (a real date and time of day)."""
    if not _RFC3339.match(text):
        return False
    try:
        datetime.fromisoformat(text.replace("z", "Z").replace("t", "T"))
    except ValueError:
        return False
    return True


def _buffer(obj: JsonObj, version: str) -> Problem | None:
    """The schema (the whole object: spec and status alike, as the server checks a ``/status`` write
    too), then the spec's CEL rules."""
    problem = conforms("", obj, BUFFER_SCHEMA)
    if problem:
        return problem
    spec = obj["spec"]
    if "podTemplateRef" in spec and "replicas" not in spec and "limits" not in spec:
        return _cel("spec", _NEEDS_COUNT)
    if "podTemplateRef" in spec and "scalableRef" in spec:
        return _cel("spec", _ONE_REF.get(version, _ONE_REF["v1beta1"]))
    return None


_CHECKS: Mapping[str, Callable[[JsonObj, str], Problem | None]] = {
    PROVISIONING_REQUEST: lambda obj, _version: _provisioning_request(obj),
    CAPACITY_QUOTA: lambda obj, _version: _quota(obj),
    CAPACITY_BUFFER: _buffer,
}


def check(store_kind: str, obj: JsonObj, version: str = "") -> Problem | None:
    """The first way ``obj`` breaks its CRD's schema or rules, written through ``version``; None when it
    keeps them (or is no kind modelled here)."""
    rule = _CHECKS.get(store_kind)
    return rule(obj, version) if rule else None


def with_defaults(store_kind: str, obj: JsonObj) -> JsonObj:
    """``obj`` with its CRD's defaults filled in (a CapacityBuffer's ``spec.provisioningStrategy``)."""
    spec = obj.get("spec")
    if store_kind == CAPACITY_BUFFER and isinstance(spec, dict) and "provisioningStrategy" not in spec:
        return {**obj, "spec": {"provisioningStrategy": ACTIVE_CAPACITY, **spec}}
    return obj
