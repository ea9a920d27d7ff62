"""Ideal First Fit and Best Fit packers: what packing jobs without moving them reaches.

Each packer sees the trace alone, with none of a real cluster's delays: a job's pods are placed at its
submit time (all of them, at once), a node is open the instant it is needed (no boot) and released the
instant its last pod ends; no pod ever moves. A pod goes on an open node where it fits, if any:

* **First Fit**: the first such node in the order they were opened;
* **Best Fit**: the one left fullest by the pod (the least free room after placement, summed over the
  resources as shares of the node's room); ties go to the earliest opened.

Otherwise a node of the cheapest type that fits the pod is opened (price, then the smallest room; a
type without a price counts as dearer than every priced one). Pods of a job go largest first, as the
simulated scheduler places a gang. The gap between a policy and these packers is what its delays
(boot, idle time, ticks) and its scheduler cost; the gap between the packers and the step lower bound
is what not moving pods costs.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from spillway.model.resources import CPU, MEMORY, NVIDIA_GPU, PODS
from spillway.sim.bounds import NodeType
from spillway.sim.trace import Job

_RESOURCES = (NVIDIA_GPU, CPU, MEMORY, PODS)


@dataclass(frozen=True, slots=True)
class PackerResult:
    packer: str  # "first-fit" or "best-fit"
    node_hours: float
    cost_usd: float | None  # None when a node it opened has no price
    peak_nodes: int
    nodes_opened: int

    def to_dict(self, step_node_hours: float, step_cost_usd: float | None) -> dict[str, object]:
        return {
            "node_hours": round(self.node_hours, 3),
            "ratio_to_step_bound": round(self.node_hours / step_node_hours, 4) if step_node_hours else None,
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 2),
            "ratio_to_cost_bound": round(self.cost_usd / step_cost_usd, 4)
            if self.cost_usd is not None and step_cost_usd
            else None,
            "peak_nodes": self.peak_nodes,
            "nodes_opened": self.nodes_opened,
        }


class _Node:
    __slots__ = ("alloc", "free", "kind", "opened", "pods", "seq")

    def __init__(self, kind: int, alloc: tuple[int, ...], opened: int, seq: int) -> None:
        self.kind = kind
        self.alloc = alloc
        self.free = list(alloc)
        self.opened = opened
        self.pods = 0
        self.seq = seq


def _fits(free: list[int], req: tuple[int, ...]) -> bool:
    return all(f >= r for f, r in zip(free, req, strict=True))


def pack(jobs: Sequence[Job], types: Sequence[NodeType], packer: str) -> PackerResult:
    """Replay ``jobs`` through the ideal ``packer`` ("first-fit" or "best-fit") on the fleet's types."""
    if packer not in ("first-fit", "best-fit"):
        raise ValueError(f"unknown packer {packer!r}")
    best = packer == "best-fit"
    allocs = [tuple(t.allocatable.get(r, 0) for r in _RESOURCES) for t in types]
    # cheapest first: price (unknown last), then the smallest room
    order = sorted(
        range(len(types)), key=lambda k: (types[k].price is None, types[k].price or 0.0, allocs[k])
    )
    open_nodes: list[_Node] = []
    ends: list[tuple[int, int, list[tuple[_Node, tuple[int, ...]]]]] = []  # (end, seq, pods' nodes)
    seconds = [0] * len(types)
    peak = 0
    opened = 0
    seq = 0
    for job in sorted(jobs, key=lambda j: (j.submit, j.id)):
        while ends and ends[0][0] <= job.submit:
            _release(heapq.heappop(ends), open_nodes, seconds)
        reqs = sorted(
            (tuple(p.get(r, 0) for r in _RESOURCES) for p in job.pods), key=lambda q: (-q[0], -q[1], -q[2])
        )
        if not all(any(_fits(list(a), q) for a in allocs) for q in reqs):
            continue  # no node type can hold it: it never runs (the bound leaves it out too)
        placed: list[tuple[_Node, tuple[int, ...]]] = []
        for req in reqs:
            node = _choose(open_nodes, req, best)
            if node is None:
                kind = next(k for k in order if _fits(list(allocs[k]), req))
                opened += 1
                node = _Node(kind, allocs[kind], job.submit, opened)
                open_nodes.append(node)
            for i, value in enumerate(req):
                node.free[i] -= value
            node.pods += 1
            placed.append((node, req))
        peak = max(peak, len(open_nodes))
        seq += 1
        heapq.heappush(ends, (job.submit + job.duration, seq, placed))
    while ends:
        _release(heapq.heappop(ends), open_nodes, seconds)
    hours = [s / 3600 for s in seconds]
    cost: float | None = 0.0
    for k, h in enumerate(hours):
        price = types[k].price
        if h and price is None:
            cost = None
            break
        if cost is not None and h:
            cost += h * (price or 0.0)
    return PackerResult(packer, sum(hours), cost, peak, opened)


def _choose(open_nodes: list[_Node], req: tuple[int, ...], best: bool) -> _Node | None:
    if not best:
        for node in open_nodes:
            if _fits(node.free, req):
                return node
        return None
    chosen: _Node | None = None
    chosen_left = 0.0
    for node in open_nodes:
        if not _fits(node.free, req):
            continue
        left = sum((f - r) / a for f, r, a in zip(node.free, req, node.alloc, strict=True) if a)
        if chosen is None or left < chosen_left:
            chosen, chosen_left = node, left
    return chosen


def _release(
    entry: tuple[int, int, list[tuple[_Node, tuple[int, ...]]]], open_nodes: list[_Node], seconds: list[int]
) -> None:
    end, _, placed = entry
    for node, req in placed:
        node.pods -= 1
        for i, value in enumerate(req):
            node.free[i] += value
        if node.pods == 0:
            open_nodes.remove(node)
            seconds[node.kind] += end - node.opened
