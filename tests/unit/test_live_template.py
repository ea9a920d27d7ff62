"""A group with a usable node of its own takes that node's allocatable as its template's, as
cluster-autoscaler builds a group's node info from a real node; only a group without one keeps the
estimate from its instance type (spillway.model.livetemplate).

The worlds are built as `kubectl` and the AWS CLI print them and parsed as `spillway plan` parses them
(plan_world), so the rules are checked on the input path the planner is given."""

from __future__ import annotations

from typing import Any

from plan_world import World, pending_codes, scale_up

from spillway.local import objects as o
from spillway.model.nodegroup import NodeGroup, TemplateNode
from spillway.planner import codes

MIB = 2**20 * 1000  # the planner's milli-units
GIB = 1024 * MIB
EPHEMERAL = 95551679124 * 1000  # what plan_world's nodes report
# the estimate for an m5.2xlarge (EKS reserve, 7.5 % VM overhead): 32768 - 2458 - 255 - 11 x 58 - 100 MiB
M5_2XL_ESTIMATE = 29317 * MIB


def group_of(world: World, name: str = "g", **config: Any) -> NodeGroup:
    _, groups, _, _ = world.parsed(**config)
    return next(g for g in groups if g.name == name)


def template_of(world: World, name: str = "g", **config: Any) -> TemplateNode:
    template = group_of(world, name, **config).template
    assert template is not None
    return template


def one_node_world(**group: Any) -> tuple[World, str]:
    world = World()
    (node,) = world.group("g", "m5.2xlarge", nodes=1, **group)
    return world, node


def estimated(**group: Any) -> TemplateNode:
    """The group's template with no node at all: the estimate from its instance type."""
    world = World()
    world.group("g", "m5.2xlarge", **group)
    return template_of(world)


def add_typed_instance(world: World, group: str, instance_type: str, index: int) -> str:
    """One more InService instance of ``instance_type`` in ``group``, registered as a Ready node."""
    raw = world.groups[group]
    iid = o.instance_id(f"{group}-{instance_type}-{index}")
    raw["Instances"].append(
        {
            "InstanceId": iid,
            "InstanceType": instance_type,
            "AvailabilityZone": raw["AvailabilityZones"][0],
            "LifecycleState": "InService",
            "HealthStatus": "Healthy",
        }
    )
    raw["DesiredCapacity"] += 1
    return world.node_for(group, iid, instance_type)


# --- which node stands for its group ------------------------------------------------------------------


def test_a_ready_node_of_the_group_gives_its_allocatable_and_keeps_the_template_model() -> None:
    world = World()
    node, other = sorted(world.group("g", "m5.2xlarge", nodes=2))
    world.node(other)["metadata"]["labels"]["team"] = "vision"  # a label of one node only

    template = template_of(world)

    assert template.allocatable["memory"] == 30 * GIB  # not the 29317Mi estimate
    assert template.allocatable["cpu"] == 7910
    assert template.allocatable["pods"] == 58 * 1000
    assert template.allocatable["ephemeral-storage"] == EPHEMERAL  # a resource the estimate lacks
    assert template.node == node
    assert template.labels == estimated().labels  # no hostname, no per-node label
    assert "kubernetes.io/hostname" not in template.labels and "team" not in template.labels
    assert template.taints == estimated().taints


def test_without_a_node_the_group_keeps_the_estimate() -> None:
    template = estimated()

    assert template.allocatable["memory"] == M5_2XL_ESTIMATE
    assert "ephemeral-storage" not in template.allocatable
    assert template.node is None


def test_a_not_ready_node_does_not_stand_for_its_group() -> None:
    world, node = one_node_world()
    world.node(node)["status"]["conditions"][0]["status"] = "False"

    template = template_of(world)

    assert template.allocatable["memory"] == M5_2XL_ESTIMATE and template.node is None


def test_a_node_being_deleted_does_not_stand_for_its_group() -> None:
    world, node = one_node_world()
    world.node(node)["metadata"]["deletionTimestamp"] = "2026-11-02T11:59:00Z"

    assert template_of(world).allocatable["memory"] == M5_2XL_ESTIMATE


def test_a_node_spillway_cordoned_still_stands_for_its_group_without_its_taint() -> None:
    world, node = one_node_world()
    world.cordon(node, by_spillway=True)  # unschedulable, spillway.io/draining taint

    template = template_of(world)

    assert template.allocatable["memory"] == 30 * GIB and template.node == node
    assert template.taints == ()  # the draining taint is the node's, not the group's


def test_a_node_somebody_else_cordoned_does_not_stand_for_its_group() -> None:
    world, node = one_node_world()
    world.cordon(node, by_spillway=False)  # out of service for a reason Spillway does not know

    assert template_of(world).allocatable["memory"] == M5_2XL_ESTIMATE


def test_a_node_without_cpu_or_memory_in_its_allocatable_does_not_stand_for_its_group() -> None:
    world, node = one_node_world()
    status = world.node(node)["status"]
    for key in ("allocatable", "capacity"):
        del status[key]["memory"]

    assert template_of(world).allocatable["memory"] == M5_2XL_ESTIMATE


def test_a_gpu_node_whose_device_plugin_has_not_registered_does_not_stand_for_its_group() -> None:
    world = World()
    (node,) = world.group("g", "g5.xlarge", nodes=1, gpu_taint=True)
    status = world.node(node)["status"]
    for key in ("allocatable", "capacity"):
        del status[key]["nvidia.com/gpu"]

    template = template_of(world)

    assert template.allocatable["nvidia.com/gpu"] == 1000 and template.node is None


def test_a_node_of_another_override_type_does_not_stand_for_a_mixed_groups_template() -> None:
    world = World()
    world.group("g", "m5.xlarge", mixed=True)
    overrides = world.groups["g"]["MixedInstancesPolicy"]["LaunchTemplate"]["Overrides"]
    overrides.append({"InstanceType": "m5.2xlarge"})  # the template is the smallest: m5.xlarge
    add_typed_instance(world, "g", "m5.2xlarge", 0)

    other_only = template_of(world)
    small = add_typed_instance(world, "g", "m5.xlarge", 1)
    with_own = template_of(world)

    assert other_only.allocatable["memory"] == 14162 * MIB  # the m5.xlarge estimate, not 30Gi
    assert other_only.node is None
    assert with_own.allocatable["memory"] == 14 * GIB and with_own.node == small


def test_no_node_stands_for_a_mixed_template_no_override_is_the_least_of_in_every_resource() -> None:
    """g5.xlarge has the GPU, m5.2xlarge the CPU and memory: the template is the least of each (no GPU),
    and a g5.xlarge node, read as the template, would promise a GPU an m5.2xlarge does not have."""
    world = World()
    world.group("g", "g5.xlarge", mixed=True)
    overrides = world.groups["g"]["MixedInstancesPolicy"]["LaunchTemplate"]["Overrides"]
    overrides.append({"InstanceType": "m5.2xlarge"})
    add_typed_instance(world, "g", "g5.xlarge", 0)

    template = template_of(world)

    assert template.node is None
    assert "nvidia.com/gpu" not in template.allocatable
    assert template.allocatable["cpu"] == 3920  # the g5.xlarge estimate: 4 vCPUs less the EKS reserve


def test_a_resources_tag_still_wins_over_the_node() -> None:
    world, node = one_node_world(resources={"memory": "28Gi"})

    template = template_of(world)

    assert template.allocatable["memory"] == 28 * GIB  # the user's word
    assert template.allocatable["ephemeral-storage"] == EPHEMERAL  # the node's for the rest
    assert template.node == node


def test_the_most_common_allocatable_stands_for_the_group_ties_by_name() -> None:
    world = World()
    nodes = sorted(world.group("g", "m5.2xlarge", nodes=3))
    for key in ("allocatable", "capacity"):
        world.node(nodes[0])["status"][key]["memory"] = "31Gi"  # the first by name is the odd one

    most_common = template_of(world)
    world.node(nodes[2])["status"]["conditions"][0]["status"] = "False"  # one each now: a tie
    tie = template_of(world)

    assert most_common.allocatable["memory"] == 30 * GIB and most_common.node == nodes[1]
    assert tie.allocatable["memory"] == 31 * GIB and tie.node == nodes[0]


def test_a_live_template_survives_the_stored_snapshot() -> None:
    world, _ = one_node_world(resources={"memory": "28Gi"})
    mixed = World()
    mixed.group("g", "m5.xlarge", mixed=True)
    mixed.groups["g"]["MixedInstancesPolicy"]["LaunchTemplate"]["Overrides"].append(
        {"InstanceType": "m5.2xlarge"}
    )
    add_typed_instance(mixed, "g", "m5.2xlarge", 0)

    for group in (group_of(world), group_of(mixed)):
        assert NodeGroup.from_dict(group.to_dict()) == group
    assert template_of(world).tagged == ("memory",)
    assert len(group_of(mixed).other_type_instances) == 1


# --- what the planner does with it ----------------------------------------------------------------------


def test_a_pod_bigger_than_the_groups_real_nodes_gets_no_node_for_an_estimate_that_says_it_fits() -> None:
    # A flat node_reserve of 1Gi estimates 31Gi for an m5.2xlarge; its real node offers 30Gi.
    world = World()
    world.group("m5", "m5.2xlarge", nodes=1)
    (pod,) = world.pods("big", 1, cpu="1", memory="31000Mi")

    result = world.plan(node_reserve={"memory": "1Gi"})

    assert scale_up(result) == {}
    assert pending_codes(result)[pod] == codes.NO_GROUP_FITS


def test_a_pod_sized_to_the_real_p3_16xlarge_gets_a_node_the_estimate_refused() -> None:
    # The 7.5 % VM overhead estimates 448.5 GiB; a real p3.16xlarge offers 477.3 GiB (7.8 GiB overhead).
    world = World()
    (node,) = world.group("p3", "p3.16xlarge", nodes=1, gpu_taint=True)
    world.gpu_pods("busy", 1, 8, cpu="1", memory="1Gi", node_name=node, phase="Running")  # its GPUs taken
    (pod,) = world.gpu_pods("train", 1, 8, cpu="60", memory="470Gi")

    result = world.plan()

    assert scale_up(result) == {"p3": (1, 2, [pod])}


def test_a_pod_asking_more_ephemeral_storage_than_the_real_node_has_is_told_so() -> None:
    # the estimate knows no ephemeral storage (unchecked); the group's node reports about 89Gi
    world = World()
    world.group("g", "m5.2xlarge", nodes=1)
    (pod,) = world.pods("scratch", 1, cpu="1", memory="1Gi")
    world.pod_item(pod)["spec"]["containers"][0]["resources"]["requests"]["ephemeral-storage"] = "200Gi"

    result = world.plan()

    assert pending_codes(result)[pod] == codes.NO_GROUP_FITS
    reason = next(p.reason for p in result.pending if p.pod == pod)
    assert "a m5.2xlarge node has too little ephemeral-storage (needs ephemeral-storage=200Gi)" in reason
