"""ProvisioningRequests: both standard classes, every condition transition, consumers not scaled twice."""

from __future__ import annotations

import copy
import json
import random
import re
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from plan_world import NOW, World, pending_codes, pending_reasons, scale_up

from spillway.inputs import load_cluster
from spillway.local import objects as o
from spillway.model.cluster import ClusterSnapshot
from spillway.model.provreq import (
    BEST_EFFORT_ATOMIC,
    CHECK_CAPACITY,
    NODE_LABEL,
    ProvisioningRequestInfo,
    label_value,
    request_infos,
)
from spillway.model.state import State
from spillway.planner import ScalingPlan, codes, plan

BIG = {"cpu": "5", "memory": "4Gi"}  # one per m5.2xlarge


def template(name: str, namespace: str = "default", **requests: str) -> dict[str, Any]:
    resources = {"requests": requests or dict(BIG)}
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "template": {"spec": {"containers": [{"name": "main", "image": "x", "resources": resources}]}},
    }


def condition(type_: str, status: str, reason: str, at: datetime) -> dict[str, Any]:
    stamp = at.isoformat().replace("+00:00", "Z")
    return {"type": type_, "status": status, "reason": reason, "message": "", "lastTransitionTime": stamp,
            "observedGeneration": 1}  # fmt: skip


def request(
    name: str,
    class_name: str,
    sets: list[tuple[str, int]],
    *,
    conditions: list[dict[str, Any]] | None = None,
    parameters: dict[str, str] | None = None,
    created: datetime = NOW - timedelta(minutes=1),
) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "generation": 1,
            "creationTimestamp": created.isoformat().replace("+00:00", "Z"),
        },
        "spec": {
            "provisioningClassName": class_name,
            "podSets": [{"podTemplateRef": {"name": t}, "count": c} for t, c in sets],
            **({"parameters": parameters} if parameters else {}),
        },
        "status": {"conditions": conditions or []},
    }


def run(
    w: World,
    requests: list[dict[str, Any]],
    templates: list[dict[str, Any]],
    now: datetime = NOW,
    **config: Any,
) -> ScalingPlan:
    snapshot, groups, cfg, state = w.parsed(**config)
    snapshot = replace(snapshot, provreqs=request_infos(requests, templates))
    return plan(snapshot, groups, cfg, state, now)


def conds(result: ScalingPlan, name: str = "r") -> dict[str, tuple[str, str]]:
    update = next(u for u in result.provisioning if u.name == name)
    return {c["type"]: (c["status"], c["reason"]) for c in update.conditions}


def cpu_world(nodes: int = 0, max_size: int = 10, **kwargs: Any) -> tuple[World, list[str]]:
    w = World()
    names = w.group("cpu-east", "m5.2xlarge", nodes=nodes, max_size=max_size, **kwargs)
    return w, names


# --- check-capacity -----------------------------------------------------------------------------


def test_check_capacity_that_fits_is_accepted_provisioned_and_launches_nothing() -> None:
    w, _ = cpu_world(nodes=2)
    result = run(w, [request("r", CHECK_CAPACITY, [("t", 2)])], [template("t")])

    assert conds(result) == {"Accepted": ("True", "Accepted"), "Provisioned": ("True", "CapacityIsFound")}
    assert result.scale_up == ()
    assert "provisioning" in result.to_dict()


def test_check_capacity_that_does_not_fit_is_provisioned_false_and_never_scales() -> None:
    w, _ = cpu_world(nodes=1)
    result = run(w, [request("r", CHECK_CAPACITY, [("t", 2)])], [template("t")])

    assert conds(result)["Provisioned"] == ("False", "CapacityIsNotFound")
    assert result.scale_up == ()


def test_check_capacity_does_not_count_capacity_still_launching() -> None:
    """Two nodes launching (desired 2, none registered) would hold the request, but check-capacity asks
    whether the capacity exists: Provisioned=False, checked again once they are Ready. cluster-
    autoscaler's code counts them (static_autoscaler.go adds placeholder "upcoming" nodes to the
    snapshot before the scale-up orchestrator, where checkcapacity/provisioningclass.go schedules the
    request's pods ScheduleAnywhere), which its maintainers track as a bug: kubernetes/autoscaler#6855
    "Do not consider upcoming nodes for check-capacity provisioning class". A launch may fail; Kueue
    would have admitted the workload on capacity that never came."""
    w, _ = cpu_world(nodes=0, desired=2)
    result = run(w, [request("r", CHECK_CAPACITY, [("t", 2)])], [template("t")])

    assert conds(result)["Provisioned"] == ("False", "CapacityIsNotFound")
    assert result.scale_up == ()
    assert result.state.bookings == {}


def test_check_capacity_with_no_retry_fails_when_capacity_is_not_found() -> None:
    """cluster-autoscaler's check-capacity class reads spec.parameters.noRetry: with "true", capacity not
    found sets Failed=True / CapacityIsNotFound instead of Provisioned=False, so Kueue retries after its
    back-off rather than keeping the quota reserved for a request that stays pending
    (kubernetes/autoscaler cluster-autoscaler/provisioningrequest/checkcapacity/provisioningclass.go,
    NoRetryParameterKey, checkCapacity)."""
    w, _ = cpu_world(nodes=0)
    req = request("r", CHECK_CAPACITY, [("t", 1)], parameters={"noRetry": "true"})
    result = run(w, [req], [template("t")])

    assert conds(result) == {"Accepted": ("True", "Accepted"), "Failed": ("True", "CapacityIsNotFound")}
    assert "noRetry" in result.provisioning[0].conditions[1]["message"]
    assert result.scale_up == ()


@pytest.mark.parametrize("value", ["false", "True", "yes"])
def test_check_capacity_with_no_retry_other_than_true_is_checked_again(value: str) -> None:
    """Only the exact string "true" sets noRetry in cluster-autoscaler; "false" is the default and any
    other value is ignored (logged there, said in the condition's message here)."""
    w, _ = cpu_world(nodes=0)
    req = request("r", CHECK_CAPACITY, [("t", 1)], parameters={"noRetry": value})
    result = run(w, [req], [template("t")])

    assert conds(result) == {"Accepted": ("True", "Accepted"), "Provisioned": ("False", "CapacityIsNotFound")}
    message = result.provisioning[0].conditions[1]["message"]
    assert ("ignored" in message) == (value != "false"), message


def test_check_capacity_that_fits_once_expendable_pods_are_preempted_is_provisioned_and_booked() -> None:
    """cluster-autoscaler checks capacity (and books it) on a snapshot without the scheduled pods below
    --expendable-pods-priority-cutoff (kubernetes/autoscaler cluster-autoscaler/core/
    static_autoscaler.go, FilterOutExpendablePods before initializeClusterSnapshot; checkcapacity/
    provisioningclass.go, checkCapacity): kube-scheduler preempts them for the request's pods. A node
    running only a backfill pod of priority -100 had room for the request, yet Spillway answered
    CapacityIsNotFound on every plan while the backfill ran (Failed, with noRetry). The booking takes
    that room: a pending pod placed after it cannot preempt the same backfill pod."""
    w, names = cpu_world(nodes=1)
    w.items.append(
        o.pod(
            "backfill-0", cpu="6", memory="1Gi", node_name=names[0], priority=-100, owner=("ReplicaSet", "bf")
        )
    )
    (other,) = w.pods("other", 1, cpu="4", memory="2Gi")
    result = run(w, [request("r", CHECK_CAPACITY, [("a", 1)])], [template("a", cpu="4", memory="2Gi")])

    assert conds(result)["Provisioned"] == ("True", "CapacityIsFound")
    assert "preempt" in result.provisioning[0].conditions[1]["message"]
    assert result.state.bookings["default/r"].nodes == (names[0],)
    assert scale_up(result)["cpu-east"][2] == [other]  # the booked room is not taken twice


@pytest.mark.parametrize("leaving", ["node-deleted", "instance-terminating"])
def test_a_request_is_not_provisioned_on_a_node_on_its_way_out(leaving: str) -> None:
    """A booking holds room only on nodes that stay: one being deleted (deletionTimestamp) or whose
    instance its group is terminating (LifecycleState Terminating*) is no room for the plan's pending
    pods either (:attr:`WorkNode.schedulable`). The request was Provisioned=True there; the next plan
    found the node gone and revoked the booking (CapacityRevoked), which Kueue answers by rejecting the
    admission check and deactivating the workload (kubernetes-sigs/kueue pkg/controller/
    admissionchecks/provisioning/controller.go, isCapacityRevoked). cluster-autoscaler never revokes
    (processors/provreq/processor.go: a booking ends expired or consumed)."""
    w, names = cpu_world(nodes=1)
    if leaving == "node-deleted":
        w.node(names[0])["metadata"]["deletionTimestamp"] = "2026-11-02T11:59:00Z"
    else:
        w.groups["cpu-east"]["Instances"][0]["LifecycleState"] = "Terminating:Wait"
    result = run(w, [request("r", CHECK_CAPACITY, [("t", 1)])], [template("t")])

    assert conds(result)["Provisioned"] == ("False", "CapacityIsNotFound")
    assert result.state.bookings == {}


def test_a_booking_holds_its_room_against_other_pending_pods() -> None:
    w, _ = cpu_world(nodes=1)
    pods = w.pods("web", 1, **BIG)
    booked = [condition("Accepted", "True", "Accepted", NOW - timedelta(minutes=2)),
              condition("Provisioned", "True", "CapacityIsFound", NOW - timedelta(minutes=2))]  # fmt: skip
    reqs = [request("r", CHECK_CAPACITY, [("t", 1)], conditions=booked)]

    held = run(w, reqs, [template("t")])
    free = run(w, [], [template("t")])

    assert scale_up(held)["cpu-east"][2] == pods  # the booked node is not free: a new one for web
    assert scale_up(free) == {}  # without the booking, web fits on the node
    assert held.provisioning == ()  # nothing changed on the request


def test_a_new_check_capacity_request_books_before_pending_pods_take_the_room() -> None:
    w, _ = cpu_world(nodes=1)
    pods = w.pods("web", 1, **BIG)
    result = run(w, [request("r", CHECK_CAPACITY, [("t", 1)])], [template("t")])

    assert conds(result)["Provisioned"] == ("True", "CapacityIsFound")
    assert scale_up(result)["cpu-east"][2] == pods


def _nominated_to_the_node(priority: int = 0) -> tuple[World, str, str]:
    """One m5.2xlarge (7910m), empty: its victims gone, a 6-CPU preemptor nominated to it (not bound
    yet) holds the room kube-scheduler reserved for it; a 5-CPU pod fits beside it nowhere."""
    w, (node,) = cpu_world(nodes=1)
    (preemptor,) = w.pods("train", 1, cpu="6", memory="2Gi", priority=priority)
    w.pod_item(preemptor)["status"]["nominatedNodeName"] = node
    return w, node, preemptor


def test_a_request_never_books_the_room_a_nominated_pod_is_to_take() -> None:
    """cluster-autoscaler adds the pods waiting on a preemption to its snapshot on their nominated nodes
    (core/podlistprocessor/filter_out_expendable.go, addPreemptingPodsToSnapshot) in its default pod
    list processors, which run before the ProvisioningRequest processor books capacity
    (processors/provreq/processor.go, bookCapacity, added after them in main.go). The preemptor binds
    once its victims are gone, long before the request's pods are created. Before, the booking was taken
    before the nominated pod was charged: Provisioned=True on a node the preemptor fills, a double
    booking. Whatever the nominated pod's priority (here below the request's pods'), it comes first."""
    for priority in (0, -1):
        w, _, preemptor = _nominated_to_the_node(priority)

        result = run(w, [request("r", CHECK_CAPACITY, [("t", 1)])], [template("t")])

        assert conds(result)["Provisioned"] == ("False", "CapacityIsNotFound"), priority
        assert pending_codes(result)[preemptor] == "nominated"
        assert "bookings" not in result.state.to_wire()


def test_a_booking_whose_node_is_gone_is_not_moved_into_the_room_a_nominated_pod_is_to_take() -> None:
    """A booking held again after its node went (the room is taken again where it fits) leaves the
    nominated room alone too: the only room left is the preemptor's, so the booking is revoked rather
    than moved onto a node the preemptor fills. Before, it moved there."""
    w, node, _ = _nominated_to_the_node()
    _booked_on(w, "ip-10-0-0-9.ec2.internal")  # no longer in the cluster

    result = run(w, [request("r", CHECK_CAPACITY, [("t", 1)], conditions=_booked())], [template("t")])

    assert conds(result)["CapacityRevoked"] == ("True", "BookedCapacityGone")
    assert "bookings" not in result.state.to_wire(), node


def test_a_booking_whose_pod_template_is_gone_fails_and_books_nothing() -> None:
    """cluster-autoscaler's bookCapacity (processors/provreq/processor.go) makes a provisioned request's
    pods every loop; when a PodTemplate it names is gone (provreqwrapper PodSets: "missing pod
    templates ..."), it sets Failed=True / FailedToBookCapacity and books nothing for it. Before, the
    pod sets whose template was left kept their room: a partial booking, until the 10 minutes passed."""
    w, _ = cpu_world(nodes=1)
    pods = w.pods("web", 1, **BIG)
    booked = [condition("Accepted", "True", "Accepted", NOW - timedelta(minutes=2)),
              condition("Provisioned", "True", "CapacityIsFound", NOW - timedelta(minutes=2))]  # fmt: skip
    req = request("r", CHECK_CAPACITY, [("t", 1), ("gone", 1)], conditions=booked)

    result = run(w, [req], [template("t")])

    assert conds(result)["Failed"] == ("True", "FailedToBookCapacity")
    failed = next(c for c in result.provisioning[0].conditions if c["type"] == "Failed")
    assert "PodTemplate default/gone not found" in failed["message"]
    assert scale_up(result) == {}, pods  # the room is free: web fits on the node
    assert "bookings" not in result.state.to_wire()


def test_the_booking_expires_after_ten_minutes() -> None:
    w, _ = cpu_world(nodes=1)
    at = NOW - timedelta(minutes=10, seconds=1)
    booked = [
        condition("Accepted", "True", "Accepted", at),
        condition("Provisioned", "True", "CapacityIsFound", at),
    ]
    result = run(w, [request("r", CHECK_CAPACITY, [("t", 1)], conditions=booked)], [template("t")])

    assert conds(result)["BookingExpired"] == ("True", "CapacityReservationTimeExpired")
    # the Provisioned condition keeps its time: only BookingExpired is new
    update = result.provisioning[0]
    provisioned = next(c for c in update.conditions if c["type"] == "Provisioned")
    assert provisioned["lastTransitionTime"] == at.isoformat().replace("+00:00", "Z")


def test_the_booking_ends_when_all_its_pods_run() -> None:
    w, names = cpu_world(nodes=1)
    at = NOW - timedelta(minutes=1)
    booked = [
        condition("Accepted", "True", "Accepted", at),
        condition("Provisioned", "True", "CapacityIsFound", at),
    ]
    w.pods(
        "job",
        1,
        node_name=names[0],
        annotations={"autoscaling.x-k8s.io/consume-provisioning-request": "r"},
        **BIG,
    )
    result = run(w, [request("r", CHECK_CAPACITY, [("t", 1)], conditions=booked)], [template("t")])

    assert conds(result)["BookingExpired"] == ("True", "CapacityBookingConsumed")


def _booked(minutes_ago: float = 1) -> list[dict[str, Any]]:
    at = NOW - timedelta(minutes=minutes_ago)
    return [condition("Accepted", "True", "Accepted", at),
            condition("Provisioned", "True", "CapacityIsFound", at)]  # fmt: skip


def _booked_on(w: World, *nodes: str, name: str = "r") -> None:
    """The state a plan left when it booked request ``name`` on ``nodes``."""
    w.state.setdefault("bookings", {})[f"default/{name}"] = {"uid": f"uid-{name}", "nodes": list(nodes)}


def test_a_booking_remembers_the_nodes_it_holds_while_it_holds() -> None:
    w, names = cpu_world(nodes=2)
    first = run(w, [request("r", CHECK_CAPACITY, [("t", 1)])], [template("t")])

    assert conds(first)["Provisioned"] == ("True", "CapacityIsFound")
    [node] = first.state.to_wire()["bookings"]["default/r"]["nodes"]
    assert node in names and first.state.bookings["default/r"].uid == "uid-r"
    _booked_on(w, node)
    held = run(w, [request("r", CHECK_CAPACITY, [("t", 1)], conditions=_booked())], [template("t")])
    assert held.provisioning == () and held.state.bookings == first.state.bookings
    ended = run(w, [request("r", CHECK_CAPACITY, [("t", 1)], conditions=_booked(11))], [template("t")])
    assert conds(ended)["BookingExpired"] == ("True", "CapacityReservationTimeExpired")
    assert "bookings" not in ended.state.to_wire()


def test_capacity_is_revoked_when_the_booked_node_is_gone() -> None:
    w, _ = cpu_world(nodes=0)
    _booked_on(w, "ip-10-0-0-9.ec2.internal")
    result = run(w, [request("r", CHECK_CAPACITY, [("t", 1)], conditions=_booked())], [template("t")])

    assert conds(result)["CapacityRevoked"] == ("True", "BookedCapacityGone")
    assert "ip-10-0-0-9.ec2.internal" in result.provisioning[0].conditions[-1]["message"]
    assert result.scale_up == ()
    assert result.state.bookings == {}


def test_a_booking_whose_room_another_pod_took_is_not_revoked_while_its_node_exists() -> None:
    """kube-scheduler knows nothing of a booking: a pod arriving after Provisioned=True may be bound in
    the booked room while the node is still there. cluster-autoscaler never sets CapacityRevoked for it
    (kubernetes/autoscaler cluster-autoscaler/processors/provreq/processor.go, bookCapacity: the booked
    pods are scheduled with TrySchedulePods each loop, what does not fit is simply not booked; a booking
    ends BookingExpired, CapacityReservationTimeExpired or CapacityBookingConsumed). Kueue treats
    CapacityRevoked=True as 'nodes deleted' and rejects the check, deactivating an active workload
    (kubernetes-sigs/kueue pkg/controller/admissionchecks/provisioning/controller.go, syncCheckStates,
    case isCapacityRevoked)."""
    w, names = cpu_world(nodes=1)
    w.pods("intruder", 1, node_name=names[0], **BIG)  # not a consumer; bound into the booked room
    req = request("r", CHECK_CAPACITY, [("t", 1)], conditions=_booked())
    unknown = run(w, [req], [template("t")])  # booked by a version that kept no nodes
    _booked_on(w, names[0])
    known = run(w, [req], [template("t")])

    for result in (unknown, known):
        revoked = [c for u in result.provisioning for c in u.conditions if c["type"] == "CapacityRevoked"]
        assert revoked == [], "the booked node still exists: Kueue would deactivate the workload"
    assert known.state.bookings["default/r"].nodes == (names[0],)  # held until it expires or is used
    later = run(w, [req], [template("t")], now=NOW + timedelta(minutes=10))
    assert conds(later)["BookingExpired"] == ("True", "CapacityReservationTimeExpired")


def test_booked_nodes_round_trip_the_state_and_older_states_load() -> None:
    old = {"nodes": {}, "groups": {"g": {"backoff_until": "2026-11-02T12:30:00Z", "reason": "x"}}}
    assert State.model_validate(old).bookings == {}
    assert "bookings" not in State.model_validate(old).to_wire()
    wire = {**old, "bookings": {"default/r": {"uid": "uid-r", "nodes": ["a", "b"]}}}
    assert State.model_validate(wire).to_wire()["bookings"] == wire["bookings"]
    # an entry of an older request of the same name (another uid) is not this request's booking
    w, _ = cpu_world(nodes=0)
    w.state["bookings"] = {"default/r": {"uid": "uid-before", "nodes": ["ip-10-0-0-9.ec2.internal"]}}
    result = run(w, [request("r", CHECK_CAPACITY, [("t", 1)], conditions=_booked())], [template("t")])
    assert result.provisioning == () and result.state.bookings == {}


def test_a_booking_whose_node_is_gone_moves_to_room_left_elsewhere() -> None:
    """Its pods still run (the scheduler places them in the room there is): nothing to revoke."""
    w, names = cpu_world(nodes=2)
    _booked_on(w, "ip-10-0-0-9.ec2.internal")
    result = run(w, [request("r", CHECK_CAPACITY, [("t", 1)], conditions=_booked())], [template("t")])

    assert result.provisioning == ()
    [node] = result.state.bookings["default/r"].nodes
    assert node in names


def test_valid_until_seconds_fails_a_request_not_provisioned_in_time() -> None:
    w, _ = cpu_world(nodes=0)
    old = request("r", CHECK_CAPACITY, [("t", 1)], parameters={"ValidUntilSeconds": "60"},
                  created=NOW - timedelta(seconds=61))  # fmt: skip
    young = request("y", CHECK_CAPACITY, [("t", 1)], parameters={"ValidUntilSeconds": "600"})
    result = run(w, [old, young], [template("t")])

    assert conds(result, "r")["Failed"] == ("True", "Expired")
    assert conds(result, "y")["Provisioned"] == ("False", "CapacityIsNotFound")


@pytest.mark.parametrize("seconds", ["1" + "0" * 30, str(2**63 - 1), "315537897600"])
def test_a_valid_until_past_every_date_never_expires_the_request(seconds: str) -> None:
    """ValidUntilSeconds is a string of the spec's parameters (map[string]string): a number too large
    for a timedelta (or for the date it is added to) made every plan raise OverflowError. (Found by
    review: input fuzzing.) Past the last date there is, the request never expires."""
    w, _ = cpu_world(nodes=0)
    old = request("r", CHECK_CAPACITY, [("t", 1)], parameters={"ValidUntilSeconds": seconds},
                  created=NOW - timedelta(days=30))  # fmt: skip
    result = run(w, [old], [template("t")])

    assert conds(result)["Provisioned"] == ("False", "CapacityIsNotFound")
    assert "Failed" not in conds(result)


def test_without_valid_until_a_request_expires_after_seven_days() -> None:
    w, _ = cpu_world(nodes=0)
    result = run(
        w, [request("r", CHECK_CAPACITY, [("t", 1)], created=NOW - timedelta(days=7))], [template("t")]
    )

    assert conds(result)["Failed"] == ("True", "Expired")


def test_a_missing_pod_template_fails_the_request_with_the_reason() -> None:
    w, _ = cpu_world(nodes=1)
    result = run(w, [request("r", CHECK_CAPACITY, [("missing", 1)])], [])

    assert conds(result) == {"Failed": ("True", "FailedToCreatePods")}
    message = result.provisioning[0].conditions[0]["message"]
    assert "PodTemplate default/missing not found" in message


def test_an_unknown_class_is_left_to_its_own_autoscaler() -> None:
    w, _ = cpu_world(nodes=0)
    pods = w.pods("q", 1, annotations={"autoscaling.x-k8s.io/consume-provisioning-request": "r"}, **BIG)
    result = run(w, [request("r", "queued-provisioning.gke.io", [("t", 1)])], [template("t")])

    assert result.provisioning == ()
    assert result.scale_up == ()
    assert pending_codes(result)[pods[0]] == "provisioning-request"


def test_a_check_capacity_request_for_a_named_processor_instance_is_left_to_it() -> None:
    """spec.parameters.processorInstance names the check-capacity processor that serves the request
    (cluster-autoscaler --check-capacity-processor-instance); an autoscaler run without one, as Spillway
    is, leaves such a request alone: no conditions, no booking (kubernetes/autoscaler
    cluster-autoscaler/provisioningrequest/supported_classes.go, SupportedCheckCapacityClass, and its
    supported_class_test.go). Its consumers are not demand, as for any request (pods_filter.go)."""
    w, _ = cpu_world(nodes=1)
    pods = w.pods("web", 1, **BIG)
    consumer = w.pods("q", 1, annotations={"autoscaling.x-k8s.io/consume-provisioning-request": "r"}, **BIG)
    elsewhere = {"processorInstance": "team-a"}
    fresh = request("r", CHECK_CAPACITY, [("t", 1)], parameters=elsewhere)
    booked_there = request("r", CHECK_CAPACITY, [("t", 1)], parameters=elsewhere, conditions=_booked())

    for req in (fresh, booked_there):
        result = run(w, [req], [template("t")])

        assert result.provisioning == ()
        assert "bookings" not in result.state.to_wire()
        assert scale_up(result) == {}  # web takes the room: nothing of it is booked here
        assert pending_codes(result)[consumer[0]] == "provisioning-request"
        assert "another autoscaler serves the request" in pending_reasons(result)[consumer[0]]
        assert pending_codes(result).get(pods[0]) == "fits-free-room"


@pytest.mark.parametrize(
    ("class_name", "parameters"),
    [(CHECK_CAPACITY, {"processorInstance": ""}), (BEST_EFFORT_ATOMIC, {"processorInstance": "team-a"})],
)
def test_an_empty_processor_instance_or_one_on_the_atomic_class_is_served(
    class_name: str, parameters: dict[str, str]
) -> None:
    """An empty processorInstance is no instance; the best-effort-atomic class is served by the
    autoscaler run without an instance whatever the parameter says (supported_classes.go)."""
    w, _ = cpu_world(nodes=1)
    result = run(w, [request("r", class_name, [("t", 1)], parameters=parameters)], [template("t")])

    assert conds(result)["Provisioned"] == ("True", "CapacityIsFound")


@pytest.mark.parametrize(
    "spec",
    [
        {"provisioningClassName": "atomic-scale-up.autoscaling.x-k8s.io"},
        {"provisioningClassName": "atomic-scale-up.kubernetes.io"},
        {"provisioningClassName": "check-capacity.kubernetes.io"},
        {"provisioningClass": CHECK_CAPACITY, "additionalParameters": {}},
    ],
    ids=["renamed-atomic-class", "draft-atomic-class", "draft-check-class", "draft-field-names"],
)
def test_pre_release_class_and_field_names_are_another_autoscalers_requests(spec: dict[str, Any]) -> None:
    """No released cluster-autoscaler accepted these, so neither does Spillway. The class
    ``atomic-scale-up.autoscaling.x-k8s.io`` was renamed to ``best-effort-atomic-scale-up`` before any
    release, with no alias kept (kubernetes/autoscaler#6849, #6854 and its 1.30 cherry-pick #7032: "this
    API is in draft stage and not yet supported in any release"; supported_classes.go compares the two
    class names exactly); the ``*.kubernetes.io`` classes and the fields ``provisioningClass`` and
    ``additionalParameters`` are the first draft's (#5848). A CRD that still declares those fields does
    not serve ``provisioningClassName``: such a request names no class Spillway serves. It is left
    alone, and its consumers wait for the autoscaler it names rather than being scaled for twice."""
    w, _ = cpu_world(nodes=1)
    consumer = w.pods("q", 1, annotations={"autoscaling.x-k8s.io/consume-provisioning-request": "r"}, **BIG)
    req = request("r", CHECK_CAPACITY, [("t", 1)])
    req["spec"] = {**{k: v for k, v in req["spec"].items() if k != "provisioningClassName"}, **spec}

    result = run(w, [req], [template("t")])

    assert result.provisioning == ()
    assert "another autoscaler serves the request" in pending_reasons(result)[consumer[0]]


def test_unchanged_conditions_are_not_written_again() -> None:
    w, _ = cpu_world(nodes=0)
    at = NOW - timedelta(minutes=3)
    seen = [
        {**condition("Accepted", "True", "Accepted", at), "message": "Spillway serves this ProvisioningRequest"},
        {**condition("Provisioned", "False", "CapacityIsNotFound", at),
         "message": "1 pod(s) do not fit in the free room of the cluster; checked again"},
    ]  # fmt: skip
    result = run(w, [request("r", CHECK_CAPACITY, [("t", 1)], conditions=seen)], [template("t")])

    assert result.provisioning == ()


# --- best-effort-atomic ---------------------------------------------------------------------------


def test_best_effort_atomic_launches_its_pod_sets_as_one_labelled_gang() -> None:
    w, _ = cpu_world(nodes=0)
    reqs = [request("r", BEST_EFFORT_ATOMIC, [("a", 2), ("b", 1)])]
    result = run(w, reqs, [template("a"), template("b", cpu="1", memory="1Gi")])

    assert conds(result) == {
        "Accepted": ("True", "Accepted"),
        "Provisioned": ("False", "CapacityIsLaunching"),
    }
    (up,) = result.scale_up
    assert up.to_size - up.from_size == 2
    (gang,) = up.gangs
    assert gang.gang == "ProvisioningRequest/default/r"
    assert gang.nodes == 2
    assert gang.node_labels == {NODE_LABEL: "default.r"}
    assert gang.to_dict()["node_labels"] == {NODE_LABEL: "default.r"}
    assert result.pending == ()  # the request's pods are not pods: its status says it


def test_best_effort_atomic_waits_for_capacity_already_launching() -> None:
    w, _ = cpu_world(nodes=0, desired=2)
    launching = [condition("Accepted", "True", "Accepted", NOW - timedelta(minutes=1)),
                 condition("Provisioned", "False", "CapacityIsLaunching", NOW - timedelta(minutes=1))]  # fmt: skip
    result = run(w, [request("r", BEST_EFFORT_ATOMIC, [("a", 2)], conditions=launching)], [template("a")])

    assert result.scale_up == ()  # not launched twice
    assert conds(result)["Provisioned"] == ("False", "CapacityIsLaunching")


def test_best_effort_atomic_is_provisioned_on_its_labelled_nodes_and_publishes_the_label() -> None:
    w, _ = cpu_world(nodes=2, labels={NODE_LABEL: label_value("default", "r")})
    launching = [condition("Provisioned", "False", "CapacityIsLaunching", NOW - timedelta(minutes=3))]
    result = run(w, [request("r", BEST_EFFORT_ATOMIC, [("a", 2)], conditions=launching)], [template("a")])

    assert conds(result)["Provisioned"] == ("True", "CapacityIsProvisioned")
    assert result.provisioning[0].details == {"NodeSelectorKey": NODE_LABEL, "NodeSelectorValue": "default.r"}


def test_best_effort_atomic_that_fits_now_is_provisioned_without_launching() -> None:
    w, _ = cpu_world(nodes=2)
    result = run(w, [request("r", BEST_EFFORT_ATOMIC, [("a", 2)])], [template("a")])

    assert conds(result)["Provisioned"] == ("True", "CapacityIsFound")
    assert result.scale_up == ()
    assert result.provisioning[0].details == {}


def test_best_effort_atomic_that_can_never_fit_fails_and_adds_nothing() -> None:
    w, _ = cpu_world(nodes=0, max_size=2)
    result = run(w, [request("r", BEST_EFFORT_ATOMIC, [("a", 3)])], [template("a")])

    assert conds(result)["Failed"][0] == "True"
    assert result.scale_up == ()


def _busy(w: World, names: list[str]) -> None:
    for i, node in enumerate(names):
        w.pods(f"busy{i}", 1, node_name=node, cpu="7", memory="20Gi")


@pytest.mark.parametrize(
    "blocked",
    [
        pytest.param({}, id="max-size-filled-by-running-nodes"),
        pytest.param({"max_nodes_total": 2}, id="cluster-limit"),
        pytest.param({"quota": {"cpu": "16"}}, id="capacity-quota"),
    ],
)
def test_best_effort_atomic_blocked_by_what_passes_is_retried_not_failed(blocked: dict[str, Any]) -> None:
    """cluster-autoscaler's best-effort-atomic class answers a scale-up it cannot make now with
    Provisioned=False / CapacityIsNotFound and retries it; it never sets Failed for it: only the 7-day
    (or ValidUntilSeconds) expiry fails the request (kubernetes/autoscaler cluster-autoscaler/
    provisioningrequest/besteffortatomic/provisioning_class.go, Provision). Kueue counts every Failed as
    a spent attempt and deactivates the workload after retryStrategy.backoffLimitCount
    (kubernetes-sigs/kueue pkg/controller/admissionchecks/provisioning/controller.go, case isFailed).
    Here two busy nodes fill what MaxSize 3, a node total or a CapacityQuota leaves: once they go, the
    request fits."""
    w, names = cpu_world(nodes=2, max_size=3)
    _busy(w, names)
    config = {k: v for k, v in blocked.items() if k != "quota"}
    if "quota" in blocked:
        w.capacity_quota("team", blocked["quota"])
    result = run(w, [request("r", BEST_EFFORT_ATOMIC, [("a", 2)])], [template("a")], **config)

    got = conds(result)
    assert "Failed" not in got, f"what passes failed the request: {got}"
    assert got["Provisioned"] == ("False", "CapacityIsNotFound")
    assert "until it expires" in result.provisioning[0].conditions[1]["message"]
    assert result.scale_up == ()


def test_best_effort_atomic_too_big_for_every_group_even_empty_fails() -> None:
    """Failed only when no group's shape and size could ever hold it: three one-node pods, MaxSize 2,
    whatever runs now (here nothing)."""
    w, _ = cpu_world(nodes=2, max_size=2)
    result = run(w, [request("r", BEST_EFFORT_ATOMIC, [("a", 3)])], [template("a")])

    assert conds(result)["Failed"] == ("True", "CapacityCannotBeProvisioned")
    assert "even empty and grown to its MaxSize" in result.provisioning[0].conditions[1]["message"]


def test_best_effort_atomic_whose_pod_sets_together_outgrow_max_size_fails() -> None:
    """The pod sets of one request share the groups' MaxSize: Kueue makes one pod set per PodSet of
    the job (a PyTorchJob's master and its workers), and a master and two workers of one node each
    need three nodes, which MaxSize 2 never gives, just as three pods of one set do. Each set counted
    as if the group were its own (one node, then two) left it Provisioned=False / CapacityIsNotFound
    until its 7-day expiry: Kueue keeps the admission check Pending on that, with the workload's quota
    reserved, while on Failed it retries with a new request after its back-off and rejects the check
    once retryStrategy.backoffLimitCount is spent (kubernetes-sigs/kueue pkg/controller/admissionchecks/
    provisioning/controller.go, syncCheckStates: case isFailed, case isAccepted). cluster-autoscaler
    answers an all-or-nothing scale-up past node group limits with CapacityIsNotFound for every loop
    (kubernetes/autoscaler cluster-autoscaler/core/scaleup/orchestrator/orchestrator.go, ScaleUp:
    "Can only add %d nodes due to node group limits"); Spillway fails what no group could ever hold,
    so the quota is not held for a week, and retries what passes (the test above)."""
    w, _ = cpu_world(nodes=0, max_size=2)
    req = request("r", BEST_EFFORT_ATOMIC, [("master", 1), ("worker", 2)])
    result = run(w, [req], [template("master"), template("worker")])

    assert conds(result)["Failed"] == ("True", "CapacityCannotBeProvisioned")
    assert result.scale_up == ()


def _driver_and_workers() -> World:
    """a-driver (MaxSize 1, label role=driver) sorts before b-general (MaxSize 2); one of the request's
    pods per m5.2xlarge (7910m): two 6-CPU workers (any node) and one 5-CPU driver (role=driver only)."""
    w = World()
    w.group("a-driver", "m5.2xlarge", nodes=0, max_size=1, labels={"role": "driver"})
    w.group("b-general", "m5.2xlarge", nodes=0, max_size=2)
    return w


def test_best_effort_atomic_placed_only_with_its_most_constrained_set_first_is_not_failed() -> None:
    """Review r27: the bound packed pod sets biggest first into groups in name order, one order only,
    so the workers took a-driver's only node, the driver found none, and a request our own scale-up
    places (checked first: the expander prefers b-general) was Failed for good while b-general was
    backed off. Failed=True makes Kueue spend a retry and, past its backoffLimitCount, reject the
    admission check (kubernetes-sigs/kueue pkg/controller/admissionchecks/provisioning/controller.go);
    a transient stop must leave CapacityIsNotFound, retried until the request expires, as
    cluster-autoscaler's best-effort-atomic class does (besteffortatomic/provisioning_class.go).

    No one group takes the driver and both workers (a-driver holds one pod, b-general no driver), so
    nothing is launched: the new nodes of the request come from one group, as cluster-autoscaler's
    all-or-nothing scale-up has it. Running nodes of both groups would hold it: never Failed."""
    req = request("r", BEST_EFFORT_ATOMIC, [("worker", 2), ("driver", 1)])
    driver = template("driver", cpu="5", memory="1Gi")
    driver["template"]["spec"]["nodeSelector"] = {"role": "driver"}
    templates = [template("worker", cpu="6", memory="1Gi"), driver]
    priorities = {50: ["^b-"], 10: ["^a-"]}  # cluster-autoscaler priority expander: b-general first

    placed = run(_driver_and_workers(), [req], templates, expander_priorities=priorities)
    assert "Failed" not in conds(placed), conds(placed)
    assert conds(placed)["Provisioned"] == ("False", "CapacityIsNotFound")
    assert placed.scale_up == ()

    w = _driver_and_workers()
    w.launch_failure("b-general", minutes_ago=1)
    result = run(w, [req], templates, expander_priorities=priorities)

    assert "Failed" not in conds(result), conds(result)
    assert conds(result)["Provisioned"] == ("False", "CapacityIsNotFound")


def test_best_effort_atomic_pod_sets_that_share_nodes_within_max_size_launch() -> None:
    """Sets of the same request may share a node: a big pod and two small ones fit one m5.2xlarge, so
    MaxSize 1 holds the whole request and it is launched, not failed."""
    w, _ = cpu_world(nodes=0, max_size=1)
    req = request("r", BEST_EFFORT_ATOMIC, [("big", 1), ("small", 2)])
    result = run(w, [req], [template("big"), template("small", cpu="1", memory="1Gi")])

    assert conds(result)["Provisioned"] == ("False", "CapacityIsLaunching")
    assert scale_up(result)["cpu-east"][:2] == (0, 1)


def test_best_effort_atomic_that_fits_once_expendable_pods_are_preempted_is_provisioned() -> None:
    """cluster-autoscaler leaves scheduled pods below --expendable-pods-priority-cutoff out of the
    snapshot every scale-up, this class's included, is judged on (kubernetes/autoscaler
    cluster-autoscaler/core/static_autoscaler.go, FilterOutExpendablePods before
    initializeClusterSnapshot): a request whose pods fit once kube-scheduler preempts them is
    provisioned with nothing launched (besteffortatomic/provisioning_class.go: every pod schedulable,
    CapacityIsFound). Spillway's scale-up placed its gang there too (fits-by-preemption), launched
    nothing, and answered Provisioned=False / CapacityIsLaunching: capacity "launching" that never
    came, on every plan until the request expired."""
    w, names = cpu_world(nodes=1)
    w.items.append(
        o.pod(
            "backfill-0", cpu="6", memory="1Gi", node_name=names[0], priority=-100, owner=("ReplicaSet", "bf")
        )
    )
    result = run(w, [request("r", BEST_EFFORT_ATOMIC, [("a", 1)])], [template("a", cpu="4", memory="2Gi")])

    assert result.scale_up == ()
    assert conds(result)["Provisioned"] == ("True", "CapacityIsFound")
    assert "preempt" in result.provisioning[0].conditions[1]["message"]
    assert result.state.bookings["default/r"].nodes == (names[0],)


def test_best_effort_atomic_on_a_backed_off_group_waits_and_is_retried() -> None:
    w, _ = cpu_world(nodes=0)
    w.launch_failure("cpu-east", minutes_ago=1)
    result = run(w, [request("r", BEST_EFFORT_ATOMIC, [("a", 1)])], [template("a")])

    assert conds(result)["Provisioned"] == ("False", "CapacityIsNotFound")
    assert "Failed" not in conds(result)


def _in_zones(operator: str, *zones: str) -> dict[str, Any]:
    term = {
        "matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": operator, "values": list(zones)}
        ]
    }
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


@pytest.mark.parametrize(
    ("operator", "zones", "answer"),
    [
        ("In", ("us-east-1a", "us-east-1b"), ("Provisioned", ("False", "CapacityIsNotFound"))),
        ("NotIn", ("us-east-1a",), ("Failed", ("True", "CapacityCannotBeProvisioned"))),
    ],
)
def test_best_effort_atomic_on_a_group_over_two_zones_is_judged_on_the_zones_it_launches(
    operator: str, zones: tuple[str, ...], answer: tuple[str, tuple[str, str]]
) -> None:
    """The group spans us-east-1a and b and is backed off. Pods that need either zone could run on any
    node it launches (as scale-up judges the group, on each zone it may launch): the request waits and is
    retried, not failed for good because the template, which has no zone, misses the label. Pods that
    must avoid us-east-1a could be sent a node there: scale-up never launches the group for them, and the
    request fails rather than waiting for a group that will not take it."""
    w, _ = cpu_world(nodes=0, zones=["us-east-1a", "us-east-1b"])
    w.launch_failure("cpu-east", minutes_ago=1)
    pods = template("a")
    pods["template"]["spec"]["affinity"] = _in_zones(operator, *zones)
    result = run(w, [request("r", BEST_EFFORT_ATOMIC, [("a", 1)])], [pods])

    assert conds(result)[answer[0]] == answer[1]


def test_pods_consuming_a_request_being_served_are_not_scaled_for_twice() -> None:
    w, _ = cpu_world(nodes=0)
    consume = {"autoscaling.x-k8s.io/consume-provisioning-request": "r",
               "autoscaling.x-k8s.io/provisioning-class-name": BEST_EFFORT_ATOMIC}  # fmt: skip
    pods = w.pods("job", 2, annotations=consume, **BIG)
    result = run(w, [request("r", BEST_EFFORT_ATOMIC, [("a", 2)])], [template("a")])

    (up,) = result.scale_up
    assert up.to_size - up.from_size == 2  # for the request, not again for its pods
    assert {pending_codes(result)[p] for p in pods} == {"provisioning-request"}


def test_consumers_of_an_ended_request_are_ordinary_demand() -> None:
    w, _ = cpu_world(nodes=0)
    pods = w.pods("job", 1, annotations={"autoscaling.x-k8s.io/consume-provisioning-request": "r"}, **BIG)
    ended = [condition("Failed", "True", "Expired", NOW - timedelta(minutes=1))]
    result = run(w, [request("r", BEST_EFFORT_ATOMIC, [("a", 1)], conditions=ended)], [template("a")])

    assert scale_up(result)["cpu-east"][2] == pods


# --- the model -----------------------------------------------------------------------------------


def test_requests_round_trip_through_the_snapshot_and_old_snapshots_still_load() -> None:
    w, _ = cpu_world(nodes=1)
    snapshot, *_ = w.parsed()
    infos = request_infos(
        [
            request(
                "r",
                CHECK_CAPACITY,
                [("t", 2)],
                parameters={"ValidUntilSeconds": "60"},
                conditions=[condition("Accepted", "True", "Accepted", NOW)],
            )
        ],
        [template("t")],
    )
    full = replace(snapshot, provreqs=infos)

    assert ClusterSnapshot.from_dict(full.to_dict()) == full
    assert "provreqs" not in snapshot.to_dict()
    assert ClusterSnapshot.from_dict(snapshot.to_dict()).provreqs == ()


def test_bad_fields_never_raise() -> None:
    odd: list[Any] = [
        {"metadata": {"name": "a"}, "spec": {"podSets": "nope", "parameters": [1]}, "status": {"conditions": [7]}},
        {"metadata": {}},
        {"metadata": {"name": "b", "namespace": "x"}, "spec": {"podSets": [{"podTemplateRef": {"name": "t"},
                                                                           "count": "two"}]}},
    ]  # fmt: skip
    bad_template = template("t", "x", cpu="lots")
    infos = request_infos(odd, [bad_template])

    assert [i.name for i in infos] == ["a", "b"]
    assert isinstance(infos[0], ProvisioningRequestInfo)
    assert "count must be at least 1" in infos[1].problem


def test_a_file_whose_pod_sets_or_template_spec_are_no_objects_names_them_and_fails_the_request(
    tmp_path: Path,
) -> None:
    """The API server's schemas hold ``spec.podSets`` as a list and a PodTemplate's ``template.spec`` as
    an object, but a hand-made ``spillway plan --cluster`` file need not: ``podSets: 5`` raised a
    TypeError (a traceback, not exit 2), and ``template.spec: -1`` was read as a pod asking for nothing.
    (Found by review: input fuzzing.) Each is the request's problem now, naming the field; the request
    fails with it as with any template its pods cannot be made from."""
    w, _ = cpu_world(nodes=1)
    odd = request("odd", CHECK_CAPACITY, [])
    odd["spec"]["podSets"] = 5
    flat = template("flat")
    flat["template"]["spec"] = -1
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(o.kube_list([odd, request("r", CHECK_CAPACITY, [("flat", 1)]), flat])))

    infos = {i.name: i for i in load_cluster(path, "c", NOW).provreqs}

    assert infos["odd"].problem == "spec.podSets must be a list of pod sets"
    assert infos["r"].problem == "PodTemplate default/flat: template.spec: not an object"
    result = run(w, [odd], [])
    assert conds(result, "odd")["Failed"] == ("True", "FailedToCreatePods")


# --- the plan function writes the statuses -------------------------------------------------------


def test_statuses_are_written_and_a_failed_write_never_fails_the_plan() -> None:
    from fakes import FakeCluster

    from spillway.act.planning import write_provisioning
    from spillway.errors import KubeUnavailable

    w, _ = cpu_world(nodes=1)
    result = run(w, [request("r", CHECK_CAPACITY, [("t", 1)])], [template("t")])
    kube = FakeCluster(custom=[request("r", CHECK_CAPACITY, [("t", 1)])])

    assert write_provisioning(lambda: kube, result.provisioning) == {"written": 1, "failed": 0, "errors": []}
    stored = kube.list_custom("autoscaling.x-k8s.io", "v1", "provisioningrequests")[0]["status"]
    assert {c["type"]: c["status"] for c in stored["conditions"]} == {
        "Accepted": "True",
        "Provisioned": "True",
    }
    assert write_provisioning(lambda: kube, ()) is None

    def down() -> FakeCluster:
        raise KubeUnavailable("no API server")

    assert write_provisioning(down, result.provisioning)["failed"] == 1  # type: ignore[index]

    # a request deleted since the snapshot has no status left to write: moot, not a failure
    assert write_provisioning(lambda: FakeCluster(), result.provisioning) == {
        "written": 0, "failed": 0, "gone": 1, "errors": []
    }  # fmt: skip


def test_a_status_is_written_only_to_the_request_it_was_decided_for() -> None:
    """Deleted and made again under the same name since the snapshot: the new request (another uid)
    keeps its own status; the write is moot, and the next plan decides for the new one."""
    from fakes import FakeCluster

    from spillway.act.planning import write_provisioning

    w, _ = cpu_world(nodes=1)
    result = run(w, [request("r", CHECK_CAPACITY, [("t", 1)])], [template("t")])
    (update,) = result.provisioning
    assert update.uid == "uid-r"
    again = request("r", CHECK_CAPACITY, [("t", 1)])
    again["metadata"]["uid"] = "uid-r-again"
    kube = FakeCluster(custom=[copy.deepcopy(again)])

    assert write_provisioning(lambda: kube, result.provisioning) == {
        "written": 0, "failed": 0, "gone": 1, "errors": []
    }  # fmt: skip
    assert kube.list_custom("autoscaling.x-k8s.io", "v1", "provisioningrequests")[0] == again


# --- in-flight launches (fleet mode: the group grows only at attach) ------------------------------


def atomic_world(mode: str = "fleet", **group: Any) -> World:
    w, _ = cpu_world(**group)
    w.groups["cpu-east"]["Tags"].append(
        {"ResourceId": "cpu-east", "ResourceType": "auto-scaling-group", "Key": "spillway.io/atomic-launch",
         "Value": mode, "PropagateAtLaunch": False}
    )  # fmt: skip
    return w


def with_conditions(raw: dict[str, Any], result: ScalingPlan) -> dict[str, Any]:
    """The request as the API holds it after the plan function wrote ``result``'s status."""
    update = next(u for u in result.provisioning if u.name == raw["metadata"]["name"])
    return {**raw, "status": update.status()}


def test_a_request_being_launched_is_not_launched_again_nor_failed() -> None:
    w = atomic_world()
    raw = request("r", BEST_EFFORT_ATOMIC, [("a", 2)])
    first = run(w, [raw], [template("a")])
    assert scale_up(first)["cpu-east"][:2] == (0, 2)
    assert first.state.gangs["ProvisioningRequest/default/r"].count == 2
    w.state = first.state.to_wire()

    # CreateFleet ran, attach has not: the group still shows desired 0, nothing launching
    later = run(w, [with_conditions(raw, first)], [template("a")], now=NOW + timedelta(minutes=2))

    assert later.scale_up == ()
    assert later.provisioning == ()  # still Provisioned=False / CapacityIsLaunching: nothing to write
    assert (
        later.state.gangs["ProvisioningRequest/default/r"]
        == first.state.gangs["ProvisioningRequest/default/r"]
    )
    assert later.pending == ()


def test_ready_nodes_not_yet_labelled_do_not_provision_a_request_launched_for() -> None:
    w = atomic_world(nodes=2)  # the fleet attached and is Ready; the gang launch has not labelled it
    raw = request("r", BEST_EFFORT_ATOMIC, [("a", 2)])
    w.state = {"nodes": {}, "groups": {}, "gangs": {"ProvisioningRequest/default/r": {
        "group": "cpu-east", "region": "us-east-1", "count": 2, "since": "2026-11-02T11:56:00Z"}}}  # fmt: skip
    launching = [condition("Accepted", "True", "Accepted", NOW - timedelta(minutes=4)),
                 condition("Provisioned", "False", "CapacityIsLaunching", NOW - timedelta(minutes=4))]  # fmt: skip
    raw["status"]["conditions"] = launching

    result = run(w, [raw], [template("a")])

    assert result.scale_up == ()
    assert all(c["status"] != "True" for u in result.provisioning for c in u.conditions
               if c["type"] == "Provisioned")  # fmt: skip
    # once labelled, it is provisioned with the label published
    for node in w.items:
        if node["kind"] == "Node":
            node["metadata"]["labels"][NODE_LABEL] = "default.r"
    labelled = run(w, [raw], [template("a")])
    assert conds(labelled)["Provisioned"] == ("True", "CapacityIsProvisioned")
    assert labelled.provisioning[0].details["NodeSelectorValue"] == "default.r"


def test_an_atomic_request_partly_in_free_room_is_provisioned_once_its_launched_nodes_are_labelled() -> None:
    """cluster-autoscaler's best-effort-atomic class scales up only for the request's pods that do not
    fit the room there is (kubernetes/autoscaler cluster-autoscaler/provisioningrequest/
    besteffortatomic/provisioning_class.go, Provision, filterOutSchedulable), and Spillway's gang is
    placed the same way: free room first, new nodes for the rest. Three one-node pods and one empty
    node: two nodes are launched and labelled. Their label cannot hold the request whole, so it is not
    published (Kueue skips a detail that is absent: kubernetes-sigs/kueue pkg/controller/
    admissionchecks/provisioning/controller.go, podSetUpdates), but once the gang launch has labelled
    all its nodes it is provisioned on them and the free room. It waited gang_launch_minutes
    (15) instead, Provisioned=False with its nodes Ready and the room it counted on unbooked."""
    templates = [template("a")]
    raw = request("r", BEST_EFFORT_ATOMIC, [("a", 3)])
    first = run(atomic_world(nodes=1), [raw], templates)
    assert scale_up(first)["cpu-east"][:2] == (1, 3)  # one pod in the free room, two on new nodes
    w = atomic_world(nodes=1)
    launched = [w.add_instance("cpu-east", register=True) for _ in range(2)]
    for name in launched:
        w.node(name)["metadata"]["labels"][NODE_LABEL] = "default.r"
    w.state = first.state.to_wire()

    later = run(w, [with_conditions(raw, first)], templates, now=NOW + timedelta(minutes=3))

    assert later.scale_up == ()
    assert conds(later)["Provisioned"][0] == "True"
    assert later.provisioning[0].details == {}  # its pods may not be pinned to the labelled nodes
    every_node = {i["metadata"]["name"] for i in w.items if i["kind"] == "Node"}
    assert len(every_node) == 3
    assert set(later.state.bookings["default/r"].nodes) == every_node  # the free room is booked too


def test_labelled_nodes_of_a_launch_not_all_labelled_yet_do_not_provision_it_off_them() -> None:
    """While the gang launch is labelling its nodes (one of two so far), the request waits for the
    label rather than be provisioned in room its pods could not be pinned to."""
    templates = [template("a")]
    raw = request("r", BEST_EFFORT_ATOMIC, [("a", 2)])
    first = run(atomic_world(), [raw], templates)
    w = atomic_world()
    launched = [w.add_instance("cpu-east", register=True) for _ in range(2)]
    w.node(launched[0])["metadata"]["labels"][NODE_LABEL] = "default.r"
    w.state = first.state.to_wire()

    later = run(w, [with_conditions(raw, first)], templates, now=NOW + timedelta(minutes=3))

    assert later.scale_up == ()
    assert later.provisioning == ()  # still Provisioned=False / CapacityIsLaunching


def test_without_a_launch_under_way_free_room_provisions_an_atomic_request() -> None:
    w = atomic_world(nodes=2)  # the nodes were there: nothing was launched for the request
    result = run(w, [request("r", BEST_EFFORT_ATOMIC, [("a", 2)])], [template("a")])

    assert conds(result)["Provisioned"] == ("True", "CapacityIsFound")


def test_a_booked_idle_node_is_not_drained_while_the_booking_holds() -> None:
    w, names = cpu_world(nodes=1, min_size=0)
    w.idle_since(names[0], minutes_ago=60)
    at = NOW - timedelta(minutes=2)
    booked = [condition("Accepted", "True", "Accepted", at),
              condition("Provisioned", "True", "CapacityIsFound", at)]  # fmt: skip

    held = run(w, [request("r", CHECK_CAPACITY, [("t", 1)], conditions=booked)], [template("t")])
    free = run(w, [], [template("t")])

    assert [d.node for d in free.drain] == names  # idle an hour: drained without the booking
    assert held.drain == ()
    assert {k.node: k.code for k in held.kept}[names[0]] == "pending-fits"


def test_a_labelled_booking_is_revoked_when_its_labelled_nodes_go_though_other_room_exists() -> None:
    w, _ = cpu_world(nodes=2)  # free room, not labelled for the request
    labelled = w.group(
        "cpu-west", "m5.2xlarge", region="us-west-2", nodes=1, labels={NODE_LABEL: "default.r"}
    )
    at = NOW - timedelta(minutes=1)
    provisioned = request("r", BEST_EFFORT_ATOMIC, [("a", 2)], conditions=[
        condition("Accepted", "True", "Accepted", at), condition("Provisioned", "True", "CapacityIsProvisioned", at)])  # fmt: skip
    provisioned["status"]["provisioningClassDetails"] = {
        "NodeSelectorKey": NODE_LABEL,
        "NodeSelectorValue": "default.r",
    }

    _booked_on(w, labelled[0], "ip-10-9-0-1.us-west-2.compute.internal")
    result = run(
        w, [provisioned], [template("a")]
    )  # one labelled node of the two left: its pods can't all run

    assert conds(result)["CapacityRevoked"] == ("True", "BookedCapacityGone")
    unlabelled = dict(provisioned, status={"conditions": provisioned["status"]["conditions"]})
    assert run(w, [unlabelled], [template("a")]).provisioning == ()  # a plain booking holds in free room


def test_a_young_request_waits_a_minute_for_its_pod_templates() -> None:
    w, _ = cpu_world(nodes=1)
    young = request("r", CHECK_CAPACITY, [("ppt-r-main", 1)], created=NOW - timedelta(seconds=5))

    before = run(w, [young], [])  # Kueue creates the request, then its PodTemplates
    created = run(w, [young], [template("ppt-r-main")])
    never = run(w, [young], [], now=NOW + timedelta(minutes=1))

    assert before.provisioning == ()  # untouched, not failed
    assert conds(created)["Provisioned"] == ("True", "CapacityIsFound")
    assert conds(never) == {"Failed": ("True", "FailedToCreatePods")}
    bad_count = request("b", CHECK_CAPACITY, [("ppt-r-main", 0)], created=NOW - timedelta(seconds=5))
    assert conds(run(w, [bad_count], [template("ppt-r-main")]), "b")["Failed"][0] == "True"  # at once


# --- pod topology: the request's pods are placed as pending pods of their templates ------------------

ONE_PER_NODE = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "worker"}}, "topologyKey": "kubernetes.io/hostname"}
        ]
    }
}


def worker_template(name: str, affinity: dict[str, Any] | None = ONE_PER_NODE) -> dict[str, Any]:
    """Small workers (1 CPU; seven fit an m5.2xlarge), labelled ``app: worker``."""
    spec: dict[str, Any] = {
        "containers": [
            {"name": "main", "image": "x", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
        ]
    }
    if affinity:
        spec["affinity"] = affinity
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "template": {"metadata": {"labels": {"app": "worker"}}, "spec": spec},
    }


def run_offline(
    w: World, requests: list[dict[str, Any]], templates: list[dict[str, Any]], tmp_path: Path
) -> ScalingPlan:
    """Plan from one List holding the cluster, the requests and their templates, as ``spillway plan``
    reads it: the templates' pods get the cluster's pod topology."""
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(o.kube_list([*w.items, *requests, *templates])))
    _, groups, cfg, state = w.parsed()
    return plan(load_cluster(path, w.cluster, NOW), groups, cfg, state, NOW)


def test_a_request_of_workers_that_repel_each_other_books_one_per_node(tmp_path: Path) -> None:
    """Two nodes with room for fourteen such pods hold two of these: each repels the others from its
    node. The booking put three on one node, where kube-scheduler would run one."""
    w, _ = cpu_world(nodes=2)

    two = run_offline(w, [request("r", CHECK_CAPACITY, [("t", 2)])], [worker_template("t")], tmp_path)
    three = run_offline(w, [request("r", CHECK_CAPACITY, [("t", 3)])], [worker_template("t")], tmp_path)
    plain = run_offline(w, [request("r", CHECK_CAPACITY, [("t", 3)])], [worker_template("t", None)], tmp_path)

    assert conds(two)["Provisioned"] == ("True", "CapacityIsFound")
    assert conds(three)["Provisioned"] == ("False", "CapacityIsNotFound")
    assert conds(plain)["Provisioned"] == ("True", "CapacityIsFound")  # without the term: free room


def test_a_running_pod_that_repels_the_templates_pods_keeps_its_node_out_of_the_booking(
    tmp_path: Path,
) -> None:
    w, (node,) = cpu_world(nodes=1)
    w.items.append(o.pod("loner", cpu="1", memory="1Gi", node_name=node, labels={"app": "loner"},
                         affinity=ONE_PER_NODE))  # fmt: skip
    req = [request("r", CHECK_CAPACITY, [("t", 1)])]

    result = run_offline(w, req, [worker_template("t", None)], tmp_path)

    assert conds(result)["Provisioned"] == ("False", "CapacityIsNotFound")
    other = o.pod("loner", cpu="1", memory="1Gi", node_name=node, labels={"app": "loner"})
    w.items[-1] = other  # the same pod without the term: the room is free
    assert conds(run_offline(w, req, [worker_template("t", None)], tmp_path))["Provisioned"][0] == "True"


def test_an_atomic_request_of_one_per_node_workers_launches_a_node_per_worker(tmp_path: Path) -> None:
    """Three workers that repel each other need three nodes; one node held all three, and two of the
    pods Kueue then admits would wait for a node the gang launch never brought."""
    w, _ = cpu_world(nodes=0)

    result = run_offline(w, [request("r", BEST_EFFORT_ATOMIC, [("t", 3)])], [worker_template("t")], tmp_path)
    plain = run_offline(
        w, [request("r", BEST_EFFORT_ATOMIC, [("t", 3)])], [worker_template("t", None)], tmp_path
    )

    assert scale_up(result)["cpu-east"][:2] == (0, 3)
    assert scale_up(plain)["cpu-east"][:2] == (0, 1)
    assert conds(result)["Provisioned"] == ("False", "CapacityIsLaunching")


def test_bookings_in_one_plan_see_each_other_and_pending_pods_see_them(tmp_path: Path) -> None:
    """Two requests of the same one-per-node workers on two nodes: the older books both nodes' one
    slot, the younger finds none. A pending replica of them then goes to a new node."""
    w, _ = cpu_world(nodes=2)
    older = request("a", CHECK_CAPACITY, [("t", 2)], created=NOW - timedelta(minutes=3))
    younger = request("b", CHECK_CAPACITY, [("t", 1)], created=NOW - timedelta(minutes=2))
    w.items.append(o.pod("worker-x", cpu="1", memory="1Gi", labels={"app": "worker"}, affinity=ONE_PER_NODE))

    result = run_offline(w, [older, younger], [worker_template("t")], tmp_path)

    assert conds(result, "a")["Provisioned"] == ("True", "CapacityIsFound")
    assert conds(result, "b")["Provisioned"] == ("False", "CapacityIsNotFound")
    assert scale_up(result)["cpu-east"][:2] == (2, 3)  # the pending worker: the booked nodes repel it


# --- pod sets of different shapes ------------------------------------------------------------------


def test_a_booking_counts_running_consumers_against_their_own_pod_set() -> None:
    """Pod set 0 (one 7-CPU launcher) runs; the booking holds room for pod set 1 (two 1-CPU workers),
    which a smaller node still has. It counted the launcher against the first set in order and booked
    another launcher, found no room for it and revoked the request: Kueue then evicts the workload."""
    w = World()
    (big,) = w.group("big", "m5.2xlarge", nodes=1)
    w.group("small", "m5.xlarge", nodes=1)
    w.pods("launcher", 1, cpu="7", memory="4Gi", node_name=big, phase="Running",
           annotations={"autoscaling.x-k8s.io/consume-provisioning-request": "r"})  # fmt: skip
    at = NOW - timedelta(minutes=2)
    booked = [
        condition("Accepted", "True", "Accepted", at),
        condition("Provisioned", "True", "CapacityIsFound", at),
    ]
    req = request("r", CHECK_CAPACITY, [("launcher", 1), ("worker", 2)], conditions=booked)
    templates = [template("launcher", cpu="7", memory="4Gi"), template("worker", cpu="1", memory="2Gi")]

    held = run(w, [req], templates)
    w.pods("worker", 2, cpu="1", memory="2Gi", node_name=big, phase="Running",
           annotations={"autoscaling.x-k8s.io/consume-provisioning-request": "r"})  # fmt: skip
    used = run(w, [req], templates)

    assert all(u.name != "r" for u in held.provisioning)  # the booking holds, unchanged
    assert conds(used)["BookingExpired"] == ("True", "CapacityBookingConsumed")


def test_the_nodes_launched_for_pod_sets_of_two_shapes_provision_the_request() -> None:
    """Two 3-CPU and two 4.5-CPU pods: the scale-up packs one of each per m5.2xlarge (biggest first)
    and launches two. The check on those two nodes fitted the sets in spec order (both 3-CPU pods on
    the first node) and found no room for the second 4.5-CPU pod: never provisioned, on its own nodes."""
    templates = [template("small", cpu="3", memory="4Gi"), template("large", cpu="4500m", memory="4Gi")]
    raw = request("r", BEST_EFFORT_ATOMIC, [("small", 2), ("large", 2)])
    first = run(atomic_world(), [raw], templates)
    w = atomic_world(nodes=2, labels={NODE_LABEL: "default.r"})
    w.state = first.state.to_wire()

    later = run(w, [with_conditions(raw, first)], templates, now=NOW + timedelta(minutes=3))

    assert scale_up(first)["cpu-east"][:2] == (0, 2)
    assert conds(later)["Provisioned"] == ("True", "CapacityIsProvisioned")


@pytest.mark.parametrize("class_name", [CHECK_CAPACITY, BEST_EFFORT_ATOMIC])
def test_a_pod_set_of_two_billion_pods_is_judged_without_two_billion_virtual_pods(class_name: str) -> None:
    """``count`` is an int32 and cluster-autoscaler's CRD sets no maximum (Minimum=1 only): 2^31-1 is a
    request the API server stores. Each pod was a virtual pod of every plan, two billion of them: the
    plan ran out of memory, every minute. (Found by review: input fuzzing.) Now a set is planned as at
    most one pod more than the cluster could ever hold, and the request gets what its full count gets:
    not found in free room (check-capacity), impossible for every group (atomic); nothing launched."""
    w, _ = cpu_world(nodes=1, max_size=2)
    count = 2**31 - 1
    result = run(w, [request("r", class_name, [("t", count)])], [template("t")])

    got = conds(result)
    if class_name == CHECK_CAPACITY:
        assert got["Provisioned"] == ("False", "CapacityIsNotFound")
    else:
        assert got["Failed"] == ("True", "CapacityCannotBeProvisioned")
    assert f"{count} pod(s)" in result.provisioning[0].conditions[-1]["message"]
    assert result.scale_up == ()


# --- ended requests are deleted a week on (cluster-autoscaler processors/provreq/processor.go,
# DeleteOldProvReqs: Provisioned or Failed True whose lastTransitionTime is over 7 days old) ---------


def cond(type_: str, status: str, reason: str, at: datetime) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": "", "observedGeneration": 1,
            "lastTransitionTime": at.isoformat().replace("+00:00", "Z")}  # fmt: skip


def test_a_request_that_ended_over_a_week_ago_is_deleted_and_a_younger_one_kept() -> None:
    w, _ = cpu_world(nodes=1)
    week = timedelta(days=7)
    old_fail = request("old-fail", CHECK_CAPACITY, [("t", 1)], created=NOW - 2 * week,
                       conditions=[cond("Failed", "True", "Expired", NOW - week - timedelta(minutes=1))])  # fmt: skip
    young_fail = request("young-fail", CHECK_CAPACITY, [("t", 1)], created=NOW - 2 * week,
                         conditions=[cond("Failed", "True", "Expired", NOW - week + timedelta(minutes=1))])  # fmt: skip
    old_booked = request("old-booked", BEST_EFFORT_ATOMIC, [("t", 1)], created=NOW - 2 * week,
                         conditions=[cond("Provisioned", "True", "CapacityIsFound", NOW - week - timedelta(hours=1)),
                                     cond("BookingExpired", "True", "CapacityBookingConsumed", NOW - week)])  # fmt: skip
    other = request("other", "queued-provisioning.gke.io", [("t", 1)], created=NOW - 2 * week,
                    conditions=[cond("Failed", "True", "Expired", NOW - 2 * week)])  # fmt: skip
    result = run(w, [old_fail, young_fail, old_booked, other], [template("t")])

    deleted = {(d.name, d.uid) for d in result.provisioning_deleted}
    assert deleted == {("old-fail", "uid-old-fail"), ("old-booked", "uid-old-booked")}
    assert all("7 days" in d.reason for d in result.provisioning_deleted)
    assert [d["request"] for d in result.to_dict()["provisioning_deleted"]] == [
        "default/old-booked", "default/old-fail"
    ]  # fmt: skip


def test_a_request_read_through_v1beta1_is_answered_and_deleted_through_v1beta1() -> None:
    """cluster-autoscaler's CRD served v1beta1 alone before v1 (apis/provisioningrequest/autoscaling.x-k8s.io/
    v1beta1/types.go, introduced 1.29.0). A request keeps the version it was read through (its own
    apiVersion, else the one listed), across the snapshot the plan function loads, and its status write
    and its deletion name it: through v1 they would answer 404 there, counted gone, the request never
    answered. A v1 request's snapshot entry is as before (no version written)."""
    w, _ = cpu_world(nodes=1)
    week = timedelta(days=7)
    answered = request("r", CHECK_CAPACITY, [("t", 1)])
    ended = request("ended", CHECK_CAPACITY, [("t", 1)], created=NOW - 2 * week,
                    conditions=[cond("Failed", "True", "Expired", NOW - week - timedelta(minutes=1))])  # fmt: skip
    listed = copy.deepcopy([answered, ended])
    for raw in listed:
        del raw["apiVersion"]  # list items of a typed list may carry none: the version listed holds
    infos = request_infos(listed, [template("t")], "v1beta1")
    assert {i.version for i in infos} == {"v1beta1"}
    assert [i.version for i in request_infos([answered], [template("t")], "v1beta1")] == ["v1"]
    snapshot, groups, cfg, state = w.parsed()
    snapshot = ClusterSnapshot.from_dict(replace(snapshot, provreqs=infos).to_dict())

    result = plan(snapshot, groups, cfg, state, NOW)

    assert [(u.name, u.version) for u in result.provisioning] == [("r", "v1beta1")]
    assert [(d.name, d.version) for d in result.provisioning_deleted] == [("ended", "v1beta1")]
    assert "v" not in request_infos([answered], [template("t")])[0].to_dict()


@pytest.mark.parametrize(
    "written",
    [
        lambda at: at.isoformat().replace("+00:00", "z").replace("T", "t"),  # RFC 3339 allows lowercase
        lambda at: at.replace(tzinfo=None).isoformat(),  # no offset: read as UTC
    ],
    ids=["lowercase", "no-offset"],
)
def test_an_ended_requests_time_is_read_however_rfc_3339_lets_it_be_written(written: Any) -> None:
    """A custom resource's status holds its condition times as written: a lowercase ``t``/``z`` (RFC 3339
    section 5.6) was read as no time, so a request that ended over a week ago was never deleted."""
    w, _ = cpu_world(nodes=1)
    ended = cond("Failed", "True", "Expired", NOW - timedelta(days=8))
    ended["lastTransitionTime"] = written(NOW - timedelta(days=8))
    old = request("old", CHECK_CAPACITY, [("t", 1)], created=NOW - timedelta(days=9), conditions=[ended])
    result = run(w, [old], [template("t")])
    assert [d.name for d in result.provisioning_deleted] == ["old"]


def test_a_request_provisioned_long_ago_and_still_booked_is_not_deleted() -> None:
    """Only an ended request goes: one whose Provisioned=True is old but has no ending condition yet gets
    its BookingExpired from this plan, and is deleted a plan later at the earliest."""
    w, _ = cpu_world(nodes=1)
    booked = request("r", CHECK_CAPACITY, [("t", 1)], created=NOW - timedelta(days=9),
                     conditions=[cond("Provisioned", "True", "CapacityIsFound", NOW - timedelta(days=8))])  # fmt: skip
    result = run(w, [booked], [template("t")])
    assert result.provisioning_deleted == ()
    assert conds(result)["BookingExpired"][0] == "True"


# --- best-effort-atomic: the new nodes come from one node group ------------------------------------


def test_best_effort_atomic_is_never_split_over_two_groups_and_waits_as_capacity_not_found() -> None:
    """cluster-autoscaler's best-effort-atomic class scales up all or nothing within ONE node group:
    an expansion option that does not take every pod left after the room there is is dropped ("Some
    pods can't fit to %s, giving up due to all-or-nothing scale-up strategy", kubernetes/autoscaler
    cluster-autoscaler/core/scaleup/orchestrator/orchestrator.go, computeExpansionOption loop), and no
    option at all answers Provisioned=False / CapacityIsNotFound, tried again (provisioningrequest/
    besteffortatomic/provisioning_class.go, Provision). Spillway's gang launch is atomic per group
    (spillway.act.gang): split over two groups, one launch may succeed and the other fail, leaving
    half a gang of nodes. Three one-node pods, two groups of MaxSize 2: the plan opened 2 + 1."""
    w = World()
    w.group("a-cpu", "m5.2xlarge", nodes=0, max_size=2)
    w.group("b-cpu", "m5.2xlarge", nodes=0, max_size=2)
    result = run(w, [request("r", BEST_EFFORT_ATOMIC, [("a", 3)])], [template("a")])

    assert result.scale_up == (), scale_up(result)
    got = conds(result)
    assert "Failed" not in got  # MaxSize 2 + 2 holds it were one group's nodes running: it may yet fit
    assert got["Provisioned"] == ("False", "CapacityIsNotFound")
    assert "one node group" in result.provisioning[0].conditions[1]["message"]


def test_best_effort_atomic_goes_whole_to_the_one_group_that_holds_it_not_the_preferred_one() -> None:
    """The expander chooses among the options that hold every pod (orchestrator.go: options that do
    not are dropped before ExpanderStrategy.BestOption): a-small ranks first but holds one of the three
    pods, so all three go to b-big. The plan put one on a-small and two on b-big."""
    w = World()
    w.group("a-small", "m5.2xlarge", nodes=0, max_size=1)
    w.group("b-big", "m5.2xlarge", nodes=0, max_size=5)
    priorities = {50: ["^a-"], 10: ["^b-"]}
    result = run(w, [request("r", BEST_EFFORT_ATOMIC, [("a", 3)])], [template("a")],
                 expander_priorities=priorities)  # fmt: skip

    assert set(scale_up(result)) == {"b-big"}
    assert scale_up(result)["b-big"][:2] == (0, 3)
    assert conds(result)["Provisioned"] == ("False", "CapacityIsLaunching")


def test_a_consumer_nominated_to_a_node_is_not_booked_again_beside_its_nominated_room() -> None:
    """A booked request's consumer that kube-scheduler nominated to a node (status.nominatedNodeName:
    it preempts there) has its room held there already, for it alone (Context.nominated_withheld); the
    booking holds room for the pods still to come, as it does for consumers already bound. It booked
    that consumer's room a second time: three one-pod nodes, a request of two booked, one consumer
    nominated to the first node, and a pending pod of the same size launched a node though the third
    was free for it."""
    w, names = cpu_world(nodes=3)
    (consumer,) = w.pods(
        "job", 1, **BIG, annotations={"autoscaling.x-k8s.io/consume-provisioning-request": "r"}
    )
    w.pod_item(consumer)["status"]["nominatedNodeName"] = names[0]
    (web,) = w.pods("web", 1, **BIG)
    req = request("r", CHECK_CAPACITY, [("t", 2)], conditions=_booked())

    result = run(w, [req], [template("t")])

    assert scale_up(result) == {}, scale_up(result)  # consumer on its node, one booked pod, web free room
    assert pending_codes(result)[consumer] == "nominated"
    assert pending_codes(result)[web] == "fits-free-room"
    assert all(u.name != "r" for u in result.provisioning)  # the booking holds, unchanged


def eight_groups_counting_trials(
    monkeypatch: pytest.MonkeyPatch, max_size: int
) -> tuple[World, list[str | None]]:
    """Eight equal empty groups, and the list each trial of a gang appends its one group to."""
    from spillway.planner import scaleup

    w = World()
    for i in range(8):
        w.group(f"g{i}-cpu", "m5.2xlarge", nodes=0, max_size=max_size)
    trials: list[str | None] = []
    real = scaleup.GangPlacement._try

    def counted(self: scaleup.GangPlacement) -> tuple[str, str] | None:
        trials.append(self.stage.group.name if self.stage.group is not None else None)
        return real(self)

    monkeypatch.setattr(scaleup.GangPlacement, "_try", counted)
    return w, trials


def test_a_request_no_one_group_holds_tries_only_the_groups_that_could(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each group is a trial of the whole gang on a checkpoint of every node (save, place, restore), and
    a request no group can take is tried again on every plan: on a 5,000-node cluster of 50 groups ten
    such requests took the plan from 1.2 s to 11 s. What the gang leaves over once free room and
    launching capacity are counted (one trial with new nodes nowhere) is what the one group must open
    nodes for: a group too small for it, or whose nodes cannot hold its pods, is not tried. Eight groups
    of MaxSize 1 and a request of three one-node pods: the first group and that one trial, not eight."""
    w, trials = eight_groups_counting_trials(monkeypatch, max_size=1)
    result = run(w, [request("r", BEST_EFFORT_ATOMIC, [("a", 3)])], [template("a")])

    assert conds(result)["Provisioned"] == ("False", "CapacityIsNotFound")
    assert "one node group" in result.provisioning[0].conditions[1]["message"]
    assert len(trials) <= 2, trials


# --- best-effort-atomic: the one group is the expander's best WHOLE option ------------------------
#
# cluster-autoscaler's ScaleUp (core/scaleup/orchestrator/orchestrator.go) computes one expansion option
# per node group for all the request's pods (ComputeExpansionOption: the estimator bin-packs every pod
# set into new nodes of that group), drops those that do not take every pod (allOrNothing), and has the
# expander pick among the rest (ExpanderStrategy.BestOption). So the expander judges the whole option:
# least-waste on all its pods and all its nodes (expander/waste/waste.go), priority on its group
# (expander/priority/priority.go). Spillway tried the groups in the expander's order for the FIRST
# pod set and took the first that held them all.


def selecting(name: str, selector: dict[str, str], **requests: str) -> dict[str, Any]:
    """A PodTemplate whose pods run only on nodes carrying ``selector``."""
    raw = template(name, **requests)
    raw["template"]["spec"]["nodeSelector"] = selector
    return raw


def test_best_effort_atomic_goes_to_the_group_wasting_least_for_the_whole_request() -> None:
    """Two leads of 3.5 CPU and three workers of 2. For the leads alone an m5.xlarge group wastes less
    (two nodes, 7 of 7.84 CPU) than an m5.2xlarge one (one node, 7 of 7.91); for the whole request the
    m5.xlarge group needs five nodes (a worker fits beside no lead: 13 of 19.6 CPU, a third wasted) and
    the m5.2xlarge one two (13 of 15.8). cluster-autoscaler's least-waste expander scores each group's
    whole option, so it takes the m5.2xlarge group. The plan took a-small, the first group for the leads
    that held everything: five nodes."""
    w = World()
    w.group("a-small", "m5.xlarge", nodes=0, max_size=10)
    w.group("b-large", "m5.2xlarge", nodes=0, max_size=10)
    req = request("r", BEST_EFFORT_ATOMIC, [("lead", 2), ("work", 3)])
    result = run(
        w, [req], [template("lead", cpu="3500m", memory="1Gi"), template("work", cpu="2", memory="1Gi")]
    )

    assert {g: ft[:2] for g, ft in scale_up(result).items()} == {"b-large": (0, 2)}, scale_up(result)
    (gang,) = result.scale_up[0].gangs
    assert gang.nodes == 2 and len(gang.pods) == 5
    assert conds(result)["Provisioned"] == ("False", "CapacityIsLaunching")


def test_best_effort_atomic_honours_the_priority_of_a_group_only_a_later_pod_set_may_use() -> None:
    """The priority expander ranks the whole option by its group (expander_priorities, as
    cluster-autoscaler's expander/priority/priority.go). The lead runs only on low's nodes (its selector)
    and fits the free room of low's one node; the workers may use either group. Both groups hold the
    whole request; high has the higher priority, so the workers' nodes come from high. The plan tried
    the groups in the lead's order, where high does not appear, and took low."""
    w = World()
    w.group("low", "m5.2xlarge", nodes=1, max_size=10, labels={"pool": "lead"})
    w.group("high", "m5.2xlarge", nodes=0, max_size=10)
    req = request("r", BEST_EFFORT_ATOMIC, [("lead", 1), ("work", 2)])
    templates = [selecting("lead", {"pool": "lead"}, cpu="7", memory="1Gi"), template("work")]
    result = run(w, [req], templates, expander_priorities={50: ["^high$"], 10: ["^low$"]})

    assert {g: ft[:2] for g, ft in scale_up(result).items()} == {"high": (0, 2)}, scale_up(result)
    assert conds(result)["Provisioned"] == ("False", "CapacityIsLaunching")


def test_best_effort_atomic_prefers_the_group_whose_warm_pool_holds_all_its_new_nodes() -> None:
    """Two equal groups; the lead needs one node and the worker another. a's warm pool (one instance)
    holds the lead's node, b's (two) holds both: the whole option's two nodes start warm only in b.
    The plan took a, whose warm pool held the first pod set's one node."""
    w = World()
    w.group("a", "m5.2xlarge", nodes=0, max_size=10)
    w.group("b", "m5.2xlarge", nodes=0, max_size=10)
    snapshot, groups, cfg, state = w.parsed()
    warm = {"a": 1, "b": 2}
    groups = [replace(g, warm_instances=warm[g.name]) for g in groups]
    req = request("r", BEST_EFFORT_ATOMIC, [("lead", 1), ("work", 1)])
    templates = [template("lead", cpu="7", memory="2Gi"), template("work", cpu="7", memory="1Gi")]
    snapshot = replace(snapshot, provreqs=request_infos([req], templates))
    result = plan(snapshot, groups, cfg, state, NOW)

    assert {g: ft[:2] for g, ft in scale_up(result).items()} == {"b": (0, 2)}, scale_up(result)


def test_best_effort_atomic_equal_whole_options_go_to_the_first_group_by_name() -> None:
    """cluster-autoscaler breaks ties at random (expander/random/random.go); Spillway's plan is
    deterministic, so the group's name decides."""
    w = World()
    w.group("b", "m5.2xlarge", nodes=0, max_size=10)
    w.group("a", "m5.2xlarge", nodes=0, max_size=10)
    result = run(w, [request("r", BEST_EFFORT_ATOMIC, [("t", 2)])], [template("t")])

    assert {g: ft[:2] for g, ft in scale_up(result).items()} == {"a": (0, 2)}, scale_up(result)


def test_best_effort_atomic_passes_over_the_best_option_a_limit_cuts_to_the_next_whole_one() -> None:
    """Where cluster-autoscaler's all-or-nothing stops short: its expander picks an option before the
    cluster-wide limits are applied (orchestrator.go ScaleUp: BestOption, then applyLimits), and when
    they cut it ("Not attempting scale-up due to all-or-nothing strategy") the scale-up is refused,
    though another group held every pod within them; the request stays CapacityIsNotFound every loop.
    Spillway applies the limits while it computes each option, so an option they cut is no option and
    the next holds the request. Three pods of 2.5 CPU: high (m5.xlarge, one a node) needs three nodes,
    12 cores past cores_total's 10; low (m5.2xlarge) one node, 8 cores."""
    w = World()
    w.group("high", "m5.xlarge", nodes=0, max_size=10)
    w.group("low", "m5.2xlarge", nodes=0, max_size=10)
    req = request("r", BEST_EFFORT_ATOMIC, [("t", 3)])
    result = run(w, [req], [template("t", cpu="2500m", memory="1Gi")],
                 expander_priorities={50: ["^high$"], 10: ["^low$"]}, cores_total="0:10")  # fmt: skip

    assert {g: ft[:2] for g, ft in scale_up(result).items()} == {"low": (0, 1)}, scale_up(result)
    assert conds(result)["Provisioned"] == ("False", "CapacityIsLaunching")


def test_a_request_many_groups_hold_equally_is_tried_in_one_group_not_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ranking whole options must not cost a trial of the whole gang per group (a checkpoint of every
    node each): once one group holds it, a group whose best possible rank (its fewest nodes for the
    pods left over) does not beat it is not tried. Eight equal groups: one trial, of the first by name."""
    w, trials = eight_groups_counting_trials(monkeypatch, max_size=5)
    result = run(w, [request("r", BEST_EFFORT_ATOMIC, [("a", 3)])], [template("a")])

    assert {g: ft[:2] for g, ft in scale_up(result).items()} == {"g0-cpu": (0, 3)}
    assert trials == ["g0-cpu"], trials


def test_a_cluster_limit_does_not_make_a_request_try_every_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """cores_total (or max_nodes_total, a CapacityQuota) counts the nodes a gang opens, but not the free
    room, capacity already launching or nodes to uncordon its later pod sets take (only a tenant's own
    limits charge those): what each pod set leaves for new nodes is the same in every group, so the
    skipping by best possible rank holds as without limits. With the limit set every one of eight equal
    groups was tried, each trial a checkpoint of every node: on the 5,000-node bench cluster twenty
    such requests planned in 5.0 s rather than 1.9 s."""
    w, trials = eight_groups_counting_trials(monkeypatch, max_size=5)
    sets = [("a", 3), ("b", 2)]
    result = run(w, [request("r", BEST_EFFORT_ATOMIC, sets)], [template("a"), template("b", cpu="1")],
                 cores_total="0:1000", max_nodes_total=100)  # fmt: skip

    assert {g: ft[:2] for g, ft in scale_up(result).items()} == {"g0-cpu": (0, 3)}
    assert trials == ["g0-cpu"], trials

    trials.clear()  # a tenant's limits, with nothing launching: the same
    w.namespace("default", "team")
    result = run(w, [request("r", BEST_EFFORT_ATOMIC, sets)], [template("a"), template("b", cpu="1")],
                 tenants={"team": {"limits": {"cpu": "1000"}}})  # fmt: skip
    assert {g: ft[:2] for g, ft in scale_up(result).items()} == {"g0-cpu": (0, 3)}
    assert trials == ["g0-cpu"], trials


def test_best_effort_atomic_under_a_tenant_limit_counts_what_new_nodes_leave_of_launching_capacity() -> None:
    """A tenant's limits charge the fresh launching nodes its pods take, so what a later pod set leaves
    for new nodes depends on the group: team's scope over x and p holds 14 CPU. Without new nodes, the
    workers go on x's launching node (7.91 CPU). With p's three new nodes (11.76 CPU) the scope has no
    room for it, and the workers go beside the leads on p's nodes, 11.7 of 11.76 CPU used; q is outside
    the scope, and there the workers stay on x: one node, 6 of 7.91. p wastes least; were its rank
    judged on the leads alone (three nodes, half wasted) it would be passed over for q."""
    w = World()
    w.group("x", "m5.2xlarge", nodes=0, desired=1, max_size=3, labels={"pool": "b"})
    w.group("p", "m5.xlarge", nodes=0, max_size=10, labels={"pool": "a"})
    w.group("q", "m5.2xlarge", nodes=0, max_size=10, labels={"pool": "a"})
    w.namespace("default", "team")
    req = request("r", BEST_EFFORT_ATOMIC, [("lead", 3), ("work", 3)])
    templates = [
        selecting("lead", {"pool": "a"}, cpu="2", memory="1Gi"),
        template("work", cpu="1900m", memory="1Gi"),
    ]
    tenants = {"team": {"scopes": [{"node_groups": ["x", "p"], "limits": {"cpu": "14"}}]}}
    result = run(w, [req], templates, tenants=tenants)

    assert {g: ft[:2] for g, ft in scale_up(result).items()} == {"p": (0, 3)}, scale_up(result)


SPREAD_ZONES = {
    "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "w"}}}
    ]
}  # fmt: skip


def _random_request_world(
    rng: random.Random,
) -> tuple[World, dict[str, int], list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Groups of four shapes over two pools and two regions, some busy, some with warm pools; one
    best-effort-atomic request of one to three pod sets, some pinned to a pool, spread over zones or one
    per node; sometimes a cores limit or priorities."""
    w = World()
    warm: dict[str, int] = {}
    for i in range(rng.randint(3, 7)):
        itype = rng.choice(["m5.xlarge", "m5.2xlarge", "g5.xlarge", "g5.12xlarge"])
        name, nodes = f"g{i}-{itype.replace('.', '')}", rng.randint(0, 2)
        w.group(name, itype, nodes=nodes, max_size=nodes + rng.randint(0, 10), desired=nodes + rng.choice([0, 0, 1]),
                region=rng.choice(["us-east-1", "us-east-1", "us-west-2"]), labels={"pool": rng.choice("ab")})  # fmt: skip
        warm[name] = rng.choice([0, 0, rng.randint(1, 4)])
        if nodes and rng.random() < 0.5:
            w.pods(f"busy{i}", rng.randint(1, 3), cpu=rng.choice(["1", "2", "3"]), memory="1Gi")
    sets, templates = [], []
    for j in range(rng.randint(1, 3)):
        requests = {"cpu": rng.choice(["500m", "1", "2", "3500m", "5", "7"]),
                    "memory": rng.choice(["1Gi", "4Gi", "12Gi", "25Gi"])}  # fmt: skip
        raw = selecting(f"t{j}", {"pool": rng.choice("ab")}, **requests) if rng.random() < 0.15 else None
        raw = raw or template(f"t{j}", **requests)
        shape = rng.random()
        if shape < 0.3:
            raw["template"]["metadata"] = {"labels": {"app": "w"}}
            raw["template"]["spec"].update(SPREAD_ZONES if shape < 0.15 else {"affinity": ONE_PER_NODE})
        templates.append(raw)
        sets.append((f"t{j}", rng.randint(1, 6)))
    config: dict[str, Any] = {}
    if rng.random() < 0.2:
        config["cores_total"] = f"0:{rng.randint(8, 60)}"
    if rng.random() < 0.3:
        config["expander_priorities"] = {50: [rng.choice(["g0", "g1", "g2"])], 10: [".*"]}
    return w, warm, [request("r", BEST_EFFORT_ATOMIC, sets)], templates, config


def test_skipping_groups_that_cannot_beat_the_best_option_plans_as_trying_every_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The skips (a group that cannot hold what free room leaves over, one whose best possible rank does
    not beat the option found) change no plan: random worlds plan the same with every group tried (but
    for which group's refusal a request that no group holds reports first)."""
    from spillway.planner import scaleup

    def planned(args: tuple[World, dict[str, int], list[Any], list[Any], dict[str, Any]]) -> str:
        w, warm, reqs, templates, config = args
        snapshot, groups, cfg, state = w.parsed(**config)
        groups = [replace(g, warm_instances=warm[g.name]) for g in groups]
        snapshot = replace(snapshot, provreqs=request_infos(reqs, templates))
        text = json.dumps(plan(snapshot, groups, cfg, state, NOW).to_dict(), sort_keys=True, default=str)
        return re.sub(r"; first: [^\"]*", "; first: ...", text)

    rng = random.Random(7)
    worlds = [_random_request_world(rng) for _ in range(150)]
    skipping = [planned(args) for args in worlds]
    monkeypatch.setattr(scaleup.OneGroup, "_may_hold", lambda self, group, admitted: True)
    monkeypatch.setattr(
        scaleup.OneGroup,
        "_bound",
        lambda self, group: self.stage.expander.whole_key(self.stage.ctx, self._option(group, 0, {})),
    )
    every = [planned(args) for args in worlds]

    assert sum('"gangs": [{' in text for text in every) >= 20  # some worlds launch a gang
    assert [i for i, (a, b) in enumerate(zip(skipping, every, strict=True)) if a != b] == []


def test_best_effort_atomic_judges_a_group_by_the_spread_cap_free_room_leaves_new_nodes(
    tmp_path: Path,
) -> None:
    """A hostname spread (maxSkew 1) over high's two nodes: each has room for one pod, so free room
    takes two and the least loaded node then runs one; a new node may take two (maxSkew above it), and
    the four pods left need two new nodes, high's room below MaxSize. high holds the request, and has
    the higher priority. The check for which groups could hold the pods left read the spread's cap
    before free room raised it (one a node: four nodes, past high's room) and launched in low."""
    w = World()
    names = w.group("high", "m5.2xlarge", nodes=2, max_size=4)
    w.group("low", "m5.2xlarge", nodes=0, max_size=10)
    for i, node in enumerate(names):
        w.pods(f"busy{i}", 1, cpu="5", memory="1Gi", node_name=node)
    raw = template("t", cpu="2", memory="1Gi")
    raw["template"]["metadata"] = {"labels": {"app": "h"}}
    raw["template"]["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "h"}}}
    ]  # fmt: skip
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(o.kube_list([*w.items, request("r", BEST_EFFORT_ATOMIC, [("t", 6)]), raw])))
    _, groups, cfg, state = w.parsed(expander_priorities={50: ["^high$"], 10: ["^low$"]})
    result = plan(load_cluster(path, w.cluster, NOW), groups, cfg, state, NOW)

    assert {g: ft[:2] for g, ft in scale_up(result).items()} == {"high": (2, 4)}, scale_up(result)
    assert conds(result)["Provisioned"] == ("False", "CapacityIsLaunching")


# --- the skips against every group tried: random worlds whose pod topology is matched -------------
#
# The random worlds above build the requests' pods without the cluster's pod topology (request_infos
# alone), so their spreads and anti-affinity terms do nothing. These are read as `spillway plan` reads
# a List (the templates' pods matched), and each OneGroup is checked against a trial of every group it
# may use: a group that holds the request must not be skipped by _may_hold, its bound must not rank
# after its option, and when the probe says it knows every pod new nodes get, they must get those.


def _topology(rng: random.Random, raw: dict[str, Any], app: str) -> None:
    """A hostname spread, a zone spread, one per node, or none, over pods labelled ``app``."""
    spec, shape = raw["template"]["spec"], rng.random()
    raw["template"]["metadata"] = {"labels": {"app": app}}
    selector = {"matchLabels": {"app": app}}
    if shape < 0.5:
        key = "kubernetes.io/hostname" if shape < 0.3 else "topology.kubernetes.io/zone"
        spec["topologySpreadConstraints"] = [{"maxSkew": rng.choice([1, 2]) if shape < 0.3 else 1,
            "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}]  # fmt: skip
    elif shape < 0.65:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}]}}  # fmt: skip


def _matched_world(rng: random.Random) -> tuple[World, dict[str, Any], list[Any], list[Any], dict[str, Any]]:
    """Groups in zones a to c (the first launching, outside pool a), nodes with a pod that the spreads
    may count, spot groups and warm pools; pod sets spread over hosts or zones, one per node, the first
    kept to pool a; a tenant's scope over the launching group and others, cores_total, priorities."""
    w = World()
    tweaks: dict[str, Any] = {}
    names: list[str] = []
    for i in range(rng.randint(2, 5)):
        itype, nodes, region = rng.choice(["m5.xlarge", "m5.2xlarge", "m5.2xlarge", "g5.xlarge"]), rng.choice([0, 0, 1, 2]), rng.choice(["us-east-1"] * 3 + ["us-west-2"])  # fmt: skip
        names.append(f"g{i}")
        made = w.group(f"g{i}", itype, nodes=nodes, max_size=nodes + rng.randint(1, 5),
                       desired=nodes + (1 if i == 0 else rng.choice([0, 0, 0, 1])), region=region,
                       zones=[f"{region}{rng.choice('abc')}"], labels={"pool": "b" if i == 0 else rng.choice("aab")})  # fmt: skip
        for j, node in enumerate(made):
            if rng.random() < 0.8:
                w.pods(f"run{i}x{j}", 1, cpu=rng.choice(["1", "2", "3", "5", "6"]), memory="1Gi", node_name=node,
                       labels={"app": rng.choice(["h", "z"])})  # fmt: skip
        tweaks[f"g{i}"] = {"warm_instances": rng.choice([0, 0, rng.randint(1, 3)]), "on_demand_base": rng.choice([0, 0, 1]),
                           "capacity_type": rng.choice(["on-demand", "on-demand", "on-demand", "spot"])}  # fmt: skip
    sets, templates = [], []
    for j in range(rng.randint(1, 3)):
        raw = template(
            f"t{j}", cpu=rng.choice(["1", "1900m", "2", "3", "3500m", "5"]), memory=rng.choice(["1Gi", "6Gi"])
        )
        _topology(rng, raw, rng.choice(["h", f"t{j}"]))
        if j == 0 and rng.random() < 0.5:
            raw["template"]["spec"]["nodeSelector"] = {"pool": "a"}
        templates.append(raw)
        sets.append((f"t{j}", rng.randint(2, 6)))
    config: dict[str, Any] = {}
    if rng.random() < 0.5:
        w.namespace("default", "team")
        scope = ["g0", *rng.sample(names[1:], rng.randint(0, len(names) - 1))]
        config["tenants"] = {
            "team": {"scopes": [{"node_groups": scope, "limits": {"cpu": str(rng.randint(6, 30))}}]}
        }
    if rng.random() < 0.15:
        config["cores_total"] = f"0:{rng.randint(8, 60)}"
    if rng.random() < 0.3:
        config["expander_priorities"] = {50: [rng.choice(names)], 10: [".*"]}
    return w, tweaks, [request("r", BEST_EFFORT_ATOMIC, sets)], templates, config


def _launching_world(
    rng: random.Random,
) -> tuple[World, dict[str, Any], list[Any], list[Any], dict[str, Any]]:
    """A group launching (or not) outside the leads' pool a, groups in it, a tenant's scope over it and
    some of them: new nodes for the leads may leave the scope no room for the workers on it."""
    w = World()
    w.group(
        "x",
        rng.choice(["m5.xlarge", "m5.2xlarge"]),
        desired=rng.randint(0, 2),
        max_size=3,
        labels={"pool": "b"},
    )
    names = [f"p{i}" for i in range(rng.randint(2, 4))]
    for name in names:
        w.group(
            name, rng.choice(["m5.xlarge", "m5.2xlarge"]), max_size=rng.randint(1, 6), labels={"pool": "a"}
        )
    w.namespace("default", "team")
    lead = selecting("lead", {"pool": "a"}, cpu=rng.choice(["1", "2", "3"]), memory="1Gi")
    work = template("work", cpu=rng.choice(["1", "1900m", "3"]), memory="1Gi")
    req = request("r", BEST_EFFORT_ATOMIC, [("lead", rng.randint(1, 4)), ("work", rng.randint(1, 4))])
    scope = {
        "node_groups": ["x", *rng.sample(names, rng.randint(1, len(names)))],
        "limits": {"cpu": str(rng.randint(6, 24))},
    }
    warm = {name: {"warm_instances": rng.choice([0, 0, 2])} for name in names}
    return w, warm, [req], [lead, work], {"tenants": {"team": {"scopes": [scope]}}}


def _matched_plan(args: tuple[World, dict[str, Any], list[Any], list[Any], dict[str, Any]]) -> ScalingPlan:
    from spillway.model import provreq
    from spillway.model.k8s import iter_kube_list

    w, tweaks, reqs, templates, config = args
    doc = o.kube_list([*w.items, *reqs, *templates])
    snapshot = ClusterSnapshot.from_objects(
        w.cluster, NOW, iter_kube_list(doc), provreqs=provreq.from_list(doc)
    )
    _, groups, cfg, state = w.parsed(**config)
    return plan(snapshot, [replace(g, **tweaks.get(g.name, {})) for g in groups], cfg, state, NOW)


def test_no_group_that_holds_a_request_is_skipped_or_bounded_past_its_option(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every group tried alone beside what OneGroup's probe tells (its checks, then the plan as it is):
    a hostname spread's cap read after the probe's rollback, pods known exactly under a tenant's scope
    with capacity launching, or across zone rounds, each made a group that holds skipped or its bound
    rank past its option here."""
    from spillway.planner import scaleup
    from spillway.planner.expander import class_not_movable

    wrong: list[str] = []
    real = scaleup.OneGroup.run

    def checked(self: scaleup.OneGroup) -> tuple[bool, tuple[str, str] | None]:
        placement = self.placement
        groups, admitted = placement._candidates(self.region, self.zone)
        able = self._probe(groups, admitted) if len(groups) > 1 else None
        if able is not None:
            if any(g.spot for g in groups):
                self.movable = all(class_not_movable(self.stage.ctx, c) is None for c in placement.classes)
            exact, known = self.exact, {id(c): n for c, n in self.known}
            bounds = {g.name: self._bound(g) for g in groups}
            for group in groups:
                failure, saved = placement._attempt(self.region, self.zone, group.key)
                if failure is not None:
                    continue
                self.exact = exact
                key = self._placed_key(group)
                placement._restore(saved)
                if group not in able:
                    wrong.append(f"{group.name} holds it, skipped")
                if bounds[group.name] > key:
                    wrong.append(f"{group.name}: bound {bounds[group.name]} > {key}")
                if exact and not self.exact:
                    wrong.append(f"{group.name}: new nodes got other pods than {known}")
            self.exact, self.bounds, self.known, self.per_node = False, {}, [], {}
        return real(self)

    monkeypatch.setattr(scaleup.OneGroup, "run", checked)
    rng = random.Random(11)
    launched = 0
    for i in range(300):
        world = (_matched_world if i % 2 else _launching_world)(rng)
        launched += any(s.gangs for s in _matched_plan(world).scale_up)
        assert wrong == [], (i, wrong)
    assert launched >= 20


def test_a_requests_pods_stand_at_their_templates_spec_priority_not_at_its_class() -> None:
    """cluster-autoscaler makes a request's pods from its PodTemplates (provisioningrequest/pods/pods.go,
    PodsForProvisioningRequest: controller.GetPodFromTemplate copies template.spec, and SetDefaults_Pod
    sets no priority), and nothing resolves a priorityClassName the template names: the Priority
    admission plugin sets spec.priority only on the Pods it admits. Its pods stand at the template's
    spec.priority, 0 without one, whatever class it names, and so do Spillway's (README,
    ProvisioningRequest)."""
    named = template("t")
    named["template"]["spec"]["priorityClassName"] = "high"
    valued = template("u")
    valued["template"]["spec"].update(priorityClassName="high", priority=5)
    [info] = request_infos([request("r", CHECK_CAPACITY, [("t", 1), ("u", 1)])], [named, valued])

    assert [s.pod.priority if s.pod else None for s in info.pod_sets] == [0, 5]


@pytest.mark.parametrize("class_name", [CHECK_CAPACITY, BEST_EFFORT_ATOMIC])
def test_a_request_counts_the_room_of_every_pod_below_the_cutoff_whatever_its_templates_priority(
    class_name: str,
) -> None:
    """expendable_priority_cutoff 100 and a backfill pod at 50 filling the one node; the template has no
    priority (0, as a PodTemplate never gets its class resolved). cluster-autoscaler books on a
    snapshot without every scheduled pod below the cutoff (core/static_autoscaler.go,
    FilterOutExpendablePods), whatever the request's pods' priority, and kube-scheduler preempts the
    backfill pod for every consumer that is not expendable itself: such a consumer stands at 100 or
    more. Spillway counted only victims below the template's 0: the check-capacity request was
    CapacityIsNotFound and the atomic one launched a node, with the room right there."""
    w, names = cpu_world(nodes=1)
    w.items.append(
        o.pod(
            "backfill-0", cpu="6", memory="1Gi", node_name=names[0], priority=50, owner=("ReplicaSet", "bf")
        )
    )
    req = request("r", class_name, [("a", 1)])

    result = run(w, [req], [template("a", cpu="4", memory="2Gi")], expendable_priority_cutoff=100)

    assert conds(result)["Provisioned"] == ("True", "CapacityIsFound")
    assert result.scale_up == ()
    assert result.state.bookings["default/r"].nodes == (names[0],)


def test_a_request_and_a_podgroup_of_the_same_name_are_two_gangs_not_one() -> None:
    """A best-effort-atomic ProvisioningRequest ``default/r`` and a coscheduling PodGroup ``default/r``
    (minMember 2) are two gangs: each is placed all or none on its own, launched under its own key, and
    held by its own launch. Both used to be keyed ``default/r``: the request's pods took the PodGroup's
    minimum and members, and the two were placed (and launched) as one gang."""
    w = atomic_world()
    w.pod_group("scheduling.x-k8s.io/v1alpha1", "r", spec={"minMember": 2})
    members = w.pods("r", 2, labels={"scheduling.x-k8s.io/pod-group": "r"}, **BIG)
    result = run(w, [request("r", BEST_EFFORT_ATOMIC, [("a", 1)])], [template("a")])

    (up,) = result.scale_up
    by_gang = {g.gang: g.nodes for g in up.gangs}
    assert by_gang == {"default/r": 2, "ProvisioningRequest/default/r": 1}
    assert set(result.state.gangs) == set(by_gang)
    assert {p.pod for p in result.placements if p.pod in members} == set(members)


def old_key_state(since: datetime) -> dict[str, Any]:
    """A state the release before requests' gangs were keyed ``ProvisioningRequest/<ns>/<name>`` wrote:
    its launch of request ``default/r`` (two nodes in cpu-east) under the request's bare key."""
    entry = {"group": "cpu-east", "region": "us-east-1", "count": 2, "since": since.isoformat()}
    return {"nodes": {}, "groups": {}, "gangs": {"default/r": entry}}


def test_a_request_launch_an_older_build_keyed_by_its_bare_name_is_not_made_again() -> None:
    """An upgrade mid-launch: the previous release recorded the request's gang launch as ``default/r``.
    The launch is still under way (fleet mode: the group shows nothing launching until the attach), so
    the plan holds it as before the deploy: no second launch of the whole gang, the entry carried on
    under the new key. It was read under ``ProvisioningRequest/default/r`` only: the request's gang was
    launched again (two more nodes) and the old entry dropped."""
    w = atomic_world()
    raw = request("r", BEST_EFFORT_ATOMIC, [("a", 2)])
    launching = [condition("Accepted", "True", "Accepted", NOW - timedelta(minutes=2)),
                 condition("Provisioned", "False", "CapacityIsLaunching", NOW - timedelta(minutes=2))]  # fmt: skip
    raw["status"]["conditions"] = launching
    w.state = old_key_state(NOW - timedelta(minutes=2))

    result = run(w, [raw], [template("a")])

    assert result.scale_up == ()  # before: cpu-east 0 -> 2 again
    assert conds(result)["Provisioned"] == ("False", "CapacityIsLaunching")
    assert result.pending == ()
    entry = result.state.gangs["ProvisioningRequest/default/r"]
    assert (entry.group, entry.count, entry.since) == ("cpu-east", 2, NOW - timedelta(minutes=2))
    assert "default/r" not in result.state.gangs


def test_a_bare_key_launch_entry_past_its_window_does_not_hold_the_request() -> None:
    """The old entry means what it meant: past ``gang_launch_minutes`` it holds nothing, and the request
    is launched (once, under its new key)."""
    w = atomic_world()
    w.state = old_key_state(NOW - timedelta(minutes=60))

    result = run(w, [request("r", BEST_EFFORT_ATOMIC, [("a", 2)])], [template("a")])

    assert scale_up(result)["cpu-east"][:2] == (0, 2)
    assert set(result.state.gangs) == {"ProvisioningRequest/default/r"}


def test_a_podgroups_launch_entry_is_not_taken_for_a_request_of_another_name() -> None:
    """Only the request's own bare key is read for it: a PodGroup ``default/train``'s entry does not hold
    request ``default/r``."""
    w = atomic_world()
    state = old_key_state(NOW - timedelta(minutes=2))
    state["gangs"] = {"default/train": state["gangs"]["default/r"]}
    w.state = state

    result = run(w, [request("r", BEST_EFFORT_ATOMIC, [("a", 2)])], [template("a")])

    assert scale_up(result)["cpu-east"][:2] == (0, 2)


def test_a_bare_key_launch_entry_holds_a_request_and_a_podgroup_of_its_name_as_it_did() -> None:
    """The previous release placed request ``default/r`` and PodGroup ``default/r`` as one gang and
    recorded their launch as ``default/r``: while it is under way neither is launched again."""
    w = atomic_world()
    w.pod_group("scheduling.x-k8s.io/v1alpha1", "r", spec={"minMember": 2})
    members = w.pods("r", 2, labels={"scheduling.x-k8s.io/pod-group": "r"}, **BIG)
    w.state = old_key_state(NOW - timedelta(minutes=2))

    result = run(w, [request("r", BEST_EFFORT_ATOMIC, [("a", 1)])], [template("a")])

    assert result.scale_up == ()
    assert {pending_codes(result)[p] for p in members} == {codes.GANG_LAUNCHING}
    assert set(result.state.gangs) == {"default/r", "ProvisioningRequest/default/r"}
