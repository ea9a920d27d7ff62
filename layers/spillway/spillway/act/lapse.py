"""Whether a scale-down part starts draining within its plan's claim on its nodes (the drain function's
``check_claim`` step of ``scale_down.asl.json``).

A plan too large for one execution input runs as parts, each draining once the part before it ended
(:func:`spillway.act.planning._down_batches`). The planner leaves a node it drained alone for
``drain_claim_minutes`` unless the drain has cordoned it (:meth:`spillway.planner.scaledown.ScaleDown.claimed_at`).
A part still waiting when that claim lapses would drain nodes later plans judge again (a second drain of
a node, one of them refused), on a premise as old: a consolidation's pods fit elsewhere when the plan ran.
So one rule: a part that has not started draining by ``claim_until`` drains nothing, and the next plan
judges its nodes again. A part that starts in time goes on; its drains cordon the nodes, which then
protect them.

The check is a Lambda step, not a Choice on ``$$.State.EnteredTime``: moto's interpreter, which the e2e
tests run, compares only whole-second ``Z`` timestamps and writes ``EnteredTime`` otherwise, so such a
Choice never fires there. ``now`` is that ``EnteredTime`` (AWS: milliseconds and ``Z``; moto: an offset).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from spillway.errors import InvalidDrainRequest


def check_claim(event: Mapping[str, Any]) -> dict[str, Any]:
    """``{"lapsed": bool, "reason": str}`` for a part entering its drains at ``now``, whose plan, made at
    ``planned_at``, claimed its ``nodes`` nodes for ``claim_minutes`` until ``claim_until``. Lapsed at
    ``claim_until`` exactly, as the planner counts it. :class:`InvalidDrainRequest` naming the field for a
    timestamp without a time zone or a malformed value (``planned_at`` and ``claim_minutes`` may be null:
    a part started by hand names no plan time)."""
    until = _timestamp(event, "claim_until")
    now = _timestamp(event, "now")
    planned = _timestamp(event, "planned_at") if event.get("planned_at") is not None else None
    minutes = event.get("claim_minutes")
    if minutes is not None and (isinstance(minutes, bool) or not isinstance(minutes, int | float)):
        raise InvalidDrainRequest(
            f"claim_minutes must be a number of minutes, got {minutes!r}", field="claim_minutes"
        )
    if now < until:
        return {"lapsed": False, "reason": ""}
    nodes = event.get("nodes")
    made = f"its plan, made at {event['planned_at']}," if planned is not None else "its plan"
    held = f" for drain_claim_minutes ({minutes:g})" if minutes is not None else ""
    count = f"its {nodes}" if isinstance(nodes, int) and not isinstance(nodes, bool) else "its"
    return {
        "lapsed": True,
        "reason": (
            f"{made} claimed its nodes{held} until {event['claim_until']}, and this part could start "
            f"draining only at {event['now']}, once the part before ended: it drained none of {count} "
            "node(s); the next plan judges them again"
        ),
    }


def _timestamp(event: Mapping[str, Any], field: str) -> datetime:
    """An RFC 3339 timestamp with its zone (``Z`` or an offset)."""
    value = event.get(field)
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) and "T" in value else None
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise InvalidDrainRequest(
            f"{field} must be an RFC 3339 timestamp with its time zone, got {value!r}", field=field
        )
    return parsed
