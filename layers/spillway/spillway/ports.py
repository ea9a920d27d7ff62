"""The world as Spillway's steps see it: five ports, each with one real adapter and one recording fake.

===================  ================================================  ================================
port                 real adapter                                      what it is
===================  ================================================  ================================
:class:`Cluster`     :class:`spillway.adapters.kube.KubeClient`        the Kubernetes API
:class:`Cloud`       :class:`spillway.adapters.aws.AwsAdapter`         Auto Scaling and EC2, all regions
:class:`Snapshots`   :class:`spillway.adapters.store.SnapshotStore`    the store: snapshots table
:class:`Ledger`      :class:`spillway.adapters.state_store.StateStore` the store: state + plans tables
:class:`Workflows`   :class:`spillway.adapters.sfn.Executions`         Step Functions executions
===================  ================================================  ================================

The store is two ports because its tables are two things: snapshots (written by observe, read by the
plan) and the ledger (the state and the plan records, committed together in one transaction). The
recording fakes, one per port, are in ``tests/fakes.py``.

``ERRORS`` says which of :mod:`spillway.errors` an implementation of each port may raise (exact
classes: a state machine matches names, not subclasses), and ``METHOD_ERRORS`` the few only one method
may raise (``CapacityUnavailable``: only CreateFleet). The error-contract test tells the fakes to
raise each of them and checks that a step raises nothing its ``RAISES`` does not declare.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from spillway.errors import (
    AsgLimitExceeded,
    AsgNotFound,
    AwsError,
    AwsThrottled,
    AwsUnavailable,
    CapacityUnavailable,
    EvictionBlocked,
    EvictionBudgetForbidden,
    EvictionNamespaceTerminating,
    EvictionRefused,
    EvictionThrottled,
    InputError,
    InstanceNotFound,
    KubeAuthError,
    KubeConflict,
    KubeError,
    KubeUnavailable,
    LaunchMisconfigured,
    LifecycleActionNotFound,
    ListExpired,
    NodeNotFound,
    ObjectNotFound,
    PodNotFound,
    QuotaExceeded,
    SnapshotError,
    SnapshotNotFound,
    SpillwayError,
    StateConflict,
    StateCorrupt,
    StateTooLarge,
)
from spillway.model.act import (
    ExecutionRequest,
    PlanRecord,
    SaveResult,
    SnapshotMeta,
    StartedExecution,
    StoredState,
)
from spillway.model.aws import AutoScalingGroup, CreateFleetResult, FleetRequest, ScalingActivity
from spillway.model.drain import LifecycleHook, Placement, ScheduledEvent
from spillway.model.fleet import FleetInstance
from spillway.model.k8s import (
    ConfigMap,
    DaemonSet,
    Node,
    Pod,
    PodDisruptionBudget,
    SharedObject,
    VolumeObject,
)
from spillway.model.nodegroup import NodeGroup
from spillway.model.reserve import ReserveLike
from spillway.model.snapshot import Snapshot
from spillway.model.state import State


class Cluster(Protocol):
    """The Kubernetes API: reads for observing, node and pod writes for draining and uncordoning."""

    def iter_nodes(self) -> Iterator[Node]: ...
    def iter_pods(self) -> Iterator[Pod]: ...
    def iter_pdbs(self) -> Iterator[PodDisruptionBudget]: ...
    # Every read: a kind (or object) the API server says does not exist (404: its CRD is not installed)
    # is none; a refusal (403: KubeAuthError naming the RBAC rule) or no useful answer
    # (KubeUnavailable) raises, never reads as none (spillway.observe).
    # Shared-cluster objects (namespaces, pod groups, workloads, quotas, jobs); ``served``, when given,
    # gets the qualified name of each optional kind the server lists (podgroups.scheduling.x-k8s.io).
    def iter_shared_objects(self, served: set[str] | None = None) -> Iterator[SharedObject]: ...
    # PersistentVolumeClaims, PersistentVolumes, then StorageClasses (where pods' volumes let them run).
    def iter_volume_objects(self) -> Iterator[VolumeObject]: ...
    # cluster-autoscaler's priority expander ConfigMap; None when there is none.
    def priority_expander(self) -> ConfigMap | None: ...
    # apps/v1 DaemonSets (what a group's fresh node runs).
    def iter_daemonsets(self) -> Iterator[DaemonSet]: ...
    # Custom resources as plain JSON objects ([] when the CRD is not installed; ``served`` gets the
    # version when it is served, objects or none) and their status.
    def list_custom(
        self,
        group: str,
        version: str,
        plural: str,
        namespace: str | None = None,
        *,
        served: set[str] | None = None,
    ) -> list[dict[str, Any]]: ...
    def patch_custom_status(
        self,
        group: str,
        version: str,
        plural: str,
        namespace: str | None,
        name: str,
        status: dict[str, Any],
        *,
        uid: str = "",
    ) -> dict[str, Any]: ...
    # Delete a custom object, only the one of ``uid`` when given (ObjectReplaced for another one).
    def delete_custom(
        self, group: str, version: str, plural: str, namespace: str | None, name: str, *, uid: str = ""
    ) -> None: ...
    def list_pod_templates(self, namespace: str | None = None) -> list[dict[str, Any]]: ...
    # core/v1 ResourceQuotas of a namespace as plain JSON objects (what its CapacityBuffers may hold).
    def list_resource_quotas(self, namespace: str) -> list[dict[str, Any]]: ...
    # core/v1 ReplicationControllers as plain JSON objects (a CapacityBuffer's scalableRef may name one).
    def list_replication_controllers(self, namespace: str | None = None) -> list[dict[str, Any]]: ...
    # The autoscaling/v1 Scale of an object of any kind with a scale subresource (ObjectNotFound: kind not
    # served, no scale subresource, no such object), and the pods of a namespace a label selector selects.
    def get_scale(self, api_group: str, kind: str, namespace: str, name: str) -> dict[str, Any]: ...
    def pods_selected(self, namespace: str, label_selector: str) -> list[Pod]: ...
    def get_node(self, name: str) -> Node: ...
    def pods_on_node(self, node: str) -> list[Pod]: ...
    # The pod as the API server holds it now (None: there is none), read with the ``list`` verb alone.
    def read_pod(self, namespace: str, name: str) -> Pod | None: ...
    # only_if_schedulable: a give-back's cordon, written only on a Node schedulable at the patch; one
    # carrying this reason's cordon already is the caller's (True), anybody else's is left (False);
    # take_over_only: another of Spillway's cordons is taken over only when its words begin with it (the
    # gang sweep's, a dead sweep's), any other (a drain's) is left as it is (False); leave_containing:
    # another of Spillway's cordons whose words contain it is left as it is (False): a forced drain's
    # for another forced drain following the same EC2 event, read and written as one resourceVersion
    def cordon(
        self,
        node: str,
        reason: str = "",
        *,
        only_if_schedulable: bool = False,
        take_over_only: str | None = None,
        leave_containing: str | None = None,
    ) -> bool: ...
    # Lifts Spillway's cordon and its draining taint in one patch; if_reason: only while Spillway's
    # cordon on the Node still holds that reason's words; if_digest: only while it is the cordon whose
    # cordon_digest that is (the one a plan saw)
    def uncordon(self, node: str, *, if_reason: str | None = None, if_digest: str | None = None) -> bool: ...
    # Takes off Spillway's cordon annotation and its draining taint, the node left unschedulable (a
    # cordon of the operator's now); only while Spillway's cordon holds if_reason's words
    def hand_over(self, node: str, *, if_reason: str) -> bool: ...
    # exclude_from_load_balancers: the same patch labels the Node out of load balancers (the well-known
    # label, unless it carries it already) and records that Spillway did; what takes the taint off takes
    # off such a label with its record, never a label without one (an operator's)
    def add_draining_taint(self, node: str, *, exclude_from_load_balancers: bool = False) -> bool: ...
    # only from a Node that no Spillway cordon holds (its holder lifts the taint with uncordon)
    def remove_draining_taint(self, node: str) -> bool: ...
    # Add or remove the PreferNoSchedule scale-down candidate taint; False when already that way.
    def set_candidate_taint(self, node: str, present: bool) -> bool: ...
    # ``uid``: only the pod of that uid (another made under its name since is not evicted: PodNotFound)
    def evict(
        self, namespace: str, name: str, grace_period_seconds: int | None = None, *, uid: str = ""
    ) -> None: ...
    def delete_node(self, name: str) -> bool: ...
    def record_event(
        self,
        kind: str,
        name: str,
        namespace: str | None,
        reason: str,
        message: str,
        type: str = "Normal",
        *,
        uid: str | None = None,
        api_version: str = "v1",
        key: str | None = None,  # one Event for every attempt with the same key (a step run again)
    ) -> None: ...
    # Merge ``labels`` into the Node's labels; False when it already had them all.
    def label_node(self, name: str, labels: Mapping[str, str]) -> bool: ...


BeforeCall = Callable[[str], None]


class Cloud(Protocol):
    """EC2 Auto Scaling and EC2 in every configured region."""

    @property
    def regions(self) -> tuple[str, ...]: ...

    def node_groups_in(
        self, region: str, reserve: ReserveLike, now: datetime | None = None
    ) -> list[NodeGroup]: ...
    def node_groups(self, reserve: ReserveLike, now: datetime | None = None) -> list[NodeGroup]: ...
    def describe_group(self, region: str, group: str) -> AutoScalingGroup: ...
    # with what its launch template or configuration says (LaunchInstanceType, LaunchMarketType)
    def describe_group_launching(self, region: str, group: str) -> AutoScalingGroup: ...
    def describe_activities(
        self, region: str, group: str, now: datetime | None = None
    ) -> list[ScalingActivity]: ...
    def detach_recorded(self, region: str, group: str, instance_id: str, since: datetime) -> bool: ...
    def placement(self, region: str, instance_id: str) -> Placement | None: ...
    def scheduled_events(self, region: str, instance_id: str) -> list[ScheduledEvent]: ...
    def private_dns_names(self, region: str, instance_ids: Sequence[str]) -> dict[str, str]: ...
    # ``before_call`` (an AWS call's name) is called before each call it makes, and may raise: that call
    # is then not made (a step's deadline: spillway.act.deadline)
    def set_desired_capacity(
        self, region: str, group: str, desired: int, before_call: BeforeCall | None = None
    ) -> int: ...
    def terminate_instance(
        self, region: str, instance_id: str, decrement: bool = True
    ) -> ScalingActivity: ...
    # Terminate lifecycle hooks (act/drain.py): the group waits in Terminating:Wait for these.
    def describe_lifecycle_hooks(self, region: str, group: str) -> list[LifecycleHook]: ...
    def complete_lifecycle_action(
        self,
        region: str,
        group: str,
        hook: str,
        instance_id: str,
        token: str | None = None,
        result: str = "CONTINUE",
    ) -> None: ...
    def record_heartbeat(
        self, region: str, group: str, hook: str, instance_id: str, token: str | None = None
    ) -> None: ...
    # Gang launches (act/gang.py): EC2 instant fleets, attached to the group or terminated whole.
    def create_fleet_instant(self, region: str, request: FleetRequest) -> CreateFleetResult: ...
    def attach_instances(
        self, region: str, group: str, instance_ids: Sequence[str], before_call: BeforeCall | None = None
    ) -> int: ...
    def terminate_instances(self, region: str, instance_ids: Sequence[str]) -> list[str]: ...
    def instance_states(
        self, region: str, instance_ids: Sequence[str] = (), tag: tuple[str, str] | None = None
    ) -> dict[str, str]: ...
    def subnet_zones(self, region: str, subnet_ids: Sequence[str]) -> dict[str, str]: ...
    # The instances of ``region`` tagged with a gang attempt of this cluster, alive or stopped (all of
    # them, or those of ``instance_ids``): the gang sweep (spillway.planner.gangsweep, act/gangsweep.py).
    def fleet_instances(self, region: str, instance_ids: Sequence[str] = ()) -> list[FleetInstance]: ...
    # Zone name -> zone id of the region's zones (EC2 DescribeAvailabilityZones): the zone id a group's new
    # nodes register with (observe; spillway.planner.limits).
    def zone_ids_in(self, region: str) -> dict[str, str]: ...


class Snapshots(Protocol):
    """The store's snapshots table."""

    last_save: SaveResult | None

    def save(self, snapshot: Snapshot) -> str: ...
    def get(self, cluster: str, key: str) -> Snapshot: ...
    def latest(self, cluster: str) -> Snapshot | None: ...
    def latest_meta(self, cluster: str) -> SnapshotMeta | None: ...


class Ledger(Protocol):
    """The store's state and plans tables: the state with its version, back-offs, plan records."""

    # ``before_call`` before each Query it sends (one per page), as Cloud's writes take it
    def load(
        self, cluster: str, now: datetime | None = None, before_call: BeforeCall | None = None
    ) -> StoredState: ...
    def commit(
        self,
        cluster: str,
        state: State,
        *,
        expected_version: int,
        snapshot_key: str,
        plan_id: str,
        executions: Sequence[Mapping[str, object]] = (),
        now: datetime,
        plan: PlanRecord | None = None,
    ) -> int: ...
    # a pool's ``nodes``: how many EC2 refused at once; ``now``: a stored back-off over by then gives way.
    # ``cluster`` is the cluster's name: the store puts the item in its back-offs' partition itself
    # (BACKOFFS_PARTITION), never in the cluster's own; a partition given instead is a ValueError
    def put_backoff(
        self,
        cluster: str,
        group: str,
        until: datetime,
        reason: str,
        *,
        region: str = "",
        nodes: int = 1,
        now: datetime | None = None,
    ) -> bool: ...
    def save_plan(self, record: PlanRecord) -> None: ...
    # the plan record under ``key`` (consistent read), None when there is none
    def load_plan(self, cluster: str, key: str) -> PlanRecord | None: ...
    # Once-only markers and instance ownership (act/claims.py): a conditional put that never overwrites;
    # with ``now``, a lease (act/gangsweep.py): one expired by then is overwritten.
    def claim(
        self,
        cluster: str,
        item: str,
        value: Mapping[str, object],
        *,
        expires: datetime,
        now: datetime | None = None,  # a lease: a claim expired by ``now`` is overwritten
    ) -> tuple[dict[str, object], bool]: ...
    # A raise's verdict (act/claims.py): ``item`` claimed only while neither it nor ``rival`` exists, at
    # once (one transaction); which of the two stands afterwards (``item`` too when it stood before).
    def claim_unless(
        self, cluster: str, item: str, value: Mapping[str, object], *, rival: str, expires: datetime
    ) -> str: ...
    # with ``held_as``, only while the claim holds that value (a lease's holder letting go of its own)
    def release(self, cluster: str, item: str, *, held_as: Mapping[str, object] | None = None) -> bool: ...
    def claims(self, cluster: str, prefix: str) -> dict[str, dict[str, object]]: ...


class Workflows(Protocol):
    """Step Functions: start an execution under a deterministic name (a duplicate is ``started=False``)."""

    def start(self, request: ExecutionRequest) -> StartedExecution: ...


_AWS: tuple[type[SpillwayError], ...] = (AwsError, AwsThrottled, AwsUnavailable)
ERRORS: dict[str, tuple[type[SpillwayError], ...]] = {
    "Cluster": (
        KubeError,
        KubeUnavailable,
        KubeAuthError,
        KubeConflict,
        NodeNotFound,
        PodNotFound,
        EvictionBlocked,
    ),
    "Cloud": (*_AWS, AsgNotFound, AsgLimitExceeded, InstanceNotFound),
    "Snapshots": (*_AWS, SnapshotError, SnapshotNotFound),
    "Ledger": (*_AWS, StateConflict, StateCorrupt),
    "Workflows": (*_AWS, InputError),
}
# Errors only one method of a port may raise, besides the port's own (``port.method``).
METHOD_ERRORS: dict[str, tuple[type[SpillwayError], ...]] = {
    "Cloud.create_fleet_instant": (CapacityUnavailable, QuotaExceeded, LaunchMisconfigured),
    "Cloud.complete_lifecycle_action": (LifecycleActionNotFound,),
    "Cloud.record_heartbeat": (LifecycleActionNotFound,),
    "Cluster.patch_custom_status": (ObjectNotFound,),
    "Ledger.commit": (StateTooLarge,),
    # a stream cut short by an expired continue token (observe reads it again); lists start again themselves
    "Cluster.iter_nodes": (ListExpired,),
    "Cluster.iter_pods": (ListExpired,),
    "Cluster.iter_pdbs": (ListExpired,),
    "Cluster.iter_shared_objects": (ListExpired,),
    "Cluster.iter_volume_objects": (ListExpired,),
    "Cluster.iter_daemonsets": (ListExpired,),
    "Cluster.evict": (
        EvictionRefused,
        EvictionThrottled,
        EvictionBudgetForbidden,
        EvictionNamespaceTerminating,
    ),
}
