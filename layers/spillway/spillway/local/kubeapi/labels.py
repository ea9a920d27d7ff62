"""``metadata.labels`` as the API server takes them, on every kind.

* A label's value is a JSON string: any other JSON type does not decode into ``ObjectMeta.Labels``
  (``map[string]string``), a 400 naming the field as the decoder words it.
* Keys and values are validated as apimachinery's ``ValidateLabels`` (pkg/apis/meta/v1/validation)
  does with ``util/validation``: a key is a qualified name (an optional DNS-1123 subdomain prefix of at
  most 253 characters and a ``/``, then a name of at most 63 alphanumerics, ``-``, ``_`` or ``.``,
  beginning and ending with an alphanumeric: ``IsQualifiedName``); a value is empty or such a name
  (``IsValidLabelValue``). Each bad key or value is one ``Invalid`` error at ``metadata.labels``, all
  in one 422 with the kind's other errors.
"""

from __future__ import annotations

import json
import re
from typing import Any

from spillway.local.kubeapi.status import FieldError, KubeApiError, bad_request

_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME_RE = re.compile(f"^{_NAME}$")
_VALUE_RE = re.compile(f"^({_NAME})?$")
_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NAME_WORDS = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character"
)
_VALUE_WORDS = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
    "must start and end with an alphanumeric character"
)
_SUBDOMAIN_WORDS = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
    "must start and end with an alphanumeric character"
)
_FIELD = "metadata.labels"


def _labels(obj: Any) -> Any:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return meta.get("labels") if isinstance(meta, dict) else None


def undecodable(kind: str, version: str, obj: Any) -> KubeApiError | None:
    """The 400 of labels that are no map of strings, or None."""
    labels = _labels(obj)
    if labels is None:
        return None
    wanted, found = "map[string]string", labels
    if isinstance(labels, dict):
        wanted, found = "string", next((v for v in labels.values() if not isinstance(v, str)), "")
    if isinstance(found, str):
        return None
    why = f"json: cannot unmarshal {_go(found)} into Go struct field ObjectMeta.metadata.labels of type {wanted}"
    return bad_request(f'{kind} in version "{version}" cannot be handled as a {kind}: {why}')


def _go(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return f"number {json.dumps(value)}"
    if isinstance(value, dict):
        return "object"
    return "array" if isinstance(value, list) else "string"


def problems(obj: Any) -> list[FieldError]:
    """One ``Invalid`` error per bad key or value of ``metadata.labels`` (decodable ones)."""
    labels = _labels(obj)
    if not isinstance(labels, dict):
        return []
    found: list[FieldError] = []
    for key, value in sorted(labels.items()):
        found += [FieldError(_FIELD, f'Invalid value: "{key}": {why}') for why in key_problems(key)]
        if isinstance(value, str):
            found += [FieldError(_FIELD, f'Invalid value: "{value}": {why}') for why in value_problems(value)]
    return found


def key_problems(key: str) -> list[str]:
    """``IsQualifiedName``'s words for ``key``, none when it is one."""
    parts = key.split("/")
    if len(parts) > 2:
        return [
            "a qualified name " + _NAME_WORDS + " with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    errors = []
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        elif len(prefix) > 253:
            errors.append("prefix part must be no more than 253 characters")
        elif not _SUBDOMAIN_RE.fullmatch(prefix):
            errors.append("prefix part " + _SUBDOMAIN_WORDS)
    name = parts[-1]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    if not _NAME_RE.fullmatch(name):
        errors.append("name part " + _NAME_WORDS)
    return errors


def value_problems(value: str) -> list[str]:
    """``IsValidLabelValue``'s words for ``value``, none when it is one."""
    errors = []
    if len(value) > 63:
        errors.append("must be no more than 63 characters")
    if not _VALUE_RE.fullmatch(value):
        errors.append(_VALUE_WORDS)
    return errors
