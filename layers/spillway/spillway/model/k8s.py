"""Kubernetes objects as the API server returns them (the fields Spillway reads, nothing invented).

Parse a ``kubectl get nodes,pods,pdb -A -o json`` List with :func:`parse_kube_list`, or one object
with ``Node.model_validate(obj)``. Field names follow the API (``providerID``, ``nodeName``); unknown
fields are ignored so newer servers parse.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidatorFunctionWrapHandler,
    model_validator,
)
from pydantic.alias_generators import to_camel

from spillway.model.quantity import QuantityError, to_milli
from spillway.model.resources import Resources, add_into, parse_resource_list


def _check_quantity(value: str | int | float) -> str | int | float:
    to_milli(value)  # raises QuantityError (a ValueError): malformed, out of range or negative
    return value


Quantity = Annotated[str | int | float, AfterValidator(_check_quantity)]
QuantityMap = dict[str, Quantity]

CORDONED_BY_SPILLWAY = "spillway.io/cordoned"
DRAINING_TAINT = "spillway.io/draining"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
MIRROR_POD = "kubernetes.io/config.mirror"


class KubeModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


def _is_quantity_error(err: Any) -> bool:
    return err["type"] == "value_error" and isinstance(err.get("ctx", {}).get("error"), QuantityError)


def _without(data: Any, loc: tuple[int | str, ...]) -> Any:
    """``data`` with the value at ``loc`` removed, copying only the containers on the way."""
    key, rest = loc[0], loc[1:]
    copy: Any = dict(data) if isinstance(data, dict) else list(data)
    if rest:
        copy[key] = _without(data[key], rest)
    elif isinstance(copy, dict):
        del copy[key]
    return copy


def dotted(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc)


class RefusableModel(KubeModel):
    """A top-level object (Pod, Node) whose unusable quantities are refused one by one.

    A quantity that is malformed, out of Kubernetes' range or negative does not fail the object (nor
    the page of a list it arrived in): the entry is left out of its map and ``refused`` names each
    such field and why. Readers decide: the ``spillway plan`` input refuses the file
    (:func:`iter_kube_list`), observe leaves a pending pod out and logs it (see ``spillway.observe``).
    """

    _refused: tuple[str, ...] = PrivateAttr(default=())

    @property
    def refused(self) -> tuple[str, ...]:
        """``"<field>: <why>"`` for each quantity left out; empty for a clean object."""
        return self._refused

    @model_validator(mode="wrap")
    @classmethod
    def _refuse_bad_quantities(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(data)
        except ValidationError as exc:
            errors = exc.errors()
            if not isinstance(data, dict) or not all(_is_quantity_error(e) for e in errors):
                raise
            cleaned = data
            for err in errors:
                cleaned = _without(cleaned, err["loc"])
            obj = handler(cleaned)
            obj._refused = tuple(f"{dotted(e['loc'])}: {e['ctx']['error']}" for e in errors)
            return obj

    def describe(self) -> str:
        """``Pod ns/name`` or ``Node name``, for messages."""
        meta: ObjectMeta = getattr(self, "metadata")  # noqa: B009 - every subclass has one
        name = f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name
        return f"{type(self).__name__} {name}"


class OwnerReference(KubeModel):
    api_version: str = ""
    kind: str
    name: str
    uid: str = ""
    controller: bool | None = None


class ObjectMeta(KubeModel):
    name: str
    namespace: str | None = None
    uid: str = ""
    resource_version: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    owner_references: list[OwnerReference] = Field(default_factory=list)
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None


class Taint(KubeModel):
    key: str
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Toleration(KubeModel):
    key: str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None


class NodeSelectorRequirement(KubeModel):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: list[str] = Field(default_factory=list)


class NodeSelectorTerm(KubeModel):
    match_expressions: list[NodeSelectorRequirement] = Field(default_factory=list)
    match_fields: list[NodeSelectorRequirement] = Field(default_factory=list)


class NodeSelector(KubeModel):
    node_selector_terms: list[NodeSelectorTerm] = Field(default_factory=list)


class NodeAffinity(KubeModel):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None


class Affinity(KubeModel):
    node_affinity: NodeAffinity | None = None


class ResourceRequirements(KubeModel):
    requests: QuantityMap | None = None
    limits: QuantityMap | None = None


class Container(KubeModel):
    name: str = ""
    resources: ResourceRequirements | None = None
    restart_policy: str | None = None  # "Always" on an init container makes it a sidecar

    def requests(self) -> Resources:
        """Requests, defaulting to limits where only a limit is set (as the API server does)."""
        res = self.resources
        if res is None:
            return {}
        merged: dict[str, str | int | float] = dict(res.limits or {})
        merged.update(res.requests or {})
        return parse_resource_list(merged)


class PodSpec(KubeModel):
    node_name: str | None = None
    node_selector: dict[str, str] = Field(default_factory=dict)
    affinity: Affinity | None = None
    tolerations: list[Toleration] = Field(default_factory=list)
    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] = Field(default_factory=list)
    overhead: QuantityMap | None = None
    priority: int | None = None
    priority_class_name: str | None = None
    scheduler_name: str | None = None


class Condition(KubeModel):
    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_transition_time: datetime | None = None


class PodStatus(KubeModel):
    phase: str | None = None
    conditions: list[Condition] = Field(default_factory=list)
    start_time: datetime | None = None


class Pod(RefusableModel):
    kind: Literal["Pod"] = "Pod"
    metadata: ObjectMeta
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus = Field(default_factory=PodStatus)

    def effective_requests(self) -> Resources:
        """What the scheduler reserves for the pod.

        ``max(sum of app containers + sidecars, each plain init container + the sidecars started
        before it) + overhead`` — the formula of the scheduler since sidecar containers; without
        sidecars it is the classic ``max(sum(containers), max(init containers)) + overhead``.
        """
        total: Resources = {}
        for container in self.spec.containers:
            add_into(total, container.requests())
        init_peak: Resources = {}
        sidecars: Resources = {}
        for init in self.spec.init_containers:
            req = init.requests()
            if init.restart_policy == "Always":
                add_into(sidecars, req)
                candidate = dict(sidecars)
            else:
                candidate = dict(sidecars)
                add_into(candidate, req)
            for name, value in candidate.items():
                if value > init_peak.get(name, 0):
                    init_peak[name] = value
        add_into(total, sidecars)
        for name, value in init_peak.items():
            if value > total.get(name, 0):
                total[name] = value
        if self.spec.overhead:
            add_into(total, parse_resource_list(self.spec.overhead))
        return total


class NodeSpec(KubeModel):
    provider_id: str | None = Field(default=None, alias="providerID")
    unschedulable: bool = False
    taints: list[Taint] = Field(default_factory=list)


class NodeStatus(KubeModel):
    allocatable: QuantityMap = Field(default_factory=dict)
    capacity: QuantityMap = Field(default_factory=dict)
    conditions: list[Condition] = Field(default_factory=list)


class Node(RefusableModel):
    kind: Literal["Node"] = "Node"
    metadata: ObjectMeta
    spec: NodeSpec = Field(default_factory=NodeSpec)
    status: NodeStatus = Field(default_factory=NodeStatus)

    def is_ready(self) -> bool:
        return any(c.type == "Ready" and c.status == "True" for c in self.status.conditions)


class LabelSelectorRequirement(KubeModel):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list)


class LabelSelector(KubeModel):
    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)


class PodDisruptionBudgetSpec(KubeModel):
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    selector: LabelSelector | None = None


class PodDisruptionBudgetStatus(KubeModel):
    disruptions_allowed: int = 0
    current_healthy: int = 0
    desired_healthy: int = 0
    expected_pods: int = 0


class PodDisruptionBudget(KubeModel):
    kind: Literal["PodDisruptionBudget"] = "PodDisruptionBudget"
    metadata: ObjectMeta
    spec: PodDisruptionBudgetSpec = Field(default_factory=PodDisruptionBudgetSpec)
    status: PodDisruptionBudgetStatus = Field(default_factory=PodDisruptionBudgetStatus)


class KubeList(BaseModel):
    """Objects of a ``kubectl get nodes,pods,pdb -A -o json`` List, split by kind."""

    nodes: list[Node] = Field(default_factory=list)
    pods: list[Pod] = Field(default_factory=list)
    pdbs: list[PodDisruptionBudget] = Field(default_factory=list)


_KINDS: dict[str, type[Node] | type[Pod] | type[PodDisruptionBudget]] = {
    "Node": Node,
    "Pod": Pod,
    "PodDisruptionBudget": PodDisruptionBudget,
}


def _check_item(
    obj: Node | Pod | PodDisruptionBudget, index: int, seen: dict[tuple[str, str | None, str], int]
) -> None:
    """Refuse an object with an unusable quantity, or a second object of one kind and name."""
    if isinstance(obj, RefusableModel) and obj.refused:
        raise ValueError(f"items[{index}].{obj.refused[0]}")
    # Two objects of one kind and name: the API server never holds them, and keeping either would
    # silently lose the other.
    namespace = None if obj.kind == "Node" else obj.metadata.namespace or "default"
    key = (obj.kind, namespace, obj.metadata.name)
    first = seen.setdefault(key, index)
    if first != index:
        name = "/".join(p for p in key[1:] if p)
        raise ValueError(f"items[{index}]: {obj.kind} {name} is also items[{first}]")


def iter_kube_list(doc: Any, *, release: bool = False) -> Iterator[Node | Pod | PodDisruptionBudget]:
    """The Nodes, Pods and PDBs of a List (``kind: List`` or ``NodeList``/``PodList``/...), one at a time.

    With ``release`` each raw item is dropped from ``doc`` once parsed, so a large List is not held
    twice (raw and parsed). Other kinds are skipped. Raises ``ValueError`` naming the item and field:
    for an unusable quantity (see :class:`RefusableModel`) and for a second object of one kind and name.
    """
    if not isinstance(doc, dict):
        raise ValueError("top level: expected a Kubernetes List object")
    items = doc.get("items")
    if not isinstance(items, list):
        raise ValueError("items: missing or not a list")
    list_kind = str(doc.get("kind", "List"))
    default_kind = list_kind[: -len("List")] if list_kind.endswith("List") and list_kind != "List" else None
    seen: dict[tuple[str, str | None, str], int] = {}
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValueError(f"items[{index}]: not an object")
        kind = item.get("kind") or default_kind
        model = _KINDS.get(str(kind))
        if model is None:
            continue  # other kinds in the same List (Services, ...) are not ours to read
        try:
            obj = model.model_validate(item if item.get("kind") else {**item, "kind": kind})
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise ValueError(f"items[{index}].{where}: {err['msg']}") from None
        _check_item(obj, index, seen)
        if release:
            items[index] = None
        yield obj


def parse_kube_list(doc: Any) -> KubeList:
    """Parse a List into models, split by kind."""
    out = KubeList()
    for obj in iter_kube_list(doc):
        if isinstance(obj, Node):
            out.nodes.append(obj)
        elif isinstance(obj, Pod):
            out.pods.append(obj)
        else:
            out.pdbs.append(obj)
    return out
