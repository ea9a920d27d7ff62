"""The CloudWatch contract: every metric an alarm or the dashboard reads is one that Spillway emits.

CloudWatch identifies a metric by its namespace, its name and its whole set of dimensions: an alarm or
a graph that names one dimension more or less than the emitter reads another metric, which never has
data ("You can create an alarm ... before you've created a custom metric. For the alarm to be valid,
you must include all of the dimensions for the custom metric in addition to the metric namespace and
metric name": *Using Amazon CloudWatch alarms*). Such a drift fails nowhere: the alarm sits in
INSUFFICIENT_DATA (or, with ``notBreaching``, OK) for ever and the widget is blank.

So both sides are read here as AWS reads them:

* what is read: ``template.yaml`` with its ``Fn::ForEach`` blocks expanded (``deploy/expand_foreach.py``):
  each alarm's ``Namespace``/``MetricName``/``Dimensions`` or ``Metrics[].MetricStat.Metric``; each
  dashboard metric row ``[namespace, name, dim, value, ..., {options}]`` with the ``"."`` shorthand
  (the value at the same place in the row above; *CloudWatch dashboard body structure*, metric widget
  metrics array), and each ``SEARCH('{Namespace,dim,...} ...')`` schema, whose dimension list is the
  exact set a metric must have to match (*CloudWatch search expression syntax*);
* what is emitted: the Embedded Metric Format documents the real handlers print (Powertools flushes
  them on stdout), under the environment ``Globals`` gives every function (``POWERTOOLS_SERVICE_NAME``,
  ``POWERTOOLS_METRICS_NAMESPACE``, which Powertools reads for what the code does not set), driven
  through each handler and its decorators with fakes behind them; and the ``PutMetricData`` tasks of
  the state machines. Each EMF directive is read as CloudWatch reads it: every dimension set of
  ``Dimensions`` applies to every metric of ``Metrics`` (*Specification: Embedded metric format*).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fakes import FakeCloud, FakeCluster, FakeLedger, FakeSnapshots, FakeWorkflows

from spillway.errors import AwsThrottled, DrainSuperseded, LifecycleActionPending
from spillway.local import objects as o
from spillway.local.cfn import load_template

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "ml"
REGION = "us-east-1"
TEMPLATE = load_template(ROOT / "template.yaml")
NAMESPACE = "Spillway"  # the namespace alarms and widgets read our metrics in; checked against Globals

_spec = importlib.util.spec_from_file_location(
    "expand_foreach_metrics", ROOT / "deploy" / "expand_foreach.py"
)
assert _spec is not None and _spec.loader is not None
_expand = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_expand)
EXPANDED: dict[str, Any] = _expand.expand(
    TEMPLATE, {"ClusterName": CLUSTER, "Regions": f"{REGION},us-west-2"}
)
RESOURCES: dict[str, Any] = {k: v for k, v in EXPANDED["Resources"].items() if isinstance(v, dict)}
GLOBAL_ENV: dict[str, Any] = TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]
# What CloudFormation gives the few references the metrics use (Ref, Sub) in this test's stack.
KNOWN = {
    "ClusterName": CLUSTER,
    "AWS::Region": REGION,
    "AWS::AccountId": "123456789012",
    "AWS::Partition": "aws",
    "Regions0": REGION,
}


# --- what is read ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Read:
    """One metric an alarm or a widget reads: ``pinned`` are the dimension values it names (a SEARCH
    names only some, and matches any value of the others)."""

    where: str
    namespace: str
    name: str
    dimensions: frozenset[str]
    pinned: tuple[tuple[str, str], ...] = ()


def resolve(value: Any) -> str | None:
    """A template value as CloudFormation gives it in this test's stack; None when it is another
    resource's attribute (a queue's name) that the contract does not need."""
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return KNOWN.get(value["Ref"])
    if isinstance(value, dict) and set(value) == {"Fn::Join"} and isinstance(value["Fn::Join"][1], dict):
        split = value["Fn::Join"][1].get("Fn::Split")  # the cluster's name made a resource name's part
        whole = resolve(split[1]) if split else None
        return None if whole is None else value["Fn::Join"][0].join(whole.split(split[0]))
    if isinstance(value, dict) and set(value) == {"Fn::Sub"}:
        text, given = (value["Fn::Sub"], {}) if isinstance(value["Fn::Sub"], str) else value["Fn::Sub"]
        known = {**KNOWN, **{k: resolve(v) for k, v in given.items()}}
        names = re.findall(r"\$\{([^}]+)\}", text)
        if any(known.get(n) is None for n in names):
            return None
        return re.sub(r"\$\{([^}]+)\}", lambda m: str(known[m.group(1)]), text)
    return None


KNOWN.update(
    {
        logical: str(resolve(props["Properties"]["FunctionName"]))
        for logical, props in RESOURCES.items()
        if props.get("Type") == "AWS::Serverless::Function"
    }
)


def _alarm_metric(where: str, metric: Mapping[str, Any]) -> Read:
    dims = metric.get("Dimensions") or []
    pinned = tuple(sorted((d["Name"], v) for d in dims if (v := resolve(d["Value"])) is not None))
    return Read(where, metric["Namespace"], metric["MetricName"], frozenset(d["Name"] for d in dims), pinned)


def alarms() -> dict[str, dict[str, Any]]:
    return {
        resolve(r["Properties"]["AlarmName"]) or logical: r["Properties"]
        for logical, r in RESOURCES.items()
        if r.get("Type") == "AWS::CloudWatch::Alarm"
    }


def alarm_reads() -> list[Read]:
    out = []
    for name, props in alarms().items():
        if "MetricName" in props:
            out.append(_alarm_metric(f"alarm {name}", props))
        for query in props.get("Metrics") or []:
            if "MetricStat" in query:
                out.append(_alarm_metric(f"alarm {name} ({query['Id']})", query["MetricStat"]["Metric"]))
    return out


def dashboard_body() -> dict[str, Any]:
    [dashboard] = [r for r in RESOURCES.values() if r.get("Type") == "AWS::CloudWatch::Dashboard"]
    text, variables = dashboard["Properties"]["DashboardBody"]["Fn::Sub"]
    assert set(variables) <= set(KNOWN), f"dashboard variables this test does not know: {set(variables)}"
    names = set(re.findall(r"\$\{([^}!]+)\}", text))
    assert names <= set(KNOWN), f"dashboard names unknown to this test: {names - set(KNOWN)}"
    body: dict[str, Any] = json.loads(re.sub(r"\$\{([^}!]+)\}", lambda m: KNOWN[m.group(1)], text))
    return body


SEARCH = re.compile(r"SEARCH\(\s*'\{([^}]*)\}\s*([^']*)'")
TERM = re.compile(r'([A-Za-z_][\w.-]*)\s*=\s*"([^"]*)"')


def search_reads(where: str, expression: str) -> list[Read]:
    """``SEARCH('{Namespace,dim1,dim2} MetricName="X" dim1="v"', ...)``: the metrics named X in that
    namespace whose dimension names are exactly dim1, dim2 (the schema), those the terms pin."""
    out = []
    for schema, terms in SEARCH.findall(expression):
        namespace, *dims = [part.strip().strip('"') for part in schema.split(",")]
        pairs = dict(TERM.findall(terms))
        name = pairs.pop("MetricName", None)
        assert name, f"{where}: a SEARCH without MetricName= reads every metric of its schema: {expression}"
        out.append(Read(where, namespace, name, frozenset(dims), tuple(sorted(pairs.items()))))
    return out


def dashboard_reads() -> list[Read]:
    out: list[Read] = []
    for widget in dashboard_body()["widgets"]:
        if widget.get("type") != "metric":
            continue
        title = widget["properties"].get("title", "?")
        previous: list[Any] = []
        for row_number, row in enumerate(widget["properties"]["metrics"], 1):
            where = f"dashboard '{title}' row {row_number}"
            if row and isinstance(row[0], dict):  # an expression
                out += search_reads(where, str(row[0].get("expression", "")))
                continue
            plain = [v for v in row if not isinstance(v, dict)]
            # "." repeats the value at the same place in the row above
            filled = [previous[i] if v == "." and i < len(previous) else v for i, v in enumerate(plain)]
            assert "." not in filled, f"{where}: '.' with nothing above it"
            assert len(filled) % 2 == 0, f"{where}: a dimension without a value: {row}"
            previous = filled
            namespace, name, *dims = filled
            pairs = list(zip(dims[::2], dims[1::2], strict=True))
            out.append(Read(where, namespace, name, frozenset(k for k, _ in pairs), tuple(sorted(pairs))))
    return out


def reads() -> list[Read]:
    return alarm_reads() + dashboard_reads()


# --- what is emitted ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Emitted:
    source: str
    namespace: str
    name: str
    dimensions: tuple[tuple[str, str], ...]

    @property
    def dimension_names(self) -> frozenset[str]:
        return frozenset(k for k, _ in self.dimensions)


def emf_documents(out: str) -> list[dict[str, Any]]:
    docs = []
    for line in out.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            docs.append(json.loads(line))
    return docs


def emf_problems(doc: Mapping[str, Any]) -> list[str]:
    """What CloudWatch would refuse of one EMF document (*Specification: Embedded metric format*: at
    most 100 metrics per directive, 30 dimensions per set, 100 values per metric; every dimension a
    string member of the root, every metric a number or an array of numbers there)."""
    out = []
    for directive in doc["_aws"]["CloudWatchMetrics"]:
        if len(directive["Metrics"]) > 100:
            out.append(f"{len(directive['Metrics'])} metrics in one directive")
        for dims in directive["Dimensions"]:
            if len(dims) > 30:
                out.append(f"{len(dims)} dimensions in one set")
            out += [
                f"dimension {d!r} is not a string member" for d in dims if not isinstance(doc.get(d), str)
            ]
        for metric in directive["Metrics"]:
            value = doc.get(metric["Name"])
            values = value if isinstance(value, list) else [value]
            if not values or len(values) > 100 or not all(isinstance(v, int | float) for v in values):
                out.append(f"metric {metric['Name']!r} holds {value!r}")
    return out


def emissions_of(source: str, out: str) -> list[Emitted]:
    found = []
    for doc in emf_documents(out):
        assert emf_problems(doc) == [], (source, doc)
        for directive in doc["_aws"]["CloudWatchMetrics"]:
            for dims in directive["Dimensions"]:
                pairs = tuple(sorted((d, str(doc[d])) for d in dims))
                for metric in directive["Metrics"]:
                    found.append(Emitted(source, directive["Namespace"], metric["Name"], pairs))
    return found


@dataclass
class LambdaContext:
    function_name: str
    memory_limit_in_mb: int = 1024
    aws_request_id: str = "0f6a1b2c-3d4e-5f60-7182-93a4b5c6d7e8"
    remaining_ms: int = 60_000
    invoked_function_arn: str = field(default="")

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def load_app(function: str) -> Any:
    spec = importlib.util.spec_from_file_location(
        f"metrics_contract_{function}", ROOT / "functions" / function / "app.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def team_limited_settings(nodes: str) -> Any:
    """The plan function's settings for a cluster whose tenant team-a may have ``nodes`` nodes, with
    the state machines its plans start."""
    from spillway.act.planning import PlanSettings
    from spillway.config import PlannerConfig

    return PlanSettings(
        planner=PlannerConfig(
            cluster=CLUSTER, regions=(REGION,), tenants={"team-a": {"limits": {"nodes": nodes}}}
        ),
        scale_up_arn=f"arn:aws:states:{REGION}:123456789012:stateMachine:spillway-{CLUSTER}-scale-up",
        scale_down_arn=f"arn:aws:states:{REGION}:123456789012:stateMachine:spillway-{CLUSTER}-scale-down",
    )


def invoke(app: Any, event: Any, function: str, *, raises: type[BaseException] | None = None) -> str:
    """Run ``app.handler`` as Lambda would (decorators and all); what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        context = LambdaContext(f"spillway-{CLUSTER}-{function}")
        if raises is None:
            app.handler(event, context)
        else:
            with pytest.raises(raises):
                app.handler(event, context)
    return out.getvalue()


NOW = datetime.now(UTC).replace(microsecond=0)
NODE, INSTANCE = "ip-10-0-1-10.ec2.internal", "i-0a1b2c3d4e5f60718"


def observe_runs(env: pytest.MonkeyPatch) -> list[Emitted]:
    from spillway.config import PlannerConfig
    from spillway.errors import KubeUnavailable, ObservationFailed
    from spillway.observe import ObserveConfig

    app = load_app("observe")

    def clients(kube: FakeCluster) -> Any:
        cloud = FakeCloud(cluster=CLUSTER)
        cloud.add_group("gpu", [INSTANCE], region=REGION, desired=1, max_size=3, instance_type="g5.xlarge")
        return SimpleNamespace(
            config=SimpleNamespace(cluster_name=CLUSTER, observe_window_seconds=0, planner=PlannerConfig()),
            kube=kube,
            aws=cloud,
            snapshots=FakeSnapshots(),
            observe_config=lambda: ObserveConfig(cluster=CLUSTER),
        )

    kube = FakeCluster(
        [o.node(NODE, instance=INSTANCE, zone="us-east-1a", ready=False)],
        [o.pod("train-0", "team-a", cpu="1", memory="1Gi")],
    )
    env.setattr(app, "get_clients", lambda: clients(kube))
    found = emissions_of("observe", invoke(app, {}, "observe"))
    broken = FakeCluster()
    broken.fail("iter_nodes", KubeUnavailable("GET /api/v1/nodes: connection refused"))
    env.setattr(app, "get_clients", lambda: clients(broken))
    return found + emissions_of("observe", invoke(app, {}, "observe", raises=ObservationFailed))


def plan_snapshot() -> Any:
    """Two tenants' GPU pods pending on an empty GPU group; team-a may have one node."""
    from plan_world import NOW as PLAN_NOW
    from plan_world import World

    from spillway.model.snapshot import Snapshot

    world = World()
    world.group("gpu-east", "g5.xlarge", max_size=8, gpu_taint=True, desired=0)
    world.gpu_pods("a", 3, gpus=1, cpu="3", memory="12Gi", namespace="team-a")
    world.gpu_pods("b", 1, gpus=1, cpu="3", memory="12Gi", namespace="team-b")
    cluster, groups, _, _ = world.parsed()
    return Snapshot.build(cluster, groups, PLAN_NOW)


def plan_runs(env: pytest.MonkeyPatch) -> list[Emitted]:
    """A plan on fakes (the real ``run_plan``) that adds a node for one tenant and holds another's pods at
    its limit, recorded by the handler; then the two failures the handler counts itself."""
    from plan_world import NOW as PLAN_NOW

    from spillway.act.planning import run_plan
    from spillway.errors import StaleSnapshot, StateConflict, StateTooLarge

    app = load_app("plan")
    snapshots = FakeSnapshots()
    snapshots.add(plan_snapshot())
    settings = team_limited_settings("1")
    failure: list[BaseException] = []

    def plan_once(clients: Any, ref: Any, context: Any) -> dict[str, Any]:
        if failure:
            raise failure[0]
        outcome = run_plan(ref, snapshots=snapshots, ledger=FakeLedger(), executions=FakeWorkflows(),
                           settings=settings, now=PLAN_NOW + timedelta(seconds=20))  # fmt: skip
        result: dict[str, Any] = outcome.to_dict()
        assert result.get("tenants"), "the plan names no tenant: the per-tenant metrics go unchecked"
        app.record_outcome(result)
        return result

    env.setattr(app, "plan_once", plan_once)
    env.setattr(app, "get_clients", lambda: SimpleNamespace(config=SimpleNamespace(cluster_name=CLUSTER),
                                                            snapshots=snapshots))  # fmt: skip
    found = emissions_of("plan", invoke(app, {"cluster": CLUSTER}, "plan"))
    for error in (StaleSnapshot("old"), StateConflict("raced")):
        failure[:] = [error]
        found += emissions_of("plan", invoke(app, {"cluster": CLUSTER}, "plan", raises=type(error)))
    # from the stream a failed plan is a batch item failure, counted by the function (PlanFailures)
    failure[:] = [StateTooLarge("state item 512 KiB compressed")]
    batch = json.loads((ROOT / "events" / "stream-record.json").read_text())
    return found + emissions_of("plan", invoke(app, batch, "plan"))


def scale_runs(env: pytest.MonkeyPatch) -> list[Emitted]:
    """A scale-up's prepare that uncordons a node Spillway cordoned, and a backoff after a failed launch."""
    from spillway.act.planning import PlanSettings
    from spillway.act.scale import ScaleSteps
    from spillway.config import PlannerConfig
    from spillway.model.k8s import CORDONED_BY_SPILLWAY

    app = load_app("scale")
    kube = FakeCluster(
        [o.node(NODE, instance=INSTANCE, zone="us-east-1a", unschedulable=True,
                annotations={CORDONED_BY_SPILLWAY: "2026-11-02T11:00:00Z drain"})],
    )  # fmt: skip
    cloud = FakeCloud(cluster=CLUSTER)
    cloud.add_group("gpu", [INSTANCE, "i-0a1b2c3d4e5f60719"], desired=2, max_size=4)
    ledger = FakeLedger()
    settings = PlanSettings(planner=PlannerConfig(cluster=CLUSTER, regions=(REGION,)))

    def scale_steps(metric: Callable[[str, float], None], remaining_ms: object = None) -> ScaleSteps:
        return ScaleSteps(kube=kube, aws=cloud, ledger=ledger, snapshots=FakeSnapshots(), settings=settings,
                          metric=metric)  # fmt: skip

    env.setattr(app, "get_clients", lambda: SimpleNamespace(config=SimpleNamespace(cluster_name=CLUSTER),
                                                            scale_steps=scale_steps))  # fmt: skip
    group = {"group": "gpu", "region": REGION, "from": 2, "to": 3, "grow": True, "new_nodes": 1, "pods": 1,
             "uncordon": [NODE], "reasons": {NODE: "reused for pending pods"}}  # fmt: skip
    prepare = {"action": "prepare", "cluster": CLUSTER, "plan_id": "p1", "round": 1,
               "launch_timeout_seconds": 600, "group": group}  # fmt: skip
    found = emissions_of("scale", invoke(app, prepare, "scale"))
    prep = {"set": True, "count": 1, "owner": "up-p1-1-us-east-1-gpu", "target": 3, "live_desired": 2,
            "max_size": 4, "before": [], "since": "2026-11-02T11:59:00Z", "deadline": "2026-11-02T12:10:00Z",
            "uncordoned": [], "gone": []}  # fmt: skip
    launch = {"status": "timeout", "reason": "gpu: 0 of 1 new node(s) Ready", "ready": 0, "wanted": 1}
    backoff = {"action": "backoff", "cluster": CLUSTER, "group": group, "prep": prep, "launch": launch}
    found += emissions_of("scale", invoke(app, backoff, "scale"))
    # and one EC2 refused for the group's settings (LaunchesMisconfigured)
    refused = {"status": "failed", "reason": "gpu: launch failed, not for capacity", "failure": o.MISSING_AMI}
    found += emissions_of("scale", invoke(app, {**backoff, "launch": refused}, "scale"))
    # an overflow round: the scale function plans again on the latest snapshot (its own plan metrics)
    from plan_world import NOW as PLAN_NOW

    replan_snapshots = FakeSnapshots()
    snapshot = plan_snapshot()
    ref = replan_snapshots.add(snapshot)
    replan_cloud = FakeCloud(cluster=CLUSTER)
    replan_cloud.node_groups_by_region = {REGION: list(snapshot.groups)}  # the live groups, as observed

    def replan_steps(metric: Callable[[str, float], None], remaining_ms: object = None) -> ScaleSteps:
        return ScaleSteps(kube=FakeCluster(), aws=replan_cloud, ledger=FakeLedger(), snapshots=replan_snapshots,
                          settings=settings, metric=metric, clock=lambda: PLAN_NOW + timedelta(seconds=20))  # fmt: skip

    env.setattr(app, "get_clients", lambda: SimpleNamespace(config=SimpleNamespace(cluster_name=CLUSTER),
                                                            scale_steps=replan_steps))  # fmt: skip
    next_round = {"action": "next_round", "cluster": CLUSTER, "plan_id": "p1", "snapshot_key": ref.key,
                  "round": 1, "max_rounds": 3, "poll_seconds": 15, "launch_timeout_seconds": 600, "rounds": [],
                  "results": [{"group": "gpu-west", "region": REGION, "outcome": "backed_off"}]}  # fmt: skip
    replanned = emissions_of("scale", invoke(app, next_round, "scale"))
    assert "ScaleUpNodes" in {e.name for e in replanned}, "the re-plan launched nothing"
    # and a step that raises what ScaleUp retries by name (AnsweredErrors)
    env.setattr(app, "scale_step", _raising(AwsThrottled("SetDesiredCapacity: Rate exceeded")))
    throttled = emissions_of("scale", invoke(app, prepare, "scale", raises=AwsThrottled))
    return found + replanned + throttled


def drain_runs(env: pytest.MonkeyPatch) -> list[Emitted]:
    """The drain function's record of a drain that met its deadline, and of a scale-down part that
    drained none of its nodes."""
    from spillway.act.drain import Drainer

    app = load_app("drain")

    def drainer(hook: Any, remaining_ms: Any = None) -> Drainer:  # Clients.drainer's signature
        return Drainer(
            FakeCluster(),
            FakeCloud(cluster=CLUSTER),
            ledger=FakeLedger(),
            cluster=CLUSTER,
            regions=[REGION],
            on_outcome=hook,
        )

    env.setattr(app, "get_clients", lambda: SimpleNamespace(config=SimpleNamespace(cluster_name=CLUSTER),
                                                            drainer=drainer))  # fmt: skip
    timeout = {
        "Error": "DrainTimeout",
        "Cause": json.dumps({"errorType": "DrainTimeout", "errorMessage": "late"}),
    }
    record = {"action": "record", "state": {"cluster": CLUSTER, "node": NODE, "error": timeout}}
    undrained = {"action": "undrained", "outcome": "skipped", "nodes": 2}
    found = emissions_of("drain", invoke(app, record, "drain")) + emissions_of(
        "drain", invoke(app, undrained, "drain")
    )
    # and a step that raises what DrainNode retries by name (AnsweredErrors)
    env.setattr(app, "run_action", _raising(LifecycleActionPending(f"{INSTANCE} is still Terminating")))
    pending = {"action": "complete_lifecycle", "drain": {}}
    return found + emissions_of("drain", invoke(app, pending, "drain", raises=LifecycleActionPending))


def _raising(error: Exception) -> Callable[..., Any]:
    def step(*args: Any) -> Any:
        raise error

    return step


def interrupt_runs(env: pytest.MonkeyPatch) -> list[Emitted]:
    """A batch of a Spot interruption warning for a node of a Spot group (a drain, and its Spot groups
    backed off), the same warning malformed, and an event Spillway does not act on."""
    from test_interrupt import WARNED_AT
    from test_interrupt import world as spot_world

    from spillway.act.interrupt import Interrupter

    app = load_app("interrupt")
    snapshots = FakeSnapshots()
    snapshots.add(spot_world())  # its cluster is "prod": the interrupter reads that cluster's snapshot

    def interrupter(metric: Callable[[str, float], None], remaining_ms: object = None) -> Interrupter:
        return Interrupter(snapshots=snapshots, workflows=FakeWorkflows(), ledger=FakeLedger(),
                           cluster="prod", regions=(REGION,), drain_node_arn="arn:aws:states:::x",
                           cloud=FakeCloud(cluster="prod"), metric=metric,
                           clock=lambda: WARNED_AT + timedelta(seconds=10))  # fmt: skip

    env.setattr(app, "get_clients", lambda: SimpleNamespace(config=SimpleNamespace(cluster_name=CLUSTER),
                                                            interrupter=interrupter))  # fmt: skip
    warning = json.loads((ROOT / "events" / "interrupt-spot-warning.json").read_text())
    malformed = {**warning, "detail": {"instance-action": "terminate"}}  # no instance-id
    other = {**warning, "detail-type": "EC2 Instance Launch Successful"}
    sqs = json.loads((ROOT / "events" / "interrupt-sqs.json").read_text())
    [record] = sqs["Records"][:1]
    batch = {"Records": [{**record, "messageId": str(i), "body": json.dumps(doc)}
                         for i, doc in enumerate((warning, malformed, other))]}  # fmt: skip
    found = emissions_of("interrupt", invoke(app, batch, "interrupt"))
    assert {"InterruptDrainsStarted", "SpotGroupsBackedOff"} <= {e.name for e in found}, (
        "the warning did nothing"
    )
    return found


def handler_emissions(**overrides: str) -> list[Emitted]:
    """Every metric the handlers print, run under the template's Globals environment (``overrides``
    on top: a variable an operator may set on one function)."""
    from spillway.observability import metrics

    with pytest.MonkeyPatch.context() as env:
        for name, value in GLOBAL_ENV.items():
            if (resolved := resolve(value)) is not None:
                env.setenv(name, resolved)
        env.setenv("CLUSTER_NAME", CLUSTER)
        for name, value in overrides.items():
            env.setenv(name, value)
        try:
            return [
                *observe_runs(env),
                *plan_runs(env),
                *scale_runs(env),
                *drain_runs(env),
                *interrupt_runs(env),
            ]
        finally:
            metrics.clear_metrics()
            metrics.clear_default_dimensions()


@cache
def emitted() -> tuple[Emitted, ...]:
    return tuple(handler_emissions()) + tuple(state_machine_emissions())


def state_machine_emissions() -> Iterator[Emitted]:
    """``PutMetricData`` tasks of the state machines (``${ClusterName}`` substituted, as the template does;
    a ``Value.$`` takes each value a Pass state of the machine writes at that path, or in an object it
    writes there)."""
    for logical, r in RESOURCES.items():
        if r.get("Type") != "AWS::Serverless::StateMachine":
            continue
        props = r["Properties"]
        text = (ROOT / props["DefinitionUri"]).read_text()
        subs = {k: resolve(v) for k, v in (props.get("DefinitionSubstitutions") or {}).items()}
        text = re.sub(r"\$\{([A-Za-z0-9_]+)\}", lambda m, subs=subs: subs.get(m.group(1)) or "0", text)
        states = dict(_all_states(json.loads(text)["States"]))
        written: dict[str, set[str]] = {}
        for state in states.values():
            if state.get("Type") == "Pass" and "Result" in state and "ResultPath" in state:
                for path, value in _paths(state["ResultPath"], state["Result"]):
                    written.setdefault(path, set()).add(str(value))
        for name, state in states.items():
            if not str(state.get("Resource", "")).endswith("cloudwatch:putMetricData"):
                continue
            params = state["Parameters"]
            for datum in params["MetricData"]:
                choices = [
                    [
                        (d["Name"], v)
                        for v in ([d["Value"]] if "Value" in d else sorted(written[d["Value.$"]]))
                    ]
                    for d in datum.get("Dimensions", [])
                ]
                for combo in _product(choices):
                    yield Emitted(
                        f"{logical}.{name}", params["Namespace"], datum["MetricName"], tuple(sorted(combo))
                    )


def _paths(path: str, value: Any) -> Iterator[tuple[str, Any]]:
    """``value`` written at ``path``, and each value of an object in it at its own path."""
    yield path, value
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _paths(f"{path}.{key}", inner)


def _all_states(states: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for name, state in states.items():
        yield name, state
        for key in ("Iterator", "ItemProcessor"):
            if key in state:
                yield from _all_states(state[key]["States"])
        for branch in state.get("Branches", []):
            yield from _all_states(branch["States"])


def _product(choices: list[list[tuple[str, str]]]) -> Iterator[list[tuple[str, str]]]:
    if not choices:
        yield []
        return
    for first in choices[0]:
        for rest in _product(choices[1:]):
            yield [first, *rest]


def matches(read: Read, emission: Emitted) -> bool:
    return (
        read.namespace == emission.namespace
        and read.name == emission.name
        and read.dimensions == emission.dimension_names
        and set(read.pinned) <= set(emission.dimensions)
    )


# --- the contract ------------------------------------------------------------------------------


def test_the_template_reads_metrics_at_all() -> None:
    """The parsers find what the template reads (a parser that found nothing would pass everything)."""
    ours = [r for r in reads() if r.namespace == NAMESPACE]
    assert {r.where.split(" ")[0] for r in ours} == {"alarm", "dashboard"}
    assert any(r.where.startswith("alarm") and "Outcome" in r.dimensions for r in ours)
    assert any("SEARCH" not in r.where and r.pinned and r.where.startswith("dashboard") for r in ours)
    assert len({r.dimensions for r in ours}) >= 4  # plain, Outcome, Tenant, Tenant+Limit


def test_every_spillway_metric_an_alarm_or_widget_reads_is_emitted_with_exactly_its_dimensions() -> None:
    found = emitted()
    missing = []
    for read in reads():
        if read.namespace != NAMESPACE:
            continue
        if not any(matches(read, e) for e in found):
            near = sorted({tuple(sorted(e.dimension_names)) for e in found if e.name == read.name})
            missing.append(f"{read.where}: {read.name} {sorted(read.dimensions)} {dict(read.pinned)}; "
                           f"emitted with {near or 'nothing'}")  # fmt: skip
    assert missing == []


def test_a_renamed_metric_or_a_dimension_more_would_be_found() -> None:
    """The check is not vacuous: the same read with one dimension more, or another name, matches nothing."""
    found = emitted()
    [held] = [r for r in alarm_reads() if r.name == "PodsHeldByLimits"]
    assert any(matches(held, e) for e in found)
    assert not any(matches(Read("x", held.namespace, held.name, held.dimensions | {"Tenant"}, held.pinned), e)
                   for e in found)  # fmt: skip
    assert not any(matches(Read("x", held.namespace, "PodHeldByLimits", held.dimensions, held.pinned), e)
                   for e in found)  # fmt: skip


def test_the_globals_give_every_function_the_service_and_namespace_the_alarms_name() -> None:
    from spillway.observability import NAMESPACE as CODE_NAMESPACE
    from spillway.observability import SERVICE

    assert GLOBAL_ENV["POWERTOOLS_METRICS_NAMESPACE"] == CODE_NAMESPACE == NAMESPACE
    assert GLOBAL_ENV["POWERTOOLS_SERVICE_NAME"] == SERVICE
    for logical, r in RESOURCES.items():
        if r.get("Type") == "AWS::Serverless::Function":
            own = (r["Properties"].get("Environment") or {}).get("Variables") or {}
            assert not {"POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE"} & set(own), logical
    pinned_services = {v for r in reads() if r.namespace == NAMESPACE for k, v in r.pinned if k == "service"}
    assert pinned_services == {SERVICE}
    # the Cluster dimension is the function's CLUSTER_NAME, the very parameter the alarms put in it
    assert GLOBAL_ENV["CLUSTER_NAME"] == {"Ref": "ClusterName"}
    assert {v for r in reads() if r.namespace == NAMESPACE for k, v in r.pinned if k == "Cluster"} == {
        CLUSTER
    }
    # Powertools prints no metric at all when this is true
    assert str(GLOBAL_ENV.get("POWERTOOLS_METRICS_DISABLED", "false")).lower() == "false"


def test_every_emission_of_spillway_carries_the_service_and_the_cluster() -> None:
    """What the runbook says of all metrics: namespace Spillway, dimensions service=spillway and Cluster."""
    ours = [e for e in emitted() if e.namespace == NAMESPACE and e.name != "ColdStart"]
    wrong = sorted({(e.source, e.name, e.dimensions) for e in ours
                    if not {("service", "spillway"), ("Cluster", CLUSTER)} <= set(e.dimensions)})  # fmt: skip
    assert wrong == []


def test_the_service_dimension_is_spillway_s_whatever_powertools_service_name_says() -> None:
    """``POWERTOOLS_SERVICE_NAME`` is Powertools' knob for a function's service (Logger's too), one an
    operator may set on one function; the alarms, the dashboard and DrainNode's own PutMetricData all
    name ``service=spillway``, so every metric must say so itself, not take it from the variable."""
    found = handler_emissions(POWERTOOLS_SERVICE_NAME="spillway-renamed")
    ours = [e for e in found if e.namespace == NAMESPACE and e.name != "ColdStart"]
    assert {e.source for e in ours} == {"observe", "plan", "scale", "drain", "interrupt"}
    wrong = sorted({(e.source, e.name, dict(e.dimensions).get("service")) for e in ours
                    if dict(e.dimensions).get("service") != "spillway"})  # fmt: skip
    assert wrong == []


def test_lambda_and_state_machine_alarms_name_this_stack_s_functions_and_state_machines() -> None:
    functions = {resolve(r["Properties"]["FunctionName"]) for r in RESOURCES.values()
                 if r.get("Type") == "AWS::Serverless::Function"}  # fmt: skip
    machines = {resolve(r["Properties"]["Name"]) for r in RESOURCES.values()
                if r.get("Type") == "AWS::Serverless::StateMachine"}  # fmt: skip
    for read in reads():
        for key, value in read.pinned:
            if read.namespace == "AWS/Lambda" and key == "FunctionName":
                assert value in functions, read
            if read.namespace == "AWS/States" and key == "StateMachineArn":
                assert value.rpartition(":")[2] in machines, read


# --- the runbook (README "Alarms (runbook)") names what exists ----------------------------------


def runbook() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## Alarms (runbook)")
    return text[start : text.index("\n## ", start + 1)]


def runbook_rows(header: str) -> list[list[str]]:
    """The rows of the runbook's table whose header starts with ``| <header> |``, as cells."""
    lines = runbook().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(f"| {header} |"))
    rows = []
    for line in lines[first + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def spans(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_every_metric_the_runbook_tells_of_is_emitted_with_the_dimensions_it_gives() -> None:
    """The metric table: the names the code really emits, each with service and Cluster and the extra
    dimensions its 'from' cell names (``+ `Tenant` (and again + `Limit`)``: one set, then one more)."""
    found = emitted()
    base = {"service", "Cluster"}
    problems = []
    for name_cell, from_cell, _ in runbook_rows("metric"):
        extras = [s for s in spans(from_cell) if s in {"Tenant", "Limit", "Outcome", "Function"}]
        expected = {frozenset(base | set(extras[: i + 1])) for i in range(len(extras))} or {frozenset(base)}
        for name in spans(name_cell):
            sets = {e.dimension_names for e in found if e.namespace == NAMESPACE and e.name == name}
            if sets and sets != expected:
                problems.append(f"{name}: the runbook gives {sorted(map(sorted, expected))}, "
                                f"the code emits {sorted(map(sorted, sets))}")  # fmt: skip
    assert problems == []


def test_every_metric_an_alarm_of_the_runbook_names_is_emitted() -> None:
    """A metric the alarm table sends an operator to (its name, or `metric X` in its row) exists: the
    handlers print it, under the dimensions the alarms read."""
    metric_names = {n for name_cell, _, _ in runbook_rows("metric") for n in spans(name_cell)}
    named = {s for row in runbook_rows("alarm") for cell in row for s in spans(cell)} & metric_names
    # the parser reads the table
    assert {"GroupsBackedOff", "LongestNotReadySeconds", "InterruptMalformed"} <= named
    emitted_names = {e.name for e in emitted() if e.namespace == NAMESPACE}
    assert sorted(named - emitted_names) == []


# --- alarm semantics: periods against how often a metric gets a datapoint -----------------------


def parameter_default(name: str) -> Any:
    return TEMPLATE["Parameters"][name]["Default"]


def number(value: Any) -> float:
    """An alarm's number as deployed with the parameters' defaults (a Ref, or a FindInMap keyed by one)."""
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return float(parameter_default(value["Ref"]))
    if isinstance(value, dict) and set(value) == {"Fn::FindInMap"}:
        mapping, key, item = (str(parameter_default(v["Ref"])) if isinstance(v, dict) else v
                              for v in value["Fn::FindInMap"])  # fmt: skip
        return float(TEMPLATE["Mappings"][mapping][key][item])
    return float(value)


# Schedules an operator may give ObserveSchedule (EventBridge Scheduler: rate(value unit), unit minute,
# minutes, hour, hours, day or days; cron(minutes hours day-of-month month day-of-week year)), and how
# often each starts observe at most.
SCHEDULES = {
    "rate(1 minute)": 60,
    "rate(1 minutes)": 60,
    "rate(2 minutes)": 120,
    "rate(5 minutes)": 300,
    "rate(1 hour)": 3600,
    "rate(1 day)": 86_400,
    "cron(0/2 * * * ? *)": 120,
    "cron(0 * * * ? *)": 3600,
}


def accepted_schedules() -> list[str]:
    """The schedules of :data:`SCHEDULES` the ObserveSchedule parameter takes (CloudFormation matches
    AllowedPattern against the whole value)."""
    parameter = TEMPLATE["Parameters"]["ObserveSchedule"]
    pattern, values = parameter.get("AllowedPattern"), parameter.get("AllowedValues")
    return [
        s
        for s in SCHEDULES
        if (pattern is None or re.fullmatch(pattern, s)) and (values is None or s in values)
    ]


def steady_cadence_seconds(schedule: str) -> dict[str, float]:
    """The longest wait for a metric's next datapoint while nothing fails, by the function emitting it.

    observe: one flush per start of its schedule (``ObserveSchedule``). plan: one plan per stored
    snapshot, and observe stores one when demand changed or, when it did not, once the heartbeat is
    due, which an observation (every ``interval_seconds``) sees up to one interval late, or at the next
    start when the schedule starts observe less often: in a steady state (the state an alarm on "every
    plan for N minutes" is about) that is the gap."""
    from spillway.observe import ObserveConfig

    start = SCHEDULES[schedule]
    config = ObserveConfig(cluster=CLUSTER)
    return {"observe": start, "plan": max(config.heartbeat_minutes * 60 + config.interval_seconds, start)}


def test_the_observe_schedule_parameter_takes_its_default_and_says_what_it_takes() -> None:
    parameter = TEMPLATE["Parameters"]["ObserveSchedule"]
    assert parameter["Default"] in accepted_schedules()
    assert "ObserveSchedule" in parameter.get("ConstraintDescription", "")


@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_an_alarm_that_needs_every_period_breaching_has_a_datapoint_in_every_period(schedule: str) -> None:
    """An alarm whose DatapointsToAlarm is more than 1 holds only while every one of those periods has
    a breaching datapoint. A period without one is missing, and when fewer real datapoints than
    EvaluationPeriods are in its evaluation range, CloudWatch fills the missing ones as TreatMissingData
    says, notBreaching here: then the alarm goes OK ("How alarm state is evaluated when data is
    missing", *Using Amazon CloudWatch alarms*). So such an alarm's Period must be at least the
    longest wait between two datapoints of its metric in the state it alarms on, for every schedule
    of observe the template accepts (with rate(2 minutes), pending-too-long's 3 of 3 one-minute
    periods never all held a datapoint)."""
    if schedule not in accepted_schedules():
        return
    sources: dict[str, set[str]] = {}
    for e in emitted():
        sources.setdefault(e.name, set()).add(e.source.split(".")[0])
    cadence = steady_cadence_seconds(schedule)
    problems = []
    for name, props in alarms().items():
        stats = [(props["MetricName"], props["Period"])] if props.get("Namespace") == NAMESPACE else []
        stats += [(q["MetricStat"]["Metric"]["MetricName"], q["MetricStat"]["Period"])
                  for q in props.get("Metrics") or []
                  if q.get("MetricStat", {}).get("Metric", {}).get("Namespace") == NAMESPACE]  # fmt: skip
        periods = number(props["EvaluationPeriods"])
        needed = number(props.get("DatapointsToAlarm", props["EvaluationPeriods"]))
        if (
            needed <= 1 or needed < periods or not stats
        ):  # M of N (Overflow): missing ones are simply not breaching
            continue
        # a stopped emitter is not what these alarms are about (the functions' own alarms are)
        assert props.get("TreatMissingData") in ("notBreaching", "missing"), name
        for metric, period in stats:
            by = sources[metric]
            assert by <= set(cadence), f"{name}: {metric} comes from {by}, not a steady emitter"
            gap = max(cadence[s] for s in by)
            if number(period) < gap:
                problems.append(f"{name}: {needed:g} of {periods:g} periods of {number(period):g} s, but "
                                f"{metric} gets a datapoint only every {gap:g} s")  # fmt: skip
    assert problems == []


def test_held_by_limits_looks_at_exactly_the_minutes_its_parameter_allows() -> None:
    """Each allowed ``HeldByLimitsAlarmMinutes`` is whole periods of the alarm, within the day an alarm
    may look back (EvaluationPeriods x Period at most one day: *Using Amazon CloudWatch alarms*)."""
    [props] = [p for n, p in alarms().items() if n.endswith("-held-by-limits")]
    parameter = TEMPLATE["Parameters"]["HeldByLimitsAlarmMinutes"]
    # sam build expands Fn::FindInMap itself (language extensions) and reads a Number parameter's value
    # as an integer, which is no mapping key: "Fn::FindInMap layout is incorrect", no build.
    assert parameter["Type"] == "String"
    assert parameter["Default"] in parameter["AllowedValues"]
    mapping, _, item = props["EvaluationPeriods"]["Fn::FindInMap"]
    assert props["DatapointsToAlarm"] == props["EvaluationPeriods"]
    for minutes in parameter["AllowedValues"]:
        periods = TEMPLATE["Mappings"][mapping][str(minutes)][item]
        assert periods * props["Period"] == int(minutes) * 60 <= 86_400, minutes


def test_a_widget_on_auto_scaling_group_metrics_tells_how_to_turn_them_on() -> None:
    """Auto Scaling sends a group's GroupInServiceInstances (and the other group metrics) only once its
    group metrics collection is enabled (EnableMetricsCollection, Amazon EC2 Auto Scaling API); until
    then such a widget is blank, so the runbook names the call."""
    group_reads = [r for r in dashboard_reads() if r.namespace == "AWS/AutoScaling"]
    assert group_reads, "no widget reads group metrics: drop this test"
    text = re.sub(r"\s+", " ", runbook())
    for read in group_reads:
        assert read.name in text, read
    assert "aws autoscaling enable-metrics-collection" in text


# Metrics that are a level at the time of one observation or one plan (pods waiting, nodes), not a
# count of things done: the README's metric table ("the cluster as observed"; "per plan: ... pending
# pods with no place"; "pods held by limits").
LEVELS = {"PendingPods", "UnschedulablePods", "OldestPendingSeconds", "OldestUnheldPendingSeconds", "Nodes", "NotReadyNodes", "LongestNotReadySeconds",
          "UnplaceablePods", "GangPodsHeldAtHome", "PodsHeldByLimits", "TenantPodsHeld", "GangOrphans", "GangOrphansBusy",
          "GangInstanceReadsFailed"}  # fmt: skip


def dashboard_stats() -> Iterator[tuple[str, str, str]]:
    """(where, metric, statistic) of every Spillway metric a widget graphs: a row's own ``stat``, else
    the widget's; a SEARCH's is its second argument."""
    for read, (widget, row) in zip(dashboard_reads(), _dashboard_rows(), strict=True):
        if read.namespace != NAMESPACE:
            continue
        options = next((v for v in row if isinstance(v, dict)), {})
        search = re.search(r"SEARCH\(.*?,\s*'(\w+)'", str(options.get("expression", "")))
        stat = search.group(1) if search else options.get("stat", widget["properties"].get("stat"))
        yield read.where, read.name, str(stat)


def _dashboard_rows() -> Iterator[tuple[dict[str, Any], list[Any]]]:
    for widget in dashboard_body()["widgets"]:
        if widget.get("type") == "metric":
            for row in widget["properties"]["metrics"]:
                for _ in (
                    search_reads("", str(row[0].get("expression", ""))) if isinstance(row[0], dict) else [0]
                ):
                    yield widget, row


def test_the_dashboard_never_sums_a_level_over_the_plans_or_observations_of_a_period() -> None:
    """Summed, a level grows with how often it was measured (a plan every 20 s in a burst, one every
    5 minutes when quiet) rather than with what it measures."""
    summed = [(where, name) for where, name, stat in dashboard_stats() if name in LEVELS and stat == "Sum"]
    assert {name for _, name, _ in dashboard_stats()} >= LEVELS  # each is on the dashboard
    assert summed == []


def test_the_runbook_names_every_function_a_metric_comes_from() -> None:
    """The metric table's 'from' cell names each function (or state machine) that emits the metric, so
    an operator reading an alarm on it knows every place to look."""
    sources: dict[str, set[str]] = {}
    for e in emitted():
        logical = e.source.split(".")[0]
        sources.setdefault(e.name, set()).add(logical.removesuffix("StateMachine"))
    problems = []
    for name_cell, from_cell, _ in runbook_rows("metric"):
        said = set(re.findall(r"[A-Za-z]+", from_cell))
        for name in spans(name_cell):
            unsaid = sorted(sources.get(name, set()) - said)
            if unsaid:
                problems.append(f"{name}: from {from_cell!r}, but also emitted by {unsaid}")
    assert problems == []


def test_every_alarm_looks_back_at_most_a_day_and_needs_no_more_datapoints_than_it_evaluates() -> None:
    """EvaluationPeriods x Period is at most one day, and DatapointsToAlarm at most EvaluationPeriods
    (*Using Amazon CloudWatch alarms*; PutMetricAlarm), with the parameters' defaults."""
    for name, props in alarms().items():
        periods = number(props["EvaluationPeriods"])
        needed = number(props.get("DatapointsToAlarm", props["EvaluationPeriods"]))
        lengths = [props["Period"]] if "Period" in props else []
        lengths += [q["MetricStat"]["Period"] for q in props.get("Metrics") or [] if "MetricStat" in q]
        assert lengths, name
        assert 1 <= needed <= periods, name
        assert all(periods * number(length) <= 86_400 for length in lengths), name


# --- hunt15: no alarm for normal operation ------------------------------------------------------


def emf_values(out: str) -> dict[tuple[str, frozenset[tuple[str, str]]], list[float]]:
    """Every value an EMF output gives each (metric, dimension set) in the namespace Spillway."""
    values: dict[tuple[str, frozenset[tuple[str, str]]], list[float]] = {}
    for doc in emf_documents(out):
        for directive in doc["_aws"]["CloudWatchMetrics"]:
            if directive["Namespace"] != NAMESPACE:
                continue
            for dims in directive["Dimensions"]:
                key_dims = frozenset((d, str(doc[d])) for d in dims)
                for metric in directive["Metrics"]:
                    value = doc[metric["Name"]]
                    values.setdefault((metric["Name"], key_dims), []).extend(
                        value if isinstance(value, list) else [value]
                    )
    return values


def test_a_routine_spot_interruption_warning_pages_nobody() -> None:
    """Scenario: EC2 sends the two-minute Spot interruption warning for a node of a Spot group (routine
    on Spot: EC2 reclaims capacity whenever it needs it). The interrupt function drains the node and backs
    off the Spot pool of its type and zone, as designed, and counted that back-off as ``GroupsBackedOff``,
    the very metric of the ``GroupsBackedOff`` alarm (Sum >= 1 in 5 minutes): one page per Spot
    interruption, whose runbook row itself says "After a Spot interruption ...: nothing to fix".

    Rule: no alarm fires for normal operation; an alarm is for what a person must act on (the runbook's
    own "do" column). A metric alarm reads the sum of every datapoint of its metric with exactly its
    dimensions, whoever put them (*Using Amazon CloudWatch alarms*), so the interrupt function's count
    must not go into the alarmed series."""
    from test_interrupt import WARNED_AT
    from test_interrupt import world as spot_world

    from spillway.act.interrupt import Interrupter
    from spillway.observability import metrics

    app = load_app("interrupt")
    snapshots = FakeSnapshots()
    snapshots.add(spot_world())

    def interrupter(metric: Callable[[str, float], None], remaining_ms: object = None) -> Interrupter:
        return Interrupter(snapshots=snapshots, workflows=FakeWorkflows(), ledger=FakeLedger(),
                           cluster="prod", regions=(REGION,), drain_node_arn="arn:aws:states:::x",
                           cloud=FakeCloud(cluster="prod"), metric=metric,
                           clock=lambda: WARNED_AT + timedelta(seconds=10))  # fmt: skip

    warning = json.loads((ROOT / "events" / "interrupt-spot-warning.json").read_text())
    [record] = json.loads((ROOT / "events" / "interrupt-sqs.json").read_text())["Records"][:1]
    batch = {"Records": [{**record, "messageId": "0", "body": json.dumps(warning)}]}
    with pytest.MonkeyPatch.context() as env:
        for name, value in GLOBAL_ENV.items():
            if (resolved := resolve(value)) is not None:
                env.setenv(name, resolved)
        env.setenv("CLUSTER_NAME", CLUSTER)
        env.setattr(app, "get_clients", lambda: SimpleNamespace(
            config=SimpleNamespace(cluster_name=CLUSTER), interrupter=interrupter))  # fmt: skip
        try:
            values = emf_values(invoke(app, batch, "interrupt"))
        finally:
            metrics.clear_metrics()
            metrics.clear_default_dimensions()
    assert any(name == "InterruptDrainsStarted" and sum(v) for (name, _), v in values.items())
    fired = []
    for alarm, props in alarms().items():
        if props.get("Namespace") != NAMESPACE or props.get("Statistic") != "Sum":
            continue
        read = _alarm_metric(alarm, props)
        total = sum(sum(v) for (name, dims), v in values.items()
                    if name == read.name and frozenset(k for k, _ in dims) == read.dimensions
                    and set(read.pinned) <= dims)  # fmt: skip
        if total >= number(props["Threshold"]):
            fired.append(f"{alarm}: {read.name} = {total:g}")
    assert fired == []


def _alarm_fires(props: Mapping[str, Any], series: list[tuple[float, float]]) -> bool:
    """Whether a single-metric alarm (plain, or one MetricStat whose expression passes it on) goes to
    ALARM on ``series`` ((seconds, value) datapoints, none missing in its periods): each Period's
    Statistic, and DatapointsToAlarm of EvaluationPeriods consecutive periods breaching."""
    if "MetricName" in props:
        stat, period = props["Statistic"], props["Period"]
        scale = 1.0
    else:
        [query] = [q for q in props["Metrics"] if "MetricStat" in q]
        stat, period = query["MetricStat"]["Stat"], query["MetricStat"]["Period"]
        [expression] = [q["Expression"] for q in props["Metrics"] if "Expression" in q] or [query["Id"]]
        divisor = re.fullmatch(rf"{query['Id']}\s*/\s*(\d+)", expression)
        assert divisor or expression == query["Id"], expression
        scale = 1 / float(divisor.group(1)) if divisor else 1.0
    buckets: dict[int, list[float]] = {}
    for at, value in series:
        buckets.setdefault(int(at // period), []).append(value)
    aggregate = {"Minimum": min, "Maximum": max, "Sum": sum}[stat]
    threshold = number(props["Threshold"])
    compare = {
        "GreaterThanThreshold": lambda v: v > threshold,
        "GreaterThanOrEqualToThreshold": lambda v: v >= threshold,
    }[props["ComparisonOperator"]]
    breaching = [compare(aggregate(buckets[b]) * scale) for b in sorted(buckets)]
    periods = int(number(props["EvaluationPeriods"]))
    needed = int(number(props.get("DatapointsToAlarm", props["EvaluationPeriods"])))
    return any(sum(breaching[i : i + periods]) >= needed for i in range(len(breaching) - periods + 1))


def test_nodes_joining_one_after_another_do_not_look_like_a_node_stuck_not_ready() -> None:
    """Scenario: a large GPU fleet is replaced node by node (a node group's AMI rollout, or Spot
    capacity churning), one new node a minute; each is NotReady for its first 80 s, while its CNI and
    GPU driver start, then Ready. At every observation (one each 20 s) some node is NotReady, but none
    for more than 80 s. The ``not-ready-nodes`` alarm took the least ``NotReadyNodes`` (the count of
    NotReady nodes at an observation) of each 5 minutes, above 0 in six periods running: it fired after
    30 minutes of perfectly normal churn, though its runbook row (and template.yaml: "A node NotReady in
    every observation for half an hour") is about a node stuck NotReady, one a person must look at.
    The same alarm must still fire for one node NotReady throughout.

    Rule: no alarm fires for normal operation; a metric alarm compares each period's statistic of the
    datapoints with its threshold, DatapointsToAlarm of EvaluationPeriods (*Using Amazon CloudWatch
    alarms*, "Evaluating an alarm"): a count of NotReady nodes says nothing of how long any one was."""
    from spillway.config import PlannerConfig
    from spillway.model.cluster import ClusterSnapshot, NodeInfo
    from spillway.model.snapshot import Snapshot
    from spillway.observability import metrics
    from spillway.observe import Observation

    [props] = [p for n, p in alarms().items() if n.endswith("-not-ready-nodes")]
    app = load_app("observe")
    start = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
    ready = tuple(NodeInfo(name=f"gpu-{i}", allocatable={"cpu": 4000}, created_at=start - timedelta(days=1))
                  for i in range(50))  # fmt: skip

    [name] = (
        [props["MetricName"]]
        if "MetricName" in props
        else [q["MetricStat"]["Metric"]["MetricName"] for q in props["Metrics"] if "MetricStat" in q]
    )

    def series(
        not_ready_at: Callable[[datetime], tuple[NodeInfo, ...]], planner: PlannerConfig | None = None
    ) -> list[tuple[float, float]]:
        points: list[tuple[float, float]] = []
        for step in range(0, 40 * 60, 20):
            now = start + timedelta(seconds=step)
            cluster = ClusterSnapshot(
                cluster=CLUSTER, taken_at=now, nodes=(*ready, *not_ready_at(now)), pods=()
            )
            snapshot = Snapshot.build(cluster, [], now)
            metrics.clear_metrics()
            app.record(Observation(snapshot=snapshot, counts=snapshot.counts(), reason="unchanged"), planner)
            points += [(step, float(v)) for v in metrics.metric_set[name]["Value"]]
        metrics.clear_metrics()
        return points

    def churn(now: datetime) -> tuple[NodeInfo, ...]:  # one new node a minute, each NotReady for 80 s
        joined = []
        for minutes_ago in (0, 1, 2):
            created = start + timedelta(minutes=(now - start).total_seconds() // 60 - minutes_ago)
            age = (now - created).total_seconds()
            joined.append(NodeInfo(name=f"new-{created:%H%M}", allocatable={"cpu": 4000}, created_at=created,
                                   ready=age >= 80, ready_changed_at=created))  # fmt: skip
        return tuple(joined)

    def stuck(now: datetime) -> tuple[NodeInfo, ...]:
        return (NodeInfo(name="gpu-stuck", allocatable={"cpu": 4000}, created_at=start - timedelta(days=1),
                         ready=False, ready_changed_at=start - timedelta(minutes=1)),)  # fmt: skip

    def never_ready(now: datetime) -> tuple[NodeInfo, ...]:  # launched at the start, removed at 35 minutes
        node = NodeInfo(name="gpu-new", allocatable={"cpu": 4000}, created_at=start, ready=False,
                        ready_changed_at=start + timedelta(seconds=5))  # fmt: skip
        return (node,) if now < start + timedelta(minutes=35) else ()

    assert all(any(not n.ready for n in churn(start + timedelta(seconds=s))) for s in range(0, 2400, 20))
    assert _alarm_fires(props, series(stuck)), "a node NotReady for 40 minutes must alarm"
    assert not _alarm_fires(props, series(churn)), "nodes NotReady for a minute each, one after another"
    # A node never Ready registers for max_node_startup_minutes (15), then its unready time (20) runs:
    # Spillway drains it, idle, 35 minutes after its creation. Before, it paged at 30 for what Spillway
    # was about to do; its NotReady time now counts from the end of its startup window.
    assert not _alarm_fires(props, series(never_ready)), "a node never Ready that Spillway removes in time"
    no_window = PlannerConfig(max_node_startup_minutes=0)
    assert _alarm_fires(props, series(never_ready, no_window)), "no startup window: its time counts at once"


def test_a_plan_resumed_on_redelivery_keeps_the_held_by_limits_alarm_firing() -> None:
    """Scenario: a tenant's pods wait at its limit for 40 minutes; a plan comes every 5 minutes (observe's
    heartbeat). At minute 12 a plan commits, but Step Functions throttles the start of its executions:
    the invocation fails, and the stream's retry of the snapshot resumes the committed plan (status
    ``resumed``: it starts the executions and plans nothing). The handler recorded that answer as a plan
    holding no pod (``PodsHeldByLimits`` 0, its summary being empty), and the ``held-by-limits`` alarm takes
    the least ``PodsHeldByLimits`` of each period: that one 0 started its count again, and the alarm, due
    at 30 minutes, had not fired at 40 though every plan held pods all along. A delivery of a snapshot
    older than one planned already (status ``superseded``) plans nothing either.

    Rule: a metric says what was measured; an answer that planned nothing measured nothing (a metric
    alarm reads every datapoint of its series: *Using Amazon CloudWatch alarms*, "Evaluating an alarm")."""
    from plan_world import NOW as PLAN_NOW

    from spillway.act.planning import run_plan
    from spillway.errors import AwsThrottled
    from spillway.model.act import PlanOutcome
    from spillway.observability import metrics

    [props] = [p for n, p in alarms().items() if n.endswith("-held-by-limits")]
    [name] = [props["MetricName"]]
    app = load_app("plan")
    snapshots = FakeSnapshots()
    ref = snapshots.add(plan_snapshot())
    settings = team_limited_settings("1")

    def plan(ledger: FakeLedger, workflows: FakeWorkflows) -> dict[str, Any]:
        outcome = run_plan(ref, snapshots=snapshots, ledger=ledger, executions=workflows, settings=settings,
                           now=PLAN_NOW + timedelta(seconds=20))  # fmt: skip
        return outcome.to_dict()

    held = plan(FakeLedger(), FakeWorkflows())
    assert held["status"] == "acted" and any(t.get("held") for t in held["tenants"].values())
    ledger, throttled = FakeLedger(), FakeWorkflows()
    throttled.fail("start", AwsThrottled("StartExecution: Rate exceeded"), times=1)
    with pytest.raises(AwsThrottled):
        plan(ledger, throttled)
    resumed = plan(ledger, throttled)
    assert resumed["status"] == "resumed"
    superseded = PlanOutcome(CLUSTER, "2026-01-01T00:00:00.000000Z", "p0", "superseded", 3).to_dict()

    def values(outcome: dict[str, Any]) -> list[float]:
        metrics.clear_metrics()
        with contextlib.redirect_stdout(io.StringIO()):  # the per-tenant lines are flushed at once
            app.record_outcome(outcome)
        found = [float(v) for v in metrics.metric_set.get(name, {}).get("Value", [])]
        metrics.clear_metrics()
        return found

    series = [(minute * 60.0, v) for minute in range(0, 41, 5) for v in values(held)]
    assert series and all(v > 0 for _, v in series)
    assert _alarm_fires(props, series), "pods held in every plan for 40 minutes must alarm"
    series += [(12 * 60.0, v) for v in values(resumed)] + [(27 * 60.0, v) for v in values(superseded)]
    assert _alarm_fires(props, sorted(series)), "a resumed or superseded answer planned nothing"


def _alarm_total(props: Mapping[str, Any], raised: int, values: Mapping[Any, list[float]]) -> float:
    """What one evaluation period of an alarm adds up to, for one plan function invocation that raised
    ``raised`` times (Lambda's ``Errors``) and printed the EMF ``values`` (:func:`emf_values`): a plain
    metric, or a sum of ``FILL(id, 0)`` terms over its MetricStats."""

    def one(metric: Mapping[str, Any]) -> float:
        if metric["Namespace"] == "AWS/Lambda" and metric["MetricName"] == "Errors":
            return float(raised)
        read = _alarm_metric("", metric)
        return sum(sum(v) for (name, dims), v in values.items()
                   if name == read.name and frozenset(k for k, _ in dims) == read.dimensions
                   and set(read.pinned) <= dims)  # fmt: skip

    if "MetricName" in props:
        return one(props)
    stats = {q["Id"]: one(q["MetricStat"]["Metric"]) for q in props["Metrics"] if "MetricStat" in q}
    [expression] = [q["Expression"] for q in props["Metrics"] if "Expression" in q]
    terms = re.findall(r"FILL\((\w+),\s*0\)", expression)
    assert " + ".join(f"FILL({t}, 0)" for t in terms) == expression, expression
    return sum(stats[t] for t in terms)


def test_a_plan_that_fails_for_good_from_the_stream_raises_the_plan_errors_alarm() -> None:
    """Scenario: the planner's state has outgrown DynamoDB's 400 KB item even compressed, so every plan
    fails with ``StateTooLarge`` (nothing written; the runbook's ``<fn>-errors`` row names this very
    error for the plan). Every plan of a deployment comes from the snapshots table's stream, and there
    the plan function reports the failed snapshot as a batch item failure, for Lambda to retry from its
    record, and returns: the invocation succeeds, and Lambda's ``Errors`` metric, all that
    ``plan-errors`` read, counts only invocations that raised (AWS Lambda Developer Guide, *Monitoring
    functions*: Errors; with ReportBatchItemFailures a reported failure is a successful invocation).
    So nothing scaled up or down again, the records aged out after their retries, and no alarm said so.
    A lost race (``StateConflict``: another invocation committed first; the retry plans on its state) is
    normal operation and pages nobody.

    Rule: an alarm fires when what its runbook row describes happens."""
    from spillway.errors import StateConflict, StateTooLarge
    from spillway.observability import metrics

    [props] = [p for n, p in alarms().items() if n.endswith("-plan-errors")]
    app = load_app("plan")
    batch = json.loads((ROOT / "events" / "stream-record.json").read_text())

    def invocation(error: Exception) -> float:
        def plan_once(clients: Any, ref: Any, context: Any) -> dict[str, Any]:
            raise error

        with pytest.MonkeyPatch.context() as env:
            env.setattr(app, "plan_once", plan_once)
            env.setattr(
                app, "get_clients", lambda: SimpleNamespace(config=SimpleNamespace(cluster_name=CLUSTER))
            )
            out = io.StringIO()
            try:
                with contextlib.redirect_stdout(out):
                    answer = app.handler(batch, LambdaContext(f"spillway-{CLUSTER}-plan"))
            finally:
                metrics.clear_metrics()
                metrics.clear_default_dimensions()
        assert answer["batchItemFailures"], answer  # Lambda retries the snapshot from its record
        return _alarm_total(props, 0, emf_values(out.getvalue()))

    assert invocation(StateTooLarge("state item 512 KiB compressed")) >= number(props["Threshold"])
    assert invocation(StateConflict("another plan committed version 8 first")) < number(props["Threshold"])


# Every alarm of the last release (6b26167) by its logical ID, with its name as ClusterName "ml" makes it.
RELEASED_ALARMS = {
    "ClusterUnhealthyAlarm": "spillway-ml-ClusterUnhealthy",
    "DrainTimeoutAlarm": "spillway-ml-drain-timeout",
    "FndrainErrors": "spillway-ml-drain-errors",
    "FnobserveErrors": "spillway-ml-observe-errors",
    "FnplanErrors": "spillway-ml-plan-errors",
    "FnscaleErrors": "spillway-ml-scale-errors",
    "GangSweepBlindAlarm": "spillway-ml-gang-sweep-blind",
    "GroupsBackedOffAlarm": "spillway-ml-GroupsBackedOff",
    "HeldByLimitsAlarm": "spillway-ml-held-by-limits",
    "InterruptDeadLetterAlarm": "spillway-ml-interrupt-dlq",
    "InterruptErrorsAlarm": "spillway-ml-interrupt-errors",
    "LaunchesMisconfiguredAlarm": "spillway-ml-LaunchesMisconfigured",
    "NotReadyNodesAlarm": "spillway-ml-not-ready-nodes",
    "OverflowAlarm": "spillway-ml-Overflow",
    "PendingTooLongAlarm": "spillway-ml-pending-too-long",
    "PriorityConfigMapInvalidAlarm": "spillway-ml-PriorityConfigMapInvalid",
    "SmdrainnodeFailures": "spillway-ml-drain-node-failures",
    "SmganglaunchFailures": "spillway-ml-gang-launch-failures",
    "SmscaledownFailures": "spillway-ml-scale-down-failures",
    "SmscaleupFailures": "spillway-ml-scale-up-failures",
    "UnregisteredInstancesAlarm": "spillway-ml-UnregisteredInstances",
}


@pytest.mark.parametrize("name", sorted(set(RELEASED_ALARMS.values())))
def test_an_alarm_a_deployed_stack_has_keeps_its_logical_id_on_update(name: str) -> None:
    """An alarm whose name a stack of the last release already holds stays the resource it was. Under a
    new logical ID, CloudFormation's update creates the new resource first and deletes the old one in
    its cleanup ("Update behaviors of stack resources"); with the same AlarmName the create either is
    refused (the name is taken: the update rolls back) or is PutMetricAlarm, which creates or updates
    the alarm of that name (CloudWatch API Reference), and the cleanup then deletes the alarm both
    resources name: the stack goes on without it, and nothing pages."""
    by_name = {
        resolve(r["Properties"]["AlarmName"]): logical
        for logical, r in RESOURCES.items()
        if r.get("Type") == "AWS::CloudWatch::Alarm"
    }
    released = {alarm: logical for logical, alarm in RELEASED_ALARMS.items()}
    if name in by_name:
        assert by_name[name] == released[name]


class Series(dict[int, float]):
    """One metric math time series of an alarm: period index -> value, with CloudWatch's documented
    rules (*Using metric math*): arithmetic and comparisons of two series take a value missing in one
    as 0 (so the result has every timestamp of either); with a scalar, each datapoint; a comparison
    gives 1 or 0."""

    def _both(self, other: Any, op: Callable[[float, float], float]) -> Series:
        if isinstance(other, Series):
            return Series({t: op(self.get(t, 0.0), other.get(t, 0.0)) for t in set(self) | set(other)})
        return Series({t: op(v, float(other)) for t, v in self.items()})

    def __add__(self, other: Any) -> Series:  # type: ignore[override]
        return self._both(other, lambda a, b: a + b)

    def __sub__(self, other: Any) -> Series:
        return self._both(other, lambda a, b: a - b)

    def __mul__(self, other: Any) -> Series:
        return self._both(other, lambda a, b: a * b)

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> Series:
        return self._both(other, lambda a, b: a / b)

    def __gt__(self, other: Any) -> Series:  # type: ignore[override]
        return self._both(other, lambda a, b: float(a > b))


def _math_if(condition: Series, true: Any, false: Any = None) -> Series:
    """``IF(metric1, metric2, metric3)`` (*Using metric math*, Using IF expressions): for each datapoint
    of metric1, metric2's value when it is true (0 when metric2 has none there), metric3's when false
    (dropped when metric3 has none there)."""
    out = Series()
    for t, c in condition.items():
        if c:
            out[t] = true.get(t, 0.0) if isinstance(true, Series) else float(true)
        elif isinstance(false, Series) and t in false:
            out[t] = false[t]
        elif false is not None and not isinstance(false, Series):
            out[t] = float(false)
    return out


def _math_alarm_fires(props: Mapping[str, Any], series: Mapping[str, list[tuple[float, float]]]) -> bool:
    """Whether a metric math alarm goes to ALARM on the datapoints ``series`` gives each metric (by name:
    (seconds, value)): each MetricStat's Stat per its Period, the expressions in order, the one returning
    data compared with the threshold, DatapointsToAlarm of EvaluationPeriods periods breaching."""
    aggregate: dict[str, Callable[[list[float]], float]] = {
        "Minimum": min, "Maximum": max, "Sum": sum, "SampleCount": len,
    }  # fmt: skip
    values: dict[str, Any] = {"IF": _math_if, "FILL": lambda series, _: series}  # missing: 0 (Series)
    result = Series()
    for query in props["Metrics"]:
        if "MetricStat" in query:
            stat = query["MetricStat"]
            buckets: dict[int, list[float]] = {}
            for at, value in series.get(stat["Metric"]["MetricName"], []):
                buckets.setdefault(int(at // stat["Period"]), []).append(value)
            values[query["Id"]] = Series({t: float(aggregate[stat["Stat"]](v)) for t, v in buckets.items()})
        else:
            assert re.fullmatch(r"[\w\s()+\-*/,<>=.]+", query["Expression"]), query["Expression"]
            values[query["Id"]] = eval(query["Expression"], {"__builtins__": {}}, values)
        if query.get("ReturnData", True):
            result = values[query["Id"]]
    threshold = number(props["Threshold"])
    compare = {
        "GreaterThanThreshold": lambda v: v > threshold,
        "GreaterThanOrEqualToThreshold": lambda v: v >= threshold,
    }[props["ComparisonOperator"]]
    breaching = [compare(result[t]) for t in sorted(result)]
    periods = int(number(props["EvaluationPeriods"]))
    needed = int(number(props.get("DatapointsToAlarm", props["EvaluationPeriods"])))
    return any(sum(breaching[i : i + periods]) >= needed for i in range(len(breaching) - periods + 1))


def test_pods_a_limit_holds_on_purpose_do_not_page_as_pending_too_long() -> None:
    """Scenario: tenant team-a may add no node (its limit), and its two GPU pods wait for an hour: every
    plan holds them (``tenant-limit``), which ``held-by-limits`` is for, after ``HeldByLimitsAlarmMinutes``
    (up to a day, as the operator chose). ``pending-too-long`` read observe's ``OldestPendingSeconds``, the
    oldest unschedulable pod whatever held it, and observe cannot tell a held pod: after
    ``PendingAlarmMinutes`` (10) it paged, its runbook row sending the operator after a group that does
    not fit or is backed off, for pods waiting by design. The alarm must still fire for a pod no limit
    holds (team-b's, whose node never came), and when no plan runs at all (then nothing says which pods
    a limit holds, and observe's metric is all there is).

    Rule: an alarm fires for what its runbook row describes, and only that."""
    from plan_world import World

    from spillway.act.planning import run_plan
    from spillway.model.snapshot import Snapshot
    from spillway.observability import metrics
    from spillway.observe import Observation

    [props] = [p for n, p in alarms().items() if n.endswith("-pending-too-long")]
    observe_app, plan_app = load_app("observe"), load_app("plan")
    settings = team_limited_settings("0")

    def world(team_b: bool) -> Snapshot:
        w = World()
        w.group("gpu-east", "g5.xlarge", max_size=8, gpu_taint=True, desired=0)
        w.gpu_pods("a", 2, gpus=1, cpu="3", memory="12Gi", namespace="team-a")
        if team_b:
            w.gpu_pods("b", 1, gpus=1, cpu="3", memory="12Gi", namespace="team-b")
        cluster, groups, _, _ = w.parsed()
        snapshot = Snapshot.build(cluster, groups, cluster.taken_at)
        assert all(p.pending_since is not None for p in snapshot.cluster.pods)
        return snapshot

    def emitted_values(name: str, record: Callable[[], None]) -> list[float]:
        metrics.clear_metrics()
        with contextlib.redirect_stdout(io.StringIO()):
            record()
        found = [float(v) for v in metrics.metric_set.get(name, {}).get("Value", [])]
        metrics.clear_metrics()
        return found

    def series(snapshot: Snapshot, planning: bool) -> dict[str, list[tuple[float, float]]]:
        """An hour from the pods' first pending: an observation each 20 s, a plan each 5 minutes (the
        heartbeat's snapshot: nothing changes)."""
        since = min(p.pending_since for p in snapshot.cluster.pods if p.pending_since is not None)
        out: dict[str, list[tuple[float, float]]] = {}
        for step in range(0, 60 * 60, 20):
            at = since + timedelta(seconds=step)
            seen = replace(snapshot, taken_at=at, cluster=replace(snapshot.cluster, taken_at=at))
            observation = Observation(snapshot=seen, counts=seen.counts(), reason="unchanged")
            for v in emitted_values("OldestPendingSeconds", lambda o=observation: observe_app.record(o)):
                out.setdefault("OldestPendingSeconds", []).append((step, v))
            if not planning or step % 300:
                continue
            snapshots = FakeSnapshots()
            ref = snapshots.add(seen)
            outcome = run_plan(ref, snapshots=snapshots, ledger=FakeLedger(), executions=FakeWorkflows(),
                               settings=settings, now=at + timedelta(seconds=20)).to_dict()  # fmt: skip
            for name in plan_metric_names:
                for v in emitted_values(name, lambda o=outcome: plan_app.record_outcome(o)):
                    out.setdefault(name, []).append((step + 20, v))
        return out

    plan_metric_names = [
        q["MetricStat"]["Metric"]["MetricName"]
        for q in props.get("Metrics") or []
        if "MetricStat" in q and q["MetricStat"]["Metric"]["MetricName"] != "OldestPendingSeconds"
    ]
    held = world(team_b=False)

    def fires(observed: dict[str, list[tuple[float, float]]]) -> bool:
        if "MetricName" in props:  # one metric: observe's
            return _alarm_fires(props, observed[props["MetricName"]])
        return _math_alarm_fires(props, observed)

    assert not fires(series(held, planning=True)), "pods a limit holds for an hour paged pending-too-long"
    assert fires(series(world(team_b=True), planning=True)), "a pod no limit holds waited an hour"
    assert fires(series(held, planning=False)), "no plan for an hour: pods waited, nothing planned"


@pytest.mark.parametrize(
    ("function", "answer"),
    [
        ("scale", AwsThrottled("SetDesiredCapacity: Rate exceeded")),
        ("drain", AwsThrottled("TerminateInstanceInAutoScalingGroup: Rate exceeded")),
        ("drain", LifecycleActionPending(f"{INSTANCE} is still Terminating")),
        ("drain", DrainSuperseded("the node's cordon names drain-b now")),
    ],
)
def test_an_error_the_state_machine_answers_by_name_pages_nobody_but_an_unexpected_one_does(
    function: str, answer: Exception
) -> None:
    """Scenario: a scale-up's SetDesiredCapacity is throttled once and its Retry succeeds two seconds
    later; a drain's CompleteLifecycleAction finds the instance still Terminating twice (the step raises
    LifecycleActionPending, which DrainNode retries until the instance waits in Terminating:Wait); a
    drain stops for another drain that took the node over (DrainSuperseded, caught: a success). Each
    raise is a function error in Lambda's Errors (AWS Lambda Developer Guide, "Types of metrics for
    Lambda functions"), and ``<fn>-errors`` read Errors alone, at 1 in one five-minute period: every one
    of these paged, though nothing failed. An error no state machine names (a bug, a refused
    permission) still pages at once.

    Rule: an alarm fires when what its runbook row describes happens, and only then."""
    from spillway.observability import metrics

    [props] = [p for n, p in alarms().items() if n.endswith(f"-{function}-errors")]
    app = load_app(function)
    step = "scale_step" if function == "scale" else "run_action"
    event = {"action": "prepare"} if function == "scale" else {"action": "complete_lifecycle", "drain": {}}

    def invocation(error: Exception) -> float:
        """The AnsweredErrors the handler printed for one invocation that raised ``error``."""
        with pytest.MonkeyPatch.context() as env:
            env.setattr(app, step, _raising(error))
            clients = SimpleNamespace(
                config=SimpleNamespace(cluster_name=CLUSTER), drainer=lambda hook, remaining_ms=None: None
            )
            env.setattr(app, "get_clients", lambda: clients)
            try:
                out = invoke(app, event, function, raises=type(error))
            finally:
                metrics.clear_metrics()
                metrics.clear_default_dimensions()
        return sum(
            sum(v) for (name, dims), v in emf_values(out).items()
            if name == "AnsweredErrors" and ("Function", function) in dims and ("Cluster", CLUSTER) in dims
        )  # fmt: skip

    # two raises in the same period, then the retry that succeeds (Errors 0)
    answered = [invocation(answer), invocation(answer)]
    series = {
        "Errors": [(0, 1.0), (2, 1.0), (6, 0.0)],
        "AnsweredErrors": [(0, answered[0]), (2, answered[1])],
    }
    assert not _math_alarm_fires(props, series)
    unexpected = invocation(RuntimeError("KeyError in a step"))
    assert _math_alarm_fires(props, {"Errors": [(0, 1.0)], "AnsweredErrors": [(0, unexpected)]})


@pytest.mark.parametrize("function", ["observe", "plan", "interrupt"])
def test_one_failure_the_next_run_gets_past_pages_nobody_but_a_failure_that_lasts_does(function: str) -> None:
    """Scenario: the API server times out once, so one observation raises, and the next minute's start
    observes; one plan's commit is throttled past the SDK's retries, the stream's retry of the record
    plans it a few seconds later; a notice fails once and the queue's next receive handles it. Nothing
    was lost, yet each paged: ``<fn>-errors`` went to ALARM on one error in one five-minute period. A
    failure that lasts (every run fails for twenty minutes, plans as rare as the heartbeat) still pages.

    Rule: an alarm needs what an operator acts on, not one failure that healed by itself."""
    [props] = [p for n, p in alarms().items() if n.endswith(f"-{function}-errors")]
    # a plan comes per stored snapshot: at worst every 5 minutes 20 s (observe's heartbeat)
    minutes = range(0, 20 * 60, 320 if function == "plan" else 60)
    metric = "PlanFailures" if function == "plan" else "Errors"

    def fires(failed: list[tuple[float, float]]) -> bool:
        ran = [(float(at), 0.0) for at in minutes]
        if "Metrics" in props:
            return _math_alarm_fires(props, {"Errors": ran, metric: failed})
        return _alarm_fires(props, sorted(ran + failed))

    assert not fires([(0.0, 1.0)])
    assert fires([(float(at), 1.0) for at in minutes])


def test_nodes_unready_for_one_plan_do_not_page_as_an_unhealthy_cluster_but_a_lasting_fault_does() -> None:
    """Scenario: a zone's network blips for a minute; the node lifecycle controller marks its nodes
    NotReady after its grace period, one plan finds half the cluster unready and drains nothing
    (ClusterUnhealthy 1), and the next plan finds them Ready again. Nothing needed a person, yet
    ``ClusterUnhealthy`` paged on that one plan. Kubelets down for a quarter of an hour, plans every
    5 minutes 20 s at worst, still page.

    Rule: an alarm needs what an operator acts on, not one failure that healed by itself."""
    [props] = [p for n, p in alarms().items() if n.endswith("-ClusterUnhealthy")]
    plans = range(0, 3600, 320)
    blip = [(float(t), 1.0 if t == 960 else 0.0) for t in plans]
    assert not _alarm_fires(props, blip)
    lasting = [(float(t), 1.0 if 960 <= t < 960 + 15 * 60 else 0.0) for t in plans]
    assert _alarm_fires(props, lasting)


def _not_observing_windows(
    props: Mapping[str, Any], series: list[tuple[float, float]], now: int, span: int
) -> list[float | None]:
    """The datapoints the not-observing alarm reads at ``now`` (seconds, a whole minute) for its
    evaluation range of ``span`` periods, most recent last: each Period's Sum of ``series`` over the
    period ending ``now`` and those before it (CloudWatch evaluates an alarm each minute, over periods
    ending at the last whole minute), None for a period without a datapoint. The alarm's metric math,
    when it has some, is applied: FILL(x, 0) gives a period without a datapoint 0, as long as the range
    holds a datapoint of x at all (*Using metric math*, FILL: "fills the missing values of a metric")."""
    if "MetricName" in props:
        assert props["MetricName"] == "SnapshotsWritten" and props["Statistic"] == "Sum"
        period, expression = int(number(props["Period"])), None
    else:
        [query] = [q for q in props["Metrics"] if "MetricStat" in q]
        stat = query["MetricStat"]
        assert stat["Metric"]["MetricName"] == "SnapshotsWritten" and stat["Stat"] == "Sum"
        period = int(number(stat["Period"]))
        [expression] = [q["Expression"] for q in props["Metrics"] if q.get("ReturnData", True)]
        assert expression == f"FILL({query['Id']}, 0)", expression
    windows: list[float | None] = []
    for k in range(span, 0, -1):
        start, end = now - k * period, now - (k - 1) * period
        values = [v for at, v in series if start <= at < end]
        windows.append(sum(values) if values else None)
    if expression is not None and any(w is not None for w in windows):
        windows = [0.0 if w is None else w for w in windows]
    return windows


def _evaluates_to_alarm(props: Mapping[str, Any], windows: list[float | None]) -> bool:
    """CloudWatch's rule ("How alarm state is evaluated when data is missing", *Using Amazon CloudWatch
    alarms*): while the evaluation range holds at least EvaluationPeriods real datapoints, the most
    recent of them are evaluated and TreatMissingData is ignored; with fewer, missing ones are filled
    as it says (here: breaching)."""
    periods = int(number(props["EvaluationPeriods"]))
    needed = int(number(props.get("DatapointsToAlarm", props["EvaluationPeriods"])))
    threshold = number(props["Threshold"])
    assert props["ComparisonOperator"] == "LessThanThreshold" and props["TreatMissingData"] == "breaching"
    real = [w for w in windows if w is not None]
    if len(real) >= periods:
        return sum(w < threshold for w in real[-periods:]) >= needed
    recent = windows[-periods:]
    return sum(w is None or w < threshold for w in recent) >= needed


@pytest.mark.parametrize("span", [2, 3, 5])
@pytest.mark.parametrize("busy", [False, True])
def test_observe_that_stops_pages_within_a_quarter_hour_though_its_last_snapshots_are_in_the_range(
    span: int, busy: bool
) -> None:
    """Scenario: every start of observe is throttled from 06:00 on (the account's Lambda concurrency
    spent by another team's burst: a throttled invocation is neither an invocation nor an error, AWS
    Lambda Developer Guide, "Types of metrics for Lambda functions"), or its schedule is disabled.
    Nothing raises, so ``observe-errors`` stays OK, and every alarm on what observe and the plans emit
    has no data and, notBreaching, stays OK too, while pods wait; ``not-observing`` counts the snapshots
    observe stores. That happens in a busy cluster whose demand changes at every
    observation (each one stores a snapshot) or a quiet one (a heartbeat every 5 minutes 20 s).
    CloudWatch reads more periods than EvaluationPeriods (its evaluation range: 5 for 3 in the guide's
    example; how many depends on the period), and while one real datapoint of SnapshotsWritten remains
    among them it evaluates that one and ignores TreatMissingData. In the busy cluster the quarter before
    the stop holds snapshots and the quarters after it no datapoint at all, so the alarm said OK for as
    long as the range reached back before 06:00 (45 minutes with a range of 3 quarters), not the quarter
    of an hour its runbook row gives. A quarter without a datapoint must itself be one below the
    threshold.

    Rule: an alarm fires when what its runbook row describes happens, and only then."""
    [props] = [p for n, p in alarms().items() if n.endswith("-not-observing")]
    day, stop = 24 * 3600, 6 * 3600
    # an observation every 20 s, storing a snapshot each time (busy) or every 5 minutes 20 s (heartbeat)
    steady = [(float(t), 1.0 if busy or t % 320 == 0 else 0.0) for t in range(0, day, 20)]
    first = stop - 3600  # an hour of steady observing in every range the test reads
    assert not any(
        _evaluates_to_alarm(props, _not_observing_windows(props, steady, now, span))
        for now in range(first, day, 60)
    )
    stopped = [(t, v) for t, v in steady if t < stop]
    fired = next(
        now
        for now in range(stop, day, 60)
        if _evaluates_to_alarm(props, _not_observing_windows(props, stopped, now, span))
    )
    assert fired - stop <= 16 * 60, f"paged {(fired - stop) / 60:g} minutes after observe stopped"
