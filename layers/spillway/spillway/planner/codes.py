"""Machine-readable reason codes: one kebab-case constant per kind of decision.

Every :class:`~spillway.planner.types.KeptNode` and :class:`~spillway.planner.types.PendingPod` carries
one of these beside its human-readable ``reason``; tools match on the code, people read the reason.
The README lists them (section "The planner").
"""

from __future__ import annotations

# -- why a pending pod has no new node of its own (PendingPod.code) --
EXPENDABLE = "expendable"  # priority below expendable_priority_cutoff: never triggers a scale-up
FITS_FREE_ROOM = "fits-free-room"  # free room on a Ready node; the scheduler will get there
FITS_LAUNCHING = "fits-launching"  # capacity already launching in a group
FITS_UNCORDONED = "fits-uncordoned"  # a node Spillway cordoned, which this plan uncordons
# a Ready node once kube-scheduler preempts expendable pods of lower priority there (planner.preemption)
FITS_BY_PREEMPTION = "fits-by-preemption"
MAKING_ROOM = (
    "making-room"  # a make-room drain evicts pods from a node to give it this pod (planner.makeroom)
)
NO_MANAGED_GROUPS = "no-managed-groups"  # the cluster has no managed node group at all
NO_GROUP_FITS = "no-group-fits"  # no group's template node can ever run the pod
# pod anti-affinity or topology spread closes the domains of the groups that could (while those pods run)
POD_TOPOLOGY = "pod-topology"
BACKED_OFF = "backed-off"  # every group that fits is backed off after failed launches
MAX_SIZE = "max-size"  # every group that fits is at MaxSize
GROUPS_EXHAUSTED = "groups-exhausted"  # groups that fit are some backed off, some at MaxSize
# -- the shared cluster: limits, gangs, gates, preemption --
TENANT_LIMIT = "tenant-limit"  # the pod's tenant may not add more capacity (config tenants)
CLUSTER_LIMIT = "cluster-limit"  # max_nodes_total, cores_total, memory_total or gpu_total reached
CAPACITY_QUOTA = "capacity-quota"  # a CapacityQuota covering the groups that fit is full
GANG_INCOMPLETE = "gang-incomplete"  # the pod's gang has fewer pods than its minimum: none placed
SCHEDULING_GATED = "scheduling-gated"  # spec.schedulingGates set: not demand until the gates lift
NOMINATED = "nominated"  # status.nominatedNodeName: preemption makes room; nothing is launched
GANG_LAUNCHING = "gang-launching"  # a recent plan launches the gang atomically; not launched again
GANG_NO_ZONE = "gang-no-zone"  # the gang needs one zone and no zone holds it whole
# its gang runs in some region(s), kept to them, and they cannot hold it (MaxSize, backed off, no group)
GANG_HOME_FULL = "gang-home-full"
# its gang runs only on nodes of no known region: no region gets nodes for the rest
GANG_HOME_UNKNOWN = "gang-home-unknown"
GANG_HOME_CODES = (GANG_HOME_FULL, GANG_HOME_UNKNOWN)  # the plan's GangPodsHeldAtHome metric counts these
# a mixed group's on-demand base is full; beyond it EC2 may launch spot, and the pod may not move
ON_DEMAND_BASE = "on-demand-base"
# the codes of a pod a limit holds (metrics and the simulator count these per tenant)
LIMIT_CODES = (TENANT_LIMIT, CLUSTER_LIMIT, CAPACITY_QUOTA)
# consumes a ProvisioningRequest (autoscaling.x-k8s.io/consume-provisioning-request) that holds its
# capacity or is still being served: the request is the demand, not the pod
PROVISIONING_REQUEST = "provisioning-request"
# a claim of its binds at once and is not bound (or is missing or being deleted): kube-scheduler waits
# for the volume, which no new node brings (spillway.model.cluster.VolumeMatcher)
VOLUME_UNBOUND = "volume-unbound"
# it claims devices through dynamic resource allocation (spec.resourceClaims), which the planner does not
# model: which nodes hold them is the DRA drivers' ResourceSlices, not the node's allocatable
DYNAMIC_RESOURCES = "dynamic-resources"
# the groups that fit are in regions whose Auto Scaling read failed (planner.unread): not grown; as a
# kept code, its node is of such a group, or of such a region and in no group
REGION_UNREAD = "region-unread"

# -- why a node is not drained (KeptNode.code) --
UNCORDONED = "uncordoned"  # this plan uncordons it for pending pods
UNMANAGED = "unmanaged"  # not in a managed node group
NOT_READY = "not-ready"
CLUSTER_UNHEALTHY = "cluster-unhealthy"  # too many unready nodes: nothing is removed (planner.health)
STARTING = "starting"  # Ready, not initialized yet (startup taint, GPUs not registered): launching
WORKLOAD = "workload"  # runs pods whose disruption matters (see spillway.planner.disruption)
PENDING_FITS = "pending-fits"  # a pending pod is expected to run on it
DRAIN_PLANNED = "drain-planned"  # a recent plan drained it; that drain owns it
DRAINING = "draining"  # cordoned by Spillway: being drained
CORDONED_BY_OTHERS = "cordoned-by-others"  # a person or another tool cordoned it
SCALE_DOWN_DISABLED = "scale-down-disabled"  # cluster-autoscaler.kubernetes.io/scale-down-disabled=true
RECENTLY_LAUNCHED = "recently-launched"  # younger than scale_down_delay_after_launch_minutes
IDLE_BELOW_THRESHOLD = "idle-below-threshold"  # idle, but not for scale_down_idle_minutes yet
MIN_SIZE = "min-size"  # draining it would take the group below MinSize
CLUSTER_MIN = "cluster-min"  # removing it would take the cluster below a cores/memory/gpu_total minimum
# its group's Terminate process is suspended and its instance InService: Auto Scaling would not terminate it
# (model.nodegroup.terminate_holds)
TERMINATE_SUSPENDED = "terminate-suspended"
# its instance is protected from scale-in on its own (ProtectedFromScaleIn; model.nodegroup.scale_in_protected)
SCALE_IN_PROTECTED = "scale-in-protected"
SCHEDULED_MIN = "scheduled-min"  # below the size a scheduled action sets within the idle threshold
SCALE_IN_CAP = "scale-in-cap"  # max_scale_in_fraction of the group already drains in this plan
# a scale-down waits: a recent plan removed a node, or a scale-down drain failed (scale_down_delay_after_*)
SCALE_DOWN_COOLDOWN = "scale-down-cooldown"
NO_INSTANCE_ID = "no-instance-id"  # spec.providerID names no EC2 instance
BUFFER = "buffer"  # its free room holds an active capacity buffer's virtual pods (spillway.planner.buffers)
# its room counts toward a coscheduling gang's minResources this plan relies on (planner.minresources)
MIN_RESOURCES = "min-resources"
# Spillway's cordon outlived any drain (orphaned_drain_minutes): the plan finishes the drain (a Drain
# whose reason starts with ORPHANED_DRAIN_FINISHED) or restores the node (uncordon, KeptNode code).
ORPHANED_DRAIN_FINISHED = "orphaned-drain-finished"
ORPHANED_DRAIN_RESTORED = "orphaned-drain-restored"
# -- consolidation (spillway.planner.consolidation) --
CONSOLIDATION = "consolidation"  # Drain.code of a drain that moves pods (an empty node's drain has none)
# Drain.code of a drain that moves a node's pods so pending pods take the node instead of a new one
MAKE_ROOM = "make-room"
# Drain.code of a drain ahead of a scheduled action that lowers its group's DesiredCapacity or MaxSize
# below the nodes it has (spillway.planner.schedshrink): Auto Scaling would terminate them undrained
SCHEDULED_SHRINK = "scheduled-shrink"
# Drain.code of an idle node's drain that evicts the expendable pods it runs (nothing else keeps it)
EXPENDABLE_PODS = "expendable-pods"
# Drain.code of a NotReady node's drain whose only workload pods never started (and never will there):
# nothing to evict, they go with the node
NEVER_STARTED = "never-started-pods"
CONSOLIDATION_OFF = "consolidation-off"  # the group's consolidation is off: its nodes are never drained
DISRUPTION_BUDGET = "disruption-budget"  # the most restrictive active disruption budget is used up
POD_NEVER = "pod-never"  # runs a pod that must not be disturbed
ELASTIC_MIN = "elastic-min"  # moving its pods would shrink an elastic job below its minimum
DOES_NOT_FIT = "does-not-fit"  # the rest of the cluster's free room does not hold its pods
SAVING_TOO_SMALL = "saving-too-small"  # the node-time saved does not outlast the moved pods' restart cost
# its requests use consolidation_utilization_threshold of it or more: not underutilized (strictly below is)
UTILIZED = "utilized"
LAUNCHING_THIS_PLAN = "launching-this-plan"  # this plan grows its group (or its instance type)
RECEIVES_MOVED_PODS = "receives-moved-pods"  # this plan moves another node's pods onto it
# an elastic job a consolidation shrank recently: its recreated workers take free room only
ELASTIC_SHRUNK = "elastic-shrunk"
# younger than its cluster-autoscaler.kubernetes.io/pod-scale-up-delay: takes free room only
SCALE_UP_DELAYED = "scale-up-delayed"
# a candidate for less than consolidation_after_minutes: demand may come back to it
UNDERUTILIZED_NOT_LONG_ENOUGH = "underutilized-not-long-enough"

PENDING_CODES = (
    EXPENDABLE,
    FITS_FREE_ROOM,
    FITS_LAUNCHING,
    FITS_UNCORDONED,
    FITS_BY_PREEMPTION,
    MAKING_ROOM,
    NO_MANAGED_GROUPS,
    NO_GROUP_FITS,
    POD_TOPOLOGY,
    BACKED_OFF,
    MAX_SIZE,
    GROUPS_EXHAUSTED,
    TENANT_LIMIT,
    CLUSTER_LIMIT,
    CAPACITY_QUOTA,
    GANG_INCOMPLETE,
    SCHEDULING_GATED,
    NOMINATED,
    GANG_LAUNCHING,
    GANG_NO_ZONE,
    GANG_HOME_FULL,
    GANG_HOME_UNKNOWN,
    ON_DEMAND_BASE,
    ELASTIC_SHRUNK,
    SCALE_UP_DELAYED,
    PROVISIONING_REQUEST,
    VOLUME_UNBOUND,
    DYNAMIC_RESOURCES,
    REGION_UNREAD,
)
NODE_DO_NOT_DISRUPT = "node-do-not-disrupt"  # its node is annotated karpenter.sh/do-not-disrupt=true
KEPT_CODES = (
    UNCORDONED,
    UNMANAGED,
    CLUSTER_UNHEALTHY,
    NOT_READY,
    STARTING,
    WORKLOAD,
    PENDING_FITS,
    DRAIN_PLANNED,
    DRAINING,
    CORDONED_BY_OTHERS,
    SCALE_DOWN_DISABLED,
    NODE_DO_NOT_DISRUPT,
    RECENTLY_LAUNCHED,
    IDLE_BELOW_THRESHOLD,
    MIN_SIZE,
    CLUSTER_MIN,
    TERMINATE_SUSPENDED,
    SCALE_IN_PROTECTED,
    SCHEDULED_MIN,
    SCALE_IN_CAP,
    SCALE_DOWN_COOLDOWN,
    NO_INSTANCE_ID,
    ORPHANED_DRAIN_RESTORED,
    CONSOLIDATION_OFF,
    DISRUPTION_BUDGET,
    POD_NEVER,
    ELASTIC_MIN,
    DOES_NOT_FIT,
    SAVING_TOO_SMALL,
    UTILIZED,
    LAUNCHING_THIS_PLAN,
    RECEIVES_MOVED_PODS,
    UNDERUTILIZED_NOT_LONG_ENOUGH,
    BUFFER,
    MIN_RESOURCES,
    REGION_UNREAD,
)

# -- may a pod be disturbed (Disruption.code, spillway.planner.disruption) --
POD_FINISHED = "finished"  # Succeeded or Failed: nothing runs
POD_MIRROR = "mirror"  # a static pod: the kubelet runs it
POD_DAEMONSET = "daemonset"  # a DaemonSet pod: it runs on every node anyway
POD_TERMINATING = "terminating"  # already being deleted: wait for it
POD_STUCK = "stuck-terminating"  # deleted and still listed well past its grace period: its kubelet is gone
# Pending and never ran, on a node NotReady past scale_down_unready_minutes: it never will there, and goes
# with the node (spillway.planner.disruption.never_started)
POD_NEVER_STARTED = "never-started"
POD_DO_NOT_DISRUPT = "do-not-disrupt"  # karpenter.sh/do-not-disrupt=true
POD_NOT_SAFE_TO_EVICT = "not-safe-to-evict"  # cluster-autoscaler.kubernetes.io/safe-to-evict=false
POD_NO_CONTROLLER = "no-controller"  # nothing would recreate it
# an emptyDir on disk or a hostPath holds data only its node has (cluster-autoscaler's local storage)
POD_LOCAL_STORAGE = "local-storage"
POD_MOVABLE = "movable"  # may be evicted; its controller recreates it elsewhere
POD_FORCED = "forced"  # protected, but the caller forces its eviction
# tolerates the drain's cordon and taint: evicted, it (or its replacement) could land straight back, so
# no drain evicts it or waits for it; it goes with its node, and no plan moves it
POD_TOLERATES_DRAIN = "tolerates-drain"

# -- may consolidation move a pod to save cost (Move.code, spillway.planner.disruption.assess_move) --
POD_DO_NOT_DRAIN = "do-not-drain"  # openai/do-not-drain=true
POD_PDB_ALLOWS_NONE = "pdb-allows-none"  # a PodDisruptionBudget selecting it allows no disruption now
POD_PDB_MULTIPLE = "multiple-pdbs"  # more than one PodDisruptionBudget selects it: never evictable
POD_EXPENDABLE = "pod-expendable"  # priority below expendable_priority_cutoff: free to move
POD_SAFE_TO_EVICT = "safe-to-evict"  # cluster-autoscaler.kubernetes.io/safe-to-evict=true
POD_PREEMPTABLE = "preemptable"  # volcano.sh/preemptable=true
POD_ELASTIC = "elastic-worker"  # a worker of an elastic job: movable while the job keeps its minimum
POD_DISRUPTION_TOLERATED = "disruption-tolerated"  # its Job's podFailurePolicy ignores DisruptionTarget
# its eviction would end its job: the job's controller fails it (a replica that never restarts, a Job at its
# backoffLimit or whose podFailurePolicy fails it): never, whatever opt-in the pod has
POD_ENDS_JOB = "ends-job"
POD_NOT_KNOWN_MOVABLE = "not-known-movable"  # of no kind known to tolerate a move: never (the default)
# terminating, its grace period (deletionTimestamp) ending past LEAVING_WITHIN: not moved, its room not taken
POD_TERMINATING_LATE = "terminating-late"
# its terminationGracePeriodSeconds is longer than the drains' deadline: evicted, its shutdown would be cut
# short there (a checkpoint's hour under 900 s), so no plan moves it to save cost
POD_GRACE_PAST_DEADLINE = "grace-past-deadline"
MOVE_CODES = (
    POD_FINISHED,
    POD_MIRROR,
    POD_DAEMONSET,
    POD_TERMINATING,
    POD_TERMINATING_LATE,
    POD_STUCK,
    NODE_DO_NOT_DISRUPT,
    POD_DO_NOT_DISRUPT,
    POD_NOT_SAFE_TO_EVICT,
    POD_DO_NOT_DRAIN,
    POD_TOLERATES_DRAIN,
    POD_PDB_MULTIPLE,
    POD_PDB_ALLOWS_NONE,
    POD_EXPENDABLE,
    POD_SAFE_TO_EVICT,
    POD_PREEMPTABLE,
    POD_ELASTIC,
    POD_DISRUPTION_TOLERATED,
    POD_NO_CONTROLLER,
    POD_ENDS_JOB,
    POD_GRACE_PAST_DEADLINE,
    POD_LOCAL_STORAGE,
    POD_NOT_KNOWN_MOVABLE,
)

# -- a fleet-mode gang's instance left outside every group (GangOrphan.code, spillway.planner.gangsweep) --
GANG_ORPHAN = "gang-orphan"  # its attempt is over: terminated (and its idle Node deleted)
GANG_ORPHAN_BUSY = "gang-orphan-busy"  # its Node runs pods that keep a node busy: left, reported
GANG_ORPHAN_CODES = (GANG_ORPHAN, GANG_ORPHAN_BUSY)
