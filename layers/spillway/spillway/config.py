"""Configuration: the planner's thresholds (pure data) and where they come from.

:class:`PlannerConfig` is what the planner reads; it is a frozen pydantic model and never looks at
the environment itself. ``load_config_file`` reads YAML or JSON for ``spillway plan --config``; what it
cannot use raises :class:`~spillway.errors.ConfigurationError` naming the file and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from spillway.errors import ConfigurationError
from spillway.model.quantity import QuantityError, to_milli

# Longest delay a *_minutes setting may hold: ten years is "never" for an autoscaler, and anything
# finite this size still fits the timedeltas the planner builds from it (inf and 1e300 do not).
MAX_MINUTES = 10 * 366 * 24 * 60


class NodeReserve(BaseModel):
    """Capacity the OS, kubelet and system daemons keep for themselves on each node."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    cpu: str = "100m"
    memory: str = "1Gi"

    @field_validator("cpu", "memory", mode="before")
    @classmethod
    def _quantity(cls, value: Any) -> str:
        text = value if isinstance(value, str) else str(value)
        try:
            to_milli(text)
        except QuantityError as exc:
            raise ValueError(str(exc)) from None
        return text

    def as_resources(self) -> dict[str, int]:
        return {"cpu": to_milli(self.cpu), "memory": to_milli(self.memory)}


def _minutes(default: float) -> Any:
    return Field(default=default, ge=0, le=MAX_MINUTES, allow_inf_nan=False)


class PlannerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cluster: str | None = None
    regions: tuple[str, ...] = ()
    scale_down_idle_minutes: float = _minutes(10)
    scale_down_delay_after_launch_minutes: float = _minutes(10)
    max_scale_in_fraction: float = Field(default=0.1, ge=0, le=1, allow_inf_nan=False)
    launch_failure_backoff_minutes: float = _minutes(15)
    # A drained node is not planned again for this long: its drain (deadline 15 min) owns it.
    drain_claim_minutes: float = _minutes(20)
    # A node still carrying Spillway's cordon this long after it was made has no drain that owns it
    # (a DrainNode execution ends within 26 h): the planner finishes or restores it. Above 26 h.
    orphaned_drain_minutes: float = Field(default=1620, gt=0, le=MAX_MINUTES, allow_inf_nan=False)
    expendable_priority_cutoff: int = -10
    node_reserve: NodeReserve = Field(default_factory=NodeReserve)


def _read_document(path: str | Path) -> Any:
    source = str(path)
    try:
        return yaml.safe_load(Path(path).read_bytes().decode("utf-8"))
    except OSError as exc:
        raise ConfigurationError(exc.strerror or "cannot be read", source=source) from None
    except UnicodeDecodeError as exc:
        raise ConfigurationError(f"not UTF-8 text (byte {exc.start})", source=source) from None
    except yaml.YAMLError as exc:
        first = f"{exc}".splitlines()[0] if f"{exc}" else type(exc).__name__
        raise ConfigurationError(f"not valid YAML or JSON: {first}", source=source) from None
    except RecursionError:
        raise ConfigurationError("not usable YAML or JSON: nested too deeply", source=source) from None
    except ValueError as exc:  # an integer of more digits than Python converts (4300)
        raise ConfigurationError(f"not usable YAML or JSON: {exc}", source=source) from None


def load_config_file(path: str | Path) -> PlannerConfig:
    """The planner configuration in a YAML or JSON file; :class:`ConfigurationError` naming the field."""
    from pydantic import ValidationError

    raw = _read_document(path) or {}
    if not isinstance(raw, dict):
        raise ConfigurationError("expected a mapping of config keys", source=str(path), field="top level")
    try:
        return PlannerConfig.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "top level"
        msg = "unknown config key" if err["type"] == "extra_forbidden" else err["msg"]
        raise ConfigurationError(msg, source=str(path), field=where) from None
