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

Both are read as cluster-autoscaler reads its ConfigMap (expander/priority/priority.go): the YAML
unmarshalled into ``map[int][]string`` by gopkg.in/yaml.v2, each regex compiled by Go's ``regexp``
(RE2 syntax, regexp/syntax/parse.go), a group matching a regex found anywhere in its name
(``FindStringIndex``). One reader, :mod:`spillway.model.goregex`, parses each pattern as Go does and
matches it as Go's regexp does, in time linear in the name (it also writes it out for Python's re:
:func:`python_pattern`, which backtracks, and so is not what matches). What Go cannot read,
or Python cannot read as Go does (Unicode classes), refuses the whole block, naming the priority and the
pattern's index: cluster-autoscaler too drops the whole ConfigMap then.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import yaml

from spillway.model.goregex import GoRegexError, check, compiled, python_pattern

__all__ = [
    "check_priorities",
    "configmap_priorities",
    "parse_priorities",
    "priority_of",
    "python_pattern",
    "re2_refusal",
]

CONFIGMAP_NAME = "cluster-autoscaler-priority-expander"
CONFIGMAP_NAMESPACE = "kube-system"
CONFIGMAP_KEY = "priorities"  # priority.go ConfigMapKey
# priority.go BestOptions: the best priority starts at -1 and a lower one is skipped, so a group whose
# highest match is below it ranks as one no regex matches
LOWEST_PRIORITY = -1

Priorities = dict[int, tuple[str, ...]]

# Go's int on the 64-bit platforms cluster-autoscaler runs on: yaml.v2 refuses a key outside it
INT64 = 2**63
_DECIMAL = re.compile(r"[+-]?[0-9]+")  # a JSON object's key: the priority written out


def check_priorities(value: Mapping[Any, Any], *, text_keys: bool = True) -> Priorities:
    """The priorities as ``{int: (regex, ...)}``; ``ValueError`` naming the priority, and the pattern
    by its index, that cluster-autoscaler could not read: it refuses the whole ConfigMap then
    (priority.go's parsePrioritiesYAMLString), so no entry is skipped here either. ``text_keys``: a
    key may be a decimal string (a JSON configuration's); a YAML ConfigMap's may not (yaml.v2 does not
    unmarshal a ``!!str`` into an int)."""
    out: Priorities = {}
    for key, patterns in value.items():
        priority = _priority(key, text_keys)
        if priority in out:
            raise ValueError(f"priority {priority} is given twice")
        out[priority] = _patterns(priority, patterns)
    return out


def _priority(key: Any, text_keys: bool) -> int:
    """The key as yaml.v2 reads it into Go's int, but for a fractional number: yaml.v2 cuts 1.5 to 1,
    and two lists would silently become one; refused here."""
    if isinstance(key, bool):  # before int: a bool is one in Python; yaml.v2 refuses it
        raise ValueError(f"priority {key}: a boolean is not an integer priority (YAML reads true/false, "
                         "yes/no, on/off as booleans)")  # fmt: skip
    if isinstance(key, float):
        if not key.is_integer():
            cut = f" (cluster-autoscaler's yaml.v2 would cut it to {int(key)})" if math.isfinite(key) else ""
            raise ValueError(f"priority {key}: not a whole number{cut}")
        key = int(key)
    elif isinstance(key, str) and not text_keys:
        raise ValueError(f"priority {key[:32]!r}: a string, not an integer priority (unquote it)")
    elif isinstance(key, str) and _DECIMAL.fullmatch(key):
        key = int(key)
    if not isinstance(key, int):
        raise ValueError(f"{str(key)[:32]!r} is not an integer priority")
    if not -INT64 <= key < INT64:
        raise ValueError(f"priority {key}: outside a 64-bit integer")
    return key


def _patterns(priority: int, patterns: Any) -> tuple[str, ...]:
    """The priority's regexes, each read as Go reads it (:func:`re2_refusal`)."""
    if patterns is None:  # ``10:`` with nothing under it: yaml.v2 reads an empty list
        return ()
    if isinstance(patterns, str) or not isinstance(patterns, list | tuple):
        raise ValueError(f"priority {priority}: expected a list of regular expressions")
    for index, pattern in enumerate(patterns):
        where = f"priority {priority}, pattern {index}: {str(pattern)[:64]!r}"
        if not isinstance(pattern, str):  # yaml.v2 takes a scalar's text (``~``: ""), Python its value
            raise ValueError(f"{where} is not a string (quote it)")
        if why := re2_refusal(pattern):
            raise ValueError(f"{where} is not a regular expression Spillway can read as cluster-autoscaler "
                             f"does: it {why} (cluster-autoscaler compiles the patterns with Go's regexp)")  # fmt: skip
    return tuple(patterns)


def re2_refusal(pattern: str) -> str | None:
    r"""Why Spillway cannot match ``pattern`` as cluster-autoscaler's Go ``regexp`` does, or None when it
    can: Go refuses it (lookaround, backreferences, possessive quantifiers, ``\Z``, counts above 1000,
    ...; a tree above 1000 levels or a program above Go's 128 MB), or Python's re has no equivalent
    (Unicode classes ``\pL``). The one parser (:mod:`spillway.model.goregex`) says why."""
    try:
        check(pattern)
    except GoRegexError as exc:
        return str(exc)
    return None


def parse_priorities(text: str) -> Priorities:
    """The ConfigMap's ``data.priorities`` (YAML); ``ValueError`` naming what is wrong."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(
            f"not YAML: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None
    except RecursionError:  # PyYAML composes recursively; no map of priorities is nested anyway
        raise ValueError("not a mapping of priorities: nested too deeply") from None
    if doc is None:  # only whitespace, comments or null: yaml.v2 leaves the map empty, no error
        return {}
    if not isinstance(doc, dict):
        raise ValueError("expected a mapping of priorities to lists of regular expressions")
    return check_priorities(doc, text_keys=False)


def configmap_priorities(data: Mapping[str, str]) -> tuple[Priorities, str]:
    """The priorities in the ConfigMap's ``data``, and why none when cluster-autoscaler could not read
    them ("" when it could): no ``priorities`` key, an empty one, or what :func:`parse_priorities` says
    (priority.go reloadConfigMap and parsePrioritiesYAMLString). It then passes every option on to the
    next expander (BestOptions returns them all, since kubernetes/autoscaler#5246), as if there were no
    priorities: so do these, with why."""
    if CONFIGMAP_KEY not in data:
        return {}, f"no {CONFIGMAP_KEY} key (cluster-autoscaler reads its priorities there only)"
    if not data[CONFIGMAP_KEY]:
        return {}, "empty (cluster-autoscaler refuses an empty configuration)"
    try:
        return parse_priorities(data[CONFIGMAP_KEY]), ""
    except ValueError as exc:
        return {}, str(exc)


def priority_of(priorities: Mapping[int, tuple[str, ...]], group: str) -> int | None:
    """The highest priority whose regexes match the group's name (searched anywhere in it, as
    priority.go's ``FindStringIndex(id) != nil``, in time linear in the name as Go's regexp), or None
    when none does, or when that priority is below :data:`LOWEST_PRIORITY`: priority.go's filter starts
    its best priority there and passes over any lower one, so such a group is preferred to nothing."""
    matching = [p for p, patterns in priorities.items() if any(compiled(x).search(group) for x in patterns)]
    best = max(matching, default=None)
    return best if best is not None and best >= LOWEST_PRIORITY else None
