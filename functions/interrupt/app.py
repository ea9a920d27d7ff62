"""Interrupt Lambda: EC2 interruption notices from the interrupt queue (SQS) → DrainNode executions.

Each SQS record's body is one EventBridge event (Spot interruption warning, rebalance recommendation,
AWS Health scheduled change, instance state change, terminate lifecycle action). Thin: the work is
:mod:`spillway.act.interrupt`. Partial batch responses (Powertools batch utilities): a record that
failed for a reason that may pass (Step Functions, DynamoDB, no snapshot yet) is reported in
``batchItemFailures`` and comes back after the queue's visibility timeout (the invocation fails only
when every record failed, one of them for a reason other than waiting for observe: :func:`process_batch`); so is a malformed one
(:class:`MalformedNotice`, the field named in the log), which no retry fixes but which may be a real
warning Spillway failed to read: after maxReceiveCount receives it sits in the alarmed dead-letter
queue. An event Spillway does not act on (:class:`IrrelevantNotice`) is dropped and counted. Within the
invocation's time (``Interrupter.deadline``, from the context's remaining time): a record, or a call of
one, that could still run when Lambda stops the function is not started and is reported failed, so that
the records handled before it are not received again (a batch the Timeout cut came back whole).

Metrics (EMF): InterruptDrainsStarted, InterruptDuplicates, InterruptIgnored, InterruptMalformed,
InstanceGoneUndrained, LifecycleActionSeen, LifecycleActionsCompleted, LifecycleNoNode, SpotGroupsBackedOff.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from spillway.act.interrupt import Interrupter, IrrelevantNotice, MalformedNotice, parse_notice
from spillway.clients import get_clients
from spillway.errors import AwsUnavailable, NodeNotObserved
from spillway.observability import add_count, logger, metrics, redacting, set_cluster, tracer

# The batch utility would raise whenever every record failed; process_batch decides instead
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def handle_record(interrupter: Interrupter, record: SQSRecord) -> list[dict[str, Any]]:
    """One message: its outcomes, or [] when it is an event Spillway does not act on. Every error
    propagates (the record is reported failed), a malformed notice's too, so that it reaches the DLQ."""
    try:
        notice = parse_notice(record.body, now=interrupter.clock())
    except IrrelevantNotice as exc:
        add_count("InterruptIgnored", 1)
        logger.info(
            "event ignored: not a notice Spillway acts on",
            extra={"message_id": record.message_id, "field": exc.field, "error": str(exc)},
        )
        return []
    except MalformedNotice as exc:
        add_count("InterruptMalformed", 1)
        logger.error(
            "notice malformed: reported failed, it goes to the dead-letter queue after maxReceiveCount receives",
            extra={"message_id": record.message_id, "field": exc.field, "error": str(exc)},
        )
        raise
    try:
        outcomes = interrupter.handle(notice)
    except AwsUnavailable as exc:
        # unsent: the invocation's time ran out before this record (or its next call)
        if exc.unsent:
            logger.info(
                "notice not started in time: reported failed, SQS brings it back",
                extra={"message_id": record.message_id, "kind": notice.kind, "error": str(exc)},
            )
        raise
    except NodeNotObserved as exc:
        # no function error (process_batch): this line is what the log keeps of the wait
        logger.info(
            "notice waits for a later snapshot: reported failed, SQS brings it back",
            extra={"message_id": record.message_id, "kind": notice.kind, "error": str(exc)},
        )
        raise
    logger.info("notice handled", extra={"message_id": record.message_id, "outcomes": outcomes})
    return outcomes


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
@redacting
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    clients = get_clients()
    set_cluster(clients.config.cluster_name)
    remaining_ms = getattr(context, "get_remaining_time_in_millis", None)
    return process_batch(clients.interrupter(add_count, remaining_ms), event, context)


def process_batch(interrupter: Interrupter, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """The batch's failed records in ``batchItemFailures`` (SQS brings them back). The invocation fails
    (BatchProcessingError) when every record failed and one of them for a reason other than waiting
    for observe's next snapshot (:class:`NodeNotObserved`): that wait is tried again by design for up
    to JOIN_RETRY_SECONDS, and failing the invocation on each try counted Lambda Errors that raised
    interrupt-errors for a routine notice of a node still joining."""
    response = process_partial_response(
        event=event,
        record_handler=lambda record: handle_record(interrupter, record),
        processor=processor,
        context=context,
    )
    failures = processor.exceptions
    waiting = all(isinstance(exc, NodeNotObserved) for _, exc, _ in failures)
    if failures and len(failures) == len(processor.records) and not waiting:
        raise BatchProcessingError(
            msg=f"every record of the batch failed ({len(failures)}), not all of them waiting for a snapshot",
            child_exceptions=failures,
        )
    return dict(response)
