"""cluster-autoscaler's priority expander: its ConfigMap, and the priorities it holds.

cluster-autoscaler (``--expander=priority``) reads the ConfigMap ``cluster-autoscaler-priority-expander``
in its own namespace (``kube-system`` by default); its ``data.priorities`` is YAML mapping an integer
priority to a list of regular expressions over node group names (a higher number wins; a group
matching none has no priority)::

    priorities: |-
      10:
        - .*t2\\.large.*
      50:
        - .*p4d.*

Spillway takes the same block from its configuration (``expander_priorities``) or, without one, from
that ConfigMap (observe reads it; the planner ranks groups with it: :mod:`spillway.planner.expander`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

CONFIGMAP_NAME = "cluster-autoscaler-priority-expander"
CONFIGMAP_NAMESPACE = "kube-system"

Priorities = dict[int, tuple[str, ...]]


def check_priorities(value: Mapping[Any, Any]) -> Priorities:
    """The priorities as ``{int: (regex, ...)}``; ``ValueError`` naming what is wrong."""
    out: Priorities = {}
    for key, patterns in value.items():
        try:
            priority = int(key)
        except (TypeError, ValueError):
            raise ValueError(f"{str(key)[:32]!r} is not an integer priority") from None
        if isinstance(patterns, str) or not isinstance(patterns, list | tuple):
            raise ValueError(f"priority {priority}: expected a list of regular expressions")
        for pattern in patterns:
            try:
                re.compile(str(pattern))
            except re.error as exc:
                raise ValueError(
                    f"priority {priority}: {str(pattern)[:64]!r} is not a regular expression: {exc}"
                ) from None
        out[priority] = tuple(str(p) for p in patterns)
    return out


def parse_priorities(text: str) -> Priorities:
    """The ConfigMap's ``data.priorities`` (YAML); ``ValueError`` naming what is wrong."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(
            f"not YAML: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None
    if not isinstance(doc, dict):
        raise ValueError("expected a mapping of priorities to lists of regular expressions")
    return check_priorities(doc)


def priority_of(priorities: Mapping[int, tuple[str, ...]], group: str) -> int | None:
    """The highest priority whose regexes match the group's name (searched anywhere in it, as Go's
    ``regexp.MatchString`` does), or None when none does."""
    matching = [p for p, patterns in priorities.items() if any(re.search(x, group) for x in patterns)]
    return max(matching, default=None)
