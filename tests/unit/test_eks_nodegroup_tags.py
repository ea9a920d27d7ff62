"""An EKS managed node group's own tags: what of them a group's template takes, as cluster-autoscaler does.

DescribeNodegroup answers with the node group's ``tags`` (EKS API Reference, ``Nodegroup``: metadata
that does not propagate to other resources, so not to its Auto Scaling group). cluster-autoscaler's AWS
provider reads exactly one kind of key from them (kubernetes/autoscaler
cluster-autoscaler/cloudprovider/aws/aws_manager.go ``buildNodeFromTemplate`` with
``extractAllocatableResourcesFromTags``; managed_nodegroup_cache.go keeps the tags with the labels and
taints): ``k8s.io/cluster-autoscaler/node-template/resources/<resource>``, set on the template node's
capacity (its allocatable is the same map) over the Auto Scaling group's tag of the same resource
("ManagedNodeGroup resource-indicating tags override conflicting tags on the ASG"). Label and taint
keys among the node group's tags are not read: a node group's labels and taints are its ``labels`` and
``taints``. Where cluster-autoscaler skips a value that is no quantity, Spillway refuses the group, as
it does for the group's own resource tag (README, *Tagging node groups*).
"""

from __future__ import annotations

from typing import Any

from plan_world import World, scale_up

from spillway.model.nodegroup import NodeGroup
from spillway.model.quantity import to_milli

RESOURCES = "k8s.io/cluster-autoscaler/node-template/resources/"
EKS_TAGS = [{"Key": "eks:cluster-name", "Value": "ml"}, {"Key": "eks:nodegroup-name", "Value": "batch-ng"}]


def managed_world(
    node_group_tags: dict[str, str], asg_tags: dict[str, str] | None = None, nodes: int = 0
) -> tuple[World, list[str]]:
    """Group ``batch`` of node group ``batch-ng``, with what DescribeNodegroup said of it (as the
    adapter attaches it) and its own tags ``asg_tags``; ``nodes`` Ready nodes."""
    w = World(regions=("us-east-1",))
    names = w.group("batch", "m5.xlarge", nodes=nodes, max_size=5)
    raw = w.groups["batch"]
    raw["Tags"] += EKS_TAGS + [{"Key": k, "Value": v} for k, v in (asg_tags or {}).items()]
    raw["ManagedNodegroup"] = {"nodegroupName": "batch-ng", "clusterName": "ml", "tags": node_group_tags}
    return w, names


def batch(world: World) -> NodeGroup:
    _, groups, _, _ = world.parsed()
    return next(g for g in groups if g.name == "batch")


def template(world: World) -> Any:
    group = batch(world)
    assert group.template is not None, group.refusal
    return group.template


def test_a_resources_tag_of_the_node_group_gives_the_template_at_zero_that_resource() -> None:
    w, _ = managed_world({RESOURCES + "ephemeral-storage": "200Gi", RESOURCES + "nvidia.com/gpu": "1"})

    t = template(w)

    for name, value in (("ephemeral-storage", "200Gi"), ("nvidia.com/gpu", "1")):
        assert t.allocatable[name] == to_milli(value)
        assert t.capacity[name] == to_milli(value)
        assert name in t.tagged


def test_the_node_groups_resources_tag_wins_over_the_groups_tag_of_the_same_resource() -> None:
    w, _ = managed_world(
        {RESOURCES + "ephemeral-storage": "200Gi"},
        asg_tags={RESOURCES + "ephemeral-storage": "50Gi", RESOURCES + "vpc.amazonaws.com/efa": "1"},
    )

    t = template(w)

    assert t.allocatable["ephemeral-storage"] == to_milli("200Gi")
    assert t.allocatable["vpc.amazonaws.com/efa"] == to_milli("1")  # the group's tag of another resource


def test_the_node_groups_resources_tag_wins_over_what_a_node_of_the_group_reports() -> None:
    """As the group's own resource tag does (README, *A group's template node*): the node says about
    89 GiB of ephemeral storage, the tag 200Gi."""
    w, _ = managed_world({RESOURCES + "ephemeral-storage": "200Gi"}, nodes=1)

    t = template(w)

    assert t.allocatable["ephemeral-storage"] == to_milli("200Gi")
    assert t.allocatable["cpu"] == to_milli("3920m")  # the rest is the node's


def test_label_and_taint_keys_among_the_node_groups_tags_are_not_read() -> None:
    """cluster-autoscaler reads only resources from them: the labels and taints a node group's nodes
    register with are its ``labels`` and ``taints``. (A guard: this held before the tags were read.)"""
    w, _ = managed_world(
        {
            "k8s.io/cluster-autoscaler/node-template/label/team": "ml",
            "k8s.io/cluster-autoscaler/node-template/taint/dedicated": "batch:NoSchedule",
        }
    )

    t = template(w)

    assert "team" not in t.labels
    assert t.taints == ()


def test_a_node_group_resources_tag_that_is_no_quantity_refuses_that_group_alone_naming_it() -> None:
    w, _ = managed_world({RESOURCES + "ephemeral-storage": "lots"})
    w.group("plain", "m5.xlarge", max_size=5)
    (pod,) = w.pods("web", 1, cpu="1")

    group = batch(w)
    result = w.plan()

    key = RESOURCES + "ephemeral-storage"
    assert group.template is None
    assert group.refusal.startswith(f"ManagedNodegroup(batch-ng).tags[{key}]: not a quantity: 'lots'")
    assert [r.group for r in result.refused_groups] == ["batch"]
    assert list(scale_up(result)) == ["plain"] and scale_up(result)["plain"][2] == [pod]
