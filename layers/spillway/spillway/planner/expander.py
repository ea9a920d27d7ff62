"""Stage 3: the expander — which node groups get new nodes for a class, best first.

:func:`options` says which groups could ever run the class (a template node, constraints that allow
it, enough room on an empty node) and why each other group cannot; an :class:`Expander` orders the
groups that can. :class:`RegionThenLeastWaste` is the default: region preference (configured order),
then least waste of the class's dominant resource on the nodes it would need, then name. Another
strategy (price, priority lists, spot) is another class with the same ``order`` method.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from spillway.model.nodegroup import NodeGroup
from spillway.model.resources import Resources, describe, dominant_share, fit_count
from spillway.planner.classes import PodClass
from spillway.planner.context import Context
from spillway.planner.placement import UNBOUNDED


@dataclass(frozen=True, slots=True)
class Option:
    """A group that can run the class: ``per_node`` pods fit on one of its empty nodes."""

    group: NodeGroup
    empty: Resources
    per_node: int


class Expander(Protocol):
    def order(self, ctx: Context, cls: PodClass, choices: Sequence[Option]) -> list[NodeGroup]: ...


class RegionThenLeastWaste:
    """Preferred region first, then the group the class fills best, then the group's name."""

    def order(self, ctx: Context, cls: PodClass, choices: Sequence[Option]) -> list[NodeGroup]:
        keyed = [
            ((ctx.region_key(o.group), round(_waste(cls, o), 6), o.group.name), o.group) for o in choices
        ]
        keyed.sort(key=lambda kv: kv[0])
        return [group for _, group in keyed]


def _waste(cls: PodClass, option: Option) -> float:
    """The share of the dominant resource left unused on the nodes the remaining pods would need."""
    dominant, _ = dominant_share(cls.requests, option.empty)
    nodes_needed = math.ceil(cls.remaining / option.per_node)
    used = cls.remaining * cls.requests.get(dominant, 0)
    capacity = nodes_needed * option.empty.get(dominant, 1)
    return 1.0 - used / capacity if capacity else 1.0


def options(
    ctx: Context, cls: PodClass, empty: Mapping[str, Resources]
) -> tuple[list[Option], dict[str, str]]:
    """Groups whose template could run the class; and why each other group cannot."""
    fitting: list[Option] = []
    rejected: dict[str, str] = {}
    for group in ctx.groups:
        why = _rejection(cls, group, empty[group.name])
        if why is not None:
            rejected[group.name] = f"{group.name}: {why}"
        else:
            fitting.append(
                Option(group, empty[group.name], fit_count(cls.requests, empty[group.name], UNBOUNDED))
            )
    return fitting, rejected


def _rejection(cls: PodClass, group: NodeGroup, empty: Resources) -> str | None:
    template = group.template
    if template is None:
        return "instance type unknown, no template node"
    blocker = cls.blocker(template.labels, template.taints, None)
    if blocker is not None:
        return blocker
    if fit_count(cls.requests, empty, UNBOUNDED) > 0:
        return None
    short = [
        r
        for r in sorted(cls.requests)
        if cls.requests[r] > 0 and empty.get(r, 0) < cls.requests[r] and r != "ephemeral-storage"
    ]
    return (
        f"a {group.instance_type} node has too little "
        f"{', '.join(short) or 'room'} (needs {describe(cls.requests, short)})"
    )
