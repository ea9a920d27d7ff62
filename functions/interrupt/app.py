"""Interrupt Lambda: EC2 interruption notices from the interrupt queue (SQS) → DrainNode executions.

Each SQS record's body is one EventBridge event (Spot interruption warning, rebalance recommendation,
AWS Health scheduled change, instance state change, terminate lifecycle action). Thin: the work is
:mod:`spillway.act.interrupt`. Partial batch responses (Powertools batch utilities): a record that
failed for a reason that may pass (Step Functions, DynamoDB, no snapshot yet) is reported in
``batchItemFailures`` and comes back; a malformed one (:class:`MalformedNotice`, the field named in
the log) is dropped and counted, since no retry can fix it.

Metrics (EMF): InterruptDrainsStarted, InterruptDuplicates, InterruptIgnored, InterruptMalformed,
InstanceGoneUndrained, LifecycleActionSeen, LifecycleActionsCompleted, GroupsBackedOff.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from spillway.act.interrupt import Interrupter, parse_notice
from spillway.clients import get_clients
from spillway.errors import InputError
from spillway.observability import add_count, logger, metrics, set_cluster, tracer

processor = BatchProcessor(event_type=EventType.SQS)


def handle_record(interrupter: Interrupter, record: SQSRecord) -> list[dict[str, Any]]:
    """One message: its outcomes, or [] when it is dropped as malformed. Other errors propagate."""
    try:
        outcomes = interrupter.handle(parse_notice(record.body))
    except InputError as exc:
        add_count("InterruptMalformed", 1)
        logger.warning(
            "notice dropped: it cannot succeed on retry",
            extra={"message_id": record.message_id, "field": exc.field, "error": str(exc)},
        )
        return []
    logger.info("notice handled", extra={"message_id": record.message_id, "outcomes": outcomes})
    return outcomes


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    clients = get_clients()
    set_cluster(clients.config.cluster_name)
    interrupter = clients.interrupter(add_count)
    response = process_partial_response(
        event=event,
        record_handler=lambda record: handle_record(interrupter, record),
        processor=processor,
        context=context,
    )
    return dict(response)
