"""A raise marker its steps left bare for good (act/claims.py ``settle_abandoned``, run by every plan).

A scale-up's SetDesired (or a gang's RaiseDesired) may leave its marker bare for its retry: an ask again
refused for now or not sent, no time left to read the group back. NextRound (a scale-up) or GiveBack (a
gang) settles one no retry did. When those fail for good (NextRound's 5 tries, GiveBack's 11), or the
execution is stopped or times out, nothing did: the marker stayed bare for its two days (the table's
TTL), and every other owner of the group marked within 15 minutes after it read it as a settled raise
still waiting for its instances (``_awaited``). An unsettled owner (its own raise's answer lost) then
left unclaimed the instances its own raise launched, for as long as the marker lived: its check ended
at its deadline with them running unclaimed (a rollback gang ``timeout``, given back, its group backed
off, its pods planned elsewhere). Now the next plan whose snapshot was read once the marker's step
could no longer run settles it from that read, as a lost answer is settled: at the raise's value and
alone in its window, recorded asked; else kept unsettled."""

from __future__ import annotations

from datetime import timedelta

from fakes import FakeLedger, FakeSnapshots, FakeWorkflows
from plan_world import NOW
from test_planning import gpu_world as world
from test_planning import settings, snapshot_of

from spillway.act.claims import (
    KEEP,
    MARKER_STEP,
    RAISE_PREFIX,
    SET_PREFIX,
    Owner,
    own_instances,
    settle_abandoned,
)
from spillway.act.planning import run_plan
from spillway.model.calltime import SCALE_FUNCTION_TIMEOUT_SECONDS
from spillway.model.cluster import format_time
from spillway.model.state import UNSETTLED_PREFIX

WHERE = "us-east-1/gpu-east"
NEW = ["i-0a00000000000001", "i-0a00000000000002"]


def mark(ledger: FakeLedger, owner: str, before: int, after: int, at: object, **more: object) -> Owner:
    value = {
        "before": before,
        "after": after,
        "count": after - before,
        "group": WHERE,
        "at": format_time(at),
        **more,
    }  # type: ignore[arg-type]
    ledger.claim("ml", RAISE_PREFIX + owner, value, expires=NOW + KEEP)
    return Owner(ledger, "ml", "us-east-1", "gpu-east", owner)


def dead_and_unsettled(ledger: FakeLedger) -> Owner:
    """A dead execution's bare raise 0 -> 2 (never applied), and one marked a minute later whose answer was
    lost (kept unsettled) but which did apply: the group runs its two instances."""
    mark(ledger, "up-dead", 0, 2, NOW)
    later = mark(ledger, "up-later", 0, 2, NOW + timedelta(minutes=1))
    ledger.claim(
        "ml", UNSETTLED_PREFIX + "up-later", {"group": WHERE, "at": format_time(NOW)}, expires=NOW + KEEP
    )
    return later


def test_a_bare_marker_of_a_dead_execution_holds_another_owners_instances_as_long_as_it_lives() -> None:
    """The measure of it: the unsettled owner claims none of its own two launches, a minute after them and
    two days after (its check ends at its deadline, 10 minutes by default, with nothing claimed)."""
    ledger = FakeLedger()
    later = dead_and_unsettled(ledger)

    for after in (timedelta(minutes=2), timedelta(minutes=10), KEEP - timedelta(minutes=1)):
        assert own_instances(later, NEW, 2, NOW + after) == [], after


def test_the_plans_settle_it_once_its_step_is_over_and_the_other_owner_claims_its_own() -> None:
    ledger = FakeLedger()
    later = dead_and_unsettled(ledger)
    read_at = NOW + MARKER_STEP

    settled = settle_abandoned(ledger, "ml", {WHERE: (2, read_at)}, read_at)

    # the group at 2 is both raises' value, and the other marker is in its window: nobody can tell
    assert settled == {"up-dead": "unsettled"}
    assert UNSETTLED_PREFIX + "up-dead" in ledger.claims("ml", UNSETTLED_PREFIX)
    assert own_instances(later, NEW, 2, read_at) == NEW


def test_a_read_made_while_its_step_may_still_run_settles_nothing() -> None:
    """The step runs at most the scale function's Timeout after its marker: a read before that may be
    older than its ask, and its retry may still settle it."""
    ledger = FakeLedger()
    dead_and_unsettled(ledger)
    assert timedelta(seconds=SCALE_FUNCTION_TIMEOUT_SECONDS) == MARKER_STEP
    early = NOW + MARKER_STEP - timedelta(seconds=1)

    assert settle_abandoned(ledger, "ml", {WHERE: (0, early)}, early) == {}
    assert UNSETTLED_PREFIX + "up-dead" not in ledger.claims("ml", UNSETTLED_PREFIX)


def test_a_raise_read_at_its_value_alone_in_its_window_is_recorded_asked() -> None:
    """It landed: recorded asked, so it stays awaited (its nodes are coming) and is never raised again."""
    ledger = FakeLedger()
    mark(ledger, "up-dead", 0, 2, NOW)
    read_at = NOW + timedelta(minutes=3)

    assert settle_abandoned(ledger, "ml", {WHERE: (2, read_at)}, read_at) == {"up-dead": "raised"}
    assert SET_PREFIX + "up-dead" in ledger.claims("ml", SET_PREFIX)
    assert UNSETTLED_PREFIX + "up-dead" not in ledger.claims("ml", UNSETTLED_PREFIX)


def test_answered_settled_and_attach_markers_and_unread_groups_are_left_as_they_are() -> None:
    ledger = FakeLedger()
    mark(ledger, "up-asked", 0, 2, NOW)
    ledger.claim("ml", SET_PREFIX + "up-asked", {"group": WHERE}, expires=NOW + KEEP)
    mark(ledger, "gang-attach", 0, 3, NOW, by="AttachInstances")
    read_at = NOW + timedelta(minutes=3)

    assert settle_abandoned(ledger, "ml", {WHERE: (5, read_at)}, read_at) == {}
    mark(ledger, "up-elsewhere", 0, 2, NOW)
    assert settle_abandoned(ledger, "ml", {}, read_at) == {}  # no read of its group: nothing known


def test_the_next_plan_settles_a_bare_marker_on_its_snapshot() -> None:
    """run_plan, on a snapshot read three minutes after the dead execution's marker, its group still at
    0: kept unsettled (dated as the marker, so the plans judge that raise's state entry unsettled)."""
    ledger = FakeLedger()
    mark(ledger, "up-dead", 0, 2, NOW - timedelta(minutes=3))
    snapshots = FakeSnapshots()
    ref = snapshots.add(snapshot_of(world(), NOW))

    run_plan(ref, snapshots=snapshots, ledger=ledger, executions=FakeWorkflows(), settings=settings(),
             now=NOW + timedelta(seconds=20))  # fmt: skip

    (value,) = ledger.claims("ml", UNSETTLED_PREFIX + "up-dead").values()
    assert value["at"] == format_time(NOW - timedelta(minutes=3))
