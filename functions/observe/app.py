"""Observe Lambda: every minute (EventBridge Scheduler), observe the cluster several times and store a
snapshot whenever demand changed (or as a heartbeat). Thin: the work is ``spillway.observe.run_observe``.

Clients come from :mod:`spillway.clients`, the one wiring of every function (built once per container,
on the first invocation: importing this module is cheap and needs no environment). Metrics (EMF): PendingPods, UnschedulablePods, Nodes, NotReadyNodes,
LongestNotReadySeconds (alarmed on), SnapshotBytes, ObserveSeconds, OldestPendingSeconds (alarmed on), SnapshotsWritten, ObservationFailures,
GangInstanceReadsFailed (alarmed on: the regions whose gang-instance read failed, named in the log line),
RegionReadsFailed (alarmed on: the regions whose Auto Scaling read failed, their groups not scaled; named
in the log line).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from spillway.act.deadline import Deadline
from spillway.clients import Clients, get_clients
from spillway.config import PlannerConfig
from spillway.errors import ObservationFailed
from spillway.model.calltime import OBSERVE_ROOM_SECONDS
from spillway.observability import (
    add_bytes,
    add_count,
    add_seconds,
    logger,
    metrics,
    redacting,
    set_cluster,
    tracer,
)
from spillway.observe import Observation, deadline_for, run_observe


def record(observation: Observation, planner: PlannerConfig | None = None) -> None:
    """Its metrics and log line, judged by the ``planner``'s configuration (its defaults when None):
    below ``expendable_priority_cutoff`` a pod's wait is by design and not counted in
    OldestPendingSeconds (the pending-too-long alarm); a node never Ready spends
    ``max_node_startup_minutes`` registering before its NotReady time counts in LongestNotReadySeconds
    (the not-ready-nodes alarm)."""
    planner = planner or PlannerConfig()
    startup = timedelta(minutes=planner.max_node_startup_minutes)
    expendable_below = planner.expendable_priority_cutoff
    counts = observation.counts
    add_count("PendingPods", counts.pending_pods)
    add_count("UnschedulablePods", counts.unschedulable_pods)
    add_count("Nodes", counts.nodes)
    add_count("NotReadyNodes", counts.not_ready_nodes)
    add_seconds("LongestNotReadySeconds", observation.snapshot.longest_not_ready_seconds(startup))
    add_seconds("ObserveSeconds", observation.snapshot.observe_seconds)
    add_seconds("OldestPendingSeconds", observation.snapshot.oldest_pending_seconds(expendable_below))
    add_count("SnapshotsWritten", 1 if observation.written else 0)
    # the regions the gang sweep is blind in this observation (0 too: its alarm takes each period's least)
    unread = list(observation.snapshot.cluster.fleet_unread)
    add_count("GangInstanceReadsFailed", len(unread))
    # the regions whose groups no plan scales this time (0 too: region-unread takes each period's least)
    regions = observation.snapshot.cluster.unread_region_names
    add_count("RegionReadsFailed", len(regions))
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
            "gang_reads_failed": unread,
            "region_reads_failed": regions,
        },
    )


def observe_tick(clients: Clients, remaining_ms: Callable[[], int] | None) -> dict[str, Any]:
    """``remaining_ms``: the Lambda context's ``get_remaining_time_in_millis`` (None: no end)."""

    def clock() -> datetime:
        return datetime.now(UTC)

    config = clients.config
    deadline = deadline_for(clock(), config.observe_window_seconds, remaining_ms() if remaining_ms else None)
    # a region read is awaited while the snapshot can still be built and stored in the invocation's time
    # (the store counted within its room, not at an AWS call's longest: spillway.model.calltime)
    reads_left = Deadline.of_invocation(remaining_ms, call_seconds=0.0).reading(0, OBSERVE_ROOM_SECONDS)
    try:
        run = run_observe(
            clients.kube,
            clients.aws,
            clients.snapshots,
            clients.observe_config(),
            clock,
            time.sleep,
            deadline,
            lambda observation: record(observation, config.planner),
            reads_left,
        )
    except ObservationFailed as exc:
        add_count("ObservationFailures", 1)
        logger.error("observation failed", extra={"error": type(exc.__cause__ or exc).__name__})
        raise
    last = run.observations[-1]
    return {
        "cluster": config.cluster_name,
        "observations": len(run.observations),
        "written": [o.key for o in run.written],
        "fingerprint": last.snapshot.fingerprint,
        "pending_pods": last.counts.pending_pods,
        "nodes": last.counts.nodes,
    }


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
@redacting
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    clients = get_clients()
    set_cluster(clients.config.cluster_name)
    return observe_tick(clients, getattr(context, "get_remaining_time_in_millis", None))
