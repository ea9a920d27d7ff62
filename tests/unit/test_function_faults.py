"""The local stack's fault injection (spillway.local.stack.FunctionFaults): its three ways of failing a
function's calls take their arguments in the same order, so a call written for one means the same for
the others."""

from __future__ import annotations

from spillway.local.stack import FunctionFaults, LambdaTimeout


class Boom(Exception):
    pass


def test_every_fault_takes_times_then_when_in_the_same_order() -> None:
    """``fail_next("F", error, 2, when)`` fails two matching calls; ``answer_after`` and ``time_out_after``
    given the same positional arguments do the same after the handler ran. ``answer_after`` took
    ``when`` before ``times``: its 2 was taken for the matcher and the first call raised TypeError."""
    record = {"action": "record"}
    other = {"action": "cordon"}

    def records(event: object) -> bool:
        return isinstance(event, dict) and event.get("action") == "record"

    faults = FunctionFaults()
    faults.fail_next("F", Boom("before"), 2, records)
    faults.answer_after("F", Boom("after"), 2, records)
    faults.time_out_after("G", 2, records)

    assert faults.take("F", other) is None and faults.take_timeout("F", other) is None
    assert [str(faults.take("F", record)) for _ in range(3)] == ["before", "before", "None"]
    assert [str(faults.take_timeout("F", record)) for _ in range(3)] == ["after", "after", "None"]
    timeouts = [faults.take_timeout("G", record) for _ in range(3)]
    assert [type(t) for t in timeouts] == [LambdaTimeout, LambdaTimeout, type(None)]
