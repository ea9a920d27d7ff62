"""An instance that never becomes a Node, end to end: the real plan function (on snapshots the real observe
code takes) stops counting it as capacity coming once max_node_provision_minutes pass, backs its group
off and removes it through the real scale-down state machine (moto runs the ASL), whose step, on the real
drain function, checks again that no Node joined before it terminates the instance."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from conftest import ENVIRONMENT, HOME, Cloud

LIMIT_MINUTES = 0.02  # 1.2 s


@pytest.fixture
def cloud() -> Iterator[Cloud]:
    environment = {**ENVIRONMENT, "MAX_NODE_PROVISION_MINUTES": str(LIMIT_MINUTES)}
    with Cloud(environment, boot_seconds=0.3, tick=0.1) as rig:
        yield rig
        assert not rig.registrar.errors, rig.registrar.errors


def plan_once(cloud: Cloud) -> dict[str, Any]:
    [outcome] = cloud.plan(cloud.stream_event(cloud.snapshot()))["results"]
    return dict(outcome)


def records(cloud: Cloud) -> list[dict[str, Any]]:
    items = sorted(cloud.plans(), key=lambda p: p["snapshot_key"]["S"])
    return [json.loads(p["plan"]["S"]) for p in items]


def test_an_instance_that_never_joins_is_removed_and_its_group_backs_off(cloud: Cloud) -> None:
    cloud.group("gpu", desired=1)
    (joined,) = cloud.wait_nodes(1)
    before = set(cloud.instances())
    cloud.registrar.stop()  # the next instance's kubelet never comes up
    boto3.client("autoscaling", region_name=HOME).set_desired_capacity(
        AutoScalingGroupName="gpu", DesiredCapacity=2
    )
    (lost,) = set(cloud.instances()) - before

    first = plan_once(cloud)
    assert first["summary"]["unregistered"] == 0 and first["status"] == "idle", first

    time.sleep(LIMIT_MINUTES * 60 + 0.5)
    second = plan_once(cloud)

    assert second["summary"]["unregistered"] == 1 and second["status"] == "acted", second
    (entry,) = records(cloud)[-1]["unregistered"]
    assert entry["instance_id"] == lost and entry["remove"] is True
    [execution] = [e for e in cloud.wait_all() if "ScaleDownStateMachine" in e["stateMachineArn"]]
    assert execution["status"] == "SUCCEEDED", execution
    (line,) = execution["output"]["drains"]
    assert (line["instance_id"], line["outcome"]) == (lost, "removed"), line
    assert cloud.desired("gpu") == 1
    states = cloud.instances()
    assert states.get(lost, "gone").startswith(("Terminat", "gone")) and states[before.pop()] == "InService"
    assert [n["metadata"]["name"] for n in cloud.kube.list("Node")] == [joined]
    item = cloud.state_item("state")
    assert item is not None and "state" in item  # small enough to be stored plain
    state = json.loads(item["state"]["S"])
    assert lost in state["groups"]["gpu"]["reason"], state["groups"]  # the next plans launch elsewhere
