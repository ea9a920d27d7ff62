"""A CapacityBuffer's chunks with volumes: the PodTemplate (or live pod) that shapes a chunk may name
persistent volume claims, inline EBS volumes or generic ephemeral volumes. cluster-autoscaler injects a
buffer's fake pods among the unschedulable pods (processors/capacitybuffer/pod_list_processor.go), and
its scale-up simulation runs kube-scheduler's filters on them as on any pending pod: VolumeBinding and
VolumeZone keep a chunk where its claims' volumes may be used, NodeVolumeLimits counts its volumes
against each CSI driver's attach limit (pkg/scheduler/framework/plugins/nodevolumelimits/csi.go). A
chunk that left them out held room, or kept a node, where the pods it stands for cannot run."""

from __future__ import annotations

import copy
from typing import Any

from plan_world import World, scale_up
from test_planner_csi_limits import ZONE, claim, volume, world
from test_provreq_volumes import ephemeral

BUFFER = "default/warm"


def with_buffer(w: World, volumes: list[dict[str, Any]], replicas: int = 1) -> None:
    """A buffer of ``replicas`` small chunks (100m, 128Mi) whose template has ``volumes``."""
    spec = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}],
        "volumes": volumes,
    }
    w.items.append({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "tpl", "namespace": "default"},
                    "template": {"spec": spec}})  # fmt: skip
    w.items.append({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
                    "metadata": {"name": "warm", "namespace": "default"},
                    "spec": {"podTemplateRef": {"name": "tpl"}, "replicas": replicas}})  # fmt: skip


def held_on(result: Any) -> list[str]:
    return [p.node for p in result.placements if p.pod.startswith(BUFFER + ":buffer:")]


def test_a_chunk_whose_claim_is_bound_in_another_zone_holds_no_room_in_this_one() -> None:
    """The node (zone a) has room for the chunk, but its claim's volume lives in zone b: a pod of the
    template could never run there, so the buffer holds nothing on it (no group opens zone b). A claim
    bound in zone a holds the room."""
    far, node = world(limit=3)
    elsewhere = copy.deepcopy(volume("pv-b", "vol-b"))
    elsewhere["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] = [
        "us-east-1b"
    ]
    far.items += [elsewhere, claim("far", "pv-b")]
    with_buffer(far, [{"name": "d", "persistentVolumeClaim": {"claimName": "far"}}])
    near, _ = world(limit=3)
    near.items += [volume("pv-s", "vol-s"), claim("near", "pv-s")]
    with_buffer(near, [{"name": "d", "persistentVolumeClaim": {"claimName": "near"}}])

    away = far.plan()
    here = near.plan()

    assert ZONE != "us-east-1b"
    assert held_on(away) == [] and away.scale_up == ()
    assert held_on(here) == [node]


def test_a_chunk_with_a_new_volume_gets_a_node_when_the_free_room_is_at_its_attach_limit() -> None:
    """Two EBS volumes fill the node's CSINode limit of 2: the chunk's new volume would be a third, so
    kube-scheduler refuses it the node and the buffer opens one. Below the limit it takes the room."""
    full, node = world(limit=2)
    with_buffer(full, [ephemeral()])
    room, _ = world(limit=3)
    with_buffer(room, [ephemeral()])

    at_limit = full.plan()
    below = room.plan()

    assert scale_up(at_limit)["db"][:2] == (1, 2) and node not in held_on(at_limit)
    assert below.scale_up == () and held_on(below) == [node]


def test_chunks_sharing_one_claim_count_its_volume_once_on_a_node() -> None:
    """Three chunks naming one claim bound in zone a share its volume: one slot of the node's limit of
    3 (two taken) for all three, as for three pods of one claim, not one slot each."""
    w, node = world(limit=3)
    w.items += [volume("pv-s", "vol-s"), claim("shared", "pv-s")]
    with_buffer(w, [{"name": "d", "persistentVolumeClaim": {"claimName": "shared"}}], replicas=3)

    result = w.plan()

    assert result.scale_up == () and held_on(result) == [node, node, node]


def test_chunks_sharing_one_claim_are_bounded_by_what_the_nodes_hold_with_the_volume_counted_once() -> None:
    """The group may not grow (MaxSize 1, its one node). A buffer is planned as at most the chunks the
    cluster could ever hold; with the shared volume counted once per chunk, the node's last attach slot
    bounded it at one chunk there (four with the group's template), and two of six chunks were dropped
    that the node holds."""
    w, node = world(limit=3)
    w.groups["db"]["MaxSize"] = 1
    w.items += [volume("pv-s", "vol-s"), claim("shared", "pv-s")]
    with_buffer(w, [{"name": "d", "persistentVolumeClaim": {"claimName": "shared"}}], replicas=6)

    result = w.plan()

    assert result.scale_up == () and held_on(result) == [node] * 6
