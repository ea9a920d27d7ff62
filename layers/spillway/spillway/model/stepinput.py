"""A state machine's Lambda step input, checked against the closed model of what its ASL sends for the
step's ``action`` (:data:`spillway.model.scale.STEP_INPUTS`, :data:`spillway.model.gang.GANG_STEP_INPUTS`)
before anything is read or written."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from spillway.errors import InputError, refused_input


def step_input(event: Any, models: Mapping[str, type[BaseModel]], kind: str) -> BaseModel:
    """``event`` validated by the model of its ``action``, or :class:`InputError` naming the first bad
    field ("group.to", "prep.fleet.subnets.0", ...); ``kind`` ("scale", "gang") names the steps."""
    if not isinstance(event, Mapping):
        raise InputError(f"a {kind} step's input is a JSON object, not {type(event).__name__}")
    action = event.get("action")
    model = models.get(action) if isinstance(action, str) else None
    if model is None:
        raise InputError(f"unknown action {str(action)[:80]!r}: one of {', '.join(models)}", field="action")
    try:
        return model.model_validate(event)
    except ValidationError as exc:
        raise refused_input(exc, what=f"{action} step") from None
