"""template.yaml, statemachines/ and functions/ agree with each other: a contract checked on every run."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from aws_lambda_powertools.utilities.idempotency.persistence import (
    dynamodb as powertools_idempotency_dynamodb,
)
from botocore import xform_name

from spillway.local.cfn import load_template
from spillway.ports import Cloud

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = load_template(ROOT / "template.yaml")
# Fn::ForEach blocks (lists) expand to IAM policies, alarms and log groups; the contract is about the rest.
RESOURCES: dict[str, Any] = {k: v for k, v in TEMPLATE["Resources"].items() if isinstance(v, dict)}


def of_type(kind: str) -> dict[str, dict[str, Any]]:
    return {k: v.get("Properties") or {} for k, v in RESOURCES.items() if v.get("Type") == kind}


FUNCTIONS = of_type("AWS::Serverless::Function")
STATE_MACHINES = of_type("AWS::Serverless::StateMachine")


def function_policies(function: str) -> list[Any]:
    """A function's policies as a SAM function's Policies lists them, read from the role the template
    writes for it (<Function>Role, which the function names as its Role): the managed policies it
    attaches, then each inline policy's document."""
    assert FUNCTIONS[function]["Role"] == {"Fn::GetAtt": [f"{function}Role", "Arn"]}, function
    role = RESOURCES[f"{function}Role"]["Properties"]
    return list(role.get("ManagedPolicyArns") or []) + [
        p["PolicyDocument"] for p in role.get("Policies") or []
    ]


def references(value: Any) -> set[str]:
    """Logical ids a template value points at (Ref, GetAtt, ${X} / ${X.Attr} in Sub)."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str):
                found.add(inner)
            elif key == "Fn::GetAtt":
                found.add(inner[0] if isinstance(inner, list) else str(inner).split(".")[0])
            elif key == "Fn::Sub":
                text = inner if isinstance(inner, str) else inner[0]
                found |= {m.split(".")[0] for m in re.findall(r"\$\{([^}!]+)\}", text)}
            else:
                found |= references(inner)
    elif isinstance(value, list):
        for inner in value:
            found |= references(inner)
    return found


def test_template_has_functions_and_state_machines_to_check() -> None:
    assert FUNCTIONS, "template.yaml defines no functions"


@pytest.mark.parametrize("logical", sorted(STATE_MACHINES))
def test_every_placeholder_in_an_asl_file_is_substituted(logical: str) -> None:
    props = STATE_MACHINES[logical]
    text = (ROOT / props["DefinitionUri"]).read_text()
    json.loads(re.sub(r"\$\{[A-Za-z0-9_]+\}", "0", text))  # valid JSON once substituted
    used = set(re.findall(r"\$\{([A-Za-z0-9_]+)\}", text))
    supplied = set(props.get("DefinitionSubstitutions") or {})
    assert used - supplied == set(), f"{logical}: no substitution for {sorted(used - supplied)}"
    assert supplied - used == set(), f"{logical}: substitutions never used: {sorted(supplied - used)}"


def _intrinsic_literals(node: Any) -> Iterator[str]:
    """The string literals ('...') of the intrinsic functions in a definition's ``.$`` values."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key.endswith(".$") and isinstance(value, str) and value.startswith("States."):
                yield from re.findall(r"'((?:[^'\\]|\\.)*)'", value)
            yield from _intrinsic_literals(value)
    elif isinstance(node, list):
        for item in node:
            yield from _intrinsic_literals(item)


@pytest.mark.parametrize("logical", sorted(STATE_MACHINES))
def test_no_intrinsic_string_literal_holds_an_unescaped_reserved_character(logical: str) -> None:
    """``'``, ``{``, ``}`` and ``\\`` are reserved in an intrinsic function's arguments and must be escaped
    with a backslash to stand in a string literal (Step Functions Developer Guide, intrinsic functions,
    reserved characters). The gang launch's defaults were ``States.StringToJson('{"zone": null}')``,
    which moto runs but AWS may refuse; they are now a plain JSON object."""
    text = (ROOT / STATE_MACHINES[logical]["DefinitionUri"]).read_text()
    definition = json.loads(re.sub(r"\$\{[A-Za-z0-9_]+\}", "0", text))
    # States.Format's template holds its placeholders, {} pairs: any other brace must be escaped
    unpaired = r"(?<!\\)\{(?!\})|(?<![\\{])\}"
    bad = [lit for lit in _intrinsic_literals(definition) if re.search(unpaired, lit)]
    assert bad == []


@pytest.mark.parametrize("logical", sorted(STATE_MACHINES))
def test_every_resource_a_state_machine_names_exists(logical: str) -> None:
    props = STATE_MACHINES[logical]
    parameters = set(TEMPLATE.get("Parameters") or {})
    assert all(isinstance(v, (dict, list)) for v in TEMPLATE["Resources"].values())
    pseudo = {"AWS::Region", "AWS::AccountId", "AWS::Partition", "AWS::StackName", "AWS::URLSuffix"}
    for key, value in (props.get("DefinitionSubstitutions") or {}).items():
        for ref in references(value):
            assert ref in RESOURCES or ref in parameters or ref in pseudo, f"{logical}.{key} -> unknown {ref}"
    # A Lambda the definition calls by substitution must be a function of this template, and the
    # state machine's policies must let it invoke that function.
    text = (ROOT / props["DefinitionUri"]).read_text()
    policies = json.dumps(props.get("Policies") or [])
    for key, value in (props.get("DefinitionSubstitutions") or {}).items():
        targets = references(value) & set(FUNCTIONS)
        if targets and "${" + key + "}" in text:
            for fn in targets:
                assert fn in policies, f"{logical} calls {fn} but its Policies do not allow invoking it"


@pytest.mark.parametrize("logical", sorted(FUNCTIONS))
def test_every_handler_path_imports(logical: str) -> None:
    props = FUNCTIONS[logical]
    code = ROOT / props["CodeUri"]
    module_name, _, attr = props.get("Handler", "app.handler").rpartition(".")
    path = code / f"{module_name.replace('.', '/')}.py"
    assert path.is_file(), f"{logical}: {path} missing"
    spec = importlib.util.spec_from_file_location(f"contract_{logical}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses in the module look themselves up there
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    assert callable(getattr(module, attr)), f"{logical}: {props['Handler']} is not callable"


def test_asl_lambda_tasks_only_call_substituted_functions() -> None:
    """No hard-coded function ARNs: every Lambda Resource/FunctionName comes from a substitution."""
    for logical, props in STATE_MACHINES.items():
        text = (ROOT / props["DefinitionUri"]).read_text()
        assert "arn:aws:lambda:" not in text, f"{logical}: hard-coded Lambda ARN"


# --- least privilege ----------------------------------------------------------------------------

# The template with its Fn::ForEach blocks expanded (deploy/expand_foreach.py, what checkov scans too).
_spec = importlib.util.spec_from_file_location("expand_foreach", ROOT / "deploy" / "expand_foreach.py")
assert _spec is not None and _spec.loader is not None
expand_foreach = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(expand_foreach)
EXPANDED: dict[str, Any] = expand_foreach.expand(TEMPLATE, {"ClusterName": "ml", "Regions": "us-east-1"})[
    "Resources"
]
ASG_WRITES = {"autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"}


def statements(resource: dict[str, Any]) -> list[dict[str, Any]]:
    document = (resource.get("Properties") or {}).get("PolicyDocument") or {}
    found = document.get("Statement") or []
    return [found] if isinstance(found, dict) else list(found)


def actions(statement: dict[str, Any]) -> set[str]:
    value = statement.get("Action") or []
    return {value} if isinstance(value, str) else set(value)


def all_statements() -> list[dict[str, Any]]:
    """Every IAM statement of the expanded template: managed policies and SAM functions' inline ones."""
    found = []
    for resource in EXPANDED.values():
        if resource.get("Type") == "AWS::IAM::ManagedPolicy":
            found += statements(resource)
        for policy in (resource.get("Properties") or {}).get("Policies") or []:
            if isinstance(policy, dict) and "Statement" in policy:
                found += policy["Statement"]
            if resource.get("Type") == "AWS::IAM::Role":
                found += policy["PolicyDocument"]["Statement"]
    return found


def test_asg_writes_require_both_cluster_autoscaler_tags_as_is_managed_does() -> None:
    from spillway.model.nodegroup import TAG_CLUSTER_PREFIX, TAG_ENABLED

    writes = [s for s in all_statements() if actions(s) & ASG_WRITES]
    assert {a for s in writes for a in actions(s)} >= ASG_WRITES
    for statement in writes:
        assert statement["Effect"] == "Allow"
        # Keys under one operator are ANDed; "Null": "false" means the group carries the tag.
        assert statement["Condition"] == {
            "Null": {
                f"autoscaling:ResourceTag/{TAG_ENABLED}": "false",
                f"autoscaling:ResourceTag/{TAG_CLUSTER_PREFIX}ml": "false",
            }
        }, statement


def test_only_the_functions_roles_may_call_auto_scaling_no_state_machines() -> None:
    """Every Auto Scaling call goes through a function, whose adapter maps AWS's errors to ours (the names
    the state machines retry); no state machine has an aws-sdk:autoscaling task, so none of their roles
    is granted an autoscaling action (least privilege)."""
    machine_roles = {f"{logical}Role" for logical in STATE_MACHINES}
    granted: dict[str, set[str]] = {}
    for resource in EXPANDED.values():
        if resource.get("Type") != "AWS::IAM::ManagedPolicy":
            continue
        autoscaling = {a for s in statements(resource) for a in actions(s) if a.startswith("autoscaling:")}
        for role in references(resource["Properties"].get("Roles") or []):
            granted.setdefault(role, set()).update(autoscaling)
    assert {r for r, acts in granted.items() if acts} == {
        "ScaleFunctionRole",
        "DrainFunctionRole",
        "InterruptFunctionRole",  # CompleteLifecycleAction only: an action on a node a drain emptied
    }
    assert granted["InterruptFunctionRole"] == {"autoscaling:CompleteLifecycleAction"}
    assert not machine_roles & {r for r, acts in granted.items() if acts}
    for logical, props in STATE_MACHINES.items():
        assert "autoscaling:" not in json.dumps(props.get("Policies") or []), logical
        assert "aws-sdk:autoscaling" not in (ROOT / props["DefinitionUri"]).read_text(), logical


def test_a_scale_down_may_describe_only_its_own_state_machines_executions() -> None:
    """A part of a split scale-down waits for the part before it (DescribeExecution, an aws-sdk task):
    on the scale-down's own executions, by the name the template gives the state machine."""
    machine = EXPANDED["ScaleDownStateMachine"]["Properties"]
    own = {"Fn::Sub": "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:execution:"
                      + machine["Name"]["Fn::Sub"] + ":*"}  # fmt: skip
    inline = [s for p in machine["Policies"] if isinstance(p, dict) for s in p.get("Statement", [])]
    describing = [s for s in inline if "states:DescribeExecution" in actions(s)]
    assert [s["Resource"] for s in describing if s["Resource"] == own] == [own], describing
    assert "arn:aws:states:::aws-sdk:sfn:describeExecution" in (ROOT / machine["DefinitionUri"]).read_text()


def test_the_drain_function_may_describe_only_drain_node_executions() -> None:
    """A forced drain standing by for another forced drain of the same EC2 event reads that drain's
    execution (DescribeExecution; spillway.act.drain.Drainer._superseded): only DrainNode's, by the name
    the template gives the state machine, and no other Step Functions action."""
    machine = EXPANDED["DrainNodeStateMachine"]["Properties"]
    own = {"Fn::Sub": "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:execution:"
                      + machine["Name"]["Fn::Sub"] + ":*"}  # fmt: skip
    states = [s for s in role_statements("DrainFunction") if any(a.startswith("states:") for a in actions(s))]
    assert [(actions(s), s["Resource"]) for s in states] == [({"states:DescribeExecution"}, own)]
    assert '"execution.$": "$$.Execution.Id"' in (ROOT / machine["DefinitionUri"]).read_text()


def snake(action: str) -> str:
    """``dynamodb:BatchWriteItem`` -> ``batch_write_item``, the boto3 method that calls it."""
    return "".join("_" + c.lower() if c.isupper() else c for c in action.split(":")[1]).lstrip("_")


CODE = "\n".join(
    p.read_text() for d in ("layers/spillway/spillway", "functions") for p in (ROOT / d).rglob("*.py")
)


# What Powertools' idempotency records cost in calls (its DynamoDB persistence layer, as installed).
POWERTOOLS_IDEMPOTENCY = inspect.getsource(powertools_idempotency_dynamodb)


def test_every_dynamodb_action_a_statement_grants_is_one_the_code_calls() -> None:
    """Least privilege: a DynamoDB action no code calls is not granted (BatchWriteItem, for one, may
    delete any item). A transaction's Put is authorised as PutItem, its ConditionCheck as
    ConditionCheckItem (DynamoDB Developer Guide, "Using IAM with DynamoDB transactions")."""
    stream = POLLER_ACTIONS["AWS::DynamoDB::Table"]  # Lambda's poller's, on a stream: checked below
    granted = {a for s in all_statements() for a in actions(s) if a.startswith("dynamodb:")} - stream
    assert granted
    called = {a for a in granted if f".{snake(a)}(" in CODE + POWERTOOLS_IDEMPOTENCY}
    if ".transact_write_items(" in CODE:
        called.add("dynamodb:PutItem")
    if '{"ConditionCheck": ' in CODE:  # a transaction's ConditionCheck, authorised as ConditionCheckItem
        called.add("dynamodb:ConditionCheckItem")
    assert granted - called == set()


def table_actions(function: str) -> dict[str, set[str]]:
    """A function's DynamoDB actions per table, from its explicit statements (policy templates apart)
    that grant any: another service's statement beside them (eks:DescribeNodegroup's node group ARN
    names ClusterName) names no table. The reads of a table's stream, Lambda's poller's, are not the
    table's (test_each_function_fed_by_a_mapping_may_read_its_own_source_and_nothing_else)."""
    out: dict[str, set[str]] = {}
    stream = POLLER_ACTIONS["AWS::DynamoDB::Table"]
    for policy in function_policies(function):
        for statement in policy.get("Statement", []) if isinstance(policy, dict) else []:
            granted = {a for a in actions(statement) if a.startswith("dynamodb:")} - stream
            for table in references(statement.get("Resource")) if granted else ():
                out.setdefault(table, set()).update(granted)
    return out


def crud_tables(function: str) -> set[str]:
    policies = function_policies(function)
    return {next(iter(references(p["DynamoDBCrudPolicy"]))) for p in policies if "DynamoDBCrudPolicy" in p}


def test_the_plan_and_scale_functions_may_do_on_their_tables_what_their_stores_do() -> None:
    """Not SAM's DynamoDBCrudPolicy (Scan, BatchWriteItem, DeleteItem, UpdateItem ... on the whole
    table): the plans table is written (a plan record, alone or in the state's transaction) and, by the
    scale function, read by key (a re-plan's retry); the state table is queried and written
    conditionally, and the scale function's claims also get and delete single items. Powertools' idempotency table gets what its persistence layer calls."""
    assert crud_tables("PlanFunction") == set()
    assert crud_tables("ScaleFunction") == set()
    assert table_actions("PlanFunction") == {
        "SnapshotsTable": {"dynamodb:GetItem", "dynamodb:Query"},
        "PlansTable": {"dynamodb:PutItem"},
        "StateTable": {
            "dynamodb:Query",
            "dynamodb:PutItem",
            "dynamodb:GetItem",
            "dynamodb:ConditionCheckItem",
        },
        "IdempotencyTable": {
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
        },
    }
    assert table_actions("ScaleFunction") == {
        "SnapshotsTable": {"dynamodb:GetItem", "dynamodb:Query"},
        "PlansTable": {"dynamodb:PutItem", "dynamodb:GetItem"},
        "StateTable": {
            "dynamodb:Query",
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:DeleteItem",
            "dynamodb:ConditionCheckItem",
        },
    }


class _RecordingDynamoDB:
    """A DynamoDB client that records PutItem requests and refuses none."""

    def __init__(self) -> None:
        self.puts: list[dict[str, Any]] = []

    def put_item(self, **request: Any) -> dict[str, Any]:
        self.puts.append(request)
        return {}


def test_the_drain_function_may_claim_a_gang_sweep_and_nothing_more_on_the_state_table() -> None:
    """remove_gang_orphan claims its instance (spillway.act.gangsweep: StateStore.claim as a lease, its
    holder read back with GetItem, released with DeleteItem); the drain function reads no snapshot and
    writes no plan. Its puts may carry only the attributes a claim has, keys and condition included
    (dynamodb:Attributes, every top-level attribute of the request): not a planner state, a back-off. It
    queries for an older build's sweep claim (which partitions: test_the_drain_and_scale_roles_touch_only_...)."""
    from spillway.adapters.state_store import StateStore

    assert table_actions("DrainFunction") == {
        "StateTable": {"dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:DeleteItem", "dynamodb:Query"}
    }
    client = _RecordingDynamoDB()
    at = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
    StateStore(client, "state").claim(  # type: ignore[arg-type]
        "ml", "gangsweep#us-east-1#i-1", {"plan": "p1"}, expires=at, now=at
    )
    [request] = client.puts
    written = set(request["Item"]) | set(request["ExpressionAttributeNames"].values())
    [put] = [s for s in function_statements("DrainFunction") if "dynamodb:PutItem" in actions(s)]
    assert put["Condition"]["ForAllValues:StringEquals"]["dynamodb:Attributes"] == sorted(written)


def test_the_snapshots_table_is_read_only_as_its_store_reads_it() -> None:
    """Not SAM's DynamoDBReadPolicy, which grants Scan, BatchGetItem, DescribeTable and
    ConditionCheckItem on the table and every index besides GetItem and Query: the snapshot store
    (spillway.adapters.store) gets a snapshot's manifest by key and queries the latest one and its
    chunks, nothing else. A function that reads snapshots (plan, scale's re-plan, interrupt) is granted
    those two on the table alone."""
    templated = sorted(
        name
        for name in FUNCTIONS
        for policy in function_policies(name)
        if isinstance(policy, dict) and "DynamoDBReadPolicy" in policy
    )
    assert templated == []
    readers = sorted(name for name in FUNCTIONS if "SnapshotsTable" in table_actions(name))
    assert readers == ["InterruptFunction", "ObserveFunction", "PlanFunction", "ScaleFunction"]
    for name in ("InterruptFunction", "PlanFunction", "ScaleFunction"):
        assert table_actions(name)["SnapshotsTable"] == {"dynamodb:GetItem", "dynamodb:Query"}, name


def test_no_statement_grants_logs_put_resource_policy_or_a_wildcard_action() -> None:
    granted = {a for s in all_statements() if s.get("Effect") == "Allow" for a in actions(s)}
    assert "logs:PutResourcePolicy" not in granted
    assert not [a for a in granted if a == "*" or a.endswith(":*")]


def test_log_delivery_may_write_only_to_the_state_machines_log_groups_of_this_account() -> None:
    [policy] = [r for r in EXPANDED.values() if r.get("Type") == "AWS::Logs::ResourcePolicy"]
    text = policy["Properties"]["PolicyDocument"]["Fn::Sub"]
    document = json.loads(re.sub(r"\$\{[^}]+\}", "x", text))
    [statement] = document["Statement"]
    assert statement["Principal"] == {"Service": "delivery.logs.amazonaws.com"}
    assert set(statement["Action"]) == {"logs:CreateLogStream", "logs:PutLogEvents"}
    assert statement["Condition"]["StringEquals"] == {"aws:SourceAccount": "x"}
    log_groups = {m.split(".")[0] for m in re.findall(r"\$\{([A-Za-z]+LogGroup)\.Arn\}", text)}
    logged = {
        next(iter(references(d["CloudWatchLogsLogGroup"]["LogGroupArn"])))
        for props in STATE_MACHINES.values()
        for d in props["Logging"]["Destinations"]
    }
    assert log_groups == logged
    for logical in STATE_MACHINES:
        assert RESOURCES[logical].get("DependsOn") == "StateMachineLogDeliveryPolicy", logical


def test_each_kubernetes_facing_role_has_its_own_access_entry_user_and_group() -> None:
    entries = {k: v["Properties"] for k, v in EXPANDED.items() if v.get("Type") == "AWS::EKS::AccessEntry"}
    by_role = {references(p["PrincipalArn"]).pop(): p for p in entries.values()}
    assert set(by_role) == {
        "ObserveFunctionRole",
        "PlanFunctionRole",
        "ScaleFunctionRole",
        "DrainFunctionRole",
    }
    for role, props in by_role.items():
        name = role.removesuffix("FunctionRole").lower()
        assert props["KubernetesGroups"] == [f"spillway:{name}"], role
        assert props["Username"] == f"spillway:{name}", role


def test_the_role_outputs_the_readme_and_rbac_yaml_name_exist() -> None:
    outputs = TEMPLATE["Outputs"]
    for fn in ("Observe", "Plan", "Scale", "Drain"):
        assert references(outputs[f"{fn}FunctionRoleArn"]["Value"]) == {f"{fn}FunctionRole"}


# --- poll loops fit an execution's history (spillway.model.history) ---------------------------------


def machine_states(name: str) -> dict[str, dict[str, Any]]:
    """A state machine's states by path (``Map/Inner`` for a Map's)."""
    out: dict[str, dict[str, Any]] = {}

    def walk(machine: dict[str, Any], prefix: str) -> None:
        for state_name, state in machine["States"].items():
            out[prefix + state_name] = state
            if "ItemProcessor" in state:
                walk(state["ItemProcessor"], f"{prefix}{state_name}/")

    walk(json.loads((ROOT / "statemachines" / name).read_text()), "")
    return out


def loop_events(name: str, loop: list[str]) -> int:
    """History events of one turn of ``loop`` (each state leads to the next, the last back to the first)."""
    from spillway.model import history

    per_type = {"Task": history.TASK_EVENTS, "Wait": history.WAIT_EVENTS, "Choice": history.CHOICE_EVENTS}
    states = machine_states(name)
    for here, there in zip(loop, loop[1:] + loop[:1], strict=True):
        state, target = states[here], there.rsplit("/", 1)[-1]
        nexts = {state.get("Next"), state.get("Default")} | {c["Next"] for c in state.get("Choices", [])}
        assert target in nexts, here
    return sum(per_type[states[n]["Type"]] for n in loop)


def test_the_poll_loops_are_the_events_a_turn_spillway_model_history_counts() -> None:
    from spillway.model import history

    assert loop_events("gang_launch.asl.json", ["WaitReady", "Verify", "Ready?"]) == history.POLL_EVENTS
    assert loop_events("gang_launch.asl.json", ["WaitRunning", "Attach", "Attached?"]) == history.POLL_EVENTS
    up = ["Groups/WaitForLaunch", "Groups/Verify", "Groups/Launched?"]
    assert loop_events("scale_up.asl.json", up) == history.POLL_EVENTS
    assert loop_events("drain_node.asl.json", ["Evict", "IsEmpty", "WaitForPods"]) == history.POLL_EVENTS
    assert history.POLL_EVENTS * history.MAX_POLLS <= history.LOOP_EVENTS < history.HISTORY_EVENTS


def rounds_through(name: str, start: str) -> list[list[str]]:
    """Every way from ``start`` back to it that visits no state twice, through Next, Default and the
    Choices (a Catch leaves the loop for the compensation, which ends the execution)."""
    states = machine_states(name)
    found: list[list[str]] = []

    def walk(path: list[str]) -> None:
        state = states[path[-1]]
        nexts = {state.get("Next"), state.get("Default")} | {c["Next"] for c in state.get("Choices", [])}
        for there in sorted(n for n in nexts if n is not None):
            if there == start:
                found.append(path)
            elif there not in path:
                walk([*path, there])

    walk([start])
    return found


def test_every_way_a_drain_comes_back_to_its_eviction_rounds_fits_the_history_max_rounds_allows() -> None:
    """A round may end anywhere that leads back to WaitForPods: after Evict (pods left), after the check
    before terminating (not ready), or after the terminate step's own check (NotTerminated), the
    longest. A pod that lands on the node between the check and the terminate, round after round, makes
    every round the longest: MAX_ROUNDS of those must fit the events the loops may use, or the execution
    hits Step Functions' cap and fails with no Catch, its node left cordoned."""
    from spillway.model import history

    rounds = rounds_through("drain_node.asl.json", "WaitForPods")
    assert ["WaitForPods", "Evict", "IsEmpty"] in rounds
    longest = max(loop_events("drain_node.asl.json", r) for r in rounds)
    assert history.MAX_ROUNDS * longest <= history.LOOP_EVENTS
    assert longest == history.DRAIN_ROUND_EVENTS


def test_a_scale_up_groups_states_besides_its_checks_are_what_spillway_model_history_counts() -> None:
    """Each group runs Prepare, SetOrNot, SetDesired, then its checks, then BackOff (or a Pass, fewer)."""
    from spillway.model import history

    states = machine_states("scale_up.asl.json")
    per_type = {"Task": history.TASK_EVENTS, "Choice": history.CHOICE_EVENTS, "Pass": history.PASS_EVENTS}
    path = ["Groups/Prepare", "Groups/SetOrNot", "Groups/SetDesired"]
    assert [states[n]["Type"] for n in path] == ["Task", "Choice", "Task"]
    ends = {n: s for n, s in states.items() if n.startswith("Groups/") and s.get("End")}
    ends_named = ("Launched", "Unsettled", "Resized", "BackOff", "Refused", "Errored")
    assert set(ends) == {"Groups/" + n for n in ends_named}
    most = max(per_type[s["Type"]] for s in ends.values())
    fixed = history.MAP_ITERATION_EVENTS + sum(per_type[states[n]["Type"]] for n in path) + most
    assert fixed == history.SCALE_UP_GROUP_EVENTS


# --- what the review r13 found checkov cannot see ---------------------------------------------------


def sub_text(value: Any) -> str:
    """A template string: a ``!Sub``'s text, ``${X.Arn}`` for ``!GetAtt X.Arn``, else the value."""
    if isinstance(value, dict) and "Fn::Sub" in value:
        inner = value["Fn::Sub"]
        return inner if isinstance(inner, str) else inner[0]
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return "${" + ".".join(value["Fn::GetAtt"]) + "}"
    if isinstance(value, dict) and "Ref" in value:
        return "${" + value["Ref"] + "}"
    return str(value)


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


ALARM_ARN = "arn:${AWS::Partition}:cloudwatch:${AWS::Region}:${AWS::AccountId}:alarm:"


def test_the_alarm_topics_key_lets_cloudwatch_encrypt_for_this_stacks_alarms_and_nobody_else() -> None:
    """Every alarm notifies through AlarmTopic. The AWS managed key alias/aws/sns cannot be used there: its
    key policy cannot be changed to let cloudwatch.amazonaws.com use it, so CloudWatch fails to publish and
    every alarm is mute (SNS Developer Guide, "Enable compatibility between event sources from AWS services
    and encrypted topics"). The topic gets a key of this stack, rotated, whose policy lets the account
    administer it and CloudWatch use it (kms:Decrypt, kms:GenerateDataKey*) only for this stack's alarms
    (aws:SourceAccount, aws:SourceArn): no other service publishes to the topic."""
    alarms = {k: v["Properties"] for k, v in EXPANDED.items() if v.get("Type") == "AWS::CloudWatch::Alarm"}
    assert alarms and all(p["AlarmActions"] == [{"Ref": "AlarmTopic"}] for p in alarms.values())
    key_ref = EXPANDED["AlarmTopic"]["Properties"]["KmsMasterKeyId"]
    assert isinstance(key_ref, dict), (
        f"AlarmTopic is encrypted with {key_ref!r}, a key CloudWatch may not use"
    )
    key = EXPANDED[key_ref["Ref"]]
    assert key["Type"] == "AWS::KMS::Key"
    assert key["Properties"]["EnableKeyRotation"] is True
    policy = key["Properties"]["KeyPolicy"]["Statement"]
    principals = {json.dumps(s["Principal"], sort_keys=True): s for s in policy}
    root = {"AWS": {"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:root"}}
    cloudwatch = {"Service": "cloudwatch.amazonaws.com"}
    assert set(principals) == {json.dumps(root, sort_keys=True), json.dumps(cloudwatch, sort_keys=True)}
    service = principals[json.dumps(cloudwatch, sort_keys=True)]
    assert service["Effect"] == "Allow"
    assert sorted(as_list(service["Action"])) == ["kms:Decrypt", "kms:GenerateDataKey*"]
    condition = service["Condition"]
    assert condition["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    listed = [sub_text(a) for a in as_list(condition["ArnEquals"]["aws:SourceArn"])]
    granted = set(listed)
    assert len(listed) == len(granted), (
        f"an alarm listed twice: {sorted(a for a in granted if listed.count(a) > 1)}"
    )
    assert granted == {ALARM_ARN + sub_text(p["AlarmName"]) for p in alarms.values()}


EC2_ARN = re.compile(
    r"arn:\$\{AWS::Partition\}:ec2:\*:(?P<account>\$\{AWS::AccountId\})?:(?P<kind>[a-z-]+)/\*"
)


def ec2_resource_types(statement: dict[str, Any]) -> list[tuple[str, bool]]:
    """The EC2 resource types a statement names (any region, any id), each with whether its ARN pattern
    names this account."""
    out = []
    for resource in as_list(statement["Resource"]):
        match = EC2_ARN.fullmatch(sub_text(resource))
        assert match, resource
        out.append((match["kind"], bool(match["account"])))
    return out


GANG_LAUNCH = [s for s in statements(EXPANDED["GangLaunchPolicy"]) if isinstance(s, dict) and "Sid" in s]


def launch_grants(action: str) -> list[tuple[str, bool]]:
    return [
        grant
        for statement in GANG_LAUNCH
        if statement["Effect"] == "Allow" and action in actions(statement)
        for grant in ec2_resource_types(statement)
    ]


@pytest.mark.parametrize("action", ["ec2:RunInstances", "ec2:CreateFleet"])
def test_a_gang_fleet_may_use_every_resource_type_its_launch_template_may_bring_and_no_other(
    action: str,
) -> None:
    """A launch whose request involves a resource type the policy does not cover is refused whole
    (UnauthorizedOperation): a GPU launch template's cluster placement group, its capacity reservation or
    Capacity Block, a block device mapping's snapshot, the key pair, and a Spot group's fleet its Spot
    Instance requests (Karpenter's controller policy grants spot-instances-request for CreateFleet, review17).
    The resource types are those the
    Service Authorization Reference lists for RunInstances and CreateFleet (Elastic Graphics and Elastic
    Inference, retired, are not granted); account-scoped where the ARN has an account (an AMI's and a
    snapshot's have none)."""
    granted = launch_grants(action)
    expected = {
        "fleet", "instance", "launch-template", "image", "volume", "network-interface", "subnet",
        "security-group", "key-pair", "placement-group", "capacity-reservation", "snapshot",
        "spot-instances-request",
    }  # fmt: skip
    assert {kind for kind, _ in granted} == expected
    # an AMI's and a snapshot's ARN have no account (the owner may be another account, or Amazon)
    assert sorted(granted) == sorted((kind, kind not in ("image", "snapshot")) for kind in expected)


def test_a_gang_fleet_tags_at_launch_the_resources_a_launch_template_tags_and_only_at_launch() -> None:
    """Tags applied at launch, by the request or by the launch template's TagSpecifications (instance,
    volume, network-interface, as eksctl's node templates tag them), need ec2:CreateTags on each tagged
    resource type (EC2 User Guide, "Grant permission to tag resources during creation")."""
    tagging = [s for s in GANG_LAUNCH if "ec2:CreateTags" in actions(s)]
    assert tagging
    tagged = sorted(grant for s in tagging for grant in ec2_resource_types(s))
    assert tagged == [("instance", True), ("network-interface", True), ("volume", True)]
    for statement in tagging:
        assert statement["Condition"] == {
            "StringEquals": {"ec2:CreateAction": ["CreateFleet", "RunInstances"]}
        }


@pytest.mark.parametrize("logical", sorted(STATE_MACHINES))
def test_a_state_machine_may_invoke_exactly_the_functions_its_definition_calls(logical: str) -> None:
    """SAM's LambdaInvokePolicy grants function:<name>* (a prefix): the scale-up machine of cluster "ml"
    could invoke every function of a cluster named "ml-scale". Each machine gets lambda:InvokeFunction on
    the unqualified ARN of each function its definition calls (no definition invokes a version or alias)."""
    props = STATE_MACHINES[logical]
    text = (ROOT / props["DefinitionUri"]).read_text()
    called = {
        fn
        for key, value in (props.get("DefinitionSubstitutions") or {}).items()
        if "${" + key + "}" in text
        for fn in references(value) & set(FUNCTIONS)
    }
    assert called
    policies = props.get("Policies") or []
    templates = [p for p in policies if isinstance(p, dict) and "Statement" not in p]
    assert not [p for p in templates if "Lambda" in next(iter(p))], templates
    invoking = [
        s
        for p in policies
        if isinstance(p, dict)
        for s in p.get("Statement", [])
        if "lambda:InvokeFunction" in actions(s)
    ]
    assert all(s["Effect"] == "Allow" and actions(s) == {"lambda:InvokeFunction"} for s in invoking)
    granted = {sub_text(r) for s in invoking for r in as_list(s["Resource"])}
    assert granted == {"${" + fn + ".Arn}" for fn in called}
    for key, value in (props.get("DefinitionSubstitutions") or {}).items():
        if references(value) & set(FUNCTIONS):
            assert re.search(r"\$\{" + key + r"\}:", text) is None, f"{logical} invokes a qualified {key}"


SECRET_KEY_PARAMETER = "KubeconfigSecretKmsKeyArn"


def test_a_kubeconfig_secret_under_a_customer_managed_key_is_decrypted_only_through_secrets_manager() -> None:
    """A secret may be encrypted with a customer managed key; GetSecretValue then needs kms:Decrypt on it
    (Secrets Manager User Guide, "Secret encryption and decryption"). Only when the key's ARN is given, and
    only as Secrets Manager in this region uses it for that one secret (kms:ViaService and the
    SecretARN encryption context Secrets Manager sends)."""
    parameter = TEMPLATE["Parameters"][SECRET_KEY_PARAMETER]
    assert parameter["Default"] == ""
    pattern = re.compile(parameter["AllowedPattern"])
    assert pattern.fullmatch("")
    assert pattern.fullmatch("arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab")
    assert pattern.fullmatch("arn:aws:kms:us-east-1:123456789012:key/mrk-1234abcd12ab34cd56ef1234567890ab")
    for wrong in ("alias/aws/secretsmanager", "arn:aws:kms:us-east-1:123456789012:alias/k", "1234abcd"):
        assert not pattern.fullmatch(wrong), wrong
    conditions = TEMPLATE["Conditions"]
    decrypting = [
        s["Fn::If"]
        for s in statements(EXPANDED["ClusterAccessPolicy"])
        if "Fn::If" in s and "kms:Decrypt" in json.dumps(s)
    ]
    [(condition, statement, otherwise)] = decrypting
    assert otherwise == {"Ref": "AWS::NoValue"}
    assert {"Condition": "UseSecret"} in conditions[condition]["Fn::And"]
    assert {"Fn::Not": [{"Fn::Equals": [{"Ref": SECRET_KEY_PARAMETER}, ""]}]} in conditions[condition][
        "Fn::And"
    ]
    assert actions(statement) == {"kms:Decrypt"}
    assert statement["Resource"] == {"Ref": SECRET_KEY_PARAMETER}
    assert statement["Condition"] == {
        "StringEquals": {
            "kms:ViaService": {"Fn::Sub": "secretsmanager.${AWS::Region}.amazonaws.com"},
            "kms:EncryptionContext:SecretARN": {"Ref": "KubeconfigSecretArn"},
        }
    }
    [rule] = [r for r in TEMPLATE["Rules"].values() if SECRET_KEY_PARAMETER in json.dumps(r["RuleCondition"])]
    assert rule["Assertions"][0]["Assert"] == {"Fn::Equals": [{"Ref": "ClusterAccess"}, "secret"]}


def function_actions(function: str) -> set[str]:
    """Every action a function's role is granted: its inline statements and the managed policies it
    names."""
    granted: set[str] = set()
    for policy in function_policies(function):
        if isinstance(policy, dict) and "Statement" in policy:
            granted |= {a for s in policy["Statement"] for a in actions(s)}
        for logical in references(policy) if isinstance(policy, dict) else set():
            if EXPANDED.get(logical, {}).get("Type") == "AWS::IAM::ManagedPolicy":
                granted |= {a for s in statements(EXPANDED[logical]) for a in actions(s)}
    return granted


LAUNCH_SETTINGS_READS = {
    "ec2:DescribeLaunchTemplates",
    "ec2:DescribeLaunchTemplateVersions",
    "autoscaling:DescribeLaunchConfigurations",
}


def test_the_functions_that_read_groups_may_read_their_launch_settings_and_no_other_function_may() -> None:
    """Observe and the scale function's overflow re-plan read every group through the adapter, which
    resolves $Latest and $Default with DescribeLaunchTemplates before it reads a version: a role without
    one of these calls fails every observation of a region with a launch template (AwsError,
    UnauthorizedOperation). No other function reads them (least privilege)."""
    assert {a for a in LAUNCH_SETTINGS_READS if f".{snake(a)}" in CODE} == LAUNCH_SETTINGS_READS
    readers = {f for f in FUNCTIONS if LAUNCH_SETTINGS_READS & function_actions(f)}
    assert readers == {"ObserveFunction", "ScaleFunction"}
    for function in readers:
        assert function_actions(function) >= LAUNCH_SETTINGS_READS, function


def function_statements(function: str) -> list[dict[str, Any]]:
    """Every statement a function's role is granted: inline, and in the managed policies it names."""
    found: list[dict[str, Any]] = []
    for policy in function_policies(function):
        if isinstance(policy, dict) and "Statement" in policy:
            found += policy["Statement"]
        for logical in references(policy) if isinstance(policy, dict) else set():
            if EXPANDED.get(logical, {}).get("Type") == "AWS::IAM::ManagedPolicy":
                found += statements(EXPANDED[logical])
    return found


def test_the_functions_that_read_groups_may_describe_this_clusters_node_groups_and_nothing_more() -> None:
    """The adapter reads an EKS managed node group's labels and taints (DescribeNodegroup) for its
    template at zero; observe and the scale function's overflow re-plan read groups through it. The
    grant names this cluster's node groups only (EKS's node group ARN,
    ``arn:aws:eks:<region>:<account>:nodegroup/<cluster>/<nodegroup>/<uuid>``, Service Authorization
    Reference, Amazon EKS resource types); no other function has it."""
    assert ".describe_nodegroup(" in CODE
    readers = {f for f in FUNCTIONS if "eks:DescribeNodegroup" in function_actions(f)}
    assert readers == {"ObserveFunction", "ScaleFunction"}
    for function in readers:
        grants = [s for s in function_statements(function) if "eks:DescribeNodegroup" in actions(s)]
        assert [(actions(s), s["Resource"]) for s in grants] == [
            (
                {"eks:DescribeNodegroup"},
                {
                    "Fn::Sub": "arn:${AWS::Partition}:eks:${AWS::Region}:${AWS::AccountId}:nodegroup/${ClusterName}/*/*"
                },
            )
        ], function


def test_a_priority_configmap_the_plan_cannot_read_raises_an_alarm() -> None:
    """A priority expander ConfigMap cluster-autoscaler would refuse makes every plan rank groups without
    the priorities an administrator wrote; the plan counted it (PriorityConfigMapInvalid) and nothing
    alarmed, so launches went to the groups ranked last until somebody read the plans. Any plan counting
    it within five minutes now alarms."""
    [alarm] = [
        v["Properties"]
        for v in EXPANDED.values()
        if v.get("Type") == "AWS::CloudWatch::Alarm"
        and v["Properties"].get("MetricName") == "PriorityConfigMapInvalid"
    ]
    assert (alarm["Namespace"], alarm["Statistic"], alarm["Period"]) == ("Spillway", "Sum", 300)
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    assert {d["Name"] for d in alarm["Dimensions"]} == {"service", "Cluster"}


def test_overflow_alarms_only_when_it_lasts_not_for_one_burst() -> None:
    """Spilling to another region is the product's purpose, yet any plan that launched one node outside
    the primary region paged (Sum >= 1 in one 5-minute period): every scaled-up run during a short
    shortage woke somebody. It now alarms on overflow in 4 of the last 12 periods, an hour's shortage."""
    [alarm] = [
        v["Properties"]
        for v in EXPANDED.values()
        if v.get("Type") == "AWS::CloudWatch::Alarm" and v["Properties"].get("MetricName") == "Overflow"
    ]
    assert alarm["AlarmName"] == {"Fn::Sub": "spillway-${ClusterName}-Overflow"}
    assert (alarm["Statistic"], alarm["Period"], alarm["Threshold"]) == ("Sum", 300, 1)
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (12, 4)
    assert alarm["TreatMissingData"] == "notBreaching"
    assert alarm["AlarmActions"] == [{"Ref": "AlarmTopic"}]


def observe_read_alarm(metric: str, name: str, periods: int) -> None:
    """The alarm on ``metric``, a count observe emits every observation (0 too) of the regions a read
    failed in: named ``name``, firing when the least count of each of ``periods`` 5-minute periods is
    above 0 (every observation failed then), on the stack's series, to the alarm topic."""
    [(logical, resource)] = [
        (k, v)
        for k, v in EXPANDED.items()
        if v.get("Type") == "AWS::CloudWatch::Alarm" and v["Properties"].get("MetricName") == metric
    ]
    alarm = resource["Properties"]
    assert alarm["AlarmName"] == {"Fn::Sub": f"spillway-${{ClusterName}}-{name}"}, logical
    assert alarm["Namespace"] == "Spillway"
    assert alarm["Dimensions"] == [
        {"Name": "service", "Value": "spillway"},
        {"Name": "Cluster", "Value": {"Ref": "ClusterName"}},
    ]
    assert (alarm["Statistic"], alarm["Period"]) == ("Minimum", 300)
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (periods, periods)
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    # observe not running at all is its own alarm's business (observe-errors), not a failed read
    assert alarm["TreatMissingData"] == "notBreaching"
    assert alarm["AlarmActions"] == [{"Ref": "AlarmTopic"}]
    # the alarm topic's key lets CloudWatch publish for it
    assert f"alarm:spillway-${{ClusterName}}-{name}" in json.dumps(EXPANDED)


def test_a_region_whose_groups_observe_keeps_failing_to_read_raises_an_alarm() -> None:
    """A region whose Auto Scaling read fails no longer fails the observation while another region is
    read: its groups are carried, not scaled, and left out after max_node_provision_minutes. Observe
    counts such regions in every observation (RegionReadsFailed); the alarm fires once a region was
    unread in every observation for 10 minutes."""
    observe_read_alarm("RegionReadsFailed", "region-unread", 2)


def test_a_region_whose_gang_instances_observe_keeps_failing_to_read_raises_an_alarm() -> None:
    """A region whose DescribeInstances of the gang attempts fails is left out of the snapshot and fails
    no observation (README "Atomic gang launch"); it was only logged, so a region refused for good (a
    role or SCP, a region not opted in) left the gang sweep blind there with nothing to tell anyone.
    observe counts the regions it could not read in every observation (0 too); the alarm fires when the
    least count of each of three 5-minute periods is above 0: every observation (one each 20 s, about
    45) failed for 15 minutes, which no throttling burst the SDK's retries ride out does, and well
    within the hour (``gang_orphan_minutes``) an orphan waits before the sweep would end it."""
    observe_read_alarm("GangInstanceReadsFailed", "gang-sweep-blind", 3)


def test_the_drain_function_may_terminate_with_ec2_only_this_clusters_gang_attempt_instances() -> None:
    """remove_gang_orphan (spillway.act.gangsweep) terminates a fleet gang's instance left outside every
    group with EC2 TerminateInstances: granted on instances only, and only those carrying this cluster's
    tag and a gang attempt tag (any value), the tags every fleet instance gets at launch."""
    assert ".terminate_instances(" in CODE
    grants = [s for s in function_statements("DrainFunction") if "ec2:TerminateInstances" in actions(s)]
    assert grants, "the drain function cannot terminate a gang orphan"
    for statement in grants:
        assert statement["Effect"] == "Allow" and ec2_resource_types(statement) == [("instance", True)]
        assert statement["Condition"] == {
            "StringEquals": {"ec2:ResourceTag/spillway.io/cluster": {"Ref": "ClusterName"}},
            "Null": {"ec2:ResourceTag/spillway.io/gang-attempt": "false"},
        }


# --- each function's role grants the Auto Scaling, EC2 and EKS calls its code can make, and no other --
#
# Derived from the code, not listed by hand: (1) which methods of the Cloud port (spillway.ports.Cloud)
# each function's handler can reach, by walking the act layer's code from the entry the handler calls;
# (2) which boto3 operations each method of the real adapter (spillway.adapters.aws.AwsAdapter) calls,
# by walking the adapter's code; (3) the IAM action of each operation, from botocore's service model
# (for autoscaling, ec2 and eks the IAM action is named as the API operation: Service Authorization
# Reference, "Actions defined by ..."). A call the role lacks is an outage moto never shows (moto does
# not authorise); a grant no code path uses is privilege to take away.

PACKAGE_ROOT = ROOT / "layers" / "spillway"


class SourceModule:
    """One module of the spillway package: its top-level functions, classes' methods, module-level
    values (a dispatch table) and what it imports from spillway by name."""

    def __init__(self, name: str) -> None:
        path = PACKAGE_ROOT / (name.replace(".", "/") + ".py")
        if not path.exists():
            path = PACKAGE_ROOT / name.replace(".", "/") / "__init__.py"
        tree = ast.parse(path.read_text())
        self.defs: dict[str, Any] = {}
        self.methods: dict[str, set[str]] = {}
        self.imports: dict[str, tuple[str, str]] = {}
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.defs[node.name] = node
            elif isinstance(node, ast.ClassDef):
                self.defs[node.name] = node
                inner = [i for i in node.body if isinstance(i, ast.FunctionDef | ast.AsyncFunctionDef)]
                self.methods[node.name] = {i.name for i in inner}
                self.defs.update({f"{node.name}.{i.name}": i for i in inner})
            elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                self.defs.update({t.id: node.value for t in targets if isinstance(t, ast.Name)})
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("spillway"):
                self.imports.update({a.asname or a.name: (str(node.module), a.name) for a in node.names})


_SOURCES: dict[str, SourceModule] = {}


def source(name: str) -> SourceModule:
    if name not in _SOURCES:
        _SOURCES[name] = SourceModule(name)
    return _SOURCES[name]


def _edges(module: str, qualname: str, node: Any, imported: bool = False) -> Iterator[tuple[str, str]]:
    """What a definition may call or hand on: names it uses (local or imported from spillway), methods of
    its own class (self.x), and methods of any class of its module named as an attribute (reader.read);
    with ``imported``, of the classes it imports too (:func:`_imported_methods`)."""
    mod, cls = source(module), qualname.split(".")[0] if "." in qualname else None
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name):
            if inner.id in mod.defs:
                yield module, inner.id
            elif inner.id in mod.imports:
                yield mod.imports[inner.id]
        elif isinstance(inner, ast.Attribute):
            if isinstance(inner.value, ast.Name) and inner.value.id == "self" and cls:
                yield module, f"{cls}.{inner.attr}"
            yield from (
                (module, f"{c}.{inner.attr}") for c, names in mod.methods.items() if inner.attr in names
            )
            if imported:
                yield from _imported_methods(mod, inner.attr)


def _imported_methods(mod: SourceModule, attr: str) -> Iterator[tuple[str, str]]:
    """Methods named ``attr`` of the classes a module imports from spillway by name (``owner.raised()``
    on an ``Owner`` made from claims.py's class). Wider than a call can reach (any attribute of that name,
    a snapshot's field named as a Cloud method too): the state partitions' walk only, whose calls are
    told by their receiver as well."""
    for module, name in mod.imports.values():
        if attr in source(module).methods.get(name, ()):
            yield module, f"{name}.{attr}"


def reachable(*entries: tuple[str, str], imported: bool = False) -> list[Any]:
    """The AST nodes of every definition reachable from the entries (a class: its __init__); with
    ``imported``, through methods of imported classes too (:func:`_edges`)."""
    seen: set[tuple[str, str]] = set()
    todo, nodes = list(entries), []
    while todo:
        module, qualname = key = todo.pop()
        node = source(module).defs.get(qualname)
        if key in seen or node is None:
            continue
        seen.add(key)
        if isinstance(node, ast.ClassDef):
            todo.append((module, f"{qualname}.__init__"))
            continue
        nodes.append(node)
        todo.extend(_edges(module, qualname, node, imported))
    return nodes


def attributes(nodes: list[Any]) -> Iterator[Any]:
    return (inner for node in nodes for inner in ast.walk(node) if isinstance(inner, ast.Attribute))


def _operations() -> dict[str, str]:
    """boto3 method name -> IAM action, for the services the Cloud adapter calls (an operation named
    alike in two of them would be ambiguous: none is)."""
    session = botocore.session.get_session()
    found: dict[str, set[str]] = {}
    for service in ("autoscaling", "ec2", "eks"):
        for operation in session.get_service_model(service).operation_names:
            found.setdefault(xform_name(operation), set()).add(f"{service}:{operation}")
    return {name: next(iter(actions)) for name, actions in found.items() if len(actions) == 1}


OPERATIONS = _operations()
CLOUD_METHODS = {name for name, value in vars(Cloud).items() if callable(value) and not name.startswith("_")}


def adapter_actions(method: str) -> set[str]:
    """The IAM actions of the boto3 operations AwsAdapter.<method> can call (``client.x(...)``, a bound
    ``client.x`` handed to a helper, or ``get_paginator("x")``)."""
    nodes = reachable(("spillway.adapters.aws", f"AwsAdapter.{method}"))
    called = {a.attr for a in attributes(nodes) if a.attr in OPERATIONS}
    paged = {
        inner.args[0].value
        for node in nodes
        for inner in ast.walk(node)
        if isinstance(inner, ast.Call)
        and isinstance(inner.func, ast.Attribute)
        and inner.func.attr == "get_paginator"
        and isinstance(inner.args[0], ast.Constant)
    }
    return {OPERATIONS[name] for name in called | paged}


# Where each function's handler enters the act layer (functions/<name>/app.py calls these: checked below).
ENTRIES: dict[str, tuple[tuple[str, str], ...]] = {
    "DrainFunction": (("spillway.act.drain", "run_action"),),
    "ScaleFunction": (("spillway.act.scale", "ScaleSteps.run"), ("spillway.act.gang", "GangSteps.run")),
    "InterruptFunction": (("spillway.act.interrupt", "Interrupter.handle"),),
    "ObserveFunction": (("spillway.observe", "run_observe"),),
    "PlanFunction": (("spillway.act.planning", "run_plan"), ("spillway.act.planning", "snapshot_ref")),
}
ENTRY_CALLS = {
    "DrainFunction": ["run_action("],
    "ScaleFunction": [
        ".scale_steps(add_count, remaining_ms).run(",
        ".gang_steps(add_count, remaining_ms).run(",
    ],
    "InterruptFunction": ["interrupter.handle("],
    "ObserveFunction": ["run_observe("],
    "PlanFunction": ["run_plan(", "snapshot_ref("],
}
# What AWS authorises for an operation besides its own action. CreateFleet with a launch template
# launches through RunInstances and tags at launch through CreateTags (EC2 User Guide, "EC2 Fleet
# prerequisites" / "Grant permission to tag resources during creation"). An instant fleet needs no
# AWSServiceRoleForEC2Fleet ("An instant EC2 Fleet does not require this role", same page), but a Spot
# one needs AWSServiceRoleForEC2Spot, which EC2 creates with the caller's credentials the first time an
# account launches Spot (else AuthFailure.ServiceLinkedRoleCreationNotPermitted, returned in CreateFleet's
# Errors: karpenter-provider-aws#504, terraform-aws-eks#2670): iam:CreateServiceLinkedRole.
IMPLIED = {"ec2:CreateFleet": {"ec2:RunInstances", "ec2:CreateTags", "iam:CreateServiceLinkedRole"}}
CLOUD_PREFIXES = ("autoscaling:", "ec2:", "eks:", "iam:CreateServiceLinkedRole")


def cloud_calls(function: str) -> set[str]:
    """The Cloud port methods a function's code can reach."""
    return {a.attr for a in attributes(reachable(*ENTRIES[function])) if a.attr in CLOUD_METHODS}


def needed_actions(function: str) -> set[str]:
    direct = {action for method in cloud_calls(function) for action in adapter_actions(method)}
    return direct | {extra for action in direct for extra in IMPLIED.get(action, ())}


def role_statements(function: str) -> list[dict[str, Any]]:
    """Every statement of a function's role: its Policies (inline and managed) and the managed policies
    that name the role (the Fn::ForEach ones, whose condition keys carry the cluster's name)."""
    role = f"{function}Role"
    attached = [
        s
        for resource in EXPANDED.values()
        if resource.get("Type") == "AWS::IAM::ManagedPolicy"
        and role in references(resource["Properties"].get("Roles") or [])
        for s in statements(resource)
    ]
    return function_statements(function) + attached


def granted_cloud_actions(function: str) -> set[str]:
    """What the role may do on Auto Scaling, EC2 and EKS (eks:DescribeCluster apart: the Kubernetes
    client's, ClusterAccessPolicy) and iam:CreateServiceLinkedRole."""
    lambdas = statements(EXPANDED["FunctionNetworkInterfacesPolicy"])  # Lambda's calls for a VPC function
    granted = {
        a
        for s in role_statements(function)
        if s.get("Effect") == "Allow" and s not in lambdas
        for a in actions(s)
    }
    return {a for a in granted if a.startswith(CLOUD_PREFIXES)} - {"eks:DescribeCluster"}


def test_the_derivation_finds_the_calls_it_must() -> None:
    """The walk is no tautology: it finds what the code plainly calls."""
    assert adapter_actions("set_desired_capacity") == {
        "autoscaling:DescribeAutoScalingGroups",
        "autoscaling:SetDesiredCapacity",
    }
    assert adapter_actions("describe_activities") == {"autoscaling:DescribeScalingActivities"}  # paged
    assert adapter_actions("node_groups") >= {"ec2:DescribeLaunchTemplateVersions", "eks:DescribeNodegroup"}
    assert cloud_calls("DrainFunction") >= {"terminate_instance", "complete_lifecycle_action", "placement"}
    assert "create_fleet_instant" in cloud_calls("ScaleFunction")
    assert cloud_calls("PlanFunction") == set()


@pytest.mark.parametrize("function", sorted(ENTRIES))
def test_the_entries_are_where_the_handlers_enter_the_act_layer(function: str) -> None:
    handler = (ROOT / FUNCTIONS[function]["CodeUri"] / "app.py").read_text()
    assert all(call in handler for call in ENTRY_CALLS[function]), function


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_a_functions_role_grants_the_aws_calls_its_code_can_make_and_no_other(function: str) -> None:
    """Missing: the call fails in AWS alone (UnauthorizedOperation, AccessDenied). Extra: a Describe
    the function never makes is read access to every group and instance of the account; a write it never
    makes is a blast radius it does not need."""
    needed, granted = needed_actions(function), granted_cloud_actions(function)
    assert {"missing": needed - granted, "extra": granted - needed} == {"missing": set(), "extra": set()}


def test_the_only_service_linked_role_a_role_may_create_is_ec2_spots() -> None:
    """iam:CreateServiceLinkedRole on one role, AWSServiceRoleForEC2Spot, for spot.amazonaws.com alone
    (IAM User Guide, "Service-linked role permissions": the role's ARN under aws-service-role/<service>/,
    and the iam:AWSServiceName condition key)."""
    creating = [s for s in all_statements() if "iam:CreateServiceLinkedRole" in actions(s)]
    assert [(s["Effect"], actions(s), sub_text(s["Resource"]), s["Condition"]) for s in creating] == [
        (
            "Allow",
            {"iam:CreateServiceLinkedRole"},
            "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/aws-service-role/spot.amazonaws.com/AWSServiceRoleForEC2Spot",
            {"StringEquals": {"iam:AWSServiceName": "spot.amazonaws.com"}},
        )
    ]
    assert {f for f in FUNCTIONS if "iam:CreateServiceLinkedRole" in granted_cloud_actions(f)} == {
        "ScaleFunction"
    }


# What a state machine's definition calls, as IAM actions: each Lambda task is lambda:InvokeFunction; an
# aws-sdk:<service>:<action> task is the service's action of that name (sfn's IAM prefix is "states");
# startExecution.sync:2 is StartExecution on the child machine, DescribeExecution and StopExecution on
# its executions, and PutTargets, PutRule and DescribeRule on the EventBridge managed rule Step Functions
# waits through (Step Functions Developer Guide, "IAM policies for Step Functions nested executions").
# an AWS SDK integration (aws-sdk:<service>:<action>) or an optimized one (DynamoDB's item actions)
SDK_TASK = re.compile(r"arn:aws:states:::(?:aws-sdk:)?([a-z0-9]+):([A-Za-z0-9]+)\"")
IAM_PREFIX = {"sfn": "states", "cloudwatch": "cloudwatch", "dynamodb": "dynamodb"}
NESTED_SYNC = {
    "states:StartExecution",
    "states:DescribeExecution",
    "states:StopExecution",
    "events:PutTargets",
    "events:PutRule",
    "events:DescribeRule",
}
SAM_TEMPLATES = {"StepFunctionsExecutionPolicy": {"states:StartExecution"}}


def machine_needs(logical: str) -> set[str]:
    text = (ROOT / STATE_MACHINES[logical]["DefinitionUri"]).read_text()
    needed = {f"{IAM_PREFIX[svc]}:{action[0].upper()}{action[1:]}" for svc, action in SDK_TASK.findall(text)}
    if re.search(r'"Resource": "\$\{[A-Za-z]+FunctionArn\}"', text):
        needed.add("lambda:InvokeFunction")
    if "arn:aws:states:::states:startExecution.sync" in text:
        needed |= NESTED_SYNC
    return needed


def machine_grants(logical: str) -> set[str]:
    """Its role's actions, CloudWatch Logs delivery apart (StateMachineLogsPolicy: Step Functions'
    logging, not a call of the definition)."""
    granted: set[str] = set()
    for policy in EXPANDED[logical]["Properties"].get("Policies") or []:
        if isinstance(policy, dict) and "Statement" in policy:
            granted |= {a for s in policy["Statement"] for a in actions(s)}
        elif isinstance(policy, dict) and "Ref" in policy:  # a managed policy of the template
            if policy["Ref"] != "StateMachineLogsPolicy":
                granted |= {a for s in statements(EXPANDED[policy["Ref"]]) for a in actions(s)}
        elif isinstance(policy, dict):
            granted |= {a for name in policy for a in SAM_TEMPLATES.get(name, {f"unknown template {name}"})}
    return granted


@pytest.mark.parametrize("logical", sorted(STATE_MACHINES))
def test_a_state_machines_role_grants_what_its_definition_calls_and_no_other(logical: str) -> None:
    needed, granted = machine_needs(logical), machine_grants(logical)
    assert {"missing": needed - granted, "extra": granted - needed} == {"missing": set(), "extra": set()}


VOLUME_KEYS = "GangVolumeKmsKeyArns"


def test_a_gang_fleet_may_use_the_keys_of_its_encrypted_volumes_only_through_ec2() -> None:
    """A launch template whose volumes (or whose AMI's snapshots) are encrypted with a customer managed
    key: CreateFleet launches with the caller's permissions, and EBS needs kms:CreateGrant, Decrypt,
    DescribeKey, GenerateDataKeyWithoutPlaintext and ReEncrypt on the key for that caller (EBS User
    Guide, "Requirements for Amazon EBS encryption", permissions for users); without them the fleet's
    instances never run. An Auto Scaling group launches with its own service-linked role, so only the
    gang's fleets need this. Only the keys given, only as EC2 uses them (kms:ViaService), grants only
    for AWS resources (kms:GrantIsForAWSResource, that page's advice); none when none is given."""
    parameter = TEMPLATE["Parameters"][VOLUME_KEYS]
    assert (parameter["Type"], parameter["Default"]) == ("CommaDelimitedList", "")
    pattern = re.compile(parameter["AllowedPattern"])
    assert pattern.fullmatch("") and pattern.fullmatch(
        "arn:aws:kms:us-west-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    )
    assert not pattern.fullmatch("alias/aws/ebs") and not pattern.fullmatch("arn:aws:kms:us-west-2:1:alias/x")
    conditional = [s["Fn::If"] for s in statements(EXPANDED["GangLaunchPolicy"]) if "Fn::If" in s]
    keyed = [(c, s) for c, s, otherwise in conditional if VOLUME_KEYS in json.dumps(s)]
    assert {c for c, _ in keyed} == {"HasGangVolumeKeys"}
    assert all(
        otherwise == {"Ref": "AWS::NoValue"} for c, _, otherwise in conditional if c == "HasGangVolumeKeys"
    )
    condition = TEMPLATE["Conditions"]["HasGangVolumeKeys"]
    assert condition == {"Fn::Not": [{"Fn::Equals": [{"Fn::Join": ["", {"Ref": VOLUME_KEYS}]}, ""]}]}
    by_action = {frozenset(actions(s)): s for _, s in keyed}
    use_actions = {"kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKeyWithoutPlaintext"}
    use = by_action[frozenset(use_actions | {"kms:ReEncryptFrom", "kms:ReEncryptTo"})]
    assert use["Resource"] == {"Ref": VOLUME_KEYS}
    assert use["Condition"] == {"StringLike": {"kms:ViaService": "ec2.*.amazonaws.com"}}
    grant = by_action[frozenset({"kms:CreateGrant"})]
    assert grant["Resource"] == {"Ref": VOLUME_KEYS}
    assert grant["Condition"] == {"Bool": {"kms:GrantIsForAWSResource": "true"}}
    assert len(keyed) == 2 and all(s["Effect"] == "Allow" for _, s in keyed)


def longest_run_seconds(state: dict[str, Any], timeout: float) -> float:
    """The longest a Task state can run: every try its Retry allows (each retrier's MaxAttempts, its
    default 3), each the function's whole ``timeout``, and the longest wait before each retry."""
    total = timeout
    for retrier in state.get("Retry", []):
        wait = float(retrier.get("IntervalSeconds", 1))
        for _ in range(int(retrier.get("MaxAttempts", 3))):
            total += timeout + min(wait, float(retrier.get("MaxDelaySeconds", wait)))
            wait *= float(retrier.get("BackoffRate", 2))
    return total


def test_an_eviction_round_stops_within_half_the_drain_functions_timeout() -> None:
    """An eviction round starts no eviction after ``ROUND_SECONDS`` (spillway.act.drain): the rest of
    the function's time is for the eviction under way (three calls, each retried by the adapter), the
    listing after it and a lifecycle heartbeat. A round the timeout cuts is lost whole (Evict's Catch
    compensates), its pods evicted for nothing."""
    from spillway.act.drain import ROUND_SECONDS

    assert 0 < ROUND_SECONDS * 2 <= float(FUNCTIONS["DrainFunction"]["Timeout"])


def test_a_scale_step_has_the_time_for_a_call_after_its_marker_and_the_markers_release() -> None:
    """A raise (or give-back) marker is written, and each call after it started, only when that call and
    the marker's release fit in what is left of the invocation (spillway.act.deadline), each call at
    its longest with the SDK settings the clients are built with: the default settings leave that room
    in the scale function's Timeout, which spillway.model.calltime (and the configuration's refusal of
    settings that would not) takes to be the template's."""
    from spillway.adapters.aws import AwsSettings
    from spillway.model.calltime import (
        MARKED_CALLS,
        SCALE_FUNCTION_TIMEOUT_SECONDS,
        STEP_MARGIN_SECONDS,
        STEP_ROOM_SECONDS,
        step_refusal,
    )
    from spillway.runtime import RuntimeConfig

    timeout = float(FUNCTIONS["ScaleFunction"]["Timeout"])
    assert timeout == SCALE_FUNCTION_TIMEOUT_SECONDS
    defaults = {n: f.default for n, f in RuntimeConfig.model_fields.items() if n.startswith("aws_")}
    settings = AwsSettings(
        defaults["aws_max_attempts"], defaults["aws_connect_timeout"], defaults["aws_read_timeout"]
    )
    assert settings == AwsSettings()  # the clients' own defaults are the configuration's
    needed = MARKED_CALLS * settings.worst_call_seconds() + STEP_MARGIN_SECONDS + STEP_ROOM_SECONDS
    assert needed <= timeout and not step_refusal(settings.max_attempts, settings.connect_timeout,
                                                  settings.read_timeout)  # fmt: skip


def test_observe_waits_for_its_regions_well_past_the_window_it_observes_in() -> None:
    """Observe awaits a region's read while the snapshot can still be built and stored in its invocation
    (spillway.model.calltime, OBSERVE_ROOM_SECONDS): its Timeout leaves that wait longer than the
    default observe window, so the last observation a run starts (judged by the window) still waits for
    its regions."""
    from spillway.model.calltime import OBSERVE_ROOM_SECONDS, STEP_MARGIN_SECONDS
    from spillway.runtime import RuntimeConfig

    timeout = float(FUNCTIONS["ObserveFunction"]["Timeout"])
    window = float(RuntimeConfig.model_fields["observe_window_seconds"].default)
    assert timeout - STEP_MARGIN_SECONDS - OBSERVE_ROOM_SECONDS - window >= 20


def test_a_give_backs_cordon_is_its_own_longer_than_its_state_can_run() -> None:
    """The planner leaves a node with a give-back's cordon alone for GIVE_BACK_LEASE_MINUTES, then takes
    the cordon for an orphan (restores or drains the node): by then GiveBack or BackOff, retries and all,
    must have ended, or the plan would uncordon a Node the give-back judged idle and is about to
    terminate."""
    from spillway.model.k8s import GIVE_BACK_LEASE_MINUTES

    timeout = float(FUNCTIONS["ScaleFunction"]["Timeout"])
    states = [
        machine_states("gang_launch.asl.json")["GiveBack"],
        machine_states("scale_up.asl.json")["Groups/BackOff"],
    ]
    longest = max(longest_run_seconds(state, timeout) for state in states)
    assert 25 * 60 < longest < GIVE_BACK_LEASE_MINUTES * 60


def test_the_plan_function_may_do_on_the_idempotency_table_what_powertools_calls() -> None:
    """The plan role had SAM's DynamoDBCrudPolicy on the idempotency table: Scan, Query, BatchGetItem,
    BatchWriteItem, DescribeTable and ConditionCheckItem besides, on the table and its indexes. Powertools'
    DynamoDBPersistenceLayer calls get_item, put_item, update_item and delete_item only, and its docs
    list just those four (Powertools for AWS Lambda (Python), Idempotency, "IAM Permissions"). Rule:
    least privilege in IAM, no action no code calls (DESIGN.md; the template's own comments refuse
    DynamoDBCrudPolicy for the other tables for that reason)."""
    assert crud_tables("PlanFunction") == set()
    assert table_actions("PlanFunction")["IdempotencyTable"] == {
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
    }


# --- resource names from the cluster's name --------------------------------------------------------

# What each service takes as the name of a resource the template names after the cluster: (pattern, most
# characters). Lambda CreateFunction FunctionName and PublishLayerVersion LayerName: letters, digits, '-'
# and '_' (64 for a function's name alone); SQS CreateQueue QueueName: the same, 80; SNS CreateTopic
# Name: the same, 256; KMS CreateAlias AliasName: alias/ then letters, digits, '/', '_' and '-', 256;
# CloudWatch PutDashboard DashboardName: letters, digits, '-' and '_', 255; EventBridge PutRule Name:
# letters, digits, '.', '-' and '_', 64; Step Functions CreateStateMachine name: 80, no whitespace,
# brackets, wildcards or the characters " # % \ ^ | ~ ` $ & , ; : /; PutMetricAlarm AlarmName: 255.
NAME_RULES: dict[tuple[str, str], tuple[str, int]] = {
    ("AWS::Serverless::Function", "FunctionName"): (r"[A-Za-z0-9_-]+", 64),
    ("AWS::Serverless::LayerVersion", "LayerName"): (r"[A-Za-z0-9_-]+", 140),
    ("AWS::SQS::Queue", "QueueName"): (r"[A-Za-z0-9_-]+", 80),
    ("AWS::SNS::Topic", "TopicName"): (r"[A-Za-z0-9_-]+", 256),
    ("AWS::KMS::Alias", "AliasName"): (r"alias/[A-Za-z0-9/_-]+", 256),
    ("AWS::CloudWatch::Dashboard", "DashboardName"): (r"[A-Za-z0-9_-]+", 255),
    ("AWS::Events::Rule", "Name"): (r"[.A-Za-z0-9_-]+", 64),
    ("AWS::Serverless::StateMachine", "Name"): (r"[^\s<>{}\[\]?*\"#%\\^|~`$&,;:/]+", 80),
    ("AWS::CloudWatch::Alarm", "AlarmName"): (r".+", 255),
}
PSEUDO = {"AWS::Region": "us-east-1", "AWS::AccountId": "123456789012", "AWS::Partition": "aws"}


def resolved(value: Any, cluster: str) -> Any:
    """A name property as CloudFormation makes it for ``cluster`` (Ref, Fn::Sub, Fn::Join, Fn::Split)."""
    if isinstance(value, str):
        return value
    ((fn, arg),) = value.items()
    if fn == "Ref" and arg in EXPANDED:  # a function's Ref is its name, and a dashboard's
        kind = EXPANDED[arg]["Type"]
        field = "DashboardName" if kind == "AWS::CloudWatch::Dashboard" else "FunctionName"
        return resolved(EXPANDED[arg]["Properties"][field], cluster)
    if fn == "Ref":
        return cluster if arg == "ClusterName" else PSEUDO[arg]
    if fn == "Fn::Split":
        return str(resolved(arg[1], cluster)).split(arg[0])
    if fn == "Fn::Join":
        parts = (
            resolved(arg[1], cluster) if isinstance(arg[1], dict) else [resolved(v, cluster) for v in arg[1]]
        )
        return str(arg[0]).join(parts)
    assert fn == "Fn::Sub", value
    text, names = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])

    def one(match: re.Match[str]) -> str:
        key = match[1]
        return str(resolved(names[key], cluster) if key in names else resolved({"Ref": key}, cluster))

    return re.sub(r"\$\{([^}!]+)\}", one, text)


def cluster_names() -> list[str]:
    """Cluster names the ClusterName parameter takes (a kops cluster's DNS name, with its dots, is not
    one: its ConstraintDescription names the dotless form to take)."""
    parameter = TEMPLATE["Parameters"]["ClusterName"]
    names = ["ml", "k8s.example.com", "k8s-example-com", "a" * 40, "a" + ".b" * 19, "team_a-gpu-prod"]
    taken = [
        n for n in names if re.fullmatch(parameter["AllowedPattern"], n) and len(n) <= parameter["MaxLength"]
    ]
    assert "k8s.example.com" not in taken and "k8s-example-com" in taken
    assert "ClusterName" in parameter["ConstraintDescription"]
    return taken


def test_the_forwarder_stacks_names_hold_for_every_cluster_name_and_region_it_takes() -> None:
    """deploy/spot-forwarder.yaml's rule names were spillway-<cluster>-spot-forward-lifecycle (76
    characters for a 40-character cluster name, EventBridge takes 64) and its role's
    spillway-<cluster>-spot-fwd-<region> (73 in ap-southeast-2, IAM takes 64): such a stack failed. The
    rules now fit, and CloudFormation names the role."""
    forwarder = load_template(ROOT / "deploy" / "spot-forwarder.yaml")
    assert (
        forwarder["Parameters"]["ClusterName"]["AllowedPattern"]
        == TEMPLATE["Parameters"]["ClusterName"]["AllowedPattern"]
    )
    longest = "a" * forwarder["Parameters"]["ClusterName"]["MaxLength"]
    resources = forwarder["Resources"].values()
    names = [
        resolved(r["Properties"]["Name"], longest) for r in resources if r["Type"] == "AWS::Events::Rule"
    ]
    assert len(names) == 4 and all(len(n) <= 64 for n in names), names
    assert all("RoleName" not in r["Properties"] for r in resources if r["Type"] == "AWS::IAM::Role")


def test_eventbridge_may_assume_the_forwarders_role_for_the_stacks_own_rules_only() -> None:
    """Confused deputy (EventBridge User Guide, "Cross-service confused deputy prevention in Amazon
    EventBridge": for an event bus rule's target, aws:SourceArn is the rule's ARN): the forwarder's role
    trusted events.amazonaws.com for any rule of the account (aws:SourceAccount alone), so any rule
    anyone made in the account could name it and put events on the home bus, where the interrupt rules
    drain the node a forged Spot warning names. Its trust now names the ARNs of the four rules that use
    it (built from their names: a GetAtt of the rules, which name the role, would be a cycle), a rule on
    the default bus being arn:...:rule/<name>."""
    forwarder = load_template(ROOT / "deploy" / "spot-forwarder.yaml")
    resources = forwarder["Resources"]
    for cluster in cluster_names():
        users = sorted(
            "arn:{}:events:{}:{}:rule/{}".format(
                PSEUDO["AWS::Partition"], PSEUDO["AWS::Region"], PSEUDO["AWS::AccountId"],
                resolved(r["Properties"]["Name"], cluster),
            )
            for r in resources.values()
            if r["Type"] == "AWS::Events::Rule"
            and any(t.get("RoleArn") == {"Fn::GetAtt": ["ForwardRole", "Arn"]} for t in r["Properties"]["Targets"])
        )  # fmt: skip
        assert len(users) == 4
        # arn:...:rule/<name> is a rule of the default bus; one on another bus is rule/<bus>/<name>
        # (EventBridge User Guide, "Managing access permissions": the rule's ARN)
        assert all(
            "EventBusName" not in r["Properties"]
            for r in resources.values()
            if r["Type"] == "AWS::Events::Rule"
        )
        [trust] = resources["ForwardRole"]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert trust["Principal"] == {"Service": "events.amazonaws.com"}
        condition = trust["Condition"]
        assert condition["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
        assert sorted(resolved(arn, cluster) for arn in condition["ArnEquals"]["aws:SourceArn"]) == users


def test_eventbridge_scheduler_may_assume_the_observe_schedules_role_only_for_the_stacks_schedule_group() -> (
    None
):
    """SAM (samtranslator 1.115, model/eventsources/scheduler.py _construct_execution_role) gives a
    ScheduleV2 event without ``RoleArn`` a role whose trust (IAMRolePolicies.scheduler_assume_role_policy)
    lets scheduler.amazonaws.com assume it with no condition: any schedule, of any account, naming the
    role could invoke observe. The EventBridge Scheduler User Guide ("Confused deputy prevention", "Set
    up the execution role") asks for aws:SourceAccount and aws:SourceArn, and the ARN must be a schedule
    group's, not a schedule's. So the schedule is in a group of the stack's own, and the template gives
    the event its own role: trusted for that group alone, allowed to invoke the observe function alone."""
    [event] = RESOURCES["ObserveFunction"]["Properties"]["Events"].values()
    assert event["Type"] == "ScheduleV2"
    props = event["Properties"]
    assert props["GroupName"] == {"Ref": "ObserveScheduleGroup"}
    assert RESOURCES["ObserveScheduleGroup"]["Type"] == "AWS::Scheduler::ScheduleGroup"
    assert props["RoleArn"] == {"Fn::GetAtt": ["ObserveScheduleRole", "Arn"]}
    role = RESOURCES["ObserveScheduleRole"]["Properties"]
    [trust] = role["AssumeRolePolicyDocument"]["Statement"]
    assert (
        trust["Principal"] == {"Service": "scheduler.amazonaws.com"} and trust["Action"] == "sts:AssumeRole"
    )
    assert trust["Condition"] == {
        "StringEquals": {
            "aws:SourceAccount": {"Ref": "AWS::AccountId"},
            "aws:SourceArn": {"Fn::GetAtt": ["ObserveScheduleGroup", "Arn"]},
        }
    }
    granted = [s for p in role["Policies"] for s in p["PolicyDocument"]["Statement"]]
    assert [(actions(s), s["Resource"]) for s in granted] == [
        ({"lambda:InvokeFunction"}, {"Fn::GetAtt": ["ObserveFunction", "Arn"]})
    ]
    assert not role.get("ManagedPolicyArns")


def test_moving_the_observe_schedule_into_its_group_replaces_it_on_a_stack_update() -> None:
    """SAM names a ScheduleV2 event's schedule after the function and the event (samtranslator,
    model/eventsources/scheduler.py: ``Name = self.Name or self.logical_id``), and stacks made before
    the schedule group have ``ObserveFunctionEvery`` in the ``default`` group. AWS::Scheduler::Schedule's
    resource schema makes ``Name`` its only create-only property: a changed ``GroupName`` alone is an
    update, whose handler looks the schedule up by name in the new group and fails NotFound
    (aws-cdk#34216, cloudformation-coverage-roadmap#1726): the stack update rolls back. A name of its
    own makes the move a replacement, which creates the schedule in the group, then deletes the old one."""
    events = RESOURCES["ObserveFunction"]["Properties"]["Events"]
    [(event, props)] = [(k, v["Properties"]) for k, v in events.items()]
    assert props.get("Name") not in (None, f"ObserveFunction{event}", "ObserveFunctionEvery")
    assert not props.get("OmitName")


def joins(node: Any) -> Iterator[Any]:
    """The arguments of every Fn::Join under ``node``."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "Fn::Join":
                yield value
            yield from joins(value)
    elif isinstance(node, list):
        for value in node:
            yield from joins(value)


def test_every_fn_join_joins_what_sam_cli_and_the_language_extensions_transform_take() -> None:
    """With AWS::LanguageExtensions, SAM CLI (sam build, 1.170) resolves Fn::Join at template time and
    takes as its list only a list or a Ref to a parameter, which it keeps for CloudFormation; any other
    intrinsic there (Fn::Split of the cluster's name, to make its dots '_') fails the build: "Fn::Join
    layout is incorrect" (samcli/lib/cfn_language_extensions/resolvers/fn_join.py, modelled on the
    transform's own resolver)."""
    parameters = set(TEMPLATE["Parameters"])
    refused = [
        args
        for args in joins(TEMPLATE)
        if not isinstance(args[1], list)
        and not (isinstance(args[1], dict) and args[1].get("Ref") in parameters)
    ]
    assert refused == []


def named_resources() -> Iterator[tuple[str, str, str, Any]]:
    for logical, resource in EXPANDED.items():
        for (kind, field), _ in NAME_RULES.items():
            if resource.get("Type") == kind and field in (resource.get("Properties") or {}):
                yield logical, kind, field, resource["Properties"][field]


@pytest.mark.parametrize("cluster", cluster_names())
def test_every_resource_named_after_the_cluster_gets_a_name_its_service_takes(cluster: str) -> None:
    """Every name CloudFormation makes from a cluster name the parameter takes is one its service takes:
    Lambda, SQS, SNS, KMS aliases and dashboards refuse a dot in a name (so the parameter refuses it),
    and EventBridge rule names are at most 64 characters."""
    problems = []
    for logical, kind, field, value in named_resources():
        pattern, longest = NAME_RULES[(kind, field)]
        name = resolved(value, cluster)
        if not re.fullmatch(pattern, name) or len(name) > longest:
            problems.append(f"{logical}.{field} = {name!r}")
    assert problems == []


# Resources whose names are the account's, not the region's: "All dashboards in your account are global,
# not region-specific" (CloudWatch PutDashboard; AWS::CloudWatch::Dashboard), and IAM names are global.
ACCOUNT_WIDE = {"AWS::CloudWatch::Dashboard", "AWS::IAM::Role", "AWS::IAM::ManagedPolicy"}


def test_two_regions_stacks_of_one_cluster_name_name_no_account_wide_resource_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """EKS cluster names are per region, so a 'prod' cluster in us-east-1 and one in eu-west-1 each get a
    stack named after 'prod'. The dashboard was spillway-prod in both: dashboards are one namespace per
    account, so the second stack failed to create it (or, updated, took the first one's over)."""
    account_wide = [(logical, value) for logical, kind, _, value in named_resources() if kind in ACCOUNT_WIDE]
    assert account_wide, "the template names no dashboard"
    names = {}
    for region in ("us-east-1", "eu-west-1"):
        monkeypatch.setitem(PSEUDO, "AWS::Region", region)
        names[region] = {logical: resolved(value, "prod") for logical, value in account_wide}
    clashes = [k for k, v in names["us-east-1"].items() if names["eu-west-1"][k] == v]
    assert clashes == []


def test_the_dashboard_url_output_opens_the_dashboard_the_stack_creates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The DashboardUrl output names the dashboard as the template names it. The dashboard was renamed
    spillway-<cluster>-<region> (two regions' clusters of one name), but the output still opened
    #dashboards:name=spillway-<cluster>, which no stack creates any more: the console said it does not
    exist."""
    dashboard = resolved(EXPANDED["Dashboard"]["Properties"]["DashboardName"], "prod")
    url = resolved(TEMPLATE["Outputs"]["DashboardUrl"]["Value"], "prod")
    assert dashboard == "spillway-prod-us-east-1"
    assert url.endswith(f"?region=us-east-1#dashboards:name={dashboard}")
    monkeypatch.setitem(PSEUDO, "AWS::Region", "eu-west-1")
    assert resolved(TEMPLATE["Outputs"]["DashboardUrl"]["Value"], "prod").endswith(
        "#dashboards:name=spillway-prod-eu-west-1"
    )


@pytest.mark.parametrize("cluster", cluster_names())
def test_the_function_alarms_watch_the_functions_the_template_names(cluster: str) -> None:
    functions = {
        resolved(v, cluster) for _, kind, _, v in named_resources() if kind == "AWS::Serverless::Function"
    }
    watched = set()
    for resource in EXPANDED.values():
        props = resource.get("Properties") or {}
        metrics = [props, *(q.get("MetricStat", {}).get("Metric", {}) for q in props.get("Metrics") or [])]
        for metric in metrics if resource.get("Type") == "AWS::CloudWatch::Alarm" else []:
            for dimension in metric.get("Dimensions") or []:
                if dimension["Name"] == "FunctionName":
                    watched.add(resolved(dimension["Value"], cluster))
    assert watched and watched <= functions


@pytest.mark.parametrize("function", sorted(ENTRIES))
def test_a_function_that_reads_a_plan_record_may_get_it_from_the_plans_table(function: str) -> None:
    """StateStore.load_plan is PlanStore.get, a GetItem on the plans table: the scale function's
    overflow re-plan calls it on every round to find the record a retried commit landed
    (ScaleSteps._landed_replan). Without the grant AWS refuses it (AccessDeniedException) and every
    re-plan step fails; moto does not enforce IAM, so only this check sees it."""
    reached = {a.attr for a in attributes(reachable(*ENTRIES[function]))}
    if "load_plan" not in reached:
        assert function != "ScaleFunction", "the derivation no longer finds the re-plan's read"
        return
    assert "dynamodb:GetItem" in table_actions(function).get("PlansTable", set())


# What each StateStore (Ledger) method asks DynamoDB, and the partition it asks it in is its first argument:
# the cluster's own (``cluster``), or one of the partitions beside it, a ``*_PARTITION`` template formatted
# with the cluster (``STARTED_PARTITION.format(cluster=...)``), unless the method names its partition
# itself from the cluster (put_backoff: BACKOFFS_PARTITION; :func:`store_callers_partition`). A claim that
# finds its item reads it back.
LEDGER_ACTIONS = {
    "claim": {"dynamodb:PutItem", "dynamodb:GetItem"},
    "claim_unless": {"dynamodb:PutItem", "dynamodb:ConditionCheckItem", "dynamodb:GetItem"},
    "release": {"dynamodb:DeleteItem"},
    "claims": {"dynamodb:Query"},
    "load": {"dynamodb:Query"},
    "backoffs": {"dynamodb:Query"},
    "put_backoff": {"dynamodb:PutItem"},
    "commit": {"dynamodb:PutItem"},
}
OWN_PARTITION = "{cluster}"
# The StateStore methods that ask the plans table alone (PlanStore's GetItem, PutItem), not the state table
PLANS_TABLE_ONLY = frozenset({"load_plan", "save_plan"})
# The request items of a TransactWriteItems, each authorised as the action it names (DynamoDB Developer
# Guide, "Using IAM with DynamoDB transactions": Put as PutItem, ..., ConditionCheck as ConditionCheckItem)
TRANSACTION_ITEMS = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}
# Receivers of a method named as a StateStore's that are no ledger (json.load, yaml.load)
NOT_A_LEDGER = frozenset({"json", "yaml"})


def _store_calls(node: Any) -> tuple[set[str], set[str], set[str]]:
    """The IAM actions of the DynamoDB client calls a StateStore method makes itself (self.client.x), the
    StateStore methods it calls (self.x), and the partitions beside the caller's it names itself (a
    ``*_PARTITION`` template it formats: ``load`` reads the drains' records in theirs)."""
    asked: set[str] = set()
    called: set[str] = set()
    named: set[str] = set()
    for call in ast.walk(node):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
            continue
        receiver = call.func.value
        if (
            call.func.attr == "format"
            and isinstance(receiver, ast.Name)
            and receiver.id.endswith("_PARTITION")
        ):
            named.add(receiver.id)
        if isinstance(receiver, ast.Attribute) and receiver.attr == "client":
            operation = "".join(word.title() for word in call.func.attr.split("_"))
            if operation == "TransactWriteItems":
                keys = {k.value for d in ast.walk(node) if isinstance(d, ast.Dict) for k in d.keys if k}
                asked |= {TRANSACTION_ITEMS[k] for k in keys if k in TRANSACTION_ITEMS}
            else:
                asked.add(f"dynamodb:{operation}")
        elif isinstance(receiver, ast.Name) and receiver.id == "self":
            called.add(call.func.attr)
    return asked, called, named


def _store_derived(which: int) -> dict[str, set[str]]:
    """For each public StateStore method, part ``which`` of :func:`_store_calls` (0: the actions, 2: the
    partitions it names), its own and that of the StateStore methods it calls (self._items)."""
    module = source("spillway.adapters.state_store")
    calls = {m: _store_calls(module.defs[f"StateStore.{m}"]) for m in module.methods["StateStore"]}

    def of(method: str, seen: frozenset[str] = frozenset()) -> set[str]:
        own, called = calls[method][which], calls[method][1]
        inner = called & set(calls) - seen - {method}
        return own.union(*(of(m, seen | {method}) for m in inner))

    return {m: of(m) for m in calls if not m.startswith("_")}


def store_actions() -> dict[str, set[str]]:
    """What each public StateStore method asks DynamoDB, derived from its code."""
    return _store_derived(0)


def store_partitions() -> dict[str, set[str]]:
    """The ``*_PARTITION`` templates each public StateStore method asks in besides its caller's."""
    return _store_derived(2)


def _keys_on(node: Any, param: str) -> tuple[bool, set[str]]:
    """Whether a StateStore method's code puts ``param`` (its first parameter) in a request itself, as an
    attribute's value (``{"S": cluster}``: an item's or a key's partition), and the methods it hands it
    on to as their first argument (``self._items(cluster)``)."""
    keyed, handed = False, set()
    for inner in ast.walk(node):
        if isinstance(inner, ast.Dict):
            keyed |= any(
                isinstance(k, ast.Constant) and k.value == "S" and isinstance(v, ast.Name) and v.id == param
                for k, v in zip(inner.keys, inner.values, strict=True)
            )
        elif (
            isinstance(inner, ast.Call)
            and isinstance(inner.func, ast.Attribute)
            and ast.unparse(inner.func.value) == "self"
            and inner.args
            and isinstance(inner.args[0], ast.Name)
            and inner.args[0].id == param
        ):
            handed.add(inner.func.attr)
    return keyed, handed


def store_callers_partition() -> dict[str, bool]:
    """For each public StateStore method, whether it asks in the partition its caller hands it (its first
    argument put in a request as it is, by the method or one it hands it on to), derived from its code.
    One that does not asks only in the partitions it names itself (:func:`store_partitions`): given the
    cluster, put_backoff writes in BACKOFFS_PARTITION and nowhere else."""
    module = source("spillway.adapters.state_store")
    defs = {m: module.defs[f"StateStore.{m}"] for m in module.methods["StateStore"]}
    calls = {m: _keys_on(node, node.args.args[1].arg) for m, node in defs.items() if len(node.args.args) > 1}

    def asks(method: str, seen: frozenset[str] = frozenset()) -> bool:
        keyed, handed = calls.get(method, (False, set()))
        return keyed or any(asks(m, seen | {method}) for m in handed & set(calls) - seen - {method})

    return {m: asks(m) for m in defs if not m.startswith("_")}


def test_the_ledger_actions_are_what_the_store_asks_dynamodb() -> None:
    """LEDGER_ACTIONS, which the partitions' derivation below reads, is StateStore's code: a method that
    starts asking DynamoDB another action (an UpdateItem, a BatchWriteItem), or a new method (which could
    write in a partition of its own), fails here until it is named, so it cannot slip past the roles'
    check."""
    derived = store_actions()
    assert set(derived) == set(LEDGER_ACTIONS) | PLANS_TABLE_ONLY
    assert {m: derived[m] for m in LEDGER_ACTIONS} == LEDGER_ACTIONS
    assert all(derived[m] == set() for m in PLANS_TABLE_ONLY)


def partition_templates() -> dict[str, str]:
    """Every ``*_PARTITION`` constant of the act, adapter and model modules: name -> template."""
    import pkgutil

    import spillway.act
    import spillway.adapters
    import spillway.model

    found: dict[str, str] = {}
    for package in (spillway.act, spillway.adapters, spillway.model):
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            found.update(
                {k: v for k, v in vars(module).items() if k.endswith("_PARTITION") and isinstance(v, str)}
            )
    assert "STARTED_PARTITION" in found
    return found


def _ledger_receiver(node: ast.expr) -> bool:
    """``ledger.x``, ``store.x``, ``self.ledger.x``, ``owner.ledger.x``."""
    if isinstance(node, ast.Name):
        return node.id in ("ledger", "store")
    return isinstance(node, ast.Attribute) and node.attr == "ledger"


def wired_start_mark() -> tuple[str, str]:
    """What the Workflows port's ``start`` calls on the state table: the ``first`` that clients.py builds
    its Executions with (``first_start``, the start's mark in STARTED_PARTITION)."""
    clients = source("spillway.clients")
    [call] = [
        c
        for c in ast.walk(clients.defs["build_clients"])
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == "Executions"
    ]
    [first] = [k.value for k in call.keywords if k.arg == "first"]
    assert isinstance(first, ast.Call) and isinstance(first.func, ast.Name), ast.unparse(first)
    return clients.imports[first.func.id]


def _starts_executions(nodes: list[Any]) -> bool:
    """Whether the code calls the Workflows port's ``start`` (``executions.start``, ``self.workflows.start``)."""
    return any(
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "start"
        and ast.unparse(call.func.value).split(".")[-1] in ("executions", "workflows")
        for node in nodes
        for call in ast.walk(node)
    )


def state_partitions(function: str, only: frozenset[str] | None = None) -> dict[str, set[str]]:
    """The state table's partitions a function's code may ask each DynamoDB action in, derived from its
    ledger calls (their first argument, and any partition the store method names itself) reachable
    from its entries, and from the start's mark when it starts executions (:func:`wired_start_mark`);
    with ``only``, from the calls of those ledger methods alone."""
    templates = partition_templates()
    named = store_partitions()
    callers = store_callers_partition()
    out: dict[str, set[str]] = {}
    nodes = reachable(*ENTRIES[function], imported=True)
    if _starts_executions(nodes):
        nodes += reachable(wired_start_mark(), imported=True)
    for node in nodes:
        for call in ast.walk(node):
            if not (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr in LEDGER_ACTIONS
                and (only is None or call.func.attr in only)
            ):
                continue
            receiver = call.func.value
            if isinstance(receiver, ast.Name) and receiver.id in NOT_A_LEDGER:
                continue
            # a ledger under another name would go unseen: name it in _ledger_receiver (or NOT_A_LEDGER)
            assert _ledger_receiver(receiver), (function, ast.unparse(call))
            first = call.args[0]
            if (
                isinstance(first, ast.Call)
                and isinstance(first.func, ast.Attribute)
                and first.func.attr == "format"
            ):
                assert isinstance(first.func.value, ast.Name), ast.unparse(first)
                partition = templates[first.func.value.id]
            else:  # the cluster itself; a partition handed on in a variable the walk could not tell
                assert ast.unparse(first).split(".")[-1] == "cluster", ast.unparse(call)
                partition = OWN_PARTITION
            # a method that names its partition from the cluster is handed the cluster, nothing else
            assert callers[call.func.attr] or partition == OWN_PARTITION, (function, ast.unparse(call))
            asked = {partition} if callers[call.func.attr] else set()
            beside = {templates[name] for name in named[call.func.attr]}
            for action in LEDGER_ACTIONS[call.func.attr]:
                out.setdefault(action, set()).update({*asked, *beside})
    return out


def granted_state_partitions(function: str) -> dict[str, set[str]]:
    """The partitions a function's role lets each action touch on the state table (dynamodb:LeadingKeys,
    which must be there: a statement without it grants every item). The streams' reads, Lambda's
    poller's, touch no item (ListStreams takes no resource: "*")."""
    out: dict[str, set[str]] = {}
    stream = POLLER_ACTIONS["AWS::DynamoDB::Table"]
    for statement in role_statements(function):
        granted = {a for a in actions(statement) if a.startswith("dynamodb:")} - stream
        resource = statement.get("Resource")
        wildcard = any(isinstance(r, str) and "*" in r for r in as_list(resource))
        if not granted or not (wildcard or "StateTable" in references(resource)):
            continue
        condition = statement.get("Condition", {}).get("ForAllValues:StringEquals", {})
        assert "dynamodb:LeadingKeys" in condition, (function, statement.get("Sid"), sorted(granted))
        keys = {sub_text(k).replace("${ClusterName}", "{cluster}") for k in condition["dynamodb:LeadingKeys"]}
        for action in granted:
            out.setdefault(action, set()).update(keys)
    return out


def test_the_derivation_finds_the_partitions_the_code_plainly_uses() -> None:
    """Not a tautology: the drain's DrainOutcome marks (DRAIN_COUNTED_PARTITION), gang sweep leases
    (SWEEP_PARTITION) and drains' records (DRAINS_PARTITION), the scale steps' claims in the cluster's
    own partition, the back-offs in theirs (BACKOFFS_PARTITION); the plan's load reads the drains'
    records and the back-offs (partitions StateStore.load names itself), and the plan and interrupt functions mark the executions they start (first_start, the
    ``first`` clients.py gives Executions)."""
    drain = state_partitions("DrainFunction")
    assert drain["dynamodb:DeleteItem"] == {"{cluster}#gangsweep"}
    assert drain["dynamodb:PutItem"] == {"{cluster}#drains", "{cluster}#gangsweep", "{cluster}#drain-counted"}
    assert state_partitions("ScaleFunction")["dynamodb:DeleteItem"] == {OWN_PARTITION}
    assert store_partitions()["load"] == {"DRAINS_PARTITION", "BACKOFFS_PARTITION"}
    # the store names the back-offs' partition from the cluster its callers give it, and asks in no other
    assert store_partitions()["put_backoff"] == {"BACKOFFS_PARTITION"}
    callers = store_callers_partition()
    assert not callers["put_backoff"]
    assert all(callers[m] for m in ("load", "backoffs", "claim", "release", "claims", "commit"))
    for function in ("ScaleFunction", "InterruptFunction"):  # a scale-up's, a gang's; a Spot notice's
        put = state_partitions(function, only=frozenset({"put_backoff"}))
        assert put == {"dynamodb:PutItem": {"{cluster}#backoffs"}}, (function, put)
    plan = state_partitions("PlanFunction")
    assert plan["dynamodb:Query"] == {OWN_PARTITION, "{cluster}#drains", "{cluster}#backoffs"}
    # back-offs (back_off, which every writer calls) in their partition, not the state's
    assert state_partitions("InterruptFunction")["dynamodb:PutItem"] == {
        "{cluster}#backoffs",
        "{cluster}#started",
    }
    assert wired_start_mark() == ("spillway.adapters.state_store", "first_start")
    assert state_partitions("InterruptFunction")["dynamodb:GetItem"] == {"{cluster}#started"}
    # the plan's settling of raise markers left bare (act.claims.settle_abandoned) reads a claim back
    assert state_partitions("PlanFunction")["dynamodb:GetItem"] == {OWN_PARTITION, "{cluster}#started"}
    # claims.py's Owner.raised (a Query), which scale.py reaches only as owner.raised() on its instance
    raised = source("spillway.act.claims").defs["Owner.raised"]
    assert any(node is raised for node in reachable(*ENTRIES["ScaleFunction"], imported=True))
    assert not any(node is raised for node in reachable(*ENTRIES["ScaleFunction"]))


STATE_TABLE_USERS = ["DrainFunction", "ScaleFunction", "PlanFunction", "InterruptFunction"]


def test_the_functions_whose_roles_touch_the_state_table_are_those_checked_below() -> None:
    assert sorted(f for f in FUNCTIONS if "StateTable" in table_actions(f)) == sorted(STATE_TABLE_USERS)
    assert all(state_partitions(f) for f in STATE_TABLE_USERS)


@pytest.mark.parametrize("function", STATE_TABLE_USERS)
def test_each_role_touches_only_the_state_partitions_its_code_asks_in(function: str) -> None:
    """dynamodb:LeadingKeys, the partition key of every item a request names (DynamoDB Developer Guide,
    "Using IAM policy conditions for fine-grained access control": the partition key only, with
    ForAllValues; GetItem, PutItem, DeleteItem and Query take it, Service Authorization Reference). The
    drain and scale roles could delete any item of the state table: the drain function the planner's
    state (a plan then starts over from an empty one), the scale function the drains' marks; the plan
    and interrupt roles could write any partition (the sweep leases, the drains' records). Each now
    touches, per action, exactly the partitions its code asks it in: the drain deletes gang sweep
    leases alone, which have a partition of their own. A partition the code starts writing in fails
    here until the role may, and a grant the code no longer needs fails too."""
    assert granted_state_partitions(function) == state_partitions(function)


def test_the_drain_function_writes_nothing_in_the_clusters_own_partition() -> None:
    """The planner's state item is in the cluster's own partition, and IAM cannot limit a sort key: a
    put there, even of a claim's attributes only, could replace it (a plan then starts from an empty
    state). The drains' records have a partition of their own (DRAINS_PARTITION), which plans load."""
    granted = granted_state_partitions("DrainFunction")
    assert OWN_PARTITION not in granted["dynamodb:PutItem"] | granted.get("dynamodb:DeleteItem", set())
    assert "dynamodb:UpdateItem" not in granted


# The functions that commit the planner's state (a plan; the scale-up's re-plan), whose item is in the
# cluster's own partition: the only ones that may write there at all
STATE_WRITERS = frozenset({"PlanFunction", "ScaleFunction"})
WRITES = frozenset({"dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:UpdateItem"})


@pytest.mark.parametrize("function", STATE_TABLE_USERS)
def test_only_the_functions_that_commit_the_state_write_in_the_clusters_own_partition(function: str) -> None:
    """The planner's state item is in the cluster's own partition, and IAM cannot limit a sort key: a
    role that may put there, even of a back-off's or a claim's attributes only (dynamodb:Attributes),
    may replace the state item (a plan then finds it corrupt, or starts over from an empty state). So a
    function that does not commit the state writes nothing there, neither in its code nor in its role:
    the drain's records and the back-offs (the interrupt function's, after a Spot notice) have
    partitions of their own."""
    derived = {a for a, partitions in state_partitions(function).items() if OWN_PARTITION in partitions}
    granted = {
        a for a, partitions in granted_state_partitions(function).items() if OWN_PARTITION in partitions
    }
    writes = (derived | granted) & WRITES
    assert bool(writes) == (function in STATE_WRITERS), (function, sorted(writes))


def test_drain_nodes_role_may_put_only_its_counted_marks() -> None:
    """DrainNode marks an execution counted before its own DrainOutcome count (when the record step
    failed for good), with a conditional PutItem on the state table: its role may put items of the
    partition ``<cluster>#drain-counted`` only (dynamodb:LeadingKeys) and of a mark's attributes only
    (dynamodb:Attributes), and may not read, update or delete any (DynamoDB Developer Guide, "Using IAM
    policy conditions for fine-grained access control")."""
    puts = [
        s
        for policy in EXPANDED["DrainNodeStateMachine"]["Properties"]["Policies"]
        if isinstance(policy, dict) and "Statement" in policy
        for s in policy["Statement"]
        if any(a.startswith("dynamodb:") for a in actions(s))
    ]
    assert puts == [
        {
            "Effect": "Allow",
            "Action": "dynamodb:PutItem",
            "Resource": {"Fn::GetAtt": ["StateTable", "Arn"]},
            "Condition": {
                "ForAllValues:StringEquals": {
                    "dynamodb:LeadingKeys": [{"Fn::Sub": "${ClusterName}#drain-counted"}],
                    "dynamodb:Attributes": ["cluster", "expires_at", "item", "value"],
                }
            },
        }
    ]


# --- what SAM grants on its own, and who may feed the interrupt queue -------------------------------
#
# SAM attaches to the role it makes for a function one AWS managed policy per pull event source of the
# function's Events (samtranslator/model/eventsources/pull.py, get_policy_arn), none of which the
# Policies above show. Each grants its actions on every resource of the account: AWSLambdaSQSQueueExecution
# Role sqs:ReceiveMessage, sqs:DeleteMessage and sqs:GetQueueAttributes on "*" (every queue: read and
# delete any other application's messages), AWSLambdaDynamoDBExecutionRole dynamodb:GetRecords and the
# other stream reads on "*" (every change to every table with a stream in the account), as the AWS
# Managed Policy Reference prints them. Both actions take a resource: the queue's ARN, the table's
# stream (DynamoDB Developer Guide, "IAM policy to allow an AWS Lambda function to access DynamoDB stream
# records": the four stream actions on arn:...:table/<table>/stream/*).
SAM_PULL_EVENT_POLICIES = {
    "SQS": "AWSLambdaSQSQueueExecutionRole",
    "DynamoDB": "AWSLambdaDynamoDBExecutionRole",
    "Kinesis": "AWSLambdaKinesisExecutionRole",
    "MSK": "AWSLambdaMSKExecutionRole",
}
# What Lambda's poller calls with the function's role, per kind of source (Lambda Developer Guide,
# "Execution role permissions" of its SQS and DynamoDB event sources).
POLLER_ACTIONS = {
    "AWS::SQS::Queue": {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"},
    "AWS::DynamoDB::Table": {
        "dynamodb:DescribeStream",
        "dynamodb:GetRecords",
        "dynamodb:GetShardIterator",
        "dynamodb:ListStreams",
    },
}
# Actions the Service Authorization Reference lists with no resource type: a statement may grant them on
# "*" only, and one that names an ARN grants nothing for them ("If there is no value for this column, you
# must specify all resources"). dynamodb:ListStreams is one (aws-cdk#9511, #10631 moved its grant to "*"),
# though the DynamoDB Developer Guide's stream policy example lists it on table/<table>/stream/*.
UNSCOPED_ACTIONS = frozenset({"dynamodb:ListStreams"})


def test_no_statement_grants_an_action_that_takes_no_resource_on_an_arn() -> None:
    """A grant of such an action on an ARN is a grant of nothing: the plan role's dynamodb:ListStreams,
    on the snapshots table's stream/*, left Lambda's poller without an action the Lambda Developer Guide
    lists among those its DynamoDB event source needs (AWSLambdaDynamoDBExecutionRole grants it on "*")."""
    scoped = [
        (statement.get("Sid"), sorted(actions(statement) & UNSCOPED_ACTIONS))
        for statement in all_statements()
        if statement.get("Effect") == "Allow"
        and actions(statement) & UNSCOPED_ACTIONS
        and statement.get("Resource") != "*"
    ]
    assert scoped == []
    plan = {a for s in role_statements("PlanFunction") if s.get("Resource") == "*" for a in actions(s)}
    assert "dynamodb:ListStreams" in plan


def test_no_function_event_makes_sam_grant_a_managed_policy_on_every_resource() -> None:
    """The plan function's stream event and the interrupt function's queue event made SAM attach
    AWSLambdaDynamoDBExecutionRole and AWSLambdaSQSQueueExecutionRole: the plan role could read every
    stream of the account, the interrupt role receive and delete any queue's messages."""
    attached = {
        f"{function}.{name}": SAM_PULL_EVENT_POLICIES[event["Type"]]
        for function, props in FUNCTIONS.items()
        for name, event in (props.get("Events") or {}).items()
        if event.get("Type") in SAM_PULL_EVENT_POLICIES
    }
    assert attached == {}


def event_source_mappings() -> dict[str, dict[str, Any]]:
    return {
        k: v["Properties"] for k, v in EXPANDED.items() if v.get("Type") == "AWS::Lambda::EventSourceMapping"
    }


def poller_grants(function: str) -> list[dict[str, Any]]:
    """The statements of a function's role that grant any action Lambda's poller calls."""
    every = set().union(*POLLER_ACTIONS.values())
    return [s for s in role_statements(function) if actions(s) & every]


def test_each_function_fed_by_a_mapping_may_read_its_own_source_and_nothing_else() -> None:
    """The stream of snapshots feeds the plan function, the interrupt queue the interrupt function,
    each through an event source mapping of the template's own (named as SAM named the one it made, so
    that CloudFormation keeps it: a new stream mapping would start at LATEST again). Each role may do
    what Lambda's poller does, on that one source (an action that takes no resource on "*"); no other role
    may do any of it."""
    mappings = event_source_mappings()
    fed = {}
    for logical, props in mappings.items():
        [function] = references(props["FunctionName"])
        [source] = references(props["EventSourceArn"])
        fed[function] = (logical, source, props["EventSourceArn"])
    assert {f: (m, s) for f, (m, s, _) in fed.items()} == {
        "PlanFunction": ("PlanFunctionSnapshots", "SnapshotsTable"),
        "InterruptFunction": ("InterruptFunctionNotices", "InterruptQueue"),
    }
    for function, (_, source, arn) in fed.items():
        kind = EXPANDED[source]["Type"]
        if kind == "AWS::DynamoDB::Table":
            assert arn == {"Fn::GetAtt": [source, "StreamArn"]}
            where = {"Fn::Sub": "${" + source + ".Arn}/stream/*"}
        else:
            assert arn == {"Fn::GetAtt": [source, "Arn"]}
            where = arn
        grants = poller_grants(function)
        unscoped = POLLER_ACTIONS[kind] & UNSCOPED_ACTIONS
        expected = [(POLLER_ACTIONS[kind] - unscoped, where, "Allow")] + [(unscoped, "*", "Allow")] * bool(
            unscoped
        )
        assert [(actions(s), s["Resource"], s["Effect"]) for s in grants] == expected, function
    others = {f: poller_grants(f) for f in FUNCTIONS if f not in fed}
    assert others == {f: [] for f in others}


def test_the_mappings_keep_what_the_functions_were_fed() -> None:
    """The settings the functions' events had: the plan takes complete snapshots only (chunks never
    reach it), ten records a batch, and reports failed records; the interrupt function ten messages a
    batch, at once, reporting failed ones."""
    mappings = event_source_mappings()
    plan = mappings["PlanFunctionSnapshots"]
    assert plan["StartingPosition"] == "LATEST"
    retries = (plan["MaximumRetryAttempts"], plan["MaximumRecordAgeInSeconds"])
    assert (plan["BatchSize"], retries) == (10, (3, 300))
    assert plan["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    [pattern] = plan["FilterCriteria"]["Filters"]
    assert json.loads(pattern["Pattern"]) == {
        "eventName": ["INSERT"],
        "dynamodb": {"NewImage": {"kind": {"S": ["snapshot"]}}},
    }
    notices = mappings["InterruptFunctionNotices"]
    assert (notices["BatchSize"], notices["MaximumBatchingWindowInSeconds"]) == (10, 0)
    assert notices["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def _queue_policy_allows(
    statements: list[dict[str, Any]], *, principal: dict[str, str] | str, source: str | None, identity: bool
) -> bool:
    """IAM's answer to a SendMessage on the queue within its account: an explicit Deny of the queue
    policy refuses it; else the identity's own policy (``identity``) or the queue policy allowing it
    lets it through (IAM User Guide, "Policy evaluation for requests within a single account"). A
    condition key the request lacks fails ArnEquals and passes ArnNotEquals (same guide, "Condition
    operators")."""

    def applies(statement: dict[str, Any]) -> bool:
        if statement["Principal"] != "*" and statement["Principal"] != principal:
            return False
        for operator, keys in (statement.get("Condition") or {}).items():
            [(key, wanted)] = keys.items()
            assert key == "aws:SourceArn", key
            present = source is not None and source in [sub_text(w) for w in as_list(wanted)]
            if (operator == "ArnEquals") != present:
                return False
        return "sqs:SendMessage" in as_list(statement["Action"])

    if any(s["Effect"] == "Deny" and applies(s) for s in statements):
        return False
    return identity or any(s["Effect"] == "Allow" and applies(s) for s in statements)


def test_only_spillways_rules_can_put_a_notice_in_the_interrupt_queue() -> None:
    """The interrupt function force-drains and terminates the node a Spot warning names. The queue
    policy only allowed the four rules, and within one account an identity policy's Allow is enough
    without the resource's: any role granted sqs:SendMessage on "*" (a CI or admin role) could post a
    forged warning and have Spillway evict and terminate a node it may not touch itself. An explicit
    Deny refuses every SendMessage that none of the rules sends."""
    statements = EXPANDED["InterruptQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    rules = sorted(
        k
        for k, v in EXPANDED.items()
        if v.get("Type") == "AWS::Events::Rule"
        and {"Fn::GetAtt": ["InterruptQueue", "Arn"]} in [t["Arn"] for t in v["Properties"]["Targets"]]
    )
    assert len(rules) == 4
    events = {"Service": "events.amazonaws.com"}
    for rule in rules:
        rule_arn = "${" + rule + ".Arn}"
        assert _queue_policy_allows(statements, principal=events, source=rule_arn, identity=False), rule
    role = {"AWS": "arn:aws:iam::123456789012:role/ci"}
    assert not _queue_policy_allows(statements, principal=role, source=None, identity=True)
    other_rule = "arn:aws:events:us-east-1:123456789012:rule/someone-elses"
    assert not _queue_policy_allows(statements, principal=events, source=other_rule, identity=False)
    assert not _queue_policy_allows(statements, principal=events, source=other_rule, identity=True)


# --- the AWS managed policies SAM attaches to the roles it makes ------------------------------------
#
# samtranslator (1.115, model/sam_resources.py SamFunction._construct_role) gives the role it makes for a
# function, besides the Policies: AWSLambdaBasicExecutionRole always, AWSXrayWriteOnlyAccess when Tracing
# is set and not Disabled, and AWSLambdaVPCAccessExecutionRole whenever VpcConfig is set at all: the
# Globals' `!If [InVpc, ..., !Ref AWS::NoValue]` is set even when it comes to no value (SAM tests the
# property as written, not what CloudFormation resolves). For a state machine
# (model/stepfunctions/generators.py) only AWSXrayWriteOnlyAccess, when Tracing is Enabled. It makes no
# role, and attaches nothing, for a resource that names its own Role. As the AWS Managed Policy
# Reference prints them, AWSLambdaBasicExecutionRole grants logs:CreateLogGroup, logs:CreateLogStream and
# logs:PutLogEvents on "*" (every log group of the account), AWSLambdaVPCAccessExecutionRole the same
# and ec2:CreateNetworkInterface, DeleteNetworkInterface, DescribeNetworkInterfaces, DescribeSubnets,
# AssignPrivateIpAddresses and UnassignPrivateIpAddresses on "*".
SAM_FUNCTION_GLOBALS: dict[str, Any] = (TEMPLATE.get("Globals") or {}).get("Function") or {}
# The AWS managed policies a role may hold, and why: X-Ray's write actions (PutTraceSegments,
# PutTelemetryRecords, GetSampling*) take no resource type (Service Authorization Reference, AWS X-Ray),
# so "*" grants no more than they are; the functions and state machines trace (Tracing). One of X-Ray's
# two names of that policy: the functions' roles name the one of every partition (below), SAM the other
# for the state machines' in the aws partition.
ALLOWED_AWS_MANAGED = ({"AWSXRayDaemonWriteAccess"}, {"AWSXrayWriteOnlyAccess"})
AWS_MANAGED = re.compile(r"^arn:(?:aws|\$\{AWS::Partition\}):iam::aws:policy/(?:service-role/)?(.+)$")


def sam_attached(logical: str) -> set[str]:
    """The AWS managed policies SAM attaches to the role it makes for a function or state machine."""
    resource = EXPANDED[logical]
    if resource["Type"] == "AWS::Serverless::StateMachine":
        props = resource["Properties"]
        traced = (props.get("Tracing") or {}).get("Enabled") is True
        return {"AWSXrayWriteOnlyAccess"} if traced and "Role" not in props else set()
    props = {**SAM_FUNCTION_GLOBALS, **resource["Properties"]}
    if "Role" in props:
        return set()
    attached = {"AWSLambdaBasicExecutionRole"}
    if props.get("Tracing") and props["Tracing"] != "Disabled":
        attached.add("AWSXrayWriteOnlyAccess")
    if props.get("VpcConfig"):
        attached.add("AWSLambdaVPCAccessExecutionRole")
    events = (props.get("Events") or {}).values()
    return attached | {
        SAM_PULL_EVENT_POLICIES[e["Type"]] for e in events if e["Type"] in SAM_PULL_EVENT_POLICIES
    }


def aws_managed_named(logical: str) -> set[str]:
    """The AWS managed policies the template's own role for a function or state machine names."""
    role = EXPANDED.get(f"{logical}Role") or {}
    named = set()
    for arn in (role.get("Properties") or {}).get("ManagedPolicyArns") or []:
        match = AWS_MANAGED.match(sub_text(arn)) if isinstance(arn, str) or "Fn::Sub" in arn else None
        named |= {match.group(1)} if match else set()
    return named


def aws_managed_held(logical: str) -> set[str]:
    """What a role holds of AWS's managed policies: SAM's, and those the template's own role names."""
    return sam_attached(logical) | aws_managed_named(logical)


@pytest.mark.parametrize("logical", sorted({*FUNCTIONS, *STATE_MACHINES}))
def test_no_role_holds_an_aws_managed_policy_granting_on_every_resource_what_takes_a_resource(
    logical: str,
) -> None:
    """SAM gave each function's role AWSLambdaBasicExecutionRole, logs on every log group of the
    account, though each function logs to its own group only; and AWSLambdaVPCAccessExecutionRole,
    ENI actions on "*", even with no SubnetIds, the functions out of any VPC."""
    assert aws_managed_held(logical) in ALLOWED_AWS_MANAGED


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_a_functions_role_may_write_its_own_log_group_and_no_other(function: str) -> None:
    """Lambda writes a function's logs to the group its LoggingConfig names with the function's role:
    streams and events there alone (the group's Arn ends in :*, its streams). The template creates the
    group, so the role needs no logs:CreateLogGroup; SAM's AWSLambdaBasicExecutionRole granted all
    three on every log group of the account."""
    group = FUNCTIONS[function]["LoggingConfig"]["LogGroup"]["Ref"]
    assert EXPANDED[group]["Type"] == "AWS::Logs::LogGroup"
    logs = [
        (actions(s), s["Resource"], s["Effect"])
        for s in role_statements(function)
        if any(a.startswith("logs:") for a in actions(s))
    ]
    assert logs == [({"logs:CreateLogStream", "logs:PutLogEvents"}, {"Fn::GetAtt": [group, "Arn"]}, "Allow")]


# What Lambda calls with a VPC function's role to give it network interfaces in its subnets (Lambda
# Developer Guide, "Giving Lambda functions access to resources in an Amazon VPC"): the ec2 actions of
# AWSLambdaVPCAccessExecutionRole, as the AWS Managed Policy Reference prints it.
VPC_FUNCTION_ACTIONS = {
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
}


def test_the_functions_may_manage_network_interfaces_exactly_when_they_run_in_a_vpc() -> None:
    """With SubnetIds the functions run in the VPC, and Lambda refuses to create one whose role may not
    create its network interfaces; without, no role may touch a network interface (SAM's
    AWSLambdaVPCAccessExecutionRole granted it whatever SubnetIds was)."""
    [condition, _, absent] = SAM_FUNCTION_GLOBALS["VpcConfig"]["Fn::If"]
    assert absent == {"Ref": "AWS::NoValue"}
    policy = EXPANDED["FunctionNetworkInterfacesPolicy"]
    assert policy["Condition"] == condition
    assert [(actions(s), s["Resource"], s["Effect"]) for s in statements(policy)] == [
        (VPC_FUNCTION_ACTIONS, "*", "Allow")
    ]
    attached = {"Fn::If": [condition, {"Ref": "FunctionNetworkInterfacesPolicy"}, {"Ref": "AWS::NoValue"}]}
    for function in FUNCTIONS:
        assert "VpcConfig" not in FUNCTIONS[function], function  # the Globals' own, as the condition says
        arns = function_policies(function)
        assert attached in arns, function
        # none of the interface actions otherwise (the scale function's gang launch reads subnets' zones)
        interfaces = VPC_FUNCTION_ACTIONS - {"ec2:DescribeSubnets"}
        others = [s for s in role_statements(function) if actions(s) & interfaces]
        assert others == statements(policy), function


# X-Ray's write policy under the name that exists in every partition. AWSXrayWriteOnlyAccess, the older
# name, is missing from aws-cn and aws-us-gov: samtranslator (model/xray_utils.py,
# get_xray_managed_policy_name; serverless-application-model#1767) names it in the aws partition alone
# and AWSXRayDaemonWriteAccess elsewhere, and IAM refuses a role naming a policy that does not exist. The
# AWS Managed Policy Reference prints the same document for both (the X-Ray write actions on "*").
XRAY_IN_EVERY_PARTITION = "AWSXRayDaemonWriteAccess"


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_a_functions_role_names_an_x_ray_policy_that_exists_in_every_partition(function: str) -> None:
    """The template's roles name their managed policies under ${AWS::Partition}, and so must name one
    that exists in each: with AWSXrayWriteOnlyAccess the stack failed to create in China and GovCloud."""
    assert aws_managed_named(function) == {XRAY_IN_EVERY_PARTITION}
