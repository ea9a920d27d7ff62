"""Limits on what scale-up may add: per tenant, cluster totals, and CapacityQuotas.

One component the scale-up stage asks before opening nodes: "how many nodes of group G may this class
of tenant T open?" (:meth:`Limits.allowed`), then tells what it opened (:meth:`Limits.charge`). Every
limit is a :class:`Constraint`: a ceiling on summed resources (and ``nodes``) of the nodes it covers.
All constraints are checked together, so where a configured limit and a CapacityQuota cover the same
nodes the tighter one binds. The cluster totals' minimums bound scale-down instead (:class:`Floors`,
asked by the scale-down stage before it removes a node).

Charging (README "Tenants, limits and gangs"):

- a new node is charged wholly to the tenant whose pods opened it;
- an existing node of a managed group is charged to the tenants of its pods (DaemonSet, mirror and
  expendable pods excluded) (:class:`NodeUse`): each tenant is charged what its pods request of each
  resource (a slot per pod, for ``pods``), and of what no pod requests, and of ``nodes``, its part of
  the node: its dominant share (the largest fraction of one resource of the allocatable, slots
  included, its pods request) over the sum of every tenant's there. So the parts add up to the node,
  and no tenant is charged less than its pods hold, also where they hold more than the node lists (a
  GPU marked unhealthy leaves the allocatable, not the pod). Example: on a 4-GPU node of 47.81 cores, a
  4-GPU pod requesting no CPU is charged the GPUs and 0.98 of the node and of the 46.81 cores no pod
  requests; another tenant's 1-CPU pod its core and 0.02 of them. (Charged by CPU requests alone, as
  before, the GPU pod's tenant was charged nothing and opened past its GPU limit; README "Tenants,
  limits and gangs" says why not the other rules tried.)
- cluster totals and CapacityQuotas count every node, plus capacity still launching (desired minus
  Ready, as the group's template node; as one node each, nothing more, in a group without one),
  whoever opened it;
- a CapacityQuota counts each node's ``status.capacity`` (the sig-autoscaling API: "summing up
  resources reported in the status.capacity field of each node"; a new node's is its template's
  capacity), and so do ``cores_total`` and ``memory_total`` (cluster-autoscaler's scale-up resource
  manager reads cores and memory from ``status.capacity``); tenant limits and ``gpu_total`` count
  allocatable (cluster-autoscaler counts a node's GPUs from its allocatable), ``max_nodes_total`` nodes;
  ``gpu_total`` counts a node of a managed group that reports no GPUs yet with its group's template's
  (:func:`registered_shape`, as cluster-autoscaler does); tenant limits and CapacityQuotas do not: a
  tenant is charged what its pods may use, and the template's GPUs when its pods take such a node as
  capacity launching (:func:`spillway.planner.placement.place_on_launching`), and the API defines a
  quota's usage as the nodes' ``status.capacity``;
- capacity still launching is charged to no tenant until a plan places a tenant's pods there: a
  launching node a limited tenant's class is the first to take is charged to that tenant, within its
  limits (else a tenant held at its limit would take the nodes another tenant's pods are waiting for,
  and the other tenant open more: the limit leaked by a node per plan while nodes boot).
- a Ready node nobody is charged for yet (no pods bound) is charged wholly to the tenant whose pending
  pods the plan places there first (:meth:`Limits.claim`), so plans taken before the scheduler binds
  cannot add past a tenant's limit. A node Spillway cordoned and uncordons for the tenant's pods is
  charged so too, and is given them only within the tenant's limits (:meth:`Limits.claim_refusal`):
  uncordoning is the reuse Spillway makes before launching, so it adds a node as a launch does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from fractions import Fraction
from itertools import product
from typing import Any

from spillway.config import LimitScope, PlannerConfig, parse_gpu_range, parse_range
from spillway.model.cluster import EBS_ZONE_LABEL, ZONE_ID_LABEL, ZONE_LABEL, NodeInfo
from spillway.model.groupkey import GroupKey
from spillway.model.nodegroup import INSTANCE_TYPE_LABEL, KARPENTER_NODE_LABELS, NodeGroup
from spillway.model.quantity import format_milli
from spillway.model.resources import CPU, MEMORY, PODS, Resources, add_into, is_attach_limit
from spillway.model.shared import NODES, LabelRequirement, QuotaInfo, selector_matches
from spillway.planner import codes
from spillway.planner.context import Context, WorkNode, aware
from spillway.planner.groups import launches_failing
from spillway.planner.startup import unregistered

ONE_NODE = 1000
GIB_MILLI = 2**30 * 1000
ACCELERATOR_LABEL = "k8s.amazonaws.com/accelerator"
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
GPU = "gpu"  # a gpu_total constraint's measure: the node's GPUs of the listed kinds

Measure = Callable[[Mapping[str, int]], Resources]


@dataclass(frozen=True, slots=True)
class Shape:
    """One node as the limits count it: its allocatable, and its ``status.capacity`` (each with
    ``nodes``: one node); ``gpu_target``: its allocatable with the GPUs it will have once its device
    plugin registers them (:func:`registered_shape`), what ``gpu_total`` counts."""

    allocatable: Mapping[str, int]
    capacity: Mapping[str, int]
    gpu_target: Mapping[str, int]


def node_shape(
    allocatable: Mapping[str, int], capacity: Mapping[str, int], gpu_target: Mapping[str, int] | None = None
) -> Shape:
    vector = node_vector(allocatable)
    target = vector if gpu_target is None or gpu_target is allocatable else node_vector(gpu_target)
    return Shape(vector, vector if capacity is allocatable else node_vector(capacity), target)


def registered_shape(info: NodeInfo, group: NodeGroup | None) -> Shape:
    """A registered node as the limits count it: the one reader of a node's GPUs for the totals.

    A GPU node registers (and goes Ready) before its device plugin publishes its GPUs. As
    cluster-autoscaler counts GPUs for ``--gpu-total`` (``GetNodeGpuTarget``,
    ``processors/customresources/gpu_processor.go``, in its scale-up resource manager and scale-down
    limits): a node that reports no GPUs of the vendors' resources in its allocatable, of a managed
    group whose template has some, counts its template's (cluster-autoscaler asks this of nodes with its
    GPU label, ``k8s.amazonaws.com/accelerator`` on AWS, which a label-kind total selects; a
    resource-named total has no label, and the template alone says the node has GPUs:
    :func:`spillway.planner.startup.unregistered`, which also says when a node is still starting). A
    node one its group's template does not describe counts what it reports, and so does a node of no
    managed group: with GPUs reported, or without the GPU label. One of no managed group with the label
    and no GPUs has no template to count from (:func:`gpus_unknown`): cluster-autoscaler fails the count
    (``GetNodeGpuTarget``: "node without with gpu label, without capacity not belonging to autoscaled
    node group") and its scale-up takes every GPU limit as unknown, growing no GPU group while the node
    is so; :class:`Limits` does the same for the totals that would count the node
    (:attr:`Constraint.unknown`). Tenant limits and CapacityQuotas do not read this (see the module
    docstring)."""
    reported = info.allocatable
    if any(reported.get(r, 0) > 0 for r in GPU_RESOURCES):
        return node_shape(reported, info.capacity)
    promised = {r: v for r, v in unregistered(info, group).items() if r in GPU_RESOURCES}
    return node_shape(reported, info.capacity, {**reported, **promised} if promised else None)


def gpus_unknown(info: NodeInfo, group: NodeGroup | None) -> str | None:
    """Why the GPUs a node will have cannot be counted, or None: it carries the GPU label (the AWS
    cloud provider's, :data:`ACCELERATOR_LABEL`), reports no GPUs of the vendors' resources, and is of
    no managed group, whose template would say how many (cluster-autoscaler's ``GetNodeGpuTarget``
    errors on such a node: ``processors/customresources/gpu_processor.go``)."""
    if group is not None or ACCELERATOR_LABEL not in info.labels:
        return None
    if any(info.allocatable.get(r, 0) > 0 for r in GPU_RESOURCES):
        return None
    return (
        f"node {info.name} has the GPU label {ACCELERATOR_LABEL} but no GPUs registered yet, "
        "and no managed group's template says how many it will have"
    )


def _whole(vector: Mapping[str, int]) -> Resources:
    return dict(vector)


def _gpus(vector: Mapping[str, int]) -> Resources:
    return {GPU: sum(vector.get(r, 0) for r in GPU_RESOURCES)}


@dataclass(slots=True)
class Constraint:
    """At most ``limits`` (milli-units; ``nodes`` counts nodes) on the nodes it covers."""

    name: str  # for reasons: "tenant team-a", "cluster max_nodes_total", "CapacityQuota gpu-cap"
    code: str
    limits: Resources
    tenant: str | None = None  # None: every tenant's nodes (and nobody's)
    groups: frozenset[str] = frozenset()  # empty: any group
    selector: Callable[[Mapping[str, str]], bool] = lambda labels: True
    measure: Measure = _whole
    # counts the nodes' status.capacity (a CapacityQuota, cores_total, memory_total), else allocatable
    on_capacity: bool = False
    # counts a node's GPUs not registered yet (gpu_total: Shape.gpu_target)
    gpu_target: bool = False
    used: Resources = field(default_factory=dict)
    # why what it covers cannot be counted (a gpu_total over a node whose GPUs are unknown:
    # gpus_unknown): no node that counts against it opens, as cluster-autoscaler's scale-up takes such a
    # limit as unknown (core/scaleup/resource/manager.go, LimitUnknown: exceeded for any delta above 0)
    unknown: str | None = None
    # ``selector`` as label requirements (a CapacityQuota's, a tenant scope's), so that a new node whose
    # value for a key is not known can be judged by the others (:meth:`may_cover`); None: not known
    requirements: tuple[LabelRequirement, ...] | None = None

    def vector(self, shape: Shape) -> Resources:
        """What one node of ``shape`` counts against this constraint."""
        if self.on_capacity:
            return self.measure(shape.capacity)
        return self.measure(shape.gpu_target if self.gpu_target else shape.allocatable)

    def covers(self, tenant: str | None, group: NodeGroup | None, labels: Mapping[str, str]) -> bool:
        return self._in_scope(tenant, group) and self.selector(labels)

    def may_cover(
        self, tenant: str | None, group: NodeGroup, labels: Mapping[str, str], unsure: frozenset[str]
    ) -> bool:
        """Whether a new node with ``labels`` may be one this covers, where it will carry each key of
        ``unsure`` with a value not known: ``In`` or ``NotIn`` on such a key may hold, ``Exists`` holds,
        ``DoesNotExist`` does not; the other requirements judge (a ceiling must hold whatever the value
        turns out to be)."""
        if not unsure or self.requirements is None:
            return self.covers(tenant, group, labels)
        if any(key in unsure and operator == "DoesNotExist" for key, operator, _ in self.requirements):
            return False
        kept = [r for r in self.requirements if r[0] not in unsure]
        return self._in_scope(tenant, group) and selector_matches(kept, labels)

    def _in_scope(self, tenant: str | None, group: NodeGroup | None) -> bool:
        if self.tenant is not None and tenant != self.tenant:
            return False
        return not self.groups or (group is not None and group.name in self.groups)

    def room_for(self, per_node: Shape, want: int) -> int:
        """How many more nodes of ``per_node`` fit under the limits, at most ``want``."""
        vector = self.vector(per_node)
        if self.unknown is not None and any(vector.get(name, 0) > 0 for name in self.limits):
            return 0
        count = want
        for name, limit in self.limits.items():
            each = vector.get(name, 0)
            if each > 0:
                count = min(count, max(0, (limit - self.used.get(name, 0)) // each))
        return count

    def binding(self, per_node: Shape) -> str:
        """The limit a node of ``per_node`` would break, for the reason."""
        vector = self.vector(per_node)
        if self.unknown is not None and any(vector.get(name, 0) > 0 for name in self.limits):
            return f"{self.name} cannot be counted: {self.unknown}"
        for name in sorted(self.limits):
            each, limit = vector.get(name, 0), self.limits[name]
            if each > 0 and self.used.get(name, 0) + each > limit:
                return f"{self.name} limit {_show(name, limit)} reached ({_show(name, self.used.get(name, 0))} used)"
        return f"{self.name} limit reached"


def _show(name: str, milli: int) -> str:
    if name == NODES:  # a tenant is charged parts of the nodes it shares (NodeUse): shown, not rounded down
        return (
            f"nodes={milli // ONE_NODE}"
            if milli % ONE_NODE == 0
            else f"nodes={milli / ONE_NODE:.3f}".rstrip("0")
        )
    if name == GPU:
        return f"gpus={milli // 1000}"
    return f"{name}={format_milli(name, milli)}"


def node_vector(allocatable: Mapping[str, int]) -> Resources:
    vector = dict(allocatable)
    vector[NODES] = ONE_NODE
    return vector


class Limits:
    """The plan's limits and what each has used so far; asked before opening nodes."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.constraints: list[Constraint] = []
        self.constraints += cluster_constraints(ctx.config)
        self.constraints += [quota_constraint(q) for q in ctx.snapshot.quotas if not q.invalid]
        self.constraints += tenant_constraints(ctx.config, ctx.now)
        self.claimed: set[str] = set()  # nodes charged to a tenant: by their pods, or claimed
        self._new_labels: dict[tuple[str, str, str | None], tuple[NewLabels, ...]] = {}
        self._zone_keys: ZoneKeys | None = None
        if self.constraints:
            self._count_existing()

    def _may_cover(self, c: Constraint, tenant: str | None, group: NodeGroup, zone: str | None) -> bool:
        """Whether ``c`` covers a new node of ``group`` with any labels it may register with
        (:func:`new_node_labels`; ``zone``: the one zone a gang's launch is kept to): a ceiling must
        hold wherever Auto Scaling puts the node."""
        key = (group.region, group.name, zone)
        if key not in self._new_labels:
            if self._zone_keys is None:
                self._zone_keys = zone_keys(self._seen()) if self._names_zone_keys() else ZoneKeys()
            self._new_labels[key] = new_node_labels(group, zone, self._zone_keys)
        return any(c.may_cover(tenant, group, labels, unsure) for labels, unsure in self._new_labels[key])

    def _names_zone_keys(self) -> bool:
        """Some limit selects by a zone key read from the nodes (most name none: no node is read then)."""
        read = {EBS_ZONE_LABEL, ZONE_ID_LABEL}
        return any(key in read for c in self.constraints for key, _, _ in c.requirements or ())

    def _seen(self) -> list[Seen]:
        """The registered nodes as :func:`zone_keys` reads them."""
        settle = timedelta(minutes=self.ctx.config.max_node_startup_minutes)
        return [
            Seen(
                n.info,
                n.group,
                n.info.ready
                and n.starting is None
                and n.info.created_at is not None
                and aware(n.info.created_at) + settle <= self.ctx.now,
            )
            for n in self.ctx.nodes.values()
        ]

    @property
    def active(self) -> bool:
        return bool(self.constraints)

    @property
    def per_tenant(self) -> bool:
        """Some limit is a tenant's: only those charge the launching capacity and the Ready nodes a
        tenant's pods take (:meth:`claim`, ``tenant_only``), so only they make what one class takes
        there depend on the new nodes a class before it opened."""
        return any(c.tenant is not None for c in self.constraints)

    def _count_existing(self) -> None:
        uses = tenant_uses(self.ctx)
        self.claimed.update(uses)  # a node with pods is charged to their tenants, limited or not
        registered: dict[GroupKey, int] = {}  # group -> its nodes charged here, Ready or not
        shared: dict[int, Resources] = {}  # a tenant limit's index -> its parts of the nodes, in NANO units
        pooled = {iid for g in self.ctx.groups for iid in g.pooled_instances}
        for node in self.ctx.nodes.values():
            if node.pool_stopping or (node.info.instance_id in pooled and not node.info.ready):
                continue  # stopped or stopping in a warm pool: no capacity; drawn, it is the node a raise adds
            if node.group is not None:
                registered[node.group.key] = registered.get(node.group.key, 0) + 1
            self._count_node(node, uses, shared)
        self._charge_shared(shared)
        for group in self.ctx.groups:
            # instances not registered yet, stale ones too (paid for); a registered node that is not
            # Ready (or still starting) is charged above, as a node, not again as one launching; none
            # that a suspended Launch process never launches, nor those a group whose launches fail
            # has not started
            size = group.expected_size
            if size > len(group.instance_ids) and launches_failing(self.ctx, group):
                size = len(group.instance_ids)
            launching = size - registered.get(group.key, 0)
            if launching > 0 and group.template is not None:
                self.charge(None, group, launching)
            elif launching > 0:
                self._count_unknown(group, launching)

    def _charge_shared(self, shared: Mapping[int, Resources]) -> None:
        """Each tenant limit's sum of its parts of the nodes (:meth:`_count_node`, in :data:`NANO`
        units), rounded up to a milli-unit once, not each node's part."""
        for index, parts in shared.items():
            add_into(self.constraints[index].used, {name: -(-nano // NANO) for name, nano in parts.items()})

    def _count_unknown(self, group: NodeGroup, launching: int) -> None:
        """Instances launching in a group with no template node (its instance type unknown): nodes to
        come all the same, so each counts one against the ``nodes`` of the totals and quotas whose selector
        takes a node with no labels (every one but those asking for a label: its labels are not known
        either); cluster-autoscaler counts every upcoming node for ``--max-nodes-total``. What else they
        have is not known, and counts nothing."""
        for c in self.constraints:
            if c.tenant is None and c.covers(None, group, {}):
                add_into(c.used, {NODES: ONE_NODE}, launching)

    def _count_node(self, node: WorkNode, uses: Mapping[str, NodeUse], shared: dict[int, Resources]) -> None:
        """One registered node: wholly in the totals and quotas that cover it, and each limited tenant's
        share of it into ``shared`` (by the limit's index, :meth:`NodeUse.nano_parts`: the caller
        rounds each limit's sum up once, so a tenant is charged its exact use, not one milli-unit more
        per node it shares, and is held only past its limit); a node whose GPUs cannot be counted
        leaves the GPU totals over it unknown."""
        shape = registered_shape(node.info, node.group)
        labels = node.info.labels
        unknown = gpus_unknown(node.info, node.group)
        charged: tuple[Resources, dict[str, Resources]] | None = None  # the tenants' parts of the node
        for index, c in enumerate(self.constraints):
            if c.tenant is None:
                if c.covers(None, node.group, labels):
                    add_into(c.used, c.vector(shape))
                    if unknown is not None and c.gpu_target and c.unknown is None:
                        c.unknown = unknown
            elif node.group is not None and c.covers(c.tenant, node.group, labels):
                use = uses.get(node.info.name)
                if use is not None and c.tenant in use.pods:
                    vector = c.vector(shape)  # every tenant constraint's the same: allocatable, nodes
                    if charged is None or charged[0] != vector:
                        charged = (vector, use.nano_parts(vector))
                    add_into(shared.setdefault(index, {}), charged[1][c.tenant])

    def allowed(
        self,
        tenant: str | None,
        group: NodeGroup,
        want: int,
        *,
        tenant_only: bool = False,
        zone: str | None = None,
    ) -> tuple[int, Constraint | None]:
        """How many of ``want`` new nodes of ``group`` the limits allow, and the one that binds.

        ``tenant_only``: the tenant's own limits only (capacity already launching, which the totals
        and quotas count already, taken by the tenant's pods). ``zone``: the one zone of the group the
        nodes launch in (a gang's fleet kept to it), else any of the group's."""
        if not self.constraints or group.template is None:
            return want, None
        shape = template_shape(group)
        count, binding = want, None
        for c in self.constraints:
            if tenant_only and c.tenant is None:
                continue
            if self._may_cover(c, tenant, group, zone):
                room = c.room_for(shape, count)
                if room < count:
                    count, binding = room, c
        return count, binding

    def reason(self, constraint: Constraint, group: NodeGroup) -> str:
        return f"{group.name}: {constraint.binding(template_shape(group))}"

    def charge(
        self,
        tenant: str | None,
        group: NodeGroup,
        count: int,
        *,
        tenant_only: bool = False,
        zone: str | None = None,
    ) -> None:
        """``count`` new nodes of ``group`` opened for ``tenant`` (None: nobody's, e.g. launching);
        ``tenant_only``: launching nodes the tenant's pods take, charged to its own limits only;
        ``zone``: as :meth:`allowed`."""
        if not self.constraints or group.template is None or count <= 0:
            return
        shape = template_shape(group)
        for c in self.constraints:
            if tenant_only and c.tenant is None:
                continue
            if self._may_cover(c, tenant, group, zone):
                add_into(c.used, c.vector(shape), count)

    def claim(
        self, tenant: str | None, group: NodeGroup | None, node: str, allocatable: Mapping[str, int],
        labels: Mapping[str, str],
    ) -> None:  # fmt: skip
        """The tenant's pending pods go to ``node`` (of a managed group), which no tenant is charged for
        yet (launching, or Ready without pods): charge it wholly to the tenant, as if it had opened it.
        Only tenant limits (which count allocatable): totals and quotas already count such nodes."""
        if not self.constraints or group is None or node in self.claimed:
            return
        self.claimed.add(node)
        shape = node_shape(allocatable, allocatable)
        for c in self.constraints:
            if c.tenant is not None and c.covers(tenant, group, labels):
                add_into(c.used, c.vector(shape))

    def claim_refusal(
        self, tenant: str | None, group: NodeGroup | None, node: str, allocatable: Mapping[str, int],
        labels: Mapping[str, str],
    ) -> tuple[str, str] | None:  # fmt: skip
        """Why the tenant's pods may not be given ``node``, a node Spillway cordoned, by uncordoning it:
        the code and reason of the tenant limit its :meth:`claim` would break, or None. Uncordoning is the reuse Spillway makes
        of a node before it launches one, so a node no tenant is charged for yet counts as a node added
        for the tenant and must fit its limits as a new one must; one charged already (it runs pods)
        is topped up, as booting nodes other classes took are."""
        if not self.constraints or group is None or node in self.claimed:
            return None
        shape = node_shape(allocatable, allocatable)
        for c in self.constraints:
            if c.tenant is not None and c.covers(tenant, group, labels) and c.room_for(shape, 1) < 1:
                return c.code, c.binding(shape)
        return None

    def save(self) -> tuple[list[Resources], set[str]]:
        return [dict(c.used) for c in self.constraints], set(self.claimed)

    def restore(self, saved: tuple[list[Resources], set[str]]) -> None:
        used_list, claimed = saved
        for c, used in zip(self.constraints, used_list, strict=True):
            c.used = used
        self.claimed = set(claimed)


class Floors:
    """The minimums of the cluster totals: scale-down removes no node that would leave the cluster
    below one (cluster-autoscaler's scale-down resource limits, ``core/scaledown/resource/limits.go``,
    its unremovable reason ``MinimalResourceLimitExceeded``).

    As cluster-autoscaler counts them: the cluster's total is every registered node's (cores and memory
    from ``status.capacity``, GPUs from allocatable, by kind, or a managed group's template while the
    node reports none: :func:`registered_shape`) but those on their way out (``leaving``:
    being deleted, terminated by their group, or drained already to be terminated); what scale-down may take is what that total has
    above the minimum. A node is kept when removing it would take more of one resource than is left
    above its minimum; each node the plan removes spends what it has."""

    def __init__(self, ctx: Context, leaving: Callable[[WorkNode], bool]) -> None:
        self.floors = cluster_floors(ctx.config)
        for node in ctx.nodes.values() if self.floors else ():
            if not leaving(node):
                self._add(node.info, node.group, 1)

    def refusal(self, info: NodeInfo, group: NodeGroup | None) -> tuple[str, str] | None:
        """Why removing the node would break a minimum, or None."""
        shape = registered_shape(info, group)
        for c in self.floors:
            if not c.covers(None, group, info.labels):
                continue
            vector = c.vector(shape)
            for name in sorted(c.limits):
                each, minimum, total = vector.get(name, 0), c.limits[name], c.used.get(name, 0)
                if each > 0 and total - each < minimum:
                    return (
                        codes.CLUSTER_MIN,
                        f"removing it would take the cluster below {c.name} minimum {_show(name, minimum)} "
                        f"({_show(name, total)} now, {_show(name, each)} on this node)",
                    )
        return None

    def remove(self, info: NodeInfo, group: NodeGroup | None) -> None:
        """This plan removes the node: the cluster's totals lose what it has."""
        self._add(info, group, -1)

    def fork(self) -> Floors:
        """A copy whose removals leave these totals as they are (to ask what later plans may remove)."""
        copy = object.__new__(Floors)
        copy.floors = [replace(c, used=dict(c.used)) for c in self.floors]
        return copy

    def _add(self, info: NodeInfo, group: NodeGroup | None, sign: int) -> None:
        shape = registered_shape(info, group)
        for c in self.floors:
            if c.covers(None, group, info.labels):
                add_into(c.used, c.vector(shape), sign)


ZONE_LABELS = (ZONE_LABEL, "failure-domain.beta.kubernetes.io/zone")
TYPE_LABELS = (INSTANCE_TYPE_LABEL, "beta.kubernetes.io/instance-type")
# every node registers with both (the kubelet); a group's template names them only when every type it
# may launch is known and of one architecture (spillway.model.nodegroup)
ARCH_LABELS = frozenset({"kubernetes.io/arch", "beta.kubernetes.io/arch"})

# a label set a new node may register with, and the keys it will carry with a value not known
NewLabels = tuple[Mapping[str, str], frozenset[str]]


# the zone id of a new node in a zone whose id neither EC2 (observe's DescribeAvailabilityZones was
# refused or failed) nor a node shows: it will carry one (``Exists`` holds, ``DoesNotExist`` does not),
# which may be any but those other zones show; no id is written so, so an ``In`` of ids never takes it
# (a group of such a zone is not held back under another zone's quota)
UNKNOWN_ZONE_ID = "?"
REGION_LABEL = "topology.kubernetes.io/region"
# Karpenter labels its own nodes (KARPENTER_NODE_LABELS) with the zone id whatever the cloud provider's
# version, and they run what its NodePools say: they tell nothing of what an Auto Scaling group's next
# node carries


@dataclass(frozen=True, slots=True)
class Seen:
    """One registered node as :func:`zone_keys` reads it: its group (None: of no managed group), and
    whether it is settled (Ready, initialized and past ``max_node_startup_minutes``: a key it lacks then
    is not one still coming, as the EBS CSI driver's comes once its node plugin registers)."""

    info: NodeInfo
    group: NodeGroup | None
    settled: bool


@dataclass(frozen=True, slots=True)
class ZoneKeys:
    """The zone keys beside the topology key (and its beta twin, which every node gets from the cloud
    node controller) a new node will carry, as the registered nodes show them.

    * The EBS CSI driver's (the kubelet labels a Node with each topology key of the CSI drivers that
      run there; its value is the zone): ``groups`` says, for a group with nodes, whether they carry it
      (True once one does; False when its settled nodes do not: its DaemonSet does not run there);
      ``ebs``, for another group, whether any node but Karpenter's does.
    * AWS's zone id (cloud-provider-aws sets it from v1.30): ``regions`` says, per region, whether its
      nodes (but Karpenter's) carry one, with the same rule, and ``carried`` for a region with no node
      that tells; ``ids`` maps a zone's name to its id as the nodes show them. A zone's id is the same in
      every account, its name is not, so only EC2 (a group's :attr:`NodeGroup.zone_ids`, read by observe,
      which come first) or a node in the zone says which id it is (:data:`UNKNOWN_ZONE_ID` until one
      does)."""

    ebs: bool = False
    groups: Mapping[tuple[str, str], bool] = field(default_factory=dict)
    carried: bool = False
    regions: Mapping[str, bool] = field(default_factory=dict)
    ids: Mapping[str, str] = field(default_factory=dict)

    def ebs_for(self, group: NodeGroup) -> bool:
        return self.groups.get((group.region, group.name), self.ebs)

    def ids_for(self, group: NodeGroup) -> bool:
        return self.regions.get(group.region, self.carried)


def zone_keys(nodes: Iterable[Seen]) -> ZoneKeys:
    """What the registered nodes say of the zone keys (:class:`ZoneKeys`). A zone two nodes give two ids
    is left unknown."""
    groups: dict[tuple[str, str], bool] = {}
    regions: dict[str, bool] = {}
    ebs = carried = False
    ids: dict[str, str] = {}
    clashing: set[str] = set()
    for seen in nodes:
        labels = seen.info.labels
        zone_id, zone = labels.get(ZONE_ID_LABEL), labels.get(ZONE_LABEL)
        if zone_id is not None and zone is not None and ids.setdefault(zone, zone_id) != zone_id:
            clashing.add(zone)
        if any(key in labels for key in KARPENTER_NODE_LABELS):
            continue
        has_ebs, has_id = EBS_ZONE_LABEL in labels, zone_id is not None
        ebs, carried = ebs or has_ebs, carried or has_id
        if seen.group is not None:
            _tell(groups, (seen.group.region, seen.group.name), has_ebs, seen.settled)
        region = labels.get(REGION_LABEL) or (seen.group.region if seen.group is not None else None)
        if region is not None:
            _tell(regions, region, has_id, seen.settled)
    known = {zone: zone_id for zone, zone_id in ids.items() if zone not in clashing}
    return ZoneKeys(ebs=ebs, groups=groups, carried=carried, regions=regions, ids=known)


def _tell(told: dict[Any, bool], key: Any, has: bool, settled: bool) -> None:
    """One node's word on whether the nodes of ``key`` carry a key: one that does says yes for good; a
    settled one that does not says no, unless another said yes."""
    if has:
        told[key] = True
    elif settled:
        told.setdefault(key, False)


def new_node_labels(
    group: NodeGroup, zone: str | None = None, keys: ZoneKeys = ZoneKeys()
) -> tuple[NewLabels, ...]:
    """The label sets a new node of ``group`` may register with, each with the keys it will carry with
    a value not known. Its template's labels leave the zone open for a group over several zones, and the
    instance type for a mixed group of several types (spillway.model.nodegroup's template labels: only
    what every node of the group gets), and neither is Spillway's to choose: Auto Scaling balances the
    zones and the allocation strategy picks the type. So one set per zone and type it may launch in,
    each with the template's other labels; just the template's when it names both (or a
    ``node-template/label`` tag does). Each set's zone also goes under the zone keys the registered
    nodes show the group's new nodes will carry (``keys``): the EBS CSI driver's, and the zone id, as
    EC2 names it for the group's zone (:attr:`NodeGroup.zone_ids`), else as the nodes show it for that
    zone (:data:`UNKNOWN_ZONE_ID` when neither does: which id it is cannot be told). A template that
    names no architecture (a group of amd64 and arm64 types, or of a type the catalogue does not know)
    leaves its value not known. A limit that covers any of them counts the node (:meth:`Limits.allowed`,
    :meth:`Limits.charge`): a quota on one zone or one type is held wherever the node lands, as the
    quota's own count, of registered nodes, will hold it. ``zone``, one of the group's: the zone its
    launch is kept to (a gang's fleet), the only one it may land in."""
    assert group.template is not None
    base = group.template.labels
    open_zones = ZONE_LABEL not in base and len(group.zones) > 1
    open_types = TYPE_LABELS[0] not in base and len(group.instance_types) > 1
    may_land = (zone,) if zone in group.zones else group.zones
    zones = [dict.fromkeys(ZONE_LABELS, z) for z in may_land] if open_zones else [{}]
    types = [dict.fromkeys(TYPE_LABELS, t) for t in group.instance_types] if open_types else [{}]
    unsure = frozenset() if ARCH_LABELS & base.keys() else ARCH_LABELS
    return tuple(
        (_zone_keyed({**base, **where, **kind}, group, keys), unsure) for where, kind in product(zones, types)
    )


def _zone_keyed(labels: dict[str, str], group: NodeGroup, keys: ZoneKeys) -> dict[str, str]:
    """``labels`` with the zone keys a new node of ``group`` carries (:class:`ZoneKeys`), from its zone:
    the zone id EC2 gave the group's zone (:attr:`NodeGroup.zone_ids`), else the one the nodes show."""
    zone = labels.get(ZONE_LABEL)
    if zone is not None and keys.ebs_for(group):
        labels.setdefault(EBS_ZONE_LABEL, zone)
    if zone is not None and keys.ids_for(group):
        labels.setdefault(ZONE_ID_LABEL, group.zone_id(zone) or keys.ids.get(zone, UNKNOWN_ZONE_ID))
    return labels


def template_shape(group: NodeGroup) -> Shape:
    """One new node of ``group``: its template's allocatable and capacity."""
    assert group.template is not None
    return node_shape(group.template.allocatable, group.template.capacity)


@dataclass(frozen=True, slots=True)
class NodeUse:
    """The pods on one node that charge it to their tenants: per tenant, their summed requests and how
    many they are. The node itself (``nodes``) is charged by each tenant's dominant share, normalised
    (:meth:`node_shares`); each resource of it by the tenants' requests of that resource (a pod slot
    each, for ``pods``), and what no pod there requests of it by the tenants' shares of the node. More
    requested than the node lists (its allocatable shrank under running pods: a GPU its device plugin
    marks unhealthy, NVIDIA/k8s-device-plugin#58, whose pod runs on, kubernetes/kubernetes#60388):
    each tenant its requests."""

    requests: Mapping[str, Resources]
    pods: Mapping[str, int]

    def _wants(self, tenant: str, resource: str) -> int:
        if resource == PODS:
            return self.pods[tenant] * 1000  # one slot each, in milli-units as every amount
        return self.requests[tenant].get(resource, 0)

    def node_shares(self, allocatable: Mapping[str, int]) -> dict[str, Fraction]:
        """Per tenant, the part of the node (``nodes``) charged to it: its dominant share (the largest
        fraction of any one resource of the node's allocatable its pods request, as Dominant Resource
        Fairness defines a share: Volcano's drf plugin, ``docs/design/drf.md``, takes a job's share as
        its highest ratio of allocated to total resource; pod slots count, a slot per pod, as the room
        kube-scheduler's NodeResourcesFit refuses a pod for once the node's pods fill its allocatable
        ``pods`` ("Too many pods") and the planner opens nodes for; volume attach limits are no room a
        node is opened for) over the sum of every tenant's there, so the node is charged once in all,
        the most to the tenant that fills it most; by pod count when no pod requests anything the node
        has and it lists no slots."""
        slots = allocatable.get(PODS, 0)
        dominant = {
            t: max(_dominant(r, allocatable), Fraction(min(self.pods[t] * 1000, slots), slots or 1))
            for t, r in self.requests.items()
        }
        whole = sum(dominant.values(), Fraction(0))
        if whole > 0:
            return {t: d / whole for t, d in dominant.items()}
        count = sum(self.pods.values())
        return {t: Fraction(n, count) for t, n in self.pods.items()}

    def exact_parts(self, vector: Mapping[str, int]) -> dict[str, dict[str, Fraction]]:
        """Each tenant's exact part of each resource of ``vector`` (the node as a tenant limit counts it:
        allocatable and ``nodes``): ``nodes`` by :meth:`node_shares`; a resource by the tenants'
        requests of it, and what none requests of it by those shares, so the parts add up to the
        node; one the pods request more of than ``vector`` has (or that it lacks), by the requests."""
        nodes = self.node_shares(vector)
        out: dict[str, dict[str, Fraction]] = {t: {} for t in self.pods}
        requested = {name for r in self.requests.values() for name in r}
        for name in [*vector, *sorted(requested - vector.keys())]:
            have = vector.get(name, 0)
            if name == NODES:
                for t, part in nodes.items():
                    out[t][name] = have * part
                continue
            wants = {t: self._wants(t, name) for t in self.pods}
            whole = sum(wants.values())
            for t, mine in wants.items():
                out[t][name] = Fraction(mine) if whole >= have else mine + (have - whole) * nodes[t]
        return out

    def nano_parts(self, vector: Mapping[str, int]) -> dict[str, Resources]:
        """:meth:`exact_parts` in whole :data:`NANO` units (a billionth of a milli-unit), rounded down:
        what a tenant limit sums over the nodes before it rounds the sum up to a milli-unit once
        (:meth:`Limits._count_node`). Summed as fractions, 2,000 nodes' parts took 0.76 s per resource
        and tenant (their denominators multiply); as integers, 0.7 ms. Each part rounded down to a
        billionth lowers the rounded sum by one milli-unit only where the exact sum passes a whole
        milli-unit by less than a billionth per node shared (the tenant may then pass its limit by
        that much); a sum that is a whole number of milli-units exactly (thirds of three nodes) stays
        it."""
        return {
            t: {name: x.numerator * NANO // x.denominator for name, x in parts.items()}
            for t, parts in self.exact_parts(vector).items()
        }


# a tenant limit sums its parts of shared nodes in billionths of a milli-unit (NodeUse.nano_parts)
NANO = 10**9


def _dominant(requests: Mapping[str, int], allocatable: Mapping[str, int]) -> Fraction:
    """The largest fraction of one resource of ``allocatable`` ``requests`` take, at most the whole. A
    resource the node lists none of (``nvidia.com/gpu: 0``: its GPUs marked unhealthy, the pods holding
    them running on, NVIDIA/k8s-device-plugin#58) that the pods request is taken whole, as one it lists
    less of than they request: left out, the share of a tenant holding a node's GPUs fell to its pod
    slots as the last of them was marked unhealthy. One the node does not list is left out."""
    best = Fraction(0)
    for name, want in requests.items():
        if name in (PODS, NODES) or is_attach_limit(name) or want <= 0 or name not in allocatable:
            continue
        have = allocatable[name]
        if have <= 0:
            return Fraction(1)
        best = max(best, min(Fraction(want, have), Fraction(1)))
    return best


def tenant_uses(ctx: Context) -> dict[str, NodeUse]:
    """Per node, what its tenants' pods request there (:class:`NodeUse`). Expendable pods (priority
    below ``expendable_priority_cutoff``) are not counted: their room is free room to any pod that may
    preempt them (:mod:`spillway.planner.preemption`), so a node running only such pods is charged, as a
    node without pods, to the tenant whose pods a plan places there first. Finished pods (Succeeded,
    Failed) are not counted either; a terminating pod is, until it is gone, as its room is held (the
    planner's room of a node counts it too)."""
    cutoff = ctx.config.expendable_priority_cutoff
    requests: dict[str, dict[str, Resources]] = {}
    counts: dict[str, dict[str, int]] = {}
    for pod in ctx.snapshot.pods:
        if pod.node_name is None or pod.terminal or pod.daemonset or pod.mirror or pod.priority < cutoff:
            continue
        tenant = ctx.snapshot.tenant(pod.namespace)
        add_into(requests.setdefault(pod.node_name, {}).setdefault(tenant, {}), pod.requests)
        n = counts.setdefault(pod.node_name, {})
        n[tenant] = n.get(tenant, 0) + 1
    return {node: NodeUse(requests[node], counts[node]) for node in counts}


def cluster_constraints(config: PlannerConfig) -> list[Constraint]:
    """cluster-autoscaler's totals: the whole cluster's size, not only what is added; cores and memory
    as cluster-autoscaler counts them, from each node's capacity."""
    out: list[Constraint] = []
    if config.max_nodes_total:
        out.append(
            Constraint(
                "cluster max_nodes_total", codes.CLUSTER_LIMIT, {NODES: config.max_nodes_total * ONE_NODE}
            )
        )
    return out + _totals(config, codes.CLUSTER_LIMIT, lambda low, high: high)


def cluster_floors(config: PlannerConfig) -> list[Constraint]:
    """The minimums of ``cores_total``, ``memory_total`` and ``gpu_total``, each a constraint whose
    ``limits`` is the least the cluster keeps (:class:`Floors`); a minimum of 0 is none, as
    cluster-autoscaler keeps only minimums above 0."""
    return [c for c in _totals(config, codes.CLUSTER_MIN, lambda low, high: low) if any(c.limits.values())]


def _totals(config: PlannerConfig, code: str, bound: Callable[[int, int], int]) -> list[Constraint]:
    """One constraint per ``<min>:<max>`` total, at the ``bound`` it picks of the two."""
    out: list[Constraint] = []
    if config.cores_total:
        cores = bound(*parse_range(config.cores_total)) * 1000
        out.append(Constraint("cluster cores_total", code, {CPU: cores}, on_capacity=True))
    if config.memory_total:
        memory = bound(*parse_range(config.memory_total)) * GIB_MILLI
        out.append(Constraint("cluster memory_total", code, {MEMORY: memory}, on_capacity=True))
    for entry in config.gpu_total:
        kind, low, high = parse_gpu_range(entry)
        out.append(_gpu_constraint(kind, bound(low, high), code))
    return out


def _gpu_constraint(kind: str, gpus: int, code: str) -> Constraint:
    name = f"cluster gpu_total {kind}"
    if "/" in kind:  # a resource name: that resource on every node
        return Constraint(name, code, {kind: gpus * 1000}, gpu_target=True)
    return Constraint(
        name,
        code,
        {GPU: gpus * 1000},
        selector=lambda labels: labels.get(ACCELERATOR_LABEL) == kind,
        measure=_gpus,
        gpu_target=True,
    )


def quota_constraint(quota: QuotaInfo) -> Constraint:
    return Constraint(
        f"CapacityQuota {quota.name}",
        codes.CAPACITY_QUOTA,
        dict(quota.limits),
        selector=quota.matches,
        on_capacity=True,
        requirements=quota.selector,
    )


def tenant_constraints(config: PlannerConfig, now: datetime) -> list[Constraint]:
    """Each tenant's limits in force at ``now`` (a ``schedule`` entry whose window is open replaces the
    base ``limits``: the first such entry), and its scopes."""
    out: list[Constraint] = []
    for tenant in sorted(config.tenants):
        limits = config.tenants[tenant]
        in_force = limits.as_resources(now)
        if in_force:
            scheduled = in_force != limits.as_resources()
            name = f"tenant {tenant} (scheduled)" if scheduled else f"tenant {tenant}"
            out.append(Constraint(name, codes.TENANT_LIMIT, in_force, tenant=tenant))
        out += [_scope_constraint(tenant, i, s) for i, s in enumerate(limits.scopes)]
    return out


def _scope_constraint(tenant: str, index: int, scope: LimitScope) -> Constraint:
    wanted = dict(scope.node_selector)
    where = ",".join(scope.node_groups) or ",".join(f"{k}={v}" for k, v in sorted(wanted.items())) or "all"
    return Constraint(
        f"tenant {tenant} scopes[{index}] ({where})",
        codes.TENANT_LIMIT,
        scope.as_resources(),
        tenant=tenant,
        groups=frozenset(scope.node_groups),
        selector=lambda labels: all(labels.get(k) == v for k, v in wanted.items()),
        requirements=tuple((k, "In", (v,)) for k, v in sorted(wanted.items())),
    )
