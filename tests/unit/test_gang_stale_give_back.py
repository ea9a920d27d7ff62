"""A fleet-mode gang's give-back whose own group read is older than the gang's AttachInstances
(act/gang.py). DescribeAutoScalingGroups is eventually consistent, and AWS documents no bound: right
after an attach (its answer lost, or just returned) the read may not list the instances it attached yet.
Taken for instances outside the group, they were terminated through EC2 TerminateInstances, without the
decrement: Auto Scaling kept the desired capacity they had added and launched replacements nobody asked
for (EC2 Auto Scaling API Reference, TerminateInstanceInAutoScalingGroup: without the decrement "Amazon
EC2 Auto Scaling launches instances to replace the ones that are terminated"). A member the read does not
list, of an attempt whose attach marker says AttachInstances may have been sent, is given back through
Auto Scaling first; one AWS answers is in no group ("Instance Id not found - No managed instance found for
instance ID", a ValidationError: InstanceNotFound) is terminated through EC2 as before."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from test_lost_raise import FLEET
from test_shared_group import OLD, World

from spillway.act.claims import RAISE_PREFIX
from spillway.act.deadline import Deadline
from spillway.errors import AsgLimitExceeded, AwsUnavailable
from spillway.model.aws import AutoScalingGroup, SuspendedProcess
from spillway.model.calltime import STEP_MARGIN_SECONDS
from spillway.model.nodegroup import TERMINATE

GIVE_UP = {
    "status": "timeout",
    "error": "GangIncomplete",
    "reason": "us-east-1/gpu: not Ready by the deadline",
}


def read_before_attach(w: World) -> AutoScalingGroup:
    """The group as DescribeAutoScalingGroups answered before the gang's attach: OLD alone, desired 1."""
    return w.cloud.describe_group("us-east-1", "gpu")


def stale_once(w: World, read: AutoScalingGroup) -> Callable[[], int]:
    """The next DescribeAutoScalingGroups answers ``read`` (older than the world); the later ones are
    live. Returns how many stale answers were given."""
    real, given = w.cloud.describe_group, [0]

    def describe(region: str, group: str) -> AutoScalingGroup:
        if given[0] == 0:
            given[0] += 1
            return read
        return real(region, group)

    w.cloud.describe_group = describe  # type: ignore[method-assign]
    return lambda: given[0]


def attached(w: World) -> tuple[dict[str, Any], dict[str, Any], AutoScalingGroup]:
    """A fleet gang of 3 launched and attached (desired 1 -> 4), and the group as read before the attach."""
    prep = w.gang.prepare(FLEET)
    launch = w.gang.launch({**FLEET, "prep": prep})
    before = read_before_attach(w)
    assert w.gang.attach({**FLEET, "prep": prep, "launch": launch})["status"] == "attached"
    assert w.desired == 4 and len(w.instances) == 4
    return prep, launch, before


def test_a_give_back_on_a_read_older_than_the_attach_decrements_for_every_member() -> None:
    """The give-back's read lists OLD alone: the three attached members were terminated through EC2,
    and the group kept its desired capacity of 4 (three replacements, paid until a scale-down)."""
    w = World()
    prep, launch, before = attached(w)
    stale = stale_once(w, before)

    out = w.gang.give_back({"state": {**FLEET, "prep": prep, "launch": launch, "verify": GIVE_UP}})

    assert stale() == 1
    assert w.desired == 1 and w.instances == [OLD], (w.desired, w.instances)
    assert w.cloud.called("terminate_instances") == []  # nothing through EC2, behind the group's back
    assert sorted(c[1] for c in w.cloud.terminated()) == sorted(launch["instances"])
    assert all(c[2] for c in w.cloud.terminated())  # each with the decrement
    assert out["terminated"] == sorted(launch["instances"]) and out["replaced"] == []
    assert w.cloud.running() == []


def test_a_member_auto_scaling_answers_is_in_no_group_is_terminated_through_ec2() -> None:
    """The attach marker is written but AWS refused the attach (above MaxSize): the instances are in no
    group, and the give-back's read (live) rightly lists none. Auto Scaling answers each is in no group
    (InstanceNotFound), and EC2 terminates them in one call; the desired capacity is not touched."""
    w = World()
    prep = w.gang.prepare(FLEET)
    launch = w.gang.launch({**FLEET, "prep": prep})
    w.raw["MaxSize"] = 2  # lowered meanwhile: AttachInstances of 3 on desired 1 is refused
    with pytest.raises(AsgLimitExceeded):
        w.gang.attach({**FLEET, "prep": prep, "launch": launch})
    assert w.ledger.claims("prod", RAISE_PREFIX)  # marked before the refused attach

    out = w.gang.give_back({"state": {**FLEET, "prep": prep, "launch": launch, "verify": GIVE_UP}})

    assert sorted(c[1] for c in w.cloud.terminated()) == sorted(launch["instances"])  # asked first
    assert w.cloud.called("terminate_instances") == [("us-east-1", tuple(sorted(launch["instances"])))]
    assert out["terminated"] == sorted(launch["instances"]) and w.cloud.running() == []
    assert w.desired == 1 and w.instances == [OLD]


def test_a_member_never_attached_is_terminated_through_ec2_without_asking_auto_scaling() -> None:
    """No attach marker (the gang never reached its attach): AttachInstances was never sent, so a member
    the read does not list is in no group, and Auto Scaling is not asked for it."""
    w = World()
    prep = w.gang.prepare(FLEET)
    launch = w.gang.launch({**FLEET, "prep": prep})

    out = w.gang.give_back({"state": {**FLEET, "prep": prep, "launch": launch, "verify": GIVE_UP}})

    assert w.cloud.terminated() == []
    assert w.cloud.called("terminate_instances") == [("us-east-1", tuple(sorted(launch["instances"])))]
    assert out["terminated"] == sorted(launch["instances"]) and w.cloud.running() == []


def test_a_min_size_raised_after_a_stale_reads_attach_still_terminates_through_auto_scaling() -> None:
    """MinSize raised to 4 after the attach: AWS refuses each decrement, and the member is terminated
    without it, as for a member the read lists (the group keeps the capacity its MinSize asks for)."""
    w = World()
    prep, launch, before = attached(w)
    w.raw["MinSize"] = 4
    stale_once(w, before)

    out = w.gang.give_back({"state": {**FLEET, "prep": prep, "launch": launch, "verify": GIVE_UP}})

    assert w.cloud.called("terminate_instances") == []
    assert out["replaced"] == sorted(launch["instances"]) == out["terminated"]
    assert w.desired == 4 and "terminated without decrement: MinSize 4" in out["cause"]


def test_a_member_a_stale_read_does_not_list_is_held_while_terminate_is_suspended() -> None:
    """Terminate suspended meanwhile, and the read too old to list the attached members: whether each is
    InService is not known, so none is asked for (nor terminated through EC2, which would leave its
    capacity to a replacement once Terminate resumes); they are held, as InService members are."""
    w = World()
    prep, launch, before = attached(w)
    w.raw["SuspendedProcesses"] = [{"ProcessName": TERMINATE, "SuspensionReason": "by hand"}]
    stale_once(w, before.model_copy(update={"SuspendedProcesses": [SuspendedProcess(ProcessName=TERMINATE)]}))

    out = w.gang.give_back({"state": {**FLEET, "prep": prep, "launch": launch, "verify": GIVE_UP}})

    assert w.cloud.terminated() == [] and w.cloud.called("terminate_instances") == []
    assert out["held"] == sorted(launch["instances"]) and out["terminated"] == []
    assert w.desired == 4 and "left running that the group's read did not list" in out["cause"]


def test_the_attach_marker_read_is_held_to_the_steps_deadline() -> None:
    """No time left for a call: the marker is not read and nothing is terminated; GiveBack's Retry
    (AwsUnavailable) asks again with a new invocation's time (act/deadline.py)."""
    w = World()
    prep, launch, before = attached(w)
    stale_once(w, before)
    w.gang.deadline = Deadline(lambda: 30.0, 49)
    real_claims, read = w.ledger.claims, []

    def claims(cluster: str, prefix: str) -> Any:
        read.append(prefix)
        return real_claims(cluster, prefix)

    w.ledger.claims = claims  # type: ignore[method-assign]

    with pytest.raises(AwsUnavailable, match="not started"):
        w.gang.give_back({"state": {**FLEET, "prep": prep, "launch": launch, "verify": GIVE_UP}})

    assert not any(p.startswith(RAISE_PREFIX) for p in read)
    assert w.cloud.terminated() == [] and w.cloud.called("terminate_instances") == [] and w.desired == 4


def test_each_auto_scaling_terminate_of_the_give_back_is_held_to_the_steps_deadline() -> None:
    """Time for two calls: two members are terminated (with the decrement), the third is not started,
    and the step fails AwsUnavailable; its retry terminates the third, and none goes through EC2."""
    w = World()
    prep, launch, before = attached(w)
    stale_once(w, before)
    left = {"s": STEP_MARGIN_SECONDS + 49 * 2}
    w.gang.deadline = Deadline(lambda: left["s"], 49)
    real = w.cloud.terminate_instance

    def terminate(region: str, instance_id: str, decrement: bool = True) -> Any:
        left["s"] -= 49  # each call as long as it may be
        return real(region, instance_id, decrement=decrement)

    w.cloud.terminate_instance = terminate  # type: ignore[method-assign]
    state = {"state": {**FLEET, "prep": prep, "launch": launch, "verify": GIVE_UP}}

    with pytest.raises(AwsUnavailable, match="not started"):
        w.gang.give_back(state)

    assert [c[1] for c in w.cloud.terminated()] == sorted(launch["instances"])[:2] and w.desired == 2
    w.gang.deadline = Deadline()
    out = w.gang.give_back(state)
    assert w.desired == 1 and w.instances == [OLD] and w.cloud.running() == []
    assert w.cloud.called("terminate_instances") == [] and out["replaced"] == []


def test_held_members_the_read_does_not_list_are_not_said_to_be_in_the_group() -> None:
    """The attach marker is written but AWS refused the attach (above MaxSize): the members are in no group.
    Terminate suspended meanwhile, the give-back cannot tell (the read may be older than an attach), so
    it holds them; the cause said "left running in the group", untrue of them. It says they were not
    listed, and that one in no group is the gang sweep's."""
    w = World()
    prep = w.gang.prepare(FLEET)
    launch = w.gang.launch({**FLEET, "prep": prep})
    w.raw["MaxSize"] = 2
    with pytest.raises(AsgLimitExceeded):
        w.gang.attach({**FLEET, "prep": prep, "launch": launch})
    w.raw["SuspendedProcesses"] = [{"ProcessName": TERMINATE, "SuspensionReason": "by hand"}]

    out = w.gang.give_back({"state": {**FLEET, "prep": prep, "launch": launch, "verify": GIVE_UP}})

    assert out["held"] == sorted(launch["instances"]) and w.cloud.terminated() == []
    assert "in the group" not in out["cause"], out["cause"]
    assert "read did not list" in out["cause"] and "gang sweep" in out["cause"]
