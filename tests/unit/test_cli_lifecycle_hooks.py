"""`spillway plan --lifecycle-hooks GROUP=FILE`: describe-lifecycle-hooks output, read as observe reads
DescribeLifecycleHooks, so that the offline plan flags AZRebalance where the deployed one does."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from examples import EVENTS, EXAMPLE

from spillway.adapters.aws import AwsAdapter
from spillway.cli import main
from spillway.model.aws import AutoScalingGroup
from spillway.model.drain import LifecycleHook

NOTE = "AZRebalance is not suspended on the group"
TERMINATING = "autoscaling:EC2_INSTANCE_TERMINATING"


def two_zones(tmp_path: Path) -> Path:
    """The example's us-east-1 groups, ml-cpu-east (whose idle node the example drains) over two zones."""
    doc = json.loads((EVENTS / "example-asgs-us-east-1.json").read_text())
    for group in doc["AutoScalingGroups"]:
        if group["AutoScalingGroupName"] == "ml-cpu-east":
            group["AvailabilityZones"] = ["us-east-1a", "us-east-1b"]
    path = tmp_path / "asgs-east.json"
    path.write_text(json.dumps(doc))
    return path


def hooks(tmp_path: Path, *named: tuple[str, str]) -> Path:
    path = tmp_path / "hooks.json"
    path.write_text(json.dumps({"LifecycleHooks": [
        {"LifecycleHookName": name, "AutoScalingGroupName": "ml-cpu-east", "LifecycleTransition": transition,
         "HeartbeatTimeout": 300, "GlobalTimeout": 30000, "DefaultResult": "CONTINUE"}
        for name, transition in named
    ]}))  # fmt: skip
    return path


def run(capsys: pytest.CaptureFixture[str], asgs: Path, *args: str) -> tuple[int, dict[str, Any] | None, str]:
    argv = copy.copy(EXAMPLE)
    argv[argv.index(str(EVENTS / "example-asgs-us-east-1.json"))] = str(asgs)
    code = main([*argv, *args])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


def drain_reason(plan: dict[str, Any] | None) -> str:
    assert plan is not None
    [drain] = [d for d in plan["drain"] if d["group"] == "ml-cpu-east"]
    return str(drain["reason"])


def test_a_group_with_spillways_terminate_hook_is_not_flagged_for_az_rebalance_offline_either(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """observe reads a flagged group's terminate hooks (DescribeLifecycleHooks) and does not flag one
    with Spillway's hook, which drains a rebalancing's termination; spillway plan read none, so its
    drains of such a group said Auto Scaling might terminate an undrained node, though the deployed
    plan did not."""
    asgs = two_zones(tmp_path)
    code, flagged, _ = run(capsys, asgs)
    assert code == 0 and NOTE in drain_reason(flagged)

    ours = hooks(tmp_path, ("drain-before-terminate", TERMINATING))
    code, plan, _ = run(capsys, asgs, "--lifecycle-hooks", f"ml-cpu-east={ours}")
    assert code == 0 and NOTE not in drain_reason(plan)


@pytest.mark.parametrize(
    ("named", "names", "flagged"),
    [
        ((("log-shipper", TERMINATING),), None, True),  # another team's hook: not Spillway's
        ((("drain-before-terminate", "autoscaling:EC2_INSTANCE_LAUNCHING"),), None, True),
        ((("k8s-drain", TERMINATING),), "drain-before-terminate,k8s-drain", False),
    ],
)
def test_only_spillways_terminate_hooks_count_as_observe_counts_them(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    named: tuple[tuple[str, str], ...],
    names: str | None,
    flagged: bool,
) -> None:
    path = hooks(tmp_path, *named)
    extra = ["--lifecycle-hook-names", names] if names else []
    code, plan, _ = run(capsys, two_zones(tmp_path), "--lifecycle-hooks", f"ml-cpu-east={path}", *extra)
    assert code == 0 and (NOTE in drain_reason(plan)) is flagged

    # observe, with the same hooks and names, gives the group the same DrainHooks
    owned = tuple((names or "drain-before-terminate").split(","))
    adapter = AwsAdapter.__new__(AwsAdapter)
    adapter.lifecycle_hooks = owned
    adapter.describe_lifecycle_hooks = lambda region, group: [  # type: ignore[method-assign]
        LifecycleHook(name, transition, 300, 30000, "CONTINUE") for name, transition in named
    ]
    doc = json.loads(two_zones(tmp_path).read_text())
    group = AutoScalingGroup.model_validate(
        next(g for g in doc["AutoScalingGroups"] if g["AutoScalingGroupName"] == "ml-cpu-east")
    )
    [observed], _ = adapter._with_drain_hooks("us-east-1", [group])
    assert bool(observed.DrainHooks) is not flagged


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--lifecycle-hooks", "nope=x.json"], "--lifecycle-hooks nope"),
        (["--lifecycle-hooks", "ml-cpu-east"], "--lifecycle-hooks"),
        (["--lifecycle-hook-names", "a b"], "--lifecycle-hook-names"),
    ],
)
def test_a_lifecycle_hooks_option_that_cannot_be_read_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], field: str
) -> None:
    code, _, err = run(capsys, two_zones(tmp_path), *args)
    assert code == 2 and field in err


def test_a_describe_lifecycle_hooks_output_without_a_hooks_name_exits_2_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"LifecycleHooks": [{"LifecycleTransition": TERMINATING}]}))
    code, _, err = run(capsys, two_zones(tmp_path), "--lifecycle-hooks", f"ml-cpu-east={path}")
    assert code == 2 and "LifecycleHooks[0].LifecycleHookName" in err and "bad.json" in err
