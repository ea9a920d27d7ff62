"""The error contract between the Lambda steps and the state machines.

Step Functions matches a Lambda's error by the exception's class *name*, exactly (no subclasses), so:
(a) every name in an ``ErrorEquals`` or a ``Fail`` state's ``Error`` is a class of ``spillway.errors``,
    a ``States.*`` name, or an AWS service error of the integration that raises it (listed below);
(b) every error a step declares (``RAISES`` in act/scale.py, act/gang.py and act/drain.py) is retried or caught
    where the state machine runs that step, and a step whose ports fail with any error they may raise
    (``spillway.ports.ERRORS``) raises nothing outside its declaration.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeCloud, FakeCluster, FakeLedger, FakeSnapshots, Recorder

from spillway import errors
from spillway.act import drain, gang, scale
from spillway.act.planning import PlanSettings
from spillway.config import PlannerConfig
from spillway.local import objects as o
from spillway.model.k8s import CORDONED_BY_SPILLWAY
from spillway.ports import ERRORS, METHOD_ERRORS

ROOT = Path(__file__).resolve().parents[2]
MACHINES = sorted((ROOT / "statemachines").glob("*.asl.json"))

# AWS service errors the state machines name, per integration. Sources:
# - Lambda.*: "Handling transient Lambda service exceptions", AWS Step Functions Developer Guide
#   (docs.aws.amazon.com/step-functions/latest/dg/bp-lambda-serviceexception.html); Sandbox.Timedout:
#   a Lambda function that ran out of time ("Error handling in Step Functions", Lambda errors); the same
#   page says unhandled errors, function timeouts and out-of-memory among them, arrive as Lambda.Unknown.
# - No AutoScaling.*: no state machine calls Auto Scaling but through a function (its adapter's names).
# - StepFunctions.*: the optimized states:startExecution integration names StartExecution's
#   ExecutionLimitExceeded "StepFunctions.ExecutionLimitExceeded", the API's error code with no suffix
#   (Step Functions Developer Guide, "Start workflow executions from a task state": its Retry example),
#   and the common ThrottlingException (AWS Step Functions API Reference).
# - Sfn.*: an aws-sdk task names an error "<Service>.<ErrorCode>Exception" for the errors the API
#   models for the call (DescribeExecution: ExecutionDoesNotExist, InvalidArn, ...); any other code,
#   throttling included, arrives as the service's base exception, "Sfn.SfnException" (Step Functions
#   Developer Guide, "AWS SDK service integrations"; test_every_error_an_aws_sdk_task_names_can_happen).
LAMBDA_SERVICE_ERRORS = {  # "Handle Lambda service exceptions": the transient 500s of invoking Lambda
    "Lambda.ClientExecutionTimeoutException",
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
}
AWS_ERRORS = {
    "Lambda": {
        "Lambda.ClientExecutionTimeoutException",
        "Lambda.ServiceException",
        "Lambda.AWSLambdaException",
        "Lambda.SdkClientException",
        "Lambda.TooManyRequestsException",
        "Sandbox.Timedout",
        "Lambda.Unknown",
    },
    "states:startExecution": {
        "StepFunctions.ExecutionLimitExceeded",
        "StepFunctions.ThrottlingException",
    },
    "aws-sdk:sfn": {
        "Sfn.ExecutionDoesNotExistException",
        "Sfn.SfnException",
    },
    # the optimized DynamoDB integration names an error "DynamoDB.<ErrorCode>" (a refused condition:
    # DynamoDB.ConditionalCheckFailedException; moto's interpreter, LocalStack's port, does the same)
    ":::dynamodb:putItem": {"DynamoDB.ConditionalCheckFailedException"},
}
ANY = {"States.ALL", "States.TaskFailed"}
FUNCTIONS = {"${ScaleFunctionArn}": {**scale.RAISES, **gang.RAISES}, "${DrainFunctionArn}": drain.RAISES}
ERROR_CLASSES = {
    name
    for name, value in vars(errors).items()
    if inspect.isclass(value) and issubclass(value, errors.SpillwayError)
}


def states(machine: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    for name, state in machine["States"].items():
        yield f"{path}{name}", state
        for inner in [*state.get("Branches", []), *filter(None, [state.get("ItemProcessor")])]:
            yield from states(inner, f"{path}{name}/")


def all_states() -> list[tuple[str, str, dict[str, Any]]]:
    return [(f.name, name, s) for f in MACHINES for name, s in states(json.loads(f.read_text()))]


def integration(resource: str) -> str:
    if resource in FUNCTIONS:
        return "Lambda"
    for key in AWS_ERRORS:
        if key in resource:
            return key
    return resource


def unknown_names(state: dict[str, Any]) -> set[str]:
    allowed = ERROR_CLASSES | AWS_ERRORS.get(integration(state.get("Resource", "")), set())
    named = {n for rule in state.get("Retry", []) + state.get("Catch", []) for n in rule["ErrorEquals"]}
    if state.get("Type") == "Fail" and "Error" in state:
        named.add(state["Error"])
    return {n for n in named if not n.startswith("States.") and n not in allowed}


def test_every_error_a_state_machine_names_exists() -> None:
    assert len(all_states()) > 40
    wrong = {f"{m}:{name}": unknown_names(s) for m, name, s in all_states() if unknown_names(s)}
    assert wrong == {}


def test_a_misspelt_or_foreign_name_is_found() -> None:
    assert unknown_names({"Type": "Task", "Resource": "${ScaleFunctionArn}",
                          "Retry": [{"ErrorEquals": ["AwsThrottling", "AutoScaling.ThrottlingException"]}]}) == {
        "AwsThrottling", "AutoScaling.ThrottlingException"}  # fmt: skip
    assert unknown_names({"Type": "Fail", "Error": "DrainTimedOut"}) == {"DrainTimedOut"}


def lambda_service_errors_unretried(state: dict[str, Any]) -> set[str]:
    """The transient Lambda service errors no one retrier of the task names together."""
    rules = [set(rule["ErrorEquals"]) for rule in state.get("Retry", [])]
    best = max(rules, key=lambda names: len(names & LAMBDA_SERVICE_ERRORS), default=set())
    return LAMBDA_SERVICE_ERRORS - best


def test_every_lambda_task_retries_every_transient_lambda_service_error() -> None:
    """AWS's guidance: invoking Lambda can fail with a transient 500 (ClientExecutionTimeoutException,
    ServiceException, AWSLambdaException, SdkClientException); retry them all. Every task on a function
    of ours, in every state machine, present and future, has one retrier that names the four."""
    tasks = [(m, n, s) for m, n, s in all_states() if s.get("Resource") in FUNCTIONS]
    assert len(tasks) >= 29
    gaps = {f"{m}:{n}": lambda_service_errors_unretried(s) for m, n, s in tasks}
    assert {k: sorted(v) for k, v in gaps.items() if v} == {}


def test_a_retrier_for_a_function_that_ran_out_of_time_also_names_lambda_unknown() -> None:
    """The steps that retry a function that timed out (a terminate, a removal) named only
    Sandbox.Timedout and States.Timeout, but AWS documents a function timeout, like running out of
    memory, as Lambda.Unknown ("Handle Lambda service exceptions"): such a terminate would have gone to
    its compensation, the node given back and the drain failed, instead of being tried again."""
    missing = [
        f"{file}:{name}"
        for file, name, state in all_states()
        for retrier in state.get("Retry", [])
        if "Sandbox.Timedout" in retrier["ErrorEquals"] and "Lambda.Unknown" not in retrier["ErrorEquals"]
    ]
    timed = [
        r for _, _, s in all_states() for r in s.get("Retry", []) if "Sandbox.Timedout" in r["ErrorEquals"]
    ]
    assert timed and missing == []


def test_a_lambda_task_that_forgets_a_service_error_is_found() -> None:
    task = {"Resource": "${DrainFunctionArn}", "Retry": [
        {"ErrorEquals": ["Lambda.ServiceException", "Lambda.AWSLambdaException", "Lambda.SdkClientException"]},
        {"ErrorEquals": ["Lambda.ClientExecutionTimeoutException", "AwsThrottled"]}]}  # fmt: skip
    assert lambda_service_errors_unretried(task) == {"Lambda.ClientExecutionTimeoutException"}
    assert lambda_service_errors_unretried({"Resource": "${DrainFunctionArn}"}) == LAMBDA_SERVICE_ERRORS


# aws-sdk:<service> -> (the PascalCase name Step Functions puts in its error names, botocore's service)
SDK_SERVICES = {
    "sfn": ("Sfn", "stepfunctions"),
    "autoscaling": ("AutoScaling", "autoscaling"),
    "cloudwatch": ("CloudWatch", "cloudwatch"),
}


def sdk_error_names(resource: str) -> set[str]:
    """What an aws-sdk task on ``resource`` can fail with besides ``States.*``: the errors the API models
    for the call, as "<Service>.<ErrorCode>Exception", and the service's base exception for every other
    code (throttling among them). From botocore's models: the API models the SDKs are generated from."""
    import botocore.session

    service, _, action = resource.partition("aws-sdk:")[2].partition(":")
    prefix, botocore_name = SDK_SERVICES[service]
    model = botocore.session.get_session().get_service_model(botocore_name)
    operation = model.operation_model(action[0].upper() + action[1:])
    names = {f"{prefix}.{prefix}Exception"}
    for shape in operation.error_shapes:
        code = (shape.metadata.get("error") or {}).get("code") or shape.name
        names.add(f"{prefix}.{code}" + ("" if code.endswith("Exception") else "Exception"))
    return names


def dead_names(state: dict[str, Any]) -> set[str]:
    named = {n for rule in state.get("Retry", []) + state.get("Catch", []) for n in rule["ErrorEquals"]}
    return {n for n in named if not n.startswith("States.")} - sdk_error_names(state["Resource"])


def test_every_error_an_aws_sdk_task_names_can_happen() -> None:
    tasks = [(m, n, s) for m, n, s in all_states() if "aws-sdk:" in s.get("Resource", "")]
    assert tasks  # DescribePrevious
    assert {f"{m}:{n}": dead_names(s) for m, n, s in tasks if dead_names(s)} == {}


def test_a_name_an_aws_sdk_task_never_raises_is_found() -> None:
    describe = "arn:aws:states:::aws-sdk:sfn:describeExecution"
    assert "Sfn.ExecutionDoesNotExistException" in sdk_error_names(describe)
    assert dead_names({"Resource": describe, "Retry": [{"ErrorEquals": ["Sfn.ThrottlingException"]}]}) == {
        "Sfn.ThrottlingException"}  # fmt: skip
    terminate = "arn:aws:states:::aws-sdk:autoscaling:terminateInstanceInAutoScalingGroup"
    assert sdk_error_names(terminate) >= {
        "AutoScaling.ResourceContentionException",
        "AutoScaling.ScalingActivityInProgressException",
        "AutoScaling.AutoScalingException",
    }
    assert "AutoScaling.ThrottlingException" not in sdk_error_names(terminate)


def uncovered(state: dict[str, Any], raises: frozenset[type[errors.SpillwayError]]) -> set[str]:
    covered = {n for rule in state.get("Retry", []) + state.get("Catch", []) for n in rule["ErrorEquals"]}
    if covered & ANY:
        return set()
    return {e.__name__ for e in raises} - covered


def step_tasks() -> list[tuple[str, str, dict[str, Any], str]]:
    out = []
    for machine, name, state in all_states():
        if state.get("Type") == "Task" and state.get("Resource") in FUNCTIONS:
            action = (state.get("Parameters") or {}).get("action")
            out.append((machine, name, state, action))
    return out


def test_every_declared_error_of_a_step_is_retried_or_caught_where_it_runs() -> None:
    tasks = step_tasks()
    assert {a for *_, a in tasks} == set(scale.RAISES) | set(gang.RAISES) | set(drain.RAISES)  # all run
    gaps = {
        f"{machine}:{name} ({action})": uncovered(state, FUNCTIONS[state["Resource"]][action])
        for machine, name, state, action in tasks
    }
    assert {k: v for k, v in gaps.items() if v} == {}


def test_a_step_without_a_catch_for_its_errors_is_found() -> None:
    [next_round] = [s for _, n, s, _ in step_tasks() if n == "NextRound"]
    without_catch = {k: v for k, v in next_round.items() if k != "Catch"}
    assert uncovered(without_catch, scale.RAISES["next_round"]) >= {"InputError", "AwsError"}
    assert uncovered(next_round, scale.RAISES["next_round"]) == set()


def test_every_declared_name_is_an_error_class() -> None:
    for raises in (*scale.RAISES.values(), *gang.RAISES.values(), *drain.RAISES.values()):
        assert {e.__name__ for e in raises} <= ERROR_CLASSES


# --- (b) steps raise nothing they do not declare ----------------------------------------------

NODE, INSTANCE = "ip-10-0-1-10.ec2.internal", "i-0a1b2c3d4e5f60718"
GROUP = {"group": "gpu", "region": "us-east-1", "from": 1, "to": 2, "grow": True, "new_nodes": 1, "pods": 1,
         "uncordon": [NODE], "reasons": {NODE: "reused for pending pods"}}  # fmt: skip


def world() -> tuple[FakeCluster, FakeCloud, FakeLedger, FakeSnapshots]:
    kube = FakeCluster(
        [o.node(NODE, instance=INSTANCE, zone="us-east-1a", unschedulable=True,
                annotations={CORDONED_BY_SPILLWAY: "2026-11-02T11:00:00Z drain"})],
        [o.pod("web-1", "team-a", node_name=NODE, owner=("ReplicaSet", "web-5d9c"))],
    )  # fmt: skip
    cloud = FakeCloud(cluster="prod")
    cloud.add_group("gpu", [INSTANCE, "i-0a1b2c3d4e5f60719"], desired=2, max_size=4)
    return kube, cloud, FakeLedger(), FakeSnapshots()


def scale_events() -> dict[str, dict[str, Any]]:
    """Each step's input as scale_up.asl.json's Parameters pass it (spillway.model.scale)."""
    prep = {
        "set": True,
        "count": 1,
        "owner": "up-p1-1-us-east-1-gpu",
        "target": 2,
        "live_desired": 2,
        "max_size": 4,
        "before": [INSTANCE],
        "since": "2026-11-02T11:59:00Z",
        "deadline": "2026-11-02T12:10:00Z",
        "uncordoned": [],
        "gone": [],
    }
    launch = {"status": "timeout", "reason": "gpu: 0 of 1 new node(s) Ready", "ready": 0, "wanted": 1}
    return {
        "prepare": {"action": "prepare", "cluster": "prod", "plan_id": "p1", "part": 1, "round": 1,
                    "launch_timeout_seconds": 600, "group": GROUP},
        "set_desired": {"action": "set_desired", "cluster": "prod", "plan_id": "p1", "group": GROUP,
                        "prep": prep},
        "verify": {"action": "verify", "cluster": "prod", "group": GROUP, "prep": prep},
        "backoff": {"action": "backoff", "cluster": "prod", "group": GROUP, "prep": {**prep, "before": []},
                    "launch": launch},
        "next_round": {"action": "next_round", "cluster": "prod", "plan_id": "p1",
                       "snapshot_key": "2026-11-02T12:00:00.000000Z", "part": 1, "round": 1, "max_rounds": 3,
                       "poll_seconds": 15, "launch_timeout_seconds": 600, "rounds": [],
                       "results": [{"group": "gpu", "region": "us-east-1", "outcome": "backed_off"}]},
    }  # fmt: skip


def run_scale(action: str, fakes: tuple[FakeCluster, FakeCloud, FakeLedger, FakeSnapshots]) -> None:
    kube, cloud, ledger, snapshots = fakes
    settings = PlanSettings(planner=PlannerConfig(cluster="prod", regions=("us-east-1", "us-west-2")))
    steps = scale.ScaleSteps(kube=kube, aws=cloud, ledger=ledger, snapshots=snapshots, settings=settings)
    ledger.claimed[("prod", "raise#up-p1-1-us-east-1-gpu")] = {"count": 1}  # backoff: it raised 1
    if action == "set_desired":
        ledger.claimed.clear()
    steps.run(scale_events()[action])


def run_drain(action: str, fakes: tuple[FakeCluster, FakeCloud, FakeLedger, FakeSnapshots]) -> None:
    kube, cloud, ledger, _ = fakes
    drainer = drain.Drainer(kube, cloud, ledger=ledger, cluster="prod", regions=["us-east-1"])
    if action in ("validate", "record", "summarize", "remove_gang_orphan"):
        request = {"cluster": "prod", "node": NODE, "terminate": False}
        orphan = {
            "cluster": "prod",
            "plan_id": "p1",
            "instance_id": INSTANCE,
            "region": "us-east-1",
            "attempt": "spillway-" + "a" * 40,
            "node": NODE,
            "reason": "left",
        }  # its claim first
        events = {"validate": {"request": request}, "record": {"state": {"drain": None}},
                  "summarize": {"results": [{}]}, "remove_gang_orphan": {"request": orphan}}  # fmt: skip
        drain.run_action(drainer, {"action": action, **events[action]})
        return
    failing = kube._failures.copy(), cloud._failures.copy()  # told to fail after the validation
    kube.heal()
    cloud.heal()
    validated = drainer.validate({"cluster": "prod", "node": NODE})["drain"]
    kube._failures.update(failing[0])
    cloud._failures.update(failing[1])
    drain.run_action(drainer, {"action": action, "drain": validated})


def injections() -> list[tuple[str, str, type[errors.SpillwayError]]]:
    """(port, method, error) for every method of the two fakes steps use and every error of the port."""
    out = []
    for port, fake in (("Cluster", FakeCluster), ("Cloud", FakeCloud), ("Ledger", FakeLedger)):
        methods = [m for m in vars(fake) if not m.startswith("_") and callable(getattr(fake, m))]
        methods = [
            m for m in methods if m not in ("add_group", "terminated", "running", "called", "fail", "heal")
        ]
        out += [(port, m, e) for m in methods for e in (*ERRORS[port], *METHOD_ERRORS.get(f"{port}.{m}", ()))]
    return out


def assert_raises_only_declared(
    run: Callable[[str, Any], None], action: str, declared: frozenset[type[errors.SpillwayError]]
) -> None:
    for port, method, error in injections():
        fakes = world()
        fake: Recorder = {"Cluster": fakes[0], "Cloud": fakes[1], "Ledger": fakes[2]}[port]
        fake.fail(method, error(f"injected into {method}"))
        try:
            run(action, fakes)
        except errors.SpillwayError as exc:
            assert type(exc) in declared, f"{action} raised {type(exc).__name__} ({port}.{method} failing)"


@pytest.mark.parametrize("action", sorted(scale.RAISES))
def test_a_scale_step_raises_only_what_it_declares(action: str) -> None:
    run_scale(action, world())  # healthy: it runs
    assert_raises_only_declared(run_scale, action, scale.RAISES[action])


@pytest.mark.parametrize("action", sorted(drain.RAISES))
def test_a_drain_step_raises_only_what_it_declares(action: str) -> None:
    assert_raises_only_declared(run_drain, action, drain.RAISES[action])


ATTEMPT = "spillway-" + "a" * 40
EXECUTION = "arn:aws:states:us-east-1:123456789012:execution:spillway-prod-gang-launch:gang-p1"


def gang_events() -> dict[str, dict[str, Any]]:
    """Each gang step's input as gang_launch.asl.json's Parameters pass it."""
    request = {"group": "gpu", "region": "us-east-1", "count": 2, "gang": "ml/train", "mode": "fleet",
               "deadline_seconds": 60, "poll_seconds": 1, "plan_id": "p1"}  # fmt: skip
    prep = {"mode": "fleet", "count": 2, "attempt": ATTEMPT, "desired": 2, "before": [INSTANCE],
            "since": "2026-11-02T11:59:00Z", "deadline": "2999-01-01T00:00:00Z",
            "fleet": {"launch_template": {"LaunchTemplateName": "gpu", "Version": "$Latest"},
                      "instance_type": "g5.xlarge", "subnets": [], "zones": ["us-east-1a"], "tags": {},
                      "capacity_type": "on-demand", "spot_allocation_strategy": None}}  # fmt: skip
    launch = {"status": "launched", "instances": ["i-0f000000000000000", "i-0f000000000000001"],
              "fleet_id": "fleet-0"}  # fmt: skip
    rollback = {**{k: v for k, v in prep.items() if k != "fleet"}, "mode": "rollback"}
    verify = {"status": "timeout", "error": "GangIncomplete", "ready": 0, "reason": "late"}
    return {
        "gang_prepare": {"action": "gang_prepare", **request, "zone": None, "execution": EXECUTION,
                         "execution_input": request},
        "gang_launch": {"action": "gang_launch", **request, "prep": prep},
        "gang_raise": {"action": "gang_raise", **request, "prep": rollback},
        "gang_attach": {"action": "gang_attach", **request, "prep": prep, "launch": launch},
        "gang_verify": {"action": "gang_verify", **request, "prep": prep, "launch": launch,
                        "execution_input": request},
        "gang_give_back": {"action": "gang_give_back",
                           "state": {**request, "zone": None, "prep": prep, "launch": launch, "verify": verify}},
    }  # fmt: skip


def run_gang(action: str, fakes: tuple[FakeCluster, FakeCloud, FakeLedger, FakeSnapshots]) -> None:
    kube, cloud, ledger, _ = fakes
    cloud.groups[("us-east-1", "gpu")]["Tags"].append({"Key": "spillway.io/atomic-launch", "Value": "fleet",
                                                       "PropagateAtLaunch": False})  # fmt: skip
    cloud.groups[("us-east-1", "gpu")]["MaxSize"] = 8
    failing = cloud._failures.copy()  # the launch the later steps act on runs healthy
    cloud.heal()
    # under a token of its own: EC2 answers a call with a used token with that call's result
    cloud.create_fleet_instant("us-east-1", gang.FleetRequest({"LaunchTemplateName": "gpu"}, 2, "spillway-0",
                                                              tags={gang.TAG_ATTEMPT: ATTEMPT}))  # fmt: skip
    cloud._failures.update(failing)
    steps = gang.GangSteps(kube=kube, aws=cloud, ledger=ledger, cluster="prod")
    steps.run(gang_events()[action])


@pytest.mark.parametrize("action", sorted(gang.RAISES))
def test_a_gang_step_raises_only_what_it_declares(action: str) -> None:
    run_gang(action, world())  # healthy: it runs
    assert_raises_only_declared(run_gang, action, gang.RAISES[action])


def test_an_undeclared_error_is_found() -> None:
    narrower = scale.RAISES["prepare"] - {errors.KubeUnavailable}
    with pytest.raises(AssertionError, match="prepare raised KubeUnavailable"):
        assert_raises_only_declared(run_scale, "prepare", narrower)


def run_plan_validate(action: str, fakes: tuple[FakeCluster, FakeCloud, FakeLedger, FakeSnapshots]) -> None:
    kube, cloud, _, _ = fakes
    drainer = drain.Drainer(kube, cloud, ledger=FakeLedger(), cluster="prod", regions=["us-east-1"])
    request = {"cluster": "prod", "node": NODE, "plan_id": "p1", "instance_id": INSTANCE, "group": "gpu"}
    drain.run_action(drainer, {"action": action, "request": request})


def test_a_plans_drain_validation_raises_only_what_it_declares() -> None:
    assert_raises_only_declared(run_plan_validate, "validate", drain.RAISES["validate"])


def test_a_plans_drain_whose_node_is_gone_is_an_answer_not_an_error() -> None:
    """The Node gone since the plan (get_node's NodeNotFound) cancels a plan's drain: validation answers,
    so neither the drain function's Errors alarm nor the DrainNode failures alarm fires."""
    kube, cloud, _, _ = world()
    kube.fail("get_node", errors.NodeNotFound("gone"))
    drainer = drain.Drainer(kube, cloud, ledger=FakeLedger(), cluster="prod", regions=["us-east-1"])
    request = {"cluster": "prod", "node": NODE, "plan_id": "p1", "instance_id": INSTANCE, "group": "gpu"}
    out = drain.run_action(drainer, {"action": "validate", "request": request})
    assert (
        set(out) == {"cancelled", drain.COUNTED_EXPIRES_AT} and "no Node named" in out["cancelled"]["note"]
    ), out
    with pytest.raises(errors.InvalidDrainRequest, match="no Node named"):  # asked by hand: rejected
        drain.run_action(drainer, {"action": "validate", "request": {**request, "plan_id": None}})


def test_the_errors_a_function_counts_as_answered_are_those_its_state_machines_name() -> None:
    """``<fn>-errors`` of the scale and drain functions leave out the raises their handlers count as
    answered (``STEP_ANSWERS``, metric AnsweredErrors): exactly the class names a Retry or a named
    Catch of a task running that function names. A name left out of the set would page for a throttle
    retried with success; a name in the set that no state machine takes would hide a real failure."""
    named: dict[str, set[str]] = {}
    for _, _, state in all_states():
        function = {"${ScaleFunctionArn}": "scale", "${DrainFunctionArn}": "drain"}.get(
            state.get("Resource", "")
        )
        rules = [*state.get("Retry", []), *state.get("Catch", [])]
        names = {n for rule in rules for n in rule["ErrorEquals"] if n in ERROR_CLASSES}
        if function:
            named.setdefault(function, set()).update(names)
    assert named == {function: set(answers) for function, answers in errors.STEP_ANSWERS.items()}
