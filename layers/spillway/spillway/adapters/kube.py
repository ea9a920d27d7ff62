"""The Kubernetes API as Spillway uses it: paged reads into our models, and the writes a drain needs.

Built on the official ``kubernetes`` client (v37), once per Lambda container::

    kube = KubeClient.from_eks("prod", "us-east-1")          # EKS: DescribeCluster + IAM token
    kube = KubeClient.from_secret("spillway/kubeconfig")      # self-managed: kubeconfig in Secrets Manager
    kube = KubeClient.for_url(server.url)                     # the local emulator

Reads ask for ``_preload_content=False`` and parse each page's JSON bytes straight into our pydantic
models (``model_validate_json`` on a page wrapper: no intermediate dicts, no client-side models), so a
list holds one page of bytes at a time plus the models handed out.

Every call carries a timeout (``request_timeout``, 10 s) and is retried ``max_attempts`` times (4) with
exponential backoff and jitter on 429 and 5xx (at least their ``Retry-After``), timeouts and connection errors
(an eviction answers some of these at once: below); then it raises
:class:`~spillway.errors.KubeUnavailable` naming the operation. 403, and 401 (after one retry with a
freshly signed token when the client can sign one), raise ``KubeAuthError``; a read's 403 names the
RBAC rule its function's ClusterRole lacks (:class:`Rule`, as ``deploy/rbac.yaml`` writes one). None
of the client's
own exceptions reaches a caller (they are not even chained), and no message carries a token or
kubeconfig contents.

**An eviction's refusals** are answered at once, not retried in the call (the drain's next round is
the retry): a 429 whose Status carries a cause of reason ``DisruptionBudget`` is a budget's refusal
(:class:`~spillway.errors.EvictionBlocked`), any other 429 is the server limiting the request rate
(:class:`~spillway.errors.EvictionThrottled`), and the 500 "This pod has more than one
PodDisruptionBudget, which the eviction subresource does not support." is a refusal that stands until
the budgets change (:class:`~spillway.errors.EvictionRefused`). The 504 "couldn't update
PodDisruptionBudget ... due to conflicts" (other evictions under the same budget won the race; it asks
for 10 s) is answered at once as :class:`~spillway.errors.EvictionThrottled`: waiting it out in the call,
four attempts of 10 s and more, could pass the drain function's timeout with two such pods in a round.
Any other 5xx is retried as for every call. Three 403s are not RBAC's, and are told apart by the Status's structured fields: a cause of type
``NamespaceTerminating`` (the pod's namespace is being deleted and takes the pod with it:
:class:`~spillway.errors.EvictionNamespaceTerminating`), and ``details`` naming group ``policy``, kind
``poddisruptionbudget`` (the budget's status refuses every eviction until its controller rewrites it:
``disruptionsAllowed`` negative, or too many evictions it has not confirmed:
:class:`~spillway.errors.EvictionBudgetForbidden`). Any other 403 (RBAC names ``pods/eviction`` and
the user) is ``KubeAuthError``.

**A continue token that expires (410 Expired) mid-list** means etcd compacted the revision the list
reads: the rest can only come from another revision, and a client that needs a consistent list must
start it again without ``continue`` (Kubernetes API concepts, "Retrieving large results sets in
chunks"). Merging two passes would hand out an object replaced between them twice (a StatefulSet pod
deleted and created again: bound to its old node, and pending). The ``list_*`` methods start again
from the top and keep only the pass that finishes; ``iter_*`` yield page by page, so the caller already
has the first pages: they raise :class:`~spillway.errors.ListExpired` (a ``KubeUnavailable``), and the
caller drops what it read and starts again (observe takes the whole observation again). A 410 before
anything was handed out starts the list again at once. ``LIST_PASSES`` (3) expiries of one list raise
``KubeUnavailable``.

**Shared-cluster objects** (:meth:`KubeClient.iter_shared_objects`): namespaces, the three kinds of
PodGroup, Workloads, PriorityClasses and CapacityQuotas, read as raw JSON and parsed one by one (an
object the model refuses is logged and skipped). A kind is read as having no objects only when the API server says the
resource does not exist: a CRD that is not installed answers 404, which gives none of it, logged once
at info, so a cluster without Volcano still works. A kind every API server serves (namespaces,
PriorityClasses, batch/v1 Jobs, and the volume and DaemonSet reads) answering 404 raises as any other failure. A 404 after part of a list was handed out (the CRD
deleted, or the version no longer served, between two pages) gives neither: the pages read belong to a
list that cannot be finished, so it raises ``ListExpired`` as an expired token does, and the fresh read
finds the kind absent. Any other failure raises as every read does: RBAC
refusing a list (403: the ClusterRole lacks the rule, named in the error) or no useful answer
(``KubeUnavailable``) is not "none", and a caller that took it for none would plan on a cluster
without its quotas, gangs or volumes. :meth:`KubeClient.list_custom`,
:meth:`KubeClient.patch_custom_status` and :meth:`KubeClient.list_pod_templates` are the generic
custom-resource calls the ProvisioningRequest logic uses.

**Writes** send JSON merge patches (``application/merge-patch+json``, set explicitly: for a dict body
the v37 client would otherwise send ``strategic-merge-patch+json``). Read-modify-write patches carry
``metadata.resourceVersion``, so a concurrent change makes the server answer 409 and we re-read and
retry instead of losing it.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import copy
import hashlib
import json
import logging
import random
import re
import shlex
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

import boto3
import urllib3
import urllib3.util.connection
import yaml
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    PartialCredentialsError,
)
from kubernetes.client import rest as kube_rest
from kubernetes.client.api.apis_api import ApisApi
from kubernetes.client.api.core_v1_api import CoreV1Api
from kubernetes.client.api.custom_objects_api import CustomObjectsApi
from kubernetes.client.api.policy_v1_api import PolicyV1Api
from kubernetes.client.api_client import ApiClient
from kubernetes.client.configuration import Configuration
from kubernetes.client.exceptions import ApiException
from kubernetes.client.models import (
    CoreV1Event,
    V1DeleteOptions,
    V1EventSource,
    V1Eviction,
    V1ObjectMeta,
    V1ObjectReference,
    V1Preconditions,
)
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.kube_config import load_kube_config_from_dict
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from spillway.adapters.eks_auth import EksTokenProvider
from spillway.errors import (
    AwsError,
    ConfigurationError,
    EvictionBlocked,
    EvictionBudgetForbidden,
    EvictionNamespaceTerminating,
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
    SpillwayError,
)
from spillway.model.cluster import cordon_begins, cordon_digest, cordoned_for
from spillway.model.k8s import (
    AUTOSCALING_GROUP,
    BATCH_GROUP,
    CANDIDATE_TAINT,
    CANDIDATE_TAINT_EFFECT,
    CORDONED_BY_SPILLWAY,
    COSCHEDULING_GROUP,
    DRAINING_TAINT,
    EXCLUDE_FROM_LB_LABEL,
    EXCLUDE_FROM_LB_VALUE,
    KUBEFLOW_GROUP,
    LB_EXCLUDED_BY_SPILLWAY,
    UPSTREAM_GROUP,
    VOLCANO_BATCH_GROUP,
    VOLCANO_GROUP,
    BatchJob,
    CapacityQuota,
    ConfigMap,
    CoschedulingPodGroup,
    CSINode,
    DaemonSet,
    JAXJob,
    MPIJob,
    Namespace,
    Node,
    PaddleJob,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
    PyTorchJob,
    SharedObject,
    StorageClass,
    TFJob,
    UpstreamPodGroup,
    VolcanoJob,
    VolcanoPodGroup,
    VolumeAttachment,
    VolumeObject,
    Workload,
    XGBoostJob,
)
from spillway.model.priorities import CONFIGMAP_NAME, CONFIGMAP_NAMESPACE
from spillway.observability import add_secret_values, add_secret_words, redact

log = logging.getLogger(__name__)

DEFAULT_REQUEST_TIMEOUT = 10.0
DEFAULT_PAGE_SIZE = 500
DEFAULT_MAX_ATTEMPTS = 4
LIST_PASSES = 3  # passes of one list whose continue token expires before it is given up
CONFLICT_ATTEMPTS = 5
# how long the eviction subresource retries a conflict before it answers 409 (EvictionsRetry: 20 steps
# of 0.5 s, 10 % jitter), which a uid precondition no longer met makes it do every time
EVICTION_CONFLICT_RETRY_SECONDS = 11.0
# a client bound to an invocation's time (KubeClient.within) starts no attempt with less than this left
LEAST_ATTEMPT_SECONDS = 1.0
# A call's ``last`` before its first attempt (:meth:`KubeClient._request`): none of it was sent yet.
NO_ATTEMPT = "no attempt"
BODY_CHUNK = 64 * 1024  # bytes read at a time of a bound client's answer, the time left checked between
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
# the whole body of a 422 for a JSON patch that does not apply to the object (apiserver endpoints/
# handlers/patch.go applyJSPatch: NewGenericServerResponse, the library's error left out, no details)
PATCH_NOT_APPLIED = "the server rejected our request due to an error in our request"
COMPONENT = "spillway"
DRAINING_TAINT_EFFECT = "NoSchedule"

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
RawObject = dict[str, Any]


@dataclass(frozen=True)
class Rule:
    """The RBAC rule a request needs, written as a ClusterRole's rule (``deploy/rbac.yaml``): a read
    the API server refuses (403) names it, so the error says what to add."""

    verb: str
    api_group: str  # "" for the core group
    resource: str
    resource_name: str | None = None

    def __str__(self) -> str:
        names = f', resourceNames: ["{self.resource_name}"]' if self.resource_name else ""
        group, resource, verb = self.api_group, self.resource, self.verb
        return f'{{apiGroups: ["{group}"], resources: ["{resource}"]{names}, verbs: ["{verb}"]}}'


def _listing(api_group: str, resource: str) -> Rule:
    return Rule("list", api_group, resource)


@dataclass(frozen=True)
class SharedKind:
    """A kind of the shared-cluster ecosystem: where to list it and the model it parses into.
    ``versions`` are tried in order; the first one served is read. ``built_in``: every API server
    serves it, so a 404 is an error, not a CRD that is not installed."""

    kind: str
    group: str
    versions: tuple[str, ...]
    plural: str
    model: type[SharedObject]
    built_in: bool = False

    @property
    def qualified(self) -> str:
        return f"{self.plural}.{self.group}"


#: what :meth:`KubeClient.iter_shared_objects` reads, besides namespaces (deploy/rbac.yaml grants these)
SHARED_KINDS: tuple[SharedKind, ...] = (
    SharedKind("PodGroup", COSCHEDULING_GROUP, ("v1alpha1",), "podgroups", CoschedulingPodGroup),
    SharedKind("PodGroup", VOLCANO_GROUP, ("v1beta1",), "podgroups", VolcanoPodGroup),
    SharedKind("PodGroup", UPSTREAM_GROUP, ("v1alpha2",), "podgroups", UpstreamPodGroup),
    SharedKind("Workload", UPSTREAM_GROUP, ("v1alpha1", "v1alpha2"), "workloads", Workload),
    # what a Volcano PodGroup's priorityClassName stands for (spillway.model.shared.gang_priorities)
    SharedKind("PriorityClass", UPSTREAM_GROUP, ("v1",), "priorityclasses", PriorityClass, built_in=True),
    # v1alpha1 where the CRD serves it alone: cluster-autoscaler's first CapacityQuota CRD (no v1beta1)
    SharedKind("CapacityQuota", AUTOSCALING_GROUP, ("v1beta1", "v1alpha1"), "capacityquotas", CapacityQuota),
    # jobs that say whether their pods may move (spillway.model.jobs): elasticPolicy, podFailurePolicy
    SharedKind("PyTorchJob", KUBEFLOW_GROUP, ("v1",), "pytorchjobs", PyTorchJob),
    SharedKind("PaddleJob", KUBEFLOW_GROUP, ("v1",), "paddlejobs", PaddleJob),
    # replica types whose evicted pod fails the job (spillway.model.jobs)
    SharedKind("TFJob", KUBEFLOW_GROUP, ("v1",), "tfjobs", TFJob),
    SharedKind("XGBoostJob", KUBEFLOW_GROUP, ("v1",), "xgboostjobs", XGBoostJob),
    SharedKind("JAXJob", KUBEFLOW_GROUP, ("v1",), "jaxjobs", JAXJob),
    # whether an MPIJob finished (its pods are told from the pods: spillway.model.jobs); kubeflow/mpi-operator
    # serves v2beta1, the training operator's own MPIJob v1
    SharedKind("MPIJob", KUBEFLOW_GROUP, ("v2beta1", "v1"), "mpijobs", MPIJob),
    SharedKind("Job", BATCH_GROUP, ("v1",), "jobs", BatchJob, built_in=True),  # same REST layout
    # Volcano's Job: what its controller does when a pod is evicted (spillway.model.jobs)
    SharedKind("Job", VOLCANO_BATCH_GROUP, ("v1alpha1",), "jobs", VolcanoJob),
)


class _ListMeta(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    continue_: str | None = Field(default=None, alias="continue")


class _Page(BaseModel, Generic[M]):
    """One page of a list response: ``items`` parsed into our model, the rest ignored."""

    model_config = ConfigDict(extra="ignore")
    metadata: _ListMeta = Field(default_factory=_ListMeta)
    items: list[M] | None = None


class _RawPage(BaseModel):
    """One page of a list response with its items kept as plain JSON objects."""

    model_config = ConfigDict(extra="ignore")
    metadata: _ListMeta = Field(default_factory=_ListMeta)
    items: list[RawObject] | None = None


_NodePage = _Page[Node]
_PodPage = _Page[Pod]
_PdbPage = _Page[PodDisruptionBudget]


class _ContinueExpired(KubeError):
    """410 Gone on a list page; handled inside the paging loop, never raised to callers."""


class _NotServed(KubeError):
    """404 on a list: the resource is not served (its CRD is not installed)."""


def _parse_page(page_model: type[_Page[M]]) -> Callable[[bytes], tuple[Sequence[M], str | None]]:
    def parse(raw: bytes) -> tuple[Sequence[M], str | None]:
        page = page_model.model_validate_json(raw)
        return page.items or (), page.metadata.continue_ or None

    return parse


def _parse_raw_page(raw: bytes) -> tuple[Sequence[RawObject], str | None]:
    page = _RawPage.model_validate_json(raw)
    return page.items or (), page.metadata.continue_ or None


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _status_doc(exc: ApiException) -> dict[str, Any]:
    """The Status object the server sent with an error ({} when the body is not one)."""
    try:
        doc = json.loads(exc.body) if exc.body else None
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _status_message(exc: ApiException) -> str:
    """``HTTP 404 Not Found: nodes "x" not found`` from the server's Status body (bounded)."""
    message = str(_status_doc(exc).get("message", ""))
    text = f"HTTP {exc.status} {exc.reason or ''}".rstrip()
    if message:
        text += f": {message[:300]}"
    return text


def _retry_after(exc: ApiException) -> float | None:
    headers = exc.headers
    value = headers.get("Retry-After") if headers is not None else None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: the API server never sends one, so ignore it


def _body(resp: Any, time_left: Callable[[], float] | None = None) -> bytes:
    """The response's bytes; its connection goes back to the pool either way. ``time_left``: the seconds
    the call may still take (:meth:`KubeClient.within`), else None."""
    try:
        if time_left is None:
            data: bytes = resp.data
        else:
            data = _read_within(resp, time_left)
    finally:
        resp.release_conn()
    return data


class _OutOfTime(Exception):
    """A bound client's answer still being read when its time ran out."""


def _read_within(resp: Any, time_left: Callable[[], float]) -> bytes:
    """Read the answer in chunks, each socket read given no more than the time left (urllib3's read
    timeout bounds each read of the socket, not the answer: a server that sends a little at a time
    keeps one request going for as long as it likes). A chunk is what one socket read gives
    (``read1``: ``read(n)`` reads until it has ``n`` bytes or the answer ends, each socket read given
    the whole timeout, so an answer trickling in under 64 KiB ran on past the time left); urllib3 1.x
    has no ``read1``, and reads whole chunks. Out of time, the connection is closed, not handed back
    half read."""
    chunks: list[bytes] = []
    read = getattr(resp, "read1", None) or resp.read
    try:
        while True:
            left = time_left()
            if left <= 0:
                raise _OutOfTime
            sock = getattr(getattr(resp, "connection", None), "sock", None)
            if sock is not None and (sock.gettimeout() is None or sock.gettimeout() > left):
                sock.settimeout(left)
            chunk = read(BODY_CHUNK)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    except BaseException:
        resp.close()
        raise


# the eviction subresource's words for a pod more than one budget selects (pkg/registry/core/pod/
# storage/eviction.go: a Status of code 500 with this message, no reason and no details)
MULTIPLE_BUDGETS_MESSAGE = "more than one PodDisruptionBudget"
# policy/v1 DisruptionBudgetCause: the cause type (JSON "reason") of a budget's 429
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"
# core/v1 NamespaceTerminatingCause: the NamespaceLifecycle admission plugin's cause on a 403 for a
# create (an eviction is one) in a namespace being deleted
NAMESPACE_TERMINATING_CAUSE = "NamespaceTerminating"
# the details of the eviction subresource's own 403 (errors.NewForbidden of policy's
# "poddisruptionbudget" resource): a budget's status refuses the eviction, not RBAC
BUDGET_GROUP, BUDGET_RESOURCE = "policy", "poddisruptionbudget"


def _details(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    details = doc.get("details")
    return details if isinstance(details, dict) else {}


def _has_cause(doc: Mapping[str, Any], kind: str) -> bool:
    causes = _details(doc).get("causes")
    return isinstance(causes, list) and any(isinstance(c, dict) and c.get("reason") == kind for c in causes)


def _forbidden_eviction(doc: Mapping[str, Any]) -> type[KubeError] | None:
    """A 403 that is not RBAC's: a terminating namespace, or the pod's budget naming itself."""
    if _has_cause(doc, NAMESPACE_TERMINATING_CAUSE):
        return EvictionNamespaceTerminating
    details = _details(doc)
    if details.get("group") == BUDGET_GROUP and details.get("kind") == BUDGET_RESOURCE:
        return EvictionBudgetForbidden
    return None


def _event_answer(exc: ApiException) -> type[KubeError] | None:
    """An Event create's 403 with a ``NamespaceTerminating`` cause (the NamespaceLifecycle admission
    plugin refuses every create in a namespace being deleted, an Event's too): that Event fails alone,
    it is no sign that RBAC refuses Events (``KubeAuthError``)."""
    if int(exc.status or 0) == 403 and _has_cause(_status_doc(exc), NAMESPACE_TERMINATING_CAUSE):
        return KubeError
    return None


# the eviction subresource's 504 when its budget's update kept conflicting with other evictions for
# the budget (pkg/registry/core/pod/storage/eviction.go: NewTimeoutError("couldn't update
# PodDisruptionBudget %q due to conflicts", 10)): contention, answered at once like a throttling 429
BUDGET_CONFLICTS = re.compile(r"couldn't update PodDisruptionBudget .* due to conflicts")


def _eviction_answer(exc: ApiException) -> type[KubeError] | None:
    """What an eviction's 403, 429 or 500 means (module docstring); None for every other answer."""
    status = int(exc.status or 0)
    if status == 403:
        return _forbidden_eviction(_status_doc(exc))
    if status == 429:
        return EvictionBlocked if _has_cause(_status_doc(exc), DISRUPTION_BUDGET_CAUSE) else EvictionThrottled
    if status == 500 and MULTIPLE_BUDGETS_MESSAGE in str(_status_doc(exc).get("message", "")):
        return EvictionRefused
    if status == 504 and BUDGET_CONFLICTS.search(str(_status_doc(exc).get("message", ""))):
        return EvictionThrottled
    return None


# apiextensions-apiserver ScaleREST.Get: a custom resource with no value at its CRD's specReplicasPath
# answers every scale GET with this 500 (an InternalError), until the object changes
NO_SPEC_REPLICAS = re.compile(r'the spec replicas field "[^"]*" does not exist')


def _scale_answer(exc: ApiException) -> type[KubeError] | None:
    """A scale GET's 500 that names the missing spec replicas: the object's standing answer."""
    if int(exc.status or 0) == 500 and NO_SPEC_REPLICAS.search(str(_status_doc(exc).get("message", ""))):
        return KubeError
    return None


def _uid_test_answer(exc: ApiException) -> type[KubeError] | None:
    """A 422 that says only that the JSON patch did not apply: of a status write testing the uid (whose
    other operation, ``add /status``, applies to any object), the test failed, the object was made
    again. A 422 of validation names the object and its fields (``details``): not this."""
    if int(exc.status or 0) != 422:
        return None
    doc = _status_doc(exc)
    if doc.get("message") == PATCH_NOT_APPLIED and not _details(doc):
        return ObjectReplaced
    return None


Classify = Callable[[ApiException], type[KubeError] | None]


def _final_error(
    op: str,
    exc: ApiException,
    special: Mapping[int, type[KubeError]],
    classify: Classify | None = None,
    rule: Rule | None = None,
) -> KubeError | None:
    """The error an API answer raises at once, or None when another attempt may succeed (429, 5xx,
    no answer at all). ``classify`` reads the answer first: the error class it names, if any, wins. A
    403 names ``rule``, what the request needs, when given."""
    status = int(exc.status or 0)
    kind = classify(exc) if classify is not None else None
    if kind is not None:
        return kind(f"{op}: {_status_message(exc)}")
    if status in special:
        return special[status](f"{op}: {_status_message(exc)}")
    if status == 403 and rule is not None:
        return KubeAuthError(
            f"{op}: {_status_message(exc)}; RBAC does not grant it: add the rule {rule} to this "
            "function's ClusterRole (deploy/rbac.yaml)"
        )
    if status in (401, 403):
        return KubeAuthError(f"{op}: {_status_message(exc)}")
    if status == 409:
        return KubeConflict(f"{op}: {_status_message(exc)}")
    if status == 0 or status == 429 or status >= 500:
        return None
    return KubeError(f"{op}: {_status_message(exc)}")  # 404 and the other 4xx


def _is_address(host: str) -> bool:
    """``host`` is an IP address (nothing to resolve)."""
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
    except OSError:
        return False
    return True


def _connects_to(cfg: Configuration) -> tuple[str, str, int] | None:
    """What urllib3 resolves in its connect for a client of ``cfg``: the proxy's name when the client
    goes through one (kubernetes.client.rest: ``proxy`` set and the API server not in ``no_proxy``:
    ``should_bypass_proxies``), else the API server's; as (what, host, port). None for an address."""
    target, what = urllib3.util.parse_url(str(cfg.host)), "the API server's name"
    proxy = getattr(cfg, "proxy", None)
    bypass = getattr(kube_rest, "should_bypass_proxies", None)  # the client's own rule (v37)
    if proxy and not (bypass is not None and bypass(str(cfg.host), getattr(cfg, "no_proxy", None) or "")):
        target, what = urllib3.util.parse_url(str(proxy)), "the proxy's name"
    host = (target.host or "").strip("[]")
    if not host or _is_address(host):
        return None
    port = target.port or (443 if target.scheme == "https" else 80)
    return f"{what} {host!r}", host, port


def _refused_unserved(exc: ApiException) -> bool:
    """A retried answer that says the request was not applied: a 503 carrying a Kubernetes Status. The
    API server writes one before any handler runs (k8s.io/apiserver pkg/server/filters/waitgroup.go:
    "apiserver is shutting down" to a request it will not serve), and an admission webhook's rejection,
    which may carry a 503, comes before storage. A 503 without a Status is a proxy's in front of the
    API server, which may have forwarded the request before it failed; a 500, 502 or 504 (the
    server's timeout: its handler may still finish), a timeout or a cut answer may each have been
    applied."""
    return int(exc.status or 0) == 503 and _status_doc(exc).get("kind") == "Status"


def _retry_or_raise(
    op: str,
    exc: ApiException,
    special: Mapping[int, type[KubeError]],
    classify: Classify | None = None,
    rule: Rule | None = None,
) -> tuple[str, float | None]:
    """Raise the error of a final answer; else what to log of it, and its Retry-After."""
    final = _final_error(op, exc, special, classify, rule)
    if final is not None:
        raise final from None
    status = int(exc.status or 0)
    last = _status_message(exc) if status else f"connection failed: {exc.reason or 'error'}"
    # the API server sends Retry-After with any Status that carries retryAfterSeconds (a 500
    # ServerTimeout, a 504 too), and client-go waits it for 429 and every 5xx (rest/request.go checkWait)
    return last, _retry_after(exc) if status == 429 or status >= 500 else None


def _name_of(node: str | Node) -> str:
    name = node.metadata.name if isinstance(node, Node) else node
    if not name:
        raise ValueError("a node name is required")
    return name


# A kubeconfig user's credentials, under the keys kubectl reads them from (a token, basic auth's password,
# a client certificate's key, an auth-provider's client secret and tokens); an exec plugin's env values
# are taken whole (API keys, AWS keys), but for AWS_SETTINGS.
CREDENTIAL_KEYS = frozenset(
    {"token", "password", "client-key-data", "client-secret", "id-token", "refresh-token", "access-token"}
)
# The AWS SDKs' and CLI's settings an exec plugin (aws eks get-token, aws-iam-authenticator) is given in
# its env, as eksctl writes AWS_STS_REGIONAL_ENDPOINTS=regional and AWS_DEFAULT_REGION: a region, a
# profile's name, an endpoint mode, a file's path, a role's ARN (AWS SDKs and Tools Reference Guide,
# "Environment variables list"), none of them a credential, and each a word every line may hold: blanked by
# value, a region would leave every line that names it, an ARN, an AZ. AWS_ACCESS_KEY_ID,
# AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN are not here: they are blanked.
AWS_SETTINGS = frozenset(
    {
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_STS_REGIONAL_ENDPOINTS",
        "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_SDK_LOAD_CONFIG",
        "AWS_ROLE_ARN",
        "AWS_ROLE_SESSION_NAME",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CA_BUNDLE",
        "AWS_RETRY_MODE",
        "AWS_MAX_ATTEMPTS",
        "AWS_USE_FIPS_ENDPOINT",
        "AWS_USE_DUALSTACK_ENDPOINT",
        "AWS_DEFAULT_OUTPUT",
    }
)


# The last word of a command-line flag's name that says its value is a credential: kubelogin's
# --client-secret and --client-certificate-password, int128/kubelogin's --oidc-client-secret=..., a
# --token, --api-key or --password, spelled with '-', '_', '.' or in camelCase (-clientSecret, --apiKey:
# Go's flag package takes any spelling). A flag whose name ends in another word takes no secret
# (--token-cache-dir, --password-stdin, --key-file: a path, a switch), nor does an argument that is no
# flag (the word "token", aws-iam-authenticator's subcommand) but a ``key=value`` one whose key ends so
# (Vault's auth methods: ``vault login -method=userpass password=<secret>``).
SECRET_FLAG_WORDS = frozenset({"token", "secret", "password", "passwd", "passphrase", "key", "apikey"})
_FLAG = re.compile(r"^--?([A-Za-z0-9][A-Za-z0-9_.-]*)(?:=(.*))?$", re.DOTALL)
_KEY_VALUE = re.compile(r"^([A-Za-z][A-Za-z0-9_.-]*)=(.*)$", re.DOTALL)
_NAME_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+")


def _names_a_secret(name: str) -> bool:
    """Whether a flag's or a key's name ends in a :data:`SECRET_FLAG_WORDS` word."""
    words = _NAME_WORDS.findall(name)
    return bool(words) and words[-1].lower() in SECRET_FLAG_WORDS


def _command_words(line: str) -> list[str]:
    """A shell command line's words (``sh -c "<line>"``), as the shell splits them."""
    try:
        return shlex.split(line)
    except ValueError:  # unbalanced quotes: the words as they stand
        return line.split()


# The one-letter flags of an exec plugin that matter to reading its arguments as pflag does, per plugin, by
# the name of its command: read from each plugin's own flags. doctl's global -t is --access-token
# (DigitalOcean's doctl reference, "Global Flags"); its -c (--config), -u (--api-url) and -o (--output)
# take a value that is no secret, and -v (--verbose) and -h (--help) are switches (commands/doit.go). pflag
# reads one argument's letters as flags one by one (parseShortArg): a switch, and the next letter is a
# flag again ("-vt <token>"); a flag with a value takes "=<value>", or the rest of the argument
# ("-vt<token>", "-otext": "text" is -o's), or, with nothing left, the next argument. The others take no
# credential: Azure kubelogin's -t is --tenant-id, -l --login, -e --environment
# (pkg/internal/token/options.go); aws-iam-authenticator's -i is --cluster-id, -r --role, a role's ARN
# (cmd/aws-iam-authenticator); aws eks get-token and gke-gcloud-auth-plugin have long flags only. So a
# one-letter flag is no secret's but for its plugin (kubelogin's -t given a tenant's id stays).


@dataclass(frozen=True)
class Shorthands:
    """One-letter flags: those that take a credential, and those that take a value that is none (where a
    group of letters ends); any other letter is read as a switch, so a secret after it is not missed."""

    secret: frozenset[str] = frozenset()
    valued: frozenset[str] = frozenset()

    def __or__(self, other: Shorthands) -> Shorthands:
        secret = self.secret | other.secret
        return Shorthands(secret, (self.valued | other.valued) - secret)


NO_SHORTHANDS = Shorthands()
SECRET_SHORT_FLAGS: Mapping[str, Shorthands] = {"doctl": Shorthands(frozenset("t"), frozenset("cuo"))}
# Flags whose name ends in a secret's word that are switches (pflag bools: no value unless "=<value>"):
# int128/kubelogin's --oidc-use-access-token (pkg/cmd/get_token.go, a BoolVar). Any other flag named so
# takes the next argument as its value, whatever it holds (pflag's parseLongArg and Go's flag package
# give a flag that is no switch args[0] even when it starts with '-'), but a "--flag" (:func:`_long_flag`:
# the flag before it is a switch).
SECRET_NAMED_SWITCHES = frozenset({"oidc-use-access-token"})
# What a flag named as a secret's may be given that is none: a switch's value, as Go's strconv.ParseBool
# (which pflag's bool flags use) reads one (int128/kubelogin's --oidc-use-access-token=true), and "-",
# a value read from stdin (Vault's token=-). Blanked as words, they would take every "true", "1" or
# " - " out of the logs.
NO_SECRET_VALUES = frozenset(
    {"1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False", "-"}
)
# What one argument gives: its values, and whether it took the next argument as its value.
_Given = tuple[list[str], bool]
_NOTHING: _Given = ([], False)


def _short_flags(words: Sequence[str]) -> Shorthands:
    """The :data:`SECRET_SHORT_FLAGS` of every plugin named among ``words`` (a command, its arguments)."""
    found = NO_SHORTHANDS
    for word in words:
        found = found | SECRET_SHORT_FLAGS.get(word.rsplit("/", 1)[-1], NO_SHORTHANDS)
    return found


def _following(following: str | None) -> _Given:
    """A flag's value given as the next argument: whatever it holds, as pflag takes it; none at the end."""
    return ([following], True) if following is not None else _NOTHING


def _short_secret(arg: str, following: str | None, short: Shorthands) -> _Given | None:
    """What ``arg``, a group of one-letter flags, gives one of the ``short`` ones that takes a secret, as
    pflag reads it: the letters before it switches, then ``=<value>``, the rest of the argument (whatever
    it holds) or the next argument; None when no such flag is in it (a letter with a value of its own,
    ``=`` or a character no flag is named by ends the group first; an argument not starting with one
    ``-`` is none)."""
    if not arg.startswith("-") or arg.startswith("--") or not short.secret:
        return None
    for i in range(1, len(arg)):
        letter, rest = arg[i], arg[i + 1 :]
        if letter in short.secret:
            return ([rest.removeprefix("=")], False) if rest else _following(following)
        if letter in short.valued or rest.startswith("=") or not letter.isascii() or not letter.isalpha():
            return None
    return None


def _secrets_of(arg: str, following: str | None, short: Shorthands) -> _Given:
    """What one argument (``following``: the next one) gives to a secret's name, or to one of the
    ``short`` flags; a command line's words."""
    if not arg.startswith("-") and any(c.isspace() for c in arg):
        return secret_arguments(_command_words(arg), short), False
    given = _short_secret(arg, following, short)
    if given is not None:
        return given
    flag = _FLAG.match(arg)
    if flag is None:
        pair = _KEY_VALUE.match(arg)
        return ([pair.group(2)], False) if pair is not None and _names_a_secret(pair.group(1)) else _NOTHING
    if not _names_a_secret(flag.group(1)):
        return _NOTHING
    if flag.group(2) is not None:
        return [flag.group(2)], False
    return (
        _NOTHING if flag.group(1) in SECRET_NAMED_SWITCHES or _long_flag(following) else _following(following)
    )


def _long_flag(argument: str | None) -> bool:
    """Whether ``argument`` is a ``--flag``: the flag before it then is a switch (pflag gives a flag the
    next argument only when it takes a value; one that did would swallow this flag, and its plugin fail
    for the option it lost). A secret may start with one ``-``, not with a flag's ``--name``."""
    return argument is not None and argument.startswith("--") and _FLAG.match(argument) is not None


def secret_arguments(args: Sequence[str], short: Shorthands = NO_SHORTHANDS) -> list[str]:
    """The values ``args`` give to flags or keys whose name ends in a :data:`SECRET_FLAG_WORDS` word, as
    ``--flag value`` (the next argument, whatever it holds, unless the flag is a switch:
    :data:`SECRET_NAMED_SWITCHES`), ``--flag=value`` or ``key=value``, and those of a shell command line
    given as one argument; and to the one-letter flags a plugin named among them takes a credential with
    (:data:`SECRET_SHORT_FLAGS`), or ``short``: its command's. An argument a flag took as its value is
    read as no flag."""
    found: list[str] = []
    short = short | _short_flags([w for arg in args for w in arg.split()])
    i = 0
    while i < len(args):
        values, took_next = _secrets_of(args[i], args[i + 1] if i + 1 < len(args) else None, short)
        found.extend(values)
        i += 2 if took_next else 1
    return [value for value in found if value and value not in NO_SECRET_VALUES]


def _argument_list(key: str, value: Any) -> list[str]:
    """An exec plugin's ``args`` (a list), an auth-provider's ``cmd-args`` (one string); else none."""
    if key == "args" and isinstance(value, list):
        return [str(a) for a in value]
    if key == "cmd-args" and isinstance(value, str):
        return value.split()
    return []


def _credentials(doc: Mapping[str, Any]) -> list[tuple[str, bool]]:
    """Each credential value of a kubeconfig's users, and whether a command's argument gave it."""
    found: list[tuple[str, bool]] = []

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, Mapping):
            for key, value in node.items():
                if key in CREDENTIAL_KEYS and isinstance(value, str):
                    found.append((value, False))
                elif arguments := _argument_list(key, value):
                    command = node.get("command") or node.get("cmd-path")
                    short = _short_flags([command]) if isinstance(command, str) else NO_SHORTHANDS
                    found.extend((v, True) for v in secret_arguments(arguments, short))
                elif key == "env" and isinstance(value, list):
                    found.extend(
                        (str(e["value"]), False)
                        for e in value
                        if isinstance(e, Mapping) and "value" in e and e.get("name") not in AWS_SETTINGS
                    )
                else:
                    walk(value)

    walk(doc.get("users"))
    return found


def kubeconfig_secrets(doc: Mapping[str, Any]) -> list[str]:
    """The credential values of a kubeconfig's users (:data:`CREDENTIAL_KEYS`, exec env values but those of
    :data:`AWS_SETTINGS`, what a command's arguments give to a secret's flag: :func:`secret_arguments`)."""
    return [value for value, _ in _credentials(doc)]


def kubeconfig_argument_secrets(doc: Mapping[str, Any]) -> list[str]:
    """Those of :func:`kubeconfig_secrets` a command's arguments give to a secret's flag: a flag says it
    is one, so it is blanked whatever its length (:func:`~spillway.observability.add_secret_words`)."""
    return [value for value, argument in _credentials(doc) if argument]


def _use_bearer(cfg: Configuration, token: str | Callable[[], str]) -> None:
    """Send ``Authorization: Bearer <token>``; a callable is asked again before every request."""
    cfg.api_key_prefix["BearerToken"] = "Bearer"
    if callable(token):
        fetch = token

        def refresh(conf: Configuration) -> None:
            conf.api_key["BearerToken"] = fetch()

        cfg.api_key["BearerToken"] = "pending"  # its presence makes the client call the hook
        cfg.refresh_api_key_hook = refresh  # type: ignore[assignment]  # typed as None in v37
    else:
        cfg.api_key["BearerToken"] = token


def _aws_error(what: str, exc: Exception) -> SpillwayError:
    """An AWS SDK error met while building a client, as one of ours (no secret in the message)."""
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return KubeAuthError(f"{what}: no usable AWS credentials")
    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        if code in ("ResourceNotFoundException", "NotFoundException"):
            return ConfigurationError(f"{what}: not found")
        if code.startswith(("AccessDenied", "UnrecognizedClient", "InvalidClientTokenId", "ExpiredToken")):
            return KubeAuthError(f"{what}: AWS refused the credentials ({code})")
        if code.startswith(("Throttl", "TooManyRequests")) or status >= 500 or status == 429:
            return KubeUnavailable(f"{what}: AWS did not answer usefully ({code or status})")
        return AwsError(f"{what}: {code or 'error'} ({status})")
    return KubeUnavailable(f"{what}: {type(exc).__name__}")


def _ca_data(encoded: str, what: str) -> str | bytes:
    """Base64 CA data → PEM text (or DER bytes) for ``Configuration.ca_cert_data``; no temp file."""
    try:
        raw = base64.b64decode(encoded, validate=False)
    except (binascii.Error, ValueError):
        raise ConfigurationError(f"{what}: certificate authority data is not base64") from None
    try:
        return raw.decode("ascii")
    except UnicodeDecodeError:
        return raw  # DER, which ssl's cadata also takes


class KubeClient:
    """Typed, retrying access to one cluster's API. Build once per container; safe to share.

    Options (keyword arguments of every factory too): ``request_timeout`` seconds per HTTP request,
    ``page_size`` objects per list page, ``max_attempts`` per call, ``backoff_base``/``backoff_cap`` of
    the exponential backoff, ``max_retry_after`` (the longest ``Retry-After`` obeyed), ``sleep`` and
    ``rng`` (inject no-op/seeded ones in tests), ``clock`` (timestamps of cordons and events),
    ``reauth`` (called once on a 401 before a single retry: forget the cached token), and ``time_left``
    (the seconds its calls may still take, read before each attempt: :meth:`within`).
    """

    def __init__(
        self,
        api_client: ApiClient,
        *,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        page_size: int = DEFAULT_PAGE_SIZE,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff_base: float = 0.25,
        backoff_cap: float = 4.0,
        max_retry_after: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        clock: Callable[[], datetime] = _utcnow,
        reauth: Callable[[], None] | None = None,
        time_left: Callable[[], float] | None = None,
    ) -> None:
        if request_timeout <= 0 or page_size <= 0 or max_attempts <= 0:
            raise ValueError("request_timeout, page_size and max_attempts must be positive")
        self.api_client = api_client
        self.request_timeout = request_timeout
        self.page_size = page_size
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.max_retry_after = max_retry_after
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._clock = clock
        self._reauth = reauth
        self._time_left = time_left
        self._core = CoreV1Api(api_client)
        self._policy = PolicyV1Api(api_client)
        # storage.k8s.io and apps/v1 are listed through CustomObjectsApi too (the same GET, read as raw
        # JSON): StorageV1Api and AppsV1Api would add about 7 MB to every container for four lists
        # (tests/unit/test_observe_footprint.py)
        self._custom = CustomObjectsApi(api_client)
        self._apis = ApisApi(api_client)
        self._not_served_logged: set[str] = set()  # kinds whose absence was logged at info already

    def within(self, time_left: Callable[[], float]) -> KubeClient:
        """This client (its connections, token and options shared) with every call ended by the time
        ``time_left()`` says is left: a Lambda invocation's remaining time, less what the step needs
        after its calls (:meth:`spillway.act.deadline.Deadline.left`). What bounds a call otherwise is
        ``max_attempts`` attempts of up to ``request_timeout`` each (more for an eviction with a uid),
        the waits between them (a ``Retry-After`` up to ``max_retry_after``), and urllib3's read timeout,
        which bounds each read of the socket, not the answer: four attempts of an eviction and their
        waits pass a drain function's 120 s, and Lambda then stops the invocation wherever it stands,
        its work in no output. Bound, no attempt starts with less than
        :data:`LEAST_ATTEMPT_SECONDS` left, each is given no more than the time left, no wait runs past
        it, and an answer still being read when it runs out is dropped: the call raises
        ``KubeUnavailable`` (the name the state machines retry) with time left to say what was done."""
        bound = copy.copy(self)
        bound._time_left = time_left
        return bound

    # --- factories ------------------------------------------------------------------------------

    @classmethod
    def from_configuration(
        cls, cfg: Configuration, *, reauth: Callable[[], None] | None = None, **options: Any
    ) -> KubeClient:
        """A client over a ready ``Configuration`` (its own, never the global default)."""
        cfg.retries = False  # urllib3 must not retry behind our back: our loop counts the attempts
        api = ApiClient(configuration=cfg)
        api.user_agent = f"{COMPONENT}/kube-adapter"
        return cls(api, reauth=reauth, **options)

    @classmethod
    def for_url(cls, url: str, token: str | Callable[[], str] = "local", **options: Any) -> KubeClient:
        """A client for a plain URL (the local emulator); ``token`` may be a function asked per request."""
        host = url.rstrip("/")
        loopback = urlsplit(host).hostname in ("127.0.0.1", "localhost", "::1")
        # v37 takes HTTP(S)_PROXY from the environment; a local emulator is never behind it.
        cfg = Configuration(host=host, no_proxy="127.0.0.1,localhost,::1" if loopback else None)
        _use_bearer(cfg, token)
        return cls.from_configuration(cfg, **options)

    @classmethod
    def from_eks(
        cls,
        cluster_name: str,
        region: str,
        session: boto3.Session | None = None,
        *,
        token_provider: EksTokenProvider | None = None,
        **options: Any,
    ) -> KubeClient:
        """DescribeCluster for the endpoint and CA; an IAM bearer token re-signed every 10 minutes."""
        session = session or boto3.Session()
        what = f"EKS cluster {cluster_name!r} in {region}"
        try:
            cluster = session.client("eks", region_name=region).describe_cluster(name=cluster_name)["cluster"]
        except (ClientError, BotoCoreError) as exc:
            raise _aws_error(what, exc) from None
        endpoint = cluster.get("endpoint")
        if not endpoint:
            raise KubeUnavailable(f"{what}: no API endpoint yet (status {cluster.get('status', '?')})")
        cfg = Configuration(host=endpoint.rstrip("/"))
        ca = (cluster.get("certificateAuthority") or {}).get("data")
        if ca:
            cfg.ca_cert_data = _ca_data(ca, what)
        provider = token_provider or EksTokenProvider(cluster_name, region, session)
        _use_bearer(cfg, provider.token)
        return cls.from_configuration(cfg, reauth=provider.invalidate, **options)

    @classmethod
    def from_kubeconfig(
        cls, kubeconfig: str | bytes | Mapping[str, Any], *, context: str | None = None, **options: Any
    ) -> KubeClient:
        """A self-managed cluster's kubeconfig (YAML/JSON text or a dict), loaded into a fresh Configuration.

        Token, client-certificate and basic auth work as in kubectl; an ``exec`` plugin runs its command,
        which must exist in the Lambda image (for EKS use :meth:`from_eks`).
        """
        doc: Any = kubeconfig
        if isinstance(kubeconfig, str | bytes):
            try:
                doc = yaml.safe_load(kubeconfig)
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                where = f" (line {mark.line + 1})" if mark is not None else ""
                raise ConfigurationError(f"kubeconfig is not valid YAML{where}") from None
        if not isinstance(doc, Mapping):
            raise ConfigurationError("kubeconfig: expected a mapping at the top level")
        # before the loader runs: it may log them (an oidc refresh's client secret, at DEBUG)
        add_secret_values(kubeconfig_secrets(doc))
        add_secret_words(kubeconfig_argument_secrets(doc))
        cfg = Configuration()
        try:
            load_kube_config_from_dict(  # type: ignore[no-untyped-call]
                dict(doc), context=context, client_configuration=cfg, persist_config=False
            )
        except ConfigException as exc:
            # The loader's messages name keys and entries (context, cluster, user), but an exec plugin's
            # or cmd-path's failure quotes its command line and its stderr.
            raise ConfigurationError(f"kubeconfig: {redact(str(exc))[:300]}") from None
        except Exception as exc:
            raise ConfigurationError(f"kubeconfig cannot be used ({type(exc).__name__})") from None
        return cls.from_configuration(cfg, **options)

    @classmethod
    def from_secret(
        cls,
        secret_id: str,
        session: boto3.Session | None = None,
        *,
        region: str | None = None,
        context: str | None = None,
        **options: Any,
    ) -> KubeClient:
        """A kubeconfig kept in Secrets Manager: the secret string itself, or JSON ``{"kubeconfig": "..."}``."""
        session = session or boto3.Session()
        what = f"secret {secret_id!r}"
        try:
            resp = session.client("secretsmanager", region_name=region).get_secret_value(SecretId=secret_id)
        except (ClientError, BotoCoreError) as exc:
            raise _aws_error(what, exc) from None
        text: str | bytes | None = resp.get("SecretString") or resp.get("SecretBinary")
        if not text:
            raise ConfigurationError(f"{what}: empty secret")
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError:
            raise ConfigurationError(f"{what}: not a kubeconfig (invalid YAML/JSON)") from None
        if isinstance(doc, Mapping) and isinstance(doc.get("kubeconfig"), str | Mapping):
            inner = doc["kubeconfig"]
            return cls.from_kubeconfig(inner, context=context, **options)
        if not isinstance(doc, Mapping):
            raise ConfigurationError(f"{what}: not a kubeconfig")
        return cls.from_kubeconfig(doc, context=context, **options)

    def close(self) -> None:
        """Close pooled connections (a Lambda container keeps the client for its whole life)."""
        self.api_client.close()  # type: ignore[no-untyped-call]

    # --- reads ----------------------------------------------------------------------------------

    def iter_nodes(self, *, label_selector: str | None = None) -> Iterator[Node]:
        """All nodes, page by page (an expired continue token mid-way: ``ListExpired``)."""
        return self._paged(
            "nodes",
            self._core.list_node,
            _parse_page(_NodePage),
            rule=_listing("", "nodes"),
            label_selector=label_selector,
        )

    def iter_pods(
        self, *, field_selector: str | None = None, label_selector: str | None = None
    ) -> Iterator[Pod]:
        """All pods of all namespaces, page by page (an expired continue token mid-way: ``ListExpired``)."""
        return self._paged(
            "pods",
            self._core.list_pod_for_all_namespaces,
            _parse_page(_PodPage),
            rule=_listing("", "pods"),
            field_selector=field_selector,
            label_selector=label_selector,
        )

    def iter_pdbs(self) -> Iterator[PodDisruptionBudget]:
        """All PodDisruptionBudgets (policy/v1) of all namespaces, page by page (``ListExpired`` as above)."""
        return self._paged(
            "poddisruptionbudgets",
            self._policy.list_pod_disruption_budget_for_all_namespaces,
            _parse_page(_PdbPage),
            rule=_listing("policy", "poddisruptionbudgets"),
        )

    def list_nodes(self, *, label_selector: str | None = None) -> list[Node]:
        return self._whole("nodes", lambda: list(self.iter_nodes(label_selector=label_selector)))

    def list_pods(self, *, field_selector: str | None = None, label_selector: str | None = None) -> list[Pod]:
        return self._whole(
            "pods", lambda: list(self.iter_pods(field_selector=field_selector, label_selector=label_selector))
        )

    def list_pdbs(self) -> list[PodDisruptionBudget]:
        return self._whole("poddisruptionbudgets", lambda: list(self.iter_pdbs()))

    def pods_on_node(self, node: str | Node) -> list[Pod]:
        """Pods bound to the node, whatever their phase (server-side ``spec.nodeName`` field selector)."""
        return self.list_pods(field_selector=f"spec.nodeName={_name_of(node)}")

    def get_node(self, name: str) -> Node:
        """The node; ``NodeNotFound`` when it does not exist."""
        raw = self._request(
            f"get node {_name_of(name)}",
            partial(self._core.read_node, name, **self._opts()),
            on_status={404: NodeNotFound},
        )
        try:
            return Node.model_validate_json(raw)
        except ValidationError as exc:
            raise self._unparsable(f"get node {name}", exc) from None

    def priority_expander(self) -> ConfigMap | None:
        """cluster-autoscaler's priority expander ConfigMap (``kube-system``), or None when there is none
        (404). A refusal (403, naming the rule) raises ``KubeAuthError``, as for every read."""
        op = f"get configmap {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}"
        send = partial(
            self._core.read_namespaced_config_map, CONFIGMAP_NAME, CONFIGMAP_NAMESPACE, **self._opts()
        )
        rule = Rule("get", "", "configmaps", CONFIGMAP_NAME)
        try:
            raw = self._request(op, send, on_status={404: ObjectNotFound}, rule=rule)
        except ObjectNotFound:
            return None
        try:
            return ConfigMap.model_validate_json(raw)
        except ValidationError as exc:
            raise self._unparsable(op, exc) from None

    # --- custom resources and the shared-cluster objects ------------------------------------------

    def list_custom(
        self,
        group: str,
        version: str,
        plural: str,
        namespace: str | None = None,
        *,
        served: set[str] | None = None,
    ) -> list[RawObject]:
        """Every object of a custom resource (in ``namespace``, or cluster-wide / all namespaces), as
        plain JSON objects, all pages; ``[]`` when the resource is not served (CRD not installed).
        403 raises ``KubeAuthError`` naming the rule to add. ``served``, when given, gets ``version``
        when the server listed it, with objects or none (as ``iter_shared_objects``' does): a caller
        trying versions in turn stops at the first served one, not the first with objects."""
        try:
            found = self._whole(plural, lambda: list(self._iter_custom(group, version, plural, namespace)))
        except _NotServed:
            self._log_not_served(f"{plural}.{group}/{version}")
            return []
        if served is not None:
            served.add(version)
        return found

    def patch_custom_status(
        self,
        group: str,
        version: str,
        plural: str,
        namespace: str | None,
        name: str,
        status: dict[str, Any],
        *,
        uid: str = "",
    ) -> RawObject:
        """Write ``status`` on the object's ``/status`` subresource; returns the object. ``ObjectNotFound``
        (404: no such object, or no status subresource), ``KubeConflict`` (409).

        Without ``uid``: a merge patch of ``{"status": status}``. With it: the status is replaced whole
        only if the object is still the one read, by a JSON patch that tests ``/metadata/uid`` first, and
        ``ObjectReplaced`` (an ``ObjectNotFound``) when another object has taken the name. A merge patch
        cannot say that: the API server gives a patch no precondition (apiserver endpoints/handlers/
        patch.go passes ``DefaultUpdatedObjectInfo(nil, ...)``) and on a custom resource's ``/status``
        keeps the stored metadata whole, uid included (apiextensions-apiserver registry/customresource/
        status_strategy.go ``PrepareForUpdate``). A ``resourceVersion`` would be checked (409), but any
        write by anyone (Kueue's, our own last one) changes it; the uid changes only with the object."""
        if not name:
            raise ValueError("patch_custom_status needs an object name")
        where = f"{namespace}/{name}" if namespace else name
        op = f"patch status of {plural}.{group} {where}"
        body: Any = {"status": status}
        kind = MERGE_PATCH
        if uid:
            body = [
                {"op": "test", "path": "/metadata/uid", "value": uid},
                {"op": "add", "path": "/status", "value": status},
            ]
            kind = JSON_PATCH
        opts = {"field_manager": COMPONENT, "_content_type": kind, **self._opts()}
        if namespace:
            send = partial(
                self._custom.patch_namespaced_custom_object_status,
                group, version, namespace, plural, name, body, **opts,
            )  # fmt: skip
        else:
            send = partial(
                self._custom.patch_cluster_custom_object_status, group, version, plural, name, body, **opts
            )
        classify = _uid_test_answer if uid else None
        return _json_object(op, self._request(op, send, on_status={404: ObjectNotFound}, classify=classify))

    def delete_custom(
        self, group: str, version: str, plural: str, namespace: str | None, name: str, *, uid: str = ""
    ) -> None:
        """Delete the object; with ``uid``, only if it is still that object (``DeleteOptions``
        ``preconditions.uid``: the API answers 409 "Precondition failed: UID in precondition ..." for
        another, raised as ``ObjectReplaced``). ``ObjectNotFound`` (404) when there is none."""
        if not name:
            raise ValueError("delete_custom needs an object name")
        where = f"{namespace}/{name}" if namespace else name
        op = f"delete {plural}.{group} {where}"
        body = V1DeleteOptions(preconditions=V1Preconditions(uid=uid)) if uid else None
        if namespace:
            send = partial(
                self._custom.delete_namespaced_custom_object,
                group, version, namespace, plural, name, body=body, **self._opts(),
            )  # fmt: skip
        else:
            send = partial(
                self._custom.delete_cluster_custom_object,
                group,
                version,
                plural,
                name,
                body=body,
                **self._opts(),
            )
        replaced: dict[int, type[KubeError]] = {409: ObjectReplaced} if uid else {}
        self._request(op, send, on_status={404: ObjectNotFound, **replaced})

    def list_pod_templates(self, namespace: str | None = None) -> list[RawObject]:
        """Every core/v1 PodTemplate (of ``namespace``, or of all namespaces), as plain JSON objects."""
        if namespace:
            call: Callable[..., Any] = partial(self._core.list_namespaced_pod_template, namespace)
        else:
            call = self._core.list_pod_template_for_all_namespaces
        rule = _listing("", "podtemplates")
        items = self._whole(
            "podtemplates", lambda: list(self._paged("podtemplates", call, _parse_raw_page, rule=rule))
        )
        return [{"apiVersion": "v1", "kind": "PodTemplate", **obj} for obj in items]

    def list_resource_quotas(self, namespace: str) -> list[RawObject]:
        """The core/v1 ResourceQuotas of ``namespace``, as plain JSON objects (403 raises
        ``KubeAuthError``): what cluster-autoscaler's buffer controller allocates to CapacityBuffers."""
        call = partial(self._core.list_namespaced_resource_quota, namespace)
        rule = _listing("", "resourcequotas")
        items = self._whole(
            "resourcequotas", lambda: list(self._paged("resourcequotas", call, _parse_raw_page, rule=rule))
        )
        return [{"apiVersion": "v1", "kind": "ResourceQuota", **obj} for obj in items]

    def list_replication_controllers(self, namespace: str | None = None) -> list[RawObject]:
        """Every core/v1 ReplicationController (of ``namespace``, or of all namespaces), as plain JSON
        objects: what a CapacityBuffer's ``scalableRef`` may name besides the apps and batch kinds."""
        if namespace:
            call: Callable[..., Any] = partial(self._core.list_namespaced_replication_controller, namespace)
        else:
            call = self._core.list_replication_controller_for_all_namespaces
        rule = _listing("", "replicationcontrollers")
        items = self._whole(
            "replicationcontrollers",
            lambda: list(self._paged("replicationcontrollers", call, _parse_raw_page, rule=rule)),
        )
        return [{"apiVersion": "v1", "kind": "ReplicationController", **obj} for obj in items]

    def pods_selected(self, namespace: str, label_selector: str) -> list[Pod]:
        """The pods of ``namespace`` a label selector (its string form) selects, all pages."""
        return self._namespace_pods(namespace, label_selector=label_selector)

    def read_pod(self, namespace: str, name: str) -> Pod | None:
        """The pod ``namespace/name`` as the API server holds it now, or None when there is none. Asked as
        a list of the namespace's pods whose field selector names it (``metadata.name``): the API server
        reads that one key, as a get would (k8s.io/apiserver pkg/registry/generic/registry/store.go,
        ``ListPredicate``: a selector that ``MatchesSingle`` name reads only that object), and a drain
        needs no rule beyond the ``list`` on pods it has (deploy/rbac.yaml)."""
        found = self._namespace_pods(namespace, field_selector=f"metadata.name={name}")
        return found[0] if found else None

    def _namespace_pods(
        self, namespace: str, *, label_selector: str | None = None, field_selector: str | None = None
    ) -> list[Pod]:
        call = partial(
            self._core.list_namespaced_pod,
            namespace,
            label_selector=label_selector,
            field_selector=field_selector,
        )
        rule = _listing("", "pods")
        return self._whole("pods", lambda: list(self._paged("pods", call, _parse_page(_PodPage), rule=rule)))

    def get_scale(self, api_group: str, kind: str, namespace: str, name: str) -> RawObject:
        """The ``autoscaling/v1`` Scale of a namespaced object of any kind with a scale subresource, its
        resource found as client-go's discovery REST mapper finds it (the group's versions, preferred
        first; the resource whose kind is ``kind``). ``ObjectNotFound`` when the group or kind is not
        served, the resource has no scale subresource (``<plural>/scale`` in discovery), or the object is
        not there. A custom resource with no spec replicas (a 500 naming them, every time) is a
        ``KubeError`` at once, not retried as an outage."""
        version, plural = self._scalable_resource(api_group, kind)
        op = f"get scale of {plural}.{api_group} {namespace}/{name}"
        send = partial(
            self._custom.get_namespaced_custom_object_scale, api_group, version, namespace, plural, name,
            **self._opts(),
        )  # fmt: skip
        answer = self._request(op, send, on_status={404: ObjectNotFound}, classify=_scale_answer)
        return _json_object(op, answer)

    def _scalable_resource(self, api_group: str, kind: str) -> tuple[str, str]:
        what = f"{kind}.{api_group or 'core'}"
        if not api_group:  # the core group's only scalable resource is replicationcontrollers
            raise ObjectNotFound(
                f"{what}: no resource of the core group with a scale subresource is of that kind"
            )
        for version in self._group_versions(api_group, what):
            op = f"discover {api_group}/{version}"
            send = partial(self._custom.get_api_resources, api_group, version, **self._opts())
            listing = _json_object(op, self._request(op, send, on_status={404: ObjectNotFound}))
            names = {str(r.get("name")): r for r in listing.get("resources") or []}
            plural = next((n for n, r in names.items() if "/" not in n and r.get("kind") == kind), None)
            if plural is None:
                continue
            if f"{plural}/scale" not in names:
                raise ObjectNotFound(f"{what}: {plural}.{api_group}/{version} has no scale subresource")
            return version, plural
        raise ObjectNotFound(f"{what}: no resource of kind {kind} is served in API group {api_group}")

    def _group_versions(self, api_group: str, what: str) -> list[str]:
        """The group's served versions, its preferred one first (as the discovery REST mapper tries them)."""
        op = "discover API groups"
        groups = _json_object(op, self._request(op, partial(self._apis.get_api_versions, **self._opts())))
        entry = next((g for g in groups.get("groups") or [] if g.get("name") == api_group), None)
        if entry is None:
            raise ObjectNotFound(f"{what}: API group {api_group} is not served (its CRD is not installed)")
        preferred = (entry.get("preferredVersion") or {}).get("version")
        versions = [str(v.get("version")) for v in entry.get("versions") or []]
        return sorted(versions, key=lambda v: v != preferred)

    def iter_shared_objects(self, served: set[str] | None = None) -> Iterator[SharedObject]:
        """Namespaces, PodGroups (coscheduling, Volcano, upstream), Workloads, PriorityClasses, CapacityQuotas, and the
        jobs that say whether their pods may move (PyTorchJobs, PaddleJobs, TFJobs, XGBoostJobs, JAXJobs,
        MPIJobs, batch/v1 Jobs, Volcano Jobs).

        A kind not served (404: its CRD is not installed) gives none of it, logged; an object the model
        refuses is logged and skipped. Any other failure raises as every read does (a 403 names the
        rule to add). ``served``, when given, gets the qualified name (``podgroups.scheduling.x-k8s.io``)
        of each kind the server listed, with objects or none, once its list is read to the end."""
        namespaces = _listing("", "namespaces")
        yield from self._built_in("namespaces", Namespace, self._core.list_namespace, namespaces)
        for shared in SHARED_KINDS:
            rule = _listing(shared.group, shared.plural)
            for index, version in enumerate(shared.versions):
                call = partial(self._custom.list_cluster_custom_object, shared.group, version, shared.plural)
                what = f"{shared.qualified}/{version}"
                try:
                    if shared.built_in:
                        yield from self._built_in(what, shared.model, call, rule)
                    else:
                        yield from self._optional(what, shared.model, call, rule, quiet=True)
                    if served is not None:
                        served.add(shared.qualified)
                    break
                except _NotServed:
                    if index == len(shared.versions) - 1:
                        self._log_not_served(f"{shared.qualified} ({', '.join(shared.versions)})")

    def iter_volume_objects(self) -> Iterator[VolumeObject]:
        """PersistentVolumeClaims of all namespaces, PersistentVolumes, StorageClasses, CSINodes, then
        VolumeAttachments: where pods' volumes let them run, whether they wait for one, how many volumes
        of each CSI driver a node may use, and which it holds attached (spillway.model.cluster.
        VolumeMatcher). A refusal (403, naming the rule) or no useful answer raises: a bound volume left
        out would free its pod of its zone, a CSINode left out its node of its attach limit, a
        VolumeAttachment left out would free a slot a volume still detaching holds."""
        yield from self._built_in(
            "persistentvolumeclaims",
            PersistentVolumeClaim,
            self._core.list_persistent_volume_claim_for_all_namespaces,
            _listing("", "persistentvolumeclaims"),
        )
        yield from self._built_in(
            "persistentvolumes",
            PersistentVolume,
            self._core.list_persistent_volume,
            _listing("", "persistentvolumes"),
        )
        yield from self._built_in(
            "storageclasses.storage.k8s.io",
            StorageClass,
            partial(self._custom.list_cluster_custom_object, "storage.k8s.io", "v1", "storageclasses"),
            _listing("storage.k8s.io", "storageclasses"),
        )
        yield from self._built_in(
            "csinodes.storage.k8s.io",
            CSINode,
            partial(self._custom.list_cluster_custom_object, "storage.k8s.io", "v1", "csinodes"),
            _listing("storage.k8s.io", "csinodes"),
        )
        yield from self._built_in(
            "volumeattachments.storage.k8s.io",
            VolumeAttachment,
            partial(self._custom.list_cluster_custom_object, "storage.k8s.io", "v1", "volumeattachments"),
            _listing("storage.k8s.io", "volumeattachments"),
        )

    def iter_daemonsets(self) -> Iterator[DaemonSet]:
        """apps/v1 DaemonSets of all namespaces: the pods a group's fresh node runs
        (spillway.model.daemonsets). Refused (403) or unanswered fails, as every read does: a node
        judged without them reserves what the DaemonSets' pods suggest, not what they target."""
        return self._built_in(
            "daemonsets.apps",
            DaemonSet,
            partial(self._custom.list_cluster_custom_object, "apps", "v1", "daemonsets"),
            _listing("apps", "daemonsets"),
        )

    def list_shared_objects(self) -> list[SharedObject]:
        return self._whole("shared-cluster objects", lambda: list(self.iter_shared_objects()))

    def _iter_custom(
        self, group: str, version: str, plural: str, namespace: str | None
    ) -> Iterator[RawObject]:
        if namespace:
            call: Callable[..., Any] = partial(
                self._custom.list_namespaced_custom_object, group, version, namespace, plural
            )
        else:
            call = partial(self._custom.list_cluster_custom_object, group, version, plural)
        return self._paged(
            f"{plural}.{group}/{version}",
            call,
            _parse_raw_page,
            rule=_listing(group, plural),
            on_status={404: _NotServed},
        )

    def _optional(
        self, what: str, model: type[M], call: Callable[..., Any], rule: Rule, *, quiet: bool = False
    ) -> Iterator[M]:
        """Parse each object of a kind that may not be served. 404 (not served) raises ``_NotServed``
        when ``quiet`` (the caller may try another version), else gives none (logged once). Any other
        failure raises, a 403 naming ``rule``: refused is not none."""
        items = self._paged(what, call, _parse_raw_page, rule=rule, on_status={404: _NotServed})
        try:
            yield from _parsed(what, model, items)
        except _NotServed:
            if quiet:
                raise
            self._log_not_served(what)

    def _built_in(self, what: str, model: type[M], call: Callable[..., Any], rule: Rule) -> Iterator[M]:
        """Parse each object of a kind every API server serves (core/v1, apps/v1, batch/v1,
        storage.k8s.io/v1). Every failure raises, a 404 too: it cannot mean a CRD not installed (a
        misrouted proxy or aggregation layer answers it), and read as none it would drop volumes' zones,
        tenants' namespaces or a new node's DaemonSets from the plan."""
        yield from _parsed(what, model, self._paged(what, call, _parse_raw_page, rule=rule))

    def _log_not_served(self, what: str) -> None:
        level = logging.DEBUG if what in self._not_served_logged else logging.INFO
        self._not_served_logged.add(what)
        log.log(level, "kube %s: not served by this cluster (CRD not installed); reading none", what)

    # --- writes ---------------------------------------------------------------------------------

    def cordon(
        self,
        node: str | Node,
        reason: str = "",
        *,
        only_if_schedulable: bool = False,
        take_over_only: str | None = None,
        leave_containing: str | None = None,
    ) -> bool:
        """Mark the node unschedulable *and* annotate ``spillway.io/cordoned`` in one patch.

        Returns True when the node is (now) cordoned by Spillway; False when somebody else had
        already cordoned it: then it is left as it is, unannotated, so :meth:`uncordon` never undoes a
        human's cordon. The annotation's value is ``<UTC ISO time> <reason>``: it names what holds the
        node, so a node Spillway cordoned already for another reason gets the new value (a drain takes
        over the node from an earlier one; see :mod:`spillway.act.drain`); one cordoned for this reason
        already (a retried step) keeps its value, time included: the time says since when the cordon
        holds, and a plan that saw it names it by it (:func:`~spillway.model.cluster.cordon_digest`).

        ``only_if_schedulable`` (a give-back's cordon, :mod:`spillway.act.instances`): the cordon is
        written only on a node schedulable as the patch finds it (the read and the patch are one
        resourceVersion); a node carrying Spillway's cordon for ``reason`` already (a retry of the same
        give-back) is the caller's, True, left as it is; any other cordon, a drain's or a person's, is
        not the caller's, False, left as it is.

        ``take_over_only`` (the gang sweep's cordon, :mod:`spillway.act.gangsweep`): a Node Spillway
        cordoned already for another reason is taken over only when that cordon's words begin with it
        (:func:`~spillway.model.cluster.cordon_begins`: one of the caller's kind, a dead sweep's); any
        other of Spillway's cordons (a drain's, a give-back's) is not the caller's, False, left as it is,
        as a person's, its draining taint with it.

        ``leave_containing`` (the cordon of a forced drain following an EC2 scheduled event,
        :mod:`spillway.act.drain`): another of Spillway's cordons whose words contain it (another forced
        drain following the same event, `` for <event id>: ``) is not taken over, False, left as it is;
        the read and the patch are one resourceVersion, so of two such drains cordoning at once exactly
        one writes.
        """
        name = _name_of(node)
        op = f"cordon node {name}"
        stamp = self._clock().astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
        value = f"{stamp} {reason}".strip()[:256]

        def change(obj: dict[str, Any]) -> dict[str, Any] | bool:
            if _spec(obj).get("unschedulable"):
                ours = _annotations(obj).get(CORDONED_BY_SPILLWAY)
                if only_if_schedulable:
                    return cordoned_for(ours, reason)
                if ours is None:
                    return False  # somebody else's cordon
                if cordoned_for(ours, reason):  # this reason's already (a retry): its first time stays
                    return True
                if take_over_only is not None and not cordon_begins(ours, take_over_only):
                    return False  # another kind of Spillway's cordon: not the caller's to take over
                if leave_containing is not None and leave_containing in ours.split(" ", 1)[-1]:
                    return False  # one the caller stands by for (the same EC2 event's forced drain)
                return {"metadata": {"annotations": {CORDONED_BY_SPILLWAY: value}}}
            return {
                "metadata": {"annotations": {CORDONED_BY_SPILLWAY: value}},
                "spec": {"unschedulable": True},
            }

        return self._modify_node(op, name, change)

    def uncordon(
        self, node: str | Node, *, if_reason: str | None = None, if_digest: str | None = None
    ) -> bool:
        """Undo Spillway's hold on the node: clear ``unschedulable``, the annotation and the draining
        taint (``spillway.io/draining``) in one patch, guarded by the resourceVersion read, so the
        cordon and the taint go together or not at all; the load balancer exclusion label goes with them
        when Spillway added it (its record, ``spillway.io/excluded-from-load-balancers``), never
        otherwise.

        Returns False, touching nothing, when the node does not carry Spillway's annotation (never
        cordoned, or cordoned by somebody else), or, given ``if_reason``, when the annotation is not
        the one written for that reason (another of Spillway's cordons took the node over: a drain's,
        whose taint stays with its cordon), or, given ``if_digest``, when it is not the cordon whose
        :func:`~spillway.model.cluster.cordon_digest` that is (the one a plan saw: any cordon written
        since has another). ``NodeNotFound`` when the node is gone.
        """
        name = _name_of(node)
        op = f"uncordon node {name}"

        def change(obj: dict[str, Any]) -> dict[str, Any] | bool:
            ours = _annotations(obj).get(CORDONED_BY_SPILLWAY)
            if ours is None or (if_reason is not None and not cordoned_for(ours, if_reason)):
                return False
            if if_digest is not None and cordon_digest(ours) != if_digest:
                return False
            spec: dict[str, Any] = {"unschedulable": False}
            taints = [t for t in (_spec(obj).get("taints") or []) if isinstance(t, dict)]
            kept = [t for t in taints if t.get("key") != DRAINING_TAINT]
            if len(kept) != len(taints):
                spec["taints"] = kept
            ours = {"metadata": {"annotations": {CORDONED_BY_SPILLWAY: None}}, "spec": spec}
            return _merged(ours, _lb_release(obj))

        return self._modify_node(op, name, change)

    def hand_over(self, node: str | Node, *, if_reason: str) -> bool:
        """Leave the node cordoned, as a person's cordon: take off Spillway's annotation, the draining
        taint and the load balancer exclusion label Spillway added (as :meth:`uncordon`), and keep
        ``unschedulable``, in one patch guarded by the resourceVersion read
        (``kubectl uncordon`` then gives the node back, which it could not while the taint stayed).
        False, touching nothing, when Spillway's cordon on the Node is not the one written for
        ``if_reason`` (none, or another drain's that took the node over), or the node is no longer
        cordoned (somebody uncordoned it). ``NodeNotFound`` when the node is gone."""
        name = _name_of(node)

        def change(obj: dict[str, Any]) -> dict[str, Any] | bool:
            ours = _annotations(obj).get(CORDONED_BY_SPILLWAY)
            if ours is None or not cordoned_for(ours, if_reason) or not _spec(obj).get("unschedulable"):
                return False
            patch: dict[str, Any] = {"metadata": {"annotations": {CORDONED_BY_SPILLWAY: None}}}
            taints = [t for t in (_spec(obj).get("taints") or []) if isinstance(t, dict)]
            kept = [t for t in taints if t.get("key") != DRAINING_TAINT]
            if len(kept) != len(taints):
                patch["spec"] = {"taints": kept}
            return _merged(patch, _lb_release(obj))

        return self._modify_node(f"hand over node {name}", name, change)

    def label_node(self, name: str, labels: Mapping[str, str]) -> bool:
        """Merge ``labels`` into the Node's labels (one merge patch, guarded by the resourceVersion);
        False, touching nothing, when it already carries them all. ``NodeNotFound`` when it is gone."""

        def change(obj: dict[str, Any]) -> dict[str, Any] | bool:
            meta = obj.get("metadata")
            current = meta.get("labels") if isinstance(meta, dict) else None
            current = current if isinstance(current, dict) else {}
            missing = {k: v for k, v in labels.items() if current.get(k) != v}
            return {"metadata": {"labels": missing}} if missing else False

        return self._modify_node(f"label node {name}", name, change)

    def add_draining_taint(self, node: str | Node, *, exclude_from_load_balancers: bool = False) -> bool:
        """Add ``spillway.io/draining:NoSchedule``; False when it was already there.

        ``exclude_from_load_balancers`` (a drain whose node goes away): the same patch labels the Node
        ``node.kubernetes.io/exclude-from-external-load-balancers``, by which load balancer controllers
        deregister it, and records in the annotation ``spillway.io/excluded-from-load-balancers`` that
        Spillway added it. A Node that carries the label already (an operator's, or an earlier drain's)
        keeps it as it is, record or none: what takes off the draining taint (:meth:`uncordon`,
        :meth:`hand_over`, :meth:`remove_draining_taint`) takes off the label only with its record."""
        name = _name_of(node)
        mine = {"key": DRAINING_TAINT, "effect": DRAINING_TAINT_EFFECT}
        added = False

        def change(obj: dict[str, Any]) -> dict[str, Any] | bool:
            nonlocal added
            taints = [t for t in (_spec(obj).get("taints") or []) if isinstance(t, dict)]
            added = not any(
                t.get("key") == DRAINING_TAINT and t.get("effect") == DRAINING_TAINT_EFFECT for t in taints
            )
            patch: dict[str, Any] = {"spec": {"taints": [*taints, mine]}} if added else {}
            if exclude_from_load_balancers:
                patch = _merged(patch, _lb_exclusion(obj, _annotations(obj).get(CORDONED_BY_SPILLWAY) or ""))
            return patch or False

        return self._modify_node(f"add draining taint to node {name}", name, change) and added

    def remove_draining_taint(self, node: str | Node) -> bool:
        """Remove ``spillway.io/draining`` from a Node that no Spillway cordon holds (a taint whose cordon
        is gone, taken off by a person), in one patch guarded by the resourceVersion read; False when it
        was not there, or when a Spillway cordon holds the Node: the taint is that cordon's, and its
        holder lifts both with :meth:`uncordon`. Other taints are kept. The load balancer exclusion
        label Spillway added goes with it (as :meth:`uncordon`); True when either was there."""
        name = _name_of(node)

        def change(obj: dict[str, Any]) -> dict[str, Any] | bool:
            if CORDONED_BY_SPILLWAY in _annotations(obj):
                return False
            taints = [t for t in (_spec(obj).get("taints") or []) if isinstance(t, dict)]
            kept = [t for t in taints if t.get("key") != DRAINING_TAINT]
            patch = _merged({"spec": {"taints": kept}} if len(kept) != len(taints) else {}, _lb_release(obj))
            return patch or False

        return self._modify_node(f"remove draining taint from node {name}", name, change)

    def set_candidate_taint(self, node: str, present: bool) -> bool:
        """Add (``present``) or remove ``spillway.io/scale-down-candidate:PreferNoSchedule``; False when
        the node already was that way. Other taints are kept."""

        def change(taints: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
            others = [t for t in taints if t.get("key") != CANDIDATE_TAINT]
            if present:
                mine = {"key": CANDIDATE_TAINT, "effect": CANDIDATE_TAINT_EFFECT}
                return None if [*others, mine] == taints else [*others, mine]
            return None if len(others) == len(taints) else others

        verb = "add scale-down candidate taint to" if present else "remove scale-down candidate taint from"
        return self._update_taints(f"{verb} node {node}", node, change)

    def evict(
        self, namespace: str, name: str, grace_period_seconds: int | None = None, *, uid: str = ""
    ) -> None:
        """Evict through the policy/v1 Eviction subresource, which honours PodDisruptionBudgets.

        Answered at once: ``EvictionBlocked`` when a budget allows no disruption now (429 with a
        ``DisruptionBudget`` cause: expected, try later); ``EvictionThrottled`` for any other 429 (the
        server limits the rate: try later); ``EvictionRefused`` when more than one budget selects the
        pod (500: refused until the budgets change); ``EvictionBudgetForbidden`` when the budget's
        status refuses every eviction (403 naming the budget: try later); ``EvictionNamespaceTerminating``
        when the pod's namespace is being deleted (403: the pod goes with it); ``PodNotFound`` when the
        pod is already gone. Any other 403 is RBAC's: ``KubeAuthError``.

        ``uid``: evict only the pod of that ``metadata.uid`` (a DeleteOptions precondition, as Karpenter's
        eviction queue sends it). A pod deleted since it was listed may have been made again under its
        name, on another node (a StatefulSet's, a training operator's ``<job>-worker-0``); the API server
        answers its eviction 409 Conflict ("the UID in the precondition ... does not match"), raised as
        ``PodNotFound``: the pod listed is gone. For a replacement it could evict without a look at
        budgets (Pending, as a new pod is) the server retries that conflict for about ten seconds
        before it answers (pkg/registry/core/pod/storage/eviction.go: ``EvictionsRetry``, 20 steps of
        0.5 s), so such a request waits that much longer than ``request_timeout``.
        """
        if not namespace or not name:
            raise ValueError("evict needs a namespace and a pod name")
        options = None
        if grace_period_seconds is not None or uid:
            options = V1DeleteOptions(
                grace_period_seconds=grace_period_seconds,
                preconditions=V1Preconditions(uid=uid) if uid else None,
            )
        body = V1Eviction(
            api_version="policy/v1",
            kind="Eviction",
            metadata=V1ObjectMeta(name=name, namespace=namespace),
            delete_options=options,
        )
        opts = self._opts()
        if uid:
            opts["_request_timeout"] = self.request_timeout + EVICTION_CONFLICT_RETRY_SECONDS
        replaced: dict[int, type[KubeError]] = {409: PodNotFound} if uid else {}
        self._request(
            f"evict pod {namespace}/{name}",
            partial(self._core.create_namespaced_pod_eviction, name, namespace, body, **opts),
            on_status={404: PodNotFound, **replaced},
            classify=_eviction_answer,
        )

    def delete_node(self, name: str) -> bool:
        """Delete the Node object; False when it was already gone."""
        try:
            self._request(
                f"delete node {_name_of(name)}",
                partial(self._core.delete_node, name, **self._opts()),
                on_status={404: NodeNotFound},
            )
        except NodeNotFound:
            return False
        return True

    def record_event(
        self,
        kind: str,
        name: str,
        namespace: str | None,
        reason: str,
        message: str,
        type: str = "Normal",
        *,
        uid: str | None = None,
        api_version: str = "v1",
        key: str | None = None,
    ) -> None:
        """Create a core/v1 Event about an object (``kubectl describe`` shows it), its message redacted (it
        may quote an error's text: whoever may read Events sees it, for the API server's event TTL).

        Events about cluster-scoped objects (Nodes) go to the ``default`` namespace, as kubelet's do.
        The name is client-go's record package's, ``<object name>.<UnixNano in hex>``: past 253
        characters for an object named near the limit, which the ``v1`` API takes (``ValidateEventCreate``
        holds only ``events.k8s.io/v1`` creates to a DNS subdomain; ``v1`` names need only be a path
        segment), as it takes client-go's. With ``key`` (the same for every attempt at one Event, such
        as a step that runs again for its execution) the suffix is a hash of it instead: an attempt
        after the first is refused 409 AlreadyExists and the object keeps one Event.
        """
        now = self._clock().astimezone(UTC).replace(microsecond=0)
        ns = namespace or "default"
        suffix = hashlib.sha256(key.encode()).hexdigest()[:16] if key else f"{time.time_ns():x}"
        event = CoreV1Event(
            metadata=V1ObjectMeta(name=f"{name}.{suffix}", namespace=ns),
            involved_object=V1ObjectReference(
                api_version=api_version, kind=kind, name=name, namespace=namespace, uid=uid
            ),
            reason=reason[:128],
            message=redact(message)[:1024],
            type=type,
            source=V1EventSource(component=COMPONENT),
            reporting_component=COMPONENT,
            first_timestamp=now,
            last_timestamp=now,
            count=1,
        )
        # 409 AlreadyExists: our own earlier attempt got through before its answer was lost.
        with contextlib.suppress(KubeConflict):
            self._request(
                f"record event {reason} on {kind} {name}",
                partial(self._core.create_namespaced_event, ns, event, **self._opts()),
                classify=_event_answer,
            )

    # --- machinery ------------------------------------------------------------------------------

    def _opts(self) -> dict[str, Any]:
        return {"_preload_content": False, "_request_timeout": self.request_timeout}

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Exponential with "equal jitter" (half fixed, half random); never below Retry-After."""
        ceiling = min(self.backoff_cap, self.backoff_base * 2.0 ** (attempt - 1))
        delay = ceiling / 2 + self._rng.uniform(0, ceiling / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_retry_after))
        return delay

    def _request(
        self,
        op: str,
        send: Callable[[], Any],
        *,
        on_status: Mapping[int, type[KubeError]] | None = None,
        classify: Classify | None = None,
        rule: Rule | None = None,
    ) -> bytes:
        """Send with retries; return the response body. Every failure becomes one of our errors.
        ``on_status`` names the error of a status; ``classify``, of an answer (its body read too);
        ``rule``, what RBAC must grant (a 403 names it)."""
        special = on_status or {}
        reauthed = False
        last = NO_ATTEMPT
        applied = False  # whether an attempt so far may have been applied (KubeUnavailable.sent)
        attempt = 0
        while attempt < self.max_attempts:
            attempt += 1
            retry_after: float | None = None
            try:
                return _body(self._in_time(op, send, last, applied), self._time_left)
            except ApiException as exc:
                if not reauthed and self._reauth_for(exc, special):
                    reauthed = True  # a token signed anew may pass (clock skew, early expiry)
                    attempt -= 1
                    continue
                last, retry_after = _retry_or_raise(op, exc, special, classify, rule)
                applied = applied or not _refused_unserved(exc)
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                last, applied = f"{type(exc).__name__}", True
            except _OutOfTime:
                last, applied = "its answer still coming when the time ran out", True
            if attempt < self.max_attempts:
                self._wait(op, attempt, last, retry_after, applied)
        raise KubeUnavailable(
            f"{op}: no useful answer after {self.max_attempts} attempts (last: {last})", sent=applied
        )

    def _in_time(self, op: str, send: Callable[..., Any], last: str, applied: bool = False) -> Any:
        """``send()``, within the time left of a bound client (:meth:`within`): its request timeout cut
        to that time, or ``KubeUnavailable`` when too little is left to start it (``sent``: whether an
        attempt before may have been applied, ``applied``)."""
        if self._time_left is None:
            return send()
        left = self._time_left()
        if left < LEAST_ATTEMPT_SECONDS:
            raise KubeUnavailable(
                f"{op}: not sent, {max(0.0, left):.1f} s left of the invocation's time for its calls "
                f"(last: {last})",
                sent=applied,
            )
        unresolved = self._unresolved_within(left)
        if unresolved or self._time_left() < LEAST_ATTEMPT_SECONDS:
            raise KubeUnavailable(
                f"{op}: not sent, {unresolved or 'the name'} not resolved within the {left:.1f} s left of "
                f"the invocation's time for its calls, less a second to send (last: {last})",
                sent=applied,
            )
        own = send.keywords.get("_request_timeout") if isinstance(send, partial) else None
        return send(_request_timeout=min(float(own or self.request_timeout), self._time_left()))

    def _unresolved_within(self, left: float) -> str | None:
        """What urllib3 would resolve in its connect (the API server's name, or the proxy's when the
        client goes through one: :func:`_connects_to`) when it does not resolve within ``left`` seconds,
        else None (also for an address). urllib3 resolves it in the connect (``socket.getaddrinfo``),
        which no timeout bounds: a resolver that hangs held a bound call past its time (measured: 4.0 s
        with 2.0 s left). So a bound client asks first, in a thread of its own, for the address family
        urllib3 asks for (``allowed_gai_family``: IPv4 only on a host without IPv6), and waits no longer
        than the time left; given up on, the lookup sends nothing to the API server. Resolved, urllib3
        asks again, which the resolver answers at once as a rule (its cache); one that answers the first
        and hangs on the second is not bounded."""
        target = _connects_to(self.api_client.configuration)
        if target is None:
            return None
        what, host, port = target
        done = threading.Event()

        def lookup() -> None:
            with contextlib.suppress(OSError):  # a name that does not resolve fails in the connect
                family = urllib3.util.connection.allowed_gai_family()
                socket.getaddrinfo(host, port, family, socket.SOCK_STREAM)
            done.set()

        threading.Thread(target=lookup, name="kube-resolve", daemon=True).start()
        return None if done.wait(max(0.0, left - LEAST_ATTEMPT_SECONDS)) else what

    def _reauth_for(self, exc: ApiException, special: Mapping[int, type[KubeError]]) -> bool:
        """On a 401 the caller does not handle itself, forget the token (once per call) and say so."""
        if int(exc.status or 0) != 401 or 401 in special or self._reauth is None:
            return False
        self._reauth()
        return True

    def _wait(
        self, op: str, attempt: int, last: str, retry_after: float | None, applied: bool = True
    ) -> None:
        delay = self._backoff(attempt, retry_after)
        if self._time_left is not None and self._time_left() - delay < LEAST_ATTEMPT_SECONDS:
            raise KubeUnavailable(
                f"{op}: no useful answer after {attempt} attempt(s), and no time left of the invocation's "
                f"for another after a {delay:.1f} s wait (last: {last})",
                sent=applied,
            )
        log.warning(
            "kube %s: attempt %d/%d failed (%s); retrying in %.2fs",
            op,
            attempt,
            self.max_attempts,
            last,
            delay,
        )
        self._sleep(delay)

    def _paged(
        self,
        what: str,
        call: Callable[..., Any],
        parse: Callable[[bytes], tuple[Sequence[T], str | None]],
        *,
        rule: Rule,
        on_status: Mapping[int, type[KubeError]] | None = None,
        **params: Any,
    ) -> Iterator[T]:
        """Yield every object of one list, ``page_size`` at a time. A continue token that expires (410)
        before anything was yielded starts the list again here; once objects were yielded it raises
        :class:`ListExpired` (module docstring); ``LIST_PASSES`` expiries in all raise ``KubeUnavailable``.
        A 404 that ``on_status`` maps to ``_NotServed`` (the kind is not served) once objects were
        yielded raises :class:`ListExpired` too: the kind went away mid-list (its CRD deleted, a version
        no longer served), and the caller must not keep the first pages as the whole list."""
        op = f"list {what}"
        special = {**(on_status or {}), 410: _ContinueExpired}
        params = {k: v for k, v in params.items() if v is not None}
        for _ in range(LIST_PASSES):
            token: str | None = None
            handed_out = False
            try:
                while True:
                    send = partial(call, limit=self.page_size, _continue=token, **params, **self._opts())
                    raw = self._request(op, send, on_status=special, rule=rule)
                    try:
                        items, token = parse(raw)
                    except ValidationError as exc:
                        raise self._unparsable(op, exc) from None
                    for obj in items:
                        handed_out = True
                        yield obj
                    if token is None:
                        return
            except _ContinueExpired as exc:
                if handed_out:
                    raise ListExpired(
                        f"{op}: the continue token expired after part of the list was read ({exc}); the "
                        "rest would come from another revision: read it again from the start"
                    ) from None
                log.warning("kube %s: continue token expired before anything was read; listing again", op)
            except _NotServed as exc:
                if handed_out:  # the pages read are neither the whole list nor "none": start again
                    raise ListExpired(
                        f"{op}: the resource stopped being served after part of the list was read ({exc}); "
                        "read it again from the start"
                    ) from None
                raise
        raise KubeUnavailable(f"{op}: continue token expired {LIST_PASSES} times; no consistent list")

    def _whole(self, what: str, read: Callable[[], list[T]]) -> list[T]:
        """``read()``, the whole of a list: read again from the start when its continue token expired
        mid-way (what the earlier pass gave is dropped), ``LIST_PASSES`` times in all, then plain
        ``KubeUnavailable`` (the name a state machine's Retry matches)."""
        for _ in range(LIST_PASSES):
            try:
                return read()
            except ListExpired as exc:
                log.warning("kube %s; reading it again from the start", exc)
        raise KubeUnavailable(f"list {what}: continue token expired {LIST_PASSES} times; no consistent list")

    @staticmethod
    def _unparsable(op: str, exc: ValidationError) -> KubeError:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        return KubeError(f"{op}: unexpected object from the API server at {where}: {err['msg']}")

    def _read_node_raw(self, name: str) -> dict[str, Any]:
        raw = self._request(
            f"get node {name}",
            partial(self._core.read_node, name, **self._opts()),
            on_status={404: NodeNotFound},
        )
        try:
            obj = json.loads(raw)
        except ValueError:
            raise KubeError(f"get node {name}: the API server did not answer JSON") from None
        if not isinstance(obj, dict):
            raise KubeError(f"get node {name}: the API server did not answer an object")
        return obj

    def _patch_node(self, op: str, name: str, patch: dict[str, Any]) -> None:
        self._request(
            op,
            partial(
                self._core.patch_node,
                name,
                patch,
                field_manager=COMPONENT,
                _content_type=MERGE_PATCH,
                **self._opts(),
            ),
            on_status={404: NodeNotFound},
        )

    def _update_taints(
        self,
        op: str,
        name: str,
        change: Callable[[list[dict[str, Any]]], list[dict[str, Any]] | None],
    ) -> bool:
        """Read-modify-write of ``spec.taints``; False when ``change`` has nothing to change."""

        def patch(obj: dict[str, Any]) -> dict[str, Any] | bool:
            new = change([t for t in (_spec(obj).get("taints") or []) if isinstance(t, dict)])
            return False if new is None else {"spec": {"taints": new}}

        return self._modify_node(op, name, patch)

    def _modify_node(
        self, op: str, name: str, change: Callable[[dict[str, Any]], dict[str, Any] | bool]
    ) -> bool:
        """Read the Node, ask ``change`` for a merge patch (or the answer, when there is nothing to
        do), and apply it guarded by the resourceVersion read; re-read and retry on 409."""
        for _ in range(CONFLICT_ATTEMPTS):
            obj = self._read_node_raw(name)
            patch = change(obj)
            if isinstance(patch, bool):
                return patch
            patch["metadata"] = {**patch.get("metadata", {}), **_rv(obj)}
            try:
                self._patch_node(op, name, patch)
                return True
            except KubeConflict:
                continue
        raise KubeConflict(f"{op}: the node kept changing ({CONFLICT_ATTEMPTS} attempts)")


def _json_object(op: str, raw: bytes) -> RawObject:
    try:
        obj = json.loads(raw)
    except ValueError:
        raise KubeError(f"{op}: the API server did not answer JSON") from None
    if not isinstance(obj, dict):
        raise KubeError(f"{op}: the API server did not answer an object")
    return obj


def _parsed(what: str, model: type[M], items: Iterable[RawObject]) -> Iterator[M]:
    """Each object of a list as ``model``; one the model refuses is logged and skipped."""
    for obj in items:
        try:
            yield model.model_validate(obj)
        except ValidationError as exc:
            log.error("kube list %s: %s skipped: %s", what, _where(obj), _first_error(exc))


def _where(obj: RawObject) -> str:
    """``namespace/name`` (or ``name``) of a raw object, for logs."""
    found = obj.get("metadata")
    meta: dict[str, Any] = found if isinstance(found, dict) else {}
    name = str(meta.get("name", "?"))
    return f"{meta['namespace']}/{name}" if meta.get("namespace") else name


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    return f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"


def _spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def _labels(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return labels if isinstance(labels, dict) else {}


def _lb_exclusion(obj: dict[str, Any], cordon: str) -> dict[str, Any]:
    """The merge patch that labels the Node out of load balancers and records that Spillway did (the
    record's value: the words of the cordon that holds the Node, or "drain"); {} when the label is there
    already, whoever put it."""
    if EXCLUDE_FROM_LB_LABEL in _labels(obj):
        return {}
    return {
        "metadata": {
            "labels": {EXCLUDE_FROM_LB_LABEL: EXCLUDE_FROM_LB_VALUE},
            "annotations": {LB_EXCLUDED_BY_SPILLWAY: cordon or "drain"},
        }
    }


def _lb_release(obj: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that takes off the load balancer exclusion label and its record, when the record
    says Spillway added the label; {} otherwise (no label, or somebody else's: left as it is). A label
    whose value is no longer the one Spillway set is an operator's since (``kubectl label
    --overwrite``): the record goes, the label stays."""
    if LB_EXCLUDED_BY_SPILLWAY not in _annotations(obj):
        return {}
    patch: dict[str, Any] = {"metadata": {"annotations": {LB_EXCLUDED_BY_SPILLWAY: None}}}
    if _labels(obj).get(EXCLUDE_FROM_LB_LABEL) == EXCLUDE_FROM_LB_VALUE:
        patch["metadata"]["labels"] = {EXCLUDE_FROM_LB_LABEL: None}
    return patch


def _merged(patch: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """Two merge patches of distinct fields as one: ``more``'s ``metadata.labels`` and
    ``metadata.annotations`` merged into ``patch``'s, its other parts added."""
    out = {part: dict(fields) for part, fields in patch.items()}
    for part, fields in more.items():
        into = out.setdefault(part, {})
        for key, value in fields.items():
            into[key] = {**into.get(key, {}), **value} if isinstance(value, dict) else value
    return out


def _annotations(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    return annotations if isinstance(annotations, dict) else {}


def _rv(obj: dict[str, Any]) -> dict[str, Any]:
    """``{"resourceVersion": rv}`` to make a patch conditional (409 if the object changed)."""
    meta = obj.get("metadata")
    rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return {"resourceVersion": rv} if rv else {}
