"""Scaling an EKS managed node group from zero: its template carries what its nodes register with.

EKS tags the Auto Scaling group of a managed node group ``eks:cluster-name`` and ``eks:nodegroup-name``
and gives its nodes the node group's ``labels`` and ``taints`` (EKS API Reference, ``Nodegroup``), plus
``eks.amazonaws.com/nodegroup`` and ``eks.amazonaws.com/capacityType``. cluster-autoscaler's AWS provider
reads them with ``eks:DescribeNodegroup`` for such a group (kubernetes/autoscaler
cluster-autoscaler/cloudprovider/aws/aws_manager.go ``buildNodeFromTemplate``, aws_wrapper.go
``getManagedNodegroupInfo``): the node group's labels replace a node-template tag's of the same key
(``joinNodeLabelsChoosingUserValuesOverAPIValues`` copies the API's last), its taints are added to the
tags'. The node group and its group are made in moto; the group has no node.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError
from fakes import FakeCluster

from spillway.adapters.aws import AwsAdapter, AwsClients, AwsSettings
from spillway.adapters.nodegroup_cache import DEFAULT_TTL_SECONDS, NodegroupCache
from spillway.cli import main
from spillway.config import PlannerConfig
from spillway.errors import AwsError, AwsThrottled
from spillway.local import objects as o
from spillway.model.nodegroup import NodeGroup
from spillway.model.snapshot import Snapshot
from spillway.model.state import State
from spillway.observe import ObserveConfig, observe_once
from spillway.planner import plan

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
REGION = "us-east-1"
RESERVE = {"cpu": 100, "memory": 2**30 * 1000}
EKS_TAGS = {"eks:cluster-name": "prod", "eks:nodegroup-name": "batch-ng"}
TOLERATES = [{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}]


@pytest.fixture
def clients(moto_aws: None) -> AwsClients:
    return AwsClients((REGION,), boto3.Session(), AwsSettings(max_attempts=2))


@pytest.fixture
def adapter(clients: AwsClients) -> AwsAdapter:
    return AwsAdapter(clients, "prod")


def eks_node_group(name: str = "batch-ng", **extra: Any) -> None:
    """Cluster ``prod`` (once) and managed node group ``name`` with a label and a NoSchedule taint."""
    eks = boto3.client("eks", region_name=REGION)
    if "prod" not in eks.list_clusters()["clusters"]:
        eks.create_cluster(
            name="prod",
            roleArn="arn:aws:iam::123456789012:role/eks-cluster",
            resourcesVpcConfig={"subnetIds": ["subnet-1"]},
        )
    eks.create_nodegroup(
        clusterName="prod",
        nodegroupName=name,
        nodeRole="arn:aws:iam::123456789012:role/eks-node",
        subnets=["subnet-1"],
        scalingConfig={"minSize": 0, "maxSize": 5, "desiredSize": 0},
        labels={"workload-class": "batch"},
        taints=[{"key": "dedicated", "value": "batch", "effect": "NO_SCHEDULE"}],
        **extra,
    )


def managed_group(make_asg: Callable[..., Any], tags: dict[str, str] | None = None) -> None:
    """The node group's Auto Scaling group at zero, tagged as EKS tags it (and for Spillway)."""
    make_asg(REGION, "eks-batch-ng-0a1b", instance_type="m5.xlarge", desired=0, max_size=5,
             tags={**EKS_TAGS, **(tags or {})})  # fmt: skip


def the_group(adapter: AwsAdapter) -> NodeGroup:
    (group,) = adapter.node_groups_in(REGION, RESERVE, T0)
    return group


def refuse_with(clients: AwsClients, code: str, status: int) -> list[dict[str, Any]]:
    """Every DescribeNodegroup answered with the error ``code``; the calls' parameters recorded."""
    seen: list[dict[str, Any]] = []

    def refuse(params: dict[str, Any], **_: Any) -> None:
        seen.append(params)
        raise ClientError(
            {"Error": {"Code": code, "Message": "refused"}, "ResponseMetadata": {"HTTPStatusCode": status}},
            "DescribeNodegroup",
        )

    clients.eks(REGION).meta.events.register("provide-client-params.eks.DescribeNodegroup", refuse)
    return seen


def test_a_managed_group_at_zero_carries_the_node_groups_labels_and_taints(
    adapter: AwsAdapter, make_asg: Callable[..., Any]
) -> None:
    eks_node_group(capacityType="SPOT")
    managed_group(make_asg)

    group = the_group(adapter)

    assert group.template is not None
    labels = group.template.labels
    assert labels["workload-class"] == "batch"
    assert labels["eks.amazonaws.com/nodegroup"] == "batch-ng"
    assert labels["eks.amazonaws.com/capacityType"] == "SPOT"
    assert ("dedicated", "batch", "NoSchedule") in group.template.taints
    assert group.problems == ()


def test_a_pod_selecting_the_label_scales_the_group_from_zero_and_one_not_tolerating_its_taint_does_not(
    adapter: AwsAdapter, make_asg: Callable[..., Any]
) -> None:
    eks_node_group()
    managed_group(make_asg)
    selects = o.pod("batch-job", node_selector={"workload-class": "batch"}, tolerations=TOLERATES, created=T0)
    intolerant = o.pod("web", created=T0)

    observed = observe_once(FakeCluster([], [selects, intolerant]), adapter, ObserveConfig(cluster="prod"),
                            lambda: T0)  # fmt: skip
    stored = Snapshot.from_dict(json.loads(json.dumps(observed.to_dict())))  # what the plan Lambda loads
    result = plan(stored.cluster, list(stored.groups), PlannerConfig(cluster="prod", regions=[REGION]),
                  State(), T0).to_dict()  # fmt: skip

    assert [(s["group"], s["from"], s["to"], s["pods"]) for s in result["scale_up"]] == [
        ("eks-batch-ng-0a1b", 0, 1, ["default/batch-job"])
    ]
    assert [p["pod"] for p in result["pending"]] == ["default/web"]


def test_the_node_groups_label_wins_over_a_node_template_tag_of_the_same_key(
    adapter: AwsAdapter, make_asg: Callable[..., Any]
) -> None:
    """As cluster-autoscaler merges them, and as the node registers: EKS gives the kubelet the node
    group's labels, not the tag's. A tag of another key stays."""
    eks_node_group()
    managed_group(make_asg, {"k8s.io/cluster-autoscaler/node-template/label/workload-class": "web",
                             "k8s.io/cluster-autoscaler/node-template/label/team": "ml"})  # fmt: skip

    labels = the_group(adapter).template.labels  # type: ignore[union-attr]

    assert (labels["workload-class"], labels["team"]) == ("batch", "ml")


def test_a_tag_taint_and_the_node_groups_taint_of_the_same_key_and_effect_are_one_taint(
    adapter: AwsAdapter, make_asg: Callable[..., Any]
) -> None:
    eks_node_group()
    managed_group(make_asg, {"k8s.io/cluster-autoscaler/node-template/taint/dedicated": "other:NoSchedule",
                             "k8s.io/cluster-autoscaler/node-template/taint/gpu": "yes:NoExecute"})  # fmt: skip

    taints = the_group(adapter).template.taints  # type: ignore[union-attr]

    assert sorted(taints) == [("dedicated", "batch", "NoSchedule"), ("gpu", "yes", "NoExecute")]


def test_the_node_groups_own_resources_tag_is_read_over_the_groups(
    adapter: AwsAdapter, make_asg: Callable[..., Any]
) -> None:
    """DescribeNodegroup's ``tags`` (the node group's, which EKS does not copy to its Auto Scaling
    group): cluster-autoscaler takes their ``node-template/resources/`` keys over the group's tags
    (aws_manager.go ``buildNodeFromTemplate``, ``extractAllocatableResourcesFromTags``)."""
    storage = "k8s.io/cluster-autoscaler/node-template/resources/ephemeral-storage"
    eks_node_group(tags={storage: "200Gi"})
    managed_group(make_asg, {storage: "20Gi"})

    template = the_group(adapter).template

    assert template is not None
    assert template.allocatable["ephemeral-storage"] == 200 * 2**30 * 1000
    assert "ephemeral-storage" in template.tagged


@pytest.mark.parametrize(
    ("code", "status"), [("AccessDeniedException", 403), ("ResourceNotFoundException", 404)]
)
def test_describe_nodegroup_refused_leaves_the_template_of_the_tags_and_names_the_call(
    adapter: AwsAdapter, clients: AwsClients, make_asg: Callable[..., Any], code: str, status: int
) -> None:
    eks_node_group()
    managed_group(make_asg, {"k8s.io/cluster-autoscaler/node-template/label/team": "ml"})
    refuse_with(clients, code, status)

    group = the_group(adapter)

    assert group.template is not None
    assert group.template.labels["team"] == "ml"
    assert "workload-class" not in group.template.labels
    assert group.template.taints == ()
    assert group.template.labels["eks.amazonaws.com/nodegroup"] == "batch-ng"  # from the eks: tag
    (problem,) = group.problems
    assert "DescribeNodegroup(prod, batch-ng)" in problem and code in problem


def test_a_node_group_eks_does_not_know_is_a_problem_of_its_group_alone(
    adapter: AwsAdapter, make_asg: Callable[..., Any]
) -> None:
    """moto's own answer: the group is tagged for a node group that does not exist."""
    eks_node_group(name="other")
    managed_group(make_asg)

    (problem,) = the_group(adapter).problems

    assert "DescribeNodegroup(prod, batch-ng)" in problem and "ResourceNotFoundException" in problem


def test_a_throttled_describe_nodegroup_fails_the_regions_read(
    adapter: AwsAdapter, clients: AwsClients, make_asg: Callable[..., Any]
) -> None:
    """As every other read of observe: one throttled call must not plan a tainted group as untainted."""
    eks_node_group()
    managed_group(make_asg)
    refuse_with(clients, "ThrottlingException", 429)

    with pytest.raises(AwsThrottled, match="DescribeNodegroup"):
        the_group(adapter)


def test_describe_nodegroup_is_called_once_per_node_group_per_observation_and_not_for_other_groups(
    adapter: AwsAdapter, clients: AwsClients, make_asg: Callable[..., Any]
) -> None:
    eks_node_group()
    managed_group(make_asg)
    make_asg(
        REGION, "eks-batch-ng-9z8y", instance_type="m5.xlarge", desired=0, tags=EKS_TAGS
    )  # same node group
    make_asg(REGION, "self-managed", instance_type="m5.large", desired=0)
    seen: list[dict[str, Any]] = []
    clients.eks(REGION).meta.events.register(
        "provide-client-params.eks.DescribeNodegroup", lambda params, **_: seen.append(dict(params))
    )

    groups = adapter.node_groups_in(REGION, RESERVE, T0)

    assert seen == [{"clusterName": "prod", "nodegroupName": "batch-ng"}]
    labelled = {g.name: g.template.labels.get("workload-class") for g in groups if g.template}
    assert labelled == {"eks-batch-ng-0a1b": "batch", "eks-batch-ng-9z8y": "batch", "self-managed": None}


def aws_cli_json(answer: dict[str, Any]) -> str:
    """An SDK answer as the AWS CLI prints it: times in ISO 8601."""
    return json.dumps(answer, default=lambda value: value.isoformat())


def scratch_pod(storage: str) -> dict[str, Any]:
    """A pod tolerating the node group's taint that asks for ``storage`` of ephemeral storage."""
    pod = o.pod("scratch", tolerations=TOLERATES, created=T0)
    pod["spec"]["containers"][0]["resources"]["requests"]["ephemeral-storage"] = storage
    return pod


def test_spillway_plan_given_describe_nodegroup_output_plans_the_group_at_zero_as_the_lambda_does(
    adapter: AwsAdapter, make_asg: Callable[..., Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The offline plan reads what ``aws eks describe-nodegroup`` prints, matched to the group by its
    ``eks:`` tags and merged by the same code: the node group's label, taint and resources tag give the
    same scale-up and the same pending pods as observe and the plan Lambda."""
    storage = "k8s.io/cluster-autoscaler/node-template/resources/ephemeral-storage"
    instance_type = "k8s.io/cluster-autoscaler/node-template/label/node.kubernetes.io/instance-type"
    eks_node_group(tags={storage: "200Gi"})
    managed_group(make_asg, {instance_type: "m5.xlarge"})  # offline, the type comes from a tag
    pods = [
        o.pod("batch-job", node_selector={"workload-class": "batch"}, tolerations=TOLERATES, created=T0),
        scratch_pod("150Gi"),  # fits the node group's resources tag only
        o.pod("web", created=T0),  # does not tolerate the node group's taint
    ]
    observed = observe_once(FakeCluster([], pods), adapter, ObserveConfig(cluster="prod"), lambda: T0)
    stored = Snapshot.from_dict(json.loads(json.dumps(observed.to_dict())))
    config = PlannerConfig(cluster="prod", regions=[REGION])
    lambda_plan = plan(stored.cluster, list(stored.groups), config, State(), T0).to_dict()

    files = {
        "cluster.json": json.dumps(o.kube_list(pods)),
        "asgs.json": aws_cli_json(
            boto3.client("autoscaling", region_name=REGION).describe_auto_scaling_groups()
        ),
        "batch-ng.json": aws_cli_json(
            boto3.client("eks", region_name=REGION).describe_nodegroup(
                clusterName="prod", nodegroupName="batch-ng"
            )
        ),
        "config.json": json.dumps({"cluster": "prod", "regions": [REGION]}),
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    code = main(["plan", "--cluster", str(tmp_path / "cluster.json"), "--asgs", str(tmp_path / "asgs.json"),
                 "--nodegroup", str(tmp_path / "batch-ng.json"), "--config", str(tmp_path / "config.json"),
                 "--now", T0.isoformat()])  # fmt: skip
    out, err = capsys.readouterr()

    assert code == 0, err
    offline = json.loads(out)
    ups = [(s["group"], s["from"], s["to"], sorted(s["pods"])) for s in lambda_plan["scale_up"]]
    assert ups == [("eks-batch-ng-0a1b", 0, 1, ["default/batch-job", "default/scratch"])]
    assert [(s["group"], s["from"], s["to"], sorted(s["pods"])) for s in offline["scale_up"]] == ups
    assert (
        [p["pod"] for p in offline["pending"]]
        == [p["pod"] for p in lambda_plan["pending"]]
        == ["default/web"]
    )


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def record_calls(clients: AwsClients) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    clients.eks(REGION).meta.events.register(
        "provide-client-params.eks.DescribeNodegroup", lambda params, **_: seen.append(dict(params))
    )
    return seen


def test_a_node_group_is_read_once_in_cluster_autoscalers_ttl_and_its_change_seen_after(
    adapter: AwsAdapter, clients: AwsClients, make_asg: Callable[..., Any]
) -> None:
    """cluster-autoscaler keeps DescribeNodegroup's answer 6 minutes (managed_nodegroup_cache.go
    ``managedNodegroupCachedTTL``); observe runs every minute and asked every node group every time.
    A label changed in place (UpdateNodegroupConfig) reaches the group's template once the answer is
    that old, as in cluster-autoscaler. (No jitter: it expires at the TTL.)"""
    clock = Clock()
    adapter._nodegroup_cache = NodegroupCache(clock=clock, jitter_seconds=0)
    eks_node_group()
    managed_group(make_asg)
    seen = record_calls(clients)

    asking = adapter.observe_region(REGION, T0)
    first = adapter.build_groups(asking, RESERVE)[0].template.labels["workload-class"]  # type: ignore[union-attr]
    boto3.client("eks", region_name=REGION).update_nodegroup_config(
        clusterName="prod", nodegroupName="batch-ng", labels={"addOrUpdateLabels": {"workload-class": "web"}}
    )
    clock.now += DEFAULT_TTL_SECONDS - 1
    view = adapter.observe_region(REGION, T0)
    kept = adapter.build_groups(view, RESERVE)[0].template.labels["workload-class"]  # type: ignore[union-attr]
    calls_when_kept = len(seen)
    clock.now += 1
    changed = the_group(adapter).template.labels["workload-class"]  # type: ignore[union-attr]

    assert (first, kept, changed) == ("batch", "batch", "web")
    assert calls_when_kept == 1 and len(seen) == 2
    assert view.calls == asking.calls - 1  # a kept answer is no call


def test_a_refused_read_is_kept_too_and_a_throttled_one_is_not(
    adapter: AwsAdapter, clients: AwsClients, make_asg: Callable[..., Any]
) -> None:
    """As cluster-autoscaler caches a failed read (an empty entry, "to limit failed calls to the EKS
    API"): the group's problem stands for the TTL with no further call. A throttled read fails the
    region's read and is not kept: the next observation asks again."""
    eks_node_group()
    managed_group(make_asg)
    make_asg(REGION, "eks-other-ng", instance_type="m5.xlarge", desired=0,
             tags={"eks:cluster-name": "prod", "eks:nodegroup-name": "other-ng"})  # fmt: skip
    seen = record_calls(clients)
    throttled: list[bool] = []

    def throttle_once(**_: Any) -> None:
        if not throttled:
            throttled.append(True)
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"},
                               "ResponseMetadata": {"HTTPStatusCode": 429}}, "DescribeNodegroup")  # fmt: skip

    clients.eks(REGION).meta.events.register("provide-client-params.eks.DescribeNodegroup", throttle_once)
    with pytest.raises(AwsThrottled):
        adapter.node_groups_in(REGION, RESERVE, T0)

    groups = {g.name: g for g in adapter.node_groups_in(REGION, RESERVE, T0)}
    again = {g.name: g for g in adapter.node_groups_in(REGION, RESERVE, T0)}

    assert groups["eks-batch-ng-0a1b"].template.labels["workload-class"] == "batch"  # type: ignore[union-attr]
    (problem,) = groups["eks-other-ng"].problems
    assert "ResourceNotFoundException" in problem and again["eks-other-ng"].problems == (problem,)
    asked = [c["nodegroupName"] for c in seen]
    assert sorted(asked[1:]) == ["batch-ng", "other-ng"]  # after the throttled one: each once


def test_a_node_group_deleted_and_made_again_is_read_again_not_served_the_old_ones_answer(
    adapter: AwsAdapter, clients: AwsClients, make_asg: Callable[..., Any]
) -> None:
    """A node group deleted and created again under its name is another node group (EKS API Reference,
    ``Nodegroup``: a new ``nodegroupArn``, its own Auto Scaling group in ``resources.autoScalingGroups``),
    whatever it is configured with now: recreating is how a node group's capacity type or instance types
    change. An answer kept for the old one's group describes the old one, so the node group is asked
    again for the new group, not served for the rest of the 6 minutes (cluster-autoscaler's
    managed_nodegroup_cache.go keeps an entry by name for its TTL)."""
    clock = Clock()
    adapter._nodegroup_cache = NodegroupCache(clock=clock, jitter_seconds=0)
    eks_node_group(capacityType="ON_DEMAND")
    managed_group(make_asg)
    seen = record_calls(clients)
    before = the_group(adapter).template
    assert before is not None and before.labels["eks.amazonaws.com/capacityType"] == "ON_DEMAND"

    eks = boto3.client("eks", region_name=REGION)
    eks.delete_nodegroup(clusterName="prod", nodegroupName="batch-ng")
    boto3.client("autoscaling", region_name=REGION).delete_auto_scaling_group(
        AutoScalingGroupName="eks-batch-ng-0a1b", ForceDelete=True
    )
    eks.create_nodegroup(
        clusterName="prod", nodegroupName="batch-ng", nodeRole="arn:aws:iam::123456789012:role/eks-node",
        subnets=["subnet-1"], scalingConfig={"minSize": 0, "maxSize": 5, "desiredSize": 0},
        labels={"workload-class": "web"}, capacityType="SPOT",
    )  # fmt: skip
    make_asg(REGION, "eks-batch-ng-7f3e", instance_type="m5.xlarge", desired=0, max_size=5, tags=EKS_TAGS)
    clock.now += 60  # the next observation, well within the TTL

    after = the_group(adapter).template

    assert after is not None
    assert after.labels["workload-class"] == "web"
    assert after.labels["eks.amazonaws.com/capacityType"] == "SPOT"
    assert after.taints == ()
    assert len(seen) == 2
    clock.now += 60
    the_group(adapter)
    assert len(seen) == 2  # the new node group's answer is kept as any other


def test_a_describe_nodegroup_answer_without_its_nodegroup_fails_the_regions_read_naming_it(
    adapter: AwsAdapter, clients: AwsClients, make_asg: Callable[..., Any]
) -> None:
    """An answer (HTTP 200) that carries no ``nodegroup`` (EKS API Reference, DescribeNodegroup: the one
    member of its response) is an unexpected response, as one that fails validation is: the region's read
    fails with our error naming the call and the member, not a KeyError that no caller maps."""
    eks_node_group()
    managed_group(make_asg)

    def answer_without_nodegroup(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        return AWSResponse("https://eks", 200, {}, None), {"ResponseMetadata": {"HTTPStatusCode": 200}}

    clients.eks(REGION).meta.events.register("before-call.eks.DescribeNodegroup", answer_without_nodegroup)

    with pytest.raises(AwsError, match=r"DescribeNodegroup\(prod, batch-ng\).*nodegroup"):
        the_group(adapter)
