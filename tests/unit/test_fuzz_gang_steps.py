"""Fuzzing the gang-launch state machine's Lambda steps (spillway.act.gang) on moto: every input that is
not what gang_launch.asl.json sends a step is refused before anything is read or written.

The unbroken inputs are made by the steps themselves on moto (a real prepare's ``prep``, a real
CreateFleet's ``launch``), placed as each state's Parameters and ResultPath place them. Each example
breaks one place, as tests/unit/test_fuzz_step_inputs.py does for the scale-up steps: a value of
another JSON type, a required key taken out, a key the step does not take, a number out of range, an
identifier with a newline, a space, a non-ASCII letter or nothing. The step must raise our InputError
naming that place, make no AWS or Kubernetes call, and leave every group's desired capacity, every
instance, every fleet and every DynamoDB item as they were. Derandomized: CI sees the same examples.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from fakes import FakeCluster
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz_step_inputs import (
    FUZZ,
    IDENTIFIER_BREAKS,
    OTHER_KINDS,
    OUT_OF_RANGE,
    get,
    json_kind,
    places,
    recording_session,
)

from spillway.act.gang import GangSteps
from spillway.adapters.aws import AwsAdapter, AwsClients, AwsSettings
from spillway.adapters.state_store import StateStore
from spillway.errors import InputError
from spillway.local.cfn import create_tables
from spillway.local.cloud import terminate_refuses_unmanaged
from spillway.local.rig import create_group
from spillway.model.nodegroup import TAG_ATOMIC_LAUNCH

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"
REGION = "us-east-1"
TABLE = "gang-state"
EXECUTION = "arn:aws:states:us-east-1:123456789012:execution:spillway-prod-gang-launch:gang-p-1-0a1b2c3d4e5f"
REQUEST = {"group": "gang", "region": REGION, "count": 2, "gang": "ml/train", "mode": "fleet",
           "deadline_seconds": 600, "poll_seconds": 1, "plan_id": "20261102T120000000000Z-1a2b3c4d"}  # fmt: skip
LABELS = {"spillway.io/provisioning-request": "ml-train"}


@dataclass
class World:
    steps: GangSteps
    kube: FakeCluster
    aws_calls: list[str]
    armed: list[bool]
    events: dict[str, dict[str, Any]]

    def fingerprint(self) -> str:
        """Every group's desired capacity, every instance's state, every fleet, every state-table item,
        read from moto's backends (an API call each would make the fuzzing ten times slower)."""
        from moto.autoscaling.models import autoscaling_backends
        from moto.core import DEFAULT_ACCOUNT_ID as ACCOUNT
        from moto.dynamodb.models import dynamodb_backends
        from moto.ec2.models import ec2_backends

        groups = autoscaling_backends[ACCOUNT][REGION].autoscaling_groups
        ec2 = ec2_backends[ACCOUNT][REGION]
        table = dynamodb_backends[ACCOUNT][REGION].get_table(TABLE)
        return json.dumps({
            "groups": {name: g.desired_capacity for name, g in groups.items()},
            "instances": {i.id: i.state for i in ec2.all_instances()},
            "fleets": sorted(ec2.fleets),
            "items": sorted(json.dumps(i.to_json(), sort_keys=True) for i in table.all_items()),
        }, sort_keys=True, default=str)  # fmt: skip

    def run(self, event: Any) -> Any:
        self.armed[0] = True
        try:
            return self.steps.run(event)
        finally:
            self.armed[0] = False


@pytest.fixture(scope="module")
def aws_answers(module_moto: None) -> Iterator[None]:
    """moto's TerminateInstanceInAutoScalingGroup of an instance in no group answers as AWS does (a fleet
    instance outside the group, of an attempt whose attach marker is written, is asked of Auto Scaling)."""
    with terminate_refuses_unmanaged():
        yield


@pytest.fixture(scope="module")
def moto_world(aws_answers: None) -> World:
    """Group ``gang`` (one zone, desired 1, MaxSize 8) tagged for ``prod`` and fleet launches; the state
    table from template.yaml. Each step's unbroken input is made from what the steps really return."""
    create_group("gang", region=REGION, instance_type="g5.xlarge", desired=1, max_size=8, cluster="prod",
                 tags={TAG_ATOMIC_LAUNCH: "fleet"})  # fmt: skip
    create_tables(TEMPLATE, boto3.client("dynamodb", region_name=REGION), {"StateTable": TABLE})
    session, calls, armed = recording_session()
    kube = FakeCluster([])
    steps = GangSteps(kube=kube, aws=AwsAdapter(AwsClients((REGION,), session, AwsSettings(max_attempts=1)), "prod"),
                      ledger=StateStore(session.client("dynamodb"), TABLE), cluster="prod")  # fmt: skip
    events = asl_events(steps)
    return World(steps, kube, calls, armed, events)


MACHINE = json.loads((TEMPLATE.parent / "statemachines" / "gang_launch.asl.json").read_text())["States"]


def resolve(path: str, state: dict[str, Any], given: dict[str, Any]) -> Any:
    """A JSONPath of the machine's Parameters: ``$`` (the state), ``$.a.b``, ``$$.Execution.Id|Input``.
    A path to nothing raises, as Step Functions fails the state (States.Runtime)."""
    if path.startswith("$$."):
        return {"$$.Execution.Id": EXECUTION, "$$.Execution.Input": given}[path]
    found: Any = state
    for part in path.removeprefix("$").split(".")[1:]:
        found = found[part]
    return found


def parameters(name: str, state: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """What state ``name`` of gang_launch.asl.json passes its Lambda, its Parameters resolved."""
    params = MACHINE[name]["Parameters"]
    return {
        k.removesuffix(".$"): resolve(v, state, given) if k.endswith(".$") else v for k, v in params.items()
    }


def asl_events(steps: GangSteps, given: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Each step's input as gang_launch.asl.json passes it: its Parameters resolved against the state as
    the states before leave it (Defaults: ``zone`` null unless given; each step's ResultPath), the
    step results the steps' own on moto."""
    given = given or {**REQUEST, "node_labels": LABELS}
    fleet = {"zone": None, **given}  # Defaults: States.JsonMerge({"zone": null}, $)
    fleet["prep"] = steps.run(parameters("Prepare", fleet, given))
    fleet["launch"] = steps.run(parameters("Launch", fleet, given))
    assert fleet["launch"]["status"] == "launched", fleet["launch"]
    # another attempt (an execution has one mode): its own raise marker and claims, not the fleet's
    rollback = {**fleet, "mode": "rollback", "plan_id": "20261102T120000000000Z-5e6f7a8b"}
    rollback["prep"] = steps.run(parameters("Prepare", rollback, {**given, "mode": "rollback"}))
    rollback["launch"] = steps.run(parameters("RaiseDesired", rollback, given))
    steps.run(parameters("RaiseDesired", rollback, given))  # a retry: the marker's answer, again
    rollback["launch"] = steps.run(parameters("RaiseDesired", rollback, given))
    assert rollback["launch"]["again"], rollback["launch"]
    rollback["verify"] = {"status": "failed", "error": "CapacityUnavailable", "reason": "no capacity"}
    events = {
        "rollback_verify": parameters("Verify", rollback, given),
        "rollback_give_back": parameters("GiveBack", rollback, given),
        "gang_prepare": parameters("Prepare", fleet, given),
        "gang_launch": parameters("Launch", fleet, given),
        "gang_raise": parameters("RaiseDesired", {**rollback, "launch": None}, given),
        "gang_attach": parameters("Attach", fleet, given),
        "gang_verify": parameters("Verify", fleet, given),
    }
    # GiveBack after Verify's catch, with what every step before left: all of the state's parts
    fleet["attach"] = {"status": "waiting", "pending": 1}
    fleet["verify"] = {"status": "timeout", "error": "GangIncomplete", "ready": 1, "reason": "1 of 2 Ready"}
    fleet["error"] = {"Error": "KubeUnavailable", "Cause": "the API server did not answer"}
    events["gang_give_back"] = parameters("GiveBack", fleet, given)
    return copy.deepcopy(events)


# Verify and GiveBack in rollback mode take gang_raise's result (a retry's, the raise marker's) as $.launch
STEPS = ("gang_prepare", "gang_launch", "gang_raise", "gang_attach", "gang_verify", "gang_give_back",
         "rollback_verify", "rollback_give_back")  # fmt: skip


def test_each_unbroken_step_input_runs_and_the_rig_sees_what_it_does(moto_world: World) -> None:
    """The baseline the fuzzing breaks: each input is accepted and its step calls AWS, and what the
    steps do shows in the fingerprint, so "no call, nothing changed" below is no accident of the rig."""
    w = moto_world
    before = w.fingerprint()
    for action in STEPS:
        w.aws_calls.clear()
        w.run(copy.deepcopy(w.events[action]))
        assert w.aws_calls, f"{action} made no AWS call"
    after = json.loads(w.fingerprint())
    changed = {part for part, value in json.loads(before).items() if after[part] != value}
    assert changed == {"groups", "instances", "fleets", "items"}, changed


# --- breaking one place --------------------------------------------------------------------------

# Keys the state machine may leave out: the execution input's optional keys, what a step's result
# carries in some outcomes only, what has not run yet when GiveBack runs.
OPTIONAL = {
    ("execution_input", "zone"),
    ("execution_input", "node_labels"),
    ("state", "node_labels"),
    *(("state", k) for k in ("launch", "attach", "verify", "error")),
    ("error", "Cause"),
}
# null is a value the state machine sends there (a mode the group's tag chooses, no plan, no zone, ...)
NULLABLE = {"mode", "plan_id", "zone", "instance_type", "spot_allocation_strategy", "fleet_id", "Cause",
            "node_labels", "launch", "attach", "verify", "error"}  # fmt: skip
# Free text: any string. A gang is "<namespace>/<name>", its name an annotation's value: any but "".
TEXT = {"reason", "error", "Error", "Cause", "gang"}
MAPS = {"node_labels", "tags"}  # free keys: any entry may be left out, any added, {} is a map
EMPTY_IS_A_VALUE = {"plan_id"}  # no plan: a gang started by hand


def parent_of(path: tuple[Any, ...]) -> str:
    return next((p for p in reversed(path[:-1]) if isinstance(p, str)), "")


def ways_to_break(path: tuple[Any, ...], parent: Any, value: Any) -> list[str]:
    key, owner = path[-1], parent_of(path)
    in_map = owner in MAPS and len(path) >= 2 and path[-2] == owner
    ways = ["type"]
    if isinstance(parent, dict) and key not in MAPS and not in_map:
        ways.append("unknown")
    if isinstance(key, str) and (owner, key) not in OPTIONAL and not in_map:
        ways.append("missing")
    if json_kind(value) == "number":
        ways.append("range")
    if isinstance(value, str) and key not in TEXT and not (in_map and owner == "tags"):
        ways.append("identifier")
    if key == "gang":
        ways.append("empty")
    return ways


@st.composite
def broken(draw: st.DrawFn, event: dict[str, Any]) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """``event`` broken in one place, and that place."""
    doc = copy.deepcopy(event)
    path = draw(st.sampled_from(list(places(doc))))
    parent, key = get(doc, path[:-1]), path[-1]
    value = parent[key]
    way = draw(st.sampled_from(ways_to_break(path, parent, value)))
    if way == "type":
        kinds = {json_kind(value)} | ({"NoneType"} if key in NULLABLE else set()) | (
            {"dict"} if key in MAPS else set())  # fmt: skip
        parent[key] = draw(st.one_of(*(s for k, s in OTHER_KINDS.items() if k not in kinds)))
    elif way == "missing":
        del parent[key]
    elif way == "range":
        parent[key] = draw(OUT_OF_RANGE)
    elif way == "identifier":
        empty_ok = key in EMPTY_IS_A_VALUE or parent_of(path) == "node_labels"  # a label's value may be ""
        breaks = [value + b for b in IDENTIFIER_BREAKS[1:]] + ([] if empty_ok else [""])
        parent[key] = draw(st.sampled_from(breaks))
    elif way == "empty":
        parent[key] = ""
    else:  # a key nothing takes, beside this one (a space: no field's name)
        path = (*path[:-1], "unknown " + draw(st.text(alphabet="abcxyz", max_size=5)))
        parent[path[-1]] = draw(st.integers() | st.text(max_size=4))
    return doc, path


def named(field: str) -> set[str]:
    """The names that say ``field`` is wrong: itself, and for a count its pair (a request's count and its
    prep's come from one input: either may be the one that is off), for a launch template's id its name
    (a template is named by one of them: the check names the second)."""
    for one, other in (
        ("LaunchTemplateId", "LaunchTemplateName"),
        ("LaunchTemplateName", "LaunchTemplateId"),
    ):
        if field.endswith("." + one):
            return {field, field.removesuffix(one) + other}
    prefix, _, last = field.rpartition("count")
    if last == "" and prefix in ("", "state.", "prep.", "state.prep."):
        base = prefix.removesuffix("prep.")
        return {field, f"{base}count", f"{base}prep.count"}
    return {field}


def assert_refused_untouched(w: World, event: Any, where: tuple[Any, ...]) -> None:
    before = w.fingerprint()
    w.aws_calls.clear()
    w.kube.calls.clear()
    with pytest.raises(InputError) as err:
        w.run(event)
    field = ".".join(str(p) for p in where)
    got = err.value.field or ""
    assert got in named(field) or got.startswith(field + "."), (got, field, str(err.value))
    assert w.aws_calls == [], w.aws_calls
    assert w.kube.calls == [], w.kube.calls
    assert w.fingerprint() == before


@pytest.mark.parametrize("action", STEPS)
@FUZZ
@given(data=st.data())
def test_a_broken_gang_step_input_is_refused_naming_its_field_and_nothing_is_called_or_written(
    moto_world: World, action: str, data: st.DataObject
) -> None:
    event, where = data.draw(broken(moto_world.events[action]))
    assert_refused_untouched(moto_world, event, where)


@pytest.mark.parametrize(
    "event", [[], "gang_prepare", None, 7, {"action": ["gang_launch"]}, {"action": "gang"}]
)
def test_an_input_that_is_no_gang_step_input_is_refused(moto_world: World, event: Any) -> None:
    before = moto_world.fingerprint()
    moto_world.aws_calls.clear()
    with pytest.raises(InputError):
        moto_world.run(event)
    assert moto_world.aws_calls == [] and moto_world.fingerprint() == before


# --- found by the model: inputs the old checks let through to the launch ----------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        # Wait states take whole seconds (SecondsPath: "an integer value"): 1.5 passed Prepare, CreateFleet
        # launched, and WaitRunning failed the execution with States.Runtime, which no Catch takes: the
        # gang ran on with no give-back
        ({"poll_seconds": 1.5}, "poll_seconds"),
        # node_labels reached only Verify (through $$.Execution.Input), after the launch: Prepare gets the
        # execution input now, and refuses a label Kubernetes would refuse before anything launches
        ({"node_labels": {"team": "a b"}}, "execution_input.node_labels.team"),
        ({"node_labels": {"team/x/y": "a"}}, "execution_input.node_labels.team/x/y.[key]"),
        # a key no step takes (a misspelt zone): dropped by Prepare's Parameters, so the gang launched
        # in any zone; and GiveBack's state ($) carries it
        ({"zones": "us-east-1a"}, "execution_input.zones"),
    ],
)
def test_prepare_refuses_an_execution_input_the_later_states_could_not_run_with(
    moto_world: World, change: dict[str, Any], field: str
) -> None:
    given = {**REQUEST, **change}
    state = {"zone": None, **given}
    event = parameters("Prepare", state, given)  # as the machine passes it
    before = moto_world.fingerprint()
    moto_world.aws_calls.clear()
    with pytest.raises(InputError) as err:
        moto_world.run(event)
    assert err.value.field == field, str(err.value)
    assert moto_world.aws_calls == [] and moto_world.fingerprint() == before


def test_a_steps_prep_of_another_count_is_refused(moto_world: World) -> None:
    """The request and its prep come from one input; a prep of another count (a hand-edited redrive)
    would launch one count and wait for another."""
    event = copy.deepcopy(moto_world.events["gang_launch"])
    event["prep"]["count"] = 3
    before = moto_world.fingerprint()
    moto_world.aws_calls.clear()
    with pytest.raises(InputError, match="not the request's count 2") as err:
        moto_world.run(event)
    assert (
        err.value.field == "prep.count" and moto_world.aws_calls == [] and moto_world.fingerprint() == before
    )
