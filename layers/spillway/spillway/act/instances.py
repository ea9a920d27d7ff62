"""EC2 instances and the Nodes on them, as the act steps look them up live.

EKS names a Node after its instance's private DNS name, and the Node's ``spec.providerID`` names the
instance: :func:`nodes_on` finds a Node that way. :func:`where_gone` says when an instance is no longer
one to act on (out of its group, or terminating already). Used by the scale-up and gang launch checks,
the drain's terminate and the removal of instances that never joined.
"""

from __future__ import annotations

from collections.abc import Sequence

from spillway.errors import NodeNotFound
from spillway.model.cluster import instance_id_from_provider_id
from spillway.model.drain import Placement
from spillway.model.k8s import Node
from spillway.ports import Cloud, Cluster


def nodes_on(kube: Cluster, cloud: Cloud, region: str, instance_ids: Sequence[str]) -> dict[str, Node]:
    """Instance id → the Node named after its private DNS name, for those of ``instance_ids`` that have
    one, unless that Node's ``spec.providerID`` names another instance. (A providerID that names no
    instance at all is not told apart: callers that need the instance named say so.)"""
    if not instance_ids:
        return {}
    found: dict[str, Node] = {}
    for iid, dns in cloud.private_dns_names(region, instance_ids).items():
        if not dns:
            continue
        try:
            node = kube.get_node(dns)
        except NodeNotFound:
            continue
        if instance_id_from_provider_id(node.spec.provider_id) in (iid, None):
            found[iid] = node
    return dict(sorted(found.items()))


def ready_nodes(kube: Cluster, cloud: Cloud, region: str, instance_ids: Sequence[str]) -> dict[str, str]:
    """Instance id → name of the Ready Node it runs, whose providerID names it."""
    return {
        iid: node.metadata.name
        for iid, node in nodes_on(kube, cloud, region, instance_ids).items()
        if node.is_ready() and instance_id_from_provider_id(node.spec.provider_id) == iid
    }


def where_gone(placement: Placement | None, instance_id: str, group: str, region: str) -> str | None:
    """Where the instance is, when that is no longer in ``group`` or already terminating; else None."""
    if placement is None or placement.group != group:
        return f"no longer in Auto Scaling group {group} ({region})"
    if placement.lifecycle_state.startswith("Terminat"):
        return f"{placement.lifecycle_state} in {group} ({region})"
    return None
