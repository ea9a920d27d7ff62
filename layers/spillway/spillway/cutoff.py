"""A read run in a worker thread that its caller may stop waiting for (cut), and that then does nothing.

A step bounded by its Lambda invocation's time reads regions in threads and waits for each only while
the rest of the step still fits (:func:`spillway.observe.groups_read`); one not ended by then is given
up. Python cannot stop a thread, and Lambda freezes the execution environment when the handler returns:
a thread still running resumes when the environment is reused for a later invocation (Lambda Developer
Guide, *Understanding the Lambda execution environment lifecycle*). Left alone, a cut read went on there,
calling AWS with the container's clients in another invocation's time and writing what it read into the
adapter's caches, which every later read trusts.

So each such read runs under a :class:`Cutoff` (:meth:`Cutoff.run`), and an adapter calls :func:`check`
in the reading thread before each AWS call it makes, before each try of it, and again when the call
ends, before it uses what it ended with (:class:`spillway.adapters.aws.AwsClients` does it for every
botocore call through the events of :data:`spillway.adapters.aws.CUTOFF_EVENTS`: an answer, an error
answer's too, and a failure with no answer, unreached or timed out). Once the caller has cut the read
(:meth:`Cutoff.cut`, when it stops waiting: always, whatever ended the wait), :func:`check` raises
:class:`ReadCut` there: no call and no retry is sent after the cut, and nothing a call ends with after it
reaches the read, so the read touches nothing shared; its result, if any, is dropped with its future.
The one try under way at the cut ends within its timeouts (``AWS_CONNECT_TIMEOUT``, ``AWS_READ_TIMEOUT``),
in this invocation or, frozen with it, in a later one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from spillway.errors import ReadCut

T = TypeVar("T")

_CURRENT = threading.local()  # the Cutoff of the read this thread runs, if any


class Cutoff:
    """One wait's reads: cut at once, when the wait ends."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._cut = threading.Event()

    def cut(self) -> None:
        """The caller waits no more: every read run under this sends nothing and uses nothing from now."""
        self._cut.set()

    @property
    def is_cut(self) -> bool:
        return self._cut.is_set()

    def run(self, read: Callable[[], T]) -> Callable[[], T]:
        """``read`` run in the calling thread under this cutoff (what a pool runs in a worker)."""

        def guarded() -> T:
            outer = getattr(_CURRENT, "cutoff", None)
            _CURRENT.cutoff = self
            try:
                return read()
            finally:
                _CURRENT.cutoff = outer

        return guarded


def check(what: str) -> None:
    """:class:`ReadCut` when the read this thread runs was cut: ``what`` (the call, or its answer) is
    not sent or not used. Nothing in a thread that runs no cut read."""
    cutoff: Cutoff | None = getattr(_CURRENT, "cutoff", None)
    if cutoff is not None and cutoff.is_cut:
        raise ReadCut(f"{cutoff.what}: {what} after the read was given up")
