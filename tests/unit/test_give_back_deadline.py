"""The writes of a give-back and of a scale-up's give-up held to the step's deadline (act/deadline.py).

Lambda stops a function at its Timeout mid-call, and BackOff, GiveBack and NextRound do not retry
``Sandbox.Timedout``: a write Lambda cut there left its step's work half done with nobody to finish it. Each
write of these steps is started only when it ends in time (``Deadline.require``, the one mechanism):
one not started is ``AwsUnavailable`` (``unsent``), which the state machine retries, or, where the
write is best effort, is skipped and logged."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from fakes import FakeCluster, FakeLedger
from test_gang_stale_give_back import GIVE_UP
from test_lost_raise import FLEET
from test_planning import ZONE_C_SHORT, partly_failed, steps
from test_scale_replan_refused import _overflow_round_two
from test_shared_group import NOW, UP
from test_shared_group import World as SharedWorld

from spillway.act.claims import RAISE_PREFIX
from spillway.act.deadline import Deadline
from spillway.errors import AwsUnavailable
from spillway.local import objects as o
from spillway.model.calltime import STEP_MARGIN_SECONDS

CALL = 49.0
NO_TIME = Deadline(lambda: STEP_MARGIN_SECONDS + CALL / 2, CALL)  # not one call fits


def test_a_give_ups_forgetting_of_raises_never_taken_commits_only_in_time() -> None:
    """The last round gives up and takes off the state the raise Auto Scaling never took (best effort).
    Its state read, group read and commit were started whatever time was left: a commit Lambda cut
    ended the execution Sandbox.Timedout (NextRound does not retry it). With no time for them nothing
    is written: the entry stays (the plans count it for scale_up_claim_minutes at most, as when the
    commit conflicts), and the execution still ends."""
    out, ledger = _overflow_round_two(raised_marker=False, round_=3, deadline=NO_TIME)

    assert out["done"] is True and out["result"] == "gave up after 3 round(s)", out
    assert ledger.stored.version == 2  # no commit started
    assert ledger.stored.state.raises["us-west-2/gpu-west"].to == 2


def test_a_gang_give_backs_ec2_terminations_are_held_to_the_steps_deadline() -> None:
    """A fleet gang given back before its attach: its members are terminated through EC2 (DescribeInstances,
    TerminateInstances), which were started whatever time was left. With none left after the attach
    marker's read, none is started: the step fails AwsUnavailable (GiveBack retries it) and nothing ran
    out of time halfway."""
    w = SharedWorld()
    prep = w.gang.prepare(FLEET)
    launch = w.gang.launch({**FLEET, "prep": prep})
    left = {"s": 1000.0}
    w.gang.deadline = Deadline(lambda: left["s"], CALL)
    real_claims = w.ledger.claims

    def claims(cluster: str, prefix: str) -> Any:
        found = real_claims(cluster, prefix)
        if prefix.startswith(RAISE_PREFIX):  # the attach marker's read: the last call with time for it
            left["s"] = STEP_MARGIN_SECONDS + CALL / 2
            read.append(len(w.cloud.called("instance_states")))
        return found

    w.ledger.claims = claims  # type: ignore[method-assign]
    read: list[int] = []

    with pytest.raises(AwsUnavailable, match="not started"):
        w.gang.give_back({"state": {**FLEET, "prep": prep, "launch": launch, "verify": GIVE_UP}})

    assert w.cloud.called("terminate_instances") == []
    assert read and len(w.cloud.called("instance_states")) == read[-1]  # none after the marker's read


def backoff_until(when: str) -> tuple[SharedWorld, list[str], dict[str, Any]]:
    """A scale-up whose check timed out with one unready instance, at its BackOff: the step's time runs out
    ``when`` (``start``: none left; ``put``: once the group's back-off is written; ``states``: once
    the unready instances' EC2 states were read, to judge them idle). What the step did and its event are
    returned."""
    w = SharedWorld()
    uprep = w.up.prepare(UP)
    w.up.set_desired({**UP, "prep": uprep})
    w.asg_launches(1, ready=False)
    w.now = NOW + timedelta(seconds=61)
    launch = w.up.verify({**UP, "prep": uprep})
    left = {"s": STEP_MARGIN_SECONDS + CALL / 2 if when == "start" else 1000.0}
    w.up.deadline = Deadline(lambda: left["s"], CALL)
    done: list[str] = []

    def then(name: str, real: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            done.append(name)
            out = real(*args, **kwargs)
            if name == when:
                left["s"] = STEP_MARGIN_SECONDS + CALL / 2
            return out

        return call

    w.ledger.put_backoff = then("put", w.ledger.put_backoff)  # type: ignore[method-assign]
    w.cloud.instance_states = then("states", w.cloud.instance_states)  # type: ignore[method-assign]
    return w, done, {**UP, "prep": uprep, "launch": launch}


@pytest.mark.parametrize(("when", "done"), [("start", []), ("put", ["put"]), ("states", ["put", "states"])])
def test_each_write_of_a_scale_up_back_off_is_held_to_the_steps_deadline(when: str, done: list[str]) -> None:
    """The group's back-off, the pools' back-off, then each TerminateInstanceInAutoScalingGroup: with the
    time for none of them left, that one is not started (AwsUnavailable, BackOff retries the step), and
    nothing after it either."""
    w, did, event = backoff_until(when)

    with pytest.raises(AwsUnavailable, match="not started"):
        w.up.backoff(event)

    assert did == done and w.cloud.terminated() == []


def gang_give_back_until(w: SharedWorld, method: str, calls_after: float = 0.5) -> None:
    """The gang's step has time for its calls until the cloud's ``method`` answered, and for
    ``calls_after`` calls after (none by default)."""
    left = {"s": 1000.0}
    w.gang.deadline = Deadline(lambda: left["s"], CALL)
    real = getattr(w.cloud, method)

    def call(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        left["s"] = STEP_MARGIN_SECONDS + CALL * calls_after
        return out

    setattr(w.cloud, method, call)


def test_a_gang_give_backs_ask_again_of_create_fleet_is_held_to_the_steps_deadline() -> None:
    """Launch's answer never came (its invocation timed out): the give-back asks CreateFleet again under
    the attempt's ClientToken to learn what it launched. With no time left for it after the group's
    reads, it is not asked (it may launch, should the first call never have reached EC2): the step
    fails AwsUnavailable, and GiveBack's retry asks."""
    w = SharedWorld()
    prep = w.gang.prepare(FLEET)
    gang_give_back_until(w, "describe_activities")
    timed_out = {"Error": "Sandbox.Timedout", "Cause": "Task timed out after 120.00 seconds"}

    with pytest.raises(AwsUnavailable, match="not started"):
        w.gang.give_back({"state": {**FLEET, "prep": prep, "error": timed_out, "verify": GIVE_UP}})

    assert w.cloud.called("create_fleet_instant") == []


def test_a_gang_give_backs_back_off_is_held_to_the_steps_deadline() -> None:
    """A fleet gang given back before its attach: its members terminated through EC2, no time is left for
    the group's back-off. It is not written (a write Lambda's Timeout cut: GiveBack does not retry
    Sandbox.Timedout): the step fails AwsUnavailable, and the retry, whose terminations find nothing
    left to do, writes it."""
    w = SharedWorld()
    prep = w.gang.prepare(FLEET)
    launch = w.gang.launch({**FLEET, "prep": prep})
    gang_give_back_until(w, "terminate_instances")
    written: list[object] = []
    real_put = w.ledger.put_backoff
    w.ledger.put_backoff = lambda *a, **k: written.append(a) or real_put(*a, **k)  # type: ignore[method-assign]

    with pytest.raises(AwsUnavailable, match="not started"):
        w.gang.give_back({"state": {**FLEET, "prep": prep, "launch": launch, "verify": GIVE_UP}})

    assert w.cloud.called("terminate_instances") and written == []


def short_pools_verified(cut_after: int) -> tuple[list[str], Any]:
    """A raise of 1 whose launches Failed in us-east-1a and us-east-1c (EC2 named each zone short) and was
    made good in us-east-1b, its Node Ready: verify backs off both pools, one state write each. The step
    has time for ``cut_after`` of those writes and none after. The pools written, and the step's answer
    or the error it raised."""
    cloud, group, prep, other = partly_failed("Successful", count=1)
    raw = cloud.groups[("us-east-1", "gpu")]
    raw["AvailabilityZones"] = ["us-east-1a", "us-east-1b", "us-east-1c"]
    failed_at = NOW + timedelta(seconds=1)
    cloud.activities[("us-east-1", "gpu")].append(
        {**o.failed_launch(raw, failed_at), "StatusMessage": ZONE_C_SHORT}
    )
    ledger = FakeLedger()
    step = steps(cloud, FakeCluster([o.node(f"node-{other}", instance=other, ready=True)]), ledger)
    left = {"s": 1000.0 if cut_after else STEP_MARGIN_SECONDS + CALL / 2}
    step.deadline = Deadline(lambda: left["s"], CALL)
    real_put = ledger.put_backoff
    written: list[str] = []

    def put(cluster: str, name: str, *args: Any, **kwargs: Any) -> Any:
        out = real_put(cluster, name, *args, **kwargs)
        written.append(name)
        if len(written) == cut_after:
            left["s"] = STEP_MARGIN_SECONDS + CALL / 2
        return out

    ledger.put_backoff = put  # type: ignore[method-assign]
    try:
        answer: Any = step.verify({"cluster": "ml", "group": group, "prep": prep})
    except AwsUnavailable as exc:
        answer = exc
    return written, answer


@pytest.mark.parametrize("cut_after", [0, 1])
def test_each_pool_back_off_of_a_verified_raise_is_held_to_the_steps_deadline(cut_after: int) -> None:
    """Verify backs off each pool a launch of the raise found short (Ready, timeout, unsettled): those
    state writes were started whatever time was left, and one Lambda's Timeout cut ended Verify
    Sandbox.Timedout, which it does not retry (Errored: the group's result an error, its other pools
    never backed off). With no time for the next write, it is not started: AwsUnavailable, which Verify
    retries, and the retry writes them all (a back-off written again keeps the later end)."""
    written, answer = short_pools_verified(cut_after)

    assert isinstance(answer, AwsUnavailable) and "not started" in str(answer), answer
    assert written == ["pool#on-demand/us-east-1a/g5.xlarge"][:cut_after]


def test_a_verified_raise_with_time_backs_off_every_short_pool() -> None:
    """The control of the test above: with time for both writes, both pools are backed off and the raise
    is ready."""
    written, answer = short_pools_verified(2)

    assert isinstance(answer, dict) and answer["status"] == "ready", answer
    assert sorted(written) == ["pool#on-demand/us-east-1a/g5.xlarge", "pool#on-demand/us-east-1c/g5.xlarge"]


def test_a_gang_give_backs_group_read_after_its_back_off_is_held_to_the_steps_deadline() -> None:
    """A fleet gang given back before its attach: after its back-off the step reads the group again for
    the desired capacity it answers. That read was started whatever time was left, and a Lambda Timeout
    cut there ended GiveBack Sandbox.Timedout, which it does not retry, its back-off written and its
    answer lost. The back-off is now started only with time for it and the read after it: with time for
    one call only, neither is (AwsUnavailable, GiveBack retries the step)."""
    w = SharedWorld()
    prep = w.gang.prepare(FLEET)
    launch = w.gang.launch({**FLEET, "prep": prep})
    gang_give_back_until(w, "terminate_instances", calls_after=1.5)  # one call fits, not two
    written: list[object] = []
    real_put = w.ledger.put_backoff
    w.ledger.put_backoff = lambda *a, **k: written.append(a) or real_put(*a, **k)  # type: ignore[method-assign]
    reads = len(w.cloud.called("describe_group"))

    with pytest.raises(AwsUnavailable, match="not started"):
        w.gang.give_back({"state": {**FLEET, "prep": prep, "launch": launch, "verify": GIVE_UP}})

    assert w.cloud.called("terminate_instances") and written == []
    assert len(w.cloud.called("describe_group")) == reads + 1  # the step's first read, none after
