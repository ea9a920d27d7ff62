"""Nodes still starting: Ready, but not yet able to run the pods they were launched for.

A kubelet reports Ready before the node is of use. A GPU node's device plugin registers
``nvidia.com/gpu`` a minute or more later (the driver, the container toolkit, the plugin); a CNI or
CSI agent holds its own ``NoSchedule`` taint until it runs (Cilium's ``node.cilium.io/agent-not-ready``,
the EBS CSI driver's ``ebs.csi.aws.com/agent-not-ready``). In that window the node has no room for the
pods it was launched for, and a planner that took it as an ordinary node would launch another node for
them: a second p4d for one pending job. So, as cluster-autoscaler does with its startup taints and GPU
nodes whose GPUs are not registered, and as Karpenter waits for a node to be initialized:

A Ready node of a managed group is **starting** while it is younger than ``max_node_startup_minutes``
(cluster-autoscaler's ``--max-node-startup-time``, 15; 0: never) and either

* carries a startup taint: a key with cluster-autoscaler's prefix
  ``startup-taint.cluster-autoscaler.kubernetes.io/`` (or the older ``ignore-taint.…/``), or one listed
  in ``startup_taints`` (cluster-autoscaler's ``--startup-taint``, Karpenter's NodePool
  ``startupTaints``); or
* carries a taint the control plane lifts once the node is set up (:data:`EPHEMERAL_TAINTS`:
  ``node.kubernetes.io/not-ready``, ``unreachable``, ``network-unavailable``,
  ``node.cloudprovider.kubernetes.io/uninitialized``); or
* lacks an extended resource (a name with a ``/``: GPUs, Neuron devices, EFA) that its group's template
  node has: its device plugin has not registered it yet.

A starting node is capacity still launching (:meth:`spillway.planner.context.Context.launching`), not a
node with room of its own: pending pods are planned onto its group's template (onto the room it
reports, less its pods', once pods are bound or nominated to it: :func:`spillway.planner.placement
.launching_bins`), and no pod consolidation moves goes there
(:func:`spillway.planner.placement.initialized_only`).
Past the window it is no capacity launching: one whose GPUs never came has room for no GPU pod. It is
unready, as cluster-autoscaler takes it: counted so by :mod:`spillway.planner.health`, and, idle from
the end of the window, drained once idle for ``scale_down_unready_minutes`` in place of
``scale_down_idle_minutes`` (:func:`spillway.planner.scaledown.unready_now`).

Startup taints, and cluster-autoscaler's ``status-taint.cluster-autoscaler.kubernetes.io/`` taints, are
also left out of the groups' template nodes (a tag may declare them, as the kubelet registers them): a
new node will not keep them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from spillway.config import PlannerConfig
from spillway.model.cluster import NodeInfo
from spillway.model.nodegroup import INSTANCE_TYPE_LABEL, NodeGroup
from spillway.planner.context import aware, minutes

STARTUP_PREFIXES = (
    "startup-taint.cluster-autoscaler.kubernetes.io/",
    "ignore-taint.cluster-autoscaler.kubernetes.io/",  # cluster-autoscaler's older name for the same
)
STATUS_PREFIX = "status-taint.cluster-autoscaler.kubernetes.io/"
# Taints the control plane puts on every new node and lifts once it is set up: the node lifecycle
# controller's not-ready and unreachable (for a few seconds after Ready turns True), network-unavailable
# (until the CNI clears the NetworkUnavailable condition) and the cloud node controller's uninitialized
# (kubelet --cloud-provider=external). Karpenter takes a node carrying one as not initialized
# (kubernetes-sigs/karpenter pkg/scheduling/taints.go, KnownEphemeralTaints), cluster-autoscaler as not
# ready (utils/kubernetes/ready.go, GetNodeReadiness), which it counts as upcoming while young.
EPHEMERAL_TAINTS = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/network-unavailable",
        "node.cloudprovider.kubernetes.io/uninitialized",
    }
)


def is_startup_taint(key: str, config: PlannerConfig) -> bool:
    return key.startswith(STARTUP_PREFIXES) or key in config.startup_taints


def uninitialized(info: NodeInfo, group: NodeGroup | None, config: PlannerConfig) -> str | None:
    """Why a Ready node of a managed group cannot run its group's pods yet, or None."""
    if group is None or not info.ready:
        return None
    if info.taints:  # asked three times a node a plan: sorted only when one is found
        tainted = [key for key, _, _ in info.taints if is_startup_taint(key, config)]
        if tainted:
            return f"startup taint {', '.join(sorted(tainted))}"
        passing = {key for key, _, _ in info.taints if key in EPHEMERAL_TAINTS}
        if passing:
            return f"taint {', '.join(sorted(passing))} (the control plane lifts it once the node is set up)"
    missing = unregistered(info, group)
    if missing:
        return f"{', '.join(sorted(missing))} not registered yet (device plugin)"
    return None


def unregistered(info: NodeInfo, group: NodeGroup | None) -> dict[str, int]:
    """The extended resources (GPUs, ...) the group's template offers that the node does not show in its
    allocatable yet: its device plugin has not registered them. The one reader of it, for the node's
    start (:func:`uninitialized`) and for the cluster totals (``spillway.planner.limits.registered_shape``).
    Empty for a node the template does not describe: one of another type than the template's and a mixed
    group's overrides (:attr:`NodeGroup.other_type_instances`: a group whose launch template moved from
    m5 to g5 still running an m5), which will never have them."""
    template = group.template if group is not None else None
    if template is None or group is None or not _described(group, info):
        return {}
    return {
        r: v
        for r, v in template.allocatable.items()
        if "/" in r and v > 0 and info.allocatable.get(r, 0) <= 0
    }


def _described(group: NodeGroup, info: NodeInfo) -> bool:
    """A node of the template's type, or of one of a mixed group's overrides (the template holds the least
    of them, so each has at least its extended resources)."""
    if info.instance_id not in group.other_type_instances:
        return True
    return info.labels.get(INSTANCE_TYPE_LABEL) in group.instance_types


def starting(info: NodeInfo, group: NodeGroup | None, config: PlannerConfig, now: datetime) -> str | None:
    """Why the node is still starting (see the module docstring), or None: initialized, not Ready,
    unmanaged, or past ``max_node_startup_minutes``."""
    why = uninitialized(info, group, config)
    if why is None or info.created_at is None:
        return None
    age = now - aware(info.created_at)
    if age >= timedelta(minutes=config.max_node_startup_minutes):
        return None
    return f"Ready {minutes(age)} after launch, but not initialized: {why}"


def starting_nodes(
    nodes: Iterable[NodeInfo], groups: Sequence[NodeGroup], config: PlannerConfig, now: datetime
) -> dict[str, str]:
    """Node name -> why it is still starting, for every node that is."""
    by_instance = {iid: g for g in groups for iid in g.instance_ids}
    out = {}
    for info in nodes:
        group = by_instance.get(info.instance_id) if info.instance_id else None
        why = starting(info, group, config, now)
        if why is not None:
            out[info.name] = why
    return out


def sanitized(groups: Sequence[NodeGroup], config: PlannerConfig) -> list[NodeGroup]:
    """``groups`` whose template nodes carry no startup or status taint."""
    out = []
    for group in groups:
        template = group.template
        if template is not None and any(_transient(t[0], config) for t in template.taints):
            kept = tuple(t for t in template.taints if not _transient(t[0], config))
            group = replace(group, template=replace(template, taints=kept))
        out.append(group)
    return out


def _transient(key: str, config: PlannerConfig) -> bool:
    return is_startup_taint(key, config) or key.startswith(STATUS_PREFIX)
