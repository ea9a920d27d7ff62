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

import pytest
from fakes import FakeLedger, FakeSnapshots, FakeWorkflows
from plan_world import NOW
from test_lost_raise import answering, up_owner
from test_planning import gpu_world as world
from test_planning import settings, snapshot_of
from test_shared_group import UP
from test_shared_group import World as SharedWorld
from test_template_contract import FUNCTIONS, longest_run_seconds, machine_states

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
from spillway.errors import AwsThrottled
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


def test_the_plans_settle_it_once_its_step_is_over_and_the_other_owner_claims_its_own() -> None:
    ledger = FakeLedger()
    later = dead_and_unsettled(ledger)
    read_at = NOW + MARKER_STEP
    # bare, it held the unsettled owner's own two launches for the marker's two days
    for after in (timedelta(minutes=2), KEEP - timedelta(minutes=1)):
        assert own_instances(later, NEW, 2, NOW + after) == [], after

    settled = settle_abandoned(ledger, "ml", {WHERE: (2, read_at)}, read_at)

    # the group at 2 is both raises' value, and the other marker is in its window: nobody can tell
    assert settled == {"up-dead": "unsettled"}
    assert UNSETTLED_PREFIX + "up-dead" in ledger.claims("ml", UNSETTLED_PREFIX)
    assert own_instances(later, NEW, 2, read_at) == NEW


def test_a_read_made_while_its_step_may_still_run_settles_nothing() -> None:
    """The step, retries and all, runs at most MARKER_STEP after its marker: a read before that may be
    older than its ask, and its retry may still settle it."""
    ledger = FakeLedger()
    dead_and_unsettled(ledger)
    assert timedelta(seconds=SCALE_FUNCTION_TIMEOUT_SECONDS) < MARKER_STEP
    early = NOW + MARKER_STEP - timedelta(seconds=1)

    assert settle_abandoned(ledger, "ml", {WHERE: (0, early)}, early) == {}
    assert UNSETTLED_PREFIX + "up-dead" not in ledger.claims("ml", UNSETTLED_PREFIX)


def test_a_raise_read_at_its_value_alone_in_its_window_is_recorded_asked() -> None:
    """It landed: recorded asked, so it stays awaited (its nodes are coming) and is never raised again."""
    ledger = FakeLedger()
    mark(ledger, "up-dead", 0, 2, NOW)
    read_at = NOW + MARKER_STEP

    assert settle_abandoned(ledger, "ml", {WHERE: (2, read_at)}, read_at) == {"up-dead": "raised"}
    assert SET_PREFIX + "up-dead" in ledger.claims("ml", SET_PREFIX)
    assert UNSETTLED_PREFIX + "up-dead" not in ledger.claims("ml", UNSETTLED_PREFIX)


def test_answered_settled_and_attach_markers_and_unread_groups_are_left_as_they_are() -> None:
    ledger = FakeLedger()
    mark(ledger, "up-asked", 0, 2, NOW)
    ledger.claim("ml", SET_PREFIX + "up-asked", {"group": WHERE}, expires=NOW + KEEP)
    mark(ledger, "gang-attach", 0, 3, NOW, by="AttachInstances")
    read_at = NOW + MARKER_STEP

    assert settle_abandoned(ledger, "ml", {WHERE: (5, read_at)}, read_at) == {}
    mark(ledger, "up-elsewhere", 0, 2, NOW)
    assert settle_abandoned(ledger, "ml", {}, read_at) == {}  # no read of its group: nothing known


def test_the_next_plan_settles_a_bare_marker_on_its_snapshot() -> None:
    """run_plan, on a snapshot read once the dead execution's step could no longer run, its group still at
    0: kept unsettled (dated as the marker, so the plans judge that raise's state entry unsettled)."""
    ledger = FakeLedger()
    mark(ledger, "up-dead", 0, 2, NOW - MARKER_STEP)
    snapshots = FakeSnapshots()
    ref = snapshots.add(snapshot_of(world(), NOW))

    run_plan(ref, snapshots=snapshots, ledger=ledger, executions=FakeWorkflows(), settings=settings(),
             now=NOW + timedelta(seconds=20))  # fmt: skip

    (value,) = ledger.claims("ml", UNSETTLED_PREFIX + "up-dead").values()
    assert value["at"] == format_time(NOW - MARKER_STEP)


def test_a_plan_leaves_a_marker_to_its_steps_retries_that_still_ask_again() -> None:
    """SetDesired's first invocation lost its raise (1 -> 3) unapplied and its ask again was refused for now
    (ResourceContention): the marker is bare, for the step's retry. Step Functions retries SetDesired up
    to 6 times for AwsThrottled (and 3 more for Lambda's errors), each a new invocation that may run the
    scale function's whole Timeout: the step can still ask minutes after its marker. A plan whose
    snapshot, read 3 minutes after the marker, shows the group at 1 kept it unsettled, so the retry that
    came then found it settled and asked nothing: a raise that would have been made was never made, its
    pods held for scale_up_claim_minutes. The plan leaves it to the step; the retry raises the group."""
    w = SharedWorld()
    up = w.up.prepare(UP)
    answering(w, "lost", "busy", "applied")
    with pytest.raises(AwsThrottled):
        w.up.set_desired({**UP, "prep": up})
    read_at = NOW + timedelta(minutes=3)

    settle_abandoned(w.ledger, "prod", {"us-east-1/gpu": (w.desired, read_at)}, read_at)
    w.now = read_at
    w.up.set_desired({**UP, "prep": up})  # one of Step Functions' retries of SetDesired

    assert w.desired == 3 and not up_owner(w).unsettled()


def test_a_marker_is_left_to_its_step_for_as_long_as_the_steps_retries_can_run() -> None:
    """The marker's step (SetDesired, a gang's RaiseDesired) with every retry its state allows, each
    invocation to the scale function's Timeout: a read made before that may come before the step's last
    ask again."""
    timeout = float(FUNCTIONS["ScaleFunction"]["Timeout"])
    steps = [
        machine_states("scale_up.asl.json")["Groups/SetDesired"],
        machine_states("gang_launch.asl.json")["RaiseDesired"],
    ]
    assert max(longest_run_seconds(state, timeout) for state in steps) <= MARKER_STEP.total_seconds()


@pytest.mark.parametrize(
    ("theirs", "read", "standing"),
    [(UNSETTLED_PREFIX, 2, "unsettled"), (SET_PREFIX, 0, "raised")],
)
def test_a_verdict_written_meanwhile_by_the_steps_own_settling_stands_alone(
    theirs: str, read: int, standing: str
) -> None:
    """The plan reads the marker bare, then NextRound's settle_unanswered (or a retry) writes its verdict
    before the plan writes its own, which judges otherwise: the plan's write is conditional on the marker
    still being bare (neither set# nor unsettled#: one TransactWriteItems, its ConditionCheck on the other
    item), so exactly one verdict stands and the plan says which. Both stood before, read as unsettled."""
    ledger = FakeLedger()
    mark(ledger, "up-dead", 0, 2, NOW)
    read_at = NOW + MARKER_STEP
    real = ledger.claims

    def claims(cluster: str, prefix: str) -> dict[str, dict[str, object]]:
        out = real(cluster, prefix)
        if prefix == UNSETTLED_PREFIX:  # the plan has read the marker bare: the step's verdict lands
            ledger.claim(cluster, theirs + "up-dead", {"group": WHERE}, expires=NOW + KEEP)
        return out

    ledger.claims = claims  # type: ignore[method-assign]

    settled = settle_abandoned(ledger, "ml", {WHERE: (read, read_at)}, read_at)

    ledger.claims = real  # type: ignore[method-assign]
    verdicts = {*ledger.claims("ml", SET_PREFIX), *ledger.claims("ml", UNSETTLED_PREFIX)}
    assert verdicts == {theirs + "up-dead"}
    assert settled == {"up-dead": standing}


def test_a_verdict_the_plan_could_not_write_is_not_reported_as_the_one_that_stands() -> None:
    """The plan judges a bare marker landed, but its transaction is cancelled for a conflict with the
    step's own (TransactionConflict: DynamoDB API Reference, TransactionCanceledException), which writes
    ``unsettled#`` meanwhile: StateStore.claim_unless says AwsThrottled, nothing of the plan's written.
    The plan settled nothing, so it must not say it settled the raise ``raised`` (its write, unlike the
    step's best-effort record, is not suppressed): it ends this plan's settling, which logs it, and the
    verdict that stands is the step's."""
    ledger = FakeLedger()
    mark(ledger, "up-dead", 0, 2, NOW)
    read_at = NOW + MARKER_STEP

    def conflicted(cluster: str, item: str, value: object, *, rival: str, expires: object) -> str:
        ledger.claim(cluster, rival, {"group": WHERE}, expires=NOW + KEEP)  # the step's transaction
        raise AwsThrottled(f"claim {cluster}/{item} unless {rival}: TransactionCanceledException")

    ledger.claim_unless = conflicted  # type: ignore[method-assign,assignment]

    with pytest.raises(AwsThrottled):
        settle_abandoned(ledger, "ml", {WHERE: (2, read_at)}, read_at)

    assert set(ledger.claims("ml", SET_PREFIX)) == set()
    assert set(ledger.claims("ml", UNSETTLED_PREFIX)) == {UNSETTLED_PREFIX + "up-dead"}
