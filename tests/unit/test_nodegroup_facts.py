"""NodeGroup facts of issue 12: capacity type, warm pool count, scheduled actions, mixed overrides."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from spillway.local import objects as o
from spillway.model.aws import (
    AutoScalingGroup,
    ScheduledAction,
    SuspendedProcess,
    WarmPool,
    bundled_instance_types,
)
from spillway.model.nodegroup import (
    NodeGroup,
    build_node_groups,
    capacity_type,
    resolve_instance_type,
    warm_count,
)

CATALOGUE = bundled_instance_types()
ALL_SPOT = {"OnDemandBaseCapacity": 0, "OnDemandPercentageAboveBaseCapacity": 0}


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
        # the type of the capacity above the on-demand base: any share of spot makes it spot
        ({"distribution": {"OnDemandBaseCapacity": 1, "OnDemandPercentageAboveBaseCapacity": 0}}, "spot"),
        ({"distribution": {"OnDemandPercentageAboveBaseCapacity": 50}}, "spot"),
        ({"distribution": {"OnDemandBaseCapacity": 2, "OnDemandPercentageAboveBaseCapacity": 99}}, "spot"),
        (
            {"distribution": {"OnDemandBaseCapacity": 2, "OnDemandPercentageAboveBaseCapacity": 100}},
            "on-demand",
        ),
        ({"distribution": {"OnDemandBaseCapacity": 3}}, "on-demand"),  # AWS's default: 100 % above base
        ({"distribution": {}}, "on-demand"),
        # a tag that says what the policy launches is no problem
        ({"tags": {"spillway.io/capacity-type": "spot"}, "distribution": ALL_SPOT}, "spot"),
        ({"labels": {"karpenter.sh/capacity-type": "on-demand"}, "distribution": {}}, "on-demand"),
    ],
)
def test_capacity_type(kw: dict[str, Any], expected: str) -> None:
    assert capacity_type(group(**kw)) == (expected, "")


SPOT_TAGS = [
    ("spillway.io/capacity-type", "on-demand"),
    ("k8s.io/cluster-autoscaler/node-template/label/eks.amazonaws.com/capacityType", "ON_DEMAND"),
    ("k8s.io/cluster-autoscaler/node-template/label/karpenter.sh/capacity-type", "on-demand"),
]


@pytest.mark.parametrize("tag", SPOT_TAGS)
def test_what_the_policy_launches_wins_over_a_tag_that_says_otherwise_and_the_tag_is_a_problem(
    tag: tuple[str, str],
) -> None:
    """A tag cannot change what EC2 launches: with 0 % on-demand above a base of 0 every instance is
    Spot (AWS InstancesDistribution.OnDemandPercentageAboveBaseCapacity). (Review r11.)"""
    asg = group(tags={tag[0]: tag[1]}, distribution=ALL_SPOT)
    (built,) = build_node_groups([asg], [], CATALOGUE, {}, "ml")
    assert built.capacity_type == "spot"
    (problem,) = built.problems
    assert problem.startswith(f"Tags[{tag[0]}]: {tag[1]!r} says on-demand")
    assert "the mixed instances policy launches spot" in problem


def test_a_policy_that_launches_only_on_demand_wins_over_a_spot_tag() -> None:
    asg = group(tags={"spillway.io/capacity-type": "spot"}, distribution={"OnDemandBaseCapacity": 1})
    kind, problem = capacity_type(asg)
    assert kind == "on-demand"
    assert problem.startswith("Tags[spillway.io/capacity-type]: 'spot' says spot")


@pytest.mark.parametrize(
    ("market", "tags", "expected", "problem"),
    [
        ("spot", {}, "spot", ""),
        (
            "spot",
            {"spillway.io/capacity-type": "on-demand"},
            "spot",
            "Tags[spillway.io/capacity-type]: 'on-demand'",
        ),
        (
            "on-demand",
            {"spillway.io/capacity-type": "spot"},
            "on-demand",
            "Tags[spillway.io/capacity-type]: 'spot'",
        ),
        ("on-demand", {}, "on-demand", ""),
        (None, {"spillway.io/capacity-type": "spot"}, "spot", ""),  # not read (spillway plan): the tag
    ],
)
def test_a_launch_template_that_requests_spot_makes_a_spot_group(
    market: str | None, tags: dict[str, str], expected: str, problem: str
) -> None:
    """Without a mixed instances policy, what the launch template (or configuration) requests is what EC2
    launches: ``InstanceMarketOptions.MarketType: spot`` (or a launch configuration's ``SpotPrice``) makes
    every instance Spot. The adapter reads it into ``LaunchMarketType``. (Review r11.)"""
    asg = group(tags=tags).model_copy(update={"LaunchMarketType": market})
    kind, found = capacity_type(asg)
    assert kind == expected
    assert found.startswith(problem) and bool(found) is bool(problem)
    if problem:
        assert "the launch template launches" in found


def mixed(base: int | None, percent: int | None, desired: int) -> NodeGroup:
    dist = {"OnDemandBaseCapacity": base, "OnDemandPercentageAboveBaseCapacity": percent}
    asg = group(distribution={k: v for k, v in dist.items() if v is not None}, desired=desired, max_size=20)
    (built,) = build_node_groups([asg], [], CATALOGUE, {}, "ml")
    return built


@pytest.mark.parametrize(
    ("base", "percent", "desired", "count", "expected"),
    [
        (0, 50, 0, 1, "spot"),  # half of everything above a zero base may be spot
        (0, 50, 4, 1, "spot"),
        (2, 50, 2, 1, "spot"),  # the base is filled: the next launch is above it
        (2, 0, 5, 1, "spot"),
        (2, 50, 0, 1, "on-demand"),  # the base is launched first, on-demand
        (2, 50, 0, 2, "on-demand"),  # ... the whole launch fits below it
        (2, 50, 0, 3, "spot"),  # ... the third node is above it
        (2, 50, 1, 2, "spot"),
        (2, 100, 5, 10, "on-demand"),  # 100 % above base: never spot
        (None, None, 5, 10, "on-demand"),  # AWS's defaults: base 0, 100 % on-demand
    ],
)
def test_a_mixed_group_is_spot_once_its_next_launches_may_be(
    base: int | None, percent: int | None, desired: int, count: int, expected: str
) -> None:
    built = mixed(base, percent, desired)
    assert built.launch_capacity_type(count) == expected
    assert built.spot is (built.launch_capacity_type(1) == "spot")


def test_nodes_a_plan_opens_already_count_against_the_on_demand_base() -> None:
    built = mixed(3, 50, 1)
    assert (built.spot, built.sure_on_demand()) == (False, 2)
    assert built.launch_capacity_type(1, opened=1) == "on-demand"
    assert built.launch_capacity_type(1, opened=2) == "spot" and built.sure_on_demand(2) == 0
    # a tag agreeing with the policy keeps the policy's base
    tagged = group(tags={"spillway.io/capacity-type": "spot"}, desired=0,
                   distribution={"OnDemandBaseCapacity": 1, "OnDemandPercentageAboveBaseCapacity": 0})  # fmt: skip
    (spot,) = build_node_groups([tagged], [], CATALOGUE, {}, "ml")
    assert (spot.launch_capacity_type(1), spot.launch_capacity_type(2)) == ("on-demand", "spot")


def test_the_on_demand_base_round_trips_in_the_wire_form() -> None:
    built = mixed(2, 50, 0)
    wire = built.to_dict()
    assert (wire["capacity_type"], wire["on_demand_base"]) == ("spot", 2)
    assert NodeGroup.from_dict(wire) == built
    assert "on_demand_base" not in mixed(0, 50, 0).to_dict()


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
    # still launching into the pool (its lifecycle hook may hold it at Wait): a scale-out now takes a
    # cold start instead, so none of the three counts, whether or not a hook holds it at that moment
    assert warm_count(pool("Warmed:Pending", "Warmed:Pending:Wait", "Warmed:Pending:Proceed")) == 0
    assert warm_count(pool("Warmed:Hibernated", "Warmed:Pending:Proceed")) == 1


def test_warm_instances_of_another_type_than_the_group_launches_do_not_count() -> None:
    """A warm pool keeps the instances it holds when the launch template changes (AWS::AutoScaling::
    WarmPool: instances in the warm pool are not replaced by a rolling update, which "can potentially
    result in different instance configurations"; an instance refresh replaces them), and a scale-out
    draws them as they are: such an instance is not the node the plan counts on, so it is no warm node
    of the group's template."""
    asg = group().model_copy(update={"LaunchInstanceType": "m5.4xlarge"})
    pools = {"g": WarmPool.model_validate({"WarmPoolConfiguration": {}, "Instances": [
        {"InstanceId": "i-new", "InstanceType": "m5.4xlarge", "LifecycleState": "Warmed:Stopped"},
        {"InstanceId": "i-old", "InstanceType": "m5.large", "LifecycleState": "Warmed:Stopped"},
        {"InstanceId": "i-any", "LifecycleState": "Warmed:Stopped"}]})}  # fmt: skip
    (built,) = build_node_groups([asg], [], CATALOGUE, {}, "ml", warm_pools=pools)
    assert built.instance_type == "m5.4xlarge"
    assert built.warm_instances == 2  # the template's type, and one whose type is not given
    assert built.pooled_instances == ("i-any", "i-new", "i-old")  # every one is outside its capacity
    assert NodeGroup.from_dict(built.to_dict()) == built


def test_wire_form_is_backward_compatible_and_round_trips() -> None:
    asg = group(overrides=["m5.large", "m5.xlarge"], distribution=ALL_SPOT)
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
    assert not {
        "scheduled",
        "warm_instances",
        "capacity_type",
        "instance_types",
        "problems",
        "suspended",
    } & set(old)
    assert NodeGroup.from_dict(old) == plain


def test_suspended_processes_reach_the_group_and_its_snapshot_and_older_snapshots_load() -> None:
    """DescribeAutoScalingGroups' SuspendedProcesses (with AWS's SuspensionReason) are carried into the
    group, so the planner sees a group that launches or terminates nothing; a snapshot stored before
    they were carried has no key and loads as nothing suspended. (Review r24.)"""
    asg = group().model_copy(
        update={"SuspendedProcesses": [
            SuspendedProcess(ProcessName="Launch", SuspensionReason="Administrative suspension at 2026-11-01T08:00:00Z"),
            SuspendedProcess(ProcessName="AZRebalance"),
        ]}
    )  # fmt: skip
    (built,) = build_node_groups([asg], [], CATALOGUE, {}, "ml")
    assert built.suspension("Launch") == (
        "its Launch process is suspended (Administrative suspension at 2026-11-01T08:00:00Z)"
    )
    assert built.suspension("AZRebalance") == "its AZRebalance process is suspended"
    assert built.suspension("Terminate") is None
    wire = built.to_dict()
    assert wire["suspended"] == {
        "AZRebalance": "",
        "Launch": "Administrative suspension at 2026-11-01T08:00:00Z",
    }
    assert NodeGroup.from_dict(wire) == built
    older = {k: v for k, v in wire.items() if k != "suspended"}
    assert NodeGroup.from_dict(older).suspended == ()


@pytest.mark.parametrize(
    ("itype", "pods"),
    [("p4d.24xlarge", 737), ("p4de.24xlarge", 737), ("p5.48xlarge", 100), ("trn1.32xlarge", 247),
     ("trn1n.32xlarge", 247), ("m5.2xlarge", 58), ("g5.xlarge", 58)],
)  # fmt: skip
def test_max_pods_counts_the_interfaces_of_the_default_network_card(itype: str, pods: int) -> None:
    """EKS's eni-max-pods.txt: the VPC CNI gives pods the default network card's interfaces. Counting
    every card's, p4d's template took 2,942 pods where the kubelet allows 737. (Found by review.)"""
    assert bundled_instance_types()[itype].max_pods == pods


def test_max_pods_reads_network_cards_as_describe_instance_types_answers_them() -> None:
    from spillway.model.aws import InstanceTypeInfo

    raw = {
        "InstanceType": "x.big", "VCpuInfo": {"DefaultVCpus": 96}, "MemoryInfo": {"SizeInMiB": 1},
        "NetworkInfo": {"MaximumNetworkInterfaces": 60, "Ipv4AddressesPerInterface": 50, "DefaultNetworkCardIndex": 1,
                        "NetworkCards": [{"NetworkCardIndex": 0, "MaximumNetworkInterfaces": 45},
                                         {"NetworkCardIndex": 1, "MaximumNetworkInterfaces": 15}]},
    }  # fmt: skip
    assert InstanceTypeInfo.model_validate(raw).max_pods == 15 * 49 + 2


@pytest.mark.parametrize(
    ("itype", "pods"),
    [("g6e.24xlarge", 492), ("g6e.48xlarge", 492), ("p5e.48xlarge", 100), ("p5en.48xlarge", 198),
     ("p6-b200.48xlarge", 198)],
)  # fmt: skip
def test_bundled_multi_card_gpu_types_take_the_max_pods_eks_gives_them(itype: str, pods: int) -> None:
    """amazon-eks-ami's eni-max-pods.txt (nodeadm/internal/kubelet) for the bundle's other multi-card
    types: their catalogue entries carried no NetworkCards, so the formula counted every card's
    interfaces (a p5en.48xlarge template took 3,138 pods and reserved 11 MiB for each)."""
    assert bundled_instance_types()[itype].max_pods == pods


def test_each_instance_of_a_group_over_several_zones_keeps_its_zone_and_type_in_the_snapshot() -> None:
    """DescribeAutoScalingGroups gives each instance its AvailabilityZone and InstanceType: of a group
    over several zones the planner reads where an instance with no Node yet comes up (the template names
    no zone), so the snapshot observe stores keeps them, and the plan Lambda reads them back. A group
    in one zone of one type keeps none: its template says both."""
    ids = [o.instance_id("g-0"), o.instance_id("g-1")]
    (spread,) = build_node_groups(
        [group(zones=["us-east-1a", "us-east-1b"], instances=ids)], [], CATALOGUE, {}, "ml"
    )
    (single,) = build_node_groups([group(instances=ids)], [], CATALOGUE, {}, "ml")

    assert spread.instance_places == tuple(
        sorted([(ids[0], "us-east-1a", "m5.2xlarge"), (ids[1], "us-east-1b", "m5.2xlarge")])
    )
    assert NodeGroup.from_dict(spread.to_dict()) == spread
    assert single.instance_places == ()
    assert "instance_places" not in single.to_dict()


@pytest.mark.parametrize(
    ("label", "value", "named"),
    [
        ("pool type", "gpu", "key 'pool type' has a name part"),
        ("Example.com/pool", "gpu", "key 'Example.com/pool' has a prefix"),
        ("pool", "-gpu-", "value '-gpu-' of 'pool' is not a label value"),
        ("pool", "g" * 64, f"value {'g' * 64!r} of 'pool' is not a label value"),
    ],
)
def test_a_node_template_label_tag_that_is_no_label_is_left_out_and_named_in_the_groups_problems(
    label: str, value: str, named: str
) -> None:
    """No node carries such a label (the kubelet refuses it as --node-labels), so a selector on it
    would be planned onto nodes that never match it; the group's other labels still hold."""
    tag = "k8s.io/cluster-autoscaler/node-template/label/" + label
    template = "k8s.io/cluster-autoscaler/node-template/label/"
    asg = group(
        tags={tag: value, template + "team": "ml", template + "node.kubernetes.io/instance-type": "m5.large"}
    )
    (built,) = build_node_groups([asg], [], CATALOGUE, {}, "ml")
    assert built.template is not None and built.refusal == ""
    assert label not in built.template.labels and built.template.labels["team"] == "ml"
    (problem,) = [p for p in built.problems if "node-template/label" in p]
    assert problem.startswith(f"Tags[{tag}]: {named}") and "left out of the group's node template" in problem


def test_a_live_instance_not_in_service_yet_is_kept_with_its_state_and_only_an_in_service_one_is_held() -> (
    None
):
    """Auto Scaling's Terminate suspension holds InService instances only (EC2 Auto Scaling User Guide,
    "Considerations for suspending processes"): the plan reads each live instance's LifecycleState that
    is not InService, keeps it in the snapshot, and judges it by the rule the removal step follows."""
    states = {"i-a": "InService", "i-b": "Pending:Wait", "i-c": "Pending", "i-d": "Standby"}
    raw = o.asg("g", desired=3, instances=list(states), instance_states=states, suspended=["Terminate"])
    (built,) = build_node_groups([AutoScalingGroup.model_validate(raw)], [], CATALOGUE, {}, "ml")
    assert built.pending_states == (("i-b", "Pending:Wait"), ("i-c", "Pending"))
    assert NodeGroup.from_dict(built.to_dict()) == built
    assert (built.terminate_held("i-a") or "").startswith("its Terminate process is suspended")
    assert built.terminate_held("i-b") is None and built.terminate_held("i-c") is None
    older = NodeGroup.from_dict({k: v for k, v in built.to_dict().items() if k != "pending_states"})
    assert older.terminate_held("i-b") == built.terminate_held("i-a")  # not known: taken as InService
    (running,) = build_node_groups([AutoScalingGroup.model_validate({**raw, "SuspendedProcesses": []})], [],
                                   CATALOGUE, {}, "ml")  # fmt: skip
    assert running.terminate_held("i-a") is None
