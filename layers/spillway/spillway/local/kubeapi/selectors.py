"""Label selectors (query-string and ``metav1.LabelSelector`` forms) and field selectors.

The query syntax is the one ``labels.Parse`` accepts: comma-joined requirements ``k=v``, ``k==v``,
``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k`` (exists), ``!k`` (does not exist), ``k>n``, ``k<n``.
Field selectors accept ``f=v``, ``f==v``, ``f!=v`` on the fields the real API indexes for each kind;
any other field is refused with 400 ``field label not supported``, as the real server does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from spillway.local.kubeapi.status import bad_request
from spillway.model.quantity import is_digits

JsonObj = dict[str, Any]

_KEY = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_SET_TERM = re.compile(r"^(?P<key>[^\s!=<>(),]+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", ">", "<"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if not present:
            return False
        try:
            number, bound = int(str(value)), int(next(iter(self.values)))
        except ValueError:
            return False
        return number > bound if self.op == ">" else number < bound


LabelQuery = tuple[Requirement, ...]


def _split_terms(text: str) -> list[str]:
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return [t.strip() for t in terms]


def _check_key(key: str, term: str) -> str:
    if not _KEY.match(key):
        raise bad_request(f"unable to parse requirement: invalid label key {key!r} in {term!r}")
    return key


def parse_label_selector(text: str | None) -> LabelQuery:
    """Parse a ``labelSelector`` query value; raises a 400 :class:`KubeApiError` when malformed."""
    if not text or not text.strip():
        return ()
    reqs: list[Requirement] = []
    for term in _split_terms(text):
        if not term:
            raise bad_request(f"unable to parse requirement: empty requirement in {text!r}")
        match = _SET_TERM.match(term)
        if match:
            values = frozenset(v.strip() for v in match["values"].split(",") if v.strip())
            reqs.append(Requirement(_check_key(match["key"], term), match["op"], values))
            continue
        for op in ("!=", "==", "=", ">", "<"):
            if op in term:
                key, _, value = term.partition(op)
                if any(c in value for c in "=!<>(), "):
                    raise bad_request(f"unable to parse requirement: invalid value in {term!r}")
                if op in (">", "<") and not is_digits(value.strip().removeprefix("-")):
                    raise bad_request(f"unable to parse requirement: {term!r}: for '{op}' a number is needed")
                reqs.append(
                    Requirement(_check_key(key.strip(), term), "=" if op == "==" else op, frozenset([value]))
                )
                break
        else:
            if term.startswith("!"):
                reqs.append(Requirement(_check_key(term[1:].strip(), term), "!"))
            else:
                reqs.append(Requirement(_check_key(term, term), "exists"))
    return tuple(reqs)


def labels_match(query: LabelQuery, labels: Mapping[str, str] | None) -> bool:
    labels = labels or {}
    return all(req.matches(labels) for req in query)


def label_selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """``metav1.LabelSelector`` semantics: a null selector matches nothing, an empty one everything."""
    if selector is None:
        return False
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator"), set(expr.get("values") or [])
        if op == "In" and not (key in labels and labels[key] in values):
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True


# --- field selectors ---------------------------------------------------------------------------


def _path(*keys: str) -> Callable[[JsonObj], str]:
    def get(obj: JsonObj) -> str:
        value: Any = obj
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return get


def _flag(*keys: str) -> Callable[[JsonObj], str]:
    """A boolean field as the API indexes it: ``fmt.Sprint``/``strconv.FormatBool`` of a Go ``bool``,
    so a field left out (its zero value) reads ``false`` (kubernetes/kubernetes
    pkg/registry/core/node/strategy.go NodeToSelectableFields, pkg/registry/core/pod/strategy.go
    ToSelectableFields)."""
    read = _path(*keys)

    def get(obj: JsonObj) -> str:
        return "true" if read(obj) == "true" else "false"

    return get


_COMMON = {"metadata.name": _path("metadata", "name"), "metadata.namespace": _path("metadata", "namespace")}
_INVOLVED = {
    f"involvedObject.{f}": _path("involvedObject", f)
    for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
}
FIELDS: dict[str, dict[str, Callable[[JsonObj], str]]] = {
    "Pod": {
        **_COMMON,
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.restartPolicy": _path("spec", "restartPolicy"),
        "spec.schedulerName": _path("spec", "schedulerName"),
        "spec.serviceAccountName": _path("spec", "serviceAccountName"),
        "spec.hostNetwork": _flag("spec", "hostNetwork"),
        "status.phase": _path("status", "phase"),
        "status.podIP": _path("status", "podIP"),
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
    },
    "Node": {**_COMMON, "spec.unschedulable": _flag("spec", "unschedulable")},
    "PodDisruptionBudget": dict(_COMMON),
    "Namespace": {**_COMMON, "status.phase": _path("status", "phase")},
    "Event": {
        **_COMMON,
        **_INVOLVED,
        # the same fields under their events.k8s.io/v1 names
        **{k.replace("involvedObject.", "regarding."): v for k, v in _INVOLVED.items()},
        "reason": _path("reason"),
        "reportingComponent": _path("reportingComponent"),
        "reportingController": _path("reportingComponent"),
        "source": _path("source", "component"),
        "type": _path("type"),
    },
}

FieldQuery = tuple[tuple[Callable[[JsonObj], str], bool, str], ...]  # (getter, equal?, value)


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, cur, i = [], [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            cur.append(text[i : i + 2])
            i += 2
            continue
        if ch == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return parts


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def parse_field_selector(text: str | None, kind: str) -> FieldQuery:
    """Parse a ``fieldSelector`` for a store kind; 400 on syntax errors or unsupported fields."""
    if not text or not text.strip():
        return ()
    fields = FIELDS.get(kind, _COMMON)
    out: list[tuple[Callable[[JsonObj], str], bool, str]] = []
    for term in _split_unescaped(text, ","):
        term = term.strip()
        if "!=" in term:
            name, _, value = term.partition("!=")
            equal = False
        elif "==" in term:
            name, _, value = term.partition("==")
            equal = True
        elif "=" in term:
            name, _, value = term.partition("=")
            equal = True
        else:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        getter = fields.get(name.strip())
        if getter is None:
            raise bad_request(f"field label not supported: {name.strip()}")
        out.append((getter, equal, _unescape(value.strip())))
    return tuple(out)


def fields_match(query: FieldQuery, obj: JsonObj) -> bool:
    return all((getter(obj) == value) == equal for getter, equal, value in query)
