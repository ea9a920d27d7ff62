"""EC2 Auto Scaling's own replacements and protections, as AWS documents them, and what Spillway makes of
them: Capacity Rebalancing (the group replaces an at-risk Spot instance itself), instances the group
runs above its desired capacity while it replaces some (Capacity Rebalancing, instance refresh, maximum
instance lifetime launch before they terminate), instance scale-in protection, and instances on their
way to Standby."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from plan_world import NOW, World, pending_codes, scale_up
from test_interrupt import INSTANCE, WARNED_AT, Rig, sample

from spillway.local import objects as o
from spillway.model.aws import AutoScalingGroup, bundled_instance_types
from spillway.model.cluster import ClusterSnapshot, NodeInfo, cordon_rebalance, cordon_replaced
from spillway.model.k8s import CORDONED_BY_SPILLWAY, GROUP_REPLACES, REPLACEMENT_WAIT_MINUTES
from spillway.model.nodegroup import build_node_groups
from spillway.model.snapshot import Snapshot
from spillway.planner import codes

# --- Capacity Rebalancing: the group replaces the at-risk instance itself ----------------------------


def rebalancing_world(*, capacity_rebalance: bool) -> Snapshot:
    """The interrupt tests' node, in a Spot group read from DescribeAutoScalingGroups as AWS prints it,
    with or without ``CapacityRebalance``; stored and read back as the snapshots table does."""
    raw = o.asg("spot-a", cluster="prod", desired=2, instance_type="g5.xlarge", instances=[INSTANCE])
    raw["CapacityRebalance"] = capacity_rebalance
    groups = build_node_groups(
        [AutoScalingGroup.model_validate(raw)], [], bundled_instance_types(), {}, "prod"
    )
    node = NodeInfo(
        name="ip-10-0-1-7.ec2.internal",
        allocatable={"cpu": 4000},
        labels={"node.kubernetes.io/instance-type": "g5.xlarge", "topology.kubernetes.io/zone": "us-east-1a"},
        provider_id=f"aws:///us-east-1a/{INSTANCE}",
    )
    cluster = ClusterSnapshot(cluster="prod", taken_at=WARNED_AT, nodes=(node,), pods=())
    return Snapshot.from_dict(Snapshot.build(cluster, groups, WARNED_AT).to_dict())


def test_a_rebalance_recommendation_in_a_group_that_rebalances_capacity_drains_without_terminating() -> None:
    """Amazon EC2 Auto Scaling User Guide, "Use Capacity Rebalancing to handle Amazon EC2 Spot
    Interruptions": with ``CapacityRebalance`` the group launches a replacement for an instance that got a
    rebalance recommendation, waits for it to pass its health check, then terminates the at-risk instance
    itself (through its terminate lifecycle hooks), without lowering its desired capacity. Spillway's
    drain terminated the instance with ShouldDecrementDesiredCapacity: the desired capacity dropped by one
    while the group's replacement came anyway, so the group stood one instance above its desired
    capacity and scaled in an instance of its own choosing, undrained; the at-risk node's pods had one
    node fewer. Such a drain now only cordons and evicts (aws-node-termination-handler drains, never
    terminates, on a rebalance recommendation of an ASG with Capacity Rebalancing): the group replaces
    and terminates the instance."""
    rig = Rig(rebalancing_world(capacity_rebalance=True))
    [out] = rig.handle(sample("interrupt-rebalance.json"))
    assert out["outcome"] == "drain_started" and out["group_replaces"] is True
    request = rig.workflows.requests[0].input
    assert request["terminate"] is False and request["force"] is False
    assert "replaces" in request["reason"]


def test_a_rebalance_recommendation_in_a_group_without_capacity_rebalancing_still_terminates() -> None:
    """Without Capacity Rebalancing the group replaces a Spot instance only once EC2 has interrupted it
    (same guide): the drain gives the node back with the decrement, as before."""
    rig = Rig(rebalancing_world(capacity_rebalance=False))
    [out] = rig.handle(sample("interrupt-rebalance.json"))
    assert out["outcome"] == "drain_started" and "group_replaces" not in out
    assert rig.workflows.requests[0].input["terminate"] is True


def test_a_spot_warning_in_a_group_that_rebalances_capacity_drains_without_terminating() -> None:
    """Same guide: when an instance of such a group gets the two-minute interruption notice, the group
    calls its terminate lifecycle hook and launches a replacement at once. Terminating it with the
    decrement as well, at the end of the drain, raced the group: a decrement that landed while the
    instance was still InService left the group's replacement one instance above the desired capacity,
    for the group to scale in as above. The forced drain evicts and leaves the termination to the group
    (EC2 reclaims the instance at the end of the two minutes in any case); the Spot pool is backed off as
    before."""
    rig = Rig(rebalancing_world(capacity_rebalance=True))
    [out] = rig.handle(sample("interrupt-spot-warning.json"))
    assert out["outcome"] == "drain_started" and out["group_replaces"] is True and out["backed_off"]
    request = rig.workflows.requests[0].input
    assert request["terminate"] is False and request["force"] is True


def test_a_spot_warning_in_a_group_without_capacity_rebalancing_still_terminates() -> None:
    """Without Capacity Rebalancing the group replaces the instance only after EC2 interrupted it and its
    health check failed: the drain gives the node back with the decrement, as before, and the planner
    places its pods away from the backed-off pool."""
    rig = Rig(rebalancing_world(capacity_rebalance=False))
    rig.handle(sample("interrupt-spot-warning.json"))
    assert rig.workflows.requests[0].input["terminate"] is True


def launched_since_into_a_rebalancing_group() -> Rig:
    """A rig whose snapshot puts the node's instance in no group (launched since), while AWS puts it in
    spot-new, a group with Capacity Rebalancing."""
    from fakes import FakeCloud

    snapshot = rebalancing_world(capacity_rebalance=False)
    snapshot = Snapshot.build(snapshot.cluster, [], WARNED_AT)  # no group knows the instance yet
    rig = Rig(snapshot)
    rig.cloud = FakeCloud(cluster="prod")
    rig.cloud.add_group("spot-new", [INSTANCE])["CapacityRebalance"] = True
    return rig


def test_a_rebalance_recommendation_of_a_node_launched_since_the_snapshot_asks_aws_about_its_group() -> None:
    """A node whose instance the snapshot puts in no group (launched since): the group AWS puts it in
    decides (DescribeAutoScalingInstances, DescribeAutoScalingGroups)."""
    rig = launched_since_into_a_rebalancing_group()
    [out] = rig.handle(sample("interrupt-rebalance.json"))
    assert out["outcome"] == "drain_started" and rig.workflows.requests[0].input["terminate"] is False


# --- above desired capacity: the group's own replacements are capacity launching ---------------------


def replacing_world() -> tuple[World, str, list[str]]:
    """Two Ready nodes at desired capacity 2; the group is replacing one of them (cordoned and emptied by
    Spillway's drain of its rebalance recommendation): its replacement is launching, an instance above
    the desired capacity, and the evicted pod waits for it."""
    world = World()
    nodes = world.group("spot", "m5.2xlarge", nodes=2, max_size=3)
    at_risk = nodes[0]
    world.cordon(at_risk, by_spillway=True)
    instance = world.node(at_risk)["spec"]["providerID"].rsplit("/", 1)[-1]
    world.node(at_risk)["metadata"]["annotations"][CORDONED_BY_SPILLWAY] = (  # as the interrupt names it
        f"2026-11-02T11:59:00Z held drain rebalance-{instance}: rebalance recommendation; {GROUP_REPLACES}"
    )
    g = world.groups["spot"]
    g["CapacityRebalance"] = True  # a drain of a rebalance recommendation terminates nothing only here
    replacement = o.instance_id("spot-replacement")
    g["Instances"].append({**g["Instances"][0], "InstanceId": replacement, "LifecycleState": "Pending"})
    world.pods("busy", 1, cpu="6", memory="8Gi", node_name=nodes[1], phase="Running")  # the other is full
    pods = world.pods("evicted", 1, cpu="6", memory="8Gi")
    return world, at_risk, pods


def test_a_notice_drains_cordon_of_the_nodes_own_instance_is_kept_in_the_snapshot() -> None:
    """observe stores NodeInfo in the snapshot (to_dict), the plan function reads it back (from_dict)."""
    node = NodeInfo(name="n", allocatable={}, provider_id=f"aws:///us-east-1a/{INSTANCE}", unschedulable=True,
                    cordoned_by_spillway=True, cordon_held=True, cordon_replaced=True)  # fmt: skip
    assert NodeInfo.from_dict(node.to_dict()) == node
    assert not NodeInfo.from_dict(replace(node, cordon_replaced=False).to_dict()).cordon_replaced
    rebalance = replace(
        node, cordon_rebalance=True
    )  # a rebalance recommendation's: given back after the wait
    assert NodeInfo.from_dict(rebalance.to_dict()) == rebalance


@pytest.mark.parametrize(("notice", "rebalance"), [("rebalance", True), ("interrupt", False)])
def test_the_snapshot_tells_a_rebalance_recommendations_held_drain_from_a_spot_warnings(
    notice: str, rebalance: bool
) -> None:
    world, at_risk = unreplaced_world(0)
    held_since(world, at_risk, 1, notice=notice)
    snapshot, *_ = world.parsed()
    [info] = [n for n in snapshot.nodes if n.name == at_risk]
    assert (info.cordon_replaced, info.cordon_rebalance) == (True, rebalance)


def test_an_instance_the_group_launches_above_its_desired_capacity_is_capacity_launching() -> None:
    """Capacity Rebalancing launches the replacement while the instance it replaces still runs, so the
    group briefly has more instances than its desired capacity, even above its MaxSize ("Use Capacity
    Rebalancing to handle Amazon EC2 Spot Interruptions"). The planner counted launching capacity as
    desired capacity less Ready nodes: 2 - 2 = 0 while the replacement booted, so the pods evicted from
    the at-risk node had nowhere to go and a second node was launched beside the group's replacement.
    The replacement is capacity launching for the node Spillway's drain emptied: the pods wait for it."""
    world, _, pods = replacing_world()
    result = world.plan()
    assert scale_up(result) == {}
    assert pending_codes(result) == {pods[0]: codes.FITS_LAUNCHING}


@pytest.mark.parametrize(
    "cordon",
    [
        "held drain maintenance-rack-7: kernel upgrade",  # an operator's drain of the node
        "held drain scheduled-{instance}-1111111111-force for instance-event-1: scheduled change x",
        "held drain rebalance-i-0ffffffffffffffff: rebalance recommendation",  # another instance's name
    ],
)
def test_only_a_notice_the_group_replaces_gives_a_nodes_room_up_to_an_instance_above_desired(
    cordon: str,
) -> None:
    """A group with Capacity Rebalancing launches a replacement on a rebalance recommendation or a Spot
    warning only (Auto Scaling User Guide, "Use Capacity Rebalancing to handle Amazon EC2 Spot
    Interruptions"), not because a node is cordoned. Every drain no plan started counted as an at-risk
    node the group replaces, so while the group ran an instance above its desired capacity for another
    cause (here an instance refresh launching before it terminates), an operator's drain, or a scheduled
    change's, made that instance room for the drained pods: they waited for a node that was never
    theirs, and nothing was launched. Only the drain of its own instance's notice counts now."""
    world, at_risk, pods = replacing_world()
    instance = world.node(at_risk)["spec"]["providerID"].rsplit("/", 1)[-1]
    annotations = world.node(at_risk)["metadata"]["annotations"]
    annotations[CORDONED_BY_SPILLWAY] = "2026-11-02T11:59:00Z " + cordon.format(instance=instance)
    result = world.plan()
    assert pending_codes(result).get(pods[0]) != codes.FITS_LAUNCHING
    assert scale_up(result) == {"spot": (2, 3, pods)}


def test_at_desired_capacity_with_nothing_above_it_the_pod_still_gets_a_node() -> None:
    """Without the replacement (desired capacity 2, two Ready nodes, one of them being emptied) nothing is
    launching, and the pod gets a new node as before."""
    world, _, pods = replacing_world()
    world.groups["spot"]["Instances"].pop()
    result = world.plan()
    assert scale_up(result) == {"spot": (2, 3, pods)}


# --- instance scale-in protection ----------------------------------------------------------------


def protected_world(*, group_protects_new: bool) -> tuple[World, list[str]]:
    """Three idle nodes of a group; the first instance is protected from scale-in."""
    world = World()
    nodes = world.group("web", "m5.2xlarge", nodes=3)
    for node in nodes:
        world.idle_since(node, 60)
    g = world.groups["web"]
    g["NewInstancesProtectedFromScaleIn"] = group_protects_new
    for i, instance in enumerate(g["Instances"]):
        instance["ProtectedFromScaleIn"] = group_protects_new or i == 0
    return world, nodes


def test_an_instance_protected_from_scale_in_on_its_own_is_kept() -> None:
    """Amazon EC2 Auto Scaling User Guide, "Use instance scale-in protection": the setting controls which
    instances the group may terminate when it scales in, and does not protect an instance from
    TerminateInstanceInAutoScalingGroup, the call Spillway's drains end with. So a drain ignored it: an
    instance somebody protected by hand (set-instance-protection, its group protecting no new
    instances) was drained and terminated like any idle node. It is kept (``scale-in-protected``)."""
    world, nodes = protected_world(group_protects_new=False)
    result = world.plan(max_scale_in_fraction=1.0)
    assert sorted(d.node for d in result.drain) == sorted(nodes[1:])
    kept = {k.node: k for k in result.kept}
    assert kept[nodes[0]].code == codes.SCALE_IN_PROTECTED
    assert "ProtectedFromScaleIn" in kept[nodes[0]].reason


def test_a_busy_protected_instance_is_not_consolidated() -> None:
    """Consolidation terminates the node it empties just the same: a protected one is not judged."""
    world, nodes = protected_world(group_protects_new=False)
    for node in nodes:
        world.state["nodes"].pop(node)
    world.pods("light", 1, cpu="1", memory="1Gi", node_name=nodes[0], phase="Running",
               annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"})  # fmt: skip
    result = world.plan(consolidation="when-underutilized", max_scale_in_fraction=1.0)
    assert nodes[0] not in {d.node for d in result.drain}
    assert {k.node: k.code for k in result.kept}[nodes[0]] == codes.SCALE_IN_PROTECTED


def test_a_group_that_protects_every_new_instance_is_scaled_down_as_before() -> None:
    """A group that protects every instance it launches (NewInstancesProtectedFromScaleIn) keeps the group
    itself from choosing which instance a lower desired capacity terminates: the setup
    cluster-autoscaler users on AWS rely on (kubernetes/autoscaler issue 144; the protection
    does not stop TerminateInstanceInAutoScalingGroup, through which cluster-autoscaler's AWS provider
    removes the node it chose, cloudprovider/aws/auto_scaling_groups.go DeleteInstances). It says
    nothing of one node: Spillway, which ends its drains the same way, drains such nodes as before."""
    world, nodes = protected_world(group_protects_new=True)
    result = world.plan(max_scale_in_fraction=1.0)
    assert sorted(d.node for d in result.drain) == sorted(nodes)


def test_make_room_still_uses_a_protected_node_it_keeps() -> None:
    """Make room moves pods off a busy node to give it to pending pods and terminates nothing: the node's
    scale-in protection does not keep it from that."""
    from test_planner_consolidation import UNDER, half_full

    world, (a, _) = half_full()
    for instance in world.groups["cpu"]["Instances"]:
        instance["ProtectedFromScaleIn"] = True  # by hand, on each: the group protects no new instance
    world.pods("big", 1, cpu="7", memory="1Gi")
    result = world.plan(max_scale_in_fraction=1.0, **UNDER)
    assert result.scale_up == ()
    (drain,) = result.drain
    assert (drain.node, drain.code, drain.terminate) == (a, codes.MAKE_ROOM, False)


# --- instances the group is terminating ---------------------------------------------------------


def test_the_node_of_an_instance_its_group_is_terminating_offers_no_room() -> None:
    """Amazon EC2 Auto Scaling User Guide, "Amazon EC2 Auto Scaling instance lifecycle": an instance the
    group terminates (a scale-in by somebody else, a health check replacement, an instance refresh) is
    ``Terminating`` and "can't be put back into service"; a terminate lifecycle hook holds it in
    ``Terminating:Wait`` for up to its HeartbeatTimeout (an hour by default), its Node Ready and
    schedulable unless a drain cordons it (another team's hook does not). The planner counted that
    Node's free room: a pending pod fitted there (``fits-free-room``), nothing was launched, and
    kube-scheduler put it on a node about to go. Its room is no room."""
    world = World()
    nodes = world.group("web", "m5.2xlarge", nodes=2, max_size=3)
    world.pods("busy", 1, cpu="6", memory="8Gi", node_name=nodes[1], phase="Running")  # the other is full
    world.groups["web"]["Instances"][0]["LifecycleState"] = "Terminating:Wait"
    world.groups["web"]["DesiredCapacity"] = 1  # somebody scaled the group in; it chose the first
    pods = world.pods("web", 1, cpu="6", memory="8Gi")
    result = world.plan()
    assert pods[0] not in pending_codes(result)  # not fits-free-room: a new node of its own
    assert scale_up(result) == {"web": (1, 2, pods)}


def test_an_instance_launched_before_the_one_it_replaces_is_no_room_while_that_one_still_serves() -> None:
    """An instance refresh (or a maximum instance lifetime replacement) whose instance maintenance policy
    launches before it terminates runs one instance above the desired capacity for a while, then
    terminates an old one and is back at the desired capacity (EC2 Auto Scaling User Guide, "Replace
    Auto Scaling instances based on an instance maintenance policy"; "Amazon EC2 Auto Scaling instance
    lifecycle": the old instance goes ``Terminating`` only then). Until then the instance it replaces is
    InService, its Node Ready, uncordoned and running its pods, all of it counted. Counting the new
    instance as capacity launching as well counted one node twice: a new pending pod was planned onto
    it (``fits-launching``) and nothing was launched, though the pods of the node it replaces need that
    room once the group terminates their node. No node of the group gives its room up for the
    replacement, so the new pod gets a node of its own, as it did before."""
    world = World()
    nodes = world.group("web", "m5.2xlarge", nodes=2, max_size=4)
    for node in nodes:
        world.pods(f"on-{node}", 1, cpu="6", memory="8Gi", node_name=node, phase="Running")
    g = world.groups["web"]
    g["Instances"].append(
        {**g["Instances"][0], "InstanceId": o.instance_id("web-new"), "LifecycleState": "Pending"}
    )
    pods = world.pods("fresh", 1, cpu="6", memory="8Gi")
    result = world.plan()
    assert pending_codes(result).get(pods[0]) != codes.FITS_LAUNCHING
    assert scale_up(result) == {"web": (2, 3, pods)}


def test_a_spot_warning_of_a_node_launched_since_into_a_rebalancing_group_names_that_group() -> None:
    """The drain request names the group AWS put a Node's instance in when the snapshot knew none, so
    that the drain checks that group and, should the group detach the instance before the drain starts,
    can see that group's record of the detach. In a group with Capacity Rebalancing the request also says
    ``terminate: false``; it lost the group doing so, and a detach since made the Spot warning's drain
    "in no Auto Scaling group": cancelled, the pods dying with the instance."""
    rig = launched_since_into_a_rebalancing_group()
    [out] = rig.handle(sample("interrupt-spot-warning.json"))
    assert out["outcome"] == "drain_started" and out["group_replaces"] is True
    request = rig.workflows.requests[0].input
    assert request["terminate"] is False
    assert request.get("group") == "spot-new", request
    # AWS is asked once, for whether it is ours, the group to name and its Capacity Rebalancing (the
    # Spot warning's two minutes are short): before, placement and group were each read twice
    reads = [c for c, _ in rig.cloud.calls if c in ("placement", "describe_group")]
    assert reads == ["placement", "describe_group"], rig.cloud.calls


# --- a replacement that never comes: the emptied node is given back --------------------------------


def unreplaced_world(
    minutes_ago: float, *, terminating: bool = False, busy: bool = False
) -> tuple[World, str]:
    """A group with Capacity Rebalancing at its MaxSize whose at-risk node Spillway's drain of a rebalance
    recommendation emptied ``minutes_ago`` (its cordon's time) and left cordoned for the group to replace:
    no replacement is launching (no Spot capacity in another pool, or no room above MaxSize)."""
    world = World()
    nodes = world.group("spot", "m5.2xlarge", nodes=2, max_size=2)
    at_risk = nodes[0]
    world.cordon(at_risk, by_spillway=True)
    instance = world.node(at_risk)["spec"]["providerID"].rsplit("/", 1)[-1]
    stamp = (NOW - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    world.node(at_risk)["metadata"]["annotations"][CORDONED_BY_SPILLWAY] = (
        f"{stamp} held drain rebalance-{instance}: rebalance recommendation; {GROUP_REPLACES}"
    )
    g = world.groups["spot"]
    g["CapacityRebalance"] = True
    if terminating:  # the group did replace it: its replacement passed, it terminates the instance
        g["Instances"][0]["LifecycleState"] = "Terminating:Wait"
    if busy:  # the drain still evicts (its pod has not left yet)
        world.pods("leaving", 1, cpu="1", memory="1Gi", node_name=at_risk, phase="Running")
    world.pods("busy", 1, cpu="6", memory="8Gi", node_name=nodes[1], phase="Running")
    return world, at_risk


def test_a_node_its_group_never_replaces_is_given_back_after_the_replacement_wait() -> None:
    """Capacity Rebalancing launches before it terminates, and a group at or near its MaxSize, or with no
    Spot capacity in another pool, may launch nothing at all (Auto Scaling User Guide, "Capacity
    Rebalancing behavior"); the rebalance recommendation's drain had emptied the node and kept its
    cordon for the group, so the node stayed cordoned, empty and paid for until orphaned_drain_minutes
    (27 h), and no plan reused it. After REPLACEMENT_WAIT_MINUTES without the group terminating it, the
    plan gives it back (uncordon, its cordon compared as for an orphaned drain): a rebalance
    recommendation is advice, and the at-risk node is a working node until a Spot warning comes."""
    world, at_risk = unreplaced_world(REPLACEMENT_WAIT_MINUTES + 1)
    result = world.plan()
    assert [u.node for u in result.uncordon] == [at_risk]
    [kept] = [k for k in result.kept if k.node == at_risk]
    assert kept.code == codes.ORPHANED_DRAIN_RESTORED
    assert "has not replaced it" in kept.reason


@pytest.mark.parametrize(
    ("minutes_ago", "terminating", "busy"),
    [
        (REPLACEMENT_WAIT_MINUTES - 1, False, False),  # the group may still be launching its replacement
        (REPLACEMENT_WAIT_MINUTES + 1, True, False),  # it replaced it: the instance is terminating
        (REPLACEMENT_WAIT_MINUTES + 1, False, True),  # the drain still evicts: it holds the node
    ],
)
def test_a_node_its_group_may_still_replace_stays_held(
    minutes_ago: float, terminating: bool, busy: bool
) -> None:
    world, at_risk = unreplaced_world(minutes_ago, terminating=terminating, busy=busy)
    result = world.plan()
    assert at_risk not in [u.node for u in result.uncordon]
    assert at_risk not in [d.node for d in result.drain]


def held_since(world: World, node: str, minutes_ago: float, notice: str = "rebalance") -> None:
    """The node's cordon: the held drain of its instance's ``notice`` (the interrupt function's drain
    name) in a group with Capacity Rebalancing, cordoned ``minutes_ago``."""
    instance = world.node(node)["spec"]["providerID"].rsplit("/", 1)[-1]
    stamp = (NOW - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    world.node(node)["metadata"]["annotations"][CORDONED_BY_SPILLWAY] = (
        f"{stamp} held drain {notice}-{instance}: {notice} notice; {GROUP_REPLACES}"
    )


def test_the_plan_that_gives_a_node_back_launches_nothing_for_its_evicted_pod() -> None:
    """The plan that gives back a node its group has not replaced in REPLACEMENT_WAIT_MINUTES restores
    its room only after its scale-up, which does not see that room. Not counting the group's instance
    above its desired capacity as the node's replacement in that plan launched a third node for the
    evicted pod, beside the replacement and the restored node, both with room for it: the replacement
    counts for the node until the plan after the give-back, which sees the node's own room."""
    world, at_risk, pods = replacing_world()
    held_since(world, at_risk, REPLACEMENT_WAIT_MINUTES + 1)
    result = world.plan()
    assert [u.node for u in result.uncordon] == [at_risk]
    assert scale_up(result) == {}
    assert pending_codes(result) == {pods[0]: codes.FITS_LAUNCHING}


@pytest.mark.parametrize("notice", ["rebalance", "interrupt"])
def test_a_held_node_not_given_back_no_longer_counts_a_replacement_after_the_wait(notice: str) -> None:
    """A held node the plan does not give back (its drain still evicts, or a Spot warning's) stops
    counting the group's instance above its desired capacity as its replacement after the wait."""
    world, at_risk, pods = replacing_world()
    held_since(world, at_risk, REPLACEMENT_WAIT_MINUTES + 1, notice=notice)
    world.pods("leaving", 1, cpu="1", memory="1Gi", node_name=at_risk, phase="Running")
    result = world.plan()
    assert result.uncordon == ()
    assert pending_codes(result).get(pods[0]) != codes.FITS_LAUNCHING


def test_a_replacement_is_counted_while_the_node_waits_for_it() -> None:
    world, at_risk, pods = replacing_world()
    held_since(world, at_risk, REPLACEMENT_WAIT_MINUTES - 1)
    result = world.plan()
    assert scale_up(result) == {} and result.uncordon == ()
    assert pending_codes(result) == {pods[0]: codes.FITS_LAUNCHING}


def test_a_spot_warnings_held_node_is_not_given_back() -> None:
    """EC2 reclaims an instance two minutes after its Spot interruption warning: the give-back after
    REPLACEMENT_WAIT_MINUTES is for a rebalance recommendation's drain (advice: the node still works),
    and uncordoned a Spot warning's node, whose instance is going or gone."""
    world, at_risk = unreplaced_world(0)
    held_since(world, at_risk, REPLACEMENT_WAIT_MINUTES + 1, notice="interrupt")
    result = world.plan()
    assert at_risk not in [u.node for u in result.uncordon]
    assert at_risk not in [d.node for d in result.drain]


def test_a_rebalance_drain_that_terminates_its_node_is_not_raced_by_a_give_back() -> None:
    """In a group without Capacity Rebalancing at the notice the rebalance recommendation's drain
    terminates the instance once it is empty (``terminate`` true; its cordon does not say the group
    replaces it). With a REBALANCE_DEADLINE_SECONDS above REPLACEMENT_WAIT_MINUTES, a drain whose pods a
    PodDisruptionBudget held past the wait empties the node, and the next plan uncordoned it before the
    drain's terminate step, whose check then found its cordon gone and cancelled the drain: the at-risk
    node stayed, after all its pods had been moved off it."""
    world, at_risk = unreplaced_world(REPLACEMENT_WAIT_MINUTES + 1)
    world.groups["spot"]["CapacityRebalance"] = False
    instance = world.node(at_risk)["spec"]["providerID"].rsplit("/", 1)[-1]
    stamp = (NOW - timedelta(minutes=REPLACEMENT_WAIT_MINUTES + 1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    world.node(at_risk)["metadata"]["annotations"][CORDONED_BY_SPILLWAY] = (  # as the interrupt writes it
        f"{stamp} held drain rebalance-{instance}: rebalance recommendation 5a1f3c9e-2b7d-4e61-9c0a-8f3e2d1b6a47"
    )
    result = world.plan()
    assert at_risk not in [u.node for u in result.uncordon]
    assert at_risk not in [d.node for d in result.drain]


def test_the_cordon_tells_a_rebalance_drain_that_terminates_from_one_that_leaves_the_node_to_its_group() -> (
    None
):
    """What the interrupt function's drain writes, read back: only a drain that leaves the instance to its
    group (Capacity Rebalancing at the notice) is one the group may never replace."""
    for capacity_rebalance in (True, False):
        rig = Rig(rebalancing_world(capacity_rebalance=capacity_rebalance))
        rig.handle(sample("interrupt-rebalance.json"))
        [request] = rig.workflows.requests
        annotation = f"2026-11-02T11:59:00Z held drain {request.name}: {request.input['reason']}"
        provider_id = f"aws:///us-east-1a/{INSTANCE}"
        assert cordon_rebalance(annotation, provider_id) is capacity_rebalance
        assert cordon_replaced(annotation, provider_id)


def test_a_node_whose_group_no_longer_rebalances_capacity_is_given_back_after_the_wait() -> None:
    """Capacity Rebalancing turned off on the group after the recommendation's drain emptied the node:
    the group will never replace it, and the wait for its replacement fell back to
    orphaned_drain_minutes (27 h). It is given back after REPLACEMENT_WAIT_MINUTES as in a group that
    still rebalances."""
    world, at_risk = unreplaced_world(REPLACEMENT_WAIT_MINUTES + 1)
    world.groups["spot"]["CapacityRebalance"] = False
    result = world.plan()
    assert [u.node for u in result.uncordon] == [at_risk]
