"""Gang launch end to end: the real gang_launch.asl.json executed by moto, the scale function's gang
steps in-process, EC2 and Auto Scaling made AWS-like by CloudSim (partial instant fleets, launches that
never come up, AttachInstances' limits, throttling: moto enforces none of them), Nodes by the kubelets.

Every test ends on the property the feature exists for, read from moto's EC2 view: no instance is left
running outside a whole gang.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from conftest import HOME, Cloud

from spillway.act import gang
from spillway.act.gang import TAG_ATTEMPT
from spillway.local import cloud as cloud_module
from spillway.local import objects
from spillway.local.rig import create_group
from spillway.model.k8s import CORDONED_BY_SPILLWAY

MACHINE = "GangLaunchStateMachine"


def gang_group(cloud: Cloud, name: str, mode: str, max_size: int = 8) -> None:
    create_group(
        name, region=HOME, instance_type="g5.xlarge", max_size=max_size, cluster=cloud.cluster, gpu=True,
        tags={"spillway.io/atomic-launch": mode},
    )  # fmt: skip


def launch(
    cloud: Cloud, group: str, count: int, mode: str, deadline: int = 20, **extra: Any
) -> dict[str, Any]:
    payload = {"group": group, "region": HOME, "count": count, "gang": "ml/train", "mode": mode,
               "deadline_seconds": deadline, "poll_seconds": 1, "plan_id": "p-1", **extra}  # fmt: skip
    return cloud.stack.run(MACHINE, payload, timeout=90)


def running() -> dict[str, dict[str, str]]:
    """EC2's view: every pending or running instance in the home region → its tags."""
    ec2 = boto3.client("ec2", region_name=HOME)
    found = {}
    for reservation in ec2.describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    )["Reservations"]:
        for instance in reservation["Instances"]:
            found[instance["InstanceId"]] = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
    return found


def group_instances(cloud: Cloud, group: str) -> dict[str, str]:
    return {i["InstanceId"]: i["LifecycleState"] for i in cloud.asg(group)["Instances"]}


def assert_no_half_gang(cloud: Cloud, group: str, whole: set[str], before: set[str]) -> None:
    """What runs is what ran before plus, if the gang launched, the whole gang in its group, InService."""
    live = running()
    assert set(live) == before | whole, {i: live[i] for i in set(live) - before - whole}
    in_group = group_instances(cloud, group)
    assert {i for i, s in in_group.items() if s != "Terminating"} == whole
    assert all(in_group[i] == "InService" for i in whole)


def lambda_errors(cloud: Cloud, execution_arn: str) -> list[str]:
    return [
        e["lambdaFunctionFailedEventDetails"]["error"]
        for e in cloud.stack.history(execution_arn)
        if e["type"] == "LambdaFunctionFailed"
    ]


@pytest.fixture
def busy(cloud: Cloud) -> set[str]:
    """A CPU group with one running node: instances that are no gang's and must survive every test."""
    cloud.group("general", instance_type="m5.xlarge", desired=1, gpu=False)
    cloud.wait_nodes(1)
    return set(running())


def test_fleet_launches_the_whole_gang_attaches_it_in_batches_of_20_and_its_nodes_come_up(
    cloud: Cloud, busy: set[str]
) -> None:
    gang_group(cloud, "gang", "fleet", max_size=24)

    execution = launch(cloud, "gang", 21, "fleet")

    assert execution["status"] == "SUCCEEDED", execution
    out = execution["output"]
    assert out["outcome"] == "ready" and out["mode"] == "fleet" and len(out["instances"]) == 21
    whole = set(out["instances"])
    assert [len(ids) for _, group, ids in cloud.sim.attach_calls if group == "gang"] == [20, 1]
    assert cloud.desired("gang") == 21  # AttachInstances raised it; nothing else set it
    assert cloud.sim.calls_for("gang") == []
    assert all(running()[i][TAG_ATTEMPT].startswith("spillway-") for i in whole)
    assert len(out["nodes"]) == 21 and len(cloud.kube.list("Node")) == 22
    assert_no_half_gang(cloud, "gang", whole, busy)


def test_a_provisioning_requests_gang_labels_its_nodes_once_all_are_ready(
    cloud: Cloud, busy: set[str]
) -> None:
    gang_group(cloud, "gang", "fleet")
    labels = {"spillway.io/provisioning-request": "ml.train-check-1"}

    execution = launch(cloud, "gang", 2, "fleet", node_labels=labels)

    assert execution["status"] == "SUCCEEDED", execution
    nodes = execution["output"]["nodes"]
    assert len(nodes) == 2
    for name in nodes:
        node = cloud.kube.get("Node", name)
        assert (
            node is not None
            and node["metadata"]["labels"]["spillway.io/provisioning-request"] == "ml.train-check-1"
        )
    others = [n for n in cloud.kube.list("Node") if n["metadata"]["name"] not in nodes]
    assert all("spillway.io/provisioning-request" not in n["metadata"].get("labels", {}) for n in others)


def test_a_partial_fleet_is_given_back_whole_and_ends_as_a_shortage_not_a_failure(
    cloud: Cloud, busy: set[str]
) -> None:
    """EC2 short of the type is no fault of the stack (the runbook: nothing to fix, the gang goes
    elsewhere): the execution gives the gang back and succeeds, its output naming the shortage, so the
    gang-launch-failures alarm (ExecutionsFailed, TimedOut, Aborted) stays for what a person must fix."""
    gang_group(cloud, "gang", "fleet")
    cloud.sim.fleet_shortfall(HOME, launched=2)

    execution = launch(cloud, "gang", 4, "fleet")

    assert execution["status"] == "SUCCEEDED", execution
    out = execution["output"]
    assert out["outcome"] == "given_back" and out["error"] == "CapacityUnavailable", out
    assert out["group"] == "gang" and out["gang"] == "ml/train" and out["count"] == 4, out
    assert "EC2 launched 2 of the gang's 4" in out["cause"]
    assert "InsufficientInstanceCapacity" in out["cause"]
    assert len(out["terminated"]) == 2 and out["kept"] == [], out
    assert cloud.sim.attach_calls == [] and cloud.desired("gang") == 0
    backoff = cloud.backoff_item("backoff#us-east-1/gang")
    assert backoff is not None and "InsufficientInstanceCapacity" in backoff["reason"]["S"]
    assert int(backoff["expires_at"]["N"]) > int(cloud.started_at.timestamp())
    # and the pool EC2 named short (its error's override: the type in the group's one zone), as a failed
    # scale-up backs it off: other groups of g5.xlarge on-demand in us-east-1a skip it too
    pool = cloud.backoff_item("backoff#pool#on-demand/us-east-1a/g5.xlarge")
    assert pool is not None and {k: pool[k] for k in ("backoff_until", "reason", "expires_at")} == {
        k: backoff[k] for k in ("backoff_until", "reason", "expires_at")
    }
    # for gangs of 4 nodes or more only: the fleet asked for 4 at once, which says nothing of fewer
    assert pool["nodes"] == {"N": "4"} and "nodes" not in backoff
    assert_no_half_gang(cloud, "gang", set(), busy)


def test_a_fleet_refused_for_its_settings_fails_named_so_and_is_given_back_whole(
    cloud: Cloud, busy: set[str]
) -> None:
    """EC2 refused every override for a KMS key it cannot use: no capacity shortage, and none that waiting
    heals. The execution (and the gang-launch-failures alarm's Cause) says LaunchMisconfigured with EC2's
    code and words; the give-back and the back-off are those of any failed gang."""
    gang_group(cloud, "gang", "fleet")
    cloud.sim.fleet_shortfall(HOME, launched=0, code="Client.InvalidKMSKey.InvalidState",
                              message="The KMS key provided is in an incorrect state")  # fmt: skip

    execution = launch(cloud, "gang", 3, "fleet")

    assert execution["status"] == "FAILED", execution
    assert execution["error"] == "LaunchMisconfigured"
    assert "Client.InvalidKMSKey.InvalidState: The KMS key provided" in execution["cause"]
    assert "will not heal by waiting" in execution["cause"]
    backoff = cloud.backoff_item("backoff#us-east-1/gang")
    assert backoff is not None and "InvalidKMSKey" in backoff["reason"]["S"]
    assert cloud.backoff_item("backoff#pool#on-demand/us-east-1a/g5.xlarge") is None  # the group's fault
    assert_no_half_gang(cloud, "gang", set(), busy)


def test_a_failed_gang_launch_started_again_by_hand_launches_a_new_attempt(
    cloud: Cloud, busy: set[str]
) -> None:
    """An operator starts the failed execution's input again once capacity is back. EC2 (CloudSim here)
    answers a CreateFleet whose ClientToken it has seen with the first answer: a re-run that reused the
    first run's token launched nothing and failed again on the instances given back. (Found by review.)"""
    gang_group(cloud, "gang", "fleet")
    cloud.sim.fleet_shortfall(HOME, launched=2)
    first = launch(cloud, "gang", 4, "fleet")
    assert first["status"] == "SUCCEEDED" and first["output"]["error"] == "CapacityUnavailable", first
    cloud.sim.end_fleet_shortfall(HOME)

    again = launch(cloud, "gang", 4, "fleet")  # the same input, a new execution

    assert again["status"] == "SUCCEEDED", again
    whole = set(again["output"]["instances"])
    assert len(whole) == 4 and len({running()[i][TAG_ATTEMPT] for i in whole}) == 1
    assert_no_half_gang(cloud, "gang", whole, busy)


def test_a_launch_whose_answer_is_lost_is_given_back_whole_before_ec2_shows_its_instances(
    cloud: Cloud, busy: set[str]
) -> None:
    """The Launch step's Lambda times out after CreateFleet launched (Sandbox.Timedout: its answer is
    lost, and Launch catches it straight into GiveBack), while DescribeInstances does not show the new
    instances yet (EC2's eventual consistency, CloudSim). GiveBack found none by the attempt's tag,
    reported them given back and left the whole gang running outside the group (review r14-1). It asks
    CreateFleet again with the attempt's ClientToken and parameters: EC2 (CloudSim) answers with the
    first call's instances, launching nothing, and they are terminated by id."""
    gang_group(cloud, "gang", "fleet")
    cloud.sim.hide_new_instances(HOME)
    cloud.stack.faults.time_out_after(
        "ScaleFunction", when=lambda event: event.get("action") == "gang_launch"
    )

    execution = launch(cloud, "gang", 3, "fleet")
    cloud.sim.show_instances()  # EC2 has caught up: what runs now is what the execution left

    assert execution["status"] == "FAILED" and execution["error"] == "Sandbox.Timedout", execution
    ec2 = boto3.client("ec2", region_name=HOME)
    attempt = [i for r in ec2.describe_instances(Filters=[{"Name": "tag-key", "Values": [TAG_ATTEMPT]}])["Reservations"]
               for i in r["Instances"]]  # fmt: skip
    assert len(attempt) == 3  # one fleet: the second CreateFleet launched nothing
    assert cloud.sim.attach_calls == [] and cloud.backoff_item("backoff#us-east-1/gang") is not None
    assert_no_half_gang(cloud, "gang", set(), busy)


def test_a_fleet_gang_whose_nodes_never_turn_ready_is_detached_and_terminated_at_the_deadline(
    cloud: Cloud, busy: set[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The instances launch and join the group, but their kubelets never report Ready (a broken AMI)."""
    original_node = cloud_module._node

    def broken_kubelet(name: str, instance_id: str, zone: str, region: str, template: Any) -> Any:
        node = original_node(name, instance_id, zone, region, template)
        if template.labels.get("node.kubernetes.io/instance-type") == "g5.xlarge":
            node["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]
        return node

    monkeypatch.setattr(cloud_module, "_node", broken_kubelet)
    gang_group(cloud, "gang", "fleet")

    # the deadline also bounds the attach (never after it): long enough for the fleet to be attached
    # on a loaded machine, short for the nodes that never turn Ready
    execution = launch(cloud, "gang", 3, "fleet", deadline=8)

    assert execution["status"] == "FAILED", execution
    assert execution["error"] == "GangIncomplete"
    assert "0 of the gang's 3 node(s) Ready by the deadline (3 instance(s) InService)" in execution["cause"]
    assert [len(ids) for _, _, ids in cloud.sim.attach_calls] == [3]  # they had joined the group
    assert cloud.desired("gang") == 0  # each terminated with a decrement
    assert cloud.backoff_item("backoff#us-east-1/gang") is not None
    assert_no_half_gang(cloud, "gang", set(), busy)


def test_a_gang_given_back_leaves_running_a_member_whose_node_already_runs_another_teams_pod(
    cloud: Cloud, busy: set[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One member's kubelet never turns Ready, so the gang is given back at its deadline; meanwhile
    kube-scheduler bound another team's pod to a member that did. All or nothing is for the gang's
    capacity: that member, and its pod, stay (scale-down judges it once idle), its Node schedulable
    again once the give-back that cordoned it to read its pods ends; the others go."""
    original_node = cloud_module._node
    made: list[str] = []
    names: dict[str, str] = {}

    def kubelets(name: str, instance_id: str, zone: str, region: str, template: Any) -> Any:
        node = original_node(name, instance_id, zone, region, template)
        if template.labels.get("node.kubernetes.io/instance-type") == "g5.xlarge":
            made.append(instance_id)
            names[instance_id] = name
            if len(made) == 1:  # a broken AMI on this one
                node["status"]["conditions"] = [
                    {"type": "Ready", "status": "False", "reason": "KubeletNotReady"}
                ]
            elif len(made) == 2:
                cloud.kube.add(objects.pod("web-0", "team-b", node_name=name, owner=("ReplicaSet", "web-5d9c"),
                                           cpu="100m", memory="64Mi", phase="Running"))  # fmt: skip
        return node

    monkeypatch.setattr(cloud_module, "_node", kubelets)
    gang_group(cloud, "gang", "fleet")

    execution = launch(cloud, "gang", 3, "fleet", deadline=8)

    assert execution["status"] == "FAILED" and execution["error"] == "GangIncomplete", execution
    kept = made[1]
    assert f"left running, their Nodes run pods: {kept} (team-b/web-0)" in execution["cause"]
    assert set(running()) == busy | {kept}  # the two others terminated
    assert cloud.kube.get("Pod", "web-0", "team-b") is not None
    node = cloud.kube.get("Node", names[kept])
    assert not node["spec"].get("unschedulable") and CORDONED_BY_SPILLWAY not in node["metadata"].get(
        "annotations", {}
    )


def test_a_min_size_raised_while_the_gang_waits_still_gives_every_instance_back(
    cloud: Cloud, busy: set[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator (or a scheduled action) raises the group's MinSize to its desired capacity while the
    attached gang waits for its nodes. AWS (CloudSim) then refuses TerminateInstanceInAutoScalingGroup
    with the decrement. GiveBack stopped at the first refusal and did not retry it: GiveBackFailed, the
    whole gang running (review r14-2, r14-3). Each instance is terminated; the refused ones without the
    decrement, as AWS's refusal offers: the group keeps its MinSize with replacements, no gang member."""
    original_node, original_verify = cloud_module._node, gang.GangSteps.verify

    def broken_kubelet(name: str, instance_id: str, zone: str, region: str, template: Any) -> Any:
        node = original_node(name, instance_id, zone, region, template)
        node["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]
        return node

    def verify_after_min_size_raised(self: gang.GangSteps, event: Any) -> dict[str, Any]:
        autoscaling = boto3.client("autoscaling", region_name=HOME)
        desired = cloud.asg("gang")["DesiredCapacity"]
        autoscaling.update_auto_scaling_group(AutoScalingGroupName="gang", MinSize=desired)
        return original_verify(self, event)

    monkeypatch.setattr(cloud_module, "_node", broken_kubelet)
    monkeypatch.setattr(gang.GangSteps, "verify", verify_after_min_size_raised)
    gang_group(cloud, "gang", "fleet")

    # the deadline also bounds the attach (never after it): long enough for the fleet to be attached
    # on a loaded machine, short for the nodes that never turn Ready
    execution = launch(cloud, "gang", 3, "fleet", deadline=8)

    assert execution["status"] == "FAILED" and execution["error"] == "GangIncomplete", execution
    assert "3 instance(s) terminated without decrement: MinSize 3" in execution["cause"]
    live = running()
    assert [i for i, tags in live.items() if TAG_ATTEMPT in tags] == []  # no gang member runs
    replacements = {i for i, s in group_instances(cloud, "gang").items() if s == "InService"}
    assert cloud.desired("gang") == 3 and len(replacements) == 3 and set(live) == busy | replacements


def test_rollback_raises_the_desired_capacity_once_and_the_whole_gang_comes_up(
    cloud: Cloud, busy: set[str]
) -> None:
    gang_group(cloud, "gang", "rollback")

    execution = launch(cloud, "gang", 3, "rollback")

    assert execution["status"] == "SUCCEEDED", execution
    out = execution["output"]
    assert out["outcome"] == "ready" and out["mode"] == "rollback" and len(out["nodes"]) == 3
    assert [c.desired for c in cloud.sim.calls_for("gang")] == [3]
    assert_no_half_gang(cloud, "gang", set(out["instances"]), busy)


def test_a_rollback_gang_without_capacity_backs_off_the_group_and_the_pool_ec2_named(
    cloud: Cloud, busy: set[str]
) -> None:
    """The raise's launch fails for capacity (a Failed scaling activity naming the type and the zone):
    the gang fails at once, is given back, and backs off the pool as a failed scale-up does, read by the
    same rule, so other groups of g5.xlarge on-demand in us-east-1a skip it too."""
    gang_group(cloud, "gang", "rollback")
    cloud.sim.capacity_outage("gang", HOME)

    execution = launch(cloud, "gang", 3, "rollback", deadline=60)

    assert execution["status"] == "SUCCEEDED", execution
    assert execution["output"]["outcome"] == "given_back", execution
    assert execution["output"]["error"] == "CapacityUnavailable", execution
    assert cloud.desired("gang") == 0
    backoff = cloud.backoff_item("backoff#us-east-1/gang")
    pool = cloud.backoff_item("backoff#pool#on-demand/us-east-1a/g5.xlarge")
    assert backoff is not None and "do not have sufficient g5.xlarge capacity" in backoff["reason"]["S"]
    assert (
        pool is not None
        and pool["reason"] == backoff["reason"]
        and pool["expires_at"] == backoff["expires_at"]
        and "nodes" not in pool  # the group's raise found none: every launch skips the pool
    )
    assert_no_half_gang(cloud, "gang", set(), busy)


def test_rollback_past_the_deadline_gives_all_of_it_back_restores_desired_and_backs_off(
    cloud: Cloud, busy: set[str]
) -> None:
    gang_group(cloud, "gang", "rollback")
    cloud.sim.stall_launches("gang", HOME)  # the instances launch but never reach InService

    execution = launch(cloud, "gang", 3, "rollback", deadline=3)

    assert execution["status"] == "FAILED", execution
    assert execution["error"] == "GangIncomplete"
    assert "0 of the gang's 3 node(s) Ready by the deadline (0 instance(s) InService)" in execution["cause"]
    assert [c.desired for c in cloud.sim.calls_for("gang")] == [3]  # raised once; given back by terminations
    assert cloud.desired("gang") == 0
    assert cloud.backoff_item("backoff#us-east-1/gang") is not None
    assert_no_half_gang(cloud, "gang", set(), busy)


def test_throttled_fleet_and_attach_calls_are_retried_by_the_state_machine(
    cloud: Cloud, busy: set[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # the SDK does not retry: the state machine must
    gang_group(cloud, "gang", "fleet")
    cloud.sim.throttle("CreateFleet", 2)
    cloud.sim.throttle("AttachInstances", 1)

    execution = launch(cloud, "gang", 2, "fleet")

    assert execution["status"] == "SUCCEEDED", execution
    assert lambda_errors(cloud, execution["executionArn"]) == ["AwsThrottled"] * 3
    whole = set(execution["output"]["instances"])
    assert len(whole) == 2 and cloud.desired("gang") == 2
    # The retried CreateFleet calls were refused, so they launched nothing extra.
    assert len([i for i, tags in running().items() if TAG_ATTEMPT in tags]) == 2
    assert_no_half_gang(cloud, "gang", whole, busy)


def test_a_gang_above_max_size_is_refused_before_anything_launches(cloud: Cloud, busy: set[str]) -> None:
    gang_group(cloud, "gang", "fleet", max_size=2)

    execution = launch(cloud, "gang", 3, "fleet")

    assert execution["status"] == "FAILED" and execution["error"] == "AsgLimitExceeded", execution
    assert "above MaxSize 2; nothing launched" in execution["cause"]
    assert cloud.backoff_item("backoff#us-east-1/gang") is None
    assert_no_half_gang(cloud, "gang", set(), busy)


def test_a_fleet_gang_is_refused_on_a_group_whose_terminate_process_is_suspended(
    cloud: Cloud, busy: set[str]
) -> None:
    """Attached, a fleet's members are InService, which a suspended Terminate keeps from being
    terminated: a gang whose Nodes never turned Ready would be held running, not given back. Refused
    before CreateFleet, and not backed off (nothing failed to launch)."""
    gang_group(cloud, "gang", "fleet")
    boto3.client("autoscaling", region_name=HOME).suspend_processes(
        AutoScalingGroupName="gang", ScalingProcesses=["Terminate"]
    )

    execution = launch(cloud, "gang", 3, "fleet")

    assert execution["status"] == "FAILED" and execution["error"] == "AsgLimitExceeded", execution
    assert "its Terminate process is suspended" in execution["cause"]
    assert "nothing launched" in execution["cause"]
    assert cloud.backoff_item("backoff#us-east-1/gang") is None
    assert_no_half_gang(cloud, "gang", set(), busy)


def test_a_fleet_gang_given_a_zone_launches_only_in_that_zones_subnets(cloud: Cloud, busy: set[str]) -> None:
    gang_group(cloud, "gang", "fleet")
    ec2 = boto3.client("ec2", region_name=HOME)
    vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    subnets = {
        zone: ec2.create_subnet(VpcId=vpc, CidrBlock=f"172.31.{200 + n}.0/24", AvailabilityZone=zone)[
            "Subnet"
        ]["SubnetId"]
        for n, zone in enumerate([f"{HOME}a", f"{HOME}b", f"{HOME}c"])
    }
    template = {"LaunchTemplateName": "lt-gang", "Version": "$Latest"}
    boto3.client("autoscaling", region_name=HOME).update_auto_scaling_group(
        AutoScalingGroupName="gang",
        VPCZoneIdentifier=",".join(subnets.values()),
        # moto drops the group's MixedInstancesPolicy on any update: give it again, as it was
        MixedInstancesPolicy={"LaunchTemplate": {"LaunchTemplateSpecification": template,
                                                 "Overrides": [{"InstanceType": "g5.xlarge"}]}},
    )  # fmt: skip
    payload = {"group": "gang", "region": HOME, "count": 3, "gang": "ml/train", "mode": "fleet", "zone": f"{HOME}b",
               "deadline_seconds": 20, "poll_seconds": 1, "plan_id": "p-1"}  # fmt: skip
    # three zones with AZRebalance active (a new group's default): it would terminate the gang packed
    # into one of them to even the zones out, so fleet mode is refused before anything launches
    refused = cloud.stack.run(MACHINE, payload, timeout=90)
    assert refused["status"] == "FAILED" and refused["error"] == "InputError", refused
    assert "us-east-1/gang spans 3 zones" in refused["cause"] and "AZRebalance" in refused["cause"]
    assert_no_half_gang(cloud, "gang", set(), busy)
    boto3.client("autoscaling", region_name=HOME).suspend_processes(
        AutoScalingGroupName="gang", ScalingProcesses=["AZRebalance"]
    )

    execution = cloud.stack.run(MACHINE, payload, timeout=90)

    assert execution["status"] == "SUCCEEDED", execution
    whole = set(execution["output"]["instances"])
    described = ec2.describe_instances(InstanceIds=sorted(whole))["Reservations"]
    placed = {i["SubnetId"] for r in described for i in r["Instances"]}
    assert placed == {subnets[f"{HOME}b"]}
    assert_no_half_gang(cloud, "gang", whole, busy)


def test_a_rollback_member_the_group_marks_unhealthy_gives_the_gang_back_before_its_deadline(
    cloud: Cloud, busy: set[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Verify's ``lost`` goes through Ready? to GiveBack and fails the execution GangIncomplete at the
    check that finds a member Unhealthy, long before the deadline, with every member given back."""
    original_node, original_verify = cloud_module._node, gang.GangSteps.verify
    checks: list[str] = []

    def never_ready(name: str, instance_id: str, zone: str, region: str, template: Any) -> Any:
        node = original_node(name, instance_id, zone, region, template)
        node["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]
        return node

    def verify_then_one_unhealthy(self: gang.GangSteps, event: Any) -> dict[str, Any]:
        checks.append("verify")
        members = sorted(i for i, s in group_instances(cloud, "gang").items() if s == "InService")
        if len(checks) == 2 and members:  # every member claimed by the first check
            boto3.client("autoscaling", region_name=HOME).set_instance_health(
                InstanceId=members[0], HealthStatus="Unhealthy"
            )
        return original_verify(self, event)

    monkeypatch.setattr(cloud_module, "_node", never_ready)
    monkeypatch.setattr(gang.GangSteps, "verify", verify_then_one_unhealthy)
    gang_group(cloud, "gang", "rollback")

    execution = launch(cloud, "gang", 3, "rollback", deadline=600)

    assert execution["status"] == "FAILED" and execution["error"] == "GangIncomplete", execution
    assert "lost after launching" in execution["cause"] and "Unhealthy" in execution["cause"]
    assert len(checks) == 2  # at the check that found it, not at the deadline
    assert cloud.desired("gang") == 0
    assert_no_half_gang(cloud, "gang", set(), busy)
