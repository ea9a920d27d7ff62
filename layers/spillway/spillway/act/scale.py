"""The scale-up execution's Lambda steps (``statemachines/scale_up.asl.json``).

The state machine maps over the plan's groups; for each group it calls, in order:

``prepare``      uncordon the planned nodes (and lift Spillway's draining taint; the Event on each says
                 the plan's reason: reused for pending pods, or an orphaned drain restored); read the live group;
                 refuse a ``to`` above MaxSize (:class:`AsgLimitExceeded`); say whether the desired
                 capacity must be set (``set``), which instances existed before (``before``), and the
                 launch deadline.
``set_desired``  for a group outside the state machine's own region only (an ``aws-sdk`` task can call
                 its own region alone): SetDesiredCapacity to the absolute ``to``, HonorCooldown false.
``verify``       ``ready`` when every instance launched for this plan runs a Ready Node; ``failed`` when
                 a scaling activity since ``prepare`` failed for capacity
                 (:func:`~spillway.model.nodegroup.is_capacity_failure`); ``timeout`` past the deadline;
                 else ``launching``.
``backoff``      after ``failed`` or ``timeout``: back the group off in the state table (TTL = the
                 window); terminate the new instances that run no Ready Node (decrementing the
                 desired capacity), and lower a desired capacity still above the live instances.

After all groups, ``next_round``: when a group backed off (or was refused, or failed), re-plan with the
same pure planner on the latest snapshot, the groups as AWS has them now and the state with the new
back-off, which sends the pods left unplaced to the next group or region; the execution then maps over
the new groups. At most ``max_rounds`` rounds.

Every step is idempotent (absolute capacities, conditional back-off writes), so Step Functions may retry
any of them. Errors are our named types, matched by the state machine's ``Retry``/``Catch``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from spillway.act.planning import (
    PlanSettings,
    plan_id_for,
    scale_up_groups,
    snapshot_age,
    summarize,
)
from spillway.errors import (
    AsgLimitExceeded,
    AsgNotFound,
    AwsError,
    AwsThrottled,
    AwsUnavailable,
    EvictionBlocked,
    InputError,
    InstanceNotFound,
    KubeAuthError,
    KubeConflict,
    KubeError,
    KubeUnavailable,
    NodeNotFound,
    PodNotFound,
    SnapshotError,
    SnapshotNotFound,
    SpillwayError,
    StateConflict,
    StateCorrupt,
)
from spillway.model.act import PlanRecord, PlanSummary, format_key, iso, replan_key
from spillway.model.cluster import instance_id_from_provider_id
from spillway.model.nodegroup import LIVE_STATES, is_capacity_failure
from spillway.model.snapshot import Snapshot
from spillway.planner import ScalingPlan
from spillway.planner import plan as run_planner
from spillway.ports import Cloud, Cluster, Ledger, Snapshots

Metric = Callable[[str, float], None]

# What each step may raise, by exact class (a state machine matches names, not subclasses):
# tests/unit/test_error_contract.py checks every one is retried or caught where scale_up.asl.json
# runs that step, and that a step given any port error raises nothing outside its set.
_KUBE = (KubeError, KubeUnavailable, KubeAuthError, KubeConflict, NodeNotFound, PodNotFound, EvictionBlocked)
_AWS = (AwsError, AwsThrottled, AwsUnavailable, AsgNotFound, AsgLimitExceeded, InstanceNotFound)
RAISES: dict[str, frozenset[type[SpillwayError]]] = {
    "prepare": frozenset({InputError, *_KUBE, *_AWS}),
    "set_desired": frozenset({InputError, *_AWS}),
    "verify": frozenset({InputError, *_KUBE, *_AWS}),
    "backoff": frozenset({InputError, *_KUBE, *_AWS, StateConflict, StateCorrupt}),
    "next_round": frozenset(
        {InputError, *_AWS, StateConflict, StateCorrupt, SnapshotError, SnapshotNotFound}
    ),
}
RETRY_OUTCOMES = frozenset({"backed_off", "refused", "error"})
# Event keys every round passes on unchanged.
_CARRIED = ("cluster", "plan_id", "snapshot_key", "poll_seconds", "launch_timeout_seconds")


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

    # --- prepare ---------------------------------------------------------------------------------

    def prepare(self, event: Mapping[str, Any]) -> dict[str, Any]:
        group = _field(event, "group")
        name, region = str(group["group"]), str(group["region"])
        to, grow = int(group["to"]), bool(group.get("grow", True))
        timeout = float(event.get("launch_timeout_seconds", self.settings.launch_timeout_seconds))
        uncordoned, gone = [], []
        for node in group.get("uncordon", []):
            try:
                changed = self.kube.uncordon(node)
                self.kube.remove_draining_taint(node)
            except NodeNotFound:
                gone.append(node)
                continue
            if changed:
                uncordoned.append(node)
                self.kube.record_event(
                    "Node", node, None, "SpillwayUncordoned",
                    f"uncordoned by Spillway plan {event.get('plan_id', '?')}: {_uncordon_reason(group, node)}",
                )  # fmt: skip
        if uncordoned:
            self.metric("Uncordoned", len(uncordoned))
        asg = self.aws.describe_group(region, name)
        if grow and to > asg.MaxSize:
            raise AsgLimitExceeded(
                f"{region}/{name}: desired capacity {to} is above MaxSize {asg.MaxSize}; not set"
            )
        now = self.clock()
        before = sorted(i.InstanceId for i in asg.Instances if i.LifecycleState in LIVE_STATES)
        return {
            "set": grow and to > asg.DesiredCapacity,
            "target": to if grow else asg.DesiredCapacity,
            "live_desired": asg.DesiredCapacity,
            "max_size": asg.MaxSize,
            "before": before,
            "since": iso(now - timedelta(seconds=5)),  # activities may be stamped a little early
            "deadline": iso(now + timedelta(seconds=timeout)),
            "uncordoned": uncordoned,
            "gone": gone,
        }

    # --- set_desired (groups outside the state machine's region) ---------------------------------

    def set_desired(self, event: Mapping[str, Any]) -> dict[str, Any]:
        group = _field(event, "group")
        name, region, to = str(group["group"]), str(group["region"]), int(group["to"])
        previous = self.aws.set_desired_capacity(region, name, to)
        return {"group": name, "region": region, "desired": to, "previous": previous}

    # --- verify --------------------------------------------------------------------------------

    def verify(self, event: Mapping[str, Any]) -> dict[str, Any]:
        group, prep = _field(event, "group"), _field(event, "prep")
        name, region = str(group["group"]), str(group["region"])
        now = self.clock()
        since = _parse(prep["since"])
        for activity in self.aws.describe_activities(region, name, now):
            start = (
                activity.StartTime if activity.StartTime.tzinfo else activity.StartTime.replace(tzinfo=UTC)
            )
            message = activity.StatusMessage or activity.Description
            if (
                start >= since
                and activity.StatusCode == "Failed"
                and activity.is_launch
                and is_capacity_failure(message)
            ):
                return {"status": "failed", "reason": f"{region}/{name}: launch failed: {message}"[:1000]}
        asg = self.aws.describe_group(region, name)
        before = set(prep.get("before", []))
        wanted = int(prep["target"]) - len(before)
        if wanted <= 0:
            return {"status": "ready", "reason": "nothing to launch", "ready": 0, "wanted": 0}
        new = sorted(
            i.InstanceId
            for i in asg.Instances
            if i.InstanceId not in before and i.LifecycleState == "InService"
        )
        ready = self._ready_nodes(region, new)
        if len(ready) >= wanted:
            return {"status": "ready", "reason": f"{len(ready)} new node(s) Ready", "ready": len(ready),
                    "wanted": wanted, "nodes": sorted(ready.values())}  # fmt: skip
        if now >= _parse(prep["deadline"]):
            return {
                "status": "timeout",
                "reason": f"{region}/{name}: {len(ready)} of {wanted} new node(s) Ready by the launch "
                f"deadline ({len(new)} instance(s) InService)",
                "ready": len(ready),
                "wanted": wanted,
            }
        return {"status": "launching", "ready": len(ready), "wanted": wanted, "in_service": len(new)}

    def _ready_nodes(self, region: str, instance_ids: Sequence[str]) -> dict[str, str]:
        """Instance id → name of the Ready Node it runs, for those of ``instance_ids`` that run one
        (EKS names a Node after the instance's private DNS name; its providerID names the instance)."""
        if not instance_ids:
            return {}
        ready: dict[str, str] = {}
        for iid, dns in self.aws.private_dns_names(region, instance_ids).items():
            try:
                node = self.kube.get_node(dns)
            except NodeNotFound:
                continue
            if node.is_ready() and instance_id_from_provider_id(node.spec.provider_id) == iid:
                ready[iid] = dns
        return dict(sorted(ready.items()))

    # --- backoff -------------------------------------------------------------------------------

    def backoff(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """Back the group off, and give back what this launch did not deliver: each new instance that
        runs no Ready Node is terminated (decrementing the desired capacity: precisely those, never a
        working node), then a desired capacity still above the live instances (capacity that never
        launched) is lowered to them."""
        cluster = str(_field(event, "cluster"))
        group = _field(event, "group")
        prep = event.get("prep") or {}
        name, region = str(group["group"]), str(group["region"])
        launch = event.get("launch") or {}
        reason = str(launch.get("reason") or f"{region}/{name}: launch did not complete")
        now = self.clock()
        until = now + timedelta(minutes=self.settings.planner.launch_failure_backoff_minutes)
        self.ledger.put_backoff(cluster, name, until, reason, region=region)
        asg = self.aws.describe_group(region, name)
        before = set(prep.get("before", [instance.InstanceId for instance in asg.Instances]))
        new = [
            i.InstanceId
            for i in asg.Instances
            if i.InstanceId not in before and i.LifecycleState in LIVE_STATES
        ]
        ready = self._ready_nodes(region, new)
        terminated = []
        for iid in new:
            if iid in ready:
                continue
            try:
                self.aws.terminate_instance(region, iid, decrement=True)
            except InstanceNotFound:
                continue  # already gone
            terminated.append(iid)
        if terminated:
            asg = self.aws.describe_group(region, name)
        live = sum(1 for i in asg.Instances if i.LifecycleState in LIVE_STATES)
        desired = max(asg.MinSize, min(asg.DesiredCapacity, live))
        if desired != asg.DesiredCapacity:
            self.aws.set_desired_capacity(region, name, desired)
        self.metric("GroupsBackedOff", 1)
        return {
            "group": name,
            "region": region,
            "outcome": "backed_off",
            "reason": reason,
            "backoff_until": iso(until),
            "desired": desired,
            "terminated": terminated,
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
        if round_ >= max_rounds:
            return {**base, "done": True, "result": f"gave up after {round_} round(s)"}
        snapshot = self.snapshots.latest(cluster)
        now = self.clock()
        if snapshot is None:
            return {**base, "done": True, "result": "no snapshot to re-plan on"}
        if snapshot_age(snapshot, now).total_seconds() > self.settings.max_snapshot_age_seconds:
            return {**base, "done": True, "result": f"latest snapshot {iso(snapshot.taken_at)} is stale"}
        live = self.aws.node_groups(self.settings.planner.node_reserve.as_resources(), now)
        state = self.ledger.load(cluster).state
        result = run_planner(snapshot.cluster, live, self.settings.planner, state, now)
        groups = scale_up_groups(result, live)
        summary = summarize(result, self.settings.primary_region)
        self._save_replan(event, cluster, snapshot, result, summary, now, round_)
        self._emit_plan_metrics(summary)
        if not groups:
            return {**base, "done": True, "result": "re-plan found nothing more to launch",
                    "unplaceable": summary.unplaceable}  # fmt: skip
        return {**base, "round": round_ + 1, "groups": groups, "done": False}

    def _save_replan(
        self,
        event: Mapping[str, Any],
        cluster: str,
        snapshot: Snapshot,
        result: ScalingPlan,
        summary: PlanSummary,
        now: datetime,
        round_: int,
    ) -> None:
        """Record the re-plan beside the plan it continues (sort key: the origin snapshot and round)."""
        origin = str(event.get("snapshot_key") or "")
        snapshot_key = format_key(snapshot.taken_at)
        self.ledger.save_plan(
            PlanRecord(
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
                sort_key=replan_key(origin or snapshot_key, round_ + 1),
                summary=summary.to_dict(),
            )
        )

    def _emit_plan_metrics(self, summary: PlanSummary) -> None:
        if summary.scale_up_nodes:
            self.metric("ScaleUpNodes", summary.scale_up_nodes)
        if summary.overflow_nodes:
            self.metric("Overflow", summary.overflow_nodes)
        self.metric("UnplaceablePods", summary.unplaceable)

    # --- dispatch ------------------------------------------------------------------------------

    def run(self, event: Mapping[str, Any]) -> dict[str, Any]:
        action = event.get("action")
        step = {
            "prepare": self.prepare,
            "set_desired": self.set_desired,
            "verify": self.verify,
            "backoff": self.backoff,
            "next_round": self.next_round,
        }.get(str(action))
        if step is None:
            raise InputError(
                f"unknown action {action!r}: one of prepare, set_desired, verify, backoff, next_round",
                field="action",
            )
        return step(event)


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
    )
    return {k: result[k] for k in keep if k in result}
