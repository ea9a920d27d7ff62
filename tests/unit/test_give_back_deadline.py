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
from test_gang_stale_give_back import GIVE_UP
from test_lost_raise import FLEET
from test_scale_replan_refused import _overflow_round_two
from test_shared_group import NOW, UP
from test_shared_group import World as SharedWorld

from spillway.act.claims import RAISE_PREFIX
from spillway.act.deadline import Deadline
from spillway.errors import AwsUnavailable
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


def test_a_scale_up_back_offs_auto_scaling_terminations_are_held_to_the_steps_deadline() -> None:
    """A scale-up's back-off terminates its unready instances through Auto Scaling: unlike a gang's
    give-back, it started each TerminateInstanceInAutoScalingGroup whatever time was left. With none
    left it starts none and fails AwsUnavailable (BackOff retries it)."""
    w = SharedWorld()
    uprep = w.up.prepare(UP)
    w.up.set_desired({**UP, "prep": uprep})
    w.asg_launches(1, ready=False)
    w.now = NOW + timedelta(seconds=61)
    launch = w.up.verify({**UP, "prep": uprep})
    assert launch["status"] == "timeout"
    left = {"s": 1000.0}
    w.up.deadline = Deadline(lambda: left["s"], CALL)
    real_put = w.ledger.put_backoff

    def put_backoff(*args: Any, **kwargs: Any) -> Any:  # the back-offs written: the terminate comes next
        left["s"] = STEP_MARGIN_SECONDS + CALL / 2
        return real_put(*args, **kwargs)

    w.ledger.put_backoff = put_backoff  # type: ignore[method-assign]

    with pytest.raises(AwsUnavailable, match="not started"):
        w.up.backoff({**UP, "prep": uprep, "launch": launch})

    assert w.cloud.terminated() == []
