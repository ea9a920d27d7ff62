"""Facts about node groups the stages share: the room on a new node, back-off (of the group or of a
pool: a capacity type of an instance type in a zone), and the MinSize floor of scheduled actions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta

from spillway.model.cluster import ZONE_ALIASES, ZONE_ID_LABEL, PodInfo
from spillway.model.daemonsets import DaemonSetInfo
from spillway.model.groupkey import GroupKey
from spillway.model.jobs import JobInfo
from spillway.model.nodegroup import LAUNCH, SCHEDULED_ACTIONS, NodeGroup
from spillway.model.resources import PODS, Resources, add_into, subtract, unchecked_when_unknown
from spillway.model.schedule import Floor, scheduled_ceiling, scheduled_floor
from spillway.model.state import PoolState, pool_key
from spillway.planner import codes
from spillway.planner.context import ONE_POD, Context, aware, iso, minutes
from spillway.planner.disruption import assess_move
from spillway.planner.predicates import why_not_placeable
from spillway.planner.topology import port_taken


def fresh_node_overhead(ctx: Context, group: NodeGroup) -> Resources:
    """What the pods a fresh node of the group runs before any pending pod lands there request, as
    cluster-autoscaler finds them (simulator/node_info_utils.go podsExpectedOnFreshNode):

    * a group whose template was read from a node of its own (:attr:`TemplateNode.node`,
      spillway.model.livetemplate; a remembered one's node while it is still the group's): the DaemonSet and static (mirror) pods bound to that node, but those
      being deleted. What runs there is what runs on the group's next node: a DaemonSet pod no longer
      says which nodes its DaemonSet targets (the controller replaces its required node affinity with
      one term naming its node), and a static pod comes with the node's kubelet configuration. A
      DaemonSet without a pod there yet is added only when it is ``critical`` (system-node-critical and
      preempting: it makes room for itself) and runs on the template;
    * a group without one: each DaemonSet of the snapshot that runs on the template (its pod's
      nodeSelector, required node affinity and tolerations against the template's labels and taints:
      spillway.model.daemonsets);
    * without DaemonSets in the snapshot (observe not granted to list them, a ``spillway plan`` List
      without them): each DaemonSet one of whose pods admits the template by its nodeSelector and
      tolerations (the pinning term left out), the first pod by name standing for it. Its node affinity
      is lost with the pinning, so a DaemonSet that targets other nodes by affinity alone is reserved
      here too, and one without a pod is not seen.

    Of a group over several zones or types, the most any one of the nodes it may launch runs
    (:func:`new_node_label_sets`), resource by resource: the node comes up as one of them and runs the
    DaemonSets that run there, so two that never share a node (one per architecture, or per zone)
    take the room of the larger, not of both."""
    sets = new_node_label_sets(group) if group.template is not None else []
    if len(sets) <= 1:
        return _requests_of(fresh_node_pods(ctx, group))
    worst: Resources = {}
    for labels in sets:
        for name, amount in _requests_of(fresh_node_pods(ctx, group, on=labels)).items():
            worst[name] = max(worst.get(name, 0), amount)
    return worst


def fresh_node_pods(
    ctx: Context, group: NodeGroup, sure: bool = False, on: Mapping[str, str] | None = None
) -> list[PodInfo | DaemonSetInfo]:
    """The DaemonSet and static pods a fresh node of the group runs (see :func:`fresh_node_overhead`):
    of a group over several zones or types, a DaemonSet that runs on any of the nodes it may launch
    (its ports are taken wherever the node lands), or, ``sure``, only one that runs on each of
    them (a pod that must join it finds it on whichever node comes up); ``on``: those of a new node
    with these labels (one of :func:`new_node_label_sets`)."""
    template = group.template
    if template is None:
        return []
    sets = [on] if on is not None else None
    if _own_node(ctx, group, template.node):
        assert template.node is not None
        return _on_its_node(ctx, group, template.node, sure, sets)
    if ctx.snapshot.daemonsets:
        return [d for d in ctx.snapshot.daemonsets if runs_on(d, group, sure, sets)]
    return list(_admitted_by_pods(ctx, group, sure, sets))


def fresh_node_ports(ctx: Context, group: NodeGroup) -> frozenset[tuple[int, str, str]]:
    """The node ports the pods a fresh node of the group runs anyway take (:func:`fresh_node_pods`): a
    pod asking one of them never runs on such a node (kube-scheduler's NodePorts checks it against every
    pod of the node, DaemonSet pods too; cluster-autoscaler's template node carries them)."""
    return frozenset(port for pod in fresh_node_pods(ctx, group) for port in pod.host_ports)


def fresh_port_holders(
    ctx: Context, group: NodeGroup, asked: Iterable[tuple[int, str, str]], taken: str
) -> list[str]:
    """Who, of the pods a fresh node of the group runs (:func:`fresh_node_pods`), holds ``taken``: the
    first of the host ports ``asked`` they take, as :func:`~spillway.planner.topology.port_taken` names
    it. A DaemonSet's pod is named by its DaemonSet (``namespace/name``), a static pod by its own key,
    so a pod refused the group for the port says which to look at."""
    asked = tuple(asked)
    return sorted(
        {_holder(pod) for pod in fresh_node_pods(ctx, group) if port_taken(asked, pod.host_ports) == taken}
    )


def _holder(pod: PodInfo | DaemonSetInfo) -> str:
    """The DaemonSet of a DaemonSet pod (``namespace/name``), else the pod's key."""
    if isinstance(pod, DaemonSetInfo):
        return pod.key
    return f"{pod.namespace}/{pod.owner_name}" if pod.daemonset and pod.owner_name else pod.key


def fresh_node_selected(ctx: Context, group: NodeGroup, sure: bool = False) -> tuple[frozenset[int], ...]:
    """Per pod a fresh node of the group runs before any pending pod lands there
    (:func:`fresh_node_pods`), the pod topology terms that select it (:attr:`PodInfo.selected_by`).
    kube-scheduler counts a pod bound there, and the DaemonSet's pod is bound first (cluster-autoscaler's
    template node runs it): a required anti-affinity term that selects it refuses the node
    (InterPodAffinity), a spread that selects it counts it (PodTopologySpread), so these count a
    DaemonSet that runs on any of the zones and types the group may launch (it may be on the node that
    comes up); ``sure``: only one that runs on each of them, for a pod whose required pod affinity they
    all select, which may count on joining it whichever node comes up. A DaemonSet object has no labels
    of its own here: a pod of it running elsewhere says which terms select its pods (none when none
    runs). Computed once per group."""
    found = ctx.fresh_selected.get((group.key, sure))
    if found is None:
        out = [_selected(ctx, pod) for pod in fresh_node_pods(ctx, group, sure=sure)]
        found = ctx.fresh_selected[(group.key, sure)] = tuple(s for s in out if s)
    return found


def fresh_node_unsure(ctx: Context, group: NodeGroup) -> tuple[frozenset[int], ...]:
    """Of the pods :func:`fresh_node_selected` counts, those a fresh node of the group runs on some of
    the zones and types it may launch but not on each (an amd64-only agent on a group of m7g and m6i
    overrides), with the terms that select each: which of them the node runs depends on what EC2
    launches. A zone spread counts such a pod in the node's zone, where it may take a place of the
    pending pods', but not toward the least loaded zone, which it may leave where it is
    (:attr:`~spillway.planner.topology.ZoneSpread.unsure`). Computed once per group."""
    found = ctx.fresh_unsure.get(group.key)
    if found is None:
        sure = {id(pod) for pod in fresh_node_pods(ctx, group, sure=True)}
        out = [_selected(ctx, pod) for pod in fresh_node_pods(ctx, group) if id(pod) not in sure]
        found = ctx.fresh_unsure[group.key] = tuple(s for s in out if s)
    return found


def launching_places(
    ctx: Context, group: NodeGroup, coming: int, registered: bool = False
) -> dict[tuple[str | None, str | None], int]:
    """Of ``coming`` instances of a group over several zones or types that have no Node yet (with
    ``registered``, or no Ready and initialized one), how many come up in each (zone, type) Auto
    Scaling's answer gives them (:attr:`NodeGroup.instance_places`; None where the template names it
    already, or the answer does not), at most ``coming`` of them."""
    if not launch_labels(group):
        return {}
    joined = {
        node.info.instance_id
        for node in ctx.nodes.values()
        if not registered or (node.info.ready and node.starting is None)
    }
    live = set(group.instance_ids)
    out: dict[tuple[str | None, str | None], int] = {}
    for iid, zone, kind in group.instance_places:
        place = _place(group, zone, kind)
        if coming <= 0:
            break
        if iid in joined or iid not in live or place == (None, None):
            continue
        out[place] = out.get(place, 0) + 1
        coming -= 1
    return out


def _place(group: NodeGroup, zone: str, kind: str) -> tuple[str | None, str | None]:
    """The zone and type of an instance of ``group`` that its template does not name (None: it names
    it, or the instance's is not one of the group's)."""
    labels = group.template.labels if group.template is not None else {}
    where = zone if zone in group.zones and ZONE_KEYS_SET_ON_LAUNCH[0] not in labels else None
    what = kind if kind in group.launch_types() and TYPE_KEYS_SET_ON_LAUNCH[0] not in labels else None
    return where, what


def place_labels(group: NodeGroup, zone: str | None, kind: str | None) -> dict[str, str]:
    """The labels a node of ``group`` registers with in ``zone`` and of type ``kind`` (either None: as its
    template says), as :func:`launch_labels` gives them."""
    assert group.template is not None
    return _launch_variant(group, group.template.labels, zone, kind)


def fresh_selected_at(
    ctx: Context, group: NodeGroup, labels: Mapping[str, str]
) -> tuple[frozenset[int], ...]:
    """:func:`fresh_node_selected` for a node of ``group`` with these ``labels`` (one of its zones and
    types, :func:`place_labels`): the pods it runs first are those that run there, no guess."""
    out = [_selected(ctx, pod) for pod in fresh_node_pods(ctx, group, on=labels)]
    return tuple(s for s in out if s)


def _selected(ctx: Context, pod: PodInfo | DaemonSetInfo) -> frozenset[int]:
    """The pod topology terms that select ``pod``; a DaemonSet's, those that select a pod of it running
    elsewhere (none when none runs)."""
    if isinstance(pod, DaemonSetInfo):
        running = ctx.ds_representatives.get((pod.namespace, pod.name))
        return frozenset(running.selected_by) if running is not None else frozenset()
    return frozenset(pod.selected_by)


def _own_node(ctx: Context, group: NodeGroup, name: str | None) -> bool:
    """Whether the node ``name`` (the template's) is one of ``group``'s now. A remembered template
    names a node that may be gone, and EC2 reuses private IPs: another group's new node may carry the
    same name (ip-10-0-1-5.ec2.internal), and its DaemonSet pods say nothing of this group."""
    node = ctx.nodes.get(name) if name is not None else None
    return node is not None and node.group is not None and node.group.key == group.key


def _on_its_node(
    ctx: Context, group: NodeGroup, node: str, sure: bool, sets: Sequence[Mapping[str, str]] | None
) -> list[PodInfo | DaemonSetInfo]:
    """The DaemonSet and mirror pods of ``node``, and the critical DaemonSets it does not run yet."""
    pods = ctx.node_daemons.get(node, [])
    running = {(p.namespace, p.owner_name) for p in pods if p.daemonset}
    joining = [
        d
        for d in ctx.snapshot.daemonsets
        if d.critical and (d.namespace, d.name) not in running and runs_on(d, group, sure, sets)
    ]
    return [*pods, *joining]


def _admitted_by_pods(
    ctx: Context, group: NodeGroup, sure: bool, sets: Sequence[Mapping[str, str]] | None = None
) -> list[PodInfo]:
    """A pod of each DaemonSet whose nodeSelector and tolerations admit a new node of ``group`` (every
    one, ``sure``: :func:`new_node_label_sets`, or those ``sets``)."""
    assert group.template is not None
    taints, judge = group.template.taints, all if sure else any
    sets = new_node_label_sets(group) if sets is None else sets
    admitted = []
    for rep_key in sorted(ctx.ds_representatives):
        pod = ctx.ds_representatives[rep_key]
        terms = tuple(tuple(r for r in term if not r[3]) for term in pod.required_terms)
        if any(not term for term in terms):
            terms = ()  # the term only pinned the pod to its node by name
        if judge(
            not why_not_placeable(pod.node_selector, terms, pod.tolerations, labels, taints, None)
            for labels in sets
        ):
            admitted.append(pod)
    return admitted


ZONE_KEYS_SET_ON_LAUNCH = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
TYPE_KEYS_SET_ON_LAUNCH = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
ARCH_KEYS_SET_ON_LAUNCH = ("kubernetes.io/arch", "beta.kubernetes.io/arch")


def launch_labels(group: NodeGroup, zone: str | None = None) -> list[dict[str, str]]:
    """The labels a new node of ``group`` may get, one dict for each zone and instance type it may come
    up in, where its template leaves the zone out (the group spans several) or the type (it launches
    several): the template's labels with the zone (and its id, when known) and type the cloud provider
    gives the node, and the type's architecture where the template names none (overrides of amd64 and
    arm64 types: the kubelet labels each node with its own, kubernetes/kubernetes
    pkg/kubelet/kubelet_node_status.go ``initialNode``). Empty when the template names both, or the
    group's zones or types are unknown. ``zone``: the one zone of the group its launch is kept to (a
    gang's fleet), when it spans it."""
    template = group.template
    if template is None:
        return []
    labels = template.labels
    zones: list[str | None] = [None]
    types: list[str | None] = [None]
    if ZONE_KEYS_SET_ON_LAUNCH[0] not in labels and len(group.zones) > 1:
        zones = [zone] if zone in group.zones else list(group.zones)
    if TYPE_KEYS_SET_ON_LAUNCH[0] not in labels and len(group.launch_types()) > 1:
        types = list(group.launch_types())
    if zones == [None] and types == [None]:
        return []
    return [_launch_variant(group, labels, where, kind) for where in zones for kind in types]


def _launch_variant(
    group: NodeGroup, labels: Mapping[str, str], zone: str | None, kind: str | None
) -> dict[str, str]:
    """``labels`` with the zone (and its id) and the type (and its architecture, where the template
    names none) a new node of ``group`` comes up with, where given."""
    variant = dict(labels)
    if zone is not None:
        variant.update(dict.fromkeys(ZONE_KEYS_SET_ON_LAUNCH, zone))
        zone_id = group.zone_id(zone)
        if zone_id is not None:
            variant[ZONE_ID_LABEL] = zone_id
    if kind is not None:
        variant.update(dict.fromkeys(TYPE_KEYS_SET_ON_LAUNCH, kind))
        arch = group.arch_of(kind)
        if arch is not None and ARCH_KEYS_SET_ON_LAUNCH[0] not in labels:
            variant.update(dict.fromkeys(ARCH_KEYS_SET_ON_LAUNCH, arch))
    return variant


def new_node_labels(group: NodeGroup, zone: str | None = None) -> Mapping[str, str]:
    """The labels a new node of ``group`` is known to come up with: its template's, and ``zone`` (the
    one zone of the group a gang's fleet is kept to, :func:`launch_labels`) with its id where the
    template names no zone."""
    assert group.template is not None
    labels = group.template.labels
    if zone is None or zone not in group.zones or ZONE_KEYS_SET_ON_LAUNCH[0] in labels:
        return labels
    return _launch_variant(group, labels, zone, None)


def new_node_label_sets(group: NodeGroup) -> list[Mapping[str, str]]:
    """Every label set a new node of ``group`` may register with: one for each zone and type it may come
    up in (:func:`launch_labels`), else its template's."""
    assert group.template is not None
    return [*launch_labels(group)] or [group.template.labels]


def runs_on(
    daemonset: DaemonSetInfo,
    group: NodeGroup,
    sure: bool = False,
    sets: Sequence[Mapping[str, str]] | None = None,
) -> bool:
    """The DaemonSet controller would run a pod of ``daemonset`` on a new node of ``group`` in one of
    the zones and types it may come up in, or, ``sure``, in each of them (:func:`new_node_label_sets`: a
    DaemonSet of amd64 and arm64 nodes runs on every node of a group of both, though its template names
    no architecture) (NodeShouldRunDaemonPod: no other node named, selector and required affinity
    match, the NoSchedule and NoExecute taints tolerated). ``sets``: judged on these label sets
    instead."""
    assert group.template is not None
    taints, judge = group.template.taints, all if sure else any
    return daemonset.node_name is None and judge(
        not why_not_placeable(
            daemonset.node_selector, daemonset.required_terms, daemonset.tolerations, labels, taints, None
        )
        for labels in (new_node_label_sets(group) if sets is None else sets)
    )


def _requests_of(pods: Iterable[PodInfo | DaemonSetInfo]) -> Resources:
    """The pods' summed requests, and a pod slot each."""
    total: Resources = {}
    for pod in pods:
        add_into(total, pod.requests)
        total[PODS] = total.get(PODS, 0) + ONE_POD
    return total


def empty_room(ctx: Context) -> dict[GroupKey, Resources]:
    """Per group, the free room of a new node once the pods it runs anyway run
    (:func:`fresh_node_overhead`). A resource the template does not know and that is not checked then
    (ephemeral storage of an estimate: ``UNCHECKED_WHEN_UNKNOWN``) stays unknown: taken from nothing,
    it would read as less than none and refuse every pod asking any."""
    return {
        g.key: _room_after(g.template.allocatable, fresh_node_overhead(ctx, g)) if g.template else {}
        for g in ctx.groups
    }


def _room_after(allocatable: Resources, overhead: Resources) -> Resources:
    """``allocatable`` less ``overhead``, but for the unchecked resources ``allocatable`` does not know."""
    known = {k: v for k, v in overhead.items() if k in allocatable or not unchecked_when_unknown(k)}
    return subtract(allocatable, known)


def backoff_reason(ctx: Context, group: NodeGroup) -> str | None:
    """Why the group must not be asked for nodes now (its Launch process suspended, too many of its
    nodes unready, backed off, every pool it may launch from backed off, or a launch failed lately), or
    None. Some of its pools backed off: a note in its scale-up reason (SetDesiredCapacity cannot steer
    AWS away from them). Its desired capacity above its instances is then no capacity coming; the
    instances it did launch still are while its launches only fail (:func:`launched_only`), and nothing
    of it is when its Launch process is suspended or too many of its nodes are unready
    (spillway.planner.placement.place_on_launching)."""
    suspended = group.suspension(LAUNCH)
    if suspended is not None:  # no Failed activity is written then: the back-off above never fires
        return (
            f"{group.name}: {suspended}: Auto Scaling launches nothing there until it is resumed "
            "(a group that failed to launch for over a day is suspended by Auto Scaling itself)"
        )
    unhealthy = ctx.unhealthy.get(group.key)
    if unhealthy is not None:
        return unhealthy.reason
    entry = ctx.state.groups.get(group.key.stored)
    if entry is not None and aware(entry.backoff_until) > ctx.now:
        why = f" ({entry.reason})" if entry.reason else ""
        return f"{group.name} backed off until {iso(entry.backoff_until)}{why}"
    pools = pool_backoffs(ctx, group)
    if pools is not None:
        backed, total = pools
        if backed and len(backed) == total:
            return f"{group.name}: every pool it launches from is backed off ({'; '.join(backed)})"
        if backed:
            note = f"{'; '.join(backed)} (AWS may still launch there: a group cannot be pinned to a zone or type)"
            ctx.overflow_notes.setdefault(group.key, set()).add(note)
    return _launch_failed(ctx, group)


def launches_failing(ctx: Context, group: NodeGroup) -> bool:
    """Whether the group's launches are failing: backed off in the state, every pool it launches from
    backed off, or a launch failed lately (:func:`backoff_reason` for these). Its desired capacity above
    the instances it runs is then no capacity coming (nothing counts it as launching for pending pods),
    and no node to count toward the limits either: cluster-autoscaler's AWS provider marks such desired
    instances, once the group's latest scaling activity failed, as placeholders that cannot be
    fulfilled and removes them when it backs the group off (cloudprovider/aws/auto_scaling_groups.go,
    createPlaceholdersForDesiredNonStartedInstances)."""
    entry = ctx.state.groups.get(group.key.stored)
    if entry is not None and aware(entry.backoff_until) > ctx.now:
        return True
    pools = pool_backoffs(ctx, group)
    if pools is not None and pools[0] and len(pools[0]) == pools[1]:
        return True
    return _launch_failed(ctx, group) is not None


def launched_only(ctx: Context, group: NodeGroup) -> bool:
    """Whether the group's capacity launching is the instances it launched and no more: its launches
    fail (:func:`launches_failing`), so its desired capacity above them is a promise EC2 is not keeping,
    but an instance it did start, booting, is a node coming (a raise of a group over two zones that
    failed in one: Auto Scaling started the other zone's instances, and the scale-up's back-off keeps
    them, :meth:`spillway.act.scale.ScaleSteps.backoff`). cluster-autoscaler counts them so: its
    upcoming nodes are a node group's target size less its registered nodes, whatever its back-off
    (clusterstate GetUpcomingNodes), and its AWS provider removes only the placeholders for the desired
    instances never started (cloudprovider/aws/auto_scaling_groups.go). Not while its Launch process
    is suspended or too many of its nodes are unready (:func:`backoff_reason` says so first): nothing of
    it counts as launching then."""
    if group.suspension(LAUNCH) is not None or group.key in ctx.unhealthy:
        return False
    return launches_failing(ctx, group)


def _launch_failed(ctx: Context, group: NodeGroup) -> str | None:
    """Why the group is skipped for a launch that failed lately (any Failed launch activity: no capacity
    is coming, whatever the reason), or None. The reason says which: a capacity failure (a scale-up's
    back-off also backs off the pool EC2 names), or the group's own settings (a missing AMI, a subnet
    out of addresses), which no pool of it can launch with. Not once Auto Scaling made the latest
    good (:meth:`~spillway.model.nodegroup.NodeGroup.made_good`: a launch after it succeeded and the
    group runs its desired capacity), as cluster-autoscaler backs off only a group short of it; nor,
    while the group is short, one that started before its latest raise
    (:meth:`~spillway.model.nodegroup.NodeGroup.failed_before_raise`): only that raise's launches say
    whether it delivers. A back-off the scale-up wrote in the state still holds (:func:`backoff_reason`)."""
    window = timedelta(minutes=ctx.config.launch_failure_backoff_minutes)
    recent = [
        f
        for f in group.launch_failures
        if aware(f.at) > ctx.now - window and not group.failed_before_raise(f)
    ]
    if not recent or group.made_good(recent[-1]):
        return None
    last = recent[-1]
    message = last.message if len(last.message) <= 160 else last.message[:157] + "..."
    ago = minutes(ctx.now - aware(last.at))
    if last.kind == "quota":
        return f"{group.name} launch failed {ago} ago for an account quota: {message}"
    if last.capacity:
        return f"{group.name} launch failed {ago} ago for capacity: {message}"
    return (
        f"{group.name} launch failed {ago} ago, not for capacity (the group's own settings: no pool of it "
        f"can launch until they are fixed, so the whole group backs off): {message}"
    )


def pool_backoffs(
    ctx: Context, group: NodeGroup, zones: tuple[str, ...] | None = None, nodes: int = 1
) -> tuple[list[str], int] | None:
    """The group's pools (capacity type, zone, instance type) that are backed off now for a launch of
    ``nodes`` all at once (1: a raise of the group, which takes what there is; a gang's new nodes: its
    fleet's MinTargetCapacity), described, and how many pools it may launch from (in ``zones``, by
    default all of the group's); None when it has none known (no zone or no type). A back-off holds
    back a launch of at least as many nodes as EC2 refused at once (:meth:`PoolState.holds_back`): a
    gang's refusal is no word on fewer nodes, so a raise does not weigh it nor name it. A Spot group's
    launches are Spot, and on-demand too while its ``OnDemandBaseCapacity`` is not filled."""
    zones = group.zones if zones is None else zones
    if not ctx.state.pools or not zones or not group.launch_types():
        return None
    if group.capacity_type == "on-demand":
        kinds: tuple[str, ...] = ("on-demand",)
    else:
        kinds = ("on-demand", "spot") if group.sure_on_demand() else ("spot",)
    pools = [(kind, zone, itype) for kind in kinds for zone in zones for itype in group.launch_types()]
    backed = []
    for kind, zone, itype in pools:
        entry = ctx.state.pools.get(pool_key(kind, zone, itype))
        if entry is not None and aware(entry.backoff_until) > ctx.now and entry.holds_back(nodes):
            backed.append(f"{kind} {itype} in {zone} {_held_back(entry)}")
    return backed, len(pools)


def _held_back(entry: PoolState) -> str:
    """How a pool's back-off reads in a reason: "backed off [for gangs of N nodes or more] until ...: why"."""
    why = f": {entry.reason}" if entry.reason else ""
    size = f" for gangs of {entry.nodes} nodes or more" if entry.nodes > 1 else ""
    return f"backed off{size} until {iso(entry.backoff_until)}{why}"


def gang_backoff(ctx: Context, group: NodeGroup, nodes: int, zone: str | None = None) -> str | None:
    """Why a gang's ``nodes`` new nodes of ``group`` must not be asked for, all at once (its fleet's
    MinTargetCapacity): every pool it may launch from (in ``zone``, for a gang kept to one zone of a
    group spanning several) is backed off for that many, by a failed launch or a Spot interruption
    (EC2 had none: :func:`backoff_reason` weighs those for every launch) or by a gang's refusal of as
    many nodes or fewer; None when not. Pools held back only by gangs' refusals, not all of them, are
    noted in the group's scale-up reason, as :func:`backoff_reason` notes the others."""
    zones = (zone,) if zone is not None else None
    pools = pool_backoffs(ctx, group, zones, nodes) if nodes > 1 else None
    if pools is None:
        return None
    backed, total = pools
    if backed and len(backed) == total:
        where = f" in {zone}" if zone is not None else ""
        return (
            f"{group.name}: every pool it launches from{where} is backed off for a gang of {nodes} nodes "
            f"({'; '.join(backed)})"
        )
    ones = set((pool_backoffs(ctx, group, zones) or ([], 0))[0])
    if gangs_only := [b for b in backed if b not in ones]:
        note = f"{'; '.join(gangs_only)} (the gang's launch may still go there)"
        ctx.overflow_notes.setdefault(group.key, set()).add(note)
    return None


def zone_backoff(ctx: Context, group: NodeGroup, zone: str) -> str | None:
    """Why a launch of ``group`` kept to ``zone`` must not be asked for (a gang's fleet, which asks for
    that zone's subnets only: unlike a raise of the group, it can be steered off a pool), or None: every
    pool the group may launch from in the zone is backed off (a failed launch or a gang's fleet found it
    without capacity, a Spot interruption). The group's other zones are :func:`backoff_reason`'s."""
    pools = pool_backoffs(ctx, group, (zone,))
    if pools is None:
        return None
    backed, total = pools
    if backed and len(backed) == total:
        return f"{group.name}: every pool it launches from in {zone} is backed off ({'; '.join(backed)})"
    return None


def group_floor(ctx: Context, group: NodeGroup) -> Floor | None:
    """The highest size the group's scheduled actions take it to (their MinSize or DesiredCapacity:
    :func:`~spillway.model.schedule.floor_of`) within the scale-down idle threshold (a node drained now
    would be launched again then); None without one (computed once). A run already past is no floor:
    AWS set the group's sizes then, and the planner honours its MinSize itself. Nor
    is any while the group's ScheduledActions process is suspended: Auto Scaling runs none of them, nor
    one whose sizes lie outside the limits in force then (a MinSize or DesiredCapacity above the
    MaxSize, a MaxSize or DesiredCapacity below the MinSize; the action's own, else the group's): Auto
    Scaling refuses it when it runs (:func:`~spillway.model.schedule.size_refusal`), and the group's
    ``problems`` name it."""
    if group.key not in ctx.floors:
        horizon = timedelta(minutes=ctx.config_for(group).scale_down_idle_minutes)
        runs = group.scheduled and group.suspension(SCHEDULED_ACTIONS) is None
        limits = (group.max_size, group.min_size)
        floor = scheduled_floor(group.scheduled, ctx.now, horizon, *limits) if runs else None
        ctx.floors[group.key] = floor
    return ctx.floors[group.key]


def group_ceiling(ctx: Context, group: NodeGroup) -> Floor | None:
    """The lowest size the group's scheduled actions take it to (their DesiredCapacity or MaxSize:
    :func:`~spillway.model.schedule.ceiling_of`) within the scale-down idle threshold, the window
    floors use; None without one (computed once), or while the group's ScheduledActions process is
    suspended. When such an action runs, Auto Scaling terminates the instances above it of its own
    choosing, with no drain (its termination policy picks them; instances protected from scale-in are
    not taken), so scale-down drains down to it first and scale-up does not grow the group past it.
    An action Auto Scaling refuses (a DesiredCapacity or MaxSize below the MinSize in force:
    :func:`~spillway.model.schedule.size_refusal`) terminates nothing and is no ceiling."""
    if group.key not in ctx.ceilings:
        horizon = timedelta(minutes=ctx.config_for(group).scale_down_idle_minutes)
        runs = group.scheduled and group.suspension(SCHEDULED_ACTIONS) is None
        limits = (group.min_size, group.max_size)
        ceiling = scheduled_ceiling(group.scheduled, ctx.now, horizon, *limits) if runs else None
        ctx.ceilings[group.key] = ceiling
    return ctx.ceilings[group.key]


def scheduled_min(ctx: Context, group: NodeGroup, left: int) -> tuple[str, str] | None:
    """Scale-down's scheduled floor: (code, reason) when ``left`` nodes (what the group keeps before this
    drain) are at or below the size a scheduled action sets within the idle threshold."""
    floor = group_floor(ctx, group)
    if floor is None or left > floor.min_size:
        return None
    return (
        codes.SCHEDULED_MIN,
        f"group {group.name} at its scheduled {floor.field} {floor.min_size}: {floor.describe()}",
    )


def floor_report(ctx: Context) -> list[tuple[str, int, str, str]]:
    """(group, MinSize, why, region) for every group whose scheduled floor is above its own MinSize."""
    out = []
    for group in ctx.groups:
        floor = group_floor(ctx, group)
        if floor is not None and floor.min_size > group.min_size:
            out.append((group.name, floor.min_size, floor.describe(), group.region))
    return out


def why_not_movable(ctx: Context, pod: PodInfo, jobs: Mapping[str, JobInfo] | None = None) -> str | None:
    """Why a pending pod may not be moved once it runs (so must not run on spot unless it tolerates a
    spot taint), or None when it may: :func:`~spillway.planner.disruption.assess_move`, once per plan.
    ``jobs``: the snapshot's jobs by key, when the caller asks for many pods."""
    if pod.key not in ctx.movable:
        allow = ctx.snapshot.pdb_allowance(pod)
        cutoff = ctx.config.expendable_priority_cutoff
        jobs = ctx.snapshot.jobs_by_key() if jobs is None else jobs
        move = assess_move(pod, None, allow, ctx.now, cutoff, jobs)
        ctx.movable[pod.key] = None if move.movable else move.reason
    return ctx.movable[pod.key]


def has_spot(ctx: Context) -> bool:
    """Some group may launch spot (a mixed group counts, even while its on-demand base is not full)."""
    return any(g.capacity_type == "spot" for g in ctx.groups)


# Labels two groups' template nodes may differ in and still be balanced (cluster-autoscaler's
# --balance-similar-node-groups ignores these, and the node group identity labels EKS and eksctl set).
BALANCE_IGNORED = ZONE_ALIASES | frozenset(
    {
        ZONE_ID_LABEL,
        "kubernetes.io/hostname",
        "eks.amazonaws.com/nodegroup",
        "eks.amazonaws.com/sourceLaunchTemplateId",
        "eks.amazonaws.com/sourceLaunchTemplateVersion",
        "alpha.eksctl.io/nodegroup-name",
        "alpha.eksctl.io/instance-id",
        "k8s.amazonaws.com/eniConfig",
    }
)


# cluster-autoscaler's --max-allocatable-difference-ratio (default 0.05): how far twins' allocatable may
# differ, resource by resource, as a share of the larger (a template read from a node of one group and
# the estimate for the type of its twin that has none yet; nodes whose kernels keep a little more)
MAX_ALLOCATABLE_DIFFERENCE_PERCENT = 5


def similar_groups(ctx: Context, group: NodeGroup, candidates: Sequence[NodeGroup]) -> list[NodeGroup]:
    """With ``balance_similar_node_groups``: the other candidates of ``group``'s region whose template
    nodes differ from its only in zone and ignored labels (same taints, other labels and capacity type,
    allocatable alike), so that new nodes can be spread over them."""
    template = group.template
    if not ctx.config.balance_similar_node_groups or template is None:
        return []
    key = _balance_key(ctx, group)
    return [
        g
        for g in candidates
        if g is not group
        and g.region == group.region
        and _balance_key(ctx, g) == key
        and g.template is not None
        and alike(template.allocatable, g.template.allocatable)
    ]


def alike(a: Resources, b: Resources) -> bool:
    """Each resource both report within MAX_ALLOCATABLE_DIFFERENCE_PERCENT of the larger amount. One
    that only one reports is compared with 0 when it is an extended resource (a name with a ``/``: GPUs
    are not optional); another (an estimate knows no ephemeral storage) is not compared."""
    for name in sorted(a.keys() | b.keys()):
        if "/" not in name and (name not in a or name not in b):
            continue
        high, low = max(a.get(name, 0), b.get(name, 0)), min(a.get(name, 0), b.get(name, 0))
        if (high - low) * 100 > high * MAX_ALLOCATABLE_DIFFERENCE_PERCENT:
            return False
    return True


def _balance_key(ctx: Context, group: NodeGroup) -> tuple[object, ...] | None:
    template = group.template
    if template is None:
        return None
    ignored = BALANCE_IGNORED | set(ctx.config.balancing_ignore_labels)
    labels = tuple(sorted((k, v) for k, v in template.labels.items() if k not in ignored))
    return (labels, tuple(sorted(template.taints)), group.launch_capacity_type())
