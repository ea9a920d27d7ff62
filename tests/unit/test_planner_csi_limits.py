"""CSI attach limits (kube-scheduler's NodeVolumeLimits, pkg/scheduler/framework/plugins/nodevolumelimits/
csi.go): a node whose CSINode says its driver may use N volumes takes no pod that would bring it past N
unique volumes of that driver, whatever CPU and memory it has free."""

from __future__ import annotations

import json
from typing import Any

from plan_world import World, pending_codes, scale_up
from test_live_template import add_typed_instance

from spillway.local import objects as o
from spillway.model.cluster import ClusterSnapshot
from spillway.model.resources import attach_limit_key
from spillway.planner import codes

EBS = "ebs.csi.aws.com"
EBS_KEY = attach_limit_key(EBS)
ZONE = "us-east-1a"


def csinode(node: str, count: int | None, driver: str = EBS) -> dict[str, Any]:
    """A CSINode as the kubelet registers it through the driver's node-driver-registrar."""
    entry: dict[str, Any] = {
        "name": driver,
        "nodeID": "i-0123456789abcdef0",
        "topologyKeys": [f"topology.{driver}/zone"],
    }
    if count is not None:
        entry["allocatable"] = {"count": count}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": node, "annotations": {"storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/aws-ebs"}},
        "spec": {"drivers": [entry]},
    }  # fmt: skip


def gp3() -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "gp3"},
        "provisioner": EBS,
        "volumeBindingMode": "WaitForFirstConsumer",
    }


def volume(name: str, handle: str, *, in_tree: bool = False) -> dict[str, Any]:
    """An EBS volume in ZONE: a CSI one, or an in-tree ``awsElasticBlockStore`` one."""
    term = {
        "matchExpressions": [{"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": [ZONE]}]
    }
    source = (
        {"awsElasticBlockStore": {"volumeID": f"aws://{ZONE}/{handle}", "fsType": "ext4"}}
        if in_tree
        else {"csi": {"driver": EBS, "volumeHandle": handle, "fsType": "ext4"}}
    )
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"],
            "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
            **source,
        },
    }


def claim(name: str, volume_name: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "storageClassName": "gp3"}
    if volume_name:
        spec["volumeName"] = volume_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def with_claims(pod: dict[str, Any], *claims: str) -> dict[str, Any]:
    pod["spec"]["volumes"] = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)
    ]
    return pod


def world(limit: int | None = 2, *, csi_node: bool = True) -> tuple[World, str]:
    """One m5.2xlarge node (zone a) with two running pods, each with its own EBS volume, and plenty of
    CPU and memory left; its CSINode allows the EBS driver ``limit`` volumes."""
    w = World(regions=("us-east-1",))
    (node,) = w.group("db", "m5.2xlarge", nodes=1, max_size=10, zones=[ZONE])
    w.items += [
        gp3(),
        volume("pv-1", "vol-1"),
        volume("pv-2", "vol-2"),
        claim("c1", "pv-1"),
        claim("c2", "pv-2"),
    ]
    w.items += [
        with_claims(
            o.pod("db-0", cpu="100m", memory="128Mi", node_name=node, owner=("StatefulSet", "db")), "c1"
        ),
        with_claims(
            o.pod("db-1", cpu="100m", memory="128Mi", node_name=node, owner=("StatefulSet", "db")), "c2"
        ),
    ]
    if csi_node:
        w.items.append(csinode(node, limit))
    return w, node


def pending_with_new_volume(w: World, name: str = "db-2", claims: int = 1) -> None:
    """A pending pod whose claims are not bound yet (WaitForFirstConsumer): new volumes of the driver."""
    names = [f"data-{name}-{i}" for i in range(claims)]
    w.items += [claim(c, None) for c in names]
    w.items.append(with_claims(o.pod(name, cpu="100m", memory="128Mi", owner=("StatefulSet", "db")), *names))


def test_a_pod_with_a_new_volume_gets_a_node_when_the_free_room_is_on_a_node_at_its_attach_limit() -> None:
    """kube-scheduler refuses the node (2 attached + 1 new > 2): waiting for it would leave the pod
    pending for good. The group's new node, read from the running one, allows 2 again."""
    w, _ = world(limit=2)
    pending_with_new_volume(w)

    result = w.plan()

    assert scale_up(result) == {"db": (1, 2, ["default/db-2"])}


def test_below_the_limit_the_pod_takes_the_free_room() -> None:
    w, _ = world(limit=3)
    pending_with_new_volume(w)

    result = w.plan()

    assert result.scale_up == () and pending_codes(result)["default/db-2"] == codes.FITS_FREE_ROOM


def test_a_pod_without_volumes_still_takes_the_room_of_a_node_at_its_limit() -> None:
    w, _ = world(limit=2)
    w.items.append(o.pod("web-0", cpu="100m", memory="128Mi"))

    result = w.plan()

    assert result.scale_up == () and pending_codes(result)["default/web-0"] == codes.FITS_FREE_ROOM


def test_a_node_without_a_csinode_or_without_a_count_has_no_limit() -> None:
    """However many pods with new volumes the plan puts there."""
    for w, _ in (world(csi_node=False), world(limit=None)):
        pending_with_new_volume(w)
        pending_with_new_volume(w, "db-3", claims=2)

        result = w.plan()

        assert result.scale_up == ()
        assert {pending_codes(result)[f"default/db-{i}"] for i in (2, 3)} == {codes.FITS_FREE_ROOM}


def test_a_volume_two_pods_on_the_node_share_counts_once() -> None:
    """db-0 and db-1 both use c1 (vol-1): the node has one EBS volume, and room for one more of 2."""
    w, _ = world(limit=2)
    pod = next(i for i in w.items if i["kind"] == "Pod" and i["metadata"]["name"] == "db-1")
    pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] = "c1"
    pending_with_new_volume(w)

    result = w.plan()

    assert result.scale_up == () and pending_codes(result)["default/db-2"] == codes.FITS_FREE_ROOM


def test_an_in_tree_ebs_volume_counts_against_the_ebs_csi_drivers_limit() -> None:
    """CSI migration hands awsElasticBlockStore volumes to ebs.csi.aws.com; kube-scheduler counts them
    there (csi.go, getCSIDriverInfo and TranslateInTreePVToCSI), as it counts an inline one."""
    w, node = world(limit=3)
    w.items.append(volume("pv-3", "vol-3", in_tree=True))
    w.items.append(claim("c3", "pv-3"))
    inline = o.pod("legacy-0", cpu="100m", memory="128Mi", node_name=node)
    inline["spec"]["volumes"] = [{"name": "d", "awsElasticBlockStore": {"volumeID": "vol-4"}}]
    w.items.append(inline)
    pending_with_new_volume(w)
    snapshot, *_ = w.parsed()
    legacy = next(p for p in snapshot.pods if p.name == "legacy-0")

    result = w.plan()

    assert legacy.requests[EBS_KEY] == 1000
    assert set(scale_up(result)) == {"db"}  # vol-1, vol-2, vol-4: at 3


def test_a_pod_needing_more_volumes_than_a_new_node_allows_gets_no_node() -> None:
    """The limit of the group's new nodes is read from its running node: 2, and the pod brings 3."""
    w, _ = world(limit=2)
    pending_with_new_volume(w, claims=3)

    result = w.plan()

    assert result.scale_up == ()
    assert pending_codes(result)["default/db-2"] == codes.NO_GROUP_FITS


def test_a_group_with_no_running_node_has_no_known_limit() -> None:
    """No node of the group tells its limit: Spillway does not guess the driver's per-type table."""
    w, _ = world(limit=2)
    w.group("spare", "m5.2xlarge", max_size=10, zones=[ZONE])
    pending_with_new_volume(w, claims=3)

    result = w.plan()

    assert set(scale_up(result)) == {"spare"}


def test_a_node_without_a_limit_takes_the_pod_though_a_node_of_its_shape_is_at_its_limit() -> None:
    """Two nodes of one shape: the first at its limit, the second without a CSINode (no limit)."""
    w, _ = world(limit=2)
    w.group("db2", "m5.2xlarge", nodes=1, max_size=10, zones=[ZONE])
    pending_with_new_volume(w)

    result = w.plan()

    assert result.scale_up == ()
    assert pending_codes(result)["default/db-2"] == codes.FITS_FREE_ROOM


def test_consolidation_moves_no_pod_with_a_volume_onto_a_node_at_its_limit() -> None:
    """Two nodes, each running two movable replicas with an EBS volume each, at their limit of 2: a drain
    of either would move its pods where kube-scheduler places neither of them."""
    w = World(regions=("us-east-1",))
    nodes = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10, zones=[ZONE]))
    w.items.append(gp3())
    for i, node in enumerate(nodes):
        w.items.append(csinode(node, 2))
        for j in range(2):
            name = f"web{i}-{j}"
            w.items += [volume(f"pv-{name}", f"vol-{name}"), claim(f"c-{name}", f"pv-{name}")]
            pod = o.pod(name, cpu="1500m", memory="1Gi", node_name=node, owner=("ReplicaSet", f"web{i}"),
                        annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"})  # fmt: skip
            w.items.append(with_claims(pod, f"c-{name}"))

    result = w.plan(
        max_scale_in_fraction=1.0, consolidation="when-underutilized", consolidation_utilization_threshold=1.0
    )

    assert result.drain == ()
    assert {k.node: k.code for k in result.kept} == dict.fromkeys(nodes, codes.DOES_NOT_FIT)


def test_a_preemption_on_the_node_at_its_limit_keeps_the_other_nodes_room_open_to_volumes() -> None:
    """Two nodes of one shape: the first at its limit, running an expendable pod a pending pod of higher
    priority preempts; the second, without a limit, has 810m free. A pod with a new volume that fits
    there takes it once the preemption has widened the first node's room."""
    w, node = world(limit=2)
    w.items.append(
        o.pod("backfill-0", cpu="7", memory="1Gi", node_name=node, priority=-100, owner=("ReplicaSet", "bf"))
    )
    (other,) = w.group("db2", "m5.2xlarge", nodes=1, max_size=10, zones=[ZONE])
    w.items.append(o.pod("busy-0", cpu="7100m", memory="1Gi", node_name=other, owner=("ReplicaSet", "busy")))
    w.items.append(o.pod("train-0", cpu="4", memory="1Gi", priority=1000))
    pending_with_new_volume(w)

    result = w.plan()

    assert result.scale_up == ()
    assert pending_codes(result)["default/train-0"] == codes.FITS_BY_PREEMPTION
    assert pending_codes(result)["default/db-2"] == codes.FITS_FREE_ROOM


def test_a_csinode_whose_drivers_without_topology_say_null_keeps_its_limit() -> None:
    """The API server writes a driver's ``topologyKeys`` (no omitempty in storage/v1 CSINodeDriver) as
    null when the driver reports no topology (secrets-store, EFS, NFS drivers), beside the EBS driver's
    count; a node's CSINode before any driver registers has ``drivers: null`` (CSINodeSpec, no omitempty
    either). Refused, the CSINode was dropped (observe skips it; ``spillway plan`` refused the List),
    and with it the node's limit: the pod with a new volume stayed pending for good on the free room of
    a node at its limit."""
    w, node = world(limit=2)
    (entry,) = w.items[-1]["spec"]["drivers"]
    w.items[-1]["spec"]["drivers"] = [
        {"name": "secrets-store.csi.k8s.io", "nodeID": node, "topologyKeys": None},
        entry,
    ]
    w.items.append({**csinode("node-registering", None), "spec": {"drivers": None}})
    pending_with_new_volume(w)

    result = w.plan()

    assert scale_up(result) == {"db": (1, 2, ["default/db-2"])}


def test_a_pending_pod_whose_volume_is_attached_to_the_node_at_its_limit_takes_that_nodes_room() -> None:
    """A rolling update: db-0's replacement uses c1 (vol-1), which db-0 keeps attached to the node at
    its limit of 2. kube-scheduler takes vol-1 out of the pod's new volumes (csi.go Filter: a volume
    the node's pods use already is not counted again), so the pod runs there and a new node stays empty."""
    w, node = world(limit=2)
    w.items.append(
        with_claims(o.pod("db-0-next", cpu="100m", memory="128Mi", owner=("ReplicaSet", "db-next")), "c1")
    )

    result = w.plan()

    assert result.scale_up == ()
    assert pending_codes(result)["default/db-0-next"] == codes.FITS_FREE_ROOM
    assert {p.node for p in result.placements if p.pod == "default/db-0-next"} == {node}


def test_a_shared_volume_attached_on_two_nodes_counts_on_neither_for_a_new_pod_of_it() -> None:
    """A ReadWriteMany volume two nodes at their limit of 1 each use: a third pod of it adds no volume to
    either, though it adds one to a node that does not have it (the third node, at its limit)."""
    w = World(regions=("us-east-1",))
    nodes = sorted(w.group("web", "m5.2xlarge", nodes=3, max_size=10, zones=[ZONE]))
    shared = volume("pv-shared", "vol-shared")
    shared["spec"]["accessModes"] = ["ReadWriteMany"]
    w.items += [
        gp3(),
        shared,
        claim("shared", "pv-shared"),
        volume("pv-own", "vol-own"),
        claim("own", "pv-own"),
    ]
    for i, node in enumerate(nodes):
        w.items.append(csinode(node, 1))
        pod = o.pod(f"web-{i}", cpu="100m", memory="128Mi", node_name=node, owner=("ReplicaSet", "web"))
        w.items.append(with_claims(pod, "shared" if i < 2 else "own"))
    w.items.append(
        with_claims(o.pod("web-3", cpu="100m", memory="128Mi", owner=("ReplicaSet", "web")), "shared")
    )

    result = w.plan()

    assert result.scale_up == ()
    assert pending_codes(result)["default/web-3"] == codes.FITS_FREE_ROOM
    assert {p.node for p in result.placements if p.pod == "default/web-3"} <= set(nodes[:2])


def test_the_snapshot_keeps_the_volumes_a_pod_uses_for_the_plan_lambda() -> None:
    """The plan Lambda reads the snapshot observe stored: the volumes that decide where a pod's attach
    limit is counted survive the round trip, a claim's volume yet to be made among them (named by the
    claim, as kube-scheduler names it)."""
    w, _ = world(limit=2)
    pending_with_new_volume(w)
    snapshot, *_ = w.parsed()
    pods = {p.name: p for p in snapshot.pods}

    again = {p.name: p for p in ClusterSnapshot.from_dict(json.loads(json.dumps(snapshot.to_dict()))).pods}

    assert pods["db-0"].volumes == (f"{EBS}/vol-1",)
    assert pods["db-2"].volumes == (f"{EBS}/claim default/data-db-2-0",)
    assert again["db-0"] == pods["db-0"] and again["db-2"] == pods["db-2"]


def test_consolidation_charges_each_moved_pod_of_a_shared_volume_with_it() -> None:
    """web-a and web-b share vol-shared on the light node; only one of them fits beside the busy pod of
    the first other node (room for one more volume), and the second other node is at its limit of 2.
    kube-scheduler counts vol-shared as a new volume for whichever of them goes there: the light node
    cannot be emptied. Charging the shared volume to one of them only sent the other to the node at its
    limit, where it would never run."""
    w = World(regions=("us-east-1",))
    d1, d2, light = sorted(w.group("cpu", "m5.2xlarge", nodes=3, max_size=10, zones=[ZONE]))
    shared = volume("pv-shared", "vol-shared")
    shared["spec"]["accessModes"] = ["ReadWriteMany"]
    w.items += [gp3(), shared, claim("shared", "pv-shared")]
    evict = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
    busy = {d1: [("busy-0", "5")], d2: [("busy-1", "2500m"), ("busy-2", "2500m")]}
    for node, pods in busy.items():
        w.items.append(csinode(node, 2))
        for name, cpu in pods:
            w.items += [volume(f"pv-{name}", f"vol-{name}"), claim(f"c-{name}", f"pv-{name}")]
            pod = o.pod(name, cpu=cpu, memory="1Gi", node_name=node, owner=("StatefulSet", "busy"))
            w.items.append(with_claims(pod, f"c-{name}"))
    w.items.append(csinode(light, 2))
    for name in ("web-a", "web-b"):
        pod = o.pod(
            name, cpu="1500m", memory="1Gi", node_name=light, owner=("ReplicaSet", "web"), annotations=evict
        )
        w.items.append(with_claims(pod, "shared"))

    result = w.plan(
        max_scale_in_fraction=1.0, consolidation="when-underutilized", consolidation_utilization_threshold=0.5
    )

    assert result.drain == ()
    assert {k.node: k.code for k in result.kept}.get(light) == codes.DOES_NOT_FIT


def make_room_world(shared: dict[str, Any], web_b_moves: bool) -> World:
    """Nodes a and b at a limit of 2 volumes each. On a: web-a (3 CPU, may move) and web-b share the
    volume ``shared`` (a PersistentVolume named ``pv-shared``), keep-0 (may not move) uses its own. On b:
    2.5 CPU of other work. Pending: db-new, 6 CPU and a new volume, which fits a only if make room moves
    web-a and frees a volume slot there."""
    w = World(regions=("us-east-1",))
    a, b = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10, zones=[ZONE]))
    w.items += [gp3(), shared, claim("shared", "pv-shared")]
    w.items += [volume("pv-keep", "vol-keep"), claim("keep", "pv-keep")]
    for node in (a, b):
        w.items.append(csinode(node, 2))
    stay = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
    move = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
    for name, cpu, claim_name, evict in (
        ("web-a", "3", "shared", move),
        ("web-b", "500m", "shared", move if web_b_moves else stay),
        ("keep-0", "500m", "keep", stay),
    ):
        pod = o.pod(name, cpu=cpu, memory="1Gi", node_name=a, owner=("ReplicaSet", name), annotations=evict)
        w.items.append(with_claims(pod, claim_name))
    w.items.append(o.pod("other-0", cpu="2500m", memory="1Gi", node_name=b, owner=("ReplicaSet", "other")))
    w.items += [claim("data-db-new", None)]
    w.items.append(
        with_claims(o.pod("db-new", cpu="6", memory="1Gi", owner=("StatefulSet", "db")), "data-db-new")
    )
    return w


def test_make_room_frees_no_volume_another_pod_of_the_node_keeps_attached() -> None:
    """Node a is at its limit of 2: web-a and web-b share vol-shared, keep-0 uses vol-keep. Moving web-a
    gives a the CPU a pending pod with a new volume lacks, but not a volume: web-b, which may not move,
    keeps vol-shared attached, and kube-scheduler would refuse the pod there. It gets a new node."""
    w = make_room_world(volume("pv-shared", "vol-shared"), web_b_moves=False)

    result = w.plan(
        max_scale_in_fraction=1.0, consolidation="when-underutilized", consolidation_utilization_threshold=1.0
    )

    assert result.drain == ()
    assert scale_up(result) == {"cpu": (2, 3, ["default/db-new"])}


def test_a_preemption_frees_no_volume_another_pod_of_the_node_keeps_attached() -> None:
    """Node a is at its limit of 2: an expendable backfill pod and db-0 share vol-1, db-1 uses vol-2. A
    pod with a new volume needing the backfill pod's CPU would not get a volume by preempting it: db-0
    keeps vol-1 attached. It gets a new node."""
    w, node = world(limit=2)
    backfill = o.pod(
        "backfill-0", cpu="7", memory="1Gi", node_name=node, priority=-100, owner=("ReplicaSet", "bf")
    )
    w.items.append(with_claims(backfill, "c1"))
    first = next(i for i, item in enumerate(w.items) if item["kind"] == "Pod")
    w.items.insert(first, w.items.pop())  # before db-0: the volume was once charged to it alone
    pending_with_new_volume(w)
    w.items[-1]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "4"

    result = w.plan()

    assert scale_up(result) == {"db": (1, 2, ["default/db-2"])}


def test_a_mixed_groups_new_node_has_the_least_limit_its_types_nodes_report() -> None:
    """The group launches m5.xlarge (its template's type, whose node allows 25 EBS volumes) or
    m5.2xlarge, whose node allows 2. EC2 may launch either, so a new node is counted on for 2: a pod
    with 3 new volumes gets no node it may not run on."""
    w = World(regions=("us-east-1",))
    (small,) = w.group("db", "m5.xlarge", nodes=1, max_size=10, zones=[ZONE], mixed=True)
    w.groups["db"]["MixedInstancesPolicy"]["LaunchTemplate"]["Overrides"].append(
        {"InstanceType": "m5.2xlarge"}
    )
    big = add_typed_instance(w, "db", "m5.2xlarge", 0)
    w.items += [gp3(), csinode(small, 25), csinode(big, 2)]
    w.items.append(o.pod("busy-0", cpu="3", memory="1Gi", node_name=small, owner=("ReplicaSet", "busy")))
    w.items.append(o.pod("busy-1", cpu="7", memory="1Gi", node_name=big, owner=("ReplicaSet", "busy")))
    pending_with_new_volume(w, claims=3)
    w.items[-1]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"  # no free room for it

    _, groups, *_ = w.parsed()
    result = w.plan()

    (group,) = groups
    assert group.template is not None and group.template.allocatable[EBS_KEY] == 2000
    assert result.scale_up == ()
    assert pending_codes(result)["default/db-2"] == codes.NO_GROUP_FITS


def test_a_nominated_pod_whose_volume_is_attached_to_its_node_takes_none_of_its_attach_limit() -> None:
    """db-0's replacement uses c1 (vol-1), which db-0 keeps attached to the node, and waits there for a
    preemption (status.nominatedNodeName). kube-scheduler adds it to the node when it filters the node
    for a pod of lower priority (addGENominatedPods), and NodeVolumeLimits counts the node's pods' unique
    volumes (csi.go Filter): vol-1 once. With a limit of 3, the 2 volumes attached and db-2's new one
    make 3, so db-2 runs on the node. The plan charged the nominated pod vol-1 again, found the node at
    its limit and launched a node db-2 never needed."""
    w, node = world(limit=3)
    w.items.append(
        with_claims(
            o.pod("db-0-next", cpu="100m", memory="128Mi", owner=("ReplicaSet", "db-next"), priority=1000),
            "c1",
        )
    )
    w.pod_item("default/db-0-next")["status"]["nominatedNodeName"] = node
    pending_with_new_volume(w)

    result = w.plan()

    assert result.scale_up == ()
    assert pending_codes(result)["default/db-0-next"] == codes.NOMINATED
    assert pending_codes(result)["default/db-2"] == codes.FITS_FREE_ROOM
