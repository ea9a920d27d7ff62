"""One predicate every path asks: may this pod be disturbed, and at what cost?

:func:`assess` is pure and looks only at a :class:`~spillway.model.cluster.PodInfo`. Its verdicts:

* ``ignore``: the pod does not keep its node busy and is not evicted (finished, mirror, DaemonSet);
* ``wait``: already terminating; it keeps the node busy until it is gone, nothing to evict;
* ``never``: protected (``karpenter.sh/do-not-disrupt=true``,
  ``cluster-autoscaler.kubernetes.io/safe-to-evict=false``, or no controller would recreate it and it
  is not annotated safe-to-evict=true); evicted only with ``force``, when it becomes ``movable``;
* ``movable``: may be evicted through the Eviction API.

Everything but ``ignore`` keeps a node busy: the planner never drains a node with such a pod. The
drain's pod classification maps one to one: ignore→ignore, wait→wait, never→keep, movable→evict,
with the same reasons.

``cost`` orders victims, cheapest first: ``(priority, controller.kubernetes.io/pod-deletion-cost)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from spillway.model.cluster import PodInfo
from spillway.model.k8s import DO_NOT_DISRUPT, SAFE_TO_EVICT
from spillway.planner import codes

Verdict = Literal["ignore", "wait", "movable", "never"]
IGNORE: Verdict = "ignore"
WAIT: Verdict = "wait"
MOVABLE: Verdict = "movable"
NEVER: Verdict = "never"


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


def assess(pod: PodInfo, *, force: bool = False) -> Disruption:
    """May ``pod`` be disturbed, and at what cost. ``force`` overrides the protections, nothing else."""
    cost = (pod.priority, pod.deletion_cost)
    if not keeps_node_busy(pod):
        code, why = _ignored(pod)
        return Disruption(IGNORE, why, code, cost)
    if pod.terminating:
        return Disruption(WAIT, "terminating", codes.POD_TERMINATING, cost)
    protected = _protection(pod)
    if protected is None:
        why = "a controller recreates it elsewhere" if pod.controlled else f"annotated {SAFE_TO_EVICT}=true"
        return Disruption(MOVABLE, why, codes.POD_MOVABLE, cost)
    code, why = protected
    if force:
        return Disruption(MOVABLE, f"{why}, but forced", codes.POD_FORCED, cost)
    return Disruption(NEVER, f"{why} (evicted only with force)", code, cost)


def keeps_node_busy(pod: PodInfo) -> bool:
    """``assess(pod).keeps_node_busy`` without building the verdict (the planner asks it for every pod)."""
    return not (pod.terminal or pod.mirror or pod.daemonset)


def _ignored(pod: PodInfo) -> tuple[str, str]:
    """Why a pod that does not keep its node busy is ignored."""
    if pod.terminal:
        return codes.POD_FINISHED, f"finished ({pod.phase})"
    if pod.mirror:
        return codes.POD_MIRROR, "a static (mirror) pod: the kubelet runs it"
    return codes.POD_DAEMONSET, f"a DaemonSet pod ({pod.owner_name})"


def _protection(pod: PodInfo) -> tuple[str, str] | None:
    if pod.do_not_disrupt:
        return codes.POD_DO_NOT_DISRUPT, f"annotated {DO_NOT_DISRUPT}=true"
    if pod.safe_to_evict is False:
        return codes.POD_NOT_SAFE_TO_EVICT, f"annotated {SAFE_TO_EVICT}=false"
    if not pod.controlled and pod.safe_to_evict is not True:
        return codes.POD_NO_CONTROLLER, "no controller would recreate it"
    return None
