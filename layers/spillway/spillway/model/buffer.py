"""CapacityBuffers (``autoscaling.x-k8s.io`` v1beta1, and v1alpha1 where a CRD serves only that, as
Karpenter's first one did), and the ``buffers`` of the configuration, distilled for the planner.

A buffer is spare capacity held as virtual pods: ``replicas`` chunks, each shaped like a pod. The
CapacityBuffer names its shape by ``spec.podTemplateRef`` (a PodTemplate of its namespace) or by
``spec.scalableRef``. cluster-autoscaler resolves every scalableRef through its scale subresource
first (translators/scalable_objects_translator.go ``resolveSpecAndReplicas``, "try resolving a live
pod"; scalable_objects/scalable_object_resolvers.go ``ScaleObjectPodResolver``): the most recent pod
its ``status.selector`` selects is the chunk, the Scale's ``status.replicas`` the count a percentage is
of (:class:`ScaledObject`; a ReplicationController named in group ``"core"`` has no Scale it finds,
:func:`reads_live_pod`). Only with no such pod does it read the pod template of an ``apps/v1``
Deployment, StatefulSet or ReplicaSet, a core ReplicationController or a ``batch/v1`` Job (which has no
scale subresource, so always) of its namespace, and their ``spec.replicas`` (a Job's
``spec.parallelism``); an object of any other kind without a pod is not ready, and so is an ``apps`` or
``batch`` kind named in the core group (:func:`core_group_problem`). A live pod is what
admission made of the template (a LimitRange's default requests, injected sidecars, VPA's requests),
so the two differ. A built-in kind's pods are those its own ``spec.selector`` selects (what its Scale's
``status.selector`` says), found by one mechanism, :func:`live_pods`: observe asks the API server for
them, ``spillway plan --cluster`` takes them from its List (:class:`NewestPods`). Its count is the
larger of ``spec.replicas`` and ``spec.percentage`` of that count (rounded up, 0 of a workload at 0
replicas), capped by ``spec.limits`` (the chunks' summed requests; a negative limit skipped); with
neither, as many chunks as ``spec.limits`` holds (no limit left on a resource the chunk requests is a
problem), as cluster-autoscaler's translator counts (:func:`from_percentage`, :func:`_fit_in_limits`). A
``percentage`` beside a ``podTemplateRef`` is ignored, as cluster-autoscaler ignores it (its status
message says so). Only the default ``provisioningStrategy`` (``buffer.x-k8s.io/active-capacity``) is
served; a buffer of another strategy belongs to another controller and is left alone. The namespace's
core ResourceQuotas then cut the count as cluster-autoscaler's controller allocates them
(:func:`limit_by_quotas`, condition ``LimitedByQuotas``).

:func:`buffer_infos` never raises: a buffer that cannot be served keeps the problem in
:attr:`BufferInfo.problem` (and holds nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from spillway.model.cluster import PodInfo
from spillway.model.k8s import CapacityBuffer, Pod, PodAffinity, PodTemplate, ResourceQuota, Scalable
from spillway.model.provreq import pending_info, template_pod_object
from spillway.model.quantity import to_signed_milli
from spillway.model.resources import CPU, MEMORY, Resources, parse_resource_list
from spillway.model.shared import LabelRequirement, selector_matches, selector_requirements
from spillway.model.windows import TimeWindow

GROUP = "autoscaling.x-k8s.io"
VERSIONS = ("v1beta1", "v1alpha1")  # read in this order: the first one served
PLURAL = "capacitybuffers"
ACTIVE_CAPACITY = "buffer.x-k8s.io/active-capacity"
CONFIGURED = "config:"  # a configured buffer's key: config:<name> (BufferInfo.key)
# status.conditions types, as cluster-autoscaler's buffer controller writes them
READY_FOR_PROVISIONING = "ReadyForProvisioning"
PROVISIONING = "Provisioning"
LIMITED_BY_QUOTAS = "LimitedByQuotas"
# the kinds a scalableRef may name (cluster-autoscaler's resolvers of a pod template:
# translators/scalable_objects/scalable_object_resolvers.go), by kind: (API group, version, plural)
SCALABLE = {
    "Deployment": ("apps", "v1", "deployments"),
    "StatefulSet": ("apps", "v1", "statefulsets"),
    "ReplicaSet": ("apps", "v1", "replicasets"),
    "ReplicationController": ("", "v1", "replicationcontrollers"),
    "Job": ("batch", "v1", "jobs"),
}
# a percentage is of a scalable object's count: beside a podTemplateRef it is left out, as cluster-autoscaler
# leaves it out (translators/replicas.go applies it only when the scalable object's replicas are known)
IGNORED_PERCENTAGE = "spec.percentage applies only with spec.scalableRef"
# how a scalableRef names the core group: "" as the API documents it, or "core" as the controller's
# template resolvers are keyed (scalable_object_resolvers.go ApiGroupCore)
CORE_GROUPS = ("", "core")


def scalable_resource(api_group: str, kind: str) -> tuple[str, str, str] | None:
    """(group, version, plural) of the kind a scalableRef names, if Spillway reads its pod template."""
    found = SCALABLE.get(kind)
    if found is None or found[0] != core_group(api_group):
        return None
    return found


def core_group_problem(api_group: str, kind: str) -> str:
    """Why a scalableRef naming an ``apps`` or ``batch`` kind in the core group (``apiGroup`` ``""``, left
    out, or ``"core"``) names nothing: the core group serves no such kind, so cluster-autoscaler's
    controller leaves the buffer not ready (no scale mapping, no template resolver filed under that
    group), though Karpenter's reads an empty apiGroup as ``apps``. "" when the ref is not such a one;
    observe reads no scale subresource for it."""
    found = SCALABLE.get(kind)
    if found is None or not found[0] or core_group(api_group):
        return ""
    return (
        f'spec.scalableRef.apiGroup: "{api_group}" is the core API group, which serves no {kind}: '
        f'a {kind} is in API group "{found[0]}"'
    )


def reads_live_pod(api_group: str, kind: str) -> bool:
    """Whether the live pod of the built-in workload a scalableRef names is looked for. The controller
    finds it through the object's scale subresource, mapped from the ref's group and kind as discovery
    names them (capacitybuffer/client GetScaleObject: ``RESTMapping(GroupKind{apiGroup, kind})``): the
    core group is ``""`` there, so a ReplicationController named in group ``"core"`` has no Scale to
    find, and only its template resolver reads it (template and ``spec.replicas``)."""
    found = SCALABLE.get(kind)
    return found is not None and api_group == found[0]


Workloads = Mapping[tuple[str, str, str], Scalable]  # (namespace, kind, name)


@dataclass(frozen=True, slots=True)
class ScaledObject:
    """An object a scalableRef names whose kind has no pod template resolver (a custom resource), as
    cluster-autoscaler's ``ScaleObjectPodResolver`` reads it: its ``autoscaling/v1`` Scale
    (``status.replicas``, ``status.selector``) and the most recent pod (by ``creationTimestamp``) that
    selector selects in its namespace, kept as a pod template (``template``: its labels, annotations
    and spec; ``None``: no pod). ``problem``: why it could not be read (unknown kind, no scale
    subresource, not found, no selector)."""

    namespace: str
    api_group: str
    kind: str
    name: str
    replicas: int = 0
    template: Mapping[str, Any] | None = None
    selector: str = ""
    problem: str = ""

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.namespace, core_group(self.api_group), self.kind, self.name)


def core_group(api_group: str) -> str:
    return "" if api_group in CORE_GROUPS else api_group


@dataclass(frozen=True, slots=True)
class BufferInfo:
    """One buffer: ``replicas`` virtual pods shaped like ``pod``, or why none (``problem``).

    ``namespace`` is ``""`` for a buffer of the configuration (which may carry ``windows``: outside
    them it holds nothing); a CapacityBuffer's namespace decides its tenant."""

    namespace: str
    name: str
    replicas: int
    pod: PodInfo | None = None
    problem: str = ""
    template: str = ""  # the PodTemplate named (CapacityBuffer)
    generation: int = 0  # the PodTemplate's metadata.generation (status.podTemplateGeneration)
    strategy: str = ACTIVE_CAPACITY
    windows: tuple[TimeWindow, ...] = ()
    # the LimitedByQuotas condition's (status, message) once the namespace's ResourceQuotas were
    # allocated (:func:`limit_by_quotas`); None: not allocated (the condition is left as it is)
    quota: tuple[str, str] | None = None
    # the chunk's pod sets no spec.priority (a PodTemplate's, which admission never resolved): its fake
    # pods are never expendable (:meth:`expendable`), though they are planned at priority 0
    unprioritised: bool = False
    # the template's Pod, until its pod topology is matched against the cluster's pods (spillway.model.templates)
    source: Pod | None = field(default=None, compare=False, repr=False)
    # a CapacityBuffer's metadata.uid and the apiVersion it was read through: the plan's Events name the
    # buffer by them (spillway.act.events); "" for a configured buffer, which is no object
    uid: str = ""
    api_version: str = ""

    @property
    def key(self) -> str:
        """``<namespace>/<name>`` for a CapacityBuffer, ``config:<name>`` for a configured buffer: a
        namespace's name is a DNS label (no ``:``), so no CapacityBuffer's key is a configured one's, not
        even one of namespace ``config`` named as a configured buffer."""
        return f"{self.namespace}/{self.name}" if self.namespace else f"{CONFIGURED}{self.name}"

    def active_at(self, now: datetime) -> bool:
        """Served now: its strategy, a shape, some replicas, and inside one of its windows (if any)."""
        if self.strategy != ACTIVE_CAPACITY or self.pod is None or self.problem or self.replicas <= 0:
            return False
        return not self.windows or any(w.active(now) for w in self.windows)

    def expendable(self, cutoff: int) -> bool:
        """A CapacityBuffer whose chunk's priority is below ``cutoff`` (``expendable_priority_cutoff``):
        cluster-autoscaler drops its fake pods as any expendable pod (spillway.planner.buffers). Only a
        priority the chunk sets counts: the filter passes a pod whose ``spec.priority`` is not set,
        whatever the cutoff (core/utils FilterOutExpendableAndSplit: ``pod.Spec.Priority != nil &&``),
        and the fake pods are the PodTemplate copied (makeFakePods), so a template that sets none is
        never expendable, even with a cutoff above 0. A configured buffer has no priority."""
        if not self.namespace or self.pod is None or self.unprioritised:
            return False
        return self.pod.priority < cutoff

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ns": self.namespace, "n": self.name, "r": self.replicas}
        optional: dict[str, Any] = {
            "p": self.pod.to_dict() if self.pod is not None else None,
            "x": self.problem,
            "t": self.template,
            "g": self.generation,
            "s": self.strategy if self.strategy != ACTIVE_CAPACITY else "",
            "w": [w.model_dump() for w in self.windows],
            "q": list(self.quota) if self.quota is not None else None,
            "np": 1 if self.unprioritised else None,
            "u": self.uid,
            "v": self.api_version,
        }
        out.update({k: v for k, v in optional.items() if v})
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BufferInfo:
        pod = d.get("p")
        return cls(
            namespace=str(d.get("ns", "")),
            name=str(d["n"]),
            replicas=int(d.get("r", 0)),
            pod=PodInfo.from_dict(pod) if pod else None,
            problem=str(d.get("x", "")),
            template=str(d.get("t", "")),
            generation=int(d.get("g", 0)),
            strategy=str(d.get("s") or ACTIVE_CAPACITY),
            # a window's fields this build knows: one a newer build added is ignored, as every record of
            # the snapshot ignores the keys it does not read (spillway.adapters.store, version skew)
            windows=tuple(
                TimeWindow.model_validate({k: w[k] for k in TimeWindow.model_fields if k in w})
                for w in d.get("w", ())
            ),
            quota=(str(d["q"][0]), str(d["q"][1])) if d.get("q") else None,
            unprioritised=bool(d.get("np")),
            uid=str(d.get("u", "")),
            api_version=str(d.get("v", "")),
        )


def _chunks(buffer: CapacityBuffer, pod: PodInfo, current: int | None) -> tuple[int, str]:
    """How many chunks the spec asks for (``current``: the scalable object's replicas), or why it
    cannot be known."""
    spec = buffer.spec
    asked: list[int] = [] if spec.replicas is None else [spec.replicas]
    if spec.percentage is not None and current is not None:  # without a scalableRef it is ignored
        asked.append(from_percentage(spec.percentage, current))
    count = max(asked) if asked else None
    if spec.limits is not None:
        fits, problem = _fit_in_limits(spec.limits, pod)
        if problem:
            return 0, problem
        count = fits if count is None else min(count, fits)
    if count is None:
        if spec.percentage is not None:
            return 0, f"{IGNORED_PERCENTAGE}, and neither spec.replicas nor spec.limits is set"
        return 0, "neither spec.replicas, spec.percentage nor spec.limits sets the number of chunks"
    return count, ""


def from_percentage(percentage: int, current: int) -> int:
    """``percentage`` of the scalable object's ``current`` replicas, rounded up, with no floor: 0 % and
    any percentage of a workload at 0 replicas are 0 chunks. As cluster-autoscaler's translator
    computes it since kubernetes/autoscaler#9959 (capacitybuffer/translators/replicas.go
    replicasFromPercentage; replicas_test.go: "50% of 0" is 0, "0% of 10" is 0, 33 % of 10 is 4),
    although the type's description says "to a minimum of 1": a buffer of a Deployment scaled to
    zero keeps no node up."""
    return -(-percentage * current // 100)  # integer ceiling: no float rounding on large counts


def _fit_in_limits(limits: Mapping[str, Any], pod: PodInfo) -> tuple[int, str]:
    """How many chunks ``spec.limits`` holds: each limit on a resource the chunk requests caps the
    count, the others are left out. A negative limit, which the CRD's quantity pattern admits, gives a
    negative count and is skipped, the others capping (cluster-autoscaler translators/replicas.go
    calculateMaxPodsFromLimits: ``if maxPods < 0 { continue }``; its Go division truncates toward
    zero, so a negative limit smaller than the request caps at 0). No limit left on a resource the
    chunk requests is an error, as for the controller (the buffer is not ready, the status says why)."""
    caps = {name: to_signed_milli(value) for name, value in limits.items()}
    counts = {r: _truncated(caps[r], v) for r, v in pod.requests.items() if r in caps and v > 0}
    fits = [n for n in counts.values() if n >= 0]
    if not fits:
        requested = ", ".join(sorted(r for r, v in pod.requests.items() if v > 0)) or "nothing"
        negative = sorted(r for r, n in counts.items() if n < 0)
        skipped = f"; negative, skipped: {', '.join(negative)}" if negative else ""
        return 0, (
            "spec.limits: resources in configured limits not found in the pod template "
            f"(limits name {', '.join(sorted(caps)) or 'none'}; the chunk requests {requested}{skipped})"
        )
    return min(fits), ""


def _truncated(limit: int, request: int) -> int:
    """``limit // request`` rounded toward zero, as Go divides integers."""
    return -(-limit // request) if limit < 0 else limit // request


Scaled = Mapping[tuple[str, str, str, str], ScaledObject]  # by ScaledObject.key


def _shape(
    buffer: CapacityBuffer,
    templates: Mapping[tuple[str, str], PodTemplate],
    workloads: Workloads,
    scaled: Scaled,
) -> tuple[Pod | None, int | None, str, int, str]:
    """(pod, the scalable object's replicas, the template's name, its generation, problem)."""
    namespace, name, spec = buffer.metadata.namespace or "default", buffer.metadata.name, buffer.spec
    if spec.pod_template_ref is not None and spec.pod_template_ref.name:
        ref = spec.pod_template_ref.name
        template = templates.get((namespace, ref))
        if template is None:
            return None, None, ref, 0, f"PodTemplate {namespace}/{ref} not found"
        pod, problem = _chunk(template.model_dump(by_alias=True), namespace, f"{name}:buffer")
        return pod, None, ref, template.metadata.generation or 0, problem
    scalable = spec.scalable_ref
    if scalable is None:
        return None, None, "", 0, "neither spec.podTemplateRef nor spec.scalableRef names the chunk's shape"
    what = f"{scalable.kind} {namespace}/{scalable.name}"
    misgrouped = core_group_problem(scalable.api_group, scalable.kind)
    if misgrouped:
        return None, None, "", 0, misgrouped
    if scalable_resource(scalable.api_group, scalable.kind) is None:
        found = scaled.get((namespace, core_group(scalable.api_group), scalable.kind, scalable.name))
        return _through_scale(name, what, scalable.api_group, found)
    workload = workloads.get((namespace, scalable.kind, scalable.name))
    if workload is None:
        return None, None, "", 0, f"{what} not found"
    live = scaled.get((namespace, scalable.api_group, scalable.kind, scalable.name))
    if not reads_live_pod(scalable.api_group, scalable.kind):  # apiGroup "core": the template only
        live = None
    if live is not None and live.template is not None and not live.problem:
        return _through_scale(name, what, scalable.api_group, live)
    raw = {"metadata": {"name": f"{scalable.kind} {scalable.name}"}, "template": workload.spec.template}
    pod, problem = _chunk(raw, namespace, f"{name}:buffer")
    return pod, workload.replicas, "", 0, problem.replace("PodTemplate ", "", 1)


def _through_scale(
    buffer: str, what: str, api_group: str, scaled: ScaledObject | None
) -> tuple[Pod | None, int | None, str, int, str]:
    """The chunk and count of a kind without a pod template resolver, from its Scale and its most
    recent pod; without a pod the buffer is not ready, as the controller's ("requires to observe a
    running pod")."""
    if scaled is None:
        return (
            None,
            None,
            "",
            0,
            (
                f"spec.scalableRef: {what} ({api_group or 'core'}) was not read: a kind other than "
                f"{_builtin_kinds()} is read through its scale subresource and its pods, which only observe "
                "reads from the cluster"
            ),
        )
    if scaled.problem:
        return None, None, "", 0, f"spec.scalableRef: {scaled.problem}"
    if scaled.template is None:
        return (
            None,
            scaled.replicas,
            "",
            0,
            (
                f"spec.scalableRef: no pod of {what} found by its scale subresource's status.selector "
                f"{scaled.selector!r}: the chunk's shape of a kind without a pod template is read from its "
                "most recent pod, as cluster-autoscaler's controller reads it"
            ),
        )
    raw = {"metadata": {"name": f"{scaled.kind} {scaled.name}"}, "template": dict(scaled.template)}
    pod, problem = _chunk(raw, scaled.namespace, f"{buffer}:buffer")
    return pod, scaled.replicas, "", 0, problem.replace("PodTemplate ", "", 1)


def _chunk(template: Mapping[str, Any], namespace: str, name: str) -> tuple[Pod | None, str]:
    """The buffer's chunk: the pod its template makes, unbound. A buffer's pods are pending shapes,
    never bound, so the template's ``spec.nodeName`` goes, as cluster-autoscaler's buffer pod processor
    clears it; a template read from a running pod (through the scale subresource) always has one."""
    body = dict(template.get("template") or {})
    spec = body.get("spec") or {}
    if isinstance(spec, Mapping):  # else template_pod_object names it
        spec = {k: v for k, v in spec.items() if k != "nodeName"}
    return template_pod_object({**template, "template": {**body, "spec": spec}}, namespace, name)


def _builtin_kinds() -> str:
    return ", ".join(f"{SCALABLE[k][0] or 'core'} {k}" for k in SCALABLE)


def buffer_info(
    buffer: CapacityBuffer,
    templates: Mapping[tuple[str, str], PodTemplate],
    workloads: Workloads | None = None,
    scaled: Scaled | None = None,
) -> BufferInfo:
    """A CapacityBuffer as the planner needs it, its PodTemplate (or scalable object) resolved."""
    namespace = buffer.metadata.namespace or "default"
    base = BufferInfo(
        namespace,
        buffer.metadata.name,
        0,
        strategy=buffer.spec.provisioning_strategy or ACTIVE_CAPACITY,
        uid=buffer.metadata.uid,
        api_version=buffer.api_version,
    )
    source, current, template, generation, problem = _shape(buffer, templates, workloads or {}, scaled or {})
    base = replace(base, template=template, generation=generation)
    if source is None or problem:
        return replace(base, problem=problem)
    pod = pending_info(source)
    count, problem = _chunks(buffer, pod, current)
    unset = source.spec.priority is None
    return replace(base, replicas=count, pod=pod, problem=problem, source=source, unprioritised=unset)


def buffer_infos(
    buffers: Iterable[CapacityBuffer],
    templates: Iterable[PodTemplate],
    workloads: Iterable[Scalable] = (),
    scaled: Iterable[ScaledObject] = (),
) -> tuple[BufferInfo, ...]:
    """Every buffer with what it names resolved, sorted by namespace and name."""
    by_name = {(t.metadata.namespace or "default", t.metadata.name): t for t in templates}
    by_kind: dict[tuple[str, str, str], Scalable] = {
        (w.metadata.namespace or "default", w.kind, w.metadata.name): w for w in workloads
    }
    by_ref = {s.key: s for s in scaled}
    infos = (buffer_info(b, by_name, by_kind, by_ref) for b in buffers)
    return tuple(sorted(infos, key=lambda i: (i.namespace, i.name)))


PodsOf = Callable[[Scalable], Sequence[Pod]]  # the pods of a workload's namespace its spec.selector selects


def live_pods(
    buffers: Iterable[CapacityBuffer], workloads: Iterable[Scalable], pods_of: PodsOf
) -> list[ScaledObject]:
    """The most recent pod of each built-in workload a buffer names, as cluster-autoscaler's translator
    looks for one before it reads the workload's template (translators/scalable_objects_translator.go
    resolveSpecAndReplicas, "try resolving a live pod"; scalable_objects/scalable_object_resolvers.go
    ScaleObjectPodResolver): the pods its ``spec.selector`` selects (what its Scale's ``status.selector``
    says), found by ``pods_of``, and its ``status.replicas`` (the Scale's). Observe asks the API server
    for the pods; ``spillway plan --cluster`` finds them in its List (:class:`NewestPods`). A Job (no
    scale subresource), a workload whose selector selects nothing or everything, or one with no pod
    gives none: its template is read then."""
    named = {
        (b.metadata.namespace or "default", ref.kind, ref.name)
        for b in buffers
        if (ref := b.spec.scalable_ref) is not None and reads_live_pod(ref.api_group, ref.kind)
    }
    out: list[ScaledObject] = []
    for workload in workloads:
        namespace = workload.metadata.namespace or "default"
        selector = workload.pod_selector
        if (namespace, workload.kind, workload.metadata.name) not in named or not selector:
            continue
        template = newest_template(pods_of(workload))
        if template is None:
            continue
        replicas = workload.status.replicas or 0
        group = SCALABLE[workload.kind][0]
        out.append(
            ScaledObject(
                namespace, group, workload.kind, workload.metadata.name, replicas, template, selector
            )
        )
    return out


def newest_template(pods: Sequence[Pod]) -> dict[str, Any] | None:
    """The most recent pod (by ``creationTimestamp``, then name) as a pod template: its labels,
    annotations and spec, as cluster-autoscaler's scale resolver builds one from it
    (buildPodTemplateFromPod)."""
    if not pods:
        return None
    raw = max(pods, key=_recency).model_dump(by_alias=True, mode="json", exclude_none=True)
    meta = raw.get("metadata") or {}
    return {
        "metadata": {"labels": meta.get("labels") or {}, "annotations": meta.get("annotations") or {}},
        "spec": raw.get("spec") or {},
    }


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _recency(pod: Pod) -> tuple[datetime, str]:
    return pod.metadata.creation_timestamp or _EPOCH, pod.metadata.name


class NewestPods:
    """The pods of a List as :func:`live_pods` asks for them (``spillway plan --cluster``), noted as
    the List streams by. Of each namespace and label set only the most recent pod is kept: a selector
    selects by labels alone, so no other pod of that set can be the newest one it selects, and a List's
    pods are not all held as models."""

    def __init__(self) -> None:
        self._newest: dict[tuple[str, frozenset[tuple[str, str]]], Pod] = {}

    def note(self, pod: Pod) -> None:
        key = (pod.metadata.namespace or "default", frozenset(pod.metadata.labels.items()))
        held = self._newest.get(key)
        if held is None or _recency(pod) > _recency(held):
            self._newest[key] = pod

    def selected(self, workload: Scalable) -> list[Pod]:
        """The pods kept of the workload's namespace that its ``spec.selector`` selects."""
        namespace = workload.metadata.namespace or "default"
        selector = workload.spec.selector
        if isinstance(selector, dict):  # a ReplicationController's: a plain label map
            requirements: Sequence[LabelRequirement] = [(k, "In", (v,)) for k, v in sorted(selector.items())]
        else:
            requirements = selector_requirements(selector)
        return [
            pod
            for (ns, _), pod in self._newest.items()
            if ns == namespace and selector_matches(requirements, pod.metadata.labels)
        ]


def parse_buffers(raw: Sequence[Any]) -> tuple[list[CapacityBuffer], list[str]]:
    """Raw objects (a custom-resource list) as models; the ones refused, each with why."""
    out: list[CapacityBuffer] = []
    refused: list[str] = []
    for obj in raw:
        try:
            out.append(CapacityBuffer.model_validate(obj))
        except ValidationError as exc:
            err = exc.errors()[0]
            meta = obj.get("metadata") if isinstance(obj, dict) else None
            name = meta.get("name", "?") if isinstance(meta, dict) else "?"
            refused.append(f"CapacityBuffer {name}: {'.'.join(str(p) for p in err['loc'])}: {err['msg']}")
    return out, refused


# --- ResourceQuotas, as cluster-autoscaler's buffer controller allocates them
# (capacitybuffer/controller/resourcequotas.go) ---

R_QUOTAS = "ResourceQuotasAllocated"  # LimitedByQuotas' one reason, limited or not
REQUESTS_PREFIX = "requests."
INT32_MAX = 2**31 - 1
_NO_TIME = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class QuotaRoom:
    """A core ResourceQuota as the allocator reads it: ``status.hard`` and ``status.used`` (milli-units;
    what the quota controller last wrote, not the spec) and its scopes, each ``spec.scopes`` entry as an
    ``Exists`` requirement beside ``spec.scopeSelector.matchExpressions``: (scope, operator, values)."""

    namespace: str
    name: str
    hard: Resources
    used: Resources
    selectors: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    @classmethod
    def of(cls, quota: ResourceQuota) -> QuotaRoom:
        scopes: list[tuple[str, str, tuple[str, ...]]] = [
            (scope, "Exists", ()) for scope in quota.spec.scopes
        ]
        if quota.spec.scope_selector is not None:
            scopes += [
                (e.scope_name, e.operator, tuple(e.values))
                for e in quota.spec.scope_selector.match_expressions
            ]
        return cls(
            quota.metadata.namespace or "default",
            quota.metadata.name,
            parse_resource_list(quota.status.hard),
            parse_resource_list(quota.status.used),
            tuple(scopes),
        )


def limit_by_quotas(
    buffers: Iterable[CapacityBuffer], infos: Sequence[BufferInfo], quotas: Iterable[ResourceQuota]
) -> tuple[BufferInfo, ...]:
    """``infos`` with each buffer's chunks cut to what its namespace's ResourceQuotas leave, as
    cluster-autoscaler's controller allocates them: per namespace, the buffers of Spillway's strategy
    in ``creationTimestamp`` order (then name), each taking from every quota whose scopes select its chunk
    ``status.hard`` minus ``status.used`` minus what earlier buffers took. A buffer cut gets
    ``LimitedByQuotas=True`` naming the quotas that could not hold all its chunks, one not cut
    ``False``; a buffer not ready, or whose chunk requests nothing, is passed by (``quota`` None)."""
    rooms: dict[str, list[QuotaRoom]] = {}
    for quota in sorted((QuotaRoom.of(q) for q in quotas), key=lambda r: (r.namespace, r.name)):
        rooms.setdefault(quota.namespace, []).append(quota)
    created = {
        (b.metadata.namespace or "default", b.metadata.name): b.metadata.creation_timestamp for b in buffers
    }

    def order(index: int) -> tuple[str, datetime, str]:
        info = infos[index]
        return info.namespace, created.get((info.namespace, info.name)) or _NO_TIME, info.name

    taken: dict[tuple[str, str], Resources] = {}
    out = list(infos)
    for index in sorted(range(len(infos)), key=order):
        info = infos[index]
        if info.namespace and info.strategy == ACTIVE_CAPACITY and info.pod is not None and not info.problem:
            out[index] = _allocate(info, rooms.get(info.namespace, []), taken)
    return tuple(out)


def _allocate(
    info: BufferInfo, rooms: Sequence[QuotaRoom], taken: dict[tuple[str, str], Resources]
) -> BufferInfo:
    """One buffer's share of its namespace's quotas; what it keeps is taken from them."""
    assert info.pod is not None
    requests = quota_requests(info.pod.requests)
    if not requests:
        return info
    matching = [room for room in rooms if in_scope(room, info.pod.requests, info.source)]
    wanted = info.replicas
    fits = [(room, _fit(room, requests, taken.get((room.namespace, room.name), {}))) for room in matching]
    allowed = min([wanted, *(n for _, n in fits)])
    if allowed > 0:
        for room in matching:
            reserved = taken.setdefault((room.namespace, room.name), {})
            for name, value in requests.items():
                if name in room.hard:
                    reserved[name] = reserved.get(name, 0) + value * allowed
    if allowed < wanted:
        blocking = ", ".join(room.name for room, n in fits if n < wanted)
        message = f"Buffer replicas limited from {wanted} to {allowed} due to quotas: {blocking}"
        return replace(info, replicas=allowed, quota=("True", message))
    return replace(info, quota=("False", ""))


def quota_requests(requests: Mapping[str, int]) -> Resources:
    """A chunk's requests under both names a quota may give them (``cpu`` and ``requests.cpu``,
    ``requests.nvidia.com/gpu``). ``pods`` is not counted: the controller leaves it out."""
    out: Resources = {}
    for name, value in requests.items():
        out[name] = value
        out[REQUESTS_PREFIX + name] = value
    return out


def _fit(room: QuotaRoom, requests: Mapping[str, int], reserved: Mapping[str, int]) -> int:
    """How many chunks the quota still holds: for each resource of its ``status.hard`` the chunk
    requests (more than zero), what is left over the request, rounded down; none when any is overdrawn."""
    fits = INT32_MAX
    for name, hard in room.hard.items():
        need = requests.get(name, 0)
        if need <= 0:
            continue
        left = hard - room.used.get(name, 0) - reserved.get(name, 0)
        if left < 0:
            return 0
        fits = min(fits, left // need)
    return fits


def in_scope(room: QuotaRoom, requests: Mapping[str, int], pod: Pod | None) -> bool:
    """Whether the quota's scopes all select the chunk, as the controller judges a buffer's pod: never
    terminating; BestEffort when it requests neither CPU nor memory; its ``priorityClassName``; cross-
    namespace pod affinity when a term names namespaces or a namespace selector. A scope it does not
    know, or a requirement the API would refuse, selects nothing."""
    best_effort = CPU not in requests and MEMORY not in requests
    priority_class = (pod.spec.priority_class_name or "") if pod is not None else ""
    for scope, operator, values in room.selectors:
        if scope == "PriorityClass":
            matched = _priority_class_matches(priority_class, operator, values)
        else:
            matched = {
                "NotTerminating": True,
                "BestEffort": best_effort,
                "NotBestEffort": not best_effort,
                "CrossNamespacePodAffinity": pod is not None and _cross_namespace(pod),
            }.get(scope, False)
        if not matched:
            return False
    return True


def _priority_class_matches(name: str, operator: str, values: Sequence[str]) -> bool:
    """A ``PriorityClass`` requirement as a label requirement on ``{PriorityClass: name}`` (no label
    when the chunk names no class); ``Exists`` asks only that it names one."""
    if operator == "Exists":
        return bool(name)
    if operator in ("In", "NotIn"):
        return bool(values) and (bool(name) and name in values) == (operator == "In")
    if operator == "DoesNotExist":
        return not values and not name
    return False


def _cross_namespace(pod: Pod) -> bool:
    affinity = pod.spec.affinity
    if affinity is None:
        return False
    return any(_names_namespaces(terms) for terms in (affinity.pod_affinity, affinity.pod_anti_affinity))


def _names_namespaces(affinity: PodAffinity | None) -> bool:
    if affinity is None:
        return False
    terms = [
        *affinity.required_during_scheduling_ignored_during_execution,
        *(w.pod_affinity_term for w in affinity.preferred_during_scheduling_ignored_during_execution),
    ]
    return any(t.namespaces or t.namespace_selector is not None for t in terms)


# ReadyForProvisioning's reasons and message, as cluster-autoscaler's buffer controller writes them
# (capacitybuffer/common/common.go): tools that read the condition match these; Spillway's own words go
# into the message only
R_READY = "AttributesSetSuccessfully"
R_NOT_READY = "error"
READY_MESSAGE = "ready"
# Provisioning's, as cluster-autoscaler's pod list processor writes them when it injects (or cannot
# inject) a buffer's fake pods (processors/capacitybuffer/pod_list_processor.go)
R_INJECTED = "FakePodsInjected"
R_EMPTY = "BufferIsEmpty"
R_NOT_PROVISIONABLE = "NotReadyForProvisioning"
EMPTY_MESSAGE = "CapacityBuffer has zero replicas"
NOT_PROVISIONABLE_MESSAGE = "CapacityBuffer is not ready for provisioning"
Wanted = tuple[str, str, str]  # a condition's status, reason, message


def status_update(
    buffer: CapacityBuffer, info: BufferInfo, now: datetime, expendable_below: int | None = None
) -> dict[str, Any] | None:
    """The ``status`` a buffer's controller writes (cluster-autoscaler's buffer controller does the same
    translation): ``podTemplateRef``, ``replicas`` and ``podTemplateGeneration`` resolved from the spec,
    ``provisioningStrategy``, condition ``ReadyForProvisioning`` (``True``, reason
    ``AttributesSetSuccessfully``, message ``ready``; ``False``, reason ``error``, the problem as the
    message, when the buffer cannot be served), condition ``LimitedByQuotas`` once its namespace's
    ResourceQuotas were allocated (:func:`limit_by_quotas`; ``replicas`` is then the cut count), and
    condition ``Provisioning`` as cluster-autoscaler's pod list processor writes it (:func:`_provisioning`;
    ``expendable_below``: the planner's ``expendable_priority_cutoff``). None when the status says so
    already, or when the buffer's strategy is not Spillway's (another controller owns it)."""
    if info.strategy != ACTIVE_CAPACITY:
        return None
    ready = info.pod is not None and not info.problem
    wanted = _resolved(info) if ready else dict.fromkeys(_resolved(info))
    wanted["provisioningStrategy"] = ACTIVE_CAPACITY
    message = _message(buffer, info)
    ready_condition = ("True", R_READY, message) if ready else ("False", R_NOT_READY, message)
    written = {READY_FOR_PROVISIONING: ready_condition}
    if info.quota is not None:
        written[LIMITED_BY_QUOTAS] = (info.quota[0], R_QUOTAS, info.quota[1])
    provisioning = _provisioning(buffer, info, ready, now, expendable_below)
    if provisioning is not None:
        written[PROVISIONING] = provisioning
    made = [_condition(buffer, kind, want, now) for kind, want in written.items()]
    if wanted == _observed(buffer) and all(same for _, same in made):
        return None
    # another controller's conditions go back exactly as read (observedGeneration included): the merge
    # patch replaces the whole list
    others = [c.as_read() for c in buffer.status.conditions if c.type not in written]
    return {**wanted, "conditions": [*others, *(condition for condition, _ in made)]}


def _provisioning(
    buffer: CapacityBuffer, info: BufferInfo, ready: bool, now: datetime, expendable_below: int | None
) -> Wanted | None:
    """The ``Provisioning`` condition: ``True`` (``FakePodsInjected``) for a buffer Spillway serves
    (:meth:`BufferInfo.active_at`: the planner makes its chunks virtual pods of every plan,
    :func:`spillway.planner.buffers.active_buffers`); ``False`` with
    ``BufferIsEmpty`` for a ready buffer of zero chunks, and with ``NotReadyForProvisioning`` for one no
    longer ready that said ``Provisioning=True``. None (left as it is) for a buffer that is neither
    ready nor said so: the processor passes such a buffer by.

    ``True`` says what cluster-autoscaler's says: the fake pods joined the autoscaler's loop
    (pod_list_processor.go writes it on injecting them, before scale-up runs), not that they have room:
    whether a plan holds them (group limits, MaxSize, a group that fits) the plan says, in its
    ``buffers`` entry for the buffer (:class:`~spillway.planner.types.BufferHold`: chunks held,
    launching, short, and the code and reason of those short). cluster-autoscaler writes no shortfall
    into the status either: it leaves ``Provisioning`` as the injection wrote it and posts Events on
    the buffer, ``TriggeredScaleUp`` when its fake pods triggered a scale-up ("capacity buffer <n> fake
    pods triggered scale-up: <scale-ups>") and, when a loop that scaled nothing up left fake pods without
    room, ``NotTriggerScaleUp`` ("capacity buffer <n> fake pods didn't trigger scale-up: <reasons>"; FakePodsScaleUpStatusProcessor,
    processors/capacitybuffer/scale_up_status_processor.go), as the plan function does
    (:mod:`spillway.act.events`). An expendable buffer's pods are injected
    and dropped by cluster-autoscaler (:meth:`BufferInfo.expendable`): the condition is the same, and
    its message says they hold nothing."""
    if info.active_at(now):
        if expendable_below is not None and info.expendable(expendable_below):
            assert info.pod is not None
            return (
                "True",
                R_INJECTED,
                (
                    f"priority {info.pod.priority} is below expendable_priority_cutoff {expendable_below}: "
                    f"the {info.replicas} virtual pod(s) are left out of Spillway's plans as expendable, as "
                    "cluster-autoscaler drops them after injecting them; they launch no node and hold no room"
                ),
            )
        return (
            "True",
            R_INJECTED,
            (
                f"{info.replicas} virtual pod(s) join each of Spillway's plans after every real pod; each plan "
                "says what room they get (its buffers entry: held, launching, short and why)"
            ),
        )
    if ready:
        return "False", R_EMPTY, EMPTY_MESSAGE
    old = next((c for c in buffer.status.conditions if c.type == PROVISIONING), None)
    if old is not None and old.status == "True":
        return "False", R_NOT_PROVISIONABLE, NOT_PROVISIONABLE_MESSAGE
    return None


def _resolved(info: BufferInfo) -> dict[str, Any]:
    return {
        "podTemplateRef": {"name": info.template} if info.template else None,
        "replicas": info.replicas,
        "podTemplateGeneration": info.generation or None,
    }


def _observed(buffer: CapacityBuffer) -> dict[str, Any]:
    current = buffer.status
    return {
        "podTemplateRef": {"name": current.pod_template_ref.name} if current.pod_template_ref else None,
        "replicas": current.replicas,
        "podTemplateGeneration": current.pod_template_generation,
        "provisioningStrategy": current.provisioning_strategy,
    }


def _message(buffer: CapacityBuffer, info: BufferInfo) -> str:
    """The controller's message, and what Spillway left out of the spec."""
    if info.problem:
        return info.problem[:32768]
    if buffer.spec.percentage is not None and buffer.spec.scalable_ref is None:
        return f"{READY_MESSAGE}; spec.percentage is ignored: it applies only with spec.scalableRef"
    return READY_MESSAGE


def _condition(
    buffer: CapacityBuffer, kind: str, wanted: Wanted, now: datetime
) -> tuple[dict[str, Any], bool]:
    """The condition ``kind`` as wanted, and whether the buffer carries it already (its
    ``lastTransitionTime`` moves only when its status does). Carried already means for the buffer's
    current ``metadata.generation`` too: ``kubectl wait --for=condition=...`` takes a condition whose
    ``observedGeneration`` is below the generation as not yet met (kubernetes/kubectl
    pkg/cmd/wait/wait.go ``ConditionalWait.checkCondition``), so a spec edit that changes no outcome
    still brings it up to date."""
    status, reason, message = wanted
    old = next((c for c in buffer.status.conditions if c.type == kind), None)
    kept = old is not None and old.status == status
    since = old.last_transition_time if kept and old is not None else None
    generation = buffer.metadata.generation or 0
    condition = {
        "type": kind,
        "status": status,
        "observedGeneration": generation,
        "lastTransitionTime": (since or now).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "reason": reason,
        "message": message,
    }
    same = (
        kept
        and old is not None
        and old.reason == reason
        and (old.message or "") == message
        and (old.observed_generation or 0) == generation
    )
    return condition, same
