"""the state table's items under concurrency and redelivery (claims, markers, leases)."""

from __future__ import annotations

from typing import Any

import pytest
from test_shared_group import UP, World

from spillway.errors import AwsUnavailable


def test_a_retried_raise_is_not_taken_as_asked_by_another_groups_set_marker() -> None:
    """A plan scales up two groups of one region whose names share a prefix, ``gpu`` and ``gpu-a``: their
    owners are ``up-p-1-1-us-east-1-gpu`` and ``up-p-1-1-us-east-1-gpu-a``. gpu-a's raise is answered
    (``set#up-p-1-1-us-east-1-gpu-a``). gpu's marker PutItem lands but its answer is lost (README,
    *Sharing a group*: "a retry that finds the marker without it (the marker's own write answered with an
    error, failing the step before the raise) settles it as a lost answer is settled: raised now if it
    never applied"). The retry must raise gpu. The ledger's ``claims(cluster, prefix)`` is a Query with
    ``begins_with`` on the sort key (DynamoDB Developer Guide, "Key condition expressions for Query":
    begins_with matches every key starting with the prefix), so ``_asked`` reading
    ``set#up-p-1-1-us-east-1-gpu`` also finds gpu-a's ``set#`` item and takes gpu's raise as asked: gpu is
    never raised, its scale-up waits for nodes nobody launches and backs the group off."""
    w = World()
    w.cloud.add_group("gpu-a", ["i-0aaa0000000000000"], max_size=10, instance_type="g5.xlarge")
    up_a = {**UP, "group": {**UP["group"], "group": "gpu-a"}}
    prep_a = w.up.prepare(up_a)
    prep = w.up.prepare(UP)
    w.up.set_desired({**up_a, "prep": prep_a})
    assert w.cloud.groups[("us-east-1", "gpu-a")]["DesiredCapacity"] == 3

    real = w.ledger.claim
    lost: list[str] = []

    def claim(cluster: str, item: str, value: Any, **kw: Any) -> Any:
        got = real(cluster, item, value, **kw)
        if item == "raise#" + prep["owner"] and not lost:  # landed, answer lost: the step fails
            lost.append(item)
            raise AwsUnavailable(f"PutItem {item}: connection reset")
        return got

    w.ledger.claim = claim  # type: ignore[method-assign]
    with pytest.raises(AwsUnavailable):
        w.up.set_desired({**UP, "prep": prep})
    assert w.desired == 1  # nothing asked of Auto Scaling yet

    out = w.up.set_desired({**UP, "prep": prep})  # Step Functions retries the step

    assert w.desired == 3, out  # raised now: it never applied


def _next_round_retries() -> set[str]:
    import json
    from pathlib import Path

    asl = json.loads((Path(__file__).parents[2] / "statemachines" / "scale_up.asl.json").read_text())
    return {e for r in asl["States"]["NextRound"]["Retry"] for e in r["ErrorEquals"]}


def _commit_refused(**error: Any) -> BaseException:
    """What StateStore.commit raises when DynamoDB answers its TransactWriteItems with ``error``
    (botocore Stubber's add_client_error arguments)."""
    from datetime import UTC, datetime

    import boto3
    from botocore.stub import Stubber

    from spillway.adapters.plans_store import PlanStore
    from spillway.adapters.state_store import StateStore
    from spillway.model.act import PlanRecord
    from spillway.model.state import State

    client = boto3.client(
        "dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    store = StateStore(client, "state", plans=PlanStore(client, "plans"))
    now = datetime(2026, 11, 2, 12, tzinfo=UTC)
    record = PlanRecord(
        cluster="prod", plan_id="p", snapshot_key="k", fingerprint="f", created_at=now, plan={}
    )
    with Stubber(client) as stub:
        stub.add_client_error("transact_write_items", **error)
        with pytest.raises(Exception) as raised:
            store.commit(
                "prod", State(), expected_version=3, snapshot_key="k", plan_id="p", now=now, plan=record
            )
    return raised.value


@pytest.mark.parametrize(
    "reason",
    [
        ("TransactionConflict", "Transaction is ongoing for the item"),
        (
            "ThrottlingError",
            "Throughput exceeds the current capacity for one or more global secondary indexes",
        ),
    ],
)
def test_a_commit_cancelled_by_a_concurrent_transaction_is_retried(reason: tuple[str, str]) -> None:
    """A plan and a scale-up's overflow re-plan commit the state at the same moment: both are
    TransactWriteItems on the state item. DynamoDB cancels one: "There is an ongoing TransactWriteItems
    operation that conflicts with a concurrent TransactWriteItems request. In this case the
    TransactWriteItems operation fails with a TransactionCanceledException" (DynamoDB API Reference,
    TransactWriteItems / TransactionCanceledException), reason ``TransactionConflict``; a transaction
    refused for capacity has reason ``ThrottlingError``. botocore retries neither (its retry rules name
    TransactionInProgressException only). Either way nothing was written and the commit must be tried
    again on a fresh load (README, *Sharing a group*: "a plan that committed meanwhile makes it re-plan
    on the new state"). StateStore.commit read only ConditionalCheckFailed as a conflict and raised the
    rest as AwsError, which NextRound does not retry: its Catch ends the scale-up in ReplanFailed."""
    code, message = reason
    raised = _commit_refused(
        service_error_code="TransactionCanceledException",
        service_message=f"Transaction cancelled, please refer cancellation reasons for specific reasons [{code}, None]",
        modeled_fields={"CancellationReasons": [{"Code": code, "Message": message}, {"Code": "None"}]},
    )

    assert type(raised).__name__ in _next_round_retries(), repr(raised)


def test_a_commit_whose_transaction_is_still_in_progress_is_retried() -> None:
    """TransactWriteItems carries a ClientRequestToken (botocore fills it: the DynamoDB model marks it
    ``idempotencyToken``), so when the SDK sends the call again after a slow answer DynamoDB may answer
    TransactionInProgressException: "The transaction with the given request token is already in
    progress" (DynamoDB API Reference, TransactWriteItems: Errors). botocore's standard and adaptive
    retries count it as a throttle (botocore/retries/standard.py, _THROTTLED_ERROR_CODES); once they are
    used up it reached StateStore.commit as a plain AwsError, which NextRound does not retry: its Catch
    ended the scale-up in ReplanFailed. It is a refusal for now, retried as a throttle: the retry loads
    the state again, so a transaction that did land shows as a newer version, never as a second raise."""
    raised = _commit_refused(
        service_error_code="TransactionInProgressException",
        service_message="The transaction with the given request token is already in progress.",
        http_status_code=400,
    )

    assert type(raised).__name__ in _next_round_retries(), repr(raised)


@pytest.mark.parametrize("code", ["TransactionConflict", "ThrottlingError"])
def test_a_verdict_whose_transaction_was_cancelled_without_a_failed_condition_is_refused_for_now(
    code: str,
) -> None:
    """A raise's verdict is one TransactWriteItems (StateStore.claim_unless). Cancelled for a conflict
    with another transaction on its items, or for capacity, it wrote nothing and says which verdict stands
    of none: AwsThrottled, which the scale steps retry, never an answer that the rival stands."""
    from datetime import UTC, datetime

    import boto3
    from botocore.stub import Stubber

    from spillway.adapters.state_store import StateStore
    from spillway.errors import AwsThrottled

    client = boto3.client(
        "dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    store = StateStore(client, "state")
    with Stubber(client) as stub:
        stub.add_client_error(
            "transact_write_items",
            service_error_code="TransactionCanceledException",
            service_message=f"Transaction cancelled, please refer cancellation reasons for specific reasons [{code}, None]",
            modeled_fields={"CancellationReasons": [{"Code": code}, {"Code": "None"}]},
        )
        with pytest.raises(AwsThrottled):
            store.claim_unless(
                "prod", "set#up", {}, rival="unsettled#up", expires=datetime(2026, 11, 2, tzinfo=UTC)
            )
