"""A fleet gang's instances left outside every group, end to end: the real observe code reads them from
EC2 (moto), the real plan function lists them, the real scale-down state machine (moto runs the ASL)
gives the one to terminate to the real drain function's remove_gang_orphan step, which terminates it;
the one whose Node runs work stays running."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from conftest import CLUSTER, HOME, Cloud, running

from spillway import runtime
from spillway.act import planning
from spillway.act.gangsweep import SWEEP_PARTITION
from spillway.local import objects as o
from spillway.model.fleet import TAG_ATTEMPT, TAG_CLUSTER, TAG_GANG
from spillway.planner.types import GangOrphan

LIMIT_MINUTES = 0.02  # 1.2 s
ATTEMPT = "spillway-0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def cloud(monkeypatch: pytest.MonkeyPatch) -> Iterator[Cloud]:
    """Swept after 1.2 s: a gang deadline of 1 s, and no time for its steps' retries (the functions
    refuse a sweep time shorter than both, spillway.runtime.GANG_RETRY_MINUTES)."""
    monkeypatch.setattr(runtime, "GANG_RETRY_MINUTES", 0)
    config = json.dumps({"gang_orphan_minutes": LIMIT_MINUTES})
    with running(PLANNER_CONFIG=config, GANG_DEADLINE_SECONDS="1") as rig:
        yield rig


def left_behind(count: int) -> list[tuple[str, str]]:
    """``count`` instances as a stopped gang execution leaves them: launched with the attempt's tags, in
    no group. Their ids and private DNS names."""
    ec2 = boto3.client("ec2", region_name=HOME)
    image = ec2.describe_images()["Images"][0]["ImageId"]
    tags = {TAG_ATTEMPT: ATTEMPT, TAG_GANG: "ml/train", TAG_CLUSTER: CLUSTER}
    spec = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
    launched = ec2.run_instances(ImageId=image, MinCount=count, MaxCount=count, InstanceType="m5.large",
                                 TagSpecifications=spec)["Instances"]  # fmt: skip
    return [(str(i["InstanceId"]), str(i["PrivateDnsName"])) for i in launched]


def states(ids: list[str]) -> dict[str, str]:
    found = boto3.client("ec2", region_name=HOME).describe_instances(InstanceIds=ids)
    return {i["InstanceId"]: i["State"]["Name"] for r in found["Reservations"] for i in r["Instances"]}


def test_an_idle_orphan_is_terminated_and_one_running_work_is_left(cloud: Cloud) -> None:
    cloud.group("gpu", desired=1)
    cloud.wait_nodes(1)
    (idle, _), (busy, busy_node) = left_behind(2)
    cloud.kube.add(o.node(busy_node, instance=busy, zone=f"{HOME}a"))  # its kubelet joined
    cloud.kube.add(o.pod("worker-0", "ml", node_name=busy_node, phase="Running"))
    time.sleep(LIMIT_MINUTES * 60 + 0.5)

    [outcome] = cloud.plan(cloud.stream_event(cloud.snapshot()))["results"]

    assert outcome["status"] == "acted", outcome
    assert (outcome["summary"]["gang_orphans"], outcome["summary"]["gang_orphans_busy"]) == (1, 1), outcome
    plan: dict[str, Any] = json.loads(
        sorted(cloud.plans(), key=lambda p: p["snapshot_key"]["S"])[-1]["plan"]["S"]
    )
    assert {(e["instance_id"], e["code"]) for e in plan["gang_orphans"]} == {
        (idle, "gang-orphan"),
        (busy, "gang-orphan-busy"),
    }
    [down] = cloud.executions("ScaleDownStateMachine")
    execution = cloud.stack.wait(down["executionArn"], 60)
    assert execution["status"] == "SUCCEEDED", execution
    (line,) = execution["output"]["drains"]
    assert (line["instance_id"], line["outcome"]) == (idle, "gang-orphan-terminated"), line
    assert (
        cloud.state_item(f"gangsweep#{HOME}#{idle}", SWEEP_PARTITION) is None
    )  # its sweep's claim, released
    now = states([idle, busy])
    assert now[idle] in ("shutting-down", "terminated") and now[busy] == "running", now
    assert busy_node in {n["metadata"]["name"] for n in cloud.kube.list("Node")}


def test_an_orphan_item_from_an_older_plan_function_is_still_terminated(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While ``sam deploy`` runs, CloudFormation updates the state machine before the plan function (the
    template's dependencies), so the new scale-down gets items of the old plan function, without
    ``unready_minutes``. A path naming a missing key fails the state with States.Runtime, which no Catch
    takes on AWS (moto's does: the line says failed), failing the whole scale-down."""
    made = planning.sweep_item

    def older_sweep_item(entry: GangOrphan) -> dict[str, Any]:
        return {k: v for k, v in made(entry).items() if k != "unready_minutes"}

    monkeypatch.setattr(planning, "sweep_item", older_sweep_item)
    cloud.group("gpu", desired=1)
    cloud.wait_nodes(1)
    [(idle, _)] = left_behind(1)
    time.sleep(LIMIT_MINUTES * 60 + 0.5)

    cloud.plan(cloud.stream_event(cloud.snapshot()))

    [down] = cloud.executions("ScaleDownStateMachine")
    execution = cloud.stack.wait(down["executionArn"], 60)
    assert execution["status"] == "SUCCEEDED", execution
    (line,) = execution["output"]["drains"]
    assert (line["instance_id"], line["outcome"]) == (idle, "gang-orphan-terminated"), line
    assert states([idle])[idle] in ("shutting-down", "terminated")
