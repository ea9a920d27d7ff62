"""The planner's memory between ticks: when each node went idle, which groups are backed off.

Wire form (state file and state table item)::

    {"nodes": {"<node>": {"idle_since": ISO, "draining_since": ISO (optional)}},
     "groups": {"<asg>": {"backoff_until": ISO, "reason": "..."}}}
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class NodeState(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    idle_since: datetime
    # Set when a plan drains the node: until the drain has cordoned it (or the claim lapses) later
    # plans must not drain it again.
    draining_since: datetime | None = None


class GroupState(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    backoff_until: datetime
    reason: str = ""


class State(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    nodes: dict[str, NodeState] = Field(default_factory=dict)
    groups: dict[str, GroupState] = Field(default_factory=dict)

    def to_wire(self) -> dict[str, dict[str, dict[str, str]]]:
        """The JSON form, keys sorted, times in UTC with ``Z``."""

        def iso(value: datetime) -> str:
            return value.isoformat().replace("+00:00", "Z")

        return {
            "nodes": {
                k: {"idle_since": iso(v.idle_since)}
                | ({"draining_since": iso(v.draining_since)} if v.draining_since else {})
                for k, v in sorted(self.nodes.items())
            },
            "groups": {
                k: {"backoff_until": iso(v.backoff_until), "reason": v.reason}
                for k, v in sorted(self.groups.items())
            },
        }
