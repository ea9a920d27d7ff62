"""CSI attach limits for volumes several pods of one plan share (kube-scheduler's NodeVolumeLimits,
pkg/scheduler/framework/plugins/nodevolumelimits/csi.go, Filter: the unique volumes of the node's pods,
the nominated ones of equal or higher priority among them, are counted once, and a pod's volumes the
node uses already are not new): a volume the plan puts on a node is on it for the pods placed after."""

from __future__ import annotations

from typing import Any

from plan_world import World, pending_codes, scale_up
from test_planner_csi_limits import (
    ZONE,
    claim,
    csinode,
    gp3,
    make_room_world,
    pending_with_new_volume,
    volume,
    with_claims,
    world,
)

from spillway.local import objects as o
from spillway.planner import codes

EVICT = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}


def shared_volume(w: World, name: str = "shared") -> None:
    """A ReadWriteMany EBS volume (io2 Multi-Attach) bound to claim ``name`` that no pod uses yet."""
    pv = volume(f"pv-{name}", f"vol-{name}")
    pv["spec"]["accessModes"] = ["ReadWriteMany"]
    w.items += [pv, claim(name, f"pv-{name}")]


def pending(name: str, cpu: str, *claims: str, priority: int | None = None) -> dict[str, Any]:
    return with_claims(
        o.pod(name, cpu=cpu, memory="128Mi", owner=("ReplicaSet", name), priority=priority), *claims
    )


def test_two_classes_sharing_a_volume_take_one_attach_slot_on_the_node_they_go_to() -> None:
    """The node is at 2 of 3: two pending pods of different sizes both use the shared volume, which no
    node has yet. The first brings it (3 of 3); for the second it is on the node already, so both run
    there. Each was charged it, and the second got a node it never needed."""
    w, _ = world(limit=3)
    shared_volume(w)
    w.items += [pending("reader-a", "200m", "shared"), pending("reader-b", "300m", "shared")]

    result = w.plan()

    assert result.scale_up == ()
    codes_by_pod = pending_codes(result)
    assert codes_by_pod["default/reader-a"] == codes_by_pod["default/reader-b"] == codes.FITS_FREE_ROOM


def test_two_classes_with_a_new_volume_each_do_not_share_the_last_slot() -> None:
    """The node is at 2 of 3: two pending pods of different sizes each bring their own new volume. Only
    one of them fits; the other gets a node."""
    w, _ = world(limit=3)
    pending_with_new_volume(w, "db-2")
    pending_with_new_volume(w, "db-3")
    w.items[-1]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "300m"

    result = w.plan()

    assert scale_up(result) == {"db": (1, 2, ["default/db-2"])}
    assert pending_codes(result)["default/db-3"] == codes.FITS_FREE_ROOM


def test_pods_of_one_class_sharing_a_volume_take_one_attach_slot_on_their_node() -> None:
    """Three replicas of one Deployment read the shared volume; the node has one slot left. kube-scheduler
    binds the first, and the volume is on the node for the two others."""
    w, _ = world(limit=3)
    shared_volume(w)
    for i in range(3):
        w.items.append(
            with_claims(
                o.pod(f"reader-{i}", cpu="200m", memory="128Mi", owner=("ReplicaSet", "reader")), "shared"
            )
        )

    result = w.plan()

    assert result.scale_up == ()
    assert {pending_codes(result)[f"default/reader-{i}"] for i in range(3)} == {codes.FITS_FREE_ROOM}


def consolidation_world(
    dest_volumes: tuple[str, ...], movers: tuple[tuple[str, str], ...]
) -> tuple[World, str]:
    """Two nodes whose CSINodes allow 2 EBS volumes: ``dest`` runs a busy pod per volume of
    ``dest_volumes`` (claims), ``light`` runs the movable ``movers`` (name, cpu), each reading the
    shared volume. Returns the world and the light node."""
    w = World(regions=("us-east-1",))
    dest, light = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10, zones=[ZONE]))
    w.items.append(gp3())
    shared_volume(w)
    w.items += [csinode(dest, 2), csinode(light, 2)]
    for i, name in enumerate(dest_volumes):
        if name != "shared":
            w.items += [volume(f"pv-{name}", f"vol-{name}"), claim(name, f"pv-{name}")]
        pod = o.pod(f"busy-{i}", cpu="2", memory="1Gi", node_name=dest, owner=("StatefulSet", "busy"))
        w.items.append(with_claims(pod, name))
    for name, cpu in movers:
        pod = o.pod(
            name, cpu=cpu, memory="1Gi", node_name=light, owner=("ReplicaSet", "web"), annotations=EVICT
        )
        w.items.append(with_claims(pod, "shared"))
    return w, light


def plan_consolidation(w: World) -> Any:
    return w.plan(
        max_scale_in_fraction=1.0, consolidation="when-underutilized", consolidation_utilization_threshold=0.5
    )


def test_consolidation_moves_a_pod_onto_a_node_at_its_limit_that_has_its_volume_already() -> None:
    """The other node is at its limit of 2, one of them the shared volume the light node's pod reads:
    kube-scheduler does not count it as new there, so the light node can be emptied. The moved pod was
    charged it again and the light node was kept, paid for."""
    w, light = consolidation_world(("shared", "own"), (("web-a", "1"),))

    result = plan_consolidation(w)

    assert [d.node for d in result.drain] == [light]


def test_consolidation_charges_pods_that_move_together_their_shared_volume_once() -> None:
    """The other node has one slot left; the light node's two pods (of one class) share a volume the
    other node has not got: together they bring it one volume."""
    w, light = consolidation_world(("own",), (("web-a", "1"), ("web-b", "1")))

    result = plan_consolidation(w)

    assert [d.node for d in result.drain] == [light]


def test_classes_moving_together_charge_their_shared_volume_once() -> None:
    """As above, with pods of two sizes (two classes): the second finds the volume the first brought."""
    w, light = consolidation_world(("own",), (("web-a", "1"), ("web-b", "1500m")))

    result = plan_consolidation(w)

    assert [d.node for d in result.drain] == [light]


def test_a_pod_sharing_a_nominated_pods_volume_finds_it_on_the_nominated_node() -> None:
    """reader-a waits on the node for a preemption (status.nominatedNodeName) and brings it the shared
    volume (3 of 3). kube-scheduler counts a nominated pod of equal or higher priority among the node's
    pods (addGENominatedPods), so reader-b, of the same volume and a lower priority, runs there too.
    The nominated pod's volume was not the node's, and reader-b got a node it never needed."""
    w, node = world(limit=3)
    shared_volume(w)
    w.items += [pending("reader-a", "200m", "shared", priority=1000), pending("reader-b", "300m", "shared")]
    w.pod_item("default/reader-a")["status"]["nominatedNodeName"] = node

    result = w.plan()

    assert result.scale_up == ()
    assert pending_codes(result)["default/reader-a"] == codes.NOMINATED
    assert pending_codes(result)["default/reader-b"] == codes.FITS_FREE_ROOM


def test_preempting_the_only_running_pod_of_a_volume_frees_no_slot_a_nominated_pod_of_it_keeps() -> None:
    """The node is at 3 of 3: db-0, db-1 and an expendable backfill pod that alone reads the shared
    volume. reader-a, nominated to the node, reads it too, so it stays attached once the backfill pod is
    preempted. train-0, of lower priority than reader-a, needs the backfill pod's CPU and brings a new
    volume: kube-scheduler counts the nominated pod's volume and refuses it there (4 of 3). The plan
    gave the backfill pod's slot back and left train-0 waiting on a preemption that never places it."""
    w, node = world(limit=3)
    shared_volume(w)
    backfill = o.pod(
        "backfill-0", cpu="7", memory="1Gi", node_name=node, priority=-100, owner=("ReplicaSet", "bf")
    )
    w.items.append(with_claims(backfill, "shared"))
    w.items.append(pending("reader-a", "100m", "shared", priority=1000))
    w.pod_item("default/reader-a")["status"]["nominatedNodeName"] = node
    w.items.append(claim("data-train-0", None))
    w.items.append(pending("train-0", "4", "data-train-0", priority=500))

    result = w.plan()

    assert scale_up(result) == {"db": (1, 2, ["default/train-0"])}


def test_pods_of_one_class_sharing_a_volume_take_one_slot_where_they_preempt() -> None:
    """As above, on a node whose CPU an expendable backfill pod holds: the three replicas preempt it,
    and bring the node one volume between them."""
    w, node = world(limit=3)
    shared_volume(w)
    w.items.append(
        o.pod("backfill-0", cpu="7", memory="1Gi", node_name=node, priority=-100, owner=("ReplicaSet", "bf"))
    )
    for i in range(3):
        pod = o.pod(f"reader-{i}", cpu="1", memory="128Mi", owner=("ReplicaSet", "reader"), priority=1000)
        w.items.append(with_claims(pod, "shared"))

    result = w.plan()

    assert result.scale_up == ()
    assert {pending_codes(result)[f"default/reader-{i}"] for i in range(3)} <= {
        codes.FITS_BY_PREEMPTION,
        codes.FITS_FREE_ROOM,
    }


def test_make_room_frees_a_volume_the_pods_it_moves_alone_share() -> None:
    """Node a is at its limit of 2: web-a and web-b, both movable, share the shared volume, and keep-0
    keeps its own. Moving both gives a the CPU db-new lacks and the shared volume's slot, which none of
    a's other pods uses; they go to b together, bringing it that one volume. Moving pods that share a
    volume freed none of it, and db-new got a new node."""
    pv = volume("pv-shared", "vol-shared")
    pv["spec"]["accessModes"] = ["ReadWriteMany"]
    w = make_room_world(pv, web_b_moves=True)

    result = w.plan(
        max_scale_in_fraction=1.0, consolidation="when-underutilized", consolidation_utilization_threshold=1.0
    )

    assert result.scale_up == ()
    assert pending_codes(result)["default/db-new"] == codes.MAKING_ROOM


def _with_self_affinity(w: World, light: str, key: str) -> None:
    """The light node's web pods require, over ``key``, to run beside pods of their own app."""
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": key}
    for item in w.items:
        if item["kind"] == "Pod" and item["spec"].get("nodeName") == light:
            item["spec"]["affinity"] = {
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
            }


def test_pods_that_must_move_to_one_node_together_bring_it_their_shared_volume_once() -> None:
    """The light node's two pods require to run beside each other (pod affinity on the hostname) and
    share a volume; the other node has one slot left. Both go there, bringing it one volume. Each was
    charged it when the node that takes them all was looked for, and the light node was kept."""
    w, light = consolidation_world(("own",), (("web-a", "1"), ("web-b", "1")))
    _with_self_affinity(w, light, "kubernetes.io/hostname")

    result = plan_consolidation(w)

    assert [d.node for d in result.drain] == [light]


def test_pods_that_must_move_to_one_zone_together_bring_a_node_their_shared_volume_once() -> None:
    """As above, the pods requiring to run in one zone."""
    w, light = consolidation_world(("own",), (("web-a", "1"), ("web-b", "1")))
    _with_self_affinity(w, light, "topology.kubernetes.io/zone")

    result = plan_consolidation(w)

    assert [d.node for d in result.drain] == [light]


def test_make_room_counts_no_slot_for_a_volume_the_node_keeps_attached() -> None:
    """Node a is at its limit of 2: web-a (may move) and web-b (may not) share vol-shared, keep-0 uses
    vol-keep. The pending reader needs web-a's CPU and reads vol-shared, which web-b keeps attached on
    a: kube-scheduler takes it out of the reader's new volumes there (csi.go, Filter), so moving web-a
    is all it takes. The lack was reckoned as if the node had none of the reader's volumes: one more
    slot, which no move of web-a frees, so the reader got a new node."""
    pv = volume("pv-shared", "vol-shared")
    pv["spec"]["accessModes"] = ["ReadWriteMany"]
    w = make_room_world(pv, web_b_moves=False)
    w.items = [i for i in w.items if i["metadata"]["name"] != "db-new"]
    w.items.append(pending("reader", "6", "shared"))

    result = w.plan(
        max_scale_in_fraction=1.0, consolidation="when-underutilized", consolidation_utilization_threshold=1.0
    )

    assert result.scale_up == ()
    assert [d.pods for d in result.drain] == [("default/web-a",)]
    assert pending_codes(result)["default/reader"] == codes.MAKING_ROOM


def test_a_volume_a_rolled_back_gang_member_brought_is_not_on_the_node_for_the_pods_after() -> None:
    """The node is at 2 of 3. A PodGroup member using the shared volume is placed there on a trial and
    rolled back (its minResources, 1000 CPUs, cannot be had), so it never runs there; a pod with a new
    volume then takes the last slot, and a reader of the shared volume needs a fourth: kube-scheduler
    refuses the node, so it gets a new one. The rollback gave the node back its room but not the
    plan's record of its volumes, and the reader was planned in free room there, pending for good."""
    w, _ = world(limit=3)
    shared_volume(w)
    w.pod_group(
        "scheduling.x-k8s.io/v1alpha1", "solo", spec={"minMember": 1, "minResources": {"cpu": "1000"}}
    )
    member = pending("solo-0", "200m", "shared", priority=1000)
    member["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = "solo"
    w.items.append(member)
    pending_with_new_volume(w, "db-2")
    w.items[-1]["spec"]["priority"] = 500
    w.items.append(pending("reader-0", "300m", "shared", priority=0))

    result = w.plan()

    assert pending_codes(result)["default/solo-0"] == codes.MAX_SIZE
    assert pending_codes(result)["default/db-2"] == codes.FITS_FREE_ROOM
    assert scale_up(result) == {"db": (1, 2, ["default/reader-0"])}
