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
``node-template/resources/<name>`` tag on the group still wins over the node, for both. Labels and taints stay
the template's (the well-known labels and the node-template tags): a node's hostname and its own
labels, and the taints Spillway or an autoscaler put on it, do not describe the next node.

When several nodes stand for the group, the allocatable most of them report is taken (nodes of one
type, one AMI and one kubelet configuration report the same); between as many, that of the node whose
name sorts first; the template names the node it was read from (:attr:`TemplateNode.node`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from spillway.model.cluster import NodeInfo
from spillway.model.nodegroup import NodeGroup, TemplateNode
from spillway.model.resources import CPU, MEMORY


def with_live_templates(groups: Iterable[NodeGroup], nodes: Iterable[NodeInfo]) -> list[NodeGroup]:
    """``groups`` in their order, each whose template a node of its own stands for with the template
    read from that node (see the module docstring); the others as they are."""
    by_instance = {node.instance_id: node for node in nodes if node.instance_id}
    out = []
    for group in groups:
        own = [by_instance[iid] for iid in group.instance_ids if iid in by_instance]
        chosen = pick([node for node in own if stands_for(node, group)])
        if chosen is not None and group.template is not None:
            group = replace(group, template=live_template(group.template, chosen))
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
