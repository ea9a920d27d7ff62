"""Reading data Spillway itself stored, tolerant of fields a newer build of Spillway added.

Spillway's functions hand each other data through DynamoDB (the state item, the snapshots), and a
build reads what another build wrote: a deploy rolled back to an older build reads the state the newer
one wrote, and while ``sam deploy`` updates the functions one at a time a new observe writes snapshots
an old planner reads. The models of that data are closed (``extra="forbid"``) so that Spillway's own
code cannot misspell a field; read as they are, a field a newer build added would make the older build
refuse the whole item, every tick, until the entry expired or an operator deleted it.

:func:`load_stored` is the one rule at that boundary: a field this build does not know, at any depth
(in the model, in a model inside it, in a dict or list of models), is left out before the model
validates, and named (:func:`describe_unknown`: ``pools.spot/us-east-1a/p3.16xlarge.nodes``) for one
warning line; a known field keeps its validation, and its error names it as before. Only the reader of
stored data uses it: input a person writes (the configuration, a drain request, a step input, CLI
flags) stays closed, so a misspelt key is refused there rather than ignored.

Ignoring a field is safe only when the data without it means something this build can act on; each
model's fields default to what data written before the field meant (the state's sections and fields
are all optional with such defaults), and a reader that rewrites what it read drops the field: the
adapters document what that costs for each (:mod:`spillway.adapters.state_store`).
"""

from __future__ import annotations

import logging
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

PATH_LIMIT = 120  # characters of one field's path in the warning
PATHS_SHOWN = 10  # paths named in one warning; the rest are counted


def load_stored(model: type[M], data: Any) -> tuple[M, tuple[str, ...]]:
    """``data`` validated as ``model`` with every field ``model`` (or a model within it) does not know
    left out, and the paths of those fields, in the order met. Raises ``ValidationError`` as
    ``model.model_validate`` does for a known field's bad value (its location names the field)."""
    unknown: list[str] = []
    cleaned = _clean(model, data, "", unknown)
    return model.model_validate(cleaned), tuple(unknown)


def describe_unknown(paths: Sequence[str]) -> str:
    """The paths for one log line: each cut to :data:`PATH_LIMIT` characters, at most
    :data:`PATHS_SHOWN` of them, the rest counted."""
    shown = [p if len(p) <= PATH_LIMIT else p[: PATH_LIMIT - 3] + "..." for p in paths[:PATHS_SHOWN]]
    more = len(paths) - len(shown)
    return ", ".join(shown) + (f" (and {more} more)" if more > 0 else "")


def warn_unknown(what: str, paths: Sequence[str], warn: Callable[[str], None] | None = None) -> None:
    """One warning naming the fields ``what`` (``state of ml``) had that this build ignored; nothing
    when there were none. ``warn``: where the line goes (default: this module's logger, WARNING)."""
    if not paths:
        return
    line = (
        f"{what}: ignored {len(paths)} field(s) this build of Spillway does not know (written by a "
        f"newer build?): {describe_unknown(paths)}"
    )
    (warn or logging.getLogger(__name__).warning)(line)


def _clean(tp: Any, value: Any, path: str, unknown: list[str]) -> Any:
    """``value`` as type ``tp`` would read it, with the fields no model along the way knows left out
    (their paths appended to ``unknown``). A value of another shape than ``tp`` is left as it is: the
    model's validation names it."""
    tp = _unwrap(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return _clean_model(tp, value, path, unknown) if isinstance(value, Mapping) else value
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        model = _only_model(args)
        return value if model is None else _clean(model, value, path, unknown)
    if origin in (dict, Mapping) and len(args) == 2 and isinstance(value, Mapping):
        return {k: _clean(args[1], v, _join(path, str(k)), unknown) for k, v in value.items()}
    element = _element(origin, args)
    if element is not None and isinstance(value, list | tuple):
        return [_clean(element, v, _join(path, str(i)), unknown) for i, v in enumerate(value)]
    return value


def _only_model(args: tuple[Any, ...]) -> type[BaseModel] | None:
    """The one model among a union's members (``NodeState | None``); None when not exactly one."""
    models = [a for a in map(_unwrap, args) if isinstance(a, type) and issubclass(a, BaseModel)]
    return models[0] if len(models) == 1 else None


def _element(origin: Any, args: tuple[Any, ...]) -> Any:
    """The element type of ``list[X]``, ``Sequence[X]`` or ``tuple[X, ...]``; None for another type
    (a fixed-length tuple: no model Spillway stores has one)."""
    if origin in (list, Sequence) and len(args) == 1:
        return args[0]
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return args[0]
    return None


def _clean_model(model: type[BaseModel], value: Mapping[Any, Any], path: str, unknown: list[str]) -> Any:
    if model.model_config.get("extra") == "allow":
        return value
    fields: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        fields[name] = info.annotation
        if isinstance(info.alias, str):
            fields[info.alias] = info.annotation
    out: dict[Any, Any] = {}
    for key, item in value.items():
        where = _join(path, str(key))
        if key in fields:
            out[key] = _clean(fields[key], item, where, unknown)
        else:
            unknown.append(where)
    return out


def _unwrap(tp: Any) -> Any:
    while get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    return tp


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
