"""Which failed calls may have been applied (``KubeUnavailable.sent``).

A drain counts an eviction whose answer was lost as possibly applied (``unconfirmed``): the next round
looks for its pod. An eviction answered 503 on every attempt was taken the same way, but the API
server writes a 503 before any handler runs: ``WithWaitGroup`` (k8s.io/apiserver
pkg/server/filters/waitgroup.go) answers "apiserver is shutting down" to a request it will not serve,
and an admission webhook's rejection carries the code the webhook chose, before storage. Such an
answer, a Kubernetes Status, says the request was not applied. A 503 without a Status (a proxy in
front of the API server: whether it forwarded the request is unknowable) still counts as possibly
applied, as does any timeout or cut answer."""

from __future__ import annotations

import socket
import time
from functools import partial
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from spillway.adapters.kube import KubeClient
from spillway.errors import KubeUnavailable
from spillway.local import objects
from spillway.local.kubeapi.server import KubeApiServer

EVICTION = "/api/v1/namespaces/team-a/pods/web-0/eviction"


@pytest.fixture
def api() -> Any:
    with KubeApiServer() as server:
        server.add(objects.node("n1", instance="i-0a1b2c3d4e5f60718"))
        server.add(objects.pod("web-0", "team-a", node_name="n1"))
        yield server


def test_an_eviction_the_api_server_answered_503_every_time_was_not_applied(api: Any) -> None:
    kube = KubeClient.for_url(api.url, max_attempts=3, sleep=lambda _: None)
    api.faults.fail_next(3, 503, EVICTION, message="apiserver is shutting down")

    with pytest.raises(KubeUnavailable) as caught:
        kube.evict("team-a", "web-0", grace_period_seconds=30)

    assert caught.value.sent is False, caught.value


def test_an_eviction_that_timed_out_once_before_503s_may_have_been_applied(api: Any) -> None:
    kube = KubeClient.for_url(api.url, max_attempts=3, sleep=lambda _: None)
    api.faults.fail_next(1, 504, EVICTION)  # the server's timeout: the handler may still have run
    api.faults.fail_next(2, 503, EVICTION, message="apiserver is shutting down")

    with pytest.raises(KubeUnavailable) as caught:
        kube.evict("team-a", "web-0", grace_period_seconds=30)

    assert caught.value.sent is True, caught.value


def _proxy_503(**_: Any) -> None:
    raise ApiException(status=503, reason="Service Unavailable")  # a proxy's page, no Status body


def test_a_503_without_a_status_may_have_been_applied(api: Any) -> None:
    kube = KubeClient.for_url(api.url, max_attempts=2, sleep=lambda _: None)

    with pytest.raises(KubeUnavailable) as caught:
        kube._request("evict pod team-a/web-0", partial(_proxy_503))

    assert caught.value.sent is True, caught.value


def test_a_bound_call_is_not_held_past_its_time_by_a_resolver_that_hangs(
    api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """urllib3 resolves the API server's name in its connect (``socket.getaddrinfo``), which no timeout
    bounds: a call with 2 s left took the resolver's 4 s. It now gives up by its time, nothing sent."""
    resolve = socket.getaddrinfo

    def hanging(host: Any, *args: Any, **kw: Any) -> Any:
        if host == "localhost":
            time.sleep(4.0)
        return resolve(host, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", hanging)
    port = api.url.rsplit(":", 1)[1]
    kube = KubeClient.for_url(f"http://localhost:{port}", max_attempts=1, sleep=lambda _: None)
    deadline = time.monotonic() + 2.0
    bound = kube.within(lambda: deadline - time.monotonic())
    began = time.monotonic()

    with pytest.raises(KubeUnavailable, match="not resolved") as caught:
        bound.get_node("n1")

    assert time.monotonic() - began < 2.0 and caught.value.sent is False
