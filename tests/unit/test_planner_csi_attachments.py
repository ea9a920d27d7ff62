"""CSI attach limits and VolumeAttachments: kube-scheduler (1.32 on) counts, beside the volumes of a
node's pods, those its VolumeAttachments hold (pkg/scheduler/framework/plugins/nodevolumelimits/csi.go,
getNodeVolumeAttachmentInfo; kubernetes/kubernetes#127757): a volume still detaching after its pod left
takes a slot until its VolumeAttachment is deleted."""

from __future__ import annotations

import json
from typing import Any

from plan_world import World, pending_codes, scale_up
from test_planner_csi_limits import EBS, claim, pending_with_new_volume, volume, with_claims, world

from spillway.local import objects as o
from spillway.model.cluster import ClusterSnapshot
from spillway.planner import codes


def attachment(node: str, pv: str | None, attacher: str = EBS, *, attached: bool = True) -> dict[str, Any]:
    """A VolumeAttachment as the attach/detach controller makes it (its name a hash of the three)."""
    source = {"persistentVolumeName": pv} if pv else {"inlineVolumeSpec": {}}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": f"csi-{node}-{pv}"},
        "spec": {"attacher": attacher, "nodeName": node, "source": source},
        "status": {"attached": attached},
    }


def detaching(w: World, node: str, name: str = "old") -> None:
    """The volume pv-<name> of a pod gone from ``node``, its VolumeAttachment still there."""
    w.items += [
        volume(f"pv-{name}", f"vol-{name}"),
        claim(name, f"pv-{name}"),
        attachment(node, f"pv-{name}"),
    ]


def test_a_volume_still_attached_after_its_pod_left_takes_a_slot() -> None:
    """The node's pods use 2 volumes of 3, and a third is still detaching: a pod with a new volume is
    refused there (4 of 3) and gets a node. It was planned onto the node's free room, where it waits."""
    w, node = world(limit=3)
    detaching(w, node)
    pending_with_new_volume(w)

    result = w.plan()

    assert scale_up(result) == {"db": (1, 2, ["default/db-2"])}


def test_a_volume_being_attached_takes_a_slot_too() -> None:
    """kube-scheduler counts a VolumeAttachment whatever its status says."""
    w, node = world(limit=3)
    detaching(w, node)
    w.items[-1]["status"]["attached"] = False
    pending_with_new_volume(w)

    result = w.plan()

    assert set(scale_up(result)) == {"db"}


def test_a_pod_of_the_attached_volume_takes_none_of_the_nodes_limit() -> None:
    """The node is at its limit of 2, and the volume of a StatefulSet pod recreated is still attached
    there: for kube-scheduler it is no new volume on that node, so the pod takes the node's room."""
    w, node = world(limit=2)
    detaching(w, node)
    w.items.append(
        with_claims(o.pod("web-0", cpu="100m", memory="128Mi", owner=("StatefulSet", "web")), "old")
    )

    result = w.plan()

    assert result.scale_up == ()
    assert pending_codes(result)["default/web-0"] == codes.FITS_FREE_ROOM


def test_a_volume_attached_for_a_pod_of_the_node_counts_once() -> None:
    w, node = world(limit=3)
    w.items.append(attachment(node, "pv-1"))
    pending_with_new_volume(w)

    result = w.plan()

    assert result.scale_up == () and pending_codes(result)["default/db-2"] == codes.FITS_FREE_ROOM


def test_attachments_kube_scheduler_does_not_count_take_no_slot() -> None:
    """No attacher, an inline volume, a volume not listed, an in-tree one: each left out, as
    getNodeVolumeAttachmentInfo leaves them out."""
    w, node = world(limit=3)
    w.items += [volume("pv-tree", "vol-tree", in_tree=True), volume("pv-x", "vol-x")]
    w.items += [
        attachment(node, "pv-x", attacher=""),
        attachment(node, None),
        attachment(node, "pv-missing"),
        attachment(node, "pv-tree"),
        attachment("another-node", "pv-x"),
    ]
    pending_with_new_volume(w)

    result = w.plan()

    assert result.scale_up == () and pending_codes(result)["default/db-2"] == codes.FITS_FREE_ROOM


def test_the_snapshot_keeps_the_attached_volumes_a_node_counts() -> None:
    w, node = world(limit=3)
    detaching(w, node)
    snapshot, *_ = w.parsed()
    (info,) = snapshot.nodes

    again = ClusterSnapshot.from_dict(json.loads(json.dumps(snapshot.to_dict())))

    assert info.attached == (f"{EBS}/vol-old",)
    assert again.nodes == snapshot.nodes
