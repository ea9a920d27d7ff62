"""The planner: ``plan(snapshot, groups, config, state, now) -> ScalingPlan``.

Pure and deterministic: no I/O, no clock (``now`` is an argument), no environment; the same input
gives the same plan, byte for byte. It works on throw-away working copies of the snapshot.

Scale-up places pending pods, grouped into equivalence classes, in this order:

1. free room on Ready, schedulable nodes (the scheduler will get there; nothing to launch);
2. capacity already launching (desired minus Ready nodes, per group), as empty template nodes;
3. nodes Spillway itself cordoned, which are uncordoned instead of launching;
4. new nodes: first-fit-decreasing into template nodes of the candidate groups, ordered by region
   preference, then least waste of the pod's dominant resource, then name. A group never passes
   MaxSize, a backed-off group is skipped, and what does not fit goes on to the next group — which is
   how demand spills into the secondary region.

Scale-down drains only nodes with no workload pods that have been idle long enough, never below
MinSize, at most ``max_scale_in_fraction`` of a group per plan, overflow regions first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from spillway.config import PlannerConfig
from spillway.model.cluster import ClusterSnapshot, NodeInfo, PodInfo, TaintT, Term, TolerationT
from spillway.model.k8s import DRAINING_TAINT
from spillway.model.nodegroup import NodeGroup
from spillway.model.resources import (
    CPU,
    MEMORY,
    NVIDIA_GPU,
    PODS,
    Resources,
    add_into,
    describe,
    dominant_share,
    fit_count,
    subtract,
)
from spillway.model.state import GroupState, NodeState, State
from spillway.planner.predicates import references_node_identity, why_not_placeable
from spillway.planner.types import (
    Drain,
    KeptNode,
    PendingPod,
    Placement,
    ScaleUp,
    ScalingPlan,
    Uncordon,
)

_UNBOUNDED = 1 << 40
_ONE_POD = 1000  # every pod takes one of the node's "pods" slots (milli-units)


def plan(
    snapshot: ClusterSnapshot,
    groups: Sequence[NodeGroup],
    config: PlannerConfig,
    state: State,
    now: datetime,
) -> ScalingPlan:
    """Decide what to grow, uncordon and drain, with a reason for every pod and node."""
    return _Planner(snapshot, groups, config, state, _aware(now)).run()


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _minutes(delta: timedelta) -> str:
    seconds = delta.total_seconds()
    return f"{seconds:.0f}s" if abs(seconds) < 60 else f"{seconds / 60:.0f}m"


# --- working copies ---------------------------------------------------------------------------


@dataclass(slots=True)
class _Node:
    info: NodeInfo
    group: NodeGroup | None
    used: Resources = field(default_factory=dict)
    workload: int = 0
    free: Resources = field(default_factory=dict)
    receives: int = 0  # pending pods this plan expects to run here
    shape: tuple[Any, ...] = ()


@dataclass(slots=True)
class _Pool:
    """Existing nodes of one shape (labels but hostname, taints): equal for every constraint but a name."""

    nodes: list[_Node]
    bound: Resources  # at least the free room of any node of the pool, per resource
    blocked: dict[int, bool] = field(default_factory=dict)  # by class id: constraints rule the pool out


def _pools(nodes: Iterable[_Node]) -> list[_Pool]:
    by_shape: dict[tuple[Any, ...], list[_Node]] = {}
    for node in nodes:
        by_shape.setdefault(node.shape, []).append(node)
    pools = []
    for members in by_shape.values():
        bound: Resources = {}
        for node in members:
            for name, value in node.free.items():
                if value > bound.get(name, -1):
                    bound[name] = value
        pools.append(_Pool(members, bound))
    return pools


@dataclass(slots=True)
class _Class:
    """Pending pods the scheduler cannot tell apart: same requests and constraints."""

    requests: Resources
    node_selector: tuple[tuple[str, str], ...]
    terms: tuple[Term, ...]
    tolerations: tuple[TolerationT, ...]
    priority: int
    pods: list[str]
    node_specific: bool
    next: int = 0

    @property
    def remaining(self) -> int:
        return len(self.pods) - self.next

    def take(self, count: int) -> list[str]:
        taken = self.pods[self.next : self.next + count]
        self.next += count
        return taken

    def blocker(self, labels: Mapping[str, str], taints: Sequence[TaintT], node: str | None) -> str | None:
        return why_not_placeable(self.node_selector, self.terms, self.tolerations, labels, taints, node)

    def sort_key(self) -> tuple[Any, ...]:
        r = self.requests
        return (-self.priority, -r.get(NVIDIA_GPU, 0), -r.get(CPU, 0), -r.get(MEMORY, 0), self.pods[0])


@dataclass(slots=True)
class _Bin:
    """Identical nodes (by id), each with ``free`` room left."""

    free: Resources
    ids: list[str]


def _fill_bins(request: Mapping[str, int], bins: list[_Bin], want: int) -> list[tuple[str, int]]:
    """First-fit ``want`` copies of ``request`` into ``bins``, splitting bins as they fill.

    Returns ``(node id, pods placed there)`` in placement order; the sum is what fitted.
    """
    out: list[tuple[str, int]] = []
    placed = 0
    i = 0
    while i < len(bins) and placed < want:
        current = bins[i]
        per = fit_count(request, current.free, _UNBOUNDED)
        if per <= 0:
            i += 1
            continue
        inserted: list[_Bin] = []
        full = min(len(current.ids), (want - placed) // per)
        if full:
            after = dict(current.free)
            add_into(after, request, -per)
            ids, current.ids = current.ids[:full], current.ids[full:]
            inserted.append(_Bin(after, ids))
            out.extend((node_id, per) for node_id in ids)
            placed += full * per
        rest = want - placed
        if rest and current.ids:
            after = dict(current.free)
            add_into(after, request, -rest)
            ids, current.ids = current.ids[:1], current.ids[1:]
            inserted.append(_Bin(after, ids))
            out.append((ids[0], rest))
            placed += rest
        bins[i:i] = inserted
        i += len(inserted)
        if not current.ids:
            del bins[i]
    return out


# --- the planner ------------------------------------------------------------------------------


class _Planner:
    def __init__(
        self,
        snapshot: ClusterSnapshot,
        groups: Sequence[NodeGroup],
        config: PlannerConfig,
        state: State,
        now: datetime,
    ) -> None:
        self.snapshot = snapshot
        self.groups = sorted(groups, key=lambda g: (g.region, g.name))
        self.config = config
        self.state = state
        self.now = now
        regions = list(config.regions)
        extra = sorted({g.region for g in self.groups} - set(regions))
        self.region_rank = {r: i for i, r in enumerate(regions + extra)}
        self.primary = regions[0] if regions else None
        self.pending_out: list[PendingPod] = []
        self.placements: list[Placement] = []
        self.uncordoned: dict[str, str] = {}  # node -> group
        self.new_pods: dict[str, list[str]] = {}  # group -> pods on new nodes
        self.new_nodes: dict[str, int] = {}
        self.overflow_notes: dict[str, set[str]] = {}

    # -- indexing --

    def _index(self) -> None:
        by_instance: dict[str, NodeGroup] = {}
        for g in self.groups:
            for iid in g.instance_ids:
                by_instance[iid] = g
        self.nodes: dict[str, _Node] = {}
        for info in sorted(self.snapshot.nodes, key=lambda n: n.name):
            instance = info.instance_id
            self.nodes[info.name] = _Node(info=info, group=by_instance.get(instance) if instance else None)
        self.ds_representatives: dict[tuple[str, str], PodInfo] = {}
        self.pending: list[PodInfo] = []
        for pod in self.snapshot.pods:
            if pod.daemonset and pod.owner_name:
                rep_key = (pod.namespace, pod.owner_name)
                current = self.ds_representatives.get(rep_key)
                if current is None or pod.key < current.key:
                    self.ds_representatives[rep_key] = pod
            if pod.terminal:
                continue
            if pod.node_name is not None:
                node = self.nodes.get(pod.node_name)
                if node is not None:
                    add_into(node.used, pod.requests)
                    node.used[PODS] = node.used.get(PODS, 0) + _ONE_POD
                    if pod.is_workload:
                        node.workload += 1
            elif pod.is_pending_unschedulable():
                self.pending.append(pod)
        for node in self.nodes.values():
            node.free = subtract(node.info.allocatable, node.used)
            node.shape = _shape(node.info)
        self.ready_in_group: dict[str, int] = {}
        for node in self.nodes.values():
            if node.group is not None and node.info.ready:
                self.ready_in_group[node.group.name] = self.ready_in_group.get(node.group.name, 0) + 1

    def _classes(self) -> list[_Class]:
        classes: dict[tuple[Any, ...], _Class] = {}
        cutoff = self.config.expendable_priority_cutoff
        for pod in sorted(self.pending, key=lambda p: p.key):
            if pod.priority < cutoff:
                self.pending_out.append(
                    PendingPod(
                        pod.key,
                        f"priority {pod.priority} is below expendable_priority_cutoff {cutoff}: "
                        "never triggers a scale-up",
                    )
                )
                continue
            key = pod.scheduling_key()
            cls = classes.get(key)
            if cls is None:
                requests = dict(pod.requests)
                requests[PODS] = requests.get(PODS, 0) + _ONE_POD
                cls = _Class(
                    requests=requests,
                    node_selector=pod.node_selector,
                    terms=pod.required_terms,
                    tolerations=pod.tolerations,
                    priority=pod.priority,
                    pods=[],
                    node_specific=references_node_identity(pod.node_selector, pod.required_terms),
                )
                classes[key] = cls
            cls.pods.append(pod.key)
        return sorted(classes.values(), key=_Class.sort_key)

    # -- group facts --

    def _backoff(self, group: NodeGroup) -> str | None:
        entry = self.state.groups.get(group.name)
        if entry is not None and _aware(entry.backoff_until) > self.now:
            why = f" ({entry.reason})" if entry.reason else ""
            return f"{group.name} backed off until {_iso(entry.backoff_until)}{why}"
        window = timedelta(minutes=self.config.launch_failure_backoff_minutes)
        recent = [f for f in group.launch_failures if _aware(f.at) > self.now - window]
        if recent:
            last = recent[-1]
            message = last.message if len(last.message) <= 160 else last.message[:157] + "..."
            return f"{group.name} launch failed {_minutes(self.now - _aware(last.at))} ago: {message}"
        return None

    def _ds_overhead(self, group: NodeGroup) -> Resources:
        """What the DaemonSets that would run on a new node of the group request there."""
        total: Resources = {}
        template = group.template
        if template is None:
            return total
        for rep_key in sorted(self.ds_representatives):
            pod = self.ds_representatives[rep_key]
            terms = tuple(tuple(r for r in term if not r[3]) for term in pod.required_terms)
            if any(not term for term in terms):
                terms = ()  # the term only pinned the pod to its node by name
            if why_not_placeable(
                pod.node_selector, terms, pod.tolerations, template.labels, template.taints, None
            ):
                continue
            add_into(total, pod.requests)
            total[PODS] = total.get(PODS, 0) + _ONE_POD
        return total

    def _region_key(self, group: NodeGroup) -> int:
        return self.region_rank.get(group.region, len(self.region_rank))

    # -- scale-up --

    def _place_on_nodes(self, cls: _Class, pools: Sequence[_Pool], on_place: str) -> None:
        """Place the class on existing nodes, first fit, pool by pool (nodes of one shape)."""
        for pool in pools:
            if not cls.next < len(cls.pods):
                return
            if not cls.node_specific:
                blocked = pool.blocked.get(id(cls))
                if blocked is None:
                    info = pool.nodes[0].info
                    blocked = cls.blocker(info.labels, info.taints, info.name) is not None
                    pool.blocked[id(cls)] = blocked
                if blocked:
                    continue
            if fit_count(cls.requests, pool.bound, 1) == 0:
                continue  # no node of the pool has that much room left
            bound: Resources = {}
            finished = False
            for node in pool.nodes:
                remaining = len(cls.pods) - cls.next
                if not remaining:
                    finished = True
                    break
                info = node.info
                if cls.node_specific and cls.blocker(info.labels, info.taints, info.name) is not None:
                    continue
                count = fit_count(cls.requests, node.free, remaining)
                if count > 0:
                    add_into(node.free, cls.requests, -count)
                    node.receives += count
                    group_name = node.group.name if node.group else None
                    self._record(cls.take(count), info.name, group_name, on_place.format(node=info.name))
                    if on_place is _UNCORDON_NOTE and node.group is not None:
                        self.uncordoned[info.name] = node.group.name
                for name, value in node.free.items():
                    if value > bound.get(name, -1):
                        bound[name] = value
            if not finished:
                pool.bound = bound  # every node was visited: the bound is now exact

    def _candidate_groups(self, cls: _Class) -> tuple[list[NodeGroup], dict[str, str]]:
        """Groups whose template could run the class, best first; and why each other group cannot."""
        fitting: list[tuple[tuple[Any, ...], NodeGroup]] = []
        rejected: dict[str, str] = {}
        for group in self.groups:
            template = group.template
            if template is None:
                rejected[group.name] = f"{group.name}: instance type unknown, no template node"
                continue
            blocker = cls.blocker(template.labels, template.taints, None)
            if blocker is not None:
                rejected[group.name] = f"{group.name}: {blocker}"
                continue
            empty = self.empty_free[group.name]
            per_node = fit_count(cls.requests, empty, _UNBOUNDED)
            if per_node <= 0:
                short = [
                    r
                    for r in sorted(cls.requests)
                    if cls.requests[r] > 0 and empty.get(r, 0) < cls.requests[r] and r != "ephemeral-storage"
                ]
                rejected[group.name] = (
                    f"{group.name}: a {group.instance_type} node has too little "
                    f"{', '.join(short) or 'room'} (needs {describe(cls.requests, short)})"
                )
                continue
            dominant, _ = dominant_share(cls.requests, empty)
            nodes_needed = math.ceil(cls.remaining / per_node)
            used = cls.remaining * cls.requests.get(dominant, 0)
            capacity = nodes_needed * empty.get(dominant, 1)
            waste = 1.0 - used / capacity if capacity else 1.0
            fitting.append(((self._region_key(group), round(waste, 6), group.name), group))
        fitting.sort(key=lambda kv: kv[0])
        return [g for _, g in fitting], rejected

    def _scale_up(self, classes: list[_Class]) -> None:
        schedulable = _pools(
            n
            for n in self.nodes.values()
            if n.info.ready and not n.info.unschedulable and not _has_taint(n.info, DRAINING_TAINT)
        )
        reclaimable = sorted(
            (
                n
                for n in self.nodes.values()
                if n.info.ready and n.info.cordoned_by_spillway and n.group is not None
            ),
            key=lambda n: (self._region_key(n.group) if n.group else 0, n.info.name),
        )
        for node in reclaimable:
            # Uncordoning also lifts Spillway's draining taint.
            node.info = _without_taint(node.info, DRAINING_TAINT)
            node.shape = _shape(node.info)
        reclaimable_pools = [_Pool([n], dict(n.free)) for n in reclaimable]  # in preference order
        self.empty_free = {
            g.name: subtract(g.template.allocatable, self._ds_overhead(g)) if g.template else {}
            for g in self.groups
        }
        launch_bins: dict[str, list[_Bin]] = {}
        for g in self.groups:
            launching = g.desired - self.ready_in_group.get(g.name, 0)
            if launching > 0 and g.template is not None:
                ids = [f"{g.name}/launching-{i + 1}" for i in range(launching)]
                launch_bins[g.name] = [_Bin(dict(self.empty_free[g.name]), ids)]
        new_bins: dict[str, list[_Bin]] = {g.name: [] for g in self.groups}
        room = {g.name: max(0, g.max_size - g.desired) for g in self.groups}
        backoff = {g.name: self._backoff(g) for g in self.groups}

        for cls in classes:
            # (1) free room on Ready, schedulable nodes
            self._place_on_nodes(
                cls, schedulable, "fits in free room on Ready node {node}; waiting for the scheduler"
            )
            if not cls.remaining:
                continue
            candidates, rejected = self._candidate_groups(cls)
            # (2) capacity already launching; a group whose launches fail for capacity is not really
            # launching: its raised desired capacity is a promise EC2 is not keeping.
            for group in candidates:
                if backoff[group.name]:
                    continue
                bins = launch_bins.get(group.name)
                if bins and cls.remaining:
                    note = f"fits on capacity already launching in {group.name}; nothing new to launch"
                    for node_id, count in _fill_bins(cls.requests, bins, cls.remaining):
                        self._record(cls.take(count), node_id, group.name, note)
            if not cls.remaining:
                continue
            # (3) nodes Spillway cordoned, uncordoned rather than launching new ones
            self._place_on_nodes(cls, reclaimable_pools, _UNCORDON_NOTE)
            if not cls.remaining:
                continue
            # (4) new nodes: first fit into nodes opened by this plan, then open more, best group first
            skipped: list[str] = []
            for group in candidates:
                if cls.remaining and new_bins[group.name]:
                    self._fill_new(cls, group, new_bins[group.name])
            for group in candidates:
                if not cls.remaining:
                    break
                if backoff[group.name]:
                    skipped.append(str(backoff[group.name]))
                    continue
                if room[group.name] <= 0:
                    skipped.append(f"{group.name} at MaxSize {group.max_size}")
                    continue
                per_node = fit_count(cls.requests, self.empty_free[group.name], _UNBOUNDED)
                opening = min(room[group.name], math.ceil(cls.remaining / per_node))
                room[group.name] -= opening
                opened = self.new_nodes.get(group.name, 0)
                self.new_nodes[group.name] = opened + opening
                ids = [f"{group.name}/new-{opened + i + 1}" for i in range(opening)]
                new_bins[group.name].append(_Bin(dict(self.empty_free[group.name]), ids))
                self._fill_new(cls, group, new_bins[group.name])
                if skipped:
                    self.overflow_notes.setdefault(group.name, set()).update(skipped)
                if cls.remaining and room[group.name] <= 0:
                    skipped.append(f"{group.name} at MaxSize {group.max_size}")
            if cls.remaining:
                self._unplaceable(cls, candidates, rejected, skipped)

    def _record(self, pods: Iterable[str], node: str, group: str | None, note: str) -> None:
        for pod in pods:
            self.placements.append(Placement(pod, node, group))
            self.pending_out.append(PendingPod(pod, note))

    def _fill_new(self, cls: _Class, group: NodeGroup, bins: list[_Bin]) -> None:
        for node_id, count in _fill_bins(cls.requests, bins, cls.remaining):
            pods = cls.take(count)
            self.placements.extend(Placement(pod, node_id, group.name) for pod in pods)
            self.new_pods.setdefault(group.name, []).extend(pods)

    def _unplaceable(
        self, cls: _Class, candidates: list[NodeGroup], rejected: dict[str, str], skipped: list[str]
    ) -> None:
        needs = describe(cls.requests, [r for r in sorted(cls.requests) if r != PODS])
        if not candidates:
            why = "; ".join(rejected[name] for name in sorted(rejected)) or "no managed node groups"
            reason = f"no node group can ever run this pod ({needs}): {why}"
        else:
            reason = f"every node group that fits is exhausted ({needs}): {'; '.join(skipped)}"
        for pod in cls.take(cls.remaining):
            self.pending_out.append(PendingPod(pod, reason))

    def _scale_up_actions(self) -> list[ScaleUp]:
        actions: list[ScaleUp] = []
        for group in sorted(self.groups, key=lambda g: (self._region_key(g), g.name)):
            count = self.new_nodes.get(group.name, 0)
            pods = sorted(self.new_pods.get(group.name, []))
            if count <= 0:
                continue
            noun = "node" if count == 1 else "nodes"
            reason = (
                f"{len(pods)} pending pod(s) need {count} new {group.instance_type} {noun} in {group.region}"
            )
            if self.primary and group.region != self.primary:
                reason += f" (overflow from primary region {self.primary})"
            notes = sorted(self.overflow_notes.get(group.name, ()))
            if notes:
                reason += "; skipped: " + "; ".join(notes)
            actions.append(
                ScaleUp(
                    group=group.name,
                    region=group.region,
                    from_size=group.desired,
                    to_size=group.desired + count,
                    pods=tuple(pods),
                    reason=reason,
                )
            )
        return actions

    # -- scale-down --

    def _scale_down(self) -> tuple[list[Drain], list[KeptNode], dict[str, NodeState]]:
        drains: list[Drain] = []
        kept: list[KeptNode] = []
        idle_state: dict[str, NodeState] = {}
        idle_needed = timedelta(minutes=self.config.scale_down_idle_minutes)
        launch_delay = timedelta(minutes=self.config.scale_down_delay_after_launch_minutes)
        claim = timedelta(minutes=self.config.drain_claim_minutes)
        candidates: list[tuple[_Node, datetime]] = []
        for name, node in self.nodes.items():
            info, group = node.info, node.group
            if name in self.uncordoned:
                kept.append(KeptNode(name, "uncordoned: pending pods fit on it"))
                continue
            if group is None:
                kept.append(KeptNode(name, "not in a managed node group"))
                continue
            if not info.ready:
                kept.append(KeptNode(name, "not Ready"))
                continue
            if node.workload:
                kept.append(
                    KeptNode(name, f"runs {node.workload} workload pod(s); {self._utilisation(node)}")
                )
                continue
            if node.receives:
                kept.append(KeptNode(name, f"a pending pod fits on it ({node.receives} pod(s) planned here)"))
                continue
            previous = self.state.nodes.get(name)
            idle_since = _aware(previous.idle_since) if previous else self.now
            idle_state[name] = NodeState(idle_since=idle_since)
            claimed = _aware(previous.draining_since) if previous and previous.draining_since else None
            if claimed is not None and self.now - claimed < claim and not info.unschedulable:
                idle_state[name] = NodeState(idle_since=idle_since, draining_since=claimed)
                kept.append(
                    KeptNode(name, f"drain planned {_minutes(self.now - claimed)} ago; the drain owns it")
                )
                continue
            if info.unschedulable and info.cordoned_by_spillway:
                kept.append(KeptNode(name, "being drained by Spillway"))
                continue
            if info.unschedulable:
                kept.append(KeptNode(name, "cordoned by someone else; Spillway leaves it alone"))
                continue
            if info.scale_down_disabled:
                kept.append(
                    KeptNode(name, "annotated cluster-autoscaler.kubernetes.io/scale-down-disabled=true")
                )
                continue
            if info.created_at is not None and self.now - _aware(info.created_at) < launch_delay:
                age = self.now - _aware(info.created_at)
                kept.append(
                    KeptNode(name, f"launched {_minutes(age)} ago, younger than {_minutes(launch_delay)}")
                )
                continue
            idle_for = self.now - idle_since
            if idle_for < idle_needed:
                kept.append(
                    KeptNode(name, f"idle for {_minutes(idle_for)} of the {_minutes(idle_needed)} needed")
                )
                continue
            candidates.append((node, idle_since))

        # Overflow regions first (bring work home), then the least useful, then the oldest.
        candidates.sort(
            key=lambda c: (
                -self._region_key(c[0].group) if c[0].group else 0,
                self._usefulness(c[0]),
                _aware(c[0].info.created_at) if c[0].info.created_at else self.now,
                c[0].info.name,
            )
        )
        draining_now: dict[str, int] = {}
        for node in self.nodes.values():
            if (
                node.group is not None
                and node.info.cordoned_by_spillway
                and node.info.name not in self.uncordoned
            ):
                draining_now[node.group.name] = draining_now.get(node.group.name, 0) + 1
        taken: dict[str, int] = {}
        for node, idle_since in candidates:
            group = node.group
            assert group is not None
            info = node.info
            after = group.desired - draining_now.get(group.name, 0) - taken.get(group.name, 0)
            if after <= group.min_size:
                kept.append(KeptNode(info.name, f"group {group.name} at MinSize {group.min_size}"))
                continue
            cap = max(1, math.floor(self.config.max_scale_in_fraction * group.desired))
            if taken.get(group.name, 0) >= cap:
                kept.append(
                    KeptNode(
                        info.name,
                        f"scale-in of {group.name} capped at {cap} node(s) per plan (max_scale_in_fraction)",
                    )
                )
                continue
            if info.instance_id is None:
                kept.append(KeptNode(info.name, "no EC2 instance id in spec.providerID"))
                continue
            taken[group.name] = taken.get(group.name, 0) + 1
            idle_state[info.name] = NodeState(idle_since=idle_since, draining_since=self.now)
            where = group.region
            if self.primary and group.region != self.primary:
                where += f", overflow region (bringing work home to {self.primary})"
            drains.append(
                Drain(
                    node=info.name,
                    instance_id=info.instance_id,
                    group=group.name,
                    region=group.region,
                    reason=f"no workload pods for {_minutes(self.now - idle_since)} "
                    f"(threshold {_minutes(idle_needed)}); group {group.name} in {where}",
                )
            )
        return drains, kept, idle_state

    def _usefulness(self, node: _Node) -> float:
        _, share = dominant_share(node.used, node.info.allocatable)
        return share

    def _utilisation(self, node: _Node) -> str:
        alloc = node.info.allocatable
        parts = []
        for r in (CPU, MEMORY, NVIDIA_GPU):
            if alloc.get(r):
                parts.append(f"{r} {100 * node.used.get(r, 0) / alloc[r]:.0f}%")
        return "requests " + ", ".join(parts)

    # -- the whole plan --

    def run(self) -> ScalingPlan:
        self._index()
        classes = self._classes()
        self._scale_up(classes)
        scale_up = self._scale_up_actions()
        drains, kept, idle_state = self._scale_down()
        uncordon = [
            Uncordon(
                node, group, "Spillway cordoned it; pending pods fit on it, so it is reused before launching"
            )
            for node, group in sorted(self.uncordoned.items())
        ]
        groups_state = {
            name: GroupState(backoff_until=entry.backoff_until, reason=entry.reason)
            for name, entry in sorted(self.state.groups.items())
            if _aware(entry.backoff_until) > self.now
        }
        new_state = State(nodes=dict(sorted(idle_state.items())), groups=groups_state)
        return ScalingPlan(
            scale_up=tuple(scale_up),
            uncordon=tuple(uncordon),
            drain=tuple(drains),
            pending=tuple(sorted(self.pending_out, key=lambda p: p.pod)),
            kept=tuple(sorted(kept, key=lambda k: k.node)),
            state=new_state,
            placements=tuple(sorted(self.placements, key=lambda p: p.pod)),
        )


_UNCORDON_NOTE = "will run on node {node}, which this plan uncordons"


def _shape(info: NodeInfo) -> tuple[Any, ...]:
    """Nodes with equal shapes are equal for every constraint that does not name a node."""
    labels = tuple(sorted((k, v) for k, v in info.labels.items() if k != "kubernetes.io/hostname"))
    return (labels, info.taints)


def _has_taint(info: NodeInfo, key: str) -> bool:
    return any(t[0] == key for t in info.taints)


def _without_taint(info: NodeInfo, key: str) -> NodeInfo:
    if not _has_taint(info, key):
        return info
    return replace(info, taints=tuple(t for t in info.taints if t[0] != key))
