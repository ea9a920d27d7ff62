"""Node groups: an Auto Scaling group seen as "N more nodes shaped like this template".

The template node is what a new instance of the group will look like to the scheduler: allocatable
from the instance type minus the system reserve, the well-known labels, and the labels, taints and
resources that cluster-autoscaler's ``node-template`` tags declare. Once the group's nodes are known, a
node of its own corrects the estimated allocatable (spillway.model.livetemplate).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from spillway.model.aws import (
    AsgInstance,
    AutoScalingGroup,
    Distribution,
    EksNodegroup,
    InstanceTypeInfo,
    ScalingActivity,
    ScheduledAction,
    WarmPool,
)
from spillway.model.cluster import NodeInfo, TaintT, format_time, parse_time
from spillway.model.groupkey import GroupKey
from spillway.model.launcherror import LaunchErrorKind, launch_error_kind
from spillway.model.options import Options, parse_options
from spillway.model.quantity import to_milli
from spillway.model.reserve import ReserveLike, as_reserve
from spillway.model.resources import (
    AMD_GPU,
    CPU,
    EFA,
    MEMORY,
    NEURON,
    NEURON_CORE,
    NVIDIA_GPU,
    PODS,
    Resources,
    capacity_delta,
    with_capacity,
)
from spillway.model.schedule import ScheduledFloor, check_actions
from spillway.model.shared import label_problem
from spillway.model.utc import aware

TAG_ENABLED = "k8s.io/cluster-autoscaler/enabled"
TAG_CLUSTER_PREFIX = "k8s.io/cluster-autoscaler/"
TAG_LABEL = "k8s.io/cluster-autoscaler/node-template/label/"
TAG_TAINT = "k8s.io/cluster-autoscaler/node-template/taint/"
TAG_RESOURCE = "k8s.io/cluster-autoscaler/node-template/resources/"
# Gang launches (act/gang.py): "fleet" (EC2 CreateFleet instant, then AttachInstances), "rollback"
# (raise the desired capacity, give all of it back unless the whole gang is up by a deadline), "off".
TAG_ATOMIC_LAUNCH = "spillway.io/atomic-launch"
# Per group: off | when-empty | when-underutilized (spillway.planner.consolidation); absent: the config's.
TAG_CONSOLIDATION = "spillway.io/consolidation"
CONSOLIDATION_MODES = ("off", "when-empty", "when-underutilized")
AtomicLaunch = Literal["fleet", "rollback", "off"]
ATOMIC_LAUNCH_MODES: tuple[AtomicLaunch, ...] = ("fleet", "rollback", "off")
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
REGION_LABEL = "topology.kubernetes.io/region"
# Spot or on-demand: what the mixed instances policy, else the launch template or configuration, launches;
# where Spillway cannot see that, its own tag first, then the capacity-type labels a node template
# declares (Karpenter's and EKS managed node groups'). See capacity_type.
TAG_CAPACITY_TYPE = "spillway.io/capacity-type"
AZ_REBALANCE = "AZRebalance"  # the Auto Scaling process that evens a group's zones out
# The Auto Scaling processes that add and remove a group's instances (EC2 Auto Scaling User Guide,
# "Suspend and resume Amazon EC2 Auto Scaling processes"). While Launch is suspended the group launches
# nothing whatever its desired capacity; Auto Scaling suspends it itself ("administrative suspension")
# on a group that has failed to launch for over 24 hours. While Terminate is suspended the group does not
# terminate InService instances to scale in ("Considerations for suspending processes": only a forced
# delete of the group still does, and the API reference of TerminateInstanceInAutoScalingGroup does not
# say it is exempt). cluster-autoscaler's AWS provider reads neither (kubernetes/autoscaler issue 5591;
# the proposed fix, PR 5601, was to treat the group as at its MaxSize, resp. MinSize, and was not merged).
LAUNCH = "Launch"
TERMINATE = "Terminate"
# Runs the group's scheduled actions; suspended, Auto Scaling runs none of them (same User Guide page)
SCHEDULED_ACTIONS = "ScheduledActions"
CapacityType = Literal["spot", "on-demand"]
CAPACITY_TYPES: tuple[CapacityType, ...] = ("spot", "on-demand")
CAPACITY_LABELS: dict[str, dict[str, CapacityType]] = {
    "karpenter.sh/capacity-type": {"spot": "spot", "on-demand": "on-demand"},
    "eks.amazonaws.com/capacityType": {"SPOT": "spot", "ON_DEMAND": "on-demand"},
}
# Warm pool instances a scale-out can take now: those in the pool's state (WarmPoolConfiguration
# PoolState, "the instance state to transition to after the lifecycle actions are complete"). One still
# launching into the pool (Warmed:Pending, :Wait while a lifecycle hook holds it, :Proceed) is not
# ready yet, whichever of the three it is in; one leaving it (Warmed:Terminating...) never will be.
WARM_READY_STATES = frozenset({"Warmed:Stopped", "Warmed:Running", "Warmed:Hibernated"})
# An instance launching into its warm pool, or taken back into it on scale-in (InstanceReusePolicy
# .ReuseOnScaleIn), passes through these before it reaches the pool's PoolState (EC2 Auto Scaling User
# Guide, "Use lifecycle hooks with a warm pool": a terminate hook holds a returned one in
# Warmed:Pending:Wait). It runs meanwhile; then Auto Scaling stops or hibernates it ("as soon as an
# instance finishes launching into the warm pool"), unless the PoolState is Running.
WARM_PENDING_STATES = frozenset({"Warmed:Pending", "Warmed:Pending:Wait", "Warmed:Pending:Proceed"})
DEFAULT_MAX_PODS = 110
# The max pods cap EKS writes in the user data of a managed node group's nodes (no custom AMI): 110 for
# a type of fewer than 30 vCPUs, 250 for the others (Amazon EKS User Guide, "Choose an optimal Amazon
# EC2 node instance type", How maxPods is determined)
MANAGED_MAX_PODS_SMALL, MANAGED_MAX_PODS_LARGE, MANAGED_MAX_PODS_VCPUS = 110, 250, 30
# Instance lifecycle states that hold (or will hold) a node; the rest are leaving.
LIVE_STATES = frozenset({"Pending", "Pending:Wait", "Pending:Proceed", "InService"})
# The states of an instance the group is terminating, which "can't be put back into service" (EC2 Auto
# Scaling User Guide, "Amazon EC2 Auto Scaling instance lifecycle"): Terminating, and Terminating:Wait
# and Terminating:Proceed around a terminate lifecycle hook (not the warm pool's Warmed:Terminating*)
TERMINATING = "Terminating"
IN_SERVICE = "InService"
DEFAULT_POLICY = "Default"  # the termination policy of a group that names none
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# The labels EKS gives every node of a managed node group beside the node group's own (the node group's
# name and capacity type, as real nodes carry them, e.g. kubectl's view of an EKS node:
# eks.amazonaws.com/nodegroup=<name>, eks.amazonaws.com/capacityType=ON_DEMAND)
EKS_NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"
EKS_CAPACITY_TYPE_LABEL = "eks.amazonaws.com/capacityType"
# Karpenter labels every node it launches with its NodePool (its Provisioner before v1beta1); it launches
# by CreateFleet, into no Auto Scaling group
KARPENTER_NODE_LABELS = ("karpenter.sh/nodepool", "karpenter.sh/provisioner-name")
# EKS API taint effects (EKS API Reference, ``Taint``) as Kubernetes spells them
EKS_TAINT_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "NO_EXECUTE": "NoExecute",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
}
_MIB = 2**20 * 1000  # one MiB in milli-bytes


@dataclass(frozen=True, slots=True)
class TemplateNode:
    allocatable: Resources
    labels: Mapping[str, str]
    taints: tuple[TaintT, ...]
    tagged: tuple[str, ...] = ()  # resources a node-template/resources tag declares: no node overrides them
    node: str | None = None  # the group's node the allocatable was read from (spillway.model.livetemplate)
    # what a new node will report in status.capacity (what CapacityQuotas count): the type's nominal
    # vCPUs and memory, or the capacity of the node the allocatable was read from; the allocatable's
    # figure for any resource it does not give (a tagged one among them)
    capacity: Resources = field(default_factory=dict)
    # set when ``node`` is no longer there to read: the template was remembered from it, as it reported
    # at this time (spillway.model.nodecache); the planner's only, not stored in snapshots
    learned_at: datetime | None = None
    # why a shape remembered from a node is not used, though it is recent and of the group's type: the
    # group launches from another launch template version now (spillway.model.nodecache); planner's only
    forgotten: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "capacity", with_capacity(self.capacity, self.allocatable))

    @property
    def source(self) -> str:
        """Where the template's shape comes from, for reasons: "" for a node of the group's now or an
        estimate, else the node it was remembered from and when."""
        if self.learned_at is None or self.node is None:
            return ""
        return f"as {self.node} showed at {format_time(self.learned_at)}"


@dataclass(frozen=True, slots=True)
class LaunchFailure:
    """A launch activity of the group that ended ``Failed`` (DescribeScalingActivities StatusCode), with
    EC2's StatusMessage: whatever the reason, no instance came of it (see :func:`launch_failures`)."""

    at: datetime
    message: str
    # when the failed launch started (its StartTime; None: not read, ``at`` stands for it), which tells
    # whether it was a launch of the group's latest raise (:meth:`NodeGroup.failed_before_raise`)
    started: datetime | None = None

    @property
    def capacity(self) -> bool:
        """For capacity (:func:`is_capacity_failure`): EC2 had none of a pool, or a quota is full. Only
        which back-off key it sets depends on it (a pool's, or the whole group's)."""
        return is_capacity_failure(self.message)

    @property
    def kind(self) -> LaunchErrorKind:
        """Capacity, a quota, or the group's settings (:func:`~spillway.model.launcherror.launch_error_kind`)."""
        return launch_error_kind(self.message)


@dataclass(frozen=True, slots=True)
class NodeGroup:
    name: str
    region: str
    min_size: int
    max_size: int
    desired: int
    instance_type: str | None
    template: TemplateNode | None
    zones: tuple[str, ...] = ()
    instance_ids: tuple[str, ...] = ()
    launch_failures: tuple[LaunchFailure, ...] = ()
    # when the latest of its launch activities that ended Successful started (None: none read): a
    # failure before it that left the group short no longer is, once the group runs its desired
    # capacity (:meth:`made_good`)
    last_launched: datetime | None = None
    # when its desired capacity was last raised, as the Cause of a launch activity of that raise says
    # (None: none read); a launch that failed before it is no launch of it (:meth:`failed_before_raise`)
    last_raised: datetime | None = None
    # when a scheduled action lowered the group's desired capacity, and to what, as the Causes of its
    # activities say ("At <time> a scheduled action update of AutoScalingGroup constraints ... changing the
    # desired capacity from 3 to 1"), ascending: a one-time action is gone from DescribeScheduledActions
    # once it ran, and this is what is left of its run (spillway.planner.raises)
    scheduled_cuts: tuple[tuple[datetime, int], ...] = ()
    arn: str = ""
    atomic_launch: AtomicLaunch = "off"
    atomic_launch_problem: str = ""  # a tag value that is not a mode (the group is then "off")
    scheduled: tuple[ScheduledFloor, ...] = ()  # the group's scheduled actions (DescribeScheduledActions)
    warm_instances: int = 0  # warm pool instances ready to join (DescribeWarmPool)
    # the ids of those ``warm_instances`` counts: one whose Node is Ready already (a Running pool whose
    # kubelet started at warm-up) is a node of the cluster, no new one a draw adds (planner.joins)
    warm_ids: tuple[str, ...] = ()
    # every instance in the group's warm pool, whatever its Warmed:* state: outside the group's capacity
    # (a Node one registered at warm-up is NotReady while it sits stopped there, and is no unready node)
    pooled_instances: tuple[str, ...] = ()
    # the LifecycleState of each of ``pooled_instances`` (DescribeWarmPool), and the pool's PoolState
    # (Stopped when DescribeWarmPool names none: PutWarmPool's default); see pooled_runs
    pooled_states: tuple[tuple[str, str], ...] = ()
    warm_pool_state: str = ""
    capacity_type: CapacityType = "on-demand"  # of launches beyond on_demand_base (see launch_capacity_type)
    on_demand_base: int = 0  # a mixed instances policy's OnDemandBaseCapacity
    instance_types: tuple[str, ...] = ()  # a mixed instances policy's overrides, else empty
    # the architecture (``kubernetes.io/arch``) of each of ``instance_types`` the catalogue knows: a new
    # node of the type registers with it (the kubelet's own label), also where the template names none
    # (the overrides are of two architectures)
    type_archs: tuple[tuple[str, str], ...] = ()
    # live instances whose nodes do not stand for the template (spillway.model.livetemplate): of another
    # type than the group's; of a mixed group, of an override that is not the least of every resource
    # (all of them when none is)
    other_type_instances: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()  # tags or scheduled actions that could not be read, naming the field
    # why Spillway does not scale the group at all (its capacity is not a count of instances: see
    # capacity_unit_problems), one of its problems; "" for a group it scales
    refusal: str = ""
    # the scaling processes suspended on the group (SuspendedProcesses), each with its SuspensionReason
    # ("" without one), by process name
    suspended: tuple[tuple[str, str], ...] = ()
    # what a new node of the template's type launches from now, ``lt-0abc@7`` (the launch template's id
    # and version number, ``$Latest`` and ``$Default`` resolved) or ``lc:<name>``; "" when not known
    # (AutoScalingGroup.launch_source); and what each live instance was launched from, where known
    launch_source: str = ""
    instance_sources: tuple[tuple[str, str], ...] = ()
    # CapacityRebalance: the group replaces a Spot instance that gets a rebalance recommendation itself,
    # and terminates it once the replacement passed its health check (spillway.act.interrupt)
    capacity_rebalance: bool = False
    # it spans several zones and its AZRebalance process runs (see rebalance_problem): Auto Scaling may
    # terminate an undrained node of it after a scale-in of Spillway's
    zone_rebalance: bool = False
    # Spillway's terminate lifecycle hooks on the group (AutoScalingGroup.DrainHooks): every termination
    # of the group waits in Terminating:Wait while Spillway drains the node, a scheduled action's included
    drain_hooks: tuple[str, ...] = ()
    # its warm pool's InstanceReusePolicy.ReuseOnScaleIn: a scale-in of Auto Scaling's (a scheduled
    # action's) returns instances to the pool rather than terminating them; ``drain_hooks`` still hold
    # each, in Warmed:Pending:Wait (spillway.model.drain.HOOK_WAIT_STATES)
    reuse_on_scale_in: bool = False
    # live instances protected from scale-in on their own (see scale_in_protected)
    protected_instances: tuple[str, ...] = ()
    # of a group that protects every instance it launches (NewInstancesProtectedFromScaleIn), its live
    # instances protected from scale-in (ProtectedFromScaleIn): Auto Scaling's own scale-in (a scheduled
    # action's) terminates none of them, though Spillway drains them as any (protected_instances leaves
    # them out: see scale_in_protected)
    shielded_instances: tuple[str, ...] = ()
    # its TerminationPolicies as read (Default when the group lists none), and whether it has a mixed
    # instances policy (its scale-in first chooses between Spot and On-Demand instances): how Auto
    # Scaling picks the instances a scheduled action scales in (spillway.planner.scalein); no policies:
    # not read (a snapshot stored before they were), and neither was the mixed instances policy, so
    # nothing narrows which instances it may pick
    termination_policies: tuple[str, ...] = ()
    mixed_policy: bool = False
    # instances the group is terminating (Terminating, Terminating:Wait, Terminating:Proceed): their
    # nodes go with them, whatever their Ready condition says
    terminating_instances: tuple[str, ...] = ()
    # the group's other instances, out of service but in it (Standby, EnteringStandby, Detaching...): no
    # node for the planner, but members still (a fleet gang's instance there is no orphan:
    # spillway.planner.gangsweep)
    held_instances: tuple[str, ...] = ()
    # its live instances not InService yet (Pending, Pending:Wait while a launch lifecycle hook holds one,
    # Pending:Proceed), each with its LifecycleState: Auto Scaling terminates them even while the group's
    # Terminate process is suspended (:meth:`terminate_held`)
    pending_states: tuple[tuple[str, str], ...] = ()
    # the id of each of its zones EC2 named (DescribeAvailabilityZones: ZoneName -> ZoneId, read by
    # observe: with_zone_ids), by zone name; empty when EC2 was not asked or did not answer. A zone's name
    # maps to another id in each account, so only EC2 (or a node in the zone) says which id it is
    zone_ids: tuple[tuple[str, str], ...] = ()
    # of a group over several zones or of several instance types: each live instance with the zone and
    # type Auto Scaling's answer gives it ("" where it gives none; DescribeAutoScalingGroups
    # Instances[].AvailabilityZone and InstanceType), by instance id. An instance that has no Node yet
    # comes up there, though the template names neither (spillway.planner.scaleup)
    instance_places: tuple[tuple[str, str, str], ...] = ()
    # None: read by the observation of its snapshot. Else its region's read failed (the snapshot's
    # ClusterSnapshot.regions_unread names it) and this is the group as the last read of it saw it, at
    # this time, carried by observe while that read is younger than max_node_provision_minutes: the plan
    # neither grows nor shrinks it, and counts what it still launches (:attr:`unread`)
    read_at: datetime | None = None
    # (region, name), made once: the plan asks for it millions of times a replay (see key)
    _key: GroupKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_key", GroupKey(self.region, self.name))

    @property
    def key(self) -> GroupKey:
        """The group's identity: (region, name) (:mod:`spillway.model.groupkey`)."""
        return self._key

    @property
    def unread(self) -> bool:
        """Whether its region's read failed this time: the group is carried from an earlier read
        (:attr:`read_at`), and nothing may be asked of it on a picture that old."""
        return self.read_at is not None

    def zone_id(self, zone: str) -> str | None:
        """The id EC2 gave the group's ``zone`` (``use1-az4``), or None when it gave none."""
        return dict(self.zone_ids).get(zone)

    def made_good(self, failure: LaunchFailure) -> bool:
        """Whether Auto Scaling made ``failure`` good: a launch of the group that started after it ended
        succeeded, and the group runs every instance its desired capacity asks for. A Failed activity is
        one launch that started nothing (DescribeScalingActivities: one activity per instance), and Auto
        Scaling goes on launching while the group is short, in another zone or as another type; once
        it is not, no desired capacity waits on the failed pool. cluster-autoscaler reads a group's
        activities only while it has fewer instances than its desired capacity (its AWS provider's
        placeholders: auto_scaling_groups.go, createPlaceholdersForDesiredNonStartedInstances and
        isNodeGroupAvailable). Without a later success (a raise given back, desired lowered to what
        runs) it is not made good."""
        if self.last_launched is None or len(self.instance_ids) < self.desired:
            return False
        return aware(self.last_launched) > aware(failure.at)

    def failed_before_raise(self, failure: LaunchFailure) -> bool:
        """Whether ``failure`` is a launch of an earlier raise while the group is short of the desired
        capacity its latest raise asked for: it started before that raise (:attr:`last_raised`), so it
        says nothing of the launches the group owes now. cluster-autoscaler weighs only the activities
        that started at or after its latest SetDesiredCapacity when it asks whether a short group can
        still provide its desired instances (cloudprovider/aws/auto_scaling_groups.go,
        isNodeGroupAvailable: an activity that started before the group's lastUpdateTime ends the
        search). Not known without a raise read, and not asked of a group that runs its desired
        capacity (:meth:`made_good` decides then)."""
        if self.last_raised is None or len(self.instance_ids) >= self.desired:
            return False
        return aware(failure.started or failure.at) < aware(self.last_raised)

    def pooled_runs(self, instance_id: str) -> bool:
        """Whether ``instance_id`` of the group's warm pool runs there and stays running: Warmed:Running,
        or on its way into a pool whose PoolState is Running (:data:`WARM_PENDING_STATES`). Any other
        pooled instance is stopping or stopped (Warmed:Pending* of a Stopped or Hibernated pool, on
        warm-up or taken back on scale-in; Warmed:Stopped, Warmed:Hibernated, Warmed:Terminating*):
        its Node, Ready for a moment yet, runs no pod kube-scheduler binds there. One whose state is
        not known (a snapshot stored before states were read) runs, as it was planned then."""
        state = dict(self.pooled_states).get(instance_id)
        if state is None or state == "Warmed:Running":
            return True
        return state in WARM_PENDING_STATES and self.warm_pool_state == "Running"

    def terminate_held(self, instance_id: str) -> str | None:
        """Why Auto Scaling would not terminate the group's live ``instance_id`` (its Terminate process is
        suspended and the instance InService: :func:`terminate_holds`), or None when it would. One of no
        known state (a snapshot stored before :attr:`pending_states` was read) is taken as InService."""
        why = self.suspension(TERMINATE)
        state = dict(self.pending_states).get(instance_id)
        return why if terminate_holds(why is not None, state) else None

    def suspension(self, process: str) -> str | None:
        """Why ``process`` (:data:`LAUNCH`, :data:`TERMINATE`, ...) is suspended on the group, said for a
        reason ("its Launch process is suspended (User suspended at ...)"), or None when it runs."""
        for name, why in self.suspended:
            if name == process:
                return f"its {process} process is suspended" + (f" ({why})" if why else "")
        return None

    @property
    def expected_size(self) -> int:
        """The instances the group runs or is to run, each paid for (what :class:`~spillway.planner.
        limits.Limits` charges): its desired capacity, or its live instances when it has more. A group
        replaces instances by launching first and terminating after: Capacity Rebalancing launches a
        Spot instance for one at risk and terminates that one once the new one passed its health check,
        and may go above its MaxSize to do so ("Use Capacity Rebalancing to handle Amazon EC2 Spot
        Interruptions"); an instance refresh or maximum instance lifetime replacement under an instance
        maintenance policy whose maximum healthy percentage is above 100 does the same. With
        :data:`LAUNCH` suspended, only the live instances it has, within its desired capacity: Auto
        Scaling launches none for the rest. What of it is capacity to come: :meth:`coming`."""
        if self.suspension(LAUNCH) is None:
            return max(self.desired, len(self.instance_ids))
        return min(self.desired, len(self.instance_ids))

    def coming(self, replaced: int = 0) -> int:
        """The nodes the group will have to give room: its desired capacity, and of the live instances
        it runs above it, as many as ``replaced``, its Ready nodes that gave their room up to the group's
        replacement (:func:`spillway.planner.context._replaced_per_group`). A replacement is new room
        only for the pods of a node that no longer offers its own: once it is up the group terminates
        the instance it replaces and is back at its desired capacity ("Replace Auto Scaling instances
        based on an instance maintenance policy"), and while that instance still serves, its Node is
        counted Ready with its room and its pods; counting the replacement as well counts one node
        twice. With :data:`LAUNCH` suspended, only the live instances it has (:attr:`expected_size`)."""
        if self.suspension(LAUNCH) is not None:
            return self.expected_size
        above = max(0, len(self.instance_ids) - self.desired)
        return self.desired + min(above, max(0, replaced))

    def sure_on_demand(self, opened: int = 0) -> int | None:
        """How many more launches are on-demand for certain, after ``opened`` new nodes a plan opens
        already: all of them (None) for an on-demand group; for a spot or mixed group, those that still
        fill its ``OnDemandBaseCapacity`` (EC2 launches the base first, as on-demand, then splits the
        capacity above it by ``OnDemandPercentageAboveBaseCapacity``)."""
        return certain_on_demand(self.capacity_type, self.on_demand_base, self.desired + opened)

    def launch_capacity_type(self, count: int = 1, opened: int = 0) -> CapacityType:
        """The capacity type of the group's next ``count`` launches (after ``opened`` a plan opens
        already): spot as soon as any of them may be spot, on-demand when all of them are."""
        return capacity_type_of_launches(
            self.capacity_type, self.on_demand_base, self.desired + opened, count
        )

    @property
    def spot(self) -> bool:
        """The group's next launch may be spot: only pods that may move (or tolerate its spot taint)
        are placed on it."""
        return self.launch_capacity_type() == "spot"

    def launch_types(self) -> tuple[str, ...]:
        """The instance types a launch may get: the overrides, else the one type (empty: unknown)."""
        if self.instance_types:
            return self.instance_types
        return (self.instance_type,) if self.instance_type else ()

    def arch_of(self, instance_type: str) -> str | None:
        """The ``kubernetes.io/arch`` a new node of ``instance_type`` (one of :attr:`instance_types`)
        registers with, or None when the catalogue does not know the type."""
        return dict(self.type_archs).get(instance_type)

    def types_text(self) -> str:
        """The type a launch gets, or the types it may get (``c5.2xlarge or r5.xlarge``), for reasons."""
        many = self.launch_types()
        return " or ".join(many) if len(many) > 1 else str(self.instance_type)

    consolidation: str | None = None  # the group's spillway.io/consolidation tag; None: the config's
    consolidation_problem: str = ""  # a tag value that is not a mode (the group is then "off")
    # cluster-autoscaler's autoscaling-options tags, as planner settings (spillway.model.options)
    options: Options = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "region": self.region,
            "arn": self.arn,
            "min": self.min_size,
            "max": self.max_size,
            "desired": self.desired,
            "instance_type": self.instance_type,
            "template": None if self.template is None else _template_dict(self.template),
            "zones": list(self.zones),
            "instances": list(self.instance_ids),
            "launch_failures": [_failure_dict(f) for f in self.launch_failures],
            # Only what a group has (None leaves the key out), so groups without a tag, older readers and
            # fixtures see the form they know.
            **{key: value for key, encode in _OPTIONAL_KEYS if (value := encode(self)) is not None},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NodeGroup:
        tpl = d.get("template")
        failures = []
        for f in d.get("launch_failures", ()):
            at = parse_time(f["at"])
            if at is not None:  # "started" absent from snapshots stored before it was read: ``at`` stands
                failures.append(
                    LaunchFailure(at=at, message=f["message"], started=parse_time(f.get("started")))
                )
        return cls(
            name=d["name"],
            region=d["region"],
            arn=d.get("arn", ""),
            min_size=d["min"],
            max_size=d["max"],
            desired=d["desired"],
            instance_type=d.get("instance_type"),
            template=None
            if tpl is None
            else TemplateNode(
                allocatable=dict(tpl["allocatable"]),
                labels=dict(tpl["labels"]),
                taints=tuple((k, v, e) for k, v, e in tpl["taints"]),
                tagged=tuple(tpl.get("tagged", ())),
                node=tpl.get("node"),
                capacity=dict(tpl.get("capacity", {})),
            ),
            zones=tuple(d.get("zones", ())),
            instance_ids=tuple(d.get("instances", ())),
            launch_failures=tuple(failures),
            atomic_launch=parse_atomic_launch(d.get("atomic_launch"))[0],
            atomic_launch_problem=str(d.get("atomic_launch_problem", "")),
            scheduled=tuple(ScheduledFloor.from_dict(a) for a in d.get("scheduled", ())),
            warm_instances=int(d.get("warm_instances", 0)),
            # absent from snapshots stored before it was read: none known, as they were planned
            pooled_instances=tuple(d.get("pooled_instances", ())),
            # absent from snapshots stored before they were read: not known, each runs (pooled_runs)
            pooled_states=tuple(sorted(dict(d.get("pooled_states", {})).items())),
            warm_pool_state=str(d.get("warm_pool_state", "")),
            # absent from snapshots stored before it was read: none known, every warm instance counts
            warm_ids=tuple(d.get("warm_ids", ())),
            capacity_type="spot" if d.get("capacity_type") == "spot" else "on-demand",
            on_demand_base=int(d.get("on_demand_base", 0)),
            instance_types=tuple(d.get("instance_types", ())),
            # absent from snapshots stored before it was read: not known, as they were planned
            type_archs=tuple(sorted((str(k), str(v)) for k, v in dict(d.get("type_archs", {})).items())),
            other_type_instances=tuple(d.get("other_type_instances", ())),
            problems=tuple(d.get("problems", ())),
            refusal=str(d.get("refusal", "")),
            consolidation=parse_consolidation(d.get("consolidation"))[0],
            consolidation_problem=str(d.get("consolidation_problem", "")),
            options=tuple(sorted(dict(d.get("options", {})).items())),
            # absent from snapshots stored before it was read: nothing suspended, as they were planned
            suspended=tuple(sorted((str(k), str(v)) for k, v in dict(d.get("suspended", {})).items())),
            # absent from snapshots stored before they were read: not known, a remembered template is
            # then checked by type and age alone (spillway.model.nodecache)
            launch_source=str(d.get("launch_source", "")),
            instance_sources=tuple(
                sorted((str(k), str(v)) for k, v in dict(d.get("instance_sources", {})).items())
            ),
            # absent from snapshots stored before it was read: the group replaces nothing itself
            capacity_rebalance=d.get("capacity_rebalance") is True,
            # absent from snapshots stored before it was read: not flagged, as they were planned
            zone_rebalance=d.get("zone_rebalance") is True,
            # absent from snapshots stored before it was read: none known, as they were planned
            drain_hooks=tuple(d.get("drain_hooks", ())),
            # absent from snapshots stored before it was read: instances scaled in are terminated
            reuse_on_scale_in=d.get("reuse_on_scale_in") is True,
            # absent from snapshots stored before it was read: none protected, as they were planned
            protected_instances=tuple(d.get("protected_instances", ())),
            # absent from snapshots stored before they were read: none known, and no policies, which
            # says they were not read (spillway.planner.scalein then narrows nothing), mixed or not
            shielded_instances=tuple(d.get("shielded_instances", ())),
            termination_policies=tuple(str(p) for p in d.get("termination_policies", ())),
            mixed_policy=d.get("mixed_policy") is True,
            # absent from snapshots stored before it was read: none known, as they were planned
            terminating_instances=tuple(d.get("terminating_instances", ())),
            # absent from snapshots stored before it was read: none known
            held_instances=tuple(d.get("held_instances", ())),
            # absent from snapshots stored before it was read: none known, each taken as InService
            pending_states=tuple(sorted(dict(d.get("pending_states", {})).items())),
            # absent from snapshots stored before it was read (or when EC2 did not answer): none known,
            # the planner then learns a zone's id from the nodes there (spillway.planner.limits)
            zone_ids=tuple(sorted((str(k), str(v)) for k, v in dict(d.get("zone_ids", {})).items())),
            # absent from snapshots stored before it was read: none known, as they were planned
            instance_places=tuple(
                (str(k), str(v.get("zone", "")), str(v.get("type", "")))
                for k, v in sorted(dict(d.get("instance_places", {})).items())
            ),
            # absent from snapshots stored before it was read: no failure made good, as they were planned
            last_launched=parse_time(d["last_launched"]) if d.get("last_launched") else None,
            # absent from snapshots stored before it was read: no raise known, as they were planned
            last_raised=parse_time(d["last_raised"]) if d.get("last_raised") else None,
            # absent from snapshots stored before it was read: no cut known, as they were planned
            scheduled_cuts=_stored_cuts(d.get("scheduled_cuts", ())),
            # absent from snapshots stored before regions could be unread, and from a group read now
            read_at=parse_time(d.get("read_at")),
        )


def _stored_cuts(stored: Iterable[Any]) -> tuple[tuple[datetime, int], ...]:
    """:attr:`NodeGroup.scheduled_cuts` as ``to_dict`` stores them (``{"at": ISO, "to": n}``)."""
    cuts = ((parse_time(c["at"]), int(c["to"])) for c in stored)
    return tuple((at, to) for at, to in cuts if at is not None)


def terminate_holds(terminate_suspended: bool, lifecycle_state: str | None) -> bool:
    """Whether Auto Scaling would not terminate an instance in ``lifecycle_state`` (None: not known) of a
    group whose Terminate process is suspended (``terminate_suspended``) or runs: only an InService one of
    a suspended group. The suspension "applies only to instances that are currently in the InService
    state. It does not prevent the termination of instances in other states, such as Pending" (EC2 Auto
    Scaling User Guide, "Considerations for suspending processes"); an instance whose state is not known
    is taken as InService. The one rule the plan (:meth:`NodeGroup.terminate_held`) and every step that
    terminates (:func:`spillway.act.instances.terminate_held`) follow."""
    return terminate_suspended and lifecycle_state in (None, IN_SERVICE)


def is_managed(asg: AutoScalingGroup, cluster: str | None) -> bool:
    """Tagged the way cluster-autoscaler's auto-discovery expects (``enabled`` and ``<cluster>``)."""
    tags = asg.tag_map()
    if TAG_ENABLED not in tags:
        return False
    return cluster is None or f"{TAG_CLUSTER_PREFIX}{cluster}" in tags


# The optional keys of NodeGroup.to_dict, in order; an encoder returning None leaves its key out.
_OPTIONAL_KEYS: tuple[tuple[str, Callable[[NodeGroup], Any]], ...] = (
    ("atomic_launch", lambda g: g.atomic_launch if g.atomic_launch != "off" else None),
    ("atomic_launch_problem", lambda g: g.atomic_launch_problem or None),
    ("scheduled", lambda g: [a.to_dict() for a in g.scheduled] or None),
    ("warm_instances", lambda g: g.warm_instances or None),
    ("pooled_instances", lambda g: list(g.pooled_instances) or None),
    ("pooled_states", lambda g: dict(g.pooled_states) or None),
    ("warm_pool_state", lambda g: g.warm_pool_state or None),
    ("warm_ids", lambda g: list(g.warm_ids) or None),
    ("capacity_type", lambda g: "spot" if g.capacity_type == "spot" else None),
    ("on_demand_base", lambda g: g.on_demand_base or None),
    ("instance_types", lambda g: list(g.instance_types) or None),
    ("type_archs", lambda g: dict(g.type_archs) or None),
    ("other_type_instances", lambda g: list(g.other_type_instances) or None),
    ("problems", lambda g: list(g.problems) or None),
    ("refusal", lambda g: g.refusal or None),
    ("consolidation", lambda g: g.consolidation),
    ("consolidation_problem", lambda g: g.consolidation_problem or None),
    ("options", lambda g: dict(g.options) or None),
    ("suspended", lambda g: dict(g.suspended) or None),
    ("launch_source", lambda g: g.launch_source or None),
    ("instance_sources", lambda g: dict(g.instance_sources) or None),
    ("capacity_rebalance", lambda g: True if g.capacity_rebalance else None),
    ("zone_rebalance", lambda g: True if g.zone_rebalance else None),
    ("drain_hooks", lambda g: list(g.drain_hooks) or None),
    ("reuse_on_scale_in", lambda g: True if g.reuse_on_scale_in else None),
    ("protected_instances", lambda g: list(g.protected_instances) or None),
    ("shielded_instances", lambda g: list(g.shielded_instances) or None),
    ("termination_policies", lambda g: list(g.termination_policies) or None),
    ("mixed_policy", lambda g: True if g.mixed_policy else None),
    ("terminating_instances", lambda g: list(g.terminating_instances) or None),
    ("held_instances", lambda g: list(g.held_instances) or None),
    ("pending_states", lambda g: dict(g.pending_states) or None),
    ("zone_ids", lambda g: dict(g.zone_ids) or None),
    ("instance_places", lambda g: {i: {"zone": z, "type": t} for i, z, t in g.instance_places} or None),
    ("last_launched", lambda g: format_time(g.last_launched) if g.last_launched is not None else None),
    ("last_raised", lambda g: format_time(g.last_raised) if g.last_raised is not None else None),
    ("scheduled_cuts", lambda g: [{"at": format_time(at), "to": to} for at, to in g.scheduled_cuts] or None),
    ("read_at", lambda g: format_time(g.read_at) if g.read_at is not None else None),
)


def _failure_dict(failure: LaunchFailure) -> dict[str, Any]:
    """A launch failure as the snapshot stores it; ``started`` only when read."""
    out = {"at": format_time(failure.at), "message": failure.message}
    if failure.started is not None:
        out["started"] = format_time(failure.started)
    return out


def with_zone_ids(groups: Iterable[NodeGroup], ids: Mapping[str, Mapping[str, str]]) -> list[NodeGroup]:
    """The groups, each with the ids of its zones that ``ids`` (region -> zone name -> zone id, as EC2's
    DescribeAvailabilityZones answers) names; a group of a region without an answer is left as it is."""
    out: list[NodeGroup] = []
    for group in groups:
        known = ids.get(group.region) or {}
        pairs = tuple(sorted((zone, known[zone]) for zone in set(group.zones) if zone in known))
        out.append(replace(group, zone_ids=pairs) if pairs else group)
    return out


def zone_ids_of(groups: Iterable[NodeGroup]) -> dict[str, dict[str, str]]:
    """Region -> zone name -> zone id, as the groups carry them (:func:`with_zone_ids` the other way)."""
    out: dict[str, dict[str, str]] = {}
    for group in groups:
        out.setdefault(group.region, {}).update(group.zone_ids)
    return out


def _template_dict(template: TemplateNode) -> dict[str, Any]:
    out: dict[str, Any] = {
        "allocatable": template.allocatable,
        "labels": dict(template.labels),
        "taints": [list(t) for t in template.taints],
    }
    if template.tagged:  # only what a template has, so templates without read as before
        out["tagged"] = list(template.tagged)
    if template.node is not None:
        out["node"] = template.node
    delta = capacity_delta(template.capacity, template.allocatable)
    if delta:  # only what differs from allocatable: a template without reads as allocatable
        out["capacity"] = delta
    return out


def parse_atomic_launch(value: object) -> tuple[AtomicLaunch, str]:
    """The ``spillway.io/atomic-launch`` tag's mode, and a problem when the value is not one: a bad value
    is ``off`` (the group scales the ordinary way) with the problem kept on the group, never a refusal."""
    if value is None:
        return "off", ""
    text = str(value).strip().lower()
    if text in ATOMIC_LAUNCH_MODES:
        return text, ""
    modes = " | ".join(ATOMIC_LAUNCH_MODES)
    return "off", f"Tags[{TAG_ATOMIC_LAUNCH}]: {str(value)[:64]!r} is not one of {modes}; treated as off"


def parse_consolidation(value: object) -> tuple[str | None, str]:
    """The ``spillway.io/consolidation`` tag's mode (None without the tag: the config decides), and a
    problem when the value is not one: a bad value is ``off`` with the problem kept on the group."""
    if value is None:
        return None, ""
    text = str(value).strip().lower()
    if text in CONSOLIDATION_MODES:
        return text, ""
    modes = " | ".join(CONSOLIDATION_MODES)
    return "off", f"Tags[{TAG_CONSOLIDATION}]: {str(value)[:64]!r} is not one of {modes}; treated as off"


def override_types(asg: AutoScalingGroup) -> tuple[str, ...]:
    """A mixed instances policy's override instance types, in the policy's order (empty without)."""
    mixed = asg.MixedInstancesPolicy
    if not (mixed and mixed.LaunchTemplate):
        return ()
    return tuple(dict.fromkeys(o.InstanceType for o in mixed.LaunchTemplate.Overrides if o.InstanceType))


def _facts(info: InstanceTypeInfo) -> tuple[int, ...]:
    """What a type offers a pod, as the catalogue lists it: vCPUs, memory, max pods, GPUs, Neuron devices
    and cores."""
    vcpus, mib = info.VCpuInfo.DefaultVCpus, info.MemoryInfo.SizeInMiB
    pods = info.max_pods or DEFAULT_MAX_PODS
    return (vcpus, mib, pods, info.nvidia_gpus, info.neuron_devices, info.neuron_cores)


def least_override(types: Iterable[str], catalogue: Mapping[str, InstanceTypeInfo]) -> str | None:
    """The first of ``types`` (those the catalogue knows) that has no more of any resource than each of
    the others, or None when none has (one has more vCPUs, another more memory)."""
    facts = {t: _facts(catalogue[t]) for t in types if t in catalogue}
    for name, mine in facts.items():
        if all(all(a <= b for a, b in zip(mine, theirs, strict=True)) for theirs in facts.values()):
            return name
    return None


def candidate_types(asg: AutoScalingGroup) -> set[str]:
    """Every instance type the group's template may be taken from (to look up before resolving)."""
    types = {i.InstanceType for i in asg.Instances if i.InstanceType}
    first = resolve_instance_type(asg)
    return types | set(override_types(asg)) | ({first} if first else set())


def resolve_instance_type(
    asg: AutoScalingGroup, catalogue: Mapping[str, InstanceTypeInfo] | None = None
) -> str | None:
    """A mixed instances policy: the first of its overrides the catalogue knows that has the least of
    every resource (:func:`least_override`); when none has, or without a catalogue, its first override.
    Else the type of its launch template or configuration, when the adapter read it
    (:attr:`AutoScalingGroup.LaunchInstanceType`): the type every instance it launches now gets, whatever
    its running instances were launched with before the template changed (EC2 Auto Scaling API Reference,
    UpdateAutoScalingGroup: "all new instances will get the updated configuration. Existing instances
    continue to run with the configuration that they were originally launched with"). Else (input from
    describe-auto-scaling-groups alone) the type most of the group's instances run, else the
    node-template label tag. A mixed group's template is the least of each resource over all its
    overrides (:func:`build_template`), whichever type this is: it is the type a gang's fleet asks for
    (spillway.act.gang), which holds the template."""
    overrides = override_types(asg)
    if overrides:
        return least_override(overrides, catalogue or {}) or overrides[0]
    if asg.LaunchInstanceType:
        return asg.LaunchInstanceType
    live = Counter(
        i.InstanceType for i in asg.Instances if i.InstanceType and i.LifecycleState in LIVE_STATES
    )
    if live:
        return sorted(live.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    tags = asg.tag_map()
    return tags.get(TAG_LABEL + INSTANCE_TYPE_LABEL) or tags.get(
        TAG_LABEL + "beta.kubernetes.io/instance-type"
    )


_UNITS = {"vcpu": "vCPUs", "memory-mib": "MiB of memory"}
_NOT_SCALED = "Spillway counts nodes, so it does not scale the group"


def capacity_unit_problems(asg: AutoScalingGroup) -> tuple[str, ...]:
    """Why the group's DesiredCapacity, MinSize and MaxSize are not counts of instances, each naming its
    field; empty when they are. ``DesiredCapacityType`` vcpu or memory-mib counts vCPUs or MiB; a
    ``WeightedCapacity`` other than 1 on an override (or on a live instance, which keeps the weight it
    launched with after its override changed) makes every instance count its weight in units. Reading
    either as instances shows capacity launching that never comes, grows the group by the wrong amount
    and drains it below its MinSize: such a group is refused, not half-modelled (cluster-autoscaler's
    AWS provider also counts one instance as one)."""
    problems: list[str] = []
    kind = asg.DesiredCapacityType
    if kind is not None and kind.strip().lower() != "units":
        what = _UNITS.get(kind.strip().lower(), f"{kind[:32]!r}, not instances")
        problems.append(
            f"DesiredCapacityType: {kind[:32]!r}: the group's capacity counts {what}; {_NOT_SCALED}"
        )
    mixed = asg.MixedInstancesPolicy
    overrides = mixed.LaunchTemplate.Overrides if mixed and mixed.LaunchTemplate else []
    for index, override in enumerate(overrides):
        if not _weighs_one(override.WeightedCapacity):
            problems.append(_weight_problem(f"MixedInstancesPolicy.LaunchTemplate.Overrides[{index}]",
                                            override.WeightedCapacity))  # fmt: skip
    if not any(p.startswith("MixedInstancesPolicy") for p in problems):
        for index, instance in enumerate(asg.Instances):  # a weight its override no longer gives
            if not _weighs_one(instance.WeightedCapacity) and instance.LifecycleState in LIVE_STATES:
                problems.append(_weight_problem(f"Instances[{index}]", instance.WeightedCapacity))
    return tuple(problems)


def _weighs_one(weight: str | None) -> bool:
    text = (weight or "1").strip()
    return text.isdigit() and int(text) == 1


def _weight_problem(where: str, weight: str | None) -> str:
    return (
        f"{where}.WeightedCapacity: {str(weight)[:32]!r}: the group's capacity counts weighted units, not "
        f"instances; {_NOT_SCALED} (weigh every instance type 1 to have it scaled)"
    )


def capacity_type(asg: AutoScalingGroup) -> tuple[CapacityType, str]:
    """Spot or on-demand (for a mixed group: the capacity above its on-demand base, see
    :meth:`NodeGroup.launch_capacity_type`), and the problems met ("; "-joined; "" without).

    What EC2 is told to launch decides wherever Spillway sees it: a mixed instances policy (spot when its
    distribution may launch spot above its base, ``OnDemandPercentageAboveBaseCapacity`` below 100; AWS's
    default is 100, all on-demand), else the launch template or configuration as the adapter read it
    (:attr:`AutoScalingGroup.LaunchMarketType`). A capacity-type tag that says otherwise cannot change
    what EC2 launches: it is a problem naming the tag. Without either, the tags decide: the
    ``spillway.io/capacity-type`` tag, else a node-template label tag (``karpenter.sh/capacity-type``,
    ``eks.amazonaws.com/capacityType``), else on-demand. A ``spillway.io/capacity-type`` value that is
    neither is a problem too (the tag is then ignored)."""
    said, problems = _capacity_tags(asg.tag_map())
    launched = _launched_capacity(asg)
    if launched is None:
        return (said[0][2] if said else "on-demand"), "; ".join(problems)
    kind, source = launched
    problems += [
        f"Tags[{key}]: {value[:64]!r} says {claimed}, but {source} launches {kind}; ignored"
        for key, value, claimed in said
        if claimed != kind
    ]
    return kind, "; ".join(problems)


def _capacity_tags(tags: Mapping[str, str]) -> tuple[list[tuple[str, str, CapacityType]], list[str]]:
    """The capacity-type tags that name a capacity type, first the one that decides among them: (tag key,
    value, capacity type); and a problem for a ``spillway.io/capacity-type`` value that names none."""
    said: list[tuple[str, str, CapacityType]] = []
    problems = []
    if TAG_CAPACITY_TYPE in tags:
        value = tags[TAG_CAPACITY_TYPE]
        word = next((kind for kind in CAPACITY_TYPES if kind == value.strip().lower()), None)
        if word is not None:
            said.append((TAG_CAPACITY_TYPE, value, word))
        else:
            problems.append(
                f"Tags[{TAG_CAPACITY_TYPE}]: {value[:64]!r} is not one of spot | on-demand; ignored"
            )
    for label, values in CAPACITY_LABELS.items():
        key = TAG_LABEL + label
        found = values.get(tags.get(key, "").strip())
        if found is not None:
            said.append((key, tags[key], found))
    return said, problems


def _launched_capacity(asg: AutoScalingGroup) -> tuple[CapacityType, str] | None:
    """What EC2 launches beyond the on-demand base as far as Spillway can see, and what says so; None
    when it cannot see it."""
    if asg.MixedInstancesPolicy is not None:
        dist = _distribution(asg)
        above = (
            100
            if dist is None or dist.OnDemandPercentageAboveBaseCapacity is None
            else dist.OnDemandPercentageAboveBaseCapacity
        )
        return ("spot" if above < 100 else "on-demand"), "the mixed instances policy"
    if asg.LaunchMarketType is None:
        return None
    source = "the launch configuration" if asg.LaunchConfigurationName else "the launch template"
    return asg.LaunchMarketType, source


def one_capacity_type(asg: AutoScalingGroup) -> bool:
    """Whether every launch of the group is of one capacity type, so that an instance of it is of the
    capacity type of the group's launches: a group without a mixed instances policy (its launch
    template or configuration asks for Spot for every launch, or for none), or one whose policy
    launches all on-demand (``OnDemandPercentageAboveBaseCapacity`` 100, AWS's default) or all Spot
    (no on-demand base and 0 percent above it). A policy that splits its capacity between them
    launches either, and DescribeAutoScalingGroups does not say which an instance is."""
    if asg.MixedInstancesPolicy is None:
        return True
    dist = _distribution(asg)
    if dist is None or dist.OnDemandPercentageAboveBaseCapacity is None:
        return True
    above, base = dist.OnDemandPercentageAboveBaseCapacity, dist.OnDemandBaseCapacity or 0
    return above >= 100 or (above <= 0 and base <= 0)


def certain_on_demand(capacity: CapacityType, base: int, desired: int) -> int | None:
    """How many launches on top of ``desired`` are on-demand for certain (see
    :meth:`NodeGroup.sure_on_demand`): all (None) for an on-demand group, else what fills ``base``."""
    return None if capacity == "on-demand" else max(0, base - desired)


def capacity_type_of_launches(capacity: CapacityType, base: int, desired: int, count: int) -> CapacityType:
    """The capacity type of ``count`` launches on top of ``desired``: spot as soon as any of them may
    be spot, on-demand when all of them are (:meth:`NodeGroup.launch_capacity_type`)."""
    sure = certain_on_demand(capacity, base, desired)
    return "on-demand" if sure is None or count <= sure else "spot"


def spot_allocation_strategy(asg: AutoScalingGroup) -> str | None:
    """The mixed instances policy's ``SpotAllocationStrategy`` (None: AWS's default)."""
    dist = _distribution(asg)
    return (dist.SpotAllocationStrategy or None) if dist is not None else None


def launch_refusal(asg: AutoScalingGroup) -> str:
    """Why a raise of the group's desired capacity would launch nothing ("" when it would launch): the
    group is being deleted (``Status`` is set while DeleteAutoScalingGroup runs, which a forced delete
    does asynchronously, terminating its instances; Auto Scaling refuses any change to it then, "may not
    be modified while it is pending delete"), or its :data:`LAUNCH` process is suspended, by its owner or
    by Auto Scaling after a day of failed launches. Spillway never resumes a process: that is the
    owner's choice."""
    if asg.Status:
        return (
            f"{asg.region}/{asg.AutoScalingGroupName} is being deleted (Status {asg.Status[:64]!r}): Auto "
            "Scaling takes no change to it"
        )
    return _suspended(asg, LAUNCH, "Auto Scaling launches nothing there until it is resumed")


def give_back_refusal(asg: AutoScalingGroup) -> str:
    """Why no gang, of either mode, may launch in the group ("" when it may): its :data:`TERMINATE`
    process is suspended, and the suspension "applies only to instances that are currently in the
    InService state" (EC2 Auto Scaling User Guide, "Considerations for suspending processes"), so a
    give-back leaves a gang's InService members running (:func:`spillway.act.instances.give_back_in_group`:
    ``held``): not all or nothing. A rollback gang's members are in the group from its raise on; a fleet
    gang's only from ``AttachInstances`` on (before, EC2 TerminateInstances ends them whatever the
    group's processes), but then they are InService for as long as ``gang_verify`` waits for their
    Nodes. No other way out is documented there: DetachInstances's reference says nothing of a
    suspended Terminate, and EC2 TerminateInstances of a member, without the decrement, has the group
    replace it once Terminate resumes (ReplaceUnhealthy: "How suspended processes affect other
    processes"). Spillway never resumes a process: that is the owner's choice."""
    return _suspended(
        asg,
        TERMINATE,
        "a gang that does not launch whole could not be given back, as Auto Scaling terminates "
        "none of its InService instances until it is resumed",
    )


def atomic_refusal(asg: AutoScalingGroup, atomic: AtomicLaunch) -> str:
    """Why the group's gangs cannot be launched in mode ``atomic`` ("" when they can), as ``gang_prepare``
    would refuse them (:func:`spillway.act.gang._refuse_mode`): a fleet's zone rebalanced away
    (:func:`fleet_refusal`), and for both modes a suspended Terminate (:func:`give_back_refusal`);
    every one that holds, so the owner does not fix one to meet the next."""
    if atomic == "off":
        return ""
    found = [fleet_refusal(asg) if atomic == "fleet" else "", give_back_refusal(asg)]
    return "; ".join(r for r in found if r)


def _suspended(asg: AutoScalingGroup, process: str, effect: str) -> str:
    """Empty when ``process`` runs in the group; else that it is suspended (and why, when AWS says), what
    that means (``effect``) and the command that resumes it."""
    found = next((p for p in asg.SuspendedProcesses if p.ProcessName == process), None)
    if found is None:
        return ""
    why = f" ({found.SuspensionReason})" if found.SuspensionReason else ""
    return (
        f"{asg.region}/{asg.AutoScalingGroupName}: its {process} process is suspended{why}: {effect} "
        f"(aws autoscaling resume-processes --auto-scaling-group-name {asg.AutoScalingGroupName} "
        f"--scaling-processes {process})"
    )


def rebalance_problem(asg: AutoScalingGroup) -> str:
    """Why a scale-in of the group may take a node Spillway did not drain ("" when it may not): it spans
    several zones and its ``AZRebalance`` process runs. Spillway terminates the node it drained with
    TerminateInstanceInAutoScalingGroup and ShouldDecrementDesiredCapacity, which can leave the zones
    uneven; Auto Scaling then rebalances them, launching an instance in the emptier zone and then
    terminating one in the fuller zone, with no drain (EC2 Auto Scaling User Guide, "Rebalancing
    activities"; API Reference, TerminateInstanceInAutoScalingGroup). cluster-autoscaler's AWS README
    (Common Notes and Gotchas) gives the two ways out: suspend ``AZRebalance``, or drain every node the
    group's own scale-in takes (a terminate lifecycle hook). An EKS managed node group does the second
    itself, with the lifecycle hooks of its Auto Scaling group ("Before each instance is terminated,
    Amazon EKS sends a signal to drain that node", EKS User Guide), so it is not flagged; nor is a group
    with one of Spillway's own terminate hooks (:attr:`AutoScalingGroup.DrainHooks`): a terminate hook
    holds every termination of the group, automatic or manual, but for a detach, standby or a forced
    delete (EC2 Auto Scaling User Guide, "Amazon EC2 Auto Scaling lifecycle hooks", lifecycle hook
    availability), a rebalancing's included, and Spillway drains the node before it completes its
    action (spillway.act.interrupt). Spillway never changes a group's processes: that is the owner's
    choice."""
    zones = sorted(set(asg.AvailabilityZones))
    if len(zones) < 2 or asg.suspended(AZ_REBALANCE) or asg.eks_nodegroup is not None or asg.DrainHooks:
        return ""
    name = asg.AutoScalingGroupName
    return (
        f"SuspendedProcesses: {AZ_REBALANCE} is not suspended on a group over {len(zones)} zones "
        f"({', '.join(zones)}): after Spillway terminates a drained node, Auto Scaling may even the zones "
        "out by launching an instance and then terminating one in the fuller zone, a node nobody drained; "
        f"suspend it (aws autoscaling suspend-processes --auto-scaling-group-name {name} "
        f"--scaling-processes {AZ_REBALANCE}), or give the group Spillway's terminate lifecycle hook"
    )


def fleet_refusal(asg: AutoScalingGroup) -> str:
    """Why fleet mode must not launch gangs in the group ("" when it may): a fleet puts the whole gang in
    one zone, then attaches it, and a group spanning several zones whose ``AZRebalance`` process is not
    suspended then evens its zones out by launching in the others and terminating in the crowded one,
    with no drain (the EC2 Auto Scaling docs on rebalancing activities; cluster-autoscaler's AWS README).
    Spillway never changes a group's processes: that is the owner's choice."""
    zones = sorted(set(asg.AvailabilityZones))
    if len(zones) < 2 or asg.suspended(AZ_REBALANCE):
        return ""
    where = f"{asg.region}/{asg.AutoScalingGroupName}"
    return (
        f"{where} spans {len(zones)} zones ({', '.join(zones)}) and {AZ_REBALANCE} is not in its "
        f"SuspendedProcesses: a fleet puts a gang in one zone, and {AZ_REBALANCE} would terminate its "
        f"members to even the zones out; suspend {AZ_REBALANCE} on the group (aws autoscaling "
        f"suspend-processes --scaling-processes {AZ_REBALANCE}) or tag it rollback"
    )


def on_demand_base(asg: AutoScalingGroup) -> int:
    """The mixed instances policy's ``OnDemandBaseCapacity`` (AWS's default 0): that much of the group's
    capacity is launched first, as on-demand."""
    dist = _distribution(asg)
    return max(0, dist.OnDemandBaseCapacity or 0) if dist is not None else 0


def _distribution(asg: AutoScalingGroup) -> Distribution | None:
    mixed = asg.MixedInstancesPolicy
    return mixed.InstancesDistribution if mixed else None


def warm_count(pool: WarmPool | None, instance_type: str | None = None) -> int:
    """The warm pool's instances that can join the group as nodes of its template (a pool being deleted
    has none): ready (:data:`WARM_READY_STATES`) and of ``instance_type``, the type the group launches
    now (any type when it is not known). A pool keeps its instances when the launch template changes
    (AWS::AutoScaling::WarmPool: a rolling update does not replace them; an instance refresh does), and a
    scale-out draws them as they are, so one of another type is not the node the plan counts on. A
    warm pool takes no mixed instances policy (PutWarmPool), so the group has one type."""
    return len(warm_ids(pool, instance_type))


def warm_ids(pool: WarmPool | None, instance_type: str | None = None) -> tuple[str, ...]:
    """The ids of the instances :func:`warm_count` counts, sorted."""
    if pool is None or pool.WarmPoolConfiguration is None:
        return ()
    if (pool.WarmPoolConfiguration.Status or "") == "PendingDelete":
        return ()
    return tuple(
        sorted(
            i.InstanceId
            for i in pool.Instances
            if i.LifecycleState in WARM_READY_STATES
            and (instance_type is None or i.InstanceType is None or i.InstanceType == instance_type)
        )
    )


def with_warm_node_problems(groups: Iterable[NodeGroup], nodes: Iterable[NodeInfo]) -> list[NodeGroup]:
    """``groups`` in their order, each with a problem for every instance of its warm pool whose Node is
    Ready (:func:`warm_node_problem`)."""
    ready = {n.instance_id: n.name for n in nodes if n.ready and n.instance_id}
    out = []
    for group in groups:
        found = tuple(
            warm_node_problem(group, iid, ready[iid]) for iid in group.pooled_instances if iid in ready
        )
        out.append(replace(group, problems=(*group.problems, *found)) if found else group)
    return out


def warm_node_problem(group: NodeGroup, instance_id: str, node: str) -> str:
    """What a Ready Node of ``instance_id``, in ``group``'s warm pool, means.

    Running there (:meth:`NodeGroup.pooled_runs`), or warming up in a pool that takes back no instance
    on scale-in, it is a bootstrap that does not check the instance's lifecycle state: it starts kubelet
    at warm-up (user data runs then: EC2 Auto Scaling User Guide, warm pool instance lifecycle), and in
    a pool whose PoolState is Running the Node stays Ready: kube-scheduler binds pods to an instance
    outside the group (DescribeAutoScalingGroups does not list it), that Spillway therefore neither
    counts in the group nor drains (TerminateInstanceInAutoScalingGroup "cannot be called on instances
    in a warm pool"), and that an instance refresh replaces with the pool without a drain. kOps keeps
    kubelet from starting while the lifecycle state is Warmed:* (kubernetes/kops PR 11216).

    Stopping or stopped in a pool that takes back the instances it scales in (ReuseOnScaleIn), it is a
    node just returned from service: its kubelet ran until the instance stopped, and the node lifecycle
    controller marks the Node NotReady only once node-monitor-grace-period (40 s by default; 50 s from
    Kubernetes 1.32, kubernetes/kubernetes PR 126287) passed without a status from it. No bootstrap is
    at fault; until then
    kube-scheduler still takes the Node for room (it is Ready, and uncordoned unless a drain cordoned
    it), and Spillway plans no pod onto it."""
    if group.pooled_runs(instance_id) or not group.reuse_on_scale_in:
        return (
            f"WarmPool.Instances[{instance_id}]: Node {node} of this warm-pool instance is Ready: "
            "kube-scheduler binds pods to an instance outside the group, which Spillway neither counts "
            "in the group nor drains (TerminateInstanceInAutoScalingGroup refuses warm-pool instances) "
            "and which Auto Scaling may replace with its pool (an instance refresh) without a drain; "
            "start kubelet only once the instance's lifecycle state is not Warmed:* (as kOps does)"
        )
    state = dict(group.pooled_states).get(instance_id, "")
    return (
        f"WarmPool.Instances[{instance_id}]: Node {node} is still Ready though its instance, returned to "
        f"the warm pool on scale-in (InstanceReusePolicy.ReuseOnScaleIn), is stopping there ({state}, "
        f"PoolState {group.warm_pool_state}): the Node turns NotReady once node-monitor-grace-period "
        "passes; until then kube-scheduler may bind pods to it (Ready and, unless cordoned, schedulable) "
        "that do not run there, and Spillway plans no pod onto it"
    )


def scheduled_floors(actions: Iterable[ScheduledAction]) -> tuple[ScheduledFloor, ...]:
    return tuple(
        ScheduledFloor(
            name=a.ScheduledActionName,
            min_size=a.MinSize,
            desired=a.DesiredCapacity,
            max_size=a.MaxSize,
            recurrence=a.Recurrence or None,
            start=a.StartTime,
            end=a.EndTime,
            timezone=a.TimeZone or None,
        )
        for a in sorted(actions, key=lambda a: a.ScheduledActionName)
    )


def parse_taint_tag(key: str, value: str) -> TaintT:
    """``.../taint/nvidia.com/gpu`` = ``present:NoSchedule`` (or just ``NoSchedule``)."""
    taint_value, _, effect = value.rpartition(":")
    if effect not in _TAINT_EFFECTS:
        raise ValueError(f"Tags[{TAG_TAINT}{key}]: effect must be one of {', '.join(_TAINT_EFFECTS)}")
    return (key, taint_value or None, effect)


def type_resources(info: InstanceTypeInfo, reserve: ReserveLike) -> tuple[Resources, Resources]:
    """A node of the type: its allocatable (``reserve`` taken off its nominal CPU and memory; its max
    pods, NVIDIA and AMD GPUs, Neuron devices and their cores) and its nominal CPU and memory, the capacity it is sold
    with (what cluster-autoscaler's AWS template node reports)."""
    vcpus, mib = info.VCpuInfo.DefaultVCpus, info.MemoryInfo.SizeInMiB
    pods = info.max_pods or DEFAULT_MAX_PODS
    allocatable = as_reserve(reserve).allocatable(vcpus, mib, pods, arm64=info.architecture == "arm64")
    allocatable[PODS] = pods * 1000
    if info.nvidia_gpus:
        allocatable[NVIDIA_GPU] = info.nvidia_gpus * 1000
    if info.amd_gpus:
        allocatable[AMD_GPU] = info.amd_gpus * 1000
    if info.neuron_devices:
        allocatable[NEURON] = info.neuron_devices * 1000
    if info.neuron_cores:
        allocatable[NEURON_CORE] = info.neuron_cores * 1000
    return allocatable, {CPU: vcpus * 1000, MEMORY: mib * _MIB}


def least_resources(infos: Sequence[InstanceTypeInfo], reserve: ReserveLike) -> tuple[Resources, Resources]:
    """:func:`type_resources` of a node of any of the types: resource by resource, the least of them
    (a resource one of them lacks, a GPU, is not promised)."""
    pairs = [type_resources(info, reserve) for info in infos]
    return _least([a for a, _ in pairs]), _least([n for _, n in pairs])


def _least(all_resources: Sequence[Resources]) -> Resources:
    first, rest = all_resources[0], all_resources[1:]
    return {k: min([v, *(r[k] for r in rest)]) for k, v in first.items() if all(k in r for r in rest)}


def template_types(
    asg: AutoScalingGroup,
    instance_type: str | None,
    catalogue: Mapping[str, InstanceTypeInfo],
    reserve: ReserveLike,
) -> frozenset[str]:
    """The types whose nodes may stand for the group's template (spillway.model.livetemplate): its one
    type; of a mixed group's overrides, those whose estimate is the template's in every resource (none
    when no override is the least of all: a node of one says nothing of the others)."""
    overrides = override_types(asg)
    if not overrides:
        return frozenset({instance_type} if instance_type else ())
    known = [t for t in overrides if t in catalogue]
    if not known:
        return frozenset()
    least, _ = least_resources([catalogue[t] for t in known], reserve)
    return frozenset(t for t in known if type_resources(catalogue[t], reserve)[0] == least)


def override_problems(asg: AutoScalingGroup, catalogue: Mapping[str, InstanceTypeInfo]) -> list[str]:
    """What of a mixed group's overrides the template cannot vouch for, each naming its field: a type the
    catalogue does not know, an override with a launch template of its own (not read: the template's
    labels, taints and reserve are the group's), attribute-based instance type selection (not resolved)."""
    mixed = asg.MixedInstancesPolicy
    if not (mixed and mixed.LaunchTemplate):
        return []
    group_template = asg.launch_template
    problems = []
    for index, override in enumerate(mixed.LaunchTemplate.Overrides):
        where = f"MixedInstancesPolicy.LaunchTemplate.Overrides[{index}]"
        itype = override.InstanceType
        if itype and itype not in catalogue:
            problems.append(
                f"{where}.InstanceType: {itype!r} is not in the instance type catalogue: its resources and "
                "architecture are unknown; the template is the least of the overrides it knows and names no "
                "architecture"
            )
        own = override.LaunchTemplateSpecification.named() if override.LaunchTemplateSpecification else None
        if own is not None and own != group_template:
            name = own.get("LaunchTemplateId") or own.get("LaunchTemplateName")
            problems.append(
                f"{where}.LaunchTemplateSpecification: {itype or 'its type'} launches from launch template "
                f"{name} (version {own['Version']}), which Spillway does not read: the template's labels, "
                "taints and reserve are the group's (its node-template tags), its architecture the "
                "instance types'"
            )
        if override.InstanceRequirements is not None:
            problems.append(
                f"{where}.InstanceRequirements: attribute-based instance type selection is not resolved: "
                "the template comes from the group's instances, node-template tags or launch template and "
                "may not hold for every type EC2 selects"
            )
    return problems


def _well_known_labels(
    asg: AutoScalingGroup, types: Sequence[str], infos: Sequence[InstanceTypeInfo]
) -> dict[str, str]:
    """The labels every node of the group gets whichever of ``types`` it is (``infos``: those known).

    Each with its deprecated beta twin, as a real node carries both: the kubelet registers
    ``beta.kubernetes.io/os`` and ``/arch`` beside the stable keys (kubernetes/kubernetes
    pkg/kubelet/kubelet_node_status.go, ``initialNode``), and the cloud node controller sets
    ``failure-domain.beta.kubernetes.io/zone`` and ``/region`` beside the topology keys
    (staging/src/k8s.io/cloud-provider/controllers/node/node_controller.go,
    ``getNodeModifiersFromCloudProvider``). A pod of an older manifest that selects a beta key would
    otherwise find no group at zero that holds it."""
    region = asg.region
    labels = {
        "kubernetes.io/os": "linux",
        "beta.kubernetes.io/os": "linux",
        "topology.kubernetes.io/region": region,
        "failure-domain.beta.kubernetes.io/region": region,
    }
    if len(asg.AvailabilityZones) == 1:
        labels["topology.kubernetes.io/zone"] = asg.AvailabilityZones[0]
        labels["failure-domain.beta.kubernetes.io/zone"] = asg.AvailabilityZones[0]
    archs = {info.architecture for info in infos}
    if len(archs) == 1 and len(infos) == len(types):
        labels["kubernetes.io/arch"] = labels["beta.kubernetes.io/arch"] = archs.pop()
    if len(types) == 1:
        labels[INSTANCE_TYPE_LABEL] = types[0]
        labels["beta.kubernetes.io/instance-type"] = types[0]
    return labels


def build_template(
    asg: AutoScalingGroup,
    instance_type: str | None,
    catalogue: Mapping[str, InstanceTypeInfo],
    reserve: ReserveLike,
) -> TemplateNode | None:
    """The node a new instance of the group will be: ``reserve`` (spillway.model.reserve) takes the
    type's nominal CPU and memory to allocatable, and they are its capacity; the group's node-template
    tags come on top (the resources they declare are :attr:`TemplateNode.tagged`: a live node does not
    override them; a tagged resource's capacity is the tag's value too, as cluster-autoscaler's AWS
    template node copies its capacity to its allocatable).

    The group of an EKS managed node group (``eks:`` tags) gets ``eks.amazonaws.com/nodegroup``, and,
    once the adapter has read its node group (:attr:`AutoScalingGroup.ManagedNodegroup`), the node
    group's labels and taints (:func:`managed_labels`, :func:`managed_taints`) over the tags': they are
    what its nodes register with, and cluster-autoscaler's AWS provider lets them win too
    (kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/aws_manager.go ``buildNodeFromTemplate``).

    A mixed group may launch any of its overrides (EC2's allocation strategy chooses), so its template
    holds for each: every resource the least of them (:func:`least_resources`), ``kubernetes.io/arch``
    only when every override is known and of one architecture, the instance type labels only when
    there is one type."""
    tags = asg.tag_map()
    types = override_types(asg) or ((instance_type,) if instance_type else ())
    infos = [catalogue[t] for t in types if t in catalogue]
    allocatable, nominal = least_resources(infos, reserve) if infos else ({}, {})
    _cap_managed_max_pods(asg, infos, allocatable)
    _with_efa(asg, infos, allocatable)
    labels = _well_known_labels(asg, types, infos)
    taints: list[TaintT] = []
    tagged: list[str] = []
    labels.update(_tagged_labels(tags))
    for key in sorted(tags):
        value = tags[key]
        if key.startswith(TAG_TAINT):
            taints.append(parse_taint_tag(key[len(TAG_TAINT) :], value))
        elif key.startswith(TAG_RESOURCE):
            try:
                allocatable[key[len(TAG_RESOURCE) :]] = to_milli(value)
            except ValueError:
                raise ValueError(f"Tags[{key}]: not a quantity: {value!r}") from None
            tagged.append(key[len(TAG_RESOURCE) :])
    taints = _with_managed_nodegroup(asg, labels, taints, allocatable, tagged)
    if CPU not in allocatable or MEMORY not in allocatable:
        return None  # an unknown instance type and no resources tags: nothing to plan with
    allocatable.setdefault(PODS, DEFAULT_MAX_PODS * 1000)
    capacity = {name: value for name, value in nominal.items() if name not in tagged}
    return TemplateNode(
        allocatable=allocatable, labels=labels, taints=tuple(taints), tagged=tuple(tagged), capacity=capacity
    )


def _with_efa(asg: AutoScalingGroup, infos: Sequence[InstanceTypeInfo], allocatable: Resources) -> None:
    """``allocatable`` (in place) with the ``vpc.amazonaws.com/efa`` a new node offers: one for each EFA
    interface its launch template attaches (:attr:`AutoScalingGroup.LaunchEfaInterfaces`), no more than
    any of ``infos`` takes (``MaximumEfaInterfaces``, one per network card). The EFA device plugin
    advertises the EFA devices the node has, and a node has those its launch template attached (EKS
    User Guide, "Manage EFA devices on Amazon EKS"): a type that supports EFA launched without them
    offers none, so without the template read (a mixed group's, or ``spillway plan``'s) only a
    ``node-template/resources/vpc.amazonaws.com/efa`` tag declares them, as for cluster-autoscaler."""
    attached = asg.LaunchEfaInterfaces or 0
    if attached and infos:
        efa = min(attached, *(info.efa_interfaces for info in infos))
        if efa > 0:
            allocatable[EFA] = efa * 1000


def managed_max_pods_capped(asg: AutoScalingGroup) -> bool:
    """Whether EKS caps the max pods of the group's nodes: the group of a managed node group (its
    ``eks:`` tags) whose AMI is not custom. A node group DescribeNodegroup did not give is taken as capped:
    most are not custom, and the cap only ever lowers the estimate."""
    if asg.eks_nodegroup is None:
        return False
    nodegroup = asg.ManagedNodegroup
    return nodegroup is None or nodegroup.amiType != "CUSTOM"


def managed_max_pods(vcpus: int) -> int:
    """The cap EKS puts on the max pods of a managed node group's node of ``vcpus`` vCPUs."""
    return MANAGED_MAX_PODS_SMALL if vcpus < MANAGED_MAX_PODS_VCPUS else MANAGED_MAX_PODS_LARGE


def _cap_managed_max_pods(
    asg: AutoScalingGroup, infos: Sequence[InstanceTypeInfo], allocatable: Resources
) -> None:
    """``allocatable``'s pods (in place) no more than EKS lets a node of any of ``infos`` run when it
    caps the group's max pods (:func:`managed_max_pods_capped`); the kube-reserved memory stays that of
    the ENI figure, as nodeadm and bootstrap.sh compute it before the user data's ``maxPods`` applies."""
    if infos and PODS in allocatable and managed_max_pods_capped(asg):
        cap = min(managed_max_pods(info.VCpuInfo.DefaultVCpus) for info in infos)
        allocatable[PODS] = min(allocatable[PODS], cap * 1000)


def _with_managed_nodegroup(
    asg: AutoScalingGroup,
    labels: dict[str, str],
    taints: list[TaintT],
    allocatable: dict[str, int],
    tagged: list[str],
) -> list[TaintT]:
    """``labels`` given what EKS gives a node of the group's managed node group (updated in place, over
    the tags'), and the taints with the node group's: the ``eks:nodegroup-name`` tag names the node
    group, and DescribeNodegroup, when read, gives its labels and taints. The node group's own resource
    tags (:func:`managed_resources`) go into ``allocatable`` and ``tagged`` (in place) over the group's."""
    eks = asg.eks_nodegroup
    if eks is not None:
        labels[EKS_NODEGROUP_LABEL] = eks[1]
    if asg.ManagedNodegroup is None:
        return taints
    labels.update(managed_labels(asg.ManagedNodegroup))
    resources = managed_resources(asg.ManagedNodegroup)
    allocatable.update(resources)
    tagged.extend(name for name in resources if name not in tagged)
    return merged_taints(taints, managed_taints(asg.ManagedNodegroup))


def managed_resources(nodegroup: EksNodegroup) -> dict[str, int]:
    """The resources the node group's own tags declare (``k8s.io/cluster-autoscaler/node-template/
    resources/<resource>``, in milli-units), which win over the group's tags of the same resource.

    As cluster-autoscaler's AWS provider reads DescribeNodegroup's ``tags`` (kubernetes/autoscaler
    cluster-autoscaler/cloudprovider/aws/aws_manager.go ``buildNodeFromTemplate``,
    ``extractAllocatableResourcesFromTags``): resources only, over the Auto Scaling group's; its label
    and taint keys are not read there (the node group's labels and taints are its ``labels`` and
    ``taints``). cluster-autoscaler skips a value that is no quantity; here it is a ``ValueError``
    naming the tag, so the group is refused, as for the group's own resource tag."""
    out: dict[str, int] = {}
    for key in sorted(nodegroup.tags):
        name = key[len(TAG_RESOURCE) :]
        if not key.startswith(TAG_RESOURCE) or not name:
            continue
        value = nodegroup.tags[key]
        try:
            out[name] = to_milli(value)
        except ValueError:
            raise ValueError(
                f"ManagedNodegroup({nodegroup.nodegroupName}).tags[{key}]: not a quantity: {value!r}"
            ) from None
    return out


def managed_labels(nodegroup: EksNodegroup) -> dict[str, str]:
    """The labels EKS gives every node of the managed node group: its ``labels`` (EKS API Reference,
    ``Nodegroup``), its name and its capacity type (``eks.amazonaws.com/...``).

    cluster-autoscaler's AWS provider reads the same call (kubernetes/autoscaler
    cluster-autoscaler/cloudprovider/aws/aws_wrapper.go ``getManagedNodegroupInfo``) but labels its
    template with bare ``capacityType``, ``amiType``, ``k8sVersion`` and ``diskSize`` keys that no node
    registers with; Spillway gives the template the keys the nodes carry, so that a pod selecting one of
    those bare keys is not launched a node that will not hold it."""
    labels = dict(nodegroup.labels)
    labels[EKS_NODEGROUP_LABEL] = nodegroup.nodegroupName
    if nodegroup.capacityType:
        labels[EKS_CAPACITY_TYPE_LABEL] = nodegroup.capacityType
    return labels


def managed_taints(nodegroup: EksNodegroup) -> list[TaintT]:
    """The node group's taints with Kubernetes' effects; an effect the EKS API does not document is a
    ``ValueError`` naming the field (the group is then refused, as for a taint tag that cannot be read)."""
    out: list[TaintT] = []
    for index, taint in enumerate(nodegroup.taints):
        effect = EKS_TAINT_EFFECTS.get(taint.effect)
        if effect is None:
            raise ValueError(
                f"ManagedNodegroup({nodegroup.nodegroupName}).taints[{index}].effect: {taint.effect!r} is not "
                f"one of {', '.join(EKS_TAINT_EFFECTS)}"
            )
        out.append((taint.key, taint.value or None, effect))
    return out


def merged_taints(tagged: Sequence[TaintT], managed: Sequence[TaintT]) -> list[TaintT]:
    """``tagged`` and ``managed`` taints, one per key and effect (Kubernetes validates a node's
    ``spec.taints`` so): for the same pair the one of ``managed`` wins. Used for an EKS node group's
    taints over the tags' (EKS applies them to its nodes), and for the tags' over the taints a group's
    nodes registered with (:func:`spillway.model.livetemplate.with_group_taints`)."""
    replaced = {(key, effect) for key, _, effect in managed}
    return [t for t in tagged if (t[0], t[2]) not in replaced] + list(managed)


def is_capacity_failure(message: str) -> bool:
    """A launch that failed for capacity or a full quota (:func:`~spillway.model.launcherror.launch_error_kind`:
    EC2 had none of the type in the zone, or an account limit is full), as opposed to one that failed
    for the group's own settings (an AMI that does not exist, a subnet without free addresses, an
    invalid launch template, a permission...). Either means no capacity is coming
    (:func:`launch_failures`); this only decides what backs off: the pool, or the whole group."""
    return launch_error_kind(message) != "settings"


def is_failed_launch(activity: ScalingActivity) -> bool:
    """A launch activity that ended ``Failed``, whatever EC2's reason (EC2 Auto Scaling API Reference,
    Activity: StatusCode ``Failed`` with a StatusMessage). cluster-autoscaler's AWS provider
    (cloudprovider/aws/auto_scaling_groups.go, isNodeGroupAvailable) likewise takes any Failed activity
    since the group's last size change as the group unable to provide its placeholder instances: a
    missing AMI, a subnet out of addresses or a bad launch template deliver no more capacity than a
    shortage does, and no instance exists for max_node_provision_minutes (planner.joins) to notice."""
    return activity.StatusCode == "Failed" and activity.is_launch


def launch_failed(where: str, message: str) -> str:
    """Why a failed launch backs off what it does, for a plan's or a back-off's reason. A capacity
    failure: the group, and the pool (capacity type, zone, instance type) EC2 had none of when it names
    one (act/backoff.failed_pool), so other groups of that pool skip it too. Any other failure (the group's
    AMI, subnets, launch template): the whole group only, since no pool of it can launch until its
    settings are fixed, and another group's launches are not the worse for it."""
    kind = launch_error_kind(message)
    if kind == "capacity":
        return f"{where}: launch failed for capacity: {message}"
    if kind == "quota":
        return f"{where}: launch failed for an account quota (raise it in Service Quotas): {message}"
    return (
        f"{where}: launch failed, not for capacity (the group's own settings: no pool of it can launch "
        f"until they are fixed): {message}"
    )


def launch_failure_since(activities: Iterable[ScalingActivity], since: datetime) -> str:
    """The message of a launch activity that failed (:func:`is_failed_launch`: for capacity or any other
    reason) at or after ``since`` (naive times are UTC), or ``""``: how a scale-up or a gang launch
    learns that the launch will not deliver, at once rather than at its deadline."""
    failed = failed_launch_since(activities, since)
    return "" if failed is None else failed.StatusMessage or failed.Description


def failed_launch_since(activities: Iterable[ScalingActivity], since: datetime) -> ScalingActivity | None:
    """The first launch activity that failed at or after ``since`` (:func:`launch_failure_since`), or None."""
    return next(iter(failed_launches_since(activities, since)), None)


def failed_launches_since(activities: Iterable[ScalingActivity], since: datetime) -> list[ScalingActivity]:
    """Every launch activity that failed at or after ``since`` (naive times are UTC), in the order given:
    Auto Scaling writes one per instance launch, so a raise of several may fail in several pools (two
    zones, two instance types), each named in its own activity."""
    return [
        activity
        for activity in activities
        if aware(activity.StartTime) >= since and is_failed_launch(activity)
    ]


# A launch activity names its instance ("Launching a new EC2 instance: i-0123...", DescribeScalingActivities'
# Description) and says why in its Cause. The group launches a replacement for an instance it takes out of
# service, without changing the desired capacity (EC2 Auto Scaling User Guide, "View the reason for health
# check failures": the unhealthy instance is terminated and another activity launches a new one; "Health
# checks for instances in an Auto Scaling group"); activity histories show such a launch's Cause as "an
# instance was launched in response to an unhealthy instance needing to be replaced" or "... in response to
# an instance refresh". Capacity Rebalancing, Availability Zone rebalancing and the maximum instance lifetime
# replace instances the same way, their Causes naming the feature. A raise's launch says "an instance was
# started in response to a difference between desired and actual capacity" after the desired change.
_LAUNCHED_ID = re.compile(r"^Launching a new EC2 instance: (i-\w+)")
_REPLACEMENT_CAUSE = re.compile(
    r"needing to be replaced|instance refresh|rebalanc|maximum instance lifetime|replacement", re.IGNORECASE
)


def replacement_launches(activities: Iterable[ScalingActivity]) -> frozenset[str]:
    """The instances the group launched to replace one it took out of service (a failed health check, a
    Spot interruption, an instance refresh, Capacity or Availability Zone rebalancing, the maximum instance
    lifetime), as their launch activities' Causes say: capacity the group keeps, not capacity a raise adds.
    A launch whose Cause says neither (an older wording) is not told apart."""
    found = set()
    for activity in activities:
        named = _LAUNCHED_ID.match(activity.Description)
        if named and _REPLACEMENT_CAUSE.search(activity.Cause or ""):
            found.add(named[1])
    return frozenset(found)


# The StatusCodes of an activity that has ended (EC2 Auto Scaling API Reference, Activity: StatusCode); every
# other one (PendingSpotBidPlacement, WaitingForInstanceId, PreInService, InProgress, MidLifecycleAction,
# WaitingForInstanceWarmup, ...) is an activity still under way
ENDED_ACTIVITY = frozenset({"Successful", "Failed", "Cancelled"})


def launch_under_way(
    activities: Iterable[ScalingActivity], since: datetime, replacements: Collection[str] = frozenset()
) -> bool:
    """Whether a launch activity started at or after ``since`` (naive times are UTC) has not ended yet
    (:data:`ENDED_ACTIVITY`), but the group's replacements of instances it took out of service
    (``replacements``: :func:`replacement_launches`). Auto Scaling writes one activity per instance it
    launches, so a raise of several has several: one Failed while another is under way is a raise Auto
    Scaling is still delivering (in another zone, or as another type), not one that failed."""
    for activity in activities:
        start = aware(activity.StartTime)
        named = _LAUNCHED_ID.match(activity.Description)
        if named and named[1] in replacements:
            continue
        if start >= since and activity.is_launch and activity.StatusCode not in ENDED_ACTIVITY:
            return True
    return False


def check_unique(asgs: Iterable[AutoScalingGroup], where: Iterable[str] | None = None) -> None:
    """Refuse a group listed twice, or an instance in two groups, naming both places.

    ``where`` names each group's place (``a.json AutoScalingGroups[0]``); by default its position.
    Either would give a wrong plan silently: a group scaled up twice, a template taken from the wrong
    group. Raises ``ValueError("<field>: <why>")``.
    """
    places = iter(where) if where is not None else None
    by_arn: dict[str, tuple[int, str]] = {}
    by_instance: dict[str, tuple[int, str]] = {}
    for index, asg in enumerate(asgs):
        place = next(places) if places is not None else f"AutoScalingGroups[{index}]"
        first, first_place = by_arn.setdefault(asg.AutoScalingGroupARN, (index, place))
        if first != index:
            same = " (the same file given twice)" if first_place == place else ""
            raise ValueError(
                f"{place}.AutoScalingGroupARN: group {asg.AutoScalingGroupName} is listed twice "
                f"(also {first_place}){same}"
            )
        for number, instance in enumerate(asg.Instances):
            field = f"{place}.Instances[{number}].InstanceId"
            first, first_field = by_instance.setdefault(instance.InstanceId, (index, field))
            if first != index:
                raise ValueError(
                    f"{field}: instance {instance.InstanceId} is in two groups (also {first_field})"
                )


def launch_failures(
    activities: Iterable[ScalingActivity],
) -> tuple[dict[str, list[LaunchFailure]], dict[str, list[LaunchFailure]]]:
    """Failed launches (:func:`is_failed_launch`, whatever the reason), by group ARN and (for activities
    without one) by group name."""
    by_arn: dict[str, list[LaunchFailure]] = {}
    by_name: dict[str, list[LaunchFailure]] = {}
    for act in activities:
        if not is_failed_launch(act):
            continue
        failure = LaunchFailure(
            at=act.EndTime or act.StartTime,
            message=act.StatusMessage or act.Description,
            started=aware(act.StartTime),
        )
        if act.AutoScalingGroupARN:
            by_arn.setdefault(act.AutoScalingGroupARN, []).append(failure)
        else:
            by_name.setdefault(act.AutoScalingGroupName, []).append(failure)
    return by_arn, by_name


def last_launches(activities: Iterable[ScalingActivity]) -> tuple[dict[str, datetime], dict[str, datetime]]:
    """When the latest launch activity that ended ``Successful`` started, by group ARN and (for
    activities without one) by group name (naive times are UTC)."""
    by_arn: dict[str, datetime] = {}
    by_name: dict[str, datetime] = {}
    for act in activities:
        if act.StatusCode != "Successful" or not act.is_launch:
            continue
        start = aware(act.StartTime)
        found = by_arn if act.AutoScalingGroupARN else by_name
        key = act.AutoScalingGroupARN or act.AutoScalingGroupName
        found[key] = max(found.get(key, start), start)
    return by_arn, by_name


# The clause of a Cause that says a desired capacity was changed, and when: "At 2020-10-30T19:35:51Z a user
# request update of AutoScalingGroup constraints to min: 0, max: 16, desired: 16 changing the desired
# capacity from 0 to 16." (DescribeScalingActivities, Activity.Cause; "a user request explicitly set group
# desired capacity ..." for SetDesiredCapacity). A Cause holds several such "At <time> ..." clauses.
_CLAUSE = re.compile(
    r"At (\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z) (.*?)(?=\s*\bAt \d{4}-\d{2}-\d{2}T|$)", re.S
)
_DESIRED_CHANGE = re.compile(r"changing the desired capacity from (\d+) to (\d+)")


def raised_at(cause: str) -> datetime | None:
    """When the latest raise an activity's Cause names was made (its desired capacity changed from a
    lower value to a higher one), or None when it names none."""
    found = None
    for clause in _CLAUSE.finditer(cause):
        change = _DESIRED_CHANGE.search(clause[2])
        if change is not None and int(change[2]) > int(change[1]):
            at = parse_time(clause[1])
            found = at if found is None or (at is not None and at > found) else found
    return found


def last_raises(activities: Iterable[ScalingActivity]) -> tuple[dict[str, datetime], dict[str, datetime]]:
    """When each group's desired capacity was last raised, as its launch activities' Causes say
    (:func:`raised_at`), by group ARN and (for activities without one) by group name."""
    by_arn: dict[str, datetime] = {}
    by_name: dict[str, datetime] = {}
    for act in activities:
        at = raised_at(act.Cause) if act.is_launch else None
        if at is None:
            continue
        found = by_arn if act.AutoScalingGroupARN else by_name
        key = act.AutoScalingGroupARN or act.AutoScalingGroupName
        found[key] = max(found.get(key, at), at)
    return by_arn, by_name


# The clause a scheduled action's run writes into the Causes of the activities it starts: "At
# 2016-02-12T16:01:25Z a scheduled action update of AutoScalingGroup constraints to min: 1, max: ...,
# desired: ... changing the desired capacity from 4 to 1." (AWS Knowledge Center, "Why did my Auto Scaling
# group scale down?", which gives this form for scheduled scaling beside "a user request update of
# AutoScalingGroup constraints" for a person's)
_SCHEDULED_UPDATE = "a scheduled action update of AutoScalingGroup constraints"


def scheduled_cuts(
    activities: Iterable[ScalingActivity],
) -> tuple[dict[str, set[tuple[datetime, int]]], dict[str, set[tuple[datetime, int]]]]:
    """Every lowering of a group's desired capacity by a scheduled action that its activities' Causes
    name, as (when, the new desired capacity), by group ARN and (for activities without one) by group
    name. Each instance the run scales in has an activity repeating the clause: one entry for all."""
    by_arn: dict[str, set[tuple[datetime, int]]] = {}
    by_name: dict[str, set[tuple[datetime, int]]] = {}
    for act in activities:
        for clause in _CLAUSE.finditer(act.Cause):
            change = _DESIRED_CHANGE.search(clause[2]) if clause[2].startswith(_SCHEDULED_UPDATE) else None
            at = parse_time(clause[1]) if change is not None else None
            if change is None or at is None or int(change[2]) >= int(change[1]):
                continue
            found = by_arn if act.AutoScalingGroupARN else by_name
            found.setdefault(act.AutoScalingGroupARN or act.AutoScalingGroupName, set()).add(
                (at, int(change[2]))
            )
    return by_arn, by_name


def build_node_groups(
    asgs: Iterable[AutoScalingGroup],
    activities: Iterable[ScalingActivity],
    catalogue: Mapping[str, InstanceTypeInfo],
    reserve: ReserveLike,
    cluster: str | None,
    *,
    scheduled: Iterable[ScheduledAction] = (),
    warm_pools: Mapping[str, WarmPool] | None = None,
) -> list[NodeGroup]:
    """The managed node groups, sorted by (region, name). ``scheduled`` are the scheduled actions,
    matched to a group by name within the region their ARN names (by name alone without an ARN);
    ``warm_pools`` maps a group's ARN (or its name, within one region) to its DescribeWarmPool answer."""
    actions: dict[tuple[str | None, str], list[ScheduledAction]] = {}
    for action in scheduled:  # by the region its ARN names, else by group name alone
        actions.setdefault((action.region, action.AutoScalingGroupName), []).append(action)
    activities = list(activities)
    by_arn, by_name = launch_failures(activities)
    launched_arn, launched_name = last_launches(activities)
    raised_arn, raised_name = last_raises(activities)
    cuts_arn, cuts_name = scheduled_cuts(activities)
    asgs = list(asgs)
    check_unique(asgs)
    groups: list[NodeGroup] = []
    for asg in asgs:
        if not is_managed(asg, cluster) or asg.Status:
            continue
        failures = by_arn.get(asg.AutoScalingGroupARN, []) + by_name.get(asg.AutoScalingGroupName, [])
        name = asg.AutoScalingGroupName
        floors = scheduled_floors([*actions.get((asg.region, name), ()), *actions.get((None, name), ())])
        pools = warm_pools or {}
        warm = pools.get(asg.AutoScalingGroupARN, pools.get(name))
        launched = [at for at in (launched_arn.get(asg.AutoScalingGroupARN), launched_name.get(name)) if at]
        raised = [at for at in (raised_arn.get(asg.AutoScalingGroupARN), raised_name.get(name)) if at]
        group = node_group(asg, catalogue, reserve, failures, floors, warm)
        groups.append(
            replace(
                group,
                last_launched=max(launched) if launched else None,
                last_raised=max(raised) if raised else None,
                scheduled_cuts=tuple(
                    sorted(cuts_arn.get(asg.AutoScalingGroupARN, set()) | cuts_name.get(name, set()))
                ),
            )
        )
    return sorted(groups, key=lambda g: (g.region, g.name))


def _tagged_labels(tags: Mapping[str, str]) -> dict[str, str]:
    """The labels the group's ``node-template/label/<key>`` tags give, but those that are no Kubernetes
    label (left out: :func:`label_tag_problems` names them)."""
    return {
        key[len(TAG_LABEL) :]: value
        for key, value in sorted(tags.items())
        if key.startswith(TAG_LABEL) and not label_problem(key[len(TAG_LABEL) :], value)
    }


def label_tag_problems(tags: Mapping[str, str]) -> list[str]:
    """The group's ``node-template/label/<key>`` tags that are no Kubernetes label (key as
    ``validation.IsQualifiedName``, value as ``IsValidLabelValue``, k8s.io/apimachinery
    pkg/util/validation), each naming the tag: the kubelet refuses such ``--node-labels`` and no node
    carries one, so :func:`build_template` leaves it out rather than have a selector match a label no
    node will have, and the group is planned with its other labels."""
    out = []
    for key in sorted(tags):
        if key.startswith(TAG_LABEL):
            why = label_problem(key[len(TAG_LABEL) :], tags[key])
            if why:
                out.append(f"Tags[{key}]: {why}; left out of the group's node template")
    return out


def _template(
    asg: AutoScalingGroup, itype: str | None, catalogue: Mapping[str, InstanceTypeInfo], reserve: ReserveLike
) -> tuple[TemplateNode | None, str]:
    """The group's template, or none and why: a node-template tag or an EKS node group's taint that
    cannot be read (a taint's effect, a resource's quantity) leaves the next node unknown, so the group
    is refused (neither grown nor drained, :attr:`NodeGroup.refusal`) with the field named, and the
    other groups go on: raised,
    it failed every group's observation; left out, the template would launch nodes whose taint refuses
    the pods they are launched for."""
    try:
        return build_template(asg, itype, catalogue, reserve), ""
    except ValueError as exc:
        return (
            None,
            f"{exc}: the group's next node is unknown; it is neither grown nor drained until that is fixed",
        )


def node_group(
    asg: AutoScalingGroup,
    catalogue: Mapping[str, InstanceTypeInfo],
    reserve: ReserveLike,
    failures: Iterable[LaunchFailure],
    floors: tuple[ScheduledFloor, ...],
    warm: WarmPool | None,
) -> NodeGroup:
    itype = resolve_instance_type(asg, catalogue)
    atomic, problem = parse_atomic_launch(asg.tag_map().get(TAG_ATOMIC_LAUNCH))
    refusal = atomic_refusal(asg, atomic)
    if refusal:  # gang_prepare would refuse its gangs: they go the ordinary way, the reason shown
        atomic, problem = "off", f"Tags[{TAG_ATOMIC_LAUNCH}]: {atomic}: {refusal}; treated as off"
    consolidation, consolidation_problem = parse_consolidation(asg.tag_map().get(TAG_CONSOLIDATION))
    capacity, capacity_problem = capacity_type(asg)
    options, option_problems = parse_options(asg.tag_map())
    units = capacity_unit_problems(asg)
    template, tag_problem = _template(asg, itype, catalogue, reserve)
    standing = template_types(asg, itype, catalogue, reserve)
    overrides = override_problems(asg, catalogue)
    rebalance = rebalance_problem(asg)
    return NodeGroup(
        name=asg.AutoScalingGroupName,
        region=asg.region,
        arn=asg.AutoScalingGroupARN,
        min_size=asg.MinSize,
        max_size=asg.MaxSize,
        desired=asg.DesiredCapacity,
        instance_type=itype,
        template=template,
        zones=tuple(asg.AvailabilityZones),
        launch_failures=tuple(sorted(failures, key=lambda f: (f.at, f.message))),
        atomic_launch=atomic,
        atomic_launch_problem=problem,
        consolidation=consolidation,
        consolidation_problem=consolidation_problem,
        scheduled=floors,
        warm_instances=warm_count(warm, itype),
        warm_ids=warm_ids(warm, itype),
        pooled_instances=tuple(sorted(i.InstanceId for i in warm.Instances)) if warm is not None else (),
        pooled_states=tuple(sorted((i.InstanceId, i.LifecycleState) for i in warm.Instances))
        if warm is not None
        else (),
        warm_pool_state=_pool_state(warm),
        capacity_type=capacity,
        on_demand_base=on_demand_base(asg),
        instance_types=override_types(asg),
        type_archs=tuple(
            sorted((t, catalogue[t].architecture) for t in override_types(asg) if t in catalogue)
        ),
        problems=tuple(
            p
            for p in (
                *units,
                tag_problem,
                *label_tag_problems(asg.tag_map()),
                *overrides,
                asg.LaunchSettingsProblem,
                asg.ManagedNodegroupProblem,
                capacity_problem,
                *check_actions(floors, asg.MaxSize, asg.MinSize),
                *option_problems,
                rebalance,
            )
            if p
        ),
        refusal=units[0] if units else tag_problem,
        options=options,
        suspended=tuple(
            sorted({p.ProcessName: p.SuspensionReason or "" for p in asg.SuspendedProcesses}.items())
        ),
        launch_source=asg.launch_source(itype),
        capacity_rebalance=asg.CapacityRebalance is True,
        zone_rebalance=bool(rebalance),
        drain_hooks=tuple(asg.DrainHooks or ()),
        reuse_on_scale_in=_reuses_on_scale_in(asg, warm),
        termination_policies=termination_policies(asg),
        mixed_policy=asg.MixedInstancesPolicy is not None,
        **_instance_facts(asg, standing),
    )


def _pool_state(warm: WarmPool | None) -> str:
    """The warm pool's PoolState; Stopped when its configuration names none (PutWarmPool's default)."""
    if warm is None:
        return ""
    config = warm.WarmPoolConfiguration
    return (config.PoolState if config is not None else None) or "Stopped"


def _reuses_on_scale_in(asg: AutoScalingGroup, warm: WarmPool | None) -> bool:
    """Whether the group's warm pool takes back the instances it scales in (``ReuseOnScaleIn``), as
    DescribeWarmPool's configuration says, else DescribeAutoScalingGroups' (both carry the policy)."""
    config = warm.WarmPoolConfiguration if warm is not None else None
    config = config if config is not None else asg.WarmPoolConfiguration
    return config is not None and config.reuses_on_scale_in


def _instance_facts(asg: AutoScalingGroup, standing: frozenset[str]) -> dict[str, Any]:
    """What the planner reads of the group's instances (NodeGroup's fields of the same names): the live
    ones, those of a type that does not stand for the template (``standing``), what each was launched
    from, those protected from scale-in on their own (and, of a group protecting all it launches, those
    protected all the same), those the group is terminating, and the others it holds out of service."""
    live = [i for i in asg.Instances if i.LifecycleState in LIVE_STATES]
    return {
        "instance_ids": tuple(sorted(i.InstanceId for i in live)),
        "instance_places": _instance_places(asg, live),
        "other_type_instances": tuple(sorted(i.InstanceId for i in live if i.InstanceType not in standing)),
        "instance_sources": tuple(sorted((i.InstanceId, i.launch_source) for i in live if i.launch_source)),
        "protected_instances": scale_in_protected(asg),
        "shielded_instances": shielded(asg, live),
        "terminating_instances": tuple(
            sorted(i.InstanceId for i in asg.Instances if i.LifecycleState.startswith(TERMINATING))
        ),
        "held_instances": tuple(
            sorted(
                i.InstanceId
                for i in asg.Instances
                if i.LifecycleState not in LIVE_STATES and not i.LifecycleState.startswith(TERMINATING)
            )
        ),
        "pending_states": tuple(
            sorted((i.InstanceId, i.LifecycleState) for i in live if i.LifecycleState != IN_SERVICE)
        ),
    }


def _instance_places(asg: AutoScalingGroup, live: Sequence[AsgInstance]) -> tuple[tuple[str, str, str], ...]:
    """Each live instance with its zone and type (:attr:`NodeGroup.instance_places`), of a group over
    several zones or with overrides; none of any other, whose template names both."""
    if len(set(asg.AvailabilityZones)) < 2 and asg.MixedInstancesPolicy is None:
        return ()
    return tuple(sorted((i.InstanceId, i.AvailabilityZone or "", i.InstanceType or "") for i in live))


def termination_policies(asg: AutoScalingGroup) -> tuple[str, ...]:
    """The group's TerminationPolicies as read, ``Default`` when it lists none: never empty, so that a
    group read now is told from one of a snapshot stored before they were read (which has none)."""
    return tuple(asg.TerminationPolicies) or (DEFAULT_POLICY,)


def shielded(asg: AutoScalingGroup, live: Sequence[AsgInstance]) -> tuple[str, ...]:
    """Of a group protecting every instance it launches, the ``live`` instances protected from scale-in
    (:attr:`NodeGroup.shielded_instances`): Auto Scaling's own scale-in takes none of them ("Use
    instance scale-in protection"), though :func:`scale_in_protected` lists none of them. None of
    another group, whose protected instances that lists."""
    if not asg.NewInstancesProtectedFromScaleIn:
        return ()
    return tuple(sorted(i.InstanceId for i in live if i.ProtectedFromScaleIn))


def scale_in_protected(asg: AutoScalingGroup) -> tuple[str, ...]:
    """The live instances somebody protected from scale-in on their own: ``ProtectedFromScaleIn`` while
    the group does not protect the instances it launches (``NewInstancesProtectedFromScaleIn``). The
    protection keeps an instance from the group's own scale-in, not from
    TerminateInstanceInAutoScalingGroup (EC2 Auto Scaling User Guide, "Use instance scale-in
    protection"), the call every drain of Spillway's ends with, so the planner keeps such a node
    itself (``scale-in-protected``). A group that protects every instance it launches does so to keep
    itself from choosing which instance a lower desired capacity terminates, as cluster-autoscaler
    users on AWS do (kubernetes/autoscaler issue 144), whose AWS provider removes the node it
    chose with that same call (cloudprovider/aws/auto_scaling_groups.go, DeleteInstances): its
    protection says nothing of one node, and none is listed."""
    if asg.NewInstancesProtectedFromScaleIn:
        return ()
    return tuple(
        sorted(
            i.InstanceId for i in asg.Instances if i.LifecycleState in LIVE_STATES and i.ProtectedFromScaleIn
        )
    )
