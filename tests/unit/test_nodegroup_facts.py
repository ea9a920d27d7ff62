"""NodeGroup facts of issue 12: capacity type, warm pool count, scheduled actions, mixed overrides."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from spillway.local import objects as o
from spillway.model.aws import AutoScalingGroup, ScheduledAction, WarmPool, bundled_instance_types
from spillway.model.nodegroup import (
    NodeGroup,
    build_node_groups,
    capacity_type,
    resolve_instance_type,
    warm_count,
)

CATALOGUE = bundled_instance_types()


def group(**kw: Any) -> AutoScalingGroup:
    tags = kw.pop("tags", {})
    dist = kw.pop("distribution", None)
    overrides = kw.pop("overrides", None)
    raw = o.asg("g", cluster="ml", **kw)
    raw["Tags"] += [{"Key": k, "Value": v} for k, v in tags.items()]
    if overrides is not None or dist is not None:
        raw["MixedInstancesPolicy"] = {
            "LaunchTemplate": {
                "LaunchTemplateSpecification": {"LaunchTemplateName": "lt"},
                "Overrides": [{"InstanceType": t} for t in overrides or ["m5.large"]],
            },
            **({"InstancesDistribution": dist} if dist is not None else {}),
        }
    return AutoScalingGroup.model_validate(raw)


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({}, "on-demand"),
        ({"tags": {"spillway.io/capacity-type": "spot"}}, "spot"),
        ({"tags": {"spillway.io/capacity-type": "On-Demand"}}, "on-demand"),
        ({"labels": {"karpenter.sh/capacity-type": "spot"}}, "spot"),
        ({"labels": {"eks.amazonaws.com/capacityType": "SPOT"}}, "spot"),
        ({"labels": {"eks.amazonaws.com/capacityType": "ON_DEMAND"}}, "on-demand"),
        ({"distribution": {"OnDemandBaseCapacity": 0, "OnDemandPercentageAboveBaseCapacity": 0}}, "spot"),
        ({"distribution": {"OnDemandPercentageAboveBaseCapacity": 0}}, "spot"),
        (
            {"distribution": {"OnDemandBaseCapacity": 1, "OnDemandPercentageAboveBaseCapacity": 0}},
            "on-demand",
        ),
        ({"distribution": {"OnDemandPercentageAboveBaseCapacity": 50}}, "on-demand"),
        ({"distribution": {}}, "on-demand"),  # AWS's default: 100 % on-demand
        # the tag wins over the policy
        (
            {
                "tags": {"spillway.io/capacity-type": "on-demand"},
                "distribution": {"OnDemandPercentageAboveBaseCapacity": 0},
            },
            "on-demand",
        ),
    ],
)
def test_capacity_type(kw: dict[str, Any], expected: str) -> None:
    assert capacity_type(group(**kw)) == (expected, "")


def test_a_bad_capacity_type_tag_is_a_problem_on_the_group_not_a_refusal() -> None:
    asg = group(tags={"spillway.io/capacity-type": "cheap"}, labels={"karpenter.sh/capacity-type": "spot"})
    kind, problem = capacity_type(asg)
    assert kind == "spot"
    assert problem.startswith("Tags[spillway.io/capacity-type]: 'cheap' is not one of spot | on-demand")
    (built,) = build_node_groups([asg], [], CATALOGUE, {}, "ml")
    assert built.problems == (problem,)


def test_mixed_policy_template_is_the_smallest_override() -> None:
    asg = group(overrides=["m5.4xlarge", "r5.large", "m5.large", "c5.large"], instances=["i-1"])
    # c5.large and m5.large have 2 vCPUs; c5.large has less memory. Live instances do not decide.
    assert resolve_instance_type(asg, CATALOGUE) == "c5.large"
    assert resolve_instance_type(asg) == "m5.4xlarge"  # without a catalogue: the first
    (built,) = build_node_groups([asg], [], CATALOGUE, {}, "ml")
    assert built.instance_type == "c5.large"
    assert built.template is not None and built.template.allocatable["cpu"] == 2000
    assert built.launch_types() == ("m5.4xlarge", "r5.large", "m5.large", "c5.large")


def test_warm_count_counts_instances_that_can_join() -> None:
    def pool(*states: str, status: str | None = None) -> WarmPool:
        return WarmPool.model_validate(
            {
                "WarmPoolConfiguration": {"MinSize": 0, "PoolState": "Stopped", "Status": status},
                "Instances": [{"InstanceId": f"i-{n}", "LifecycleState": s} for n, s in enumerate(states)],
            }
        )

    assert warm_count(None) == 0
    assert warm_count(pool("Warmed:Stopped", "Warmed:Running", "Warmed:Terminating", "InService")) == 2
    assert warm_count(pool("Warmed:Stopped", status="PendingDelete")) == 0


def test_wire_form_is_backward_compatible_and_round_trips() -> None:
    asg = group(tags={"spillway.io/capacity-type": "spot"}, overrides=["m5.large", "m5.xlarge"])
    actions = [
        ScheduledAction.model_validate(
            {
                "AutoScalingGroupName": "g",
                "ScheduledActionName": "day",
                "Recurrence": "0 8 * * *",
                "MinSize": 3,
                "TimeZone": "Europe/Berlin",
                "StartTime": "2026-03-02T08:00:00Z",
            }
        ),
        ScheduledAction.model_validate(
            {"AutoScalingGroupName": "other", "ScheduledActionName": "x", "MinSize": 1}
        ),
    ]
    pools = {"g": WarmPool.model_validate({"WarmPoolConfiguration": {}, "Instances": [
        {"InstanceId": "i-w", "LifecycleState": "Warmed:Stopped"}]})}  # fmt: skip
    (built,) = build_node_groups([asg], [], CATALOGUE, {}, "ml", scheduled=actions, warm_pools=pools)
    assert [a.name for a in built.scheduled] == ["day"]
    assert built.scheduled[0].start == datetime(2026, 3, 2, 8, tzinfo=UTC)
    assert (built.warm_instances, built.capacity_type) == (1, "spot")
    wire = built.to_dict()
    assert wire["capacity_type"] == "spot" and wire["warm_instances"] == 1
    assert NodeGroup.from_dict(wire) == built
    # a group without any of it serializes as before, and old wire forms load
    (plain,) = build_node_groups([group()], [], CATALOGUE, {}, "ml")
    old = plain.to_dict()
    assert not {"scheduled", "warm_instances", "capacity_type", "instance_types", "problems"} & set(old)
    assert NodeGroup.from_dict(old) == plain
