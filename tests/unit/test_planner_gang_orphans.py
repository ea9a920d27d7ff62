"""Fleet-mode gang instances left outside every group (spillway.planner.gangsweep).

A fleet gang launch's instances run outside the group until AttachInstances; an execution stopped by an
operator, timed out, or whose GiveBack failed for good leaves them there, paid for, and their kubelets
join the cluster as Nodes of no managed group, which scale-down never drains. The plan sweeps them."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest
from plan_world import NOW, World

from spillway.local import objects as o
from spillway.model.fleet import FleetInstance
from spillway.model.nodegroup import NodeGroup
from spillway.planner import ScalingPlan, codes
from spillway.planner.core import plan


def _fleet(iid: str, *, minutes_ago: float, group_tag: str | None = None) -> FleetInstance:
    return FleetInstance(
        instance_id=iid,
        region="us-east-1",
        launched_at=NOW - timedelta(minutes=minutes_ago),
        state="running",
        attempt="spillway-0123456789abcdef0123456789abcdef01234567",
        gang="team-a/train",
        group=group_tag,
    )


def _plan(w: World, fleet: tuple[FleetInstance, ...], now: datetime = NOW, **config: object) -> ScalingPlan:
    snapshot, groups, cfg, state = w.parsed(**config)
    return plan(dataclasses.replace(snapshot, fleet_instances=fleet), groups, cfg, state, now)


def _world() -> World:
    w = World()
    w.group("gpu", "m5.2xlarge", nodes=1)
    return w


def test_an_old_fleet_instance_outside_every_group_without_a_node_is_terminated() -> None:
    w = _world()
    iid = o.instance_id("orphan")

    result = _plan(w, (_fleet(iid, minutes_ago=61),))

    (entry,) = result.gang_orphans
    assert (entry.instance_id, entry.region, entry.terminate, entry.code) == (
        iid,
        "us-east-1",
        True,
        codes.GANG_ORPHAN,
    )
    assert entry.node is None
    assert "gang_orphan_minutes" in entry.reason and "team-a/train" in entry.reason
    assert result.acts
    assert result.to_dict()["gang_orphans"] == [entry.to_dict()]


def test_a_young_fleet_instance_may_still_be_attached_by_its_execution() -> None:
    w = _world()

    result = _plan(w, (_fleet(o.instance_id("young"), minutes_ago=59),))

    assert result.gang_orphans == ()
    assert "gang_orphans" not in result.to_dict()


def test_the_threshold_is_gang_orphan_minutes() -> None:
    w = _world()
    iid = o.instance_id("orphan")

    assert _plan(w, (_fleet(iid, minutes_ago=21),), gang_orphan_minutes=20).gang_orphans
    assert not _plan(w, (_fleet(iid, minutes_ago=19),), gang_orphan_minutes=20).gang_orphans


def test_an_attached_instance_is_the_groups_not_an_orphan() -> None:
    w = _world()
    member = w.groups["gpu"]["Instances"][0]["InstanceId"]
    other_group = o.instance_id("elsewhere")

    result = _plan(
        w, (_fleet(member, minutes_ago=600), _fleet(other_group, minutes_ago=600, group_tag="someone-elses"))
    )

    assert result.gang_orphans == ()


def test_an_idle_node_on_the_orphan_is_terminated_with_it() -> None:
    w = _world()
    iid = o.instance_id("orphan")
    node = o.node_name_for(iid)
    w.items.append(o.node(node, instance=iid))
    w.items.append(o.pod("agent", node_name=node, owner=("DaemonSet", "agent")))

    (entry,) = _plan(w, (_fleet(iid, minutes_ago=90),)).gang_orphans

    assert entry.terminate and entry.node == node and entry.code == codes.GANG_ORPHAN


def test_a_node_on_the_orphan_running_work_is_left_and_reported() -> None:
    w = _world()
    iid = o.instance_id("orphan")
    node = o.node_name_for(iid)
    w.items.append(o.node(node, instance=iid))
    w.items.append(o.pod("worker-0", node_name=node, phase="Running"))

    result = _plan(w, (_fleet(iid, minutes_ago=90),))

    (entry,) = result.gang_orphans
    assert not entry.terminate and entry.code == codes.GANG_ORPHAN_BUSY and entry.node == node
    assert "default/worker-0" in entry.reason
    assert not result.acts  # a report, nothing to do


def test_a_finished_pod_keeps_no_orphan() -> None:
    w = _world()
    iid = o.instance_id("orphan")
    node = o.node_name_for(iid)
    w.items.append(o.node(node, instance=iid))
    w.items.append(o.pod("worker-0", node_name=node, phase="Succeeded"))

    snapshot, groups, cfg, state = w.parsed()
    kept_terminal = dataclasses.replace(snapshot, fleet_instances=(_fleet(iid, minutes_ago=90),))
    (entry,) = plan(kept_terminal, groups, cfg, state, NOW).gang_orphans

    assert entry.terminate


@pytest.mark.parametrize("state", ["Standby", "EnteringStandby", "Detaching", "Terminating:Wait"])
def test_a_gang_member_its_group_holds_out_of_service_is_no_orphan(state: str) -> None:
    """A fleet member an operator put in Standby (or one the group detaches or terminates) is in the
    group, but the group's live instances did not list it, and AWS documents its aws:autoscaling:groupName
    tag for the instances a group launches, not for those attached: without the tag every plan listed
    it for termination (GangOrphans counted it), and started a scale-down whose step found it attached.
    Every instance the group lists, whatever its lifecycle state, is a member. (Found by review.)"""
    w = _world()
    (member,) = w.group("held", "m5.2xlarge", nodes=1)
    raw = w.groups["held"]["Instances"][0]
    raw["LifecycleState"] = state
    iid = raw["InstanceId"]

    result = _plan(w, (_fleet(iid, minutes_ago=600),))

    assert result.gang_orphans == () and not result.acts, (member, result.gang_orphans)
    _, groups, _, _ = w.parsed()
    (held,) = [g for g in groups if g.name == "held"]
    again = NodeGroup.from_dict(held.to_dict())  # as the stored snapshot keeps it
    assert iid in (*again.held_instances, *again.terminating_instances)


def test_an_instance_of_a_group_the_plan_does_not_scale_is_still_in_a_group() -> None:
    w = _world()
    w.group("odd", "m5.2xlarge", nodes=1)
    member = w.groups["odd"]["Instances"][0]["InstanceId"]
    snapshot, groups, cfg, state = w.parsed()
    groups = [dataclasses.replace(g, refusal="not scaled: a test") if g.name == "odd" else g for g in groups]

    result = plan(dataclasses.replace(snapshot, fleet_instances=(_fleet(member, minutes_ago=600),)),
                  groups, cfg, state, NOW)  # fmt: skip

    assert result.gang_orphans == ()


def _on_a_dead_node(w: World, *, minutes_not_ready: float, status: str = "False") -> tuple[str, str]:
    """An orphan whose Node registered ``minutes_not_ready`` ago and never became Ready (``status``:
    its Ready condition's, Unknown once its kubelet went silent), with a pod bound to it that tolerates
    everything (the not-ready taint too) and never started."""
    iid = o.instance_id("orphan")
    node = o.node_name_for(iid)
    item = o.node(node, instance=iid, ready=False, created=NOW - timedelta(minutes=minutes_not_ready))
    item["status"]["conditions"][0]["status"] = status
    w.items.append(item)
    w.items.append(o.pod("worker-0", node_name=node, phase="Pending", tolerations=[{"operator": "Exists"}]))
    return iid, node


def test_a_pod_that_never_started_on_a_node_not_ready_past_the_unready_time_keeps_no_orphan() -> None:
    w = _world()
    iid, node = _on_a_dead_node(w, minutes_not_ready=25)

    (entry,) = _plan(w, (_fleet(iid, minutes_ago=90),)).gang_orphans

    assert entry.terminate and entry.code == codes.GANG_ORPHAN and entry.node == node
    assert "not Ready for 25m" in entry.reason and "never started: default/worker-0" in entry.reason
    assert entry.unready_minutes == 20  # the sweep checks the Node again against the same time


def test_a_pod_that_never_started_on_a_node_not_ready_for_a_moment_keeps_its_orphan() -> None:
    w = _world()
    iid, _ = _on_a_dead_node(w, minutes_not_ready=5)

    (entry,) = _plan(w, (_fleet(iid, minutes_ago=90),)).gang_orphans

    assert not entry.terminate and entry.code == codes.GANG_ORPHAN_BUSY


def test_a_pod_that_never_started_keeps_its_orphan_when_the_nodes_kubelet_went_silent() -> None:
    """Ready Unknown: the pod's status is the last the kubelet sent; it may have started the pod since."""
    w = _world()
    iid, _ = _on_a_dead_node(w, minutes_not_ready=25, status="Unknown")

    (entry,) = _plan(w, (_fleet(iid, minutes_ago=90),)).gang_orphans

    assert not entry.terminate and entry.code == codes.GANG_ORPHAN_BUSY and entry.unready_minutes is None


def test_a_pod_that_never_started_keeps_its_orphan_while_the_cluster_is_unhealthy() -> None:
    """Too many nodes unready (cluster-unhealthy): the snapshot is a poor picture, and the scale-down's
    unready rule is off, so the sweep's is too; an orphan with no Node still goes (nothing can come
    back to it)."""
    w = World()
    for name in w.group("gpu", "m5.2xlarge", nodes=6):
        (condition,) = w.node(name)["status"]["conditions"]
        condition.update(
            status="False", reason="KubeletNotReady", lastTransitionTime=o.iso(NOW - timedelta(minutes=30))
        )
    iid, _ = _on_a_dead_node(w, minutes_not_ready=25)
    bare = o.instance_id("bare")

    result = _plan(w, (_fleet(iid, minutes_ago=90), _fleet(bare, minutes_ago=90)))

    assert any(u.group is None for u in result.unhealthy)
    entries = {e.instance_id: e for e in result.gang_orphans}
    assert not entries[iid].terminate and entries[iid].code == codes.GANG_ORPHAN_BUSY
    assert entries[bare].terminate and entries[bare].code == codes.GANG_ORPHAN
