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

from plan_world import GPU_TOLERATION, World, pending_reasons, scale_up

from spillway.local import objects as o


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
