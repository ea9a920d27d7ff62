"""The state, snapshot and plan stores and the executions adapter catch what the AWS adapter catches
(spillway.adapters.aws.SDK_ERRORS) and map it the same way (map_aws_error): one mechanism. botocore's
ResponseParserError (parsers.py) is an ``Exception``, neither a ClientError nor a BotoCoreError, raised
once AWS answered; caught as (ClientError, BotoCoreError) it escaped as itself, an error name no Retry
of ours names. botocore 1.44's JSON parser (DynamoDB's and Step Functions' protocol) reads a body it
cannot parse as a message rather than raise it, so today it comes from the XML and CBOR parsers only:
this guards a client or protocol change, read as every Auto Scaling and EC2 call reads it (lost)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.parsers import ResponseParserError

from spillway.adapters.plans_store import PlanStore
from spillway.adapters.sfn import Executions
from spillway.adapters.state_store import StateStore
from spillway.adapters.store import SnapshotStore
from spillway.errors import AwsUnavailable
from spillway.model.act import ExecutionRequest

NOW = datetime(2026, 12, 7, 12, tzinfo=UTC)
ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:scale-up"


class Unparsable:
    """A client every call of which AWS answered with a body botocore cannot parse."""

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def call(**_: Any) -> Any:
            raise ResponseParserError(f"{name}: unable to parse the response body (injected)")

        return call


CALLS: dict[str, Callable[[Any], object]] = {
    "claim": lambda c: StateStore(c, "state").claim("prod", "raise#x", {"count": 1}, expires=NOW),
    "release": lambda c: StateStore(c, "state").release("prod", "raise#x"),
    "claims": lambda c: StateStore(c, "state").claims("prod", "raise#"),
    "load": lambda c: StateStore(c, "state").load("prod", NOW),
    "snapshot": lambda c: SnapshotStore(c, "snapshots").latest("prod"),
    "plan": lambda c: PlanStore(c, "plans").get("prod", "k"),
    "start": lambda c: Executions(c).start(ExecutionRequest("scale_up", ARN, "up-p1", {})),
    "status": lambda c: Executions(c).status(ARN.replace("stateMachine", "execution") + ":up-p1"),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_an_answer_that_cannot_be_parsed_is_lost_as_the_aws_adapter_reads_it(call: str) -> None:
    with pytest.raises(AwsUnavailable, match="could not be read"):
        CALLS[call](Unparsable())
