"""Gangs launched atomically: the plan records them in its state, and later plans do not launch them
again while the launch may be under way (fleet instances join the group only once all run)."""

from __future__ import annotations

from datetime import timedelta

from plan_world import NOW, World, pending_codes, pending_reasons, scale_up

from spillway.model.state import State

BIG = {"cpu": "5", "memory": "4Gi"}  # one per m5.2xlarge
COSCHED = "scheduling.x-k8s.io/v1alpha1"


def tag(w: World, group: str, mode: str) -> None:
    w.groups[group]["Tags"].append(
        {"ResourceId": group, "ResourceType": "auto-scaling-group", "Key": "spillway.io/atomic-launch",
         "Value": mode, "PropagateAtLaunch": False}
    )  # fmt: skip


def gang_world(mode: str = "fleet", **group: object) -> tuple[World, list[str]]:
    w = World()
    w.group("cpu-east", "m5.2xlarge", **group)  # type: ignore[arg-type]
    tag(w, "cpu-east", mode)
    w.pod_group(COSCHED, "train", spec={"minMember": 3})
    pods = w.pods("train", 3, labels={"scheduling.x-k8s.io/pod-group": "train"}, **BIG)
    return w, pods


def in_flight(w: World, result_state: State) -> None:
    w.state = result_state.to_wire()


def test_an_atomic_gang_launch_is_recorded_in_the_state() -> None:
    w, pods = gang_world()

    result = w.plan()

    assert scale_up(result)["cpu-east"] == (0, 3, pods)
    wire = result.state.to_wire()
    assert wire["gangs"] == {
        "default/train": {
            "group": "cpu-east",
            "region": "us-east-1",
            "count": 3,
            "since": "2026-11-02T12:00:00Z",
        }
    }
    assert State.model_validate(wire) == result.state  # the wire form loads back


def test_a_gang_on_a_group_without_the_tag_is_not_recorded() -> None:
    w, _ = gang_world(mode="off")

    result = w.plan()

    assert result.scale_up and "gangs" not in result.state.to_wire()


def test_a_gang_being_launched_is_not_launched_again() -> None:
    w, pods = gang_world()
    first = w.plan()
    in_flight(w, first.state)

    later = w.plan(now=NOW + timedelta(minutes=3))

    assert later.scale_up == ()
    assert {pending_codes(later)[p] for p in pods} == {"gang-launching"}
    reason = pending_reasons(later)[pods[0]]
    assert "gang default/train is being launched atomically in cpu-east" in reason
    assert "since 2026-11-02T12:00:00Z" in reason
    assert later.state.gangs["default/train"].since == first.state.gangs["default/train"].since


def test_other_pods_do_not_take_the_launching_capacity_a_gang_holds() -> None:
    # rollback mode: the gang raised the desired capacity to 3, no node is Ready yet
    w, pods = gang_world(mode="rollback", desired=3)
    w.state = {"nodes": {}, "groups": {}, "gangs": {"default/train": {
        "group": "cpu-east", "region": "us-east-1", "count": 3, "since": "2026-11-02T11:58:00Z"}}}  # fmt: skip
    loose = w.pods("web", 1, **BIG)

    result = w.plan()

    assert {pending_codes(result)[p] for p in pods} == {"gang-launching"}
    assert scale_up(result)["cpu-east"] == (3, 4, loose)  # a node of its own, not one of the gang's


def test_the_entry_expires_after_gang_launch_minutes_and_the_gang_is_placed_again() -> None:
    w, pods = gang_world()
    in_flight(w, w.plan().state)

    result = w.plan(now=NOW + timedelta(minutes=16))

    assert scale_up(result)["cpu-east"] == (0, 3, pods)
    assert result.state.gangs["default/train"].since == NOW + timedelta(minutes=16)
    # a shorter window is honoured too
    assert w.plan(now=NOW + timedelta(minutes=6), gang_launch_minutes=5).scale_up


def test_a_backed_off_group_drops_the_entry_and_the_gang_goes_elsewhere() -> None:
    w, pods = gang_world()
    w.group("cpu-west", "m5.2xlarge", region="us-west-2")
    state = w.plan().state.to_wire()
    state["groups"] = {"cpu-east": {"backoff_until": "2026-11-02T12:30:00Z", "reason": "gang failed"}}
    w.state = state

    result = w.plan(now=NOW + timedelta(minutes=2))

    assert scale_up(result) == {"cpu-west": (0, 3, pods)}
    assert "default/train" not in result.state.gangs  # cpu-west is not tagged: no atomic launch


def test_the_entry_is_dropped_once_the_gang_has_no_pending_pod() -> None:
    w, pods = gang_world()
    in_flight(w, w.plan().state)
    for pod in pods:  # scheduled: bound to nodes
        item = w.pod_item(pod)
        item["spec"]["nodeName"] = "somewhere"
        item["status"] = {"phase": "Running"}

    result = w.plan(now=NOW + timedelta(minutes=4))

    assert result.state.gangs == {}


def test_states_written_before_gangs_load() -> None:
    old = {"nodes": {}, "groups": {"g": {"backoff_until": "2026-11-02T12:30:00Z", "reason": "x"}}}
    assert State.model_validate(old).gangs == {}
