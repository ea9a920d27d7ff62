"""The template of an EKS managed node group's group takes the max pods EKS gives its nodes.

The Amazon EKS User Guide ("Choose an optimal Amazon EC2 node instance type", *How maxPods is
determined*): a managed node group without a custom AMI has a cap on ``maxPods`` in its nodes' user
data, above every other setting: 110 for a type of fewer than 30 vCPUs, 250 for the others. The ENI
figure (eni-max-pods.txt) is the most a node may run, so the cap lowers it and never raises it. The
kube-reserved memory nodeadm and bootstrap.sh compute stays that of the ENI figure (the user data sets
``maxPods`` alone), so the memory estimate does not change."""

from __future__ import annotations

from typing import Any

from plan_world import World, scale_up

from spillway.local import objects as o
from spillway.model.aws import AutoScalingGroup, bundled_instance_types
from spillway.model.nodegroup import build_template

CATALOGUE = bundled_instance_types()
EKS_TAGS = [{"Key": "eks:cluster-name", "Value": "ml"}, {"Key": "eks:nodegroup-name", "Value": "batch-ng"}]
NODEGROUP = {"nodegroupName": "batch-ng", "clusterName": "ml", "amiType": "AL2023_x86_64_STANDARD"}


def group(
    instance_type: str, nodegroup: dict[str, Any] | None = NODEGROUP, eks: bool = True
) -> AutoScalingGroup:
    raw = o.asg("batch", cluster="ml", instance_type=instance_type)
    if eks:
        raw["Tags"] = raw["Tags"] + EKS_TAGS
    return AutoScalingGroup.model_validate(
        {**raw, "ManagedNodegroup": nodegroup, "LaunchInstanceType": instance_type}
    )


def pods_and_memory(asg: AutoScalingGroup, instance_type: str) -> tuple[int, int]:
    template = build_template(asg, instance_type, CATALOGUE, {"cpu": 100, "memory": 2**30 * 1000})
    assert template is not None
    return template.allocatable["pods"] // 1000, template.allocatable["memory"]


def test_a_managed_node_group_of_fewer_than_30_vcpus_runs_at_most_110_pods() -> None:
    # m5.4xlarge: 16 vCPUs, 8 interfaces of 30 addresses (234 pods by eni-max-pods.txt)
    assert pods_and_memory(group("m5.4xlarge"), "m5.4xlarge")[0] == 110
    assert pods_and_memory(group("m5.4xlarge", eks=False, nodegroup=None), "m5.4xlarge")[0] == 234


def test_a_managed_node_group_of_more_vcpus_runs_at_most_250_pods() -> None:
    # m5.24xlarge: 96 vCPUs, 737 pods by eni-max-pods.txt
    assert pods_and_memory(group("m5.24xlarge"), "m5.24xlarge")[0] == 250


def test_the_cap_never_raises_the_eni_figure_nor_changes_the_memory() -> None:
    assert pods_and_memory(group("m5.large"), "m5.large")[0] == 29
    managed = pods_and_memory(group("m5.4xlarge"), "m5.4xlarge")[1]
    plain = pods_and_memory(group("m5.4xlarge", eks=False, nodegroup=None), "m5.4xlarge")[1]
    assert managed == plain


def test_a_custom_ami_node_group_keeps_the_eni_figure_and_an_unread_one_is_capped() -> None:
    custom = {**NODEGROUP, "amiType": "CUSTOM"}
    assert pods_and_memory(group("m5.4xlarge", nodegroup=custom), "m5.4xlarge")[0] == 234
    # DescribeNodegroup not read: which AMI it uses is unknown, and the cap is what EKS usually enforces
    assert pods_and_memory(group("m5.4xlarge", nodegroup=None), "m5.4xlarge")[0] == 110


def test_many_small_pods_get_the_nodes_the_cap_leaves_room_for() -> None:
    w = World()
    w.group("batch", "m5.4xlarge")
    w.groups["batch"]["Tags"] += EKS_TAGS
    w.groups["batch"]["ManagedNodegroup"] = NODEGROUP
    names = w.pods("task", 150, cpu="50m", memory="64Mi")

    (up,) = scale_up(w.plan()).values()

    assert up[:2] == (0, 2)  # 150 pods at 110 a node, not one node of 234
    assert sorted(up[2]) == sorted(names)
