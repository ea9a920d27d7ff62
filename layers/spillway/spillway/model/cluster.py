"""The planner's view of a cluster: compact, immutable records distilled from Kubernetes objects.

A :class:`ClusterSnapshot` holds what the planner needs and nothing more (no managed fields, no
container images, no env), so it is small enough to store every tick and fast to plan on. It
round-trips through plain JSON-able dicts (:meth:`ClusterSnapshot.to_dict` / ``from_dict``).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from itertools import chain
from typing import TYPE_CHECKING, Any

from spillway.model.fleet import FleetInstance
from spillway.model.jobs import (
    JOB_TRACKING_FINALIZER,
    FailedPod,
    JobInfo,
    counts_failure,
    do_not_drain,
    flag,
    job_key,
    job_of,
    pod_job_facts,
    volcano_preemptable,
)
from spillway.model.k8s import (
    BATCH_GROUP,
    CONSUME_ANNOTATION,
    CORDONED_BY_SPILLWAY,
    COSCHEDULING_LABEL,
    DAEMONSET_POD,
    DO_NOT_DISRUPT,
    DRAINING_TAINT,
    EXCLUDE_FROM_LB_LABEL,
    EXCLUDE_FROM_LB_VALUE,
    GIVE_BACK_LEASE_MINUTES,
    GIVE_BACKS,
    GROUP_REPLACED_PREFIXES,
    GROUP_REPLACES,
    HELD_DRAIN,
    LB_EXCLUDED_BY_SPILLWAY,
    LEGACY_CONSUME_ANNOTATION,
    MIRROR_POD,
    POD_DELETION_COST,
    POD_SCALE_UP_DELAY,
    SAFE_TO_EVICT,
    SAFE_TO_EVICT_LOCAL_VOLUMES,
    SCALE_DOWN_DISABLED,
    Affinity,
    CapacityBuffer,
    Condition,
    ConfigMap,
    CSINode,
    DaemonSet,
    KubeObject,
    Namespace,
    Node,
    NodeSelector,
    OwnerReference,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodAffinityTerm,
    PodDisruptionBudget,
    PodTemplate,
    PriorityClass,
    ResourceQuota,
    Scalable,
    StorageClass,
    Volume,
    VolumeAttachment,
    VolumeObject,
    api_group,
    deletion_cost,
)
from spillway.model.options import parse_duration_minutes
from spillway.model.priorities import CONFIGMAP_NAME, CONFIGMAP_NAMESPACE, Priorities, configmap_priorities
from spillway.model.resources import (
    Resources,
    attach_limit_key,
    capacity_delta,
    parse_resource_list,
    with_capacity,
)
from spillway.model.shared import (
    GangInfo,
    LabelRequirement,
    QuotaInfo,
    gang_of,
    gang_priorities,
    gangs_of,
    kueue_total_problem,
    quota_of,
    selector_matches,
    selector_requirements,
    tenant_of,
    volcano_normal_group,
    volcano_task,
)
from spillway.model.utc import aware

if TYPE_CHECKING:
    from spillway.model.buffer import BufferInfo, NewestPods
    from spillway.model.daemonsets import DaemonSetInfo
    from spillway.model.provreq import ProvisioningRequestInfo

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
# a pod in these phases is evicted without looking at any PodDisruptionBudget (the eviction
# subresource's canIgnorePDB; a deleted pod too, which the disruption predicates take apart)
BUDGETS_IGNORED_PHASES = TERMINAL_PHASES | {"Pending"}

# (key, operator, values) of a node selector requirement; key "metadata.name" with field=True
# stands for a matchFields requirement on the node's name.
Requirement = tuple[str, str, tuple[str, ...], bool]
# A term holds when all its requirements hold; required affinity holds when any term holds.
Term = tuple[Requirement, ...]
# (key, operator, value, effect) with None for "any".
TolerationT = tuple[str | None, str, str | None, str | None]
TaintT = tuple[str, str | None, str]


def parse_time(value: str | None) -> datetime | None:
    """An RFC 3339 time as the API server or a custom resource's status holds it. RFC 3339 (section 5.6)
    lets ``T`` and ``Z`` be written in lowercase, and a custom resource's ``date-time`` field is stored as
    written; a time without an offset is taken as UTC, as :func:`cordon_time` takes one, so that it
    compares with the plan's clock. Raises ValueError for text that is no time."""
    if not value:
        return None
    stamp = datetime.fromisoformat(value.strip().upper().replace("Z", "+00:00"))
    return aware(stamp)


def format_time(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.isoformat().replace("+00:00", "Z")


DEFAULT_GRACE_SECONDS = 30  # a pod's terminationGracePeriodSeconds when it gives none
# Kubernetes' SystemCriticalPriority (pkg/apis/scheduling/types.go): the value of system-cluster-critical;
# system-node-critical's is 1000 above it, and a user's PriorityClass may be at most 1000000000
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000


def is_critical(priority: int) -> bool:
    """A critical pod's priority (system-cluster-critical or system-node-critical: CoreDNS, a CSI or
    CNI controller), which a drain evicts only once the node's other pods are gone
    (``spillway.act.drain._critical_held``) and the planner judges so (``spillway.planner.disruption
    .waits_for_others``): the one definition both read."""
    return priority >= SYSTEM_CRITICAL_PRIORITY


STUCK_MARGIN = timedelta(seconds=30)


def stuck_after(deleted: datetime | None, grace: int | None) -> datetime | None:
    """When a terminating pod still there counts as stuck (cluster-autoscaler's long-terminating pods):
    its ``deletionTimestamp`` (the time its grace period ends) plus its ``terminationGracePeriodSeconds``
    again plus 30 s. By then a kubelet would have killed it and the API removed it; a pod still listed
    runs on a node whose kubelet is gone, and no longer holds anything up. None when not deleted."""
    if deleted is None:
        return None
    seconds = DEFAULT_GRACE_SECONDS if grace is None else grace
    return deleted + timedelta(seconds=min(seconds, 10**9)) + STUCK_MARGIN


@dataclass(frozen=True, slots=True)
class PodInfo:
    namespace: str
    name: str
    requests: Resources
    node_name: str | None = None
    phase: str = "Pending"
    node_selector: tuple[tuple[str, str], ...] = ()
    required_terms: tuple[Term, ...] = ()
    tolerations: tuple[TolerationT, ...] = ()
    priority: int = 0
    # its own required node affinity when its volumes' topology was folded into required_terms
    # (VolumeMatcher), else None: a spread's nodeAffinityPolicy Honor counts the nodes that pass the
    # pod's own nodeSelector and affinity, not its volumes' (podtopologyspread, GetRequiredNodeAffinity)
    own_terms: tuple[Term, ...] | None = None
    owner_kind: str | None = None
    owner_name: str | None = None
    daemonset: bool = False
    mirror: bool = False
    unschedulable: bool = False
    pending_since: datetime | None = None
    safe_to_evict: bool | None = None  # the safe-to-evict annotation: "true", "false", else None
    do_not_disrupt: bool = False
    terminating: bool = False  # metadata.deletionTimestamp is set
    # a terminating pod still there after this is stuck: no kubelet is left to stop it (see stuck_after)
    stuck_after: datetime | None = None
    # a terminating pod's metadata.deletionTimestamp: the API server sets it to the deletion's time plus
    # its grace period (deletionGracePeriodSeconds), which the kubelet gives the pod before it kills it;
    # it may be moved earlier, never later. None when not terminating (or in a snapshot written before)
    leaves_at: datetime | None = None
    # The owner above is the pod's controller (an ownerReference with controller: true); False when
    # only a non-controller owner exists, so nothing would recreate the pod.
    owner_is_controller: bool = True
    # the controller's metadata.uid, kept only for a bound pod whose tolerations may admit the drain's
    # cordon or taint (_may_stay): a plan's drain names such a pod's controller, and takes the pod that
    # controller makes in its place as the same workload (spillway.act.drain.successors)
    owner_uid: str = ""
    deletion_cost: int = 0  # controller.kubernetes.io/pod-deletion-cost
    # metadata.uid, kept only for pods pending unschedulable: the plan posts its Events on them, and
    # `kubectl describe pod` selects Events by involvedObject.uid (other pods' uids would only bloat
    # the snapshot).
    uid: str = ""
    gang: str | None = None  # "<namespace>/<pod group>" of any gang convention (spillway.model.shared)
    gang_min: int = 0  # the pod's own word on the gang's size (Kueue's pod-group-total-count), else 0
    gang_task: str | None = None  # a gang member's Volcano task (volcano.sh/task-spec), for minTaskMember
    # what of the pod's metadata could not be read, naming the key and value (Kueue's pod-group-total-count:
    # spillway.model.shared.kueue_total_problem); the planner adds it to the pod's pending reason
    problem: str = ""
    # its gang is named by the label scheduling.x-k8s.io/pod-group: coscheduling's, which denies the pod
    # while its namespace holds no PodGroup of that name (ClusterSnapshot.coscheduling_served)
    coscheduled: bool = False
    gated: bool = False  # spec.schedulingGates is not empty: not for the scheduler (nor us) yet
    claims_devices: bool = False  # spec.resourceClaims is not empty: devices through DRA
    nominated: str | None = None  # status.nominatedNodeName: preemption makes room there
    never_preempts: bool = False  # spec.preemptionPolicy is Never: kube-scheduler preempts nothing for it
    one_zone: bool = False  # its gang must run in one zone (Kueue topology or a required pod affinity)
    # the ProvisioningRequest (same namespace) whose capacity the pod uses (consume annotation)
    consumes: str | None = None
    # its creationTimestamp plus its pod-scale-up-delay annotation, kept for pods not bound only: until
    # then it triggers no scale-up (spillway.planner.classes.hold_young)
    scale_up_after: datetime | None = None
    # metadata.creationTimestamp, kept for pods not bound only: kube-scheduler's queue serves pods of
    # equal priority in the order they were queued, a new pod at its creation (PodClass.sort_key)
    created_at: datetime | None = None
    # -- may the autoscaler move it (spillway.planner.disruption.assess_move; spillway.model.jobs) --
    do_not_drain: bool = False  # openai/do-not-drain "1" or "true", any case (label, or annotation)
    preemptable: bool = False  # volcano.sh/preemptable true (its annotation, else its label)
    started_at: datetime | None = None  # status.startTime, kept for bound pods only (its age)
    # bound, Pending, and no container of it ever ran (Pod.never_started), kept for bound pods only: on a
    # node long NotReady it never will (spillway.planner.disruption.never_started). Stored as a flag set
    # only when true, so a snapshot written before it says "started", as it was judged then.
    unstarted: bool = False
    # spec.activeDeadlineSeconds, kept for bound pods only: the kubelet fails the pod that many seconds
    # after started_at, so it ends by then (spillway.planner.durations)
    active_deadline: int | None = None
    # spec.terminationGracePeriodSeconds (30 when unset), kept for bound pods only and stored only when not
    # 30: a drain's eviction gives the pod that long to stop, so long its room stays taken
    # (spillway.planner.disruption.evicted_late)
    grace: int = DEFAULT_GRACE_SECONDS
    job: str | None = None  # "<Kind>/<namespace>/<name>" of the job a label names
    job_role: str | None = None  # training.kubeflow.org/replica-type, lower case
    batch_job: str | None = None  # batch.kubernetes.io/job-name: its batch/v1 Job
    elastic_min: int = 0  # the pod's own word on its elastic job's size (PET_NNODES, torchrun
    elastic_max: int = 0  # --nnodes=MIN:MAX); both 0 when it says nothing or no range
    # its launcher's command line says the node count (torchrun --nnodes), which beats its job's
    # elasticPolicy; with no range above, a fixed count or one that cannot be read (spillway.model.jobs)
    by_launcher: bool = False
    rdzv_host: bool = False  # it hosts its elastic job's c10d rendezvous (PET_RDZV_ENDPOINT names it)
    no_restarts: bool = False  # its torchrun restarts no worker group (--max-restarts 0, the default)
    # its controller is a batch/v1 Job, which counts an evicted pod as a failure unless its
    # podFailurePolicy ignores DisruptionTarget (not Volcano's Job, also of kind Job)
    batch_owned: bool = False
    # being deleted, of a batch/v1 Job, and without the Job's batch.kubernetes.io/job-tracking
    # finalizer: the job controller counted it as failed already (status.failed, or
    # uncountedTerminatedPods), and removes the finalizer only once it has (spillway.model.jobs); or
    # with it still on while its uid is in the Job's uncountedTerminatedPods.failed (UncountedFailures)
    job_counted: bool = False
    # batch.kubernetes.io/job-index-failure-count: the failures of its index so far, which the job
    # controller writes on an Indexed Job's pods under backoffLimitPerIndex (JobInfo.per_index_limit)
    index_failures: int | None = None
    pdbs: tuple[str, ...] = ()  # the PodDisruptionBudgets (same namespace) that select it
    # the volumes whose data lives on its node only and is lost with the pod (or the node): emptyDir on
    # the node's disk, hostPath, less those named in safe-to-evict-local-volumes (local_volumes); kept
    # for bound pods only
    local_storage: tuple[str, ...] = ()
    # its Ready condition is True, kept for the pods the Eviction API holds to their budgets (not
    # Pending, Succeeded or Failed): False only for such a pod that is not Ready, an "unhealthy" pod
    # its budget's unhealthyPodEvictionPolicy may let go (ClusterSnapshot.pdb_allowance)
    ready: bool = True
    # pod topology (TopologyMatcher): the ids of its own required anti-affinity terms, with their
    # topology keys; its DoNotSchedule spread constraints (id, topology key, maxSkew, minDomains, node
    # inclusion flags: SPREAD_ALL_NODES, SPREAD_TOLERATED_NODES); and
    # the ids of every term or constraint (its own or another pod's) whose selector matches it. An id
    # names one distinct selector within one snapshot.
    anti_own: tuple[tuple[int, str], ...] = ()
    affinity_own: tuple[tuple[int, str], ...] = ()  # its required pod affinity terms, likewise
    # the node ports its containers take (hostPort, protocol, hostIP): no two pods share one on a node
    host_ports: tuple[tuple[int, str, str], ...] = ()
    spread: tuple[tuple[int, str, int, int, int], ...] = ()
    selected_by: tuple[int, ...] = ()
    # why kube-scheduler holds it whatever nodes there are: a claim of its that binds at once and is
    # not bound, or is missing or being deleted (VolumeMatcher); None for every other pod
    volume_wait: str | None = None
    # the unique names (``<driver>/<handle>``) of the volumes it uses that a CSI driver's attach limit
    # counts (VolumeMatcher), a claim's volume yet to be made among them (named by the claim, so the
    # pods of one claim share it): a node whose pods use one already counts it once (NodeVolumeLimits)
    volumes: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def healthy_for_budgets(self) -> bool:
        """The disruption controller counts it in its budgets' ``currentHealthy``: Ready and not being
        deleted (kubernetes pkg/controller/disruption, countHealthyPods). :attr:`ready` reads True for a
        Pending or finished pod (their budgets hold no eviction of theirs), which has no Ready
        condition that is True, so those phases are not healthy here."""
        return self.ready and not self.terminating and self.phase not in BUDGETS_IGNORED_PHASES

    @property
    def controlled(self) -> bool:
        """A controller (ReplicaSet, Job, StatefulSet...) would recreate the pod."""
        return self.owner_kind is not None and self.owner_is_controller

    @property
    def is_workload(self) -> bool:
        """A pod whose eviction would stop somebody's work: not a DaemonSet's, not a mirror, running."""
        return not (self.daemonset or self.mirror or self.terminal)

    def is_pending_unschedulable(self) -> bool:
        """Unbound, not terminal, and marked Unschedulable by the scheduler; DaemonSet pods excluded, and
        pods being deleted: kube-scheduler places none (pkg/scheduler/schedule_one.go, skipPodSchedule),
        and an unbound one still listed is kept only by a finalizer (Kueue's ``kueue.x-k8s.io/managed``
        on the pods of a group it evicted), its PodScheduled=False left from before."""
        return (
            self.node_name is None
            and not self.terminal
            and self.unschedulable
            and not self.daemonset
            and not self.gated
            and not self.terminating
        )

    def scheduling_key(self) -> tuple[Any, ...]:
        """Pods with equal keys are interchangeable for the planner: one equivalence class."""
        return (
            tuple(sorted(self.requests.items())),
            self.node_selector,
            self.required_terms,
            self.tolerations,
            self.priority,
            self.own_terms,
            self.never_preempts,
            self.anti_own,
            self.affinity_own,
            self.host_ports,
            self.spread,
            self.selected_by,
            self.volume_wait,
        )

    @classmethod
    def from_pod(cls, pod: Pod) -> PodInfo:
        meta, spec, status = pod.metadata, pod.spec, pod.status
        owner, is_controller = _owner(meta.owner_references)
        unschedulable, pending_since = _unschedulable(status.conditions)
        annotations = meta.annotations
        gang, gang_min = gang_of(pod)
        return cls(
            namespace=meta.namespace or "default",
            name=meta.name,
            requests=pod.effective_requests(),
            node_name=spec.node_name,
            phase=status.phase or "Pending",
            node_selector=tuple(sorted(spec.node_selector.items())),
            required_terms=_required_terms(spec.affinity),
            tolerations=tuple(
                sorted(
                    ((t.key, t.operator or "Equal", t.value, t.effect) for t in spec.tolerations), key=repr
                )
            ),
            priority=spec.priority or 0,
            owner_kind=owner.kind if owner else None,
            owner_name=owner.name if owner else None,
            daemonset=_daemonset(owner, is_controller, annotations),
            mirror=MIRROR_POD in annotations,
            unschedulable=unschedulable,
            pending_since=pending_since,
            safe_to_evict=_flag(annotations.get(SAFE_TO_EVICT)),
            do_not_disrupt=annotations.get(DO_NOT_DISRUPT, "").lower() == "true",
            terminating=meta.deletion_timestamp is not None,
            stuck_after=stuck_after(meta.deletion_timestamp, spec.termination_grace_period_seconds),
            leaves_at=meta.deletion_timestamp,
            owner_is_controller=is_controller,
            owner_uid=_owner_uid(pod, owner if is_controller else None),
            deletion_cost=_deletion_cost(annotations),
            uid=meta.uid if unschedulable and spec.node_name is None else "",
            gang=gang,
            gang_min=gang_min,
            gang_task=volcano_task(pod) if gang else None,
            problem=kueue_total_problem(pod),
            coscheduled=bool(meta.labels.get(COSCHEDULING_LABEL)),
            gated=bool(spec.scheduling_gates),
            claims_devices=bool(spec.resource_claims),
            nominated=status.nominated_node_name or None,
            never_preempts=spec.preemption_policy == "Never",
            one_zone=_one_zone(pod),
            host_ports=_host_ports(pod),
            consumes=annotations.get(CONSUME_ANNOTATION)
            or annotations.get(LEGACY_CONSUME_ANNOTATION)
            or None,
            scale_up_after=_scale_up_after(pod),
            created_at=_created_if_unbound(pod),
            **_move_facts(pod),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ns": self.namespace, "n": self.name, "r": self.requests}
        for key, encode in _POD_SHORT_KEYS:
            value = encode(self)
            if value is not None:
                out[key] = value
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PodInfo:
        return cls(
            namespace=d["ns"],
            name=d["n"],
            requests=dict(d["r"]),
            node_name=d.get("node"),
            phase=d.get("ph", "Pending"),
            node_selector=tuple((k, v) for k, v in d.get("sel", ())),
            required_terms=tuple(
                tuple((k, op, tuple(v), bool(f)) for k, op, v, f in term) for term in d.get("aff", ())
            ),
            tolerations=tuple((k, op, v, e) for k, op, v, e in d.get("tol", ())),
            priority=d.get("pri", 0),
            own_terms=_terms_from(d["oaff"]) if d.get("oaff") is not None else None,
            owner_kind=d.get("ok"),
            owner_name=d.get("on"),
            daemonset=bool(d.get("ds")),
            mirror=bool(d.get("mir")),
            unschedulable=bool(d.get("us")),
            pending_since=parse_time(d.get("ps")),
            safe_to_evict=d.get("ste"),
            do_not_disrupt=bool(d.get("dnd")),
            terminating=bool(d.get("del")),
            stuck_after=parse_time(d.get("stk")),
            leaves_at=parse_time(d.get("lv")),
            owner_is_controller=not d.get("onc"),
            owner_uid=str(d.get("ou", "")),
            deletion_cost=int(d.get("dc", 0)),
            uid=str(d.get("uid", "")),
            gang=d.get("g"),
            gang_min=int(d.get("gm", 0)),
            gang_task=d.get("gtk"),
            problem=str(d.get("pbm", "")),
            coscheduled=bool(d.get("cs")),
            gated=bool(d.get("gt")),
            claims_devices=bool(d.get("dra")),
            nominated=d.get("nom"),
            never_preempts=bool(d.get("npp")),
            one_zone=bool(d.get("oz")),
            consumes=d.get("cpr"),
            scale_up_after=parse_time(d.get("sua")),
            created_at=parse_time(d.get("cr")),
            do_not_drain=bool(d.get("odn")),
            preemptable=bool(d.get("vp")),
            started_at=parse_time(d.get("st")),
            unstarted=bool(d.get("nst")),
            active_deadline=_int_or_none(d.get("ads")),
            grace=int(d.get("tgp", DEFAULT_GRACE_SECONDS)),
            job=d.get("job"),
            job_role=d.get("jr"),
            batch_job=d.get("bj"),
            elastic_min=int(d.get("el", (0, 0))[0]),
            elastic_max=int(d.get("el", (0, 0))[1]),
            by_launcher=bool(d.get("bl")),
            rdzv_host=bool(d.get("rdz")),
            no_restarts=bool(d.get("mr0")),
            batch_owned=bool(d.get("bo")),
            job_counted=bool(d.get("jc")),
            index_failures=_int_or_none(d.get("ixf")),
            pdbs=tuple(d.get("pdb", ())),
            local_storage=tuple(d.get("ls", ())),
            ready=not d.get("nr"),
            anti_own=tuple((int(i), str(k)) for i, k in d.get("ao", ())),
            affinity_own=tuple((int(i), str(k)) for i, k in d.get("pa", ())),
            host_ports=tuple((int(p), str(proto), str(ip)) for p, proto, ip in d.get("hp", ())),
            spread=tuple(
                (int(i), str(k), int(s), int(m), int(f[0]) if f else 0) for i, k, s, m, *f in d.get("sp", ())
            ),
            selected_by=tuple(int(i) for i in d.get("sb", ())),
            volume_wait=d.get("vw"),
            volumes=tuple(str(v) for v in d.get("cv", ())),
        )


def _terms_to(terms: tuple[Term, ...]) -> list[Any]:
    return [[[k, op, list(v), f] for k, op, v, f in term] for term in terms]


def _terms_from(raw: Any) -> tuple[Term, ...]:
    return tuple(tuple((k, op, tuple(v), bool(f)) for k, op, v, f in term) for term in raw)


def _one_if(flag: bool) -> int | None:
    return 1 if flag else None


# The optional keys of PodInfo.to_dict, in order; an encoder returning None leaves its key out.
_POD_SHORT_KEYS: tuple[tuple[str, Callable[[PodInfo], Any]], ...] = (
    ("node", lambda p: p.node_name),
    ("ph", lambda p: None if p.phase == "Pending" else p.phase),
    ("sel", lambda p: [list(x) for x in p.node_selector] or None),
    ("aff", lambda p: [[[k, op, list(v), f] for k, op, v, f in term] for term in p.required_terms] or None),
    ("tol", lambda p: [list(t) for t in p.tolerations] or None),
    ("pri", lambda p: p.priority or None),
    ("oaff", lambda p: None if p.own_terms is None else _terms_to(p.own_terms)),
    ("ok", lambda p: p.owner_kind or None),
    ("on", lambda p: p.owner_name if p.owner_kind else None),
    ("ds", lambda p: _one_if(p.daemonset)),
    ("mir", lambda p: _one_if(p.mirror)),
    ("us", lambda p: _one_if(p.unschedulable)),
    ("ps", lambda p: format_time(p.pending_since)),
    ("ste", lambda p: p.safe_to_evict),
    ("dnd", lambda p: _one_if(p.do_not_disrupt)),
    ("del", lambda p: _one_if(p.terminating)),
    ("stk", lambda p: format_time(p.stuck_after)),
    ("lv", lambda p: format_time(p.leaves_at)),
    ("onc", lambda p: _one_if(bool(p.owner_kind) and not p.owner_is_controller)),
    ("ou", lambda p: p.owner_uid or None),
    ("dc", lambda p: p.deletion_cost or None),
    ("uid", lambda p: p.uid or None),
    ("g", lambda p: p.gang),
    ("gm", lambda p: p.gang_min or None),
    ("gtk", lambda p: p.gang_task),
    ("pbm", lambda p: p.problem or None),
    ("cs", lambda p: _one_if(p.coscheduled)),
    ("gt", lambda p: _one_if(p.gated)),
    ("dra", lambda p: _one_if(p.claims_devices)),
    ("nom", lambda p: p.nominated),
    ("npp", lambda p: _one_if(p.never_preempts)),
    ("oz", lambda p: _one_if(p.one_zone)),
    ("cpr", lambda p: p.consumes),
    ("sua", lambda p: format_time(p.scale_up_after)),
    ("cr", lambda p: format_time(p.created_at)),
    ("odn", lambda p: _one_if(p.do_not_drain)),
    ("vp", lambda p: _one_if(p.preemptable)),
    ("st", lambda p: format_time(p.started_at)),
    ("nst", lambda p: _one_if(p.unstarted)),
    ("ads", lambda p: p.active_deadline),
    ("tgp", lambda p: None if p.grace == DEFAULT_GRACE_SECONDS else p.grace),
    ("job", lambda p: p.job),
    ("jr", lambda p: p.job_role),
    ("bj", lambda p: p.batch_job),
    ("el", lambda p: [p.elastic_min, p.elastic_max] if p.elastic_max else None),
    ("bl", lambda p: _one_if(p.by_launcher)),
    ("rdz", lambda p: _one_if(p.rdzv_host)),
    ("mr0", lambda p: _one_if(p.no_restarts)),
    ("bo", lambda p: _one_if(p.batch_owned)),
    ("jc", lambda p: _one_if(p.job_counted)),
    ("ixf", lambda p: p.index_failures),
    ("pdb", lambda p: list(p.pdbs) or None),
    ("ls", lambda p: list(p.local_storage) or None),
    ("nr", lambda p: _one_if(not p.ready)),
    ("ao", lambda p: [list(t) for t in p.anti_own] or None),
    ("pa", lambda p: [list(t) for t in p.affinity_own] or None),
    ("hp", lambda p: [list(t) for t in p.host_ports] or None),
    ("sp", lambda p: [list(t) for t in p.spread] or None),
    ("sb", lambda p: list(p.selected_by) or None),
    ("vw", lambda p: p.volume_wait),
    ("cv", lambda p: list(p.volumes) or None),
)


def _daemonset(owner: OwnerReference | None, is_controller: bool, annotations: Mapping[str, str]) -> bool:
    """A DaemonSet's pod: its controller is a DaemonSet (``owner`` with ``is_controller``, the
    ownerReference with ``controller: true``; a mere owner is not read, as ``metav1.GetControllerOf`` does
    not read it: nothing recreates such a pod), or annotated ``cluster-autoscaler.kubernetes.io/daemonset-pod: "true"``
    (exactly that value, as kubernetes/autoscaler cluster-autoscaler/utils/pod IsDaemonSetPod compares
    it), which a DaemonSet-like controller of another kind puts on its pods so
    that autoscalers leave them alone as they leave a DaemonSet's: no drain evicts them (its controller
    would put them straight back on the cordoned node) and they keep no node busy."""
    controlled = is_controller and owner is not None and owner.kind == "DaemonSet"
    return controlled or annotations.get(DAEMONSET_POD) == "true"


def _grace(pod: Pod, may_move: bool) -> int:
    """``spec.terminationGracePeriodSeconds``, 30 when unset (the API server's default), kept only for a
    pod that ``may_move`` (the default stores nothing)."""
    grace = pod.spec.termination_grace_period_seconds
    return DEFAULT_GRACE_SECONDS if grace is None or not may_move else grace


def _may_move_some_day(pod: Pod, owner: OwnerReference | None, is_controller: bool) -> bool:
    """Bound, and neither a DaemonSet's pod nor a static (mirror) pod."""
    annotations = pod.metadata.annotations
    return (
        pod.spec.node_name is not None
        and not _daemonset(owner, is_controller, annotations)
        and MIRROR_POD not in annotations
    )


# the cordon as kube-scheduler reads it (spillway.planner.predicates.UNSCHEDULABLE_TAINT)
_CORDON_TAINT = "node.kubernetes.io/unschedulable"


def _owner_uid(pod: Pod, controller: OwnerReference | None) -> str:
    """``PodInfo.owner_uid``: the ``controller``'s uid when the pod may stay on a drained node, else ""."""
    return controller.uid if controller is not None and _may_stay(pod, controller) else ""


def _may_stay(pod: Pod, controller: OwnerReference | None) -> bool:
    """Bound, no DaemonSet's nor a mirror pod, and a toleration of it may admit the drain's cordon or
    taint (any key, or one of theirs): a cheap superset of the pods that stay on a drained node
    (spillway.planner.disruption.comes_back, which the planner asks)."""
    return _may_move_some_day(pod, controller, True) and any(
        (not t.key and t.operator == "Exists") or t.key in (DRAINING_TAINT, _CORDON_TAINT)
        for t in pod.spec.tolerations
    )


def _ready_for_budgets(pod: Pod) -> bool:
    """``PodInfo.ready``: False only for a pod its budgets hold (not Pending, Succeeded or Failed)
    whose Ready condition is not True."""
    return (pod.status.phase or "Pending") in BUDGETS_IGNORED_PHASES or pod.is_ready()


def _deletion_cost(annotations: Mapping[str, str]) -> int:
    """Its pod-deletion-cost; 0 when unset or refused (the model drops a value the API server refuses)."""
    return deletion_cost(annotations.get(POD_DELETION_COST, "0")) or 0


def _is_batch_job(owner: OwnerReference | None) -> bool:
    return owner is not None and owner.kind == "Job" and api_group(owner.api_version) == BATCH_GROUP


INDEX_FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"


def _index_failures(annotations: Mapping[str, str]) -> int | None:
    """The failures of the pod's index so far (``batch.kubernetes.io/job-index-failure-count``, which the
    job controller writes as a decimal); None when absent or not a count, past int32 included, which the
    controller reads as 0 (pkg/controller/job/indexed_job_utils.go, parseIndexFailureCountAnnotation:
    anyone may write the annotation) and which ``int`` refuses past 4,300 digits."""
    value = annotations.get(INDEX_FAILURE_COUNT, "")
    digits = value.lstrip("0") or "0"
    if not (value.isascii() and value.isdigit()) or len(digits) > 10:
        return None
    count = int(digits)
    return count if count < 2**31 else None


def _move_facts(pod: Pod) -> dict[str, Any]:
    """The PodInfo fields that say whether the autoscaler may move the pod (spillway.model.jobs)."""
    labels, annotations = pod.metadata.labels, pod.metadata.annotations
    facts = pod_job_facts(pod)
    low, high = facts.elastic or (0, 0)
    # what the controller owner already says is not stored twice (spillway.planner.disruption reads it)
    owner, is_controller = _owner(pod.metadata.owner_references)
    namespace = pod.metadata.namespace or "default"
    owner_key = job_key(owner.kind, namespace, owner.name) if owner and is_controller else None
    may_move = _may_move_some_day(pod, owner, is_controller)
    return {
        "do_not_drain": do_not_drain(labels, annotations),
        "preemptable": volcano_preemptable(labels, annotations),
        # its age matters only for a pod that might move
        "started_at": pod.status.start_time if may_move else None,
        "unstarted": may_move and pod.never_started(),
        "active_deadline": pod.spec.active_deadline_seconds if may_move else None,
        "grace": _grace(pod, may_move),
        "job": None if facts.job == owner_key else facts.job,
        "job_role": facts.role,
        "batch_job": None
        if owner_key == job_key("Job", namespace, facts.batch_job or "")
        else facts.batch_job,
        "elastic_min": low,
        "elastic_max": high,
        "by_launcher": facts.by_launcher,
        "rdzv_host": facts.rdzv_host,
        "no_restarts": facts.no_restarts,
        "batch_owned": is_controller and _is_batch_job(owner),
        "job_counted": _job_counted(pod, bool(facts.batch_job) or (is_controller and _is_batch_job(owner))),
        "index_failures": _index_failures(annotations),
        "ready": _ready_for_budgets(pod),
        "local_storage": local_volumes(pod) if may_move else (),
    }


def _job_counted(pod: Pod, of_batch_job: bool) -> bool:
    """A pod of a batch/v1 Job being deleted that its job controller counted as failed already: the
    controller counts a pod being deleted (under podReplacementPolicy TerminatingOrFailed; once Failed
    under Failed or a podFailurePolicy) by adding it to ``status.uncountedTerminatedPods`` and only then
    removing its ``batch.kubernetes.io/job-tracking`` finalizer, which it puts on every pod it creates
    (kubernetes pkg/controller/job/job_controller.go, ``isPodFailed``,
    ``flushUncountedAndRemoveFinalizers``)."""
    meta = pod.metadata
    return (
        of_batch_job and meta.deletion_timestamp is not None and JOB_TRACKING_FINALIZER not in meta.finalizers
    )


def local_volumes(pod: Pod) -> tuple[str, ...]:
    """The pod's volumes whose data lives on its node only: an ``emptyDir`` on the node's disk (any
    medium but ``Memory``) or a ``hostPath``, less those its ``cluster-autoscaler.kubernetes.io/
    safe-to-evict-local-volumes`` annotation names (comma-separated, names compared exactly): what
    cluster-autoscaler's HasBlockingLocalStorage counts (kubernetes/autoscaler cluster-autoscaler/
    utils/drain/drain.go, isLocalVolume; simulator/drainability/rules/localstorage blocks a node's
    removal on such a pod with --skip-nodes-with-local-storage, true by default). kubectl drain
    (kubernetes/kubectl pkg/drain/filters.go, hasLocalStorage) counts every emptyDir, tmpfs too, and
    no hostPath, since it deletes no node; a tmpfs emptyDir is mostly shared memory (``/dev/shm`` of a
    training pod) or a sidecar's scratch, and cluster-autoscaler stopped counting it (kubernetes/
    autoscaler pull 5551), while a hostPath's data goes with the instance Spillway terminates."""
    listed = pod.metadata.annotations.get(SAFE_TO_EVICT_LOCAL_VOLUMES, "")
    exempt = set(listed.split(",")) if listed else set()
    return tuple(
        volume.name
        for volume in pod.spec.volumes
        if (
            volume.host_path is not None
            or (volume.empty_dir is not None and volume.empty_dir.medium != "Memory")
        )
        and volume.name not in exempt
    )


ZONE_LABEL = "topology.kubernetes.io/zone"
# a spread constraint's node inclusion policies, as flags: nodeAffinityPolicy Ignore (every node is a
# domain, whatever the pod's node selector and affinity) and nodeTaintsPolicy Honor (only nodes whose
# NoSchedule and NoExecute taints the pod tolerates are)
SPREAD_ALL_NODES = 1
SPREAD_TOLERATED_NODES = 2
KUEUE_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"


def _one_zone(pod: Pod) -> bool:
    """The pod asks to share one zone with its gang: Kueue's required topology names the zone key, or a
    required pod affinity term has the zone as its topology key."""
    if pod.metadata.annotations.get(KUEUE_REQUIRED_TOPOLOGY, "").strip() == ZONE_LABEL:
        return True
    affinity = pod.spec.affinity
    terms = affinity.pod_affinity.required_during_scheduling_ignored_during_execution if (
        affinity and affinity.pod_affinity) else []  # fmt: skip
    return any(t.topology_key == ZONE_LABEL for t in terms)


def _host_ports(pod: Pod) -> tuple[tuple[int, str, str], ...]:
    """The node ports the pod's app containers and sidecars (init containers with restartPolicy Always)
    take, as kube-scheduler's NodePorts counts them (sidecars since kubernetes/kubernetes#132040); a
    plain init container's port is taken by neither the scheduler nor the kubelet. hostIP "" is every
    address, as NodePorts reads an unset one. On the host's network a port without a hostPort takes its
    containerPort, as the API server defaults a pod's (defaultHostNetworkPorts): a DaemonSet's pod
    template, read for a node it does not run on yet, may not say so."""
    sidecars = [c for c in pod.spec.init_containers if c.restart_policy == "Always"]
    host = pod.spec.host_network
    return tuple(
        sorted(
            {
                (port.host_port or port.container_port, port.protocol or "TCP", port.host_ip or "")
                for container in (*pod.spec.containers, *sidecars)
                for port in container.ports
                if port.host_port or (host and port.container_port)
            }
        )
    )


def _owner(references: Sequence[OwnerReference]) -> tuple[OwnerReference | None, bool]:
    """The controller owner reference if any (True), else the first one (False); (None, True) without
    any: the flag means something only beside an owner, and True is what a stored snapshot reads back
    (:meth:`PodInfo.from_dict`), so a pod is the same pod before and after it is stored."""
    owner = next((o for o in references if o.controller), None)
    if owner is not None:
        return owner, True
    return (references[0], False) if references else (None, True)


# the longest duration Go's time.ParseDuration reads (math.MaxInt64 nanoseconds); beyond it, an error
_GO_MAX_MINUTES = (2**63 - 1) / 60e9


def _scale_up_after(pod: Pod) -> datetime | None:
    """When the pending pod's ``cluster-autoscaler.kubernetes.io/pod-scale-up-delay`` ends: its
    creationTimestamp plus the delay. None for a bound pod, without one, and for a value
    cluster-autoscaler logs and ignores
    (core/static_autoscaler.go, filterOutYoungPods): one ``time.ParseDuration`` refuses (no unit,
    spaces, empty, too long) or one below its ``--new-pod-scale-up-delay`` (0 by default: a negative
    one)."""
    text = pod.metadata.annotations.get(POD_SCALE_UP_DELAY)
    created = pod.metadata.creation_timestamp
    if pod.spec.node_name is not None or text is None or created is None or text != text.strip():
        return None
    try:
        minutes = parse_duration_minutes(text)
    except ValueError:
        return None
    return created + timedelta(minutes=minutes) if minutes <= _GO_MAX_MINUTES else None


def _created_if_unbound(pod: Pod) -> datetime | None:
    """The pod's creationTimestamp while it is not bound (its place in kube-scheduler's queue), else None."""
    return pod.metadata.creation_timestamp if pod.spec.node_name is None else None


def _unschedulable(conditions: Sequence[Condition]) -> tuple[bool, datetime | None]:
    """Whether the scheduler marked the pod Unschedulable, and since when."""
    marked, since = False, None
    for cond in conditions:
        if cond.type == "PodScheduled" and cond.status == "False" and cond.reason == "Unschedulable":
            marked, since = True, cond.last_transition_time
    return marked, since


def _required_terms(affinity: Affinity | None) -> tuple[Term, ...]:
    node_affinity = affinity.node_affinity if affinity else None
    return _selector_terms(
        node_affinity.required_during_scheduling_ignored_during_execution if node_affinity else None
    )


def _selector_terms(required: NodeSelector | None) -> tuple[Term, ...]:
    terms: list[Term] = []
    for term in required.node_selector_terms if required else ():
        reqs: list[Requirement] = [
            (r.key, r.operator, tuple(r.values), False) for r in term.match_expressions
        ]
        reqs += [(r.key, r.operator, tuple(r.values), True) for r in term.match_fields]
        terms.append(tuple(reqs))
    return tuple(terms)


def _flag(value: str | None) -> bool | None:
    """The safe-to-evict annotation, as the drain reads it: ``"true"`` exactly lets a pod go, as
    cluster-autoscaler's ``HasSafeToEvictAnnotation`` (utils/drain) compares it, so a pod it would keep
    (no controller, local storage) is not evicted for ``"True"``; ``"false"`` in any case keeps it (a
    refusal is honoured however it is spelt); anything else is unset."""
    if value == "true":
        return True
    return False if (value or "").lower() == "false" else None


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def instance_id_from_provider_id(provider_id: str | None) -> str | None:
    """``aws:///us-east-1a/i-0abc`` → ``i-0abc``."""
    if not provider_id or not provider_id.startswith("aws://"):
        return None
    last = provider_id.rstrip("/").rsplit("/", 1)[-1]
    return last if last.startswith("i-") else None


def node_labels(node: Node) -> dict[str, str]:
    """The Node's labels but the load balancer exclusion label a drain of Spillway's added (its record
    annotation says so: :meth:`~spillway.ports.Cluster.add_draining_taint`): a mark of the drain, as its
    taint, which no node the group launches carries; a group template learned from a draining node
    would otherwise carry it. The label an operator set stays, and so does one an operator gave another
    value since (what gives the node back leaves it)."""
    labels = node.metadata.labels
    if (
        LB_EXCLUDED_BY_SPILLWAY not in node.metadata.annotations
        or labels.get(EXCLUDE_FROM_LB_LABEL) != EXCLUDE_FROM_LB_VALUE
    ):
        return dict(labels)
    return {k: v for k, v in node.metadata.labels.items() if k != EXCLUDE_FROM_LB_LABEL}


def cordon_time(value: str | None) -> datetime | None:
    """The time leading Spillway's cordon annotation (``2026-03-02T09:30:00Z idle for 10m``), else None."""
    first = (value or "").split(" ", 1)[0]
    try:
        return parse_time(first)
    except ValueError:
        return None


def cordon_held(value: str | None) -> bool:
    """Whether Spillway's cordon annotation (``<time> held drain <execution>: <why>``, or
    ``<time> held drain: <why>`` as drains wrote it before they had names) is a drain no plan started."""
    parts = (value or "").split(" ", 2)
    return len(parts) > 1 and parts[1] == HELD_DRAIN


def cordon_replaced(value: str | None, provider_id: str | None) -> bool:
    """Whether Spillway's cordon annotation is the held drain of a Spot warning or a rebalance recommendation
    of the node's own instance (``<time> held drain interrupt-<instance id>: ...``, ``rebalance-...``:
    :data:`~spillway.model.k8s.GROUP_REPLACED_PREFIXES`): the notices on which a group with Capacity
    Rebalancing replaces the instance itself. Any other held drain (an operator's, a scheduled change's,
    a lifecycle action's) is none: the group launches nothing for it."""
    return replaced_notice(value, provider_id) is not None


def replaced_notice(value: str | None, provider_id: str | None) -> str | None:
    """Which of :data:`~spillway.model.k8s.GROUP_REPLACED_PREFIXES` names the held drain of
    :func:`cordon_replaced` (``interrupt``: a Spot warning's, ``rebalance``: a rebalance
    recommendation's), or None."""
    instance = instance_id_from_provider_id(provider_id)
    parts = (value or "").split(" ", 3)
    if instance is None or len(parts) < 4 or parts[1:3] != [HELD_DRAIN, "drain"]:
        return None
    return next((p for p in GROUP_REPLACED_PREFIXES if parts[3].startswith(f"{p}-{instance}:")), None)


def cordon_rebalance(value: str | None, provider_id: str | None) -> bool:
    """Whether Spillway's cordon annotation ``value`` is a rebalance recommendation's held drain of the
    node's own instance that leaves the instance to its group (its reason ends with
    :data:`~spillway.model.k8s.GROUP_REPLACES`: the group had Capacity Rebalancing at the notice). Not a
    Spot warning's, nor a rebalance drain that terminates the instance once it is empty (its group had
    no Capacity Rebalancing): a plan that gave that node back raced the drain's terminate step, whose
    check then found its cordon gone and cancelled it."""
    rebalance = replaced_notice(value, provider_id) == GROUP_REPLACED_PREFIXES[1]
    return rebalance and (value or "").endswith(f"; {GROUP_REPLACES}")


def cordon_give_back(value: str | None) -> bool:
    """Whether Spillway's cordon annotation (``<time> gang give-back ...``, ``<time> scale-up back-off
    ...``) is a give-back's (:data:`~spillway.model.k8s.GIVE_BACKS`), not a drain's."""
    parts = (value or "").split(" ", 1)
    return len(parts) > 1 and parts[1].startswith(tuple(f"{kind} " for kind in GIVE_BACKS))


def cordon_digest(value: str | None) -> str | None:
    """Which cordon of Spillway's this is: the first 16 hex digits of the SHA-256 of the whole
    annotation value, time and words as written (None without one). A plan passes it on with a node it
    uncordons, and the uncordon takes off that cordon and no other (compare-and-set). Every cordon
    writes its time, so one that takes the node over later has another value. Short and exact, however
    long the value or wherever it was cut."""
    if value is None:
        return None
    return hashlib.sha256(value.encode()).hexdigest()[:16]


def cordoned_for(value: str | None, reason: str) -> bool:
    """Whether Spillway's cordon annotation ``value`` (``<time> <reason>``, cut at 256 characters as
    :meth:`spillway.adapters.kube.KubeClient.cordon` writes it) was written for ``reason``, whenever."""
    if value is None:
        return False
    stamp = value.split(" ", 1)[0]
    return value == f"{stamp} {reason}".strip()[:256]


def cordon_begins(value: str | None, prefix: str) -> bool:
    """Whether the words of Spillway's cordon annotation ``value`` (``<time> <reason>``) begin with
    ``prefix``: a cordon of that kind, whichever execution wrote it and whenever (a gang-orphan sweep's,
    :data:`spillway.act.gangsweep.ORPHAN_CORDON`)."""
    parts = (value or "").split(" ", 1)
    return len(parts) > 1 and parts[1].startswith(prefix)


# A Ready condition that last changed this soon after the Node was created was set at registration:
# the node has never been Ready (cluster-autoscaler's MaxStatusSettingDelayAfterCreation).
SET_AT_CREATION = timedelta(minutes=2)
# the label the kubelet gives every node, its name (kube-scheduler's topology key for "one node")
HOSTNAME_LABEL = "kubernetes.io/hostname"


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    allocatable: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[TaintT, ...] = ()
    provider_id: str | None = None
    unschedulable: bool = False
    ready: bool = True
    created_at: datetime | None = None
    # a NotReady node's: when its Ready condition last changed (lastTransitionTime), since when it is
    # not Ready; None for a Ready node, or when the condition gives no time
    ready_changed_at: datetime | None = None
    # its Ready condition is False (Node.reports_not_ready): its kubelet reports it not ready and its pods'
    # statuses are current; not for Unknown (the kubelet is silent). Stored only when true, so a snapshot
    # written before it reads as not reported (spillway.planner.disruption.dead never holds for it)
    kubelet_not_ready: bool = False
    cordoned_by_spillway: bool = False
    scale_down_disabled: bool = False
    # When Spillway cordoned it: the leading time of its spillway.io/cordoned annotation ("<ISO> <why>");
    # None for a value without one (written by an older version): its age is unknown.
    cordoned_at: datetime | None = None
    cordon_held: bool = False  # Spillway's cordon is a drain no plan started (HELD_DRAIN): not reused
    # ... and of those, a Spot warning's or a rebalance recommendation's of its instance (cordon_replaced)
    cordon_replaced: bool = False
    # ... and of those, a rebalance recommendation's (advice: the node still works) that leaves the instance
    # to its group (cordon_rebalance), not a Spot warning's nor one that terminates it
    cordon_rebalance: bool = False
    cordon_give_back: bool = False  # Spillway's cordon is a give-back's (GIVE_BACKS): see giving_back
    # Which of Spillway's cordons holds it (cordon_digest): a plan that uncordons the node passes it on,
    # and the uncordon takes off that cordon only (compare-and-set). None without Spillway's cordon, or
    # in a snapshot written before it was kept: the uncordon then takes off whichever it finds, as before
    cordon_digest: str | None = None
    deleting: bool = False  # metadata.deletionTimestamp is set: somebody is deleting the Node
    do_not_disrupt: bool = False  # karpenter.sh/do-not-disrupt=true on the Node: none of its pods move
    # status.capacity: what CapacityQuotas and cluster-autoscaler's cores and memory totals count; a
    # resource it does not report (every one, for a node that reports no capacity) is its allocatable's
    capacity: Resources = field(default_factory=dict)
    # the CSI volumes a VolumeAttachment holds on it that none of its pods uses (one still detaching
    # after its pod left), of a driver its CSINode gives a limit for: kube-scheduler counts them
    # against that limit (VolumeMatcher.with_attach_limits)
    attached: tuple[str, ...] = ()
    # the EC2 instance its providerID names (aws:///<zone>/<id>), read once: every stage asks for it
    instance_id: str | None = field(init=False, default=None, compare=False, repr=False)
    # shape()'s answer, made at its first call (a replay asks it of the same node at every plan)
    _shape: tuple[Any, ...] | None = field(init=False, default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "capacity", with_capacity(self.capacity, self.allocatable))
        object.__setattr__(self, "instance_id", instance_id_from_provider_id(self.provider_id))

    @classmethod
    def from_node(cls, node: Node) -> NodeInfo:
        meta = node.metadata
        ready = node.is_ready()
        return cls(
            name=meta.name,
            allocatable=parse_resource_list(node.status.allocatable or node.status.capacity),
            labels=node_labels(node),
            taints=tuple((t.key, t.value, t.effect) for t in node.spec.taints),
            provider_id=node.spec.provider_id,
            unschedulable=node.spec.unschedulable,
            ready=ready,
            created_at=meta.creation_timestamp,
            ready_changed_at=None if ready else node.ready_changed_at(),
            kubelet_not_ready=node.reports_not_ready(),
            cordoned_by_spillway=CORDONED_BY_SPILLWAY in meta.annotations,
            scale_down_disabled=meta.annotations.get(SCALE_DOWN_DISABLED, "").lower() == "true",
            cordoned_at=cordon_time(meta.annotations.get(CORDONED_BY_SPILLWAY)),
            cordon_held=cordon_held(meta.annotations.get(CORDONED_BY_SPILLWAY)),
            cordon_replaced=cordon_replaced(
                meta.annotations.get(CORDONED_BY_SPILLWAY), node.spec.provider_id
            ),
            cordon_rebalance=cordon_rebalance(
                meta.annotations.get(CORDONED_BY_SPILLWAY), node.spec.provider_id
            ),
            cordon_give_back=cordon_give_back(meta.annotations.get(CORDONED_BY_SPILLWAY)),
            cordon_digest=cordon_digest(meta.annotations.get(CORDONED_BY_SPILLWAY)),
            deleting=meta.deletion_timestamp is not None,
            do_not_disrupt=flag(meta.annotations.get(DO_NOT_DISRUPT)),
            capacity=parse_resource_list(node.status.capacity),
        )

    def shape(self) -> tuple[Any, ...]:
        """Its labels but the hostname, sorted, and its taints: nodes of equal shapes are equal for every
        scheduling constraint that does not name a node (the planner pools them). Made once a node: the
        labels and taints of a NodeInfo never change (a change is a new NodeInfo)."""
        shape = self._shape
        if shape is None:
            named = dict(self.labels)
            named.pop(HOSTNAME_LABEL, None)
            shape = (tuple(sorted(named.items())), self.taints)
            object.__setattr__(self, "_shape", shape)
        return shape

    def never_ready(self) -> bool:
        """NotReady, and never Ready since it registered: its Ready condition last changed within
        :data:`SET_AT_CREATION` of its creation (the kubelet sets it at registration), or gives no time.
        False when its creation time is unknown (then nothing says it is new)."""
        if self.ready or self.created_at is None:
            return False
        created = aware(self.created_at)
        changed = aware(self.ready_changed_at) if self.ready_changed_at is not None else created
        return changed - created < SET_AT_CREATION

    def giving_back(self, now: datetime) -> bool:
        """A give-back under way holds the node: Spillway's cordon on it is a give-back's, made less than
        :data:`~spillway.model.k8s.GIVE_BACK_LEASE_MINUTES` before ``now``. Its instance is about to be
        terminated, or its cordon taken off: no plan reuses, drains or restores it. An older one outlived
        its give-back: an orphan, as an orphaned drain's; so is one whose time cannot be read, or lies
        further ahead than the lease (an edited annotation): held for it, the node would be held for
        good."""
        if not (self.unschedulable and self.cordon_give_back):
            return False
        at, lease = self.cordoned_at, timedelta(minutes=GIVE_BACK_LEASE_MINUTES)
        return at is not None and abs(now - at) < lease  # a time not known, or far ahead: an orphan

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"n": self.name, "a": self.allocatable, "l": dict(self.labels)}
        for key, encode in _NODE_SHORT_KEYS:
            value = encode(self)
            if value is not None:
                out[key] = value
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NodeInfo:
        return cls(
            name=d["n"],
            allocatable=dict(d["a"]),
            labels=dict(d.get("l", {})),
            taints=tuple((k, v, e) for k, v, e in d.get("t", ())),
            provider_id=d.get("p"),
            unschedulable=bool(d.get("u")),
            ready=not d.get("nr"),
            created_at=parse_time(d.get("c")),
            ready_changed_at=parse_time(d.get("rt")),
            kubelet_not_ready=bool(d.get("knr")),
            cordoned_by_spillway=bool(d.get("sc")),
            scale_down_disabled=bool(d.get("sdd")),
            cordoned_at=parse_time(d.get("sca")),
            cordon_held=bool(d.get("sch")),
            cordon_replaced=bool(d.get("scr")),
            cordon_rebalance=bool(d.get("scb")),
            cordon_give_back=bool(d.get("sgb")),
            cordon_digest=d.get("scd"),
            deleting=bool(d.get("del")),
            do_not_disrupt=bool(d.get("dnd")),
            capacity=dict(d.get("ca", {})),
            attached=tuple(str(v) for v in d.get("av", ())),
        )


# The optional keys of NodeInfo.to_dict, in order; an encoder returning None leaves its key out.
_NODE_SHORT_KEYS: tuple[tuple[str, Callable[[NodeInfo], Any]], ...] = (
    # only what differs from allocatable: a snapshot without reads as allocatable
    ("ca", lambda n: capacity_delta(n.capacity, n.allocatable) or None),
    ("t", lambda n: [list(t) for t in n.taints] or None),
    ("p", lambda n: n.provider_id or None),
    ("u", lambda n: _one_if(n.unschedulable)),
    ("nr", lambda n: _one_if(not n.ready)),
    ("c", lambda n: format_time(n.created_at)),
    ("rt", lambda n: format_time(n.ready_changed_at)),
    ("knr", lambda n: _one_if(n.kubelet_not_ready)),
    ("sc", lambda n: _one_if(n.cordoned_by_spillway)),
    ("sdd", lambda n: _one_if(n.scale_down_disabled)),
    ("sca", lambda n: format_time(n.cordoned_at)),
    ("sch", lambda n: _one_if(n.cordon_held)),
    ("scr", lambda n: _one_if(n.cordon_replaced)),
    ("scb", lambda n: _one_if(n.cordon_rebalance)),
    ("sgb", lambda n: _one_if(n.cordon_give_back)),
    ("scd", lambda n: n.cordon_digest),
    ("del", lambda n: _one_if(n.deleting)),
    ("dnd", lambda n: _one_if(n.do_not_disrupt)),
    ("av", lambda n: list(n.attached) or None),
)


ALWAYS_ALLOW = "AlwaysAllow"
IF_HEALTHY_BUDGET = "IfHealthyBudget"


@dataclass(frozen=True, slots=True)
class PdbInfo:
    """A PodDisruptionBudget as the Eviction API reads it: ``disruptions_allowed`` for a healthy (Ready)
    pod; for a running pod that is not Ready, ``spec.unhealthyPodEvictionPolicy`` (None: the default,
    IfHealthyBudget) and ``status.currentHealthy``/``desiredHealthy`` (:meth:`lets_unready_go`)."""

    namespace: str
    name: str
    match_labels: tuple[tuple[str, str], ...] = ()
    disruptions_allowed: int = 0
    unhealthy_policy: str | None = None
    current_healthy: int = 0
    desired_healthy: int = 0

    def lets_unready_go(self) -> bool:
        """A running pod of this budget that is not Ready is evicted whatever the budget allows, and
        without spending it: always with AlwaysAllow; with IfHealthyBudget (or no policy) when the
        application is not disrupted, ``currentHealthy >= desiredHealthy > 0`` (the eviction
        subresource's test). A policy of another name holds the pod to the budget."""
        if self.unhealthy_policy == ALWAYS_ALLOW:
            return True
        if self.unhealthy_policy not in (None, IF_HEALTHY_BUDGET):
            return False
        return self.desired_healthy > 0 and self.current_healthy >= self.desired_healthy

    @classmethod
    def from_pdb(cls, pdb: PodDisruptionBudget) -> PdbInfo:
        selector = pdb.spec.selector
        return cls(
            namespace=pdb.metadata.namespace or "default",
            name=pdb.metadata.name,
            match_labels=tuple(sorted(selector.match_labels.items())) if selector else (),
            disruptions_allowed=pdb.status.disruptions_allowed,
            unhealthy_policy=pdb.spec.unhealthy_pod_eviction_policy or None,
            current_healthy=pdb.status.current_healthy,
            desired_healthy=pdb.status.desired_healthy,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ns": self.namespace,
            "n": self.name,
            "ml": [list(p) for p in self.match_labels],
            "da": self.disruptions_allowed,
        }
        optional = (("up", self.unhealthy_policy), ("ch", self.current_healthy), ("dh", self.desired_healthy))
        out.update((key, value) for key, value in optional if value)  # older snapshots read the same
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PdbInfo:
        return cls(
            namespace=d["ns"],
            name=d["n"],
            match_labels=tuple((k, v) for k, v in d.get("ml", ())),
            disruptions_allowed=d.get("da", 0),
            unhealthy_policy=d.get("up"),
            current_healthy=int(d.get("ch", 0)),
            desired_healthy=int(d.get("dh", 0)),
        )


@dataclass(frozen=True, slots=True)
class RegionUnread:
    """A region whose Auto Scaling read failed (its groups, launch templates or configurations, scaling
    activities, scheduled actions, warm pools, lifecycle hooks or EKS node groups): since when, in the
    observations one after another, and the error's class and message (redacted)."""

    region: str
    since: datetime
    error: str

    def to_dict(self) -> dict[str, Any]:
        return {"region": self.region, "since": format_time(self.since), "error": self.error}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RegionUnread:
        since = parse_time(d.get("since"))
        if since is None:
            raise ValueError("regions_unread[].since: missing")
        return cls(region=str(d["region"]), since=since, error=str(d.get("error", "")))

    @classmethod
    def all_from(cls, stored: Iterable[Mapping[str, Any]]) -> tuple[RegionUnread, ...]:
        return tuple(cls.from_dict(d) for d in stored)


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """What Kubernetes looked like at ``taken_at``.

    ``tenants`` maps a namespace labelled ``spillway.io/tenant`` to its tenant (any other namespace is
    its own tenant); ``gangs`` are the pod groups read from the cluster; ``quotas`` its CapacityQuotas;
    ``jobs`` the jobs that say something about moving their pods (elastic size, podFailurePolicy).

    ``coscheduling_served``: the API server serves scheduler-plugins' PodGroup
    (``podgroups.scheduling.x-k8s.io``), so coscheduling may run; its Permit denies a pod labelled
    ``scheduling.x-k8s.io/pod-group`` whose namespace holds no PodGroup of that name, on any node
    (kubernetes-sigs/scheduler-plugins pkg/coscheduling/core/core.go ``Permit``: PodGroupNotFound, which
    pkg/coscheduling/coscheduling.go answers Unschedulable). Without the kind, coscheduling cannot run
    (its plugin reads PodGroups) and the label means nothing. Only observe knows (the list answers 404
    when the CRD is not installed); a snapshot built from a kubectl List, and a stored one from before,
    say False: the label means nothing there, as it did before.
    """

    cluster: str
    taken_at: datetime
    nodes: tuple[NodeInfo, ...]
    pods: tuple[PodInfo, ...]
    pdbs: tuple[PdbInfo, ...] = ()
    observe_seconds: float = 0.0
    tenants: Mapping[str, str] = field(default_factory=dict)
    gangs: tuple[GangInfo, ...] = ()
    quotas: tuple[QuotaInfo, ...] = ()
    provreqs: tuple[ProvisioningRequestInfo, ...] = ()
    jobs: tuple[JobInfo, ...] = ()
    buffers: tuple[BufferInfo, ...] = ()  # CapacityBuffers (spillway.model.buffer)
    # cluster-autoscaler's priority expander ConfigMap, when there is one (spillway.model.priorities)
    expander_priorities: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    # why that ConfigMap's priorities were not read (cluster-autoscaler could not: it ranks no group by
    # them), naming the entry; "" when they were or there is none (spillway.model.priorities)
    expander_problem: str = ""
    # gang -> Volcano task ("" for none) -> its members that Succeeded (SucceededMembers): the finished
    # pods themselves need not be kept
    gang_succeeded: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    # the DaemonSets, by key (spillway.model.daemonsets); none when they were not read (observe not granted
    # list on daemonsets, a List without them): fresh nodes are then judged by the DaemonSets' pods
    daemonsets: tuple[DaemonSetInfo, ...] = ()
    coscheduling_served: bool = False
    # the EC2 instances tagged with a gang attempt of this cluster (spillway.model.fleet), every region;
    # none when not read (a List from kubectl, a snapshot stored before observe read them)
    fleet_instances: tuple[FleetInstance, ...] = ()
    # the regions whose read of those instances failed (observe fails no observation for it): the gang
    # sweep is blind there in this snapshot (the GangInstanceReadsFailed metric counts them)
    fleet_unread: tuple[str, ...] = ()
    # the regions whose Auto Scaling read failed (observe fails no observation for it while another
    # region was read): their groups are carried from the last read, flagged (NodeGroup.read_at), or
    # left out once that read is older than max_node_provision_minutes; the plan scales none of them
    # and names the region (the RegionReadsFailed metric counts them). None in a snapshot stored before
    regions_unread: tuple[RegionUnread, ...] = ()

    def tenant(self, namespace: str) -> str:
        return self.tenants.get(namespace, namespace)

    @property
    def unread_region_names(self) -> list[str]:
        """The regions whose Auto Scaling read failed (:attr:`regions_unread`), by name."""
        return [r.region for r in self.regions_unread]

    def jobs_by_key(self) -> dict[str, JobInfo]:
        return {job.key: job for job in self.jobs}

    def pdb_allowance(self, pod: PodInfo) -> int | None:
        """How many more disruptions the budgets selecting ``pod`` let its eviction take now, as the
        Eviction API decides (pkg/registry/core/pod/storage/eviction.go):

        * None when no budget guards its eviction: none selects it; it is not running yet (Pending:
          evicted whatever its budgets say); or it runs, is not Ready, and its one budget lets such a
          pod go (:meth:`PdbInfo.lets_unready_go`), spending none of it;
        * 0 when more than one budget selects it: the API refuses to evict such a pod whatever they
          allow (500 "This pod has more than one PodDisruptionBudget, which the eviction subresource
          does not support.");
        * else its budget's ``disruptionsAllowed`` (0 for a budget the snapshot does not hold).
        """
        if not pod.pdbs or pod.phase in BUDGETS_IGNORED_PHASES:
            return None
        if len(pod.pdbs) > 1:
            return 0
        budget = next((p for p in self.pdbs if p.namespace == pod.namespace and p.name == pod.pdbs[0]), None)
        if budget is None:
            return 0
        if not pod.ready and budget.lets_unready_go():
            return None
        return budget.disruptions_allowed

    @classmethod
    def build(
        cls,
        cluster: str,
        taken_at: datetime,
        nodes: Iterable[Node],
        pods: Iterable[Pod],
        pdbs: Iterable[PodDisruptionBudget] = (),
        observe_seconds: float = 0.0,
        others: Iterable[KubeObject] = (),
    ) -> ClusterSnapshot:
        objects: Iterable[KubeObject] = chain(nodes, pods, pdbs, others)
        return cls.from_objects(cluster, taken_at, objects, observe_seconds)

    @classmethod
    def from_objects(
        cls,
        cluster: str,
        taken_at: datetime,
        objects: Iterable[KubeObject],
        observe_seconds: float = 0.0,
        provreqs: Sequence[ProvisioningRequestInfo] = (),
    ) -> ClusterSnapshot:
        """From a stream of API objects, each distilled as it arrives (the raw model is not kept), and the
        ProvisioningRequests read beside them (raw objects: :func:`spillway.model.provreq.from_list`)."""
        nodes: list[NodeInfo] = []
        pods: list[PodInfo] = []
        pdbs: list[PdbInfo] = []
        tenants: dict[str, str] = {}
        gangs: list[GangInfo] = []
        quotas: list[QuotaInfo] = []
        jobs: list[JobInfo] = []
        classes: list[PriorityClass] = []  # what a Volcano PodGroup's priorityClassName stands for
        budgets = PdbMatcher()
        topology = TopologyMatcher()
        volumes = VolumeMatcher()
        buffers: list[CapacityBuffer] = []
        namespaces: dict[str, dict[str, str]] = {}  # labels, for pod affinity's namespaceSelector
        priorities: Priorities = {}
        priorities_problem = ""  # why the priority expander's ConfigMap was not read
        templates: list[PodTemplate] = []
        workloads: list[Scalable] = []
        resource_quotas: list[ResourceQuota] = []  # they cut the buffers, as observe's
        daemonsets: list[DaemonSet] = []
        succeeded = SucceededMembers()
        uncounted = UncountedFailures()  # failed pods their Job has not counted yet
        normal = VolcanoNormalPods()
        from spillway.model.buffer import NewestPods  # it reads PodInfo from here

        live = NewestPods()  # the pods a buffer's workload may select (its most recent one is the chunk)
        for obj in objects:
            if isinstance(obj, Pod):
                live.note(obj)
                pods.append(PodInfo.from_pod(obj))
                succeeded.note(pods[-1])
                uncounted.note(obj, pods[-1])
                budgets.remember(len(pods) - 1, obj)
                topology.remember(len(pods) - 1, obj)
                volumes.remember(len(pods) - 1, obj)
                normal.remember(len(pods) - 1, obj)
            elif isinstance(obj, Node):
                nodes.append(NodeInfo.from_node(obj))
            elif isinstance(obj, PodDisruptionBudget):
                pdbs.append(PdbInfo.from_pdb(obj))
                budgets.add(obj)
            elif isinstance(obj, CapacityBuffer):
                buffers.append(obj)
            elif isinstance(obj, PodTemplate):
                templates.append(obj)
            elif isinstance(obj, Scalable):
                workloads.append(obj)
            elif isinstance(obj, ResourceQuota):
                resource_quotas.append(obj)
            elif isinstance(
                obj, PersistentVolumeClaim | PersistentVolume | StorageClass | CSINode | VolumeAttachment
            ):
                volumes.add(obj)
            elif isinstance(obj, ConfigMap):
                priorities, priorities_problem = expander_priorities(obj) or (priorities, priorities_problem)
            elif isinstance(obj, DaemonSet):
                daemonsets.append(obj)
            else:
                if isinstance(obj, Namespace):
                    namespaces[obj.metadata.name] = obj.metadata.labels
                _distil_shared(obj, tenants, gangs, quotas, jobs, classes)
        matched, buffer_infos, requests = _buffers(
            buffers,
            templates,
            workloads,
            live,
            resource_quotas,
            topology,
            list(
                volumes.apply(
                    list(budgets.apply(normal.apply(uncounted.mark_counted(pods, jobs), gangs, succeeded)))
                )
            ),
            namespaces,
            provreqs,
            volumes,
        )
        return cls(
            cluster,
            taken_at,
            volumes.with_attach_limits(nodes),
            matched,
            tuple(pdbs),
            observe_seconds,
            dict(sorted(tenants.items())),
            tuple(sorted(gang_priorities(gangs, classes), key=lambda g: g.key)),
            tuple(sorted(quotas, key=lambda q: q.name)),
            provreqs=requests,
            jobs=uncounted.apply(sorted(jobs, key=lambda j: j.key)),
            buffers=buffer_infos,
            expander_priorities=priorities,
            expander_problem=priorities_problem,
            gang_succeeded=succeeded.counts(),
            daemonsets=daemonset_infos(daemonsets),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cluster": self.cluster,
            "taken_at": format_time(self.taken_at),
            "observe_seconds": self.observe_seconds,
            "nodes": [n.to_dict() for n in self.nodes],
            "pods": [p.to_dict() for p in self.pods],
            "pdbs": [p.to_dict() for p in self.pdbs],
        }
        if self.tenants:
            out["tenants"] = dict(self.tenants)
        optional: tuple[tuple[str, Sequence[Any]], ...] = (
            ("gangs", self.gangs),
            ("quotas", self.quotas),
            ("provreqs", self.provreqs),
            ("jobs", self.jobs),
            ("buffers", self.buffers),
            ("daemonsets", self.daemonsets),
            ("fleet_instances", self.fleet_instances),
            ("regions_unread", self.regions_unread),
        )
        for key, items in optional:  # only what the cluster has: older snapshots read the same
            if items:
                out[key] = [item.to_dict() for item in items]
        if self.expander_priorities:
            out["priorities"] = [[p, list(x)] for p, x in sorted(self.expander_priorities.items())]
        if self.expander_problem:
            out["priorities_problem"] = self.expander_problem
        if self.gang_succeeded:
            out["gang_succeeded"] = {g: dict(t) for g, t in self.gang_succeeded.items()}
        if self.coscheduling_served:
            out["cosched"] = 1
        if self.fleet_unread:
            out["fleet_unread"] = list(self.fleet_unread)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ClusterSnapshot:
        from spillway.model.buffer import BufferInfo  # these read PodInfo from here
        from spillway.model.daemonsets import DaemonSetInfo
        from spillway.model.provreq import ProvisioningRequestInfo

        taken_at = parse_time(d["taken_at"])
        assert taken_at is not None
        return cls(
            cluster=d["cluster"],
            taken_at=taken_at,
            nodes=tuple(NodeInfo.from_dict(n) for n in d.get("nodes", ())),
            pods=tuple(PodInfo.from_dict(p) for p in d.get("pods", ())),
            pdbs=tuple(PdbInfo.from_dict(p) for p in d.get("pdbs", ())),
            observe_seconds=float(d.get("observe_seconds", 0.0)),
            tenants=dict(d.get("tenants", {})),
            gangs=tuple(GangInfo.from_dict(g) for g in d.get("gangs", ())),
            quotas=tuple(QuotaInfo.from_dict(q) for q in d.get("quotas", ())),
            provreqs=tuple(ProvisioningRequestInfo.from_dict(r) for r in d.get("provreqs", ())),
            jobs=tuple(JobInfo.from_dict(j) for j in d.get("jobs", ())),
            buffers=tuple(BufferInfo.from_dict(b) for b in d.get("buffers", ())),
            expander_priorities={int(p): tuple(x) for p, x in d.get("priorities", ())},
            expander_problem=str(d.get("priorities_problem", "")),
            gang_succeeded={
                str(g): {str(t): int(n) for t, n in tasks.items()}
                for g, tasks in d.get("gang_succeeded", {}).items()
            },
            daemonsets=tuple(DaemonSetInfo.from_dict(x) for x in d.get("daemonsets", ())),
            coscheduling_served=bool(d.get("cosched")),
            fleet_instances=tuple(FleetInstance.from_dict(x) for x in d.get("fleet_instances", ())),
            fleet_unread=tuple(map(str, d.get("fleet_unread", ()))),
            regions_unread=RegionUnread.all_from(d.get("regions_unread", ())),
        )


def daemonset_infos(daemonsets: Iterable[DaemonSet]) -> tuple[DaemonSetInfo, ...]:
    """The DaemonSets as a fresh node judges them, by key."""
    from spillway.model.daemonsets import DaemonSetInfo  # it reads PodInfo from here

    return tuple(sorted((DaemonSetInfo.from_daemonset(d) for d in daemonsets), key=lambda d: d.key))


def expander_priorities(config_map: ConfigMap) -> tuple[Priorities, str] | None:
    """The priorities of cluster-autoscaler's priority expander ConfigMap (kube-system's, by its name),
    and why none when cluster-autoscaler could not read them (:func:`configmap_priorities`: "" when it
    could); None for another ConfigMap."""
    meta = config_map.metadata
    if meta.name != CONFIGMAP_NAME or (meta.namespace or "default") != CONFIGMAP_NAMESPACE:
        return None
    return configmap_priorities(config_map.data)


def _buffers(
    buffers: list[CapacityBuffer],
    templates: list[PodTemplate],
    workloads: list[Scalable],
    live: NewestPods,
    resource_quotas: list[ResourceQuota],
    topology: TopologyMatcher,
    pods: list[PodInfo],
    namespaces: Mapping[str, Mapping[str, str]],
    provreqs: Sequence[ProvisioningRequestInfo],
    volumes: VolumeMatcher,
) -> tuple[tuple[PodInfo, ...], tuple[BufferInfo, ...], tuple[ProvisioningRequestInfo, ...]]:
    """The pods with their pod topology, and the CapacityBuffers of a List with what they name resolved
    from the same List (a built-in workload's most recent pod of the List, as observe finds it:
    :func:`spillway.model.buffer.live_pods`) and cut to what its ResourceQuotas leave, as observe cuts
    them; the buffers' chunks and the requests' pod sets get their pod topology too."""
    from spillway.model.buffer import buffer_infos, limit_by_quotas, live_pods  # they read PodInfo from here
    from spillway.model.templates import with_topology

    infos = (
        buffer_infos(buffers, templates, workloads, live_pods(buffers, workloads, live.selected))
        if buffers
        else ()
    )
    if infos and resource_quotas:  # a List without any: not read, so not taken as "no quota"
        infos = limit_by_quotas(buffers, infos, resource_quotas)
    return with_topology(topology, pods, namespaces or None, infos, provreqs, volumes)


def _distil_shared(
    obj: KubeObject,
    tenants: dict[str, str],
    gangs: list[GangInfo],
    quotas: list[QuotaInfo],
    jobs: list[JobInfo],
    classes: list[PriorityClass],
) -> None:
    """Namespaces → tenants, pod groups and Workloads → gangs, CapacityQuotas → quotas, PyTorchJobs,
    PaddleJobs and batch Jobs → jobs; PriorityClasses kept for the gangs' priorities."""
    if isinstance(obj, PriorityClass):
        classes.append(obj)
        return
    tenant = tenant_of(obj)
    if tenant is not None:
        tenants[tenant[0]] = tenant[1]
    gangs.extend(gangs_of(obj))
    quota = quota_of(obj)
    if quota is not None:
        quotas.append(quota)
    job = job_of(obj)
    if job is not None:
        jobs.append(job)


# Zone labels a volume's node affinity (or, before volume topology, its labels) may name, each meaning the
# zone: the EBS CSI driver's own key, and the beta label. Template nodes carry only ZONE_LABEL.
EBS_ZONE_LABEL = "topology.ebs.csi.aws.com/zone"  # the EBS CSI driver's topology key: the zone
ZONE_ID_LABEL = "topology.k8s.aws/zone-id"  # AWS's id of the zone (cloud-provider-aws, from v1.30)
ZONE_ALIASES = frozenset({ZONE_LABEL, EBS_ZONE_LABEL, "failure-domain.beta.kubernetes.io/zone"})


class VolumeMatcher:
    """Where a pod's persistent volumes let it run, folded into its required node affinity while the
    snapshot is built: kube-scheduler's volume binding and volume zone checks.

    A pod's claims are its ``persistentVolumeClaim`` volumes and the ``<pod>-<volume>`` claim of each
    generic ``ephemeral`` volume.

    * A claim bound to a PersistentVolume adds that volume's ``spec.nodeAffinity.required`` terms (ANDed
      with the pod's own: an EBS volume lives in one zone), else, for a volume made before volume
      topology, ``zone In`` its zone labels; a volume that says neither (NFS, EFS) adds nothing. A claim
      bound to a volume the snapshot does not have holds the pod, whatever other volumes it has (with
      no volume at all it adds nothing: see the last point):
      kube-scheduler refuses it on every node ("pvc(s) bound to non-existent pv(s)"), and where it may
      run is unknown, which must never read as "anywhere".
    * A claim not bound whose StorageClass binds ``WaitForFirstConsumer`` gets its volume where the pod
      lands: it adds the class's ``allowedTopologies`` (where the provisioner may make it), else
      nothing.
    * A claim not bound that binds at once (its class says ``Immediate``, names no class, or names one
      that does not exist), and a claim being deleted or missing, hold the pod whatever nodes there are
      (kube-scheduler: "pod has unbound immediate PersistentVolumeClaims", "persistentvolumeclaim ...
      not found"): :attr:`PodInfo.volume_wait` says why, and no node is launched for it. A claim is
      taken as missing only when the snapshot holds some claims, a class only when it holds some
      classes, and a claim's volume only when it holds some PersistentVolumes: ``spillway plan`` input
      may leave a whole kind out (``kubectl get nodes,pods,pdb``, or ``...,pvc`` without ``pv``), and a
      kind not given must never hold a pod. (Observe reads every kind whole or fails:
      spillway.observe.)

    The zone keys of ``ZONE_ALIASES`` are read as ``topology.kubernetes.io/zone``, the key new nodes'
    templates carry.

    It also counts the volumes each pod uses against their CSI driver's attach limit, as kube-scheduler's
    NodeVolumeLimits does (pkg/scheduler/framework/plugins/nodevolumelimits/csi.go,
    filterAttachableVolumes): a claim bound to a PersistentVolume of a CSI driver is that driver's
    volume (``spec.csi``: driver and volume handle), one of an in-tree EBS volume
    (``awsElasticBlockStore``, and such a volume inline in the pod) the EBS CSI driver's, as CSI
    migration translates it; a claim not bound, or bound to a volume the snapshot lacks, is a new
    volume of its StorageClass's provisioner (``kubernetes.io/aws-ebs`` read as ``ebs.csi.aws.com``). A
    claim that does not exist, and one with no class or a class that does not exist, counts nothing.
    CSI ephemeral inline volumes (``csi`` in the pod) are not counted: kube-scheduler does not either.
    Each driver's count is added to the pod's requests under its attach limit's name
    (:func:`~spillway.model.resources.attach_limit_key`), each volume once in a pod, whether or not
    other pods of its node use it: each pod carries all of its volumes wherever it moves, and the
    planner counts a volume once on a node (the NodeVolumeLimits filter counts unique volumes) from
    the pods' :attr:`PodInfo.volumes`.
    """

    def __init__(self) -> None:
        self._pods: list[tuple[int, str, tuple[str, ...]]] = []
        # pods that use volumes a driver's attach limit may count: index, namespace, node, claims, and
        # inline in-tree EBS volumes (unique names)
        self._attaching: list[tuple[int, str, str | None, tuple[str, ...], tuple[str, ...]]] = []
        self._drivers: dict[str, str | None] = {}  # PersistentVolume -> its unique CSI name (None: not CSI)
        self._limits: dict[str, dict[str, int]] = {}  # node -> CSI driver -> attach limit (its CSINode's)
        self._claims: dict[str, PersistentVolumeClaim] = {}  # "<namespace>/<claim>"
        # PersistentVolume -> where it can be used ((): anywhere)
        self._volumes: dict[str, tuple[Term, ...]] = {}
        self._classes: dict[str, StorageClass] = {}
        self._handles: dict[str, str] = {}  # PersistentVolume with spec.csi -> its volume handle
        self._attachments: list[tuple[str, str, str]] = []  # VolumeAttachment: node, attacher, volume

    def remember(self, index: int, pod: Pod) -> None:
        if pod.status.phase in TERMINAL_PHASES:
            return
        claims = tuple(
            v.persistent_volume_claim.claim_name
            if v.persistent_volume_claim
            else f"{pod.metadata.name}-{v.name}"
            for v in pod.spec.volumes
            if v.persistent_volume_claim is not None or v.ephemeral is not None
        )
        if claims:
            self._pods.append((index, pod.metadata.namespace or "default", claims))
        inline = tuple(
            _ebs_name(v.aws_elastic_block_store.volume_id)
            for v in pod.spec.volumes
            if v.aws_elastic_block_store
        )
        if claims or inline:
            namespace = pod.metadata.namespace or "default"
            self._attaching.append((index, namespace, pod.spec.node_name or None, claims, inline))

    def with_attach_limits(self, nodes: Iterable[NodeInfo]) -> tuple[NodeInfo, ...]:
        """``nodes`` with, in their allocatable, the attach limit of each CSI driver their CSINode gives a
        count for (it wins over an ``attachable-volumes-csi-*`` the node reports, as in kube-scheduler's
        getVolumeLimits). A node without a CSINode, or a driver without a count, has no limit."""
        attached = self._attached()
        out = []
        for node in nodes:
            counts = self._limits.get(node.name)
            if counts:
                extra = {attach_limit_key(driver): count * 1000 for driver, count in counts.items()}
                held = tuple(v for v in attached.get(node.name, ()) if v.partition("/")[0] in counts)
                node = replace(node, allocatable={**node.allocatable, **extra}, attached=held)
            out.append(node)
        return tuple(out)

    def _attached(self) -> dict[str, list[str]]:
        """Node -> the CSI volumes its VolumeAttachments hold that none of its pods uses, by unique
        name (``<attacher>/<handle>``), sorted. kube-scheduler (1.32 on) adds to the volumes of the
        node's pods those of the VolumeAttachments naming the node, each once: one whose attacher is
        empty, that names no PersistentVolume, or whose volume it cannot find or is not a CSI one is
        left out, attached yet or not (nodevolumelimits/csi.go, getNodeVolumeAttachmentInfo). So a
        volume still detaching after its pod left takes a slot until its VolumeAttachment is gone."""
        used: dict[str, set[str]] = {}
        for _index, namespace, node, claims, inline in self._attaching:
            if node is not None:
                used.setdefault(node, set()).update(self._names(namespace, claims, inline))
        out: dict[str, set[str]] = {}
        for node, attacher, volume in self._attachments:
            handle = self._handles.get(volume)
            name = f"{attacher}/{handle}"
            if attacher and handle and name not in used.get(node, ()):
                out.setdefault(node, set()).add(name)
        return {node: sorted(names) for node, names in out.items()}

    def add(self, obj: VolumeObject) -> None:
        if isinstance(obj, CSINode):
            self._limits[obj.metadata.name] = obj.attach_limits()
            return
        if isinstance(obj, PersistentVolumeClaim):
            self._claims[f"{obj.metadata.namespace or 'default'}/{obj.metadata.name}"] = obj
            return
        if isinstance(obj, StorageClass):
            self._classes[obj.metadata.name] = obj
            return
        if isinstance(obj, VolumeAttachment):
            spec = obj.spec
            if volume := spec.source.persistent_volume_name:
                self._attachments.append((spec.node_name, spec.attacher, volume))
            return
        self._add_volume(obj)

    def _add_volume(self, obj: PersistentVolume) -> None:
        self._drivers[obj.metadata.name] = _csi_name(obj)
        if obj.spec.csi is not None and obj.spec.csi.volume_handle:
            self._handles[obj.metadata.name] = obj.spec.csi.volume_handle
        required = obj.spec.node_affinity.required if obj.spec.node_affinity else None
        terms = tuple(tuple(_zone_key(r) for r in term) for term in _selector_terms(required))
        if not terms:
            zones = sorted(
                {z for k, v in obj.metadata.labels.items() if k in ZONE_ALIASES for z in v.split("__")}
            )
            terms = (((ZONE_LABEL, "In", tuple(zones), False),),) if zones else ()
        self._volumes[obj.metadata.name] = terms

    def apply(self, pods: list[PodInfo]) -> tuple[PodInfo, ...]:
        for index, namespace, claims in self._pods:
            terms, wait = pods[index].required_terms, None
            for claim in claims:
                where, why = self._claim(namespace, claim)
                wait = wait or why
                if where:
                    terms = tuple(t + w for t in terms for w in where) if terms else where
            own = pods[index].required_terms
            if terms != own or wait:
                pods[index] = replace(
                    pods[index],
                    required_terms=terms,
                    volume_wait=wait,
                    own_terms=own if terms != own else None,
                )
        self._count_attached(pods)
        return tuple(pods)

    def template(self, info: PodInfo, pod: Pod) -> PodInfo:
        """A pod a template makes (a ProvisioningRequest's pod set: ``info`` from ``pod``) with what its
        volumes say, as :meth:`apply` gives a pod of the cluster: its claims' terms and wait, its
        volumes in its requests and :attr:`PodInfo.volumes`. A generic ``ephemeral`` volume's claim is
        made with each pod (the ephemeral volume controller, from ``volumeClaimTemplate``), so it does
        not exist yet: each pod brings a new volume of that template's StorageClass (the default one
        when it names none, as the API server's DefaultStorageClass admission sets it), counted in its
        requests but not among its shared :attr:`PodInfo.volumes`; a WaitForFirstConsumer class adds its
        ``allowedTopologies``."""
        namespace = pod.metadata.namespace or "default"
        claims = tuple(
            v.persistent_volume_claim.claim_name for v in pod.spec.volumes if v.persistent_volume_claim
        )
        terms, wait = info.required_terms, None
        for claim in claims:
            where, why = self._claim(namespace, claim)
            terms, wait = _and_terms(terms, where), wait or why
        names = self._names(namespace, claims, _inline_ebs(pod))
        drivers = [name.partition("/")[0] for name in names]
        for storage in self._ephemeral_classes(pod):
            if storage.volume_binding_mode == "WaitForFirstConsumer":
                terms = _and_terms(terms, _allowed_topologies(storage))
            drivers.append(MIGRATED_PROVISIONERS.get(storage.provisioner, storage.provisioner))
        counts = {attach_limit_key(d): n * 1000 for d, n in Counter(drivers).items()}  # milli-units
        if terms == info.required_terms and not wait and not counts:
            return info
        return replace(
            info,
            required_terms=terms,
            volume_wait=wait,
            own_terms=info.required_terms if terms != info.required_terms else None,
            requests={**info.requests, **counts},
            volumes=tuple(sorted(names)),
        )

    def _ephemeral_classes(self, pod: Pod) -> list[StorageClass]:
        """The StorageClass (one with a provisioner) of each generic ephemeral volume of the pod."""
        found = (self._ephemeral_class(v) for v in pod.spec.volumes if v.ephemeral is not None)
        return [c for c in found if c is not None and c.provisioner]

    def _ephemeral_class(self, volume: Volume) -> StorageClass | None:
        """The StorageClass of a generic ephemeral volume's claim template (None: none known)."""
        assert volume.ephemeral is not None
        template = volume.ephemeral.get("volumeClaimTemplate")
        spec = template.get("spec") if isinstance(template, Mapping) else None
        name = spec.get("storageClassName") if isinstance(spec, Mapping) else None
        if isinstance(name, str):
            return self._classes.get(name)
        return default_class(self._classes.values()) if name is None else None

    def _count_attached(self, pods: list[PodInfo]) -> None:
        """Add to each pod's requests how many unique volumes of each CSI driver it uses, bound or not
        (what it brings to a node none of whose pods uses them: the planner counts a volume several
        pods of a node use once there, spillway.planner.context), and note them
        (:attr:`PodInfo.volumes`). A claim's volume yet to be made is named by the claim, as
        kube-scheduler names it (csi.go getCSIDriverInfoFromSC: ``<namespace>-<claim>``), so pending
        pods of one claim not bound yet share it on a node as pods of one bound volume do."""
        for index, namespace, _node, claims, inline in self._attaching:
            names = self._names(namespace, claims, inline)
            counts: dict[str, int] = {}
            for name in names:
                key = attach_limit_key(name.partition("/")[0])
                counts[key] = counts.get(key, 0) + 1000  # milli-units, as every request
            if counts:
                requests = {**pods[index].requests, **counts}
                pods[index] = replace(pods[index], requests=requests, volumes=tuple(sorted(names)))

    def _names(self, namespace: str, claims: Iterable[str], inline: Iterable[str]) -> set[str]:
        """The unique names of the volumes a pod's ``claims`` and ``inline`` EBS volumes give it."""
        return {n for claim in claims if (n := self._csi_of_claim(namespace, claim))} | set(inline)

    def _csi_of_claim(self, namespace: str, name: str) -> str | None:
        """The unique name (``<driver>/<handle>``) of the CSI volume a claim gives its pod, or None."""
        claim = self._claims.get(f"{namespace}/{name}")
        if claim is None:
            return None
        if claim.spec.volume_name and claim.spec.volume_name in self._drivers:
            return self._drivers[claim.spec.volume_name]
        storage = self._classes.get(claim.class_name) if claim.class_name else None
        if storage is None or not storage.provisioner:
            return None
        driver = MIGRATED_PROVISIONERS.get(storage.provisioner, storage.provisioner)
        return f"{driver}/{NEW_VOLUME}{namespace}/{name}"  # a volume yet to be made: one per claim

    def _claim(self, namespace: str, name: str) -> tuple[tuple[Term, ...], str | None]:
        """Where the claim lets its pod run (terms, ORed; none: anywhere), and why it holds the pod."""
        claim = self._claims.get(f"{namespace}/{name}")
        if claim is None:
            return (), f"its PersistentVolumeClaim {name} does not exist" if self._claims else None
        if claim.metadata.deletion_timestamp is not None:
            return (), f"its PersistentVolumeClaim {name} is being deleted"
        if claim.spec.volume_name:
            where = self._volumes.get(claim.spec.volume_name)
            if where is None and not self._volumes:
                return (), None  # volumes unknown (a kind left out): taken to let the pod run anywhere
            if where is None:
                return (), (
                    f"its PersistentVolumeClaim {name} is bound to PersistentVolume {claim.spec.volume_name}, "
                    "which the snapshot does not have: where the pod may run is unknown, and kube-scheduler "
                    "places no pod whose claim is bound to a volume that does not exist"
                )
            return where, None
        class_name = claim.class_name
        storage = self._classes.get(class_name)
        if storage is None and class_name and not self._classes:
            return (), None  # classes unknown: taken to wait for the pod
        if storage is None or storage.volume_binding_mode == "Immediate":
            how = (
                f"StorageClass {class_name} binds Immediately"
                if storage
                else (
                    f"StorageClass {class_name} does not exist" if class_name else "it names no StorageClass"
                )
            )
            return (), (
                f"its PersistentVolumeClaim {name} is not bound and {how}: kube-scheduler waits for the "
                "volume, which no new node brings"
            )
        return _allowed_topologies(storage), None


EBS_CSI_DRIVER = "ebs.csi.aws.com"
NEW_VOLUME = "claim "  # what the handle of a volume yet to be made starts with (none has a space)
# in-tree provisioners whose volumes CSI migration hands to a CSI driver (csi-translation-lib)
MIGRATED_PROVISIONERS = {"kubernetes.io/aws-ebs": EBS_CSI_DRIVER}


def _inline_ebs(pod: Pod) -> tuple[str, ...]:
    """The unique names of the pod's inline in-tree EBS volumes."""
    return tuple(
        _ebs_name(v.aws_elastic_block_store.volume_id) for v in pod.spec.volumes if v.aws_elastic_block_store
    )


def _and_terms(terms: tuple[Term, ...], where: tuple[Term, ...]) -> tuple[Term, ...]:
    """Node affinity terms (ORed) that also meet ``where`` (ORed; none: anywhere)."""
    if not where:
        return terms
    return tuple(t + w for t in terms for w in where) if terms else where


DEFAULT_CLASS_ANNOTATIONS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)


def default_class(classes: Iterable[StorageClass]) -> StorageClass | None:
    """The StorageClass a claim that names none gets: of those annotated default, the newest, then the
    first by name (k8s pkg/volume/util/storageclass.go, GetDefaultClass)."""
    marked = [
        c for c in classes if any(c.metadata.annotations.get(a) == "true" for a in DEFAULT_CLASS_ANNOTATIONS)
    ]
    epoch = datetime.min.replace(tzinfo=UTC)
    marked.sort(key=lambda c: c.metadata.name)
    marked.sort(key=lambda c: c.metadata.creation_timestamp or epoch, reverse=True)
    return marked[0] if marked else None


def _ebs_name(volume_id: str) -> str:
    """An in-tree EBS volume's unique CSI name: its id without an ``aws://<zone>/`` prefix, as CSI
    migration translates it (csi-translation-lib plugins/aws_ebs.go, KubernetesVolumeIDToEBSVolumeID)."""
    return f"{EBS_CSI_DRIVER}/{volume_id.rpartition('/')[2] if volume_id.startswith('aws://') else volume_id}"


def _csi_name(volume: PersistentVolume) -> str | None:
    """A PersistentVolume's unique CSI name (``<driver>/<handle>``), None for one no CSI driver serves."""
    if volume.spec.csi is not None and volume.spec.csi.driver and volume.spec.csi.volume_handle:
        return f"{volume.spec.csi.driver}/{volume.spec.csi.volume_handle}"
    if volume.spec.aws_elastic_block_store is not None and volume.spec.aws_elastic_block_store.volume_id:
        return _ebs_name(volume.spec.aws_elastic_block_store.volume_id)
    return None


def _allowed_topologies(storage: StorageClass) -> tuple[Term, ...]:
    """A WaitForFirstConsumer class's ``allowedTopologies`` as node affinity terms (none: anywhere)."""
    return tuple(
        tuple(_zone_key((r.key, "In", tuple(r.values), False)) for r in term.match_label_expressions)
        for term in storage.allowed_topologies
        if term.match_label_expressions
    )


def _zone_key(requirement: Requirement) -> Requirement:
    key, operator, values, is_field = requirement
    return (ZONE_LABEL if key in ZONE_ALIASES and not is_field else key, operator, values, is_field)


TermScope = frozenset[str] | None  # the namespaces a selector looks in; None: every namespace
# a term's namespaces as written: those it names, and its namespaceSelector (None: none; (): every one)
RawScope = tuple[frozenset[str], tuple[LabelRequirement, ...] | None]
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # the API server sets it on every namespace
# a selector no pod matches: the empty label key, which no object may carry
SELECTS_NOTHING: tuple[LabelRequirement, ...] = (("", "In", ()),)


class TopologyMatcher:
    """Pod topology, matched while the snapshot is built (pods come in any order): each distinct
    selector of a required anti-affinity term or a ``DoNotSchedule`` spread constraint (topology key,
    namespaces, selector) gets an id; a pod keeps its own terms' and constraints' ids
    (:attr:`PodInfo.anti_own`, :attr:`PodInfo.spread`) and the ids of those that select it
    (:attr:`PodInfo.selected_by`). Only the labels of pods not finished are kept, and only until
    :meth:`apply`.

    As ``core/v1`` has it: a null ``labelSelector`` selects no pod (and a spread counts none for an empty
    one either, as kube-scheduler: it only needs its key on the node); ``matchLabelKeys`` (and, for
    anti-affinity, ``mismatchLabelKeys``) add ``key in`` (``notin``) the pod's own value; a spread
    constraint counts pods of the pod's namespace; a pod affinity or anti-affinity term looks in the
    union of its ``namespaces`` and the namespaces its ``namespaceSelector`` selects (an empty selector:
    every namespace), and in the pod's own namespace when it has neither. The namespaces' labels are
    given to :meth:`apply` (each carries ``kubernetes.io/metadata.name``, as the API server sets it);
    without them (observe may not list namespaces) a selector is taken as every namespace: a conflict
    too many delays a pod by one launch, one too few could leave it pending for good.
    """

    def __init__(self) -> None:
        self._ids: dict[tuple[str, RawScope, tuple[LabelRequirement, ...]], int] = {}
        self._pods: list[tuple[int, str, dict[str, str]]] = []
        self._own: dict[int, dict[str, Any]] = {}  # pod index -> its own anti_own, affinity_own, spread

    def remember(self, index: int, pod: Pod) -> None:
        if pod.status.phase in TERMINAL_PHASES:
            return
        namespace, labels = pod.metadata.namespace or "default", pod.metadata.labels
        self._pods.append((index, namespace, labels))
        affinity = pod.spec.affinity
        anti = affinity.pod_anti_affinity if affinity else None
        near = affinity.pod_affinity if affinity else None
        anti_terms = anti.required_during_scheduling_ignored_during_execution if anti else []
        near_terms = near.required_during_scheduling_ignored_during_execution if near else []
        own: dict[str, Any] = {
            "anti_own": tuple(sorted(set(self._terms(anti_terms, namespace, labels)))),
            "affinity_own": tuple(sorted(set(self._terms(near_terms, namespace, labels, required=True)))),
            "spread": tuple(sorted(set(self._spreads(pod, namespace, labels)))),
        }
        if any(own.values()):
            self._own[index] = own

    def _terms(
        self,
        terms: Sequence[PodAffinityTerm],
        namespace: str,
        labels: Mapping[str, str],
        *,
        required: bool = False,
    ) -> list[tuple[int, str]]:
        """The terms' ids and keys. A term with a null ``labelSelector`` selects no pod: an anti-affinity
        term keeps the pod from nothing (left out), while a pod affinity term (``required``) is met on no
        node, not even by the pod itself as the first of a group, so kube-scheduler never places the pod
        (interpodaffinity: the term's selector is ``labels.Nothing()``)."""
        own = []
        for term in terms:
            if not term.topology_key or (term.label_selector is None and not required):
                continue
            if term.label_selector is None:
                selector = SELECTS_NOTHING
            else:
                selector = selector_requirements(term.label_selector) + _own_values(
                    labels, term.match_label_keys, term.mismatch_label_keys
                )
            if term.namespace_selector is None:
                scope: RawScope = (frozenset(term.namespaces or (namespace,)), None)
            else:
                scope = (frozenset(term.namespaces), selector_requirements(term.namespace_selector))
            own.append((self._id(term.topology_key, scope, selector), term.topology_key))
        return own

    def _spreads(
        self, pod: Pod, namespace: str, labels: Mapping[str, str]
    ) -> list[tuple[int, str, int, int, int]]:
        spread = []
        for constraint in pod.spec.topology_spread_constraints:
            key = constraint.topology_key
            if constraint.when_unsatisfiable != "DoNotSchedule" or not key:
                continue
            selector = selector_requirements(constraint.label_selector) + _own_values(
                labels, constraint.match_label_keys, ()
            )
            if constraint.label_selector is None or not selector:
                # kube-scheduler counts no pod for a null selector (Nothing) nor for an empty one
                # (Everything: countPodsMatchSelector returns 0 when selector.Empty(), kubernetes/
                # kubernetes pkg/scheduler/framework/plugins/podtopologyspread/common.go): the skew is
                # at most the pod itself, 1, never above maxSkew; but a node still needs the key
                selector = SELECTS_NOTHING
            term_id = self._id(key, (frozenset((namespace,)), None), selector)
            flags = (SPREAD_ALL_NODES if constraint.node_affinity_policy == "Ignore" else 0) | (
                SPREAD_TOLERATED_NODES if constraint.node_taints_policy == "Honor" else 0
            )
            spread.append((term_id, key, constraint.max_skew, constraint.min_domains or 1, flags))
        return spread

    def _id(self, key: str, scope: RawScope, selector: tuple[LabelRequirement, ...]) -> int:
        return self._ids.setdefault((key, scope, selector), len(self._ids))

    def apply(
        self, pods: list[PodInfo], namespaces: Mapping[str, Mapping[str, str]] | None = None
    ) -> tuple[PodInfo, ...]:
        """Give each pod its terms' ids and the ids of the terms that select it; ``namespaces``: every
        namespace's labels, when known."""
        if self._ids:
            anywhere: list[tuple[int, tuple[LabelRequirement, ...]]] = []  # a pod is matched only against
            by_namespace: dict[str, list[tuple[int, tuple[LabelRequirement, ...]]]] = {}  # its namespace's
            for (_, raw, selector), i in self._ids.items():
                scope = _resolve(raw, namespaces)
                for bucket in (
                    [anywhere] if scope is None else [by_namespace.setdefault(n, []) for n in scope]
                ):
                    bucket.append((i, selector))
            for index, namespace, labels in self._pods:
                candidates = [*anywhere, *by_namespace.get(namespace, ())]
                selected = tuple(
                    sorted(i for i, selector in candidates if selector_matches(selector, labels))
                )
                own = self._own.get(index, {})
                if selected or own:
                    pods[index] = replace(pods[index], **own, selected_by=selected)
        self._pods, self._own = [], {}  # the labels are kept only until here (class docstring)
        return tuple(pods)


def _resolve(raw: RawScope, namespaces: Mapping[str, Mapping[str, str]] | None) -> TermScope:
    """The namespaces a term looks in (None: every one)."""
    named, selector = raw
    if selector is None:
        return named
    if not selector or namespaces is None:
        return None  # an empty selector selects every namespace; unknown labels: taken as every one
    chosen = {
        name
        for name, labels in namespaces.items()
        if selector_matches(selector, {**labels, NAMESPACE_NAME_LABEL: name})
    }
    return frozenset(named | chosen)


def _own_values(
    labels: Mapping[str, str], match: Sequence[str], mismatch: Sequence[str]
) -> tuple[LabelRequirement, ...]:
    """``matchLabelKeys``/``mismatchLabelKeys``: ``key in``/``notin`` the pod's own value, ANDed in."""
    return tuple(
        (key, op, (labels[key],))
        for keys, op in ((match, "In"), (mismatch, "NotIn"))
        for key in keys
        if key in labels
    )


class SucceededMembers:
    """How many members of each gang Succeeded, per Volcano task ("" for none), tallied as the pods
    stream by: Volcano counts them toward its minimums and Kueue's pod group holds them (see
    :class:`spillway.planner.classes.Gangs`), but a finished pod holds no node, so the snapshot keeps
    only these counts, and only for the gangs with a member not finished (the planner asks for no other
    gang): a cluster's finished pods cost nothing. A Failed member is counted by no scheduler."""

    def __init__(self) -> None:
        self._counts: dict[str, dict[str, int]] = {}
        self._live: set[str] = set()

    def note(self, pod: PodInfo) -> None:
        if pod.gang is None:
            return
        if pod.phase == "Succeeded":
            tasks = self._counts.setdefault(pod.gang, {})
            task = pod.gang_task or ""
            tasks[task] = tasks.get(task, 0) + 1
        elif not pod.terminal:
            self._live.add(pod.gang)

    def counts(self) -> dict[str, dict[str, int]]:
        return {
            gang: dict(sorted(tasks.items()))
            for gang, tasks in sorted(self._counts.items())
            if gang in self._live
        }


class UncountedFailures:
    """The failed pods of each batch/v1 Job that its controller has not counted yet, noted as the pods
    stream by (a finished pod is then dropped), and taken off the Job's ``evictions_left``.

    The job controller keeps its ``batch.kubernetes.io/job-tracking`` finalizer on a pod until it has
    counted it. Each sync it adds the failed pods that still carry it and whose uid is not in
    ``status.uncountedTerminatedPods`` (``getNewFinishedPods``) to ``status.failed`` and that list's
    failed uids before comparing with ``spec.backoffLimit`` (``exceedsBackoffLimit``), then records
    their uids there and only then removes the finalizer (kubernetes pkg/controller/job/
    job_controller.go, ``syncJob``, ``trackJobStatusAndRemoveFinalizers``). So a Failed pod with the
    finalizer is a failure the Job status may not show yet: one fewer eviction is left, unless its uid
    is in the Job's ``uncountedTerminatedPods.failed`` (``JobInfo.uncounted_failed``, counted already),
    or the controller does not count it at all (:func:`spillway.model.jobs.counts_failure`: a
    ``podFailurePolicy`` ``Ignore`` rule it matches first, an Indexed Job's invalid completion index). A
    Succeeded pod is a completion.

    A pod being deleted that still has the finalizer while its uid is in ``uncountedTerminatedPods.failed``
    (the status written, the finalizer not removed yet) is counted already too: :meth:`mark_counted`
    marks it ``PodInfo.job_counted``, so the eviction room does not take it off again."""

    def __init__(self) -> None:
        self._failed: dict[str, list[FailedPod]] = {}
        self._terminating: dict[str, dict[str, str]] = {}  # Job key -> pod uid -> pod key

    def note(self, pod: Pod, info: PodInfo) -> None:
        if JOB_TRACKING_FINALIZER not in pod.metadata.finalizers:
            return
        name = info.batch_job or (info.owner_name if info.batch_owned else None)
        if not name:
            return
        key = job_key("Job", info.namespace, name)
        uid = pod.metadata.uid or info.key
        if info.phase == "Failed":
            self._failed.setdefault(key, []).append(FailedPod.of(pod, uid))
        elif pod.metadata.deletion_timestamp is not None and not info.terminal and pod.metadata.uid:
            self._terminating.setdefault(key, {})[pod.metadata.uid] = info.key

    def apply(self, jobs: Iterable[JobInfo]) -> tuple[JobInfo, ...]:
        """``jobs``, each counting Job's ``evictions_left`` less its failed pods not counted yet."""
        out = []
        for job in jobs:
            failed = self._failed.get(job.key)
            if failed and job.evictions_left is not None:
                new = sum(1 for p in failed if p.uid not in job.uncounted_failed and counts_failure(job, p))
                job = replace(job, evictions_left=max(0, job.evictions_left - new))
            out.append(job)
        return tuple(out)

    def mark_counted(self, pods: list[PodInfo], jobs: Iterable[JobInfo]) -> list[PodInfo]:
        """``pods``, those being deleted whose uid their counting Job lists in
        ``uncountedTerminatedPods.failed`` marked ``job_counted``."""
        counted = {
            pod
            for job in jobs
            if job.evictions_left is not None
            for uid, pod in self._terminating.get(job.key, {}).items()
            if uid in job.uncounted_failed
        }
        if not counted:
            return pods
        return [replace(p, job_counted=True) if p.key in counted else p for p in pods]


class VolcanoNormalPods:
    """Which pods are the members of a Volcano PodGroup made for them that they do not name yet, for a
    stream where pods and pod groups come in any order: each pod's would-be group is kept (nothing else
    of it) until :meth:`apply`.

    Volcano's podgroup controller creates a PodGroup for a pod that names none and annotates the pod
    with its name only afterwards (:func:`spillway.model.shared.volcano_normal_group`). A snapshot
    taken in between holds the group Pending with no member, which alone would be ``minMember`` pods
    of demand without pods (:meth:`spillway.planner.classes.Gangs.virtual_pods`), and the pod: one
    demand counted twice. The rule: a pod not finished, of no gang, whose namespace holds a Volcano
    PodGroup of the name Volcano gives its group, is that group's member, as it will be once annotated.
    A batch.volcano.sh Job's group is ``<job>-<job uid>`` and its pods carry the annotation from the
    start (volcano-sh/volcano pkg/controllers/job/job_controller_util.go, ``createJobPod``): it is never
    matched here, and stays demand without pods until they exist.
    """

    def __init__(self) -> None:
        # would-be gang -> (index, Volcano task) of each pod: the pods of one controller share one key
        self._pods: dict[str, list[tuple[int, str | None]]] = {}

    def remember(self, index: int, pod: Pod) -> None:
        if pod.status.phase in TERMINAL_PHASES:
            return
        key = volcano_normal_group(pod)
        if key is not None:
            self._pods.setdefault(key, []).append((index, volcano_task(pod)))

    def apply(
        self, pods: list[PodInfo], gangs: Iterable[GangInfo], succeeded: SucceededMembers
    ) -> list[PodInfo]:
        """``pods`` with those members' gang set; ``succeeded`` learns their gangs have a live member."""
        volcano = {g.key for g in gangs if g.source == "volcano"}
        for key, members in self._pods.items():
            if key in volcano:
                for index, task in members:
                    pods[index] = replace(pods[index], gang=key, gang_task=task)
                    succeeded.note(pods[index])
        self._pods = {}  # kept only until here (class docstring)
        return pods


class PdbMatcher:
    """Which PodDisruptionBudgets select which pods, for a stream where pods and budgets come in any
    order: the labels of bound, running pods are kept (nothing else of them) until :meth:`apply`.

    A budget's ``spec.selector`` selects by labels in its namespace; an empty selector selects every
    pod there, a missing one none (``policy/v1``).
    """

    def __init__(self) -> None:
        self._labels: list[tuple[int, str, dict[str, str]]] = []
        self._budgets: dict[str, list[tuple[str, tuple[LabelRequirement, ...]]]] = {}  # by namespace

    def remember(self, index: int, pod: Pod) -> None:
        if pod.spec.node_name and pod.status.phase not in TERMINAL_PHASES:
            self._labels.append((index, pod.metadata.namespace or "default", pod.metadata.labels))

    def add(self, pdb: PodDisruptionBudget) -> None:
        if pdb.spec.selector is not None:
            namespace = pdb.metadata.namespace or "default"
            selector = selector_requirements(pdb.spec.selector)
            self._budgets.setdefault(namespace, []).append((pdb.metadata.name, selector))

    def names(self, namespace: str, labels: Mapping[str, str]) -> tuple[str, ...]:
        budgets = self._budgets.get(namespace, ())
        return tuple(sorted(name for name, sel in budgets if selector_matches(sel, labels)))

    def apply(self, pods: list[PodInfo]) -> tuple[PodInfo, ...]:
        if self._budgets:
            for index, namespace, labels in self._labels:
                names = self.names(namespace, labels)
                if names:
                    pods[index] = replace(pods[index], pdbs=names)
        self._labels = []  # kept only until here (class docstring)
        return tuple(pods)
