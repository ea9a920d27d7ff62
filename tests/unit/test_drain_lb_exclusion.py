# ruff: noqa: F811  (the rig fixture of test_drain_steps is imported and taken by name)
"""A drain whose node goes away labels it ``node.kubernetes.io/exclude-from-external-load-balancers``
before any pod is evicted, so that Kubernetes' service controller and the AWS Load Balancer Controller
deregister it (neither reads Spillway's cordon annotation or draining taint); every way the node is
given back takes off exactly what the drain added, and never a label an operator had set. On the
Kubernetes API emulator (the real adapter) and a fake Auto Scaling."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from test_drain_lifecycle import held, lifecycle_drain
from test_drain_steps import NODE, Rig, rig  # noqa: F401 (the fixture)
from test_drain_uncordon import as_kwargs, make_room

from spillway.act.drain import run_action
from spillway.model.cluster import NodeInfo
from spillway.model.k8s import EXCLUDE_FROM_LB_LABEL, LB_EXCLUDED_BY_SPILLWAY, Node

PLAN = "20261102T100000Z-abc"


def excluded(rig: Rig) -> bool:
    return EXCLUDE_FROM_LB_LABEL in (rig.node()["metadata"].get("labels") or {})


def recorded(rig: Rig) -> bool:
    return LB_EXCLUDED_BY_SPILLWAY in (rig.node()["metadata"].get("annotations") or {})


def metadata(rig: Rig) -> tuple[dict[str, Any], dict[str, Any]]:
    meta = rig.node()["metadata"]
    return copy.deepcopy(meta.get("labels") or {}), copy.deepcopy(meta.get("annotations") or {})


def label_by_operator(rig: Rig, value: str = "") -> None:
    node = rig.node()
    node["metadata"].setdefault("labels", {})[EXCLUDE_FROM_LB_LABEL] = value
    rig.api.update("Node", node)


GOING = {
    "plan": {"reason": "idle 12 min", "plan_id": PLAN},
    "by hand": {"reason": "retire"},
    "spot warning": {"reason": "spot interruption warning w-1", "leaving": True, "force": True},
    "rebalance": {"reason": "rebalance recommendation r-1", "leaving": True, "deadline_seconds": 600},
}


@pytest.mark.parametrize("request_", list(GOING.values()), ids=list(GOING))
def test_a_drain_whose_node_goes_labels_it_out_of_load_balancers_before_evicting(
    rig: Rig, request_: dict[str, Any]
) -> None:
    drain = rig.validated(**request_)
    rig.pod("web-0")  # after validation: a plan's drain is of an idle node
    rig.api.clear_requests()
    rig.drainer.cordon(drain)

    # the cordon step, which precedes every eviction, has labelled the node and recorded it did
    assert excluded(rig) and recorded(rig)
    assert rig.node()["metadata"]["labels"][EXCLUDE_FROM_LB_LABEL] == "true"
    assert not any("eviction" in w for w in rig.writes())


def test_a_lifecycle_drain_labels_its_node_out_of_load_balancers(rig: Rig) -> None:
    held(rig)
    lifecycle_drain(rig)
    assert excluded(rig) and recorded(rig)


@pytest.mark.parametrize(
    "request_",
    [make_room("web-0"), {"reason": "inspect", "terminate": False}],
    ids=["make-room", "by hand, terminate false"],
)
def test_a_drain_that_keeps_its_node_leaves_its_labels_alone(rig: Rig, request_: dict[str, Any]) -> None:
    rig.pod("web-0")
    rig.cordoned(**as_kwargs(request_))
    assert not excluded(rig) and not recorded(rig)


def test_a_failed_drain_gives_the_node_back_as_it_was(rig: Rig) -> None:
    before = metadata(rig)
    drain = rig.cordoned(reason="idle 12 min", plan_id=PLAN)
    out = run_action(rig.drainer, {"action": "uncordon", "drain": drain.model_dump()})
    assert out["uncordoned"] is True
    assert metadata(rig) == before
    assert not rig.node()["spec"].get("unschedulable")


def test_a_node_an_operator_labelled_keeps_its_label_through_drain_and_compensation(rig: Rig) -> None:
    label_by_operator(rig, "")
    before = metadata(rig)
    drain = rig.cordoned(reason="idle 12 min", plan_id=PLAN)
    assert excluded(rig) and not recorded(rig)  # the operator's: no record, the value as it was
    assert rig.node()["metadata"]["labels"][EXCLUDE_FROM_LB_LABEL] == ""
    rig.drainer.uncordon(drain)
    assert metadata(rig) == before


def test_a_compensation_under_somebody_elses_cordon_takes_off_the_label_with_the_taint(rig: Rig) -> None:
    """The operator took Spillway's cordon annotation off (the node stays cordoned): the compensation
    lifts the draining taint alone, and the label Spillway added goes with it."""
    before = metadata(rig)
    drain = rig.cordoned(reason="retire")
    node = rig.node()
    del node["metadata"]["annotations"]["spillway.io/cordoned"]
    rig.api.update("Node", node)
    out = rig.drainer.uncordon(drain)
    assert out["untainted"] is True and out["uncordoned"] is False
    labels, annotations = metadata(rig)
    assert labels == before[0] and LB_EXCLUDED_BY_SPILLWAY not in annotations


def test_a_drain_taken_over_leaves_the_label_to_the_drain_that_holds_the_node(rig: Rig) -> None:
    """A plan's drain overtaken by a Spot warning's undoes nothing (superseded): the label stays while
    the warning's drain holds the node, which goes."""
    planned = rig.cordoned(reason="idle 12 min", plan_id=PLAN)
    rig.cordoned(**GOING["spot warning"])
    assert "another drain holds the node" in rig.drainer.uncordon(planned)["note"]
    assert excluded(rig) and recorded(rig)


def test_a_drain_whose_node_goes_labels_a_node_a_make_room_drain_held(rig: Rig) -> None:
    """A lifecycle action takes over a node a make-room drain is emptying: the label is added then."""
    rig.pod("web-0")
    rig.cordoned(**as_kwargs(make_room("web-0")))
    assert not excluded(rig)
    held(rig)
    lifecycle_drain(rig)
    assert excluded(rig) and recorded(rig)


def test_a_hand_over_leaves_no_label_spillway_added(rig: Rig) -> None:
    """A drain by hand that keeps its node hands it over as ``kubectl drain`` leaves one: cordoned, with
    nothing of Spillway's on it, a label an earlier drain of the node added included."""
    before = metadata(rig)
    rig.cordoned(reason="retire")
    assert excluded(rig)
    kept = rig.cordoned(reason="inspect", terminate=False)  # takes the node over by hand
    assert rig.drainer.hand_over(kept)["handed_over"] is True
    assert metadata(rig) == before and rig.node()["spec"]["unschedulable"] is True


def test_the_planner_reads_a_node_without_the_label_spillway_added(rig: Rig) -> None:
    """A group's template is learned from its nodes' common labels, a draining node's included: the
    drain's label describes no node the group launches."""
    rig.cordoned(reason="idle 12 min", plan_id=PLAN)
    info = NodeInfo.from_node(Node.model_validate(rig.node()))
    assert EXCLUDE_FROM_LB_LABEL not in info.labels
    label_by_operator(rig)
    node = rig.node()
    del node["metadata"]["annotations"][LB_EXCLUDED_BY_SPILLWAY]
    rig.api.update("Node", node)
    assert EXCLUDE_FROM_LB_LABEL in NodeInfo.from_node(Node.model_validate(rig.node())).labels


def test_a_failed_compensation_tells_a_person_how_to_take_off_the_label_too(rig: Rig) -> None:
    drain = rig.cordoned(reason="idle 12 min", plan_id=PLAN)
    cause = {"errorType": "KubeUnavailable", "errorMessage": "API server down"}
    state = {
        "drain": drain.model_dump(),
        "error": {"Error": "DrainTimeout", "Cause": "pods left"},
        "compensation_error": {"Error": "KubeUnavailable", "Cause": json.dumps(cause)},
    }
    out = rig.drainer.record(state)
    assert f"kubectl label node {NODE} {EXCLUDE_FROM_LB_LABEL}-" in out["cause"]
    assert f"kubectl annotate node {NODE} {LB_EXCLUDED_BY_SPILLWAY}-" in out["cause"]


def test_a_label_an_operator_changed_during_the_drain_stays_when_the_node_is_given_back(rig: Rig) -> None:
    """The drain labelled the node "true" and recorded it; the operator then set the label to a value of
    their own (kubectl label --overwrite: they want the node out of load balancers whatever the drain
    does). The compensation takes off the record, the taint and the cordon, and leaves the label as the
    operator set it; the planner reads it as a label of the node. Before, the record alone decided and
    the operator's label went with the drain's."""
    drain = rig.cordoned(reason="idle 12 min", plan_id=PLAN)
    assert recorded(rig)
    label_by_operator(rig, "maintenance")
    assert EXCLUDE_FROM_LB_LABEL in NodeInfo.from_node(Node.model_validate(rig.node())).labels

    out = run_action(rig.drainer, {"action": "uncordon", "drain": drain.model_dump()})

    assert out["uncordoned"] is True
    assert rig.node()["metadata"]["labels"][EXCLUDE_FROM_LB_LABEL] == "maintenance"
    assert not recorded(rig) and not rig.node()["spec"].get("unschedulable")
