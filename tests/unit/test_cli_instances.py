"""`spillway plan --instances FILE`: `aws ec2 describe-instances` output, read as observe reads the gang
attempts' instances, so that an offline plan lists a fleet gang's orphans as the plan Lambda would.

Before, the offline plan had no EC2 input: its snapshot held no fleet instances and it never listed a
``gang_orphans`` entry, whatever was left running outside the groups.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from examples import EXAMPLE

from spillway.cli import main
from spillway.model.fleet import TAG_ASG, TAG_ATTEMPT, TAG_CLUSTER, TAG_GANG

# the example plans at 2026-11-02T10:00:00Z for cluster "ml" (events/example-config.yaml)
OLD = "2026-11-02T08:30:00+00:00"  # 90 minutes before: past gang_orphan_minutes (60)
YOUNG = "2026-11-02T09:45:00+00:00"  # 15 minutes before: its attempt may still attach it
ORPHAN = "i-0123456789abcdef0"
WEST_ORPHAN = "i-0123456789abcdef5"


def instance(iid: str, zone: str = "us-east-1a", *, launched: str = OLD, state: str = "running",
             tags: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """One ``Instances`` entry as ``aws ec2 describe-instances`` prints it (CLI v2, JSON)."""
    if tags is None:
        tags = {TAG_ATTEMPT: "spillway-7c1e", TAG_GANG: "research/train-llm", TAG_CLUSTER: "ml"}
    return {
        "AmiLaunchIndex": 0,
        "ImageId": "ami-0abcdef1234567890",
        "InstanceId": iid,
        "InstanceType": "p4d.24xlarge",
        "LaunchTime": launched,
        "Monitoring": {"State": "disabled"},
        "Placement": {"AvailabilityZone": zone, "GroupName": "", "Tenancy": "default"},
        "PrivateDnsName": f"ip-10-0-1-{int(iid[-2:], 16)}.ec2.internal",
        "PrivateIpAddress": f"10.0.1.{int(iid[-2:], 16)}",
        "State": {"Code": 16 if state == "running" else 80, "Name": state},
        "SubnetId": "subnet-0abc1234def567890",
        "VpcId": "vpc-0abc1234def567890",
        "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
    }


def describe_instances(*instances: dict[str, Any]) -> dict[str, Any]:
    return {
        "Reservations": [
            {
                "Groups": [],
                "Instances": [i],
                "OwnerId": "123456789012",
                "ReservationId": f"r-{i['InstanceId'][2:]}",
            }
            for i in instances
        ]
    }


def write(tmp_path: Path, doc: Any, name: str = "instances.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any] | None, str]:
    code = main([*EXAMPLE, *args])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


def the_world(tmp_path: Path) -> Path:
    """One orphan per region, among instances observe's read would not return or the sweep leaves."""
    tagged = {TAG_ATTEMPT: "spillway-7c1e", TAG_GANG: "research/train-llm", TAG_CLUSTER: "ml"}
    doc = describe_instances(
        instance(ORPHAN),
        instance("i-0123456789abcdef1", tags={**tagged, TAG_CLUSTER: "staging"}),  # another cluster's
        instance("i-0123456789abcdef2", tags={TAG_CLUSTER: "ml"}),  # no gang attempt
        instance("i-0123456789abcdef3", state="terminated"),  # costs nothing any more
        instance("i-0123456789abcdef4", tags={**tagged, TAG_ASG: "ml-gpu-east"}),  # attached: a group's
        instance(WEST_ORPHAN, "us-west-2-lax-1a"),  # a Local Zone: its region is us-west-2
        instance("i-0123456789abcdef6", launched=YOUNG),  # its attempt may still attach it
    )
    return write(tmp_path, doc)


def test_an_offline_plan_lists_the_orphans_of_the_instances_it_is_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, plan, err = run(capsys, "--instances", str(the_world(tmp_path)))

    assert code == 0, err
    assert plan is not None
    orphans = {o["instance_id"]: o for o in plan["gang_orphans"]}
    assert sorted(orphans) == [ORPHAN, WEST_ORPHAN]
    east = orphans[ORPHAN]
    assert (east["region"], east["gang"], east["attempt"], east["terminate"], east["code"]) == (
        "us-east-1",
        "research/train-llm",
        "spillway-7c1e",
        True,
        "gang-orphan",
    )
    assert orphans[WEST_ORPHAN]["region"] == "us-west-2"


def test_without_instances_an_offline_plan_lists_no_orphan(capsys: pytest.CaptureFixture[str]) -> None:
    code, plan, err = run(capsys)

    assert code == 0, err
    assert plan is not None and "gang_orphans" not in plan


def test_instances_of_several_files_are_read_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    east = write(tmp_path, describe_instances(instance(ORPHAN)), "east.json")
    west = write(tmp_path, describe_instances(instance(WEST_ORPHAN, "us-west-2b")), "west.json")

    code, plan, err = run(capsys, "--instances", str(east), "--instances", str(west))

    assert code == 0, err
    assert plan is not None
    assert [(o["instance_id"], o["region"]) for o in plan["gang_orphans"]] == [
        (ORPHAN, "us-east-1"),
        (WEST_ORPHAN, "us-west-2"),
    ]


def broken(field: str) -> dict[str, Any]:
    doc = describe_instances(instance(ORPHAN))
    raw = doc["Reservations"][0]["Instances"][0]
    if field == "LaunchTime":
        raw["LaunchTime"] = "yesterday"
    elif field == "Placement.AvailabilityZone":
        del raw["Placement"]["AvailabilityZone"]
    elif field == "InstanceId":
        raw["InstanceId"] = 7
    elif field == "Tags":
        raw["Tags"] = {"Key": TAG_CLUSTER, "Value": "ml"}
    return doc


@pytest.mark.parametrize("field", ["LaunchTime", "Placement.AvailabilityZone", "InstanceId", "Tags"])
def test_a_malformed_instance_exits_2_naming_the_file_and_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str
) -> None:
    path = write(tmp_path, broken(field))

    code, _, err = run(capsys, "--instances", str(path))

    assert code == 2
    assert err.startswith(f"spillway plan: {path}: Reservations[0].Instances[0].{field}: "), err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"AutoScalingGroups": []}, "Reservations"),  # another command's output
        ({"Reservations": [{"Instances": {}}]}, "Reservations[0].Instances"),
        ([], "top level"),
    ],
)
def test_a_file_that_is_no_describe_instances_output_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: Any, field: str
) -> None:
    path = write(tmp_path, doc)

    code, _, err = run(capsys, "--instances", str(path))

    assert code == 2
    assert err.startswith(f"spillway plan: {path}: {field}: "), err


def test_a_file_that_is_not_json_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "{not json")

    code, _, err = run(capsys, "--instances", str(path))

    assert code == 2 and err.startswith(f"spillway plan: {path}: not valid JSON"), err


def test_an_instance_given_twice_exits_2_naming_both_places(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = write(tmp_path, describe_instances(instance(ORPHAN)), "a.json")
    second = write(tmp_path, describe_instances(instance(ORPHAN)), "b.json")

    code, _, err = run(capsys, "--instances", str(first), "--instances", str(second))

    assert code == 2
    assert err.startswith(f"spillway plan: {second}: Reservations[0].Instances[0].InstanceId: "), err
    assert f"{first} Reservations[0].Instances[0]" in err


def test_without_a_cluster_name_the_instances_cannot_be_told_apart_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """observe keeps only the instances tagged with its own cluster; an offline plan that does not know
    the cluster's name would list another cluster's instances as this one's orphans."""
    config = tmp_path / "config.yaml"
    config.write_text("regions: [us-east-1, us-west-2]\n")
    args = copy.copy(EXAMPLE)
    args[args.index("--config") + 1] = str(config)

    code = main([*args, "--instances", str(the_world(tmp_path))])
    _, err = capsys.readouterr()

    assert code == 2
    assert err.startswith("spillway plan: --instances: "), err
    assert "cluster" in err
