"""CSI attach limits for volumes pending pods share, on nodes this plan launches or finds launching and
for claims not bound yet (kube-scheduler's NodeVolumeLimits, pkg/scheduler/framework/plugins/
nodevolumelimits/csi.go, Filter: a volume of the node's pods is no new volume for the pod; a claim not
bound yet is named by its namespace and name, getCSIDriverInfoFromSC, so its pods share it)."""

from __future__ import annotations

from typing import Any

from plan_world import World, pending_codes
from test_planner_csi_limits import claim, with_claims, world

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
