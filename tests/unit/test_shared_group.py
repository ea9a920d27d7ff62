"""A scale-up and rollback-mode gangs growing one Auto Scaling group at once (act/claims.py): whatever
the order of their steps, each adds only its own capacity and gives back only its own, and none loses
the nodes of another."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fakes import FakeCloud, FakeCluster, FakeLedger, FakeSnapshots
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spillway.act import gang
from spillway.act.claims import Owner
from spillway.act.planning import PlanSettings
from spillway.act.scale import ScaleSteps
from spillway.config import PlannerConfig
from spillway.errors import AsgLimitExceeded, AwsThrottled, AwsUnavailable
from spillway.local import objects as o
from spillway.model.nodegroup import TAG_ATOMIC_LAUNCH

NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
OLD = "i-0old0000000000000"
GANG = {"group": "gpu", "region": "us-east-1", "count": 3, "gang": "ml/train", "mode": "rollback",
        "deadline_seconds": 60, "poll_seconds": 1, "plan_id": "p-1", "execution": "gang-p-1"}  # fmt: skip
UP = {"cluster": "prod", "plan_id": "p-1", "round": 1, "launch_timeout_seconds": 60,
      "group": {"group": "gpu", "region": "us-east-1", "from": 1, "to": 3, "grow": True, "uncordon": []}}  # fmt: skip


class World:
    def __init__(self) -> None:
        self.cloud = FakeCloud(cluster="prod")
        raw = self.cloud.add_group("gpu", [OLD], max_size=10, instance_type="g5.xlarge")
        raw["Tags"].append({"Key": TAG_ATOMIC_LAUNCH, "Value": "rollback", "PropagateAtLaunch": False})
        self.kube = FakeCluster([o.node(f"node-{OLD}", instance=OLD)])
        self.ledger = FakeLedger()
        self.now = NOW
        self.launched = 0
        self.gang = gang.GangSteps(kube=self.kube, aws=self.cloud, ledger=self.ledger, cluster="prod",
                                   clock=lambda: self.now)  # fmt: skip
        settings = PlanSettings(planner=PlannerConfig(cluster="prod", regions=("us-east-1",)))
        self.up = ScaleSteps(kube=self.kube, aws=self.cloud, ledger=self.ledger, snapshots=FakeSnapshots(),
                             settings=settings, clock=lambda: self.now)  # fmt: skip

    @property
    def raw(self) -> dict[str, Any]:
        return self.cloud.groups[("us-east-1", "gpu")]

    @property
    def desired(self) -> int:
        return int(self.raw["DesiredCapacity"])

    @property
    def instances(self) -> list[str]:
        return sorted(i["InstanceId"] for i in self.raw["Instances"])

    def asg_launches(self, n: int, ready: bool = True) -> list[str]:
        """Auto Scaling fills ``n`` of the desired capacity: instances InService, their Nodes join."""
        ids = []
        for _ in range(n):
            self.launched += 1
            iid = f"i-0new{self.launched:014d}"
            self.raw["Instances"].append({"InstanceId": iid, "LifecycleState": "InService",
                                          "AvailabilityZone": "us-east-1a", "HealthStatus": "Healthy"})  # fmt: skip
            self.cloud.dns[iid] = f"node-{iid}"
            self.kube.nodes[f"node-{iid}"] = o.node(f"node-{iid}", instance=iid, ready=ready)
            ids.append(iid)
        return ids


def test_a_scale_up_between_the_gangs_prepare_and_raise_is_kept_and_the_failed_gang_gives_back_only_its_own() -> (
    None
):
    w = World()
    gprep = w.gang.prepare(GANG)
    uprep = w.up.prepare(UP)
    w.up.set_desired({**UP, "prep": uprep})
    assert w.desired == 3
    w.gang.raise_desired({**GANG, "prep": gprep})
    assert w.desired == 6  # 1 + the scale-up's 2 + the gang's 3: nothing lowered

    ups = w.asg_launches(2)  # the scale-up claims first what launches first
    assert w.up.verify({**UP, "prep": uprep})["status"] == "ready"
    gangs = w.asg_launches(3, ready=False)  # the gang's never become Ready
    assert w.gang.verify({**GANG, "prep": gprep})["status"] == "waiting"
    w.now = NOW + timedelta(seconds=61)
    verify = w.gang.verify({**GANG, "prep": gprep})
    assert verify["status"] == "timeout"

    out = w.gang.give_back({"state": {**GANG, "prep": gprep, "verify": verify}})

    assert sorted(out["terminated"]) == gangs
    assert w.instances == sorted([OLD, *ups])  # the scale-up's nodes run on
    assert w.desired == 3 and out["desired"] == 3  # 1 + the scale-up's 2


def test_a_gang_raised_first_does_not_absorb_the_scale_up_and_its_back_off_gives_back_only_its_own() -> None:
    w = World()
    gprep = w.gang.prepare(GANG)
    w.gang.raise_desired({**GANG, "prep": gprep})
    uprep = w.up.prepare(UP)
    assert uprep["set"] and uprep["count"] == 2  # live desired 4 >= to 3: still the plan's own 2
    w.up.set_desired({**UP, "prep": uprep})
    assert w.desired == 6

    w.asg_launches(4)  # EC2 had room for 4 of the 5
    assert w.gang.verify({**GANG, "prep": gprep})["status"] == "ready"
    gangs = w.gang.verify({**GANG, "prep": gprep})["instances"]
    w.now = NOW + timedelta(seconds=61)
    launch = w.up.verify({**UP, "prep": uprep})
    assert launch["status"] == "timeout" and launch["ready"] == 1

    out = w.up.backoff({**UP, "prep": uprep, "launch": launch})

    assert out["terminated"] == []  # its one instance runs a Ready Node: delivered, kept
    assert set(gangs) <= set(w.instances) and len(w.instances) == 5  # the whole gang runs on
    assert w.desired == 5 and out["desired"] == 5  # only the undelivered 1 given back


def test_a_scale_up_back_off_leaves_its_in_service_instances_when_terminate_is_suspended() -> None:
    """Terminate suspended after the raise: Auto Scaling terminates no InService instance (EC2 Auto
    Scaling User Guide, "Considerations for suspending processes"), so the back-off does not ask for its
    unready InService instance (held, named in the reason, its capacity kept) and still takes off what
    never launched: lowering the desired capacity to the instances running terminates nothing. (A
    Pending one would still be terminated: the suspension covers InService instances only.)"""
    w = World()
    uprep = w.up.prepare(UP)
    w.up.set_desired({**UP, "prep": uprep})
    (mine,) = w.asg_launches(1, ready=False)  # one of the plan's 2; its Node never becomes Ready
    w.raw["SuspendedProcesses"] = [{"ProcessName": "Terminate", "SuspensionReason": "User suspended"}]
    w.now = NOW + timedelta(seconds=61)
    launch = w.up.verify({**UP, "prep": uprep})
    assert launch["status"] == "timeout"

    out = w.up.backoff({**UP, "prep": uprep, "launch": launch})

    assert w.cloud.terminated() == [] and out["terminated"] == [] and out["held"] == [mine]
    assert w.instances == sorted([OLD, mine]) and w.desired == 2 == out["desired"]
    assert "1 instance(s) left running in the group: its Terminate process is suspended" in out["reason"]


def test_two_gangs_on_one_group_the_failed_one_leaves_the_other_whole() -> None:
    w = World()
    other = {**GANG, "gang": "ml/eval", "count": 2}
    a, b = w.gang.prepare(GANG), w.gang.prepare(other)
    w.gang.raise_desired({**GANG, "prep": a})
    w.gang.raise_desired({**other, "prep": b})
    assert w.desired == 6
    w.asg_launches(2)
    assert w.gang.verify({**other, "prep": b})["status"] == "ready"  # b claims the first two
    w.now = NOW + timedelta(seconds=61)
    verify = w.gang.verify({**GANG, "prep": a})
    assert verify["status"] == "timeout"

    out = w.gang.give_back({"state": {**GANG, "prep": a, "verify": verify}})

    assert out["terminated"] == [] and len(w.instances) == 3  # b's two and the old one
    assert w.desired == 3  # a's 3 never launched: exactly those given back


def test_a_retried_raise_raises_once_and_a_failed_one_raises_on_the_retry() -> None:
    w = World()
    prep = w.gang.prepare(GANG)
    w.cloud.fail("set_desired_capacity", AwsThrottled("Rate exceeded"), times=1)
    with pytest.raises(AwsThrottled):
        w.gang.raise_desired({**GANG, "prep": prep})
    assert w.desired == 1

    first = w.gang.raise_desired({**GANG, "prep": prep})  # Step Functions retries
    again = w.gang.raise_desired({**GANG, "prep": prep})  # and again (the answer was lost)

    assert w.desired == 4 and first["desired"] == again["desired"] == 4 and again["again"]
    assert len(w.cloud.called("set_desired_capacity")) == 2  # the throttled call and one raise


def _answer_lost(w: World, *, landed: bool) -> list[int]:
    """The first SetDesiredCapacity times out (a 5xx, a reset): applied by AWS when ``landed``, or not."""
    real = w.cloud.set_desired_capacity
    calls: list[int] = []

    def answer_lost(region: str, group: str, desired: int, before_call: object = None) -> int:
        calls.append(desired)
        if len(calls) == 1:
            if landed:
                real(region, group, desired)
            raise AwsUnavailable(f"SetDesiredCapacity({region}, {group}, {desired}): Read timeout")
        return real(region, group, desired)

    w.cloud.set_desired_capacity = answer_lost  # type: ignore[method-assign]
    return calls


def test_a_raise_whose_answer_was_lost_but_landed_is_a_success_and_is_not_applied_again() -> None:
    """A read timeout or a 5xx after SetDesiredCapacity, which AWS applied. The marker was given back,
    so Step Functions' retry added the count again on top: two nodes more than planned, never given
    back. The group is read again at once: at the raise's value, the raise landed. (Found by review.)"""
    w = World()  # desired 1
    prep = w.up.prepare(UP)  # +2
    calls = _answer_lost(w, landed=True)

    w.up.set_desired({**UP, "prep": prep})
    w.up.set_desired({**UP, "prep": prep})  # a retry all the same finds the marker

    assert w.desired == 3 and calls == [3]


def test_a_raise_whose_answer_was_lost_and_that_did_not_land_is_asked_again_before_another_raises() -> None:
    """Not applied, and read back where it started: asked again at once, at its own value, within the
    step (claims.py ``_ask``), so another owner's raise after it (+3) adds to it and neither is lost."""
    w = World()  # desired 1
    up, gang = w.up.prepare(UP), w.gang.prepare(GANG)
    calls = _answer_lost(w, landed=False)
    w.up.set_desired({**UP, "prep": up})  # 1 -> 3, asked twice
    w.gang.raise_desired({**GANG, "prep": gang})  # 3 -> 6

    w.up.set_desired({**UP, "prep": up})  # a retry of the step: nothing more

    assert (w.desired, calls) == (6, [3, 3, 6])


@pytest.mark.parametrize("case", ["moved up", "unreadable"])
def test_a_raise_whose_answer_was_lost_is_not_released_when_the_group_moved_up_or_cannot_be_read(
    case: str,
) -> None:
    """The raise landed (1 -> 3) and a gang raised +3 before the group was read again (6): another
    owner raised in the window, so whether this raise landed cannot be told, and its marker is kept
    (the step fails; its retry raises nothing). And when the group cannot be read either, the marker is
    kept: a raise applied twice is the worse of the two. (Found by review.)"""
    w = World()
    up, gang = w.up.prepare(UP), w.gang.prepare(GANG)
    real = w.cloud.set_desired_capacity
    calls: list[int] = []

    def answer_lost(region: str, group: str, desired: int, before_call: object = None) -> int:
        calls.append(desired)
        previous = real(region, group, desired)
        if len(calls) == 1:
            if case == "moved up":
                w.gang.raise_desired({**GANG, "prep": gang})  # 3 -> 6
            else:
                w.cloud.fail("describe_group", AwsUnavailable("DescribeAutoScalingGroups: 503"), times=1)
            raise AwsUnavailable(f"SetDesiredCapacity({region}, {group}, {desired}): Read timeout")
        return previous

    w.cloud.set_desired_capacity = answer_lost  # type: ignore[method-assign]
    with pytest.raises(AwsUnavailable):
        w.up.set_desired({**UP, "prep": up})
    assert w.up.set_desired({**UP, "prep": up})["again"]  # a retry

    assert w.desired == (6 if case == "moved up" else 3)
    assert calls == ([3, 6] if case == "moved up" else [3])  # the scale-up's raise made once


def test_a_raise_that_did_not_land_is_not_taken_for_another_owners_raise() -> None:
    """The scale-up asks 1 -> 3 and the call fails without applying (a reset, a 503 before the change);
    meanwhile a rollback-mode gang reads the live 1 and raises it to 4. Read back, 4 is above the
    scale-up's 3, so its +2 was taken as landed: reported raised, and the scale-up's verification
    would wait for two nodes that never come and back the group off. (Found by review.) The gang's
    marker is in the window: the outcome is ambiguous, the marker kept and marked unsettled (never
    raised twice; what follows is safe: tests/unit/test_lost_raise.py). Counting the gang's +3 into
    the value instead, as this test once expected (6 on the retry), is not sound: a marker may be dated
    before its owner read the group, or its raise never have applied (review r2)."""
    w = World()  # desired 1
    up, gang = w.up.prepare(UP), w.gang.prepare(GANG)  # +2 and +3
    real = w.cloud.set_desired_capacity
    calls: list[int] = []

    def lost_unapplied(region: str, group: str, desired: int, before_call: object = None) -> int:
        calls.append(desired)
        if len(calls) == 1:  # the scale-up's 1 -> 3: not applied; the gang raises meanwhile
            w.gang.raise_desired({**GANG, "prep": gang})  # live 1 -> 4
            raise AwsUnavailable(f"SetDesiredCapacity({region}, {group}, {desired}): connection reset")
        return real(region, group, desired)

    w.cloud.set_desired_capacity = lost_unapplied  # type: ignore[method-assign]
    with pytest.raises(AwsUnavailable):  # not reported raised
        w.up.set_desired({**UP, "prep": up})
    assert w.up.set_desired({**UP, "prep": up})["again"]  # Step Functions' retry raises nothing more

    assert w.desired == 4 and calls == [3, 4]  # the gang's 4 went through the same call
    assert Owner(w.ledger, "prod", "us-east-1", "gpu", up["owner"]).unsettled()


def test_a_lost_answer_after_an_earlier_owners_raise_is_settled_as_landed_once() -> None:
    """The gang raised 1 -> 4 sixteen minutes before the scale-up began; the scale-up's 4 -> 6 landed
    but its answer was lost. The gang's marker is older than any step runs (15 minutes at most): its +3
    was in the 4 the scale-up read, so 6 is the scale-up's raise landed, settled at once and not applied
    again. (It said 20 seconds before: a marker is dated before its owner reads the group, so an owner
    20 seconds earlier may have raised on a value without this raise; review r2.)"""
    w = World()  # desired 1
    w.gang.raise_desired({**GANG, "prep": w.gang.prepare(GANG)})  # 1 -> 4
    w.now += timedelta(minutes=16)
    up = w.up.prepare(UP)  # +2
    calls = _answer_lost(w, landed=True)

    w.up.set_desired({**UP, "prep": up})
    w.up.set_desired({**UP, "prep": up})  # a retry all the same finds the marker

    assert w.desired == 6 and calls == [6]
    assert not Owner(w.ledger, "prod", "us-east-1", "gpu", up["owner"]).unsettled()


def test_a_retried_scale_up_raise_raises_once_relative_to_the_live_value() -> None:
    w = World()
    prep = w.up.prepare(UP)
    w.raw["DesiredCapacity"] = 2  # somebody else raised meanwhile
    w.up.set_desired({**UP, "prep": prep})
    w.up.set_desired({**UP, "prep": prep})
    assert w.desired == 4


def test_a_raise_above_max_size_at_raise_time_raises_nothing_and_can_be_retried() -> None:
    w = World()
    prep = w.gang.prepare(GANG)
    w.raw["DesiredCapacity"] = 9  # a scale-up took the room meanwhile
    with pytest.raises(AsgLimitExceeded, match="above MaxSize 10"):
        w.gang.raise_desired({**GANG, "prep": prep})
    assert w.desired == 9 and w.ledger.claimed == {}


def test_an_instance_launched_for_an_earlier_scale_up_before_a_later_one_prepared_is_the_earlier_ones() -> (
    None
):
    """The demo's overflow: A raises the group by 1, its instance is there when B prepares (so it is not new
    to B), B raises by 2; A verifies first and must take its own instance, not one launched for B, or B
    ends short and backs its group off while every node it asked for runs Ready."""
    w = World()
    a = {**UP, "plan_id": "p-a", "group": {**UP["group"], "from": 1, "to": 2}}
    b = {**UP, "plan_id": "p-b", "group": {**UP["group"], "from": 2, "to": 4}}
    aprep = w.up.prepare(a)
    w.up.set_desired({**a, "prep": aprep})
    w.launched = 5  # A's instance sorts after B's: a first-by-id claim would take one of B's
    (for_a,) = w.asg_launches(1)
    bprep = w.up.prepare(b)
    assert for_a in bprep["before"]
    w.up.set_desired({**b, "prep": bprep})
    w.launched = 0
    for_b = w.asg_launches(2)
    assert w.desired == 4

    assert w.up.verify({**a, "prep": aprep})["nodes"] == [f"node-{for_a}"]
    verify_b = w.up.verify({**b, "prep": bprep})

    assert verify_b["status"] == "ready" and verify_b["nodes"] == [f"node-{i}" for i in for_b]


def test_a_group_running_more_than_a_thousand_instances_is_still_raised_by_a_gang_and_a_scale_up() -> None:
    """``prep.before`` is every live instance of the group (what the step's prepare saw), and the next
    step's input check took at most 1,000 of them: a group of 1,200 could neither be grown by a scale-up
    nor by a gang (InputError at the raise, the gang's give-back refused the same way). The bound is what
    a Step Functions state can carry (256 KB: about 11,900 instance ids), not a group size."""
    w = World()
    w.raw["Instances"] = [{"InstanceId": f"i-0b{n:015x}", "LifecycleState": "InService",
                           "AvailabilityZone": "us-east-1a", "HealthStatus": "Healthy"} for n in range(1_200)]  # fmt: skip
    w.raw["DesiredCapacity"], w.raw["MaxSize"] = 1_200, 1_210
    request = {k: GANG[k] for k in ("group", "region", "count", "gang", "mode", "deadline_seconds",
                                    "poll_seconds", "plan_id")}  # fmt: skip
    gprep = w.gang.prepare(GANG)
    assert len(gprep["before"]) == 1_200

    w.gang.run({"action": "gang_raise", **request, "prep": gprep})
    group = {**UP["group"], "from": 1_203, "to": 1_205, "new_nodes": 2, "pods": 2, "reasons": {}}
    uprep = w.up.prepare({**UP, "group": group})
    w.up.run({"action": "set_desired", "cluster": "prod", "plan_id": "p-1", "group": group, "prep": uprep})

    assert w.desired == 1_205


def test_a_scale_up_alone_claims_its_instances_without_reading_the_raise_markers() -> None:
    """The claim order (which reads every raise marker of the cluster, each listing what its owner's
    prepare saw) matters only when there are more unclaimed instances than room: alone, a scale-up
    claims its own without that read."""
    w = World()
    prep = w.up.prepare(UP)
    w.up.set_desired({**UP, "prep": prep})
    w.asg_launches(2)
    reads = len([c for c in w.ledger.called("claims") if c[1] == "raise#"])

    assert w.up.verify({**UP, "prep": prep})["status"] == "ready"
    assert len([c for c in w.ledger.called("claims") if c[1] == "raise#"]) == reads


@settings(derandomize=True, max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_scale_ups_in_any_order_each_end_ready_once_every_instance_raised_for_runs(
    data: st.DataObject,
) -> None:
    """Three scale-ups of one group, their prepares, raises, Auto Scaling's launches (ids in any order)
    and their verifies interleaved any way: once every instance the raises asked for runs a Ready Node,
    every scale-up's verify is ``ready`` with its own count, and no instance is any two's."""
    w = World()
    counts = data.draw(st.lists(st.integers(1, 3), min_size=2, max_size=3), label="counts")
    ids = iter(data.draw(st.permutations(range(1, 20)), label="ids"))
    ups = [
        {**UP, "plan_id": f"p-{n}", "group": {**UP["group"], "from": 0, "to": c}}
        for n, c in enumerate(counts)
    ]
    preps: dict[int, dict[str, Any]] = {}
    raised, launched = set(), 0
    steps = [("prepare", n) for n in range(len(ups))] + [("raise", n) for n in range(len(ups))]
    steps += [("launch", 0)] * sum(counts) + [("verify", n) for n in range(len(ups)) for _ in range(2)]
    for kind, n in data.draw(st.permutations(steps), label="order"):
        if kind == "prepare" and n not in preps:
            preps[n] = w.up.prepare(ups[n])
        elif kind == "raise" and n in preps and n not in raised:
            w.up.set_desired({**ups[n], "prep": preps[n]})
            raised.add(n)
        elif kind == "launch" and launched < sum(counts[i] for i in raised):
            w.launched = next(ids) - 1
            w.asg_launches(1)
            launched += 1
        elif kind == "verify" and n in raised:
            w.up.verify({**ups[n], "prep": preps[n]})
    for n in range(len(ups)):  # whatever was left undone, in order
        if n not in preps:
            preps[n] = w.up.prepare(ups[n])
        if n not in raised:
            w.up.set_desired({**ups[n], "prep": preps[n]})
            raised.add(n)
    for _ in range(sum(counts) - launched):
        w.launched = next(ids) - 1
        w.asg_launches(1)

    results = [w.up.verify({**ups[n], "prep": preps[n]}) for n in range(len(ups))]

    assert [r["status"] for r in results] == ["ready"] * len(ups), results
    nodes = [node for r in results for node in r["nodes"]]
    assert sorted(len(r["nodes"]) for r in results) == sorted(counts) and len(set(nodes)) == len(nodes)


def test_an_instance_back_from_standby_is_not_taken_for_the_scale_ups_launch() -> None:
    """ExitStandby (EC2 Auto Scaling API Reference): an instance put back in service adds one to the
    desired capacity itself. It was in the group, in Standby, when the scale-up prepared, so it is not one
    the scale-up launched. On main ``before`` kept only the live instances: the scale-up, whose launches
    failed, claimed the returning instance as its own and gave back one of its two undelivered instead of
    both, leaving the group one above what anybody asked for, retrying a launch that fails."""
    w = World()  # desired 1: OLD InService
    standby = "i-0stby000000000000"
    w.raw["Instances"].append({"InstanceId": standby, "LifecycleState": "Standby",
                               "AvailabilityZone": "us-east-1a", "HealthStatus": "Healthy"})  # fmt: skip
    w.cloud.dns[standby] = f"node-{standby}"
    w.kube.nodes[f"node-{standby}"] = o.node(f"node-{standby}", instance=standby)
    prep = w.up.prepare(UP)  # +2
    w.up.set_desired({**UP, "prep": prep})  # 1 -> 3
    w.raw["Instances"][-1]["LifecycleState"] = "InService"  # ExitStandby: 3 -> 4
    w.raw["DesiredCapacity"] = w.desired + 1
    w.cloud.activities[("us-east-1", "gpu")] = [o.failed_launch(w.raw, NOW + timedelta(seconds=5))]
    w.now = NOW + timedelta(seconds=10)
    launch = w.up.verify({**UP, "prep": prep})
    assert launch["status"] == "failed"

    w.up.backoff({**UP, "prep": prep, "launch": launch})

    assert w.desired == 2  # OLD and the instance back from Standby: the scale-up's +2 all given back
    assert not any(v.get("owner") == prep["owner"] for v in w.ledger.claimed.values())


def test_an_instance_back_from_standby_is_not_taken_for_a_gangs_member() -> None:
    """ExitStandby (EC2 Auto Scaling API Reference) puts an instance that was in the group all along back
    in service, adding to the desired capacity itself. On main the gang's ``before`` kept only live
    instances, so a rollback gang that timed out claimed it as a member and terminated it with the gang."""
    w = World()
    standby = "i-0000stby000000000"  # sorted before the new ones
    w.raw["Instances"].append({"InstanceId": standby, "LifecycleState": "Standby",
                               "AvailabilityZone": "us-east-1a", "HealthStatus": "Healthy"})  # fmt: skip
    w.cloud.dns[standby] = f"node-{standby}"
    w.kube.nodes[f"node-{standby}"] = o.node(f"node-{standby}", instance=standby, ready=False)
    gprep = w.gang.prepare(GANG)
    w.gang.raise_desired({**GANG, "prep": gprep})  # 1 -> 4
    w.raw["Instances"][-1]["LifecycleState"] = "InService"  # ExitStandby: 4 -> 5
    w.raw["DesiredCapacity"] = w.desired + 1
    gangs = w.asg_launches(3, ready=False)  # the gang's never become Ready
    w.now = NOW + timedelta(seconds=61)
    verify = w.gang.verify({**GANG, "prep": gprep})
    assert verify["status"] == "timeout"

    out = w.gang.give_back({"state": {**GANG, "prep": gprep, "verify": verify}})

    assert sorted(out["terminated"]) == gangs
    assert standby in w.instances and w.desired == 2


def test_a_retried_back_off_gives_back_the_undelivered_capacity_once() -> None:
    """SetDesiredCapacity's answer can be lost after Auto Scaling applied it (a timeout, a 5xx), and the
    BackOff step is retried on AwsUnavailable. On main the retry took the scale-up's 2 undelivered off the
    live desired capacity a second time: 6 -> 4 -> 2, cutting the gang's 3 launches in flight to 1."""
    w = World()  # desired 1
    uprep, gprep = w.up.prepare(UP), w.gang.prepare(GANG)
    w.up.set_desired({**UP, "prep": uprep})  # 1 -> 3
    w.gang.raise_desired({**GANG, "prep": gprep})  # 3 -> 6
    w.cloud.activities[("us-east-1", "gpu")] = [o.failed_launch(w.raw, NOW + timedelta(seconds=5))]
    w.now = NOW + timedelta(seconds=10)
    launch = w.up.verify({**UP, "prep": uprep})
    assert launch["status"] == "failed"
    real = w.cloud.set_desired_capacity
    lost: list[int] = []

    def answer_lost(region: str, group: str, desired: int, before_call: object = None) -> int:
        previous = real(region, group, desired)
        if not lost:
            lost.append(desired)
            raise AwsUnavailable(f"SetDesiredCapacity({region}, {group}, {desired}): Read timeout")
        return previous

    w.cloud.set_desired_capacity = answer_lost  # type: ignore[method-assign]
    with pytest.raises(AwsUnavailable):
        w.up.backoff({**UP, "prep": uprep, "launch": launch})
    assert w.desired == 4

    out = w.up.backoff({**UP, "prep": uprep, "launch": launch})  # Step Functions' retry

    assert w.desired == 4 and out["desired"] == 4  # 1 + the gang's 3, still launching


def throttle_second_terminate(w: World) -> None:
    """The second TerminateInstanceInAutoScalingGroup of the world is throttled; the others go through."""
    real = w.cloud.terminate_instance
    seen: list[str] = []

    def throttled_second(region: str, instance_id: str, decrement: bool = True) -> Any:
        seen.append(instance_id)
        if len(seen) == 2:
            raise AwsThrottled("Rate exceeded")
        return real(region, instance_id, decrement)

    w.cloud.terminate_instance = throttled_second  # type: ignore[method-assign]


def test_a_back_off_retried_after_a_partial_terminate_gives_back_no_more_than_it_raised() -> None:
    """TerminateInstanceInAutoScalingGroup with ShouldDecrementDesiredCapacity takes one off the desired
    capacity per instance (EC2 Auto Scaling API Reference). The back-off terminated one of its two, the
    other's call was throttled and the step retried: before, the retry saw only the one still running as
    delivered, so it took 1 "undelivered" off too: 3 off in all for a raise of 2, one of the gang's."""
    w = World()  # desired 1
    uprep, gprep = w.up.prepare(UP), w.gang.prepare(GANG)
    w.up.set_desired({**UP, "prep": uprep})  # 1 -> 3
    w.gang.raise_desired({**GANG, "prep": gprep})  # 3 -> 6
    w.asg_launches(2, ready=False)  # the scale-up's two, never Ready
    assert w.up.verify({**UP, "prep": uprep})["status"] == "launching"
    w.now = NOW + timedelta(seconds=61)
    launch = w.up.verify({**UP, "prep": uprep})
    assert launch["status"] == "timeout"
    throttle_second_terminate(w)
    with pytest.raises(AwsThrottled):
        w.up.backoff({**UP, "prep": uprep, "launch": launch})
    assert w.desired == 5

    w.up.backoff({**UP, "prep": uprep, "launch": launch})  # Step Functions' retry

    assert w.desired == 4  # 1 + the gang's 3


def test_a_gang_give_back_retried_after_a_partial_terminate_gives_back_no_more_than_it_raised() -> None:
    """As for the scale-up: each TerminateInstanceInAutoScalingGroup with ShouldDecrementDesiredCapacity
    already took its instance off the desired capacity (EC2 Auto Scaling API Reference). Before, the
    retried GiveBack counted only the member still running as delivered and took 2 more off: the
    scale-up's raise."""
    w = World()  # desired 1
    gprep, uprep = w.gang.prepare(GANG), w.up.prepare(UP)
    w.gang.raise_desired({**GANG, "prep": gprep})  # 1 -> 4
    w.up.set_desired({**UP, "prep": uprep})  # 4 -> 6
    w.asg_launches(3, ready=False)  # the gang's three, never Ready
    assert w.gang.verify({**GANG, "prep": gprep})["status"] == "waiting"
    w.now = NOW + timedelta(seconds=61)
    verify = w.gang.verify({**GANG, "prep": gprep})
    assert verify["status"] == "timeout"
    throttle_second_terminate(w)
    state = {"state": {**GANG, "prep": gprep, "verify": verify}}
    with pytest.raises(AwsThrottled):
        w.gang.give_back(state)
    assert w.desired == 4

    w.gang.give_back(state)  # Step Functions' retry

    assert w.desired == 3  # 1 + the scale-up's 2


def _replaced(w: World, old: str, ready: bool = True) -> str:
    """Auto Scaling replaces ``old`` as it does after a failed health check (EC2 Auto Scaling User Guide,
    "View the reason for health check failures"): ``old`` leaves service (Terminating, Unhealthy) without
    the desired capacity changing, and a new instance is launched for it, its activity saying why."""
    for instance in w.raw["Instances"]:
        if instance["InstanceId"] == old:
            instance.update(LifecycleState="Terminating", HealthStatus="Unhealthy")
    (new,) = w.asg_launches(1, ready=ready)
    w.cloud.activities.setdefault(("us-east-1", "gpu"), []).append({
        "ActivityId": f"act-{new}", "AutoScalingGroupName": "gpu", "StatusCode": "InProgress",
        "Description": f"Launching a new EC2 instance: {new}", "StartTime": w.now.isoformat(),
        "Cause": f"At {w.now:%Y-%m-%dT%H:%M:%SZ} an instance was launched in response to an unhealthy "
        "instance needing to be replaced."})  # fmt: skip
    return new


def test_the_replacement_of_an_instance_the_group_took_out_of_service_is_not_the_scale_ups_launch() -> None:
    """The group replaces OLD (failed health check) while the scale-up's 2 launch: the replacement
    keeps the desired capacity, it adds nothing for the pending pods, so one Ready instance of the
    scale-up's own is 1 of 2, not the raise delivered."""
    w = World()
    uprep = w.up.prepare(UP)
    w.up.set_desired({**UP, "prep": uprep})
    _replaced(w, OLD)
    w.asg_launches(1)

    launch = w.up.verify({**UP, "prep": uprep})

    assert launch["status"] == "launching" and launch["ready"] == 1


def test_a_scale_up_back_off_leaves_the_replacement_of_another_instance_running() -> None:
    """Timed out with one of its 2 launched and a replacement of OLD launching beside it: the back-off
    terminates its own one and gives back the one never launched, and the replacement runs on, the
    group at its desired capacity before the raise."""
    w = World()
    uprep = w.up.prepare(UP)
    w.up.set_desired({**UP, "prep": uprep})
    replacement = _replaced(w, OLD, ready=False)
    (mine,) = w.asg_launches(1, ready=False)
    w.now = NOW + timedelta(seconds=61)
    launch = w.up.verify({**UP, "prep": uprep})
    assert launch["status"] == "timeout"

    out = w.up.backoff({**UP, "prep": uprep, "launch": launch})

    assert out["terminated"] == [mine] and replacement in w.instances
    assert w.desired == 1 == out["desired"]


def test_the_replacement_of_the_scale_ups_own_instance_is_its_launch() -> None:
    """One of the scale-up's own instances fails its health check and is replaced: the replacement
    carries the raise's capacity, so it counts for the scale-up."""
    w = World()
    uprep = w.up.prepare({**UP, "group": {**UP["group"], "to": 2}})
    w.up.set_desired({**UP, "prep": uprep})
    (mine,) = w.asg_launches(1, ready=False)
    assert w.up.verify({**UP, "prep": uprep})["status"] == "launching"  # claimed
    _replaced(w, mine)

    launch = w.up.verify({**UP, "prep": uprep})

    assert launch["status"] == "ready" and launch["ready"] == 1


def test_a_rollback_gangs_member_lost_after_it_was_claimed_gives_the_gang_back_at_once() -> None:
    """All-or-nothing: a member the group takes out of service (and replaces) ends the gang at the next
    check, not at its deadline and not whole with the replacement counted as a member; the give-back
    terminates the replacement too, the group back at its desired capacity before the gang."""
    w = World()
    gprep = w.gang.prepare(GANG)
    w.gang.raise_desired({**GANG, "prep": gprep})
    members = w.asg_launches(3, ready=False)
    assert w.gang.verify({**GANG, "prep": gprep})["status"] == "waiting"  # all three claimed
    replacement = _replaced(w, members[0])
    for iid in members[1:]:
        w.kube.nodes[f"node-{iid}"] = o.node(f"node-{iid}", instance=iid)  # Ready now

    verify = w.gang.verify({**GANG, "prep": gprep})

    assert verify["status"] == "lost" and verify["error"] == "GangIncomplete"
    assert members[0] in verify["reason"]
    out = w.gang.give_back({"state": {**GANG, "prep": gprep, "verify": verify}})
    assert out["error"] == "GangIncomplete"
    assert sorted(out["terminated"]) == sorted([*members[1:], replacement])
    assert w.desired == 1 == out["desired"]


def test_a_lost_gang_member_is_no_room_for_a_scale_ups_launch_in_the_give_back() -> None:
    """The group takes one of the gang's members out of service and has not launched its replacement
    yet, while the scale-up's instance launched, not claimed by it yet. The gang lost a member, not a
    claim to another launch: its give-back terminates its own and leaves the scale-up's running."""
    w = World()
    gprep = w.gang.prepare(GANG)
    w.gang.raise_desired({**GANG, "prep": gprep})
    uprep = w.up.prepare({**UP, "group": {**UP["group"], "to": 2}})
    w.up.set_desired({**UP, "prep": uprep})
    members = w.asg_launches(3, ready=False)
    assert w.gang.verify({**GANG, "prep": gprep})["status"] == "waiting"  # all three claimed
    for instance in w.raw["Instances"]:
        if instance["InstanceId"] == members[0]:  # its replacement comes once it is gone
            instance.update(LifecycleState="Terminating", HealthStatus="Unhealthy")
    (ups,) = w.asg_launches(1)  # the scale-up's, Ready

    verify = w.gang.verify({**GANG, "prep": gprep})
    assert verify["status"] == "lost"
    out = w.gang.give_back({"state": {**GANG, "prep": gprep, "verify": verify}})

    assert sorted(out["terminated"]) == sorted(members[1:]) and ups in w.instances
    assert w.up.verify({**UP, "prep": uprep})["status"] == "ready"


def test_a_back_off_retried_after_it_terminated_its_own_claims_no_other_launch() -> None:
    """The back-off terminated its two (each with the decrement), then a later call was throttled and
    the step retried. Its two gone are no room to claim: the gang's instance that launched meanwhile,
    not yet claimed by the gang, is left running."""
    w = World()
    uprep, gprep = w.up.prepare(UP), w.gang.prepare(GANG)
    w.up.set_desired({**UP, "prep": uprep})  # 1 -> 3
    w.gang.raise_desired({**GANG, "prep": gprep})  # 3 -> 6
    mine = w.asg_launches(2, ready=False)
    assert w.up.verify({**UP, "prep": uprep})["status"] == "launching"
    w.now = NOW + timedelta(seconds=61)
    launch = w.up.verify({**UP, "prep": uprep})
    assert launch["status"] == "timeout"
    real = w.cloud.describe_group
    calls: list[str] = []

    def throttled_after_terminating(region: str, name: str) -> Any:
        calls.append(name)
        if len(calls) == 2:  # the read after its terminates
            raise AwsThrottled("Rate exceeded")
        return real(region, name)

    w.cloud.describe_group = throttled_after_terminating  # type: ignore[method-assign]
    with pytest.raises(AwsThrottled):
        w.up.backoff({**UP, "prep": uprep, "launch": launch})
    w.cloud.describe_group = real  # type: ignore[method-assign]
    for instance in w.raw["Instances"]:
        if instance["InstanceId"] in mine:
            instance["LifecycleState"] = "Terminating"
    (gangs,) = w.asg_launches(1, ready=False)

    out = w.up.backoff({**UP, "prep": uprep, "launch": launch})  # Step Functions' retry

    assert out["terminated"] == [] and gangs in w.instances
    assert w.desired == 4  # 1 + the gang's 3


def test_a_replacement_whose_launch_activity_aged_out_of_the_list_is_still_nobodys_launch() -> None:
    """The group's replacement of OLD was seen by a check, then newer activities pushed its launch out of
    the activities read (the newest 20 ended, of the last 30 minutes): it is still no launch of the
    scale-up's, and the back-off leaves it running."""
    w = World()
    uprep = w.up.prepare(UP)
    w.up.set_desired({**UP, "prep": uprep})
    replacement = _replaced(w, OLD, ready=False)
    assert w.up.verify({**UP, "prep": uprep})["status"] == "launching"
    w.cloud.activities[("us-east-1", "gpu")] = []  # aged out
    w.now = NOW + timedelta(seconds=61)
    launch = w.up.verify({**UP, "prep": uprep})
    assert launch["status"] == "timeout"

    out = w.up.backoff({**UP, "prep": uprep, "launch": launch})

    assert out["terminated"] == [] and replacement in w.instances
    assert w.desired == 1 == out["desired"]


def _lost_to_ec2(w: World, iid: str) -> str:
    """EC2 ended ``iid`` (a Spot interruption, a hand in the EC2 console): the group takes it out of service
    and launches another, whose activity's Cause reads as a raise's ("an instance was started in
    response to a difference between desired and actual capacity"), so it is not told apart."""
    for instance in w.raw["Instances"]:
        if instance["InstanceId"] == iid:
            instance.update(LifecycleState="Terminating", HealthStatus="Unhealthy")
    (new,) = w.asg_launches(1)
    return new


def test_a_scale_up_alone_on_its_group_counts_the_relaunch_of_an_instance_it_lost() -> None:
    """Nobody else waits for the group's instances: the one launched after its own was lost, whatever its
    activity says, carries the scale-up's capacity, so the scale-up is whole, not backed off."""
    w = World()
    uprep = w.up.prepare(UP)
    w.up.set_desired({**UP, "prep": uprep})
    mine = w.asg_launches(2, ready=False)
    assert w.up.verify({**UP, "prep": uprep})["status"] == "launching"  # both claimed
    _lost_to_ec2(w, mine[0])
    w.kube.nodes[f"node-{mine[1]}"] = o.node(f"node-{mine[1]}", instance=mine[1])  # Ready now

    assert w.up.verify({**UP, "prep": uprep})["status"] == "ready"


def test_a_scale_up_that_lost_an_instance_takes_no_launch_a_gang_waits_for() -> None:
    """The scale-up lost one of its two; the gang's first instance launched and the gang has not claimed it
    yet. The gang waits for three: the scale-up leaves it to the gang."""
    w = World()
    uprep = w.up.prepare(UP)
    w.up.set_desired({**UP, "prep": uprep})
    mine = w.asg_launches(2)
    assert w.up.verify({**UP, "prep": uprep})["status"] == "ready"
    gprep = w.gang.prepare(GANG)
    w.gang.raise_desired({**GANG, "prep": gprep})
    for instance in w.raw["Instances"]:
        if instance["InstanceId"] == mine[0]:
            instance.update(LifecycleState="Terminating", HealthStatus="Unhealthy")
    w.asg_launches(1)  # the gang's

    assert w.up.verify({**UP, "prep": uprep})["status"] == "launching"
    assert w.gang.verify({**GANG, "prep": gprep}) == {"status": "waiting", "ready": 1, "in_service": 1}
