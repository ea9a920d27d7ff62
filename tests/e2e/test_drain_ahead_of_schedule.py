"""A scheduled action that lowers a group's DesiredCapacity, end to end: the real observe reads it from
the group (DescribeScheduledActions on moto), the real plan function drains the group down to it ahead
of its run through the real scale-down and DrainNode state machines, so that Auto Scaling has nothing
left to terminate undrained when it runs. An idle node goes first, then a node whose pod may move; the
node whose pod may not be disturbed is left, and nothing of it is touched."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from conftest import HOME, Cloud, running
from test_drain import ReplicaSetController

from spillway.local import objects as o

MOVABLE = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
PINNED = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}


@pytest.fixture
def cloud() -> Iterator[Cloud]:
    with running(DRAIN_POLL_SECONDS="1", DRAIN_DEADLINE_SECONDS="40") as rig:
        yield rig


def test_a_plan_drains_a_group_down_to_the_desired_capacity_an_action_sets_in_five_minutes(
    cloud: Cloud,
) -> None:
    cloud.group("general", instance_type="m5.xlarge", desired=3, gpu=False)
    nodes = sorted(cloud.wait_nodes(3))
    instance = {name: iid for iid, name in dict(cloud.registrar.registered).items()}
    idle, movable, pinned = nodes
    cloud.kube.add(o.pod("web-0", "team-a", cpu="500m", memory="512Mi", node_name=movable,
                         labels={"app": "web"}, owner=("ReplicaSet", "web-5d9c"), annotations=MOVABLE))  # fmt: skip
    cloud.kube.add(o.pod("db-0", "team-a", cpu="500m", memory="512Mi", node_name=pinned,
                         labels={"app": "db"}, owner=("ReplicaSet", "db-7f8e"), annotations=PINNED))  # fmt: skip
    boto3.client("autoscaling", region_name=HOME).put_scheduled_update_group_action(
        AutoScalingGroupName="general", ScheduledActionName="evening",
        StartTime=datetime.now(UTC) + timedelta(minutes=5), DesiredCapacity=1,
    )  # fmt: skip

    with ReplicaSetController(cloud.kube, "web", 1, pinned):
        [outcome] = cloud.plan(cloud.stream_event(cloud.snapshot()))["results"]
        assert outcome["status"] == "acted", [json.loads(p["plan"]["S"])["kept"] for p in cloud.plans()]
        [down] = cloud.executions("ScaleDownStateMachine")
        result = cloud.stack.wait(down["executionArn"], 90)
    assert result["status"] == "SUCCEEDED", result

    [record] = [json.loads(p["plan"]["S"]) for p in cloud.plans()]
    drains = {d["node"]: d for d in record["drain"]}
    assert set(drains) == {idle, movable}
    assert {d["code"] for d in drains.values()} == {"scheduled-shrink"}
    assert drains[movable]["pods"] == ["team-a/web-0"] and drains[idle]["pods"] == []
    assert "scheduled action evening (once) runs at" in drains[idle]["reason"]
    [shrink] = record["shrinks"]
    assert (shrink["group"], shrink["size"], sorted(shrink["drains"]), shrink["at_risk"]) == (
        "general",
        1,
        sorted([idle, movable]),
        [],
    )
    lines = {line["node"]: line["outcome"] for line in result["output"]["drains"]}
    assert lines == {idle: "terminated", movable: "terminated"}
    asg = cloud.asg("general", HOME)
    assert asg["DesiredCapacity"] == 1
    assert {i["InstanceId"] for i in asg["Instances"]} == {instance[pinned]}
    # the pod that may not be disturbed was never evicted, its node never cordoned
    assert cloud.kube.get("Pod", "db-0", "team-a") is not None
    node = cloud.kube.get("Node", pinned)
    assert node is not None and not node["spec"].get("unschedulable")
