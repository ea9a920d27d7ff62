"""Drain Lambda: one step of the DrainNode state machine per invocation, chosen by ``action``.

``{"action": "validate", "request": {...}}``, ``{"action": "cordon" | "evict" | "check" | "terminate" |
"delete_node" | "uncordon", "drain": {...}}`` (``evict`` also takes the previous ``round``) and
``{"action": "record", "state": {...}, "outcome": ...}``. Thin: the work is :mod:`spillway.act.drain`;
errors are Spillway's named errors, whose class names the state machine's Retry/Catch match.

Clients come from :mod:`spillway.clients` (built once per container, on the first invocation: importing
this module needs no environment; ``CLUSTER_ACCESS=url`` points the Kubernetes client at the local API
emulator). Metric (EMF): ``DrainOutcome`` (dimension ``Outcome``), once per drain.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit, single_metric

from spillway import clients as spillway_clients
from spillway.act.drain import AsgCloud, Drain, Drainer, run_action
from spillway.errors import InvalidDrainRequest
from spillway.observability import NAMESPACE, logger, metrics, set_cluster, tracer


class Services:
    """The drain steps on this container's clients (a plain class: the module may be loaded by path)."""

    __slots__ = ("clients", "drainer")

    def __init__(self, clients: spillway_clients.Clients, drainer: Drainer) -> None:
        self.clients = clients
        self.drainer = drainer


_services: Services | None = None


def emit_outcome(outcome: str, drain: Drain | None) -> None:
    """``DrainOutcome`` = 1 with an ``Outcome`` dimension, flushed at once (not mixed with others)."""
    with single_metric(
        name="DrainOutcome",
        unit=MetricUnit.Count,
        value=1,
        namespace=NAMESPACE,
        default_dimensions=dict(metrics.default_dimensions),
    ) as metric:
        metric.add_dimension(name="Outcome", value=outcome)
    logger.info(
        "drain outcome",
        extra={
            "outcome": outcome,
            "node": drain.node if drain else None,
            "plan_id": drain.plan_id if drain else None,
        },
    )


def build_services(clients: spillway_clients.Clients) -> Services:
    config = clients.config
    drainer = Drainer(
        clients.kube,
        AsgCloud(clients.aws),
        cluster=config.cluster_name,
        regions=config.regions,
        on_outcome=emit_outcome,
    )
    return Services(clients=clients, drainer=drainer)


def services() -> Services:
    """Built on first use, and again only when the shared clients were rebuilt (a new configuration)."""
    global _services
    clients = spillway_clients.get_clients()
    if _services is None or _services.clients is not clients:
        set_cluster(clients.config.cluster_name)
        _services = build_services(clients)
    return _services


def handle(event: Any, svc: Services) -> dict[str, Any]:
    if not isinstance(event, dict):
        raise InvalidDrainRequest("the drain function takes a JSON object with an action", field="action")
    logger.append_keys(action=event.get("action"))
    return run_action(svc.drainer, event)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle(event, services())
