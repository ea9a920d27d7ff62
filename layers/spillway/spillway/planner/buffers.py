"""Capacity buffers: spare room held as virtual pods, lowest of all demand.

A buffer (a CapacityBuffer of the cluster, or one of the configuration's ``buffers``) that is active
now (:meth:`~spillway.model.buffer.BufferInfo.active_at`: outside its windows a buffer is nothing)
becomes one :class:`~spillway.planner.classes.PodClass` of ``replicas`` virtual pods named
``<namespace>/<buffer>:buffer:<i>`` (``config:<buffer>:buffer:<i>`` for a configured one). Buffer
classes sort after every real class (:meth:`PodClass.sort_key`), so they only take room no real
pending pod of this plan wants: free room first (on nodes in use before idle ones, so a buffer held
in busy nodes' spare room lets idle nodes go), then capacity launching, then nodes Spillway
cordoned, then new nodes (the ScaleUp reason names the buffer).

After scale-up, :func:`settle` takes the virtual pods out of ``pending`` (they are never reported nor
get Events) and records per existing node the buffer pods its free room holds
(:attr:`Context.buffer_room`): scale-down keeps such nodes (code ``buffer``). The next plan places
real pods first again: a buffer whose room real pods took is placed anew, which may open nodes.

:func:`settle` also reports each active buffer (:class:`~spillway.planner.types.BufferHold`, the
plan's ``buffers``): its chunks held on existing nodes, on capacity launching or launched now, and
short, with the pending code the short chunks got (``no-group-fits`` for a ``node_selector`` no group
has, ``max-size``, ``tenant-limit``, ...). A buffer nothing can hold is otherwise silent: its virtual
pods are no pending pods. The report changes no placement.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from spillway.config import BufferConfig
from spillway.model.buffer import BufferInfo
from spillway.model.cluster import PodInfo
from spillway.model.k8s import Pod
from spillway.planner import codes
from spillway.planner.classes import PodClass, new_class
from spillway.planner.context import Context, WorkNode
from spillway.planner.placement import Pool, pools
from spillway.planner.topology import UNBOUNDED
from spillway.planner.types import BufferHold, Drain

MARK = ":buffer:"


def virtual_pod(buffer: BufferInfo, index: int) -> str:
    return f"{buffer.key}{MARK}{index}"


def configured(buffer: BufferConfig) -> BufferInfo:
    """A buffer of the configuration, its pod shape read as the API reads a pod."""
    spec = {
        "containers": [{"name": "buffer", "resources": {"requests": buffer.pod.requests()}}],
        "nodeSelector": dict(buffer.pod.node_selector),
        "tolerations": list(buffer.pod.tolerations),
    }
    pod = Pod.model_validate({"metadata": {"name": f"{buffer.name}:buffer", "namespace": ""}, "spec": spec})
    info = PodInfo.from_pod(pod)
    return BufferInfo("", buffer.name, buffer.replicas, pod=info, windows=tuple(buffer.windows))


def active_buffers(ctx: Context) -> list[BufferInfo]:
    """Every buffer that holds room now, by key. A CapacityBuffer whose chunk is expendable (its
    template's ``priority`` below ``expendable_priority_cutoff``) holds none: cluster-autoscaler puts its
    buffer pod injector before the default pod list processors, and FilterOutExpendablePodListProcessor
    drops such fake pods as it drops any expendable pod (core/podlistprocessor/filter_out_expendable.go,
    core/utils FilterOutExpendableAndSplit), so they neither trigger a scale-up nor take room."""
    found = [configured(b) for b in ctx.config.buffers] + [
        b for b in ctx.snapshot.buffers if not b.expendable(ctx.config.expendable_priority_cutoff)
    ]
    return sorted((b for b in found if b.active_at(ctx.now)), key=lambda b: b.key)


def _room_bound(ctx: Context, cls: PodClass) -> int:
    """The most chunks of the class the cluster could ever hold: what fits the free room of every node
    and every node each group may still open, up to MaxSize. The chunks past it could never be placed,
    and a buffer of two billion (``replicas`` is an int32) would otherwise be two billion virtual pods
    in every plan. A chunk takes a pod slot as every pod does: ``ONE_POD`` of the node's ``pods``,
    both in milli-units (:func:`~spillway.planner.classes.new_class` adds it to the class's requests),
    so a chunk that requests next to nothing is bounded by the nodes' pod slots. A volume the chunks
    share takes one of a node's attach slots for all of them (:meth:`PodClass.fit_with`)."""
    total = sum(cls.fit_on(name, node.free, UNBOUNDED) for name, node in ctx.nodes.items())
    for group in ctx.groups:
        if group.template is not None:
            total += group.max_size * cls.fit_with(group.template.allocatable, UNBOUNDED)
    return total


def buffer_classes(ctx: Context) -> list[PodClass]:
    """One class of virtual pods per active buffer; ``ctx.buffer_pods`` names each pod's buffer."""
    out: list[PodClass] = []
    for buffer in active_buffers(ctx):
        assert buffer.pod is not None
        tenant = ctx.snapshot.tenant(buffer.namespace) if buffer.namespace else None
        cls = new_class(
            buffer.pod,
            tenant if tenant in ctx.config.tenants else None,
            domains=ctx.topology.domains(buffer.pod),
        )
        cls.buffer = buffer.key
        # the chunks name the template's claims: they share those volumes on a node, as a pod set's pods
        # do (spillway.planner.provreq.set_class)
        cls.volumes, cls.volume_nodes = buffer.pod.volumes, ctx.volume_nodes
        cls.pods = [virtual_pod(buffer, i) for i in range(min(buffer.replicas, _room_bound(ctx, cls)))]
        ctx.buffer_plans.append((buffer, len(cls.pods), _past_bound(ctx, cls, len(cls.pods))))
        if not cls.pods:  # no node nor group could hold a chunk (GPUs where none are): nothing to plan
            continue
        ctx.buffer_pods.update(dict.fromkeys(cls.pods, buffer))
        out.append(cls)
    return out


def _past_bound(ctx: Context, cls: PodClass, planned: int) -> tuple[str, str]:
    """The pending code and reason of a buffer's chunks past the ``planned`` ones :func:`_room_bound`
    allows: ``max-size`` when a group's template node has room for a chunk (every group up to its
    MaxSize is full of them), else ``no-group-fits``."""
    if any(g.template is not None and cls.fit_with(g.template.allocatable, 1) for g in ctx.groups):
        return codes.MAX_SIZE, (
            f"past the {planned} chunk(s) the free room of every node and every group up to its MaxSize "
            "could ever hold"
        )
    where = f"past the {planned} chunk(s) the nodes' free room could hold: " if planned else ""
    return codes.NO_GROUP_FITS, (
        f"{where}no group's template node has room for one chunk"
        + ("" if planned else " and no node's free room has either")
    )


def busy_first(ctx: Context, pool_list: Sequence[Pool]) -> list[Pool]:
    """The pools' nodes, those scale-down keeps anyway first: in use (running workload, or receiving
    pending pods), then idle ones it keeps however long they idle (in a group at its MinSize, in no
    managed group, or under a lasting protection: :func:`~spillway.planner.scaledown.stays_anyway`),
    then by region (home first) and name. A buffer held in room that stays lets the other idle nodes
    go; held on an idle node that could go (another group's, an overflow region's), it would keep that
    node and let the one that stays anyway idle."""
    from spillway.planner.scaledown import stays_anyway  # scaledown reads held_here from this module

    def key(node: WorkNode) -> tuple[bool, bool, int, str]:
        group = node.group
        stays = (group is not None and group.desired <= group.min_size) or stays_anyway(ctx, node)
        region = ctx.region_key(group) if group is not None else len(ctx.region_rank)
        return (node.workload == 0 and node.receives == 0, not stays, region, node.info.name)

    return pools(sorted((n for pool in pool_list for n in pool.nodes), key=key))


def settle(ctx: Context) -> None:
    """After scale-up: the buffer pods each existing node holds, and none of them in ``pending`` (the
    code and reason each unplaced one got are kept for :func:`holds`)."""
    placed = {p.pod for p in ctx.placements if p.pod in ctx.buffer_pods}
    ctx.buffer_left = {
        p.pod: (p.code, p.reason) for p in ctx.pending_out if p.pod in ctx.buffer_pods and p.pod not in placed
    }
    for placement in ctx.placements:
        buffer = ctx.buffer_pods.get(placement.pod)
        node = ctx.nodes.get(placement.node)
        if buffer is None or node is None:
            continue
        node.receives -= 1  # room held for a buffer, not for a pending pod
        held = ctx.buffer_room.setdefault(node.info.name, {})
        held[buffer.key] = held.get(buffer.key, 0) + 1
    if ctx.buffer_pods:
        ctx.pending_out[:] = [p for p in ctx.pending_out if p.pod not in ctx.buffer_pods]


def holds(ctx: Context, drains: Sequence[Drain] = ()) -> tuple[BufferHold, ...]:
    """Per active buffer, by key: its chunks placed on an existing node (``held``), on a node launching
    or launched by this plan (``launching``), and those with no place (``short``), each with the code
    and reason its virtual pod got in ``pending``. A chunk never planned (past :func:`_room_bound`) has
    the last planned chunk's when that one is short too (the bound counts room only: a chunk of a
    ``node_selector`` no group has is past it as ``no-group-fits``), else :func:`_past_bound`'s.

    A chunk whose room is on a node of ``drains`` (the plan's own: a scheduled action's shrink drains a
    node whatever buffer room it holds) is short with the drain's code: that room goes with the
    node, and the next plan places the chunk anew. Called after :func:`settle` and the scale-down."""
    placed = {p.pod: p.node for p in ctx.placements if p.pod in ctx.buffer_pods}
    going = {d.node: (d.code or "drained", d.reason) for d in drains}  # an empty node's has code ""
    return tuple(_tally(ctx, plan, placed, going) for plan in ctx.buffer_plans)


def _tally(
    ctx: Context,
    plan: tuple[BufferInfo, int, tuple[str, str]],
    placed: dict[str, str],
    going: dict[str, tuple[str, str]],
) -> BufferHold:
    """One buffer's :class:`BufferHold` (:func:`holds`)."""
    buffer, planned, past = plan
    pods = [virtual_pod(buffer, i) for i in range(planned)]
    nodes = [placed[pod] for pod in pods if pod in placed and placed[pod] not in going]
    held = sum(1 for node in nodes if node in ctx.nodes)
    why = [
        (*_drained(placed[pod], going[placed[pod]]), 1)
        if pod in placed
        else (*ctx.buffer_left.get(pod, past), 1)
        for pod in pods
        if pod not in placed or placed[pod] in going
    ]
    # the bound counts room, not a node selector or a limit: past it, what held the last planned chunk.
    # Counted, not listed: replicas is an int32, up to two billion
    if buffer.replicas > planned:
        last = pods[-1] if pods else None
        tail = ctx.buffer_left.get(last, past) if last is not None and last not in placed else past
        why.append((*tail, buffer.replicas - planned))
    return _hold(buffer, held, len(nodes) - held, why)


def _drained(node: str, drain: tuple[str, str]) -> tuple[str, str]:
    code, reason = drain
    return code, f"its room on {node} goes with the node: the plan drains it ({reason})"


def _hold(buffer: BufferInfo, held: int, launching: int, why: Sequence[tuple[str, str, int]]) -> BufferHold:
    """``why``: (code, reason, chunks) of the short chunks, in the chunks' order."""
    where = f"{held} held on existing nodes, {launching} on capacity launching or launched by this plan"
    if not why:
        reason = f"all {buffer.replicas} chunk(s) have room: {where}"
        return BufferHold(buffer.key, buffer.replicas, held, launching, 0, None, reason)
    counts: Counter[str] = Counter()
    first: dict[str, str] = {}  # each code's first reason
    for code, text, chunks in why:
        counts[code] += chunks
        first.setdefault(code, text)
    order = sorted(counts, key=lambda code: -counts[code])  # most first; a tie in the chunks' order
    detail = "; ".join(f"{counts[code]} {code}: {first[code]}" for code in order)
    short = counts.total()
    reason = f"{short} of {buffer.replicas} chunk(s) have no room ({where}): {detail}"
    return BufferHold(buffer.key, buffer.replicas, held, launching, short, order[0], reason[:1000])


def held_here(ctx: Context, node: str) -> str | None:
    """``web/serving (2 pod(s)), config:night (1 pod(s))``: the buffers a node holds room for."""
    held = ctx.buffer_room.get(node)
    if not held:
        return None
    return ", ".join(f"{key} ({count} pod(s))" for key, count in sorted(held.items()))
