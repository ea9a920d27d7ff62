"""Telling users why: the Kubernetes Events a committed plan posts on pending pods.

As cluster-autoscaler does, every pending pod hears what the plan did for it, on the pod itself, so
``kubectl describe pod`` answers "why is my pod still pending?" (type ``Normal``, source ``spillway``):

``TriggeredScaleUp``   ``pod triggered scale-up: [{gpu-east (us-east-1) 0->3 (max: 8)}]`` - a group
                       the plan grows for it: name, region, desired from -> to, MaxSize
``NotTriggerScaleUp``  ``pod didn't trigger scale-up: <the plan's reason> (code: max-size)`` - the pod
                       stays pending with a code that no existing or launching node answers
                       (``no-group-fits``, ``max-size``, ``backed-off``, ``groups-exhausted``,
                       ``expendable``, ``no-managed-groups``, and any newer code)

``TriggeredScaleUp``   ``capacity buffer 4 fake pods triggered scale-up: [{cpu (us-east-1) 0->2 (max: 8)}]``
                       - on a CapacityBuffer (involvedObject: the buffer, by the apiVersion observe
                       read it through) whose chunks the plan's scale-ups take (each ScaleUp's
                       ``buffers``): how many, and the groups they go to, named as for a pod
``NotTriggerScaleUp``  ``capacity buffer 6 fake pods didn't trigger scale-up: <the buffers entry's
                       reason> (code: max-size)`` - on a CapacityBuffer whose chunks the plan leaves
                       short and opens no node for (else it hears the scale-up: one Event a plan).
                       Both as cluster-autoscaler tells a buffer (FakePodsScaleUpStatusProcessor,
                       processors/capacitybuffer/scale_up_status_processor.go; it posts the second
                       only in a loop that scaled nothing up, Spillway in every plan that leaves
                       chunks short and opens none, as it does for pods). A configured buffer is no
                       object: nothing is posted.

Pods whose code says a node already has or will have room for them (``fits-free-room``,
``fits-launching``, ``fits-uncordoned``, ``making-room``) get no Event: the scheduler, a launching node,
this plan's uncordon or a make-room drain will place them. A pod that fits only once kube-scheduler preempts expendable pods
(``fits-by-preemption``) hears it, naming the node and the pods: no node comes for it, and if the
scheduler does not preempt them after all, that is why.

**Not flooding the API server.** cluster-autoscaler leans on client-go's event recorder, which merges
and rate-limits repeated Events inside one long-running process. A Lambda has no such process, so:

* per plan, at most ``max_per_plan`` Events; pods that have waited longest go first;
* across plans, a pod is not told the same thing (same reason, code and target: its *fingerprint*)
  again within ``window``; a buffer, not the same code and number of short chunks, nor the same chunks
  and groups of a scale-up (its mark is
  ``CapacityBuffer:<ns>/<name>``, :func:`buffer_mark`; it comes after the pods in ``max_per_plan``). The last fingerprint posted per pod lives in the planner state
  (``State.events``), committed with the plan in the one versioned transaction, so it survives
  Lambda containers and a planner that loses the commit race posts nothing and records nothing.
  The ledger keeps only pods still pending (buffers still short or opening nodes), only marks younger than ``window``, and at most
  ``ledger_size`` of them (the newest).

:func:`plan_events` is pure (``now`` is an argument); :func:`post_events` sends them through the
:class:`~spillway.ports.Cluster` port after the commit, within a time budget, and never raises: a post
that fails is counted and logged, and the plan stands. The ledger is written before the posts, so a
post that fails is not retried before the window has passed (at most one Event per window).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from spillway.errors import KubeAuthError, KubeUnavailable, SpillwayError
from spillway.model.buffer import GROUP as BUFFER_GROUP
from spillway.model.buffer import VERSIONS as BUFFER_VERSIONS
from spillway.model.buffer import BufferInfo
from spillway.model.cluster import ClusterSnapshot, PodInfo
from spillway.model.nodegroup import NodeGroup
from spillway.model.state import EventMark
from spillway.model.utc import aware
from spillway.planner import ScaleUp, ScalingPlan
from spillway.planner.codes import FITS_FREE_ROOM, FITS_LAUNCHING, FITS_UNCORDONED, MAKING_ROOM
from spillway.ports import Cluster

TRIGGERED = "TriggeredScaleUp"
NOT_TRIGGERED = "NotTriggerScaleUp"
BUFFER_KIND = "CapacityBuffer"
# pending codes that mean "a node has, or will have, room": no Event (cluster-autoscaler is silent too)
QUIET_CODES = frozenset({FITS_FREE_ROOM, FITS_LAUNCHING, FITS_UNCORDONED, MAKING_ROOM})
_FAR_FUTURE = datetime.max.replace(tzinfo=UTC)
MAX_ERRORS = 5  # failures kept in a PostResult


@dataclass(frozen=True, slots=True)
class EventPolicy:
    """How many Events a plan may post, and how long a pod is not told the same thing again."""

    max_per_plan: int = 50  # 0: post none
    window: timedelta = timedelta(minutes=10)
    ledger_size: int = 2000
    budget_seconds: float = 10.0  # posting stops when this is spent

    def __post_init__(self) -> None:
        if self.max_per_plan < 0 or self.ledger_size < 0 or self.budget_seconds <= 0:
            raise ValueError("max_per_plan and ledger_size must be >= 0, budget_seconds > 0")
        if self.window < timedelta(0):
            raise ValueError("window must not be negative")


@dataclass(frozen=True, slots=True)
class PodEvent:
    """An Event on a pod, or on a CapacityBuffer (``kind``, ``api_version``: the version read through)."""

    namespace: str
    name: str
    uid: str | None
    reason: str
    message: str
    fingerprint: str
    type: str = "Normal"
    kind: str = "Pod"
    api_version: str = "v1"

    @property
    def pod(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def key(self) -> str:
        """Its object's mark in the ledger: ``<ns>/<pod>``, or ``CapacityBuffer:<ns>/<name>`` (:func:`buffer_mark`)."""
        return self.pod if self.kind == "Pod" else f"{self.kind}:{self.pod}"

    def to_dict(self) -> dict[str, str | None]:
        return {"pod": self.pod, "reason": self.reason, "message": self.message}


@dataclass(frozen=True, slots=True)
class EventBatch:
    """What a plan posts, and the ledger to commit with it."""

    events: tuple[PodEvent, ...] = ()
    ledger: dict[str, EventMark] = field(default_factory=dict)
    suppressed: int = 0  # candidates already told the same within the window
    capped: int = 0  # candidates left for a later plan by max_per_plan


@dataclass(frozen=True, slots=True)
class PostResult:
    posted: int = 0
    failed: int = 0  # the API refused or failed this Event
    skipped: int = 0  # not sent: the time budget ran out or the API is unreachable
    errors: tuple[str, ...] = ()  # the first few failures, for the log

    def to_dict(self) -> dict[str, object]:
        return {
            "posted": self.posted,
            "failed": self.failed,
            "skipped": self.skipped,
            "errors": list(self.errors),
        }


def fingerprint(reason: str, detail: str) -> str:
    """A short stable digest of what an Event says (reason plus code or target)."""
    return hashlib.sha256(f"{reason}|{detail}".encode()).hexdigest()[:16]


def _split(pod: str) -> tuple[str, str]:
    namespace, _, name = pod.partition("/")
    return (namespace, name) if name else ("default", namespace)


def buffer_mark(buffer: BufferInfo) -> str:
    """A CapacityBuffer's key in the ledger, ``CapacityBuffer:<ns>/<name>``: no pod's key, as a
    namespace's name (a DNS label) has no ``:``."""
    return f"{BUFFER_KIND}:{buffer.key}"


def _buffer_candidates(
    plan: ScalingPlan, buffers: Mapping[str, BufferInfo], groups: Sequence[NodeGroup]
) -> list[tuple[str, str, str, str]]:
    """(mark, reason, message, fingerprint detail) for every CapacityBuffer the plan has news for, as
    cluster-autoscaler tells a buffer: one whose chunks the plan's scale-ups take hears which groups grow
    (its ``TriggeredScaleUp``, counting those chunks); else one with chunks left without room hears why
    (its ``NotTriggerScaleUp``, which it posts only in a loop that scaled nothing up). One Event per
    buffer per plan. A configured buffer is no object: its ``buffers`` entry in the plan is all there is."""
    opened: dict[str, list[ScaleUp]] = {}
    for s in plan.scale_up:
        for key, _ in s.buffers:
            opened.setdefault(key, []).append(s)
    out: list[tuple[str, str, str, str]] = []
    for hold in plan.buffers:
        info = buffers.get(hold.buffer)
        if info is None or not info.namespace:
            continue
        ups = opened.get(hold.buffer, [])
        if ups:
            chunks = sum(dict(s.buffers)[hold.buffer] for s in ups)
            infos, detail = _scale_up_infos(ups, groups)
            message = f"capacity buffer {chunks} fake pods triggered scale-up: {infos}"
            out.append((buffer_mark(info), TRIGGERED, message, f"{chunks}|{detail}"))
        elif hold.short > 0 and hold.code not in QUIET_CODES:
            message = f"capacity buffer {hold.short} fake pods didn't trigger scale-up: {hold.reason} (code: {hold.code})"
            out.append((buffer_mark(info), NOT_TRIGGERED, message, f"{hold.code}|{hold.short}"))
    return out


def _scale_up_infos(ups: Sequence[ScaleUp], groups: Sequence[NodeGroup]) -> tuple[str, str]:
    """How an Event names the scale-ups ``ups``, ``[{gpu-east (us-east-1) 0->3 (max: 8)}]`` (as
    cluster-autoscaler prints its ScaleUpInfos, with the region), and the fingerprint detail of them."""
    max_size = {(g.name, g.region): g.max_size for g in groups}
    infos = ", ".join(
        f"{{{s.group} ({s.region}) {s.from_size}->{s.to_size} (max: {max_size.get((s.group, s.region), '?')})}}"
        for s in ups
    )
    return f"[{infos}]", ",".join(f"{s.group}@{s.region}->{s.to_size}" for s in ups)


def _candidates(plan: ScalingPlan, groups: Sequence[NodeGroup]) -> list[tuple[str, str, str, str]]:
    """(pod, reason, message, fingerprint detail) for every pod the plan has something to say about."""
    ups: dict[str, list[ScaleUp]] = {}
    for s in plan.scale_up:
        for pod in s.pods:
            if ":" in pod:  # a ProvisioningRequest's pod (<ns>/<request>:<set>:<i>): no object to tell
                continue
            ups.setdefault(pod, []).append(s)
    out: list[tuple[str, str, str, str]] = []
    for pod, targets in ups.items():
        infos, detail = _scale_up_infos(targets, groups)
        out.append((pod, TRIGGERED, f"pod triggered scale-up: {infos}", detail))
    for p in plan.pending:
        if p.code in QUIET_CODES or p.pod in ups:
            continue
        message = f"pod didn't trigger scale-up: {p.reason} (code: {p.code})"
        out.append((p.pod, NOT_TRIGGERED, message, p.code))
    return out


def plan_events(
    plan: ScalingPlan,
    cluster: ClusterSnapshot,
    groups: Sequence[NodeGroup],
    ledger: Mapping[str, EventMark],
    policy: EventPolicy,
    now: datetime,
) -> EventBatch:
    """The Events a committed ``plan`` should post, and the ledger to commit with it. Pure."""
    pods = {p.key: p for p in cluster.pods}
    buffers = {buffer_mark(b): b for b in cluster.buffers if b.namespace}
    told = _buffer_candidates(plan, {b.key: b for b in buffers.values()}, groups)
    candidates = _candidates(plan, groups) + told
    live = _live_marks(plan, told)
    fresh = {k: m for k, m in ledger.items() if k in live and now - aware(m.posted_at) < policy.window}

    def waited(c: tuple[str, str, str, str]) -> tuple[bool, datetime, str]:
        """Pods first, longest pending first (one of no known time last of them), then buffers."""
        info = pods.get(c[0])
        since = info.pending_since if info is not None and info.pending_since else None
        return (c[0] in buffers, aware(since) if since else _FAR_FUTURE, c[0])

    wanted: list[PodEvent] = []
    suppressed = 0
    for key, reason, message, detail in sorted(candidates, key=waited):
        fp = fingerprint(reason, detail)
        mark = fresh.get(key)
        if mark is not None and mark.fingerprint == fp:
            suppressed += 1
            continue
        wanted.append(_object_event(key, pods, buffers, (reason, message, fp)))
    chosen = wanted[: policy.max_per_plan]
    new = dict(fresh)
    for e in chosen:
        new[e.key] = EventMark(fingerprint=e.fingerprint, posted_at=now)
    return EventBatch(
        events=tuple(chosen),
        ledger=_bounded(new, policy.ledger_size),
        suppressed=suppressed,
        capped=len(wanted) - len(chosen),
    )


def _live_marks(plan: ScalingPlan, buffers: Iterable[tuple[str, str, str, str]]) -> set[str]:
    """The marks the ledger keeps: of pods still pending, and of buffers still short or opening nodes."""
    pending = {p.pod for p in plan.pending} | {pod for s in plan.scale_up for pod in s.pods}
    return pending | {c[0] for c in buffers}


def _object_event(
    key: str, pods: Mapping[str, PodInfo], buffers: Mapping[str, BufferInfo], said: tuple[str, str, str]
) -> PodEvent:
    """The Event ``said`` (reason, message, fingerprint) on the object ``key`` marks: a buffer or a pod."""
    buffer = buffers.get(key)
    return _event(key, pods.get(key), *said) if buffer is None else _on_buffer(buffer, *said)


def _event(pod: str, info: PodInfo | None, reason: str, message: str, fp: str) -> PodEvent:
    if info is None:  # not in the snapshot (the planner only names pods it was given): no uid
        namespace, name = _split(pod)
        return PodEvent(namespace, name, None, reason, message, fp)
    return PodEvent(info.namespace, info.name, info.uid or None, reason, message, fp)


def _on_buffer(buffer: BufferInfo, reason: str, message: str, fp: str) -> PodEvent:
    """On the CapacityBuffer itself, by the apiVersion observe read it through (a snapshot of a build
    that kept none: the version read first, :data:`~spillway.model.buffer.VERSIONS`)."""
    version = buffer.api_version or f"{BUFFER_GROUP}/{BUFFER_VERSIONS[0]}"
    return PodEvent(
        buffer.namespace,
        buffer.name,
        buffer.uid or None,
        reason,
        message,
        fp,
        kind=BUFFER_KIND,
        api_version=version,
    )


def _bounded(ledger: Mapping[str, EventMark], size: int) -> dict[str, EventMark]:
    """At most ``size`` marks, the newest kept; sorted by pod for a stable wire form."""
    keep = sorted(ledger.items(), key=lambda kv: (aware(kv[1].posted_at), kv[0]), reverse=True)[:size]
    return dict(sorted(keep))


def post_events(
    cluster: Callable[[], Cluster],
    events: Iterable[PodEvent],
    *,
    budget_seconds: float,
    clock: Callable[[], float] = time.monotonic,
) -> PostResult:
    """Post ``events`` on their pods; never raises (the caller logs and counts the result).

    Stops when ``budget_seconds`` is spent, or at the first sign the API takes no Event at all
    (unreachable, or our role may not create Events): the rest are skipped. Any other refusal (the
    object's namespace is gone or being deleted, the Event is rejected) fails that Event only."""
    todo = list(events)
    if not todo:
        return PostResult()
    deadline = clock() + budget_seconds
    posted, failures = 0, list[str]()
    try:
        api = cluster()
    except SpillwayError as exc:
        return PostResult(skipped=len(todo), errors=(f"no Kubernetes client: {type(exc).__name__}: {exc}",))
    for i, e in enumerate(todo):
        if clock() >= deadline:
            notes = (*failures[:MAX_ERRORS], f"time budget of {budget_seconds:g}s spent")
            return PostResult(posted, len(failures), len(todo) - i, notes)
        try:
            api.record_event(
                e.kind, e.name, e.namespace, e.reason, e.message, e.type, uid=e.uid, api_version=e.api_version
            )
        except SpillwayError as exc:
            failures.append(f"{e.pod}: {type(exc).__name__}: {exc}")
            if isinstance(exc, KubeUnavailable | KubeAuthError):
                return PostResult(posted, len(failures), len(todo) - i - 1, tuple(failures[:MAX_ERRORS]))
        else:
            posted += 1
    return PostResult(posted, len(failures), 0, tuple(failures[:MAX_ERRORS]))
