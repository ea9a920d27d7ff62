"""Make moto's EC2 Auto Scaling behave like AWS where Spillway depends on it, and give it kubelets.

moto launches instances the instant the desired capacity rises, never runs out of capacity, keeps no
scaling activities and accepts a desired capacity above MaxSize. AWS does none of that. :class:`CloudSim`
(a context manager, used inside a moto mock such as :class:`spillway.local.stack.LocalStack`) adds:

* ``SetDesiredCapacity`` outside ``[MinSize, MaxSize]`` refused with AWS's ``ValidationError``, and so
  is ``TerminateInstanceInAutoScalingGroup`` with ``ShouldDecrementDesiredCapacity`` that would take the
  group below its MinSize (without the decrement the group launches a replacement), and of an instance
  in no group (moto raises StopIteration out of the client: :func:`terminate_refuses_unmanaged` does only
  that);
* scaling activities, answered by ``DescribeScalingActivities``: a ``Successful`` "Launching a new EC2
  instance" per launch, ``Terminating EC2 instance`` per termination, ``Detaching EC2 instance`` per
  instance ``DetachInstances`` takes out of its group; listed as AWS lists them, those in progress (a
  termination a lifecycle hook holds, one activity that ends when the instance terminates) first;
* ``UpdateAutoScalingGroup`` keeps a ``MixedInstancesPolicy`` it does not name, as AWS does (moto drops it);
* capacity outages per group (:meth:`CloudSim.capacity_outage`): the desired capacity is accepted but
  nothing launches, and a ``Failed`` activity carries EC2's InsufficientInstanceCapacity message; and per
  zone of a group (:meth:`CloudSim.zone_outage`): a raise is spread over the group's zones, those for
  the zone short of capacity fail (one ``Failed`` activity each, naming the zone), the others launch;
* a log of every ``SetDesiredCapacity`` call (``set_desired_calls``), for "set exactly once" assertions;
* for gang launches: ``AttachInstances`` as AWS does it (at most 20 ids a call, only running instances,
  refused when desired + attached would pass MaxSize, desired raised by the count attached); partial
  instant fleets (:meth:`CloudSim.fleet_shortfall`: moto honours no ``MinTargetCapacity``, and neither
  may EC2's answer be trusted to, so CreateFleet launches fewer and lists EC2's ``Errors`` for the rest);
  launches that never reach InService (:meth:`CloudSim.stall_launches`); throttling
  (:meth:`CloudSim.throttle`: the next calls of an operation answer ``RequestLimitExceeded``); and
  CreateFleet's ``ClientToken`` as EC2 keeps it (moto ignores it): a call with a token seen before gets
  the first call's answer again and launches nothing, or ``IdempotentParameterMismatch`` when its other
  parameters differ; and DescribeInstances' eventual consistency (:meth:`CloudSim.hide_new_instances`:
  EC2 documents that it may not show instances just launched for a while), which moto does not have;
* warm pools: moto keeps a group's ``WarmPoolConfiguration`` but ``DescribeWarmPool`` lists no instances.
  CloudSim lists as many as AWS documents the pool holds: ``MaxGroupPreparedCapacity`` (else the group's
  MaxSize) less the desired capacity, at least the pool's ``MinSize``, each in ``Warmed:<PoolState>``
  (ids ``i-warm…``: they are not EC2 instances); an unknown group is AWS's ``ValidationError``;
* terminate lifecycle hooks: moto stores hooks (PutLifecycleHook, DescribeLifecycleHooks) but terminates
  at once and has no CompleteLifecycleAction. CloudSim does what AWS documents: when the group terminates
  an instance (a lower desired capacity, or TerminateInstanceInAutoScalingGroup) and it has terminate
  hooks, the instance goes to ``Terminating:Wait`` (still in the group, still running, no longer counted
  towards the desired capacity) and one ``EC2 Instance-terminate Lifecycle Action`` event per hook goes
  to the region's default event bus; ``CompleteLifecycleAction`` (by token or instance id, CONTINUE or
  ABANDON: a terminating instance terminates either way) ends that hook's action, and when none is left
  the instance terminates; ``RecordLifecycleActionHeartbeat`` pushes the timeout back by the hook's
  HeartbeatTimeout; an action past its timeout ends as its DefaultResult says (checked on every call);
  an action that no longer waits is AWS's ``ValidationError`` "No active Lifecycle Action found".

:class:`NodeRegistrar` plays the kubelets: every InService instance of a group tagged for the cluster
becomes a Ready Node in the Kubernetes API emulator after a boot delay, shaped by the group's template
(instance type, node-template tags); the Node of a terminated instance goes away, as the cloud node
lifecycle controller removes it, while that of an instance detached from its group stays as long as
EC2 runs it.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from spillway.model.quantity import format_milli
from spillway.model.reserve import EKS_RESERVE, ReserveLike

ACCOUNT = "123456789012"
ATTACH_LIMIT = 20
THROTTLED = {"CreateFleet": "RequestLimitExceeded", "AttachInstances": "Throttling"}
ICE_MESSAGE = (
    "We currently do not have sufficient {instance_type} capacity in the Availability Zone you requested "
    "({zone}). Our system will be working on provisioning additional capacity. You can currently get "
    "{instance_type} capacity by not specifying an Availability Zone in your request or choosing {other}. "
    "Launching EC2 instance failed."
)


@dataclass(frozen=True)
class DesiredCall:
    region: str
    group: str
    desired: int
    at: float


def _now() -> datetime:
    return datetime.now(UTC)


class CloudSim:
    """AWS's Auto Scaling behaviour on top of moto (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._outages: dict[tuple[str, str], str | None] = {}
        self._zone_outages: dict[tuple[str, str], str] = {}  # (region, group) -> its zone short of capacity
        self.activities: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.set_desired_calls: list[DesiredCall] = []
        self._shortfalls: dict[str, tuple[int, str, str]] = {}  # region -> (launched, code, message)
        self._stalled: set[tuple[str, str]] = set()
        self._throttles: dict[str, int] = {}
        # CreateFleet ClientTokens EC2 has seen: (region, token) -> (the other parameters, the answer)
        self._fleet_tokens: dict[tuple[str, str], tuple[dict[str, Any], Any]] = {}
        self._hiding: set[str] = set()  # regions whose new fleet instances DescribeInstances does not show
        self._unseen: set[str] = set()  # instances DescribeInstances does not show yet
        self.attach_calls: list[tuple[str, str, tuple[str, ...]]] = []  # (region, group, ids) that worked
        # Terminate lifecycle actions waiting: instance id -> {"region", "group", "hooks": {hook: [token,
        # timeout at]}}; and every completion as (group, hook, instance id, result).
        self.waiting: dict[str, dict[str, Any]] = {}
        self.completed: list[tuple[str, str, str, str]] = []
        self.heartbeats: list[tuple[str, str, str]] = []
        self._terminating: set[str] = set()  # instances TerminateInstanceInAutoScalingGroup is detaching
        self._stack = ExitStack()

    # -- test controls --

    def capacity_outage(self, group: str, region: str, message: str | None = None) -> None:
        """From now on the group launches nothing; each attempt records a Failed activity."""
        with self._lock:
            self._outages[(region, group)] = message

    def zone_outage(self, group: str, region: str, zone: str) -> None:
        """From now on the group's launches in ``zone`` (one of its AvailabilityZones) fail for capacity.
        A raise is spread over the group's zones as Auto Scaling balances them (each new instance to the
        zone with the fewest, in the group's order on a tie); those for ``zone`` fail, each with a
        ``Failed`` activity whose message names ``zone``, and the others launch in their zones. Auto
        Scaling's ``balanced-best-effort`` strategy would try the failed ones again in another zone a
        little later: not played (Spillway, as cluster-autoscaler, takes back the desired capacity a
        failed launch did not start when it backs the group off)."""
        with self._lock:
            self._zone_outages[(region, group)] = zone

    def fleet_shortfall(
        self,
        region: str,
        launched: int,
        code: str = "InsufficientInstanceCapacity",
        message: str | None = None,
    ) -> None:
        """From now on an instant fleet in ``region`` launches at most ``launched`` instances and lists an
        EC2 error for each one it did not (the rest are terminated at once: they never ran for the user)."""
        with self._lock:
            self._shortfalls[region] = (launched, code, message or "We currently do not have sufficient "
                                        "capacity in the Availability Zone you requested.")  # fmt: skip

    def end_fleet_shortfall(self, region: str) -> None:
        """Instant fleets in ``region`` launch all they ask for again."""
        with self._lock:
            self._shortfalls.pop(region, None)

    def hide_new_instances(self, region: str) -> None:
        """From now on, instances an instant fleet launches in ``region`` are in no DescribeInstances
        answer (EC2's eventual consistency, as long as it lasts): asked for by a filter (a tag, their
        ids as ``instance-id``) they are left out, asked for by ``InstanceIds`` EC2 answers
        ``InvalidInstanceID.NotFound``. Other calls (TerminateInstances, AttachInstances) know them.
        Until :meth:`show_instances`."""
        with self._lock:
            self._hiding.add(region)

    def show_instances(self) -> None:
        """EC2 has caught up: DescribeInstances shows every instance again."""
        with self._lock:
            self._hiding.clear()
            self._unseen.clear()

    def stall_launches(self, group: str, region: str) -> None:
        """Instances the group launches from now on stay ``Pending`` (never InService, never a Node)."""
        with self._lock:
            self._stalled.add((region, group))

    def throttle(self, operation: str, times: int = 1) -> None:
        """The next ``times`` calls of ``operation`` (CreateFleet, AttachInstances) are throttled."""
        if operation not in THROTTLED:
            raise ValueError(f"operation: one of {', '.join(THROTTLED)}")
        with self._lock:
            self._throttles[operation] = self._throttles.get(operation, 0) + times

    def _throttled(self, operation: str) -> bool:
        with self._lock:
            left = self._throttles.get(operation, 0)
            if left:
                self._throttles[operation] = left - 1
            return bool(left)

    def end_outage(self, group: str, region: str) -> None:
        with self._lock:
            self._outages.pop((region, group), None)
            self._zone_outages.pop((region, group), None)

    def calls_for(self, group: str, region: str | None = None) -> list[DesiredCall]:
        return [
            c for c in self.set_desired_calls if c.group == group and (region is None or c.region == region)
        ]

    def record(self, region: str, group: str, activity: dict[str, Any]) -> None:
        with self._lock:
            self.activities.setdefault((region, group), []).insert(0, activity)

    # -- patching moto --

    def __enter__(self) -> CloudSim:
        self._stack.enter_context(self._patched())
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    @contextmanager
    def _patched(self) -> Iterator[None]:
        from moto.autoscaling import models, responses
        from moto.autoscaling.exceptions import AutoscalingClientError, ValidationError
        from moto.core.responses import ActionResult
        from moto.ec2.exceptions import EC2ClientError, InvalidInstanceIdError
        from moto.ec2.responses.fleets import Fleets
        from moto.ec2.responses.instances import InstanceResponse

        sim = self
        group_cls = models.FakeAutoScalingGroup
        backend_cls = models.AutoScalingBackend
        response_cls = responses.AutoScalingResponse
        original_group_set = group_cls.set_desired_capacity
        original_backend_set = backend_cls.set_desired_capacity
        original_terminate = backend_cls.terminate_instance
        original_describe = response_cls.describe_scaling_activities
        original_attach = backend_cls.attach_instances
        original_detach = backend_cls.detach_instances
        original_active = group_cls.active_instances
        original_fleet = Fleets.create_fleet
        original_describe_instances = InstanceResponse.describe_instances
        original_warm = response_cls.describe_warm_pool
        original_update = group_cls.update

        def group_set(self: Any, new_capacity: int | None) -> None:
            region, name = self.region, self.name
            before = {s.instance.id for s in self.active_instances()}
            target = self.min_size if new_capacity is None else new_capacity
            if target != getattr(self, "desired_capacity", None):  # moto's __init__ sets it through here
                self.spillway_desired_change = (
                    _now(),
                    int(getattr(self, "desired_capacity", 0) or 0),
                    target,
                )
            if target < len(before) and sim._terminate_hooks(self):
                # Scale-in on a hooked group: the instances it picks wait for the hooks instead.
                victims = [s for s in self.active_instances() if not s.protected_from_scale_in]
                self.desired_capacity = target
                for state in victims[: len(before) - target]:
                    sim._hold(self, state)
                return
            with sim._lock:
                outage = (region, name) in sim._outages
                message = sim._outages.get((region, name))
            target = self.min_size if new_capacity is None else new_capacity
            if target > len(before) and sim._launch_around_zone(self, before, target, original_group_set):
                return
            if outage and target > len(before):
                self.desired_capacity = target
                itype = _instance_type(self)
                zones = list(self.availability_zones) or [f"{region}a"]
                text = message or ICE_MESSAGE.format(
                    instance_type=itype, zone=zones[0], other=", ".join(zones[1:]) or f"{region}b"
                )
                sim.record(
                    region,
                    name,
                    _activity(self, "Failed", f"Launching a new EC2 instance.  Status Reason: {text}", text),
                )
                return
            original_group_set(self, new_capacity)
            with sim._lock:
                stalled = (region, name) in sim._stalled
            if stalled:
                for state in self.instance_states:
                    if state.instance.id not in before:
                        state.lifecycle_state = "Pending"
            after = {s.instance.id for s in self.active_instances()}
            for iid in sorted(after - before):
                sim.record(
                    region, name, _activity(self, "Successful", f"Launching a new EC2 instance: {iid}")
                )
            for iid in sorted(before - after):
                sim.record(region, name, _activity(self, "Successful", f"Terminating EC2 instance: {iid}"))

        def backend_set(self: Any, group_name: str, desired_capacity: int | None) -> None:
            group = self.autoscaling_groups.get(group_name)
            if group is not None and desired_capacity is not None:
                if desired_capacity > group.max_size:
                    raise ValidationError(
                        f"New SetDesiredCapacity value {desired_capacity} is above max value {group.max_size} "
                        "for the AutoScalingGroup."
                    )
                if desired_capacity < group.min_size:
                    raise ValidationError(
                        f"New SetDesiredCapacity value {desired_capacity} is below min value {group.min_size} "
                        "for the AutoScalingGroup."
                    )
            with sim._lock:
                sim.set_desired_calls.append(
                    DesiredCall(self.region_name, group_name, int(desired_capacity or 0), time.time())
                )
            original_backend_set(self, group_name, desired_capacity)

        def terminate(self: Any, instance_id: str, should_decrement: bool) -> Any:
            owner = managed_group(self, instance_id)
            state = next(s for s in owner.instance_states if s.instance.id == instance_id)
            live = state.lifecycle_state in ("InService", "Pending")
            if should_decrement and live and int(owner.desired_capacity or 0) - 1 < owner.min_size:
                raise ValidationError(
                    f"Currently, desiredSize equals minSize ({owner.min_size}). Terminating instance without "
                    "replacement will violate group's min size constraint. Either set "
                    "shouldDecrementDesiredCapacity flag to false or lower group's min size."
                )
            if sim._terminate_hooks(owner):
                original_size = owner.desired_capacity
                if should_decrement and live:
                    owner.desired_capacity = max(int(owner.desired_capacity or 0) - 1, 0)
                if instance_id not in sim.waiting:
                    sim._hold(owner, state)
                if live and not should_decrement:  # it counts no more: the group replaces it
                    owner.set_desired_capacity(owner.desired_capacity)
                return models.TerminateInstanceActivity(state.instance, original_size)
            with sim._lock:  # moto terminates by detaching: recorded as the termination it is
                sim._terminating.add(instance_id)
            try:
                return original_terminate(self, instance_id, should_decrement)
            finally:
                with sim._lock:
                    sim._terminating.discard(instance_id)

        def complete_action(self: Any) -> Any:
            result = str(self._get_param("LifecycleActionResult") or "")
            if result not in ("CONTINUE", "ABANDON"):
                raise ValidationError(f"Invalid LifecycleActionResult {result!r}: CONTINUE or ABANDON")
            group, hook, iid = sim._waiting_action(self)
            sim._complete(self.autoscaling_backend, group, hook, iid, result)
            return ActionResult({})

        def heartbeat(self: Any) -> Any:
            group, hook, iid = sim._waiting_action(self)
            with sim._lock:
                entry = sim.waiting[iid]["hooks"][hook]
                entry[1] = time.time() + entry[2]
                sim.heartbeats.append((group, hook, iid))
            return ActionResult({})

        def describe(self: Any) -> Any:
            name = self._get_param("AutoScalingGroupName")
            region = self.region
            with sim._lock:
                if name:
                    items = list(sim.activities.get((region, name), []))
                else:
                    items = sorted(
                        itertools.chain.from_iterable(
                            v for (r, _), v in sim.activities.items() if r == region
                        ),
                        key=lambda a: a["StartTime"],
                        reverse=True,
                    )
            items.sort(key=lambda a: "EndTime" in a)  # those in progress first (a stable sort)
            limit = int(self._get_param("MaxRecords") or 100)
            start = int(self._get_param("NextToken") or 0)  # AWS pages with NextToken; an offset here
            page: dict[str, Any] = {"Activities": items[start : start + limit]}
            if start + limit < len(items):
                page["NextToken"] = str(start + limit)
            return ActionResult(page)

        def attach(self: Any, group_name: str, instance_ids: list[str]) -> None:
            if sim._throttled("AttachInstances"):
                raise AutoscalingClientError("Throttling", "Rate exceeded")
            group = self.autoscaling_groups.get(group_name)
            if group is None:
                raise ValidationError(f"AutoScalingGroup name not found - {group_name}")
            if len(instance_ids) > ATTACH_LIMIT:
                raise ValidationError(
                    f"The number of instance ids that may be passed in is limited to {ATTACH_LIMIT}"
                )
            for iid in instance_ids:
                state = self.ec2_backend.get_instance(iid).state
                if state != "running":
                    raise ValidationError(f"Instance {iid} is not in a valid state ({state}) to be attached")
            desired = int(group.desired_capacity or 0) + len(instance_ids)
            if desired > group.max_size:
                raise ValidationError(
                    f"Desired capacity:{desired} must be between the specified min size:{group.min_size} "
                    f"and max size:{group.max_size}"
                )
            original_attach(self, group_name, instance_ids)
            group.desired_capacity = desired  # moto counts instances; AWS adds to the desired capacity
            with sim._lock:
                sim.attach_calls.append((group.region, group_name, tuple(instance_ids)))
            for iid in instance_ids:
                sim.record(group.region, group_name,
                           _activity(group, "Successful", f"Attaching an existing EC2 instance: {iid}"))  # fmt: skip

        def detach(self: Any, group_name: str, instance_ids: list[str], should_decrement: bool) -> Any:
            group = self.autoscaling_groups[group_name]
            members = {s.instance.id for s in group.instance_states}
            strangers = [iid for iid in instance_ids if iid not in members]
            if strangers:  # AWS refuses the whole call; moto would detach nothing and still decrement
                raise ValidationError(
                    f"The instance {strangers[0]} is not part of Auto Scaling group {group_name}."
                )
            before = int(group.desired_capacity or 0)
            after = before - len(instance_ids) if should_decrement else before
            for iid in instance_ids:  # what AWS records for each (moto records nothing), before the
                # launch of a replacement it causes without the decrement: that one is newer
                with sim._lock:
                    terminating = iid in sim._terminating  # TerminateInstanceInAutoScalingGroup's detach
                verb = "Terminating" if terminating else "Detaching"
                activity = _activity(group, "Successful", f"{verb} EC2 instance: {iid}")
                shrink = f", shrinking the capacity from {before} to {after}" if should_decrement else ""
                what = (
                    "an instance was taken out of service" if terminating else f"instance {iid} was detached"
                )
                activity["Cause"] = (
                    f"At {activity['StartTime']:%Y-%m-%dT%H:%M:%SZ} {what} in response to a user request{shrink}."
                )
                sim.record(group.region, group_name, activity)
            return original_detach(self, group_name, instance_ids, should_decrement)

        def create_fleet(self: Any) -> Any:
            if sim._throttled("CreateFleet"):
                raise EC2ClientError(THROTTLED["CreateFleet"], "Request limit exceeded.")
            token = self._get_param("ClientToken")
            asked = {k: v for k, v in self.querystring.items() if k != "ClientToken"}
            with sim._lock:
                used = sim._fleet_tokens.get((self.region, token)) if token else None
            if used is not None:  # EC2's idempotency: the same call answered again, launching nothing
                if used[0] != asked:
                    raise EC2ClientError("IdempotentParameterMismatch",
                                         f"Client token {token} was used with different parameters.")  # fmt: skip
                return used[1]
            result = short_of(self, original_fleet(self))
            if token:
                with sim._lock:
                    sim._fleet_tokens[(self.region, token)] = (asked, result)
            body = result.result if isinstance(result, ActionResult) else None
            with sim._lock:
                if self.region in sim._hiding and isinstance(body, dict):
                    sim._unseen.update(
                        i for e in body.get("Instances") or [] for i in e.get("InstanceIds", [])
                    )
            return result

        def describe_instances(self: Any) -> Any:
            with sim._lock:
                unseen = set(sim._unseen)
            asked = set(self._get_param("InstanceIds", []))
            if asked & unseen:
                raise InvalidInstanceIdError(sorted(asked & unseen))
            result = original_describe_instances(self)
            body = result.result if isinstance(result, ActionResult) else None
            if not unseen or not isinstance(body, dict):
                return result
            shown = []
            for reservation in body.get("Reservations") or []:
                instances = [i for i in reservation.instances if i.id not in unseen]
                if instances:
                    reservation = copy.copy(reservation)
                    reservation.instances = instances
                    shown.append(reservation)
            return ActionResult({**body, "Reservations": shown})

        def short_of(self: Any, result: Any) -> Any:
            """The fleet as it comes out under fleet_shortfall: fewer instances, EC2's errors for the rest."""
            with sim._lock:
                shortfall = sim._shortfalls.get(self.region)
            body = result.result if isinstance(result, ActionResult) else None
            if shortfall is None or not isinstance(body, dict) or self._get_param("Type") != "instant":
                return result
            launched, code, message = shortfall
            entries = list(body.get("Instances") or [])
            ids = [i for entry in entries for i in entry.get("InstanceIds", [])]
            keep, drop = set(ids[:launched]), ids[launched:]
            if drop:
                self.ec2_backend.terminate_instances(drop)
            kept = [{**e, "InstanceIds": [i for i in e["InstanceIds"] if i in keep]} for e in entries]
            template = entries[0].get("LaunchTemplateAndOverrides") if entries else None
            # of the capacity type the fleet asked for, as EC2 lists them (CreateFleetError.Lifecycle)
            asked = (self._get_param("TargetCapacitySpecification") or {}).get("DefaultTargetCapacityType")
            lifecycle = (entries[0].get("Lifecycle") if entries else None) or asked or "on-demand"
            error = {"ErrorCode": code, "ErrorMessage": message, "Lifecycle": lifecycle,
                     **({"LaunchTemplateAndOverrides": template} if template else {})}  # fmt: skip
            return ActionResult({**body, "Instances": [e for e in kept if e["InstanceIds"]],
                                 "Errors": [dict(error) for _ in drop]})  # fmt: skip

        def warm_pool(self: Any) -> Any:
            name = self._get_param("AutoScalingGroupName")
            group = self.autoscaling_backend.autoscaling_groups.get(name)
            if group is None:
                raise ValidationError(f"AutoScalingGroup name not found - {name}")
            pool = group.warm_pool
            if pool is None:
                return ActionResult({"Instances": []})
            return ActionResult({"WarmPoolConfiguration": pool, "Instances": _warm_instances(group, pool)})

        def update(self: Any, **kwargs: Any) -> None:
            # AWS changes only what the update names; moto sets a MixedInstancesPolicy not given to None
            named = kwargs.get("mixed_instances_policy") or kwargs.get("launch_template")
            kept = self.mixed_instances_policy
            if not named and not kwargs.get("launch_config_name") and kept:
                # as stored, its template has both an id and a name, which moto refuses when given: one
                policy = copy.deepcopy(kept)
                spec = policy["LaunchTemplate"]["LaunchTemplateSpecification"]
                if spec.get("LaunchTemplateName"):
                    spec.pop("LaunchTemplateId", None)
                kwargs["mixed_instances_policy"] = policy
            original_update(self, **kwargs)

        def active(self: Any) -> list[Any]:
            # AWS counts a launching (Pending) instance towards the desired capacity; moto only InService
            # ones, and would launch replacements for stalled launches (stall_launches) without end.
            return [x for x in self.instance_states if x.lifecycle_state in ("InService", "Pending")]

        group_cls.set_desired_capacity = group_set  # type: ignore[method-assign]
        group_cls.active_instances = active  # type: ignore[method-assign]
        group_cls.update = update  # type: ignore[method-assign,assignment]
        backend_cls.attach_instances = attach  # type: ignore[method-assign]
        backend_cls.detach_instances = detach  # type: ignore[method-assign]
        Fleets.create_fleet = create_fleet  # type: ignore[method-assign]
        InstanceResponse.describe_instances = describe_instances  # type: ignore[method-assign]
        backend_cls.set_desired_capacity = backend_set  # type: ignore[method-assign]
        backend_cls.terminate_instance = terminate  # type: ignore[method-assign]
        response_cls.describe_scaling_activities = describe  # type: ignore[method-assign]
        response_cls.describe_warm_pool = warm_pool  # type: ignore[method-assign]
        originals = {
            name: response_cls.__dict__.get(name)
            for name in ("complete_lifecycle_action", "record_lifecycle_action_heartbeat")
        }
        response_cls.complete_lifecycle_action = complete_action  # type: ignore[attr-defined]
        response_cls.record_lifecycle_action_heartbeat = heartbeat  # type: ignore[attr-defined]
        try:
            yield
        finally:
            group_cls.set_desired_capacity = original_group_set  # type: ignore[method-assign]
            backend_cls.set_desired_capacity = original_backend_set  # type: ignore[method-assign]
            backend_cls.terminate_instance = original_terminate  # type: ignore[method-assign]
            response_cls.describe_scaling_activities = original_describe  # type: ignore[method-assign]
            backend_cls.attach_instances = original_attach  # type: ignore[method-assign]
            backend_cls.detach_instances = original_detach  # type: ignore[method-assign]
            group_cls.active_instances = original_active  # type: ignore[method-assign]
            group_cls.update = original_update  # type: ignore[method-assign]
            Fleets.create_fleet = original_fleet  # type: ignore[method-assign]
            InstanceResponse.describe_instances = original_describe_instances  # type: ignore[method-assign]
            response_cls.describe_warm_pool = original_warm  # type: ignore[method-assign]
            for name, original in originals.items():
                if original is None:
                    delattr(response_cls, name)
                else:
                    setattr(response_cls, name, original)

    # terminate lifecycle hooks (see the module docstring) ------------------------------------------

    def _launch_around_zone(
        self, group: Any, before: set[str], target: int, launch: Callable[[Any, int], None]
    ) -> bool:
        """A raise of ``group`` to ``target`` while one of its zones is short (:meth:`zone_outage`): each
        new instance goes to the zone with the fewest; the short zone's fail (a Failed activity each),
        the others are launched zone by zone (``launch``: moto's own SetDesiredCapacity, the group kept
        to that zone meanwhile). False when none of its zones is short: nothing done."""
        region, name = group.region, group.name
        with self._lock:
            short = self._zone_outages.get((region, name))
        zones = list(group.availability_zones)
        if short is None or short not in zones or len(zones) < 2:
            return False
        counts = {z: 0 for z in zones}
        for state in group.active_instances():
            if state.instance.availability_zone in counts:
                counts[state.instance.availability_zone] += 1
        wanted = {z: 0 for z in zones}
        for _ in range(target - len(before)):
            zone = min(zones, key=lambda z: (counts[z] + wanted[z], zones.index(z)))
            wanted[zone] += 1
        for zone in zones:
            if zone == short or not wanted[zone]:
                continue
            group.availability_zones = [zone]
            try:
                launch(group, len(group.active_instances()) + wanted[zone])
            finally:
                group.availability_zones = zones
        group.desired_capacity = target
        after = {s.instance.id for s in group.active_instances()}
        for iid in sorted(after - before):
            self.record(region, name, _activity(group, "Successful", f"Launching a new EC2 instance: {iid}"))
        others = ", ".join(z for z in zones if z != short)
        text = ICE_MESSAGE.format(instance_type=_instance_type(group), zone=short, other=others)
        for _ in range(wanted[short]):
            failed = _activity(group, "Failed", f"Launching a new EC2 instance.  Status Reason: {text}", text)
            self.record(region, name, failed)
        return True

    @staticmethod
    def _terminate_hooks(group: Any) -> list[Any]:
        backend = group.autoscaling_backend
        return [
            h
            for h in backend.describe_lifecycle_hooks(group.name)
            if h.lifecycle_transition == "autoscaling:EC2_INSTANCE_TERMINATING"
        ]

    def _hold(self, group: Any, state: Any) -> None:
        """``state``'s instance waits in Terminating:Wait; one lifecycle event per terminate hook."""
        from moto.events.models import events_backends

        state.lifecycle_state = "Terminating:Wait"
        iid = state.instance.id
        hooks = self._terminate_hooks(group)
        now = time.time()
        with self._lock:
            self.waiting[iid] = {
                "region": group.region,
                "group": group.name,
                "hooks": {
                    h.name: [
                        str(uuid.uuid4()),
                        now + int(h.heartbeat_timeout),
                        int(h.heartbeat_timeout),
                        h.default_result,
                    ]
                    for h in hooks
                },
            }
            tokens = {name: entry[0] for name, entry in self.waiting[iid]["hooks"].items()}
        activity = _activity(group, "InProgress", f"Terminating EC2 instance: {iid}")
        del activity["EndTime"]  # in progress: it ends when the instance terminates (_complete)
        activity["Progress"] = 50
        with self._lock:
            self.waiting[iid]["activity"] = activity
        self.record(group.region, group.name, activity)
        events = [
            {
                "Source": "aws.autoscaling",
                "DetailType": "EC2 Instance-terminate Lifecycle Action",
                "Resources": [group.arn],
                "Detail": json.dumps(
                    {
                        "Origin": "AutoScalingGroup",
                        "Destination": "EC2",
                        "LifecycleActionToken": tokens[h.name],
                        "AutoScalingGroupName": group.name,
                        "LifecycleHookName": h.name,
                        "EC2InstanceId": iid,
                        "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
                    }
                ),
                "EventBusName": "default",
            }
            for h in hooks
        ]
        if events:
            events_backends[ACCOUNT][group.region].put_events(events)

    def _expire(self, backend: Any) -> None:
        """Actions past their timeout end as the hook's DefaultResult says (both terminate the instance)."""
        now = time.time()
        with self._lock:
            late = [
                (entry["group"], hook, iid, parts[3])
                for iid, entry in self.waiting.items()
                for hook, parts in entry["hooks"].items()
                if parts[1] <= now
            ]
        for group, hook, iid, result in late:
            self._complete(backend, group, hook, iid, f"{result} (timed out)")

    def _waiting_action(self, response: Any) -> tuple[str, str, str]:
        """(group, hook, instance id) of the action a Complete/Heartbeat call names, or ValidationError."""
        from moto.autoscaling.exceptions import ValidationError

        self._expire(response.autoscaling_backend)
        group = str(response._get_param("AutoScalingGroupName") or "")
        hook = str(response._get_param("LifecycleHookName") or "")
        iid = response._get_param("InstanceId")
        token = response._get_param("LifecycleActionToken")
        with self._lock:
            if not iid and token:
                iid = next(
                    (
                        i
                        for i, e in self.waiting.items()
                        if e["group"] == group and e["hooks"].get(hook, [None])[0] == token
                    ),
                    None,
                )
            entry = self.waiting.get(str(iid)) if iid else None
            parts = entry["hooks"].get(hook) if entry and entry["group"] == group else None
        if parts is None or (token and parts[0] != token):
            what = f"token {token}" if token and not iid else f"instance ID {iid}"
            raise ValidationError(f"No active Lifecycle Action found with {what}")
        return group, hook, str(iid)

    def _complete(self, backend: Any, group_name: str, hook: str, iid: str, result: str) -> None:
        with self._lock:
            entry = self.waiting.get(iid)
            if entry is None or hook not in entry["hooks"]:
                return
            del entry["hooks"][hook]
            self.completed.append((group_name, hook, iid, result))
            done = not entry["hooks"]
            if done:
                del self.waiting[iid]
                # the termination's own activity (_hold) ends: AWS lists one activity per termination
                entry["activity"].update(StatusCode="Successful", EndTime=_now(), Progress=100)
        if not done:
            return
        group = backend.autoscaling_groups.get(group_name)
        if group is not None:
            group.instance_states = [s for s in group.instance_states if s.instance.id != iid]
        backend.ec2_backend.terminate_instances([iid])


def managed_group(backend: Any, instance_id: str) -> Any:
    """The group of moto's autoscaling ``backend`` holding ``instance_id``, or AWS's answer for one in
    none: TerminateInstanceInAutoScalingGroup's ``ValidationError`` "Instance Id not found - No managed
    instance found for instance ID". (moto's own lookup raises StopIteration out of the client.)"""
    from moto.autoscaling.exceptions import ValidationError

    for group in backend.autoscaling_groups.values():
        if any(s.instance.id == instance_id for s in group.instance_states):
            return group
    raise ValidationError(f"Instance Id not found - No managed instance found for instance ID: {instance_id}")


@contextmanager
def terminate_refuses_unmanaged() -> Iterator[None]:
    """Only the part of :class:`CloudSim` that makes moto's TerminateInstanceInAutoScalingGroup of an
    instance in no group answer as AWS does (:func:`managed_group`), for a rig that needs no more."""
    from unittest import mock

    from moto.autoscaling import models

    original = models.AutoScalingBackend.terminate_instance

    def terminate(self: Any, instance_id: str, should_decrement: bool) -> Any:
        managed_group(self, instance_id)
        return original(self, instance_id, should_decrement)

    with mock.patch.object(models.AutoScalingBackend, "terminate_instance", terminate):
        yield


def _warm_instances(group: Any, pool: Any) -> list[dict[str, Any]]:
    """The instances AWS keeps in ``group``'s warm pool (see the module docstring)."""
    prepared = pool.max_group_prepared_capacity
    ceiling = int(prepared) if prepared is not None and int(prepared) >= 0 else int(group.max_size)
    size = max(int(pool.min_size or 0), ceiling - int(group.desired_capacity or 0))
    zones = list(group.availability_zones) or [""]
    return [
        {
            "InstanceId": "i-warm" + hashlib.sha256(f"{group.name}/{n}".encode()).hexdigest()[:12],
            "InstanceType": _instance_type(group),
            "AvailabilityZone": zones[n % len(zones)],
            "LifecycleState": f"Warmed:{pool.pool_state or 'Stopped'}",
            "HealthStatus": "Healthy",
        }
        for n in range(size)
    ]


def _instance_type(group: Any) -> str:
    policy = group.mixed_instances_policy or {}
    overrides = (policy.get("LaunchTemplate") or {}).get("Overrides") or []
    if overrides and overrides[0].get("InstanceType"):
        return str(overrides[0]["InstanceType"])
    for state in group.instance_states:
        return str(state.instance.instance_type)
    template = getattr(group, "launch_template", None)
    data = getattr(template, "latest_version", lambda: None)()
    if data is not None:
        return str(data.data.get("InstanceType", "unknown"))
    return "unknown"


def _cause(group: Any, now: datetime, description: str) -> str:
    """An activity's Cause in Auto Scaling's words: the clause of the desired capacity's last change, then
    the activity's own ("At 2020-10-30T19:35:51Z a user request explicitly set group desired capacity
    changing the desired capacity from 0 to 16.  At 2020-10-30T19:36:07Z an instance was started in response
    to a difference between desired and actual capacity, increasing the capacity from 0 to 16.")."""
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    verb = "started" if description.startswith("Launching") else "taken out of service"
    own = (
        f"At {stamp} an instance was {verb} in response to a difference between desired and actual capacity."
    )
    if not description.startswith(("Launching", "Terminating")):
        own = f"At {stamp} a user request {description[0].lower()}{description[1:]}."
    change = getattr(group, "spillway_desired_change", None)
    if change is None:
        return own
    at, before, after = change
    return (
        f"At {at.strftime('%Y-%m-%dT%H:%M:%SZ')} a user request explicitly set group desired capacity "
        f"changing the desired capacity from {before} to {after}.  {own}"
    )


def _activity(group: Any, status: str, description: str, message: str | None = None) -> dict[str, Any]:
    now = _now()
    activity: dict[str, Any] = {
        "ActivityId": str(uuid.uuid4()),
        "AutoScalingGroupName": group.name,
        "AutoScalingGroupARN": group.arn,
        "Description": description,
        "Cause": _cause(group, now, description),
        "StartTime": now,
        "EndTime": now,
        "StatusCode": status,
        "Progress": 100,
        "Details": "{}",
    }
    if message:
        activity["StatusMessage"] = message
    return activity


class NodeRegistrar:
    """Kubelets for moto's instances: InService instances become Ready Nodes after ``boot_seconds``.
    With ``plugin_seconds``, a Node registers without its extended resources (GPUs), and its device
    plugin adds them that much later, as on a real GPU node.

    ``step()`` does one pass (tests call it directly); ``start()`` runs passes every ``tick`` seconds in a
    background thread until ``stop()``. Groups are those tagged for ``cluster`` in ``regions``.
    """

    def __init__(
        self,
        kube: Any,
        *,
        cluster: str,
        regions: Sequence[str],
        boot_seconds: float = 0.0,
        tick: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
        reserve: ReserveLike | None = None,
        plugin_seconds: float = 0.0,
    ) -> None:
        self.kube = kube  # spillway.local.kubeapi.KubeApiServer
        self.plugin_seconds = plugin_seconds
        self.plugins: dict[str, tuple[float, dict[str, str]]] = {}  # node -> (due, resources held back)
        self.cluster = cluster
        self.regions = list(regions)
        self.boot_seconds = boot_seconds
        self.tick = tick
        self.clock = clock
        self.reserve: ReserveLike = reserve if reserve is not None else EKS_RESERVE
        self.first_seen: dict[str, float] = {}
        self.registered: dict[str, str] = {}  # instance id -> node name
        self.region_of: dict[str, str] = {}  # instance id -> its region, for a registered one
        # held while a Node is added and its instance recorded: whoever lists Nodes under it
        # (Rig.wait_nodes) sees each Node with its entry in ``registered``, never one without
        self.joining = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors: list[BaseException] = []
        self._clients: dict[tuple[str, str], Any] = {}

    def _client(self, service: str, region: str) -> Any:
        """One boto3 client per service and region, made at first use: a pass runs every ``tick`` beside
        the test, and making a client takes ~20 ms of the GIL (clients are thread-safe; boto3 docs,
        "Multithreading or multiprocessing with clients")."""
        key = (service, region)
        if key not in self._clients:
            import boto3

            make: Any = boto3.client  # typed per service literal; ours is a runtime string
            self._clients[key] = make(service, region_name=region)
        return self._clients[key]

    def step(self) -> list[str]:
        """Register what has booted, forget what was terminated; returns the names of new Nodes."""
        from spillway.model.aws import AutoScalingGroup, bundled_instance_types
        from spillway.model.nodegroup import build_template, is_managed, resolve_instance_type

        catalogue = bundled_instance_types()
        now = self.clock()
        added: list[str] = []
        live: set[str] = set()
        for region in self.regions:
            autoscaling = self._client("autoscaling", region)
            for page in autoscaling.get_paginator("describe_auto_scaling_groups").paginate():
                for raw in page["AutoScalingGroups"]:
                    group = AutoScalingGroup.model_validate(raw)
                    if not is_managed(group, self.cluster):
                        continue
                    itype = resolve_instance_type(group)
                    template = build_template(group, itype, catalogue, self.reserve)
                    for instance in group.Instances:
                        if instance.LifecycleState != "InService":
                            # A terminating instance runs (its kubelet too) until it is terminated.
                            if instance.LifecycleState.startswith("Terminating"):
                                live.add(instance.InstanceId)
                            continue
                        live.add(instance.InstanceId)
                        if instance.InstanceId in self.registered:
                            continue
                        seen = self.first_seen.setdefault(instance.InstanceId, now)
                        if now - seen < self.boot_seconds or template is None:
                            continue
                        described = self._client("ec2", region).describe_instances(
                            InstanceIds=[instance.InstanceId]
                        )
                        info = described["Reservations"][0]["Instances"][0]
                        name = info.get("PrivateDnsName") or f"node-{instance.InstanceId}"
                        zone = instance.AvailabilityZone or f"{region}a"
                        node = _node(name, instance.InstanceId, zone, region, template)
                        self._hold_back(node, now)
                        with self.joining:
                            self.kube.add(node)
                            self.registered[instance.InstanceId] = name
                            self.region_of[instance.InstanceId] = region
                        added.append(name)
        self._register_plugins(now)
        for iid in sorted(set(self.registered) - live):
            if self._running(iid):  # detached from its group: its kubelet runs on, its Node stays
                continue
            name = self.registered.pop(iid)
            self.region_of.pop(iid, None)
            self.first_seen.pop(iid, None)
            if self.kube.get("Node", name) is not None:
                self.kube.delete("Node", name)
        return added

    def _running(self, instance_id: str) -> bool:
        """Whether EC2 still runs the instance (``pending`` or ``running``): one no group lists any more
        was terminated, or detached (DetachInstances, which moto does as AWS: the instance runs on)."""
        region = self.region_of.get(instance_id)
        if region is None:
            return False
        found = self._client("ec2", region).describe_instances(
            Filters=[{"Name": "instance-id", "Values": [instance_id]}]
        )
        states = [i["State"]["Name"] for r in found["Reservations"] for i in r["Instances"]]
        return any(state in ("pending", "running") for state in states)

    def _hold_back(self, node: dict[str, Any], now: float) -> None:
        """Without ``plugin_seconds``, nothing; else the node's extended resources wait for its plugin."""
        status = node["status"]
        extended = {r: v for r, v in status["allocatable"].items() if "/" in r}
        if self.plugin_seconds <= 0 or not extended:
            return
        for key in ("allocatable", "capacity"):
            status[key] = {r: v for r, v in status[key].items() if r not in extended}
        self.plugins[node["metadata"]["name"]] = (now + self.plugin_seconds, extended)

    def plugins_up(self) -> None:
        """Every device plugin still held back registers its resources now."""
        self._register_plugins(float("inf"))

    def _register_plugins(self, now: float) -> None:
        for name, (due, extended) in sorted(self.plugins.items()):
            if now < due:
                continue
            del self.plugins[name]
            node = self.kube.get("Node", name)
            if node is None:
                continue
            for key in ("allocatable", "capacity"):
                node["status"][key] = {**node["status"][key], **extended}
            self.kube.update("Node", node)

    def start(self) -> NodeRegistrar:
        def loop() -> None:
            while not self._stop.wait(self.tick):
                try:
                    self.step()
                except Exception as exc:  # keep the kubelets alive; tests read errors
                    self.errors.append(exc)

        self._thread = threading.Thread(target=loop, name="node-registrar", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def _node(name: str, instance_id: str, zone: str, region: str, template: Any) -> dict[str, Any]:
    """The Node a launched instance registers: its group's template's allocatable and capacity."""
    allocatable, capacity = (
        {r: format_milli(r, v) if r in ("cpu", "memory") else str(v // 1000) for r, v in resources.items()}
        for resources in (template.allocatable, template.capacity)
    )
    labels = {
        **dict(template.labels),
        "kubernetes.io/hostname": name,
        "topology.kubernetes.io/zone": zone,
        "topology.kubernetes.io/region": region,
    }
    spec: dict[str, Any] = {"providerID": f"aws:///{zone}/{instance_id}"}
    if template.taints:
        spec["taints"] = [
            {"key": k, **({"value": v} if v else {}), "effect": e} for k, v, e in template.taints
        ]
    stamp = _now().strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {
            "allocatable": allocatable,
            "capacity": capacity,
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastTransitionTime": stamp}
            ],
        },
    }
