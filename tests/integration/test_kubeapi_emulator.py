"""The local Kubernetes API emulator, driven only through the official ``kubernetes`` client."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes.client import (
    ApiClient,
    ApisApi,
    AppsV1Api,
    CoreV1Api,
    CustomObjectsApi,
    EventsV1Api,
    PolicyV1Api,
    StorageV1Api,
    V1DeleteOptions,
    V1Eviction,
    V1ObjectMeta,
    V1Preconditions,
)
from kubernetes.client.exceptions import ApiException

from spillway.local.kubeapi import KubeApiError, KubeApiServer, resources
from spillway.model.k8s import CORDONED_BY_SPILLWAY, DRAINING_TAINT

SMP = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


# --- helpers --------------------------------------------------------------------------------------


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer() as server:
        yield server


@pytest.fixture
def client(api: KubeApiServer) -> Iterator[ApiClient]:
    with api.api_client() as c:
        yield c


@pytest.fixture
def core(client: ApiClient) -> CoreV1Api:
    return CoreV1Api(client)


@pytest.fixture
def policy(client: ApiClient) -> PolicyV1Api:
    return PolicyV1Api(client)


def pod(
    name: str,
    *,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    node: str | None = None,
    phase: str = "Pending",
    ready: bool | None = None,
    owner: dict[str, Any] | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def workload(
    api: KubeApiServer, kind: str, name: str, replicas: int | None, labels: dict[str, str], **meta: Any
) -> dict[str, Any]:
    """A ReplicaSet, Deployment, StatefulSet or ReplicationController of ``replicas`` (None: left out)
    selecting ``labels``, and the controller reference its pods carry."""
    api_version = "v1" if kind == "ReplicationController" else "apps/v1"
    selector: dict[str, Any] = dict(labels) if kind == "ReplicationController" else {"matchLabels": labels}
    spec: dict[str, Any] = {
        "selector": selector,
        "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]},
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    stored = api.add(
        {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, **meta}, "spec": spec}
    )
    return controller_ref(stored)


def controller_ref(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}  # fmt: skip


def terminating(api: KubeApiServer, name: str, namespace: str = "default") -> bool:
    """The pod is still listed, being deleted (``deletionTimestamp`` set)."""
    found = api.get("Pod", name, namespace)
    return found is not None and bool(found["metadata"].get("deletionTimestamp"))


def kubelet_confirms(api: KubeApiServer) -> None:
    """The emulated kubelet stops every terminating pod's containers now: they are gone at the next read."""
    api.kubelet_exit_delay = 0


def node(
    name: str, *, taints: list[dict[str, str]] | None = None, annotations: dict[str, str] | None = None
) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"providerID": f"aws:///us-east-1a/i-{name}", "taints": taints or []},
    }


def pdb(name: str, selector: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": selector}, **spec},
    }


def error_body(exc: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.body or "{}")
    return body


def evict(core: CoreV1Api, name: str, namespace: str = "default") -> None:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
    core.create_namespaced_pod_eviction(name, namespace, body)


# --- lists --------------------------------------------------------------------------------------------


def test_paging_returns_every_pod_exactly_once_from_one_snapshot(api: KubeApiServer, core: CoreV1Api) -> None:
    for ns in ("default", "batch", "ml"):
        for i in range(1000):
            api.add(pod(f"p-{i:04d}", namespace=ns))
    seen: list[str] = []
    versions, remaining = set(), []
    token = None
    pages = 0
    while True:
        page = core.list_pod_for_all_namespaces(limit=500, _continue=token)
        pages += 1
        assert len(page.items) <= 500
        seen += [f"{p.metadata.namespace}/{p.metadata.name}" for p in page.items]
        versions.add(page.metadata.resource_version)
        remaining.append(page.metadata.remaining_item_count)
        token = page.metadata.var_continue
        if pages == 1:  # a pod created mid-list is not part of the snapshot being paged
            api.add(pod("zzz-late", namespace="ml"))
            api.delete("Pod", "p-0999", "ml")
        if not token:
            break
    assert pages == 6
    assert len(seen) == len(set(seen)) == 3000
    assert "ml/zzz-late" not in seen and "ml/p-0999" in seen
    assert seen == sorted(seen)  # namespace then name, as etcd keys sort
    assert len(versions) == 1  # every page reports the snapshot's resourceVersion
    assert remaining == [2500, 2000, 1500, 1000, 500, None]
    fresh = core.list_pod_for_all_namespaces()
    assert len(fresh.items) == 3000  # one added, one deleted
    assert int(fresh.metadata.resource_version) > int(versions.pop())


def _raw(answer: Any) -> dict[str, Any]:
    """The JSON an official client call asked with ``_preload_content=False`` was answered."""
    doc: dict[str, Any] = json.loads(answer.data)
    return doc


def test_the_items_of_a_built_in_kinds_list_carry_no_kind_or_api_version(
    api: KubeApiServer, client: ApiClient, core: CoreV1Api
) -> None:
    """The API server encodes a built-in kind's list with its items' TypeMeta empty: ``apiVersion`` and
    ``kind`` are on the list alone (kubernetes/kubernetes#3030, #63676; the python client's items read
    ``kind`` None, kubernetes-client/python#745). A get, and every write, answers them. A custom
    resource's items are unstructured objects and keep both, as the version listed names them."""
    api.add(node("n1"))
    api.add(pod("p1", node="n1"))
    api.add({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"template": {}}})
    lists = {
        "NodeList": core.list_node(_preload_content=False),
        "PodList": core.list_pod_for_all_namespaces(_preload_content=False),
        "NamespaceList": core.list_namespace(_preload_content=False),
        "PriorityClassList": CustomObjectsApi(client).list_cluster_custom_object(
            "scheduling.k8s.io", "v1", "priorityclasses", _preload_content=False
        ),
        "JobList": CustomObjectsApi(client).list_cluster_custom_object(
            "batch", "v1", "jobs", _preload_content=False
        ),
    }
    for list_kind, answer in lists.items():
        doc = _raw(answer)
        assert doc["kind"] == list_kind and doc["apiVersion"]
        assert doc["items"], list_kind
        assert all(not {"apiVersion", "kind"} & set(item) for item in doc["items"]), list_kind
    got = _raw(core.read_node("n1", _preload_content=False))
    assert (got["apiVersion"], got["kind"]) == ("v1", "Node")
    custom = CustomObjectsApi(client)
    custom.create_namespaced_custom_object(
        "scheduling.x-k8s.io", "v1alpha1", "default", "podgroups",
        {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "g"},
         "spec": {"minMember": 2}},
    )  # fmt: skip
    listed = _raw(custom.list_namespaced_custom_object(
        "scheduling.x-k8s.io", "v1alpha1", "default", "podgroups", _preload_content=False
    ))  # fmt: skip
    typed = [(i["apiVersion"], i["kind"]) for i in listed["items"]]
    assert typed == [("scheduling.x-k8s.io/v1alpha1", "PodGroup")]


def test_an_expired_continue_token_answers_410(api: KubeApiServer, core: CoreV1Api) -> None:
    for i in range(30):
        api.add(pod(f"p-{i}"))
    first = core.list_namespaced_pod("default", limit=10)
    token = first.metadata.var_continue
    assert token
    assert len(core.list_namespaced_pod("default", limit=10, _continue=token).items) == 10
    api.faults.expire_continue_tokens()
    with pytest.raises(ApiException) as caught:
        core.list_namespaced_pod("default", limit=10, _continue=token)
    assert caught.value.status == 410
    assert error_body(caught.value)["reason"] == "Expired"
    # starting over works, and the new token is good
    again = core.list_namespaced_pod("default", limit=10)
    assert (
        len(core.list_namespaced_pod("default", limit=10, _continue=again.metadata.var_continue).items) == 10
    )


def test_fail_next_answers_two_500s_then_succeeds(api: KubeApiServer, core: CoreV1Api) -> None:
    api.add(node("n1"))
    api.faults.fail_next(2)
    for _ in range(2):
        with pytest.raises(ApiException) as caught:
            core.list_node()
        assert caught.value.status == 500
        assert error_body(caught.value)["reason"] == "InternalError"
    assert [n.metadata.name for n in core.list_node().items] == ["n1"]
    assert [r.status for r in api.requests if r.path == "/api/v1/nodes"] == [500, 500, 200]


def test_injected_429_is_priority_and_fairness_refusal_and_only_hits_its_prefix(
    api: KubeApiServer, core: CoreV1Api
) -> None:
    """API Priority and Fairness (and the max-in-flight limiter) refuse a request before any handler
    runs: ``http.Error`` with plain text, ``Retry-After`` and the matched flow schema's and priority
    level's UIDs (k8s.io/apiserver pkg/server/filters priority-and-fairness.go ``setResponseHeaders``,
    ``tooManyRequests``), no Status body."""
    api.faults.fail_next(1, status=429, path_prefix="/api/v1/nodes")
    assert core.list_namespaced_pod("default").items == []  # other paths are untouched
    with pytest.raises(ApiException) as caught:
        core.create_node(node("n1"))
    assert caught.value.status == 429
    headers = caught.value.headers
    assert headers["Retry-After"] == "1"
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["X-Kubernetes-PF-FlowSchema-UID"] and headers["X-Kubernetes-PF-PriorityLevel-UID"]
    body = caught.value.body
    text = body.decode() if isinstance(body, bytes) else body
    assert text == "Too many requests, please try again later.\n"
    assert api.get("Node", "n1") is None
    # a 429 the API's own handlers write (given its words) is a Status, as any error of theirs
    api.faults.fail_next(1, status=429, path_prefix="/api/v1/nodes", message="storage is (re)initializing")
    with pytest.raises(ApiException) as caught:
        core.create_node(node("n1"))
    assert error_body(caught.value)["reason"] == "TooManyRequests"
    assert caught.value.headers["Retry-After"] == "1"
    # urllib3 under the official client retries a GET answered 429 with Retry-After by itself
    api.faults.fail_next(1, status=429, path_prefix="/api/v1/nodes")
    assert core.list_node().items == []
    assert [(r.method, r.status) for r in api.requests if r.path == "/api/v1/nodes"][-2:] == [
        ("GET", 429),
        ("GET", 200),
    ]


@pytest.mark.parametrize(
    ("call", "message", "details"),
    [
        (
            lambda core: core.list_pod_for_all_namespaces(),
            'pods is forbidden: User "spillway" cannot list resource "pods" in API group "" at the cluster '
            "scope",
            {"kind": "pods"},
        ),
        (
            lambda core: evict(core, "web-0", "shop"),
            'pods "web-0" is forbidden: User "spillway" cannot create resource "pods/eviction" in API group '
            '"" in the namespace "shop"',
            {"name": "web-0", "kind": "pods"},
        ),
        (
            lambda core: core.patch_node("n1", {"spec": {"unschedulable": True}}),
            'nodes "n1" is forbidden: User "spillway" cannot patch resource "nodes" in API group "" at the '
            "cluster scope",
            {"name": "n1", "kind": "nodes"},
        ),
        (
            lambda core: CustomObjectsApi(core.api_client).list_namespaced_custom_object(
                "autoscaling.x-k8s.io", "v1beta1", "ml", "capacitybuffers"
            ),
            'capacitybuffers.autoscaling.x-k8s.io is forbidden: User "spillway" cannot list resource '
            '"capacitybuffers" in API group "autoscaling.x-k8s.io" in the namespace "ml"',
            {"group": "autoscaling.x-k8s.io", "kind": "capacitybuffers"},
        ),
    ],
    ids=["list", "eviction", "patch", "custom-list"],
)
def test_an_injected_403_is_rbacs_refusal_of_the_request(
    api: KubeApiServer, core: CoreV1Api, call: Any, message: str, details: dict[str, str]
) -> None:
    """RBAC's refusal (k8s.io/apiserver pkg/endpoints/handlers/responsewriters errors.go ``Forbidden``,
    ``forbiddenMessage``): a Forbidden Status naming the user, the verb, the resource (and subresource),
    its API group and the namespace or cluster scope; ``details`` name the resource (no subresource),
    its group and the object, as ``errors.NewForbidden`` writes them."""
    api.faults.fail_next(1, status=403)
    with pytest.raises(ApiException) as caught:
        call(core)
    assert caught.value.status == 403
    assert caught.value.headers["X-Content-Type-Options"] == "nosniff"
    body = error_body(caught.value)
    assert (body["reason"], body["message"], body["details"]) == ("Forbidden", message, details)


def test_delay_slows_only_its_prefix_until_cleared(api: KubeApiServer, core: CoreV1Api) -> None:
    api.faults.delay(0.5, path_prefix="/api/v1/nodes")
    started = time.monotonic()
    core.list_node()
    assert time.monotonic() - started >= 0.5
    api.faults.delay(0)
    started = time.monotonic()
    core.list_node()
    assert time.monotonic() - started < 0.45


def test_field_selectors(api: KubeApiServer, core: CoreV1Api) -> None:
    api.add(pod("a", node="n1", phase="Running"))
    api.add(pod("b", node="n1", phase="Succeeded"))
    api.add(pod("c", node="n2", phase="Running"))
    api.add(pod("d", namespace="batch"))

    def names(selector: str) -> list[str]:
        return [p.metadata.name for p in core.list_pod_for_all_namespaces(field_selector=selector).items]

    assert names("spec.nodeName=n1") == ["a", "b"]
    assert names("spec.nodeName=n1,status.phase!=Succeeded") == ["a"]
    assert names("spec.nodeName!=n1") == ["d", "c"]  # batch/d sorts before default/c
    assert names("spec.nodeName=") == ["d"]  # unscheduled
    assert names("metadata.namespace=batch") == ["d"]
    assert names("metadata.name=c") == ["c"]
    with pytest.raises(ApiException) as caught:
        names("spec.bogus=1")
    assert caught.value.status == 400
    assert "field label not supported" in error_body(caught.value)["message"]


def test_a_boolean_field_left_out_is_selected_as_false(api: KubeApiServer, core: CoreV1Api) -> None:
    """The API indexes a Go bool (fmt.Sprint / strconv.FormatBool): a field left out reads "false"
    (pkg/registry/core/node/strategy.go NodeToSelectableFields, pod strategy.go ToSelectableFields)."""
    api.add({"kind": "Node", "metadata": {"name": "n1"}})
    api.add({"kind": "Node", "metadata": {"name": "n2"}, "spec": {"unschedulable": True}})
    api.add({"kind": "Node", "metadata": {"name": "n3"}, "spec": {"unschedulable": False}})
    api.add(pod("plain", node="n1"))
    host = pod("host", node="n1")
    host["spec"]["hostNetwork"] = True
    api.add(host)

    def nodes(selector: str) -> list[str]:
        return [n.metadata.name for n in core.list_node(field_selector=selector).items]

    def pods(selector: str) -> list[str]:
        return [p.metadata.name for p in core.list_namespaced_pod("default", field_selector=selector).items]

    assert nodes("spec.unschedulable=false") == ["n1", "n3"]
    assert nodes("spec.unschedulable!=true") == ["n1", "n3"]
    assert nodes("spec.unschedulable=true") == ["n2"]
    assert pods("spec.hostNetwork=false") == ["plain"]
    assert pods("spec.hostNetwork=true") == ["host"]


def test_label_selectors(api: KubeApiServer, core: CoreV1Api) -> None:
    api.add(pod("web-1", labels={"app": "web", "tier": "front"}))
    api.add(pod("web-2", labels={"app": "web", "tier": "back", "gpu": "true"}))
    api.add(pod("db", labels={"app": "db", "tier": "back"}))
    api.add(pod("bare"))

    def names(selector: str) -> set[str]:
        return {p.metadata.name for p in core.list_namespaced_pod("default", label_selector=selector).items}

    assert names("app=web") == {"web-1", "web-2"}
    assert names("app==web,tier=back") == {"web-2"}
    assert names("app!=web") == {"db", "bare"}
    assert names("tier in (front, back),app notin (db)") == {"web-1", "web-2"}
    assert names("gpu") == {"web-2"}
    assert names("!gpu,tier") == {"web-1", "db"}
    with pytest.raises(ApiException) as caught:
        names("app in (web")
    assert caught.value.status == 400


# --- nodes: cordon, taints, optimistic concurrency --------------------------------------------------


def test_cordon_by_strategic_merge_patch_and_remove_the_annotation_with_null(
    api: KubeApiServer, core: CoreV1Api
) -> None:
    api.add(node("n1", annotations={"keep": "me"}))
    before = core.read_node("n1").metadata.resource_version
    cordoned = core.patch_node(
        "n1",
        {"spec": {"unschedulable": True}, "metadata": {"annotations": {CORDONED_BY_SPILLWAY: "2026-01-01"}}},
    )
    assert api.requests[-1].content_type == SMP  # what the v37 client sends for a dict body
    assert cordoned.spec.unschedulable is True
    assert cordoned.metadata.annotations == {"keep": "me", CORDONED_BY_SPILLWAY: "2026-01-01"}
    assert int(cordoned.metadata.resource_version) > int(before)
    stored = core.read_node("n1")
    assert stored.spec.unschedulable is True and stored.spec.provider_id == "aws:///us-east-1a/i-n1"

    core.patch_node(
        "n1", {"spec": {"unschedulable": False}, "metadata": {"annotations": {CORDONED_BY_SPILLWAY: None}}}
    )
    uncordoned = core.read_node("n1")
    assert not uncordoned.spec.unschedulable
    assert uncordoned.metadata.annotations == {"keep": "me"}
    assert api.get("Node", "n1")["metadata"]["annotations"] == {"keep": "me"}


def test_add_and_remove_a_taint(api: KubeApiServer, core: CoreV1Api) -> None:
    gpu = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    draining = {"key": DRAINING_TAINT, "effect": "NoSchedule"}
    api.add(node("n1", taints=[gpu]))

    # add: read, append, and send the whole list with the resourceVersion (taints are an atomic list)
    current = core.read_node("n1")
    taints = [t.to_dict() for t in current.spec.taints] + [draining]
    core.patch_node(
        "n1", {"metadata": {"resourceVersion": current.metadata.resource_version}, "spec": {"taints": taints}}
    )
    assert [(t.key, t.effect) for t in core.read_node("n1").spec.taints] == [
        ("nvidia.com/gpu", "NoSchedule"),
        (DRAINING_TAINT, "NoSchedule"),
    ]

    # remove: JSON patch guarded by a test of the element being removed
    remove_second = [
        {"op": "test", "path": "/spec/taints/1/key", "value": DRAINING_TAINT},
        {"op": "remove", "path": "/spec/taints/1"},
    ]
    core.patch_node("n1", remove_second)
    assert api.requests[-1].content_type == "application/json-patch+json"
    assert [t.key for t in core.read_node("n1").spec.taints] == ["nvidia.com/gpu"]

    # a failed test changes nothing
    with pytest.raises(ApiException) as caught:
        core.patch_node(
            "n1",
            [{**remove_second[0], "path": "/spec/taints/0/key"}, {"op": "remove", "path": "/spec/taints/0"}],
        )
    assert caught.value.status == 422
    assert [t.key for t in core.read_node("n1").spec.taints] == ["nvidia.com/gpu"]

    # as on a real server, a patch naming one taint replaces the list, whatever the patch type
    core.patch_node("n1", {"spec": {"taints": [draining]}})
    assert [t.key for t in core.read_node("n1").spec.taints] == [DRAINING_TAINT]
    core.patch_node("n1", {"spec": {"taints": [gpu]}}, _content_type=MERGE)
    assert api.requests[-1].content_type == MERGE
    assert [t.key for t in core.read_node("n1").spec.taints] == ["nvidia.com/gpu"]


def test_stale_resource_version_is_a_conflict(api: KubeApiServer, core: CoreV1Api) -> None:
    api.add(node("n1"))
    stale = core.read_node("n1")
    core.patch_node("n1", {"metadata": {"labels": {"touched": "yes"}}})
    stale.spec.unschedulable = True
    with pytest.raises(ApiException) as caught:
        core.replace_node("n1", stale)
    assert caught.value.status == 409
    assert error_body(caught.value)["reason"] == "Conflict"
    assert not core.read_node("n1").spec.unschedulable
    # a patch carrying the stale version is refused the same way
    with pytest.raises(ApiException) as caught:
        core.patch_node("n1", {"metadata": {"resourceVersion": stale.metadata.resource_version}})
    assert caught.value.status == 409

    fresh = core.read_node("n1")
    fresh.spec.unschedulable = True
    replaced = core.replace_node("n1", fresh)
    assert replaced.spec.unschedulable is True
    assert replaced.metadata.labels == {"touched": "yes"}
    assert int(replaced.metadata.resource_version) > int(fresh.metadata.resource_version)


def test_the_node_lifecycle_controller_taints_a_cordoned_node_and_untaints_it_once_uncordoned(
    api: KubeApiServer, core: CoreV1Api
) -> None:
    gpu = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    api.add(node("n1", taints=[gpu]))
    answered = core.patch_node("n1", {"spec": {"unschedulable": True}})
    # the controller acts on the change after it: the cordon's own answer has no taint yet
    assert [t.key for t in answered.spec.taints] == ["nvidia.com/gpu"]
    cordoned = core.read_node("n1")
    assert [(t.key, t.effect) for t in cordoned.spec.taints] == [
        ("nvidia.com/gpu", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ]
    assert cordoned.spec.taints[1].time_added is not None  # SwapNodeControllerTaint stamps it
    assert int(cordoned.metadata.resource_version) > int(answered.metadata.resource_version)
    # a writer holding the version read before the controller's write is refused, not merged
    with pytest.raises(ApiException) as caught:
        core.patch_node(
            "n1",
            {"metadata": {"resourceVersion": answered.metadata.resource_version}, "spec": {"taints": [gpu]}},
            _content_type=MERGE,
        )
    assert caught.value.status == 409

    core.patch_node("n1", {"spec": {"unschedulable": False}})
    assert [t.key for t in core.read_node("n1").spec.taints] == ["nvidia.com/gpu"]


def test_the_node_lifecycle_controller_puts_back_a_cordon_taint_a_write_dropped(
    api: KubeApiServer, core: CoreV1Api
) -> None:
    api.add({**node("n1"), "spec": {"unschedulable": True}})
    assert [t.key for t in core.read_node("n1").spec.taints] == ["node.kubernetes.io/unschedulable"]
    core.patch_node("n1", {"spec": {"taints": []}}, _content_type=MERGE)
    assert [t.key for t in core.read_node("n1").spec.taints] == ["node.kubernetes.io/unschedulable"]


def test_the_node_lifecycle_controller_taints_node_conditions_no_schedule(
    api: KubeApiServer, core: CoreV1Api
) -> None:
    def conditions(**status: str) -> list[dict[str, str]]:
        return [{"type": kind, "status": value} for kind, value in status.items()]

    api.add({**node("n1"), "status": {"conditions": conditions(Ready="False", DiskPressure="True")}})
    assert [(t.key, t.effect) for t in core.read_node("n1").spec.taints] == [
        ("node.kubernetes.io/not-ready", "NoSchedule"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ]
    # the kubelet reports it ready but unreachable later, then healthy: taints follow each report
    core.patch_node_status(
        "n1", {"status": {"conditions": conditions(Ready="Unknown", DiskPressure="False")}}
    )
    assert [t.key for t in core.read_node("n1").spec.taints] == ["node.kubernetes.io/unreachable"]
    core.patch_node_status("n1", {"status": {"conditions": conditions(Ready="True")}})
    assert not core.read_node("n1").spec.taints
    # a NoExecute taint of the same key is taint-based eviction's, not this pass's: left alone
    no_execute = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}
    core.patch_node("n1", {"spec": {"taints": [no_execute]}})
    assert [(t.key, t.effect) for t in core.read_node("n1").spec.taints] == [
        ("node.kubernetes.io/not-ready", "NoExecute")
    ]


def test_the_node_lifecycle_controller_waits_its_delay(api: KubeApiServer, core: CoreV1Api) -> None:
    api.node_controller_delay = 60
    api.add(node("n1"))
    core.patch_node("n1", {"spec": {"unschedulable": True}})
    assert not core.read_node("n1").spec.taints
    api.node_controller_delay = 0
    assert [t.key for t in core.read_node("n1").spec.taints] == ["node.kubernetes.io/unschedulable"]


def test_errors_are_status_objects(api: KubeApiServer, core: CoreV1Api) -> None:
    api.add(node("n1"))
    with pytest.raises(ApiException) as caught:
        core.read_node("missing")
    assert caught.value.status == 404
    assert error_body(caught.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'nodes "missing" not found',
        "reason": "NotFound",
        "details": {"name": "missing", "kind": "nodes"},
        "code": 404,
    }
    with pytest.raises(ApiException) as caught:
        core.create_node({"metadata": {"name": "n1"}})
    assert caught.value.status == 409
    assert error_body(caught.value)["reason"] == "AlreadyExists"
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod("nowhere", pod("p", namespace="nowhere"))
    assert caught.value.status == 404
    assert error_body(caught.value)["message"] == 'namespaces "nowhere" not found'


# --- evictions ---------------------------------------------------------------------------------------


def test_eviction_blocked_by_min_available_then_allowed_once_another_pod_is_ready(
    api: KubeApiServer, core: CoreV1Api, policy: PolicyV1Api
) -> None:
    web = {"app": "web"}
    api.add(pod("web-1", labels=web, node="n1", phase="Running", ready=True))
    api.add(pod("web-2", labels=web, node="n2", phase="Running", ready=True))
    api.add(pod("web-3", labels=web))  # pending: not healthy yet
    api.add(pdb("web", web, minAvailable=2))

    status = policy.read_namespaced_pod_disruption_budget("web", "default").status
    assert (status.expected_pods, status.current_healthy, status.desired_healthy) == (3, 2, 2)
    assert status.disruptions_allowed == 0

    with pytest.raises(ApiException) as caught:
        evict(core, "web-1")
    assert caught.value.status == 429
    body = error_body(caught.value)
    assert body["reason"] == "TooManyRequests"
    assert "violate the pod's disruption budget" in body["message"]
    assert body["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert "needs 2 healthy pods and has 2 currently" in body["details"]["causes"][0]["message"]
    assert api.get("Pod", "web-1") is not None

    api.bind("web-3", "n3")  # scheduled and Ready: three healthy, one may go
    assert policy.read_namespaced_pod_disruption_budget("web", "default").status.disruptions_allowed == 1
    evict(core, "web-1")
    assert terminating(api, "web-1")  # until the kubelet confirms
    kubelet_confirms(api)
    assert api.get("Pod", "web-1") is None
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_pod("web-1", "default")
    assert caught.value.status == 404
    after = policy.list_namespaced_pod_disruption_budget("default").items[0].status
    assert (after.expected_pods, after.current_healthy, after.disruptions_allowed) == (2, 2, 0)
    with pytest.raises(ApiException) as caught:
        evict(core, "web-2")
    assert caught.value.status == 429


def test_percentages_round_up_like_the_disruption_controller(api: KubeApiServer, policy: PolicyV1Api) -> None:
    owners = {app: workload(api, "ReplicaSet", app, 3, {"app": app}) for app in ("a", "b")}
    for i in range(3):
        for app in ("a", "b"):
            api.add(pod(f"{app}-{i}", labels={"app": app}, phase="Running", ready=True, owner=owners[app]))
    api.add(pdb("min-half", {"app": "a"}, minAvailable="50%"))  # ceil(1.5) = 2 must stay
    api.add(pdb("max-half", {"app": "b"}, maxUnavailable="50%"))  # ceil(1.5) = 2 may go
    budgets = {
        b.metadata.name: b.status for b in policy.list_pod_disruption_budget_for_all_namespaces().items
    }
    assert (budgets["min-half"].desired_healthy, budgets["min-half"].disruptions_allowed) == (2, 1)
    assert (budgets["max-half"].desired_healthy, budgets["max-half"].disruptions_allowed) == (1, 2)


def test_a_pod_two_budgets_select_is_refused_with_the_real_servers_500_whatever_they_allow(
    api: KubeApiServer, core: CoreV1Api
) -> None:
    # pkg/registry/core/pod/storage/eviction.go returns a bare metav1.Status{Status: Failure, Message,
    # Code: 500}: no reason, no details (kubernetes.io "API-initiated Eviction": 500 for a
    # misconfiguration such as several budgets selecting one pod)
    labels = {"app": "web", "tier": "front"}
    for i in range(3):
        api.add(pod(f"web-{i}", labels=labels, node="n1", phase="Running", ready=True))
    api.add(pdb("by-app", {"app": "web"}, maxUnavailable=2))
    api.add(pdb("by-tier", {"tier": "front"}, maxUnavailable=2))
    with pytest.raises(ApiException) as caught:
        evict(core, "web-0")
    assert caught.value.status == 500
    assert error_body(caught.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        "code": 500,
    }
    assert api.get("Pod", "web-0") is not None
    api.add(pod("starting", labels=labels, phase="Pending"))  # not running: no budget is read
    evict(core, "starting")
    assert api.get("Pod", "starting") is None  # not scheduled either: no grace period


def test_a_budget_whose_status_forbids_evictions_answers_403_naming_the_budget(
    api: KubeApiServer, core: CoreV1Api, policy: PolicyV1Api
) -> None:
    # eviction.go checkAndDecrement: errors.NewForbidden(policy.Resource("poddisruptionbudget"), name, ...)
    # for disruptionsAllowed < 0 and for more than MaxDisruptedPodSize (2000) entries in disruptedPods
    owner = workload(api, "ReplicaSet", "web", 3, {"app": "web"})
    for i in range(3):
        api.add(pod(f"web-{i}", labels={"app": "web"}, node="n1", phase="Running", ready=True, owner=owner))
    stored = api.add(pdb("web", {"app": "web"}, maxUnavailable=1))
    api.update("PodDisruptionBudget", {**stored, "status": {"disruptionsAllowed": -1}})
    assert policy.read_namespaced_pod_disruption_budget("web", "default").status.disruptions_allowed == -1
    with pytest.raises(ApiException) as caught:
        evict(core, "web-0")
    assert caught.value.status == 403
    assert error_body(caught.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'poddisruptionbudget.policy "web" is forbidden: pdb disruptions allowed is negative',
        "reason": "Forbidden",
        "details": {"name": "web", "group": "policy", "kind": "poddisruptionbudget"},
        "code": 403,
    }
    waiting = {f"gone-{i}": "2026-01-01T00:00:00Z" for i in range(2001)}
    api.update("PodDisruptionBudget", {**stored, "status": {"disruptedPods": waiting}})
    with pytest.raises(ApiException) as caught:
        evict(core, "web-0")
    assert caught.value.status == 403 and "DisruptedPods map too big" in error_body(caught.value)["message"]
    api.update(
        "PodDisruptionBudget", {**stored, "status": {"disruptedPods": dict(list(waiting.items())[:2000])}}
    )
    evict(core, "web-0")  # 2000 is still allowed
    assert terminating(api, "web-0")


def test_no_eviction_nor_create_in_a_terminating_namespace(api: KubeApiServer, core: CoreV1Api) -> None:
    # the NamespaceLifecycle admission plugin: 403 with a NamespaceTerminating cause, before the pod is read
    api.add(pod("web-0", labels={"app": "web"}, node="n1", phase="Running", ready=True))
    namespace = api.get("Namespace", "default")
    assert namespace is not None
    api.update("Namespace", {**namespace, "status": {"phase": "Terminating"}})
    with pytest.raises(ApiException) as caught:
        evict(core, "web-0")
    assert caught.value.status == 403
    assert error_body(caught.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "web-0" is forbidden: unable to create new content in namespace default because it '
        "is being terminated",
        "reason": "Forbidden",
        "details": {
            "name": "web-0",
            "kind": "pods",
            "causes": [
                {
                    "reason": "NamespaceTerminating",
                    "message": "namespace default is being terminated",
                    "field": "metadata.namespace",
                }
            ],
        },
        "code": 403,
    }
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map("default", {"metadata": {"name": "late"}})
    assert caught.value.status == 403
    assert api.get("Pod", "web-0") is not None


@pytest.mark.parametrize(
    ("policy", "healthy_pods", "evicted"),
    [
        ("AlwaysAllow", 1, True),  # whatever the budget says
        ("IfHealthyBudget", 2, True),  # the budget is met without it: currentHealthy 2 >= desiredHealthy 2
        (None, 2, True),  # the default is IfHealthyBudget
        ("IfHealthyBudget", 1, False),  # 1 healthy of the 2 desired: the budget refuses it (429)
    ],
)
def test_a_running_pod_not_ready_goes_as_its_budgets_unhealthy_pod_eviction_policy_says(
    api: KubeApiServer, core: CoreV1Api, policy: str | None, healthy_pods: int, evicted: bool
) -> None:
    web = {"app": "web"}
    for i in range(healthy_pods):
        api.add(pod(f"web-{i}", labels=web, node="n1", phase="Running", ready=True))
    api.add(pod("crashing", labels=web, node="n1", phase="Running", ready=False))
    api.add(pdb("web", web, minAvailable=2, **({"unhealthyPodEvictionPolicy": policy} if policy else {})))
    if evicted:
        evict(core, "crashing")
        assert terminating(api, "crashing")
    else:
        with pytest.raises(ApiException) as caught:
            evict(core, "crashing")
        assert caught.value.status == 429
        assert error_body(caught.value)["details"]["causes"][0]["reason"] == "DisruptionBudget"
    # a Ready pod is held to the budget under either policy (here it allows no disruption)
    with pytest.raises(ApiException) as caught:
        evict(core, "web-0")
    assert caught.value.status == 429


def test_eviction_without_a_budget_removes_the_pod_and_a_missing_pod_is_404(
    api: KubeApiServer, core: CoreV1Api, policy: PolicyV1Api
) -> None:
    api.add(pod("lonely", labels={"app": "solo"}, node="n1", phase="Running", ready=True))
    api.add(pdb("other", {"app": "web"}, minAvailable=1))
    evict(core, "lonely")
    assert api.requests[-1].status == 201
    [left] = core.list_namespaced_pod("default").items
    assert left.metadata.deletion_timestamp is not None  # terminating, until the kubelet confirms
    kubelet_confirms(api)
    assert core.list_namespaced_pod("default").items == []
    with pytest.raises(ApiException) as caught:
        evict(core, "lonely")
    assert caught.value.status == 404
    assert error_body(caught.value)["reason"] == "NotFound"


# --- budgets from the controllers' scale, graceful deletion (kubernetes/kubernetes pkg/controller/disruption,
# --- pkg/registry/core/pod: strategy.go, storage/eviction.go; apiserver registry/rest/delete.go) ---------------


def running_ready(api: KubeApiServer, name: str, owner: dict[str, Any] | None = None, **kw: Any) -> None:
    """A pod of app ``web`` scheduled to ``n1`` and started: phase Running, Ready=True (the kubelet's)."""
    api.add(pod(name, labels={"app": "web"}, owner=owner, **kw))
    api.bind(name, "n1")


def evict_with(core: CoreV1Api, name: str, delete_options: V1DeleteOptions | None = None) -> None:
    body = V1Eviction(
        api_version="policy/v1",
        kind="Eviction",
        metadata=V1ObjectMeta(name=name, namespace="default"),
        delete_options=delete_options,
    )
    core.create_namespaced_pod_eviction(name, "default", body)


def refused_eviction(core: CoreV1Api, name: str) -> int:
    """The HTTP status the server refuses the eviction of pod ``name`` with (the test fails if it evicts)."""
    with pytest.raises(ApiException) as refused:
        evict(core, name)
    return int(refused.value.status)


def test_max_unavailable_budget_counts_the_replicaset_scale_not_the_pods_left(
    api: KubeApiServer, core: CoreV1Api, policy: PolicyV1Api
) -> None:
    """maxUnavailable=1 over a ReplicaSet of 3: one eviction, then 429 until a replacement is Ready.
    disruption.go getExpectedPodCount/getExpectedScale: expectedPods is the sum of the controllers'
    spec.replicas, not the pods left (after one eviction: expected 3, desired 2, healthy 2)."""
    owner = workload(api, "ReplicaSet", "web-5d9c", 3, {"app": "web"})
    for i in range(3):
        running_ready(api, f"web-{i}", owner)
    api.add(pdb("web", {"app": "web"}, maxUnavailable=1))

    evict(core, "web-0")  # 3 healthy, 2 desired: allowed
    kubelet_confirms(api)  # the pod is gone, not merely terminating

    status = policy.read_namespaced_pod_disruption_budget("web", "default").status
    assert (status.expected_pods, status.desired_healthy, status.current_healthy) == (3, 2, 2)
    assert status.disruptions_allowed == 0
    assert refused_eviction(core, "web-1") == 429


def test_max_unavailable_budget_over_pods_without_a_controller_allows_no_eviction(
    api: KubeApiServer, core: CoreV1Api, policy: PolicyV1Api
) -> None:
    """getExpectedScale leaves a pod without a controller out (``UnmanagedPods``): expectedPods 0, and
    updatePdbStatus allows no disruption when expectedPods <= 0."""
    for i in range(3):
        running_ready(api, f"web-{i}")
    api.add(pdb("web", {"app": "web"}, maxUnavailable=1))

    status = policy.read_namespaced_pod_disruption_budget("web", "default").status
    assert (status.expected_pods, status.disruptions_allowed) == (0, 0)
    assert refused_eviction(core, "web-0") == 429


def test_a_percentage_budget_counts_each_controller_once_and_a_deployment_for_its_replicaset(
    api: KubeApiServer, policy: PolicyV1Api
) -> None:
    """getExpectedScale: a ReplicaSet a Deployment controls counts with the Deployment's replicas, a
    StatefulSet and a ReplicationController with theirs (1 when unset), each once however many pods it
    has; a pod without a controller adds nothing."""
    deployment = workload(api, "Deployment", "web", 4, {"app": "web"})
    replica_set = workload(api, "ReplicaSet", "web-5d9c", 2, {"app": "web"}, ownerReferences=[deployment])
    stateful = workload(api, "StatefulSet", "db", 3, {"app": "web"})
    legacy = workload(api, "ReplicationController", "old", None, {"app": "web"})
    for name, owner in (("w-0", replica_set), ("w-1", replica_set), ("db-0", stateful), ("old-0", legacy),
                        ("bare", None)):  # fmt: skip
        running_ready(api, name, owner)
    api.add(pdb("web", {"app": "web"}, minAvailable="50%"))

    status = policy.read_namespaced_pod_disruption_budget("web", "default").status
    assert (status.expected_pods, status.desired_healthy, status.current_healthy) == (8, 4, 5)
    assert status.disruptions_allowed == 1


def test_an_integer_min_available_counts_the_pods_whatever_their_controllers(
    api: KubeApiServer, policy: PolicyV1Api
) -> None:
    for i in range(3):
        running_ready(api, f"web-{i}")  # no controller
    api.add(pdb("web", {"app": "web"}, minAvailable=2))
    status = policy.read_namespaced_pod_disruption_budget("web", "default").status
    assert (status.expected_pods, status.desired_healthy, status.disruptions_allowed) == (3, 2, 1)


@pytest.mark.parametrize(
    ("owner", "why"),
    [
        (
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "gone",
                "uid": "u-gone",
                "controller": True,
            },
            'found no controllers for pod "web-0"',
        ),
        (
            {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u-job", "controller": True},
            "jobs.batch does not implement the scale subresource",
        ),
    ],
)
def test_a_budget_whose_pods_controller_has_no_scale_fails_its_sync_and_allows_nothing(
    api: KubeApiServer, core: CoreV1Api, policy: PolicyV1Api, owner: dict[str, Any], why: str
) -> None:
    """A controller not found, or of a kind without a scale subresource, is an error of
    getExpectedScale: the controller's failSafe writes disruptionsAllowed 0 and DisruptionAllowed=False
    of reason SyncFailed with the error as its message."""
    running_ready(api, "web-0", owner)
    running_ready(api, "web-1", owner)
    api.add(pdb("web", {"app": "web"}, maxUnavailable=1))

    status = policy.read_namespaced_pod_disruption_budget("web", "default").status
    assert status.disruptions_allowed == 0
    [condition] = status.conditions
    assert (condition.type, condition.status, condition.reason, condition.message) == (
        "DisruptionAllowed", "False", "SyncFailed", why)  # fmt: skip
    assert refused_eviction(core, "web-0") == 429


def test_a_running_pod_without_a_ready_condition_is_not_healthy_for_a_budget(
    api: KubeApiServer, core: CoreV1Api, policy: PolicyV1Api
) -> None:
    """countHealthyPods counts IsPodReady pods (a Ready condition of status True; none is not ready), and
    eviction.go tests the evicted pod the same way: two Running pods without conditions under
    minAvailable=1 are 0 healthy, and IfHealthyBudget (0 >= 1 fails) refuses the eviction."""
    for i in range(2):
        api.add(pod(f"web-{i}", labels={"app": "web"}, node="n1", phase="Running"))
    api.add(pdb("web", {"app": "web"}, minAvailable=1))

    status = policy.read_namespaced_pod_disruption_budget("web", "default").status
    assert (status.current_healthy, status.disruptions_allowed) == (0, 0)
    assert refused_eviction(core, "web-0") == 429


def test_an_evicted_running_pod_stays_listed_terminating_for_its_grace_period(
    api: KubeApiServer, core: CoreV1Api
) -> None:
    """CheckGracefulDelete (grace: the delete options', else terminationGracePeriodSeconds, defaulted
    to 30) and BeforeDelete (deletionTimestamp = now + grace, deletionGracePeriodSeconds): the pod
    stays, on its node, until the kubelet confirms."""
    api.kubelet_exit_delay = 3600  # a kubelet slow to stop the containers
    running_ready(api, "web-0")
    generation = api.get("Pod", "web-0")["metadata"]["generation"]  # type: ignore[index]

    evict(core, "web-0")

    found = core.read_namespaced_pod("web-0", "default")
    assert found.metadata.deletion_timestamp is not None
    assert found.metadata.deletion_grace_period_seconds == 30
    assert found.metadata.generation == generation + 1
    deleted_at = found.metadata.deletion_timestamp - found.metadata.creation_timestamp
    assert 29 <= deleted_at.total_seconds() <= 32  # now + 30 s
    on_node = core.list_namespaced_pod("default", field_selector="spec.nodeName=n1").items
    assert [p.metadata.name for p in on_node] == ["web-0"]
    kubelet_confirms(api)
    assert core.list_namespaced_pod("default").items == []


def test_the_kubelet_confirms_a_graceful_deletion_after_its_exit_delay_or_the_grace_period() -> None:
    # on the server's clock, not the machine's: a slow machine spent the 0.3 s between the delete and
    # the list that found "slow" still terminating, and it was gone already
    now = [datetime(2026, 11, 2, 10, 0, tzinfo=UTC)]
    with KubeApiServer(clock=lambda: now[0]) as api, api.api_client() as client:
        core = CoreV1Api(client)
        api.kubelet_exit_delay = 0.3
        running_ready(api, "slow")
        running_ready(api, "quick")
        core.delete_namespaced_pod("slow", "default")
        core.delete_namespaced_pod("quick", "default", grace_period_seconds=0)  # a forced delete: at once
        assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == ["slow"]
        now[0] += timedelta(seconds=0.25)
        assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == ["slow"]
        now[0] += timedelta(seconds=0.1)
        assert core.list_namespaced_pod("default").items == []


@pytest.mark.parametrize(
    ("node", "phase", "listed"),
    [
        (None, "Pending", False),  # not scheduled: nothing to stop
        ("n1", "Succeeded", False),  # finished: nothing to stop
        ("n1", "Failed", False),
        ("n1", "Pending", True),  # scheduled: the kubelet may be starting it
        ("n1", "Running", True),
    ],
)
def test_only_a_scheduled_pod_not_finished_is_deleted_gracefully(
    api: KubeApiServer, core: CoreV1Api, node: str | None, phase: str, listed: bool
) -> None:
    api.kubelet_exit_delay = 3600
    api.add(pod("p", node=node, phase=phase))
    answer = core.delete_namespaced_pod("p", "default")
    assert answer.metadata.deletion_timestamp is not None
    assert answer.metadata.deletion_grace_period_seconds == (30 if listed else 0)
    assert (api.get("Pod", "p") is not None) is listed


def test_a_terminating_pods_grace_period_may_only_be_shortened(api: KubeApiServer, core: CoreV1Api) -> None:
    """BeforeDelete on a pod already being deleted: a longer or no grace period changes nothing, a
    shorter one moves deletionTimestamp earlier by the difference, 0 deletes it now."""
    api.kubelet_exit_delay = 3600
    running_ready(api, "web-0")
    first = core.delete_namespaced_pod("web-0", "default", grace_period_seconds=20)
    again = core.delete_namespaced_pod("web-0", "default")
    longer = core.delete_namespaced_pod("web-0", "default", grace_period_seconds=60)
    assert (
        again.metadata.resource_version == longer.metadata.resource_version == first.metadata.resource_version
    )
    shorter = core.delete_namespaced_pod("web-0", "default", grace_period_seconds=5)
    assert shorter.metadata.deletion_grace_period_seconds == 5
    moved = first.metadata.deletion_timestamp - shorter.metadata.deletion_timestamp
    assert moved.total_seconds() == 15
    core.delete_namespaced_pod("web-0", "default", grace_period_seconds=0)
    assert api.get("Pod", "web-0") is None


def test_a_delete_body_that_says_dry_run_deletes_nothing(api: KubeApiServer, core: CoreV1Api) -> None:
    """A DELETE's options come from its body when it has one (handlers/delete.go): its dryRun holds."""
    running_ready(api, "web-0")
    answer = core.delete_namespaced_pod("web-0", "default", body=V1DeleteOptions(dry_run=["All"]))
    assert answer.metadata.deletion_timestamp is not None
    found = api.get("Pod", "web-0")
    assert found is not None and not found["metadata"].get("deletionTimestamp")


def test_eviction_marks_the_pod_with_a_disruption_target_condition(
    api: KubeApiServer, core: CoreV1Api
) -> None:
    """eviction.go addConditionAndDeletePod: DisruptionTarget=True, reason EvictionByEvictionAPI, before
    the (graceful) delete."""
    running_ready(api, "web-0")

    evict(core, "web-0")

    conditions = {c.type: c for c in core.read_namespaced_pod("web-0", "default").status.conditions or []}
    target = conditions["DisruptionTarget"]
    assert (target.status, target.reason, target.message) == (
        "True",
        "EvictionByEvictionAPI",
        "Eviction API: evicting",
    )


def test_evicting_a_pod_already_terminating_ignores_its_budget(api: KubeApiServer, core: CoreV1Api) -> None:
    """eviction.go canIgnorePDB: a pod with a deletionTimestamp is deleted without a look at budgets."""
    running_ready(api, "web-0")
    running_ready(api, "web-1")
    api.add(pdb("web", {"app": "web"}, minAvailable=2))
    marked = api.get("Pod", "web-0")
    assert marked is not None
    marked["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:30Z"
    marked["metadata"]["deletionGracePeriodSeconds"] = 30
    api.update("Pod", marked)  # what a delete with a grace period leaves (the test's hand)

    evict(core, "web-0")  # healthy 1 < desired 2, yet no 429

    assert terminating(api, "web-0")


def test_an_eviction_whose_delete_options_say_dry_run_deletes_nothing(
    api: KubeApiServer, core: CoreV1Api
) -> None:
    """eviction.go propagateDryRun: the Eviction's deleteOptions.dryRun (kubectl drain --dry-run=server
    sends it) makes the whole eviction a dry run: no condition, no deletion."""
    running_ready(api, "web-0")
    before = api.get("Pod", "web-0")

    evict_with(core, "web-0", V1DeleteOptions(dry_run=["All"]))

    assert api.get("Pod", "web-0") == before


def test_an_eviction_passes_its_grace_period_to_the_delete(api: KubeApiServer, core: CoreV1Api) -> None:
    api.kubelet_exit_delay = 3600
    running_ready(api, "web-0")
    running_ready(api, "web-1")
    evict_with(core, "web-0", V1DeleteOptions(grace_period_seconds=7))
    evict_with(core, "web-1", V1DeleteOptions(grace_period_seconds=0))
    assert core.read_namespaced_pod("web-0", "default").metadata.deletion_grace_period_seconds == 7
    assert api.get("Pod", "web-1") is None


# --- events, namespaces, auth ------------------------------------------------------------------------


def test_events_from_both_apis_are_recorded(api: KubeApiServer, client: ApiClient, core: CoreV1Api) -> None:
    core.create_namespaced_event(
        "default",
        {
            "metadata": {"generateName": "n1."},
            "involvedObject": {"kind": "Node", "name": "n1"},
            "reason": "SpillwayCordon",
            "message": "cordoned for scale-down",
            "type": "Normal",
            "source": {"component": "spillway"},
        },
    )
    EventsV1Api(client).create_namespaced_event(
        "default",
        {
            "metadata": {"name": "drain.1"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "regarding": {"kind": "Node", "name": "n2"},
            "reason": "SpillwayDrain",
            "note": "draining",
            "type": "Warning",
            "action": "Drain",
            "reportingController": "spillway.io/drain",
            "reportingInstance": "drain-1",
        },
    )
    recorded = api.list("Event")
    assert [(e["reason"], e["involvedObject"]["name"], e["message"]) for e in recorded] == [
        ("SpillwayDrain", "n2", "draining"),
        ("SpillwayCordon", "n1", "cordoned for scale-down"),
    ]
    assert recorded[1]["metadata"]["name"].startswith("n1.") and len(recorded[1]["metadata"]["name"]) == 8
    listed = core.list_event_for_all_namespaces(field_selector="involvedObject.name=n2").items
    assert [(e.reason, e.reporting_component) for e in listed] == [("SpillwayDrain", "spillway.io/drain")]
    as_v1 = EventsV1Api(client).list_namespaced_event("default", field_selector="reason=SpillwayDrain").items
    assert [(e.note, e.regarding.name) for e in as_v1] == [("draining", "n2")]


def test_an_event_name_is_held_to_the_rules_of_the_api_it_is_created_through(
    client: ApiClient, core: CoreV1Api
) -> None:
    """events.k8s.io/v1 validates a new Event's name as a DNS subdomain (at most 253 characters); v1
    skips that for backwards compatibility and refuses only what no URL path segment may hold."""
    long_name = f"{'n' * 253}.{0x18AB8B3FAAA83129:x}"

    def event(name: str) -> dict[str, Any]:
        return {
            "metadata": {"name": name},
            "involvedObject": {"kind": "Node", "name": "n" * 253},
            "reason": "SpillwayDrain",
            "message": "draining",
            "source": {"component": "spillway"},
        }

    core.create_namespaced_event("default", event(long_name))  # the v1 API takes it, as a real one does
    assert core.read_namespaced_event(long_name, "default").metadata.name == long_name
    for bad, why in (("a%b", "may not contain '%'"), ("..", "may not be '..'")):
        with pytest.raises(ApiException) as caught:
            core.create_namespaced_event("default", event(bad))
        assert caught.value.status == 422
        assert error_body(caught.value)["details"]["causes"] == [
            {
                "reason": "FieldValueInvalid",
                "message": f'Invalid value: "{bad}": {why}',
                "field": "metadata.name",
            }
        ]

    events_v1 = EventsV1Api(client)
    strict = {
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "regarding": {"kind": "Node", "name": "n" * 253},
        "reason": "SpillwayDrain",
        "note": "draining",
        "type": "Normal",
        "action": "Drain",
        "reportingController": "spillway.io/drain",
        "reportingInstance": "drain-1",
    }
    with pytest.raises(ApiException) as caught:
        events_v1.create_namespaced_event("default", {**strict, "metadata": {"name": "x" + long_name}})
    assert caught.value.status == 422
    body = error_body(caught.value)
    assert body["details"]["kind"] == "Event" and body["details"]["group"] == "events.k8s.io"
    assert [c["message"].rpartition(": ")[2] for c in body["details"]["causes"]] == [
        "must be no more than 253 characters"
    ]
    with pytest.raises(ApiException) as caught:
        events_v1.create_namespaced_event("default", {**strict, "metadata": {"name": "Drain.1"}})
    assert caught.value.status == 422
    assert "a lowercase RFC 1123 subdomain" in error_body(caught.value)["message"]
    events_v1.create_namespaced_event("default", {**strict, "metadata": {"name": "n" * 240 + ".1"}})


def test_an_event_with_an_event_time_is_held_to_what_a_new_event_must_say(
    client: ApiClient, core: CoreV1Api
) -> None:
    """legacyValidateEvent, for an Event that sets eventTime (through either API): its object need not
    share its namespace, but one about a cluster-scoped object sits in default or kube-system; it names
    its reporting controller (a qualified name) and instance, its action and reason, each of at most
    128 bytes, and its message at most 1024."""
    core.create_namespace({"metadata": {"name": "web"}})
    good = {
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "shop"},
        "reason": "Drain",
        "message": "m",
        "action": "Drain",
        "reportingComponent": "spillway.io/drain",
        "reportingInstance": "drain-1",
    }
    core.create_namespaced_event("web", {**good, "metadata": {"name": "p.1"}})  # any namespaced object's
    core.create_namespaced_event(
        "kube-system", {**good, "metadata": {"name": "n.1"}, "involvedObject": {"kind": "Node", "name": "n"}}
    )

    def refused(namespace: str, **change: Any) -> list[dict[str, Any]]:
        body = {**good, "metadata": {"name": "x.1"}, **change}
        with pytest.raises(ApiException) as caught:
            core.create_namespaced_event(namespace, {k: v for k, v in body.items() if v is not None})
        assert caught.value.status == 422
        causes: list[dict[str, Any]] = error_body(caught.value)["details"]["causes"]
        return causes

    assert refused("web", involvedObject={"kind": "Node", "name": "n"}) == [
        {"reason": "FieldValueInvalid", "message": 'Invalid value: "": does not match event.namespace',
         "field": "involvedObject.namespace"}
    ]  # fmt: skip
    causes = refused(
        "web", reportingComponent=None, reportingInstance=None, action="a" * 129, reason="é" * 65
    )
    assert [(c["field"], c["message"]) for c in causes] == [
        ("reportingController", "Required value"),
        ("reportingController", 'Invalid value: "": name part must be non-empty'),
        ("reportingController", 'Invalid value: "": name part must consist of alphanumeric characters, '
         "'-', '_' or '.', and must start and end with an alphanumeric character"),
        ("reportingInstance", "Required value"),
        ("action", 'Invalid value: "": can have at most 128 characters'),
        ("reason", 'Invalid value: "": can have at most 128 characters'),  # 130 bytes, as Go counts
    ]  # fmt: skip
    assert [c["field"] for c in refused("web", reportingComponent="a/b/c", message="m" * 1025)] == [
        "reportingController",
        "message",
    ]
    events_v1 = EventsV1Api(client)
    with pytest.raises(ApiException) as caught:
        events_v1.create_namespaced_event(
            "web",
            {"metadata": {"name": "v.1"}, "eventTime": good["eventTime"], "regarding": {"kind": "Pod", "name": "p", "namespace": "web"},
             "reason": "Drain", "type": "Normal", "action": "Drain", "reportingController": "spillway.io/drain"},
        )  # fmt: skip
    assert [c["field"] for c in error_body(caught.value)["details"]["causes"]] == ["reportingInstance"]


def test_default_namespaces_exist(core: CoreV1Api) -> None:
    names = {ns.metadata.name for ns in core.list_namespace().items}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names
    assert core.read_namespace("kube-system").status.phase == "Active"
    core.create_namespace({"metadata": {"name": "team-a", "labels": {"team": "a"}}})
    assert core.read_namespace("team-a").metadata.labels == {
        "team": "a",
        "kubernetes.io/metadata.name": "team-a",
    }


def test_storage_classes_are_cluster_scoped_and_default_their_binding_mode(client: ApiClient) -> None:
    """storage.k8s.io/v1 StorageClass through the official client: created without a binding mode or
    reclaim policy, it reads back ``Immediate`` and ``Delete`` (the API server's defaults); one given is
    kept; discovery lists the resource."""
    storage = StorageV1Api(client)
    storage.create_storage_class({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                  "metadata": {"name": "gp2"}, "provisioner": "ebs.csi.aws.com"})  # fmt: skip
    storage.create_storage_class({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                  "metadata": {"name": "gp3"}, "provisioner": "ebs.csi.aws.com",
                                  "volumeBindingMode": "WaitForFirstConsumer",
                                  "allowedTopologies": [{"matchLabelExpressions": [
                                      {"key": "topology.ebs.csi.aws.com/zone", "values": ["us-east-1a"]}]}]})  # fmt: skip

    by_name = {sc.metadata.name: sc for sc in storage.list_storage_class().items}

    assert (by_name["gp2"].volume_binding_mode, by_name["gp2"].reclaim_policy) == ("Immediate", "Delete")
    assert by_name["gp3"].volume_binding_mode == "WaitForFirstConsumer"
    assert by_name["gp3"].allowed_topologies[0].match_label_expressions[0].values == ["us-east-1a"]
    assert by_name["gp2"].metadata.namespace is None  # cluster-scoped
    resources = {r.name for r in storage.get_api_resources().resources}
    assert "storageclasses" in resources


def test_volume_attachments_are_cluster_scoped_their_status_written_through_the_subresource(
    client: ApiClient,
) -> None:
    """storage.k8s.io/v1 VolumeAttachment through the official client, as the attach/detach controller
    and the external attacher use it: the status a create sends is reset (``attached`` false, a field
    without omitempty), ``/status`` writes it, the spec may not change, and discovery lists the
    resource with its status subresource."""
    storage = StorageV1Api(client)
    body = {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "csi-abc"},
            "spec": {"attacher": "ebs.csi.aws.com", "nodeName": "node-a",
                     "source": {"persistentVolumeName": "pv-1"}},
            "status": {"attached": True}}  # fmt: skip
    storage.create_volume_attachment(body)

    created = storage.read_volume_attachment("csi-abc")
    storage.patch_volume_attachment_status("csi-abc", {"status": {"attached": True}})
    (listed,) = storage.list_volume_attachment().items
    with pytest.raises(ApiException) as refused:
        storage.patch_volume_attachment("csi-abc", {"spec": {"nodeName": "node-b"}})

    assert created.status.attached is False and created.metadata.namespace is None
    assert listed.status.attached is True and listed.spec.source.persistent_volume_name == "pv-1"
    assert refused.value.status == 422
    resources = {r.name for r in storage.get_api_resources().resources}
    assert {"volumeattachments", "volumeattachments/status"} <= resources


def test_a_required_token_refuses_others_with_401() -> None:
    with KubeApiServer(require_token="abc") as api:
        with api.api_client(token="wrong") as bad, pytest.raises(ApiException) as caught:
            CoreV1Api(bad).list_node()
        assert caught.value.status == 401
        assert error_body(caught.value)["reason"] == "Unauthorized"
        assert api.last_token == "wrong"
        with api.api_client() as good:
            assert CoreV1Api(good).list_node().items == []
        assert api.last_token == "abc"
        assert [r.status for r in api.requests] == [401, 200]


# --- custom resources and pod templates ------------------------------------------------------------

COSCHED = ("scheduling.x-k8s.io", "v1alpha1", "podgroups")
VOLCANO = ("scheduling.volcano.sh", "v1beta1", "podgroups")
UPSTREAM = ("scheduling.k8s.io", "v1alpha2", "podgroups")
WORKLOADS = ("scheduling.k8s.io", "v1alpha1", "workloads")
QUOTAS = ("autoscaling.x-k8s.io", "v1beta1", "capacityquotas")
PROVREQS = ("autoscaling.x-k8s.io", "v1", "provisioningrequests")
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"


@pytest.fixture
def custom(client: ApiClient) -> CustomObjectsApi:
    return CustomObjectsApi(client)


def podgroup(
    group: str, version: str, name: str, min_member: int, namespace: str = "default"
) -> dict[str, Any]:
    return {
        "apiVersion": f"{group}/{version}",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": min_member},
    }


def quota(name: str, cpu: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1beta1",
        "kind": "CapacityQuota",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"selector": {"matchLabels": {"team": name}}, "limits": {"resources": {"cpu": cpu}}},
    }


def provreq(name: str, cls: str = CHECK_CAPACITY) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"provisioningClassName": cls, "podSets": [{"podTemplateRef": {"name": "tpl"}, "count": 4}]},
    }


def test_three_kinds_named_podgroup_are_kept_apart(api: KubeApiServer, custom: CustomObjectsApi) -> None:
    for group, version, plural in (COSCHED, VOLCANO, UPSTREAM):
        body = podgroup(group, version, "gang", 2 if group == "scheduling.volcano.sh" else 3)
        custom.create_namespaced_custom_object(group, version, "default", plural, body)
    volcano = custom.get_namespaced_custom_object(*VOLCANO[:2], "default", "podgroups", "gang")
    assert volcano["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert volcano["spec"]["minMember"] == 2
    assert volcano["metadata"]["generation"] == 1
    custom.delete_namespaced_custom_object(*COSCHED[:2], "default", "podgroups", "gang")
    listed = custom.list_namespaced_custom_object(*UPSTREAM[:2], "default", "podgroups")
    assert [o["metadata"]["name"] for o in listed["items"]] == ["gang"]
    assert listed["kind"] == "PodGroupList"
    assert custom.list_cluster_custom_object(*COSCHED)["items"] == []
    assert api.get("podgroups.scheduling.volcano.sh", "gang") is not None
    with pytest.raises(KeyError, match="ambiguous"):
        api.get("PodGroup", "gang")


def test_discovery_lists_the_custom_resources(client: ApiClient) -> None:
    groups = {g.name: g for g in ApisApi(client).get_api_versions().groups}
    assert groups["autoscaling.x-k8s.io"].preferred_version.version == "v1"
    # CapacityBuffer's CRD serves v1alpha1 too (deprecated), beside v1beta1
    assert [v.version for v in groups["autoscaling.x-k8s.io"].versions] == ["v1", "v1beta1", "v1alpha1"]
    # PriorityClasses (v1) are served by every cluster, ahead of the alpha gang-scheduling versions
    assert [v.version for v in groups["scheduling.k8s.io"].versions] == ["v1", "v1alpha2", "v1alpha1"]
    assert groups["scheduling.k8s.io"].preferred_version.version == "v1"
    assert {"scheduling.x-k8s.io", "scheduling.volcano.sh"} <= set(groups)
    volcano = CustomObjectsApi(client).get_api_resources("scheduling.volcano.sh", "v1beta1")
    names = {r.name: r for r in volcano.resources}
    assert set(names) == {"podgroups"}  # Volcano's CRD has no status subresource
    assert names["podgroups"].short_names == ["pg", "podgroup-v1beta1"]
    quotas = CustomObjectsApi(client).get_api_resources("autoscaling.x-k8s.io", "v1beta1")
    assert {(r.name, r.namespaced) for r in quotas.resources} == {
        ("capacityquotas", False),
        ("capacityquotas/status", False),
        ("capacitybuffers", True),
        ("capacitybuffers/status", True),
        # ProvisioningRequest's CRD serves v1beta1 too (deprecated), beside v1
        ("provisioningrequests", True),
        ("provisioningrequests/status", True),
    }
    alpha = CustomObjectsApi(client).get_api_resources("autoscaling.x-k8s.io", "v1alpha1")
    assert {(r.name, r.namespaced) for r in alpha.resources} == {
        ("capacitybuffers", True),
        ("capacitybuffers/status", True),
    }
    core = {r.name for r in CoreV1Api(client).get_api_resources().resources}
    assert "podtemplates" in core
    apps = {r.name for r in CustomObjectsApi(client).get_api_resources("apps", "v1").resources}
    assert {"deployments", "statefulsets", "replicasets", "daemonsets"} <= apps


def test_status_subresource_of_a_custom_resource(custom: CustomObjectsApi) -> None:
    created = custom.create_cluster_custom_object(*QUOTAS, {**quota("ml", "64"), "status": {"used": {}}})
    assert "status" not in created or created["status"] in ({}, None)
    used = {"used": {"resources": {"cpu": "32", "nodes": "2"}}}
    after = custom.patch_cluster_custom_object_status(*QUOTAS, "ml", {"status": used, "spec": {"limits": {}}})
    assert after["status"] == used
    assert after["spec"]["limits"] == {"resources": {"cpu": "64"}}  # a status write leaves spec alone
    assert after["metadata"]["generation"] == 1
    # a main-resource write keeps status and bumps the generation
    spec = {"spec": {"limits": {"resources": {"cpu": "128"}}}, "status": {"used": {}}}
    changed = custom.patch_cluster_custom_object(*QUOTAS, "ml", spec)
    assert changed["status"] == used
    assert changed["spec"]["limits"]["resources"]["cpu"] == "128"
    assert changed["metadata"]["generation"] == 2
    assert custom.get_cluster_custom_object_status(*QUOTAS, "ml")["status"] == used


def test_volcano_podgroup_status_is_written_through_the_main_resource(custom: CustomObjectsApi) -> None:
    custom.create_namespaced_custom_object(
        *VOLCANO[:2], "default", "podgroups", podgroup(*VOLCANO[:2], "pg", 4)
    )
    patched = custom.patch_namespaced_custom_object(
        *VOLCANO[:2], "default", "podgroups", "pg", {"status": {"phase": "Inqueue"}}
    )
    assert patched["status"] == {"phase": "Inqueue"}
    with pytest.raises(ApiException) as caught:
        custom.patch_namespaced_custom_object_status(
            *VOLCANO[:2], "default", "podgroups", "pg", {"status": {"phase": "Running"}}
        )
    assert caught.value.status == 404


def test_json_patch_and_merge_patch_work_but_strategic_merge_patch_is_415(custom: CustomObjectsApi) -> None:
    args = (*COSCHED[:2], "default", "podgroups", "pg")
    custom.create_namespaced_custom_object(
        *COSCHED[:2], "default", "podgroups", podgroup(*COSCHED[:2], "pg", 2)
    )
    ops = [{"op": "replace", "path": "/spec/minMember", "value": 5}]
    # the v37 client sends merge-patch+json by default, even for a list: JSON patch must be named
    assert (
        custom.patch_namespaced_custom_object(*args, ops, _content_type=JSON_PATCH)["spec"]["minMember"] == 5
    )
    merged = custom.patch_namespaced_custom_object(
        *args, {"metadata": {"labels": {"a": "b"}}}, _content_type=MERGE
    )
    assert merged["metadata"]["labels"] == {"a": "b"}
    with pytest.raises(ApiException) as caught:
        custom.patch_namespaced_custom_object(*args, {"spec": {"minMember": 1}}, _content_type=SMP)
    assert caught.value.status == 415
    assert SMP not in error_body(caught.value)["message"]
    assert custom.get_namespaced_custom_object(*args)["spec"]["minMember"] == 5


def test_provisioning_class_name_is_immutable(custom: CustomObjectsApi) -> None:
    custom.create_namespaced_custom_object(*PROVREQS[:2], "default", "provisioningrequests", provreq("pr"))
    args = (*PROVREQS[:2], "default", "provisioningrequests", "pr")
    other = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    with pytest.raises(ApiException) as caught:
        custom.patch_namespaced_custom_object(*args, {"spec": {"provisioningClassName": other}})
    assert caught.value.status == 422
    body = error_body(caught.value)
    assert body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == "spec.provisioningClassName"
    assert 'Invalid value: "string": Value is immutable' in body["message"]  # CEL names the JSON type
    current = custom.get_namespaced_custom_object(*args)
    current["spec"]["provisioningClassName"] = other
    with pytest.raises(ApiException) as caught:
        custom.replace_namespaced_custom_object(*args, current)
    assert caught.value.status == 422
    # other fields and the status subresource may change
    status = {
        "conditions": [
            {
                "type": "Accepted",
                "status": "True",
                "reason": "Ok",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    custom.patch_namespaced_custom_object_status(*args, {"status": status})
    kept = custom.get_namespaced_custom_object(*args)
    assert kept["spec"]["provisioningClassName"] == CHECK_CAPACITY
    assert kept["status"] == status


# The published ProvisioningRequest CRD (kubernetes/autoscaler cluster-autoscaler/apis/config/crd/
# autoscaling.x-k8s.io_provisioningrequests.yaml): spec.podSets and spec.parameters carry the CEL rule
# `self == oldSelf` ("Value is immutable") as provisioningClassName does; the spec's schema (podSets 1..32,
# each with podTemplateRef.name and count >= 1, DNS-subdomain names, parameters limits) and the status's
# (metav1.Condition items in a list keyed by type, provisioningClassDetails limits) are enforced by the
# API server on every write. Kueue and Spillway rely on a request's pods never changing under a booking.
def one_pod_set(count: int = 1) -> list[dict[str, Any]]:
    return [{"podTemplateRef": {"name": "tpl"}, "count": count}]


def test_pod_sets_are_immutable(custom: CustomObjectsApi) -> None:
    custom.create_namespaced_custom_object(*PROVREQS[:2], "default", PROVREQS[2], provreq("pr"))
    args = (*PROVREQS[:2], "default", PROVREQS[2], "pr")
    ops = [{"op": "replace", "path": "/spec/podSets/0/count", "value": 8}]
    message = refused(lambda: custom.patch_namespaced_custom_object(*args, ops, _content_type=JSON_PATCH))
    assert message == (
        'ProvisioningRequest.autoscaling.x-k8s.io "pr" is invalid: spec.podSets: Invalid value: "array": '
        "Value is immutable"
    )
    assert custom.get_namespaced_custom_object(*args)["spec"]["podSets"][0]["count"] == 4


def test_parameters_are_immutable_once_set(custom: CustomObjectsApi) -> None:
    bare, valid = provreq("bare"), provreq("pr")
    valid["spec"]["parameters"] = {"ValidUntilSeconds": "60"}
    for body in (bare, valid):
        custom.create_namespaced_custom_object(*PROVREQS[:2], "default", PROVREQS[2], body)
    change = {"spec": {"parameters": {"ValidUntilSeconds": "999999"}}}
    message = refused(
        lambda: custom.patch_namespaced_custom_object(*PROVREQS[:2], "default", PROVREQS[2], "pr", change)
    )
    assert message.endswith('spec.parameters: Invalid value: "object": Value is immutable')
    # a transition rule is evaluated only where the old object holds the field: it may be set once
    added = custom.patch_namespaced_custom_object(*PROVREQS[:2], "default", PROVREQS[2], "bare", change)
    assert added["spec"]["parameters"] == {"ValidUntilSeconds": "999999"}


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param({"podSets": one_pod_set(0)}, "spec.podSets[0].count", id="count-minimum-1"),
        pytest.param({"podSets": one_pod_set() * 0}, "spec.podSets", id="podSets-minItems-1"),
        pytest.param({"podSets": one_pod_set() * 33}, "spec.podSets", id="podSets-maxItems-32"),
        pytest.param({"podSets": [{"count": 2}]}, "spec.podSets[0].podTemplateRef", id="podTemplateRef-required"),
        pytest.param({"podSets": [{"podTemplateRef": {"name": "t"}}]}, "spec.podSets[0].count", id="count-required"),
        pytest.param({"podSets": [{"podTemplateRef": {"name": "T_1"}, "count": 1}]},
                     "spec.podSets[0].podTemplateRef.name", id="template-name-pattern"),
        pytest.param({"podSets": [{"podTemplateRef": {"name": "t"}, "count": "2"}]}, "spec.podSets[0].count",
                     id="count-integer"),
        pytest.param({"podSets": None}, "spec.podSets", id="podSets-required"),
        pytest.param({"provisioningClassName": None}, "spec.provisioningClassName", id="class-required"),
        pytest.param({"provisioningClassName": "Check_Capacity"}, "spec.provisioningClassName",
                     id="class-pattern"),
        pytest.param({"provisioningClassName": "a" * 254}, "spec.provisioningClassName", id="class-maxLength"),
        pytest.param({"parameters": {f"p{i}": "x" for i in range(101)}}, "spec.parameters",
                     id="parameters-maxProperties-100"),
        pytest.param({"parameters": {"ValidUntilSeconds": "9" * 256}}, "spec.parameters.ValidUntilSeconds",
                     id="parameter-maxLength-255"),
    ],
)  # fmt: skip
def test_a_request_out_of_the_crd_schema_is_refused_naming_the_field(
    api: KubeApiServer, custom: CustomObjectsApi, spec: dict[str, Any], field: str
) -> None:
    body = provreq("pr")
    body["spec"] = {k: v for k, v in {**body["spec"], **spec}.items() if v is not None}
    message = refused(
        lambda: custom.create_namespaced_custom_object(*PROVREQS[:2], "default", PROVREQS[2], body)
    )
    assert names_first(message, 'ProvisioningRequest.autoscaling.x-k8s.io "pr"', field), message
    with pytest.raises(KubeApiError):  # a fixture added in-process too: the API never holds it
        api.add(body)
    custom.create_namespaced_custom_object(*PROVREQS[:2], "default", PROVREQS[2], provreq("ok"))
    patch = [{"op": "replace", "path": "/spec", "value": body["spec"]}]
    message = refused(
        lambda: custom.patch_namespaced_custom_object(
            *PROVREQS[:2], "default", PROVREQS[2], "ok", patch, _content_type=JSON_PATCH
        )
    )
    assert names_first(message, 'ProvisioningRequest.autoscaling.x-k8s.io "ok"', field), message


GOOD_CONDITION = {"type": "Provisioned", "status": "True", "reason": "CapacityIsFound", "message": "",
                  "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}  # fmt: skip


def _without(key: str) -> dict[str, Any]:
    return {k: v for k, v in GOOD_CONDITION.items() if k != key}


@pytest.mark.parametrize(
    ("status", "field"),
    [
        pytest.param({"conditions": [{**GOOD_CONDITION, "status": "Yes"}]}, "status.conditions[0].status",
                     id="status-enum"),
        pytest.param({"conditions": [{**GOOD_CONDITION, "reason": ""}]}, "status.conditions[0].reason",
                     id="reason-minLength-1"),
        pytest.param({"conditions": [{**GOOD_CONDITION, "reason": "Capacity found"}]},
                     "status.conditions[0].reason", id="reason-pattern"),
        pytest.param({"conditions": [_without("lastTransitionTime")]}, "status.conditions[0].lastTransitionTime",
                     id="lastTransitionTime-required"),
        pytest.param({"conditions": [{**GOOD_CONDITION, "lastTransitionTime": "yesterday"}]},
                     "status.conditions[0].lastTransitionTime", id="lastTransitionTime-date-time"),
        pytest.param({"conditions": [_without("message")]}, "status.conditions[0].message",
                     id="message-required"),
        pytest.param({"conditions": [{**GOOD_CONDITION, "observedGeneration": -1}]},
                     "status.conditions[0].observedGeneration", id="observedGeneration-minimum-0"),
        pytest.param({"conditions": [GOOD_CONDITION, {**GOOD_CONDITION, "status": "False"}]},
                     "status.conditions[1]", id="list-map-key-type-duplicated"),
        pytest.param({"provisioningClassDetails": {f"k{i}": "v" for i in range(65)}},
                     "status.provisioningClassDetails", id="details-maxProperties-64"),
        pytest.param({"provisioningClassDetails": {"k": 3}}, "status.provisioningClassDetails.k",
                     id="details-strings"),
    ],
)  # fmt: skip
def test_a_status_out_of_the_crd_schema_is_refused_naming_the_field(
    custom: CustomObjectsApi, status: dict[str, Any], field: str
) -> None:
    """A malformed condition written by the plan function (act/planning.py write_provisioning) is refused
    here as a real cluster refuses it, not stored."""
    args = (*PROVREQS[:2], "default", PROVREQS[2], "pr")
    custom.create_namespaced_custom_object(*PROVREQS[:2], "default", PROVREQS[2], provreq("pr"))
    message = refused(lambda: custom.patch_namespaced_custom_object_status(*args, {"status": status}))
    assert names_first(message, 'ProvisioningRequest.autoscaling.x-k8s.io "pr"', field), message
    assert "status" not in custom.get_namespaced_custom_object(*args)
    good = {"conditions": [GOOD_CONDITION, {**GOOD_CONDITION, "type": "Accepted", "reason": "Accepted"}],
            "provisioningClassDetails": {"NodeSelectorKey": "spillway.io/provisioning-request"}}  # fmt: skip
    assert custom.patch_namespaced_custom_object_status(*args, {"status": good})["status"] == good


# The CRDs' published validation (kubernetes/autoscaler cluster-autoscaler/apis, kubebuilder markers):
# CapacityQuota v1beta1 spec.limits.resources "All resource quantities must be non-negative integers."
# (its doc lists "32Gi", "2k", "10" as allowed and "3.67Gi", "500m", "0.3" and even "1000m" as invalid);
# CapacityBuffer v1beta1 spec: a podTemplateRef needs replicas or limits, not both refs, replicas and
# percentage >= 0, refs' names non-empty, provisioningStrategy defaulted on create.
BUFFERS = ("autoscaling.x-k8s.io", "v1beta1", "capacitybuffers")


def capacity_buffer(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}  # fmt: skip


def refused(call: Any) -> str:
    with pytest.raises(ApiException) as caught:
        call()
    assert caught.value.status == 422, caught.value.body
    return str(json.loads(caught.value.body)["message"])


def names_first(message: str, object_: str, field: str) -> bool:
    """Whether a 422's message (``<Kind.group> "<name>" is invalid: `` then one error, or several in
    brackets, as errors.NewInvalid aggregates them) names ``field`` first."""
    return any(message.startswith(f"{object_} is invalid: {opening}{field}: ") for opening in ("", "["))


@pytest.mark.parametrize("value", ["500m", "1000m", "0.3", "3.67Gi", "2.0", "-1", -1])
def test_a_quota_limit_that_is_no_non_negative_integer_is_refused(
    custom: CustomObjectsApi, value: Any
) -> None:
    body = quota("q", "1")
    body["spec"]["limits"]["resources"]["cpu"] = value
    message = refused(lambda: custom.create_cluster_custom_object(*QUOTAS, body))
    assert message == (
        'CapacityQuota.autoscaling.x-k8s.io "q" is invalid: spec.limits.resources: Invalid value: "object": '
        "All resource quantities must be non-negative integers."
    )


@pytest.mark.parametrize("value", ["32Gi", "2k", "1.5k", "10", 10, "0"])
def test_a_quota_limit_that_is_a_non_negative_integer_is_kept(custom: CustomObjectsApi, value: Any) -> None:
    body = quota("q", "1")
    body["spec"]["limits"]["resources"]["memory"] = value
    made = custom.create_cluster_custom_object(*QUOTAS, body)
    assert made["spec"]["limits"]["resources"]["memory"] == value


def test_a_quota_needs_its_limits_and_refuses_a_patch_that_breaks_them(custom: CustomObjectsApi) -> None:
    bare = {"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityQuota", "metadata": {"name": "q"},
            "spec": {}}  # fmt: skip
    message = refused(lambda: custom.create_cluster_custom_object(*QUOTAS, bare))
    assert names_first(message, 'CapacityQuota.autoscaling.x-k8s.io "q"', "spec.limits"), message
    assert "spec.limits: Required value" in message
    custom.create_cluster_custom_object(*QUOTAS, quota("q", "8"))
    patch = {"spec": {"limits": {"resources": {"cpu": "lots"}}}}
    message = refused(lambda: custom.patch_cluster_custom_object(*QUOTAS, "q", patch))
    assert names_first(message, 'CapacityQuota.autoscaling.x-k8s.io "q"', "spec.limits.resources.cpu"), (
        message
    )
    assert custom.get_cluster_custom_object(*QUOTAS, "q")["spec"]["limits"]["resources"]["cpu"] == "8"


def test_a_request_and_a_quota_keep_only_the_fields_their_crds_declare(custom: CustomObjectsApi) -> None:
    """Both CRDs are structural without x-kubernetes-preserve-unknown-fields, as CapacityBuffer's is:
    the server prunes what their schemas do not declare, on every write, a /status write too; the
    emulator pruned buffers only and kept the rest."""
    body = provreq("pr")
    body["spec"]["podSets"][0]["podTemplateRef"]["namespace"] = "elsewhere"
    body["spec"]["priority"] = 5
    made = custom.create_namespaced_custom_object(*PROVREQS[:2], "default", PROVREQS[2], body)
    assert made["spec"] == provreq("pr")["spec"]
    status = {"conditions": [{**GOOD_CONDITION, "extra": "x"}], "bookedNodes": ["n1"],
              "provisioningClassDetails": {"any-key": "kept"}}  # fmt: skip
    written = custom.patch_namespaced_custom_object_status(
        *PROVREQS[:2], "default", PROVREQS[2], "pr", {"status": status}
    )
    assert written["status"] == {
        "conditions": [GOOD_CONDITION],
        "provisioningClassDetails": {"any-key": "kept"},
    }
    body = quota("q", "8")
    body["spec"]["selector"]["matchExpressions"] = [{"key": "gpu", "operator": "Exists", "note": "x"}]
    body["spec"]["limits"]["burst"] = {"cpu": "16"}
    made = custom.create_cluster_custom_object(*QUOTAS, body)
    assert made["spec"] == {
        "selector": {
            "matchLabels": {"team": "q"},
            "matchExpressions": [{"key": "gpu", "operator": "Exists"}],
        },
        "limits": {"resources": {"cpu": "8"}},
    }
    used = {"used": {"resources": {"cpu": "4"}, "byNode": {"n1": "4"}}, "observedGeneration": 1, "note": "x"}
    written = custom.patch_cluster_custom_object_status(*QUOTAS, "q", {"status": used})
    assert written["status"] == {"used": {"resources": {"cpu": "4"}}, "observedGeneration": 1}


@pytest.mark.parametrize(
    ("status", "field"),
    [
        ({"used": {"resources": {"cpu": "lots"}}}, "status.used.resources.cpu"),
        ({"used": {}}, "status.used.resources"),
        ({"conditions": [{"type": "cluster-autoscaler.kubernetes.io/valid", "status": "True"}]},
         "status.conditions[0].lastTransitionTime"),
    ],
)  # fmt: skip
def test_a_quota_status_out_of_its_crds_schema_is_refused(
    custom: CustomObjectsApi, status: dict[str, Any], field: str
) -> None:
    custom.create_cluster_custom_object(*QUOTAS, quota("q", "8"))
    message = refused(lambda: custom.patch_cluster_custom_object_status(*QUOTAS, "q", {"status": status}))
    assert names_first(message, 'CapacityQuota.autoscaling.x-k8s.io "q"', field), message


def test_a_string_is_as_long_as_its_characters_not_its_bytes(custom: CustomObjectsApi) -> None:
    """kube-openapi's maxLength counts runes: a 32768-character message of two-byte characters is kept
    (the buffer's walker counted UTF-8 bytes and refused it), one more character is too long."""
    custom.create_namespaced_custom_object(
        *BUFFERS[:2], "default", BUFFERS[2], capacity_buffer("b", podTemplateRef={"name": "web"}, replicas=1)
    )
    args = (*BUFFERS[:2], "default", BUFFERS[2], "b")
    longest = {"conditions": [condition(message="é" * 32768)]}
    assert custom.patch_namespaced_custom_object_status(*args, {"status": longest})["status"] == longest
    message = refused(
        lambda: custom.patch_namespaced_custom_object_status(
            *args, {"status": {"conditions": [condition(message="é" * 32769)]}}
        )
    )
    assert "status.conditions[0].message: Too long: may not be more than 32768 bytes" in message


def test_a_buffer_naming_both_a_pod_template_and_a_scalable_object_is_refused(
    custom: CustomObjectsApi,
) -> None:
    body = capacity_buffer("both", podTemplateRef={"name": "web"}, replicas=1,
                           scalableRef={"apiGroup": "apps", "kind": "Deployment", "name": "web"})  # fmt: skip
    message = refused(
        lambda: custom.create_namespaced_custom_object(*BUFFERS[:2], "default", BUFFERS[2], body)
    )
    assert message == (
        'CapacityBuffer.autoscaling.x-k8s.io "both" is invalid: spec: Invalid value: "object": '
        "You must define either PodTemplateRef or ScalableRef, but not both"
    )


@pytest.mark.parametrize(
    ("spec", "accepted"),
    [
        ({"podTemplateRef": {"name": "web"}}, False),
        ({"podTemplateRef": {"name": "web"}, "percentage": 20}, False),
        ({"podTemplateRef": {"name": "web"}, "replicas": 0}, True),
        ({"podTemplateRef": {"name": "web"}, "limits": {"cpu": "4"}}, True),
        ({"scalableRef": {"kind": "Deployment", "name": "web"}}, True),  # the rule asks nothing of it
    ],
)
def test_a_pod_template_buffer_needs_replicas_or_limits(
    custom: CustomObjectsApi, spec: dict[str, Any], accepted: bool
) -> None:
    def create() -> Any:
        return custom.create_namespaced_custom_object(
            *BUFFERS[:2], "default", BUFFERS[2], capacity_buffer("b", **spec)
        )

    if accepted:
        create()
    else:
        assert refused(create).endswith(
            'spec: Invalid value: "object": If X is set, replicas or limits must also be set'
        )


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"podTemplateRef": {"name": "web"}, "replicas": -1}, "spec.replicas"),
        ({"scalableRef": {"kind": "Deployment", "name": "web"}, "percentage": -5}, "spec.percentage"),
        ({"podTemplateRef": {"name": ""}, "replicas": 1}, "spec.podTemplateRef.name"),
        ({"scalableRef": {"name": "web"}, "replicas": 1}, "spec.scalableRef.kind"),
        ({"podTemplateRef": {"name": "web"}, "replicas": "two"}, "spec.replicas"),
        ({"podTemplateRef": {"name": "web"}, "limits": {"cpu": "lots"}}, "spec.limits.cpu"),
    ],
)
def test_a_buffer_field_out_of_its_schema_is_refused_naming_it(
    custom: CustomObjectsApi, spec: dict[str, Any], field: str
) -> None:
    body = capacity_buffer("b", **spec)
    message = refused(
        lambda: custom.create_namespaced_custom_object(*BUFFERS[:2], "default", BUFFERS[2], body)
    )
    assert names_first(message, 'CapacityBuffer.autoscaling.x-k8s.io "b"', field), message


@pytest.mark.parametrize(("sent", "kept"), [(1.0, 1), (3e0, 3), (0.0, 0)])
def test_a_buffer_takes_a_whole_float_as_an_integer_and_stores_the_integer(
    custom: CustomObjectsApi, sent: float, kept: int
) -> None:
    """JSON ``1.0`` decodes to a float64 in an unstructured object, and kube-openapi's type validator
    takes a float that is a JSON integer (swag IsFloat64AJSONInteger: whole, within 2^53 - 1) for
    ``type: integer`` (pkg/validation/validate/type.go, ``isFloatInt``); Go's encoder writes it back
    as ``1``. A fraction stays refused."""
    body = capacity_buffer("b", podTemplateRef={"name": "web"}, replicas=sent)
    made = custom.create_namespaced_custom_object(*BUFFERS[:2], "default", BUFFERS[2], body)
    assert made["spec"]["replicas"] == kept and isinstance(made["spec"]["replicas"], int)
    got = custom.get_namespaced_custom_object(*BUFFERS[:2], "default", BUFFERS[2], "b")
    assert isinstance(got["spec"]["replicas"], int)
    half = capacity_buffer("h", podTemplateRef={"name": "web"}, replicas=1.5)
    message = refused(
        lambda: custom.create_namespaced_custom_object(*BUFFERS[:2], "default", BUFFERS[2], half)
    )
    assert 'spec.replicas: Invalid value: "number": spec.replicas in body must be of type integer' in message


def test_a_buffer_gets_the_default_provisioning_strategy(
    api: KubeApiServer, custom: CustomObjectsApi
) -> None:
    made = custom.create_namespaced_custom_object(
        *BUFFERS[:2], "default", BUFFERS[2], capacity_buffer("d", podTemplateRef={"name": "web"}, replicas=1)
    )
    assert made["spec"]["provisioningStrategy"] == "buffer.x-k8s.io/active-capacity"
    other = capacity_buffer(
        "o", podTemplateRef={"name": "web"}, replicas=1, provisioningStrategy="example.com/x"
    )
    assert (
        custom.create_namespaced_custom_object(*BUFFERS[:2], "default", BUFFERS[2], other)["spec"][
            "provisioningStrategy"
        ]
        == "example.com/x"
    )
    # a fixture added in-process is defaulted and validated too: the API never holds anything else
    added = api.add(capacity_buffer("a", podTemplateRef={"name": "web"}, limits={"cpu": "2"}))
    assert added["spec"]["provisioningStrategy"] == "buffer.x-k8s.io/active-capacity"
    with pytest.raises(KubeApiError):
        api.add(capacity_buffer("bad", podTemplateRef={"name": "web"}))


# The CapacityBuffer CRD's status schema (kubernetes/autoscaler cluster-autoscaler/apis/config/crd/
# autoscaling.x-k8s.io_capacitybuffers.yaml): status.replicas int32; conditions[] metav1.Condition
# (lastTransitionTime, message, reason, status and type required, status one of True/False/Unknown,
# reason ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$, a map list keyed by type); status.podTemplateRef
# needs its name. A real server validates the whole object on a /status write too.
READY = "ReadyForProvisioning"
STAMP = "2026-01-01T00:00:00Z"


def condition(**fields: Any) -> dict[str, Any]:
    return {
        "type": READY,
        "status": "True",
        "reason": "R",
        "message": "",
        "lastTransitionTime": STAMP,
        **fields,
    }


@pytest.mark.parametrize(
    ("status", "field"),
    [
        ({"replicas": "three"}, "status.replicas"),
        ({"conditions": [condition(status="Maybe")]}, "status.conditions[0].status"),
        # the rest required: each field missing is named, in the schema's order
        ({"conditions": [{"type": READY, "status": "True"}]}, "status.conditions[0].lastTransitionTime"),
        ({"conditions": [condition(reason="not camel case")]}, "status.conditions[0].reason"),
        ({"conditions": [condition(reason="")]}, "status.conditions[0].reason"),
        ({"conditions": [condition(lastTransitionTime="yesterday")]}, "status.conditions[0].lastTransitionTime"),
        ({"conditions": [condition(observedGeneration=-1)]}, "status.conditions[0].observedGeneration"),
        ({"conditions": [condition(), condition(status="False")]}, "status.conditions[1]"),  # one per type
        ({"podTemplateRef": {}}, "status.podTemplateRef.name"),
        ({"podTemplateGeneration": 1.5}, "status.podTemplateGeneration"),
    ],
)  # fmt: skip
def test_a_buffer_status_write_outside_the_crds_status_schema_is_refused_naming_the_field(
    api: KubeApiServer, custom: CustomObjectsApi, status: dict[str, Any], field: str
) -> None:
    """Only the spec was checked: a /status write was stored whatever it held, so Spillway's own status
    writes were tested against a server accepting what a cluster answers 422 to (review r21)."""
    custom.create_namespaced_custom_object(
        *BUFFERS[:2], "default", BUFFERS[2], capacity_buffer("b", podTemplateRef={"name": "web"}, replicas=1)
    )
    message = refused(
        lambda: custom.patch_namespaced_custom_object_status(
            *BUFFERS[:2], "default", BUFFERS[2], "b", {"status": status}
        )
    )
    assert names_first(message, 'CapacityBuffer.autoscaling.x-k8s.io "b"', field), message
    assert "status" not in custom.get_namespaced_custom_object(*BUFFERS[:2], "default", BUFFERS[2], "b")
    with pytest.raises(KubeApiError):  # nor can a fixture hold it
        api.add({**capacity_buffer("seeded", podTemplateRef={"name": "web"}, replicas=1), "status": status})


def test_a_buffer_status_as_the_controllers_write_it_is_kept(custom: CustomObjectsApi) -> None:
    custom.create_namespaced_custom_object(
        *BUFFERS[:2], "default", BUFFERS[2], capacity_buffer("b", podTemplateRef={"name": "web"}, replicas=1)
    )
    status = {
        "podTemplateRef": {"name": "web"},
        "replicas": 1,
        "podTemplateGeneration": 3,
        "provisioningStrategy": "buffer.x-k8s.io/active-capacity",
        "conditions": [
            condition(reason="AttributesSetSuccessfully", message="ready", observedGeneration=1),
            condition(type="Provisioning", status="False", reason="BufferIsEmpty", lastTransitionTime="2026-01-01T00:00:00.5+01:00"),
            condition(type="example.com/Audited", status="Unknown", reason="Pending"),
        ],
    }  # fmt: skip
    written = custom.patch_namespaced_custom_object_status(
        *BUFFERS[:2], "default", BUFFERS[2], "b", {"status": status}
    )
    assert written["status"] == status


def test_a_buffer_keeps_only_the_fields_its_crd_declares(custom: CustomObjectsApi) -> None:
    """The CRD is structural without x-kubernetes-preserve-unknown-fields: the server prunes what its
    schema does not declare, on every write (https://kubernetes.io/docs/tasks/extend-kubernetes/
    custom-resources/custom-resource-definitions/#field-pruning). The emulator kept a spec.windows copied
    from Spillway's configured buffers, which a cluster drops (review r21)."""
    body = capacity_buffer(
        "b",
        podTemplateRef={"name": "web", "namespace": "elsewhere"},
        replicas=1,
        limits={"cpu": "4", "example.com/widget": "2"},  # a resource map: any name is declared
        windows=[{"start": "08:00", "end": "20:00"}],
    )
    body["extra"] = {"a": 1}
    made = custom.create_namespaced_custom_object(*BUFFERS[:2], "default", BUFFERS[2], body)
    assert "extra" not in made
    assert made["spec"] == {
        "provisioningStrategy": "buffer.x-k8s.io/active-capacity",
        "podTemplateRef": {"name": "web"},
        "replicas": 1,
        "limits": {"cpu": "4", "example.com/widget": "2"},
    }
    # a patch and a status write are pruned alike; a null is no value (the field is not nullable)
    patched = custom.patch_namespaced_custom_object(
        *BUFFERS[:2], "default", BUFFERS[2], "b", {"spec": {"windows": [], "percentage": 10}}
    )
    assert "windows" not in patched["spec"] and patched["spec"]["percentage"] == 10
    status = {"replicas": 1, "note": "x", "conditions": [condition(extra="x")]}
    written = custom.patch_namespaced_custom_object_status(
        *BUFFERS[:2], "default", BUFFERS[2], "b", {"status": status}
    )
    assert written["status"] == {"replicas": 1, "conditions": [condition()]}
    replaced = custom.replace_namespaced_custom_object(
        *BUFFERS[:2],
        "default",
        BUFFERS[2],
        "b",
        {**written, "spec": {**written["spec"], "scalableRef": None}},
    )
    assert "scalableRef" not in replaced["spec"]


ALPHA_BUFFERS = ("autoscaling.x-k8s.io", "v1alpha1", "capacitybuffers")


def only_the_deprecated_version_warns(
    custom: CustomObjectsApi,
    deprecated: tuple[str, str, str],
    current: tuple[str, str, str],
    name: str,
    warning: str,
) -> None:
    """Every answer through the ``deprecated`` version carries ``warning`` (a read, and an error: a 404);
    none through the ``current`` one."""
    _, _, headers = custom.get_namespaced_custom_object_with_http_info(
        *deprecated[:2], "default", deprecated[2], name
    )
    assert headers.get("Warning") == warning
    _, _, headers = custom.get_namespaced_custom_object_with_http_info(
        *current[:2], "default", current[2], name
    )
    assert "Warning" not in headers
    with pytest.raises(ApiException) as caught:
        custom.get_namespaced_custom_object(*deprecated[:2], "default", deprecated[2], "nope")
    assert caught.value.status == 404 and caught.value.headers.get("Warning") == warning


def test_buffers_are_served_as_v1alpha1_too_deprecated(client: ApiClient, custom: CustomObjectsApi) -> None:
    """The published CRD serves v1alpha1 (``deprecated: true``) beside v1beta1 (the storage version),
    one schema, conversion None: the same objects through either version, only apiVersion differing.
    The emulator answered 404 for v1alpha1, so observe's fallback to it and tools still on it could
    not be exercised (review r21)."""
    custom.create_namespaced_custom_object(
        *BUFFERS[:2], "default", BUFFERS[2], capacity_buffer("b", podTemplateRef={"name": "web"}, replicas=1)
    )
    listed = custom.list_namespaced_custom_object(*ALPHA_BUFFERS[:2], "default", ALPHA_BUFFERS[2])
    assert listed["apiVersion"] == "autoscaling.x-k8s.io/v1alpha1"
    assert [(i["metadata"]["name"], i["apiVersion"]) for i in listed["items"]] == [
        ("b", "autoscaling.x-k8s.io/v1alpha1")
    ]
    # written through v1alpha1 (its status too), read through v1beta1
    alpha = {**capacity_buffer("a", podTemplateRef={"name": "web"}, limits={"cpu": "2"}),
             "apiVersion": "autoscaling.x-k8s.io/v1alpha1"}  # fmt: skip
    made = custom.create_namespaced_custom_object(*ALPHA_BUFFERS[:2], "default", ALPHA_BUFFERS[2], alpha)
    assert made["apiVersion"] == "autoscaling.x-k8s.io/v1alpha1"
    custom.patch_namespaced_custom_object_status(
        *ALPHA_BUFFERS[:2], "default", ALPHA_BUFFERS[2], "a", {"status": {"replicas": 1}}
    )
    beta = custom.get_namespaced_custom_object(*BUFFERS[:2], "default", BUFFERS[2], "a")
    assert (beta["apiVersion"], beta["status"], beta["spec"]["limits"]) == (
        "autoscaling.x-k8s.io/v1beta1",
        {"replicas": 1},
        {"cpu": "2"},
    )
    # every answer through the deprecated version carries its warning, errors too
    warning = '299 - "autoscaling.x-k8s.io/v1alpha1 CapacityBuffer is deprecated; use autoscaling.x-k8s.io/v1beta1 CapacityBuffer"'
    only_the_deprecated_version_warns(custom, ALPHA_BUFFERS, BUFFERS, "a", warning)
    # v1alpha1's CEL rule kept its first message
    both = {
        **alpha,
        "metadata": {"name": "both"},
        "spec": {**alpha["spec"], "scalableRef": {"kind": "Deployment", "name": "web"}},
    }
    assert refused(
        lambda: custom.create_namespaced_custom_object(*ALPHA_BUFFERS[:2], "default", ALPHA_BUFFERS[2], both)
    ).endswith('spec: Invalid value: "object": You must define both PodTemplateRef and ScalableRef')


def test_custom_resources_page_and_select_by_label(custom: CustomObjectsApi) -> None:
    for i in range(5):
        custom.create_cluster_custom_object(
            *QUOTAS, quota(f"q{i}", "8", {"tier": "gold" if i % 2 else "silver"})
        )
    page = custom.list_cluster_custom_object(*QUOTAS, limit=2)
    names = [o["metadata"]["name"] for o in page["items"]]
    while page["metadata"].get("continue"):
        page = custom.list_cluster_custom_object(*QUOTAS, limit=2, _continue=page["metadata"]["continue"])
        names += [o["metadata"]["name"] for o in page["items"]]
    assert names == ["q0", "q1", "q2", "q3", "q4"]
    gold = custom.list_cluster_custom_object(*QUOTAS, label_selector="tier=gold")
    assert [o["metadata"]["name"] for o in gold["items"]] == ["q1", "q3"]
    one = custom.list_cluster_custom_object(*QUOTAS, field_selector="metadata.name=q2")
    assert [o["metadata"]["name"] for o in one["items"]] == ["q2"]


def test_pod_templates(core: CoreV1Api) -> None:
    template = {
        "metadata": {"name": "tpl", "namespace": "default"},
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "trainer",
                        "resources": {"requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}},
                    }
                ]
            }
        },
    }
    core.create_namespaced_pod_template("default", template)
    read = core.read_namespaced_pod_template("tpl", "default")
    assert read.template.spec.containers[0].resources.requests == {"nvidia.com/gpu": "8"}
    assert [t.metadata.name for t in core.list_pod_template_for_all_namespaces().items] == ["tpl"]
    patch = {"template": {"spec": {"containers": [{"name": "main", "image": "trainer:2"}]}}}
    patched = core.patch_namespaced_pod_template("tpl", "default", patch)  # strategic: merged by name
    assert patched.template.spec.containers[0].image == "trainer:2"
    assert patched.template.spec.containers[0].resources.requests == {"nvidia.com/gpu": "8"}


def test_resource_quotas_keep_the_status_the_quota_controller_writes(core: CoreV1Api) -> None:
    """As on a real server: spec through the main resource, status.hard/used only through /status
    (no quota controller runs here: the status is stored as written, not computed)."""
    quota = {
        "metadata": {"name": "compute", "namespace": "default"},
        "spec": {
            "hard": {"requests.cpu": "10", "requests.nvidia.com/gpu": "4"},
            "scopeSelector": {
                "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]
            },
        },
    }
    core.create_namespaced_resource_quota("default", quota)
    status = {"status": {"hard": {"requests.cpu": "10"}, "used": {"requests.cpu": "3500m"}}}
    core.patch_namespaced_resource_quota_status("compute", "default", status)
    main = {"spec": {"hard": {"requests.cpu": "12"}}, "status": {"used": {"requests.cpu": "99"}}}
    core.patch_namespaced_resource_quota("compute", "default", main)  # its status part is ignored
    read = core.read_namespaced_resource_quota("compute", "default")
    assert read.spec.hard == {"requests.cpu": "12", "requests.nvidia.com/gpu": "4"}
    assert read.spec.scope_selector.match_expressions[0].values == ["high"]
    assert (read.status.hard, read.status.used) == ({"requests.cpu": "10"}, {"requests.cpu": "3500m"})
    assert [q.metadata.name for q in core.list_resource_quota_for_all_namespaces().items] == ["compute"]


def test_a_resource_quota_created_with_a_status_starts_without_it(core: CoreV1Api) -> None:
    """The ResourceQuota strategy clears the status a create carries: only the quota controller, through
    /status, says what is used (a client cannot create a quota that claims room is free)."""
    quota = {
        "metadata": {"name": "claims", "namespace": "default"},
        "spec": {"hard": {"requests.cpu": "10"}},
        "status": {"hard": {"requests.cpu": "10"}, "used": {"requests.cpu": "0"}},
    }
    core.create_namespaced_resource_quota("default", quota)
    read = core.read_namespaced_resource_quota("claims", "default")
    assert read.spec.hard == {"requests.cpu": "10"}
    assert read.status is None or (read.status.hard, read.status.used) == (None, None)


def test_a_crd_not_installed_answers_404_and_leaves_discovery() -> None:
    only_quotas = ["capacityquotas.autoscaling.x-k8s.io"]
    with KubeApiServer(optional_resources=only_quotas) as server, server.api_client() as c:
        custom = CustomObjectsApi(c)
        assert custom.list_cluster_custom_object(*QUOTAS)["items"] == []
        with pytest.raises(ApiException) as caught:
            custom.list_namespaced_custom_object(*VOLCANO[:2], "default", "podgroups")
        assert caught.value.status == 404
        groups = {g.name: g for g in ApisApi(c).get_api_versions().groups}
        assert "scheduling.volcano.sh" not in groups
        assert [v.version for v in groups["autoscaling.x-k8s.io"].versions] == ["v1beta1"]
        server.optional_resources = None  # installing the rest while serving
        assert custom.list_namespaced_custom_object(*VOLCANO[:2], "default", "podgroups")["items"] == []
    with pytest.raises(ValueError, match="unknown optional"):
        KubeApiServer(optional_resources=["podgroups.example.com"])


# --- status on create: what each kind's registry strategy (PrepareForCreate) leaves --------------


def _send(
    api: KubeApiServer, method: str, path: str, body: dict[str, Any], content_type: str
) -> dict[str, Any]:
    """A request over the wire, the body exactly as sent (no client model drops or reshapes a field)."""
    request = urllib.request.Request(
        api.url + path, data=json.dumps(body).encode(), headers={"Content-Type": content_type}, method=method
    )
    with urllib.request.urlopen(request) as answer:
        out: dict[str, Any] = json.loads(answer.read())
    return out


def _post(api: KubeApiServer, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """A create over the wire, exactly as sent (the status too)."""
    return _send(api, "POST", path, body, "application/json")


_TEMPLATE = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "main", "image": "busybox"}]},
}
_WORKLOAD_SPEC = {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": _TEMPLATE}
_WORKLOAD_STATUS = {"replicas": 3, "readyReplicas": 3, "availableReplicas": 3, "observedGeneration": 1}

# (path, body without metadata, the status the create sends, the status the created object has)
_CREATE_STATUS_CASES = {
    "Deployment": ("/apis/apps/v1/namespaces/default/deployments", _WORKLOAD_SPEC, _WORKLOAD_STATUS, {}),
    # the status fields without omitempty in their Go types are written as 0 (apps/v1 types.go)
    "StatefulSet": (
        "/apis/apps/v1/namespaces/default/statefulsets",
        {**_WORKLOAD_SPEC, "serviceName": "web"},
        _WORKLOAD_STATUS,
        {"replicas": 0, "availableReplicas": 0},
    ),
    "ReplicaSet": (
        "/apis/apps/v1/namespaces/default/replicasets",
        _WORKLOAD_SPEC,
        _WORKLOAD_STATUS,
        {"replicas": 0},
    ),
    "DaemonSet": (
        "/apis/apps/v1/namespaces/default/daemonsets",
        {"selector": {"matchLabels": {"app": "web"}}, "template": _TEMPLATE},
        {"currentNumberScheduled": 3, "desiredNumberScheduled": 3, "numberMisscheduled": 0, "numberReady": 3},
        {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0},
    ),
    "ReplicationController": (
        "/api/v1/namespaces/default/replicationcontrollers",
        {"replicas": 3, "selector": {"app": "web"}, "template": _TEMPLATE},
        _WORKLOAD_STATUS,
        {"replicas": 0},
    ),
    "Job": (
        "/apis/batch/v1/namespaces/default/jobs",
        {"template": {**_TEMPLATE, "spec": {**_TEMPLATE["spec"], "restartPolicy": "Never"}}},
        {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]},
        {},
    ),
    "ResourceQuota": (
        "/api/v1/namespaces/default/resourcequotas",
        {"hard": {"requests.cpu": "10"}},
        {"hard": {"requests.cpu": "10"}, "used": {"requests.cpu": "0"}},
        {},
    ),
    "PersistentVolumeClaim": (
        "/api/v1/namespaces/default/persistentvolumeclaims",
        {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        {"phase": "Bound", "capacity": {"storage": "1Gi"}},
        {"phase": "Pending"},
    ),
    "Pod": (
        "/api/v1/namespaces/default/pods",
        _TEMPLATE["spec"],
        {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        {"phase": "Pending", "qosClass": "BestEffort"},
    ),
    "Namespace": ("/api/v1/namespaces", {}, {"phase": "Terminating"}, {"phase": "Active"}),
}


@pytest.mark.parametrize("kind", sorted(_CREATE_STATUS_CASES))
def test_a_create_over_the_wire_gets_the_status_its_strategy_leaves(api: KubeApiServer, kind: str) -> None:
    """The registry strategies of these kinds reset the status a create carries (their controllers
    write it, through /status): a client cannot create a Deployment that claims ready replicas, a bound
    claim, or a finished Job."""
    path, spec, sent, expected = _CREATE_STATUS_CASES[kind]
    created = _post(api, path, {"metadata": {"name": "made"}, "spec": spec, "status": sent})
    assert created.get("status") == expected
    namespace = None if kind == "Namespace" else "default"
    stored = api.get(kind, "made", namespace)
    assert stored is not None and stored.get("status") == expected


def test_a_replicaset_created_through_the_api_answers_a_status_the_client_can_parse(
    client: ApiClient,
) -> None:
    """ReplicaSetStatus.replicas has no omitempty (apps/v1 types.go): a new ReplicaSet's status carries
    ``replicas: 0``, which the official client requires (``V1ReplicaSetStatus.replicas``)."""
    body = {"metadata": {"name": "web-5d9c"}, "spec": _WORKLOAD_SPEC}
    created = AppsV1Api(client).create_namespaced_replica_set("default", body)
    assert created.status.replicas == 0
    created_set = AppsV1Api(client).create_namespaced_stateful_set(
        "default", {"metadata": {"name": "db"}, "spec": {**_WORKLOAD_SPEC, "serviceName": "db"}}
    )
    assert (created_set.status.replicas, created_set.status.available_replicas) == (0, 0)


def test_a_status_write_leaving_out_the_counts_reads_them_as_zero(
    api: KubeApiServer, client: ApiClient
) -> None:
    apps = AppsV1Api(client)
    apps.create_namespaced_replica_set("default", {"metadata": {"name": "web-5d9c"}, "spec": _WORKLOAD_SPEC})
    apps.patch_namespaced_replica_set_status(
        "web-5d9c", "default", {"status": {"replicas": 3, "readyReplicas": 3}}
    )
    written = api.get("ReplicaSet", "web-5d9c")
    assert written is not None
    api.update("ReplicaSet", {**written, "status": {"readyReplicas": 1}})
    assert apps.read_namespaced_replica_set("web-5d9c", "default").status.replicas == 0


def test_a_persistent_volume_created_with_a_status_starts_pending(api: KubeApiServer) -> None:
    """The PersistentVolume strategy clears the status and starts it Pending, stamping the phase's
    transition time itself (the time a create sends is not kept)."""
    spec = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/d"}}
    sent = {"phase": "Bound", "lastPhaseTransitionTime": "2001-01-01T00:00:00Z"}
    created = _post(
        api, "/api/v1/persistentvolumes", {"metadata": {"name": "pv"}, "spec": spec, "status": sent}
    )
    status = created["status"]
    assert set(status) == {"phase", "lastPhaseTransitionTime"}
    assert status["phase"] == "Pending"
    assert status["lastPhaseTransitionTime"] == created["metadata"]["creationTimestamp"]


def test_a_budget_created_with_a_status_reports_its_own(api: KubeApiServer) -> None:
    sent = {"disruptionsAllowed": 5, "currentHealthy": 5, "desiredHealthy": 0, "expectedPods": 5}
    body = {"metadata": {"name": "pdb"}, "spec": {"minAvailable": 1, "selector": {}}, "status": sent}
    created = _post(api, "/apis/policy/v1/namespaces/default/poddisruptionbudgets", body)
    assert (created["status"]["disruptionsAllowed"], created["status"]["expectedPods"]) == (0, 0)


def test_a_node_registers_with_its_status_but_not_a_config_source(api: KubeApiServer) -> None:
    """The Node strategy keeps the status a create carries (the kubelet registers a node with its
    capacity and conditions) but drops ``status.config`` (dynamic kubelet config, removed)."""
    sent = {
        "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}],
        "config": {"assigned": {"configMap": {"name": "kubelet", "namespace": "kube-system"}}},
    }
    created = _post(api, "/api/v1/nodes", {"metadata": {"name": "n1"}, "status": sent})
    assert created["status"] == {k: v for k, v in sent.items() if k != "config"}


def test_a_controller_writes_the_status_of_a_created_deployment_through_status(
    api: KubeApiServer, client: ApiClient
) -> None:
    apps = AppsV1Api(client)
    body = {"metadata": {"name": "web"}, "spec": _WORKLOAD_SPEC, "status": _WORKLOAD_STATUS}
    apps.create_namespaced_deployment("default", body)
    assert apps.read_namespaced_deployment("web", "default").status.ready_replicas is None
    apps.patch_namespaced_deployment_status("web", "default", {"status": {"readyReplicas": 2}})
    assert apps.read_namespaced_deployment("web", "default").status.ready_replicas == 2


def test_the_seeding_path_keeps_the_status_a_controller_wrote(api: KubeApiServer) -> None:
    """``add()`` stands for objects a controller already wrote: it keeps their status."""
    api.add(
        {
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": _WORKLOAD_SPEC,
            "status": _WORKLOAD_STATUS,
        }
    )
    stored = api.get("Deployment", "web", "default")
    assert stored is not None and stored["status"] == _WORKLOAD_STATUS


def test_every_kind_with_a_status_subresource_says_what_a_create_leaves_of_it() -> None:
    """A kind added later must name its strategy's rule, or a create would keep a client's status."""
    missing = [rt.qualified for rt in resources.ALL if rt.has_status and rt.create_status is None]
    assert missing == []


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet", "ReplicaSet", "ReplicationController"])
def test_a_workload_starts_at_generation_one_and_a_spec_change_bumps_it(
    api: KubeApiServer, kind: str
) -> None:
    """Their strategies set ``metadata.generation`` to 1 on create and bump it when the spec changes
    (what a controller's ``status.observedGeneration`` is compared with)."""
    path, spec, _, _ = _CREATE_STATUS_CASES[kind]
    created = _post(api, path, {"metadata": {"name": "made"}, "spec": spec})
    assert created["metadata"]["generation"] == 1
    updated = api.update(kind, {**created, "spec": {**created["spec"], "replicas": 5}})
    assert updated["metadata"]["generation"] == 2


@pytest.mark.parametrize(("kind", "bumped"), [("Deployment", 2), ("ReplicaSet", 1)])
def test_an_annotation_change_bumps_a_deployments_generation_only(
    api: KubeApiServer, kind: str, bumped: int
) -> None:
    """The Deployment strategy's PrepareForUpdate bumps the generation when the annotations change too
    (the controller copies them to its ReplicaSets); the other workloads' strategies look at the spec."""
    path, spec, _, _ = _CREATE_STATUS_CASES[kind]
    created = _post(api, path, {"metadata": {"name": "made"}, "spec": spec})
    annotated = {"metadata": {"annotations": {"team": "a"}}}
    patched = _send(api, "PATCH", f"{path}/made", annotated, "application/merge-patch+json")
    assert (created["metadata"]["generation"], patched["metadata"]["generation"]) == (1, bumped)


# --- a Pod as the API server stores it: v1 defaults, the Priority admission plugin, the QoS class ----

PODS_PATH = "/api/v1/namespaces/default/pods"


def _refusal(
    api: KubeApiServer, method: str, path: str, body: dict[str, Any], content_type: str
) -> tuple[int, str]:
    """The code and message of a request the server refuses."""
    with pytest.raises(urllib.error.HTTPError) as caught:
        _send(api, method, path, body, content_type)
    return caught.value.code, str(json.loads(caught.value.read())["message"])


def _container(name: str = "main", requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None,
               **fields: Any) -> dict[str, Any]:  # fmt: skip
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v is not None}
    return {
        "name": name,
        "image": "busybox:1.36",
        **({"resources": resources} if resources else {}),
        **fields,
    }


def _new_pod(api: KubeApiServer, name: str = "p", **spec: Any) -> dict[str, Any]:
    """A pod created over the wire exactly as sent (one container ``main`` unless ``containers`` given)."""
    return _post(api, PODS_PATH, {"metadata": {"name": name}, "spec": {"containers": [_container()], **spec}})


GUARANTEED = {"cpu": "1", "memory": "1Gi"}

# (containers, init containers, pod-level resources or None, the QoS class ComputePodQOS gives)
_QOS_CASES = {
    "no resources": ([_container()], [], None, "BestEffort"),
    "requests equal limits": ([_container(requests=GUARANTEED, limits=GUARANTEED)], [], None, "Guaranteed"),
    "limits only (requests default to them)": ([_container(limits=GUARANTEED)], [], None, "Guaranteed"),
    "equal quantities written differently": (
        [_container(requests={"cpu": "500m", "memory": "1Gi"}, limits={"cpu": "0.5", "memory": "1024Mi"})],
        [], None, "Guaranteed",
    ),
    "requests below limits": (
        [_container(requests={"cpu": "500m", "memory": "1Gi"}, limits=GUARANTEED)], [], None, "Burstable"
    ),
    "requests only": ([_container(requests=GUARANTEED)], [], None, "Burstable"),
    "a cpu limit but no memory limit": ([_container(limits={"cpu": "1"})], [], None, "Burstable"),
    "only an extended resource": ([_container(limits={"nvidia.com/gpu": "1"})], [], None, "BestEffort"),
    "zero requests": ([_container(requests={"cpu": "0", "memory": "0"})], [], None, "BestEffort"),
    "one of two containers without limits": (
        [_container(limits=GUARANTEED), _container("side", requests={"cpu": "100m"})], [], None, "Burstable"
    ),
    "an init container without resources": (
        [_container(limits=GUARANTEED)], [_container("init")], None, "Burstable"
    ),
    "only an init container asks": ([_container()], [_container("init", limits=GUARANTEED)], None, "Burstable"),
    "init and app containers at their limits": (
        [_container(limits=GUARANTEED)], [_container("init", limits={"cpu": "2", "memory": "2Gi"})], None,
        "Guaranteed",
    ),
    "pod-level limits only (requests default to them)": ([_container()], [], {"limits": GUARANTEED}, "Guaranteed"),
    "pod-level requests only": ([_container()], [], {"requests": GUARANTEED}, "Burstable"),
    "pod-level resources over guaranteed containers": (
        [_container(limits=GUARANTEED)], [], {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": GUARANTEED},
        "Burstable",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(_QOS_CASES))
def test_a_created_pod_gets_the_qos_class_of_its_resources(api: KubeApiServer, case: str) -> None:
    """The Pod strategy's PrepareForCreate stamps ``status.qosClass`` (helper/qos ComputePodQOS on the
    defaulted pod): only CPU and memory count, init containers count, pod-level resources replace
    the containers' when they name CPU or memory."""
    containers, init, pod_level, expected = _QOS_CASES[case]
    spec: dict[str, Any] = {"containers": containers, "initContainers": init}
    if pod_level is not None:
        spec["resources"] = pod_level
    created = _post(api, PODS_PATH, {"metadata": {"name": "p"}, "spec": spec})
    assert created["status"]["qosClass"] == expected
    stored = api.get("Pod", "p")
    assert stored is not None and stored["status"]["qosClass"] == expected


def test_a_pod_created_with_a_status_gets_its_qos_class_computed_all_the_same(api: KubeApiServer) -> None:
    """The status a create sends is dropped (phase Pending), the QoS class computed from the spec."""
    sent = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    body = {
        "metadata": {"name": "p"},
        "spec": {"containers": [_container(limits=GUARANTEED)]},
        "status": sent,
    }
    created = _post(api, PODS_PATH, body)
    assert created["status"] == {"phase": "Pending", "qosClass": "Guaranteed"}


def test_a_qos_class_sent_with_the_create_is_the_one_kept(api: KubeApiServer) -> None:
    """PrepareForCreate takes ``qos.GetPodQOS``, which answers the status's class when it has one and
    computes it only when it has none: a class the create sends survives the reset of its status."""
    body = {
        "metadata": {"name": "p"},
        "spec": {"containers": [_container()]},
        "status": {"qosClass": "Burstable"},
    }
    assert _post(api, PODS_PATH, body)["status"] == {"phase": "Pending", "qosClass": "Burstable"}


def test_the_seeding_path_computes_a_missing_qos_class_and_keeps_a_given_one(api: KubeApiServer) -> None:
    """``add()`` stands for pods a real server already stored, and every one of those has its class."""
    running = {"phase": "Running"}
    api.add({"kind": "Pod", "metadata": {"name": "a"}, "spec": {"containers": [_container(limits=GUARANTEED)]},
             "status": running})  # fmt: skip
    api.add({"kind": "Pod", "metadata": {"name": "b"}, "spec": {"containers": [_container()]},
             "status": {**running, "qosClass": "Burstable"}})  # fmt: skip
    a, b = api.get("Pod", "a"), api.get("Pod", "b")
    assert a is not None and a["status"] == {"phase": "Running", "qosClass": "Guaranteed"}
    assert b is not None and b["status"]["qosClass"] == "Burstable"


def test_a_status_write_without_a_qos_class_keeps_the_pods(api: KubeApiServer) -> None:
    """The status strategy's PrepareForUpdate backfills an empty ``qosClass`` from the stored pod (an
    old kubelet dropped it when it rejected a pod): a PUT of a status without it, or a merge patch
    removing it, leaves the class as it was."""
    created = _new_pod(api, containers=[_container(limits=GUARANTEED)])
    put = {**created, "status": {"phase": "Failed", "reason": "OutOfcpu"}}
    replaced = _send(api, "PUT", f"{PODS_PATH}/p/status", put, "application/json")
    assert replaced["status"] == {"phase": "Failed", "reason": "OutOfcpu", "qosClass": "Guaranteed"}
    patched = _send(api, "PATCH", f"{PODS_PATH}/p/status", {"status": {"qosClass": None}}, MERGE)
    assert patched["status"]["qosClass"] == "Guaranteed"


@pytest.mark.parametrize("content_type", [MERGE, SMP])
def test_a_status_write_changing_the_qos_class_is_refused(api: KubeApiServer, content_type: str) -> None:
    """ValidatePodStatusUpdate: the QoS class is immutable (422 naming ``status.qosClass``)."""
    _new_pod(api)
    body = {"status": {"qosClass": "Guaranteed"}}
    code, message = _refusal(api, "PATCH", f"{PODS_PATH}/p/status", body, content_type)
    assert (code, message) == (
        422,
        'Pod "p" is invalid: status.qosClass: Invalid value: "Guaranteed": field is immutable',
    )
    stored = api.get("Pod", "p")
    assert stored is not None and stored["status"]["qosClass"] == "BestEffort"


def test_a_resize_that_would_change_the_qos_class_is_refused(api: KubeApiServer) -> None:
    """An in-place resize (here a write to the pod: the emulator serves no ``pods/resize``) may change
    requests and limits, not the class they give (ValidatePodResize); one that keeps it is taken."""
    _new_pod(api, containers=[_container(limits=GUARANTEED)])
    bigger = {"spec": {"containers": [_container(requests={"cpu": "2", "memory": "2Gi"},
                                                 limits={"cpu": "2", "memory": "2Gi"})]}}  # fmt: skip
    resized = _send(api, "PATCH", f"{PODS_PATH}/p", bigger, SMP)
    assert resized["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "2"
    burstable = {"spec": {"containers": [_container(requests={"cpu": "1", "memory": "2Gi"},
                                                    limits={"cpu": "2", "memory": "2Gi"})]}}  # fmt: skip
    code, message = _refusal(api, "PATCH", f"{PODS_PATH}/p", burstable, SMP)
    assert (code, message) == (
        422,
        'Pod "p" is invalid: spec: Invalid value: "Guaranteed": Pod QOS Class may not change as a result of resizing',
    )


@pytest.mark.parametrize(
    ("gpus", "shown"), [("500m", "500m"), ("0.5", "500m"), ("1500m", "1500m"), (0.25, "250m")]
)
def test_a_pod_or_template_asking_for_a_fraction_of_an_extended_resource_is_refused(
    api: KubeApiServer, gpus: Any, shown: str
) -> None:
    """ValidateResourceQuantityValue (pkg/apis/core/validation): an extended resource
    (helper.IsIntegerResourceName covers every one) must be a whole number (its MilliValue, rounded up,
    a multiple of 1000), ``must be an integer``, the value shown in its canonical form; the request the
    v1 defaults copy from the limit is refused as well. A PodTemplate's template is a pod spec
    validated the same way (ValidatePodTemplateSpec)."""
    body = {"metadata": {"name": "p"}, "spec": {"containers": [_container(limits={"nvidia.com/gpu": gpus})]}}
    code, message = _refusal(api, "POST", PODS_PATH, body, "application/json")
    assert (code, message) == (
        422,
        f'Pod "p" is invalid: [spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "{shown}": '
        f'must be an integer, spec.containers[0].resources.requests[nvidia.com/gpu]: Invalid value: "{shown}": '
        "must be an integer]",
    )
    template = {"metadata": {"name": "t"}, "template": {"spec": {"containers": [
        _container(requests={"cpu": "500m", "example.com/fpga": gpus}, limits={"example.com/fpga": gpus})
    ]}}}  # fmt: skip
    code, message = _refusal(
        api, "POST", "/api/v1/namespaces/default/podtemplates", template, "application/json"
    )
    assert code == 422 and message.startswith(
        'PodTemplate "t" is invalid: [template.spec.containers[0].resources.limits[example.com/fpga]: '
    ), message


@pytest.mark.parametrize("gpus", ["1", "1000m", 2, "2.0", "1.9999"])
def test_a_pod_asking_for_whole_extended_resources_is_created(api: KubeApiServer, gpus: Any) -> None:
    made = _new_pod(api, containers=[_container(requests={"cpu": "100m"}, limits={"nvidia.com/gpu": gpus})])
    assert made["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == gpus


_LIMIT_REQUIRED = "Required value: Limit must be set for non overcommitable resources"


@pytest.mark.parametrize(
    ("requests", "limits", "errors"),
    [
        # a non-overcommittable resource (extended or huge pages) requested without its limit
        ({"nvidia.com/gpu": "1"}, None, [f"resources.limits: {_LIMIT_REQUIRED}"]),
        ({"cpu": "1", "hugepages-2Mi": "2Mi"}, {"cpu": "1"}, [f"resources.limits: {_LIMIT_REQUIRED}"]),
        # its request other than its limit, either way
        ({"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "2"},
         ['resources.requests: Invalid value: "1": must be equal to nvidia.com/gpu limit of 2']),
        ({"example.com/fpga": 3}, {"example.com/fpga": "2"},
         ['resources.requests: Invalid value: "3": must be equal to example.com/fpga limit of 2']),
        # an overcommittable one may ask less than its limit, never more
        ({"cpu": "2"}, {"cpu": "1500m"},
         ['resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1500m']),
        ({"memory": "2Gi"}, {"memory": "1Gi"},
         ['resources.requests: Invalid value: "2Gi": must be less than or equal to memory limit of 1Gi']),
        # no quantity below zero, in limits or requests
        ({"cpu": "-100m"}, None, ['resources.requests[cpu]: Invalid value: "-100m": must be greater than or equal to 0']),
        (None, {"memory": "-1Gi"},
         ['resources.limits[memory]: Invalid value: "-1Gi": must be greater than or equal to 0',
          'resources.requests[memory]: Invalid value: "-1Gi": must be greater than or equal to 0']),
    ],
    ids=["gpu-no-limit", "hugepages-no-limit", "gpu-below-limit", "fpga-above-limit", "cpu-above-limit",
         "memory-above-limit", "negative-request", "negative-limit"],
)  # fmt: skip
def test_resource_requirements_the_api_server_refuses_are_refused(
    api: KubeApiServer, requests: dict[str, Any] | None, limits: dict[str, Any] | None, errors: list[str]
) -> None:
    """ValidateResourceRequirements (kubernetes pkg/apis/core/validation/validation.go), for each
    container: a quantity below zero is refused ('must be greater than or equal to 0',
    ValidateNonnegativeQuantity); a request of a resource that may not be overcommitted (an extended
    one, huge pages: helper.IsOvercommitAllowed) needs its limit ('Limit must be set for non
    overcommitable resources') and must equal it; any other request may not exceed its limit. The
    emulator stored all of these. A Pod's limits default its requests first (SetDefaults_Pod), so a
    limit alone is fine; a PodTemplate's template is validated alike, without that default."""
    container = _container(requests=requests, limits=limits)
    body = {"metadata": {"name": "p"}, "spec": {"containers": [container]}}
    code, message = _refusal(api, "POST", PODS_PATH, body, "application/json")
    shown = [f"spec.containers[0].{e}" for e in errors]
    assert (code, message) == (
        422,
        'Pod "p" is invalid: ' + (shown[0] if len(shown) == 1 else f"[{', '.join(shown)}]"),
    )
    template = {"metadata": {"name": "t"}, "template": {"spec": {"initContainers": [container],
                                                                  "containers": [_container()]}}}  # fmt: skip
    code, message = _refusal(
        api, "POST", "/api/v1/namespaces/default/podtemplates", template, "application/json"
    )
    assert code == 422 and message.startswith('PodTemplate "t" is invalid: ')
    assert f"template.spec.initContainers[0].{errors[-1 if limits is None else 0]}" in message, message


def test_a_template_may_limit_an_extended_resource_without_requesting_it(api: KubeApiServer) -> None:
    """A PodTemplate's limits default no requests (SetDefaults_Pod does so for a Pod only), and a limit
    without a request is no error: such a template, and a Pod made of it, are created."""
    container = _container(requests={"cpu": "100m"}, limits={"nvidia.com/gpu": 1})
    _post(api, "/api/v1/namespaces/default/podtemplates",
          {"metadata": {"name": "t"}, "template": {"spec": {"containers": [container]}}})  # fmt: skip
    made = _new_pod(api, containers=[container])
    assert made["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "100m", "nvidia.com/gpu": 1}


def test_a_quantity_that_does_not_parse_is_a_bad_request(api: KubeApiServer) -> None:
    body = {"metadata": {"name": "p"}, "spec": {"containers": [_container(limits={"cpu": "two"})]}}
    code, message = _refusal(api, "POST", PODS_PATH, body, "application/json")
    assert (code, message) == (
        400,
        'Pod in version "v1" cannot be handled as a Pod: quantities must match the regular expression '
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
    )


def test_a_created_pod_gets_the_v1_pod_and_pod_spec_defaults(api: KubeApiServer) -> None:
    """SetDefaults_PodSpec and SetDefaults_Pod (pkg/apis/core/v1/defaults.go)."""
    spec = _new_pod(api)["spec"]
    assert (spec["restartPolicy"], spec["dnsPolicy"], spec["schedulerName"]) == (
        "Always",
        "ClusterFirst",
        "default-scheduler",
    )
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["securityContext"] == {}
    assert spec["enableServiceLinks"] is True


def test_a_created_pods_containers_get_the_v1_container_defaults(api: KubeApiServer) -> None:
    """SetDefaults_Container, for init containers too: where a container writes its termination
    message, and how its image is pulled."""
    created = _new_pod(api, initContainers=[_container("init")])
    for container in (created["spec"]["containers"][0], created["spec"]["initContainers"][0]):
        assert container["terminationMessagePath"] == "/dev/termination-log"
        assert container["terminationMessagePolicy"] == "File"


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("busybox", "Always"),  # no tag: latest
        ("busybox:latest", "Always"),
        ("public.ecr.aws/docker/library/busybox:1.36", "IfNotPresent"),
        ("localhost:5000/busybox", "Always"),  # a registry's port is no tag
        ("busybox@sha256:" + "a" * 64, "IfNotPresent"),  # a digest and no tag
        ("busybox:latest@sha256:" + "a" * 64, "Always"),
    ],
)
def test_the_image_pull_policy_defaults_by_the_images_tag(
    api: KubeApiServer, image: str, policy: str
) -> None:
    created = _new_pod(api, containers=[{"name": "main", "image": image}])
    assert created["spec"]["containers"][0]["imagePullPolicy"] == policy


def test_a_pull_policy_given_is_kept(api: KubeApiServer) -> None:
    created = _new_pod(api, containers=[{"name": "main", "image": "busybox", "imagePullPolicy": "Never"}])
    assert created["spec"]["containers"][0]["imagePullPolicy"] == "Never"


def test_requests_a_container_leaves_out_default_to_its_limits(api: KubeApiServer) -> None:
    """SetDefaults_Pod, per resource: a request given is kept, a missing one copies the limit."""
    init = _container("init", limits={"cpu": "2"})
    main = _container(requests={"cpu": "250m"}, limits={"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"})
    spec = _new_pod(api, containers=[main], initContainers=[init])["spec"]
    assert spec["containers"][0]["resources"]["requests"] == {
        "cpu": "250m",
        "memory": "1Gi",
        "nvidia.com/gpu": "1",
    }
    assert spec["initContainers"][0]["resources"]["requests"] == {"cpu": "2"}


def test_pod_level_requests_default_to_the_containers_then_to_the_pod_limits(api: KubeApiServer) -> None:
    """defaultPodRequests (PodLevelResources): with pod-level limits set, a pod-level request left out
    is what the containers request together (the larger of the app containers' sum and any init
    container), else the pod-level limit."""
    containers = [_container(requests={"cpu": "300m"}), _container("b", requests={"cpu": "200m"})]
    init = [_container("init", requests={"cpu": "400m"})]
    limits = {"cpu": "2", "memory": "4Gi"}
    spec = _new_pod(api, containers=containers, initContainers=init, resources={"limits": limits})["spec"]
    assert spec["resources"]["requests"] == {"cpu": "500m", "memory": "4Gi"}


def test_a_host_network_pods_ports_default_their_host_port(api: KubeApiServer) -> None:
    """SetDefaults_Pod: with the host's network a container port is a host port (which two pods on one
    node cannot share); every port's protocol defaults to TCP."""
    ports = [{"containerPort": 8080}, {"containerPort": 53, "protocol": "UDP"}]
    spec = _new_pod(api, containers=[_container(ports=ports)], hostNetwork=True)["spec"]
    assert spec["containers"][0]["ports"] == [
        {"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"},
        {"containerPort": 53, "hostPort": 53, "protocol": "UDP"},
    ]


def test_a_pod_written_back_without_its_defaults_gets_them_again(api: KubeApiServer) -> None:
    """The server defaults every body it decodes, an update's as a create's."""
    created = _new_pod(api)
    spec = {k: v for k, v in created["spec"].items() if k not in ("enableServiceLinks", "securityContext")}
    replaced = _send(api, "PUT", f"{PODS_PATH}/p", {**created, "spec": spec}, "application/json")
    assert (replaced["spec"]["enableServiceLinks"], replaced["spec"]["securityContext"]) == (True, {})


# Priority admission plugin: spec.priority (and preemptionPolicy) from spec.priorityClassName, else from
# the global default class, else 0 and PreemptLowerPriority

PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"


def _priority_class(api: KubeApiServer, name: str, value: int, **fields: Any) -> dict[str, Any]:
    return _post(api, PRIORITY_CLASSES, {"metadata": {"name": name}, "value": value, **fields})


def test_a_pod_without_a_class_gets_priority_zero_and_may_preempt(api: KubeApiServer) -> None:
    spec = _new_pod(api)["spec"]
    assert (spec["priority"], spec["preemptionPolicy"]) == (0, "PreemptLowerPriority")
    assert "priorityClassName" not in spec


def test_a_pod_gets_the_priority_and_preemption_policy_of_its_class(api: KubeApiServer) -> None:
    _priority_class(api, "batch-low", -10, preemptionPolicy="Never")
    _priority_class(api, "serving", 1000)
    low = _new_pod(api, "low", priorityClassName="batch-low")["spec"]
    serving = _new_pod(api, "serving", priorityClassName="serving")["spec"]
    assert (low["priority"], low["preemptionPolicy"]) == (-10, "Never")
    assert (serving["priority"], serving["preemptionPolicy"]) == (1000, "PreemptLowerPriority")


def test_a_pod_without_a_class_gets_the_global_default_of_lowest_value(api: KubeApiServer) -> None:
    """Only one class may be the default, but when a race leaves two the plugin takes the lower."""
    _priority_class(api, "standard", 100, globalDefault=True)
    api.add(
        {"kind": "PriorityClass", "metadata": {"name": "also-default"}, "value": 50, "globalDefault": True}
    )
    spec = _new_pod(api)["spec"]
    assert (spec["priorityClassName"], spec["priority"]) == ("also-default", 50)


def test_the_system_priority_classes_are_there_from_the_start(api: KubeApiServer) -> None:
    listed = _send(api, "GET", PRIORITY_CLASSES, {}, "application/json")
    values = {c["metadata"]["name"]: (c["value"], c["preemptionPolicy"]) for c in listed["items"]}
    assert values == {
        "system-cluster-critical": (2000000000, "PreemptLowerPriority"),
        "system-node-critical": (2000001000, "PreemptLowerPriority"),
    }
    assert _new_pod(api, priorityClassName="system-node-critical")["spec"]["priority"] == 2000001000


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({"priorityClassName": "nope"}, "no PriorityClass with name nope was found"),
        (
            {"priority": 7},
            "the integer value of priority (7) must not be provided in pod spec; priority admission "
            "controller computed 0 from the given PriorityClass name",
        ),
        (
            {"preemptionPolicy": "Never"},
            "the string value of PreemptionPolicy (Never) must not be provided in pod spec; priority "
            "admission controller computed PreemptLowerPriority from the given PriorityClass name",
        ),
    ],
)
def test_a_pod_the_priority_plugin_cannot_admit_is_forbidden(
    api: KubeApiServer, spec: dict[str, Any], why: str
) -> None:
    body = {"metadata": {"name": "p"}, "spec": {"containers": [_container()], **spec}}
    assert _refusal(api, "POST", PODS_PATH, body, "application/json") == (
        403,
        f'pods "p" is forbidden: {why}',
    )
    assert api.get("Pod", "p") is None


def test_a_pod_may_state_the_priority_its_class_gives(api: KubeApiServer) -> None:
    _priority_class(api, "serving", 1000)
    assert _new_pod(api, priorityClassName="serving", priority=1000)["spec"]["priority"] == 1000


def test_an_update_leaving_out_the_priority_keeps_it(api: KubeApiServer) -> None:
    """On update the plugin puts back a ``spec.priority`` the body leaves out."""
    _priority_class(api, "serving", 1000)
    created = _new_pod(api, priorityClassName="serving")
    spec = {k: v for k, v in created["spec"].items() if k not in ("priority", "preemptionPolicy")}
    replaced = _send(api, "PUT", f"{PODS_PATH}/p", {**created, "spec": spec}, "application/json")
    assert (replaced["spec"]["priority"], replaced["spec"]["preemptionPolicy"]) == (
        1000,
        "PreemptLowerPriority",
    )


def test_a_created_priority_class_defaults_its_preemption_policy(api: KubeApiServer) -> None:
    assert _priority_class(api, "serving", 1000)["preemptionPolicy"] == "PreemptLowerPriority"


def test_the_seeding_path_keeps_a_priority_given_without_a_class(api: KubeApiServer) -> None:
    """``add()`` stands for pods already admitted: what they carry is kept, what they lack is filled."""
    api.add(
        {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [_container()], "priority": 100}}
    )
    stored = api.get("Pod", "p")
    assert stored is not None
    assert (stored["spec"]["priority"], stored["spec"]["preemptionPolicy"]) == (100, "PreemptLowerPriority")


@pytest.mark.parametrize(
    ("value", "shown"), [("high", "string"), (3000000000, "number 3000000000"), (1.5, "number 1.5")]
)
def test_a_priority_class_value_that_is_no_int32_is_a_bad_request(
    api: KubeApiServer, value: Any, shown: str
) -> None:
    body = {"metadata": {"name": "high"}, "value": value}
    assert _refusal(api, "POST", PRIORITY_CLASSES, body, "application/json") == (
        400,
        'PriorityClass in version "v1" cannot be handled as a PriorityClass: json: cannot unmarshal '
        f"{shown} into Go struct field PriorityClass.value of type int32",
    )


# --- DefaultTolerationSeconds admission ------------------------------------------------------------
# kubernetes/kubernetes plugin/pkg/admission/defaulttolerationseconds/admission.go: on a Create or an
# Update of pods proper (no subresource), a pod that has no toleration matching a taint key (its key, or
# an empty key) and effect NoExecute (or an empty effect) gets {key, operator: Exists, effect: NoExecute,
# tolerationSeconds: 300} appended, for node.kubernetes.io/not-ready and node.kubernetes.io/unreachable.

NOT_READY = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300}  # fmt: skip
UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
               "tolerationSeconds": 300}  # fmt: skip
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def test_a_created_pod_gets_the_two_default_tolerations_after_its_own(api: KubeApiServer) -> None:
    created = _new_pod(api, tolerations=[GPU_TOLERATION])
    assert created["spec"]["tolerations"] == [GPU_TOLERATION, NOT_READY, UNREACHABLE]
    stored = api.get("Pod", "p")
    assert stored is not None and stored["spec"]["tolerations"] == [GPU_TOLERATION, NOT_READY, UNREACHABLE]
    assert _new_pod(api, "bare")["spec"]["tolerations"] == [NOT_READY, UNREACHABLE]


@pytest.mark.parametrize(
    ("own", "added"),
    [
        # a pod's own not-ready toleration (any seconds) stands: only unreachable is added
        ([{**NOT_READY, "tolerationSeconds": 60}], [UNREACHABLE]),
        # an empty effect tolerates NoExecute too
        ([{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}], [NOT_READY]),
        # an empty key (operator Exists) tolerates every taint: nothing is added
        ([{"operator": "Exists"}], []),
        ([{"operator": "Exists", "effect": "NoExecute"}], []),
        # the right key with another effect does not count
        ([{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}],
         [NOT_READY, UNREACHABLE]),
    ],
)  # fmt: skip
def test_a_pod_that_tolerates_a_taint_already_gets_no_second_toleration_of_it(
    api: KubeApiServer, own: list[dict[str, Any]], added: list[dict[str, Any]]
) -> None:
    assert _new_pod(api, tolerations=own)["spec"]["tolerations"] == own + added


def test_an_update_leaving_the_default_tolerations_out_gets_them_back(api: KubeApiServer) -> None:
    """The plugin admits updates too (``admission.NewHandler(admission.Create, admission.Update)``)."""
    created = _new_pod(api)
    body = {**created, "spec": {**created["spec"], "tolerations": []}}
    replaced = _send(api, "PUT", f"{PODS_PATH}/p", body, "application/json")
    assert replaced["spec"]["tolerations"] == [NOT_READY, UNREACHABLE]


def test_a_seeded_pod_is_admitted_as_a_created_one_is(api: KubeApiServer) -> None:
    """``add()`` stands for a pod already stored, so admitted when it was created: the plugin is on by
    default since Kubernetes 1.6 (kubernetes/kubernetes#41815). It gets the same tolerations as a
    create through the API, after its own; one that has them already (as a listed pod has) keeps them."""
    seeded = api.add({"kind": "Pod", "metadata": {"name": "seeded"},
                      "spec": {"containers": [_container()], "tolerations": [GPU_TOLERATION]}})  # fmt: skip
    created = _new_pod(api, "created", tolerations=[GPU_TOLERATION])
    assert (
        seeded["spec"]["tolerations"]
        == created["spec"]["tolerations"]
        == [GPU_TOLERATION, NOT_READY, UNREACHABLE]
    )
    stored = api.get("Pod", "seeded")
    assert stored is not None and stored["spec"]["tolerations"] == [GPU_TOLERATION, NOT_READY, UNREACHABLE]
    listed = {**stored, "metadata": {"name": "again"}}  # what a list answered, seeded back: nothing added
    assert api.add(listed)["spec"]["tolerations"] == [GPU_TOLERATION, NOT_READY, UNREACHABLE]


# --- every field error in one 422 ------------------------------------------------------------------
# k8s.io/apimachinery pkg/api/errors/errors.go NewInvalid: one Status (422, reason Invalid) whose
# details (group, kind, name) carry a cause per field.Error (reason = its type, FieldValueInvalid,
# FieldValueRequired ...; message = its ErrorBody; field = its path), and whose message is
# `<Kind>[.<group>] "<name>" is invalid: ` then the errors' aggregate: the one error, or all of them
# (duplicates once) as `[a, b]` (pkg/util/errors aggregate.Error). apiextensions-apiserver
# pkg/registry/customresource/strategy.go: a CRD with x-kubernetes-validations runs its CEL rules only
# when schema validation found no blocking error (NotSupported, Required, TooLong, TooMany,
# TypeInvalid); else it adds `<nil>: Invalid value: "null": some validation rules were not checked ...`.

# the CRD's pattern of a DNS subdomain name
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
CEL_SKIPPED = (
    "<nil>",
    'Invalid value: "null": some validation rules were not checked because the object was invalid; '
    "correct the existing errors to complete validation",
    "FieldValueInvalid",
)


def _invalid(call: Any) -> dict[str, Any]:
    with pytest.raises(ApiException) as caught:
        call()
    assert caught.value.status == 422, caught.value.body
    body: dict[str, Any] = json.loads(caught.value.body)
    assert body["reason"] == "Invalid"
    return body


def _causes(body: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["field"], c["message"], c["reason"]) for c in body["details"]["causes"]]


def test_a_budget_with_several_problems_is_refused_with_every_one(policy: PolicyV1Api) -> None:
    """ValidatePodDisruptionBudgetSpec (pkg/apis/policy/validation) appends every error it finds."""
    body = {"metadata": {"name": "db"},
            "spec": {"minAvailable": -1, "maxUnavailable": "150%", "unhealthyPodEvictionPolicy": "Never"}}  # fmt: skip
    refusal = _invalid(lambda: policy.create_namespaced_pod_disruption_budget("default", body))
    fields = [(field, reason) for field, _, reason in _causes(refusal)]
    assert fields == [
        ("spec", "FieldValueInvalid"),
        ("spec.minAvailable", "FieldValueInvalid"),
        ("spec.maxUnavailable", "FieldValueInvalid"),
        ("spec.unhealthyPodEvictionPolicy", "FieldValueNotSupported"),
    ]
    assert refusal["details"]["group"] == "policy"
    assert refusal["details"]["kind"] == "PodDisruptionBudget"
    shown = ", ".join(f"{field}: {message}" for field, message, _ in _causes(refusal))
    assert refusal["message"] == f'PodDisruptionBudget.policy "db" is invalid: [{shown}]'
    assert policy.list_namespaced_pod_disruption_budget("default").items == []


def test_a_request_with_several_schema_errors_is_refused_with_every_one(custom: CustomObjectsApi) -> None:
    body = provreq("pr")
    del body["spec"]["provisioningClassName"]
    body["spec"]["podSets"] = [{"podTemplateRef": {"name": "Not_A_Name"}, "count": 0}]
    refusal = _invalid(
        lambda: custom.create_namespaced_custom_object(*PROVREQS[:2], "default", PROVREQS[2], body)
    )
    assert sorted(_causes(refusal)) == sorted([
        ("spec.provisioningClassName", "Required value", "FieldValueRequired"),
        ("spec.podSets[0].count", "Invalid value: 0: spec.podSets[0].count in body should be greater than or "
         "equal to 1", "FieldValueInvalid"),
        ("spec.podSets[0].podTemplateRef.name", 'Invalid value: "Not_A_Name": spec.podSets[0].podTemplateRef.name'
         f" in body should match '{DNS_SUBDOMAIN}'", "FieldValueInvalid"),
        CEL_SKIPPED,  # Required blocks the CEL rules
    ])  # fmt: skip
    assert (refusal["details"]["group"], refusal["details"]["kind"]) == (
        "autoscaling.x-k8s.io",
        "ProvisioningRequest",
    )
    assert refusal["message"].startswith('ProvisioningRequest.autoscaling.x-k8s.io "pr" is invalid: [')
    for field, message, _ in _causes(refusal):
        assert f"{field}: {message}" in refusal["message"]


def test_a_buffer_breaking_its_schema_and_a_cel_rule_is_refused_with_both(custom: CustomObjectsApi) -> None:
    """A minimum is no blocking error: the CEL rules run and add theirs."""
    body = capacity_buffer("both", podTemplateRef={"name": "web"}, replicas=-1,
                           scalableRef={"apiGroup": "apps", "kind": "Deployment", "name": "web"})  # fmt: skip
    refusal = _invalid(
        lambda: custom.create_namespaced_custom_object(*BUFFERS[:2], "default", BUFFERS[2], body)
    )
    assert _causes(refusal) == [
        ("spec.replicas", "Invalid value: -1: spec.replicas in body should be greater than or equal to 0",
         "FieldValueInvalid"),
        ("spec", 'Invalid value: "object": You must define either PodTemplateRef or ScalableRef, but not both',
         "FieldValueInvalid"),
    ]  # fmt: skip


def test_a_blocking_schema_error_keeps_the_cel_rules_from_running(custom: CustomObjectsApi) -> None:
    body = capacity_buffer("both", podTemplateRef={"name": "web"}, replicas=1,
                           scalableRef={"apiGroup": "apps", "name": "web"})  # fmt: skip
    refusal = _invalid(
        lambda: custom.create_namespaced_custom_object(*BUFFERS[:2], "default", BUFFERS[2], body)
    )
    assert _causes(refusal) == [
        ("spec.scalableRef.kind", "Required value", "FieldValueRequired"),
        CEL_SKIPPED,
    ]
    assert refusal["message"] == (
        'CapacityBuffer.autoscaling.x-k8s.io "both" is invalid: [spec.scalableRef.kind: Required value, '
        f"{CEL_SKIPPED[0]}: {CEL_SKIPPED[1]}]"
    )


def test_a_wrong_type_is_a_type_error(custom: CustomObjectsApi) -> None:
    """apiextensions-apiserver pkg/apiserver/validation ValidateCustomResource: kube-openapi's
    InvalidTypeCode becomes field.TypeInvalid (reason FieldValueTypeInvalid), a blocking error."""
    body = capacity_buffer("b", podTemplateRef={"name": "web"}, replicas="one")
    refusal = _invalid(
        lambda: custom.create_namespaced_custom_object(*BUFFERS[:2], "default", BUFFERS[2], body)
    )
    assert [(f, r) for f, _, r in _causes(refusal)] == [
        ("spec.replicas", "FieldValueTypeInvalid"),
        CEL_SKIPPED[::2],
    ]


# --- PodGroup CRDs: structural schemas, pruned and defaulted ---------------------------------------
# volcano-sh/volcano config/crd/volcano/bases/scheduling.volcano.sh_podgroups.yaml (controller-gen
# v0.18.0, commit 096235e1): spec minMember, minResources (quantities), minTaskMember (int32 map),
# networkTopology (mode hard|soft, default hard; highestTierAllowed, default 1), priorityClassName,
# queue (default "default"), preemptable; status conditions, phase, running, succeeded, failed; no
# x-kubernetes-preserve-unknown-fields. kubernetes-sigs/scheduler-plugins config/crd/bases/
# scheduling.x-k8s.io_podgroups.yaml: spec minMember (minimum 1), minResources, scheduleTimeoutSeconds;
# status phase, occupiedBy, scheduleStartTime (date-time), running, succeeded, failed. The API server
# prunes what a structural schema does not declare (apiextensions-apiserver pkg/apiserver/schema/pruning).


def test_a_volcano_pod_group_keeps_only_what_its_crd_declares(custom: CustomObjectsApi) -> None:
    body = podgroup(*VOLCANO[:2], "pg", 4)
    body["spec"] |= {"minTaskMember": {"worker": 3}, "minResources": {"cpu": "8", "nvidia.com/gpu": 4},
                     "gangTimeout": "5m"}  # fmt: skip
    body["extra"] = {"x": 1}
    made = custom.create_namespaced_custom_object(*VOLCANO[:2], "default", "podgroups", body)
    assert made["spec"] == {"minMember": 4, "minTaskMember": {"worker": 3},
                            "minResources": {"cpu": "8", "nvidia.com/gpu": 4}, "queue": "default"}  # fmt: skip
    assert "extra" not in made
    # no status subresource: a write of the object carries its status, pruned as the rest
    made["status"] = {"phase": "Inqueue", "running": 0, "scheduledAt": "now"}
    written = custom.replace_namespaced_custom_object(*VOLCANO[:2], "default", "podgroups", "pg", made)
    assert written["status"] == {"phase": "Inqueue", "running": 0}


def test_a_volcano_pod_groups_network_topology_gets_its_defaults(custom: CustomObjectsApi) -> None:
    body = podgroup(*VOLCANO[:2], "pg", 2)
    body["spec"]["networkTopology"] = {}
    made = custom.create_namespaced_custom_object(*VOLCANO[:2], "default", "podgroups", body)
    assert made["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}


@pytest.mark.parametrize(
    ("spec", "field", "reason"),
    [
        ({"minMember": "two"}, "spec.minMember", "FieldValueTypeInvalid"),
        ({"minResources": {"cpu": "lots"}}, "spec.minResources.cpu", "FieldValueInvalid"),
        ({"minTaskMember": {"worker": "3"}}, "spec.minTaskMember.worker", "FieldValueTypeInvalid"),
        ({"networkTopology": {"mode": "strict"}}, "spec.networkTopology.mode", "FieldValueNotSupported"),
    ],
)
def test_a_volcano_pod_group_out_of_its_schema_is_refused(
    custom: CustomObjectsApi, spec: dict[str, Any], field: str, reason: str
) -> None:
    body = podgroup(*VOLCANO[:2], "pg", 2)
    body["spec"] |= spec
    refusal = _invalid(
        lambda: custom.create_namespaced_custom_object(*VOLCANO[:2], "default", "podgroups", body)
    )
    assert [(f, r) for f, _, r in _causes(refusal)] == [(field, reason)]
    assert (refusal["details"]["group"], refusal["details"]["kind"]) == ("scheduling.volcano.sh", "PodGroup")


def test_a_coscheduling_pod_group_keeps_only_what_its_crd_declares(custom: CustomObjectsApi) -> None:
    body = podgroup(*COSCHED[:2], "pg", 3)
    body["spec"] |= {"scheduleTimeoutSeconds": 60, "queue": "ignored"}
    made = custom.create_namespaced_custom_object(*COSCHED[:2], "default", "podgroups", body)
    assert made["spec"] == {"minMember": 3, "scheduleTimeoutSeconds": 60}
    status = {"phase": "Scheduling", "scheduleStartTime": "2026-01-01T00:00:00Z", "note": "x"}
    written = custom.patch_namespaced_custom_object_status(
        *COSCHED[:2], "default", "podgroups", "pg", {"status": status}
    )
    assert written["status"] == {"phase": "Scheduling", "scheduleStartTime": "2026-01-01T00:00:00Z"}


def test_a_coscheduling_pod_group_needs_at_least_one_member(custom: CustomObjectsApi) -> None:
    body = podgroup(*COSCHED[:2], "pg", 0)
    refusal = _invalid(
        lambda: custom.create_namespaced_custom_object(*COSCHED[:2], "default", "podgroups", body)
    )
    assert _causes(refusal) == [
        ("spec.minMember", "Invalid value: 0: spec.minMember in body should be greater than or equal to 1",
         "FieldValueInvalid")
    ]  # fmt: skip


# --- Kubeflow PyTorchJob and PaddleJob: the training operator's structural schemas ------------------
# kubeflow/training-operator manifests/base/crds/kubeflow.org_pytorchjobs.yaml and _paddlejobs.yaml
# (controller-gen v0.16.5): no x-kubernetes-preserve-unknown-fields, not even on the pod template (its
# metadata declares annotations, finalizers, labels, name and namespace; its spec the PodSpec, containers
# required, a list keyed by name); spec requires the replica specs; elasticPolicy, runPolicy (suspend
# defaults to false; schedulingPolicy.queue: CEL self == oldSelf, "spec.runPolicy.schedulingPolicy.queue
# is immutable") and status (conditions need type and status, times are date-times) as published.

PYTORCH = ("kubeflow.org", "v1", "pytorchjobs")
PADDLE = ("kubeflow.org", "v1", "paddlejobs")
_WORKER_CONTAINER = {"name": "pytorch", "image": "ghcr.io/example/bert:1",
                     "resources": {"requests": {"cpu": "4", "nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 1}}}  # fmt: skip


def training_job(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    specs = "pytorchReplicaSpecs" if kind == "PyTorchJob" else "paddleReplicaSpecs"
    worker = {"replicas": 4, "restartPolicy": "OnFailure",
              "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [dict(_WORKER_CONTAINER)]}}}  # fmt: skip
    return {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": name, "namespace": "default"},
            "spec": {specs: {"Worker": worker}, **spec}}  # fmt: skip


def test_a_pytorch_job_keeps_only_what_its_crd_declares(custom: CustomObjectsApi) -> None:
    body = training_job("PyTorchJob", "bert", elasticPolicy={"minReplicas": 2, "maxReplicas": 8, "rdzvBackend": "c10d",
                                                             "scaleOutPolicy": "eager"},
                        runPolicy={"cleanPodPolicy": "None"}, priority="high")  # fmt: skip
    worker = body["spec"]["pytorchReplicaSpecs"]["Worker"]
    worker["gpusPerReplica"] = 1
    worker["template"]["metadata"]["uid"] = "not-a-template-field"
    worker["template"]["spec"] |= {
        "tolerations": [GPU_TOLERATION],
        "nodeSelector": {"pool": "gpu"},
        "gang": True,
    }
    worker["template"]["spec"]["containers"][0]["shmSize"] = "8Gi"
    made = custom.create_namespaced_custom_object(*PYTORCH[:2], "default", PYTORCH[2], body)
    assert made["spec"] == {
        "elasticPolicy": {"minReplicas": 2, "maxReplicas": 8, "rdzvBackend": "c10d"},
        "runPolicy": {"cleanPodPolicy": "None", "suspend": False},  # the schema's default
        "pytorchReplicaSpecs": {"Worker": {"replicas": 4, "restartPolicy": "OnFailure", "template": {
            "metadata": {"labels": {"app": "bert"}},
            "spec": {"containers": [_WORKER_CONTAINER], "tolerations": [GPU_TOLERATION], "nodeSelector": {"pool": "gpu"}},
        }}},
    }  # fmt: skip
    assert (
        custom.get_namespaced_custom_object(*PYTORCH[:2], "default", PYTORCH[2], "bert")["spec"]
        == made["spec"]
    )


def test_a_paddle_job_keeps_only_what_its_crd_declares(custom: CustomObjectsApi) -> None:
    """PaddleJob's elasticPolicy has no rendezvous fields: a cluster drops them."""
    body = training_job(
        "PaddleJob", "ernie", elasticPolicy={"minReplicas": 1, "maxReplicas": 3, "rdzvBackend": "c10d"}
    )
    made = custom.create_namespaced_custom_object(*PADDLE[:2], "default", PADDLE[2], body)
    assert made["spec"]["elasticPolicy"] == {"minReplicas": 1, "maxReplicas": 3}
    assert made["spec"]["paddleReplicaSpecs"]["Worker"]["replicas"] == 4


@pytest.mark.parametrize(("kind", "where"), [("PyTorchJob", PYTORCH), ("PaddleJob", PADDLE)])
def test_a_training_job_is_stored_without_the_operators_defaults(
    custom: CustomObjectsApi, kind: str, where: tuple[str, str, str]
) -> None:
    """The training operator persists no defaults: no mutating webhook (its webhooks only validate), its
    reconciler defaults an in-memory copy (``r.Scheme.Default``) and writes only the status. So an
    elasticPolicy without bounds and a Worker without replicas, restartPolicy or port come back as
    written (a CRD schema default fills a field of an object that is there: no runPolicy, no suspend)."""
    body = training_job(kind, "lean", elasticPolicy={"maxRestarts": 3})
    specs = "pytorchReplicaSpecs" if kind == "PyTorchJob" else "paddleReplicaSpecs"
    worker = body["spec"][specs]["Worker"]
    del worker["replicas"], worker["restartPolicy"]
    made = custom.create_namespaced_custom_object(*where[:2], "default", where[2], body)
    got = custom.get_namespaced_custom_object(*where[:2], "default", where[2], "lean")
    for stored in (made, got):
        assert stored["spec"]["elasticPolicy"] == {"maxRestarts": 3}
        assert set(stored["spec"]) == {"elasticPolicy", specs}  # no runPolicy.cleanPodPolicy, nprocPerNode
        assert stored["spec"][specs]["Worker"] == worker  # no replicas, restartPolicy, nor a port


WORKER_PATH = "spec.pytorchReplicaSpecs.Worker"


# the scale subresource's check (validator.go ValidateScaleSpec, after the schema's): NestedInt64 fails
SCALE_SPEC_NOT_INT = (f".{WORKER_PATH}.replicas",
                      f"Invalid value: 0: .{WORKER_PATH}.replicas accessor error: 4 is of the type string, expected int64",
                      "FieldValueInvalid")  # fmt: skip


@pytest.mark.parametrize(
    ("change", "field", "reason"),
    [
        (lambda s: s["elasticPolicy"].update(minReplicas="two"), "spec.elasticPolicy.minReplicas", "FieldValueTypeInvalid"),
        (lambda s: s["elasticPolicy"].update(rdzvPort="29400"), "spec.elasticPolicy.rdzvPort", "FieldValueTypeInvalid"),
        (lambda s: s.pop("pytorchReplicaSpecs"), "spec.pytorchReplicaSpecs", "FieldValueRequired"),
        (lambda s: s["pytorchReplicaSpecs"]["Worker"]["template"]["spec"].pop("containers"),
         f"{WORKER_PATH}.template.spec.containers", "FieldValueRequired"),
        (lambda s: s["pytorchReplicaSpecs"]["Worker"]["template"]["spec"].update(tolerations={"key": "gpu"}),
         f"{WORKER_PATH}.template.spec.tolerations", "FieldValueTypeInvalid"),
        (lambda s: s.update(runPolicy={"suspend": "yes"}), "spec.runPolicy.suspend", "FieldValueTypeInvalid"),
    ],
)  # fmt: skip
def test_a_pytorch_job_of_a_wrong_type_is_refused_naming_the_field(
    custom: CustomObjectsApi, change: Any, field: str, reason: str
) -> None:
    """A blocking error: the CRD's CEL rule (the queue's) is reported as not checked, and nothing is stored."""
    body = training_job("PyTorchJob", "bert", elasticPolicy={"minReplicas": 2, "maxReplicas": 8})
    change(body["spec"])
    refusal = _invalid(
        lambda: custom.create_namespaced_custom_object(*PYTORCH[:2], "default", PYTORCH[2], body)
    )
    assert [(f, r) for f, _, r in _causes(refusal)] == [(field, reason), CEL_SKIPPED[::2]]
    assert (refusal["details"]["group"], refusal["details"]["kind"]) == ("kubeflow.org", "PyTorchJob")
    assert custom.list_namespaced_custom_object(*PYTORCH[:2], "default", PYTORCH[2])["items"] == []


def test_worker_replicas_not_an_int_break_the_schema_and_the_scale_subresource(
    custom: CustomObjectsApi,
) -> None:
    """The validator runs the schema, then ValidateScaleSpec on the scale's spec replicas path: both
    report the string, then the CEL rule is not checked."""
    body = training_job("PyTorchJob", "bert")
    body["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "4"
    refusal = _invalid(
        lambda: custom.create_namespaced_custom_object(*PYTORCH[:2], "default", PYTORCH[2], body)
    )
    causes = _causes(refusal)
    assert [(f, r) for f, _, r in causes] == [
        (f"{WORKER_PATH}.replicas", "FieldValueTypeInvalid"), SCALE_SPEC_NOT_INT[::2], CEL_SKIPPED[::2]]  # fmt: skip
    assert causes[1] == SCALE_SPEC_NOT_INT


def test_a_pytorch_job_with_two_containers_of_one_name_is_refused(custom: CustomObjectsApi) -> None:
    body = training_job("PyTorchJob", "bert")
    template = body["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    template["containers"].append({"name": "pytorch", "image": "sidecar"})
    refusal = _invalid(
        lambda: custom.create_namespaced_custom_object(*PYTORCH[:2], "default", PYTORCH[2], body)
    )
    assert _causes(refusal) == [(f"{WORKER_PATH}.template.spec.containers[1]",
                                 'Duplicate value: map[string]interface {}{"name":"pytorch"}', "FieldValueDuplicate")]  # fmt: skip


def test_a_training_jobs_queue_may_not_change(custom: CustomObjectsApi) -> None:
    body = training_job("PaddleJob", "ernie", runPolicy={"schedulingPolicy": {"queue": "research"}})
    custom.create_namespaced_custom_object(*PADDLE[:2], "default", PADDLE[2], body)
    patch = {"spec": {"runPolicy": {"schedulingPolicy": {"queue": "prod", "minAvailable": 2}}}}
    refusal = _invalid(
        lambda: custom.patch_namespaced_custom_object(*PADDLE[:2], "default", PADDLE[2], "ernie", patch)
    )
    assert _causes(refusal) == [("spec.runPolicy.schedulingPolicy.queue",
                                 'Invalid value: "string": spec.runPolicy.schedulingPolicy.queue is immutable',
                                 "FieldValueInvalid")]  # fmt: skip
    kept = {"spec": {"runPolicy": {"schedulingPolicy": {"queue": "research", "minAvailable": 2}}}}
    written = custom.patch_namespaced_custom_object(*PADDLE[:2], "default", PADDLE[2], "ernie", kept)
    assert written["spec"]["runPolicy"] == {
        "schedulingPolicy": {"queue": "research", "minAvailable": 2},
        "suspend": False,
    }


def test_a_training_jobs_status_is_pruned_and_validated(custom: CustomObjectsApi) -> None:
    custom.create_namespaced_custom_object(
        *PYTORCH[:2], "default", PYTORCH[2], training_job("PyTorchJob", "bert")
    )
    status = {"replicaStatuses": {"Worker": {"active": 4, "selector": "app=bert", "ready": 4}},
              "conditions": [{"type": "Running", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
              "phase": "Running"}  # fmt: skip
    written = custom.patch_namespaced_custom_object_status(
        *PYTORCH[:2], "default", PYTORCH[2], "bert", {"status": status}
    )
    assert written["status"] == {"replicaStatuses": {"Worker": {"active": 4, "selector": "app=bert"}},
                                 "conditions": status["conditions"]}  # fmt: skip
    bad = {"status": {"conditions": [{"type": "Running", "lastUpdateTime": "yesterday"}]}}
    refusal = _invalid(
        lambda: custom.patch_namespaced_custom_object_status(*PYTORCH[:2], "default", PYTORCH[2], "bert", bad)
    )
    assert [(f, r) for f, _, r in _causes(refusal)] == [
        ("status.conditions[0].status", "FieldValueRequired"),
        ("status.conditions[0].lastUpdateTime", "FieldValueTypeInvalid"),
        CEL_SKIPPED[::2],
    ]


# --- MPIJob: kubeflow/mpi-operator manifests/base/kubeflow.org_mpijobs.yaml (pkg/apis/kubeflow/v2beta1/
# types.go): served and stored at v2beta1 alone; schema defaults on spec; conditions keyed by type, their
# status an enum; no scale subresource and no CEL rule.

MPI = ("kubeflow.org", "v2beta1", "mpijobs")


def mpi_job(name: str, **spec: Any) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "mpi", "image": "mpioperator/mpi-pi:openmpi"}]}}
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": name, "namespace": "default"},
            "spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": template},
                                         "Worker": {"replicas": 2, "template": template}}, **spec}}  # fmt: skip


def test_an_mpijob_is_served_at_v2beta1_pruned_and_given_its_crds_defaults(custom: CustomObjectsApi) -> None:
    made = custom.create_namespaced_custom_object(
        *MPI[:2], "default", MPI[2], mpi_job("pi", runPolicy={"cleanPodPolicy": "Running"}, gpus=8)
    )
    spec = made["spec"]
    assert "gpus" not in spec
    assert {k: v for k, v in spec.items() if k != "mpiReplicaSpecs"} == {
        "runPolicy": {"cleanPodPolicy": "Running", "suspend": False},
        "slotsPerWorker": 1,
        "runLauncherAsWorker": False,
        "sshAuthMountPath": "/root/.ssh",
        "launcherCreationPolicy": "AtStartup",
        "mpiImplementation": "OpenMPI",
    }
    with pytest.raises(ApiException) as gone:  # not served at the operator's old versions
        custom.list_namespaced_custom_object("kubeflow.org", "v1", "default", "mpijobs")
    assert gone.value.status == 404
    found = custom.get_api_resources(*MPI[:2]).resources
    assert [(r.name, r.short_names) for r in found] == [
        ("mpijobs", None),
        ("mpijobs/status", None),
    ]  # no scale
    refusal = _invalid(
        lambda: custom.create_namespaced_custom_object(
            *MPI[:2], "default", MPI[2], mpi_job("mpich", mpiImplementation="OpenMPI5")
        )
    )
    assert [(f, r) for f, _, r in _causes(refusal)] == [("spec.mpiImplementation", "FieldValueNotSupported")]


def test_an_mpijobs_conditions_are_keyed_by_type_and_their_status_is_an_enum(
    custom: CustomObjectsApi,
) -> None:
    custom.create_namespaced_custom_object(*MPI[:2], "default", MPI[2], mpi_job("pi"))
    at = "2026-01-01T00:00:00Z"
    succeeded = {"type": "Succeeded", "status": "True", "reason": "MPIJobSucceeded", "lastTransitionTime": at}
    written = custom.patch_namespaced_custom_object_status(
        *MPI[:2], "default", MPI[2], "pi", {"status": {"conditions": [succeeded], "completionTime": at}}
    )
    assert written["status"] == {"conditions": [succeeded], "completionTime": at}
    for conditions, field, reason in (
        ([succeeded, {**succeeded, "status": "False"}], "status.conditions[1]", "FieldValueDuplicate"),
        ([{**succeeded, "status": "Yes"}], "status.conditions[0].status", "FieldValueNotSupported"),
    ):
        refusal = _invalid(
            lambda c=conditions: custom.patch_namespaced_custom_object_status(
                *MPI[:2], "default", MPI[2], "pi", {"status": {"conditions": c}}
            )
        )
        assert [(f, r) for f, _, r in _causes(refusal)] == [(field, reason)]
    kept = custom.get_namespaced_custom_object(*MPI[:2], "default", MPI[2], "pi")
    assert kept["status"]["conditions"] == [succeeded]


# --- MPIJob kubeflow.org/v1: kubeflow/training-operator manifests/base/crds/kubeflow.org_mpijobs.yaml (at
# 7cc5d04bab51): the training operator's CRD of the same name, installed in place of the mpi-operator's.

MPI_V1 = ("kubeflow.org", "v1", "mpijobs")


def test_the_training_operators_mpijob_is_served_at_v1_only_in_place_of_the_mpi_operators() -> None:
    with KubeApiServer(optional_resources=["mpijobs.kubeflow.org/v1"]) as server, server.api_client() as c:
        custom = CustomObjectsApi(c)
        job = {**mpi_job("pi", cleanPodPolicy="Running", gpus=8), "apiVersion": "kubeflow.org/v1"}
        job["spec"]["runPolicy"] = {"schedulingPolicy": {"queue": "research"}}
        made = custom.create_namespaced_custom_object(*MPI_V1[:2], "default", MPI_V1[2], job)
        spec = made["spec"]
        assert {
            k: v for k, v in spec.items() if k != "mpiReplicaSpecs"
        } == {  # pruned; only suspend defaulted
            "cleanPodPolicy": "Running",
            "runPolicy": {"schedulingPolicy": {"queue": "research"}, "suspend": False},
        }
        with pytest.raises(ApiException) as gone:  # the mpi-operator's CRD is not installed
            custom.list_namespaced_custom_object(*MPI[:2], "default", MPI[2])
        assert gone.value.status == 404
        assert [r.name for r in custom.get_api_resources("kubeflow.org", "v1").resources] == [
            "mpijobs",
            "mpijobs/status",
        ]
        refusal = _invalid(
            lambda: custom.patch_namespaced_custom_object(
                *MPI_V1[:2],
                "default",
                MPI_V1[2],
                "pi",
                {"spec": {"runPolicy": {"schedulingPolicy": {"queue": "x"}}}},
            )
        )
        assert [f for f, _, _ in _causes(refusal)] == ["spec.runPolicy.schedulingPolicy.queue"]
        server.optional_resources = None  # every CRD, the mpi-operator's MPIJob among them
        assert custom.list_namespaced_custom_object(*MPI[:2], "default", MPI[2])["items"] == []
        with pytest.raises(ApiException) as gone:
            custom.list_namespaced_custom_object(*MPI_V1[:2], "default", MPI_V1[2])
        assert gone.value.status == 404
    with pytest.raises(ValueError, match="one CRD name"):
        KubeApiServer(optional_resources=["mpijobs.kubeflow.org", "mpijobs.kubeflow.org/v1"])


# --- PyTorchJob and PaddleJob scale subresource --------------------------------------------------------
# Both CRDs declare subresources.scale over their Worker replicas (kubeflow/training-operator
# manifests/base/crds/kubeflow.org_pytorchjobs.yaml at c20bf65e03b8, kubeflow.org_paddlejobs.yaml at
# 7cc5d04bab51: specReplicasPath .spec.<kind>ReplicaSpecs.Worker.replicas, statusReplicasPath
# .status.replicaStatuses.Worker.active, labelSelectorPath .status.replicaStatuses.Worker.selector).
# Served as apiextensions-apiserver's ScaleREST serves a CRD's scale (pkg/registry/customresource/etcd.go).

WORKER_REPLICAS = ".spec.pytorchReplicaSpecs.Worker.replicas"


def _scale_error(call: Any, status: int) -> dict[str, Any]:
    with pytest.raises(ApiException) as caught:
        call()
    assert caught.value.status == status, caught.value.body
    body: dict[str, Any] = json.loads(caught.value.body)
    return body


@pytest.mark.parametrize(("kind", "where"), [("PyTorchJob", PYTORCH), ("PaddleJob", PADDLE)])
def test_a_training_jobs_scale_reads_its_worker_replicas_and_their_status(
    custom: CustomObjectsApi, kind: str, where: tuple[str, str, str]
) -> None:
    made = custom.create_namespaced_custom_object(*where[:2], "default", where[2], training_job(kind, "bert"))
    scale = custom.get_namespaced_custom_object_scale(*where[:2], "default", where[2], "bert")
    assert (scale["apiVersion"], scale["kind"]) == ("autoscaling/v1", "Scale")
    assert scale["metadata"]["uid"] == made["metadata"]["uid"]
    assert (scale["spec"], scale["status"]) == (
        {"replicas": 4},
        {"replicas": 0, "selector": ""},
    )  # no status yet

    status = {"replicaStatuses": {"Worker": {"active": 3, "selector": "training.kubeflow.org/job-name=bert"}}}
    custom.patch_namespaced_custom_object_status(*where[:2], "default", where[2], "bert", {"status": status})
    scale = custom.get_namespaced_custom_object_scale(*where[:2], "default", where[2], "bert")
    assert scale["status"] == {"replicas": 3, "selector": "training.kubeflow.org/job-name=bert"}


def test_the_scale_of_a_job_without_worker_replicas_is_the_api_servers_500(custom: CustomObjectsApi) -> None:
    """ScaleREST.Get: no value at specReplicasPath is an internal error, not 0."""
    body = training_job("PyTorchJob", "bert")
    del body["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"]
    custom.create_namespaced_custom_object(*PYTORCH[:2], "default", PYTORCH[2], body)
    refusal = _scale_error(
        lambda: custom.get_namespaced_custom_object_scale(*PYTORCH[:2], "default", PYTORCH[2], "bert"), 500
    )
    assert (refusal["reason"], refusal["message"]) == (
        "InternalError", f'Internal error occurred: the spec replicas field "{WORKER_REPLICAS}" does not exist')  # fmt: skip


def test_writing_a_training_jobs_scale_sets_its_worker_replicas_and_nothing_else(
    custom: CustomObjectsApi,
) -> None:
    """PATCH and PUT of the Scale write spec.replicas at specReplicasPath; the status stays; a stale
    resourceVersion is a conflict; the job's own validation (ValidateScaleSpec) refuses a negative count."""
    made = custom.create_namespaced_custom_object(
        *PYTORCH[:2], "default", PYTORCH[2], training_job("PyTorchJob", "bert")
    )
    status = {"replicaStatuses": {"Worker": {"active": 4}}}
    custom.patch_namespaced_custom_object_status(
        *PYTORCH[:2], "default", PYTORCH[2], "bert", {"status": status}
    )

    patched = custom.patch_namespaced_custom_object_scale(
        *PYTORCH[:2], "default", PYTORCH[2], "bert", {"spec": {"replicas": 6}}
    )
    assert (patched["spec"], patched["status"]["replicas"]) == ({"replicas": 6}, 4)
    job = custom.get_namespaced_custom_object(*PYTORCH[:2], "default", PYTORCH[2], "bert")
    worker = job["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert (
        worker["replicas"] == 6
        and worker["template"] == made["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    )
    assert job["status"] == status and job["metadata"]["generation"] == 2
    assert job["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]

    put = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "bert", "namespace": "default"},
           "spec": {"replicas": 2}}  # fmt: skip
    stale = {**put, "metadata": {**put["metadata"], "resourceVersion": made["metadata"]["resourceVersion"]}}
    conflict = _scale_error(
        lambda: custom.replace_namespaced_custom_object_scale(
            *PYTORCH[:2], "default", PYTORCH[2], "bert", stale
        ),
        409,
    )
    assert conflict["reason"] == "Conflict"
    replaced = custom.replace_namespaced_custom_object_scale(*PYTORCH[:2], "default", PYTORCH[2], "bert", put)
    assert replaced["spec"] == {"replicas": 2}

    negative = {**put, "spec": {"replicas": -1}}
    refusal = _invalid(
        lambda: custom.replace_namespaced_custom_object_scale(
            *PYTORCH[:2], "default", PYTORCH[2], "bert", negative
        )
    )
    assert _causes(refusal) == [
        (WORKER_REPLICAS, "Invalid value: -1: should be a non-negative integer", "FieldValueInvalid")
    ]
    assert custom.get_namespaced_custom_object_scale(*PYTORCH[:2], "default", PYTORCH[2], "bert")["spec"] == {
        "replicas": 2
    }


def _refused(api: KubeApiServer, method: str, path: str, body: Any, content_type: str) -> tuple[int, str]:
    with pytest.raises(urllib.error.HTTPError) as refused:
        _send(api, method, path, body, content_type)
    return refused.value.code, json.loads(refused.value.read())["message"]


def test_a_scale_write_to_a_job_without_worker_replicas_must_give_them(
    api: KubeApiServer, custom: CustomObjectsApi
) -> None:
    """scaleUpdatedObjectInfo: the Scale a patch starts from carries the smallest int32 when the path holds
    nothing; a patch that leaves it so is refused (400), one that sets it makes the path."""
    body = training_job("PyTorchJob", "bert")
    del body["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"]
    custom.create_namespaced_custom_object(*PYTORCH[:2], "default", PYTORCH[2], body)
    path = "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs/bert/scale"
    labels_only = [{"op": "add", "path": "/metadata/labels", "value": {"team": "nlp"}}]
    assert _refused(api, "PATCH", path, labels_only, JSON_PATCH) == (
        400, f'the spec replicas field "{WORKER_REPLICAS}" cannot be empty')  # fmt: skip
    # a custom resource's scale takes JSON and merge patches only
    assert _refused(api, "PATCH", path, {"spec": {"replicas": 3}}, SMP)[0] == 415

    written = _send(api, "PATCH", path, {"spec": {"replicas": 3}}, MERGE)
    assert written["spec"] == {"replicas": 3}
    stored = api.get("PyTorchJob", "bert")
    assert stored is not None and stored["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3


def test_discovery_lists_the_training_jobs_scale_subresources(custom: CustomObjectsApi) -> None:
    listing = custom.get_api_resources("kubeflow.org", "v1")
    scales = {r.name: r for r in listing.resources if r.name.endswith("/scale")}
    assert set(scales) == {"pytorchjobs/scale", "paddlejobs/scale"}
    assert {(r.group, r.version, r.kind) for r in scales.values()} == {("autoscaling", "v1", "Scale")}
    assert all(sorted(r.verbs) == ["get", "patch", "update"] for r in scales.values())


def _elastic_job_with_workers(api: KubeApiServer, custom: CustomObjectsApi, replicas: int | None) -> None:
    """An elastic PyTorchJob of ``replicas`` Workers (None: left out), a Master, and their pods as the
    training operator makes them: labelled, controlled by the job, Running and Ready on n1."""
    body = training_job("PyTorchJob", "bert", elasticPolicy={"minReplicas": 1, "maxReplicas": 8})
    specs = body["spec"]["pytorchReplicaSpecs"]
    specs["Master"] = {**specs["Worker"], "replicas": 1}
    if replicas is None:
        del specs["Worker"]["replicas"]
    else:
        specs["Worker"]["replicas"] = replicas
    owner = controller_ref(custom.create_namespaced_custom_object(*PYTORCH[:2], "default", PYTORCH[2], body))
    pods = [("master", 0)] + [("worker", i) for i in range(replicas or 2)]
    for role, index in pods:
        name = f"bert-{role}-{index}"
        labels = {"training.kubeflow.org/job-name": "bert", "training.kubeflow.org/replica-type": role,
                  "training.kubeflow.org/replica-index": str(index)}  # fmt: skip
        api.add(pod(name, labels=labels, owner=owner))
        api.bind(name, "n1")


def test_a_percentage_budget_over_an_elastic_jobs_workers_counts_the_jobs_scale(
    api: KubeApiServer, core: CoreV1Api, policy: PolicyV1Api, custom: CustomObjectsApi
) -> None:
    """getExpectedScale reads the PyTorchJob's scale (4 Workers): maxUnavailable 50% lets two workers
    go, the third eviction is refused with 429 until the budget has room again."""
    _elastic_job_with_workers(api, custom, 4)
    workers = {"training.kubeflow.org/job-name": "bert", "training.kubeflow.org/replica-type": "worker"}
    api.add(pdb("bert-workers", workers, maxUnavailable="50%"))

    status = policy.read_namespaced_pod_disruption_budget("bert-workers", "default").status
    assert (status.expected_pods, status.desired_healthy, status.current_healthy) == (4, 2, 4)
    assert status.disruptions_allowed == 2
    evict(core, "bert-worker-0")
    evict(core, "bert-worker-1")
    assert refused_eviction(core, "bert-worker-2") == 429
    status = policy.read_namespaced_pod_disruption_budget("bert-workers", "default").status
    assert (status.expected_pods, status.current_healthy, status.disruptions_allowed) == (4, 2, 0)


def test_a_budget_over_a_jobs_pods_counts_the_job_once_by_its_workers(
    api: KubeApiServer, policy: PolicyV1Api, custom: CustomObjectsApi
) -> None:
    """The Master's pod has the same controller: the job counts once, with its scale (the Workers)."""
    _elastic_job_with_workers(api, custom, 3)
    api.add(pdb("bert", {"training.kubeflow.org/job-name": "bert"}, minAvailable="50%"))
    status = policy.read_namespaced_pod_disruption_budget("bert", "default").status
    assert (status.expected_pods, status.desired_healthy, status.current_healthy) == (3, 2, 4)
    assert status.disruptions_allowed == 2


def test_a_budget_over_a_job_whose_scale_fails_fails_its_sync_with_the_scale_error(
    api: KubeApiServer, core: CoreV1Api, policy: PolicyV1Api, custom: CustomObjectsApi
) -> None:
    """The scale GET answers 500 (no Worker replicas): the disruption controller's sync fails with it."""
    _elastic_job_with_workers(api, custom, None)
    api.add(pdb("bert", {"training.kubeflow.org/replica-type": "worker"}, maxUnavailable=1))
    status = policy.read_namespaced_pod_disruption_budget("bert", "default").status
    [condition] = status.conditions
    assert (status.disruptions_allowed, condition.reason, condition.message) == (
        0, "SyncFailed", f'Internal error occurred: the spec replicas field "{WORKER_REPLICAS}" does not exist')  # fmt: skip
    assert refused_eviction(core, "bert-worker-0") == 429


def test_a_pod_template_starts_at_generation_one_and_a_template_change_bumps_it(core: CoreV1Api) -> None:
    """The PodTemplate strategy (kubernetes/kubernetes pkg/registry/core/podtemplate/strategy.go) sets
    ``metadata.generation`` to 1 in PrepareForCreate and bumps it in PrepareForUpdate when ``template``
    changes, not on a label change: what a CapacityBuffer's ``status.podTemplateGeneration`` records."""
    body = {
        "metadata": {"name": "web"},
        "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
    }
    created = core.create_namespaced_pod_template("default", body)
    assert created.metadata.generation == 1
    body["metadata"] = {"name": "web", "labels": {"team": "a"}}
    relabelled = core.replace_namespaced_pod_template("web", "default", body)
    assert relabelled.metadata.generation == 1
    body["template"] = {"spec": {"containers": [{"name": "c", "image": "j"}]}}
    changed = core.replace_namespaced_pod_template("web", "default", body)
    assert changed.metadata.generation == 2


# --- preconditions of a status write -------------------------------------------------------------
# A PATCH carries no precondition of its own (apiserver endpoints/handlers/patch.go: the patch goes to
# rest.DefaultUpdatedObjectInfo(nil, ...), whose Preconditions() are none). The patched object's
# metadata.resourceVersion is still compared with the stored one (registry/generic/registry/store.go
# Update: 409 "the object has been modified..."); its metadata.uid is not: on a custom resource's
# /status the status strategy copies the stored object over the patched one but for its status
# (apiextensions-apiserver registry/customresource/status_strategy.go PrepareForUpdate), and on the
# resource itself the uid is an immutable field (rest.BeforeUpdate, ValidateObjectMetaUpdate: 422).
# A JSON patch's failed "test" is answered 422 with the generic message and no details (patch.go
# applyJSPatch: NewGenericServerResponse(422, ..., isUnexpectedResponse=false)).


def recreated(custom: CustomObjectsApi, name: str) -> tuple[str, str]:
    """Create ``name``, delete it, create it again: its first uid and the uid it has now."""
    args = (*PROVREQS[:2], "default", PROVREQS[2])
    first = custom.create_namespaced_custom_object(*args, provreq(name))["metadata"]["uid"]
    custom.delete_namespaced_custom_object(*args, name)
    second = custom.create_namespaced_custom_object(*args, provreq(name))["metadata"]["uid"]
    assert first != second
    return first, second


def test_a_merge_patch_of_status_ignores_the_uid_it_carries(custom: CustomObjectsApi) -> None:
    old, new = recreated(custom, "pr")
    args = (*PROVREQS[:2], "default", PROVREQS[2], "pr")
    body = {"metadata": {"uid": old}, "status": {"conditions": [GOOD_CONDITION]}}
    written = custom.patch_namespaced_custom_object_status(*args, body)
    assert written["metadata"]["uid"] == new
    assert written["status"]["conditions"] == [GOOD_CONDITION]


def test_a_merge_patch_of_the_resource_naming_another_uid_is_invalid(custom: CustomObjectsApi) -> None:
    old, _ = recreated(custom, "pr")
    args = (*PROVREQS[:2], "default", PROVREQS[2], "pr")
    message = refused(lambda: custom.patch_namespaced_custom_object(*args, {"metadata": {"uid": old}}))
    assert "metadata.uid" in message and "field is immutable" in message, message


def test_a_stale_resource_version_in_a_status_patch_conflicts(custom: CustomObjectsApi) -> None:
    args = (*PROVREQS[:2], "default", PROVREQS[2], "pr")
    made = custom.create_namespaced_custom_object(*PROVREQS[:2], "default", PROVREQS[2], provreq("pr"))
    custom.patch_namespaced_custom_object(*args, {"metadata": {"labels": {"by": "kueue"}}})
    stale = {"metadata": {"resourceVersion": made["metadata"]["resourceVersion"]},
             "status": {"conditions": [GOOD_CONDITION]}}  # fmt: skip
    with pytest.raises(ApiException) as caught:
        custom.patch_namespaced_custom_object_status(*args, stale)
    assert caught.value.status == 409
    assert json.loads(caught.value.body)["message"] == (
        'Operation cannot be fulfilled on provisioningrequests.autoscaling.x-k8s.io "pr": the object has '
        "been modified; please apply your changes to the latest version and try again"
    )


def test_a_json_patch_testing_the_uid_of_a_recreated_object_is_refused_generically(
    custom: CustomObjectsApi,
) -> None:
    old, new = recreated(custom, "pr")
    args = (*PROVREQS[:2], "default", PROVREQS[2], "pr")

    def patch(uid: str) -> Any:
        ops = [{"op": "test", "path": "/metadata/uid", "value": uid},
               {"op": "add", "path": "/status", "value": {"conditions": [GOOD_CONDITION]}}]  # fmt: skip
        return custom.patch_namespaced_custom_object_status(
            *args, ops, _content_type="application/json-patch+json"
        )

    with pytest.raises(ApiException) as caught:
        patch(old)
    assert caught.value.status == 422
    assert json.loads(caught.value.body) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "the server rejected our request due to an error in our request",
        "reason": "Invalid", "details": {}, "code": 422,
    }  # fmt: skip
    assert "status" not in custom.get_namespaced_custom_object(*args)
    assert patch(new)["status"]["conditions"] == [GOOD_CONDITION]


def test_an_eviction_whose_body_names_no_pod_is_a_bad_request(api: KubeApiServer, core: CoreV1Api) -> None:
    """An Eviction must name the pod of its URL: the real server compares the two whatever they are,
    so a body without ``metadata.name`` is refused with 400 "name in URL does not match name in
    Eviction object" and nothing is deleted (kubernetes/kubernetes pkg/registry/core/pod/storage/
    eviction.go, EvictionREST.Create: ``if name != eviction.Name``). The emulator evicted the pod, so a
    client that forgot the name would pass its tests here and have every eviction refused on a cluster."""
    api.add(pod("lonely", labels={"app": "solo"}, node="n1", phase="Running", ready=True))
    body = V1Eviction(api_version="policy/v1", kind="Eviction", metadata=V1ObjectMeta(namespace="default"))
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod_eviction("lonely", "default", body)
    assert caught.value.status == 400
    assert error_body(caught.value)["message"] == "name in URL does not match name in Eviction object"
    [left] = core.list_namespaced_pod("default").items
    assert left.metadata.deletion_timestamp is None


def test_an_evictions_uid_precondition_is_checked_at_the_deletion_after_the_budget(
    api: KubeApiServer, core: CoreV1Api
) -> None:
    """eviction.go Create: a running pod's budget is checked (and spent) first; the DeleteOptions'
    preconditions are checked only by the deletion that follows (addConditionAndDeletePod). So a stale
    uid on a pod its budget holds answers the budget's 429, and on a pod its budget lets go, 409."""
    owner = workload(api, "ReplicaSet", "web-5d9c", 2, {"app": "web"})
    for i in range(2):
        running_ready(api, f"web-{i}", owner)
    api.add(pdb("web", {"app": "web"}, minAvailable=2))
    stale = V1DeleteOptions(preconditions=V1Preconditions(uid="the-pod-listed-before"))

    with pytest.raises(ApiException) as held:
        evict_with(core, "web-0", stale)
    assert held.value.status == 429 and "disruption budget" in error_body(held.value)["message"]

    api.delete("PodDisruptionBudget", "web")
    api.add(pdb("web", {"app": "web"}, minAvailable=1))
    with pytest.raises(ApiException) as replaced:
        evict_with(core, "web-0", stale)
    assert replaced.value.status == 409 and "UID in precondition" in error_body(replaced.value)["message"]
    kept = api.get("Pod", "web-0")
    assert kept is not None and "deletionTimestamp" not in kept["metadata"]


def test_an_eviction_refused_by_its_precondition_still_spends_its_budget_for_two_minutes() -> None:
    """checkAndDecrement records the pod in the budget's ``status.disruptedPods`` before the deletion
    checks the preconditions (pkg/registry/core/pod/storage/eviction.go), and the disruption controller
    counts a pod recorded there, not being deleted, as unhealthy until ``DeletionTimeout`` (2 minutes)
    has passed (pkg/controller/disruption/disruption.go ``countHealthyPods``, ``buildDisruptedPodMap``).
    So an eviction answered 409 for a stale uid leaves its budget spent that long. A pod evicted is
    dropped from the record once it is being deleted; a dry run records nothing."""
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    with KubeApiServer(clock=lambda: now[0]) as api, api.api_client() as client:
        core, policy = CoreV1Api(client), PolicyV1Api(client)
        api.kubelet_exit_delay = 3600  # evicted pods stay listed, terminating
        owner = workload(api, "ReplicaSet", "web-5d9c", 3, {"app": "web"})
        for i in range(3):
            running_ready(api, f"web-{i}", owner)
        api.add(pdb("web", {"app": "web"}, minAvailable=2))

        def budget() -> tuple[int, int, dict[str, Any]]:
            status = policy.read_namespaced_pod_disruption_budget("web", "default").status
            return status.current_healthy, status.disruptions_allowed, dict(status.disrupted_pods or {})

        assert budget() == (3, 1, {})
        core.create_namespaced_pod_eviction(  # a dry run spends nothing
            "web-2", "default", {"apiVersion": "policy/v1", "kind": "Eviction",
                                  "metadata": {"name": "web-2"}, "deleteOptions": {"dryRun": ["All"]}},
        )  # fmt: skip
        assert budget() == (3, 1, {})
        stale = V1DeleteOptions(preconditions=V1Preconditions(uid="the-pod-listed-before"))
        with pytest.raises(ApiException) as replaced:
            evict_with(core, "web-0", stale)
        assert replaced.value.status == 409
        healthy, allowed, recorded = budget()
        assert (healthy, allowed, list(recorded)) == (2, 0, ["web-0"])
        with pytest.raises(ApiException) as held:
            evict_with(core, "web-1")
        assert held.value.status == 429
        now[0] += timedelta(seconds=119)
        assert budget()[:2] == (2, 0)
        now[0] += timedelta(seconds=2)  # DeletionTimeout has passed: the controller drops the record
        assert budget() == (3, 1, {})
        evict_with(core, "web-1")
        assert terminating(api, "web-1")
        assert budget() == (2, 0, {})  # web-1 is being deleted: unhealthy, and no longer recorded


# --- labels ----------------------------------------------------------------------------------------

LB_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"


@pytest.mark.parametrize(
    ("labels", "code", "words"),
    [
        (
            {"x": True},
            400,
            "cannot unmarshal bool into Go struct field ObjectMeta.metadata.labels of type string",
        ),
        ({"bad key!": "v"}, 422, 'metadata.labels: Invalid value: "bad key!": name part must consist of'),
        ({"Example.com/x": "v"}, 422, 'metadata.labels: Invalid value: "Example.com/x": prefix part'),
        ({"a/b/c": "v"}, 422, 'metadata.labels: Invalid value: "a/b/c": a qualified name'),
        ({"x": "a" * 64}, 422, "must be no more than 63 characters"),
        ({"x": "-bad"}, 422, 'metadata.labels: Invalid value: "-bad": a valid label must be an empty string'),
        ({"x": "v\n"}, 422, "a valid label must be an empty string"),
        ({"x\n": "v"}, 422, "name part must consist of"),
        ({"a.b\n/x": "v"}, 422, "prefix part"),
    ],
    ids=[
        "not-a-string",
        "bad-key",
        "bad-prefix",
        "two-slashes",
        "long-value",
        "bad-value",
        "value-ending-in-newline",
        "name-ending-in-newline",
        "prefix-ending-in-newline",
    ],
)
def test_a_label_the_api_server_refuses_is_refused_and_the_node_kept(
    api: KubeApiServer, labels: dict[str, Any], code: int, words: str
) -> None:
    """ObjectMeta's labels decode as map[string]string and are validated as ValidateLabels does
    (apimachinery util/validation IsQualifiedName, IsValidLabelValue); before, the emulator stored any.
    Go's ``$`` matches only at the end of the text, so a trailing newline is refused; Python's ``re.match``
    with ``$`` let one through (found by review)."""
    api.add({"kind": "Node", "metadata": {"name": "n1", "labels": {"team": "a"}}})
    got, message = _refusal(api, "PATCH", "/api/v1/nodes/n1", {"metadata": {"labels": labels}}, MERGE)
    assert got == code and words in message, message
    stored = api.get("Node", "n1")
    assert stored is not None and stored["metadata"]["labels"] == {"team": "a"}


def test_a_label_of_an_empty_value_is_kept_and_a_null_in_a_merge_patch_removes_it(api: KubeApiServer) -> None:
    api.add({"kind": "Node", "metadata": {"name": "n1", "labels": {"team": "a"}}})
    _send(api, "PATCH", "/api/v1/nodes/n1", {"metadata": {"labels": {LB_LABEL: ""}}}, MERGE)
    stored = api.get("Node", "n1")
    assert stored is not None and stored["metadata"]["labels"] == {"team": "a", LB_LABEL: ""}
    _send(api, "PATCH", "/api/v1/nodes/n1", {"metadata": {"labels": {LB_LABEL: None}}}, MERGE)
    stored = api.get("Node", "n1")
    assert stored is not None and stored["metadata"]["labels"] == {"team": "a"}


def test_the_first_capacityquota_crd_serves_v1alpha1_as_it_was_published() -> None:
    """cluster-autoscaler's first CapacityQuota CRD (kubernetes/autoscaler cluster-autoscaler/apis/config/
    crd/autoscaling.x-k8s.io_capacityquotas.yaml as generated before v1beta1) serves v1alpha1 alone: its
    spec.limits.resources has no maxProperties (v1beta1's MaxProperties=20 and its CEL rules came with
    v1beta1), and its status declares no field, so what a /status write puts there is pruned. The
    emulator's copy took v1beta1's spec whole and refused a quota of 21 resources the real server keeps."""
    alpha = ("autoscaling.x-k8s.io", "v1alpha1", "capacityquotas")
    installed = ["capacityquotas.autoscaling.x-k8s.io/v1alpha1"]
    with KubeApiServer(optional_resources=installed) as server, server.api_client() as c:
        custom = CustomObjectsApi(c)
        resources = {f"example.com/r{i}": "1" for i in range(21)} | {"cpu": "500m"}
        body = {"apiVersion": "autoscaling.x-k8s.io/v1alpha1", "kind": "CapacityQuota",
                "metadata": {"name": "many"}, "spec": {"limits": {"resources": resources}}}  # fmt: skip
        made = custom.create_cluster_custom_object(*alpha, body)
        assert made["spec"]["limits"]["resources"] == resources
        with pytest.raises(ApiException) as caught:
            custom.list_cluster_custom_object(*QUOTAS)
        assert caught.value.status == 404
        status = {"status": {"used": {"resources": {"cpu": "4"}}}}
        written = custom.patch_cluster_custom_object_status(*alpha, "many", status)
        assert not written.get("status")


def test_the_later_v1alpha1_capacityquota_crd_keeps_the_status_its_type_declares() -> None:
    """A later release of cluster-autoscaler's CapacityQuota CRD, still v1alpha1 alone, declares
    status.used and conditions (its v1alpha1 CapacityQuotaStatus; its quota controller writes them
    through v1alpha1): a /status write keeps the usage and refuses a condition without a reason. It is
    one CRD name with the first release: the two are never installed together."""
    alpha = ("autoscaling.x-k8s.io", "v1alpha1", "capacityquotas")
    installed = ["capacityquotas.autoscaling.x-k8s.io/v1alpha1+status"]
    with KubeApiServer(optional_resources=installed) as server, server.api_client() as c:
        custom = CustomObjectsApi(c)
        body = {"apiVersion": "autoscaling.x-k8s.io/v1alpha1", "kind": "CapacityQuota",
                "metadata": {"name": "q"}, "spec": {"limits": {"resources": {"cpu": "8"}}}}  # fmt: skip
        custom.create_cluster_custom_object(*alpha, body)
        status = {"status": {"used": {"resources": {"cpu": "4"}}}}
        written = custom.patch_cluster_custom_object_status(*alpha, "q", status)
        assert written["status"] == {"used": {"resources": {"cpu": "4"}}}
        bad = {"status": {"conditions": [{"type": "Valid", "status": "True",
                                          "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}  # fmt: skip
        with pytest.raises(ApiException) as caught:
            custom.patch_cluster_custom_object_status(*alpha, "q", bad)
        assert caught.value.status == 422 and "reason" in caught.value.body
        with pytest.raises(ValueError, match="one CRD name"):
            server.optional_resources = [*installed, "capacityquotas.autoscaling.x-k8s.io/v1alpha1"]


BETA_PROVREQS = ("autoscaling.x-k8s.io", "v1beta1", "provisioningrequests")


def test_provisioningrequests_are_served_as_v1beta1_too_deprecated(
    api: KubeApiServer, custom: CustomObjectsApi
) -> None:
    """Today's published CRD (kubernetes/autoscaler cluster-autoscaler/apis/config/crd/
    autoscaling.x-k8s.io_provisioningrequests.yaml) serves v1, the storage version, and v1beta1,
    ``served: true``, ``deprecated: true`` with ``deprecationWarning: autoscaling.k8s.io/v1beta1 API is
    deprecated`` (its own words, group and all), one schema, ``/status`` on both: the same objects through
    either version. The emulator served v1 alone, so v1beta1 answered 404 where a cluster answers, and a
    controller still on v1beta1 (Kueue before it moved to v1) could not be played against it."""
    assert "provisioningrequests.autoscaling.x-k8s.io" in api.optional_resources  # today's CRD
    custom.create_namespaced_custom_object(*PROVREQS[:2], "default", PROVREQS[2], provreq("r"))
    listed = custom.list_namespaced_custom_object(*BETA_PROVREQS[:2], "default", BETA_PROVREQS[2])
    assert listed["apiVersion"] == "autoscaling.x-k8s.io/v1beta1"
    assert [(i["metadata"]["name"], i["apiVersion"]) for i in listed["items"]] == [
        ("r", "autoscaling.x-k8s.io/v1beta1")
    ]
    # written through v1beta1 (its status too), read through v1 in the storage version
    beta = {**provreq("b"), "apiVersion": "autoscaling.x-k8s.io/v1beta1"}
    made = custom.create_namespaced_custom_object(*BETA_PROVREQS[:2], "default", BETA_PROVREQS[2], beta)
    assert made["apiVersion"] == "autoscaling.x-k8s.io/v1beta1"
    accepted = {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
                "lastTransitionTime": "2026-03-02T09:30:00Z", "observedGeneration": 1}  # fmt: skip
    custom.patch_namespaced_custom_object_status(
        *BETA_PROVREQS[:2], "default", BETA_PROVREQS[2], "b", {"status": {"conditions": [accepted]}}
    )
    v1 = custom.get_namespaced_custom_object(*PROVREQS[:2], "default", PROVREQS[2], "b")
    assert (v1["apiVersion"], v1["status"]["conditions"]) == ("autoscaling.x-k8s.io/v1", [accepted])
    assert (
        api.get("provisioningrequests.autoscaling.x-k8s.io", "b")["apiVersion"] == "autoscaling.x-k8s.io/v1"
    )
    # the spec stays immutable through v1beta1 too
    with pytest.raises(ApiException) as caught:
        patch = {"spec": {"provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io"}}
        custom.patch_namespaced_custom_object(*BETA_PROVREQS[:2], "default", BETA_PROVREQS[2], "b", patch)
    assert caught.value.status == 422
    # every answer through the deprecated version carries the CRD's warning, errors too; none through v1
    only_the_deprecated_version_warns(
        custom, BETA_PROVREQS, PROVREQS, "b", '299 - "autoscaling.k8s.io/v1beta1 API is deprecated"'
    )
    # a cluster with the older CRD (v1beta1 alone) serves that one in its place, never both
    api.optional_resources = ["provisioningrequests.autoscaling.x-k8s.io/v1beta1"]
    assert (
        custom.list_namespaced_custom_object(*BETA_PROVREQS[:2], "default", BETA_PROVREQS[2])["items"] == []
    )
    api.optional_resources = []
    with pytest.raises(ApiException) as caught:
        custom.list_namespaced_custom_object(*BETA_PROVREQS[:2], "default", BETA_PROVREQS[2])
    assert caught.value.status == 404


def test_the_v1beta1_only_provisioningrequest_crd_serves_v1beta1_alone_with_v1s_schema() -> None:
    """cluster-autoscaler's ProvisioningRequest CRD before v1 came (kubernetes/autoscaler cluster-autoscaler/
    apis/provisioningrequest/autoscaling.x-k8s.io/v1beta1/types.go, introduced 1.29.0) serves v1beta1
    alone, with the spec and status v1 later copied: v1 answers 404, a v1beta1 request is stored, its
    spec stays immutable, and a /status write takes its conditions and provisioningClassDetails and
    refuses a condition without a reason, as the v1 CRD does."""
    beta = ("autoscaling.x-k8s.io", "v1beta1", "provisioningrequests")
    installed = ["provisioningrequests.autoscaling.x-k8s.io/v1beta1"]
    with KubeApiServer(optional_resources=installed) as server, server.api_client() as c:
        custom = CustomObjectsApi(c)
        body = {"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "ProvisioningRequest",
                "metadata": {"name": "r"},
                "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                         "podSets": [{"podTemplateRef": {"name": "w"}, "count": 2}]}}  # fmt: skip
        made = custom.create_namespaced_custom_object(*beta[:2], "default", beta[2], body)
        assert made["apiVersion"] == "autoscaling.x-k8s.io/v1beta1"
        with pytest.raises(ApiException) as caught:
            custom.list_namespaced_custom_object(
                "autoscaling.x-k8s.io", "v1", "default", "provisioningrequests"
            )
        assert caught.value.status == 404
        with pytest.raises(ApiException) as caught:
            patch = {"spec": {"provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io"}}
            custom.patch_namespaced_custom_object(*beta[:2], "default", beta[2], "r", patch)
        assert caught.value.status == 422
        accepted = {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
                    "lastTransitionTime": "2026-03-02T09:30:00Z", "observedGeneration": 1}  # fmt: skip
        status = {"status": {"conditions": [accepted], "provisioningClassDetails": {"k": "v"}}}
        written = custom.patch_namespaced_custom_object_status(*beta[:2], "default", beta[2], "r", status)
        assert written["status"] == status["status"]
        with pytest.raises(ApiException) as caught:
            bad = {"status": {"conditions": [{**accepted, "reason": ""}]}}
            custom.patch_namespaced_custom_object_status(*beta[:2], "default", beta[2], "r", bad)
        assert caught.value.status == 422
