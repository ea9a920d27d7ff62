"""The Lambdas' configuration, from environment variables. Only handlers call :func:`load_runtime_config`.

=====================================  ==========================================================
variable                               meaning (default)
=====================================  ==========================================================
``CLUSTER_NAME``                       the Kubernetes cluster (required)
``REGIONS``                            comma list of regions, primary first (required)
``SNAPSHOTS_TABLE``                    DynamoDB snapshots table (required)
``PLANS_TABLE``                        DynamoDB plans table (required)
``STATE_TABLE``                        DynamoDB state table (required)
``CLUSTER_ACCESS``                     ``eks`` (DescribeCluster + IAM token), ``secret`` or ``url`` (``eks``)
``KUBECONFIG_SECRET_ID``               Secrets Manager id of a kubeconfig (required for ``secret``)
``KUBE_URL``                           a plain API URL: the local emulator (required for ``url``)
``IDEMPOTENCY_TABLE``                  Powertools idempotency table (plan function)
``SCALE_UP_STATE_MACHINE_ARN`` / ``SCALE_DOWN_STATE_MACHINE_ARN``   state machines the plan starts
``GANG_LAUNCH_STATE_MACHINE_ARN``      the gang-launch state machine the plan starts for atomic gangs
``GANG_DEADLINE_SECONDS``              gang launch: the whole gang Ready by then, else given back (600)
``GANG_POLL_SECONDS``                  gang launch: between checks (15); at most 2,000 checks until the
                                       deadline (an execution's history: :mod:`spillway.model.history`)
``DRAIN_NODE_STATE_MACHINE_ARN``       the DrainNode state machine the interrupt function starts
``INTERRUPTION_DEADLINE_SECONDS``      interrupt: drain deadline after a Spot warning's time (90)
``REBALANCE_DEADLINE_SECONDS``         interrupt: drain deadline after a rebalance recommendation (600)
``LIFECYCLE_DEADLINE_SECONDS``         interrupt: longest drain for a terminate lifecycle action (600)
``SCHEDULED_MARGIN_SECONDS``           interrupt: a scheduled change's drain ends this long before it (300)
``INTERRUPT_POLL_SECONDS``             interrupt: seconds between eviction rounds (5)
``INTERRUPTION_BACKOFF_MINUTES``       interrupt: back-off of an interrupted type in its zone (15)
``LIFECYCLE_HOOK_NAMES``               interrupt, drain: comma list of the terminate lifecycle hooks
                                       Spillway owns, drains for and completes; any other is its
                                       owner's (``drain-before-terminate``); observe, scale: a group
                                       with one is not flagged for AZRebalance
``MAX_SNAPSHOT_AGE_SECONDS``           the plan refuses older snapshots (180)
``SCALE_UP_POLL_SECONDS``              scale-up: between launch checks (15)
``LAUNCH_TIMEOUT_SECONDS``             scale-up: a launch not Ready by then failed (600); a group's
                                       longer ``maxnodeprovisiontime`` tag gives it longer
``SCALE_UP_MAX_ROUNDS``                scale-up: first attempt and overflow re-plans (3); its rounds' checks
                                       (poll, launch timeout) must fit an execution's history
``DRAIN_DEADLINE_SECONDS`` / ``DRAIN_POLL_SECONDS``   drains (900 / 15); the deadline is the planner's
                                       ``drain_deadline_seconds`` too (not from ``PLANNER_CONFIG``)
``PLAN_TTL_DAYS``                      plans expire after (30; at most 36,500)
``POD_EVENTS_MAX_PER_PLAN``            pod Events one plan posts at most; 0 posts none (50)
``POD_EVENTS_WINDOW_MINUTES``          a pod is not told the same thing again within (10)
``POD_EVENTS_LEDGER_SIZE``             pods whose last Event the state remembers (2000)
``POD_EVENTS_BUDGET_SECONDS``          the plan stops posting Events after (10)
``OBSERVE_INTERVAL_SECONDS``           seconds between observations in one invocation (20)
``OBSERVE_WINDOW_SECONDS``             how long one invocation keeps observing (50)
``HEARTBEAT_MINUTES``                  store an unchanged snapshot this often (5)
``SNAPSHOT_TTL_HOURS``                 snapshots expire after (24; at most 876,000)
``SNAPSHOT_CODEC``                     ``zlib`` or ``lzma`` (``zlib``)
``ACTIVITY_WINDOW_MINUTES``            scaling activities read back this far (30; at most 60,480: the six
                                       weeks AWS keeps them)
``AWS_MAX_ATTEMPTS``                   SDK attempts, adaptive retry mode (3)
``AWS_CONNECT_TIMEOUT`` / ``AWS_READ_TIMEOUT``   SDK timeouts in seconds (3 / 7; at most 900); with
                                       the attempts, one call at its longest must fit twice in a
                                       scale step (:mod:`spillway.model.calltime`)
``PLANNER_CONFIG``                     the planner configuration as a JSON object, the keys of
                                       ``spillway plan --config`` (tenants, cluster totals, ...) (``{}``)
``SCALE_DOWN_IDLE_MINUTES`` ...        planner keys, upper-cased (``_PLANNER_FIELDS``: the stack's
                                       thresholds, ``DRAIN_CLAIM_MINUTES``, ``ORPHANED_DRAIN_MINUTES``,
                                       ``GANG_LAUNCH_MINUTES``); ``NODE_RESERVE_CPU``/``_MEMORY``; each
                                       overrides the same key in ``PLANNER_CONFIG`` (README: a row each)
=====================================  ==========================================================

Numbers are finite (no ``inf`` or ``nan``). Errors are :class:`~spillway.errors.ConfigurationError`
naming the variable; values are never echoed for variables that might hold secrets.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from spillway.config import PlannerConfig
from spillway.errors import ConfigurationError
from spillway.model.aws import REGION_FORM
from spillway.model.calltime import MAX_ATTEMPTS, step_refusal
from spillway.model.drain import (
    DEFAULT_LIFECYCLE_HOOKS,
    HOOK_NAME_PATTERN,
    MAX_DEADLINE_SECONDS,
    MAX_POLL_SECONDS,
)
from spillway.model.history import drain_refusal, gang_refusal, scale_up_refusal

if TYPE_CHECKING:
    from spillway.observe import ObserveConfig

_REGION = re.compile(REGION_FORM)  # a region as the rest of the code reads one

# variable → field of RuntimeConfig
_RUNTIME_VARS: dict[str, str] = {
    "CLUSTER_NAME": "cluster_name",
    "REGIONS": "regions",
    "SNAPSHOTS_TABLE": "snapshots_table",
    "PLANS_TABLE": "plans_table",
    "STATE_TABLE": "state_table",
    "CLUSTER_ACCESS": "cluster_access",
    "KUBECONFIG_SECRET_ID": "kubeconfig_secret_id",
    "KUBE_URL": "kube_url",
    "IDEMPOTENCY_TABLE": "idempotency_table",
    "SCALE_UP_STATE_MACHINE_ARN": "scale_up_state_machine_arn",
    "SCALE_DOWN_STATE_MACHINE_ARN": "scale_down_state_machine_arn",
    "GANG_LAUNCH_STATE_MACHINE_ARN": "gang_launch_state_machine_arn",
    "GANG_DEADLINE_SECONDS": "gang_deadline_seconds",
    "GANG_POLL_SECONDS": "gang_poll_seconds",
    "DRAIN_NODE_STATE_MACHINE_ARN": "drain_node_state_machine_arn",
    "INTERRUPTION_DEADLINE_SECONDS": "interruption_deadline_seconds",
    "REBALANCE_DEADLINE_SECONDS": "rebalance_deadline_seconds",
    "LIFECYCLE_DEADLINE_SECONDS": "lifecycle_deadline_seconds",
    "LIFECYCLE_HOOK_NAMES": "lifecycle_hook_names",
    "SCHEDULED_MARGIN_SECONDS": "scheduled_margin_seconds",
    "INTERRUPT_POLL_SECONDS": "interrupt_poll_seconds",
    "INTERRUPTION_BACKOFF_MINUTES": "interruption_backoff_minutes",
    "MAX_SNAPSHOT_AGE_SECONDS": "max_snapshot_age_seconds",
    "SCALE_UP_POLL_SECONDS": "scale_up_poll_seconds",
    "LAUNCH_TIMEOUT_SECONDS": "launch_timeout_seconds",
    "SCALE_UP_MAX_ROUNDS": "scale_up_max_rounds",
    "DRAIN_DEADLINE_SECONDS": "drain_deadline_seconds",
    "DRAIN_POLL_SECONDS": "drain_poll_seconds",
    "PLAN_TTL_DAYS": "plan_ttl_days",
    "POD_EVENTS_MAX_PER_PLAN": "pod_events_max_per_plan",
    "POD_EVENTS_WINDOW_MINUTES": "pod_events_window_minutes",
    "POD_EVENTS_LEDGER_SIZE": "pod_events_ledger_size",
    "POD_EVENTS_BUDGET_SECONDS": "pod_events_budget_seconds",
    "OBSERVE_INTERVAL_SECONDS": "observe_interval_seconds",
    "OBSERVE_WINDOW_SECONDS": "observe_window_seconds",
    "HEARTBEAT_MINUTES": "heartbeat_minutes",
    "SNAPSHOT_TTL_HOURS": "snapshot_ttl_hours",
    "SNAPSHOT_CODEC": "snapshot_codec",
    "ACTIVITY_WINDOW_MINUTES": "activity_window_minutes",
    "AWS_MAX_ATTEMPTS": "aws_max_attempts",
    "AWS_CONNECT_TIMEOUT": "aws_connect_timeout",
    "AWS_READ_TIMEOUT": "aws_read_timeout",
}
_FIELD_VARS = {field: var for var, field in _RUNTIME_VARS.items()}
_PLANNER_FIELDS = (
    "scale_down_idle_minutes",
    "scale_down_delay_after_launch_minutes",
    "max_scale_in_fraction",
    "launch_failure_backoff_minutes",
    "max_node_provision_minutes",
    "expendable_priority_cutoff",
    "drain_claim_minutes",
    "orphaned_drain_minutes",
    "gang_launch_minutes",
    # the deadline the scale-down gives every drain (DRAIN_DEADLINE_SECONDS, a runtime variable too): the
    # planner counts on a terminating pod's room only when it is gone by then
    "drain_deadline_seconds",
)
PLANNER_CONFIG_VAR = "PLANNER_CONFIG"
# planner keys set from a variable alone, never from PLANNER_CONFIG
_FROM_VARIABLES = {
    "cluster": "CLUSTER_NAME",
    "regions": "REGIONS",
    "drain_deadline_seconds": "DRAIN_DEADLINE_SECONDS (the drains' own deadline)",
}
# How long after its deadline a gang execution may still attach its fleet: an Attach started at the
# deadline, its Lambda and AwsThrottled retries (gang_launch.asl.json) included, ends well within it.
GANG_RETRY_MINUTES = 20
_REQUIRED = ("CLUSTER_NAME", "REGIONS", "SNAPSHOTS_TABLE", "PLANS_TABLE", "STATE_TABLE")


# the held-by-limits alarm's period (template.yaml, HeldByLimitsAlarm): a plan must come in each
PLAN_PERIOD_SECONDS = 600


# the longest durations a clock or a socket takes: a century of retention (an item's expiry stays a
# date), the six weeks of scaling activities DescribeScalingActivities keeps, and an SDK timeout within
# the 15 minutes a Lambda function may run
MAX_TTL_DAYS = 36_500
MAX_ACTIVITY_WINDOW_MINUTES = 6 * 7 * 24 * 60
MAX_AWS_TIMEOUT_SECONDS = 900


class RuntimeConfig(BaseModel):
    # no inf or nan: no duration is endless (an endless TTL or timeout fails at its first use, unnamed)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    cluster_name: str = Field(min_length=1, max_length=100)
    regions: tuple[str, ...] = Field(min_length=1)
    snapshots_table: str = Field(min_length=3)
    plans_table: str = Field(min_length=3)
    state_table: str = Field(min_length=3)
    cluster_access: Literal["eks", "secret", "url"] = "eks"
    kubeconfig_secret_id: str | None = None
    kube_url: str | None = None
    idempotency_table: str | None = None
    scale_up_state_machine_arn: str | None = None
    scale_down_state_machine_arn: str | None = None
    gang_launch_state_machine_arn: str | None = None
    gang_deadline_seconds: float = Field(default=600, ge=1, le=86_400)  # GangRequest's bounds
    gang_poll_seconds: float = Field(default=15, ge=0, le=86_400)
    drain_node_state_machine_arn: str | None = None
    # A Spot warning comes two minutes before EC2 reclaims the instance: the drain must end before.
    interruption_deadline_seconds: int = Field(default=90, ge=0, le=115)
    rebalance_deadline_seconds: int = Field(default=600, ge=0, le=86_400)
    # A terminate lifecycle action's drain: at most this, and always inside the hook's HeartbeatTimeout.
    lifecycle_deadline_seconds: int = Field(default=600, ge=0, le=7_200)
    # The terminate hooks Spillway owns: another team's hook on the same group is never completed.
    lifecycle_hook_names: tuple[
        Annotated[str, Field(min_length=1, max_length=255, pattern=HOOK_NAME_PATTERN)], ...
    ] = Field(default=DEFAULT_LIFECYCLE_HOOKS, min_length=1)
    scheduled_margin_seconds: int = Field(default=300, ge=0, le=86_400)
    interrupt_poll_seconds: int = Field(default=5, ge=1, le=60)
    interruption_backoff_minutes: float = Field(default=15, ge=0, le=1440)
    max_snapshot_age_seconds: float = Field(default=180, gt=0)
    # the scale-up execution's input carries both in whole seconds, 1 s to a day (spillway.model.scale)
    scale_up_poll_seconds: float = Field(default=15, gt=0, le=86_400)
    launch_timeout_seconds: float = Field(default=600, ge=1, le=86_400)
    scale_up_max_rounds: int = Field(default=3, ge=1, le=10)
    # every drain of a scale-down carries both in whole seconds, within a drain request's bounds
    drain_deadline_seconds: float = Field(default=900, gt=0, le=MAX_DEADLINE_SECONDS)
    drain_poll_seconds: float = Field(default=15, gt=0, le=MAX_POLL_SECONDS)
    plan_ttl_days: float = Field(default=30, gt=0, le=MAX_TTL_DAYS)
    pod_events_max_per_plan: int = Field(default=50, ge=0, le=1000)
    pod_events_window_minutes: float = Field(default=10, ge=0, le=1440)
    pod_events_ledger_size: int = Field(default=2000, ge=0, le=20000)
    pod_events_budget_seconds: float = Field(default=10, gt=0, le=30)
    observe_interval_seconds: float = Field(default=20, gt=0, le=300)
    observe_window_seconds: float = Field(default=50, ge=0, le=900)
    heartbeat_minutes: float = Field(default=5, gt=0)
    snapshot_ttl_hours: float = Field(default=24, gt=0, le=MAX_TTL_DAYS * 24)
    snapshot_codec: Literal["zlib", "lzma"] = "zlib"
    activity_window_minutes: float = Field(default=30, gt=0, le=MAX_ACTIVITY_WINDOW_MINUTES)
    # one call at its longest fits twice in a scale step (spillway.model.calltime.step_refusal)
    aws_max_attempts: int = Field(default=3, ge=1, le=MAX_ATTEMPTS)
    aws_connect_timeout: float = Field(default=3, gt=0, le=MAX_AWS_TIMEOUT_SECONDS)
    aws_read_timeout: float = Field(default=7, gt=0, le=MAX_AWS_TIMEOUT_SECONDS)
    planner: PlannerConfig = Field(default_factory=PlannerConfig)

    @model_validator(mode="after")
    def _check(self) -> RuntimeConfig:
        for region in self.regions:
            if not _REGION.fullmatch(region):
                raise ValueError(f"regions: not a region name: {region!r}")
        if len(set(self.regions)) != len(self.regions):
            raise ValueError("regions: a region is listed twice")
        if self.cluster_access == "secret" and not self.kubeconfig_secret_id:
            raise ValueError("kubeconfig_secret_id: required when CLUSTER_ACCESS is secret")
        if self.cluster_access == "url" and not self.kube_url:
            raise ValueError("kube_url: required when CLUSTER_ACCESS is url")
        self._check_poll_loops()
        self._check_call_time()
        if self.heartbeat_minutes * 60 + self.observe_interval_seconds > PLAN_PERIOD_SECONDS:
            raise ValueError(
                f"heartbeat_minutes: {self.heartbeat_minutes:g} minutes plus one observation "
                f"({self.observe_interval_seconds:g} s) is more than 10 minutes: while nothing changes a plan "
                "comes only per heartbeat, and the held-by-limits alarm needs one in every 10-minute period"
            )
        return self

    def _check_call_time(self) -> None:
        """One AWS call at its longest, with the SDK settings, fits twice in a scale step: a raise marker
        is written only with time to ask the raise or give the marker back (spillway.act.deadline).
        The variable named is the first of the three set above its default, else the first set
        (AWS_MAX_ATTEMPTS when none was)."""
        refusal = step_refusal(self.aws_max_attempts, self.aws_connect_timeout, self.aws_read_timeout)
        if refusal:
            names = ("aws_max_attempts", "aws_read_timeout", "aws_connect_timeout")
            fields = type(self).model_fields
            set_ = [n for n in names if n in self.model_fields_set]
            raised = [n for n in set_ if getattr(self, n) > fields[n].default]  # what made it longer
            field = next(iter(raised or set_), names[0])
            raise ValueError(f"{field}: {refusal}")

    def _check_poll_loops(self) -> None:
        """The scale-up's, the gang launch's and the scale-down's drains' poll loops fit an execution's
        history (:mod:`spillway.model.history`), with the whole seconds their Wait states take."""
        scale_up = scale_up_refusal(
            self.launch_timeout_seconds, round(self.scale_up_poll_seconds), self.scale_up_max_rounds
        )
        if scale_up:
            raise ValueError(f"scale_up_poll_seconds: {scale_up}")
        gang = gang_refusal(self.gang_deadline_seconds, round(self.gang_poll_seconds))
        if gang:
            raise ValueError(f"gang_poll_seconds: {gang}")
        drain = drain_refusal(round(self.drain_deadline_seconds), round(self.drain_poll_seconds))
        if drain:
            raise ValueError(f"drain_poll_seconds: {drain}")
        attach_by = self.gang_deadline_seconds / 60 + GANG_RETRY_MINUTES
        if self.planner.gang_orphan_minutes < attach_by:
            raise ValueError(
                f"planner_config: gang_orphan_minutes {self.planner.gang_orphan_minutes:g} is below the gang deadline "
                f"(GANG_DEADLINE_SECONDS {self.gang_deadline_seconds:g}) plus {GANG_RETRY_MINUTES} minutes of "
                f"its steps' retries ({attach_by:g} min): a launch still under way could be swept"
            )
        if self.planner.gang_launch_minutes * 60 < self.gang_deadline_seconds:
            raise ValueError(
                f"gang_launch_minutes: {self.planner.gang_launch_minutes:g} is below the gang deadline "
                f"(GANG_DEADLINE_SECONDS {self.gang_deadline_seconds:g}): a plan would launch a gang again "
                "while its first launch is still under way"
            )

    @property
    def primary_region(self) -> str:
        return self.regions[0]

    @property
    def snapshot_ttl(self) -> timedelta:
        return timedelta(hours=self.snapshot_ttl_hours)

    @property
    def plan_ttl(self) -> timedelta:
        return timedelta(days=self.plan_ttl_days)

    @property
    def activity_window(self) -> timedelta:
        return timedelta(minutes=self.activity_window_minutes)

    def observe_config(self) -> ObserveConfig:
        from spillway.observe import ObserveConfig

        return ObserveConfig(
            cluster=self.cluster_name,
            interval_seconds=self.observe_interval_seconds,
            heartbeat_minutes=self.heartbeat_minutes,
            node_reserve=self.planner.node_reserve,
            expendable_priority_cutoff=self.planner.expendable_priority_cutoff,
            carry_unread_minutes=self.planner.max_node_provision_minutes,
        )


_PLANNER_VARS: dict[str, str] = {name.upper(): name for name in _PLANNER_FIELDS}
_RESERVE_VARS: dict[str, str] = {"NODE_RESERVE_CPU": "cpu", "NODE_RESERVE_MEMORY": "memory"}


def load_runtime_config(environ: Mapping[str, str] | None = None) -> RuntimeConfig:
    """Read and check the environment; :class:`ConfigurationError` names the offending variable."""
    env = os.environ if environ is None else environ
    for var in _REQUIRED:
        if not _value(env, var):
            raise ConfigurationError("required but not set", field=var)
    raw = _set_fields(env, _RUNTIME_VARS)
    raw["regions"] = _names(env["REGIONS"])
    if "lifecycle_hook_names" in raw:
        raw["lifecycle_hook_names"] = _names(raw["lifecycle_hook_names"])
    raw["cluster_access"] = raw.get("cluster_access", "eks").lower()
    raw["planner"] = _planner_config(env, raw["cluster_name"], raw["regions"])
    try:
        return RuntimeConfig.model_validate(raw)
    except ValidationError as exc:
        raise _runtime_error(exc) from None


def _names(text: str) -> tuple[str, ...]:
    """A comma list, blanks around each item dropped (and empty items)."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


def _value(env: Mapping[str, str], var: str) -> str:
    """The variable's value without surrounding blanks; "" when unset."""
    return env.get(var, "").strip()


def _set_fields(env: Mapping[str, str], fields: Mapping[str, str]) -> dict[str, Any]:
    """field → value, for each variable of ``fields`` (variable → field) that is set."""
    return {field: value for var, field in fields.items() if (value := _value(env, var))}


def _planner_config(env: Mapping[str, str], cluster: str, regions: tuple[str, ...]) -> PlannerConfig:
    document = _planner_document(env)
    planner: dict[str, Any] = {**document, "cluster": cluster, "regions": regions,
                               **_set_fields(env, _PLANNER_VARS)}  # fmt: skip
    reserve = _set_fields(env, _RESERVE_VARS)
    if reserve:
        # the variables over the document's keys; a document value that is no mapping is left for
        # PlannerConfig to refuse, so every error is found under node_reserve and named there
        base = document.get("node_reserve")
        planner["node_reserve"] = (
            {**base, **reserve} if isinstance(base, dict) else reserve if base is None else base
        )
    try:
        return PlannerConfig.model_validate(planner)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [str(p) for p in err["loc"]]
        msg = "unknown config key" if err["type"] == "extra_forbidden" else err["msg"]
        raise ConfigurationError(msg, field=_planner_variable(loc, env)) from None


def _planner_document(env: Mapping[str, str]) -> dict[str, Any]:
    """``PLANNER_CONFIG``: a JSON object of planner config keys (``{}`` when unset)."""
    text = _value(env, PLANNER_CONFIG_VAR)
    if not text:
        return {}
    repeats: dict[int, tuple[dict[str, Any], str]] = {}
    try:
        document = json.loads(text, object_pairs_hook=lambda pairs: _note_repeats(pairs, repeats))
    except ValueError as exc:
        raise ConfigurationError(f"not valid JSON: {exc}", field=PLANNER_CONFIG_VAR) from None
    except RecursionError:  # no ValueError: json's decoder recurses once per nested array or object
        raise ConfigurationError("not usable JSON: nested too deeply", field=PLANNER_CONFIG_VAR) from None
    if repeats:
        path = _first_repeat(document, repeats)
        raise ConfigurationError(
            f"key {_bounded(path[-1])!r} is given twice in one object", field=_config_field(path)
        )
    if not isinstance(document, dict):
        raise ConfigurationError("expected a JSON object of planner config keys", field=PLANNER_CONFIG_VAR)
    for key, variable in _FROM_VARIABLES.items():
        if key in document:
            raise ConfigurationError(
                f"{key} comes from {variable}, not from here", field=_config_field((key,))
            )
    return document


def _note_repeats(
    pairs: list[tuple[str, Any]], repeats: dict[int, tuple[dict[str, Any], str]]
) -> dict[str, Any]:
    """A JSON object, noting in ``repeats`` (by the object's id) the first key it gives twice: json keeps a
    repeated key's last value and drops the first without a word, as PyYAML does for ``spillway plan
    --config`` (which refuses it: config._UniqueKeyLoader). The object is kept in ``repeats`` as well,
    so its id is never reused by another while the document is read."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out and id(out) not in repeats:
            repeats[id(out)] = (out, key)
        out[key] = value
    return out


def _first_repeat(document: Any, repeats: Mapping[int, tuple[dict[str, Any], str]]) -> tuple[str, ...]:
    """The path (``tenants.team-a.limits.nodes``, a list's items by index), ending in the key, of the first repeat
    :func:`_note_repeats` noted that is still in the document, objects before their members; one in a
    value a repeat dropped is gone with it, and its object's own repeat is found instead. Walked without
    recursion, however deep the document."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(document, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            if id(node) in repeats:
                return (*path, repeats[id(node)][1])
            items = [(str(k), v) for k, v in node.items()]
        elif isinstance(node, list):
            items = [(str(i), v) for i, v in enumerate(node)]
        else:
            continue
        stack.extend((value, (*path, name)) for name, value in reversed(items))
    return (next(iter(repeats.values()))[1],)  # not reached: the outermost object with a repeat stays


def _planner_variable(loc: list[str], env: Mapping[str, str]) -> str:
    """The variable (and, inside ``PLANNER_CONFIG``, the key) behind a planner validation error."""
    # node_reserve.cpu or .memory alone: a buffer pod's cpu (buffers.0.pod.cpu) is PLANNER_CONFIG's
    if len(loc) == 2 and loc[0] == "node_reserve" and loc[1] in _RESERVE_VARS.values():
        variable = "NODE_RESERVE_" + loc[1].upper()
        if _value(env, variable):
            return variable
    if loc and loc[0].upper() in _PLANNER_VARS and _value(env, loc[0].upper()):
        return loc[0].upper()
    return _config_field(loc)


# a key path's segment shown as it is; any other (empty, blanks, a newline, quotes) is JSON-quoted
_PLAIN_SEGMENT = re.compile(r"[A-Za-z0-9_./-]+")
SEGMENT_LIMIT = 64


def _bounded(segment: str) -> str:
    """A key as an error shows it: cut to :data:`SEGMENT_LIMIT` characters with an ellipsis."""
    return segment if len(segment) <= SEGMENT_LIMIT else segment[: SEGMENT_LIMIT - 1] + "…"


def _config_field(path: Iterable[str]) -> str:
    """``PLANNER_CONFIG`` and the key path inside it, as an error's field: one bounded line. A segment
    longer than :data:`SEGMENT_LIMIT` is cut to it with an ellipsis; one that is then empty or has
    anything but letters, digits and ``_.-/`` is JSON-quoted (ASCII, a newline as ``\\n``), so a key
    a user wrote cannot make the field huge, blank-ended, or a second log line."""
    segments = [_bounded(s) for s in map(str, path)]
    shown = ".".join(s if _PLAIN_SEGMENT.fullmatch(s) else json.dumps(s) for s in segments)
    return f"{PLANNER_CONFIG_VAR} {shown}" if segments else PLANNER_CONFIG_VAR


def _runtime_error(exc: ValidationError) -> ConfigurationError:
    """A :class:`RuntimeConfig` validation error, naming its variable."""
    err = exc.errors()[0]
    field = str(err["loc"][0]) if err["loc"] else ""
    msg = str(err["msg"]).removeprefix("Value error, ")
    if not field and ":" in msg:  # a model validator's "field: message"
        head, _, tail = msg.partition(":")
        field, msg = head.strip(), tail.strip()
    return ConfigurationError(msg, field=_FIELD_VARS.get(field, field.upper() or "environment"))
