"""A scale step that runs out of time between its raise marker and SetDesiredCapacity (fix59g).

The raise writes its marker (a DynamoDB PutItem), then the adapter reads the group and asks
SetDesiredCapacity; each call may take a long time when AWS is slow (botocore's attempts, timeouts and
back-off). The scale function stops at its Timeout (``Sandbox.Timedout``), which SetDesired and the
gang's RaiseDesired do not retry (scale_up.asl.json, gang_launch.asl.json): the group goes to
``Errored``, and a marker written for a raise never asked says the raise is launching, so the pods wait
for nodes nobody asked for. A step is given its deadline instead (the Lambda context's remaining time),
starts no call it could not finish within it, and gives the marker back when it cannot ask the raise:
``AwsUnavailable`` (unsent), which the state machine retries, and the retry raises, once."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from contextlib import redirect_stdout
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fakes import FakeCloud, FakeCluster, FakeLedger, FakeSnapshots
from test_metrics_contract import load_app

from spillway.act.claims import GIVEBACK_PREFIX, RAISE_PREFIX, SET_PREFIX
from spillway.act.deadline import NO_DEADLINE, Deadline
from spillway.act.gang import GangSteps
from spillway.act.planning import PlanSettings
from spillway.act.scale import ScaleSteps
from spillway.adapters.aws import AwsSettings
from spillway.clients import Clients
from spillway.config import PlannerConfig
from spillway.errors import AwsUnavailable
from spillway.model.calltime import (
    STEP_MARGIN_SECONDS,
    TOKEN_WAIT_SECONDS,
    backoff_seconds,
    worst_call_seconds,
)
from spillway.model.nodegroup import TAG_ATOMIC_LAUNCH
from spillway.runtime import load_runtime_config

ROOT = Path(__file__).resolve().parents[2]
OWNER = "up-p-1-1-us-east-1-gpu"
GROUP = {"group": "gpu", "region": "us-east-1", "from": 1, "to": 3, "grow": True, "new_nodes": 2, "pods": 2,
         "uncordon": []}  # fmt: skip
STEP = {"cluster": "prod", "plan_id": "p-1", "round": 1, "launch_timeout_seconds": 600, "group": GROUP}
# the clients' settings: one call takes at most 49 s (3 x (3 + 7 + 2) + (1 + 5) + (2 + 5))
SETTINGS = AwsSettings(max_attempts=3, connect_timeout=3, read_timeout=7)


class TimedOut(BaseException):
    """Lambda stopped the function at its Timeout: nothing after runs (Sandbox.Timedout)."""


class Invocation:
    """One invocation of the scale function: its context's remaining time is the function's Timeout
    less the time its calls took."""

    def __init__(self, timeout: float = 120) -> None:
        self.timeout, self.spent = timeout, 0.0
        self.function_name, self.memory_limit_in_mb = "spillway-prod-scale", 1769
        self.aws_request_id, self.invoked_function_arn = "req-1", ""

    def spend(self, seconds: float) -> None:
        self.spent += seconds
        if self.spent >= self.timeout:
            raise TimedOut

    def get_remaining_time_in_millis(self) -> int:
        return int((self.timeout - self.spent) * 1000)


class SlowLedger(FakeLedger):
    """DynamoDB answering slowly: a raise marker's put takes ``put_seconds`` of the invocation."""

    def __init__(self) -> None:
        super().__init__()
        self.invocation: Invocation | None = None
        self.put_seconds = 0.0

    def claim(self, cluster: str, item: str, value: Mapping[str, object], **kw: Any) -> Any:
        if self.invocation is not None and item.startswith((RAISE_PREFIX, GIVEBACK_PREFIX)):
            self.invocation.spend(self.put_seconds)
        return super().claim(cluster, item, value, **kw)


class SlowCloud(FakeCloud):
    """Auto Scaling answering slowly: the adapter's read of the group before SetDesiredCapacity takes
    ``read_seconds``; SetDesiredCapacity is sent only if the function still runs by then."""

    def __init__(self) -> None:
        super().__init__(cluster="prod")
        self.invocation: Invocation | None = None
        self.read_seconds = 0.0

    def set_desired_capacity(self, region: str, group: str, desired: int, **kw: Any) -> int:
        before_call = kw.get("before_call")
        if before_call is not None:
            before_call("DescribeAutoScalingGroups")
        if self.invocation is not None:
            self.invocation.spend(self.read_seconds)
        if before_call is not None:
            before_call("SetDesiredCapacity")
        return super().set_desired_capacity(region, group, desired)


def retried_by(machine: str, state: str) -> set[str]:
    """The error names a Task state of a state machine retries."""
    definition = json.loads((ROOT / "statemachines" / machine).read_text())
    states = definition["States"]
    for name, outer in definition["States"].items():
        if "ItemProcessor" in outer:
            states = {**states, **{f"{name}/{k}": v for k, v in outer["ItemProcessor"]["States"].items()}}
    return {n for rule in states[state].get("Retry", []) for n in rule["ErrorEquals"]}


class World:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.cloud, self.ledger = SlowCloud(), SlowLedger()
        self.cloud.add_group("gpu", ["i-0aaaaaaaaaaaaaaaa"], max_size=10, instance_type="g5.xlarge")
        env = {"CLUSTER_NAME": "prod", "REGIONS": "us-east-1", "SNAPSHOTS_TABLE": "snaps",
               "PLANS_TABLE": "plans", "STATE_TABLE": "state"}  # fmt: skip
        self.clients = Clients(config=load_runtime_config(env), session=None,  # type: ignore[arg-type]
                               aws_clients=SimpleNamespace(settings=SETTINGS),  # type: ignore[arg-type]
                               aws=self.cloud, dynamodb=None, snapshots=FakeSnapshots(),  # type: ignore[arg-type]
                               plans=None, state=self.ledger, executions=None,  # type: ignore[arg-type]
                               _kube=FakeCluster())  # type: ignore[arg-type]  # fmt: skip
        self.app = load_app("scale")
        monkeypatch.setattr(self.app, "get_clients", lambda: self.clients)

    @property
    def desired(self) -> int:
        return int(self.cloud.groups[("us-east-1", "gpu")]["DesiredCapacity"])

    def invoke(self, event: Mapping[str, Any], invocation: Invocation) -> Any:
        """The handler as Lambda runs it: its result, or what it raised (TimedOut: Lambda stopped it)."""
        self.cloud.invocation = self.ledger.invocation = invocation
        try:
            with redirect_stdout(io.StringIO()):
                return self.app.handler(dict(event), invocation)
        except (Exception, TimedOut) as exc:
            return exc
        finally:
            self.cloud.invocation = self.ledger.invocation = None

    def run_task(self, machine: str, state: str, event: Mapping[str, Any], slow: Invocation) -> Any:
        """A Task state as Step Functions runs it: its first try gets the slow invocation; an error the
        state retries (by name; Lambda's timeout is ``Sandbox.Timedout``) is tried again on a healthy one."""
        out = self.invoke(event, slow)
        name = "Sandbox.Timedout" if isinstance(out, TimedOut) else type(out).__name__
        if isinstance(out, BaseException) and name in retried_by(machine, state):
            self.cloud.read_seconds = self.ledger.put_seconds = 0.0
            out = self.invoke(event, Invocation())
        return out


@pytest.mark.filterwarnings("ignore:No application metrics:UserWarning")
def test_a_raise_the_step_has_no_time_left_to_ask_gives_its_marker_back_and_its_retry_raises(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The marker's put takes 60 s and the group's read before SetDesiredCapacity would take 70 s: the
    function would stop at 120 s with the marker written and nothing asked. The step asks nothing it
    cannot finish (49 s a call at worst, and as long to give the marker back): it gives the marker back
    and fails with AwsUnavailable, which SetDesired retries, and the retry raises the group once."""
    w = World(monkeypatch)
    prep = w.invoke({**STEP, "action": "prepare"}, Invocation())
    assert prep["set"] and prep["count"] == 2
    w.ledger.put_seconds, w.cloud.read_seconds = 60, 70

    event = {"action": "set_desired", "cluster": "prod", "plan_id": "p-1", "group": GROUP, "prep": prep}

    out = w.run_task("scale_up.asl.json", "Groups/SetDesired", event, Invocation())

    assert not isinstance(out, BaseException), out
    assert (out["previous"], out["desired"], out["raised"]) == (1, 3, 2)
    assert w.desired == 3  # raised once, by the retry
    marks = w.ledger.claims("prod", "")
    assert RAISE_PREFIX + OWNER in marks and SET_PREFIX + OWNER in marks


@pytest.mark.filterwarnings("ignore:No application metrics:UserWarning")
def test_a_raise_whose_calls_end_in_time_is_asked_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Slow, but not too slow: 10 s for the marker and 5 s for the read leave 100 s when the raise is
    asked, time for it and, should it not reach AWS, the marker's release (49 s each): raised on the
    first try."""
    w = World(monkeypatch)
    prep = w.invoke({**STEP, "action": "prepare"}, Invocation())
    w.ledger.put_seconds, w.cloud.read_seconds = 10, 5
    invocation = Invocation()
    event = {"action": "set_desired", "cluster": "prod", "plan_id": "p-1", "group": GROUP, "prep": prep}

    out = w.invoke(event, invocation)

    assert not isinstance(out, BaseException), out
    assert w.desired == 3 and invocation.spent == 15


# --- the steps, each given its invocation's deadline ------------------------------------------------

NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
GANG = {"group": "gpu", "region": "us-east-1", "count": 3, "gang": "ml/train", "mode": "rollback",
        "deadline_seconds": 60, "poll_seconds": 1, "plan_id": "p-1", "execution": "gang-p-1"}  # fmt: skip
FLEET = {**GANG, "mode": "fleet", "execution": "gang-fleet-1"}


class Steps:
    """A group shared by a scale-up and gangs (as test_shared_group.World), on slow fakes: each step is
    made for one invocation, as the scale function makes it."""

    def __init__(self) -> None:
        self.cloud, self.ledger = SlowCloud(), SlowLedger()
        raw = self.cloud.add_group("gpu", ["i-0aaaaaaaaaaaaaaaa"], max_size=10, instance_type="g5.xlarge")
        raw["Tags"].append({"Key": TAG_ATOMIC_LAUNCH, "Value": "rollback", "PropagateAtLaunch": False})
        self.kube = FakeCluster()
        self.settings = PlanSettings(planner=PlannerConfig(cluster="prod", regions=("us-east-1",)))

    def deadline(self, invocation: Invocation | None) -> Deadline:
        self.cloud.invocation = self.ledger.invocation = invocation
        if invocation is None:
            return Deadline()
        return Deadline.of_invocation(invocation.get_remaining_time_in_millis, SETTINGS.worst_call_seconds())

    def up(self, invocation: Invocation | None = None) -> ScaleSteps:
        return ScaleSteps(kube=self.kube, aws=self.cloud, ledger=self.ledger, snapshots=FakeSnapshots(),
                          settings=self.settings, clock=lambda: NOW, deadline=self.deadline(invocation))  # fmt: skip

    def gang(self, invocation: Invocation | None = None) -> GangSteps:
        return GangSteps(kube=self.kube, aws=self.cloud, ledger=self.ledger, cluster="prod", clock=lambda: NOW,
                         deadline=self.deadline(invocation))  # fmt: skip

    @property
    def desired(self) -> int:
        return int(self.cloud.groups[("us-east-1", "gpu")]["DesiredCapacity"])

    def items(self, prefix: str) -> dict[str, dict[str, object]]:
        return self.ledger.claims("prod", prefix)


def test_a_raise_with_too_little_time_left_for_its_marker_writes_none() -> None:
    """The step spent 20 s before its raise: 95 s left, less than the marker's put and its release may
    take (98 s). No marker is written, nothing is asked, and the retry raises."""
    s = Steps()
    prep = s.up().prepare(STEP)
    invocation = Invocation()
    invocation.spend(20)

    with pytest.raises(AwsUnavailable) as refused:
        s.up(invocation).set_desired({**STEP, "prep": prep})

    assert refused.value.unsent and "the raise marker of us-east-1/gpu not started" in str(refused.value)
    assert s.items(RAISE_PREFIX) == {} and s.cloud.called("set_desired_capacity") == []
    s.up(Invocation()).set_desired({**STEP, "prep": prep})
    assert s.desired == 3


def test_a_gangs_raise_out_of_time_after_its_marker_gives_the_marker_back_and_its_retry_raises() -> None:
    """gang_raise as RaiseDesired runs it (AwsUnavailable retried): the marker's put took 60 s."""
    s = Steps()
    gprep = s.gang().prepare(GANG)
    s.ledger.put_seconds = 60
    assert {"AwsUnavailable"} <= retried_by("gang_launch.asl.json", "RaiseDesired")

    with pytest.raises(AwsUnavailable) as refused:
        s.gang(Invocation()).raise_desired({**GANG, "prep": gprep})

    assert refused.value.unsent and s.desired == 1 and s.items(RAISE_PREFIX) == {}
    s.ledger.put_seconds = 0
    out = s.gang(Invocation()).raise_desired({**GANG, "prep": gprep})
    assert (out["before"], out["after"], out["again"]) == (1, 4, False) and s.desired == 4


def test_a_give_back_out_of_time_after_its_marker_gives_it_back_and_its_retry_gives_back_once() -> None:
    """The scale-up's BackOff (AwsUnavailable retried): its raise of 2 launched nothing by the deadline;
    the give-back marker's put took 60 s, so the give-back is not asked and its marker goes; the retry
    gives back the 2, once."""
    s = Steps()
    prep = s.up().prepare(STEP)
    s.up().set_desired({**STEP, "prep": prep})
    assert s.desired == 3
    launch = {"status": "timeout", "reason": "us-east-1/gpu: 0 of 2 Ready", "ready": 0, "wanted": 2}
    s.ledger.put_seconds = 60
    assert {"AwsUnavailable"} <= retried_by("scale_up.asl.json", "Groups/BackOff")

    with pytest.raises(AwsUnavailable) as refused:
        s.up(Invocation()).backoff({**STEP, "prep": prep, "launch": launch})

    assert refused.value.unsent and s.desired == 3 and s.items(GIVEBACK_PREFIX) == {}
    s.ledger.put_seconds = 0
    out = s.up(Invocation()).backoff({**STEP, "prep": prep, "launch": launch})
    assert out["desired"] == 1 and s.desired == 1
    again = s.up(Invocation()).backoff({**STEP, "prep": prep, "launch": launch})
    assert again["desired"] == 1 and s.desired == 1  # given back once


def test_an_attach_out_of_time_after_its_marker_attaches_nothing_and_its_retry_attaches_once() -> None:
    """A fleet gang's Attach (AwsUnavailable retried): its marker's put took 80 s, leaving 35 s, less
    than one AttachInstances may take (49 s). Nothing is attached; the retry finds the marker and
    attaches, the marker counting the gang once."""
    s = Steps()
    fprep = s.gang().prepare(FLEET)
    launch = s.gang().launch({**FLEET, "prep": fprep})
    assert launch["status"] == "launched"
    s.ledger.put_seconds = 80
    assert {"AwsUnavailable"} <= retried_by("gang_launch.asl.json", "Attach")

    with pytest.raises(AwsUnavailable) as refused:
        s.gang(Invocation()).attach({**FLEET, "prep": fprep, "launch": launch})

    assert refused.value.unsent and "AttachInstances" in str(refused.value) and s.desired == 1
    s.ledger.put_seconds = 0
    out = s.gang(Invocation()).attach({**FLEET, "prep": fprep, "launch": launch})
    assert out["attached"] == 3 and s.desired == 4
    [marker] = s.items(RAISE_PREFIX).values()
    assert (marker["before"], marker["after"], marker["count"]) == (1, 4, 3)


def test_an_attach_with_no_time_for_its_marker_and_one_call_writes_no_marker() -> None:
    s = Steps()
    fprep = s.gang().prepare(FLEET)
    launch = s.gang().launch({**FLEET, "prep": fprep})
    invocation = Invocation()
    invocation.spend(20)  # 95 s left: less than the marker and one AttachInstances may take (98 s)

    with pytest.raises(AwsUnavailable):
        s.gang(invocation).attach({**FLEET, "prep": fprep, "launch": launch})

    assert s.items(RAISE_PREFIX) == {} and s.cloud.called("attach_instances") == []


# --- the arithmetic, against botocore's own code -----------------------------------------------------


def test_a_step_outside_lambda_has_no_deadline() -> None:
    assert Deadline().fits(10**6) and Deadline.of_invocation(None, 49).fits(10**6)
    assert NO_DEADLINE.left() == float("inf")


def test_a_deadline_keeps_its_margin_and_counts_each_call_at_its_longest() -> None:
    invocation = Invocation()
    deadline = Deadline.of_invocation(invocation.get_remaining_time_in_millis, 49)
    assert deadline.left() == 120 - STEP_MARGIN_SECONDS
    assert deadline.fits(2)  # 98 <= 115
    invocation.spend(17)
    assert deadline.fits(2)  # 98 <= 98
    invocation.spend(1)  # read live from the context
    assert not deadline.fits(2) and deadline.fits(1)
    with pytest.raises(AwsUnavailable) as refused:
        deadline.require(2, "SetDesiredCapacity(us-east-1, gpu, 3)")
    assert refused.value.unsent and "SetDesiredCapacity(us-east-1, gpu, 3) not started" in str(refused.value)


def test_the_worst_call_adds_up_botocores_longest_back_off_and_token_wait() -> None:
    """botocore's own back-off (retries/standard.py ExponentialBackoff) at its largest: rand() = 1, a
    throttle (base 1 s), an answer asking for a much later retry (x-amz-retry-after, honoured up to 5 s
    beyond); and adaptive mode's token bucket at its lowest refill rate (retries/bucket.py)."""
    from botocore.retries import bucket, standard

    backoff = standard.ExponentialBackoff(
        max_backoff=20, random=lambda: 1.0,
        throttling_detector=SimpleNamespace(is_throttling_error_from_context=lambda context: True),
    )  # fmt: skip
    answer = SimpleNamespace(headers={"x-amz-retry-after": "3600000"})
    for attempts in (1, 3, 5, 8):
        waits = [backoff.delay_amount(SimpleNamespace(attempt_number=n, http_response=answer))
                 for n in range(1, attempts)]  # fmt: skip
        assert sum(waits) == backoff_seconds(attempts), attempts
    assert TOKEN_WAIT_SECONDS == 1 / bucket.TokenBucket._MIN_RATE
    assert SETTINGS.worst_call_seconds() == 3 * (3 + 7 + 2) + (1 + 5) + (2 + 5) == 49
    # the defaults the functions build their clients with: as SETTINGS
    assert AwsSettings().worst_call_seconds() == 49
    assert worst_call_seconds(5, 3, 10) == 110  # the defaults before: nearly the whole 120 s
