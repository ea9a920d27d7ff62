"""The base of every configuration model: unknown keys refused, frozen, and no boolean for a number.

Pydantic's lax mode takes ``True`` for 1 and ``False`` for 0 where a number is asked, and YAML 1.1 reads
an unquoted ``yes``, ``no``, ``on`` or ``off`` as a boolean: ``scale_down_idle_minutes: on`` would have
been one minute and ``max_scale_in_fraction: no`` nothing at all, silently. A boolean given for a field
that takes a number and no boolean is refused, naming the field.
"""

from __future__ import annotations

import types
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator


def _takes_number_not_boolean(annotation: Any) -> bool:
    union = get_origin(annotation) in (Union, types.UnionType)
    options = get_args(annotation) if union else (annotation,)
    return bool not in options and any(o in (int, float) for o in options)


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        if isinstance(value, bool) and field is not None and _takes_number_not_boolean(field.annotation):
            raise ValueError(
                f"a number is asked, not the boolean {str(value).lower()} (YAML reads an unquoted yes, no, "
                "on, off, true or false as one)"
            )
        return value
