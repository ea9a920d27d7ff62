"""The embedded local stack: ``template.yaml`` stood up on moto, with the real handlers and state machines.

Everything comes from the template that is deployed, so tests, the demo and ``sam deploy`` cannot
drift: the DynamoDB tables (through :mod:`spillway.local.cfn`), every ``AWS::Serverless::Function``
(created in moto; its invocations are answered in-process by the real handler named by ``CodeUri`` and
``Handler``), and every ``AWS::Serverless::StateMachine`` (its ``DefinitionUri`` file with the
``DefinitionSubstitutions`` applied), executed by moto's ASL interpreter, and every ``AWS::SQS::Queue``
and ``AWS::Events::Rule`` (pattern and targets on the default bus: moto delivers matching events to the
queues).

Two things are adjusted so that moto behaves like AWS where the product depends on it:

* a Lambda task that raises answers ``{"errorType": <exception class name>, ...}`` with the
  ``X-Amz-Function-Error`` header, so ``Retry``/``Catch`` match on our error names as on AWS (a
  :class:`LambdaTimeout` answers ``Sandbox.Timedout``, as a function that ran past its timeout does);
* errors of ``aws-sdk:*`` tasks are named as AWS documents them, ``<Service>.<ErrorCode>Exception``
  (``AutoScaling.ScalingActivityInProgressException``), where moto would use the boto class name, and
  a code the API does not model (throttling) as the service's base exception (``Sfn.SfnException``);
* the ``states:startExecution`` integration takes and returns AWS's PascalCase names
  (``StateMachineArn``, ``Input``; ``ExecutionArn``, ``Output``), where moto 5.2 hands them to boto
  as they are and returns boto's camelCase;
* so do ``aws-sdk:*`` tasks, of services whose API names its fields in camelCase (``aws-sdk:sfn:
  describeExecution`` takes ``ExecutionArn`` and returns ``Status``), as the Step Functions Developer
  Guide documents; moto 5.2 hands the parameters to boto as they are, which drops them.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import sys
import threading
import time
import traceback
import uuid
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from spillway.local.cfn import create_tables, load_template, table_resources

ACCOUNT = "123456789012"
ROOT = Path(__file__).resolve().parents[4]
TEMPLATE = ROOT / "template.yaml"
FUNCTION_TYPE = "AWS::Serverless::Function"
STATE_MACHINE_TYPE = "AWS::Serverless::StateMachine"
QUEUE_TYPE = "AWS::SQS::Queue"
RULE_TYPE = "AWS::Events::Rule"
# AWS's service names in aws-sdk error names (PascalCase), by the lower-case name in the resource ARN.
_SDK_SERVICE_NAMES = {
    "autoscaling": "AutoScaling",
    "dynamodb": "DynamoDb",
    "ec2": "Ec2",
    "sfn": "Sfn",
    "eks": "Eks",
    "sts": "Sts",
}

Handler = Callable[[dict[str, Any], Any], Any]


@dataclass
class Invocation:
    function: str
    event: Any
    error: str | None = None
    result: Any = None


@dataclass
class LambdaContext:
    """What a Powertools-decorated handler reads from its context."""

    function_name: str
    memory_limit_in_mb: int = 512
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    invoked_function_arn: str = ""
    log_group_name: str = ""
    log_stream_name: str = ""

    def get_remaining_time_in_millis(self) -> int:
        return 300_000


class LambdaTimeout(Exception):
    """What Lambda answers for an invocation that ran past its timeout. AWS stops the function only at
    the timeout, so what the handler did before (an instance terminated, a Node deleted) stays done; the
    caller gets no result, only ``Sandbox.Timedout`` (the Error a state machine's Retry/Catch sees)."""

    error_type = "Sandbox.Timedout"

    def __init__(self, function: str, seconds: float = 3.0) -> None:
        super().__init__(f"RequestId: {uuid.uuid4()} Error: Task timed out after {seconds:.2f} seconds")
        self.function = function


EventMatch = Callable[[Any], bool]


class FunctionFaults:
    """Make a function fail its next calls: :meth:`fail_next` before the handler runs (a Lambda error
    with that exception's name), :meth:`time_out_after` after it ran (:class:`LambdaTimeout`), or
    :meth:`answer_after` it ran with another error (a Lambda service error whose invocation ran).
    All three take their arguments in one order: the function, the error (where there is one), how
    many calls (``times``), which calls (``when``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, list[tuple[Exception, EventMatch]]] = {}
        self._timeouts: dict[str, list[tuple[Exception | None, EventMatch]]] = {}

    def fail_next(
        self, function: str, error: Exception, times: int = 1, when: EventMatch | None = None
    ) -> None:
        """The next ``times`` calls of ``function`` whose event ``when`` accepts (any, by default) fail
        with ``error`` before the handler runs."""
        with self._lock:
            self._pending.setdefault(function, []).extend([(error, when or (lambda event: True))] * times)

    def take(self, function: str, event: Any = None) -> Exception | None:
        with self._lock:
            queue = self._pending.get(function) or []
            for i, (error, when) in enumerate(queue):
                if when(event):
                    del queue[i]
                    return error
            return None

    def time_out_after(self, function: str, times: int = 1, when: EventMatch | None = None) -> None:
        """The next ``times`` calls of ``function`` whose event ``when`` accepts (any, by default) run
        the handler to the end, then answer as a timed-out Lambda: side effects done, result lost."""
        with self._lock:
            self._timeouts.setdefault(function, []).extend([(None, when or (lambda event: True))] * times)

    def answer_after(
        self, function: str, error: Exception, times: int = 1, when: EventMatch | None = None
    ) -> None:
        """The next ``times`` calls of ``function`` whose event ``when`` accepts run the handler to the
        end, then answer ``error`` (its ``error_type``, else its class name): side effects done, result
        lost, as an invoke whose 500 came after the function ran."""
        with self._lock:
            self._timeouts.setdefault(function, []).extend([(error, when or (lambda event: True))] * times)

    def take_timeout(self, function: str, event: Any) -> Exception | None:
        with self._lock:
            queue = self._timeouts.get(function) or []
            for i, (error, when) in enumerate(queue):
                if when(event):
                    del queue[i]
                    return error if error is not None else LambdaTimeout(function)
            return None


class LocalStack:
    """``template.yaml`` on moto. Use as a context manager; everything is gone on exit."""

    def __init__(
        self,
        *,
        template: str | Path = TEMPLATE,
        parameters: Mapping[str, str] | None = None,
        region: str = "us-east-1",
        environment: Mapping[str, str] | None = None,
        prefix: str = "spillway",
    ) -> None:
        self.template_path = Path(template)
        self.template = load_template(self.template_path)
        self.parameters = dict(parameters or {})
        self.region = region
        self.environment = dict(environment or {})
        self.prefix = prefix
        self.tables: dict[str, str] = {}
        self.functions: dict[str, str] = {}  # logical id -> ARN
        self.state_machines: dict[str, str] = {}  # logical id -> ARN
        self.queues: dict[str, str] = {}  # logical id -> URL
        self.rules: dict[str, str] = {}  # logical id -> rule name
        self.invocations: list[Invocation] = []
        self.faults = FunctionFaults()
        self._handlers: dict[str, Handler] = {}  # function name -> handler
        self._stack = ExitStack()
        self._lock = threading.Lock()

    # -- lifecycle --

    def __enter__(self) -> LocalStack:
        from moto import mock_aws

        os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
        os.environ["AWS_DEFAULT_REGION"] = self.region
        self._stack.enter_context(
            mock_aws(
                config={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
            )
        )
        self._stack.enter_context(_lambda_routed_to(self))
        self._stack.enter_context(_aws_sdk_error_names())
        self._stack.enter_context(_sfn_integration_like_aws())
        self._stack.enter_context(_aws_sdk_fields_like_aws())
        self._stack.enter_context(_definitions_validated_once())
        self._stack.enter_context(_metrics_one_invocation_at_a_time())
        try:
            self._create()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def client(self, service: str, region: str | None = None) -> Any:
        import boto3

        make: Any = boto3.client  # typed per service literal; ours is a runtime string
        return make(service, region_name=region or self.region)

    # -- creation from the template --

    def _create(self) -> None:
        # Fn::ForEach blocks (AWS::LanguageExtensions) only make IAM policies, alarms and log groups,
        # none of which the local stack needs; they are lists, not resources.
        resources: dict[str, Any] = {
            k: v for k, v in self.template["Resources"].items() if isinstance(v, dict)
        }
        iam = self.client("iam")
        role = iam.create_role(RoleName=f"{self.prefix}-local", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        self.tables = {logical: f"{self.prefix}-{logical}" for logical in table_resources(self.template)}
        if self.tables:
            create_tables(self.template_path, self.client("dynamodb"), self.tables, self.parameters)
        self._create_queues_and_rules(resources)
        lam = self.client("lambda")
        globals_env = (
            ((self.template.get("Globals") or {}).get("Function") or {}).get("Environment") or {}
        ).get("Variables") or {}
        env: dict[str, str] = {}
        for logical, resource in resources.items():
            if resource.get("Type") != FUNCTION_TYPE:
                continue
            props = resource.get("Properties") or {}
            name = f"{self.prefix}-{logical}"
            arn = lam.create_function(
                FunctionName=name,
                Runtime="python3.13",
                Role=role,
                Handler=props.get("Handler", "app.handler"),
                Code={"ZipFile": _EMPTY_ZIP},
            )["FunctionArn"]
            self.functions[logical] = arn
            self._handlers[name] = _load_handler(
                self.template_path.parent / props["CodeUri"], props.get("Handler", "app.handler")
            )
        sfn = self.client("stepfunctions")
        # State machines may refer to each other: create in dependency order (referenced first).
        pending = {k: v for k, v in resources.items() if v.get("Type") == STATE_MACHINE_TYPE}
        while pending:
            progressed = False
            for logical in sorted(pending):
                props = pending[logical].get("Properties") or {}
                subs = props.get("DefinitionSubstitutions") or {}
                if any(_refers_to(value, set(pending) - {logical}) for value in subs.values()):
                    continue
                definition = (self.template_path.parent / props["DefinitionUri"]).read_text()
                for key, value in subs.items():
                    resolved = self.resolve(value)
                    if resolved is None:
                        raise ValueError(
                            f"{logical}: DefinitionSubstitutions.{key}: cannot resolve {value!r}"
                        )
                    definition = definition.replace("${" + key + "}", str(resolved))
                leftover = re.findall(r"\$\{[A-Za-z0-9_]+\}", definition)
                if leftover:
                    raise ValueError(
                        f"{logical}: {props['DefinitionUri']} uses {leftover[0]} with no substitution"
                    )
                arn = sfn.create_state_machine(
                    name=f"{self.prefix}-{logical}", definition=definition, roleArn=role
                )["stateMachineArn"]
                self.state_machines[logical] = arn
                del pending[logical]
                progressed = True
            if not progressed:
                raise ValueError(f"state machines refer to each other in a cycle: {sorted(pending)}")
        # Environment last: variables may name state machines (their ARNs exist only now).
        for resource in resources.values():
            if resource.get("Type") != FUNCTION_TYPE:
                continue
            variables = {
                **globals_env,
                **(((resource.get("Properties") or {}).get("Environment") or {}).get("Variables") or {}),
            }
            for key, value in variables.items():
                resolved = self.resolve(value)
                if isinstance(resolved, list):
                    env[key] = ",".join(str(r) for r in resolved)
                elif resolved is not None:
                    env[key] = str(resolved)
        env.update(self.environment)
        os.environ.update(env)

    def _create_queues_and_rules(self, resources: Mapping[str, Any]) -> None:
        """Every SQS queue (plain: moto needs no SSE, redrive or policy to deliver) and every EventBridge
        rule on the default bus with its pattern and targets, so events put on the bus reach the queues
        as they would on AWS."""
        sqs = self.client("sqs")
        for logical, resource in resources.items():
            if resource.get("Type") == QUEUE_TYPE:
                self.queues[logical] = sqs.create_queue(QueueName=f"{self.prefix}-{logical}")["QueueUrl"]
        events = self.client("events")
        for logical, resource in resources.items():
            if resource.get("Type") != RULE_TYPE:
                continue
            props = resource.get("Properties") or {}
            name = f"{self.prefix}-{logical}"
            pattern = self._resolve_pattern(logical, props["EventPattern"])
            events.put_rule(Name=name, EventPattern=json.dumps(pattern), State=props.get("State", "ENABLED"))
            targets = []
            for target in props.get("Targets") or []:
                arn = self.resolve(target["Arn"])
                if arn is None:
                    raise ValueError(
                        f"{logical}: target {target.get('Id')}: cannot resolve {target['Arn']!r}"
                    )
                targets.append({"Id": target["Id"], "Arn": arn})
            if targets:
                events.put_targets(Rule=name, Targets=targets)
            self.rules[logical] = name

    def _resolve_pattern(self, logical: str, value: Any) -> Any:
        """An event pattern with its intrinsic values (the rules' ``account: [!Ref AWS::AccountId]``)
        resolved, as CloudFormation does before it creates the rule."""
        if isinstance(value, list):
            return [self._resolve_pattern(logical, v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1 and (next(iter(value)) == "Ref" or next(iter(value)).startswith("Fn::")):
            resolved = self.resolve(value)
            if resolved is None:
                raise ValueError(f"{logical}: EventPattern: cannot resolve {value!r}")
            return resolved
        return {k: self._resolve_pattern(logical, v) for k, v in value.items()}

    def resolve(self, value: Any) -> Any:
        """A template value with Ref/GetAtt/Sub resolved against this stack; None when unknowable."""
        if isinstance(value, (str, int, float, bool)):
            return value
        if not isinstance(value, dict) or len(value) != 1:
            return None
        ((fn, arg),) = value.items()
        if fn == "Ref":
            return self._ref(str(arg))
        if fn == "Fn::GetAtt":
            target, attribute = arg if isinstance(arg, list) else str(arg).split(".", 1)
            return self._get_att(target, attribute)
        if fn == "Fn::Sub":
            text, extra = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])

            def sub(match: re.Match[str]) -> str:
                name = match.group(1)
                if name in extra:
                    return str(self.resolve(extra[name]))
                target, _, attribute = name.partition(".")
                got = self._get_att(target, attribute) if attribute else self._ref(target)
                return "" if got is None else str(got)

            return re.sub(r"\$\{([^}]+)\}", sub, text)
        if fn == "Fn::Join":
            sep, parts = arg
            listed = parts if isinstance(parts, list) else self.resolve(parts)
            if not isinstance(listed, list):
                return None
            resolved = [self.resolve(p) for p in listed]
            return None if any(r is None for r in resolved) else sep.join(str(r) for r in resolved)
        if fn == "Fn::Select":
            index, items = arg
            listed = self.resolve(items) if not isinstance(items, list) else items
            return None if not isinstance(listed, list) else self.resolve(listed[int(index)])
        if fn == "Fn::If":
            return None
        return None

    def _ref(self, name: str) -> Any:
        if name == "AWS::Region":
            return self.region
        if name == "AWS::AccountId":
            return ACCOUNT
        if name == "AWS::Partition":
            return "aws"
        if name == "AWS::StackName":
            return self.prefix
        parameter = (self.template.get("Parameters") or {}).get(name)
        if name in self.parameters or parameter is not None:
            value = self.parameters[name] if name in self.parameters else (parameter or {}).get("Default")
            if parameter is not None and str(parameter.get("Type", "")).startswith(
                ("CommaDelimitedList", "List<")
            ):
                return (
                    value
                    if isinstance(value, list)
                    else [v.strip() for v in str(value or "").split(",") if v.strip()]
                )
            return value
        if name in self.tables:
            return self.tables[name]
        if name in self.functions:
            return self.functions[name].rsplit(":", 1)[-1]
        if name in self.state_machines:
            return self.state_machines[name]
        if name in self.queues:
            return self.queues[name]
        return None

    def _get_att(self, target: str, attribute: str) -> Any:
        if attribute == "Arn":
            if target in self.functions:
                return self.functions[target]
            if target in self.state_machines:
                return self.state_machines[target]
            if target in self.tables:
                return f"arn:aws:dynamodb:{self.region}:{ACCOUNT}:table/{self.tables[target]}"
        if target in self.queues and attribute in ("Arn", "QueueName"):
            queue = f"{self.prefix}-{target}"
            return f"arn:aws:sqs:{self.region}:{ACCOUNT}:{queue}" if attribute == "Arn" else queue
        if attribute == "Name" and target in self.state_machines:
            return self.state_machines[target].rsplit(":", 1)[-1]
        if attribute == "StreamArn" and target in self.tables:
            return (
                self.client("dynamodb")
                .describe_table(TableName=self.tables[target])["Table"]
                .get("LatestStreamArn")
            )
        return None

    # -- using it --

    def invoke(self, function: str, event: Any) -> Any:
        """Call a function's real handler directly, as Lambda would (logical id or name)."""
        name = function if function in self._handlers else f"{self.prefix}-{function}"
        return self._call(name, event)

    def _call(self, name: str, event: Any) -> Any:
        handler = self._handlers[name]
        record = Invocation(function=name.removeprefix(f"{self.prefix}-"), event=event)
        with self._lock:
            self.invocations.append(record)
        injected = self.faults.take(record.function, event)
        if injected is not None:
            record.error = type(injected).__name__
            raise injected
        timeout = self.faults.take_timeout(record.function, event)
        try:
            record.result = handler(event, LambdaContext(function_name=name))
        except Exception as exc:
            record.error = type(exc).__name__
            raise
        if timeout is not None:  # it ran to the end; the caller never hears of the result
            record.error = getattr(timeout, "error_type", type(timeout).__name__)
            raise timeout
        return record.result

    def start(self, state_machine: str, payload: Any, name: str | None = None) -> str:
        return str(
            self.client("stepfunctions").start_execution(
                stateMachineArn=self.state_machines[state_machine],
                name=name or uuid.uuid4().hex,  # moto names an unnamed execution "None"
                input=json.dumps(payload),
            )["executionArn"]
        )

    def wait(self, execution_arn: str, timeout: float = 60.0) -> dict[str, Any]:
        """Poll until the execution ends; returns describe_execution with ``output`` parsed."""
        sfn = self.client("stepfunctions")
        deadline = time.monotonic() + timeout
        while True:
            desc = sfn.describe_execution(executionArn=execution_arn)
            if desc["status"] != "RUNNING":
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{execution_arn} still RUNNING after {timeout}s")
            time.sleep(0.05)
        if desc.get("output"):
            desc["output"] = json.loads(desc["output"])
        return dict(desc)

    def run(
        self, state_machine: str, payload: Any, timeout: float = 60.0, name: str | None = None
    ) -> dict[str, Any]:
        return self.wait(self.start(state_machine, payload, name), timeout)

    def history(self, execution_arn: str) -> list[dict[str, Any]]:
        sfn = self.client("stepfunctions")
        events: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"executionArn": execution_arn, "maxResults": 1000}
        while True:
            page = sfn.get_execution_history(**kwargs)
            events.extend(page["events"])
            if not page.get("nextToken"):
                return events
            kwargs["nextToken"] = page["nextToken"]

    def calls(self, function: str) -> list[Invocation]:
        return [i for i in self.invocations if i.function == function]


def _empty_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("app.py", "def handler(event, context):\n    return event\n")
    return buf.getvalue()


_EMPTY_ZIP = _empty_zip()


def _refers_to(value: Any, names: set[str]) -> bool:
    text = json.dumps(value)
    return any(f'"{n}"' in text or f"${{{n}" in text for n in names)


_modules: dict[Path, ModuleType] = {}


def _load_handler(code_dir: Path, handler: str) -> Handler:
    module_name, _, function_name = handler.rpartition(".")
    path = (code_dir / f"{module_name.replace('.', '/')}.py").resolve()
    module = _modules.get(path)
    if module is None:
        unique = f"spillway_fn_{path.parent.name}_{module_name.replace('.', '_')}"
        spec = importlib.util.spec_from_file_location(unique, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load handler {handler} from {code_dir}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[unique] = module
        spec.loader.exec_module(module)
        _modules[path] = module
    fn: Handler = getattr(module, function_name)
    return fn


@contextmanager
def _lambda_routed_to(stack: LocalStack) -> Iterator[None]:
    """Answer moto's Lambda invocations with the real handlers, in-process."""
    from moto.awslambda_simple.models import LambdaSimpleBackend

    original = LambdaSimpleBackend.invoke

    def invoke(
        self: Any, function_name: str, qualifier: str | None, body: Any, headers: Any, response_headers: Any
    ) -> bytes:
        name = function_name.rsplit(":", 1)[-1] if function_name.startswith("arn:") else function_name
        if name not in stack._handlers:
            answer = original(self, function_name, qualifier, body, headers, response_headers)
            return answer if isinstance(answer, bytes) else str(answer or "").encode()
        event = json.loads(body) if body else {}
        try:
            result = stack._call(name, event)
        except Exception as exc:
            response_headers["x-amz-function-error"] = "Unhandled"
            return json.dumps(
                {
                    "errorType": getattr(exc, "error_type", type(exc).__name__),
                    "errorMessage": str(exc),
                    "stackTrace": traceback.format_exception(exc)[-3:],
                }
            ).encode()
        return json.dumps(result).encode()

    LambdaSimpleBackend.invoke = invoke  # type: ignore[method-assign]
    try:
        yield
    finally:
        LambdaSimpleBackend.invoke = original  # type: ignore[method-assign]


@contextmanager
def _aws_sdk_error_names() -> Iterator[None]:
    """Name aws-sdk task errors as AWS does, not after boto classes: ``<Service>.<ErrorCode>Exception``
    for an error the service's API models, and the service's base exception
    (``<Service>.<Service>Exception``) for any other code, throttling among them (botocore raises a plain
    ``ClientError`` for those)."""
    from botocore.exceptions import ClientError
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
        state_task_service_aws_sdk as sdk,
    )

    cls = sdk.StateTaskServiceAwsSdk
    original = cls._from_error

    def from_error(self: Any, env: Any, ex: Exception) -> Any:
        if isinstance(ex, ClientError):
            service = str(self.resource.api_name).lower()
            pascal = _SDK_SERVICE_NAMES.get(service, service.capitalize())
            code = str(ex.response.get("Error", {}).get("Code", "Unknown"))
            name = f"{pascal}.{pascal if type(ex) is ClientError else code}"
            if not name.endswith("Exception"):
                name += "Exception"
            cause = str(ex.response.get("Error", {}).get("Message", ""))
            return self._get_task_failure_event(env=env, error=name, cause=cause)
        return original(self, env, ex)

    cls._from_error = from_error  # type: ignore[method-assign]
    try:
        yield
    finally:
        cls._from_error = original  # type: ignore[method-assign]


@contextmanager
def _normalised_after(
    cls: Any, on_parameters: Callable[[Any, dict[str, Any]], None], on_response: Callable[[Any, Any], None]
) -> Iterator[None]:
    """Run ``on_parameters`` / ``on_response`` after moto's own normalising of a service task's request
    and result, for the test run."""
    original_parameters, original_response = cls._normalise_parameters, cls._normalise_response

    def parameters(self: Any, parameters: dict[str, Any], **kwargs: Any) -> None:
        original_parameters(self, parameters, **kwargs)
        on_parameters(self, parameters)

    def response(self: Any, response: Any, **kwargs: Any) -> None:
        original_response(self, response, **kwargs)
        on_response(self, response)

    setattr(cls, "_normalise_parameters", parameters)  # noqa: B010 - a method replaced for the test run
    setattr(cls, "_normalise_response", response)  # noqa: B010
    try:
        yield
    finally:
        setattr(cls, "_normalise_parameters", original_parameters)  # noqa: B010
        setattr(cls, "_normalise_response", original_response)  # noqa: B010


@contextmanager
def _sfn_integration_like_aws() -> Iterator[None]:
    """Translate the ``states:startExecution(.sync)`` integration's field names as AWS does."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
        state_task_service_sfn as sfn,
    )

    def parameters(_: Any, parameters: dict[str, Any]) -> None:
        for key in list(parameters):
            parameters[key[:1].lower() + key[1:]] = parameters.pop(key)

    def response(_: Any, response: Any) -> None:
        if isinstance(response, dict):
            for key in list(response):
                response[key[:1].upper() + key[1:]] = response.pop(key)

    with _normalised_after(sfn.StateTaskServiceSfn, parameters, response):
        yield


@contextmanager
def _aws_sdk_fields_like_aws() -> Iterator[None]:
    """An ``aws-sdk:*`` task's PascalCase parameters become the API's own field names (by its boto model)
    and its result's fields PascalCase, as AWS does; a PascalCase API (Auto Scaling) is unchanged."""
    import botocore.session
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
        state_task_service_aws_sdk as sdk,
    )

    session = botocore.session.get_session()

    def operation(task: Any) -> Any:
        action = str(task.resource.api_action)
        model = session.get_service_model(task._get_boto_service_name())
        return model.operation_model(action[:1].upper() + action[1:])

    def parameters(task: Any, parameters: dict[str, Any]) -> None:
        task._to_boto_request(parameters, operation(task).input_shape)

    def response(task: Any, response: Any) -> None:
        task._from_boto_response(response, operation(task).output_shape)

    with _normalised_after(sdk.StateTaskServiceAwsSdk, parameters, response):
        yield


# Definitions moto has parsed and found valid in this process (the text after substitution).
_valid_definitions: set[str] = set()


@contextmanager
def _definitions_validated_once() -> Iterator[None]:
    """moto's CreateStateMachine parses the definition only to validate it, then drops the result
    (``StepFunctionsParserBackend._validate_definition``); with its pure-Python ANTLR parser that is
    ~0.3 s a machine, every stack. The same text parses the same way, so a text that parsed once is
    not parsed again for that; an invalid one still is, and is refused, every time. Executions parse
    their definition as before."""
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    original = StepFunctionsParserBackend.__dict__["_validate_definition"]

    def validate(definition: str) -> None:
        if definition in _valid_definitions:
            return
        original.__func__(definition=definition)  # raises InvalidDefinition
        _valid_definitions.add(definition)

    setattr(StepFunctionsParserBackend, "_validate_definition", staticmethod(validate))  # noqa: B010
    try:
        yield
    finally:
        setattr(StepFunctionsParserBackend, "_validate_definition", original)  # noqa: B010


METRIC_SET_METHODS = ("add_metric", "add_dimension", "add_metadata", "serialize_metric_set", "flush_metrics",
                      "clear_metrics")  # fmt: skip


@contextmanager
def _metrics_one_invocation_at_a_time() -> Iterator[None]:
    """Every handler shares Powertools' ``metrics`` (spillway.observability), one metric set per process.
    In Lambda each execution environment runs one invocation at a time, so nothing else touches the set
    between a handler's ``add_metric`` and its ``log_metrics`` flush. Here the functions run in one
    process and moto's executions call them from their own threads: a flush that found the set
    non-empty could serialize it after another thread's flush cleared it ("Must contain at least one
    metric") or while another added to it ("dictionary changed size during iteration"), failing an
    invocation that Lambda would never fail. Each of the set's methods holds one lock here."""
    from spillway.observability import metrics

    provider = metrics.provider
    lock = threading.RLock()
    originals = {name: getattr(provider, name) for name in METRIC_SET_METHODS}

    def locked(method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            with lock:
                return method(*args, **kwargs)

        return call

    for name, method in originals.items():
        setattr(provider, name, locked(method))
    try:
        yield
    finally:
        for name in originals:
            delattr(provider, name)  # the class's methods again


def regions_of(parameters: Mapping[str, str]) -> Sequence[str]:
    return [r.strip() for r in parameters.get("Regions", "").split(",") if r.strip()]
