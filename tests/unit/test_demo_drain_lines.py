"""The demo's line for a scale-down's drain, by its outcome."""

from __future__ import annotations

import io

from spillway.local.demo import Demo, DemoOptions


def test_a_drain_that_found_its_instance_terminated_by_another_is_told_so_not_as_a_failure() -> None:
    """DrainNode's ``gone``: the drain evicted its pods and found the instance already terminating (another
    drain of it terminated it, and counted it). Not a failed drain, and not a termination of its own."""
    demo = Demo(DemoOptions(teams=False, night=False), io.StringIO())
    line = {"node": "ip-10-0-0-1.ec2.internal", "instance_id": "i-0aaa1111bbbb2222c", "outcome": "gone",
            "evicted_count": 1, "node_deleted": False}  # fmt: skip

    demo._print_drain("scale-down-1", line)

    kinds = [e.kind for e in demo.result.events]
    assert kinds == ["drain", "drain_gone"], demo.result.events
    assert "not by this drain" in demo.result.events[-1].text
    assert demo.result.instances_drained == set()  # counted by the drain that terminated it
