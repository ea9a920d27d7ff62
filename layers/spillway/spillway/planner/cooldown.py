"""Scale-down's waits after its own past actions: cluster-autoscaler's ``--scale-down-delay-after-delete``
and ``--scale-down-delay-after-failure``.

cluster-autoscaler remembers when it last started deleting nodes and when a scale-down last failed, and
while either time plus its delay is ahead it deletes nothing (``isScaleDownInCooldown`` in
cluster-autoscaler/core/static_autoscaler.go; the defaults are its scan interval and 3 minutes, FAQ
"What are the parameters to CA?"). It still finds its unneeded nodes meanwhile, so their timers go on.
Spillway keeps both times in the state (``State.scale_down``): ``deleted`` is this planner's own (a
plan that drains a node to remove it), ``failed`` the drain's (:meth:`spillway.act.drain.Drainer.record`
writes a failed plan drain, and the state store merges it in at load). Pure: times come in the state.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from spillway.model.state import ScaleDownMark, Since
from spillway.planner import codes
from spillway.planner.context import Context, aware, minutes
from spillway.planner.types import Drain

Verdict = tuple[str, str] | None

# State.scale_down's marks, the setting that makes scale-down wait after each, and what happened then
COOLDOWNS: tuple[tuple[ScaleDownMark, str, str], ...] = (
    ("deleted", "scale_down_delay_after_delete_minutes", "a plan drained a node to remove it"),
    ("failed", "scale_down_delay_after_failure_minutes", "a plan's scale-down drain failed"),
)


def cooldown(ctx: Context) -> Verdict:
    """Why no node is drained to remove it now: scale-down waits after a plan that removed a node
    (``scale_down_delay_after_delete_minutes``) and after a plan's scale-down drain failed
    (``scale_down_delay_after_failure_minutes``), as cluster-autoscaler skips deletions while
    ``lastScaleDownDeleteTime`` or ``lastScaleDownFailTime`` plus its delay is ahead (static_autoscaler.go,
    ``isScaleDownInCooldown``). Like cluster-autoscaler, which still finds its unneeded nodes then, the
    idle and underutilized timers go on; the wait that ends last is named."""
    waits = []
    for mark, setting, what in COOLDOWNS:
        entry = ctx.state.scale_down.get(mark)
        delay = timedelta(minutes=getattr(ctx.config, setting))
        if entry is not None and ctx.now < aware(entry.since) + delay:
            waits.append((aware(entry.since) + delay, mark, setting, what, aware(entry.since)))
    if not waits:
        return None
    ends, _, setting, what, since = max(waits)
    ago = f"{minutes(ctx.now - since)} ago" if since <= ctx.now else "at a time ahead of the plan's"
    return (
        codes.SCALE_DOWN_COOLDOWN,
        f"{what} {ago}: scale-down waits {minutes(ends - ctx.now)} more ({setting})",
    )


def scale_down_marks(ctx: Context, drains: Sequence[Drain]) -> dict[ScaleDownMark, Since]:
    """The next state's ``scale_down``: each mark still within its delay, and ``deleted`` now when this
    plan drains a node to remove it (a make-room drain keeps its node) and the delay is set."""
    marks: dict[ScaleDownMark, Since] = {}
    for mark, setting, _ in COOLDOWNS:
        entry = ctx.state.scale_down.get(mark)
        if entry is not None and ctx.now < aware(entry.since) + timedelta(
            minutes=getattr(ctx.config, setting)
        ):
            marks[mark] = entry
    if ctx.config.scale_down_delay_after_delete_minutes > 0 and any(d.terminate for d in drains):
        marks["deleted"] = Since(since=ctx.now)
    return dict(sorted(marks.items()))
