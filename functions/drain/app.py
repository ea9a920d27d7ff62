"""Drain Lambda: one step of the DrainNode state machine per invocation, chosen by ``action``.

``{"action": "validate", "request": {...}, "execution": "<its name>"}``, ``{"action": "cordon" | "evict" | "check" | "terminate" |
"complete_lifecycle" | "delete_node" | "uncordon", "drain": {...}}`` (``evict`` also takes the previous ``round``) and
``{"action": "record", "state": {...}, "outcome": ...}``; for the scale-down, ``summarize``, ``remove_unregistered``
and ``undrained`` (a part that drained nothing). Thin: the work is :mod:`spillway.act.drain`;
errors are Spillway's named errors, whose class names the state machine's Retry/Catch match.

Clients come from :mod:`spillway.clients`, the one wiring of every function (built once per container, on the first invocation: importing
this module needs no environment; ``CLUSTER_ACCESS=url`` points the Kubernetes client at the local API
emulator). Metric (EMF): ``DrainOutcome`` (dimension ``Outcome``), once per drain; a scale-down part that drained
none of its nodes (``skipped``: a part before it was stopped; ``lapsed``: it waited behind a part that
still ran until its plan's claim lapsed) adds them under that outcome; ``AnsweredErrors`` (dimension
``Function``) for an error the state machine retries or catches by name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit, single_metric

from spillway.act.drain import run_action
from spillway.clients import Clients, get_clients
from spillway.errors import STEP_ANSWERS, InvalidDrainRequest
from spillway.observability import (
    NAMESPACE,
    SERVICE,
    counting_answers,
    logger,
    metrics,
    redacting,
    set_cluster,
    tracer,
)


def emit_outcome(outcome: str, who: Mapping[str, Any] | None, count: int = 1, /) -> None:
    """``DrainOutcome`` = ``count`` (1 but for a scale-down part that drained none of its nodes) with an
    ``Outcome`` dimension, flushed at once (not mixed with others); the log line names the drain's node
    and plan (``who``: the outcome's identity, whatever the outcome, a cancelled or rejected one too).

    Its ``service`` is named here, as :data:`spillway.observability.metrics` names it for every other
    metric: Powertools' ``single_metric`` would take it from ``POWERTOOLS_SERVICE_NAME`` alone (its
    ``SingleMetric`` is made without a service), and the drain-timeout alarm, the dashboard and
    DrainNode's own PutMetricData all read ``service=spillway``."""
    with single_metric(
        name="DrainOutcome",
        unit=MetricUnit.Count,
        value=count,
        namespace=NAMESPACE,
        default_dimensions={"service": SERVICE, **metrics.default_dimensions},
    ) as metric:
        metric.add_dimension(name="Outcome", value=outcome)
    logger.info(
        "drain outcome",
        extra={
            "outcome": outcome,
            "count": count,
            "node": (who or {}).get("node"),
            "plan_id": (who or {}).get("plan_id"),
        },
    )


def handle(event: Any, clients: Clients, remaining_ms: Callable[[], int] | None = None) -> dict[str, Any]:
    if not isinstance(event, dict):
        raise InvalidDrainRequest("the drain function takes a JSON object with an action", field="action")
    logger.append_keys(action=event.get("action"))
    return run_action(clients.drainer(emit_outcome, remaining_ms), event)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@redacting
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # first thing: the invocation's start, where Lambda stamps Errors (a cold start's clients take seconds)
    with counting_answers("drain", STEP_ANSWERS["drain"]):
        clients = get_clients()
        set_cluster(clients.config.cluster_name)
        return handle(event, clients, getattr(context, "get_remaining_time_in_millis", None))
