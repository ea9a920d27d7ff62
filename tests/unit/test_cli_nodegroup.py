"""`spillway plan --nodegroup FILE`: what `aws eks describe-nodegroup` prints, read as observe reads
DescribeNodegroup.

The file is the CLI's output for one node group: an object whose ``nodegroup`` is the EKS API's
``Nodegroup`` (EKS API Reference, DescribeNodegroup: Response Syntax), with ``nodegroupArn``
(``arn:aws:eks:<region>:<account>:nodegroup/<cluster>/<name>/<id>``) naming its region. It is matched
to the groups of ``--asgs`` tagged ``eks:cluster-name`` and ``eks:nodegroup-name`` with its cluster and
name in that region, as observe asks DescribeNodegroup in each group's region about the node group its
tags name, and merged by the same code (spillway.model.aws ``with_managed_nodegroups``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spillway import inputs
from spillway.cli import main
from spillway.config import PlannerConfig
from spillway.local import objects as o

TYPE_TAG = "k8s.io/cluster-autoscaler/node-template/label/node.kubernetes.io/instance-type"
TOLERATES = [{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}]


def managed_asg(name: str, region: str = "us-east-1", nodegroup: str = "batch-ng") -> dict[str, Any]:
    """A group at zero of node group ``nodegroup`` of cluster ``ml``, as EKS tags it."""
    raw = o.asg(name, region=region, cluster="ml", instance_type="m5.xlarge", desired=0, max_size=5)
    raw["Tags"] += [
        {"Key": "eks:cluster-name", "Value": "ml"},
        {"Key": "eks:nodegroup-name", "Value": nodegroup},
        {"Key": TYPE_TAG, "Value": "m5.xlarge"},
    ]
    return raw


def describe_nodegroup(region: str = "us-east-1", name: str = "batch-ng", **extra: Any) -> dict[str, Any]:
    """``aws eks describe-nodegroup --cluster-name ml --nodegroup-name <name>`` output (trimmed)."""
    return {
        "nodegroup": {
            "nodegroupName": name,
            "nodegroupArn": f"arn:aws:eks:{region}:123456789012:nodegroup/ml/{name}/6ac6a2c8-5a3e-4c3c-9f37",
            "clusterName": "ml",
            "version": "1.31",
            "status": "ACTIVE",
            "capacityType": "ON_DEMAND",
            "scalingConfig": {"minSize": 0, "maxSize": 5, "desiredSize": 0},
            "instanceTypes": ["m5.xlarge"],
            "labels": {"workload-class": "batch"},
            "taints": [{"key": "dedicated", "value": "batch", "effect": "NO_SCHEDULE"}],
            "resources": {"autoScalingGroups": [{"name": "eks-batch-ng"}]},
            "tags": {},
            **extra,
        }
    }


def write(tmp_path: Path, name: str, doc: Any) -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def base_args(tmp_path: Path, groups: list[dict[str, Any]], pods: list[dict[str, Any]]) -> list[str]:
    regions = sorted({g["AutoScalingGroupARN"].split(":")[3] for g in groups})
    return [
        "plan",
        "--cluster", write(tmp_path, "cluster.json", o.kube_list(pods)),
        "--asgs", write(tmp_path, "asgs.json", o.asgs_output(groups)),
        "--config", write(tmp_path, "config.json", {"cluster": "ml", "regions": regions}),
        "--now", "2026-03-02T09:00:00Z",
    ]  # fmt: skip


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict[str, Any] | None, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


def ups(result: dict[str, Any] | None) -> dict[str, list[str]]:
    assert result is not None
    return {s["group"]: s["pods"] for s in result["scale_up"]}


def selecting_pod() -> dict[str, Any]:
    return o.pod("batch-job", node_selector={"workload-class": "batch"}, tolerations=TOLERATES)


def test_a_pod_selecting_the_node_groups_label_scales_its_group_from_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = base_args(tmp_path, [managed_asg("eks-batch-ng")], [selecting_pod(), o.pod("web")])

    code, without, _ = run(capsys, args)
    assert code == 0 and ups(without) == {"eks-batch-ng": ["default/web"]}  # the tags alone: no taint
    code, given, err = run(capsys, [*args, "--nodegroup", write(tmp_path, "ng.json", describe_nodegroup())])

    assert code == 0, err
    assert ups(given) == {"eks-batch-ng": ["default/batch-job"]}
    assert given is not None and [p["pod"] for p in given["pending"]] == ["default/web"]


def test_the_file_is_matched_by_the_groups_eks_tags_in_the_region_of_its_arn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Cluster and node group names are unique within a region only: a file of us-west-2's node
    group gives its labels to us-west-2's group alone."""
    groups = [managed_asg("east-ng", "us-east-1"), managed_asg("west-ng", "us-west-2")]
    args = base_args(tmp_path, groups, [selecting_pod()])

    ng = write(tmp_path, "ng.json", describe_nodegroup(region="us-west-2"))
    code, result, err = run(capsys, [*args, "--nodegroup", ng])

    assert code == 0, err
    assert ups(result) == {"west-ng": ["default/batch-job"]}


def test_the_node_groups_resources_tag_comes_through_and_one_that_is_no_quantity_refuses_the_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As observe: a tag value is the user's, and EKS keeps it as given, so it refuses that group
    (listed in ``refused_groups``) rather than the input."""
    key = "k8s.io/cluster-autoscaler/node-template/resources/ephemeral-storage"
    args = base_args(tmp_path, [managed_asg("eks-batch-ng")], [selecting_pod()])

    code, result, err = run(
        capsys, [*args, "--nodegroup", write(tmp_path, "bad.json", describe_nodegroup(tags={key: "lots"}))]
    )

    assert code == 0, err
    assert result is not None and result["scale_up"] == []
    (refused,) = result["refused_groups"]
    assert refused["group"] == "eks-batch-ng"
    assert refused["reason"].startswith(f"ManagedNodegroup(batch-ng).tags[{key}]: not a quantity")


def test_a_group_of_a_node_group_no_file_gives_says_so_in_its_problems(tmp_path: Path) -> None:
    asgs = inputs.load_asgs([write(tmp_path, "asgs.json", o.asgs_output([managed_asg("eks-batch-ng")]))])

    (group,) = inputs.node_groups(inputs.load_nodegroups([], asgs), [], inputs.load_instance_types(None),
                                  PlannerConfig(cluster="ml"))  # fmt: skip

    (problem,) = group.problems
    assert problem.startswith("DescribeNodegroup(ml, batch-ng): no --nodegroup file gives it")


def without(doc: dict[str, Any], field: str) -> dict[str, Any]:
    doc["nodegroup"].pop(field)
    return doc


BAD = {
    "not JSON": ("{", "ng.json: not valid JSON"),
    "no nodegroup": ({"nodegroups": []}, "ng.json: nodegroup: "),
    "labels not a map": (describe_nodegroup(labels=["workload-class=batch"]), "ng.json: nodegroup.labels: "),
    "no name": (without(describe_nodegroup(), "nodegroupName"), "ng.json: nodegroup.nodegroupName: "),
    "no ARN": (without(describe_nodegroup(), "nodegroupArn"), "ng.json: nodegroup.nodegroupArn: "),
    "an ARN of another service": (
        describe_nodegroup(nodegroupArn="arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:x"),
        "ng.json: nodegroup.nodegroupArn: not an EKS node group ARN",
    ),
    "an effect EKS does not have": (
        describe_nodegroup(taints=[{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]),
        "ng.json: nodegroup.taints[0].effect: 'NoSchedule' is not one of NO_SCHEDULE",
    ),
    "no group of --asgs": (
        describe_nodegroup(name="other-ng"),
        "ng.json: nodegroup.nodegroupName: no group of --asgs in us-east-1 is tagged "
        "eks:cluster-name=ml and eks:nodegroup-name=other-ng",
    ),
    "a region without the group": (
        describe_nodegroup(region="eu-west-1"),
        "ng.json: nodegroup.nodegroupName: no group of --asgs in eu-west-1 is tagged",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_file_that_is_not_a_node_group_of_the_groups_exits_2_naming_file_and_field(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc, expected = BAD[case]
    args = base_args(tmp_path, [managed_asg("eks-batch-ng")], [selecting_pod()])

    code = main([*args, "--nodegroup", write(tmp_path, "ng.json", doc)])
    out, err = capsys.readouterr()

    assert (code, out) == (2, ""), err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("spillway plan: ") and expected in err, err


def test_one_node_group_given_twice_exits_2_naming_both_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = base_args(tmp_path, [managed_asg("eks-batch-ng")], [selecting_pod()])
    first = write(tmp_path, "a.json", describe_nodegroup())
    second = write(tmp_path, "b.json", describe_nodegroup(labels={"workload-class": "web"}))

    code = main([*args, "--nodegroup", first, "--nodegroup", second])
    _, err = capsys.readouterr()

    assert code == 2 and len(err.splitlines()) == 1
    assert f"{second}: nodegroup.nodegroupName: node group ml/batch-ng in us-east-1 is given twice" in err
    assert first in err
