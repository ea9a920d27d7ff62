"""Kubernetes objects as the API server returns them (the fields Spillway reads, nothing invented).

Parse a ``kubectl get nodes,pods,pdb -A -o json`` List with :func:`parse_kube_list`, or one object
with ``Node.model_validate(obj)``. Field names follow the API (``providerID``, ``nodeName``); unknown
fields are ignored so newer servers parse.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
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

from spillway.model.quantity import QuantityError, parse_quantity, to_milli
from spillway.model.resources import CPU, MEMORY, Resources, add_into, parse_resource_list
from spillway.model.utc import aware


def _check_quantity(value: str | int | float) -> str | int | float:
    to_milli(value)  # raises QuantityError (a ValueError): malformed, out of range or negative
    return value


Quantity = Annotated[str | int | float, AfterValidator(_check_quantity)]
QuantityMap = dict[str, Quantity]


def _check_signed_quantity(value: str | int | float) -> str | int | float:
    parse_quantity(value)  # raises QuantityError: malformed or out of range (a sign is allowed)
    return value


# a quantity where the API admits a sign (a CRD's quantity pattern ``^(\+|-)?...`` with no rule
# against it): the reader decides what a negative one means
SignedQuantityMap = dict[str, Annotated[str | int | float, AfterValidator(_check_signed_quantity)]]

CORDONED_BY_SPILLWAY = "spillway.io/cordoned"
# after the time in that annotation: a drain no plan started (a Spot warning, a terminate lifecycle
# action, an operator's) holds its node; a plan never uncordons it to reuse its room
HELD_DRAIN = "held"
# the names the interrupt function gives the drains of a Spot warning and a rebalance recommendation
# (``<prefix>-<instance id>``: spillway.act.interrupt.execution_name), the notices on which a group with
# Capacity Rebalancing launches a replacement for the instance itself
GROUP_REPLACED_PREFIXES = ("interrupt", "rebalance")
# what such a drain's reason ends with when it leaves the instance to its group (Capacity Rebalancing
# at the notice: ``terminate`` false); without it the drain terminates the instance once it is empty
GROUP_REPLACES = "its group replaces it (Capacity Rebalancing): not terminated"
# after the time in that annotation: a give-back's cordon (spillway.act.instances.judged_for_give_back),
# made before it reads a launch's member's pods and taken off the members it keeps; a gang's
# (``gang give-back <gang> (attempt <token>)``) or a scale-up back-off's
# (``scale-up back-off <group> (<owner>)``), each unique to its execution
GANG_GIVE_BACK = "gang give-back"
BACKOFF_GIVE_BACK = "scale-up back-off"
GIVE_BACKS = (GANG_GIVE_BACK, BACKOFF_GIVE_BACK)
# How long a give-back's cordon is its give-back's: the planner leaves such a node alone that long (it
# is about to go, or to be uncordoned), and after it takes the cordon for an orphan (the uncordon
# failed, the Lambda died): restored, or drained, as an orphaned drain. Above the longest a GiveBack or
# BackOff state can run with its retries: GiveBack up to 14 invocations of the scale function (3
# Lambda.* retries, 10 AwsThrottled/AwsUnavailable/... ones) of at most its 120 s Timeout, and 138 s of
# waits between them (1, 2, 4 s; 1, 2, 4, 8, 16 s, then 20 s each: MaxDelaySeconds), about 30.3 min;
# BackOff (3 + 6 retries) about 21 min. A retry finds its own cordon (the same reason) and keeps its time.
GIVE_BACK_LEASE_MINUTES = 35
# How long Spillway's cordon on an at-risk Spot node a rebalance recommendation's drain emptied for its
# Capacity Rebalancing group to replace (terminate: false) is that drain's, counted from the cordon, and
# how long the group's instance above its desired capacity counts as that node's replacement (and a Spot
# warning's node's, whose instance EC2 reclaims two minutes after the warning): the group launches its replacement at the notice and terminates the instance
# once the replacement passed its health check, but a group at or near its MaxSize, or with no Spot
# capacity in another pool, launches nothing (Auto Scaling User Guide, "Capacity Rebalancing behavior")
# and names no time after which it stops trying. A launch and its boot (cluster-autoscaler waits 15
# minutes for one: --max-node-provision-time), the health check grace period (300 s in the console) and
# the terminate hooks fit in it. After it the planner takes the cordon for an orphan: the node is given
# back, or drained when idle (spillway.planner.context.awaits_replacement).
REPLACEMENT_WAIT_MINUTES = 30
DRAINING_TAINT = "spillway.io/draining"
# The well-known label by which Kubernetes' service controller (cloud-provider controllers/service,
# the node predicate: the label's presence, whatever its value) and the AWS Load Balancer Controller
# (pkg/backend, defaultTrafficProxyNodeLabelSelector: DoesNotExist) leave a node out of load balancers.
# A drain whose node goes away puts it on the node with its cordon, and records that it did in
# LB_EXCLUDED_BY_SPILLWAY, so that giving the node back takes off only a label Spillway added.
EXCLUDE_FROM_LB_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"
EXCLUDE_FROM_LB_VALUE = "true"
LB_EXCLUDED_BY_SPILLWAY = "spillway.io/excluded-from-load-balancers"
# the NoSchedule taints other autoscalers put on a node they are removing: cluster-autoscaler's
# (utils/taints ToBeDeletedTaint) and Karpenter's (pkg/apis/v1 DisruptedTaintKey)
TO_BE_DELETED_TAINT = "ToBeDeletedByClusterAutoscaler"
KARPENTER_DISRUPTED_TAINT = "karpenter.sh/disrupted"
DELETION_TAINTS = (DRAINING_TAINT, TO_BE_DELETED_TAINT, KARPENTER_DISRUPTED_TAINT)
# PreferNoSchedule on a node the planner expects to remove once a timer runs out (cluster-autoscaler's
# DeletionCandidateOfClusterAutoscaler): kube-scheduler puts new pods elsewhere when it can
CANDIDATE_TAINT = "spillway.io/scale-down-candidate"
CANDIDATE_TAINT_EFFECT = "PreferNoSchedule"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
# the local volumes (comma-separated names) whose data may be lost: they keep the pod from no drain
# (kubernetes/autoscaler cluster-autoscaler/utils/drain, SafeToEvictLocalVolumesKey)
SAFE_TO_EVICT_LOCAL_VOLUMES = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
# a Go duration: a pending pod younger than this (from its creationTimestamp) triggers no scale-up
# (kubernetes/autoscaler cluster-autoscaler/utils/annotations PodScaleUpDelayAnnotationKey)
POD_SCALE_UP_DELAY = "cluster-autoscaler.kubernetes.io/pod-scale-up-delay"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
MIRROR_POD = "kubernetes.io/config.mirror"
# a pod of a DaemonSet-like controller (Datadog's ExtendedDaemonSet, OpenKruise's Advanced DaemonSet)
# marked to be taken as a DaemonSet's: cluster-autoscaler's utils/pod IsDaemonSetPod reads the value
# "true" exactly (case-sensitive string equality), beside a controller owner of kind DaemonSet
DAEMONSET_POD = "cluster-autoscaler.kubernetes.io/daemonset-pod"
# on a DaemonSet pod: "true" has a drain that removes its node evict it once the node's other pods are
# gone, any other value keeps it, whatever the default for empty or occupied nodes (cluster-autoscaler's
# simulator/utils/daemonset PodsToEvict, EnableDsEvictionKey)
ENABLE_DS_EVICTION = "cluster-autoscaler.kubernetes.io/enable-ds-eviction"
INT64_MAX = 2**63 - 1  # an int64 field of the API
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
# what the API server takes as a pod deletion cost (kubernetes/kubernetes pkg/apis/core/helper,
# GetDeletionCostFromPodAnnotations: no "+" nor leading zero, then strconv.ParseInt(value, 10, 32))
_DELETION_COST = re.compile(r"-[0-9]+|0|[1-9][0-9]*")


def deletion_cost(value: str) -> int | None:
    """A ``controller.kubernetes.io/pod-deletion-cost`` value as the API server reads it: a 32-bit
    integer, None for any value it refuses (ValidatePodSpecificAnnotations: "must be a 32bit integer";
    Python's ``int`` also takes "+5", " 5", "1_000" and values past int32)."""
    if len(value) > 11 or not _DELETION_COST.fullmatch(value):  # "-2147483648": 11 characters at most
        return None
    number = int(value)
    return number if -(2**31) <= number < 2**31 else None


# every time of a Kubernetes object: aware, UTC when it says no offset
Time = Annotated[datetime, AfterValidator(aware)]


def _one_if_negative(value: int) -> int:
    """A negative ``terminationGracePeriodSeconds`` read as 1 s, as the API server has defaulted it since
    1.27 (kubernetes#115606; 1.22 already deleted with 1 s): an older cluster can still return one, and
    one such pod must not make the whole pod list unreadable."""
    return 1 if value < 0 else value


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
    """A top-level object (Pod, Node) whose unusable quantities and annotations are refused one by one.

    A quantity that is malformed, out of Kubernetes' range or negative does not fail the object (nor
    the page of a list it arrived in): the entry is left out of its map and ``refused_quantities`` names
    each such field and why. An annotation whose value the API server refuses (a Pod's
    ``controller.kubernetes.io/pod-deletion-cost`` that is no 32-bit integer) is left out likewise, read
    as unset, and named in ``refused_annotations``. Readers decide: the ``spillway plan`` input refuses
    the file for either (:func:`iter_kube_list`); observe logs each, and leaves out a pending pod whose
    quantities are not all known (see ``spillway.observe``).
    """

    _refused: tuple[str, ...] = PrivateAttr(default=())
    _refused_annotations: tuple[str, ...] = PrivateAttr(default=())

    @property
    def refused(self) -> tuple[str, ...]:
        """``"<field>: <why>"`` for each quantity and annotation left out; empty for a clean object."""
        return self._refused + self._refused_annotations

    @property
    def refused_quantities(self) -> tuple[str, ...]:
        """The quantities left out: what the object asks for, or offers, is not all known."""
        return self._refused

    @property
    def refused_annotations(self) -> tuple[str, ...]:
        """The annotations left out, read as unset."""
        return self._refused_annotations

    @model_validator(mode="wrap")
    @classmethod
    def _refuse_bad_quantities(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            obj = handler(data)
        except ValidationError as exc:
            errors = exc.errors()
            if not isinstance(data, dict) or not all(_is_quantity_error(e) for e in errors):
                raise
            cleaned = data
            for err in errors:
                cleaned = _without(cleaned, err["loc"])
            obj = handler(cleaned)
            obj._refused = tuple(f"{dotted(e['loc'])}: {e['ctx']['error']}" for e in errors)
        obj._refused_annotations += obj._drop_refused_annotations()
        return obj

    def _drop_refused_annotations(self) -> tuple[str, ...]:
        """Remove the annotations whose value the API server refuses; ``"<field>: <why>"`` for each."""
        return ()

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
    generation: int | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    owner_references: list[OwnerReference] = Field(default_factory=list)
    creation_timestamp: Time | None = None
    deletion_timestamp: Time | None = None
    finalizers: list[str] = Field(default_factory=list)


class Taint(KubeModel):
    key: str
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Toleration(KubeModel):
    key: str | None = None
    # Lt and Gt compare the taint's value with the toleration's as integers (Kubernetes 1.35,
    # TaintTolerationComparisonOperators): the API server takes them only with the gate on
    operator: Literal["Exists", "Equal", "Lt", "Gt"] | None = None
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


class LabelSelectorRequirement(KubeModel):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list)


class LabelSelector(KubeModel):
    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)


class PodAffinityTerm(KubeModel):
    """A required pod (anti-)affinity term (``core/v1`` PodAffinityTerm). A pod affinity term on the zone
    key keeps a gang in one zone; an anti-affinity term keeps the pod out of every domain of
    ``topologyKey`` that runs a pod its selector matches (spillway.model.cluster.AntiAffinityMatcher)."""

    topology_key: str = ""
    label_selector: LabelSelector | None = None  # null matches no pod; empty, every pod
    namespaces: list[str] = Field(default_factory=list)
    namespace_selector: LabelSelector | None = None  # null (and no namespaces): the pod's own namespace
    match_label_keys: list[str] = Field(default_factory=list)  # key in (the pod's value), ANDed in
    mismatch_label_keys: list[str] = Field(default_factory=list)  # key notin (the pod's value)


class WeightedPodAffinityTerm(KubeModel):
    """A preferred pod (anti-)affinity term: the scheduler only scores it; read for the namespaces it
    names (a ResourceQuota's ``CrossNamespacePodAffinity`` scope)."""

    weight: int = 0
    pod_affinity_term: PodAffinityTerm = Field(default_factory=PodAffinityTerm)


class PodAffinity(KubeModel):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = Field(default_factory=list)
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = Field(
        default_factory=list
    )


class Affinity(KubeModel):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class ResourceRequirements(KubeModel):
    requests: QuantityMap | None = None
    limits: QuantityMap | None = None


class EnvVar(KubeModel):
    """Only literal values are read (``valueFrom`` is resolved by the kubelet, not visible here)."""

    name: str
    value: str | None = None


class ContainerPort(KubeModel):
    container_port: int = 0
    host_port: int | None = None  # set: the node's port, which two pods cannot both take
    protocol: str = "TCP"
    host_ip: str | None = Field(default=None, alias="hostIP")  # the API spells it hostIP, not hostIp


class Container(KubeModel):
    name: str = ""
    resources: ResourceRequirements | None = None
    ports: list[ContainerPort] = Field(default_factory=list)
    restart_policy: str | None = None  # "Always" on an init container makes it a sidecar
    # read only for an elastic job: torchrun's --nnodes and --rdzv-endpoint, else env PET_NNODES and
    # PET_RDZV_ENDPOINT (spillway.model.jobs)
    command: list[str] = Field(default_factory=list)
    args: list[str] = Field(default_factory=list)
    env: list[EnvVar] = Field(default_factory=list)

    def requests(self) -> Resources:
        """Requests, defaulting to limits where only a limit is set (as the API server does)."""
        res = self.resources
        if res is None:
            return {}
        merged: dict[str, str | int | float] = dict(res.limits or {})
        merged.update(res.requests or {})
        return parse_resource_list(merged)


class PodSchedulingGate(KubeModel):
    name: str


class WorkloadReference(KubeModel):
    """``spec.workloadRef`` (scheduling.k8s.io v1alpha1, Kubernetes 1.35): a pod group of a Workload."""

    name: str
    pod_group: str = ""
    pod_group_replica_key: str = ""


class SchedulingGroup(KubeModel):
    """``spec.schedulingGroup`` (scheduling.k8s.io v1alpha2, Kubernetes 1.36): a PodGroup by name."""

    pod_group_name: str


class TopologySpreadConstraint(KubeModel):
    """``core/v1`` TopologySpreadConstraint; only ``whenUnsatisfiable: DoNotSchedule`` ones bind."""

    max_skew: int = Field(default=1, ge=1)
    topology_key: str = ""
    when_unsatisfiable: str = "DoNotSchedule"
    label_selector: LabelSelector | None = None  # null: no pod counted, nothing to spread
    min_domains: int | None = Field(default=None, ge=1)
    match_label_keys: list[str] = Field(default_factory=list)
    # which nodes count as domains: those passing the pod's node affinity (Honor, the default) or all
    # (Ignore); all whatever their taints (Ignore, the default) or those whose taints it tolerates (Honor)
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None


class ClaimSource(KubeModel):
    claim_name: str = ""


class EmptyDirSource(KubeModel):
    medium: str = ""  # "" (the node's disk), "Memory" (tmpfs), "HugePages", "HugePages-<size>"


class EbsVolumeSource(KubeModel):
    """An in-tree ``awsElasticBlockStore`` volume (inline in a pod, or a PersistentVolume's): its
    ``volumeID``, ``vol-...`` or ``aws://<zone>/vol-...``."""

    volume_id: str = Field(default="", alias="volumeID")


class Volume(KubeModel):
    """A pod volume: its claims (a generic ``ephemeral`` volume's claim is ``<pod>-<volume>``), and
    whether it keeps data on the node (``emptyDir``, ``hostPath``: spillway.model.cluster.local_volumes);
    an inline in-tree EBS volume counts against the EBS CSI driver's attach limit."""

    name: str = ""
    persistent_volume_claim: ClaimSource | None = None
    aws_elastic_block_store: EbsVolumeSource | None = None
    ephemeral: dict[str, Any] | None = None
    empty_dir: EmptyDirSource | None = None
    host_path: dict[str, Any] | None = None


class PodSpec(KubeModel):
    node_name: str | None = None
    hostname: str | None = None  # the pod's host name (JobSet sets it): a rendezvous endpoint may name it
    node_selector: dict[str, str] = Field(default_factory=dict)
    affinity: Affinity | None = None
    topology_spread_constraints: list[TopologySpreadConstraint] = Field(default_factory=list)
    volumes: list[Volume] = Field(default_factory=list)
    tolerations: list[Toleration] = Field(default_factory=list)
    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] = Field(default_factory=list)
    overhead: QuantityMap | None = None
    # pod-level resources (PodLevelResources, beta and on by default since Kubernetes 1.34): for CPU,
    # memory and huge pages they replace what the containers add up to
    resources: ResourceRequirements | None = None
    priority: int | None = None
    priority_class_name: str | None = None
    # whether the pod may preempt pods of lower priority (the API server defaults it from the pod's
    # PriorityClass to PreemptLowerPriority; it accepts no other value)
    preemption_policy: Literal["Never", "PreemptLowerPriority"] | None = None
    scheduler_name: str | None = None
    scheduling_gates: list[PodSchedulingGate] = Field(default_factory=list)
    # dynamic resource allocation (resource.k8s.io): devices the pod claims; only their presence is read
    resource_claims: list[dict[str, Any]] = Field(default_factory=list)
    workload_ref: WorkloadReference | None = None
    scheduling_group: SchedulingGroup | None = None
    # seconds the pod may be active, from status.startTime, before the kubelet fails it (a positive
    # integer: the API server refuses anything else)
    active_deadline_seconds: int | None = Field(default=None, gt=0, le=INT64_MAX, strict=True)
    # how long the kubelet gives the pod to stop once deleted (the API's default: 30)
    # (an int64; a negative one is 1: _one_if_negative, after the range is checked)
    termination_grace_period_seconds: (
        Annotated[int, Field(ge=-INT64_MAX - 1, le=INT64_MAX, strict=True), AfterValidator(_one_if_negative)]
        | None
    ) = None
    # spec.hostNetwork: the pod uses the node's network namespace, so the kubelet starts it while the
    # network plugin is not ready (Pod.never_started; a DaemonSet's template: cluster-autoscaler's checks)
    host_network: bool = False


class Condition(KubeModel):
    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_transition_time: Time | None = None


class StatusCondition(Condition):
    """A ``metav1.Condition`` of a custom resource's status (k8s.io/apimachinery meta/v1 types.go:
    ``observedGeneration`` beside the fields every condition has), kept as the API returned it.

    Several controllers write conditions of one object, and a JSON merge patch replaces the whole
    list: a writer sends back the conditions it does not own, and must send them exactly as read
    (:meth:`as_read`), not as this model re-serialises them."""

    observed_generation: int | None = None
    _raw: dict[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_as_read(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        condition = handler(data)
        if isinstance(data, dict):
            condition._raw = dict(data)
        return condition

    def as_read(self) -> dict[str, Any]:
        """The condition exactly as read (one made in code: its fields, in the API's names)."""
        return dict(self._raw) or self.model_dump(by_alias=True, mode="json", exclude_none=True)


class ContainerState(KubeModel):
    """One of a container status's ``state``/``lastState``: only which of them is set is read."""

    running: dict[str, Any] | None = None
    terminated: dict[str, Any] | None = None


class ContainerStatus(KubeModel):
    """What the kubelet reports of one container; only what an in-place resize changes, and whether the
    container ever ran, are read.

    ``allocatedResources``: the requests the kubelet has admitted; ``resources``: those the runtime
    runs it with (both as the kubelet writes them; the spec holds the desired ones). ``state``,
    ``lastState`` and ``restartCount``: :meth:`ever_ran`."""

    name: str = ""
    allocated_resources: QuantityMap | None = None
    resources: ResourceRequirements | None = None
    state: ContainerState = Field(default_factory=ContainerState)
    last_state: ContainerState = Field(default_factory=ContainerState)
    restart_count: int = 0

    def ever_ran(self) -> bool:
        """The runtime started the container at least once: it is running or has terminated, now or
        before its last restart, or it restarted. A container the kubelet never started reports only
        ``waiting`` (``ContainerCreating``, ``PodInitializing``, an image pull's back-off), or no status
        at all."""
        return (
            self.restart_count > 0
            or self.state.running is not None
            or self.state.terminated is not None
            or self.last_state.terminated is not None
        )


# The pod condition of a resize the kubelet has not admitted (Kubernetes 1.33+), with its reason
# Deferred (it may be once room frees up) or Infeasible (never on this node). PodResizeInProgress (admitted,
# being applied) changes nothing in what is counted: the largest of spec and status is counted anyway.
RESIZE_PENDING = "PodResizePending"
RESIZE_INFEASIBLE = "Infeasible"


class PodStatus(KubeModel):
    phase: str | None = None
    conditions: list[Condition] = Field(default_factory=list)
    start_time: Time | None = None
    nominated_node_name: str | None = None
    container_statuses: list[ContainerStatus] = Field(default_factory=list)
    init_container_statuses: list[ContainerStatus] = Field(default_factory=list)

    def resize_infeasible(self) -> bool:
        """The first ``PodResizePending`` condition gives ``Infeasible`` as its reason (as
        component-helpers' ``IsPodResizeInfeasible`` reads it)."""
        pending = next((c for c in self.conditions if c.type == RESIZE_PENDING), None)
        return pending is not None and pending.reason == RESIZE_INFEASIBLE


def _largest(lists: Iterable[Resources]) -> Resources:
    """Per resource, the largest value any of the lists gives (a resource one list names is kept)."""
    out: Resources = {}
    for resources in lists:
        for name, value in resources.items():
            if name not in out or value > out[name]:
                out[name] = value
    return out


class Pod(RefusableModel):
    kind: Literal["Pod"] = "Pod"
    metadata: ObjectMeta
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus = Field(default_factory=PodStatus)

    def _drop_refused_annotations(self) -> tuple[str, ...]:
        annotations = self.metadata.annotations
        value = annotations.get(POD_DELETION_COST)
        if value is None or deletion_cost(value) is not None:
            return ()
        del annotations[POD_DELETION_COST]
        why = "must be a 32-bit integer, as the API server requires"
        return (f"metadata.annotations.{POD_DELETION_COST}: {why}: {value!r}",)

    def is_ready(self) -> bool:
        """Its Ready condition is True: what a PodDisruptionBudget counts as healthy."""
        return any(c.type == "Ready" and c.status == "True" for c in self.status.conditions)

    def never_started(self) -> bool:
        """Bound, phase ``Pending``, and no container of it (init or app) ever ran
        (:meth:`ContainerStatus.ever_ran`). ``status.startTime`` says nothing here: the kubelet's status
        manager sets it on its first status write of the pod, before it finds the node's network not
        ready and starts nothing (kubernetes/kubernetes pkg/kubelet/status/status_manager.go,
        updateStatusInternal; pkg/kubelet/kubelet.go, SyncPod); a pod whose init containers run is
        ``Pending`` too, and has started. Never for a pod on the host network (``spec.hostNetwork``):
        SyncPod starts it even while the network plugin is not ready ("only start the pod if it uses the
        host network"), so on a node NotReady for its CNI it is on its way (an image pulling), not stuck."""
        status = self.status
        return (
            self.spec.node_name is not None
            and not self.spec.host_network
            and (status.phase or "Pending") == "Pending"
            and not any(s.ever_ran() for s in (*status.container_statuses, *status.init_container_statuses))
        )

    def effective_requests(self) -> Resources:
        """What the scheduler reserves for the pod.

        ``max(sum of app containers + sidecars, each plain init container + the sidecars started
        before it) + overhead`` — the formula of the scheduler since sidecar containers; without
        sidecars it is the classic ``max(sum(containers), max(init containers)) + overhead``. An app
        container or sidecar of a bound pod counts what :meth:`_container_requests` says.
        """
        statuses = self._statuses_by_name()
        infeasible = self.status.resize_infeasible()
        total: Resources = {}
        for container in self.spec.containers:
            add_into(total, self._container_requests(container, statuses, infeasible))
        init_peak: Resources = {}
        sidecars: Resources = {}
        for init in self.spec.init_containers:
            if init.restart_policy == "Always":
                req = self._container_requests(init, statuses, infeasible)
                add_into(sidecars, req)
                candidate = dict(sidecars)
            else:
                req = init.requests()  # not resizable: its spec is what the scheduler reads
                candidate = dict(sidecars)
                add_into(candidate, req)
            for name, value in candidate.items():
                if value > init_peak.get(name, 0):
                    init_peak[name] = value
        add_into(total, sidecars)
        for name, value in init_peak.items():
            if value > total.get(name, 0):
                total[name] = value
        total.update(self._pod_level_requests())
        if self.spec.overhead:
            add_into(total, parse_resource_list(self.spec.overhead))
        return total

    def _statuses_by_name(self) -> dict[str, ContainerStatus]:
        """The container statuses of a bound pod, app and init alike, by container name (an unbound
        pod's status holds nothing a kubelet allocated: its spec is what it asks)."""
        if self.spec.node_name is None:
            return {}
        status = self.status
        return {s.name: s for s in (*status.container_statuses, *status.init_container_statuses)}

    @staticmethod
    def _container_requests(
        container: Container, statuses: Mapping[str, ContainerStatus], infeasible: bool
    ) -> Resources:
        """What the scheduler counts for one app container or sidecar (component-helpers'
        ``determineContainerReqs``, Kubernetes 1.35 and 1.36).

        Once the kubelet reports the container's ``resources``, the largest, per resource, of the
        desired requests (spec), the allocated ones and the actual ones: a shrink holds what it had
        until the kubelet has applied it, a grow reserves its room at once. An ``Infeasible`` resize
        will never be granted, so the spec is left out then. Without that status: the spec.
        """
        spec = container.requests()
        found = statuses.get(container.name)
        if found is None or found.resources is None:
            return spec
        actual = parse_resource_list(found.resources.requests)
        allocated = parse_resource_list(found.allocated_resources)
        return _largest((actual, allocated) if infeasible else (spec, actual, allocated))

    def _pod_level_requests(self) -> Resources:
        """``spec.resources``' requests (a limit where only a limit is set, as the API server defaults
        them) for the resources a pod may set at its level: CPU, memory and huge pages."""
        res = self.spec.resources
        if res is None:
            return {}
        merged: dict[str, str | int | float] = dict(res.limits or {})
        merged.update(res.requests or {})
        return {
            name: value
            for name, value in parse_resource_list(merged).items()
            if name in (CPU, MEMORY) or name.startswith("hugepages-")
        }


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

    def reports_not_ready(self) -> bool:
        """Its Ready condition is ``False``: the kubelet itself reports the node not ready (the network
        plugin, the runtime), so it is alive and its pods' statuses are current. ``Unknown`` is the node
        controller's once the kubelet stopped reporting (NodeStatusUnknown): what the API holds of its
        pods is the last the kubelet sent."""
        return any(c.type == "Ready" and c.status == "False" for c in self.status.conditions)

    def ready_changed_at(self) -> datetime | None:
        """The Ready condition's ``lastTransitionTime``: since when the node is (or is not) Ready."""
        return next((c.last_transition_time for c in self.status.conditions if c.type == "Ready"), None)


class PodDisruptionBudgetSpec(KubeModel):
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    selector: LabelSelector | None = None
    # when a running pod that is not Ready may be evicted whatever the budget allows: IfHealthyBudget
    # (the default) or AlwaysAllow (policy/v1, GA in 1.31; spillway.model.cluster.PdbInfo)
    unhealthy_pod_eviction_policy: str | None = None


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


# -- the shared cluster: tenants, pod groups (gangs), capacity quotas --

TENANT_LABEL = "spillway.io/tenant"
# ProvisioningRequest consumers (spillway.model.provreq): the request a pod uses, and its class
CONSUME_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
# the key cluster-autoscaler still honours from before the API moved to autoscaling.x-k8s.io
LEGACY_CONSUME_ANNOTATION = "cluster-autoscaler.kubernetes.io/consume-provisioning-request"
COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"  # scheduler-plugins coscheduling
VOLCANO_ANNOTATION = "scheduling.k8s.io/group-name"  # Volcano
VOLCANO_TASK_SPEC = "volcano.sh/task-spec"  # the Volcano Job task a pod is of (annotation, else label)
KUEUE_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
KUEUE_TOTAL_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
# Kueue admits a pod group marked so before all its pods exist (its key alone counts, any value):
# its pods are then no gang (spillway.model.shared.gang_of)
KUEUE_FAST_ADMISSION_ANNOTATION = "kueue.x-k8s.io/pod-group-fast-admission"
COSCHEDULING_GROUP = "scheduling.x-k8s.io"
VOLCANO_GROUP = "scheduling.volcano.sh"
UPSTREAM_GROUP = "scheduling.k8s.io"
AUTOSCALING_GROUP = "autoscaling.x-k8s.io"


class Namespace(KubeModel):
    kind: Literal["Namespace"] = "Namespace"
    metadata: ObjectMeta


class PriorityClass(KubeModel):
    """``scheduling.k8s.io/v1`` PriorityClass (cluster-scoped): the priority ``value`` a
    ``priorityClassName`` stands for; ``globalDefault`` marks the class of pods that name none. Read for
    Volcano, which orders a job by its PodGroup's class (spillway.model.shared.gang_priorities)."""

    kind: Literal["PriorityClass"] = "PriorityClass"
    api_version: str = UPSTREAM_GROUP + "/v1"
    metadata: ObjectMeta
    value: int = Field(default=0, ge=-(2**31), le=2**31 - 1)  # int32, as the API server keeps it
    global_default: bool = False


class PodGroupStatus(KubeModel):
    phase: str | None = None


class CoschedulingPodGroupSpec(KubeModel):
    min_member: int = Field(default=0, ge=0)
    min_resources: QuantityMap | None = None


class CoschedulingPodGroup(KubeModel):
    """scheduler-plugins coscheduling ``PodGroup`` (``scheduling.x-k8s.io/v1alpha1``)."""

    kind: Literal["PodGroup"] = "PodGroup"
    api_version: str = COSCHEDULING_GROUP + "/v1alpha1"
    metadata: ObjectMeta
    spec: CoschedulingPodGroupSpec = Field(default_factory=CoschedulingPodGroupSpec)
    status: PodGroupStatus = Field(default_factory=PodGroupStatus)


class VolcanoPodGroupSpec(KubeModel):
    min_member: int = Field(default=0, ge=0)
    min_resources: QuantityMap | None = None
    min_task_member: dict[str, int] = Field(default_factory=dict)
    queue: str | None = None
    priority_class_name: str | None = None


class VolcanoPodGroup(KubeModel):
    """Volcano ``PodGroup`` (``scheduling.volcano.sh/v1beta1``); ``status.phase`` Pending/Inqueue/Running."""

    kind: Literal["PodGroup"] = "PodGroup"
    api_version: str = VOLCANO_GROUP + "/v1beta1"
    metadata: ObjectMeta
    spec: VolcanoPodGroupSpec = Field(default_factory=VolcanoPodGroupSpec)
    status: PodGroupStatus = Field(default_factory=PodGroupStatus)


class GangPolicy(KubeModel):
    min_count: int | None = Field(default=None, ge=0)


class SchedulingPolicy(KubeModel):
    """``basic`` or ``gang``; only ``gang.minCount`` matters here."""

    gang: GangPolicy | None = None


class UpstreamPodGroupSpec(KubeModel):
    scheduling_policy: SchedulingPolicy | None = None


class UpstreamPodGroup(KubeModel):
    """Kubernetes ``PodGroup`` (``scheduling.k8s.io/v1alpha2``, 1.36): pods name it in ``spec.schedulingGroup``."""

    kind: Literal["PodGroup"] = "PodGroup"
    api_version: str = UPSTREAM_GROUP + "/v1alpha2"
    metadata: ObjectMeta
    spec: UpstreamPodGroupSpec = Field(default_factory=UpstreamPodGroupSpec)


class WorkloadPodGroup(KubeModel):
    """An entry of ``spec.podGroups`` (v1alpha1: ``policy``) or ``spec.podGroupTemplates`` (v1alpha2:
    ``schedulingPolicy``)."""

    name: str
    policy: SchedulingPolicy | None = None
    scheduling_policy: SchedulingPolicy | None = None

    def min_count(self) -> int | None:
        policy = self.scheduling_policy or self.policy
        return policy.gang.min_count if policy and policy.gang else None


class WorkloadSpec(KubeModel):
    pod_groups: list[WorkloadPodGroup] = Field(default_factory=list)
    pod_group_templates: list[WorkloadPodGroup] = Field(default_factory=list)


class Workload(KubeModel):
    """Kubernetes ``Workload`` (``scheduling.k8s.io``): pods reference a group by ``spec.workloadRef``."""

    kind: Literal["Workload"] = "Workload"
    api_version: str = UPSTREAM_GROUP + "/v1alpha1"
    metadata: ObjectMeta
    spec: WorkloadSpec = Field(default_factory=WorkloadSpec)


class QuotaResources(KubeModel):
    resources: QuantityMap = Field(default_factory=dict)


class CapacityQuotaSpec(KubeModel):
    selector: LabelSelector | None = None
    limits: QuotaResources = Field(default_factory=QuotaResources)


class CapacityQuotaStatus(KubeModel):
    used: QuotaResources | None = None
    conditions: list[StatusCondition] = Field(default_factory=list)
    observed_generation: int | None = None  # v1beta1: the generation the controller last observed


class CapacityQuota(KubeModel):
    """sig-autoscaling ``CapacityQuota`` (``autoscaling.x-k8s.io``, cluster-scoped): the summed resources
    (and ``nodes``) of the nodes its selector matches may not exceed ``spec.limits.resources``."""

    kind: Literal["CapacityQuota"] = "CapacityQuota"
    api_version: str = AUTOSCALING_GROUP + "/v1beta1"
    metadata: ObjectMeta
    spec: CapacityQuotaSpec = Field(default_factory=CapacityQuotaSpec)
    status: CapacityQuotaStatus = Field(default_factory=CapacityQuotaStatus)


class ScopedResourceSelectorRequirement(KubeModel):
    """One of a ResourceQuota's ``spec.scopeSelector.matchExpressions``."""

    scope_name: str
    operator: str
    values: list[str] = Field(default_factory=list)


class ScopeSelector(KubeModel):
    match_expressions: list[ScopedResourceSelectorRequirement] = Field(default_factory=list)


class ResourceQuotaSpec(KubeModel):
    hard: QuantityMap = Field(default_factory=dict)
    scopes: list[str] = Field(default_factory=list)
    scope_selector: ScopeSelector | None = None


class ResourceQuotaStatus(KubeModel):
    hard: QuantityMap = Field(default_factory=dict)  # what the quota controller enforces
    used: QuantityMap = Field(default_factory=dict)  # written by the quota controller


class ResourceQuota(KubeModel):
    """core/v1 ``ResourceQuota`` (namespaced): what the pods of its namespace (those its scopes select)
    may request together. Read for CapacityBuffers, as cluster-autoscaler's buffer controller reads it."""

    kind: Literal["ResourceQuota"] = "ResourceQuota"
    api_version: str = "v1"
    metadata: ObjectMeta
    spec: ResourceQuotaSpec = Field(default_factory=ResourceQuotaSpec)
    status: ResourceQuotaStatus = Field(default_factory=ResourceQuotaStatus)


# -- jobs whose pods the autoscaler may move (spillway.model.jobs, spillway.planner.disruption) --

KUBEFLOW_GROUP = "kubeflow.org"  # Kubeflow training operator v1: PyTorchJob, PaddleJob, ...
BATCH_GROUP = "batch"


class ElasticPolicy(KubeModel):
    """``spec.elasticPolicy`` of a PyTorchJob or PaddleJob (``kubeflow.org/v1``), as stored: the training
    operator defaults an unset bound in memory only (spillway.model.jobs reads it as it does), and only a
    PyTorchJob's range reaches its pods."""

    min_replicas: int | None = Field(default=None, ge=0)
    max_replicas: int | None = Field(default=None, ge=0)


class ReplicaSpec(KubeModel):
    replicas: int | None = Field(default=None, ge=0)
    # OnFailure, Always, ExitCode or Never, as stored (the operator's default, which it never writes, is
    # the kind's own: OnFailure for PyTorchJob and PaddleJob, Never for TFJob, XGBoostJob and JAXJob);
    # which of them fail the whole job on an evicted pod is the kind's rule (spillway.model.jobs)
    restart_policy: str | None = None


class KubeflowJobCondition(KubeModel):
    type: str = ""
    status: str = ""


class KubeflowJobStatus(KubeModel):
    """A Kubeflow job's ``status``, of which only ``conditions`` is read: one of type Succeeded or Failed
    whose status is True marks the job finished (kubeflow/training-operator pkg/util/status.go,
    ``IsFinished``), which the operator then no longer fails (spillway.model.jobs)."""

    conditions: list[KubeflowJobCondition] = Field(default_factory=list)

    @property
    def finished(self) -> bool:
        return any(c.type in ("Succeeded", "Failed") and c.status == "True" for c in self.conditions)


class TFJobSpec(KubeModel):
    tf_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)
    # the operator then lets a Worker fail without failing the job (spillway.model.jobs)
    enable_dynamic_worker: bool = False


class TFJob(KubeModel):
    """Kubeflow ``TFJob`` (``kubeflow.org/v1``); replica types ``Chief``, ``Master``, ``PS``, ``Worker``,
    ``Evaluator``."""

    kind: Literal["TFJob"] = "TFJob"
    api_version: str = KUBEFLOW_GROUP + "/v1"
    metadata: ObjectMeta
    spec: TFJobSpec = Field(default_factory=TFJobSpec)
    status: KubeflowJobStatus = Field(default_factory=KubeflowJobStatus)


class XGBoostJobSpec(KubeModel):
    xgb_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)


class XGBoostJob(KubeModel):
    """Kubeflow ``XGBoostJob`` (``kubeflow.org/v1``); replica types ``Master`` and ``Worker``."""

    kind: Literal["XGBoostJob"] = "XGBoostJob"
    api_version: str = KUBEFLOW_GROUP + "/v1"
    metadata: ObjectMeta
    spec: XGBoostJobSpec = Field(default_factory=XGBoostJobSpec)
    status: KubeflowJobStatus = Field(default_factory=KubeflowJobStatus)


class JAXJobSpec(KubeModel):
    jax_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)


class JAXJob(KubeModel):
    """Kubeflow ``JAXJob`` (``kubeflow.org/v1``); replica type ``Worker``."""

    kind: Literal["JAXJob"] = "JAXJob"
    api_version: str = KUBEFLOW_GROUP + "/v1"
    metadata: ObjectMeta
    spec: JAXJobSpec = Field(default_factory=JAXJobSpec)
    status: KubeflowJobStatus = Field(default_factory=KubeflowJobStatus)


class PyTorchJobSpec(KubeModel):
    elastic_policy: ElasticPolicy | None = None
    pytorch_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)


class PyTorchJob(KubeModel):
    """Kubeflow ``PyTorchJob`` (``kubeflow.org/v1``); replica types ``Master`` and ``Worker``."""

    kind: Literal["PyTorchJob"] = "PyTorchJob"
    api_version: str = KUBEFLOW_GROUP + "/v1"
    metadata: ObjectMeta
    spec: PyTorchJobSpec = Field(default_factory=PyTorchJobSpec)
    status: KubeflowJobStatus = Field(default_factory=KubeflowJobStatus)


class PaddleJobSpec(KubeModel):
    elastic_policy: ElasticPolicy | None = None
    paddle_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)


class PaddleJob(KubeModel):
    """Kubeflow ``PaddleJob`` (``kubeflow.org/v1``); replica types ``Master`` and ``Worker``."""

    kind: Literal["PaddleJob"] = "PaddleJob"
    api_version: str = KUBEFLOW_GROUP + "/v1"
    metadata: ObjectMeta
    spec: PaddleJobSpec = Field(default_factory=PaddleJobSpec)
    status: KubeflowJobStatus = Field(default_factory=KubeflowJobStatus)


class MPIJob(KubeModel):
    """An ``MPIJob`` (``kubeflow.org``: kubeflow/mpi-operator's ``v2beta1``, the training operator's ``v1``),
    of which only the status is read: its pods are told from the pods themselves (spillway.model.jobs),
    and a finished MPIJob runs no mpirun over the workers it leaves running."""

    kind: Literal["MPIJob"] = "MPIJob"
    api_version: str = KUBEFLOW_GROUP + "/v2beta1"
    metadata: ObjectMeta
    status: KubeflowJobStatus = Field(default_factory=KubeflowJobStatus)


class PodConditionPattern(KubeModel):
    type: str
    status: str = "True"


class PodFailurePolicyOnExitCodes(KubeModel):
    """``operator`` is In or NotIn; the job controller matches it against each terminated container's
    exit code other than 0 (of the container named ``containerName``, or of any container when unset)."""

    operator: str
    values: list[int] = Field(default_factory=list)
    container_name: str | None = None


class PodFailurePolicyRule(KubeModel):
    """``action`` is FailJob, FailIndex, Ignore or Count; a rule has ``onExitCodes`` or
    ``onPodConditions``. The job controller takes the rules in order and the first that matches a failed
    pod decides. Both kinds can match an evicted pod: it carries the condition ``DisruptionTarget=True``,
    and its containers, stopped by SIGTERM (then SIGKILL after the grace period), exit 143 or 137 unless
    they handle the signal (see :func:`spillway.model.jobs.job_of`)."""

    action: str
    on_exit_codes: PodFailurePolicyOnExitCodes | None = None
    on_pod_conditions: list[PodConditionPattern] = Field(default_factory=list)


class PodFailurePolicy(KubeModel):
    rules: list[PodFailurePolicyRule] = Field(default_factory=list)


class JobSpec(KubeModel):
    pod_failure_policy: PodFailurePolicy | None = None
    # the failed pods the Job survives: it fails once status.failed is above it (the API server stores 6
    # when unset, or the largest int32 with backoffLimitPerIndex; a stored Job always has it)
    backoff_limit: int | None = Field(default=None, ge=0)
    backoff_limit_per_index: int | None = Field(default=None, ge=0)
    # seconds the Job may be active, from status.startTime, before the controller terminates its pods
    # (a positive integer); a suspended Job's timer is stopped, and reset when it resumes
    active_deadline_seconds: int | None = Field(default=None, gt=0, le=INT64_MAX, strict=True)
    suspend: bool = False
    # Indexed or NonIndexed (the default); an Indexed Job's pods carry their completion index, which the
    # controller counts only below spec.completions (required for Indexed)
    completion_mode: str | None = None
    completions: int | None = None


class UncountedTerminatedPods(KubeModel):
    failed: list[str] = Field(default_factory=list)  # UIDs of failed pods not yet in status.failed


class JobStatus(KubeModel):
    start_time: Time | None = None  # when the controller started (or last resumed) the Job
    failed: int = 0  # the failed pods counted against backoffLimit
    uncounted_terminated_pods: UncountedTerminatedPods | None = None
    conditions: list[Condition] = Field(default_factory=list)  # Complete, Failed, FailureTarget, ...


class BatchJob(KubeModel):
    """Kubernetes ``Job`` (``batch/v1``): ``spec.podFailurePolicy``, ``spec.activeDeadlineSeconds``,
    ``spec.suspend``, ``spec.backoffLimit`` (and ``backoffLimitPerIndex``), ``spec.completionMode`` and
    ``spec.completions``, ``status.startTime``,
    ``status.failed``, ``status.uncountedTerminatedPods`` and ``status.conditions`` are read."""

    kind: Literal["Job"] = "Job"
    api_version: str = BATCH_GROUP + "/v1"
    metadata: ObjectMeta
    spec: JobSpec = Field(default_factory=JobSpec)
    status: JobStatus = Field(default_factory=JobStatus)


VOLCANO_BATCH_GROUP = "batch.volcano.sh"  # Volcano's Job (batch.volcano.sh/v1alpha1)


class VolcanoLifecyclePolicy(KubeModel):
    """One of a Volcano Job's ``policies`` (or a task's): on ``event`` (or any of ``events``; ``*`` is
    any event), the job controller takes ``action`` (volcano-sh/apis pkg/apis/batch/v1alpha1/job.go,
    ``LifecyclePolicy``). ``exitCode`` rules are not read: an evicted pod brings no exit code."""

    action: str = ""
    event: str = ""
    events: list[str] = Field(default_factory=list)


class VolcanoTaskSpec(KubeModel):
    name: str = ""
    policies: list[VolcanoLifecyclePolicy] = Field(default_factory=list)


class VolcanoJobSpec(KubeModel):
    tasks: list[VolcanoTaskSpec] = Field(default_factory=list)
    policies: list[VolcanoLifecyclePolicy] = Field(default_factory=list)


class VolcanoJob(KubeModel):
    """Volcano ``Job`` (``batch.volcano.sh/v1alpha1``): its and its tasks' ``policies`` are read."""

    kind: Literal["Job"] = "Job"
    api_version: str = VOLCANO_BATCH_GROUP + "/v1alpha1"
    metadata: ObjectMeta
    spec: VolcanoJobSpec = Field(default_factory=VolcanoJobSpec)


TrainingJob = PyTorchJob | PaddleJob | TFJob | XGBoostJob | JAXJob | MPIJob | BatchJob | VolcanoJob


class LocalObjectRef(KubeModel):
    name: str = ""


class ScalableRef(KubeModel):
    api_group: str = ""
    kind: str = ""
    name: str = ""


class CapacityBufferSpec(KubeModel):
    """``provisioningStrategy`` (default ``buffer.x-k8s.io/active-capacity``); one of ``podTemplateRef``
    (a PodTemplate of the namespace: the shape of one chunk) or ``scalableRef`` (a workload with a scale
    subresource); ``replicas`` and/or ``percentage`` (of the scalable object's replicas; both set: the
    larger); ``limits`` caps the chunks' summed requests (alone: as many chunks as fit; the CRD's
    quantity pattern admits a negative limit)."""

    provisioning_strategy: str | None = None
    pod_template_ref: LocalObjectRef | None = None
    scalable_ref: ScalableRef | None = None
    replicas: int | None = Field(default=None, ge=0)
    percentage: int | None = Field(default=None, ge=0)
    # the CRD's pattern admits a negative limit: such a limit is skipped (spillway.model.buffer)
    limits: SignedQuantityMap | None = None


class CapacityBufferStatus(KubeModel):
    pod_template_ref: LocalObjectRef | None = None
    replicas: int | None = None
    pod_template_generation: int | None = None
    conditions: list[StatusCondition] = Field(default_factory=list)
    provisioning_strategy: str | None = None


class CapacityBuffer(KubeModel):
    """sig-autoscaling ``CapacityBuffer`` (``autoscaling.x-k8s.io`` v1beta1; v1alpha1, which
    cluster-autoscaler's CRD still serves, deprecated, and Karpenter's first CRD served alone, has the
    same fields): spare capacity held as placeholder pods (namespaced)."""

    kind: Literal["CapacityBuffer"] = "CapacityBuffer"
    api_version: str = AUTOSCALING_GROUP + "/v1beta1"
    metadata: ObjectMeta
    spec: CapacityBufferSpec = Field(default_factory=CapacityBufferSpec)
    status: CapacityBufferStatus = Field(default_factory=CapacityBufferStatus)


class PersistentVolumeClaimSpec(KubeModel):
    volume_name: str | None = None  # the PersistentVolume it is bound to
    storage_class_name: str | None = None


# The class of a claim made before ``spec.storageClassName``; read first, as kube-scheduler reads it.
BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"


class PersistentVolumeClaim(KubeModel):
    """core/v1 PersistentVolumeClaim: what it is bound to, else its StorageClass (how it binds)."""

    kind: Literal["PersistentVolumeClaim"] = "PersistentVolumeClaim"
    api_version: str = "v1"
    metadata: ObjectMeta
    spec: PersistentVolumeClaimSpec = Field(default_factory=PersistentVolumeClaimSpec)

    @property
    def class_name(self) -> str:
        """Its StorageClass ("" for none: only a volume made for it binds it, at once)."""
        beta = self.metadata.annotations.get(BETA_STORAGE_CLASS)
        return beta if beta is not None else self.spec.storage_class_name or ""


class VolumeNodeAffinity(KubeModel):
    required: NodeSelector | None = None


class CsiVolumeSource(KubeModel):
    driver: str = ""
    volume_handle: str = ""


class PersistentVolumeSpec(KubeModel):
    node_affinity: VolumeNodeAffinity | None = None
    csi: CsiVolumeSource | None = None  # a CSI driver's volume: counts against its attach limit
    aws_elastic_block_store: EbsVolumeSource | None = None  # in-tree EBS, migrated to the CSI driver


class PersistentVolume(KubeModel):
    """core/v1 PersistentVolume: where it can be used (``spec.nodeAffinity``, else the zone labels of
    volumes made before volume topology: spillway.model.cluster.VolumeMatcher)."""

    kind: Literal["PersistentVolume"] = "PersistentVolume"
    api_version: str = "v1"
    metadata: ObjectMeta
    spec: PersistentVolumeSpec = Field(default_factory=PersistentVolumeSpec)


class VolumeNodeResources(KubeModel):
    count: int | None = Field(default=None, ge=0)


class CSINodeDriver(KubeModel):
    """One driver of a CSINode. ``topologyKeys`` has no omitempty (k8s.io/api storage/v1 types.go), so
    a driver that reports no topology (secrets-store, EFS, NFS) comes with ``topologyKeys: null``."""

    name: str
    node_id: str = Field(default="", alias="nodeID")
    allocatable: VolumeNodeResources | None = None
    topology_keys: list[str] | None = None


class CSINodeSpec(KubeModel):
    # no omitempty either: a node no driver registered on yet has ``drivers: null``
    drivers: list[CSINodeDriver] | None = None


class CSINode(KubeModel):
    """storage.k8s.io/v1 CSINode, named as its Node: per CSI driver the kubelet registered there, how
    many of its unique volumes the node may use (``allocatable.count``; none: no limit), which
    kube-scheduler's NodeVolumeLimits holds pods to."""

    kind: Literal["CSINode"] = "CSINode"
    api_version: str = "storage.k8s.io/v1"
    metadata: ObjectMeta
    spec: CSINodeSpec = Field(default_factory=CSINodeSpec)

    def attach_limits(self) -> dict[str, int]:
        """Driver name -> how many of its volumes the node may use, for each driver that says."""
        return {
            d.name: d.allocatable.count
            for d in self.spec.drivers or ()
            if d.allocatable and d.allocatable.count is not None
        }


class ConfigMap(KubeModel):
    """core/v1 ConfigMap: only cluster-autoscaler's priority expander's is read (spillway.model.priorities)."""

    kind: Literal["ConfigMap"] = "ConfigMap"
    api_version: str = "v1"
    metadata: ObjectMeta
    data: dict[str, str] = Field(default_factory=dict)


class TopologySelectorRequirement(KubeModel):
    key: str
    values: list[str] = Field(default_factory=list)


class TopologySelectorTerm(KubeModel):
    match_label_expressions: list[TopologySelectorRequirement] = Field(default_factory=list)


class StorageClass(KubeModel):
    """storage.k8s.io/v1 StorageClass: when its claims bind (``volumeBindingMode``: ``Immediate``, the
    API's default, or ``WaitForFirstConsumer``) and where its volumes can be made
    (``allowedTopologies``: terms ORed, each expression ``key In values``, ANDed)."""

    kind: Literal["StorageClass"] = "StorageClass"
    api_version: str = "storage.k8s.io/v1"
    metadata: ObjectMeta
    provisioner: str = ""
    volume_binding_mode: Literal["Immediate", "WaitForFirstConsumer"] = "Immediate"
    allowed_topologies: list[TopologySelectorTerm] = Field(default_factory=list)


class PodTemplate(KubeModel):
    """core/v1 ``PodTemplate``: ``template`` is a pod's metadata and spec (kept raw: read when named)."""

    kind: Literal["PodTemplate"] = "PodTemplate"
    api_version: str = "v1"
    metadata: ObjectMeta
    template: dict[str, Any] = Field(default_factory=dict)


class ScalableSpec(KubeModel):
    replicas: int | None = Field(default=None, ge=0)
    parallelism: int | None = Field(default=None, ge=0)  # a Job's
    template: dict[str, Any] = Field(default_factory=dict)  # the pod template, kept raw
    # a LabelSelector (apps, batch) or, a ReplicationController's, a plain label map
    selector: LabelSelector | dict[str, str] | None = None


class ScalableStatus(KubeModel):
    replicas: int | None = Field(default=None, ge=0)


class Scalable(KubeModel):
    """What a CapacityBuffer's ``scalableRef`` names, as cluster-autoscaler's resolvers read it: an
    ``apps/v1`` Deployment, StatefulSet or ReplicaSet, a core ``v1`` ReplicationController (their
    ``spec.replicas``) or a ``batch/v1`` Job (its ``spec.parallelism``); its pods' shape is
    ``spec.template``, unless a pod of it runs (:attr:`pod_selector`)."""

    kind: Literal["Deployment", "StatefulSet", "ReplicaSet", "ReplicationController", "Job"]
    api_version: str = "apps/v1"
    metadata: ObjectMeta
    spec: ScalableSpec = Field(default_factory=ScalableSpec)
    status: ScalableStatus = Field(default_factory=ScalableStatus)

    @property
    def replicas(self) -> int:
        """The count a ``percentage`` is of: ``spec.parallelism`` for a Job, else ``spec.replicas``
        (1 when unset, the API server's default for both)."""
        count = self.spec.parallelism if self.kind == "Job" else self.spec.replicas
        return 1 if count is None else count

    @property
    def pod_selector(self) -> str:
        """Its pods' label selector in string form, as its ``autoscaling/v1`` Scale's
        ``status.selector`` gives it (``metav1.FormatLabelSelector``: ``k=v``, ``k in (a,b)``,
        ``k notin (a,b)``, ``k``, ``!k``, comma-joined); "" for a Job, which has no scale subresource,
        and for a selector that selects nothing or everything (none is read then)."""
        selector = self.spec.selector
        if self.kind == "Job" or selector is None:
            return ""
        if isinstance(selector, dict):
            return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
        terms = [f"{k}={v}" for k, v in sorted(selector.match_labels.items())]
        for req in selector.match_expressions:
            values = ",".join(sorted(req.values))
            terms.append(
                {"In": f"{req.key} in ({values})", "NotIn": f"{req.key} notin ({values})",
                 "Exists": req.key, "DoesNotExist": f"!{req.key}"}[req.operator]
            )  # fmt: skip
        return ",".join(terms)


class DaemonPodSpec(PodSpec):
    """A DaemonSet's pod template spec: the fields of a pod spec its controller and cluster-autoscaler
    read besides the scheduling ones (which node, which network: ``host_network``, a pod spec's)."""


class DaemonPodTemplate(KubeModel):
    spec: DaemonPodSpec = Field(default_factory=DaemonPodSpec)


class DaemonSetSpec(KubeModel):
    template: DaemonPodTemplate = Field(default_factory=DaemonPodTemplate)


class DaemonSet(KubeModel):
    """``apps/v1`` DaemonSet: what pod its controller makes for each node (``spec.template``), which is
    what a fresh node of a group without a node of its own runs (spillway.model.daemonsets)."""

    kind: Literal["DaemonSet"] = "DaemonSet"
    api_version: str = "apps/v1"
    metadata: ObjectMeta
    spec: DaemonSetSpec = Field(default_factory=DaemonSetSpec)


class VolumeAttachmentSource(KubeModel):
    persistent_volume_name: str | None = None  # or an inline volume's spec, which is not counted


class VolumeAttachmentSpec(KubeModel):
    attacher: str
    source: VolumeAttachmentSource = Field(default_factory=VolumeAttachmentSource)
    node_name: str


class VolumeAttachmentStatus(KubeModel):
    attached: bool = False


class VolumeAttachment(KubeModel):
    """storage.k8s.io/v1 VolumeAttachment (cluster-scoped): the attach/detach controller's intent to
    attach a PersistentVolume (``spec.source.persistentVolumeName``) to a node (``spec.nodeName``) through
    a CSI driver (``spec.attacher``). It stays until the volume is detached, after its pods are gone:
    kube-scheduler (1.32 on) counts it against the node's attach limit (nodevolumelimits/csi.go,
    getNodeVolumeAttachmentInfo, kubernetes/kubernetes#127757), attached yet or not."""

    kind: Literal["VolumeAttachment"] = "VolumeAttachment"
    api_version: str = "storage.k8s.io/v1"
    metadata: ObjectMeta
    spec: VolumeAttachmentSpec
    status: VolumeAttachmentStatus | None = None


# what observe lists for volumes: where they let pods run, and (CSINodes) how many a node may use, and
# (VolumeAttachments) how many it has attached
VolumeObject = PersistentVolumeClaim | PersistentVolume | StorageClass | CSINode | VolumeAttachment

SharedObject = (
    Namespace
    | CoschedulingPodGroup
    | VolcanoPodGroup
    | UpstreamPodGroup
    | Workload
    | PriorityClass
    | CapacityQuota
    | PyTorchJob
    | PaddleJob
    | TFJob
    | XGBoostJob
    | JAXJob
    | MPIJob
    | BatchJob
    | VolcanoJob
    | CapacityBuffer
    | PodTemplate
    | Scalable
    | PersistentVolumeClaim
    | PersistentVolume
    | StorageClass
    | CSINode
    | VolumeAttachment
    | ConfigMap
    | ResourceQuota
    | DaemonSet
)
KubeObject = Node | Pod | PodDisruptionBudget | SharedObject
CLUSTER_SCOPED = frozenset(
    {
        "Node",
        "Namespace",
        "CapacityQuota",
        "PersistentVolume",
        "StorageClass",
        "CSINode",
        "VolumeAttachment",
        "PriorityClass",
    }
)


class KubeList(BaseModel):
    """Objects of a ``kubectl get nodes,pods,pdb,namespaces,podgroups...,capacityquotas -A -o json`` List,
    split by kind."""

    nodes: list[Node] = Field(default_factory=list)
    pods: list[Pod] = Field(default_factory=list)
    pdbs: list[PodDisruptionBudget] = Field(default_factory=list)
    others: list[SharedObject] = Field(default_factory=list)  # namespaces, pod groups, quotas, buffers


ModelType = type[KubeModel]
_KINDS: dict[str, ModelType] = {
    "Node": Node,
    "Pod": Pod,
    "PodDisruptionBudget": PodDisruptionBudget,
    "Namespace": Namespace,
    "PodTemplate": PodTemplate,
    "PersistentVolumeClaim": PersistentVolumeClaim,
    "PersistentVolume": PersistentVolume,
    "ConfigMap": ConfigMap,
    "ReplicationController": Scalable,
    "ResourceQuota": ResourceQuota,
}
# Kinds whose meaning depends on the API group: PodGroup is spelled the same by three projects.
_GROUP_KINDS: dict[tuple[str, str], ModelType] = {
    ("PodGroup", COSCHEDULING_GROUP): CoschedulingPodGroup,
    ("PodGroup", VOLCANO_GROUP): VolcanoPodGroup,
    ("PodGroup", UPSTREAM_GROUP): UpstreamPodGroup,
    ("Workload", UPSTREAM_GROUP): Workload,
    ("PriorityClass", UPSTREAM_GROUP): PriorityClass,
    ("CapacityQuota", AUTOSCALING_GROUP): CapacityQuota,
    ("PyTorchJob", KUBEFLOW_GROUP): PyTorchJob,
    ("PaddleJob", KUBEFLOW_GROUP): PaddleJob,
    ("TFJob", KUBEFLOW_GROUP): TFJob,
    ("XGBoostJob", KUBEFLOW_GROUP): XGBoostJob,
    ("JAXJob", KUBEFLOW_GROUP): JAXJob,
    ("MPIJob", KUBEFLOW_GROUP): MPIJob,  # v2beta1 and v1 alike
    ("Job", BATCH_GROUP): BatchJob,  # not Volcano's Job (batch.volcano.sh)
    ("Job", VOLCANO_BATCH_GROUP): VolcanoJob,
    ("CapacityBuffer", AUTOSCALING_GROUP): CapacityBuffer,  # v1beta1 and v1alpha1 alike
    ("Deployment", "apps"): Scalable,
    ("StatefulSet", "apps"): Scalable,
    ("ReplicaSet", "apps"): Scalable,
    ("DaemonSet", "apps"): DaemonSet,
    ("StorageClass", "storage.k8s.io"): StorageClass,
    ("CSINode", "storage.k8s.io"): CSINode,
    ("VolumeAttachment", "storage.k8s.io"): VolumeAttachment,
}


def api_group(api_version: str) -> str:
    """``scheduling.volcano.sh/v1beta1`` → ``scheduling.volcano.sh``; ``v1`` → ``""`` (core)."""
    return api_version.rpartition("/")[0]


def _model_for(kind: str, api_version: str) -> ModelType | None:
    return _KINDS.get(kind) or _GROUP_KINDS.get((kind, api_group(api_version)))


def _check_item(obj: KubeObject, index: int, seen: dict[tuple[str, str | None, str], int]) -> None:
    """Refuse an object with an unusable quantity, or a second object of one kind and name."""
    if isinstance(obj, RefusableModel) and obj.refused:
        raise ValueError(f"items[{index}].{obj.refused[0]} ({obj.describe()})")
    # Two objects of one kind and name: the API server never holds them, and keeping either would
    # silently lose the other.
    namespace = None if obj.kind in CLUSTER_SCOPED else obj.metadata.namespace or "default"
    group = api_group(str(getattr(obj, "api_version", "")))
    kind = f"{obj.kind}.{group}" if group else obj.kind
    key = (kind, namespace, obj.metadata.name)
    first = seen.setdefault(key, index)
    if first != index:
        name = "/".join(p for p in key[1:] if p)
        raise ValueError(f"items[{index}]: {obj.kind} {name} is also items[{first}]")


def _validate(model: ModelType, item: dict[str, Any], kind: str, api_version: str, index: int) -> Any:
    extra = {k: v for k, v in (("kind", kind), ("apiVersion", api_version)) if v and not item.get(k)}
    try:
        return model.model_validate({**item, **extra} if extra else item)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ValueError(f"items[{index}].{where}: {err['msg']}") from None


def iter_kube_list(doc: Any, *, release: bool = False) -> Iterator[KubeObject]:
    """The objects Spillway reads in a List (``kind: List`` or ``NodeList``/``PodList``/...), one at a time.

    Nodes, Pods, PDBs, Namespaces, pod groups (coscheduling, Volcano, Kubernetes ``PodGroup`` and
    ``Workload``), CapacityQuotas, PyTorchJobs, PaddleJobs, TFJobs, XGBoostJobs, JAXJobs, batch/v1 Jobs, CapacityBuffers and what
    they name (PodTemplates, apps/v1 Deployments, StatefulSets, ReplicaSets, core
    ReplicationControllers, batch Jobs: a Job is yielded twice, as a :class:`BatchJob` and as a
    :class:`Scalable`), and apps/v1 DaemonSets; other kinds are skipped. With ``release`` each raw item is dropped from ``doc``
    once parsed, so a large List is not held twice (raw and parsed). Raises ``ValueError`` naming the
    item and field: for an unusable quantity or annotation (see :class:`RefusableModel`), naming the
    object, and for a second object of one kind and name.
    """
    if not isinstance(doc, dict):
        raise ValueError("top level: expected a Kubernetes List object")
    items = doc.get("items")
    if not isinstance(items, list):
        raise ValueError("items: missing or not a list")
    list_kind = str(doc.get("kind", "List"))
    default_kind = list_kind[: -len("List")] if list_kind.endswith("List") and list_kind != "List" else None
    default_version = str(doc.get("apiVersion", "")) if default_kind else ""
    seen: dict[tuple[str, str | None, str], int] = {}
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValueError(f"items[{index}]: not an object")
        kind = str(item.get("kind") or default_kind)
        api_version = str(item.get("apiVersion") or default_version)
        model = _model_for(kind, api_version)
        if model is None:
            continue  # other kinds in the same List (Services, ...) are not ours to read
        obj = _validate(model, item, kind, api_version, index)
        _check_item(obj, index, seen)
        # a batch Job is read twice: whether its pods may move, and as a buffer's scalableRef may name it
        also = _validate(Scalable, item, kind, api_version, index) if isinstance(obj, BatchJob) else None
        if release:
            items[index] = None
        yield obj
        if also is not None:
            yield also


def parse_kube_list(doc: Any) -> KubeList:
    """Parse a List into models, split by kind."""
    out = KubeList()
    for obj in iter_kube_list(doc):
        if isinstance(obj, Node):
            out.nodes.append(obj)
        elif isinstance(obj, Pod):
            out.pods.append(obj)
        elif isinstance(obj, PodDisruptionBudget):
            out.pdbs.append(obj)
        else:
            out.others.append(obj)
    return out
