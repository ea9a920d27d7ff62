"""What each Lambda step of the scale-up state machine receives (``statemachines/scale_up.asl.json``):
the execution input the plan writes (:func:`spillway.act.planning.execution_requests`) and the outputs
of the steps before, as the state machine's ``Parameters`` pass them on. Plain data; the steps are
:mod:`spillway.act.scale`, which validates every event against these before it calls anything.

Strict and closed (``extra="forbid"``): a number is a JSON number, never a string or a boolean, and a
key the state machine does not send is refused, so a typo or a hand-edited redrive fails naming the
field instead of being read as a default. Bounds follow the APIs the values end up in:

* Auto Scaling group names: 1 to 255 ASCII characters 33 to 126, no colon (CreateAutoScalingGroup,
  AutoScalingGroupName); capacities are the API's 32-bit Integer.
* instance ids ``i-`` and 8 or 17 hex digits; regions as AWS names them; Node names DNS subdomains
  (Kubernetes' ValidateNodeName).
* the cluster as template.yaml's ClusterName (EKS names are at most 100 characters).
* times RFC 3339 with their zone, as :func:`spillway.model.act.iso` writes them.
* ``round``/``max_rounds`` at most 10 and the waits at most a day, as RuntimeConfig bounds them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from spillway.model.act import CLUSTER_PATTERN, SNAPSHOT_KEY_PATTERN
from spillway.model.aws import INSTANCE_ID_FORM, REGION_FORM, RFC3339_FORM
from spillway.model.drain import NODE_NAME_PATTERN

INT32 = 2**31 - 1  # the Auto Scaling API's Integer (DesiredCapacity, MaxSize)
MAX_ROUNDS = 10  # RuntimeConfig.scale_up_max_rounds' bound
MAX_SECONDS = 86_400
MAX_NAMES = 1_000  # instance ids or Node names of one group in one step's input
# a scale-up's parts, MAX_SCALE_UP_GROUPS groups each: far above any account's Auto Scaling groups
MAX_PARTS = 10_000
# a prepare's ``before``: every live instance of the group, however large it is; bounded by what one
# Step Functions state carries (256 KB, "Step Functions service quotas"), '"i-0123456789abcdef0",' each
MAX_INSTANCES = 256 * 1024 // 22
GROUP_NAME_PATTERN = r"^[!-9;-~]+$"  # ASCII 33 to 126 but ':'
REGION_PATTERN = f"^{REGION_FORM}$"
INSTANCE_ID_PATTERN = f"^{INSTANCE_ID_FORM}$"
# spillway.act.planning.plan_id_for: execution names are [A-Za-z0-9-_], at most 80 with "up-"
PLAN_ID_PATTERN = r"^[A-Za-z0-9_-]+$"
RFC3339_PATTERN = f"^{RFC3339_FORM}$"

Cluster = Annotated[str, Field(min_length=1, max_length=100, pattern=CLUSTER_PATTERN)]
GroupName = Annotated[str, Field(min_length=1, max_length=255, pattern=GROUP_NAME_PATTERN)]
Region = Annotated[str, Field(min_length=1, max_length=32, pattern=REGION_PATTERN)]
InstanceId = Annotated[str, Field(pattern=INSTANCE_ID_PATTERN)]
NodeName = Annotated[str, Field(min_length=1, max_length=253, pattern=NODE_NAME_PATTERN)]
Capacity = Annotated[int, Field(ge=0, le=INT32)]
PlanId = Annotated[str, Field(min_length=1, max_length=77, pattern=PLAN_ID_PATTERN)]
Round = Annotated[int, Field(ge=1, le=MAX_ROUNDS)]
# which part of its plan's scale-up an execution is (spillway.act.planning.scale_up_parts); 1 when absent,
# as in an execution started by a build before parts were named
Part = Annotated[int, Field(ge=1, le=MAX_PARTS)]
Seconds = Annotated[float, Field(gt=0, le=MAX_SECONDS, allow_inf_nan=False)]
Time = Annotated[str, Field(max_length=40, pattern=RFC3339_PATTERN)]
Text = Annotated[str, Field(max_length=32_768)]  # a Catch's Cause: at most 32,768 characters
# which of Spillway's cordons a plan saw on a node (spillway.model.cluster.cordon_digest)
CordonDigest = Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")]

_CLOSED = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=False)


def _real_time(value: str) -> str:
    """The pattern lets a 13th month or a 25th hour through: the time must exist."""
    datetime.fromisoformat(value)
    return value


class ScaleGroup(BaseModel):
    """One group of the plan (:func:`spillway.act.planning.scale_up_groups`)."""

    model_config = _CLOSED

    group: GroupName
    region: Region
    from_: Capacity = Field(alias="from")
    to: Capacity
    grow: bool
    new_nodes: Capacity
    pods: Capacity
    uncordon: list[NodeName] = Field(max_length=MAX_NAMES)
    # absent in an execution started before plans carried reasons
    reasons: dict[NodeName, Text] = Field(default_factory=dict, max_length=MAX_NAMES)
    # which of Spillway's cordons the plan saw on each node it uncordons (NodeInfo.cordon_digest); a
    # node without an entry (a plan from a snapshot that did not keep it) is uncordoned as before
    cordons: dict[NodeName, CordonDigest] = Field(default_factory=dict, max_length=MAX_NAMES)
    # the group is carried from an earlier read (its region's Auto Scaling read failed): its nodes are
    # only uncordoned, and nothing is asked of Auto Scaling; absent from a plan's entry for a group read
    carried: bool = False

    @field_validator("to")
    @classmethod
    def _to_not_below_from(cls, to: int, info: ValidationInfo) -> int:
        low = info.data.get("from_")
        if low is not None and to < low:
            raise ValueError(f"{to} is below from {low}: a scale-up never lowers a group")
        return to

    @field_validator("carried")
    @classmethod
    def _carried_not_grown(cls, carried: bool, info: ValidationInfo) -> bool:
        if carried and info.data.get("grow"):
            raise ValueError("a group carried from an earlier read is never grown")
        return carried


class Prep(BaseModel):
    """What ``prepare`` returned (:meth:`spillway.act.scale.ScaleSteps.prepare`)."""

    model_config = _CLOSED

    set: bool
    count: Capacity
    owner: str = Field(min_length=1, max_length=200, pattern=r"^[!-~]+$")
    target: Capacity
    # a group carried from an earlier read (ScaleGroup.carried): not read, so no live_desired nor max_size
    carried: bool = False
    live_desired: Capacity | None = Field(default=None, validate_default=True)
    max_size: Capacity | None = Field(default=None, validate_default=True)
    before: list[InstanceId] = Field(max_length=MAX_INSTANCES)
    since: Time
    deadline: Time
    # the whole seconds the state machine waits between checks (WaitForLaunch); absent from what a
    # prepare before it returned
    poll_seconds: int | None = Field(default=None, ge=1, le=MAX_SECONDS)
    uncordoned: list[NodeName] = Field(max_length=MAX_NAMES)
    gone: list[NodeName] = Field(max_length=MAX_NAMES)

    @field_validator("since", "deadline")
    @classmethod
    def _exists(cls, value: str) -> str:
        return _real_time(value)

    @field_validator("live_desired", "max_size")
    @classmethod
    def _read_unless_carried(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is None and not info.data.get("carried"):
            raise ValueError("required for a group prepare read (not carried)")
        return value


class Launch(BaseModel):
    """What ``verify`` returned; ``backoff`` runs after ``failed`` or ``timeout``."""

    model_config = _CLOSED

    status: Literal["failed", "timeout", "ready", "unsettled", "resized", "launching"]
    reason: Text = ""
    failure: Text = ""
    ready: Capacity = 0
    wanted: Capacity = 0
    in_service: Capacity = 0
    nodes: list[NodeName] = Field(default_factory=list, max_length=MAX_NAMES)


class GroupResult(BaseModel):
    """One group's outcome, as the Map's iteration ends (a Pass state's, or ``backoff``'s output)."""

    model_config = _CLOSED

    group: GroupName
    region: Region
    outcome: Literal["ready", "unsettled", "resized", "refused", "error", "backed_off"]
    reason: Text = ""
    error: Text = ""
    cause: Text = ""
    backoff_until: Time = ""  # backoff's outcome only
    desired: Capacity = 0  # backoff's outcome only
    new_nodes: Capacity = 0  # refused's: the nodes the refused raise was to add (none were)
    terminated: list[InstanceId] = Field(default_factory=list, max_length=MAX_NAMES)
    held: list[InstanceId] = Field(default_factory=list, max_length=MAX_NAMES)
    kept: list[InstanceId] = Field(default_factory=list, max_length=MAX_NAMES)  # booting, kept (backoff)


class RoundRecord(BaseModel):
    model_config = _CLOSED

    round: Round
    groups: list[GroupResult] = Field(max_length=MAX_NAMES)


class _Step(BaseModel):
    model_config = _CLOSED

    cluster: Cluster


class PrepareInput(_Step):
    action: Literal["prepare"]
    plan_id: PlanId
    part: Part = 1
    round: Round
    launch_timeout_seconds: Seconds
    # the execution's whole seconds between launch checks; absent from an execution whose definition
    # did not pass it (it waits on the execution's own value)
    poll_seconds: int | None = Field(default=None, ge=1, le=MAX_SECONDS)
    group: ScaleGroup


class SetDesiredInput(_Step):
    action: Literal["set_desired"]
    plan_id: PlanId
    group: ScaleGroup
    prep: Prep


class VerifyInput(_Step):
    action: Literal["verify"]
    group: ScaleGroup
    prep: Prep


class BackoffInput(_Step):
    action: Literal["backoff"]
    group: ScaleGroup
    prep: Prep
    launch: Launch


class NextRoundInput(_Step):
    action: Literal["next_round"]
    plan_id: PlanId
    snapshot_key: str = Field(pattern=SNAPSHOT_KEY_PATTERN)
    part: Part = 1
    max_rounds: Round
    round: Round
    poll_seconds: int = Field(ge=1, le=MAX_SECONDS)
    launch_timeout_seconds: Seconds
    rounds: list[RoundRecord] = Field(max_length=MAX_ROUNDS)
    results: list[GroupResult] = Field(max_length=MAX_NAMES)

    @field_validator("round")
    @classmethod
    def _round_within_max(cls, round_: int, info: ValidationInfo) -> int:
        most = info.data.get("max_rounds")
        if most is not None and round_ > most:
            raise ValueError(f"{round_} is past max_rounds {most}")
        return round_


STEP_INPUTS: dict[str, type[_Step]] = {
    "prepare": PrepareInput,
    "set_desired": SetDesiredInput,
    "verify": VerifyInput,
    "backoff": BackoffInput,
    "next_round": NextRoundInput,
}
