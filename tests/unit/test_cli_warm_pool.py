"""`spillway plan --warm-pool GROUP=FILE`: describe-warm-pool output, read as the live path reads it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from examples import EVENTS, EXAMPLE

from spillway.cli import main

WARM_EXAMPLE = EVENTS / "example-warm-pool-ml-gpu-east.json"
TYPE_TAG = "k8s.io/cluster-autoscaler/node-template/label/node.kubernetes.io/instance-type"


def twin_group(tmp_path: Path, name: str = "ml-gpu-east-b", region: str = "us-east-1") -> Path:
    """An empty copy of the example's ml-gpu-east: the same template, so only a warm pool can tip it."""
    doc = json.loads((EVENTS / "example-asgs-us-east-1.json").read_text())
    group = copy.deepcopy(
        next(g for g in doc["AutoScalingGroups"] if g["AutoScalingGroupName"] == "ml-gpu-east")
    )
    group.update(
        AutoScalingGroupName=name,
        AutoScalingGroupARN=f"arn:aws:autoscaling:{region}:123456789012:autoScalingGroup:"
        f"4f969627-ccee-ef76-e69d-89158bf733e5:autoScalingGroupName/{name}",
        AvailabilityZones=[f"{region}a"],
        Instances=[],
        DesiredCapacity=0,
        MaxSize=10,
    )
    group["Tags"].append({"Key": TYPE_TAG, "Value": "p4d.24xlarge"})
    path = tmp_path / f"asgs-{name}-{region}.json"
    path.write_text(json.dumps({"AutoScalingGroups": [group]}))
    return path


def warm_pool(tmp_path: Path, extra: int, state: str = "Warmed:Stopped", name: str = "pool.json") -> Path:
    """The example warm pool (2 warm, 1 leaving) with ``extra`` more instances in ``state``."""
    doc = json.loads(WARM_EXAMPLE.read_text())
    template = doc["Instances"][0]
    for n in range(extra):
        doc["Instances"].append(
            {**template, "InstanceId": f"i-0000000000000{n:04d}", "LifecycleState": state}
        )
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any] | None, str]:
    code = main([*EXAMPLE, *args])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


def ups(plan: dict[str, Any] | None) -> dict[str, tuple[int, int, list[str]]]:
    assert plan is not None
    return {s["group"]: (s["from"], s["to"], s["pods"]) for s in plan["scale_up"]}


SWEEPS = [f"research/sweep-{n}" for n in range(1, 6)]  # five pending pods, one p4d node each


def test_a_warm_pool_that_holds_the_new_nodes_wins_the_tie(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    twin = twin_group(tmp_path)
    code, cold, _ = run(capsys, "--asgs", str(twin))
    assert code == 0 and ups(cold)["ml-gpu-east"][2] == SWEEPS[:3]  # by name: ml-gpu-east first
    code, warm, _ = run(capsys, "--asgs", str(twin), "--warm-pool", f"ml-gpu-east-b={warm_pool(tmp_path, 3)}")
    assert code == 0
    assert set(SWEEPS) <= set(ups(warm)["ml-gpu-east-b"][2])  # 5 warm instances hold all 5 nodes
    assert not set(SWEEPS) & set(ups(warm).get("ml-gpu-east", (0, 0, []))[2])


def test_instances_leaving_the_pool_do_not_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    twin = twin_group(tmp_path)
    leaving = warm_pool(tmp_path, 3, state="Warmed:Terminating")  # 2 warm, 4 leaving: too few
    code, plan, _ = run(capsys, "--asgs", str(twin), "--warm-pool", f"ml-gpu-east-b={leaving}")
    assert code == 0 and ups(plan)["ml-gpu-east"][2] == SWEEPS[:3]


def test_the_example_warm_pool_reads(capsys: pytest.CaptureFixture[str]) -> None:
    code, plan, err = run(capsys, "--warm-pool", f"ml-gpu-east={WARM_EXAMPLE}")
    assert (code, err) == (0, "") and ups(plan)["ml-gpu-east"][2] == SWEEPS[:3]


def test_a_name_in_two_regions_needs_the_groups_arn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    east, west = twin_group(tmp_path), twin_group(tmp_path, region="us-west-2")
    pool = warm_pool(tmp_path, 3)
    code, _, err = run(
        capsys, "--asgs", str(east), "--asgs", str(west), "--warm-pool", f"ml-gpu-east-b={pool}"
    )
    assert code == 2
    assert (
        err == "spillway plan: --warm-pool ml-gpu-east-b: 2 groups of --asgs have that name: give its ARN\n"
    )
    arn = json.loads(east.read_text())["AutoScalingGroups"][0]["AutoScalingGroupARN"]
    code, plan, _ = run(capsys, "--asgs", str(east), "--asgs", str(west), "--warm-pool", f"{arn}={pool}")
    assert code == 0 and set(SWEEPS) <= set(ups(plan)["ml-gpu-east-b"][2])


BAD_INSTANCE = {"InstanceId": "i-1"}  # no LifecycleState


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ([], "top level"),
        ({"Instances": {}}, "Instances"),
        ({"Instances": [{"InstanceId": "i-0", "LifecycleState": "Warmed:Stopped"}, BAD_INSTANCE]}, "Instances[1].LifecycleState"),
        ({"WarmPoolConfiguration": {"MinSize": "two"}, "Instances": []}, "WarmPoolConfiguration.MinSize"),
    ],
)  # fmt: skip
def test_bad_warm_pool_output_exits_2_naming_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: Any, field: str
) -> None:
    path = tmp_path / "pool.json"
    path.write_text(json.dumps(doc))
    code, _, err = run(capsys, "--warm-pool", f"ml-gpu-east={path}")
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith(f"spillway plan: {path}: {field}: ")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("ml-gpu-east", "--warm-pool: 'ml-gpu-east' is not GROUP=FILE"),
        ("nope=pool.json", "--warm-pool nope: names no group of --asgs"),
    ],
)
def test_a_bad_warm_pool_option_exits_2_naming_it(
    capsys: pytest.CaptureFixture[str], spec: str, message: str
) -> None:
    code, _, err = run(capsys, "--warm-pool", spec)
    assert code == 2 and err.startswith(f"spillway plan: {message}")


def test_a_group_given_twice_and_a_missing_file_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = f"ml-gpu-east={WARM_EXAMPLE}"
    code, _, err = run(capsys, "--warm-pool", spec, "--warm-pool", spec)
    assert code == 2 and err == "spillway plan: --warm-pool ml-gpu-east: given twice\n"
    missing = tmp_path / "missing.json"
    code, _, err = run(capsys, "--warm-pool", f"ml-gpu-east={missing}")
    assert code == 2 and err.startswith(f"spillway plan: {missing}: ")
