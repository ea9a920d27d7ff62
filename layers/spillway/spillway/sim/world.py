"""The simulated cluster: Auto Scaling groups, instances that become nodes, jobs of pods, a scheduler.

Time is whole seconds from the simulation epoch. Everything here is deterministic given the seed.

**Auto Scaling groups.** Raising a group's desired capacity launches instances at once; each becomes a
Ready node ``boot_seconds`` later. During an injected capacity outage a launch fails: the group records a
``Failed`` "Launching a new EC2 instance" activity with EC2's InsufficientInstanceCapacity message, and its
desired capacity goes back to what it was. That is what each autoscaler's actuator does on such a
failure (Spillway's scale-up workflow verifies the launch and backs the group off; cluster-autoscaler
deletes the failed placeholders; kubernetes-ec2-autoscaler resets the desired capacity), so it is done
once here. Terminating an instance decrements the desired capacity, never below MinSize.

**Scheduler.** A model of kube-scheduler's default profile for the resources in play: the
NodeResourcesFit filter (requests fit the node's free allocatable room, pods slot included; cordoned
nodes are filtered out by NodeUnschedulable) and its score, ``LeastAllocated`` (the default) or
``MostAllocated`` (the bin-packing strategy), on the configured resources and weights (default cpu=1,
memory=1, as kube-scheduler's), with the same integer arithmetic:

* least: ``(allocatable - requested) * 100 / allocatable`` per resource, weighted mean;
* most: ``min(requested, allocatable) * 100 / allocatable`` per resource, weighted mean;

``requested`` counts the pod being placed, CPU and memory as "non-zero" requests (100m and 200 MiB for a
pod that requests none), and an extended resource (GPUs) is left out of the score of a pod that does not
request it. The highest score wins; ties are broken at random (seeded), as ``selectHost`` does. In
clusters over 100 nodes only the first ``numFeasibleNodesToFind`` feasible nodes (adaptive
``percentageOfNodesToScore``: 50% - nodes/125, at least 5% and 100 nodes), searched round robin from
where the previous search stopped, are scored. A node carrying the scale-down candidate taint
(``PreferNoSchedule``, which no simulated pod tolerates) loses to every scored node without it, as
TaintToleration's score makes it, and still wins when the scored nodes all carry it. Other score
plugins (BalancedAllocation, ImageLocality, topology spreading, affinity) are not modelled: with
requests proportional to GPUs, as a GPU-only trace has, BalancedAllocation scores every node alike.

Pending pods are tried in queue order (priority, then submit time). A pod the scheduler could not place
is retried when capacity frees up or a node becomes Ready, against the nodes that changed only (the
others could not hold it and have not changed: kube-scheduler's queueing hints make the same cut).

**Gangs.** A job of several pods starts only when all of its pods are placed: they are placed
together or not at all (all-or-nothing, as the scheduler-plugins Coscheduling plugin does with a
PodGroup whose minMember is the job's size; without it, pods of a job would hold nodes while waiting
for the rest). Pending time is measured from submit to the start of the whole job, plus, for a job
sent back to the queue (moved, killed or interrupted), the time from then to its next start.

**Moves.** A drain of a node that runs pods (:meth:`World.drain`) evicts them and terminates the node.
A job whose pods are marked movable (``safe-to-evict: "true"``, :attr:`SimJob.movable`) goes back to
the queue and resumes elsewhere, its remaining time grown by ``restart_penalty`` (progress since its
last checkpoint, and the restart itself); a pod not marked movable, or one the drain's plan did not
name, is killed, and counted: its job starts over from the beginning, as on a node terminated with
pods on it, its progress lost.

**Drain time** (``drain_seconds``, 0 by default: drains are instant). A real drain takes time: the
drain state machine cordons, evicts, waits for the evicted pods to terminate (their
``terminationGracePeriodSeconds``, 30 s by default, a ``preStop`` hook) and only then calls
TerminateInstanceInAutoScalingGroup; an instance is billed while ``running`` and no longer once
``shutting-down`` (the EC2 instance lifecycle's billing table). So with ``drain_seconds`` S, every
termination of a Ready node by a policy (:meth:`World.terminate`, which a drain ends with) starts a
drain: the node is cordoned at once (no pod is placed there again), its pods are evicted or killed at
once as above (a Job's replacement pods are created as soon as the old ones are terminating, the Job
controller's default ``podReplacementPolicy``, so the jobs are back in the queue at once), and it stays
a node of its group, billed, counted and its group's desired capacity unchanged, until S seconds later
it is terminated (:meth:`World.terminated`; the desired capacity is decremented then). A policy that
uncordons it meanwhile stops the drain, as DrainNode's steps stop when the node is no longer cordoned
by Spillway: it stays, empty and schedulable (``drains_reclaimed``). The same for every policy.

**Spot**:
an instance of a group with an interruption rate is taken back after an exponentially distributed
time (seeded) from its launch; its jobs marked movable restart as moved ones do, the others start
over as killed ones do (both counted as interrupted, not as moves or kills), and the group launches a
replacement (its desired capacity is unchanged), as an Auto Scaling group does.

**Deadlines.** With known durations (``--duration-noise``: :attr:`SimJob.expected`) each pod of a job
that starts carries ``activeDeadlineSeconds`` (:meth:`SimJob.deadline`): the job's remaining run time
grown by the factor its known duration exceeds the real one by; a restarted job's new pods get one from
their new remaining time. It is never shorter than the run, so no pod is ended by its deadline.
"""

from __future__ import annotations

import bisect
import heapq
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from spillway.model.aws import AutoScalingGroup, Tag, bundled_instance_types
from spillway.model.cluster import ClusterSnapshot, NodeInfo, PodInfo
from spillway.model.k8s import CANDIDATE_TAINT, CANDIDATE_TAINT_EFFECT
from spillway.model.nodegroup import (
    TAG_ENABLED,
    LaunchFailure,
    NodeGroup,
    TemplateNode,
    build_template,
)
from spillway.model.reserve import EKS_RESERVE, ReserveLike
from spillway.model.resources import CPU, MEMORY, NVIDIA_GPU, PODS, Resources
from spillway.sim.trace import Job

RESOURCES = (CPU, MEMORY, NVIDIA_GPU, PODS)
_CPU, _MEM, _GPU, _PODS = range(4)
_NONZERO_CPU = 100  # milli-CPU counted for a pod that requests none (scoring only)
_NONZERO_MEMORY = 200 * 2**20 * 1000  # 200 MiB, milli
_MIN_FEASIBLE = 100
_MIN_PERCENT = 5
# TaintToleration's score (weight 3 in the default profile, NodeResourcesFit's 1) normalizes the count of
# PreferNoSchedule taints a pod does not tolerate so that a node with none scores 100 and the node with
# the most scores 0: with one such taint in play, any node without it outscores one with it (3 x 100 is
# more than the 100 NodeResourcesFit can give); among nodes alike in that, NodeResourcesFit decides.
_CANDIDATE_PENALTY = 1000
_CANDIDATE = (CANDIDATE_TAINT, None, CANDIDATE_TAINT_EFFECT)
ACCOUNT = "123456789012"
ICE_MESSAGE = (
    "We currently do not have sufficient {itype} capacity in the Availability Zone you requested ({zone}). "
    "Our system will be working on provisioning additional capacity. Launching EC2 instance failed."
)

# Event kinds, in the order they are handled at one instant: capacity frees up before new work arrives.
COMPLETE, BOOT, ARRIVE, INTERRUPT, PLUGIN, TERMINATE = 0, 1, 2, 3, 4, 5

Vector = tuple[int, int, int, int]
# activeDeadlineSeconds is an int64 (k8s.io/api core/v1 PodSpec): the longest deadline a pod can carry
LONGEST_DEADLINE = 2**63 - 1


class SimError(RuntimeError):
    """The simulation was asked to do something AWS or Kubernetes would refuse."""


@dataclass(frozen=True, slots=True)
class GroupSpec:
    name: str
    region: str
    instance_type: str
    min_size: int = 0
    max_size: int = 1000
    spot_rate: float = 0.0  # Spot interruptions per instance-hour (0: on-demand, never interrupted)
    price: float | None = None  # USD an hour of its instances, over the price table (e.g. a Spot price)


@dataclass(frozen=True, slots=True)
class Outage:
    """Launches in ``group`` fail from ``start`` to ``end`` (seconds from the epoch, end excluded)."""

    group: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    scoring: str = "least-allocated"  # or "most-allocated"
    resources: tuple[tuple[str, int], ...] = ((CPU, 1), (MEMORY, 1))


def vector(requests: Mapping[str, int]) -> Vector:
    return (requests.get(CPU, 0), requests.get(MEMORY, 0), requests.get(NVIDIA_GPU, 0), requests.get(PODS, 0))


def runnable(job: Job, allocatables: Sequence[Vector]) -> bool:
    """Every pod of the job fits on an empty node of some group (else no autoscaler can ever run it);
    ``allocatables``: the room of the groups that may launch a node (MaxSize above 0)."""
    for pod in job.pods:
        req = vector(pod)
        if not any(all(a >= r for a, r in zip(alloc, req, strict=True)) for alloc in allocatables):
            return False
    return True


def group_template(spec: GroupSpec, reserve: ReserveLike, cluster: str) -> TemplateNode:
    """The node a group launches, built by the same code as production (``build_template``)."""
    catalogue = bundled_instance_types()
    if spec.instance_type not in catalogue:
        raise SimError(f"instance type {spec.instance_type!r} is not in the bundled catalogue")
    asg = AutoScalingGroup(
        AutoScalingGroupName=spec.name,
        AutoScalingGroupARN=(
            f"arn:aws:autoscaling:{spec.region}:{ACCOUNT}:autoScalingGroup:00000000-0000-0000-0000-"
            f"000000000000:autoScalingGroupName/{spec.name}"
        ),
        MinSize=spec.min_size,
        MaxSize=spec.max_size,
        DesiredCapacity=spec.min_size,
        AvailabilityZones=[f"{spec.region}a"],
        Tags=[
            Tag(Key=TAG_ENABLED, Value="true"),
            Tag(Key=f"k8s.io/cluster-autoscaler/{cluster}", Value="owned"),
        ],
    )
    template = build_template(asg, spec.instance_type, catalogue, reserve)
    if template is None:
        raise SimError(f"no template node for {spec.instance_type}")
    return template


class SimGroup:
    """An Auto Scaling group: desired capacity, its instances, its failed launches."""

    def __init__(self, spec: GroupSpec, template: TemplateNode, outages: Sequence[Outage]) -> None:
        self.spec = spec
        self.name = spec.name
        self.region = spec.region
        self.template = template
        self.alloc: Vector = vector(template.allocatable)
        self.desired = 0
        self.instances: dict[str, SimNode] = {}  # instance id -> instance, launch order
        self.ready = 0
        self.failures: list[LaunchFailure] = []
        self.outages = sorted((o.start, o.end) for o in outages)
        self.version = 0
        self._cached: NodeGroup | None = None
        self._cached_key: tuple[int, int] = (-1, -1)

    def in_outage(self, t: int) -> bool:
        return any(start <= t < end for start, end in self.outages)

    def node_group(self, now: datetime, failure_window: timedelta) -> NodeGroup:
        recent = tuple(f for f in self.failures if f.at > now - failure_window)
        key = (self.version, len(recent))
        if self._cached is None or key != self._cached_key:
            self._cached = NodeGroup(
                name=self.name,
                region=self.region,
                min_size=self.spec.min_size,
                max_size=self.spec.max_size,
                desired=self.desired,
                instance_type=self.spec.instance_type,
                template=self.template,
                zones=(f"{self.region}a",),
                instance_ids=tuple(self.instances),
                launch_failures=recent,
                arn=f"arn:aws:autoscaling:{self.region}:{ACCOUNT}:autoScalingGroup:sim:autoScalingGroupName/{self.name}",
                # what the spillway.io/capacity-type tag says of a Spot group
                capacity_type="spot" if self.spec.spot_rate > 0 else "on-demand",
            )
            self._cached_key = key
        return self._cached


class SimNode:
    """An EC2 instance of a group; a Kubernetes node once Ready."""

    __slots__ = (
        "alloc",
        "batch",
        "candidate",
        "cordoned",
        "cordoned_by",
        "free",
        "group",
        "info",
        "instance_id",
        "joined",
        "launched",
        "leaving",
        "name",
        "pods",
        "ready",
        "ready_at",
        "scores",
        "seq",
        "tenant",
        "used",
    )

    def __init__(self, name: str, instance_id: str, group: SimGroup, launched: int, seq: int) -> None:
        self.name = name
        self.instance_id = instance_id
        self.group = group
        self.launched = launched
        self.ready_at = -1
        self.joined = -1  # when it registered as a node (with plugin_seconds, before it is ready)
        self.ready = False
        self.seq = seq
        self.alloc = group.alloc
        self.free = list(group.alloc)
        self.used = [0, 0, 0, 0]  # non-zero requests, for scoring
        self.pods: dict[str, SimJob] = {}  # pod key -> its job
        self.cordoned = False
        self.cordoned_by: str | None = None
        self.scores: dict[Vector, int] = {}
        self.info: NodeInfo | None = None
        self.tenant: str | None = None  # the tenant charged for it (see World.set_desired)
        self.batch: list[str] | None = None  # tenants of its launch not yet given a node
        self.candidate = False  # carries the PreferNoSchedule scale-down candidate taint
        self.leaving = -1  # being drained: when its instance is terminated (World.drain_seconds)

    @property
    def workload(self) -> int:
        return len(self.pods)

    def fits(self, req: Vector) -> bool:
        f = self.free
        return f[0] >= req[0] and f[1] >= req[1] and f[2] >= req[2] and f[3] >= req[3]


class SimJob:
    """A job's life in the simulation."""

    __slots__ = (
        "attempted",
        "expected",
        "generation",
        "interruptions",
        "job",
        "key",
        "movable",
        "moves",
        "nodes",
        "pod_keys",
        "pod_requests",
        "queued",
        "remaining",
        "reqs",
        "runnable",
        "sreqs",
        "start",
        "state",
        "waited",
    )

    def __init__(self, job: Job) -> None:
        self.job = job
        self.key = (-job.priority, job.submit, job.id)
        # Largest pods first, so a gang is placed as a bin-packer would.
        order = sorted(
            range(len(job.pods)),
            key=lambda i: (-job.pods[i].get(NVIDIA_GPU, 0), -job.pods[i].get(CPU, 0), i),
        )
        self.pod_keys = [f"{job.namespace}/{job.name}-{i}" for i in order]
        self.pod_requests = [{k: v for k, v in job.pods[i].items() if k != PODS} for i in order]
        self.reqs: list[Vector] = [vector(job.pods[i]) for i in order]
        self.sreqs: list[Vector] = [
            (r[0] or _NONZERO_CPU, r[1] or _NONZERO_MEMORY, r[2], r[3]) for r in self.reqs
        ]
        self.runnable = True  # some group can run every pod of it
        self.state = "waiting"  # waiting (not yet submitted), pending, running, done
        self.attempted = False  # the scheduler tried it against every node and it did not fit
        self.start = -1
        self.nodes: list[SimNode] = []
        self.generation = 0
        self.remaining = job.duration  # seconds it runs once started (a restart adds its penalty)
        self.movable = job.movable  # its pods are marked safe-to-evict: "true" (the planner may move them)
        self.moves = 0  # restarts elsewhere because a drain moved it (not interruptions, not kills)
        self.interruptions = 0  # restarts because EC2 took back a Spot node it ran on
        self.expected = job.expected  # a known upper bound of its duration (--duration-noise), else None
        self.queued = job.submit  # when it last joined the queue
        self.waited = 0  # seconds pending, over every time it was queued

    def deadline(self) -> int | None:
        """The activeDeadlineSeconds its pods started now carry: the remaining run time grown by the
        factor of its known duration over its real one (never less than the remaining time: no pod is
        ended by its deadline), at most :data:`LONGEST_DEADLINE` (a restart's penalty can leave more
        than the whole duration to run); None when durations are unknown."""
        if self.expected is None:
            return None
        duration = max(1, self.job.duration)
        return max(1, min(LONGEST_DEADLINE, -(-self.remaining * max(self.expected, duration) // duration)))


@dataclass(slots=True)
class Counters:
    scale_up_calls: int = 0  # SetDesiredCapacity raising a group (successful)
    failed_launch_calls: int = 0  # raises refused by a capacity outage
    nodes_launched: int = 0
    nodes_terminated: int = 0
    cordons: int = 0
    uncordons: int = 0
    soft_taints: int = 0  # scale-down candidate taints set or lifted
    pods_killed: int = 0  # pods running on a node when it was terminated
    jobs_killed: int = 0
    # restarts elsewhere of movable jobs a drain evicted as its plan said (each time; Spot interruptions
    # and kills are not moves)
    moves: int = 0
    # pods not marked movable that a policy killed, by a drain's eviction or by terminating their node
    # (must stay 0; Spot interruptions are EC2's doing, counted apart)
    unmovable_killed: int = 0
    drains_cancelled: int = 0  # a plan's drains cancelled: their node got pods since the plan
    drains_reclaimed: int = 0  # drains stopped by an uncordon before their node's termination (drain_seconds)
    interruptions: int = 0  # Spot instances taken back
    never_joined: int = 0  # launches whose instance never became a node (--join-failure-rate)
    unregistered_removed: int = 0  # of those, instances a policy removed (terminate with decrement)
    interruption_restarts: int = 0  # restarts of jobs because their node was interrupted (each time)
    # GPU-seconds of progress lost: a move's or an interruption's penalty x GPUs; a killed job's progress
    lost_gpu_seconds: int = 0
    node_seconds: dict[str, int] = field(default_factory=dict)  # by instance type
    group_seconds: dict[str, int] = field(default_factory=dict)  # by group
    tenant_seconds: dict[str, int] = field(default_factory=dict)  # by the tenant that opened the node
    # pods a policy's limits held: tenant -> limit code -> pod keys (Spillway: its plans' pending codes)
    held: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    used_seconds: int = 0  # milli-units of the measured resource x seconds
    capacity_seconds: int = 0


class World:
    """The cluster under one autoscaling policy."""

    def __init__(
        self,
        groups: Sequence[GroupSpec],
        *,
        epoch: datetime,
        boot_seconds: int,
        scheduler: SchedulerConfig,
        outages: Sequence[Outage] = (),
        reserve: ReserveLike | None = None,
        seed: int = 0,
        cluster: str = "sim",
        track_infos: bool = False,
        measure: str = NVIDIA_GPU,
        restart_penalty: int = 0,
        join_failure_rate: float = 0.0,
        plugin_seconds: int = 0,
        drain_seconds: int = 0,
    ) -> None:
        if not groups:
            raise SimError("no node groups")
        names = [g.name for g in groups]
        if len(set(names)) != len(names):
            raise SimError("node group names must be unique")
        unknown = sorted({o.group for o in outages} - set(names))
        if unknown:
            raise SimError(f"outage for unknown group(s): {', '.join(unknown)}")
        if not 0 <= join_failure_rate < 1:
            raise SimError(f"join failure rate {join_failure_rate!r} is not in [0, 1)")
        if plugin_seconds < 0:
            raise SimError(f"device plugin delay {plugin_seconds!r} is negative")
        if drain_seconds < 0:
            raise SimError(f"drain time {drain_seconds!r} is negative")
        reserve = reserve if reserve is not None else EKS_RESERVE
        self.epoch = epoch
        self.cluster = cluster
        self.boot_seconds = boot_seconds
        self.groups: dict[str, SimGroup] = {}
        for spec in groups:
            template = group_template(spec, reserve, cluster)
            self.groups[spec.name] = SimGroup(spec, template, [o for o in outages if o.group == spec.name])
        self.rng = random.Random(seed)
        self.spot_rng = random.Random(f"spot/{seed}")
        self.join_rng = random.Random(f"join/{seed}")
        self.join_failure_rate = join_failure_rate
        self.plugin_seconds = plugin_seconds
        self.drain_seconds = drain_seconds
        self.restart_penalty = restart_penalty
        self.most = scheduler.scoring == "most-allocated"
        if scheduler.scoring not in ("least-allocated", "most-allocated"):
            raise SimError(f"unknown scoring strategy {scheduler.scoring!r}")
        index = {name: i for i, name in enumerate(RESOURCES)}
        self.score_resources: list[tuple[int, int, bool]] = []
        for name, weight in scheduler.resources:
            if name not in index:
                raise SimError(f"cannot score on {name!r}: the simulation models {', '.join(RESOURCES[:3])}")
            self.score_resources.append((index[name], weight, name not in (CPU, MEMORY)))
        self.measure = RESOURCES.index(measure)
        self.track = track_infos
        self.t = 0
        self.events: list[tuple[int, int, int, Any]] = []
        self._seq = 0
        self._node_seq = 0
        self.nodes: dict[str, SimNode] = {}  # Ready nodes, in the order they became Ready
        self.order: list[SimNode] = []  # the scheduler's node list
        self.next_start = 0
        self.pending: list[tuple[tuple[int, int, int], SimJob]] = []  # sorted by key
        self.new_jobs: list[SimJob] = []
        self.freed: dict[str, SimNode] = {}
        self.jobs: list[SimJob] = []
        self.running = 0
        self.done = 0
        self.dirty = False  # something the autoscaler would see changed since it last decided
        # the policy consolidates: room freed or taken on a busy node is a change too
        self.watch_room = False
        self.counters = Counters()
        # job id -> (seconds pending, every time it was queued, to its last start; weight: its GPUs, >= 1);
        # jobs that never started are not here (the report counts them waiting until the end)
        self.waits: dict[int, tuple[int, int]] = {}
        self.alive = 0
        self.series: list[tuple[int, int]] = [(0, 0)]  # (time, instances alive) at every change
        self.pod_infos: dict[str, PodInfo] = {}
        self.node_infos: dict[str, NodeInfo] = {}
        self._dt_cache: tuple[int, datetime] = (-1, epoch)

    # -- time and events --

    def at(self, t: int) -> datetime:
        if self._dt_cache[0] != t:
            self._dt_cache = (t, self.epoch + timedelta(seconds=t))
        return self._dt_cache[1]

    def push(self, t: int, kind: int, payload: Any) -> None:
        self._seq += 1
        heapq.heappush(self.events, (t, kind, self._seq, payload))

    # -- Auto Scaling --

    def preprovision(self, group_name: str, count: int) -> None:
        """Nodes that exist, Ready, when the simulation starts (MinSize, static provisioning)."""
        group = self.groups[group_name]
        for _ in range(count):
            node = self._launch(group)
            self._ready(node)
        group.desired += count
        group.version += 1

    def set_desired(self, group_name: str, desired: int, owners: Sequence[str] = ()) -> bool:
        """SetDesiredCapacity. Raising it launches instances now; during an outage the launch fails.

        ``owners`` names the tenants the new instances are charged to, one each (Spillway's
        ``ScaleUp.tenants``). Which instance is whose is settled when work lands: an instance of the
        launch goes to the tenant of the first pod that runs on it, if that tenant has one of the
        launch's instances still to take, else to the first tenant left; one that never runs a pod is
        charged, when billed, to the first tenant left.
        """
        group = self.groups[group_name]
        if desired < group.spec.min_size or desired > group.spec.max_size:
            raise SimError(
                f"SetDesiredCapacity({group_name}, {desired}) outside [{group.spec.min_size}, {group.spec.max_size}]"
            )
        if desired <= group.desired:
            if desired < len(group.instances):
                raise SimError("lowering the desired capacity below the instance count is not modelled")
            group.desired = desired
            group.version += 1
            return True
        self.dirty = True
        if group.in_outage(self.t):
            self.counters.failed_launch_calls += 1
            self._launch_failed(group)
            return False
        self.counters.scale_up_calls += 1
        batch = list(owners) or None
        for _ in range(desired - len(group.instances)):
            node = self._launch(group)
            node.batch = batch
            self._boot_later(node)
        group.desired = desired
        group.version += 1
        return True

    def _launch_failed(self, group: SimGroup) -> None:
        """A launch of ``group`` refused for capacity: the Failed scaling activity with EC2's message,
        which the planner reads as it would in production."""
        message = ICE_MESSAGE.format(itype=group.spec.instance_type, zone=f"{group.region}a")
        group.failures.append(LaunchFailure(at=self.at(self.t), message=message))
        if len(group.failures) > 64:
            del group.failures[:-64]
        group.version += 1

    def _launch(self, group: SimGroup) -> SimNode:
        self._node_seq += 1
        seq = self._node_seq
        instance_id = f"i-{seq:017x}"
        address = f"10-{seq >> 16 & 255}-{seq >> 8 & 255}-{seq & 255}"  # unique below 2**24 nodes
        node = SimNode(f"ip-{address}.{group.region}.compute.internal", instance_id, group, self.t, seq)
        group.instances[instance_id] = node
        self.counters.nodes_launched += 1
        self._alive(+1)
        if group.spec.spot_rate > 0:
            hours = self.spot_rng.expovariate(group.spec.spot_rate)
            self.push(self.t + max(1, round(hours * 3600)), INTERRUPT, node)
        return node

    def _alive(self, delta: int) -> None:
        self.alive += delta
        if self.series[-1][0] == self.t:
            self.series[-1] = (self.t, self.alive)
        else:
            self.series.append((self.t, self.alive))

    def _boot_later(self, node: SimNode) -> None:
        """The instance becomes a node after the boot time, unless its launch is one of the broken ones
        (``join_failure_rate``, seeded): then it stays an instance of its group, paid for, that no node
        ever names, until a policy removes it (:meth:`remove_instance`)."""
        if self.join_failure_rate and self.join_rng.random() < self.join_failure_rate:
            self.counters.never_joined += 1
            return
        self.push(self.t + self.boot_seconds, BOOT, node)

    def unregistered(self) -> list[SimNode]:
        """Instances that are no node (yet: booting, or never: a broken launch)."""
        return [
            node
            for group in self.groups.values()
            for node in group.instances.values()
            if not node.ready and node.joined < 0
        ]

    def registering(self) -> list[SimNode]:
        """Nodes registered whose GPUs have not (``plugin_seconds``)."""
        return [
            node
            for group in self.groups.values()
            for node in group.instances.values()
            if not node.ready and node.joined >= 0
        ]

    def node(self, node_name: str) -> SimNode | None:
        """The Node of that name the autoscaler sees: a Ready one, or one registered whose GPUs have not
        (``plugin_seconds``), which a plan may drain as any other node once it no longer counts as
        starting; None when there is none."""
        node = self.nodes.get(node_name)
        if node is not None:
            return node
        return next((n for n in self.registering() if n.name == node_name), None)

    def remove_instance(self, group_name: str, instance_id: str, *, decrement: bool = True) -> None:
        """TerminateInstanceInAutoScalingGroup of an instance that is no node (a broken launch):
        decrementing the desired capacity (AWS refuses to go below MinSize), or not, and the group
        launches a replacement."""
        group = self.groups[group_name]
        node = group.instances.get(instance_id)
        if node is None or node.ready:
            raise SimError(f"{instance_id} is not an instance of {group_name} without a node")
        if decrement and group.desired - 1 < group.spec.min_size:
            raise SimError(f"removing {instance_id} would take {group_name} below MinSize")
        del group.instances[instance_id]
        group.desired -= 1 if decrement else 0
        group.version += 1
        self._bill(node)
        self.counters.capacity_seconds += node.alloc[self.measure] * (self.t - node.launched)
        self._alive(-1)
        self.dirty = True
        self.counters.nodes_terminated += 1
        self.counters.unregistered_removed += 1
        if not decrement:
            replacement = self._launch(group)
            replacement.batch = None
            self._boot_later(replacement)

    def boot(self, node: SimNode) -> None:
        """The instance registers as a Node. A GPU node with ``plugin_seconds`` is Ready without its GPUs
        (the device plugin registers them that much later): the autoscaler sees it so, and the
        scheduler has no room on it for any pod until then (every pod of a GPU trace asks for GPUs)."""
        if node.instance_id not in node.group.instances:
            return
        node.joined = self.t
        if self.plugin_seconds and node.alloc[_GPU]:
            self.dirty = True
            if self.track:
                self._node_info(node)
            self.push(self.t + self.plugin_seconds, PLUGIN, node)
            return
        self._ready(node)

    def plugin(self, node: SimNode) -> None:
        """The node's device plugin registered its GPUs."""
        if node.instance_id in node.group.instances:
            self._ready(node)

    def _ready(self, node: SimNode) -> None:
        node.ready = True
        node.ready_at = self.t
        node.joined = self.t if node.joined < 0 else node.joined
        node.group.ready += 1
        node.group.version += 1
        self.nodes[node.name] = node
        self.order.append(node)
        self.freed[node.name] = node
        self.dirty = True
        if self.track:
            self._node_info(node)

    def leaving(self, group_name: str) -> int:
        """Nodes of the group being drained (``drain_seconds``): terminated soon, their desired capacity
        not yet decremented."""
        return sum(1 for node in self.groups[group_name].instances.values() if node.leaving >= 0)

    def _check_min_size(self, node: SimNode) -> None:
        group = node.group
        if node.leaving >= 0:
            raise SimError(f"{node.name} is being drained already")
        if group.desired - self.leaving(group.name) - 1 < group.spec.min_size:
            raise SimError(f"terminating {node.name} would take {group.name} below MinSize")

    def terminate(self, node_name: str) -> None:
        """TerminateInstanceInAutoScalingGroup with the desired capacity decremented: now, or, with
        ``drain_seconds``, at the end of the drain this starts (the node cordoned until then).

        Pods still running there are killed (counted, and as unmovable killed when not marked movable);
        their jobs go back to the queue and start over.
        """
        node = self.node(node_name)
        if node is None:
            raise SimError(f"no node {node_name}")
        self._check_min_size(node)
        for key, job in list(node.pods.items()):
            if key in node.pods:
                self._kill_on(node, job)
        if self.drain_seconds:
            self.cordon(node_name, node.cordoned_by or "drain")
            node.leaving = self.t + self.drain_seconds
            self.push(node.leaving, TERMINATE, node)
            return
        self._terminated(node)

    def terminated(self, node: SimNode) -> None:
        """The end of a drain (``drain_seconds`` after it started): the instance is terminated, unless the
        drain was stopped (uncordoned) or the instance went some other way (a Spot interruption)."""
        if node.group.instances.get(node.instance_id) is not node or node.leaving != self.t:
            return
        self._terminated(node)

    def _terminated(self, node: SimNode) -> None:
        group = node.group
        self._remove(node)
        group.desired -= 1
        group.version += 1
        self.counters.nodes_terminated += 1

    def drain(self, node_name: str, pods: Sequence[str] | None = None, *, terminate: bool = True) -> None:
        """A drain of a node that runs pods, as the drain state machine does it: evict, then terminate.

        The pods of a job marked movable are evicted and the job restarts elsewhere (back to the queue,
        its remaining time grown by the restart penalty: :meth:`_restart`). A pod not marked movable is
        evicted all the same (a real drain would, once a PDB allows it) but killed: its job starts over
        from the beginning, as on a terminated node (:meth:`_kill_on`), and counts as killed, not moved;
        a policy that drains one breaks the rule it must keep, and the report shows it. ``pods``, when
        given, are the pods the plan said it moves; a pod left out dies with the node, killed the same
        way (counted as unmovable killed too when it is not marked movable).

        ``terminate`` false (make room): the node stays, and so does every pod the plan did not name; the
        evicted jobs are placed again while it is cordoned, as their replacement pods are during the
        drain's eviction rounds, then it is uncordoned for the pending pods the plan gave it.
        """
        node = self.node(node_name)
        if node is None:
            raise SimError(f"no node {node_name}")
        if terminate:
            self._check_min_size(node)
        for key, job in list(node.pods.items()):
            if key not in node.pods:
                continue  # a pod of a job already evicted from this node
            here = [k for k, n in zip(job.pod_keys, job.nodes, strict=True) if n is node]
            if not terminate and pods is not None and not any(k in pods for k in here):
                continue  # make room: the pods it does not name stay
            # a terminating drain moves a job only when the plan named every pod of it on the node
            named = pods is None or not terminate or all(k in pods for k in here)
            if job.movable and named:
                self.counters.moves += 1
                job.moves += 1
                self._restart(job)
            else:
                self._kill_on(node, job)
        if terminate:
            self.terminate(node_name)
            return
        self.schedule()
        self.uncordon(node_name)

    def interrupt(self, node: SimNode) -> None:
        """EC2 takes a Spot instance back, and the group replaces it. Its jobs go back to the queue: one
        marked movable resumes with the restart penalty, as a moved one does; another (nothing says it
        can resume) starts over, its progress lost, as a killed one does. Neither is a policy's move or
        kill: both count as interrupted."""
        group = node.group
        if group.instances.get(node.instance_id) is not node:
            return  # terminated before
        self.counters.interruptions += 1
        if node.ready:
            for key, job in list(node.pods.items()):
                if key in node.pods:
                    self.counters.interruption_restarts += 1
                    job.interruptions += 1
                    if job.movable:
                        self._restart(job)  # it resumes from its checkpoint, as a moved job does
                    else:
                        self._start_over(job)  # nothing to resume from: its progress is lost
            self._remove(node)
        else:
            del group.instances[node.instance_id]
            self._bill(node)
            self.counters.capacity_seconds += node.alloc[self.measure] * (self.t - node.launched)
            self._alive(-1)
            if self.track:
                self.node_infos.pop(node.name, None)  # a node whose GPUs had not registered yet
        group.version += 1
        self.dirty = True
        if group.in_outage(self.t):
            # The replacement's launch fails as a raise's does: a Failed activity the planner backs the
            # group off for, and the desired capacity back to what runs (the actuator's give-back).
            self._launch_failed(group)
            group.desired = max(group.spec.min_size, group.desired - 1, len(group.instances))
            return
        replacement = self._launch(group)
        replacement.batch = None
        self._boot_later(replacement)

    def _remove(self, node: SimNode) -> None:
        """A node's instance is gone: out of the scheduler (a Ready one), billed up to now."""
        group = node.group
        if node.ready:
            del self.nodes[node.name]
            self.order.remove(node)
            self.freed.pop(node.name, None)
            group.ready -= 1
        del group.instances[node.instance_id]
        group.version += 1
        self._bill(node)
        self.counters.capacity_seconds += node.alloc[self.measure] * (self.t - node.launched)
        self._alive(-1)
        self.dirty = True
        if self.track:
            self.node_infos.pop(node.name, None)

    def _bill(self, node: SimNode) -> None:
        if node.tenant is None and node.batch:
            node.tenant = node.batch.pop(0)
        seconds = self.t - node.launched
        group = node.group
        by_type, by_group = self.counters.node_seconds, self.counters.group_seconds
        by_type[group.spec.instance_type] = by_type.get(group.spec.instance_type, 0) + seconds
        by_group[group.name] = by_group.get(group.name, 0) + seconds
        if node.tenant is not None:
            by_tenant = self.counters.tenant_seconds
            by_tenant[node.tenant] = by_tenant.get(node.tenant, 0) + seconds

    def cordon(self, node_name: str, by: str) -> None:
        node = self.node(node_name)
        if node is None:
            raise SimError(f"no node {node_name}")
        if not node.cordoned:
            node.cordoned = True
            node.cordoned_by = by
            self.counters.cordons += 1
            self.dirty = True
            if self.track:
                self._node_info(node)

    def set_candidate_taint(self, node_name: str, present: bool) -> None:
        """Add or lift the PreferNoSchedule scale-down candidate taint on a Node, one whose GPUs have not
        registered too (:meth:`node`: a plan marks it while its unready time runs); a node gone since:
        nothing."""
        node = self.node(node_name)
        if node is None or node.candidate == present:
            return
        node.candidate = present
        self.counters.soft_taints += 1
        self.dirty = True  # the Node changed: production's next snapshot differs, and the next plan runs
        if self.track:
            self._node_info(node)

    def uncordon(self, node_name: str) -> None:
        """Uncordon; a node being drained (``drain_seconds``) stays: its drain stops, as DrainNode's
        steps stop once the node is no longer cordoned by Spillway."""
        node = self.node(node_name)
        if node is None:
            raise SimError(f"no node {node_name}")
        if node.leaving >= 0:
            node.leaving = -1
            self.counters.drains_reclaimed += 1
        if node.cordoned:
            node.cordoned = False
            node.cordoned_by = None
            self.counters.uncordons += 1
            self.freed[node.name] = node
            self.dirty = True
            if self.track:
                self._node_info(node)

    # -- jobs --

    def arrive(self, sim_job: SimJob) -> None:
        sim_job.state = "pending"
        sim_job.queued = self.t
        sim_job.attempted = False
        self.new_jobs.append(sim_job)

    def complete(self, sim_job: SimJob, generation: int) -> None:
        if sim_job.generation != generation or sim_job.state != "running":
            return
        sim_job.state = "done"
        self.running -= 1
        self.done += 1
        self.counters.used_seconds += (self.t - sim_job.start) * sim_job.job.total(RESOURCES[self.measure])
        self._release(sim_job)

    def _release(self, sim_job: SimJob) -> None:
        pending_exist = bool(self.pending)
        for key, req, sreq, node in zip(
            sim_job.pod_keys, sim_job.reqs, sim_job.sreqs, sim_job.nodes, strict=True
        ):
            del node.pods[key]
            f, u = node.free, node.used
            f[0] += req[0]
            f[1] += req[1]
            f[2] += req[2]
            f[3] += req[3]
            u[0] -= sreq[0]
            u[1] -= sreq[1]
            u[2] -= sreq[2]
            u[3] -= sreq[3]
            node.scores.clear()
            self.freed[node.name] = node
            if not node.pods or pending_exist or self.watch_room:
                self.dirty = True
            if self.track:
                self.pod_infos.pop(key, None)
        sim_job.nodes = []

    def _kill_on(self, node: SimNode, sim_job: SimJob) -> None:
        """A policy's removal of ``node`` kills the job's pods there, and so the job: its pods there are
        counted killed, as unmovable killed too when not marked movable (the rule every policy keeps)."""
        killed = sum(1 for n in sim_job.nodes if n is node)
        self.counters.pods_killed += killed
        if not sim_job.movable:
            self.counters.unmovable_killed += killed
        self._kill(sim_job)

    def _kill(self, sim_job: SimJob) -> None:
        """A policy killed the job: counted, and it starts over (:meth:`_start_over`)."""
        self.counters.jobs_killed += 1
        self._start_over(sim_job)

    def _start_over(self, sim_job: SimJob) -> None:
        """The job starts over from the beginning: the progress it had is lost (GPU-seconds)."""
        ran = self.t - sim_job.start
        self.counters.used_seconds += ran * sim_job.job.total(RESOURCES[self.measure])
        progress = sim_job.job.duration - (sim_job.remaining - ran)  # what starting over adds to its run
        self.counters.lost_gpu_seconds += max(0, progress) * sim_job.job.gpus
        self.running -= 1
        self._release(sim_job)
        sim_job.generation += 1
        sim_job.start = -1
        sim_job.remaining = sim_job.job.duration
        self.arrive(sim_job)  # back to the queue; it starts over
        self.dirty = True

    def _restart(self, sim_job: SimJob) -> None:
        """The job's pods are evicted; it resumes elsewhere, ``restart_penalty`` seconds of progress lost,
        charged whole even when it ran less since it (re)started (its remaining time then grows past what
        it had: the penalty is the restart's cost as well as lost progress)."""
        ran = self.t - sim_job.start
        self.counters.used_seconds += ran * sim_job.job.total(RESOURCES[self.measure])
        self.counters.lost_gpu_seconds += self.restart_penalty * sim_job.job.gpus
        self.running -= 1
        self._release(sim_job)
        sim_job.generation += 1
        sim_job.start = -1
        sim_job.remaining = sim_job.remaining - ran + self.restart_penalty
        self.arrive(sim_job)
        self.dirty = True

    # -- the scheduler --

    def _feasible_to_find(self, n: int) -> int:
        if n < _MIN_FEASIBLE:
            return n
        percent = max(_MIN_PERCENT, 50 - n // 125)
        return max(_MIN_FEASIBLE, n * percent // 100)

    def _score(self, node: SimNode, sreq: Vector) -> int:
        cached = node.scores.get(sreq)
        if cached is not None:
            return cached
        total = 0
        weights = 0
        alloc, used = node.alloc, node.used
        for idx, weight, extended in self.score_resources:
            capacity = alloc[idx]
            if capacity == 0 or (extended and sreq[idx] == 0):
                continue
            requested = used[idx] + sreq[idx]
            if self.most:
                score = (min(requested, capacity) * 100) // capacity
            else:
                score = ((capacity - requested) * 100) // capacity if requested <= capacity else 0
            total += score * weight
            weights += weight
        result = total // weights if weights else 0
        node.scores[sreq] = result
        return result

    def _pick(self, req: Vector, sreq: Vector) -> SimNode | None:
        """Filter and score, kube-scheduler style, over every Ready node."""
        nodes = self.order
        n = len(nodes)
        if n == 0:
            return None
        want = self._feasible_to_find(n)
        start = self.next_start % n
        best: SimNode | None = None
        best_score = -_CANDIDATE_PENALTY - 1
        ties = 0
        found = 0
        processed = 0
        r0, r1, r2, r3 = req
        for k in range(n):
            node = nodes[(start + k) % n]
            processed += 1
            f = node.free
            if f[2] < r2 or f[0] < r0 or f[1] < r1 or f[3] < r3 or node.cordoned:
                continue
            found += 1
            score = self._score(node, sreq) - _CANDIDATE_PENALTY * node.candidate
            if score > best_score:
                best, best_score, ties = node, score, 1
            elif score == best_score:
                ties += 1
                if self.rng.randrange(ties) == 0:
                    best = node
            if found >= want:
                break
        self.next_start = (start + processed) % n
        return best

    def _pick_among(self, candidates: Iterable[SimNode], req: Vector, sreq: Vector) -> SimNode | None:
        best: SimNode | None = None
        best_score = -_CANDIDATE_PENALTY - 1
        ties = 0
        for node in candidates:
            if node.cordoned or not node.fits(req):
                continue
            score = self._score(node, sreq) - _CANDIDATE_PENALTY * node.candidate
            if score > best_score:
                best, best_score, ties = node, score, 1
            elif score == best_score:
                ties += 1
                if self.rng.randrange(ties) == 0:
                    best = node
        return best

    def _assume(self, node: SimNode, req: Vector, sreq: Vector, sign: int) -> None:
        f, u = node.free, node.used
        for i in range(4):
            f[i] -= sign * req[i]
            u[i] += sign * sreq[i]
        node.scores.clear()

    def _place(self, sim_job: SimJob, candidates: Sequence[SimNode] | None) -> list[SimNode] | None:
        """All the job's pods or none: each pod on the best node left after the ones before it."""
        chosen: list[SimNode] = []
        for req, sreq in zip(sim_job.reqs, sim_job.sreqs, strict=True):
            node = self._pick(req, sreq) if candidates is None else self._pick_among(candidates, req, sreq)
            if node is None:
                for k, placed in enumerate(chosen):
                    self._assume(placed, sim_job.reqs[k], sim_job.sreqs[k], -1)
                return None
            self._assume(node, req, sreq, +1)
            chosen.append(node)
        return chosen

    def schedule(self) -> None:
        """One scheduling pass: new jobs against every node, waiting jobs against the nodes that changed."""
        freed = list(self.freed.values()) if self.freed else []
        self.freed.clear()
        if self.new_jobs:
            for sim_job in self.new_jobs:
                bisect.insort(self.pending, (sim_job.key, sim_job))
            self.new_jobs.clear()
        if not self.pending:
            return
        freed = [n for n in freed if not n.cordoned]
        # The most room any changed node has, per resource: a bound that rules most waiting pods out fast.
        room = [max(n.free[i] for n in freed) for i in range(4)] if freed else [-1, -1, -1, -1]
        started: list[SimJob] = []
        for _, sim_job in self.pending:
            if not sim_job.attempted:
                chosen = self._place(sim_job, None)
            elif not freed:
                continue
            elif len(sim_job.reqs) > 1:
                chosen = self._place(sim_job, None)
            else:
                req = sim_job.reqs[0]
                if req[2] > room[2] or req[0] > room[0] or req[1] > room[1] or req[3] > room[3]:
                    continue
                chosen = self._place(sim_job, freed)
            if chosen is None:
                if not sim_job.attempted:
                    sim_job.attempted = True
                    self.dirty = True
                    if self.track:
                        self._pending_infos(sim_job)
                continue
            self._start(sim_job, chosen)
            started.append(sim_job)
        if started:
            gone = {id(j) for j in started}
            self.pending = [entry for entry in self.pending if id(entry[1]) not in gone]

    def _start(self, sim_job: SimJob, chosen: list[SimNode]) -> None:
        if sim_job.attempted:
            self.dirty = True  # a pod the autoscaler saw pending is now running
        for key, node in zip(sim_job.pod_keys, chosen, strict=True):
            if not node.pods or self.watch_room:
                # an idle node got work; or, for a consolidating policy, a busy node's pods and room changed
                self.dirty = True
                if node.tenant is None and node.batch:
                    claim = sim_job.job.namespace
                    node.tenant = node.batch.pop(node.batch.index(claim) if claim in node.batch else 0)
            node.pods[key] = sim_job
        sim_job.nodes = chosen
        sim_job.state = "running"
        sim_job.start = self.t
        self.running += 1
        weight = max(1, sim_job.job.gpus)
        sim_job.waited += self.t - sim_job.queued
        self.waits[sim_job.job.id] = (sim_job.waited, weight)
        self.push(self.t + sim_job.remaining, COMPLETE, (sim_job, sim_job.generation))
        if self.track:
            for key, request, node in zip(sim_job.pod_keys, sim_job.pod_requests, chosen, strict=True):
                self.pod_infos[key] = self._pod_info(sim_job, key, request, node.name)

    # -- what an autoscaler observes --

    def pending_jobs(self) -> list[SimJob]:
        """Jobs the scheduler tried and could not place (their pods are Unschedulable), queue order."""
        return [j for _, j in self.pending if j.attempted]

    def _pod_info(self, sim_job: SimJob, key: str, request: Resources, node: str | None) -> PodInfo:
        job = sim_job.job
        return PodInfo(
            namespace=job.namespace,
            name=key.split("/", 1)[1],
            requests=request,
            node_name=node,
            phase="Running" if node else "Pending",
            priority=job.priority,
            owner_kind="Job",
            owner_name=job.name,
            unschedulable=node is None,
            pending_since=None if node else self.at(job.submit),
            created_at=None if node else self.at(job.submit),  # the scheduler's queue order (SimJob.key)
            safe_to_evict=sim_job.movable,
            started_at=self.at(sim_job.start) if node else None,  # the pod's age: a cost of moving it
            active_deadline=sim_job.deadline() if node else None,
        )

    def _pending_infos(self, sim_job: SimJob) -> None:
        for key, request in zip(sim_job.pod_keys, sim_job.pod_requests, strict=True):
            self.pod_infos[key] = self._pod_info(sim_job, key, request, None)

    def _node_info(self, node: SimNode) -> None:
        template = node.group.template
        labels = dict(template.labels)
        labels["kubernetes.io/hostname"] = node.name
        allocatable, capacity = template.allocatable, template.capacity
        if not node.ready:  # registered, its GPUs not yet
            allocatable = {r: v for r, v in allocatable.items() if "/" not in r}
            capacity = {r: v for r, v in capacity.items() if "/" not in r}
        self.node_infos[node.name] = NodeInfo(
            name=node.name,
            allocatable=allocatable,
            capacity=capacity,
            labels=labels,
            taints=(*template.taints, _CANDIDATE) if node.candidate else template.taints,
            provider_id=f"aws:///{node.group.region}a/{node.instance_id}",
            unschedulable=node.cordoned,
            ready=True,
            created_at=self.at(node.joined),
            cordoned_by_spillway=node.cordoned_by == "spillway",
        )

    def snapshot(self) -> ClusterSnapshot:
        return ClusterSnapshot(
            cluster=self.cluster,
            taken_at=self.at(self.t),
            nodes=tuple(self.node_infos.values()),
            pods=tuple(self.pod_infos.values()),
        )

    def node_groups(self, failure_window: timedelta) -> list[NodeGroup]:
        now = self.at(self.t)
        return [g.node_group(now, failure_window) for g in self.groups.values()]

    # -- the end --

    def finish(self) -> None:
        """Close the books at ``self.t``: nodes still up, jobs still running."""
        for group in self.groups.values():
            for node in group.instances.values():
                self._bill(node)
                self.counters.capacity_seconds += node.alloc[self.measure] * (self.t - node.launched)
        for sim_job in self.jobs:
            if sim_job.state == "running":
                self.counters.used_seconds += (self.t - sim_job.start) * sim_job.job.total(
                    RESOURCES[self.measure]
                )
