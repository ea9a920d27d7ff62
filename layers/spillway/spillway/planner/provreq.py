"""ProvisioningRequests: each request's next conditions, bookings, and the demand of the atomic class.

Two classes are served (any other ``provisioningClassName``, and a check-capacity request whose
``spec.parameters.processorInstance`` names a processor, belongs to another autoscaler and is left
alone, as cluster-autoscaler run without ``--check-capacity-processor-instance`` does):

``check-capacity.autoscaling.x-k8s.io``
    Do the pod sets fit in the free room of the nodes that exist now (capacity still launching not
    counted, as cluster-autoscaler's maintainers mean it to be, kubernetes/autoscaler#6855, though its
    code counts the upcoming nodes of its snapshot today; the room
    of expendable pods kube-scheduler would preempt for them counted, as cluster-autoscaler's snapshot
    leaves those pods out)? Yes:
    ``Provisioned=True`` and the room is booked. No: ``Provisioned=False``, checked again every plan
    (with ``spec.parameters.noRetry: "true"``, ``Failed=True`` instead).
``best-effort-atomic-scale-up.autoscaling.x-k8s.io``
    Fits in free room: ``Provisioned=True`` and booked, as above. Else its pod sets become one gang of
    virtual pods for scale-up (:class:`~spillway.planner.scaleup.GangPlacement`: all or none, its new
    nodes from one node group, as cluster-autoscaler's all-or-nothing scale-up; no group taking them all
    is ``Provisioned=False`` / ``CapacityIsNotFound``, tried again); their new
    nodes go to a :class:`~spillway.planner.types.GangLaunch` carrying the node label naming the
    request. ``Provisioned=False`` while they launch; ``True`` once a later plan finds the pod sets fit
    (on the labelled nodes, whose label is then published in ``provisioningClassDetails``). While the
    launch is under way (``State.gangs``; fleet mode shows nothing launching until the attach) the
    request is held like any gang and free room does not provision it: its own nodes may be Ready
    before the gang launch labels them. A request that no group's shape and size could ever hold
    (:func:`~spillway.planner.scaleup.could_ever_hold`) fails; one held back by what passes (back-off,
    MaxSize filled by running nodes, a tenant or cluster limit, a CapacityQuota) is
    ``Provisioned=False`` / ``CapacityIsNotFound`` and tried again until it expires.

For both: ``Accepted=True`` on first sight of a readable request (one whose PodTemplate is missing
fails instead); a request not provisioned by ``ValidUntilSeconds`` after its creation (else 7 days)
fails as expired. A booking holds for 10 minutes from ``Provisioned=True``: the booked room (never a
nominated pod's: :meth:`~spillway.planner.context.Context.nominated_withheld`) is taken
out of the free room before any pending pod is placed (pods consuming the request are not demand: the
booking is theirs; it holds none for its consumers bound already or nominated to a node, whose room
there is theirs), and its nodes count as receiving those pods, so scale-down keeps them. The nodes
it was booked on are remembered (``State.bookings``); while it holds, its room is taken again where it
fits (a pod kube-scheduler bound there meanwhile keeps it). It ends with ``BookingExpired=True`` when
its 10 minutes pass or once all its pods run, and with ``CapacityRevoked=True`` only when a node it
was booked on is gone and its pods fit nowhere else. A booking whose pods cannot be made any more (a
PodTemplate deleted) fails (``FailedToBookCapacity``) and books nothing, as cluster-autoscaler's does.

A request that ended (``Failed``, ``BookingExpired`` or ``CapacityRevoked`` True) is deleted once its
``Provisioned=True`` or its ``Failed=True`` is over :data:`ENDED_TTL` old (their
``lastTransitionTime``), as cluster-autoscaler does (processors/provreq/processor.go,
``DeleteOldProvReqs``, ``defaultTerminalProvReqTTL``): Kueue made it and is done with it, and nothing
else removes it. Unlike cluster-autoscaler, which deletes such requests of every class, Spillway
deletes only the requests it serves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from spillway.model.cluster import PodInfo, format_time
from spillway.model.provreq import (
    ACCEPTED,
    BEST_EFFORT_ATOMIC,
    BOOKING_EXPIRED,
    CAPACITY_REVOKED,
    CHECK_CAPACITY,
    DETAIL_LABEL_KEY,
    DETAIL_LABEL_VALUE,
    FAILED,
    NO_RETRY,
    NODE_LABEL,
    PROVISIONED,
    TERMINAL,
    VALID_UNTIL,
    ConditionInfo,
    ProvisioningRequestInfo,
    label_value,
)
from spillway.model.resources import fit_count
from spillway.model.state import BookingState, State
from spillway.planner import codes
from spillway.planner.classes import PodClass, new_class
from spillway.planner.context import Context, WorkNode, aware, minutes
from spillway.planner.groups import backoff_reason
from spillway.planner.placement import TrialFit, pools
from spillway.planner.preemption import trial_by_preemption
from spillway.planner.scaleup import could_ever_hold
from spillway.planner.topology import UNBOUNDED
from spillway.planner.types import PendingPod, ProvisioningDeletion, ProvisioningUpdate

# reasons: cluster-autoscaler's where it has one for the same state, else Spillway's own
R_ACCEPTED = "Accepted"
R_FOUND = "CapacityIsFound"
R_PROVISIONED = "CapacityIsProvisioned"
R_NOT_FOUND = "CapacityIsNotFound"
R_LAUNCHING = "CapacityIsLaunching"
R_BAD_PODS = "FailedToCreatePods"
R_EXPIRED = "Expired"
R_IMPOSSIBLE = "CapacityCannotBeProvisioned"
R_BOOKING_TIME = "CapacityReservationTimeExpired"
R_CONSUMED = "CapacityBookingConsumed"
R_REVOKED = "BookedCapacityGone"
R_BOOKING_FAILED = "FailedToBookCapacity"

BOOKING = timedelta(minutes=10)
ENDED_TTL = timedelta(days=7)  # an ended request is deleted this long after it was provisioned or failed
TEMPLATE_GRACE = timedelta(minutes=1)  # a request's missing PodTemplates fail it only once it is this old
DEFAULT_VALIDITY = timedelta(days=7)
_PLACED = frozenset(
    {codes.FITS_FREE_ROOM, codes.FITS_LAUNCHING, codes.FITS_UNCORDONED, codes.FITS_BY_PREEMPTION}
)
_THERE_NOW = frozenset({codes.FITS_FREE_ROOM, codes.FITS_BY_PREEMPTION})  # room on Ready nodes now


GANG_PREFIX = "ProvisioningRequest/"


def gang_key(info: ProvisioningRequestInfo) -> str:
    """The request's gang: ``ProvisioningRequest/<ns>/<name>``. Not its bare ``<ns>/<name>``, which is
    the key of a PodGroup (coscheduling, Volcano, Kubernetes) of the same name: the two would be one gang
    (the request's pods counted against the PodGroup's minimum, placed and launched together, one's launch
    holding the other's). No PodGroup's key starts so: a namespace is a lowercase DNS label."""
    return f"{GANG_PREFIX}{info.key}"


def with_request_gang_keys(state: State, requests: Sequence[ProvisioningRequestInfo]) -> State:
    """``state`` with the gang launch of every best-effort-atomic request in ``requests`` read under its
    gang key (:func:`gang_key`) also when a release before that key recorded it under the request's bare
    ``<ns>/<name>``, and no entry under the new key exists: an upgrade while such a launch is under way
    holds it as the release that started it did, instead of launching the whole gang a second time. The
    bare entry is kept as it is (it meant any gang of that key, a PodGroup's of the same name too, which
    that release placed as one with the request); :class:`~spillway.planner.scaleup.InFlight` drops it
    when no pending gang has that key, so the next state carries the entry under the new key only."""
    moved = {
        gang_key(info): state.gangs[info.key]
        for info in requests
        if info.class_name == BEST_EFFORT_ATOMIC
        and info.key in state.gangs
        and gang_key(info) not in state.gangs
    }
    if not moved:
        return state
    return state.model_copy(update={"gangs": dict(sorted({**state.gangs, **moved}.items()))})


def virtual_pod(info: ProvisioningRequestInfo, set_index: int, i: int) -> str:
    """A request's pod as the plan names it: ``<ns>/<request>:<set>:<i>`` (no real pod has a colon)."""
    return f"{info.key}:{set_index}:{i}"


def is_virtual(pod: str) -> bool:
    return ":" in pod


@dataclass(slots=True)
class Work:
    """One request as this plan sees it: the conditions so far and what the plan decides."""

    info: ProvisioningRequestInfo
    conditions: list[ConditionInfo]
    details: dict[str, str]
    pods: list[str] = field(default_factory=list)  # its virtual pods, when it went to scale-up
    classes: list[PodClass] = field(default_factory=list)  # ... and their classes (its gang)
    preempted: int = 0  # expendable pods its last booking takes the room of

    def set(self, type_: str, status: str, reason: str, message: str, now: datetime) -> None:
        """Set a condition; its lastTransitionTime moves only when its status changes."""
        old = next((c for c in self.conditions if c.type == type_), None)
        moved = old is None or old.status != status or old.last_transition_time is None
        cond = ConditionInfo(
            type_,
            status,
            reason,
            message[:32768],
            now.replace(microsecond=0) if moved or old is None else old.last_transition_time,
            self.info.generation,
        )
        if old is None:
            self.conditions.append(cond)
        else:
            self.conditions[self.conditions.index(old)] = cond

    def update(self) -> ProvisioningUpdate | None:
        if tuple(self.conditions) == self.info.conditions and self.details == dict(self.info.details):
            return None
        return ProvisioningUpdate(
            self.info.namespace,
            self.info.name,
            tuple(c.to_api() for c in self.conditions),
            dict(self.details),
            self.info.uid,
            self.info.version,
        )


class Provisioning:
    """The requests of one plan: :meth:`book` before scale-up (bookings and free-room checks, the
    atomic class's demand as classes), :meth:`settle` after it, :meth:`updates` for the plan."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.work = [
            Work(r, list(r.conditions), dict(r.details))
            for r in sorted(ctx.snapshot.provreqs, key=_age_order)
            if r.served
        ]
        self.bound: dict[str, list[PodInfo]] = {}  # request key -> its consumers running (bound) now
        # request key -> its pending consumers nominated to a node: their room there is held for them
        # already (Context.nominated_withheld), so the booking holds none more for them
        self.nominated: dict[str, list[PodInfo]] = {}
        self.booked: dict[str, BookingState] = {}  # request key -> the nodes of its booking (next state)
        for pod in ctx.snapshot.pods:
            if pod.consumes and pod.node_name and not pod.terminal:
                self.bound.setdefault(f"{pod.namespace}/{pod.consumes}", []).append(pod)
        for pod in ctx.nominated:
            if pod.consumes:
                self.nominated.setdefault(f"{pod.namespace}/{pod.consumes}", []).append(pod)

    def book(self) -> list[PodClass]:
        """Hold the bookings, then decide every request not provisioned yet; the classes of the
        atomic requests that need new nodes."""
        now = self.ctx.now
        waiting: list[Work] = []
        for w in self.work:
            if any(w.info.is_true(t) for t in TERMINAL):
                continue
            if w.info.is_true(PROVISIONED):
                self._hold(w, now)
            else:
                waiting.append(w)
        classes: list[PodClass] = []
        for w in waiting:
            classes += self._decide(w, now)
        return classes

    def _hold(self, w: Work, now: datetime) -> None:
        provisioned = w.info.condition(PROVISIONED)
        since = provisioned.last_transition_time if provisioned else None
        running = self.bound.get(w.info.key, [])
        if not any(still_booked(w.info, running)):
            w.set(
                BOOKING_EXPIRED, "True", R_CONSUMED, "all pods of the request run: the booking is used", now
            )
        elif since is None or now >= since + BOOKING:
            w.set(BOOKING_EXPIRED, "True", R_BOOKING_TIME,
                  f"capacity was booked for {minutes(BOOKING)} and is released", now)  # fmt: skip
        elif w.info.problem:
            # its pods cannot be made any more (a PodTemplate deleted): cluster-autoscaler's bookCapacity
            # fails the request and books nothing (processors/provreq/processor.go, FailedToBookCapacity)
            w.set(FAILED, "True", R_BOOKING_FAILED,
                  f"the booked pods cannot be made: {w.info.problem}; nothing is booked", now)  # fmt: skip
        else:  # the pods still to come: not those bound, nor those nominated to a node
            self._keep(w, still_booked(w.info, [*running, *self.nominated.get(w.info.key, [])]), now)

    def _keep(self, w: Work, left: Sequence[int], now: datetime) -> None:
        """Hold a booking that has not ended: the room of the pods it still books is taken out of the
        free room again, as much of it as fits (cluster-autoscaler's bookCapacity, processors/provreq/
        processor.go, schedules them each loop without stopping at one that does not fit: a pod
        kube-scheduler bound in the room meanwhile, knowing nothing of the booking, keeps it). The
        booking ends as cluster-autoscaler's do, expired or consumed; ``CapacityRevoked`` only when a
        node it was booked on is gone (deleted or being deleted) and its pods fit nowhere else, as
        Kueue reads that condition: the nodes are deleted, the workload is deactivated
        (admissionchecks/provisioning/controller.go, isCapacityRevoked)."""
        info, label = w.info, _published_label(w.info)
        entry = self.ctx.state.bookings.get(info.key)
        booked = entry.nodes if entry is not None and entry.uid in ("", info.uid) else ()
        gone = [n for n in booked if n not in self.ctx.nodes or self.ctx.nodes[n].info.deleting]
        placed = self._reserve(w, left, label, whole=bool(gone))
        if placed is None:
            w.set(CAPACITY_REVOKED, "True", R_REVOKED, f"node(s) booked for its {sum(left)} pod(s) are gone "
                  f"({', '.join(gone)}) and the room left does not hold them", now)  # fmt: skip
        elif gone or not booked:  # booked again where the room is (none known: a booking of before)
            self._record(info, placed)
        else:
            self.booked[info.key] = BookingState(uid=info.uid, nodes=booked)

    def _record(self, info: ProvisioningRequestInfo, placed: Mapping[str, int]) -> None:
        """The nodes the request's booking holds (the next state's ``bookings``)."""
        if placed:
            self.booked[info.key] = BookingState(uid=info.uid, nodes=tuple(sorted(placed)))

    def bookings(self) -> dict[str, BookingState]:
        return dict(sorted(self.booked.items()))

    def _decide(self, w: Work, now: datetime) -> list[PodClass]:
        info = w.info
        if info.problem:
            if not self._templates_due(info):
                return []  # untouched: its PodTemplates may be created yet (Kueue: just after it)
            w.set(FAILED, "True", R_BAD_PODS, f"the request's pods cannot be made: {info.problem}", now)
            return []
        w.set(ACCEPTED, "True", R_ACCEPTED, "Spillway serves this ProvisioningRequest", now)
        deadline, why = _deadline(info)
        if deadline is not None and now >= deadline:
            w.set(FAILED, "True", R_EXPIRED, f"not provisioned within {why}", now)
            return []
        label = label_value(info.namespace, info.name)
        whole = [pod_set.count for pod_set in info.pod_sets]
        placed = self._reserve(w, whole, label) if self._labelled(label) else None
        if placed is not None:
            self._record(info, placed)
            w.details = {DETAIL_LABEL_KEY: NODE_LABEL, DETAIL_LABEL_VALUE: label}
            w.set(PROVISIONED, "True", R_PROVISIONED,
                  f"the nodes launched for the request are Ready; they carry {NODE_LABEL}={label}", now)  # fmt: skip
            return []
        if info.class_name == BEST_EFFORT_ATOMIC and self._launch_under_way(info, label):
            # its own nodes may be Ready and not labelled yet: free room there is not enough, Kueue
            # would admit without the label to pin the pods with; the gang stays held (in flight)
            return self._gang(w, label)
        placed = self._reserve(w, whole)
        if placed is not None:
            self._record(info, placed)
            w.set(PROVISIONED, "True", R_FOUND, f"{info.count} pod(s) fit in free room{_preempting(w)}; "
                  f"booked for {minutes(BOOKING)}", now)  # fmt: skip
            return []
        if info.class_name == CHECK_CAPACITY:
            _not_found(w, now)
            return []
        return self._gang(w, label)

    def _gang(self, w: Work, label: str) -> list[PodClass]:
        """The atomic request's pod sets as one gang of classes, tagged with the request."""
        out: list[PodClass] = []
        for index, pod_set in enumerate(w.info.pod_sets):
            assert pod_set.pod is not None
            cls = set_class(self.ctx, pod_set.pod, gang_key(w.info))
            cls.pods = set_pods(self.ctx, w.info, index, cls, pod_set.count)
            cls.tenant = self._tenant(w.info.namespace)
            w.pods += cls.pods
            w.classes.append(cls)
            out.append(cls)
        self.ctx.gang_labels[gang_key(w.info)] = {NODE_LABEL: label}
        self.ctx.one_group.add(gang_key(w.info))
        return out

    def _templates_due(self, info: ProvisioningRequestInfo) -> bool:
        """Whether a request whose pods cannot be made fails now: any problem but missing PodTemplates
        does; missing ones fail it once it is :data:`TEMPLATE_GRACE` old (Kueue creates the request,
        then its PodTemplates: an observation may fall between the two)."""
        if not info.templates_missing_only or info.created_at is None:
            return True
        return self.ctx.now - aware(info.created_at) >= TEMPLATE_GRACE

    def _launch_under_way(self, info: ProvisioningRequestInfo, label: str) -> bool:
        """A recent plan launched the request's nodes atomically (``State.gangs``) and the launch may
        still be under way: the entry is younger than ``gang_launch_minutes``, its group is not backed
        off (as :class:`~spillway.planner.scaleup.InFlight` holds it), and its nodes do not all carry
        the label yet. Once they do, the launch is done: a request its labelled nodes do not hold
        whole (its gang took free room too, as cluster-autoscaler's scale-up leaves the pods that fit
        where they fit) may be provisioned in free room, without waiting out the window."""
        entry = self.ctx.state.gangs.get(gang_key(info))
        window = timedelta(minutes=self.ctx.config.gang_launch_minutes)
        if entry is None or self.ctx.now - aware(entry.since) >= window:
            return False
        labelled = sum(1 for n in self.ctx.nodes.values() if n.info.labels.get(NODE_LABEL) == label)
        if labelled >= entry.count:
            return False
        group = next((g for g in self.ctx.groups if g.key == entry.key), None)
        return group is not None and backoff_reason(self.ctx, group) is None

    def _tenant(self, namespace: str) -> str | None:
        tenant = self.ctx.snapshot.tenant(namespace)
        return tenant if tenant in self.ctx.config.tenants else None

    def settle(self) -> None:
        """After scale-up: what became of each atomic request sent there."""
        pending = {p.pod: p for p in self.ctx.pending_out}
        for w in self.work:
            if w.pods:
                self._settle(w, pending)
        virtual = {p for w in self.work for p in w.pods}
        self.ctx.pending_out[:] = [p for p in self.ctx.pending_out if p.pod not in virtual]

    def _settle(self, w: Work, pending: Mapping[str, PendingPod]) -> None:
        now, mine = self.ctx.now, set(w.pods)
        verdict = next((pending[p] for p in w.pods if p in pending and pending[p].code not in _PLACED), None)
        if verdict is None and all(p in pending and pending[p].code in _THERE_NOW for p in w.pods):
            self._found_there(w, pending)
        elif verdict is None or verdict.code == codes.GANG_LAUNCHING:  # the latter: a recent plan's launch
            placed_new = verdict is not None or any(
                p.pod in mine and "/new-" in p.node for p in self.ctx.placements
            )
            what = "new nodes are launched" if placed_new else "capacity is launching"
            w.set(PROVISIONED, "False", R_LAUNCHING,
                  f"{what} for the request's {w.info.count} pod(s), all or none", now)  # fmt: skip
        elif could_ever_hold(self.ctx, w.classes):
            # what stops it passes (back-off, MaxSize taken by running nodes, a limit or quota in use):
            # cluster-autoscaler's best-effort-atomic class answers CapacityIsNotFound and retries until
            # the request expires (provisioningrequest/besteffortatomic/provisioning_class.go, Provision),
            # and Kueue counts every Failed as a spent attempt (admissionchecks/provisioning/controller.go)
            w.set(PROVISIONED, "False", R_NOT_FOUND, f"{verdict.reason}; tried again until it expires", now)
        else:
            w.set(FAILED, "True", R_IMPOSSIBLE, f"no node group could ever hold its {w.info.count} pod(s) "
                  f"whole, even empty and grown to its MaxSize: {verdict.reason}", now)  # fmt: skip

    def _found_there(self, w: Work, pending: Mapping[str, PendingPod]) -> None:
        """Nothing is launched or uncordoned for the request: its pods fit in the room there is, some
        once kube-scheduler preempts expendable pods of lower priority (cluster-autoscaler judges every
        scale-up on a snapshot without them: core/static_autoscaler.go, FilterOutExpendablePods;
        besteffortatomic/provisioning_class.go answers CapacityIsFound when all pods schedule)."""
        mine = set(w.pods)
        placed: dict[str, int] = {}
        for p in self.ctx.placements:
            if p.pod in mine:
                placed[p.node] = placed.get(p.node, 0) + 1
        self._record(w.info, placed)
        w.preempted = sum(1 for p in w.pods if pending[p].code == codes.FITS_BY_PREEMPTION)
        w.set(PROVISIONED, "True", R_FOUND, f"{w.info.count} pod(s) fit in free room{_preempting(w)}; "
              f"booked for {minutes(BOOKING)}", self.ctx.now)  # fmt: skip

    def updates(self) -> tuple[ProvisioningUpdate, ...]:
        found = (w.update() for w in self.work)
        return tuple(sorted((u for u in found if u is not None), key=lambda u: u.key))

    def deletions(self) -> tuple[ProvisioningDeletion, ...]:
        """The served requests that ended (as observed: no status of theirs changes in this plan) and
        were provisioned or failed over :data:`ENDED_TTL` ago, by key."""
        found = (_deletion(w.info, self.ctx.now) for w in self.work)
        return tuple(sorted((d for d in found if d is not None), key=lambda d: d.key))

    # --- free room ---------------------------------------------------------------------------------

    def _labelled(self, label: str) -> bool:
        return any(n.info.labels.get(NODE_LABEL) == label for n in self.ctx.nodes.values())

    def _reserve(
        self, w: Work, counts: Sequence[int], label: str | None = None, *, whole: bool = True
    ) -> dict[str, int] | None:
        """Take room for ``counts[i]`` pods of each of the request's pod sets out of the free room of
        Ready, schedulable nodes (only those labelled ``label`` when given): all of them, or none
        (``whole``; else as many as fit). The pods are placed as pending pods of their templates would
        be, in the scale-up's order (biggest first: the nodes a gang launched for the request hold it
        as the scale-up packed them), by its first fit, their pod topology counting what this plan
        placed before them; the booked pods are the plan's placements for the rest. The pods placed
        per node; None when ``whole`` and they do not all fit."""
        nodes = [n for n in self.ctx.nodes.values() if _usable(n, label)]
        trial = TrialFit(self.ctx)
        classes = []
        for index, (pod_set, count) in enumerate(zip(w.info.pod_sets, counts, strict=True)):
            if count > 0 and pod_set.pod is not None:
                cls = set_class(self.ctx, pod_set.pod)
                cls.pods = set_pods(self.ctx, w.info, index, cls, count)
                classes.append(cls)
            elif count > 0 and whole:
                return None
        with self.ctx.nominated_withheld():  # a preemptor's room is never booked: it binds first
            for cls in sorted(classes, key=PodClass.sort_key):
                cls.domains = cls.domains.after(trial.planned)
                pool_list = pools(nodes)
                trial.fit(cls, pool_list)
                # then the room of expendable pods kube-scheduler preempts for them: cluster-autoscaler
                # checks and books on a snapshot without those pods (core/static_autoscaler.go,
                # FilterOutExpendablePods); booked, they are no victims for the pods placed after
                trial_by_preemption(trial, cls, (node for pool in pool_list for node in pool.nodes))
                if cls.remaining and whole:
                    trial.undo()
                    return None
        w.preempted = trial.preempted
        for name, pods in trial.placed.items():
            self.ctx.nodes[name].receives += pods  # the booked pods run here: not drained
        self.ctx.planned = trial.planned
        return dict(trial.placed)


def set_class(ctx: Context, pod: PodInfo, gang: str | None = None) -> PodClass:
    """The class of a pod set's pods: every one of them uses the volumes of the claims its template
    names (:attr:`PodInfo.volumes`), so they share them on a node (one of a node's volumes takes none of
    its attach limit: :attr:`PodClass.volumes`). Every expendable pod's room is theirs by preemption,
    whatever the template's priority (:attr:`PodClass.preemption_floor`): cluster-autoscaler books on a
    snapshot without all scheduled pods below the cutoff (core/static_autoscaler.go,
    FilterOutExpendablePods), and a consumer that is not expendable itself stands at or above the
    cutoff, above every one of them, so kube-scheduler preempts them for it."""
    cls = new_class(pod, gang=gang, domains=ctx.topology.domains(pod))
    cls.volumes, cls.volume_nodes = pod.volumes, ctx.volume_nodes
    cls.preemption_floor = ctx.config.expendable_priority_cutoff
    return cls


def set_pods(ctx: Context, info: ProvisioningRequestInfo, index: int, cls: PodClass, count: int) -> list[str]:
    """The virtual pods of pod set ``index``: ``count``, or one more than the cluster could ever hold
    when ``count`` is larger. A pod set's ``count`` is an int32 with no maximum in the CRD cluster-
    autoscaler serves (``+kubebuilder:validation:Minimum=1`` only), so a request of two billion pods is
    valid; one virtual pod each would be two billion in every plan. Past the bound none of the set's
    pods change anything: a set that cannot be placed whole is not placed (booked or launched) at all,
    and :func:`could_ever_hold` cannot hold it either, so the request gets the conditions its full
    count gets (their messages give ``info.count``)."""
    return [virtual_pod(info, index, i) for i in range(min(count, most_ever_held(ctx, cls) + 1))]


def most_ever_held(ctx: Context, cls: PodClass) -> int:
    """An upper bound of the pods of ``cls`` the cluster could ever hold: as many as fit each node's
    whole allocatable, and each group's template node times its MaxSize (free room, a new node's room
    and :func:`could_ever_hold`'s empty nodes are all within these)."""
    total = sum(fit_count(cls.requests, node.info.allocatable, UNBOUNDED) for node in ctx.nodes.values())
    for group in ctx.groups:
        if group.template is not None:
            total += group.max_size * fit_count(cls.requests, group.template.allocatable, UNBOUNDED)
    return total


def still_booked(info: ProvisioningRequestInfo, running: Sequence[PodInfo]) -> list[int]:
    """Per pod set, its pods the booking still holds room for: its count less the request's consumers
    already running that it made. A consumer belongs to the first set, in order, whose template asks
    for the same resources and has pods left; one that matches none (a webhook changed its requests)
    is taken from the first set with pods left, as the request's pods are counted in order."""
    left = [pod_set.count for pod_set in info.pod_sets]
    unmatched = 0
    for pod in running:
        index = next(
            (
                i
                for i, pod_set in enumerate(info.pod_sets)
                if left[i] and pod_set.pod is not None and pod_set.pod.requests == pod.requests
            ),
            None,
        )
        if index is None:
            unmatched += 1
        else:
            left[index] -= 1
    for i, count in enumerate(left):
        taken = min(count, unmatched)
        left[i], unmatched = count - taken, unmatched - taken
    return left


def _not_found(w: Work, now: datetime) -> None:
    """A check-capacity request that does not fit: ``Provisioned=False``, checked again on every plan;
    with ``spec.parameters.noRetry`` ``"true"``, ``Failed=True`` instead, so that Kueue's back-off
    retries it with a new request rather than holding the workload's quota for this one (as
    cluster-autoscaler's checkcapacity provisioningclass.go, checkCapacity, does). Any value but
    ``"true"`` and ``"false"`` is ignored there, and said so here."""
    what = f"{w.info.count} pod(s) do not fit in the free room of the cluster"
    no_retry = w.info.parameters.get(NO_RETRY)
    if no_retry == "true":
        w.set(
            FAILED, "True", R_NOT_FOUND, f'{what}; spec.parameters.{NO_RETRY} is "true": not tried again', now
        )
        return
    ignored = (
        ""
        if no_retry in (None, "false")
        else f' (spec.parameters.{NO_RETRY}={no_retry!r} ignored: "true" or "false")'
    )
    w.set(PROVISIONED, "False", R_NOT_FOUND, f"{what}; checked again{ignored}", now)


def _preempting(w: Work) -> str:
    """How a booking's room is had, for its message: "" for free room only."""
    if not w.preempted:
        return ""
    return " once kube-scheduler preempts expendable pods of lower priority"


def _deletion(info: ProvisioningRequestInfo, now: datetime) -> ProvisioningDeletion | None:
    """The deletion of a request that ended, once its ``Provisioned`` or ``Failed`` condition has been
    True for over :data:`ENDED_TTL` (cluster-autoscaler's DeleteOldProvReqs measures from either
    condition's ``lastTransitionTime``); None otherwise."""
    if not any(info.is_true(t) for t in TERMINAL):
        return None
    for type_ in (FAILED, PROVISIONED):
        cond = info.condition(type_)
        since = cond.last_transition_time if cond is not None and cond.status == "True" else None
        if since is not None and now - aware(since) > ENDED_TTL:
            ended = next(c for c in info.conditions if c.type in TERMINAL and c.status == "True")
            return ProvisioningDeletion(
                info.namespace,
                info.name,
                info.uid,
                f"ended ({ended.type}: {ended.reason or 'no reason'}) and {type_}=True since "
                f"{format_time(since)}: deleted {ENDED_TTL.days} days on, as cluster-autoscaler does",
                info.version,
            )
    return None


def _usable(node: WorkNode, label: str | None) -> bool:
    """Whether a booking may hold room on the node: one that has room for pods now and stays (not being
    deleted, its instance not terminating: :attr:`WorkNode.schedulable`, as for any pending pod); a
    booking there is revoked as soon as the node goes. Only the nodes carrying ``label``, when given."""
    if not node.schedulable:
        return False
    return label is None or node.info.labels.get(NODE_LABEL) == label


def _published_label(info: ProvisioningRequestInfo) -> str | None:
    """The node label value a provisioned request published (Kueue pins its pods with it): its booking
    holds only on the nodes carrying it. None for a booking in plain free room."""
    if info.details.get(DETAIL_LABEL_KEY) != NODE_LABEL:
        return None
    return info.details.get(DETAIL_LABEL_VALUE) or None


def _deadline(info: ProvisioningRequestInfo) -> tuple[datetime | None, str]:
    raw = info.parameters.get(VALID_UNTIL)
    seconds, why = DEFAULT_VALIDITY.total_seconds(), "7 days of its creation"
    if raw is not None:
        try:
            seconds = max(0, int(raw))
            why = f"spec.parameters.{VALID_UNTIL} ({raw}s) of its creation"
        except ValueError:
            why = f"7 days of its creation (spec.parameters.{VALID_UNTIL}={raw!r} is not a number)"
    if info.created_at is None:
        return None, why
    # the parameter is any string of digits: "1" and thirty zeros is past every date a datetime holds
    # (it raised OverflowError, every plan); a deadline past the last one is none: it never expires
    if seconds >= (datetime.max.replace(tzinfo=info.created_at.tzinfo) - info.created_at).total_seconds():
        return None, why
    return info.created_at + timedelta(seconds=seconds), why


def _age_order(info: ProvisioningRequestInfo) -> tuple[Any, ...]:
    created = info.created_at.isoformat() if info.created_at else ""
    return (created, info.namespace, info.name)


__all__ = ["BEST_EFFORT_ATOMIC", "CHECK_CAPACITY", "Provisioning", "is_virtual", "with_request_gang_keys"]
