"""The planner and the node-group facts of issue 12: scheduled MinSize floors, warm pools, spot groups,
and instance types backed off per zone."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from plan_world import NOW, World, kept_reasons, pending_codes, pending_reasons, scale_up

from spillway.errors import InputError
from spillway.inputs import load_state
from spillway.model.schedule import ScheduledFloor
from spillway.model.state import State
from spillway.planner import ScalingPlan, codes, plan

SAFE = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}  # may move: assess_move says so
SPOT_TOLERATION = {"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}


def planned(
    world: World, facts: dict[str, dict[str, Any]], now: datetime = NOW, **config: Any
) -> ScalingPlan:
    """Plan with some groups' NodeGroup facts replaced (what observe reads from AWS)."""
    snapshot, groups, cfg, state = world.parsed(**config)
    groups = [replace(g, **facts.get(g.name, {})) for g in groups]
    return plan(snapshot, groups, cfg, state, now)


# --- scheduled actions: a MinSize floor for scale-down ----------------------------------------------

DAY = ScheduledFloor("day", min_size=2, recurrence="0 8 * * mon-fri", timezone="Europe/Berlin")
NIGHT = ScheduledFloor("night", min_size=0, recurrence="0 20 * * *", timezone="Europe/Berlin")


def idle_world() -> tuple[World, list[str]]:
    world = World()
    nodes = world.group("web", "m5.2xlarge", nodes=4)
    for node in nodes:
        world.idle_since(node, 60)
    return world, nodes


def test_an_action_that_ran_sets_no_floor_above_the_groups_min_size() -> None:
    """AWS sets MinSize once when an action runs and keeps no old values: what it set is the group's
    MinSize now, unless somebody changed it since. So a past run holds nothing the group does not."""
    world, _ = idle_world()
    # 2026-11-02 is a Monday: at 12:00 UTC the day action (08:00 Berlin) ran five hours ago, and the
    # group's MinSize is 0 (somebody lowered it since)
    result = planned(world, {"web": {"scheduled": (DAY, NIGHT)}}, max_scale_in_fraction=1.0)
    assert len(result.drain) == 4 and not result.floors
    assert codes.SCHEDULED_MIN not in {k.code for k in result.kept}

    world.groups["web"]["MinSize"] = 2  # as the day action left it
    held = planned(world, {"web": {"scheduled": (DAY, NIGHT)}}, max_scale_in_fraction=1.0)
    assert len(held.drain) == 2 and not held.floors  # the group's own MinSize holds, not the action
    assert codes.SCHEDULED_MIN not in {k.code for k in held.kept}


def test_an_action_created_today_or_a_one_time_action_long_past_sets_no_floor() -> None:
    """Neither ever set the MinSize in effect: a recurring action created at 11:00 today, described
    with its next run (Tuesday 08:00 Berlin) as StartTime, did not run at 08:00 today; a one-time action
    that ran 90 days ago (AWS deletes it then; a stale --scheduled-actions file keeps it) set a MinSize
    that is the group's own or was changed since. (Found by review.)"""
    fresh = replace(DAY, start=datetime.fromisoformat("2026-11-03T07:00:00+00:00"))
    old = ScheduledFloor("once", min_size=3, start=NOW - timedelta(days=90))
    for action in (fresh, old):
        result = planned(idle_world()[0], {"web": {"scheduled": (action,)}}, max_scale_in_fraction=1.0)
        assert len(result.drain) == 4 and not result.floors, action


def test_scale_down_stops_at_the_min_size_an_action_sets_within_the_idle_threshold() -> None:
    world, _ = idle_world()
    # Tuesday 07:55 Berlin (06:55 UTC): the day action runs in 5 minutes, within the 10-minute threshold;
    # a node drained now would be launched again then
    morning = datetime.fromisoformat("2026-11-03T06:55:00+00:00")
    for node in world.state["nodes"]:
        world.state["nodes"][node] = {"idle_since": (morning - timedelta(hours=1)).isoformat()}
    result = planned(world, {"web": {"scheduled": (DAY, NIGHT)}}, morning, max_scale_in_fraction=1.0)

    assert len(result.drain) == 2
    held = [k for k in result.kept if k.code == codes.SCHEDULED_MIN]
    assert len(held) == 2
    assert held[0].reason == (
        "group web at its scheduled MinSize 2: scheduled action day (cron '0 8 * * mon-fri' Europe/Berlin)"
        " runs at 2026-11-03T07:00:00Z with MinSize 2"
    )
    assert [f.to_dict() for f in result.floors] == [
        {"group": "web", "region": "us-east-1", "min_size": 2, "reason": held[0].reason.split(": ", 1)[1]}
    ]
    assert result.to_dict()["floors"][0]["group"] == "web"
    # ... but not with a 4-minute threshold
    later = planned(world, {"web": {"scheduled": (DAY, NIGHT)}}, morning, max_scale_in_fraction=1.0,
                    scale_down_idle_minutes=4)  # fmt: skip
    assert len(later.drain) == 4 and not later.floors


def test_scale_down_stops_at_the_desired_capacity_an_action_sets_within_the_idle_threshold() -> None:
    """An action may set only DesiredCapacity (EC2 Auto Scaling User Guide, "Scheduled scaling": "you
    can create a scheduled action with only the desired capacity specified"); when it runs, Auto Scaling
    takes the group back to it, so a node drained below it now is launched again then."""
    world, _ = idle_world()
    morning = datetime.fromisoformat("2026-11-03T06:55:00+00:00")  # Tuesday 07:55 Berlin
    for node in world.state["nodes"]:
        world.state["nodes"][node] = {"idle_since": (morning - timedelta(hours=1)).isoformat()}
    day = ScheduledFloor("day", desired=3, recurrence="0 8 * * mon-fri", timezone="Europe/Berlin")
    result = planned(world, {"web": {"scheduled": (day,)}}, morning, max_scale_in_fraction=1.0)

    assert len(result.drain) == 1
    held = [k for k in result.kept if k.code == codes.SCHEDULED_MIN]
    assert len(held) == 3
    assert held[0].reason == (
        "group web at its scheduled DesiredCapacity 3: scheduled action day (cron '0 8 * * mon-fri' Europe/Berlin)"
        " runs at 2026-11-03T07:00:00Z with DesiredCapacity 3"
    )
    assert [(f.group, f.min_size) for f in result.floors] == [("web", 3)]
    # an action that runs later than the threshold holds nothing
    later = planned(world, {"web": {"scheduled": (day,)}}, morning, max_scale_in_fraction=1.0,
                    scale_down_idle_minutes=4)  # fmt: skip
    assert len(later.drain) == 4 and not later.floors


def test_a_scheduled_floor_at_or_below_min_size_changes_nothing() -> None:
    world, _ = idle_world()
    world.groups["web"]["MinSize"] = 3
    result = planned(world, {"web": {"scheduled": (DAY,)}}, max_scale_in_fraction=1.0)
    assert len(result.drain) == 1 and not result.floors
    assert codes.SCHEDULED_MIN not in {k.code for k in result.kept}


# --- warm pools: preferred when their warm instances hold the pods, all else equal -------------------


def two_equal_groups() -> World:
    world = World()
    world.group("a", "m5.2xlarge")
    world.group("b", "m5.2xlarge")
    world.pods("web", 2, cpu="7")  # one per node: two new nodes
    return world


def test_a_group_whose_warm_pool_holds_the_new_nodes_wins_a_tie() -> None:
    assert set(scale_up(planned(two_equal_groups(), {}))) == {"a"}  # by name without warm pools
    assert set(scale_up(planned(two_equal_groups(), {"b": {"warm_instances": 2}}))) == {"b"}
    # a warm pool too small for the class does not tip it
    assert set(scale_up(planned(two_equal_groups(), {"b": {"warm_instances": 1}}))) == {"a"}


def test_a_warm_pool_is_promised_to_one_class_of_a_plan_not_to_each() -> None:
    """The warm pool's preference counts the warm instances the plan's earlier classes already take:
    b's two warm instances hold the first class's two nodes, and the second class's nodes would be cold
    launches in either group, so the name sends them to a."""
    world = two_equal_groups()  # class "web": 7 CPUs a pod, two new nodes
    world.pods("api", 2, cpu="6500m")  # another class, one a node, that does not fit beside a web pod
    ups = scale_up(planned(world, {"b": {"warm_instances": 2}}))
    assert ups["b"][1] - ups["b"][0] == 2
    assert ups["a"][1] - ups["a"][0] == 2


def test_warm_instances_do_not_beat_less_waste() -> None:
    world = World()
    world.group("big", "m5.2xlarge")
    world.group("small", "m5.xlarge")
    world.pods("web", 1, cpu="3")
    assert set(scale_up(planned(world, {"big": {"warm_instances": 5}}))) == {"small"}


# --- spot groups: only pods that may move, spot preferred for them ---------------------------------


def spot_world() -> World:
    world = World()
    world.group("on-demand", "m5.2xlarge")
    world.group("spot", "m5.2xlarge")
    return world


SPOT = {"spot": {"capacity_type": "spot"}}


def test_pods_that_may_move_go_to_spot_and_the_rest_to_on_demand() -> None:
    world = spot_world()
    movable = world.pods("batch", 2, cpu="7", annotations=SAFE)
    fixed = world.pods("web", 2, cpu="7")  # a Job pod of no kind known to tolerate a move
    ups = scale_up(planned(world, SPOT))
    assert sorted(ups["spot"][2]) == sorted(movable)
    assert sorted(ups["on-demand"][2]) == sorted(fixed)


def test_without_spot_groups_nothing_changes() -> None:
    world = spot_world()
    world.pods("batch", 1, cpu="7", annotations=SAFE)
    assert set(scale_up(planned(world, {}))) == {"on-demand"}


def test_a_pod_that_may_not_move_is_never_placed_on_spot() -> None:
    world = World()
    world.group("spot", "m5.2xlarge")
    (pod,) = world.pods("web", 1, cpu="7")
    result = planned(world, SPOT)
    assert scale_up(result) == {}
    assert pending_codes(result)[pod] == codes.NO_GROUP_FITS
    assert "spot: a spot group runs only pods that may move" in pending_reasons(result)[pod]
    assert "of no kind known to tolerate a move" in pending_reasons(result)[pod]


def cordoned_spot_node(movable: bool) -> tuple[World, str, str]:
    """An on-demand group, and a spot group whose one node Spillway cordoned for a scale-down drain;
    one pending pod that may move or not. Returns the world, the spot node and the pod."""
    world = World()
    world.group("on-demand", "m5.2xlarge")
    (node,) = world.group("spot", "m5.2xlarge", nodes=1)
    world.cordon(node, by_spillway=True)
    world.idle_since(node, 5)
    mark = {"annotations": SAFE, "owner": ("ReplicaSet", "web-rs")} if movable else {}
    (pod,) = world.pods("web", 1, cpu="7", **mark)
    return world, node, pod


def test_a_pod_that_may_not_move_is_not_given_a_spot_node_spillway_cordoned() -> None:
    """Uncordoning a node Spillway cordoned for a drain gives it to the pending pod as surely as a
    launch would, so the spot rule holds for it too: only a pod that may move gets the spot node back;
    one that may not gets an on-demand node, and the spot node's drain goes on. (Found by the issue-12
    audit: the pod that may not move was given the spot node, where an interruption would kill it.)"""
    world, node, pod = cordoned_spot_node(movable=True)
    result = planned(world, SPOT)
    assert [(u.node, u.group) for u in result.uncordon] == [(node, "spot")]
    assert scale_up(result) == {}

    world, node, pod = cordoned_spot_node(movable=False)
    result = planned(world, SPOT)
    assert result.uncordon == ()
    assert scale_up(result) == {"on-demand": (0, 1, [pod])}


def test_a_pod_tolerating_the_groups_spot_taint_may_go_there() -> None:
    world = World()
    world.group("spot", "m5.2xlarge")
    world.groups["spot"]["Tags"].append(
        {"Key": "k8s.io/cluster-autoscaler/node-template/taint/spot", "Value": "true:NoSchedule"}
    )
    (pod,) = world.pods("web", 1, cpu="7", tolerations=[SPOT_TOLERATION])
    world.pods("other", 1, cpu="7")  # does not tolerate it: blocked by the taint as before
    result = planned(world, SPOT)
    assert scale_up(result)["spot"][2] == [pod]


def spot_tainted(key: str, value: str) -> World:
    world = World()
    world.group("spot", "m5.2xlarge")
    world.groups["spot"]["Tags"].append(
        {"Key": f"k8s.io/cluster-autoscaler/node-template/taint/{key}", "Value": value}
    )
    return world


def test_a_soft_spot_taint_does_not_let_a_pod_that_may_not_move_onto_spot() -> None:
    """PreferNoSchedule is a preference: the scheduler may still put a pod that does not tolerate it on
    the node (Kubernetes, taints and tolerations), so it keeps nothing off a Spot node. (Review r11.)"""
    world = spot_tainted("spot", "true:PreferNoSchedule")
    (pod,) = world.pods("web", 1, cpu="7")  # no toleration; a Job pod of no kind known to tolerate a move
    result = planned(world, SPOT)
    assert scale_up(result) == {}
    assert "spot: a spot group runs only pods that may move" in pending_reasons(result)[pod]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("spot-pool", "gpu:NoSchedule"),  # merely contains "spot"
        ("example.com/spotless", "true:NoSchedule"),
        ("karpenter.sh/capacity-type", "on-demand:NoSchedule"),  # names the other capacity type
        ("eks.amazonaws.com/capacityType", "ON_DEMAND:NoExecute"),
    ],
)
def test_a_taint_that_is_not_a_spot_taint_does_not_open_a_spot_group_to_pods_tolerating_it(
    key: str, value: str
) -> None:
    world = spot_tainted(key, value)
    tolerate = {"key": key, "operator": "Exists"}
    (pod,) = world.pods("web", 1, cpu="7", tolerations=[tolerate])
    result = planned(world, SPOT)
    assert scale_up(result) == {}, key
    assert "a spot group runs only pods that may move" in pending_reasons(result)[pod]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("karpenter.sh/capacity-type", "spot:NoSchedule"),
        ("eks.amazonaws.com/capacityType", "SPOT:NoExecute"),
        ("spot", "true:NoSchedule"),
        ("spot", "NoSchedule"),
    ],
)
def test_a_pod_tolerating_a_hard_spot_taint_opts_in(key: str, value: str) -> None:
    world = spot_tainted(key, value)
    (pod,) = world.pods("web", 1, cpu="7", tolerations=[{"key": key, "operator": "Exists"}])
    world.pods("other", 1, cpu="7")  # does not tolerate it: kept off by the taint itself
    assert scale_up(planned(world, SPOT))["spot"][2] == [pod]


# --- mixed instances groups: on-demand up to OnDemandBaseCapacity, then a share of spot -------------


def mixed_group(world: World, name: str, base: int, percent: int, **kw: Any) -> None:
    world.group(name, "m5.2xlarge", **kw)
    world.groups[name]["MixedInstancesPolicy"] = {
        "LaunchTemplate": {
            "LaunchTemplateSpecification": {"LaunchTemplateName": "lt"},
            "Overrides": [{"InstanceType": "m5.2xlarge"}],
        },
        "InstancesDistribution": {
            "OnDemandBaseCapacity": base,
            "OnDemandPercentageAboveBaseCapacity": percent,
        },
    }


def test_a_half_spot_group_takes_only_pods_that_may_move_and_is_preferred_for_them() -> None:
    world = World()
    mixed_group(world, "mixed", 0, 50)  # sorts before "on-demand": a tie would go to it
    world.group("on-demand", "m5.2xlarge")
    fixed = world.pods("web", 2, cpu="7")
    movable = world.pods("batch", 2, cpu="7", annotations=SAFE)
    ups = scale_up(planned(world, {}))
    assert sorted(ups["on-demand"][2]) == sorted(fixed)
    assert sorted(ups["mixed"][2]) == sorted(movable)


def test_a_cordoned_node_of_a_mixed_group_within_its_on_demand_base_is_no_surer_on_demand() -> None:
    """A mixed group whose desired capacity is within its OnDemandBaseCapacity may still run Spot
    instances: EC2 launches the base first ("This base portion is launched first as your group scales",
    InstancesDistribution), and scale-down drains the oldest of equally idle nodes first, so after a
    scale-in the base's on-demand instances are the ones gone and the group's remaining instance may be
    a Spot one; DescribeAutoScalingGroups does not say which. So its node Spillway cordoned is not given
    back to a pod that may not move (an interruption would kill it there): the pod gets an on-demand
    node, as for any spot group's node. A group that may launch no Spot at all (100 % on-demand above
    its base) is on-demand throughout and gives its node back to any pod."""
    for base, percent, reused in ((1, 0, False), (0, 0, False), (1, 100, True)):
        world = World()
        world.group("on-demand", "m5.2xlarge")
        mixed_group(world, "mixed", base, percent, nodes=1)
        (node,) = [n for n in world.items if n["kind"] == "Node"]
        world.cordon(node["metadata"]["name"], by_spillway=True)
        (pod,) = world.pods("web", 1, cpu="7")  # may not move
        result = planned(world, {})
        assert [u.group for u in result.uncordon] == (["mixed"] if reused else []), (base, percent)
        assert scale_up(result) == ({} if reused else {"on-demand": (0, 1, [pod])}), (base, percent)


def test_a_cordoned_node_of_a_group_declaring_a_spot_taint_is_given_back_to_a_pod_tolerating_it() -> None:
    """A group that declares a spot taint lets in the pods that tolerate it, reused node or launch."""
    world, node, _ = cordoned_spot_node(movable=False)
    world.groups["spot"]["Tags"].append(
        {"Key": "k8s.io/cluster-autoscaler/node-template/taint/spot", "Value": "true:NoSchedule"}
    )
    world.node(node)["spec"]["taints"].append({"key": "spot", "value": "true", "effect": "NoSchedule"})
    world.pod_item("default/web-0")["spec"]["tolerations"] = [SPOT_TOLERATION]  # it opted in to spot
    result = planned(world, SPOT)
    assert [u.group for u in result.uncordon] == ["spot"]
    assert scale_up(result) == {}


def test_a_pod_that_may_not_move_waits_rather_than_go_where_ec2_may_launch_spot() -> None:
    world = World()
    mixed_group(world, "mixed", 1, 50, desired=1)  # the base is filled (by a node still launching)
    (pod,) = world.pods("web", 1, cpu="7")
    result = planned(world, {})
    assert scale_up(result) == {}
    assert pending_codes(result)[pod] == codes.NO_GROUP_FITS
    assert (
        "mixed: a spot group (OnDemandBaseCapacity 1 filled) runs only pods that may move"
        in (pending_reasons(result)[pod])
    )


def test_below_its_on_demand_base_a_mixed_group_takes_any_pod_but_only_up_to_the_base() -> None:
    world = World()
    mixed_group(world, "mixed", 2, 0)
    pods = world.pods("web", 3, cpu="7")  # one node each
    result = planned(world, {})
    assert scale_up(result)["mixed"][:2] == (0, 2)
    waiting = [p for p in pods if p not in scale_up(result)["mixed"][2]]
    assert len(waiting) == 1
    assert pending_codes(result)[waiting[0]] == codes.ON_DEMAND_BASE
    assert "on-demand only up to OnDemandBaseCapacity 2" in pending_reasons(result)[waiting[0]]
    # pods that may move are not held back by the base
    world = World()
    mixed_group(world, "mixed", 2, 0)
    world.pods("batch", 3, cpu="7", annotations=SAFE)
    assert scale_up(planned(world, {}))["mixed"][:2] == (0, 3)


@pytest.mark.parametrize(
    "tag",
    [
        ("spillway.io/capacity-type", "on-demand"),
        ("k8s.io/cluster-autoscaler/node-template/label/eks.amazonaws.com/capacityType", "ON_DEMAND"),
        ("k8s.io/cluster-autoscaler/node-template/label/karpenter.sh/capacity-type", "on-demand"),
    ],
)
def test_a_tag_saying_on_demand_does_not_send_a_pod_that_may_not_move_to_an_all_spot_policy(
    tag: tuple[str, str],
) -> None:
    world = World()
    mixed_group(world, "mixed", 0, 0)
    world.groups["mixed"]["Tags"].append({"Key": tag[0], "Value": tag[1]})
    (pod,) = world.pods("web", 1, cpu="7")
    result = world.plan()
    assert scale_up(result) == {}
    assert "mixed: a spot group runs only pods that may move" in pending_reasons(result)[pod]


def test_a_mixed_group_all_on_demand_above_its_base_is_on_demand() -> None:
    world = World()
    mixed_group(world, "mixed", 0, 100)
    world.group("spot", "m5.2xlarge")
    pods = world.pods("web", 3, cpu="7")
    movable = world.pods("batch", 1, cpu="7", annotations=SAFE)
    ups = scale_up(planned(world, SPOT))
    assert sorted(ups["mixed"][2]) == sorted(pods)
    assert ups["spot"][2] == movable


# --- a pool (capacity type, instance type, zone) backed off: a Spot interruption -------------------


def pool_world(zones: list[str]) -> World:
    world = World()
    world.group("multi", "m5.2xlarge", zones=zones)
    world.pods("web", 1, cpu="7", annotations=SAFE)  # may move: a Spot group takes it
    return world


MULTI_SPOT = {"multi": {"capacity_type": "spot"}}


def backed_off(*zones: str, capacity: str = "spot") -> dict[str, Any]:
    until = (NOW + timedelta(minutes=10)).isoformat()
    return {
        f"{capacity}/{z}/m5.2xlarge": {"backoff_until": until, "reason": "spot interruption"} for z in zones
    }


def test_a_multi_zone_group_with_one_zone_backed_off_still_scales_and_says_so() -> None:
    world = pool_world(["us-east-1a", "us-east-1b"])
    world.state["pools"] = backed_off("us-east-1a")
    result = planned(world, MULTI_SPOT)
    (up,) = result.scale_up
    assert up.group == "multi"
    assert "spot m5.2xlarge in us-east-1a backed off until" in up.reason
    assert "cannot be pinned to a zone or type" in up.reason
    assert "spot/us-east-1a/m5.2xlarge" in result.state.pools  # carried to the next plan until it expires


def test_a_group_is_skipped_when_every_zone_and_type_is_backed_off() -> None:
    world = pool_world(["us-east-1a", "us-east-1b"])
    world.state["pools"] = backed_off("us-east-1a", "us-east-1b")
    result = planned(world, MULTI_SPOT)
    assert scale_up(result) == {}
    (code,) = pending_codes(result).values()
    assert code == codes.BACKED_OFF
    # a mixed group with another type there still launches
    mixed = planned(
        world, {"multi": {"capacity_type": "spot", "instance_types": ("m5.2xlarge", "m5.4xlarge")}}
    )
    assert set(scale_up(mixed)) == {"multi"}


def test_a_spot_pool_backed_off_does_not_stop_an_on_demand_group_of_its_type_and_zone() -> None:
    """EC2 reclaiming Spot capacity says nothing of on-demand capacity of the type in the zone: the
    on-demand group, where a Spot group's pods should spill to, must still launch. (Review r11.)"""
    world = pool_world(["us-east-1a", "us-east-1b"])
    world.state["pools"] = backed_off("us-east-1a", "us-east-1b")
    result = planned(world, {})  # "multi" is on-demand
    assert set(scale_up(result)) == {"multi"}, [p.reason for p in result.pending]
    assert "backed off" not in result.scale_up[0].reason
    # an on-demand pool backed off stops it, and not a Spot group of the same type and zone
    world.state["pools"] = backed_off("us-east-1a", "us-east-1b", capacity="on-demand")
    assert scale_up(planned(world, {})) == {}
    assert set(scale_up(planned(world, MULTI_SPOT))) == {"multi"}


def test_a_pool_key_of_an_older_state_is_a_spot_pool() -> None:
    """Before pools carried a capacity type (``<zone>/<type>``) only Spot interruptions wrote them."""
    world = pool_world(["us-east-1a"])
    until = (NOW + timedelta(minutes=10)).isoformat()
    world.state["pools"] = {"us-east-1a/m5.2xlarge": {"backoff_until": until, "reason": "spot interruption"}}
    assert set(scale_up(planned(world, {}))) == {"multi"}  # on-demand: not that pool
    result = planned(world, MULTI_SPOT)
    assert scale_up(result) == {}
    assert set(result.state.pools) == {"spot/us-east-1a/m5.2xlarge"}  # written back in the new form


def test_a_state_file_pool_key_that_names_no_pool_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text(
        json.dumps({"pools": {"ondemand/us-east-1a/m5.large": {"backoff_until": NOW.isoformat()}}})
    )
    with pytest.raises(InputError) as err:
        load_state(path)
    assert str(err.value) == (
        f"{path}: pools: Value error, key 'ondemand/us-east-1a/m5.large' is not <capacity type>/<zone>/"
        "<instance type> with a capacity type of spot | on-demand (nor an older <zone>/<instance type>)"
    )


def test_expired_pool_backoffs_are_dropped() -> None:
    world = pool_world(["us-east-1a"])
    world.state["pools"] = {
        "spot/us-east-1a/m5.2xlarge": {
            "backoff_until": (NOW - timedelta(seconds=1)).isoformat(),
            "reason": "x",
        }
    }
    result = planned(world, MULTI_SPOT)
    assert set(scale_up(result)) == {"multi"} and result.state.pools == {}
    assert State.model_validate(result.state.to_wire()) == result.state
    assert kept_reasons(result) == {}


# --- suspended scaling processes ------------------------------------------------------------------------


def test_a_group_whose_launch_process_is_suspended_is_not_launching_nor_scaled_up() -> None:
    """EC2 Auto Scaling User Guide, "Suspend and resume Amazon EC2 Auto Scaling processes": Launch adds
    the group's instances when it scales out; suspended, the group launches nothing, and Auto Scaling
    suspends it itself (an administrative suspension) on a group that failed to launch for over 24 hours.
    No Failed activity is written then, so the launch-failure back-off never fired: pods waited for ever
    on a "launching" node (desired 1, no instance), and a group at 0 was raised. Now the group counts
    nothing as launching, is never chosen, and the pod's reason names the process. (Review r24.)"""
    phantom = World()
    phantom.group("gpu-east", "p4d.24xlarge", max_size=8, desired=1, gpu_taint=True, suspended=["Launch"])
    phantom.group("gpu-west", "p4d.24xlarge", region="us-west-2", max_size=8, gpu_taint=True)
    (job,) = phantom.gpu_pods("train", 1, gpus=8, cpu="90", memory="900Gi")
    result = phantom.plan()
    assert scale_up(result) == {"gpu-west": (0, 1, [job])}
    assert "gpu-east: its Launch process is suspended (User suspended at" in result.scale_up[0].reason

    empty = World()
    empty.group("gpu-east", "p4d.24xlarge", max_size=8, gpu_taint=True, suspended=["Launch"])
    empty.group("gpu-west", "p4d.24xlarge", region="us-west-2", max_size=8, gpu_taint=True)
    (job,) = empty.gpu_pods("train", 1, gpus=8, cpu="90", memory="900Gi")
    assert scale_up(empty.plan()) == {"gpu-west": (0, 1, [job])}

    alone = World()  # nowhere else to go: the pod waits, and says why
    alone.group("gpu-east", "p4d.24xlarge", max_size=8, gpu_taint=True, suspended=["Launch"])
    (job,) = alone.gpu_pods("train", 1, gpus=8, cpu="90", memory="900Gi")
    result = alone.plan()
    assert result.scale_up == () and pending_codes(result)[job] == codes.BACKED_OFF
    assert "its Launch process is suspended" in pending_reasons(result)[job]


def test_a_group_whose_terminate_process_is_suspended_drains_nothing() -> None:
    """Same User Guide page and "Considerations for suspending processes": with Terminate suspended the
    group does not terminate its InService instances to scale in (a forced delete of the group is the
    only way AWS names). A drain would empty the node and leave its instance running, paid for; so its
    idle nodes are kept, naming the process, and the other groups scale down as before."""
    w = World()
    kept = w.group("web", "m5.2xlarge", nodes=2, suspended=["Terminate"])
    others = w.group("batch", "m5.2xlarge", nodes=2)
    for node in (*kept, *others):
        w.idle_since(node, 60)

    result = w.plan(max_scale_in_fraction=1.0)

    assert {d.node for d in result.drain} == set(others)
    codes_of = {k.node: k.code for k in result.kept}
    assert {codes_of[n] for n in kept} == {codes.TERMINATE_SUSPENDED}
    assert "its Terminate process is suspended" in kept_reasons(result)[kept[0]]


def test_a_suspended_terminate_process_keeps_only_the_nodes_of_in_service_instances() -> None:
    """EC2 Auto Scaling User Guide, "Considerations for suspending processes": a suspended Terminate
    process holds InService instances only, and Auto Scaling still terminates a Pending one. A node can join while a launch lifecycle hook still holds its instance in
    Pending:Wait; the drain step terminates such an instance (act.instances.terminate_held, the one rule
    model.nodegroup.terminate_holds), so the plan drains its idle node too, where it used to keep every
    node of the group as terminate-suspended."""
    w = World()
    held, waiting = w.group("web", "m5.2xlarge", nodes=2, suspended=["Terminate"])
    w.groups["web"]["Instances"][1]["LifecycleState"] = "Pending:Wait"
    for node in (held, waiting):
        w.idle_since(node, 60)

    result = w.plan(max_scale_in_fraction=1.0)

    assert [d.node for d in result.drain] == [waiting]
    assert {k.node: k.code for k in result.kept}[held] == codes.TERMINATE_SUSPENDED
    assert "InService" in kept_reasons(result)[held]


def test_a_buffer_holds_room_on_spot_only_in_a_group_whose_spot_taint_it_tolerates() -> None:
    """A buffer's chunks are virtual pods, no pods that may move (none is created, so nothing says it
    tolerates a move): as a pod that may not move, they get no spot node, and the README says so. With
    only a spot group, a buffer holds nothing; one tolerating the group's spot taint opts in."""
    buffer = {"name": "warm", "pod": {"cpu": "5", "memory": "4Gi"}, "replicas": 2}
    world = World()
    world.group("spot", "m5.2xlarge")
    assert scale_up(planned(world, SPOT, buffers=[buffer])) == {}

    world.groups["spot"]["Tags"].append(
        {"Key": "k8s.io/cluster-autoscaler/node-template/taint/spot", "Value": "true:NoSchedule"}
    )
    tolerating = {**buffer, "pod": {**buffer["pod"], "tolerations": [SPOT_TOLERATION]}}
    assert scale_up(planned(world, SPOT, buffers=[tolerating])) == {"spot": (0, 2, [])}
