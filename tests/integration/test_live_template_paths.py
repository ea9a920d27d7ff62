"""The observe Lambda (the AWS adapter on moto, the snapshot as the plan Lambda loads it) and the offline
``spillway plan`` (the files the AWS CLI and kubectl print) correct a group's template from the same
node, and so plan the same."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from fakes import FakeCluster

from spillway.adapters.aws import AwsAdapter, AwsClients, AwsSettings
from spillway.adapters.state_store import StateStore
from spillway.cli import main
from spillway.config import PlannerConfig
from spillway.local import objects as o
from spillway.local.cfn import create_tables
from spillway.model.snapshot import Snapshot
from spillway.model.state import State
from spillway.observe import ObserveConfig, observe_once
from spillway.planner import plan

GIB = 2**30 * 1000
TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # the make_asg fixture's clock (tests/conftest.py)
CONFIG = {"cluster": "prod", "regions": ["us-east-1"]}


def _iso(value: object) -> str:
    assert isinstance(value, datetime)
    return value.isoformat()


def one_node_group(make_asg: Any) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """Group ``big`` of one m5.2xlarge and its node, whose real 30Gi is more than the type's estimate
    (7.5 % VM overhead: 29317Mi): the Auto Scaling client, the group described, the node."""
    make_asg("us-east-1", "big", instance_type="m5.2xlarge", desired=1, max_size=5)
    autoscaling = boto3.client("autoscaling", region_name="us-east-1")
    described = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["big"])
    (instance,) = described["AutoScalingGroups"][0]["Instances"]
    node = o.node("ip-10-0-0-1.ec2.internal", instance=instance["InstanceId"], memory="30Gi", created=T0)
    return autoscaling, described, node


def test_both_paths_take_the_template_from_the_groups_node(
    make_asg: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, described, node = one_node_group(make_asg)
    busy = o.pod("busy", node_name=node["metadata"]["name"], phase="Running", cpu="7", created=T0)
    pending = o.pod("wide", memory="30000Mi", created=T0)  # fits the real node, not the estimate
    aws = AwsAdapter(AwsClients(("us-east-1",), boto3.Session(), AwsSettings(max_attempts=2)), "prod")

    observed = observe_once(
        FakeCluster([node], [busy, pending]), aws, ObserveConfig(cluster="prod"), lambda: T0
    )
    stored = Snapshot.from_dict(json.loads(json.dumps(observed.to_dict())))  # what the plan Lambda loads
    online = plan(stored.cluster, list(stored.groups), PlannerConfig(**CONFIG), State(), T0).to_dict()

    files = {
        "cluster.json": o.kube_list([node, busy, pending]),
        "asgs.json": described,
        "config.json": CONFIG,
    }
    for name, doc in files.items():
        (tmp_path / name).write_text(json.dumps(doc, default=_iso))
    code = main(
        ["plan", "--cluster", str(tmp_path / "cluster.json"), "--asgs", str(tmp_path / "asgs.json"),
         "--config", str(tmp_path / "config.json"), "--now", T0.isoformat()]
    )  # fmt: skip
    offline = json.loads(capsys.readouterr().out)

    assert code == 0
    assert [(s["group"], s["from"], s["to"], s["pods"]) for s in offline["scale_up"]] == [
        ("big", 1, 2, ["default/wide"])
    ]
    assert offline == online
    (group,) = stored.groups
    assert group.template is not None and group.template.node == node["metadata"]["name"]
    assert group.template.allocatable["memory"] == 30 * GIB


def test_the_lambda_path_remembers_the_template_through_the_state_table_after_the_group_scales_to_zero(
    make_asg: Any,
) -> None:
    autoscaling, _, node = one_node_group(make_asg)
    aws = AwsAdapter(AwsClients(("us-east-1",), boto3.Session(), AwsSettings(max_attempts=2)), "prod")
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    create_tables(TEMPLATE, ddb, {"StateTable": "state", "PlansTable": "plans"})
    store = StateStore(ddb, "state")
    config = PlannerConfig(**CONFIG)

    def planned(cluster: FakeCluster, state: State, now: datetime) -> Any:
        observed = observe_once(cluster, aws, ObserveConfig(cluster="prod"), lambda: now)
        stored = Snapshot.from_dict(json.loads(json.dumps(observed.to_dict())))  # as the plan Lambda loads it
        return plan(stored.cluster, list(stored.groups), config, state, now)

    first = planned(FakeCluster([node], []), State(), T0)
    store.commit("prod", first.state, expected_version=0, snapshot_key="k1", plan_id="p1", now=T0)
    # the idle node was drained and its instance terminated: the group is at zero
    autoscaling.set_desired_capacity(AutoScalingGroupName="big", DesiredCapacity=0)
    wide = o.pod("wide", memory="30000Mi", created=T0)  # fits the real node, not the 29317Mi estimate
    later = T0 + timedelta(minutes=30)
    remembered = planned(FakeCluster([], [wide]), store.load("prod").state, later)
    forgotten = planned(FakeCluster([], [wide]), State(), later)

    assert [(s.group, s.from_size, s.to_size) for s in remembered.scale_up] == [("big", 0, 1)]
    assert "ip-10-0-0-1.ec2.internal showed at" in remembered.scale_up[0].reason
    assert forgotten.scale_up == ()


def test_a_new_default_launch_template_version_at_zero_forgets_the_shape_of_the_old_nodes(
    make_asg: Any,
) -> None:
    """The group launches ``$Default``; its node, launched from version 1, showed 30Gi. At zero the
    default becomes version 2 (another AMI, a bigger root volume: another shape): the adapter resolves
    ``$Default`` to 2 with DescribeLaunchTemplates, and the remembered 30Gi is no longer planned on."""
    autoscaling, _, node = one_node_group(make_asg)
    autoscaling.update_auto_scaling_group(
        AutoScalingGroupName="big", LaunchTemplate={"LaunchTemplateName": "lt-big", "Version": "$Default"}
    )
    ec2 = boto3.client("ec2", region_name="us-east-1")
    template_id = ec2.describe_launch_templates(LaunchTemplateNames=["lt-big"])["LaunchTemplates"][0][
        "LaunchTemplateId"
    ]
    aws = AwsAdapter(AwsClients(("us-east-1",), boto3.Session(), AwsSettings(max_attempts=2)), "prod")
    config = PlannerConfig(**CONFIG)

    def planned(cluster: FakeCluster, state: State, now: datetime) -> Any:
        observed = observe_once(cluster, aws, ObserveConfig(cluster="prod"), lambda: now)
        stored = Snapshot.from_dict(json.loads(json.dumps(observed.to_dict())))  # as the plan Lambda loads it
        return stored, plan(stored.cluster, list(stored.groups), config, state, now)

    _, first = planned(FakeCluster([node], []), State(), T0)
    autoscaling.set_desired_capacity(AutoScalingGroupName="big", DesiredCapacity=0)
    wide = o.pod("wide", memory="30000Mi", created=T0)  # fits the node's 30Gi, not the 29317Mi estimate
    kept_state = State.model_validate(json.loads(json.dumps(first.state.to_wire())))
    later = T0 + timedelta(minutes=30)
    _, same = planned(FakeCluster([], [wide]), kept_state, later)
    ec2.create_launch_template_version(
        LaunchTemplateId=template_id,
        LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "m5.2xlarge"},
    )
    ec2.modify_launch_template(LaunchTemplateId=template_id, DefaultVersion="2")
    stored, changed = planned(FakeCluster([], [wide]), kept_state, later + timedelta(minutes=1))

    assert first.state.templates["us-east-1/big"].launched_from == f"{template_id}@1"
    assert [(s.group, s.to_size) for s in same.scale_up] == [("big", 1)]  # version 1 still: remembered
    assert stored.groups[0].launch_source == f"{template_id}@2"
    assert changed.scale_up == ()
    (pending,) = changed.pending
    assert f"launch template {template_id} is now version 2" in pending.reason
    assert "ip-10-0-0-1.ec2.internal was launched from version 1" in pending.reason
    assert "us-east-1/big" not in changed.state.templates
