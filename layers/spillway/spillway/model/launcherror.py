"""Why EC2 launched nothing: one classification for every launch path.

A gang's CreateFleet reports an error code per override it could not launch (EC2 API Reference,
``CreateFleetError``: ``ErrorCode``, ``ErrorMessage``, ``LaunchTemplateAndOverrides``, ``Lifecycle``;
the codes are those of "Error codes for the Amazon EC2 API"), or refuses the whole call with one; an Auto
Scaling group's failed launch activity carries EC2's words in its ``StatusMessage``, often with the code
("Could not launch Spot Instances. UnfulfillableCapacity - ..."). Both are read here, into three kinds:

``capacity``
    EC2 has none of that pool now (type, zone, capacity type): it heals by itself, so a back-off and a
    launch elsewhere are right. The codes EC2 documents for it, as Karpenter's AWS provider also reads
    them as unfulfillable capacity (``pkg/errors``, ``IsUnfulfillableCapacity``), and
    ``SpotMaxPriceTooLow`` (the Spot price is above the maximum asked right now).
``quota``
    An account limit is full (the On-Demand vCPU limit, the instance or Spot instance count): no pool
    of the region helps until work ends or the quota is raised (Service Quotas), so a back-off is right
    too, but it is the operator's to raise.
``settings``
    Anything else: the caller may not (``UnauthorizedOperation``, ``AuthFailure.*``: a missing permission
    or service-linked role), or the launch itself is wrong (``InvalidLaunchTemplateId.*``, ``InvalidAMIID.*``,
    ``InvalidParameterValue``, a KMS key in the wrong state, ``Client.InvalidKMSKey.InvalidState``, a
    subnet without free addresses). Waiting does not heal it; somebody has to fix the group, its launch
    template or Spillway's role. This is what scale-up always called a failure "not for capacity (the
    group's own settings)".

Pure: no boto3, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

LaunchErrorKind = Literal["capacity", "quota", "settings"]

#: EC2 has no capacity for the request now (EC2 API error codes: "not enough capacity", "not enough
#: spare capacity to fulfill your request for Spot Instances", ...). ``Unsupported``: the instance type is
#: not offered in that zone now, which Karpenter also reads as an unavailable offering.
CAPACITY_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientCapacity",
        "InsufficientHostCapacity",
        "InsufficientReservedInstanceCapacity",
        "UnfulfillableCapacity",
        "SpotMaxPriceTooLow",
        "Unsupported",
    }
)
#: An account quota is full (EC2 API error codes: the vCPU limit of running On-Demand instances, the
#: number of instances, the number of Spot Instances).
QUOTA_CODES = frozenset({"VcpuLimitExceeded", "InstanceLimitExceeded", "MaxSpotInstanceCountExceeded"})
#: Codes of a launch refused for its settings or the caller's permissions, named so a whole-call refusal
#: of CreateFleet can say so (any code not of capacity or a quota is ``settings`` in a launch's errors)
SETTINGS_CODES = frozenset(
    {
        "UnauthorizedOperation",
        "AccessDenied",
        "MissingParameter",
        "UnsupportedOperation",
        "OptInRequired",
        "InsufficientFreeAddressesInSubnet",
        "Client.InvalidKMSKey.InvalidState",
    }
)
#: What a Lambda step names each kind (a state machine's Fail state and the alarm's execution show it)
ERROR_NAMES: dict[LaunchErrorKind, str] = {
    "capacity": "CapacityUnavailable",
    "quota": "QuotaExceeded",
    "settings": "LaunchMisconfigured",
}

# code-like tokens of a message: "InvalidAMIID.NotFound", "Client.InvalidKMSKey.InvalidState"
_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:\.[A-Za-z0-9]+)*")
# EC2's words without a code, as a scaling activity's StatusMessage often carries them (the Auto Scaling
# User Guide's examples and troubleshooting page): an On-Demand shortage ("We currently do not have
# sufficient p4d.24xlarge capacity in the Availability Zone you requested"), a Spot one ("There is no Spot
# capacity available"), SpotMaxPriceTooLow's ("Your Spot request price of 0.001 is lower than the minimum
# required Spot request fulfillment price of 0.0031"), Unsupported's ("Your requested instance type
# (g4dn.xlarge) is not supported in your requested Availability Zone (ca-central-1d)"); the vCPU limit
# ("You have requested more vCPU capacity than your current vCPU limit of 32 allows"), the Spot count's
# ("Max spot instance count exceeded")
_CAPACITY_WORDS = re.compile(
    r"do not have sufficient .*capacity|no spot capacity available|minimum required spot request fulfillment"
    r"|not supported in your requested availability zone",
    re.IGNORECASE,
)
_QUOTA_WORDS = re.compile(
    r"current vcpu limit|instance limit|limit on the number of|max spot instance count exceeded",
    re.IGNORECASE,
)
# An EC2 state reason's prefix before a code ("Server.InsufficientInstanceCapacity", StateReason.Code)
_FAULT_PREFIX = re.compile(r"^(Server|Client)\.")


def is_settings_code(code: str) -> bool:
    """An EC2 error code that names a launch refused for its settings or the caller's permissions:
    one of :data:`SETTINGS_CODES`, an ``Invalid...`` code (a resource or parameter EC2 does not accept),
    an ``AuthFailure...`` one, or a KMS key's (``...InvalidKMSKey...``)."""
    return (
        code in SETTINGS_CODES
        or re.match(r"(Client\.)?(Invalid[A-Z]|AuthFailure)", code) is not None
        or "InvalidKMSKey" in code
    )


def code_kind(code: str) -> LaunchErrorKind | None:
    """The kind one EC2 error code names, or None when it names none of them plainly. A state reason's
    ``Server.`` or ``Client.`` prefix is read past (``Server.InsufficientInstanceCapacity``)."""
    bare = _FAULT_PREFIX.sub("", code)
    if bare in QUOTA_CODES:
        return "quota"
    if bare in CAPACITY_CODES:
        return "capacity"
    return "settings" if is_settings_code(code) else None


def launch_error_kind(text: str) -> LaunchErrorKind:
    """The kind of a failed launch from EC2's code or words (a CreateFleet ``ErrorCode``, or a scaling
    activity's ``StatusMessage``). A settings code anywhere wins (that override will not heal), then a
    quota, then capacity; a text that names none of them is ``settings``."""
    kinds = {kind for token in _TOKEN.findall(text) if (kind := code_kind(token)) is not None}
    if "settings" in kinds:
        return "settings"
    if "quota" in kinds or _QUOTA_WORDS.search(text):
        return "quota"
    if "capacity" in kinds or _CAPACITY_WORDS.search(text):
        return "capacity"
    return "settings"


# EC2's words for a launch refused for its settings without a code, as a scaling activity's StatusMessage
# carries them: an AMI, security group, launch template or instance profile that is gone ("The image id
# '[ami-0abc]' does not exist"), a permission ("You are not authorized to use launch template"), a value
# EC2 refuses ("Value (x) for parameter iamInstanceProfile.name is invalid"), a subnet out of addresses, a
# KMS key "in an incorrect state"
_SETTINGS_WORDS = re.compile(
    r"does not exist|not authorized|\binvalid\b|not enough free addresses|incorrect state", re.IGNORECASE
)


def names_settings(text: str) -> bool:
    """Whether EC2's ``text`` says plainly that the launch was refused for its settings or permissions:
    a settings code (:func:`is_settings_code`) or its words, and neither a quota nor a shortage first
    (:func:`launch_error_kind`). Stricter than ``launch_error_kind(text) == "settings"``, which is also
    what a text naming nothing known reads as (``Server.InternalError``, a Spot instance interrupted
    before it was in service): the right back-off for a launch that failed, but no evidence that
    somebody has to fix the group (the ``LaunchesMisconfigured`` alarm)."""
    if launch_error_kind(text) != "settings":
        return False
    return any(is_settings_code(token) for token in _TOKEN.findall(text)) or bool(
        _SETTINGS_WORDS.search(text)
    )


def fleet_error_name(codes: Iterable[str]) -> str:
    """The error a fleet that launched fewer instances than asked fails with, from its Errors' codes:
    ``LaunchMisconfigured`` when any override was refused for its settings (waiting heals only the
    others), else ``QuotaExceeded`` for a full quota, else ``CapacityUnavailable`` (also when EC2 gave no
    error: ``MinTargetCapacity`` was not met)."""
    kinds = {launch_error_kind(code) for code in codes if code}
    worst: tuple[LaunchErrorKind, ...] = ("settings", "quota")
    return ERROR_NAMES[next((kind for kind in worst if kind in kinds), "capacity")]
