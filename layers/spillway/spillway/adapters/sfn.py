"""Step Functions: start an execution under a deterministic name, so a duplicate start is harmless.

An execution's name is unique per state machine (for 90 days), and Step Functions refuses a second
``StartExecution`` under a used name with ``ExecutionAlreadyExists``. Spillway names executions after
the plan (``up-<plan id>``, ``down-<plan id>``), so that refusal is what makes starting idempotent: it
is reported as ``started=False``, not as a failure. Other SDK errors leave as
:class:`~spillway.errors.AwsError` subclasses (``AwsThrottled``, ``AwsUnavailable``).

A second ``StartExecution`` under a used name is not always refused: for a STANDARD workflow whose
execution of that name is still running and whose input is identical, the call succeeds and answers
as the first one did, that execution's ARN and ``startDate`` (AWS Step Functions API Reference,
StartExecution: "StartExecution is idempotent for STANDARD workflows"; ``ExecutionAlreadyExists``
only when the input differs or the execution has closed). Such an answer is a duplicate too: its
``startDate`` is before this call began, by more than :data:`CLOCK_SKEW` (the Lambda's clock against
Step Functions'), and it is reported ``started=False`` as well. A duplicate start within that much of
the first one cannot be told apart by its time: with ``first``
(:func:`spillway.adapters.state_store.first_start`), the first caller to report the start marks the
execution, and a caller that finds another's mark reports a duplicate. moto (5.x) answers the same
way: the running execution of that name and input, with its own start date.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from spillway.adapters.aws import SDK_ERRORS, map_aws_error
from spillway.errors import InputError
from spillway.model.act import ExecutionRequest, StartedExecution, execution_arn

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient

# Step Functions' rule for execution names (standard workflows): 1-80 characters; we keep to the
# ASCII subset that is also safe in CloudWatch Logs and X-Ray.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
ALREADY_EXISTS = "ExecutionAlreadyExists"
MISSING_EXECUTION = "ExecutionDoesNotExist"
MAX_INPUT_BYTES = 256 * 1024
# How far Step Functions' clock (an answer's startDate) may be behind the Lambda's: an execution that
# started more than this before the call began was there already
CLOCK_SKEW = timedelta(seconds=5)


def check_name(name: str) -> str:
    if not NAME_PATTERN.match(name):
        raise InputError(f"execution name {name!r} must be 1-80 characters of [A-Za-z0-9_-]", field="name")
    return name


class Executions:
    """Starts executions; ``ExecutionAlreadyExists`` is success (``started=False``), and so is the
    idempotent answer for a running execution of the same name and input (its ``startDate`` before the
    call). Reads an execution's status (:meth:`status`: a drain standing by for the one holding its
    node). ``clock``: the time a call begins (aware UTC). ``first``: whether this caller is the first
    to report the execution (its ARN) started; without it, every answer within CLOCK_SKEW is a start."""

    def __init__(
        self,
        client: SFNClient,
        clock: Callable[[], datetime] | None = None,
        first: Callable[[str], bool] | None = None,
    ) -> None:
        self.client = client
        self.clock = clock or (lambda: datetime.now(UTC))
        self.first = first

    def start(self, request: ExecutionRequest) -> StartedExecution:
        name = check_name(request.name)
        body = json.dumps(request.input, separators=(",", ":"), sort_keys=True)
        if len(body.encode()) > MAX_INPUT_BYTES:
            raise InputError(f"execution {name}: input is {len(body)} bytes, over Step Functions' 256 KB")
        what = f"StartExecution({request.kind}, {name})"
        began = self.clock()
        try:
            resp = self.client.start_execution(
                stateMachineArn=request.state_machine_arn, name=name, input=body
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == ALREADY_EXISTS:
                return StartedExecution(
                    request.kind, name, execution_arn(request.state_machine_arn, name), started=False
                )
            raise map_aws_error(exc, what) from exc
        except SDK_ERRORS as exc:
            raise map_aws_error(exc, what) from exc
        started = resp.get("startDate")
        arn = str(resp["executionArn"])
        if isinstance(started, datetime) and _utc(started) < _utc(began) - CLOCK_SKEW:
            return StartedExecution(request.kind, name, arn, started=False)
        return StartedExecution(request.kind, name, arn, started=self.first is None or self.first(arn))

    def status(self, arn: str) -> str:
        """The execution's status as DescribeExecution gives it (``RUNNING``, ``SUCCEEDED``, ``FAILED``,
        ``TIMED_OUT``, ``ABORTED``, ``PENDING_REDRIVE``: AWS Step Functions API Reference,
        DescribeExecution), or ``MISSING`` when Step Functions answers ``ExecutionDoesNotExist``."""
        what = f"DescribeExecution({arn.rsplit(':', 1)[-1]})"
        try:
            resp = self.client.describe_execution(executionArn=arn)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == MISSING_EXECUTION:
                return "MISSING"
            raise map_aws_error(exc, what) from exc
        except SDK_ERRORS as exc:
            raise map_aws_error(exc, what) from exc
        return str(resp["status"])


def _utc(moment: datetime) -> datetime:
    """``moment`` in UTC; a naive one is taken as UTC."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
