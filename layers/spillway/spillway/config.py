"""Configuration: the planner's thresholds (pure data) and where they come from.

:class:`PlannerConfig` is what the planner reads; it is a frozen pydantic model and never looks at
the environment itself. ``load_config_file`` reads YAML or JSON for ``spillway plan --config``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from spillway.model.quantity import QuantityError, to_milli


class NodeReserve(BaseModel):
    """Capacity the OS, kubelet and system daemons keep for themselves on each node."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    cpu: str = "100m"
    memory: str = "1Gi"

    @field_validator("cpu", "memory", mode="before")
    @classmethod
    def _quantity(cls, value: Any) -> str:
        text = str(value)
        try:
            milli = to_milli(text)
        except QuantityError:
            raise ValueError(f"not a Kubernetes quantity: {text!r}") from None
        if milli < 0:
            raise ValueError("must not be negative")
        return text

    def as_resources(self) -> dict[str, int]:
        return {"cpu": to_milli(self.cpu), "memory": to_milli(self.memory)}


class PlannerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cluster: str | None = None
    regions: tuple[str, ...] = ()
    scale_down_idle_minutes: float = Field(default=10, ge=0)
    scale_down_delay_after_launch_minutes: float = Field(default=10, ge=0)
    max_scale_in_fraction: float = Field(default=0.1, ge=0, le=1)
    launch_failure_backoff_minutes: float = Field(default=15, ge=0)
    # A drained node is not planned again for this long: its drain (deadline 15 min) owns it.
    drain_claim_minutes: float = Field(default=20, ge=0)
    # A node still carrying Spillway's cordon this long after it was made has no drain that owns it
    # (a DrainNode execution ends within 26 h): the planner finishes or restores it. Above 26 h.
    orphaned_drain_minutes: float = Field(default=1620, gt=0)
    expendable_priority_cutoff: int = -10
    node_reserve: NodeReserve = Field(default_factory=NodeReserve)


class ConfigError(ValueError):
    """A configuration file that cannot be used; the message names the field."""


def load_config_file(path: str | Path) -> PlannerConfig:
    from pydantic import ValidationError

    try:
        raw = yaml.safe_load(Path(path).read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML or JSON: {exc}".splitlines()[0]) from None
    if not isinstance(raw, dict):
        raise ConfigError("top level: expected a mapping of config keys")
    try:
        return PlannerConfig.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "top level"
        msg = "unknown config key" if err["type"] == "extra_forbidden" else err["msg"]
        raise ConfigError(f"{where}: {msg}") from None
