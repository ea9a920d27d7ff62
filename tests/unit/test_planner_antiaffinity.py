"""Required pod anti-affinity (spillway.planner.antiaffinity): the planner keeps a pod out of the domains
kube-scheduler keeps it out of, so a pod it cannot place on existing room gets a node of its own."""

from __future__ import annotations

from typing import Any

from plan_world import World, pending_codes, scale_up

from spillway.local import objects as o
from spillway.model.cluster import ClusterSnapshot, PodInfo
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


def test_a_null_selector_selects_nothing() -> None:
    w = World()
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    w.items.append(replica("web-0", node))
    term = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": HOST}]}}
    w.items.append(replica("web-1", affinity=term))

    assert w.plan().scale_up == ()


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


def test_the_snapshot_keeps_the_terms_and_who_they_select() -> None:
    w = World()
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    one_per_node(w, node, 1)
    snapshot, *_ = w.parsed()
    pods = {p.name: p for p in snapshot.pods}

    ((term, key),) = pods["web-0"].anti_own
    assert key == HOST and pods["web-1"].anti_own == ((term, HOST),)
    assert pods["web-0"].anti_matched == pods["web-1"].anti_matched == (term,)
    assert ClusterSnapshot.from_dict(snapshot.to_dict()) == snapshot
    plain = PodInfo.from_pod(Pod.model_validate(replica("web-9")))
    assert (plain.anti_own, plain.anti_matched, "ao" in plain.to_dict()) == ((), (), False)
