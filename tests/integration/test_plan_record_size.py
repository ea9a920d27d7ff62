"""the plan record committed with the state stays within DynamoDB's 400 KB item limit."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from spillway.adapters.plans_store import PlanStore
from spillway.adapters.state_store import StateStore
from spillway.local.cfn import create_tables
from spillway.model.act import PlanRecord
from spillway.model.state import State

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"
NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
KEY = "2026-11-02T12:00:00.000000Z"


@pytest.fixture
def ddb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_tables(TEMPLATE, client, {"StateTable": "state", "PlansTable": "plans"})
        yield client


def test_a_plan_of_a_large_burst_is_committed_with_its_record_cut_to_fit(ddb: Any) -> None:
    """A burst of 120,000 pending pods (Job pods ``ns/job-0001-x7k2q``) placed on new nodes of three
    groups: the plan's ``scale_up`` entries name every pod. PlanStore compresses the plan and, past 300 KB,
    drops ``pending`` and ``kept`` ("past this the per-pod and per-node detail is dropped"), but never
    checks that what is left fits: the ``scale_up`` pod lists alone compress to over 400 KB here. DynamoDB
    refuses an item over 400 KB ("The maximum item size in DynamoDB is 400 KB", Developer Guide, "Quotas:
    Items"; in a TransactWriteItems the whole transaction is cancelled), so the state commit, which
    carries the record, fails on every plan while the burst is pending: the one moment scaling matters.
    The record is an audit copy; it must be cut further, never stop the commit."""
    rnd = random.Random(13)
    alpha = "bcdfghjklmnpqrstvwxz2456789"
    pods = [f"team-{i % 7}/job-{i // 500:04d}-{''.join(rnd.choices(alpha, k=5))}" for i in range(120_000)]
    plan = {
        "scale_up": [
            {
                "group": f"g{g}",
                "region": "us-east-1",
                "from": 0,
                "to": 4000,
                "pods": pods[g::3],
                "reason": "x",
            }
            for g in range(3)
        ],
        "uncordon": [],
        "drain": [],
        "pending": [{"pod": p, "code": "new-node", "reason": "placed on a new node"} for p in pods],
        "kept": [],
    }
    record = PlanRecord(cluster="ml", plan_id="p1", snapshot_key=KEY, fingerprint="f" * 64,
                        created_at=NOW, plan=plan, executions=("up-p1",))  # fmt: skip
    store = StateStore(ddb, "state", plans=PlanStore(ddb, "plans"))

    version = store.commit(
        "ml", State(), expected_version=0, snapshot_key=KEY, plan_id="p1", now=NOW, plan=record
    )

    assert version == 1
    assert PlanStore(ddb, "plans").get("ml", KEY) is not None
