"""A gang's CreateFleet shortfall is named for what EC2 said: capacity, a quota, or the launch's settings.

Before, every shortfall was ``CapacityUnavailable``, so a permission, template, AMI or KMS error that
will never heal read as a capacity shortage. The same classification names a rollback gang's failed
launch activity and decides, for scale-up, whether a failed launch was for capacity.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from botocore.exceptions import ClientError
from fakes import FakeLedger
from test_gang_steps import NOW, REQUEST, world

from spillway.adapters.aws import AwsAdapter, map_aws_error
from spillway.errors import AwsError, CapacityUnavailable
from spillway.local import objects as o
from spillway.model.aws import FleetRequest
from spillway.model.launcherror import names_settings
from spillway.model.nodegroup import is_capacity_failure, launch_failed

FLEET_CODES = [
    ("InsufficientInstanceCapacity", "CapacityUnavailable"),
    ("InsufficientCapacity", "CapacityUnavailable"),
    ("UnfulfillableCapacity", "CapacityUnavailable"),
    ("SpotMaxPriceTooLow", "CapacityUnavailable"),
    ("VcpuLimitExceeded", "QuotaExceeded"),
    ("InstanceLimitExceeded", "QuotaExceeded"),
    ("MaxSpotInstanceCountExceeded", "QuotaExceeded"),
    ("UnauthorizedOperation", "LaunchMisconfigured"),
    ("AuthFailure.ServiceLinkedRoleCreationNotPermitted", "LaunchMisconfigured"),
    ("InvalidLaunchTemplateId.NotFound", "LaunchMisconfigured"),
    ("InvalidLaunchTemplateId.VersionNotFound", "LaunchMisconfigured"),
    ("InvalidParameterValue", "LaunchMisconfigured"),
    ("InvalidAMIID.NotFound", "LaunchMisconfigured"),
    ("Client.InvalidKMSKey.InvalidState", "LaunchMisconfigured"),
    ("InsufficientFreeAddressesInSubnet", "LaunchMisconfigured"),
]


def _backoff(ledger: FakeLedger) -> str:
    [(group, until, reason)] = ledger.backoffs
    assert group == "gpu" and until > NOW
    return reason


@pytest.mark.parametrize(("code", "error"), FLEET_CODES)
@pytest.mark.parametrize("launched", [0, 2])
def test_a_fleet_shortfall_is_named_for_ec2s_error_and_given_back_whole(
    code: str, error: str, launched: int
) -> None:
    cloud, ledger, steps = world()
    cloud.fleet_capacity = launched
    cloud.fleet_error = (code, f"EC2 says {code}")
    prep = steps.prepare(REQUEST)

    launch = steps.launch({**REQUEST, "prep": prep})

    assert launch["status"] == "partial" and launch["error"] == error
    assert f"{code}: EC2 says {code}" in launch["reason"]
    out = steps.give_back({"state": {**REQUEST, "prep": prep, "launch": launch}})
    assert out["error"] == error and sorted(out["terminated"]) == launch["instances"]
    assert cloud.running() == []  # all or nothing, whatever the reason
    assert code in _backoff(ledger)


def test_a_settings_error_beside_a_capacity_error_names_the_settings() -> None:
    """One override short of capacity, another refused for its AMI: waiting heals only the first, so
    the execution says the launch is misconfigured, and its cause carries both of EC2's errors."""
    from spillway.model.launcherror import fleet_error_name

    result: dict[str, Any] = {
        "Errors": [
            {"ErrorCode": "InsufficientInstanceCapacity", "ErrorMessage": "no capacity"},
            {"ErrorCode": "InvalidAMIID.NotFound", "ErrorMessage": "The image id does not exist"},
        ]
    }
    assert fleet_error_name([e["ErrorCode"] for e in result["Errors"]]) == "LaunchMisconfigured"
    assert fleet_error_name(["InsufficientInstanceCapacity", "VcpuLimitExceeded"]) == "QuotaExceeded"
    assert fleet_error_name([]) == "CapacityUnavailable"  # fewer instances, no reason given

    cloud, _, steps = world()
    cloud.fleet_capacity = 0
    cloud.fleet_error = ("InvalidAMIID.NotFound", "The image id '[ami-1]' does not exist")
    prep = steps.prepare(REQUEST)
    launch = steps.launch({**REQUEST, "prep": prep})
    assert launch["error"] == "LaunchMisconfigured" and "will not heal" in launch["reason"]


class _RefusingEc2:
    def __init__(self, code: str, status: int = 400) -> None:
        self.code, self.status = code, status

    def create_fleet(self, **kw: Any) -> dict[str, Any]:
        raise ClientError(
            {
                "Error": {"Code": self.code, "Message": "refused"},
                "ResponseMetadata": {"HTTPStatusCode": self.status},
            },
            "CreateFleet",
        )


def _refused_whole(ec2: _RefusingEc2) -> AwsError:
    """What the adapter raises for a two-node instant fleet that ``ec2`` refuses as a whole."""
    clients = SimpleNamespace(regions=("us-east-1",), ec2=lambda region: ec2)
    adapter = AwsAdapter(clients, "prod")  # type: ignore[arg-type]
    request = FleetRequest(
        launch_template={"LaunchTemplateId": "lt-1", "Version": "1"}, count=2, client_token="t"
    )
    with pytest.raises(AwsError) as raised:
        adapter.create_fleet_instant("us-east-1", request)
    return raised.value


@pytest.mark.parametrize(
    ("code", "error"),
    [
        ("InsufficientInstanceCapacity", "CapacityUnavailable"),
        ("UnfulfillableCapacity", "CapacityUnavailable"),
        ("VcpuLimitExceeded", "QuotaExceeded"),
        ("UnauthorizedOperation", "LaunchMisconfigured"),
        ("InvalidParameterValue", "LaunchMisconfigured"),
        ("InvalidLaunchTemplateId.Malformed", "LaunchMisconfigured"),
        ("RequestLimitExceeded", "AwsThrottled"),
        ("IdempotentParameterMismatch", "AwsError"),
    ],
)
def test_the_adapter_names_a_createfleet_refused_whole(code: str, error: str) -> None:
    raised = _refused_whole(_RefusingEc2(code))
    assert type(raised).__name__ == error and code in str(raised)


@pytest.mark.parametrize("code", ["InsufficientInstanceCapacity", "InsufficientCapacity"])
def test_a_createfleet_refused_whole_for_capacity_with_a_server_status_is_capacity(code: str) -> None:
    """EC2 lists its capacity codes among its server errors and answers them with HTTP 500 (botocore
    retries them as transient: "An error occurred (InsufficientInstanceCapacity) when calling the
    RunInstances operation (reached max retries: 4)"). The 5xx rule came first, so such a refusal was
    AwsUnavailable: the Launch step retried it, and the give-back, taking it for an answer lost after a
    launch, asked CreateFleet again under the token, was refused again, and failed for good with no
    back-off written (GiveBackFailed), so the next plan launched the gang into the same shortage."""
    assert type(_refused_whole(_RefusingEc2(code, status=500))) is CapacityUnavailable
    # a 500 that names no launch error stays an outage, retried
    assert type(map_aws_error(ClientError(
        {"Error": {"Code": "InternalError", "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": 500}},
        "CreateFleet",
    ), "x")).__name__ == "AwsUnavailable"  # fmt: skip


def test_a_quota_refused_by_any_other_call_is_a_quota_and_a_settings_code_stays_an_aws_error() -> None:
    def client_error(code: str) -> ClientError:
        return ClientError({"Error": {"Code": code, "Message": "m"}}, "RunInstances")

    assert type(map_aws_error(client_error("VcpuLimitExceeded"), "x")).__name__ == "QuotaExceeded"
    assert type(map_aws_error(client_error("UnfulfillableCapacity"), "x")) is CapacityUnavailable
    # AccessDenied on SetDesiredCapacity is the role's, not a launch's: the generic error, as before
    assert type(map_aws_error(client_error("UnauthorizedOperation"), "x")) is AwsError


@pytest.mark.parametrize("error", ["LaunchMisconfigured", "QuotaExceeded"])
def test_give_back_does_not_ask_ec2_again_after_a_launch_refused_whole(error: str) -> None:
    """Refused whole, nothing ran under the attempt's ClientToken: no repeat of the call."""
    cloud, _, steps = world()
    prep = steps.prepare(REQUEST)
    state = {**REQUEST, "prep": prep, "error": {"Error": error, "Cause": "UnauthorizedOperation: no"}}

    out = steps.give_back({"state": state})

    assert out["error"] == error and cloud.fleets == []


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (None, "CapacityUnavailable"),
        ("Could not launch On-Demand Instances. VcpuLimitExceeded - You have requested more vCPU capacity "
         "than your current vCPU limit of 32 allows. Launching EC2 instance failed.", "QuotaExceeded"),
        (o.MISSING_AMI, "LaunchMisconfigured"),
    ],
    ids=["capacity", "quota", "ami"],
)  # fmt: skip
def test_a_rollback_gangs_failed_launch_is_named_by_the_same_classification(
    message: str | None, error: str
) -> None:
    cloud, _, steps = world(mode="rollback")
    request = {**REQUEST, "mode": "rollback"}
    prep = steps.prepare(request)
    steps.raise_desired({**request, "prep": prep})
    asg = cloud.groups[("us-east-1", "gpu")]
    cloud.activities[("us-east-1", "gpu")] = [o.failed_launch(asg, NOW, message=message)]

    assert steps.verify({**request, "prep": prep})["error"] == error


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("Could not launch Spot Instances. UnfulfillableCapacity - Unable to fulfill capacity due to your "
         "request configuration. Please adjust your request and try again.", "capacity"),
        ("Could not launch On-Demand Instances. InsufficientCapacity - There is not enough capacity.", "capacity"),
        ("Your requested instance type (p5.48xlarge) is not supported in your requested Availability Zone. "
         "Unsupported", "capacity"),
        ("You have requested more vCPU capacity than your current vCPU limit of 64 allows for the instance "
         "bucket that the specified instance type belongs to.", "quota"),
        ("UnsupportedOperation - The instance configuration for this AWS Marketplace product is not "
         "supported.", "settings"),
        # the Spot instance quota in words, without its code (MaxSpotInstanceCountExceeded)
        ("Max spot instance count exceeded. Launching EC2 instance failed.", "quota"),
        ("Client.InvalidKMSKey.InvalidState: The KMS key provided is in an incorrect state", "settings"),
        (o.SUBNET_FULL, "settings"),
    ],
)  # fmt: skip
def test_scale_up_and_gangs_classify_launch_failures_alike(message: str, kind: str) -> None:
    """Scale-up reads DescribeScalingActivities' StatusMessage with the same rule as a gang reads
    CreateFleet's ErrorCode: capacity and quotas back off as before, anything else is the group's."""
    from spillway.model.launcherror import launch_error_kind

    assert launch_error_kind(message) == kind
    assert is_capacity_failure(message) is (kind != "settings")
    assert ("failed for capacity" in launch_failed("r/g", message)) is (kind == "capacity")
    assert ("quota" in launch_failed("r/g", message)) is (kind == "quota")


def test_the_adapter_reads_the_override_each_fleet_error_names() -> None:
    """CreateFleet's Errors as boto3 gives them (CreateFleetError: LaunchTemplateAndOverrides.Overrides
    with the instance type and the subnet or zone asked, among fields Spillway does not read): the
    override is what the give-back's pool back-offs are made of."""
    response = {"FleetId": "fleet-1", "Instances": [], "Errors": [
        {"LaunchTemplateAndOverrides": {
            "LaunchTemplateSpecification": {"LaunchTemplateId": "lt-1", "Version": "1"},
            "Overrides": {"InstanceType": "p5.48xlarge", "SubnetId": "subnet-0aaaaaaaaaaaaaaaa",
                          "Placement": {"GroupName": "train"}, "WeightedCapacity": 1.0}},
         "Lifecycle": "spot", "ErrorCode": "InsufficientInstanceCapacity", "ErrorMessage": "no capacity"},
        {"ErrorCode": "InsufficientInstanceCapacity"},
    ]}  # fmt: skip
    ec2 = SimpleNamespace(create_fleet=lambda **kw: response)
    clients = SimpleNamespace(regions=("us-east-1",), ec2=lambda region: ec2)
    adapter = AwsAdapter(clients, "prod")  # type: ignore[arg-type]
    request = FleetRequest(
        launch_template={"LaunchTemplateId": "lt-1", "Version": "1"}, count=2, client_token="t"
    )

    named, bare = adapter.create_fleet_instant("us-east-1", request).Errors

    assert named.Lifecycle == "spot" and named.override is not None
    assert (named.override.InstanceType, named.override.SubnetId, named.override.AvailabilityZone) == (
        "p5.48xlarge", "subnet-0aaaaaaaaaaaaaaaa", None,
    )  # fmt: skip
    assert bare.override is None and bare.Lifecycle is None


@pytest.mark.parametrize(
    ("text", "plainly"),
    [
        (o.MISSING_AMI, True),
        (o.SUBNET_FULL, True),
        ("You are not authorized to use launch template: lt-0abc. Launching EC2 instance failed.", True),
        ("Value (eks-node) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name",
         True),
        ("Client.InvalidKMSKey.InvalidState: The KMS key provided is in an incorrect state", True),
        ("InvalidLaunchTemplateId.NotFound: The specified launch template does not exist", True),
        # a launch that failed for a reason EC2 names no fault of the group's: backed off as settings,
        # but nobody has something to fix
        ("Server.InternalError: Internal error on launch", False),
        ("An internal error has occurred. Launching EC2 instance failed.", False),
        ("Server.SpotInstanceTermination: Spot instance termination", False),
        # a shortage or a quota is never a group's settings
        ("We currently do not have sufficient p4d.24xlarge capacity in the Availability Zone you requested "
         "(us-east-1a).", False),
        ("You have requested more vCPU capacity than your current vCPU limit of 32 allows", False),
    ],
)  # fmt: skip
def test_only_a_launch_ec2_refused_plainly_for_its_settings_counts_as_misconfigured(
    text: str, plainly: bool
) -> None:
    """The LaunchesMisconfigured alarm says somebody has to fix the group. A failed launch whose words
    name nothing known still backs the group off as its own (``launch_error_kind``: settings), but an
    internal error or an interrupted Spot instance is no evidence of that, and the alarm would cry
    wolf."""
    assert names_settings(text) is plainly
