"""Stage 1: pending pods → equivalence classes, in the order scale-up serves them.

Pods the scheduler cannot tell apart (same requests, selector, affinity, tolerations, priority) form one
:class:`PodClass`; scale-up places a class at a time, higher priority first, then the biggest
requests (GPU, CPU, memory); capacity buffers' virtual pods come after every real pod. Expendable pods
(priority below ``expendable_priority_cutoff``) get their final reason here and never reach scale-up.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from spillway.model.cluster import PodInfo, TaintT, Term, TolerationT
from spillway.model.k8s import POD_SCALE_UP_DELAY
from spillway.model.nodegroup import NodeGroup
from spillway.model.provreq import PROVISIONED, TERMINAL, ProvisioningRequestInfo
from spillway.model.resources import (
    CPU,
    MEMORY,
    NVIDIA_GPU,
    PODS,
    Resources,
    add_room,
    attach_limit_key,
    fit_count,
)
from spillway.model.shared import GangInfo
from spillway.planner import codes
from spillway.planner.context import (
    ONE_POD,
    Context,
    WorkNode,
    aware,
    iso,
    minutes,
    nominated_to,
    orphaned_cordon,
)
from spillway.planner.groups import (
    TYPE_KEYS_SET_ON_LAUNCH,
    ZONE_KEYS_SET_ON_LAUNCH,
    has_spot,
    launch_labels,
    why_not_movable,
)
from spillway.planner.health import out_of_service
from spillway.planner.predicates import references_node_identity, why_not_placeable
from spillway.planner.topology import FREE, UNBOUNDED, Domains, Spot
from spillway.planner.types import PendingPod

ZONE_LABEL = ZONE_KEYS_SET_ON_LAUNCH[0]
TYPE_LABEL = TYPE_KEYS_SET_ON_LAUNCH[0]
_NO_TIME = datetime.min.replace(tzinfo=UTC)  # a class's creation time in its sort key when none is known
# in a group's refusal: it may launch a node the pod runs on, but a raise cannot ask for one
NOT_ASKABLE = "a raise cannot ask it for"


@dataclass(slots=True)
class PodClass:
    """Pending pods the scheduler cannot tell apart: same requests and constraints."""

    requests: Resources  # per pod, with its pod slot
    node_selector: tuple[tuple[str, str], ...]
    terms: tuple[Term, ...]
    tolerations: tuple[TolerationT, ...]
    priority: int
    pods: list[str]
    node_specific: bool  # a constraint names one node: judged per node, not per shape
    preempts: bool = True  # its preemptionPolicy is not Never: it may take expendable pods' room
    # a ProvisioningRequest's pods: the expendable pods below this priority make room for them, whatever
    # their own (:attr:`preempts_below`)
    preemption_floor: int | None = None
    tenant: str | None = None  # set only for a tenant with configured limits
    gang: str | None = None  # placed all or none with the other classes of its gang
    # the gang of its pods when that gang's minimum runs (Gangs.started): they are placed one by one,
    # but held while a recent plan's atomic launch of that gang may be under way
    started_gang: str | None = None
    # the coscheduling PodGroup with minResources of its pods when they are no gang placed all or none
    # (started, or minMember 1): placed one by one, with the room minResources asks (MemberPlacement)
    min_room_gang: str | None = None
    one_zone: bool = False  # a pod of the class asks its gang to share one zone
    buffer: str | None = None  # a capacity buffer's virtual pods (spillway.planner.buffers): served last
    # (code, why) its pods take free room only and launch nothing (planner.shrinks, held_young)
    free_only: tuple[str, str] | None = None
    domains: Domains = FREE  # pod anti-affinity and topology spread (spillway.planner.topology)
    next: int = 0  # pods before this index are placed
    # (topology key, domain) -> pods of the class this plan put there, for its counted rules' room; and
    # as it was when scale-up's current round began (the least loaded zone is taken from it)
    placed_in: dict[tuple[str, str], int] = field(default_factory=dict)
    settled: dict[tuple[str, str], int] = field(default_factory=dict)
    # (rule index, domain) -> the rule's ceiling there for the current round (settled: it holds)
    ceilings: dict[tuple[int, str], int] = field(default_factory=dict)
    opening: tuple[Mapping[str, str], ...] = ()  # template labels of the groups that may open nodes for it
    # why kube-scheduler places its pods on no node at all: a claim of theirs that is missing, being
    # deleted, bound to a volume the snapshot lacks, or not bound and binding at once
    # (PodInfo.volume_wait). A pending pod with one never gets here (code volume-unbound); a running
    # pod with one is refused every node when a move would re-place it (blocker)
    volume_wait: str | None = None
    # the volumes (a claim's yet to be made among them) every pod of the class uses that a node may
    # have (a node's pods or its VolumeAttachments hold them, or other pending pods use them): one takes
    # none of an attach limit on a node that has it already, and volume_nodes (Context.volume_nodes, which the plan's placements update) says which nodes have it
    volumes: tuple[str, ...] = ()
    volume_nodes: Mapping[str, Collection[str]] = field(default_factory=dict)
    # the earliest creationTimestamp of its pods (None: none known): breaks the last tie of sort_key
    created: datetime | None = None

    @property
    def remaining(self) -> int:
        return len(self.pods) - self.next

    def requests_on(self, node: str) -> Resources:
        """What a pod of the class takes on the existing node ``node``: its requests, less the attach
        limits' share of its :attr:`volumes` the node has already (its pods, or pods this plan put
        there, use them)."""
        less = self._on_node(node)
        if not less:
            return self.requests
        return {k: v - less.get(k, 0) for k, v in self.requests.items()}

    def brings_volumes(self, node: str) -> bool:
        """Whether a pod of the class brings ``node`` one of its :attr:`volumes` (the node has not got it
        yet): the pods of the class placed there after it find it there."""
        return any(node not in self.volume_nodes.get(v, ()) for v in self.volumes)

    def _on_node(self, node: str) -> Resources:
        less: Resources = {}
        for volume in self.volumes:
            if node in self.volume_nodes.get(volume, ()):
                key = attach_limit_key(volume.partition("/")[0])
                less[key] = less.get(key, 0) + 1000
        return less

    def requests_with(self, have: Collection[str]) -> Resources:
        """What a pod of the class takes on a node this plan launches or finds launching whose pods
        use the volumes ``have``: its requests, less the attach limits' share of its :attr:`volumes`
        among them."""
        less: Resources = {}
        for volume in self.volumes:
            if volume in have:
                key = attach_limit_key(volume.partition("/")[0])
                less[key] = less.get(key, 0) + 1000
        return {k: v - less.get(k, 0) for k, v in self.requests.items()} if less else self.requests

    def fit_with(self, free: Resources, limit: int, have: Collection[str] = ()) -> int:
        """How many pods of the class, at most ``limit``, a node with ``free`` room whose pods use the
        volumes ``have`` takes: the first brings it the class's :attr:`volumes` it has not got, and for
        the others they are the node's (kube-scheduler counts a volume of the node's pods once and
        takes it out of a pod's new volumes: csi.go Filter)."""
        first = self.requests_with(have)
        if limit <= 0 or all(v in have for v in self.volumes):
            return fit_count(first, free, limit)
        if fit_count(first, free, 1) == 0:
            return 0
        after = dict(free)
        add_room(after, first, -1)
        return 1 + fit_count(self.requests_with(self.volumes), after, limit - 1)

    def fit_on(self, node: str, free: Resources, limit: int) -> int:
        """:meth:`fit_with` on the existing node ``node``, whose volumes :attr:`volume_nodes` says: the
        first pod takes :meth:`requests_on` there, the others none of the class's volumes."""
        return self.fit_with(free, limit, [v for v in self.volumes if node in self.volume_nodes.get(v, ())])

    def charge_with(self, free: Resources, count: int, have: Collection[str] = ()) -> None:
        """Take ``count`` pods of the class out of ``free``, a node's room whose pods use ``have``, as
        :meth:`fit_with` counts them."""
        if count > 0:
            add_room(free, self.requests_with(have), -1)
            add_room(free, self.requests_with(self.volumes), -(count - 1))

    @property
    def least_requests(self) -> Resources:
        """The least a pod of the class takes on any existing node (:meth:`requests_on`): a bound on a
        pool's room is checked against it."""
        nodes = {n for v in self.volumes for n in self.volume_nodes.get(v, ())}
        out = dict(self.requests)
        for node in nodes:
            for k, v in self._on_node(node).items():
                out[k] = min(out.get(k, 0), self.requests.get(k, 0) - v)
        return out

    def room_in(self, labels: Mapping[str, str]) -> int:
        """How many more of the class a node with ``labels`` takes for the rules its own placements fill
        (zone spreads, one per zone: :class:`spillway.planner.topology.ZoneSpread`): each domain's
        ceiling this round less what it holds. UNBOUNDED without one (or on a template node of a group
        over several zones, which has no zone: EC2 picks it)."""
        room = UNBOUNDED
        for index, rule in enumerate(self.domains.counted):
            value = labels.get(rule.key)
            if value is None:
                continue
            ceiling = self.ceilings.get((index, value))
            if ceiling is None:
                ceiling = self.ceilings[(index, value)] = rule.ceiling(value, self.settled, self.opening)
            room = min(room, ceiling - rule.held(value, self.placed_in))
        return max(room, 0)

    def next_round(
        self, settled: Mapping[tuple[str, str], int] | None = None, opening: Sequence[Mapping[str, str]] = ()
    ) -> None:
        """Scale-up places a class with such rules in rounds: what was placed when the next one begins
        (``settled``, else what is placed now) and the template labels of the groups that may still
        open a node for it (``opening``: their zones are domains too) set the least loaded domain."""
        self.settled = dict(self.placed_in if settled is None else settled)
        self.opening = tuple(opening)
        self.ceilings = {}

    def note_placed(self, labels: Mapping[str, str], count: int) -> None:
        """``count`` pods of the class go to a node with ``labels``: they fill its domains' room."""
        for key in {rule.key for rule in self.domains.counted}:
            value = labels.get(key)
            if value is not None:
                self.placed_in[(key, value)] = self.placed_in.get((key, value), 0) + count

    def opened(
        self, spot: Spot, fresh: Sequence[frozenset[int]], nodes: int, unsure: Sequence[frozenset[int]] = ()
    ) -> None:
        """``nodes`` new nodes at ``spot`` were opened for the class: the pods they run first that its
        zone spreads select count in their zone (:meth:`~spillway.planner.topology.Domains.with_fresh`;
        ``unsure``: those they may run or not), and the round's ceilings are taken again with them
        (the least loaded zone may have risen)."""
        domains = self.domains.with_fresh(spot, fresh, nodes, unsure)
        if domains is not self.domains:
            self.domains = domains
            self.ceilings = {}

    def room_opened(
        self, spot: Spot, fresh: Sequence[frozenset[int]], unsure: Sequence[frozenset[int]] = ()
    ) -> int:
        """:meth:`room_in` the node ``spot`` once one new node there registers running the pods it runs
        first (``fresh``: the terms selecting each; ``unsure``: those it may run or not) that its zone
        spreads count: none when they fill what the zone's skew leaves, and a node opened for the class
        would stay empty."""
        domains = self.domains.with_fresh(spot, fresh, 1, unsure)
        if domains is self.domains:
            return self.room_in(spot.labels)
        return replace(self, domains=domains, ceilings={}).room_in(spot.labels)

    def take(self, count: int) -> list[str]:
        taken = self.pods[self.next : self.next + count]
        self.next += count
        return taken

    def blocker(
        self,
        labels: Mapping[str, str],
        taints: Sequence[TaintT],
        node: str | None,
        fresh: Sequence[frozenset[int]] = (),
    ) -> str | None:
        """Why kube-scheduler would not put a pod of the class on a node with ``labels`` and ``taints``
        (None: it may). A claim that holds the pod (:attr:`volume_wait`) refuses every node, as
        kube-scheduler's VolumeBinding PreFilter does before any node is looked at: a claim not found,
        being deleted, or lost (bound to a volume that is gone), or an immediate claim not bound, is
        UnschedulableAndUnresolvable (kubernetes/kubernetes pkg/scheduler/framework/plugins/
        volumebinding/volume_binding.go, podHasPVCs and PreFilter). cluster-autoscaler's scale-down
        simulates the moved pods through the same scheduler framework, so a node with such a pod is
        unremovable (NoPlaceToMovePods: kubernetes/autoscaler cluster-autoscaler/simulator/cluster.go).
        ``fresh``: for a new node, the terms selecting each pod it runs first (its DaemonSets')."""
        if self.volume_wait:
            return self.volume_wait
        why = why_not_placeable(self.node_selector, self.terms, self.tolerations, labels, taints, node)
        return why or self.domains.blocker(labels, node, fresh)

    def blocker_on_new(
        self,
        group: NodeGroup,
        fresh: Sequence[frozenset[int]] = (),
        zone: str | None = None,
        joined: Sequence[frozenset[int]] = (),
    ) -> str | None:
        """Why a new node of ``group`` would not take a pod of the class: :meth:`blocker` on its template.
        A template leaves out the zone of a group over several zones and the type of one that launches
        several; its node selector, required node affinity and taints are judged on each zone and type
        the group may launch (:meth:`node_blocker_on_new`; each type with its architecture, so ``arch
        NotIn [arm64]`` fails a group of amd64 and arm64 types), as kube-scheduler judges them on
        whichever node comes up; pod topology that closes each of them (:meth:`_closed_everywhere`) closes the
        group. ``zone``: the one zone of the group its new nodes are kept to (a gang's fleet), where
        they all come up, so pod topology is judged there. ``fresh``: the terms selecting each pod a new
        node may run first (its DaemonSets', :func:`~spillway.planner.groups.fresh_node_selected`), for
        its anti-affinity; ``joined``: those of each pod it surely runs first, for its affinity."""
        template = group.template
        assert template is not None
        if self.volume_wait:
            return self.volume_wait
        variants = launch_labels(group, zone)
        why = self.node_blocker_on_new(group, variants)
        if why is not None:
            return why
        if zone is not None and variants and all(v.get(ZONE_LABEL) == zone for v in variants):
            return next((w for v in variants if (w := self.domains.blocker(v, None, fresh, joined))), None)
        return self.domains.blocker(template.labels, None, fresh, joined) or self._closed_everywhere(
            variants, fresh, joined
        )

    def node_blocker_on_new(
        self, group: NodeGroup, variants: Sequence[Mapping[str, str]] | None = None
    ) -> str | None:
        """Why the node selector, required node affinity or tolerations of the class refuse a new node
        of ``group``: on each zone and type it may launch (``variants``, :func:`launch_labels`), which
        must all hold (zone In every zone of the group holds; zone NotIn one of them does not: the node
        may come up there, and kube-scheduler's NodeAffinity refuses it), else on its template."""
        template = group.template
        assert template is not None
        variants = launch_labels(group) if variants is None else variants
        if not variants:
            return self._node_blocker(template.labels, template.taints)
        whys = [self._node_blocker(labels, template.taints) for labels in variants]
        why = next((w for w in whys if w is not None), None)
        if why is None or all(whys):
            return why
        return not_on_every_launch(group, variants, whys, why)

    def topology_closes(self, group: NodeGroup) -> bool:
        """Whether pod topology alone keeps the class off a new node of ``group`` (for as long as the
        pods that close its domains run)."""
        template = group.template
        if template is None:
            return False
        closed = self.domains.blocker(template.labels, None) or self._closed_everywhere(launch_labels(group))
        return closed is not None

    def _closed_everywhere(
        self,
        variants: Sequence[Mapping[str, str]],
        fresh: Sequence[frozenset[int]] = (),
        joined: Sequence[frozenset[int]] = (),
    ) -> str | None:
        """Why pod topology closes every zone (and type) a new node of a group may come up in, or None:
        the template has no zone, so one zone closed to the class (a replica of a one-per-zone Deployment
        runs there) closes none of it, but a node launched where every zone is closed never runs it."""
        if not self.domains.forbidden or not variants:
            return None
        reasons = [self.domains.blocker(labels, None, fresh, joined) for labels in variants]
        return reasons[0] if all(reasons) else None

    def _node_blocker(self, labels: Mapping[str, str], taints: Sequence[TaintT]) -> str | None:
        return why_not_placeable(self.node_selector, self.terms, self.tolerations, labels, taints, None)

    @property
    def per_node(self) -> int:
        """At most this many of the class on one new node (1: its pods repel each other per node)."""
        return self.domains.per_node

    @property
    def preempts_below(self) -> int:
        """The priority below which a node's expendable pods (its victims) make room for the class: its
        own, or its :attr:`preemption_floor` when that is higher."""
        floor = self.preemption_floor
        return self.priority if floor is None else max(self.priority, floor)

    def note_created(self, created: datetime | None) -> None:
        """A pod created at ``created`` joins the class: :attr:`created` keeps the earliest."""
        if created is not None and (self.created is None or created < self.created):
            self.created = created

    def sort_key(self, priority: int | None = None) -> tuple[Any, ...]:
        """Service order: real pods before a buffer's, then by ``priority`` (the class's own when None),
        then the biggest requests (first-fit decreasing), then the class whose first pod was created
        earliest, then by pod name. kube-scheduler's queue sort (PrioritySort, kubernetes/kubernetes
        pkg/scheduler/framework/plugins/queuesort/priority_sort.go, Less) pops the higher priority
        first and, at equal priority, the pod with the earlier queue timestamp, which for a new
        pending pod is when it was added, just after its creation; so of two tenants' classes that
        compete for the last room under a limit, the one whose pod was created first is bound first.
        A pod the scheduler retried is queued again at its failed attempt's time
        (scheduling_queue.go, AddUnschedulableIfNotPresent refreshes the timestamp), which the
        snapshot does not hold: creation is the nearest fact it has. A class with no creation time
        known comes after those with one."""
        r = self.requests
        return (
            self.buffer is not None,
            -(self.priority if priority is None else priority),
            -r.get(NVIDIA_GPU, 0),
            -r.get(CPU, 0),
            -r.get(MEMORY, 0),
            self.created is None,
            self.created or _NO_TIME,
            self.pods[0],
        )


def not_on_every_launch(
    group: NodeGroup, variants: Sequence[Mapping[str, str]], whys: Sequence[str | None], why: str
) -> str:
    """Why a new node of ``group`` would not surely take a pod that some of the zones or types it may
    launch (``variants``, each refused for ``whys``) hold and others do not: Auto Scaling, not the
    plan, picks the zone of each new instance, keeping the group's enabled zones balanced (Amazon EC2
    Auto Scaling User Guide, "Auto Scaling group Availability Zone distribution"), and EC2's
    allocation strategy its type; SetDesiredCapacity names neither, so a raise cannot ask for the
    node the pod runs on. The reason names where it does not run, the group's zones (or types) and
    the remedy: a group of that zone alone (:data:`NOT_ASKABLE` marks it, for
    :func:`~spillway.planner.scaleup.why_unplaceable`)."""
    fits = [v for v, w in zip(variants, whys, strict=True) if w is None]
    fails = [v for v, w in zip(variants, whys, strict=True) if w is not None]
    good, bad = _labelled(fits, ZONE_LABEL), _labelled(fails, ZONE_LABEL)
    if good and bad and not set(good) & set(bad):
        return (
            f"{why} in {', '.join(bad)}: {group.name} spans {', '.join(group.zones)} and Auto Scaling "
            f"picks each new instance's zone, so {NOT_ASKABLE} a node in {', '.join(good)}; give pods "
            "pinned to a zone a group of that zone alone (one group per zone)"
        )
    good, bad = _labelled(fits, TYPE_LABEL), _labelled(fails, TYPE_LABEL)
    if good and bad and not set(good) & set(bad):
        return (
            f"{why} on {', '.join(bad)}: {group.name} launches {', '.join(group.launch_types())} and EC2 "
            f"picks each new instance's type, so {NOT_ASKABLE} a node of {', '.join(good)}; give such "
            "pods a group of those types alone"
        )
    return (
        f"{why} on some of the zones and types {group.name} may launch, and Auto Scaling picks them for "
        f"each new instance, so {NOT_ASKABLE} a node it runs on"
    )


def _labelled(variants: Sequence[Mapping[str, str]], key: str) -> list[str]:
    return sorted({v[key] for v in variants if key in v})


def pod_classes(ctx: Context) -> list[PodClass]:
    """The pending pods that may trigger a scale-up, as classes in service order."""
    classes: dict[tuple[Any, ...], PodClass] = {}
    gangs = ctx.gangs = Gangs(ctx)
    limited = frozenset(ctx.config.tenants)
    spot = has_spot(ctx)
    jobs = ctx.snapshot.jobs_by_key() if spot else {}
    min_room_groups = _min_room_groups(ctx)
    shared = _pending_volumes(ctx)
    for pod in ctx.gated:
        reason = "held by scheduling gates (spec.schedulingGates): not demand until they are lifted"
        ctx.pending_out.append(PendingPod(pod.key, reason, codes.SCHEDULING_GATED))
    for pod in sorted([*ctx.pending, *gangs.virtual_pods()], key=queue_order):
        verdict = _not_demand(ctx, pod, gangs)
        if verdict is not None:
            ctx.pending_out.append(PendingPod(pod.key, verdict[1], verdict[0]))
            continue
        tenant = ctx.snapshot.tenant(pod.namespace)
        gang = pod.gang if gangs.is_gang(pod.gang) else None
        started = gang if gang is not None and gangs.started(gang) else None
        gang = None if started else gang
        room_gang = _min_room_gang(pod, gang, min_room_groups)
        # with spot groups, pods that may move (spot) and pods that may not are served apart
        movable = why_not_movable(ctx, pod, jobs) is None if spot else None
        free_only = ctx.free_only.get(pod.key) or held_young(ctx, pod)
        limited_tenant = tenant if tenant in limited else None
        volumes = _class_volumes(ctx, pod, shared)  # its class is judged per node
        key = (pod.scheduling_key(), limited_tenant, gang, started, room_gang, movable, free_only, volumes)
        cls = classes.get(key)
        if cls is None:
            cls = classes[key] = new_class(pod, limited_tenant, gang, ctx.topology.domains(pod))
            cls.free_only, cls.started_gang, cls.min_room_gang = free_only, started, room_gang
            cls.volumes, cls.volume_nodes = volumes, ctx.volume_nodes
        cls.pods.append(pod.key)
        cls.note_created(pod.created_at)
        cls.one_zone = cls.one_zone or (gang is not None and pod.one_zone)
    return in_service_order(classes.values(), gang_priorities(ctx))


def queue_order(pod: PodInfo) -> tuple[bool, datetime, str]:
    """The order a class takes its pods in: created first (kube-scheduler's queue, as
    :meth:`PodClass.sort_key` orders the classes), then by name; a pod with no creation time last.
    Taken by name, the plan placed a class's pods the scheduler does not bind first, and Spillway's
    Events told the pod bound it triggered no scale-up."""
    return (pod.created_at is None, pod.created_at or _NO_TIME, pod.key)


def in_service_order(
    classes: Collection[PodClass], gang_priority: Mapping[str, int] | None = None
) -> list[PodClass]:
    """The classes highest priority first, a gang's at the priority of its lowest member's: kube-scheduler
    queues each pod at its own priority (PrioritySort; scheduler-plugins coscheduling's QueueSort Less
    compares the pods' priorities first), and a gang runs only once its last member is placed, so the
    pods of higher priority than that member take the room before it (a launcher at 1000 and its workers
    at 0 run after loose pods at 500: placed before them, the gang got nodes that the loose pods took
    when they came up, the workers waiting beside a launcher that held another). A gang of
    ``gang_priority`` (a Volcano PodGroup's class, :attr:`GangInfo.priority`) is served at that
    priority instead: Volcano's scheduler orders the whole job by it, and so the pending members of
    such a job whose minimum runs (:attr:`PodClass.started_gang`): its allocate takes jobs in their
    order (the priority plugin's JobOrderFn) before it orders a job's tasks (TaskOrderFn)."""
    known = gang_priority or {}
    lowest: dict[str, int] = dict(known)
    for cls in classes:
        if cls.gang is not None and cls.gang not in known:
            lowest[cls.gang] = min(cls.priority, lowest.get(cls.gang, cls.priority))

    def served_at(cls: PodClass) -> int | None:
        if cls.gang is not None:
            return lowest.get(cls.gang)
        return known.get(cls.started_gang) if cls.started_gang is not None else None

    return sorted(classes, key=lambda c: c.sort_key(served_at(c)))


def gang_priorities(ctx: Context) -> dict[str, int]:
    """The gangs whose own priority is known (:attr:`GangInfo.priority`: a Volcano PodGroup's class)."""
    return {g.key: g.priority for g in ctx.snapshot.gangs if g.priority is not None}


def _pending_volumes(ctx: Context) -> Counter[str]:
    """Volume -> the pending pods that use it."""
    return Counter(v for pod in ctx.pending for v in pod.volumes)


def _class_volumes(ctx: Context, pod: PodInfo, shared: Mapping[str, int]) -> tuple[str, ...]:
    """The pod's volumes a node has (:attr:`Context.volume_nodes`), or may have once the plan places
    another pending pod of them there (``shared``: volume -> pending pods that use it): the pods of a
    class share them (:attr:`PodClass.volumes`)."""
    return tuple(v for v in pod.volumes if v in ctx.volume_nodes or shared.get(v, 0) > 1)


def _min_room_groups(ctx: Context) -> frozenset[str]:
    """The coscheduling PodGroups that set ``minResources`` (:mod:`spillway.planner.minresources`)."""
    return frozenset(g.key for g in ctx.snapshot.gangs if g.source == "coscheduling" and g.min_resources)


def _min_room_gang(pod: PodInfo, gang: str | None, groups: Collection[str]) -> str | None:
    """The coscheduling PodGroup whose ``minResources`` a pod no gang places (``gang`` None) is checked
    against (:attr:`PodClass.min_room_gang`), or None."""
    return pod.gang if gang is None and pod.coscheduled and pod.gang in groups else None


def held_young(ctx: Context, pod: PodInfo) -> tuple[str, str] | None:
    """(code, reason) when the pod is younger than its ``cluster-autoscaler.kubernetes.io/pod-scale-up-delay``
    (:attr:`PodInfo.scale_up_after`), else None. Such a pod takes free room only, and launches no node:
    cluster-autoscaler filters out the pods the cluster can hold first, then leaves out of its scale-up
    every pod no older than its delay (core/static_autoscaler.go, filterOutYoungPods: a pod is old enough
    once its age is above it)."""
    if pod.scale_up_after is None or ctx.now > aware(pod.scale_up_after):
        return None
    ends = aware(pod.scale_up_after)
    return (
        codes.SCALE_UP_DELAYED,
        f"annotated {POD_SCALE_UP_DELAY}: no node is launched for it for {minutes(ends - ctx.now)} more "
        f"(until {iso(ends)}); until then it takes free room only",
    )


def _not_demand(ctx: Context, pod: PodInfo, gangs: Gangs) -> tuple[str, str] | None:
    """Why a pending pod may not trigger a scale-up (code, reason), or None when it may."""
    cutoff = ctx.config.expendable_priority_cutoff
    if pod.priority < cutoff:
        return (
            codes.EXPENDABLE,
            f"priority {pod.priority} is below expendable_priority_cutoff {cutoff}: never triggers a scale-up",
        )
    if pod.volume_wait:
        return codes.VOLUME_UNBOUND, f"{pod.volume_wait}; not scaled for until it is bound"
    if pod.claims_devices:
        return (
            codes.DYNAMIC_RESOURCES,
            "claims devices through dynamic resource allocation (spec.resourceClaims), which Spillway does "
            "not model: neither placed on free room it may not fit nor scaled for",
        )
    if nominated_to(pod, ctx.nodes) is not None:  # to a node gone or cordoned: ordinary demand
        return (
            codes.NOMINATED,
            f"nominated for node {pod.nominated} (status.nominatedNodeName): preemption makes room there",
        )
    if pod.consumes:
        verdict = consumer_verdict(ctx.provreqs, pod)
        if verdict is not None:
            return verdict
    return gangs.missing(pod) or gangs.incomplete(pod.gang)


class Gangs:
    """The gangs of the pending pods: their minimum size, members, and Volcano's pod-less demand.

    A gang whose minimum runs (:meth:`started`) is a gang no more for its pending members: every
    scheduler read here admits a member past a running minimum on its own. scheduler-plugins'
    coscheduling permits a pod once the members assigned to nodes plus itself reach ``minMember``;
    Volcano commits a task of a job that is ready, and a job is ready while ``minMember`` of its tasks
    run and, when ``minMember`` is at least their sum, each task's ``minTaskMember`` too;
    kube-scheduler's GangScheduling admits a pod once the assumed or assigned pods reach ``minCount``;
    Kueue admits a pod group as a whole and leaves its ungated pods to kube-scheduler, one by one.
    Running is counted short (bound, not terminating), so a gang is never taken as started too early.

    A Volcano gang counts as Volcano's scheduler does two kinds of pending member the others do not
    (JobInfo in volcano-sh/volcano): a member held by scheduling gates is a Pending task, valid toward
    ``minMember`` and its task's ``minTaskMember`` (ValidTaskNum, CheckTaskValid), so the gang is not
    incomplete for it, though it has to be placed, once its gates lift, for the job to be ready; and a
    pending member that requests nothing, gated or not, is ready as it is, toward ``minMember``
    (PendingBestEffortTaskNum in IsReady) and its task's minimum (getJobAllocatedRoles), counted with
    the running ones (:attr:`ready_pending`). scheduler-plugins' coscheduling and kube-scheduler's
    GangScheduling count a gated member among the gang's pods too: coscheduling's PreFilter lists the
    group's pods from the scheduler's pod informer (every pod not Succeeded or Failed, gated ones
    included) against ``minMember``, GangScheduling's PreEnqueue takes its pod group state's
    AllPodsCount (every pod that informer saw) against ``minCount``; their Permit counts only pods
    assigned or assumed, so the gang starts only once the gated member is placed as well, whatever it
    requests. Kueue counts no gated member here: a Kueue group's pods are all gated until it is
    admitted, and are no demand until then.

    Members that finished count as their gang's scheduler counts them (:meth:`finished`): Volcano takes
    a Succeeded task as ready and valid toward ``minMember`` and its task's ``minTaskMember``
    (JobInfo.ReadyTaskNum, ValidTaskNum, getJobAllocatedRoles), and Kueue's pod group holds its
    Succeeded pods against its total count; coscheduling and GangScheduling count only the pods of the
    scheduler's own informer, which lists none Succeeded or Failed. A Failed member counts for none,
    and a finished member never holds a node.

    An unbound member being deleted (kept by a finalizer, such as Kueue's on the pods of a group it
    evicted) counts for none either: kube-scheduler places no pod being deleted (skipPodSchedule),
    Volcano takes it as Releasing, neither valid nor ready (getTaskStatus, ValidTaskNum), and Kueue's
    pod group counts no unbound pod being deleted (isPodRunnableOrSucceeded). coscheduling's PreFilter
    lists it, but its Permit counts only pods assigned, which it never is: the gang needs the others.

    A pending member nominated to a node that may take it (status.nominatedNodeName: it preempted
    there and waits for its victims to leave) counts as running: its room is that node's
    (:meth:`Context.charge_nominated`) and no new node is launched for it, so the gang needs nodes only
    for its other members, as cluster-autoscaler puts such a pod on its node and scales up for the rest.

    A pod labelled for a coscheduling PodGroup its namespace does not hold is denied by coscheduling's
    Permit on any node (:meth:`missing`), while the kind is served; without it the label means nothing."""

    def __init__(self, ctx: Context) -> None:
        self.coscheduling = _coscheduling_groups(ctx)
        self.info: dict[str, GangInfo] = {}
        for g in ctx.snapshot.gangs:  # two conventions naming one group: the larger, pod-less first
            known = self.info.get(g.key)
            if known is None or (g.min_member, g.pending) > (known.min_member, known.pending):
                self.info[g.key] = g
        self.members: dict[str, int] = {}
        # members bound to a node and not leaving, and a Volcano gang's pending ones that request nothing
        self.running: dict[str, int] = {}
        self.tasks_running: dict[tuple[str, str], int] = {}  # ... per Volcano task: (gang, task)
        # ... the nodes they run on (bound) or hold room on (nominated), but those leaving
        # (:func:`_leaving_nodes`): where the rest must go too
        self.running_on: dict[str, set[str]] = {}
        self.members_on: dict[str, dict[str, int]] = {}  # ... and how many members on each of them
        self.task_of: dict[str, str] = {}  # a member's Volcano task, by pod key ("" without one)
        self.stated: dict[str, int] = {}  # the size pods state themselves (Kueue)
        self.virtual: set[str] = set()  # Volcano PodGroups whose pods do not exist yet (virtual_pods)
        # members that Succeeded, per gang and Volcano task; none of them is in the snapshot's pods
        self.succeeded = ctx.snapshot.gang_succeeded
        self.gated: dict[str, int] = {}  # members held by scheduling gates, of gangs but Kueue's
        # pending members of Volcano gangs that request nothing: ready without a place (see the class)
        self.ready_pending: set[str] = set()
        leaving = _leaving_nodes(ctx)  # whose members are no home for the rest (running_on)
        for pod in ctx.snapshot.pods:
            if pod.gang is None or pod.terminal or (pod.terminating and pod.node_name is None):
                continue  # an unbound member being deleted never runs (see the class)
            volcano = self._volcano(pod.gang)
            if pod.gated:
                self._gated(pod, volcano)
                continue
            self.members[pod.gang] = self.members.get(pod.gang, 0) + 1
            self.stated[pod.gang] = max(self.stated.get(pod.gang, 0), pod.gang_min)
            self.task_of[pod.key] = pod.gang_task or ""
            if pod.terminating:
                continue
            node = _held_node(pod, ctx)
            if node is not None:
                self._ready(pod)  # bound, or its room held on the node it is nominated to (see the class)
                self._runs_on(pod.gang, node, leaving)
            elif volcano:
                self._ready_unbound(pod)

    def _runs_on(self, gang: str, node: str, leaving: frozenset[str]) -> None:
        """A member runs on ``node`` (or holds room there): the rest of its gang goes there too, unless
        the node is leaving (:func:`_leaving_nodes`)."""
        if node not in leaving:
            self.running_on.setdefault(gang, set()).add(node)
            on = self.members_on.setdefault(gang, {})
            on[node] = on.get(node, 0) + 1

    def _volcano(self, key: str) -> bool:
        info = self._info(key)
        return info is not None and info.source == "volcano"

    def _gated(self, pod: PodInfo, volcano: bool) -> None:
        """A member held by scheduling gates is one of the gang's pods to every scheduler but Kueue; to
        Volcano a Pending task, ready when it requests nothing (see the class)."""
        assert pod.gang is not None
        if self._info(pod.gang) is None:
            return
        self.gated[pod.gang] = self.gated.get(pod.gang, 0) + 1
        if volcano:
            self._ready_unbound(pod)

    def _ready(self, pod: PodInfo) -> None:
        assert pod.gang is not None
        self.running[pod.gang] = self.running.get(pod.gang, 0) + 1
        task = (pod.gang, pod.gang_task or "")
        self.tasks_running[task] = self.tasks_running.get(task, 0) + 1

    def _ready_unbound(self, pod: PodInfo) -> None:
        """A pending member of a Volcano gang that requests nothing is ready as it is (see the class)."""
        if not any(v > 0 for v in pod.requests.values()):
            self.ready_pending.add(pod.key)
            self._ready(pod)

    def _info(self, key: str) -> GangInfo | None:
        return self.info.get(key) or self.info.get(key.rpartition("/")[0])  # a Workload group's replica

    def minimum(self, key: str) -> int:
        info = self._info(key)
        return info.min_member if info and info.min_member else self.stated.get(key, 0)

    def finished(self, key: str, task: str | None = None) -> int:
        """The gang's members that Succeeded (of one Volcano task, when given), as many as its scheduler
        counts toward its minimum (see the class): Volcano's PodGroup, or a size the pods state
        themselves (Kueue); none for coscheduling and kube-scheduler's GangScheduling."""
        info = self._info(key)
        if info is not None and info.min_member and info.source != "volcano":
            return 0
        tasks = self.succeeded.get(key, {})
        return sum(tasks.values()) if task is None else tasks.get(task, 0)

    def started(self, key: str) -> bool:
        """The gang's minimum runs: its pending members are placed one by one (see the class)."""
        return self.minimum(key) > 0 and self.shortfall(key) == ({}, 0)

    def shortfall(self, key: str) -> tuple[dict[str, int], int]:
        """What the gang lacks to start: the pods each Volcano task lacks of its ``minTaskMember``, and
        how many pods of any task it needs besides for its minimum. ({}, 0) once it started, or with no
        minimum known. Volcano checks the tasks only when ``minMember`` is at least the sum of their
        minimums (JobInfo.CheckTaskReady); a PodGroup whose pods do not exist yet has no tasks to count."""
        minimum = self.minimum(key)
        info = self._info(key)
        tasks = info.task_minimums if info is not None and key not in self.virtual else {}
        if minimum < sum(tasks.values()):
            tasks = {}
        lacking = {
            t: n - self.tasks_running.get((key, t), 0) - self.finished(key, t)
            for t, n in sorted(tasks.items())
        }
        lacking = {t: n for t, n in lacking.items() if n > 0}
        have = self.running.get(key, 0) + self.finished(key)
        return lacking, max(0, minimum - have - sum(lacking.values()))

    def is_gang(self, key: str | None) -> bool:
        return key is not None and self.minimum(key) > 1

    def missing(self, pod: PodInfo) -> tuple[str, str] | None:
        """A pod labelled ``scheduling.x-k8s.io/pod-group`` whose namespace holds no coscheduling
        PodGroup of that name, the kind served: coscheduling's Permit denies it on every node
        (kubernetes-sigs/scheduler-plugins pkg/coscheduling/core/core.go ``Permit``: PodGroupNotFound;
        pkg/coscheduling/coscheduling.go ``Permit``: Unschedulable "PodGroup not found"), so a node
        launched for it would stay empty. Creating the PodGroup requeues the pod (the plugin's
        EventsToRegister names PodGroup Add), and the next plan takes it as a member."""
        if self.coscheduling is None or not pod.coscheduled or pod.gang is None:
            return None
        if pod.gang in self.coscheduling:
            return None
        return (
            codes.GANG_INCOMPLETE,
            f"its PodGroup {pod.gang} (scheduling.x-k8s.io, named by label scheduling.x-k8s.io/pod-group) "
            "does not exist: coscheduling denies the pod on every node until it is created; nothing is added",
        )

    def incomplete(self, key: str | None) -> tuple[str, str] | None:
        if key is None:
            return None
        finished, gated = self.finished(key), self.gated.get(key, 0)
        need, have = self.minimum(key), self.members.get(key, 0) + finished + gated
        if have >= need:
            return None
        done = f" ({finished} of them Succeeded)" if finished else ""
        done += f" ({gated} of them held by scheduling gates)" if gated else ""
        return (
            codes.GANG_INCOMPLETE,
            f"gang {key} has {have} of its {need} pods{done}: nothing is added until all exist",
        )

    def virtual_pods(self) -> list[PodInfo]:
        """A Volcano PodGroup still ``Pending`` has no pods yet: ``minMember`` pods, each an equal share
        of ``minResources``, tolerating the taints of the extended resources they request, at the
        PodGroup's priority when known (:attr:`GangInfo.priority`; else 0): the job controller gives
        the pods it makes the Job's priorityClassName, which it names in the PodGroup too, where their
        template names none (createJobPod), so one below ``expendable_priority_cutoff`` is expendable
        as its pods will be. Not once any
        pod of it exists, gated ones too: its pods are then its demand, and a gated one is none, since
        Volcano's allocate skips scheduling-gated tasks (DeductSchGatedResources only takes their
        requests off what the job holds of its queue's ``inqueue`` share, so they do not keep other jobs
        out; it places nothing)."""
        out: list[PodInfo] = []
        for key in sorted(self.info):
            info = self.info[key]
            if not info.pending or info.min_member <= 0 or self.members.get(key) or self.gated.get(key):
                continue
            n = info.min_member
            share = {r: -(-v // n) for r, v in info.min_resources.items()}
            namespace, _, name = key.partition("/")
            extended = tuple((r, "Exists", None, None) for r in sorted(share) if "/" in r)
            self.members[key] = n
            self.virtual.add(key)
            out += [
                PodInfo(
                    namespace,
                    f"{name}[{i}]",
                    share,
                    unschedulable=True,
                    priority=info.priority or 0,
                    gang=key,
                    tolerations=extended,
                )
                for i in range(n)
            ]
        return out


def _held_node(pod: PodInfo, ctx: Context) -> str | None:
    """The node a pod runs on (bound) or holds room on (nominated to, while it may take it), else None."""
    if pod.node_name is not None:
        return pod.node_name
    nominated = nominated_to(pod, ctx.nodes)
    return nominated.info.name if nominated is not None else None


def _leaving_nodes(ctx: Context) -> frozenset[str]:
    """The nodes whose pods are on their way out: being deleted, NotReady past registering
    (:func:`~spillway.planner.health.out_of_service`: the taint manager evicts their pods), its
    instance terminating or stopping in its warm pool, or cordoned by a drain or give-back of
    Spillway's that takes it away (a Spot warning's, a consolidation's; not a make-room drain's, whose
    node stays, nor an orphaned cordon, which the scale-down restores). A gang member there is counted
    toward its minimum as before (this counts what the gang's scheduler counts when it admits the pending
    members: coscheduling's Permit and Volcano's gang plugin take a bound member whatever its node; no
    pod is moved on it, and the member comes back pending once its node goes, to be placed with the
    rest; the moves that must not take a gang below its minimum leave it out: ``Consolidation.gang_left``),
    but is no home for the rest of its gang (:attr:`Gangs.running_on`):
    the region being left, where a Spot pool may just have been backed off, would get new nodes for
    the rest while the member itself is evicted and comes back pending, to be placed with the others."""
    if not any(pod.gang is not None for pod in ctx.snapshot.pods):
        return frozenset()  # most clusters: no gang, nothing to ask of the nodes
    return frozenset(name for name, node in ctx.nodes.items() if _leaving(node, ctx))


def _leaving(node: WorkNode, ctx: Context) -> bool:
    """One node of :func:`_leaving_nodes`."""
    info = node.info
    if node.terminating or node.pool_stopping or out_of_service(info, ctx.config, ctx.now):
        return True
    drained = info.unschedulable and info.cordoned_by_spillway and info.name not in ctx.state.rooms
    return drained and not orphaned_cordon(node, ctx.state, ctx.config, ctx.now)


def _coscheduling_groups(ctx: Context) -> frozenset[str] | None:
    """The coscheduling PodGroups there are, when coscheduling may run (its kind is served), else None."""
    if not ctx.snapshot.coscheduling_served:
        return None
    return frozenset(g.key for g in ctx.snapshot.gangs if g.source == "coscheduling")


def new_class(
    pod: PodInfo, tenant: str | None = None, gang: str | None = None, domains: Domains = FREE
) -> PodClass:
    requests = dict(pod.requests)
    requests[PODS] = requests.get(PODS, 0) + ONE_POD
    return PodClass(
        requests=requests,
        node_selector=pod.node_selector,
        terms=pod.required_terms,
        tolerations=pod.tolerations,
        priority=pod.priority,
        pods=[],
        preempts=not pod.never_preempts,
        node_specific=references_node_identity(pod.node_selector, pod.required_terms)
        or domains.node_specific,
        tenant=tenant,
        gang=gang,
        domains=domains,
        volume_wait=pod.volume_wait,
    )


def consumer_verdict(requests: Mapping[str, ProvisioningRequestInfo], pod: PodInfo) -> tuple[str, str] | None:
    """Why a pending pod that consumes a ProvisioningRequest is not demand (code, reason), or None when
    it is: its request is gone, or ended (failed, booking expired, capacity revoked)."""
    if not pod.consumes:
        return None
    info = requests.get(f"{pod.namespace}/{pod.consumes}")
    if info is None or any(info.is_true(t) for t in TERMINAL):
        return None
    if not info.served:  # another autoscaler's: whatever it holds for the pod, Spillway holds nothing
        held = "another autoscaler serves the request"
    elif info.is_true(PROVISIONED):
        held = "its booked capacity is held for it"
    else:
        held = "the request is the demand"
    return (
        codes.PROVISIONING_REQUEST,
        f"consumes ProvisioningRequest {info.key} ({info.class_name}): {held}; not scaled for twice",
    )
