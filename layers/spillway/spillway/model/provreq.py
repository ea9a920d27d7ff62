"""ProvisioningRequests (``autoscaling.x-k8s.io/v1``, or ``v1beta1`` where the CRD serves it alone),
distilled for the planner.

A ProvisioningRequest asks for capacity for pods that do not exist yet: ``spec.podSets[]`` names
PodTemplates of its namespace (``podTemplateRef.name``) and how many pods of each (``count``);
``spec.provisioningClassName`` says how (see README, "ProvisioningRequest"); ``spec.parameters`` is a
string map (Spillway reads ``ValidUntilSeconds``, ``noRetry`` and ``processorInstance``). Its
``status.conditions`` are ``metav1.Condition`` s (``type``, ``status``, ``observedGeneration``,
``lastTransitionTime``, ``reason``, ``message``) and ``status.provisioningClassDetails`` a string map.

:func:`request_info` reads the raw objects (dicts, as a custom-resource list returns them) and never
raises: a request whose template is missing or unreadable keeps the problem in
:attr:`PodSetInfo.problem`, and the planner fails it with that reason.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from spillway.model.cluster import PodInfo, format_time, parse_time
from spillway.model.k8s import Pod

GROUP = "autoscaling.x-k8s.io"
VERSION = "v1"
# read in this order, the first one served (observe): cluster-autoscaler's CRD served v1beta1 alone before
# v1 came (apis/provisioningrequest/autoscaling.x-k8s.io/v1beta1/types.go, introduced 1.29.0), with the
# spec and status v1 copied, so a request reads the same through either; its status is written back
# through the version it was read with (ProvisioningRequestInfo.version)
VERSIONS = (VERSION, "v1beta1")
PLURAL = "provisioningrequests"
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
BEST_EFFORT_ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CLASSES = (CHECK_CAPACITY, BEST_EFFORT_ATOMIC)
VALID_UNTIL = "ValidUntilSeconds"
# check-capacity: "true" fails a request that does not fit instead of checking it again; "false" (the
# default) or anything else keeps it (cluster-autoscaler provisioningrequest/checkcapacity
# provisioningclass.go, NoRetryParameterKey: only the exact string "true" is read as set)
NO_RETRY = "noRetry"
# check-capacity: names the cluster-autoscaler instance (--check-capacity-processor-instance) that serves
# the request; one run without an instance, as Spillway is, leaves a request naming any alone, and an
# empty value is none (cluster-autoscaler provisioningrequest/supported_classes.go,
# CheckCapacityProcessorInstanceKey, SupportedCheckCapacityClass)
PROCESSOR_INSTANCE = "processorInstance"
# status.conditions types
ACCEPTED = "Accepted"
PROVISIONED = "Provisioned"
FAILED = "Failed"
BOOKING_EXPIRED = "BookingExpired"
CAPACITY_REVOKED = "CapacityRevoked"
TERMINAL = (FAILED, BOOKING_EXPIRED, CAPACITY_REVOKED)  # True: nothing more happens to the request
NOT_FOUND = " not found"  # the end of a pod set's problem when its PodTemplate does not exist
NODE_LABEL = "spillway.io/provisioning-request"  # on nodes launched for a request
# status.provisioningClassDetails keys naming that label (Kueue: valueFromProvisioningClassDetail)
DETAIL_LABEL_KEY = "NodeSelectorKey"
DETAIL_LABEL_VALUE = "NodeSelectorValue"

_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def label_value(namespace: str, name: str) -> str:
    """The node label value naming a request: ``<namespace>.<name>``, or, when that is not a valid
    label value (over 63 characters), its first 54 characters and a hash of the whole."""
    whole = f"{namespace}.{name}"
    if _LABEL_VALUE.match(whole):
        return whole
    digest = hashlib.sha256(whole.encode()).hexdigest()[:8]
    return f"{whole[:54].rstrip('-_.')}-{digest}"


@dataclass(frozen=True, slots=True)
class ConditionInfo:
    """A ``metav1.Condition`` as the API holds it."""

    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str = ""
    message: str = ""
    last_transition_time: datetime | None = None
    observed_generation: int = 0

    def to_api(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "status": self.status,
            "observedGeneration": self.observed_generation,
            "lastTransitionTime": format_time(self.last_transition_time),
            "reason": self.reason,
            "message": self.message,
        }

    def to_dict(self) -> list[Any]:
        return [
            self.type,
            self.status,
            self.reason,
            self.message,
            format_time(self.last_transition_time),
            self.observed_generation,
        ]

    @classmethod
    def from_dict(cls, d: Sequence[Any]) -> ConditionInfo:
        t, s, r, m, ltt, g = d
        return cls(t, s, r, m, parse_time(ltt), int(g))


@dataclass(frozen=True, slots=True)
class PodSetInfo:
    """One ``spec.podSets[]`` entry: ``count`` pods shaped like its PodTemplate (``pod``), or why not."""

    template: str
    count: int
    pod: PodInfo | None = None
    problem: str = ""
    # the template's Pod, until its pod topology is matched against the cluster's pods (spillway.model.templates)
    source: Pod | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"t": self.template, "c": self.count}
        if self.pod is not None:
            out["p"] = self.pod.to_dict()
        if self.problem:
            out["x"] = self.problem
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PodSetInfo:
        pod = d.get("p")
        return cls(
            template=str(d.get("t", "")),
            count=int(d.get("c", 0)),
            pod=PodInfo.from_dict(pod) if pod else None,
            problem=str(d.get("x", "")),
        )


@dataclass(frozen=True, slots=True)
class ProvisioningRequestInfo:
    namespace: str
    name: str
    uid: str = ""
    generation: int = 0
    class_name: str = ""
    pod_sets: tuple[PodSetInfo, ...] = ()
    parameters: Mapping[str, str] = field(default_factory=dict)
    conditions: tuple[ConditionInfo, ...] = ()
    details: Mapping[str, str] = field(default_factory=dict)
    created_at: datetime | None = None
    version: str = VERSION  # the API version it was read through: its status is written back through it

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def count(self) -> int:
        return sum(s.count for s in self.pod_sets)

    def condition(self, type_: str) -> ConditionInfo | None:
        return next((c for c in self.conditions if c.type == type_), None)

    def is_true(self, type_: str) -> bool:
        cond = self.condition(type_)
        return cond is not None and cond.status == "True"

    @property
    def served(self) -> bool:
        """Whether Spillway serves the request: one of the two standard classes, and for check-capacity no
        :data:`PROCESSOR_INSTANCE` naming another processor. Any other request belongs to another
        autoscaler: no conditions written, nothing booked (its consumers are still no demand)."""
        if self.class_name == CHECK_CAPACITY:
            return not self.parameters.get(PROCESSOR_INSTANCE)
        return self.class_name == BEST_EFFORT_ATOMIC

    @property
    def problem(self) -> str:
        """Why its pods cannot be known (no pod sets, a missing template...), else ``""``."""
        if not self.pod_sets:
            return "spec.podSets is empty"
        return "; ".join(s.problem for s in self.pod_sets if s.problem)

    @property
    def templates_missing_only(self) -> bool:
        """Its only problem is PodTemplates not found (yet: Kueue creates them just after the request)."""
        problems = [s.problem for s in self.pod_sets if s.problem]
        return bool(problems) and all(
            p.startswith("PodTemplate ") and p.endswith(NOT_FOUND) for p in problems
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ns": self.namespace,
            "n": self.name,
            "cls": self.class_name,
            "ps": [s.to_dict() for s in self.pod_sets],
        }
        optional: dict[str, Any] = {
            "uid": self.uid,
            "gen": self.generation,
            "par": dict(self.parameters),
            "cond": [c.to_dict() for c in self.conditions],
            "det": dict(self.details),
            "c": format_time(self.created_at),
            "v": self.version if self.version != VERSION else "",
        }
        out.update({k: v for k, v in optional.items() if v})
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ProvisioningRequestInfo:
        return cls(
            namespace=d["ns"],
            name=d["n"],
            uid=str(d.get("uid", "")),
            generation=int(d.get("gen", 0)),
            class_name=str(d.get("cls", "")),
            pod_sets=tuple(PodSetInfo.from_dict(s) for s in d.get("ps", ())),
            parameters=dict(d.get("par", {})),
            conditions=tuple(ConditionInfo.from_dict(c) for c in d.get("cond", ())),
            details=dict(d.get("det", {})),
            created_at=parse_time(d.get("c")),
            version=str(d.get("v") or VERSION),
        )


# --- reading the raw objects ------------------------------------------------------------------


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text_map(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in _map(value).items() if isinstance(v, str | int | float)}


def _time(value: Any) -> datetime | None:
    try:
        return parse_time(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _conditions(status: Mapping[str, Any]) -> tuple[ConditionInfo, ...]:
    out: list[ConditionInfo] = []
    for raw in status.get("conditions") or ():
        cond = _map(raw)
        if not isinstance(cond.get("type"), str):
            continue
        out.append(
            ConditionInfo(
                type=cond["type"],
                status=str(cond.get("status", "Unknown")),
                reason=str(cond.get("reason") or ""),
                message=str(cond.get("message") or ""),
                last_transition_time=_time(cond.get("lastTransitionTime")),
                observed_generation=_int(cond.get("observedGeneration")),
            )
        )
    return tuple(out)


def pending_info(pod: Pod) -> PodInfo:
    """A template's pod as the planner sees a pending pod."""
    info = PodInfo.from_pod(pod)
    return replace(info, unschedulable=True, uid="", phase="Pending", owner_is_controller=True)


def template_pod_object(template: Mapping[str, Any], namespace: str, name: str) -> tuple[Pod | None, str]:
    """The Pod a PodTemplate object (``template.spec``) makes, or why it cannot be made."""
    body = _map(template.get("template"))
    if not isinstance(body.get("spec", {}), Mapping):  # not a pod's spec: its pods are unknown, not empty
        return None, f"PodTemplate {namespace}/{template_name(template)}: template.spec: not an object"
    raw = {
        "metadata": {**_map(body.get("metadata")), "name": name, "namespace": namespace},
        "spec": _map(body.get("spec")),
    }
    try:
        pod = Pod.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return None, f"PodTemplate {namespace}/{template_name(template)}: template.{where}: {first['msg']}"
    if pod.refused_quantities:  # what its pods ask for is not known (an annotation refused is unset)
        return (
            None,
            f"PodTemplate {namespace}/{template_name(template)}: template.{pod.refused_quantities[0]}",
        )
    return pod, ""


def template_name(template: Mapping[str, Any]) -> str:
    return str(_map(template.get("metadata")).get("name", ""))


def request_info(
    obj: Mapping[str, Any],
    templates: Mapping[tuple[str, str], Mapping[str, Any]],
    version: str = VERSION,
) -> ProvisioningRequestInfo | None:
    """A raw ProvisioningRequest as the planner needs it; None for an object without a name. Its
    ``version`` is the one its ``apiVersion`` names, else ``version`` (the one it was listed through)."""
    meta, spec, status = _map(obj.get("metadata")), _map(obj.get("spec")), _map(obj.get("status"))
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return None
    namespace = str(meta.get("namespace") or "default")
    return ProvisioningRequestInfo(
        namespace=namespace,
        name=name,
        uid=str(meta.get("uid") or ""),
        generation=_int(meta.get("generation")),
        class_name=str(spec.get("provisioningClassName") or ""),
        pod_sets=_pod_sets(namespace, name, spec.get("podSets"), templates),
        parameters=_text_map(spec.get("parameters")),
        conditions=_conditions(status),
        details=_text_map(status.get("provisioningClassDetails")),
        created_at=_time(meta.get("creationTimestamp")),
        version=_version(obj.get("apiVersion"), version),
    )


def _version(api_version: Any, default: str) -> str:
    """The version of an ``autoscaling.x-k8s.io/<version>`` apiVersion, else ``default``."""
    if isinstance(api_version, str) and api_version.startswith(GROUP + "/"):
        return api_version[len(GROUP) + 1 :] or default
    return default


def _pod_sets(
    namespace: str, request: str, raw: Any, templates: Mapping[tuple[str, str], Mapping[str, Any]]
) -> tuple[PodSetInfo, ...]:
    if raw is not None and not isinstance(raw, list):  # the CRD's schema holds a list: a hand-made file
        return (PodSetInfo("", 0, problem="spec.podSets must be a list of pod sets"),)
    return tuple(_pod_set(namespace, request, i, _map(item), templates) for i, item in enumerate(raw or ()))


def _pod_set(
    namespace: str,
    request: str,
    index: int,
    raw: Mapping[str, Any],
    templates: Mapping[tuple[str, str], Mapping[str, Any]],
) -> PodSetInfo:
    ref = str(_map(raw.get("podTemplateRef")).get("name") or "")
    count = _int(raw.get("count"))
    if count < 1:
        return PodSetInfo(ref, 0, problem=f"spec.podSets[{index}].count must be at least 1")
    if not ref:
        return PodSetInfo(ref, count, problem=f"spec.podSets[{index}].podTemplateRef.name is missing")
    template = templates.get((namespace, ref))
    if template is None:
        return PodSetInfo(ref, count, problem=f"PodTemplate {namespace}/{ref}{NOT_FOUND}")
    pod, problem = template_pod_object(template, namespace, f"{request}[{index}]")
    if pod is None:
        return PodSetInfo(ref, count, problem=problem)
    return PodSetInfo(ref, count, pod=pending_info(pod), source=pod)


def from_list(doc: Any) -> tuple[ProvisioningRequestInfo, ...]:
    """The requests of a Kubernetes List as ``kubectl get ...,provisioningrequests,podtemplates -A -o
    json`` prints it (``ProvisioningRequest`` items of ``autoscaling.x-k8s.io``, ``PodTemplate`` items of
    the core group), with their templates resolved. Other items are not looked at; never raises."""
    items = doc.get("items") if isinstance(doc, Mapping) else None
    if not isinstance(items, list):
        return ()
    list_kind = str(doc.get("kind") or "")
    default_kind = list_kind[: -len("List")] if list_kind.endswith("List") and list_kind != "List" else ""
    default = (default_kind, str(doc.get("apiVersion") or "") if default_kind else "")
    found: dict[str, list[Mapping[str, Any]]] = {"ProvisioningRequest": [], "PodTemplate": []}
    for item in items:
        kind = _ours(item, default)
        if kind:
            found[kind].append(item)
    requests = found["ProvisioningRequest"]
    return request_infos(requests, found["PodTemplate"]) if requests else ()


def _ours(item: Any, default: tuple[str, str]) -> str:
    """``ProvisioningRequest`` or ``PodTemplate`` when the List item is one of those, else ``""``."""
    if not isinstance(item, Mapping):
        return ""
    kind = str(item.get("kind") or default[0])
    version = str(item.get("apiVersion") or default[1])
    if kind == "ProvisioningRequest" and version.startswith(GROUP + "/"):
        return kind
    return kind if kind == "PodTemplate" and version == "v1" else ""


def request_infos(
    requests: Sequence[Mapping[str, Any]], templates: Sequence[Mapping[str, Any]], version: str = VERSION
) -> tuple[ProvisioningRequestInfo, ...]:
    """Every readable request, with its templates resolved, sorted by namespace and name; ``version``:
    the one they were listed through (an item's own ``apiVersion`` comes first)."""
    by_name: dict[tuple[str, str], Mapping[str, Any]] = {}
    for t in templates:
        meta = _map(t.get("metadata"))
        by_name[(str(meta.get("namespace") or "default"), str(meta.get("name") or ""))] = t
    infos = (request_info(r, by_name, version) for r in requests if isinstance(r, Mapping))
    return tuple(sorted((i for i in infos if i is not None), key=lambda i: (i.namespace, i.name)))
