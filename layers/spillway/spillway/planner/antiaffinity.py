"""Required pod anti-affinity: where a pod may not go because of the pods already there.

kube-scheduler keeps a pod out of every domain of a term's ``topologyKey`` (one node for
``kubernetes.io/hostname``, one zone for ``topology.kubernetes.io/zone``) that runs a pod the term's
selector matches, and, the other way round, out of every domain where a running pod's own term matches
it. A planner that ignored this would place the pending replicas of a "one per node" Deployment on the
free room of the node that already runs one: they would wait there for ever, nothing launched for them.

The snapshot has matched the terms (:class:`spillway.model.cluster.AntiAffinityMatcher`); here
:class:`AntiIndex` records which node runs pods that own or match each term, and
:meth:`AntiIndex.constraint` gives a pod's class its :class:`Anti`:

* ``forbidden``: per topology key, the domain values it may not enter (node names for the hostname);
* ``per_node`` 1 when its own term selects the pod itself on the hostname key: no two of its class on
  one node, new nodes included.

Pods this plan places are seen only as far as ``per_node`` goes: two different classes that repel each
other may be planned onto one new node, and the one the scheduler then refuses is planned again on the
next snapshot, where the other runs. A zone-keyed term that selects its own class does not spread new
nodes over zones either: the next plan, seeing the first replica run, sends the rest elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from spillway.model.cluster import NodeInfo, PodInfo
from spillway.planner.predicates import HOSTNAME_LABEL

UNBOUNDED = 1 << 40  # no cap on pods per node (placement's too)


@dataclass(frozen=True, slots=True)
class Anti:
    """What required pod anti-affinity leaves a class (see the module docstring)."""

    forbidden: Mapping[str, frozenset[str]] = field(default_factory=dict)
    per_node: int = UNBOUNDED

    def blocker(self, labels: Mapping[str, str], node: str | None) -> str | None:
        """Why a node (``node`` None: a new node of a template) is in a forbidden domain, or None."""
        for key, values in self.forbidden.items():
            value = node if key == HOSTNAME_LABEL else labels.get(key)
            if value is not None and value in values:
                return f"required pod anti-affinity: a pod it must not share {key}={value} with runs there"
        return None

    @property
    def node_specific(self) -> bool:
        return bool(self.forbidden.get(HOSTNAME_LABEL))


NONE = Anti()


class AntiIndex:
    """Per term id: its topology key, the nodes running pods it selects, and the nodes running pods
    that own it."""

    def __init__(self, nodes: Mapping[str, NodeInfo], pods: Iterable[PodInfo]) -> None:
        self.nodes = nodes
        self.key: dict[int, str] = {}
        self.matched_on: dict[int, list[tuple[str, str]]] = {}  # id -> (node, pod key)
        self.owned_on: dict[int, list[tuple[str, str]]] = {}
        for pod in pods:
            for term, key in pod.anti_own:
                self.key[term] = key
            if pod.node_name is None or pod.terminal or (not pod.anti_own and not pod.anti_matched):
                continue
            for term in pod.anti_matched:
                self.matched_on.setdefault(term, []).append((pod.node_name, pod.key))
            for term, _ in pod.anti_own:
                self.owned_on.setdefault(term, []).append((pod.node_name, pod.key))

    def constraint(self, pod: PodInfo, leaving: str | None = None) -> Anti:
        """The class of ``pod``; pods on node ``leaving`` (being emptied) do not count."""
        if not pod.anti_own and not pod.anti_matched:
            return NONE
        forbidden: dict[str, set[str]] = {}
        for term, key in pod.anti_own:  # its terms, against the pods they select
            self._add(forbidden, key, self.matched_on.get(term, ()), pod.key, leaving)
        for term in pod.anti_matched:  # the terms of running pods that select it
            owner_key = self.key.get(term)
            if owner_key is not None:
                self._add(forbidden, owner_key, self.owned_on.get(term, ()), pod.key, leaving)
        own = {term for term, key in pod.anti_own if key == HOSTNAME_LABEL}
        per_node = 1 if own & set(pod.anti_matched) else UNBOUNDED
        return Anti({k: frozenset(v) for k, v in sorted(forbidden.items()) if v}, per_node)

    def _add(
        self,
        forbidden: dict[str, set[str]],
        key: str,
        where: Iterable[tuple[str, str]],
        me: str,
        leaving: str | None,
    ) -> None:
        for node_name, other in where:
            if other == me or node_name == leaving:
                continue
            info = self.nodes.get(node_name)
            value = node_name if key == HOSTNAME_LABEL else (info.labels.get(key) if info else None)
            if value is not None:
                forbidden.setdefault(key, set()).add(value)
