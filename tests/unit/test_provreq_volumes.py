"""A ProvisioningRequest's pods with volumes: the PodTemplate a pod set names may give its pods
persistent volume claims, inline EBS volumes or generic ephemeral volumes, and kube-scheduler places
the pods Kueue then creates only where those volumes let them (VolumeBinding, VolumeZone) and within
each CSI driver's attach limit (NodeVolumeLimits, pkg/scheduler/framework/plugins/nodevolumelimits/
csi.go). A booking or a gang launch that left them out held room, or launched nodes, the pods cannot
use."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from plan_world import scale_up
from test_planner_csi_limits import ZONE, claim, volume, world
from test_provreq import conds, request, run_offline

from spillway.model.provreq import BEST_EFFORT_ATOMIC, CHECK_CAPACITY


def volume_template(name: str, volumes: list[dict[str, Any]]) -> dict[str, Any]:
    spec = {
        "containers": [
            {"name": "main", "image": "x", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}
        ],
        "volumes": volumes,
    }
    return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name, "namespace": "default"},
            "template": {"spec": spec}}  # fmt: skip


def ephemeral(class_name: str | None = "gp3") -> dict[str, Any]:
    """A generic ephemeral volume: the ephemeral volume controller makes its claim with each pod."""
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
    if class_name is not None:
        spec["storageClassName"] = class_name
    return {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": spec}}}


def test_a_check_capacity_request_whose_pods_bring_new_volumes_is_not_found_on_a_node_at_its_attach_limit(
    tmp_path: Path,
) -> None:
    """The node has CPU for the pod but its two EBS volumes fill the limit of 2: kube-scheduler refuses
    it the pod and its new volume. The request was CapacityIsFound there."""
    full, _ = world(limit=2)
    room, _ = world(limit=3)
    req = [request("r", CHECK_CAPACITY, [("t", 1)])]

    at_limit = run_offline(full, req, [volume_template("t", [ephemeral()])], tmp_path)
    below = run_offline(room, req, [volume_template("t", [ephemeral()])], tmp_path)

    assert conds(at_limit)["Provisioned"] == ("False", "CapacityIsNotFound")
    assert conds(below)["Provisioned"] == ("True", "CapacityIsFound")


def test_an_ephemeral_volume_naming_no_class_is_of_the_default_class(tmp_path: Path) -> None:
    """The API server gives its claim the default StorageClass (DefaultStorageClass admission)."""
    w, _ = world(limit=2)
    default = next(i for i in w.items if i["kind"] == "StorageClass")
    default["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    req = [request("r", CHECK_CAPACITY, [("t", 1)])]

    result = run_offline(w, req, [volume_template("t", [ephemeral(None)])], tmp_path)

    assert conds(result)["Provisioned"] == ("False", "CapacityIsNotFound")


def test_an_atomic_request_launches_as_many_nodes_as_the_attach_limit_needs(tmp_path: Path) -> None:
    """Four pods each with its own new EBS volume, on nodes whose CSINode allows 2: two new nodes,
    though one node's CPU holds all four (two of its pods would wait for a node never launched)."""
    w, _ = world(limit=2)
    req = [request("r", BEST_EFFORT_ATOMIC, [("t", 4)])]

    result = run_offline(w, req, [volume_template("t", [ephemeral()])], tmp_path)
    plain = run_offline(w, req, [volume_template("t", [])], tmp_path)

    assert scale_up(result)["db"][:2] == (1, 3)
    assert plain.scale_up == () and conds(plain)["Provisioned"] == ("True", "CapacityIsFound")


def test_a_pod_set_sharing_one_claim_counts_its_volume_once_and_goes_where_the_volume_is(
    tmp_path: Path,
) -> None:
    """The pods of a set that name one claim share its volume: one slot on the node (limit 3, two
    taken), however many pods. A claim bound to a volume in another zone than the node's keeps the
    request off it (VolumeZone), as it keeps the pods."""
    w, _ = world(limit=3)
    w.items += [volume("pv-s", "vol-s"), claim("shared", "pv-s")]
    elsewhere = copy.deepcopy(volume("pv-b", "vol-b"))
    elsewhere["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] = [
        "us-east-1b"
    ]
    w.items += [elsewhere, claim("far", "pv-b")]
    req = [request("r", CHECK_CAPACITY, [("t", 3)])]

    shared = run_offline(
        w,
        req,
        [volume_template("t", [{"name": "d", "persistentVolumeClaim": {"claimName": "shared"}}])],
        tmp_path,
    )
    far = run_offline(
        w,
        req,
        [volume_template("t", [{"name": "d", "persistentVolumeClaim": {"claimName": "far"}}])],
        tmp_path,
    )

    assert ZONE != "us-east-1b"
    assert conds(shared)["Provisioned"] == ("True", "CapacityIsFound")
    assert conds(far)["Provisioned"] == ("False", "CapacityIsNotFound")
