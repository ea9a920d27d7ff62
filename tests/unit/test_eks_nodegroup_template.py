"""An EKS managed node group's taint whose effect cannot be read refuses its group alone, naming the field.

The EKS API documents three effects (EKS API Reference, ``Taint``: ``NO_SCHEDULE``, ``NO_EXECUTE``,
``PREFER_NO_SCHEDULE``). Another one leaves the group's next node unknown, as a node-template taint tag
that cannot be read does: planning the group without the taint would launch nodes that refuse the pods
they are launched for; failing the observation would stop every other group.
"""

from __future__ import annotations

from spillway.local import objects as o
from spillway.model.aws import AutoScalingGroup, bundled_instance_types
from spillway.model.nodegroup import build_node_groups

CATALOGUE = bundled_instance_types()
EKS_TAGS = [{"Key": "eks:cluster-name", "Value": "ml"}, {"Key": "eks:nodegroup-name", "Value": "batch-ng"}]


def managed(name: str, effect: str) -> AutoScalingGroup:
    """A group tagged as EKS tags it, with what DescribeNodegroup said of its node group."""
    raw = o.asg(name, cluster="ml", instance_type="m5.xlarge")
    raw["Tags"] = raw["Tags"] + EKS_TAGS
    nodegroup = {"nodegroupName": "batch-ng", "clusterName": "ml", "labels": {"workload-class": "batch"},
                 "taints": [{"key": "dedicated", "value": "batch", "effect": effect}]}  # fmt: skip
    # at zero, the type its launch template names, as the adapter reads it
    return AutoScalingGroup.model_validate(
        {**raw, "ManagedNodegroup": nodegroup, "LaunchInstanceType": "m5.xlarge"}
    )


def test_an_effect_the_eks_api_does_not_document_refuses_that_group_alone_naming_the_field() -> None:
    groups = build_node_groups(
        [managed("odd", "NO_SCHEDULE_SOMETIMES"), managed("fine", "PREFER_NO_SCHEDULE")],
        [], CATALOGUE, {"cpu": 100, "memory": 2**30 * 1000}, "ml",
    )  # fmt: skip

    by_name = {g.name: g for g in groups}
    odd, fine = by_name["odd"], by_name["fine"]
    assert odd.template is None
    assert odd.refusal.startswith("ManagedNodegroup(batch-ng).taints[0].effect: 'NO_SCHEDULE_SOMETIMES'")
    assert odd.refusal in odd.problems
    assert fine.refusal == ""
    assert fine.template is not None
    assert fine.template.taints == (("dedicated", "batch", "PreferNoSchedule"),)
