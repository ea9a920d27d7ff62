"""A group's template node corrected from a node of its own.

An estimate from the instance type (spillway.model.reserve) can be off either way: a flat reserve
promises more memory than the kubelet leaves, Karpenter's 7.5 % VM overhead less than a big type
really has. cluster-autoscaler builds a group's node info from a real node of the group whenever one
is fit for it, and takes the cloud provider's template only for a group with none; Spillway does the
same wherever a group and the cluster's nodes are first known together (:func:`with_live_templates`:
the observe Lambda before it stores its snapshot, ``spillway plan`` after it reads its files).

A node **stands for** its group when it is

* the node of one of the group's live instances (``spec.providerID``) of the template's instance type:
  a mixed group's template is the least of each resource over its overrides, so only a node of an
  override whose estimate is that in every resource stands for it (none when no override is the least
  of all), and a node of another override says nothing of it (:attr:`NodeGroup.other_type_instances`);
* Ready, and not being deleted (``metadata.deletionTimestamp``);
* schedulable, or cordoned by Spillway (a node it drains or keeps for reuse is healthy); a node somebody
  else cordoned may be out of service for a reason Spillway does not know;
* reporting cpu and memory in its allocatable, and every extended resource (a name with a ``/``: GPUs,
  Neuron devices) the template has: a node whose device plugin has not registered them is starting.

Only the node's allocatable is taken, for each resource it reports (cpu, memory, pods,
ephemeral-storage, GPUs, any extended resource), and its capacity with it (what CapacityQuotas count);
the template keeps its estimate (and its nominal capacity) for the others, and a
``node-template/resources/<name>`` tag on the group still wins over the node, for both. A mixed
group's CSI attach limits are the least its Ready nodes of any type it launches report
(:func:`least_attach_limits`): a node of another type says what that type may attach.

When several nodes stand for the group, the allocatable most of them report is taken (nodes of one
type, one AMI and one kubelet configuration report the same); between as many, that of the node whose
name sorts first; the template names the node it was read from (:attr:`TemplateNode.node`).

**Labels.** cluster-autoscaler's template of a group with a node is that node, every label kept but the
hostname: labels the kubelet registers with (``--node-labels``), labels no tag declares, come with the
next node too. A single node cannot tell such a label from one it carries alone, so the template takes
the labels (:func:`group_labels`) that every Ready node of the group not being deleted carries with one
value (one of them schedulable, or cordoned by Spillway), but those that describe one node rather than
the group:

* the hostname, the instance id eksctl sets (``alpha.eksctl.io/instance-id``), whether the VPC resource
  controller attached a trunk interface, EC2's network topology (``topology.k8s.aws/network-node-layer-*``)
  and Spillway's own labels (``spillway.io/``, put on the nodes it launched for a request);
* the zone keys (``topology.kubernetes.io/zone``, its beta and EBS aliases, ``topology.k8s.aws/zone-id``)
  unless the group has one zone: the next node may come up in another;
* the instance type and architecture labels unless the group launches one type: a mixed group's nodes
  of one override do not say what EC2 launches next;
* the capacity-type labels (Karpenter's, EKS's): what the group launches is decided from its launch
  settings (spillway.model.nodegroup), and a node of a mixed group's on-demand base says nothing of the
  Spot nodes above it.

The template's own labels (the well-known ones and the node-template tags) win over the nodes', but
the operating system (``kubernetes.io/os`` and its beta twin): the template's ``linux`` is a guess, and
a Windows group's nodes say ``windows``.

**Taints.** Likewise cluster-autoscaler's template of a group with a node keeps that node's taints but
those of a passing state (kubernetes/autoscaler cluster-autoscaler/utils/taints/taints.go
``SanitizeTaints``: its own deletion and deletion-candidate taints, the node-condition taints, startup
and status taints), so a taint the kubelet registers with (``--register-with-taints`` in the launch
template's user data, no tag) keeps a pod that does not tolerate it from being launched for. The
template takes the taints (:func:`group_taints`) every node that gives it labels carries with one value
and effect, but those of a passing state (:data:`PASSING_TAINTS`, :data:`PASSING_TAINT_PREFIXES`: node
conditions, a cloud provider's uninitialized or shutdown node, what an autoscaler or a termination
handler puts on a node it removes); startup and status taints are the planner's to drop
(spillway.planner.startup.sanitized), as they are from a tag. A taint tag of the same key and effect
wins over the nodes'.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from spillway.model.cluster import ZONE_ALIASES, ZONE_ID_LABEL, NodeInfo, TaintT
from spillway.model.k8s import CANDIDATE_TAINT, DELETION_TAINTS
from spillway.model.nodegroup import (
    CAPACITY_LABELS,
    INSTANCE_TYPE_LABEL,
    NodeGroup,
    TemplateNode,
    merged_taints,
)
from spillway.model.resources import CPU, MEMORY, is_attach_limit

# labels that name one node, whichever group it is of
NODE_LABELS = frozenset(
    {"kubernetes.io/hostname", "alpha.eksctl.io/instance-id", "vpc.amazonaws.com/has-trunk-attached"}
)
NODE_LABEL_PREFIXES = ("spillway.io/", "topology.k8s.aws/network-node-layer-")
# the next node's only when the group has one zone
ZONE_KEYS = ZONE_ALIASES | {ZONE_ID_LABEL}
# the next node's only when the group launches one instance type
TYPE_KEYS = frozenset(
    {INSTANCE_TYPE_LABEL, "beta.kubernetes.io/instance-type", "kubernetes.io/arch", "beta.kubernetes.io/arch"}
)

# labels that say what one node runs or how its instance was bought, not which group launched it: a
# discovery agent's (node-feature-discovery's feature.node.kubernetes.io/ and its sub-namespaces, NVIDIA
# gpu-feature-discovery's nvidia.com/, whose gfd.timestamp is the time it labelled that node), the AMI a
# bootstrap labels (eks.amazonaws.com/nodegroup-image) and the purchase option a boot script reads from
# the instance metadata (node.kubernetes.io/lifecycle). Two launches of one group differ in them once its
# launch template's AMI moves on, or between a mixed group's types and purchase options: a node of the
# group's launch may carry another value than the nodes of its last read (spillway.planner.context)
NODE_DETAIL_LABELS = frozenset({"eks.amazonaws.com/nodegroup-image", "node.kubernetes.io/lifecycle"})
NODE_DETAIL_PREFIXES = ("nvidia.com/", "feature.node.kubernetes.io/")
NFD_SUBDOMAIN = ".feature.node.kubernetes.io/"


def node_detail(key: str) -> bool:
    """Whether a label of ``key`` describes one node rather than its launcher (:data:`NODE_DETAIL_LABELS`)."""
    return key in NODE_DETAIL_LABELS or key.startswith(NODE_DETAIL_PREFIXES) or NFD_SUBDOMAIN in key


# the operating system a template can only guess (linux: the catalogue says nothing of the AMI); the
# nodes of the group say which, as they do for cluster-autoscaler's template read from a node
OS_KEYS = frozenset({"kubernetes.io/os", "beta.kubernetes.io/os"})

# taints of a passing state, which the group's next node will not carry: cluster-autoscaler's
# NodeConditionTaints and its own (utils/taints/taints.go), Spillway's, Karpenter's removal taints
PASSING_TAINTS = frozenset(
    {
        *DELETION_TAINTS,
        CANDIDATE_TAINT,
        "DeletionCandidateOfClusterAutoscaler",
        "NodeWithImpairedVolumes",
        "karpenter.sh/unregistered",
    }
)
# node conditions and out-of-service (node.kubernetes.io/), the cloud controller's uninitialized and
# shutdown taints, aws-node-termination-handler's (spot-itn, scheduled-maintenance, ...), Spillway's own
PASSING_TAINT_PREFIXES = (
    "node.kubernetes.io/",
    "node.cloudprovider.kubernetes.io/",
    "aws-node-termination-handler/",
    "spillway.io/",
)
# a node agent's own taint until it runs (Cilium's node.cilium.io/agent-not-ready, the EBS and EFS CSI
# drivers' ebs.csi.aws.com/agent-not-ready, efs.csi.aws.com/agent-not-ready): on every young node, gone
# from every settled one, whether or not the planner's startup_taints name it
AGENT_NOT_READY = "/agent-not-ready"


def with_live_templates(groups: Iterable[NodeGroup], nodes: Iterable[NodeInfo]) -> list[NodeGroup]:
    """``groups`` in their order, each whose template a node of its own stands for with the template
    read from that node (see the module docstring); the others as they are."""
    by_instance = {node.instance_id: node for node in nodes if node.instance_id}
    out = []
    for group in groups:
        own = [by_instance[iid] for iid in group.instance_ids if iid in by_instance]
        chosen = pick([node for node in own if stands_for(node, group)])
        template = group.template
        if template is not None:
            if chosen is not None:
                template = live_template(template, chosen)
            if len(group.launch_types()) > 1:
                template = least_attach_limits(template, group, own)
            labels = group_labels(group, own)
            merged = {**labels, **template.labels, **{k: v for k, v in labels.items() if k in OS_KEYS}}
            if merged != template.labels:
                template = replace(template, labels=merged)
            template = with_group_taints(template, group_taints(own))
            if template is not group.template:
                group = replace(group, template=template)
        out.append(group)
    return out


def stands_for(node: NodeInfo, group: NodeGroup) -> bool:
    """Whether ``node`` (one of ``group``'s) may give the group's template its allocatable."""
    template = group.template
    if template is None or not node.ready or node.deleting:
        return False
    if node.instance_id in group.other_type_instances:
        return False
    if node.unschedulable and not node.cordoned_by_spillway:
        return False
    if node.allocatable.get(CPU, 0) <= 0 or node.allocatable.get(MEMORY, 0) <= 0:
        return False
    extended = (name for name, value in template.allocatable.items() if "/" in name and value > 0)
    return all(node.allocatable.get(name, 0) > 0 for name in extended)


def pick(candidates: Sequence[NodeInfo]) -> NodeInfo | None:
    """The node whose allocatable most candidates report, the first by name of those; between
    allocatables as common, the one of the node whose name sorts first. None without a candidate."""
    same: dict[tuple[tuple[str, int], ...], list[NodeInfo]] = {}
    for node in sorted(candidates, key=lambda n: n.name):
        same.setdefault(tuple(sorted(node.allocatable.items())), []).append(node)
    if not same:
        return None
    return min(same.values(), key=lambda nodes: (-len(nodes), nodes[0].name))[0]


def live_template(template: TemplateNode, node: NodeInfo) -> TemplateNode:
    """``template`` with the allocatable and the capacity ``node`` reports, but for the resources a tag
    declares."""
    allocatable: dict[str, int] = dict(template.allocatable)
    allocatable.update(
        {name: value for name, value in node.allocatable.items() if name not in template.tagged}
    )
    capacity: dict[str, int] = dict(template.capacity)
    capacity.update({name: value for name, value in node.capacity.items() if name not in template.tagged})
    return replace(template, allocatable=allocatable, capacity=capacity, node=node.name)


def least_attach_limits(template: TemplateNode, group: NodeGroup, nodes: Sequence[NodeInfo]) -> TemplateNode:
    """A mixed group's ``template`` with, for each CSI driver's attach limit, the least any Ready node
    of ``nodes`` (the group's own) of a type the group launches reports (its CSINode's count): EC2 may
    launch any of the types, and the EBS CSI driver's count depends on the type (a dedicated EBS limit,
    or Nitro attachment slots shared with network interfaces and instance store volumes:
    aws-ebs-csi-driver pkg/driver/node.go, getVolumesLimit). A type no such node runs is not known."""
    types = set(group.launch_types())
    least = {k: v for k, v in template.allocatable.items() if is_attach_limit(k)}
    for node in nodes:
        if node.ready and not node.deleting and node.labels.get(INSTANCE_TYPE_LABEL) in types:
            for name, value in node.allocatable.items():
                if is_attach_limit(name) and value < least.get(name, value + 1):
                    least[name] = value
    if all(template.allocatable.get(k) == v for k, v in least.items()):
        return template
    return replace(template, allocatable={**template.allocatable, **least})


def group_labels(group: NodeGroup, nodes: Sequence[NodeInfo]) -> dict[str, str]:
    """The labels every Ready node of ``nodes`` (``group``'s own) not being deleted carries with one
    value, but those that describe one node (see the module docstring); none unless one of them is
    schedulable or cordoned by Spillway."""
    ready = [node for node in nodes if node.ready and not node.deleting]
    if not any(not node.unschedulable or node.cordoned_by_spillway for node in ready):
        return {}
    common = dict(ready[0].labels)
    for node in ready[1:]:
        common = {key: value for key, value in common.items() if node.labels.get(key) == value}
    return {key: value for key, value in sorted(common.items()) if _of_the_group(key, group)}


def group_taints(nodes: Sequence[NodeInfo]) -> list[TaintT]:
    """The taints every Ready node of ``nodes`` not being deleted carries with one value and effect, but
    those of a passing state; none unless one of them is schedulable or cordoned by Spillway (the nodes
    :func:`group_labels` reads). Sorted; an empty value is None, as a taint tag without one."""
    ready = [node for node in nodes if node.ready and not node.deleting]
    if not any(not node.unschedulable or node.cordoned_by_spillway for node in ready):
        return []
    common = {(key, value or None, effect) for key, value, effect in ready[0].taints}
    for node in ready[1:]:
        common &= {(key, value or None, effect) for key, value, effect in node.taints}
    return sorted((t for t in common if not passing(t[0])), key=lambda t: (t[0], t[2], t[1] or ""))


def passing(key: str) -> bool:
    """Whether a taint of ``key`` marks a passing state of one node (see :data:`PASSING_TAINTS`)."""
    return key in PASSING_TAINTS or key.startswith(PASSING_TAINT_PREFIXES) or key.endswith(AGENT_NOT_READY)


def with_group_taints(template: TemplateNode, taints: Sequence[TaintT]) -> TemplateNode:
    """``template`` with ``taints`` but those of a key and effect a taint tag declares (the tag wins:
    :func:`~spillway.model.nodegroup.merged_taints`, the template's own last)."""
    merged = tuple(merged_taints(taints, template.taints))
    return template if set(merged) == set(template.taints) else replace(template, taints=merged)


def _of_the_group(key: str, group: NodeGroup) -> bool:
    if key in NODE_LABELS or key.startswith(NODE_LABEL_PREFIXES) or key in CAPACITY_LABELS:
        return False
    if key in ZONE_KEYS:
        return len(group.zones) == 1
    if key in TYPE_KEYS:
        return len(group.launch_types()) == 1
    return True
