"""The instances a fleet-mode gang launch made (:mod:`spillway.act.gang`), as observe reads them from EC2.

A fleet's instances carry the tags below from CreateFleet on; they are outside the group until the
execution attaches them, and the planner sweeps those an execution left there
(:mod:`spillway.planner.gangsweep`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

TAG_ATTEMPT = "spillway.io/gang-attempt"  # on every instance a fleet launches: finds them all
TAG_GANG = "spillway.io/gang"
TAG_CLUSTER = "spillway.io/cluster"  # TerminateInstances is allowed only on instances tagged so
# EC2 Auto Scaling tags every instance of a group with its name (the tag is reserved to it)
TAG_ASG = "aws:autoscaling:groupName"
# what DescribeInstances is asked for: an instance that may still cost (a stopped one keeps its volumes)
SWEPT_STATES = ("pending", "running", "stopping", "stopped")


@dataclass(frozen=True, slots=True)
class FleetInstance:
    """One EC2 instance tagged with a gang attempt of this cluster. ``group``: the Auto Scaling group
    its ``aws:autoscaling:groupName`` tag names, if any."""

    instance_id: str
    region: str
    launched_at: datetime
    state: str
    attempt: str
    gang: str = ""
    group: str | None = None

    @classmethod
    def from_ec2(cls, region: str, raw: Mapping[str, Any]) -> FleetInstance:
        """From one ``Instances`` entry of DescribeInstances."""
        tags = {str(t.get("Key")): str(t.get("Value", "")) for t in raw.get("Tags") or ()}
        launched = raw["LaunchTime"]
        if not isinstance(launched, datetime):
            launched = datetime.fromisoformat(str(launched).replace("Z", "+00:00"))
        return cls(
            instance_id=str(raw["InstanceId"]),
            region=region,
            launched_at=launched,
            state=str((raw.get("State") or {}).get("Name", "")),
            attempt=tags.get(TAG_ATTEMPT, ""),
            gang=tags.get(TAG_GANG, ""),
            group=tags.get(TAG_ASG) or None,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "instance_id": self.instance_id,
            "region": self.region,
            "launched_at": self.launched_at.isoformat(),
            "state": self.state,
            "attempt": self.attempt,
            "gang": self.gang,
        }
        if self.group:
            out["group"] = self.group
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FleetInstance:
        return cls(
            instance_id=str(d["instance_id"]),
            region=str(d["region"]),
            launched_at=datetime.fromisoformat(str(d["launched_at"])),
            state=str(d.get("state", "")),
            attempt=str(d.get("attempt", "")),
            gang=str(d.get("gang", "")),
            group=d.get("group") or None,
        )
