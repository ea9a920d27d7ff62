"""Step Functions: start an execution under a deterministic name, so a duplicate start is harmless.

An execution's name is unique per state machine (for 90 days), and Step Functions refuses a second
``StartExecution`` under a used name with ``ExecutionAlreadyExists``. Spillway names executions after
the plan (``up-<plan id>``, ``down-<plan id>``), so that refusal is what makes starting idempotent: it
is reported as ``started=False``, not as a failure. Other SDK errors leave as
:class:`~spillway.errors.AwsError` subclasses (``AwsThrottled``, ``AwsUnavailable``).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from spillway.adapters.aws import map_aws_error
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


def check_name(name: str) -> str:
    if not NAME_PATTERN.match(name):
        raise InputError(f"execution name {name!r} must be 1-80 characters of [A-Za-z0-9_-]", field="name")
    return name


class Executions:
    """Starts executions; ``ExecutionAlreadyExists`` is success (``started=False``). Reads an
    execution's status (:meth:`status`: a drain standing by for the one holding its node)."""

    def __init__(self, client: SFNClient) -> None:
        self.client = client

    def start(self, request: ExecutionRequest) -> StartedExecution:
        name = check_name(request.name)
        body = json.dumps(request.input, separators=(",", ":"), sort_keys=True)
        if len(body.encode()) > MAX_INPUT_BYTES:
            raise InputError(f"execution {name}: input is {len(body)} bytes, over Step Functions' 256 KB")
        what = f"StartExecution({request.kind}, {name})"
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
        except BotoCoreError as exc:
            raise map_aws_error(exc, what) from exc
        return StartedExecution(request.kind, name, str(resp["executionArn"]), started=True)

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
        except BotoCoreError as exc:
            raise map_aws_error(exc, what) from exc
        return str(resp["status"])
