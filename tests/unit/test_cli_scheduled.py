"""`spillway plan --scheduled-actions`: describe-scheduled-actions output holds scale-down at a floor."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from examples import EXAMPLE

from spillway.cli import main


def action(region: str = "us-east-1", **kw: Any) -> dict[str, Any]:
    return {
        "AutoScalingGroupName": "ml-cpu-east",
        "ScheduledActionName": "business-hours",
        "ScheduledActionARN": f"arn:aws:autoscaling:{region}:123456789012:scheduledUpdateGroupAction:"
        "0a1b2c3d-0000-0000-0000-000000000000:autoScalingGroupName/ml-cpu-east:scheduledActionName/business-hours",
        "Recurrence": "0 8 * * 1-5",
        "TimeZone": "Europe/Berlin",
        "MinSize": 3,
        "DesiredCapacity": 3,
        **kw,
    }


def plan_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], *actions: dict[str, Any]
) -> tuple[int, str, str]:
    path = tmp_path / "scheduled.json"
    path.write_text(json.dumps({"ScheduledUpdateGroupActions": list(actions)}))
    code = main([*EXAMPLE, "--scheduled-actions", str(path)])
    out, err = capsys.readouterr()
    return code, out, err


def test_an_action_running_within_the_idle_threshold_keeps_the_node_the_plan_would_drain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the example plans at 10:00 UTC (11:00 Berlin), scale_down_idle_minutes 10: 11:05 Berlin is within
    code, out, _ = plan_with(tmp_path, capsys, action(Recurrence="5 11 * * 1-5"))
    assert code == 0
    plan = json.loads(out)
    assert plan["drain"] == []
    assert [k["code"] for k in plan["kept"] if k["code"] == "scheduled-min"] == ["scheduled-min"]
    (floor,) = plan["floors"]
    assert (floor["group"], floor["min_size"]) == ("ml-cpu-east", 3)
    assert (
        "business-hours (cron '5 11 * * 1-5' Europe/Berlin) runs at 2026-11-02T10:05:00Z" in floor["reason"]
    )


def test_an_action_that_ran_this_morning_holds_nothing_the_groups_min_size_does_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """08:00 Berlin ran two hours before the example's 10:00 UTC: the MinSize it set is what
    describe-auto-scaling-groups shows (1 in the example, lowered since), and that is what holds."""
    code, out, _ = plan_with(tmp_path, capsys, action())
    assert code == 0 and len(json.loads(out)["drain"]) == 1 and "floors" not in json.loads(out)


def test_an_action_of_another_regions_group_of_that_name_does_not_apply(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = plan_with(tmp_path, capsys, action(region="us-west-2"))
    assert code == 0 and len(json.loads(out)["drain"]) == 1 and "floors" not in json.loads(out)


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"Recurrence": "0 25 * * *"}, "ScheduledUpdateGroupActions[0].Recurrence"),
        ({"TimeZone": "Europe/Atlantis"}, "ScheduledUpdateGroupActions[0].TimeZone"),
        ({"TimeZone": ""}, "ScheduledUpdateGroupActions[0].TimeZone"),  # AWS: at least 1 character
        ({"MinSize": -1}, "ScheduledUpdateGroupActions[0].MinSize"),
    ],
)
def test_a_bad_action_is_refused_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: dict[str, Any], field: str
) -> None:
    code, out, err = plan_with(tmp_path, capsys, action(**bad))
    assert code == 2 and out == "" and field in err and len(err.strip().splitlines()) == 1


def test_an_action_lowering_the_group_within_the_window_is_listed_with_the_pods_at_risk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """DesiredCapacity 0 at 11:05 Berlin (five minutes after the example's 10:00 UTC) on ml-cpu-east,
    whose idle node the plan drains anyway and whose two other nodes run replicas of no kind known to
    tolerate a move: the plan lists the action, the drain, and the six pods Auto Scaling may kill."""
    night = action(ScheduledActionName="night", Recurrence="5 11 * * 1-5", MinSize=0, DesiredCapacity=0)
    code, out, _ = plan_with(tmp_path, capsys, night)
    assert code == 0
    plan = json.loads(out)
    (shrink,) = plan["shrinks"]
    assert (shrink["group"], shrink["size"]) == ("ml-cpu-east", 0)
    assert shrink["drains"] == [d["node"] for d in plan["drain"]] and len(shrink["drains"]) == 1
    assert len(shrink["at_risk"]) == 6 and all(p.startswith("serving/api-") for p in shrink["at_risk"])
    assert "2 more of its instances go undrained when it runs" in shrink["reason"]


def sized(**sizes: int) -> dict[str, Any]:
    """:func:`action` at 11:05 Berlin with only the sizes given (describe-scheduled-actions leaves out
    a size the action does not set)."""
    base = {
        k: v for k, v in action(Recurrence="5 11 * * 1-5").items() if k not in ("MinSize", "DesiredCapacity")
    }
    return base | sizes


def test_an_action_whose_min_size_is_above_the_groups_max_size_holds_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Auto Scaling applies a scheduled action's sizes as UpdateAutoScalingGroup does, within the
    group's MaxSize when the action names none ("Set scaling limits"), and refuses a MinSize above it
    (ValidationError "Max bound ... must be greater than or equal to min bound"): the run changes
    nothing. Spillway took a MinSize of 12 on a group of MaxSize 10 as a floor of 12, above what the
    group may hold: it kept every idle node of the group and reported a floor that never comes. Now it
    sets none; with a MaxSize of its own as high, it holds."""
    code, out, _ = plan_with(tmp_path, capsys, sized(MinSize=12))
    assert code == 0
    plan = json.loads(out)
    assert "floors" not in plan and "scheduled-min" not in {k["code"] for k in plan["kept"]}
    assert len(plan["drain"]) == 1
    # a DesiredCapacity above it is refused the same way
    _, out, _ = plan_with(tmp_path, capsys, sized(DesiredCapacity=12))
    assert "floors" not in json.loads(out) and len(json.loads(out)["drain"]) == 1
    # the action raising MaxSize with it runs, and its MinSize holds
    _, out, _ = plan_with(tmp_path, capsys, sized(MinSize=12, MaxSize=12))
    plan = json.loads(out)
    assert plan["drain"] == []
    assert [(f["group"], f["min_size"]) for f in plan["floors"]] == [("ml-cpu-east", 12)]
