"""Atomic launch of a gang: ``count`` nodes of one group, all of them or none (issue 11).

No autoscaler launches a gang atomically on AWS today: cluster-autoscaler's AWS provider does not
implement ``AtomicIncreaseSize`` and falls back to a plain increase; Karpenter launches one instance per
CreateFleet call. The group chooses how, by its ``spillway.io/atomic-launch`` tag
(:data:`spillway.model.nodegroup.TAG_ATOMIC_LAUNCH`):

``fleet``
    ``gang_prepare`` (read the group, refuse a gang above MaxSize, a group spanning several zones
    whose AZRebalance process is not suspended, a group whose Launch process is suspended: AWS
    refuses AttachInstances there, and one whose Terminate process is suspended: once attached, a
    gang short of whole could not be given back) → ``gang_launch`` (EC2 ``CreateFleet`` of type
    ``instant``, of the group's capacity type, ``MinTargetCapacity`` = count, one instance type in one
    zone, every instance tagged with the attempt) → ``gang_attach`` (once every instance runs:
    ``AttachInstances``, 20 a call, which raises the desired capacity) → ``gang_verify`` (every instance
    InService, its Node Ready).
``rollback``
    ``gang_prepare`` (as above, and refuse a group whose Launch process is suspended: its raise would
    launch nothing; or whose Terminate process is suspended) → ``gang_raise`` (desired capacity +
    count relative to the live value, once per attempt: :func:`spillway.act.claims.raise_once`) →
    ``gang_verify`` (the whole count of the attempt's own instances InService and Ready; a Failed
    launch activity ends it early, whatever its reason:
    :func:`~spillway.model.nodegroup.launch_failure_since`).

In both modes ``gang_verify`` ends the gang (``lost``, ``GangIncomplete``) at the first check that finds
one of its instances lost after it launched: taken out of service by the group (Terminating, Standby,
gone from it), marked Unhealthy (the group replaces it), or no longer running in EC2. All or nothing: the
group's replacement is never a member (it would make the gang "whole" with a node that joined later, or
keep it waiting to its deadline), but it carries capacity the attempt added, so the give-back claims and
terminates it too.

Whatever goes wrong after the launch (fewer instances than the gang, an instance lost, an error, the
deadline) ends in ``gang_give_back``: every instance of the attempt is terminated (but one whose Node
runs a pod by then, which keeps a node busy: kube-scheduler binds any pending pod to a Ready member;
it is left running, ``kept``, for scale-down to judge once idle; each Node is cordoned before its pods
are read, and uncordoned again unless its member is terminated:
:func:`spillway.act.instances.judged_for_give_back`), each tried whatever
becomes of the others (those in the group with ``ShouldDecrementDesiredCapacity``, or without it where a
MinSize raised meanwhile refuses the decrement; those not yet attached with EC2 ``TerminateInstances``,
but one the group read does not list once the attach marker is written is asked of Auto Scaling first:
the read may be older than the attach, :meth:`GangSteps._unlisted`;
a launch whose answer was lost is asked again under its ClientToken, and the attempt's tag finds its
instances too once EC2 shows them); in rollback mode the capacity the attempt raised but never
launched is given back relative to the live desired capacity
(:func:`spillway.act.claims.give_back_undelivered`); and the group is backed off in the state table as
scale-up's ``backoff`` does, with each pool (capacity type, zone, instance type) the fleet's errors named
short of capacity (:func:`spillway.act.backoff.fleet_pools`), so other groups skip those pools too; a
quota or a refused setting backs off no pool. The execution then fails with a named error:
``QuotaExceeded`` or ``LaunchMisconfigured`` (what EC2 said: :mod:`spillway.model.launcherror`),
``GangIncomplete`` or the step's own; but a shortage (``CapacityUnavailable``), EC2's and nothing to fix,
ends it successfully, its output ``outcome`` ``given_back``, so the gang-launch-failures alarm stays quiet. No half gang is left running, but for InService members of a group
whose Terminate process was suspended meanwhile (``gang_prepare`` refuses a group where it already is):
Auto Scaling would not terminate them, so they are left in the group (``held``) and the cause names
them (:func:`spillway.act.instances.give_back_in_group`).

Every step is idempotent (a raise marker per attempt, a CreateFleet ``ClientToken`` per attempt,
attaching only what is not attached yet, terminating only what still runs), so the state machine
retries any of them on ``AwsThrottled``. An attempt is one execution (:func:`attempt_token`): its id
(``$$.Execution.Id``, passed to ``gang_prepare`` only, kept in ``prep.attempt`` for every later step)
is in the token, so a step retried, or an execution redriven, is the same attempt, while the same input
started again by hand (a new execution) is a new one. EC2 answers a CreateFleet whose ClientToken it has
seen with that call's result, launching nothing (and refuses other parameters with
``IdempotentParameterMismatch``), long after the call: a re-run that reused the token would get the
instances its first run gave back, and in rollback mode find the first run's raise marker.

Each step's input is checked first (:func:`parse_gang_step`) against what the state machine sends it
(:mod:`spillway.model.gang`): anything else is an :class:`InputError` naming the field, raised before
anything is read or written.

:func:`execution_request` is what planning (:func:`spillway.act.planning.gang_requests`) calls to start
``gang_launch.asl.json`` for each gang a plan places on a group whose tag says ``fleet`` or ``rollback``.

Composition with ordinary scale-ups and other gangs on the same group (:mod:`spillway.act.claims`):
every execution adds and gives back only its own capacity. Fleet mode adds by ``AttachInstances``
(relative), and claims its fleet's instances and writes its raise marker before attaching them;
rollback mode raises relative to the live value once, and claims new instances of the group up to its
count, so its ``verify`` counts and its ``give_back`` terminates only those; a scale-up does the same
with its own count (:mod:`spillway.act.scale`).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel

from spillway.act.backoff import Pool, back_off, failed_pool, fleet_pools, needs_subnet_zones
from spillway.act.claims import (
    Owner,
    give_back_undelivered,
    mark_attach,
    own_instances,
    raise_once,
    settle_unanswered,
)
from spillway.act.deadline import NO_DEADLINE, Deadline
from spillway.act.instances import (
    Terminated,
    give_back_in_group,
    judged_for_give_back,
    ready_nodes,
)
from spillway.errors import (
    AsgLimitExceeded,
    AwsError,
    AwsThrottled,
    AwsUnavailable,
    CapacityUnavailable,
    InputError,
    LaunchMisconfigured,
    QuotaExceeded,
    SpillwayError,
    StateConflict,
    StateCorrupt,
)
from spillway.model.act import ExecutionRequest, iso
from spillway.model.aws import (
    AsgInstance,
    AutoScalingGroup,
    CreateFleetError,
    FleetRequest,
    InstanceTypeInfo,
    bundled_instance_types,
)
from spillway.model.fleet import TAG_ATTEMPT, TAG_CLUSTER, TAG_GANG
from spillway.model.gang import GANG_STEP_INPUTS, label_problem, step_problem
from spillway.model.history import gang_refusal
from spillway.model.k8s import GANG_GIVE_BACK
from spillway.model.launcherror import ERROR_NAMES, fleet_error_name, launch_error_kind, names_settings
from spillway.model.nodegroup import (
    LIVE_STATES,
    TAG_ATOMIC_LAUNCH,
    NodeGroup,
    capacity_type,
    capacity_type_of_launches,
    fleet_refusal,
    give_back_refusal,
    is_managed,
    launch_failed,
    launch_failure_since,
    launch_refusal,
    on_demand_base,
    parse_atomic_launch,
    replacement_launches,
    resolve_instance_type,
    spot_allocation_strategy,
)
from spillway.model.stepinput import step_input
from spillway.ports import ERRORS, Cloud, Cluster, Ledger

Metric = Callable[[str, float], None]

log = logging.getLogger(__name__)

MODES = ("fleet", "rollback")
EC2_ALIVE = frozenset({"pending", "running"})
# What a give-back terminates outside the group: an instance that is alive, or stopped. An EBS-backed
# instance whose OS shuts down stops by default (EC2 User Guide, "Change instance initiated shutdown
# behavior"), keeping its volumes and address, and TerminateInstances ends a stopped one too.
EC2_TERMINABLE = EC2_ALIVE | {"stopping", "stopped"}
# CreateFleet refused whole (for capacity, a quota, or its settings: spillway.model.launcherror):
# nothing runs under the attempt's ClientToken
FLEET_REFUSED = (CapacityUnavailable, QuotaExceeded, LaunchMisconfigured)
# The Launch step's errors that say nothing ran under the attempt's ClientToken: none of them is retried,
# so it is its one attempt's, refused before CreateFleet (InputError) or by EC2 (FLEET_REFUSED, and
# any other AwsError, which is none of the retried AwsThrottled and AwsUnavailable). After any other
# (a timeout, a Lambda error, the retries run out) CreateFleet may have launched.
NOT_LAUNCHED = frozenset({"InputError", "AwsError", *(e.__name__ for e in FLEET_REFUSED)})
# What a fleet's shortfall adds to its reason, by the error it is named (fleet_error_name)
_SHORTFALL_HINT = {
    "QuotaExceeded": " (an account quota is full: raise it in Service Quotas, or wait for instances to end)",
    "LaunchMisconfigured": " (EC2 refused the launch for its settings or Spillway's permissions: it will not "
    "heal by waiting; fix the group's launch template, subnets or the role)",
}

# what a step may raise is what the ports it calls may raise (spillway.ports.ERRORS)
_KUBE = ERRORS["Cluster"]
_AWS = ERRORS["Cloud"]
# What each step may raise, by exact class; tests/unit/test_error_contract.py checks gang_launch.asl.json
# retries or catches every one where it runs the step.
RAISES: dict[str, frozenset[type[SpillwayError]]] = {
    "gang_prepare": frozenset({InputError, *_AWS}),
    "gang_launch": frozenset({InputError, *_AWS, *FLEET_REFUSED}),
    "gang_raise": frozenset({InputError, *_AWS, StateConflict, StateCorrupt}),
    "gang_attach": frozenset({InputError, *_AWS, StateConflict, StateCorrupt}),
    "gang_verify": frozenset({InputError, *_KUBE, *_AWS, StateConflict, StateCorrupt}),
    "gang_give_back": frozenset({InputError, *_AWS, StateConflict, StateCorrupt}),
}


def _no_metric(name: str, value: float) -> None:
    return None


def _parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@dataclass(frozen=True, slots=True)
class GangRequest:
    """The execution input: ``{group, region, count, gang, mode, deadline_seconds, poll_seconds, plan_id,
    zone}``; ``zone`` (optional) keeps a fleet-mode launch in that one of the group's zones. The state
    machine adds ``execution`` (its ``$$.Execution.Id``) for ``gang_prepare``, which requires it."""

    group: str
    region: str
    count: int
    gang: str
    mode: str | None
    deadline_seconds: float
    poll_seconds: float
    plan_id: str
    node_labels: Mapping[str, str] = field(default_factory=dict)  # put on the nodes once all are Ready
    zone: str | None = None
    execution: str = ""

    @classmethod
    def parse(cls, event: Mapping[str, Any], regions: Sequence[str]) -> GangRequest:
        def text(name: str, required: bool = True) -> str:
            value = event.get(name)
            if value is None or value == "":
                if required:
                    raise InputError("required", field=name)
                return ""
            if not isinstance(value, str):
                raise InputError(f"must be a string, got {type(value).__name__}", field=name)
            return value

        def number(name: str, low: float, default: float | None = None) -> float:
            value = event.get(name, default)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InputError(f"must be a number, got {value!r}"[:120], field=name)
            if not low <= value <= 86_400:
                raise InputError(f"must be between {low:g} and 86400, got {value}", field=name)
            return float(value)

        region = text("region")
        if regions and region not in regions:
            raise InputError(
                f"{region} is not one of the configured regions {', '.join(regions)}", field="region"
            )
        count = event.get("count")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InputError(f"must be a whole number of nodes >= 1, got {count!r}"[:120], field="count")
        mode = text("mode", required=False) or None
        if mode is not None and mode not in MODES:
            raise InputError(f"must be one of {', '.join(MODES)} (or absent: the group's tag), got {mode!r}",
                             field="mode")  # fmt: skip
        deadline, poll = number("deadline_seconds", 1, 900), number("poll_seconds", 0, 15)
        refusal = gang_refusal(deadline, poll)  # the check loop must fit the execution's history
        if refusal:
            raise InputError(refusal, field="poll_seconds")
        return cls(
            group=text("group"),
            region=region,
            count=count,
            gang=text("gang"),
            mode=mode,
            deadline_seconds=deadline,
            poll_seconds=poll,
            plan_id=text("plan_id", required=False),
            # verify reads them from the execution's input: an optional field has no JSONPath of its own
            node_labels=_labels(
                event.get("node_labels", _map(event.get("execution_input")).get("node_labels"))
            ),
            zone=text("zone", required=False) or None,
            execution=text("execution", required=False),
        )


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _labels(value: Any) -> dict[str, str]:
    """``node_labels``: a map of label keys to values, as Kubernetes allows them (or absent)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in (*value, *value.values())):
        raise InputError(
            f"must be a map of label keys to string values, got {str(value)[:80]}", field="node_labels"
        )
    problem = label_problem(dict(value))
    if problem:
        raise InputError(problem, field="node_labels")
    return dict(value)


def attempt_token(cluster: str, request: GangRequest) -> str:
    """One attempt's id: CreateFleet's ClientToken (a retried call is the same call), the instance tag and
    the raise marker's owner. One execution is one attempt: the same input run again is another."""
    if not request.execution:
        raise InputError("required: the execution's id ($$.Execution.Id)", field="execution")
    key = "/".join((cluster, request.region, request.group, request.gang, request.plan_id, request.execution))
    return "spillway-" + hashlib.sha256(key.encode()).hexdigest()[:40]


def launch_template_of(asg: AutoScalingGroup, instance_type: str | None = None) -> dict[str, str]:
    """The launch template the group launches ``instance_type`` from, as CreateFleet names it: its
    override's own, else the group's (plain or in its MixedInstancesPolicy)."""
    template = asg.launch_template_for(instance_type)
    if template is None:
        raise InputError(
            f"{asg.region}/{asg.AutoScalingGroupName} has no launch template (a launch configuration "
            "cannot launch a fleet); use mode rollback or give the group a launch template",
            field="mode",
        )
    return template


def _subnets(asg: AutoScalingGroup) -> tuple[str, ...]:
    return tuple(s.strip() for s in (asg.VPCZoneIdentifier or "").split(",") if s.strip())


def fleet_request(
    asg: AutoScalingGroup,
    count: int,
    token: str,
    cluster: str,
    gang: str,
    *,
    zone: str | None = None,
    subnet_zones: Mapping[str, str] | None = None,
    catalogue: Mapping[str, InstanceTypeInfo] | None = None,
) -> FleetRequest:
    """CreateFleet for the gang from the group itself: its instance type (for a mixed group the override
    the planner names, by the same rule and ``catalogue``, the bundled one by default: it holds the
    template the gang was placed on) and that type's launch template, its subnets (VPCZoneIdentifier)
    else its zones, and the tags it would propagate to its own instances. With ``zone``: only the
    subnets in that zone (``subnet_zones``: subnet → zone), or only that zone."""
    subnets = _subnets(asg)
    zones = tuple(asg.AvailabilityZones)
    if zone is not None:
        zones = (zone,)
        if subnets:
            where = f"{asg.region}/{asg.AutoScalingGroupName}"
            subnets = tuple(s for s in subnets if (subnet_zones or {}).get(s) == zone)
            if not subnets:
                raise InputError(f"{where} has no subnet in {zone}", field="zone")
    tags = {t.Key: t.Value for t in asg.Tags if t.PropagateAtLaunch and not t.Key.startswith("aws:")}
    tags.update({TAG_ATTEMPT: token, TAG_GANG: gang[:255], TAG_CLUSTER: cluster})
    instance_type = resolve_instance_type(asg, bundled_instance_types() if catalogue is None else catalogue)
    # spot or on-demand as the planner reads the group's next launches (NodeGroup.launch_capacity_type)
    kind = capacity_type_of_launches(capacity_type(asg)[0], on_demand_base(asg), asg.DesiredCapacity, count)
    return FleetRequest(
        launch_template=launch_template_of(asg, instance_type),
        count=count,
        client_token=token,
        instance_type=instance_type,
        subnets=subnets,
        zones=() if subnets else zones,
        tags=tags,
        capacity_type=kind,
        spot_allocation_strategy=spot_allocation_strategy(asg) if kind == "spot" else None,
    )


def _fleet_of(prep: Mapping[str, Any]) -> FleetRequest:
    """The attempt's CreateFleet, from what prepare kept (``prep.fleet``): every call of an attempt,
    the launch and a give-back's repeat, is the same request under the same ClientToken."""
    spec = prep.get("fleet") or {}
    if not spec:
        raise InputError("gang_launch needs the fleet of a fleet-mode prepare", field="prep.fleet")
    return FleetRequest(
        launch_template=dict(spec["launch_template"]),
        count=int(prep["count"]),
        client_token=str(prep["attempt"]),
        instance_type=spec.get("instance_type"),
        subnets=tuple(spec.get("subnets") or ()),
        zones=tuple(spec.get("zones") or ()),
        tags=dict(spec.get("tags") or {}),
        capacity_type=str(spec.get("capacity_type") or "on-demand"),  # prepared before spot: on-demand
        spot_allocation_strategy=spec.get("spot_allocation_strategy"),
    )


@dataclass
class GangSteps:
    kube: Cluster
    aws: Cloud
    ledger: Ledger
    cluster: str
    backoff_minutes: float = 15.0
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    metric: Metric = _no_metric
    # the invocation's deadline: a raise, attach or give-back asks nothing it could not finish before it
    deadline: Deadline = NO_DEADLINE

    def _request(self, event: Mapping[str, Any]) -> GangRequest:
        return GangRequest.parse(event, self.aws.regions)

    # --- prepare -------------------------------------------------------------------------------

    def prepare(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """Read the group; refuse a gang it cannot hold (MaxSize) or a group not for atomic launch."""
        req = self._request(event)
        token = attempt_token(self.cluster, req)
        # with the type its launch template names now: the plan's template, what the fleet asks for
        asg = self.aws.describe_group_launching(req.region, req.group)
        where = f"{req.region}/{req.group}"
        if not is_managed(asg, self.cluster):
            raise InputError(f"{where} is not tagged for cluster {self.cluster}", field="group")
        tagged, problem = parse_atomic_launch(asg.tag_map().get(TAG_ATOMIC_LAUNCH))
        mode = req.mode or tagged
        if mode not in MODES:
            raise InputError(f"{where} is not tagged {TAG_ATOMIC_LAUNCH}=fleet|rollback {problem}".strip(),
                             field="mode")  # fmt: skip
        _refuse_mode(req, asg, mode, where)
        if asg.DesiredCapacity + req.count > asg.MaxSize:
            raise AsgLimitExceeded(
                f"{where}: a gang of {req.count} on desired capacity {asg.DesiredCapacity} is above MaxSize "
                f"{asg.MaxSize}; nothing launched"
            )
        now = self.clock()
        prep: dict[str, Any] = {
            "mode": mode,
            "count": req.count,
            "attempt": token,
            "desired": asg.DesiredCapacity,
            # every instance already there, whatever its state (one back from Standby is not a member)
            "before": sorted(i.InstanceId for i in asg.Instances),
            "since": iso(now - timedelta(seconds=5)),  # activities may be stamped a little early
            "deadline": iso(now + timedelta(seconds=req.deadline_seconds)),
        }
        if mode == "fleet":
            request = fleet_request(asg, req.count, token, self.cluster, req.gang,
                                    zone=req.zone, subnet_zones=self._subnet_zones(req, asg))  # fmt: skip
            prep["fleet"] = {
                "launch_template": dict(request.launch_template),
                "instance_type": request.instance_type,
                "subnets": list(request.subnets),
                "zones": list(request.zones),
                "tags": dict(request.tags),
                "capacity_type": request.capacity_type,
                "spot_allocation_strategy": request.spot_allocation_strategy,
            }
        return prep

    def _subnet_zones(self, req: GangRequest, asg: AutoScalingGroup) -> Mapping[str, str]:
        """The group's subnets' zones, read only when a zone is asked for and the group has subnets."""
        subnets = _subnets(asg)
        return self.aws.subnet_zones(req.region, subnets) if req.zone and subnets else {}

    # --- fleet mode ----------------------------------------------------------------------------

    def launch(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """CreateFleet instant for the whole gang; fewer instances than the gang is a partial launch,
        named for EC2's errors (:func:`~spillway.model.launcherror.fleet_error_name`): for capacity
        ``CapacityUnavailable``, a full quota ``QuotaExceeded``, the launch's settings or permissions
        ``LaunchMisconfigured``. Whichever, the give-back is the same: all or nothing."""
        req, prep = self._request(event), _prep(event)
        request = _fleet_of(prep)
        result = self.aws.create_fleet_instant(req.region, request)
        ids = result.instance_ids
        if len(ids) >= request.count:
            return {"status": "launched", "instances": ids, "fleet_id": result.FleetId}
        error = fleet_error_name(e.ErrorCode for e in result.Errors)
        errors = sorted({f"{e.ErrorCode}: {e.ErrorMessage}".strip(": ") for e in result.Errors})
        reason = (
            f"{req.region}/{req.group}: EC2 launched {len(ids)} of the gang's {request.count} instance(s) "
            f"({request.instance_type or 'template type'}){_SHORTFALL_HINT.get(error, '')}: "
            f"{'; '.join(errors) or 'no error given'}"
        )
        pools = [{"capacity_type": kind, "zone": zone, "instance_type": itype}
                 for kind, zone, itype in self._fleet_pools(req.region, request, result.Errors)]  # fmt: skip
        return {
            "status": "partial",
            "instances": ids,
            "reason": reason[:1000],
            "error": error,
            "pools": pools,
        }

    def _fleet_pools(
        self, region: str, request: FleetRequest, errors: Sequence[CreateFleetError]
    ) -> list[Pool]:
        """The pools the fleet's errors named short of capacity (:func:`~spillway.act.backoff.fleet_pools`),
        which the give-back backs off beside the group. The zones of the fleet's subnets are read
        (DescribeSubnets) only when an error names a subnet and no zone. Best-effort: when they cannot be
        read, those pools are left unnamed (the group is still backed off) rather than fail the step
        that holds the launch's answer."""
        zones: Mapping[str, str] = {}
        if needs_subnet_zones(errors, request):
            try:
                zones = self.aws.subnet_zones(region, request.subnets)
            except AwsError:  # throttled, refused, unavailable: the pool's zone stays unknown
                zones = {}
        return fleet_pools(errors, request, zones)

    def attach(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """Once every instance of the fleet runs, attach those not in the group yet (20 a call); never
        after the deadline, even with all of them running: an execution stopped before Attach and
        redriven later would attach a fleet the gang sweep (:mod:`spillway.planner.gangsweep`) may be
        terminating, which relies on no execution attaching past its deadline."""
        req, prep = self._request(event), _prep(event)
        ids = [str(i) for i in (event.get("launch") or {}).get("instances") or []]
        if not ids:
            raise InputError("no instances to attach", field="launch.instances")
        not_yet = self._not_running(req, prep, ids)
        if not_yet is not None:
            return not_yet
        if self.clock() >= _parse(prep["deadline"]):
            return {"status": "timeout", "error": "GangIncomplete",
                    "reason": f"{req.region}/{req.group}: the gang's {len(ids)} instance(s) run, but its deadline "
                    "passed before they were attached (an execution stopped and redriven?): given back"}  # fmt: skip
        owner, now = self._owner(req, prep), self.clock()
        own_instances(owner, ids, len(ids), now)  # no scale-up counts them
        asg = self.aws.describe_group(req.region, req.group)
        member = {i.InstanceId for i in asg.Instances}
        todo = [i for i in ids if i not in member]
        if todo:  # attaching raises the desired capacity: marked as a raise is, before it happens
            # and only with time to attach after it: a retry finds the marker and attaches (no release)
            self.deadline.require(2, f"the attach marker of {req.region}/{req.group}")
            mark_attach(owner, asg.DesiredCapacity, len(todo), now)
        # each AttachInstances only if it ends in time: the retry attaches what this one did not
        calls = self._attach(req, todo) if todo else 0
        return {"status": "attached", "attached": len(todo), "calls": calls}

    def _attach(self, req: GangRequest, todo: Sequence[str], again: bool = False) -> int:
        """AttachInstances of ``todo``, the instances the step's read did not show in the group. A retry
        after a try whose answer was lost reads the group first, and a read older than that try's attach
        sends the same instances again: AWS refuses them (above MaxSize, the group's desired capacity
        already counting them: "If the number of instances being attached plus the desired capacity of
        the group exceeds the maximum size of the group, the operation fails", AttachInstances; or as
        members already), and the refusal gave the gang back with every instance attached and running,
        and backed its group off. A refusal is so judged by the group read again (within the step's
        deadline): every instance in it, they were attached; none, the refusal stands; some (the lost
        try attached the first batches of 20, and the step failed before the others were sent), those
        not in it are attached, ``again``: a refusal of them stands."""
        try:
            return self.aws.attach_instances(req.region, req.group, todo, self.deadline.before(1))
        except (AwsThrottled, AwsUnavailable):
            raise
        except AwsError as refused:
            if again:
                raise
            self.deadline.require(1, f"DescribeAutoScalingGroups({req.region}/{req.group}), read again")
            members = {i.InstanceId for i in self.aws.describe_group(req.region, req.group).Instances}
            left = [i for i in todo if i not in members]
            if len(left) == len(todo):
                raise
            log.info("%s/%s: AttachInstances refused (%s), %d of its %d instance(s) already in the group: "
                     "attached, %d left to attach", req.region, req.group, refused, len(todo) - len(left),
                     len(todo), len(left))  # fmt: skip
            return self._attach(req, left, again=True) if left else 0

    def _not_running(
        self, req: GangRequest, prep: Mapping[str, Any], ids: Sequence[str]
    ) -> dict[str, Any] | None:
        """None when every instance runs; else why not: one gone (``lost``), the deadline, or ``waiting``.
        An id EC2 does not show yet is waited for, not lost: CreateFleet's ids may take a while to be
        visible to DescribeInstances (EC2's eventual consistency)."""
        states = self.aws.instance_states(req.region, ids)
        lost = sorted(i for i in ids if i in states and states[i] not in EC2_ALIVE)
        where = f"{req.region}/{req.group}"
        if lost:
            found = ", ".join(f"{i} {states.get(i, 'unknown')}" for i in lost[:5])
            return {"status": "lost", "error": "GangIncomplete",
                    "reason": f"{where}: {len(lost)} instance(s) of the gang stopped before joining: {found}"}  # fmt: skip
        pending = [i for i in ids if states.get(i) != "running"]
        if not pending:
            return None
        if self.clock() >= _parse(prep["deadline"]):
            return {"status": "timeout", "error": "GangIncomplete",
                    "reason": f"{where}: {len(pending)} instance(s) not running by the deadline"}  # fmt: skip
        return {"status": "waiting", "pending": len(pending)}

    # --- rollback mode -------------------------------------------------------------------------

    def raise_desired(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """Desired capacity + the gang, relative to the live value, once per attempt (a retry finds the
        attempt's marker and raises nothing more: :func:`spillway.act.claims.raise_once`)."""
        req, prep = self._request(event), _prep(event)
        raised = raise_once(self.aws, self._owner(req, prep), int(prep["count"]), self.clock(),
                            existing=[str(i) for i in prep.get("before") or []], deadline=self.deadline)  # fmt: skip
        # its own keys only: the result is Verify's and GiveBack's $.launch, which they check closed
        # (spillway.model.gang.LaunchResult), and a retry's carries the raise marker's
        return {"status": "raised", "again": bool(raised["again"]), "before": raised["before"],
                "after": raised["after"], "count": raised["count"], "desired": raised["after"],
                "previous": raised["before"], "instances": []}  # fmt: skip

    def _settle_failed_raise(
        self, state: Mapping[str, Any], req: GangRequest, prep: Mapping[str, Any]
    ) -> None:
        """A rollback attempt whose RaiseDesired did not answer (no ``$.launch`` of it: its retries all
        failed) may leave its raise marker unsettled by any step: settled here, before anything of it is
        given back (:func:`spillway.act.claims.settle_unanswered`). One that answered settled it."""
        launch = state.get("launch")
        if prep["mode"] == "rollback" and not (
            isinstance(launch, Mapping) and launch.get("status") == "raised"
        ):
            settle_unanswered(self.aws, self._owner(req, prep), self.clock(), self.deadline)

    def _owner(self, req: GangRequest, prep: Mapping[str, Any]) -> Owner:
        return Owner(self.ledger, self.cluster, req.region, req.group, str(prep["attempt"]))

    # --- both ----------------------------------------------------------------------------------

    def verify(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """The whole gang InService with Ready Nodes (``ready``), still coming (``waiting``), or not:
        a member lost after it launched (``lost``: :meth:`_lost`), past the deadline (``timeout``) or, in
        rollback mode, a launch failed (``failed``: for capacity,
        ``CapacityUnavailable``; a full quota, ``QuotaExceeded``; for any other reason, a missing AMI, a
        subnet out of addresses, ``LaunchMisconfigured``: :mod:`spillway.model.launcherror`)."""
        req, prep = self._request(event), _prep(event)
        where, count, now = f"{req.region}/{req.group}", int(prep["count"]), self.clock()
        activities = self.aws.describe_activities(req.region, req.group, now)
        if prep["mode"] == "rollback":
            failure = launch_failure_since(activities, _parse(prep["since"]))
            if failure:  # any Failed launch: capacity is not coming, whatever the reason; named as a
                # fleet's errors are (spillway.model.launcherror)
                error = ERROR_NAMES[launch_error_kind(failure)]
                return {"status": "failed", "error": error, "reason": launch_failed(where, failure)[:1000],
                        "failure": failure[:1000]}  # fmt: skip
        asg = self.aws.describe_group(req.region, req.group)
        replacements = replacement_launches(activities)
        lost = self._lost(req, prep, event, asg)
        if lost:  # all or nothing: a member gone is the gang broken, whatever replaces it; the group's
            # replacements of the lost are claimed for the give-back, which terminates them too
            self._members(req, prep, event, asg, replacements, replacing=True)
            return {"status": "lost", "error": "GangIncomplete",
                    "reason": f"{where}: {len(lost)} of the gang's {count} instance(s) lost after launching "
                    f"({'; '.join(lost[:5])}); the whole gang is given back"[:1000]}  # fmt: skip
        members = self._members(req, prep, event, asg, replacements)
        in_service = sorted(i.InstanceId for i in asg.Instances if i.InstanceId in members
                            and i.LifecycleState == "InService")  # fmt: skip
        ready = ready_nodes(self.kube, self.aws, req.region, in_service)
        if len(ready) >= count:
            for node in sorted(ready.values()) if req.node_labels else ():
                self.kube.label_node(node, req.node_labels)  # Kueue pins the request's pods with it
            self.metric("GangsLaunched", 1)
            return {"status": "ready", "ready": len(ready), "instances": sorted(ready),
                    "nodes": sorted(ready.values()), "reason": f"{where}: all {count} node(s) of the gang Ready"}  # fmt: skip
        if now >= _parse(prep["deadline"]):
            return {"status": "timeout", "error": "GangIncomplete", "ready": len(ready),
                    "reason": f"{where}: {len(ready)} of the gang's {count} node(s) Ready by the deadline "
                    f"({len(in_service)} instance(s) InService); the whole gang is given back"}  # fmt: skip
        return {"status": "waiting", "ready": len(ready), "in_service": len(in_service)}

    def _lost(
        self, req: GangRequest, prep: Mapping[str, Any], state: Mapping[str, Any], asg: AutoScalingGroup
    ) -> list[str]:
        """The attempt's instances lost after they launched, each with where it is: in rollback mode every
        instance it claimed (:class:`~spillway.act.claims.Owner`), in fleet mode every one the fleet
        launched, that the group took out of service (no longer in it, or in it but not Pending or
        InService: Terminating, Standby, Detaching) or marked Unhealthy (it terminates and replaces such an
        instance: EC2 Auto Scaling User Guide, "Health checks for instances in an Auto Scaling group"), or
        that EC2 shows neither pending nor running (a Spot interruption, a hand). A fleet instance not
        (yet) in the group is lost only when EC2 says so: attach may not show in the group at once."""
        in_group = {i.InstanceId: i for i in asg.Instances}
        rollback = prep["mode"] == "rollback"
        if rollback:
            ids = sorted(self._owner(req, prep).claimed())
        else:
            ids = sorted({str(i) for i in (state.get("launch") or {}).get("instances") or []})
        lost = {iid: why for iid in ids if (why := _out_of_service(in_group.get(iid), rollback))}
        if not rollback and ids:
            for iid, ec2 in self.aws.instance_states(req.region, ids).items():
                if ec2 not in EC2_ALIVE:
                    lost.setdefault(iid, ec2)
        return [f"{iid} {why}" for iid, why in sorted(lost.items())]

    def give_back(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """Terminate every instance of the attempt (decrementing the desired capacity by each; where
        MinSize refuses the decrement, without it; an InService one of a group whose Terminate process is
        suspended is left running, ``held``, and the cause says so; one whose Node runs work, or whose
        Node could not be cordoned or read, is left running, ``kept``: each Node is cordoned before its
        pods are read, and its cordon taken off again unless its member was terminated, also when a
        terminate fails: :func:`~spillway.act.instances.judged_for_give_back`), give back what the
        attempt raised but never launched (relative, rollback mode; none when its raise is unsettled:
        it may never have added any), back the group off, and the pools the attempt found short of
        capacity (:func:`_short_pools`).
        Capacity and instances of other executions on the group are left alone.
        ``event["state"]`` is the execution's whole state (whatever steps ran)."""
        state = event.get("state")
        if not isinstance(state, Mapping):
            raise InputError("required: the execution's state", field="state")
        req, prep = self._request(state), _prep(state)
        self._settle_failed_raise(state, req, prep)  # before this step's terminations move the group
        error, cause = _why(state, f"{req.region}/{req.group}")
        # EC2's own words (before the cause names kept members' pods): it fails until somebody fixes it
        misconfigured = error == "LaunchMisconfigured" and names_settings(cause)
        asg = self.aws.describe_group(req.region, req.group)
        activities = self.aws.describe_activities(req.region, req.group, self.clock())
        members = self._members(req, prep, state, asg, replacement_launches(activities))
        in_group = {i.InstanceId for i in asg.Instances}
        # one the group is terminating already (it took it out of service: any capacity it keeps for it
        # is in a replacement, claimed and terminated here) is not asked for again, as a drain does not
        leaving = {i.InstanceId for i in asg.Instances if i.LifecycleState.startswith("Terminat")}
        # a member whose Node runs work by now stays: the gang's capacity goes, never a running pod; each
        # Node is cordoned before its pods are read, and keeps the cordon only if its member is terminated
        why = f"{GANG_GIVE_BACK} {req.gang[:120]} (attempt {prep['attempt']})"  # one attempt's, every retry
        with judged_for_give_back(
            self.kube, self.aws, req.region, members - leaving, self.clock(), why
        ) as judged:
            gone = self._terminate(asg, set(judged.idle(members - leaving)), in_group, self._owner(req, prep))
            judged.terminated(gone.terminated)
            gone.raise_first()
        busy = judged.working
        cause += judged.said()
        desired: int | None = None
        owner = self._owner(req, prep)
        if prep["mode"] == "rollback" and not owner.unsettled():  # raised, never launched: that, relative
            # every instance it ever claimed, also those a first try of this step terminated (decremented)
            delivered = max(len(members & in_group), owner.held())
            desired = give_back_undelivered(self.aws, owner, owner.raised() - delivered, self.clock(),
                                            self.deadline)  # fmt: skip
        now = self.clock()
        until = now + timedelta(minutes=self.backoff_minutes)
        # the group, and each pool EC2 named short of capacity, as scale-up's backoff does; a fleet's
        # for as many nodes as it asked for at once (it says nothing of fewer)
        # a rollback's failure that names no type is of the type its template names now (prepare's)
        failed = (state.get("verify") or {}).get("status") == "failed"
        launching = self.aws.describe_group_launching(req.region, req.group) if failed else asg
        pools, nodes = _short_pools(state, launching)
        # the group read after it, when one is needed, in time too: both started or neither (a retry of
        # the step writes the back-off again), never a back-off written and the step's answer then cut by
        # Lambda's Timeout in that read (Sandbox.Timedout, which GiveBack does not retry)
        read_after = desired is None or bool(gone.replaced or gone.held)
        self.deadline.require(1 + read_after, f"the back-off of {req.region}/{req.group}")
        back_off(self.ledger, self.cluster, req.group, until, f"gang {req.gang}: {cause}"[:1000],
                 region=req.region, pools=pools, nodes=nodes, now=now)  # fmt: skip
        self.metric("GroupsBackedOff", 1)
        self.metric("GangsGivenBack", 1)
        if misconfigured:
            self.metric("LaunchesMisconfigured", 1)
        if read_after:
            after = self.aws.describe_group(req.region, req.group)
            desired = after.DesiredCapacity
            cause += gone.kept(after.MinSize, desired)
        return {"group": req.group, "region": req.region, "outcome": "given_back", "error": error,
                "cause": cause[:1000], "terminated": gone.terminated, "replaced": gone.replaced,
                "held": gone.held, "kept": sorted(busy), "desired": desired,
                "backoff_until": iso(until)}  # fmt: skip

    def _members(
        self,
        req: GangRequest,
        prep: Mapping[str, Any],
        state: Mapping[str, Any],
        asg: AutoScalingGroup,
        replacements: frozenset[str],
        replacing: bool = False,
    ) -> set[str]:
        """The attempt's instances: the fleet's (fleet mode: those the launch reported, those a lost
        launch answer is asked again for, and those carrying the attempt's tag); in rollback mode the
        new instances of the group it claimed (up to the gang), so a concurrent scale-up's or gang's are
        never counted. In both, the group's replacements (``replacements``) of members it took out of
        service, claimed while checking (``replacing``): no member (the gang is lost), but capacity the
        attempt added, which its give-back terminates (:func:`~spillway.act.claims.own_instances`)."""
        before = set(prep.get("before") or [])
        new = [i.InstanceId for i in asg.Instances if i.InstanceId not in before
               and i.LifecycleState in LIVE_STATES]  # fmt: skip
        if prep["mode"] == "fleet":
            return self._fleet_members(req, prep, state, asg, new, replacements, replacing)
        owner, count, now = self._owner(req, prep), int(prep["count"]), self.clock()
        return set(own_instances(owner, new, count, now, replacements, replacing))

    def _fleet_members(
        self,
        req: GangRequest,
        prep: Mapping[str, Any],
        state: Mapping[str, Any],
        asg: AutoScalingGroup,
        new: Sequence[str],
        replacements: frozenset[str],
        replacing: bool,
    ) -> set[str]:
        """:meth:`_members` in fleet mode: ``new``, the group's instances new to the attempt."""
        reported = {str(i) for i in (state.get("launch") or {}).get("instances") or []}
        tagged = self.aws.instance_states(req.region, tag=(TAG_ATTEMPT, str(prep["attempt"])))
        alive = {i for i, s in tagged.items() if s in EC2_TERMINABLE}
        ours = [i for i in new if i in reported or i in replacements]  # never another owner's launch
        # one not listed in the group (yet: attach may not show at once) is no loss that a replacement
        # makes good, unless EC2 shows it ended (:meth:`_lost`)
        listed = {i.InstanceId for i in asg.Instances}
        ours += sorted(i for i in reported - listed if tagged.get(i, "pending") in EC2_ALIVE)
        owner, count, now = self._owner(req, prep), int(prep["count"]), self.clock()
        replaced = set(own_instances(owner, ours, count, now, replacements, replacing)) - reported
        return reported | self._unreported(req, prep, state) | alive | replaced

    def _unreported(self, req: GangRequest, prep: Mapping[str, Any], state: Mapping[str, Any]) -> set[str]:
        """The instances of a launch whose answer never came (no ``launch`` in the state: the Lambda
        timed out, died, or its retries ran out, maybe after CreateFleet launched). The attempt's tag
        finds them, but not right after the launch (DescribeInstances is eventually consistent), and a
        give-back that found none ended with the gang running outside the group for good. CreateFleet is
        asked again with the attempt's ClientToken and the same parameters: EC2 answers with the first
        call's result and launches nothing. Had the first call never reached EC2, this one launches, and
        the give-back terminates what it launched. Not asked when the Launch step's error says nothing
        ran under the token (:data:`NOT_LAUNCHED`)."""
        caught = state.get("error")
        error = str(caught.get("Error")) if isinstance(caught, Mapping) else ""
        if state.get("launch") or error in NOT_LAUNCHED:
            return set()
        self.deadline.require(1, f"CreateFleet({req.region}) asked again under the attempt's ClientToken")
        try:
            return set(self.aws.create_fleet_instant(req.region, _fleet_of(prep)).instance_ids)
        except FLEET_REFUSED:  # EC2 refused the call whole: nothing runs under the token
            return set()

    def _terminate(
        self, asg: AutoScalingGroup, members: set[str], in_group: set[str], owner: Owner
    ) -> Terminated:
        """Every instance of ``members``, best-effort: one refused does not stop the others. In the group:
        :func:`~spillway.act.instances.give_back_in_group` (the decrement, and without it where AWS
        refuses it for the MinSize; none for an InService one while the group's Terminate process is
        suspended: ``held``). Outside the group (not attached yet, or gone from it): EC2
        TerminateInstances. A member the group read (``in_group``) does not list, of an attempt that may
        have sent AttachInstances (its attach marker: :func:`~spillway.act.claims.mark_attach`, written
        before the first), is asked of Auto Scaling first (:meth:`_unlisted`), and only one it answers
        is in no group goes to EC2. Errors are recorded, not raised: the caller raises the first
        (:meth:`~spillway.act.instances.Terminated.raise_first`) once it knows what was terminated."""
        region = asg.region
        unlisted = self._unlisted(members - in_group, owner)
        gone = give_back_in_group(
            self.aws, asg, sorted((members & in_group) | unlisted), unlisted, self.deadline
        )
        outside = sorted((members - in_group - unlisted) | set(gone.not_found))
        try:
            self._terminate_outside(region, outside, gone.terminated)
        except SpillwayError as exc:
            gone.errors.append((outside, exc))
        return gone

    def _unlisted(self, missing: set[str], owner: Owner) -> set[str]:
        """Those of ``missing`` (members the give-back's group read does not list) that may be in the group
        all the same: all of them once the attempt's attach marker is written, none before. The read is
        DescribeAutoScalingGroups, eventually consistent with no bound AWS documents: right after an
        AttachInstances (its answer lost, or just returned) it may not list the instances attached yet.
        Terminated through EC2 without the decrement, they kept the desired capacity they added, and
        Auto Scaling launched replacements nobody asked for. TerminateInstanceInAutoScalingGroup answers
        one in no group with a ValidationError ("No managed instance found for instance ID":
        ``InstanceNotFound``), which EC2 then terminates. The marker is read only in time for it, and each
        TerminateInstanceInAutoScalingGroup is started so too (the step's deadline)."""
        if not missing:
            return set()
        self.deadline.require(1, f"the attach marker read of {owner.where}")
        return set(missing) if owner.raised() else set()

    def _terminate_outside(self, region: str, outside: Sequence[str], terminated: list[str]) -> None:
        """EC2 TerminateInstances of those still alive or stopped, and of those EC2 does not show yet;
        each call's instances are added to ``terminated`` as it returns (the next may raise). Each call is
        started only when it ends within the step's deadline (:meth:`Deadline.require`): one not started
        is ``AwsUnavailable``, retried by GiveBack, which terminates what is left."""
        if not outside:
            return
        self.deadline.require(1, f"DescribeInstances({region}) of {len(outside)} member(s) outside the group")
        alive = self.aws.instance_states(region, outside)
        doomed = sorted(i for i in outside if alive.get(i) in EC2_TERMINABLE)
        if doomed:
            self.deadline.require(1, f"TerminateInstances({region}, {', '.join(doomed[:3])} ...)")
            terminated += self.aws.terminate_instances(region, doomed)
        # an id EC2 does not show yet (just launched: eventual consistency) is terminated on its own
        # call, after the others: EC2 refuses a whole batch that names an id it does not know
        unseen = sorted(i for i in outside if i not in alive)
        if unseen:
            self.deadline.require(1, f"TerminateInstances({region}, {', '.join(unseen[:3])} ...)")
            terminated += self.aws.terminate_instances(region, unseen)

    # --- dispatch ------------------------------------------------------------------------------

    def run(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """The step ``event["action"]`` names, on an event :func:`parse_gang_step` accepts (else
        :class:`InputError` naming the field, before anything is read or written)."""
        parse_gang_step(event)
        action = str(event["action"])
        steps: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
            "gang_prepare": self.prepare,
            "gang_launch": self.launch,
            "gang_raise": self.raise_desired,
            "gang_attach": self.attach,
            "gang_verify": self.verify,
            "gang_give_back": self.give_back,
        }
        return steps[action](event)


def parse_gang_step(event: Any) -> BaseModel:
    """The step's input as gang_launch.asl.json sends it (:mod:`spillway.model.gang`), or
    :class:`InputError` naming the first bad field ("prep.fleet.subnets.0", "state.launch.status", ...)."""
    parsed = step_input(event, GANG_STEP_INPUTS, "gang")
    problem = step_problem(parsed, event)
    if problem:
        raise InputError(problem[1], field=problem[0])
    return parsed


def _prep(event: Mapping[str, Any]) -> dict[str, Any]:
    prep = event.get("prep")
    if not isinstance(prep, Mapping) or prep.get("mode") not in MODES:
        raise InputError("required: the result of gang_prepare", field="prep")
    for key in ("count", "attempt", "desired", "deadline"):
        if key not in prep:
            raise InputError("required", field=f"prep.{key}")
    return dict(prep)


def _out_of_service(member: AsgInstance | None, missed: bool) -> str:
    """Why the group no longer runs ``member`` for the gang, or ``""``: gone from it (when ``missed``
    says that is a loss), in a state other than Pending or InService, or marked Unhealthy."""
    if member is None:
        return "no longer in the group" if missed else ""
    if member.LifecycleState not in LIVE_STATES:
        return member.LifecycleState
    return "Unhealthy" if (member.HealthStatus or "").lower() == "unhealthy" else ""


def _refuse_mode(req: GangRequest, asg: AutoScalingGroup, mode: str, where: str) -> None:
    """Refuse, before anything launches, a gang the mode cannot launch in the group: a zone it does not
    span, or that rollback mode cannot choose; a fleet whose zone AZRebalance would even out; any gang
    of a group whose Launch process is suspended: a rollback raise would launch nothing (a wasted
    deadline), and AWS refuses AttachInstances until Launch is resumed (EC2 Auto Scaling User Guide,
    "Suspend and resume processes", additional considerations: "you can't attach new instances to the
    group"), so a fleet would run the whole gang outside the group until its give-back; any gang of a
    group whose Terminate process is suspended, which could not be given back whole once its members
    are InService in the group (:func:`~spillway.model.nodegroup.give_back_refusal`; the planner reads
    such a group as off: :func:`~spillway.model.nodegroup.atomic_refusal`)."""
    if req.zone is not None and req.zone not in asg.AvailabilityZones:
        raise InputError(f"{req.zone} is not one of {where}'s zones {', '.join(asg.AvailabilityZones)}",
                         field="zone")  # fmt: skip
    if req.zone is not None and mode == "rollback" and list(asg.AvailabilityZones) != [req.zone]:
        raise InputError(f"rollback mode cannot choose a zone of {where}, which spans several; use fleet",
                         field="zone")  # fmt: skip
    if mode == "fleet" and (rebalances := fleet_refusal(asg)):
        raise InputError(rebalances, field="SuspendedProcesses")
    if launches_nothing := launch_refusal(asg):
        attach = "; nor does it accept AttachInstances" if mode == "fleet" else ""
        raise AsgLimitExceeded(f"{launches_nothing}{attach}; nothing launched")
    if held := give_back_refusal(asg):
        raise AsgLimitExceeded(f"{held}; nothing launched")


def _short_pools(state: Mapping[str, Any], asg: AutoScalingGroup) -> tuple[list[Pool], int]:
    """The pools the attempt found short of capacity, and how many nodes EC2 refused there at once:
    those its partial fleet's errors named (the launch's ``pools``: :meth:`GangSteps._fleet_pools`),
    refused the fleet's ``MinTargetCapacity``, the gang's count (``prep.count``): EC2 had not that many
    at once, which says nothing of fewer; or the one a rollback gang's failed launch activity names,
    read as scale-up reads its own (:func:`~spillway.act.backoff.failed_pool`): the group's raise takes
    what there is, so its failure says EC2 had none (1)."""
    launch, verify = state.get("launch") or {}, state.get("verify") or {}
    if launch.get("status") == "partial":
        pools = [(p["capacity_type"], p["zone"], p["instance_type"]) for p in launch.get("pools") or []]
        return pools, int(_prep(state)["count"])
    pool = failed_pool(str(verify.get("failure") or ""), asg) if verify.get("status") == "failed" else None
    return ([pool] if pool else []), 1


def _why(state: Mapping[str, Any], where: str) -> tuple[str, str]:
    """The error the execution fails with, and why: a caught error, else the step that said no."""
    caught = state.get("error")
    if isinstance(caught, Mapping) and caught.get("Error"):
        return str(caught["Error"]), str(caught.get("Cause") or caught["Error"])
    for step in ("verify", "attach", "launch"):
        result = state.get(step)
        if isinstance(result, Mapping) and result.get("error"):
            return str(result["error"]), str(result.get("reason") or result["error"])
    return "GangIncomplete", f"{where}: the gang did not launch whole"


def execution_request(
    group: NodeGroup,
    count: int,
    gang: str,
    plan_id: str,
    state_machine_arn: str,
    *,
    deadline_seconds: float = 600.0,
    poll_seconds: int = 15,  # a Wait state's SecondsPath: whole seconds
    node_labels: Mapping[str, str] | None = None,
    zone: str | None = None,
) -> ExecutionRequest | None:
    """The GangLaunch execution for ``count`` nodes of ``group`` for ``gang``, or None when the group's
    tag says ``off`` (the gang then goes through the ordinary scale-up). Named after the plan, group and
    gang, so a plan started twice starts it once. ``node_labels`` (a ProvisioningRequest's gang: the
    label naming the request) are put on the gang's nodes once all of them are Ready; ``zone``: the one
    zone the planner placed the gang in (a fleet group spanning several)."""
    if group.atomic_launch == "off":
        return None
    digest = hashlib.sha256(f"{group.region}/{group.name}/{gang}".encode()).hexdigest()[:12]
    return ExecutionRequest(
        kind="gang_launch",
        state_machine_arn=state_machine_arn,
        name=f"gang-{plan_id}"[:66] + f"-{digest}",
        input={
            "group": group.name,
            "region": group.region,
            "count": count,
            "gang": gang,
            "mode": group.atomic_launch,
            "deadline_seconds": deadline_seconds,
            "poll_seconds": poll_seconds,
            "plan_id": plan_id,
            **({"node_labels": dict(node_labels)} if node_labels else {}),
            **({"zone": zone} if zone else {}),
        },
    )
