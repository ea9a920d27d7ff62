"""A CapacityQuota counts what its nodes have, not what they offer pods: the sig-autoscaling API
(cluster-autoscaler apis/capacityquota/autoscaling.x-k8s.io/v1beta1) sums the resources each selected
node reports in ``status.capacity``. cluster-autoscaler's ``--cores-total`` and ``--memory-total`` do the
same (its scale-up resource manager reads ``status.capacity``, a group's template node at its nominal
size). Tenant limits, ``max_nodes_total`` and ``gpu_total`` keep counting allocatable (or nodes).

Capacity is kept per node (``status.capacity``; a node that reports none counts its allocatable), per
group template (the instance type's nominal vCPUs and memory for a group with no node; a node of its own
gives its capacity with its allocatable; a ``node-template/resources`` tag sets both, as
cluster-autoscaler's AWS template node copies capacity to allocatable)."""

from __future__ import annotations

from typing import Any

from plan_world import NOW, World, pending_codes, pending_reasons, scale_up

from spillway.local import objects as o
from spillway.model.cluster import NodeInfo
from spillway.model.k8s import Node
from spillway.model.nodegroup import NodeGroup, with_zone_ids
from spillway.model.shared import QuotaInfo
from spillway.observe import quota_usage
from spillway.planner import ScalingPlan, plan
from spillway.planner.limits import Seen, zone_keys

MIB = 2**20 * 1000  # the planner's milli-units
GIB = 1024 * MIB
SMALL = {"cpu": "5", "memory": "4Gi"}  # one per m5.2xlarge (cpu), far below its memory


def kube_node(capacity: dict[str, str] | None, allocatable: dict[str, str] | None) -> Node:
    status: dict[str, Any] = {"conditions": [{"type": "Ready", "status": "True"}]}
    if capacity is not None:
        status["capacity"] = capacity
    if allocatable is not None:
        status["allocatable"] = allocatable
    return Node.model_validate({"metadata": {"name": "n1", "labels": {"pool": "a"}}, "status": status})


M5 = kube_node({"cpu": "8", "memory": "32Gi", "pods": "58"}, {"cpu": "7910m", "memory": "30Gi", "pods": "58"})


# --- a node's capacity --------------------------------------------------------------------------------


def test_a_node_keeps_the_capacity_it_reports_beside_its_allocatable() -> None:
    info = NodeInfo.from_node(M5)
    assert info.capacity == {"cpu": 8000, "memory": 32 * GIB, "pods": 58_000}
    assert info.allocatable == {"cpu": 7910, "memory": 30 * GIB, "pods": 58_000}


def test_a_node_that_reports_no_capacity_counts_its_allocatable() -> None:
    info = NodeInfo.from_node(kube_node(None, {"cpu": "7910m", "memory": "30Gi"}))
    assert info.capacity == info.allocatable == {"cpu": 7910, "memory": 30 * GIB}


def test_a_resource_missing_from_capacity_counts_its_allocatable() -> None:
    info = NodeInfo.from_node(kube_node({"cpu": "8"}, {"cpu": "7910m", "nvidia.com/gpu": "1"}))
    assert info.capacity == {"cpu": 8000, "nvidia.com/gpu": 1000}


def test_capacity_survives_the_stored_snapshot_in_a_compact_form() -> None:
    info = NodeInfo.from_node(M5)
    stored = info.to_dict()

    assert stored["ca"] == {"cpu": 8000, "memory": 32 * GIB}  # only what differs from allocatable
    assert NodeInfo.from_dict(stored) == info
    same = NodeInfo.from_node(kube_node({"cpu": "8"}, {"cpu": "8"}))
    assert "ca" not in same.to_dict()  # a node whose capacity is its allocatable stores as before


def test_a_snapshot_stored_before_capacity_reads_it_as_allocatable() -> None:
    stored = NodeInfo.from_node(M5).to_dict()
    del stored["ca"]
    info = NodeInfo.from_dict(stored)
    assert info.capacity == info.allocatable


# --- a group's template -------------------------------------------------------------------------------


def template_of(world: World, name: str = "g") -> Any:
    _, groups, _, _ = world.parsed()
    template = next(g for g in groups if g.name == name).template
    assert template is not None
    return template


def test_a_group_with_no_node_counts_its_types_nominal_capacity() -> None:
    world = World()
    world.group("g", "m5.2xlarge")

    template = template_of(world)

    assert (template.capacity["cpu"], template.capacity["memory"]) == (8000, 32 * GIB)  # 8 vCPUs, 32 GiB
    assert template.allocatable["memory"] < 30 * GIB  # the estimate pods may use is unchanged
    assert template.capacity["pods"] == template.allocatable["pods"]


def test_a_gpu_group_with_no_node_counts_its_gpus_in_capacity() -> None:
    world = World()
    world.group("g", "g5.12xlarge", gpu_taint=True)
    template = template_of(world)
    assert template.capacity["nvidia.com/gpu"] == template.allocatable["nvidia.com/gpu"] == 4000
    assert template.capacity["cpu"] == 48_000


def test_a_groups_own_node_gives_its_template_its_capacity() -> None:
    world = World()
    (node,) = world.group("g", "m5.2xlarge", nodes=1)
    world.node(node)["status"]["capacity"].update({"cpu": "8", "memory": "31Gi"})

    template = template_of(world)

    assert (template.capacity["cpu"], template.capacity["memory"]) == (8000, 31 * GIB)
    assert (template.allocatable["cpu"], template.allocatable["memory"]) == (7910, 30 * GIB)


def test_a_resources_tag_sets_capacity_and_allocatable_alike() -> None:
    world = World()
    (node,) = world.group("g", "m5.2xlarge", nodes=1, resources={"memory": "28Gi"})
    world.node(node)["status"]["capacity"]["memory"] = "31Gi"
    bare = World()
    bare.group("g", "m5.2xlarge", resources={"memory": "28Gi"})

    for template in (template_of(world), template_of(bare)):
        assert template.capacity["memory"] == template.allocatable["memory"] == 28 * GIB


def test_template_capacity_survives_the_stored_snapshot_and_older_ones_read_as_allocatable() -> None:
    world = World()
    world.group("g", "m5.2xlarge")
    _, groups, _, _ = world.parsed()
    (group,) = [g for g in groups if g.name == "g"]
    stored = group.to_dict()

    assert NodeGroup.from_dict(stored) == group
    del stored["template"]["capacity"]
    old = NodeGroup.from_dict(stored).template
    assert old is not None and old.capacity == old.allocatable


# --- what CapacityQuotas count ------------------------------------------------------------------------


def test_status_used_sums_node_capacity() -> None:
    quota = QuotaInfo("q", limits={"cpu": 16_000, "memory": 64 * GIB, "nodes": 10_000})
    used = quota_usage(quota, [NodeInfo.from_node(M5)])
    assert used == {"cpu": 8000, "memory": 32 * GIB, "nodes": 1000}


def test_a_quota_full_by_node_capacity_stops_scale_up() -> None:
    # One m5.2xlarge: capacity 32Gi (30Gi allocatable). A 62Gi quota has no room for a second
    # (32 + 32 > 62), though their allocatable (30 + 30) would fit.
    w = World()
    [name] = w.group("cpu-east", "m5.2xlarge", max_size=10, nodes=1)
    w.node(name)["status"]["capacity"].update({"cpu": "8", "memory": "32Gi"})
    w.capacity_quota("mem-cap", {"memory": "62Gi"})
    pods = w.pods("p", 2, **SMALL)

    result = w.plan()

    assert "cpu-east" not in scale_up(result)
    assert "capacity-quota" in {pending_codes(result).get(p) for p in pods}
    reason = next(
        r for p, r in pending_reasons(result).items() if pending_codes(result)[p] == "capacity-quota"
    )
    assert "CapacityQuota mem-cap limit memory=62Gi reached (memory=32Gi used)" in reason


def test_a_quota_counts_a_new_node_of_a_group_at_zero_at_its_nominal_size() -> None:
    # Two m5.2xlarge have 64 GiB: a 63Gi quota holds one, though two estimates of allocatable
    # (2 x 28.6 GiB) would fit.
    w = World()
    w.group("cpu-east", "m5.2xlarge", max_size=10)
    w.capacity_quota("mem-cap", {"memory": "63Gi"})
    pods = w.pods("p", 2, **SMALL)

    result = w.plan()

    assert scale_up(result)["cpu-east"][:2] == (0, 1)
    assert sorted(pending_codes(result).get(p, "") for p in pods) == ["", "capacity-quota"]


def test_launching_capacity_is_charged_to_a_quota_at_the_templates_capacity() -> None:
    # Desired 1, no node yet: the launching m5.2xlarge is 32 GiB of a 63Gi quota.
    w = World()
    w.group("cpu-east", "m5.2xlarge", max_size=10, desired=1)
    w.capacity_quota("mem-cap", {"memory": "63Gi"})
    w.pods("p", 2, **SMALL)

    result = w.plan()

    assert "cpu-east" not in scale_up(result)


# --- what the other limits count ----------------------------------------------------------------------


def test_a_tenant_limit_still_counts_allocatable() -> None:
    # Two estimates of allocatable (2 x 28.6 GiB) fit a tenant's 58Gi; their capacity (64) would not.
    w = World()
    w.group("cpu-east", "m5.2xlarge", max_size=10)
    w.namespace("team-a")
    w.pods("a", 2, namespace="team-a", **SMALL)

    result = w.plan(tenants={"team-a": {"limits": {"memory": "58Gi"}}})

    assert scale_up(result)["cpu-east"][:2] == (0, 2)


def test_memory_total_counts_capacity_as_cluster_autoscaler_does() -> None:
    w = World()
    w.group("cpu-east", "m5.2xlarge", max_size=10)
    w.pods("p", 2, **SMALL)

    # cluster-autoscaler counts a template m5.2xlarge as 32 GiB: 63 holds one, 64 two
    assert scale_up(w.plan(memory_total="0:63"))["cpu-east"][:2] == (0, 1)
    assert scale_up(w.plan(memory_total="0:64"))["cpu-east"][:2] == (0, 2)


def test_memory_total_counts_an_existing_nodes_capacity() -> None:
    # One node of 32 GiB (30Gi allocatable) and a total of 62 GiB: no room for a second of 32
    w = World()
    [name] = w.group("cpu-east", "m5.2xlarge", max_size=10, nodes=1)
    w.node(name)["status"]["capacity"].update({"cpu": "8", "memory": "32Gi"})
    w.pods("p", 2, **SMALL)

    result = w.plan(memory_total="0:62")

    assert "cpu-east" not in scale_up(result)
    reasons = " ".join(pending_reasons(result).values())
    assert "cluster memory_total limit memory=62Gi reached (memory=32Gi used)" in reasons


# --- a new node whose zone or type Auto Scaling chooses -----------------------------------------------

ZONE = "topology.kubernetes.io/zone"
WHOLE = {"cpu": "5", "memory": "4Gi"}  # one per m5.2xlarge


def two_zone_world(quota_zone: str) -> tuple[World, list[str]]:
    """One node in us-east-1a (its group full), a group over us-east-1a and us-east-1b with room, and a
    CapacityQuota of 2 nodes in ``quota_zone``; three pods that each need a node of their own, one of
    which the node holds."""
    w = World()
    w.group("east-a", "m5.2xlarge", max_size=1, nodes=1, zones=["us-east-1a"])
    w.group("east-ab", "m5.2xlarge", max_size=10, zones=["us-east-1a", "us-east-1b"])
    w.capacity_quota("zone-cap", {"nodes": "2"}, match_labels={ZONE: quota_zone})
    return w, w.pods("p", 3, **WHOLE)


def test_a_zone_quota_counts_the_new_nodes_of_a_group_over_that_zone_and_another() -> None:
    """The group's template names no zone (Auto Scaling balances its nodes over both), so the quota's
    selector never matched its new nodes: three were planned into a quota that had room for one more,
    wherever Auto Scaling put them. A new node counts against it if it may land in its zone."""
    w, pods = two_zone_world("us-east-1a")

    result = w.plan()

    assert scale_up(result)["east-ab"][:2] == (0, 1)
    [held] = [p for p in pods if pending_codes(result).get(p) == "groups-exhausted"]  # east-a: max-size
    assert "east-ab: CapacityQuota zone-cap limit nodes=2 reached" in pending_reasons(result)[held]


def test_a_zone_quota_leaves_a_group_alone_that_cannot_launch_in_its_zone() -> None:
    w, pods = two_zone_world("us-east-1c")

    result = w.plan()

    assert scale_up(result)["east-ab"][:2] == (0, 2)
    assert "capacity-quota" not in [pending_codes(result).get(p) for p in pods]


def test_a_type_quota_counts_the_new_nodes_of_a_mixed_group_that_may_launch_that_type() -> None:
    """A mixed group's template names no instance type (its allocation strategy picks one of the
    overrides): a quota on m5.4xlarge nodes counts its new nodes, as it would count the m5.4xlarge one
    may turn out to be."""
    w = World()
    w.group("mixed", "m5.2xlarge", max_size=10, mixed=True, labels={})
    raw = w.groups["mixed"]
    raw["Tags"] = [t for t in raw["Tags"] if not t["Key"].endswith("node.kubernetes.io/instance-type")]
    raw["MixedInstancesPolicy"]["LaunchTemplate"]["Overrides"] = [
        {"InstanceType": "m5.2xlarge"}, {"InstanceType": "m5.4xlarge"}
    ]  # fmt: skip
    w.capacity_quota(
        "big-cap", {"nodes": "1"}, match_labels={"node.kubernetes.io/instance-type": "m5.4xlarge"}
    )
    w.pods("p", 3, **WHOLE)

    _, groups, _, _ = w.parsed()
    [group] = [g for g in groups if g.name == "mixed"]
    assert group.template is not None and "node.kubernetes.io/instance-type" not in group.template.labels
    assert scale_up(w.plan())["mixed"][:2] == (0, 1)


# --- the zone keys a new node registers with beside the topology key -----------------------------------

EBS_ZONE = "topology.ebs.csi.aws.com/zone"  # the EBS CSI driver's topology key, a Node label once it runs
ZONE_ID = "topology.k8s.aws/zone-id"  # AWS's zone id, the same zone in every account (us-east-1a's varies)


def zone_keyed_world(match: dict[str, str], node_labels: dict[str, str], nodes_cap: int = 2) -> World:
    """The two-zone world, with the us-east-1a node carrying ``node_labels`` and a CapacityQuota of
    ``nodes_cap`` nodes on ``match``; three pods that each need a node of their own."""
    w = World()
    [node] = w.group("east-a", "m5.2xlarge", max_size=1, nodes=1, zones=["us-east-1a"])
    w.node(node)["metadata"]["labels"].update(node_labels)
    w.group("east-ab", "m5.2xlarge", max_size=10, zones=["us-east-1a", "us-east-1b"])
    w.capacity_quota("zone-cap", {"nodes": str(nodes_cap)}, match_labels=match)
    w.pods("p", 3, **WHOLE)
    return w


def test_a_quota_on_the_ebs_zone_key_counts_the_new_nodes_that_may_land_in_that_zone() -> None:
    """A quota may select nodes by the zone key of the EBS CSI driver, the key PersistentVolumes name:
    the kubelet labels every Node its driver runs on with it. A new node's label sets had only the
    topology key and its beta twin, so such a quota never counted a node Spillway launched: two went into
    a quota with room for one more."""
    w = zone_keyed_world({EBS_ZONE: "us-east-1a"}, {EBS_ZONE: "us-east-1a"})

    result = w.plan()

    assert scale_up(result)["east-ab"][:2] == (0, 1)
    assert "CapacityQuota zone-cap limit nodes=2 reached" in " ".join(pending_reasons(result).values())


def test_a_quota_on_the_zone_id_counts_new_nodes_in_the_zone_the_nodes_show_it_names() -> None:
    """``topology.k8s.aws/zone-id`` names a zone the same way in every account, so a quota may select
    it. The registered nodes say which zone name it is here: us-east-1a is use1-az4."""
    w = zone_keyed_world({ZONE_ID: "use1-az4"}, {ZONE_ID: "use1-az4"})

    assert scale_up(w.plan())["east-ab"][:2] == (0, 1)


def quota_expressions(w: World, name: str, resources: dict[str, str], exprs: list[dict[str, Any]]) -> None:
    w.capacity_quota(name, resources)
    w.items[-1]["spec"]["selector"] = {"matchExpressions": exprs}


def test_a_zone_whose_id_no_node_shows_is_given_none() -> None:
    """Which id us-east-1b (or a zone of us-west-2) is, no node says: its new nodes are not counted
    under a zone id. Taking such an id as possibly any id held them back under a full quota on the id of
    us-east-1a, where they can never land, and, once a quota forbade an id outright, for good (a zone
    that never gets a node never shows its id)."""
    for group, region, zone, quota in (
        ("east-b", "us-east-1", "us-east-1b", {"nodes": "1"}),  # the us-east-1a node fills it
        ("west", "us-west-2", "us-west-2b", {"nodes": "1"}),
        ("east-c", "us-east-1", "us-east-1c", {"nodes": "0"}),
    ):
        w = World()
        [node] = w.group("east-a", "m5.2xlarge", max_size=1, nodes=1, zones=["us-east-1a"])
        w.node(node)["metadata"]["labels"][ZONE_ID] = "use1-az4"
        w.group(group, "m5.2xlarge", region=region, max_size=10, zones=[zone])
        w.capacity_quota(
            "zone-cap", quota, match_labels={ZONE_ID: "use1-az4" if quota["nodes"] == "1" else "use1-az6"}
        )
        w.pods("p", 2, **WHOLE)

        assert scale_up(w.plan())[group][:2] == (0, 1), group


def test_zone_keys_only_other_nodes_carry_are_not_given_to_a_managed_groups_new_nodes() -> None:
    """A node of no managed group (Karpenter's, which labels its nodes with the zone id whatever the
    cloud provider's version) says nothing of what an Auto Scaling group's next node carries."""
    w = World()
    w.group("east-ab", "m5.2xlarge", max_size=10, zones=["us-east-1a", "us-east-1b"])
    w.items.append(
        o.node(
            "karpenter-1",
            instance="i-0k",
            zone="us-east-1a",
            labels={ZONE_ID: "use1-az4", "karpenter.sh/nodepool": "default"},
        )
    )
    w.capacity_quota("zone-cap", {"nodes": "1"}, match_labels={ZONE_ID: "use1-az4"})
    w.pods("p", 3, **WHOLE)  # one fits the Karpenter node

    assert scale_up(w.plan())["east-ab"][:2] == (0, 2)


def test_a_zone_id_quota_leaves_alone_a_group_whose_zones_the_nodes_show_are_others() -> None:
    w = zone_keyed_world({ZONE_ID: "use1-az6"}, {ZONE_ID: "use1-az4"}, nodes_cap=1)
    [other] = w.group("east-b", "m5.2xlarge", max_size=1, nodes=1, zones=["us-east-1b"])
    w.node(other)["metadata"]["labels"].update({ZONE: "us-east-1b", ZONE_ID: "use1-az1"})
    w.pods("q", 1, **WHOLE)  # east-b's node holds one of the four pods

    result = w.plan()

    assert scale_up(result)["east-ab"][:2] == (0, 2)
    assert "capacity-quota" not in pending_codes(result).values()


def test_zone_keys_no_node_carries_are_not_given_to_new_nodes() -> None:
    """In a cluster whose nodes carry no zone id (and no EBS key), new ones will not either: a quota
    selecting those keys counts none of them, as its own count of registered nodes never will."""
    for key, value in ((ZONE_ID, "use1-az4"), (EBS_ZONE, "us-east-1a")):
        w = zone_keyed_world({key: value}, {}, nodes_cap=1)

        assert scale_up(w.plan())["east-ab"][:2] == (0, 2), key


def test_a_one_zone_group_without_a_node_gets_the_zone_keys_of_the_nodes_too() -> None:
    """A group over one zone with no node yet: its template (from its tags) names the topology key, and
    its new node will carry the EBS key and the zone id the other nodes show for that zone."""
    for key, value in ((ZONE_ID, "use1-az4"), (EBS_ZONE, "us-east-1a")):
        w = World()
        [node] = w.group("east-a", "m5.2xlarge", max_size=1, nodes=1, zones=["us-east-1a"])
        w.node(node)["metadata"]["labels"].update({EBS_ZONE: "us-east-1a", ZONE_ID: "use1-az4"})
        w.group("east-a2", "m5.2xlarge", max_size=10, zones=["us-east-1a"])
        w.capacity_quota("zone-cap", {"nodes": "2"}, match_labels={key: value})
        w.pods("p", 3, **WHOLE)

        assert scale_up(w.plan())["east-a2"][:2] == (0, 1), key


def test_a_tenant_scope_on_a_zone_id_counts_the_new_nodes_that_may_land_in_that_zone() -> None:
    """A tenant limit's ``node_selector`` is judged as a quota's selector is."""
    w = zone_keyed_world({"spillway.io/none": "x"}, {ZONE_ID: "use1-az4"})
    scope = {"node_selector": {ZONE_ID: "use1-az4"}, "limits": {"nodes": 2}}  # one: the node p-0 takes

    result = w.plan(tenants={"default": {"scopes": [scope]}})

    assert scale_up(result)["east-ab"][:2] == (0, 1)
    assert "tenant default scopes[0] (topology.k8s.aws/zone-id=use1-az4) limit nodes=2 reached" in " ".join(
        pending_reasons(result).values()
    )


def test_zone_keys_read_from_the_nodes() -> None:
    def seen(name: str, group: NodeGroup | None, settled: bool = True, **labels: str) -> Seen:
        zone = name.split("/")[0]
        info = NodeInfo(name, {}, labels={ZONE: zone, "topology.kubernetes.io/region": zone[:-1], **labels})
        return Seen(info, group, settled)

    a, b, c, d = (NodeGroup(name, "us-east-1", 0, 9, 0, "m5.2xlarge", None) for name in "abcd")
    west = NodeGroup("w", "us-west-2", 0, 9, 0, "m5.2xlarge", None)
    keys = zone_keys(
        [
            seen("us-east-1a/1", a, **{ZONE_ID: "use1-az4"}),
            seen("us-east-1a/2", a, **{ZONE_ID: "use1-az4", EBS_ZONE: "us-east-1a"}),
            seen("us-east-1b/1", b, **{ZONE_ID: "use1-az1"}),
            seen("us-east-1b/2", b, **{ZONE_ID: "use1-az2"}),  # two ids for one zone: it is not known
            seen("us-east-1c/1", c, settled=False),  # its EBS key may be coming
            seen("us-east-1c/2", d),  # settled without one: its group has none
            seen("us-west-2a/1", west),  # settled without an id: the region's nodes have none
            seen("us-west-2b/1", None, **{ZONE_ID: "usw2-az2", "karpenter.sh/nodepool": "gpu"}),
        ]
    )

    assert keys.ids == {"us-east-1a": "use1-az4", "us-west-2b": "usw2-az2"}
    assert (keys.ebs_for(a), keys.ebs_for(b), keys.ebs_for(c), keys.ebs_for(d)) == (True, False, True, False)
    assert keys.ids_for(a) and not keys.ids_for(west)
    assert keys.ids_for(
        NodeGroup("x", "eu-west-1", 0, 9, 0, "m5.2xlarge", None)
    )  # no node there: as the rest


def test_a_group_whose_only_node_just_joined_gets_the_ebs_key_the_other_groups_show() -> None:
    """The kubelet adds the EBS CSI driver's key once its node plugin registers, seconds to minutes after
    the node joins: a node that just joined without it is no word that its group's nodes lack it. Taken
    as one, the group's nodes launching and to launch went uncounted under a quota on the key. (The node
    that just joined counts once its key comes, as the quota's own count will count it.)"""
    w = World()
    [node] = w.group("east-a", "m5.2xlarge", max_size=1, nodes=1, zones=["us-east-1a"])
    w.node(node)["metadata"]["labels"][EBS_ZONE] = "us-east-1a"
    w.group("east-t", "m5.2xlarge", max_size=10, zones=["us-east-1a"])
    w.add_instance("east-t", register=True)  # joined a minute ago, no key yet
    w.capacity_quota("ebs-a", {"nodes": "3"}, match_labels={EBS_ZONE: "us-east-1a"})
    w.pods("p", 8, **WHOLE)  # two fit the nodes

    assert scale_up(w.plan())["east-t"][:2] == (1, 3)


def test_a_cluster_of_groups_at_zero_reads_the_zone_keys_from_its_other_nodes() -> None:
    """Every managed group at zero: the system node group's node (of no managed group, not Karpenter's)
    shows what the cluster's nodes carry."""
    for key, value in ((ZONE_ID, "use1-az4"), (EBS_ZONE, "us-east-1a")):
        w = World()
        w.group("east-a", "m5.2xlarge", max_size=10, zones=["us-east-1a"])
        system = o.node(
            "system-1", instance="i-0s", zone="us-east-1a", labels={key: value}, cpu="1", memory="1Gi"
        )
        w.items.append(system)
        w.capacity_quota("zone-cap", {"nodes": "2"}, match_labels={key: value})
        w.pods("p", 6, **WHOLE)

        assert scale_up(w.plan())["east-a"][:2] == (0, 1), key


def test_whether_new_nodes_carry_a_zone_id_is_read_per_region() -> None:
    """us-east-1's nodes carry zone ids, us-west-2's do not (cloud controllers of two versions): a new
    us-west-2 node will have none, so a quota on nodes with an id does not count it."""
    w = World()
    [east] = w.group("east-a", "m5.2xlarge", max_size=1, nodes=1, zones=["us-east-1a"])
    w.node(east)["metadata"]["labels"][ZONE_ID] = "use1-az4"
    w.group("west", "m5.2xlarge", region="us-west-2", max_size=10, nodes=1, zones=["us-west-2a"])
    quota_expressions(w, "ids", {"nodes": "1"}, [{"key": ZONE_ID, "operator": "Exists"}])
    w.pods("p", 5, **WHOLE)  # two fit the nodes

    assert scale_up(w.plan())["west"][:2] == (1, 4)


def test_a_new_node_in_a_zone_whose_id_no_node_shows_has_an_id_all_the_same() -> None:
    """It will carry one, only not one Spillway can name: a quota on nodes with a zone id counts it, one
    on nodes without (which no group's next node is) does not hold it back, for good as it would (no
    node would ever register in that zone to show its id)."""
    for operator, quota, launched in (("Exists", "2", 1), ("DoesNotExist", "0", 3)):
        w = World()
        [node] = w.group("east-a", "m5.2xlarge", max_size=1, nodes=1, zones=["us-east-1a"])
        w.node(node)["metadata"]["labels"][ZONE_ID] = "use1-az4"
        w.group("east-b", "m5.2xlarge", max_size=10, zones=["us-east-1b"])
        quota_expressions(w, "ids", {"nodes": quota}, [{"key": ZONE_ID, "operator": operator}])
        w.pods("p", 4, **WHOLE)  # one fits the us-east-1a node

        assert scale_up(w.plan())["east-b"][:2] == (0, launched), operator


def test_a_group_whose_nodes_lack_the_ebs_key_gets_none_for_its_new_ones() -> None:
    """The EBS CSI driver's DaemonSet need not run on every group (a taint it does not tolerate): a group
    whose registered nodes lack its key will not have it on the next node either, whatever other groups'
    nodes carry."""
    w = World()
    [node] = w.group("east-a", "m5.2xlarge", max_size=1, nodes=1, zones=["us-east-1a"])
    w.node(node)["metadata"]["labels"][EBS_ZONE] = "us-east-1a"
    w.group("east-t", "m5.2xlarge", max_size=10, nodes=1, zones=["us-east-1a"])
    w.capacity_quota("ebs-a", {"nodes": "2"}, match_labels={EBS_ZONE: "us-east-1a"})
    w.pods("p", 5, **WHOLE)  # two fit the nodes

    assert scale_up(w.plan())["east-t"][:2] == (1, 4)


def mixed_arch_world(second_type: str, quota_arch: str | None) -> World:
    """A mixed group of m5.2xlarge (amd64) and ``second_type``, and a quota of one node of
    ``quota_arch`` (None: none); three pods that each need a node of their own."""
    w = World()
    w.group("mixed", "m5.2xlarge", max_size=10, mixed=True, labels={})
    raw = w.groups["mixed"]
    raw["Tags"] = [t for t in raw["Tags"] if not t["Key"].endswith("node.kubernetes.io/instance-type")]
    raw["MixedInstancesPolicy"]["LaunchTemplate"]["Overrides"] = [
        {"InstanceType": "m5.2xlarge"}, {"InstanceType": second_type}
    ]  # fmt: skip
    if quota_arch is not None:
        w.capacity_quota("arm-cap", {"nodes": "1"}, match_labels={"kubernetes.io/arch": quota_arch})
    w.pods("p", 3, **WHOLE)
    return w


def test_an_arch_quota_counts_the_new_nodes_of_a_group_of_two_architectures() -> None:
    """Which override EC2 launches is its allocation strategy's choice, so a group of amd64 and arm64
    types names no architecture, and its new node may be either: a quota on arm64 nodes counts it."""
    w = mixed_arch_world("m6g.2xlarge", "arm64")
    _, groups, _, _ = w.parsed()
    [group] = [g for g in groups if g.name == "mixed"]
    assert group.template is not None and "kubernetes.io/arch" not in group.template.labels

    assert scale_up(w.plan())["mixed"][:2] == (0, 1)


def test_an_arch_quota_leaves_alone_a_group_of_another_architecture() -> None:
    assert scale_up(mixed_arch_world("m5.4xlarge", "arm64").plan())["mixed"][:2] == (0, 3)


def test_every_new_node_has_an_architecture_whichever_it_is() -> None:
    """Not knowing which architecture a node will have is not knowing whether it has one: the kubelet
    registers every node with it. A quota on nodes without one covers none of them; one on nodes with
    one covers all."""
    for key in ("kubernetes.io/arch", "beta.kubernetes.io/arch"):
        for operator, quota, launched in (("DoesNotExist", "0", 3), ("Exists", "1", 1)):
            w = mixed_arch_world("m6g.2xlarge", None)
            quota_expressions(w, "arch", {"nodes": quota}, [{"key": key, "operator": operator}])

            assert scale_up(w.plan())["mixed"][:2] == (0, launched), (key, operator)


def test_a_node_created_at_a_time_without_a_zone_is_read_as_utc() -> None:
    """kubectl's JSON always says Z, a hand-written List need not: the plan reads such a time as UTC, as
    everywhere else, instead of failing on comparing it with the plan's time."""
    w = zone_keyed_world({ZONE_ID: "use1-az4"}, {ZONE_ID: "use1-az4"})
    w.node(w.items[0]["metadata"]["name"])["metadata"]["creationTimestamp"] = "2026-11-02T09:00:00"

    assert scale_up(w.plan())["east-ab"][:2] == (0, 1)


# --- the zone ids EC2 names (DescribeAvailabilityZones, read by observe) ------------------------------


def test_a_groups_zone_ids_survive_the_stored_snapshot_and_an_older_snapshot_loads_without_them() -> None:
    """observe keeps each group's zones' ids as EC2 names them; a snapshot an older observe wrote has
    none, and loads with none (the planner then learns ids from the nodes, as before)."""
    [group] = with_zone_ids(
        [NodeGroup("east-ab", "us-east-1", 0, 9, 0, "m5.2xlarge", None, zones=("us-east-1b", "us-east-1a"))],
        {"us-east-1": {"us-east-1a": "use1-az6", "us-east-1b": "use1-az1", "us-east-1c": "use1-az2"}},
    )
    stored = group.to_dict()

    assert stored["zone_ids"] == {"us-east-1a": "use1-az6", "us-east-1b": "use1-az1"}  # its zones only
    assert NodeGroup.from_dict(stored) == group
    assert group.zone_id("us-east-1b") == "use1-az1" and group.zone_id("us-east-1c") is None
    del stored["zone_ids"]
    assert NodeGroup.from_dict(stored).zone_ids == ()
    plain = NodeGroup("west", "us-west-2", 0, 9, 0, "m5.2xlarge", None, zones=("us-west-2a",))
    assert with_zone_ids([plain], {"us-east-1": {"us-west-2a": "x"}}) == [plain]  # no answer for its region
    assert "zone_ids" not in plain.to_dict()  # a group without stores as before


def plan_with_ec2_ids(w: World, ids: dict[str, dict[str, str]]) -> ScalingPlan:
    """``w`` planned with its groups' zone ids as observe reads them from EC2 (``ids``: region -> zone
    name -> zone id)."""
    snapshot, groups, config, state = w.parsed()
    return plan(snapshot, with_zone_ids(groups, ids), config, state, NOW)


def zone_b_world(node_id: str | None = "use1-az4") -> World:
    """A node in us-east-1a showing its id ``node_id`` (so the region's new nodes carry one; None: it
    shows none), and a group over us-east-1b, where no node has registered."""
    w = World()
    [node] = w.group("east-a", "m5.2xlarge", max_size=1, nodes=1, zones=["us-east-1a"])
    if node_id is not None:
        w.node(node)["metadata"]["labels"][ZONE_ID] = node_id
    w.group("east-b", "m5.2xlarge", max_size=10, zones=["us-east-1b"])
    return w


EAST_IDS = {"us-east-1": {"us-east-1a": "use1-az4", "us-east-1b": "use1-az1"}}


def test_a_quota_on_a_zone_id_counts_new_nodes_in_a_zone_no_node_shows_when_ec2_names_its_id() -> None:
    """Before, which id us-east-1b is could only be learnt from a node there: a quota on its id counted
    none of the group's new nodes, and two went into a quota with room for one."""
    w = zone_b_world()
    w.capacity_quota("az1-cap", {"nodes": "1"}, match_labels={ZONE_ID: "use1-az1"})
    w.pods("p", 3, **WHOLE)

    result = plan_with_ec2_ids(w, EAST_IDS)

    assert scale_up(result)["east-b"][:2] == (0, 1)
    assert "CapacityQuota az1-cap limit nodes=1 reached" in " ".join(pending_reasons(result).values())


def test_a_full_not_in_quota_no_longer_holds_back_a_group_in_a_zone_it_leaves_out() -> None:
    """A quota on every zone but use1-az1, full with the us-east-1a node: a new node of us-east-1b, whose
    id no node showed, could have been any id but those other nodes show, so the group was held back
    (three pods that each need a node of their own, one fits the us-east-1a node). EC2 says us-east-1b
    is use1-az1: its new nodes are outside the quota."""
    w = zone_b_world()
    quota_expressions(
        w, "not-az1", {"nodes": "1"}, [{"key": ZONE_ID, "operator": "NotIn", "values": ["use1-az1"]}]
    )
    w.pods("p", 3, **WHOLE)

    held = " ".join(pending_reasons(w.plan()).values())  # without EC2's ids
    assert "east-b: CapacityQuota not-az1 limit nodes=1 reached" in held
    result = plan_with_ec2_ids(w, EAST_IDS)

    assert scale_up(result)["east-b"][:2] == (0, 2)
    assert "CapacityQuota" not in " ".join(pending_reasons(result).values())


def test_ec2s_zone_ids_are_not_given_to_new_nodes_in_a_region_whose_nodes_carry_none() -> None:
    """EC2 names every zone's id, but a node carries the label only from cloud-provider-aws v1.30: in a
    region whose settled nodes have none, a quota on an id counts no new node, as its own count of the
    registered nodes never will."""
    w = zone_b_world(node_id=None)
    w.capacity_quota("az1-cap", {"nodes": "1"}, match_labels={ZONE_ID: "use1-az1"})
    w.pods("p", 3, **WHOLE)

    assert scale_up(plan_with_ec2_ids(w, EAST_IDS))["east-b"][:2] == (0, 2)
