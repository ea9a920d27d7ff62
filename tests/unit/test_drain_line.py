"""A scale-down's Map keeps each drain's line, not its whole result (spillway.act.drain.line).

Step Functions caps a state's output at 256 KB and fails an execution that exceeds it with
States.DataLimitExceeded, which no Catch takes (AWS Step Functions Developer Guide, "Handling errors in
Step Functions workflows"). The Map's output holds every iteration's: a DrainNode output names every pod
it evicted, and a failed drain's error holds the child execution's DescribeExecution (its input, and a
cause the record step keeps up to 32,000 characters). The Line step reduces each to the line the summary
shows, within DRAIN_LINE_BYTES, whatever the result.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from spillway.act.drain import DRAIN_LINE_BYTES, line, summarize

ARN = "arn:aws:states:us-east-1:123456789012:execution:spillway-DrainNodeStateMachine:drain-7-" + "0" * 32
REQUEST = {"node": "ip-10-0-0-7.ec2.internal", "instance_id": "i-0123456789abcdef0", "group": "gpu",
           "region": "us-east-1", "reason": "idle 12 min"}  # fmt: skip


def size(doc: Any) -> int:
    return len(json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode())


def succeeded(evicted: int, note: str = "") -> dict[str, Any]:
    output = {**REQUEST, "cluster": "ml", "outcome": "terminated", "rounds": 3, "evicted_count": evicted,
              "evicted": [f"team-a/job-{i:05d}-worker-0" for i in range(evicted)], "node_deleted": True}  # fmt: skip
    return {"execution": ARN, "output": output | ({"note": note} if note else {})}


def failed(cause: str) -> dict[str, Any]:
    child = {"ExecutionArn": ARN, "Status": "FAILED", "Input": json.dumps({"cluster": "ml", **REQUEST}),
             "Error": "DrainTimeout", "Cause": cause}  # fmt: skip
    return {"request": REQUEST, "error": {"Error": "States.TaskFailed", "Cause": json.dumps(child)}}


@pytest.mark.parametrize(
    "result",
    [
        succeeded(700),  # a p4d's 737 pods, most of them evicted
        succeeded(3, note="ü" * 2000),  # a note of 2,000 characters, each two bytes
        failed("x" * 32_000),  # the longest cause the record step keeps
        failed('"\\' * 16_000),  # every character of it escaped in JSON
        {"request": REQUEST, "error": {"Error": "Lambda.Unknown", "Cause": "y" * 40_000}},  # not a child's
        {"output": {**REQUEST, "outcome": "terminated", "note": "z" * 5000}},  # an unregistered removal
    ],
    ids=["evicted-700", "long-note", "long-cause", "escaped-cause", "plain-cause", "removal"],
)
def test_a_line_is_within_its_bound_whatever_the_result(result: dict[str, Any]) -> None:
    assert size(result) > DRAIN_LINE_BYTES  # each is too big to keep whole
    made = line(result)
    assert size(made) <= DRAIN_LINE_BYTES
    assert made["node"] == REQUEST["node"] and made["outcome"] in ("terminated", "timeout", "failed")


def test_the_summary_of_lines_is_the_summary_of_the_results() -> None:
    """Cut or not, the summary says of each drain what it said of the result: the same outcome, node,
    execution and error, the counts unchanged; a result kept whole (its Line step failed) is summarized
    as before."""
    results = [succeeded(2), failed("the deadline passed with 1 pod left"), failed("x" * 32_000),
               succeeded(1, note="ü" * 2000)]  # fmt: skip
    lines = [{"line": line(r)} for r in results]

    direct, via = summarize("ml", "p", results), summarize("ml", "p", lines)

    assert via["counts"] == direct["counts"] == {"terminated": 2, "timeout": 2}
    assert via["drains"][:3] == direct["drains"][:3]  # within the bound already: not cut
    cut, whole = via["drains"][3], direct["drains"][3]
    assert cut["note"].endswith("…") and whole["note"].startswith(cut["note"][:-1])
    assert {k: v for k, v in cut.items() if k != "note"} == {k: v for k, v in whole.items() if k != "note"}
    # a result kept whole (its Line step failed) is summarized beside the lines as before
    assert summarize("ml", "p", [*lines, results[0]])["counts"] == {"terminated": 3, "timeout": 2}
