"""Observe a cluster: Kubernetes (nodes, pods, PDBs, and the shared-cluster objects: namespaces,
pod groups, Workloads, PriorityClasses, CapacityQuotas, ProvisioningRequests, CapacityBuffers and the workloads they
name, and the jobs that say whether their pods may move: PyTorchJobs, PaddleJobs, TFJobs, XGBoostJobs,
JAXJobs, batch Jobs; the
DaemonSets, which decide what a group's fresh node runs) and its Auto Scaling groups in every region,
with the EC2 instances a fleet gang launch tagged (``ClusterSnapshot.fleet_instances``) and the id of
each group's zones (``NodeGroup.zone_ids``, from DescribeAvailabilityZones).

``observe_once`` takes one :class:`~spillway.model.snapshot.Snapshot`: the AWS regions, the nodes and
the PDBs are read in threads while this thread pages through the pods, converting each into a compact
``PodInfo`` as it arrives (memory stays bounded by one page of API objects plus the compact records).
Any failure raises :class:`~spillway.errors.ObservationFailed` (with the cause chained): there is never a
partial snapshot, but for a region whose Auto Scaling read failed while another's answered: it is marked
unread and its groups carried from their last read for a while (:func:`carried_groups`), so that one
region's outage does not stop every plan; for the gang attempts' EC2 instances (``fleet_instances``): a region whose read
failed is left out of them, logged and named (``fleet_unread``, counted by the observe function), for
the gang sweep only misses it for a tick; and for the zone ids: a region whose read failed leaves its
groups without them, warned, and the planner reads a zone's id from the nodes there instead. That holds for every kind read, whether the cluster must serve it or not: a kind
counts as having no objects only when the API server says its resource does not exist (404: the CRD is
not installed, which the adapter answers with none; whether coscheduling's PodGroup is served is kept in
the snapshot: ``ClusterSnapshot.coscheduling_served``). A refusal (403: the function's ClusterRole lacks
the rule, which the error names) or no useful answer (``KubeUnavailable``) on a quota, request,
buffer, volume or any other list fails the observation like a failed pod list: nothing is stored, the
planner keeps the last good snapshot until ``max_snapshot_age_seconds``, and the observe function's
errors alarm fires. A snapshot without the CapacityQuotas it could not read would be planned on as a
cluster without quotas.

Each list reads the cluster at its own resourceVersion (a paged list at its first page's): no two
kinds' lists are one picture. The pods' owners (namespaces, pod groups, Workloads, the jobs; the
shared objects) are listed only once the pods' first page has come, never before. An owner is made
before its pods, so every listed pod finds its owner (unless it was deleted since), and what an owner
counts of its pods (a Job's ``status.failed``) is at least as new as the pods. Read before, as it
could be when the two ran side by side, a Job made (or a failure it counted) between the two reads was
missing while its pod was there: a job the snapshot lacks says nothing, so its pod moved as any
opted-in pod, and the drain takes the plan's word on it (it reads no job again).

A list whose continue token expired after part of it was read (:class:`~spillway.errors.ListExpired`)
cannot be finished consistently: the observation drops everything it read and starts again, at most
``OBSERVE_PASSES`` times in all, then fails. Two passes are never merged: a pod replaced between them
would be counted twice.

``run_observe`` is what one invocation of the observe Lambda does. EventBridge Scheduler's finest rate
is one minute, so it observes every ``interval_seconds`` (20 by default) until its deadline, and stores a
snapshot only when the demand fingerprint changed, or as a heartbeat every ``heartbeat_minutes``: a new
pending pod is seen within about 20 seconds, and an idle cluster costs one write in five minutes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from spillway.config import NodeReserve
from spillway.cutoff import Cutoff
from spillway.errors import (
    AwsError,
    AwsUnavailable,
    KubeError,
    KubeUnavailable,
    ListExpired,
    ObservationFailed,
)
from spillway.model import buffer as capacity_buffer
from spillway.model import provreq
from spillway.model.act import SaveResult
from spillway.model.cluster import (
    ClusterSnapshot,
    NodeInfo,
    PdbInfo,
    PdbMatcher,
    PodInfo,
    RegionUnread,
    SucceededMembers,
    TopologyMatcher,
    UncountedFailures,
    VolcanoNormalPods,
    VolumeMatcher,
    daemonset_infos,
    expander_priorities,
)
from spillway.model.fleet import FleetInstance
from spillway.model.k8s import (
    AUTOSCALING_GROUP,
    COSCHEDULING_GROUP,
    CapacityBuffer,
    CapacityQuota,
    ConfigMap,
    Namespace,
    Node,
    Pod,
    PodTemplate,
    ResourceQuota,
    Scalable,
    SharedObject,
)
from spillway.model.livetemplate import with_live_templates
from spillway.model.nodegroup import NodeGroup, with_warm_node_problems, with_zone_ids
from spillway.model.priorities import CONFIGMAP_NAME, CONFIGMAP_NAMESPACE, Priorities
from spillway.model.provreq import ProvisioningRequestInfo
from spillway.model.reserve import ReserveLike
from spillway.model.resources import Resources
from spillway.model.shared import NODES, QuotaInfo
from spillway.model.snapshot import Snapshot, SnapshotCounts
from spillway.model.templates import with_topology
from spillway.model.utc import aware
from spillway.observability import redact
from spillway.ports import Cloud, Cluster, Snapshots

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
Before = Callable[[], "Snapshot | None"]  # the last snapshot, read only when a region's groups were not
#: how much of a failed region read's error a snapshot keeps (class and message)
UNREAD_ERROR_CHARS = 500
#: passes of one observation whose lists' continue tokens keep expiring before it fails
OBSERVE_PASSES = 3
#: scheduler-plugins' PodGroup: served, coscheduling may run (ClusterSnapshot.coscheduling_served)
COSCHEDULING_PODGROUPS = f"podgroups.{COSCHEDULING_GROUP}"
#: where CapacityQuota ``status.used`` is written (the status subresource), through the version read
QUOTA_API = (AUTOSCALING_GROUP, "v1beta1", "capacityquotas")
QUOTA_API_V1ALPHA1 = (AUTOSCALING_GROUP, "v1alpha1", "capacityquotas")
#: the version cluster-autoscaler's CapacityQuota CRD served alone before v1beta1 came
QUOTA_V1ALPHA1 = f"{AUTOSCALING_GROUP}/v1alpha1"
WriteReason = Literal["first", "changed", "heartbeat", "unchanged"]
T = TypeVar("T")


class ObserveConfig(BaseModel):
    """How to observe; built from the runtime configuration by the handler, or directly in tests."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cluster: str = Field(min_length=1)
    interval_seconds: float = Field(default=20, gt=0)
    heartbeat_minutes: float = Field(default=5, gt=0)
    node_reserve: NodeReserve = Field(default_factory=NodeReserve)
    # Succeeded/Failed pods hold no resources: dropped unless asked (a gang's Succeeded members are
    # counted first: ClusterSnapshot.gang_succeeded)
    keep_terminal_pods: bool = False
    # the planner's expendable_priority_cutoff: a CapacityBuffer of pods below it holds nothing, and its
    # status says so (spillway.model.buffer.status_update)
    expendable_priority_cutoff: int = -10
    # the planner's max_node_provision_minutes: how long a region whose Auto Scaling read fails has its
    # groups carried from their last read (a launch no Node joined within it counts as failed anyway,
    # so what was launching then is no capacity coming any more); after that they are left out. A group
    # whose maxnodeprovisiontime tag sets its own is carried for that (carried_groups)
    carry_unread_minutes: float = Field(default=15, gt=0)


@dataclass(frozen=True, slots=True)
class Observation:
    """One observation of a run: the snapshot, and whether (and why) it was stored."""

    snapshot: Snapshot
    counts: SnapshotCounts
    reason: WriteReason
    key: str | None = None
    save: SaveResult | None = None

    @property
    def written(self) -> bool:
        return self.key is not None


@dataclass(slots=True)
class ObserveRun:
    observations: list[Observation] = field(default_factory=list)

    @property
    def written(self) -> list[Observation]:
        return [o for o in self.observations if o.written]


def observe_once(
    kube: Cluster,
    aws: Cloud,
    config: ObserveConfig,
    clock: Clock,
    before: Before | None = None,
    reads_left: Callable[[], float] | None = None,
) -> Snapshot:
    """One snapshot of the cluster and its groups; :class:`ObservationFailed` when any part fails but
    some regions' Auto Scaling reads (:func:`carried_groups`: ``before`` gives the last snapshot, asked
    only then). ``reads_left``: the seconds the regions' reads may still take (read live), as the
    re-plan's (:func:`groups_read`): a region whose read has not ended by then fails as unread (None: no
    end). An observation a list's expired continue token cut short is taken again from the start
    (module docstring)."""
    passes = 1
    while True:
        try:
            return _observe(kube, aws, config, clock, before, reads_left)
        except ListExpired as exc:
            if passes >= OBSERVE_PASSES:
                raise ObservationFailed(
                    redact(
                        f"observing {config.cluster} failed: {type(exc).__name__}: {exc} ({passes} passes)"
                    )
                ) from exc
            passes += 1
            log.warning("observing %s: %s; observing again from the start", config.cluster, exc)


def _observe(
    kube: Cluster,
    aws: Cloud,
    config: ObserveConfig,
    clock: Clock,
    before: Before | None,
    reads_left: Callable[[], float] | None,
) -> Snapshot:
    started = time.perf_counter()
    taken_at = clock()
    reserve = config.node_reserve.reserve()
    regions = aws.regions
    # AWS regions, nodes and PDBs in worker threads (mostly waiting on the network); the pods, the
    # bulk of the data, in this thread; a worker for every read, so the owners' list, submitted last
    # (once the pods' first page came), starts at once.
    pool = ThreadPoolExecutor(max_workers=3 * len(regions) + 8, thread_name_prefix="observe")
    # the regions' reads, awaited within ``reads_left`` and cut once the observation ends, however it
    # ends: a read still running then sends and keeps nothing more (_in_time)
    cutoff = Cutoff("an AWS read observe stopped waiting for")
    late = "observe has no time left to wait for it and still store its snapshot"
    reads: list[Callable[[], list[NodeGroup]]] = [
        _awaited(pool.submit(cutoff.run(partial(aws.node_groups_in, region, reserve, taken_at))),
                 reads_left, f"the Auto Scaling groups of {region} not read in time: {late}")
        for region in regions
    ]  # fmt: skip
    # a fleet gang's instances, outside every group until attached (spillway.planner.gangsweep)
    fleet_reads: list[Callable[[], list[FleetInstance]]] = [
        _awaited(pool.submit(cutoff.run(partial(aws.fleet_instances, region))), reads_left,
                 f"the gang instances of {region} not read in time: {late}")
        for region in regions
    ]  # fmt: skip
    # which id each zone name is in this account: the zone id a group's new nodes register with
    zone_reads: list[Callable[[], dict[str, str]]] = [
        _awaited(pool.submit(cutoff.run(partial(aws.zone_ids_in, region))), reads_left,
                 f"the zone ids of {region} not read in time: {late}")
        for region in regions
    ]  # fmt: skip
    node_future = pool.submit(lambda: tuple(NodeInfo.from_node(n) for n in kube.iter_nodes() if _usable(n)))
    pdb_future = pool.submit(lambda: list(kube.iter_pdbs()))
    # namespaces (tenants), pod groups and Workloads (gangs), CapacityQuotas: distilled as they come;
    # the namespaces' labels are kept for pod affinity's namespaceSelector
    namespaces: dict[str, dict[str, str]] = {}
    served: set[str] = set()  # the optional kinds the server lists: is coscheduling's PodGroup one?
    v1alpha1: set[str] = set()  # CapacityQuotas read through v1alpha1: their status is written through it
    # the pods' owners (jobs, pod groups, Workloads, namespaces) are listed once the pods' first page has
    # come, never before: a pod's owner is made before it, so every listed pod's owner is in the list
    # (unless deleted since), where a job missing from it would say nothing of its pod (module docstring)
    shared_futures: list[Future[ClusterSnapshot]] = []

    def list_owners() -> None:
        shared_futures.append(
            pool.submit(
                lambda: ClusterSnapshot.from_objects(
                    config.cluster,
                    taken_at,
                    _noting_namespaces(kube.iter_shared_objects(served), namespaces, v1alpha1),
                )
            )
        )

    provreq_future = pool.submit(provisioning_requests, kube)
    # claims and volumes (zones), CSINodes (attach limits)
    volume_future = pool.submit(lambda: list(kube.iter_volume_objects()))
    priorities_future = pool.submit(kube.priority_expander)  # cluster-autoscaler's group priorities
    daemonset_future = pool.submit(lambda: daemonset_infos(kube.iter_daemonsets()))  # fresh nodes' pods
    budgets = PdbMatcher()  # which budgets select which pods (PodInfo.pdbs)
    topology = TopologyMatcher()  # which anti-affinity terms and spread constraints select which pods
    volumes = VolumeMatcher()  # where each pod's persistent volumes let it run
    succeeded = SucceededMembers()  # how many of each gang's members Succeeded
    uncounted = UncountedFailures()  # each batch/v1 Job's failed pods its controller has not counted yet
    normal = VolcanoNormalPods()  # the pods a Volcano PodGroup was made for that do not name it yet
    buffer_future = pool.submit(capacity_buffers, kube)
    try:
        pod_list = list(
            _pod_infos(
                _after_first(kube.iter_pods(), list_owners),
                (budgets, topology, volumes, normal),
                (succeeded, uncounted),
                keep_terminal=config.keep_terminal_pods,
            )
        )
        nodes = node_future.result()
        raw_pdbs = pdb_future.result()
        shared = shared_futures[0].result()
        provreqs = provreq_future.result()
        volume_objects = volume_future.result()
        priorities, priorities_problem = _priorities(priorities_future.result())
        daemonsets = daemonset_future.result()
        buffers = buffer_future.result()
        groups, failed = _group_reads(config.cluster, regions, reads)
        regions_unread, carried = carried_groups(
            failed, before() if failed and before is not None else None, taken_at, config.carry_unread_minutes
        )
        fleet, fleet_unread = _fleet(config.cluster, regions, fleet_reads, failed)
        zone_ids = _zone_ids(config.cluster, regions, zone_reads)
    except ListExpired:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    except Exception as exc:
        pool.shutdown(wait=False, cancel_futures=True)
        raise ObservationFailed(
            redact(f"observing {config.cluster} failed: {type(exc).__name__}: {exc}")
        ) from exc
    finally:
        cutoff.cut()
    pool.shutdown(wait=False)  # all but the AWS reads given up have ended, and those are cut
    for pdb in raw_pdbs:
        budgets.add(pdb)
    for volume in volume_objects:
        volumes.add(volume)
    nodes = volumes.with_attach_limits(nodes)  # CSI drivers' attach limits (CSINodes): a group's too
    groups = with_live_templates(with_zone_ids([*groups, *carried], zone_ids), nodes)  # groups meet nodes
    groups = with_warm_node_problems(groups, nodes)  # a warm-pool instance's Ready Node is misconfigured
    pods, buffer_infos, provreqs = with_topology(
        topology,
        list(
            volumes.apply(
                list(
                    budgets.apply(
                        normal.apply(uncounted.mark_counted(pod_list, shared.jobs), shared.gangs, succeeded)
                    )
                )
            )
        ),
        namespaces or None,
        buffers.infos,
        provreqs,
        volumes,
    )
    pdbs = tuple(PdbInfo.from_pdb(p) for p in raw_pdbs)
    seconds = time.perf_counter() - started
    cluster = ClusterSnapshot(
        cluster=config.cluster,
        taken_at=taken_at,
        nodes=nodes,
        pods=pods,
        pdbs=pdbs,
        observe_seconds=seconds,
        tenants=shared.tenants,
        gangs=shared.gangs,
        quotas=shared.quotas,
        provreqs=provreqs,
        jobs=uncounted.apply(shared.jobs),
        buffers=buffer_infos,
        expander_priorities=priorities,
        expander_problem=priorities_problem,
        gang_succeeded=succeeded.counts(),
        daemonsets=daemonsets,
        coscheduling_served=COSCHEDULING_PODGROUPS in served,
        fleet_instances=fleet,
        fleet_unread=fleet_unread,
        regions_unread=regions_unread,
    )
    cluster = update_quota_status(kube, cluster, v1alpha1)
    update_buffer_status(kube, buffers, taken_at, config.expendable_priority_cutoff)
    return Snapshot.build(cluster, groups, taken_at, seconds)


def quota_usage(quota: QuotaInfo, nodes: Iterable[NodeInfo]) -> Resources:
    """What a CapacityQuota's ``status.used`` says: the summed ``status.capacity`` of the nodes its
    selector matches (and their number, ``nodes``), in the resource names its limits use (milli-units),
    as the API defines a quota's usage."""
    used = dict.fromkeys(quota.limits, 0)
    for node in nodes:
        if quota.matches(node.labels):
            for name in used:
                used[name] += 1000 if name == NODES else node.capacity.get(name, 0)
    return used


def update_quota_status(
    kube: Cluster, cluster: ClusterSnapshot, v1alpha1: Collection[str] = ()
) -> ClusterSnapshot:
    """Write each CapacityQuota's ``status.used`` (status subresource, one merge patch per quota) when
    it changed; the snapshot carries the usage computed. A failed write is logged, never raised: the
    status is informative, the planner counts the nodes itself. A quota named in ``v1alpha1`` (read
    through it: its CRD serves no ``v1beta1``) is written through ``v1alpha1``, as cluster-autoscaler's
    own quota controller writes it (kubernetes/autoscaler cluster-autoscaler/resourcequotas/
    capacityquota/controller.go: a status merge patch of the ``v1alpha1`` object, whose type declares
    ``status.used`` and ``conditions``). The CRD it first published declares no status field (its type's
    comment leaves the usage report for later): there the API server prunes the usage, the
    stored status stays empty, and the write, which changes nothing, comes again each observation. A
    quota not enforced (:attr:`QuotaInfo.invalid`) is warned of and gets no write."""
    quotas = []
    for quota in cluster.quotas:
        if quota.invalid:  # as cluster-autoscaler would not (spillway.model.shared.quota_problem)
            log.warning("CapacityQuota %s is not enforced: %s", quota.name, quota.invalid)
            quotas.append(quota)
            continue
        used = quota_usage(quota, cluster.nodes)
        if used != quota.used:
            resources: dict[str, str | None] = {name: _quantity(name, v) for name, v in used.items()}
            resources |= dict.fromkeys(set(quota.used) - set(used))  # null removes a stale name
            api = QUOTA_API_V1ALPHA1 if quota.name in v1alpha1 else QUOTA_API
            try:
                kube.patch_custom_status(*api, None, quota.name, {"used": {"resources": resources}})
            except Exception as exc:  # best effort: observing must go on
                log.warning(
                    "CapacityQuota %s: writing status.used failed: %s: %s",
                    quota.name,
                    type(exc).__name__,
                    exc,
                )
        quotas.append(replace(quota, used=used))
    return replace(cluster, quotas=tuple(quotas))


def _quantity(name: str, milli: int) -> str:
    """An exact Kubernetes quantity: whole units, binary suffixes for byte amounts, else millis."""
    if milli % 1000:
        return f"{milli}m"
    units = milli // 1000
    if name in ("memory", "ephemeral-storage") or name.startswith("hugepages-"):
        for suffix, size in (
            ("Ei", 2**60),
            ("Pi", 2**50),
            ("Ti", 2**40),
            ("Gi", 2**30),
            ("Mi", 2**20),
            ("Ki", 2**10),
        ):
            if units and units % size == 0:
                return f"{units // size}{suffix}"
    return str(units)


def provisioning_requests(kube: Cluster) -> tuple[ProvisioningRequestInfo, ...]:
    """The cluster's ProvisioningRequests with their PodTemplates (read only in the namespaces that
    have requests). A cluster without the CRD has none (the list answers 404); a read refused or not
    answered raises (module docstring): a booked request left out would free the room it holds. Read
    through ``v1``, else ``v1beta1`` (:func:`_first_served`): cluster-autoscaler's CRD served v1beta1
    alone before v1 came, and each request keeps the version read, the one its status is written back
    through."""
    requests, version = _first_served(kube, provreq.GROUP, provreq.VERSIONS, provreq.PLURAL)
    namespaces = sorted({str((r.get("metadata") or {}).get("namespace") or "default") for r in requests})
    templates = [t for ns in namespaces for t in kube.list_pod_templates(ns)]
    return provreq.request_infos(requests, templates, version)


def _first_served(
    kube: Cluster, group: str, versions: Iterable[str], plural: str
) -> tuple[list[dict[str, Any]], str]:
    """The objects of the first of ``versions`` the server serves, and that version (the last one
    tried when none is: a version not served lists ``[]``, as a CRD not installed does). The per-kind
    version fallback of the kinds read with ``list_custom`` (CapacityBuffers, ProvisioningRequests);
    the shared-cluster kinds have theirs in ``SharedKind.versions``. A served version that lists
    nothing is the answer: every served version of a CRD reads the one storage, so the next one would
    list nothing too, and listing it would call, each observation, a version the CRD may deprecate
    (today's ProvisioningRequest CRD serves v1beta1 ``deprecated: true``, kubernetes/autoscaler
    apis/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml: each request answered with a
    deprecation warning)."""
    raw: list[dict[str, Any]] = []
    version = ""
    for version in versions:
        served: set[str] = set()
        raw = kube.list_custom(group, version, plural, served=served)
        if raw or served:
            break
    return raw, version


@dataclass(frozen=True, slots=True)
class Buffers:
    """The CapacityBuffers read (as models, for their status), the version served, and their infos."""

    objects: tuple[CapacityBuffer, ...] = ()
    version: str = ""
    infos: tuple[capacity_buffer.BufferInfo, ...] = ()


def capacity_buffers(kube: Cluster) -> Buffers:
    """The cluster's CapacityBuffers (v1beta1, else v1alpha1) with the PodTemplates they name (read only
    in the namespaces that have buffers), each cut to what its namespace's ResourceQuotas leave. A
    cluster without the CRD has none (404); a read refused or not answered raises (module docstring):
    a buffer left out would let the nodes holding its headroom look idle. A buffer the model refuses
    is logged and left out."""
    raw, version = _first_served(
        kube, capacity_buffer.GROUP, capacity_buffer.VERSIONS, capacity_buffer.PLURAL
    )
    # each as the version read through, which the plan's Events name it by (spillway.act.events)
    served = f"{capacity_buffer.GROUP}/{version}"
    objects, refused = capacity_buffer.parse_buffers(
        [{**item, "apiVersion": served} if isinstance(item, Mapping) else item for item in raw]
    )
    templates, workloads, scaled = _named(kube, objects)
    for why in refused:
        log.error("%s; the buffer is left out", why)
    models = [m for m in (_readable(PodTemplate, t) for t in templates) if isinstance(m, PodTemplate)]
    scalables = [m for m in (_readable(Scalable, w) for w in workloads) if isinstance(m, Scalable)]
    scaled += capacity_buffer.live_pods(
        objects, scalables, lambda w: kube.pods_selected(_namespace(w), w.pod_selector)
    )
    infos = capacity_buffer.buffer_infos(objects, models, scalables, scaled)
    infos = capacity_buffer.limit_by_quotas(objects, infos, _resource_quotas(kube, infos))
    return Buffers(tuple(objects), version, infos)


def _namespace(workload: Scalable) -> str:
    return workload.metadata.namespace or "default"


def _resource_quotas(kube: Cluster, infos: Iterable[capacity_buffer.BufferInfo]) -> list[ResourceQuota]:
    """The core ResourceQuotas of the namespaces that have a buffer to serve, one list per namespace. A
    list refused or not answered raises, as every read does: uncut buffers would hold more than the
    quotas let them."""
    served = capacity_buffer.ACTIVE_CAPACITY
    namespaces = sorted(
        {
            i.namespace
            for i in infos
            if i.namespace and i.strategy == served and i.pod is not None and not i.problem
        }
    )
    raw = [q for namespace in namespaces for q in kube.list_resource_quotas(namespace)]
    return [m for m in (_readable(ResourceQuota, q) for q in raw) if isinstance(m, ResourceQuota)]


def _named(
    kube: Cluster, buffers: list[CapacityBuffer]
) -> tuple[list[dict[str, object]], list[dict[str, object]], list[capacity_buffer.ScaledObject]]:
    """What the buffers name: the PodTemplates of their namespaces, the workloads of the kinds read by
    their pod template, and the objects of other kinds, read through their scale subresource (the
    built-in workloads' live pods are read once the workloads are parsed:
    :func:`spillway.model.buffer.live_pods`)."""
    namespaces = sorted({b.metadata.namespace or "default" for b in buffers})
    templates = [t for ns in namespaces for t in kube.list_pod_templates(ns)]
    scaled = [_scaled(kube, *ref) for ref in _scaled_refs(buffers)]
    workloads = _scalables(kube, buffers)
    return templates, workloads, scaled


def _scalables(kube: Cluster, buffers: Iterable[CapacityBuffer]) -> list[dict[str, object]]:
    """The workloads the buffers' ``scalableRef`` may name (apps Deployments, StatefulSets,
    ReplicaSets, batch Jobs, core ReplicationControllers): each kind named, listed in the namespaces
    whose buffers name it (kind set on each item: list items carry none)."""
    wanted = sorted(
        {
            (ref.kind, b.metadata.namespace or "default")
            for b in buffers
            if (ref := b.spec.scalable_ref) is not None
            and capacity_buffer.scalable_resource(ref.api_group, ref.kind) is not None
        }
    )
    out: list[dict[str, object]] = []
    for kind, namespace in wanted:
        group, version, plural = capacity_buffer.SCALABLE[kind]
        if group:
            items = kube.list_custom(group, version, plural, namespace)
        else:
            items = kube.list_replication_controllers(namespace)
        out += [
            {**item, "kind": kind, "apiVersion": f"{group}/{version}" if group else version} for item in items
        ]
    return out


def _scaled_refs(buffers: Iterable[CapacityBuffer]) -> list[tuple[str, str, str, str]]:
    """(namespace, group, kind, name) of each object a scalableRef names whose kind has no pod template
    resolver (read through its scale subresource)."""
    return sorted(
        {
            (b.metadata.namespace or "default", capacity_buffer.core_group(ref.api_group), ref.kind, ref.name)
            for b in buffers
            if (ref := b.spec.scalable_ref) is not None
            and capacity_buffer.scalable_resource(ref.api_group, ref.kind) is None
            and not capacity_buffer.core_group_problem(ref.api_group, ref.kind)
        }
    )


def _scaled(kube: Cluster, namespace: str, group: str, kind: str, name: str) -> capacity_buffer.ScaledObject:
    """An object read as cluster-autoscaler's scale resolver reads it: its Scale, then the pods of its
    namespace the Scale's ``status.selector`` selects, the most recent of them (by ``creationTimestamp``)
    kept as the chunk's template. An object that does not exist, a kind not served or without a scale
    subresource, and a kind whose ``<plural>/scale`` the ClusterRole does not grant (no shipped rule can
    name every kind a buffer may name: one rule per kind, added by hand) are the buffer's problem, shown
    in its status, not observe's: a tenant's buffer must not stop the cluster's observation. No useful
    answer (``KubeUnavailable``) fails the observation, as for every read."""
    found = capacity_buffer.ScaledObject(namespace, group, kind, name)
    what = f"{kind}.{group or 'core'} {namespace}/{name}"
    try:
        scale = kube.get_scale(group, kind, namespace, name)
        status = scale.get("status") or {}
        replicas, selector = int(status.get("replicas") or 0), str(status.get("selector") or "")
        if not selector:  # no labelSelectorPath in its CRD: which pods are its is unknown
            why = "its scale subresource gives no status.selector, so its pods cannot be found"
            return replace(found, replicas=replicas, problem=f"{what}: {why}")
        pods = kube.pods_selected(namespace, selector)
    except KubeUnavailable:
        raise
    except KubeError as exc:
        # the buffer's problem is stored in the snapshot and written to its status: redacted
        return replace(found, problem=redact(f"{what}: {type(exc).__name__}: {exc}"))
    return replace(
        found, replicas=replicas, selector=selector, template=capacity_buffer.newest_template(pods)
    )


def _readable(
    model: type[PodTemplate] | type[Scalable] | type[ResourceQuota], raw: dict[str, object]
) -> object:
    try:
        return model.model_validate(raw)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        log.error("%s not readable: %s", model.__name__, str(exc).splitlines()[0])
        return None


def update_buffer_status(
    kube: Cluster, buffers: Buffers, now: datetime, expendable_below: int | None = None
) -> None:
    """Write each buffer's status as its controller does (:func:`spillway.model.buffer.status_update`;
    ``expendable_below``: the planner's ``expendable_priority_cutoff``) when it changed. Best effort, as
    for CapacityQuotas: a failed write is logged, never raised."""
    infos = {(i.namespace, i.name): i for i in buffers.infos}
    for obj in buffers.objects:
        namespace = obj.metadata.namespace or "default"
        info = infos.get((namespace, obj.metadata.name))
        status = capacity_buffer.status_update(obj, info, now, expendable_below) if info is not None else None
        if status is None:
            continue
        try:
            kube.patch_custom_status(
                capacity_buffer.GROUP,
                buffers.version,
                capacity_buffer.PLURAL,
                namespace,
                obj.metadata.name,
                status,
            )
        except Exception as exc:  # best effort: observing must go on
            log.warning("CapacityBuffer %s/%s: writing status failed: %s: %s", namespace, obj.metadata.name,
                        type(exc).__name__, exc)  # fmt: skip


def _group_reads(
    cluster: str, regions: Sequence[str], reads: Iterable[Callable[[], list[NodeGroup]]]
) -> tuple[list[NodeGroup], dict[str, AwsError]]:
    """The groups of every region whose Auto Scaling read answered, and the error of each region whose
    read failed (throttled, unavailable, refused), logged. Such a region fails no observation while
    another was read (:func:`carried_groups`): a failed observation stops every plan, so an outage of
    the overflow region stopped the primary region's scale-ups too. When every region failed, the first
    error is raised: the observation fails, as nothing of AWS was read."""
    out: list[NodeGroup] = []
    failed: dict[str, AwsError] = {}
    for region, read in zip(regions, reads, strict=True):
        try:
            out.extend(read())
        except AwsError as exc:
            failed[region] = exc
            log.error("observing %s: the Auto Scaling groups of %s were not read (%s: %s); no plan scales "
                      "them", cluster, region, type(exc).__name__, exc)  # fmt: skip
    if failed and len(failed) == len(regions):
        raise failed[regions[0]]
    return out, failed


def groups_read(
    aws: Cloud,
    reserve: ReserveLike,
    now: datetime,
    before: Snapshot,
    carry_minutes: float,
    cluster: str,
    time_left: Callable[[], float] | None = None,
) -> tuple[list[NodeGroup], tuple[RegionUnread, ...]]:
    """Every region's groups read now, by observe's rule for a step that reads them again after observe
    (the scale-up's re-plan, spillway.act.scale): a region whose read fails is marked unread and its
    groups carried from ``before``, the snapshot planned on (:func:`carried_groups`); every region
    failing raises the first error. Sorted by (region, name), as :meth:`Cloud.node_groups` reads them.
    Region after region, or, given ``time_left`` (the seconds the reads may still take, read live: a
    Lambda step's time less what it does after them), all at once, a region whose read has not ended
    when that runs out failing as unread (:func:`_in_time`)."""
    regions = aws.regions
    reads: list[Callable[[], list[NodeGroup]]] = [
        partial(aws.node_groups_in, region, reserve, now) for region in regions
    ]
    if time_left is None:
        groups, failed = _group_reads(cluster, regions, reads)
    else:
        with _in_time(regions, reads, time_left) as awaited:
            groups, failed = _group_reads(cluster, regions, awaited)
    marks, carried = carried_groups(failed, before, now, carry_minutes)
    return sorted([*groups, *carried], key=lambda g: (g.region, g.name)), marks


@contextmanager
def _in_time(
    regions: Sequence[str], reads: Sequence[Callable[[], list[NodeGroup]]], time_left: Callable[[], float]
) -> Iterator[list[Callable[[], list[NodeGroup]]]]:
    """The region reads, each started at once in a thread of its own and its answer awaited only while
    ``time_left()`` is above nothing: one not ended by then raises :class:`AwsUnavailable` (it fails as
    unread). A region's read is many calls (its groups' pages, then per group its activities, warm pool,
    launch template...), each of which may take its SDK settings' worst case: read one after another,
    a slow region's ran past the scale function's Timeout and Lambda stopped the step (``Sandbox.Timedout``,
    which NextRound does not retry), and a slow region read first left a fast one no time.

    A read left behind is cut when the block ends, however it ends (:class:`~spillway.cutoff.Cutoff`): it
    sends no call and uses no answer after that, and its result is dropped. Left running, it went on
    after the handler returned, in a later invocation of the same container (Lambda freezes a thread
    still running and resumes it there), calling AWS in that invocation's time and writing what it read
    into the adapter's caches."""
    cutoff = Cutoff("a region read the step stopped waiting for")
    pool = ThreadPoolExecutor(max_workers=len(regions), thread_name_prefix="groups-read")
    futures = [pool.submit(cutoff.run(read)) for read in reads]
    pool.shutdown(wait=False)
    late = "the step has no time left to wait for them and still commit its plan"
    try:
        yield [
            _awaited(future, time_left, f"the Auto Scaling groups of {region} not read in time: {late}")
            for region, future in zip(regions, futures, strict=True)
        ]
    finally:
        cutoff.cut()


def _awaited(future: Future[T], time_left: Callable[[], float] | None, late: str) -> Callable[[], T]:
    """``future``'s result, awaited only while ``time_left()`` is above nothing (None: without end);
    :class:`AwsUnavailable` saying ``late`` when it has not come by then."""

    def result() -> T:
        if time_left is None:
            return future.result()
        try:
            return future.result(timeout=max(0.0, time_left()))
        except TimeoutError:
            raise AwsUnavailable(late) from None

    return result


def carried_groups(
    failed: Mapping[str, AwsError], before: Snapshot | None, now: datetime, carry_minutes: float
) -> tuple[tuple[RegionUnread, ...], list[NodeGroup]]:
    """Each region whose read ``failed``, marked unread (since when: carried from ``before``, the last
    snapshot, when it was unread there already; the error's class and message, redacted), and its groups
    as ``before`` holds them, each flagged with when it was read (:attr:`NodeGroup.read_at`), while that
    read is younger than ``carry_minutes`` (``max_node_provision_minutes``; the group's own where its
    autoscaling-options tag sets one: :func:`_carry_bound`). The planner counts what
    such a group launches, so the pods it was raised for are not launched for again in another region,
    and neither grows nor shrinks it; after the bound a launch of it counts as failed anyway, and its
    groups are left out (their nodes, in no group, are never drained)."""
    if not failed:
        return (), []
    was = {r.region: r.since for r in before.cluster.regions_unread} if before is not None else {}
    marks = tuple(
        RegionUnread(
            region, was.get(region, now), redact(f"{type(exc).__name__}: {exc}")[:UNREAD_ERROR_CHARS]
        )
        for region, exc in sorted(failed.items())
    )
    carried: list[NodeGroup] = []
    for group in before.groups if before is not None else ():
        read_at = aware(group.read_at or before.taken_at) if before is not None else now
        if group.region in failed and aware(now) - read_at < _carry_bound(group, carry_minutes):
            carried.append(replace(group, read_at=read_at))
    return marks, carried


def _carry_bound(group: NodeGroup, carry_minutes: float) -> timedelta:
    """How long ``group`` is carried: its own max_node_provision_minutes (its ``maxnodeprovisiontime``
    autoscaling-options tag, :mod:`spillway.model.options`), as the plans count a launch of it, else
    ``carry_minutes``, the configuration's."""
    own = dict(group.options).get("max_node_provision_minutes")
    return timedelta(minutes=carry_minutes if own is None or isinstance(own, bool) else float(own))


def _fleet(
    cluster: str,
    regions: Iterable[str],
    reads: Iterable[Callable[[], list[FleetInstance]]],
    groups_unread: Collection[str] = (),
) -> tuple[tuple[FleetInstance, ...], tuple[str, ...]]:
    """The gang attempts' instances of every region whose DescribeInstances answered, and the regions
    whose call failed (throttled, refused). Such a region is left out of this snapshot, logged, and
    fails no observation: the gang sweep is its only reader, and an orphan it misses once is found on a
    later tick, while a failed observation would stop every scale-up and scale-down. The snapshot names
    it (``fleet_unread``), which the observe function counts (``GangInstanceReadsFailed``): a region
    whose read keeps failing leaves the sweep blind there, and only an alarm tells. A region whose groups
    were not read (``groups_unread``) is left out the same way: its groups' members are an older list,
    in which an instance attached since would look like an orphan to the sweep."""
    out: list[FleetInstance] = []
    unread: list[str] = []
    for region, read in zip(regions, reads, strict=True):
        try:
            found = read()
            if region in groups_unread:
                unread.append(region)
                continue
            out.extend(found)
        except AwsError as exc:
            unread.append(region)
            log.error("observing %s: the gang attempts' instances of %s were not read (%s: %s); this "
                      "snapshot sweeps none there", cluster, region, type(exc).__name__, exc)  # fmt: skip
    return tuple(out), tuple(unread)


def _zone_ids(
    cluster: str, regions: Iterable[str], reads: Iterable[Callable[[], dict[str, str]]]
) -> dict[str, dict[str, str]]:
    """Each region's zone name -> zone id, as EC2 answered (DescribeAvailabilityZones). A region whose
    call failed (refused: a role without ``ec2:DescribeAvailabilityZones``; throttled) is left out,
    warned, and fails no observation: its groups carry no ids, and the planner takes a zone's id from
    the nodes there, as it did before it read them (a quota on an id then counts no new node in a zone
    where no node shows it: spillway.planner.limits). A failed observation would stop every plan."""
    out: dict[str, dict[str, str]] = {}
    for region, read in zip(regions, reads, strict=True):
        try:
            out[region] = read()
        except AwsError as exc:
            log.warning("observing %s: the zone ids of %s were not read (%s: %s); its groups' new nodes "
                        "get the ids the nodes there show", cluster, region, type(exc).__name__, exc)  # fmt: skip
    return out


def _priorities(config_map: ConfigMap | None) -> tuple[Priorities, str]:
    """The priority expander ConfigMap's priorities, and why none (warned) when cluster-autoscaler could
    not read them: it passes every option on then (priority.go BestOptions), and the plan ranks groups
    as without priorities and names the problem."""
    found = expander_priorities(config_map) if config_map is not None else None
    priorities, problem = found or ({}, "")
    if problem:
        log.warning("ConfigMap %s/%s data.priorities: %s; ignored: groups are ranked without priorities",
                    CONFIGMAP_NAMESPACE, CONFIGMAP_NAME, problem)  # fmt: skip
    return priorities, problem


def _noting_namespaces(
    objects: Iterator[SharedObject], labels: dict[str, dict[str, str]], v1alpha1: set[str]
) -> Iterator[SharedObject]:
    """The objects as they come, each Namespace's labels noted in ``labels`` on the way, and the name
    of each CapacityQuota read through ``v1alpha1`` in ``v1alpha1`` (:func:`update_quota_status`)."""
    for obj in objects:
        if isinstance(obj, Namespace):
            labels[obj.metadata.name] = obj.metadata.labels
        elif isinstance(obj, CapacityQuota) and obj.api_version == QUOTA_V1ALPHA1:
            v1alpha1.add(obj.metadata.name)
        yield obj


def _pod_infos(
    pods: Iterator[Pod],
    matchers: tuple[PdbMatcher, TopologyMatcher, VolumeMatcher, VolcanoNormalPods],
    tallies: tuple[SucceededMembers, UncountedFailures],
    *,
    keep_terminal: bool,
) -> Iterator[PodInfo]:
    """Each API pod becomes a compact record as soon as its page arrives; the model is dropped (the
    labels the matchers need are kept until every pod and PodDisruptionBudget is known). A finished pod
    is dropped unless asked, once ``tallies`` have counted it: a Succeeded member for its gang, a failed
    pod its batch/v1 Job has not counted yet for that Job."""
    succeeded, uncounted = tallies
    index = 0
    for pod in pods:
        if not _usable(pod):
            continue
        info = PodInfo.from_pod(pod)
        succeeded.note(info)
        uncounted.note(pod, info)
        if info.terminal and not info.daemonset and not keep_terminal:
            continue
        for matcher in matchers:
            matcher.remember(index, pod)
        index += 1
        yield info


def _after_first(items: Iterator[T], then: Callable[[], None]) -> Iterator[T]:
    """``items`` as they come, calling ``then`` once, when the first has come (or the list ended with
    none): a paged list's first page fixes the resourceVersion its later pages are read at, so what
    ``then`` reads from then on is at least as new as every item."""
    first = True
    for item in items:
        if first:
            first = False
            then()
        yield item
    if first:
        then()


def _usable(obj: Pod | Node) -> bool:
    """Whether an object with refused quantities (malformed, out of range, negative) or annotations is
    kept.

    One bad object must not cost the whole snapshot. Each refused quantity is logged, naming the
    object and field, and left out of its map: a node then offers none of that resource (nothing
    that needs it is placed there), a bound pod still holds its node (never drained as idle). A
    pending pod is left out: what it asks for is unknown, so no plan can be made for it. A refused
    annotation (a ``pod-deletion-cost`` that is no 32-bit integer: the API server refuses it on a new
    pod, and lets a pod that already had one keep it) is warned of and read as unset, a deletion cost
    of 0, as the controllers' own reading falls back to (kubernetes/kubernetes
    pkg/controller/controller_utils.go, getDeletionCostFromPodAnnotations); the pod is kept.
    """
    if not obj.refused:
        return True
    keep = not isinstance(obj, Pod) or obj.spec.node_name is not None or not obj.refused_quantities
    for refused in obj.refused_quantities:
        log.error(
            "%s: %s; the quantity is ignored%s",
            obj.describe(),
            refused,
            "" if keep else " and the pending pod left out of the snapshot",
        )
    for refused in obj.refused_annotations:
        log.warning("%s: %s; the annotation is ignored, read as unset", obj.describe(), refused)
    return keep


def write_reason(
    snapshot: Snapshot,
    last_fingerprint: str | None,
    last_written_at: datetime | None,
    heartbeat: timedelta,
) -> WriteReason:
    """Store when nothing was stored yet, when demand changed, or when the heartbeat is due."""
    if last_fingerprint is None or last_written_at is None:
        return "first"
    if snapshot.fingerprint != last_fingerprint:
        return "changed"
    if snapshot.taken_at - last_written_at >= heartbeat:
        return "heartbeat"
    return "unchanged"


def run_observe(
    kube: Cluster,
    aws: Cloud,
    store: Snapshots,
    config: ObserveConfig,
    clock: Clock,
    sleep: Callable[[float], None],
    deadline: datetime,
    on_observation: Callable[[Observation], None] | None = None,
    reads_left: Callable[[], float] | None = None,
) -> ObserveRun:
    """Observe every ``interval_seconds`` until ``deadline``; store on change or heartbeat.

    The first observation always runs. Another starts only if, judging by how long the last one took,
    it can finish before ``deadline``. A failed observation raises :class:`ObservationFailed`; what
    earlier observations stored stays stored. ``reads_left``: how long each observation's region reads
    may still take (:func:`observe_once`), read live.
    """
    heartbeat = timedelta(minutes=config.heartbeat_minutes)
    interval = timedelta(seconds=config.interval_seconds)
    previous = store.latest_meta(config.cluster)
    last_fingerprint = previous.fingerprint if previous else None
    last_written_at = previous.taken_at if previous else None
    run = ObserveRun()

    def before() -> Snapshot | None:
        """The last snapshot: this run's last observation, stored or not, else the store's latest."""
        return run.observations[-1].snapshot if run.observations else store.latest(config.cluster)

    while True:
        started = clock()
        snapshot = observe_once(kube, aws, config, clock, before, reads_left)
        reason = write_reason(snapshot, last_fingerprint, last_written_at, heartbeat)
        key: str | None = None
        saved: SaveResult | None = None
        if reason != "unchanged":
            key = store.save(snapshot)
            saved = store.last_save
            last_fingerprint, last_written_at = snapshot.fingerprint, snapshot.taken_at
        observation = Observation(
            snapshot=snapshot, counts=snapshot.counts(), reason=reason, key=key, save=saved
        )
        run.observations.append(observation)
        if on_observation is not None:
            on_observation(observation)
        # the next one starts at its interval's end, or at once when this one outlasted the interval
        next_at = max(started + interval, clock())
        took = timedelta(seconds=snapshot.observe_seconds + (saved.seconds if saved else 0.0))
        if next_at + took > deadline:
            return run
        wait = (next_at - clock()).total_seconds()
        if wait > 0:
            sleep(wait)


def deadline_for(
    now: datetime,
    window_seconds: float,
    remaining_ms: int | None = None,
    safety_seconds: float = 5.0,
) -> datetime:
    """When a run must stop: after ``window_seconds``, and ``safety_seconds`` before the Lambda's end."""
    budget = window_seconds
    if remaining_ms is not None:
        budget = min(budget, remaining_ms / 1000 - safety_seconds)
    return now + timedelta(seconds=max(0.0, budget))
