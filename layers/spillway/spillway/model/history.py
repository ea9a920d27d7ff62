"""How long a state machine's poll loop may run: the settings whose loop fits an execution's history.

Step Functions fails an execution whose history reaches 25,000 events (Step Functions service quotas,
"Maximum execution history size"), and the iterations of an Inline Map are events of the execution that
runs it. Whatever the execution was doing stops there: a drain keeps Spillway's cordon, a gang launch
never reaches GiveBack (its instances stay), a scale-up never backs off or gives back what it raised.
So every poll loop is bounded by its settings, refused where they are read (a request, the
configuration), never found out mid-execution.

Events a state adds to the history (GetExecutionHistory): a Task on a function ARN 5
(TaskStateEntered, LambdaFunctionScheduled, LambdaFunctionStarted, LambdaFunctionSucceeded,
TaskStateExited), a Wait 2 (entered, exited), a Choice 2, a Pass 2, a Map iteration 2 (started,
succeeded); a retried attempt adds 3 more (scheduled, started, failed). A loop may use
:data:`LOOP_EVENTS`; the rest is for the states around it and their retries.

``drain_node``
    an eviction round is WaitForPods → Evict → IsEmpty, 9 events; but a round may go on to
    CheckBeforeTerminating → IsReady and back (not ready), or on to ShouldTerminate →
    TerminateThroughFunction → TerminatedNothing and back (the terminate step's own check found a pod
    that came since: NotTerminated), :data:`DRAIN_ROUND_EVENTS`. A pod landing between the check and the
    terminate round after round (an agent that tolerates the cordon, evicted by a drain by hand each
    round) makes every round that long, so the rounds are counted at that: at most :data:`MAX_ROUNDS`
    (``deadline_seconds / poll_seconds``).
``gang_launch``
    a check is WaitReady → Verify → Ready? (fleet mode first WaitRunning → Attach → Attached?), 9 events,
    both loops under one deadline: at most :data:`MAX_POLLS` checks (:func:`poll_count`).
``scale_up``
    each group of a round runs Prepare, SetOrNot, SetDesired, then WaitForLaunch → Verify → Launched?
    until its launch timeout, then BackOff or a Pass: :data:`SCALE_UP_GROUP_EVENTS` plus 9 a check. A
    round maps over at most :data:`MAX_SCALE_UP_GROUPS` groups (a plan growing more starts several
    executions; a re-plan keeps that many and leaves the rest to the next plan), and an execution runs
    at most ``max_rounds`` rounds: so ``max_rounds x MAX_SCALE_UP_GROUPS x (SCALE_UP_GROUP_EVENTS + 9 x
    checks)`` must fit in :data:`LOOP_EVENTS` (:func:`scale_up_refusal`).

A poll of 0 s (no pause) is bounded only by how fast the task answers: allowed for deadlines up to
:data:`MAX_BUSY_DEADLINE_SECONDS`.
"""

from __future__ import annotations

import math

HISTORY_EVENTS = 25_000  # an execution's history, at most (Step Functions service quotas)
LOOP_EVENTS = 20_000  # what one execution's poll loops may add; 5,000 left for the rest and retries
TASK_EVENTS, WAIT_EVENTS, CHOICE_EVENTS, PASS_EVENTS, MAP_ITERATION_EVENTS = 5, 2, 2, 2, 2
POLL_EVENTS = WAIT_EVENTS + TASK_EVENTS + CHOICE_EVENTS  # one turn of a poll loop: 9
# a drain's longest round: WaitForPods, Evict, IsEmpty, CheckBeforeTerminating, IsReady, ShouldTerminate,
# TerminateThroughFunction, TerminatedNothing (back to WaitForPods): 25
DRAIN_ROUND_EVENTS = POLL_EVENTS + TASK_EVENTS + CHOICE_EVENTS + CHOICE_EVENTS + TASK_EVENTS + CHOICE_EVENTS
MAX_ROUNDS = LOOP_EVENTS // DRAIN_ROUND_EVENTS  # a drain's eviction rounds, each counted at its longest: 800
MAX_POLLS = LOOP_EVENTS // 10  # a gang launch's checks (9 events each, rounded up): 2,000
MAX_BUSY_DEADLINE_SECONDS = 60  # the longest deadline polled with poll_seconds 0
MAX_SCALE_UP_GROUPS = 5  # groups one scale-up round maps over
# a scale-up group's states besides its checks: Map iteration, Prepare, SetOrNot, SetDesired, BackOff
SCALE_UP_GROUP_EVENTS = MAP_ITERATION_EVENTS + TASK_EVENTS + CHOICE_EVENTS + TASK_EVENTS + TASK_EVENTS


def poll_count(deadline_seconds: float, poll_seconds: float) -> int:
    """The most checks a loop polling every ``poll_seconds`` (> 0) makes until its deadline: one after
    each pause until one finds the deadline passed."""
    return math.ceil(deadline_seconds / poll_seconds) + 1


def drain_refusal(deadline_seconds: float, poll_seconds: float) -> str | None:
    """Why a drain evicting every ``poll_seconds`` until ``deadline_seconds`` (whole seconds, a Wait
    state's) cannot fit an execution's history, or None: at most :data:`MAX_ROUNDS` rounds, and no
    pause only for a deadline up to :data:`MAX_BUSY_DEADLINE_SECONDS`. What a drain request is refused
    for (``poll_seconds``), and so the scale-down's settings every drain it starts carries."""
    if poll_seconds <= 0:
        if deadline_seconds <= MAX_BUSY_DEADLINE_SECONDS:
            return None
        return (
            f"0 (no pause between eviction rounds) only with deadline_seconds up to "
            f"{MAX_BUSY_DEADLINE_SECONDS}, got deadline_seconds {deadline_seconds:g}"
        )
    if deadline_seconds / poll_seconds <= MAX_ROUNDS:
        return None
    return (
        f"{poll_seconds:g} s between rounds makes more than {MAX_ROUNDS} rounds before the "
        f"{deadline_seconds:g} s deadline (an execution's history is limited); poll less often"
    )


def gang_refusal(deadline_seconds: float, poll_seconds: float) -> str | None:
    """Why a gang launch's ``poll_seconds`` cannot poll until ``deadline_seconds`` within an execution's
    history, or None."""
    if poll_seconds <= 0:
        if deadline_seconds <= MAX_BUSY_DEADLINE_SECONDS:
            return None
        return (
            f"0 (no pause between checks) only with deadline_seconds up to {MAX_BUSY_DEADLINE_SECONDS}, "
            f"got deadline_seconds {deadline_seconds:g}"
        )
    checks = poll_count(deadline_seconds, poll_seconds)
    if checks <= MAX_POLLS:
        return None
    return (
        f"{poll_seconds:g} s between checks makes up to {checks} checks before the {deadline_seconds:g} s "
        f"deadline, more than the {MAX_POLLS} an execution's history ({HISTORY_EVENTS} events) holds; "
        f"poll at least every {math.ceil(deadline_seconds / (MAX_POLLS - 1))} s"
    )


def stretched_poll(deadline_seconds: float, poll_seconds: int, checked_deadline_seconds: float) -> int:
    """The whole seconds between checks of a loop polling until ``deadline_seconds`` so that it makes no
    more checks than one polling every ``poll_seconds`` (at least 1) until ``checked_deadline_seconds``,
    the deadline its settings were checked against (:func:`scale_up_refusal`): ``poll_seconds``, or more
    for a longer deadline. A scale-up waits longer for a group whose nodes take longer to come up
    (:meth:`spillway.act.scale.ScaleSteps.prepare`) and checks it less often, within the same history."""
    turns = max(1, math.ceil(checked_deadline_seconds / poll_seconds))
    return max(poll_seconds, math.ceil(deadline_seconds / turns))


def scale_up_events(launch_timeout_seconds: float, poll_seconds: float, max_rounds: int) -> int:
    """The events a scale-up execution's groups add at most: every round with its most groups, each
    checked until its launch timeout."""
    per_group = SCALE_UP_GROUP_EVENTS + POLL_EVENTS * poll_count(launch_timeout_seconds, poll_seconds)
    return max_rounds * MAX_SCALE_UP_GROUPS * per_group


def scale_up_refusal(launch_timeout_seconds: float, poll_seconds: float, max_rounds: int) -> str | None:
    """Why a scale-up polling every ``poll_seconds`` until ``launch_timeout_seconds`` in up to
    ``max_rounds`` rounds cannot fit an execution's history, or None. ``poll_seconds`` is whole seconds
    (a Wait state's), at least 1."""
    if poll_seconds < 1:
        return f"at least 1 s between launch checks (a Wait state's whole seconds), got {poll_seconds:g}"
    events = scale_up_events(launch_timeout_seconds, poll_seconds, max_rounds)
    if events <= LOOP_EVENTS:
        return None
    checks = poll_count(launch_timeout_seconds, poll_seconds)
    return (
        f"{poll_seconds:g} s between launch checks makes up to {checks} checks of a group before the "
        f"{launch_timeout_seconds:g} s launch timeout; {max_rounds} round(s) of up to {MAX_SCALE_UP_GROUPS} "
        f"groups make {events} events, more than the {LOOP_EVENTS} of an execution's history "
        f"({HISTORY_EVENTS} events) its loops may use: poll less often, shorten the launch timeout or "
        "lower the rounds"
    )
