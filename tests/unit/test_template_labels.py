"""The labels of a group's template once the group has nodes (spillway.model.livetemplate).

cluster-autoscaler builds the node info of a group with a Ready node from that node, and its
sanitizeNode keeps every label but the hostname, which it sets to the new node's name
(simulator/node_info_utils.go createSanitizedNode): labels the kubelet registers with
(``--node-labels``, labels no ASG tag declares) belong to the group's next node. Spillway keeps the
labels every Ready node of the group carries with one value, but those that name one node (hostname,
instance id, the zone of a group of several zones, the type of a mixed group, its own labels), so a
label one node happens to carry does not describe the next one. The worlds are printed as kubectl and
the AWS CLI print them and parsed as ``spillway plan`` parses them."""

from __future__ import annotations

from typing import Any

import pytest
from plan_world import World, pending_reasons, scale_up

from spillway.local import objects as o
from spillway.model.nodegroup import NodeGroup, TemplateNode

NOT_BATCH = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "workload-class", "operator": "NotIn", "values": ["batch"]}]}
            ]
        }
    }
}


def group_of(world: World, name: str) -> NodeGroup:
    _, groups, _, _ = world.parsed()
    return next(g for g in groups if g.name == name)


def template_of(world: World, name: str) -> TemplateNode:
    template = group_of(world, name).template
    assert template is not None
    return template


def batch_world(nodes: int = 1) -> tuple[World, list[str]]:
    """A group whose every node's kubelet registers with --node-labels=workload-class=batch (no tag)
    and whose nodes are full."""
    w = World(regions=("us-east-1",))
    names = w.group("batch", "m5.2xlarge", nodes=nodes, max_size=5)
    for index, node in enumerate(names):
        w.node(node)["metadata"]["labels"]["workload-class"] = "batch"
        w.items.append(
            o.pod(f"filler-{index}", cpu="7", memory="1Gi", node_name=node, owner=("ReplicaSet", "f"))
        )
    return w, names


def add_node(world: World, group: str, index: int, **node: Any) -> str:
    """One more InService instance in ``group``, registered as a node of ``node``'s making."""
    raw = world.groups[group]
    iid = o.instance_id(f"{group}-more-{index}")
    zone = node.pop("zone", raw["AvailabilityZones"][0])
    itype = node.pop(
        "instance_type", raw["Instances"][0]["InstanceType"] if raw["Instances"] else "m5.2xlarge"
    )
    raw["Instances"].append(
        {"InstanceId": iid, "InstanceType": itype, "AvailabilityZone": zone, "LifecycleState": "InService",
         "HealthStatus": "Healthy"}
    )  # fmt: skip
    raw["DesiredCapacity"] += 1
    name = o.node_name_for(iid, zone[:-1])
    world.items.append(o.node(name, instance=iid, zone=zone, instance_type=itype, **node))
    return name


# --- what the planner does with them ---------------------------------------------------------------------


def test_no_launch_for_a_pod_whose_notin_excludes_the_label_every_node_of_the_group_gets() -> None:
    w, _ = batch_world()
    (pod,) = w.pods("api", 1, cpu="2", memory="2Gi", affinity=NOT_BATCH)

    result = w.plan()

    assert "batch" not in scale_up(result), pending_reasons(result).get(pod)


def test_a_pod_selecting_the_label_every_node_of_the_group_gets_is_launched_for() -> None:
    w, _ = batch_world()
    (pod,) = w.pods("job", 1, cpu="2", memory="2Gi", node_selector={"workload-class": "batch"})

    result = w.plan()

    assert pod in scale_up(result).get("batch", (0, 0, []))[2], pending_reasons(result).get(pod)


# --- which labels a group's nodes give its template --------------------------------------------------------


def test_a_label_some_ready_nodes_of_the_group_lack_or_carry_otherwise_is_not_the_templates() -> None:
    w, (first, second, third) = batch_world(nodes=3)
    w.node(first)["metadata"]["labels"]["team"] = "vision"  # this node's only
    w.node(second)["metadata"]["labels"]["rack"] = "r1"
    w.node(third)["metadata"]["labels"]["rack"] = "r2"
    for node in (first, second, third):
        w.node(node)["metadata"]["labels"]["rack-row"] = "7"

    labels = template_of(w, "batch").labels

    assert labels["workload-class"] == "batch" and labels["rack-row"] == "7"
    assert "team" not in labels and "rack" not in labels


def test_a_node_that_is_not_ready_or_being_deleted_neither_gives_nor_takes_away_a_label() -> None:
    w, (node,) = batch_world()
    starting = add_node(w, "batch", 1, ready=False)  # its kubelet has not labelled it yet
    leaving = add_node(w, "batch", 2, labels={"workload-class": "batch", "old": "yes"})
    w.node(leaving)["metadata"]["deletionTimestamp"] = "2026-11-02T11:59:00Z"
    w.node(node)["metadata"]["labels"]["old"] = "no"

    labels = template_of(w, "batch").labels

    assert starting and labels["workload-class"] == "batch" and labels["old"] == "no"


def test_labels_that_name_one_node_never_reach_the_template() -> None:
    w, (node,) = batch_world()
    w.node(node)["metadata"]["labels"].update(
        {
            "alpha.eksctl.io/instance-id": "i-0123456789abcdef0",
            "spillway.io/provisioning-request": "team-a.train-1",  # Spillway labels the nodes it launches
            "vpc.amazonaws.com/has-trunk-attached": "true",
        }
    )

    labels = template_of(w, "batch").labels

    assert labels["workload-class"] == "batch"
    assert "kubernetes.io/hostname" not in labels
    assert "alpha.eksctl.io/instance-id" not in labels
    assert "spillway.io/provisioning-request" not in labels
    assert "vpc.amazonaws.com/has-trunk-attached" not in labels


def test_the_zone_of_a_group_of_several_zones_is_not_the_templates_even_when_every_node_is_there() -> None:
    w = World(regions=("us-east-1",))
    (node,) = w.group("multi", "m5.2xlarge", nodes=1, zones=["us-east-1a", "us-east-1b"])
    w.node(node)["metadata"]["labels"]["topology.k8s.aws/zone-id"] = "use1-az1"
    (one,) = w.group("one", "m5.2xlarge", nodes=1)
    w.node(one)["metadata"]["labels"]["topology.k8s.aws/zone-id"] = "use1-az1"

    multi, single = template_of(w, "multi").labels, template_of(w, "one").labels

    assert "topology.kubernetes.io/zone" not in multi and "topology.k8s.aws/zone-id" not in multi
    assert (
        single["topology.kubernetes.io/zone"] == "us-east-1a"
        and single["topology.k8s.aws/zone-id"] == "use1-az1"
    )


def test_a_mixed_groups_nodes_of_one_override_do_not_give_it_that_types_labels() -> None:
    w = World(regions=("us-east-1",))
    w.group("mixed", "m5.xlarge", mixed=True)
    tags = w.groups["mixed"]["Tags"]  # plan_world tags every group with its type: not this one
    tags[:] = [t for t in tags if not t["Key"].endswith("/label/node.kubernetes.io/instance-type")]
    w.groups["mixed"]["MixedInstancesPolicy"]["LaunchTemplate"]["Overrides"].append(
        {"InstanceType": "m6g.xlarge"}
    )
    add_node(w, "mixed", 0, instance_type="m5.xlarge", labels={"workload-class": "batch"})

    labels = template_of(w, "mixed").labels

    assert labels["workload-class"] == "batch"
    for key in ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type", "kubernetes.io/arch"):
        assert key not in labels  # EC2 may launch the arm64 m6g.xlarge next


def test_a_capacity_type_label_stays_what_the_launch_settings_and_tags_say() -> None:
    w, (node,) = batch_world()
    w.node(node)["metadata"]["labels"]["eks.amazonaws.com/capacityType"] = "ON_DEMAND"

    assert "eks.amazonaws.com/capacityType" not in template_of(w, "batch").labels


def test_a_label_tag_wins_over_the_nodes_value() -> None:
    w = World(regions=("us-east-1",))
    (node,) = w.group("g", "m5.2xlarge", nodes=1, labels={"workload-class": "batch"})
    w.node(node)["metadata"]["labels"]["workload-class"] = "interactive"

    assert template_of(w, "g").labels["workload-class"] == "batch"


def test_a_windows_groups_nodes_give_its_template_their_os_over_the_linux_guess() -> None:
    """The template's kubernetes.io/os is a guess (the catalogue says nothing of the AMI); cluster-
    autoscaler's template read from a Windows node says windows. A Windows pod gets a node there, and a
    pod that selects linux no node of the Windows group, which it would never run on."""
    w = World(regions=("us-east-1",))
    (node,) = w.group("win", "m5.2xlarge", nodes=1, max_size=5)
    w.node(node)["metadata"]["labels"].update(
        {"kubernetes.io/os": "windows", "beta.kubernetes.io/os": "windows"}
    )
    w.items.append(o.pod("filler", cpu="7", memory="1Gi", node_name=node, owner=("ReplicaSet", "f")))
    (iis,) = w.pods("iis", 1, cpu="1", memory="1Gi", node_selector={"kubernetes.io/os": "windows"})
    (web,) = w.pods("web", 1, cpu="1", memory="1Gi", node_selector={"kubernetes.io/os": "linux"})

    result = w.plan()

    assert template_of(w, "win").labels["beta.kubernetes.io/os"] == "windows"
    assert scale_up(result) == {"win": (1, 2, [iis])}
    assert "nodeSelector kubernetes.io/os=linux does not match" in pending_reasons(result)[web]


def test_the_labels_survive_the_stored_snapshot() -> None:
    w, _ = batch_world()

    group = group_of(w, "batch")

    assert NodeGroup.from_dict(group.to_dict()) == group


# --- the labels a group at zero's template carries (no node to copy) -----------------------------------------
# The kubelet registers a node with the beta os and arch labels beside the stable ones (kubernetes/kubernetes
# pkg/kubelet/kubelet_node_status.go, initialNode), and the cloud node controller sets the beta zone and
# region labels beside the topology ones (staging/src/k8s.io/cloud-provider/controllers/node/node_controller.go,
# getNodeModifiersFromCloudProvider): older manifests still select them.


def test_a_group_at_zero_template_carries_the_beta_labels_the_kubelet_and_cloud_provider_set() -> None:
    w = World(regions=("us-east-1",))
    w.group("one-zone", "m5.2xlarge")
    w.group("two-zones", "m6g.xlarge", zones=["us-east-1a", "us-east-1b"])

    one, two = template_of(w, "one-zone").labels, template_of(w, "two-zones").labels

    assert one["beta.kubernetes.io/os"] == one["kubernetes.io/os"] == "linux"
    assert one["beta.kubernetes.io/arch"] == one["kubernetes.io/arch"] == "amd64"
    assert one["failure-domain.beta.kubernetes.io/zone"] == one["topology.kubernetes.io/zone"] == "us-east-1a"
    assert one["failure-domain.beta.kubernetes.io/region"] == "us-east-1"
    assert two["beta.kubernetes.io/arch"] == "arm64" and two["failure-domain.beta.kubernetes.io/region"]
    assert "failure-domain.beta.kubernetes.io/zone" not in two  # EC2 picks the zone


def test_a_pod_selecting_the_beta_os_label_gets_a_node_from_a_group_at_zero() -> None:
    w = World(regions=("us-east-1",))
    w.group("g", "m5.2xlarge")
    (pod,) = w.pods("legacy", 1, cpu="1", memory="1Gi", node_selector={"beta.kubernetes.io/os": "linux"})

    result = w.plan()

    assert pod in scale_up(result).get("g", (0, 0, []))[2], pending_reasons(result).get(pod)


# --- the taints a group's nodes give its template ------------------------------------------------------------
# cluster-autoscaler's template of a group with a node is that node with its taints, but for those of a
# passing state (kubernetes/autoscaler cluster-autoscaler/utils/taints/taints.go SanitizeTaints: its own
# deletion taints, the node-condition taints, startup and status taints): a taint the kubelet registers
# with (--register-with-taints in the launch template's user data, no tag) is on the next node too.

DEDICATED = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}


def test_no_launch_for_a_pod_that_does_not_tolerate_the_taint_every_node_of_the_group_registers_with() -> (
    None
):
    w, (node,) = batch_world()
    w.node(node)["spec"]["taints"] = [DEDICATED]
    (pod,) = w.pods("api", 1, cpu="2", memory="2Gi")

    result = w.plan()

    assert ("dedicated", "batch", "NoSchedule") in template_of(w, "batch").taints
    assert "batch" not in scale_up(result), pending_reasons(result).get(pod)


def test_a_pod_tolerating_the_taint_every_node_of_the_group_registers_with_is_launched_for() -> None:
    w, (node,) = batch_world()
    w.node(node)["spec"]["taints"] = [DEDICATED]
    toleration = {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}
    (pod,) = w.pods("job", 1, cpu="2", memory="2Gi", tolerations=[toleration])

    result = w.plan()

    assert pod in scale_up(result).get("batch", (0, 0, []))[2], pending_reasons(result).get(pod)


def test_a_taint_of_a_passing_state_or_of_one_node_only_is_not_the_templates() -> None:
    w, (first, second) = batch_world(nodes=2)
    passing = [
        {"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"},
        {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"},
        {"key": "DeletionCandidateOfClusterAutoscaler", "value": "1762084800", "effect": "PreferNoSchedule"},
        {"key": "spillway.io/scale-down-candidate", "effect": "PreferNoSchedule"},
        {"key": "aws-node-termination-handler/spot-itn", "value": "i-0abc", "effect": "NoSchedule"},
        {"key": "ebs.csi.aws.com/agent-not-ready", "effect": "NoExecute"},
    ]
    w.node(first)["spec"]["taints"] = [*passing, {"key": "maintenance", "effect": "NoSchedule"}]
    w.node(second)["spec"]["taints"] = list(passing)

    assert template_of(w, "batch").taints == ()


def test_a_taint_tag_wins_over_the_nodes_taint_of_that_key_and_effect() -> None:
    w = World(regions=("us-east-1",))
    (node,) = w.group("g", "m5.2xlarge", nodes=1)
    tag = "k8s.io/cluster-autoscaler/node-template/taint/dedicated"
    w.groups["g"]["Tags"].append({"Key": tag, "Value": "ml:NoSchedule", "PropagateAtLaunch": False})
    w.node(node)["spec"]["taints"] = [DEDICATED, {"key": "dedicated", "value": "x", "effect": "NoExecute"}]

    assert sorted(template_of(w, "g").taints) == [
        ("dedicated", "ml", "NoSchedule"),
        ("dedicated", "x", "NoExecute"),
    ]


def test_the_taints_survive_the_stored_snapshot() -> None:
    w, (node,) = batch_world()
    w.node(node)["spec"]["taints"] = [DEDICATED]

    group = group_of(w, "batch")

    assert NodeGroup.from_dict(group.to_dict()) == group


TAINT_TAG = "k8s.io/cluster-autoscaler/node-template/taint/dedicated"
RESOURCE_TAG = "k8s.io/cluster-autoscaler/node-template/resources/ephemeral-storage"


@pytest.mark.parametrize(
    ("key", "value"),
    [(TAINT_TAG, "batch:NoScheduel"), (TAINT_TAG, "batch"), (RESOURCE_TAG, "lots")],
    ids=["misspelt effect", "no effect", "not a quantity"],
)
def test_a_group_whose_node_template_tag_cannot_be_read_is_refused_alone(key: str, value: str) -> None:
    """A node-template tag that cannot be read leaves the group's next node unknown (a taint it will
    carry, a resource it will offer): that group is neither grown nor drained, its refusal naming the
    tag, and every other group is planned as usual. Failing the whole snapshot for one tag stopped
    every group's scaling (observe builds all groups at once); ignoring the tag would launch nodes
    whose taint refuses the pods they were launched for."""
    w = World()
    w.group("tagged", "m5.2xlarge", max_size=5)
    w.group("plain", "m5.2xlarge", max_size=5)
    w.groups["tagged"]["Tags"].append(
        {"ResourceId": "tagged", "ResourceType": "auto-scaling-group", "Key": key, "Value": value,
         "PropagateAtLaunch": False}
    )  # fmt: skip
    (pod,) = w.pods("web", 1, cpu="3")

    tagged = group_of(w, "tagged")
    result = w.plan()

    assert tagged.refusal.startswith(f"Tags[{key}]: ")
    assert tagged.refusal in tagged.problems
    assert [(r.group, r.reason) for r in result.refused_groups] == [("tagged", tagged.refusal)]
    assert list(scale_up(result)) == ["plain"] and scale_up(result)["plain"][2] == [pod]


def test_a_pod_that_only_a_group_refused_for_its_tag_could_run_is_told_the_tag() -> None:
    """The pending pod's reason names what keeps the one group that might run it from growing: its
    unreadable tag, not an unknown instance type (the group's type is known; its next node is not)."""
    w = World()
    w.group("tagged", "m5.2xlarge", max_size=5)
    w.groups["tagged"]["Tags"].append(
        {"ResourceId": "tagged", "ResourceType": "auto-scaling-group", "Key": TAINT_TAG, "Value": "batch:NoScheduel",
         "PropagateAtLaunch": False}
    )  # fmt: skip
    (pod,) = w.pods("web", 1, cpu="3")

    result = w.plan()

    assert result.scale_up == ()
    reason = pending_reasons(result)[pod]
    assert f"tagged: not scaled by Spillway: Tags[{TAINT_TAG}]: " in reason
    assert "instance type unknown" not in reason
