"""Persistent volumes and where they let a pod run (spillway.model.cluster.VolumeMatcher): a bound EBS
volume lives in one zone, and kube-scheduler runs the pod only there."""

from __future__ import annotations

from typing import Any

import pytest
from plan_world import NOW, World, pending_codes, pending_reasons, scale_up

from spillway.local import objects as o
from spillway.model.cluster import ClusterSnapshot
from spillway.model.k8s import iter_kube_list
from spillway.planner import codes

ZONE = "topology.kubernetes.io/zone"
EBS_ZONE = "topology.ebs.csi.aws.com/zone"


def claim(
    name: str, volume: str | None, namespace: str = "default", storage_class: str | None = "gp3"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "100Gi"}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {**spec, **({"volumeName": volume} if volume else {})},
        "status": {"phase": "Bound" if volume else "Pending"},
    }


def storage_class(name: str, mode: str, zones: list[str] | None = None) -> dict[str, Any]:
    """A StorageClass of the EBS CSI driver, as the API server returns it (binding mode defaulted)."""
    sc: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "ebs.csi.aws.com",
        "reclaimPolicy": "Delete",
        "volumeBindingMode": mode,
    }
    if zones:
        sc["allowedTopologies"] = [{"matchLabelExpressions": [{"key": EBS_ZONE, "values": zones}]}]
    return sc


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


# --- claims not bound yet: when they bind (StorageClass volumeBindingMode) ------------------------------


def test_a_claim_that_waits_for_its_first_consumer_lets_the_pod_take_the_room() -> None:
    w, _ = two_zones()
    w.items += [
        storage_class("gp3", "WaitForFirstConsumer"),
        claim("data-db-0", None),
        stateful("db-0", "data-db-0"),
    ]

    result = w.plan()

    assert result.scale_up == () and pending_codes(result)["default/db-0"] == codes.FITS_FREE_ROOM


def test_a_claim_that_binds_at_once_and_is_not_bound_gets_no_node() -> None:
    """kube-scheduler: "pod has unbound immediate PersistentVolumeClaims". A node launched for it would
    sit with the pod planned onto its room, never idle, never used."""
    w = World(regions=("us-east-1",))
    w.group("db-b", "m5.2xlarge", max_size=10, zones=["us-east-1b"])
    w.items += [storage_class("gp2", "Immediate"), claim("data-db-0", None, storage_class="gp2"),
                stateful("db-0", "data-db-0")]  # fmt: skip

    result = w.plan()

    assert result.scale_up == ()
    ((pod, code, reason),) = [(p.pod, p.code, p.reason) for p in result.pending]
    assert (pod, code) == ("default/db-0", codes.VOLUME_UNBOUND)
    assert "PersistentVolumeClaim data-db-0 is not bound" in reason and "gp2 binds Immediately" in reason


def test_bound_it_is_planned_as_any_pod() -> None:
    w = World(regions=("us-east-1",))
    w.group("db-b", "m5.2xlarge", max_size=10, zones=["us-east-1b"])
    w.items += [storage_class("gp2", "Immediate"), volume("pv-1", "us-east-1b"),
                claim("data-db-0", "pv-1", storage_class="gp2"), stateful("db-0", "data-db-0")]  # fmt: skip

    assert scale_up(w.plan()) == {"db-b": (0, 1, ["default/db-0"])}


def test_a_claim_of_no_class_or_of_a_class_that_does_not_exist_binds_at_once() -> None:
    for kwargs, words in (({"storage_class": ""}, "names no StorageClass"),
                          ({"storage_class": "fast"}, "StorageClass fast does not exist")):  # fmt: skip
        w = World(regions=("us-east-1",))
        w.group("db-b", "m5.2xlarge", max_size=10, zones=["us-east-1b"])
        w.items += [storage_class("gp3", "WaitForFirstConsumer"), claim("data-db-0", None, **kwargs),
                    stateful("db-0", "data-db-0")]  # fmt: skip
        result = w.plan()
        assert result.scale_up == () and pending_codes(result)["default/db-0"] == codes.VOLUME_UNBOUND
        assert words in result.pending[0].reason


def test_the_beta_annotation_names_the_class_before_the_spec() -> None:
    w = World(regions=("us-east-1",))
    w.group("db-b", "m5.2xlarge", max_size=10, zones=["us-east-1b"])
    old = claim("data-db-0", None, storage_class="gp3")
    old["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": "gp2"}
    w.items += [storage_class("gp2", "Immediate"), storage_class("gp3", "WaitForFirstConsumer"), old,
                stateful("db-0", "data-db-0")]  # fmt: skip

    assert pending_codes(w.plan())["default/db-0"] == codes.VOLUME_UNBOUND


def test_a_missing_claim_or_one_being_deleted_holds_the_pod() -> None:
    w = World(regions=("us-east-1",))
    w.group("db-b", "m5.2xlarge", max_size=10, zones=["us-east-1b"])
    going = claim("data-db-1", "pv-1")
    going["metadata"]["deletionTimestamp"] = "2026-11-02T11:59:00Z"
    going["metadata"]["finalizers"] = ["kubernetes.io/pvc-protection"]
    w.items += [
        volume("pv-1", "us-east-1b"),
        going,
        stateful("db-0", "data-db-0"),
        stateful("db-1", "data-db-1"),
    ]

    result = w.plan()

    assert result.scale_up == ()
    reasons = {p.pod: p.reason for p in result.pending if p.code == codes.VOLUME_UNBOUND}
    assert "data-db-0 does not exist" in reasons["default/db-0"]
    assert "data-db-1 is being deleted" in reasons["default/db-1"]


def test_a_claim_bound_to_a_volume_the_snapshot_does_not_have_holds_the_pod() -> None:
    """Defence in depth (review r15-4): the claim is bound, so its pod runs only where that volume is,
    and the snapshot cannot say where. Read as "no zone constraint" it got a node in any zone (and its
    node could be drained for one where the pod never starts). kube-scheduler refuses it on every node
    ("pvc(s) bound to non-existent pv(s)"): held when the snapshot has volumes, only not that one.
    (With none at all the kind was not given: see the test after the next.)"""
    w, _ = two_zones()  # zone a has room, zone b a group
    w.items += [
        volume("pv-other", "us-east-1a"),
        claim("data-db-0", "pv-gone"),
        stateful("db-0", "data-db-0"),
    ]
    snapshot, *_ = w.parsed()
    (pod,) = [p for p in snapshot.pods if p.name == "db-0"]

    result = w.plan()

    assert pod.volume_wait is not None and "PersistentVolume pv-gone" in pod.volume_wait
    assert result.scale_up == () and pending_codes(result)["default/db-0"] == codes.VOLUME_UNBOUND


def test_a_volume_that_names_no_zone_frees_its_pod_to_run_anywhere() -> None:
    """A volume the snapshot has but that says nothing about where it may be used (an NFS or EFS one)
    constrains nothing: the pod takes zone a's room."""
    w, _ = two_zones()
    efs = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-efs"},
           "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteMany"],
                    "csi": {"driver": "efs.csi.aws.com", "volumeHandle": "fs-1"}}}  # fmt: skip
    w.items += [efs, claim("data-db-0", "pv-efs"), stateful("db-0", "data-db-0")]

    result = w.plan()

    assert result.scale_up == () and pending_codes(result)["default/db-0"] == codes.FITS_FREE_ROOM


def test_with_no_claim_or_class_listed_nothing_is_held() -> None:
    """`spillway plan` input may leave claims or classes out (`kubectl get nodes,pods,pdb` has
    neither; observe reads every kind or fails): a pod is never held for a kind it was not given."""
    w = World(regions=("us-east-1",))
    w.group("db-b", "m5.2xlarge", max_size=10, zones=["us-east-1b"])
    w.items += [stateful("db-0", "data-db-0")]  # no claim listed at all
    assert set(scale_up(w.plan())) == {"db-b"}

    w.items += [claim("data-db-0", None, storage_class="gp2")]  # claims listed, classes not
    assert set(scale_up(w.plan())) == {"db-b"}


def test_with_claims_listed_and_no_volume_at_all_a_bound_claim_holds_nothing() -> None:
    """Review r27: `kubectl get nodes,pods,pdb,pvc` gives claims, but PersistentVolumes are
    cluster-scoped and come only with `pv`. Claims and classes were guarded, volumes not: every bound
    claim was "bound to PersistentVolume pv-N, which the snapshot does not have", so a pending stateful
    pod got no node and a running one held its node `does-not-fit` (kube-scheduler would place it
    nowhere: false, the volumes exist). With no volume in the input the kind was not given: nothing is
    held, and the two half-empty nodes consolidate as when the volumes are given."""
    w, _ = two_zones()  # zone a has room
    w.items += [claim("data-db-0", "pv-0"), stateful("db-0", "data-db-0")]
    assert pending_codes(w.plan())["default/db-0"] == codes.FITS_FREE_ROOM

    w, a, b = _held_on_a_node("volume-gone")
    w.items = [i for i in w.items if i["kind"] != "PersistentVolume"]  # claims bound, volumes not listed

    result = w.plan(max_scale_in_fraction=1.0, consolidation="when-underutilized",
                    consolidation_utilization_threshold=1.0)  # fmt: skip

    assert {k.node: k.code for k in result.kept if k.code == codes.DOES_NOT_FIT} == {}
    assert len(result.drain) == 1 and result.drain[0].node in (a, b)


def test_a_class_that_may_make_volumes_in_one_zone_only_sends_the_pod_there() -> None:
    w, _ = two_zones()  # zone a has room; the class makes volumes in zone b only
    w.items += [storage_class("gp3-b", "WaitForFirstConsumer", zones=["us-east-1b"]),
                claim("data-db-0", None, storage_class="gp3-b"), stateful("db-0", "data-db-0")]  # fmt: skip
    snapshot, *_ = w.parsed()
    (pod,) = [p for p in snapshot.pods if p.name == "db-0"]

    assert pod.required_terms == (((ZONE, "In", ("us-east-1b",), False),),)
    assert scale_up(w.plan()) == {"db-b": (0, 1, ["default/db-0"])}


def test_the_snapshot_keeps_why_a_pod_waits_for_its_volume() -> None:
    from spillway.model.cluster import PodInfo

    w = World(regions=("us-east-1",))
    w.items += [storage_class("gp2", "Immediate"), claim("data-db-0", None, storage_class="gp2"),
                stateful("db-0", "data-db-0")]  # fmt: skip
    snapshot, *_ = w.parsed()
    (pod,) = [p for p in snapshot.pods if p.name == "db-0"]

    assert pod.volume_wait is not None and "data-db-0" in pod.volume_wait
    assert pod.to_dict()["vw"] == pod.volume_wait
    assert PodInfo.from_dict(pod.to_dict()) == pod


def test_a_claim_getting_bound_changes_the_fingerprint() -> None:
    """Observe writes a snapshot only when the fingerprint changes (else at the heartbeat): the pod held
    for its volume must be planned as soon as the claim is bound, not minutes later."""
    from spillway.model.snapshot import fingerprint

    w = World(regions=("us-east-1",))
    w.items += [storage_class("gp2", "Immediate"), claim("data-db-0", None, storage_class="gp2"),
                stateful("db-0", "data-db-0")]  # fmt: skip
    held = fingerprint(w.parsed()[0], [])
    w.items[1] = claim("data-db-0", "pv-1", storage_class="gp2")

    assert fingerprint(w.parsed()[0], []) != held


# -- running pods: where a move may take them --

HELD = ("volume-gone", "claim-gone", "claim-being-deleted")


def _held_on_a_node(case: str) -> tuple[World, str, str]:
    """Two nodes of a consolidating group in one zone. ``db-0`` runs on the first, safe to evict (so
    movable), and its claim ``data-db-0`` is in the state ``case``; ``db-1`` runs on the second with a
    claim and volume as they should be (the snapshot holds claims and volumes)."""
    w = World(regions=("us-east-1",))
    a, b = sorted(w.group("db", "m5.2xlarge", nodes=2, max_size=10))
    movable = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
    w.items += [
        stateful("db-0", "data-db-0", node_name=a, annotations=movable),
        stateful("db-1", "data-db-1", node_name=b, annotations=movable),
        claim("data-db-1", "pv-1"),
        volume("pv-1", "us-east-1a"),
    ]
    if case == "volume-gone":
        w.items.append(claim("data-db-0", "pv-0"))  # bound to a volume the snapshot does not have
    elif case == "claim-being-deleted":  # pvc-protection keeps it while the pod runs
        going = claim("data-db-0", "pv-0")
        going["metadata"]["deletionTimestamp"] = "2026-11-02T11:59:00Z"
        going["metadata"]["finalizers"] = ["kubernetes.io/pvc-protection"]
        w.items += [going, volume("pv-0", "us-east-1a")]
    return w, a, b


@pytest.mark.parametrize("case", HELD)
def test_a_running_pod_its_claim_would_hold_is_not_moved_to_consolidate(case: str) -> None:
    """Evicted, the pod's replacement (same claim: a StatefulSet's, or a Deployment's template naming
    it) would wait on every node: kube-scheduler's VolumeBinding PreFilter refuses a pod whose claim is
    not found, is being deleted or is lost, UnschedulableAndUnresolvable (kubernetes/kubernetes
    pkg/scheduler/framework/plugins/volumebinding/volume_binding.go, podHasPVCs). cluster-autoscaler
    simulates a node's removal through the same scheduler framework and keeps the node
    (NoPlaceToMovePods: kubernetes/autoscaler cluster-autoscaler/simulator/cluster.go). Before, the
    pod counted as movable onto the other node's room and its node was drained."""
    w, a, _ = _held_on_a_node(case)

    result = w.plan(max_scale_in_fraction=1.0, consolidation="when-underutilized",
                    consolidation_utilization_threshold=1.0)  # fmt: skip

    assert [d.pods for d in result.drain] == [("default/db-1",)]  # db-1 may go to a's room
    code, reason = {k.node: (k.code, k.reason) for k in result.kept}[a]
    assert code == codes.DOES_NOT_FIT
    assert "default/db-0" in reason and "data-db-0" in reason


def test_make_room_never_moves_a_pod_its_claim_would_hold() -> None:
    """The same rule when make room looks for a node to give a pending pod: the running pod that could
    not start elsewhere stays, and the pending pod gets a new node instead. (db-1 may not move: only
    db-0's node could give room; before, it did.)"""
    w, _, _ = _held_on_a_node("claim-gone")
    del w.pod_item("default/db-1")["metadata"]["annotations"]
    (big,) = w.pods("big", 1, cpu="7", memory="1Gi")

    result = w.plan(max_scale_in_fraction=1.0, consolidation="when-underutilized")

    assert result.drain == ()
    assert scale_up(result) == {"db": (2, 3, [big])}


def test_a_zone_spread_counts_every_zone_its_pod_may_use_not_only_its_volumes() -> None:
    """A spread's domains are the nodes that pass the pod's own nodeSelector and required affinity
    (podtopologyspread, GetRequiredNodeAffinity); its volume's zone is no part of them. db-1's volume is
    in zone a, which runs db-0 while zone b runs none: one more in a would make it 2:0, above maxSkew 1,
    so kube-scheduler places it nowhere and a node launched in zone a would stay empty."""
    w = World(regions=("us-east-1",))
    (a,) = w.group("db-a", "m5.2xlarge", nodes=1, max_size=10, zones=["us-east-1a"])
    (b,) = w.group("db-b", "m5.2xlarge", nodes=1, max_size=10, zones=["us-east-1b"])
    w.node(b)["metadata"]["labels"][ZONE] = "us-east-1b"
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "db"}},
        }
    ]
    running = stateful("db-0", "data-db-0", node_name=a, labels={"app": "db"})
    waiting = stateful("db-1", "data-db-1", labels={"app": "db"})
    for pod in (running, waiting):
        pod["spec"]["topologySpreadConstraints"] = spread
    w.items += [volume("pv-0", "us-east-1a"), claim("data-db-0", "pv-0"), running]
    w.items += [volume("pv-1", "us-east-1a"), claim("data-db-1", "pv-1"), waiting]
    w.items.append(o.pod("filler", cpu="5", memory="1Gi", node_name=a))  # zone a's node is full

    result = w.plan()

    assert result.scale_up == ()
    assert "us-east-1a take no more of it" in pending_reasons(result)["default/db-1"]
    snapshot = ClusterSnapshot.from_objects("ml", NOW, iter_kube_list(o.kube_list(w.items)))
    stored = ClusterSnapshot.from_dict(snapshot.to_dict())
    assert stored == snapshot
    assert next(p for p in stored.pods if p.name == "db-1").own_terms == ()
