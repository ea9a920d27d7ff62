"""What each Lambda step of the gang-launch state machine receives (``statemachines/gang_launch.asl.json``):
the execution input (:func:`spillway.act.gang.execution_request`, or a person's), with ``zone`` defaulted
by the ``Defaults`` state, and the outputs of the steps before as each state's ``Parameters`` and
``ResultPath`` place them. Plain data; :func:`spillway.act.gang.parse_gang_step` checks every event
against these before a step reads or writes anything.

Closed and strict as :mod:`spillway.model.scale` (a key the state machine does not send is refused, a
number is a JSON number), with the same AWS forms (:mod:`spillway.model.aws`). Beyond those:

* ``poll_seconds`` is a whole number: it is the ``SecondsPath`` of the Wait states, which take "an
  integer value" (Step Functions Developer Guide, "Wait workflow state"); a fraction passed the request
  and failed the execution at its first Wait, after the launch and before any give-back.
* ``prep`` is what ``gang_prepare`` returns: its ``fleet`` (the attempt's CreateFleet) in fleet mode only;
  ``attempt`` is :func:`spillway.act.gang.attempt_token`'s form (CreateFleet's ClientToken is at most 64
  ASCII characters).
* CreateFleet's parts: tags as EC2 bounds them (at most 50 a resource, keys 1 to 128 characters, values
  at most 256), the Spot allocation strategies EC2 Fleet knows (SpotOptionsRequest.AllocationStrategy).
* A caught error is what a ``Catch`` with ``ResultPath`` places: ``{"Error", "Cause"}``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator

from spillway.model.aws import (
    FLEET_ID_FORM,
    INSTANCE_TYPE_FORM,
    LAUNCH_TEMPLATE_ID_FORM,
    LAUNCH_TEMPLATE_NAME_FORM,
    REGION_FORM,
    SUBNET_ID_FORM,
    ZONE_FORM,
)
from spillway.model.scale import (
    _CLOSED,
    INT32,
    MAX_INSTANCES,
    MAX_NAMES,
    MAX_SECONDS,
    Capacity,
    GroupName,
    InstanceId,
    NodeName,
    Region,
    Text,
    Time,
    _real_time,
)

Mode = Literal["fleet", "rollback"]
Count = Annotated[int, Field(ge=1, le=INT32)]
# a gang is "<namespace>/<name>", the name a label's or an annotation's value (Volcano's group name)
GangName = Annotated[str, Field(min_length=1, max_length=1_024)]
Deadline = Annotated[float, Field(ge=1, le=MAX_SECONDS, allow_inf_nan=False)]
Poll = Annotated[int, Field(ge=0, le=MAX_SECONDS)]
# spillway.act.planning.plan_id_for's form; empty or null for a gang started by hand without a plan
PlanId = Annotated[str, Field(max_length=77, pattern=r"^[A-Za-z0-9_-]*$")]
Zone = Annotated[str, Field(max_length=64, pattern=f"^{ZONE_FORM}$")]
# $$.Execution.Id of a Standard workflow: arn:<partition>:states:<region>:<account>:execution:<machine>:<name>,
# names of 1 to 80 characters (Step Functions' limit) as Spillway names executions (planning's names) and as
# Step Functions does when none is given (a UUID): letters, digits, "-" and "_"
_NAME = r"[A-Za-z0-9_-]{1,80}"
ExecutionArn = Annotated[
    str,
    Field(
        max_length=256, pattern=f"^arn:aws[a-z-]*:states:{REGION_FORM}:[0-9]{{12}}:execution:{_NAME}:{_NAME}$"
    ),
]
Attempt = Annotated[str, Field(pattern=r"^spillway-[0-9a-f]{40}$")]
SubnetId = Annotated[str, Field(pattern=f"^{SUBNET_ID_FORM}$")]
InstanceType = Annotated[str, Field(max_length=64, pattern=f"^{INSTANCE_TYPE_FORM}$")]
TagKey = Annotated[str, Field(min_length=1, max_length=128)]
TagValue = Annotated[str, Field(max_length=256)]

# Kubernetes label keys and values (IsQualifiedName, IsValidLabelValue). pydantic matches a pattern with
# Rust's regex, whose ``$`` is the end of the text; label_problem (Python's ``re``) matches whole.
_LABEL_VALUE_FORM = r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?"
_LABEL_KEY_FORM = r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
LabelKey = Annotated[str, Field(max_length=317, pattern=f"^{_LABEL_KEY_FORM}$")]
LabelValue = Annotated[str, Field(max_length=63, pattern=f"^{_LABEL_VALUE_FORM}$")]


def label_problem(labels: dict[str, str]) -> str:
    """Why ``labels`` cannot be put on a Node ("" when they can)."""
    for key, value in labels.items():
        if not re.fullmatch(_LABEL_KEY_FORM, key):
            return f"{key!r} is not a label key"
        if not re.fullmatch(_LABEL_VALUE_FORM, value):
            return f"{key}: {value!r} is not a label value"
    return ""


class _Request(BaseModel):
    """The execution input's keys every step's ``Parameters`` pass on."""

    model_config = _CLOSED

    group: GroupName
    region: Region
    count: Count
    gang: GangName
    mode: Mode | None  # null: the group's tag says
    deadline_seconds: Deadline
    poll_seconds: Poll
    plan_id: PlanId | None


class ExecutionInput(_Request):
    """``$$.Execution.Input``: what the execution was started with (``zone`` and ``node_labels`` may be
    left out)."""

    zone: Zone | None = None
    node_labels: dict[LabelKey, LabelValue] | None = Field(default=None, max_length=MAX_NAMES)


class LaunchTemplate(BaseModel):
    """A launch template as CreateFleet names it: its id or its name, and the version."""

    model_config = _CLOSED

    LaunchTemplateId: str | None = Field(default=None, pattern=f"^{LAUNCH_TEMPLATE_ID_FORM}$")
    LaunchTemplateName: str | None = Field(
        default=None, pattern=f"^{LAUNCH_TEMPLATE_NAME_FORM}$", validate_default=True
    )
    Version: str = Field(pattern=r"^(\$Latest|\$Default|[1-9][0-9]{0,9})$")

    @field_validator("LaunchTemplateName")
    @classmethod
    def _one_of_id_or_name(cls, name: str | None, info: ValidationInfo) -> str | None:
        has_id = info.data.get("LaunchTemplateId") is not None
        if (name is None) != has_id:
            raise ValueError("name the template by LaunchTemplateId or LaunchTemplateName, one of them")
        return name


class Fleet(BaseModel):
    """The attempt's CreateFleet, as ``gang_prepare`` keeps it (:class:`spillway.model.aws.FleetRequest`)."""

    model_config = _CLOSED

    launch_template: LaunchTemplate
    instance_type: InstanceType | None
    subnets: list[SubnetId] = Field(max_length=MAX_NAMES)
    zones: list[Zone] = Field(max_length=MAX_NAMES)
    tags: dict[TagKey, TagValue] = Field(max_length=50)
    capacity_type: Literal["on-demand", "spot"]
    spot_allocation_strategy: (
        Literal["lowest-price", "diversified", "capacity-optimized", "capacity-optimized-prioritized",
                "price-capacity-optimized"] | None
    )  # fmt: skip


class Prep(BaseModel):
    """What ``gang_prepare`` returned (``$.prep``)."""

    model_config = _CLOSED

    mode: Mode
    count: Count
    attempt: Attempt
    desired: Capacity
    before: list[InstanceId] = Field(max_length=MAX_INSTANCES)
    since: Time
    deadline: Time
    fleet: Fleet | None = Field(default=None, validate_default=True)

    @field_validator("since", "deadline")
    @classmethod
    def _exists(cls, value: str) -> str:
        return _real_time(value)

    @field_validator("fleet")
    @classmethod
    def _fleet_in_fleet_mode(cls, fleet: Fleet | None, info: ValidationInfo) -> Fleet | None:
        mode = info.data.get("mode")
        if mode == "fleet" and fleet is None:
            raise ValueError("required in fleet mode: the attempt's CreateFleet")
        if mode == "rollback" and fleet is not None:
            raise ValueError("a rollback-mode prepare has no fleet")
        return fleet


class Launched(BaseModel):
    """``gang_launch``'s result when the whole fleet launched (the only one ``Whole?`` lets on)."""

    model_config = _CLOSED

    status: Literal["launched"]
    instances: list[InstanceId] = Field(min_length=1, max_length=MAX_NAMES)
    fleet_id: str | None = Field(pattern=f"^{FLEET_ID_FORM}$")


class ShortPool(BaseModel):
    """A pool a partial fleet's errors named short of capacity (:func:`spillway.act.backoff.fleet_pools`),
    backed off by the give-back beside the group."""

    model_config = _CLOSED

    capacity_type: Literal["on-demand", "spot"]
    zone: Zone
    instance_type: InstanceType


class LaunchResult(BaseModel):
    """``$.launch``: ``gang_launch``'s result (``launched``, ``partial``) or ``gang_raise``'s (``raised``,
    which stands in for it in rollback mode, the raise marker's fields with it)."""

    model_config = _CLOSED

    status: Literal["launched", "partial", "raised"]
    instances: list[InstanceId] = Field(max_length=MAX_NAMES)
    fleet_id: str | None = Field(default=None, pattern=f"^{FLEET_ID_FORM}$")
    reason: Text = ""
    error: Text = ""
    again: bool = False
    before: Capacity = 0
    after: Capacity = 0
    count: Capacity = 0
    desired: Capacity = 0
    previous: Capacity = 0
    group: Text = ""  # the raise marker's "<region>/<group>"
    at: Time | None = None
    pools: list[ShortPool] = Field(
        default_factory=list, max_length=MAX_NAMES
    )  # a partial's, short of capacity


class AttachResult(BaseModel):
    """``$.attach``: attached, still waiting for the fleet to run, or one lost / the deadline."""

    model_config = _CLOSED

    status: Literal["attached", "waiting", "lost", "timeout"]
    attached: Capacity = 0
    calls: Capacity = 0
    pending: Capacity = 0
    error: Text = ""
    reason: Text = ""


class VerifyResult(BaseModel):
    """``$.verify``: the gang ready, waiting, a member lost, past its deadline, or (rollback) a launch
    failed."""

    model_config = _CLOSED

    status: Literal["ready", "waiting", "lost", "timeout", "failed"]
    ready: Capacity = 0
    in_service: Capacity = 0
    instances: list[InstanceId] = Field(default_factory=list, max_length=MAX_NAMES)
    nodes: list[NodeName] = Field(default_factory=list, max_length=MAX_NAMES)
    error: Text = ""
    reason: Text = ""
    failure: Text = (
        ""  # a failed launch's words, as EC2 gave them (its pool: spillway.act.backoff.failed_pool)
    )


class Caught(BaseModel):
    """A ``Catch``'s ``ResultPath`` (``$.error``): the error's name and its cause."""

    model_config = _CLOSED

    Error: Text
    Cause: Text | None = None


class _Step(_Request):
    pass


class PrepareInput(_Step):
    action: Literal["gang_prepare"]
    zone: Zone | None
    execution: ExecutionArn
    execution_input: ExecutionInput


class LaunchInput(_Step):
    action: Literal["gang_launch"]
    prep: Prep


class RaiseInput(_Step):
    action: Literal["gang_raise"]
    prep: Prep


class AttachInput(_Step):
    action: Literal["gang_attach"]
    prep: Prep
    launch: Launched


class VerifyInput(_Step):
    action: Literal["gang_verify"]
    prep: Prep
    launch: LaunchResult
    execution_input: ExecutionInput


class GangState(ExecutionInput):
    """The execution's whole state as ``GiveBack`` gets it (``state.$: $``): the input (``zone``
    defaulted) and whatever steps ran before the one that said no or failed."""

    zone: Zone | None
    prep: Prep
    launch: LaunchResult | None = None
    attach: AttachResult | None = None
    verify: VerifyResult | None = None
    error: Caught | None = None


class GiveBackInput(BaseModel):
    model_config = _CLOSED

    action: Literal["gang_give_back"]
    state: GangState


GANG_STEP_INPUTS: dict[str, type[BaseModel]] = {
    "gang_prepare": PrepareInput,
    "gang_launch": LaunchInput,
    "gang_raise": RaiseInput,
    "gang_attach": AttachInput,
    "gang_verify": VerifyInput,
    "gang_give_back": GiveBackInput,
}


# Each step result's keys by its status, as the steps return them (spillway.act.gang): the models above
# take the union of a result's shapes, this says which keys each shape has. Raise results of executions
# started before gang_raise returned only its own keys may also carry the raise marker's group and at.
RESULT_KEYS: dict[str, dict[str, frozenset[str]]] = {
    "launch": {
        "launched": frozenset({"status", "instances", "fleet_id"}),
        "partial": frozenset({"status", "instances", "reason", "error"}),
        "raised": frozenset(
            {"status", "again", "before", "after", "count", "desired", "previous", "instances"}
        ),
    },
    "attach": {
        "attached": frozenset({"status", "attached", "calls"}),
        "waiting": frozenset({"status", "pending"}),
        "lost": frozenset({"status", "error", "reason"}),
        "timeout": frozenset({"status", "error", "reason"}),
    },
    "verify": {
        "ready": frozenset({"status", "ready", "instances", "nodes", "reason"}),
        "waiting": frozenset({"status", "ready", "in_service"}),
        "lost": frozenset({"status", "error", "reason"}),
        "timeout": frozenset({"status", "error", "ready", "reason"}),
        "failed": frozenset({"status", "error", "reason"}),
    },
}
# ... and a partial launch or a failed verify of an execution started before they named what was short
# (pools, the failed launch's words) has none
_MAY_CARRY = {
    ("launch", "raised"): frozenset({"group", "at"}),
    ("launch", "partial"): frozenset({"pools"}),
    ("verify", "failed"): frozenset({"failure"}),
}
# what each mode's launch step returns: CreateFleet's result in fleet mode, the raise in rollback mode
LAUNCH_STATUS = {"fleet": frozenset({"launched", "partial"}), "rollback": frozenset({"raised"})}


def result_problem(name: str, result: Any, mode: str) -> tuple[str, str] | None:
    """(the field, why) when the step result ``name`` (a dict the models accepted) has not the keys its
    status gives it, or is a launch of the other mode; None when it is one the steps return."""
    if not isinstance(result, dict):
        return None
    status = str(result.get("status"))
    if name == "launch" and status not in LAUNCH_STATUS[mode]:
        return (
            "status",
            f"{status!r} is not a {mode}-mode launch's ({', '.join(sorted(LAUNCH_STATUS[mode]))})",
        )
    keys = RESULT_KEYS[name][status]
    missing = sorted(keys - set(result))
    if missing:
        return missing[0], f"required in a {status} result"
    extra = sorted(set(result) - keys - _MAY_CARRY.get((name, status), frozenset()))
    return (extra[0], f"not a key of a {status} result") if extra else None


def step_problem(parsed: BaseModel, event: Mapping[str, Any]) -> tuple[str, str] | None:
    """(the field, why) when a step input the models accepted is still none the state machine sends:
    a ``prep`` of another count than its request (one input feeds both), or a step result without the
    keys of its status, or of the other mode's launch; None when it is one."""
    request: BaseModel = parsed
    where, raw = "", event
    if isinstance(parsed, GiveBackInput):
        where, request, raw = "state.", parsed.state, event["state"]
    prep = getattr(request, "prep", None)
    if not isinstance(prep, Prep):
        return None
    count = getattr(request, "count", None)
    if prep.count != count:
        return f"{where}prep.count", f"{prep.count} is not the request's count {count}"
    for name in ("launch", "attach", "verify"):
        problem = result_problem(name, raw.get(name), prep.mode)
        if problem:
            return f"{where}{name}.{problem[0]}", problem[1]
    return None
