"""How long one AWS call can take with the SDK settings the functions build their clients with, and
whether a scale step's calls around a raise marker fit in the scale function's time.

botocore tries a call up to ``total_max_attempts`` times (``AWS_MAX_ATTEMPTS``, adaptive mode:
``botocore/retries/standard.py`` and ``adaptive.py``). One call takes at most, from its settings:

* each try: up to ``connect_timeout`` to connect and ``read_timeout`` for each read of the answer
  (``AWS_CONNECT_TIMEOUT``, ``AWS_READ_TIMEOUT``); before it, adaptive mode may wait for a send token,
  which its bucket refills at no less than 0.5 a second (``bucket.TokenBucket._MIN_RATE``): up to
  :data:`TOKEN_WAIT_SECONDS`;
* between tries: ``ExponentialBackoff.delay_amount``, rand(0, 1) x min(base x 2^i, 20 s) before the
  try after try i (0-based), base 1 s for a throttle and less for anything else, and up to
  :data:`RETRY_AFTER_SECONDS` more when the answer asks for a later retry (``x-amz-retry-after``).

:func:`worst_call_seconds` adds these up at their largest. The name's resolution and an answer whose
reads each come just within the read timeout are not bounded by the settings: :data:`STEP_MARGIN_SECONDS`
is kept back for them.

A scale step that writes a raise (or give-back) marker must either ask the raise or give the marker
back before the function stops at its Timeout (``Sandbox.Timedout``, which SetDesired, RaiseDesired,
BackOff and GiveBack do not retry): each call it starts after the marker must leave room for the
marker's release, :data:`MARKED_CALLS` calls in all (:class:`spillway.act.deadline.Deadline`). The
settings are refused (:func:`step_refusal`) where that cannot fit in the scale function's
:data:`SCALE_FUNCTION_TIMEOUT_SECONDS` with :data:`STEP_ROOM_SECONDS` for the step's reads before it.
"""

from __future__ import annotations

TOKEN_WAIT_SECONDS = 2.0  # adaptive mode's send token at its lowest refill rate, 0.5 a second
RETRY_AFTER_SECONDS = 5.0  # botocore honours x-amz-retry-after up to this beyond its own back-off
MAX_BACKOFF_SECONDS = 20.0  # ExponentialBackoff._MAX_BACKOFF
THROTTLE_BASE_SECONDS = 1.0  # ExponentialBackoff's base for a throttle, the largest it uses

# The scale function's Timeout (template.yaml, ScaleFunction; tests/unit/test_template_contract.py holds
# them equal), what a step keeps back of its remaining time, and the room the step's reads before its
# marker have when AWS answers at once.
SCALE_FUNCTION_TIMEOUT_SECONDS = 120
STEP_MARGIN_SECONDS = 5.0
STEP_ROOM_SECONDS = 10.0
# What the scale-up's re-plan keeps, after its wait for the regions' reads, to plan on them before its
# commit (spillway.act.scale, next_round): the planner took 2 s at 10,000 nodes, 9 s with expendable pods
# (README, bench/planner.py). A wait to the last moment the commit fits left it no time to plan, every try.
REPLAN_ROOM_SECONDS = 15.0
# What observe keeps, after its wait for the regions' reads, to build the snapshot, write the quotas' and
# buffers' status and store it (spillway.observe, functions/observe). One rule for observe and the re-plan
# (Deadline.reading): a region read is awaited while what must follow it still fits in the invocation,
# and a region not read by then is unread, its groups carried, as one whose read failed. Observe's had no
# bound but its Timeout: one hung region ended every invocation with no snapshot stored, and every plan
# stopped with it. What follows is counted differently, on purpose: the re-plan counts its commit at an
# AWS call's longest (49 s at the defaults), as Lambda's Timeout cutting it ends the execution
# (Sandbox.Timedout, not retried); observe counts its store within this room, at its usual pace, as a
# store cut there loses one snapshot (the chunks go before the head item, so none is half there) that the
# next minute's run takes again, and counting it at its longest would leave a run's later observations
# (20 s and 40 s in) no time to read any region. So at the defaults the re-plan waits about 51 s (120 s
# less 5, 15 and 49) and observe's first observation 75 s (90 s less 5 and 10).
OBSERVE_ROOM_SECONDS = 10.0
MARKED_CALLS = 2  # a call started after a marker, and the marker's release should it not be asked
MAX_ATTEMPTS = 20  # the most AWS_MAX_ATTEMPTS the configuration takes (spillway.runtime)


def backoff_seconds(attempts: int) -> float:
    """The longest botocore waits between ``attempts`` tries of one call, all told."""
    return sum(
        min(THROTTLE_BASE_SECONDS * (1 << i), MAX_BACKOFF_SECONDS) + RETRY_AFTER_SECONDS
        for i in range(max(0, attempts - 1))
    )


def worst_call_seconds(attempts: int, connect_timeout: float, read_timeout: float) -> float:
    """The longest one AWS call takes with these settings: every try to its timeouts, after its wait for a
    send token, and the longest back-off between them."""
    return attempts * (connect_timeout + read_timeout + TOKEN_WAIT_SECONDS) + backoff_seconds(attempts)


def _step_seconds(attempts: int, connect_timeout: float, read_timeout: float) -> float:
    """What a scale step needs with these settings: the calls around its marker and its room."""
    call = worst_call_seconds(attempts, connect_timeout, read_timeout)
    return MARKED_CALLS * call + STEP_MARGIN_SECONDS + STEP_ROOM_SECONDS


def most_attempts(connect_timeout: float, read_timeout: float) -> int:
    """The most attempts that fit a scale step with these timeouts (0: not even one)."""
    fit = 0
    while (
        fit < MAX_ATTEMPTS
        and _step_seconds(fit + 1, connect_timeout, read_timeout) <= SCALE_FUNCTION_TIMEOUT_SECONDS
    ):
        fit += 1
    return fit


def step_refusal(attempts: int, connect_timeout: float, read_timeout: float) -> str:
    """Why these SDK settings leave a scale step no time to ask a raise it marked ("" when they do), and
    what would fit."""
    needed = _step_seconds(attempts, connect_timeout, read_timeout)
    if needed <= SCALE_FUNCTION_TIMEOUT_SECONDS:
        return ""
    call = worst_call_seconds(attempts, connect_timeout, read_timeout)
    fit = most_attempts(connect_timeout, read_timeout)
    hint = (f"with these timeouts AWS_MAX_ATTEMPTS at most {fit} fits" if fit
            else "no AWS_MAX_ATTEMPTS fits with these timeouts: lower AWS_READ_TIMEOUT or AWS_CONNECT_TIMEOUT")  # fmt: skip
    return (
        f"one AWS call may take {call:g} s ({attempts} attempt(s) of {connect_timeout:g} s to connect and "
        f"{read_timeout:g} s to read, with back-off); a scale step makes a call after its raise marker only "
        f"with time left to give the marker back, {MARKED_CALLS} calls, and keeps "
        f"{STEP_MARGIN_SECONDS + STEP_ROOM_SECONDS:g} s for its reads and its end: {needed:g} s, more than "
        f"the scale function's Timeout, {SCALE_FUNCTION_TIMEOUT_SECONDS} s; {hint}"
    )
