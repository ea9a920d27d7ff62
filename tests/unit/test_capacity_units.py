"""Groups whose capacity is not a count of instances are refused, by name of the field that says so.

AWS: with ``MixedInstancesPolicy.LaunchTemplate.Overrides[].WeightedCapacity`` the group's DesiredCapacity,
MinSize and MaxSize are in the weights' units (asg-instance-weighting.html), and an instance keeps its
weight (``Instances[].WeightedCapacity``) after its override is changed or removed; with
``DesiredCapacityType`` vcpu or memory-mib they count vCPUs or MiB. Spillway counts nodes: such a group
would show capacity "launching" that never comes, grow by the wrong amount and be drained below its
MinSize. It is not scaled at all, and the plan says why (``refused_groups``, the pods and the nodes).
"""

from __future__ import annotations

from typing import Any

from plan_world import World, kept_reasons, pending_codes, pending_reasons, scale_up

from spillway.local import objects as o
from spillway.model.aws import AutoScalingGroup, bundled_instance_types
from spillway.model.nodegroup import NodeGroup, build_node_groups
from spillway.planner import codes

WEIGHT_FIELD = "MixedInstancesPolicy.LaunchTemplate.Overrides[1].WeightedCapacity"


def weighted(
    w: World, name: str = "weighted", weights: tuple[str | None, ...] = ("1", "2"), **kw: Any
) -> list[str]:
    """A group of m5.2xlarge nodes whose overrides m5.xlarge and m5.2xlarge weigh ``weights``."""
    nodes = w.group(name, "m5.2xlarge", **kw)
    overrides = []
    for itype, weight in zip(("m5.xlarge", "m5.2xlarge"), weights, strict=True):
        overrides.append({"InstanceType": itype, **({"WeightedCapacity": weight} if weight else {})})
    w.groups[name]["MixedInstancesPolicy"] = {
        "LaunchTemplate": {
            "LaunchTemplateSpecification": {"LaunchTemplateName": "lt"},
            "Overrides": overrides,
        },
        "InstancesDistribution": {"OnDemandPercentageAboveBaseCapacity": 100},
    }
    del w.groups[name]["LaunchTemplate"]
    return nodes


def built(w: World, name: str) -> NodeGroup:
    asg = AutoScalingGroup.model_validate(w.groups[name])
    (group,) = build_node_groups([asg], [], bundled_instance_types(), {}, "ml")
    return group


def test_a_weighted_group_is_refused_naming_the_override_and_nothing_launches_for_it() -> None:
    w = World()
    (node,) = weighted(w, nodes=1, desired=2)  # one m5.2xlarge (weight 2) fills DesiredCapacity 2
    w.items.append(o.pod("busy", "default", cpu="7", memory="1Gi", node_name=node, phase="Running"))
    (pod,) = w.pods("web", 1, cpu="3")

    group = built(w, "weighted")
    result = w.plan()

    assert group.refusal.startswith(f"{WEIGHT_FIELD}: '2'")
    assert group.refusal in group.problems
    assert scale_up(result) == {}
    assert pending_codes(result)[pod] == codes.NO_GROUP_FITS  # not fits-launching: nothing launches
    assert f"weighted: not scaled by Spillway: {WEIGHT_FIELD}" in pending_reasons(result)[pod]
    assert [(r.group, r.region) for r in result.refused_groups] == [("weighted", "us-east-1")]
    assert WEIGHT_FIELD in result.refused_groups[0].reason
    assert result.to_dict()["refused_groups"][0]["group"] == "weighted"
    assert not result.placements or all(p.group != "weighted" for p in result.placements)


def test_an_idle_node_of_a_weighted_group_is_kept_saying_why() -> None:
    w = World()
    nodes = weighted(w, nodes=2, desired=3)  # weights 1+2 or 2+1: MinSize 1 is units too
    for node in nodes:
        w.idle_since(node, 600)

    result = w.plan()

    assert result.drain == ()
    for node in nodes:
        assert f"group weighted is not scaled by Spillway: {WEIGHT_FIELD}" in kept_reasons(result)[node]
    assert {k.code for k in result.kept} == {codes.UNMANAGED}


def test_a_pod_goes_to_another_group_when_the_weighted_one_is_refused() -> None:
    w = World()
    weighted(w)
    w.group("plain", "m5.2xlarge")
    (pod,) = w.pods("web", 1, cpu="3")

    assert scale_up(w.plan()) == {"plain": (0, 1, [pod])}


def test_desired_capacity_in_vcpus_is_refused_naming_desired_capacity_type() -> None:
    w = World()
    nodes = w.group("abis", "m5.2xlarge", nodes=2, desired=16, max_size=64)  # 2 x 8 vCPU
    w.groups["abis"]["DesiredCapacityType"] = "vcpu"
    for node in nodes:
        w.items.append(o.pod(f"busy-{node}", "default", cpu="7", node_name=node, phase="Running"))
    (pod,) = w.pods("web", 1, cpu="3")

    result = w.plan()

    assert built(w, "abis").refusal.startswith("DesiredCapacityType: 'vcpu'")
    assert pending_codes(result)[pod] == codes.NO_GROUP_FITS
    assert "abis: not scaled by Spillway: DesiredCapacityType: 'vcpu'" in pending_reasons(result)[pod]


def test_an_instance_that_keeps_a_weight_its_override_lost_refuses_the_group() -> None:
    w = World()
    weighted(w, nodes=1, desired=2, weights=(None, None))  # the weights were removed since it launched
    w.groups["weighted"]["Instances"][0]["WeightedCapacity"] = "2"

    assert built(w, "weighted").refusal.startswith("Instances[0].WeightedCapacity: '2'")


def test_weights_of_one_and_units_count_instances_and_the_group_scales() -> None:
    w = World()
    weighted(w, weights=("1", "1"))
    w.groups["weighted"]["DesiredCapacityType"] = "units"
    (pod,) = w.pods("web", 1, cpu="3")

    assert built(w, "weighted").refusal == ""
    result = w.plan()
    assert scale_up(result) == {"weighted": (0, 1, [pod])}
    assert result.refused_groups == () and "refused_groups" not in result.to_dict()


def test_the_refusal_is_kept_in_the_stored_snapshot() -> None:
    w = World()
    weighted(w)
    group = built(w, "weighted")

    wire = group.to_dict()

    assert wire["refusal"] == group.refusal
    assert NodeGroup.from_dict(wire) == group
    assert "refusal" not in built(World(groups={"p": o.asg("p", cluster="ml")}), "p").to_dict()
