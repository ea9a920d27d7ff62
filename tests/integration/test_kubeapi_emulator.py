"""The local Kubernetes API emulator, driven only through the official ``kubernetes`` client."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client import ApiClient, CoreV1Api, EventsV1Api, PolicyV1Api
from kubernetes.client.exceptions import ApiException

from spillway.local.kubeapi import KubeApiServer
from spillway.model.k8s import CORDONED_BY_SPILLWAY, DRAINING_TAINT

SMP = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"


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
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
        "status": status,
    }


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


def test_injected_429_carries_retry_after_and_only_hits_its_prefix(
    api: KubeApiServer, core: CoreV1Api
) -> None:
    api.faults.fail_next(1, status=429, path_prefix="/api/v1/nodes")
    assert core.list_namespaced_pod("default").items == []  # other paths are untouched
    with pytest.raises(ApiException) as caught:
        core.create_node(node("n1"))
    assert caught.value.status == 429
    assert caught.value.headers["Retry-After"] == "1"
    assert error_body(caught.value)["reason"] == "TooManyRequests"
    assert api.get("Node", "n1") is None
    # urllib3 under the official client retries a GET answered 429 with Retry-After by itself
    api.faults.fail_next(1, status=429, path_prefix="/api/v1/nodes")
    assert core.list_node().items == []
    assert [(r.method, r.status) for r in api.requests if r.path == "/api/v1/nodes"][-2:] == [
        ("GET", 429),
        ("GET", 200),
    ]


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
    for i in range(3):
        api.add(pod(f"a-{i}", labels={"app": "a"}, phase="Running", ready=True))
        api.add(pod(f"b-{i}", labels={"app": "b"}, phase="Running", ready=True))
    api.add(pdb("min-half", {"app": "a"}, minAvailable="50%"))  # ceil(1.5) = 2 must stay
    api.add(pdb("max-half", {"app": "b"}, maxUnavailable="50%"))  # ceil(1.5) = 2 may go
    budgets = {
        b.metadata.name: b.status for b in policy.list_pod_disruption_budget_for_all_namespaces().items
    }
    assert (budgets["min-half"].desired_healthy, budgets["min-half"].disruptions_allowed) == (2, 1)
    assert (budgets["max-half"].desired_healthy, budgets["max-half"].disruptions_allowed) == (1, 2)


def test_eviction_without_a_budget_removes_the_pod_and_a_missing_pod_is_404(
    api: KubeApiServer, core: CoreV1Api, policy: PolicyV1Api
) -> None:
    api.add(pod("lonely", labels={"app": "solo"}, node="n1", phase="Running", ready=True))
    api.add(pdb("other", {"app": "web"}, minAvailable=1))
    evict(core, "lonely")
    assert api.requests[-1].status == 201
    assert core.list_namespaced_pod("default").items == []
    with pytest.raises(ApiException) as caught:
        evict(core, "lonely")
    assert caught.value.status == 404
    assert error_body(caught.value)["reason"] == "NotFound"


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


def test_default_namespaces_exist(core: CoreV1Api) -> None:
    names = {ns.metadata.name for ns in core.list_namespace().items}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names
    assert core.read_namespace("kube-system").status.phase == "Active"


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
