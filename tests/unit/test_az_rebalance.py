"""A group over several zones whose AZRebalance process runs terminates nodes Spillway did not drain.

Spillway scales in with TerminateInstanceInAutoScalingGroup and ShouldDecrementDesiredCapacity; the zones
may then be uneven, and Auto Scaling's AZRebalance launches an instance in the emptier zone and then
terminates one in the fuller zone (EC2 Auto Scaling User Guide, "Rebalancing activities"; API Reference,
TerminateInstanceInAutoScalingGroup): a node nobody drained goes with its pods. cluster-autoscaler's AWS
README says to suspend AZRebalance or drain on the group's own scale-in. EKS managed node groups drain
a node before Auto Scaling terminates it (EKS User Guide), so theirs is not flagged.
"""

from __future__ import annotations

from typing import Any

from plan_world import World

from spillway.local import objects as o
from spillway.model.aws import AutoScalingGroup, bundled_instance_types
from spillway.model.nodegroup import NodeGroup, build_node_groups

CATALOGUE = bundled_instance_types()
TWO_ZONES = ["us-east-1a", "us-east-1b"]
EKS_TAGS = [{"Key": "eks:cluster-name", "Value": "ml"}, {"Key": "eks:nodegroup-name", "Value": "batch-ng"}]


def built(**kw: Any) -> NodeGroup:
    tags = kw.pop("tags", [])
    raw = o.asg("batch", cluster="ml", instance_type="m5.xlarge", **kw)
    raw["Tags"] += tags
    (group,) = build_node_groups([AutoScalingGroup.model_validate(raw)], [], CATALOGUE, {}, "ml")
    return group


def rebalance_problems(group: NodeGroup) -> list[str]:
    return [p for p in group.problems if p.startswith("SuspendedProcesses:")]


def test_a_group_over_two_zones_whose_az_rebalance_runs_names_the_process_in_its_problems() -> None:
    group = built(zones=TWO_ZONES)

    (problem,) = rebalance_problems(group)
    assert "AZRebalance is not suspended" in problem
    assert "us-east-1a, us-east-1b" in problem
    assert "--scaling-processes AZRebalance" in problem
    assert group.zone_rebalance
    assert NodeGroup.from_dict(group.to_dict()) == group  # kept in the snapshot


def test_a_group_that_suspended_az_rebalance_or_has_one_zone_or_is_an_eks_node_group_has_no_such_problem() -> (
    None
):
    for group in (
        built(zones=TWO_ZONES, suspended=["AZRebalance"]),
        built(zones=["us-east-1a"]),
        built(zones=TWO_ZONES, tags=EKS_TAGS),
    ):
        assert rebalance_problems(group) == []
        assert not group.zone_rebalance


def test_an_idle_nodes_drain_in_such_a_group_says_that_auto_scaling_may_terminate_another_node() -> None:
    w = World(regions=("us-east-1",))
    (node, _) = w.group("batch", "m5.xlarge", nodes=2, zones=TWO_ZONES)
    w.idle_since(node, 600)
    calm = World(regions=("us-east-1",))
    (calm_node, _) = calm.group("batch", "m5.xlarge", nodes=2, zones=TWO_ZONES, suspended=["AZRebalance"])
    calm.idle_since(calm_node, 600)

    (drain, *_) = [d for d in w.plan().drain if d.node == node]
    (calm_drain, *_) = [d for d in calm.plan().drain if d.node == calm_node]

    assert "AZRebalance is not suspended" in drain.reason
    assert drain.reason.startswith(calm_drain.reason)
    assert "AZRebalance" not in calm_drain.reason
