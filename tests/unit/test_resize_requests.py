"""A bound pod during an in-place resize is counted as kube-scheduler counts it.

Kubernetes docs, "Resize CPU and Memory Resources assigned to Containers" (stable since 1.35): while a
resize is pending or incomplete the scheduler takes, per container, the largest of the desired requests
(spec), the allocated ones (``status.containerStatuses[].allocatedResources``) and the actual ones
(``status.containerStatuses[].resources.requests``). component-helpers' ``determineContainerReqs``
(released 1.35 and 1.36) drops the spec when ``PodResizePending`` says ``Infeasible``, and reads a
status only for app containers and sidecars, and only when it carries ``resources``.
"""

from __future__ import annotations

from typing import Any

from spillway.local import objects as o
from spillway.model.cluster import PodInfo
from spillway.model.k8s import Pod

NODE = "ip-10-0-1-10.ec2.internal"
IN_PROGRESS = {"type": "PodResizeInProgress", "status": "True"}
INFEASIBLE = {"type": "PodResizePending", "status": "True", "reason": "Infeasible", "message": "Node didn't have enough capacity"}  # fmt: skip
DEFERRED = {"type": "PodResizePending", "status": "True", "reason": "Deferred", "message": "Node didn't have enough resource"}  # fmt: skip


def status_of(name: str, cpu: str, memory: str = "1Gi", *, actual_cpu: str | None = None) -> dict[str, Any]:
    """A container status as the kubelet writes it: allocated and actual requests (the same unless
    ``actual_cpu`` says the runtime has not caught up yet)."""
    return {
        "name": name,
        "image": "public.ecr.aws/docker/library/busybox:1.36",
        "imageID": "",
        "ready": True,
        "restartCount": 0,
        "started": True,
        "state": {"running": {"startedAt": "2026-11-02T11:00:00Z"}},
        "allocatedResources": {"cpu": cpu, "memory": memory},
        "resources": {"requests": {"cpu": actual_cpu or cpu, "memory": memory}},
    }


def resizing(
    spec_cpu: str, status_cpu: str, condition: dict[str, Any] | None, *, actual_cpu: str | None = None
) -> dict[str, Any]:
    """A running pod whose one container asks ``spec_cpu`` and holds ``status_cpu``."""
    raw = o.pod("api-0", "team-a", cpu=spec_cpu, memory="1Gi", node_name=NODE, owner=("ReplicaSet", "api-1"))
    raw["status"]["conditions"] = [*raw["status"].get("conditions", []), *([condition] if condition else [])]
    raw["status"]["containerStatuses"] = [status_of("main", status_cpu, actual_cpu=actual_cpu)]
    return raw


def requests(raw: dict[str, Any]) -> dict[str, int]:
    return PodInfo.from_pod(Pod.model_validate(raw)).requests


def test_a_shrinking_pod_still_holds_what_the_kubelet_allocated() -> None:
    # max(desired 1, allocated 4, actual 4): the node is 3 CPUs fuller than the spec says
    assert requests(resizing("1", "4", IN_PROGRESS))["cpu"] == 4000


def test_a_shrink_the_kubelet_allocated_but_the_runtime_has_not_applied_counts_the_actual() -> None:
    assert requests(resizing("1", "1", IN_PROGRESS, actual_cpu="4"))["cpu"] == 4000


def test_an_infeasible_grow_holds_only_what_is_allocated() -> None:
    # the kubelet will never grant the 8 CPUs: max(allocated 2, actual 2)
    assert requests(resizing("8", "2", INFEASIBLE))["cpu"] == 2000


def test_a_deferred_grow_counts_the_desired_requests() -> None:
    # deferred may be granted when room frees up, so the scheduler keeps room for it
    assert requests(resizing("8", "2", DEFERRED))["cpu"] == 8000


def test_a_pod_with_no_container_statuses_counts_its_spec() -> None:
    raw = o.pod("api-0", "team-a", cpu="3", memory="1Gi", node_name=NODE)
    assert "containerStatuses" not in raw["status"]
    assert requests(raw) == {"cpu": 3000, "memory": 2**30 * 1000}


def test_a_status_without_resources_is_not_read() -> None:
    """The kubelet before it reports ``resources``: determineContainerReqs needs it to read the status."""
    raw = resizing("1", "4", IN_PROGRESS)
    del raw["status"]["containerStatuses"][0]["resources"]
    assert requests(raw)["cpu"] == 1000


def test_a_pending_pod_counts_its_spec_whatever_its_status_says() -> None:
    raw = o.pod("api-0", "team-a", cpu="1", memory="1Gi")  # not bound: no kubelet has allocated anything
    raw["status"]["containerStatuses"] = [status_of("main", "4")]
    assert requests(raw)["cpu"] == 1000


def test_a_sidecar_being_shrunk_holds_its_allocation_beside_the_app_and_under_the_init_containers() -> None:
    raw = o.pod("train-0", "team-a", cpu="1", memory="1Gi", node_name=NODE)
    raw["spec"]["initContainers"] = [
        {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
        {"name": "setup", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
    ]  # fmt: skip
    raw["spec"]["overhead"] = {"cpu": "250m"}
    raw["status"]["conditions"].append(IN_PROGRESS)
    raw["status"]["containerStatuses"] = [status_of("main", "1")]
    raw["status"]["initContainerStatuses"] = [status_of("proxy", "2"), status_of("setup", "2")]

    # sidecar max(0.5, 2) = 2: app + sidecar 1 + 2 = 3; "setup" runs beside it, 2 + 2 = 4; + overhead
    assert requests(raw)["cpu"] == 4000 + 250


def test_each_container_counts_the_larger_of_its_own_requests() -> None:
    """Two containers trading CPU, "main" asking 1 and holding 2, "side" asking 2 and holding 1: the
    released scheduler (1.35, 1.36) adds each container's larger, 2 + 2. (kubernetes#140046 changes
    this after 1.36 to the larger of the sums, 3.)"""
    raw = resizing("1", "2", IN_PROGRESS)
    raw["spec"]["containers"].append(
        {"name": "side", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}
    )
    raw["status"]["containerStatuses"].append(status_of("side", "1"))
    assert requests(raw)["cpu"] == 4000


def test_a_malformed_allocated_quantity_is_refused_by_its_field() -> None:
    raw = resizing("1", "4", IN_PROGRESS)
    raw["status"]["containerStatuses"][0]["allocatedResources"]["cpu"] = "four"
    pod = Pod.model_validate(raw)
    assert [r.split(":")[0] for r in pod.refused] == ["status.containerStatuses.0.allocatedResources.cpu"]
    assert PodInfo.from_pod(pod).requests["cpu"] == 4000  # from the actual requests still reported


def test_a_node_holding_a_shrinking_pod_is_fuller_than_its_spec_says() -> None:
    """A pod shrinking from 3 CPUs to 1 still holds 3 of the node's 3.92: the scheduler will not put a
    2-CPU pod there, so the plan scales up for it instead of counting on room that is not free."""
    from plan_world import World, scale_up

    w = World()
    (node,) = w.group("cpu", "m5.xlarge", nodes=1, max_size=10)
    (key,) = w.pods("api", 1, cpu="1", memory="1Gi", node_name=node, owner=("ReplicaSet", "api-1"))
    item = w.pod_item(key)
    item["status"]["conditions"].append(IN_PROGRESS)
    item["status"]["containerStatuses"] = [status_of("main", "3")]
    w.pods("web", 1, cpu="2", memory="1Gi")

    assert scale_up(w.plan()) == {"cpu": (1, 2, ["default/web-0"])}
