"""Persistent volumes and where they let a pod run (spillway.model.cluster.VolumeMatcher): a bound EBS
volume lives in one zone, and kube-scheduler runs the pod only there."""

from __future__ import annotations

from typing import Any

from plan_world import World, pending_codes, scale_up

from spillway.local import objects as o
from spillway.planner import codes

ZONE = "topology.kubernetes.io/zone"
EBS_ZONE = "topology.ebs.csi.aws.com/zone"


def claim(name: str, volume: str | None, namespace: str = "default") -> dict[str, Any]:
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "100Gi"}}}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {**spec, **({"volumeName": volume} if volume else {}), "storageClassName": "gp3"},
        "status": {"phase": "Bound" if volume else "Pending"},
    }


def volume(name: str, zone: str, key: str = EBS_ZONE, *, legacy: bool = False) -> dict[str, Any]:
    """An EBS CSI volume in ``zone`` (its nodeAffinity), or, ``legacy``, an in-tree one with zone labels."""
    spec: dict[str, Any] = {"capacity": {"storage": "100Gi"}, "accessModes": ["ReadWriteOnce"]}
    meta: dict[str, Any] = {"name": name}
    if legacy:
        meta["labels"] = {"failure-domain.beta.kubernetes.io/zone": zone}
    else:
        term = {"matchExpressions": [{"key": key, "operator": "In", "values": [zone]}]}
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec}


def stateful(name: str, claim_name: str, **kwargs: Any) -> dict[str, Any]:
    pod = o.pod(name, cpu="2", memory="4Gi", owner=("StatefulSet", "db"), **kwargs)
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]
    return pod


def two_zones() -> tuple[World, str]:
    """Zone a: a node with room; zone b: a group with no node yet."""
    w = World(regions=("us-east-1",))
    (a,) = w.group("db-a", "m5.2xlarge", nodes=1, max_size=10, zones=["us-east-1a"])
    w.group("db-b", "m5.2xlarge", max_size=10, zones=["us-east-1b"])
    return w, a


def test_a_pod_whose_volume_lives_in_another_zone_gets_a_node_there() -> None:
    w, _ = two_zones()
    w.items += [volume("pv-1", "us-east-1b"), claim("data-db-0", "pv-1"), stateful("db-0", "data-db-0")]

    result = w.plan()

    assert scale_up(result) == {"db-b": (0, 1, ["default/db-0"])}  # not zone a's free room


def test_without_the_volume_or_with_a_claim_not_bound_yet_it_takes_the_room() -> None:
    w, _ = two_zones()
    w.items += [claim("data-db-0", None), stateful("db-0", "data-db-0")]  # WaitForFirstConsumer

    assert w.plan().scale_up == ()
    assert pending_codes(w.plan())["default/db-0"] == codes.FITS_FREE_ROOM


def test_a_volume_made_before_volume_topology_is_placed_by_its_zone_label() -> None:
    w, _ = two_zones()
    w.items += [
        volume("pv-1", "us-east-1b", legacy=True),
        claim("data-db-0", "pv-1"),
        stateful("db-0", "data-db-0"),
    ]

    assert set(scale_up(w.plan())) == {"db-b"}


def test_the_volume_is_anded_with_the_pods_own_affinity() -> None:
    """The pod asks for zone a or b; its volume says b: only b."""
    w, _ = two_zones()
    either = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["us-east-1a", "us-east-1b"]}]}
    affinity = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [either]}}
    }
    w.items += [volume("pv-1", "us-east-1b", key=ZONE), claim("data-db-0", "pv-1"),
                stateful("db-0", "data-db-0", affinity=affinity)]  # fmt: skip
    snapshot, *_ = w.parsed()
    (pod,) = [p for p in snapshot.pods if p.name == "db-0"]

    assert pod.required_terms == (
        ((ZONE, "In", ("us-east-1a", "us-east-1b"), False), (ZONE, "In", ("us-east-1b",), False)),
    )
    assert set(scale_up(w.plan())) == {"db-b"}


def test_a_generic_ephemeral_volumes_claim_is_the_pods_name_and_the_volumes() -> None:
    w, _ = two_zones()
    pod = o.pod("scratch-0", cpu="2", memory="4Gi")
    pod["spec"]["volumes"] = [{"name": "cache", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]
    w.items += [volume("pv-9", "us-east-1b"), claim("scratch-0-cache", "pv-9"), pod]

    assert set(scale_up(w.plan())) == {"db-b"}


def test_a_group_over_several_zones_cannot_promise_the_volumes_zone() -> None:
    """EC2 picks the zone of a multi-zone group's new instance: its template node has no zone, and a
    pod whose volume names one gets no node from it (one group per zone does)."""
    w = World(regions=("us-east-1",))
    w.group("db", "m5.2xlarge", max_size=10, zones=["us-east-1a", "us-east-1b"])
    w.items += [volume("pv-1", "us-east-1b"), claim("data-db-0", "pv-1"), stateful("db-0", "data-db-0")]

    result = w.plan()

    assert result.scale_up == () and pending_codes(result)["default/db-0"] == codes.NO_GROUP_FITS
