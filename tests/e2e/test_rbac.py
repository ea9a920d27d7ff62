"""deploy/rbac.yaml grants each function exactly the Kubernetes requests its code sends.

The real handlers run on the e2e rig (moto executing the real state machines, the API emulator as the
cluster, every optional CRD installed, one CapacityQuota): observe once (its lists include the
shared-cluster objects, and it writes the quota's status.used), plan a snapshot that reuses a node
Spillway cordoned (the scale-up execution uncordons it) and has a pod no group can run (the plan posts
it a NotTriggerScaleUp Event), drain a node with a pod on it (the drain-node execution). Every request
the emulator answers carries, as its bearer token, the name of the function whose invocation sent it;
each is turned into the (API group, resource, verb) RBAC checks, and the set per function must equal what the
function's ClusterRole grants: nothing missing (the function would be refused) and nothing unused.
"""

from __future__ import annotations

import re
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CLUSTER, GPU_TOLERATION, HOME, Cloud, running

from spillway.adapters.kube import KubeClient
from spillway.local import cloud as cloud_module
from spillway.local import objects
from spillway.local.kubeapi import RequestRecord
from spillway.local.rig import create_group
from spillway.local.stack import LocalStack
from spillway.model.k8s import CORDONED_BY_SPILLWAY, DRAINING_TAINT

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = ("observe", "plan", "scale", "drain")
Permission = tuple[str, str, str]  # (API group, resource[/subresource], verb)


class Attribution:
    """Which function is running: per thread, else the only one running (its worker threads)."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._active: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def run(self, function: str, call: Callable[[], Any]) -> Any:
        previous = getattr(self._local, "function", None)
        self._local.function = function
        with self._lock:
            self._active[function] += 1
        try:
            return call()
        finally:
            self._local.function = previous
            with self._lock:
                self._active[function] -= 1

    def token(self) -> str:
        mine = getattr(self._local, "function", None)
        if mine:
            return str(mine)
        with self._lock:
            running = [f for f, n in self._active.items() if n > 0]
        return running[0] if len(running) == 1 else "unattributed"


@pytest.fixture
def cloud() -> Iterator[Cloud]:
    with running(SCALE_DOWN_DELAY_AFTER_LAUNCH_MINUTES="0") as rig:
        yield rig


@pytest.fixture
def attribution(cloud: Cloud, monkeypatch: pytest.MonkeyPatch) -> Iterator[Attribution]:
    who = Attribution()
    call = LocalStack._call

    def attributed_call(self: LocalStack, name: str, event: Any) -> Any:
        # "spillway-ml-drain" from a state machine task, "ObserveFunction" when invoked by logical id
        function = name.removeprefix(f"{self.prefix}-").removesuffix("Function").lower()
        return who.run(function, lambda: call(self, name, event))

    for_url = KubeClient.for_url.__func__  # type: ignore[attr-defined]

    def tokened(cls: type[KubeClient], url: str, token: Any = "local", **options: Any) -> KubeClient:
        return for_url(cls, url, token=who.token, **options)  # type: ignore[no-any-return]

    monkeypatch.setattr(LocalStack, "_call", attributed_call)
    monkeypatch.setattr(KubeClient, "for_url", classmethod(tokened))
    # A new configuration: the next invocation builds new clients, with the tokened KubeClient.
    monkeypatch.setenv("OBSERVE_WINDOW_SECONDS", "0")
    yield who


def permission(record: RequestRecord) -> Permission:
    """The RBAC attributes of one request (the Kubernetes API's own mapping of path and method)."""
    parts = record.path.strip("/").split("/")
    if parts[0] == "api":
        group, rest = "", parts[2:]
    elif parts[0] == "apis":
        group, rest = parts[1], parts[3:]
    else:
        raise AssertionError(f"not a resource request: {record.method} {record.path}")
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        rest = rest[2:]
    resource, name, sub = rest[0], rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None
    if sub:
        resource = f"{resource}/{sub}"
    method = record.method
    if method == "GET":
        verb = "watch" if record.query.get("watch") in ("true", "1") else ("get" if name else "list")
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}[method]
    return group, resource, verb


def granted(rbac: list[Mapping[str, Any]]) -> dict[str, set[Permission]]:
    """ClusterRole name -> every (group, resource, verb) its rules allow."""
    out: dict[str, set[Permission]] = {}
    for doc in rbac:
        if doc["kind"] == "ClusterRole":
            out[doc["metadata"]["name"]] = {
                (g, r, v)
                for rule in doc["rules"]
                for g in rule["apiGroups"]
                for r in rule["resources"]
                for v in rule["verbs"]
            }
    return out


def test_parsing_requests_into_rbac_attributes() -> None:
    def rec(method: str, path: str, **query: str) -> RequestRecord:
        return RequestRecord(method=method, path=path, query=query, status=200)

    assert permission(rec("GET", "/api/v1/nodes")) == ("", "nodes", "list")
    assert permission(rec("GET", "/api/v1/nodes", watch="true")) == ("", "nodes", "watch")
    assert permission(rec("PATCH", "/api/v1/nodes/n1")) == ("", "nodes", "patch")
    assert permission(rec("POST", "/api/v1/namespaces/a/pods/p/eviction")) == ("", "pods/eviction", "create")
    assert permission(rec("GET", "/apis/policy/v1/poddisruptionbudgets")) == (
        "policy",
        "poddisruptionbudgets",
        "list",
    )
    assert permission(rec("GET", "/api/v1/namespaces/a/pods")) == ("", "pods", "list")
    assert permission(rec("DELETE", "/api/v1/namespaces/a/pods")) == ("", "pods", "deletecollection")
    assert permission(rec("PATCH", "/apis/autoscaling.x-k8s.io/v1beta1/capacityquotas/q/status")) == (
        "autoscaling.x-k8s.io",
        "capacityquotas/status",
        "patch",
    )
    assert permission(rec("GET", "/apis/scheduling.volcano.sh/v1beta1/namespaces/a/podgroups")) == (
        "scheduling.volcano.sh",
        "podgroups",
        "list",
    )
    assert permission(rec("GET", "/apis/batch/v1/jobs")) == ("batch", "jobs", "list")
    assert permission(rec("GET", "/apis/kubeflow.org/v1/pytorchjobs")) == (
        "kubeflow.org",
        "pytorchjobs",
        "list",
    )


def spillway_cordoned(cloud: Cloud, name: str) -> None:
    """The node as a drain leaves it before termination: cordoned by Spillway, draining taint on."""
    node = cloud.kube.get("Node", name)
    assert node is not None
    node["spec"]["unschedulable"] = True
    node["spec"]["taints"] = [
        *node["spec"].get("taints", []),
        {"key": DRAINING_TAINT, "effect": "NoSchedule"},
    ]
    node["metadata"].setdefault("annotations", {})[CORDONED_BY_SPILLWAY] = "2026-01-01T00:00:00Z idle"
    cloud.kube.update("Node", node)


def test_each_function_role_grants_exactly_the_requests_that_function_sends(
    cloud: Cloud, attribution: Attribution, monkeypatch: pytest.MonkeyPatch
) -> None:
    cloud.group("general", instance_type="m5.large", desired=2, gpu=False)
    cloud.group("gpu-east", region=HOME, desired=1)
    cloud.wait_nodes(3)
    gpu_node = next(n["metadata"]["name"] for n in cloud.kube.list("Node") if "gpu" in str(n["status"]))
    spillway_cordoned(cloud, gpu_node)
    cloud.kube.add(objects.pod("train-0", "ml", cpu="1", memory="2Gi", gpus=1, tolerations=[GPU_TOLERATION]))
    cloud.kube.add(objects.pod("huge-0", "ml", cpu="500", memory="2Gi"))  # no group fits: an Event
    # observe lists the shared-cluster objects and writes this quota's status.used
    cloud.kube.add({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityQuota",
                    "metadata": {"name": "gpu-cap"}, "spec": {"limits": {"resources": {"nodes": "10"}}}})  # fmt: skip
    # a ProvisioningRequest: observe lists it and its PodTemplate, the plan writes its conditions
    template = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]}
    cloud.kube.add({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t", "namespace": "ml"},
                    "template": {"spec": template}})  # fmt: skip
    cloud.kube.add({"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
                    "metadata": {"name": "check", "namespace": "ml"},
                    "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                             "podSets": [{"podTemplateRef": {"name": "t"}, "count": 1}]}})  # fmt: skip
    # ... and deletes one that failed over a week ago, as cluster-autoscaler does
    cloud.kube.add({"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
                    "metadata": {"name": "ended", "namespace": "ml"},
                    "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                             "podSets": [{"podTemplateRef": {"name": "t"}, "count": 1}]},
                    "status": {"conditions": [{"type": "Failed", "status": "True", "reason": "Expired",
                                               "message": "", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}})  # fmt: skip
    # CapacityBuffers of that PodTemplate and of each kind of workload: observe lists them, and the
    # workloads they name, and writes their status
    cloud.kube.add({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
                    "metadata": {"name": "headroom", "namespace": "ml"},
                    "spec": {"podTemplateRef": {"name": "t"}, "replicas": 1}})  # fmt: skip
    cloud.kube.add({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "ml"},
                    "spec": {"replicas": 10, "template": {"spec": template}}})  # fmt: skip
    cloud.kube.add({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "web", "namespace": "ml"},
                    "spec": {"parallelism": 10, "template": {"spec": {**template, "restartPolicy": "Never"}}}})  # fmt: skip
    cloud.kube.add({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "web", "namespace": "ml"},
                    "spec": {"replicas": 10, "template": {"spec": template}}})  # fmt: skip
    for group, kind in (("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "ReplicaSet"), ("batch", "Job"),
                        ("", "ReplicationController")):  # fmt: skip
        cloud.kube.add({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
                        "metadata": {"name": f"of-{kind.lower()}", "namespace": "ml"},
                        "spec": {"scalableRef": {"apiGroup": group, "kind": kind, "name": "web"},
                                 "percentage": 10}})  # fmt: skip
    cloud.kube.clear_requests()

    # observe (one observation), then plan it: the plan uncordons the GPU node (scale function), tells
    # huge-0 why it stays pending and marks idle general nodes scale-down candidates (plan
    # function; launch delay 0: the rig's nodes are seconds old).
    observed = cloud.stack.invoke("ObserveFunction", {})
    [key] = observed["written"]
    result = cloud.plan(cloud.stream_event(key))
    assert result["results"][0]["status"] == "acted", result
    assert result["results"][0]["events"]["posted"] == 1, result
    assert result["results"][0]["provisioning"]["written"] == 1, result
    assert result["results"][0]["provisioning_deleted"]["written"] == 1, result
    assert cloud.kube.get("ProvisioningRequest", "ended", "ml") is None
    marked = result["results"][0]["soft_taints"]
    assert marked["written"] >= 1 and marked["failed"] == 0, result  # idle general nodes (others hold room)
    [up] = cloud.wait_all()
    assert up["status"] == "SUCCEEDED", up
    assert not cloud.kube.get("Node", gpu_node)["spec"].get("unschedulable")  # type: ignore[index]
    buffer = cloud.kube.get("CapacityBuffer.autoscaling.x-k8s.io", "headroom", "ml")
    assert buffer is not None and buffer["status"]["replicas"] == 1, buffer
    of_deployment = cloud.kube.get("CapacityBuffer", "of-deployment", "ml")
    assert of_deployment is not None and of_deployment["status"]["replicas"] == 1, of_deployment  # 10 % of 10
    for kind in ("job", "replicationcontroller"):  # 10 % of a Job's parallelism, of an RC's replicas
        of_kind = cloud.kube.get("CapacityBuffer", f"of-{kind}", "ml")
        assert of_kind is not None and of_kind["status"]["replicas"] == 1, of_kind

    # a fleet gang whose kubelets never turn Ready, given back at its deadline: the give-back (scale
    # function) lists the pods on its members' Nodes first, and leaves running one that runs work
    original_node = cloud_module._node

    def never_ready(name: str, instance_id: str, zone: str, region: str, template: Any) -> Any:
        node = original_node(name, instance_id, zone, region, template)
        node["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]
        return node

    monkeypatch.setattr(cloud_module, "_node", never_ready)
    create_group("gang", region=HOME, instance_type="g5.xlarge", max_size=4, cluster=cloud.cluster, gpu=True,
                 tags={"spillway.io/atomic-launch": "fleet"})  # fmt: skip
    gang = cloud.stack.run(
        "GangLaunchStateMachine",
        {"group": "gang", "region": HOME, "count": 2, "gang": "ml/train", "mode": "fleet", "deadline_seconds": 6,
         "poll_seconds": 1, "plan_id": "p-1"},
        timeout=90,
    )  # fmt: skip
    assert gang["status"] == "FAILED" and gang["error"] == "GangIncomplete", gang
    monkeypatch.setattr(cloud_module, "_node", original_node)

    # drain a general node that runs a pod.
    victim = sorted(
        n["metadata"]["name"]
        for n in cloud.kube.list("Node")
        if n["metadata"]["labels"].get("node.kubernetes.io/instance-type") == "m5.large"
    )[0]
    cloud.kube.add(
        objects.pod(
            "web-0", "team-a", node_name=victim, owner=("ReplicaSet", "web-5d9c"), cpu="100m", memory="64Mi"
        )
    )
    # The kubelets' stand-in forgets a terminated instance's Node at once (as the cloud controller does,
    # a few seconds after); stopped here so the drain's own DeleteNode is what removes it, and is recorded.
    cloud.registrar.stop()
    drained = cloud.stack.run(
        "DrainNodeStateMachine",
        {"cluster": CLUSTER, "node": victim, "reason": "rbac", "poll_seconds": 1, "deadline_seconds": 20},
        timeout=40,
    )
    assert drained["status"] == "SUCCEEDED" and drained["output"]["outcome"] == "terminated", drained

    sent: dict[str, set[Permission]] = defaultdict(set)
    for record in cloud.kube.requests:
        if record.token in FUNCTIONS:
            sent[record.token].add(permission(record))
    assert {r.token for r in cloud.kube.requests} <= set(FUNCTIONS), "a request no function sent"

    roles = granted(list(yaml.safe_load_all((ROOT / "deploy" / "rbac.yaml").read_text())))
    for function in FUNCTIONS:
        grants = roles[f"spillway-{function}"]
        assert sent[function] - grants == set(), f"{function} sends requests its role refuses"
        assert grants - sent[function] == set(), f"{function}'s role grants what it never sends"


def test_each_role_is_bound_to_its_own_group_only() -> None:
    docs = list(yaml.safe_load_all((ROOT / "deploy" / "rbac.yaml").read_text()))
    bindings = {d["roleRef"]["name"]: d["subjects"] for d in docs if d["kind"] == "ClusterRoleBinding"}
    assert set(bindings) == set(granted(docs)) == {f"spillway-{f}" for f in FUNCTIONS}
    for role, subjects in bindings.items():
        group = re.sub(r"^spillway-", "spillway:", role)
        assert subjects == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]
