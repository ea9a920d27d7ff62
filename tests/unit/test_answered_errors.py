"""An error a state machine retries or catches by name is counted apart (AnsweredErrors), so the
function's errors alarm can leave it out: at the invocation's start, where Lambda puts Errors."""

from __future__ import annotations

import contextlib
import io
import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from lambda_apps import LambdaContext, load_app

from spillway import observability
from spillway.errors import STEP_ANSWERS, AwsThrottled, InvalidDrainRequest

STARTED = datetime(2026, 11, 2, 10, 4, 59, 500000, tzinfo=UTC)


class Clock:
    """``datetime`` as the module reads it: ``now`` is the invocation's start, once."""

    @staticmethod
    def now(tz: Any = None) -> datetime:
        return STARTED


def printed(error: Exception | None, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    monkeypatch.setattr(observability, "datetime", Clock)
    observability.set_cluster("ml")
    out = io.StringIO()
    try:
        with (
            contextlib.redirect_stdout(out),
            contextlib.suppress(Exception),
            observability.counting_answers("drain", STEP_ANSWERS["drain"]),
        ):
            if error is not None:
                raise error
    finally:
        observability.metrics.clear_default_dimensions()
    return [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]


# powertools warns of a timestamp over 14 days old, which CloudWatch would drop; this one is a fixed
# date on purpose (the period boundary it checks), and the handlers stamp the real invocation's start
@pytest.mark.filterwarnings("ignore:This metric doesn't meet the requirements:UserWarning")
def test_an_answered_error_is_counted_at_the_invocations_start_and_raised_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A drain step throttled at 10:05:01 was invoked at 10:04:59.5: Lambda's Errors falls in the
    10:00 period (its timestamp is the invocation's), so AnsweredErrors must too, or the 10:00 period
    counts an error nobody answered and pages."""
    [doc] = printed(AwsThrottled("TerminateInstanceInAutoScalingGroup: Rate exceeded"), monkeypatch)
    assert doc["AnsweredErrors"] == [1.0]
    assert (doc["Function"], doc["Cluster"], doc["service"]) == ("drain", "ml", "spillway")
    assert doc["_aws"]["Timestamp"] == int(STARTED.timestamp() * 1000)
    with pytest.raises(AwsThrottled), observability.counting_answers("drain", STEP_ANSWERS["drain"]):
        raise AwsThrottled("raised on, for the state machine's Retry")


@pytest.mark.parametrize("error", [None, InvalidDrainRequest("no node", field="node"), KeyError("bug")])
def test_success_and_errors_no_state_machine_names_count_nothing(
    error: Exception | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert printed(error, monkeypatch) == []


@pytest.mark.filterwarnings("ignore:This metric doesn't meet the requirements:UserWarning")
@pytest.mark.parametrize(("function", "work"), [("drain", "handle"), ("scale", "scale_step")])
def test_a_handler_stamps_an_answered_error_with_its_start_before_a_slow_cold_start(
    function: str, work: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cold start's client build takes seconds: an invocation started at 10:04:59.5 whose step is
    throttled after clients built at 10:05:01.5 is an error of the 10:00 period (Lambda's Errors is
    stamped at the invocation's start), so its AnsweredErrors must be stamped 10:04:59.5 too."""
    app = load_app(function, "answered")
    clock = {"now": STARTED}

    class MovingClock:
        @staticmethod
        def now(tz: Any = None) -> datetime:
            return clock["now"]

    def slow_clients() -> Any:
        clock["now"] = STARTED + timedelta(seconds=2)
        return SimpleNamespace(config=SimpleNamespace(cluster_name="ml"))

    def throttled(*args: Any) -> Any:
        raise AwsThrottled("Rate exceeded")

    monkeypatch.setattr(observability, "datetime", MovingClock)
    monkeypatch.setattr(app, "get_clients", slow_clients)
    monkeypatch.setattr(app, work, throttled)
    try:
        with pytest.raises(AwsThrottled):
            app.handler({"action": "evict"}, LambdaContext())
    finally:
        observability.metrics.clear_default_dimensions()
    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    [doc] = [d for d in docs if "AnsweredErrors" in d]
    assert (doc["Function"], doc["Cluster"]) == (function, "ml")
    assert doc["_aws"]["Timestamp"] == int(STARTED.timestamp() * 1000)
