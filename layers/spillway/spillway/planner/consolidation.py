"""Stage 4b: consolidation — drain a node that runs work when the rest of the cluster holds that work.

A group opts in with ``consolidation: when-underutilized`` (config, or its ``spillway.io/consolidation``
tag). Every busy node of such a group that nothing else keeps (managed, Ready, not cordoned, not
``scale-down-disabled``, not freshly launched, no pending pod planned onto it) is judged; the first
refusal keeps it, with its code:

* ``utilized``: its pods' requests use ``consolidation_utilization_threshold`` (0.5, as
  cluster-autoscaler's ``--scale-down-utilization-threshold``) of its dominant resource or more (a node
  is underutilized only below it, as there): moving them
  costs more restarts than an underutilized node's, and kube-scheduler's packing fills it anyway;
* ``launching-this-plan``: this plan grows its group, or another group of its instance type (never
  free capacity the same plan is launching);
* ``pod-never``: a pod on it may not be moved (:func:`spillway.planner.disruption.assess_move`: a
  protection, a PodDisruptionBudget that allows nothing now, a pod of no kind known to tolerate a
  move: a plain Deployment replica moves only when annotated ``safe-to-evict=true``; or a pod already
  terminating whose grace period ends later than ``LEAVING_WITHIN`` or the drain's deadline, which its
  drain would wait for);
* ``elastic-min``: moving its workers would take an elastic job below its minimum;
* ``saving-too-small``: the saving does not outlast the restart cost (below);
* ``min-size`` / ``scale-in-cap`` / ``no-instance-id`` / ``disruption-budget``: the group's limits;
* ``receives-moved-pods``: this plan moves another node's pods onto it;
* ``does-not-fit``: the free room of the rest of the cluster (Ready, schedulable nodes, less what this
  plan already placed there, less every node this plan drains; then capacity already launching since an
  earlier plan, in groups whose launches do not fail, less what this plan's pending pods took, but no
  registered node still launching: :func:`~spillway.planner.placement.initialized_only`) does not
  hold its pods (a pod whose claim would hold its replacement on every node fits nowhere:
  :meth:`spillway.planner.classes.PodClass.blocker`). The simulation is the scale-up's own first fit
  (:func:`spillway.planner.placement.fit_on_nodes`, :func:`~spillway.planner.placement.fill_bins`);
  nodes this plan launches are never counted. Expendable pods need no room; workers of an elastic job above its
  minimum are re-placed where they fit, else their job runs with fewer workers. Their pod topology
  (:mod:`spillway.planner.topology`) counts what this plan placed and moved before them, not the pods
  that leave; and a pod whose pod topology this plan already changes (its spread's or its affinity's
  pods placed or moved, or pods placed or moved that must run beside it: :func:`_topology_settling`)
  keeps the node for a later plan.

Candidates go cheapest first: the smallest restart cost, then the fewest pods, then the least used.

**The saving rule** (price-free: both sides are in the drained node's own price, which cancels): a drain
saves the node for ``consolidation_horizon_minutes``; each moved pod loses
``consolidation_restart_minutes`` of the share of the node it uses (its dominant share of the node's
allocatable). Drain when ``horizon > restart * sum(share)``. With the defaults (60 and 10) a node is
consolidated whenever its pods fit elsewhere; a short horizon protects long restarts. When every pod on
the node has a known end (a pod's or its Job's ``activeDeadlineSeconds``:
:mod:`spillway.planner.durations`), the node would empty by itself after the last of them and go after
``scale_down_idle_minutes``: the drain saves only ``min(horizon, that end + idle)``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from spillway.config import EMPTY, UNDERUTILIZED, BudgetReason, PlannerConfig
from spillway.model.cluster import ClusterSnapshot, PodInfo, is_critical
from spillway.model.groupkey import GroupKey
from spillway.model.jobs import JobInfo
from spillway.model.nodegroup import INSTANCE_TYPE_LABEL, NodeGroup
from spillway.model.resources import NVIDIA_GPU, PODS, Resources, dominant_share, fit_count, subtract
from spillway.model.state import Since
from spillway.planner import codes
from spillway.planner.classes import PodClass, new_class
from spillway.planner.context import Context, WorkNode, aware, minutes, with_own_free
from spillway.planner.cooldown import cooldown
from spillway.planner.disruption import (
    Move,
    assess_move,
    comes_back,
    counting_job,
    keeps_node_busy,
    leaving_within,
    waits_for_others,
)
from spillway.planner.durations import all_end_within
from spillway.planner.groups import backoff_reason, fresh_node_ports, fresh_node_selected
from spillway.planner.placement import (
    Bin,
    Pool,
    TrialFit,
    copy_bins,
    fill_launching,
    initialized_only,
    pools,
    room_bound,
)
from spillway.planner.scaleup import (
    UNKNOWN_REGION,
    at_home,
    gang_homes,
    gang_regions,
    group_in_domain,
    node_region,
    node_zone,
)
from spillway.planner.startup import uninitialized
from spillway.planner.topology import Leaving, Planned, Spot, port_taken
from spillway.planner.types import Drain, KeptNode

if TYPE_CHECKING:
    from spillway.planner.scaledown import ScaleDownStage

WHEN_UNDERUTILIZED = "when-underutilized"
OFF = "off"
Verdict = tuple[str, str] | None
# a fit of a candidate's pods: the launching capacity left, the nodes they went to, the plan's placements,
# the elastic workers re-placed (the others are given up)
# launching room left, destinations, placements, elastic workers re-placed, node -> pods moved onto it
Trial = tuple[dict[GroupKey, list[Bin]], set[str], Planned, set[str], dict[str, list[str]]]


def mode(ctx: Context, group: NodeGroup | None) -> str:
    """The group's consolidation mode: its tag's, else the configuration's (:func:`group_mode`)."""
    return group_mode(ctx.config, group)


def group_mode(config: PlannerConfig, group: NodeGroup | None) -> str:
    """The group's consolidation mode under ``config``: its tag's, else the configuration's. The one
    definition: the plan's problems (``spillway.planner.core.drain_deadline_problem``) read it too."""
    if group is not None and group.consolidation is not None:
        return group.consolidation
    return config.consolidation


# --- budgets ------------------------------------------------------------------------------------


class Budgets:
    """Disruption budgets (Karpenter's semantics): per group, the most restrictive active budget binds;
    a percentage is of the group's initialized nodes, rounded up; nodes Spillway drains already count,
    and so do the nodes out of service (``out``: NotReady, being deleted by anyone), as Karpenter takes
    them off the allowed disruptions. Removing a node that is out already adds nothing: it is not counted
    twice, and no budget refuses the idle drain of one out for good (``dead``; with two dead nodes under
    a budget of one, each was refused for the other, for good).

    The base of a percentage leaves out the nodes not initialized: never Ready (NotReady since they
    registered, within ``max_node_startup_minutes`` or past it; nor are they counted ``out``) or Ready
    with a startup taint or an extended resource
    still missing (:func:`spillway.planner.startup.uninitialized`), starting or past that time (its
    GPUs never came). Karpenter counts a NodePool's initialized nodes only, so that replacements still
    starting do not round the budget up (kubernetes-sigs/karpenter pkg/controllers/disruption/helpers.go,
    BuildDisruptionBudgetMapping), and a node that never initializes never is.
    Nodes being deleted and nodes NotReady after being Ready stay in the base, as there.

    A budget does not hold back the drain of an idle node outside its base (``outside``): Karpenter's
    budgets neither count such a node nor guard it (it is never one of their candidates; a NodeClaim
    that never registers is deleted by its liveness timeout, nodeclaim/lifecycle/liveness.go, and a
    registered node that never initialized by node/health/uninitialized, with no budget asked: budgets
    exclude it), and a group whose nodes all never initialize (an AMI without the GPU driver) has a base
    of 0, which a percentage turns into 0 drains for good. Its drain still counts against the budget for the other
    nodes, as any drain this plan takes; and a drain that moves running pods off it is held as any
    other (Karpenter never consolidates it)."""

    def __init__(self, ctx: Context, draining_now: Mapping[GroupKey, int]) -> None:
        self.now = ctx.now
        self.active = [b for b in ctx.config.disruption_budgets if b.active_at(ctx.now)]
        self.nodes: dict[GroupKey, int] = {}
        self.outside: set[str] = set()  # nodes of managed groups not initialized: not in the base
        for node in ctx.nodes.values():
            if node.group is None:
                continue
            if (
                node.info.never_ready()  # registering, or never Ready past its start window
                or uninitialized(node.info, node.group, ctx.config) is not None  # starting, or never
            ):
                self.outside.add(node.info.name)
                continue
            self.nodes[node.group.key] = self.nodes.get(node.group.key, 0) + 1
        self.draining_now = draining_now
        self.out: dict[GroupKey, set[str]] = {}  # group -> its nodes out of service, not being drained
        # nodes out of service for good: being deleted, or NotReady for the unready time (scaledown)
        self.dead: set[str] = set()

    def refusal(self, group: GroupKey, taken: int, reason: BudgetReason, node: str) -> Verdict:
        """Why one more drain in ``group`` (a disruption of ``reason``, of ``node``) is refused (``taken``:
        this plan's drains there, of any reason, as Karpenter counts every node being disrupted), or
        None. Not the drain of an idle node (``Empty``) outside the base, nor of one out of service for
        good (``dead``: being deleted, or NotReady for ``scale_down_unready_minutes``): removing that
        adds no disruption (Karpenter's node repair deletes a node NotReady past its toleration, the Ready
        condition's lastTransitionTime plus 30 minutes by default, without asking the budgets,
        pkg/controllers/node/health/controller.go). A node NotReady for less may come back Ready (a
        kubelet restart, a missed heartbeat): its budgets hold it, as Karpenter's do. A drain that moves
        running pods off such a node (consolidation, make room) is held as any other."""
        if reason == EMPTY and (node in self.outside or node in self.dead):
            return None
        size = self.nodes.get(group, 0)
        # a budget names groups by name, in any region (DisruptionBudget.groups); each group counts its own
        binding = [(b.allowed(size), b.nodes) for b in self.active if b.applies_to(group.name, reason)]
        if not binding:
            return None
        allowed, nodes = min(binding)
        out = len(self.out.get(group, ()))
        busy = self.draining_now.get(group, 0) + taken + out
        if busy < allowed:
            return None
        also = f" or out of service ({out} NotReady or being deleted)" if out else ""
        return (
            codes.DISRUPTION_BUDGET,
            f"disruption budget nodes {nodes} allows {allowed} of group {group.name}'s {size} node(s) at once; "
            f"{busy} already being drained{also}",
        )

    def lasting(self, group: GroupKey, reason: BudgetReason) -> bool:
        """Whether an active budget that allows no disruption of ``group`` (of ``reason``) binds it for
        good: it never turns off (no window, no schedule), so no later plan drains a node it refuses."""
        size = self.nodes.get(group, 0)
        return any(
            b.allowed(size) == 0 and b.next_edge(self.now) is None
            for b in self.active
            if b.applies_to(group.name, reason)
        )


class PodBudgets:
    """The PodDisruptionBudgets this plan's drains spend, whatever their kind (make room, an idle node's
    expendable pods, consolidation). A drain's round evicts every pod it may, and the Eviction API lets
    each go while its budget allows one (pkg/registry/core/pod/storage/eviction.go, ``checkAndDecrement``),
    so a drain spends one disruption for each pod of the budget it evicts, as cluster-autoscaler counts
    them (kubernetes/autoscaler cluster-autoscaler/core/scaledown/pdb/basic.go, ``RemovePods``).

    A drain is taken while its pods fit in what the budget allows now besides the plan's other drains,
    so that no drain waits on another's disruption (the Eviction API answers 429 until a replacement is
    Ready, which an expendable pod's may never be, and the waiting drain times out); or when it is the
    only drain that evicts the budget's pods and the budget allows one: it evicts them as the budget
    allows, round after round, each replacement Ready giving the next disruption (cluster-autoscaler's
    ``CanRemovePods`` takes such a node too, not in parallel).

    ``disruptionsAllowed`` counts a pod gone only once it is: an eviction takes one off it (the API
    writes the budget's status as it evicts), a pod that stops being Ready takes one off at the
    disruption controller's next sync. So the disruptions already on their way are counted here too,
    as Karpenter takes the nodes being disrupted off what its NodePool budgets allow
    (kubernetes-sigs/karpenter pkg/controllers/disruption/helpers.go, ``BuildDisruptionBudgetMapping``:
    allowed minus the nodes NotReady or being deleted): ``draining``, the running pods of nodes a drain
    of an earlier plan will still evict (:meth:`evicted`: not terminating yet, so not taken off the
    status); ``going``, the Ready pods of nodes on their way out without a drain (being deleted, their
    instance terminating or stopping in its warm pool), which stop being Ready and take a disruption
    off with them. A pod is healthy for the status while Ready and not being deleted (kubernetes
    pkg/controller/disruption, ``countHealthyPods``; the node controller marks a kubelet-less node's
    pods not Ready; a Pending pod, whose containers have not all started, is never Ready:
    :attr:`PodInfo.healthy_for_budgets`), so only those are ``going``; and a drain of this plan that evicts one of them (of a
    node whose deletion a finalizer holds, its kubelet still running) spends it as its own eviction,
    not as ``going`` as well."""

    def __init__(
        self, snapshot: ClusterSnapshot, draining: Iterable[PodInfo] = (), going: Iterable[PodInfo] = ()
    ) -> None:
        self.snapshot = snapshot
        self.allowed = {(p.namespace, p.name): p.disruptions_allowed for p in snapshot.pdbs}
        self.spent: dict[tuple[str, str], int] = {}  # (namespace, name) -> pods this plan's drains evict
        self.draining = self.evicted(draining)  # ... pods earlier plans' drains will evict
        going_ready = [pod for pod in going if pod.healthy_for_budgets]
        self.going = Counter(
            (pod.namespace, name) for pod in going_ready for name in pod.pdbs
        )  # ... Ready pods of nodes going away without a drain
        self._going_pods = {pod.key for pod in going_ready if pod.pdbs}  # ... those pods, by key

    def refusal(self, pods: Iterable[PodInfo]) -> Verdict:
        """Why a drain evicting ``pods`` would take a budget past what it allows now, or None. Its own
        pods that ``going`` counts (a drain of a node going away, such as one whose deletion a finalizer
        holds) are counted once, as this drain's: the eviction is the one disruption they take."""
        pods = list(pods)
        own = self._own_going(pods)
        for key, count in sorted(self.evicted(pods).items()):
            can = self.allowed.get(key, 0)
            going = self.going[key] - own[key]
            spent, ahead = self.spent.get(key, 0), self.draining[key] + going
            if can < 1 or ((spent or ahead) and ahead + spent + count > can):
                return codes.POD_NEVER, self._why(key, can, spent, count, going)
        return None

    def _why(self, key: tuple[str, str], can: int, spent: int, count: int, going: int) -> str:
        namespace, name = key
        others = [f"this plan's other drains evict {spent} of its pods"]
        if going:
            others.insert(0, f"nodes going away (deleted, terminating, stopping) take {going} Ready")
        if self.draining[key]:
            others.insert(0, f"drains under way evict {self.draining[key]} more")
        return (
            f"PodDisruptionBudget {namespace}/{name} allows {can} disruption(s) now; {', '.join(others)}: "
            f"this one's {count} would wait on them"
        )

    def spend(self, pods: Iterable[PodInfo]) -> None:
        """Count ``pods`` as evicted by a drain of this plan; those ``going`` counted leave it for
        ``spent`` (:meth:`refusal`)."""
        pods = list(pods)
        self.going -= self._own_going(pods)
        self._going_pods.difference_update(p.key for p in pods)
        for key, count in self.evicted(pods).items():
            self.spent[key] = self.spent.get(key, 0) + count

    def _own_going(self, pods: list[PodInfo]) -> Counter[tuple[str, str]]:
        """Of ``pods``, those ``going`` counts that a drain evicts (:meth:`evicted`), per budget."""
        if not self._going_pods:
            return Counter()
        return self.evicted(p for p in pods if p.key in self._going_pods)

    def evicted(self, pods: Iterable[PodInfo]) -> Counter[tuple[str, str]]:
        """How many of ``pods`` each budget, by (namespace, name), holds to its disruptions (a
        terminating pod is leaving already; a pod no budget guards, not running yet or let go unready,
        spends none: ``ClusterSnapshot.pdb_allowance``; nor does one that tolerates the drain's marks,
        which the drain neither evicts nor waits for: it goes with its node,
        :func:`~spillway.planner.disruption.comes_back`)."""
        return Counter(
            (pod.namespace, name)
            for pod in pods
            if not pod.terminating and not comes_back(pod) and self.snapshot.pdb_allowance(pod) is not None
            for name in pod.pdbs
        )


# --- the stage ----------------------------------------------------------------------------------


@dataclass(slots=True)
class Candidate:
    node: WorkNode
    pods: list[PodInfo]  # every pod that keeps it busy: the drain evicts these and cancels on others
    place: list[PodInfo]  # the ones that need room elsewhere (not elastic, expendable or leaving)
    shrink: list[PodInfo]  # elastic workers: re-placed where they fit, else their job runs smaller
    elastic: dict[str, int]  # job -> its workers here (all evicted: the room before its minimum they take)
    cost: float  # node-minutes lost to restarts
    moves: float  # the sum of the pods' move costs (spillway.planner.disruption.move_cost)
    jobs: dict[str, str]  # elastic worker's pod key -> its job
    # gang -> its Volcano-preemptable members here: Volcano preempts one only while its job keeps more
    # ready members than minAvailable (volcano-sh/volcano pkg/scheduler/plugins/gang, preemptableFn)
    gangs: dict[str, int] = field(default_factory=dict)
    # batch/v1 Job -> its pods here whose eviction it counts as failed against its backoffLimit
    counted: dict[str, int] = field(default_factory=dict)
    # elastic job -> its workers here an opt-in moves (safe-to-evict, preemptable: Move.member), which
    # need room elsewhere as any pod but take workers from the job all the same
    members: dict[str, int] = field(default_factory=dict)

    def workers_taken(self) -> dict[str, int]:
        """Elastic job -> its running workers the drain takes, shrunk or moved on an opt-in: what its
        minimum must allow (:meth:`Consolidation._elastic_min`)."""
        if not self.members:
            return self.elastic
        out = dict(self.elastic)
        for job, n in self.members.items():
            out[job] = out.get(job, 0) + n
        return out

    def given_up(self, moved: set[str]) -> dict[str, int]:
        """Job -> its workers here that the drain takes from it: those not re-placed (``moved``) on
        another node. A job that keeps every worker is not named."""
        out = dict(self.elastic)
        for key in moved:
            out[self.jobs[key]] -= 1
        return {job: n for job, n in out.items() if n > 0}

    @classmethod
    def of(cls, node: WorkNode, moves: Sequence[tuple[PodInfo, Move]], cost: float) -> Candidate:
        elastic: dict[str, int] = {}
        jobs: dict[str, str] = {}
        gangs: dict[str, int] = {}
        counted = _counted(moves)
        for pod, move in moves:
            if pod.gang is not None and _preempts(pod, move):
                gangs[pod.gang] = gangs.get(pod.gang, 0) + 1
            if move.elastic is not None:
                elastic[move.elastic.job] = elastic.get(move.elastic.job, 0) + 1
                jobs[pod.key] = move.elastic.job
        return cls(
            node,
            [p for p, _ in moves],
            [p for p, m in moves if m.cost > 0 and m.elastic is None],  # free moves need no room
            [p for p, m in moves if m.cost > 0 and m.elastic is not None],
            elastic,
            cost,
            sum(m.cost for _, m in moves if m.movable),
            jobs,
            gangs,
            counted,
            _members(moves),
        )

    def order(self) -> tuple[object, ...]:
        """Cheapest first: the lowest move cost, the fewest pods, the least used, then by name."""
        _, used = dominant_share(self.node.used, self.node.info.allocatable)
        return (self.moves, len(self.pods), used, self.node.info.name)


class Consolidation:
    """Judges the busy nodes of groups that consolidate; drains the cheapest whose pods fit elsewhere."""

    def __init__(self, stage: ScaleDownStage) -> None:
        self.stage = stage
        self.ctx = stage.ctx
        on_node: dict[str, list[PodInfo]] = {}
        for pod in self.ctx.snapshot.pods:
            if pod.node_name is not None and keeps_node_busy(pod, self.ctx.now):
                on_node.setdefault(pod.node_name, []).append(pod)
        for pods in on_node.values():  # sorted once: moves are judged, and read, in this order
            pods.sort(key=_pod_key)
        self.on_node = on_node
        self.jobs = self.ctx.snapshot.jobs_by_key()
        # the workers leaving (on nodes they leave or run on no more, or moved by a make room under
        # way) are not counted: the room of their elastic jobs is what the others leave, one dict the
        # idle drains' expendable workers spend too (ScaleDownStage.leaving_pods, .elastic_left)
        self.elastic_left = stage.elastic_left()
        self.gang_left = stage.gang_left()  # shared so with the idle drains' expendable members
        self.evictions_left = stage.evictions_left()  # shared with the idle drains: both spend it
        self.receiving: set[str] = set()
        self.arrivals: dict[str, list[str]] = {}  # existing node -> the pods this plan moves onto it
        self.room: dict[str, WorkNode] = {}
        self.launching: dict[GroupKey, list[Bin]] = initialized_only(self.ctx, stage.launching)
        self.backed_off = {g.key for g in self.ctx.groups if backoff_reason(self.ctx, g)}
        self._moves: dict[str, list[tuple[PodInfo, Move]]] = {}
        # moves() of a node with a critical pod, each pod judged alone (before waits_for_others)
        self._alone: dict[str, list[tuple[PodInfo, Move]]] = {}
        self._within = leaving_within(self.ctx.config.drain_deadline_seconds)
        self._recent_since: dict[float, datetime] = {}  # _recent's answers
        # room_bound of the room, while no move changed it (_out_of_reach; None: not made since)
        self._room_bound: Resources | None = None
        # why the last _fit failed when a gang member found no room where its gang runs (_move_pods)
        self._not_home: str | None = None

    def run(self, busy: Sequence[WorkNode]) -> dict[str, KeptNode]:
        """The busy nodes kept, by name, with the consolidation's reason (the others were drained)."""
        kept: dict[str, KeptNode] = {}
        candidates: list[Candidate] = []
        for node in busy:
            verdict, candidate = self.judge(node)
            if candidate is not None:
                self._since(node)
                candidates.append(candidate)
            elif verdict is not None:
                kept[node.info.name] = KeptNode(node.info.name, verdict[1], verdict[0])
        self.reset_room()
        for candidate in sorted(candidates, key=Candidate.order):
            verdict = self.choose(candidate)
            if verdict is not None:
                name = candidate.node.info.name
                kept[name] = KeptNode(name, verdict[1], verdict[0])
        return kept

    def reset_room(self) -> None:
        """The room pods may move to: schedulable nodes (Ready, initialized) no drain of this plan takes (a
        recent plan's drain that has not cordoned its node yet cancels when it finds the moved pods
        there: pods planned onto such a node are never evicted by it). Built once
        (a make-room swap may have taken some already); later only the nodes drained since leave it."""
        drained = {d.node for d in self.stage.drains}
        self._room_bound = None
        if self.room:
            self.room = {name: node for name, node in self.room.items() if name not in drained}
            return
        self.room = {
            n.info.name: with_own_free(n)
            for n in self.ctx.nodes.values()
            if n.schedulable and n.info.name not in drained
        }

    def hosts(self, group: GroupKey) -> list[WorkNode]:
        """The busy nodes of ``group`` that may give room to pending pods (make room,
        :mod:`spillway.planner.makeroom`): in the room, and nothing keeps them (a drain claim, pending
        pods planned there, a cordon, ``scale-down-disabled``, youth; not scale-in protection: make room
        keeps the node)."""
        return [
            node
            for name, node in sorted(self.ctx.nodes.items())
            if node.group is not None
            and node.group.key == group
            and name in self.room
            and self.on_node.get(name)
            and self.stage.protected(node, removes=False) is None
        ]

    def moves(self, node: WorkNode) -> list[tuple[PodInfo, Move]]:
        """Each pod that keeps the node busy, with whether and at what cost it may move (judged once a
        plan: make room asks again for every new node it tries to swap)."""
        name = node.info.name
        if name not in self._moves:
            judged = [(pod, self._move(pod, node)) for pod in self.on_node.get(name, ())]
            waited = waits_for_others(judged, self.ctx.now, self.ctx.config.drain_deadline_seconds)
            if waited != judged:
                self._alone[name] = judged
            self._moves[name] = waited
        return self._moves[name]

    def moves_alone(self, node: WorkNode) -> list[tuple[PodInfo, Move]]:
        """:meth:`moves` with each pod judged alone, a critical pod's wait for the node's other pods not
        counted: make room, whose drain waits only for the pods it moves, counts it over those
        (``spillway.planner.makeroom._victims_in_time``)."""
        moves = self.moves(node)
        return self._alone.get(node.info.name, moves)

    def _pinning(self, node: WorkNode) -> str:
        """What keeps the node from a mark, in one pass over its pods: ``"movable"`` when every pod that
        keeps it busy may move (the judgement is kept as :meth:`moves`'s), ``"recent"`` when every one
        that may not move started less than ``consolidation_recent_pods_minutes`` ago
        (:mod:`spillway.planner.softtaint` marks both), else ``""``. The first old pod that may not move
        ends the pass (most busy nodes run one), so a node judged only for the mark costs no more than
        that. A pod whose start is unknown is new: the kubelet has not admitted it yet. The moves
        :meth:`moves` kept (make room judges its hosts first) are read as they are, recent pods and all."""
        name = node.info.name
        window = self.ctx.config_for(node.group).consolidation_recent_pods_minutes
        kept = self._moves.get(name)
        if kept is None and any(is_critical(p.priority) for p in self.on_node.get(name, ())):
            kept = self.moves(node)  # a critical pod's move depends on the others' (waits_for_others)
        moves = iter(kept) if kept is not None else self._judged(node)
        judged: list[tuple[PodInfo, Move]] | None = []
        for pod, move in moves:
            if move.movable:
                if judged is not None:
                    judged.append((pod, move))
                continue
            if window <= 0 or (pod.started_at is not None and aware(pod.started_at) <= self._recent(window)):
                return ""
            judged = None  # pinned, by recent work so far
        if judged is None:
            return "recent"
        self._moves[name] = judged
        return "movable"

    def _recent(self, window: float) -> datetime:
        """The start a pod must be later than to be recent work under ``window`` (minutes), made once a
        plan (a group's options may give it its own window)."""
        since = self._recent_since.get(window)
        if since is None:
            since = self._recent_since[window] = self.ctx.now - timedelta(minutes=window)
        return since

    def _judged(self, node: WorkNode) -> Iterator[tuple[PodInfo, Move]]:
        """Each pod that keeps the node busy with its move, judged as asked for (in :meth:`moves`'s
        order), so a pass that stops early judges no more pods."""
        for pod in self.on_node.get(node.info.name, ()):
            yield pod, self._move(pod, node)

    def refuse_move(self, candidate: Candidate) -> Verdict:
        """An elastic job taken below its minimum, or a restart cost the saving rule refuses."""
        group = candidate.node.group
        return (
            self._elastic_min(candidate.workers_taken())
            or self._gang_min(candidate.gangs)
            or self._backoff_limit(candidate.counted)
            or self._saving(candidate.pods, candidate.cost, group)
        )

    def judge(self, node: WorkNode) -> tuple[Verdict, Candidate | None]:
        """The first static refusal, or the node as a candidate. A node no drain, cordon or pending pod
        claims whose every pod may move is also remembered as one the plan marks
        (:mod:`spillway.planner.softtaint`), whatever keeps it now."""
        verdict = self.stage.protected(node)
        if verdict is None or verdict[0] == codes.RECENTLY_LAUNCHED:
            pinning = self._pinning(node)
            if pinning == "movable":
                self.stage.movable.add(node.info.name)
            elif pinning == "recent":
                self.stage.recent.add(node.info.name)
        verdict = verdict or self._launching(node) or self._utilized(node)
        if verdict is not None:
            return verdict, None
        moves = self.moves(node)
        candidate = Candidate.of(node, moves, self.restart_cost(node, moves))
        verdict = _never(moves) or self.refuse_move(candidate)
        return (verdict, None) if verdict is not None else (None, candidate)

    def _utilized(self, node: WorkNode) -> Verdict:
        config = self.ctx.config_for(node.group)
        # expendable pods leave with the node, and cluster-autoscaler judges utilization on a snapshot
        # without them (core/static_autoscaler.go, FilterOutExpendablePods)
        used, alloc = subtract(node.used, node.expendable_used), node.info.allocatable
        gpus = alloc.get(NVIDIA_GPU, 0)
        if config.ignore_daemonsets_utilization:
            # out of both sides: cluster-autoscaler divides the other pods' requests by the allocatable
            # less the DaemonSet pods' (simulator/utilization, CalculateUtilizationOfResource)
            used, alloc = subtract(used, node.daemon_used), subtract(alloc, node.daemon_used)
        # requests, not pod slots: many tiny pods fill a node's max-pods with its cpu and memory idle,
        # and cluster-autoscaler's utilization never reads the count (simulator/utilization, Calculate)
        used = {name: value for name, value in used.items() if name != PODS}
        if gpus and config.consolidation_gpu_utilization_threshold is not None:
            left = alloc.get(NVIDIA_GPU, 0)  # a node whose DaemonSets take every GPU uses none of them
            resource, share = NVIDIA_GPU, used.get(NVIDIA_GPU, 0) / left if left > 0 else 0.0
            threshold, setting = (
                config.consolidation_gpu_utilization_threshold,
                "consolidation_gpu_utilization_threshold",
            )
        else:
            (resource, share), threshold = (
                dominant_share(used, alloc),
                config.consolidation_utilization_threshold,
            )
            setting = "consolidation_utilization_threshold"
        # below the threshold only: cluster-autoscaler's ``Utilization >= threshold`` is NotUnderutilized
        # (core/scaledown/eligibility/eligibility.go, isNodeBelowUtilizationThreshold)
        if share < threshold:
            return None
        return (
            codes.UTILIZED,
            f"requests use {100 * share:.0f}% of its {resource}, at or above {setting} ({threshold:g})",
        )

    def _elastic_min(self, elastic: Mapping[str, int]) -> Verdict:
        return elastic_refusal(elastic, self.elastic_left)

    def _gang_min(self, gangs: Mapping[str, int]) -> Verdict:
        return gang_refusal(gangs, self.gang_left)

    def _backoff_limit(self, counted: Mapping[str, int]) -> Verdict:
        return backoff_refusal(counted, self.evictions_left)

    def _saving(self, pods: Sequence[PodInfo], cost: float, group: NodeGroup | None) -> Verdict:
        """Refuse unless the restart cost is less than the node-minutes the drain saves: the horizon, or,
        when every pod's end is known (spillway.planner.durations), the time until the node would have
        emptied by itself and then been idle long enough to go (the horizon at most)."""
        config = self.ctx.config_for(group)
        horizon = config.consolidation_horizon_minutes
        ends = all_end_within(pods, self.jobs, self.ctx.now)
        saving = horizon if ends is None else min(horizon, ends / 60 + config.scale_down_idle_minutes)
        if cost < saving:
            return None
        if ends is not None and saving < horizon:
            return (
                codes.SAVING_TOO_SMALL,
                f"its {len(pods)} pod(s) end within {math.ceil(ends / 60)} minute(s) (activeDeadlineSeconds): "
                f"draining saves {saving:.1f} node-minutes (with scale_down_idle_minutes), not more than "
                f"the {cost:.1f} lost to restarts",
            )
        return (
            codes.SAVING_TOO_SMALL,
            f"moving its {len(pods)} pod(s) loses {cost:.1f} node-minutes to restarts, not less than the "
            f"{horizon:g} saved (consolidation_horizon_minutes)",
        )

    def moves_ahead(self, node: WorkNode) -> list[tuple[PodInfo, Move]]:
        """:meth:`moves` for a drain ahead of a scheduled action (:mod:`spillway.planner.schedshrink`):
        a pod whose grace the drain's deadline would cut short (``grace-past-deadline``) may move there,
        as Auto Scaling terminates the node undrained when the action runs, the pod with no grace at
        all; the drain's deadline is the most it can give."""
        return [
            (pod, self._move(pod, node, ahead=True) if move.code == codes.POD_GRACE_PAST_DEADLINE else move)
            for pod, move in self.moves(node)
        ]

    def cut_short(self, node: WorkNode) -> list[PodInfo]:
        """The node's pods a drain would not move for their grace alone (``grace-past-deadline``)."""
        return [pod for pod, move in self.moves(node) if move.code == codes.POD_GRACE_PAST_DEADLINE]

    def _move(self, pod: PodInfo, node: WorkNode, *, ahead: bool = False) -> Move:
        allowance = self.ctx.snapshot.pdb_allowance(pod)
        cutoff = self.ctx.config.expendable_priority_cutoff
        deadline = self.ctx.config.drain_deadline_seconds
        judged = None if ahead else deadline  # ahead of an action, a grace cut short beats none
        return assess_move(pod, node.info, allowance, self.ctx.now, cutoff, self.jobs, self._within, judged)

    def restart_cost(self, node: WorkNode, moves: Sequence[tuple[PodInfo, Move]]) -> float:
        """Node-minutes the moved pods lose: restart minutes times each pod's dominant share of the node
        (a free move, of an expendable or terminating pod, loses nothing)."""
        restart = self.ctx.config.consolidation_restart_minutes
        alloc = node.info.allocatable
        return sum(restart * dominant_share(p.requests, alloc)[1] for p, m in moves if m.cost > 0)

    def _launching(self, node: WorkNode) -> Verdict:
        group = node.group
        assert group is not None
        if not self.ctx.new_nodes:  # the plan launches nothing (most plans): no group to look through
            return None
        if self.ctx.new_nodes.get(group.key):
            return codes.LAUNCHING_THIS_PLAN, f"this plan launches nodes in its group {group.name}"
        kind = node.info.labels.get(INSTANCE_TYPE_LABEL) or group.instance_type
        for other in self.ctx.groups:
            if kind and kind in other.launch_types() and self.ctx.new_nodes.get(other.key):
                return (
                    codes.LAUNCHING_THIS_PLAN,
                    f"this plan launches {kind} nodes in {other.name}: it never frees what it launches",
                )
        return None

    def _since(self, node: WorkNode) -> None:
        """Remember since when the node is a candidate (the timer of consolidation_after_minutes)."""
        previous = self.ctx.state.underutilized.get(node.info.name)
        since = aware(previous.since) if previous is not None else self.ctx.now
        self.stage.underutilized[node.info.name] = Since(since=since)

    def _not_long_enough(self, node: WorkNode) -> Verdict:
        needed = timedelta(minutes=self.ctx.config_for(node.group).consolidation_after_minutes)
        so_far = self.ctx.now - self.stage.underutilized[node.info.name].since
        if so_far >= needed:
            return None
        return (
            codes.UNDERUTILIZED_NOT_LONG_ENOUGH,
            f"a consolidation candidate for {minutes(so_far)} of the {minutes(needed)} needed "
            "(consolidation_after_minutes)",
        )

    def choose(self, candidate: Candidate) -> Verdict:
        node = candidate.node
        verdict = (
            self._not_long_enough(node)
            or self._changed(candidate)
            or self.stage.limit(node, UNDERUTILIZED)
            or cooldown(self.ctx)
        )
        return verdict or self._move_pods(candidate, make_room=False)

    def swap(self, candidate: Candidate) -> Verdict:
        """Make room: move the candidate's pods (the node stays, for pending pods); a refusal or None.
        The elastic room again (an earlier move of this plan may have taken it), the disruption budget,
        then where the pods go."""
        group = candidate.node.group
        assert group is not None
        verdict = self._changed(candidate) or self.stage.budgets.refusal(
            group.key, self.stage.taken.get(group.key, 0), UNDERUTILIZED, candidate.node.info.name
        )
        return verdict or self._move_pods(candidate, make_room=True)

    def _changed(self, candidate: Candidate) -> Verdict:
        """What an earlier move of this plan changed since the candidate was judged: it receives moved
        pods, or a node drained before took the elastic room its workers needed."""
        if candidate.node.info.name in self.receiving:
            return codes.RECEIVES_MOVED_PODS, "this plan moves another node's pods onto it"
        return (
            self._elastic_min(candidate.workers_taken())
            or self._gang_min(candidate.gangs)
            or self._backoff_limit(candidate.counted)
        )

    def evacuate(self, candidate: Candidate) -> Verdict:
        """Drain the candidate ahead of a scheduled action that would terminate a node of its group
        undrained (:mod:`spillway.planner.schedshrink`): its pods are moved where they fit, and evicted
        all the same where they do not (they wait as pending pods, evicted within their budgets and
        grace periods, rather than killed with the node); a refusal (budgets, elastic or gang minimum,
        a Job's backoffLimit) or None."""
        return self._changed(candidate) or self._move_pods(candidate, make_room=False, anyway=True)

    def _move_pods(self, candidate: Candidate, *, make_room: bool, anyway: bool = False) -> Verdict:
        # evicted anyway, a pod whose topology settles still goes; its PodDisruptionBudget still binds
        settling = None if anyway else _topology_settling(candidate, self.ctx.planned)
        verdict = settling or self.stage.pod_budgets.refusal(candidate.pods)
        if verdict is not None:
            return verdict
        if make_room and self._out_of_reach(candidate):
            return codes.DOES_NOT_FIT, _no_room(candidate)
        trial = self._fit(candidate, make_room=make_room)
        if trial is None and anyway:
            trial = (self.launching, set(), self.ctx.planned, set(), {})
        if trial is None:
            return codes.DOES_NOT_FIT, self._not_home or _no_room(candidate)
        self._room_bound = None  # the moved pods take room
        self.launching, destinations, self.ctx.planned, moved, arrived = trial
        self.receiving |= destinations
        for name, keys in arrived.items():
            self.arrivals.setdefault(name, []).extend(keys)
        self.stage.pod_budgets.spend(candidate.pods)
        for job, workers in candidate.workers_taken().items():
            self.elastic_left[job] = self.elastic_left.get(job, 0) - workers
        for gang, members in candidate.gangs.items():
            if gang in self.gang_left:
                self.gang_left[gang] -= members
        for job, pods in candidate.counted.items():
            self.evictions_left[job] = self.evictions_left.get(job, 0) - pods
        self._drain(candidate, destinations, moved, make_room=make_room)
        return None

    def _out_of_reach(self, candidate: Candidate) -> bool:
        """A pod of the candidate that must fit elsewhere fits on no node of the room, whatever the others
        take first (:func:`~spillway.planner.placement.room_bound`, its least requests on any existing
        node), nor on any launching node: :meth:`_fit` would fail. Make room tries one host after the
        other, and most of their pods (a burst's) fit nowhere; the bound is made once while no move
        changes the room (a trial that fails puts back what it took). Pods with volumes are left to
        :meth:`_fit`, whose undo replaces the victims of the nodes it touched."""
        if any(pod.volumes for pod in candidate.pods):
            return False
        if self._room_bound is None:
            self._room_bound = room_bound(list(self.room.values()))
        bins = [b for group in self.launching.values() for b in group]
        leaving = Leaving(None, frozenset(p.key for p in candidate.pods))  # as _fit leaves for make room
        return any(
            fit_count(cls.least_requests, self._room_bound, 1) == 0
            and not any(cls.fit_with(b.free, 1, b.volumes) > 0 for b in bins)
            for cls in _classes(candidate.place, self.ctx, leaving)
        )

    def _fit(self, candidate: Candidate, *, make_room: bool) -> Trial | None:
        """Place the candidate's pods elsewhere (existing nodes first, then capacity launching since an
        earlier plan): the launching capacity left, where they went, the plan's placements with
        them (:class:`~spillway.planner.topology.Planned`) and the elastic workers re-placed (the
        others are given up); None if the pods that must fit do not all fit. The room's nodes take
        them in place, and a refusal puts back what it took (an undo log, not a copy of every node per
        candidate). Their pod topology counts the pods this plan placed and moved before
        them, its own classes included, and not what leaves: the node emptied (make room: only the
        pods it moves)."""
        name = candidate.node.info.name
        everywhere = [w for n, w in self.room.items() if n != name]
        launching = copy_bins(self.launching)
        on_launching: set[str] = set()
        trial = TrialFit(self.ctx)
        leaving = Leaving(None if make_room else name, frozenset(p.key for p in candidate.pods))
        moved: set[str] = set()
        homes = self._gang_homes(candidate)
        self._not_home = None
        # the pods that must fit, then elastic workers: where they fit, else the job shrinks
        for pods, must in ((candidate.place, True), (candidate.shrink, False)):
            for cls in _classes(pods, self.ctx, leaving, homes):
                home = homes.get(cls.pods[0])
                room = everywhere if home is None else [w for w in everywhere if home.holds_node(w)]
                self._fit_class(cls, room, trial, (launching, on_launching), home)
                if must and cls.remaining:
                    trial.undo()
                    self._not_home = None if home is None else _not_home_text(cls.pods[0], home)
                    return None
                if not must:
                    moved.update(cls.pods[: cls.next])  # the placed ones come first
        for pod in candidate.pods:
            trial.planned.left(pod, candidate.node.spot)
        return launching, set(trial.placed) | on_launching, trial.planned, moved, trial.arrived

    def _fit_class(
        self,
        cls: PodClass,
        room: list[WorkNode],
        trial: TrialFit,
        launching: tuple[Mapping[GroupKey, list[Bin]], set[str]],
        home: GangHome | None,
    ) -> None:
        """First fit of one class of :meth:`_fit` on ``room``, then on the ``launching`` bins (those
        of groups where its gang runs, for a gang member: ``home``)."""
        cls.domains = cls.domains.after(trial.planned)
        if cls.domains.leads_group and cls.remaining > 1:
            trial.fit(cls, _whole_on_one(cls, room))  # and none on launching capacity
        elif cls.domains.leads_zone and cls.remaining > 1:
            trial.fit(cls, _whole_in_one_zone(cls, room))  # likewise
        else:
            trial.fit(cls, pools(room))
            self._fit_launching(cls, launching[0], launching[1], trial.planned, home)

    def _gang_homes(self, candidate: Candidate) -> dict[str, GangHome]:
        """Pod key -> where its gang runs (:func:`~spillway.planner.scaleup.gang_homes`), for each pod of
        the candidate that must move or may be re-placed and is a member of a gang with members running
        elsewhere: those on nodes leaving are not counted (:attr:`Gangs.running_on`), nor those on the
        candidate's node that the drain moves. Such a member moves there only, as the pending members
        of a started gang are placed (``ScaleUpStage._place_loose``): in another region it would split
        one job over two regions (the README's "one region" rule for gangs). In a cluster of one region
        only a gang whose pods ask for one zone is kept (to its zone)."""
        gangs = self.ctx.gangs
        if gangs is None or not gangs.running_on:
            return {}
        name = candidate.node.info.name
        moving = {p.key for p in candidate.pods}
        several = len(gang_regions(self.ctx)) > 1
        out: dict[str, GangHome] = {}
        for pod in (*candidate.place, *candidate.shrink):
            if pod.gang is None or not (several or pod.one_zone):
                continue
            nodes = gangs.running_on.get(pod.gang, set())
            if name in nodes and not any(
                p.gang == pod.gang and p.key not in moving for p in self.on_node.get(name, ())
            ):
                nodes = nodes - {name}  # its members here all leave with the drain
            found = _homes(self.ctx, nodes, several)
            if found:
                out[pod.key] = GangHome(pod.gang, frozenset(found), pod.one_zone)
        return out

    def _fit_launching(
        self,
        cls: PodClass,
        bins: Mapping[GroupKey, list[Bin]],
        destinations: set[str],
        planned: Planned,
        home: GangHome | None = None,
    ) -> None:
        """First fit on nodes already launching (an earlier plan's: this plan's new nodes are never
        counted), in groups whose template node the pods may run on and whose launches do not fail. The
        pods a launching node runs first (its DaemonSets') count for the class's pod affinity and
        anti-affinity there, and for a hostname spread that selects them, as they do for scale-up's
        groups (:func:`~spillway.planner.expander.options`, :func:`~spillway.planner.placement.place_on_launching`)."""
        for group in self.ctx.groups:
            group_bins, template = bins.get(group.key), group.template
            if not cls.remaining or not group_bins or template is None or group.key in self.backed_off:
                continue
            if home is not None and not home.holds_group(group):
                continue
            fresh = fresh_node_selected(self.ctx, group)
            if (
                cls.blocker_on_new(group, fresh, joined=fresh_node_selected(self.ctx, group, sure=True))
                is not None
            ):
                continue
            if cls.domains.missing_on_new_node(template.labels, self.ctx.group_label_keys(group)):
                continue
            if cls.domains.marks.ports and port_taken(
                cls.domains.marks.ports, fresh_node_ports(self.ctx, group)
            ):
                continue
            # a hostname spread counts the pods it runs first too (Domains.new_node_cap), as scale-up does
            cap = cls.domains.new_node_cap(fresh)
            for node_id, count, labels in fill_launching(cls, group, group_bins, cls.remaining, cap):
                cls.take(count)
                destinations.add(node_id)
                planned.record(cls.domains, Spot(labels, template.taints), count)

    def _drain(
        self, candidate: Candidate, destinations: set[str], moved: set[str], *, make_room: bool
    ) -> None:
        """Stage the drain; its reason counts the pods that fit elsewhere, elastic workers re-placed
        (``moved``) among them, and the workers each elastic job gives up."""
        node, ctx = candidate.node, self.ctx
        given_up = candidate.given_up(moved)
        group, info = node.group, node.info
        assert group is not None and info.instance_id is not None
        self.stage.take(node, removes=not make_room)
        self.room.pop(info.name, None)
        where = ", ".join(sorted(destinations)[:2]) + (
            f" and {len(destinations) - 2} more" if len(destinations) > 2 else ""
        )
        shrink = "".join(f"; elastic job {job} gives up {n} worker(s)" for job, n in given_up.items())
        if make_room:
            code, saved = codes.MAKE_ROOM, "; pending pods take the node instead of a new one"
        else:
            code, saved = codes.CONSOLIDATION, f" < {ctx.config.consolidation_horizon_minutes:g} saved"
        reason = (
            f"{code}: its {len(candidate.place) + len(moved)} pod(s) fit on {where or 'no other node'}"
            f"{shrink}; restart cost {candidate.cost:.1f} node-minutes{saved}; "
            f"group {group.name} in {group.region}"
        )
        for job, workers in given_up.items():  # as many of its recreated workers wait for free room
            ctx.shrunk_out[job] = ctx.shrunk_out.get(job, 0) + workers
        pods = tuple(sorted(p.key for p in candidate.pods))
        # the pods moved at a cost (Candidate.place and .shrink: not expendable, not already leaving), which
        # the drain evicts with their whole grace or not at all
        whole = tuple(sorted(p.key for p in (*candidate.place, *candidate.shrink)))
        self.stage.drains.append(
            Drain(
                info.name, info.instance_id, group.name, group.region, reason, code, pods, whole_grace=whole
            )
        )


def _pod_key(pod: PodInfo) -> str:
    return pod.key


def _homes(ctx: Context, nodes: Collection[str], several: bool) -> set[tuple[str | None, str | None]]:
    """Where the members of a gang on ``nodes`` run (:func:`~spillway.planner.scaleup.gang_homes`); when
    none of those nodes has a known region in a cluster of ``several`` regions, {(None, None)}: it moves
    only among nodes of unknown region (:func:`~spillway.planner.scaleup.home_regions`' (None,), without
    its walk over every node for each member)."""
    found: set[tuple[str | None, str | None]] = set(gang_homes(ctx, nodes))
    if not found and several and any(n in ctx.nodes for n in nodes):
        found = {(None, None)}
    return found


@dataclass(frozen=True, slots=True)
class GangHome:
    """Where the running members of a gang are (:meth:`Consolidation._gang_homes`): (region, zone) of
    their nodes; ``one_zone``: its pods ask for one zone, so the zone counts too."""

    gang: str
    homes: frozenset[tuple[str | None, str | None]]  # (None, None): nodes of unknown region only
    one_zone: bool

    def holds_node(self, node: WorkNode) -> bool:
        return at_home(self.homes, node_region(node), node_zone(node), self.one_zone)

    def holds_group(self, group: NodeGroup) -> bool:
        """May ``group``'s nodes launching take a member (:func:`~spillway.planner.scaleup.group_in_domain`)?"""
        return any(
            region is not None and group_in_domain(group, region, zone if self.one_zone else None)
            for region, zone in self.homes
        )

    def places(self) -> str:
        unknown = f"nodes whose region is unknown ({UNKNOWN_REGION})"
        return ", ".join(
            sorted({(zone if self.one_zone and zone else region) or unknown for region, zone in self.homes})
        )


def _not_home_text(pod: str, home: GangHome) -> str:
    """Why a gang member found no room: the room where its gang runs does not hold it."""
    unknown = home.homes == {(None, None)}
    several = len({region for region, _ in home.homes}) > 1 and not home.one_zone
    where = "only on" if unknown else "in"
    rule = "a gang is not split further" if several else "a gang is not split over regions or zones"
    return (
        f"runs {pod}, whose gang {home.gang} runs {where} {home.places()}: its members move there only ({rule}), "
        "and the free room there does not hold it"
    )


PREEMPTABLE_FIRST = frozenset({codes.POD_SAFE_TO_EVICT, codes.POD_EXPENDABLE})


def _preempts(pod: PodInfo, move: Move) -> bool:
    """Whether the move evicts a Volcano-preemptable pod on an opt-in: the preemptable rule's, or one
    that comes first when the pod carries its mark too (safe-to-evict, a priority below
    ``expendable_priority_cutoff``). Volcano's rule (a gang's member only above its minMember) holds for
    the pod all the same: another mark does not lift it. (The gang was counted for the preemptable code
    only, so one plan broke a gang at its minMember: a member safe-to-evict too, or of a low priority.)"""
    return move.code == codes.POD_PREEMPTABLE or (move.code in PREEMPTABLE_FIRST and pod.preemptable)


def members_evicted(pods: Iterable[PodInfo]) -> dict[str, int]:
    """Gang key -> how many of ``pods`` (all evicted, as an idle node's expendable pods are) are its
    running Volcano-preemptable members, counted as :func:`gang_room` counts them: what its minMember
    must allow. A low priority lets such a member go free, not its gang below its minimum."""
    out: dict[str, int] = {}
    for pod in pods:
        if pod.gang is None or not pod.preemptable or pod.node_name is None:
            continue
        if not (pod.terminal or pod.terminating):
            out[pod.gang] = out.get(pod.gang, 0) + 1
    return out


def first_short(taken: Mapping[str, int], left: Mapping[str, int]) -> str | None:
    """The first key, by name, of which a drain takes (``taken``) more than it may lose (``left``; a key
    not in ``left`` may lose none), or None: the job, gang or Job a refusal names, the same on every run."""
    return min((key for key, n in taken.items() if n > left.get(key, 0)), default=None)


def gang_refusal(taken: Mapping[str, int], left: Mapping[str, int]) -> Verdict:
    """Why a drain taking ``taken`` running preemptable members of gangs (by gang) would take one below
    its minMember (``left``: the members each may still lose, :meth:`ScaleDownStage.gang_left`; a gang
    with no known minimum is not in it), or None."""
    gang = first_short({g: n for g, n in taken.items() if g in left}, left)
    if gang is None:
        return None
    return (
        codes.POD_NEVER,
        f"runs {taken[gang]} volcano.sh/preemptable member(s) of gang {gang}, which may lose "
        f"{left[gang]} before its minMember: Volcano preempts a gang's member only above it",
    )


def elastic_refusal(taken: Mapping[str, int], left: Mapping[str, int]) -> Verdict:
    """Why a drain taking ``taken`` running workers of elastic jobs (by job) would take one below its
    minimum (``left``: the workers each may still lose, :meth:`ScaleDownStage.elastic_left`), or None."""
    job = first_short(taken, left)
    if job is None:
        return None
    return (
        codes.ELASTIC_MIN,
        f"runs {taken[job]} worker(s) of elastic job {job}, which may lose {left.get(job, 0)} before its minimum",
    )


def gang_room(
    snapshot: ClusterSnapshot, leaving: set[str], moved: frozenset[str] = frozenset()
) -> dict[str, int]:
    """Gang key -> how many running members it may lose before its minMember (its PodGroup's, else the
    pods' own word, Kueue's pod-group-total-count): members bound, not finished nor terminating, on a
    node they are not leaving, and not ``moved`` by a make room under way. Gangs with no known minimum
    are left out."""
    minimum = {g.key: g.min_member for g in snapshot.gangs if g.min_member > 0}
    running: Counter[str] = Counter()
    for pod in snapshot.pods:
        if pod.gang is None:
            continue
        if pod.gang not in minimum and pod.gang_min > 0:
            minimum[pod.gang] = pod.gang_min
        if (
            pod.node_name is not None
            and pod.node_name not in leaving
            and pod.key not in moved
            and not (pod.terminal or pod.terminating)
        ):
            running[pod.gang] += 1
    return {gang: max(0, running[gang] - low) for gang, low in minimum.items()}


def backoff_refusal(counted: Mapping[str, int], left: Mapping[str, int]) -> Verdict:
    """Why a drain evicting ``counted`` pods of batch/v1 Jobs (by Job) would take one past its backoffLimit
    (``left``: the failed pods each survives, less what this plan evicts already), or None."""
    job = first_short(counted, left)
    if job is None:
        return None
    return (
        codes.POD_NEVER,
        f"runs {counted[job]} pod(s) of {job}, which survives {left.get(job, 0)} more failed pod(s) before "
        "its backoffLimit: the job controller counts each evicted pod as failed",
    )


def counted_by_job(pods: Iterable[PodInfo], jobs: Mapping[str, JobInfo]) -> dict[str, int]:
    """batch/v1 Job -> how many of ``pods`` (all evicted) it counts as failed against its backoffLimit."""
    return dict(Counter(job.key for pod in pods if (job := counting_job(pod, jobs)) is not None))


def _members(moves: Sequence[tuple[PodInfo, Move]]) -> dict[str, int]:
    """Elastic job -> the moved workers of it an opt-in moves (``Move.member``: not shrinks)."""
    return dict(Counter(move.member for _, move in moves if move.member is not None))


def _counted(moves: Sequence[tuple[PodInfo, Move]]) -> dict[str, int]:
    """batch/v1 Job -> how many of the moved pods it counts as failed against its backoffLimit."""
    return dict(Counter(move.counts for _, move in moves if move.counts is not None))


def _no_room(candidate: Candidate) -> str:
    """Why the candidate's pods found no room: a pod its claim would hold on every node (the placement
    refuses it everywhere: :meth:`PodClass.blocker`), else the room is too small."""
    held = next((p for p in candidate.place if p.volume_wait), None)
    if held is not None:
        return (
            f"runs {held.key}, which kube-scheduler would place on no node once evicted: {held.volume_wait}"
        )
    return f"its {len(candidate.place)} pod(s) do not fit in the free room of the rest of the cluster"


def _topology_settling(candidate: Candidate, planned: Planned) -> Verdict:
    """A pod of the candidate whose pod topology this plan changes already: the candidate waits for a
    later plan.

    * A selector of a topology spread (or of a pod affinity term) that selects the pod and pods this
      plan places or moves. kube-scheduler checks each pod's skew when it places that pod, against the
      pods placed before it; a move judged on the counts of the plan's end could lower the least loaded
      domain under pods the plan placed earlier (a replica moved out of the emptiest zone leaves a
      pending replica of its Deployment, bound for the fullest, refused there; the same for a canary
      the Deployment's spread counts but which has no spread of its own), so a plan changes where the
      pods of one selector run by one candidate at most.
    * A required pod affinity that selects pods this plan moves, or a pod that the required pod
      affinity of pods this plan places or moves selects: the domains such a term leaves are those of
      the pods before the plan, and the pod followed may be on its way out of one."""
    for pod in candidate.pods:
        for term in pod.selected_by:
            if planned.selected.get(term):
                return (
                    codes.DOES_NOT_FIT,
                    f"runs {pod.key}, which a topology spread or pod (anti-)affinity counts with pods "
                    "this plan places or moves already: moved once they settle",
                )
        for term, key in pod.affinity_own:
            if any(count < 0 for _, count in planned.selected.get(term, ())):
                return (
                    codes.DOES_NOT_FIT,
                    f"runs {pod.key}, whose {key} pod affinity selects pods this plan moves: moved once "
                    "they settle",
                )
        if planned.following.intersection(pod.selected_by):
            return (
                codes.DOES_NOT_FIT,
                f"runs {pod.key}, which pods this plan places or moves must run beside (pod affinity): "
                "moved once they settle",
            )
    return None


def _never(moves: Sequence[tuple[PodInfo, Move]]) -> Verdict:
    never = [(pod, move) for pod, move in moves if not move.movable]
    if not never:
        return None
    pod, move = never[0]
    more = f" and {len(never) - 1} more" if len(never) > 1 else ""
    return codes.POD_NEVER, f"runs {pod.key}, which may not be moved ({move.reason}){more}"


def _whole_on_one(cls: PodClass, room: Iterable[WorkNode]) -> list[Pool]:
    """The first node of ``room`` that takes every pod of a class whose required pod affinity on the
    hostname selects its own pods, all leaving (:attr:`~spillway.planner.topology.Domains.leads_group`):
    once they are gone, kube-scheduler lets the first of them go anywhere and binds the others only
    beside it, so they move to one node or some are stranded; none when no node takes them all."""
    want = cls.remaining
    for node in room:
        info = node.info
        if (
            cls.fit_on(info.name, node.free, want) == want
            and min(cls.domains.cap(info.name), cls.room_in(info.labels)) >= want
            and not cls.domains.marks.repels(node.marks)
            and cls.blocker(info.labels, info.taints, info.name) is None
        ):
            return [Pool([node], dict(node.free))]
    return []


def _whole_in_one_zone(cls: PodClass, room: Iterable[WorkNode]) -> list[Pool]:
    """The nodes of ``room`` in the first zone (domain of each key of the class's waived pod affinity,
    :attr:`~spillway.planner.topology.Domains.leads_zone`) whose room takes every pod of a class whose
    required pod affinity over a zone selects its own pods, all leaving: once they are gone,
    kube-scheduler lets the first of them go anywhere and runs the others only in its zone, so they
    move into one zone or some are stranded; none when no zone takes them all."""
    want = cls.remaining
    keys = sorted({key for _, key in cls.domains.leads_zone})
    zones: dict[tuple[str, ...], list[WorkNode]] = {}
    for node in room:
        domain = tuple(node.info.labels.get(key, "") for key in keys)
        if all(domain):
            zones.setdefault(domain, []).append(node)
    for nodes in zones.values():
        takes = sum(_takes(cls, node, want) for node in nodes)
        if takes >= want:
            return pools(nodes)
    return []


def _takes(cls: PodClass, node: WorkNode, want: int) -> int:
    """How many of ``want`` pods of the class ``node`` takes, as first fit would judge it."""
    info = node.info
    if cls.domains.marks.repels(node.marks) or cls.blocker(info.labels, info.taints, info.name) is not None:
        return 0
    limit = min(want, cls.domains.cap(info.name), cls.room_in(info.labels))
    return cls.fit_on(info.name, node.free, limit)


def _classes(
    pods: Iterable[PodInfo], ctx: Context, leaving: Leaving, homes: Mapping[str, GangHome] | None = None
) -> list[PodClass]:
    """The pods to re-place as classes (pods the scheduler cannot tell apart), biggest first; their pod
    topology without what is ``leaving``; gang members kept to where their gang runs (``homes``, by pod
    key) apart from the others."""
    classes: dict[tuple[object, ...], PodClass] = {}
    for pod in pods:
        key: tuple[object, ...] = (pod.scheduling_key(), pod.volumes)  # a class's pods share their volumes
        if homes and pod.key in homes:
            key += (homes[pod.key],)
        cls = classes.get(key)
        if cls is None:
            domains = ctx.topology.domains(pod, leaving)
            cls = classes[key] = new_class(pod, domains=domains)
            cls.volumes, cls.volume_nodes = pod.volumes, ctx.volume_nodes
        cls.pods.append(pod.key)
    return sorted(classes.values(), key=PodClass.sort_key)
