"""The instances a fleet-mode gang launch made (:mod:`spillway.act.gang`), as observe reads them from EC2.

A fleet's instances carry the tags below from CreateFleet on; they are outside the group until the
execution attaches them, and the planner sweeps those an execution left there
(:mod:`spillway.planner.gangsweep`).

One reading of a DescribeInstances answer (:func:`swept_instances`) serves observe, whose call EC2
filters already, and ``spillway plan --instances``, which reads what ``aws ec2 describe-instances``
printed, filtered or not: both keep the same instances (:func:`is_swept`) and parse them alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from spillway.model.aws import INSTANCE_ID_FORM, REGION_FORM, ZONE_FORM
from spillway.model.utc import aware

TAG_ATTEMPT = "spillway.io/gang-attempt"  # on every instance a fleet launches: finds them all
TAG_GANG = "spillway.io/gang"
TAG_CLUSTER = "spillway.io/cluster"  # TerminateInstances is allowed only on instances tagged so
# EC2 Auto Scaling tags every instance of a group with its name (the tag is reserved to it)
TAG_ASG = "aws:autoscaling:groupName"
# what DescribeInstances is asked for: an instance that may still cost (a stopped one keeps its volumes)
SWEPT_STATES = ("pending", "running", "stopping", "stopped")
_ZONE = re.compile(ZONE_FORM)
_REGION = re.compile(REGION_FORM)
_INSTANCE_ID = re.compile(INSTANCE_ID_FORM)


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
    def from_ec2(cls, region: str | None, raw: Mapping[str, Any]) -> FleetInstance:
        """From one ``Instances`` entry of DescribeInstances: boto3's (``LaunchTime`` a datetime) or the
        AWS CLI's JSON (an ISO 8601 string). ``region``: the region the call asked; None takes the
        instance's own from its ``Placement.AvailabilityZone`` (``us-east-1a``; a Local or Wavelength
        Zone, ``us-west-2-lax-1a``, names its parent region the same way). A field that cannot be read
        is a ValueError ``"<field>: <why>"``."""
        tags = _tags(raw)
        instance_id = raw.get("InstanceId")
        if not isinstance(instance_id, str) or not _INSTANCE_ID.fullmatch(instance_id):
            raise ValueError(f"InstanceId: not an EC2 instance id: {instance_id!r}")
        return cls(
            instance_id=instance_id,
            region=region or _region(raw),
            launched_at=_launch_time(raw),
            state=_state(raw),
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


def is_swept(raw: Mapping[str, Any], cluster: str) -> bool:
    """Whether observe's DescribeInstances answers with this instance (the filters of
    :meth:`spillway.adapters.aws.AwsAdapter.fleet_instances`): tagged with this cluster and with a gang
    attempt (any value), and pending, running, stopping or stopped (one that may still cost)."""
    tags = _tags(raw)
    return tags.get(TAG_CLUSTER) == cluster and TAG_ATTEMPT in tags and _state(raw) in SWEPT_STATES


def swept_instances(
    reservations: Any, cluster: str, region: str | None = None
) -> Iterator[tuple[str, FleetInstance]]:
    """The gang attempts' instances of this cluster in a DescribeInstances answer's ``Reservations``
    (:func:`is_swept`), each with where it is (``Reservations[0].Instances[1]``); ``region`` as
    :meth:`FleetInstance.from_ec2` takes it. A ValueError names the field: ``"<where>.<field>: <why>"``."""
    if not isinstance(reservations, list):
        raise ValueError("Reservations: missing or not a list")
    for r, reservation in enumerate(reservations):
        instances = reservation.get("Instances") if isinstance(reservation, Mapping) else None
        if not isinstance(instances, list):
            raise ValueError(f"Reservations[{r}].Instances: missing or not a list")
        for i, raw in enumerate(instances):
            where = f"Reservations[{r}].Instances[{i}]"
            if not isinstance(raw, Mapping):
                raise ValueError(f"{where}: not an object")
            try:
                if is_swept(raw, cluster):
                    yield where, FleetInstance.from_ec2(region, raw)
            except ValueError as exc:
                raise ValueError(f"{where}.{exc}") from None


def _tags(raw: Mapping[str, Any]) -> dict[str, str]:
    """An instance's tags (none: it has no ``Tags``)."""
    tags = raw.get("Tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, Mapping) for t in tags):
        raise ValueError(f"Tags: not a list of {{Key, Value}}: {str(tags)[:80]}")
    return {str(t.get("Key")): str(t.get("Value", "")) for t in tags}


def _state(raw: Mapping[str, Any]) -> str:
    state = raw.get("State")
    return str(state.get("Name", "")) if isinstance(state, Mapping) else ""


def _launch_time(raw: Mapping[str, Any]) -> datetime:
    launched = raw.get("LaunchTime")
    if launched is None:
        raise ValueError("LaunchTime: Field required")
    if not isinstance(launched, datetime):
        try:
            launched = datetime.fromisoformat(str(launched).replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"LaunchTime: not an ISO 8601 time: {str(launched)[:80]!r}") from None
    return aware(launched)


def _region(raw: Mapping[str, Any]) -> str:
    """The region of the instance's Availability Zone: a zone is its region and a letter, or for a Local
    or Wavelength Zone further dash-separated parts (``spillway.model.aws.ZONE_FORM``)."""
    placement = raw.get("Placement")
    zone = placement.get("AvailabilityZone") if isinstance(placement, Mapping) else None
    if zone is None:
        raise ValueError("Placement.AvailabilityZone: Field required (the instance's region is its zone's)")
    found = _REGION.match(zone) if isinstance(zone, str) and _ZONE.fullmatch(zone) else None
    if found is None:
        raise ValueError(f"Placement.AvailabilityZone: not an Availability Zone: {str(zone)[:80]!r}")
    return found.group(0)
