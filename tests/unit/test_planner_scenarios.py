"""Planner scenarios on realistic kubectl / AWS CLI objects: what an operator would check by hand."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from plan_world import GPU_TOLERATION, NOW, World, kept_reasons, pending_codes, pending_reasons, scale_up

from spillway.local import objects as o
from spillway.model.cluster import cordon_digest
from spillway.model.k8s import CORDONED_BY_SPILLWAY
from spillway.model.nodegroup import NodeGroup
from spillway.planner import codes, plan


def test_gpu_burst_fills_primary_to_max_then_spills_to_secondary_region() -> None:
    w = World()
    w.group("gpu-east", "p4d.24xlarge", max_size=4, gpu_taint=True)
    w.group("gpu-west", "p4d.24xlarge", region="us-west-2", max_size=8, gpu_taint=True)
    w.group("cpu-east", "m5.2xlarge", min_size=1, nodes=1)
    jobs = w.gpu_pods("train", 7, gpus=8, cpu="90", memory="900Gi")

    result = w.plan()

    ups = scale_up(result)
    assert ups["gpu-east"][:2] == (0, 4)
    assert ups["gpu-west"][:2] == (0, 3)
    assert sorted(ups["gpu-east"][2] + ups["gpu-west"][2]) == sorted(jobs)
    assert "cpu-east" not in ups
    west = next(s for s in result.scale_up if s.group == "gpu-west")
    assert "overflow" in west.reason and "gpu-east at MaxSize 4" in west.reason
    # Primary first in the plan's order, as the act layer should apply it.
    assert [s.group for s in result.scale_up] == ["gpu-east", "gpu-west"]


def test_small_gpu_pods_are_packed_onto_as_few_new_nodes_as_fit() -> None:
    w = World()
    w.group("gpu4", "g5.12xlarge", max_size=10, gpu_taint=True)
    w.group("gpu1", "g5.xlarge", max_size=10, gpu_taint=True)
    w.gpu_pods("nb", 8, gpus=1, cpu="2", memory="8Gi")

    result = w.plan()

    # Eight 1-GPU pods: two 4-GPU nodes waste nothing; so do eight 1-GPU nodes: least waste ties,
    # and the name decides (gpu1 < gpu4). What matters: every pod placed, no group over-launched.
    ups = scale_up(result)
    assert sum(len(p) for _, _, p in ups.values()) == 8
    assert ups == {"gpu1": (0, 8, ups["gpu1"][2])}


def test_least_waste_prefers_the_group_the_pods_fill() -> None:
    w = World()
    w.group("big", "p4d.24xlarge", max_size=10, gpu_taint=True)
    w.group("small", "g5.12xlarge", max_size=10, gpu_taint=True)
    w.gpu_pods("job", 3, gpus=1, cpu="4", memory="16Gi")

    result = w.plan()

    # Three 1-GPU pods: one g5.12xlarge (4 GPUs) wastes 1/4, one p4d (8 GPUs) wastes 5/8.
    assert scale_up(result) == {"small": (0, 1, scale_up(result)["small"][2])}


def test_uncordons_a_node_it_drained_before_launching_and_leaves_a_human_cordon_alone() -> None:
    w = World()
    mine, humans = w.group("cpu", "m5.2xlarge", nodes=2, max_size=5)
    w.cordon(mine, by_spillway=True)
    w.cordon(humans, by_spillway=False)
    pods = w.pods("web", 3, cpu="2", memory="4Gi")

    result = w.plan()

    assert [(u.node, u.group) for u in result.uncordon] == [(mine, "cpu")]
    assert result.scale_up == ()
    reasons = pending_reasons(result)
    assert all(mine in reasons[p] and "uncordons" in reasons[p] for p in pods)
    assert humans not in {u.node for u in result.uncordon}
    assert "cordoned by someone else" in kept_reasons(result)[humans]


def test_uncordons_its_node_though_the_cordon_left_the_unschedulable_taint_on_it() -> None:
    """The node lifecycle controller taints every cordoned node node.kubernetes.io/unschedulable:NoSchedule
    (pkg/controller/nodelifecycle, doNoScheduleTaintingPass) and takes the taint off once it is uncordoned:
    the node is reused, not passed over for a new launch."""
    w = World()
    (mine,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=5)
    w.cordon(mine, by_spillway=True)
    w.node(mine)["spec"]["taints"].append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    pods = w.pods("web", 3, cpu="2", memory="4Gi")

    result = w.plan()

    assert [(u.node, u.group) for u in result.uncordon] == [(mine, "cpu")]
    assert result.scale_up == ()
    assert all(mine in pending_reasons(result)[p] for p in pods)


def _requiring(key: str, operator: str, values: list[str]) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": key, "operator": operator, "values": values}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def _two_type_world() -> World:
    """Group mixed launches m5.2xlarge or m5.xlarge, and no tag names one type."""
    w = World(regions=("us-east-1",))
    w.group("mixed", "m5.2xlarge", max_size=10, mixed=True)
    mixed = w.groups["mixed"]
    mixed["MixedInstancesPolicy"]["LaunchTemplate"]["Overrides"] = [
        {"InstanceType": "m5.2xlarge"},
        {"InstanceType": "m5.xlarge"},
    ]
    mixed["Tags"] = [t for t in mixed["Tags"] if "instance-type" not in t["Key"]]
    return w


def test_node_affinity_every_zone_and_type_of_a_group_meets_gets_a_node_there() -> None:
    """A template leaves out the zone of a group over several zones and the type of a group that launches
    several; the node that comes up has one of them, and kube-scheduler runs the pod there when each
    would do. A pod that asks for one zone of two, or one type of two, still gets none: the group may
    launch the other."""
    zone, kind = "topology.kubernetes.io/zone", "node.kubernetes.io/instance-type"
    w = World(regions=("us-east-1",))
    w.group("multi", "m5.2xlarge", max_size=10, zones=["us-east-1a", "us-east-1b"])
    (both_zones,) = w.pods("zones", 1, affinity=_requiring(zone, "In", ["us-east-1a", "us-east-1b"]))
    (one_zone,) = w.pods("zone-b", 1, affinity=_requiring(zone, "In", ["us-east-1b"]))

    result = w.plan()

    assert scale_up(result) == {"multi": (0, 1, [both_zones])}
    assert "required node affinity does not match" in pending_reasons(result)[one_zone]

    w = _two_type_world()
    (both_types,) = w.pods("types", 1, affinity=_requiring(kind, "In", ["m5.xlarge", "m5.2xlarge"]))
    (one_type,) = w.pods("small", 1, affinity=_requiring(kind, "In", ["m5.xlarge"]))

    result = w.plan()

    assert scale_up(result) == {"mixed": (0, 1, [both_types])}
    assert "required node affinity does not match" in pending_reasons(result)[one_type]


def test_node_affinity_one_zone_or_type_of_a_group_fails_gets_no_node_there() -> None:
    """The other way round: a pod that must avoid us-east-1a, or m5.xlarge nodes (NotIn), holds on a
    template without zone or type (the label is absent), but the group's new node may come up in us-east-1a, or as an m5.xlarge, where
    kube-scheduler's NodeAffinity refuses it: the plan launched such a node for it, plan after plan.
    It gets none; a pod that avoids a zone the group does not span still gets one."""
    zone, kind = "topology.kubernetes.io/zone", "node.kubernetes.io/instance-type"
    w = World(regions=("us-east-1",))
    w.group("multi", "m5.2xlarge", max_size=10, zones=["us-east-1a", "us-east-1b"])
    (not_a,) = w.pods("not-a", 1, affinity=_requiring(zone, "NotIn", ["us-east-1a"]))
    (not_c,) = w.pods("not-c", 1, affinity=_requiring(zone, "NotIn", ["us-east-1c"]))

    result = w.plan()

    assert scale_up(result) == {"multi": (0, 1, [not_c])}
    assert "required node affinity does not match" in pending_reasons(result)[not_a]

    w = _two_type_world()
    (not_small,) = w.pods("not-small", 1, affinity=_requiring(kind, "NotIn", ["m5.xlarge"]))

    result = w.plan()

    assert result.scale_up == ()
    assert "required node affinity does not match" in pending_reasons(result)[not_small]


def test_a_pod_pinned_to_one_zone_of_a_multi_zone_group_is_told_the_group_cannot_be_asked_for_it() -> None:
    """A pod whose nodeSelector names us-east-1b, beside a group over us-east-1a and us-east-1b: Auto
    Scaling picks each new instance's zone itself (it balances the group's zones), so a raise may bring
    a node in us-east-1a that the pod never runs on, and nothing is launched. The reason said that no
    group could ever run the pod, that the group's nodes did not match a zone the group spans; it now
    names the zone the new node may come up in, the group's zones and the one-group-per-zone remedy.
    (cluster-autoscaler's AWS provider labels a multi-zone group's template node with its first zone,
    aws_manager.go getAsgTemplate, so it launches for a pod pinned to that zone, and the node may come
    up elsewhere.) A group of us-east-1b alone is the safe fix, and gets the node."""
    w = World(regions=("us-east-1",))
    w.group("multi", "m5.2xlarge", max_size=10, zones=["us-east-1a", "us-east-1b"])
    (pod,) = w.pods(
        "web", 1, cpu="1", memory="1Gi", node_selector={"topology.kubernetes.io/zone": "us-east-1b"}
    )

    result = w.plan()

    assert result.scale_up == ()
    assert pending_codes(result)[pod] == codes.NO_GROUP_FITS
    reason = pending_reasons(result)[pod]
    assert "can ever run" not in reason, reason
    assert "multi: nodeSelector topology.kubernetes.io/zone=us-east-1b does not match in us-east-1a" in reason
    assert "multi spans us-east-1a, us-east-1b" in reason and "one group per zone" in reason, reason

    w.group("only-b", "m5.2xlarge", max_size=10, zones=["us-east-1b"])
    assert scale_up(w.plan()) == {"only-b": (0, 1, [pod])}


def test_capacity_already_launching_prevents_a_double_launch() -> None:
    w = World()
    (full,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    w.items.append(o.pod("resident", cpu="7", memory="8Gi", node_name=full))
    w.add_instance("cpu", register=False)  # desired 2, one node still booting
    w.add_instance("cpu", register=True, ready=False)  # desired 3, registered but not Ready
    pods = w.pods("batch", 6, cpu="2", memory="4Gi")  # 3 per node: two booting nodes hold all six

    first = w.plan()
    assert first.scale_up == ()
    assert all("already launching in cpu" in pending_reasons(first)[p] for p in pods)

    w.pods("more", 3, cpu="2", memory="4Gi")
    second = w.plan()
    assert scale_up(second) == {"cpu": (3, 4, scale_up(second)["cpu"][2])}
    assert len(scale_up(second)["cpu"][2]) == 3


def test_pending_pods_that_fit_free_room_launch_nothing() -> None:
    w = World()
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1)
    pods = w.pods("small", 2, cpu="1", memory="1Gi")

    result = w.plan()

    assert result.scale_up == ()
    assert all(node in pending_reasons(result)[p] for p in pods)
    assert "pending pod fits" in kept_reasons(result)[node]


def test_recent_insufficient_capacity_backs_the_group_off_and_spills_over() -> None:
    w = World()
    w.group("gpu-east", "p4d.24xlarge", max_size=8, gpu_taint=True)
    w.group("gpu-west", "p4d.24xlarge", region="us-west-2", max_size=8, gpu_taint=True)
    w.launch_failure("gpu-east", minutes_ago=5)
    w.gpu_pods("train", 2, gpus=8, cpu="90", memory="900Gi")

    result = w.plan()

    assert set(scale_up(result)) == {"gpu-west"}
    reason = result.scale_up[0].reason
    assert "InsufficientInstanceCapacity" in reason or "sufficient" in reason

    # Past the backoff window the primary region is preferred again.
    later = w.plan(now=NOW + timedelta(minutes=20))
    assert set(scale_up(later)) == {"gpu-east"}


def test_desired_raised_by_a_failed_launch_is_not_counted_as_launching() -> None:
    w = World()
    w.group("gpu-east", "p4d.24xlarge", max_size=8, desired=1, gpu_taint=True)  # desired 1, no instance
    w.group("gpu-west", "p4d.24xlarge", region="us-west-2", max_size=8, gpu_taint=True)
    w.launch_failure("gpu-east", minutes_ago=1)
    (job,) = w.gpu_pods("train", 1, gpus=8, cpu="90", memory="900Gi")

    result = w.plan()

    assert scale_up(result) == {"gpu-west": (0, 1, [job])}


def booting(w: World, group: str, zone: str) -> str:
    """A p4d.24xlarge instance of ``group`` in ``zone``, Pending: no Node yet."""
    iid = o.instance_id(f"{group}-{zone}-{len(w.groups[group]['Instances'])}")
    w.groups[group]["Instances"].append(
        {"InstanceId": iid, "InstanceType": "p4d.24xlarge", "AvailabilityZone": zone, "LifecycleState": "Pending",
         "HealthStatus": "Healthy", "ProtectedFromScaleIn": False}
    )  # fmt: skip
    return iid


def test_an_instance_a_failed_launch_did_start_holds_pods_while_the_rest_overflow() -> None:
    """A raise of a two-zone group (2 new nodes) failed in us-east-1a for capacity; Auto Scaling
    started the other in us-east-1b, still booting. The scale-up's back-off kept it and gave back the
    desired capacity never started (desired 1 = the one instance), and backed the group and the pool
    off. The group gets no new node, but the instance it did launch is capacity coming, as
    cluster-autoscaler counts a backed-off node group's instances not registered yet as upcoming nodes
    (clusterstate GetUpcomingNodes: target size less registered nodes, no back-off check; the AWS
    provider removes only the placeholders for desired capacity never started). The plan ignored
    every launching node of a backed-off group: it sent both pods west and the instance in us-east-1b,
    once up, sat idle until scale-down."""
    w = World()
    w.group("gpu-east", "p4d.24xlarge", max_size=8, gpu_taint=True, zones=["us-east-1a", "us-east-1b"])
    w.group("gpu-west", "p4d.24xlarge", region="us-west-2", max_size=8, gpu_taint=True)
    booting(w, "gpu-east", "us-east-1b")
    w.groups["gpu-east"]["DesiredCapacity"] = 1
    w.launch_failure("gpu-east", minutes_ago=1)  # names us-east-1a
    until = (NOW + timedelta(minutes=10)).isoformat()
    w.state["groups"]["us-east-1/gpu-east"] = {
        "backoff_until": until,
        "reason": "launch failed in us-east-1a",
    }
    jobs = w.gpu_pods("train", 2, gpus=8, cpu="90", memory="900Gi")

    result = w.plan()

    [west] = result.scale_up
    assert (west.group, west.from_size, west.to_size) == ("gpu-west", 0, 1)
    waiting = [p for p in jobs if p not in west.pods]
    assert len(waiting) == 1
    assert "capacity already launching in gpu-east" in pending_reasons(result)[waiting[0]]


def test_a_backed_off_group_counts_no_launching_node_beyond_the_instances_it_runs() -> None:
    """Of a backed-off group's desired capacity only its live instances are capacity coming: desired 3
    with one instance booting holds one pod, and the other two go west."""
    w = World()
    w.group("gpu-east", "p4d.24xlarge", max_size=8, gpu_taint=True)
    w.group("gpu-west", "p4d.24xlarge", region="us-west-2", max_size=8, gpu_taint=True)
    booting(w, "gpu-east", "us-east-1a")
    w.groups["gpu-east"]["DesiredCapacity"] = 3
    w.launch_failure("gpu-east", minutes_ago=1)
    jobs = w.gpu_pods("train", 3, gpus=8, cpu="90", memory="900Gi")

    result = w.plan()

    [west] = result.scale_up
    assert (west.group, west.from_size, west.to_size) == ("gpu-west", 0, 2)
    assert len([p for p in jobs if p not in west.pods]) == 1


@pytest.mark.parametrize("message", [o.MISSING_AMI, o.SUBNET_FULL], ids=["missing-ami", "subnet-full"])
def test_a_launch_failing_for_any_reason_is_no_capacity_coming(message: str) -> None:
    """EC2 Auto Scaling API Reference, DescribeScalingActivities / Activity: StatusCode ``Failed`` with a
    StatusMessage is how a launch failure shows, whatever EC2's reason (an AMI that does not exist, a
    subnet without free addresses, an invalid template...). cluster-autoscaler's AWS provider
    (cloudprovider/aws/auto_scaling_groups.go, isNodeGroupAvailable) takes any Failed activity since
    the group's last size change as the group unable to scale. Only capacity messages counted before, so
    the pod was planned onto the "launching" node for ever: no instance exists, so
    max_node_provision_minutes (planner/joins) never fired either. The reason says the whole group backs
    off, not a pool, since no pool of it can launch. (Review r24.)"""
    w = World()
    w.group("gpu-east", "p4d.24xlarge", max_size=8, desired=1, gpu_taint=True)  # desired 1, no instance
    w.group("gpu-west", "p4d.24xlarge", region="us-west-2", max_size=8, gpu_taint=True)
    w.launch_failure("gpu-east", minutes_ago=2, message=message)
    (job,) = w.gpu_pods("train", 1, gpus=8, cpu="90", memory="900Gi")

    result = w.plan()

    assert scale_up(result) == {"gpu-west": (0, 1, [job])}
    assert "gpu-east launch failed 2m ago, not for capacity" in result.scale_up[0].reason
    assert "no pool of it can launch" in result.scale_up[0].reason


def test_backoff_from_state_is_honoured_and_expires() -> None:
    w = World()
    w.group("gpu-east", "p4d.24xlarge", max_size=8, gpu_taint=True)
    w.group("gpu-west", "p4d.24xlarge", region="us-west-2", max_size=8, gpu_taint=True)
    until = (NOW + timedelta(minutes=10)).isoformat()
    w.state["groups"]["gpu-east"] = {"backoff_until": until, "reason": "launch timed out"}
    w.gpu_pods("train", 1, gpus=8, cpu="90", memory="900Gi")

    result = w.plan()
    assert set(scale_up(result)) == {"gpu-west"}
    assert "launch timed out" in result.scale_up[0].reason
    assert "us-east-1/gpu-east" in result.state.groups  # keyed by region from the state keyed by name

    after = w.plan(now=NOW + timedelta(minutes=11))
    assert set(scale_up(after)) == {"gpu-east"}
    assert "us-east-1/gpu-east" not in after.state.groups


def test_tainted_gpu_group_takes_only_pods_that_tolerate_it() -> None:
    w = World()
    w.group("gpu", "g5.12xlarge", max_size=5, gpu_taint=True)
    w.group("cpu", "m5.2xlarge", max_size=5)
    cpu_pods = w.pods("etl", 2, cpu="3", memory="8Gi")
    gpu_pods = w.gpu_pods("infer", 1, gpus=1, cpu="4", memory="16Gi")

    ups = scale_up(w.plan())

    assert sorted(ups["cpu"][2]) == sorted(cpu_pods)
    assert ups["gpu"][2] == gpu_pods


def test_cpu_pods_get_new_cpu_nodes_not_gpu_nodes_that_waste_a_little_less_cpu() -> None:
    """Four pods of 3 CPUs and 8 GiB, no GPU; an untainted g5.xlarge group (1 GPU, 4 vCPUs: one pod a
    node) and an m5.2xlarge group (8 vCPUs: two a node). By CPU alone the GPU group wastes a hair less
    (4 nodes, 23 % idle, against 2 nodes, 24 %), and the plan bought four GPU nodes ($1.006/h each in
    us-east-1) whose GPUs nothing uses instead of two m5.2xlarge ($0.384/h). Karpenter launches the
    cheapest type that fits; cluster-autoscaler's price expander gives any group with GPUs an unfitness
    of 1000 so that pods not asking for GPUs never get them (expander/price/price.go,
    gpuUnfitnessOverride). A group with GPUs still takes such pods when no other can, and they still
    fill the room left on GPU nodes the plan opens for GPU pods."""
    w = World(regions=("us-east-1",))
    w.group("gpu", "g5.xlarge", max_size=10)
    w.group("cpu", "m5.2xlarge", max_size=10)
    etl = w.pods("etl", 4, cpu="3", memory="8Gi")

    assert scale_up(w.plan()) == {"cpu": (0, 2, etl)}

    w.groups["cpu"]["MaxSize"] = 1
    ups = scale_up(w.plan())
    assert {g: (f, t) for g, (f, t, _) in ups.items()} == {"cpu": (0, 1), "gpu": (0, 2)}

    w.groups["cpu"]["MaxSize"] = 10
    w.group("gpu4", "g5.12xlarge", max_size=10)
    (infer,) = w.gpu_pods("infer", 1, gpus=4, cpu="8", memory="32Gi")
    assert scale_up(w.plan()) == {"gpu4": (0, 1, sorted([infer, *etl]))}


def test_cpu_pod_that_fits_only_a_tainted_group_stays_pending_with_the_taint_named() -> None:
    w = World()
    w.group("gpu", "p4d.24xlarge", max_size=5, gpu_taint=True)
    w.group("cpu", "m5.xlarge", max_size=5)
    (big,) = w.pods("big", 1, cpu="32", memory="64Gi")

    result = w.plan()

    assert result.scale_up == ()
    reason = pending_reasons(result)[big]
    assert "no node group can ever run" in reason
    assert "taint nvidia.com/gpu=present:NoSchedule not tolerated" in reason


def test_impossible_pod_is_reported_and_launches_nothing() -> None:
    w = World()
    w.group("gpu", "p4d.24xlarge", max_size=5, gpu_taint=True)
    (pod,) = w.gpu_pods("huge", 1, gpus=16, cpu="8", memory="64Gi")

    result = w.plan()

    assert result.scale_up == ()
    assert "a p4d.24xlarge node has too little nvidia.com/gpu (" in pending_reasons(result)[pod]


def test_node_selector_and_required_affinity_choose_the_group() -> None:
    w = World()
    w.group("spot", "m5.2xlarge", labels={"lifecycle": "spot", "tier": "3"})
    w.group("ondemand", "m5.2xlarge", labels={"lifecycle": "on-demand", "tier": "1"})
    (sel,) = w.pods("sel", 1, node_selector={"lifecycle": "on-demand"})
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "tier", "operator": "Gt", "values": ["2"]}]},
                ]
            }
        }
    }
    (aff,) = w.pods("aff", 1, affinity=affinity)
    notin = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "lifecycle", "operator": "NotIn", "values": ["spot"]}]}
                ]
            }
        }
    }
    (nin,) = w.pods("nin", 1, cpu="3", affinity=notin)

    ups = scale_up(w.plan())

    assert ups["ondemand"][2] == sorted([sel, nin])
    assert ups["spot"][2] == [aff]


def test_a_pod_whose_gt_value_is_no_label_value_launches_nothing() -> None:
    """kube-scheduler never places a pod whose only affinity term is ``tier Gt -1``: labels.NewRequirement
    refuses -1 as a label value, so the term matches no node. A node launched for it would sit idle."""
    w = World()
    w.group("ondemand", "m5.2xlarge", labels={"tier": "1"})
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "tier", "operator": "Gt", "values": ["-1"]}]}
                ]
            }
        }
    }
    (pod,) = w.pods("neg", 1, affinity=affinity)

    result = w.plan()

    assert result.scale_up == ()
    assert "required node affinity does not match" in pending_reasons(result)[pod]


def test_expendable_and_daemonset_pods_never_trigger_scale_up() -> None:
    w = World()
    w.group("cpu", "m5.2xlarge", max_size=5)
    (low,) = w.pods("backfill", 1, priority=-100)
    w.items.append(o.pod("agent-x", "kube-system", owner=("DaemonSet", "agent")))  # unbound DS pod

    result = w.plan()

    assert result.scale_up == ()
    assert "expendable_priority_cutoff" in pending_reasons(result)[low]
    assert "kube-system/agent-x" not in pending_reasons(result)


def test_max_size_is_never_exceeded_and_the_rest_is_reported() -> None:
    w = World(regions=("us-east-1",))
    w.group("cpu", "m5.2xlarge", max_size=2, nodes=1)
    pods = w.pods("w", 12, cpu="3", memory="4Gi")  # 2 per node: would need 6 nodes

    result = w.plan()

    assert scale_up(result)["cpu"][:2] == (1, 2)
    left = [p for p in pods if "exhausted" in pending_reasons(result).get(p, "")]
    assert len(left) == 12 - 2 - 2  # two fit on the existing node, two on the new one
    assert all("cpu at MaxSize 2" in pending_reasons(result)[p] for p in left)


def test_daemonset_overhead_is_reserved_on_new_nodes() -> None:
    w = World(regions=("us-east-1",))
    (existing,) = w.group("cpu", "m5.xlarge", nodes=1, max_size=10)
    w.items.append(o.daemonset_pod("fluent-bit-1", existing, ds="fluent-bit", cpu="500m", memory="512Mi"))
    w.items.append(o.pod("filler", cpu="3420m", memory="1Gi", node_name=existing))
    # m5.xlarge template: 4 vCPU - 100m reserve = 3900m; minus the DaemonSet's 500m: 3400m free.
    (pod,) = w.pods("needs", 1, cpu="3500m", memory="1Gi")

    result = w.plan()

    assert result.scale_up == ()
    assert "no node group can ever run" in pending_reasons(result)[pod]


def test_scale_down_drains_only_empty_long_idle_nodes_and_keeps_each_protected_kind() -> None:
    w = World()
    nodes = w.group("cpu", "m5.2xlarge", nodes=8, min_size=1, max_size=10)
    busy, idle, fresh_idle, disabled, humans, notready, young, idle2 = nodes
    w.items.append(o.pod("svc-0", cpu="2", memory="2Gi", node_name=busy, owner=("ReplicaSet", "svc")))
    for n in nodes:
        w.items.append(o.daemonset_pod(f"aws-node-{n[3:12]}", n))
        w.idle_since(n, 30)
    w.idle_since(fresh_idle, 3)
    del w.state["nodes"][idle2]  # unknown to the state: idle from now
    w.node(disabled)["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/scale-down-disabled"] = (
        "true"
    )
    w.cordon(humans, by_spillway=False)
    w.node(notready)["status"]["conditions"][0].update(
        status="False", lastTransitionTime=o.iso(NOW - timedelta(minutes=5))
    )
    w.idle_since(notready, 10)  # idle within scale_down_unready_minutes (20), its time while NotReady
    w.node(young)["metadata"]["creationTimestamp"] = o.iso(NOW - timedelta(minutes=4))

    result = w.plan(max_scale_in_fraction=1.0)

    assert [d.node for d in result.drain] == [idle]
    kept = kept_reasons(result)
    assert "workload" in kept[busy]
    assert "idle for 3m" in kept[fresh_idle]
    assert "idle for 0s" in kept[idle2]
    assert "scale-down-disabled" in kept[disabled]
    assert "cordoned by someone else" in kept[humans]
    assert "idle for 10m of the 20m needed (not Ready: scale_down_unready_minutes)" in kept[notready]
    assert "launched 4m ago" in kept[young]
    # Every node is accounted for exactly once.
    assert sorted([*kept, *(d.node for d in result.drain)]) == sorted(nodes)
    # Idle clocks carry over for empty nodes and start now for new ones; busy nodes drop out.
    assert busy not in result.state.nodes
    assert result.state.nodes[idle2].idle_since == NOW
    assert result.state.nodes[idle].idle_since == NOW - timedelta(minutes=30)


def test_scale_down_respects_min_size_and_the_per_plan_cap() -> None:
    w = World(regions=("us-east-1",))
    nodes = w.group("cpu", "m5.2xlarge", nodes=5, min_size=3, max_size=10)
    for n in nodes:
        w.idle_since(n, 60)

    capped = w.plan(max_scale_in_fraction=0.1)
    assert len(capped.drain) == 1  # 10% of 5 rounds down to 0: the cap is at least one node
    assert sum("capped" in r for r in kept_reasons(capped).values()) == 4

    generous = w.plan(max_scale_in_fraction=1.0)
    assert len(generous.drain) == 2  # 5 -> 3 = MinSize
    assert sum("MinSize 3" in r for r in kept_reasons(generous).values()) == 3


def test_overflow_region_is_drained_first_to_bring_work_home() -> None:
    w = World()
    east = w.group("cpu-east", "m5.2xlarge", nodes=2, max_size=10)
    west = w.group("cpu-west", "m5.2xlarge", region="us-west-2", nodes=2, max_size=10)
    for n in east + west:
        w.idle_since(n, 60)

    result = w.plan(max_scale_in_fraction=1.0)

    assert [d.group for d in result.drain][:2] == ["cpu-west", "cpu-west"]
    assert {d.instance_id for d in result.drain} >= {o.instance_id("cpu-west-0"), o.instance_id("cpu-west-1")}


def test_nodes_with_workload_are_never_drained_even_if_idle_in_state() -> None:
    w = World(regions=("us-east-1",))
    (n,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=3)
    w.idle_since(n, 600)
    w.items.append(o.pod("long-job", cpu="1", memory="1Gi", node_name=n))
    w.group("other", "m5.2xlarge", nodes=0)

    result = w.plan()

    assert result.drain == ()
    assert n not in result.state.nodes


def test_same_input_gives_the_same_plan_byte_for_byte() -> None:
    w = World()
    w.group("gpu-east", "p4d.24xlarge", max_size=2, gpu_taint=True)
    w.group("gpu-west", "p4d.24xlarge", region="us-west-2", max_size=8, gpu_taint=True)
    w.group("cpu", "m5.2xlarge", nodes=3)
    w.gpu_pods("t", 5, gpus=8, cpu="90", memory="900Gi")
    w.gpu_pods("n", 7, gpus=1)
    w.pods("etl", 9, cpu="3")
    a = json.dumps(w.plan().to_dict())
    w.items.reverse()
    b = json.dumps(w.plan().to_dict())
    assert a == b


def test_pods_bound_to_unknown_or_terminal_phase_do_not_count() -> None:
    w = World(regions=("us-east-1",))
    (n,) = w.group("cpu", "m5.2xlarge", nodes=1)
    w.items.append(o.pod("done", cpu="7", memory="1Gi", node_name=n, phase="Succeeded"))
    (p,) = w.pods("p", 1, cpu="7", memory="1Gi")

    result = w.plan()

    assert result.scale_up == ()
    assert n in pending_reasons(result)[p]


def test_tolerating_pod_still_fits_untainted_groups() -> None:
    w = World(regions=("us-east-1",))
    w.group("cpu", "m5.2xlarge")
    (p,) = w.pods("tol", 1, tolerations=[GPU_TOLERATION])
    assert scale_up(w.plan())["cpu"][2] == [p]


def test_a_node_a_plan_drained_is_not_drained_again_before_its_drain_cordons_it() -> None:
    w = World(regions=("us-east-1",))
    nodes = w.group("cpu", "m5.2xlarge", nodes=3, max_size=10)
    for n in nodes:
        w.idle_since(n, 60)

    first = w.plan(max_scale_in_fraction=0.3)
    (drained,) = [d.node for d in first.drain]
    assert first.state.nodes[drained].draining_since == NOW

    # The next tick comes before the scale-down execution cordoned the node.
    w.state = first.state.to_wire()
    second = w.plan(now=NOW + timedelta(seconds=30), max_scale_in_fraction=0.3)
    assert drained not in [d.node for d in second.drain]
    assert "drain planned 30s ago" in kept_reasons(second)[drained]
    assert len(second.drain) == 1  # another idle node, not the same one

    # A drain that never got to cordon the node (rejected, failed early) lets go after the claim.
    w.state = second.state.to_wire()
    later = w.plan(now=NOW + timedelta(minutes=25), max_scale_in_fraction=1.0)
    assert drained in [d.node for d in later.drain]


def test_nodes_of_no_managed_group_are_never_drained() -> None:
    w = World(regions=("us-east-1",))
    (managed,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=3)
    # A group of another cluster (not tagged for this one), and an instance in no group at all, both
    # the same shape as the managed group's nodes.
    w.groups["theirs"] = o.asg(
        "theirs", cluster="other-cluster", desired=1, instances=[o.instance_id("theirs-0")]
    )
    theirs = w.node_for("theirs", o.instance_id("theirs-0"), "m5.2xlarge")
    stray = w.node_for("cpu", o.instance_id("stray-0"), "m5.2xlarge")
    for n in (managed, theirs, stray):
        w.idle_since(n, 600)

    result = w.plan(max_scale_in_fraction=1.0)

    assert [d.node for d in result.drain] == [managed]
    kept = {k.node: k.code for k in result.kept}
    assert kept == {theirs: "unmanaged", stray: "unmanaged"}


def test_a_running_pod_without_requests_keeps_its_node() -> None:
    w = World(regions=("us-east-1",))
    busy, empty = w.group("cpu", "m5.2xlarge", nodes=2, max_size=3)
    best_effort = o.pod("best-effort", node_name=busy, owner=("ReplicaSet", "web"))
    best_effort["spec"]["containers"][0]["resources"] = {}
    best_effort["status"]["phase"] = "Running"
    w.items.append(best_effort)
    for n in (busy, empty):
        w.items.append(o.daemonset_pod(f"aws-node-{n[3:12]}", n))
        w.idle_since(n, 600)

    result = w.plan(max_scale_in_fraction=1.0)

    assert [d.node for d in result.drain] == [empty]
    (kept,) = result.kept
    assert (kept.node, kept.code) == (busy, "workload")
    assert "runs 1 workload pod(s)" in kept.reason


def test_a_node_running_only_mirror_and_daemonset_pods_is_idle() -> None:
    w = World(regions=("us-east-1",))
    (n,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=3)
    w.items.append(
        o.pod(
            "kube-proxy",
            "kube-system",
            node_name=n,
            owner=("Node", n),
            annotations={"kubernetes.io/config.mirror": "abc"},
        )
    )
    w.items.append(o.daemonset_pod("aws-node-x", n))
    w.idle_since(n, 600)

    result = w.plan(max_scale_in_fraction=1.0)

    assert [d.node for d in result.drain] == [n]


def test_a_node_running_only_pods_annotated_daemonset_pod_is_idle() -> None:
    """A DaemonSet-like controller's pods annotated ``cluster-autoscaler.kubernetes.io/daemonset-pod:
    "true"`` keep no node busy, as cluster-autoscaler's IsDaemonSetPod reads them."""
    w = World(regions=("us-east-1",))
    (n,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=3)
    w.items.append(
        o.pod(
            "datadog-agent-x7k2p",
            "monitoring",
            node_name=n,
            owner=("ExtendedDaemonSetReplicaSet", "datadog-agent-6f8d"),
            annotations={"cluster-autoscaler.kubernetes.io/daemonset-pod": "true"},
        )
    )
    w.idle_since(n, 600)

    result = w.plan(max_scale_in_fraction=1.0)

    assert [d.node for d in result.drain] == [n]


# --- orphaned drains: Spillway's cordon outlived every drain that could own it ---------------------

ORPHAN_BOUND = 60  # orphaned_drain_minutes in these scenarios


def _orphaned(w: World, node: str, minutes_ago: float) -> None:
    """Spillway's cordon and taint on ``node``, made ``minutes_ago`` (an execution stopped mid-drain)."""
    w.cordon(node, by_spillway=True)
    stamp = o.iso(NOW - timedelta(minutes=minutes_ago))
    w.node(node)["metadata"]["annotations"]["spillway.io/cordoned"] = f"{stamp} drain: idle"


def test_an_idle_orphaned_drain_is_finished_and_counts_once_in_min_size_headroom() -> None:
    w = World(regions=("us-east-1",))
    nodes = w.group("cpu", "m5.2xlarge", nodes=3, min_size=2, max_size=10)
    for n in nodes:
        w.idle_since(n, 600)
    orphan = nodes[0]
    _orphaned(w, orphan, minutes_ago=ORPHAN_BOUND + 1)

    result = w.plan(orphaned_drain_minutes=ORPHAN_BOUND, max_scale_in_fraction=1.0)

    # 3 nodes, MinSize 2: one may go, and it is the orphan (counted once, not as draining *and* taken).
    assert [d.node for d in result.drain] == [orphan]
    assert result.drain[0].reason.startswith("orphaned-drain-finished: Spillway cordoned it 61m ago")
    assert result.uncordon == ()
    assert result.state.nodes[orphan].draining_since == NOW
    # The next plan sees the claim: the drain it started owns the node again.
    w.state = result.state.to_wire()
    later = w.plan(now=NOW + timedelta(minutes=5), orphaned_drain_minutes=ORPHAN_BOUND)
    assert later.drain == () and kept_reasons(later)[orphan] == "being drained by Spillway"


def test_an_orphaned_drain_younger_than_the_bound_is_still_being_drained() -> None:
    w = World(regions=("us-east-1",))
    nodes = w.group("cpu", "m5.2xlarge", nodes=3, max_size=10)
    _orphaned(w, nodes[0], minutes_ago=ORPHAN_BOUND - 1)
    w.node(nodes[1])["metadata"]["annotations"]["spillway.io/cordoned"] = "drain"  # an old value: no time
    w.cordon(nodes[1], by_spillway=False)

    result = w.plan(orphaned_drain_minutes=ORPHAN_BOUND)

    assert result.drain == () and result.uncordon == ()
    assert kept_reasons(result)[nodes[0]] == "being drained by Spillway"
    assert kept_reasons(result)[nodes[1]] == "being drained by Spillway"


def test_a_busy_or_min_size_bound_orphaned_drain_is_restored_by_uncordoning() -> None:
    w = World(regions=("us-east-1",))
    nodes = w.group("cpu", "m5.2xlarge", nodes=3, min_size=3, max_size=10)
    busy, at_min = nodes[0], nodes[1]
    for n in nodes:
        w.idle_since(n, 600)
    w.items.append(o.pod("db-0", cpu="1", memory="1Gi", node_name=busy, owner=("StatefulSet", "db")))
    _orphaned(w, busy, minutes_ago=ORPHAN_BOUND * 30)
    _orphaned(w, at_min, minutes_ago=ORPHAN_BOUND * 30)

    result = w.plan(orphaned_drain_minutes=ORPHAN_BOUND, max_scale_in_fraction=1.0)

    assert result.drain == ()
    assert [(u.node, u.group) for u in result.uncordon] == sorted([(busy, "cpu"), (at_min, "cpu")])
    codes_of = {k.node: k.code for k in result.kept}
    assert codes_of[busy] == codes_of[at_min] == "orphaned-drain-restored"
    why = {u.node: u.reason for u in result.uncordon}
    assert "not drained now (runs 1 workload pod(s)" in why[busy]
    assert "not drained now (group cpu at MinSize 3)" in why[at_min]
    # each restore names the cordon it restores from: the scale-up takes off that one only
    seen = {
        n: cordon_digest(w.node(n)["metadata"]["annotations"]["spillway.io/cordoned"]) for n in (busy, at_min)
    }
    assert {u.node: u.cordon for u in result.uncordon} == seen and None not in seen.values()
    assert result.uncordon[0].to_dict()["cordon"] == seen[result.uncordon[0].node]


def test_a_scale_down_disabled_orphan_is_restored_and_a_human_cordon_never_is() -> None:
    w = World(regions=("us-east-1",))
    nodes = w.group("cpu", "m5.2xlarge", nodes=3, max_size=10)
    for n in nodes:
        w.idle_since(n, 600)
    disabled, human = nodes[0], nodes[1]
    _orphaned(w, disabled, minutes_ago=ORPHAN_BOUND * 2)
    w.node(disabled)["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/scale-down-disabled"] = (
        "true"
    )
    w.cordon(human, by_spillway=False)

    result = w.plan(orphaned_drain_minutes=ORPHAN_BOUND)

    assert [u.node for u in result.uncordon] == [disabled]
    assert kept_reasons(result)[human] == "cordoned by someone else; Spillway leaves it alone"
    assert human not in [d.node for d in result.drain]


# --- a give-back's cordon: a short lease, then an orphan ------------------------------------------

GANG_GIVE_BACK = "gang give-back ml/train (attempt spillway-0123abcd)"
BACKOFF_GIVE_BACK = "scale-up back-off gpu (up-p1-1-us-east-1-gpu)"


def _given_back(w: World, node: str, minutes_ago: float, why: str = GANG_GIVE_BACK) -> None:
    """The cordon a give-back (a gang's, a scale-up's back-off) makes before it reads a member's pods:
    ``unschedulable`` and Spillway's annotation, no draining taint, made ``minutes_ago``."""
    w.node(node)["spec"]["unschedulable"] = True
    stamp = o.iso(NOW - timedelta(minutes=minutes_ago))
    w.node(node)["metadata"]["annotations"][CORDONED_BY_SPILLWAY] = f"{stamp} {why}"


@pytest.mark.parametrize("hours_ago", [1, 12, 26])
@pytest.mark.parametrize("why", [GANG_GIVE_BACK, BACKOFF_GIVE_BACK])
def test_an_idle_node_a_give_back_left_cordoned_is_scaled_down_like_its_twin(
    hours_ago: int, why: str
) -> None:
    """A kept member's give-back cordon that stayed (its uncordon failed, or the Lambda died after the
    cordons) is no drain: past the give-back's lease it is an orphan, and the node, idle for 10 h, goes
    as its uncordoned twin would, long before orphaned_drain_minutes (27 h)."""
    w = World(regions=("us-east-1",))
    left, twin, other = w.group("gpu", "g5.xlarge", nodes=3, min_size=0, max_size=10)
    for n in (left, twin, other):
        w.idle_since(n, 600)
    _given_back(w, left, minutes_ago=hours_ago * 60, why=why)

    result = w.plan(max_scale_in_fraction=1.0)

    assert left in [d.node for d in result.drain]
    assert next(d.reason for d in result.drain if d.node == left).startswith("orphaned-drain-finished")


@pytest.mark.parametrize("stamp", ["garbage", "2026-13-45T99:00:00Z", "2126-03-02T09:30:00Z"])
def test_a_give_back_cordon_whose_time_cannot_be_read_or_lies_ahead_is_an_orphan(stamp: str) -> None:
    """A give-back's cordon of a time not known, or far ahead (an annotation edited by hand): held as a
    give-back under way, the node was never drained, restored or reused, and counted as a drain under
    way for good, holding the group above its MinSize (review of the give-back lease). An orphan."""
    w = World(regions=("us-east-1",))
    left, twin = w.group("gpu", "g5.xlarge", nodes=2, min_size=1, max_size=10)
    for n in (left, twin):
        w.idle_since(n, 600)
    w.node(left)["spec"]["unschedulable"] = True
    w.node(left)["metadata"]["annotations"][CORDONED_BY_SPILLWAY] = f"{stamp} {GANG_GIVE_BACK}"

    result = w.plan(max_scale_in_fraction=1.0)

    assert [d.node for d in result.drain] == [left]


def test_a_give_back_cordon_left_behind_does_not_hold_the_group_above_min_size() -> None:
    """3 idle nodes, MinSize 2: one goes. The one a give-back left cordoned an hour ago is no drain under
    way (it took the MinSize headroom and a budget for 27 h): it is the one drained, counted once."""
    w = World(regions=("us-east-1",))
    left, *others = w.group("gpu", "g5.xlarge", nodes=3, min_size=2, max_size=10)
    for n in (left, *others):
        w.idle_since(n, 600)
    _given_back(w, left, minutes_ago=60, why=BACKOFF_GIVE_BACK)

    result = w.plan(max_scale_in_fraction=1.0)

    assert [d.node for d in result.drain] == [left]


def test_a_busy_node_a_give_back_left_cordoned_is_restored() -> None:
    """A kept member runs a pod: past the lease its leftover cordon is taken off (orphaned-drain-restored),
    so pending pods may use the rest of it and scale-down judges it like any node."""
    w = World(regions=("us-east-1",))
    (busy,) = w.group("gpu", "g5.xlarge", nodes=1, min_size=0, max_size=10)
    w.items.append(o.pod("web-0", cpu="1", memory="1Gi", node_name=busy, owner=("ReplicaSet", "web-5d9c")))
    _given_back(w, busy, minutes_ago=60)

    result = w.plan()

    assert [(u.node, u.group) for u in result.uncordon] == [(busy, "gpu")]
    assert {k.node: k.code for k in result.kept}[busy] == "orphaned-drain-restored"


def test_a_give_backs_cordon_is_told_from_a_drains_and_kept_through_the_stored_snapshot() -> None:
    """The planner knows a give-back's cordon by its words after the time, through the snapshot it
    stores, and holds it for GIVE_BACK_LEASE_MINUTES from the time it was made, not a moment more."""
    from spillway.model.cluster import NodeInfo
    from spillway.model.k8s import GIVE_BACK_LEASE_MINUTES, Node

    def info(why: str) -> NodeInfo:
        node = o.node("n1", instance="i-0123456789abcdef0", unschedulable=True)
        node["metadata"].setdefault("annotations", {})[CORDONED_BY_SPILLWAY] = f"{o.iso(NOW)} {why}"
        return NodeInfo.from_dict(NodeInfo.from_node(Node.model_validate(node)).to_dict())

    given, drained = info(BACKOFF_GIVE_BACK), info("drain p1-n1: idle for 10m")
    lease = timedelta(minutes=GIVE_BACK_LEASE_MINUTES)
    assert (
        given.cordon_give_back
        and not drained.cordon_give_back
        and not info("scale-up back-offs").cordon_give_back
    )
    assert given.giving_back(NOW + lease - timedelta(seconds=1)) and not given.giving_back(NOW + lease)
    assert not drained.giving_back(NOW)


@pytest.mark.parametrize("why", [GANG_GIVE_BACK, BACKOFF_GIVE_BACK])
def test_a_plan_taken_during_a_give_back_leaves_its_node_alone(why: str) -> None:
    """A snapshot taken between the give-back's cordon and its terminate: the node is about to go. It is
    not uncordoned for a pending pod (kube-scheduler would bind the pod, and the give-back, which read
    no pod there, terminate it), nor drained, nor restored, however idle."""
    w = World(regions=("us-east-1",))
    (member,) = w.group("gpu", "g5.xlarge", nodes=1, min_size=0, max_size=10)
    w.idle_since(member, 600)
    _given_back(w, member, minutes_ago=2, why=why)
    w.items.append(o.pod("web-0", cpu="1", memory="1Gi", node_name=None, owner=("ReplicaSet", "web-5d9c")))

    result = w.plan(max_scale_in_fraction=1.0)

    assert result.uncordon == () and result.drain == ()
    assert kept_reasons(result)[member].startswith("being given back")


def test_orphaned_drain_minutes_must_be_positive() -> None:
    import pytest

    from spillway.config import PlannerConfig
    from spillway.model.drain import MAX_EXECUTION_SECONDS

    # above the longest a drain runs from its validation (and its cordon) on: 26 h
    assert PlannerConfig().orphaned_drain_minutes * 60 > MAX_EXECUTION_SECONDS == 93_600
    with pytest.raises(ValueError, match="orphaned_drain_minutes"):
        PlannerConfig(orphaned_drain_minutes=0)


def test_a_node_held_by_a_drain_no_plan_started_is_not_uncordoned_for_pending_pods() -> None:
    """A Spot warning's drain cordoned the node and evicted its pods, which now wait. A plan reused the
    node, Spillway-cordoned and Ready, before launching: its uncordon cancelled the drain and put the pods
    back on an instance EC2 reclaims within two minutes. A plan's own drain is still reused. (Found by
    review.)"""
    for annotation, reused in (("drain: spot interruption warning e-1", False), ("drain: idle 12 min", True)):
        w = World()
        interrupted, other = w.group("spot", "m5.2xlarge", nodes=2, max_size=5)
        w.cordon(interrupted, by_spillway=True)
        held = "held " if not reused else ""
        stamp = (NOW - timedelta(seconds=30)).isoformat().replace("+00:00", "Z")
        w.node(interrupted)["metadata"]["annotations"][CORDONED_BY_SPILLWAY] = f"{stamp} {held}{annotation}"
        w.items.append(o.pod("resident", cpu="7", memory="8Gi", node_name=other))
        w.pods("web", 3, cpu="2", memory="4Gi", owner=("ReplicaSet", "web-5d9c"))

        result = w.plan()

        assert (interrupted in {u.node for u in result.uncordon}) is reused, annotation
        assert scale_up(result).get("spot", (2, 2))[1] == (2 if reused else 3)  # held: a new node


def test_a_failed_launch_auto_scaling_made_good_in_another_zone_does_not_skip_the_group() -> None:
    """A raise of a two-zone group to 2: its launch in us-east-1a Failed for capacity, and Auto Scaling
    launched in us-east-1b instead (balanced-best-effort: "If launches fail in an Availability Zone,
    Auto Scaling will attempt to launch in another healthy Availability Zone instead"), so the group
    runs both instances its desired capacity asks. The scale-up's verify took that as no failure and
    backed nothing off, but the plan skipped the whole group for launch_failure_backoff_minutes after
    the Failed activity and sent the next pod to another region. cluster-autoscaler reads a group's
    scaling activities only while it has fewer instances than its desired capacity (its AWS provider's
    placeholders for desired instances never started: auto_scaling_groups.go,
    createPlaceholdersForDesiredNonStartedInstances, isNodeGroupAvailable), so a group whose failed
    launch was made good is not backed off. A group still short stays skipped."""
    w = World()
    w.group("gpu-east", "p4d.24xlarge", max_size=8, gpu_taint=True, zones=["us-east-1a", "us-east-1b"])
    w.group("gpu-west", "p4d.24xlarge", region="us-west-2", max_size=8, gpu_taint=True)
    first = booting(w, "gpu-east", "us-east-1b")
    w.launch_failure("gpu-east", minutes_ago=4)  # names us-east-1a
    east = w.groups["gpu-east"]
    w.activities.append(o.launched(east, first, NOW - timedelta(minutes=5)))  # the raise's other launch
    w.gpu_pods("train", 2, gpus=8, cpu="90", memory="900Gi")
    east["DesiredCapacity"] = 2

    short = w.plan()  # one instance of two: the failed launch is not made good yet
    assert {s.group: (s.from_size, s.to_size) for s in short.scale_up} == {"gpu-west": (0, 1)}

    second = booting(w, "gpu-east", "us-east-1b")
    w.activities.append(o.launched(east, second, NOW - timedelta(minutes=3)))
    w.gpu_pods("more", 1, gpus=8, cpu="90", memory="900Gi")

    made_good = w.plan()

    assert {s.group: (s.from_size, s.to_size) for s in made_good.scale_up} == {"gpu-east": (2, 3)}
    assert "launch failed" not in made_good.scale_up[0].reason
    # the plan function reads the groups back from the stored snapshot: the same decision there
    snapshot, groups, cfg, state = w.parsed()
    stored = [NodeGroup.from_dict(json.loads(json.dumps(g.to_dict()))) for g in groups]
    assert stored == groups
    assert set(scale_up(plan(snapshot, stored, cfg, state, NOW))) == {"gpu-east"}


def test_a_group_at_its_desired_capacity_with_no_launch_since_its_failure_stays_skipped() -> None:
    """A failed launch followed by no launch that succeeded (the raise given back, desired back at the
    instances it runs) is not made good: the group stays skipped for the back-off window."""
    w = World()
    w.group("gpu-east", "p4d.24xlarge", max_size=8, gpu_taint=True, zones=["us-east-1a", "us-east-1b"])
    w.group("gpu-west", "p4d.24xlarge", region="us-west-2", max_size=8, gpu_taint=True)
    first = booting(w, "gpu-east", "us-east-1b")
    w.activities.append(o.launched(w.groups["gpu-east"], first, NOW - timedelta(minutes=5)))
    w.launch_failure("gpu-east", minutes_ago=4)
    w.groups["gpu-east"]["DesiredCapacity"] = 1
    w.gpu_pods("train", 2, gpus=8, cpu="90", memory="900Gi")

    result = w.plan()

    assert "gpu-east" not in scale_up(result)


def _raised_at(activity: dict[str, Any], at: datetime, before: int, after: int) -> dict[str, Any]:
    """``activity`` as Auto Scaling writes a launch of a raise: its Cause opens with the desired capacity
    change and when it was made (DescribeScalingActivities, Activity.Cause: "At 2020-10-30T19:35:51Z a
    user request update of AutoScalingGroup constraints to min: 0, max: 16, desired: 16 changing the
    desired capacity from 0 to 16.  At ... an instance was started in response to a difference between
    desired and actual capacity, increasing the capacity from 0 to 16.")."""
    return {
        **activity,
        "Cause": f"At {o.iso(at)} a user request explicitly set group desired capacity changing the desired "
        f"capacity from {before} to {after}.  At {o.iso(at + timedelta(seconds=5))} an instance was started "
        f"in response to a difference between desired and actual capacity, increasing the capacity from "
        f"{before} to {after}.",
    }


def test_a_failed_launch_before_the_groups_latest_raise_does_not_decide_it_while_short() -> None:
    """Eight minutes ago a raise of gpu-east to 1 failed in one zone and Auto Scaling made it good in the
    other (a Ready node, busy). A minute ago a plan raised the group to 3 for two more pods: one
    instance is booting, the other not started yet, so the group is short of its desired capacity.
    The failure from before that raise counted as the group's again (made good no longer, the group
    being short), so the plan skipped gpu-east, counted only its booting instance as capacity coming
    and launched the other pod in us-west-2: two launches for one pod. cluster-autoscaler weighs only
    the activities that started after its latest SetDesiredCapacity (auto_scaling_groups.go,
    isNodeGroupAvailable: an activity that started before the group's lastUpdateTime ends the
    search); only this raise's launches decide it."""
    w = World()
    [node] = w.group("gpu-east", "p4d.24xlarge", nodes=1, max_size=8, gpu_taint=True,
                     zones=["us-east-1b", "us-east-1a"])  # fmt: skip
    w.group("gpu-west", "p4d.24xlarge", region="us-west-2", max_size=8, gpu_taint=True)
    east = w.groups["gpu-east"]
    first = east["Instances"][0]["InstanceId"]
    failed_at, raised_at = NOW - timedelta(minutes=8), NOW - timedelta(minutes=1)
    w.activities.append(_raised_at(o.failed_launch(east, failed_at), failed_at, 0, 1))
    w.activities.append(
        _raised_at(o.launched(east, first, failed_at + timedelta(seconds=20)), failed_at, 0, 1)
    )
    w.gpu_pods("busy", 1, gpus=8, cpu="90", memory="900Gi", node_name=node)
    booted = booting(w, "gpu-east", "us-east-1b")
    under_way = {**o.launched(east, booted, raised_at + timedelta(seconds=5)), "StatusCode": "InProgress"}
    del under_way["EndTime"]
    w.activities.append(_raised_at(under_way, raised_at, 1, 3))
    east["DesiredCapacity"] = 3
    jobs = w.gpu_pods("train", 2, gpus=8, cpu="90", memory="900Gi")

    result = w.plan()

    assert scale_up(result) == {}, result.scale_up
    assert all("already launching in gpu-east" in pending_reasons(result)[p] for p in jobs)
    # the plan function reads the groups back from the stored snapshot: the same decision there
    snapshot, groups, cfg, state = w.parsed()
    stored = [NodeGroup.from_dict(json.loads(json.dumps(g.to_dict()))) for g in groups]
    assert stored == groups
    assert scale_up(plan(snapshot, stored, cfg, state, NOW)) == {}


def test_a_raise_is_read_from_the_cause_auto_scaling_gives_its_launches() -> None:
    """The desired capacity change a launch's Cause opens with, in the wordings AWS documents (the AWS
    CLI's describe-scaling-activities example; SetDesiredCapacity's "explicitly set"), is the raise;
    a lowering, or a launch that names no change (a replacement), is none."""
    from spillway.model.nodegroup import raised_at

    documented = (
        "At 2020-10-30T19:35:51Z a user request update of AutoScalingGroup constraints to min: 0, max: 16, "
        "desired: 16 changing the desired capacity from 0 to 16.  At 2020-10-30T19:36:07Z an instance was "
        "started in response to a difference between desired and actual capacity, increasing the capacity "
        "from 0 to 16."
    )
    assert raised_at(documented) == datetime(2020, 10, 30, 19, 35, 51, tzinfo=UTC)
    explicit = (
        "At 2026-11-02T11:59:00Z a user request explicitly set group desired capacity changing the desired "
        "capacity from 1 to 3.  At 2026-11-02T11:59:05Z an instance was started in response to a "
        "difference between desired and actual capacity, increasing the capacity from 1 to 3."
    )
    assert raised_at(explicit) == datetime(2026, 11, 2, 11, 59, tzinfo=UTC)
    assert raised_at(explicit.replace("from 1 to 3", "from 3 to 1")) is None
    assert (
        raised_at(
            "At 2026-11-02T11:59:05Z an instance was started in response to a difference between desired and "
            "actual capacity, increasing the capacity from 1 to 3."
        )
        is None
    )
