"""Autoscaling policies the simulation compares: Spillway's planner, and three reference policies.

Every policy sees the cluster as an autoscaler would (Ready nodes and their pods, pending pods the
scheduler marked Unschedulable, the groups' desired capacity, instances and failed launches) and acts
through the same calls (SetDesiredCapacity, cordon, TerminateInstanceInAutoScalingGroup). Each decides
at ticks ``interval`` seconds apart, and only at ticks where something it looks at changed or one of its
timers runs out (:meth:`Policy.wakeup`): a tick where nothing changed would decide the same again.

The reference policies are approximations of published behaviour, written from the projects' own
documentation and code; what they leave out is said in each docstring. Training pods are not
evictable (``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"``, kubernetes-ec2-autoscaler's
``openai/do-not-drain``), as a batch cluster marks them: none of these policies kills a running pod
by design, and every one is counted honestly if it does.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from spillway.config import PlannerConfig
from spillway.model.resources import NVIDIA_GPU
from spillway.model.state import State
from spillway.planner import ScalingPlan, codes, plan
from spillway.planner.types import Drain
from spillway.sim.bounds import BOUND_RESOURCES
from spillway.sim.world import SimError, SimGroup, SimNode, Vector, World, vector


class Policy(Protocol):
    name: str
    reactive: bool  # False: never acts after the start, so it is never asked
    charges_tenants: bool  # True: says which tenant opened each node it launches (node-hours per tenant)

    def start(self, world: World) -> None:
        """Called once at time 0, before any job arrives."""

    def decide(self, world: World) -> None:
        """One decision at ``world.t``; acts on ``world``."""

    def wakeup(self, world: World) -> int | None:
        """The next time (seconds) a timer could change a decision, though nothing else changes."""


def _seconds(world: World, when: datetime) -> int:
    return math.ceil((when - world.epoch).total_seconds())


def _fits(free: list[int], req: Vector) -> bool:
    return free[0] >= req[0] and free[1] >= req[1] and free[2] >= req[2] and free[3] >= req[3]


def _take(free: list[int], req: Vector) -> None:
    free[0] -= req[0]
    free[1] -= req[1]
    free[2] -= req[2]
    free[3] -= req[3]


def _first_fit(bins: list[list[int]], req: Vector) -> bool:
    for free in bins:
        if _fits(free, req):
            _take(free, req)
            return True
    return False


class SpillwayPolicy:
    """Spillway: the pure planner, ``plan(snapshot, groups, config, state, now)``, as the plan Lambda runs it.

    Its plan is carried out the way the act layer does: uncordon, raise desired capacities (a launch
    refused for capacity leaves a Failed activity the next plan sees, and backs the group off), drain
    (cordon, evict, terminate with the desired capacity decremented; here one drain after the other,
    each cancelled when its node got pods since the plan: :meth:`_drain`; the termination ends the
    world's drain time, instant by default), remove the instances
    no node joined for (:mod:`spillway.planner.joins`). A drain of a node
    that runs pods (consolidation) evicts them first: a movable job restarts elsewhere with the restart
    penalty, an unmovable pod is killed and counted (:meth:`World.drain`). The state the planner returns
    is passed to the next plan.
    """

    name = "spillway"
    reactive = True
    charges_tenants = True

    def __init__(self, config: PlannerConfig, name: str = "spillway") -> None:
        self.name = name
        self.config = config
        self.state = State()
        self.window = timedelta(minutes=config.launch_failure_backoff_minutes)
        self.idle = timedelta(minutes=config.scale_down_idle_minutes)
        self.launch_delay = timedelta(minutes=config.scale_down_delay_after_launch_minutes)
        self.consolidate_after = timedelta(minutes=config.consolidation_after_minutes)
        self.provision = timedelta(minutes=config.max_node_provision_minutes)
        self.startup = timedelta(minutes=config.max_node_startup_minutes)
        self.unready = timedelta(minutes=config.scale_down_unready_minutes)
        self.recent = timedelta(minutes=config.consolidation_recent_pods_minutes)
        self.plans = 0
        # Consolidation judges busy nodes: it must be asked again whenever room frees on one, and once
        # each node is past its launch delay, though nothing else changes.
        self.consolidates = config.consolidation == "when-underutilized"
        # The config's next window edge (:meth:`_window_edge`), and the time it was computed from.
        self._edge: datetime | None = None
        self._edge_after: datetime | None = None

    def start(self, world: World) -> None:
        world.watch_room = self.consolidates

    def decide(self, world: World) -> None:
        self.plans += 1
        result = plan(
            world.snapshot(), world.node_groups(self.window), self.config, self.state, world.at(world.t)
        )
        self.state = result.state
        record_held(world, result)
        for uncordon in result.uncordon:
            world.uncordon(uncordon.node)
        for scale_up in result.scale_up:
            owners = [tenant for tenant, count in scale_up.tenants for _ in range(count)]
            world.set_desired(scale_up.group, scale_up.to_size, owners)
        for taint in result.soft_taint:
            world.set_candidate_taint(taint.node, taint.add)
        self._drain(world, result.drain)
        for entry in result.unregistered:  # the scale-down's remove_unregistered step
            world.remove_instance(entry.group, entry.instance_id, decrement=entry.decrement)

    def _drain(self, world: World, drains: Sequence[Drain]) -> None:
        """The plan's drains, one after the other, as DrainNode validates each when it starts: a drain
        whose node now runs pods the plan did not see there (placed since, e.g. by an earlier make room
        of the same plan) is cancelled, touching nothing, as ``_busy_planned_drain`` cancels it; a make
        room leaves such pods running, as its drain does. A pod the plan saw there is carried out as
        planned, so a drain the plan itself got wrong still kills, and is counted."""
        nodes = {d.node: world.node(d.node) for d in drains}
        planned = {name: _pods_on(node) for name, node in nodes.items() if node is not None}
        for drain in drains:
            node = nodes[drain.node]
            if node is None:
                raise SimError(f"the plan drains {drain.node}, which is no node of the simulated cluster")
            if node.leaving >= 0:
                continue  # a drain under way holds the node (DrainSuperseded): nothing to do again
            arrived = _pods_on(node) - planned[drain.node]
            if arrived and drain.terminate:
                world.counters.drains_cancelled += 1
                continue
            world.cordon(drain.node, "spillway")
            if not node.pods and drain.terminate:
                world.terminate(drain.node)
                continue
            pods = drain.pods or None
            if pods is not None and arrived:  # a pod that came since under a name the plan gave stays
                pods = tuple(
                    k for k in pods if k in node.pods and (k, node.pods[k].generation) not in arrived
                )
            # consolidation: evict (movable pods move), then terminate; make room: evict, keep the node
            world.drain(drain.node, pods, terminate=drain.terminate)

    def wakeup(self, world: World) -> int | None:
        now = world.at(world.t)
        due: list[datetime] = []
        for name, entry in self.state.nodes.items():
            node = world.node(name)  # a node registered whose GPUs have not is judged idle too
            if node is None:
                continue
            # each edge on its own: an idle node out of its launch delay with its idle timer still running
            # is kept by a timer, which the plan marks (planner.softtaint), before it may be drained; one
            # whose GPUs are late is unready, and waits the unready time instead (planner.scaledown:
            # unready_now), or the idle time should they come meanwhile
            edges = [entry.idle_since + self.idle, world.at(node.joined) + self.launch_delay]
            if not node.ready:
                edges.append(entry.idle_since + self.unready)
            due.extend(when for when in edges if when > now)
        if self.consolidates:
            for node in world.nodes.values():
                when = world.at(node.joined) + self.launch_delay
                if when > now:
                    due.append(when)
            for mark in self.state.underutilized.values():
                if mark.since + self.consolidate_after > now:
                    due.append(mark.since + self.consolidate_after)
            due.extend(self._recent_edges(world, now))
        claim = timedelta(minutes=self.config.drain_claim_minutes)
        for entry in self.state.nodes.values():  # a plan's drain claims its node this long
            if entry.draining_since is not None and entry.draining_since + claim > now:
                due.append(entry.draining_since + claim)
        for room in self.state.rooms.values():  # a make room holds its node for its pods this long
            if room.since + claim > now:
                due.append(room.since + claim)
        for mark in self.state.joining.values():  # an instance that has not joined comes due
            if mark.since + self.provision > now:
                due.append(mark.since + self.provision)
        # a node whose GPUs are late stops counting as launching: idle, its idle timer starts then
        for node in world.registering():
            if world.at(node.joined) + self.startup > now:
                due.append(world.at(node.joined) + self.startup)
        for group in world.groups.values():
            due.extend(f.at + self.window for f in group.failures if f.at + self.window > now)
        due.extend(g.backoff_until for g in self.state.groups.values() if g.backoff_until > now)
        edge = self._window_edge(now)
        if edge is not None:
            due.append(edge)
        return _seconds(world, min(due)) if due else None

    def _recent_edges(self, world: World, now: datetime) -> list[datetime]:
        """When each pod on a marked node stops being recent (``consolidation_recent_pods_minutes`` after
        it started): a node marked for its recent pods loses the mark then (planner.softtaint), though
        nothing happens in the world. Every pod's edge, not only those the planner may not move: which
        those are is the planner's judgement (planner.disruption.assess_move: a job marked movable may
        not be, under a drains' deadline shorter than its grace), and a second copy of it here could
        drift from it; a wake-up too many costs one plan, one too few a missed change."""
        if not self.recent:
            return []
        ends = (
            world.at(job.start) + self.recent
            for n in world.nodes.values()
            if n.candidate
            for job in n.pods.values()
        )
        return [when for when in ends if when > now]

    def _window_edge(self, now: datetime) -> datetime | None:
        """The config's next window edge after ``now`` (a buffer opening, a budget closing, ...): the
        world need not change for the plan to. Kept until passed, so it is computed once per edge (None,
        windows that never change, is kept for good)."""
        stale = self._edge_after is None or now < self._edge_after
        if stale or (self._edge is not None and now >= self._edge):
            self._edge_after = now
            self._edge = self.config.next_window_edge(now)
        return self._edge


def _pods_on(node: SimNode) -> set[tuple[str, int]]:
    """The node's pods, each as (key, its job's generation): a restarted job's pods are new pods."""
    return {(key, job.generation) for key, job in node.pods.items()}


def record_held(world: World, result: ScalingPlan) -> None:
    """Pods the plan left pending because a limit binds, by tenant (the namespace) and limit code."""
    for pending in result.pending:
        if pending.code in codes.LIMIT_CODES:
            tenant = pending.pod.split("/", 1)[0]
            world.counters.held.setdefault(tenant, {}).setdefault(pending.code, set()).add(pending.pod)


def holds_a_pod(group: SimGroup, world: World) -> bool:
    """An empty node of the group holds some pod of a job some group can run."""
    return any(
        all(a >= r for a, r in zip(group.alloc, vector(pod), strict=True))
        for sim_job in world.jobs
        if sim_job.runnable
        for pod in sim_job.job.pods
    )


def unplaced(pods: Sequence[Vector], nodes: Sequence[Vector]) -> Vector | None:
    """The first of ``pods`` (largest first) that finds no room on ``nodes``, empty, each pod on the first
    node it fits (first fit decreasing); None when every pod finds room."""
    free = [list(node) for node in nodes]
    for req in sorted(pods, reverse=True):
        slot = next((f for f in free if all(a >= r for a, r in zip(f, req, strict=True))), None)
        if slot is None:
            return req
        for i, r in enumerate(req):
            slot[i] -= r
    return None


def hold_every_job(world: World, groups: Sequence[SimGroup]) -> None:
    """Add nodes to ``groups`` (MaxSize respected; of the groups whose node fits the pod left over, the one
    with the fewest GPUs, then in order of preference) until every runnable job's pods fit the fleet's
    nodes, empty: room summed over nodes is not room a gang's pods fit in (three 40-CPU pods
    on two 63.77-CPU nodes), and a static fleet that holds a job on no day never starts it."""
    shapes = {tuple(sorted(vector(p) for p in j.job.pods)) for j in world.jobs if j.runnable}
    for pods in sorted(shapes, reverse=True):
        while (req := unplaced(pods, [g.alloc for g in groups for _ in range(g.desired)])) is not None:
            fits = [
                g
                for g in groups
                if g.desired < g.spec.max_size and all(a >= r for a, r in zip(g.alloc, req, strict=True))
            ]
            # the fewest GPUs first (a CPU pod's node is no GPU node where a CPU one fits), then preference
            group = min(fits, key=lambda g: g.template.allocatable.get(NVIDIA_GPU, 0), default=None)
            if group is None:
                break  # MaxSize holds it back: the job waits forever, as it would on the real fleet
            world.preprovision(group.name, 1)


class StaticPolicy:
    """Static provisioning for the peak: nodes Ready from the start, never changed, that hold the peak of
    every resource the trace asks for (``Bounds.peak_demand``: GPUs, CPU, memory, each at its own time).

    For each resource in turn (GPUs, then CPU, then memory) the fleet's room of it (MinSize nodes and the
    nodes added for the resources before) is topped up to its peak: nodes go first to the groups whose
    type has the most room of it, in order of preference among them, each up to its MaxSize, as many as
    hold the rest. With one node type that is the step bound's peak of nodes in the primary group; on a
    mixed fleet the GPU nodes come first (their CPU and memory count), and a CPU peak that falls at
    another time than the GPUs' is held by the groups with the most CPU (an 8-GPU job at one hour and a
    CPU gang at another need a GPU node and a CPU node: held to the peak of one resource, the one that
    bound most often, the fleet under-provisioned the other and its jobs never started). A group gets no
    node when its node can hold no pod of the trace (its room would serve no job), nor when its MaxSize
    is 0 (the bound leaves its type out, ``spillway.sim.run.fleet``); only nodes that hold some pod count
    toward a peak. Room is summed, not packed, so nodes are then added where a job's pods would not fit
    the fleet empty (:func:`hold_every_job`): every job can start on it some day. Pods that fragment the
    room of a busy fleet can still wait.
    """

    name = "static"
    reactive = False
    charges_tenants = False

    def __init__(self, peaks: Mapping[str, int]) -> None:
        self.peaks = dict(peaks)

    def start(self, world: World) -> None:
        useful = [g for g in world.groups.values() if g.spec.max_size > 0 and holds_a_pod(g, world)]
        for resource in (r for r in BOUND_RESOURCES if self.peaks.get(r)):

            def room(group: SimGroup, resource: str = resource) -> int:
                return group.template.allocatable.get(resource, 0)

            wanted = self.peaks[resource] - sum(g.desired * room(g) for g in useful)
            # stable: the primary first among types alike
            for group in sorted((g for g in useful if room(g) > 0), key=lambda g: -room(g)):
                extra = min(-(-wanted // room(group)), group.spec.max_size - group.desired)
                if extra > 0:  # MaxSize is respected
                    world.preprovision(group.name, extra)
                    wanted -= extra * room(group)
        hold_every_job(world, useful)

    def decide(self, world: World) -> None:
        return None

    def wakeup(self, world: World) -> int | None:
        return None


class Ec2AutoscalerPolicy:
    """An approximation of openai/kubernetes-ec2-autoscaler (defaults of its ``main.py`` and ``cluster.py``).

    Scale-up, every loop while pods are pending: pods that fit on a registered node (first fit; cordoned
    nodes count, as its ``can_fit`` ignores them) are left to the scheduler; the rest are first-fit into
    new instances of the groups in region order, and a group's desired capacity is raised to *registered
    nodes + instances needed + 5* (``--over-provision 5``), never lowered, capped at MaxSize. A group with
    a failed launch is "timed out" for an hour (``_TIMEOUT``) and only its launching capacity counts; the
    rest goes to the next region.

    Scale-down, per node (its ``get_node_state``): nodes of a group at MinSize, busy nodes above 30% use,
    nodes while any pod is pending, and nodes in the first half of each instance-hour are kept; up to 5
    idle nodes a type are kept as spares while younger than 7 days (``--type-idle-threshold``); other
    idle nodes are kept while the *instance* is younger than 55 minutes (``--idle-threshold 3300``):
    idleness is measured as instance age, not idle time. A node past all that is cordoned, and terminated
    at the next loop. Under-used busy nodes would be drained for their replicated pods; training pods
    are ``openai/do-not-drain`` here, so they are left alone.

    Left out: reservations, spot pricing timeouts, Azure, instances that never join (``instance-init-time``),
    and its use of ``timedelta.seconds`` for age (which wraps every day); true instance age is used.
    The jobs ``--movable-fraction`` marks movable are left alone too: this reference drains no busy node
    (the real one would drain an under-used node of such pods).
    Capacity is the node's allocatable room, not its ``status.capacity``.
    """

    name = "ec2-autoscaler"
    reactive = True
    charges_tenants = False
    OVER_PROVISION = 5
    IDLE_THRESHOLD = 3300
    TYPE_IDLE_THRESHOLD = 7 * 24 * 3600
    TYPE_IDLE_COUNT = 5
    UTIL_THRESHOLD = 0.3
    LAUNCH_HOUR_THRESHOLD = 1800
    TIMEOUT = 3600

    def __init__(self) -> None:
        self.timed_out: dict[str, int] = {}

    def start(self, world: World) -> None:
        return None

    def decide(self, world: World) -> None:
        # Pods no group could ever hold are skipped with a warning (its ``capacity.is_possible``).
        pods = [req for job in world.pending_jobs() if job.runnable for req in job.reqs]
        if pods:
            self._scale(world, pods)
        self._maintain(world, bool(pods))

    def _scale(self, world: World, pods: list[Vector]) -> None:
        free = [list(n.free) for n in sorted(world.nodes.values(), key=lambda n: n.name)]
        unfit = [req for req in pods if not _first_fit(free, req)]
        if not unfit:
            return
        for group in world.groups.values():
            bins: list[list[int]] = []
            assigned: list[list[int]] = []
            empty = list(group.alloc)
            for i, req in enumerate(unfit):
                if not _fits(empty, req):
                    continue
                for b, room in enumerate(bins):
                    if _fits(room, req):
                        _take(room, req)
                        assigned[b].append(i)
                        break
                else:
                    room = list(group.alloc)
                    _take(room, req)
                    bins.append(room)
                    assigned.append([i])
            needed = len(bins) + self.OVER_PROVISION
            actual = group.ready
            if self.timed_out.get(group.name, -1) > world.t:
                unavailable = max(0, needed - (group.desired - actual))
            else:
                unavailable = max(0, needed - (group.spec.max_size - actual))
            requested = needed - unavailable
            self._scale_group(world, group, actual + requested)
            accounted = {i for pods_of in assigned[: min(len(assigned), requested)] for i in pods_of}
            unfit = [req for i, req in enumerate(unfit) if i not in accounted]
            if not unfit:
                break

    def _scale_group(self, world: World, group: SimGroup, new_desired: int) -> None:
        desired = min(group.spec.max_size, new_desired)
        nodes = [n for n in group.instances.values() if n.ready]
        schedulable = sum(1 for n in nodes if not n.cordoned)
        if schedulable < desired:
            for node in sorted(nodes, key=lambda n: n.name):
                if node.cordoned and node.cordoned_by == self.name:
                    world.uncordon(node.name)
                    schedulable += 1
                    if schedulable == desired:
                        break
        raise_it = desired > group.desired and group.desired != group.spec.max_size
        if raise_it and not world.set_desired(group.name, desired):
            self.timed_out[group.name] = world.t + self.TIMEOUT

    def _maintain(self, world: World, pending: bool) -> None:
        spares: dict[str, int] = {}
        for node in sorted(world.nodes.values(), key=lambda n: n.name):
            group = node.group
            if group.ready <= group.spec.min_size or node.leaving >= 0:
                continue
            busy = bool(node.pods)
            used = [a - f for a, f in zip(node.alloc, node.free, strict=True)]
            under = all(u <= self.UTIL_THRESHOLD * a for u, a in zip(used, node.alloc, strict=True))
            if busy and not under:
                if node.cordoned and node.cordoned_by == self.name:
                    world.uncordon(node.name)
                continue
            if pending and not node.cordoned:
                continue
            age = world.t - node.launched
            if age % 3600 < self.LAUNCH_HOUR_THRESHOLD and not node.cordoned:
                continue
            itype = group.spec.instance_type
            spare = spares.get(itype, 0) < self.TYPE_IDLE_COUNT
            if not spare and age <= self.IDLE_THRESHOLD and not node.cordoned:
                continue
            if spare and age <= self.TYPE_IDLE_THRESHOLD and not node.cordoned:
                spares[itype] = spares.get(itype, 0) + 1
                continue
            if under and (busy or not node.cordoned):
                if not busy:  # drainable: nothing to evict
                    world.cordon(node.name, self.name)
                continue  # busy: its pods are do-not-drain
            if node.cordoned and group.desired - world.leaving(group.name) - 1 >= group.spec.min_size:
                world.terminate(node.name)

    def wakeup(self, world: World) -> int | None:
        t = world.t
        due: list[int] = []
        for node in world.nodes.values():
            if node.pods or node.cordoned:
                continue
            age = t - node.launched
            half = node.launched + (age // 3600) * 3600 + self.LAUNCH_HOUR_THRESHOLD
            crossings = (
                half,
                half + 3600,
                node.launched + self.IDLE_THRESHOLD + 1,
                node.launched + self.TYPE_IDLE_THRESHOLD + 1,
            )
            later = [when for when in crossings if when > t]
            if later:
                due.append(min(later))
        due.extend(until for until in self.timed_out.values() if until > t)
        return min(due) if due else None


class ClusterAutoscalerPolicy:
    """An approximation of kubernetes/autoscaler's cluster-autoscaler with its default flags.

    Scale-up from unschedulable pods: pods that fit on existing nodes (simulated first fit) or on nodes
    still launching (desired minus registered, as template nodes) are left alone; for the rest each
    group not backed off and below MaxSize is an option sized by a first-fit-decreasing bin-packing
    estimate, and the default ``random`` expander picks one (seeded), one group per loop. Launches that
    fail show at the next loop, which backs the group off for 5 minutes, doubling to 30
    (``initial/max-node-group-backoff-duration``), and picks among the other groups.

    Scale-down: a node is unneeded when its utilisation (GPU nodes: GPU requests over allocatable;
    others: the larger of CPU and memory) is under 50% (``--scale-down-utilization-threshold``) and all
    its pods can move elsewhere; pods marked ``safe-to-evict: "false"`` never can, so only empty nodes
    qualify here. After 10 minutes unneeded (``--scale-down-unneeded-time``) empty nodes are deleted, at
    most 10 at a time (``--max-empty-bulk-delete``), never below MinSize, and not within 10 minutes of a
    scale-up (``--scale-down-delay-after-add``; unneeded time still accrues meanwhile). A pass that
    deletes nothing gives unneeded nodes the ``PreferNoSchedule`` deletion candidate taint and lifts it
    from the others, at most 10 changes a loop (``--max-bulk-soft-taint-count``; the world's scheduler
    then puts new pods elsewhere first).

    An instance that has not registered ``--max-node-provision-time`` (15 minutes) after it was first
    seen is deleted (the group's size decremented, not below MinSize) and its group backed off as after a
    failed launch; meanwhile it counts as a node coming. So does a GPU node whose device plugin has not
    registered its GPUs yet (``--device-plugin-seconds``), as cluster-autoscaler's GPU handling makes it
    (for nodes that carry its GPU label).

    Left out: the 10 s scan interval (every policy decides at the same ``--interval`` here, to compare
    decisions rather than loop periods), balancing of similar groups, non-empty node consolidation
    (it never applies when pods cannot be evicted), unready nodes. So the pods ``--movable-fraction``
    marks ``safe-to-evict: "true"``, which cluster-autoscaler would move off a node under 50% (its FAQ:
    the annotation lets a pod be evicted whatever else holds it), keep their node here as the others
    do: this reference removes only empty nodes at any movable fraction, moves nothing (0 moves a
    job) and is a comparison for Spillway's consolidation only at ``--movable-fraction 0``.
    """

    name = "cluster-autoscaler"
    reactive = True
    charges_tenants = False
    UNNEEDED = 600
    DELAY_AFTER_ADD = 600
    UTILISATION = 0.5
    MAX_EMPTY_BULK_DELETE = 10
    MAX_BULK_SOFT_TAINT = 10
    BACKOFF_INITIAL = 300
    BACKOFF_MAX = 1800
    BACKOFF_RESET = 3 * 3600
    MAX_NODE_PROVISION = 900

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(f"cluster-autoscaler/{seed}")
        self.unneeded: dict[str, int] = {}
        self.unregistered: dict[str, int] = {}  # instance id -> when first seen without a node
        self.last_scale_up = -(10**12)
        self.backoff: dict[str, tuple[int, int, int]] = {}  # group -> (until, duration, last failure)

    def start(self, world: World) -> None:
        return None

    def decide(self, world: World) -> None:
        self._remove_unregistered(world)
        scaled = self._scale_up(world)
        self._update_unneeded(world)
        if scaled or world.t < self.last_scale_up + self.DELAY_AFTER_ADD:
            return
        self._scale_down(world)

    def _remove_unregistered(self, world: World) -> None:
        t = world.t
        seen = {
            node.instance_id: (node, self.unregistered.get(node.instance_id, t))
            for node in world.unregistered()
        }
        self.unregistered = {iid: since for iid, (_, since) in seen.items()}
        for iid, (node, since) in seen.items():
            if t - since < self.MAX_NODE_PROVISION:
                continue
            group = node.group
            if group.desired - 1 >= group.spec.min_size:
                world.remove_instance(group.name, iid)
                del self.unregistered[iid]
            if not self._backed_off(group, t):
                self._fail(group, t)

    def _backed_off(self, group: SimGroup, t: int) -> bool:
        entry = self.backoff.get(group.name)
        return entry is not None and entry[0] > t

    def _fail(self, group: SimGroup, t: int) -> None:
        entry = self.backoff.get(group.name)
        if entry is not None and t - entry[2] < self.BACKOFF_RESET:
            duration = min(self.BACKOFF_MAX, entry[1] * 2)
        else:
            duration = self.BACKOFF_INITIAL
        self.backoff[group.name] = (t + duration, duration, t)

    def _scale_up(self, world: World) -> bool:
        pods = [req for job in world.pending_jobs() for req in job.reqs]
        if not pods:
            return False
        free = [list(n.free) for n in world.nodes.values() if not n.cordoned]
        pods = [req for req in pods if not _first_fit(free, req)]
        upcoming = [list(g.alloc) for g in world.groups.values() for _ in range(max(0, g.desired - g.ready))]
        pods = [req for req in pods if not _first_fit(upcoming, req)]
        if not pods:
            return False
        ordered = sorted(pods, key=lambda r: (-r[2], -r[0], -r[1]))
        t = world.t
        options: list[tuple[SimGroup, int]] = []
        for group in world.groups.values():
            room = group.spec.max_size - group.desired
            if room <= 0 or self._backed_off(group, t):
                continue
            bins: list[list[int]] = []
            empty = list(group.alloc)
            for req in ordered:
                if not _fits(empty, req):
                    continue
                if not _first_fit(bins, req):
                    if len(bins) >= room:
                        continue
                    fresh = list(group.alloc)
                    _take(fresh, req)
                    bins.append(fresh)
            if bins:
                options.append((group, len(bins)))
        if not options:
            return False
        group, count = options[self.rng.randrange(len(options))]
        if not world.set_desired(group.name, group.desired + count):
            # IncreaseSize succeeded as far as it knows; the instances fail to launch, and the group is
            # backed off when that shows (the next loop here), which then picks another option.
            self._fail(group, t)
        self.last_scale_up = t
        return True

    def _utilisation(self, node: SimNode) -> float:
        used = [a - f for a, f in zip(node.alloc, node.free, strict=True)]
        if node.alloc[2]:
            return used[2] / node.alloc[2]
        return max(used[0] / node.alloc[0], used[1] / node.alloc[1])

    def _update_unneeded(self, world: World) -> None:
        t = world.t
        current: dict[str, int] = {}
        for name, node in world.nodes.items():
            movable = not node.pods  # workload pods are safe-to-evict=false
            if movable and not node.cordoned and self._utilisation(node) < self.UTILISATION:
                current[name] = self.unneeded.get(name, t)
        self.unneeded = current

    def _scale_down(self, world: World) -> None:
        t = world.t
        due = sorted((since, name) for name, since in self.unneeded.items() if t - since >= self.UNNEEDED)
        deleted = 0
        for _, name in due:
            if deleted >= self.MAX_EMPTY_BULK_DELETE:
                break
            group = world.nodes[name].group
            if group.desired - world.leaving(group.name) - 1 < group.spec.min_size:
                continue
            world.terminate(name)
            del self.unneeded[name]
            deleted += 1
        if not deleted:
            self._soft_taints(world)

    def _soft_taints(self, world: World) -> None:
        """After a scale-down pass that deleted nothing, as ``RunOnce`` does: lift the candidate taint from
        nodes no longer unneeded, then give it to unneeded ones, ``--max-bulk-soft-taint-count`` (10) a
        loop in all, lifting first."""
        budget = self.MAX_BULK_SOFT_TAINT
        needed = sorted(n for n, node in world.nodes.items() if node.candidate and n not in self.unneeded)
        unneeded = sorted(n for n in self.unneeded if not world.nodes[n].candidate)
        for name, present in [*((n, False) for n in needed), *((n, True) for n in unneeded)][:budget]:
            world.set_candidate_taint(name, present)

    def wakeup(self, world: World) -> int | None:
        t = world.t
        due = [since + self.UNNEEDED for since in self.unneeded.values() if since + self.UNNEEDED > t]
        if self.unneeded and self.last_scale_up + self.DELAY_AFTER_ADD > t:
            due.append(self.last_scale_up + self.DELAY_AFTER_ADD)
        due.extend(entry[0] for entry in self.backoff.values() if entry[0] > t)
        due.extend(since + self.MAX_NODE_PROVISION for since in self.unregistered.values())
        due = [d for d in due if d > t]
        return min(due) if due else None
