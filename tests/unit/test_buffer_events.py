"""A CapacityBuffer left without room hears it on the buffer, as cluster-autoscaler's users read it with
``kubectl describe capacitybuffer``: an Event ``NotTriggerScaleUp`` (type Normal) saying how many of its
fake pods have no room and why (FakePodsScaleUpStatusProcessor, processors/capacitybuffer/
scale_up_status_processor.go). Spillway said so only in the plan's ``buffers`` entry."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from plan_world import NOW, World
from test_planner_buffers import capacity_buffer, pod_template
from test_pod_events import Rig, events_of, snapshot_of

from spillway.act.events import NOT_TRIGGERED, TRIGGERED
from spillway.model.buffer import BufferInfo

UID = "0b0f1a2e-5c1d-4e0a-9d55-cafe00000001"


def short_world(*, max_size: int = 1, version: str = "v1beta1") -> World:
    """A buffer web/headroom of 8 chunks of 3 CPUs (two per m5.2xlarge) and a group of ``max_size``
    already launching that many nodes: ``2 * max_size`` chunks launching, the rest short at MaxSize, and
    nothing opened for it in the plan (:func:`opening_world` opens them)."""
    w = World(regions=("us-east-1",))
    w.group("cpu", "m5.2xlarge", max_size=max_size, desired=max_size)
    w.namespace("web")
    pod_template(w, "web")
    capacity_buffer(w, "headroom", "web", {"podTemplateRef": {"name": "tpl"}, "replicas": 8})
    w.items[-1]["metadata"]["uid"] = UID
    w.items[-1]["apiVersion"] = f"autoscaling.x-k8s.io/{version}"
    return w


def test_a_capacity_buffer_left_short_hears_why_on_the_buffer_itself() -> None:
    [event] = events_of(short_world()).events

    assert (event.kind, event.api_version) == ("CapacityBuffer", "autoscaling.x-k8s.io/v1beta1")
    assert (event.namespace, event.name, event.uid) == ("web", "headroom", UID)
    assert (event.reason, event.type) == (NOT_TRIGGERED, "Normal")
    assert event.message.startswith("capacity buffer 6 fake pods didn't trigger scale-up: 6 of 8 chunk(s)")
    assert event.message.endswith("(code: max-size)")


def test_the_event_names_the_version_the_buffer_was_read_through() -> None:
    [event] = events_of(short_world(version="v1alpha1")).events
    assert event.api_version == "autoscaling.x-k8s.io/v1alpha1"


def test_a_buffer_with_room_for_every_chunk_and_a_configured_buffer_hear_nothing() -> None:
    assert events_of(short_world(max_size=4)).events == ()

    w = World(regions=("us-east-1",))
    w.group("cpu", "m5.2xlarge", max_size=1, desired=0)
    snapshot, groups, cfg, state = w.parsed(
        buffers=[{"name": "night", "pod": {"cpu": "3", "memory": "1Gi"}, "replicas": 8}]
    )
    from spillway.act.events import EventPolicy, plan_events
    from spillway.planner import plan

    result = plan(snapshot, groups, cfg, state, NOW)
    assert result.buffers[0].short == 6  # short, but no object to post on
    assert plan_events(result, snapshot, groups, {}, EventPolicy(), NOW).events == ()


def test_a_buffer_is_told_once_per_window_under_its_own_mark_and_again_when_its_shortfall_changes() -> None:
    w = short_world()
    first = events_of(w)
    [mark] = first.ledger
    assert mark == "CapacityBuffer:web/headroom"  # no pod's key: a namespace has no ':'

    again = events_of(w, first.ledger, NOW + timedelta(minutes=5))
    assert again.events == () and again.suppressed == 1 and again.ledger == first.ledger

    fewer = events_of(short_world(max_size=2), first.ledger, NOW + timedelta(minutes=1))
    assert [e.message.split(":")[0] for e in fewer.events] == [
        "capacity buffer 4 fake pods didn't trigger scale-up"
    ]
    # once it has room, its mark goes as a pod's does when it is no longer pending
    assert events_of(short_world(max_size=4), first.ledger, NOW + timedelta(minutes=1)).ledger == {}


def test_the_snapshot_keeps_the_buffers_uid_and_version() -> None:
    info = next(b for b in snapshot_of(short_world(version="v1alpha1")).cluster.buffers)
    assert (info.uid, info.api_version) == (UID, "autoscaling.x-k8s.io/v1alpha1")
    assert BufferInfo.from_dict(info.to_dict()) == info


def test_the_plan_posts_it_on_the_buffer_after_committing() -> None:
    rig = Rig()
    ref = rig.snapshots.add(snapshot_of(short_world()))

    outcome = rig.run(ref)

    buffer_events: list[dict[str, Any]] = [e for e in rig.cluster.posted if e["kind"] == "CapacityBuffer"]
    assert [(e["namespace"], e["name"], e["uid"], e["api_version"], e["reason"]) for e in buffer_events] == [
        ("web", "headroom", UID, "autoscaling.x-k8s.io/v1beta1", NOT_TRIGGERED)
    ]
    assert outcome.events["posted"] == len(rig.cluster.posted)
    assert "CapacityBuffer:web/headroom" in rig.ledger.stored.state.events


def test_observe_keeps_the_version_it_read_the_buffer_through() -> None:
    """The Event names the version the list was served at, whatever an item says of itself."""
    from fakes import FakeCluster

    from spillway.observe import capacity_buffers

    w = short_world(version="v1alpha1")
    kube = FakeCluster(custom=[i for i in w.items if i["kind"] in ("CapacityBuffer", "PodTemplate")])

    [info] = capacity_buffers(kube).infos
    assert (info.uid, info.api_version) == (UID, "autoscaling.x-k8s.io/v1beta1")  # listed as v1beta1


def test_the_buffer_comes_after_every_pod_in_the_cap_even_one_the_scheduler_gave_no_time() -> None:
    """A pending pod whose PodScheduled condition has no lastTransitionTime (optional in the API) has
    waited an unknown time; it is still a pod, and pods go before buffers in ``max_per_plan``, whatever
    their namespaces (``web/...`` sorts after ``CapacityBuffer:...``)."""
    w = short_world()
    w.pods("job", 1, namespace="web", cpu="100", memory="1Gi")  # no group fits: NotTriggerScaleUp
    for cond in w.items[-1].get("status", {}).get("conditions", []):
        cond.pop("lastTransitionTime", None)
    both = events_of(w)
    assert sorted(e.kind for e in both.events) == ["CapacityBuffer", "Pod"]

    [first] = events_of(w, max_per_plan=1).events
    assert (first.kind, first.name) == ("Pod", "job-0")


def test_a_snapshot_written_before_buffers_kept_uid_and_version_still_posts_on_the_buffer() -> None:
    """During a deploy the new planner reads snapshots the old observe wrote: no ``u`` or ``v``. The
    Event names the buffer by the first version observe tries, and no uid."""
    from dataclasses import replace

    from spillway.act.events import EventPolicy, plan_events
    from spillway.planner import plan

    snapshot, groups, cfg, state = short_world(version="v1alpha1").parsed()
    old = []
    for b in snapshot.buffers:
        d = b.to_dict()
        assert (d.pop("u"), d.pop("v")) == (UID, "autoscaling.x-k8s.io/v1alpha1")
        old.append(BufferInfo.from_dict(d))
    snapshot = replace(snapshot, buffers=tuple(old))
    result = plan(snapshot, groups, cfg, state, NOW)
    [event] = plan_events(result, snapshot, groups, {}, EventPolicy(), NOW).events
    assert (event.kind, event.api_version, event.uid) == (
        "CapacityBuffer",
        "autoscaling.x-k8s.io/v1beta1",
        None,
    )


def test_observe_leaves_out_a_listed_buffer_that_is_no_object_and_keeps_the_others() -> None:
    """Stamping each listed buffer with the version it was read through spread it as a mapping: an
    item that is none (a list answer no API server gives, but a proxy or a bug might) raised
    TypeError and failed the whole observation, where the model refuses such an item and names it."""
    from fakes import FakeCluster

    from spillway.observe import capacity_buffers

    w = short_world()
    kube = FakeCluster(custom=[i for i in w.items if i["kind"] in ("CapacityBuffer", "PodTemplate")])
    real = kube.list_custom

    def with_junk(*args: Any, **kwargs: Any) -> Any:
        listed = real(*args, **kwargs)
        if args and "capacitybuffers" in args:
            return [*listed, "not an object"] if isinstance(listed, list) else listed
        return listed

    kube.list_custom = with_junk  # type: ignore[method-assign]
    [info] = capacity_buffers(kube).infos
    assert (info.namespace, info.name) == ("web", "headroom")


# --- TriggeredScaleUp: a buffer whose chunks open nodes ---------------------------------------------


def opening_world(*, max_size: int = 4) -> World:
    """:func:`short_world`'s buffer, but the group at 0 nodes: the plan opens nodes for its chunks
    (two per node), ``2 * max_size`` of the 8 of them, the rest short at MaxSize."""
    w = short_world(max_size=max_size)
    w.group("cpu", "m5.2xlarge", max_size=max_size, desired=0)
    return w


def test_a_buffer_whose_chunks_open_nodes_hears_which_groups_grow_on_the_buffer() -> None:
    """cluster-autoscaler's FakePodsScaleUpStatusProcessor posts TriggeredScaleUp on a buffer whose fake
    pods triggered a scale-up; Spillway told the buffer nothing at all when every chunk had room."""
    [event] = events_of(opening_world()).events

    assert (event.kind, event.namespace, event.name, event.uid) == ("CapacityBuffer", "web", "headroom", UID)
    assert (event.reason, event.type) == (TRIGGERED, "Normal")
    assert (
        event.message == "capacity buffer 8 fake pods triggered scale-up: [{cpu (us-east-1) 0->4 (max: 4)}]"
    )
    assert event.key == "CapacityBuffer:web/headroom"


def test_a_buffer_both_opening_nodes_and_short_hears_the_scale_up_once_then_the_shortfall() -> None:
    """One Event per buffer per plan, under its one mark: a plan that opens nodes for some chunks tells
    the buffer so (as cluster-autoscaler, which says NotTriggerScaleUp only in a loop that scaled nothing
    up); the next plan, its nodes launching and the rest still short at MaxSize, tells it why at once."""
    first = events_of(opening_world(max_size=1))
    [event] = first.events
    assert (
        event.message == "capacity buffer 2 fake pods triggered scale-up: [{cpu (us-east-1) 0->1 (max: 1)}]"
    )

    [then] = events_of(short_world(max_size=1), first.ledger, NOW + timedelta(minutes=1)).events
    assert then.reason == NOT_TRIGGERED
    assert then.message.startswith("capacity buffer 6 fake pods didn't trigger scale-up")


def test_a_buffer_is_told_of_the_same_scale_up_once_per_window() -> None:
    first = events_of(opening_world())
    again = events_of(opening_world(), first.ledger, NOW + timedelta(minutes=5))
    assert again.events == () and again.suppressed == 1 and again.ledger == first.ledger


def test_a_configured_buffer_that_opens_nodes_hears_nothing() -> None:
    from spillway.act.events import EventPolicy, plan_events
    from spillway.planner import plan

    w = World(regions=("us-east-1",))
    w.group("cpu", "m5.2xlarge", max_size=4, desired=0)
    snapshot, groups, cfg, state = w.parsed(
        buffers=[{"name": "night", "pod": {"cpu": "3", "memory": "1Gi"}, "replicas": 8}]
    )
    result = plan(snapshot, groups, cfg, state, NOW)
    [up] = result.scale_up  # it opens nodes, and the plan says so, but it is no object to post on
    assert (up.to_size, up.to_dict()["buffers"]) == (4, {"config:night": 8})
    assert plan_events(result, snapshot, groups, {}, EventPolicy(), NOW).events == ()
