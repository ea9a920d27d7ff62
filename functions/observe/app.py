"""Observe Lambda: every minute (EventBridge Scheduler), observe the cluster several times and store a
snapshot whenever demand changed (or as a heartbeat). Thin: the work is ``spillway.observe.run_observe``.

Clients are built once per container, on the first invocation (so importing this module is cheap and
needs no environment). Metrics (EMF): PendingPods, UnschedulablePods, Nodes, NotReadyNodes,
SnapshotBytes, ObserveSeconds, OldestPendingSeconds (alarmed on), SnapshotsWritten, ObservationFailures.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import boto3

from spillway.adapters.aws import AwsAdapter, AwsClients, AwsSettings
from spillway.adapters.store import SnapshotStore
from spillway.errors import ObservationFailed
from spillway.observability import add_bytes, add_count, add_seconds, logger, metrics, set_cluster, tracer
from spillway.observe import KubeSource, Observation, ObserveConfig, deadline_for, run_observe
from spillway.runtime import RuntimeConfig, load_runtime_config


@dataclass(frozen=True, slots=True)
class Services:
    config: RuntimeConfig
    observe: ObserveConfig
    kube: KubeSource
    aws: AwsAdapter
    store: SnapshotStore


_services: Services | None = None


def build_services(config: RuntimeConfig, session: boto3.Session | None = None) -> Services:
    from spillway.adapters.kube import KubeClient

    session = session or boto3.Session()
    settings = AwsSettings(
        max_attempts=config.aws_max_attempts,
        connect_timeout=config.aws_connect_timeout,
        read_timeout=config.aws_read_timeout,
    )
    clients = AwsClients(config.regions, session, settings)
    kube: KubeSource
    if config.cluster_access == "secret":
        assert config.kubeconfig_secret_id is not None  # checked by RuntimeConfig
        kube = KubeClient.from_secret(config.kubeconfig_secret_id, session, region=config.primary_region)
    elif config.cluster_access == "url":
        assert config.kube_url is not None  # checked by RuntimeConfig
        kube = KubeClient.for_url(config.kube_url)
    else:
        kube = KubeClient.from_eks(config.cluster_name, config.primary_region, session)
    dynamodb = session.client(
        "dynamodb", region_name=config.primary_region, config=settings.botocore_config()
    )
    store = SnapshotStore(
        dynamodb, config.snapshots_table, ttl=config.snapshot_ttl, codec=config.snapshot_codec
    )
    aws = AwsAdapter(clients, config.cluster_name, activity_window=config.activity_window)
    return Services(config=config, observe=config.observe_config(), kube=kube, aws=aws, store=store)


def services() -> Services:
    global _services
    if _services is None:
        config = load_runtime_config()
        set_cluster(config.cluster_name)
        _services = build_services(config)
    return _services


def record(observation: Observation) -> None:
    counts = observation.counts
    add_count("PendingPods", counts.pending_pods)
    add_count("UnschedulablePods", counts.unschedulable_pods)
    add_count("Nodes", counts.nodes)
    add_count("NotReadyNodes", counts.not_ready_nodes)
    add_seconds("ObserveSeconds", observation.snapshot.observe_seconds)
    add_seconds("OldestPendingSeconds", observation.snapshot.oldest_pending_seconds())
    add_count("SnapshotsWritten", 1 if observation.written else 0)
    if observation.save is not None:
        add_bytes("SnapshotBytes", observation.save.size)
    logger.info(
        "observed",
        extra={
            "reason": observation.reason,
            "key": observation.key,
            "fingerprint": observation.snapshot.fingerprint[:16],
            "nodes": counts.nodes,
            "pods": counts.pods,
            "pending": counts.pending_pods,
            "groups": len(observation.snapshot.groups),
            "observe_seconds": round(observation.snapshot.observe_seconds, 3),
            "bytes": observation.save.size if observation.save else None,
            "chunks": observation.save.chunks if observation.save else None,
        },
    )


def observe_tick(svc: Services, remaining_ms: int | None) -> dict[str, Any]:
    def clock() -> datetime:
        return datetime.now(UTC)

    deadline = deadline_for(clock(), svc.config.observe_window_seconds, remaining_ms)
    try:
        run = run_observe(svc.kube, svc.aws, svc.store, svc.observe, clock, time.sleep, deadline, record)
    except ObservationFailed as exc:
        add_count("ObservationFailures", 1)
        logger.error("observation failed", extra={"error": type(exc.__cause__ or exc).__name__})
        raise
    last = run.observations[-1]
    return {
        "cluster": svc.config.cluster_name,
        "observations": len(run.observations),
        "written": [o.key for o in run.written],
        "fingerprint": last.snapshot.fingerprint,
        "pending_pods": last.counts.pending_pods,
        "nodes": last.counts.nodes,
    }


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    remaining = context.get_remaining_time_in_millis() if context is not None else None
    return observe_tick(services(), remaining)
