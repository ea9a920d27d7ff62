"""Scheduling predicates, as kube-scheduler applies them: node selector, required node affinity, taints.

Pure functions over labels, taints and a pod's constraints. Resources are checked elsewhere
(:mod:`spillway.model.resources`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from spillway.model.cluster import HOSTNAME_LABEL as HOSTNAME_LABEL  # the model's, re-exported
from spillway.model.cluster import Requirement, TaintT, Term, TolerationT

SCHEDULING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
# what kube-scheduler's NodeUnschedulable filter checks a cordoned node (spec.unschedulable) against
UNSCHEDULABLE_TAINT: TaintT = ("node.kubernetes.io/unschedulable", None, "NoSchedule")


def tolerates(toleration: TolerationT, taint: TaintT) -> bool:
    key, operator, value, effect = toleration
    taint_key, taint_value, taint_effect = taint
    if effect is not None and effect != taint_effect:
        return False
    if key is None or key == "":
        return operator == "Exists"  # an empty key with Exists tolerates everything
    if key != taint_key:
        return False
    if operator == "Exists":
        return True
    if operator in ("Lt", "Gt"):
        return _compares(operator, value, taint_value)
    return (value or "") == (taint_value or "")


_DECIMAL = re.compile(r"0|-?[1-9][0-9]*")
_INT64 = range(-(1 << 63), 1 << 63)


_GO_INT = re.compile(r"[+-]?[0-9]+")


def _parse_int(text: str | None) -> int | None:
    """``text`` as Go's ``strconv.ParseInt(text, 10, 64)`` reads it (an optional sign, ASCII digits,
    int64), which node affinity's Gt and Lt read both the label and the value with
    (k8s.io/apimachinery labels.Requirement.Matches); None where it fails. Python's ``int`` also takes
    ``5_0``, surrounding spaces and any size."""
    if text is None or not _GO_INT.fullmatch(text):
        return None
    digits = text.lstrip("+-").lstrip("0") or "0"
    if len(digits) > 19:  # beyond int64 (leading zeros aside), and not converted: int() refuses 4,300
        return None
    value = -int(digits) if text.startswith("-") else int(digits)
    return value if value in _INT64 else None


def _compares(operator: str, value: str | None, taint_value: str | None) -> bool:
    """A toleration ``Lt``/``Gt`` holds when the taint's value is below/above its own, both integers
    in canonical form within int64 (k8s.io/api core/v1 toleration.go, compareNumericValues with
    apimachinery's content.IsDecimalInteger: no sign but ``-``, no leading zero); else it does not."""
    numbers = []
    for text in (value or "", taint_value or ""):
        # 20 characters hold every int64 ("-" and 19 digits); int() refuses more than 4,300 digits
        if len(text) > 20 or not _DECIMAL.fullmatch(text) or int(text) not in _INT64:
            return False
        numbers.append(int(text))
    mine, theirs = numbers
    return theirs < mine if operator == "Lt" else theirs > mine


def untolerated_taint(tolerations: Sequence[TolerationT], taints: Sequence[TaintT]) -> TaintT | None:
    """The first NoSchedule/NoExecute taint no toleration covers, or None when the pod may land."""
    for taint in taints:
        if taint[2] not in SCHEDULING_EFFECTS:
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def admits(unschedulable: bool, taints: Sequence[TaintT], tolerations: Sequence[TolerationT]) -> bool:
    """kube-scheduler's NodeUnschedulable and TaintToleration filters: a cordoned node
    (``spec.unschedulable``) takes only a pod that tolerates ``node.kubernetes.io/unschedulable:NoSchedule``,
    and any node only a pod that tolerates its NoSchedule and NoExecute taints."""
    cordon = (UNSCHEDULABLE_TAINT,) if unschedulable else ()
    return untolerated_taint(tolerations, (*cordon, *taints)) is None


def preferred_against(tolerations: Sequence[TolerationT], taints: Sequence[TaintT]) -> int:
    """How many PreferNoSchedule taints no toleration covers: kube-scheduler's TaintToleration score
    ranks a node with fewer of them first (the taints never filter)."""
    return sum(
        1
        for taint in taints
        if taint[2] == "PreferNoSchedule" and not any(tolerates(t, taint) for t in tolerations)
    )


# a label value (apimachinery validation.IsValidLabelValue): at most 63 characters, alphanumeric at both ends
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def _parses(req: Requirement) -> bool:
    """Whether kube-scheduler can build the requirement: labels.NewRequirement refuses a value that is
    no label value whatever the operator, and the term's parse error makes it match no node
    (component-helpers nodeaffinity). The API server does not check these values."""
    return req[3] or all(_LABEL_VALUE.fullmatch(v) for v in req[2])


def _requirement_holds(req: Requirement, labels: Mapping[str, str], node_name: str | None) -> bool:
    key, operator, values, is_field = req
    if is_field:
        actual: str | None = node_name if key == "metadata.name" else None
    else:
        actual = labels.get(key)
    if operator == "In":
        return actual is not None and actual in values
    if operator == "NotIn":
        return actual is None or actual not in values
    if operator == "Exists":
        return actual is not None
    if operator == "DoesNotExist":
        return actual is None
    if operator in ("Gt", "Lt"):
        have, bound = _parse_int(actual), _parse_int(values[0]) if len(values) == 1 else None
        if have is None or bound is None:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def affinity_holds(terms: Sequence[Term], labels: Mapping[str, str], node_name: str | None) -> bool:
    """Required node affinity: terms are ORed, requirements in a term ANDed; an empty term matches nothing."""
    if not terms:
        return True
    return any(
        term and all(_parses(r) and _requirement_holds(r, labels, node_name) for r in term) for term in terms
    )


def selector_holds(selector: Sequence[tuple[str, str]], labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector)


def why_not_placeable(
    node_selector: Sequence[tuple[str, str]],
    terms: Sequence[Term],
    tolerations: Sequence[TolerationT],
    labels: Mapping[str, str],
    taints: Sequence[TaintT],
    node_name: str | None,
) -> str | None:
    """None when the constraints allow the node, else the first reason they do not."""
    for key, value in node_selector:
        if labels.get(key) != value:
            return f"nodeSelector {key}={value} does not match"
    if not affinity_holds(terms, labels, node_name):
        return "required node affinity does not match"
    taint = untolerated_taint(tolerations, taints)
    if taint is not None:
        taint_key, taint_value, effect = taint
        shown = f"{taint_key}={taint_value}" if taint_value else taint_key
        return f"taint {shown}:{effect} not tolerated"
    return None


def references_node_identity(node_selector: Sequence[tuple[str, str]], terms: Sequence[Term]) -> bool:
    """Constraints naming one node (hostname label or ``metadata.name`` field) cannot be judged per shape."""
    if any(k == HOSTNAME_LABEL for k, _ in node_selector):
        return True
    return any(r[3] or r[0] == HOSTNAME_LABEL for term in terms for r in term)
