"""A gang from a plan end to end: the plan function on a snapshot with a pending gang (Kueue's pod group)
and a group tagged ``spillway.io/atomic-launch: fleet`` starts the real gang_launch.asl.json on moto; the
fleet is launched and attached whole; a second plan during the launch does not launch the gang again."""

from __future__ import annotations

import json
from collections.abc import Iterator

import boto3
import pytest
from conftest import HOME, Cloud, running

from spillway.local import objects as o
from spillway.local.rig import GPU_TOLERATION, create_group


@pytest.fixture
def cloud() -> Iterator[Cloud]:
    """The rig, its gang launches checking every 2 s: the default (GANG_POLL_SECONDS, 15 s) made the
    launch's two waits (running, then Ready) take 30 s; 2 s still keeps the launch in flight well past
    the second plan, which follows the first at once."""
    with running(GANG_POLL_SECONDS="2") as rig:
        yield rig


def running_instances() -> set[str]:
    ec2 = boto3.client("ec2", region_name=HOME)
    pages = ec2.describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    )
    return {i["InstanceId"] for r in pages["Reservations"] for i in r["Instances"]}


def gang_pods(cloud: Cloud, name: str, count: int) -> list[str]:
    labels = {"kueue.x-k8s.io/pod-group-name": name}
    annotations = {"kueue.x-k8s.io/pod-group-total-count": str(count)}
    for i in range(count):
        cloud.kube.add(o.pod(f"{name}-{i}", "ml", cpu="3", memory="12Gi", gpus=1, labels=labels,
                             annotations=annotations, tolerations=[GPU_TOLERATION]))  # fmt: skip
    return [f"ml/{name}-{i}" for i in range(count)]


def plan_record(cloud: Cloud, key: str) -> dict[str, object]:
    [item] = [i for i in cloud.plans() if i.get("snapshot_key", {}).get("S") == key]
    found: dict[str, object] = json.loads(item["plan"]["S"]) if "plan" in item else {}
    return found


def test_a_planned_gang_is_launched_atomically_once_and_attached_whole(cloud: Cloud) -> None:
    cloud.group("general", instance_type="m5.xlarge", desired=1, gpu=False)
    create_group("gang-east", region=HOME, instance_type="g5.xlarge", max_size=8, cluster=cloud.cluster,
                 gpu=True, tags={"spillway.io/atomic-launch": "fleet"})  # fmt: skip
    cloud.wait_nodes(1)
    before = running_instances()
    pods = gang_pods(cloud, "train", 3)

    first = cloud.snapshot()
    [outcome] = cloud.plan(cloud.stream_event(first))["results"]
    assert outcome["status"] == "acted", outcome
    [gang] = cloud.executions("GangLaunchStateMachine")
    assert gang["name"].startswith(f"gang-{outcome['plan_id']}-")
    assert cloud.executions("ScaleUpStateMachine") == []  # the gang's nodes are the gang launch's alone

    # A second plan while the gang launches: the snapshot shows no launching capacity in the group
    # (fleet instances join only once all run), and the gang is not launched again.
    second = cloud.snapshot()
    [again] = cloud.plan(cloud.stream_event(second))["results"]
    assert again["status"] in ("idle", "acted"), again
    assert [e["status"] for e in cloud.executions("GangLaunchStateMachine")] == ["RUNNING"]  # still launching

    finished = cloud.wait_all(timeout=90)
    gangs = [e for e in finished if e["name"].startswith("gang-")]
    assert [e["status"] for e in gangs] == ["SUCCEEDED"], gangs
    whole = set(gangs[0]["output"]["instances"])
    assert len(whole) == 3
    asg = cloud.asg("gang-east")
    assert {i["InstanceId"] for i in asg["Instances"]} == whole and asg["DesiredCapacity"] == 3
    assert running_instances() == before | whole  # nothing else left running
    assert len(cloud.executions("GangLaunchStateMachine")) == 1
    assert cloud.executions("ScaleUpStateMachine") == []
    pending = {p["pod"]: p["code"] for p in plan_record(cloud, second)["pending"]}  # type: ignore[index]
    assert {pending[p] for p in pods} == {"gang-launching"}
