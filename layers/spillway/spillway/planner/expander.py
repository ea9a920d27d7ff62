"""Stage 3: the expander — which node groups get new nodes for a class, best first.

:func:`options` says which groups could ever run the class (a template node, constraints that allow
it, enough room on an empty node) and why each other group cannot; an :class:`Expander` orders the
groups that can. :class:`RegionThenLeastWaste` is the default: region preference (configured order),
then groups without accelerators first for pods that ask for none (:func:`idle_accelerators`),
then spot groups first for pods that may move and on-demand groups first for the rest, then least
waste of the class's dominant resource on the nodes it would need, then a group whose warm pool holds
the nodes the class needs (warm instances start faster; those the plan's earlier classes take in the
group are not offered again), then name. Within a region,
``expander_priorities`` (cluster-autoscaler's priority expander) ranks groups before all of that.
Another strategy (price) is another class with the same methods.

A gang whose new nodes all come from one group (a best-effort-atomic ProvisioningRequest) is ranked
whole (:meth:`RegionThenLeastWaste.whole_key`): one :class:`WholeOption` per group that takes every
pod, the waste and warm pool judged on all its new nodes and all the pods they get, as
cluster-autoscaler's expanders judge an expansion option (kubernetes/autoscaler cluster-autoscaler/
core/scaleup/orchestrator/orchestrator.go ``ScaleUp``; expander/waste/waste.go ``BestOption``).

Spot: a group whose next launch may be spot (:meth:`NodeGroup.launch_capacity_type`, after the nodes
this plan opens in it already; a mixed group is on-demand only while its ``OnDemandBaseCapacity`` is not
filled) runs only pods that may move (:func:`spillway.planner.disruption.assess_move`), or pods that
tolerate a spot taint the group declares (:func:`declares_spot_taint`: one of :data:`SPOT_TAINTS` with
effect NoSchedule or NoExecute, which keeps out every pod that does not tolerate it, so those that pass
the group's taints opted in): an interruption can take the node at two minutes' notice.
:func:`on_demand_cap` keeps the other pods within the on-demand launches left.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from spillway.model.groupkey import GroupKey
from spillway.model.nodegroup import NodeGroup
from spillway.model.resources import (
    AMD_GPU,
    NEURON,
    NEURON_CORE,
    NVIDIA_GPU,
    Resources,
    describe,
    dominant_share,
    fit_count,
    unchecked_when_unknown,
)
from spillway.planner.classes import PodClass
from spillway.planner.context import Context
from spillway.planner.groups import fresh_node_ports, fresh_node_selected, fresh_port_holders, why_not_movable
from spillway.planner.topology import UNBOUNDED, port_taken

# The taints that say "this node is Spot", by key: the values that do (None: a taint with no value).
# The capacity-type keys Karpenter and EKS managed node groups label nodes with, and the plain ``spot``
# key that Spot node pools are commonly tainted with.
SPOT_TAINTS: Mapping[str, frozenset[str | None]] = {
    "karpenter.sh/capacity-type": frozenset({"spot"}),
    "eks.amazonaws.com/capacityType": frozenset({"SPOT"}),
    "spot": frozenset({"true", None}),
}
# Only these keep a pod that does not tolerate the taint off the node; PreferNoSchedule is a preference
# the scheduler may ignore (Kubernetes, taints and tolerations), so it keeps nothing off a Spot node.
HARD_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
# The accelerators a node may offer: the GPUs and Neuron devices (and cores) their device plugins register.
ACCELERATORS = (NVIDIA_GPU, AMD_GPU, NEURON, NEURON_CORE)


@dataclass(frozen=True, slots=True)
class Option:
    """A group that can run the class: ``per_node`` pods fit on one of its empty nodes."""

    group: NodeGroup
    empty: Resources
    per_node: int


@dataclass(frozen=True, slots=True)
class WholeOption:
    """What one group would launch for a whole gang whose new nodes all come from one group (a
    best-effort-atomic ProvisioningRequest), as cluster-autoscaler's ``expander.Option`` holds a node
    group, its ``NodeCount`` and its ``Pods``: ``nodes`` new nodes of ``group``, each with the room
    ``empty``, for pods requesting ``requests`` in all. ``movable``: every pod of the gang may move (so
    may run on spot); ``warm``: the group's warm instances the plan's earlier classes leave.

    ``nodes`` 0 is an option not known yet: it ranks as the best it could be (no waste, warm), which is
    what lets the scale-up skip the groups that cannot beat one it has (:meth:`Expander.whole_key`)."""

    group: NodeGroup
    nodes: int
    requests: Resources
    empty: Resources
    movable: bool
    warm: int


class Expander(Protocol):
    def order(self, ctx: Context, cls: PodClass, choices: Sequence[Option]) -> list[NodeGroup]: ...

    def whole_key(self, ctx: Context, option: WholeOption) -> tuple[Any, ...]:
        """The whole option's rank, lowest best. It must not fall as ``option.nodes`` grows (all else
        equal), and an option of 0 nodes must rank no worse than any of its group with more: the
        scale-up ranks groups by a lower bound on their nodes before it tries them."""
        ...


class RegionThenLeastWaste:
    """Preferred region first, then the groups cluster-autoscaler's priority expander ranks highest
    (``expander_priorities``), then a group without accelerators for pods that ask for none, then the
    capacity type the class should use, then the group the class fills best, then a group whose warm
    instances hold it, then the group's name."""

    def order(self, ctx: Context, cls: PodClass, choices: Sequence[Option]) -> list[NodeGroup]:
        movable = class_not_movable(ctx, cls) is None if any(o.group.spot for o in choices) else False
        keyed = [
            (
                _rank(
                    ctx,
                    o.group,
                    movable,
                    _waste(cls, o),
                    warm_fits(ctx, cls, o),
                    idle=idle_accelerators(cls.requests, o.empty),
                ),
                o.group,
            )
            for o in choices
        ]
        keyed.sort(key=lambda kv: kv[0])
        return [group for _, group in keyed]

    def whole_key(self, ctx: Context, option: WholeOption) -> tuple[Any, ...]:
        """As :meth:`order` ranks a class's groups, but the waste is that of all the option's new nodes
        with all the pods they get (a gang of two pod sets may waste least on a group that wastes more
        for its first set alone), and the warm pool must hold all its new nodes."""
        known = option.nodes > 0
        waste = waste_of(option.requests, option.empty, option.nodes) if known else 0.0
        warm = not known or option.nodes <= option.warm
        idle = known and idle_accelerators(option.requests, option.empty)
        return _rank(ctx, option.group, option.movable, waste, warm, idle=idle)


def _rank(
    ctx: Context, group: NodeGroup, movable: bool, waste: float, warm: bool, *, idle: bool
) -> tuple[Any, ...]:
    """Region, priority, accelerators left idle, capacity type (spot first for pods that may move, else
    on-demand), least waste, warm pool, name: the key both of :class:`RegionThenLeastWaste`'s rankings
    sort by."""
    return (
        ctx.region_key(group),
        -ctx.group_priority(group),
        idle,
        group.spot is not movable,
        round(waste, 6),
        not warm,
        group.name,
    )


def idle_accelerators(requests: Mapping[str, int], empty: Mapping[str, int]) -> bool:
    """A new node with the room ``empty`` offers accelerators (:data:`ACCELERATORS`) and pods asking
    ``requests`` ask for none: its GPUs, the dearest part of it, would sit unused. Least waste judges the
    class's dominant resource only, and a small GPU type can waste a hair less CPU than a CPU type, so
    such groups come after those without accelerators (they still take the pods no other group can).
    Karpenter launches the cheapest type that fits; cluster-autoscaler's price expander gives any group
    with GPUs an unfitness of 1000 (expander/price/price.go, ``gpuUnfitnessOverride``)."""
    offers = any(empty.get(name, 0) > 0 for name in ACCELERATORS)
    return offers and not any(requests.get(name, 0) > 0 for name in ACCELERATORS)


def warm_fits(ctx: Context, cls: PodClass, option: Option) -> bool:
    """The group's warm pool holds every new node the class's remaining pods need, after the new nodes
    this plan already opens in the group (earlier classes) have taken theirs."""
    warm = option.group.warm_instances - ctx.new_nodes.get(option.group.key, 0)
    return warm > 0 and math.ceil(cls.remaining / max(option.per_node, 1)) <= warm


def declares_spot_taint(group: NodeGroup) -> bool:
    """The group's template carries a Spot taint (:data:`SPOT_TAINTS`) that keeps out every pod not
    tolerating it (:data:`HARD_EFFECTS`): the pods that pass the group's taints opted in to Spot."""
    taints = group.template.taints if group.template else ()
    return any(
        effect in HARD_EFFECTS and value in SPOT_TAINTS.get(key, frozenset()) for key, value, effect in taints
    )


def class_not_movable(ctx: Context, cls: PodClass) -> str | None:
    """Why some pod of the class may not be moved (so must not run on spot), or None when all may.
    Classes are split by movability when the cluster has spot groups (:mod:`~spillway.planner.classes`)."""
    pending = {p.key: p for p in ctx.pending} if any(k not in ctx.movable for k in cls.pods) else {}
    for key in cls.pods:
        pod = pending.get(key)
        why = why_not_movable(ctx, pod) if pod is not None else ctx.movable.get(key, "a pod not created yet")
        if why is not None:
            return f"{key}: {why}"
    return None


def _waste(cls: PodClass, option: Option) -> float:
    """The share of the dominant resource left unused on the nodes the remaining pods would need."""
    total = {name: value * cls.remaining for name, value in cls.requests.items()}
    return waste_of(total, option.empty, math.ceil(cls.remaining / option.per_node))


def waste_of(requests: Resources, empty: Resources, nodes: int) -> float:
    """The share of the dominant resource of ``requests`` (pods' requests, summed) left unused on
    ``nodes`` empty nodes with the room ``empty``."""
    dominant, _ = dominant_share(requests, empty)
    capacity = nodes * empty.get(dominant, 1)
    return 1.0 - requests.get(dominant, 0) / capacity if capacity else 1.0


def options(
    ctx: Context, cls: PodClass, empty: Mapping[GroupKey, Resources], zone: str | None = None
) -> tuple[list[Option], dict[GroupKey, str]]:
    """Groups whose template could run the class; and why each other group cannot. ``zone``: the one
    zone new nodes are kept to (a gang's fleet), where a group spanning it is judged."""
    fitting: list[Option] = []
    rejected: dict[GroupKey, str] = {}
    for group in ctx.groups:
        why = (
            _rejection(
                cls,
                group,
                empty[group.key],
                fresh_node_selected(ctx, group),
                zone,
                fresh_node_selected(ctx, group, sure=True),
            )
            or _spread_key_rejection(ctx, cls, group)
            or _fresh_spread_rejection(ctx, cls, group)
            or _port_rejection(ctx, cls, group)
            or _spot_rejection(ctx, cls, group)
        )
        if why is not None:
            rejected[group.key] = f"{group.name}: {why}"
        else:
            cap = cls.domains.new_node_cap(fresh_node_selected(ctx, group))
            fitting.append(Option(group, empty[group.key], cls.fit_with(empty[group.key], cap)))
    for group in ctx.refused:  # why a group that might have run it does not
        template = group.template
        # without a template, the refusal says why (a node-template tag it cannot read, say): the
        # template's absence is its effect, not its cause
        why = _rejection(cls, group, template.allocatable) if template is not None else None
        rejected[group.key] = f"{group.name}: {why or f'not scaled by Spillway: {group.refusal}'}"
    return fitting, rejected


def _spread_key_rejection(ctx: Context, cls: PodClass, group: NodeGroup) -> str | None:
    """Why a new node of ``group`` cannot take the class for its DoNotSchedule topology spreads: it will
    not carry a key one of them spreads over (:meth:`~spillway.planner.topology.Domains.missing_on_new_node`)."""
    template = group.template
    if template is None or not cls.domains.spread_keys:
        return None
    key = cls.domains.missing_on_new_node(template.labels, ctx.group_label_keys(group))
    if key is None:
        return None
    return (
        f"its nodes carry no {key} label (no node-template label tag, no node of the group has it), "
        "which the pods' topology spread needs: kube-scheduler refuses a node without it"
    )


def _fresh_spread_rejection(ctx: Context, cls: PodClass, group: NodeGroup) -> str | None:
    """Why a new node of ``group`` takes no pod of the class for its hostname topology spread: the
    pods the node runs first (its DaemonSets') that the spread selects fill the skew it allows there
    (:meth:`~spillway.planner.topology.Domains.new_node_cap`)."""
    if not cls.domains.host_spreads or cls.domains.new_node_cap(fresh_node_selected(ctx, group)) > 0:
        return None
    return (
        "its topology spread over kubernetes.io/hostname counts the pods each new node runs first (a "
        "DaemonSet's it selects), which leave it no room within maxSkew"
    )


def _port_rejection(ctx: Context, cls: PodClass, group: NodeGroup) -> str | None:
    """Why a new node of ``group`` cannot take the class for the node ports it asks: a DaemonSet or
    static pod the node runs anyway holds one (:func:`~spillway.planner.groups.fresh_node_ports`),
    named (:func:`~spillway.planner.groups.fresh_port_holders`)."""
    ports = cls.domains.marks.ports
    taken = port_taken(ports, fresh_node_ports(ctx, group)) if ports else None
    if taken is None:
        return None
    holders = ", ".join(fresh_port_holders(ctx, group, ports, taken))
    return f"host port {taken} is taken on its nodes by a DaemonSet or static pod each runs ({holders})"


def _spot_rejection(ctx: Context, cls: PodClass, group: NodeGroup) -> str | None:
    opened = ctx.new_nodes.get(group.key, 0)
    if group.launch_capacity_type(1, opened) == "on-demand" or declares_spot_taint(group):
        return None
    why = class_not_movable(ctx, cls)
    if why is None:
        return None
    base = f" (OnDemandBaseCapacity {group.on_demand_base} filled)" if group.on_demand_base else ""
    return f"a spot group{base} runs only pods that may move or tolerate a spot taint it declares ({why})"


def spot_reuse_refusal(ctx: Context, cls: PodClass, group: NodeGroup | None) -> str | None:
    """Why the class may not be given back a node of ``group`` that Spillway cordoned for a drain (an
    uncordon places it there as surely as a launch), or None. The spot rule of a launch holds: a node
    that may be spot runs only pods that may move, unless the group declares a spot taint. Any node of a
    group that may launch spot may be spot, within its ``OnDemandBaseCapacity`` too: EC2 launches the
    base first, as on-demand, but scale-down drains the oldest idle nodes first, so after a scale-in
    the base's instances may be the ones gone; which of a mixed group's instances are spot
    DescribeAutoScalingGroups does not say."""
    if group is None or group.capacity_type != "spot":
        return None
    if declares_spot_taint(group):
        return None
    return class_not_movable(ctx, cls)


def on_demand_cap(ctx: Context, cls: PodClass, group: NodeGroup) -> int | None:
    """How many new nodes of ``group`` the class may open: None (no cap) unless the group launches spot
    beyond its on-demand base and some pod of the class must not run on spot; then the on-demand
    launches left."""
    sure = group.sure_on_demand(ctx.new_nodes.get(group.key, 0))
    if sure is None or declares_spot_taint(group) or class_not_movable(ctx, cls) is None:
        return None
    return sure


def _rejection(
    cls: PodClass,
    group: NodeGroup,
    empty: Resources,
    fresh: Sequence[frozenset[int]] = (),
    zone: str | None = None,
    joined: Sequence[frozenset[int]] = (),
) -> str | None:
    """Why a new node of ``group`` (with the room ``empty``, running first pods the terms ``fresh``
    select, or surely those ``joined`` select, in ``zone`` when its launch is kept to one) cannot run
    the class, or None."""
    template = group.template
    if template is None:
        return "instance type unknown, no template node"
    blocker = cls.blocker_on_new(group, fresh, zone, joined)
    if blocker is not None:
        return blocker
    if fit_count(cls.requests, empty, UNBOUNDED) > 0:
        return None
    short = [  # a resource the template does not know and fit_count does not check is not short
        r
        for r in sorted(cls.requests)
        if cls.requests[r] > 0
        and empty.get(r, 0) < cls.requests[r]
        and (r in empty or not unchecked_when_unknown(r))
    ]
    node = (
        f"a {group.instance_type} node"
        if len(group.launch_types()) <= 1
        else f"a node it may launch ({group.types_text()})"
    )
    if template.source or template.forgotten:  # remembered from a node gone, or not (model.nodecache)
        node += f" ({template.source or template.forgotten})"
    return f"{node} has too little {', '.join(short) or 'room'} (needs {describe(cls.requests, short)})"
