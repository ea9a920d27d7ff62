"""The shared cluster, distilled: tenants, gangs (pod groups) and capacity quotas.

Compact records beside :mod:`spillway.model.cluster`'s, read from every convention in use (see
README, "Tenants, limits and gangs"):

- a pod's gang: label ``scheduling.x-k8s.io/pod-group`` (scheduler-plugins coscheduling), annotation
  ``scheduling.k8s.io/group-name`` (Volcano), label ``kueue.x-k8s.io/pod-group-name`` (Kueue plain
  pods, size in annotation ``kueue.x-k8s.io/pod-group-total-count``; no gang with annotation
  ``kueue.x-k8s.io/pod-group-fast-admission``: :func:`gang_of`), ``spec.schedulingGroup.podGroupName``
  (Kubernetes 1.36, ``scheduling.k8s.io/v1alpha2``) or ``spec.workloadRef`` (Kubernetes 1.35, v1alpha1);
  for a pod naming none, the Volcano PodGroup made for it before it is annotated
  (:func:`volcano_normal_group`);
- a gang's size: ``spec.minMember`` (coscheduling, Volcano), ``spec.schedulingPolicy.gang.minCount``
  (PodGroup v1alpha2), ``spec.podGroups[].policy.gang.minCount`` (Workload v1alpha1) or
  ``spec.podGroupTemplates[].schedulingPolicy.gang.minCount`` (Workload v1alpha2); a Volcano
  PodGroup's ``spec.minTaskMember`` per task, a pod's task in ``volcano.sh/task-spec``;
- a tenant: a namespace, or the namespaces labelled ``spillway.io/tenant: <name>``;
- a CapacityQuota: a node-label selector and ``limits.resources`` (``nodes`` counts nodes).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from spillway.model.k8s import (
    COSCHEDULING_LABEL,
    KUEUE_FAST_ADMISSION_ANNOTATION,
    KUEUE_GROUP_LABEL,
    KUEUE_TOTAL_ANNOTATION,
    TENANT_LABEL,
    VOLCANO_ANNOTATION,
    VOLCANO_BATCH_GROUP,
    VOLCANO_TASK_SPEC,
    CapacityQuota,
    CoschedulingPodGroup,
    KubeObject,
    LabelSelector,
    Namespace,
    Pod,
    PriorityClass,
    StatusCondition,
    UpstreamPodGroup,
    VolcanoPodGroup,
    Workload,
)
from spillway.model.resources import PODS, Resources, parse_resource_list

# A Volcano PodGroup's status.phase while it waits to be enqueued: "Pending", or none at all (absent or
# "": just created, before Volcano's scheduler writes its status). Volcano reads both alike: its
# scheduler's JobInfo.IsPending (volcano-sh/volcano pkg/scheduler/api/job_info.go) is true for either,
# so the enqueue action (pkg/scheduler/actions/enqueue/enqueue.go) takes such a job up, and its job
# controller creates the job's pods only once the phase is neither (pkg/controllers/job/
# job_controller_actions.go, syncJob).
VOLCANO_PENDING_PHASES = frozenset({None, "", "Pending"})
# The name of the PodGroup Volcano's podgroup controller makes for a pod that names none, before the
# uid of the pod's controller owner, else of the pod (volcano-sh/apis: batch/v1alpha1
# PodgroupNamePrefix; pkg/apis/helpers/helpers.go GeneratePodgroupName): volcano_normal_group
VOLCANO_NORMAL_GROUP_PREFIX = "podgroup-"
NODES = "nodes"  # a CapacityQuota (and tenant limit) resource: the number of nodes, in milli-units
# (key, operator, values) of a label selector requirement: In, NotIn, Exists, DoesNotExist.
LabelRequirement = tuple[str, str, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class GangInfo:
    """A pod group: its pods run all together or not at all.

    ``pending`` marks a Volcano PodGroup in phase ``Pending``, or with no phase yet (Volcano reads both
    alike: :data:`VOLCANO_PENDING_PHASES`): Volcano creates its pods only once it is ``Inqueue``, so
    while none of its pods exists (gated ones included), its ``min_member`` pods of ``min_resources``
    are demand that has no pods yet.
    ``task_minimums`` is a Volcano PodGroup's ``minTaskMember``: the pods of each task (a pod's
    ``volcano.sh/task-spec``) that must run too.
    ``priority_class`` is a Volcano PodGroup's ``priorityClassName``; ``priority`` the value Volcano's
    scheduler orders the job by (:func:`gang_priorities`: that class's, else the global default's),
    None when not known (no PriorityClasses read, or no Volcano gang): the gang is then served at its
    lowest member's priority.
    """

    key: str  # "<namespace>/<name>"; a Workload's group: "<namespace>/<workload>/<group>"
    source: str  # coscheduling | volcano | kubernetes
    min_member: int = 0
    min_resources: Resources = field(default_factory=dict)
    pending: bool = False
    task_minimums: Mapping[str, int] = field(default_factory=dict)
    priority_class: str = ""
    priority: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"k": self.key, "s": self.source, "m": self.min_member}
        if self.min_resources:
            out["r"] = dict(self.min_resources)
        if self.pending:
            out["p"] = 1
        if self.task_minimums:
            out["t"] = dict(self.task_minimums)
        if self.priority_class:
            out["pc"] = self.priority_class
        if self.priority is not None:
            out["pr"] = self.priority
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GangInfo:
        return cls(
            key=d["k"],
            source=d.get("s", ""),
            min_member=int(d.get("m", 0)),
            min_resources=dict(d.get("r", {})),
            pending=bool(d.get("p")),
            task_minimums={str(k): int(v) for k, v in d.get("t", {}).items()},
            priority_class=str(d.get("pc", "")),
            priority=int(d["pr"]) if d.get("pr") is not None else None,
        )


@dataclass(frozen=True, slots=True)
class QuotaInfo:
    """A CapacityQuota: the nodes its selector matches may together hold at most ``limits``."""

    name: str
    selector: tuple[LabelRequirement, ...] = ()  # empty: every node
    limits: Resources = field(default_factory=dict)
    used: Resources = field(default_factory=dict)  # status.used, as the quota's controller last wrote it
    invalid: str = ""  # why the quota is not enforced (:func:`quota_problem`), else ""

    def matches(self, labels: Mapping[str, str]) -> bool:
        return selector_matches(self.selector, labels)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"n": self.name, "l": dict(self.limits)}
        if self.selector:
            out["sel"] = [[k, op, list(v)] for k, op, v in self.selector]
        if self.used:
            out["u"] = dict(self.used)
        if self.invalid:
            out["x"] = self.invalid
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> QuotaInfo:
        return cls(
            name=d["n"],
            selector=tuple((k, op, tuple(v)) for k, op, v in d.get("sel", ())),
            limits=dict(d.get("l", {})),
            used=dict(d.get("u", {})),
            invalid=str(d.get("x", "")),
        )


def selector_requirements(selector: LabelSelector | None) -> tuple[LabelRequirement, ...]:
    """A LabelSelector as requirements: ``matchLabels`` entries become ``In`` with one value."""
    if selector is None:
        return ()
    reqs: list[LabelRequirement] = [(k, "In", (v,)) for k, v in sorted(selector.match_labels.items())]
    reqs += [(r.key, r.operator, tuple(r.values)) for r in selector.match_expressions]
    return tuple(reqs)


def selector_matches(selector: Sequence[LabelRequirement], labels: Mapping[str, str]) -> bool:
    for key, operator, values in selector:
        actual = labels.get(key)
        if operator == "In" and actual not in values:
            return False
        if operator == "NotIn" and actual is not None and actual in values:
            return False
        if operator == "Exists" and actual is None:
            return False
        if operator == "DoesNotExist" and actual is not None:
            return False
    return True


def gang_of(pod: Pod) -> tuple[str | None, int]:
    """The pod's gang key (or None) and the gang size the pod itself states (Kueue), else 0.

    A Kueue pod group with annotation ``kueue.x-k8s.io/pod-group-fast-admission`` (any value: Kueue
    reads its key alone, kubernetes-sigs/kueue pkg/controller/jobs/pod/pod_controller.go,
    ``constructGroupPodSets`` and ``validatePodGroupMetadata``) is admitted before all its pods exist:
    its Workload counts ``pod-group-total-count`` pods, its existing pods are ungated, and the rest are
    ungated as they come, each left to kube-scheduler. Kueue's StatefulSet integration marks every
    pod so, and an OrderedReady StatefulSet creates its next pod only once the last one runs and is
    Ready. Such a group is no gang: waiting for all its pods would wait for good. The pod may still be
    of a gang its scheduler reads (``spec.schedulingGroup``, ``spec.workloadRef``).

    Nor is a Kueue pod whose ``pod-group-total-count`` is missing or Kueue cannot read it
    (:func:`kueue_total_problem`): Kueue builds no Workload for it, so no group of it is ever admitted
    as one.
    """
    meta = pod.metadata
    kueue, annotations = meta.labels.get(KUEUE_GROUP_LABEL), meta.annotations
    if (
        kueue
        and not _named_gang(pod)
        and KUEUE_FAST_ADMISSION_ANNOTATION not in annotations
        and not kueue_total_problem(pod)
    ):
        count = int(annotations[KUEUE_TOTAL_ANNOTATION])  # read: no problem
        return f"{meta.namespace or 'default'}/{kueue}", count
    return _gang_but_kueue(pod), 0


def _named_gang(pod: Pod) -> str | None:
    """The gang a coscheduling label or a Volcano annotation names: before Kueue's label (:func:`gang_of`)."""
    meta = pod.metadata
    return meta.labels.get(COSCHEDULING_LABEL) or meta.annotations.get(VOLCANO_ANNOTATION) or None


def _gang_but_kueue(pod: Pod) -> str | None:
    """The pod's gang key by every convention but Kueue's pod group, in :func:`gang_of`'s order."""
    namespace, spec = pod.metadata.namespace or "default", pod.spec
    name = _named_gang(pod)
    if name:
        return f"{namespace}/{name}"
    if spec.scheduling_group is not None:
        return f"{namespace}/{spec.scheduling_group.pod_group_name}"
    ref = spec.workload_ref
    if ref is not None:
        key = f"{namespace}/{ref.name}/{ref.pod_group}"
        return f"{key}/{ref.pod_group_replica_key}" if ref.pod_group_replica_key else key
    return None


def volcano_normal_group(pod: Pod) -> str | None:
    """The key (``<namespace>/<name>``) of the PodGroup Volcano's podgroup controller makes for the pod
    when it names none, which the snapshot may hold before the pod names it; None for a pod already of
    a gang (by any convention), and when the uid the name is made of is not known.

    Volcano's scheduler takes a pod into a job by its ``scheduling.k8s.io/group-name`` annotation
    alone. For a pod without one whose ``schedulerName`` is among its own (a plain Pod, a Deployment's
    or a batch/v1 Job's pod: a "normal" pod), its podgroup controller (volcano-sh/volcano
    pkg/controllers/podgroup/pg_controller.go ``processNextReq``; pg_controller_handler.go
    ``createNormalPodPGIfNotExist``, ``buildPodGroupFromPod``, ``newPGOwnerReferences``):

    * names the group ``podgroup-<uid>``: the uid of the pod's first ownerReference with
      ``controller: true``, else the pod's own (``GeneratePodgroupName``, volcano-sh/apis
      pkg/apis/helpers/helpers.go), so all the pods of one ReplicaSet, StatefulSet or Job share it;
    * looks it up by that name in the pod's namespace and creates it when missing, in phase
      ``Pending``: owned as the pod is (the pod's ownerReferences, when one is a controller), else by
      the pod; ``minMember`` 1, or its owner's ``scheduling.volcano.sh/group-min-member``;
      ``minResources`` the pod's requests times ``minMember``;
    * only then patches the pod with ``scheduling.k8s.io/group-name: podgroup-<uid>``.

    Its admission webhook finds a normal pod's group by the same name
    (pkg/webhooks/admission/pods/validate/admit_pod.go, ``validatePod``). Between the create and the
    patch a snapshot holds the group, Pending and without members, and the pod naming no group: the
    group is that pod's, never demand of its own (:class:`spillway.model.cluster.VolcanoNormalPods`).

    The name is the key Volcano itself uses, so it is the one matched. The group's ownerReferences
    are not read: the design note docs/design/Enhance-Generate-PodGroup-OwnerReferences-for-Normal-Pod.md
    proposes owners further up the chain (a Deployment rather than its ReplicaSet), while the name
    stays made of the pod's own controller's uid. ``schedulerName`` is not read either: the
    controller's list of names is configurable, and a group of that name exists only if the
    controller took the pod.
    """
    meta = pod.metadata
    if gang_of(pod)[0] is not None:
        return None
    controller = next((r for r in meta.owner_references if r.controller), None)
    uid = controller.uid if controller is not None else meta.uid
    if not uid:
        return None
    return f"{meta.namespace or 'default'}/{VOLCANO_NORMAL_GROUP_PREFIX}{uid}"


def volcano_task(pod: Pod) -> str | None:
    """The Volcano Job task the pod is of, as Volcano's scheduler reads it: annotation
    ``volcano.sh/task-spec``, else the label of that name; None without either."""
    meta = pod.metadata
    return meta.annotations.get(VOLCANO_TASK_SPEC) or meta.labels.get(VOLCANO_TASK_SPEC) or None


_GO_ATOI = re.compile(r"[+-]?[0-9]+")
_GO_INT_MAX = 2**63 - 1
# the scheduling gate Kueue's pod webhook puts on a pod it manages (pkg/controller/jobs/pod: gate)
KUEUE_ADMISSION_GATE = "kueue.x-k8s.io/admission"


def kueue_total_problem(pod: Pod) -> str:
    """Why Kueue cannot read the pod's ``kueue.x-k8s.io/pod-group-total-count`` annotation, naming it
    and its value (or that it is missing); "" when it reads it, or when the pod is of no Kueue pod group.

    Kueue reads the value with Go's ``strconv.Atoi`` (ASCII digits after an optional sign, within
    int64), refuses a count below 1 and fails as well when the annotation is missing
    (kubernetes-sigs/kueue pkg/controller/jobs/pod/pod_controller.go ``groupTotalCount``). Its pod
    webhook refuses such a pod (pod_webhook.go ``validatePodGroupMetadata``: the label and the
    annotation are required together); without the webhook the pod exists, and its reconciler, failing
    on the same read, builds no Workload for the group (``ConstructComposableWorkload`` returns the
    error of ``groupTotalCount``): no group is admitted, and kube-scheduler, which does not read the
    label, places an ungated pod alone, or with the gang another convention names (a coscheduling
    label, a Volcano annotation, ``spec.schedulingGroup``: :func:`gang_of`). So the pod is of no Kueue
    gang, and the problem goes into its pending reason, saying which. A pod that carries Kueue's gate ``kueue.x-k8s.io/admission`` keeps it: Kueue lifts it only
    when it admits the pod's Workload, and there is none; the reason says so rather than that the pod
    is placed.
    """
    if not pod.metadata.labels.get(KUEUE_GROUP_LABEL):
        return ""
    value = pod.metadata.annotations.get(KUEUE_TOTAL_ANNOTATION)
    if value is None:
        wrong = " is missing"
    elif (
        _GO_ATOI.fullmatch(value)
        and len(value.lstrip("+-").lstrip("0")) <= 19
        and 1 <= int(value) <= _GO_INT_MAX
    ):
        return ""  # 19 digits at most: Python's int() refuses past 4,300, Go past int64
    else:
        shown = repr(value) if len(value) <= 40 else f"{value[:40]!r}... ({len(value)} characters)"
        wrong = f"={shown} is not a whole number from 1 to {_GO_INT_MAX}"
    return (
        f"annotation {KUEUE_TOTAL_ANNOTATION}{wrong}: Kueue refuses it and admits no group of it, "
        + _refused(pod)
    )


def _refused(pod: Pod) -> str:
    """What becomes of a pod whose Kueue pod group Kueue refuses: its gate stays, or kube-scheduler
    places it as the gang another convention names (:func:`gang_of`, a coscheduling label or Volcano
    annotation first), or as no gang."""
    if any(gate.name == KUEUE_ADMISSION_GATE for gate in pod.spec.scheduling_gates):
        return f"its gate {KUEUE_ADMISSION_GATE} stays until the annotation is fixed"
    other = _gang_but_kueue(pod)
    return f"so the pod is placed only as of gang {other}" if other else "so the pod is placed as no gang"


def gangs_of(obj: KubeObject) -> list[GangInfo]:
    """The gangs a pod group or Workload declares (none for other objects)."""
    namespace = obj.metadata.namespace or "default"
    key = f"{namespace}/{obj.metadata.name}"
    if isinstance(obj, CoschedulingPodGroup):
        return [
            GangInfo(key, "coscheduling", obj.spec.min_member, parse_resource_list(obj.spec.min_resources))
        ]
    if isinstance(obj, VolcanoPodGroup):
        return [_volcano_gang(key, obj)]
    if isinstance(obj, UpstreamPodGroup):
        policy = obj.spec.scheduling_policy
        minimum = policy.gang.min_count if policy and policy.gang else None
        return [GangInfo(key, "kubernetes", minimum or 0)] if minimum else []
    if isinstance(obj, Workload):
        groups = obj.spec.pod_groups + obj.spec.pod_group_templates
        return [
            GangInfo(f"{key}/{g.name}", "kubernetes", g.min_count() or 0) for g in groups if g.min_count()
        ]
    return []


_QUOTA_REQUESTS_PREFIX = "requests."


def volcano_min_requests(raw: Mapping[str, str | int | float] | None) -> Resources:
    """A Volcano PodGroup's ``minResources`` as the requests of the pods it stands for.

    Volcano's controllers write it as ResourceQuota usage, not as requests: its job controller
    (``CalcPGMinResources``) and its podgroup controller for a normal pod (``buildPodGroupFromPod``)
    sum ``util.GetPodQuotaUsage`` over the pods, which is ``quotacore.PodUsageFunc`` (``count/pods``
    and ``pods`` 1; ``cpu`` and ``requests.cpu``, ``limits.cpu``; memory and ephemeral storage alike;
    an extended resource as ``requests.<name>``) with each ``requests.<name>`` of a resource that is
    not native added under ``<name>`` too (volcano-sh/volcano pkg/controllers/util/util.go, its
    util_test.go ``TestGetPodQuotaUsage``). So: object counts (``count/*``, ``pods``: every virtual
    pod takes its pod slot anyway) and limits are dropped, and ``requests.<name>`` is read as
    ``<name>``; the larger where both are written. A hand-written ``minResources`` in plain names is
    read as it is."""
    out: Resources = {}
    for name, value in parse_resource_list(raw).items():
        if name == PODS or name.startswith(("count/", "limits.")):
            continue
        name = name.removeprefix(_QUOTA_REQUESTS_PREFIX)
        out[name] = max(out.get(name, 0), value)
    return out


# The controllers that make their pods whatever a PodGroup's phase (the API server's own: they know no
# PodGroup), by (apiVersion, kind) of a PodGroup's controller ownerReference; a Pod owns the group
# Volcano makes for a pod of no controller, and the group LeaderWorkerSet makes for a replica's leader
VOLCANO_POD_OWNERS = frozenset(
    {
        ("v1", "Pod"),
        ("apps/v1", "ReplicaSet"),
        ("apps/v1", "Deployment"),
        ("apps/v1", "StatefulSet"),
        ("apps/v1", "DaemonSet"),
        ("batch/v1", "Job"),
    }
)


def volcano_made_for_pods(group: VolcanoPodGroup) -> bool:
    """Whether the PodGroup was made for the pods of a controller that makes them itself, whatever the
    group's phase: by Volcano's podgroup controller for a "normal" pod, or by LeaderWorkerSet for one
    replica. Only Volcano's Job controller (and the training operators) hold a job's pods back until
    its group is ``Inqueue``; such a group without pods is no demand: it is left over (a ReplicaSet
    scaled to zero: Volcano before it deleted such groups left them, and its scheduler turns a group
    with fewer members than ``minMember`` back to ``Pending``), and its ``minResources`` would launch
    nodes for pods no one makes.

    The ownership says it first. Volcano sets no annotation or label of its own on such a group; it
    makes the group's ownerReferences the pod's when one of them is a controller, else a controller
    reference to the pod (volcano-sh/volcano pkg/controllers/podgroup/pg_controller_handler.go,
    ``buildPodGroupFromPod``, ``newPGOwnerReferences``). LeaderWorkerSet's Volcano provider names a
    replica's group ``<lws>-<index>-<revision>`` and makes the replica's leader Pod its controller
    (kubernetes-sigs/lws pkg/schedulerprovider/volcano_provider.go, ``CreatePodGroupIfNotExists``:
    ``SetControllerReference(leaderPod, ...)``); the garbage collector deletes it with that pod. So a
    controller owner among :data:`VOLCANO_POD_OWNERS` (a Pod, a ReplicaSet, Deployment, StatefulSet or
    DaemonSet, a batch/v1 Job: none of them reads a PodGroup) is enough, whatever the name (Volcano's
    design note docs/design/Enhance-Generate-PodGroup-OwnerReferences-for-Normal-Pod.md would own the
    group by a Deployment while its name keeps the ReplicaSet's uid). For the pods of any other
    controller (a workflow engine's, say) the name tells: ``podgroup-<uid>`` of the group's controller
    owner, the name Volcano gives it (:func:`volcano_normal_group`). A batch.volcano.sh Job's group is
    never this, whatever its name."""
    owner = next((r for r in group.metadata.owner_references if r.controller), None)
    if owner is None or owner.api_version.startswith(f"{VOLCANO_BATCH_GROUP}/"):
        return False
    if (owner.api_version, owner.kind) in VOLCANO_POD_OWNERS:
        return True
    return bool(owner.uid) and group.metadata.name == f"{VOLCANO_NORMAL_GROUP_PREFIX}{owner.uid}"


def _volcano_gang(key: str, group: VolcanoPodGroup) -> GangInfo:
    spec = group.spec
    return GangInfo(
        key,
        "volcano",
        spec.min_member,
        volcano_min_requests(spec.min_resources),
        pending=group.status.phase in VOLCANO_PENDING_PHASES and not volcano_made_for_pods(group),
        task_minimums={task: n for task, n in sorted(spec.min_task_member.items()) if n > 0},
        priority_class=spec.priority_class_name or "",
    )


def gang_priorities(gangs: Sequence[GangInfo], classes: Sequence[PriorityClass]) -> list[GangInfo]:
    """The gangs, each Volcano PodGroup with the priority Volcano's scheduler orders its job by: the
    value of the PriorityClass its ``priorityClassName`` names, or, when it names none or one that does
    not exist, the global default class's (0 without one), as its cache resolves it (volcano-sh/volcano
    pkg/scheduler/cache/cache.go, ``Snapshot``: ``JobInfo.Priority`` starts at ``defaultPriority``,
    which ``addPriorityClass`` takes from the globalDefault class, and only a class the PodGroup names
    replaces it; the priority plugin's ``JobOrderFn`` compares it). Without ``classes`` none were read
    (the API server always has ``system-node-critical``; a List may leave the kind out): the priority
    stays unknown. Other kinds of gang are left as they are: scheduler-plugins' PodGroup has no
    priority of its own (coscheduling's ``Less`` compares the pods'). Of two global default classes (a
    race the admission check allows), the lowest valued is the default, as the Priority admission
    plugin takes it for the job's pods (plugin/pkg/admission/priority/admission.go,
    getDefaultPriorityClass) and the PriorityClass API documents it; Volcano's cache keeps whichever
    it added last (event_handlers.go, addPriorityClass), an order no reader of the API can know."""
    if not classes:
        return list(gangs)
    values = {c.metadata.name: c.value for c in classes}
    default = min((c.value for c in classes if c.global_default), default=0)
    return [
        replace(gang, priority=values.get(gang.priority_class, default)) if gang.source == "volcano" else gang
        for gang in gangs
    ]


def tenant_of(obj: KubeObject) -> tuple[str, str] | None:
    """``(namespace, tenant)`` for a Namespace labelled ``spillway.io/tenant``."""
    if isinstance(obj, Namespace):
        tenant = obj.metadata.labels.get(TENANT_LABEL)
        if tenant:
            return obj.metadata.name, tenant
    return None


def quota_of(obj: KubeObject) -> QuotaInfo | None:
    if not isinstance(obj, CapacityQuota):
        return None
    used = obj.status.used
    return QuotaInfo(
        name=obj.metadata.name,
        selector=selector_requirements(obj.spec.selector),
        limits=parse_resource_list(obj.spec.limits.resources),
        used=parse_resource_list(used.resources) if used else {},
        invalid=quota_problem(obj),
    )


# The status condition by which cluster-autoscaler says whether it enforces a CapacityQuota, newest API
# first: v1beta1's (kubernetes/autoscaler cluster-autoscaler/apis/capacityquota/autoscaling.x-k8s.io/
# v1beta1/capacityquota_types.go, CapacityQuotaStatus.Conditions: cluster-autoscaler manages
# cluster-autoscaler.kubernetes.io/valid and enforces the quota only while it is True; not part of the
# public API), then v1alpha1's before it (ValidCondition "Valid": enforced only with Valid=True)
QUOTA_VALID_CONDITIONS = ("cluster-autoscaler.kubernetes.io/valid", "Valid")


def quota_verdict(quota: CapacityQuota) -> StatusCondition | None:
    """The valid condition that speaks for the quota's current spec, else ``None``.

    Conditions are a list keyed by ``type`` (``+listType=map +listMapKey=type`` in both versions'
    capacityquota_types.go: the API server refuses a second condition of one type), and a reader takes
    the first of a type (k8s.io/apimachinery pkg/api/meta conditions.go, ``FindStatusCondition``), so a
    repeated type in a file not from a server does not decide either. A condition whose
    ``observedGeneration`` is below ``metadata.generation`` judged an older spec (metav1.Condition's
    field documentation) and is not read; for one without it (the field is optional), v1beta1's
    ``status.observedGeneration``, the generation its controller last observed, dates it. Of the two types, v1beta1's decides where it speaks for this
    spec (the type its API names as the one cluster-autoscaler manages): a writer of one type leaves the
    others as they were (``meta.SetStatusCondition`` replaces only the condition of its own type), so a
    ``Valid=False`` an earlier release left beside a current ``cluster-autoscaler.kubernetes.io/valid=True``
    is no verdict."""
    generation = quota.metadata.generation
    for kind in QUOTA_VALID_CONDITIONS:
        cond = next((c for c in quota.status.conditions if c.type == kind), None)
        if cond is None:
            continue
        seen = cond.observed_generation
        if seen is None:
            seen = quota.status.observed_generation
        if generation is not None and seen is not None and seen < generation:
            continue
        return cond
    return None


def quota_problem(quota: CapacityQuota) -> str:
    """Why the CapacityQuota is not enforced, else ``""``.

    cluster-autoscaler enforces a quota only when its own controller found it valid: its validator
    converts ``spec.selector`` with ``metav1.LabelSelectorAsSelector`` (kubernetes/autoscaler
    cluster-autoscaler/resourcequotas/capacityquota/validator.go), and its provider skips a quota whose
    selector does not convert (provider.go, "Skipping CapacityQuota"). Spillway is the quota's
    controller here and runs the same check (:func:`selector_problem`). An operator other than the
    four never gets here: the model refuses it, and the quota is skipped as it is read. The valid
    condition that speaks for the quota's current spec (:func:`quota_verdict`) ``False``
    (cluster-autoscaler's verdict on this very spec, left by one that ran before, or another provider's
    validator) is honoured too: the quota says it is not enforced. No such condition is no verdict:
    Spillway does not wait for one that only cluster-autoscaler writes."""
    problem = selector_problem(quota.spec.selector, "spec.selector")
    if problem:
        return problem
    cond = quota_verdict(quota)
    if cond is None or cond.status != "False":
        return ""
    detail = ": ".join(x for x in (cond.reason, cond.message) if x)
    return f"status.conditions {cond.type}=False" + (f" ({detail})" if detail else "")


# apimachinery pkg/util/validation: IsQualifiedName's name part, IsDNS1123Subdomain (a label key's
# prefix), IsValidLabelValue (empty, or a name part); matched whole (re.fullmatch, as Go's anchored ``$``)
_LABEL_NAME_FORM = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_DNS_SUBDOMAIN_FORM = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"


def _label_key_problem(key: str) -> str:
    """Why ``key`` is no label key (``validation.IsQualifiedName``), else ``""``: at most one ``/``; a
    prefix before it non-empty, a lower-case DNS-1123 subdomain of at most 253 characters; the name
    non-empty, at most 63 alphanumerics, ``-``, ``_`` or ``.``, beginning and ending alphanumeric."""
    prefix, slash, name = key.rpartition("/")
    if "/" in prefix:
        return "is not a qualified name (at most one '/')"
    if slash and not (0 < len(prefix) <= 253 and re.fullmatch(_DNS_SUBDOMAIN_FORM, prefix)):
        return "has a prefix that is not a lower-case DNS-1123 subdomain of at most 253 characters"
    if not (0 < len(name) <= 63 and re.fullmatch(_LABEL_NAME_FORM, name)):
        return "has a name part that is not 1 to 63 alphanumerics, '-', '_' or '.', alphanumeric at both ends"
    return ""


def _label_value_ok(value: str) -> bool:
    """``validation.IsValidLabelValue``: empty, or at most 63 characters as a key's name part."""
    return value == "" or (len(value) <= 63 and re.fullmatch(_LABEL_NAME_FORM, value) is not None)


def label_problem(key: str, value: str) -> str:
    """Why ``key: value`` is no Kubernetes label (the key as :func:`_label_key_problem`, the value as
    ``validation.IsValidLabelValue``), naming the part at fault; ``""`` for a label."""
    why = _label_key_problem(key)
    if why:
        return f"key {key!r} {why}"
    if not _label_value_ok(value):
        return (
            f"value {value!r} of {key!r} is not a label value (empty, or at most 63 alphanumerics, '-', '_' "
            "or '.', alphanumeric at both ends)"
        )
    return ""


def selector_problem(selector: LabelSelector | None, path: str) -> str:
    """Why ``metav1.LabelSelectorAsSelector`` refuses ``selector`` (at ``path``), else ``""``.

    It makes one ``labels.NewRequirement`` of each ``matchLabels`` entry (``=``, the one value) and of
    each ``matchExpressions`` entry, and that refuses (k8s.io/apimachinery pkg/labels/selector.go): a
    key that is not a qualified name; ``In``/``NotIn`` without values, ``Exists``/``DoesNotExist`` with
    some; any value that is not a label value. A null or empty selector converts."""
    if selector is None:
        return ""
    for key, value in sorted(selector.match_labels.items()):
        why = _label_key_problem(key)
        if why:
            return f"{path}.matchLabels key {key!r} {why}"
        if not _label_value_ok(value):
            return f"{path}.matchLabels[{key}] {value!r} is not a label value"
    for i, req in enumerate(selector.match_expressions):
        where = f"{path}.matchExpressions[{i}]"
        why = _label_key_problem(req.key)
        if why:
            return f"{where}.key {req.key!r} {why}"
        if (req.operator in ("In", "NotIn")) != bool(req.values):
            wanted = "must be non-empty" if req.operator in ("In", "NotIn") else "must be empty"
            return f"{where}.values {wanted} for operator {req.operator}"
        bad = next((j for j, v in enumerate(req.values) if not _label_value_ok(v)), None)
        if bad is not None:
            return f"{where}.values[{bad}] {req.values[bad]!r} is not a label value"
    return ""
