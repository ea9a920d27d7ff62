"""The scale-up execution's Lambda steps (``statemachines/scale_up.asl.json``).

The state machine maps over the plan's groups; for each group it calls, in order:

``prepare``      uncordon the planned nodes and lift Spillway's draining taint, in one patch and only
                 while the node still carries the cordon the plan saw (``cordons``: a drain that took
                 it over since keeps it); the Event on each says the plan's reason: reused for pending
                 pods, or an orphaned drain restored; read the live group (not one carried from an
                 earlier read, ``carried``: its nodes only uncordoned, nothing asked of Auto Scaling,
                 and ``verify`` answers ``ready``: :meth:`ScaleSteps._carried_prep`);
                 refuse a raise of ``to - from`` above MaxSize, or of a group whose Launch process is
                 suspended (nothing would launch: :func:`~spillway.model.nodegroup.launch_refusal`), with
                 :class:`AsgLimitExceeded` (the state machine's ``Refused``, then a re-plan on the live
                 groups, which skips the group); say whether the
                 desired capacity must be raised (``set``) and by how much (``count``), the execution's
                 ``owner`` id, which instances existed before (``before``), and the launch deadline (the
                 group's node provision time when tagged, else the launch timeout) with the seconds between
                 checks (``poll_seconds``: :meth:`ScaleSteps._launch_window`).
``set_desired``  raise the desired capacity by ``count`` relative to the live value, once however often
                 the step is retried (:func:`spillway.act.claims.raise_once`), in any region.
``verify``       ``ready`` when the ``count`` instances launched for this plan (claimed by it among the
                 group's new ones: :func:`spillway.act.claims.own_instances`; never the group's
                 replacement of an instance it took out of service, but in place of one of its own)
                 run Ready Nodes (a launch of it that Failed was made good: the pool EC2 named short is
                 backed off, not the group); ``failed`` when
                 a launch activity since ``prepare`` failed, for capacity or any other reason (a missing
                 AMI, a subnet without free addresses: :func:`~spillway.model.nodegroup.launch_failure_since`),
                 while the raise has fewer instances than ``count`` and no launch activity since is still
                 under way (:func:`~spillway.model.nodegroup.launch_under_way`; one per instance: Auto
                 Scaling may still deliver it in another zone or as another type), or at the deadline;
                 ``timeout`` past the deadline;
                 ``unsettled`` past the deadline when its raise is unsettled (its answer was lost and it
                 may never have applied: not a launch failure, the group is not backed off, the state
                 machine ends the group there and the next plan sees the pods still pending);
                 ``resized`` while short when a scheduled action lowered the group's desired capacity
                 below the raise's ``target`` since ``prepare`` (:func:`_cut_since`: Auto Scaling took the capacity back, ended as
                 ``unsettled`` is, no back-off);
                 else ``launching``.
``backoff``      after ``failed`` or ``timeout``: back the group off in the state table (TTL = the
                 window), and after ``failed`` for capacity each pool that had none too (every Failed
                 launch of the raise), when its failure names it (:func:`~spillway.act.backoff.failed_pool`: its capacity type, zone, instance type; a failure for
                 another reason is the group's own, none of its pools can launch, so the group's key is
                 the one); after ``timeout`` terminate this plan's instances that run no Ready Node
                 (decrementing the desired capacity), while after ``failed`` the instances Auto Scaling
                 did start for the raise are kept, booting, and counted by the plans as capacity
                 launching (a Failed activity is one launch that started nothing); and give back the
                 capacity it raised that never launched, relative
                 to the live value (none when its raise is unsettled). A gang or another scale-up on the
                 group keeps its own.

After all groups, ``next_round``: when a group backed off (or was refused, or failed), re-plan with the
same pure planner on the latest snapshot, the groups as AWS has them now (a region whose read fails
unread, its groups carried from the snapshot as observe carries them:
:func:`spillway.observe.groups_read`; so is one not read while the step's plan (its room,
:data:`~spillway.model.calltime.REPLAN_ROOM_SECONDS`) and commit still fit in the
invocation's time, :meth:`Deadline.reading`, and no back-off, state read or commit starts without time
for it: ``AwsUnavailable``, which NextRound retries, where Lambda's Timeout, ``Sandbox.Timedout``,
ended the execution ReplanFailed) and the state with the new back-off, which sends the pods left unplaced to the next group or region; the execution then maps over
the new groups (at most :data:`~spillway.model.history.MAX_SCALE_UP_GROUPS`: the others' pods wait for the
next plan). At most ``max_rounds`` rounds. A re-plan that raises groups records its raises in the
state (``State.raises``) as a plan does, committed with its plan record on the state's version
(:class:`StateConflict` when a plan committed meanwhile: the step is retried and re-plans on the new
state), so the plans that follow count those nodes as launching until a snapshot shows them; so does one
that took off the state a raise Auto Scaling never took. Either keeps the entries its live reads
already show, for the plans to end on their snapshots (:func:`_ended_on_snapshots`).

Each step's input is checked first against what the state machine passes it
(:mod:`spillway.model.scale`, :func:`parse_step`): anything else is an :class:`InputError` naming the
field, raised before anything is read or written.

Every step is idempotent (a raise marker per execution and group, conditional instance claims and
back-off writes), so Step Functions may retry any of them. A plan adds its own ``to - from`` to whatever
the group has when it raises: two plans made from snapshots that both predate the first one's raise each
add theirs (the planner sees a raise only in a later snapshot). Errors are our named types, matched by the state machine's ``Retry``/``Catch``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel

from spillway.act.backoff import Pool, back_off, failed_pool
from spillway.act.claims import Owner, give_back_undelivered, own_instances, raise_once, settle_unanswered
from spillway.act.deadline import NO_DEADLINE, Deadline
from spillway.act.instances import give_back_in_group, judged_for_give_back, ready_nodes
from spillway.act.planning import (
    PlanSettings,
    execution_raises,
    owned_raises,
    plan_id_for,
    scale_up_groups,
    snapshot_age,
    summarize,
)
from spillway.errors import (
    AsgLimitExceeded,
    AwsError,
    InputError,
    KubeError,
    NodeNotFound,
    SnapshotError,
    SnapshotNotFound,
    SpillwayError,
    StateConflict,
    StateCorrupt,
    StateTooLarge,
)
from spillway.model.act import (
    PlanRecord,
    PlanSummary,
    StoredState,
    add_unplaced_counts,
    format_key,
    iso,
    replan_key,
)
from spillway.model.aws import AutoScalingGroup, ScalingActivity
from spillway.model.calltime import REPLAN_ROOM_SECONDS
from spillway.model.cluster import format_time
from spillway.model.groupkey import GroupKey
from spillway.model.history import MAX_SCALE_UP_GROUPS, stretched_poll
from spillway.model.k8s import BACKOFF_GIVE_BACK
from spillway.model.launcherror import names_settings
from spillway.model.nodegroup import (
    LIVE_STATES,
    NodeGroup,
    failed_launches_since,
    launch_failed,
    launch_failure_since,
    launch_refusal,
    launch_under_way,
    one_capacity_type,
    replacement_launches,
    scheduled_cuts,
    with_zone_ids,
    zone_ids_of,
)
from spillway.model.options import parse_options
from spillway.model.scale import MAX_SECONDS, STEP_INPUTS
from spillway.model.snapshot import Snapshot
from spillway.model.state import RaiseState, State, keyed_by_region, scale_up_owner
from spillway.model.stepinput import step_input
from spillway.model.utc import aware
from spillway.observe import groups_read
from spillway.planner import ScalingPlan
from spillway.planner import plan as run_planner
from spillway.planner.context import first_regions
from spillway.ports import ERRORS, Cloud, Cluster, Ledger, Snapshots

log = logging.getLogger(__name__)

Metric = Callable[[str, float], None]

# What each step may raise, by exact class (a state machine matches names, not subclasses):
# tests/unit/test_error_contract.py checks every one is retried or caught where scale_up.asl.json
# runs that step, and that a step given any port error raises nothing outside its set.
# what a step may raise is what the ports it calls may raise (spillway.ports.ERRORS)
_KUBE = ERRORS["Cluster"]
_AWS = ERRORS["Cloud"]
RAISES: dict[str, frozenset[type[SpillwayError]]] = {
    "prepare": frozenset({InputError, *_KUBE, *_AWS}),
    "set_desired": frozenset({InputError, *_AWS, StateConflict, StateCorrupt}),
    "verify": frozenset({InputError, *_KUBE, *_AWS, StateConflict, StateCorrupt}),
    "backoff": frozenset({InputError, *_KUBE, *_AWS, StateConflict, StateCorrupt}),
    "next_round": frozenset(
        {InputError, *_AWS, StateConflict, StateCorrupt, StateTooLarge, SnapshotError, SnapshotNotFound}
    ),
}
RETRY_OUTCOMES = frozenset({"backed_off", "refused", "error"})


def _cut_since(
    activities: Sequence[ScalingActivity], since: datetime, target: int
) -> tuple[datetime, int] | None:
    """The latest lowering of the group's desired capacity by a scheduled action at or after ``since``
    to below the raise's ``target`` (when, to what), as the Causes of its activities name it
    (:func:`~spillway.model.nodegroup.scheduled_cuts`), or None. A one-time action that ran between the
    raise and now is gone from DescribeScheduledActions; its run is still in the activities. A cut to
    ``target`` or above (the group was raised further meanwhile) leaves the raise's nodes coming, as the
    planner judges it (:func:`spillway.planner.raises._resized_since`)."""
    by_arn, by_name = scheduled_cuts(activities)
    cuts = [
        (at, to)
        for found in (*by_arn.values(), *by_name.values())
        for at, to in found
        if aware(at) >= since and to < target
    ]
    return max(cuts, default=None)


# Event keys every round passes on unchanged.
_CARRIED = ("cluster", "plan_id", "snapshot_key", "part", "poll_seconds", "launch_timeout_seconds")


def _part(event: Mapping[str, Any]) -> int:
    """Which part of its plan's scale-up the execution is (``part``: 1, 2, ...;
    :func:`spillway.act.planning.scale_up_parts`); 1 for an execution started without one (by a build
    before parts were named, whose first part's keys and owners stay what they were)."""
    return int(event.get("part", 1))


def _owner_id(event: Mapping[str, Any], region: str, name: str) -> str:
    """The execution's owner id in the group (:class:`~spillway.act.claims.Owner`), per round and part."""
    return scale_up_owner(event.get("plan_id", "?"), event.get("round", 1), region, name, _part(event))


def _no_metric(name: str, value: float) -> None:
    return None


def _parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _field(event: Mapping[str, Any], name: str) -> Any:
    if name not in event:
        raise InputError("required", field=name)
    return event[name]


@dataclass
class ScaleSteps:
    kube: Cluster
    aws: Cloud
    ledger: Ledger
    snapshots: Snapshots
    settings: PlanSettings
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    metric: Metric = _no_metric
    # the invocation's deadline: a raise or give-back asks nothing it could not finish before it
    deadline: Deadline = NO_DEADLINE

    # --- prepare ---------------------------------------------------------------------------------

    def prepare(self, event: Mapping[str, Any]) -> dict[str, Any]:
        group = _field(event, "group")
        name, region = str(group["group"]), str(group["region"])
        to, grow = int(group["to"]), bool(group.get("grow", True))
        uncordoned, gone = self._uncordon_planned(event, group)
        if group.get("carried"):
            return self._carried_prep(event, group, uncordoned, gone)
        asg = self.aws.describe_group(region, name)
        timeout, poll = self._launch_window(event, asg)
        count = max(0, to - int(group.get("from", to))) if grow else 0
        if count and launch_refusal(asg):  # raised, it would count as launching and launch nothing
            raise AsgLimitExceeded(f"{launch_refusal(asg)}; desired capacity not raised")
        if count and asg.DesiredCapacity + count > asg.MaxSize:
            raise AsgLimitExceeded(
                f"{region}/{name}: desired capacity {asg.DesiredCapacity} + {count} is above MaxSize "
                f"{asg.MaxSize}; not set"
            )
        now = self.clock()
        # every instance already in the group, whatever its state: one back from Standby later (ExitStandby
        # adds it to the desired capacity itself) or a Terminating one is not one this raise launched
        before = sorted(i.InstanceId for i in asg.Instances)
        return {
            "set": count > 0,
            "count": count,
            "owner": _owner_id(event, region, name),
            "target": to if grow else asg.DesiredCapacity,
            "live_desired": asg.DesiredCapacity,
            "max_size": asg.MaxSize,
            "before": before,
            "since": iso(now - timedelta(seconds=5)),  # activities may be stamped a little early
            "deadline": iso(now + timedelta(seconds=timeout)),
            "poll_seconds": poll,
            "uncordoned": uncordoned,
            "gone": gone,
        }

    def _carried_prep(
        self, event: Mapping[str, Any], group: Mapping[str, Any], uncordoned: list[str], gone: list[str]
    ) -> dict[str, Any]:
        """Prepare's answer for a group carried from an earlier read (``carried``: its region's Auto
        Scaling read failed, :mod:`spillway.planner.unread`), once its nodes are uncordoned: nothing to
        raise, and nothing asked of Auto Scaling. Its region's read fails: asked, it spent the step's
        retries, and a refusal (``AwsError``) was taken for a raise refused for good and backed the
        group off (:meth:`_back_off_errors`), a back-off the plans honour after the region reads
        again. Verify asks nothing of it either (:meth:`verify`)."""
        now = self.clock()
        poll = event.get("poll_seconds")
        return {
            "set": False,
            "count": 0,
            "owner": _owner_id(event, str(group["region"]), str(group["group"])),
            "target": int(group["to"]),
            "carried": True,
            "before": [],
            "since": iso(now - timedelta(seconds=5)),
            "deadline": iso(now),
            "poll_seconds": max(1, round(self.settings.poll_seconds)) if poll is None else int(poll),
            "uncordoned": uncordoned,
            "gone": gone,
        }

    def _launch_window(self, event: Mapping[str, Any], asg: AutoScalingGroup) -> tuple[float, int]:
        """How long the group's launch may take (seconds), and the whole seconds between its checks.
        The group's own node provision time when it has one (its ``maxnodeprovisiontime`` tag,
        :mod:`spillway.model.options`, which the plans also give its instances before they are
        unregistered: :mod:`spillway.planner.joins`), shorter or longer than the launch timeout, at most
        a day; else the launch timeout. cluster-autoscaler likewise takes a scale-up as failed after the
        node group's own max node provision time, the option overriding its flag either way
        (clusterstate: the scale-up request's ExpectedAddTime; a provider's GetOptions). A longer one is
        checked less often (:func:`~spillway.model.history.stretched_poll`), so the group makes no more
        checks than the launch timeout's, which the configuration was checked to fit an execution's
        history; a shorter one keeps the poll. An execution whose definition does not pass
        ``poll_seconds`` waits at most the launch timeout, polled as before."""
        timeout = float(event.get("launch_timeout_seconds", self.settings.launch_timeout_seconds))
        minutes = dict(parse_options(asg.tag_map())[0]).get("max_node_provision_minutes")
        own = None if minutes is None or isinstance(minutes, bool) else min(minutes * 60, float(MAX_SECONDS))
        poll = event.get("poll_seconds")
        if poll is None:
            return min(timeout, own or timeout), max(1, round(self.settings.poll_seconds))
        if own is None or own <= timeout:
            return own or timeout, int(poll)
        return own, stretched_poll(own, int(poll), timeout)

    def _uncordon_planned(
        self, event: Mapping[str, Any], group: Mapping[str, Any]
    ) -> tuple[list[str], list[str]]:
        """Uncordon the nodes the plan reuses or restores (Spillway's cordon and draining taint, one
        patch), each only while it carries the cordon the plan saw (``cordons``, compare-and-set): one
        that took the node over since, a Spot warning's or a person's drain, stays, and so does a node
        somebody uncordoned meanwhile; the pods the plan gave it wait for the next plan. The nodes
        uncordoned, and those gone."""
        uncordoned, gone = [], []
        plan_id = event.get("plan_id", "?")
        cordons = group.get("cordons", {})
        for node in group.get("uncordon", []):
            try:
                changed = self.kube.uncordon(node, if_digest=cordons.get(node))
            except NodeNotFound:
                gone.append(node)
                continue
            if not changed:
                log.info(
                    "scale-up %s: %s left as it is: Spillway's cordon on it is not the one the plan saw",
                    plan_id,
                    node,
                )
                continue
            uncordoned.append(node)
            # the Node's uid, which kubectl describe node looks Events up by (none: never shown); read
            # for the Event alone, so a failed read leaves it out rather than failing the step
            try:
                uid: str | None = self.kube.get_node(node).metadata.uid or None
            except KubeError:
                uid = None
            self.kube.record_event(
                "Node", node, None, "SpillwayUncordoned",
                f"uncordoned by Spillway plan {plan_id}: {_uncordon_reason(group, node)}", uid=uid,
            )  # fmt: skip
        if uncordoned:
            self.metric("Uncordoned", len(uncordoned))
        return uncordoned, gone

    # --- set_desired (groups outside the state machine's region) ---------------------------------

    def set_desired(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """Raise the group by this plan's own count relative to its live desired capacity, once
        (:func:`spillway.act.claims.raise_once`: a retried step finds its marker and raises nothing)."""
        group, prep = _field(event, "group"), _field(event, "prep")
        name, region = str(group["group"]), str(group["region"])
        raised = raise_once(self.aws, self._owner(event, prep), int(prep.get("count", 0)), self.clock(),
                            existing=[str(i) for i in prep.get("before", [])], deadline=self.deadline)  # fmt: skip
        return {"group": name, "region": region, "desired": raised["after"], "previous": raised["before"],
                "raised": raised["count"], "again": raised["again"]}  # fmt: skip

    def _owner(self, event: Mapping[str, Any], prep: Mapping[str, Any]) -> Owner:
        group = _field(event, "group")
        name, region = str(group["group"]), str(group["region"])
        owner = str(prep.get("owner") or f"up-{event.get('plan_id', '?')}-{region}-{name}")
        return Owner(self.ledger, str(event.get("cluster", "")), region, name, owner)

    # --- verify --------------------------------------------------------------------------------

    def verify(self, event: Mapping[str, Any]) -> dict[str, Any]:
        group, prep = _field(event, "group"), _field(event, "prep")
        name, region = str(group["group"]), str(group["region"])
        if group.get("carried"):  # its region's read failed: nothing raised, nothing asked (_carried_prep)
            return {"status": "ready", "ready": 0, "wanted": 0,
                    "reason": f"{region}/{name}: carried from an earlier read: its nodes uncordoned, nothing "
                    "asked of Auto Scaling"}  # fmt: skip
        now = self.clock()
        since = _parse(prep["since"])
        activities = self.aws.describe_activities(region, name, now)
        message = launch_failure_since(activities, since)
        failed = {"status": "failed", "reason": launch_failed(f"{region}/{name}", message)[:1000],
                  "failure": message[:1000]}  # fmt: skip
        wanted = int(prep.get("count", 0))
        if wanted <= 0:
            nothing = {"status": "ready", "reason": "nothing to launch", "ready": 0, "wanted": 0}
            return failed if message else nothing
        asg = self.aws.describe_group(region, name)
        replacements = replacement_launches(activities)
        mine = set(self._own(event, prep, asg, wanted, replacements, replacing=True))
        # one activity per instance launch: a Failed one is the raise failing only while the raise is
        # short of instances and no launch of it is under way any more (or its deadline passed)
        if message and len(mine) < wanted:
            under_way = launch_under_way(activities, since, replacements)
            if not under_way or now >= _parse(prep["deadline"]):
                return failed
        new = sorted(
            i.InstanceId for i in asg.Instances if i.InstanceId in mine and i.LifecycleState == "InService"
        )
        ready = ready_nodes(self.kube, self.aws, region, new)
        if len(ready) >= wanted:
            self._back_off_short_pool(event, asg, activities, since, mine)
            return {"status": "ready", "reason": f"{len(ready)} new node(s) Ready", "ready": len(ready),
                    "wanted": wanted, "nodes": sorted(ready.values())}  # fmt: skip
        cut = _cut_since(activities, since, int(prep.get("target", 0)))
        if cut is not None:
            return {"status": "resized", "ready": len(ready), "wanted": wanted,
                    "reason": f"{region}/{name}: {len(ready)} of {wanted} new node(s) Ready, and a scheduled "
                    f"action set the desired capacity to {cut[1]} at {format_time(cut[0])}, after the raise: Auto "
                    "Scaling took back capacity the raise asked for; not a launch failure, the group is not "
                    "backed off, and the next plan sees the pods still pending"}  # fmt: skip
        if now >= _parse(prep["deadline"]):
            # a timeout names no pool: the one a launch of it found short is backed off here, as when Ready
            self._back_off_short_pool(event, asg, activities, since, mine)
            short = f"{region}/{name}: {len(ready)} of {wanted} new node(s) Ready by the launch deadline"
            if self._owner(event, prep).unsettled():
                return {"status": "unsettled", "ready": len(ready), "wanted": wanted,
                        "reason": f"{short}; its raise's answer was lost and it may never have applied: not "
                        "a launch failure, the group is not backed off"}  # fmt: skip
            return {
                "status": "timeout",
                "reason": f"{short} ({len(new)} instance(s) InService)",
                "ready": len(ready),
                "wanted": wanted,
            }
        return {"status": "launching", "ready": len(ready), "wanted": wanted, "in_service": len(new)}

    def _back_off_short_pool(
        self,
        event: Mapping[str, Any],
        asg: AutoScalingGroup,
        activities: Sequence[ScalingActivity],
        since: datetime,
        mine: Collection[str],
    ) -> None:
        """A raise that delivered every node though one of its launches Failed (Auto Scaling launched in
        another zone or as another type) is no failure, and its group is not backed off; but the pool
        EC2 named short of capacity (:func:`~spillway.act.backoff.failed_pool`) is, as a failed raise's
        would be, for ``launch_failure_backoff_minutes`` from the failure: other groups that launch
        only from it skip it, and a gang's fleet asks elsewhere. So is it when the raise's instances
        launched but did not come up by the deadline (``timeout``, ``unsettled``: the back-off names
        no pool then). Not when an instance of the raise runs in that zone as that type, of the pool's
        capacity type: capacity came back there. Its capacity type is known only where the group
        launches one (:func:`~spillway.model.nodegroup.one_capacity_type`): Spot and on-demand of a
        type in a zone are two pools, and a mixed group's on-demand instance says nothing of Spot. Every
        pool a launch of the raise found short is backed off, each from its own failure (one activity
        per instance launch: a raise may fail in two zones, or as two types, before it is made good).
        Each write is started only when it ends within the step's deadline (:meth:`Deadline.require`):
        one not started is ``AwsUnavailable``, which Verify retries (Lambda's Timeout cut it mid-call,
        ``Sandbox.Timedout``, which Verify does not retry)."""
        window = timedelta(minutes=self.settings.planner.launch_failure_backoff_minutes)
        where = f"{asg.region}/{asg.AutoScalingGroupName}"
        for failure in failed_launches_since(activities, since):
            message = failure.StatusMessage or failure.Description
            pool = failed_pool(message, asg)
            if pool is None or _made_good_in(pool, asg, mine):
                continue
            at = failure.EndTime or failure.StartTime
            until = aware(at) + window
            if until <= self.clock():
                continue
            reason = f"{launch_failed(where, message)}; Auto Scaling launched the raise elsewhere"
            self.deadline.require(1, f"the back-off of pool {'/'.join(pool)} ({where})")  # each in time
            back_off(self.ledger, str(event.get("cluster", "")), None, until, reason[:1000], region=asg.region,
                     pools=[pool])  # fmt: skip

    def _own(
        self,
        event: Mapping[str, Any],
        prep: Mapping[str, Any],
        asg: Any,
        limit: int,
        replacements: frozenset[str],
        replacing: bool = False,
    ) -> list[str]:
        """This plan's instances of the group: new since ``prepare`` and claimed by it, up to ``limit``
        (a concurrent gang or scale-up claims its own). The group's replacements of instances it took
        out of service (``replacements``) add nothing for the pods: none is claimed as the raise's
        launch, but for as many of its own as it lost while checking (``replacing``):
        :func:`~spillway.act.claims.own_instances`."""
        before = set(prep.get("before", []))
        new = [i.InstanceId for i in asg.Instances if i.InstanceId not in before
               and i.LifecycleState in LIVE_STATES]  # fmt: skip
        return own_instances(self._owner(event, prep), new, limit, self.clock(), replacements, replacing,
                             refill=replacing)  # fmt: skip

    # --- backoff -------------------------------------------------------------------------------

    def backoff(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """Back the group off, and give back what this launch did not deliver, and only that: each of
        this plan's own instances (:meth:`_own`) that runs no Ready Node is terminated (decrementing
        the desired capacity: precisely those, never a working node; where the MinSize refuses the
        decrement, without it, the others first; none that is InService while the group's Terminate
        process is suspended, ``held`` and named in the reason: :func:`~spillway.act.instances.give_back_in_group`;
        none whose Node runs work, or could not be cordoned or read, named in the reason: each Node is
        cordoned before its pods are read, and its cordon taken off again unless its instance was
        terminated: :func:`~spillway.act.instances.judged_for_give_back`), and the capacity it raised that
        never launched (raised - its instances) is taken off the live desired capacity
        (:func:`~spillway.act.claims.give_back_undelivered`), unless its raise is unsettled (it may
        never have added any: what it would take off could be another's). A concurrent gang's or
        scale-up's instances and capacity are left alone. Where a launch activity of the raise failed
        (for capacity or any other reason), this plan's instances that run no Ready Node are kept
        instead, booting (``kept``: :func:`_keeps_launched`); only the capacity never launched goes back."""
        cluster = str(_field(event, "cluster"))
        group = _field(event, "group")
        prep = event.get("prep") or {}
        name, region = str(group["group"]), str(group["region"])
        launch = event.get("launch") or {}
        reason = str(launch.get("reason") or f"{region}/{name}: launch did not complete")
        now = self.clock()
        until = now + timedelta(minutes=self.settings.planner.launch_failure_backoff_minutes)
        self.deadline.require(1, f"the back-off of {region}/{name}")  # each write of this step in time
        back_off(self.ledger, cluster, name, until, reason, region=region)
        owner = self._owner({**event, "cluster": cluster}, prep)
        raised = owner.raised()
        asg = self.aws.describe_group(region, name)
        # other groups of the pool skip it too; the other capacity type is left alone. A failure that
        # names no type is of the type the group's launch template names now, which the plan asked for
        # (observe reads it so), not the type its older instances run
        failed = launch.get("status") == "failed"
        launching = self.aws.describe_group_launching(region, name) if failed else asg
        activities = self.aws.describe_activities(region, name, now) if failed or raised else []
        pools = _failed_pools(launch, launching, activities, prep.get("since"))
        self.deadline.require(1, f"the pools' back-off of {region}/{name}")
        back_off(self.ledger, cluster, None, until, reason, region=region, pools=pools)
        replacements = replacement_launches(activities) if raised else frozenset()
        # no replacement is claimed here: an instance of its own that it terminated (a first try of this
        # step) is no loss that a replacement of somebody else's would make good
        new = self._own({**event, "cluster": cluster}, prep, asg, raised, replacements) if raised else []
        ready = ready_nodes(self.kube, self.aws, region, new)
        # best-effort, a MinSize refusal terminated without the decrement; errors once all were tried
        unready = [iid for iid in new if iid not in ready]
        # a launch that failed: what the raise did start is kept, booting, for the pods
        kept, unready = (unready, []) if _keeps_launched(launch) else ([], unready)
        # one whose Node ran pods while Ready, NotReady for a moment now, keeps them: never a running pod;
        # each Node is cordoned before its pods are read, and keeps the cordon only if it is terminated
        # the cordon names this execution's owner: a retry of this step finds its own, no other's
        why = f"{BACKOFF_GIVE_BACK} {name[:60]} ({owner.owner})"
        with judged_for_give_back(self.kube, self.aws, region, unready, now, why) as judged:
            gone = give_back_in_group(self.aws, asg, judged.idle(unready), deadline=self.deadline)
            judged.terminated(gone.terminated)
            gone.raise_first()
        terminated = gone.terminated
        # delivered: every instance it ever claimed, also those a first try of this step terminated
        # (decrementing the desired capacity already); unsettled: it may have added none
        undelivered = 0 if owner.unsettled() else raised - max(len(new), owner.held())
        lowered = give_back_undelivered(self.aws, owner, undelivered, now, self.deadline)
        after = self.aws.describe_group(region, name)
        desired = lowered if lowered is not None else after.DesiredCapacity
        self.metric("GroupsBackedOff", 1)
        if _misconfigured(launch):
            self.metric("LaunchesMisconfigured", 1)  # it fails again until somebody fixes what EC2 named
        return {
            "group": name,
            "region": region,
            "outcome": "backed_off",
            "reason": (reason + _kept_said(kept) + gone.kept(after.MinSize, desired) + judged.said())[:1000],
            "backoff_until": iso(until),
            "desired": desired,
            "terminated": terminated,
            "held": gone.held,
            "kept": kept,
        }

    # --- next_round ----------------------------------------------------------------------------

    def next_round(self, event: Mapping[str, Any]) -> dict[str, Any]:
        cluster = str(_field(event, "cluster"))
        round_ = int(event.get("round", 1))
        max_rounds = int(event.get("max_rounds", self.settings.max_rounds))
        results = [dict(r) for r in event.get("results") or []]
        carried = {k: event[k] for k in _CARRIED if k in event}
        rounds = [*event.get("rounds", []), {"round": round_, "groups": [_compact(r) for r in results]}]
        base = {**carried, "max_rounds": max_rounds, "round": round_, "rounds": rounds, "groups": []}
        if not any(r.get("outcome") in RETRY_OUTCOMES for r in results):
            return {**base, "done": True, "result": "launched"}
        now = self.clock()
        self._settle_errored_raises(cluster, event, round_, results, now)
        unraised = self._never_raised(cluster, event, round_, results)
        self._back_off_errors(cluster, unraised, now)
        if round_ >= max_rounds:
            self._forget_unraised(cluster, unraised, now, lambda: self.snapshots.latest(cluster))
            return {**base, "done": True, "result": f"gave up after {round_} round(s)"}
        landed = self._landed_replan(event, cluster, round_)
        if landed is not None:  # a retry of this step whose first try committed: its round, not another
            return {**base, **landed}
        snapshot = self.snapshots.latest(cluster)
        unplannable = self._unplannable(snapshot, now)
        if snapshot is None or unplannable:  # it ends here, as at the last round
            self._forget_unraised(cluster, unraised, now, lambda: snapshot)
            return {**base, "done": True, "result": unplannable}
        planner = self.settings.planner
        # read before the groups, so that after them only the commit is left (its version is the check);
        # each of its queries (three at least, one per page) only with time for it and the commit
        stored = self.ledger.load(cluster, now, before_call=self.deadline.before(2))
        # a region whose read fails, or does not end while the plan and its commit still fit, is unread,
        # its groups carried from the snapshot, as observe has it
        live, unread = groups_read(self.aws, planner.node_reserve.reserve(), now, snapshot,
                                   planner.max_node_provision_minutes, cluster,
                                   self.deadline.reading(1, REPLAN_ROOM_SECONDS))  # fmt: skip
        # the zone ids observe read from EC2 (an account's never change), which a live read does not give
        live = with_zone_ids(live, zone_ids_of(snapshot.groups))
        # entries a build that keyed groups by name stored, under their groups' keys as the plan reads them
        state = keyed_by_region(stored.state, first_regions(self.settings.planner, live))
        stored = dataclasses.replace(stored, state=without_unraised(state, unraised, live))
        forgot = stored.state.raises != state.raises
        seen = dataclasses.replace(snapshot.cluster, regions_unread=unread)  # the regions read now
        result = run_planner(seen, live, planner, stored.state, now)
        groups, left = _round_groups(scale_up_groups(result, live))
        summary = summarize(result, self.settings.primary_region)
        record = _replan_record(event, cluster, snapshot, result, summary, now, round_, groups)
        raises = _without(execution_raises(result, live, stored.state.raises), left, stored.state.raises)
        raises = _ended_on_snapshots(stored.state.raises, raises)
        raises = owned_raises(raises, groups, str(event.get("plan_id", "?")), round_ + 1, now, _part(event))
        self._record_replan(stored, record, raises, groups, forgot)
        self._emit_plan_metrics(summary)
        if not groups:
            return {**base, "done": True, "result": "re-plan found nothing more to launch",
                    "unplaceable": summary.unplaceable}  # fmt: skip
        return {**base, "round": round_ + 1, "groups": groups, "done": False}

    def _unplannable(self, snapshot: Snapshot | None, now: datetime) -> str:
        """Why the re-plan cannot run on ``snapshot`` (none, or older than ``max_snapshot_age_seconds``),
        or "" when it can."""
        if snapshot is None:
            return "no snapshot to re-plan on"
        if snapshot_age(snapshot, now).total_seconds() > self.settings.max_snapshot_age_seconds:
            return f"latest snapshot {iso(snapshot.taken_at)} is stale"
        return ""

    def _never_raised(
        self, cluster: str, event: Mapping[str, Any], round_: int, results: Sequence[Mapping[str, Any]]
    ) -> list[Mapping[str, Any]]:
        """The results of this round whose raise Auto Scaling never took: ``refused`` (prepare or the raise
        refused it, nothing set), and ``error`` whose owner holds no raise marker (its prepare failed
        before the raise, or the raise was refused, throttled past its retries or certainly not applied:
        :func:`~spillway.act.claims.raise_once` gives the marker back then, and keeps it when the raise
        landed or may have). An error after a raise (verify, backoff) keeps the marker: its nodes are
        launching and are never raised twice."""
        out: list[Mapping[str, Any]] = []
        for result in results:
            outcome, region, name = result.get("outcome"), str(result.get("region")), str(result.get("group"))
            if outcome == "error":
                owner = _owner_id({**event, "round": round_}, region, name)
                if Owner(self.ledger, cluster, region, name, owner).raised():
                    continue
            elif outcome != "refused":
                continue
            out.append(result)
        return out

    def _settle_errored_raises(
        self,
        cluster: str,
        event: Mapping[str, Any],
        round_: int,
        results: Sequence[Mapping[str, Any]],
        now: datetime,
    ) -> None:
        """Settle the raise marker of each group of this round whose iteration ended in ``error`` with its
        marker left for a retry that never came: a lost raise whose every ask again was refused for now
        (a throttle, ResourceContention, ScalingActivityInProgress) or never sent (no time left), through
        SetDesired's last retry (:func:`spillway.act.claims.settle_unanswered`, as a gang's GiveBack
        does). Bare, the marker read to every other owner of its window as a settled raise still
        waiting for its instances for 15 minutes (:func:`spillway.act.claims.own_instances`), though
        nothing may ever launch for it. Read at the raise's value now, it landed and is recorded as
        asked (its nodes are coming: the marker keeps it off :meth:`_never_raised`, so its pods are not
        raised for again); else it is kept unsettled, never raised, and no longer awaited. An
        iteration whose raise was answered or settled is left as it is."""
        for result in results:
            if result.get("outcome") != "error":
                continue
            region, name = str(result.get("region")), str(result.get("group"))
            owner = Owner(
                self.ledger, cluster, region, name, _owner_id({**event, "round": round_}, region, name)
            )
            settle_unanswered(self.aws, owner, now, self.deadline)

    def _forget_unraised(
        self,
        cluster: str,
        unraised: Sequence[Mapping[str, Any]],
        now: datetime,
        latest: Callable[[], Snapshot | None],
    ) -> None:
        """When the execution gives up (its last round, or no snapshot fresh enough to re-plan on), take
        off the state the raises of its last round that Auto Scaling
        never took (:meth:`_never_raised`), as a re-plan would (:func:`without_unraised`): left there,
        the plans after it counted their nodes as launching for ``scale_up_claim_minutes`` and launched
        nothing for their pods. Only an entry that is wholly that raise goes (its ``to`` less the nodes
        it was to add is no more than the group's desired capacity: :meth:`_desired_for_forget`), so a
        retry of this step, or a later plan's raise built on it, takes off nothing more. Best effort: the
        execution's end does not hang on it (a plan committed meanwhile, the state unreadable, no time
        left in the invocation for a read and the commit after it: none is started then, where Lambda's
        Timeout cut the commit and ended the execution ``Sandbox.Timedout``), logged."""
        if not unraised:
            return
        try:  # each call only in time for it and the commit (Deadline.require): else skipped, logged
            stored = self.ledger.load(cluster, now, before_call=self.deadline.before(2))
            raises = dict(stored.state.raises)
            for result in unraised:
                region, name = str(result.get("region")), str(result.get("group"))
                key, count = GroupKey(region, name).stored, int(result.get("new_nodes") or 0)
                entry = raises.get(key)
                if entry is None or count <= 0:
                    continue
                self.deadline.require(2, f"the group read of {key}, before the state's commit")
                desired = self._desired_for_forget(GroupKey(region, name), latest)
                if desired is not None and entry.to - count <= desired:
                    del raises[key]
            if raises == stored.state.raises:
                return
            self.deadline.require(1, f"the state's commit of {cluster}")
            self.ledger.commit(
                cluster,
                stored.state.model_copy(update={"raises": raises}),
                expected_version=stored.version,
                snapshot_key=stored.snapshot_key or "",
                plan_id=stored.plan_id or "",
                executions=stored.executions,
                now=now,
            )
        except SpillwayError as exc:
            log.warning(
                "scale-up gave up; its raises Auto Scaling never took were left in the state: %s", exc
            )

    def _desired_for_forget(self, key: GroupKey, latest: Callable[[], Snapshot | None]) -> int | None:
        """The group's desired capacity, to judge a raise entry by (:meth:`_forget_unraised`): as Auto
        Scaling has it now, else, when the group cannot be read (its region's read failing, as when
        its prepare failed), as the latest snapshot has it (``latest``): the value the plans count the
        entry against, and while the region stays unread the one observe carries on
        (:func:`spillway.observe.carried_groups`). None when neither tells (no snapshot, the group not
        in it): the entry stays."""
        try:
            return self.aws.describe_group(key.region, key.name).DesiredCapacity
        except AwsError as exc:
            log.info("the raise entry of %s judged on the latest snapshot: %s", key.stored, exc)
        try:
            snapshot = latest()
        except SpillwayError:
            return None
        found = [g.desired for g in snapshot.groups if g.key == key] if snapshot is not None else []
        return found[0] if found else None

    def _landed_replan(self, event: Mapping[str, Any], cluster: str, round_: int) -> dict[str, Any] | None:
        """What this round's re-plan answered, when a try of this step before wrote its record (the
        record's key, the plan's snapshot, the next round and the execution's part, with the plan's id
        in it, is the transaction's token: it goes in one transaction with the state,
        :meth:`_record_replan`, so it is there exactly when that commit landed; another part's re-plan
        of the round is another record: :func:`~spillway.model.act.replan_key`), else None. A commit
        that landed but whose answer was lost past the SDK's retries (a read timeout: ``AwsUnavailable``, retried by NextRound) would otherwise
        be followed by a re-plan on the state it wrote: its own raises read as capacity launching, it
        found nothing to launch, and the pods waited for the raises to age out (``scale_up_claim_minutes``)
        though nobody raised the groups. None for a record without ``groups`` (a build before them
        wrote it): re-planned as before."""
        origin, plan_id = str(event.get("snapshot_key") or ""), str(event.get("plan_id") or "")
        if not origin or not plan_id:
            return None
        record = self.ledger.load_plan(cluster, replan_key(origin, round_ + 1, _part(event)))
        if record is None or record.groups is None or record.plan_id != plan_id:
            return None
        counts = {f.name: int(record.summary.get(f.name, 0)) for f in dataclasses.fields(PlanSummary)}
        summary = PlanSummary(**counts)
        self._emit_plan_metrics(summary)
        groups = [dict(g) for g in record.groups]
        if not groups:
            return {
                "done": True,
                "result": "re-plan found nothing more to launch",
                "unplaceable": summary.unplaceable,
            }
        log.info(
            "re-plan of %s round %d committed before (its answer lost): its groups again", plan_id, round_
        )
        return {"round": round_ + 1, "groups": groups, "done": False}

    def _back_off_errors(self, cluster: str, unraised: Sequence[Mapping[str, Any]], now: datetime) -> None:
        """A group whose raise AWS refused for good (``AwsError``: AccessDenied, a validation error, at
        prepare or at the raise: among ``unraised``, :meth:`_never_raised`) is backed off as a failed
        launch is, so the re-plan and the plans after it send its pods elsewhere (another group, the
        overflow region) while the error lasts; without it the plan's raise still counted as launching
        there, and nothing overflowed. Other errors say nothing about the group (the Kubernetes API
        down while verifying, AWS unavailable when the raise may have landed), and neither does an
        ``AwsError`` after the raise landed (its marker kept: verify's or backoff's read refused to a
        role missing a permission): the raise is launching, and a back-off then would launch the same
        pods twice, once in each region. cluster-autoscaler likewise takes a group whose scaling
        activities it cannot read as available (auto_scaling_groups.go, isNodeGroupAvailable)."""
        until = now + timedelta(minutes=self.settings.planner.launch_failure_backoff_minutes)
        for result in unraised:
            if result.get("outcome") != "error" or result.get("error") != "AwsError":
                continue
            name, region, cause = (
                str(result.get("group")),
                str(result.get("region")),
                str(result.get("cause")),
            )
            self.deadline.require(1, f"the back-off of {region}/{name}")
            back_off(
                self.ledger, cluster, name, until, f"{region}/{name}: AwsError: {cause[:300]}", region=region
            )
            self.metric("GroupsBackedOff", 1)

    def _record_replan(
        self,
        stored: StoredState,
        record: PlanRecord,
        raises: Mapping[str, RaiseState],
        groups: Sequence[Mapping[str, Any]],
        forgot: bool = False,
    ) -> None:
        """Record the re-plan beside the plan it continues; when it raises groups, its raises go into the
        state (``State.raises``) as a plan's do: committed with the record in one transaction, on the
        condition that the state's version is still the one loaded (:class:`StateConflict`, retried,
        when a plan committed meanwhile). Without them the plans until the raise shows in a snapshot
        saw the re-plan's pods with nothing launching for them and launched them again. So are they
        when the re-plan took off the state a raise Auto Scaling never took (``forgot``:
        :func:`without_unraised`) though it raises nothing: else the entry stayed for the plans, which
        counted its nodes as launching (for as long as the group is carried, in a region whose read
        fails: its pods go nowhere else meanwhile). The state's
        snapshot, plan id and executions stay the last plan's, so that plan still resumes. It is the
        re-plan's last step that can fail: a retry of the step re-plans only when nothing was written.
        A commit that landed but whose answer was lost after the SDK's own retries left the record
        with the round's ``groups``: the retry finds it and maps over them (:meth:`_landed_replan`)."""
        self.deadline.require(1, f"the re-plan's record of {record.cluster}")  # never cut by Lambda's Timeout
        if not forgot and not any(g.get("grow") for g in groups):
            self.ledger.save_plan(record)  # nothing raised nor forgotten: the state is left to the plans
            return
        state = stored.state.model_copy(update={"raises": dict(raises)})
        self.ledger.commit(
            record.cluster,
            state,
            expected_version=stored.version,
            snapshot_key=stored.snapshot_key or "",
            plan_id=stored.plan_id or "",
            executions=stored.executions,
            now=record.created_at,
            plan=dataclasses.replace(record, state_version=stored.version + 1),
        )

    def _emit_plan_metrics(self, summary: PlanSummary) -> None:
        if summary.scale_up_nodes:
            self.metric("ScaleUpNodes", summary.scale_up_nodes)
        if summary.overflow_nodes:
            self.metric("Overflow", summary.overflow_nodes)
        add_unplaced_counts(self.metric, summary.to_dict())

    # --- dispatch ------------------------------------------------------------------------------

    def run(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """The step ``event["action"]`` names, on an event :func:`parse_step` accepts (else
        :class:`InputError` naming the field, before anything is read or written)."""
        parse_step(event)
        step = {
            "prepare": self.prepare,
            "set_desired": self.set_desired,
            "verify": self.verify,
            "backoff": self.backoff,
            "next_round": self.next_round,
        }[event["action"]]
        return step(event)


def parse_step(event: Any) -> BaseModel:
    """The step's input as the state machine sends it (:mod:`spillway.model.scale`), or
    :class:`InputError` naming the first bad field ("group.to", "prep.before.0", ...)."""
    return step_input(event, STEP_INPUTS, "scale")


def _replan_record(
    event: Mapping[str, Any],
    cluster: str,
    snapshot: Snapshot,
    result: ScalingPlan,
    summary: PlanSummary,
    now: datetime,
    round_: int,
    groups: Sequence[Mapping[str, Any]],
) -> PlanRecord:
    """The re-plan's record, beside the plan it continues (sort key: the origin snapshot, round and part),
    with the ``groups`` its round maps over (:meth:`ScaleSteps._landed_replan` reads them back)."""
    origin = str(event.get("snapshot_key") or "")
    snapshot_key = format_key(snapshot.taken_at)
    return PlanRecord(
        cluster=cluster,
        plan_id=str(event.get("plan_id") or plan_id_for(cluster, snapshot_key)),
        snapshot_key=snapshot_key,
        fingerprint=snapshot.fingerprint,
        created_at=now,
        plan={
            "scale_up": [s.to_dict() for s in result.scale_up],
            "uncordon": [u.to_dict() for u in result.uncordon],
            "pending": [p.to_dict() for p in result.pending],
        },
        kind="replan",
        sort_key=replan_key(origin or snapshot_key, round_ + 1, _part(event)),
        summary=summary.to_dict(),
        groups=tuple(dict(g) for g in groups),
    )


def _round_groups(groups: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], set[str]]:
    """The groups a round maps over (at most :data:`~spillway.model.history.MAX_SCALE_UP_GROUPS`: their
    checks share the execution's history) and the keys (:attr:`GroupKey.stored`) of those left to the
    next plan."""
    left = groups[MAX_SCALE_UP_GROUPS:]
    return groups[:MAX_SCALE_UP_GROUPS], {GroupKey(str(g["region"]), str(g["group"])).stored for g in left}


def without_unraised(state: State, results: Sequence[Mapping[str, Any]], live: Sequence[NodeGroup]) -> State:
    """The state less the raises Auto Scaling never took this round (``results``,
    :meth:`ScaleSteps._never_raised`: refused for MaxSize or the group gone, or failed before or at the
    raise; nothing was set): each group's raise entry (``State.raises``) is lowered by the nodes its
    raise was to add (``new_nodes``), and dropped once no higher than the group's live desired capacity.
    Left as it was, the re-plan (and the plans after it, for ``scale_up_claim_minutes``) took those
    nodes for capacity launching and placed pods on them. A later plan's raise built on the entry keeps
    its own nodes."""
    desired = {g.key.stored: g.desired for g in live}
    raises = dict(state.raises)
    for result in results:
        key = GroupKey(str(result.get("region")), str(result.get("group"))).stored
        count = int(result.get("new_nodes") or 0)
        entry = raises.get(key)
        if count <= 0 or entry is None:
            continue
        if entry.to - count <= desired.get(key, 0):
            del raises[key]
        else:
            raises[key] = entry.model_copy(update={"to": entry.to - count})
    return state if raises == state.raises else state.model_copy(update={"raises": raises})


def _without(
    raises: Mapping[str, RaiseState], left: set[str], before: Mapping[str, RaiseState]
) -> dict[str, RaiseState]:
    """The raises to record when the groups ``left`` are not raised: each keeps the raise it had."""
    out = {name: r for name, r in raises.items() if name not in left}
    out.update({name: before[name] for name in left if name in before})
    return dict(sorted(out.items()))


def _ended_on_snapshots(
    before: Mapping[str, RaiseState], raises: Mapping[str, RaiseState]
) -> dict[str, RaiseState]:
    """The re-plan's raises to commit: its own, and every entry of the state it planned on that it did not
    replace. The re-plan plans on live group reads, newer than any snapshot, and ends an entry whose
    live desired capacity shows the raise (:func:`spillway.planner.raises.pending_raises`); written so,
    a plan of a snapshot taken before the raise landed saw the group below it with nothing launching
    and raised it again for the same pods. The plans end each entry on their own snapshot."""
    return dict(sorted({**before, **raises}.items()))


def _made_good_in(pool: Pool, asg: AutoScalingGroup, mine: Collection[str]) -> bool:
    """Whether an instance of the raise (``mine``) runs in the pool's zone as its type, where that proves
    the pool had capacity: the group launches one capacity type (:func:`one_capacity_type`)."""
    _, zone, instance_type = pool
    return one_capacity_type(asg) and any(
        i.InstanceId in mine and i.AvailabilityZone == zone and i.InstanceType == instance_type
        for i in asg.Instances
    )


def _failed_pools(
    launch: Mapping[str, Any], asg: AutoScalingGroup, activities: Sequence[ScalingActivity], since: Any
) -> list[Pool]:
    """The pools a failed launch found without capacity, where its failures name them
    (:func:`~spillway.act.backoff.failed_pool`): the one verify answered with, and every other launch
    activity of the raise that Failed since ``since`` (prepare's time; one activity per instance
    launch, so a raise of several may have found two zones or two types short); none for a timeout."""
    if launch.get("status") != "failed":
        return []
    messages = [str(launch.get("failure") or "")]
    if since:
        messages += [
            a.StatusMessage or a.Description for a in failed_launches_since(activities, _parse(since))
        ]
    pools: list[Pool] = []
    for message in messages:
        pool = failed_pool(message, asg)
        if pool is not None and pool not in pools:
            pools.append(pool)
    return pools


def _keeps_launched(launch: Mapping[str, Any]) -> bool:
    """Whether a back-off keeps this plan's instances that run no Ready Node yet: verify found a launch
    activity of the raise Failed (for capacity or any other reason). Auto Scaling writes one activity
    per instance it launches (DescribeScalingActivities), so a Failed one is a launch that started no
    instance (or one Auto Scaling terminates itself, no longer live): the instances the raise did start
    are nodes booting, launched in the zones that had capacity (its default ``balanced-best-effort``
    CapacityDistributionStrategy: "If launches fail in an Availability Zone, Auto Scaling will attempt
    to launch in another healthy Availability Zone instead", AWS::AutoScaling::AutoScalingGroup
    AvailabilityZoneDistribution), as another of the group's types (EC2 Auto Scaling user guide,
    "Allocation strategies for multiple instance types"), or before the one zone and type ran short.
    cluster-autoscaler keeps them whatever the failure: its AWS provider marks only the placeholders for
    the desired instances never started unfulfillable (auto_scaling_groups.go,
    createPlaceholdersForDesiredNonStartedInstances, isNodeGroupAvailable), and its upcoming nodes still
    count them (clusterstate GetUpcomingNodes), as the plans do (:func:`spillway.planner.groups.launched_only`),
    until they join or stay unregistered for ``max_node_provision_minutes`` (:mod:`spillway.planner.joins`).
    A timeout is a launch that did not come up in time: its instances are given back."""
    return launch.get("status") == "failed"


def _kept_said(kept: Sequence[str]) -> str:
    """What a back-off's reason adds for this plan's instances it kept (:func:`_keeps_launched`)."""
    if not kept:
        return ""
    return (
        f"; kept {len(kept)} instance(s) Auto Scaling did launch for this raise, still booting: capacity "
        f"coming for the pods ({', '.join(kept[:5])})"
    )


def _misconfigured(launch: Mapping[str, Any]) -> bool:
    """Whether verify found the launch failed, and EC2 said plainly it was for the group's settings
    (:func:`~spillway.model.launcherror.names_settings`)."""
    return launch.get("status") == "failed" and names_settings(str(launch.get("failure") or ""))


def _uncordon_reason(group: Mapping[str, Any], node: str) -> str:
    """The plan's reason for uncordoning ``node`` (an execution started before plans carried reasons
    uncordoned only to reuse nodes for pending pods)."""
    reasons = group.get("reasons")
    reason = reasons.get(node) if isinstance(reasons, Mapping) else None
    return str(reason)[:900] if reason else "pending pods fit on it"


def _compact(result: Mapping[str, Any]) -> dict[str, Any]:
    keep = (
        "group",
        "region",
        "outcome",
        "reason",
        "error",
        "cause",
        "desired",
        "backoff_until",
        "terminated",
        "kept",
    )
    return {k: result[k] for k in keep if k in result}
