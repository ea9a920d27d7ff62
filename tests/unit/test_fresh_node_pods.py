"""The pods a fresh node of a group runs before any pending pod lands there, and the room they take.

cluster-autoscaler builds a group's template from a real node of the group when it has one and copies
that node's scheduled mirror and DaemonSet pods onto it (simulator/node_info_utils.go
podsExpectedOnFreshNode: "Add scheduled mirror and DS pods", pods being deleted left out). The DaemonSet
controller pins each of its pods to its node by replacing the pod's whole required node affinity with
one ``matchFields metadata.name`` term (pkg/controller/daemon/util ReplaceDaemonSetPodNodeNameNodeAffinity),
so a DaemonSet pod no longer says which nodes its DaemonSet targets: what runs on the group's own node
does. The worlds are printed as kubectl prints them and parsed as ``spillway plan`` parses them."""

from __future__ import annotations

from typing import Any

import pytest
from plan_world import GPU_TOLERATION, NOW, World, pending_reasons, scale_up

from spillway.local import objects as o
from spillway.model.cluster import ClusterSnapshot
from spillway.model.daemonsets import DaemonSetInfo
from spillway.model.k8s import parse_kube_list
from spillway.model.snapshot import fingerprint


def static_pod(name: str, node: str, cpu: str) -> dict[str, Any]:
    """A mirror pod as the kubelet posts it for a manifest of its --pod-manifest-path."""
    pod = o.pod(name, "kube-system", cpu=cpu, memory="256Mi", node_name=node, owner=None)
    pod["metadata"]["annotations"] = {
        "kubernetes.io/config.mirror": "0123456789abcdef",
        "kubernetes.io/config.source": "file",
    }
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Node", "name": node, "uid": "node-uid", "controller": True}
    ]
    return pod


def test_a_gpu_only_daemonset_is_not_reserved_on_a_cpu_group_whose_node_does_not_run_it() -> None:
    w = World(regions=("us-east-1",))
    (cpu_node,) = w.group("cpu", "m5.xlarge", nodes=1, max_size=5)  # 3920m allocatable
    (gpu_node,) = w.group("gpu", "g5.xlarge", nodes=1, max_size=5, gpu_taint=True)
    w.items.append(o.pod("filler", cpu="3500m", memory="1Gi", node_name=cpu_node, owner=("ReplicaSet", "f")))
    dcgm = o.daemonset_pod("dcgm-exporter-abcde", gpu_node, ds="dcgm-exporter", cpu="1", memory="1Gi")
    dcgm["spec"]["tolerations"].append(GPU_TOLERATION)
    w.items.append(dcgm)
    (pod,) = w.pods("etl", 1, cpu="3", memory="4Gi")  # fits a fresh m5.xlarge: 3920m free

    result = w.plan()

    assert pod in scale_up(result).get("cpu", (0, 0, []))[2], pending_reasons(result).get(pod)


def test_a_pod_that_fits_only_without_the_static_pods_of_the_groups_node_is_not_launched_for() -> None:
    w = World(regions=("us-east-1",))
    (node,) = w.group("cpu", "m5.xlarge", nodes=1, max_size=5)  # 3920m allocatable
    w.items.append(static_pod(f"kube-proxy-{node}", node, cpu="500m"))
    w.items.append(o.pod("filler", cpu="3", memory="1Gi", node_name=node, owner=("ReplicaSet", "f")))
    (pod,) = w.pods("big", 1, cpu="3500m", memory="1Gi")  # 3920m - 500m = 3420m on a new node

    result = w.plan()

    assert "cpu" not in scale_up(result), pending_reasons(result).get(pod)
    assert "no node group can ever run" in pending_reasons(result)[pod]


def test_the_static_pods_room_is_what_is_left_a_pod_that_fits_it_gets_a_node() -> None:
    w = World(regions=("us-east-1",))
    (node,) = w.group("cpu", "m5.xlarge", nodes=1, max_size=5)
    w.items.append(static_pod(f"kube-proxy-{node}", node, cpu="500m"))
    w.items.append(o.pod("filler", cpu="3", memory="1Gi", node_name=node, owner=("ReplicaSet", "f")))
    (pod,) = w.pods("fits", 1, cpu="3400m", memory="1Gi")  # 3420m free on a new node

    assert scale_up(w.plan())["cpu"][2] == [pod]


def test_a_daemonset_pod_being_deleted_on_the_groups_node_is_not_expected_on_a_new_one() -> None:
    w = World(regions=("us-east-1",))
    (node,) = w.group("cpu", "m5.xlarge", nodes=1, max_size=5)
    leaving = o.daemonset_pod("old-agent-1", node, ds="old-agent", cpu="500m", memory="512Mi")
    leaving["metadata"]["deletionTimestamp"] = "2026-11-02T11:59:50Z"  # its DaemonSet was deleted
    w.items.append(leaving)
    w.items.append(o.pod("filler", cpu="3", memory="1Gi", node_name=node, owner=("ReplicaSet", "f")))
    (pod,) = w.pods("big", 1, cpu="3800m", memory="1Gi")  # fits only a node without the agent

    assert scale_up(w.plan())["cpu"][2] == [pod]


def test_the_groups_own_node_decides_not_another_groups_pods_of_the_same_daemonset() -> None:
    """Each group counts what its own node runs: the agent on the GPU group's node is reserved there,
    not on the CPU group, whose node runs a smaller DaemonSet."""
    w = World(regions=("us-east-1",))
    (cpu_node,) = w.group("cpu", "m5.xlarge", nodes=1, max_size=5)
    (gpu_node,) = w.group("gpu", "g5.xlarge", nodes=1, max_size=5, gpu_taint=True)
    w.items.append(o.daemonset_pod("aws-node-c", cpu_node, ds="aws-node", cpu="25m", memory="64Mi"))
    w.items.append(o.daemonset_pod("aws-node-g", gpu_node, ds="aws-node", cpu="25m", memory="64Mi"))
    plugin = o.daemonset_pod("nvidia-plugin-g", gpu_node, ds="nvidia-plugin", cpu="500m", memory="512Mi")
    w.items.append(plugin)
    for index, node in enumerate((cpu_node, gpu_node)):
        w.items.append(
            o.pod(f"filler-{index}", cpu="3", memory="1Gi", node_name=node, owner=("ReplicaSet", "f"))
        )
    (cpu_pod,) = w.pods("cpu-job", 1, cpu="3800m", memory="1Gi")  # 3920m - 25m
    (gpu_pod,) = w.gpu_pods("gpu-job", 1, 1, cpu="3800m", memory="1Gi")  # 3920m - 525m: too big

    result = w.plan()

    assert scale_up(result)["cpu"][2] == [cpu_pod]
    assert "gpu" not in scale_up(result)
    assert "no node group can ever run" in pending_reasons(result)[gpu_pod]


def test_a_group_without_a_node_reserves_the_daemonsets_whose_pods_admit_its_template() -> None:
    """Without a node of the group the DaemonSets' pods say what they can: their nodeSelector and
    tolerations, judged against the template. The pinning term is not a constraint on another node."""
    w = World(regions=("us-east-1",))
    w.group("cpu", "m5.xlarge", max_size=5)
    (other,) = w.group("other", "m5.2xlarge", nodes=1, max_size=1, desired=1)
    w.items.append(o.daemonset_pod("fluent-bit-1", other, ds="fluent-bit", cpu="500m", memory="512Mi"))
    linux_only = o.daemonset_pod("win-agent-1", other, ds="win-agent", cpu="1", memory="512Mi")
    linux_only["spec"]["nodeSelector"] = {"kubernetes.io/os": "windows"}
    w.items.append(linux_only)
    w.items.append(o.pod("filler", cpu="6", memory="1Gi", node_name=other, owner=("ReplicaSet", "f")))
    (fits,) = w.pods("fits", 1, cpu="3400m", memory="1Gi")  # 3920m - 500m (fluent-bit only)
    (too_big,) = w.pods("big", 1, cpu="3500m", memory="1Gi")

    result = w.plan()

    assert scale_up(result)["cpu"][2] == [fits]  # not too_big
    assert "other at MaxSize" in pending_reasons(result)[too_big]


# --- a group without a node: the DaemonSet objects decide ------------------------------------------------

GPU_PRESENT = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}
                    ]
                }
            ]
        }
    }
}


def gpu_world() -> tuple[World, str]:
    """A GPU group with a node that runs the DCGM exporter, and two groups without nodes: CPU and GPU
    (tagged as GPU nodes are labelled)."""
    w = World(regions=("us-east-1",))
    gpu_labels = {"nvidia.com/gpu.present": "true"}
    (node,) = w.group("gpu-a", "g5.xlarge", nodes=1, max_size=1, gpu_taint=True, labels=gpu_labels)
    w.group("gpu-b", "g5.xlarge", max_size=5, gpu_taint=True, labels=gpu_labels)
    w.group("cpu", "m5.xlarge", max_size=5)
    dcgm = o.daemonset_pod("dcgm-exporter-abcde", node, ds="dcgm-exporter", cpu="1", memory="1Gi")
    dcgm["spec"]["tolerations"].append(GPU_TOLERATION)
    w.items.append(dcgm)
    w.items.append(o.pod("filler", cpu="2", memory="1Gi", node_name=node, owner=("ReplicaSet", "f")))
    return w, node


def test_without_a_node_a_daemonset_whose_template_targets_gpu_nodes_is_reserved_on_gpu_groups_only() -> None:
    w, _ = gpu_world()
    w.items.append(
        o.daemonset(
            "dcgm-exporter", cpu="1", memory="1Gi", affinity=GPU_PRESENT, tolerations=[GPU_TOLERATION]
        )
    )
    (cpu_pod,) = w.pods("etl", 1, cpu="3500m", memory="1Gi")  # fits a fresh m5.xlarge (3920m)
    (gpu_pod,) = w.gpu_pods("train", 1, 1, cpu="3500m", memory="1Gi")  # not with 1 CPU taken: 2920m

    result = w.plan()

    assert scale_up(result)["cpu"][2] == [cpu_pod]
    assert "gpu-b" not in scale_up(result)
    assert "no node group can ever run" in pending_reasons(result)[gpu_pod]


def test_without_a_node_a_daemonset_not_tolerating_the_groups_taint_is_not_reserved_there() -> None:
    w, _ = gpu_world()
    w.items.append(o.daemonset("log-agent", cpu="1", memory="1Gi"))  # the controller's tolerations only
    (gpu_pod,) = w.gpu_pods("train", 1, 1, cpu="3500m", memory="1Gi")
    (cpu_pod,) = w.pods("etl", 1, cpu="3500m", memory="1Gi")

    result = w.plan()

    assert scale_up(result)["gpu-b"][2] == [gpu_pod]
    assert "no node group can ever run" in pending_reasons(result)[cpu_pod]  # 2920m on the CPU group


def test_a_daemonset_pinned_to_one_node_by_name_is_not_reserved_on_a_new_one() -> None:
    w, node = gpu_world()
    one = o.daemonset("debug", cpu="1", memory="1Gi", tolerations=[{"operator": "Exists"}])
    one["spec"]["template"]["spec"]["nodeName"] = node
    w.items.append(one)
    (cpu_pod,) = w.pods("etl", 1, cpu="3500m", memory="1Gi")

    assert scale_up(w.plan())["cpu"][2] == [cpu_pod]


def test_a_system_node_critical_daemonset_not_yet_on_the_groups_node_is_reserved_an_ordinary_one_is_not() -> (
    None
):
    """cluster-autoscaler adds to a template read from a real node the DaemonSets that have no pod there
    only when their pods are system-node-critical and preempt: such a pod makes room for itself."""
    w = World(regions=("us-east-1",))
    (node,) = w.group("cpu", "m5.xlarge", nodes=1, max_size=5)
    w.items.append(o.pod("filler", cpu="3", memory="1Gi", node_name=node, owner=("ReplicaSet", "f")))
    w.items.append(o.daemonset("new-agent", cpu="300m", memory="64Mi"))  # rolling out: no pod yet
    (pod,) = w.pods("big", 1, cpu="3800m", memory="1Gi")
    ordinary = scale_up(w.plan()).get("cpu", (0, 0, []))[2]
    w.items.append(
        o.daemonset("node-problem-agent", cpu="300m", memory="64Mi", priority_class="system-node-critical")
    )

    result = w.plan()

    assert ordinary == [pod]
    assert "cpu" not in scale_up(result)
    assert "no node group can ever run" in pending_reasons(result)[pod]


def with_host_port(item: dict[str, Any], port: int, protocol: str = "TCP") -> dict[str, Any]:
    spec = item["spec"]["template"]["spec"] if item["kind"] == "DaemonSet" else item["spec"]
    spec["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port, "protocol": protocol}]
    return item


def test_a_pod_asking_a_host_port_the_groups_daemonset_pod_holds_gets_no_new_node() -> None:
    """kube-scheduler's NodePorts checks a pod's host ports against every pod of the node, its DaemonSet
    pods too, and cluster-autoscaler's template node carries them: a node launched for a pod asking
    9100/TCP next to a node-exporter that holds it would stay empty. 9100/UDP is free there."""
    w = World(regions=("us-east-1",))
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=5)
    w.items.append(with_host_port(o.daemonset_pod("node-exporter-abcde", node, ds="node-exporter"), 9100))
    w.items.append(o.pod("filler", cpu="7", memory="1Gi", node_name=node, owner=("ReplicaSet", "f")))
    (tcp,) = w.pods("tcp", 1, cpu="1", memory="1Gi")
    with_host_port(w.pod_item(tcp), 9100)

    result = w.plan()

    assert "cpu" not in scale_up(result)
    assert "host port 9100/TCP is taken on its nodes" in pending_reasons(result)[tcp]

    with_host_port(w.pod_item(tcp), 9100, "UDP")
    assert scale_up(w.plan())["cpu"][2] == [tcp]


def test_without_a_node_a_daemonset_holding_a_host_port_keeps_a_pod_asking_it_off_new_nodes() -> None:
    w, _ = gpu_world()
    agent = with_host_port(o.daemonset("agent", cpu="10m", memory="16Mi", affinity=GPU_PRESENT), 8080)
    agent["spec"]["template"]["spec"]["tolerations"] = [GPU_TOLERATION]
    w.items.append(agent)
    (pod,) = w.gpu_pods("serve", 1, 1, cpu="1", memory="1Gi")
    with_host_port(w.pod_item(pod), 8080)

    held = scale_up(w.plan())
    with_host_port(w.pod_item(pod), 8081)

    assert "gpu-b" not in held
    assert scale_up(w.plan())["gpu-b"][2] == [pod]
    assert daemonset_info(agent).host_ports == ((8080, "TCP", ""),)
    stored = ClusterSnapshot.build("ml", NOW, (), (), others=parse_kube_list(o.kube_list([agent])).others)
    assert ClusterSnapshot.from_dict(stored.to_dict()) == stored


def test_a_host_network_daemonsets_container_port_is_its_host_port_on_a_new_node() -> None:
    """The API server gives a host-network pod's ports their containerPort as hostPort
    (defaultHostNetworkPorts); a DaemonSet's template may not say so, its pods do."""
    w, _ = gpu_world()
    agent = o.daemonset("agent", cpu="10m", memory="16Mi", affinity=GPU_PRESENT, host_network=True)
    agent["spec"]["template"]["spec"]["tolerations"] = [GPU_TOLERATION]
    agent["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 8080}]
    w.items.append(agent)
    (pod,) = w.gpu_pods("serve", 1, 1, cpu="1", memory="1Gi")
    with_host_port(w.pod_item(pod), 8080)

    assert daemonset_info(agent).host_ports == ((8080, "TCP", ""),)
    assert "gpu-b" not in scale_up(w.plan())


# --- the DaemonSets as the snapshot keeps them ---------------------------------------------------------------


def daemonset_info(raw: dict[str, Any]) -> DaemonSetInfo:
    (info,) = ClusterSnapshot.build(
        "ml", NOW, (), (), others=parse_kube_list(o.kube_list([raw])).others
    ).daemonsets
    return info


def test_a_daemonsets_pod_gets_the_tolerations_its_controller_adds() -> None:
    plain = daemonset_info(o.daemonset("agent", tolerations=[GPU_TOLERATION]))
    host = daemonset_info(o.daemonset("cni", host_network=True))

    keys = {t[0] for t in plain.tolerations}
    assert {"nvidia.com/gpu", "node.kubernetes.io/not-ready", "node.kubernetes.io/unschedulable"} <= keys
    assert "node.kubernetes.io/network-unavailable" not in keys
    assert ("node.kubernetes.io/network-unavailable", "Exists", None, "NoSchedule") in host.tolerations


def test_a_daemonset_is_critical_only_when_its_pods_are_system_node_critical_and_preempt() -> None:
    critical = o.daemonset("a", priority_class="system-node-critical")
    never = o.daemonset("b", priority_class="system-node-critical")
    never["spec"]["template"]["spec"]["preemptionPolicy"] = "Never"

    assert daemonset_info(critical).critical
    assert not daemonset_info(never).critical
    assert not daemonset_info(o.daemonset("c", priority_class="system-cluster-critical")).critical


def test_daemonsets_survive_the_stored_snapshot_and_change_its_fingerprint() -> None:
    raw = o.daemonset("dcgm", cpu="1", affinity=GPU_PRESENT, tolerations=[GPU_TOLERATION])
    objects = parse_kube_list(o.kube_list([raw])).others
    snapshot = ClusterSnapshot.build("ml", NOW, (), (), others=objects)
    bigger = ClusterSnapshot.build(
        "ml", NOW, (), (), others=parse_kube_list(o.kube_list([o.daemonset("dcgm", cpu="2")])).others
    )

    assert ClusterSnapshot.from_dict(snapshot.to_dict()) == snapshot
    assert snapshot.daemonsets[0].requests["cpu"] == 1000
    assert fingerprint(snapshot, ()) != fingerprint(bigger, ())
    assert "daemonsets" not in ClusterSnapshot.build("ml", NOW, (), ()).to_dict()  # older readers


def test_a_daemonset_with_a_bad_request_is_refused_naming_the_item_and_field() -> None:
    doc = o.kube_list([o.node("n1", instance="i-0aaa"), o.daemonset("agent", cpu="lots")])

    with pytest.raises(
        ValueError, match=r"items\[1\]\.spec\.template\.spec\.containers\.0\.resources\.requests\.cpu"
    ):
        parse_kube_list(doc)
