"""A mixed instances group's template holds for every override EC2 may launch.

EC2 chooses among all the overrides by its allocation strategy (AWS InstancesDistribution
SpotAllocationStrategy / OnDemandAllocationStrategy), so what a pod can count on is, resource by
resource, the least any override offers; a label is only as sure as every override makes it; and the
gang fleet launches the override the plan was made for, from that override's own launch template when
it has one (AWS LaunchTemplateOverrides.LaunchTemplateSpecification).
"""

from __future__ import annotations

from typing import Any

from plan_world import World, pending_codes, pending_reasons, scale_up

from spillway.act.gang import fleet_request
from spillway.local import objects as o
from spillway.model.aws import AutoScalingGroup, bundled_instance_types
from spillway.model.nodegroup import NodeGroup, build_node_groups, type_resources
from spillway.model.resources import CPU, MEMORY, NVIDIA_GPU, PODS
from spillway.planner import codes

CATALOGUE = bundled_instance_types()
ARCH = "kubernetes.io/arch"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"


def mixed(overrides: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    raw = o.asg("mixed", cluster="ml", **kw)
    raw["MixedInstancesPolicy"] = {
        "LaunchTemplate": {
            "LaunchTemplateSpecification": {"LaunchTemplateName": "lt", "Version": "$Latest"},
            "Overrides": overrides,
        },
        "InstancesDistribution": {"OnDemandPercentageAboveBaseCapacity": 100},
    }
    del raw["LaunchTemplate"]
    return raw


def types(*names: str) -> list[dict[str, Any]]:
    return [{"InstanceType": n} for n in names]


def built(raw: dict[str, Any]) -> NodeGroup:
    (group,) = build_node_groups([AutoScalingGroup.model_validate(raw)], [], CATALOGUE, {}, "ml")
    return group


def allocatable(itype: str) -> dict[str, int]:
    return type_resources(CATALOGUE[itype], {})[0]


def test_the_template_is_the_least_of_every_resource_over_the_overrides() -> None:
    group = built(mixed(types("c5.2xlarge", "r5.xlarge")))  # 8 vCPU 16 GiB, 4 vCPU 32 GiB

    assert group.template is not None
    assert group.template.allocatable[CPU] == allocatable("r5.xlarge")[CPU]
    assert group.template.allocatable[MEMORY] == allocatable("c5.2xlarge")[MEMORY]
    assert group.template.capacity[CPU] == 4000 and group.template.capacity[MEMORY] == 16 * 2**30 * 1000
    assert group.instance_type == "c5.2xlarge"  # neither is the least of all: the first, as EC2 lists them
    assert INSTANCE_TYPE not in group.template.labels  # EC2 may launch either
    assert group.template.labels[ARCH] == "amd64"  # both are


def test_max_pods_and_gpus_are_the_least_too() -> None:
    pods = built(mixed(types("c6i.16xlarge", "trn1.32xlarge")))  # 737 pods, 247 pods (and 128 vCPUs)
    gpus = built(mixed(types("g5.12xlarge", "g5.xlarge")))

    assert pods.template is not None and pods.template.allocatable[PODS] == 247_000
    assert pods.template.allocatable[CPU] == allocatable("c6i.16xlarge")[CPU]
    assert gpus.template is not None and gpus.template.allocatable == allocatable("g5.xlarge")
    assert gpus.template.allocatable[NVIDIA_GPU] == 1000
    assert gpus.instance_type == "g5.xlarge"  # the least of every resource, listed second


def test_a_pod_too_big_for_one_override_waits_and_the_reason_names_the_overrides() -> None:
    w = World()
    w.groups["mixed"] = mixed(types("c5.2xlarge", "r5.xlarge"))
    (memory,) = w.pods("mem", 1, cpu="1", memory="24Gi")  # r5.xlarge only
    (cpu,) = w.pods("cpu", 1, cpu="6", memory="1Gi")  # c5.2xlarge only
    (small,) = w.pods("small", 1, cpu="1", memory="1Gi")

    result = w.plan()

    assert scale_up(result) == {"mixed": (0, 1, [small])}
    assert pending_codes(result)[memory] == pending_codes(result)[cpu] == codes.NO_GROUP_FITS
    assert (
        "a node it may launch (c5.2xlarge or r5.xlarge) has too little memory"
        in pending_reasons(result)[memory]
    )


def test_overrides_of_two_architectures_give_no_arch_label_and_the_override_template_is_named() -> None:
    overrides = types("m5.large", "m6g.large")
    overrides[1]["LaunchTemplateSpecification"] = {"LaunchTemplateName": "lt-arm64", "Version": "$Latest"}
    group = built(mixed(overrides))

    assert group.template is not None and ARCH not in group.template.labels
    (problem,) = group.problems
    assert problem.startswith("MixedInstancesPolicy.LaunchTemplate.Overrides[1].LaunchTemplateSpecification:")
    assert "lt-arm64" in problem
    w = World()
    w.groups["mixed"] = mixed(overrides)
    w.pods("x86", 1, cpu="1", memory="1Gi", node_selector={ARCH: "amd64"})
    (anywhere,) = w.pods("any", 1, cpu="1", memory="1Gi")
    assert scale_up(w.plan()) == {"mixed": (0, 1, [anywhere])}  # the group still scales for the rest


def test_an_override_the_catalogue_does_not_know_is_a_problem_and_makes_no_arch_promise() -> None:
    group = built(mixed(types("m5.large", "m9z.large")))

    assert group.problems == (
        "MixedInstancesPolicy.LaunchTemplate.Overrides[1].InstanceType: 'm9z.large' is not in the instance "
        "type catalogue: its resources and architecture are unknown; the template is the least of the "
        "overrides it knows and names no architecture",
    )
    assert group.template is not None and group.template.allocatable == allocatable("m5.large")
    assert ARCH not in group.template.labels


def test_the_gang_fleet_asks_for_the_type_the_plan_was_made_for_from_its_own_launch_template() -> None:
    overrides = types("m5.2xlarge", "m5.xlarge")
    overrides[1]["LaunchTemplateSpecification"] = {"LaunchTemplateId": "lt-0small"}
    asg = AutoScalingGroup.model_validate(mixed(overrides))
    (group,) = build_node_groups([asg], [], CATALOGUE, {}, "ml")

    request = fleet_request(asg, 2, "tok", "ml", "gang")

    assert group.instance_type == request.instance_type == "m5.xlarge"
    assert request.launch_template == {"LaunchTemplateId": "lt-0small", "Version": "$Default"}
    first = fleet_request(
        AutoScalingGroup.model_validate(mixed(types("m5.xlarge", "m5.2xlarge"))), 2, "t", "ml", "g"
    )
    assert first.launch_template == {"LaunchTemplateName": "lt", "Version": "$Latest"}  # the group's


EITHER_ARCH = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": ARCH, "operator": "In", "values": ["amd64", "arm64"]}]}
            ]
        }
    }
}


def test_a_pod_that_runs_on_either_architecture_scales_a_group_of_both() -> None:
    w = World()
    w.groups["mixed"] = mixed(types("m7g.large", "m6i.large"))  # arm64 and amd64: EC2 picks
    (either,) = w.pods("either", 1, cpu="1", memory="1Gi", affinity=EITHER_ARCH)
    (x86,) = w.pods("x86", 1, cpu="1", memory="1Gi", node_selector={ARCH: "amd64"})

    result = w.plan()

    assert scale_up(result) == {"mixed": (0, 1, [either])}  # every node it may get is amd64 or arm64
    assert pending_codes(result)[x86] == codes.NO_GROUP_FITS  # the node may be an m7g (arm64)


def test_a_daemonset_for_either_architecture_takes_its_room_on_a_new_node_of_a_group_of_both() -> None:
    w = World()
    w.groups["mixed"] = mixed(types("m7g.xlarge", "m6i.xlarge"))
    w.items.append(o.daemonset("aws-node", cpu="1", memory="64Mi", affinity=EITHER_ARCH))
    (group,) = w.parsed()[1]
    assert group.template is not None
    free = group.template.allocatable[CPU] - 500  # room for the pod, not for the pod and aws-node
    (big,) = w.pods("big", 1, cpu=f"{free}m", memory="1Gi")

    result = w.plan()

    assert scale_up(result) == {}
    assert pending_codes(result)[big] == codes.NO_GROUP_FITS


def test_a_pod_that_refuses_one_architecture_does_not_scale_a_group_that_may_launch_it() -> None:
    w = World()
    w.groups["mixed"] = mixed(types("m7g.large", "m6i.large"))
    not_arm = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": ARCH, "operator": "NotIn", "values": ["arm64"]}]}
                ]
            }
        }
    }
    (x86,) = w.pods("x86", 1, cpu="1", memory="1Gi", affinity=not_arm)

    result = w.plan()

    assert scale_up(result) == {}  # the template names no architecture, but the node may be an m7g
    assert pending_codes(result)[x86] == codes.NO_GROUP_FITS


def test_a_daemonset_on_some_of_a_groups_zones_takes_its_room_on_its_new_nodes() -> None:
    """A new node may come up in any zone of the group: a DaemonSet that runs in all but one still
    takes its room on the node that lands elsewhere, so a pod that fits only without it gets no node."""
    w = World()
    w.group("spread", "m5.xlarge", zones=["us-east-1a", "us-east-1b"])
    not_in_a = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "topology.kubernetes.io/zone",
                                "operator": "NotIn",
                                "values": ["us-east-1a"],
                            }
                        ]
                    }
                ]
            }
        }
    }
    w.items.append(o.daemonset("zonal-agent", cpu="1", memory="64Mi", affinity=not_in_a))
    (group,) = w.parsed()[1]
    assert group.template is not None
    (big,) = w.pods("big", 1, cpu=f"{group.template.allocatable[CPU] - 500}m", memory="1Gi")

    result = w.plan()

    assert scale_up(result) == {}
    assert pending_codes(result)[big] == codes.NO_GROUP_FITS


def test_a_daemonset_per_architecture_takes_the_room_of_one_of_them_on_a_new_node() -> None:
    """Two DaemonSets of one agent, one per architecture (an image built for each): a new node of a
    group of amd64 and arm64 types runs one of them, whichever it comes up as, never both; its room is
    what the larger leaves, so a pod that fits beside either gets a node."""
    w = World()
    w.groups["mixed"] = mixed(types("m7g.xlarge", "m6i.xlarge"))
    w.items.append(o.daemonset("agent-amd64", cpu="1", memory="64Mi", node_selector={ARCH: "amd64"}))
    w.items.append(o.daemonset("agent-arm64", cpu="1", memory="64Mi", node_selector={ARCH: "arm64"}))
    (group,) = w.parsed()[1]
    assert group.template is not None
    beside_one = group.template.allocatable[CPU] - 1500  # room beside one agent, not beside both
    (big,) = w.pods("big", 1, cpu=f"{beside_one}m", memory="1Gi")
    (too_big,) = w.pods("too-big", 1, cpu=f"{beside_one + 1000}m", memory="1Gi")

    result = w.plan()

    assert scale_up(result) == {"mixed": (0, 1, [big])}
    assert pending_codes(result)[too_big] == codes.NO_GROUP_FITS  # beside either agent it does not fit


def _agent_on_amd64_only(w: World) -> None:
    """A DaemonSet ``agent`` of amd64 nodes only, its pod running on a full m5 node (which every plan
    sees), and a group of arm64 and amd64 types at zero, where EC2 picks which a new node is."""
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=1)
    w.items.append(o.daemonset("agent", node_selector={ARCH: "amd64"}))
    w.items.append(o.daemonset_pod("agent-a", node, ds="agent", labels={"app": "agent"}))
    w.pods("busy", 1, cpu="7", memory="8Gi", node_name=node)
    w.groups["mixed"] = mixed(types("m7g.xlarge", "m6i.xlarge"))


def _required(kind: str) -> dict[str, Any]:
    term = {
        "labelSelector": {"matchLabels": {"app": "agent"}},
        "topologyKey": "kubernetes.io/hostname",
        "namespaces": ["kube-system"],
    }
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def test_anti_affinity_to_a_daemonset_of_some_of_a_groups_types_refuses_the_group() -> None:
    """A pod must not share a node with the agent, a DaemonSet of amd64 nodes only. A new node of a group
    of m7g (arm64) and m6i (amd64) types runs the agent when EC2 launches an m6i, and kube-scheduler's
    InterPodAffinity then refuses the pod there (interpodaffinity/filtering.go, satisfyExistingPodsAntiAffinity
    and satisfyPodAntiAffinity count every pod of the node). As a node selector one of the types fails
    refuses the group, so does a DaemonSet that may be on the node: the plan launched a node that may
    never run the pod."""
    w = World()
    _agent_on_amd64_only(w)
    (web,) = w.pods("web", 1, cpu="1", memory="1Gi", affinity=_required("podAntiAffinity"))

    result = w.plan()

    assert scale_up(result) == {}
    assert pending_codes(result)[web] == codes.NO_GROUP_FITS  # the m5 group's nodes all run the agent
    assert (
        "mixed: pod topology: a pod a new node may run first (a DaemonSet's)" in pending_reasons(result)[web]
    )


def test_affinity_to_a_daemonset_of_some_of_a_groups_types_gets_no_node_of_the_group() -> None:
    """The other side: a pod that must share a node with the agent may count on a new node of the mixed
    group only when the agent runs on every type it launches; an m7g never runs it."""
    w = World()
    _agent_on_amd64_only(w)
    w.pods("web", 1, cpu="1", memory="1Gi", affinity=_required("podAffinity"))

    result = w.plan()

    assert scale_up(result) == {}  # the m5 group, which runs the agent, is at its MaxSize
