"""Logging, tracing and metrics, made once per container (service ``spillway``, namespace ``Spillway``).

Handlers import ``logger``, ``tracer`` and ``metrics`` from here at module level and put the decorators
on the handler::

    @logger.inject_lambda_context(clear_state=True)
    @tracer.capture_lambda_handler
    @metrics.log_metrics(capture_cold_start_metric=True)
    def handler(event, context): ...

Metrics go out as CloudWatch Embedded Metric Format lines on stdout when the handler returns (no API
calls). X-Ray tracing needs ``aws-xray-sdk``; where it is not installed (tests, the local stack) the
tracer is a stand-in whose decorators do nothing, so handlers are the same everywhere.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

SERVICE = "spillway"
NAMESPACE = "Spillway"

F = TypeVar("F", bound=Callable[..., Any])


class TracerLike(Protocol):
    """The part of Powertools' ``Tracer`` Spillway uses (typed, so decorated handlers stay typed)."""

    def capture_lambda_handler(self, lambda_handler: F) -> F: ...

    def capture_method(self, method: F) -> F: ...

    def put_annotation(self, key: str, value: Any) -> None: ...


class _NoTracer:
    """A tracer whose decorators do nothing (no X-Ray SDK installed)."""

    disabled = True

    def capture_lambda_handler(self, lambda_handler: F) -> F:
        return lambda_handler

    def capture_method(self, method: F) -> F:
        return method

    def put_annotation(self, key: str, value: Any) -> None:
        return None


def _make_tracer() -> TracerLike:
    if importlib.util.find_spec("aws_xray_sdk") is None:
        return _NoTracer()
    from aws_lambda_powertools import Tracer

    return cast(TracerLike, Tracer(service=SERVICE))


logger = Logger(service=SERVICE)
tracer = _make_tracer()
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)


def add_count(name: str, value: float) -> None:
    metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


def add_seconds(name: str, value: float) -> None:
    metrics.add_metric(name=name, unit=MetricUnit.Seconds, value=round(value, 3))


def add_bytes(name: str, value: float) -> None:
    metrics.add_metric(name=name, unit=MetricUnit.Bytes, value=value)


def set_cluster(cluster: str) -> None:
    """Every metric of this container carries the ``Cluster`` dimension."""
    metrics.set_default_dimensions(Cluster=cluster)
