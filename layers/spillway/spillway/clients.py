"""The one wiring of every Lambda (observe, plan, scale, drain): the adapters a container needs, built
once from :class:`~spillway.runtime.RuntimeConfig`, and the act-layer objects made on them.

Every handler calls ``get_clients()`` and nothing else to reach the world; no handler keeps services of
its own. ``get_clients()`` reads the environment on each call (cheap) and rebuilds only when the configuration
changed, which in AWS is never within a container's life; in the local stack and the tests it is when
a new stack (other tables, another emulator URL) comes up, so nobody needs to reset anything. The Kubernetes client is made on first use:
the plan function builds one only when a plan has pod Events to post.

Cluster access (``CLUSTER_ACCESS``): ``eks`` (DescribeCluster + IAM token), ``secret`` (a kubeconfig in
Secrets Manager, ``KUBECONFIG_SECRET_ID``) or ``url`` (a plain URL, ``KUBE_URL``: the local Kubernetes
API emulator of the demo and the tests).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import boto3

from spillway.act.deadline import NO_DEADLINE, Deadline
from spillway.act.drain import DaemonSetEviction, Drainer, OutcomeHook
from spillway.act.events import EventPolicy
from spillway.act.gang import GangSteps
from spillway.act.interrupt import Interrupter, InterruptSettings
from spillway.act.planning import PlanSettings
from spillway.act.scale import Metric, ScaleSteps
from spillway.adapters.aws import AwsAdapter, AwsClients, AwsSettings
from spillway.adapters.plans_store import PlanStore
from spillway.adapters.sfn import Executions
from spillway.adapters.state_store import StateStore, first_start
from spillway.adapters.store import SnapshotStore
from spillway.errors import ConfigurationError
from spillway.runtime import RuntimeConfig, load_runtime_config

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

    from spillway.adapters.kube import KubeClient
    from spillway.observe import ObserveConfig


def make_kube(config: RuntimeConfig, session: boto3.Session) -> KubeClient:
    from spillway.adapters.kube import KubeClient

    if config.cluster_access == "url":
        if not config.kube_url:
            raise ConfigurationError("required when CLUSTER_ACCESS is url", field="KUBE_URL")
        return KubeClient.for_url(config.kube_url)
    if config.cluster_access == "secret":
        if not config.kubeconfig_secret_id:
            raise ConfigurationError("required when CLUSTER_ACCESS is secret", field="KUBECONFIG_SECRET_ID")
        return KubeClient.from_secret(config.kubeconfig_secret_id, session, region=config.primary_region)
    return KubeClient.from_eks(config.cluster_name, config.primary_region, session)


@dataclass
class Clients:
    config: RuntimeConfig
    session: boto3.Session
    aws_clients: AwsClients
    aws: AwsAdapter
    dynamodb: Any
    snapshots: SnapshotStore
    plans: PlanStore
    state: StateStore
    executions: Executions
    _kube: KubeClient | None = None
    _idempotency: DynamoDBPersistenceLayer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def kube(self) -> KubeClient:
        if self._kube is None:
            with self._lock:
                if self._kube is None:
                    self._kube = make_kube(self.config, self.session)
        return self._kube

    @property
    def idempotency(self) -> DynamoDBPersistenceLayer:
        """Powertools' idempotency records (table ``IDEMPOTENCY_TABLE``: ``id`` key, TTL ``expiration``)."""
        if self._idempotency is None:
            from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

            if not self.config.idempotency_table:
                raise ConfigurationError("required by the plan function", field="IDEMPOTENCY_TABLE")
            self._idempotency = DynamoDBPersistenceLayer(
                table_name=self.config.idempotency_table, boto3_client=self.dynamodb
            )
        return self._idempotency

    def observe_config(self) -> ObserveConfig:
        return self.config.observe_config()

    def drainer(self, on_outcome: OutcomeHook, remaining_ms: Callable[[], int] | None = None) -> Drainer:
        """The drain steps on this container's clients (cheap: made per invocation), within the
        invocation's time (``remaining_ms``: the Lambda context's ``get_remaining_time_in_millis``;
        None: no end): every Kubernetes call ends by :meth:`Deadline.left` (``KubeClient.within``),
        so that a step whose calls hang (a slow API server, the client's retries) ends and reports
        what it did before Lambda stops it, and the lifecycle heartbeat is not started without time
        for it."""
        c = self.config
        deadline = self.deadline(remaining_ms) if remaining_ms is not None else NO_DEADLINE
        return Drainer(
            self.kube.within(deadline.left) if remaining_ms is not None else self.kube,
            self.aws,
            ledger=self.state,
            cluster=c.cluster_name,
            regions=c.regions,
            on_outcome=on_outcome,
            lifecycle_hooks=c.lifecycle_hook_names,
            daemonset_eviction=DaemonSetEviction(
                empty=c.planner.daemonset_eviction_for_empty_nodes,
                occupied=c.planner.daemonset_eviction_for_occupied_nodes,
            ),
            executions=self.executions.status,
            deadline=deadline,
        )

    def scale_steps(self, metric: Metric, remaining_ms: Callable[[], int] | None = None) -> ScaleSteps:
        """The scale-up steps on this container's clients (cheap: made per invocation), within the
        invocation's time (``remaining_ms``: the Lambda context's ``get_remaining_time_in_millis``)."""
        return ScaleSteps(
            kube=self.kube,
            aws=self.aws,
            ledger=self.state,
            snapshots=self.snapshots,
            settings=self.plan_settings(),
            metric=metric,
            deadline=self.deadline(remaining_ms),
        )

    def gang_steps(self, metric: Metric, remaining_ms: Callable[[], int] | None = None) -> GangSteps:
        """The gang-launch steps on this container's clients (cheap: made per invocation), within the
        invocation's time as :meth:`scale_steps`."""
        return GangSteps(
            kube=self.kube,
            aws=self.aws,
            ledger=self.state,
            cluster=self.config.cluster_name,
            backoff_minutes=self.config.planner.launch_failure_backoff_minutes,
            metric=metric,
            deadline=self.deadline(remaining_ms),
        )

    def deadline(self, remaining_ms: Callable[[], int] | None) -> Deadline:
        """An invocation's deadline, each AWS call taken at its longest with the settings the clients were
        built with (None: no end)."""
        return Deadline.of_invocation(remaining_ms, self.aws_clients.settings.worst_call_seconds())

    def interrupter(self, metric: Metric, remaining_ms: Callable[[], int] | None = None) -> Interrupter:
        """The interrupt function's notice handling (made per invocation: it reads the snapshot once),
        within the invocation's time (``remaining_ms``: the Lambda context's
        ``get_remaining_time_in_millis``; None: no end): no record nor call is started that could
        still run when Lambda stops the function (:attr:`Interrupter.deadline`)."""
        c = self.config
        if not c.drain_node_state_machine_arn:
            raise ConfigurationError(
                "required by the interrupt function", field="DRAIN_NODE_STATE_MACHINE_ARN"
            )
        return Interrupter(
            snapshots=self.snapshots,
            workflows=self.executions,
            ledger=self.state,
            cluster=c.cluster_name,
            regions=c.regions,
            drain_node_arn=c.drain_node_state_machine_arn,
            cloud=self.aws,
            settings=InterruptSettings(
                interruption_deadline_seconds=c.interruption_deadline_seconds,
                rebalance_deadline_seconds=c.rebalance_deadline_seconds,
                scheduled_margin_seconds=c.scheduled_margin_seconds,
                poll_seconds=c.interrupt_poll_seconds,
                backoff_minutes=c.interruption_backoff_minutes,
                lifecycle_deadline_seconds=c.lifecycle_deadline_seconds,
                lifecycle_hooks=c.lifecycle_hook_names,
            ),
            metric=metric,
            deadline=self.deadline(remaining_ms),
        )

    def plan_settings(self) -> PlanSettings:
        c = self.config
        return PlanSettings(
            planner=c.planner,
            scale_up_arn=c.scale_up_state_machine_arn,
            scale_down_arn=c.scale_down_state_machine_arn,
            gang_launch_arn=c.gang_launch_state_machine_arn,
            gang_deadline_seconds=c.gang_deadline_seconds,
            gang_poll_seconds=c.gang_poll_seconds,
            max_snapshot_age_seconds=c.max_snapshot_age_seconds,
            poll_seconds=c.scale_up_poll_seconds,
            launch_timeout_seconds=c.launch_timeout_seconds,
            max_rounds=c.scale_up_max_rounds,
            drain_poll_seconds=c.drain_poll_seconds,
            events=EventPolicy(
                max_per_plan=c.pod_events_max_per_plan,
                window=timedelta(minutes=c.pod_events_window_minutes),
                ledger_size=c.pod_events_ledger_size,
                budget_seconds=c.pod_events_budget_seconds,
            ),
        )

    def cluster(self) -> KubeClient:
        """The Kubernetes client, built on first call (what the plan cycle calls to post pod Events)."""
        return self.kube


def build_clients(config: RuntimeConfig, session: boto3.Session | None = None) -> Clients:
    session = session or boto3.Session()
    settings = AwsSettings(
        max_attempts=config.aws_max_attempts,
        connect_timeout=config.aws_connect_timeout,
        read_timeout=config.aws_read_timeout,
    )
    aws_clients = AwsClients(config.regions, session, settings)
    home = config.primary_region
    dynamodb = session.client("dynamodb", region_name=home, config=settings.botocore_config())
    sfn = session.client("stepfunctions", region_name=home, config=settings.botocore_config())
    plans = PlanStore(dynamodb, config.plans_table, ttl=config.plan_ttl)
    state = StateStore(dynamodb, config.state_table, plans=plans)
    return Clients(
        config=config,
        session=session,
        aws_clients=aws_clients,
        aws=AwsAdapter(
            aws_clients,
            config.cluster_name,
            activity_window=config.activity_window,
            lifecycle_hooks=config.lifecycle_hook_names,
        ),
        dynamodb=dynamodb,
        snapshots=SnapshotStore(
            dynamodb, config.snapshots_table, ttl=config.snapshot_ttl, codec=config.snapshot_codec
        ),
        plans=plans,
        state=state,
        executions=Executions(sfn, first=first_start(state, config.cluster_name)),
    )


_cache: Clients | None = None
_cache_lock = threading.Lock()


def get_clients() -> Clients:
    """This container's clients, built on first use (and again only if the environment changed)."""
    global _cache
    config = load_runtime_config()
    with _cache_lock:
        if _cache is None or _cache.config != config:
            _cache = build_clients(config)
        return _cache
