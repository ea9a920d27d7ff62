"""The interrupt function within its invocation's time: a record it cannot finish is not started.

Lambda stops the function at its Timeout wherever it stands, and an SQS batch whose invocation timed out
comes back whole: every message of it, the ones handled too, is received again and counts towards the
queue's maxReceiveCount before the dead-letter queue (Lambda Developer Guide, "Using Lambda with Amazon
SQS": with ReportBatchItemFailures only a response names the failed records). The other functions keep
to :class:`~spillway.act.deadline.Deadline`; so does this one now."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import boto3
import botocore.endpoint
import pytest
from botocore.awsrequest import AWSResponse
from test_interrupt import ARN, WARNED_AT, Rig, body, load_app, sample, sqs_event, world
from test_template_contract import TEMPLATE

from spillway.act.deadline import Deadline
from spillway.act.interrupt import Interrupter, parse_notice
from spillway.adapters.aws import AwsSettings
from spillway.adapters.sfn import Executions
from spillway.errors import AwsUnavailable
from spillway.model.calltime import STEP_MARGIN_SECONDS
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


def test_the_interrupt_functions_calls_fit_its_timeout() -> None:
    """With the SDK's defaults one call takes up to 49 s (three attempts, the back-off, a send token),
    more than the function's whole Timeout: the deadline would start nothing. The function's own
    settings (two attempts, short timeouts) let the snapshot's read (two calls) fit when a batch starts."""
    call = interrupt_sdk_settings().worst_call_seconds()
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


def interrupt_sdk_settings() -> AwsSettings:
    """The SDK settings the interrupt function builds its clients with (its environment in the template,
    else the defaults every function has)."""
    env = TEMPLATE["Resources"]["InterruptFunction"]["Properties"]["Environment"]["Variables"]
    fields = RuntimeConfig.model_fields

    def value(name: str, field: str) -> float:
        return float(env[name]) if name in env else float(fields[field].default)

    return AwsSettings(
        max_attempts=int(value("AWS_MAX_ATTEMPTS", "aws_max_attempts")),
        connect_timeout=value("AWS_CONNECT_TIMEOUT", "aws_connect_timeout"),
        read_timeout=value("AWS_READ_TIMEOUT", "aws_read_timeout"),
    )


def throttled_once(settings: AwsSettings) -> tuple[Any, list[str]]:
    """A Step Functions client built as the function builds it, whose first StartExecution AWS throttles
    (Step Functions API Reference, common errors: ThrottlingException, HTTP 400) and whose next one
    starts the execution; and the answers it was given, in order."""
    session = boto3.Session(aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1")
    client = session.client("stepfunctions", config=settings.botocore_config())
    answers: list[str] = []

    def answer(request: Any, **_: Any) -> AWSResponse:
        throttled = not answers
        answers.append("throttled" if throttled else "started")
        doc = (
            {"__type": "ThrottlingException", "message": "Rate exceeded"}
            if throttled
            else {"executionArn": f"{ARN.replace(':stateMachine:', ':execution:')}:x", "startDate": 0}
        )
        raw = AWSResponse(
            request.url, 400 if throttled else 200, {"Content-Type": "application/x-amz-json-1.0"}, None
        )
        raw._content = json.dumps(doc).encode()  # type: ignore[attr-defined]
        return raw

    client.meta.events.register("before-send.sfn.StartExecution", answer)
    return client, answers


def test_a_spot_warnings_throttled_start_execution_is_asked_again_in_its_invocation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The interrupt function's SDK settings and its Timeout: a StartExecution AWS throttles once (a
    burst of Spot warnings is when throttles come) is asked again after the SDK's back-off (at most a
    second for the first retry of a throttle: botocore ExponentialBackoff) and the drain starts in the
    same invocation. With one attempt the record failed, and SQS brought it back only when the queue's
    VisibilityTimeout ran out: the drain started 40 s late, with 50 s of the warning's 90 s left."""
    monkeypatch.setattr(botocore.endpoint.time, "sleep", lambda _seconds: None)  # the back-off, not waited
    settings = interrupt_sdk_settings()
    client, answers = throttled_once(settings)
    rig = Rig(world())
    timeout = float(TEMPLATE["Resources"]["InterruptFunction"]["Properties"]["Timeout"])
    interrupter = replace(
        rig.interrupter(),
        workflows=Executions(client),
        deadline=Deadline(lambda: timeout, settings.worst_call_seconds()),
    )
    response = load_app().process_batch(interrupter, sqs_event(body(sample("interrupt-spot-warning.json"))))
    assert response == {"batchItemFailures": []}
    assert answers == ["throttled", "started"]
