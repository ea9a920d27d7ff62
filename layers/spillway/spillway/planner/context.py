"""The planner's working context: throw-away copies of the snapshot and what the stages decide.

:class:`Context` is built once per plan (every attribute set in its constructor) and handed from stage
to stage; nothing in it outlives the plan. Time helpers live here too, so every stage formats
durations and instants the same way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from spillway.config import PlannerConfig
from spillway.model.buffer import BufferInfo
from spillway.model.cluster import ZONE_LABEL, ClusterSnapshot, NodeInfo, PodInfo
from spillway.model.groupkey import GroupKey
from spillway.model.jobs import JobInfo
from spillway.model.k8s import DRAINING_TAINT, GIVE_BACK_LEASE_MINUTES, REPLACEMENT_WAIT_MINUTES
from spillway.model.livetemplate import OS_KEYS, node_detail
from spillway.model.nodegroup import (
    EKS_NODEGROUP_LABEL,
    INSTANCE_TYPE_LABEL,
    KARPENTER_NODE_LABELS,
    REGION_LABEL,
    NodeGroup,
)
from spillway.model.priorities import priority_of
from spillway.model.provreq import ProvisioningRequestInfo
from spillway.model.resources import PODS, Resources, add_into, add_room, attach_limit_key, room_less
from spillway.model.schedule import Floor
from spillway.model.state import GangState, State
from spillway.model.utc import aware as aware  # re-exported: the planner modules take it from here
from spillway.planner.disruption import dead, goes_with_its_node, keeps_node_busy, never_started
from spillway.planner.predicates import admits
from spillway.planner.topology import NO_MARKS, Marks, Planned, Spot, TopologyIndex
from spillway.planner.types import PendingPod, Placement, Unhealthy

if TYPE_CHECKING:
    from spillway.planner.classes import Gangs  # which reads the context
    from spillway.planner.placement import Bin  # which reads the context

ONE_POD = 1000  # every pod takes one of the node's "pods" slots (milli-units)


def iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def minutes(delta: timedelta) -> str:
    seconds = delta.total_seconds()
    return f"{seconds:.0f}s" if abs(seconds) < 60 else f"{seconds / 60:.0f}m"


@dataclass(frozen=True, slots=True)
class Victim:
    """A running expendable pod (priority below ``expendable_priority_cutoff``) kube-scheduler may
    preempt for a pending pod of higher priority (:mod:`spillway.planner.preemption`)."""

    pod: str
    priority: int
    requests: Resources  # with its pod slot
    guarded: bool  # a PodDisruptionBudget allows its eviction nothing now: spared first, not always
    volumes: tuple[str, ...] = ()  # the volumes it uses (PodInfo.volumes)
    # its requests with its pod slot, all of its volumes among them; requests leaves out those another
    # pod of its node uses (Context.share_victims)
    full: Resources = field(default_factory=dict)


@dataclass(slots=True)
class WorkNode:
    """An existing node as the plan sees it: what runs there, and what the plan puts there."""

    info: NodeInfo
    group: NodeGroup | None
    used: Resources = field(default_factory=dict)
    workload: int = 0  # pods that keep the node busy (spillway.planner.disruption)
    # on a node NotReady past scale_down_unready_minutes, its pods that never started (and keep it from
    # nothing: spillway.planner.disruption.never_started), by key
    never_started: list[str] = field(default_factory=list)
    # of its workload, the pods that never started on it while its kubelet reports it NotReady, but not
    # for scale_down_unready_minutes yet: work until then, though the node is unneeded (scaledown)
    unstarted: int = 0
    # expendable pods that keep it from nothing: its drain evicts them (disruption.goes_with_its_node)
    expendable: list[PodInfo] = field(default_factory=list)
    free: Resources = field(default_factory=dict)
    receives: int = 0  # pending pods this plan expects to run here
    shape: tuple[Any, ...] = ()
    starting: str | None = None  # Ready but not initialized: capacity launching (planner.startup)
    marks: Marks = NO_MARKS  # what the pods this plan puts here bring (pod topology)
    daemon_used: Resources = field(default_factory=dict)  # what its DaemonSet pods request (of used)
    # what its other pods below expendable_priority_cutoff request (of used): no utilization counts it
    expendable_used: Resources = field(default_factory=dict)
    # running expendable pods whose room a pending pod of higher priority may take, lowest priority
    # first; one leaves the list once a pod of this plan takes its room (planner.preemption)
    victims: list[Victim] = field(default_factory=list)
    # its instance is being terminated by its group (NodeGroup.terminating_instances): no room for pods
    terminating: bool = False
    # its instance is stopping or stopped in its group's warm pool (not NodeGroup.pooled_runs): no room
    # for pods, though the Node stays Ready until node-monitor-grace-period passes
    pool_stopping: bool = False

    @property
    def spot(self) -> Spot:
        """The node as pod topology sees it."""
        return Spot(self.info.labels, self.info.taints, self.info.name)

    @property
    def going_away(self) -> bool:
        """The node goes without a drain of Spillway's: being deleted (the pod garbage collector deletes
        its pods once the Node is gone), its instance terminating in its group (it "can't be put back
        into service", EC2 Auto Scaling User Guide, "Amazon EC2 Auto Scaling instance lifecycle") or
        stopping in its warm pool (:attr:`pool_stopping`: its kubelet stops with it). Its pods may
        still run, Ready, but are about to be gone: no job, gang or budget counts on them."""
        return self.info.deleting or self.terminating or self.pool_stopping

    @property
    def schedulable(self) -> bool:
        """Room for pods now: Ready and initialized, not being deleted, not cordoned, not tainted for
        draining, its instance not being terminated by its group. A node being deleted
        (``deletionTimestamp`` set) is on its way out, as the cluster totals and the disruption budgets
        count it: Karpenter's disruption simulation takes only active nodes, not those marked for
        deletion, as destinations (kubernetes-sigs/karpenter pkg/controllers/disruption/helpers.go,
        ``SimulateScheduling``); so is one whose instance is ``Terminating*`` (it "can't be put back
        into service", EC2 Auto Scaling User Guide, "Amazon EC2 Auto Scaling instance lifecycle"), held
        there by a terminate hook for up to its HeartbeatTimeout while no drain may have cordoned it; and
        so is one whose instance stops in its warm pool (:attr:`pool_stopping`): a pod bound there does
        not run."""
        return (
            self.info.ready
            and not self.info.deleting
            and not self.terminating
            and not self.pool_stopping
            and self.starting is None
            and not self.info.unschedulable
            and not has_taint(self.info, DRAINING_TAINT)
        )


_WORK_NODE_FIELDS = tuple(f.name for f in fields(WorkNode))


_work_node_values = attrgetter(*_WORK_NODE_FIELDS)  # every field's value, in the constructor's order


def with_own_free(node: WorkNode) -> WorkNode:
    """``replace(node, free=dict(node.free))``: every other field is shared, as replace shares it,
    without replace's checks (consolidation copies every schedulable node a plan)."""
    copy = WorkNode(*_work_node_values(node))
    copy.free = dict(node.free)
    return copy


def shape_of(info: NodeInfo) -> tuple[Any, ...]:
    """Nodes with equal shapes are equal for every constraint that does not name a node
    (:meth:`NodeInfo.shape`, made once a node)."""
    return info.shape()


def has_taint(info: NodeInfo, key: str) -> bool:
    # a loop, not any() over a generator (twice as fast): asked of every node several times a plan
    for taint in info.taints:  # noqa: SIM110
        if taint[0] == key:
            return True
    return False


def without_taint(info: NodeInfo, key: str) -> NodeInfo:
    if not has_taint(info, key):
        return info
    return replace(info, taints=tuple(t for t in info.taints if t[0] != key))


def region_ranks(config: PlannerConfig, groups: Sequence[NodeGroup]) -> dict[str, int]:
    """Configured regions first, in order; then any other region of a group, by name."""
    regions = list(config.regions)
    extra = sorted({g.region for g in groups} - set(regions))
    return {r: i for i, r in enumerate(regions + extra)}


def first_regions(config: PlannerConfig, groups: Sequence[NodeGroup]) -> dict[str, str]:
    """Per group name, the first region (:func:`region_ranks`) with a group of that name Spillway scales
    (no :attr:`NodeGroup.refusal`): what an entry of the stored state keyed by name alone, written before
    groups were keyed by region, is of (:func:`spillway.model.state.keyed_by_region`)."""
    rank = region_ranks(config, groups)
    out: dict[str, str] = {}
    for g in sorted((g for g in groups if not g.refusal), key=lambda g: (rank[g.region], g.region)):
        out.setdefault(g.name, g.region)
    return out


class Context:
    """One plan's inputs, working copies and decisions so far."""

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        groups: Sequence[NodeGroup],
        config: PlannerConfig,
        state: State,
        now: datetime,
        *,
        stale: Mapping[GroupKey, int] | None = None,
        unhealthy: Sequence[Unhealthy] = (),
        starting: Mapping[str, str] | None = None,
        refused: Sequence[NodeGroup] = (),
    ) -> None:
        self.snapshot = snapshot
        self.groups: list[NodeGroup] = sorted(groups, key=lambda g: (g.region, g.name))
        # managed groups the plan does not scale (NodeGroup.refusal): not among groups, so their nodes are
        # unmanaged (kept, never drained) and nothing launches in them; named where a pod or node asks why
        self.refused: list[NodeGroup] = sorted(refused, key=lambda g: (g.region, g.name))
        self.refused_by_instance: dict[str, NodeGroup] = {i: g for g in self.refused for i in g.instance_ids}
        # instances in a group's warm pool (outside the group): a Node of one is unmanaged, named so
        self.pooled_by_instance: dict[str, NodeGroup] = {
            i: g for g in (*self.groups, *self.refused) for i in g.pooled_instances
        }
        self.config = config
        self.state = state
        self.now = now
        # durations of the cluster's configuration, made once a plan rather than once a node
        self.launch_delay = timedelta(minutes=config.scale_down_delay_after_launch_minutes)
        self.drain_claim = timedelta(minutes=config.drain_claim_minutes)
        self.region_rank = region_ranks(config, self.groups)
        self.primary: str | None = config.regions[0] if config.regions else None
        self.nodes: dict[str, WorkNode] = _work_nodes(
            snapshot.nodes, self.groups, starting or {}, [*self.groups, *self.refused]
        )
        self.pending: list[PodInfo] = []  # pending, unschedulable pods, in snapshot order
        self.gated: list[PodInfo] = []  # unbound pods held by scheduling gates
        self.ds_representatives: dict[tuple[str, str], PodInfo] = {}  # one pod per DaemonSet
        # node -> its DaemonSet and mirror pods not finished nor being deleted: what a fresh node of its
        # group runs too (spillway.planner.groups.fresh_node_overhead)
        self.node_daemons: dict[str, list[PodInfo]] = {}
        self.provreqs: dict[str, ProvisioningRequestInfo] = {r.key: r for r in snapshot.provreqs}
        # a volume a CSI attach limit counts -> the nodes whose bound pods use it (or a VolumeAttachment
        # holds it: NodeInfo.attached), and how many of a node's pods (and that attachment) use it
        self.volume_nodes: dict[str, set[str]] = {}
        self.volume_users: dict[tuple[str, str], int] = {}  # (node, volume) -> its pods that use it
        self._group_configs: dict[GroupKey, PlannerConfig] = {}  # group -> config_for(group)
        self._index_pods(snapshot.pods)
        self.nominated: list[PodInfo] = _nominated(
            self.pending, self.nodes, config.expendable_priority_cutoff
        )
        self.topology = TopologyIndex({name: n.info for name, n in self.nodes.items()}, snapshot.pods)
        self.ready_in_group: dict[GroupKey, int] = _ready_per_group(self.nodes.values())
        # group -> its Ready nodes its own replacements are for (NodeGroup.coming)
        self.replaced_in_group: dict[GroupKey, int] = _replaced_per_group(self.nodes.values(), now)
        # + of a group carried from an earlier read, the nodes that joined since it (planner.unread)
        listed = self.refused_by_instance.keys() | self.pooled_by_instance.keys()  # in a group all the same
        self.ready_in_group = _joined_since_read(
            self.nodes.values(), self.groups, self.ready_in_group, self.replaced_in_group, listed
        )
        self.stale: Mapping[GroupKey, int] = (
            stale or {}
        )  # group -> instances not capacity coming (planner.joins)
        # too many unready nodes (planner.health): the cluster's verdict, and each group's
        self.cluster_unhealthy = next((u for u in unhealthy if u.group is None), None)
        self.unhealthy: dict[GroupKey, Unhealthy] = {u.key: u for u in unhealthy if u.key is not None}
        # -- decisions --
        self.pending_out: list[PendingPod] = []
        self.placements: list[Placement] = []
        self.planned = Planned()  # where this plan places and moves pods, for the pod topology of the rest
        self.uncordoned: dict[str, GroupKey] = {}  # node -> group
        self.new_pods: dict[GroupKey, list[str]] = {}  # group -> pods on new nodes
        self.new_nodes: dict[GroupKey, int] = {}  # group -> nodes this plan launches
        self.overflow_notes: dict[GroupKey, set[str]] = {}  # group -> why better groups were skipped
        # group -> nodes on their way out its new nodes' pods would fit (planner.scaleup.leaving_clause)
        self.leaving_notes: dict[GroupKey, set[str]] = {}
        # group -> clauses for the empty nodes it opens for a coscheduling gang's minResources
        self.room_notes: dict[GroupKey, set[str]] = {}
        # gang -> its coscheduling minResources and its own placed requests (planner.minresources), and
        # once scale-up ends what the plan's free room has beyond it: scale-down takes it no lower
        self.min_room_wanted: dict[str, tuple[Resources, Resources]] = {}
        self.min_room_slack: dict[str, Resources] = {}
        self.gang_nodes: dict[tuple[GroupKey, str], int] = {}  # (group, gang) -> new nodes for the gang
        self.gang_pods: dict[tuple[GroupKey, str], list[str]] = {}  # (group, gang) -> its pods on them
        self.gang_zones: dict[
            tuple[GroupKey, str], str
        ] = {}  # (group, gang) -> zone (multi-zone fleet group)
        self.gangs_out: dict[str, GangState] = {}  # gang -> its atomic launch under way (next state)
        self.minimum_gangs: set[str] = set()  # gangs placed with only the pods they need to start
        # pending pod -> (code, why) it takes free room only (planner.shrinks, planner.classes.held_young)
        self.free_only: dict[str, tuple[str, str]] = {}
        self.gangs: Gangs | None = None  # the pending pods' gangs, once pod_classes read them
        self.shrunk_out: dict[str, int] = {}  # elastic job -> workers this plan's drains take (next state)
        self.gang_labels: dict[str, dict[str, str]] = {}  # gang -> labels its new nodes get (requests)
        # gangs whose new nodes all come from one node group (best-effort-atomic ProvisioningRequests)
        self.one_group: set[str] = set()
        self.movable: dict[str, str | None] = {}  # pending pod -> why it may not move (None: it may)
        self.floors: dict[GroupKey, Floor | None] = {}  # group -> its scheduled MinSize floor (groups.py)
        self.ceilings: dict[
            GroupKey, Floor | None
        ] = {}  # group -> the size an action lowers it to (groups.py)
        # (group, sure) -> per pod a fresh node runs first, the pod topology terms that select it (groups.py)
        self.fresh_selected: dict[tuple[GroupKey, bool], tuple[frozenset[int], ...]] = {}
        self.fresh_unsure: dict[GroupKey, tuple[frozenset[int], ...]] = {}  # ... those on some variants only
        # a launching node of a group over several zones or types -> the labels it registers with, in
        # the zone and of the type Auto Scaling launched it in (placement.launching_bins)
        self.launching_labels: dict[str, Mapping[str, str]] = {}
        # per group, the room left on its nodes launching (placement.launching_bins: the scale-up's, as
        # its trials leave them); a pod nominated to a registered one takes its room there
        # (charge_nominated)
        self.launching_bins: dict[GroupKey, list[Bin]] = {}
        self.buffer_pods: dict[str, BufferInfo] = {}  # virtual pod of a capacity buffer -> its buffer
        self.buffer_room: dict[str, dict[str, int]] = {}  # node -> buffer key -> buffer pods it holds
        # each active buffer, by key: the chunks planned as virtual pods (planner.buffers._room_bound), and
        # the pending code and reason of those past them, which are never planned
        self.buffer_plans: list[tuple[BufferInfo, int, tuple[str, str]]] = []
        # a planned virtual pod left unplaced -> the pending code and reason it got (planner.buffers.settle)
        self.buffer_left: dict[str, tuple[str, str]] = {}
        self._priorities: dict[GroupKey, float] = {}  # group -> group_priority(group)
        self._label_keys: dict[GroupKey, frozenset[str]] | None = None  # group -> group_label_keys(group)

    def launching(self, group: NodeGroup, launched_only: bool = False) -> int:
        """The group's nodes still launching: its desired capacity (and the instances it runs above it
        for Ready nodes that give their room up to them: :meth:`NodeGroup.coming`) less its Ready nodes
        (a node still starting is not one: :mod:`spillway.planner.startup`), less the instances that are
        no longer expected to join (:mod:`spillway.planner.joins`). With its Launch process suspended,
        only the instances it has may still come; with ``launched_only`` (its launches fail:
        :func:`spillway.planner.groups.launched_only`) too, none of its desired capacity above them."""
        key = group.key
        coming = group.coming(self.replaced_in_group.get(key, 0))
        if launched_only:
            coming = min(coming, len(group.instance_ids))
        return coming - self.ready_in_group.get(key, 0) - self.stale.get(key, 0)

    def unready_long(self, node: WorkNode) -> bool:
        """The node has been NotReady for its group's ``scale_down_unready_minutes``: a pod that never
        started on it is no work (spillway.planner.disruption.dead)."""
        if node.info.ready:  # most nodes: no window to make (dead holds only for a NotReady node)
            return False
        limit = self.config_for(node.group).scale_down_unready_minutes
        return dead(node.info, self.now, timedelta(minutes=limit))

    def config_for(self, group: NodeGroup | None) -> PlannerConfig:
        """The configuration for ``group``'s nodes: its autoscaling-options tags override the cluster's
        (:mod:`spillway.model.options`)."""
        if group is None or not group.options:
            return self.config
        found = self._group_configs.get(group.key)
        if found is None:
            found = self._group_configs[group.key] = self.config.with_options(group.options)
        return found

    def group_priority(self, group: NodeGroup) -> float:
        """The group's rank by ``expander_priorities``, else by cluster-autoscaler's priority expander
        ConfigMap observe read (higher first; -inf for a group none matches)."""
        found = self._priorities.get(group.key)
        if found is None:
            ranks = self.config.expander_priorities or self.snapshot.expander_priorities
            priority = priority_of(ranks, group.name)
            found = self._priorities[group.key] = float("-inf") if priority is None else float(priority)
        return found

    def group_label_keys(self, group: NodeGroup) -> frozenset[str] | None:
        """The label keys any node of ``group`` carries, whatever their values: a key its template
        leaves out as its nodes differ in it (a rack a labeller sets) comes with its next node too.
        None (not known) for a group whose template was remembered from a node gone (model.nodecache):
        the memory keeps the labels its nodes shared, not the keys whose values differed."""
        if group.template is not None and group.template.learned_at is not None:
            return None
        if self._label_keys is None:
            found: dict[GroupKey, set[str]] = {}
            for node in self.nodes.values():
                if node.group is not None:
                    found.setdefault(node.group.key, set()).update(node.info.labels)
            self._label_keys = {key: frozenset(keys) for key, keys in found.items()}
        return self._label_keys.get(group.key, frozenset())

    def region_key(self, group: NodeGroup) -> int:
        return self.region_rank.get(group.region, len(self.region_rank))

    def record(self, pods: Iterable[str], node: str, group: GroupKey | None, note: str, code: str) -> None:
        """Pending pods that run on ``node`` without a new node of their own."""
        for pod in pods:
            self.placements.append(Placement(pod, node, group))
            self.pending_out.append(PendingPod(pod, note, code))

    def charge_nominated(self, priority: int | None = None) -> None:
        """Charge each pending pod nominated to a node (preemption under way there) of ``priority`` or
        higher, every one when None, to that node's free room, once: its requests and pod slot, and one
        pod the node receives (so it is not drained from under it). kube-scheduler adds the nominated
        pods of equal or higher priority to a node when it filters the node for a pod
        (addGENominatedPods), and cluster-autoscaler adds every one to its snapshot on its node before
        it packs the other pending pods. Placing pods in descending priority and charging before each,
        a pod of higher priority than a nominated pod may take its room, as kube-scheduler lets it.
        Its volumes the node's pods use already take none of its attach limits (:meth:`nominated_requests`),
        and its volumes are the node's from then on (:meth:`note_volumes`): kube-scheduler counts them
        among the node's when it filters the node for a pod of lower priority."""
        while self.nominated and (priority is None or self.nominated[-1].priority >= priority):
            pod = self.nominated.pop()
            node = self.nodes[pod.nominated or ""]
            room = self._nominated_room(node)
            add_room(room, self.nominated_requests(pod), -1)
            room[PODS] = room.get(PODS, 0) - ONE_POD
            node.receives += 1
            self.note_volumes(node.info.name, pod.volumes)

    def _nominated_room(self, node: WorkNode) -> Resources:
        """The free room a pod nominated to ``node`` takes: for a registered node still launching, the
        room of the launching bin it is (:attr:`Bin.node`; placement places pods there, not on the
        node), else the node's."""
        name = node.info.name
        bins = self.launching_bins.get(node.group.key, ()) if node.group is not None else ()
        return next((one.free for one in bins if one.node == name), node.free)

    @contextmanager
    def nominated_withheld(self) -> Iterator[None]:
        """While the block runs, the room of every nominated pod not charged yet is out of its node's
        free room, whatever its priority; it is given back after (what the block took stays taken).
        Room reserved for pods that come later (a ProvisioningRequest's booking: its pods are created
        once Kueue admits the workload) is placed here: a preemptor binds as soon as its victims are
        gone, before any of them. cluster-autoscaler adds every pod waiting on a preemption to its
        snapshot (core/podlistprocessor/filter_out_expendable.go, addPreemptingPodsToSnapshot) before
        its ProvisioningRequest processor books capacity (processors/provreq/processor.go,
        bookCapacity, a pod list processor added after the default ones). The pending pods still meet
        the nominated pods by priority (:meth:`charge_nominated`), as kube-scheduler lets them."""
        held = [(self.nodes[pod.nominated or ""], self.nominated_requests(pod)) for pod in self.nominated]
        _withhold(held, -1)
        try:
            yield
        finally:
            _withhold(held, 1)  # what was taken, whatever volumes the block put on the nodes

    def nominated_requests(self, pod: PodInfo) -> Resources:
        """What a pod nominated to a node takes there: its requests, less the attach limits' share of
        its volumes the node's pods use already (:meth:`attached`), as for a pending pod placed on an
        existing node: kube-scheduler adds the nominated pod to the node it filters
        (addGENominatedPods), and NodeVolumeLimits counts each volume of the node's pods once
        (nodevolumelimits/csi.go, Filter)."""
        less = self.volumes_on(pod.nominated or "", pod.volumes)
        return {k: v - less.get(k, 0) for k, v in pod.requests.items()} if less else pod.requests

    def _index_pods(self, pods: Sequence[PodInfo]) -> None:
        jobs = self.snapshot.jobs_by_key()
        dead_nodes: dict[str, bool] = {}  # node -> unready_long(node), judged once, not once a pod
        for pod in pods:
            if pod.daemonset and pod.owner_name:
                self._note_daemonset(pod, pod.owner_name)
            if pod.terminal:
                continue
            if pod.node_name is not None:
                node = self.nodes.get(pod.node_name)
                if node is not None:
                    _charge(node, pod, self.config.expendable_priority_cutoff)
                    self._note_volumes(node, pod)
                    dead_node = dead_nodes.get(pod.node_name)
                    if dead_node is None:
                        dead_node = dead_nodes[pod.node_name] = self.unready_long(node)
                    self._keep_busy(node, pod, jobs, dead_node)
                    self._note_victim(node, pod)
                if (pod.daemonset or pod.mirror) and not pod.terminating:
                    self.node_daemons.setdefault(pod.node_name, []).append(pod)
            elif pod.is_pending_unschedulable():
                self.pending.append(pod)
            elif pod.gated and not pod.daemonset:
                self.gated.append(pod)
        for node in self.nodes.values():
            self._note_attached(node)
            self.share_victims(node)
            node.free = room_less(node.info.allocatable, node.used)
            node.victims.sort(key=lambda v: (v.priority, v.pod))

    def _note_volumes(self, node: WorkNode, pod: PodInfo) -> None:
        """The volumes of a pod bound to ``node``: one another pod there uses already is charged to the
        node once (the pod's requests count each of its own)."""
        name = node.info.name
        for volume in pod.volumes:
            self.volume_nodes.setdefault(volume, set()).add(name)
            users = self.volume_users[(name, volume)] = self.volume_users.get((name, volume), 0) + 1
            if users > 1:
                key = attach_limit_key(volume.partition("/")[0])
                node.used[key] = node.used.get(key, 0) - 1000

    def _note_attached(self, node: WorkNode) -> None:
        """The volumes a VolumeAttachment holds on ``node`` that none of its pods uses
        (:attr:`NodeInfo.attached`): each takes one of its attach limit, and is the node's, so a pod
        of it brings the node no new volume (kube-scheduler counts them with the volumes of the node's
        pods, and takes them out of a pod's new volumes: csi.go, Filter)."""
        name = node.info.name
        for volume in node.info.attached:
            self.volume_nodes.setdefault(volume, set()).add(name)
            self.volume_users[(name, volume)] = self.volume_users.get((name, volume), 0) + 1
            key = attach_limit_key(volume.partition("/")[0])
            node.used[key] = node.used.get(key, 0) + 1000

    def share_victims(self, node: WorkNode, volume: str | None = None) -> None:
        """A victim's preemption gives its node back its requests but the volumes another pod there
        uses (:meth:`shared_share`): reckoned again for the node's victims (those using ``volume`` when
        given) as the pods that use its volumes come and go."""
        name = node.info.name
        node.victims = [
            v
            if not v.volumes or (volume is not None and volume not in v.volumes)
            else self._victim_share(name, v)
            for v in node.victims
        ]

    def _victim_share(self, name: str, victim: Victim) -> Victim:
        less: Resources = {}
        for volume in victim.volumes:
            if self.volume_users.get((name, volume), 0) > 1:
                key = attach_limit_key(volume.partition("/")[0])
                less[key] = less.get(key, 0) + 1000
        return replace(victim, requests={k: v - less.get(k, 0) for k, v in victim.full.items()})

    def shared_share(self, pod: PodInfo) -> Resources:
        """How much of each attach limit a bound pod's leaving does not give its node back: one for each
        of its volumes another pod there uses (it stays attached; csi.go Filter counts the volumes of
        the node's pods). A make room's move and a preemption free the rest."""
        out: Resources = {}
        for volume in pod.volumes:
            if self.volume_users.get((pod.node_name or "", volume), 0) > 1:
                key = attach_limit_key(volume.partition("/")[0])
                out[key] = out.get(key, 0) + 1000
        return out

    def leaving_share(self, pods: Sequence[PodInfo]) -> Resources:
        """What bound ``pods`` of one node give it back when they leave together: their requests, less
        each volume another pod there keeps using (:meth:`shared_share`); a volume only they use, shared
        between them, is freed once."""
        out: Resources = {}
        for pod in pods:
            add_into(out, pod.requests)
            add_room(out, self.shared_share(pod), -1)
        if not any(pod.volumes for pod in pods):  # most pods: no volume to count (make room asks often)
            return out
        together = Counter((pod.node_name or "", v) for pod in pods for v in pod.volumes)
        for (name, volume), users in together.items():
            if users > 1 and self.volume_users.get((name, volume), 0) == users:
                key = attach_limit_key(volume.partition("/")[0])
                out[key] = out.get(key, 0) + 1000
        return out

    def arriving_share(self, pods: Sequence[PodInfo], name: str | None = None) -> Resources:
        """What ``pods`` placed together on one node take of it: their requests, a volume they share
        counted once, and none for a volume node ``name`` (when given) has already. kube-scheduler
        counts a volume of the node's pods once and takes it out of a pod's new volumes (csi.go,
        Filter), so once the first of them is bound the volume is no new one for the others."""
        out: Resources = {}
        for pod in pods:
            add_into(out, pod.requests)
        if not any(pod.volumes for pod in pods):  # most pods: no volume to count (make room asks often)
            return out
        for volume, users in Counter(v for pod in pods for v in pod.volumes).items():
            there = name is not None and self.volume_users.get((name, volume), 0) > 0
            less = users - 1 + int(there)
            if less:
                key = attach_limit_key(volume.partition("/")[0])
                out[key] = out.get(key, 0) - 1000 * less
        return out

    def volumes_on(self, name: str, volumes: Iterable[str]) -> Resources:
        """How much less of each CSI attach limit a pod using ``volumes`` takes on node ``name``: one for
        each of them the node has already (its pods use it, or pods this plan put there:
        :meth:`note_volumes`). kube-scheduler's NodeVolumeLimits takes those out of the pod's new volumes
        (pkg/scheduler/framework/plugins/nodevolumelimits/csi.go, Filter), so a rolling update's pod may
        follow its ReadWriteOnce volume onto a node at its limit, and a pod of a shared (ReadWriteMany)
        volume onto any node that uses it."""
        out: Resources = {}
        for volume in volumes:
            if self.volume_users.get((name, volume), 0) > 0:
                key = attach_limit_key(volume.partition("/")[0])
                out[key] = out.get(key, 0) + 1000
        return out

    def note_volumes(self, name: str, volumes: Iterable[str], pods: int = 1) -> None:
        """``pods`` pods this plan puts on node ``name`` (pending pods placed or nominated there, pods
        moved there) use ``volumes``: the node has them for the pods placed after (kube-scheduler counts
        the volumes of every pod on the node, the nominated ones of equal or higher priority among
        them, once), and a pod of the node that leaves frees none of them. A victim that was their only
        user frees them no more when preempted."""
        node = self.nodes.get(name)
        for volume in volumes:
            self.volume_users[(name, volume)] = self.volume_users.get((name, volume), 0) + pods
            self.volume_nodes.setdefault(volume, set()).add(name)
            if node is not None:
                self.share_victims(node, volume)

    def volumes_left(self, name: str, volumes: Iterable[str]) -> None:
        """A pod using ``volumes`` leaves node ``name`` (preempted, moved): a volume no other pod there
        uses is the node's no more."""
        node = self.nodes.get(name)
        for volume in volumes:
            users = self.volume_users.pop((name, volume), 0) - 1
            if users > 0:
                self.volume_users[(name, volume)] = users
            elif (nodes := self.volume_nodes.get(volume)) is not None:
                nodes.discard(name)
                if not nodes:
                    del self.volume_nodes[volume]
            if node is not None:
                self.share_victims(node, volume)

    def _keep_busy(self, node: WorkNode, pod: PodInfo, jobs: Mapping[str, JobInfo], dead_node: bool) -> None:
        """Whether the bound ``pod`` keeps its node busy: workload, or an expendable pod its node's drain
        evicts (:func:`spillway.planner.disruption.goes_with_its_node`). On a node NotReady past its
        ``scale_down_unready_minutes`` (:func:`~spillway.planner.disruption.dead`) a pod that never
        started keeps it from nothing: it is noted in ``never_started``. ``dead_node``: :meth:`unready_long`
        of ``node``."""
        if not keeps_node_busy(pod, self.now, dead_node=dead_node):
            if dead_node and never_started(pod):
                node.never_started.append(pod.key)
            return
        if pod.priority < self.config.expendable_priority_cutoff and goes_with_its_node(
            pod, self.snapshot.pdb_allowance(pod), self.now, jobs
        ):
            node.expendable.append(pod)
        else:
            node.workload += 1
            if node.info.kubelet_not_ready and never_started(pod):
                node.unstarted += 1

    def _note_victim(self, node: WorkNode, pod: PodInfo) -> None:
        """A bound expendable pod whose room a pending pod of higher priority may take: one kube-scheduler
        may preempt, or one being deleted already (its room comes free by itself; nominated pods, which
        may be waiting for it, are charged before any of this room is given), but not a static pod's
        mirror (the kubelet runs a static pod whatever becomes of its mirror). cluster-autoscaler leaves
        every scheduled expendable pod, terminating or not, out of the snapshot it scales up on
        (FilterOutExpendablePods), and kube-scheduler reads none of the annotations that keep a pod from
        a drain."""
        if pod.priority >= self.config.expendable_priority_cutoff or pod.mirror:
            return
        allowance = self.snapshot.pdb_allowance(pod)
        requests = {**pod.requests, PODS: pod.requests.get(PODS, 0) + ONE_POD}
        guarded = allowance is not None and allowance <= 0
        node.victims.append(Victim(pod.key, pod.priority, requests, guarded, pod.volumes, requests))

    def _note_daemonset(self, pod: PodInfo, owner: str) -> None:
        rep_key = (pod.namespace, owner)
        current = self.ds_representatives.get(rep_key)
        if current is None or pod.key < current.key:
            self.ds_representatives[rep_key] = pod


def _work_nodes(
    nodes: Iterable[NodeInfo],
    groups: Iterable[NodeGroup],
    starting: Mapping[str, str],
    every_group: Iterable[NodeGroup] = (),
) -> dict[str, WorkNode]:
    by_instance = {iid: g for g in groups for iid in g.instance_ids}
    terminating = {iid for g in every_group for iid in g.terminating_instances}
    stopping = {iid for g in every_group for iid in g.pooled_instances if not g.pooled_runs(iid)}
    out: dict[str, WorkNode] = {}
    for info in sorted(nodes, key=lambda n: n.name):
        instance = info.instance_id
        group = by_instance.get(instance) if instance else None
        out[info.name] = WorkNode(
            info=info,
            group=group,
            shape=shape_of(info),
            starting=starting.get(info.name),
            terminating=instance in terminating,
            pool_stopping=instance in stopping,
        )
    return out


def _nominated(pending: Iterable[PodInfo], nodes: Mapping[str, WorkNode], cutoff: int) -> list[PodInfo]:
    """The pending pods nominated to a node of the cluster (status.nominatedNodeName), lowest priority
    first (:meth:`Context.charge_nominated` takes them from the end). An expendable one is left out, as
    cluster-autoscaler leaves it: every pod the plan places outranks it, so kube-scheduler would not
    count it against them either."""
    found = [p for p in pending if nominated_to(p, nodes) is not None and p.priority >= cutoff]
    return sorted(found, key=lambda p: (p.priority, p.key))


def nominated_to(pod: PodInfo, nodes: Mapping[str, WorkNode]) -> WorkNode | None:
    """The node ``pod`` is nominated to (status.nominatedNodeName) while kube-scheduler may still place it
    there: the node exists, is not cordoned for it (NodeUnschedulable) and has no NoSchedule or
    NoExecute taint it does not tolerate (TaintToleration: a drain's taint, cluster-autoscaler's
    ToBeDeletedByClusterAutoscaler). A nomination to a node gone (cluster-autoscaler's
    FilterOutExpendableAndSplit), or cordoned or tainted since, is no preemption under way: the pod is
    ordinary demand; so is one to a Node whose instance stops in its warm pool (:attr:`WorkNode
    .pool_stopping`): kube-scheduler may still place the pod there while the Node stays Ready, but it
    never runs there; and one to a Node whose instance its group terminates (:attr:`WorkNode
    .terminating`), which holds no room for pods either (:attr:`WorkNode.schedulable`)."""
    node = nodes.get(pod.nominated) if pod.nominated else None
    if node is None or node.pool_stopping or node.terminating:
        return None
    if not admits(node.info.unschedulable, node.info.taints, pod.tolerations):
        return None
    return node


def cordon_bound(node: WorkNode, config: PlannerConfig) -> timedelta:
    """How long Spillway's cordon on the node may be its drain's (``orphaned_drain_minutes``), or its
    give-back's (:data:`~spillway.model.k8s.GIVE_BACK_LEASE_MINUTES`)."""
    if node.info.cordon_give_back:
        return timedelta(minutes=GIVE_BACK_LEASE_MINUTES)
    if awaits_replacement(node):
        return timedelta(minutes=REPLACEMENT_WAIT_MINUTES)
    return timedelta(minutes=config.orphaned_drain_minutes)


def awaits_replacement(node: WorkNode) -> bool:
    """Whether the node is an at-risk Spot instance a rebalance recommendation's drain emptied for its
    group to replace (:attr:`NodeInfo.cordon_rebalance`), its drain done (no pod that keeps it busy is
    left) and the group not terminating it yet. Such a cordon is the drain's for
    :data:`~spillway.model.k8s.REPLACEMENT_WAIT_MINUTES` only: a group at or near its MaxSize, or with no
    Spot capacity in another pool, launches no replacement (Auto Scaling User Guide, "Capacity
    Rebalancing behavior"), nor one whose Capacity Rebalancing was turned off since ("If Capacity
    Rebalancing is disabled, proactive replacement of at-risk Spot Instances does not occur",
    UpdateAutoScalingGroup), and the node stayed cordoned, empty and paid for until
    ``orphaned_drain_minutes``. After that wait it is an orphan: given back (a rebalance recommendation is
    advice, and the node still works) or, unneeded, drained as any idle node. Not a Spot warning's drain:
    EC2 reclaims that instance two minutes after the warning, and there is nothing to give back."""
    return (
        node.info.cordon_rebalance and node.group is not None and node.workload == 0 and not node.terminating
    )


def replacement_due(info: NodeInfo, now: datetime) -> bool:
    """Whether the group's replacement of a node a notice's drain holds (:attr:`NodeInfo.cordon_replaced`)
    may still come: its cordon is younger than :data:`~spillway.model.k8s.REPLACEMENT_WAIT_MINUTES` (or
    of no known time, as before). The group launches at the notice; a replacement that launched is
    bounded on its own by :mod:`spillway.planner.joins` (``max_node_provision_minutes``, 15, as
    cluster-autoscaler's ``--max-node-provision-time``). After the wait the plan gives a rebalance
    recommendation's node back, its room restored, and an instance the group runs above its desired
    capacity is not that node's replacement: counting both counted one node twice."""
    at = info.cordoned_at
    return at is None or now - aware(at) < timedelta(minutes=REPLACEMENT_WAIT_MINUTES)


def orphaned_cordon(node: WorkNode, state: State, config: PlannerConfig, now: datetime) -> bool:
    """Spillway's cordon on the node is older than any drain (a give-back's: than its give-back,
    :meth:`NodeInfo.giving_back`), and no recent plan claimed its drain: no drain owns it, and the
    scale-down restores or drains it anew."""
    info = node.info
    if not (info.unschedulable and info.cordoned_by_spillway):
        return False
    if info.cordon_give_back and not info.giving_back(now):
        return True  # a give-back's cordon past its lease, or of a time not known
    if info.cordoned_at is None:
        return False
    bound = cordon_bound(node, config)
    previous = state.nodes.get(info.name)
    claimed = aware(previous.draining_since) if previous and previous.draining_since else None
    return now - aware(info.cordoned_at) >= bound and (claimed is None or now - claimed >= bound)


def _withhold(held: Iterable[tuple[WorkNode, Resources]], sign: int) -> None:
    for node, requests in held:
        add_room(node.free, requests, sign)
        node.free[PODS] = node.free.get(PODS, 0) + sign * ONE_POD


def _charge(node: WorkNode, pod: PodInfo, cutoff: int) -> None:
    """A pod bound to ``node``: its requests and its pod slot; ``cutoff``: expendable_priority_cutoff."""
    add_into(node.used, pod.requests)
    node.used[PODS] = node.used.get(PODS, 0) + ONE_POD
    if pod.daemonset:
        add_into(node.daemon_used, pod.requests)
        node.daemon_used[PODS] = node.daemon_used.get(PODS, 0) + ONE_POD
    elif pod.priority < cutoff:
        add_into(node.expendable_used, pod.requests)


def _replaced_per_group(nodes: Iterable[WorkNode], now: datetime) -> dict[GroupKey, int]:
    """Per group with Capacity Rebalancing, its Ready nodes (counted in :func:`_ready_per_group`) that the
    drain of a Spot warning or a rebalance recommendation of their instance holds
    (:attr:`NodeInfo.cordon_replaced`): the at-risk instances Spillway empties without terminating for
    the group to replace (:mod:`spillway.act.interrupt`). Their room is no room, their pods wait, and
    the instance the group launches for each is theirs. Not another drain no plan started (an
    operator's, a scheduled change's): the group launches a replacement on those two notices only
    (Auto Scaling User Guide, "Use Capacity Rebalancing to handle Amazon EC2 Spot Interruptions"), and
    counting one took an instance the group runs above its desired capacity for another cause (an
    instance refresh launching before it terminates, a protected node's replacement) for room. Only
    while the replacement may still come (:func:`replacement_due`), or in the plan that gives the node
    back (:func:`awaits_replacement`, its wait over): that plan's scale-up runs before the give-back
    and does not see the node's room, and not counting the replacement there launched a node for the
    pods waiting for it, beside the replacement and the restored node. The next plan sees the node
    uncordoned and counts its own room instead."""
    out: dict[GroupKey, int] = {}
    for node in nodes:
        group, info = node.group, node.info
        if group is None or not group.capacity_rebalance or not info.ready or node.starting is not None:
            continue
        if (
            info.unschedulable
            and info.cordoned_by_spillway
            and info.cordon_replaced
            and (replacement_due(info, now) or awaits_replacement(node))
        ):
            out[group.key] = out.get(group.key, 0) + 1
    return out


def _joined_since_read(
    nodes: Iterable[WorkNode],
    groups: Iterable[NodeGroup],
    ready: Mapping[GroupKey, int],
    replaced: Mapping[GroupKey, int],
    listed: Collection[str],
) -> dict[GroupKey, int]:
    """``ready`` with, for each group carried from an earlier read (its region's read failed:
    :mod:`spillway.planner.unread`), the Ready nodes it launched since that read, which the read cannot
    list: Ready and started, in no group (nor of an instance ``listed`` by a refused group or a warm
    pool), of its region, a zone and a type it launches, registered after the read and not Karpenter's
    nor another EKS node group's nor labelled against the group's template (:func:`launched_since_read`), each counted for the first such group
    (by key) that still has nodes coming. Without
    them a raise made after the read (counted while the group is carried: :mod:`spillway.planner.raises`)
    stayed capacity coming once its nodes had joined, and pods waited on it."""
    carried = sorted((g for g in groups if g.read_at is not None), key=attrgetter("key"))
    if not carried:
        return dict(ready)
    out = dict(ready)
    for node in nodes:
        if node.group is not None or not node.info.ready or node.starting is not None:
            continue
        if (node.info.instance_id or "") in listed:
            continue
        for group in carried:
            if launched_since_read(group, node.info) and group.coming(replaced.get(group.key, 0)) > out.get(
                group.key, 0
            ):
                out[group.key] = out.get(group.key, 0) + 1
                break
    return out


def launched_since_read(group: NodeGroup, info: NodeInfo) -> bool:
    """Whether ``info`` may be a launch of ``group`` (carried) its read did not see: of its region, in a
    zone of it (Auto Scaling launches only in the group's AvailabilityZones) and a type it launches,
    registered after the read, and no other launcher's node (:func:`_launched_elsewhere`)."""
    created, read = info.created_at, group.read_at
    zone = info.labels.get(ZONE_LABEL)
    return (
        created is not None
        and read is not None
        and aware(created) > aware(read)
        and info.labels.get(REGION_LABEL) == group.region
        and (zone is None or not group.zones or zone in group.zones)
        and info.labels.get(INSTANCE_TYPE_LABEL) in group.launch_types()
        and not _launched_elsewhere(group, info.labels)
    )


def _launched_elsewhere(group: NodeGroup, labels: Mapping[str, str]) -> bool:
    """Whether a node's ``labels`` name a launcher other than ``group``: Karpenter's NodePool (Karpenter
    launches into no Auto Scaling group), an EKS managed node group ``group`` is not (EKS labels its
    nodes with their node group's name, as the template of such a group carries it), or any label the
    group's template holds with another value. That template is what the group's next node registers
    with: its node-template tags, its EKS node group's labels, and the labels every Ready node of its own
    carried with one value at the read, but those of one node (spillway.model.livetemplate): a node of
    an Auto Scaling group Spillway does not manage (an eksctl self-managed node group's
    ``alpha.eksctl.io/nodegroup-name``, a kubelet ``--node-labels`` role) says so by a value of its own.
    The operating system is left out: a template without nodes only guesses ``linux``; so are the labels
    that describe what one node runs or how it was bought (:func:`spillway.model.livetemplate.node_detail`:
    a discovery agent's, the AMI, the purchase option), which two launches of the group may differ in."""
    if any(key in labels for key in KARPENTER_NODE_LABELS):
        return True
    template = group.template.labels if group.template is not None else {}
    eks = labels.get(EKS_NODEGROUP_LABEL)
    if eks is not None and eks != template.get(EKS_NODEGROUP_LABEL):
        return True
    return any(
        key in labels and labels[key] != value
        for key, value in template.items()
        if key not in OS_KEYS and not node_detail(key)
    )


def _ready_per_group(nodes: Iterable[WorkNode]) -> dict[GroupKey, int]:
    ready: dict[GroupKey, int] = {}
    for node in nodes:  # a node still starting is capacity launching (planner.startup)
        if node.group is not None and node.info.ready and node.starting is None:
            ready[node.group.key] = ready.get(node.group.key, 0) + 1
    return ready
