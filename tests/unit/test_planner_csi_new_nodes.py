"""CSI attach limits for volumes pending pods share, on nodes this plan launches or finds launching and
for claims not bound yet (kube-scheduler's NodeVolumeLimits, pkg/scheduler/framework/plugins/
nodevolumelimits/csi.go, Filter: a volume of the node's pods is no new volume for the pod; a claim not
bound yet is named by its namespace and name, getCSIDriverInfoFromSC, so its pods share it)."""

from __future__ import annotations

from typing import Any

from plan_world import World, pending_codes, scale_up
from test_planner_csi_limits import (
    ZONE,
    claim,
    csinode,
    gp3,
    pending_with_new_volume,
    volume,
    with_claims,
    world,
)
from test_planner_csi_shared import pending, shared_volume
from test_planner_gangs import cosched_pods

from spillway.local import objects as o
from spillway.planner import codes


def new_shared_claim(w: World, name: str = "scratch") -> None:
    """A ReadWriteMany claim of the gp3 class (WaitForFirstConsumer) not bound yet."""
    item = claim(name, None)
    item["spec"]["accessModes"] = ["ReadWriteMany"]
    w.items.append(item)


def reader(name: str, cpu: str, *claims: str, owner: str = "reader") -> dict[str, Any]:
    return with_claims(o.pod(name, cpu=cpu, memory="128Mi", owner=("ReplicaSet", owner)), *claims)


def test_pods_sharing_a_claim_not_bound_yet_take_one_attach_slot_on_the_node_they_go_to() -> None:
    """The node is at 2 of 3; two replicas share a ReadWriteMany claim not bound yet. kube-scheduler
    names the volume by the claim (csi.go getCSIDriverInfoFromSC), so it counts it once on the node: both
    run there. Each was charged it, and the second got a node it never needed."""
    w, _ = world(limit=3)
    new_shared_claim(w)
    w.items += [reader("reader-0", "200m", "scratch"), reader("reader-1", "200m", "scratch")]

    result = w.plan()

    assert result.scale_up == ()
    assert {pending_codes(result)[f"default/reader-{i}"] for i in range(2)} == {codes.FITS_FREE_ROOM}


def test_classes_sharing_a_claim_not_bound_yet_take_one_attach_slot_on_the_node_they_go_to() -> None:
    """As above, with pods of two sizes (two classes)."""
    w, _ = world(limit=3)
    new_shared_claim(w)
    w.items += [
        reader("reader-a", "200m", "scratch", owner="a"),
        reader("reader-b", "300m", "scratch", owner="b"),
    ]

    result = w.plan()

    assert result.scale_up == ()
    assert {pending_codes(result)[p] for p in ("default/reader-a", "default/reader-b")} == {
        codes.FITS_FREE_ROOM
    }


def test_pods_of_one_class_sharing_a_volume_fill_one_new_node() -> None:
    """The node is at its limit of 2, as is each new node of its group. Four replicas read the shared
    volume, which no node has: on the new node the first brings it, and for the others it is one of
    the node's. One new node runs them all; each was charged it, and two nodes were launched."""
    w, _ = world(limit=2)
    shared_volume(w)
    w.items += [reader(f"reader-{i}", "200m", "shared") for i in range(4)]

    result = w.plan()

    assert scale_up(result) == {"db": (1, 2, [f"default/reader-{i}" for i in range(4)])}


def test_classes_sharing_a_volume_share_it_on_a_new_node() -> None:
    """The node is at its limit of 3, as is each new node. Two pods of different sizes each bring a new
    volume of their own and read the shared volume: on one new node that is three volumes. Each was
    charged the shared one, and each got a node."""
    w, node = world(limit=3)
    shared_volume(w)
    w.items += [volume("pv-3", "vol-3"), claim("c3", "pv-3")]
    w.items.append(with_claims(o.pod("db-2", cpu="100m", memory="128Mi", node_name=node), "c3"))
    for name, cpu in (("reader-a", "200m"), ("reader-b", "300m")):
        w.items.append(claim(f"own-{name}", None))
        w.items.append(reader(name, cpu, f"own-{name}", "shared", owner=name))

    result = w.plan()

    assert scale_up(result) == {"db": (1, 2, ["default/reader-a", "default/reader-b"])}


def test_pods_with_new_volumes_of_their_own_still_take_a_slot_each_on_a_new_node() -> None:
    """The node is at its limit of 2: three pods, each with a new volume of its own, fill two new nodes."""
    w, _ = world(limit=2)
    for i in range(3):
        pending_with_new_volume(w, f"db-{i + 2}")

    result = w.plan()

    assert scale_up(result)["db"][:2] == (1, 3)


def test_pods_sharing_a_volume_fill_a_node_already_launching() -> None:
    """As the first new-node test, with a node of the group launching: the four replicas share the
    shared volume there too, and nothing new is launched."""
    w, _ = world(limit=2)
    w.add_instance("db", register=False)
    shared_volume(w)
    w.items += [pending(f"reader-{i}", "200m", "shared") for i in range(4)]

    result = w.plan()

    assert result.scale_up == ()
    assert {pending_codes(result)[f"default/reader-{i}"] for i in range(4)} == {codes.FITS_LAUNCHING}


def test_a_gang_sharing_a_volume_fits_the_one_new_node_its_group_has_room_for() -> None:
    """As the first new-node test, the four pods a coscheduling gang and the group one node below
    MaxSize: one new node holds them all. Each pod was charged the volume, and the gang, reckoned to
    need two nodes, was refused the group (max-size)."""
    w, _ = world(limit=2)
    w.groups["db"]["MaxSize"] = 2
    shared_volume(w)
    pods = cosched_pods(w, "readers", 4, min_member=4, cpu="200m", memory="128Mi")
    for key in pods:
        with_claims(w.pod_item(key), "shared")

    result = w.plan()

    assert scale_up(result) == {"db": (1, 2, pods)}


def test_make_room_gives_pods_sharing_a_volume_a_node_with_one_slot_left() -> None:
    """Node a is at 2 of 3 volumes and its CPU is taken by web-a, which may move to node b. Two pending
    readers of the shared volume may run only on a's group: its new node would take both, and moving
    web-a gives a their CPU; the one slot left holds the volume they share. Make room counted each
    reader's volume, found a short of a slot, and the node was launched."""
    w = World(regions=("us-east-1",))
    (a,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10, zones=[ZONE], labels={"pool": "cpu"})
    (b,) = w.group("other", "m5.2xlarge", nodes=1, max_size=10, zones=[ZONE], labels={"pool": "other"})
    w.items += [gp3(), csinode(a, 3), csinode(b, 3)]
    shared_volume(w)
    stay = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
    for name in ("keep-0", "keep-1"):
        w.items += [volume(f"pv-{name}", f"vol-{name}"), claim(name, f"pv-{name}")]
        pod = o.pod(
            name, cpu="500m", memory="1Gi", node_name=a, owner=("StatefulSet", "keep"), annotations=stay
        )
        w.items.append(with_claims(pod, name))
    move = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
    w.items.append(
        o.pod("web-a", cpu="6", memory="1Gi", node_name=a, owner=("ReplicaSet", "web"), annotations=move)
    )
    w.items.append(
        o.pod("pin-0", cpu="1", memory="1Gi", node_name=b, owner=("ReplicaSet", "pin"), annotations=stay)
    )
    for i in range(2):
        pod = o.pod(
            f"reader-{i}",
            cpu="2",
            memory="128Mi",
            owner=("ReplicaSet", "reader"),
            node_selector={"pool": "cpu"},
        )
        w.items.append(with_claims(pod, "shared"))

    result = w.plan(
        max_scale_in_fraction=1.0, consolidation="when-underutilized", consolidation_utilization_threshold=1.0
    )

    assert result.scale_up == ()
    assert {pending_codes(result)[f"default/reader-{i}"] for i in range(2)} == {codes.MAKING_ROOM}


def test_the_expander_weighs_a_group_at_the_one_new_node_pods_sharing_a_volume_fill() -> None:
    """As the first new-node test, with a second group of the same type, no node and so no known
    limit: each takes the four replicas on one new node, the same waste, and the expander's last tie,
    the name, picks db. Ranked at the volume charged per pod, db's option needed two nodes and wasted
    more, so the replicas went to the other group."""
    w, _ = world(limit=2)
    w.group("eb", "m5.2xlarge", max_size=10, zones=[ZONE])
    shared_volume(w)
    w.items += [reader(f"reader-{i}", "200m", "shared") for i in range(4)]

    result = w.plan()

    assert scale_up(result) == {"db": (1, 2, [f"default/reader-{i}" for i in range(4)])}
