"""Pool back-offs (a capacity type of an instance type in a zone: Spot interruptions) in the state table,
on moto."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from spillway.adapters.state_store import Backoff, StateStore, merge_backoffs
from spillway.local.cfn import create_tables
from spillway.model.state import POOL_PREFIX, PoolState, State, pool_key

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"
NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)


@pytest.fixture
def store() -> Iterator[StateStore]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_tables(TEMPLATE, client, {"StateTable": "state", "PlansTable": "plans"})
        yield StateStore(client, "state")


def test_a_backoffs_reason_quoting_a_credential_is_stored_redacted(store: StateStore) -> None:
    """A back-off's reason is the error the launch failed with (the item outlives every log line)."""
    secret = "k8s-aws-v1." + secrets.token_urlsafe(40)
    assert store.put_backoff("ml", "gpu", NOW + timedelta(minutes=15), f"launch failed: Bearer {secret}")
    assert store.load("ml").state.groups["gpu"].reason == "launch failed: Bearer <redacted>"


def test_a_pool_backoff_lands_in_state_pools_not_in_groups(store: StateStore) -> None:
    until = NOW + timedelta(minutes=15)
    pool = POOL_PREFIX + pool_key("spot", "us-east-1a", "m5.large")
    assert pool == "pool#spot/us-east-1a/m5.large"
    assert store.put_backoff("ml", pool, until, "spot interruption", region="us-east-1")
    assert not store.put_backoff("ml", pool, NOW + timedelta(minutes=1), "shorter")
    assert store.put_backoff("ml", "gpu", until, "ICE")

    state = store.load("ml").state

    assert state.pools == {
        "spot/us-east-1a/m5.large": PoolState(backoff_until=until, reason="spot interruption")
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
        "spot/us-east-1a/m5.large": PoolState(backoff_until=older, reason="spot interruption (older item)")
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


GANG_POOL = POOL_PREFIX + pool_key("on-demand", "us-east-1a", "p5.48xlarge")


def test_a_gangs_pool_back_off_round_trips_how_many_nodes_ec2_refused(store: StateStore) -> None:
    """The item keeps ``nodes`` (a 64-node gang's fleet: EC2 had not 64 at once); an item without it,
    written before the field or by a scale-up or a Spot interruption, is EC2 had none (1)."""
    until = NOW + timedelta(minutes=15)
    assert store.put_backoff("ml", GANG_POOL, until, "gang ml/train", region="us-east-1", nodes=64, now=NOW)
    assert store.put_backoff("ml", POOL_PREFIX + pool_key("spot", "us-east-1a", "m5.large"), until, "x")

    state = store.load("ml").state

    assert state.pools["on-demand/us-east-1a/p5.48xlarge"] == PoolState(
        backoff_until=until, reason="gang ml/train", nodes=64
    )
    assert state.pools["spot/us-east-1a/m5.large"].nodes == 1
    [item] = [b for b in store.backoffs("ml") if b.group == GANG_POOL]
    assert item.nodes == 64
    assert State.model_validate(state.to_wire()) == state


def test_a_scale_up_failure_after_a_gangs_refusal_wins_the_pool(store: StateStore) -> None:
    """A 64-node gang's refusal, then a one-node scale-up that failed there too: EC2 had none."""
    assert store.put_backoff("ml", GANG_POOL, NOW + timedelta(minutes=15), "gang", nodes=64, now=NOW)
    later = NOW + timedelta(minutes=2)
    assert store.put_backoff("ml", GANG_POOL, later + timedelta(minutes=15), "scale-up", now=later)
    assert store.load("ml").state.pools["on-demand/us-east-1a/p5.48xlarge"].nodes == 1


def test_a_gangs_refusal_does_not_weaken_a_live_scale_up_failure(store: StateStore) -> None:
    """The stronger evidence keeps the pool for its expiry, though the gang's lasts longer; once it is
    over, the gang's replaces it (an over item is gone only when the table's TTL gets to it)."""
    assert store.put_backoff("ml", GANG_POOL, NOW + timedelta(minutes=15), "scale-up", now=NOW)
    later = NOW + timedelta(minutes=5)
    assert not store.put_backoff("ml", GANG_POOL, later + timedelta(minutes=15), "gang", nodes=64, now=later)
    pool = store.load("ml").state.pools["on-demand/us-east-1a/p5.48xlarge"]
    assert (pool.nodes, pool.reason, pool.backoff_until) == (1, "scale-up", NOW + timedelta(minutes=15))

    after = NOW + timedelta(minutes=16)
    assert store.put_backoff("ml", GANG_POOL, after + timedelta(minutes=15), "gang", nodes=64, now=after)
    assert store.load("ml").state.pools["on-demand/us-east-1a/p5.48xlarge"].nodes == 64


def test_a_smaller_gangs_refusal_is_stronger_than_a_bigger_ones(store: StateStore) -> None:
    assert store.put_backoff("ml", GANG_POOL, NOW + timedelta(minutes=15), "gang of 64", nodes=64, now=NOW)
    assert store.put_backoff("ml", GANG_POOL, NOW + timedelta(minutes=14), "gang of 8", nodes=8, now=NOW)
    assert not store.put_backoff(
        "ml", GANG_POOL, NOW + timedelta(minutes=16), "gang of 16", nodes=16, now=NOW
    )
    assert store.load("ml").state.pools["on-demand/us-east-1a/p5.48xlarge"].reason == "gang of 8"


def test_the_state_and_an_item_for_one_pool_merge_as_the_store_does() -> None:
    """The plan's state carries the pool back-offs it loaded; a later load merges them with the items
    by the same rule: a stronger one still lasting wins."""
    carried = State(pools={"on-demand/us-east-1a/p5.48xlarge": PoolState(
        backoff_until=NOW + timedelta(minutes=10), reason="scale-up")})  # fmt: skip
    gang = Backoff(GANG_POOL, NOW + timedelta(minutes=20), "gang", nodes=64)
    assert merge_backoffs(carried, [gang], now=NOW).pools["on-demand/us-east-1a/p5.48xlarge"].nodes == 1
    over = NOW + timedelta(minutes=11)
    assert merge_backoffs(carried, [gang], now=over).pools["on-demand/us-east-1a/p5.48xlarge"].nodes == 64


def test_a_back_off_over_already_does_not_replace_a_live_one(store: StateStore) -> None:
    """A Spot warning handled late (the queue keeps a notice for a day while the function fails or its
    mapping is off; a redrive from the dead-letter queue is refused, the runbook drains by hand) backs
    its pool off until the warning's time + 15 minutes, over by then: EC2 had none then, which says
    nothing now. Its fewer nodes made it the "stronger" item, so it replaced a 64-node gang's live back-off, and the next
    64-node gang was sent into the pool EC2 had just refused it. One over by ``now`` gives way
    (:func:`~spillway.model.state.stronger_backoff`): it is not written."""
    assert store.put_backoff("ml", GANG_POOL, NOW + timedelta(minutes=15), "gang", nodes=64, now=NOW)
    later = NOW + timedelta(minutes=5)
    warned = NOW - timedelta(minutes=30)

    assert not store.put_backoff(
        "ml", GANG_POOL, warned + timedelta(minutes=15), "spot interruption (redriven)", now=later
    )
    pool = store.load("ml", later).state.pools["on-demand/us-east-1a/p5.48xlarge"]
    assert (pool.nodes, pool.reason) == (64, "gang")
