"""Configuration: the planner's thresholds (pure data) and where they come from.

:class:`PlannerConfig` is what the planner reads; it is a frozen pydantic model and never looks at
the environment itself. ``load_config_file`` reads YAML or JSON for ``spillway plan --config``; what it
cannot use raises :class:`~spillway.errors.ConfigurationError` naming the file and the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo

import yaml
from pydantic import ConfigDict, Field, PrivateAttr, field_validator, model_validator

from spillway.errors import ConfigurationError
from spillway.model.drain import MAX_DEADLINE_SECONDS
from spillway.model.options import MAX_MINUTES, parse_duration_minutes
from spillway.model.priorities import check_priorities
from spillway.model.quantity import QuantityError, is_digits, to_milli
from spillway.model.reserve import EKS_RESERVE, Reserve
from spillway.model.resources import CPU, MEMORY
from spillway.model.schedule import CRON_MACROS, Cron, cron_runs, next_change, zone_of
from spillway.model.settings import Settings
from spillway.model.utc import aware
from spillway.model.windows import TimeWindow, Windowed


def _quantity_text(value: Any) -> str:
    """A quantity as the user wrote it (YAML may have read ``8`` as a number), checked to parse."""
    text = value if isinstance(value, str) else str(value)
    try:
        to_milli(text)
    except QuantityError as exc:
        raise ValueError(str(exc)) from None
    return text


class NodeReserve(Settings):
    """What each new node keeps back from its pods (the template node's nominal size less its allocatable).

    Left unset, what a node of an EKS-optimized AMI keeps for its instance type (spillway.model.reserve:
    kube-reserved from its vCPUs and max pods, the 100Mi eviction threshold, a VM memory overhead of
    ``vm_memory_overhead_percent``, 0.075 by default). ``cpu`` or ``memory`` set: the flat amounts on
    every type that ``node_reserve`` always meant (the one not set is 100m, or 1Gi), with no VM overhead
    unless ``vm_memory_overhead_percent`` is set too: whoever sets them knows their nodes.
    """

    cpu: str | None = None
    memory: str | None = None
    # Karpenter's vmMemoryOverheadPercent, with its meaning: a fraction of the nominal memory (0.075 = 7.5 %)
    vm_memory_overhead_percent: float | None = None

    @field_validator("cpu", "memory", mode="before")
    @classmethod
    def _quantity(cls, value: Any) -> str | None:
        return None if value is None else _quantity_text(value)

    @field_validator("vm_memory_overhead_percent")
    @classmethod
    def _fraction(cls, value: float | None) -> float | None:
        if value is not None and not 0 <= value < 1:  # NaN fails both
            raise ValueError(
                f"{value!r} is not a fraction of the memory in [0, 1) (as Karpenter's vmMemoryOverheadPercent: "
                "0.075 is 7.5 %)"
            )
        return value

    def reserve(self) -> Reserve:
        if self.cpu is None and self.memory is None:
            if self.vm_memory_overhead_percent is None:
                return EKS_RESERVE
            return Reserve(vm_memory_overhead=self.vm_memory_overhead_percent)
        flat = {CPU: to_milli(self.cpu or "100m"), MEMORY: to_milli(self.memory or "1Gi")}
        return Reserve.flat_amounts(flat, self.vm_memory_overhead_percent or 0.0)


# Resource names without a domain prefix are Kubernetes' own (an extended resource must have one, as
# nvidia.com/gpu does), and ``nodes`` is Spillway's: any other bare name ("cpus", "gpu") is a typo whose
# limit would never bind.
BARE_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage", "storage", "pods", "nodes"})
_QUALIFIED = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def _check_resource(name: str) -> None:
    if name in BARE_RESOURCES or name.startswith("hugepages-") or _QUALIFIED.match(name):
        return
    raise ValueError(
        f"{name}: not a resource name (cpu, memory, nodes, pods, ephemeral-storage, hugepages-<size>, or "
        "an extended resource with its domain, such as nvidia.com/gpu)"
    )


def _check_limits(value: Any) -> dict[str, str]:
    """``{resource: quantity}``: cpu, memory, nvidia.com/gpu (any resource) and ``nodes``."""
    if not isinstance(value, dict):
        raise ValueError("expected a mapping of resource to quantity")
    out: dict[str, str] = {}
    for name, quantity in value.items():
        _check_resource(str(name))
        try:
            out[str(name)] = _quantity_text(quantity)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
    return out


def _node_labels(value: dict[str, str]) -> dict[str, str]:
    """A ``node_selector``: each entry a Kubernetes label, key and value (apimachinery
    pkg/util/validation, :func:`spillway.model.shared.label_problem`). No node carries any other, so a
    selector holding one would match no node, and say nothing."""
    from spillway.model.shared import label_problem

    for key, label in sorted(value.items()):
        why = label_problem(key, label)
        if why:
            raise ValueError(why[:200])
    return value


class LimitScope(Settings):
    """Limits on the part of a tenant's capacity in some node groups, or on nodes with some labels."""

    node_groups: tuple[str, ...] = ()  # empty: any group
    node_selector: dict[str, str] = Field(default_factory=dict)  # empty: any labels
    limits: dict[str, str] = Field(default_factory=dict)

    _limits = field_validator("limits", mode="before")(classmethod(lambda cls, v: _check_limits(v)))
    # a scope on labels no node carries would limit nothing, its limit never binding
    _labels = field_validator("node_selector")(classmethod(lambda cls, v: _node_labels(v)))

    def as_resources(self) -> dict[str, int]:
        return {k: to_milli(v) for k, v in self.limits.items()}


class LimitSchedule(Windowed):
    """Limits that replace a tenant's base ``limits`` while one of their ``windows`` is open."""

    windows: tuple[TimeWindow, ...] = Field(min_length=1)  # an entry without windows would always hold
    limits: dict[str, str] = Field(default_factory=dict)

    _limits = field_validator("limits", mode="before")(classmethod(lambda cls, v: _check_limits(v)))
    _windows = field_validator("windows", mode="before")(
        classmethod(lambda cls, v: _some_windows(v, SCHEDULE_ALWAYS))
    )


class TenantLimits(Settings):
    """What Spillway may add for one tenant's pods, overall (``limits``, or those of the first
    ``schedule`` entry whose window is open) and per scope."""

    limits: dict[str, str] = Field(default_factory=dict)
    scopes: tuple[LimitScope, ...] = ()
    schedule: tuple[LimitSchedule, ...] = ()

    _limits = field_validator("limits", mode="before")(classmethod(lambda cls, v: _check_limits(v)))

    def limits_at(self, now: datetime) -> dict[str, str]:
        """The limits in force at ``now``: the first open schedule entry's, else the base ones."""
        entry = next((e for e in self.schedule if e.active_at(now)), None)
        return dict(entry.limits) if entry is not None else dict(self.limits)

    def as_resources(self, now: datetime | None = None) -> dict[str, int]:
        limits = self.limits if now is None else self.limits_at(now)
        return {k: to_milli(v) for k, v in limits.items()}


class BufferPod(Settings):
    """The shape of one virtual pod of a configured buffer."""

    model_config = ConfigDict(populate_by_name=True)
    cpu: str | None = None
    memory: str | None = None
    gpu: str | None = Field(default=None, alias="nvidia.com/gpu")
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: tuple[dict[str, Any], ...] = ()

    @field_validator("cpu", "memory", "gpu", mode="before")
    @classmethod
    def _quantity(cls, value: Any) -> str | None:
        return None if value is None else _quantity_text(value)

    @field_validator("gpu")
    @classmethod
    def _whole_gpus(cls, value: str | None) -> str | None:
        """GPUs come whole: the API server refuses a pod asking for a fraction of an extended resource
        (pkg/apis/core/validation ValidateResourceQuantityValue, "must be an integer"), so a chunk of
        0.5 would hold room no pod could take, two chunks to a GPU."""
        if value is not None and to_milli(value) % 1000:
            raise ValueError(f"must be a whole number of GPUs, as a pod's request is: {value!r}"[:120])
        return value

    # a pod's nodeSelector the API server refuses otherwise: the buffer would only show short (no-group-fits)
    _labels = field_validator("node_selector")(classmethod(lambda cls, v: _node_labels(v)))

    @field_validator("tolerations", mode="before")
    @classmethod
    def _tolerations(cls, value: Any) -> Any:
        from pydantic import TypeAdapter

        from spillway.model.k8s import Toleration  # the API's own type checks each entry

        if not isinstance(value, list | tuple):
            raise ValueError("expected a list of tolerations")
        # validated as a list, so an error's path names the entry (tolerations.1.operator)
        checked = TypeAdapter(list[Toleration]).validate_python(list(value))
        return tuple(t.model_dump(by_alias=True, exclude_none=True) for t in checked)

    def requests(self) -> dict[str, str]:
        named = {"cpu": self.cpu, "memory": self.memory, "nvidia.com/gpu": self.gpu}
        return {k: v for k, v in named.items() if v is not None}


LEAVE_OUT_FOR_ALWAYS = "or leave windows out for always"
# a schedule entry has no always: its tenant's base limits are what holds outside every entry
SCHEDULE_ALWAYS = "the tenant's limits hold outside them: for always, set those instead of a schedule entry"


def _some_windows(value: Any, always: str = LEAVE_OUT_FOR_ALWAYS) -> Any:
    """``windows`` given is at least one window, wherever it is read (a configured buffer, a disruption
    budget, a tenant's schedule entry): an empty list could mean never as well as always. ``always`` says
    how to ask for always there: leaving ``windows`` out, or a tenant's base limits for a schedule
    entry, which needs windows."""
    if isinstance(value, list | tuple) and not value:
        raise ValueError(f"an empty list could mean never or always: list at least one window; {always}")
    return value


class BufferConfig(Windowed):
    """Spare capacity held by the clock: ``replicas`` virtual pods shaped like ``pod`` while one of
    ``windows`` is open (always, without windows; ``windows: []`` is refused: :func:`_some_windows`).
    README "Buffers"."""

    name: str = Field(min_length=1)
    pod: BufferPod
    replicas: int = Field(ge=0)

    _windows = field_validator("windows", mode="before")(classmethod(lambda cls, v: _some_windows(v)))


ConsolidationMode = Literal["off", "when-empty", "when-underutilized"]


def _budget_nodes(value: Any) -> str:
    """Karpenter's ``nodes``: a count (``3``) or a percentage of the group's nodes (``"10%"``)."""
    if isinstance(value, bool):
        raise ValueError('expected a count of nodes (3) or a percentage ("10%")')
    text = str(value).strip()
    number = text[:-1] if text.endswith("%") else text
    if not is_digits(number) or (text.endswith("%") and int(number) > 100):
        raise ValueError(f'expected a count of nodes (3) or a percentage 0-100% ("10%"), got {text!r}'[:120])
    return f"{int(number)}%" if text.endswith("%") else str(int(number))


# Karpenter's budget reasons: what kind of disruption a budget limits. Spillway drains an empty node
# (Empty) or moves the pods of a busy one, consolidation or make room (Underutilized); it never drifts.
BudgetReason = Literal["Empty", "Underutilized", "Drifted"]
EMPTY: BudgetReason = "Empty"
UNDERUTILIZED: BudgetReason = "Underutilized"


class DisruptionBudget(Windowed):
    """At most ``nodes`` (a count, or a percentage of the group's nodes, rounded up as Karpenter does)
    of each group in ``groups`` (empty: every group) disrupted at once, for the disruptions ``reasons``
    names (empty: all), while any of ``windows`` is active, or, as Karpenter writes it, for ``duration``
    after each run of the cron ``schedule`` (read in ``timezone``, UTC by default as in Karpenter);
    always without either (``windows: []`` is refused: :func:`_some_windows`). The most restrictive
    active budget binds."""

    nodes: str
    groups: tuple[str, ...] = ()
    reasons: tuple[BudgetReason, ...] = ()
    schedule: str | None = None
    duration: str | None = None
    timezone: str = "UTC"

    _nodes = field_validator("nodes", mode="before")(classmethod(lambda cls, v: _budget_nodes(v)))
    _windows = field_validator("windows", mode="before")(classmethod(lambda cls, v: _some_windows(v)))

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str | None) -> str | None:
        """A 5-field cron or a macro that runs at some time. One that never runs (``0 0 30 2 *``) is
        refused: Karpenter takes such a budget as always on (robfig/cron's ``Next`` answers the zero
        time when it finds no run within five years, robfig/cron spec.go, and ``Budget.IsActive`` reads
        a next run not after now as active, kubernetes-sigs/karpenter pkg/apis/v1/nodepool.go), while
        read here it would never be on: the same budget would bind there and not here."""
        if value is not None and not Cron.parse(CRON_MACROS.get(value.strip(), value)).runs_ever():
            raise ValueError(f"schedule {value!r} never runs: no month it names has that day of month"[:160])
        return value

    @field_validator("duration")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        """Above 0 and at most ten years (``MAX_MINUTES``, the bound of the ``*_minutes`` settings):
        every plan adds the duration to the clock, so a longer one (``99999999h``) or one too large for
        a float would make each plan fail instead of this file. Go's ``time.ParseDuration``, which
        Karpenter reads it with, refuses above about 2,562,047h anyway."""
        if value is None:
            return value
        minutes = parse_duration_minutes(value)
        if minutes <= 0:
            raise ValueError("a duration above 0 (10m, 8h, 1h30m)")
        if not math.isfinite(minutes) or minutes > MAX_MINUTES:
            raise ValueError(f"a duration of at most ten years ({MAX_MINUTES // 60}h)")
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        zone_of(value)
        return value

    # the schedule read once: its cron, the zone it is read in, how long each run keeps the budget on
    _timing: tuple[Cron, ZoneInfo, timedelta] | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _schedule_with_duration(self) -> DisruptionBudget:
        if (self.schedule is None) != (self.duration is None):
            raise ValueError("schedule and duration go together (Karpenter's rule): set both or neither")
        if self.schedule is not None and self.windows:
            raise ValueError("a budget is timed by windows or by schedule and duration, not both")
        if self.schedule is not None and self.duration is not None:
            cron = Cron.parse(CRON_MACROS.get(self.schedule.strip(), self.schedule))
            span = timedelta(minutes=parse_duration_minutes(self.duration))
            self._timing = (cron, zone_of(self.timezone), span)
        return self

    def applies_to(self, group: str, reason: str | None = None) -> bool:
        """Whether the budget limits ``group``'s disruptions (of ``reason``, when given)."""
        in_group = not self.groups or group in self.groups
        return in_group and (reason is None or not self.reasons or reason in self.reasons)

    def allowed(self, group_nodes: int) -> int:
        """Nodes of a group of ``group_nodes`` this budget lets be disrupted at once."""
        if self.nodes.endswith("%"):
            return -(-group_nodes * int(self.nodes[:-1]) // 100)  # rounded up (Karpenter)
        return int(self.nodes)

    def active_at(self, now: datetime) -> bool:
        if self._timing is None:
            return super().active_at(now)
        cron, zone, span = self._timing
        instant = aware(now)
        return next(cron_runs(cron, zone, instant - span + _TICK, instant), None) is not None

    def next_edge(self, after: datetime) -> datetime | None:
        """The first instant after ``after`` when the budget turns on or off: for a schedule, a run
        that turns it on or the end of a run's duration that turns it off, however far ahead
        (:func:`~spillway.model.schedule.next_change`: ``@monthly`` and ``@yearly`` too), or None
        when it never changes."""
        if self._timing is None:
            return super().next_edge(after)
        cron, zone, span = self._timing
        return next_change(cron, zone, span, aware(after))


_TICK = timedelta(microseconds=1)


def parse_range(text: str) -> tuple[int, int]:
    """cluster-autoscaler's ``min:max`` (``--cores-total 0:320000``): two integers, min <= max."""
    low, sep, high = text.partition(":")
    if not (is_digits(low.strip()) and is_digits(high.strip())):
        raise ValueError(f"expected <min>:<max> integers, got {text!r}")
    lo, hi = int(low), int(high)
    if not sep or lo < 0 or lo > hi:
        raise ValueError(f"expected 0 <= min <= max as <min>:<max>, got {text!r}")
    return lo, hi


def parse_gpu_range(text: str) -> tuple[str, int, int]:
    """``--gpu-total <type>:<min>:<max>``; the type may hold ``/`` (``nvidia.com/gpu:0:16``)."""
    kind, sep, rest = text.partition(":")
    if not kind or not sep:
        raise ValueError(f"expected <type>:<min>:<max>, got {text!r}")
    low, high = parse_range(rest)
    return kind, low, high


def _range_or_none(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value)
    parse_range(text)
    return text


def _gpu_ranges(value: Any) -> tuple[str, ...]:
    """``["<type>:<min>:<max>", ...]`` (one string alone too); anything else (a number, a boolean, a
    mapping) is refused, not iterated nor taken for no total."""
    if value is None:
        return ()
    if not isinstance(value, str | list | tuple):
        raise ValueError(f'expected a list of "<type>:<min>:<max>", got {value!r}'[:120])
    items = [value] if isinstance(value, str) else list(value)
    for item in items:
        parse_gpu_range(str(item))
    return tuple(str(i) for i in items)


def _minutes(default: float) -> Any:
    return Field(default=default, ge=0, le=MAX_MINUTES, allow_inf_nan=False)


class PlannerConfig(Settings):
    cluster: str | None = None
    regions: tuple[str, ...] = ()
    scale_down_idle_minutes: float = _minutes(10)
    scale_down_delay_after_launch_minutes: float = _minutes(10)
    # cluster-autoscaler's --scale-down-delay-after-delete: after a plan that drained a node to remove it,
    # later plans drain no node to remove it for this long (0: the next plan may, as cluster-autoscaler's
    # default, its scan interval, lets its next loop)
    scale_down_delay_after_delete_minutes: float = _minutes(0)
    # cluster-autoscaler's --scale-down-delay-after-failure: after a plan's scale-down drain failed (it
    # timed out or a step failed, its node given back), no node is drained to remove it for this long
    scale_down_delay_after_failure_minutes: float = _minutes(3)
    max_scale_in_fraction: float = Field(default=0.1, ge=0, le=1, allow_inf_nan=False)
    # cluster-autoscaler's --max-bulk-soft-taint-count: at most this many nodes a plan gives the
    # PreferNoSchedule scale-down candidate taint (spillway.planner.softtaint); 0: none
    max_bulk_soft_taint_count: int = Field(default=10, ge=0, le=10_000)
    launch_failure_backoff_minutes: float = _minutes(15)
    # cluster-autoscaler's --max-node-provision-time: an instance no Node has joined for this long is
    # not capacity coming; its group backs off and the plan removes it (spillway.planner.joins)
    max_node_provision_minutes: float = Field(default=15, gt=0, le=MAX_MINUTES, allow_inf_nan=False)
    # cluster-autoscaler's --max-node-startup-time: a registered node not Ready, or Ready but not
    # initialized (spillway.planner.startup), counts as launching this long after it was created; 0: never
    max_node_startup_minutes: float = _minutes(15)
    # cluster-autoscaler's --scale-down-unready-time: an unready node (NotReady, or Ready and never
    # initialized) idle this long is drained, in place of scale_down_idle_minutes; and a pod that never
    # started on a node NotReady this long is no work (spillway.planner.scaledown._not_ready)
    scale_down_unready_minutes: float = _minutes(20)
    # cluster-autoscaler's --balance-similar-node-groups and --balancing-ignore-label: a class's new
    # nodes are spread over the groups of one region whose template nodes differ only in zone and the
    # ignored labels, smallest group first (spillway.planner.scaleup)
    balance_similar_node_groups: bool = False
    balancing_ignore_labels: tuple[Annotated[str, Field(min_length=1, max_length=317)], ...] = ()
    # cluster-autoscaler's --startup-taint, Karpenter's NodePool startupTaints: a Ready node carrying one
    # of these taint keys is still starting (capacity launching), as is one with cluster-autoscaler's
    # startup-taint prefix or without the GPUs its template has (spillway.planner.startup)
    startup_taints: tuple[Annotated[str, Field(min_length=1, max_length=317)], ...] = ()
    # cluster-autoscaler's --ok-total-unready-count and --max-total-unready-percentage: with more unready
    # nodes than both, the cluster removes nothing and a group gets no new nodes (spillway.planner.health)
    ok_total_unready_count: int = Field(default=3, ge=0, le=100_000)
    max_total_unready_percentage: float = Field(default=45, ge=0, le=100, allow_inf_nan=False)
    # A drained node is not planned again for this long: its drain (deadline 15 min) owns it.
    drain_claim_minutes: float = _minutes(20)
    # The deadline of a plan's drains (the functions set it from DRAIN_DEADLINE_SECONDS, which the
    # scale-down passes every drain): a pod already terminating is counted on as leaving only when its
    # grace period ends within it (spillway.planner.disruption.leaving_within), since the drain waits
    # for such a pod and fails at its deadline.
    drain_deadline_seconds: float = Field(default=900, gt=0, le=MAX_DEADLINE_SECONDS, allow_inf_nan=False)
    # A node still carrying Spillway's cordon this long after it was made has no drain that owns it
    # (a DrainNode execution ends within 26 h): the planner finishes or restores it. Above 26 h.
    orphaned_drain_minutes: float = Field(default=1620, gt=0, le=MAX_MINUTES, allow_inf_nan=False)
    expendable_priority_cutoff: int = -10
    # A gang launched atomically is not scaled for again this long (unless its group backs off): in
    # fleet mode its instances are not in the group until attached. Above the gang deadline (10 min).
    gang_launch_minutes: float = _minutes(15)
    # A fleet-mode gang's instance still outside every Auto Scaling group this long after its launch was
    # left there by its execution (stopped, timed out, a GiveBack that failed for good): it is terminated,
    # unless its Node runs work (spillway.planner.gangsweep). At least the gang deadline
    # (GANG_DEADLINE_SECONDS, 10 min) plus the time its steps may retry (spillway.runtime refuses less):
    # an execution attaches its fleet only before its deadline, a step's retries ending within 20 minutes.
    gang_orphan_minutes: float = Field(default=60, gt=0, le=MAX_MINUTES, allow_inf_nan=False)
    # A raise a plan made is assumed under way this long when a later snapshot does not show it yet
    # (State.raises): snapshots taken before it landed must not scale the same pods again.
    scale_up_claim_minutes: float = _minutes(5)
    # cluster-autoscaler's --node-info-cache-expire-time: a group's template learned from a node of its
    # own is remembered (State.templates) for a group with no such node until it is this old; 0: not at
    # all. A week, not cluster-autoscaler's ten years: its cache lives in memory and a restart clears it,
    # Spillway's state forgets nothing by itself, and a launch template's AMI or kubelet may change.
    node_info_cache_minutes: float = _minutes(7 * 24 * 60)
    node_reserve: NodeReserve = Field(default_factory=NodeReserve)
    # -- the shared cluster: tenant limits and cluster totals (README "Tenants, limits and gangs") --
    tenants: dict[str, TenantLimits] = Field(default_factory=dict)
    max_nodes_total: int = Field(default=0, ge=0)  # 0: no limit, as cluster-autoscaler's flag
    cores_total: str | None = None  # "<min>:<max>" cores
    memory_total: str | None = None  # "<min>:<max>" GiB
    gpu_total: tuple[str, ...] = ()  # "<type>:<min>:<max>", repeatable
    # cluster-autoscaler's priority expander (its ConfigMap's ``priorities``, as written there): within a
    # region, the groups whose names match a regex of the highest priority are tried first; a group no
    # regex matches comes after every group that one does
    expander_priorities: dict[int, tuple[str, ...]] = Field(default_factory=dict)
    # -- consolidation (README "Consolidation"); a group's spillway.io/consolidation tag overrides --
    consolidation: ConsolidationMode = "when-empty"
    disruption_budgets: tuple[DisruptionBudget, ...] = ()
    consolidation_restart_minutes: float = _minutes(10)  # the time a moved pod loses
    consolidation_horizon_minutes: float = Field(default=60, gt=0, le=MAX_MINUTES, allow_inf_nan=False)
    # cluster-autoscaler's --scale-down-utilization-threshold: only a node whose requests use at most this
    # share (its dominant resource) of its allocatable is a consolidation candidate
    consolidation_utilization_threshold: float = Field(default=0.5, ge=0, le=1, allow_inf_nan=False)
    # cluster-autoscaler's --scale-down-gpu-utilization-threshold: set, a node with GPUs is judged by the
    # share of its GPUs requested alone, against this; unset, like any node (its dominant resource)
    consolidation_gpu_utilization_threshold: float | None = Field(
        default=None, ge=0, le=1, allow_inf_nan=False
    )
    # cluster-autoscaler's --ignore-daemonsets-utilization: DaemonSet pods' requests are left out of a
    # node's utilization
    ignore_daemonsets_utilization: bool = False
    # cluster-autoscaler's --daemonset-eviction-for-empty-nodes and --daemonset-eviction-for-occupied-nodes:
    # whether a drain that terminates its node (a plan's, one by hand) evicts its DaemonSet pods (once, best effort, not waited for)
    # after the other pods are gone, when the drain evicted none / some; the pod annotation
    # cluster-autoscaler.kubernetes.io/enable-ds-eviction overrides both (spillway.act.drain)
    daemonset_eviction_for_empty_nodes: bool = False
    daemonset_eviction_for_occupied_nodes: bool = True
    # Karpenter's consolidateAfter, cluster-autoscaler's --scale-down-unneeded-time for busy nodes: a node
    # is consolidated only once it has been a candidate (underutilized, its pods movable) this long
    consolidation_after_minutes: float = _minutes(0)
    # in a group that consolidates, a busy node whose pods that may not move all started less than this
    # long ago is marked a scale-down candidate too (spillway.planner.softtaint): work that has run a
    # short while more often ends soon than work that has run long, so new pods fill the nodes whose
    # pinned work has run longer first; 0 marks no such node
    consolidation_recent_pods_minutes: float = _minutes(30)
    # -- capacity by the clock: spare room held as virtual pods (README "Buffers") --
    buffers: tuple[BufferConfig, ...] = ()

    _cores = field_validator("cores_total", "memory_total", mode="before")(
        classmethod(lambda cls, v: _range_or_none(v))
    )
    _gpus = field_validator("gpu_total", mode="before")(classmethod(lambda cls, v: _gpu_ranges(v)))

    @field_validator("drain_deadline_seconds")
    @classmethod
    def _whole_drain_deadline(cls, value: float) -> float:
        """The scale-down gives every drain this deadline in whole seconds (its Wait states', rounded as
        the functions round it): one that rounds to 0 is refused as 0 itself is, here for ``spillway plan
        --config`` and the functions' DRAIN_DEADLINE_SECONDS alike."""
        if round(value) < 1:
            raise ValueError(
                f"{value:g} is 0 whole seconds, the deadline every drain of a scale-down would get (its Wait "
                "states take whole seconds): at least 1"
            )
        return value

    @field_validator("consolidation", mode="before")
    @classmethod
    def _consolidation(cls, value: Any) -> Any:
        """YAML 1.1 (PyYAML) reads an unquoted ``off`` (and ``no``, ``false``) as the boolean false:
        say so, instead of asking for the ``off`` that was written."""
        if isinstance(value, bool):
            words = "on, yes or true" if value else "off, no or false"
            raise ValueError(
                f"YAML reads an unquoted {words} as the boolean {str(value).lower()}: "
                "write 'off', 'when-empty' or 'when-underutilized', quoted"
            )
        return value

    @field_validator("expander_priorities", mode="before")
    @classmethod
    def _priorities(cls, value: Any) -> Any:
        return check_priorities(value) if isinstance(value, dict) else value

    @field_validator("buffers")
    @classmethod
    def _unique_buffers(cls, value: tuple[BufferConfig, ...]) -> tuple[BufferConfig, ...]:
        names = [b.name for b in value]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"buffer name {twice[0]!r} is used twice")
        return value

    def with_options(self, options: Sequence[tuple[str, float | bool]]) -> PlannerConfig:
        """This configuration as a group's autoscaling-options tags override it for the group's nodes
        (spillway.model.options: already read and range-checked, by setting name)."""
        return self.model_copy(update=dict(options)) if options else self

    def windowed(self) -> list[Windowed]:
        """Every setting that holds by the clock: buffers, disruption budgets, tenants' limit schedules."""
        items: list[Windowed] = [*self.buffers, *self.disruption_budgets]
        for name in sorted(self.tenants):
            items.extend(self.tenants[name].schedule)
        return items

    def next_window_edge(self, after: datetime) -> datetime | None:
        """The first instant after ``after`` when one of :meth:`windowed` turns on or off (each on its
        own: a tenant's first open schedule entry can change while another stays open), or None."""
        edges = [edge for item in self.windowed() if (edge := item.next_edge(after)) is not None]
        return min(edges, default=None)


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping that gives one key twice. PyYAML keeps the last value
    and drops the first without a word (a tenant written twice lost its first limits); the YAML spec
    wants a mapping's keys unique, and go-yaml v3, which Kubernetes tools read YAML with, refuses them
    (go-yaml/yaml#751: v3 always checks unique keys). Keys a merge (``<<``) brings may be overridden.

    A mapping's own keys are checked when PyYAML first flattens it (SafeConstructor.flatten_mapping),
    before the pairs a ``<<`` brings are spliced into the node in place: a mapping used as a merge
    source is flattened before it is built itself, and its node then holds the merged and the own
    pairs, which are no repeat. Every scalar key counts (null and dates too, which a dict also folds)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._checked: set[int] = set()  # nodes live as long as the loader: their ids stay unique

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        if id(node) not in self._checked:
            self._checked.add(id(node))
            self._refuse_repeated_keys(node)
        super().flatten_mapping(node)

    def _refuse_repeated_keys(self, node: yaml.MappingNode) -> None:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"key {key!r} is given twice (lines {seen[key]} and {line})"[:200],
                    key_node.start_mark,
                )
            seen.setdefault(key, line)


def _read_document(path: str | Path) -> Any:
    source = str(path)
    try:
        return yaml.load(Path(path).read_bytes().decode("utf-8"), Loader=_UniqueKeyLoader)
    except OSError as exc:
        raise ConfigurationError(exc.strerror or "cannot be read", source=source) from None
    except UnicodeDecodeError as exc:
        raise ConfigurationError(f"not UTF-8 text (byte {exc.start})", source=source) from None
    except yaml.YAMLError as exc:
        first = f"{exc}".splitlines()[0] if f"{exc}" else type(exc).__name__
        raise ConfigurationError(f"not valid YAML or JSON: {first}", source=source) from None
    except RecursionError:
        raise ConfigurationError("not usable YAML or JSON: nested too deeply", source=source) from None
    except ValueError as exc:  # an integer of more digits than Python converts (4300)
        raise ConfigurationError(f"not usable YAML or JSON: {exc}", source=source) from None


def load_config_file(path: str | Path) -> PlannerConfig:
    """The planner configuration in a YAML or JSON file; :class:`ConfigurationError` naming the field."""
    from pydantic import ValidationError

    raw = _read_document(path) or {}
    if not isinstance(raw, dict):
        raise ConfigurationError("expected a mapping of config keys", source=str(path), field="top level")
    try:
        return PlannerConfig.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "top level"
        msg = "unknown config key" if err["type"] == "extra_forbidden" else err["msg"]
        raise ConfigurationError(msg, source=str(path), field=where) from None
