"""Fuzzing the scale-up state machine's Lambda steps (spillway.act.scale) and the plan function's input
on moto: every input that is not what scale_up.asl.json, a person invoking the plan function, or the
snapshots table's stream sends is refused before anything is read or written.

Each example takes one step's input as the state machine passes it (its ``Parameters``, with the
outputs of the steps before) and breaks it in one place: a value of another JSON type, a required key
taken out, a key the step does not take, a number out of range (negative, past the API's 32-bit
Integer, NaN, infinity), an identifier with a newline, a space, a non-ASCII letter or nothing. The
step must raise our InputError naming that place (not KeyError, TypeError, ValueError or a pydantic
error), make no AWS call and no Kubernetes call, and leave every group's desired capacity and every
DynamoDB item as they were. Derandomized: CI sees the same examples.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from fakes import FakeCluster, FakeSnapshots
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from spillway.act.planning import PlanSettings
from spillway.act.scale import ScaleSteps
from spillway.adapters.aws import AwsAdapter, AwsClients, AwsSettings
from spillway.adapters.plans_store import PlanStore
from spillway.adapters.state_store import StateStore
from spillway.config import PlannerConfig
from spillway.errors import InputError
from spillway.local import objects as o
from spillway.local.cfn import create_tables
from spillway.local.rig import create_group
from spillway.model.cluster import cordon_digest
from spillway.model.k8s import CORDONED_BY_SPILLWAY

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"
REGION = "us-east-1"
NODE = "ip-10-0-1-10.ec2.internal"
TABLES = {"SnapshotsTable": "snapshots", "PlansTable": "plans", "StateTable": "state"}
FUZZ = settings(
    derandomize=True,
    deadline=None,
    max_examples=30,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@dataclass
class World:
    steps: ScaleSteps
    kube: FakeCluster
    aws_calls: list[str]
    armed: list[bool]
    instance: str

    def fingerprint(self) -> str:
        """Every group's desired capacity and every item of the three tables."""
        groups = boto3.client("autoscaling", region_name=REGION).describe_auto_scaling_groups()
        ddb = boto3.client("dynamodb", region_name=REGION)
        items = {t: ddb.scan(TableName=t)["Items"] for t in TABLES.values()}
        sizes = {g["AutoScalingGroupName"]: g["DesiredCapacity"] for g in groups["AutoScalingGroups"]}
        return json.dumps({"groups": sizes, "items": items}, sort_keys=True, default=str)

    def run(self, event: Any) -> Any:
        self.armed[0] = True
        try:
            return self.steps.run(event)
        finally:
            self.armed[0] = False


def recording_session() -> tuple[boto3.Session, list[str], list[bool]]:
    """A session whose clients record every AWS call made while armed."""
    session = boto3.Session(region_name=REGION)
    calls: list[str] = []
    armed = [False]

    def record(model: Any, **_: Any) -> None:
        if armed[0]:
            calls.append(model.name)

    session.events.register("before-call", record)  # before any client is made: they all carry it
    return session, calls, armed


@pytest.fixture(scope="module")
def moto_world(module_moto: None) -> World:
    """Group ``gpu`` (desired 1, MaxSize 4) tagged for ``prod``, the tables from template.yaml; a
    cordoned Node to uncordon. AWS calls through the steps' own clients are recorded."""
    create_group("gpu", region=REGION, instance_type="g5.xlarge", desired=1, max_size=4, cluster="prod")
    create_tables(TEMPLATE, boto3.client("dynamodb", region_name=REGION), TABLES)
    [instance] = boto3.client("autoscaling", region_name=REGION).describe_auto_scaling_groups()[
        "AutoScalingGroups"
    ][0]["Instances"]
    session, calls, armed = recording_session()
    ddb = session.client("dynamodb")
    kube = FakeCluster(
        [o.node(NODE, instance=instance["InstanceId"], zone="us-east-1a", unschedulable=True,
                annotations={CORDONED_BY_SPILLWAY: "2026-11-02T11:00:00Z drain"})]
    )  # fmt: skip
    steps = ScaleSteps(
        kube=kube,
        aws=AwsAdapter(AwsClients((REGION,), session, AwsSettings(max_attempts=1)), "prod"),
        ledger=StateStore(ddb, TABLES["StateTable"], plans=PlanStore(ddb, TABLES["PlansTable"])),
        snapshots=FakeSnapshots(),
        settings=PlanSettings(planner=PlannerConfig(cluster="prod", regions=(REGION,))),
    )
    return World(steps, kube, calls, armed, instance["InstanceId"])


def events(instance: str) -> dict[str, dict[str, Any]]:
    """Each step's input exactly as scale_up.asl.json's Parameters pass it."""
    group = {"group": "gpu", "region": REGION, "from": 1, "to": 2, "grow": True, "new_nodes": 1, "pods": 1,
             "uncordon": [NODE], "reasons": {NODE: "reused for 1 pending pod"}, "cordons": {NODE: cordon_digest("2026-11-02T11:00:00Z drain")}}  # fmt: skip
    prep = {"set": True, "count": 1, "owner": "up-20261102T120000000000Z-1a2b3c4d-1-us-east-1-gpu",
            "target": 2, "live_desired": 1, "max_size": 4, "before": [instance],
            "since": "2026-11-02T11:59:55Z", "deadline": "2999-01-01T00:00:00Z", "uncordoned": [NODE],
            "gone": []}  # fmt: skip
    launch = {"status": "failed", "reason": "us-east-1/gpu: launch failed", "ready": 0, "wanted": 1,
              "failure": "Could not launch Spot Instances. InsufficientInstanceCapacity"}  # fmt: skip
    plan = {"cluster": "prod", "plan_id": "20261102T120000000000Z-1a2b3c4d"}
    results = [
        {"group": "gpu", "region": REGION, "outcome": "backed_off", "reason": "no capacity",
         "backoff_until": "2026-11-02T12:15:00Z", "desired": 1, "terminated": [instance], "held": []},
        {"group": "gpu", "region": REGION, "outcome": "error", "error": "AwsError", "cause": "denied"},
    ]  # fmt: skip
    return {
        "prepare": {"action": "prepare", **plan, "part": 2, "round": 1, "launch_timeout_seconds": 600,
                    "group": group},
        "set_desired": {"action": "set_desired", **plan, "group": group, "prep": prep},
        "verify": {"action": "verify", "cluster": "prod", "group": group, "prep": prep},
        "backoff": {"action": "backoff", "cluster": "prod", "group": group, "prep": prep, "launch": launch},
        "next_round": {"action": "next_round", **plan, "snapshot_key": "2026-11-02T12:00:00.000000Z",
                       "part": 2, "round": 2, "max_rounds": 3, "poll_seconds": 15,
                       "launch_timeout_seconds": 600,
                       "rounds": [{"round": 1, "groups": copy.deepcopy(results[:1])}], "results": results},
    }  # fmt: skip


def test_each_unbroken_step_input_runs_and_the_rig_sees_what_it_does(moto_world: World) -> None:
    """The baseline the fuzzing breaks: each input is accepted and its step calls AWS, and a raise
    shows in the fingerprint, so "no call, nothing changed" below is no accident of the rig. (The
    fuzzing compares each example's world before and after, so what this changes does not matter.)"""
    w = moto_world
    good = events(w.instance)
    before = w.fingerprint()
    for action in ("prepare", "set_desired", "verify", "backoff"):
        w.aws_calls.clear()
        w.run(good[action])
        assert w.aws_calls, f"{action} made no AWS call"
    assert w.fingerprint() != before
    assert w.kube.calls


# --- breaking one place --------------------------------------------------------------------------

# Keys the state machine may leave out: a plan's reasons and cordons (executions started before plans
# had them), what verify adds to some outcomes only, what a Pass state's outcome does not carry.
OPTIONAL = {
    ("", "part"),  # an execution running a definition before parts were named: its first part
    ("group", "reasons"),
    ("group", "cordons"),
    *(("launch", k) for k in ("reason", "failure", "ready", "wanted")),
    *(("result", k) for k in ("reason", "error", "cause", "backoff_until", "desired", "terminated", "held")),
}
# Free text: any string is a reason. Every other string is an identifier, a name or a time.
TEXT = {"reason", "failure", "cause", "error"}
NODE_MAPS = ("reasons", "cordons")  # maps of Node names: any entry may be left out
IDENTIFIER_BREAKS = ["", "\n", " ", "\u00e9", "\u0663", "\u200b"]


def places(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield (*prefix, key)
            yield from places(value, (*prefix, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield (*prefix, index)
            yield from places(value, (*prefix, index))


def get(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


def kind_of(path: tuple[Any, ...]) -> tuple[str, Any]:
    """(the object a key belongs to, the key): results' and rounds' groups are results."""
    parent = next((p for p in reversed(path[:-1]) if isinstance(p, str)), "")
    if parent in ("results", "groups"):
        parent = "result"
    return parent, path[-1]


def json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


OTHER_KINDS: dict[str, Any] = {
    "bool": st.booleans(),
    "number": st.integers(min_value=-(2**40), max_value=2**40),
    "str": st.text(max_size=12),
    "NoneType": st.none(),
    "list": st.lists(st.integers() | st.text(max_size=4), max_size=3),
    "dict": st.dictionaries(st.text(max_size=6), st.integers() | st.none(), max_size=3),
}
OUT_OF_RANGE = st.one_of(
    st.integers(min_value=2**31, max_value=2**70),
    st.integers(min_value=-(2**70), max_value=-1),
    st.sampled_from([math.nan, math.inf, -math.inf]),
)


@st.composite
def broken(draw: st.DrawFn, event: dict[str, Any]) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """``event`` broken in one place, and that place."""
    doc = copy.deepcopy(event)
    path = draw(st.sampled_from(list(places(doc))))
    parent, key = get(doc, path[:-1]), path[-1]
    value = parent[key]
    ways = ["type"]
    if isinstance(parent, dict):
        ways.append("unknown")
    # a plan's reasons and cordons are maps of Node names: any entry may be left out
    if isinstance(key, str) and kind_of(path) not in OPTIONAL and kind_of(path)[0] not in NODE_MAPS:
        ways.append("missing")
    if json_kind(value) == "number":
        ways.append("range")
    if isinstance(value, str) and key not in TEXT and kind_of(path)[0] != "reasons":  # reasons: free text
        ways.append("identifier")
    way = draw(st.sampled_from(ways))
    if way == "type":
        parent[key] = draw(st.one_of(*(s for k, s in OTHER_KINDS.items() if k != json_kind(value))))
    elif way == "missing":
        del parent[key]
    elif way == "range":
        parent[key] = draw(OUT_OF_RANGE)
    elif way == "identifier":
        parent[key] = draw(st.sampled_from([value + b for b in IDENTIFIER_BREAKS[1:]] + [""]))
    else:  # a key nothing takes, beside this one (a space: no field's name, no Node's name)
        path = (*path[:-1], "unknown " + draw(st.text(alphabet="abcxyz", max_size=5)))
        parent[path[-1]] = draw(st.integers() | st.text(max_size=4))
    return doc, path


def assert_refused_untouched(w: World, event: Any, where: tuple[Any, ...]) -> None:
    before = w.fingerprint()
    w.aws_calls.clear()
    w.kube.calls.clear()
    with pytest.raises(InputError) as err:
        w.run(event)
    field = ".".join(str(p) for p in where)
    assert err.value.field == field or (err.value.field or "").startswith(field + "."), (
        err.value.field,
        field,
        str(err.value),
    )
    assert w.aws_calls == [], w.aws_calls
    assert w.kube.calls == [], w.kube.calls
    assert w.fingerprint() == before


@pytest.mark.parametrize("action", ["prepare", "set_desired", "verify", "backoff", "next_round"])
@FUZZ
@given(data=st.data())
def test_a_broken_step_input_is_refused_naming_its_field_and_nothing_is_called_or_written(
    moto_world: World, action: str, data: st.DataObject
) -> None:
    event, where = data.draw(broken(events(moto_world.instance)[action]))
    assert_refused_untouched(moto_world, event, where)


@pytest.mark.parametrize("event", [[], "prepare", None, 7, {"action": ["prepare"]}, {"action": "scale"}])
def test_an_input_that_is_no_step_input_is_refused(moto_world: World, event: Any) -> None:
    before = moto_world.fingerprint()
    moto_world.aws_calls.clear()
    with pytest.raises(InputError):
        moto_world.run(event)
    assert moto_world.aws_calls == [] and moto_world.fingerprint() == before


# --- the plan function's input: a direct invocation, a stream batch ---------------------------------

SNAPSHOT_KEY = "2026-11-02T12:00:00.000000Z"
STREAM = json.loads((TEMPLATE.parent / "events" / "stream-record.json").read_text())


@dataclass
class PlanRig:
    clients: Any
    app: Any
    aws_calls: list[str]
    armed: list[bool]

    def run(self, event: Any) -> Any:
        self.armed[0] = True
        try:
            return self.app.plan_event(self.clients, event, None)
        finally:
            self.armed[0] = False


PLAN_TABLES = {"SnapshotsTable": "plan-snapshots", "PlansTable": "plan-plans", "StateTable": "plan-state",
               "IdempotencyTable": "plan-idempotency"}  # fmt: skip


@pytest.fixture(scope="module")
def moto_plan(module_moto: None) -> PlanRig:
    """The plan function's handler logic (functions/plan/app.py) on clients built as in Lambda, on moto
    with the four tables of template.yaml; AWS calls through those clients are recorded."""
    import importlib.util

    from spillway.clients import build_clients
    from spillway.runtime import RuntimeConfig

    spec = importlib.util.spec_from_file_location(
        "plan_app_fuzzed", TEMPLATE.parent / "functions/plan/app.py"
    )
    assert spec is not None and spec.loader is not None
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    create_tables(TEMPLATE, boto3.client("dynamodb", region_name=REGION), PLAN_TABLES)
    session, calls, armed = recording_session()
    config = RuntimeConfig(
        cluster_name="ml", regions=(REGION,), snapshots_table="plan-snapshots", plans_table="plan-plans",
        state_table="plan-state", idempotency_table="plan-idempotency", cluster_access="url",
        kube_url="http://127.0.0.1:9",
    )  # fmt: skip
    return PlanRig(build_clients(config, session), app, calls, armed)


def plan_fingerprint() -> str:
    ddb = boto3.client("dynamodb", region_name=REGION)
    return json.dumps({t: ddb.scan(TableName=t)["Items"] for t in PLAN_TABLES.values()}, sort_keys=True,
                      default=str)  # fmt: skip


@pytest.mark.filterwarnings("ignore:Couldn't determine the remaining time left")  # no Lambda context
def test_the_unbroken_plan_inputs_are_read_and_looked_up(moto_plan: PlanRig) -> None:
    """The baseline: both inputs get as far as the snapshots table (no snapshot is stored, so nothing
    is planned), so the calls counted below are really counted."""
    from spillway.errors import SnapshotNotFound

    rig = moto_plan
    rig.aws_calls.clear()
    with pytest.raises(SnapshotNotFound):
        rig.run({"cluster": "ml", "snapshot_key": SNAPSHOT_KEY})
    assert rig.aws_calls
    rig.aws_calls.clear()
    result = rig.run(copy.deepcopy(STREAM))
    assert result["results"][0]["status"] == "failed" and rig.aws_calls


# What the plan function reads of a stream record; the other fields (eventID, ApproximateCreationDateTime,
# the item's other attributes...) are DynamoDB's to add to, and not read.
STREAM_PLACES = [
    ("Records",),
    ("Records", 0),
    ("Records", 0, "eventName"),
    ("Records", 0, "dynamodb"),
    ("Records", 0, "dynamodb", "NewImage"),
    ("Records", 0, "dynamodb", "NewImage", "cluster"),
    ("Records", 0, "dynamodb", "NewImage", "cluster", "S"),
    ("Records", 0, "dynamodb", "NewImage", "taken_at"),
    ("Records", 0, "dynamodb", "NewImage", "taken_at", "S"),
    ("Records", 0, "dynamodb", "SequenceNumber"),
]


@st.composite
def broken_stream(draw: st.DrawFn) -> tuple[dict[str, Any], tuple[Any, ...]]:
    doc = copy.deepcopy(STREAM)
    path = draw(st.sampled_from(STREAM_PLACES))
    parent, key = get(doc, path[:-1]), path[-1]
    value = parent[key]
    # without Records an event is a direct request (naming its cluster)
    ways = ["type"] + (["missing"] if isinstance(key, str) and path != ("Records",) else [])
    if isinstance(value, str):
        ways.append("identifier")
    if isinstance(value, dict) and path[-1] in ("cluster", "taken_at"):
        ways.append("unknown")  # a typed attribute has one type key
    way = draw(st.sampled_from(ways))
    if way == "type":
        parent[key] = draw(st.one_of(*(s for k, s in OTHER_KINDS.items() if k != json_kind(value))))
    elif way == "missing":
        del parent[key]
    elif way == "identifier":
        parent[key] = draw(st.sampled_from([value + b for b in IDENTIFIER_BREAKS[1:]] + [""]))
    else:
        value["N"] = "1"
    return doc, path


def assert_plan_refused(rig: PlanRig, event: Any, where: tuple[Any, ...]) -> None:
    before = plan_fingerprint()
    rig.aws_calls.clear()
    with pytest.raises(InputError) as err:
        rig.run(event)
    field = ".".join(str(p) for p in where) or None  # the whole input: no field to name
    # a typed attribute's broken "S" is named by its attribute
    assert err.value.field in (field, (field or "").removesuffix(".S")), (
        err.value.field,
        field,
        str(err.value),
    )
    assert rig.aws_calls == [], rig.aws_calls
    assert plan_fingerprint() == before


@FUZZ
@given(data=st.data())
def test_a_broken_stream_batch_is_refused_naming_its_field_before_anything_is_planned(
    moto_plan: PlanRig, data: st.DataObject
) -> None:
    event, where = data.draw(broken_stream())
    assert_plan_refused(moto_plan, event, where)


@FUZZ
@given(data=st.data())
def test_a_broken_plan_request_is_refused_naming_its_field_before_anything_is_read(
    moto_plan: PlanRig, data: st.DataObject
) -> None:
    event, where = data.draw(broken({"cluster": "ml", "snapshot_key": SNAPSHOT_KEY}))
    assume(event.get("snapshot_key", None) is not None)  # absent or null: the latest snapshot
    assert_plan_refused(moto_plan, event, where)


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({"cluster": "prod"}, "cluster"),  # another deployment's cluster
        ({"cluster": "ml", "snapshotkey": SNAPSHOT_KEY}, "snapshotkey"),  # misspelt: not "the latest"
        ({"Records": [], "cluster": "ml"}, "cluster"),
        ([], None),
        ("ml", None),
    ],
)
def test_a_plan_input_of_another_shape_is_refused(moto_plan: PlanRig, event: Any, field: str | None) -> None:
    assert_plan_refused(moto_plan, event, tuple(field.split(".")) if field else ())
