"""`spillway plan --zones FILE`: `aws ec2 describe-availability-zones` output, each region's zone name ->
zone id given to its groups as observe gives them what DescribeAvailabilityZones answers, so that an
offline plan under a CapacityQuota on ``topology.k8s.aws/zone-id`` is the plan Lambda's.

Before, the offline plan could not be given the ids: a group's new nodes in a zone where no node shows its
id were counted under no quota on that id, and the plan launched more than the Lambda would.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from examples import EXAMPLE
from plan_world import NOW, World, scale_up

from spillway.cli import main
from spillway.local import objects as o
from spillway.model.nodegroup import with_zone_ids
from spillway.planner import plan

ZONE_ID = "topology.k8s.aws/zone-id"
WHOLE = {"cpu": "5", "memory": "4Gi"}  # one pod per m5.2xlarge
EAST = {"us-east-1a": "use1-az4", "us-east-1b": "use1-az1", "us-east-1c": "use1-az2"}
WEST = {"us-west-2a": "usw2-az2", "us-west-2b": "usw2-az1"}


def zone(name: str, zone_id: str, region: str) -> dict[str, Any]:
    """One ``AvailabilityZones`` entry as ``aws ec2 describe-availability-zones`` prints it (CLI v2)."""
    return {
        "OptInStatus": "opt-in-not-required",
        "Messages": [],
        "RegionName": region,
        "ZoneName": name,
        "ZoneId": zone_id,
        "GroupName": region,
        "NetworkBorderGroup": region,
        "ZoneType": "availability-zone",
        "State": "available",
    }


def describe_zones(region: str, ids: dict[str, str]) -> dict[str, Any]:
    return {"AvailabilityZones": [zone(name, zone_id, region) for name, zone_id in ids.items()]}


def write(tmp_path: Path, name: str, doc: Any) -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any] | None, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


def quota_world() -> World:
    """A node in us-east-1a showing its id, a group over us-east-1b where no node has registered, a
    CapacityQuota of one node on us-east-1b's id (use1-az1), and three pods that each need a new node."""
    w = World()
    [node] = w.group("east-a", "m5.2xlarge", max_size=1, nodes=1, zones=["us-east-1a"])
    w.node(node)["metadata"]["labels"][ZONE_ID] = "use1-az4"
    w.group("east-b", "m5.2xlarge", max_size=10, zones=["us-east-1b"])
    w.group("west", "m5.2xlarge", region="us-west-2", max_size=10, zones=["us-west-2a"])
    w.capacity_quota("az1-cap", {"nodes": "1"}, match_labels={ZONE_ID: "use1-az1"})
    w.pods("p", 3, **WHOLE)
    return w


def world_args(w: World, tmp_path: Path) -> list[str]:
    """``spillway plan`` of ``w``: its List, one describe-auto-scaling-groups output, its config."""
    config = {"cluster": w.cluster, "regions": list(w.regions)}
    return [
        "plan",
        "--cluster", write(tmp_path, "cluster.json", o.kube_list(w.items)),
        "--asgs", write(tmp_path, "asgs.json", o.asgs_output(list(w.groups.values()))),
        "--config", write(tmp_path, "config.json", config),
        "--now", NOW.isoformat(),
    ]  # fmt: skip


def planned_with_ids(w: World, ids: dict[str, dict[str, str]]) -> dict[str, Any]:
    """What the planner gives ``w`` when its groups carry the ids (``ids``: region -> name -> id), as the
    observe Lambda's snapshot has them; as JSON, as `spillway plan` prints it."""
    snapshot, groups, config, state = w.parsed()
    result = plan(snapshot, with_zone_ids(groups, ids), config, state, NOW)
    printed: dict[str, Any] = json.loads(json.dumps(result.to_dict()))
    return printed


def ups(result: dict[str, Any] | None) -> dict[str, tuple[int, int]]:
    assert result is not None
    return {s["group"]: (s["from"], s["to"]) for s in result["scale_up"]}


def test_an_offline_plan_under_a_zone_id_quota_is_the_lambdas_once_given_the_zones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No node shows which id us-east-1b is: without EC2's answer its new nodes count under no quota on
    an id, and two go into a quota with room for one. With `--zones` the plan is the planner's with the
    groups carrying the ids, as observe stores them: one launch there, the pod the quota holds back
    spilling over to us-west-2."""
    w = quota_world()
    args = world_args(w, tmp_path)
    east = write(tmp_path, "zones-east.json", describe_zones("us-east-1", EAST))
    west = write(tmp_path, "zones-west.json", describe_zones("us-west-2", WEST))
    lambdas = planned_with_ids(w, {"us-east-1": EAST, "us-west-2": WEST})
    assert ups(lambdas) == {"east-b": (0, 1), "west": (0, 1)}
    assert scale_up(w.plan())["east-b"][:2] == (0, 2)  # the planner without the ids

    code, without, _ = run(args, capsys)
    assert code == 0 and without != lambdas and ups(without) == {"east-b": (0, 2)}

    code, offline, err = run([*args, "--zones", east, "--zones", west], capsys)

    assert code == 0, err
    assert offline == lambdas


def test_a_regions_zones_go_to_that_regions_groups_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """us-west-2's answer names no zone of us-east-1: its groups keep no id, and the plan is the one
    without, as observe's when us-east-1's call failed. A zone name means nothing outside its region."""
    w = quota_world()
    args = world_args(w, tmp_path)
    misplaced = {"us-east-1b": "use1-az1", **WEST}  # named as us-west-2's: not us-east-1's zone
    west = write(tmp_path, "zones-west.json", describe_zones("us-west-2", misplaced))
    code, without, _ = run(args, capsys)

    code, offline, err = run([*args, "--zones", west], capsys)

    assert code == 0, err
    assert offline == without == planned_with_ids(w, {"us-west-2": misplaced})


# --- bad input: exit 2, one line naming the file and the field -----------------------------------------


def zones_doc() -> dict[str, Any]:
    return describe_zones("us-east-1", EAST)


def missing(field: str) -> dict[str, Any]:
    doc = zones_doc()
    del doc["AvailabilityZones"][1][field]
    return doc


@pytest.mark.parametrize("field", ["ZoneName", "ZoneId", "RegionName"])
def test_a_zone_without_its_name_id_or_region_exits_2_naming_the_file_and_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str
) -> None:
    path = write(tmp_path, "zones.json", missing(field))

    code, _, err = run([*EXAMPLE, "--zones", path], capsys)

    assert code == 2
    assert err.startswith(f"spillway plan: {path}: AvailabilityZones[1].{field}: "), err
    assert len(err.strip().splitlines()) == 1


def test_a_zone_whose_field_is_not_a_string_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = zones_doc()
    doc["AvailabilityZones"][2]["ZoneId"] = 7
    path = write(tmp_path, "zones.json", doc)

    code, _, err = run([*EXAMPLE, "--zones", path], capsys)

    assert code == 2 and err.startswith(f"spillway plan: {path}: AvailabilityZones[2].ZoneId: "), err


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"Reservations": []}, "AvailabilityZones"),  # another command's output
        ({"AvailabilityZones": {"ZoneName": "us-east-1a"}}, "AvailabilityZones"),
        ({"AvailabilityZones": ["us-east-1a"]}, "AvailabilityZones[0]"),
        ([], "top level"),
    ],
)
def test_a_file_that_is_no_describe_availability_zones_output_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: Any, field: str
) -> None:
    path = write(tmp_path, "zones.json", doc)

    code, _, err = run([*EXAMPLE, "--zones", path], capsys)

    assert code == 2
    assert err.startswith(f"spillway plan: {path}: {field}: "), err


def test_a_file_that_is_not_json_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "zones.json", "{not json")

    code, _, err = run([*EXAMPLE, "--zones", path], capsys)

    assert code == 2 and err.startswith(f"spillway plan: {path}: not valid JSON"), err


def test_a_region_given_twice_exits_2_naming_both_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = write(tmp_path, "a.json", zones_doc())
    second = write(tmp_path, "b.json", describe_zones("us-east-1", {"us-east-1d": "use1-az3"}))

    code, _, err = run([*EXAMPLE, "--zones", first, "--zones", second], capsys)

    assert code == 2
    assert err.startswith(f"spillway plan: {second}: AvailabilityZones[0].RegionName: "), err
    assert "us-east-1" in err and first in err
    assert len(err.strip().splitlines()) == 1


def test_a_zone_listed_twice_in_a_file_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = zones_doc()
    doc["AvailabilityZones"].append(zone("us-east-1a", "use1-az6", "us-east-1"))
    path = write(tmp_path, "zones.json", doc)

    code, _, err = run([*EXAMPLE, "--zones", path], capsys)

    assert code == 2
    assert err.startswith(f"spillway plan: {path}: AvailabilityZones[3].ZoneName: "), err
    assert "AvailabilityZones[0]" in err


def test_the_example_plans_as_before_with_its_regions_zones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The example has no quota on a zone id: its zones' ids change nothing in its plan."""
    code, before, _ = run(EXAMPLE, capsys)
    east = write(tmp_path, "east.json", zones_doc())
    west = write(tmp_path, "west.json", describe_zones("us-west-2", WEST))

    code, after, err = run([*EXAMPLE, "--zones", east, "--zones", west], capsys)

    assert code == 0, err
    assert after == before


def test_the_same_zones_file_given_twice_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Its regions would be given twice, as two files giving one region are refused (and as --asgs
    refuses one file named twice)."""
    path = write(tmp_path, "zones.json", zones_doc())

    code, _, err = run([*EXAMPLE, "--zones", path, "--zones", path], capsys)

    assert code == 2
    assert "the same file given twice" in err and "zones.json" in err
