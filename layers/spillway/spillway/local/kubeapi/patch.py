"""The three patch formats of the Kubernetes API.

* JSON merge patch (RFC 7386, ``application/merge-patch+json``): maps merge, ``null`` deletes, any
  other value (lists included) replaces.
* Strategic merge patch (``application/strategic-merge-patch+json``): a merge patch in which some lists
  are merged by a key (``containers`` by ``name``, ``conditions`` by ``type``) or as sets of scalars
  (``finalizers``), as the Go struct tags say; every other list is *atomic* and replaced whole.
  Note that ``Node.spec.taints`` is atomic on a real API server (it carries no ``patchMergeKey``), so a
  strategic patch with one taint replaces the whole list, exactly as a merge patch does. Directives:
  ``$patch: replace|delete`` in maps and in keyed lists, ``$deleteFromPrimitiveList/<field>`` and
  ``$retainKeys`` are applied; ``$setElementOrder/<field>`` is accepted and ignored.
* JSON patch (RFC 6902, ``application/json-patch+json``): ``add``, ``remove``, ``replace``, ``move``,
  ``copy``, ``test`` with JSON pointers (RFC 6901).

None of the functions mutates its inputs; untouched sub-trees may be shared with the input.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

from spillway.model.quantity import is_digits

T = TypeVar("T")
JsonObj = dict[str, Any]
MergeKeys = Mapping[tuple[str, ...], str | None]


class PatchError(ValueError):
    """A patch that cannot be applied (the API answers 422) or is malformed (``bad_request``: 400)."""

    def __init__(self, message: str, *, bad_request: bool = False) -> None:
        super().__init__(message)
        self.bad_request = bad_request


def clone(value: T) -> T:
    """A deep copy of JSON data (faster than ``copy.deepcopy`` for it)."""
    copied: T = json.loads(json.dumps(value))
    return copied


# --- RFC 7386 --------------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    result: JsonObj = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            result[key] = merge_patch(result.get(key), value)
        else:
            result[key] = value
    return result


# --- strategic merge patch -------------------------------------------------------------------

_DELETE = object()
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"
_SET_ORDER = "$setElementOrder/"


def strategic_merge_patch(target: Any, patch: Any, merge_keys: MergeKeys) -> Any:
    if not isinstance(patch, dict):
        raise PatchError("a strategic merge patch must be a JSON object", bad_request=True)
    out = _smp_map(target, patch, (), merge_keys)
    return {} if out is _DELETE else out


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$") and v is not None}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value


def _smp_map(target: Any, patch: JsonObj, path: tuple[str, ...], keys: MergeKeys) -> Any:
    directive = patch.get("$patch")
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        return _strip_directives(patch)
    if directive not in (None, "merge"):
        raise PatchError(f"unknown patch type: {directive}", bad_request=True)
    result: JsonObj = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        sub = (*path, key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = _smp_map(result.get(key), value, sub, keys)
            if merged is _DELETE:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list) and sub in keys:
            result[key] = _smp_list(result.get(key), value, sub, keys)
        else:
            result[key] = _strip_directives(value)
    for key, value in patch.items():
        if key.startswith(_DELETE_PRIMITIVE):
            name = key[len(_DELETE_PRIMITIVE) :]
            if isinstance(result.get(name), list) and isinstance(value, list):
                result[name] = [v for v in result[name] if v not in value]
        elif key == "$retainKeys" and isinstance(value, list):
            result = {k: v for k, v in result.items() if k in value}
        elif (
            key.startswith("$")
            and key != "$patch"
            and not key.startswith(_SET_ORDER)
            and key != "$retainKeys"
        ):
            raise PatchError(f"unknown directive {key!r} in strategic merge patch", bad_request=True)
    return result


def _smp_list(target: Any, patch: list[Any], path: tuple[str, ...], keys: MergeKeys) -> list[Any]:
    merge_key = keys[path]
    current: list[Any] = list(target) if isinstance(target, list) else []
    if any(isinstance(e, dict) and e.get("$patch") == "replace" for e in patch):
        return [
            _strip_directives(e) for e in patch if not (isinstance(e, dict) and e.get("$patch") == "replace")
        ]
    if merge_key is None:  # a set of scalars
        for item in patch:
            if item not in current:
                current.append(item)
        return current
    for item in patch:
        if not isinstance(item, dict):
            raise PatchError(f"{'.'.join(path)}: elements must be objects with the key {merge_key!r}")
        if merge_key not in item:
            raise PatchError(
                f"{'.'.join(path)}: map: {item} does not contain declared merge key: {merge_key}"
            )
        index = next(
            (i for i, e in enumerate(current) if isinstance(e, dict) and e.get(merge_key) == item[merge_key]),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del current[index]
            continue
        if index is None:
            current.append(_strip_directives(item))
        else:
            merged = _smp_map(current[index], item, path, keys)
            current[index] = {} if merged is _DELETE else merged
    return current


# --- RFC 6902 --------------------------------------------------------------------------------


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str):
        raise PatchError(f"path must be a string, not {path!r}", bad_request=True)
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer must start with '/': {path!r}", bad_request=True)
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _index(container: list[Any], token: str, path: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not is_digits(token) or (token != "0" and token.startswith("0")):
        raise PatchError(f"invalid array index {token!r} in {path}")
    index = int(token)
    if index > len(container) or (index == len(container) and not allow_end):
        raise PatchError(f"array index {index} out of bounds in {path}")
    return index


def _get(doc: Any, tokens: list[str], path: str) -> Any:
    value = doc
    for token in tokens:
        if isinstance(value, dict):
            if token not in value:
                raise PatchError(f"path {path} does not exist")
            value = value[token]
        elif isinstance(value, list):
            value = value[_index(value, token, path, allow_end=False)]
        else:
            raise PatchError(f"path {path} does not exist")
    return value


def _add(doc: Any, tokens: list[str], value: Any, path: str) -> Any:
    if not tokens:
        return value
    parent = _get(doc, tokens[:-1], path)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, allow_end=True), value)
    else:
        raise PatchError(f"cannot add at {path}: parent is not a container")
    return doc


def _remove(doc: Any, tokens: list[str], path: str) -> Any:
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _get(doc, tokens[:-1], path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"unable to remove nonexistent key: {last}: missing value")
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, path, allow_end=False)]
    else:
        raise PatchError(f"cannot remove {path}: parent is not a container")
    return doc


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def json_patch(doc: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations", bad_request=True)
    doc = clone(doc)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op:
            raise PatchError(f"invalid JSON patch operation: {op!r}", bad_request=True)
        kind = op["op"]
        tokens = _pointer(op.get("path"))
        path = str(op["path"])
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"operation {kind} on {path} has no value", bad_request=True)
        if kind == "add":
            doc = _add(doc, tokens, clone(op["value"]), path)
        elif kind == "remove":
            doc = _remove(doc, tokens, path)
        elif kind == "replace":
            _get(doc, tokens, path)  # must exist
            doc = (
                _add(_remove(doc, tokens, path), tokens, clone(op["value"]), path) if tokens else op["value"]
            )
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from"))
            origin = str(op.get("from"))
            value = clone(_get(doc, source, origin))
            if kind == "move":
                doc = _remove(doc, source, origin)
            doc = _add(doc, tokens, value, path)
        elif kind == "test":
            if not _json_equal(_get(doc, tokens, path), op["value"]):
                raise PatchError(f"testing value {path} failed")
        else:
            raise PatchError(f"Unexpected kind: {kind}", bad_request=True)
    return doc
