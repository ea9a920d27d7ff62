"""What the act layer and its ports (:mod:`spillway.ports`) exchange: plain data, no I/O.

Snapshot keys and manifests (the snapshots table), the stored state and plan records (the state and
plans tables), execution requests and what starting them did (Step Functions), and what one plan
cycle did (:class:`PlanOutcome`). The adapters and the fakes in the tests build and read these.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from spillway.model.state import State
from spillway.model.utc import aware

Status = Literal["acted", "idle", "resumed", "superseded"]


# format_key's form: the snapshots table's sort key, which a plan request or a stream record names
SNAPSHOT_KEY_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$"
# template.yaml's ClusterName (EKS allows at most 100 characters)
CLUSTER_PATTERN = r"^[0-9A-Za-z][A-Za-z0-9._-]*$"


class PlanRequest(BaseModel):
    """The plan function invoked directly: ``{"cluster": "ml"}`` plans the cluster's latest snapshot,
    ``{"cluster": "ml", "snapshot_key": "2026-...Z"}`` that one. Closed: a misspelt key is refused, not
    read as "the latest snapshot"."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    cluster: str = Field(min_length=1, max_length=100, pattern=CLUSTER_PATTERN)
    snapshot_key: str | None = Field(default=None, pattern=SNAPSHOT_KEY_PATTERN)


KEY_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def format_key(taken_at: datetime) -> str:
    """The sort key: UTC, microseconds, ``Z`` (fixed width: string order is time order)."""
    if taken_at.tzinfo is None:
        taken_at = taken_at.replace(tzinfo=UTC)
    return taken_at.astimezone(UTC).strftime(KEY_FORMAT)


def parse_key(key: str) -> datetime:
    """When the snapshot of key ``key`` (:func:`format_key`) was taken; ValueError for another form."""
    return datetime.strptime(key, KEY_FORMAT).replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class SnapshotMeta:
    """A stored snapshot's manifest without its data: enough to decide whether to write again."""

    cluster: str
    key: str
    taken_at: datetime
    fingerprint: str
    size: int
    raw_size: int
    chunks: int
    pods: int
    nodes: int


@dataclass(frozen=True, slots=True)
class SaveResult:
    key: str
    size: int  # compressed bytes
    raw_size: int  # JSON bytes
    chunks: int  # 0 when the snapshot fit in one item
    items: int  # items written (chunks + the manifest)
    seconds: float


def iso(value: datetime) -> str:
    return aware(value).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class StoredState:
    """The state as loaded: what the planner needs, and what the last committed plan was."""

    state: State = field(default_factory=State)
    version: int = 0  # 0: nothing stored yet
    snapshot_key: str | None = None  # the snapshot the last committed plan came from
    plan_id: str | None = None
    executions: tuple[Mapping[str, Any], ...] = ()  # ExecutionRequest dicts of that plan


@dataclass(frozen=True, slots=True)
class PlanRecord:
    cluster: str
    plan_id: str
    snapshot_key: str  # the snapshot planned on
    fingerprint: str
    created_at: datetime
    plan: Mapping[str, Any]  # ScalingPlan.to_dict()
    kind: str = "plan"  # or "replan" (an overflow round of a scale-up execution)
    sort_key: str = ""  # defaults to snapshot_key
    state_version: int = 0
    executions: tuple[str, ...] = ()
    summary: Mapping[str, int] = field(default_factory=dict)
    # an overflow re-plan's: the groups its round maps over (the scale-up execution's ``groups``), so a
    # retry of the step that finds its own record knows its commit landed and maps over them; None for a
    # plan of a tick, and for a record of a build before it
    groups: tuple[Mapping[str, Any], ...] | None = None

    @property
    def key(self) -> str:
        return self.sort_key or self.snapshot_key

    @property
    def acts(self) -> bool:
        return bool(self.plan.get("scale_up") or self.plan.get("uncordon") or self.plan.get("drain"))


def replan_key(snapshot_key: str, round_: int, part: int = 1) -> str:
    """The plans table's sort key of the overflow re-plan of round ``round_`` of the scale-up of the plan
    of ``snapshot_key``, by its part ``part`` (:func:`spillway.model.state.scale_up_execution`):
    ``<snapshot key>#replan-<round>``, and ``...#part-<part>`` after it for the parts after the first. The
    parts of one plan re-plan each their own groups: under one key, a part took another's re-plan for
    its own whose answer was lost (:meth:`spillway.act.scale.ScaleSteps._landed_replan`)."""
    key = f"{snapshot_key}#replan-{round_}"
    return key if part == 1 else f"{key}#part-{part}"


def execution_arn(state_machine_arn: str, name: str) -> str:
    """``arn:aws:states:<region>:<account>:stateMachine:<machine>`` + name → the execution's ARN."""
    return state_machine_arn.replace(":stateMachine:", ":execution:", 1) + ":" + name


@dataclass(frozen=True, slots=True)
class ExecutionRequest:
    """What to start: which state machine (``kind`` is ``scale_up`` or ``scale_down``), name and input."""

    kind: str
    state_machine_arn: str
    name: str
    input: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "state_machine_arn": self.state_machine_arn,
            "name": self.name,
            "input": dict(self.input),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ExecutionRequest:
        return cls(
            kind=str(d["kind"]),
            state_machine_arn=str(d["state_machine_arn"]),
            name=str(d["name"]),
            input=dict(d.get("input") or {}),
        )


@dataclass(frozen=True, slots=True)
class StartedExecution:
    kind: str
    name: str
    arn: str
    started: bool  # False: an execution of that name already existed (a duplicate start)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "arn": self.arn, "started": self.started}


@dataclass(frozen=True, slots=True)
class SnapshotRef:
    cluster: str
    key: str

    def to_dict(self) -> dict[str, str]:
        return {"cluster": self.cluster, "snapshot_key": self.key}


@dataclass(frozen=True, slots=True)
class PlanSummary:
    """Headline numbers of a plan (logs, metrics and the plan record)."""

    scale_up_groups: int = 0
    scale_up_nodes: int = 0
    overflow_nodes: int = 0  # of scale_up_nodes, those outside the primary region
    uncordon: int = 0
    drains: int = 0
    pending: int = 0
    unplaceable: int = 0  # pending pods the plan found no place for
    # of them, gang members kept to the region(s) their gang runs in, which cannot hold them
    # (gang-home-full), or to nodes of unknown region (gang-home-unknown)
    gang_home_held: int = 0
    unregistered: int = 0  # instances no Node joined for within max_node_provision_minutes
    # fleet gang instances left outside every group that the plan sends to the scale-down to terminate
    # (its step checks each again: the DrainOutcome gang-orphan-terminated counts those it terminated);
    # one is counted by every plan until it is gone
    gang_orphans: int = 0
    gang_orphans_busy: int = 0  # the others, left running: their Node runs work
    cluster_unhealthy: int = 0  # 1: too many unready nodes, nothing drained (spillway.planner.health)
    unhealthy_groups: int = 0  # groups with too many unready nodes: they get no new nodes
    priority_configmap_invalid: int = 0  # 1: the priority expander's ConfigMap could not be read
    # fields of the configuration naming groups no managed group is called (a budget's groups, a tenant
    # scope's node_groups): each a problem of kind UnknownGroupNames
    unknown_group_names: int = 0
    # 1: the drains' deadline is too short for a pod with the default grace to be moved, while a group
    # consolidates when-underutilized (a problem of kind DrainDeadlineTooShort)
    drain_deadline_too_short: int = 0
    # how long the oldest pending pod the plan does not hold at a limit (nor expendable) has waited, in
    # whole seconds at the snapshot: what pending-too-long reads while plans come
    oldest_unheld_pending_seconds: int = 0
    # the chunks of active capacity buffers with no room in the plan (its ``buffers``' ``short``): a buffer
    # no node or group can hold (a node_selector typo) or one held in part (MaxSize, a limit, a back-off)
    buffer_chunks_short: int = 0

    def to_dict(self) -> dict[str, int]:
        return {
            "scale_up_groups": self.scale_up_groups,
            "scale_up_nodes": self.scale_up_nodes,
            "overflow_nodes": self.overflow_nodes,
            "uncordon": self.uncordon,
            "drains": self.drains,
            "pending": self.pending,
            "unplaceable": self.unplaceable,
            "gang_home_held": self.gang_home_held,
            "unregistered": self.unregistered,
            "gang_orphans": self.gang_orphans,
            "gang_orphans_busy": self.gang_orphans_busy,
            "cluster_unhealthy": self.cluster_unhealthy,
            "unhealthy_groups": self.unhealthy_groups,
            "priority_configmap_invalid": self.priority_configmap_invalid,
            "unknown_group_names": self.unknown_group_names,
            "drain_deadline_too_short": self.drain_deadline_too_short,
            "oldest_unheld_pending_seconds": self.oldest_unheld_pending_seconds,
            "buffer_chunks_short": self.buffer_chunks_short,
        }


def add_unplaced_counts(metric: Callable[[str, float], None], summary: Mapping[str, Any]) -> None:
    """A plan's counts of pending pods with no place, from its summary (:meth:`PlanSummary.to_dict`):
    ``UnplaceablePods``, and of them ``GangPodsHeldAtHome`` (0 too, as a level). Every plan that reports
    them emits both through this: the plan function's, and the scale function's overflow re-plan."""
    metric("UnplaceablePods", summary.get("unplaceable", 0))
    metric("GangPodsHeldAtHome", summary.get("gang_home_held", 0))


@dataclass(frozen=True, slots=True)
class PlanOutcome:
    cluster: str
    snapshot_key: str
    plan_id: str
    status: Status
    state_version: int
    summary: PlanSummary = field(default_factory=PlanSummary)
    executions: tuple[StartedExecution, ...] = ()
    note: str = ""
    # the pod Events the plan posted after its commit ({"posted", "failed", "skipped", "errors",
    # "suppressed", "capped"}); None when it posted none
    events: Mapping[str, Any] | None = None
    # per tenant that appears in the plan: {"nodes", "gpus", "cpu" (cores) added; "uncordoned": nodes
    # reused for its pods; "held": {code: pods}}
    tenants: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # the ProvisioningRequest statuses it wrote ({"written", "failed", "errors"}); None when none changed
    provisioning: Mapping[str, Any] | None = None
    # the scale-down candidate taints it set or lifted ({"written", "failed", "errors"}); None when none
    soft_taints: Mapping[str, Any] | None = None
    # the ended ProvisioningRequests it deleted ({"written": deleted, "failed", "gone", "errors"}); None
    # when none was due
    provisioning_deleted: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "cluster": self.cluster,
            "snapshot_key": self.snapshot_key,
            "plan_id": self.plan_id,
            "status": self.status,
            "state_version": self.state_version,
            "summary": self.summary.to_dict(),
            "executions": [e.to_dict() for e in self.executions],
            "note": self.note,
        }
        if self.events is not None:
            out["events"] = dict(self.events)
        if self.tenants:
            out["tenants"] = {k: dict(v) for k, v in self.tenants.items()}
        if self.provisioning is not None:
            out["provisioning"] = dict(self.provisioning)
        if self.soft_taints is not None:
            out["soft_taints"] = dict(self.soft_taints)
        if self.provisioning_deleted is not None:
            out["provisioning_deleted"] = dict(self.provisioning_deleted)
        return out
