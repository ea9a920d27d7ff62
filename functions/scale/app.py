"""Scale Lambda: one step of the ScaleUp state machine per invocation, chosen by ``action``.

``prepare`` (uncordon, read the live group), ``set_desired`` (groups outside the state machine's own
region), ``verify`` (launch done, failed or timed out), ``backoff`` (back off, set back to what runs) and
``next_round`` (re-plan for overflow); and the GangLaunch state machine's ``gang_*`` steps
(:class:`spillway.act.gang.GangSteps`: prepare, launch, raise, attach, verify, give_back), within the
invocation's remaining time (:mod:`spillway.act.deadline`). Thin: the work is :class:`spillway.act.scale.ScaleSteps`; errors
are Spillway's named errors (``AwsThrottled``, ``AsgLimitExceeded``, ``KubeUnavailable`` ...), whose
class names the state machine's Retry/Catch match.

Metrics (EMF): AnsweredErrors (an error the state machine retries or catches by name), Uncordoned, GroupsBackedOff, GangsLaunched, GangsGivenBack, and from a re-plan ScaleUpNodes, Overflow, UnplaceablePods, GangPodsHeldAtHome.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spillway.clients import Clients, get_clients
from spillway.errors import STEP_ANSWERS
from spillway.observability import (
    add_count,
    counting_answers,
    logger,
    metrics,
    redacting,
    set_cluster,
    tracer,
)


def scale_step(
    clients: Clients, event: dict[str, Any], remaining_ms: Callable[[], int] | None = None
) -> dict[str, Any]:
    action = str(event.get("action", "")) if isinstance(event, dict) else ""  # the steps refuse a non-object
    if action.startswith("gang_"):
        result = clients.gang_steps(add_count, remaining_ms).run(event)
        group = event.get("group") or (event.get("state") or {}).get("group")
    else:
        result = clients.scale_steps(add_count, remaining_ms).run(event)
        group = (event.get("group") or {}).get("group")
    logger.info("scale step", extra={"action": event.get("action"), "group": group, "result": result})
    return result


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
@redacting
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # first thing: the invocation's start, where Lambda stamps Errors (a cold start's clients take seconds)
    with counting_answers("scale", STEP_ANSWERS["scale"]):
        clients = get_clients()
        set_cluster(clients.config.cluster_name)
        # the steps ask AWS nothing they could not finish before the function's timeout
        return scale_step(clients, event, getattr(context, "get_remaining_time_in_millis", None))
