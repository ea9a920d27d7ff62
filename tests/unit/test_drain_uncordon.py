# ruff: noqa: F811  (the rig fixture of test_drain_steps is imported and taken by name)
"""Drains that keep their node (``uncordon``, a plan's make-room): the named pods are evicted as a
consolidation's, then the node is uncordoned, its draining taint lifted, and nothing is terminated; the
outcome is ``released``. On the Kubernetes API emulator and a fake Auto Scaling."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_drain_lifecycle import held, lifecycle
from test_drain_steps import CLUSTER, INSTANCE, NODE, Rig, rig  # noqa: F401 (the fixture)

from spillway.act.drain import parse_request, run_action, summarize
from spillway.errors import DrainTimeout, InvalidDrainRequest
from spillway.local import objects
from spillway.model.k8s import CORDONED_BY_SPILLWAY, DRAINING_TAINT

ROOT = Path(__file__).resolve().parents[2]
PLAN = "20261102T100000Z-abc"


def make_room(*pods: str, **more: Any) -> dict[str, Any]:
    """A make-room drain item as act.planning.drain_item writes it (plus a test's timings)."""
    return {
        "cluster": CLUSTER,
        "node": NODE,
        "plan_id": PLAN,
        "consolidation": True,
        "pods": [f"team-a/{p}" for p in pods],
        "terminate": False,
        "uncordon": True,
        "poll_seconds": 1,
        "deadline_seconds": 30,
        **more,
    }


def as_kwargs(request: dict[str, Any]) -> dict[str, Any]:
    """The request's fields for Rig.cordoned (which adds the cluster and the node)."""
    return {k: v for k, v in request.items() if k not in ("cluster", "node")}


def schedulable(rig: Rig) -> bool:
    node = rig.node()
    return (
        not node["spec"].get("unschedulable")
        and CORDONED_BY_SPILLWAY not in node["metadata"].get("annotations", {})
        and all(t["key"] != DRAINING_TAINT for t in node["spec"].get("taints") or [])
    )


# --- the request -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"uncordon": "yes"}, "valid boolean"),
        ({"terminate": True}, '"terminate": false'),
        ({"terminate": None}, '"terminate": false'),  # terminate's default is true
    ],
)
def test_uncordon_needs_a_drain_that_keeps_its_node_and_is_refused_naming_it(
    rig: Rig, change: dict[str, Any], words: str
) -> None:
    rig.pod("web-0")
    rig.api.clear_requests()
    raw = {k: v for k, v in {**make_room("web-0"), **change}.items() if v is not None}

    with pytest.raises(InvalidDrainRequest) as caught:
        rig.drainer.validate(raw)

    assert caught.value.field == "uncordon"
    assert str(caught.value).startswith("uncordon: ") and words in str(caught.value)
    assert rig.writes() == [] and rig.outcomes == []


def test_a_forced_drain_of_a_leaving_instance_never_uncordons(rig: Rig) -> None:
    """EC2 takes a leaving instance whatever a forced drain does: its node is never given back."""
    raw = {"cluster": CLUSTER, "node": NODE, "leaving": True, "force": True, "terminate": False,
           "uncordon": True}  # fmt: skip

    with pytest.raises(InvalidDrainRequest) as caught:
        rig.drainer.validate(raw)

    assert caught.value.field == "uncordon" and '"leaving" and "force"' in str(caught.value)
    assert rig.writes() == []


def test_a_lifecycle_drain_never_uncordons(rig: Rig) -> None:
    held(rig)
    raw = {"cluster": CLUSTER, "node": NODE, "group": "general", "lifecycle": lifecycle(),
           "terminate": False, "uncordon": True}  # fmt: skip

    with pytest.raises(InvalidDrainRequest) as caught:
        rig.drainer.validate(raw)

    assert caught.value.field == "uncordon" and "lifecycle" in str(caught.value)
    assert rig.writes() == [] and rig.cloud.completed == []


def test_uncordon_defaults_to_false_and_a_manual_drain_may_ask_for_it() -> None:
    assert parse_request({"cluster": CLUSTER, "node": NODE}).uncordon is False
    manual = parse_request({"cluster": CLUSTER, "node": NODE, "terminate": False, "uncordon": True})
    assert (manual.terminate, manual.uncordon, manual.consolidation) == (False, True, False)


# --- the steps -------------------------------------------------------------------------------------


def test_a_dry_run_says_the_node_would_be_kept_and_uncordoned(rig: Rig) -> None:
    rig.pod("web-0")
    rig.api.clear_requests()

    out = rig.drainer.validate(make_room("web-0", dry_run=True))

    preview = out["preview"]
    assert preview["would_evict"] == ["team-a/web-0"]
    assert preview["would_uncordon"] is True and preview["would_terminate"] is None
    assert preview["uncordon"] is True and preview["consolidation"] is True
    assert rig.writes() == [] and rig.outcomes == [("dry_run", NODE)]
    # an ordinary drain's preview says it would not
    assert rig.drainer.validate({"cluster": CLUSTER, "node": NODE})["preview"]["would_uncordon"] is False


def test_a_make_room_evicts_its_pods_then_uncordons_the_node_and_terminates_nothing(rig: Rig) -> None:
    rig.pod("web-0")
    rig.pod("web-1")
    drain = rig.cordoned(**as_kwargs(make_room("web-0", "web-1")))
    assert drain.uncordon and not drain.terminate
    draining = [e for e in rig.api.list("Event") if e["reason"] == "SpillwayDraining"][-1]
    assert "uncordon the node" in draining["message"] and "terminate" not in draining["message"]
    assert not schedulable(rig)

    state: dict[str, Any] = {"drain": drain.model_dump()}
    first = run_action(rig.drainer, {"action": "evict", "drain": state["drain"]})
    assert first["done"] is False and first["evicted_count"] == 2  # both terminating
    rig.clock.advance(5)  # the poll: the kubelet confirmed both
    state["round"] = run_action(rig.drainer, {"action": "evict", "drain": state["drain"], "round": first})
    assert state["round"]["done"] is True and state["round"]["evicted_count"] == 2
    assert run_action(rig.drainer, {"action": "check", "drain": state["drain"]})["ready"] is True
    # the Release state: the compensation's step, as a success
    state["released"] = run_action(rig.drainer, {"action": "uncordon", "drain": state["drain"]})
    out = run_action(rig.drainer, {"action": "record", "outcome": "released", "state": state})

    assert schedulable(rig)
    assert [t["key"] for t in rig.node()["spec"]["taints"]] == ["nvidia.com/gpu"]  # others' taints kept
    assert out["outcome"] == "released" and out["uncordoned"] is True and out["untainted"] is True
    assert out["uncordon"] is True and out["evicted_count"] == 2 and out["instance_id"] == INSTANCE
    assert rig.outcomes == [("released", NODE)]
    event = rig.api.list("Event")[-1]
    assert (event["reason"], event["type"]) == ("SpillwayReleased", "Normal")
    assert "evicted 2 pod(s)" in event["message"] and "stays in service" in event["message"]
    assert rig.cloud.groups[("us-east-1", "general")]["DesiredCapacity"] == 2
    assert [m for m, _ in rig.cloud.calls if m in ("terminate_instance", "complete_lifecycle_action")] == []


def test_a_make_room_whose_node_another_drain_took_says_it_left_the_node_cordoned(rig: Rig) -> None:
    """A Spot warning's drain takes the node over between the make-room's check and its release: the
    release's compare-and-set leaves the warning's cordon and taint, and the record and the Released
    Event say the node was left as it is, not that it was uncordoned."""
    rig.pod("web-0")
    drain = rig.cordoned(**as_kwargs(make_room("web-0")))
    rig.cordoned(reason="spot interruption warning w-1", leaving=True, force=True)

    state: dict[str, Any] = {"drain": drain.model_dump()}
    state["released"] = run_action(rig.drainer, {"action": "uncordon", "drain": state["drain"]})
    out = run_action(rig.drainer, {"action": "record", "outcome": "released", "state": state})

    assert not schedulable(rig) and "spillway.io/draining" in [t["key"] for t in rig.node()["spec"]["taints"]]
    assert out["uncordoned"] is False and out["untainted"] is False and "another drain" in out["note"]
    event = rig.api.list("Event")[-1]
    assert event["reason"] == "SpillwayReleased" and "stays in service" not in event["message"]
    assert "left the node as it is" in event["message"]


def test_a_make_room_whose_pods_cannot_leave_times_out_and_is_compensated_as_any_drain(rig: Rig) -> None:
    rig.pod("web-0")
    drain = rig.cordoned(**as_kwargs(make_room("web-0")))
    # after the plan, a budget that allows nothing now covers the pod the make-room moves
    rig.api.add(objects.pdb("web", "team-a", {"app": "web"}, min_available=1))

    first = rig.drainer.evict(drain)
    rig.clock.advance(31)
    with pytest.raises(DrainTimeout):
        rig.drainer.evict(drain, first)
    rig.drainer.uncordon(drain)  # Compensate
    out = rig.drainer.record(
        {"drain": drain.model_dump(), "round": first, "error": {"Error": "DrainTimeout", "Cause": "web-0"}}
    )
    assert out["outcome"] == "timeout" and rig.outcomes == [("timeout", NODE)]
    assert schedulable(rig) and rig.api.get("Pod", "web-0", "team-a") is not None


def test_a_make_room_moves_only_its_pods_and_every_other_pod_stays(rig: Rig) -> None:
    rig.pod("web-0")
    rig.pod("db-0", app="db")  # on the node at plan time, not moved: the make-room needs only web-0's room
    drain = rig.cordoned(**as_kwargs(make_room("web-0")))
    rig.pod("late-0", app="late", tolerations=[{"operator": "Exists"}])  # arrived after the cordon

    first = rig.drainer.evict(drain)
    rig.clock.advance(5)  # the poll: web-0 has left
    round_ = rig.drainer.evict(drain, first)

    assert round_["done"] is True and round_["evicted"] == ["team-a/web-0"]
    assert rig.drainer.check(drain)["ready"] is True
    assert rig.api.get("Pod", "web-0", "team-a") is None
    assert (
        rig.api.get("Pod", "db-0", "team-a") is not None
        and rig.api.get("Pod", "late-0", "team-a") is not None
    )
    # a consolidation of the same pods would leave the node alone: it terminates the node
    out = rig.drainer.validate({**make_room("web-0"), "uncordon": False, "terminate": True})
    assert "did not plan to move" in out["cancelled"]["note"]


def test_the_scale_down_summary_counts_released_drains() -> None:
    output = {
        "node": "a",
        "instance_id": "i-1",
        "outcome": "released",
        "evicted_count": 2,
        "uncordoned": True,
    }
    out = summarize(CLUSTER, PLAN, [{"execution": "arn:...:drain-0-x", "output": output}])
    [line] = out["drains"]
    assert (line["outcome"], line["uncordoned"], line["evicted_count"]) == ("released", True, 2)
    assert out["counts"] == {"released": 1}


# --- the state machine's shape (its behaviour: tests/e2e/test_make_room.py) --------------------------


def test_drain_node_releases_a_kept_node_through_the_compensations_step() -> None:
    states = json.loads((ROOT / "statemachines/drain_node.asl.json").read_text())["States"]
    keep = next(c for c in states["ShouldTerminate"]["Choices"] if c.get("Variable") == "$.drain.terminate")
    assert keep == {"Variable": "$.drain.terminate", "BooleanEquals": False, "Next": "ShouldUncordon"}
    should = states["ShouldUncordon"]
    assert (should["Choices"][0]["Next"], should["Default"]) == ("Release", "HandOver")
    assert states["HandOver"]["Next"] == "RecordDrained"  # a drain by hand's cordon becomes the operator's
    release = states["Release"]
    assert release["Parameters"] == {"action": "uncordon", "drain.$": "$.drain"}  # as Compensate's
    assert release["Parameters"] == {k: v for k, v in states["Compensate"]["Parameters"].items()}
    assert [c["Next"] for c in release["Catch"]] == ["Compensate"]  # a failure compensates as before
    assert release["Next"] == "RecordReleased"
    assert states["RecordReleased"]["Parameters"]["outcome"] == "released"
    assert [c["Next"] for c in states["RecordReleased"]["Catch"]] == ["MarkReleased"]  # marked counted,
    assert states["MarkReleased"]["Next"] == "CountReleased"
    assert states["CountReleased"]["Next"] == "Released"  # DrainOutcome counted, then the output
