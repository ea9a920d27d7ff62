"""One predicate every path asks: may this pod be disturbed, and at what cost?

:func:`assess` is pure and looks only at a :class:`~spillway.model.cluster.PodInfo`. Its verdicts:

* ``ignore``: the pod does not keep its node busy and is not evicted (finished, mirror, DaemonSet, or,
  given ``now``, stuck terminating: still listed past ``PodInfo.stuck_after``, so no kubelet is left to
  stop it; cluster-autoscaler ignores such long-terminating pods too; or, on a ``dead_node``, one that
  never started: :func:`never_started`);
* ``wait``: already terminating; it keeps the node busy until it is gone, nothing to evict;
* ``never``: protected (``karpenter.sh/do-not-disrupt=true``,
  ``cluster-autoscaler.kubernetes.io/safe-to-evict=false``, ``openai/do-not-drain`` (1 or true), or no
  controller would recreate it and it
  is not annotated safe-to-evict=true, or it has local storage (an emptyDir on disk, a hostPath) and
  neither safe-to-evict=true nor a move opt-in, ``opted_in``, says its data may go); evicted only with
  ``force``, when it becomes ``movable``;
* ``movable``: may be evicted through the Eviction API;
* ``stays``: would be movable (or is forced), but its tolerations admit the drain's own marks, the
  cordon and the ``spillway.io/draining:NoSchedule`` taint (:func:`comes_back`): evicted, it or its
  controller's replacement (made from the same template) could be scheduled straight back onto the
  node, round after round until the deadline. No drain evicts it or waits for it; it goes with its
  node, as Karpenter leaves a pod that tolerates its ``karpenter.sh/disrupted:NoSchedule`` taint
  (kubernetes-sigs/karpenter pkg/utils/pod/scheduling.go, ``IsEvictable``/``IsDrainable`` through
  ``ToleratesDisruptedNoScheduleTaint``; designs/no-schedule-taint.md: such pods "would immediately
  reschedule"). It is still work on its node (Karpenter counts it reschedulable): no plan calls its
  node idle, nor moves it (:func:`assess_move`).

Everything but ``ignore`` keeps a node busy: the planner never drains a node with such a pod, but for
an expendable one (priority below ``expendable_priority_cutoff``) a drain may evict, or that stays and
goes with the node (:func:`goes_with_its_node`). The drain's pod classification maps one to one:
ignore→ignore, wait→wait, never→keep, movable→evict, stays→ignore (neither evicted nor waited for),
with the same reasons.

``cost`` orders victims, cheapest first: ``(priority, controller.kubernetes.io/pod-deletion-cost)``.

:func:`assess_move` asks the stricter question of consolidation (draining a node that still runs work,
to save cost): may the autoscaler *move* this pod of its own accord, and at what cost? In order:

1. not busy (finished, mirror, DaemonSet) or already terminating, its grace period ending within
   :data:`LEAVING_WITHIN` and the drain's deadline (:func:`leaving_within`): nothing to move, free;
   terminating and ending later: never (:func:`leaves_late`);
2. never: the node is annotated ``karpenter.sh/do-not-disrupt=true``; the pod is annotated
   ``karpenter.sh/do-not-disrupt=true`` or ``cluster-autoscaler.kubernetes.io/safe-to-evict=false``, or
   marked ``openai/do-not-drain`` (``1`` or ``true``, any case); it tolerates the drain's cordon and
   taint (no drain evicts it: a make-room would free nothing); more than one PodDisruptionBudget
   selects it (the Eviction API refuses such a pod whatever they allow); its PodDisruptionBudget allows
   no disruption now (a pod not running yet, or running and not Ready under a budget whose
   ``unhealthyPodEvictionPolicy`` lets it go, is not held by its budget: ``ClusterSnapshot.pdb_allowance``);
3. never a pod no controller would recreate (no controller ownerReference, whatever its labels say)
   unless it is ``safe-to-evict=true``: the drain keeps it without force (:func:`assess`), so a plan
   that named it would be refused; never a pod whose Volcano Job answers its eviction with more than
   the pod (RestartJob, RestartTask, AbortJob...: :func:`takes_more_than_the_pod`), nor one whose
   eviction ends its job (:func:`ends_its_job`), nor one whose eviction stops every worker of its
   torchrun job (the host of an elastic job's rendezvous, a node of a torchrun job on several nodes
   that restarts no worker group: :func:`stops_its_job`), whatever opt-in it has; then may move:
   priority below ``expendable_priority_cutoff`` (free, but a worker of an elastic job only while its
   job keeps its minimum, as below);
   ``safe-to-evict=true``; ``volcano.sh/preemptable`` true (its annotation, else its label, as Volcano
   reads them); a worker of an elastic job (see :class:`ElasticRef`: movable only while its job keeps its minimum,
   :func:`elastic_room`; never a batch/v1 Job's pod whose Job does not tolerate disruption); a pod of
   a batch Job whose ``podFailurePolicy`` ignores ``DisruptionTarget`` (its Job's rule spares the
   evicted pod, not the training: hence :func:`stops_its_job` first);
4. anything else never: a pod with local storage (``local-storage``), or of no kind known to tolerate
   a move, is not moved to save money (an operator's DrainNode still evicts controlled pods without
   local storage, through :func:`assess`);
5. and when the move is a drain's (``deadline``): a pod 3 moves at a cost (not an expendable one, free)
   whose grace period plus :data:`GRACE_MARGIN_SECONDS` is longer than the drains' deadline is never
   moved, as the drain could not evict it with its whole grace (``grace-past-deadline``, :func:`cut_short`);
   nor a critical pod whose grace comes too late after the wait for its node's other pods, which the
   drain evicts first (:func:`waits_for_others`, on the node's moves).

Local storage is no never-rule of a move: every reason to move a pod in 3 is an opt-in that says the
workload tolerates losing the pod, and with it the pod's scratch data, so it overrides local storage
(cluster-autoscaler leaves expendable pods out of its drain rules altogether, and a safe-to-evict=true
pod passes its local-storage rule). The drain agrees: a plan's drain names the pods it moves, and
:func:`assess` with ``opted_in`` lets them go; any other pod with local storage it keeps without force.

The cost of a move (:func:`move_cost`) grows with priority, ``controller.kubernetes.io/pod-deletion-cost``
and the work lost (the pod's age, up to a day); never-movable pods cost ``inf``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Literal

from spillway.model.cluster import DEFAULT_GRACE_SECONDS, NodeInfo, PodInfo, TaintT, is_critical
from spillway.model.drain import DEFAULT_POLL_SECONDS
from spillway.model.jobs import (
    DO_NOT_DRAIN,
    DO_NOT_DRAIN_VALUES,
    VOLCANO_POD_ONLY_ACTIONS,
    VOLCANO_PREEMPTABLE,
    JobInfo,
    job_key,
)
from spillway.model.k8s import (
    DAEMONSET_POD,
    DO_NOT_DISRUPT,
    DRAINING_TAINT,
    SAFE_TO_EVICT,
    SAFE_TO_EVICT_LOCAL_VOLUMES,
)
from spillway.model.utc import aware
from spillway.planner import codes
from spillway.planner.predicates import admits

Verdict = Literal["ignore", "wait", "movable", "never", "stays"]
IGNORE: Verdict = "ignore"
WAIT: Verdict = "wait"
MOVABLE: Verdict = "movable"
NEVER: Verdict = "never"
STAYS: Verdict = "stays"
# what a drain puts on its node besides the cordon (spec.unschedulable): spillway.adapters.kube
DRAINING_TAINTS: tuple[TaintT, ...] = ((DRAINING_TAINT, None, "NoSchedule"),)
TOLERATES_DRAIN = (
    f"tolerates the drain's cordon and its {DRAINING_TAINT}:NoSchedule taint: evicted, it (or its "
    "replacement) could be scheduled straight back, so it is neither evicted nor waited for and goes "
    "with the node"
)


@dataclass(frozen=True, slots=True)
class Disruption:
    verdict: Verdict
    reason: str
    code: str
    cost: tuple[int, int]  # (priority, pod-deletion-cost): lower is cheaper to disturb

    @property
    def keeps_node_busy(self) -> bool:
        """A node with such a pod is not empty: scale-down leaves it, a drain waits for it."""
        return self.verdict != IGNORE


def assess(
    pod: PodInfo,
    *,
    force: bool = False,
    now: datetime | None = None,
    opted_in: bool = False,
    dead_node: bool = False,
) -> Disruption:
    """May ``pod`` be disturbed, and at what cost. ``force`` overrides the protections, nothing else;
    ``now`` tells a stuck terminating pod (ignored) from one still terminating (waited for);
    ``dead_node``: its node has been NotReady long enough that a pod which never started there never
    will (:func:`dead`), so such a pod is ignored (:func:`never_started`).
    ``opted_in``: a move opt-in holds for the pod (:func:`assess_move` found it movable: expendable,
    ``safe-to-evict=true``, Volcano preemptable, an elastic worker above its job's minimum, a Job that
    ignores DisruptionTarget; a plan's drain names such pods): it says the workload tolerates losing
    the pod, and so its scratch data, so local storage no longer protects it (nothing else changes)."""
    cost = (pod.priority, pod.deletion_cost)
    if not keeps_node_busy(pod, now, dead_node=dead_node):
        code, why = _ignored(pod, dead_node=dead_node)
        return Disruption(IGNORE, why, code, cost)
    if pod.terminating:
        return Disruption(WAIT, "terminating", codes.POD_TERMINATING, cost)
    protected = _protection(pod, opted_in=opted_in)
    if protected is not None and not force:
        code, why = protected
        return Disruption(NEVER, f"{why} (evicted only with force)", code, cost)
    if comes_back(pod):
        return Disruption(STAYS, TOLERATES_DRAIN, codes.POD_TOLERATES_DRAIN, cost)
    if protected is None:
        why = "a controller recreates it elsewhere" if pod.controlled else f"annotated {SAFE_TO_EVICT}=true"
        return Disruption(MOVABLE, why, codes.POD_MOVABLE, cost)
    return Disruption(MOVABLE, f"{protected[1]}, but forced", codes.POD_FORCED, cost)


def comes_back(pod: PodInfo) -> bool:
    """The pod's tolerations admit a node its drain marked: kube-scheduler's NodeUnschedulable filter
    (the cordon, read as ``node.kubernetes.io/unschedulable:NoSchedule``) and TaintToleration filter
    (``spillway.io/draining:NoSchedule``) both let it, and so its controller's replacement, onto the
    node. A pod that tolerates only one of them is kept away by the other. A pod with no toleration
    tolerates neither (most pods: no taints to go through)."""
    return bool(pod.tolerations) and admits(True, DRAINING_TAINTS, pod.tolerations)


def keeps_node_busy(pod: PodInfo, now: datetime | None = None, *, dead_node: bool = False) -> bool:
    """``assess(pod, now=now, dead_node=dead_node).keeps_node_busy`` without building the verdict (the
    planner asks it for every pod)."""
    return not (
        pod.terminal or pod.mirror or pod.daemonset or stuck(pod, now) or (dead_node and never_started(pod))
    )


def never_started(pod: PodInfo) -> bool:
    """The pod is bound, ``Pending``, and no container of it, init or app, ever ran: none is running or
    has terminated, now or before a restart, and none restarted (``PodInfo.unstarted``, from the
    container statuses: :meth:`spillway.model.k8s.Pod.never_started`). Its ``startTime`` does not
    count: the kubelet writes it before it finds the node's network not ready and starts nothing. A pod
    whose init containers ran, or that ran and whose kubelet then went away, has started: it is work,
    whatever its phase says now.

    On a node NotReady past ``scale_down_unready_minutes`` (:func:`dead`) such a pod is no work: it is
    one whose tolerations admit ``node.kubernetes.io/not-ready`` (``tolerations: [{operator: Exists}]``),
    bound by kube-scheduler to a Node that never became Ready (its CNI never started), and it would stay
    there, Pending, for good (it tolerates the NoExecute taint too, so taint-based eviction never takes
    it). It keeps no node busy and no drain evicts it or waits for it (evicted, it would only stay
    Terminating for want of a kubelet): it goes with the node, whose removal frees it (the pod garbage
    collector deletes the pods of a Node that no longer exists, and their controllers, if any, recreate
    them; a bare pod is gone). Its protections (``karpenter.sh/do-not-disrupt``, ``safe-to-evict=false``,
    ``openai/do-not-drain``, no controller, local storage) do not keep the node: they keep running work
    from being interrupted, and this pod runs none; kept, the node would keep it from ever running,
    which is not what they ask. On a node NotReady for less (a Ready node's kubelet missed a few
    heartbeats while a freshly bound pod pulls its image: that pod is Pending too) it is work as any
    other pod."""
    return pod.unstarted and pod.node_name is not None and pod.phase == "Pending"


def dead(node: NodeInfo, now: datetime, after: timedelta) -> bool:
    """``node`` is NotReady, and has been for at least ``after`` (since its Ready condition last changed,
    else since it was created; never when neither is known), ``scale_down_unready_minutes`` for the
    plan: a pod that never started on it is no work (:func:`never_started`). ``after`` 0: NotReady at all (a give-back's
    instance, whose launch did not deliver, :func:`spillway.act.instances.working_instances`).

    Only while its kubelet reports it not ready (Ready ``False``: ``NodeInfo.kubelet_not_ready``), which
    vouches that its pods' statuses are current. Ready ``Unknown`` (the node controller's word for a
    kubelet that stopped reporting) or no Ready condition: the statuses are stale, a partitioned kubelet
    may have started the pods since, so the node is never dead (and a snapshot written before the field
    never says so)."""
    if node.ready or not node.kubelet_not_ready:
        return False
    if after <= timedelta(0):
        return True
    since = node.ready_changed_at or node.created_at
    if since is None:
        return False
    since = aware(since)
    return now - since >= after


def goes_with_its_node(
    pod: PodInfo, pdbs_allow: int | None, now: datetime, jobs: Mapping[str, JobInfo] | None = None
) -> bool:
    """An expendable pod (the caller checks its priority against ``expendable_priority_cutoff``) that
    keeps no node from scale-down: cluster-autoscaler leaves such pods out of its scale-down snapshot,
    so they "don't prevent scale downs" (its FAQ). Here only when the drain of its node may evict it:
    :func:`assess` finds it movable (running, not terminating, not protected by
    ``karpenter.sh/do-not-disrupt`` or ``safe-to-evict=false``, a controller recreates it or it is
    ``safe-to-evict=true``) and no never-rule of a move holds it (``openai/do-not-drain``, more than one
    budget, a budget that allows no disruption now: ``pdbs_allow`` as :func:`assess_move` takes it).
    cluster-autoscaler does not evict such pods at all (the node's deletion ends them) and reads no
    annotation of theirs; Spillway evicts them, and a pod marked never to be disturbed keeps its node.
    One that stays (it tolerates the drain's cordon and taint, :func:`comes_back`) goes with the node as
    cluster-autoscaler's do: the drain neither evicts it nor waits for it, so no budget is asked.
    Nor one whose eviction would end its job (:func:`ends_its_job`, with the snapshot's ``jobs``), nor
    one whose eviction stops every worker of its torchrun job (:func:`stops_its_job`): it is workload,
    as consolidation never moves it."""
    moved = assess(pod, now=now, opted_in=True)  # its priority is the opt-in: local storage holds it not
    if moved.verdict == STAYS:
        return True
    if jobs is not None and (ends_its_job(pod, jobs) is not None or stops_its_job(pod, jobs) is not None):
        return False
    return moved.verdict == MOVABLE and _never_move(pod, None, pdbs_allow) is None


def stuck(pod: PodInfo, now: datetime | None) -> bool:
    """Terminating and still listed past ``stuck_after``: its kubelet is gone (never, without ``now``)."""
    return now is not None and pod.stuck_after is not None and now > pod.stuck_after


NEVER_STARTED = (
    "never started, and its node has been NotReady past scale_down_unready_minutes: it never will there; it "
    "goes with the node (the pod garbage collector deletes it with the Node; its controller, if any, recreates it)"
)


def _ignored(pod: PodInfo, *, dead_node: bool = False) -> tuple[str, str]:
    """Why a pod that does not keep its node busy is ignored."""
    if pod.terminal:
        return codes.POD_FINISHED, f"finished ({pod.phase})"
    if dead_node and never_started(pod):
        return codes.POD_NEVER_STARTED, NEVER_STARTED
    if pod.stuck_after is not None and not (pod.mirror or pod.daemonset):
        return (
            codes.POD_STUCK,
            f"terminating and still there past {pod.stuck_after.isoformat()} (deletionTimestamp + its grace "
            "period + 30 s): no kubelet is left to stop it",
        )
    if pod.mirror:
        return codes.POD_MIRROR, "a static (mirror) pod: the kubelet runs it"
    if pod.owner_kind != "DaemonSet":
        owner = f"{pod.owner_kind} {pod.owner_name}" if pod.owner_kind else "no owner"
        return codes.POD_DAEMONSET, f"annotated {DAEMONSET_POD}=true: taken as a DaemonSet pod ({owner})"
    return codes.POD_DAEMONSET, f"a DaemonSet pod ({pod.owner_name})"


def marked_never(pod: PodInfo) -> tuple[str, str] | None:
    """The pod's own mark never to be disturbed, (code, why), or None: ``karpenter.sh/do-not-disrupt``
    true, ``safe-to-evict`` false, ``openai/do-not-drain`` (1 or true). Of any pod, a DaemonSet's and a
    static one's too: no drain evicts such a pod without ``force``."""
    if pod.do_not_disrupt:
        return codes.POD_DO_NOT_DISRUPT, f"annotated {DO_NOT_DISRUPT}=true"
    if pod.safe_to_evict is False:
        return codes.POD_NOT_SAFE_TO_EVICT, f"annotated {SAFE_TO_EVICT}=false"
    if pod.do_not_drain:
        return codes.POD_DO_NOT_DRAIN, f"marked {DO_NOT_DRAIN}: {DO_NOT_DRAIN_VALUES}"
    return None


def _protection(pod: PodInfo, *, opted_in: bool = False) -> tuple[str, str] | None:
    marked = marked_never(pod)
    if marked is not None:
        return marked
    if not pod.controlled and pod.safe_to_evict is not True:
        return codes.POD_NO_CONTROLLER, "no controller would recreate it"
    if pod.local_storage and pod.safe_to_evict is not True and not opted_in:
        return codes.POD_LOCAL_STORAGE, _local_storage(pod)
    return None


def _local_storage(pod: PodInfo) -> str:
    """Why local storage keeps a pod: kubectl drain refuses such a pod without --delete-emptydir-data
    (kubernetes/kubectl pkg/drain/filters.go, localStorageFilter), and cluster-autoscaler keeps its node
    (simulator/drainability/rules/localstorage, --skip-nodes-with-local-storage, true by default) unless
    it is annotated safe-to-evict=true (the safetoevict rule comes first) or each such volume is named
    in safe-to-evict-local-volumes (model.cluster.local_volumes)."""
    names = ", ".join(pod.local_storage[:3]) + (" ..." if len(pod.local_storage) > 3 else "")
    return (
        f"local storage: volume(s) {names} (emptyDir on the node's disk, or hostPath) hold data only this "
        f"node has; annotate {SAFE_TO_EVICT}=true, or name them in {SAFE_TO_EVICT_LOCAL_VOLUMES}"
    )


# -- consolidation: may the autoscaler move a pod to save cost --

NO_JOBS: Mapping[str, JobInfo] = MappingProxyType({})
# replica types that hold an elastic job together (rendezvous host, launcher): never shrunk away; a
# worker that hosts the rendezvous is one too (PodInfo.rdzv_host, elastic_of)
FIXED_ROLES = frozenset({"master", "launcher", "chief", "ps", "evaluator"})
AGE_CAP_SECONDS = 86400.0  # the age term of the cost stops growing after a day


@dataclass(frozen=True, slots=True)
class ElasticRef:
    """The pod is one of ``job``'s workers, which may run anywhere from ``min`` to ``max``: moving it is
    allowed only while the job keeps at least ``min`` workers (count with :func:`elastic_room`)."""

    job: str
    min: int
    max: int


@dataclass(frozen=True, slots=True)
class Move:
    """The answer of :func:`assess_move`. ``cost`` orders victims (0 for free, ``inf`` when not movable).
    ``counts``: the key of the batch/v1 Job that counts the pod's eviction as a failed pod against its
    backoffLimit (``JobInfo.evictions_left``): a plan moves no more of its pods than that leaves.
    ``member``: the elastic job (:func:`elastic_member`) one of whose running workers an opt-in moves
    (``safe-to-evict=true``, Volcano preemptable: not a shrink, ``elastic`` None) or a priority below
    ``expendable_priority_cutoff`` moves free: the move still takes a worker from the job, and a plan
    takes none below its minimum (:func:`elastic_room`)."""

    movable: bool
    reason: str
    code: str
    cost: float
    elastic: ElasticRef | None = None
    counts: str | None = None
    member: str | None = None


# A terminating pod is leaving of itself, its room free soon, when its grace period ends within this of
# the plan: about the soonest a node launched instead is Ready (the replay's boot, launch to Ready, is 120 s).
# A drain's deadline (DRAIN_DEADLINE_SECONDS, 900 s by default) may be shorter: then that
# (:func:`leaving_within`).
LEAVING_WITHIN = timedelta(minutes=2)


def assess_move(
    pod: PodInfo,
    node: NodeInfo | None,
    pdbs_allow: int | None,
    now: datetime,
    cutoff: int,
    jobs: Mapping[str, JobInfo] = NO_JOBS,
    within: timedelta = LEAVING_WITHIN,
    deadline: float | None = None,
) -> Move:
    """May consolidation move ``pod`` off ``node`` to save cost, and at what cost (module docstring).

    ``pdbs_allow``: the disruptions the budgets selecting the pod let its eviction take now (None when
    no budget guards it; ``ClusterSnapshot.pdb_allowance``, which answers 0 for a pod more than one
    budget selects). ``cutoff``: the config's
    ``expendable_priority_cutoff``. ``jobs``: the snapshot's jobs by key (``ClusterSnapshot.jobs_by_key``).
    ``within``: how soon a pod already terminating must be gone (:func:`leaving_within`). ``deadline``:
    the drains' (``drain_deadline_seconds``), when the move is a drain's: a pod whose grace is longer
    is not moved at a cost (:func:`cut_short`).
    """
    if not keeps_node_busy(pod, now):
        code, why = _ignored(pod)
        return Move(True, why, code, 0.0)
    if pod.terminating:
        late = leaves_late(pod, now, within)
        if late is not None:
            return Move(False, late, codes.POD_TERMINATING_LATE, math.inf)
        return Move(True, "terminating: already leaving", codes.POD_TERMINATING, 0.0)
    blocked = _never_move(pod, node, pdbs_allow)
    if blocked is not None:
        return blocked
    move = _may_move(pod, now, cutoff, jobs)
    if not move.movable:
        return move
    ends = ends_its_job(pod, jobs)
    if ends is not None:  # whatever opt-in moved it: it lets the pod go, not the job
        return Move(False, ends, codes.POD_ENDS_JOB, math.inf)
    stops = stops_its_job(pod, jobs)
    if stops is not None:  # nor the job's other workers, which stop with it
        return Move(False, stops, codes.POD_NOT_KNOWN_MOVABLE, math.inf)
    cut = cut_short(pod, deadline) if move.cost > 0 else None  # an expendable pod is killed at will
    if cut is not None:
        return Move(False, cut, codes.POD_GRACE_PAST_DEADLINE, math.inf)
    counted = counting_job(pod, jobs)
    return replace(move, counts=counted.key) if counted is not None else move


def leaving_within(drain_deadline_seconds: float) -> timedelta:
    """How soon a pod already terminating must be gone for a move to count on its room: within
    :data:`LEAVING_WITHIN`, and within the plan's drains' deadline (``PlannerConfig.drain_deadline_seconds``),
    since such a drain waits for it and fails at its deadline when the pod is still there."""
    return min(LEAVING_WITHIN, timedelta(seconds=drain_deadline_seconds))


def leaves_late(pod: PodInfo, now: datetime, within: timedelta = LEAVING_WITHIN) -> str | None:
    """Why a terminating pod is not leaving soon enough for a move to count on its room, or None.
    ``within``: :func:`leaving_within` the plan's drain deadline.

    The API server sets ``metadata.deletionTimestamp`` to the deletion's time plus its grace period
    (``deletionGracePeriodSeconds``, the pod's ``terminationGracePeriodSeconds`` unless the delete gave
    another), and may bring it earlier, never later (ObjectMeta.DeletionTimestamp, k8s.io/apimachinery
    pkg/apis/meta/v1/types.go). The kubelet gives the pod that grace (its preStop hook, then SIGTERM)
    before it kills it, and a drain evicts nothing of a pod already terminating (:func:`assess`: it
    waits). So its room is free at ``PodInfo.leaves_at``: a make room that counted on it sooner held its
    pending pods off a new node, and a drain that waited for it (make room, consolidation) timed out at
    its deadline and failed, giving the node back. Past ``within`` it is not moved: make room
    launches, and consolidation keeps the node until it is near its end. A snapshot written before
    ``leaves_at`` was kept says nothing: the pod is leaving, as before."""
    if pod.leaves_at is None or pod.leaves_at <= now + within:
        return None
    bound = "later than a new node's" if within == LEAVING_WITHIN else "after the drain's deadline"
    return (
        f"terminating until {pod.leaves_at.isoformat()} (its deletionTimestamp: the end of the grace period "
        f"the kubelet gives it, which no drain shortens): its room is free more than "
        f"{within.total_seconds():.0f} s from now, {bound}"
    )


# What a drain's deadline has lost before the drain evicts a pod its plan moves, at the least: the deadline
# runs from the drain's validation, then come the cordon step and the first eviction round (two more
# Lambda invocations through Step Functions, about 10 s each when cold, and their retries of an API
# server unavailable for a moment, 2 + 4 + 8 s: drain_node.asl.json), 45 s in all; and a pod a
# PodDisruptionBudget holds in that round (one allowed disruption, two of its pods on the node) is tried
# again a poll later (DEFAULT_POLL_SECONDS, 15 s). A pod the plan moves at a cost is evicted with its
# whole grace or not at all (spillway.act.drain: a drain that can no longer give it gives up), so a pod
# whose grace leaves less than this before the deadline would make its drain give up, bound to.
DRAIN_START_SECONDS = 45
GRACE_MARGIN_SECONDS = DRAIN_START_SECONDS + DEFAULT_POLL_SECONDS


def cut_short(pod: PodInfo, deadline: float | None) -> str | None:
    """Why a drain with this ``deadline`` (seconds) could not give the pod its whole shutdown, or None.
    Its eviction gives the pod no more grace than the time left before the deadline
    (:func:`evicted_late`), so the kubelet would kill a pod whose ``terminationGracePeriodSeconds`` is
    longer (an hour to write a checkpoint) at the deadline, before it has finished: killed, not moved.
    And the eviction comes :data:`GRACE_MARGIN_SECONDS` after the drain's start at the soonest a budget
    allows, so a grace within that of the deadline leaves the drain nothing to give it whole: the drain
    gives up rather than cut it (:meth:`spillway.act.drain.Drainer._evict_in_time`), and a plan that
    started it would have moved nothing. cluster-autoscaler's drain cuts the grace to
    ``--max-graceful-termination-sec`` (600 s: core/scaledown/actuation, evictPod, the same cap at every
    eviction); Karpenter waits for the pod's whole grace unless its node's own terminationGracePeriod
    expires. Spillway moves no such pod to save cost."""
    if deadline is None or pod.grace + GRACE_MARGIN_SECONDS <= deadline:
        return None
    return (
        f"terminationGracePeriodSeconds {pod.grace} plus {GRACE_MARGIN_SECONDS} s (what a drain spends before "
        f"it evicts: its cordon, its first round, one retry for a budget) is longer than the drains' deadline "
        f"({deadline:.0f} s, DRAIN_DEADLINE_SECONDS): its drain could not give it its whole shutdown"
    )


def waits_for_others(
    moves: Sequence[tuple[PodInfo, Move]], now: datetime, deadline: float | None
) -> list[tuple[PodInfo, Move]]:
    """A node's moves (:func:`assess_move` of each pod that keeps it busy) judged as its drain acts: a
    critical pod (:func:`~spillway.model.cluster.is_critical`) the drain evicts only once the node's
    other pods are gone (``spillway.act.drain._critical_held``), so a critical pod moved at a cost
    needs the longest wait for the others (the grace of a pod the drain evicts, capped by the deadline
    as its eviction caps it; the time left of one already terminating, counted from the plan) plus its
    own grace plus :data:`GRACE_MARGIN_SECONDS` within the drains' ``deadline``. :func:`cut_short` asks
    only its own grace plus the margin: a drain of a 30 s pod and a 30 s critical pod under a 90 s
    deadline moved the first, waited its 30 s, then had less than 30 s left for the critical one and
    gave up (its whole grace or no eviction), the first pod moved for nothing. Such a critical pod is
    refused ``grace-past-deadline``, the code of the same fact (its drain could not give it its whole
    grace), which a drain ahead of a scheduled action overrides as it does :func:`cut_short`'s. No
    ``deadline`` (such a drain ahead), no pod of the node critical, or none moved at a cost: the moves
    as they are."""
    held = [
        i
        for i, (pod, move) in enumerate(moves)
        if move.movable and move.cost > 0 and is_critical(pod.priority)
    ]
    if deadline is None or not held:  # most nodes: no critical pod moved at a cost
        return list(moves)
    longest = _longest_wait(moves, now, deadline)
    if longest is None:
        return list(moves)
    wait, why = longest
    out = list(moves)
    for i in held:
        pod = out[i][0]
        if wait + pod.grace + GRACE_MARGIN_SECONDS > deadline:
            refused = Move(
                False, _waits_too_long(pod, wait, why, deadline), codes.POD_GRACE_PAST_DEADLINE, math.inf
            )
            out[i] = (pod, refused)
    return out


def room_behind_others(moves: Sequence[tuple[PodInfo, Move]], now: datetime, deadline: float) -> set[str]:
    """The critical pods among ``moves`` (the pods one drain moves) whose room comes later than a new
    node's, what :func:`evicted_late` asks of each pod make room moves: the drain evicts such a pod only
    once the others are gone (``spillway.act.drain._critical_held``), so its room comes after the longest
    wait for them plus its own grace (capped by the ``deadline``), not after its grace alone."""
    longest = _longest_wait(moves, now, deadline)
    if longest is None:
        return set()
    wait = longest[0]
    return {
        pod.key
        for pod, move in moves
        if move.cost > 0
        and is_critical(pod.priority)
        and wait + min(float(pod.grace), deadline) > LEAVING_WITHIN.total_seconds()
    }


def _longest_wait(
    moves: Sequence[tuple[PodInfo, Move]], now: datetime, deadline: float
) -> tuple[float, str] | None:
    """The longest a drain of these pods may wait for its non-critical ones to be gone before it evicts
    a critical one (``spillway.act.drain._critical_held``), and why; None when all are critical."""
    others = [_wait_for(pod, now, deadline) for pod, _ in moves if not is_critical(pod.priority)]
    return max(others, key=lambda other: other[0]) if others else None


def _wait_for(pod: PodInfo, now: datetime, deadline: float) -> tuple[float, str]:
    """How long a drain may wait for this non-critical pod to be gone, at most, and why."""
    if pod.terminating and pod.leaves_at is not None:
        left = max(0.0, (aware(pod.leaves_at) - now).total_seconds())
        return left, f"{pod.key} terminating until {pod.leaves_at.isoformat()}"
    return min(float(pod.grace), deadline), f"{pod.key}'s terminationGracePeriodSeconds {pod.grace}"


def _waits_too_long(pod: PodInfo, wait: float, why: str, deadline: float) -> str:
    return (
        f"critical (priority {pod.priority}): evicted only once the node's other pods are gone, up to "
        f"{wait:.0f} s after its drain evicts them ({why}); that plus its own terminationGracePeriodSeconds "
        f"{pod.grace} plus {GRACE_MARGIN_SECONDS} s is longer than the drains' deadline ({deadline:.0f} s, "
        "DRAIN_DEADLINE_SECONDS): its drain could not give it its whole shutdown"
    )


def fits_default_grace(drain_deadline_seconds: float) -> bool:
    """Whether a pod with Kubernetes' default ``terminationGracePeriodSeconds`` (30 s) and no other
    reason to stay may be moved under this drains' deadline (:func:`cut_short`): when not, consolidation
    and make room move no ordinary pod at all."""
    return drain_deadline_seconds >= DEFAULT_GRACE_SECONDS + GRACE_MARGIN_SECONDS


def evicted_late(pod: PodInfo, drain_deadline_seconds: float) -> str | None:
    """Why the room of a pod a drain would evict comes later than a new node's, or None: what make room
    asks of every pod it moves (:mod:`spillway.planner.makeroom`), as :func:`leaves_late` asks it of a
    pod already terminating.

    A drain's eviction gives the pod its ``terminationGracePeriodSeconds`` (``PodInfo.grace``) as the
    Eviction's ``DeleteOptions.gracePeriodSeconds``, capped by the seconds left before the drain's deadline
    (:meth:`spillway.act.drain.Drainer._evict_round`); the API server deletes the pod with that grace
    (pkg/registry/core/pod/strategy.go, CheckGracefulDelete: the options' grace over the pod's own), and
    the kubelet gives it all of it (its preStop hook, then SIGTERM) before it kills it. Until then the
    pod keeps its room, and kube-scheduler gives none of it to the pending pod. A pod that may take longer
    than :data:`LEAVING_WITHIN` (a checkpoint's hour, under the default 900 s deadline) is not moved to
    make room: the plan launches. Gone by the deadline whatever its grace, it never holds a drain past it."""
    grace = min(float(pod.grace), drain_deadline_seconds)
    if grace <= LEAVING_WITHIN.total_seconds():
        return None
    return (
        f"terminationGracePeriodSeconds {pod.grace}: evicted, it may keep its room {grace:.0f} s (up to the "
        f"drain's deadline), more than {LEAVING_WITHIN.total_seconds():.0f} s, later than a new node's"
    )


def _never_move(pod: PodInfo, node: NodeInfo | None, pdbs_allow: int | None) -> Move | None:
    """What keeps ``pod`` where it is whatever opts it in, or None. The refusals whose reason names
    nothing of the pod are made once (:data:`_NEVER_MOVES`): most pods a plan judges get one."""
    if node is not None and node.do_not_disrupt:
        why = f"its node {node.name} is annotated {DO_NOT_DISRUPT}=true"
        return Move(False, why, codes.NODE_DO_NOT_DISRUPT, math.inf)
    if pod.do_not_disrupt:
        return _NEVER_MOVES[codes.POD_DO_NOT_DISRUPT]
    if pod.safe_to_evict is False:
        return _NEVER_MOVES[codes.POD_NOT_SAFE_TO_EVICT]
    if pod.do_not_drain:
        return _NEVER_MOVES[codes.POD_DO_NOT_DRAIN]
    if comes_back(pod):  # no drain evicts it: it goes only with its node, and a make-room frees nothing
        return _NEVER_MOVES[codes.POD_TOLERATES_DRAIN]
    if pdbs_allow is not None and len(pod.pdbs) > 1:
        why = (
            f"selected by more than one PodDisruptionBudget ({', '.join(pod.pdbs)}): the Eviction API "
            "refuses to evict such a pod whatever they allow"
        )
        return Move(False, why, codes.POD_PDB_MULTIPLE, math.inf)
    if pdbs_allow is not None and pdbs_allow <= 0:
        return _NEVER_MOVES[codes.POD_PDB_ALLOWS_NONE]
    return None


# _never_move's refusals of fixed reasons, by code (a Move is frozen: one serves every pod)
_NEVER_MOVES: dict[str, Move] = {
    code: Move(False, why, code, math.inf)
    for code, why in (
        (codes.POD_DO_NOT_DISRUPT, f"annotated {DO_NOT_DISRUPT}=true"),
        (codes.POD_NOT_SAFE_TO_EVICT, f"annotated {SAFE_TO_EVICT}=false"),
        (codes.POD_DO_NOT_DRAIN, f"marked {DO_NOT_DRAIN}: {DO_NOT_DRAIN_VALUES}"),
        (codes.POD_TOLERATES_DRAIN, TOLERATES_DRAIN),
        (codes.POD_PDB_ALLOWS_NONE, "a PodDisruptionBudget selecting it allows no disruption now"),
    )
}


def _may_move(pod: PodInfo, now: datetime, cutoff: int, jobs: Mapping[str, JobInfo]) -> Move:
    # a pod no controller recreates is gone for good once evicted: only safe-to-evict=true lets it go,
    # as the drain judges it (assess), so a plan never names a pod its drain would refuse. A job's
    # label alone is no controller (an orphaned Job pod keeps it, and nothing recreates that pod)
    if not pod.controlled and pod.safe_to_evict is not True:
        return Move(False, "no controller would recreate it", codes.POD_NO_CONTROLLER, math.inf)
    action = takes_more_than_the_pod(pod, jobs)
    if action is not None:  # whatever opt-in the pod has: the others are not its to give up
        why = f"its Volcano Job's policy on PodEvicted is {action}: evicting it takes the Job's other pods with it"
        return Move(False, why, codes.POD_NOT_KNOWN_MOVABLE, math.inf)
    # neither an opt-in nor a low priority lets an elastic job go below its minimum: each worker moved so
    # is counted as a shrink's are (Move.member), an expendable one too, though it is moved free
    member = elastic_member(pod, jobs)
    job = member.job if member is not None else None
    if pod.priority < cutoff:
        why = f"priority {pod.priority} is below expendable_priority_cutoff {cutoff}"
        return Move(True, why, codes.POD_EXPENDABLE, 0.0, member=job)
    cost = move_cost(pod, now)
    if pod.safe_to_evict is True or pod.preemptable:
        if pod.safe_to_evict is True:
            return Move(True, f"annotated {SAFE_TO_EVICT}=true", codes.POD_SAFE_TO_EVICT, cost, member=job)
        return Move(True, f"{VOLCANO_PREEMPTABLE} is true", codes.POD_PREEMPTABLE, cost, member=job)
    elastic = _elastic_move(pod, jobs, cost)
    if elastic is not None:
        return elastic
    if tolerates_disruption(pod, jobs):
        why = "its Job's podFailurePolicy ignores DisruptionTarget: an eviction is not a failure"
        return Move(True, why, codes.POD_DISRUPTION_TOLERATED, cost)
    if pod.local_storage:  # every rule above that moves a pod is an opt-in, which overrides it
        return Move(False, _local_storage(pod), codes.POD_LOCAL_STORAGE, math.inf)
    kind = pod.owner_kind or "bare"
    return Move(
        False, f"a {kind} pod, of no kind known to tolerate a move", codes.POD_NOT_KNOWN_MOVABLE, math.inf
    )


def _elastic_move(pod: PodInfo, jobs: Mapping[str, JobInfo], cost: float) -> Move | None:
    """A worker of an elastic job: movable when a shrink may give it up (:func:`elastic_of`). Never a
    node its torchrun job cannot lose (:func:`stops_its_job`), whatever else would move it: its Job's
    tolerance of an eviction keeps the Job, not the training (:func:`assess_move` asks it again of a pod
    an opt-in or a low priority moves). None for any other pod."""
    elastic = elastic_of(pod, jobs)
    if elastic is not None:
        why = f"a worker of elastic job {elastic.job} ({elastic.min} to {elastic.max} workers)"
        return Move(True, why, codes.POD_ELASTIC, cost, elastic)
    stops = stops_its_job(pod, jobs)
    return None if stops is None else Move(False, stops, codes.POD_NOT_KNOWN_MOVABLE, math.inf)


def stops_its_job(pod: PodInfo, jobs: Mapping[str, JobInfo] = NO_JOBS) -> str | None:
    """Why evicting the pod stops every worker of its torchrun job, or None: it hosts the c10d rendezvous
    of an elastic job (the TCPStore every agent talks to runs in its agent), or it is a node of a torchrun
    job on several nodes, elastic or not, that restarts no worker group (``PodInfo.no_restarts``).

    No move takes such a pod, whatever lets it go: ``safe-to-evict=true``, Volcano preemptable, a
    priority below ``expendable_priority_cutoff``, its Job's tolerance of an eviction. Each of those says
    the pod may be restarted, not the job's other workers. Counted as what it is, the move takes every
    worker of the job at once, below any minimum (an elastic job's is at least 1), so it is refused
    rather than counted, as a Volcano Job whose policy answers an eviction with more than the pod is
    (:func:`takes_more_than_the_pod`). cluster-autoscaler and Karpenter know nothing of a rendezvous:
    they would evict it on its annotation (or, for cluster-autoscaler, its priority) alone."""
    member = elastic_member(pod, jobs)
    if member is not None and pod.rdzv_host:
        return f"hosts the c10d rendezvous of elastic job {member.job}: every worker stops while it is away"
    if pod.no_restarts:
        return (
            "runs torchrun on more than one node with no restart allowed (--max-restarts or PET_MAX_RESTARTS "
            "0, torchrun's default): the workers on the other nodes fail when it goes, and the whole job stops; "
            "a restart allowed (torchrun --max-restarts=N, a PyTorchJob's elasticPolicy.maxRestarts) lets it move"
        )
    return None


def move_cost(pod: PodInfo, now: datetime) -> float:
    """Relative cost of moving a movable pod: 1 (a restart) plus terms for priority and pod-deletion-cost
    (each squashed into (-1, 1), ordered as the numbers are) and for the work lost (its age, a day at
    most, 0 to 1). Never below ``MIN_MOVE_COST``: 0 is a free move (an expendable or leaving pod), which
    needs no room elsewhere, and a pod that restarts must have room, however low its deletion cost."""
    age = (now - pod.started_at).total_seconds() if pod.started_at else 0.0
    lost = min(max(age, 0.0), AGE_CAP_SECONDS) / AGE_CAP_SECONDS
    return max(MIN_MOVE_COST, 1.0 + _squash(pod.priority) + _squash(pod.deletion_cost) + lost)


MIN_MOVE_COST = 0.001


def _squash(value: int, scale: float = 1000.0) -> float:
    return value / (abs(value) + scale)


def job_key_of(pod: PodInfo) -> str | None:
    """The job the pod works for: the one a label names, else its controller owner."""
    if pod.job:
        return pod.job
    if pod.controlled and pod.owner_kind and pod.owner_name:
        return job_key(pod.owner_kind, pod.namespace, pod.owner_name)
    return None


def elastic_of(pod: PodInfo, jobs: Mapping[str, JobInfo] = NO_JOBS) -> ElasticRef | None:
    """The elastic job ``pod`` is a worker of that a shrink may give up (:func:`elastic_member`). None
    for the worker that hosts the job's c10d rendezvous: every other agent talks to the store it runs,
    so the whole job stops while it is away (spillway.model.jobs). None for a worker whose torchrun
    restarts no worker group (``PodInfo.no_restarts``): the others' workers fail when it goes, and with no
    restart left their agents stop and the job ends. None for a batch/v1 Job's pod unless
    the Job tolerates disruption: the Job controller counts a deleted pod as failed
    (kubernetes/kubernetes pkg/controller/job/job_controller.go, isPodFailed), and past
    ``backoffLimit`` (``backoffLimitPerIndex`` for its index) the Job fails, elastic or not; only an
    ``Ignore`` rule on ``DisruptionTarget`` keeps an eviction from counting. A JobSet's pods (a Kubeflow
    Trainer v2 TrainJob's) are such pods."""
    ref = elastic_member(pod, jobs)
    if ref is None or pod.rdzv_host or pod.no_restarts:
        return None
    return None if pod.batch_owned and not tolerates_disruption(pod, jobs) else ref


def elastic_member(pod: PodInfo, jobs: Mapping[str, JobInfo] = NO_JOBS) -> ElasticRef | None:
    """The elastic job ``pod`` runs as one of the workers of, counted toward its size whether a shrink
    may give it up or not: its launcher's command line (``torchrun --nnodes``) first, then the job
    object's range (PyTorchJob ``elasticPolicy``), then the pod's env (``PET_NNODES``), as torchrun reads
    them (spillway.model.jobs); None for a fixed role (master, launcher), a fixed size (min = max), a
    count that cannot be read or a pod of no job."""
    key = job_key_of(pod)
    if key is None or pod.job_role in FIXED_ROLES:
        return None
    job = jobs.get(key)
    low, high = (
        (job.elastic_min, job.elastic_max)
        if job and job.elastic and not pod.by_launcher
        else (pod.elastic_min, pod.elastic_max)
    )
    return ElasticRef(key, low, high) if high > low else None


def takes_more_than_the_pod(pod: PodInfo, jobs: Mapping[str, JobInfo] = NO_JOBS) -> str | None:
    """The action the pod's Volcano Job takes when the pod is evicted, when it takes more than the pod
    (RestartJob, RestartTask, AbortJob, ...: ``JobInfo.eviction_actions``, read by the pod's task); None
    otherwise, and for a pod of no such Job."""
    key = job_key_of(pod)
    job = jobs.get(key) if key is not None and key.startswith("VolcanoJob/") else None
    if job is None:
        return None
    action = job.eviction_action(pod.gang_task)
    return None if action in VOLCANO_POD_ONLY_ACTIONS else action


def ends_its_job(pod: PodInfo, jobs: Mapping[str, JobInfo] = NO_JOBS) -> str | None:
    """Why the pod's eviction would end its job, or None: it is an MPIJob's worker or launcher (an MPI
    program runs over all of them: see below); the training operator fails its Kubeflow job on an evicted
    pod of its replica type (``JobInfo.fail_roles``: a PyTorchJob's, PaddleJob's or JAXJob's under
    ``restartPolicy: Never``, an XGBoostJob's under any policy but ExitCode, a TFJob's whatever its
    policy, spillway.model.jobs); or its batch/v1 Job counts the evicted pod as failed and fails on it: a
    ``podFailurePolicy`` FailJob or FailIndex rule an eviction may match first, or no failed pod left
    before ``backoffLimit`` (``JobInfo.eviction_fails``, ``JobInfo.evictions_left``).

    An MPIJob (kubeflow/mpi-operator, or the training operator's) runs one ``mpirun`` in its launcher
    over ranks on every worker. A rank whose worker goes fails the program: MPI's default error handler
    on ``MPI_COMM_WORLD`` is ``MPI_ERRORS_ARE_FATAL``, and mpirun ends every rank when it loses one of
    its remote daemons. The launcher (a batch/v1 Job) then runs mpirun again from the start, or the
    MPIJob fails past ``runPolicy.backoffLimit``; the launcher's own eviction takes mpirun with it. The
    mpi-operator also fails the MPIJob outright on a worker the kubelet evicted (mpi_job_controller.go,
    ``updateMPIJobStatus``: ``MPIJobEvicted``). Told from the pod alone (its job key's kind), no
    MPIJob need be read; Horovod's elastic mode, which survives a lost worker, is not told apart. But an
    MPIJob read as finished (``JobInfo.finished``: a Succeeded or Failed condition True) ends no more:
    its workers run on (``runPolicy.cleanPodPolicy`` None by default, kubeflow/mpi-operator
    pkg/apis/kubeflow/v2beta1/default.go) with no mpirun over them, and the operator's syncHandler
    returns for it before it reads a pod."""
    key = job_key_of(pod)
    job = jobs.get(key) if key is not None else None
    if key is not None and key.startswith(MPI_JOB) and not (job is not None and job.finished):
        return (
            f"a pod of {key}: its launcher's mpirun runs over every worker, and a rank that goes aborts them "
            "all, so the whole job starts again (or fails past its backoffLimit)"
        )
    if job is not None and pod.job_role is not None and pod.job_role in job.fail_roles:
        kind = job.key.partition("/")[0]
        why = _FAILING_RULES.get(kind, "have restartPolicy Never")
        return (
            f"its job {job.key}'s {pod.job_role} replicas {why}: the training operator fails the whole job "
            "when one of them is evicted"
        )
    return _ends_its_batch_job(pod, jobs)


def _ends_its_batch_job(pod: PodInfo, jobs: Mapping[str, JobInfo]) -> str | None:
    """Why the pod's batch/v1 Job fails when the pod is evicted (:func:`ends_its_job`), or None."""
    batch = _batch_job_of(pod, jobs)
    if batch is not None and batch.eviction_fails:
        return (
            f"its Job {batch.key}'s podFailurePolicy answers an eviction with {batch.eviction_fails}: "
            "evicting it fails the Job (or its index)"
        )
    if batch is not None and batch.evictions_left is not None and batch.evictions_left <= 0:
        return (
            f"its Job {batch.key} has no failed pod left before its backoffLimit: the job controller counts "
            "an evicted pod as failed, and one more fails the Job"
        )
    if (
        batch is not None
        and batch.per_index_limit is not None
        and (pod.index_failures or 0) >= batch.per_index_limit
    ):
        return (
            f"its index of Job {batch.key} failed {pod.index_failures or 0} time(s), its backoffLimitPerIndex "
            f"{batch.per_index_limit}: evicted, it fails the index, and the Job ends Failed"
        )
    return None


# why a Kubeflow kind's replica type is in JobInfo.fail_roles, where not for restartPolicy Never
_FAILING_RULES = {
    "TFJob": "fail their TFJob on any failed pod, whatever their restartPolicy (no enableDynamicWorker Worker)",
    "XGBoostJob": "have a restartPolicy other than ExitCode",
}
MPI_JOB = "MPIJob/"  # the job key of an MPIJob's pod (job_key_of), worker or launcher


def counting_job(pod: PodInfo, jobs: Mapping[str, JobInfo] = NO_JOBS) -> JobInfo | None:
    """The pod's batch/v1 Job when it counts the pod's eviction against its backoffLimit
    (``JobInfo.evictions_left`` known), else None."""
    batch = _batch_job_of(pod, jobs)
    return batch if batch is not None and batch.evictions_left is not None else None


def _batch_job_of(pod: PodInfo, jobs: Mapping[str, JobInfo]) -> JobInfo | None:
    """The pod's batch/v1 Job (its ``batch.kubernetes.io/job-name`` label, else its controller owner when
    that is a batch/v1 Job), when the snapshot has it."""
    name = pod.batch_job or (pod.owner_name if pod.batch_owned else None)
    return jobs.get(job_key("Job", pod.namespace, name)) if name else None


def tolerates_disruption(pod: PodInfo, jobs: Mapping[str, JobInfo] = NO_JOBS) -> bool:
    """The pod's batch/v1 Job (its label, else its controller owner Job) ignores DisruptionTarget."""
    name = pod.batch_job or (pod.owner_name if pod.controlled and pod.owner_kind == "Job" else None)
    job = jobs.get(job_key("Job", pod.namespace, name)) if name else None
    return job is not None and job.tolerates_disruption


def eviction_room(
    pods: Iterable[PodInfo],
    jobs: Mapping[str, JobInfo],
    leaving: set[str],
    moved: frozenset[str] = frozenset(),
) -> dict[str, int]:
    """batch/v1 Job key -> how many more of its pods a plan may evict before the Job fails: the failed
    pods it survives (``JobInfo.evictions_left``) less its pods already leaving, which the job controller
    counts as failed too and may not have counted yet: terminating, on a node a drain takes
    (``leaving``), or ``moved`` by a make-room drain under way. A terminating pod the controller has
    counted (``PodInfo.job_counted``: its tracking finalizer removed, which it does once the pod is in
    ``status.failed`` or
    ``uncountedTerminatedPods``) is in ``evictions_left`` already, and not taken off twice. Jobs that
    count no eviction are left out."""
    left = {key: job.evictions_left for key, job in jobs.items() if job.evictions_left is not None}
    for pod in pods:
        if pod.terminal or pod.job_counted:
            continue
        if not (
            pod.terminating or pod.key in moved or (pod.node_name is not None and pod.node_name in leaving)
        ):
            continue
        job = counting_job(pod, jobs)
        if job is not None:
            left[job.key] -= 1
    return left


def elastic_room(pods: Iterable[PodInfo], jobs: Mapping[str, JobInfo] = NO_JOBS) -> dict[str, int]:
    """Elastic job key → how many workers it may lose now: its running workers (bound, phase
    ``Running``, not terminating; the rendezvous host counts, :func:`elastic_member`) minus its minimum,
    never below 0. A worker bound and still ``Pending`` (a moved worker's replacement pulling its image)
    runs no agent in the job's rendezvous yet: it is not counted, so two plans never move the job below
    its minimum before the first replacement runs. Jobs with no running worker are left out."""
    running, minimum = _running_workers(pods, jobs)
    return {key: max(0, count - minimum[key]) for key, count in running.items()}


def workers_evicted(pods: Iterable[PodInfo], jobs: Mapping[str, JobInfo] = NO_JOBS) -> dict[str, int]:
    """Elastic job key -> how many of ``pods`` (all evicted) are its running workers, counted as
    :func:`elastic_room` counts them: what the job's minimum must allow. An idle node's expendable pods
    (:func:`goes_with_its_node`) are evicted so, free and with no room elsewhere."""
    return _running_workers(pods, jobs)[0]


def _running_workers(
    pods: Iterable[PodInfo], jobs: Mapping[str, JobInfo]
) -> tuple[dict[str, int], dict[str, int]]:
    """(elastic job key -> its running workers among ``pods``, -> its minimum), for :func:`elastic_room`
    and :func:`workers_evicted`: a worker runs when bound, phase ``Running`` and not terminating."""
    running: dict[str, int] = {}
    minimum: dict[str, int] = {}
    for pod in pods:
        if pod.node_name is None or pod.phase != "Running" or pod.terminating:
            continue
        ref = elastic_member(pod, jobs)
        if ref is not None:
            running[ref.job] = running.get(ref.job, 0) + 1
            minimum[ref.job] = ref.min
    return running, minimum
