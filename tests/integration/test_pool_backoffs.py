"""Instance type / zone back-offs (Spot interruptions) in the state table, on moto."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from spillway.adapters.state_store import Backoff, StateStore, merge_backoffs
from spillway.local.cfn import create_tables
from spillway.model.state import POOL_PREFIX, GroupState, State, pool_key

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"
NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)


@pytest.fixture
def store() -> Iterator[StateStore]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_tables(TEMPLATE, client, {"StateTable": "state", "PlansTable": "plans"})
        yield StateStore(client, "state")


def test_a_pool_backoff_lands_in_state_pools_not_in_groups(store: StateStore) -> None:
    until = NOW + timedelta(minutes=15)
    pool = POOL_PREFIX + pool_key("us-east-1a", "m5.large")
    assert store.put_backoff("ml", pool, until, "spot interruption", region="us-east-1")
    assert not store.put_backoff("ml", pool, NOW + timedelta(minutes=1), "shorter")
    assert store.put_backoff("ml", "gpu", until, "ICE")

    state = store.load("ml").state

    assert state.pools == {"us-east-1a/m5.large": GroupState(backoff_until=until, reason="spot interruption")}
    assert set(state.groups) == {"gpu"}
    wire: dict[str, Any] = state.to_wire()
    assert wire["pools"]["us-east-1a/m5.large"]["reason"] == "spot interruption"
    assert State.model_validate(wire) == state


def test_a_state_without_pools_keeps_its_wire_form() -> None:
    state = merge_backoffs(State(), [Backoff("gpu", NOW, "x")])
    assert "pools" not in state.to_wire()
