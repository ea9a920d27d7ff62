"""A scale-down part that starts draining after its plan's claim on its nodes lapsed drains nothing.

A plan too large for one execution input runs as parts, each waiting for the part before it (``after``).
The planner leaves a node it drained alone for ``drain_claim_minutes`` unless the drain has cordoned it;
a part still waiting by then would drain nodes later plans judge again, on a premise (a consolidation's
pods fit elsewhere) that old. The part carries ``claim_until`` (act/planning.py) and, once the part before
it ended, the drain function's ``check_claim`` step tells whether it lapsed (moto's Choice cannot compare
``$$.State.EnteredTime``: it reads only whole-second ``Z`` timestamps)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spillway.act.drain import RAISES, run_action
from spillway.act.lapse import check_claim
from spillway.errors import InvalidDrainRequest

ROOT = Path(__file__).resolve().parents[2]
CLAIM = {"cluster": "ml", "plan_id": "20261102T100000Z-abc", "planned_at": "2026-11-02T10:00:20Z",
         "claim_minutes": 20, "claim_until": "2026-11-02T10:20:20Z", "nodes": 3}  # fmt: skip


def test_a_part_that_starts_before_the_claim_lapses_drains() -> None:
    out = check_claim({**CLAIM, "now": "2026-11-02T10:20:19.999Z"})  # AWS's EnteredTime: milliseconds
    assert out["lapsed"] is False


@pytest.mark.parametrize("now", ["2026-11-02T10:20:20Z", "2026-11-02T10:20:20.001Z",
                                 "2026-11-02T12:00:00.123456+00:00"])  # fmt: skip  # moto's EnteredTime
def test_a_part_that_starts_once_the_claim_lapsed_drains_nothing_and_says_why(now: str) -> None:
    """Lapsed at claim_until exactly, as the planner's claimed_at counts it (``now - claimed >= claim``)."""
    out = check_claim({**CLAIM, "now": now})
    assert out["lapsed"] is True
    reason = out["reason"]
    for named in ("2026-11-02T10:00:20Z", "drain_claim_minutes (20)", "2026-11-02T10:20:20Z",
                  "none of its 3 node(s)", "next plan"):  # fmt: skip
        assert named in reason, reason


@pytest.mark.parametrize(
    ("field", "value"),
    [("claim_until", "soon"), ("claim_until", None), ("now", "2026-11-02"), ("now", 17),
     ("claim_minutes", "twenty"), ("claim_until", "2026-11-02T10:20:20")],  # no zone: which time?
)  # fmt: skip
def test_a_malformed_claim_is_refused_naming_the_field(field: str, value: Any) -> None:
    event = {**CLAIM, "now": "2026-11-02T10:00:00Z", field: value}
    with pytest.raises(InvalidDrainRequest, match=field) as raised:
        check_claim(event)
    assert raised.value.field == field


def test_the_drain_function_runs_the_check_as_a_step_that_raises_only_bad_input() -> None:
    out = run_action(None, {"action": "check_claim", **CLAIM, "now": "2026-11-02T11:00:00Z"})  # type: ignore[arg-type]
    assert out["lapsed"] is True
    assert RAISES["check_claim"] == frozenset({InvalidDrainRequest})


def _states() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((ROOT / "statemachines" / "scale_down.asl.json").read_text())
    return dict(doc["States"])


def test_a_later_part_checks_its_claim_once_the_part_before_ended_and_before_it_drains() -> None:
    """Every way past the part before (it ended, does not exist, its output is unreadable) goes through
    the claim check; a part stopped before, or after a stopped one, is skipped as before; the first part
    (no ``after``) goes to its drains at once."""
    states = _states()
    into_check = sorted(
        n for n, s in states.items()
        if "ClaimGiven" in {s.get("Next"), s.get("Default")} | {c["Next"] for c in s.get("Catch", []) + s.get("Choices", [])}
    )  # fmt: skip
    assert into_check == ["DescribePrevious", "DescribePreviousOutput", "PreviousEnded", "PreviousSkipped"]
    assert states["AfterPrevious"]["Default"] == "Settings"
    assert states["PreviousEnded"]["Default"] == "ClaimGiven"
    assert states["PreviousSkipped"]["Default"] == "ClaimGiven"
    given = states["ClaimGiven"]
    assert given["Choices"] == [{"Variable": "$.plan.claim_until", "IsPresent": True, "Next": "CheckClaim"}]
    assert given["Default"] == "Settings"  # a part started by hand without one drains as before
    check = states["CheckClaim"]
    assert check["Resource"] == "${DrainFunctionArn}"
    params = check["Parameters"]
    assert params["action"] == "check_claim" and params["now.$"] == "$$.State.EnteredTime"
    assert params["claim_until.$"] == "$.plan.claim_until"
    assert params["nodes.$"] == "States.ArrayLength($.plan.drains)"
    lapsed = states[check["Next"]]
    assert lapsed["Choices"] == [{"Variable": "$.claim.lapsed", "BooleanEquals": True, "Next": "Lapsed"}]
    assert lapsed["Default"] == "Settings"
    # the claim check cannot be made: nothing is drained on a premise nobody could date
    [catch] = check["Catch"]
    assert catch["ErrorEquals"] == ["States.ALL"] and states[catch["Next"]]["Parameters"]["drains"] == []
    out = states["Lapsed"]
    assert out["Type"] == "Pass" and out["Next"] == "CountUndrained"  # its metric, then the end
    assert out["Parameters"]["outcome"] == "lapsed" and out["Parameters"]["drains"] == []
    assert out["Parameters"]["reason.$"] == "$.claim.reason"
    assert out["Parameters"]["claim_until.$"] == "$.plan.claim_until"
    # nothing reaches the drains but through Settings
    assert [n for n, s in states.items() if s.get("Next") == "DrainEach"] == ["Settings"]


def test_the_defaults_let_a_hand_started_part_name_no_plan_time() -> None:
    defaults = _states()["Defaults"]["Result"]
    assert defaults["planned_at"] is None and defaults["claim_minutes"] is None
    assert "claim_until" not in defaults  # its absence is what skips the check
