"""CloudSim makes moto's Auto Scaling act like AWS; NodeRegistrar turns instances into Nodes."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from spillway.local.cloud import CloudSim, NodeRegistrar
from spillway.local.kubeapi import KubeApiServer
from spillway.local.rig import create_group
from spillway.model.aws import parse_activities
from spillway.model.nodegroup import is_capacity_failure, raised_at

REGION = "us-east-1"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[CloudSim]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws(), CloudSim() as sim:
        yield sim


def make_group(name: str, max_size: int = 3) -> None:
    create_group(name, instance_type="g5.xlarge", max_size=max_size, cluster="ml", gpu=True)


def group(name: str) -> dict[str, object]:
    out: dict[str, object] = boto3.client("autoscaling").describe_auto_scaling_groups(
        AutoScalingGroupNames=[name]
    )["AutoScalingGroups"][0]
    return out


def test_desired_capacity_above_max_is_refused_like_aws(aws: CloudSim) -> None:
    make_group("gpu", max_size=2)
    with pytest.raises(ClientError) as err:
        boto3.client("autoscaling").set_desired_capacity(AutoScalingGroupName="gpu", DesiredCapacity=3)
    assert err.value.response["Error"]["Code"] == "ValidationError"
    assert "above max value 2" in err.value.response["Error"]["Message"]
    assert group("gpu")["DesiredCapacity"] == 0


def test_launches_and_outages_are_recorded_as_scaling_activities(aws: CloudSim) -> None:
    make_group("gpu")
    client = boto3.client("autoscaling")
    client.set_desired_capacity(AutoScalingGroupName="gpu", DesiredCapacity=1)
    aws.capacity_outage("gpu", REGION)
    client.set_desired_capacity(AutoScalingGroupName="gpu", DesiredCapacity=3)

    described = group("gpu")
    assert described["DesiredCapacity"] == 3
    assert len(described["Instances"]) == 1  # nothing launched during the outage
    activities = parse_activities(client.describe_scaling_activities(AutoScalingGroupName="gpu"))
    assert [a.StatusCode for a in activities] == ["Failed", "Successful"]
    assert is_capacity_failure(activities[0].StatusMessage or "")
    assert [(c.group, c.desired) for c in aws.set_desired_calls] == [("gpu", 1), ("gpu", 3)]

    aws.end_outage("gpu", REGION)
    client.set_desired_capacity(AutoScalingGroupName="gpu", DesiredCapacity=2)
    assert len(group("gpu")["Instances"]) == 2


def test_a_launchs_cause_says_when_the_desired_capacity_was_raised_in_auto_scalings_words(
    aws: CloudSim,
) -> None:
    """A launch activity's Cause begins with the clause of the desired capacity's change ("At <time> a
    user request explicitly set group desired capacity changing the desired capacity from 1 to 3."), which
    observe reads as the group's latest raise (NodeGroup.last_raised). CloudSim wrote "... changed the
    desired capacity to 3", which names no raise, so on the local stack no group ever had one."""
    make_group("gpu")
    client = boto3.client("autoscaling")
    client.set_desired_capacity(AutoScalingGroupName="gpu", DesiredCapacity=1)
    aws.capacity_outage("gpu", REGION)
    client.set_desired_capacity(AutoScalingGroupName="gpu", DesiredCapacity=3)
    failed, launched = parse_activities(client.describe_scaling_activities(AutoScalingGroupName="gpu"))
    first, second = raised_at(launched.Cause), raised_at(failed.Cause)
    assert first is not None and second is not None and first <= second
    assert "changing the desired capacity from 1 to 3" in failed.Cause
    assert "an instance was started in response to a difference" in launched.Cause


def test_a_zone_short_of_capacity_fails_its_share_of_a_raise_and_the_other_zone_launches(
    aws: CloudSim,
) -> None:
    """A group over us-east-1a and us-east-1b raised by four while us-east-1a has none: two launch in
    us-east-1b, and two Failed activities name us-east-1a, as EC2's InsufficientInstanceCapacity does."""
    create_group("gpu", instance_type="g5.xlarge", max_size=8, cluster="ml", gpu=True, zone="ab")
    client = boto3.client("autoscaling")
    aws.zone_outage("gpu", REGION, f"{REGION}a")
    client.set_desired_capacity(AutoScalingGroupName="gpu", DesiredCapacity=4)

    described = group("gpu")
    assert described["DesiredCapacity"] == 4
    assert sorted(i["AvailabilityZone"] for i in described["Instances"]) == [f"{REGION}b"] * 2
    activities = parse_activities(client.describe_scaling_activities(AutoScalingGroupName="gpu"))
    failed = [a for a in activities if a.StatusCode == "Failed"]
    assert len(failed) == 2 and all(f"({REGION}a)" in (a.StatusMessage or "") for a in failed)
    assert all(is_capacity_failure(a.StatusMessage or "") for a in failed)


def test_registrar_turns_instances_into_ready_nodes_and_forgets_terminated_ones(aws: CloudSim) -> None:
    make_group("gpu")
    client = boto3.client("autoscaling")
    client.set_desired_capacity(AutoScalingGroupName="gpu", DesiredCapacity=2)
    clock = [0.0]
    with KubeApiServer() as kube:
        registrar = NodeRegistrar(
            kube, cluster="ml", regions=[REGION], boot_seconds=60, clock=lambda: clock[0]
        )
        assert registrar.step() == []  # still booting
        clock[0] = 61
        names = registrar.step()
        assert len(names) == 2
        node = kube.get("Node", names[0])
        assert node is not None
        assert node["spec"]["providerID"].startswith("aws:///us-east-1a/i-")
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "1"
        assert node["spec"]["taints"] == [
            {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
        ]
        assert node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "g5.xlarge"

        victim = node["spec"]["providerID"].rsplit("/", 1)[-1]
        client.terminate_instance_in_auto_scaling_group(
            InstanceId=victim, ShouldDecrementDesiredCapacity=True
        )
        registrar.step()
        assert kube.get("Node", names[0]) is None
        assert len(kube.list("Node")) == 1
        assert group("gpu")["DesiredCapacity"] == 1


def test_the_registrar_makes_its_aws_clients_once_not_on_every_pass(
    aws: CloudSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass runs every ``tick`` (0.1 s on the rig) in a thread beside the test; making a boto3 client
    costs ~20 ms of the GIL, so four a pass kept a core half busy. One client per region and service,
    made when first needed, serves every pass."""
    make_group("gpu")
    boto3.client("autoscaling").set_desired_capacity(AutoScalingGroupName="gpu", DesiredCapacity=2)
    made: list[tuple[str, str | None]] = []
    original = boto3.client

    def counting(service: str, *args: object, **kwargs: object) -> object:
        made.append((service, kwargs.get("region_name")))  # type: ignore[arg-type]
        return original(service, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(boto3, "client", counting)
    with KubeApiServer() as kube:
        registrar = NodeRegistrar(kube, cluster="ml", regions=[REGION, "us-west-2"])
        assert len(registrar.step()) == 2
        for _ in range(4):
            assert registrar.step() == []
        assert sorted(made) == [("autoscaling", REGION), ("autoscaling", "us-west-2"), ("ec2", REGION)]
        instance = boto3.client("autoscaling").describe_auto_scaling_groups()["AutoScalingGroups"][0][
            "Instances"
        ][0]["InstanceId"]
        boto3.client("autoscaling").terminate_instance_in_auto_scaling_group(
            InstanceId=instance, ShouldDecrementDesiredCapacity=False
        )
        registrar.step()  # the replacement registers, the terminated one is forgotten
        assert len(kube.list("Node")) == 2


def test_terminating_an_unknown_instance_is_a_validation_error(aws: CloudSim) -> None:
    with pytest.raises(ClientError) as err:
        boto3.client("autoscaling").terminate_instance_in_auto_scaling_group(
            InstanceId="i-0123456789abcdef0", ShouldDecrementDesiredCapacity=True
        )
    assert err.value.response["Error"]["Code"] == "ValidationError"


def test_terminating_with_a_decrement_below_min_size_is_refused_like_aws(aws: CloudSim) -> None:
    """moto decrements below MinSize; AWS refuses (ValidationError, nothing done) and says how to go on:
    terminate without decrementing, and the group launches a replacement."""
    make_group("gpu")
    client = boto3.client("autoscaling")
    client.update_auto_scaling_group(AutoScalingGroupName="gpu", MinSize=1, DesiredCapacity=1)

    def instances() -> list[str]:
        found = client.describe_auto_scaling_groups(AutoScalingGroupNames=["gpu"])["AutoScalingGroups"]
        return [i["InstanceId"] for i in found[0]["Instances"]]

    [victim] = instances()
    with pytest.raises(ClientError) as err:
        client.terminate_instance_in_auto_scaling_group(
            InstanceId=victim, ShouldDecrementDesiredCapacity=True
        )
    still = instances()
    client.terminate_instance_in_auto_scaling_group(InstanceId=victim, ShouldDecrementDesiredCapacity=False)
    after = instances()

    assert err.value.response["Error"]["Code"] == "ValidationError"
    assert "violate group's min size constraint" in err.value.response["Error"]["Message"]
    assert still == [victim]
    assert group("gpu")["DesiredCapacity"] == 1 and len(after) == 1 and victim not in after  # replaced


def test_hidden_fleet_instances_are_in_no_describe_answer_until_shown_yet_can_be_terminated(
    aws: CloudSim,
) -> None:
    """EC2's eventual consistency, which moto lacks: just-launched instances missing from DescribeInstances
    (left out of a filtered answer, InvalidInstanceID.NotFound by id), while TerminateInstances knows them."""
    create_group("gpu", instance_type="g5.xlarge", cluster="ml", gpu=True)  # for its launch template
    ec2 = boto3.client("ec2")
    aws.hide_new_instances(REGION)
    fleet = ec2.create_fleet(
        Type="instant", ClientToken="tok-1",
        LaunchTemplateConfigs=[{"LaunchTemplateSpecification": {"LaunchTemplateName": "lt-gpu", "Version": "$Latest"}}],
        TargetCapacitySpecification={"TotalTargetCapacity": 2, "DefaultTargetCapacityType": "on-demand"},
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "attempt", "Value": "a"}]}],
    )  # fmt: skip
    ids = sorted(i for entry in fleet["Instances"] for i in entry["InstanceIds"])
    by_tag = [{"Name": "tag:attempt", "Values": ["a"]}]

    def described(**query: object) -> list[str]:
        pages = ec2.describe_instances(**query)["Reservations"]
        return sorted(i["InstanceId"] for r in pages for i in r["Instances"])

    assert (
        described(Filters=by_tag) == [] and described(Filters=[{"Name": "instance-id", "Values": ids}]) == []
    )
    with pytest.raises(ClientError) as err:
        ec2.describe_instances(InstanceIds=ids)
    assert err.value.response["Error"]["Code"] == "InvalidInstanceID.NotFound"
    again = ec2.create_fleet(
        Type="instant", ClientToken="tok-1",
        LaunchTemplateConfigs=[{"LaunchTemplateSpecification": {"LaunchTemplateName": "lt-gpu", "Version": "$Latest"}}],
        TargetCapacitySpecification={"TotalTargetCapacity": 2, "DefaultTargetCapacityType": "on-demand"},
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "attempt", "Value": "a"}]}],
    )  # fmt: skip
    assert (
        sorted(i for entry in again["Instances"] for i in entry["InstanceIds"]) == ids
    )  # the token's answer
    ec2.terminate_instances(InstanceIds=ids[:1])

    aws.show_instances()
    states = {i["InstanceId"]: i["State"]["Name"] for r in ec2.describe_instances(Filters=by_tag)["Reservations"]
              for i in r["Instances"]}  # fmt: skip
    assert sorted(states) == ids and states[ids[0]] in ("shutting-down", "terminated")
    assert states[ids[1]] == "running"


@pytest.mark.parametrize("kind", ["spot", "on-demand"])
def test_a_short_fleets_errors_are_of_the_capacity_type_it_asked_for(aws: CloudSim, kind: str) -> None:
    """EC2 lists each instance a fleet could not launch with the Lifecycle it was to have (CreateFleetError):
    a Spot fleet's shortfall is Spot's. A gang's give-back backs off the pool of that Lifecycle, so a Spot
    fleet's errors called on-demand would back off the on-demand pool (holding back every on-demand group
    of the type in the zone) and leave the Spot pool that had no capacity open."""
    create_group("gpu", instance_type="g5.xlarge", cluster="ml", gpu=True)  # for its launch template
    aws.fleet_shortfall(REGION, launched=1)
    target = {"TotalTargetCapacity": 3, "DefaultTargetCapacityType": kind,
              "SpotTargetCapacity" if kind == "spot" else "OnDemandTargetCapacity": 3}  # fmt: skip
    fleet = boto3.client("ec2").create_fleet(
        Type="instant", TargetCapacitySpecification=target,
        LaunchTemplateConfigs=[{"LaunchTemplateSpecification": {"LaunchTemplateName": "lt-gpu", "Version": "$Latest"},
                                "Overrides": [{"InstanceType": "g5.xlarge"}]}],
    )  # fmt: skip
    assert sum(len(entry["InstanceIds"]) for entry in fleet["Instances"]) == 1
    assert [e["Lifecycle"] for e in fleet["Errors"]] == [kind, kind]


def _hooked_group(name: str, desired: int) -> list[str]:
    """A group with a terminate hook (Spillway's drain hook) and ``desired`` InService instances."""
    make_group(name, max_size=5)
    client = boto3.client("autoscaling")
    client.put_lifecycle_hook(
        LifecycleHookName="drain", AutoScalingGroupName=name,
        LifecycleTransition="autoscaling:EC2_INSTANCE_TERMINATING", HeartbeatTimeout=300, DefaultResult="CONTINUE",
    )  # fmt: skip
    client.set_desired_capacity(AutoScalingGroupName=name, DesiredCapacity=desired)
    return sorted(str(i["InstanceId"]) for i in group(name)["Instances"])


def test_terminating_without_the_decrement_on_a_hooked_group_launches_a_replacement(
    aws: CloudSim,
) -> None:
    """AWS, TerminateInstanceInAutoScalingGroup (API reference): "If you do not specify the option to
    decrement the desired capacity, Amazon EC2 Auto Scaling launches instances to replace the ones that are
    terminated", and an instance in Terminating:Wait no longer counts towards the desired capacity. CloudSim
    held the instance for its hook and launched nothing, then or after the action completed: the group
    stayed one short of its desired capacity. The product counts on the replacement wherever it terminates
    without the decrement: a leaving drain that meets the MinSize (DrainSteps._terminate_instance),
    give_back_in_group's retry of a MinSize refusal (gang and scale-up give-backs), the unregistered
    instance removal at MinSize ("the group launches a replacement")."""
    victim, kept = _hooked_group("gpu", 2)
    client = boto3.client("autoscaling")
    client.terminate_instance_in_auto_scaling_group(InstanceId=victim, ShouldDecrementDesiredCapacity=False)
    client.complete_lifecycle_action(
        AutoScalingGroupName="gpu", LifecycleHookName="drain", LifecycleActionResult="CONTINUE", InstanceId=victim
    )  # fmt: skip

    described = group("gpu")
    instances: list[dict[str, str]] = described["Instances"]  # type: ignore[assignment]
    in_service = [i["InstanceId"] for i in instances if i["LifecycleState"] == "InService"]
    assert described["DesiredCapacity"] == 2
    assert kept in in_service and victim not in in_service and len(in_service) == 2


def test_a_terminate_waiting_on_its_hook_is_one_activity_listed_first_while_in_progress(
    aws: CloudSim,
) -> None:
    """AWS, DescribeScalingActivities (API reference, Activities): "Activities are sorted by start time.
    Activities still in progress are described first"; an activity in progress has no EndTime, and the
    termination a lifecycle hook holds is one activity whose StatusCode turns Successful when the instance
    terminates. CloudSim listed the InProgress "Terminating EC2 instance" activity by start time only
    (behind newer launches), with an EndTime, and when the action completed recorded a second, Successful
    one beside it, the first staying InProgress for ever. The product's describe_activities and
    detach_recorded page through activities relying on exactly this order: an activity in progress that
    started before the window is passed over, not taken for the window's end (else the failed launches
    behind it would be missed); on CloudSim that path never ran, as the old in-progress one came last."""
    victim, _ = _hooked_group("gpu", 2)
    client = boto3.client("autoscaling")
    client.terminate_instance_in_auto_scaling_group(InstanceId=victim, ShouldDecrementDesiredCapacity=True)
    client.set_desired_capacity(AutoScalingGroupName="gpu", DesiredCapacity=3)  # two newer launches

    first = client.describe_scaling_activities(AutoScalingGroupName="gpu")["Activities"][0]
    assert (first["Description"], first["StatusCode"]) == (
        f"Terminating EC2 instance: {victim}",
        "InProgress",
    )
    assert "EndTime" not in first

    client.complete_lifecycle_action(
        AutoScalingGroupName="gpu", LifecycleHookName="drain", LifecycleActionResult="CONTINUE", InstanceId=victim
    )  # fmt: skip
    terminating = [
        a for a in client.describe_scaling_activities(AutoScalingGroupName="gpu")["Activities"]
        if a["Description"] == f"Terminating EC2 instance: {victim}"
    ]  # fmt: skip
    assert [(a["ActivityId"], a["StatusCode"]) for a in terminating] == [(first["ActivityId"], "Successful")]
    assert "EndTime" in terminating[0]


def test_terminating_an_instance_records_its_termination_not_a_detach(aws: CloudSim) -> None:
    """AWS records a TerminateInstanceInAutoScalingGroup as a "Terminating EC2 instance: <id>" scaling
    activity (the Activity the call returns); "Detaching EC2 instance: <id>" is DetachInstances' activity
    (API reference, DetachInstances), recorded when an instance leaves its group alive. On a group without
    terminate hooks CloudSim recorded a Successful "Detaching" activity for each terminated instance (moto
    terminates by detaching, and CloudSim's DetachInstances records its activity) and no "Terminating"
    one. The product reads "Detaching" activities as proof an instance left its group alive
    (AwsAdapter.detach_recorded: a Spot warning's forced drain of an instance in no group is drained,
    not refused, only when its group recorded the detach)."""
    make_group("gpu")
    client = boto3.client("autoscaling")
    client.set_desired_capacity(AutoScalingGroupName="gpu", DesiredCapacity=2)
    first, second = sorted(str(i["InstanceId"]) for i in group("gpu")["Instances"])
    client.terminate_instance_in_auto_scaling_group(InstanceId=first, ShouldDecrementDesiredCapacity=True)
    client.terminate_instance_in_auto_scaling_group(InstanceId=second, ShouldDecrementDesiredCapacity=False)

    described = [
        a["Description"] for a in client.describe_scaling_activities(AutoScalingGroupName="gpu")["Activities"]
    ]
    assert not [d for d in described if d.startswith("Detaching")], described
    assert f"Terminating EC2 instance: {first}" in described
    assert f"Terminating EC2 instance: {second}" in described


def test_updating_a_group_keeps_the_mixed_instances_policy_it_does_not_name(aws: CloudSim) -> None:
    """AWS, UpdateAutoScalingGroup (API reference): "Any properties that you don't specify are not changed
    by this update request." moto replaces the group's MixedInstancesPolicy with None on any update that
    does not give it again, so an update of the MinSize alone turned a Spot-only group (its
    InstancesDistribution) into a plain launch template one and dropped the override that names its
    instance type. The e2e tests raise a group's MinSize mid-run this way (test_gang_launch, a MinSize
    raised while the gang waits; test_drain_faults, a leaving drain at MinSize), and the product reads the
    policy for the group's instance types and capacity type (AutoScalingGroup.MixedInstancesPolicy)."""
    create_group("spot", instance_type="g5.xlarge", cluster="ml", gpu=True, spot=True)
    before = group("spot")["MixedInstancesPolicy"]
    boto3.client("autoscaling").update_auto_scaling_group(AutoScalingGroupName="spot", MinSize=1)
    assert group("spot").get("MixedInstancesPolicy") == before
