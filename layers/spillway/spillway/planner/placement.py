"""Stage 2: placement on what exists — free room on Ready nodes, capacity already launching, and
nodes Spillway cordoned (uncordoned rather than launching new ones).

Existing nodes are visited pool by pool (nodes of one shape), so a class's constraints are judged once
per shape; launching and new nodes are :class:`Bin` s of identical template nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from spillway.model.groupkey import GroupKey
from spillway.model.k8s import CANDIDATE_TAINT, DRAINING_TAINT
from spillway.model.nodegroup import NodeGroup
from spillway.model.resources import (
    PODS,
    Resources,
    add_into,
    add_room,
    fit_count,
    room_less,
    unchecked_when_unknown,
)
from spillway.planner import codes
from spillway.planner.classes import PodClass
from spillway.planner.context import ONE_POD, Context, Victim, WorkNode, has_taint, shape_of, without_taint
from spillway.planner.groups import (
    TYPE_KEYS_SET_ON_LAUNCH,
    ZONE_KEYS_SET_ON_LAUNCH,
    fresh_node_overhead,
    fresh_node_selected,
    group_ceiling,
    launched_only,
    launching_places,
    place_labels,
)
from spillway.planner.health import registering
from spillway.planner.limits import Limits
from spillway.planner.predicates import UNSCHEDULABLE_TAINT
from spillway.planner.topology import NO_MARKS, UNBOUNDED, Marks, marks_of

FREE_ROOM_NOTE = "fits in free room on Ready node {node}; waiting for the scheduler"
UNCORDON_NOTE = "will run on node {node}, which this plan uncordons"


@dataclass(slots=True)
class Pool:
    """Existing nodes of one shape (labels but hostname, taints): equal for every constraint but a name."""

    nodes: list[WorkNode]
    bound: Resources  # at least the free room of any node of the pool, per resource
    blocked: dict[int, bool] = field(default_factory=dict)  # by class id: constraints rule the pool out
    # by class id: its nodes before this index have no room for one pod of the class (room only shrinks
    # while a plan places pods, so first fit need not look at them again; a preemption that leaves more
    # room clears it: widen)
    full: dict[int, int] = field(default_factory=dict)

    def widen(self, node: WorkNode) -> None:
        """``node``, one of the pool's, has more free room than before (a preemption gave it the room of
        the pods it takes away): the bound holds it, and no node is skipped as full any more. A resource
        checked only where reported that the bound leaves out (a member does not report it) stays out."""
        _max_into(
            self.bound,
            {k: v for k, v in node.free.items() if k in self.bound or not unchecked_when_unknown(k)},
        )
        self.full.clear()


@dataclass(slots=True)
class Bin:
    """Identical nodes (by id), each with ``free`` room left."""

    free: Resources
    ids: list[str]
    fresh: bool = False  # launching nodes no pod of this plan has taken yet
    # per class with a per-node cap (by its tag): how many of its pods each node holds
    holds: Mapping[str, int] = field(default_factory=dict)
    marks: Marks = NO_MARKS  # what the classes placed on each node bring (pod topology)
    # launching nodes of a group over several zones or types: the labels they register with, in the
    # zone and of the type Auto Scaling launched them in (groups.launching_places); None: the template's
    labels: Mapping[str, str] | None = None
    # the volumes the pods placed on each node use (PodClass.volumes): a pod of them placed after
    # brings none of them (NodeVolumeLimits counts a volume of the node's pods once)
    volumes: frozenset[str] = frozenset()
    # the registered node still launching this one-node bin is (_hold): its running pods count under
    # the hostname rules of a class placed there, as on any existing node (_node_cap)
    node: str | None = None

    def copy(self) -> Bin:
        return replace(self, free=dict(self.free), ids=list(self.ids))


K = TypeVar("K")


def copy_bins(bins: Mapping[K, list[Bin]]) -> dict[K, list[Bin]]:
    """A copy of ``bins`` a placement may fill and throw away (a trial)."""
    return {k: [b.copy() for b in v] for k, v in bins.items()}


def _max_into(bound: Resources, free: Mapping[str, int]) -> None:
    have = bound.get  # bound once: pools calls this for every node it groups (750k times on a replay)
    for name, value in free.items():
        if value > have(name, -1):
            bound[name] = value


def pools(nodes: Iterable[WorkNode]) -> list[Pool]:
    by_shape: dict[tuple[object, ...], list[WorkNode]] = {}
    for node in nodes:
        by_shape.setdefault(node.shape, []).append(node)
    return [Pool(members, room_bound(members)) for members in by_shape.values()]


def room_bound(nodes: Sequence[WorkNode]) -> Resources:
    """At least the free room of any of ``nodes``, per resource (:attr:`Pool.bound`): a pod whose
    requests do not fit in it fits on none of them."""
    bound: Resources = {}
    for node in nodes:
        _max_into(bound, node.free)
    # a node that does not report a resource checked only where reported (a CSI driver's attach
    # limit on a node whose CSINode gives none) takes any amount of it: so may the pool
    for name in [n for n in bound if unchecked_when_unknown(n)]:
        if any(name not in node.free for node in nodes):
            del bound[name]
    return bound


def schedulable_pools(ctx: Context) -> list[Pool]:
    """Ready, initialized, schedulable nodes not tainted for draining (:attr:`WorkNode.schedulable`)."""
    return pools(n for n in ctx.nodes.values() if n.schedulable)


def unmarked_first(pool_list: Sequence[Pool]) -> list[Pool]:
    """``pool_list`` with the pools of nodes carrying the scale-down candidate taint last, each part in
    its order. kube-scheduler's TaintToleration score ranks a node with a PreferNoSchedule taint a pod
    does not tolerate below one without (pkg/scheduler/framework/plugins/tainttoleration: Score counts
    them, NormalizeScore reverses the count): a pending pod that fits a node that stays goes there, and
    the marked node's timer runs on (:mod:`spillway.planner.softtaint`). A pool's nodes share their
    taints (:func:`~spillway.planner.context.shape_of`)."""
    return sorted(pool_list, key=lambda pool: has_taint(pool.nodes[0].info, CANDIDATE_TAINT))


def reclaimable_pools(ctx: Context) -> list[Pool]:
    """Ready nodes Spillway cordoned for a plan's drain, one per pool, in preference order (region, then
    name). A drain no plan started holds its node (:attr:`NodeInfo.cordon_held`): its instance is going
    away (a Spot warning, a lifecycle action) or an operator asked for it, and uncordoning would cancel it.
    A give-back under way holds its node too (:meth:`NodeInfo.giving_back`): it read no pod there, and
    terminates the instance with any pod bound meanwhile.

    Their working copies lose the draining taint and the cordon's own taint: uncordoning lifts the
    first, and the node lifecycle controller takes off ``node.kubernetes.io/unschedulable:NoSchedule``,
    which it puts on every cordoned node (kubernetes/kubernetes pkg/controller/nodelifecycle,
    doNoScheduleTaintingPass), once ``spec.unschedulable`` is cleared. Kept, it barred every pod that
    does not tolerate a cordon from the node, and the plan launched a new one instead.
    """
    reclaimable = sorted(
        (
            n
            for n in ctx.nodes.values()
            if n.info.ready
            and n.info.cordoned_by_spillway
            and not n.info.cordon_held
            and not n.info.giving_back(ctx.now)
            and n.group is not None
        ),
        key=lambda n: (ctx.region_key(n.group) if n.group else 0, n.info.name),
    )
    reclaimable = _below_ceilings(ctx, reclaimable)
    for node in reclaimable:
        node.info = without_taint(without_taint(node.info, DRAINING_TAINT), UNSCHEDULABLE_TAINT[0])
        node.shape = shape_of(node.info)
    return [Pool([n], dict(n.free)) for n in reclaimable]


def _below_ceilings(ctx: Context, reclaimable: list[WorkNode]) -> list[WorkNode]:
    """``reclaimable`` but the nodes whose group a scheduled action lowers within the idle threshold to
    no more than it keeps without them (:func:`~spillway.planner.groups.group_ceiling`): the drain under
    way takes the group down ahead of the action, and a node given back to pods now keeps one too many,
    which Auto Scaling terminates undrained when the action runs."""
    leaving: dict[GroupKey, int] = {}
    for n in ctx.nodes.values():
        # a make-room drain's cordon (State.rooms) keeps its node in the group, for the pods it waits for
        if n.group is not None and n.info.cordoned_by_spillway and n.info.name not in ctx.state.rooms:
            leaving[n.group.key] = leaving.get(n.group.key, 0) + 1
    kept: dict[GroupKey, int] = {}
    out = []
    for node in reclaimable:
        assert node.group is not None
        ceiling, key = group_ceiling(ctx, node.group), node.group.key
        if ceiling is not None:
            staying = node.group.desired - leaving.get(key, 0) + kept.get(key, 0)
            if staying + 1 > ceiling.min_size:
                continue
            kept[key] = kept.get(key, 0) + 1
        out.append(node)
    return out


def launching_bins(ctx: Context, empty: Mapping[GroupKey, Resources]) -> dict[GroupKey, list[Bin]]:
    """Per group, nodes already launching (:meth:`Context.launching`), as empty template nodes but for
    the registered ones pods are bound to already (:func:`_held_launching`): of a group whose launches
    fail, only the instances it launched (:func:`~spillway.planner.groups.launched_only`)."""
    bins: dict[GroupKey, list[Bin]] = {}
    held = _held_launching(ctx)
    for g in ctx.groups:
        launching = ctx.launching(g, launched_only(ctx, g))
        if launching > 0 and g.template is not None:
            bins[g.key] = _launching_bins_of(ctx, g, launching, empty[g.key])
            _hold(bins[g.key], held.get(g.key, ()))
    return bins


@dataclass(frozen=True, slots=True)
class _Held:
    """A registered node still launching that runs pods beyond what every new node runs: the room they
    leave (:func:`_launching_room`), and what they bring that pods placed beside them must respect
    (host ports, hostname anti-affinity)."""

    node: WorkNode
    room: Resources
    marks: Marks


def _held_launching(ctx: Context) -> dict[GroupKey, list[_Held]]:
    """Per group, its registered nodes still launching (starting, or NotReady and registering) that run
    pods besides those every new node runs (its DaemonSet and static pods, whose room the template
    leaves out already, and expendable pods, whose room a preemptor takes), with the room they leave
    and what those pods bring. kube-scheduler binds a pod to a Ready node whose GPUs are not registered
    yet, or to one whose startup taint it tolerates, when the rest of its requests fit there: taken as
    an empty template node, such a node held a job that no longer fits there, and nothing was launched
    for it until the node initialized. Karpenter reckons an uninitialized node so: its allocatable less
    its pods' requests (kubernetes-sigs/karpenter pkg/controllers/state, StateNode.Available). So is one
    a pending pod is nominated to (it preempted there): that pod takes its room from the pods of its
    priority or lower as on any node (:meth:`Context.charge_nominated`), from the node's bin."""
    held: dict[str, Resources] = {}
    nominated = {pod.nominated for pod in ctx.nominated}
    for name in sorted(ctx.nodes):
        node = ctx.nodes[name]
        if not registered_launching(ctx, node):
            continue
        requests = _bound_beyond_template(ctx, node)
        if requests or name in nominated:
            held[name] = requests
    marks = _bound_marks(ctx, held) if held else {}
    overheads: dict[GroupKey, Resources] = {}
    out: dict[GroupKey, list[_Held]] = {}
    for name, requests in held.items():
        node = ctx.nodes[name]
        assert node.group is not None
        key = node.group.key
        if key not in overheads:
            overheads[key] = fresh_node_overhead(ctx, node.group)
        room = _launching_room(ctx, node, overheads[key], requests)
        out.setdefault(key, []).append(_Held(node, room, marks.get(name, NO_MARKS)))
    return out


def _launching_room(ctx: Context, node: WorkNode, overhead: Resources, beyond: Resources) -> Resources:
    """The room of ``node``, registered and still launching, as Karpenter reckons an uninitialized node
    (StateNode.Allocatable and Available, scheduling.NewExistingNode): the allocatable its Node reports,
    the template's for a resource it reports none of (GPUs whose device plugin has not registered them
    yet), less what its pods request ``beyond`` those every new node runs, and less, resource by
    resource, the more of what a new node's DaemonSet and static pods request (``overhead``:
    :func:`~spillway.planner.groups.fresh_node_overhead`) and what its own request. The template's
    estimate alone promised room its kubelet does not give, and a static pod the template does not
    count took none."""
    assert node.group is not None and node.group.template is not None
    reported = {name: value for name, value in node.info.allocatable.items() if value > 0}
    allocatable = {**node.group.template.allocatable, **reported}
    own = _daemon_requests(ctx, node)
    reserve = {name: max(overhead.get(name, 0), own.get(name, 0)) for name in overhead.keys() | own.keys()}
    return room_less(room_less(allocatable, reserve), beyond)


def registered_launching(ctx: Context, node: WorkNode) -> bool:
    """``node`` is one of its group's launching nodes (:meth:`Context.launching`), registered already:
    starting (:mod:`spillway.planner.startup`), or NotReady and still registering
    (:func:`~spillway.planner.health.registering`). Its room is a launching bin's (:func:`launching_bins`)."""
    if node.group is None or (node.info.ready and node.starting is None):
        return False
    return node.starting is not None or registering(node.info, ctx.config, ctx.now)


def _bound_marks(ctx: Context, nodes: Collection[str]) -> dict[str, Marks]:
    """What the pods bound to ``nodes`` (but DaemonSet, static, finished and expendable ones) bring."""
    out: dict[str, Marks] = {}
    cutoff = ctx.config.expendable_priority_cutoff
    for pod in ctx.snapshot.pods:
        name = pod.node_name
        if name is None or name not in nodes or pod.terminal or pod.daemonset or pod.mirror:
            continue
        if pod.priority >= cutoff:
            out[name] = out.get(name, NO_MARKS) | marks_of(pod)
    return out


def _hold(bins: list[Bin], held: Iterable[_Held]) -> None:
    """Each node of ``held`` becomes a bin of its own, out of the launching ``bins`` of its place, with
    the room its pods leave and their marks. One whose place has no launching node left (a group whose
    desired capacity fell below its nodes still starting) stands for none; the next may still."""
    for one in held:
        source = _bin_for(one.node, bins)
        if source is None:
            continue
        node_id, name = source.ids.pop(), one.node.info.name
        bins.append(
            Bin(dict(one.room), [node_id], fresh=True, marks=one.marks, labels=source.labels, node=name)
        )
    bins[:] = [b for b in bins if b.ids]


def initialized_only(ctx: Context, bins: Mapping[GroupKey, list[Bin]]) -> dict[GroupKey, list[Bin]]:
    """A copy of the launching ``bins`` without the registered nodes still launching
    (:func:`registered_launching`): the bin of its own of one that is one (:attr:`Bin.node`), else a
    node of the bin of its place, one no pod was planned onto first, as :func:`_hold` takes it. The
    room consolidation may move pods to: Karpenter refuses a consolidation whose pods would schedule
    against a node not initialized yet (kubernetes-sigs/karpenter pkg/controllers/disruption/helpers.go,
    SimulateScheduling: UninitializedNodeError), which may never come up as its template says."""
    out = copy_bins(bins)
    for name in sorted(ctx.nodes):
        node = ctx.nodes[name]
        group_bins = out.get(node.group.key) if node.group is not None else None
        if not group_bins or not registered_launching(ctx, node):
            continue
        own = next((b for b in group_bins if b.node == name), None)
        source = own or _bin_for(node, sorted(group_bins, key=lambda b: not b.fresh))
        if source is not None:
            source.ids.pop()
            group_bins[:] = [b for b in group_bins if b.ids]
    return out


def _bound_beyond_template(ctx: Context, node: WorkNode) -> Resources:
    """What the pods bound to ``node`` request (a pod slot each) but its DaemonSet and static pods and
    the requests of its expendable pods; only the resources of which they request some."""
    held = dict(node.used)
    add_room(held, _daemon_requests(ctx, node), -1)
    add_room(held, node.expendable_used, -1)
    return {name: value for name, value in held.items() if value > 0}


def _daemon_requests(ctx: Context, node: WorkNode) -> Resources:
    """What the DaemonSet and static pods bound to ``node`` request, and a pod slot each."""
    total: Resources = {}
    for pod in ctx.node_daemons.get(node.info.name, ()):
        add_into(total, pod.requests)
        total[PODS] = total.get(PODS, 0) + ONE_POD
    return total


def _bin_for(node: WorkNode, bins: Sequence[Bin]) -> Bin | None:
    """The bin of launching nodes ``node`` is one of: of its zone and type (a group over several), else
    of the template's."""
    for b in bins:
        if b.ids and b.labels is not None and _same_place(node.info.labels, b.labels):
            return b
    return next((b for b in bins if b.ids and b.labels is None), None)


def _same_place(labels: Mapping[str, str], place: Mapping[str, str]) -> bool:
    """A node with ``labels`` is in the zone, and of the type, that ``place`` names."""
    keys = (*ZONE_KEYS_SET_ON_LAUNCH, *TYPE_KEYS_SET_ON_LAUNCH)
    return all(labels.get(key) == value for key, value in place.items() if key in keys)


def _launching_bins_of(ctx: Context, group: NodeGroup, launching: int, room: Resources) -> list[Bin]:
    """The ``launching`` nodes of ``group``: those of a group over several zones or types whose zone and
    type Auto Scaling's answer gives (:func:`~spillway.planner.groups.launching_places`) at the labels
    they register with (recorded in :attr:`Context.launching_labels` for pod topology), the rest at the
    template's."""
    out: list[Bin] = []
    made = 0
    for (zone, kind), count in launching_places(ctx, group, launching, registered=True).items():
        labels = place_labels(group, zone, kind)
        ids = [f"{group.name}/launching-{made + i + 1}" for i in range(count)]
        ctx.launching_labels.update(dict.fromkeys(ids, labels))
        out.append(Bin(dict(room), ids, fresh=True, labels=labels))
        made += count
    if launching > made:
        ids = [f"{group.name}/launching-{i + 1}" for i in range(made, launching)]
        out.append(Bin(dict(room), ids, fresh=True))
    return out


def fill_launching(
    cls: PodClass, group: NodeGroup, bins: list[Bin], want: int, cap: int
) -> list[tuple[str, int, Mapping[str, str]]]:
    """:func:`fill_bins` over a group's launching nodes, each at the labels it registers with
    (:attr:`Bin.labels`, else the template's): a zone spread's room is taken, and the class's pods
    noted (:meth:`PodClass.note_placed`), in the zone of each, and a zone its pod topology closes takes
    none. Returns ``(node id, pods placed there, its labels)``."""
    template = group.template.labels if group.template is not None else {}
    parts = _by_place(bins)
    out: list[tuple[str, int, Mapping[str, str]]] = []
    for part in parts.values():
        labels = part[0].labels
        where = template if labels is None else labels
        if labels is not None and cls.domains.blocker(labels, None) is not None:
            continue
        left = want - sum(count for _, count, _ in out)
        for node_id, count in fill_bins(cls, part, min(left, cls.room_in(where)), cap):
            cls.note_placed(where, count)
            out.append((node_id, count, where))
    bins[:] = [b for part in parts.values() for b in part]
    return out


def _by_place(bins: Iterable[Bin]) -> dict[int, list[Bin]]:
    """``bins`` by the labels their nodes register with (:attr:`Bin.labels`), in the order
    :func:`fill_launching` fills them."""
    parts: dict[int, list[Bin]] = {}
    for b in bins:
        parts.setdefault(id(b.labels), []).append(b)
    return parts


def fill_bins(cls: PodClass, bins: list[Bin], want: int, cap: int | None = None) -> list[tuple[str, int]]:
    """First-fit ``want`` copies of ``request`` into ``bins``, splitting bins as they fill; ``cap``: at
    most that many of the class on each node (its per-node cap when None).

    Returns ``(node id, pods placed there)`` in placement order; the sum is what fitted.
    """
    out: list[tuple[str, int]] = []
    placed = 0
    i = 0
    per_node = cls.per_node if cap is None else cap
    while i < len(bins) and placed < want:
        current = bins[i]
        per = cls.fit_with(
            current.free, _node_cap(cls, current, per_node) - _held(cls, current), current.volumes
        )
        if per <= 0 or cls.domains.marks.repels(current.marks):
            i += 1
            continue
        inserted, count = _split_bin(cls, current, per, want - placed, out)
        placed += count
        bins[i:i] = inserted
        i += len(inserted)
        if not current.ids:
            del bins[i]
    return out


def _node_cap(cls: PodClass, current: Bin, cap: int) -> int:
    """How many of ``cls`` each node of ``current`` takes at most: ``cap`` for a new or launching node
    of the template, and for a registered node still launching what the class's hostname rules leave
    that node as they leave any existing one (:meth:`~spillway.planner.topology.Domains.on_node`): a
    hostname spread counts the pods it runs, and one standing at maxSkew above the least loaded node
    takes none (kube-scheduler's PodTopologySpread filter)."""
    return cap if current.node is None else cls.domains.on_node(current.node)


def _tag(cls: PodClass) -> str | None:
    """What marks a bin as holding pods of ``cls`` on each node (classes capped per node only)."""
    return cls.pods[0] if cls.per_node < UNBOUNDED else None


def _held(cls: PodClass, current: Bin) -> int:
    """How many pods of ``cls`` each node of ``current`` holds already (counted for a per-node cap)."""
    tag = _tag(cls)
    return current.holds.get(tag, 0) if tag is not None else 0


def _holding(cls: PodClass, current: Bin, count: int) -> Mapping[str, int]:
    """``current``'s holds once each of its nodes takes ``count`` more pods of ``cls``."""
    tag = _tag(cls)
    return {**current.holds, tag: current.holds.get(tag, 0) + count} if tag is not None else current.holds


def _split_bin(
    cls: PodClass, current: Bin, per: int, want: int, out: list[tuple[str, int]]
) -> tuple[list[Bin], int]:
    """Fill whole nodes of ``current`` (``per`` pods each), then part of one.

    Appends the placements to ``out``; returns the filled bins and how many pods they took.
    """
    inserted: list[Bin] = []
    marks = current.marks | cls.domains.marks
    volumes = current.volumes | frozenset(cls.volumes)
    full = min(len(current.ids), want // per)
    if full:
        after = dict(current.free)
        cls.charge_with(after, per, current.volumes)
        ids, current.ids = current.ids[:full], current.ids[full:]
        holds = _holding(cls, current, per)
        inserted.append(
            replace(current, free=after, ids=ids, fresh=False, holds=holds, marks=marks, volumes=volumes)
        )
        out.extend((node_id, per) for node_id in ids)
    rest = want - full * per
    if rest and current.ids:
        after = dict(current.free)
        cls.charge_with(after, rest, current.volumes)
        ids, current.ids = current.ids[:1], current.ids[1:]
        holds = _holding(cls, current, rest)
        inserted.append(
            replace(current, free=after, ids=ids, fresh=False, holds=holds, marks=marks, volumes=volumes)
        )
        out.append((ids[0], rest))
        return inserted, want
    return inserted, full * per


Commit = Callable[[PodClass, WorkNode, int], None]  # count pods of the class go on the node


def place_on_nodes(ctx: Context, cls: PodClass, pool_list: Iterable[Pool], *, uncordon: bool = False) -> None:
    """Place the class on existing nodes, first fit, pool by pool (nodes of one shape)."""
    fit_on_nodes(cls, pool_list, lambda c, node, count: _place_on_node(ctx, c, node, count, uncordon))


def fit_on_nodes(cls: PodClass, pool_list: Iterable[Pool], commit: Commit) -> None:
    """First fit of the class's remaining pods on the pools' nodes; ``commit`` takes each share (it must
    take the pods from the class and charge the node's ``free``). Consolidation simulates with it."""
    for pool in pool_list:
        if not cls.remaining:
            return
        if _pool_ruled_out(cls, pool):
            continue
        if fit_count(cls.least_requests, pool.bound, 1) == 0:
            continue  # no node of the pool has that much room left
        if cls.room_in(pool.nodes[0].info.labels) <= 0:
            continue  # its domains take no more of the class now (a pool's nodes share every label)
        _place_in_pool(cls, pool, commit)


class TrialFit:
    """Classes placed on existing nodes in place, first fit, as a trial: into a copy of the plan's
    placements (``planned``), and with an undo log, so a trial that fails puts back each node's free
    room and marks (not a copy of every node per trial). Consolidation's moves and a
    ProvisioningRequest's booking place pods this way."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.planned = ctx.planned.copy()
        self.placed: dict[str, int] = {}  # node -> pods placed there
        self.arrived: dict[str, list[str]] = {}  # node -> the keys of the pods placed there
        self.preempted = 0  # expendable pods the trial's pods take the room of (preempt)
        self._before: dict[str, tuple[WorkNode, Resources, Marks, list[Victim]]] = {}
        # the volumes the trial put on nodes (node, volumes, pods) and took off them (pods 0)
        self._volumes: list[tuple[str, tuple[str, ...], int]] = []

    def fit(self, cls: PodClass, pool_list: Iterable[Pool]) -> None:
        fit_on_nodes(cls, pool_list, self._commit)

    def _save(self, node: WorkNode) -> None:
        self._before.setdefault(node.info.name, (node, dict(node.free), node.marks, list(node.victims)))

    def _commit(self, cls: PodClass, node: WorkNode, count: int) -> None:
        name = node.info.name
        self._save(node)
        add_room(node.free, cls.requests_on(name), -count)
        node.marks = node.marks | cls.domains.marks
        if cls.volumes:
            self.ctx.note_volumes(name, cls.volumes, count)
            self._volumes.append((name, cls.volumes, count))
        self.arrived.setdefault(name, []).extend(cls.take(count))
        self.placed[name] = self.placed.get(name, 0) + count
        self.planned.record(cls.domains, node.spot, count)

    def preempt(self, cls: PodClass, node: WorkNode, count: int, victims: Sequence[Victim]) -> None:
        """``count`` pods of the class on ``node`` once ``victims`` leave it (their room freed), as
        :func:`~spillway.planner.preemption.place_by_preemption` places them, undone with the rest."""
        self._save(node)
        for victim in victims:
            node.victims.remove(victim)
            add_room(node.free, victim.requests)
            self.ctx.volumes_left(node.info.name, victim.volumes)
            self._volumes.append((node.info.name, victim.volumes, 0))
        self.preempted += len(victims)
        self._commit(cls, node, count)

    def undo(self) -> None:
        for name, volumes, count in reversed(self._volumes):
            if count:
                for _ in range(count):
                    self.ctx.volumes_left(name, volumes)
            else:
                self.ctx.note_volumes(name, volumes)
        for node, free, marks, victims in self._before.values():
            node.free, node.marks, node.victims = free, marks, victims


class DomainPools:
    """The free room of a class placed in rounds (a zone spread), visited in pool order as first fit
    does, but only in the domains (of the rules that count its placements) the round leaves room in: a
    domain the class may take no more of this round is not visited again until the next, and a pool
    that can take no more of the class (ruled out, or no node with room for one as far as its bound
    knows) is dropped from the front of its domain's list for good (while only the class is placed,
    room only shrinks, and first fit fills pools in order). The pools a round visits, and their order,
    are those first fit visits over every pool, less the ones it would pass over."""

    def __init__(self, cls: PodClass, pool_list: Sequence[Pool]) -> None:
        self.cls = cls
        self.domains: list[list[tuple[int, Pool]]] = []
        by_key: dict[tuple[str | None, ...], list[tuple[int, Pool]]] = {}
        for index, pool in enumerate(pool_list):
            labels = pool.nodes[0].info.labels
            key = tuple(labels.get(rule.key) for rule in cls.domains.counted)
            if key not in by_key:
                by_key[key] = []
                self.domains.append(by_key[key])
            by_key[key].append((index, pool))

    def round(self) -> Iterator[Pool]:
        """This round's pools, lazily, in pool order: a domain is left once it takes no more."""
        for domain in self.domains:
            closed = 0
            while closed < len(domain) and not self._open(domain[closed][1]):
                closed += 1
            del domain[:closed]
        at = [0] * len(self.domains)
        live = list(range(len(self.domains)))
        while True:
            live = [
                i for i in live if at[i] < len(self.domains[i]) and self._takes(self.domains[i][at[i]][1])
            ]
            if not live:
                return
            first = min(live, key=lambda i: self.domains[i][at[i]][0])
            at[first] += 1
            yield self.domains[first][at[first] - 1][1]

    def _takes(self, pool: Pool) -> bool:
        return self.cls.room_in(pool.nodes[0].info.labels) > 0

    def _open(self, pool: Pool) -> bool:
        return not _pool_ruled_out(self.cls, pool) and fit_count(self.cls.least_requests, pool.bound, 1) > 0


def _pool_ruled_out(cls: PodClass, pool: Pool) -> bool:
    if cls.node_specific:
        return False  # judged node by node
    blocked = pool.blocked.get(id(cls))
    if blocked is None:
        info = pool.nodes[0].info
        blocked = pool.blocked[id(cls)] = cls.blocker(info.labels, info.taints, info.name) is not None
    return blocked


def _place_in_pool(cls: PodClass, pool: Pool, commit: Commit) -> None:
    bound: Resources = {}
    first = start = pool.full.get(id(cls), 0)
    for index in range(first, len(pool.nodes)):
        if not cls.remaining or cls.room_in(pool.nodes[index].info.labels) <= 0:
            return  # not every node was visited: keep the old bound (a pool's nodes share every label)
        node = pool.nodes[index]
        info = node.info
        if cls.node_specific and cls.blocker(info.labels, info.taints, info.name) is not None:
            start = -1
            _max_into(bound, node.free)  # closed to this class, not to the next
            continue
        if cls.domains.marks.repels(node.marks):
            start = -1
            _max_into(bound, node.free)
            continue  # a pod this plan put there keeps it off
        limit = min(cls.remaining, cls.domains.cap(info.name), cls.room_in(info.labels))
        _fill_node(cls, node, limit, commit)
        if start == index and fit_count(cls.requests_on(info.name), node.free, 1) == 0:
            start = pool.full[id(cls)] = index + 1  # full for the class: skipped from now on
        else:
            start = -1
        _max_into(bound, node.free)
    if first == 0:
        pool.bound = bound  # every node was visited: the bound is now exact


def _fill_node(cls: PodClass, node: WorkNode, limit: int, commit: Commit) -> None:
    """Up to ``limit`` pods of the class on ``node``, as many as its free room takes. The first pod
    brings the node the volumes the class's pods share (:attr:`PodClass.volumes`) that it has not got;
    the others find them there (kube-scheduler counts a volume of the node's pods once: csi.go Filter),
    so it is placed alone first and charged them once."""
    name = node.info.name
    placed = 0
    while placed < limit:
        count = fit_count(cls.requests_on(name), node.free, limit - placed)
        if count <= 0:
            return
        if count > 1 and cls.brings_volumes(name):
            count = 1
        commit(cls, node, count)
        cls.note_placed(node.info.labels, count)
        placed += count


def _place_on_node(ctx: Context, cls: PodClass, node: WorkNode, count: int, uncordon: bool) -> None:
    name = node.info.name
    add_room(node.free, cls.requests_on(name), -count)
    ctx.note_volumes(name, cls.volumes, count)
    node.receives += count
    node.marks = node.marks | cls.domains.marks
    group_key = node.group.key if node.group else None
    if uncordon:
        ctx.record(cls.take(count), name, group_key, UNCORDON_NOTE.format(node=name), codes.FITS_UNCORDONED)
        if node.group is not None:
            ctx.uncordoned[name] = node.group.key
    else:
        ctx.record(cls.take(count), name, group_key, FREE_ROOM_NOTE.format(node=name), codes.FITS_FREE_ROOM)


def place_on_launching(
    ctx: Context,
    cls: PodClass,
    candidates: Sequence[NodeGroup],
    backoff: Mapping[GroupKey, str | None],
    bins: Mapping[GroupKey, list[Bin]],
    limits: Limits | None = None,
) -> None:
    """Capacity already launching. A group whose launches fail is not really launching: its raised
    desired capacity is a promise EC2 is not keeping; the instances it did launch are its only launching
    nodes (``bins``: :func:`launching_bins`), and nothing of a group backed off for another reason is
    (:func:`~spillway.planner.groups.launched_only`). A limited tenant's class takes fresh launching
    nodes only as far as its limits allow, and is charged for them (``spillway.planner.limits``)."""
    for group in candidates:
        if backoff[group.key] and not launched_only(ctx, group):
            continue
        group_bins = bins.get(group.key)
        if group_bins and cls.remaining:
            limited = limits is not None and cls.tenant is not None and limits.active
            fresh = _fresh_nodes(group_bins)
            cap = cls.domains.new_node_cap(fresh_node_selected(ctx, group))  # it runs them first too
            want = _launching_cap(cls, group, group_bins, limits, fresh, cap) if limited else cls.remaining
            note = f"fits on capacity already launching in {group.name}; nothing new to launch"
            for node_id, count, _ in fill_launching(cls, group, group_bins, want, cap):
                ctx.record(cls.take(count), node_id, group.key, note, codes.FITS_LAUNCHING)
            if limited and limits is not None:
                limits.charge(cls.tenant, group, fresh - _fresh_nodes(group_bins), tenant_only=True)


def _fresh_nodes(bins: Sequence[Bin]) -> int:
    return sum(len(b.ids) for b in bins if b.fresh)


def _launching_cap(
    cls: PodClass, group: NodeGroup, bins: Sequence[Bin], limits: Limits | None, fresh: int, cap: int
) -> int:
    """Pods of a limited tenant's class launching capacity may take: the room left on launching nodes
    other classes took (topping up, as on new nodes) that its pods may use (not beside pods their pod
    topology repels: :func:`fill_bins` passes those by, and the pods counted there would go to more
    fresh nodes), and the fresh nodes the tenant's limits allow, each as it is (:func:`_fresh_take`: a
    registered one still launching is no template node); ``cap`` pods of it a node at most, as
    :func:`fill_bins` places them (a hostname spread counts the DaemonSet pods it selects there:
    :meth:`~spillway.planner.topology.Domains.new_node_cap`), else the pods reckoned on a fresh node
    beyond that go to another."""
    assert limits is not None
    touched = sum(
        cls.fit_with(b.free, _node_cap(cls, b, cap) - _held(cls, b), b.volumes) * len(b.ids)
        for b in bins
        if not b.fresh and not cls.domains.marks.repels(b.marks)
    )
    allowed, _ = limits.allowed(cls.tenant, group, fresh, tenant_only=True)
    return min(cls.remaining, touched + _fresh_take(cls, bins, allowed, cap))


def _fresh_take(cls: PodClass, bins: Sequence[Bin], allowed: int, cap: int) -> int:
    """Pods of ``cls`` the first ``allowed`` fresh launching nodes that take any hold, each its own
    room and cap (:func:`_node_cap`), in the order :func:`fill_launching` fills them: a registered node
    still launching has the room its pods leave, less than a template node's, or none, and
    :func:`fill_bins` passes by a node that takes none (not charged to the tenant then)."""
    total = 0
    for part in _by_place(bins).values():
        for b in part:
            if allowed <= 0:
                return total
            if not b.fresh or cls.domains.marks.repels(b.marks):
                continue
            per = cls.fit_with(b.free, _node_cap(cls, b, cap) - _held(cls, b), b.volumes)
            if per > 0:
                taken = min(allowed, len(b.ids))
                total, allowed = total + per * taken, allowed - taken
    return total
