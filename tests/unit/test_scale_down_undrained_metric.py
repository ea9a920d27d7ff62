"""A scale-down part that drains nothing (outcome ``skipped``: a part before it was stopped; ``lapsed``: it
waited behind a part that still ran until its plan's claim lapsed) is counted in ``DrainOutcome``.

Such a part ends in a Pass state and ran no DrainNode execution, so no drain recorded anything: an
operator saw skipped parts only by reading executions. The scale-down now hands each such
ending to the drain function's ``undrained`` step, which adds the part's nodes to ``DrainOutcome`` under
the part's outcome (the dashboard's outcome widget searches every ``Outcome``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spillway.act.drain import RAISES, UNDRAINED, Drainer, run_action
from spillway.errors import InvalidDrainRequest

ROOT = Path(__file__).resolve().parents[2]
MACHINE = json.loads((ROOT / "statemachines/scale_down.asl.json").read_text())
PART = {"action": "undrained", "cluster": "ml", "plan_id": "20261102T100000Z-abc"}


class Hook:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, int]] = []

    def __call__(self, outcome: str, drain: Any, count: int = 1) -> None:
        self.calls.append((outcome, drain, count))


def _drainer(hook: Hook) -> Drainer:
    return Drainer(None, None, ledger=None, cluster="ml", regions=["us-east-1"], on_outcome=hook)  # type: ignore[arg-type]


@pytest.mark.parametrize("outcome", ["skipped", "lapsed"])
def test_a_part_that_drained_nothing_counts_its_nodes_under_its_outcome(outcome: str) -> None:
    """skipped: a part before it was stopped; lapsed: it waited behind a part that still ran until its
    plan's claim lapsed. Each is its own Outcome dimension, so the metric tells them apart."""
    hook = Hook()
    out = run_action(_drainer(hook), {**PART, "outcome": outcome, "nodes": 3})
    assert hook.calls == [(outcome, None, 3)]
    assert out == {"outcome": outcome, "nodes": 3}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("outcome", "terminated"),
        ("outcome", "cancelled"),
        ("outcome", None),
        ("nodes", "3"),
        ("nodes", -1),
        ("nodes", True),
    ],
)
def test_a_malformed_undrained_step_is_refused_naming_the_field(field: str, value: Any) -> None:
    hook = Hook()
    event = {**PART, "outcome": "skipped", "nodes": 2, field: value}
    with pytest.raises(InvalidDrainRequest, match=field) as raised:
        run_action(_drainer(hook), event)
    assert raised.value.field == field and hook.calls == []


def test_the_undrained_step_raises_only_bad_input() -> None:
    assert RAISES["undrained"] == frozenset({InvalidDrainRequest})


def _next_task(name: str) -> dict[str, Any]:
    state = MACHINE["States"][name]
    assert "End" not in state, f"{name} ends the part without counting it"
    return MACHINE["States"][state["Next"]]


@pytest.mark.parametrize(
    ("ending", "outcome"),
    [
        ("Stopped", "skipped"),
        ("StoppedBefore", "skipped"),
        ("ClaimLapsed", "lapsed"),
        ("LapsedBefore", "lapsed"),
    ],
)
def test_every_ending_that_drains_nothing_goes_through_the_undrained_step(ending: str, outcome: str) -> None:
    """Each keeps its output (the step's result is discarded), says how many nodes it left, and names an
    outcome the undrained step counts."""
    params = MACHINE["States"][ending]["Parameters"]
    assert params["nodes.$"] == "States.ArrayLength($.plan.drains)"
    assert params["outcome"] == outcome and outcome in UNDRAINED
    task = _next_task(ending)
    assert task["Type"] == "Task" and task["Resource"] == "${DrainFunctionArn}"
    assert task["Parameters"]["action"] == "undrained"
    assert task["ResultPath"] is None
    assert task.get("End") is True
    # a metric is no reason to fail the part: any error is caught, and the part ends as it would have
    (catch,) = task["Catch"]
    assert catch["ErrorEquals"] == ["States.ALL"]
    assert MACHINE["States"][catch["Next"]]["Type"] in ("Succeed", "Pass")
