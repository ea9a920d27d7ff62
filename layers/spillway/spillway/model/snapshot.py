"""One observation of a cluster: the Kubernetes side, the AWS side, when, and a demand fingerprint.

The planner is called as ``plan(snapshot.cluster, snapshot.groups, config, state, now)``.

The :func:`fingerprint` hashes what decisions depend on (pending pods and their scheduling classes,
nodes and their readiness/cordon state, what is bound where, the groups' sizes, instances and launch
failures, PDB budgets) and nothing that changes by itself (timestamps of the observation). Two
observations with the same fingerprint lead to the same plan, so an unchanged cluster need not be
stored again, except as a heartbeat.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from spillway.model.cluster import ClusterSnapshot, NodeInfo, PdbInfo, PodInfo, format_time, parse_time
from spillway.model.nodegroup import NodeGroup

FORMAT_VERSION = 1
_STREAMED = ("nodes", "pods", "pdbs")


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the observe step saw at ``taken_at``: ``cluster`` (Kubernetes) and ``groups`` (AWS)."""

    cluster: ClusterSnapshot
    groups: tuple[NodeGroup, ...]
    taken_at: datetime
    observe_seconds: float
    fingerprint: str

    @property
    def cluster_name(self) -> str:
        return self.cluster.cluster

    @classmethod
    def build(
        cls,
        cluster: ClusterSnapshot,
        groups: Iterable[NodeGroup],
        taken_at: datetime,
        observe_seconds: float = 0.0,
    ) -> Snapshot:
        ordered = tuple(sorted(groups, key=lambda g: (g.region, g.name)))
        return cls(
            cluster=cluster,
            groups=ordered,
            taken_at=taken_at,
            observe_seconds=observe_seconds,
            fingerprint=fingerprint(cluster, ordered),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": FORMAT_VERSION,
            "taken_at": format_time(self.taken_at),
            "observe_seconds": round(self.observe_seconds, 3),
            "fingerprint": self.fingerprint,
            "cluster": self.cluster.to_dict(),
            "groups": [g.to_dict() for g in self.groups],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Snapshot:
        version = d.get("v", FORMAT_VERSION)
        if version != FORMAT_VERSION:
            raise ValueError(f"v: unsupported snapshot format {version!r}")
        taken_at = parse_time(d["taken_at"])
        if taken_at is None:
            raise ValueError("taken_at: missing")
        return cls(
            cluster=ClusterSnapshot.from_dict(d["cluster"]),
            groups=tuple(NodeGroup.from_dict(g) for g in d.get("groups", ())),
            taken_at=taken_at,
            observe_seconds=float(d.get("observe_seconds", 0.0)),
            fingerprint=str(d["fingerprint"]),
        )

    def iter_json(self, batch: int = 500) -> Iterator[str]:
        """Compact JSON of :meth:`to_dict`, in pieces, without building the whole dict tree at once.

        ``"".join(snapshot.iter_json())`` equals ``json.dumps(snapshot.to_dict(), separators=(",", ":"))``
        (with ``ensure_ascii=False``); memory is one ``batch`` of records at a time.
        """
        empty = replace(self.cluster, nodes=(), pods=(), pdbs=())
        head = replace(self, cluster=empty).to_dict()
        cluster_head = head.pop("cluster")
        for name in _STREAMED:
            cluster_head.pop(name, None)
        yield _dumps(head)[:-1] + ',"cluster":' + _dumps(cluster_head)[:-1]
        for name in _STREAMED:
            records: tuple[NodeInfo | PodInfo | PdbInfo, ...] = getattr(self.cluster, name)
            yield f',"{name}":['
            for start in range(0, len(records), batch):
                piece = ",".join(_dumps(r.to_dict()) for r in records[start : start + batch])
                yield piece if start == 0 else "," + piece
            yield "]"
        yield "}}"

    def counts(self) -> SnapshotCounts:
        return SnapshotCounts.of(self.cluster)

    def oldest_pending_seconds(
        self, expendable_below: int | None = None, held: Collection[str] = ()
    ) -> float:
        """How long the longest-waiting unschedulable pod has waited (its PodScheduled=False time, or
        the end of its ``pod-scale-up-delay`` when that is later: it asked for no node before then);
        ``expendable_below``: leave out pods of a lower priority (``expendable_priority_cutoff``: they
        never trigger a scale-up, so their wait says nothing of the autoscaler); ``held``: leave out
        these pods (``namespace/name``: those a plan holds at a limit on purpose)."""
        ages = [
            (self.taken_at - max(pod.pending_since, pod.scale_up_after or pod.pending_since)).total_seconds()
            for pod in self.cluster.pods
            if pod.pending_since is not None
            and pod.is_pending_unschedulable()
            and (expendable_below is None or pod.priority >= expendable_below)
            and pod.key not in held
        ]
        return max([0.0, *ages])

    def longest_not_ready_seconds(self, startup: timedelta = timedelta(0)) -> float:
        """How long the node NotReady the longest has been so: since its Ready condition last changed
        (``lastTransitionTime``), or since it was created when the condition gives no time; 0 when every
        node is Ready. One node's time, so nodes joining one after another (each NotReady for its first
        minute) never add up to a long one. A node never Ready counts from the end of ``startup`` after
        its creation (``max_node_startup_minutes``: until then it is registering, and the planner's
        unready time starts there), so the alarm on this pages no sooner for it than for a node that was
        Ready, and not before Spillway has removed it if it is idle."""
        ages = [
            (self.taken_at - since).total_seconds() - (startup.total_seconds() if node.never_ready() else 0)
            for node in self.cluster.nodes
            if not node.ready and (since := node.ready_changed_at or node.created_at) is not None
        ]
        return max([0.0, *ages])


@dataclass(frozen=True, slots=True)
class SnapshotCounts:
    """Headline numbers for logs and metrics."""

    nodes: int
    not_ready_nodes: int
    pods: int
    pending_pods: int
    unschedulable_pods: int

    @classmethod
    def of(cls, cluster: ClusterSnapshot) -> SnapshotCounts:
        pending = unschedulable = 0
        for pod in cluster.pods:
            # one being deleted waits for nothing: no scheduler places it (PodInfo.is_pending_unschedulable)
            if pod.node_name is None and not (pod.terminal or pod.daemonset or pod.terminating):
                pending += 1
                if pod.is_pending_unschedulable():
                    unschedulable += 1
        return cls(
            nodes=len(cluster.nodes),
            not_ready_nodes=sum(1 for n in cluster.nodes if not n.ready),
            pods=len(cluster.pods),
            pending_pods=pending,
            unschedulable_pods=unschedulable,
        )


def fingerprint(cluster: ClusterSnapshot, groups: Iterable[NodeGroup]) -> str:
    """A stable hash (hex SHA-256) of what matters for decisions; independent of input order."""
    per_node, requests_per_node = _bound_pods(cluster.pods)
    nodes = [_node_entry(n, per_node, requests_per_node) for n in cluster.nodes]
    # Pods bound to nodes that are not (yet, or any more) in the node list still count.
    known = {n.name for n in cluster.nodes}
    orphans = sorted((name, c) for name, c in per_node.items() if name not in known)
    doc = {
        "cluster": cluster.cluster,
        "pending": sorted(_pending_entries(cluster.pods)),
        "nodes": sorted(nodes, key=lambda n: str(n[0])),
        "orphans": orphans,
        "pdbs": sorted(_pdb_entry(p) for p in cluster.pdbs),
        "groups": sorted(_group_entry(g) for g in groups),
    }
    doc |= _shared_entries(cluster)
    if cluster.fleet_instances:  # a fleet gang's instances outside the groups (absent: older ones stand)
        doc["fleet"] = sorted((i.instance_id, i.state, i.group or "") for i in cluster.fleet_instances)
    if cluster.regions_unread:  # their groups are scaled by no plan (the error's words change nothing)
        doc["regions_unread"] = sorted(cluster.unread_region_names)
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _pdb_entry(p: PdbInfo) -> tuple[Any, ...]:
    """What a budget decides: its selector and allowance, and, only when the budget says something of
    them, what it lets a pod that is not Ready do (so older fingerprints of budgets without stand)."""
    entry: tuple[Any, ...] = (p.namespace, p.name, [list(m) for m in p.match_labels], p.disruptions_allowed)
    if p.unhealthy_policy or p.current_healthy or p.desired_healthy:
        entry += (p.unhealthy_policy or "", p.current_healthy, p.desired_healthy)
    return entry


def _shared_entries(cluster: ClusterSnapshot) -> dict[str, Any]:
    """The shared-cluster objects decide too (a Pending Volcano PodGroup is demand without pods; a quota
    or tenant label changes what may open; a ProvisioningRequest's spec and conditions, written by the
    plan, decide its next conditions; a CapacityBuffer holds room; a DaemonSet takes room on new nodes);
    each left out when absent, so older fingerprints stand."""
    doc: dict[str, Any] = {}
    if cluster.tenants:
        doc["tenants"] = sorted(cluster.tenants.items())
    if cluster.gangs:
        doc["gangs"] = sorted((g.to_dict() for g in cluster.gangs), key=lambda g: str(g["k"]))
    if cluster.quotas:
        doc["quotas"] = sorted(
            ({k: v for k, v in q.to_dict().items() if k != "u"} for q in cluster.quotas),
            key=lambda q: str(q["n"]),
        )
    # jobs: what consolidation may move (spillway.planner.disruption.assess_move); DaemonSets: the room a
    # group's new node has (spillway.planner.groups.fresh_node_overhead)
    shared = (
        ("provreqs", cluster.provreqs),
        ("jobs", cluster.jobs),
        ("buffers", cluster.buffers),
        ("daemonsets", cluster.daemonsets),
    )
    for key, items in shared:
        if items:
            doc[key] = [item.to_dict() for item in items]
    doc |= _priority_entries(cluster)
    if cluster.gang_succeeded:  # a member finishing changes what its gang still needs
        doc["gang_succeeded"] = sorted((g, sorted(t.items())) for g, t in cluster.gang_succeeded.items())
    if cluster.coscheduling_served:  # a pod naming a PodGroup that does not exist is then no demand
        doc["cosched"] = 1
    return doc


def _priority_entries(cluster: ClusterSnapshot) -> dict[str, Any]:
    """The priorities rank the groups new nodes go to; why the ConfigMap's could not be read, the plan
    names. Each left out when absent."""
    doc: dict[str, Any] = {}
    if cluster.expander_priorities:
        doc["priorities"] = sorted((p, list(x)) for p, x in cluster.expander_priorities.items())
    if cluster.expander_problem:
        doc["priorities_problem"] = cluster.expander_problem
    return doc


def _pending_entries(pods: Iterable[PodInfo]) -> list[Any]:
    """The unbound, live, non-DaemonSet pods, each as the stored snapshot keeps it: everything the
    planner reads of a pending pod (its class, why it waits for a volume, a nomination cleared, its gang,
    the request it consumes...) is news to plan on."""
    return [
        (pod.key, json.dumps(pod.to_dict(), sort_keys=True, default=str))
        for pod in pods
        if not pod.terminal and pod.node_name is None and not pod.daemonset
    ]


def _bound_pods(pods: Iterable[PodInfo]) -> tuple[dict[str, list[int]], dict[str, dict[str, int]]]:
    """Per node of the live bound pods: [bound, workload, not evictable] (idleness and drainability
    of the node), and their summed requests."""
    per_node: dict[str, list[int]] = {}
    requests_per_node: dict[str, dict[str, int]] = {}
    for pod in pods:
        if pod.terminal or pod.node_name is None:
            continue
        counts = per_node.setdefault(pod.node_name, [0, 0, 0])
        counts[0] += 1
        if pod.is_workload:
            counts[1] += 1
            if pod.do_not_disrupt or pod.safe_to_evict is False:
                counts[2] += 1
        totals = requests_per_node.setdefault(pod.node_name, {})
        for name, value in pod.requests.items():
            totals[name] = totals.get(name, 0) + value
    return per_node, requests_per_node


def _node_entry(
    n: NodeInfo, per_node: Mapping[str, list[int]], requests_per_node: Mapping[str, dict[str, int]]
) -> tuple[Any, ...]:
    return (
        n.name,
        json.dumps(n.to_dict(), sort_keys=True, default=str),  # all the planner reads of the node
        per_node.get(n.name, [0, 0, 0]),
        sorted(requests_per_node.get(n.name, {}).items()),
    )


def _group_entry(g: NodeGroup) -> tuple[Any, ...]:
    """The group as the stored snapshot keeps it: sizes, instances, launch failures, template, warm
    pool, scheduled floors and its per-group options all decide."""
    return (g.region, g.name, json.dumps(g.to_dict(), sort_keys=True, default=str))
