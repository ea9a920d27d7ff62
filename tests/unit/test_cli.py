"""`spillway plan`: the published contract, and one clear line for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spillway.cli import main
from spillway.local import objects as o

EVENTS = Path(__file__).resolve().parents[2] / "events"
EXAMPLE = [
    "plan",
    "--cluster", str(EVENTS / "example-cluster.json"),
    "--asgs", str(EVENTS / "example-asgs-us-east-1.json"),
    "--asgs", str(EVENTS / "example-asgs-us-west-2.json"),
    "--activities", str(EVENTS / "example-activities.json"),
    "--config", str(EVENTS / "example-config.yaml"),
    "--state", str(EVENTS / "example-state.json"),
    "--now", "2026-11-02T10:00:00Z",
]  # fmt: skip


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_example_plan_follows_the_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(EXAMPLE, capsys)
    assert code == 0
    plan = json.loads(out)
    assert list(plan) == ["scale_up", "uncordon", "drain", "pending", "kept"]
    for entry in plan["scale_up"]:
        assert set(entry) == {"group", "region", "from", "to", "pods", "reason"}
    assert {s["region"] for s in plan["scale_up"]} == {"us-east-1", "us-west-2"}
    assert all(set(d) == {"node", "instance_id", "group", "reason"} for d in plan["drain"])
    assert all(e["reason"] for key in plan for e in plan[key])


def test_state_out_writes_the_new_state(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "state.json"
    code, _, _ = run([*EXAMPLE, "--state-out", str(out_file)], capsys)
    assert code == 0
    state = json.loads(out_file.read_text())
    assert set(state) == {"nodes", "groups"}
    assert all("idle_since" in v for v in state["nodes"].values())


def write(tmp_path: Path, name: str, content: str | dict[str, object]) -> str:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def replace_arg(flag: str, value: str) -> list[str]:
    args = list(EXAMPLE)
    args[args.index(flag) + 1] = value
    return args


@pytest.mark.parametrize(
    ("flag", "name", "content", "expected"),
    [
        ("--cluster", "c.json", "{not json", "c.json: not valid JSON"),
        ("--cluster", "c.json", {"kind": "List"}, "c.json: items: missing or not a list"),
        (
            "--cluster",
            "c.json",
            o.kube_list([o.pod("p", cpu="two")]),
            "c.json: items[0].spec.containers.0.resources.requests.cpu",
        ),
        ("--asgs", "a.json", {"Groups": []}, "a.json: AutoScalingGroups: missing or not a list"),
        (
            "--asgs",
            "a.json",
            {"AutoScalingGroups": [{k: v for k, v in o.asg("g").items() if k != "MaxSize"}]},
            "a.json: AutoScalingGroups[0].MaxSize: Field required",
        ),
        (
            "--asgs",
            "a.json",
            {"AutoScalingGroups": [{**o.asg("g"), "MinSize": -1}]},
            "a.json: AutoScalingGroups[0].MinSize",
        ),
        (
            "--asgs",
            "a.json",
            {"AutoScalingGroups": [{**o.asg("g"), "AutoScalingGroupARN": "arn:aws:ec2:::x"}]},
            "a.json: AutoScalingGroups[0].AutoScalingGroupARN",
        ),
        ("--config", "c.yaml", "clusterr: ml\n", "c.yaml: clusterr: unknown config key"),
        ("--config", "c.yaml", "scale_down_idle_minutes: -5\n", "c.yaml: scale_down_idle_minutes"),
        ("--config", "c.yaml", "node_reserve: {cpu: lots}\n", "c.yaml: node_reserve.cpu"),
        ("--state", "s.json", {"nodes": {"n": {"idle_since": "yesterday"}}}, "s.json: nodes.n.idle_since"),
        ("--activities", "x.json", {"Activities": [{"ActivityId": "a"}]}, "x.json: Activities[0]."),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_file_and_field(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    flag: str,
    name: str,
    content: str | dict[str, object],
    expected: str,
) -> None:
    code, out, err = run(replace_arg(flag, write(tmp_path, name, content)), capsys)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert expected in err
    assert "Traceback" not in err


def test_missing_file_and_bad_now(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(replace_arg("--cluster", "/nonexistent/c.json"), capsys)
    assert code == 2 and "/nonexistent/c.json: No such file" in err
    code, _, err = run(replace_arg("--now", "tuesday"), capsys)
    assert code == 2 and "--now" in err


def test_the_installed_command_runs_as_a_subprocess() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "spillway.cli", *EXAMPLE],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["scale_up"]
