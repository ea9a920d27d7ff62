"""Terminate lifecycle hooks end to end on the local stack. moto keeps hooks but terminates at once and has
no CompleteLifecycleAction; CloudSim holds a hooked group's terminating instance in Terminating:Wait, puts
the ``EC2 Instance-terminate Lifecycle Action`` event on the default bus and terminates the instance once
every hook's action is completed, as AWS documents.

1. The group scales in (somebody else lowers its desired capacity) an instance that backs a Node with
   pods: the template's rule delivers the event to the interrupt queue, the interrupt function starts a
   lifecycle drain, moto runs the real ASL: the pods are evicted through a PDB, the drain completes the
   action with CONTINUE, and only then does the instance terminate.
2. Spillway's own drain (terminate with ShouldDecrementDesiredCapacity) on a hooked group completes its
   own instance's action, so the scale-down does not wait out the HeartbeatTimeout; the event that
   action sent starts no second drain.
3. The group scales in a node a rebalance recommendation's drain (no force) is still emptying: the
   lifecycle drain starts all the same, takes the node over and completes the action; the earlier
   drain ends superseded, undoing nothing.
4. A group with another team's terminate hook beside Spillway's (log shipping): Spillway's drain
   completes only its own; the instance waits for the other team's action, whose event the interrupt
   function leaves alone, and terminates once that team completes it.
5. The group scales in an instance with no Node: nothing to drain, the action is completed at once
   (once a snapshot taken after the notice shows no Node).
6. A drain by hand naming another team's hook is refused before it touches anything."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
from conftest import HOME, Cloud
from test_drain import ReplicaSetController
from test_drain_faults import CORDONED, marks, wait_for
from test_spot_interruption import receive, sqs_event

from spillway.local import objects

HOOK = "drain-before-terminate"


def hooked_group(cloud: Cloud, name: str) -> tuple[list[str], dict[str, str]]:
    cloud.group(name, instance_type="m5.large", desired=2, gpu=False)
    boto3.client("autoscaling", region_name=HOME).put_lifecycle_hook(
        LifecycleHookName=HOOK,
        AutoScalingGroupName=name,
        LifecycleTransition="autoscaling:EC2_INSTANCE_TERMINATING",
        HeartbeatTimeout=300,
        DefaultResult="ABANDON",
    )
    cloud.wait_nodes(2)
    ids = sorted(i["InstanceId"] for i in cloud.asg(name)["Instances"])
    return ids, dict(cloud.registrar.registered)


def another_teams_hook(cloud: Cloud, group: str) -> Any:
    """Puts a second terminate hook, ``ship-logs`` (another team's log shipper), on ``group``; returns
    the Auto Scaling client."""
    autoscaling = boto3.client("autoscaling", region_name=HOME)
    autoscaling.put_lifecycle_hook(
        LifecycleHookName="ship-logs",
        AutoScalingGroupName=group,
        LifecycleTransition="autoscaling:EC2_INSTANCE_TERMINATING",
        HeartbeatTimeout=900,
        DefaultResult="CONTINUE",
    )
    return autoscaling


def drains(cloud: Cloud) -> list[str]:
    listed = cloud.stack.client("stepfunctions").list_executions(
        stateMachineArn=cloud.stack.state_machines["DrainNodeStateMachine"]
    )["executions"]
    return sorted(e["name"] for e in listed)


def drain_by_hand(cloud: Cloud, group: str, node: str, instance: str) -> dict[str, Any]:
    """An operator's DrainNode execution of ``node`` (``instance`` of ``group``), run to its end."""
    return cloud.stack.run(
        "DrainNodeStateMachine",
        {"cluster": "ml", "node": node, "instance_id": instance, "group": group, "region": HOME,
         "poll_seconds": 1, "deadline_seconds": 10},
        timeout=60,
    )  # fmt: skip


def test_a_scale_in_by_the_group_waits_for_the_drain_which_completes_the_lifecycle_action(
    cloud: Cloud,
) -> None:
    (victim, spare_instance), by_instance = hooked_group(cloud, "hooked")
    autoscaling = boto3.client("autoscaling", region_name=HOME)
    autoscaling.set_instance_protection(  # so the scale-in picks the instance whose node runs the pods
        AutoScalingGroupName="hooked", InstanceIds=[spare_instance], ProtectedFromScaleIn=True
    )
    node, spare = by_instance[victim], by_instance[spare_instance]
    cloud.web_behind_budget(node)
    cloud.snapshot()

    autoscaling.set_desired_capacity(AutoScalingGroupName="hooked", DesiredCapacity=1)  # not Spillway
    states = {i["InstanceId"]: i["LifecycleState"] for i in cloud.asg("hooked")["Instances"]}
    assert states[victim] == "Terminating:Wait"  # the hook holds it: still there, pods still running
    assert cloud.kube.get("Node", node) is not None

    queue_arn, messages = receive(cloud)
    assert len(messages) == 1
    with ReplicaSetController(cloud.kube, "web", 3, spare) as controller:
        answer = cloud.stack.invoke("InterruptFunction", sqs_event(queue_arn, messages))
        assert answer == {"batchItemFailures": []}
        [name] = drains(cloud)
        assert name.startswith(f"lifecycle-{victim}-")
        arn = f"{cloud.stack.state_machines['DrainNodeStateMachine'].replace(':stateMachine:', ':execution:')}:{name}"
        result = cloud.stack.wait(arn, timeout=90)

    assert result["status"] == "SUCCEEDED", result
    out = result["output"]
    assert out["outcome"] == "terminated" and out["node"] == node and out["instance_id"] == victim
    assert sorted(out["evicted"]) == ["team-a/web-0", "team-a/web-1", "team-a/web-2"]
    assert controller.created >= 2  # the PDB let one pod go at a time
    assert out["lifecycle"] == {"hook": HOOK, "result": "CONTINUE"}
    assert cloud.sim.completed == [("hooked", HOOK, victim, "CONTINUE")]
    assert victim not in {i["InstanceId"] for i in cloud.asg("hooked")["Instances"]}  # terminated now
    ec2 = boto3.client("ec2", region_name=HOME)
    state = ec2.describe_instances(InstanceIds=[victim])["Reservations"][0]["Instances"][0]["State"]["Name"]
    assert state in ("shutting-down", "terminated")
    assert cloud.kube.get("Node", node) is None
    assert cloud.desired("hooked") == 1


def test_spillways_own_drain_on_a_hooked_group_completes_its_own_lifecycle_action(cloud: Cloud) -> None:
    (instance, _), by_instance = hooked_group(cloud, "hooked-down")
    node = by_instance[instance]
    started = time.monotonic()
    result = drain_by_hand(cloud, "hooked-down", node, instance)
    assert result["status"] == "SUCCEEDED", result
    assert result["output"]["outcome"] == "terminated"
    assert time.monotonic() - started < 60  # not the hook's 300 s HeartbeatTimeout
    assert cloud.sim.completed == [("hooked-down", HOOK, instance, "CONTINUE")]
    assert instance not in {i["InstanceId"] for i in cloud.asg("hooked-down")["Instances"]}
    assert cloud.desired("hooked-down") == 1

    # The action's event reached the queue too; it starts nothing (the node is gone, the action done).
    queue_arn, messages = receive(cloud)
    assert len(messages) == 1
    cloud.snapshot()
    assert cloud.stack.invoke("InterruptFunction", sqs_event(queue_arn, messages)) == {
        "batchItemFailures": []
    }
    assert len(drains(cloud)) == 1  # only the drain above


def test_a_scale_in_of_a_node_a_rebalance_drain_is_emptying_is_drained_by_the_lifecycle_drain(
    cloud: Cloud,
) -> None:
    (victim, spare_instance), by_instance = hooked_group(cloud, "hooked-rb")
    autoscaling = boto3.client("autoscaling", region_name=HOME)
    autoscaling.set_instance_protection(
        AutoScalingGroupName="hooked-rb", InstanceIds=[spare_instance], ProtectedFromScaleIn=True
    )
    node = by_instance[victim]
    cloud.kube.add(
        objects.pod("train-0", "team-a", node_name=node, labels={"app": "train"},
                    owner=("ReplicaSet", "train-5d9c"), cpu="100m", memory="128Mi",
                    annotations={"karpenter.sh/do-not-disrupt": "true"})
    )  # fmt: skip
    # train-0: only a forced drain evicts it, so the rebalance drain keeps polling;
    # its budget holds the lifecycle drain too, until the hand-over has been seen
    cloud.kube.add(objects.pdb("train", "team-a", {"app": "train"}, min_available=1))
    rebalance = cloud.stack.start(
        "DrainNodeStateMachine",
        {"cluster": "ml", "node": node, "instance_id": victim, "reason": "rebalance recommendation r-1",
         "leaving": True, "poll_seconds": 1, "deadline_seconds": 60},
        name=f"rebalance-{victim}",
    )  # fmt: skip
    wait_for(lambda: marks(cloud.kube.get("Node", node)) == (True, True, True), what="the rebalance cordon")
    cloud.snapshot()  # the node cordoned by Spillway, train-0 still on it

    autoscaling.set_desired_capacity(AutoScalingGroupName="hooked-rb", DesiredCapacity=1)  # not Spillway
    queue_arn, messages = receive(cloud)
    assert len(messages) == 1
    assert cloud.stack.invoke("InterruptFunction", sqs_event(queue_arn, messages)) == {
        "batchItemFailures": []
    }
    [name] = [n for n in drains(cloud) if n.startswith("lifecycle-")]
    arn = f"{cloud.stack.state_machines['DrainNodeStateMachine'].replace(':stateMachine:', ':execution:')}:{name}"
    wait_for(
        lambda: f"held drain {name}:" in (cloud.kube.get("Node", node) or {}).get("metadata", {})
        .get("annotations", {}).get(CORDONED, ""),
        what="the lifecycle drain's cordon",
    )  # fmt: skip
    handed_over = cloud.stack.wait(rebalance, timeout=30)
    cloud.kube.delete("PodDisruptionBudget", "train", "team-a")
    result = cloud.stack.wait(arn, timeout=90)

    assert handed_over["status"] == "SUCCEEDED", handed_over
    assert handed_over["output"]["outcome"] == "superseded" and name in handed_over["output"]["note"]
    undone = [c for c in cloud.stack.calls("DrainFunction") if c.event.get("action") == "uncordon"]
    assert undone == []  # no compensation: the node the group terminates is never uncordoned
    assert result["status"] == "SUCCEEDED", result
    out = result["output"]
    assert out["outcome"] == "terminated" and out["evicted"] == ["team-a/train-0"]
    assert out["lifecycle"] == {"hook": HOOK, "result": "CONTINUE"}
    assert cloud.sim.completed == [("hooked-rb", HOOK, victim, "CONTINUE")]
    assert victim not in {i["InstanceId"] for i in cloud.asg("hooked-rb")["Instances"]}
    assert cloud.kube.get("Node", node) is None


def test_another_teams_terminate_hook_is_left_to_its_owner_while_spillway_completes_its_own(
    cloud: Cloud,
) -> None:
    """Auto Scaling user guide, "Complete a lifecycle action"
    (https://docs.aws.amazon.com/autoscaling/ec2/userguide/completing-lifecycle-hooks.html): one event
    per hook, and the instance terminates once every hook's action is complete."""
    (instance, _), by_instance = hooked_group(cloud, "hooked-logs")
    autoscaling = another_teams_hook(cloud, "hooked-logs")
    node = by_instance[instance]
    result = drain_by_hand(cloud, "hooked-logs", node, instance)
    assert result["status"] == "SUCCEEDED", result
    assert cloud.sim.completed == [("hooked-logs", HOOK, instance, "CONTINUE")]  # not ship-logs
    states = {i["InstanceId"]: i["LifecycleState"] for i in cloud.asg("hooked-logs")["Instances"]}
    assert states[instance] == "Terminating:Wait"  # still held for the log shipper

    queue_arn, messages = receive(cloud)
    hooks = sorted(json.loads(m["Body"])["detail"]["LifecycleHookName"] for m in messages)
    assert hooks == ["drain-before-terminate", "ship-logs"]  # one event per hook
    cloud.snapshot()
    assert cloud.stack.invoke("InterruptFunction", sqs_event(queue_arn, messages)) == {
        "batchItemFailures": []
    }
    assert len(drains(cloud)) == 1  # only the drain above: none for ship-logs
    assert cloud.sim.completed == [("hooked-logs", HOOK, instance, "CONTINUE")]

    autoscaling.complete_lifecycle_action(  # the log shipper is done
        LifecycleHookName="ship-logs", AutoScalingGroupName="hooked-logs",
        LifecycleActionResult="CONTINUE", InstanceId=instance,
    )  # fmt: skip
    assert instance not in {i["InstanceId"] for i in cloud.asg("hooked-logs")["Instances"]}


def test_a_scale_in_of_an_instance_with_no_node_completes_the_action_once_a_later_snapshot_shows_none(
    cloud: Cloud,
) -> None:
    """An instance whose Node is gone (deleted; or a kubelet that never joined) has nothing to drain: its
    action waited out the hook's HeartbeatTimeout. It is now completed CONTINUE (outcome no_node), but
    only on a snapshot taken after the notice: the first delivery sees one taken before the group began
    terminating the instance, which could miss a Node that joined since, so it is reported failed and
    tried again (SQS), and the second delivery, after observe's next snapshot, completes it."""
    (victim, spare_instance), by_instance = hooked_group(cloud, "hooked-gone")
    autoscaling = boto3.client("autoscaling", region_name=HOME)
    autoscaling.set_instance_protection(
        AutoScalingGroupName="hooked-gone", InstanceIds=[spare_instance], ProtectedFromScaleIn=True
    )
    cloud.kube.delete("Node", by_instance[victim])  # its Node is gone; the kubelet stand-in never re-joins
    cloud.snapshot()
    time.sleep(1.1)  # the event's time is in whole seconds: it must come after that snapshot's
    autoscaling.set_desired_capacity(AutoScalingGroupName="hooked-gone", DesiredCapacity=1)  # not Spillway
    queue_arn, messages = receive(cloud)
    assert len(messages) == 1

    # the lone record fails (NodeNotObserved): reported failed, SQS returns it; a wait, no function error
    assert cloud.stack.invoke("InterruptFunction", sqs_event(queue_arn, messages)) == {
        "batchItemFailures": [{"itemIdentifier": messages[0]["MessageId"]}]
    }
    assert cloud.sim.completed == []
    states = {i["InstanceId"]: i["LifecycleState"] for i in cloud.asg("hooked-gone")["Instances"]}
    assert states[victim] == "Terminating:Wait"

    cloud.snapshot()  # observe's next one, after the notice: still no Node names the instance
    assert cloud.stack.invoke("InterruptFunction", sqs_event(queue_arn, messages)) == {
        "batchItemFailures": []
    }
    assert cloud.sim.completed == [("hooked-gone", HOOK, victim, "CONTINUE")]
    assert victim not in {i["InstanceId"] for i in cloud.asg("hooked-gone")["Instances"]}  # terminated now
    assert drains(cloud) == []
    assert cloud.kube.get("Node", by_instance[spare_instance]) is not None


def test_a_drain_by_hand_naming_another_teams_hook_fails_touching_nothing(cloud: Cloud) -> None:
    """A DrainNode started by hand whose ``lifecycle.hook`` is another team's hook would end by
    completing that hook's action with CONTINUE, ending its owner's wait early. Validation refuses it
    (InvalidDrainRequest, field lifecycle.hook) before the cordon; the group's hooks keep waiting."""
    (instance, spare), by_instance = hooked_group(cloud, "hooked-hand")
    autoscaling = another_teams_hook(cloud, "hooked-hand")
    autoscaling.set_instance_protection(
        AutoScalingGroupName="hooked-hand", InstanceIds=[spare], ProtectedFromScaleIn=True
    )
    autoscaling.set_desired_capacity(AutoScalingGroupName="hooked-hand", DesiredCapacity=1)  # not Spillway
    node = by_instance[instance]
    states = {i["InstanceId"]: i["LifecycleState"] for i in cloud.asg("hooked-hand")["Instances"]}
    assert states[instance] == "Terminating:Wait"  # both hooks hold it
    result = cloud.stack.run(
        "DrainNodeStateMachine",
        {"cluster": "ml", "node": node, "group": "hooked-hand", "force": True, "poll_seconds": 1,
         "deadline_seconds": 10,
         "lifecycle": {"hook": "ship-logs", "token": "11111111-2222-4333-8444-555555555555",
                       "heartbeat_seconds": 900}},
        timeout=60,
    )  # fmt: skip
    assert result["status"] == "FAILED", result
    assert result["error"] == "InvalidDrainRequest" and "ship-logs" in result["cause"], result
    assert HOOK in result["cause"]
    assert not (cloud.kube.get("Node", node) or {}).get("spec", {}).get("unschedulable")
    assert cloud.sim.completed == []  # neither hook's action: the log shipper's still waits for it
    states = {i["InstanceId"]: i["LifecycleState"] for i in cloud.asg("hooked-hand")["Instances"]}
    assert states[instance] == "Terminating:Wait"
