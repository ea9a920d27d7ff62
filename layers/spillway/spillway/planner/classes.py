"""Stage 1: pending pods → equivalence classes, in the order scale-up serves them.

Pods the scheduler cannot tell apart (same requests, selector, affinity, tolerations, priority) form one
:class:`PodClass`; scale-up places a class at a time, higher priority first, then the biggest
requests (GPU, CPU, memory). Expendable pods (priority below ``expendable_priority_cutoff``) get their
final reason here and never reach scale-up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spillway.model.cluster import PodInfo, TaintT, Term, TolerationT
from spillway.model.resources import CPU, MEMORY, NVIDIA_GPU, PODS, Resources
from spillway.planner import codes
from spillway.planner.context import ONE_POD, Context
from spillway.planner.predicates import references_node_identity, why_not_placeable
from spillway.planner.types import PendingPod


@dataclass(slots=True)
class PodClass:
    """Pending pods the scheduler cannot tell apart: same requests and constraints."""

    requests: Resources  # per pod, with its pod slot
    node_selector: tuple[tuple[str, str], ...]
    terms: tuple[Term, ...]
    tolerations: tuple[TolerationT, ...]
    priority: int
    pods: list[str]
    node_specific: bool  # a constraint names one node: judged per node, not per shape
    next: int = 0  # pods before this index are placed

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


def pod_classes(ctx: Context) -> list[PodClass]:
    """The pending pods that may trigger a scale-up, as classes in service order."""
    classes: dict[tuple[Any, ...], PodClass] = {}
    cutoff = ctx.config.expendable_priority_cutoff
    for pod in sorted(ctx.pending, key=lambda p: p.key):
        if pod.priority < cutoff:
            reason = f"priority {pod.priority} is below expendable_priority_cutoff {cutoff}: never triggers a scale-up"
            ctx.pending_out.append(PendingPod(pod.key, reason, codes.EXPENDABLE))
            continue
        key = pod.scheduling_key()
        cls = classes.get(key)
        if cls is None:
            cls = classes[key] = _new_class(pod)
        cls.pods.append(pod.key)
    return sorted(classes.values(), key=PodClass.sort_key)


def _new_class(pod: PodInfo) -> PodClass:
    requests = dict(pod.requests)
    requests[PODS] = requests.get(PODS, 0) + ONE_POD
    return PodClass(
        requests=requests,
        node_selector=pod.node_selector,
        terms=pod.required_terms,
        tolerations=pod.tolerations,
        priority=pod.priority,
        pods=[],
        node_specific=references_node_identity(pod.node_selector, pod.required_terms),
    )
