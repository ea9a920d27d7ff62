"""The overflow re-plan of a scale-up execution (spillway.act.scale.ScaleSteps.next_round)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from fakes import FakeCloud, FakeCluster, FakeLedger, FakeSnapshots, UnreadableCloud
from plan_world import NOW, World

from spillway.act.claims import RAISE_PREFIX
from spillway.act.deadline import NO_DEADLINE, Deadline
from spillway.act.planning import PlanSettings
from spillway.act.scale import ScaleSteps
from spillway.config import PlannerConfig
from spillway.model.act import StoredState
from spillway.model.snapshot import Snapshot
from spillway.model.state import GroupState, RaiseState, State
from spillway.planner import plan as run_planner


def test_a_refused_raise_is_no_capacity_launching_for_the_replan() -> None:
    """Scenario: a plan saw group ``cpu`` at desired 2 (two busy nodes), MaxSize 4, and raised it 2 -> 4
    for two pending pods (recorded in ``State.raises``: to 4). Before the execution's ``prepare`` ran an
    operator lowered MaxSize to 3, so ``prepare`` refused the raise (2 + 2 above MaxSize 3:
    ``AsgLimitExceeded``, the state machine's ``Refused``) and nothing was set. The round's
    ``next_round`` re-plans on the live groups (desired 2, MaxSize 3).

    The rule (scale.py docstring: a refused group is re-planned "on the live groups"; raises.py: a
    raise is capacity launching only while it "may still be under way"): a raise AWS never got
    launches nothing. The re-plan took the refused raise for capacity launching (desired read as
    min(4, 3) = 3), put one pod on that phantom node, found the group at MaxSize for the other and
    launched nothing ("re-plan found nothing more to launch"); the plans after it did the same for
    ``scale_up_claim_minutes``. One node could have been launched at once."""
    w = World(regions=("us-east-1",))
    busy = w.group("cpu", "m5.2xlarge", nodes=2, max_size=3)
    for i, node in enumerate(busy):
        w.pods(f"busy{i}", 1, cpu="7", node_name=node, owner=("ReplicaSet", f"busy{i}"))
    w.pods("wait", 2, cpu="7")
    cluster, groups, _, _ = w.parsed()
    snapshots = FakeSnapshots()
    ref = snapshots.add(Snapshot.build(cluster, groups, NOW))
    cloud = FakeCloud(cluster="ml")
    cloud.node_groups_by_region = {"us-east-1": list(groups)}  # live: desired 2, MaxSize 3
    ledger = FakeLedger()
    ledger.stored = StoredState(
        state=State(raises={"cpu": RaiseState(to=4, since=NOW)}),
        version=1,
        snapshot_key=ref.key,
        plan_id="p1",
    )
    settings = PlanSettings(planner=PlannerConfig(cluster="ml", regions=("us-east-1",)), poll_seconds=1)
    steps = ScaleSteps(kube=FakeCluster(), aws=cloud, ledger=ledger, snapshots=snapshots, settings=settings,
                       clock=lambda: NOW + timedelta(seconds=30))  # fmt: skip
    refused = {
        "group": "cpu",
        "region": "us-east-1",
        "outcome": "refused",
        "error": "AsgLimitExceeded",
        "cause": "us-east-1/cpu: desired capacity 2 + 2 is above MaxSize 3; not set",
        "new_nodes": 2,
    }  # fmt: skip  (the Refused state passes the nodes the group was to get)
    out = steps.next_round({"action": "next_round", "cluster": "ml", "plan_id": "p1", "snapshot_key": ref.key,
                            "round": 1, "max_rounds": 3, "rounds": [], "results": [refused]})  # fmt: skip
    grown = [(g["group"], g.get("from"), g.get("to")) for g in out["groups"] if g.get("grow", True)]
    assert grown == [("cpu", 2, 3)], out
    assert (
        ledger.stored.state.raises["us-east-1/cpu"].to == 3
    )  # the refused 2 no longer count; the re-plan's 1 does


def _overflow_round_two(
    *,
    raised_marker: bool,
    round_: int = 2,
    snapshot: str = "fresh",
    unread: tuple[str, ...] = (),
    deadline: Deadline = NO_DEADLINE,
) -> tuple[dict[str, object], FakeLedger]:
    """Round 2 of a scale-up whose round 1 backed ``gpu-east`` (us-east-1) off for capacity: the re-plan
    of round 1 raised ``gpu-west`` (us-west-2) 0 -> 2 for two pending pods (``State.raises``: to 2) and
    round 2's iteration for it ended in ``Errored``: SetDesired throttled past its retries
    (``AwsThrottled``). ``raised_marker``: whether the raise marker of round 2's owner is in the state
    table (``raise_once`` keeps it when the raise landed or may have; it gives it back when AWS refused
    the call, as a throttle is). ``snapshot``: the latest snapshot ``fresh``, ``missing`` (none stored)
    or ``stale`` (older than ``max_snapshot_age_seconds`` when the step runs). ``unread``: the regions
    whose Auto Scaling groups cannot be read since (throttled past the SDK's retries)."""
    w = World(regions=("us-east-1", "us-west-2"))
    w.group("gpu-east", "g5.xlarge", region="us-east-1")
    w.group("gpu-west", "g5.xlarge", region="us-west-2")
    w.gpu_pods("train", 2, gpus=1, cpu="2", memory="8Gi")
    cluster, groups, _, _ = w.parsed()
    snapshots = FakeSnapshots()
    ref = snapshots.add(Snapshot.build(cluster, groups, NOW))
    if snapshot == "missing":
        snapshots = FakeSnapshots()
    cloud = UnreadableCloud(*unread)
    cloud.node_groups_by_region = {
        "us-east-1": [g for g in groups if g.region == "us-east-1"],
        "us-west-2": [g for g in groups if g.region == "us-west-2"],
    }  # live: both at desired 0
    cloud.add_group("gpu-west", [], region="us-west-2", instance_type="g5.xlarge", max_size=10)
    ledger = FakeLedger()
    east_off = GroupState(group="gpu-east", region="us-east-1", backoff_until=NOW + timedelta(minutes=5),
                          reason="us-east-1/gpu-east: We currently do not have sufficient g5.xlarge capacity")  # fmt: skip
    ledger.stored = StoredState(
        state=State(
            groups={"us-east-1/gpu-east": east_off},
            raises={"us-west-2/gpu-west": RaiseState(to=2, since=NOW, group="gpu-west", region="us-west-2")},
        ),
        version=2,
        snapshot_key=ref.key,
        plan_id="p1",
    )
    if raised_marker:
        ledger.claim("ml", f"{RAISE_PREFIX}up-p1-{round_}-us-west-2-gpu-west", {"before": 0, "after": 2, "count": 2},
                     expires=NOW + timedelta(days=2))  # fmt: skip
    settings = PlanSettings(
        planner=PlannerConfig(cluster="ml", regions=("us-east-1", "us-west-2")), poll_seconds=1
    )
    later = timedelta(seconds=settings.max_snapshot_age_seconds + 60 if snapshot == "stale" else 90)
    steps = ScaleSteps(kube=FakeCluster(), aws=cloud, ledger=ledger, snapshots=snapshots, settings=settings,
                       clock=lambda: NOW + later, deadline=deadline)  # fmt: skip
    errored = {
        "group": "gpu-west",
        "region": "us-west-2",
        "outcome": "error",
        "error": "AwsThrottled",
        "cause": "us-west-2/gpu-west: SetDesiredCapacity: Rate exceeded",
        "new_nodes": 2,
    }  # fmt: skip  (the Errored state passes the nodes the group was to get, as Refused does)
    out = steps.next_round({"action": "next_round", "cluster": "ml", "plan_id": "p1", "snapshot_key": ref.key,
                            "round": round_, "max_rounds": 3, "rounds": [], "results": [errored]})  # fmt: skip
    return out, ledger


def test_a_raise_that_errored_before_auto_scaling_took_it_is_raised_again_by_the_replan() -> None:
    """A throttle is a refusal: nothing was set (raise_once gave its marker back). The re-plan took the
    raise for two nodes launching in us-west-2, put both pods on them and ended "re-plan found nothing
    more to launch"; the plans after it did the same for ``scale_up_claim_minutes`` (5), so the pods
    waited with nothing launching anywhere. Now round 3 raises gpu-west again, at once."""
    out, ledger = _overflow_round_two(raised_marker=False)
    grown = [
        (g["region"], g["group"], g.get("from"), g.get("to")) for g in out["groups"] if g.get("grow", True)
    ]
    assert grown == [("us-west-2", "gpu-west", 0, 2)], out
    assert out["round"] == 3 and out["done"] is False
    assert ledger.stored.state.raises["us-west-2/gpu-west"].to == 2


def test_a_raise_that_errored_after_it_may_have_landed_still_counts_as_launching() -> None:
    """The same round, but the raise's marker is there: the raise was made (or may have been, its answer
    lost), so its nodes are launching and nothing is raised twice."""
    out, _ = _overflow_round_two(raised_marker=True)
    assert out["done"] is True and out["groups"] == [], out


def test_the_last_rounds_raise_that_auto_scaling_never_took_is_not_left_for_the_plans_to_count() -> None:
    """The same errored raise in round 3 of 3: the execution gives up, leaving the pods to the next plan.
    It left the raise in ``State.raises``, so every plan for ``scale_up_claim_minutes`` (5) counted
    two nodes launching in us-west-2 that nobody asked for and launched nothing for the two pods. The
    give-up now takes that raise off the state; one that landed or may have stays."""
    out, ledger = _overflow_round_two(raised_marker=False, round_=3)
    assert out["done"] is True and out["result"] == "gave up after 3 round(s)", out
    assert "us-west-2/gpu-west" not in ledger.stored.state.raises
    assert "us-east-1/gpu-east" in ledger.stored.state.groups  # the back-off stays

    out, ledger = _overflow_round_two(raised_marker=True, round_=3)
    assert out["done"] is True
    assert ledger.stored.state.raises["us-west-2/gpu-west"].to == 2


@pytest.mark.parametrize(
    ("snapshot", "result"), [("missing", "no snapshot to re-plan on"), ("stale", "is stale")]
)
def test_a_give_up_for_want_of_a_snapshot_leaves_no_raise_auto_scaling_never_took(
    snapshot: str, result: str
) -> None:
    """The same errored raise in round 2, but the execution cannot re-plan: no snapshot, or the latest one
    older than ``max_snapshot_age_seconds`` (observe down). It ended there and left the raise in
    ``State.raises``, so the plans after it (once observe came back) counted two nodes launching in
    us-west-2 that nobody asked for, for ``scale_up_claim_minutes``, and launched nothing for the pods.
    Such an end now takes off the raises Auto Scaling never took, as the last round's give-up does; one
    that landed or may have stays."""
    out, ledger = _overflow_round_two(raised_marker=False, snapshot=snapshot)
    assert out["done"] is True and result in str(out["result"]), out
    assert "us-west-2/gpu-west" not in ledger.stored.state.raises
    assert "us-east-1/gpu-east" in ledger.stored.state.groups  # the back-off stays

    out, ledger = _overflow_round_two(raised_marker=True, snapshot=snapshot)
    assert out["done"] is True and result in str(out["result"]), out
    assert ledger.stored.state.raises["us-west-2/gpu-west"].to == 2


@pytest.mark.parametrize(
    ("round_", "snapshot", "result"),
    [
        (2, "fresh", "re-plan found nothing more to launch"),
        (3, "fresh", "gave up after 3 round(s)"),
        (2, "stale", "is stale"),
    ],
)
def test_a_raise_never_taken_in_a_region_that_cannot_be_read_is_not_left_for_the_plans(
    round_: int, snapshot: str, result: str
) -> None:
    """The same errored raise, with us-west-2's groups unreadable since. The give-up (the last round, or
    a snapshot too old to re-plan on) read gpu-west's desired capacity to tell whether the state's
    entry was wholly that raise; the read failed and the step kept every entry. The re-plan carried
    gpu-west (desired 0, as the snapshot read it), took the raise off the state it planned on, found
    nothing to launch (gpu-east backed off, gpu-west carried: never grown) and wrote the plan record
    alone, so the state kept the entry too. Either way the plans after it counted two nodes launching
    in gpu-west for as long as it was carried, and launched nothing for the pods elsewhere. Now the
    entry goes, judged on the desired capacity the plans see (the snapshot's, which observe carries
    while the region is unread); the re-plan writes the state without it."""
    out, ledger = _overflow_round_two(
        raised_marker=False, round_=round_, snapshot=snapshot, unread=("us-west-2",)
    )

    assert out["done"] is True and result in str(out["result"]), out
    assert "us-west-2/gpu-west" not in ledger.stored.state.raises, ledger.stored.state.raises
    assert "us-east-1/gpu-east" in ledger.stored.state.groups  # the back-off stays


def test_a_raise_never_taken_stays_when_nothing_says_what_its_group_holds() -> None:
    """No snapshot, and us-west-2 unreadable: nothing tells whether the entry is wholly that raise (a
    later plan may have built on it), so it stays, as before; a raise that may have landed stays too."""
    for marker in (False, True):
        out, ledger = _overflow_round_two(raised_marker=marker, snapshot="missing", unread=("us-west-2",))
        assert out["done"] is True and "no snapshot" in str(out["result"]), out
        assert ledger.stored.state.raises["us-west-2/gpu-west"].to == 2


def test_a_raise_that_may_have_landed_stays_though_its_region_cannot_be_read() -> None:
    """The raise's marker is there (it landed, or may have): its nodes are launching, whatever the
    region's read says, at the last round as at a re-plan."""
    for round_ in (2, 3):
        out, ledger = _overflow_round_two(raised_marker=True, round_=round_, unread=("us-west-2",))
        assert out["done"] is True, out
        assert ledger.stored.state.raises["us-west-2/gpu-west"].to == 2


@pytest.mark.parametrize(
    ("unread", "result"),
    [(("us-west-2",), "re-plan found nothing more to launch"), ((), "raises gpu-west again")],
)
def test_a_replan_that_writes_the_state_keeps_the_entries_of_raises_only_its_live_read_shows(
    unread: tuple[str, ...], result: str
) -> None:
    """The re-plan of the errored gpu-west raise forgets that raise and writes the state: with us-west-2
    unreadable since (gpu-west carried, so the re-plan grows nothing), or raising gpu-west again. Another plan raised ``web``
    (us-east-1) 0 -> 2 for two pending pods; the raise landed after the snapshot was taken, so the live
    read the re-plan plans on shows desired 2, the snapshot 0. The plans end a raise's entry when their
    snapshot shows it (spillway.planner.raises); the re-plan, planning on live reads, ended it on the
    live read and wrote the state without it, so a plan of that snapshot (or any taken before the raise
    landed) saw web at 0 with nothing launching and raised it again for the same pods: two nodes
    launched twice. The entry stays for the plans to end on a snapshot."""
    w = World(regions=("us-east-1", "us-west-2"))
    w.group("gpu-east", "g5.xlarge", region="us-east-1")
    w.group("gpu-west", "g5.xlarge", region="us-west-2")
    w.group("web", "m5.xlarge", region="us-east-1")
    w.gpu_pods("train", 2, gpus=1, cpu="2", memory="8Gi")
    w.pods("web", 2, cpu="3", memory="8Gi")
    cluster, groups, _, _ = w.parsed()
    snapshots = FakeSnapshots()
    snapshot = Snapshot.build(cluster, groups, NOW)
    ref = snapshots.add(snapshot)
    cloud = UnreadableCloud(*unread)
    cloud.node_groups_by_region = {
        "us-east-1": [
            replace(g, desired=2) if g.name == "web" else g for g in groups if g.region == "us-east-1"
        ],
        "us-west-2": [g for g in groups if g.region == "us-west-2"],
    }  # live: the raise of web landed (desired 2, no node joined yet)
    ledger = FakeLedger()
    east_off = GroupState(group="gpu-east", region="us-east-1", backoff_until=NOW + timedelta(minutes=5),
                          reason="us-east-1/gpu-east: We currently do not have sufficient g5.xlarge capacity")  # fmt: skip
    web = RaiseState(to=2, since=NOW, group="web", region="us-east-1")
    ledger.stored = StoredState(
        state=State(
            groups={"us-east-1/gpu-east": east_off},
            raises={
                "us-west-2/gpu-west": RaiseState(to=2, since=NOW, group="gpu-west", region="us-west-2"),
                "us-east-1/web": web,
            },
        ),
        version=2,
        snapshot_key=ref.key,
        plan_id="p1",
    )
    planner = PlannerConfig(cluster="ml", regions=("us-east-1", "us-west-2"))
    later = NOW + timedelta(seconds=90)
    steps = ScaleSteps(kube=FakeCluster(), aws=cloud, ledger=ledger, snapshots=snapshots,
                       settings=PlanSettings(planner=planner, poll_seconds=1), clock=lambda: later)  # fmt: skip
    errored = {"group": "gpu-west", "region": "us-west-2", "outcome": "error", "error": "AwsThrottled",
               "cause": "us-west-2/gpu-west: SetDesiredCapacity: Rate exceeded", "new_nodes": 2}  # fmt: skip

    out = steps.next_round({"action": "next_round", "cluster": "ml", "plan_id": "p1", "snapshot_key": ref.key,
                            "round": 2, "max_rounds": 3, "rounds": [], "results": [errored]})  # fmt: skip

    grown = [g["group"] for g in out["groups"] if g.get("grow", True)]
    assert (grown == ["gpu-west"]) == bool(result.startswith("raises")), out
    assert out.get("result", result) == result, out
    raises = ledger.stored.state.raises
    assert raises.get("us-west-2/gpu-west") is None or grown, raises
    assert raises.get("us-east-1/web") == web, raises
    plan = run_planner(snapshot.cluster, snapshot.groups, planner, ledger.stored.state, later)
    assert [s.group for s in plan.scale_up if s.group == "web"] == [], plan.scale_up
