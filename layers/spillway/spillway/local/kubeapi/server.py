"""The HTTP side: request routing, authentication, fault injection, the request log, and the server."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, cast
from urllib.parse import parse_qs, unquote, urlsplit

from spillway.local.kubeapi import resources
from spillway.local.kubeapi.patch import clone
from spillway.local.kubeapi.resources import PODS, ResourceType
from spillway.local.kubeapi.selectors import parse_field_selector, parse_label_selector
from spillway.local.kubeapi.status import KubeApiError, bad_request, fault, forbidden, status_object
from spillway.local.kubeapi.store import Store, dumps

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

JsonObj = dict[str, Any]
ObjList = list[JsonObj]

log = logging.getLogger(__name__)

DEFAULT_TOKEN = "spillway-local-token"


@dataclass(frozen=True)
class RequestRecord:
    """One request as the server saw it: method, path (no query), query (last value per key), the HTTP
    status it was answered with, the bearer token it carried and its media type (``Content-Type``
    without parameters, ``""`` when it had no body)."""

    method: str
    path: str
    query: Mapping[str, str]
    status: int
    token: str | None = None
    content_type: str = ""


@dataclass
class _Failure:
    remaining: int
    status: int
    path_prefix: str | None
    method: str | None
    retry_after: int | None = None
    message: str | None = None


class Faults:
    """Fault injection, safe to drive from the test thread while the server answers."""

    def __init__(self, expire_tokens: Callable[[], None]) -> None:
        self._lock = threading.Lock()
        self._failures: list[_Failure] = []
        self._delays: dict[str | None, float] = {}
        self._expire_tokens = expire_tokens

    def fail_next(
        self,
        n: int = 1,
        status: int = 500,
        path_prefix: str | None = None,
        *,
        method: str | None = None,
        retry_after: int | None = None,
        message: str | None = None,
    ) -> None:
        """The next ``n`` requests whose path starts with ``path_prefix`` (and whose method is ``method``,
        when given) are answered ``status`` with a Status body. A 429 without ``message`` is API
        Priority and Fairness refusing the request: a plain-text body, no Status, ``Retry-After`` (1, or
        ``retry_after``) and the ``X-Kubernetes-PF-*`` headers; with ``message`` it is a Status, as the
        API's own handlers write one (the cacher's "storage is (re)initializing"), with
        ``Retry-After: 1``. ``retry_after``: the Status's ``details.retryAfterSeconds`` and the
        ``Retry-After`` header, as the API server writes them for any status that carries one (a 500
        ``ServerTimeout``, a 504). A 403 without ``message`` is RBAC refusing the request: the
        Forbidden Status ``responsewriters.Forbidden`` writes for it, naming :data:`RBAC_USER`.
        ``message``: the Status's message instead of the injected fault's own words."""
        if n > 0:
            verb = method.upper() if method else None
            with self._lock:
                self._failures.append(_Failure(n, status, path_prefix, verb, retry_after, message))

    def delay(self, seconds: float, path_prefix: str | None = None) -> None:
        """Sleep ``seconds`` before answering requests under ``path_prefix`` (all requests when ``None``).
        ``delay(0)`` clears every delay; ``delay(0, prefix)`` clears that prefix's."""
        with self._lock:
            if seconds > 0:
                self._delays[path_prefix] = seconds
            elif path_prefix is None:
                self._delays.clear()
            else:
                self._delays.pop(path_prefix, None)

    def expire_continue_tokens(self) -> None:
        """Every continue token issued so far answers 410 ``Expired`` (as after an etcd compaction)."""
        self._expire_tokens()

    def clear(self) -> None:
        """Forget pending failures and delays."""
        with self._lock:
            self._failures.clear()
            self._delays.clear()

    def _take_failure(self, method: str, path: str) -> tuple[int, int | None, str | None] | None:
        with self._lock:
            for failure in self._failures:
                if failure.path_prefix is not None and not path.startswith(failure.path_prefix):
                    continue
                if failure.method is not None and failure.method != method:
                    continue
                failure.remaining -= 1
                if failure.remaining <= 0:
                    self._failures.remove(failure)
                return failure.status, failure.retry_after, failure.message
        return None

    def _delay_for(self, path: str) -> float:
        with self._lock:
            matching = [s for p, s in self._delays.items() if p is None or path.startswith(p)]
        return max(matching, default=0.0)


@dataclass
class _Response:
    code: int
    body: str
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


def _json(code: int, obj: Any) -> _Response:
    return _Response(code, dumps(obj))


def _page_not_found() -> KubeApiError:
    return KubeApiError(404, "the server could not find the requested resource")


def _method_not_allowed() -> KubeApiError:
    return KubeApiError(405, "the server does not allow this method on the requested resource")


# the UIDs of the FlowSchema and PriorityLevelConfiguration API Priority and Fairness classified a request
# by (a cluster's own; these stand for the suggested ``global-default`` ones)
_PF_HEADERS = {
    "X-Kubernetes-PF-FlowSchema-UID": "5a3b4c1e-0f6d-4c5e-9b1a-6f1d2e3c4b5a",
    "X-Kubernetes-PF-PriorityLevel-UID": "8c2d7e9f-1a3b-4c5d-8e6f-7a8b9c0d1e2f",
}


def _throttled(retry_after: int | None) -> _Response:
    """API Priority and Fairness refusing a request before any handler runs (k8s.io/apiserver
    pkg/server/filters priority-and-fairness.go: ``setResponseHeaders``, then ``tooManyRequests``, which
    writes ``Retry-After`` and ``http.Error``'s plain text): no Status body, as the max-in-flight limiter
    answers too."""
    headers = {"Retry-After": str(retry_after or 1), "X-Content-Type-Options": "nosniff", **_PF_HEADERS}
    return _Response(
        429, "Too many requests, please try again later.\n", "text/plain; charset=utf-8", headers=headers
    )


#: the user an injected 403 names (a cluster names the one its authenticator mapped the credentials to)
RBAC_USER = "spillway"
_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass(frozen=True)
class _Attributes:
    """What the authorizer is asked of a request (k8s.io/apiserver pkg/endpoints/request
    requestinfo.go ``NewRequestInfo``)."""

    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    @classmethod
    def of(cls, method: str, path: str, query: Mapping[str, str]) -> _Attributes | None:
        """The request's attributes; None for a path that names no resource (``/apis``, ``/version``)."""
        parts = [unquote(p) for p in path.strip("/").split("/")]
        if parts[:1] == ["api"] and len(parts) >= 3:
            group, rest = "", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            group, rest = parts[1], parts[3:]
        else:
            return None
        namespace = ""
        if rest[0] == "namespaces" and len(rest) > 1:
            namespace = rest[1]
            if len(rest) > 2 and rest[2] not in ("status", "finalize"):
                rest = rest[2:]
        name = rest[1] if len(rest) > 1 else ""
        verb = _VERBS.get(method, method.lower())
        if not name and verb == "get":
            verb = "watch" if query.get("watch") in ("true", "1") else "list"
        if not name and verb == "delete":
            verb = "deletecollection"
        return cls(verb, group, rest[0], rest[2] if len(rest) > 2 else "", namespace, name)


def _rbac_refusal(method: str, path: str, query: Mapping[str, str]) -> KubeApiError:
    """RBAC refusing the request (k8s.io/apiserver pkg/endpoints/handlers/responsewriters errors.go
    ``Forbidden`` and ``forbiddenMessage``, then ``errors.NewForbidden``): the user, the verb, the
    resource with its subresource, its API group, the namespace or the cluster scope; the details name the
    resource (without its subresource), its group and the object."""
    found = _Attributes.of(method, path, query)
    if found is None:
        why = f'User "{RBAC_USER}" cannot {_VERBS.get(method, method.lower())} path "{path}"'
        error = KubeApiError(403, f"forbidden: {why}", empty_details=True)
    else:
        resource = f"{found.resource}/{found.subresource}" if found.subresource else found.resource
        scope = f'in the namespace "{found.namespace}"' if found.namespace else "at the cluster scope"
        why = f'User "{RBAC_USER}" cannot {found.verb} resource "{resource}" in API group "{found.group}" {scope}'
        qualified = f"{found.resource}.{found.group}" if found.group else found.resource
        error = forbidden(qualified, found.name, why)
    error.extra_headers["X-Content-Type-Options"] = "nosniff"
    return error


class _Router:
    """Maps a request to the store: the REST layout of ``/api/v1`` and ``/apis/<group>/<version>``."""

    def __init__(self, store: Store, address: Callable[[], str], installed: frozenset[str] | None) -> None:
        self.store = store
        self._address = address
        #: qualified names of the optional resources served (``None``: all of them)
        self.installed = installed

    def handle(
        self, method: str, path: str, query: Mapping[str, str], content_type: str, raw: bytes
    ) -> _Response:
        if path in ("/healthz", "/readyz", "/livez"):
            return _Response(200, "ok", "text/plain; charset=utf-8")
        if path == "/version":
            return _json(200, resources.VERSION_INFO)
        if path == "/api":
            return _json(
                200,
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": self._address()}
                    ],
                },
            )
        if path == "/apis":
            groups = resources.api_groups(self.installed)
            return _json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        segments = [unquote(s) for s in path.strip("/").split("/")]
        if segments[0] == "api" and len(segments) >= 2:
            group_version, rest = segments[1], segments[2:]
        elif segments[0] == "apis" and len(segments) == 2:
            group = resources.api_group(segments[1], self.installed)
            if group is None:
                raise _page_not_found()
            return _json(200, group)
        elif segments[0] == "apis" and len(segments) >= 3:
            group_version, rest = f"{segments[1]}/{segments[2]}", segments[3:]
        else:
            raise _page_not_found()
        if not rest:
            listing = resources.resource_list(group_version, self.installed)
            if listing is None:
                raise _page_not_found()
            return _json(200, listing)
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise _page_not_found()
        rt = resources.by_path(group_version, rest[0], self.installed)
        if rt is None or not resources.served(rt, self.installed):
            raise _page_not_found()
        if not rt.deprecation:
            return self._resource(rt, method, namespace, rest, query, content_type, raw)
        # a deprecated version answers everything, errors too, with its warning (RFC 7234 code 299)
        warning = {"Warning": f'299 - "{rt.deprecation}"'}
        try:
            response = self._resource(rt, method, namespace, rest, query, content_type, raw)
        except KubeApiError as err:
            err.extra_headers.update(warning)
            raise
        response.headers.update(warning)
        return response

    def _resource(
        self,
        rt: ResourceType,
        method: str,
        namespace: str | None,
        rest: list[str],
        query: Mapping[str, str],
        content_type: str,
        raw: bytes,
    ) -> _Response:
        """A request to ``rt``'s collection, one of its objects or a subresource (``rest``: the path
        from the plural on)."""
        if namespace is not None and not rt.namespaced:
            raise _page_not_found()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        body = self._body(raw)
        dry_run = self._dry_run(query)
        if name is None:
            return self._collection(rt, method, namespace, query, body, dry_run)
        if rt.namespaced and namespace is None:
            raise _page_not_found()
        if sub is None:
            return self._item(rt, method, namespace, name, content_type, body, query)
        return self._subresource(rt, method, namespace, name, sub, content_type, body, dry_run)

    @staticmethod
    def _body(raw: bytes) -> Any:
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise bad_request(f"couldn't get version/kind; json parse error: {exc}") from None

    @staticmethod
    def _dry_run(query: Mapping[str, str]) -> bool:
        value = query.get("dryRun")
        if value in (None, ""):
            return False
        if value != "All":
            raise bad_request(f'dryRun: Unsupported value: {value!r}: supported values: "All"')
        return True

    @staticmethod
    def _delete_options(body: Any, query: Mapping[str, str]) -> JsonObj:
        """A DELETE's options: its body when it has one, else its query (``gracePeriodSeconds``,
        ``dryRun``), never both (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/delete.go)."""
        if isinstance(body, dict):
            return body
        options: JsonObj = {}
        if query.get("gracePeriodSeconds"):
            try:
                options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
            except ValueError:
                raise bad_request(
                    f"gracePeriodSeconds: Invalid value: {query['gracePeriodSeconds']!r}"
                ) from None
        if _Router._dry_run(query):
            options["dryRun"] = ["All"]
        return options

    def _collection(
        self,
        rt: ResourceType,
        method: str,
        namespace: str | None,
        query: Mapping[str, str],
        body: Any,
        dry_run: bool,
    ) -> _Response:
        if method == "GET":
            if query.get("watch") in ("true", "1"):
                raise bad_request("watch is not supported by the Spillway API emulator")
            return self._list(rt, namespace, query)
        if method == "POST":
            if rt.namespaced and namespace is None:
                raise _method_not_allowed()
            return _json(201, self.store.create(rt, namespace, body, dry_run=dry_run))
        if method == "DELETE" and "deletecollection" in rt.verbs:
            labels = parse_label_selector(query.get("labelSelector"))
            fields = parse_field_selector(query.get("fieldSelector"), rt.canonical)
            options = body if isinstance(body, dict) else None
            deleted = self.store.delete_collection(
                rt, namespace, labels=labels, fields=fields, dry_run=dry_run, options=options
            )
            return _json(200, deleted)
        raise _method_not_allowed()

    def _list(self, rt: ResourceType, namespace: str | None, query: Mapping[str, str]) -> _Response:
        limit: int | None = None
        if query.get("limit"):
            try:
                limit = int(query["limit"])
            except ValueError:
                raise bad_request(f"limit: Invalid value: {query['limit']!r}") from None
            if limit < 0:
                raise bad_request("limit: Invalid value: must be non-negative")
        result = self.store.list_page(
            rt,
            namespace,
            labels=parse_label_selector(query.get("labelSelector")),
            fields=parse_field_selector(query.get("fieldSelector"), rt.canonical),
            limit=limit,
            continue_token=query.get("continue") or None,
        )
        meta: JsonObj = {"resourceVersion": result.resource_version}
        if result.continue_token:
            meta["continue"] = result.continue_token
        if result.remaining is not None:
            meta["remainingItemCount"] = result.remaining
        head = dumps({"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": meta})
        # the items are serialised once per object and joined, not re-serialised per page; a built-in
        # kind's items carry no apiVersion and kind (Entry.item_text)
        items = ",".join(e.item_text(rt.custom) for e in result.items)
        text = head[:-1] + ',"items":[' + items + "]}"
        return _Response(200, text)

    def _item(
        self,
        rt: ResourceType,
        method: str,
        namespace: str | None,
        name: str,
        content_type: str,
        body: Any,
        query: Mapping[str, str],
    ) -> _Response:
        dry_run = self._dry_run(query)
        if method == "GET":
            return _json(200, self.store.get(rt, namespace, name))
        if method == "PUT":
            return _json(200, self.store.replace(rt, namespace, name, body, dry_run=dry_run))
        if method == "PATCH":
            return _json(200, self.store.patch(rt, namespace, name, content_type, body, dry_run=dry_run))
        if method == "DELETE":
            return _json(200, self.store.delete(rt, namespace, name, self._delete_options(body, query)))
        raise _method_not_allowed()

    def _subresource(
        self,
        rt: ResourceType,
        method: str,
        namespace: str | None,
        name: str,
        sub: str,
        content_type: str,
        body: Any,
        dry_run: bool,
    ) -> _Response:
        if sub == "status" and rt.has_status:
            if method == "GET":
                return _json(200, self.store.get(rt, namespace, name))
            if method == "PUT":
                return _json(
                    200, self.store.replace(rt, namespace, name, body, subresource="status", dry_run=dry_run)
                )
            if method == "PATCH":
                return _json(
                    200,
                    self.store.patch(
                        rt, namespace, name, content_type, body, subresource="status", dry_run=dry_run
                    ),
                )
            raise _method_not_allowed()
        if sub == "scale" and rt.scale is not None:
            return self._scale(rt, method, namespace, name, content_type, body, dry_run)
        if rt is PODS and namespace is not None and sub == "eviction":
            if method != "POST":
                raise _method_not_allowed()
            return _json(201, self.store.evict(namespace, name, body, dry_run=dry_run))
        if rt is PODS and namespace is not None and sub == "binding":
            if method != "POST":
                raise _method_not_allowed()
            target = (body or {}).get("target") if isinstance(body, dict) else None
            node = (target or {}).get("name") if isinstance(target, dict) else None
            if not node:
                raise KubeApiError(422, f'Binding "{name}" is invalid: target.name: Required value')
            self.store.bind(namespace, name, node, running=False, dry_run=dry_run)
            return _json(201, status_object(201, status="Success"))
        raise _page_not_found()

    def _scale(
        self,
        rt: ResourceType,
        method: str,
        namespace: str | None,
        name: str,
        content_type: str,
        body: Any,
        dry_run: bool,
    ) -> _Response:
        """A CRD's scale subresource: get, update (PUT) and patch, as ``crdHandler.serveScale`` serves it."""
        if method == "GET":
            return _json(200, self.store.get_scale(rt, namespace, name))
        if method == "PUT":
            return _json(200, self.store.replace_scale(rt, namespace, name, body, dry_run=dry_run))
        if method == "PATCH":
            return _json(
                200, self.store.patch_scale(rt, namespace, name, content_type, body, dry_run=dry_run)
            )
        raise _method_not_allowed()


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], emulator: KubeApiServer) -> None:
        self.emulator = emulator
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "spillway-kubeapi/1"
    disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms delayed-ACK stalls

    def setup(self) -> None:
        super().setup()
        srv = cast(_HTTPServer, self.server)
        with srv.connections_lock:
            srv.connections.add(self.connection)

    def finish(self) -> None:
        srv = cast(_HTTPServer, self.server)
        with srv.connections_lock:
            srv.connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_PATCH(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0] or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _serve(self) -> None:
        emulator = cast(_HTTPServer, self.server).emulator
        method = self.command
        parts = urlsplit(self.path)
        path = parts.path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        raw = self._read_body()
        auth = self.headers.get("Authorization") or ""
        token = auth[7:].strip() if auth[:7].lower() == "bearer " else None
        media = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        response = emulator._answer(method, path, query, token, media, raw)
        emulator._record(RequestRecord(method, path, query, response.code, token, media if raw else ""))
        payload = response.body.encode()
        self.send_response(response.code)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-cache, private")
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)


class KubeApiServer:
    """A Kubernetes API server on 127.0.0.1 for tests and ``spillway demo``.

    ``with KubeApiServer() as api: CoreV1Api(api.api_client()).list_node()``. See the package
    docstring for what is modelled.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        require_token: str | None = None,
        clock: Callable[[], datetime] | None = None,
        max_snapshots: int = 64,
        optional_resources: Iterable[str] | None = None,
    ) -> None:
        #: when set, requests must carry ``Authorization: Bearer <require_token>`` or get 401;
        #: may be changed while the server runs (token rotation)
        self.require_token = require_token
        self.store = Store(clock=clock or (lambda: datetime.now(UTC)), max_snapshots=max_snapshots)
        self.faults = Faults(self.store.expire_snapshots)
        self._router = _Router(self.store, lambda: self.url.removeprefix("http://"), None)
        self.optional_resources = optional_resources
        self._requests: list[RequestRecord] = []
        self._requests_lock = threading.Lock()
        self._last_token: str | None = None
        self._address = (host, port)
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def optional_resources(self) -> frozenset[str]:
        """Qualified names (``podgroups.scheduling.volcano.sh``) of the optional resources served: the
        CRDs installed and the alpha APIs switched on (see ``resources.OPTIONAL``)."""
        installed = self._router.installed
        return frozenset(resources.OPTIONAL) if installed is None else installed

    @optional_resources.setter
    def optional_resources(self, names: Iterable[str] | None) -> None:
        """Install (or uninstall) optional resources, also while serving; ``None`` installs them all but
        the alternatives (``resources.ALTERNATIVES``: another project's CRD of a name in
        ``resources.OPTIONAL``, installed only when named, and never with that name).
        Others answer 404 and are left out of discovery, as on a cluster without the CRD; objects
        stored for them are kept."""
        if names is None:
            self._router.installed = None
            return
        chosen = frozenset(names)
        known = [*resources.OPTIONAL, *resources.ALTERNATIVES]
        unknown = sorted(chosen - set(known))
        if unknown:
            raise ValueError(f"unknown optional resources {unknown}; choose among {known}")
        both = sorted(a for a in chosen & set(resources.ALTERNATIVES) if a.rpartition("/")[0] in chosen)
        if both:
            raise ValueError(
                f"{both} and {[a.rpartition('/')[0] for a in both]} are one CRD name: install one"
            )
        names = [a.rpartition("/")[0] for a in sorted(chosen & set(resources.ALTERNATIVES))]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"two alternatives of {twice} are one CRD name: install one")
        self._router.installed = chosen

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> Self:
        if self._httpd is not None:
            return self
        self._httpd = _HTTPServer(self._address, self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="kubeapi-emulator",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        httpd.shutdown()
        with httpd.connections_lock:
            open_connections = list(httpd.connections)
        for conn in open_connections:  # keep-alive connections would otherwise outlive the server
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (the server must be started)."""
        if self._httpd is None:
            raise RuntimeError("the API server is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    # --- what the server saw ---------------------------------------------------------------------

    @property
    def requests(self) -> list[RequestRecord]:
        """A copy of the request log, oldest first."""
        with self._requests_lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        with self._requests_lock:
            self._requests.clear()

    @property
    def last_token(self) -> str | None:
        """The bearer token of the most recent request that carried one."""
        return self._last_token

    @property
    def resource_version(self) -> str:
        """The cluster's current resourceVersion."""
        return self.store.resource_version

    def _record(self, record: RequestRecord) -> None:
        with self._requests_lock:
            self._requests.append(record)

    def _answer(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        token: str | None,
        media: str,
        raw: bytes,
    ) -> _Response:
        if token:
            self._last_token = token
        pause = self.faults._delay_for(path)
        if pause > 0:
            time.sleep(pause)
        try:
            injected = self.faults._take_failure(method, path)
            if injected is not None and injected[0] == 429 and injected[2] is None:
                return _throttled(injected[1])
            if injected is not None and injected[0] == 403 and injected[2] is None:
                raise _rbac_refusal(method, path, query)
            if injected is not None:
                raise fault(*injected)
            if self.require_token is not None and token != self.require_token:
                raise KubeApiError(401, "Unauthorized")
            return self._router.handle(method, path, query, media, raw)
        except KubeApiError as err:
            return _Response(err.code, dumps(err.status()), headers=err.headers())
        except Exception as exc:  # a bug in the emulator: answer like an apiserver panic would
            log.exception("kubeapi emulator failed on %s %s", method, path)
            return _Response(500, dumps(KubeApiError(500, f"Internal error occurred: {exc!r}").status()))

    # --- in-process API (tests, demo) ------------------------------------------------------------

    def add(self, obj: Mapping[str, Any]) -> JsonObj:
        """Store any object of a served kind (``kind`` required; ``apiVersion`` picks ``v1`` or
        ``events.k8s.io/v1`` Events, and which ``PodGroup``; an optional resource not installed may be
        added too). Fills uid, resourceVersion, creationTimestamp, the namespace
        (``default``, created when missing). Status given for a Pod is kept. Returns the stored object."""
        kind = obj.get("kind")
        if not isinstance(kind, str):
            raise ValueError("add() needs an object with a 'kind'")
        api_version = obj.get("apiVersion")
        rt = (
            resources.by_api_version(api_version, kind, self._router.installed)
            if api_version
            else resources.resolve_kind(kind)
        )
        if rt is None:
            raise ValueError(f"the emulator does not serve {api_version} {kind}")
        namespace = (obj.get("metadata") or {}).get("namespace") if rt.namespaced else None
        return clone(self.store.create(rt, namespace, clone(dict(obj)), via_api=False))

    def get(self, kind: str, name: str, namespace: str | None = None) -> JsonObj | None:
        """A copy of the object (PDBs with their status computed), or ``None``. ``kind`` is a kind,
        plural or short name, or ``<plural>.<group>`` where several kinds share it
        (``podgroups.scheduling.volcano.sh``); namespaced kinds default to ``default``."""
        rt = resources.resolve_kind(kind)
        found = self.store.find(rt, namespace or "default", name)
        return None if found is None else clone(found)

    def list(self, kind: str, namespace: str | None = None) -> ObjList:
        """Copies of every object of ``kind`` (in ``namespace`` when given), in API order.
        Events appear in their ``v1`` shape whichever API recorded them."""
        return clone(self.store.all_objects(resources.resolve_kind(kind), namespace))

    def delete(self, kind: str, name: str, namespace: str | None = None) -> JsonObj | None:
        """Remove an object now (a Pod too: a delete of grace 0, the kubelet's or a forced one);
        returns what was stored, or ``None`` when there was nothing."""
        rt = resources.resolve_kind(kind)
        with self.store.lock:
            found = self.store.find(rt, namespace or "default", name)
            if found is None:
                return None
            self.store.delete(rt, namespace or "default", name, {"gracePeriodSeconds": 0})
            return clone(found)

    @property
    def kubelet_exit_delay(self) -> float:
        """Seconds the emulated kubelet takes to confirm a graceful pod deletion (at most the pod's
        grace period): a pod deleted or evicted through the API stays listed, terminating, that long.
        Set it long to hold pods terminating, or 0."""
        return self.store.kubelet_exit_delay

    @kubelet_exit_delay.setter
    def kubelet_exit_delay(self, seconds: float) -> None:
        self.store.kubelet_exit_delay = seconds

    @property
    def kubelet_confirm_delay(self) -> float:
        """Seconds the emulated kubelet's final delete comes after the pod's containers stopped (a real
        kubelet tears the pod down first, so the pod is listed a moment past its deletionTimestamp);
        0 by default."""
        return self.store.kubelet_confirm_delay

    @kubelet_confirm_delay.setter
    def kubelet_confirm_delay(self, seconds: float) -> None:
        self.store.kubelet_confirm_delay = seconds

    @property
    def node_controller_delay(self) -> float:
        """Seconds after a Node's change before the emulated node lifecycle controller taints it (or
        lifts its taint): ``node.kubernetes.io/unschedulable:NoSchedule`` while it is cordoned, and the
        NoSchedule taints of its conditions (see :mod:`.nodelifecycle`). 0 by default: the next request
        sees it, not the write's own answer. Set it long to hold a Node in the moment between."""
        return self.store.node_controller_delay

    @node_controller_delay.setter
    def node_controller_delay(self, seconds: float) -> None:
        self.store.node_controller_delay = seconds

    def update(self, kind: str, obj: Mapping[str, Any]) -> JsonObj:
        """Replace an existing object whole, status included, whatever its resourceVersion (the
        test's hand, not an API write); raises :class:`KubeApiError` 404 when it does not exist."""
        return clone(self.store.overwrite(resources.resolve_kind(kind), clone(dict(obj))))

    def bind(self, pod: str | Mapping[str, Any], node: str, namespace: str | None = None) -> JsonObj:
        """Schedule and start a pod: ``spec.nodeName = node``, phase ``Running``, ``PodScheduled``,
        ``Initialized``, ``ContainersReady`` and ``Ready`` true. ``pod`` is a name or a pod object."""
        if isinstance(pod, str):
            name, ns = pod, namespace or "default"
        else:
            meta = pod.get("metadata") or {}
            name, ns = meta["name"], namespace or meta.get("namespace") or "default"
        return clone(self.store.bind(ns, name, node, running=True))

    def api_client(self, token: str | None = None) -> ApiClient:
        """An official ``kubernetes.client.ApiClient`` for this server (bearer ``token``, by default
        the required token or a fixed one)."""
        from kubernetes import client as k8s

        config = k8s.Configuration(
            host=self.url,
            api_key={"BearerToken": token or self.require_token or DEFAULT_TOKEN},
            api_key_prefix={"BearerToken": "Bearer"},
            no_proxy="127.0.0.1,localhost",
        )
        return k8s.ApiClient(config)
