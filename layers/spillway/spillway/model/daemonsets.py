"""DaemonSets as a node the cluster does not have yet sees them.

The DaemonSet controller pins each pod it makes to its node by replacing the pod's required node
affinity with one ``matchFields metadata.name`` term (pkg/controller/daemon/util
ReplaceDaemonSetPodNodeNameNodeAffinity), so the pods running on the cluster's nodes no longer say which
nodes their DaemonSet targets: the DaemonSet's ``spec.template`` does. cluster-autoscaler judges a group
without a node of its own by the DaemonSet objects (utils/daemonset GetDaemonSetPodsForNode): the pod the
controller would make (its ``NewPod``: the template with the default DaemonSet tolerations added) runs on
a node that passes the controller's ``NodeShouldRunDaemonPod``: the template's ``nodeName`` (if any) is
the node's, its nodeSelector and required node affinity match the node's labels, and it tolerates the
node's NoSchedule and NoExecute taints. Resources are not checked: the pod is there before any other.

A :class:`DaemonSetInfo` keeps that pod's side of the test and its requests; the planner judges it
against a group's template (spillway.planner.groups.fresh_node_overhead).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spillway.model.cluster import PodInfo, Term, TolerationT
from spillway.model.k8s import DaemonSet, ObjectMeta, Pod
from spillway.model.resources import Resources

#: tolerations the DaemonSet controller adds to every pod it makes
#: (pkg/controller/daemon/util AddOrUpdateDaemonPodTolerations): node problems never keep a daemon off
DEFAULT_TOLERATIONS: tuple[TolerationT, ...] = (
    ("node.kubernetes.io/not-ready", "Exists", None, "NoExecute"),
    ("node.kubernetes.io/unreachable", "Exists", None, "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "Exists", None, "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "Exists", None, "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "Exists", None, "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "Exists", None, "NoSchedule"),
)
#: and to a pod on the host's network
HOST_NETWORK_TOLERATION: TolerationT = (
    "node.kubernetes.io/network-unavailable",
    "Exists",
    None,
    "NoSchedule",
)
SYSTEM_NODE_CRITICAL = "system-node-critical"


@dataclass(frozen=True, slots=True)
class DaemonSetInfo:
    """The pod a DaemonSet's controller would make for a new node: its requests and what decides whether
    the node runs it. ``critical``: its pods are ``system-node-critical`` and preempt lower priorities
    (no ``preemptionPolicy``, or ``PreemptLowerPriority``), so one makes room for itself on a node that
    does not run it yet (cluster-autoscaler adds such a DaemonSet to a template read from a real node)."""

    namespace: str
    name: str
    requests: Resources
    node_selector: tuple[tuple[str, str], ...] = ()
    required_terms: tuple[Term, ...] = ()
    tolerations: tuple[TolerationT, ...] = ()
    node_name: str | None = None  # spec.template.spec.nodeName: that node's only
    critical: bool = False
    # the node ports its pod takes (hostPort, protocol, hostIP): a pending pod asking one of them cannot
    # share a node with it (kube-scheduler's NodePorts)
    host_ports: tuple[tuple[int, str, str], ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_daemonset(cls, daemonset: DaemonSet) -> DaemonSetInfo:
        meta, spec = daemonset.metadata, daemonset.spec.template.spec
        namespace = meta.namespace or "default"
        pod = PodInfo.from_pod(Pod(metadata=ObjectMeta(name=meta.name, namespace=namespace), spec=spec))
        added = (*DEFAULT_TOLERATIONS, *((HOST_NETWORK_TOLERATION,) if spec.host_network else ()))
        tolerations = pod.tolerations + tuple(t for t in added if t not in pod.tolerations)
        return cls(
            namespace=namespace,
            name=meta.name,
            requests=pod.requests,
            node_selector=pod.node_selector,
            required_terms=pod.required_terms,
            tolerations=tuple(sorted(tolerations, key=repr)),
            node_name=spec.node_name or None,
            critical=spec.priority_class_name == SYSTEM_NODE_CRITICAL
            and spec.preemption_policy in (None, "PreemptLowerPriority"),
            host_ports=pod.host_ports,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ns": self.namespace, "n": self.name, "r": self.requests}
        optional = (
            ("sel", [list(x) for x in self.node_selector]),
            ("aff", [[[k, op, list(v), f] for k, op, v, f in term] for term in self.required_terms]),
            ("tol", [list(t) for t in self.tolerations]),
            ("node", self.node_name),
            ("crit", 1 if self.critical else None),
            ("hp", [list(p) for p in self.host_ports]),
        )
        out.update((key, value) for key, value in optional if value)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DaemonSetInfo:
        return cls(
            namespace=d["ns"],
            name=d["n"],
            requests=dict(d["r"]),
            node_selector=tuple((k, v) for k, v in d.get("sel", ())),
            required_terms=tuple(
                tuple((k, op, tuple(v), bool(f)) for k, op, v, f in term) for term in d.get("aff", ())
            ),
            tolerations=tuple((k, op, v, e) for k, op, v, e in d.get("tol", ())),
            node_name=d.get("node"),
            critical=bool(d.get("crit")),
            host_ports=tuple((int(p), str(proto), str(ip)) for p, proto, ip in d.get("hp", ())),
        )
