"""The Kubernetes adapter through the official client, against the local API emulator (real HTTP)."""

from __future__ import annotations

import base64
import datetime as dt
import logging
import secrets
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from fakes import replaced_between_pages

from spillway.adapters.eks_auth import TOKEN_PREFIX, EksTokenProvider
from spillway.adapters.kube import KubeClient
from spillway.errors import (
    EvictionBlocked,
    EvictionRefused,
    EvictionThrottled,
    KubeAuthError,
    KubeConflict,
    KubeError,
    KubeUnavailable,
    ListExpired,
    NodeNotFound,
    ObjectNotFound,
    ObjectReplaced,
    PodNotFound,
)
from spillway.local import objects as kobj
from spillway.local.kubeapi import KubeApiServer, RequestRecord
from spillway.model.cluster import cordon_digest
from spillway.model.k8s import (
    CANDIDATE_TAINT,
    CORDONED_BY_SPILLWAY,
    DRAINING_TAINT,
    BatchJob,
    CapacityQuota,
    ElasticPolicy,
    PaddleJob,
    PyTorchJob,
    VolcanoPodGroup,
)

NOW = dt.datetime(2026, 3, 2, 9, 30, tzinfo=dt.UTC)
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"  # the node lifecycle controller's cordon taint


@pytest.fixture
def server() -> Iterator[KubeApiServer]:
    srv = KubeApiServer().start()
    try:
        yield srv
    finally:
        srv.stop()


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def kube(server: KubeApiServer, sleeps: Sleeps) -> KubeClient:
    return KubeClient.for_url(server.url, sleep=sleeps, clock=lambda: NOW)


# --- helpers over the emulator's request log ----------------------------------------------------


def requests_to(server: KubeApiServer, path: str, method: str | None = None) -> list[RequestRecord]:
    """The logged requests to exactly ``path`` (and ``method``), oldest first."""
    return [r for r in server.requests if r.path == path and (method is None or r.method == method)]


def add_pods(server: KubeApiServer, count: int, *, node: str | None = "n1") -> list[str]:
    keys = []
    for i in range(count):
        pod = kobj.pod(f"job-{i:05d}", f"team-{i % 7}", node_name=node)
        server.add(pod)
        keys.append(f"{pod['metadata']['namespace']}/{pod['metadata']['name']}")
    return keys


def add_node(server: KubeApiServer, name: str = "n1", **kwargs: Any) -> dict[str, Any]:
    node: dict[str, Any] = kobj.node(name, instance=kobj.instance_id(name), **kwargs)
    server.add(node)
    return node


# --- reads ----------------------------------------------------------------------------------------


def test_lists_3000_pods_exactly_once_in_pages_of_500(server: KubeApiServer, kube: KubeClient) -> None:
    expected = add_pods(server, 3000)

    stream = kube.iter_pods()
    first = next(stream)
    assert len(requests_to(server, "/api/v1/pods")) == 1, "the first page is yielded before the next is asked"
    pods = [first, *stream]

    keys = [f"{p.metadata.namespace}/{p.metadata.name}" for p in pods]
    assert len(keys) == 3000
    assert sorted(keys) == sorted(expected)
    calls = requests_to(server, "/api/v1/pods", "GET")
    assert len(calls) == 6
    assert all(c.query.get("limit") == "500" for c in calls)
    assert "continue" not in calls[0].query
    assert all(c.query.get("continue") for c in calls[1:])


def test_list_helpers_return_models(server: KubeApiServer, kube: KubeClient) -> None:
    add_node(server, "n1")
    add_node(server, "n2")
    add_pods(server, 3, node="n1")
    add_pods_other = kobj.pod("web-0", "shop", node_name="n2", labels={"app": "web"})
    server.add(add_pods_other)
    server.add(kobj.pdb("web", "shop", {"app": "web"}))

    assert sorted(n.metadata.name for n in kube.list_nodes()) == ["n1", "n2"]
    assert len(kube.list_pods()) == 4
    assert [(p.metadata.namespace, p.metadata.name) for p in kube.list_pdbs()] == [("shop", "web")]
    on_n2 = kube.pods_on_node("n2")
    assert [p.metadata.name for p in on_n2] == ["web-0"]
    assert requests_to(server, "/api/v1/pods")[-1].query["fieldSelector"] == "spec.nodeName=n2"

    node = kube.get_node("n1")
    assert node.metadata.name == "n1" and node.spec.provider_id
    with pytest.raises(NodeNotFound, match="n9"):
        kube.get_node("n9")


def test_a_resizing_pods_container_statuses_reach_the_model_as_the_kubelet_writes_them(
    server: KubeApiServer, kube: KubeClient
) -> None:
    """A pod resized from 4 CPUs to 250m (its spec already says so): the kubelet admits the shrink at
    once and writes through pods/status that it allocated 250m while the container still runs with 4.
    Conditions merge by type; a later write to the pod itself keeps the status."""
    from kubernetes.client import CoreV1Api

    from spillway.model.cluster import PodInfo

    def container_status(allocated: str, actual: str) -> dict[str, Any]:
        return {
            "name": "main",
            "image": "busybox",
            "imageID": "",
            "ready": True,
            "restartCount": 0,
            "allocatedResources": {"cpu": allocated, "memory": "2Gi"},
            "resources": {"requests": {"cpu": actual, "memory": "2Gi"}},
        }

    raw = kobj.pod("api-0", "team-a", cpu="250m", node_name="n1")
    raw["status"]["containerStatuses"] = [container_status("4", "4")]
    server.add(raw)
    with server.api_client() as client:
        core = CoreV1Api(client)
        status = {
            "conditions": [{"type": "PodResizeInProgress", "status": "True"}],
            "containerStatuses": [container_status("250m", "4")],
        }
        core.patch_namespaced_pod_status("api-0", "team-a", {"status": status})
        core.patch_namespaced_pod("api-0", "team-a", {"metadata": {"labels": {"tier": "api"}}})

    (pod,) = kube.list_pods()
    (kept,) = pod.status.container_statuses
    assert kept.allocated_resources == {"cpu": "250m", "memory": "2Gi"}
    assert kept.resources is not None and kept.resources.requests == {"cpu": "4", "memory": "2Gi"}
    assert {c.type for c in pod.status.conditions} == {"PodScheduled", "Ready", "PodResizeInProgress"}
    assert PodInfo.from_pod(pod).requests["cpu"] == 4000  # max(desired 0.25, allocated 0.25, actual 4)


def test_a_stream_whose_continue_token_expires_raises_rather_than_mix_two_lists(
    server: KubeApiServer,
) -> None:
    """The first page is handed out already; after a 410 the rest can only come from another list (etcd
    compacted the revision), so the restart was merged with the first pass by uid, and the replaced pod
    came out twice: bound to its old node, and pending (a phantom scale-up). A client that needs a
    consistent list must start it again without ``continue`` (Kubernetes API concepts, "Retrieving large
    results sets in chunks"): the stream says so, and the reader drops what it had. (Review r15-3.)"""
    for i in range(30):
        server.add(kobj.pod(f"web-{i:02d}", "shop", node_name="n-old"))
    kube = KubeClient.for_url(server.url, page_size=10, sleep=Sleeps())
    replaced_between_pages(server, kube)
    stream = kube.iter_pods()
    first = [next(stream) for _ in range(10)]  # the first page

    with pytest.raises(ListExpired, match=r"list pods: .*expired") as expired:
        list(stream)

    assert isinstance(expired.value, KubeUnavailable)  # a reader that does not start again fails safe
    assert len(first) == 10


def test_a_list_whose_continue_token_expires_is_read_again_from_the_top_and_only_that_pass_kept(
    server: KubeApiServer,
) -> None:
    for i in range(30):
        server.add(kobj.pod(f"web-{i:02d}", "shop", node_name="n-old"))
    kube = KubeClient.for_url(server.url, page_size=10, sleep=Sleeps())
    victim = replaced_between_pages(server, kube)
    server.clear_requests()

    pods = {f"{p.metadata.namespace}/{p.metadata.name}": p for p in kube.list_pods()}
    assert len(pods) == 30 and len(kube.list_pods()) == 30, "each pod once"
    assert pods[victim].spec.node_name is None, "the pod as the second list saw it, replaced and pending"
    calls = requests_to(server, "/api/v1/pods", "GET")
    assert [bool(c.query.get("continue")) for c in calls[:5]] == [False, True, False, True, True]
    assert calls[1].status == 410


def test_a_list_whose_token_keeps_expiring_is_kube_unavailable_after_three_passes(
    server: KubeApiServer, kube: KubeClient
) -> None:
    """Bounded: the third expiry gives up, as plain KubeUnavailable (the name a drain's Retry matches)."""
    add_pods(server, 1200)
    replaced_between_pages(server, kube, times=100)
    server.clear_requests()

    with pytest.raises(KubeUnavailable, match=r"list pods: continue token expired 3 times") as failed:
        kube.pods_on_node("n1")

    assert type(failed.value) is KubeUnavailable
    assert [bool(c.query.get("continue")) for c in requests_to(server, "/api/v1/pods", "GET")] == [
        False, True, False, True, False, True
    ]  # fmt: skip


# --- retries and errors ---------------------------------------------------------------------------


def test_server_errors_are_retried_with_backoff_then_succeed(
    server: KubeApiServer, kube: KubeClient, sleeps: Sleeps
) -> None:
    add_node(server, "n1")
    server.faults.fail_next(2, status=500)

    assert kube.get_node("n1").metadata.name == "n1"

    assert len(requests_to(server, "/api/v1/nodes/n1", "GET")) == 3
    assert len(sleeps) == 2
    assert 0.125 <= sleeps[0] <= 0.25 and 0.25 <= sleeps[1] <= 0.5, "exponential, with jitter"


def test_persistent_server_errors_surface_as_kube_unavailable(
    server: KubeApiServer, kube: KubeClient, sleeps: Sleeps
) -> None:
    add_node(server, "n1")
    server.faults.fail_next(100, status=503)

    with pytest.raises(KubeUnavailable, match=r"get node n1.*4 attempts.*503"):
        kube.get_node("n1")

    assert len(requests_to(server, "/api/v1/nodes/n1", "GET")) == 4
    assert len(sleeps) == 3


def test_429_waits_at_least_retry_after(server: KubeApiServer, kube: KubeClient, sleeps: Sleeps) -> None:
    add_node(server, "n1")
    server.faults.fail_next(1, status=429)  # the emulator sends Retry-After: 1
    assert kube.list_nodes()[0].metadata.name == "n1"
    assert sleeps == [1.0]


@pytest.mark.parametrize("status", [500, 504])
def test_a_server_error_waits_at_least_its_retry_after(
    server: KubeApiServer, kube: KubeClient, sleeps: Sleeps, status: int
) -> None:
    # the API server writes Retry-After for every Status carrying retryAfterSeconds (apiserver
    # handlers/responsewriters ErrorNegotiated): a 500 ServerTimeout, a 504 (the eviction's "couldn't
    # update PodDisruptionBudget due to conflicts" asks for 10 s); client-go waits it for 429 and any
    # 5xx (rest/request.go checkWait), where a fraction of a second would spend the attempts at once
    add_node(server, "n1")
    server.faults.fail_next(1, status=status, retry_after=3)
    assert kube.get_node("n1").metadata.name == "n1"
    assert sleeps == [3.0]


def test_timeouts_are_retried_then_kube_unavailable(server: KubeApiServer, sleeps: Sleeps) -> None:
    add_node(server, "n1")
    kube = KubeClient.for_url(server.url, sleep=sleeps, request_timeout=0.2)
    server.faults.delay(1.0)
    with pytest.raises(KubeUnavailable, match=r"get node n1.*Timeout"):
        kube.get_node("n1")
    assert len(sleeps) == 3
    server.faults.delay(0)
    assert kube.get_node("n1").metadata.name == "n1"


def test_connection_refused_is_kube_unavailable(sleeps: Sleeps) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    kube = KubeClient.for_url(f"http://127.0.0.1:{port}", sleep=sleeps)
    with pytest.raises(KubeUnavailable, match="list nodes"):
        kube.list_nodes()
    assert len(sleeps) == 3


def test_401_is_an_auth_error_without_the_token(server: KubeApiServer, sleeps: Sleeps) -> None:
    add_node(server, "n1")
    kube = KubeClient.for_url(server.url, token="very-secret-token", sleep=sleeps)
    server.faults.fail_next(1, status=401)
    with pytest.raises(KubeAuthError, match=r"get node n1.*401") as err:
        kube.get_node("n1")
    assert "very-secret-token" not in str(err.value)
    assert err.value.__cause__ is None and err.value.__suppress_context__
    assert sleeps == [], "credentials refused are not retried"

    server.faults.fail_next(1, status=403)
    with pytest.raises(KubeAuthError):
        kube.delete_node("n1")


def test_401_gets_one_retry_with_a_freshly_signed_token(server: KubeApiServer) -> None:
    add_node(server, "n1")
    tokens = iter(f"token-{i}" for i in range(10))
    current = ["token-initial"]

    def reauth() -> None:
        current[0] = next(tokens)

    kube = KubeClient.for_url(server.url, token=lambda: current[0], reauth=reauth, sleep=Sleeps())
    server.faults.fail_next(1, status=401)
    assert kube.get_node("n1").metadata.name == "n1"
    assert server.last_token == "token-0"

    server.faults.fail_next(2, status=401)
    with pytest.raises(KubeAuthError):
        kube.get_node("n1")


def test_refreshed_eks_token_is_sent_without_rebuilding_the_client(
    server: KubeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto import mock_aws

    add_node(server, "n1")
    clock = [1_772_442_000.0]
    # botocore stamps X-Amz-Date from its own clock: drive it from ours so tokens differ as they would.
    monkeypatch.setattr(
        "botocore.auth.get_current_datetime",
        lambda remove_tzinfo=True: dt.datetime.fromtimestamp(clock[0], dt.UTC).replace(tzinfo=None),
    )
    with mock_aws():
        import boto3

        provider = EksTokenProvider("prod", "us-east-1", boto3.Session(), clock=lambda: clock[0])
        kube = KubeClient.for_url(server.url, token=provider.token)

        kube.get_node("n1")
        first = server.last_token
        assert first is not None and first.startswith(TOKEN_PREFIX)
        clock[0] += 5 * 60
        kube.list_nodes()
        assert server.last_token == first, "cached within its lifetime"

        clock[0] += 5 * 60
        kube.list_nodes()
        second = server.last_token
        assert second is not None and second != first
        body = second[len(TOKEN_PREFIX) :]
        url = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
        assert "X-Amz-Date=20260302T" in url and "x-k8s-aws-id" in url


def test_kubeconfig_from_secrets_manager_reaches_the_server(server: KubeApiServer) -> None:
    from moto import mock_aws

    add_node(server, "n1")
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "lab",
        "clusters": [{"name": "lab", "cluster": {"server": server.url}}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "robot"}}],
        "users": [{"name": "robot", "user": {"token": "robot-token"}}],
    }
    with mock_aws():
        import json

        import boto3

        session = boto3.Session(region_name="us-east-1")
        session.client("secretsmanager").create_secret(Name="kc", SecretString=json.dumps(kubeconfig))
        kube = KubeClient.from_secret("kc", session)
    assert [n.metadata.name for n in kube.list_nodes()] == ["n1"]
    assert server.last_token == "robot-token"


# --- writes ---------------------------------------------------------------------------------------


def node_obj(server: KubeApiServer, name: str) -> dict[str, Any]:
    obj = server.get("Node", name)
    assert obj is not None
    return dict(obj)


def test_cordon_and_uncordon_round_trip(server: KubeApiServer, kube: KubeClient) -> None:
    add_node(server, "n1")

    assert kube.cordon("n1", "idle for 10m") is True
    obj = node_obj(server, "n1")
    assert obj["spec"]["unschedulable"] is True
    assert obj["metadata"]["annotations"][CORDONED_BY_SPILLWAY] == "2026-03-02T09:30:00Z idle for 10m"
    patches = requests_to(server, "/api/v1/nodes/n1", "PATCH")
    assert len(patches) == 1, "unschedulable and the annotation in one patch"
    assert patches[0].content_type == "application/merge-patch+json"
    assert kube.get_node("n1").spec.unschedulable

    assert kube.cordon("n1", "idle for 10m") is True  # already ours, the same words: nothing to do
    assert len(requests_to(server, "/api/v1/nodes/n1", "PATCH")) == 1
    # another reason takes the node over: the annotation only (a Spot warning's drain after a plan's)
    assert kube.cordon("n1", "held drain: spot interruption warning e-1") is True
    assert len(requests_to(server, "/api/v1/nodes/n1", "PATCH")) == 2
    assert node_obj(server, "n1")["spec"]["unschedulable"] is True
    assert node_obj(server, "n1")["metadata"]["annotations"][CORDONED_BY_SPILLWAY] == (
        "2026-03-02T09:30:00Z held drain: spot interruption warning e-1"
    )

    assert kube.uncordon("n1") is True
    obj = node_obj(server, "n1")
    assert not obj["spec"].get("unschedulable")
    assert CORDONED_BY_SPILLWAY not in obj["metadata"].get("annotations", {})
    assert kube.uncordon("n1") is False  # no longer ours


def test_a_give_backs_cordon_is_written_only_on_a_schedulable_node(
    server: KubeApiServer, kube: KubeClient
) -> None:
    """A give-back cordons only a Node schedulable when its patch is applied (the read and the patch are
    one resourceVersion): its own cordon, found again by its retry, is its own (nothing written); a
    drain's, or a person's, is left as it is and is not its own."""
    mine, drain = "gang give-back ml/train (attempt spillway-1)", "drain interrupt-i-0abc: rebalance"
    for name in ("free", "drained"):
        add_node(server, name)
    add_node(server, "manual", unschedulable=True)
    assert kube.cordon("drained", drain) is True

    assert kube.cordon("free", mine, only_if_schedulable=True) is True
    assert kube.cordon("free", mine, only_if_schedulable=True) is True  # a retry: its own, as it was
    assert kube.cordon("drained", mine, only_if_schedulable=True) is False
    assert kube.cordon("manual", mine, only_if_schedulable=True) is False

    assert len(requests_to(server, "/api/v1/nodes/free", "PATCH")) == 1
    assert len(requests_to(server, "/api/v1/nodes/drained", "PATCH")) == 1  # the drain's own
    assert requests_to(server, "/api/v1/nodes/manual", "PATCH") == []
    annotations = {n: node_obj(server, n)["metadata"].get("annotations", {}) for n in ("free", "drained")}
    assert annotations["free"][CORDONED_BY_SPILLWAY] == f"2026-03-02T09:30:00Z {mine}"
    assert annotations["drained"][CORDONED_BY_SPILLWAY] == f"2026-03-02T09:30:00Z {drain}"


def test_a_sweeps_cordon_takes_over_only_another_sweeps(server: KubeApiServer, kube: KubeClient) -> None:
    """The gang sweep's cordon (``take_over_only``) takes over a dead sweep's, whose words begin the same,
    and leaves a drain's or a give-back's as it is, not its own, as a person's."""
    kind = "gang orphan "
    mine, dead = f"{kind}i-0abc (plan p-2)", f"{kind}i-0abc (plan p-1)"
    others = {
        "drained": "held drain spot-i-0abc: spot interruption warning w-1",
        "given": "gang give-back a/b (attempt x)",
    }
    for name in ("free", "swept", *others):
        add_node(server, name)
    assert kube.cordon("swept", dead)
    for name, reason in others.items():
        assert kube.cordon(name, reason)

    assert kube.cordon("free", mine, take_over_only=kind) is True
    assert kube.cordon("swept", mine, take_over_only=kind) is True
    assert kube.cordon("swept", mine, take_over_only=kind) is True  # a retry: its own, as it was
    for name in others:
        assert kube.cordon(name, mine, take_over_only=kind) is False

    assert len(requests_to(server, "/api/v1/nodes/swept", "PATCH")) == 2  # the dead sweep's, then its
    for name in others:
        assert len(requests_to(server, f"/api/v1/nodes/{name}", "PATCH")) == 1  # its holder's own
    annotations = {n: node_obj(server, n)["metadata"]["annotations"] for n in ("free", "swept", *others)}
    assert annotations["free"][CORDONED_BY_SPILLWAY] == f"2026-03-02T09:30:00Z {mine}"
    assert annotations["swept"][CORDONED_BY_SPILLWAY] == f"2026-03-02T09:30:00Z {mine}"
    for name, reason in others.items():
        assert annotations[name][CORDONED_BY_SPILLWAY] == f"2026-03-02T09:30:00Z {reason}"


def test_an_uncordon_for_a_reason_takes_off_only_a_cordon_made_for_it(
    server: KubeApiServer, kube: KubeClient
) -> None:
    """A give-back takes off its cordon only while the Node still carries its words: a drain that took
    the Node over meanwhile keeps its cordon."""
    mine, drain = "scale-up back-off gpu (up-p1)", "drain interrupt-i-0abc: rebalance"
    add_node(server, "n1")
    assert kube.cordon("n1", drain) is True

    assert kube.uncordon("n1", if_reason=mine) is False
    assert node_obj(server, "n1")["spec"]["unschedulable"] is True
    assert len(requests_to(server, "/api/v1/nodes/n1", "PATCH")) == 1

    assert kube.cordon("n1", mine) is True  # taken over again (as a drain would)
    assert kube.uncordon("n1", if_reason=mine) is True
    obj = node_obj(server, "n1")
    assert not obj["spec"].get("unschedulable")
    assert CORDONED_BY_SPILLWAY not in obj["metadata"].get("annotations", {})


def test_an_uncordon_lifts_the_draining_taint_in_the_same_patch_and_only_with_its_cordon(
    server: KubeApiServer, kube: KubeClient
) -> None:
    """The cordon and the draining taint are one hold: a drain that took the node over keeps both, and
    an uncordon that takes the cordon off takes the taint with it, in one guarded patch, other taints
    kept. (Taken off in two patches, the taint went first, whoever's cordon then held the node.)"""
    gpu_taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    mine, warning = "drain dn-p1: idle", "held drain spot-i-0abc: spot interruption warning"
    add_node(server, "n1", taints=[gpu_taint])
    assert kube.cordon("n1", warning) is True and kube.add_draining_taint("n1") is True
    patches = len(requests_to(server, "/api/v1/nodes/n1", "PATCH"))

    assert kube.uncordon("n1", if_reason=mine) is False
    obj = node_obj(server, "n1")
    assert obj["spec"]["unschedulable"] is True
    # the cordon's taint is the node lifecycle controller's, there while the node is cordoned
    assert [t["key"] for t in obj["spec"]["taints"]] == ["nvidia.com/gpu", UNSCHEDULABLE, DRAINING_TAINT]
    assert len(requests_to(server, "/api/v1/nodes/n1", "PATCH")) == patches

    assert kube.uncordon("n1", if_reason=warning) is True
    obj = node_obj(server, "n1")
    assert not obj["spec"].get("unschedulable") and obj["spec"]["taints"] == [gpu_taint]
    assert CORDONED_BY_SPILLWAY not in obj["metadata"].get("annotations", {})
    assert len(requests_to(server, "/api/v1/nodes/n1", "PATCH")) == patches + 1


def test_an_uncordon_for_a_digest_takes_off_only_the_cordon_the_plan_saw(
    server: KubeApiServer, kube: KubeClient
) -> None:
    """The scale-up's uncordon names the cordon its plan saw by digest (the whole value, time
    included): the same words written at another time (by an older build, which stamped every retry)
    are another cordon and stay with their taint; the one seen comes off with its taint. A retried
    cordon of the same words keeps its first value, so a plan that saw it still names it."""
    add_node(server, "n1")
    assert kube.cordon("n1", "drain dn-p1: idle") is True and kube.add_draining_taint("n1") is True
    before = node_obj(server, "n1")["metadata"]["annotations"][CORDONED_BY_SPILLWAY]
    seen = cordon_digest(before)

    kube._clock = lambda: dt.datetime(2031, 1, 1, tzinfo=dt.UTC)  # a later second
    assert kube.cordon("n1", "drain dn-p1: idle") is True  # a retry: its first value stays
    assert node_obj(server, "n1")["metadata"]["annotations"][CORDONED_BY_SPILLWAY] == before
    restamped = node_obj(server, "n1")
    restamped["metadata"]["annotations"][CORDONED_BY_SPILLWAY] = "2031-01-01T00:00:00Z drain dn-p1: idle"
    server.update("Node", restamped)
    assert kube.uncordon("n1", if_digest=seen) is False
    assert node_obj(server, "n1")["spec"]["unschedulable"] is True
    assert [t["key"] for t in node_obj(server, "n1")["spec"]["taints"]] == [UNSCHEDULABLE, DRAINING_TAINT]

    now = cordon_digest(node_obj(server, "n1")["metadata"]["annotations"][CORDONED_BY_SPILLWAY])
    assert kube.uncordon("n1", if_digest=now) is True
    obj = node_obj(server, "n1")
    assert not obj["spec"].get("unschedulable") and obj["spec"].get("taints", []) == []


def test_a_human_cordon_is_never_undone(server: KubeApiServer, kube: KubeClient) -> None:
    add_node(server, "manual", unschedulable=True)

    assert kube.cordon("manual", "scale-down") is False
    assert kube.uncordon("manual") is False

    obj = node_obj(server, "manual")
    assert obj["spec"]["unschedulable"] is True
    assert CORDONED_BY_SPILLWAY not in obj["metadata"].get("annotations", {})
    assert requests_to(server, "/api/v1/nodes/manual", "PATCH") == []


def test_cordon_of_a_missing_node(kube: KubeClient) -> None:
    with pytest.raises(NodeNotFound):
        kube.cordon("ghost")
    with pytest.raises(NodeNotFound):
        kube.uncordon("ghost")


def test_draining_taint_add_and_remove_keep_other_taints(server: KubeApiServer, kube: KubeClient) -> None:
    gpu_taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    add_node(server, "n1", taints=[gpu_taint])

    assert kube.add_draining_taint("n1") is True
    assert kube.add_draining_taint("n1") is False
    taints = node_obj(server, "n1")["spec"]["taints"]
    assert gpu_taint in taints
    assert {"key": DRAINING_TAINT, "effect": "NoSchedule"} in taints
    assert len(taints) == 2

    assert kube.remove_draining_taint("n1") is True
    assert kube.remove_draining_taint("n1") is False
    assert node_obj(server, "n1")["spec"]["taints"] == [gpu_taint]
    patches = requests_to(server, "/api/v1/nodes/n1", "PATCH")
    assert len(patches) == 2
    assert {p.content_type for p in patches} == {"application/merge-patch+json"}


def test_candidate_taint_is_set_once_lifted_once_and_keeps_the_draining_and_other_taints(
    server: KubeApiServer, kube: KubeClient
) -> None:
    gpu_taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    add_node(server, "n1", taints=[gpu_taint])
    soft = {"key": CANDIDATE_TAINT, "effect": "PreferNoSchedule"}

    assert kube.set_candidate_taint("n1", True) is True
    assert kube.set_candidate_taint("n1", True) is False
    assert node_obj(server, "n1")["spec"]["taints"] == [gpu_taint, soft]
    assert kube.add_draining_taint("n1") is True

    assert kube.set_candidate_taint("n1", False) is True
    assert kube.set_candidate_taint("n1", False) is False
    assert node_obj(server, "n1")["spec"]["taints"] == [
        gpu_taint,
        {"key": DRAINING_TAINT, "effect": "NoSchedule"},
    ]
    assert len(requests_to(server, "/api/v1/nodes/n1", "PATCH")) == 3
    with pytest.raises(NodeNotFound):
        kube.set_candidate_taint("ghost", True)


def test_taint_update_retries_on_a_concurrent_change(
    server: KubeApiServer, kube: KubeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Someone adds a taint between our read and our write: ours must not wipe theirs."""
    add_node(server, "n1")
    other = server.api_client()
    from kubernetes.client import CoreV1Api

    real_read = kube._core.read_node
    raced: list[int] = []

    def read_then_race(*args: Any, **kwargs: Any) -> Any:
        resp = real_read(*args, **kwargs)
        if not raced:
            raced.append(1)
            CoreV1Api(other).patch_node(
                "n1",
                {"spec": {"taints": [{"key": "team", "value": "ml", "effect": "NoSchedule"}]}},
                _content_type="application/merge-patch+json",
                _preload_content=False,  # the client's own models reject the fixture's partial nodeInfo
            )
        return resp

    monkeypatch.setattr(kube._core, "read_node", read_then_race)

    assert kube.add_draining_taint("n1") is True
    taints = node_obj(server, "n1")["spec"]["taints"]
    assert {"key": "team", "value": "ml", "effect": "NoSchedule"} in taints
    assert {"key": DRAINING_TAINT, "effect": "NoSchedule"} in taints
    assert len(requests_to(server, "/api/v1/nodes/n1", "PATCH")) >= 2, "the stale write was refused"


def _web_pod(name: str) -> dict[str, Any]:
    pod: dict[str, Any] = kobj.pod(
        name, "shop", node_name="n1", owner=("ReplicaSet", "web"), labels={"app": "web"}
    )
    return pod


def test_eviction_blocked_by_a_budget_then_allowed_once_it_frees(
    server: KubeApiServer, kube: KubeClient, sleeps: Sleeps
) -> None:
    server.add(_web_pod("web-0"))
    server.add(_web_pod("web-1"))
    server.add(kobj.pdb("web", "shop", {"app": "web"}, min_available=2))

    with pytest.raises(EvictionBlocked, match=r"evict pod shop/web-0.*disruption budget"):
        kube.evict("shop", "web-0")
    evictions = requests_to(server, "/api/v1/namespaces/shop/pods/web-0/eviction", "POST")
    assert len(evictions) == 1, "a blocked eviction is an answer, not a failure to retry"
    assert sleeps == []
    assert server.get("Pod", "web-0", namespace="shop") is not None

    server.add(_web_pod("web-2"))  # a third healthy pod: one disruption allowed
    server.kubelet_exit_delay = 3600  # the pod stays terminating: its grace period shows
    kube.evict("shop", "web-0", grace_period_seconds=20)
    going = server.get("Pod", "web-0", namespace="shop")
    assert going is not None and going["metadata"]["deletionGracePeriodSeconds"] == 20

    with pytest.raises(PodNotFound):
        kube.evict("shop", "no-such-pod")


def test_a_pod_under_two_budgets_is_refused_at_once_not_retried_as_an_outage(
    server: KubeApiServer, kube: KubeClient, sleeps: Sleeps
) -> None:
    # the eviction subresource answers 500 to every attempt ("This pod has more than one
    # PodDisruptionBudget, which the eviction subresource does not support."): a standing refusal
    pod = _web_pod("web-0")
    pod["metadata"]["labels"]["tier"] = "front"
    server.add(pod)
    server.add(kobj.pdb("by-app", "shop", {"app": "web"}, max_unavailable=1))
    server.add(kobj.pdb("by-tier", "shop", {"tier": "front"}, max_unavailable=1))

    with pytest.raises(EvictionRefused, match=r"evict pod shop/web-0.*more than one PodDisruptionBudget"):
        kube.evict("shop", "web-0")
    assert len(requests_to(server, "/api/v1/namespaces/shop/pods/web-0/eviction", "POST")) == 1
    assert sleeps == []
    # any other 500 is still the server failing: retried, then KubeUnavailable
    server.faults.fail_next(100, status=500, path_prefix="/api/v1/namespaces/shop/pods/web-1/eviction")
    server.add(_web_pod("web-1"))
    with pytest.raises(KubeUnavailable, match=r"evict pod shop/web-1.*4 attempts"):
        kube.evict("shop", "web-1")


def test_read_pod_reads_one_pod_by_name_through_a_list_of_its_namespace(
    server: KubeApiServer, kube: KubeClient
) -> None:
    """A drain reads a pod again before its eviction with the ``list`` on pods its RBAC grants: a list
    of the pod's namespace whose field selector names it (the API server reads that one key)."""
    server.add(_web_pod("web-0"))
    server.add(_web_pod("web-01"))
    server.add(kobj.pod("web-0", "other", node_name="n1"))

    pod = kube.read_pod("shop", "web-0")

    assert pod is not None and (pod.metadata.namespace, pod.metadata.name) == ("shop", "web-0")
    assert kube.read_pod("shop", "gone") is None
    asked = requests_to(server, "/api/v1/namespaces/shop/pods", "GET")
    assert [r.query.get("fieldSelector") for r in asked] == ["metadata.name=web-0", "metadata.name=gone"]


def test_an_eviction_naming_a_uid_leaves_a_pod_made_again_under_the_name(
    server: KubeApiServer, kube: KubeClient, sleeps: Sleeps
) -> None:
    # the uid is sent as DeleteOptions.preconditions.uid; the server answers 409 for another pod of
    # that name, which is the listed pod gone: PodNotFound at once, the new pod left running
    listed = server.add(_web_pod("web-0"))["metadata"]["uid"]
    server.delete("Pod", "web-0", namespace="shop")
    again = server.add(_web_pod("web-0"))
    assert again["metadata"]["uid"] != listed

    with pytest.raises(PodNotFound, match=r"evict pod shop/web-0.*409"):
        kube.evict("shop", "web-0", grace_period_seconds=20, uid=listed)
    assert len(requests_to(server, "/api/v1/namespaces/shop/pods/web-0/eviction", "POST")) == 1
    assert sleeps == []
    kept = server.get("Pod", "web-0", namespace="shop")
    assert kept is not None and "deletionTimestamp" not in kept["metadata"]

    server.kubelet_exit_delay = 3600
    kube.evict("shop", "web-0", grace_period_seconds=20, uid=again["metadata"]["uid"])
    going = server.get("Pod", "web-0", namespace="shop")
    assert going is not None and going["metadata"]["deletionGracePeriodSeconds"] == 20


def test_an_eviction_naming_a_uid_waits_out_the_servers_conflict_retries(
    server: KubeApiServer, sleeps: Sleeps
) -> None:
    # a replacement the server may evict without a look at budgets (Pending) makes the eviction
    # subresource retry the uid conflict for about ten seconds (eviction.go, EvictionsRetry) before it
    # answers 409: that answer is waited for, not timed out at request_timeout and retried as an outage
    kube = KubeClient.for_url(server.url, sleep=sleeps, request_timeout=0.3)
    listed = server.add(_web_pod("web-0"))["metadata"]["uid"]
    server.delete("Pod", "web-0", namespace="shop")
    server.add(_web_pod("web-0"))
    server.faults.delay(0.8, "/api/v1/namespaces/shop/pods/web-0/eviction")
    try:
        with pytest.raises(PodNotFound, match="409"):
            kube.evict("shop", "web-0", uid=listed)
        assert len(requests_to(server, "/api/v1/namespaces/shop/pods/web-0/eviction", "POST")) == 1
    finally:
        kube.close()


def test_a_429_without_a_budgets_cause_is_throttling_not_a_budget(
    server: KubeApiServer, kube: KubeClient, sleeps: Sleeps
) -> None:
    # a budget's refusal carries details.causes[].reason "DisruptionBudget"; API Priority and Fairness
    # (or any other limiter) answers 429 without it
    server.add(_web_pod("web-0"))
    server.faults.fail_next(1, status=429, path_prefix="/api/v1/namespaces/shop/pods/web-0/eviction")
    with pytest.raises(EvictionThrottled, match=r"evict pod shop/web-0.*429") as caught:
        kube.evict("shop", "web-0")
    assert not isinstance(caught.value, EvictionBlocked)
    assert len(requests_to(server, "/api/v1/namespaces/shop/pods/web-0/eviction", "POST")) == 1
    assert sleeps == []  # the caller's next round is the retry
    kube.evict("shop", "web-0")
    evicted = server.get("Pod", "web-0", namespace="shop")
    assert evicted is None or evicted["metadata"].get("deletionTimestamp")  # gone, or terminating


def test_an_evictions_budget_conflict_504_is_answered_at_once_for_the_next_round(
    server: KubeApiServer, kube: KubeClient, sleeps: Sleeps
) -> None:
    """The eviction subresource answers 504 "couldn't update PodDisruptionBudget ... due to conflicts"
    with retryAfterSeconds 10 when other evictions under the budget keep winning its update
    (pkg/registry/core/pod/storage/eviction.go, NewTimeoutError). Retried inside the call, each attempt
    waited 10 s or more: two such pods in one round could run the drain function past its 120 s
    timeout, which fails the drain. It is answered at once as throttling: the next round retries."""
    server.add(_web_pod("web-0"))
    path = "/api/v1/namespaces/shop/pods/web-0/eviction"
    words = 'Timeout: couldn\'t update PodDisruptionBudget "web" due to conflicts'
    server.faults.fail_next(1, status=504, path_prefix=path, retry_after=10, message=words)
    with pytest.raises(EvictionThrottled, match="due to conflicts"):
        kube.evict("shop", "web-0")
    assert len(requests_to(server, path, "POST")) == 1
    assert sleeps == []
    # any other 504 is still retried in the call, waiting its Retry-After
    server.faults.fail_next(1, status=504, path_prefix=path, retry_after=2)
    kube.evict("shop", "web-0")
    assert sleeps == [2.0]


def test_delete_node_tolerates_a_node_already_gone(server: KubeApiServer, kube: KubeClient) -> None:
    add_node(server, "n1")
    assert kube.delete_node("n1") is True
    assert server.get("Node", "n1") is None
    assert kube.delete_node("n1") is False


def test_record_event_about_a_node(server: KubeApiServer, kube: KubeClient) -> None:
    add_node(server, "n1")
    server.add(_web_pod("web-0"))
    kube.record_event("Node", "n1", None, "SpillwayCordoned", "cordoned for scale-down", uid="u-1")
    kube.record_event("Pod", "web-0", "shop", "SpillwayEvictionBlocked", "PDB web", type="Warning")

    events = [dict(e) for e in server.list("Event")]
    assert len(events) == 2
    node_event = next(e for e in events if e["involvedObject"]["kind"] == "Node")
    assert node_event["metadata"]["namespace"] == "default"
    assert node_event["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u-1"}
    assert node_event["reason"] == "SpillwayCordoned"
    assert node_event["type"] == "Normal"
    assert node_event["source"] == {"component": "spillway"}
    assert node_event["firstTimestamp"].startswith("2026-03-02T09:30:00")
    assert node_event["lastTimestamp"].startswith("2026-03-02T09:30:00")
    assert node_event["count"] == 1
    pod_event = next(e for e in events if e["involvedObject"]["kind"] == "Pod")
    assert pod_event["metadata"]["namespace"] == "shop"
    assert pod_event["involvedObject"]["namespace"] == "shop"
    assert pod_event["type"] == "Warning"


def test_an_events_message_quoting_a_credential_is_recorded_redacted(
    server: KubeApiServer, kube: KubeClient
) -> None:
    """An Event's message may quote an error's text; ``kubectl describe`` shows it to whoever may read
    Events, and the API server keeps it for an hour."""
    add_node(server, "n1")
    secret = secrets.token_urlsafe(32)
    kube.record_event("Node", "n1", None, "SpillwayDrainFailed", f"evict: 401 Authorization: Bearer {secret}")
    [event] = [dict(e) for e in server.list("Event")]
    assert event["message"] == "evict: 401 Authorization: Bearer <redacted>"


def test_an_event_about_a_capacity_buffer_is_recorded_in_its_namespace_naming_its_version(
    server: KubeApiServer, kube: KubeClient
) -> None:
    """The plan's NotTriggerScaleUp on a CapacityBuffer: the API server takes an Event about a custom
    resource (it checks only that the Event sits in its object's namespace), and ``kubectl describe
    capacitybuffer`` finds it by kind, name, namespace and uid."""
    server.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web"}})
    version = "autoscaling.x-k8s.io/v1beta1"
    kube.record_event(
        "CapacityBuffer", "headroom", "web", "NotTriggerScaleUp", "capacity buffer 6 fake pods ...",
        uid="b-1", api_version=version,
    )  # fmt: skip
    [event] = server.list("Event")
    assert event["metadata"]["namespace"] == "web"
    assert event["involvedObject"] == {
        "apiVersion": version, "kind": "CapacityBuffer", "name": "headroom", "namespace": "web", "uid": "b-1",
    }  # fmt: skip


def test_an_event_outside_its_objects_namespace_is_refused_as_the_api_server_refuses_it(
    server: KubeApiServer, kube: KubeClient
) -> None:
    """legacyValidateEvent: an Event without eventTime sits in its object's namespace (or, about a
    cluster-scoped object, in default)."""
    from kubernetes.client import ApiException

    server.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web"}})
    body = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "headroom.1", "namespace": "web"},
            "involvedObject": {"kind": "CapacityBuffer", "name": "headroom", "namespace": "shop"},
            "reason": "NotTriggerScaleUp", "message": "m"}  # fmt: skip
    with pytest.raises(ApiException) as refused:
        kube._core.create_namespaced_event("web", body)
    assert refused.value.status == 422 and "involvedObject.namespace" in str(refused.value.body)
    node = {
        **body,
        "metadata": {"name": "n1.1", "namespace": "web"},
        "involvedObject": {"kind": "Node", "name": "n1"},
    }
    with pytest.raises(ApiException):
        kube._core.create_namespaced_event("web", node)
    kube._core.create_namespaced_event(
        "web", {**body, "involvedObject": {**body["involvedObject"], "namespace": "web"}}
    )
    kube._core.create_namespaced_event(
        "default", {**node, "metadata": {"name": "n1.1", "namespace": "default"}}
    )
    assert len(server.list("Event")) == 2


def test_an_event_in_a_namespace_being_deleted_fails_alone(server: KubeApiServer, kube: KubeClient) -> None:
    """NamespaceLifecycle refuses any create in a terminating namespace, an Event's too: 403 with a
    NamespaceTerminating cause. That is no sign that RBAC refuses every Event: a CapacityBuffer (or pod)
    of a namespace being deleted fails its own Event, and the plan's others are posted."""
    from spillway.act.events import PodEvent, post_events
    from spillway.errors import KubeAuthError, KubeError

    for name in ("gone", "web"):
        server.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    namespace = server.get("Namespace", "gone")
    assert namespace is not None
    server.update("Namespace", {**namespace, "status": {"phase": "Terminating"}})
    with pytest.raises(KubeError) as refused:
        kube.record_event("CapacityBuffer", "headroom", "gone", "NotTriggerScaleUp", "m")
    assert not isinstance(refused.value, KubeAuthError) and "being terminated" in str(refused.value)

    def on(namespace: str) -> PodEvent:
        return PodEvent(namespace, "headroom", None, "NotTriggerScaleUp", "m", "fp", kind="CapacityBuffer")

    result = post_events(lambda: kube, [on("gone"), on("web")], budget_seconds=60)
    assert (result.posted, result.failed, result.skipped) == (1, 1, 0)
    assert [e["metadata"]["namespace"] for e in server.list("Event")] == ["web"]


def test_an_event_about_a_node_named_near_the_limit_is_recorded(
    server: KubeApiServer, kube: KubeClient
) -> None:
    """A Node's name may have 253 characters; the Event's, client-go's ``<name>.<hex time>``, then has more,
    which the v1 Events API takes (it holds only events.k8s.io/v1 creates to a DNS subdomain)."""
    long_name = ".".join(["ip-10-0-0-1", "a" * 60, "b" * 60, "c" * 60, "d" * 49, "internal"])
    assert len(long_name) == 253
    kube.record_event("Node", long_name, None, "SpillwayDraining", "draining")
    [event] = server.list("Event")
    name = event["metadata"]["name"]
    assert name.startswith(f"{long_name}.") and len(name) > 253
    assert event["involvedObject"]["name"] == long_name


# --- shared-cluster objects and custom resources ----------------------------------------------------

QUOTA_GV = ("autoscaling.x-k8s.io", "v1beta1", "capacityquotas")
PROVREQ_GV = ("autoscaling.x-k8s.io", "v1", "provisioningrequests")
ONE_POD_SET = [{"podTemplateRef": {"name": "t"}, "count": 1}]  # the CRD asks for 1 to 32


def check_capacity_request() -> dict[str, Any]:
    """A check-capacity ProvisioningRequest ``default/pr`` of one pod."""
    return {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
            "metadata": {"name": "pr", "namespace": "default"},
            "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io", "podSets": ONE_POD_SET}}  # fmt: skip


def made_again(server: KubeApiServer) -> tuple[str, str]:
    """``default/pr`` made, deleted and made again under its name: the first object's uid, the second's."""
    old = server.add(check_capacity_request())["metadata"]["uid"]
    server.delete("ProvisioningRequest", "pr", "default")
    return old, server.add(check_capacity_request())["metadata"]["uid"]


def shared_fixtures(server: KubeApiServer) -> None:
    server.add(
        {"kind": "Namespace", "metadata": {"name": "ml", "labels": {"spillway.io/tenant": "research"}}}
    )
    server.add({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "train", "namespace": "ml"},
                "spec": {"minMember": 8, "queue": "gpu"}, "status": {"phase": "Pending"}})  # fmt: skip
    server.add({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                "metadata": {"name": "sim", "namespace": "ml"}, "spec": {"minMember": 3}})  # fmt: skip
    server.add({"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
                "metadata": {"name": "job", "namespace": "ml"},
                "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 4}}}]}})  # fmt: skip
    server.add({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityQuota",
                "metadata": {"name": "gpu-cap"},
                "spec": {"selector": {"matchLabels": {"pool": "gpu"}},
                         "limits": {"resources": {"nvidia.com/gpu": "16"}}}})  # fmt: skip


def test_shared_objects_are_read_into_the_models(server: KubeApiServer, kube: KubeClient) -> None:
    shared_fixtures(server)
    objects = kube.list_shared_objects()
    by_kind = {(type(o).__name__, o.metadata.name) for o in objects}
    assert {("VolcanoPodGroup", "train"), ("CoschedulingPodGroup", "sim"), ("Workload", "job"),
            ("CapacityQuota", "gpu-cap"), ("Namespace", "ml")} <= by_kind  # fmt: skip
    volcano = next(o for o in objects if isinstance(o, VolcanoPodGroup))
    assert (volcano.spec.min_member, volcano.spec.queue, volcano.status.phase) == (8, "gpu", "Pending")
    quota = next(o for o in objects if isinstance(o, CapacityQuota))
    assert quota.spec.limits.resources["nvidia.com/gpu"] == "16"
    lists = {r.path for r in server.requests if r.method == "GET"}
    assert "/apis/scheduling.volcano.sh/v1beta1/podgroups" in lists
    assert "/apis/autoscaling.x-k8s.io/v1beta1/capacityquotas" in lists
    assert all(r.query.get("limit") for r in server.requests if r.path.startswith("/apis/"))


def test_daemonsets_are_read_in_pages_and_a_refusal_names_the_rule_to_add(
    server: KubeApiServer, sleeps: Sleeps
) -> None:
    kube = KubeClient.for_url(server.url, sleep=sleeps, page_size=2)
    gpu = {"nvidia.com/gpu.present": "true"}
    server.add(kobj.daemonset("aws-node", host_network=True))
    server.add(kobj.daemonset("kube-proxy", priority_class="system-node-critical"))
    server.add(kobj.daemonset("dcgm-exporter", "gpu-operator", cpu="1", node_selector=gpu))

    read = {(d.metadata.namespace, d.metadata.name): d for d in kube.iter_daemonsets()}
    server.faults.fail_next(1, 403, "/apis/apps/v1/daemonsets")
    with pytest.raises(KubeAuthError) as refused:  # refused is not none, as for every kind observe reads
        list(kube.iter_daemonsets())

    assert sorted(read) == [
        ("gpu-operator", "dcgm-exporter"),
        ("kube-system", "aws-node"),
        ("kube-system", "kube-proxy"),
    ]
    dcgm = read[("gpu-operator", "dcgm-exporter")].spec.template.spec
    assert dcgm.node_selector == gpu and dcgm.containers[0].requests()["cpu"] == 1000
    assert read[("kube-system", "aws-node")].spec.template.spec.host_network
    assert (
        read[("kube-system", "kube-proxy")].spec.template.spec.priority_class_name == "system-node-critical"
    )
    assert len(requests_to(server, "/apis/apps/v1/daemonsets", "GET")) == 3  # two pages, then the refusal
    assert '{apiGroups: ["apps"], resources: ["daemonsets"], verbs: ["list"]}' in str(refused.value)


def test_jobs_that_say_whether_their_pods_may_move_are_read(server: KubeApiServer, kube: KubeClient) -> None:
    server.add({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "bert", "namespace": "ml"},
                "spec": {"elasticPolicy": {"minReplicas": 2, "maxReplicas": 8, "rdzvBackend": "c10d"},
                         "pytorchReplicaSpecs": {"Worker": {"replicas": 4, "template": {}}}}})  # fmt: skip
    server.add({"apiVersion": "kubeflow.org/v1", "kind": "PaddleJob", "metadata": {"name": "ernie", "namespace": "ml"},
                "spec": {"elasticPolicy": {"minReplicas": 1, "maxReplicas": 3},
                         "paddleReplicaSpecs": {"Worker": {"replicas": 2}}}})  # fmt: skip
    server.add({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "etl", "namespace": "ml"},
                "spec": {"podFailurePolicy": {"rules": [{"action": "Ignore",
                                                         "onPodConditions": [{"type": "DisruptionTarget"}]}]},
                         "template": {"spec": {"restartPolicy": "Never",
                                               "containers": [{"name": "c", "image": "x"}]}}}})  # fmt: skip
    objects = {type(o).__name__: o for o in kube.list_shared_objects()}
    assert isinstance(objects["PyTorchJob"], PyTorchJob) and isinstance(objects["PaddleJob"], PaddleJob)
    assert objects["PyTorchJob"].spec.elastic_policy == ElasticPolicy(min_replicas=2, max_replicas=8)
    assert objects["PaddleJob"].spec.paddle_replica_specs["Worker"].replicas == 2
    job = objects["BatchJob"]
    assert isinstance(job, BatchJob) and job.spec.pod_failure_policy is not None
    assert job.spec.pod_failure_policy.rules[0].action == "Ignore"
    lists = {r.path for r in server.requests if r.method == "GET"}
    assert {
        "/apis/kubeflow.org/v1/pytorchjobs",
        "/apis/kubeflow.org/v1/paddlejobs",
        "/apis/batch/v1/jobs",
    } <= lists
    # no Kubeflow CRDs: none of them, and batch Jobs are still read
    server.optional_resources = []
    # (PriorityClasses are built in: the API server's own system classes are always listed)
    assert {type(o).__name__ for o in kube.list_shared_objects()} == {
        "Namespace",
        "BatchJob",
        "PriorityClass",
    }


def test_a_crd_not_installed_gives_none_of_its_kind_logged_once(
    server: KubeApiServer, kube: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    shared_fixtures(server)
    server.optional_resources = ["capacityquotas.autoscaling.x-k8s.io"]  # no Volcano, no coscheduling
    caplog.set_level("DEBUG", logger="spillway.adapters.kube")
    kinds = {type(o).__name__ for o in kube.list_shared_objects()}
    assert kinds == {"Namespace", "CapacityQuota", "PriorityClass"}  # the API server's own classes
    kube.list_shared_objects()
    infos = [r for r in caplog.records if r.levelname == "INFO" and "not served" in r.getMessage()]
    # coscheduling, Volcano, upstream PodGroup, Workload, PyTorchJob, PaddleJob, TFJob, XGBoostJob,
    # JAXJob, MPIJob, Volcano Job: once
    assert len(infos) == 11
    assert any("podgroups.scheduling.volcano.sh" in r.getMessage() for r in infos)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert kube.list_custom(*PROVREQ_GV) == []


def test_rbac_refusing_a_kind_that_may_be_absent_raises_naming_the_rule_to_add(
    server: KubeApiServer, kube: KubeClient
) -> None:
    """Refused is not absent: RBAC authorizes a request before the resource is looked up, so a 403 says
    nothing about whether the CRD is installed (404 does). Reading none of it would give a snapshot
    without the gangs, quotas or volumes the cluster has; the error says which rule the ClusterRole
    lacks, as deploy/rbac.yaml writes it. (Review r15.)"""
    shared_fixtures(server)
    server.faults.fail_next(1, 403, "/apis/scheduling.volcano.sh/")
    with pytest.raises(KubeAuthError) as refused:
        kube.list_shared_objects()
    assert "list podgroups.scheduling.volcano.sh/v1beta1: HTTP 403" in str(refused.value)
    assert '{apiGroups: ["scheduling.volcano.sh"], resources: ["podgroups"], verbs: ["list"]}' in str(
        refused.value
    )
    # Volcano's Jobs too (their eviction policies): refused fails the read, it is not "no Volcano Job"
    server.faults.fail_next(1, 403, "/apis/batch.volcano.sh/")
    with pytest.raises(KubeAuthError, match=r'\{apiGroups: \["batch.volcano.sh"\], resources: \["jobs"\]'):
        kube.list_shared_objects()
    # a kind with a second version is not tried in it once the first is refused
    server.faults.fail_next(1, 403, "/apis/scheduling.k8s.io/v1alpha1/workloads")
    with pytest.raises(KubeAuthError, match=r'resources: \["workloads"\]'):
        kube.list_shared_objects()
    assert not requests_to(server, "/apis/scheduling.k8s.io/v1alpha2/workloads", "GET")
    server.faults.fail_next(1, 403, "/api/v1/persistentvolumes")
    with pytest.raises(KubeAuthError, match=r'\{apiGroups: \[""\], resources: \["persistentvolumes"\]'):
        list(kube.iter_volume_objects())
    server.faults.fail_next(1, 403, "/apis/autoscaling.x-k8s.io/v1/")
    with pytest.raises(KubeAuthError, match=r'resources: \["provisioningrequests"\], verbs: \["list"\]'):
        kube.list_custom(*PROVREQ_GV)
    server.faults.fail_next(1, 403, "/api/v1/namespaces/kube-system/configmaps/")
    with pytest.raises(KubeAuthError, match=r'resourceNames: \["cluster-autoscaler-priority-expander"\]'):
        kube.priority_expander()
    # and none of it when the resource is not served
    server.optional_resources = []
    assert kube.priority_expander() is None and kube.list_custom(*PROVREQ_GV) == []


def test_a_malformed_object_is_skipped_not_fatal(
    server: KubeApiServer, kube: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    server.add({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "bad", "namespace": "default"}, "spec": {"minMember": -1}})  # fmt: skip
    server.add({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "good", "namespace": "default"}, "spec": {"minMember": 2}})  # fmt: skip
    names = [o.metadata.name for o in kube.list_shared_objects() if isinstance(o, VolcanoPodGroup)]
    assert names == ["good"]
    (error,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert "default/bad" in error and "spec.minMember" in error


def test_list_custom_pages_and_filters_by_namespace(server: KubeApiServer, sleeps: Sleeps) -> None:
    kube = KubeClient.for_url(server.url, sleep=sleeps, page_size=2)
    server.add({"kind": "Namespace", "metadata": {"name": "other"}})
    for i in range(5):
        ns = "other" if i == 4 else "default"
        server.add({"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
                    "metadata": {"name": f"pr{i}", "namespace": ns},
                    "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io", "podSets": ONE_POD_SET}})  # fmt: skip
    everything = kube.list_custom(*PROVREQ_GV)
    assert [o["metadata"]["name"] for o in everything] == ["pr0", "pr1", "pr2", "pr3", "pr4"]
    assert everything[0]["kind"] == "ProvisioningRequest"
    assert [o["metadata"]["name"] for o in kube.list_custom(*PROVREQ_GV, namespace="other")] == ["pr4"]
    pages = requests_to(server, "/apis/autoscaling.x-k8s.io/v1/provisioningrequests", "GET")
    assert len(pages) == 3 and all(p.query["limit"] == "2" for p in pages)


def test_patch_custom_status_merges_on_the_status_subresource(
    server: KubeApiServer, kube: KubeClient
) -> None:
    # a whole metav1.Condition: the CRD's status schema refuses one without reason, message and time
    valid = {"type": "cluster-autoscaler.kubernetes.io/valid", "status": "True", "reason": "Valid",
             "message": "", "lastTransitionTime": "2026-03-02T09:30:00Z"}  # fmt: skip
    server.add({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityQuota",
                "metadata": {"name": "q"}, "spec": {"limits": {"resources": {"cpu": "64"}}},
                "status": {"conditions": [valid]}})  # fmt: skip
    used = {"used": {"resources": {"cpu": "8", "nodes": "1"}}}
    answered = kube.patch_custom_status(*QUOTA_GV, None, "q", used)
    assert answered["status"] == {"conditions": [valid], **used}
    assert answered["spec"] == {"limits": {"resources": {"cpu": "64"}}}
    (patch,) = requests_to(server, "/apis/autoscaling.x-k8s.io/v1beta1/capacityquotas/q/status", "PATCH")
    assert patch.content_type == "application/merge-patch+json"
    with pytest.raises(ObjectNotFound):
        kube.patch_custom_status(*QUOTA_GV, None, "missing", used)
    server.add({"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
                "metadata": {"name": "pr", "namespace": "default"},
                "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io", "podSets": ONE_POD_SET}})  # fmt: skip
    accepted = {"conditions": [{"type": "Accepted", "status": "True", "reason": "Ok", "message": "",
                                "lastTransitionTime": "2026-03-02T09:30:00Z"}]}  # fmt: skip
    assert kube.patch_custom_status(*PROVREQ_GV, "default", "pr", accepted)["status"] == accepted
    server.faults.fail_next(
        1, 409, "/apis/autoscaling.x-k8s.io/v1/namespaces/default/provisioningrequests/pr"
    )
    with pytest.raises(KubeConflict):
        kube.patch_custom_status(*PROVREQ_GV, "default", "pr", accepted)


def test_a_status_write_naming_the_uid_read_leaves_an_object_made_again_alone(
    server: KubeApiServer, kube: KubeClient
) -> None:
    """Deleted and created again under the same name between the read and the write: the new object's
    status is not the old one's. A merge patch has no uid precondition (the API server applies it to
    whatever object has the name), so the write is a JSON patch testing ``/metadata/uid``."""
    old, new = made_again(server)
    accepted = {"conditions": [{"type": "Accepted", "status": "True", "reason": "Ok", "message": "",
                                "lastTransitionTime": "2026-03-02T09:30:00Z"}]}  # fmt: skip

    with pytest.raises(ObjectReplaced) as caught:
        kube.patch_custom_status(*PROVREQ_GV, "default", "pr", accepted, uid=old)
    assert isinstance(caught.value, ObjectNotFound)  # for the caller, the object it read is gone
    assert "status" not in (server.get("ProvisioningRequest", "pr", "default") or {})
    assert len(requests_to(server, "/apis/autoscaling.x-k8s.io/v1/namespaces/default/provisioningrequests/pr/status", "PATCH")) == 1  # fmt: skip

    assert kube.patch_custom_status(*PROVREQ_GV, "default", "pr", accepted, uid=new)["status"] == accepted
    last = requests_to(server, "/apis/autoscaling.x-k8s.io/v1/namespaces/default/provisioningrequests/pr/status", "PATCH")[-1]  # fmt: skip
    assert last.content_type == "application/json-patch+json"


def test_a_status_write_refused_as_invalid_is_not_taken_for_a_replaced_object(
    server: KubeApiServer, kube: KubeClient
) -> None:
    made = check_capacity_request()
    uid = server.add(made)["metadata"]["uid"]
    no_reason = {"conditions": [{"type": "Accepted", "status": "True", "message": "",
                                 "lastTransitionTime": "2026-03-02T09:30:00Z"}]}  # fmt: skip
    with pytest.raises(KubeError) as caught:
        kube.patch_custom_status(*PROVREQ_GV, "default", "pr", no_reason, uid=uid)
    assert not isinstance(caught.value, ObjectNotFound)
    assert "status.conditions[0].reason" in str(caught.value)


def test_plan_statuses_skip_a_request_made_again_since_the_snapshot(
    server: KubeApiServer, kube: KubeClient
) -> None:
    from spillway.act.planning import write_provisioning
    from spillway.planner.types import ProvisioningUpdate

    observed, _ = made_again(server)
    failed = {"type": "Failed", "status": "True", "reason": "Expired", "message": "not provisioned in time",
              "lastTransitionTime": "2026-03-02T09:30:00Z", "observedGeneration": 1}  # fmt: skip
    update = ProvisioningUpdate("default", "pr", (failed,), uid=observed)

    assert write_provisioning(lambda: kube, [update]) == {"written": 0, "failed": 0, "gone": 1, "errors": []}
    assert "status" not in (server.get("ProvisioningRequest", "pr", "default") or {})


def test_delete_custom_deletes_only_the_object_of_the_uid_given(
    server: KubeApiServer, kube: KubeClient
) -> None:
    old, new = made_again(server)

    with pytest.raises(ObjectReplaced):  # the API's 409: "Precondition failed: UID in precondition ..."
        kube.delete_custom(*PROVREQ_GV, "default", "pr", uid=old)
    assert server.get("ProvisioningRequest", "pr", "default") is not None
    kube.delete_custom(*PROVREQ_GV, "default", "pr", uid=new)
    assert server.get("ProvisioningRequest", "pr", "default") is None
    with pytest.raises(ObjectNotFound):
        kube.delete_custom(*PROVREQ_GV, "default", "pr", uid=new)


def test_plan_deletes_a_request_that_ended_a_week_ago_once(server: KubeApiServer, kube: KubeClient) -> None:
    from spillway.act.planning import delete_provisioning
    from spillway.planner.types import ProvisioningDeletion

    made = {**check_capacity_request(), "metadata": {"name": "done", "namespace": "default"}}
    uid = server.add(made)["metadata"]["uid"]
    again = server.add({**made, "metadata": {"name": "again", "namespace": "default"}})["metadata"]["uid"]
    server.delete("ProvisioningRequest", "again", "default")
    server.add({**made, "metadata": {"name": "again", "namespace": "default"}})
    deletions = [ProvisioningDeletion("default", "again", again, "ended"),
                 ProvisioningDeletion("default", "done", uid, "ended"),
                 ProvisioningDeletion("default", "gone", "u-gone", "ended")]  # fmt: skip

    assert delete_provisioning(lambda: kube, deletions) == {
        "written": 1,
        "failed": 0,
        "gone": 2,
        "errors": [],
    }
    assert server.get("ProvisioningRequest", "done", "default") is None
    assert server.get("ProvisioningRequest", "again", "default") is not None  # another request now
    assert delete_provisioning(lambda: kube, []) is None


def test_list_pod_templates(server: KubeApiServer, kube: KubeClient) -> None:
    server.add({"kind": "Namespace", "metadata": {"name": "ml"}})
    for ns in ("default", "ml"):
        server.add({"kind": "PodTemplate", "metadata": {"name": "tpl", "namespace": ns},
                    "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}})  # fmt: skip
    assert [t["metadata"]["namespace"] for t in kube.list_pod_templates()] == ["default", "ml"]
    (only,) = kube.list_pod_templates("ml")
    assert only["kind"] == "PodTemplate"
    assert only["template"]["spec"]["containers"][0]["image"] == "i"


def test_list_resource_quotas_of_one_namespace(server: KubeApiServer, kube: KubeClient) -> None:
    server.add({"kind": "Namespace", "metadata": {"name": "ml"}})
    for ns in ("default", "ml"):
        server.add({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "compute", "namespace": ns},
                    "spec": {"hard": {"requests.cpu": "8"}, "scopes": ["NotBestEffort"]},
                    "status": {"hard": {"requests.cpu": "8"}, "used": {"requests.cpu": "2"}}})  # fmt: skip
    (only,) = kube.list_resource_quotas("ml")
    assert (only["apiVersion"], only["kind"], only["metadata"]["namespace"]) == ("v1", "ResourceQuota", "ml")
    assert only["spec"]["scopes"] == ["NotBestEffort"] and only["status"]["used"] == {"requests.cpu": "2"}
    server.faults.fail_next(1, 403, "/api/v1/namespaces/ml/resourcequotas")
    with pytest.raises(KubeAuthError):
        kube.list_resource_quotas("ml")


def test_list_replication_controllers(server: KubeApiServer, kube: KubeClient) -> None:
    server.add({"kind": "Namespace", "metadata": {"name": "web"}})
    template = {"spec": {"containers": [{"name": "c", "image": "i"}]}}
    for ns in ("default", "web"):
        server.add({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "old", "namespace": ns},
                    "spec": {"replicas": 3, "template": template}})  # fmt: skip
    assert [r["metadata"]["namespace"] for r in kube.list_replication_controllers()] == ["default", "web"]
    (only,) = kube.list_replication_controllers("web")
    assert (only["apiVersion"], only["kind"], only["spec"]["replicas"]) == ("v1", "ReplicationController", 3)


def test_a_buffer_over_a_job_whose_scale_cannot_be_read_is_the_buffers_problem_not_an_outage(
    server: KubeApiServer, kube: KubeClient, sleeps: Sleeps
) -> None:
    """A custom resource with no value at its CRD's specReplicasPath (a PyTorchJob without Worker
    replicas) answers every scale GET with a 500 (ScaleREST.Get: "the spec replicas field ... does not
    exist"): a standing answer, asked once, and the buffer's problem; observation goes on."""
    from spillway.observe import capacity_buffers

    server.add({"kind": "Namespace", "metadata": {"name": "ml"}})
    server.add({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "bert", "namespace": "ml"},
                "spec": {"pytorchReplicaSpecs": {"Worker": {"template": {}}}}})  # fmt: skip
    server.add({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
                "metadata": {"name": "headroom", "namespace": "ml"},
                "spec": {"scalableRef": {"apiGroup": "kubeflow.org", "kind": "PyTorchJob", "name": "bert"}, "percentage": 50}})  # fmt: skip

    [info] = capacity_buffers(kube).infos
    assert "the spec replicas field" in info.problem and "does not exist" in info.problem
    assert len(requests_to(server, "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/bert/scale", "GET")) == 1
    assert sleeps == []
    # any other 500 of a scale is still the server failing: retried, then KubeUnavailable
    server.faults.fail_next(
        100, status=500, path_prefix="/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/bert/scale"
    )
    with pytest.raises(KubeUnavailable, match=r"get scale of pytorchjobs.kubeflow.org ml/bert.*attempts"):
        kube.get_scale("kubeflow.org", "PyTorchJob", "ml", "bert")


def test_a_custom_kinds_scale_and_its_pods_are_read_over_the_wire_and_the_buffer_status_written(
    server: KubeApiServer, kube: KubeClient
) -> None:
    """Discovery finds rollouts.argoproj.io and its scale subresource; the Scale carries the CRD's
    status replicas and selector; the most recent selected pod is the chunk; the buffer's status says so."""
    from datetime import UTC, datetime

    from spillway.observe import capacity_buffers, update_buffer_status

    server.add({"kind": "Namespace", "metadata": {"name": "web"}})
    server.add({"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "metadata": {"name": "web", "namespace": "web"},
                "spec": {"replicas": 10}, "status": {"HPAReplicas": 8, "selector": "app=web"}})  # fmt: skip
    for name, cpu, labels in (("a", "1", {"app": "web"}), ("b", "2", {"app": "other"})):
        server.add({"kind": "Pod", "metadata": {"name": name, "namespace": "web", "labels": labels},
                    "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]}})  # fmt: skip
    server.add({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
                "metadata": {"name": "headroom", "namespace": "web"},
                "spec": {"scalableRef": {"apiGroup": "argoproj.io", "kind": "Rollout", "name": "web"}, "percentage": 50}})  # fmt: skip

    scale = kube.get_scale("argoproj.io", "Rollout", "web", "web")
    assert (scale["kind"], scale["spec"]["replicas"], scale["status"]) == (
        "Scale",
        10,
        {"replicas": 8, "selector": "app=web"},
    )
    assert [p.metadata.name for p in kube.pods_selected("web", "app=web")] == ["a"]
    with pytest.raises(ObjectNotFound, match="no scale subresource"):
        kube.get_scale("autoscaling.x-k8s.io", "CapacityBuffer", "web", "headroom")
    with pytest.raises(ObjectNotFound, match="not served"):
        kube.get_scale("example.com", "Thing", "web", "x")

    buffers = capacity_buffers(kube)
    [info] = buffers.infos
    assert (info.problem, info.replicas) == ("", 4)  # 50 % of the Scale's status.replicas
    assert info.pod is not None and info.pod.requests["cpu"] == 1000
    update_buffer_status(kube, buffers, datetime(2026, 3, 24, 9, 0, tzinfo=UTC))
    stored = server.get("CapacityBuffer", "headroom", "web")
    assert stored is not None
    ready = {c["type"]: c for c in stored["status"]["conditions"]}["ReadyForProvisioning"]
    assert (stored["status"]["replicas"], ready["status"], ready["reason"]) == (
        4,
        "True",
        "AttributesSetSuccessfully",
    )


LB_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"
LB_RECORD = "spillway.io/excluded-from-load-balancers"


def test_the_load_balancer_label_a_drain_adds_goes_with_every_uncordon_and_only_with_its_record(
    server: KubeApiServer, kube: KubeClient
) -> None:
    """add_draining_taint(exclude_from_load_balancers=True) labels the node and records it in the same
    patch; a plan's uncordon by digest (the give-back of a node it reuses) takes both off with the
    cordon; an operator's label (no record) stays through the same round."""
    add_node(server, "n1", labels={"team": "a"})
    add_node(server, "n2", labels={"team": "a", LB_LABEL: "ops"})
    for name in ("n1", "n2"):
        assert kube.cordon(name, "drain d-1: idle") is True
        assert kube.add_draining_taint(name, exclude_from_load_balancers=True) is True
        assert kube.add_draining_taint(name, exclude_from_load_balancers=True) is False  # a retry: no change
    assert len(requests_to(server, "/api/v1/nodes/n1", "PATCH")) == 2  # cordon, then taint with label
    n1, n2 = node_obj(server, "n1")["metadata"], node_obj(server, "n2")["metadata"]
    assert n1["labels"][LB_LABEL] == "true" and "drain d-1: idle" in n1["annotations"][LB_RECORD]
    assert n2["labels"][LB_LABEL] == "ops" and LB_RECORD not in n2["annotations"]

    for name in ("n1", "n2"):
        digest = cordon_digest(node_obj(server, name)["metadata"]["annotations"][CORDONED_BY_SPILLWAY])
        assert kube.uncordon(name, if_digest=digest) is True
    n1, n2 = node_obj(server, "n1")["metadata"], node_obj(server, "n2")["metadata"]
    assert n1["labels"] == {**n1["labels"], "team": "a"} and LB_LABEL not in n1["labels"]
    assert LB_RECORD not in n1.get("annotations", {})
    assert n2["labels"][LB_LABEL] == "ops"
