"""Plan Lambda: plan a new snapshot and start what the plan says. Thin: the work is
:func:`spillway.act.planning.run_plan`.

Triggered by the snapshots table's stream (INSERTs of complete snapshot items; chunk items are filtered
out by the event source mapping and again here) and invocable directly::

    {"cluster": "ml"}                                    the cluster's latest snapshot
    {"cluster": "ml", "snapshot_key": "2026-...Z"}       that snapshot

Any other input (another key, another cluster than this deployment's, a stream batch whose records are
not what DynamoDB Streams sends) raises InputError naming the field before anything is read.

Each (cluster, snapshot key) is planned once: Powertools idempotency (DynamoDB) returns the first
result to a repeated delivery, and the state's versioned commit and the executions' deterministic names
stop what gets past it. From the stream, only the newest snapshot of each cluster in a batch is planned
(the older ones are superseded), and only of this deployment's cluster (another's is logged and
skipped, status ``skipped``: its settings and state machines are not these); a stale snapshot is logged and skipped (retrying cannot freshen it); a
lost race (StateConflict), the same snapshot being planned right now by another invocation
(IdempotencyAlreadyInProgressError), the idempotency table refusing a read or write
(IdempotencyPersistenceLayerError) or a transient error is reported as a batch item failure, so Lambda
retries from that record. Invoked directly, those errors are raised, under their own names.

After the commit the plan posts Kubernetes Events on the pending pods (TriggeredScaleUp,
NotTriggerScaleUp; :mod:`spillway.act.events`); a failure to post is logged and counted, never raised.

Metrics (EMF): ScaleUpNodes, DrainsPlanned, UnplaceablePods, GangPodsHeldAtHome (of those, gang members
kept to where their gang runs, which cannot hold them: gang-home-full, gang-home-unknown), Overflow (nodes
planned outside the primary region), UnregisteredInstances (instances no Node joined for within max_node_provision_minutes:
the scale-down removes them), GangOrphans and GangOrphansBusy (a fleet gang's instances left outside
every group past gang_orphan_minutes: sent to the scale-down to terminate, or left because their Node runs
work; every plan counts one until it is gone),
ClusterUnhealthy (1 when the plan found too many unready nodes and
drained nothing) and UnhealthyGroups (groups that got no new nodes for the same reason),
PriorityConfigMapInvalid (1 when cluster-autoscaler's priority expander ConfigMap could not be read: the
plan's ``problems`` name its field and why; cluster-autoscaler's Event reason), UnknownGroupNames (fields of
the configuration, a disruption budget's ``groups`` or a tenant scope's ``node_groups``, naming a group no
managed group is called: each a problem of the plan), DrainDeadlineTooShort (1 when the drains' deadline
leaves no time for a pod with the default grace to be moved while a group consolidates when-underutilized:
a problem of the plan naming the groups), BufferChunksShort (the chunks of active capacity buffers with no
room in the plan: its ``buffers`` say which and why), PodsHeldByLimits,
OldestUnheldPendingSeconds (the oldest pending pod the plan does not hold at a limit: pending-too-long), and per tenant the plan names (dimension ``Tenant``:
``spillway.observability.add_tenant_metrics``) TenantScaleUpNodes/GPUs/CPU, TenantUncordonedNodes and TenantPodsHeld;
StaleSnapshots, PlanConflicts, PodEventsPosted, PodEventsFailed (refused, or not sent for lack of
time or of an API), CandidateTaintsWritten and CandidateTaintsFailed (the scale-down candidate taints
set or lifted; a failure is most often RBAC without ``patch`` on nodes), ProvisioningRequestsDeleted and
ProvisioningRequestDeletesFailed (ProvisioningRequests that ended a week ago, deleted as
cluster-autoscaler does); PlanFailures (a snapshot of the stream whose plan failed, reported for Lambda
to retry, but for a lost race: the invocation succeeds, so Lambda's Errors never counts it). (Uncordoned and GroupsBackedOff come from the scale function, when it happens.)
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyInconsistentStateError,
    IdempotencyPersistenceLayerError,
)

from spillway.act.planning import own_inserts, parse_plan_request, run_plan, snapshot_ref
from spillway.adapters.store import snapshot_inserts
from spillway.clients import Clients, get_clients
from spillway.errors import InputError, SpillwayError, StaleSnapshot, StateConflict
from spillway.model.act import PlanOutcome, SnapshotRef, add_unplaced_counts
from spillway.observability import (
    add_cluster_writes,
    add_count,
    add_seconds,
    add_tenant_metrics,
    logger,
    metrics,
    redacted_answer,
    redacting,
    set_cluster,
    tracer,
)

IDEMPOTENCY_SECONDS = 3600
# A delivery that fails for one of these is retried from its record: our own errors (a lost race, an
# adapter's transient error), the snapshot being planned by another invocation right now, and the
# idempotency table refusing a read or write (Powertools wraps any error of the table, throttling
# included, in IdempotencyPersistenceLayerError; IdempotencyInconsistentStateError after its own
# retries). A refused COMPLETED write comes after the plan acted: its record stays INPROGRESS until the
# invocation's time is up, and the delivery then is a resume of the committed plan.
RETRIED = (
    SpillwayError,
    IdempotencyAlreadyInProgressError,
    IdempotencyPersistenceLayerError,
    IdempotencyInconsistentStateError,
)


# Answers that planned nothing, and so have no plan metrics: ``resumed`` (the snapshot's plan was
# committed before: its executions are started again) and ``superseded`` (a newer snapshot was planned
# already). Their empty summary would read as a plan that found nothing: a PodsHeldByLimits 0 starts the
# held-by-limits alarm's count again (it takes each period's least) while every plan holds pods.
PLANNED_NOTHING = ("resumed", "superseded")


def record_outcome(outcome: dict[str, Any]) -> None:
    summary = outcome.get("summary") or {}
    if outcome.get("status") not in PLANNED_NOTHING:
        add_plan_metrics(outcome, summary)
    logger.info("planned", extra={k: outcome.get(k) for k in ("snapshot_key", "plan_id", "status", "note")}
                | {"summary": summary, "executions": [e["name"] for e in outcome.get("executions", [])]})  # fmt: skip


def add_plan_metrics(outcome: dict[str, Any], summary: dict[str, Any]) -> None:
    add_count("ScaleUpNodes", summary.get("scale_up_nodes", 0))
    add_count("DrainsPlanned", summary.get("drains", 0))
    add_unplaced_counts(add_count, summary)
    add_count("Overflow", summary.get("overflow_nodes", 0))
    add_count("UnregisteredInstances", summary.get("unregistered", 0))
    add_count("GangOrphans", summary.get("gang_orphans", 0))
    add_count("GangOrphansBusy", summary.get("gang_orphans_busy", 0))
    add_count("ClusterUnhealthy", summary.get("cluster_unhealthy", 0))
    add_count("UnhealthyGroups", summary.get("unhealthy_groups", 0))
    add_count("PriorityConfigMapInvalid", summary.get("priority_configmap_invalid", 0))
    add_count("UnknownGroupNames", summary.get("unknown_group_names", 0))
    add_count("DrainDeadlineTooShort", summary.get("drain_deadline_too_short", 0))
    add_count("BufferChunksShort", summary.get("buffer_chunks_short", 0))
    # pending-too-long reads it while plans come (observe's OldestPendingSeconds counts held pods too)
    add_seconds("OldestUnheldPendingSeconds", summary.get("oldest_unheld_pending_seconds", 0))
    add_tenant_metrics(outcome.get("tenants"))
    add_cluster_writes(outcome)


def plan_once(clients: Clients, ref: SnapshotRef, context: Any) -> dict[str, Any]:
    """``run_plan`` under Powertools idempotency keyed on (cluster, snapshot key)."""
    config = IdempotencyConfig(expires_after_seconds=IDEMPOTENCY_SECONDS)
    if context is not None:
        config.register_lambda_context(context)

    @idempotent_function(  # type: ignore[untyped-decorator]  # Powertools' decorator is untyped
        data_keyword_argument="ref", persistence_store=clients.idempotency, config=config, key_prefix="plan"
    )
    def once(ref: dict[str, str]) -> dict[str, Any]:
        outcome: PlanOutcome = run_plan(
            SnapshotRef(ref["cluster"], ref["snapshot_key"]),
            snapshots=clients.snapshots,
            ledger=clients.state,
            executions=clients.executions,
            settings=clients.plan_settings(),
            now=datetime.now(UTC),
            cluster=clients.cluster,
        )
        result = outcome.to_dict()
        record_outcome(result)
        return redacted_answer(result)  # kept in the idempotency table as it is returned

    result: dict[str, Any] = once(ref=ref.to_dict())
    return result


def plan_direct(clients: Clients, event: dict[str, Any], context: Any) -> dict[str, Any]:
    request = parse_plan_request(event, clients.config.cluster_name)
    ref = snapshot_ref(clients.snapshots, request.cluster, request.snapshot_key)
    try:
        return plan_once(clients, ref, context)
    except StaleSnapshot:
        add_count("StaleSnapshots", 1)
        raise
    except StateConflict:
        add_count("PlanConflicts", 1)
        raise


def count_failure(exc: BaseException) -> None:
    """A plan of the stream that failed, reported for Lambda to retry from its record: the invocation
    returns, so Lambda's Errors never counts it; PlanFailures does, for the plan-errors alarm. A lost race
    (StateConflict: PlanConflicts; the snapshot planned by another invocation right now) is no failure."""
    if isinstance(exc, StateConflict):
        add_count("PlanConflicts", 1)
    elif not isinstance(exc, IdempotencyAlreadyInProgressError):
        add_count("PlanFailures", 1)


def plan_stream(clients: Clients, event: dict[str, Any], context: Any) -> dict[str, Any]:
    failures: list[dict[str, str]] = []
    results: list[dict[str, Any]] = []
    if set(event) != {"Records"}:
        raise InputError("not a key of a stream batch", field=sorted(set(event) - {"Records"})[0])
    inserts, skipped = own_inserts(snapshot_inserts(event["Records"]), clients.config.cluster_name)
    results.extend(skipped)
    for ref, seq in inserts:
        try:
            results.append(plan_once(clients, ref, context))
        except StaleSnapshot as exc:
            add_count("StaleSnapshots", 1)
            logger.warning("stale snapshot: not acting", extra={"snapshot_key": ref.key, "error": str(exc)})
            results.append({**ref.to_dict(), "status": "stale", "note": str(exc)})
        except RETRIED as exc:
            count_failure(exc)
            logger.warning(
                "plan failed; Lambda retries from this record",
                extra={"snapshot_key": ref.key, "error": type(exc).__name__, "detail": str(exc)},
            )
            failures.append({"itemIdentifier": seq})
            results.append({**ref.to_dict(), "status": "failed", "error": type(exc).__name__})
    return {"batchItemFailures": failures, "results": results}


def plan_event(clients: Clients, event: Any, context: Any) -> dict[str, Any]:
    if not isinstance(event, dict):
        raise InputError(f'expected {{"cluster": "<name>"}} or a stream batch, not {type(event).__name__}')
    if "Records" in event:
        return plan_stream(clients, event, context)
    return plan_direct(clients, event, context)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
@redacting
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    clients = get_clients()
    set_cluster(clients.config.cluster_name)
    return plan_event(clients, event, context)
