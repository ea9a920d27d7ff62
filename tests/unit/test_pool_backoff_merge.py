"""Two back-offs of one pool: which one the pool keeps (one item, one state entry per pool).

The stronger evidence wins while it lasts: a back-off of fewer nodes (EC2 had none: 1) holds back
every launch a back-off of more nodes does, and more. At equal strength the later expiry wins, as it
always did. A stronger back-off that is over by ``now`` is no evidence any more: a weaker, live one
replaces it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from spillway.model.state import PoolState, State, stronger_backoff

NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)


def entry(nodes: int, minutes: int, reason: str = "") -> PoolState:
    return PoolState(backoff_until=NOW + timedelta(minutes=minutes), reason=reason, nodes=nodes)


@pytest.mark.parametrize(
    ("stored", "new", "kept"),
    [
        # a 64-node gang's refusal, then a scale-up's failure: EC2 had none, for everyone
        (entry(64, 15), entry(1, 20), "new"),
        # a scale-up's failure still holding, then a gang's refusal lasting later: the failure holds
        (entry(1, 15), entry(64, 20), "stored"),
        # stronger evidence wins whatever its expiry
        (entry(64, 20), entry(1, 15), "new"),
        (entry(8, 20), entry(64, 25), "stored"),
        # equal strength: the later, as before
        (entry(1, 15), entry(1, 10), "stored"),
        (entry(1, 10), entry(1, 15), "new"),
        (entry(64, 10), entry(64, 15), "new"),
        # a weaker one lasting no longer adds nothing
        (entry(1, 15), entry(8, 15), "stored"),
    ],
)
def test_the_stronger_evidence_wins_while_it_lasts(stored: PoolState, new: PoolState, kept: str) -> None:
    assert stronger_backoff(stored, new, NOW) == (new if kept == "new" else stored)
    assert stronger_backoff(new, stored, NOW) == (new if kept == "new" else stored)  # in either order


def test_a_stronger_back_off_that_is_over_gives_way_to_a_weaker_live_one() -> None:
    """A scale-up's back-off ended at 12:15; a 64-node gang's refusal at 12:16 lasts to 12:31. Kept as
    the stronger, the over one would hide the gang's from the plans (they drop what is over)."""
    over, live = entry(1, 15), entry(64, 31)
    later = NOW + timedelta(minutes=16)
    assert stronger_backoff(over, live, later) == live
    assert stronger_backoff(live, over, later) == live
    # both over: whichever, nothing holds back; the later is kept, as it always was
    assert stronger_backoff(over, entry(64, 14), later) == over


def test_a_pool_entry_without_nodes_is_ec2_had_none_and_keeps_its_wire_form() -> None:
    wire = {
        "nodes": {},
        "groups": {},
        "pools": {"spot/us-east-1a/m5.large": {"backoff_until": "2026-11-02T12:15:00Z", "reason": "x"}},
    }
    state = State.model_validate(wire)
    assert state.pools["spot/us-east-1a/m5.large"].nodes == 1
    assert state.to_wire() == wire


def test_a_gangs_pool_entry_round_trips_its_nodes() -> None:
    state = State(pools={"on-demand/us-east-1a/p5.48xlarge": entry(64, 15, "gang ml/train")})
    wire = state.to_wire()
    assert wire["pools"]["on-demand/us-east-1a/p5.48xlarge"] == {
        "backoff_until": "2026-11-02T12:15:00Z", "reason": "gang ml/train", "nodes": 64,
    }  # fmt: skip
    assert State.model_validate(wire) == state


@pytest.mark.parametrize("nodes", [0, -1, True, "64"])
def test_a_pool_entry_whose_nodes_is_no_count_is_refused(nodes: object) -> None:
    with pytest.raises(ValueError, match="nodes"):
        State.model_validate(
            {"pools": {"spot/us-east-1a/m5.large": {"backoff_until": "2026-11-02T12:15:00Z", "nodes": nodes}}}
        )


def test_an_older_key_and_a_newer_one_for_one_pool_keep_the_stronger() -> None:
    """Older keys (``<zone>/<type>``, Spot interruptions only) are EC2 had none: stronger than a gang's."""
    state = State.model_validate(
        {
            "pools": {
                "us-east-1a/m5.large": {"backoff_until": "2026-11-02T12:10:00Z", "reason": "interrupted"},
                "spot/us-east-1a/m5.large": {"backoff_until": "2026-11-02T12:20:00Z", "nodes": 8},
            }
        }
    )
    assert state.pools["spot/us-east-1a/m5.large"] == PoolState(
        backoff_until=NOW + timedelta(minutes=10), reason="interrupted"
    )
