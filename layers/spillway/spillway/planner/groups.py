"""Facts about node groups the scale-up stages share: the room on a new node, and backoff."""

from __future__ import annotations

from datetime import timedelta

from spillway.model.nodegroup import NodeGroup
from spillway.model.resources import PODS, Resources, add_into, subtract
from spillway.planner.context import ONE_POD, Context, aware, iso, minutes
from spillway.planner.predicates import why_not_placeable


def daemonset_overhead(ctx: Context, group: NodeGroup) -> Resources:
    """What the DaemonSets that would run on a new node of the group request there."""
    total: Resources = {}
    template = group.template
    if template is None:
        return total
    for rep_key in sorted(ctx.ds_representatives):
        pod = ctx.ds_representatives[rep_key]
        terms = tuple(tuple(r for r in term if not r[3]) for term in pod.required_terms)
        if any(not term for term in terms):
            terms = ()  # the term only pinned the pod to its node by name
        if why_not_placeable(
            pod.node_selector, terms, pod.tolerations, template.labels, template.taints, None
        ):
            continue
        add_into(total, pod.requests)
        total[PODS] = total.get(PODS, 0) + ONE_POD
    return total


def empty_room(ctx: Context) -> dict[str, Resources]:
    """Per group, the free room of a new node once its DaemonSet pods run."""
    return {
        g.name: subtract(g.template.allocatable, daemonset_overhead(ctx, g)) if g.template else {}
        for g in ctx.groups
    }


def backoff_reason(ctx: Context, group: NodeGroup) -> str | None:
    """Why the group must not be asked for nodes now (backed off, or a launch failed lately), or None."""
    entry = ctx.state.groups.get(group.name)
    if entry is not None and aware(entry.backoff_until) > ctx.now:
        why = f" ({entry.reason})" if entry.reason else ""
        return f"{group.name} backed off until {iso(entry.backoff_until)}{why}"
    window = timedelta(minutes=ctx.config.launch_failure_backoff_minutes)
    recent = [f for f in group.launch_failures if aware(f.at) > ctx.now - window]
    if recent:
        last = recent[-1]
        message = last.message if len(last.message) <= 160 else last.message[:157] + "..."
        return f"{group.name} launch failed {minutes(ctx.now - aware(last.at))} ago: {message}"
    return None
