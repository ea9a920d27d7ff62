"""Pool back-offs (a capacity type of an instance type in a zone: Spot interruptions) in the state table,
on moto."""

from __future__ import annotations

import logging
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
    pool = POOL_PREFIX + pool_key("spot", "us-east-1a", "m5.large")
    assert pool == "pool#spot/us-east-1a/m5.large"
    assert store.put_backoff("ml", pool, until, "spot interruption", region="us-east-1")
    assert not store.put_backoff("ml", pool, NOW + timedelta(minutes=1), "shorter")
    assert store.put_backoff("ml", "gpu", until, "ICE")

    state = store.load("ml").state

    assert state.pools == {
        "spot/us-east-1a/m5.large": GroupState(backoff_until=until, reason="spot interruption")
    }
    assert set(state.groups) == {"gpu"}
    wire: dict[str, Any] = state.to_wire()
    assert wire["pools"]["spot/us-east-1a/m5.large"]["reason"] == "spot interruption"
    assert State.model_validate(wire) == state


def test_an_older_pool_item_without_a_capacity_type_is_the_spot_pool(store: StateStore) -> None:
    """Items written before pools had a capacity type (``backoff#pool#<zone>/<type>``, by Spot
    interruptions only) still back off that Spot pool, merged with a newer item for the same pool."""
    older, newer = NOW + timedelta(minutes=15), NOW + timedelta(minutes=5)
    assert store.put_backoff("ml", "pool#us-east-1a/m5.large", older, "spot interruption (older item)")
    assert store.put_backoff("ml", POOL_PREFIX + pool_key("spot", "us-east-1a", "m5.large"), newer, "newer")

    state = store.load("ml").state

    assert state.pools == {
        "spot/us-east-1a/m5.large": GroupState(backoff_until=older, reason="spot interruption (older item)")
    }


def test_a_pool_item_that_names_no_pool_is_skipped_and_named_not_a_state_that_stops_every_plan(
    store: StateStore, caplog: pytest.LogCaptureFixture
) -> None:
    """A back-off is advice: one item nobody can read (a stray write, a newer writer's form) costs at
    most a launch in that pool, while a corrupt state stops every plan of the cluster until the item's
    TTL (review17). It is skipped, and the warning names it; the readable ones still hold."""
    store.put_backoff("ml", "pool#reserved/us-east-1a/m5.large", NOW, "?")
    store.put_backoff("ml", POOL_PREFIX + pool_key("spot", "us-east-1a", "m5.large"), NOW, "interrupted")

    with caplog.at_level(logging.WARNING):
        state = store.load("ml").state

    assert list(state.pools) == ["spot/us-east-1a/m5.large"]
    assert any("reserved/us-east-1a/m5.large" in r.getMessage() for r in caplog.records)


def test_a_state_without_pools_keeps_its_wire_form() -> None:
    state = merge_backoffs(State(), [Backoff("gpu", NOW, "x")])
    assert "pools" not in state.to_wire()
