"""Capacity Rebalancing end to end on the local stack: a Spot group with ``CapacityRebalance`` on, its
at-risk node running pods, and the two notices EC2 sends for such an instance (EC2 User Guide, "EC2
instance rebalance recommendations" and "Spot Instance interruption notices") put on the default event
bus, delivered by the template's rules to the interrupt queue, handled by the interrupt function
in-process, drained by the real DrainNode ASL.

What EC2 Auto Scaling does with such a group (Auto Scaling User Guide, "Use Capacity Rebalancing to
handle Amazon EC2 Spot Interruptions"): on a rebalance recommendation it launches a replacement, lets it
pass its health check, then terminates the at-risk instance through the group's terminate lifecycle
hooks, the desired capacity unchanged; on the two-minute warning it launches a replacement at once.
Without Capacity Rebalancing it replaces a Spot instance only once EC2 has interrupted it. moto stores
``CapacityRebalance`` and does none of this: where a test needs the group's replacement, the test plays
Auto Scaling's part itself (:func:`aws_launches_replacement`) and says so."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import boto3
import pytest
from conftest import HOME, Cloud
from moto.autoscaling.models import AutoScalingBackend
from test_drain import ReplicaSetController
from test_spot_interruption import ACCOUNT, receive, sqs_event

from spillway.adapters.sfn import execution_arn
from spillway.local import objects
from spillway.model.k8s import (
    CORDONED_BY_SPILLWAY,
    DO_NOT_DISRUPT,
    DRAINING_TAINT,
    REPLACEMENT_WAIT_MINUTES,
    SAFE_TO_EVICT,
    SCALE_DOWN_DISABLED,
)
from spillway.planner import codes

REBALANCE = "EC2 Instance Rebalance Recommendation"
WARNING = "EC2 Spot Instance Interruption Warning"
PREFIX = {REBALANCE: "rebalance", WARNING: "interrupt"}
POOL = "backoff#pool#spot/us-east-1a/m5.large"


def spot_group(cloud: Cloud, name: str, *, capacity_rebalance: bool) -> tuple[str, str, str]:
    """A Spot group of two m5.large nodes in us-east-1a (MaxSize 4: room for a launch of Spillway's
    too); returns (at-risk node, its instance, the other node)."""
    cloud.group(name, instance_type="m5.large", desired=2, max_size=4, gpu=False, spot=True,
                capacity_rebalance=capacity_rebalance)  # fmt: skip
    ids = sorted(i["InstanceId"] for i in cloud.asg(name)["Instances"])
    deadline = time.monotonic() + 10
    while not set(ids) <= set(cloud.registrar.registered) and time.monotonic() < deadline:
        time.sleep(0.05)
    by_instance = dict(cloud.registrar.registered)
    return by_instance[ids[0]], ids[0], by_instance[ids[1]]


def web(cloud: Cloud, node: str, app: str = "web") -> None:
    """Three ReplicaSet pods of ``app`` on ``node`` under a PodDisruptionBudget that lets one go at a
    time (minAvailable 2)."""
    for i in range(3):
        cloud.kube.add(
            objects.pod(f"{app}-{i}", "team-a", node_name=node, labels={"app": app},
                        owner=("ReplicaSet", f"{app}-5d9c"), cpu="100m", memory="128Mi")
        )  # fmt: skip
    cloud.kube.add(objects.pdb(app, "team-a", {"app": app}, min_available=2))


def crawler(name: str, node: str | None = None) -> dict[str, Any]:
    """A crawler ReplicaSet's pod that takes most of an m5.large, marked safe to evict (what lets a pod
    go to a Spot group: README, *Spot groups*)."""
    return objects.pod(name, "team-a", node_name=node, labels={"app": "crawl"}, owner=("ReplicaSet", "crawl-7f4b"),
                       cpu="1200m", memory="1Gi", annotations={SAFE_TO_EVICT: "true"})  # fmt: skip


def notify(cloud: Cloud, detail_type: str, *instances: str) -> None:
    """EC2 puts one ``detail_type`` event per instance on the default bus, with the detail EC2 sends
    (``instance-id``; a warning's ``instance-action`` too); the rules deliver them to the interrupt queue
    and the interrupt function handles the batch as Lambda hands it over."""
    entries = [
        {
            "Source": "aws.ec2",
            "DetailType": detail_type,
            "Detail": json.dumps(
                {"instance-id": i, **({"instance-action": "terminate"} if detail_type == WARNING else {})}
            ),
            "Resources": [f"arn:aws:ec2:{HOME}:{ACCOUNT}:instance/{i}"],
        }
        for i in instances
    ]
    boto3.client("events", region_name=HOME).put_events(Entries=entries)
    queue_arn, messages = receive(cloud)
    assert len(messages) == len(instances)
    assert cloud.stack.invoke("InterruptFunction", sqs_event(queue_arn, messages)) == {
        "batchItemFailures": []
    }


def drain_of(cloud: Cloud, detail_type: str, instance: str, timeout: float = 60) -> dict[str, Any]:
    arn = execution_arn(
        cloud.stack.state_machines["DrainNodeStateMachine"], f"{PREFIX[detail_type]}-{instance}"
    )
    result = cloud.stack.wait(arn, timeout=timeout)
    result["input"] = json.loads(result["input"])
    return result


def terminate_calls(cloud: Cloud) -> list[str]:
    """The instances Spillway's drain function asked Auto Scaling to terminate."""
    return [str(c.event.get("drain", {}).get("instance_id")) for c in cloud.stack.calls("DrainFunction")
            if c.event.get("action") == "terminate"]  # fmt: skip


def evictions(cloud: Cloud) -> list[int]:
    return [r.status for r in cloud.kube.requests if r.path.endswith("/eviction")]


def aws_launches_replacement(cloud: Cloud, group: str, region: str = HOME) -> str:
    """Play EC2 Auto Scaling's part, which moto does not: Capacity Rebalancing launches a replacement
    for the at-risk instance into ``group``, above its desired capacity, which it leaves as it is, and
    records the launch as a scaling activity (DescribeScalingActivities: "Launching a new EC2 instance:
    <id>", its Cause saying why). The published docs quote no Cause for this launch; the one here names
    the recommendation it answers, as the Causes of the group's other replacements name theirs. The
    instance is ``Pending`` (booting, not yet a Node) until :func:`aws_replacement_in_service`."""
    from moto.autoscaling.models import autoscaling_backends

    asg = autoscaling_backends[ACCOUNT][region].autoscaling_groups[group]
    before = {s.instance.id for s in asg.instance_states}
    desired = asg.desired_capacity
    asg.replace_autoscaling_group_instances(1, {})
    [state] = [s for s in asg.instance_states if s.instance.id not in before]
    state.lifecycle_state = "Pending"
    assert asg.desired_capacity == desired
    iid, now = str(state.instance.id), datetime.now(UTC)
    cloud.sim.record(region, group, {
        "ActivityId": str(uuid.uuid4()), "AutoScalingGroupName": group, "AutoScalingGroupARN": asg.arn,
        "Description": f"Launching a new EC2 instance: {iid}",
        "Cause": f"At {now:%Y-%m-%dT%H:%M:%SZ} an instance was launched in response to an EC2 instance "
                 "rebalance recommendation (Capacity Rebalancing).",
        "StartTime": now, "EndTime": now, "StatusCode": "Successful", "Progress": 100, "Details": "{}",
    })  # fmt: skip
    return iid


def aws_replacement_in_service(group: str, instance: str, region: str = HOME) -> None:
    """The replacement passed its health check: InService (the rig's kubelet registers its Node)."""
    from moto.autoscaling.models import autoscaling_backends

    asg = autoscaling_backends[ACCOUNT][region].autoscaling_groups[group]
    [state] = [s for s in asg.instance_states if s.instance.id == instance]
    state.lifecycle_state = "InService"


def plan_now(cloud: Cloud) -> dict[str, Any]:
    """Observe and plan once (the real observe code, the PlanFunction on the stream's record); the plan
    record as the plans table keeps it."""
    key = cloud.snapshot()
    cloud.plan(cloud.stream_event(key))
    [item] = [i for i in cloud.plans() if i.get("snapshot_key", {}).get("S") == key]
    found: dict[str, Any] = json.loads(item["plan"]["S"]) if "plan" in item else {}
    return found


def wait_for_node(cloud: Cloud, instance: str, timeout: float = 10) -> str:
    deadline = time.monotonic() + timeout
    while instance not in cloud.registrar.registered:
        assert time.monotonic() < deadline, f"{instance} never became a Node"
        time.sleep(0.05)
    return cloud.registrar.registered[instance]


def test_a_rebalance_recommendation_drains_the_node_and_leaves_the_replacement_and_the_terminate_to_the_group(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Drained (cordon, evictions through the Eviction API under a PodDisruptionBudget) with ``terminate:
    false``: the group launches the replacement and terminates the instance itself. Nothing is backed
    off. The replacement (launched by the test for Auto Scaling) is the evicted pods' room: no second
    launch beside it while it boots, and free room for them once its Node is Ready."""
    monkeypatch.setenv("INTERRUPT_POLL_SECONDS", "1")
    at_risk, instance, spare = spot_group(cloud, "spot", capacity_rebalance=True)
    web(cloud, at_risk)
    # a crawler that takes most of a node: evicted, its ReplicaSet's new pod fits nowhere but a new node
    cloud.kube.add(crawler("crawl-0", at_risk))
    cloud.kube.add(objects.pod("busy-0", "team-a", node_name=spare, labels={"app": "busy"},
                               owner=("ReplicaSet", "busy-1a2b"), cpu="1", memory="1Gi"))  # fmt: skip
    cloud.snapshot()  # what observe stores every 20 s: the interrupt function maps the instance from it
    cloud.kube.clear_requests()

    with ReplicaSetController(cloud.kube, "web", 3, spare) as controller:
        notify(cloud, REBALANCE, instance)
        result = drain_of(cloud, REBALANCE, instance)

    assert result["status"] == "SUCCEEDED", result
    request, out = result["input"], result["output"]
    assert (
        request["terminate"] is False
        and request["force"] is False
        and "Capacity Rebalancing" in request["reason"]
    )
    assert out["outcome"] == "drained" and out["node"] == at_risk and out["instance_id"] == instance
    assert sorted(out["evicted"]) == ["team-a/crawl-0", "team-a/web-0", "team-a/web-1", "team-a/web-2"]
    # through the Eviction API, the budget honoured: refused while a replacement was not Ready yet
    assert evictions(cloud).count(201) == 4 and 429 in evictions(cloud)
    assert controller.created >= 2
    assert not [p for p in cloud.kube.list("Pod", "team-a") if p["spec"].get("nodeName") == at_risk]
    # the node stays, cordoned and tainted, held by the recommendation's drain
    node = cloud.kube.get("Node", at_risk)
    assert node is not None and node["spec"]["unschedulable"] is True
    assert DRAINING_TAINT in {t["key"] for t in node["spec"].get("taints") or []}
    assert f"held drain rebalance-{instance}" in node["metadata"]["annotations"][CORDONED_BY_SPILLWAY]
    # Spillway neither terminated nor detached the instance, nor touched the desired capacity
    assert terminate_calls(cloud) == []
    states = {i["InstanceId"]: i["LifecycleState"] for i in cloud.asg("spot")["Instances"]}
    assert states[instance] == "InService" and cloud.desired("spot") == 2
    assert cloud.sim.set_desired_calls == []
    # a recommendation is no interruption: nothing backed off (README, Spot and scheduled interruptions)
    assert cloud.backoff_item(POOL) is None and cloud.backoff_item("backoff#us-east-1/spot") is None

    # The crawler's ReplicaSet makes a new pod; the scheduler finds no room for it (the at-risk node is
    # cordoned, the other has 0.9 CPU left).
    cloud.kube.add(crawler("crawl-new-1"))
    # AWS's part (moto launches nothing on a rebalance recommendation): the group launches the
    # replacement, above its desired capacity.
    replacement = aws_launches_replacement(cloud, "spot")
    plan = plan_now(cloud)
    # The replacement is the pod's room: counted as launching for the node that gave its room up, not
    # launched a second time beside it.
    assert plan["scale_up"] == [], plan["scale_up"]
    [pending] = plan["pending"]
    assert pending["pod"] == "team-a/crawl-new-1" and pending["code"] == codes.FITS_LAUNCHING, pending
    assert plan["uncordon"] == []  # the held node is not given back to the scheduler
    assert at_risk not in {d["node"] for d in plan["drain"]}

    aws_replacement_in_service("spot", replacement)
    new_node = wait_for_node(cloud, replacement)
    plan = plan_now(cloud)
    assert plan["scale_up"] == [] and plan["uncordon"] == []
    # the scheduler may put the pod on the replacement now: free room of that Ready node
    [pending] = plan["pending"]
    assert pending["pod"] == "team-a/crawl-new-1" and pending["code"] == codes.FITS_FREE_ROOM
    assert f"Ready node {new_node}" in pending["reason"], pending
    ready = cloud.kube.get("Node", new_node)
    assert ready is not None and not ready["spec"].get("unschedulable") and not ready["spec"].get("taints")
    assert cloud.desired("spot") == 2 and cloud.sim.set_desired_calls == []
    assert not [e for _, e in cloud.all_executions() if e["name"].startswith(("up-", "gang-"))]
    assert terminate_calls(cloud) == []


def test_a_spot_warning_drains_inside_the_deadline_without_terminating_and_backs_off_the_pool(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The forced drain (``terminate: false`` in such a group too) ends inside the deadline the warning's
    time leaves, every pod that can move evicted through the Eviction API before EC2 reclaims the
    instance; Spillway terminates nothing; the Spot pool is backed off."""
    monkeypatch.setenv("INTERRUPT_POLL_SECONDS", "1")
    at_risk, instance, spare = spot_group(cloud, "spot", capacity_rebalance=True)
    web(cloud, at_risk)
    cloud.kube.add(crawler("crawl-0", at_risk))
    cloud.kube.add(objects.daemonset_pod("aws-node-x1", at_risk))  # goes with its node, never evicted
    cloud.snapshot()
    cloud.kube.clear_requests()

    warned = time.monotonic()
    with ReplicaSetController(cloud.kube, "web", 3, spare) as controller:
        notify(cloud, WARNING, instance)
        result = drain_of(cloud, WARNING, instance, timeout=90)
    elapsed = time.monotonic() - warned

    assert result["status"] == "SUCCEEDED", result
    request, out = result["input"], result["output"]
    assert request["terminate"] is False and request["force"] is True
    assert 0 < request["deadline_seconds"] <= 90  # counted from the warning's time: EC2 reclaims at 120 s
    assert out["outcome"] == "drained" and elapsed < request["deadline_seconds"]
    # everything that could move was evicted (the budget honoured) before the instance goes; the
    # DaemonSet pod stays with its node, and no pod was deleted past the Eviction API
    assert sorted(out["evicted"]) == ["team-a/crawl-0", "team-a/web-0", "team-a/web-1", "team-a/web-2"]
    assert evictions(cloud).count(201) == 4 and 429 in evictions(cloud) and controller.created >= 2
    assert not [r for r in cloud.kube.requests if r.method == "DELETE" and "/pods/" in r.path]
    left = [p["metadata"]["name"] for p in cloud.kube.list("Pod") if p["spec"].get("nodeName") == at_risk]
    assert left == ["aws-node-x1"]
    node = cloud.kube.get("Node", at_risk)
    assert node is not None and node["spec"]["unschedulable"] is True
    assert f"held drain interrupt-{instance}" in node["metadata"]["annotations"][CORDONED_BY_SPILLWAY]
    # the group (and EC2, at the end of the two minutes) terminates the instance, not Spillway
    assert terminate_calls(cloud) == []
    states = {i["InstanceId"]: i["LifecycleState"] for i in cloud.asg("spot")["Instances"]}
    assert states[instance] == "InService" and cloud.desired("spot") == 2
    assert cloud.sim.set_desired_calls == []
    # the Spot pool of m5.large in us-east-1a is backed off, and the group that launches only from it
    pool, group = cloud.backoff_item(POOL), cloud.backoff_item("backoff#us-east-1/spot")
    assert pool is not None and "spot interruption of m5.large in us-east-1a" in pool["reason"]["S"]
    assert group is not None and group["backoff_until"] == pool["backoff_until"]


@pytest.mark.parametrize("detail_type", [REBALANCE, WARNING])
def test_only_a_group_with_capacity_rebalancing_is_left_to_replace_and_terminate_the_instance(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch, detail_type: str
) -> None:
    """The same notice for a node of a group with Capacity Rebalancing and for one of a group without:
    the first is drained and left to its group; the second, which Auto Scaling replaces only once EC2
    has interrupted it, is drained and terminated with the decrement (README, *Spot and scheduled
    interruptions*)."""
    monkeypatch.setenv("INTERRUPT_POLL_SECONDS", "1")
    rebalancing, rebalancing_id, rebalancing_spare = spot_group(
        cloud, "spot-rebalancing", capacity_rebalance=True
    )
    plain, plain_id, plain_spare = spot_group(cloud, "spot-plain", capacity_rebalance=False)
    web(cloud, rebalancing, "web")
    web(cloud, plain, "api")
    cloud.snapshot()

    with (
        ReplicaSetController(cloud.kube, "web", 3, rebalancing_spare),
        ReplicaSetController(cloud.kube, "api", 3, plain_spare),
    ):
        notify(cloud, detail_type, rebalancing_id, plain_id)
        kept, given_back = (
            drain_of(cloud, detail_type, rebalancing_id),
            drain_of(cloud, detail_type, plain_id),
        )

    assert kept["status"] == given_back["status"] == "SUCCEEDED", (kept, given_back)
    assert kept["input"]["terminate"] is False and given_back["input"]["terminate"] is True
    assert sorted(kept["output"]["evicted"]) == ["team-a/web-0", "team-a/web-1", "team-a/web-2"]
    assert sorted(given_back["output"]["evicted"]) == ["team-a/api-0", "team-a/api-1", "team-a/api-2"]
    # with Capacity Rebalancing: drained, the instance left in service for the group to replace
    assert kept["output"]["outcome"] == "drained"
    assert rebalancing_id in {i["InstanceId"] for i in cloud.asg("spot-rebalancing")["Instances"]}
    assert cloud.desired("spot-rebalancing") == 2 and cloud.kube.get("Node", rebalancing) is not None
    # without: terminated with the decrement, the Node deleted
    assert given_back["output"]["outcome"] == "terminated"
    assert plain_id not in {i["InstanceId"] for i in cloud.asg("spot-plain")["Instances"]}
    assert cloud.desired("spot-plain") == 1 and cloud.kube.get("Node", plain) is None
    assert terminate_calls(cloud) == [plain_id]
    # a Spot warning backs off the pool whichever the group; a rebalance recommendation only where
    # Spillway terminates the instance (the group without Capacity Rebalancing), its reason naming it
    item = cloud.backoff_item(POOL)
    assert item is not None
    if detail_type == REBALANCE:
        assert plain_id in str(item) and rebalancing_id not in str(item), item


def test_a_node_the_group_never_replaces_is_given_back_after_the_replacement_wait(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group launches no replacement (moto launches none, and the test plays no part of Auto
    Scaling's: a group with no Spot capacity in another pool, or at its MaxSize). The recommendation's
    drain empties the node and keeps its cordon; a plan leaves it held while the group may still
    replace it, and once REPLACEMENT_WAIT_MINUTES have passed since its cordon (the test moves the
    cordon's time back, as the clock would) the plan gives it back: uncordoned, its draining taint
    lifted, a SpillwayUncordoned Event saying the group has not replaced it; nothing terminated. Before,
    it stayed cordoned, empty and paid for until orphaned_drain_minutes (27 h)."""
    monkeypatch.setenv("INTERRUPT_POLL_SECONDS", "1")
    at_risk, instance, spare = spot_group(cloud, "spot", capacity_rebalance=True)
    web(cloud, at_risk)
    cloud.snapshot()
    with ReplicaSetController(cloud.kube, "web", 3, spare):
        notify(cloud, REBALANCE, instance)
        result = drain_of(cloud, REBALANCE, instance)
    assert result["status"] == "SUCCEEDED" and result["output"]["outcome"] == "drained", result

    plan = plan_now(cloud)
    assert at_risk not in {u["node"] for u in plan["uncordon"]} | {d["node"] for d in plan["drain"]}

    node = cloud.kube.get("Node", at_risk)
    assert node is not None
    cordon = node["metadata"]["annotations"][CORDONED_BY_SPILLWAY]
    earlier = datetime.now(UTC) - timedelta(minutes=REPLACEMENT_WAIT_MINUTES + 1)
    node["metadata"]["annotations"][CORDONED_BY_SPILLWAY] = (
        f"{earlier:%Y-%m-%dT%H:%M:%SZ} {cordon.split(' ', 1)[1]}"
    )
    cloud.kube.update("Node", node)
    plan = plan_now(cloud)
    assert [u["node"] for u in plan["uncordon"]] == [at_risk], plan
    cloud.wait_all(timeout=40)

    node = cloud.kube.get("Node", at_risk)
    assert node is not None and not node["spec"].get("unschedulable")
    assert DRAINING_TAINT not in {t["key"] for t in node["spec"].get("taints") or []}
    assert CORDONED_BY_SPILLWAY not in node["metadata"].get("annotations", {})
    events = [e for e in cloud.kube.list("Event") if e["involvedObject"]["name"] == at_risk]
    given = [e for e in events if e.get("reason") == "SpillwayUncordoned"]
    assert given and "has not replaced it" in given[-1]["message"], events
    assert terminate_calls(cloud) == [] and cloud.desired("spot") == 2
    assert instance in {i["InstanceId"] for i in cloud.asg("spot")["Instances"]}


@pytest.mark.parametrize("annotation", [DO_NOT_DISRUPT, SCALE_DOWN_DISABLED])
def test_a_rebalance_recommendation_leaves_a_protected_node_alone_and_a_spot_warning_still_drains_it(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch, annotation: str
) -> None:
    """A node its operator annotated do-not-disrupt (or scale-down-disabled): the rebalance
    recommendation, advice, leaves it alone and says so (the execution succeeds ``cancelled``, a
    ``SpillwayDrainSkipped`` Event on the Node), where its drain failed and raised the drain-node failures
    alarm; the Spot warning that follows drains it all the same, as Karpenter does (README, *Spot and
    scheduled interruptions*)."""
    monkeypatch.setenv("INTERRUPT_POLL_SECONDS", "1")
    at_risk, instance, spare = spot_group(cloud, "spot", capacity_rebalance=False)
    web(cloud, at_risk)
    node = cloud.kube.get("Node", at_risk)
    assert node is not None
    node["metadata"].setdefault("annotations", {})[annotation] = "true"
    cloud.kube.update("Node", node)
    cloud.snapshot()
    cloud.kube.clear_requests()

    notify(cloud, REBALANCE, instance)
    skipped = drain_of(cloud, REBALANCE, instance)

    assert skipped["status"] == "SUCCEEDED", skipped
    assert skipped["output"]["outcome"] == "cancelled" and annotation in skipped["output"]["note"]
    assert evictions(cloud) == [] and terminate_calls(cloud) == []
    node = cloud.kube.get("Node", at_risk)
    assert node is not None and not node["spec"].get("unschedulable")
    reasons = [e["reason"] for e in cloud.kube.list("Event") if e["involvedObject"]["name"] == at_risk]
    assert reasons == ["SpillwayDrainSkipped"]

    with ReplicaSetController(cloud.kube, "web", 3, spare):
        notify(cloud, WARNING, instance)
        warned = drain_of(cloud, WARNING, instance, timeout=90)
    assert warned["status"] == "SUCCEEDED", warned
    assert warned["output"]["outcome"] == "terminated" and terminate_calls(cloud) == [instance]


def wait_until(check: Callable[[], bool], what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what}: not after {timeout} s"
        time.sleep(0.05)


def test_a_scale_up_that_fails_while_the_group_replaces_an_at_risk_node_leaves_the_replacement_alone(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Spot pool short of capacity: Spillway's raise launches nothing (EC2's InsufficientInstanceCapacity
    in a Failed activity), and EC2 sends a rebalance recommendation for a node of the same group. The
    group launches its replacement (AWS's part, played here with the launch activity AWS records: moto
    launches none) while the scale-up waits for its own launch. That instance is the at-risk node's (its
    group terminates the node once it is healthy), not the scale-up's: a back-off that took it for its
    own undelivered launch terminated it with the decrement, and the group lost the replacement and a
    node of its capacity. The scale-up tells the group's replacements apart by their launch activities'
    Causes (:func:`spillway.model.nodegroup.replacement_launches`); without that, this test fails so."""
    monkeypatch.setenv("INTERRUPT_POLL_SECONDS", "1")
    at_risk, instance, spare = spot_group(cloud, "spot", capacity_rebalance=True)
    for i, node in enumerate((at_risk, spare)):  # a CPU busy on each: the crawler fits neither
        cloud.kube.add(objects.pod(f"busy-{i}", "team-a", node_name=node, labels={"app": "busy"},
                                   owner=("ReplicaSet", "busy-1a2b"), cpu="1", memory="1Gi"))  # fmt: skip
    cloud.kube.add(crawler("crawl-0"))
    cloud.sim.capacity_outage("spot", HOME)
    original: Callable[..., Any] = AutoScalingBackend.set_desired_capacity
    replacements: list[str] = []

    def cordoned() -> bool:
        node = cloud.kube.get("Node", at_risk)
        return node is not None and bool(node["spec"].get("unschedulable"))

    def raise_then_recommendation(self: Any, group_name: str, desired_capacity: int | None) -> Any:
        answer = original(self, group_name, desired_capacity)
        if not replacements:  # EC2 and Auto Scaling, meanwhile: the recommendation, the replacement
            replacements.append(aws_launches_replacement(cloud, "spot"))
            notify(cloud, REBALANCE, instance)
            wait_until(cordoned, "the recommendation's cordon")
        return answer

    with mock.patch.object(AutoScalingBackend, "set_desired_capacity", raise_then_recommendation):
        plan = plan_now(cloud)
        assert [(s["group"], s["from"], s["to"]) for s in plan["scale_up"]] == [("spot", 2, 3)]
        [up] = cloud.wait_all(timeout=60)  # the scale-up (listed before the recommendation's drain started)

    [replacement] = replacements
    drain = drain_of(cloud, REBALANCE, instance)
    assert drain["status"] == "SUCCEEDED" and drain["output"]["outcome"] == "drained"
    assert up["status"] == "SUCCEEDED", up
    [line] = up["output"]["rounds"][0]["groups"]
    assert line["outcome"] == "backed_off" and "do not have sufficient m5.large capacity" in line["reason"]
    assert line.get("terminated", []) == []  # nothing of the scale-up's own launched: nothing to give back
    # the group's replacement and the at-risk instance are still there, for the group to swap
    states = {i["InstanceId"]: i["LifecycleState"] for i in cloud.asg("spot")["Instances"]}
    assert states.get(replacement) == "Pending" and states.get(instance) == "InService", states
    assert cloud.backoff_item("backoff#us-east-1/spot") is not None  # the failed launch backed the group off
