"""A raise whose SetDesiredCapacity answer was lost (a timeout, a 5xx: AWS may or may not have applied it),
while other executions raise the same group (act/claims.py). It is settled only when that is
unambiguous; otherwise its marker is kept and marked unsettled, and what follows stays safe: it is not
raised twice, it takes no instance another owner waits for, and its shortfall is not a launch failure.
(Review r2: a fleet's attach, a marker dated before its owner's read, and a marker whose raise never
applied were each taken into the arithmetic that settled it.)"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from test_shared_group import GANG, NOW, OLD, UP, World

from spillway.act.claims import GIVEBACK_PREFIX, RAISE_PREFIX, SET_PREFIX, Owner, give_back_undelivered
from spillway.act.deadline import Deadline
from spillway.errors import AwsError, AwsThrottled, AwsUnavailable
from spillway.local import objects as o

FLEET = {**GANG, "mode": "fleet", "execution": "gang-fleet-1"}
UP_OWNER = "up-p-1-1-us-east-1-gpu"


def lose_first_call(w: World, *, landed: bool, meanwhile: Callable[[], object] = lambda: None) -> list[int]:
    """The first SetDesiredCapacity's answer is lost: AWS applied it when ``landed``; ``meanwhile`` runs
    before the answer would have come (another owner's step)."""
    real = w.cloud.set_desired_capacity
    calls: list[int] = []

    def lost(region: str, group: str, desired: int, before_call: object = None) -> int:
        calls.append(desired)
        if len(calls) == 1:
            if landed:
                real(region, group, desired)
            meanwhile()
            raise AwsUnavailable(f"SetDesiredCapacity({region}, {group}, {desired}): connection reset")
        return real(region, group, desired)

    w.cloud.set_desired_capacity = lost  # type: ignore[method-assign]
    return calls


def up_owner(w: World) -> Owner:
    return Owner(w.ledger, "prod", "us-east-1", "gpu", UP_OWNER)


def settle(w: World, prep: dict[str, object]) -> dict[str, object]:
    """The scale-up's SetDesired as Step Functions runs it: the lost answer fails the step, which is retried."""
    with pytest.raises(AwsUnavailable):
        w.up.set_desired({**UP, "prep": prep})
    return w.up.set_desired({**UP, "prep": prep})


# --- review r2, defect 1: a fleet-mode gang's AttachInstances raises the group too -------------------


def fleet_attaches_meanwhile(w: World) -> dict[str, object]:
    up = w.up.prepare(UP)  # the plan's +2: 1 -> 3
    fprep = w.gang.prepare(FLEET)
    launch = w.gang.launch({**FLEET, "prep": fprep})  # CreateFleet instant: 3 instances, outside the group
    assert launch["status"] == "launched"
    # the scale-up's 1 -> 3 is not applied, and the gang attaches its 3 meanwhile: 1 -> 4
    lose_first_call(
        w, landed=False, meanwhile=lambda: w.gang.attach({**FLEET, "prep": fprep, "launch": launch})
    )
    return up


def test_a_fleet_gangs_attach_writes_a_raise_marker_before_attaching() -> None:
    w = World()
    fprep = w.gang.prepare(FLEET)
    launch = w.gang.launch({**FLEET, "prep": fprep})
    attaching: list[dict[str, object]] = []
    real = w.cloud.attach_instances

    def attach(region: str, group: str, ids: list[str], before_call: object = None) -> int:
        attaching.extend(w.ledger.claims("prod", RAISE_PREFIX).values())
        return real(region, group, ids)

    w.cloud.attach_instances = attach  # type: ignore[method-assign]
    w.gang.attach({**FLEET, "prep": fprep, "launch": launch})
    w.gang.attach({**FLEET, "prep": fprep, "launch": launch})  # a retry: one marker, attached once

    assert [(m["group"], m["count"]) for m in attaching] == [("us-east-1/gpu", 3)]
    assert w.desired == 4 and len(w.ledger.claims("prod", RAISE_PREFIX)) == 1


def test_a_lost_raise_is_not_taken_as_landed_on_a_fleet_gangs_attach() -> None:
    """On main the group read back at 4 >= 3 said 'landed': the +2 was reported raised and never asked
    for. The attach is another owner's raise in the window: the outcome is ambiguous, the marker kept."""
    w = World()
    up = fleet_attaches_meanwhile(w)

    again = settle(w, up)

    assert again["again"] and w.desired == 4  # not taken as landed, not raised twice
    assert up_owner(w).unsettled()


def test_an_unsettled_scale_up_short_at_its_deadline_does_not_back_off_the_group() -> None:
    """On main verify timed out waiting for nodes nobody launched, and the group that had just launched a
    whole gang was backed off (its pods overflowing elsewhere)."""
    w = World()
    up = fleet_attaches_meanwhile(w)
    settle(w, up)
    w.now = NOW + timedelta(seconds=61)

    verify = w.up.verify({**UP, "prep": up})

    assert verify["status"] == "unsettled", verify
    assert "not a launch failure" in verify["reason"]


# --- review r2, defect 2: a marker is dated before its owner read the group -------------------------


def gang_dated_earlier_raises_meanwhile(w: World) -> tuple[dict[str, object], dict[str, object]]:
    gprep = w.gang.prepare(GANG)  # rollback gang, +3
    w.now = NOW + timedelta(seconds=1)
    up = w.up.prepare(UP)  # +2

    def gang_raises() -> None:
        # the gang's step read its clock (NOW) before the scale-up's, but its DescribeAutoScalingGroups
        # answered only now: it reads 1 (without the scale-up's raise) and raises 1 -> 4, dated NOW
        scale_up_clock, w.now = w.now, NOW
        w.gang.raise_desired({**GANG, "prep": gprep})
        w.now = scale_up_clock

    lose_first_call(w, landed=False, meanwhile=gang_raises)
    return up, gprep


def test_a_lost_raise_is_not_settled_on_a_raise_dated_just_before_it() -> None:
    w = World()
    up, _ = gang_dated_earlier_raises_meanwhile(w)

    again = settle(w, up)

    assert again["again"] and w.desired == 4 and up_owner(w).unsettled()


def test_an_unsettled_scale_up_takes_no_instance_a_gang_still_waits_for() -> None:
    """On main the scale-up, believing its +2 landed, claimed two of the gang's three new instances
    (first wins) and the gang, never counting three, was given back whole."""
    w = World()
    up, gprep = gang_dated_earlier_raises_meanwhile(w)
    settle(w, up)
    w.asg_launches(w.desired - len(w.instances))  # Auto Scaling fills the desired capacity: 3

    early = w.up.verify({**UP, "prep": up})  # the scale-up polls first

    assert early["status"] == "launching" and early["in_service"] == 0
    assert w.gang.verify({**GANG, "prep": gprep})["status"] == "ready"


# --- review r2, defect 3: a kept marker of a raise that never applied ------------------------------


def test_a_landed_raise_is_not_applied_again_for_a_kept_marker_whose_raise_never_applied() -> None:
    """The scale-up's 1 -> 3 lands with its answer lost; meanwhile a gang's 3 -> 6 is lost unapplied
    and its read-back fails, so its marker stays. On main the +3 was counted (3 < 3 + 3): the scale-up's
    marker was given back and the retry raised again, 3 -> 5."""
    w = World()
    up, gprep = w.up.prepare(UP), w.gang.prepare(GANG)  # +2, +3
    real_set = w.cloud.set_desired_capacity
    calls: list[int] = []

    def set_desired(region: str, group: str, desired: int, before_call: object = None) -> int:
        calls.append(desired)
        if len(calls) == 1:  # the scale-up's 1 -> 3: applied, its answer lost
            real_set(region, group, desired)
            with pytest.raises(AwsUnavailable):  # meanwhile the gang's 3 -> 6, lost unapplied
                w.gang.raise_desired({**GANG, "prep": gprep})
            raise AwsUnavailable(f"SetDesiredCapacity({region}, {group}, {desired}): read timeout")
        if len(calls) == 2:  # the gang's: not applied, and its read-back fails too
            w.cloud.fail("describe_group", AwsUnavailable("DescribeAutoScalingGroups: 503"), times=1)
            raise AwsUnavailable(f"SetDesiredCapacity({region}, {group}, {desired}): 503")
        return real_set(region, group, desired)

    w.cloud.set_desired_capacity = set_desired  # type: ignore[method-assign]

    settle(w, up)

    assert w.desired == 3 and calls == [3, 6], f"desired {w.desired} after calls {calls}"


# --- the rule when no other owner raised the group ---------------------------------------------------


def test_a_lost_raise_alone_that_left_the_group_as_it_was_is_asked_again_at_its_own_value() -> None:
    """Read back where it started, the raise is asked again at once, at the same (absolute) value: a read
    older than the raise would say the same of one that applied."""
    w = World()
    up = w.up.prepare(UP)
    calls = lose_first_call(w, landed=False)

    w.up.set_desired({**UP, "prep": up})

    assert w.desired == 3 and calls == [3, 3] and not up_owner(w).unsettled()


def test_a_lost_raise_asked_again_and_lost_again_is_kept_unsettled() -> None:
    """Asked again and lost again (still read where it started): nobody can tell; kept, never raised by
    the retry."""
    w = World()
    up = w.up.prepare(UP)
    calls: list[int] = []

    def lost(region: str, group: str, desired: int, before_call: object = None) -> int:
        calls.append(desired)
        raise AwsUnavailable(f"SetDesiredCapacity({region}, {group}, {desired}): connection reset")

    w.cloud.set_desired_capacity = lost  # type: ignore[method-assign]

    with pytest.raises(AwsUnavailable):
        w.up.set_desired({**UP, "prep": up})
    w.up.set_desired({**UP, "prep": up})  # Step Functions' retry: nothing more

    assert calls == [3, 3] and up_owner(w).unsettled()


def test_a_lost_raise_alone_whose_group_moved_otherwise_is_kept_not_raised_twice() -> None:
    """The raise landed (1 -> 3) and a drain terminated a node with decrement (3 -> 2) before the group
    was read again: neither at the raise's value nor where it started. On main, 2 < 3 gave the marker
    back and the retry raised again, 2 -> 4."""
    w = World()
    up = w.up.prepare(UP)
    lose_first_call(w, landed=True, meanwhile=lambda: w.raw.update(DesiredCapacity=w.desired - 1))

    settle(w, up)

    assert w.desired == 2 and up_owner(w).unsettled()


# --- what follows an unsettled raise ----------------------------------------------------------------


def test_an_unsettled_scale_up_backed_off_for_capacity_gives_back_no_capacity_it_may_never_have_added() -> (
    None
):
    """Its +2 never applied; the gang's 1 -> 4 is still launching when a launch fails for capacity. The
    scale-up backs the group off (a real failure) but leaves the desired capacity: on main it took its 2
    'undelivered' off the live value, cutting the gang's launches in flight."""
    w = World()
    up, _ = gang_dated_earlier_raises_meanwhile(w)
    settle(w, up)
    w.asg_launches(1)  # one of the gang's three so far
    w.cloud.activities[("us-east-1", "gpu")] = [o.failed_launch(w.raw, NOW + timedelta(seconds=5))]
    w.now = NOW + timedelta(seconds=10)
    launch = w.up.verify({**UP, "prep": up})
    assert launch["status"] == "failed"

    out = w.up.backoff({**UP, "prep": up, "launch": launch})

    assert w.desired == 4 and out["desired"] == 4 and out["terminated"] == []
    zone = w.raw["AvailabilityZones"][0]  # and the pool EC2 said it had no capacity of
    assert [b[0] for b in w.ledger.backoffs] == ["gpu", f"pool#on-demand/{zone}/p4d.24xlarge"]


def test_an_unsettled_gang_gives_back_its_instances_but_no_capacity_it_may_never_have_added() -> None:
    """The gang's 1 -> 4 was lost unapplied while a scale-up raised 1 -> 3: the gang's marker is kept
    unsettled. At its deadline it gives back (whole or nothing) without lowering the group: on main it took
    3 off the live value and cut the scale-up's launch in flight."""
    w = World()
    gprep = w.gang.prepare(GANG)
    up = w.up.prepare(UP)
    lose_first_call(w, landed=False, meanwhile=lambda: w.up.set_desired({**UP, "prep": up}))
    with pytest.raises(AwsUnavailable):
        w.gang.raise_desired({**GANG, "prep": gprep})
    assert w.gang.raise_desired({**GANG, "prep": gprep})["again"] and w.desired == 3
    w.now = NOW + timedelta(seconds=61)
    verify = w.gang.verify({**GANG, "prep": gprep})
    assert verify["status"] == "timeout"

    out = w.gang.give_back({"state": {**GANG, "prep": gprep, "verify": verify}})

    assert w.desired == 3 and out["desired"] == 3


def ends_without_backoff(outcome: str) -> bool:
    """The scale-up state machine's choice on ``outcome`` leads to a Pass that ends the group's branch
    with that outcome (no Fail, no back-off step)."""
    machine = json.loads((Path(__file__).parents[2] / "statemachines" / "scale_up.asl.json").read_text())
    states = machine["States"]["Groups"]["ItemProcessor"]["States"]
    choice = next(c for c in states["Launched?"]["Choices"] if c.get("StringEquals") == outcome)
    end = states[choice["Next"]]
    return bool(end["Type"] == "Pass" and end.get("End") and end["Parameters"]["outcome"] == outcome)


def test_the_scale_up_state_machine_ends_an_unsettled_group_without_backing_it_off() -> None:
    assert ends_without_backoff("unsettled")


# --- the raise marker's own write whose answer was lost -------------------------------------------


def lose_marker_answer(w: World) -> None:
    """The first raise marker's PutItem is applied by DynamoDB, but its answer is lost (a timeout, a 5xx):
    the step fails with AwsUnavailable before SetDesiredCapacity is called, and Step Functions retries."""
    real = w.ledger.claim
    lost: list[str] = []

    def claim(cluster: str, item: str, value: Any, *, expires: Any) -> tuple[dict[str, object], bool]:
        out = real(cluster, item, value, expires=expires)
        if item.startswith(RAISE_PREFIX) and not lost:
            lost.append(item)
            raise AwsUnavailable(f"claim {cluster}/{item}: Read timeout")
        return out

    w.ledger.claim = claim  # type: ignore[method-assign]


def test_a_raise_whose_marker_answer_was_lost_is_raised_on_the_retry() -> None:
    """EC2 Auto Scaling API Reference, SetDesiredCapacity: the raise is only ever asked for after the
    marker is written. On main the retry found the marker, answered "raised again" and never called
    SetDesiredCapacity: the group stayed at 1, the scale-up timed out, backed off a group that had never
    failed a launch, and took 2 "undelivered" off the live desired capacity, cutting the gang's raise."""
    w = World()  # desired 1
    up, gprep = w.up.prepare(UP), w.gang.prepare(GANG)
    lose_marker_answer(w)
    with pytest.raises(AwsUnavailable):
        w.up.set_desired({**UP, "prep": up})
    assert w.desired == 1  # nothing was asked of Auto Scaling yet

    w.up.set_desired({**UP, "prep": up})  # Step Functions' retry
    w.up.set_desired({**UP, "prep": up})  # and a retry of that: never twice
    assert w.desired == 3
    w.gang.raise_desired({**GANG, "prep": gprep})  # 3 -> 6
    assert w.desired == 6


# --- a scheduled action that takes the raise's capacity back ----------------------------------------


def scheduled_cut(w: World, at: Any, change: tuple[int, int]) -> None:
    """What Auto Scaling records when a scheduled action lowers the group: an activity for the instance
    it scales in, whose Cause names the action's update (AWS Knowledge Center, "Why did my Auto Scaling
    group scale down?")."""
    stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    w.cloud.activities.setdefault(("us-east-1", "gpu"), []).append(
        {
            "ActivityId": f"act-cut-{stamp}",
            "AutoScalingGroupName": "gpu",
            "Description": "Terminating EC2 instance: i-0cut",
            "Cause": f"At {stamp} a scheduled action update of AutoScalingGroup constraints to min: 0, max: 10, "
            f"desired: {change[1]} changing the desired capacity from {change[0]} to {change[1]}.",
            "StartTime": stamp,
            "EndTime": stamp,
            "StatusCode": "Successful",
        }
    )
    w.raw["DesiredCapacity"] = change[1]


def test_a_raise_a_scheduled_action_took_back_is_no_launch_failure_and_backs_nothing_off() -> None:
    """The plan's +2 (1 -> 3); ten seconds later a one-time scheduled action set DesiredCapacity 1. The
    raise's nodes are not coming, because Auto Scaling was told so, not because a launch failed: verify
    waited out the launch deadline, answered timeout, and the group was backed off (its pods sent to
    another group or region for launch_failure_backoff_minutes). A cut before the raise changes nothing."""
    w = World()
    up = w.up.prepare(UP)
    w.up.set_desired({**UP, "prep": up})
    scheduled_cut(w, NOW - timedelta(minutes=5), (2, 1))  # before the raise: not its business
    w.raw["DesiredCapacity"] = 3
    w.now = NOW + timedelta(seconds=61)
    assert w.up.verify({**UP, "prep": up})["status"] == "timeout"

    w.now = NOW + timedelta(seconds=10)
    scheduled_cut(w, NOW + timedelta(seconds=10), (3, 1))

    verify = w.up.verify({**UP, "prep": up})

    assert verify["status"] == "resized", verify
    assert "scheduled action" in verify["reason"] and "not a launch failure" in verify["reason"]
    w.now = NOW + timedelta(seconds=61)
    assert w.up.verify({**UP, "prep": up})["status"] == "resized"


def test_the_scale_up_state_machine_ends_a_resized_group_without_backing_it_off() -> None:
    assert ends_without_backoff("resized")


def test_a_scheduled_cut_that_leaves_the_raise_standing_does_not_end_its_wait() -> None:
    """The plan's +2 (1 -> 3); something else raised the group to 6 meanwhile, and a scheduled action
    then set DesiredCapacity 4: still above the raise's 3, so the raise's nodes are coming. The planner
    keeps such a raise (spillway.planner.raises: only a cut below its ``to`` ends it); verify ended it
    ``resized`` at once, saying Auto Scaling took back capacity it did not take, and stopped waiting
    for nodes still launching (a launch of theirs that failed was then never backed off)."""
    w = World()
    up = w.up.prepare(UP)
    w.up.set_desired({**UP, "prep": up})
    w.now = NOW + timedelta(seconds=10)
    scheduled_cut(w, NOW + timedelta(seconds=10), (6, 4))

    verify = w.up.verify({**UP, "prep": up})

    assert verify["status"] == "launching", verify
    scheduled_cut(w, NOW + timedelta(seconds=20), (4, 2))  # now below the raise's 3: taken back
    w.now = NOW + timedelta(seconds=20)
    assert w.up.verify({**UP, "prep": up})["status"] == "resized"


# --- a marker's PutItem that botocore sent again after its answer was lost ---------------------------


def resend_put(w: World, prefix: str) -> list[str]:
    """The first claim of an item starting with ``prefix`` is applied by DynamoDB and its answer lost;
    botocore sends the PutItem again, whose condition (``attribute_not_exists``) then fails on the item it
    wrote itself: StateStore.claim reads the item back and answers it with ``created`` False (as its
    docstring says, a caller tells its own claim by the value)."""
    real = w.ledger.claim
    resent: list[str] = []

    def claim(
        cluster: str, item: str, value: Any, *, expires: Any, now: Any = None
    ) -> tuple[dict[str, object], bool]:
        stored, created = real(cluster, item, value, expires=expires)
        if item.startswith(prefix) and created and not resent:
            resent.append(item)
            return stored, False
        return stored, created

    w.ledger.claim = claim  # type: ignore[method-assign]
    return resent


def test_a_raise_whose_marker_put_was_sent_again_by_the_sdk_is_raised() -> None:
    """A gang raised the group a moment before (its marker in the window). The scale-up's marker PutItem
    landed, its answer was lost, and botocore's second try found the item: ``created`` False. raise_once
    took its own marker for an earlier try's, could not tell whether that raise applied (the gang's marker
    in its window), kept it unsettled and answered "raised" without ever calling SetDesiredCapacity: the
    scale-up waited out its deadline, its pods on for a raise nobody made."""
    w = World()  # desired 1
    up, gprep = w.up.prepare(UP), w.gang.prepare(GANG)
    w.gang.raise_desired({**GANG, "prep": gprep})  # 1 -> 4
    resent = resend_put(w, f"{RAISE_PREFIX}{UP_OWNER}")

    out = w.up.set_desired({**UP, "prep": up})

    assert resent == [RAISE_PREFIX + UP_OWNER]
    assert (out["again"], w.desired) == (False, 6)
    assert not up_owner(w).unsettled()


def test_a_give_back_whose_marker_put_was_sent_again_by_the_sdk_is_given_back() -> None:
    """The same for a give-back's once-only marker (``giveback#<owner>``): its put sent again answered
    ``created`` False, and give_back_undelivered returned as if a try before had given the capacity back,
    leaving Auto Scaling to launch, for nobody, the capacity the raise never delivered."""
    w = World()  # desired 1
    up = w.up.prepare(UP)
    w.up.set_desired({**UP, "prep": up})  # 1 -> 3, nothing launches
    resend_put(w, GIVEBACK_PREFIX)

    lowered = give_back_undelivered(w.cloud, up_owner(w), 2, NOW)

    assert (lowered, w.desired) == (1, 1)


# --- a read older than the raise (DescribeAutoScalingGroups is eventually consistent) -----------------


def stale_reads(w: World, reads: int, was: int) -> None:
    """The next ``reads`` DescribeAutoScalingGroups answer the group at the desired capacity it had
    before the raise applied (``was``): a read served from a copy the update has not reached yet."""
    real = w.cloud.describe_group
    left = [reads]

    def describe(region: str, group: str) -> Any:
        asg = real(region, group)
        if left[0] > 0:
            left[0] -= 1
            return asg.model_copy(update={"DesiredCapacity": was})
        return asg

    w.cloud.describe_group = describe  # type: ignore[method-assign]


def test_a_lost_raise_that_landed_read_back_stale_is_not_raised_twice() -> None:
    """The raise (1 -> 3) applies and its answer is lost; the read-back right after it is served before the
    update reached it and still says 1. That was taken for "not raised": the marker went, and the retry,
    reading 3 by then, raised 3 -> 5."""
    w = World()
    up = w.up.prepare(UP)
    lose_first_call(w, landed=True, meanwhile=lambda: stale_reads(w, 1, was=1))

    try:
        w.up.set_desired({**UP, "prep": up})
    except AwsUnavailable:
        w.up.set_desired({**UP, "prep": up})  # Step Functions' retry

    assert w.desired == 3


def test_a_kept_marker_whose_raise_landed_read_back_stale_by_the_retry_is_not_raised_twice() -> None:
    """A step asked its raise (1 -> 3, applied) and failed before it recorded the answer (its marker
    alone is left, as when the function stops). The retry's read-back of the group is stale (1): the
    marker went and the retry raised on the live value, 3 -> 5."""
    w = World()
    up = w.up.prepare(UP)
    real_set = w.cloud.set_desired_capacity

    def set_then_stop(region: str, group: str, desired: int, before_call: object = None) -> int:
        real_set(region, group, desired)
        raise RuntimeError("Sandbox.Timedout")  # the step stops once AWS applied the raise

    w.cloud.set_desired_capacity = set_then_stop  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        w.up.set_desired({**UP, "prep": up})
    w.cloud.set_desired_capacity = real_set  # type: ignore[method-assign]
    stale_reads(w, 2, was=1)  # the retry's own read, and its read-back

    w.up.set_desired({**UP, "prep": up})

    assert w.desired == 3


def timed(steps: Any) -> dict[str, float]:
    """Hold ``steps`` to a deadline of one Lambda invocation, whose time left the test sets (``left``), of
    calls that take 49 s at most (the default SDK settings)."""
    clock = {"left": 200.0}
    steps.deadline = Deadline(lambda: clock["left"], 49)
    return clock


def ask(before_call: Any, region: str, group: str, desired: int) -> None:
    """What the adapter does before it sends SetDesiredCapacity: the step's ``before_call`` check."""
    if before_call is not None:
        before_call(f"SetDesiredCapacity({region}, {group}, {desired})")


def test_a_lost_raise_with_no_time_left_to_ask_again_is_asked_again_by_the_retry() -> None:
    """The lost answer took most of the invocation (a read timeout on every try): asking again would not
    end in time, so it is not sent (spillway.act.deadline). That said nothing of the raise, but kept it
    unsettled: never asked again, and the pods waited out the launch deadline for a raise that never
    applied. The marker is left as it was, and the step's retry asks again with a whole invocation."""
    w = World()
    up = w.up.prepare(UP)
    clock = timed(w.up)
    real = w.cloud.set_desired_capacity
    calls: list[int] = []

    def set_desired(region: str, group: str, desired: int, before_call: Any = None) -> int:
        ask(before_call, region, group, desired)
        calls.append(desired)
        if len(calls) == 1:  # not applied; its tries took most of the invocation
            clock["left"] = 60.0
            raise AwsUnavailable(f"SetDesiredCapacity({region}, {group}, {desired}): Read timeout")
        return real(region, group, desired)

    w.cloud.set_desired_capacity = set_desired  # type: ignore[method-assign]

    with pytest.raises(AwsUnavailable):
        w.up.set_desired({**UP, "prep": up})
    assert calls == [3] and not up_owner(w).unsettled()
    clock["left"] = 200.0  # Step Functions' retry: a new invocation
    w.up.set_desired({**UP, "prep": up})

    assert (w.desired, calls) == (3, [3, 3]) and not up_owner(w).unsettled()


def gang_raise_left_unasked(w: World, applied: bool) -> dict[str, Any]:
    """The gang's raise (1 -> 4) is lost, ``applied`` or not, and read back at 1 (a stale read when it
    applied); its ask again is not sent (the lost tries took the invocation's time), leaving the marker
    for the retry; a scale-up raises meanwhile when it did not apply (1 -> 3, its instances still to
    launch); the step's six retries are throttled reading the group, before they reach the marker. The
    gang's prep is returned, for its GiveBack."""
    gprep = w.gang.prepare(GANG)
    clock = timed(w.gang)
    real_set, real_describe = w.cloud.set_desired_capacity, w.cloud.describe_group
    calls: list[int] = []

    def set_desired(region: str, group: str, desired: int, before_call: Any = None) -> int:
        ask(before_call, region, group, desired)
        calls.append(desired)
        if len(calls) > 1:
            return real_set(region, group, desired)
        if applied:
            real_set(region, group, desired)
            stale_reads(w, 1, was=1)
        clock["left"] = 60.0  # its tries took most of the invocation
        raise AwsUnavailable(f"SetDesiredCapacity({region}, {group}, {desired}): Read timeout")

    w.cloud.set_desired_capacity = set_desired  # type: ignore[method-assign]
    with pytest.raises(AwsUnavailable):
        w.gang.raise_desired({**GANG, "prep": gprep})
    assert calls == [4] and not Owner(w.ledger, "prod", "us-east-1", "gpu", str(gprep["attempt"])).unsettled()
    if not applied:
        uprep = w.up.prepare(UP)
        w.up.set_desired({**UP, "prep": uprep})
    clock["left"] = 200.0

    def throttled(region: str, group: str) -> Any:
        raise AwsThrottled(f"DescribeAutoScalingGroups({region}, {group}): Rate exceeded")

    w.cloud.describe_group = throttled  # type: ignore[method-assign]
    for _ in range(6):  # RaiseDesired's retries, then its Catch: GiveBack
        with pytest.raises(AwsThrottled):
            w.gang.raise_desired({**GANG, "prep": gprep})
    w.cloud.describe_group = real_describe  # type: ignore[method-assign]
    return gprep


RAISE_FAILED = {"Error": "AwsThrottled", "Cause": "DescribeAutoScalingGroups: Rate exceeded"}


def test_a_gang_raise_never_asked_again_gives_back_no_capacity_it_may_never_have_added() -> None:
    """The gang's GiveBack read the marker its failed RaiseDesired left as a raise made and took the
    gang's 3 off the live value: the scale-up's 2, raised after it, went with them (main gave the marker
    back after the read-back, and GiveBack gave back nothing). It is settled first: read back at 3, with
    the scale-up's marker in its window, it is kept unsettled and nothing is given back."""
    w = World()
    gprep = gang_raise_left_unasked(w, applied=False)
    assert w.desired == 3

    out = w.gang.give_back({"state": {**GANG, "prep": gprep, "error": RAISE_FAILED}})

    assert w.desired == 3 and out["desired"] == 3  # the scale-up's raise stands


def test_a_gang_raise_never_asked_again_that_had_applied_is_given_back() -> None:
    """The same marker, of a raise that did apply (its read-back was stale): settled in GiveBack by a
    read at the raise's value, landed, and its capacity is given back."""
    w = World()
    gprep = gang_raise_left_unasked(w, applied=True)
    assert w.desired == 4

    out = w.gang.give_back({"state": {**GANG, "prep": gprep, "error": RAISE_FAILED}})

    assert w.desired == 1 and out["desired"] == 1


def answering(w: World, *answers: str, lost: Callable[[], object] = lambda: None) -> list[int]:
    """SetDesiredCapacity answers each call in turn (the last answer repeats): ``applied``; ``lost`` (not
    applied) or ``lost applied``, a read timeout, after ``lost`` ran (the tries' time passing); ``busy``,
    refused for now (ResourceContention: nothing applied, the adapter's AwsThrottled). Each is asked only
    as the adapter asks it, once the step's ``before_call`` let it. The values asked are returned."""
    real = w.cloud.set_desired_capacity
    calls: list[int] = []

    def set_desired(region: str, group: str, desired: int, before_call: Any = None) -> int:
        ask(before_call, region, group, desired)
        answer = answers[min(len(calls), len(answers) - 1)]
        calls.append(desired)
        what = f"SetDesiredCapacity({region}, {group}, {desired})"
        if answer == "busy":
            raise AwsThrottled(f"{what}: ResourceContention: You already have a pending update")
        if answer != "lost":
            real(region, group, desired)
        if answer.startswith("lost"):
            lost()
            raise AwsUnavailable(f"{what}: Read timeout")
        return desired

    w.cloud.set_desired_capacity = set_desired  # type: ignore[method-assign]
    return calls


def test_a_lost_raise_whose_ask_again_is_throttled_is_asked_again_by_the_retry() -> None:
    """The raise (1 -> 3) is lost unapplied and read back at 1; its ask again is refused for now
    (ResourceContention, a throttle: nothing applied, the adapter's AwsThrottled, which no lost try of it
    preceded). That kept the raise unsettled: the retry asked nothing, and the pods waited out the launch
    deadline for a raise never made, as for an ask again never sent. The marker is left as it was, and
    the retry reads the group again and asks again."""
    w = World()
    up = w.up.prepare(UP)
    calls = answering(w, "lost", "busy", "applied")  # the first not applied
    with pytest.raises(AwsThrottled):
        w.up.set_desired({**UP, "prep": up})

    w.up.set_desired({**UP, "prep": up})  # Step Functions' retry

    assert (w.desired, calls) == (3, [3, 3, 3]) and not up_owner(w).unsettled()


def scale_up_every_ask_again_throttled(w: World, applied: bool) -> dict[str, Any]:
    """The scale-up's raise (1 -> 3) is lost, ``applied`` or not, and read back at 1 (a stale read when it
    applied); every ask again, that invocation's and each of SetDesired's six retries', is refused for
    now (ResourceContention: nothing applied), so the step ends in the state machine's Errored, its
    marker left for a retry that never comes. Its prep is returned."""
    up = w.up.prepare(UP)
    real_set = w.cloud.set_desired_capacity
    answering(w, "lost applied" if applied else "lost", "busy")
    if applied:
        stale_reads(w, 14, was=1)  # every read of the step and its retries answers from before it
    for _ in range(7):
        with pytest.raises(AwsThrottled):
            w.up.set_desired({**UP, "prep": up})
    w.cloud.set_desired_capacity = real_set  # type: ignore[method-assign]
    assert not up_owner(w).unsettled()  # the marker is bare: neither answered nor kept unsettled
    return up


SET_FAILED = {"group": "gpu", "region": "us-east-1", "outcome": "error", "error": "AwsThrottled",
              "cause": "SetDesiredCapacity(us-east-1, gpu, 3): ResourceContention", "new_nodes": 2}  # fmt: skip


def next_round_after(w: World, *results: dict[str, Any]) -> dict[str, Any]:
    return w.up.next_round({"cluster": "prod", "plan_id": "p-1", "snapshot_key": "k", "round": 1,
                            "max_rounds": 3, "poll_seconds": 1, "launch_timeout_seconds": 60,
                            "rounds": [], "results": list(results)})  # fmt: skip


def test_a_raise_whose_every_ask_again_was_refused_is_settled_when_its_group_ends_in_error() -> None:
    """The scale-up's raise was never made (every ask again refused for now) and its iteration ended in
    Errored with the marker bare. A bare marker is a settled owner still waiting for its 2 instances to
    every other owner of its window for 15 minutes: a gang whose raise was lost and applied meanwhile
    (kept unsettled, the bare marker in its window) claimed only 1 of its 3 new instances, leaving 2 to
    the scale-up that never raised, and was given back at its deadline with its whole gang running.
    next_round settles the marker from what is known: the group read where the raise started (its ask
    again applied nothing), it is kept unsettled (never raised, and no longer awaited)."""
    w = World()
    scale_up_every_ask_again_throttled(w, applied=False)
    assert w.desired == 1

    next_round_after(w, SET_FAILED)

    assert up_owner(w).unsettled()
    w.now = NOW + timedelta(seconds=30)
    gprep = w.gang.prepare(GANG)
    lose_first_call(w, landed=True)  # the gang's 1 -> 4 applies, its answer lost: kept unsettled
    with pytest.raises(AwsUnavailable):
        w.gang.raise_desired({**GANG, "prep": gprep})
    w.gang.raise_desired({**GANG, "prep": gprep})  # the retry finds it kept
    assert w.desired == 4
    w.asg_launches(3)

    assert w.gang.verify({**GANG, "prep": gprep})["status"] == "ready"


def test_a_raise_whose_every_ask_again_was_refused_but_that_landed_is_settled_as_raised() -> None:
    """The same bare marker, of a raise that did apply (every read-back in the step was stale): next_round
    reads the group at the raise's value and records it raised, and the raise stays launching (taken
    for one never made, its pods would be raised for again)."""
    w = World()
    scale_up_every_ask_again_throttled(w, applied=True)
    assert w.desired == 3

    next_round_after(w, SET_FAILED)

    assert not up_owner(w).unsettled() and up_owner(w).raised() == 2
    assert w.desired == 3
    item = SET_PREFIX + UP_OWNER
    assert item in w.ledger.claims("prod", item)  # recorded asked: settled, not left bare


def test_a_lost_raise_is_read_back_only_when_the_read_ends_before_the_invocation() -> None:
    """The raise (1 -> 3) applies and its answer is lost after its tries took most of the invocation: 30 s
    are left, and one call may take 49 s. Its ask again was held to the step's deadline, but not its
    read-back: DescribeAutoScalingGroups and the raise markers were read with no time for them, and
    Lambda stops a function at its Timeout mid-call (Sandbox.Timedout, which SetDesired does not
    retry). Nothing is started after the lost answer that would not end in time: the step fails
    AwsUnavailable with the marker as it was, and its retry, with a whole invocation, settles it."""
    w = World()
    up = w.up.prepare(UP)
    clock = timed(w.up)
    # the first ask applies, and its answer is lost after every try timed out
    answering(w, "lost applied", "applied", lost=lambda: clock.update(left=30.0))
    real_describe = w.cloud.describe_group
    late: list[str] = []

    def describe(region: str, group: str) -> Any:
        if clock["left"] < 49 + 5:
            late.append(f"DescribeAutoScalingGroups({region}, {group})")
        return real_describe(region, group)

    w.cloud.describe_group = describe  # type: ignore[method-assign]

    with pytest.raises(AwsUnavailable) as failed:
        w.up.set_desired({**UP, "prep": up})

    assert late == [] and not failed.value.unsent, failed.value
    assert not up_owner(w).unsettled() and up_owner(w).raised() == 2  # the marker kept as it was
    clock["left"] = 200.0  # Step Functions' retry: a new invocation
    again = w.up.set_desired({**UP, "prep": up})
    assert again["again"] and w.desired == 3 and not up_owner(w).unsettled()


def test_a_raise_settled_after_its_step_failed_is_read_back_only_in_time() -> None:
    """next_round settles a scale-up's bare marker (above) with the same deadline: it reads nothing it
    could not finish, and fails AwsUnavailable (NextRound's Retry) with the marker left as it was."""
    w = World()
    scale_up_every_ask_again_throttled(w, applied=False)
    w.up.deadline = Deadline(lambda: 30.0, 49)
    reads: list[str] = []
    real_describe = w.cloud.describe_group

    def describe(region: str, group: str) -> Any:
        reads.append(group)
        return real_describe(region, group)

    w.cloud.describe_group = describe  # type: ignore[method-assign]

    with pytest.raises(AwsUnavailable):
        next_round_after(w, SET_FAILED)

    assert reads == [] and not up_owner(w).unsettled()
    w.up.deadline = Deadline(lambda: 200.0, 49)
    next_round_after(w, SET_FAILED)
    assert up_owner(w).unsettled()


def test_a_fleet_attach_sent_again_on_a_stale_read_after_a_lost_answer_is_not_given_back() -> None:
    """The fleet's AttachInstances (1 -> 4, MaxSize 5) applies and its answer is lost; the step's retry
    reads the group from before the attach (no instance of the fleet in it) and attaches the same three
    again, which AWS refuses: with them counted already, 4 + 3 is above MaxSize. The refusal gave the
    gang back, its three instances attached and running, and backed the group off. The refusal is
    judged by the group read again: every instance in it, the retry answers attached."""
    w = World()
    w.raw["MaxSize"] = 5
    fprep = w.gang.prepare(FLEET)
    launch = w.gang.launch({**FLEET, "prep": fprep})
    real_attach, real_describe = w.cloud.attach_instances, w.cloud.describe_group

    def attach_lost(region: str, group: str, ids: list[str], before_call: object = None) -> int:
        real_attach(region, group, ids)
        raise AwsUnavailable(f"AttachInstances({region}, {group}): Read timeout")

    w.cloud.attach_instances = attach_lost  # type: ignore[method-assign]
    with pytest.raises(AwsUnavailable):
        w.gang.attach({**FLEET, "prep": fprep, "launch": launch})
    w.cloud.attach_instances = real_attach  # type: ignore[method-assign]
    before = real_describe("us-east-1", "gpu").model_copy(
        update={"DesiredCapacity": 1, "Instances": [i for i in real_describe("us-east-1", "gpu").Instances
                                                    if i.InstanceId == OLD]}
    )  # fmt: skip
    reads = [before]  # the retry's read answers from before the attach, once

    def describe(region: str, group: str) -> Any:
        return reads.pop() if reads else real_describe(region, group)

    w.cloud.describe_group = describe  # type: ignore[method-assign]

    out = w.gang.attach({**FLEET, "prep": fprep, "launch": launch})  # Step Functions' retry

    assert out["status"] == "attached", out
    assert w.desired == 4 and len(w.instances) == 4  # attached once


def test_a_fleet_attach_of_many_batches_sent_again_on_a_stale_read_attaches_what_is_left() -> None:
    """A fleet of 25 is attached 20 a call (AttachInstances' limit). The first call applies and its answer
    is lost, so the step fails before the second. The retry reads the group from before the first call
    and sends the 25 again: AWS refuses the first 20 (already counted: 21 + 20 is above MaxSize 30). The
    group read again holds those 20 but not the other 5: the refusal was taken to stand, and the gang was
    given back with 20 of its instances attached and the last 5 never sent. What the read again shows
    attached is done; the 5 it does not are attached."""
    w = World()
    w.raw["MaxSize"] = 30
    fleet = {**FLEET, "count": 25}
    fprep = w.gang.prepare(fleet)
    launch = w.gang.launch({**fleet, "prep": fprep})
    assert len(launch["instances"]) == 25
    real_attach, real_describe = w.cloud.attach_instances, w.cloud.describe_group

    def first_batch_lost(region: str, group: str, ids: list[str], before_call: object = None) -> int:
        real_attach(region, group, ids[:20])
        raise AwsUnavailable(f"AttachInstances({region}, {group}, 20 instance(s)): Read timeout")

    w.cloud.attach_instances = first_batch_lost  # type: ignore[method-assign]
    with pytest.raises(AwsUnavailable):
        w.gang.attach({**fleet, "prep": fprep, "launch": launch})
    w.cloud.attach_instances = real_attach  # type: ignore[method-assign]
    assert w.desired == 21
    now = real_describe("us-east-1", "gpu")
    old = [i for i in now.Instances if i.InstanceId == OLD]
    reads = [now.model_copy(update={"DesiredCapacity": 1, "Instances": old})]  # from before the attach, once

    def describe(region: str, group: str) -> Any:
        return reads.pop() if reads else real_describe(region, group)

    w.cloud.describe_group = describe  # type: ignore[method-assign]

    out = w.gang.attach({**fleet, "prep": fprep, "launch": launch})  # Step Functions' retry

    assert out["status"] == "attached", out
    assert w.desired == 26 and w.instances == sorted([OLD, *launch["instances"]])  # each attached once


def test_a_fleet_attach_refused_for_instances_in_no_such_group_stands() -> None:
    """AttachInstances refuses an instance that is a member of another Auto Scaling group (the user guide's
    conditions for an attach). The group read again does not hold it: the refusal stands, and the gang
    goes to its GiveBack, rather than answering attached with nothing attached."""
    w = World()
    fprep = w.gang.prepare(FLEET)
    launch = w.gang.launch({**FLEET, "prep": fprep})

    def elsewhere(region: str, group: str, ids: list[str], before_call: object = None) -> int:
        raise AwsError(f"AttachInstances({region}, {group}): ValidationError: {ids[0]} is in another group")

    w.cloud.attach_instances = elsewhere  # type: ignore[method-assign]

    with pytest.raises(AwsError, match="another group"):
        w.gang.attach({**FLEET, "prep": fprep, "launch": launch})
    assert w.desired == 1 and w.instances == [OLD]


def late_writes(w: World, clock: dict[str, float]) -> list[str]:
    """The ledger items written when the step had no time left for one call (49 s, and the 5 s margin)."""
    real_claim = w.ledger.claim
    late: list[str] = []

    def claim(cluster: str, item: str, value: Any, **kw: Any) -> Any:
        if clock["left"] < 49 + 5:
            late.append(item)
        return real_claim(cluster, item, value, **kw)

    w.ledger.claim = claim  # type: ignore[method-assign]
    return late


def test_a_lost_raise_read_back_landed_is_recorded_only_when_the_write_ends_in_time() -> None:
    """The raise (1 -> 3) applies and its answer is lost; its read-back, held to the deadline, shows it
    landed, but took the time: 30 s are left, and one call may take 49 s. The write that records it
    asked (set#) was started anyway, which Lambda's timeout could cut (Sandbox.Timedout: SetDesired
    does not retry it, and the group's launch went unverified). Not started: that record is best effort
    (a marker without it is settled by whoever reads it next, never raised twice), and the step answers
    raised, for Verify."""
    w = World()
    up = w.up.prepare(UP)
    clock = timed(w.up)
    answering(w, "lost applied", "applied")
    real_describe = w.cloud.describe_group
    reads: list[int] = []

    def describe(region: str, group: str) -> Any:
        reads.append(1)
        if len(reads) == 2:  # the read-back after the lost answer: it answers after most of the invocation
            clock["left"] = 30.0
        return real_describe(region, group)

    w.cloud.describe_group = describe  # type: ignore[method-assign]
    late = late_writes(w, clock)

    out = w.up.set_desired({**UP, "prep": up})

    assert late == [] and out["desired"] == 3 and w.desired == 3
    assert not up_owner(w).unsettled() and up_owner(w).raised() == 2


def test_a_lost_raise_read_back_ambiguous_is_kept_unsettled_only_when_the_write_ends_in_time() -> None:
    """The raise (1 -> 3) is lost unapplied, and its read-back cannot tell (the group's read fails after
    taking most of the invocation: 30 s left, one call may take 49 s). The unsettled mark is a write
    that settles the raise for good: not started when it would not end in time. The step fails
    AwsUnavailable (not ``unsent``: the raise reached AWS) with the marker bare, and its retry, with a
    whole invocation, reads the group at 1 and asks again."""
    w = World()
    up = w.up.prepare(UP)
    clock = timed(w.up)
    calls = answering(w, "lost", "applied")
    real_describe = w.cloud.describe_group
    reads: list[int] = []

    def describe(region: str, group: str) -> Any:
        reads.append(1)
        if len(reads) == 2:  # the read-back: its tries time out
            clock["left"] = 30.0
            raise AwsUnavailable(f"DescribeAutoScalingGroups({region}, {group}): Read timeout")
        return real_describe(region, group)

    w.cloud.describe_group = describe  # type: ignore[method-assign]
    late = late_writes(w, clock)

    with pytest.raises(AwsUnavailable) as failed:
        w.up.set_desired({**UP, "prep": up})

    assert late == [] and not failed.value.unsent, failed.value
    assert not up_owner(w).unsettled() and up_owner(w).raised() == 2 and w.desired == 1
    clock["left"] = 200.0  # Step Functions' retry
    w.up.set_desired({**UP, "prep": up})
    assert calls == [3, 3] and w.desired == 3 and not up_owner(w).unsettled()


def test_a_gang_give_back_settles_a_raise_left_unasked_only_in_time() -> None:
    """GiveBack settles the marker its failed RaiseDesired left bare with the step's deadline too: with no
    time for the read-back it reads nothing and fails AwsUnavailable (GiveBack's Retry), giving back
    nothing; its retry settles it (the scale-up's raise in its window: kept unsettled) and gives back
    nothing of it."""
    w = World()
    gprep = gang_raise_left_unasked(w, applied=False)
    w.gang.deadline = Deadline(lambda: 30.0, 49)
    real_describe = w.cloud.describe_group
    reads: list[str] = []

    def describe(region: str, group: str) -> Any:
        reads.append(group)
        return real_describe(region, group)

    w.cloud.describe_group = describe  # type: ignore[method-assign]
    state = {"state": {**GANG, "prep": gprep, "error": RAISE_FAILED}}

    with pytest.raises(AwsUnavailable):
        w.gang.give_back(state)

    assert reads == [] and w.desired == 3
    w.gang.deadline = Deadline(lambda: 200.0, 49)
    assert w.gang.give_back(state)["desired"] == 3 and w.desired == 3
