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
import urllib3.util.connection
from kubernetes.client import Configuration
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


def _hanging_for(name: str, monkeypatch: pytest.MonkeyPatch, *, family: int | None = None) -> None:
    """``socket.getaddrinfo`` hangs 4 s over ``name`` (only when asked for ``family``, if given)."""
    resolve = socket.getaddrinfo

    def hanging(host: Any, port: Any, *args: Any, **kw: Any) -> Any:
        asked = args[0] if args else kw.get("family", 0)
        if host == name and (family is None or asked == family):
            time.sleep(4.0)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return resolve(host, port, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", hanging)


def _bound(kube: KubeClient, seconds: float) -> KubeClient:
    deadline = time.monotonic() + seconds
    return kube.within(lambda: deadline - time.monotonic())


def test_a_bound_call_its_proxy_does_not_serve_is_not_held_by_a_resolver_that_hangs(
    api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy taken from the environment (kubernetes v37 reads HTTP(S)_PROXY) with the API server in
    ``no_proxy``: the client connects straight to it (kubernetes.client.rest: ``should_bypass_proxies``),
    and urllib3 resolves its name in the connect. Before, any proxy set skipped the bounded lookup, so a
    hanging resolver held the call past its time (Lambda with an egress proxy and NO_PROXY naming the
    EKS endpoint)."""
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    _hanging_for("localhost", monkeypatch)
    port = api.url.rsplit(":", 1)[1]
    kube = KubeClient.for_url(f"http://localhost:{port}", max_attempts=1, sleep=lambda _: None)
    assert kube.api_client.configuration.proxy, "the proxy of the environment"
    began = time.monotonic()

    with pytest.raises(KubeUnavailable, match="not resolved") as caught:
        _bound(kube, 2.0).get_node("n1")

    assert time.monotonic() - began < 2.0 and caught.value.sent is False


def test_a_bound_call_through_a_proxy_is_not_held_by_a_resolver_that_hangs_on_the_proxys_name(
    api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through a proxy, urllib3 connects to the proxy, resolving the proxy's name in that connect, which
    no timeout bounds either. Before, a proxy skipped the lookup: the call took the resolver's 4 s."""
    _hanging_for("proxy.example.test", monkeypatch)
    cfg = Configuration(host=api.url, proxy="http://proxy.example.test:3128", no_proxy="")
    kube = KubeClient.from_configuration(cfg, max_attempts=1, sleep=lambda _: None)
    began = time.monotonic()

    with pytest.raises(
        KubeUnavailable, match=r"the proxy.s name .proxy\.example\.test. not resolved"
    ) as caught:
        _bound(kube, 2.0).get_node("n1")

    assert time.monotonic() - began < 2.0 and caught.value.sent is False


def test_the_bounded_lookup_asks_for_the_address_family_urllib3_connects_with(
    api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a host that cannot bind IPv6 urllib3 asks the resolver for IPv4 addresses only
    (``allowed_gai_family``); a resolver that hangs on the IPv6 (AAAA) query does not hold its connect.
    The lookup before it asked for both: it hung there, and the call, which would have gone through,
    was given up, not sent."""
    monkeypatch.setattr(urllib3.util.connection, "HAS_IPV6", False)
    _hanging_for("localhost", monkeypatch, family=socket.AF_UNSPEC)
    port = api.url.rsplit(":", 1)[1]
    kube = KubeClient.for_url(f"http://localhost:{port}", max_attempts=1, sleep=lambda _: None)

    node = _bound(kube, 3.0).get_node("n1")

    assert node.metadata.name == "n1"
