"""A Spot interruption end to end on the local stack: the warning is put on the default event bus, the
template's rule delivers it to the interrupt queue (moto), the interrupt function (in-process, with the SQS
message as Lambda hands it over) starts the DrainNode execution, and moto runs the real ASL: the node is
cordoned, its pods evicted through a PodDisruptionBudget and the instance terminated inside the warning's
deadline; the instance type is backed off in its zone."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
import pytest
from conftest import CLUSTER, HOME, Cloud
from test_drain import ReplicaSetController

from spillway.adapters.sfn import execution_arn

ACCOUNT = "123456789012"


def spot_warning(instance: str) -> dict[str, Any]:
    """The PutEvents entry of EC2's Spot interruption warning for ``instance`` (two minutes' notice)."""
    return {
        "Source": "aws.ec2",
        "DetailType": "EC2 Spot Instance Interruption Warning",
        "Detail": json.dumps({"instance-id": instance, "instance-action": "terminate"}),
        "Resources": [f"arn:aws:ec2:{HOME}:{ACCOUNT}:instance/{instance}"],
    }


def drained_through_queue(
    cloud: Cloud, event: dict[str, Any], instance: str, spare: str
) -> tuple[dict[str, Any], ReplicaSetController]:
    """The interrupt function given ``event`` (the queue's messages), then its DrainNode execution of
    ``instance`` waited for, while the web ReplicaSet recreates evicted pods on ``spare``."""
    with ReplicaSetController(cloud.kube, "web", 3, spare) as controller:
        answer = cloud.stack.invoke("InterruptFunction", event)
        assert answer == {"batchItemFailures": []}
        arn = execution_arn(cloud.stack.state_machines["DrainNodeStateMachine"], f"interrupt-{instance}")
        result = cloud.stack.wait(arn, timeout=90)
    return result, controller


def sqs_event(queue_arn: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Received SQS messages as the Lambda event source mapping delivers them."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": str(int(time.time() * 1000))},
                "messageAttributes": {},
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": HOME,
            }
            for m in messages
        ]
    }


def receive(cloud: Cloud) -> tuple[str, list[dict[str, Any]]]:
    sqs = boto3.client("sqs", region_name=HOME)
    url = cloud.stack.queues["InterruptQueue"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
    return arn, list(got.get("Messages") or [])


def test_a_spot_warning_drains_its_node_inside_the_deadline_and_backs_off_the_type_in_its_zone(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INTERRUPT_POLL_SECONDS", "1")
    cloud.group("spot", instance_type="m5.large", desired=2, gpu=False, spot=True)
    cloud.wait_nodes(2)
    by_instance = dict(cloud.registrar.registered)
    ids = sorted(i["InstanceId"] for i in cloud.asg("spot")["Instances"])
    instance, spare_instance = ids
    node, spare = by_instance[instance], by_instance[spare_instance]
    cloud.web_behind_budget(node)
    cloud.snapshot()  # what the observe function stores every minute: the interrupt function maps from it

    warned = time.monotonic()
    boto3.client("events", region_name=HOME).put_events(
        Entries=[
            spot_warning(instance),
            # Not ours: no Node is backed by it. Reaches the queue, starts nothing.
            {
                "Source": "aws.ec2",
                "DetailType": "EC2 Spot Instance Interruption Warning",
                "Detail": json.dumps({"instance-id": "i-0fffffffffffffff0", "instance-action": "terminate"}),
            },
            # Another source the rules do not take: never reaches the queue.
            {
                "Source": "aws.ec2",
                "DetailType": "EC2 Fleet Error",
                "Detail": json.dumps({"instance-id": instance}),
            },
            # An instance starting: a state the function does nothing with, filtered by the rule.
            {
                "Source": "aws.ec2",
                "DetailType": "EC2 Instance State-change Notification",
                "Detail": json.dumps({"instance-id": spare_instance, "state": "running"}),
            },
        ]
    )
    queue_arn, messages = receive(cloud)
    assert len(messages) == 2  # the rules took the two warnings and nothing else
    event = sqs_event(queue_arn, messages)

    result, controller = drained_through_queue(cloud, event, instance, spare)
    elapsed = time.monotonic() - warned

    assert result["status"] == "SUCCEEDED", result
    out = result["output"]
    assert out["outcome"] == "terminated" and out["node"] == node and out["instance_id"] == instance
    assert sorted(out["evicted"]) == ["team-a/web-0", "team-a/web-1", "team-a/web-2"]
    assert controller.created >= 2  # the PDB let one pod go at a time
    assert elapsed < 90  # inside the deadline the warning left
    assert instance not in {i["InstanceId"] for i in cloud.asg("spot")["Instances"]}
    assert cloud.kube.get("Node", node) is None
    backoff = cloud.backoff_item("backoff#us-east-1/spot")
    assert backoff is not None and "m5.large in us-east-1a" in backoff["reason"]["S"]
    pool = cloud.backoff_item("backoff#pool#spot/us-east-1a/m5.large")  # the Spot pool (State.pools)
    assert pool is not None and pool["backoff_until"] == backoff["backoff_until"]

    # The same message again (SQS delivers at least once): nothing new starts.
    again = cloud.stack.invoke("InterruptFunction", event)
    assert again == {"batchItemFailures": []}
    drains = cloud.stack.client("stepfunctions").list_executions(
        stateMachineArn=cloud.stack.state_machines["DrainNodeStateMachine"]
    )["executions"]
    assert [e["name"] for e in drains] == [f"interrupt-{instance}"]
    assert CLUSTER == "ml"


def test_a_spot_warning_drains_a_node_whose_instance_left_its_group_and_terminates_nothing(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The instance is detached from its group (DetachInstances, by a person or a tool) after the
    snapshot the interrupt function maps from: its Node is still there, and EC2 reclaims the instance two
    minutes after the warning whatever group it is in. The drain was cancelled ("nothing to drain") and
    its pods died without a graceful eviction. They are evicted through the Eviction API, under their
    budget, inside the deadline; the node stays cordoned; Spillway terminates nothing and changes nothing
    in Auto Scaling: it reads the group's scaling activities, where AWS recorded the detach (the rig
    records it as AWS does; moto records none)."""
    from moto.autoscaling.responses import AutoScalingResponse

    monkeypatch.setenv("INTERRUPT_POLL_SECONDS", "1")
    cloud.group("spot", instance_type="m5.large", desired=2, gpu=False, spot=True)
    cloud.wait_nodes(2)
    by_instance = dict(cloud.registrar.registered)
    instance, spare_instance = sorted(i["InstanceId"] for i in cloud.asg("spot")["Instances"])
    node, spare = by_instance[instance], by_instance[spare_instance]
    cloud.web_behind_budget(node)
    cloud.snapshot()  # the instance is in its group here
    autoscaling = boto3.client("autoscaling", region_name=HOME)
    autoscaling.detach_instances(
        InstanceIds=[instance], AutoScalingGroupName="spot", ShouldDecrementDesiredCapacity=True
    )
    assert [i["InstanceId"] for i in cloud.asg("spot")["Instances"]] == [spare_instance]
    history = autoscaling.describe_scaling_activities(AutoScalingGroupName="spot")["Activities"]
    assert history[0]["Description"] == f"Detaching EC2 instance: {instance}"

    actions: list[str] = []
    call_action = AutoScalingResponse.call_action

    def recorded(self: AutoScalingResponse) -> Any:
        actions.append(self._get_action())
        return call_action(self)

    monkeypatch.setattr(AutoScalingResponse, "call_action", recorded)
    warned = time.monotonic()
    boto3.client("events", region_name=HOME).put_events(Entries=[spot_warning(instance)])
    queue_arn, messages = receive(cloud)
    assert len(messages) == 1
    result, controller = drained_through_queue(cloud, sqs_event(queue_arn, messages), instance, spare)
    elapsed = time.monotonic() - warned

    assert result["status"] == "SUCCEEDED", result
    out = result["output"]
    assert out["outcome"] == "drained" and out["node"] == node and out["instance_id"] == instance
    assert out["outside_group"] is True and "in no Auto Scaling group" in out["note"], out
    assert sorted(out["evicted"]) == ["team-a/web-0", "team-a/web-1", "team-a/web-2"]
    assert controller.created >= 2  # the PDB let one pod go at a time
    evictions = [r.status for r in cloud.kube.requests if r.path.endswith("/eviction")]
    assert 201 in evictions and 429 in evictions  # through the Eviction API, the budget holding
    assert elapsed < 90  # inside the deadline the warning left
    kept = cloud.kube.get("Node", node)
    assert kept is not None and kept["spec"]["unschedulable"] is True  # cordoned until EC2 takes it
    steps = [c.event.get("action") for c in cloud.stack.calls("DrainFunction")]
    assert "terminate" not in steps and "complete_lifecycle" not in steps and "delete_node" not in steps
    ec2 = boto3.client("ec2", region_name=HOME).describe_instances(InstanceIds=[instance])
    assert ec2["Reservations"][0]["Instances"][0]["State"]["Name"] == "running"  # left to EC2
    # Auto Scaling only read, by anybody (the registrar's thread lists groups too, so which read is whose
    # is the unit test's to check): no write at all, and the drain read the group's activities
    assert [a for a in actions if not a.startswith("Describe")] == [], actions
    assert "DescribeScalingActivities" in actions
    assert cloud.asg("spot")["DesiredCapacity"] == 1 and cloud.sim.set_desired_calls == []
