"""A step's deadline: how long its Lambda invocation still runs, and whether an AWS call started now
ends before it.

Lambda stops a function at its Timeout wherever it stands, and the state machine sees only
``Sandbox.Timedout`` (or ``Lambda.Unknown``), which the steps that raise or give back a group's desired
capacity do not retry: a raise marker written (:mod:`spillway.act.claims`) and the raise never asked
stayed, and said the raise was launching. A step given its :class:`Deadline` starts no call that could
still run when the function stops: one call may take :attr:`Deadline.call_seconds` (from the settings the
clients are built with: :func:`spillway.model.calltime.worst_call_seconds`), and the time kept back is
:data:`~spillway.model.calltime.STEP_MARGIN_SECONDS`. A call not started for that is
:class:`AwsUnavailable` with ``unsent``: nothing reached AWS, and the state machine retries it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from spillway.errors import AwsUnavailable
from spillway.model.calltime import STEP_MARGIN_SECONDS


def _endless() -> float:
    return math.inf


@dataclass(frozen=True, slots=True)
class Deadline:
    """``remaining``: the seconds the invocation has left (the Lambda context's remaining time, read live);
    ``call_seconds``: the longest one AWS call takes. The default has no end (a step run outside Lambda)."""

    remaining: Callable[[], float] = _endless
    call_seconds: float = 0.0

    @classmethod
    def of_invocation(cls, remaining_ms: Callable[[], int] | None, call_seconds: float) -> Deadline:
        """From a Lambda context's ``get_remaining_time_in_millis`` (None: no end)."""
        if remaining_ms is None:
            return cls()
        return cls(lambda: remaining_ms() / 1000, call_seconds)

    def left(self) -> float:
        """Seconds the step may still spend on calls: the invocation's remaining time less the margin."""
        return self.remaining() - STEP_MARGIN_SECONDS

    def fits(self, calls: int) -> bool:
        """Whether ``calls`` AWS calls, one after another, end in time at their longest."""
        return calls * self.call_seconds <= self.left()

    def require(self, calls: int, what: str) -> None:
        """:class:`AwsUnavailable` (``unsent``) unless ``calls`` AWS calls fit: the first of them, ``what``,
        is not started."""
        if self.fits(calls):
            return
        raise AwsUnavailable(
            f"{what} not started: the step has {max(0.0, self.left()):.0f} s left, and {calls} AWS call(s) "
            f"may take {calls * self.call_seconds:.0f} s ({self.call_seconds:g} s each at most: AWS_MAX_ATTEMPTS, "
            "AWS_CONNECT_TIMEOUT, AWS_READ_TIMEOUT); a retry asks it",
            unsent=True,
        )

    def reading(self, calls_after: int, room: float = 0.0) -> Callable[[], float] | None:
        """The seconds reads may still take (read live), with ``room`` seconds of work and then
        ``calls_after`` AWS calls at their longest to do after them: what the step waits for a read it
        cannot bound call by call (:func:`spillway.observe.groups_read`). None when the step has no end."""
        if math.isinf(self.left()):
            return None
        return lambda: self.left() - room - calls_after * self.call_seconds

    def before(self, calls: int) -> Callable[[str], None]:
        """What an adapter calls before each AWS call it makes (``before_call``): that call and
        ``calls - 1`` more must fit."""
        return lambda what: self.require(calls, what)


NO_DEADLINE = Deadline()
