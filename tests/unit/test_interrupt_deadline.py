"""The interrupt function within its invocation's time: a record it cannot finish is not started.

Lambda stops the function at its Timeout wherever it stands, and an SQS batch whose invocation timed out
comes back whole: every message of it, the ones handled too, is received again and counts towards the
queue's maxReceiveCount before the dead-letter queue (Lambda Developer Guide, "Using Lambda with Amazon
SQS": with ReportBatchItemFailures only a response names the failed records). The other functions keep
to :class:`~spillway.act.deadline.Deadline`; so does this one now."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from test_interrupt import ARN, WARNED_AT, Rig, body, load_app, sample, sqs_event, world
from test_template_contract import TEMPLATE

from spillway.act.deadline import Deadline
from spillway.act.interrupt import Interrupter, parse_notice
from spillway.errors import AwsUnavailable
from spillway.model.calltime import STEP_MARGIN_SECONDS, worst_call_seconds
from spillway.runtime import RuntimeConfig

CALL = 5.0  # one AWS call at its longest, in these tests


class Invocation:
    """A Lambda context's remaining time, which the test moves on as calls take it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def remaining(self) -> float:
        return self.seconds


def bounded(rig: Rig, invocation: Invocation) -> Interrupter:
    return Interrupter(
        snapshots=rig.snapshots, workflows=rig.workflows, ledger=rig.ledger, cluster="prod",
        regions=("us-east-1",), drain_node_arn=ARN, clock=lambda: rig.now, cloud=rig.cloud,
        deadline=Deadline(invocation.remaining, CALL),
    )  # fmt: skip


def rebalancing() -> Any:
    """The interrupt tests' world, its node's group with Capacity Rebalancing: a rebalance
    recommendation's record makes two calls, the snapshot's read and StartExecution."""
    snapshot = world()
    groups = tuple(replace(g, capacity_rebalance=True) if g.name == "spot-a" else g for g in snapshot.groups)
    return replace(snapshot, groups=groups)


def rebalance(instance: str = "") -> str:
    doc = sample("interrupt-rebalance.json")
    if instance:
        doc["detail"]["instance-id"] = instance
    return body(doc)


def test_records_left_when_the_invocations_time_runs_out_are_reported_failed_and_not_started() -> None:
    """The first record's StartExecution took the invocation's time (a throttled call the SDK retried):
    the two records after it are not started (no snapshot read, no execution) and come back as batch
    item failures, while the first, handled, is not received again. Before, the function went on until
    Lambda stopped it, and the whole batch came back."""
    rig = Rig(rebalancing(), now=WARNED_AT + timedelta(seconds=10))
    invocation = Invocation(20)
    start = rig.workflows.start

    def slow_start(request: Any) -> Any:
        invocation.seconds = STEP_MARGIN_SECONDS + CALL - 1  # less than one call left after it
        return start(request)

    rig.workflows.start = slow_start  # type: ignore[method-assign]
    app = load_app()
    response = app.process_batch(bounded(rig, invocation), sqs_event(rebalance(), rebalance(), rebalance()))
    assert response == {"batchItemFailures": [{"itemIdentifier": "m-1"}, {"itemIdentifier": "m-2"}]}
    assert len(rig.workflows.requests) == 1


def test_an_invocation_without_time_for_one_call_starts_nothing() -> None:
    rig = Rig(rebalancing(), now=WARNED_AT + timedelta(seconds=10))
    interrupter = bounded(rig, Invocation(STEP_MARGIN_SECONDS + CALL - 1))
    with pytest.raises(AwsUnavailable) as caught:
        interrupter.handle(parse_notice(rebalance()))
    assert caught.value.unsent
    assert rig.workflows.requests == [] and rig.snapshots.calls == []


def test_a_call_is_not_started_without_time_for_it() -> None:
    """A record whose time runs out between its calls stops before the next one: the snapshot was read,
    StartExecution is not asked (the record comes back, and its retry starts the drain)."""
    rig = Rig(rebalancing(), now=WARNED_AT + timedelta(seconds=10))
    invocation = Invocation(20)
    latest = rig.snapshots.latest

    def slow_read(cluster: str) -> Any:
        invocation.seconds = STEP_MARGIN_SECONDS + CALL - 1
        return latest(cluster)

    rig.snapshots.latest = slow_read  # type: ignore[method-assign]
    with pytest.raises(AwsUnavailable, match="StartExecution"):
        bounded(rig, invocation).handle(parse_notice(rebalance()))
    assert rig.workflows.requests == []


def interrupt_call_seconds() -> float:
    """One call at its longest with the interrupt function's SDK settings (its environment in the
    template, else the defaults every function has)."""
    env = TEMPLATE["Resources"]["InterruptFunction"]["Properties"]["Environment"]["Variables"]
    names = {"AWS_MAX_ATTEMPTS": "aws_max_attempts", "AWS_CONNECT_TIMEOUT": "aws_connect_timeout",
             "AWS_READ_TIMEOUT": "aws_read_timeout"}  # fmt: skip
    fields = RuntimeConfig.model_fields
    value = {f: float(env[n]) if n in env else float(fields[f].default) for n, f in names.items()}
    return worst_call_seconds(
        int(value["aws_max_attempts"]), value["aws_connect_timeout"], value["aws_read_timeout"]
    )


def test_the_interrupt_functions_calls_fit_its_timeout() -> None:
    """With the SDK's defaults one call takes up to 49 s (three attempts, the back-off, a send token),
    more than the function's whole Timeout: the deadline would start nothing. The function's own
    settings (one attempt, short timeouts: SQS brings a failed record back) let several calls fit."""
    call = interrupt_call_seconds()
    timeout = TEMPLATE["Resources"]["InterruptFunction"]["Properties"]["Timeout"]
    assert 2 * call + STEP_MARGIN_SECONDS <= timeout, (call, timeout)


def test_the_handler_gives_the_interrupter_its_invocations_time(monkeypatch: pytest.MonkeyPatch) -> None:
    app = load_app()
    seen: list[Any] = []

    class Clients:
        config = type("C", (), {"cluster_name": "prod"})()

        def interrupter(self, metric: Any, remaining_ms: Any = None) -> Any:
            seen.append(remaining_ms)
            raise RuntimeError("stop here")

    monkeypatch.setattr(app, "get_clients", lambda: Clients())
    context = type("Ctx", (), {"get_remaining_time_in_millis": lambda self: 1234, "function_name": "f",
                               "memory_limit_in_mb": 128, "invoked_function_arn": "arn", "aws_request_id": "r",
                               "function_version": "1", "log_group_name": "g", "log_stream_name": "s"})()  # fmt: skip
    with pytest.raises(RuntimeError):
        app.handler({"Records": []}, context)
    assert seen and seen[0] is not None and seen[0]() == 1234
