# ruff: noqa: F811  (the rig fixture of test_drain_steps is imported and taken by name)
"""Drains and terminate lifecycle hooks (spillway.act.drain): a drain of an instance its group is
terminating (a hook holds it in Terminating:Wait) evicts, records heartbeats, never terminates, and
completes the action with CONTINUE, also when it fails; a drain that terminates an instance itself
completes the group's terminate hooks for it. On the Kubernetes API emulator and a fake Auto Scaling."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_drain_steps import CLUSTER, INSTANCE, NODE, Rig, rig  # noqa: F401 (the fixture)

from spillway.act.drain import RAISES, parse_request, run_action
from spillway.errors import DrainSuperseded, InvalidDrainRequest, LifecycleActionPending
from spillway.local import objects
from spillway.model.drain import Drain
from spillway.model.k8s import CORDONED_BY_SPILLWAY

TOKEN = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"
HOOK = "drain-before-terminate"


def lifecycle(**kw: Any) -> dict[str, Any]:
    return {"hook": HOOK, "token": TOKEN, "heartbeat_seconds": 300, **kw}


def held(rig: Rig) -> None:
    """The group terminates INSTANCE (scale-in by someone else) and its hook holds it."""
    rig.cloud.add_hook("general", HOOK, heartbeat=300)
    rig.cloud.hold("us-east-1", INSTANCE, {HOOK: TOKEN})


def request(**kw: Any) -> dict[str, Any]:
    return {
        "cluster": CLUSTER,
        "node": NODE,
        "group": "general",
        "force": True,
        "lifecycle": lifecycle(),
        **kw,
    }


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"lifecycle": lifecycle(token="not-a-token")}, "lifecycle.token"),
        ({"lifecycle": {"hook": HOOK, "heartbeat_seconds": 300}}, "lifecycle.token"),
        ({"lifecycle": lifecycle(hook="")}, "lifecycle.hook"),
        ({"lifecycle": lifecycle(hook="bad hook!")}, "lifecycle.hook"),
        ({"lifecycle": lifecycle(heartbeat_seconds=10)}, "lifecycle.heartbeat_seconds"),
        ({"lifecycle": lifecycle(heartbeat_seconds="300")}, "lifecycle.heartbeat_seconds"),
        ({"lifecycle": lifecycle(result="ABANDON")}, "lifecycle.result"),
        ({"group": None}, "group"),
        ({"consolidation": True, "force": False}, "lifecycle"),
        ({"poll_seconds": 101}, "poll_seconds"),  # a round (and a heartbeat) at least every 100 s of 300
        # past 100 heartbeat timeouts (in 500 rounds: a poll of 15 s would make too many)
        ({"deadline_seconds": 30_000, "poll_seconds": 60}, "deadline_seconds"),
    ],
)
def test_bad_or_missing_hook_details_are_refused_naming_the_field_and_nothing_changes(
    rig: Rig, change: dict[str, Any], field: str
) -> None:
    held(rig)
    raw = {k: v for k, v in {**request(), **change}.items() if v is not None}
    with pytest.raises(InvalidDrainRequest) as err:
        rig.drainer.validate(raw)
    assert err.value.field == field
    assert rig.writes() == []
    assert rig.cloud.completed == [] and rig.cloud.waiting == {INSTANCE: {HOOK: TOKEN}}


SHIP_LOGS_TOKEN = "11111111-2222-4333-8444-555555555555"


def test_a_drain_by_hand_naming_another_teams_hook_is_refused_before_anything_is_touched(rig: Rig) -> None:
    """Auto Scaling user guide, "Complete a lifecycle action": each terminate hook of a group holds the
    instance for its own owner, and CompleteLifecycleAction with CONTINUE ends that hook's wait. A drain
    started by hand that named another team's hook (a log shipper's) was accepted and would have ended
    by completing it, cutting that team's action short. Only Spillway's hooks (LIFECYCLE_HOOK_NAMES) may
    be named: the refusal names the field and the hooks that are Spillway's; no cordon, no completion."""
    held(rig)
    rig.cloud.add_hook("general", "ship-logs", heartbeat=300)
    rig.cloud.hold("us-east-1", INSTANCE, {HOOK: TOKEN, "ship-logs": SHIP_LOGS_TOKEN})
    rig.pod("web-1")
    raw = request(lifecycle=lifecycle(hook="ship-logs", token=SHIP_LOGS_TOKEN))
    with pytest.raises(
        InvalidDrainRequest, match="'ship-logs' is not one of Spillway's lifecycle hooks"
    ) as err:
        run_action(rig.drainer, {"action": "validate", "request": raw, "execution": "by-hand-1"})
    assert err.value.field == "lifecycle.hook" and HOOK in str(err.value)
    assert rig.writes() == [] and not rig.node()["spec"].get("unschedulable")
    assert rig.cloud.completed == [] and rig.cloud.called("complete_lifecycle_action") == []
    assert rig.cloud.waiting[INSTANCE] == {HOOK: TOKEN, "ship-logs": SHIP_LOGS_TOKEN}
    # Spillway's own hook, and a hook the stack names as Spillway's, are drained for as before.
    assert Drain.model_validate(rig.drainer.validate(request())["drain"]).lifecycle is not None
    rig.drainer.lifecycle_hooks = (HOOK, "ship-logs")
    assert Drain.model_validate(rig.drainer.validate(raw)["drain"]).lifecycle is not None


def test_a_lifecycle_drain_needs_its_instance_waiting_for_the_hook(rig: Rig) -> None:
    # InService: the action is not (or no longer) waiting
    with pytest.raises(InvalidDrainRequest, match="not Terminating:Wait") as err:
        rig.drainer.validate(request())
    assert err.value.field == "lifecycle"
    # An ordinary drain of an instance in Terminating:Wait is still refused: it cannot complete the hook.
    held(rig)
    with pytest.raises(InvalidDrainRequest, match="Terminating:Wait in its group") as err:
        rig.drainer.validate({"cluster": CLUSTER, "node": NODE})
    assert err.value.field == "node"
    assert rig.writes() == []


def drained_and_completed_in(rig: Rig, state: str) -> None:
    """The hook holds INSTANCE in ``state``: the drain takes it as a waiting action, evicts the node's
    pod and completes the action with CONTINUE, terminating nothing itself."""
    held(rig)
    for instance in rig.cloud.groups[("us-east-1", "general")]["Instances"]:
        if instance["InstanceId"] == INSTANCE:
            instance["LifecycleState"] = state
    rig.pod("web-1")
    out = rig.drainer.validate(request())
    drain = Drain.model_validate(out["drain"])
    rig.drainer.cordon(drain)
    assert rig.drainer.evict(drain)["evicted"] == ["team-a/web-1"]
    done = rig.drainer.complete_lifecycle(drain)
    assert done["hooks"] == [{"hook": HOOK, "result": "CONTINUE"}]
    assert rig.cloud.completed == [("general", HOOK, INSTANCE, "CONTINUE")]
    assert rig.cloud.called("terminate_instance") == []


def test_a_lifecycle_drain_of_a_warm_pool_instance_with_a_node_drains_it_and_completes_the_action(
    rig: Rig,
) -> None:
    """A warm pool kept ``Warmed:Running`` runs its instances, and one whose user data joins the cluster
    has a Node that takes pods. When the pool terminates it (it shrinks, an instance refresh), the hook
    holds it in ``Warmed:Terminating:Wait`` (EC2 Auto Scaling API Reference,
    AutoScalingInstanceDetails.LifecycleState; the lifecycle event's Origin is ``WarmPool``). The drain
    took only ``Terminating:Wait`` for a waiting action: it refused the drain as stale, and the pods
    were killed when the hook timed out. It is drained and the action completed like any other."""
    drained_and_completed_in(rig, "Warmed:Terminating:Wait")


def test_a_lifecycle_drain_of_an_instance_its_warm_pool_takes_back_on_scale_in_drains_and_completes(
    rig: Rig,
) -> None:
    """A group whose warm pool reuses instances on scale-in (``InstanceReusePolicy.ReuseOnScaleIn``)
    returns the instances it scales in to the pool instead of terminating them, and a terminate hook
    still holds each: in ``Warmed:Pending:Wait``, for the ``EC2_INSTANCE_TERMINATING`` action (EC2 Auto
    Scaling User Guide, "Use lifecycle hooks with a warm pool": "an instance that is returning to the
    warm pool pauses ... at the Warmed:Pending:Wait state for the EC2_INSTANCE_TERMINATING lifecycle
    action"). The drain took only the two Terminating wait states for a waiting action: it refused the
    drain as stale, the hook timed out, and the instance was stopped with its pods on it."""
    drained_and_completed_in(rig, "Warmed:Pending:Wait")


def test_a_lifecycle_drain_evicts_then_completes_the_action_with_continue_and_never_terminates(
    rig: Rig,
) -> None:
    held(rig)
    rig.cloud.groups[("us-east-1", "general")]["MinSize"] = 2  # at MinSize: the group decides, not us
    rig.pod("web-1")
    out = rig.drainer.validate(request())
    drain = Drain.model_validate(out["drain"])
    assert drain.terminate is False and drain.lifecycle is not None and drain.lifecycle.token == TOKEN
    assert out["preview"]["would_terminate"] is None
    assert out["preview"]["would_complete"] == {"hook": HOOK, "result": "CONTINUE"}
    rig.drainer.cordon(drain)
    first = rig.drainer.evict(drain)
    assert first["evicted"] == ["team-a/web-1"]
    assert rig.cloud.heartbeats == []  # not yet half the heartbeat timeout
    done = run_action(rig.drainer, {"action": "complete_lifecycle", "drain": out["drain"]})
    assert done["status"] == "LifecycleCompleted" and done["hooks"] == [{"hook": HOOK, "result": "CONTINUE"}]
    assert rig.cloud.completed == [("general", HOOK, INSTANCE, "CONTINUE")]
    assert rig.cloud.called("terminate_instance") == []
    assert INSTANCE not in {i["InstanceId"] for i in rig.cloud.groups[("us-east-1", "general")]["Instances"]}
    # Done twice (a retry after a lost answer): the action no longer waits, which is success.
    again = rig.drainer.complete_lifecycle(drain)
    assert again["hooks"][0]["result"] is None and "no action waited" in again["hooks"][0]["note"]


def test_a_lifecycle_drain_of_a_node_somebody_else_cordoned_completes_the_action(rig: Rig) -> None:
    """People cordon nodes before they scale a group in or refresh it. The lifecycle drain of such a
    node was refused, so the action waited the hook's whole HeartbeatTimeout and the scale-in with it.
    It now drains under their cordon and completes the action; the cordon is theirs and stays."""
    held(rig)
    rig.pod("web-1")
    node = rig.node()
    node["spec"]["unschedulable"] = True
    rig.api.update("Node", node)

    out = rig.drainer.validate(request())
    drain = Drain.model_validate(out["drain"])
    rig.drainer.cordon(drain)
    first = rig.drainer.evict(drain)
    rig.drainer.complete_lifecycle(drain)

    assert drain.leaving and first["evicted"] == ["team-a/web-1"]
    assert rig.cloud.completed == [("general", HOOK, INSTANCE, "CONTINUE")]
    assert CORDONED_BY_SPILLWAY not in rig.node()["metadata"]["annotations"]


def test_a_lifecycle_drain_goes_on_when_another_drain_takes_its_node_over(rig: Rig) -> None:
    """A drain that another Spillway drain took the node from stops as ``superseded``, but not a
    lifecycle drain: the action it holds is completed by its token, by it alone (or the group waits
    out the hook's HeartbeatTimeout)."""
    held(rig)
    rig.pod("web-1")
    drain = Drain.model_validate(rig.drainer.validate(request(force=False))["drain"])
    rig.drainer.cordon(drain)
    assert rig.kube.cordon(NODE, reason="held drain interrupt-x: spot interruption warning w-1")

    first = rig.drainer.evict(drain)
    rig.drainer.complete_lifecycle(drain)

    assert first["evicted"] == ["team-a/web-1"]
    assert rig.cloud.completed == [("general", HOOK, INSTANCE, "CONTINUE")]


def test_a_lifecycle_drain_records_a_heartbeat_every_half_timeout_while_pods_stay(rig: Rig) -> None:
    held(rig)
    rig.pod("solo", bare=True)  # kept until the deadline (no controller), so the drain lasts
    drain = Drain.model_validate(rig.drainer.validate(request(force=False, deadline_seconds=900))["drain"])
    rig.drainer.cordon(drain)
    round1 = rig.drainer.evict(drain)
    rig.clock.advance(160)
    round2 = rig.drainer.evict(drain, round1)
    assert rig.cloud.heartbeats == [("general", HOOK, INSTANCE)]
    assert round2["heartbeat_at"] == "2026-11-02T10:02:40Z"
    rig.clock.advance(100)  # 100 s after the last heartbeat: none yet
    round3 = rig.drainer.evict(drain, round2)
    assert len(rig.cloud.heartbeats) == 1 and round3["heartbeat_at"] == round2["heartbeat_at"]
    # The group gave up waiting (timed out): noted once, never an error, no more heartbeats.
    rig.cloud.waiting.clear()
    rig.clock.advance(60)
    round4 = rig.drainer.evict(drain, round3)
    assert "No active Lifecycle Action" in round4["lifecycle_gone"]
    rig.clock.advance(200)
    rig.drainer.evict(drain, round4)
    assert len(rig.cloud.called("record_heartbeat")) == 2


def test_a_failed_lifecycle_drain_completes_with_continue_and_keeps_the_node_cordoned(rig: Rig) -> None:
    held(rig)
    drain = Drain.model_validate(rig.drainer.validate(request())["drain"])
    rig.drainer.cordon(drain)
    out = run_action(rig.drainer, {"action": "uncordon", "drain": drain.model_dump()})
    assert out["uncordoned"] is False and "stays cordoned" in out["note"]
    assert rig.cloud.completed == [("general", HOOK, INSTANCE, "CONTINUE")]
    node = rig.node()
    assert node["spec"]["unschedulable"] is True and CORDONED_BY_SPILLWAY in node["metadata"]["annotations"]


def test_a_drain_that_terminates_on_a_hooked_group_completes_its_own_action(rig: Rig) -> None:
    rig.cloud.add_hook("general", HOOK, heartbeat=3600)
    drain = rig.cordoned()
    rig.drainer.terminate(drain)
    assert rig.cloud.placement("us-east-1", INSTANCE) is not None  # waiting, as AWS holds it
    out = rig.drainer.complete_lifecycle(drain)
    assert out["status"] == "LifecycleCompleted"
    assert rig.cloud.completed == [("general", HOOK, INSTANCE, "CONTINUE")]
    assert rig.cloud.placement("us-east-1", INSTANCE) is None  # every hook done: terminated
    assert rig.cloud.groups[("us-east-1", "general")]["DesiredCapacity"] == 1


def test_a_drain_that_terminates_leaves_another_teams_terminate_hook_to_its_owner(rig: Rig) -> None:
    """Auto Scaling user guide, "Complete a lifecycle action"
    (https://docs.aws.amazon.com/autoscaling/ec2/userguide/completing-lifecycle-hooks.html): CONTINUE
    ends one hook's wait, and the instance terminates once every hook's action is done. A scale-down's
    terminate completed every terminate hook of the group by instance id, a log-shipping team's too,
    which cut their action short: only Spillway's hooks (LIFECYCLE_HOOK_NAMES) are completed; the
    instance waits for the other until its owner completes it (or its HeartbeatTimeout passes)."""
    rig.cloud.add_hook("general", HOOK, heartbeat=3600)
    rig.cloud.add_hook("general", "ship-logs", heartbeat=3600)
    drain = rig.cordoned()
    rig.drainer.terminate(drain)
    out = rig.drainer.complete_lifecycle(drain)
    assert out == {"status": "LifecycleCompleted", "hooks": [{"hook": HOOK, "result": "CONTINUE"}]}
    assert rig.cloud.completed == [("general", HOOK, INSTANCE, "CONTINUE")]
    assert list(rig.cloud.waiting[INSTANCE]) == ["ship-logs"]  # still held for its owner
    assert rig.cloud.placement("us-east-1", INSTANCE) is not None

    rig.cloud.hooks.clear()
    rig.cloud.add_hook("general", "ship-logs", heartbeat=3600)  # a group with only another team's hook
    assert rig.drainer.complete_lifecycle(drain) == {"status": "NoTerminateHook", "hooks": []}
    assert list(rig.cloud.waiting[INSTANCE]) == ["ship-logs"]


def test_completing_its_own_action_waits_until_the_instance_waits_and_is_a_no_op_without_hooks(
    rig: Rig,
) -> None:
    drain = rig.cordoned()
    assert rig.drainer.complete_lifecycle(drain) == {"status": "NoTerminateHook", "hooks": []}
    rig.cloud.add_hook("general", HOOK)
    for raw in rig.cloud.groups.values():
        for instance in raw["Instances"]:
            if instance["InstanceId"] == INSTANCE:
                instance["LifecycleState"] = "Terminating"  # the terminate call returned; not waiting yet
    with pytest.raises(LifecycleActionPending):
        rig.drainer.complete_lifecycle(drain)
    assert LifecycleActionPending in RAISES["complete_lifecycle"]
    assert rig.cloud.completed == []


def test_the_sample_lifecycle_drain_request_parses() -> None:
    raw = json.loads((Path(__file__).resolve().parents[2] / "events/drain-node-lifecycle.json").read_text())
    request = parse_request(raw)
    assert request.lifecycle is not None and request.lifecycle.heartbeat_seconds == 300


# --- a lifecycle action on a node another Spillway drain is still emptying ---------------------------

LIFECYCLE_EXECUTION = f"lifecycle-{INSTANCE}-0f1e2d3c4b"


def lifecycle_drain(rig: Rig) -> Drain:
    """The drain the interrupt function starts for the group's action (validated, cordoned)."""
    out = rig.drainer.validate(request(deadline_seconds=270, poll_seconds=5), LIFECYCLE_EXECUTION)
    drain = Drain.model_validate(out["drain"])
    rig.drainer.cordon(drain)
    return drain


@pytest.mark.parametrize(
    "first",
    [
        {"reason": "rebalance recommendation r-1", "leaving": True, "deadline_seconds": 600},
        {"plan_id": "20261102T100000Z-abc", "consolidation": True, "pods": ["team-a/web-0"]},
    ],
    ids=["rebalance", "consolidation"],
)
def test_a_lifecycle_drain_takes_over_a_node_a_drain_without_force_is_evicting(
    rig: Rig, first: dict[str, Any]
) -> None:
    """The group terminates a node a rebalance recommendation's drain (or a consolidation) is still
    emptying: capacity rebalancing's replacement step, say. The lifecycle drain takes the node over
    (its cordon names it), records heartbeats and completes the action by its token; the earlier drain
    stops as superseded at its next step, also once past its own deadline, and undoes nothing: no
    uncordon of a node the group is terminating."""
    rig.pod("web-0")
    rig.api.add(objects.pdb("web", "team-a", {"app": "web"}, min_available=1))  # web-0 stays, for now
    earlier = rig.cordoned(**{"deadline_seconds": 600, **first})
    assert rig.drainer.evict(earlier)["blocked"] == ["team-a/web-0"]
    rig.clock.advance(400)
    held(rig)  # the group terminates the instance; its hook holds it

    taken = lifecycle_drain(rig)
    annotation = rig.node()["metadata"]["annotations"][CORDONED_BY_SPILLWAY]
    assert f"held drain {LIFECYCLE_EXECUTION}:" in annotation

    rig.clock.advance(201)  # the earlier drain's deadline passed: superseded, not DrainTimeout
    rig.api.clear_requests()
    with pytest.raises(DrainSuperseded, match=LIFECYCLE_EXECUTION):
        rig.drainer.evict(earlier)
    with pytest.raises(DrainSuperseded):
        rig.drainer.check(earlier)
    undo = rig.drainer.uncordon(earlier)  # were its compensation to run all the same
    assert "another drain holds the node" in undo["note"]
    assert rig.writes() == []
    node = rig.node()
    assert node["spec"]["unschedulable"] is True
    assert any(t["key"] == "spillway.io/draining" for t in node["spec"]["taints"])

    # the lifecycle drain's rounds, 201 s after it started (inside its own 270 s)
    first_round = rig.drainer.evict(taken)
    assert first_round["blocked"] == ["team-a/web-0"]
    assert rig.cloud.heartbeats == [("general", HOOK, INSTANCE)]  # the token's holder keeps it waiting
    rig.api.delete("PodDisruptionBudget", "web", "team-a")
    assert rig.drainer.evict(taken, first_round)["evicted"] == ["team-a/web-0"]
    rig.drainer.complete_lifecycle(taken)
    assert rig.cloud.completed == [("general", HOOK, INSTANCE, "CONTINUE")]


def test_a_forced_drain_goes_on_beside_a_lifecycle_drain_and_both_completing_is_harmless(rig: Rig) -> None:
    """A Spot warning's drain (forced) is never superseded: it goes on beside the lifecycle drain that
    took its node over. Its terminate finds the instance terminating already (no second
    TerminateInstanceInAutoScalingGroup), it completes the action by instance id, and the lifecycle
    drain's own completion and heartbeat then find no action waiting: noted, not errors."""
    rig.pod("train-0", app="train", annotations={"karpenter.sh/do-not-disrupt": "true"})
    warned = rig.cordoned(
        reason="spot interruption warning w-1", leaving=True, force=True, deadline_seconds=90
    )
    held(rig)
    taken = lifecycle_drain(rig)

    assert rig.drainer.evict(warned)["evicted"] == ["team-a/train-0"]  # goes on, forced
    assert rig.drainer.check(warned)["ready"] is False  # train-0 is terminating
    rig.clock.advance(1)  # its kubelet confirms
    assert rig.drainer.check(warned)["ready"] is True
    terminated = rig.drainer.terminate(warned)
    assert terminated["status"] == "AlreadyTerminating" and rig.cloud.called("terminate_instance") == []
    assert rig.drainer.complete_lifecycle(warned)["status"] == "LifecycleCompleted"
    assert rig.cloud.completed == [("general", HOOK, INSTANCE, "CONTINUE")]
    assert rig.drainer.delete_node(warned)["deleted"] is True
    summary = rig.drainer.record({"drain": warned.model_dump(), "terminated": terminated})
    assert summary["outcome"] == "terminated"

    rig.clock.advance(200)
    gone = rig.drainer.evict(taken)
    assert gone["done"] is True and "the Node is gone" in gone["note"]
    done = rig.drainer.complete_lifecycle(taken)
    assert "no action waited any more" in done["hooks"][0]["note"]
    assert len(rig.cloud.completed) == 1


def test_a_scale_down_that_terminated_its_node_records_terminated_beside_a_late_lifecycle_drain(
    rig: Rig,
) -> None:
    """A scale-down's own terminate on a hooked group sends the action's event too. The interrupt
    function leaves an emptied node to its drain; from a snapshot older than the evictions it may
    start a lifecycle drain, which takes the node over. The scale-down is past its last look at the
    cordon (the check before its terminate), so it still completes the action and records
    ``terminated``, not ``superseded``."""
    rig.cloud.add_hook("general", HOOK, heartbeat=300)
    rig.pod("web-0")
    scale_down = rig.cordoned(reason="idle 12 min", plan_id="20261102T100000Z-abc", force=True)
    assert rig.drainer.evict(scale_down)["evicted"] == ["team-a/web-0"]
    rig.api.delete("Pod", "web-0", "team-a")  # its kubelet stopped it
    assert rig.drainer.check(scale_down)["ready"] is True
    terminated = rig.drainer.terminate(scale_down)
    token = rig.cloud.waiting[INSTANCE][HOOK]

    out = rig.drainer.validate(
        request(lifecycle=lifecycle(token=token), deadline_seconds=270), LIFECYCLE_EXECUTION
    )
    late = Drain.model_validate(out["drain"])
    rig.drainer.cordon(late)  # takes the node over
    assert rig.drainer.complete_lifecycle(scale_down)["status"] == "LifecycleCompleted"
    rig.drainer.delete_node(scale_down)
    summary = rig.drainer.record({"drain": scale_down.model_dump(), "terminated": terminated})
    assert summary["outcome"] == "terminated"
    assert rig.drainer.complete_lifecycle(late)["hooks"][0]["result"] is None  # nothing waited: noted


def test_a_heartbeat_is_not_started_without_time_for_one_aws_call(rig: Rig) -> None:
    """A round at the end of its invocation (its Kubernetes calls slow) started the heartbeat anyway:
    one AWS call may take 49 s with the default settings, and Lambda would stop the invocation in it,
    the round lost. Not started, it is the next round's (``heartbeat_error``)."""
    from spillway.act.deadline import Deadline

    held(rig)
    rig.pod("solo", bare=True)
    drain = Drain.model_validate(rig.drainer.validate(request(force=False, deadline_seconds=900))["drain"])
    rig.drainer.cordon(drain)
    round1 = rig.drainer.evict(drain)
    rig.clock.advance(160)
    rig.drainer.deadline = Deadline(remaining=lambda: 30.0, call_seconds=49.0)

    round2 = rig.drainer.evict(drain, round1)

    assert rig.cloud.heartbeats == [] and "not started" in round2["heartbeat_error"], round2
    rig.drainer.deadline = Deadline(remaining=lambda: 110.0, call_seconds=49.0)
    rig.drainer.evict(drain, round2)
    assert rig.cloud.heartbeats == [("general", HOOK, INSTANCE)]


def test_a_round_whose_calls_run_long_still_sends_the_heartbeat_it_owes(rig: Rig) -> None:
    """The heartbeat went at the end of a round, and since fix61a only with time left for one AWS call
    (49 s at the defaults): a round whose Kubernetes calls ran long (a slow API server: they now run up
    to the invocation's end) skipped the heartbeat it owed, and with a HeartbeatTimeout of 300 s and a
    poll of up to 100 s the next round could come after the hook lapsed, Auto Scaling then terminating
    the instance with its pods. It goes at the round's start, when the invocation has its time."""
    from spillway.act.deadline import Deadline

    held(rig)
    rig.pod("solo", bare=True)  # kept until the deadline (no controller), so the drain lasts
    drain = Drain.model_validate(rig.drainer.validate(request(force=False, deadline_seconds=900))["drain"])
    rig.drainer.cordon(drain)
    round1 = rig.drainer.evict(drain)
    rig.clock.advance(160)  # the heartbeat is owed: half the 300 s HeartbeatTimeout has passed
    left = [110.0]
    rig.drainer.deadline = Deadline(remaining=lambda: left[0], call_seconds=49.0)
    listed = rig.kube.pods_on_node

    def slow(node: str) -> Any:
        left[0] = 30.0  # the API server slow: the round's calls spend the invocation's time
        return listed(node)

    rig.kube.pods_on_node = slow  # type: ignore[method-assign]

    round2 = rig.drainer.evict(drain, round1)

    assert rig.cloud.heartbeats == [("general", HOOK, INSTANCE)], round2
    assert round2["heartbeat_at"] == "2026-11-02T10:02:40Z" and "heartbeat_error" not in round2, round2
