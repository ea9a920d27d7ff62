"""A coscheduling PodGroup's ``spec.minResources``: room the whole cluster must have free for its pods.

scheduler-plugins' coscheduling checks it in PreFilter (kubernetes-sigs/scheduler-plugins
pkg/coscheduling/core/core.go, ``PodGroupManager.PreFilter`` and ``CheckClusterResource``): a pod of a
PodGroup that sets ``minResources`` is refused (Unschedulable) unless the free room of every node the
scheduler knows, summed, covers ``minResources`` and ``minMember`` pod slots (the plugin sets the
``pods`` entry to ``minMember``). A node's free room there is its allocatable less the requests, and
the pod slots, of the pods bound or assumed on it, the group's own pods not counted
(``getNodeResource`` takes them off); every node counts, whatever its labels, taints or cordon, and
only the resources ``minResources`` names are compared. Nothing but ``minResources`` being set turns
the check on; a group that passed it is let through for the plugin's permit window without another
(60 s by default), which ends before a node launched now joins: members placed one by one (a
started gang's, :class:`spillway.planner.scaleup.MemberPlacement`) are checked as a gang is.

So the nodes a gang's pods fill may not be enough: two 4-GPU pods whose PodGroup asks
``nvidia.com/gpu: 12`` get two 4-GPU nodes, and coscheduling keeps both pods off them until 4 more GPUs
are free somewhere. Scale-up (:class:`spillway.planner.scaleup.GangPlacement`) asks :func:`balance`
what the cluster would still lack once its placements and new nodes are in, and opens that much more
with the gang, or places none of it. What the room has beyond it once every pod is placed is the
gang's slack (``Context.min_room_slack``): scale-down drains no node whose room would take it below
zero (:func:`spends`), and the plan makes no room while a gang has one. Pure: the snapshot's gangs and
the plan's own numbers only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from spillway.model.cluster import PodInfo
from spillway.model.resources import PODS, Resources, add_into, unchecked_when_unknown
from spillway.planner.context import ONE_POD, Context


def min_room(ctx: Context, gang: str) -> Resources:
    """What coscheduling asks the cluster to have free for ``gang``: its PodGroup's ``minResources``
    and ``minMember`` pod slots; {} when it is no coscheduling PodGroup or sets no ``minResources``."""
    for info in ctx.snapshot.gangs:
        if info.key == gang and info.source == "coscheduling" and info.min_resources:
            return {**info.min_resources, PODS: info.min_member * ONE_POD}
    return {}


def bound_own(pods: Iterable[PodInfo], gang: str) -> dict[str, Resources]:
    """Per node, what the pods of coscheduling group ``gang`` bound there take (requests and pod slot):
    room coscheduling counts as free for the group (``getNodeResource`` removes every pod of the
    group's full name, ``<namespace>/<label>``, from a copy of the node before it subtracts). Every
    pod on a node counts there, terminating ones too, but not a Succeeded or Failed one, which the
    scheduler's pod informer does not list: as the plan's room of each node charges them."""
    out: dict[str, Resources] = {}
    for pod in pods:
        if pod.gang == gang and pod.coscheduled and pod.node_name is not None and not pod.terminal:
            taken = out.setdefault(pod.node_name, {})
            add_into(taken, pod.requests)
            taken[PODS] = taken.get(PODS, 0) + ONE_POD
    return out


def balance(
    need: Mapping[str, int], rooms: Iterable[tuple[Mapping[str, int], int]], own: Mapping[str, int]
) -> Resources:
    """How far the free ``rooms`` (each a node's free room and how many such nodes) and the gang's
    ``own`` placed requests (coscheduling does not count them as taken) go beyond ``need``, per
    resource it names: negative where they fall short. A resource some room does not report is unknown
    there (:data:`UNCHECKED_WHEN_UNKNOWN`: ephemeral storage a template node does not declare) and is
    left out, not held against the gang; any other resource a room does not report is none."""
    have: Resources = {name: own.get(name, 0) for name in need}
    unknown: set[str] = set()
    for free, count in rooms:
        for name in need:
            if name in free:
                have[name] += free[name] * count
            elif unchecked_when_unknown(name):
                unknown.add(name)
    return {name: have[name] - value for name, value in sorted(need.items()) if name not in unknown}


def spends(slack: Mapping[str, int], gone: Mapping[str, int]) -> list[str]:
    """The resources of a gang's ``slack`` (:func:`balance`, what the plan leaves beyond its
    ``minResources``) that losing ``gone`` would take below zero, or further below: the node giving it
    must stay. A node that gives none of a resource spends none of it."""
    return [name for name, value in slack.items() if gone.get(name, 0) > max(value, 0)]
