"""A group's template node remembered from the last node of its own that stood for it.

cluster-autoscaler keeps, per node group, the node info it built from the group's last good node (its
``nodeInfoCache``, processors/nodeinfosprovider/mixed_nodeinfos_processor.go): every loop in which a
Ready, schedulable node of the group is found, the entry is replaced and its time set anew; a group
with no such node takes its entry instead of the cloud provider's template until the entry is older
than ``--node-info-cache-expire-time`` (then it is deleted); entries of node groups that no longer
exist are deleted. Without it, a group that scaled to zero forgets what its nodes really had and falls
back to the estimate from its instance type (spillway.model.reserve), which knows no ephemeral storage
(a pod asking more than the real nodes have would launch a node, stay pending, see the node drained,
and launch again) and may promise more memory than the kubelet leaves.

Spillway does the same, with the memory in the planner's state (``State.templates``, stored with it):

* :func:`remember` writes an entry for every group whose template a node of its own stands for now
  (:attr:`TemplateNode.node`, spillway.model.livetemplate): that node's allocatable and capacity as it
  reports them, the labels and taints the group's nodes share
  (:func:`~spillway.model.livetemplate.group_labels`, :func:`~spillway.model.livetemplate.group_taints`),
  the group's region and instance type (a mixed group's: its template type and its overrides), and the
  plan's time. It keeps the entry of a group with no such node while :func:`usable`, and drops the rest:
  those expired, of groups gone, of groups whose type changed.
* :func:`recall` gives a group with no such node its entry's shape, as
  :func:`~spillway.model.livetemplate.live_template` gives a live node's: the entry's allocatable and
  capacity for each resource it has, but for those a ``node-template/resources`` tag declares (the tag
  still wins); the estimate for the rest; the entry's labels under the template's own, and its taints
  beside the template's (a taint tag of the same key and effect wins). The template
  names the node and the time (:attr:`TemplateNode.source`), and plan reasons say so.

An entry is usable only for the group it was learned for, of the same region and instance type (and, for
a mixed group, the same overrides: the template is the least over them), and while younger than
``node_info_cache_minutes`` (a week by default; 0 remembers nothing). cluster-autoscaler checks no type
and defaults to ten years, but its cache is lost whenever it restarts; a stored state is not.

An entry is also tied to what its node was launched from (:attr:`LearnedTemplate.launched_from`: the
launch template id and the version number the instance was launched with, as DescribeAutoScalingGroups
gives it for each instance, or the launch configuration), and is not used, and dropped, once the group
would launch its template's type from something else (:attr:`NodeGroup.launch_source`: ``$Latest`` and
``$Default`` resolved with DescribeLaunchTemplates; an override's own launch template for its type). A
new version may bring another AMI, root volume or kubelet settings, so another allocatable: planning on
the old node's would refuse pods the next node holds, or launch one for pods it cannot hold. When either
side is not known (an entry or snapshot from before, input without the resolved version, a template EC2
says is gone) the type and age alone decide, as before. The plan that drops such an entry says why
(:attr:`TemplateNode.forgotten`, in the reasons of the pods planned on the group's estimate instead).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta

from spillway.model.cluster import NodeInfo
from spillway.model.livetemplate import OS_KEYS, group_labels, group_taints, with_group_taints
from spillway.model.nodegroup import NodeGroup, TemplateNode
from spillway.model.state import LearnedTaint, LearnedTemplate
from spillway.model.utc import aware


def remember(
    groups: Iterable[NodeGroup],
    nodes: Iterable[NodeInfo],
    memory: Mapping[str, LearnedTemplate],
    now: datetime,
    keep_minutes: float,
) -> dict[str, LearnedTemplate]:
    """The memory after this plan: for each of ``groups`` (every group that exists, by
    :attr:`GroupKey.stored <spillway.model.groupkey.GroupKey.stored>`), what the node that stands for
    its template now reports, else its entry in ``memory`` while usable."""
    if keep_minutes <= 0:
        return {}
    nodes = list(nodes)
    by_name = {node.name: node for node in nodes}
    by_instance = {node.instance_id: node for node in nodes if node.instance_id}
    out: dict[str, LearnedTemplate] = {}
    for group in sorted(groups, key=lambda g: g.key):
        entry = learn(group, by_name, by_instance, now)
        if entry is None:
            old = memory.get(group.key.stored)
            entry = old if old is not None and usable(old, group, now, keep_minutes) else None
        if entry is not None:
            out[group.key.stored] = entry
    return out


def learn(
    group: NodeGroup, by_name: Mapping[str, NodeInfo], by_instance: Mapping[str, NodeInfo], now: datetime
) -> LearnedTemplate | None:
    """The entry for ``group`` from the node that stands for its template now (by name, among the
    snapshot's nodes); None without one, or when the template was itself remembered."""
    template = group.template
    if template is None or template.node is None or template.learned_at is not None:
        return None
    node = by_name.get(template.node)
    if node is None or not group.instance_type:
        return None
    own = [by_instance[iid] for iid in group.instance_ids if iid in by_instance]
    sources = dict(group.instance_sources)
    return LearnedTemplate(
        region=group.region,
        group=group.name,
        instance_type=group.instance_type,
        instance_types=group.instance_types,
        node=node.name,
        learned_at=now,
        allocatable=dict(node.allocatable),
        capacity=dict(node.capacity),
        labels=group_labels(group, own),
        taints=tuple(LearnedTaint(key=k, value=v, effect=e) for k, v, e in group_taints(own)),
        launched_from=sources.get(node.instance_id or "", ""),
    )


def usable(entry: LearnedTemplate, group: NodeGroup, now: datetime, keep_minutes: float) -> bool:
    """Whether ``entry`` still describes ``group``'s next node: the same region and instance type (and
    overrides), learned less than ``keep_minutes`` before ``now``, and launched from the same launch
    template version (when both are known: :func:`relaunched`)."""
    return _holds(entry, group, now, keep_minutes) and not relaunched(entry, group)


def _holds(entry: LearnedTemplate, group: NodeGroup, now: datetime, keep_minutes: float) -> bool:
    """:func:`usable` but for what the node and the group launch from."""
    if keep_minutes <= 0 or group.template is None:
        return False
    if (entry.region, entry.instance_type, entry.instance_types) != (
        group.region,
        group.instance_type,
        group.instance_types,
    ):
        return False
    return now - aware(entry.learned_at) < timedelta(minutes=keep_minutes)


def relaunched(entry: LearnedTemplate, group: NodeGroup) -> str:
    """Why ``group``'s next node is not launched from what ``entry``'s node was, for reasons ("launch
    template lt-0abc is now version 8; the shape remembered from <node> was launched from version 7");
    "" when it is, or when either is not known."""
    was, now = entry.launched_from, group.launch_source
    if not was or not now or was == now:
        return ""
    (was_id, _, was_version), (now_id, _, now_version) = was.rpartition("@"), now.rpartition("@")
    if was_id and was_id == now_id and not was.startswith("lc:"):
        return (
            f"launch template {now_id} is now version {now_version}; the shape remembered from "
            f"{entry.node} was launched from version {was_version}"
        )
    return (
        f"the group launches from {_source_text(now)} now; the shape remembered from {entry.node} was "
        f"launched from {_source_text(was)}"
    )


def _source_text(source: str) -> str:
    if source.startswith("lc:"):
        return f"launch configuration {source[3:]}"
    template, _, version = source.rpartition("@")
    return f"launch template {template} version {version}"


def recall(
    groups: Iterable[NodeGroup], memory: Mapping[str, LearnedTemplate], now: datetime, keep_minutes: float
) -> list[NodeGroup]:
    """``groups`` in their order, each with no node standing for its template now but a usable entry in
    ``memory`` with its template shaped by that entry (see the module docstring); the others as they are."""
    return [_recall(group, memory.get(group.key.stored), now, keep_minutes) for group in groups]


def _recall(group: NodeGroup, entry: LearnedTemplate | None, now: datetime, keep_minutes: float) -> NodeGroup:
    template = group.template
    if entry is None or template is None or template.node is not None:
        return group  # nothing remembered, no type to check it against, or a node stands for it now
    if not _holds(entry, group, now, keep_minutes):
        return group
    why = relaunched(entry, group)
    if why:  # said in the plan that drops the entry (remember)
        return replace(group, template=replace(template, forgotten=why))
    return replace(group, template=recalled(template, entry))


def recalled(template: TemplateNode, entry: LearnedTemplate) -> TemplateNode:
    """``template`` (an estimate) with ``entry``'s allocatable, capacity, labels and taints, but for the
    resources a tag declares, the labels the template has (not its guess of the operating system:
    ``OS_KEYS``, as a live node's) and the taints a tag declares (key and effect)."""
    tagged = set(template.tagged)
    allocatable = {**template.allocatable, **{k: v for k, v in entry.allocatable.items() if k not in tagged}}
    capacity = {**template.capacity, **{k: v for k, v in entry.capacity.items() if k not in tagged}}
    shaped = replace(
        template,
        allocatable=allocatable,
        capacity=capacity,
        labels={**entry.labels, **template.labels, **{k: v for k, v in entry.labels.items() if k in OS_KEYS}},
        node=entry.node,
        learned_at=aware(entry.learned_at),
    )
    return with_group_taints(shaped, [(t.key, t.value, t.effect) for t in entry.taints])
