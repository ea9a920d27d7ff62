"""What the planner decides, as data. Nothing here acts; the act layer reads it.

``ScalingPlan.to_dict()`` is the published plan contract (see DESIGN.md): ``scale_up``, ``uncordon``,
``drain``, ``pending`` and ``kept``, every entry with a reason; ``pending`` and ``kept`` entries also
carry a machine-readable ``code`` (:mod:`spillway.planner.codes`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spillway.model.groupkey import GroupKey
from spillway.model.state import State
from spillway.planner.codes import MAKE_ROOM


@dataclass(frozen=True, slots=True)
class GangLaunch:
    """New nodes of a scale-up that one gang needs all of: launch them together or not at all.

    A ProvisioningRequest's gang (``gang`` is ``<namespace>/<request>``) carries ``node_labels``: the
    label naming the request, which the launch puts on the new nodes once they are Ready.
    """

    gang: str  # "<namespace>/<pod group>"
    nodes: int
    pods: tuple[str, ...]
    node_labels: Mapping[str, str] = field(default_factory=dict)
    zone: str | None = None  # the one zone of a fleet group spanning several, when the gang needs one

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"gang": self.gang, "nodes": self.nodes, "pods": list(self.pods)}
        if self.node_labels:
            out["node_labels"] = dict(self.node_labels)
        if self.zone:
            out["zone"] = self.zone
        return out


@dataclass(frozen=True, slots=True)
class ProvisioningUpdate:
    """A ProvisioningRequest's next status: all its conditions (as ``metav1.Condition`` dicts) and its
    ``provisioningClassDetails``; the plan function writes it after the commit."""

    namespace: str
    name: str
    conditions: tuple[Mapping[str, Any], ...]
    details: Mapping[str, str] = field(default_factory=dict)
    uid: str = ""  # the request decided on: the write is for it, not for another made under its name
    version: str = "v1"  # the API version the request was read through: the write goes through it

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"conditions": [dict(c) for c in self.conditions]}
        if self.details:
            out["provisioningClassDetails"] = dict(self.details)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"request": self.key, **self.status()}


@dataclass(frozen=True, slots=True)
class ProvisioningDeletion:
    """A ProvisioningRequest that ended over a week ago, to delete (only the object of ``uid``)."""

    namespace: str
    name: str
    uid: str
    reason: str
    version: str = "v1"  # the API version the request was read through: the deletion goes through it

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def to_dict(self) -> dict[str, Any]:
        return {"request": self.key, "uid": self.uid, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class ScaleUp:
    group: str
    region: str
    from_size: int
    to_size: int
    pods: tuple[str, ...]
    reason: str
    gangs: tuple[GangLaunch, ...] = ()  # part of the new nodes, per gang (all or none)
    # new nodes per tenant whose pods opened them (the tenant the limits charge), sorted by tenant
    tenants: tuple[tuple[str, int], ...] = ()
    # capacity buffers' chunks placed on its new nodes, per buffer (BufferInfo.key), sorted by buffer
    buffers: tuple[tuple[str, int], ...] = ()

    @property
    def key(self) -> GroupKey:
        return GroupKey(self.region, self.group)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "group": self.group,
            "region": self.region,
            "from": self.from_size,
            "to": self.to_size,
            "pods": list(self.pods),
            "reason": self.reason,
        }
        if self.gangs:
            out["gangs"] = [g.to_dict() for g in self.gangs]
        if self.tenants:
            out["tenants"] = dict(self.tenants)
        if self.buffers:
            out["buffers"] = dict(self.buffers)
        return out


@dataclass(frozen=True, slots=True)
class Uncordon:
    """Take Spillway's cordon (and draining taint) off ``node``; ``cordon``: which cordon the plan saw
    there (:attr:`NodeInfo.cordon_digest`), so the scale-up's uncordon takes off that cordon and no other
    one that took the node over since (a Spot warning's drain); None when the snapshot did not keep it.
    ``tenant``: the tenant whose pending pods the node is reused for (the one the limits charge it to,
    :func:`~spillway.planner.scaleup.reused_by`); "" for an orphaned drain restored, or a node reused for
    a configured buffer."""

    node: str
    group: str
    reason: str
    cordon: str | None = None
    region: str = ""  # the group's
    tenant: str = ""

    @property
    def key(self) -> GroupKey:
        return GroupKey(self.region, self.group)

    def to_dict(self) -> dict[str, Any]:
        out = {"node": self.node, "group": self.group, "region": self.region, "reason": self.reason}
        if self.cordon is not None:
            out["cordon"] = self.cordon
        if self.tenant:
            out["tenant"] = self.tenant
        return out


@dataclass(frozen=True, slots=True)
class SoftTaint:
    """Add (``add``) or remove the scale-down candidate taint on a node (:mod:`spillway.planner.softtaint`)."""

    node: str
    add: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "add": self.add, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Unregistered:
    """An instance no Node joined for within ``max_node_provision_minutes`` (:mod:`spillway.planner.joins`):
    terminate it, decrementing the desired capacity (``decrement``), or, the group at its MinSize, not
    (the group launches a replacement)."""

    instance_id: str
    group: str
    region: str
    decrement: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance_id": self.instance_id,
            "group": self.group,
            "region": self.region,
            "decrement": self.decrement,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class GangOrphan:
    """A fleet-mode gang's instance left outside every group (:mod:`spillway.planner.gangsweep`):
    terminated (``terminate``), or left and reported because its Node runs work (``node`` names it)."""

    instance_id: str
    region: str
    gang: str
    attempt: str
    node: str | None
    terminate: bool
    code: str
    reason: str
    # its Node is NotReady: scale_down_unready_minutes, past which a pod that never started there is no
    # work; the sweep reads the Node again against it (spillway.act.gangsweep)
    unready_minutes: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "instance_id": self.instance_id,
            "region": self.region,
            "gang": self.gang,
            "attempt": self.attempt,
            "node": self.node,
            "terminate": self.terminate,
            "code": self.code,
            "reason": self.reason,
        }
        if self.unready_minutes is not None:  # only then, so other entries read exactly as before
            out["unready_minutes"] = self.unready_minutes
        return out


@dataclass(frozen=True, slots=True)
class Drain:
    node: str
    instance_id: str
    group: str
    region: str
    reason: str
    # codes.CONSOLIDATION / MAKE_ROOM for a drain that moves pods, EXPENDABLE_PODS for an idle node's that
    # evicts its expendable pods, NEVER_STARTED for a dead node's whose pods never started (it evicts its
    # expendable pods too, if any); "" for an empty node's
    code: str = ""
    pods: tuple[str, ...] = ()  # the pods it moves or evicts: the drain evicts these and no others
    # a NotReady node's drain: its group's scale_down_unready_minutes. The drain lets a pod that never
    # started go with the node while the node is still NotReady that long (planner.disruption.never_started)
    unready_minutes: float | None = None
    # (pod, kind, name, uid, priority): the controller of each pod in ``pods`` that tolerates the drain
    # (it goes with the node), and that pod's priority, so that the drain takes a pod of no higher
    # priority that controller makes in its place on the node as the same workload
    # (DrainRequest.controllers)
    controllers: tuple[tuple[str, str, str, str, int], ...] = ()
    # of ``pods``, those a consolidation or make room moves at a cost (not expendable, not terminating): its
    # drain evicts each with its whole grace or gives up (DrainRequest.whole_grace). Not in to_dict: the
    # plan reads as before; the drain's request carries it (spillway.act.planning.drain_item)
    whole_grace: tuple[str, ...] = ()

    @property
    def terminate(self) -> bool:
        """False for make-room: the node is kept and uncordoned once its pods are evicted, for pending pods."""
        return self.code != MAKE_ROOM

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "node": self.node,
            "instance_id": self.instance_id,
            "group": self.group,
            "reason": self.reason,
        }
        if self.code:  # only then, so an empty node's drain reads exactly as before
            out |= {"code": self.code, "pods": list(self.pods)}
        if self.controllers:  # only then, so a request reads as before for a drain function without it
            out["controllers"] = {
                pod: {"kind": kind, "name": name, "uid": uid, "priority": priority}
                for pod, kind, name, uid, priority in self.controllers
            }
        if self.unready_minutes is not None:
            out["unready_minutes"] = self.unready_minutes
        if not self.terminate:
            out["terminate"] = False
        return out


@dataclass(frozen=True, slots=True)
class PendingPod:
    pod: str
    reason: str
    code: str  # machine-readable, one of spillway.planner.codes

    def to_dict(self) -> dict[str, Any]:
        return {"pod": self.pod, "reason": self.reason, "code": self.code}


@dataclass(frozen=True, slots=True)
class KeptNode:
    node: str
    reason: str
    code: str  # machine-readable, one of spillway.planner.codes

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "reason": self.reason, "code": self.code}


@dataclass(frozen=True, slots=True)
class Placement:
    """Where the plan expects a pending pod to run.

    ``node`` is an existing node's name, or ``<group>/launching-<n>`` / ``<group>/new-<n>`` for a node
    that is launching or that this plan launches.
    """

    pod: str
    node: str
    group: GroupKey | None


@dataclass(frozen=True, slots=True)
class Unhealthy:
    """The cluster (``group`` None) or a group with too many unready nodes (:mod:`spillway.planner.health`):
    the cluster removes nothing, a group gets no new nodes."""

    group: str | None
    unready: int  # unready nodes past their start, plus instances that never joined
    nodes: int  # the nodes counted (registered, not being drained by Spillway)
    reason: str
    region: str = ""  # the group's

    @property
    def key(self) -> GroupKey | None:
        return None if self.group is None else GroupKey(self.region, self.group)

    def to_dict(self) -> dict[str, Any]:
        where = {} if self.group is None else {"region": self.region}
        return {
            "group": self.group,
            **where,
            "unready": self.unready,
            "nodes": self.nodes,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class RefusedGroup:
    """A managed group the plan neither grows nor drains, and why (:attr:`NodeGroup.refusal`: its
    capacity is not a count of instances). Its nodes are kept, its pods go to other groups."""

    group: str
    region: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "region": self.region, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """Configuration the plan could not read or apply, and went on without, as cluster-autoscaler
    does: the object, its field, and why (with what the plan did instead); ``kind`` is the metric the
    plan function counts it under (:data:`PROBLEM_KINDS`)."""

    object: str  # "ConfigMap kube-system/cluster-autoscaler-priority-expander"
    field: str  # "data.priorities"
    reason: str
    kind: str = "PriorityConfigMapInvalid"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "object": self.object, "field": self.field, "reason": self.reason}


# The kinds of a plan's problems, each the name of the metric that counts it per plan:
# cluster-autoscaler's priority expander ConfigMap unreadable (its Event reason), and a name in the
# configuration's disruption_budgets[].groups or tenants.<t>.scopes[].node_groups that no managed group has.
PRIORITY_CONFIGMAP_INVALID = "PriorityConfigMapInvalid"
UNKNOWN_GROUP_NAMES = "UnknownGroupNames"
# ... and the drains' deadline too short for a pod with the default grace to be moved at all, while a group
# consolidates when-underutilized (spillway.planner.core.drain_deadline_problem)
DRAIN_DEADLINE_TOO_SHORT = "DrainDeadlineTooShort"
PROBLEM_KINDS = (PRIORITY_CONFIGMAP_INVALID, UNKNOWN_GROUP_NAMES, DRAIN_DEADLINE_TOO_SHORT)
# a region whose Auto Scaling read failed (spillway.planner.unread): counted by observe, which saw it
# (RegionReadsFailed), not per plan
REGION_UNREAD = "RegionUnread"


@dataclass(frozen=True, slots=True)
class GroupFloor:
    """A group held above its own MinSize by a scheduled action that runs within the idle threshold."""

    group: str
    min_size: int
    reason: str
    region: str = ""  # the group's

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "region": self.region, "min_size": self.min_size, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class GroupShrink:
    """A scheduled action that lowers its group below the nodes it has within the idle threshold: the
    size it sets, the nodes this plan drains ahead of it, and the pods Auto Scaling may still kill."""

    group: str
    region: str
    size: int  # the DesiredCapacity or MaxSize the action sets
    reason: str
    drains: tuple[str, ...] = ()  # nodes this plan drains ahead of the action
    # pods on the nodes left above the size that Auto Scaling may pick (spillway.planner.scalein), none
    # of which could go first
    at_risk: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "region": self.region,
            "size": self.size,
            "drains": list(self.drains),
            "at_risk": list(self.at_risk),
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class BufferHold:
    """What an active capacity buffer holds in this plan (:func:`spillway.planner.buffers.settle`): of its
    ``replicas`` chunks, ``held`` in free room of existing nodes, ``launching`` on capacity launching or
    launched by this plan, ``short`` with no room at all; ``code`` (None when none is short) is the
    pending code most of the short chunks got, and ``reason`` says what it holds and, per code, why the
    rest has no room."""

    buffer: str  # BufferInfo.key: ns/name of a CapacityBuffer, config:<name> of a configured one
    replicas: int
    held: int
    launching: int
    short: int
    code: str | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "buffer": self.buffer,
            "replicas": self.replicas,
            "held": self.held,
            "launching": self.launching,
            "short": self.short,
            "code": self.code,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class ScalingPlan:
    scale_up: tuple[ScaleUp, ...] = ()
    uncordon: tuple[Uncordon, ...] = ()
    drain: tuple[Drain, ...] = ()
    pending: tuple[PendingPod, ...] = ()
    kept: tuple[KeptNode, ...] = ()
    state: State = field(default_factory=State)
    placements: tuple[Placement, ...] = ()
    provisioning: tuple[ProvisioningUpdate, ...] = ()  # ProvisioningRequest statuses that change
    provisioning_deleted: tuple[ProvisioningDeletion, ...] = ()  # requests that ended a week ago
    floors: tuple[GroupFloor, ...] = ()  # scheduled MinSize floors above the groups' own MinSize
    shrinks: tuple[GroupShrink, ...] = ()  # scheduled actions about to lower groups below their nodes
    soft_taint: tuple[SoftTaint, ...] = ()  # scale-down candidate taints to add or remove
    unregistered: tuple[Unregistered, ...] = ()  # instances that never joined, to remove
    gang_orphans: tuple[GangOrphan, ...] = ()  # fleet gang instances left outside every group
    unhealthy: tuple[Unhealthy, ...] = ()  # the cluster first, then groups, with too many unready nodes
    refused_groups: tuple[RefusedGroup, ...] = ()  # managed groups the plan does not scale, and why
    problems: tuple[ConfigProblem, ...] = ()  # cluster configuration it could not read, went on without
    buffers: tuple[BufferHold, ...] = ()  # each active capacity buffer: what it holds, what is short

    @property
    def acts(self) -> bool:
        swept = any(o.terminate for o in self.gang_orphans)
        return bool(self.scale_up or self.uncordon or self.drain or self.unregistered or swept)

    def to_dict(self) -> dict[str, Any]:
        """The plan contract: five lists, each entry with a reason; then the optional sections."""
        out: dict[str, Any] = {
            "scale_up": [s.to_dict() for s in self.scale_up],
            "uncordon": [u.to_dict() for u in self.uncordon],
            "drain": [d.to_dict() for d in self.drain],
            "pending": [p.to_dict() for p in self.pending],
            "kept": [k.to_dict() for k in self.kept],
        }
        optional: dict[str, tuple[Any, ...]] = {  # shown only when they have entries
            "provisioning": self.provisioning,
            "provisioning_deleted": self.provisioning_deleted,
            "floors": self.floors,
            "shrinks": self.shrinks,
            "soft_taint": self.soft_taint,
            "unregistered": self.unregistered,
            "gang_orphans": self.gang_orphans,
            "unhealthy": self.unhealthy,
            "refused_groups": self.refused_groups,
            "problems": self.problems,
            "buffers": self.buffers,
        }
        return out | {key: [e.to_dict() for e in entries] for key, entries in optional.items() if entries}
