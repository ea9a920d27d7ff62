"""Required pod anti-affinity (spillway.planner.antiaffinity): the planner keeps a pod out of the domains
kube-scheduler keeps it out of, so a pod it cannot place on existing room gets a node of its own."""

from __future__ import annotations

from typing import Any

import pytest
from plan_world import GPU_TOLERATION, World, pending_codes, pending_reasons, scale_up

from spillway.local import objects as o
from spillway.model.cluster import SPREAD_ALL_NODES, SPREAD_TOLERATED_NODES, ClusterSnapshot, PodInfo
from spillway.model.k8s import Pod
from spillway.planner import codes

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
EVICTABLE = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}


def anti(labels: dict[str, str], key: str = HOST, **term: Any) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": labels}, "topologyKey": key, **term}
            ]
        }
    }


def replica(name: str, node: str | None = None, *, affinity: Any = None, **kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("labels", {"app": "web"})
    return o.pod(name, cpu="1", memory="1Gi", node_name=node, owner=("ReplicaSet", "web-1"),
                 affinity=affinity, **kwargs)  # fmt: skip


def one_per_node(w: World, node: str, pending: int) -> list[str]:
    """A Deployment whose replicas repel each other per node: one runs on ``node``, ``pending`` wait."""
    w.items.append(replica("web-0", node, affinity=anti({"app": "web"})))
    w.items += [replica(f"web-{i}", affinity=anti({"app": "web"})) for i in range(1, pending + 1)]
    return [f"default/web-{i}" for i in range(1, pending + 1)]


def test_replicas_that_repel_each_other_get_a_node_each() -> None:
    w = World()
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    pods = one_per_node(w, node, 3)

    result = w.plan()

    assert scale_up(result) == {"cpu": (1, 4, pods)}  # not the free room of the node that runs web-0
    assert {p.node for p in result.placements} == {"cpu/new-1", "cpu/new-2", "cpu/new-3"}


def test_without_the_term_the_same_pods_take_the_free_room() -> None:
    w = World()
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    w.items.append(replica("web-0", node))
    w.items += [replica(f"web-{i}") for i in (1, 2)]

    result = w.plan()

    assert result.scale_up == ()
    assert set(pending_codes(result).values()) == {codes.FITS_FREE_ROOM}


def test_a_running_pods_term_keeps_out_the_pods_it_selects() -> None:
    """The other way round: the pending pod has no term; the one running does, and selects it."""
    w = World()
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    w.items.append(replica("db-0", node, labels={"app": "db"}, affinity=anti({"team": "noisy"})))
    (noisy,) = w.pods("noisy", 1, cpu="1", memory="1Gi", labels={"team": "noisy"})

    result = w.plan()

    assert scale_up(result) == {"cpu": (1, 2, [noisy])}


def test_other_nodes_with_room_take_them_first() -> None:
    w = World()
    first, second = w.group("cpu", "m5.2xlarge", nodes=2, max_size=10)
    pods = one_per_node(w, first, 2)

    result = w.plan()

    on_existing = {p.pod: p.node for p in result.placements if not p.node.startswith("cpu/")}
    assert on_existing == {pods[0]: second}  # one per node
    assert scale_up(result) == {"cpu": (2, 3, [pods[1]])}


def test_a_zone_term_keeps_the_pod_out_of_the_zone_of_a_running_replica() -> None:
    w = World(regions=("us-east-1",))
    (node,) = w.group("cpu-a", "m5.2xlarge", nodes=1, max_size=10, zones=["us-east-1a"])
    w.group("cpu-b", "m5.2xlarge", max_size=10, zones=["us-east-1b"])
    w.items.append(replica("web-0", node, affinity=anti({"app": "web"}, ZONE)))
    w.items.append(replica("web-1", affinity=anti({"app": "web"}, ZONE)))

    result = w.plan()

    assert scale_up(result) == {"cpu-b": (0, 1, ["default/web-1"])}  # not cpu-a's free room, nor cpu-a


def test_no_node_is_launched_in_a_group_whose_every_zone_a_zone_term_closes() -> None:
    """A group over zones a and b has no zone in its template: a node it launches comes up in one of
    them, and both run a replica that keeps the others out of its zone, so the third could run on none
    of its nodes. A third zone in the group opens it again."""
    w = World(regions=("us-east-1",))
    w.group("multi", "m5.2xlarge", max_size=10, zones=["us-east-1a", "us-east-1b"])
    a, b = w.group("pair", "m5.2xlarge", nodes=2, max_size=2, zones=["us-east-1a", "us-east-1b"])
    w.node(b)["metadata"]["labels"][ZONE] = "us-east-1b"
    for name, node in (("web-0", a), ("web-1", b), ("web-2", None)):
        w.items.append(replica(name, node, affinity=anti({"app": "web"}, ZONE)))

    result = w.plan()

    assert result.scale_up == ()
    assert pending_codes(result)["default/web-2"] == codes.POD_TOPOLOGY

    w.groups["multi"]["AvailabilityZones"].append("us-east-1c")
    assert scale_up(w.plan()) == {"multi": (0, 1, ["default/web-2"])}


def test_match_label_keys_separate_the_revisions_of_a_rollout() -> None:
    """``matchLabelKeys: [pod-template-hash]``: a new revision's pod repels only its own revision."""
    w = World()
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    term = {"matchLabelKeys": ["pod-template-hash"]}
    old, new = {"app": "web", "pod-template-hash": "aaa"}, {"app": "web", "pod-template-hash": "bbb"}
    w.items.append(replica("web-old", node, labels=old, affinity=anti({"app": "web"}, **term)))
    w.items.append(replica("web-new", labels=new, affinity=anti({"app": "web"}, **term)))

    result = w.plan()

    assert result.scale_up == () and pending_codes(result)["default/web-new"] == codes.FITS_FREE_ROOM


def test_a_term_looks_only_in_its_own_namespace_unless_it_names_others() -> None:
    w = World()
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    w.items.append(replica("web-0", node, namespace="team-b"))
    w.items.append(replica("web-1", affinity=anti({"app": "web"})))

    assert w.plan().scale_up == ()  # team-b's web pod is not its business

    w.items[-1] = replica("web-1", affinity=anti({"app": "web"}, namespaces=["team-b"]))
    assert scale_up(w.plan()) == {"cpu": (1, 2, ["default/web-1"])}


def _labelled_namespace(w: World, name: str, **labels: str) -> None:
    w.items.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})


def test_a_namespace_selector_looks_in_the_namespaces_it_selects_only() -> None:
    """A term's namespaceSelector selects namespaces by their labels (and kubernetes.io/metadata.name,
    which the API server sets on each): team-b's web pod repels, team-c's does not."""
    w = World()
    (b_node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    [c_node] = w.group("cpu-c", "m5.2xlarge", nodes=1, max_size=10)
    _labelled_namespace(w, "team-b", shared="yes")
    _labelled_namespace(w, "team-c")
    w.items.append(replica("web-0", b_node, namespace="team-b"))
    w.items.append(replica("web-0", c_node, namespace="team-c"))
    w.items.append(
        replica("web-1", affinity=anti({"app": "web"}, namespaceSelector={"matchLabels": {"shared": "yes"}}))
    )

    result = w.plan()

    assert result.scale_up == ()  # the node beside team-c's web pod takes it
    assert {p.pod: p.node for p in result.placements}["default/web-1"] == c_node


def test_a_namespace_selector_on_the_name_label_and_an_empty_one() -> None:
    w = World()
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    _labelled_namespace(w, "team-b")
    w.items.append(replica("web-0", node, namespace="team-b"))
    by_name = {"matchLabels": {"kubernetes.io/metadata.name": "team-b"}}
    w.items.append(replica("web-1", affinity=anti({"app": "web"}, namespaceSelector=by_name)))
    assert scale_up(w.plan()) == {"cpu": (1, 2, ["default/web-1"])}

    w.items[-1] = replica("web-1", affinity=anti({"app": "web"}, namespaceSelector={}))  # every namespace
    assert scale_up(w.plan()) == {"cpu": (1, 2, ["default/web-1"])}

    other = {"matchLabels": {"kubernetes.io/metadata.name": "team-z"}}
    w.items[-1] = replica("web-1", affinity=anti({"app": "web"}, namespaceSelector=other))
    assert w.plan().scale_up == ()


def test_without_the_namespaces_a_selector_is_taken_as_every_namespace() -> None:
    """observe may not list namespaces: a conflict too many costs a launch, one too few a stuck pod."""
    w = World()
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    w.items.append(replica("web-0", node, namespace="team-b"))
    nobody = {"matchLabels": {"kubernetes.io/metadata.name": "team-z"}}
    w.items.append(replica("web-1", affinity=anti({"app": "web"}, namespaceSelector=nobody)))

    assert scale_up(w.plan()) == {"cpu": (1, 2, ["default/web-1"])}


def test_a_null_selector_selects_nothing() -> None:
    w = World()
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    w.items.append(replica("web-0", node))
    term = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": HOST}]}}
    w.items.append(replica("web-1", affinity=term))

    assert w.plan().scale_up == ()


def test_a_pod_affinity_term_with_a_null_selector_is_met_nowhere_and_launches_nothing() -> None:
    """kube-scheduler reads a null labelSelector as labels.Nothing(): no pod satisfies the term, not even
    the pod itself as the first of a group, so the pod runs on no node and a node launched for it would
    stay empty."""
    w = World()
    w.group("cpu", "m5.2xlarge", max_size=10)
    term = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": HOST}]}}
    w.items.append(replica("web-1", affinity=term))

    result = w.plan()

    assert result.scale_up == ()
    assert pending_codes(result)["default/web-1"] == codes.POD_TOPOLOGY


def _two_light_nodes(affinity: Any) -> World:
    w = World()
    a, b = w.group("cpu", "m5.2xlarge", nodes=2, max_size=10)
    for name, node in (("web-0", a), ("web-1", b)):
        w.items.append(replica(name, node, affinity=affinity, annotations=EVICTABLE))
        w.idle_since(node, 60)
    return w


def test_consolidation_does_not_move_a_replica_next_to_another() -> None:
    """Two light nodes, one replica each: consolidation would put them together but for the term."""
    config = {"consolidation": "when-underutilized", "max_scale_in_fraction": 1.0}

    held = _two_light_nodes(anti({"app": "web"})).plan(**config)

    assert held.drain == ()
    assert {k.code for k in held.kept} == {codes.DOES_NOT_FIT}
    assert [d.code for d in _two_light_nodes(None).plan(**config).drain] == [codes.CONSOLIDATION]


def _group_on_one_node(filler_c: str, key: str = HOST) -> tuple[World, str]:
    """Three replicas of 1 CPU that must share a node (pod affinity to their own label over ``key``: the
    hostname, or the zone) run on a light node a; node b has room for one of them, node c for two, or
    three with ``filler_c`` small enough. Over the zone, a and b are in us-east-1a and c in us-east-1b."""
    w = World(regions=("us-east-1",)) if key == ZONE else World()
    zones = {"zones": ["us-east-1a", "us-east-1b"]} if key == ZONE else {}
    a, b, c = w.group("cpu", "m5.2xlarge", nodes=3, max_size=10, **zones)
    if key == ZONE:
        w.node(c)["metadata"]["labels"][ZONE] = "us-east-1b"
    for i in range(3):
        item = replica(f"web-{i}", a, affinity=near({"app": "web"}, key), annotations=EVICTABLE)
        item["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"
        w.items.append(item)
    w.items.append(o.pod("fill-b", cpu="6", memory="1Gi", node_name=b, owner=("ReplicaSet", "b")))
    w.items.append(o.pod("fill-c", cpu=filler_c, memory="1Gi", node_name=c, owner=("ReplicaSet", "c")))
    w.idle_since(a, 60)
    return w, a


@pytest.mark.parametrize("key", [HOST, ZONE], ids=["node", "zone"])
def test_consolidation_moves_a_group_that_must_share_a_domain_only_into_one_that_takes_it_whole(
    key: str,
) -> None:
    """Once the replicas leave, kube-scheduler lets the first of them go anywhere and runs the others
    only beside it, or in its zone (interpodaffinity/filtering.go, satisfyPodAffinity): spread over b
    and c, some would be stranded, pending for good. Node c taking all three, the node is drained."""
    config = {"consolidation": "when-underutilized", "max_scale_in_fraction": 1.0}

    w, light = _group_on_one_node("5", key)
    held = w.plan(**config)
    w, light = _group_on_one_node("4", key)
    drained = w.plan(**config)

    assert held.drain == ()
    assert {k.node: k.code for k in held.kept}[light] == codes.DOES_NOT_FIT
    assert [(d.node, d.code) for d in drained.drain] == [(light, codes.CONSOLIDATION)]


def test_the_snapshot_keeps_the_terms_and_who_they_select() -> None:
    w = World()
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    one_per_node(w, node, 1)
    snapshot, *_ = w.parsed()
    pods = {p.name: p for p in snapshot.pods}

    ((term, key),) = pods["web-0"].anti_own
    assert key == HOST and pods["web-1"].anti_own == ((term, HOST),)
    assert pods["web-0"].selected_by == pods["web-1"].selected_by == (term,)
    assert ClusterSnapshot.from_dict(snapshot.to_dict()) == snapshot
    plain = PodInfo.from_pod(Pod.model_validate(replica("web-9")))
    assert (plain.anti_own, plain.selected_by, "ao" in plain.to_dict()) == ((), (), False)


# --- topologySpreadConstraints (whenUnsatisfiable: DoNotSchedule) ---------------------------------------


def spread(key: str = ZONE, skew: int = 1, **constraint: Any) -> list[dict[str, Any]]:
    return [
        {
            "maxSkew": skew,
            "topologyKey": key,
            "whenUnsatisfiable": constraint.pop("when", "DoNotSchedule"),
            "labelSelector": {"matchLabels": {"app": "web"}},
            **constraint,
        }
    ]


def spread_replica(name: str, node: str | None = None, **constraint: Any) -> dict[str, Any]:
    item = replica(name, node)
    item["spec"]["topologySpreadConstraints"] = spread(**constraint)
    return item


def two_zones(*, full_b: bool = True) -> World:
    """Zone a: a node running one replica, with room. Zone b: a node with no replica, full when
    ``full_b``. One more replica waits, spread over zones."""
    w = World(regions=("us-east-1",))
    (a,) = w.group("cpu-a", "m5.2xlarge", nodes=1, max_size=10, zones=["us-east-1a"])
    (b,) = w.group("cpu-b", "m5.2xlarge", nodes=1, max_size=10, zones=["us-east-1b"])
    w.node(b)["metadata"]["labels"][ZONE] = "us-east-1b"  # the world's nodes default to zone a
    w.items.append(spread_replica("web-0", a))
    if full_b:
        w.items.append(o.pod("resident", cpu="7", memory="8Gi", node_name=b))
    return w


def test_a_zone_spread_sends_the_replica_to_the_zone_that_has_fewest() -> None:
    w = two_zones()
    w.items.append(spread_replica("web-1"))

    result = w.plan()

    assert scale_up(result) == {"cpu-b": (1, 2, ["default/web-1"])}  # zone a's room would skew it to 2:0


def test_without_the_constraint_or_with_schedule_anyway_it_takes_zone_as_room() -> None:
    w = two_zones()
    w.items.append(replica("web-1"))
    assert w.plan().scale_up == ()

    w.items[-1] = spread_replica("web-1", when="ScheduleAnyway")
    assert w.plan().scale_up == ()


def _terminating(item: dict[str, Any]) -> dict[str, Any]:
    item["metadata"]["deletionTimestamp"] = "2026-11-02T11:59:30Z"  # a rollout or drain deleted it
    return item


def test_a_spread_does_not_count_a_terminating_replica() -> None:
    """kube-scheduler leaves pods being deleted out of a spread's counts (kubernetes/kubernetes
    pkg/scheduler/framework/plugins/podtopologyspread/common.go, countPodsMatchSelector: "Bypass
    terminating Pod"): zone a runs one replica and one on its way out, zone b (full) one, so a:1 b:1 and
    the waiting replica takes zone a's room. Counted, a:2 would close zone a and launch a node in b."""
    w = two_zones()
    b = next(i["metadata"]["name"] for i in w.items if i["kind"] == "Node" and "us-east-1b" in str(i))
    a = next(i["spec"]["nodeName"] for i in w.items if i["metadata"]["name"] == "web-0")
    w.items.append(spread_replica("web-b", b))
    w.items.append(spread_replica("web-old", a))
    w.items.append(spread_replica("web-1"))
    assert scale_up(w.plan()) == {"cpu-b": (1, 2, ["default/web-1"])}  # a:2 b:1 while web-old runs

    _terminating(next(i for i in w.items if i["metadata"]["name"] == "web-old"))
    result = w.plan()

    assert result.scale_up == ()
    assert [(p.pod, p.node) for p in result.placements] == [("default/web-1", a)]


def test_a_spread_over_nodes_does_not_count_a_terminating_replica() -> None:
    """The same over nodes: the first node runs a replica being deleted and nothing else, the second
    one: 0:1, so the waiting replica binds to the first node's room, nothing launched."""
    w = World()
    first, second = w.group("cpu", "m5.2xlarge", nodes=2, max_size=10)
    w.items.append(_terminating(spread_replica("web-old", first, key=HOST)))
    w.items.append(spread_replica("web-0", second, key=HOST))
    w.items.append(o.pod("resident", cpu="6", memory="8Gi", node_name=second))
    w.items += [spread_replica(f"web-{i}", key=HOST) for i in (1, 2)]

    result = w.plan()

    assert result.scale_up == ()  # counted, 1:1 and 2:1 would send the second pending one to a new node
    assert [p.node for p in result.placements] == [first, first]  # 0:1, 1:1, 2:1


def test_anti_affinity_still_counts_a_terminating_replica() -> None:
    """Inter-pod affinity reads every pod bound to a node, those being deleted too (kubernetes/kubernetes
    pkg/scheduler/framework/plugins/interpodaffinity/filtering.go: the node's pods, no deletion check):
    a replica on its way out still keeps the next one off its node until it is gone."""
    w = World()
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    w.items.append(_terminating(replica("web-0", node, affinity=anti({"app": "web"}))))
    w.items.append(replica("web-1", affinity=anti({"app": "web"})))

    assert scale_up(w.plan()) == {"cpu": (1, 2, ["default/web-1"])}


def test_a_spread_with_an_empty_selector_counts_no_pod() -> None:
    """An empty ``labelSelector`` ({}) is every label, but kube-scheduler counts no pod for it (kubernetes/
    kubernetes podtopologyspread/common.go, countPodsMatchSelector returns 0 for an empty selector), so
    the skew is the pod itself, 1, and never above maxSkew: zone a's room takes the waiting pod though
    zone a runs two pods of the namespace and zone b one. Only ``matchLabelKeys`` make it count."""
    w = two_zones()
    a = next(i["spec"]["nodeName"] for i in w.items if i["metadata"]["name"] == "web-0")
    w.items.append(o.pod("helper", cpu="100m", memory="64Mi", node_name=a))
    waiting = spread_replica("web-1", labelSelector={})
    w.items.append(waiting)

    result = w.plan()

    assert result.scale_up == ()
    assert [(p.pod, p.node) for p in result.placements] == [("default/web-1", a)]

    waiting["spec"]["topologySpreadConstraints"][0]["matchLabelKeys"] = ["app"]  # now app=web: a:1 b:0
    assert scale_up(w.plan()) == {"cpu-b": (1, 2, ["default/web-1"])}


def test_spreads_over_zones_and_nodes_fill_existing_nodes_before_launching() -> None:
    """The common pair: one spread over zones, one over nodes (maxSkew 1 each). Two nodes of one zone run
    a replica each and have room; four more wait. kube-scheduler binds them one at a time, 2:1, 2:2, 3:2,
    3:3, and a new node would get none of them. The zone spread placed the class in rounds that gave
    existing nodes a single pass under the node spread, and launched a node for the last two."""
    w = World()
    first, second = w.group("cpu", "m5.2xlarge", nodes=2, max_size=10)
    constraints = spread(HOST) + spread(ZONE)
    for name, node in (("web-0", first), ("web-x", second), *((f"web-{i}", None) for i in range(1, 5))):
        item = replica(name, node)
        item["spec"]["topologySpreadConstraints"] = constraints
        w.items.append(item)

    result = w.plan()

    assert result.scale_up == ()
    assert sorted(p.node for p in result.placements) == sorted([first, first, second, second])


def test_a_node_without_every_spread_key_is_no_domain_of_any() -> None:
    """kube-scheduler counts a node for a pod's spreads only when it carries the topology key of every
    one of them (kubernetes/kubernetes podtopologyspread/common.go, nodeLabelsMatchSpreadConstraints,
    called from calPreFilterState in filtering.go). Replicas spread over nodes and over racks: the second
    node has no rack label, so it is no domain of the node spread either and cannot hold the least at 0;
    the first node, running one, takes both waiting replicas, nothing launched."""
    rack = "example.com/rack"
    w = World()
    first, second = w.group("cpu", "m5.2xlarge", nodes=2, max_size=10)
    w.node(first)["metadata"]["labels"][rack] = "r1"
    constraints = spread(HOST) + spread(rack)
    for name, node in (("web-0", first), ("web-1", None), ("web-2", None)):
        item = replica(name, node)
        item["spec"]["topologySpreadConstraints"] = constraints
        w.items.append(item)

    result = w.plan()

    assert result.scale_up == ()
    assert [p.node for p in result.placements] == [first, first]

    w.node(second)["metadata"]["labels"][rack] = "r1"  # a domain of both now: it holds the least at 0
    result = w.plan()
    assert result.scale_up == () and result.placements[0].node == second  # 1:0 first


def test_no_node_is_launched_in_a_group_whose_nodes_lack_a_spread_key() -> None:
    """kube-scheduler refuses a node without the topology key of a DoNotSchedule spread (podtopologyspread
    filtering.go, Filter: ErrReasonNodeLabelNotMatch). The group has no rack label, by tag or on its
    nodes: a node launched there would stay empty while the replica waits. Once its nodes carry the key
    (a labeller's, each a rack of its own, so the template names no value) the next one will too."""
    rack = "example.com/rack"
    w = World()
    plain = w.group("plain", "m5.2xlarge", nodes=2, max_size=10)
    for node in plain:
        w.items.append(o.pod(f"resident-{node}", cpu="7", memory="8Gi", node_name=node))
    item = replica("web-1")
    item["spec"]["topologySpreadConstraints"] = spread(rack)
    w.items.append(item)

    result = w.plan()

    assert result.scale_up == ()
    assert f"plain: its nodes carry no {rack} label" in pending_reasons(result)["default/web-1"]

    for node, value in zip(plain, ("r2", "r3"), strict=True):
        w.node(node)["metadata"]["labels"][rack] = value
    assert scale_up(w.plan()) == {"plain": (2, 3, ["default/web-1"])}

    capacity = "karpenter.sh/capacity-type"  # Karpenter's label: no Auto Scaling group's node has it
    item["spec"]["topologySpreadConstraints"] = spread(capacity)
    assert w.plan().scale_up == ()


def test_a_zone_with_no_node_is_no_domain_until_min_domains_says_so() -> None:
    """As kube-scheduler counts: domains are those of existing nodes that pass the pod's node
    constraints, so with only zone a the skew is 0 there; minDomains 2 makes the least 0."""
    w = World(regions=("us-east-1",))
    (a,) = w.group("cpu-a", "m5.2xlarge", nodes=1, max_size=10, zones=["us-east-1a"])
    w.group("cpu-b", "m5.2xlarge", max_size=10, zones=["us-east-1b"])
    w.items.append(spread_replica("web-0", a))
    w.items.append(spread_replica("web-1"))
    assert w.plan().scale_up == ()

    w.items[-2:] = [spread_replica("web-0", a, minDomains=2), spread_replica("web-1", minDomains=2)]
    assert scale_up(w.plan()) == {"cpu-b": (0, 1, ["default/web-1"])}


def test_a_spread_over_nodes_fills_the_emptiest_and_then_every_node_as_the_least_rises() -> None:
    """Replicas spread over nodes (maxSkew 1), one running on the first node: the second node takes
    one, then each node one more, as kube-scheduler binds them one at a time. Existing nodes were capped
    at maxSkew above the least loaded node before the plan, and the plan opened a node for two replicas
    that had room already."""
    w = World()
    first, second = w.group("cpu", "m5.2xlarge", nodes=2, max_size=10)
    w.items.append(spread_replica("web-0", first, key=HOST))
    w.items += [spread_replica(f"web-{i}", key=HOST) for i in (1, 2, 3)]

    result = w.plan()

    on = [p.node for p in result.placements]
    assert sorted(on) == sorted([first, second, second])  # 2:2 in the end, never 2 apart
    assert scale_up(result) == {}


def _nodes_running_one_each(w: World, pending: int, *, labels: dict[str, str] | None = None) -> None:
    """Three full nodes that run a replica each (spread over nodes, maxSkew 1); ``pending`` small
    replicas wait (with ``labels``, if given, instead of the ones the spread selects)."""
    nodes = w.group("cpu", "m5.2xlarge", nodes=3, max_size=50)
    for i, node in enumerate(nodes):
        w.items.append(spread_replica(f"web-{i}", node, key=HOST))
        w.pods(f"fill-{i}", 1, cpu="7", memory="1Gi", node_name=node)
    for i in range(pending):
        item = spread_replica(f"new-{i}", key=HOST)
        item["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "250m"
        if labels is not None:
            item["metadata"]["labels"] = labels
        w.items.append(item)


TEAM = {"team": "ml"}


def _team_agent(w: World, key: str) -> list[dict[str, Any]]:
    """The team's node agent, a DaemonSet in the default namespace carrying the team's label, added to
    ``w``; a spread over ``key`` (maxSkew 1) that selects the team's pods, returned."""
    agent = o.daemonset("agent", namespace="default")
    agent["spec"]["template"]["metadata"]["labels"] = {"app.kubernetes.io/name": "agent", **TEAM}
    w.items.append(agent)
    constraint = spread(key)
    constraint[0]["labelSelector"] = {"matchLabels": TEAM}
    return constraint


def _team_agent_pod(i: int, node: str) -> dict[str, Any]:
    """The agent's pod on ``node``."""
    pod = o.daemonset_pod(f"agent-{i}", node, ds="agent", labels={"app.kubernetes.io/name": "agent", **TEAM})
    pod["metadata"]["namespace"] = "default"
    return pod


def _agent_counted_by_spread(w: World, nodes: list[str], pending: int) -> None:
    """The spread over nodes selects the team's pods (team=ml, maxSkew 1), and the team's node agent,
    a DaemonSet in the same namespace, carries that label too. Each of ``nodes`` runs the agent and a
    replica (two), full; ``pending`` small replicas wait."""
    constraint = _team_agent(w, HOST)

    def web(name: str, node: str | None = None, cpu: str = "1") -> dict[str, Any]:
        item = replica(name, node, labels={"app": "web", **TEAM})
        item["spec"]["topologySpreadConstraints"] = constraint
        item["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
        return item

    for i, node in enumerate(nodes):
        pod = _team_agent_pod(i, node)
        w.items += [pod, web(f"web-{i}", node)]
        w.pods(f"fill-{i}", 1, cpu="6700m", memory="1Gi", node_name=node)
    w.items += [web(f"new-{i}", cpu="250m") for i in range(pending)]


def test_a_hostname_spread_counts_the_daemonset_pods_a_new_node_runs_first() -> None:
    """kube-scheduler's PodTopologySpread counts every pod of a node its selector matches
    (podtopologyspread/common.go, countPodsMatchSelector over nodeInfo.Pods), the agent's included, and
    cluster-autoscaler's template node runs it. A new node runs the agent before any replica, so it
    takes two replicas, not three: six waiting need three new nodes, not two (where two would wait a
    plan and a boot more)."""
    w = World()
    _agent_counted_by_spread(w, w.group("cpu", "m5.2xlarge", nodes=3, max_size=50), 6)

    result = w.plan()

    assert scale_up(result)["cpu"][:2] == (3, 6)
    assert len(result.placements) == 6


def test_a_hostname_spread_counts_the_daemonset_pods_of_a_new_node_another_kind_opened() -> None:
    """A batch pod gets a new node first; the replicas fill its room after it. That node runs the agent
    too, whoever opened it, so it takes two replicas, not three: five waiting need three new nodes in
    all (two, two and one), not two (three and two), where the third on the batch pod's node would
    wait a plan and a boot more."""
    w = World()
    _agent_counted_by_spread(w, w.group("cpu", "m5.2xlarge", nodes=3, max_size=50), 5)
    (batch,) = w.pods("batch", 1, cpu="4", memory="1Gi")

    result = w.plan()

    assert scale_up(result)["cpu"][:2] == (3, 6)
    replicas: dict[str, int] = {}
    for p in result.placements:
        if p.pod != batch:
            replicas[p.node] = replicas.get(p.node, 0) + 1
    assert replicas == {"cpu/new-1": 2, "cpu/new-2": 2, "cpu/new-3": 1}


def test_a_hostname_spread_counts_the_daemonset_pods_of_a_node_already_launching() -> None:
    """The same on a node already launching: it registers running the agent, and takes two."""
    w = World()
    _agent_counted_by_spread(w, w.group("cpu", "m5.2xlarge", nodes=3, desired=4, max_size=50), 6)

    result = w.plan()

    on_launching = [p for p in result.placements if "launching" in p.node]
    assert len(on_launching) == 2
    assert scale_up(result)["cpu"][:2] == (4, 6)


def _agent_counted_by_zone_spread(w: World, running: int, pending: int) -> None:
    """The spread over zones selects the team's pods (team=ml, maxSkew 1), and the team's node agent,
    a DaemonSet in the same namespace, carries that label too. A group in zone a and one in zone b
    have a node each that runs the agent, full; zone a's runs ``running`` replicas; ``pending`` small
    replicas wait."""
    (a,) = w.group("cpu-a", "m5.2xlarge", nodes=1, max_size=10, zones=["us-east-1a"])
    (b,) = w.group("cpu-b", "m5.2xlarge", nodes=1, max_size=10, zones=["us-east-1b"])
    w.node(b)["metadata"]["labels"][ZONE] = "us-east-1b"
    constraint = _team_agent(w, ZONE)

    def web(name: str, node: str | None = None) -> dict[str, Any]:
        item = replica(name, node, labels={"app": "web", **TEAM})
        item["spec"]["topologySpreadConstraints"] = constraint
        item["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "250m"
        return item

    for i, node in enumerate((a, b)):
        pod = _team_agent_pod(i, node)
        w.items.append(pod)
        w.pods(f"fill-{i}", 1, cpu="7700m", memory="1Gi", node_name=node)
    w.items += [web(f"web-{i}", a) for i in range(running)]
    w.items += [web(f"web-{i}") for i in range(running, running + pending)]


def test_a_zone_spread_counts_the_daemonset_pods_each_new_node_runs_in_its_zone() -> None:
    """kube-scheduler counts every pod of each node of a zone that the selector matches
    (podtopologyspread/common.go, countPodsMatchSelector over nodeInfo.Pods, summed per zone in
    filtering.go calPreFilterState), and a new node registers running the agent. Zone a stands at two
    (agent, replica), zone b at one (agent); two replicas wait. A new node in zone b brings b to two
    with its agent, so it takes one replica (three), and the other needs a new node in zone a (three
    there too); put beside the first in zone b it would stand at four against two and wait a plan and a
    boot more."""
    w = World(regions=("us-east-1",))
    _agent_counted_by_zone_spread(w, running=1, pending=2)

    result = w.plan()

    assert scale_up(result) == {
        "cpu-a": (1, 2, ["default/web-2"]),
        "cpu-b": (1, 2, ["default/web-1"]),
    }


def test_a_zone_spread_counts_the_daemonset_pods_of_a_node_already_launching_in_its_zone() -> None:
    """The same on a node of zone b already launching (an earlier plan's, not registered yet): it
    registers running the agent, so zone b stands at two with it, and takes one of the two replicas;
    the other gets a new node in zone a. Both on the launching node would stand at four against two,
    and the second wait a plan and a boot more."""
    w = World(regions=("us-east-1",))
    _agent_counted_by_zone_spread(w, running=1, pending=2)
    w.groups["cpu-b"]["DesiredCapacity"] = 2

    result = w.plan()

    assert [p.node for p in result.placements] == ["cpu-b/launching-1", "cpu-a/new-1"]
    assert scale_up(result) == {"cpu-a": (1, 2, ["default/web-2"])}


def test_a_launching_node_already_registered_counts_its_daemonset_pods_once() -> None:
    """A launching node of zone b that registered (not Ready yet) and runs the agent: the snapshot
    counts its agent already, so zone b stands at two, as zone a; the replica takes the launching node,
    and nothing is launched (counted twice, zone b stood at three and the replica got a new node in
    zone a)."""
    w = World(regions=("us-east-1",))
    _agent_counted_by_zone_spread(w, running=1, pending=1)
    joining = w.add_instance("cpu-b", register=True, ready=False)
    w.node(joining)["metadata"]["labels"][ZONE] = "us-east-1b"
    pod = o.daemonset_pod(
        "agent-2", joining, ds="agent", labels={"app.kubernetes.io/name": "agent", "team": "ml"}
    )
    pod["metadata"]["namespace"] = "default"
    w.items.append(pod)

    result = w.plan()

    assert [p.node for p in result.placements] == ["cpu-b/launching-1"]
    assert scale_up(result) == {}


def test_no_node_is_opened_in_a_zone_its_own_daemonset_pods_fill() -> None:
    """Both zones stand at one (their agents); zone b's group is at MaxSize and its node full. A new node
    in zone a would bring a to two with its agent, and a replica there to three against one, which
    kube-scheduler refuses; cluster-autoscaler's template node, running the agent, fails the same
    filter. So nothing is launched, and the replica says why (a node opened for it stayed empty)."""
    w = World(regions=("us-east-1",))
    _agent_counted_by_zone_spread(w, running=0, pending=1)
    w.groups["cpu-b"]["MaxSize"] = 1

    result = w.plan()

    assert scale_up(result) == {}
    assert (
        "cpu-a: its topology spread lets us-east-1a take no more" in pending_reasons(result)["default/web-0"]
    )


def test_a_zone_spread_counts_the_daemonset_pods_of_a_new_node_another_kind_opened() -> None:
    """A batch pod that must run in zone b gets a new node there first; it registers running the agent,
    so zone b stands at two against zone a's one: the replica waiting gets a new node in zone a, not
    the batch pod's node's room in zone b (three against one, which kube-scheduler refuses)."""
    w = World(regions=("us-east-1",))
    _agent_counted_by_zone_spread(w, running=0, pending=1)
    w.items.append(o.pod("batch", cpu="4", memory="1Gi", node_selector={ZONE: "us-east-1b"}))

    result = w.plan()

    assert scale_up(result) == {
        "cpu-a": (1, 2, ["default/web-0"]),
        "cpu-b": (1, 2, ["default/batch"]),
    }


def test_new_nodes_take_max_skew_above_the_least_loaded_existing_node() -> None:
    """Every node runs one replica, so kube-scheduler lets a new node reach two (maxSkew 1 above the
    least loaded): thirty small replicas need fifteen new nodes, not one each."""
    w = World()
    _nodes_running_one_each(w, 30)

    result = w.plan()

    assert scale_up(result)["cpu"][:2] == (3, 18)
    assert len(result.placements) == 30


def test_replicas_placed_on_existing_nodes_raise_what_a_new_node_takes() -> None:
    """The three nodes that run a replica each have room for one more: the plan puts one on each, so
    the least loaded node runs two when the new nodes join, and kube-scheduler fills each new node to
    three. Thirty replicas: three on the existing nodes, nine new nodes. The cap used to stay at two
    (the least before the plan): fourteen new nodes, five of them more than needed."""
    w = World()
    _nodes_running_one_each(w, 30)
    for item in w.items:
        if item["kind"] == "Pod" and item["metadata"]["name"].startswith("fill-"):
            item["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "6500m"  # room for one more

    result = w.plan()

    on_existing = [p for p in result.placements if "/new-" not in p.node]
    assert len(on_existing) == 3 and len({p.node for p in on_existing}) == 3
    assert scale_up(result)["cpu"][:2] == (3, 12)
    assert len(result.placements) == 30


def test_a_node_that_runs_none_pins_new_nodes_to_max_skew() -> None:
    """A fourth node of the pods' group runs no replica (it is full of other pods): the least loaded
    stays 0, and each new node takes one."""
    w = World()
    _nodes_running_one_each(w, 4)
    (idle,) = w.group("cpu-full", "m5.2xlarge", nodes=1, max_size=1)
    w.pods("other", 1, cpu="8", memory="1Gi", node_name=idle)

    result = w.plan()

    assert scale_up(result)["cpu"][:2] == (3, 7)


def test_a_spread_that_does_not_select_the_pending_pods_caps_no_new_node() -> None:
    """The spread counts app=web; the waiting pods are app=batch, so placing them skews nothing: they
    share one new node as their requests allow (twenty of 1Gi: an m5.2xlarge's template holds 28)."""
    w = World()
    _nodes_running_one_each(w, 20, labels={"app": "batch"})

    result = w.plan()

    assert scale_up(result)["cpu"][:2] == (3, 4)


def _spread_policies(w: World, **policies: str) -> None:
    for item in w.items:
        if item["kind"] == "Pod" and item["metadata"]["name"].startswith(("web-", "new-")):
            item["spec"]["topologySpreadConstraints"][0].update(policies)


def test_a_tainted_node_the_pods_do_not_tolerate_counts_unless_taints_are_honoured() -> None:
    """A GPU node (tainted, no replica) is a domain by default (nodeTaintsPolicy Ignore): it holds the
    least loaded at 0, one replica per new node. With Honor it is not, and new nodes take two."""
    w = World()
    _nodes_running_one_each(w, 4)
    w.group("gpu", "g5.xlarge", nodes=1, max_size=1, gpu_taint=True)
    assert scale_up(w.plan())["cpu"][:2] == (3, 7)

    _spread_policies(w, nodeTaintsPolicy="Honor")
    assert scale_up(w.plan())["cpu"][:2] == (3, 5)


def test_a_node_the_pods_do_not_select_counts_when_node_affinity_is_ignored() -> None:
    """The replicas select the cpu group's nodes; a node of another group runs none. By default
    (nodeAffinityPolicy Honor) it is no domain and new nodes take two; with Ignore it holds the least
    loaded at 0."""
    w = World()
    _nodes_running_one_each(w, 4)
    (other,) = w.group("other", "m5.2xlarge", nodes=1, max_size=1, labels={"team": "other"})
    w.pods("busy", 1, cpu="8", memory="1Gi", node_name=other)
    for item in w.items:
        if item["kind"] == "Pod" and item["metadata"]["name"].startswith(("web-", "new-")):
            item["spec"]["nodeSelector"] = {"node.kubernetes.io/instance-type": "m5.2xlarge"}
            item["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}]}}}  # fmt: skip
    assert scale_up(w.plan())["cpu"][:2] == (3, 5)

    _spread_policies(w, nodeAffinityPolicy="Ignore")
    assert scale_up(w.plan())["cpu"][:2] == (3, 7)


def test_the_snapshot_keeps_spread_constraints() -> None:
    w = two_zones()
    w.items.append(spread_replica("web-1", skew=2, minDomains=3))
    snapshot, *_ = w.parsed()
    pod = next(p for p in snapshot.pods if p.name == "web-1")

    ((term, key, skew, min_domains, flags),) = pod.spread
    assert (key, skew, min_domains, flags) == (ZONE, 2, 3, 0) and term in pod.selected_by
    assert ClusterSnapshot.from_dict(snapshot.to_dict()) == snapshot


def test_the_snapshot_keeps_a_spreads_node_inclusion_policies_and_reads_older_ones() -> None:
    w = two_zones()
    w.items.append(spread_replica("web-1", nodeAffinityPolicy="Ignore", nodeTaintsPolicy="Honor"))
    snapshot, *_ = w.parsed()
    pod = next(p for p in snapshot.pods if p.name == "web-1")

    assert pod.spread[0][4] == SPREAD_ALL_NODES | SPREAD_TOLERATED_NODES
    stored = snapshot.to_dict()
    assert ClusterSnapshot.from_dict(stored) == snapshot
    for item in stored["pods"]:  # as an older version stored them: no flags
        if "sp" in item:
            item["sp"] = [entry[:4] for entry in item["sp"]]
    older = next(p for p in ClusterSnapshot.from_dict(stored).pods if p.name == "web-1")
    assert older.spread[0][4] == 0


def test_when_topology_closes_every_group_the_pod_says_so() -> None:
    """Only zone a has a group, and a replica there repels the waiting one: not "no group can ever run
    it", but no group now."""
    w = World(regions=("us-east-1",))
    (node,) = w.group("cpu-a", "m5.2xlarge", nodes=1, max_size=10, zones=["us-east-1a"])
    w.items.append(replica("web-0", node, affinity=anti({"app": "web"}, ZONE)))
    w.items.append(replica("web-1", affinity=anti({"app": "web"}, ZONE)))

    result = w.plan()

    assert result.scale_up == ()
    assert pending_codes(result)["default/web-1"] == codes.POD_TOPOLOGY
    reason = pending_reasons(result)["default/web-1"]
    assert reason.startswith("no node group can run this pod now") and "us-east-1a is closed" in reason


# --- required pod affinity ----------------------------------------------------------------------------


def near(labels: dict[str, str], key: str = ZONE) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": labels}, "topologyKey": key}
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def cache_in_zone_b() -> World:
    """Zone a: a node with room. Zone b: a full node running the cache."""
    w = two_zones()
    b = next(
        i["metadata"]["name"] for i in w.items if i["kind"] == "Node" and "us-east-1b" in str(i["metadata"])
    )
    w.items.append(replica("cache-0", b, labels={"app": "cache"}))
    return w


def test_a_pod_that_must_join_the_cache_zone_gets_a_node_there() -> None:
    w = cache_in_zone_b()
    w.items.append(replica("web-1", affinity=near({"app": "cache"})))

    result = w.plan()

    assert scale_up(result) == {"cpu-b": (1, 2, ["default/web-1"])}  # not zone a's free room


def test_affinity_to_a_full_node_opens_nothing_and_says_why() -> None:
    w = cache_in_zone_b()
    w.items.append(replica("web-1", affinity=near({"app": "cache"}, HOST)))

    result = w.plan()

    assert result.scale_up == ()  # a new node would not run the cache, so not this pod either
    assert pending_codes(result)["default/web-1"] == codes.POD_TOPOLOGY


NODE_LOCAL_DNS = {"app.kubernetes.io/name": "node-local-dns"}


@pytest.mark.parametrize("twin_at_zero", [False, True], ids=["its-node", "daemonset-object"])
def test_affinity_to_a_daemonsets_pod_on_the_node_gets_a_new_node_which_runs_one(twin_at_zero: bool) -> None:
    """A pod must share a node with node-local-dns (required pod affinity over hostnames), a DaemonSet
    every node runs; the one node is full. A new node runs node-local-dns as soon as it registers (the
    DaemonSet controller makes its pod for it), and kube-scheduler's InterPodAffinity counts a pod bound
    there: the pod runs on the new node. cluster-autoscaler's template node runs the DaemonSet's pods
    (podsExpectedOnFreshNode), so its simulation places the pod and it scales up; the plan launched
    nothing and the pod stayed pending for good. A group at zero knows what its new node runs from the
    DaemonSet object, and the DaemonSet's labels from its pod running elsewhere (``twin_at_zero``: an
    m5.xlarge group, which the pod fills best)."""
    w = World(regions=("us-east-1",))
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    w.items.append(o.daemonset("node-local-dns"))
    w.items.append(o.daemonset_pod("node-local-dns-a", node, ds="node-local-dns", labels=NODE_LOCAL_DNS))
    w.pods("busy", 1, cpu="7", memory="8Gi", node_name=node)
    if twin_at_zero:
        w.group("small", "m5.xlarge", max_size=10)
    affinity = near(NODE_LOCAL_DNS, HOST)
    affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["namespaces"] = [
        "kube-system"
    ]
    web = replica("web-1", affinity=affinity)
    web["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    w.items.append(web)

    result = w.plan()

    group = "small" if twin_at_zero else "cpu"
    assert scale_up(result) == {
        group: (0 if twin_at_zero else 1, 1 if twin_at_zero else 2, ["default/web-1"])
    }


@pytest.mark.parametrize("key", [HOST, ZONE])
def test_anti_affinity_to_a_daemonsets_pods_gets_no_new_node_which_runs_one(key: str) -> None:
    """A pod must not share a node (or a zone) with fluentd, a DaemonSet every node runs. Its one node
    runs fluentd, and so does a new node as soon as it registers (for the zone: a group in zone b,
    where no node runs yet): kube-scheduler's InterPodAffinity refuses the pod there too, as
    cluster-autoscaler's simulation on its template node (which runs the DaemonSet's pods) does. The
    plan launched a node for it the pod could not use, and every later plan another. A pod whose term
    selects no pod of a DaemonSet still gets a node."""
    w = World(regions=("us-east-1",))
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10, zones=["us-east-1a"])
    w.node(node)["metadata"]["labels"][ZONE] = "us-east-1a"
    if key == ZONE:
        w.group("cpu-b", "m5.2xlarge", max_size=10, zones=["us-east-1b"])
    w.items.append(o.daemonset("fluentd"))
    w.items.append(o.daemonset_pod("fluentd-a", node, ds="fluentd", labels={"app": "fluentd"}))
    w.pods("busy", 1, cpu="7", memory="8Gi", node_name=node)
    w.items.append(replica("web-1", affinity=anti({"app": "fluentd"}, key=key, namespaces=["kube-system"])))
    w.items.append(replica("api-1", labels={"app": "api"}, affinity=anti({"app": "api"}, key=key)))

    result = w.plan()

    assert sorted(p for _, _, placed in scale_up(result).values() for p in placed) == ["default/api-1"]
    assert "a DaemonSet's" in pending_reasons(result)["default/web-1"]


def test_the_first_of_a_group_that_selects_itself_may_go_anywhere() -> None:
    w = World()
    w.group("cpu", "m5.2xlarge", max_size=10)
    w.items.append(replica("web-0", affinity=near({"app": "web"}, HOST)))  # nothing with app=web runs yet
    w.items.append(replica("lone-0", labels={"app": "lone"}, affinity=near({"app": "absent"})))

    result = w.plan()

    assert scale_up(result) == {"cpu": (0, 1, ["default/web-0"])}
    assert pending_codes(result)["default/lone-0"] == codes.POD_TOPOLOGY  # what it must join runs nowhere


def test_the_rest_of_a_group_that_selects_itself_on_the_hostname_waits_for_the_first_not_a_node_each() -> (
    None
):
    """kube-scheduler lets the first pod of such a group go to any node only while no pod matches
    (interpodaffinity/filtering.go, satisfyPodAffinity); the others then bind beside it, to its node
    only. Ten replicas of 2 CPUs, none running: one node, not four of which three would stay empty."""
    w = World()
    w.group("cpu", "m5.2xlarge", max_size=10)
    for i in range(10):
        item = replica(f"web-{i}", affinity=near({"app": "web"}, HOST))
        item["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
        w.items.append(item)

    result = w.plan()

    assert scale_up(result) == {"cpu": (0, 1, ["default/web-0"])}
    codes_of = pending_codes(result)
    assert {codes_of[f"default/web-{i}"] for i in range(1, 10)} == {codes.POD_TOPOLOGY}
    assert "waits for default/web-0" in pending_reasons(result)["default/web-9"]


def _zone_group(w: World, count: int) -> list[str]:
    """``count`` replicas of 2 CPUs whose required pod affinity over zones selects their own pods,
    none running (three m5.2xlarge replicas a node)."""
    for i in range(count):
        item = replica(f"web-{i}", affinity=near({"app": "web"}, ZONE))
        item["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
        w.items.append(item)
    return [f"default/web-{i}" for i in range(count)]


def test_the_rest_of_a_group_that_selects_itself_on_the_zone_follow_the_first_into_its_zone() -> None:
    """kube-scheduler lets the first pod of such a group go to any node only while no pod matches
    (interpodaffinity/filtering.go, satisfyPodAffinity); the others then run only in its zone. Nine
    replicas, one group per zone, balanced: three new nodes in one zone, not one in each of three
    zones, two of which would stay empty."""
    w = World(regions=("us-east-1",))
    for zone in "abc":
        w.group(f"cpu-{zone}", "m5.2xlarge", max_size=10, zones=[f"us-east-1{zone}"])
    pods = _zone_group(w, 9)

    result = w.plan(balance_similar_node_groups=True)

    assert scale_up(result) == {"cpu-a": (0, 3, pods)}


def test_a_second_kind_the_zone_term_selects_follows_the_first_kinds_zone() -> None:
    """Two kinds of pods the one term selects (a rollout's two revisions, 2 and 3 CPUs), none running:
    the first kind placed takes the waiver, and kube-scheduler then runs the second only in its zone.
    They got new nodes in two zones, and one zone's pods never ran."""
    w = World(regions=("us-east-1",))
    for zone in "abc":
        w.group(f"cpu-{zone}", "m5.2xlarge", max_size=10, zones=[f"us-east-1{zone}"])
    pods = _zone_group(w, 6)
    for i in range(4):
        item = replica(f"next-{i}", affinity=near({"app": "web"}, ZONE))
        item["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"
        w.items.append(item)

    result = w.plan(balance_similar_node_groups=True)

    assert list(scale_up(result)) == ["cpu-a"]
    assert sorted(scale_up(result)["cpu-a"][2]) == sorted([*pods, *(f"default/next-{i}" for i in range(4))])


def test_the_rest_of_a_group_that_selects_itself_on_the_zone_wait_for_a_first_whose_zone_ec2_picks() -> None:
    """The one group spans three zones: its new nodes come up in zones EC2 picks, and the others run
    only in the first's. The first gets a node; the others wait for it (pod-topology), nothing more
    launched for them."""
    w = World(regions=("us-east-1",))
    w.group("multi", "m5.2xlarge", max_size=10, zones=["us-east-1a", "us-east-1b", "us-east-1c"])
    pods = _zone_group(w, 9)

    result = w.plan()

    assert scale_up(result) == {"multi": (0, 1, pods[:1])}
    codes_of = pending_codes(result)
    assert {codes_of[p] for p in pods[1:]} == {codes.POD_TOPOLOGY}
    assert "waits for default/web-0" in pending_reasons(result)["default/web-8"]


def test_the_rest_of_a_group_that_selects_itself_on_the_zone_follow_the_first_onto_free_room_there() -> None:
    """Zone a's node has room for one replica, zone b's for three; four wait. Whichever node the first
    takes, the others go to its zone only (that node's room, then its zone's group), not to the room
    of the other zone, where kube-scheduler would not run them."""
    w = World(regions=("us-east-1",))
    (a,) = w.group("cpu-a", "m5.2xlarge", nodes=1, max_size=10, zones=["us-east-1a"])
    (b,) = w.group("cpu-b", "m5.2xlarge", nodes=1, max_size=10, zones=["us-east-1b"])
    w.node(b)["metadata"]["labels"][ZONE] = "us-east-1b"
    w.pods("busy", 1, cpu="5", memory="1Gi", node_name=a)
    w.pods("busy-b", 1, cpu="1", memory="1Gi", node_name=b)
    pods = _zone_group(w, 4)

    result = w.plan()

    zone_of = {a: "a", b: "b", "cpu-a/new-1": "a", "cpu-b/new-1": "b"}
    zones = {zone_of[p.node] for p in result.placements}
    assert len(zones) == 1 and len(result.placements) == 4
    assert sorted(p for _, _, placed in scale_up(result).values() for p in placed) == (
        pods[1:] if "a" in zones else pods[3:]
    )


def test_two_affinity_terms_need_one_pod_that_both_select() -> None:
    """kube-scheduler counts, for a pod's required pod affinity, only the pods that match every one of
    its terms (kubernetes/kubernetes pkg/scheduler/framework/plugins/interpodaffinity/filtering.go,
    updateWithAffinityTerms: "if targetPod matches ALL terms"). A pod that must share a zone with the
    cache and with the primary finds, in zone a, a cache pod and a primary pod but none that is both:
    no node there runs it, and a new node in zone a would not either. Once the primary cache runs
    there (one pod, both labels), zone a's room takes it."""
    w = World(regions=("us-east-1",))
    (a,) = w.group("cpu-a", "m5.2xlarge", nodes=1, max_size=10, zones=["us-east-1a"])
    w.items.append(replica("cache-0", a, labels={"app": "cache"}))
    w.items.append(replica("primary-0", a, labels={"role": "primary"}))
    terms = [
        {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": ZONE},
        {"labelSelector": {"matchLabels": {"role": "primary"}}, "topologyKey": ZONE},
    ]
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}}
    w.items.append(replica("web-1", affinity=affinity))

    result = w.plan()

    assert result.placements == () and result.scale_up == ()
    assert pending_codes(result)["default/web-1"] == codes.POD_TOPOLOGY

    w.items.append(replica("cache-1", a, labels={"app": "cache", "role": "primary"}))
    assert [(p.pod, p.node) for p in w.plan().placements] == [("default/web-1", a)]


# --- host ports (kube-scheduler's NodePorts) -------------------------------------------------------------


def exporter(
    name: str, node: str | None = None, *, port: int = 9400, protocol: str = "TCP"
) -> dict[str, Any]:
    item = replica(name, node, labels={"app": "exporter"})
    item["spec"]["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port, "protocol": protocol}]
    return item


def test_pods_that_take_the_same_host_port_get_a_node_each() -> None:
    w = World()
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    w.items += [exporter("exp-0", node), exporter("exp-1"), exporter("exp-2")]

    result = w.plan()

    assert scale_up(result) == {"cpu": (1, 3, ["default/exp-1", "default/exp-2"])}


def test_another_port_or_protocol_shares_the_node() -> None:
    w = World()
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    w.items += [exporter("exp-0", node), exporter("exp-1", port=9401), exporter("exp-2", protocol="UDP")]

    assert w.plan().scale_up == ()


def test_a_wildcard_host_ip_clashes_with_any_address_on_the_port() -> None:
    """kube-scheduler's NodePorts reads hostIP 0.0.0.0 as an unset one, every address (HostPortInfo's
    sanitize and CheckConflict): such a port clashes with the same port on any one address, both ways."""
    for held, asked in (("0.0.0.0", "10.0.0.5"), ("10.0.0.5", "0.0.0.0"), ("0.0.0.0", "")):
        w = World()
        (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
        running, pending = exporter("exp-0", node), exporter("exp-1")
        running["spec"]["containers"][0]["ports"][0]["hostIP"] = held
        if asked:
            pending["spec"]["containers"][0]["ports"][0]["hostIP"] = asked
        w.items += [running, pending]

        assert scale_up(w.plan()) == {"cpu": (1, 2, ["default/exp-1"])}, (held, asked)


def test_two_distinct_host_ips_share_the_port_on_one_node() -> None:
    """The control: one port on two specific addresses does not clash."""
    w = World()
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    running, pending = exporter("exp-0", node), exporter("exp-1")
    running["spec"]["containers"][0]["ports"][0]["hostIP"] = "10.0.0.5"
    pending["spec"]["containers"][0]["ports"][0]["hostIP"] = "10.0.0.6"
    w.items += [running, pending]

    assert w.plan().scale_up == ()


def _node_exporter(port: int = 9100) -> dict[str, Any]:
    """A DaemonSet on the host's network whose pods hold host port ``port`` on every node."""
    ds = o.daemonset("node-exporter", host_network=True)
    ds["spec"]["template"]["spec"]["containers"][0]["ports"] = [
        {"containerPort": port, "hostPort": port, "protocol": "TCP"}
    ]
    return ds


@pytest.mark.parametrize("group_nodes", [1, 0], ids=["read-from-its-node", "group-at-zero"])
def test_a_pod_asking_a_host_port_a_new_node_s_daemonset_holds_is_told_which_daemonset(
    group_nodes: int,
) -> None:
    """A node-exporter DaemonSet holds host port 9100 on every node; a Deployment's pod asks for 9100
    too. kube-scheduler's NodePorts refuses it every node, the new ones as well: their node-exporter
    pod is there first. cluster-autoscaler's template node runs the DaemonSet's pods, so its scale-up
    simulation refuses the pod the same way and launches nothing ("didn't have free ports"). A pod
    asking another port still gets a node. The pod's reason names the port and the DaemonSet that holds
    it, read from its pod on the group's node or from the DaemonSet object for a group at zero: it said
    only "a DaemonSet or static pod", and a cluster runs many."""
    w = World(regions=("us-east-1",))
    nodes = w.group("cpu", "m5.2xlarge", nodes=group_nodes, max_size=10)
    ds = _node_exporter()
    w.items.append(ds)
    for node in nodes:  # the running node's copy, as the DaemonSet controller makes it
        pod = o.daemonset_pod(f"node-exporter-{node}", node, ds="node-exporter")
        pod["spec"]["containers"][0]["ports"] = ds["spec"]["template"]["spec"]["containers"][0]["ports"]
        pod["spec"]["hostNetwork"] = True
        w.items.append(pod)
        w.pods("busy", 1, cpu="7", memory="8Gi", node_name=node)
    w.items += [exporter("exp-0", port=9100), exporter("other-0", port=9400)]

    result = w.plan()

    assert scale_up(result) == {"cpu": (group_nodes, group_nodes + 1, ["default/other-0"])}
    assert pending_codes(result)["default/exp-0"] == codes.NO_GROUP_FITS
    assert "host port 9100/TCP" in pending_reasons(result)["default/exp-0"]
    assert "kube-system/node-exporter" in pending_reasons(result)["default/exp-0"]


# A run-to-completion init container that names a host port (kubernetes/kubernetes#57443: neither the
# scheduler nor the kubelet takes it); restartPolicy Always makes it a sidecar, whose port NodePorts takes
# since kubernetes/kubernetes#132040 (1.34, and 1.33 by cherry-pick).
INIT_WITH_PORT = {
    "name": "wait-for-agent",
    "image": "public.ecr.aws/docker/library/busybox:1.36",
    "ports": [{"containerPort": 9000, "hostPort": 9000, "protocol": "TCP"}],
    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
}


def test_a_plain_init_containers_host_port_does_not_keep_pods_apart() -> None:
    w = World(regions=("us-east-1",))
    w.group("cpu", "m5.2xlarge", nodes=0, max_size=5)
    pods = w.pods("w", 2, cpu="1", memory="1Gi", init_containers=[INIT_WITH_PORT])

    result = w.plan()

    ups = scale_up(result)
    assert ups["cpu"][:2] == (0, 1), (ups, pending_reasons(result))  # both fit one m5.2xlarge
    assert sorted(ups["cpu"][2]) == sorted(pods)


def test_a_sidecars_host_port_does_keep_pods_apart() -> None:
    """The control: the same port on a sidecar (restartPolicy Always) is one pod per node."""
    w = World(regions=("us-east-1",))
    w.group("cpu", "m5.2xlarge", nodes=0, max_size=5)
    w.pods("w", 2, cpu="1", memory="1Gi", init_containers=[{**INIT_WITH_PORT, "restartPolicy": "Always"}])

    result = w.plan()

    assert scale_up(result)["cpu"][:2] == (0, 2)


# --- pending pods of different kinds that repel each other, within one plan --------------------------


def test_two_pending_kinds_that_repel_each_other_get_separate_new_nodes() -> None:
    w = World()
    w.group("cpu", "m5.2xlarge", max_size=10)
    w.items.append(replica("api-0", labels={"app": "api"}, affinity=anti({"app": "batch"})))
    w.items.append(replica("batch-0", labels={"app": "batch"}))

    result = w.plan()

    # one node would hold both by resources; kube-scheduler would never bind them together
    assert scale_up(result) == {"cpu": (0, 2, ["default/api-0", "default/batch-0"])}
    on = {p.pod: p.node for p in result.placements}
    assert on["default/api-0"] != on["default/batch-0"]


def test_the_term_of_the_pod_placed_second_counts_too() -> None:
    """batch sorts first (bigger): api's term must keep api off batch's new node."""
    w = World()
    w.group("cpu", "m5.2xlarge", max_size=10)
    w.items.append(replica("api-0", labels={"app": "api"}, affinity=anti({"app": "batch"})))
    batch = replica("batch-0", labels={"app": "batch"})
    batch["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    w.items.append(batch)
    w.items.append(replica("other-0", labels={"app": "other"}))  # no term: shares either node

    result = w.plan()

    on = {p.pod: p.node for p in result.placements}
    assert on["default/api-0"] != on["default/batch-0"]
    assert scale_up(result)["cpu"][1] == 2


def test_two_pending_kinds_on_one_host_port_do_not_share_free_room() -> None:
    w = World()
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    first = exporter("exp-a")
    second = exporter("exp-b")
    second["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"  # another kind, the same port

    w.items += [first, second]
    result = w.plan()

    on = {p.pod: p.node for p in result.placements}
    assert on["default/exp-a"] != on["default/exp-b"]
    assert node in on.values() and scale_up(result) == {
        "cpu": (1, 2, [p for p, n in on.items() if n != node])
    }


# --- a zone spread within one plan ----------------------------------------------------------------------


def _three_zones(
    pending: int, running: tuple[int, int, int] = (1, 1, 1), **group: Any
) -> tuple[World, list[str]]:
    """Zones a, b and c: a full node each, running ``running`` replicas; ``pending`` replicas of one
    node each wait, spread over zones with maxSkew 1. ``group``: settings of every zone's group."""
    w = World(regions=("us-east-1",))
    for zone, count in zip("abc", running, strict=True):
        settings = {"max_size": 20, **group}
        (node,) = w.group(f"cpu-{zone}", "m5.2xlarge", nodes=1, zones=[f"us-east-1{zone}"], **settings)
        w.node(node)["metadata"]["labels"][ZONE] = f"us-east-1{zone}"
        w.items += [spread_replica(f"web-{zone}{i}", node) for i in range(count)]
        w.pods(f"fill-{zone}", 1, cpu=str(7 - count), memory="1Gi", node_name=node)
    names = []
    for i in range(pending):
        item = spread_replica(f"new-{i}")
        item["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "5"  # one per node
        w.items.append(item)
        names.append(f"default/new-{i}")
    return w, names


def _opened(result: Any) -> dict[str, int]:
    return {g: s[1] - s[0] for g, s in scale_up(result).items()}


def test_a_burst_of_a_zone_spread_gets_its_nodes_in_every_zone_in_one_plan() -> None:
    """Each zone runs one replica. Twelve more wait: the plan opens four nodes per zone, as
    kube-scheduler fills them. (Without the spread counted, all twelve went to the best group, zone a,
    where kube-scheduler would run one; with each zone's room fixed before the plan, one per zone a plan,
    and every later plan gave the launching nodes the same three.)"""
    w, pods = _three_zones(12)

    result = w.plan()

    assert _opened(result) == {"cpu-a": 4, "cpu-b": 4, "cpu-c": 4}
    assert {p.pod for p in result.placements} == set(pods) and not pending_codes(result)
    assert not any("skipped" in s.reason for s in result.scale_up)  # spread, not spilled over


def test_a_zone_ahead_waits_for_the_others_to_catch_up() -> None:
    """Zone a runs three replicas, b and c one each: four more go two to b and two to c, none to the
    cheapest group's zone a (the skew would be too large), which opens only once the others catch up."""
    w, _ = _three_zones(4, running=(3, 1, 1))

    result = w.plan()

    assert _opened(result) == {"cpu-b": 2, "cpu-c": 2}


def test_a_zone_that_cannot_grow_holds_the_others_within_the_skew() -> None:
    """Zone a's group is at MaxSize. b and c may each take one more (maxSkew 1 above a's one); the rest
    wait with the zone named, as kube-scheduler would leave them."""
    w, _ = _three_zones(6)
    w.groups["cpu-a"]["MaxSize"] = 1

    result = w.plan()

    assert _opened(result) == {"cpu-b": 1, "cpu-c": 1}
    placed = {p.pod for p in result.placements}
    waiting = {p: c for p, c in pending_codes(result).items() if p not in placed}
    assert len(waiting) == 4 and set(waiting.values()) == {codes.GROUPS_EXHAUSTED}
    assert (
        "lets us-east-1b take no more of it until the least loaded zone takes more"
        in (pending_reasons(result)[next(iter(waiting))])
    )


def test_a_zone_with_no_node_yet_becomes_a_domain_when_the_plan_opens_one() -> None:
    """A fourth group in zone d has no node. Once its new node registers, zone d counts (with none of
    the replicas): eight waiting replicas end with every zone within maxSkew, not five in zone d."""
    w, pods = _three_zones(8)
    w.group("cpu-d", "m5.2xlarge", max_size=20, zones=["us-east-1d"])

    result = w.plan()

    opened = _opened(result)
    after = [1 + opened.get(f"cpu-{zone}", 0) for zone in "abc"] + [opened.get("cpu-d", 0)]
    assert sum(opened.values()) == 8 and max(after) - min(after) <= 1
    assert {p.pod for p in result.placements} == set(pods)


def test_launching_capacity_takes_a_burst_evenly_and_nothing_more_opens() -> None:
    """The plan after a burst: four nodes launch in each zone (desired above Ready), the twelve still
    wait. They are planned onto the launching nodes, four per zone, and nothing new is launched."""
    w, _ = _three_zones(12, desired=5)

    result = w.plan()

    assert result.scale_up == ()
    assert set(pending_codes(result).values()) == {codes.FITS_LAUNCHING}


def test_a_replica_the_spread_does_not_count_is_not_capped() -> None:
    """A pod whose own labels the spread does not select adds nothing to any zone: no cap."""
    w, _ = _three_zones(3)
    for item in w.items:
        if item["kind"] == "Pod" and item["metadata"]["name"].startswith("new-"):
            item["metadata"]["labels"] = {"app": "other"}

    result = w.plan()

    assert sum(s[1] - s[0] for s in scale_up(result).values()) == 3
    assert len(scale_up(result)) == 1  # all in the best group, as before


def test_replicas_one_per_zone_get_new_nodes_in_different_zones() -> None:
    """A required anti-affinity over zones that selects the replicas themselves: zone a runs one, two
    wait. They get a new node in zone b and one in zone c; both went to the best group (b), where
    kube-scheduler runs one and the other node sat idle."""
    w = World(regions=("us-east-1",))
    for zone in "abc":
        (node,) = w.group(f"cpu-{zone}", "m5.2xlarge", nodes=1, zones=[f"us-east-1{zone}"])
        w.node(node)["metadata"]["labels"][ZONE] = f"us-east-1{zone}"
        w.pods(f"fill-{zone}", 1, cpu="7", memory="1Gi", node_name=node)
        if zone == "a":
            w.items.append(replica("web-a", node, affinity=anti({"app": "web"}, key=ZONE)))
    w.items += [replica(f"web-{i}", affinity=anti({"app": "web"}, key=ZONE)) for i in (1, 2)]

    result = w.plan()

    assert _opened(result) == {"cpu-b": 1, "cpu-c": 1}


def _cache_and_web(w: World, *, cache_cpu: str = "6") -> None:
    """Zones a, b and c each have a full node; a cache pod and a web pod wait, the web pod with a required
    pod affinity to the cache's zone (no cache runs yet). The cache is the smaller, so it is served
    second in size order."""
    for zone in "abc":
        (node,) = w.group(f"cpu-{zone}", "m5.2xlarge", nodes=1, zones=[f"us-east-1{zone}"])
        w.node(node)["metadata"]["labels"][ZONE] = f"us-east-1{zone}"
        w.pods(f"fill-{zone}", 1, cpu="8", memory="1Gi", node_name=node)
    w.items.append(o.pod("cache-0", cpu=cache_cpu, memory="1Gi", labels={"app": "cache"},
                         owner=("ReplicaSet", "cache-1")))  # fmt: skip
    follow = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": ZONE}]}}  # fmt: skip
    web = replica("web-0", affinity=follow)
    web["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "7"
    w.items.append(web)


def test_a_pod_that_must_join_a_pending_pods_zone_follows_it_in_the_same_plan() -> None:
    """The cache gets a new node; the web pod gets one in the cache's zone in the same plan, instead of
    waiting a plan (and a boot) for the cache to run."""
    w = World(regions=("us-east-1",))
    _cache_and_web(w)

    result = w.plan()

    on = {p.pod: p.node for p in result.placements}
    assert set(on) == {"default/cache-0", "default/web-0"}
    assert on["default/cache-0"].split("/")[0] == on["default/web-0"].split("/")[0]
    assert not pending_codes(result)


def test_a_pod_whose_leader_gets_no_node_still_waits_for_it() -> None:
    """The cache fits no group: the web pod has nowhere to follow it and waits (pod-topology)."""
    w = World(regions=("us-east-1",))
    _cache_and_web(w, cache_cpu="64")

    result = w.plan()

    assert result.scale_up == ()
    assert pending_codes(result)["default/web-0"] == codes.POD_TOPOLOGY


def test_a_spread_that_does_not_select_the_pod_closes_only_a_domain_past_max_skew() -> None:
    """kube-scheduler counts the pod itself only when its spread selects it. A batch pod whose spread
    counts the web pods may join node a (one web pod, node b none: 1 - 0 is within maxSkew 1), where a
    web pod may not (1 + 1 - 0). It used to be kept off a as if it were one of them, and got a node."""
    w = World()
    a, b = w.group("cpu", "m5.2xlarge", nodes=2, max_size=10)
    w.pods("busy", 1, cpu="8", memory="1Gi", node_name=b)
    w.items.append(spread_replica("web-0", a, key=HOST))
    batch = spread_replica("batch-0", key=HOST)
    batch["metadata"]["labels"] = {"app": "batch"}
    w.items.append(batch)

    result = w.plan()

    assert result.scale_up == () and {p.pod: p.node for p in result.placements} == {"default/batch-0": a}


@pytest.mark.parametrize(("api_cpu", "batch_cpu"), [("7", "6"), ("6", "7")], ids=["api-first", "batch-first"])
def test_two_pending_kinds_that_must_not_share_a_zone_get_different_zones(
    api_cpu: str, batch_cpu: str
) -> None:
    """An API pod's anti-affinity over zones selects batch pods; one of each waits, and no node has room.
    Whichever is served first, the other gets a new node in another zone, not in the best group's zone
    beside it (kube-scheduler would leave it pending there)."""
    w = World(regions=("us-east-1",))
    for zone in "abc":
        (node,) = w.group(f"cpu-{zone}", "m5.2xlarge", nodes=1, zones=[f"us-east-1{zone}"])
        w.node(node)["metadata"]["labels"][ZONE] = f"us-east-1{zone}"
        w.pods(f"fill-{zone}", 1, cpu="8", memory="1Gi", node_name=node)
    w.items.append(o.pod("api-0", cpu=api_cpu, memory="1Gi", labels={"app": "api"}, owner=("ReplicaSet", "api-1"),
                         affinity=anti({"app": "batch"}, key=ZONE)))  # fmt: skip
    w.items.append(o.pod("batch-0", cpu=batch_cpu, memory="1Gi", labels={"app": "batch"},
                         owner=("ReplicaSet", "batch-1")))  # fmt: skip

    result = w.plan()

    groups = {p.pod: p.group for p in result.placements}
    assert set(groups) == {"default/api-0", "default/batch-0"}
    assert groups["default/api-0"] != groups["default/batch-0"]


def test_a_spread_over_zones_and_nodes_fills_new_nodes_to_the_node_cap_over_rounds() -> None:
    """Replicas spread over zones and over nodes (both maxSkew 1); each zone's node runs one and has
    room for one more small one, which it takes: with every existing node at two, a new node may take
    three. Twelve small replicas: three on the existing nodes, then one new node per zone holding three.
    The zone rounds place one pod per zone at a time; a new node that holds one takes the next in a
    later round instead of a node being opened for each pod (nine nodes), and the cap counts the
    plan's pods on the existing nodes (two per new node, two new nodes per zone, before)."""
    w, _ = _three_zones(0)
    for i in range(12):
        item = spread_replica(f"new-{i}")
        item["spec"]["topologySpreadConstraints"] += spread(key=HOST)
        item["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "500m"
        w.items.append(item)
    for item in w.items:
        if item["kind"] == "Pod" and item["metadata"]["name"].startswith("web-"):
            item["spec"]["topologySpreadConstraints"] += spread(key=HOST)

    result = w.plan()

    assert _opened(result) == {"cpu-a": 1, "cpu-b": 1, "cpu-c": 1}
    assert len(result.placements) == 12


def test_a_zone_spread_counts_only_pods_on_the_nodes_it_counts() -> None:
    """Three replicas still run on an old pool's node in zone a, which the waiting replicas' node selector
    leaves out: kube-scheduler counts neither that node nor its pods, so zone a is one replica like the
    others and the three waiting go one per zone (counting them closed zone a)."""
    w, pods = _three_zones(3, labels={"pool": "new"})
    (old,) = w.group("old", "m5.2xlarge", nodes=1, max_size=1, zones=["us-east-1a"], labels={"pool": "old"})
    w.items += [spread_replica(f"old-{i}", old) for i in range(3)]
    for item in w.items:
        if item["kind"] == "Pod" and item["metadata"]["name"].startswith("new-"):
            item["spec"]["nodeSelector"] = {"pool": "new"}

    result = w.plan()

    assert _opened(result) == {"cpu-a": 1, "cpu-b": 1, "cpu-c": 1}
    assert {p.pod for p in result.placements} == set(pods)


def test_a_tenant_limit_holds_on_launching_capacity_over_the_rounds() -> None:
    """Zone a has four nodes launching; team-a may have three nodes in cpu-a, one of them Ready. Its
    one-per-node replicas, spread over zones, take launching nodes round after round: each round saw
    the nodes it had filled as room again, and the class took all four."""
    w = World(regions=("us-east-1",))
    w.namespace("team-a")

    def web(name: str, node: str | None = None) -> dict[str, Any]:
        item = replica(name, node, namespace="team-a", affinity=anti({"app": "web"}))
        item["spec"]["topologySpreadConstraints"] = spread()
        return item

    for zone in "abc":
        extra = {"desired": 5} if zone == "a" else {}
        (node,) = w.group(
            f"cpu-{zone}", "m5.2xlarge", nodes=1, max_size=20, zones=[f"us-east-1{zone}"], **extra
        )
        w.node(node)["metadata"]["labels"][ZONE] = f"us-east-1{zone}"
        w.pods(f"fill-{zone}", 1, cpu="6", memory="1Gi", node_name=node)
        w.items.append(web(f"web-{zone}", node))
    w.items += [web(f"new-{i}") for i in range(12)]

    result = w.plan(tenants={"team-a": {"scopes": [{"node_groups": ["cpu-a"], "limits": {"nodes": 3}}]}})

    assert len({p.node for p in result.placements if "launching" in p.node}) == 2


def test_a_chain_of_pods_that_follow_each_others_zone_is_placed_in_one_plan() -> None:
    """web must join api's zone, api must join cache's zone; all three wait and web is the biggest,
    cache the smallest. Each follows the one before it in the same plan (moving each class once put
    web back before api, and web waited a plan)."""
    w = World(regions=("us-east-1",))
    for zone in "abc":
        (node,) = w.group(f"cpu-{zone}", "m5.2xlarge", nodes=1, zones=[f"us-east-1{zone}"])
        w.node(node)["metadata"]["labels"][ZONE] = f"us-east-1{zone}"
        w.pods(f"fill-{zone}", 1, cpu="8", memory="1Gi", node_name=node)

    def follower(name: str, cpu: str, leader: str | None) -> dict[str, Any]:
        terms = [{"labelSelector": {"matchLabels": {"app": leader}}, "topologyKey": ZONE}] if leader else []
        affinity = (
            {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}} if terms else None
        )
        return o.pod(name, cpu=cpu, memory="1Gi", labels={"app": name}, owner=("ReplicaSet", f"{name}-1"),
                     affinity=affinity)  # fmt: skip

    w.items += [follower("web", "7", "api"), follower("api", "6", "cache"), follower("cache", "5", None)]

    result = w.plan()

    groups = {p.pod: p.group for p in result.placements}
    assert set(groups) == {"default/web", "default/api", "default/cache"}
    assert len(set(groups.values())) == 1  # one zone: each joins the one it follows


def test_a_zone_the_plan_opens_holds_the_least_from_the_same_round() -> None:
    """Zones a, b and c run five replicas each; zone d's group (MaxSize 1) has no node. Once d's node
    registers the least is d's, so a, b and c take none until d catches up: the plan opens d's node
    only, not one more in a, b and c that would sit idle (the zone counted from the next round only)."""
    w, _ = _three_zones(10, running=(5, 5, 5))
    w.group("cpu-d", "m5.2xlarge", max_size=1, zones=["us-east-1d"])

    result = w.plan()

    assert _opened(result) == {"cpu-d": 1}


def test_a_zone_whose_group_cannot_open_a_node_holds_nothing() -> None:
    """The same, zone d's group backed off after a failed launch: no node will join d, so a, b and c
    take the ten between them, evenly, as the scheduler will let them."""
    w, _ = _three_zones(10, running=(5, 5, 5))
    w.group("cpu-d", "m5.2xlarge", max_size=1, zones=["us-east-1d"])
    w.launch_failure("cpu-d", minutes_ago=1)

    result = w.plan()

    assert _opened(result) == {"cpu-a": 4, "cpu-b": 3, "cpu-c": 3}


def test_a_node_without_the_spreads_key_takes_no_spread_replica() -> None:
    """kube-scheduler refuses a node that lacks a DoNotSchedule spread's topology key ("missing
    required label"): the waiting replica gets a node in zone a, not the free room of a node without
    a zone label, where it would wait for good."""
    w = World(regions=("us-east-1",))
    (bare,) = w.group("bare", "m5.2xlarge", nodes=1, max_size=1)
    del w.node(bare)["metadata"]["labels"][ZONE]
    w.group("cpu-a", "m5.2xlarge", max_size=5, zones=["us-east-1a"])
    w.items.append(spread_replica("web-0"))

    result = w.plan()

    assert [(p.pod, p.group and p.group.name) for p in result.placements] == [("default/web-0", "cpu-a")]


def test_two_pending_kinds_of_one_spread_share_its_skew() -> None:
    """Zone a's group is at MaxSize with one replica; b and c run one each. Two big and two small
    replicas of one Deployment wait (two classes, one spread): b and c may reach two, so two of the
    four get a place. Each class used to get the whole skew, four were placed, and kube-scheduler
    would leave two of their nodes idle."""
    w, _ = _three_zones(0)
    w.groups["cpu-a"]["MaxSize"] = 1
    for i in range(2):
        for kind, cpu in (("big", "5"), ("small", "4")):
            item = spread_replica(f"{kind}-{i}")
            item["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
            w.items.append(item)

    result = w.plan()

    assert _opened(result) == {"cpu-b": 1, "cpu-c": 1}
    assert len(result.placements) == 2


def test_zone_rounds_use_free_room_before_new_nodes() -> None:
    """Each zone's node runs one replica and has room for three small ones; twelve wait. Nine take the
    free room and three a new node each: a round gives a zone's share to free room first (refreshing
    the least loaded between free room and new nodes gave new nodes half the pods)."""
    w, _ = _three_zones(0)
    for item in w.items:
        if item["kind"] == "Pod" and item["metadata"]["name"].startswith("fill-"):
            item["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "5400m"
    for i in range(12):
        item = spread_replica(f"new-{i}")
        item["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "500m"
        w.items.append(item)

    result = w.plan()

    on_new = [p for p in result.placements if "/new-" in p.node]
    assert len(result.placements) == 12 and len(on_new) == 3


# --- pods a plan moves keep their zone spread -----------------------------------------------------------

UNDER = {"consolidation": "when-underutilized", "consolidation_utilization_threshold": 1.0}


def _zoned(w: World, group: str, zone: str, itype: str, count: int) -> list[str]:
    nodes = sorted(w.group(group, itype, nodes=count, max_size=10, zones=[f"us-east-1{zone}"]))
    for node in nodes:
        w.node(node)["metadata"]["labels"][ZONE] = f"us-east-1{zone}"
        w.idle_since(node, 60)
    return nodes


def _sized(item: dict[str, Any], cpu: str) -> dict[str, Any]:
    item["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    return item


def _spread_pod(name: str, node: str | None, cpu: str, *, movable: bool) -> dict[str, Any]:
    item = _sized(spread_replica(name, node), cpu)
    if movable:
        item["metadata"].setdefault("annotations", {}).update(EVICTABLE)
    return item


def _zones_a_and_b(a_nodes: int, a_type: str = "m5.2xlarge") -> tuple[World, list[str], str]:
    """Group cpu-a with ``a_nodes`` nodes in zone a, group cpu-b with one m5.2xlarge node in zone b."""
    w = World(regions=("us-east-1",))
    a = _zoned(w, "cpu-a", "a", a_type, a_nodes)
    (b,) = _zoned(w, "cpu-b", "b", "m5.2xlarge", 1)
    return w, a, b


def _two_movable_replicas_in_zone_a() -> World:
    """Zone a: two small nodes running one movable replica each (nothing else fits beside it) and a
    third whose replica may not move. Zone b: a node with one replica that may not move, and room for
    two more. maxSkew 1 over zones, so 3:1 before."""
    w, (first, second, pinned), b = _zones_a_and_b(3, "m5.xlarge")
    w.items += [
        _spread_pod("web-a1", first, "3", movable=True),
        _spread_pod("web-a2", second, "3", movable=True),
        _spread_pod("web-a3", pinned, "3", movable=False),
        _spread_pod("web-b", b, "1", movable=False),
    ]
    return w


def test_consolidation_moves_the_pods_of_one_spread_once_per_plan() -> None:
    """Moving one zone-a replica to zone b leaves 2:2; moving the second too would leave 1:3, which
    kube-scheduler refuses: it would wait, evicted, for a node. Each candidate used to be judged on the
    counts before the plan, and both nodes were drained; now the second waits for a later plan."""
    result = _two_movable_replicas_in_zone_a().plan(max_scale_in_fraction=1.0, **UNDER)

    assert [d.code for d in result.drain] == [codes.CONSOLIDATION]
    (other,) = [k for k in result.kept if k.code == codes.DOES_NOT_FIT]
    assert "web-a" in other.reason and "counts with pods this plan places or moves" in other.reason


def test_consolidation_moves_no_pod_of_a_spread_this_plan_places_pods_of() -> None:
    """Two bigger replicas wait; the spread sends both to zone b (3:1 before, 3:3 after), on new
    nodes. Moving the one movable zone-a replica to zone b's room would leave 2:4, which kube-scheduler
    refuses to the last of them: the move was judged on the counts before the plan (2:1 after it)."""
    w = _two_movable_replicas_in_zone_a()
    del w.items[-3]["metadata"]["annotations"]  # web-a2 may not move
    w.items += [_spread_pod(f"web-new{i}", None, "7", movable=False) for i in range(2)]

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    assert scale_up(result) == {"cpu-b": (1, 3, ["default/web-new0", "default/web-new1"])}
    assert result.drain == ()
    assert {k.code for k in result.kept} >= {codes.DOES_NOT_FIT}


def test_a_move_out_of_the_least_loaded_zone_would_refuse_a_pending_replica() -> None:
    """maxSkew 2; zones a, b and c run one replica each, zone a's may move and zone c has room for it.
    Two big replicas wait and only zone b's group can grow: 3 there is within the skew while zone a
    holds one. Moved to c on its own the zone-a replica is fine (0:1:2), but the second pending replica,
    placed when its node boots, would see 0:2:2 and be refused (3 - 0 > 2), for good: zone a's group is
    at MaxSize. So the replica stays; with nothing pending it moves."""

    def world(pending: int) -> World:
        w = World(regions=("us-east-1",))
        a, full = _zoned(w, "cpu-a", "a", "m5.xlarge", 2)
        (b,) = _zoned(w, "cpu-b", "b", "m5.2xlarge", 1)
        (c,) = _zoned(w, "cpu-c", "c", "m5.xlarge", 1)
        w.groups["cpu-a"]["MaxSize"] = w.groups["cpu-c"]["MaxSize"] = 2
        pods = [
            _spread_pod("web-a", a, "1", movable=True),
            _sized(o.pod("fill-a", node_name=full), "3800m"),
            _spread_pod("web-b", b, "7", movable=False),
            _spread_pod("web-c", c, "1", movable=False),
            *(_spread_pod(f"web-new{i}", None, "7", movable=False) for i in range(pending)),
        ]
        for item in pods:
            for constraint in item["spec"].get("topologySpreadConstraints", []):
                constraint["maxSkew"] = 2
        w.items += pods
        return w

    result = world(2).plan(max_scale_in_fraction=1.0, **UNDER)

    assert scale_up(result) == {"cpu-b": (1, 3, ["default/web-new0", "default/web-new1"])}
    assert result.drain == ()
    assert [d.pods for d in world(0).plan(max_scale_in_fraction=1.0, **UNDER).drain] == [("default/web-a",)]


def test_make_room_counts_the_replicas_that_stay_on_the_node_it_empties() -> None:
    """Node n in zone a runs two replicas; one may move, to make room for a big pod. Zone a runs three
    and zone b one: the moved replica may go to zone b only (a's other node would make 3:1), and zone b
    is full, so a node is launched instead. Make room used to take every pod of n as gone (1:1 before
    the move) and sent the replica to zone a, where kube-scheduler would leave it pending."""
    w, (n, m), b = _zones_a_and_b(2)
    w.items += [
        _spread_pod("web-moves", n, "3", movable=True),
        _spread_pod("web-stays", n, "3", movable=False),
        _spread_pod("web-m", m, "3", movable=False),
        o.pod("fill-m", cpu="1", memory="1Gi", node_name=m),  # m keeps room for a replica, not the big pod
        _spread_pod("web-b", b, "3", movable=False),
        o.pod("fill-b", cpu="4500m", memory="1Gi", node_name=b),
        o.pod("big", cpu="4500m", memory="1Gi", node_selector={ZONE: "us-east-1a"}),
    ]

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    assert result.drain == ()
    assert scale_up(result) == {"cpu-a": (2, 3, ["default/big"])}
    # without the spread the same move is made
    for item in w.items:
        if item["kind"] == "Pod" and item["metadata"]["name"].startswith("web-"):
            del item["spec"]["topologySpreadConstraints"]
    assert [d.code for d in w.plan(max_scale_in_fraction=1.0, **UNDER).drain] == [codes.MAKE_ROOM]


def test_two_kinds_of_one_spread_moved_off_one_node_share_its_skew() -> None:
    """A node in zone a runs a big and a small replica of one Deployment, both movable; zone a's other
    node runs one that may not move and has no room, zone b's node runs one and has room for both:
    3:1. Emptied, the node leaves 1:1, and zone b may take one of the two, not both (1:3). Each kind
    used to be judged without the other, and the node was drained."""
    w, (node, full), b = _zones_a_and_b(2)
    w.items += [
        _spread_pod("web-big", node, "2", movable=True),
        _spread_pod("web-small", node, "1", movable=True),
        _spread_pod("web-full", full, "7", movable=False),
        _spread_pod("web-b", b, "1", movable=False),
    ]

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    assert result.drain == ()
    assert {k.node: k.code for k in result.kept}[node] == codes.DOES_NOT_FIT
    w.items[-2] = _spread_pod("web-full", full, "3", movable=False)  # room in zone a for one of them
    assert [(d.node, d.code) for d in w.plan(max_scale_in_fraction=1.0, **UNDER).drain] == [
        (node, codes.CONSOLIDATION)
    ]


def test_a_kind_bound_to_other_nodes_does_not_count_for_the_spread_of_another() -> None:
    """Two pending kinds of one spread (one selector), bound to different pools by their node selectors:
    kube-scheduler counts each kind's spread on its own pool's nodes. Pool y runs one replica in zone a
    and none in b (its node there is full): the y replica must go to b, on a new node. The x replica,
    placed first, goes to zone b's pool-x room; counted for the y kind too, it made zone b look like
    zone a, and the y replica was planned on zone a's room, where it would wait for good."""
    w = World(regions=("us-east-1",))
    nodes = {}
    for pool in "xy":
        for zone in "ab":
            (node,) = w.group(f"{pool}-{zone}", "m5.2xlarge", nodes=1, labels={"pool": pool},
                              zones=[f"us-east-1{zone}"])  # fmt: skip
            w.node(node)["metadata"]["labels"][ZONE] = f"us-east-1{zone}"
            nodes[pool + zone] = node
    kinds = {"web-x": "x", "web-y": "y", "web-ya": "y"}
    w.items += [
        _spread_pod("web-ya", nodes["ya"], "1", movable=False),
        _sized(o.pod("fill-xa", node_name=nodes["xa"]), "7"),
        _sized(o.pod("fill-yb", node_name=nodes["yb"]), "7"),
        _spread_pod("web-x", None, "5", movable=False),  # bigger: placed first
        _spread_pod("web-y", None, "2", movable=False),
    ]
    for item in w.items:
        if item["kind"] == "Pod" and item["metadata"]["name"] in kinds:
            item["spec"]["nodeSelector"] = {"pool": kinds[item["metadata"]["name"]]}

    result = w.plan()

    assert {p.pod: p.group and p.group.name for p in result.placements} == {
        "default/web-x": "x-b",
        "default/web-y": "y-b",
    }
    assert scale_up(result) == {"y-b": (1, 2, ["default/web-y"])}


def test_a_pod_that_follows_a_moved_pod_waits_for_it_to_settle() -> None:
    """The only cache runs in zone a and may move to zone b; a web pod must run in a zone that runs a
    cache, and may move to the only other room, in zone a. Both were moved in one plan, each judged on
    the zones before it: the web pod sent where no cache would run. Now the first move (the cheaper,
    the web pod's) holds the other for a later plan."""
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": ZONE}
            ]
        }
    }

    def world(cache_moves: bool) -> World:
        w, (cache_node, web_node, room), b = _zones_a_and_b(3, "m5.xlarge")
        cache = _sized(replica("cache-0", cache_node, labels={"app": "cache"}), "3")
        if cache_moves:
            cache["metadata"]["annotations"] = dict(EVICTABLE)
        w.items += [
            cache,
            _sized(replica("web-0", web_node, affinity=affinity, annotations=EVICTABLE), "2500m"),
            _sized(o.pod("fill-a", node_name=room), "1200m"),
            _sized(o.pod("fill-b", node_name=b), "4500m"),
        ]
        return w

    result = world(True).plan(max_scale_in_fraction=1.0, **UNDER)
    assert [d.pods for d in result.drain] == [("default/web-0",)]
    assert any(
        "cache-0, which pods this plan places or moves must run beside" in k.reason for k in result.kept
    )
    stays = {p for d in world(False).plan(max_scale_in_fraction=1.0, **UNDER).drain for p in d.pods}
    assert stays == {"default/web-0"}  # with the cache staying in zone a, the web pod moves next to it


def test_a_pod_that_pending_pods_follow_stays_where_they_are_sent() -> None:
    """A pending web pod must run in a zone that runs a cache: the plan sends it to zone a, the cache's.
    The cache may move to zone b's room; moved in the same plan, it would leave the web pod refused when
    its node boots. So it stays this plan, and moves once the web pod runs (required affinity is not
    checked again then)."""
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": ZONE}
            ]
        }
    }
    w, (cache_node, full), b = _zones_a_and_b(2, "m5.xlarge")
    w.items += [
        _sized(replica("cache-0", cache_node, labels={"app": "cache"}, annotations=EVICTABLE), "3"),
        _sized(o.pod("fill-a", node_name=full), "3800m"),
        _sized(o.pod("fill-b", node_name=b), "4"),
        _sized(replica("web-0", affinity=affinity), "3"),
    ]

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    assert scale_up(result) == {"cpu-a": (2, 3, ["default/web-0"])}
    assert result.drain == ()
    w.items.pop()
    assert [d.pods for d in w.plan(max_scale_in_fraction=1.0, **UNDER).drain] == [("default/cache-0",)]


def test_zone_rounds_fill_free_room_in_first_fit_order() -> None:
    """maxSkew 3, four replicas, none running: zone a's small node and zone b's node have room for two
    each, zone a's empty node comes last. First fit gives the small node two and zone b's two (2:2) and
    leaves the empty node to the big pod placed after them; visiting zone a whole first gave 3:1, the
    empty node a replica, and the big pod a new node."""
    w = World(regions=("us-east-1",))
    names = []
    for group, zone, itype in (
        ("b1", "a", "m5.xlarge"),
        ("b2", "b", "m5.2xlarge"),
        ("a3", "a", "m5.2xlarge"),
    ):
        (node,) = w.group(group, itype, nodes=1, zones=[f"us-east-1{zone}"])
        w.node(node)["metadata"]["labels"][ZONE] = f"us-east-1{zone}"
        names.append(node)
    assert names == sorted(names)  # the pools' order
    w.items += [
        _sized(o.pod("fill-1", node_name=names[0]), "1900m"),
        _sized(o.pod("fill-2", node_name=names[1]), "5900m"),
    ]
    for i in range(4):
        item = _sized(spread_replica(f"web-{i}", skew=3), "1")
        item["spec"]["priority"] = 100
        w.items.append(item)
    w.items.append(_sized(o.pod("big-0"), "7500m"))

    result = w.plan()

    on = {p.pod: p.node for p in result.placements}
    assert sorted(on[f"default/web-{i}"] for i in range(4)) == sorted([names[0]] * 2 + [names[1]] * 2)
    assert on["default/big-0"] == names[2] and result.scale_up == ()


def test_a_pod_a_spread_counts_moves_no_more_than_the_spreads_own_pods() -> None:
    """A canary labelled like a Deployment's replicas, movable, with no spread of its own: the replicas'
    zone spread counts it. With a replica waiting and planned on zone b's room (1:1 before, 1:2), moving
    the canary from zone a to zone b too would leave 0:3, and the replica, placed after it, refused for
    good (zone a's group is at MaxSize). It stays; with no replica waiting, it moves."""

    def world(waiting: bool) -> World:
        w, (a, full), b = _zones_a_and_b(2, "m5.xlarge")
        w.groups["cpu-a"]["MaxSize"] = 2
        w.items += [
            _sized(o.pod("fill-a", node_name=full), "3800m"),
            _sized(replica("canary", a, annotations=EVICTABLE), "3"),
            _spread_pod("web-b", b, "1", movable=False),
        ]
        if waiting:
            w.items.append(_spread_pod("web-new", None, "1", movable=False))
        return w

    result = world(True).plan(max_scale_in_fraction=1.0, **UNDER)

    assert [p.pod for p in result.placements] == ["default/web-new"] and result.drain == ()
    assert [d.pods for d in world(False).plan(max_scale_in_fraction=1.0, **UNDER).drain] == [
        ("default/canary",)
    ]


def test_a_node_closed_to_one_class_keeps_its_room_for_the_next() -> None:
    """One pool of two nodes; a one-per-node replica runs on the first. Two more wait: the second node
    takes one, the other gets a new node. A pod of another kind, placed after them, fits the first
    node's free room; the pool's bound of free room left that node out (closed to the replicas), and
    the pod got a new node too. (Found by review; older than this work.)"""
    w = World()
    first, _ = w.group("cpu", "m5.2xlarge", nodes=2, max_size=10)
    w.items.append(replica("web-0", first, affinity=anti({"app": "web"})))
    for i in (1, 2):
        w.items.append(_sized(replica(f"web-{i}", affinity=anti({"app": "web"}), priority=100), "3"))
    w.items.append(o.pod("other", cpu="6", memory="1Gi"))

    result = w.plan()

    assert {p.pod: p.node for p in result.placements}["default/other"] == first
    assert scale_up(result) == {"cpu": (2, 3, ["default/web-2"])}


def test_consolidation_counts_the_daemonset_pods_a_launching_node_runs_first_for_a_hostname_spread() -> None:
    """A node already launching registers running the team's agent, which the replicas' spread over
    nodes counts (team=ml, maxSkew 1): with the other node at one (its agent, full), the launching node
    takes one replica (agent and replica: two, one above the least), not two. Node a's two replicas do
    not fit elsewhere, so a is not consolidated: the second would wait for a node of its own."""
    w = World(regions=("us-east-1",))
    a, b = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10))
    w.groups["cpu"]["DesiredCapacity"] = 3  # a third node is launching (an earlier plan's)
    constraint = _team_agent(w, HOST)
    for i, node in enumerate((a, b)):
        pod = _team_agent_pod(i, node)
        w.items.append(pod)
    for i in range(2):
        item = replica(f"web-{i}", a, labels={"app": "web", **TEAM}, annotations=EVICTABLE)
        item["spec"]["topologySpreadConstraints"] = constraint
        item["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "250m"
        w.items.append(item)
    w.pods("fill", 1, cpu="7800m", memory="1Gi", node_name=b)  # no room left for a replica

    result = w.plan(
        max_scale_in_fraction=1.0,
        consolidation="when-underutilized",
        consolidation_utilization_threshold=1.0,
    )

    assert [d.node for d in result.drain] == []
    assert {k.node: k.code for k in result.kept}[a] == codes.DOES_NOT_FIT


def _mixed_group_in_zone_a(w: World, types: tuple[str, ...], labels: dict[str, str]) -> None:
    """Group mixed-a in zone a, MaxSize 1, of a mixed instances policy of ``types``: EC2 picks which of
    them a new node is."""
    raw = o.asg("mixed-a", cluster="ml", max_size=1, zones=["us-east-1a"], labels=labels)
    raw["MixedInstancesPolicy"] = {
        "LaunchTemplate": {
            "LaunchTemplateSpecification": {"LaunchTemplateName": "lt", "Version": "$Latest"},
            "Overrides": [{"InstanceType": kind} for kind in types],
        },
        "InstancesDistribution": {"OnDemandPercentageAboveBaseCapacity": 100},
    }
    del raw["LaunchTemplate"]
    w.groups["mixed-a"] = raw


def _amd64_agent_beside_a_mixed_zone(
    w: World, pending: int, types: tuple[str, str] = ("m7g.xlarge", "m6i.xlarge")
) -> list[str]:
    """Three zones; the spread over zones selects the team's pods (team=ml, maxSkew 1), and the team's
    node agent, a DaemonSet in the same namespace carrying that label, runs on amd64 nodes only. Zone a
    has a group of m7g (arm64) and m6i (amd64) overrides at MaxSize 1, where EC2 picks which a new node
    is; zones b and c groups of m7g only. Every group's nodes carry pool=web, which the replicas select
    (the agent's pod runs on a system node without it, which the spread does not count). Each replica
    takes most of a node; ``pending`` wait."""
    constraint = _team_agent(w, ZONE)
    w.items[-1]["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/arch": "amd64"}
    (system,) = w.group("system", "m5.xlarge", nodes=1, max_size=1, zones=["us-east-1a"])
    w.items.append(_team_agent_pod(0, system))
    w.pods("busy", 1, cpu="3500m", memory="1Gi", node_name=system)
    pool = {"pool": "web"}
    _mixed_group_in_zone_a(w, types, pool)
    for zone in ("b", "c"):
        w.group(f"arm-{zone}", "m7g.xlarge", max_size=10, zones=[f"us-east-1{zone}"], labels=pool)
    names = []
    for i in range(pending):
        item = replica(f"web-{i}", labels={"app": "web", **TEAM}, node_selector=pool)
        item["spec"]["topologySpreadConstraints"] = constraint
        item["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"
        w.items.append(item)
        names.append(f"default/web-{i}")
    return names


def test_a_daemonset_a_new_node_may_run_does_not_raise_the_least_loaded_zone() -> None:
    """A new node of zone a's mixed group runs the agent only when EC2 launches an m6i, so zone a stands
    at one replica, or at two with the agent. Counted as surely there, the agent raised the least loaded
    zone to two, and zones b and c got a third replica each: on an m7g zone a holds one, and
    kube-scheduler refuses a third in b or c (three against one, maxSkew 1: podtopologyspread/
    filtering.go, Filter), two nodes paid for and never used. A pod the node may run counts in its own
    zone (where it takes a replica's place) but not for the least loaded zone: b and c get two each."""
    w = World(regions=("us-east-1",))
    _amd64_agent_beside_a_mixed_zone(w, pending=8)

    result = w.plan()

    grown = {group: to - before for group, (before, to, _) in scale_up(result).items()}
    assert grown == {"mixed-a": 1, "arm-b": 2, "arm-c": 2}
    assert len(result.placements) == 5


def test_a_daemonset_every_new_node_of_the_zone_runs_raises_the_least_loaded_zone() -> None:
    """The same with zone a's overrides both amd64 (m6i and m5): its new node surely runs the agent, so
    zone a stands at two, and b and c take a third replica each, as kube-scheduler lets them."""
    w = World(regions=("us-east-1",))
    _amd64_agent_beside_a_mixed_zone(w, pending=8, types=("m6i.xlarge", "m5.xlarge"))

    result = w.plan()

    grown = {group: to - before for group, (before, to, _) in scale_up(result).items()}
    assert grown == {"mixed-a": 1, "arm-b": 3, "arm-c": 3}
    assert len(result.placements) == 7


def test_a_zone_spread_counts_the_daemonset_pods_of_a_launching_instance_in_the_zone_ec2_put_it() -> None:
    """The agent runs on nodes labelled for it: zone a's node (its group at MaxSize, full), and a GPU
    group over zones a and b whose taint keeps the replicas off (the agent tolerates it); zone b's group
    runs none. A GPU instance is launching, no Node yet: its template names no zone, but Auto Scaling's
    answer does (DescribeAutoScalingGroups Instances[].AvailabilityZone: us-east-1b), and it registers
    running the agent, so zone b stands at one with it, as zone a. Of two replicas (one per node,
    maxSkew 1), zone b takes one; the second there stands at three against one, which kube-scheduler
    refuses. Counted nowhere, the agent left zone b at none, and the plan opened two nodes there, one of
    them never used."""
    w = World(regions=("us-east-1",))
    constraint = _team_agent(w, ZONE)
    agent = w.items[-1]["spec"]["template"]["spec"]
    agent["nodeSelector"], agent["tolerations"] = {"team-agent": "yes"}, [GPU_TOLERATION]
    labelled = {"team-agent": "yes"}
    (a,) = w.group("cpu-a", "m5.2xlarge", nodes=1, max_size=1, zones=["us-east-1a"], labels=labelled)
    w.items.append(_team_agent_pod(0, a))
    w.pods("fill", 1, cpu="7", memory="1Gi", node_name=a)
    w.group("cpu-b", "m5.2xlarge", max_size=10, zones=["us-east-1b"])
    w.group("gpu", "g5.xlarge", gpu_taint=True, zones=["us-east-1a", "us-east-1b"], labels=labelled)
    w.add_instance("gpu", register=False)
    w.groups["gpu"]["Instances"][-1]["AvailabilityZone"] = "us-east-1b"
    for i in range(2):
        item = replica(f"web-{i}", labels={"app": "web", **TEAM})
        item["spec"]["topologySpreadConstraints"] = constraint
        item["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "5"
        w.items.append(item)

    result = w.plan()

    assert scale_up(result) == {"cpu-b": (0, 1, ["default/web-0"])}
    assert (
        "cpu-b: its topology spread lets us-east-1b take no more" in pending_reasons(result)["default/web-1"]
    )


def test_replicas_on_instances_launching_in_one_zone_of_a_group_over_two_fill_that_zone_only() -> None:
    """Zones a and b run a replica each on full nodes. A group over both zones (at MaxSize) has two
    instances launching, no Node yet, both in zone a by Auto Scaling's answer (Instances[].
    AvailabilityZone). Four replicas wait, maxSkew 1: the launching nodes take two (zone a at three)
    and zone b's group two on a new node (three). Their template names no zone, so all four went to a
    launching node, where kube-scheduler binds one (zone a at two), refuses the next (three against
    one), and nothing was launched for them in zone b until that node was Ready."""
    w = World(regions=("us-east-1",))
    (a,) = w.group("cpu-a", "m5.2xlarge", nodes=1, max_size=10, zones=["us-east-1a"])
    (b,) = w.group("cpu-b", "m5.2xlarge", nodes=1, max_size=10, zones=["us-east-1b"])
    w.node(b)["metadata"]["labels"][ZONE] = "us-east-1b"
    w.items += [spread_replica("web-0", a), spread_replica("web-1", b)]
    w.items += [o.pod(f"full-{n}", cpu="6", memory="1Gi", node_name=n) for n in (a, b)]
    w.group("multi", "m5.2xlarge", zones=["us-east-1a", "us-east-1b"], max_size=2)
    for _ in range(2):
        w.add_instance("multi", register=False)
        w.groups["multi"]["Instances"][-1]["AvailabilityZone"] = "us-east-1a"
    w.items += [spread_replica(f"web-{i}") for i in range(2, 6)]

    result = w.plan()

    on = {p.pod: p.node for p in result.placements}
    assert sorted(p for p, node in on.items() if node.startswith("multi/launching")) == [
        "default/web-2",
        "default/web-4",
    ]
    assert scale_up(result) == {"cpu-b": (1, 2, ["default/web-3", "default/web-5"])}


AGENT = {"app.kubernetes.io/name": "agent"}


def _follower_of_an_amd64_agent(w: World, types: tuple[str, str]) -> None:
    """The team's node agent, a DaemonSet that runs on amd64 nodes only, runs on the one system node,
    in zone c, which is full. Zone a has a group of two overrides (``types``) at MaxSize 1, where EC2
    picks which a new node is. A loose pod that only that group takes waits, and so does a pod whose
    required pod affinity must join the agent's zone."""
    _team_agent(w, ZONE)
    w.items[-1]["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/arch": "amd64"}
    (system,) = w.group("system", "m5.xlarge", nodes=1, max_size=1, zones=["us-east-1c"])
    w.node(system)["metadata"]["labels"][ZONE] = "us-east-1c"
    w.items.append(_team_agent_pod(0, system))
    w.pods("busy", 1, cpu="3900m", memory="1Gi", node_name=system)
    pool = {"pool": "web"}
    _mixed_group_in_zone_a(w, types, pool)
    leader = replica("web-0", labels={"app": "web"}, node_selector=pool)
    leader["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    w.items.append(leader)
    w.items.append(replica("near-0", labels={"app": "near"}, affinity=near(AGENT)))


def test_a_pod_joining_a_daemonsets_zone_does_not_follow_a_new_node_that_may_not_run_it() -> None:
    """The mixed group's new node, opened for the loose pod, runs the agent only when EC2 launches an
    m6i: on an m7g (arm64) zone a has no agent pod, and kube-scheduler's InterPodAffinity refuses the
    follower there (interpodaffinity/filtering.go, satisfyPodAffinity: no pod the term selects in the
    node's zone). Counted as surely in zone a, the agent opened zone a to the follower, which was
    planned onto the new node beside the loose pod and stayed pending on an m7g. It waits for room in
    the agent's zone instead (its group is at MaxSize)."""
    w = World(regions=("us-east-1",))
    _follower_of_an_amd64_agent(w, ("m7g.xlarge", "m6i.xlarge"))

    result = w.plan()

    assert scale_up(result) == {"mixed-a": (0, 1, ["default/web-0"])}
    assert pending_codes(result)["default/near-0"] == codes.MAX_SIZE  # the agent's zone's group, full


def test_a_pod_joining_a_daemonsets_zone_follows_a_new_node_that_surely_runs_it() -> None:
    """The same with both overrides amd64 (m6i and m5): the new node runs the agent whichever EC2
    launches, so the follower may join it in zone a in the same plan."""
    w = World(regions=("us-east-1",))
    _follower_of_an_amd64_agent(w, ("m6i.xlarge", "m5.xlarge"))

    result = w.plan()

    assert scale_up(result) == {"mixed-a": (0, 1, ["default/near-0", "default/web-0"])}
