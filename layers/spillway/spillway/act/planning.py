"""The plan cycle: one snapshot in, one committed plan and its executions out.

``run_plan`` is what the plan Lambda does for one (cluster, snapshot key):

1. load the snapshot; refuse one older than ``max_snapshot_age_seconds`` (:class:`StaleSnapshot`):
   nothing is planned, written or started, so nothing is ever drained on stale data;
2. load the state (back-offs merged in). A snapshot older than the one last planned is *superseded*
   (nothing happens); the same snapshot again is a *resume*: its plan is already committed, so its
   executions are started again, which Step Functions turns into a no-op when they exist;
3. run the pure planner;
4. commit the new state and the plan record in one transaction, conditional on the state's version
   (:class:`StateConflict` for the loser of two planners: it writes and starts nothing);
5. start the scale-up execution (when the plan grows or uncordons; a plan growing more groups than a
   scale-up round holds, :data:`~spillway.model.history.MAX_SCALE_UP_GROUPS`, starts the rest as
   ``up-<plan id>-2``, ..., each input naming its ``part``: its re-plans and raises are its own), one
   gang-launch execution per gang
   the plan launches in a group tagged ``spillway.io/atomic-launch`` ``fleet``/``rollback``
   (:func:`spillway.act.gang.execution_request`; those nodes are left out of the scale-up entry of the
   group) and the scale-down execution (when it drains), named ``up-<plan id>``, ``gang-<plan id>-<hash>``
   and ``down-<plan id>`` (a scale-down too large for one input is split into parts ``down-<plan id>-2``,
   ..., each started now and draining once the part before it ended; a drain that starts once the
   plan's claim on its node, ``drain_claim_minutes``, lapsed is cancelled, and a part that would wait
   for the part before past the claim drains nothing): a duplicate start is refused by
   Step Functions and reported as ``started=False``. The execution list is committed with the state, so
   a resumed plan restarts the gang launches too;
6. when given a cluster, write the ProvisioningRequest statuses the plan changed (conditions and
   ``provisioningClassDetails``, through ``patch_custom_status``) and post the pod Events of :mod:`spillway.act.events` (``TriggeredScaleUp``,
   ``NotTriggerScaleUp``), rate-limited by the ledger committed with the state in step 4, and set or
   lift the scale-down candidate taints (:mod:`spillway.planner.softtaint`). Only after the commit:
   the loser of a race posts nothing. A failure to post or taint never fails the plan.

The plan id is derived from the cluster and the snapshot key, so every retry of one snapshot names the
same executions. The stores, the execution starter and the clock are passed in; fakes stand in for them
in the unit tests.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from pydantic import ValidationError

from spillway.act.claims import settle_abandoned
from spillway.act.drain import DRAIN_LINE_BYTES
from spillway.act.events import EventBatch, EventPolicy, plan_events, post_events
from spillway.act.gang import execution_request as gang_execution_request
from spillway.config import PlannerConfig
from spillway.errors import (
    ConfigurationError,
    InputError,
    KubeAuthError,
    KubeUnavailable,
    NodeNotFound,
    ObjectNotFound,
    SnapshotNotFound,
    SpillwayError,
    StaleSnapshot,
    refused_input,
)
from spillway.model import provreq
from spillway.model.act import (
    ExecutionRequest,
    PlanOutcome,
    PlanRecord,
    PlanRequest,
    PlanSummary,
    SnapshotRef,
    StoredState,
    execution_arn,
    parse_key,
)
from spillway.model.cluster import ClusterSnapshot
from spillway.model.groupkey import GroupKey
from spillway.model.history import MAX_SCALE_UP_GROUPS
from spillway.model.nodegroup import NodeGroup
from spillway.model.snapshot import Snapshot
from spillway.model.state import RaiseState, State, scale_up_execution, scale_up_owner
from spillway.model.utc import aware
from spillway.planner import ScalingPlan, codes
from spillway.planner import plan as run_planner
from spillway.planner.types import (
    DRAIN_DEADLINE_TOO_SHORT,
    PRIORITY_CONFIGMAP_INVALID,
    UNKNOWN_GROUP_NAMES,
    Drain,
    GangLaunch,
    GangOrphan,
    ProvisioningDeletion,
    ProvisioningUpdate,
    ScaleUp,
    SoftTaint,
    Unregistered,
)
from spillway.ports import Cluster, Ledger, Snapshots, Workflows

Planner = Callable[[ClusterSnapshot, Sequence[NodeGroup], PlannerConfig, State, datetime], ScalingPlan]
log = logging.getLogger(__name__)
T = TypeVar("T")
SCALE_UP = "scale_up"
SCALE_DOWN = "scale_down"
GANG_LAUNCH = "gang_launch"


# --- settings and results ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlanSettings:
    planner: PlannerConfig
    scale_up_arn: str | None = None
    scale_down_arn: str | None = None
    gang_launch_arn: str | None = None
    max_snapshot_age_seconds: float = 180.0
    poll_seconds: float = 15.0  # scale-up: between launch checks
    launch_timeout_seconds: float = 600.0  # scale-up: a launch not Ready by then is a failure
    max_rounds: int = 3  # scale-up: the first attempt and up to two overflow re-plans
    drain_poll_seconds: float = 15.0
    gang_deadline_seconds: float = 600.0  # gang launch: the whole gang Ready by then
    gang_poll_seconds: float = 15.0  # gang launch: between checks
    events: EventPolicy = field(
        default_factory=EventPolicy
    )  # the pod Events a plan posts (when it is given a cluster)

    @property
    def drain_deadline_seconds(self) -> float:
        """The drains' deadline: the planner's, which judges by it (a pod's grace up to it), so the
        execution and the plan can never hold two (DRAIN_DEADLINE_SECONDS sets it)."""
        return self.planner.drain_deadline_seconds

    @property
    def primary_region(self) -> str | None:
        return self.planner.regions[0] if self.planner.regions else None


# --- pure helpers -------------------------------------------------------------------------------


def plan_id_for(cluster: str, snapshot_key: str) -> str:
    """``20260302T090000123456Z-1a2b3c4d``: the snapshot time (sortable) and a hash of cluster and key.

    Deterministic, so every retry for one snapshot names the same executions; ``up-``/``down-`` plus
    this stays within Step Functions' 80 characters of ``[A-Za-z0-9-_]``.
    """
    compact = "".join(ch for ch in snapshot_key if ch.isalnum())[:32]
    digest = hashlib.sha256(f"{cluster}/{snapshot_key}".encode()).hexdigest()[:8]
    return f"{compact}-{digest}"


def summarize(plan: ScalingPlan, primary_region: str | None) -> PlanSummary:
    placed = {p.pod for p in plan.placements}
    swept = [g.terminate for g in plan.gang_orphans].count(True)
    nodes = sum(s.to_size - s.from_size for s in plan.scale_up)
    overflow = sum(
        s.to_size - s.from_size for s in plan.scale_up if primary_region and s.region != primary_region
    )
    problems = Counter(p.kind for p in plan.problems)  # each counted under its own kind
    return PlanSummary(
        scale_up_groups=len(plan.scale_up),
        scale_up_nodes=nodes,
        overflow_nodes=overflow,
        uncordon=len(plan.uncordon),
        drains=len(plan.drain),
        pending=len(plan.pending),
        unplaceable=sum(1 for p in plan.pending if p.pod not in placed),
        gang_home_held=_pending_with(plan, codes.GANG_HOME_CODES),
        unregistered=len(plan.unregistered),
        gang_orphans=swept,
        gang_orphans_busy=len(plan.gang_orphans) - swept,
        cluster_unhealthy=sum(1 for u in plan.unhealthy if u.group is None),
        unhealthy_groups=sum(1 for u in plan.unhealthy if u.group is not None),
        priority_configmap_invalid=problems[PRIORITY_CONFIGMAP_INVALID],
        unknown_group_names=problems[UNKNOWN_GROUP_NAMES],
        drain_deadline_too_short=problems[DRAIN_DEADLINE_TOO_SHORT],
        buffer_chunks_short=sum(b.short for b in plan.buffers),
    )


def _pending_with(plan: ScalingPlan, wanted: Collection[str]) -> int:
    """How many pods the plan leaves pending with one of the ``wanted`` codes."""
    return sum(1 for p in plan.pending if p.code in wanted)


def oldest_unheld_pending_seconds(plan: ScalingPlan, snapshot: Snapshot, config: PlannerConfig) -> int:
    """How long the oldest unschedulable pod has waited, at the snapshot, leaving out those the plan holds
    at a limit on purpose (``held-by-limits`` is their alarm, after ``HeldByLimitsAlarmMinutes``) and the
    expendable ones, as observe's ``OldestPendingSeconds`` does: observe cannot tell a held pod."""
    held = {p.pod for p in plan.pending if p.code in codes.LIMIT_CODES}
    return int(snapshot.oldest_pending_seconds(config.expendable_priority_cutoff, held))


GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")


def tenant_summary(
    plan: ScalingPlan, cluster: ClusterSnapshot, groups: Sequence[NodeGroup]
) -> dict[str, dict[str, Any]]:
    """Per tenant the plan names: capacity it adds for the tenant (new nodes charged to it, their GPUs
    and CPU cores, from the group's template node), the nodes Spillway cordoned that it uncordons for
    the tenant's pods (``uncordoned``, :attr:`~spillway.planner.types.Uncordon.tenant`: reused before launching, charged to the
    tenant as a new node is, but launched by no one, so counted apart from ``nodes``; before, they were
    in no count at all) and its pods held by a limit, per limit code.

    Only tenants that appear in the plan: metrics with a ``Tenant`` dimension stay few."""
    templates = {g.key: g.template for g in groups}
    out: dict[str, dict[str, Any]] = {}

    def entry(tenant: str) -> dict[str, Any]:
        return out.setdefault(tenant, {"nodes": 0, "gpus": 0, "cpu": 0.0, "uncordoned": 0, "held": {}})

    for s in plan.scale_up:
        template = templates.get(s.key)
        room = template.allocatable if template is not None else {}
        for tenant, nodes in s.tenants:
            e = entry(tenant)
            e["nodes"] += nodes
            e["gpus"] += nodes * sum(room.get(r, 0) for r in GPU_RESOURCES) // 1000
            e["cpu"] = round(e["cpu"] + nodes * room.get("cpu", 0) / 1000, 3)
    for u in plan.uncordon:
        if u.tenant:
            entry(u.tenant)["uncordoned"] += 1
    for p in plan.pending:
        if p.code in codes.LIMIT_CODES:
            held = entry(cluster.tenant(p.pod.split("/", 1)[0]))["held"]
            held[p.code] = held.get(p.code, 0) + 1
    return dict(sorted(out.items()))


def scale_up_groups(plan: ScalingPlan, groups: Sequence[NodeGroup]) -> list[dict[str, Any]]:
    """One entry per group the plan grows or uncordons nodes in: what the scale-up execution maps over.

    ``to`` is the absolute desired capacity (setting it twice is harmless); ``grow`` is False for a
    group whose nodes are only uncordoned; ``reasons`` is the plan's reason per uncordoned node (the
    Event ``prepare`` posts says it: reused for pending pods, or an orphaned drain restored);
    ``cordons`` which cordon the plan saw on each (``prepare`` takes off that one only); ``carried``
    (True, else absent) that the group is carried from an earlier read (its region's read failed:
    :mod:`spillway.planner.unread`): the plan only uncordons nodes of it, and the execution asks Auto
    Scaling nothing of it. Pod names stay in the plan record: the execution input must stay far below
    Step Functions' 256 KB.

    The nodes of gangs launched atomically (:func:`atomic_gangs`) are not in ``to``: their gang-launch
    executions add them. A group left with nothing to grow or uncordon has no entry.
    """
    by_key = {g.key: g for g in groups}
    items: dict[GroupKey, dict[str, Any]] = {}
    for s in plan.scale_up:
        atomic = sum(g.nodes for g in atomic_gangs(s, by_key.get(s.key)))
        ordinary = s.to_size - s.from_size - atomic
        if ordinary <= 0:
            continue
        items[s.key] = {
            "group": s.group,
            "region": s.region,
            "from": s.from_size,
            "to": s.from_size + ordinary,
            "grow": True,
            "new_nodes": ordinary,
            "pods": len(s.pods) - sum(len(g.pods) for g in atomic_gangs(s, by_key.get(s.key))),
            "uncordon": [],
            "reasons": {},
        }
    for u in plan.uncordon:
        entry = items.get(u.key)
        if entry is None:
            group = by_key.get(u.key)
            if group is None:
                continue  # the planner only uncordons nodes of known groups
            entry = items[u.key] = {
                "group": group.name,
                "region": group.region,
                "from": group.desired,
                "to": group.desired,
                "grow": False,
                "new_nodes": 0,
                "pods": 0,
                "uncordon": [],
                "reasons": {},
            }
        entry["uncordon"].append(u.node)
        entry["reasons"][u.node] = u.reason
        if u.cordon is not None:  # only then: a scale function older than the key refuses it
            entry.setdefault("cordons", {})[u.node] = u.cordon
    for key, entry in items.items():
        group = by_key.get(key)
        if group is not None and group.unread:
            entry["carried"] = True  # only then, as ``cordons``
    return list(items.values())


def atomic_gangs(scale_up: ScaleUp, group: NodeGroup | None) -> tuple[GangLaunch, ...]:
    """The gangs of ``scale_up`` its group launches atomically (tag ``fleet``/``rollback``), else ()."""
    if group is None or group.atomic_launch == "off":
        return ()
    return scale_up.gangs


def execution_raises(
    plan: ScalingPlan, groups: Sequence[NodeGroup], before: Mapping[str, RaiseState]
) -> dict[str, RaiseState]:
    """The plan's raises (``State.raises``) when only its scale-up execution acts on it, as an overflow
    re-plan does (it starts no gang launch): a group's raise leaves out the nodes of the gangs it would
    launch atomically, and a group left with none keeps the raise it had ``before``, if any (both by
    :attr:`GroupKey.stored <spillway.model.groupkey.GroupKey.stored>`)."""
    by_key = {g.key: g for g in groups}
    raises = dict(plan.state.raises)
    for s in plan.scale_up:
        atomic = sum(g.nodes for g in atomic_gangs(s, by_key.get(s.key)))
        if not atomic:
            continue
        key = s.key.stored
        if s.to_size - atomic > s.from_size:
            raises[key] = raises[key].model_copy(update={"to": s.to_size - atomic})
        elif key in before:
            raises[key] = before[key]
        else:
            raises.pop(key, None)
    return dict(sorted(raises.items()))


def owned_raises(
    raises: Mapping[str, RaiseState],
    grown: Iterable[Mapping[str, Any]],
    plan_id: str,
    round_: int,
    now: datetime,
    part: int = 1,
) -> dict[str, RaiseState]:
    """``raises`` with each entry made at ``now`` (by the plan or re-plan whose scale-up round ``round_``,
    of the execution of part ``part``, grows the groups ``grown``: :func:`scale_up_groups`' entries)
    naming the scale-up's owner in its group (``RaiseState.owner``), so that the load marks it unsettled
    for that owner's raise alone (:func:`spillway.model.state.merge_unsettled_raises`)."""
    out = dict(raises)
    for item in grown:
        if not item.get("grow"):
            continue
        region, name = str(item["region"]), str(item["group"])
        key = GroupKey(region, name).stored
        entry = out.get(key)
        if entry is not None and aware(entry.since) == aware(now):
            owner = scale_up_owner(plan_id, round_, region, name, part)
            out[key] = entry.model_copy(update={"owner": owner})
    return out


def scale_up_parts(grow: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The plan's groups to grow (:func:`scale_up_groups`) as its scale-up executions take them, part 1
    first: a round's groups add their checks to one execution's history (:mod:`spillway.model.history`),
    so a plan growing more groups than a round holds starts several scale-ups, each with its own."""
    return [
        list(grow[start : start + MAX_SCALE_UP_GROUPS]) for start in range(0, len(grow), MAX_SCALE_UP_GROUPS)
    ]


def gang_requests(
    plan_id: str, plan: ScalingPlan, groups: Sequence[NodeGroup], settings: PlanSettings
) -> list[ExecutionRequest]:
    """One gang-launch execution per gang the plan launches atomically; :class:`ConfigurationError`
    naming ``GANG_LAUNCH_STATE_MACHINE_ARN`` when there are some and no state machine is configured."""
    by_key = {g.key: g for g in groups}
    out: list[ExecutionRequest] = []
    for s in plan.scale_up:
        group = by_key.get(s.key)
        for gang in atomic_gangs(s, group):
            assert group is not None
            if not settings.gang_launch_arn:
                raise ConfigurationError(
                    f"the plan launches gang {gang.gang} atomically in {s.group} but no gang-launch "
                    "state machine is configured",
                    field="GANG_LAUNCH_STATE_MACHINE_ARN",
                )
            request = gang_execution_request(
                group, gang.nodes, gang.gang, plan_id, settings.gang_launch_arn,
                deadline_seconds=_seconds(settings.gang_deadline_seconds),
                poll_seconds=_seconds(settings.gang_poll_seconds), zone=gang.zone,
                node_labels=gang.node_labels,  # a ProvisioningRequest's: Kueue pins its pods with them
            )  # fmt: skip
            if request is not None:
                out.append(request)
    return out


def execution_requests(
    cluster: str,
    plan_id: str,
    snapshot_key: str,
    plan: ScalingPlan,
    groups: Sequence[NodeGroup],
    settings: PlanSettings,
    now: datetime,
) -> list[ExecutionRequest]:
    """The executions that carry out ``plan``, made at ``now`` (the time the planner was given)."""
    requests: list[ExecutionRequest] = []
    # each part re-plans and raises as its own: its re-plans' records and its owners name it
    for part, grown in enumerate(scale_up_parts(scale_up_groups(plan, groups)), start=1):
        up = {
            "cluster": cluster,
            "plan_id": plan_id,
            "snapshot_key": snapshot_key,
            "part": part,
            "round": 1,
            "max_rounds": settings.max_rounds,
            "poll_seconds": _seconds(settings.poll_seconds),
            "launch_timeout_seconds": _seconds(settings.launch_timeout_seconds),
            "groups": grown,
            "rounds": [],
            "done": False,
        }
        name = scale_up_execution(plan_id, part)
        requests.append(_execution(SCALE_UP, settings.scale_up_arn, name, up))
    requests += gang_requests(plan_id, plan, groups, settings)
    claim = claim_fields(now, settings.planner.drain_claim_minutes)
    removals = [removal_item(u) for u in plan.unregistered]
    removals += [sweep_item(g) for g in plan.gang_orphans if g.terminate]
    previous: ExecutionRequest | None = None
    for index, drains in enumerate(_down_batches([drain_item(d, claim) for d in plan.drain] + removals)):
        down: dict[str, Any] = {
            "cluster": cluster,
            "plan_id": plan_id,
            "drains": drains,
            "deadline_seconds": _seconds(settings.drain_deadline_seconds),
            "poll_seconds": _seconds(settings.drain_poll_seconds),
        }
        if previous is not None:  # a part drains once the part before it ended (see _down_batches)
            down["after"] = execution_arn(previous.state_machine_arn, previous.name)
            if claim:  # and waits for it no longer than the plan claims its nodes
                down |= {"after_poll_seconds": AFTER_POLL_SECONDS, "poll_budget": poll_budget(claim, now)}
        name = f"down-{plan_id}" if index == 0 else f"down-{plan_id}-{index + 1}"
        previous = _execution(SCALE_DOWN, settings.scale_down_arn, name, down)
        requests.append(previous)
    return requests


def claim_fields(now: datetime, claim_minutes: float) -> dict[str, Any]:
    """When the plan made at ``now`` stops claiming the nodes it drains: later plans leave a node alone
    for ``drain_claim_minutes`` (:meth:`spillway.planner.scaledown.ScaleDown.claimed_at`) unless its drain
    has cordoned it. Every drain item carries it: a drain that starts at or after ``claim_until`` (queued
    behind ``MaxDrainConcurrency`` others, or in a part waiting for the one before) is cancelled by
    DrainNode's validation, touching nothing; the next plan judges its node again, and a consolidation's
    premise (its pods fit elsewhere) is that old. RFC 3339 in whole seconds with ``Z``; rounded down, so
    a drain never starts after the claim lapsed. ``drain_claim_minutes`` 0 claims nothing (later plans
    may judge the node at once): no fields, so no drain is ever cancelled for a claim."""
    if claim_minutes <= 0:
        return {}
    planned = aware(now).astimezone(UTC)
    until = planned + timedelta(minutes=claim_minutes)
    return {
        "planned_at": planned.strftime(_RFC3339),
        "claim_minutes": claim_minutes,
        "claim_until": until.strftime(_RFC3339),
    }


_RFC3339 = "%Y-%m-%dT%H:%M:%SZ"  # strftime drops the fraction: whole seconds, rounded down

# how long a scale-down part waits between looks at the part before it (scale_down.asl.json's default)
AFTER_POLL_SECONDS = 60


def poll_budget(claim: Mapping[str, Any], now: datetime, poll_seconds: int = AFTER_POLL_SECONDS) -> int:
    """How many times a scale-down part may wait ``poll_seconds`` for the part before it while the plan
    made at ``now`` still claims the part's nodes (``claim``: :func:`claim_fields`): the claim time left,
    divided by ``poll_seconds``, rounded down. A part looks once when it starts, and again after each
    wait; a Wait state lasts at least its seconds, so after ``n`` waits at least ``n * poll_seconds``
    have passed since ``now``, and a look after one wait more would come past ``claim_until``, when
    DrainNode's validation cancels every drain. So a part that finds the part before still running
    once its budget is spent drains nothing and ends (scale_down.asl.json, ClaimLapsed): the budget never
    stops a part that could have drained in time. Counted, not timed: the state machine subtracts one
    per wait (States.MathAdd) instead of comparing timestamps."""
    until = datetime.strptime(claim["claim_until"], _RFC3339).replace(tzinfo=UTC)
    left = (until - aware(now)).total_seconds()
    return max(0, math.floor(left / poll_seconds))


# the drains of one scale-down execution, in bytes of JSON: Step Functions refuses an input (and a state)
# over 256 KB, and the Map keeps every drain's outcome beside its input
DOWN_BATCH_BYTES = 96 * 1024
# ... and that outcome is its line (spillway.act.drain.line: DRAIN_LINE_BYTES), or, when the line could
# not be made, its request echoed with that step's error: what a part's Map output holds at worst
DOWN_STATE_BYTES = 224 * 1024  # 256 KB less room for the part's own fields
_RESULT_SLACK = 64  # the Map result's own keys and separators


def _down_batches(items: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """The plan's drains in as few scale-down executions as keep each input under
    :data:`DOWN_BATCH_BYTES` (a large consolidation names every pod it moves) and its Map's output, the
    input and every drain's line, under :data:`DOWN_STATE_BYTES`; in order, so the names
    ``down-<plan id>``, ``down-<plan id>-2``... are the same on every retry.

    The parts run one after another: each part after the first names the one before it (``after``,
    its execution ARN) and drains nothing until that one has ended. So the plan drains at most
    ``MaxDrainConcurrency`` nodes at a time, as one execution would; parts that each ran their own Map
    at once would drain that many per part. (Dividing the concurrency among the parts cannot keep the
    bound when there are more parts than it allows, each needing at least one.) The parts are started
    in order, so the one named in ``after`` exists by the time its successor asks. A drain that could
    start only after the plan's claim on its node lapsed drains nothing (:func:`claim_fields`), and a
    part after the first waits for the one before no longer than that claim holds (:func:`poll_budget`):
    then it ends, draining none of its nodes and removing none of its unregistered instances (the next
    plan finds those again), and so does every part after it."""
    batches: list[list[Mapping[str, Any]]] = []
    size = state = DOWN_BATCH_BYTES
    for item in items:
        length = len(json.dumps(item, separators=(",", ":"), ensure_ascii=False).encode()) + 1
        worst = 2 * length + _RESULT_SLACK + DRAIN_LINE_BYTES  # in the input, then in the Map's output
        if (size + length > DOWN_BATCH_BYTES or state + worst > DOWN_STATE_BYTES) and (
            not batches or batches[-1]
        ):
            batches.append([])
            size = state = 0
        batches[-1].append(item)
        size += length
        state += worst
    return batches


REASON_LIMIT = 256  # a DrainRequest's reason (the plan record keeps the whole of it)


def drain_item(drain: Drain, claim: Mapping[str, Any]) -> dict[str, Any]:
    """One drain of the scale-down's Map: a DrainNode request, with the plan's ``claim`` on the node
    (:func:`claim_fields`: the drain is cancelled if it starts once the claim lapsed). A consolidation
    carries the pods it moves: the drain evicts those only, and is cancelled if the node runs any other
    workload pod by then. An idle node's drain that evicts its expendable pods carries them the same
    way (code ``expendable-pods``, or ``never-started-pods`` when its pods that never started are what
    made a dead node removable), and a drain ahead of a scheduled action (``scheduled-shrink``) that
    names pods. A make-room moves its pods the same way, then keeps the node: ``terminate`` false, ``uncordon``
    true (uncordoned and untainted once empty, for the pending pods the plan gave it to). Of its pods
    that go with the node (they tolerate the drain) it carries the controllers, ``controllers``, only
    when there are any: the drain takes such a controller's replacement of one as named."""
    item: dict[str, Any] = {**drain.to_dict(), "region": drain.region, "reason": drain.reason[:REASON_LIMIT]}
    item.pop("code", None)
    item.pop("pods", None)
    controllers = item.pop("controllers", None)
    # a never-started-pods drain that names pods names its expendable ones: it evicts them, as one of those;
    # a drain ahead of a scheduled action names the pods it moves (a busy node's) or evicts (an idle one's
    # expendable pods), none for an empty node
    moves = (codes.CONSOLIDATION, codes.MAKE_ROOM, codes.EXPENDABLE_PODS)
    naming = (codes.NEVER_STARTED, codes.SCHEDULED_SHRINK)
    if drain.code in moves or (drain.code in naming and drain.pods):
        item |= {"consolidation": True, "pods": list(drain.pods)}
        if drain.whole_grace:  # a consolidation's or make room's pods moved at a cost: never cut short
            item["whole_grace"] = list(drain.whole_grace)
        if controllers:  # the controllers of its pods that go with the node: their successors count as named
            item["controllers"] = controllers
    if not drain.terminate:  # make room: to_dict says terminate false; the node is given back
        item["uncordon"] = True
    return item | dict(claim)


def removal_item(entry: Unregistered) -> dict[str, Any]:
    """One item of the scale-down's Map for an instance no Node joined for: the drain function checks it
    again and terminates it (:mod:`spillway.act.unregistered`); no DrainNode execution. No claim: the
    step judges the instance afresh when it runs (gone, joined, its group), its premise (no Node joined)
    only grows truer with time, and a second removal of it finds it terminating."""
    return {
        "unregistered": True,
        "instance_id": entry.instance_id,
        "group": entry.group,
        "region": entry.region,
        "decrement": entry.decrement,
        "reason": entry.reason[:REASON_LIMIT],
    }


def sweep_item(entry: GangOrphan) -> dict[str, Any]:
    """One item of the scale-down's Map for a fleet gang's instance left outside every group: the drain
    function checks it again and terminates it (:mod:`spillway.act.gangsweep`); no DrainNode execution,
    no claim (the step judges the instance afresh: gone, attached, its Node busy, against the plan's
    ``unready_minutes`` for a NotReady Node)."""
    return {
        "gang_orphan": True,
        "instance_id": entry.instance_id,
        "region": entry.region,
        "attempt": entry.attempt,
        "gang": entry.gang,
        "node": entry.node,
        "reason": entry.reason[:REASON_LIMIT],
        # null included; an older build's item without it reads as null (the ASL's GangOrphanDefaults)
        "unready_minutes": entry.unready_minutes,
    }


# kind → (what the plan does that needs it, the variable naming its state machine)
_NEEDS = {
    SCALE_UP: ("grows groups", "SCALE_UP_STATE_MACHINE_ARN"),
    SCALE_DOWN: ("drains nodes or removes instances", "SCALE_DOWN_STATE_MACHINE_ARN"),
}


def _execution(kind: str, arn: str | None, name: str, body: dict[str, Any]) -> ExecutionRequest:
    """The request to start ``kind``'s state machine; :class:`ConfigurationError` when none is set."""
    if not arn:
        does, variable = _NEEDS[kind]
        kind_name = kind.replace("_", "-")
        raise ConfigurationError(
            f"the plan {does} but no {kind_name} state machine is configured", field=variable
        )
    return ExecutionRequest(kind=kind, state_machine_arn=arn, name=name, input=body)


def _seconds(value: float) -> int:
    """Wait states take whole seconds."""
    return max(0, round(value))


# --- the cycle ---


def own_inserts(
    inserts: Sequence[tuple[SnapshotRef, str]], cluster: str
) -> tuple[list[tuple[SnapshotRef, str]], list[dict[str, Any]]]:
    """A stream batch's snapshot inserts (:func:`spillway.adapters.store.snapshot_inserts`) split into
    ``cluster``'s, to plan, and the results of the others, skipped: planning another cluster's snapshot
    would act with this deployment's settings and state machines, and retrying cannot make it ours, so
    it is logged and is no batch item failure."""
    ours = [(ref, seq) for ref, seq in inserts if ref.cluster == cluster]
    skipped = []
    for ref, _ in inserts:
        if ref.cluster != cluster:
            note = f"a snapshot of cluster {ref.cluster}; this deployment plans {cluster}"
            log.warning("%s/%s skipped: %s", ref.cluster, ref.key, note)
            skipped.append({**ref.to_dict(), "status": "skipped", "note": note})
    return ours, skipped


def parse_plan_request(event: Any, cluster: str) -> PlanRequest:
    """A direct invocation's ``{"cluster", "snapshot_key"?}`` (:class:`PlanRequest`) for this
    deployment's ``cluster``, or :class:`InputError` naming the field before anything is read."""
    try:
        request = PlanRequest.model_validate(event)
    except ValidationError as exc:
        raise refused_input(exc, what="plan request") from None
    if request.cluster != cluster:
        raise InputError(f"this deployment plans cluster {cluster}, not {request.cluster}", field="cluster")
    return request


def snapshot_ref(snapshots: Snapshots, cluster: str, key: str | None = None) -> SnapshotRef:
    """The snapshot to plan: ``key`` of ``cluster`` or, without one, its latest complete snapshot
    (:class:`SnapshotNotFound` when there is none)."""
    if key:
        return SnapshotRef(cluster, key)
    meta = snapshots.latest_meta(cluster)
    if meta is None:
        raise SnapshotNotFound(f"{cluster}: no complete snapshot stored")
    return SnapshotRef(cluster, meta.key)


def finish_previous(stored: StoredState, executions: Workflows, config: PlannerConfig, now: datetime) -> None:
    """Start the executions the last committed plan names, before a newer snapshot is planned on its
    state. A plan that committed and then failed to start them is retried from its stream record, but
    a retried batch that also holds a newer snapshot plans only the newer one, and a retry past
    ``max_snapshot_age_seconds`` is stale: without this, the newer plan would count the older plan's
    raises, gangs and drain claims as under way while nothing carries them out. Starting is idempotent
    by name (Step Functions refuses a used one), so an execution that did start is not started again.
    Only while the newer plan counts the older one's claim of that kind (``scale_up_claim_minutes``,
    ``gang_launch_minutes``, ``drain_claim_minutes``, from the older snapshot's time, which is at or
    before its plan's), and a gang launch only when its deadline too ends within it (:func:`_runs`):
    past it, the newer plan plans that work itself. Raises what the start raises,
    before anything of the newer plan is written."""
    if stored.snapshot_key is None or not stored.executions:
        return
    try:
        age = now - parse_key(stored.snapshot_key)
    except ValueError:  # not a key this code wrote: its age, and so its claims' windows, unknown
        log.warning("previous plan %s: snapshot key %r unreadable; its executions not started again",
                    stored.plan_id, stored.snapshot_key[:80])  # fmt: skip
        return
    windows = {
        SCALE_UP: config.scale_up_claim_minutes,
        GANG_LAUNCH: config.gang_launch_minutes,
        SCALE_DOWN: config.drain_claim_minutes,
    }
    for request in map(ExecutionRequest.from_dict, stored.executions):
        if age + _runs(request) < timedelta(minutes=windows.get(request.kind, 0)):
            started = executions.start(request)
            # started False: one of that name was there already, still running (Step Functions answers
            # its start date) or closed (ExecutionAlreadyExists): spillway.adapters.sfn.Executions.start
            log.info("previous plan %s: %s %s", stored.plan_id, request.name,
                     "started now" if started.started else "started before (running or ended)")  # fmt: skip


def settle_abandoned_raises(ledger: Ledger, snapshot: Snapshot, now: datetime) -> None:
    """Settle the raise markers the steps that wrote them left bare and no step will settle any more
    (:func:`spillway.act.claims.settle_abandoned`), judged on the snapshot's group reads: each group's
    desired capacity as observe read it (a group carried from an earlier read, at that read's time).
    Every plan does, so a marker left by an execution whose NextRound or GiveBack failed for good, or
    that was stopped or timed out, holds no other owner's instances for longer than its step could
    run and the next snapshot. Best effort: the plan goes on without it, logged."""
    reads = {g.key.stored: (g.desired, g.read_at or snapshot.taken_at) for g in snapshot.groups}
    try:
        settled = settle_abandoned(ledger, snapshot.cluster_name, reads, now)
    except SpillwayError as exc:
        log.warning("raise markers left bare by their steps not settled this time: %s", exc)
        return
    for owner, how in settled.items():
        log.info("raise marker of %s, left bare by its step, settled %s on the snapshot's read", owner, how)


def _runs(request: ExecutionRequest) -> timedelta:
    """How long after its start an execution may still be carrying out the claim a plan counts: a gang
    launch until its deadline (``deadline_seconds``). In fleet mode its group shows nothing until it
    attaches, so plans hold the gang only for ``gang_launch_minutes`` from its plan (kept above the
    deadline); one started later than that less its deadline could still be launching when a plan
    launches the gang again. A scale-up's raise and a drain's claim (``claim_until``, checked by the
    drain itself) need only the start within the window."""
    if request.kind != GANG_LAUNCH:
        return timedelta(0)
    return timedelta(seconds=float(request.input.get("deadline_seconds") or 0))


def run_plan(
    ref: SnapshotRef,
    *,
    snapshots: Snapshots,
    ledger: Ledger,
    executions: Workflows,
    settings: PlanSettings,
    now: datetime,
    planner: Planner = run_planner,
    cluster: Callable[[], Cluster] | None = None,
) -> PlanOutcome:
    """Plan one snapshot and act on it (see the module docstring). Raises :class:`StateConflict`,
    :class:`StaleSnapshot`, :class:`SnapshotNotFound` and adapter errors; starts and posts nothing when
    it raises before the commit. ``cluster`` makes the Kubernetes client the pod Events go through
    (called only when there are Events to post); without it none are posted or recorded."""
    now = aware(now)
    pid = plan_id_for(ref.cluster, ref.key)
    snapshot = snapshots.get(ref.cluster, ref.key)
    if snapshot.cluster_name != ref.cluster:
        raise InputError(f"snapshot {ref.key} is of cluster {snapshot.cluster_name!r}, not {ref.cluster!r}")
    age = (now - aware(snapshot.taken_at)).total_seconds()
    if age > settings.max_snapshot_age_seconds:
        raise StaleSnapshot(
            f"{ref.cluster}/{ref.key}: snapshot is {age:.0f}s old, older than max_snapshot_age_seconds "
            f"({settings.max_snapshot_age_seconds:.0f}s); not acting on it"
        )
    settle_abandoned_raises(ledger, snapshot, now)  # before the load, which reads what it settles
    stored = ledger.load(ref.cluster, now)
    if stored.snapshot_key is not None and ref.key < stored.snapshot_key:
        return PlanOutcome(
            ref.cluster, ref.key, pid, "superseded", stored.version,
            note=f"a newer snapshot ({stored.snapshot_key}) was planned already",
        )  # fmt: skip
    if stored.snapshot_key == ref.key:
        started = tuple(executions.start(ExecutionRequest.from_dict(r)) for r in stored.executions)
        return PlanOutcome(
            ref.cluster, ref.key, stored.plan_id or pid, "resumed", stored.version,
            executions=started, note="this snapshot's plan was committed before; its executions restarted",
        )  # fmt: skip

    finish_previous(stored, executions, settings.planner, now)
    result = planner(snapshot.cluster, snapshot.groups, settings.planner, stored.state, now)
    # the pod Events to post after the commit; their ledger goes into the state committed
    batch = plan_events(result, snapshot.cluster, snapshot.groups, stored.state.events, settings.events, now)
    state = result.state.model_copy(update={"events": batch.ledger}) if cluster else result.state
    raises = dict(state.raises)
    for part, grown in enumerate(scale_up_parts(scale_up_groups(result, snapshot.groups)), start=1):
        raises = owned_raises(raises, grown, pid, 1, now, part)
    state = state.model_copy(update={"raises": raises})
    summary = dataclasses.replace(
        summarize(result, settings.primary_region),
        oldest_unheld_pending_seconds=oldest_unheld_pending_seconds(result, snapshot, settings.planner),
    )
    requests = execution_requests(ref.cluster, pid, ref.key, result, snapshot.groups, settings, now)
    record = PlanRecord(
        cluster=ref.cluster,
        plan_id=pid,
        snapshot_key=ref.key,
        fingerprint=snapshot.fingerprint,
        created_at=now,
        plan=result.to_dict(),
        kind="plan",
        state_version=stored.version + 1,
        executions=tuple(r.name for r in requests),
        summary=summary.to_dict(),
    )
    version = ledger.commit(
        ref.cluster,
        state,
        expected_version=stored.version,
        snapshot_key=ref.key,
        plan_id=pid,
        executions=[r.to_dict() for r in requests],
        now=now,
        plan=record,
    )
    started = tuple(executions.start(r) for r in requests)
    posted, written, marked, deleted = (
        _write_to_cluster(cluster, batch, result, settings) if cluster else (None,) * 4
    )
    return PlanOutcome(
        ref.cluster,
        ref.key,
        pid,
        "acted" if requests else "idle",
        version,
        summary=summary,
        executions=started,
        events=posted,
        tenants=tenant_summary(result, snapshot.cluster, snapshot.groups),
        provisioning=written,
        soft_taints=marked,
        provisioning_deleted=deleted,
    )


def _write_to_cluster(
    cluster: Callable[[], Cluster], batch: EventBatch, result: ScalingPlan, settings: PlanSettings
) -> tuple[dict[str, Any] | None, ...]:
    """After the commit: the pod Events, the ProvisioningRequest statuses, the candidate taints, the
    deletions of ended ProvisioningRequests."""
    return (
        _post(cluster, batch, settings.events),
        write_provisioning(cluster, result.provisioning),
        write_soft_taints(cluster, result.soft_taint),
        delete_provisioning(cluster, result.provisioning_deleted),
    )


def _post(cluster: Callable[[], Cluster], batch: EventBatch, policy: EventPolicy) -> dict[str, Any]:
    """Post the batch (never raises); what happened, for the outcome, the log and the metrics."""
    sent = post_events(cluster, batch.events, budget_seconds=policy.budget_seconds)
    return {**sent.to_dict(), "suppressed": batch.suppressed, "capped": batch.capped}


def write_provisioning(
    cluster: Callable[[], Cluster], updates: Sequence[ProvisioningUpdate]
) -> dict[str, Any] | None:
    """Write each ProvisioningRequest's new status (after the commit; never raises): a write that fails
    is counted and logged, and the next plan, seeing the old conditions, decides again. A write goes
    only to the request the plan decided on (its uid): one deleted since, or deleted and made again
    under the same name (``ObjectReplaced``), is counted ``gone``; the next plan reads the new one.
    Each write goes through the API version its request was read with (``v1beta1`` where the CRD serves
    it alone: a ``v1`` write there would answer 404, counted ``gone``, and the request never answered).
    None when the plan changed none."""

    def write(kube: Cluster, update: ProvisioningUpdate) -> None:
        kube.patch_custom_status(
            provreq.GROUP,
            update.version,
            provreq.PLURAL,
            update.namespace,
            update.name,
            update.status(),
            uid=update.uid,
        )

    items = [(u.key, u) for u in updates]
    return _write_each(cluster, "ProvisioningRequest status", items, write, gone=ObjectNotFound)


def delete_provisioning(
    cluster: Callable[[], Cluster], deletions: Sequence[ProvisioningDeletion]
) -> dict[str, Any] | None:
    """Delete the ProvisioningRequests that ended a week ago (after the commit; never raises), each
    only if it is still the request the plan saw (its uid): one gone since, or made again under the
    same name, is counted ``gone``. A deletion that fails is logged; the next plan asks again. None
    when there is none."""

    def delete(kube: Cluster, gone: ProvisioningDeletion) -> None:
        kube.delete_custom(
            provreq.GROUP, gone.version, provreq.PLURAL, gone.namespace, gone.name, uid=gone.uid
        )
        log.info("ProvisioningRequest %s deleted: %s", gone.key, gone.reason)

    items = [(d.key, d) for d in deletions]
    return _write_each(
        cluster, "deletion of the ended ProvisioningRequest", items, delete, gone=ObjectNotFound
    )


# How long the plan function writes candidate taints after its commit, lifts first (cluster-autoscaler
# bounds its soft-taint updates so: --max-bulk-soft-taint-time, 3 s): lifting is never capped, and the
# function has 60 s for its whole invocation, the pod Events' 10 s among them. The rest waits for the
# next plan, which sees the nodes as they are and asks again.
SOFT_TAINT_BUDGET_SECONDS = 10.0


def write_soft_taints(
    cluster: Callable[[], Cluster],
    taints: Sequence[SoftTaint],
    *,
    budget_seconds: float = SOFT_TAINT_BUDGET_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any] | None:
    """Set or lift the scale-down candidate taints (after the commit; never raises): the taint only
    steers kube-scheduler, so a write that fails is counted and logged, and the next plan, seeing the
    node as it is, asks again. A node deleted since the snapshot is counted ``gone``, not failed. The
    writes stop once ``budget_seconds`` are spent (the plan lists its lifts first), the rest counted
    failed: the next plan asks again. None when the plan changed none."""
    items = [(t.node, t) for t in taints]
    return _write_each(
        cluster,
        "scale-down candidate taint",
        items,
        lambda k, t: k.set_candidate_taint(t.node, t.add),
        gone=NodeNotFound,
        budget=(budget_seconds, clock),
    )


def _write_each(
    cluster: Callable[[], Cluster],
    what: str,
    items: Sequence[tuple[str, T]],
    write: Callable[[Cluster, T], object],
    *,
    gone: type[SpillwayError],
    budget: tuple[float, Callable[[], float]] | None = None,
) -> dict[str, Any] | None:
    """Write each item through the Kubernetes client, counting what failed; never raises. An API that
    cannot be reached or refuses Spillway's credentials fails the rest without trying them, as does a
    spent ``budget`` (seconds, and the clock to read). An object deleted since the snapshot (``gone``:
    its 404) has nothing left to write: counted ``gone``, not failed."""
    if not items:
        return None
    written, failed, moot = 0, 0, 0
    errors: list[str] = []
    try:
        kube = cluster()
    except SpillwayError as exc:
        log.warning("%s: none written: %s", what, exc)
        return {"written": 0, "failed": len(items), "errors": [str(exc)[:200]]}
    deadline = budget[1]() + budget[0] if budget is not None else math.inf
    for key, item in items:
        if budget is not None and budget[1]() >= deadline:
            left = len(items) - written - moot - failed
            failed += left
            errors = [*errors[:4], f"time budget of {budget[0]:g}s spent: {left} not tried"]
            log.warning("%s: time budget of %gs spent, %d left to the next plan", what, budget[0], left)
            break
        try:
            write(kube, item)
            written += 1
        except gone:
            moot += 1
            log.info("%s of %s not written: it is gone", what, key)
        except SpillwayError as exc:
            failed += 1
            errors.append(f"{key}: {type(exc).__name__}: {exc}"[:200])
            log.warning("%s of %s not written: %s", what, key, exc)
            if isinstance(exc, KubeUnavailable | KubeAuthError):
                failed = len(items) - written - moot
                break
    return {"written": written, "failed": failed, **({"gone": moot} if moot else {}), "errors": errors[:5]}


def snapshot_age(snapshot: Snapshot, now: datetime) -> timedelta:
    return aware(now) - aware(snapshot.taken_at)
