"""EC2 Auto Scaling and EC2, per region: what the observe step reads and the two writes "act" needs.

Clients are built once per container (:class:`AwsClients`, keyed by region) and passed in. Every
response is parsed with our models (:mod:`spillway.model.aws`); every SDK error leaves this module as a
:class:`~spillway.errors.AwsError` subclass, whose class name a state machine's ``Retry``/``Catch``
matches.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ChecksumError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    FlexibleChecksumError,
    HTTPClientError,
    IncompleteReadError,
)
from botocore.parsers import ResponseParserError
from pydantic import ValidationError

from spillway import cutoff
from spillway.adapters.launch_cache import (
    DEFAULT_MAX_ENTRIES,
    LaunchCache,
    LaunchFacts,
    config_key,
    version_key,
)
from spillway.adapters.nodegroup_cache import NodegroupCache
from spillway.errors import (
    AsgLimitExceeded,
    AsgNotFound,
    AwsError,
    AwsThrottled,
    AwsUnavailable,
    CapacityUnavailable,
    InstanceNotFound,
    LaunchMisconfigured,
    LifecycleActionNotFound,
    QuotaExceeded,
)
from spillway.model.aws import (
    NODEGROUP_UNREAD_EFFECT,
    AutoScalingGroup,
    CreateFleetResult,
    EksNodegroup,
    FleetRequest,
    InstanceTypeInfo,
    LaunchTemplateInfo,
    LaunchTemplateVersionInfo,
    NodegroupKey,
    NodegroupRead,
    ScalingActivity,
    ScheduledAction,
    WarmPool,
    availability_zone_ids,
    bundled_instance_types,
    launched_from,
    template_key,
    wanted_nodegroups,
    with_managed_nodegroups,
)
from spillway.model.calltime import worst_call_seconds
from spillway.model.drain import (
    DEFAULT_LIFECYCLE_HOOKS,
    LifecycleHook,
    Placement,
    ScheduledEvent,
    drain_hooks,
    lifecycle_hook,
    scheduled_event,
)
from spillway.model.fleet import SWEPT_STATES, TAG_ATTEMPT, TAG_CLUSTER, FleetInstance, swept_instances
from spillway.model.launcherror import code_kind
from spillway.model.nodegroup import (
    TAG_CLUSTER_PREFIX,
    TAG_ENABLED,
    CapacityType,
    NodeGroup,
    build_node_groups,
    candidate_types,
    rebalance_problem,
)
from spillway.model.reserve import ReserveLike
from spillway.model.utc import aware
from spillway.observability import redact

if TYPE_CHECKING:
    from mypy_boto3_autoscaling import AutoScalingClient
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_eks import EKSClient

log = logging.getLogger(__name__)

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")

THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "SlowDown",
        "PriorRequestNotComplete",
        # DynamoDB's TransactWriteItems whose ClientRequestToken (botocore fills one) is still being
        # applied: refused for now, as botocore's own retries count it (retries/standard.py); whether
        # it lands is for the retry to read, on a fresh load of what it writes
        "TransactionInProgressException",
    }
)
ATTACH_BATCH = 20  # AttachInstances takes at most 20 instance ids per call
DESCRIBE_INSTANCES_BATCH = 200  # instance ids per DescribeInstances call, as values of one filter
UNAVAILABLE_CODES = frozenset({"ServiceUnavailable", "InternalFailure", "InternalError", "Unavailable"})
#: Auto Scaling's "You already have a pending update to an Amazon EC2 Auto Scaling resource" (HTTP 500):
#: the request was refused and nothing applied (EC2 Auto Scaling API Reference, SetDesiredCapacity,
#: TerminateInstanceInAutoScalingGroup, AttachInstances: Errors). Another update of the same group holds
#: it, typically a concurrent execution's; it is retried, never read as an answer lost (AwsUnavailable),
#: which a raise would keep as unsettled and never raise again (spillway.act.claims.raise_once)
REFUSED_FOR_NOW_CODES = frozenset({"ResourceContention", "ScalingActivityInProgress"})
#: EC2's answers to DescribeLaunchTemplateVersions for a template, or a version, that does not exist (EC2
#: API Reference, error codes); every other failure of the read fails the region's read
TEMPLATE_NOT_FOUND = frozenset(
    {
        "InvalidLaunchTemplateId.NotFound",
        "InvalidLaunchTemplateName.NotFoundException",
        "InvalidLaunchTemplateId.VersionNotFound",
    }
)
_UNREAD = (
    ": the group can launch nothing until it names one that exists; its capacity type is read from its tags"
)
#: EKS's answers to DescribeNodegroup that leave a managed node group's template to its tags (the group's
#: problems name the call) rather than fail the region's read: the role may not read node groups (a
#: deployment that predates the permission, a node group of another cluster) or the node group is gone
#: while its Auto Scaling group is not yet (EKS API Reference, DescribeNodegroup: Errors)
NODEGROUP_UNREAD = frozenset({"AccessDeniedException", "AccessDenied", "ResourceNotFoundException"})
LAUNCH_TEMPLATES_BATCH = 100  # template ids (or names, as one filter's values) per DescribeLaunchTemplates
LAUNCH_VERSIONS_BATCH = 10  # version numbers of one template per DescribeLaunchTemplateVersions
LAUNCH_CONFIGURATIONS_BATCH = 50  # the API's limit for LaunchConfigurationNames per call
DESCRIBE_INSTANCE_TYPES_BATCH = 100  # the API's limit for InstanceTypes per call
_INVALID_TYPES = re.compile(r"\[([^\]]*)\]")


#: what botocore raises for a try that never reached AWS: the endpoint could not be resolved or reached, or
#: the connection was not made in time. Every other failed try (a read timeout, a connection reset, an
#: answer that broke off, a 5xx) may follow a request AWS applied
_UNSENT = (EndpointConnectionError, ConnectTimeoutError)
#: what botocore raises once AWS answered, when the answer cannot be read: a body its parser cannot read
#: (parsers.py ResponseParserError: an ``Exception``, not a BotoCoreError, raised outside botocore's retry
#: loop, so no other try follows), a checksum that does not match, a body shorter than its Content-Length.
#: A call so answered may have applied
_UNREAD_ANSWER = (ResponseParserError, FlexibleChecksumError, ChecksumError, IncompleteReadError)
#: every error a call of a client may raise: ResponseParserError is not among botocore's own
SDK_ERRORS = (ClientError, BotoCoreError, ResponseParserError)
# the tries of the call under way in this thread (:class:`_Tries`), which botocore reports as they end
_TRIES = threading.local()


@dataclass(slots=True)
class _Tries:
    """What became of each try botocore made of one call: ``lost`` when its answer was lost (AWS may have
    applied it), ``unsent`` when it never reached AWS, else ``answered``."""

    outcomes: list[str] = field(default_factory=list)

    @property
    def lost(self) -> bool:
        return "lost" in self.outcomes

    @property
    def unsent(self) -> bool:
        return bool(self.outcomes) and all(o == "unsent" for o in self.outcomes)


def _note_try(caught_exception: BaseException | None = None, response: Any = None, **_: Any) -> None:
    """botocore's ``needs-retry`` event, emitted once a try ends (the last one too): note what became of
    it for the call under way in this thread (:func:`_watching_tries`). Decides no retry (returns None)."""
    tries: _Tries | None = getattr(_TRIES, "current", None)
    if tries is None:
        return None
    if caught_exception is not None:
        tries.outcomes.append("unsent" if isinstance(caught_exception, _UNSENT) else "lost")
        return None
    status = int(getattr(response[0], "status_code", 0) or 0) if response else 0
    error = ((response[1] if response else {}) or {}).get("Error", {})
    # read as a call's own answer is (map_aws_error): a 5xx may follow a request AWS applied, but a
    # throttle (a 503 Throttling, RequestLimitExceeded, SlowDown...) or ResourceContention (500) is a
    # refusal, nothing applied
    answer = _answer_error(str(error.get("Code", "")), str(error.get("Message", "")), status, "")
    tries.outcomes.append("lost" if isinstance(answer, AwsUnavailable) else "answered")
    return None


@contextmanager
def _watching_tries(client: Any, operation: str) -> Iterator[_Tries]:
    """Note what becomes of each try botocore makes of ``operation`` on ``client`` within the block: its
    retries send a request again after an answer was lost, and the call then ends with the last try's
    answer alone, which says nothing of a try before it that AWS applied."""
    # one unique_id per operation: botocore ignores a registration under an id it has seen, whatever its event
    client.meta.events.register(f"needs-retry.{client.meta.service_model.service_id.hyphenize()}.{operation}",
                                _note_try, unique_id=f"spillway-note-try-{operation}")  # fmt: skip
    tries, outer = _Tries(), getattr(_TRIES, "current", None)
    _TRIES.current = tries
    try:
        yield tries
    finally:
        _TRIES.current = outer


#: botocore's events (``client.py`` ``_make_api_call``, ``endpoint.py``), emitted in the calling thread, at
#: which a read given up stops (:func:`_unless_cut`): before a call, before each of its tries (its
#: retries too), on the answer AWS sent (an error answer's too, before the client raises it), and on a
#: call that ended without one (unreached, timed out: botocore's exception, raised after this event)
CUTOFF_EVENTS = ("before-call", "before-send", "after-call", "after-call-error")


def _unless_cut(event_name: str = "", **_: Any) -> None:
    """A handler of :data:`CUTOFF_EVENTS`: :class:`ReadCut` when the read this thread runs was given up
    (:func:`spillway.cutoff.check`), so that neither the call nor a try of it is sent, and nothing it
    ends with, answer or failure, reaches the read (botocore does not retry a try that raised it).
    Decides nothing else (returns None)."""
    cutoff.check(event_name)


def _any_call(what: str) -> None:
    """A ``before_call`` that lets every call be made."""
    return None


def _out_of_bounds(message: str) -> bool:
    """Whether a refused SetDesiredCapacity says the value is outside the group's bounds. AWS words it
    "New SetDesiredCapacity value N is above max value M" (or "below min value": EC2 Auto Scaling API
    Reference, SetDesiredCapacity, a ValidationError), naming neither MaxSize nor MinSize."""
    lowered = message.lower()
    return (
        "MaxSize" in message
        or "MinSize" in message
        or "max size" in lowered
        or "above max value" in lowered
        or "below min value" in lowered
    )


@dataclass(frozen=True, slots=True)
class AwsSettings:
    """SDK behaviour: adaptive retries (client-side rate limiting on throttles) and short timeouts: one call
    takes 49 s at most with these (:meth:`worst_call_seconds`), so that a scale step has the time for two
    (:mod:`spillway.model.calltime`)."""

    max_attempts: int = 3
    connect_timeout: float = 3.0
    read_timeout: float = 7.0

    def worst_call_seconds(self) -> float:
        """The longest one call of a client built with these settings may take
        (:func:`spillway.model.calltime.worst_call_seconds`)."""
        return worst_call_seconds(self.max_attempts, self.connect_timeout, self.read_timeout)

    def botocore_config(self) -> Config:
        return Config(
            retries={"mode": "adaptive", "total_max_attempts": self.max_attempts},  # attempts, not retries
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            tcp_keepalive=True,
        )


class AwsClients:
    """boto3 clients keyed by region, built once (lazily) and reused for the container's life."""

    def __init__(
        self,
        regions: Sequence[str],
        session: boto3.Session | None = None,
        settings: AwsSettings | None = None,
    ) -> None:
        if not regions:
            raise ValueError("regions: at least one region is needed")
        self.regions: tuple[str, ...] = tuple(regions)
        self.session = session or boto3.Session()
        self.settings = settings or AwsSettings()
        self._config = self.settings.botocore_config()
        self._clients: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    @property
    def primary_region(self) -> str:
        return self.regions[0]

    def _client(self, service: str, region: str) -> Any:
        key = (service, region)
        client = self._clients.get(key)
        if client is None:
            with self._lock:  # boto3 sessions are not thread-safe; clients are
                client = self._clients.get(key)
                if client is None:
                    client = self.session.client(service, region_name=region, config=self._config)  # type: ignore[call-overload]
                    # a read its caller gave up sends nothing more and uses no answer (spillway.cutoff)
                    for event in CUTOFF_EVENTS:
                        client.meta.events.register(event, _unless_cut, unique_id=f"spillway-cutoff-{event}")
                    self._clients[key] = client
        return client

    def autoscaling(self, region: str) -> AutoScalingClient:
        client: AutoScalingClient = self._client("autoscaling", region)
        return client

    def ec2(self, region: str) -> EC2Client:
        client: EC2Client = self._client("ec2", region)
        return client

    def eks(self, region: str) -> EKSClient:
        client: EKSClient = self._client("eks", region)
        return client


def map_aws_error(exc: BaseException, what: str) -> AwsError:
    """An SDK exception as one of ours; ``what`` says which call and on what (for the message). AWS's
    message is kept without credentials: a signature mismatch quotes the canonical request it expected,
    session token included, and our message travels beyond the logs (a Lambda's errorMessage, a Step
    Functions Cause, a Node's Event, a group's back-off reason)."""
    if isinstance(exc, AwsError):
        return exc
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        code = str(err.get("Code", ""))
        message = redact(str(err.get("Message", "")))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        return _answer_error(code, message, status, f"{what}: {code}: {message}")
    # An answer that broke off (HTTPClientError: ReadTimeoutError, ConnectionClosedError,
    # ResponseStreamingError...) may follow a call AWS applied: the caller must read it as lost and retry
    # (a CreateFleet under its ClientToken), never as a refusal with nothing done.
    if isinstance(exc, EndpointConnectionError | ConnectTimeoutError | HTTPClientError):
        return AwsUnavailable(f"{what}: {exc}")
    if isinstance(exc, _UNREAD_ANSWER):  # AWS answered, and the call may have applied: lost, as above
        return AwsUnavailable(f"{what}: the answer could not be read: {redact(str(exc))[:300]}")
    if isinstance(exc, BotoCoreError):
        return AwsError(f"{what}: {exc}")
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return AwsError(f"{what}: unexpected response: {where}: {first['msg']}")
    return AwsError(f"{what}: {exc}")


def _answer_error(code: str, message: str, status: int, text: str) -> AwsError:
    """AWS's error answer (``code``, ``message``, HTTP ``status``) as one of ours, saying ``text``; an
    :class:`AwsUnavailable` is an answer after which the request may have applied."""
    if code in THROTTLING_CODES or "rate exceeded" in message.lower():
        return AwsThrottled(text)
    if code in REFUSED_FOR_NOW_CODES:  # before the 5xx rule: ResourceContention is a 500
        return AwsThrottled(text)
    # the one classification of launch errors (spillway.model.launcherror), before the 5xx rule: EC2
    # answers its capacity codes (InsufficientInstanceCapacity...) as server errors, HTTP 500
    kind = code_kind(code)
    if kind == "capacity":
        return CapacityUnavailable(text)
    if kind == "quota":
        return QuotaExceeded(text)
    if code in UNAVAILABLE_CODES or status >= 500:
        return AwsUnavailable(text)
    return AwsError(text)


def _call(what: str, fn: Callable[[], T]) -> T:
    try:
        return fn()
    except (*SDK_ERRORS, ValidationError) as exc:
        raise map_aws_error(exc, what) from exc


def _market(spot: bool) -> CapacityType:
    return "spot" if spot else "on-demand"


def cluster_tag_filters(cluster: str) -> list[dict[str, Any]]:
    """Server-side filters: both cluster-autoscaler auto-discovery tag keys (filters are ANDed)."""
    return [
        {"Name": "tag-key", "Values": [TAG_ENABLED]},
        {"Name": "tag-key", "Values": [f"{TAG_CLUSTER_PREFIX}{cluster}"]},
    ]


@dataclass(frozen=True, slots=True)
class RegionView:
    """One region's groups, their recent scaling activities, scheduled actions and warm pools, as AWS
    returned them."""

    region: str
    groups: tuple[AutoScalingGroup, ...]
    activities: tuple[ScalingActivity, ...]
    calls: int = 0
    scheduled: tuple[ScheduledAction, ...] = ()
    warm_pools: Mapping[str, WarmPool] = field(default_factory=dict)  # group name -> its warm pool


@dataclass(slots=True)
class _InstanceTypeCache:
    infos: dict[str, InstanceTypeInfo] = field(default_factory=dict)
    unknown: set[str] = field(default_factory=set)  # AWS said no; the bundled catalogue answers
    lock: threading.Lock = field(default_factory=threading.Lock)


class AwsAdapter:
    """Reads a cluster's Auto Scaling groups in every configured region; sets capacity; terminates."""

    def __init__(
        self,
        clients: AwsClients,
        cluster: str,
        *,
        activity_window: timedelta = timedelta(minutes=30),
        max_activities: int = 20,
        catalogue: Mapping[str, InstanceTypeInfo] | None = None,
        launch_cache_size: int = DEFAULT_MAX_ENTRIES,
        lifecycle_hooks: Sequence[str] = DEFAULT_LIFECYCLE_HOOKS,
    ) -> None:
        self._clients = clients
        self.cluster = cluster
        self.lifecycle_hooks = tuple(lifecycle_hooks)  # Spillway's terminate hooks (LIFECYCLE_HOOK_NAMES)
        self.activity_window = activity_window
        self.max_activities = max_activities
        self._fallback = catalogue
        self._types = _InstanceTypeCache()
        # what launch template versions and launch configurations say, for the container's life
        self._launch_cache = LaunchCache(launch_cache_size)
        # what DescribeNodegroup said, for cluster-autoscaler's TTL
        self._nodegroup_cache = NodegroupCache()
        # each region's zone name -> zone id, for the container's life: an account's never changes
        self._zone_ids: dict[str, dict[str, str]] = {}
        self._zone_ids_lock = threading.Lock()

    @property
    def regions(self) -> tuple[str, ...]:
        return self._clients.regions

    # --- reads ---------------------------------------------------------------------------------

    def describe_groups(self, region: str) -> list[AutoScalingGroup]:
        """The groups tagged for this cluster (filtered by AWS, paginated), parsed."""
        client = self._clients.autoscaling(region)

        def fetch() -> list[AutoScalingGroup]:
            out: list[AutoScalingGroup] = []
            pages = client.get_paginator("describe_auto_scaling_groups").paginate(
                Filters=cluster_tag_filters(self.cluster),  # type: ignore[arg-type]
                PaginationConfig={"PageSize": 100},
            )
            for page in pages:
                out.extend(AutoScalingGroup.model_validate(g) for g in page.get("AutoScalingGroups", []))
            return out

        return _call(f"DescribeAutoScalingGroups({region})", fetch)

    def describe_activities(
        self, region: str, group: str, now: datetime | None = None
    ) -> list[ScalingActivity]:
        """The group's scaling activities that started within the window: those in progress, then the
        ended ones newest first (as AWS lists them).

        AWS lists the activities still in progress first, then the others by start time, newest first
        (DescribeScalingActivities' ``Activities``). So paging stops at the first *ended* activity older
        than the window, or after ``max_activities`` ended ones; an activity in progress that started
        before the window (a terminate waiting on a lifecycle hook, a launch in ``Pending:Wait``) is
        passed over, never taken for the end of the window: the failed launches behind it count.
        """
        client = self._clients.autoscaling(region)
        since = (now or datetime.now(UTC)) - self.activity_window

        def fetch() -> list[ScalingActivity]:
            running: list[ScalingActivity] = []
            ended: list[ScalingActivity] = []
            for activity in _scaling_activities(client, group, min(100, self.max_activities)):
                recent = aware(activity.StartTime) >= since
                if activity.EndTime is None and activity.StatusCode not in ENDED_ACTIVITY:
                    if recent:
                        running.append(activity)
                    continue
                if not recent or len(ended) >= self.max_activities:
                    break
                ended.append(activity)
            return running + ended

        return _call(f"DescribeScalingActivities({region}, {group})", fetch)

    def detach_recorded(self, region: str, group: str, instance_id: str, since: datetime) -> bool:
        """Whether ``group`` recorded detaching ``instance_id`` (DetachInstances' activity, Description
        ``Detaching EC2 instance: <id>``, neither Failed nor Cancelled) in an activity that started at or
        after ``since``. Pages through every activity of the window, newest first, with no cap on their
        number: a Spot wave reclaims many instances of a group at once, and their detaches and the
        launches that replace them may bury this one under more than :meth:`describe_activities` keeps.
        Stops at the first ended activity older than ``since`` (one still in progress is passed over, as
        there), or at ``DETACH_PAGES`` pages of 100."""
        client = self._clients.autoscaling(region)
        wanted = DETACHING.format(instance=instance_id)
        since = aware(since)

        def fetch() -> bool:
            for activity in _scaling_activities(client, group, 100, DETACH_PAGES):
                recent = aware(activity.StartTime) >= since
                if recent and activity.Description == wanted and activity.StatusCode not in UNDONE_ACTIVITY:
                    return True
                if not recent and (activity.EndTime is not None or activity.StatusCode in ENDED_ACTIVITY):
                    return False
            return False

        return _call(f"DescribeScalingActivities({region}, {group})", fetch)

    def describe_scheduled_actions(self, region: str, groups: Iterable[str]) -> list[ScheduledAction]:
        """The scheduled actions of ``groups`` (one paginated call for the whole region, then filtered:
        the call takes one group name at most)."""
        wanted = set(groups)
        if not wanted:
            return []
        client = self._clients.autoscaling(region)

        def fetch() -> list[ScheduledAction]:
            out: list[ScheduledAction] = []
            pages = client.get_paginator("describe_scheduled_actions").paginate(
                PaginationConfig={"PageSize": 100}
            )
            for page in pages:
                for raw in page.get("ScheduledUpdateGroupActions", []):
                    if raw.get("AutoScalingGroupName") in wanted:
                        out.append(ScheduledAction.model_validate(raw))
            return out

        return _call(f"DescribeScheduledActions({region})", fetch)

    def describe_warm_pool(self, region: str, group: str) -> WarmPool:
        """The group's warm pool: its configuration and every instance in it (paginated)."""
        client = self._clients.autoscaling(region)

        def fetch() -> WarmPool:
            config: Any = None
            instances: list[Any] = []
            token: str | None = None
            while True:
                kwargs: dict[str, Any] = {"AutoScalingGroupName": group, "MaxRecords": 50}
                if token:
                    kwargs["NextToken"] = token
                page = client.describe_warm_pool(**kwargs)
                config = page.get("WarmPoolConfiguration") or config
                instances.extend(page.get("Instances", []))
                token = page.get("NextToken")
                if not token:
                    return WarmPool.model_validate({"WarmPoolConfiguration": config, "Instances": instances})

        return _call(f"DescribeWarmPool({region}, {group})", fetch)

    def observe_region(self, region: str, now: datetime | None = None) -> RegionView:
        """Groups, the region's scheduled actions of the live ones, then per live group its activities
        (and warm pool, when it has one)."""
        groups = self._with_launch_settings(region, self.describe_groups(region))
        groups, nodegroup_calls = self._with_managed_nodegroups(region, groups)
        live_names = [g.AutoScalingGroupName for g in groups if not g.Status]  # Status: being deleted
        scheduled = self.describe_scheduled_actions(region, live_names)
        lowered = {
            a.AutoScalingGroupName
            for a in scheduled
            if a.DesiredCapacity is not None or a.MaxSize is not None
        }
        groups, hook_calls = self._with_drain_hooks(region, groups, lowered)
        activities: list[ScalingActivity] = []
        warm: dict[str, WarmPool] = {}
        live = [g for g in groups if not g.Status]
        for group in live:
            activities.extend(self.describe_activities(region, group.AutoScalingGroupName, now))
            if group.WarmPoolConfiguration is not None:
                warm[group.AutoScalingGroupName] = self.describe_warm_pool(region, group.AutoScalingGroupName)
        return RegionView(
            region=region,
            groups=tuple(groups),
            activities=tuple(activities),
            calls=1 + len(live) + len(warm) + (1 if live else 0) + nodegroup_calls + hook_calls,
            scheduled=tuple(scheduled),
            warm_pools=warm,
        )

    def _with_launch_settings(
        self, region: str, groups: Sequence[AutoScalingGroup]
    ) -> list[AutoScalingGroup]:
        """The groups with what their launch template version (``$Default`` without one) or launch
        configuration says: the instance type (:attr:`AutoScalingGroup.LaunchInstanceType`) of a group
        without overrides (what it launches now, also when its running instances have another), and,
        for a group without a mixed instances policy, whether it launches Spot
        (:attr:`AutoScalingGroup.LaunchMarketType`: a template's ``InstanceMarketOptions.MarketType`` or a
        configuration's ``SpotPrice``), and the EFA interfaces a template version attaches
        (:attr:`AutoScalingGroup.LaunchEfaInterfaces`: its nodes' ``vpc.amazonaws.com/efa``). A mixed
        instances policy's template is read only for a type: AWS refuses one that asks for Spot there.

        Read cheaply, since EC2 throttles each Describe action per account and region and this runs on
        every observation: one DescribeLaunchTemplates (``ec2:DescribeLaunchTemplates``) for all the
        region's templates resolves ``$Latest`` and ``$Default`` to version numbers; what a numbered
        version says never changes, so it comes from the container's :class:`LaunchCache`, else from one
        DescribeLaunchTemplateVersions per template for all its versions not known yet. Launch
        configurations cannot change either: known ones from the cache, the others 50 names to a
        DescribeLaunchConfigurations.

        A read that fails raises (``AwsThrottled``, ``AwsUnavailable``, ``AwsError`` for a permission the
        role lacks) and fails the region's read, as every read of observe does: one throttled call must
        not turn a Spot group on-demand for a tick. Only a template, version or configuration that does
        not exist, as EC2 says (:data:`TEMPLATE_NOT_FOUND`, or left out of an answer), leaves the group
        unread, its tags deciding and its problems naming it (warned): it can launch nothing until
        somebody fixes it, and failing the region would stop every other group's plans."""
        wanted = [g for g in groups if _reads_launch_settings(g)]
        reader = _LaunchSettingsReader(self._clients, self._launch_cache, region)
        resolved = reader.resolved([g for g in groups if not g.Status])  # first: all in one call
        found = reader.read(wanted) if wanted else {}
        self._launch_cache.keep_configurations(
            region, {g.LaunchConfigurationName for g in groups if g.LaunchConfigurationName}
        )
        return [
            _with_launch_facts(
                region, g, found.get(g.AutoScalingGroupName), resolved.get(g.AutoScalingGroupName)
            )
            for g in groups
        ]

    def _with_drain_hooks(
        self, region: str, groups: Sequence[AutoScalingGroup], lowered: Collection[str] = ()
    ) -> tuple[list[AutoScalingGroup], int]:
        """The groups, each live one that AZRebalance may take a node of (:func:`rebalance_problem`), or
        whose scheduled actions may lower it (``lowered``: one sets DesiredCapacity or MaxSize), with
        Spillway's terminate lifecycle hooks on it (:attr:`AutoScalingGroup.DrainHooks`: those named in
        ``lifecycle_hooks`` for ``autoscaling:EC2_INSTANCE_TERMINATING``, as DescribeLifecycleHooks
        answers), and the number of calls made. Such a hook holds a rebalancing's termination too, and
        Spillway drains the node before it completes the action, so the group is not flagged; and a
        scheduled action's terminations, so the plan drains no node ahead of it
        (:mod:`spillway.planner.schedshrink`). Only those groups are asked: nothing about the others
        depends on it. A read that fails leaves the group unread (None), flagged as before and drained
        ahead of its actions, warned: failing the region's read for it would stop every plan."""
        out: list[AutoScalingGroup] = []
        calls = 0
        for group in groups:
            if group.Status or not (rebalance_problem(group) or group.AutoScalingGroupName in lowered):
                out.append(group)
                continue
            calls += 1
            try:
                hooks = self.describe_lifecycle_hooks(region, group.AutoScalingGroupName)
            except AwsError as exc:
                log.warning("DescribeLifecycleHooks(%s, %s): %s: %s; its AZRebalance problem stays",
                            region, group.AutoScalingGroupName, type(exc).__name__, exc)  # fmt: skip
                out.append(group)
                continue
            out.append(group.model_copy(update={"DrainHooks": drain_hooks(hooks, self.lifecycle_hooks)}))
        return out, calls

    def _with_managed_nodegroups(
        self, region: str, groups: Sequence[AutoScalingGroup]
    ) -> tuple[list[AutoScalingGroup], int]:
        """The groups, each live group of an EKS managed node group (tagged ``eks:cluster-name`` and
        ``eks:nodegroup-name``) with what DescribeNodegroup (``eks:DescribeNodegroup``) says of its node
        group (:func:`~spillway.model.aws.with_managed_nodegroups`: the labels, taints and tags its
        template needs), and the number of calls made.

        As cluster-autoscaler's AWS provider reads them (kubernetes/autoscaler
        cluster-autoscaler/cloudprovider/aws/aws_wrapper.go ``getManagedNodegroupInfo``), and, as it
        does, an answer is kept for its TTL (:class:`~spillway.adapters.nodegroup_cache.NodegroupCache`,
        6 minutes): observe runs every minute. Refused or unknown (:data:`NODEGROUP_UNREAD`): the group
        keeps its tags' template and its problems name the call, kept as an answer. Any other failure
        (throttling, an outage) raises, is not kept, and fails the region's read, as every read of
        observe does: a tainted group planned as untainted for one tick launches nodes the pods it was
        grown for cannot use. An answer is kept with the groups it was read for: a group of the node group
        it was not read for is of a node group made again under the name since (it has an Auto Scaling
        group of its own), so the node group is asked again."""
        read: dict[NodegroupKey, NodegroupRead] = {}
        asked = 0
        for cluster, nodegroup in wanted_nodegroups(groups):
            # the live groups of the node group (by ARN, which a group made again under its name
            # changes): an answer read for other groups may be of a node group of the name deleted since
            arns = [
                g.AutoScalingGroupARN
                for g in groups
                if not g.Status and g.eks_nodegroup == (cluster, nodegroup)
            ]
            kept = self._nodegroup_cache.get((region, cluster, nodegroup), arns)
            if kept is None:
                kept = self._describe_nodegroup(region, cluster, nodegroup)
                self._nodegroup_cache.put((region, cluster, nodegroup), kept, arns)
                asked += 1
            read[(cluster, nodegroup)] = kept
        return (with_managed_nodegroups(groups, read) if read else list(groups)), asked

    def _describe_nodegroup(self, region: str, cluster: str, nodegroup: str) -> NodegroupRead:
        """DescribeNodegroup's node group, or, refused or unknown, the group's problem; else raised."""
        what = f"DescribeNodegroup({cluster}, {nodegroup})"
        try:
            answer = self._clients.eks(region).describe_nodegroup(
                clusterName=cluster, nodegroupName=nodegroup
            )
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code not in NODEGROUP_UNREAD:
                raise map_aws_error(exc, what) from exc
            message = exc.response.get("Error", {}).get("Message", "")
            problem = f"{what}: {code}: {message}: {NODEGROUP_UNREAD_EFFECT}"
            log.warning("%s: %s", region, problem)
            return problem
        except (BotoCoreError, ResponseParserError) as exc:
            raise map_aws_error(exc, what) from exc
        if not isinstance(answer.get("nodegroup"), Mapping):  # its one member: an unexpected response
            raise AwsError(f"{what}: unexpected response: no nodegroup")
        try:
            return EksNodegroup.model_validate(answer["nodegroup"])
        except ValidationError as exc:
            raise map_aws_error(exc, what) from exc

    def instance_types(self, region: str, names: Iterable[str]) -> dict[str, InstanceTypeInfo]:
        """Instance type facts for ``names``: asked of EC2 once per container, else the bundled catalogue.

        Only types not seen before are asked for (in batches of 100). A type EC2 does not know, and any
        failure of the call, falls back to the bundled catalogue: a missing type must not stop observing.
        """
        wanted = sorted(set(names))
        cache = self._types
        with cache.lock:
            missing = [n for n in wanted if n not in cache.infos and n not in cache.unknown]
        if missing:
            fetched, answered = self._fetch_instance_types(region, missing)
            with cache.lock:
                cache.infos.update(fetched)
                # Remember "EC2 does not know it" only when EC2 said so, not after a failed call.
                cache.unknown.update(n for n in answered if n not in fetched)
        fallback = self._fallback if self._fallback is not None else bundled_instance_types()
        out: dict[str, InstanceTypeInfo] = {}
        for name in wanted:
            info = cache.infos.get(name) or fallback.get(name)
            if info is not None:
                out[name] = info
        return out

    def _fetch_instance_types(
        self, region: str, names: list[str]
    ) -> tuple[dict[str, InstanceTypeInfo], list[str]]:
        """The infos EC2 returned, and the names it gave an answer about (found or not)."""
        client = self._clients.ec2(region)
        out: dict[str, InstanceTypeInfo] = {}
        answered: list[str] = []
        for start in range(0, len(names), DESCRIBE_INSTANCE_TYPES_BATCH):
            batch = names[start : start + DESCRIBE_INSTANCE_TYPES_BATCH]
            try:
                out.update(self._describe_known_types(client, batch))
                answered.extend(batch)
            except (*SDK_ERRORS, ValidationError) as exc:
                log.warning("DescribeInstanceTypes failed, using the bundled catalogue: %s", exc)
        return out, answered

    def _describe_known_types(self, client: EC2Client, names: list[str]) -> dict[str, InstanceTypeInfo]:
        """One unknown name fails the whole call (InvalidInstanceType, naming the unknown ones): ask
        again without the names the error lists, else one by one."""
        try:
            return self._describe_types(client, names)
        except ClientError as exc:
            err = exc.response.get("Error", {})
            if err.get("Code") != "InvalidInstanceType":
                raise
            listed = _INVALID_TYPES.search(str(err.get("Message", "")))
            bad = {n.strip() for n in listed.group(1).split(",")} if listed else set()
            rest = [n for n in names if n not in bad]
            log.info("instance types not known to EC2: %s", ", ".join(sorted(bad)) or "?")
            if len(rest) < len(names):  # the error named some of ours: ask again without them
                return self._describe_known_types(client, rest) if rest else {}
            if len(names) == 1:
                return {}
        out: dict[str, InstanceTypeInfo] = {}
        for name in names:
            try:
                out.update(self._describe_types(client, [name]))
            except ClientError as one:
                if one.response.get("Error", {}).get("Code") != "InvalidInstanceType":
                    raise
                log.info("instance type %s not known to EC2", name)
        return out

    @staticmethod
    def _describe_types(client: EC2Client, names: list[str]) -> dict[str, InstanceTypeInfo]:
        out: dict[str, InstanceTypeInfo] = {}
        pages = client.get_paginator("describe_instance_types").paginate(
            InstanceTypes=names,  # type: ignore[arg-type]
        )
        for page in pages:
            for raw in page.get("InstanceTypes", []):
                info = InstanceTypeInfo.model_validate(raw)
                out[info.InstanceType] = info
        return out

    def node_groups_in(
        self, region: str, reserve: ReserveLike, now: datetime | None = None
    ) -> list[NodeGroup]:
        view = self.observe_region(region, now)
        return self.build_groups(view, reserve)

    def build_groups(self, view: RegionView, reserve: ReserveLike) -> list[NodeGroup]:
        types: set[str] = set()
        for asg in view.groups:
            types |= candidate_types(asg)  # a mixed group's overrides too: the template is their least
        catalogue = self.instance_types(view.region, types) if types else {}
        return build_node_groups(
            view.groups,
            view.activities,
            catalogue,
            reserve,
            self.cluster,
            scheduled=view.scheduled,
            warm_pools=view.warm_pools,
        )

    def node_groups(self, reserve: ReserveLike, now: datetime | None = None) -> list[NodeGroup]:
        """Managed node groups of every configured region, sorted by (region, name)."""
        groups: list[NodeGroup] = []
        for region in self.regions:
            groups.extend(self.node_groups_in(region, reserve, now))
        return sorted(groups, key=lambda g: (g.region, g.name))

    # --- writes --------------------------------------------------------------------------------

    def describe_group(self, region: str, group: str) -> AutoScalingGroup:
        client = self._clients.autoscaling(region)

        def fetch() -> list[AutoScalingGroup]:
            page = client.describe_auto_scaling_groups(AutoScalingGroupNames=[group])
            return [AutoScalingGroup.model_validate(g) for g in page.get("AutoScalingGroups", [])]

        found = _call(f"DescribeAutoScalingGroups({region}, {group})", fetch)
        if not found:
            raise AsgNotFound(f"{region}/{group}: no such Auto Scaling group")
        return found[0]

    def describe_group_launching(self, region: str, group: str) -> AutoScalingGroup:
        """:meth:`describe_group` with what its launch template version or configuration says
        (:meth:`_with_launch_settings`: the instance type it launches now, whether it asks for Spot), as
        observe reads it for the plan."""
        return self._with_launch_settings(region, [self.describe_group(region, group)])[0]

    def set_desired_capacity(
        self, region: str, group: str, desired: int, before_call: Callable[[str], None] | None = None
    ) -> int:
        """Set the group's desired capacity; returns the previous one.

        Refuses (:class:`AsgLimitExceeded`, without calling SetDesiredCapacity) a value outside
        ``[MinSize, MaxSize]``, as AWS would. :class:`AwsUnavailable` whenever AWS may have applied the
        value: an answer lost, and a refusal of a try that botocore sent after one whose answer was lost
        (the earlier one may have applied); ``unsent`` when it certainly did not (the group could not be
        read first, or no try reached AWS). ``before_call`` is called with each call's name before it is
        made (the read, then SetDesiredCapacity); what it raises is raised, that call not made.
        """
        ready = before_call or _any_call
        ready(f"DescribeAutoScalingGroups({region}, {group})")
        try:
            asg = self.describe_group(region, group)
        except AwsUnavailable as exc:
            raise AwsUnavailable(f"{exc}; SetDesiredCapacity not asked", unsent=True) from exc
        if not asg.MinSize <= desired <= asg.MaxSize:
            raise AsgLimitExceeded(
                f"{region}/{group}: desired capacity {desired} outside [{asg.MinSize}, {asg.MaxSize}]"
            )
        client = self._clients.autoscaling(region)
        what = f"SetDesiredCapacity({region}, {group}, {desired})"
        ready(what)
        with _tried(client, "SetDesiredCapacity", what, _set_refused):
            client.set_desired_capacity(
                AutoScalingGroupName=group, DesiredCapacity=desired, HonorCooldown=False
            )
        return asg.DesiredCapacity

    def placement(self, region: str, instance_id: str) -> Placement | None:
        """Which Auto Scaling group of ``region`` the instance is in, and its lifecycle state there."""
        client = self._clients.autoscaling(region)

        def fetch() -> Placement | None:
            found = client.describe_auto_scaling_instances(InstanceIds=[instance_id])
            for item in found.get("AutoScalingInstances", []):
                if item.get("InstanceId") == instance_id:
                    return Placement(
                        instance_id,
                        str(item["AutoScalingGroupName"]),
                        str(item["LifecycleState"]),
                        zone=str(item.get("AvailabilityZone") or ""),
                        instance_type=str(item.get("InstanceType") or ""),
                    )
            return None

        return _call(f"DescribeAutoScalingInstances({region}, {instance_id})", fetch)

    def scheduled_events(self, region: str, instance_id: str) -> list[ScheduledEvent]:
        """The instance's scheduled events, as EC2 DescribeInstanceStatus lists them (``InstanceIds`` the
        one instance, ``IncludeAllInstances`` so that a stopped one answers too), those EC2 marks
        ``[Completed]`` or ``[Canceled]`` included. An instance EC2 no longer knows
        (``InvalidInstanceID.NotFound``: terminated and gone, days after its launch) has none."""
        client = self._clients.ec2(region)
        what = f"DescribeInstanceStatus({region}, {instance_id})"

        def fetch() -> list[ScheduledEvent]:
            try:
                resp = client.describe_instance_status(InstanceIds=[instance_id], IncludeAllInstances=True)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") == "InvalidInstanceID.NotFound":
                    return []
                raise
            return [
                scheduled_event(event)
                for status in resp.get("InstanceStatuses", [])
                if status.get("InstanceId") == instance_id
                for event in status.get("Events", [])
            ]

        return _call(what, fetch)

    def private_dns_names(self, region: str, instance_ids: Sequence[str]) -> dict[str, str]:
        """Instance id → private DNS name (what EKS names its Node), for those that have one. The ids go
        in an ``instance-id`` filter, as for :meth:`instance_states`: an instance its group launched a
        moment ago may be unknown to DescribeInstances yet, which fails a call naming it in
        ``InstanceIds`` whole (``InvalidInstanceID.NotFound``); a filter leaves it out (no Node yet)."""
        if not instance_ids:
            return {}
        client = self._clients.ec2(region)
        ids = list(instance_ids)

        def fetch() -> dict[str, str]:
            names: dict[str, str] = {}
            for start in range(0, len(ids), DESCRIBE_INSTANCES_BATCH):
                batch = ids[start : start + DESCRIBE_INSTANCES_BATCH]
                pages = client.get_paginator("describe_instances").paginate(
                    Filters=[{"Name": "instance-id", "Values": batch}]
                )
                for page in pages:
                    for reservation in page.get("Reservations", []):
                        for instance in reservation.get("Instances", []):
                            dns, iid = instance.get("PrivateDnsName"), instance.get("InstanceId")
                            if dns and iid:
                                names[iid] = dns
            return names

        return _call(f"DescribeInstances({region})", fetch)

    def terminate_instance(self, region: str, instance_id: str, decrement: bool = True) -> ScalingActivity:
        """TerminateInstanceInAutoScalingGroup; with ``decrement`` the group does not replace it. A refusal
        after a try whose answer was lost (which may have terminated it) is :class:`AwsUnavailable`, as
        for :meth:`set_desired_capacity`: the retry reads where the instance is first."""
        client = self._clients.autoscaling(region)
        what = f"TerminateInstanceInAutoScalingGroup({region}, {instance_id})"
        with _tried(client, "TerminateInstanceInAutoScalingGroup", what, _terminate_refused):
            resp = client.terminate_instance_in_auto_scaling_group(
                InstanceId=instance_id, ShouldDecrementDesiredCapacity=decrement
            )
        try:
            return ScalingActivity.model_validate(resp["Activity"])
        except (ValidationError, KeyError) as exc:  # answered, so applied: read as lost, and the retry
            # finds the instance terminating (a refusal would fail the drain, uncordoning its node)
            raise AwsUnavailable(f"{what}: the answer could not be read: {exc!r}"[:500]) from exc

    # --- terminate lifecycle hooks (act/drain.py) -----------------------------------------------

    def describe_lifecycle_hooks(self, region: str, group: str) -> list[LifecycleHook]:
        """The group's lifecycle hooks (both transitions; :attr:`LifecycleHook.terminating` tells)."""
        client = self._clients.autoscaling(region)

        def fetch() -> list[LifecycleHook]:
            resp = client.describe_lifecycle_hooks(AutoScalingGroupName=group)
            return [_hook(h) for h in resp.get("LifecycleHooks", [])]

        what = f"DescribeLifecycleHooks({region}, {group})"
        try:
            return _call(what, fetch)
        except AwsError as exc:
            if "not found" in str(exc).lower() and type(exc) is AwsError:
                raise AsgNotFound(str(exc)) from exc
            raise

    def complete_lifecycle_action(
        self,
        region: str,
        group: str,
        hook: str,
        instance_id: str,
        token: str | None = None,
        result: str = "CONTINUE",
    ) -> None:
        """CompleteLifecycleAction: by ``token`` when given, else by the instance. An action that no
        longer waits (completed, timed out) is :class:`LifecycleActionNotFound`."""
        client = self._clients.autoscaling(region)
        params: dict[str, Any] = {
            "AutoScalingGroupName": group,
            "LifecycleHookName": hook,
            "LifecycleActionResult": result,
            "InstanceId": instance_id,
        }
        if token:
            params["LifecycleActionToken"] = token
        self._lifecycle_call(
            f"CompleteLifecycleAction({region}, {group}, {hook}, {instance_id}, {result})",
            lambda: client.complete_lifecycle_action(**params),
        )

    def record_heartbeat(
        self, region: str, group: str, hook: str, instance_id: str, token: str | None = None
    ) -> None:
        """RecordLifecycleActionHeartbeat: the action waits another HeartbeatTimeout (up to the hook's
        GlobalTimeout). An action that no longer waits is :class:`LifecycleActionNotFound`."""
        client = self._clients.autoscaling(region)
        params: dict[str, Any] = {
            "AutoScalingGroupName": group,
            "LifecycleHookName": hook,
            "InstanceId": instance_id,
        }
        if token:
            params["LifecycleActionToken"] = token
        self._lifecycle_call(
            f"RecordLifecycleActionHeartbeat({region}, {group}, {hook}, {instance_id})",
            lambda: client.record_lifecycle_action_heartbeat(**params),
        )

    @staticmethod
    def _lifecycle_call(what: str, fn: Callable[[], Any]) -> None:
        try:
            fn()
        except ClientError as exc:
            message = str(exc.response.get("Error", {}).get("Message", ""))
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code == "ValidationError" and "lifecycle action" in message.lower():
                # "No active Lifecycle Action found with instance ID i-…" / "… with token …"
                raise LifecycleActionNotFound(f"{what}: {message}") from exc
            raise map_aws_error(exc, what) from exc
        except (BotoCoreError, ResponseParserError) as exc:
            raise map_aws_error(exc, what) from exc

    # --- gang launches (act/gang.py) ------------------------------------------------------------

    def create_fleet_instant(self, region: str, request: FleetRequest) -> CreateFleetResult:
        """EC2 CreateFleet of type ``instant``: the instances launched and EC2's errors for the rest. A
        call refused whole for capacity is :class:`CapacityUnavailable`, for a quota :class:`QuotaExceeded`,
        for its settings or Spillway's permissions (an ``UnauthorizedOperation``, an ``Invalid...`` code:
        :func:`~spillway.model.launcherror.is_settings_code`) :class:`LaunchMisconfigured`; for its rate,
        ``AwsThrottled``."""
        client = self._clients.ec2(region)
        what = f"CreateFleet({region}, {request.count} x {request.instance_type or 'template type'})"
        try:
            return _call(
                what, lambda: CreateFleetResult.model_validate(client.create_fleet(**request.to_api()))
            )
        except AwsError as exc:
            cause = exc.__cause__
            code = (
                str(cause.response.get("Error", {}).get("Code", "")) if isinstance(cause, ClientError) else ""
            )
            if type(exc) is AwsError and code_kind(code) == "settings":
                raise LaunchMisconfigured(str(exc)) from cause
            raise

    def attach_instances(
        self,
        region: str,
        group: str,
        instance_ids: Sequence[str],
        before_call: Callable[[str], None] | None = None,
    ) -> int:
        """AttachInstances in batches of 20 (the API's limit); each raises the desired capacity by its
        size. Over MaxSize AWS refuses the batch: :class:`AsgLimitExceeded`, unless a try before the
        refusal lost its answer (it may have attached them): :class:`AwsUnavailable`, as for
        :meth:`set_desired_capacity`. Returns the calls made. ``before_call`` is called before each batch,
        as by :meth:`set_desired_capacity`."""
        client = self._clients.autoscaling(region)
        ids = list(instance_ids)
        calls = 0
        for start in range(0, len(ids), ATTACH_BATCH):
            batch = ids[start : start + ATTACH_BATCH]
            what = f"AttachInstances({region}, {group}, {len(batch)} instance(s))"
            (before_call or _any_call)(what)
            with _tried(client, "AttachInstances", what, functools.partial(_attach_refused, group)):
                client.attach_instances(AutoScalingGroupName=group, InstanceIds=batch)
            calls += 1
        return calls

    def terminate_instances(self, region: str, instance_ids: Sequence[str]) -> list[str]:
        """EC2 TerminateInstances (instances outside any group); returns the ids EC2 is terminating.

        ``InvalidInstanceID.NotFound`` for ids just launched is EC2's eventual consistency, not their
        absence: it is :class:`AwsUnavailable`, which the caller retries."""
        if not instance_ids:
            return []
        client = self._clients.ec2(region)
        what = f"TerminateInstances({region}, {len(instance_ids)} instance(s))"

        def terminate() -> list[str]:
            try:
                resp = client.terminate_instances(InstanceIds=list(instance_ids))
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") == "InvalidInstanceID.NotFound":
                    raise AwsUnavailable(f"{what}: {exc} (not visible yet; retried)") from exc
                raise
            return sorted(str(i["InstanceId"]) for i in resp.get("TerminatingInstances", []))

        return _call(what, terminate)

    def instance_states(
        self, region: str, instance_ids: Sequence[str] = (), tag: tuple[str, str] | None = None
    ) -> dict[str, str]:
        """Instance id → EC2 state (``pending``, ``running``, ``shutting-down``, ``terminated`` ...), for
        ``instance_ids`` and/or the instances carrying ``tag`` (key, value).

        The ids go in an ``instance-id`` filter, not ``InstanceIds``: EC2 is eventually consistent, and
        ids CreateFleet has just returned may be unknown to DescribeInstances for a while, which answers
        ``InvalidInstanceID.NotFound`` for the whole call given them as ``InstanceIds`` ("this does not
        mean the instance does not exist"). A filter leaves such an id out of the answer instead."""
        if not instance_ids and tag is None:
            return {}
        client = self._clients.ec2(region)

        def fetch() -> dict[str, str]:
            states: dict[str, str] = {}
            queries: list[dict[str, Any]] = []
            ids = list(instance_ids)
            for start in range(0, len(ids), DESCRIBE_INSTANCES_BATCH):
                batch = ids[start : start + DESCRIBE_INSTANCES_BATCH]
                queries.append({"Filters": [{"Name": "instance-id", "Values": batch}]})
            if tag is not None:
                queries.append({"Filters": [{"Name": f"tag:{tag[0]}", "Values": [tag[1]]}]})
            for query in queries:
                for page in client.get_paginator("describe_instances").paginate(**query):
                    for reservation in page.get("Reservations", []):
                        for instance in reservation.get("Instances", []):
                            states[str(instance["InstanceId"])] = str(instance["State"]["Name"])
            return dict(sorted(states.items()))

        return _call(f"DescribeInstances({region})", fetch)

    def fleet_instances(self, region: str, instance_ids: Sequence[str] = ()) -> list[FleetInstance]:
        """The instances tagged with a gang attempt (``tag-key`` filter) and this cluster (``tag:`` filter),
        pending, running, stopping or stopped, by id: DescribeInstances ANDs its filters and ORs each
        filter's values. With ``instance_ids``, only those (an ``instance-id`` filter: an id EC2 does not
        show is left out of the answer, not an error of the whole call)."""
        client = self._clients.ec2(region)
        filters: list[dict[str, Any]] = [
            {"Name": f"tag:{TAG_CLUSTER}", "Values": [self.cluster]},
            {"Name": "tag-key", "Values": [TAG_ATTEMPT]},
            {"Name": "instance-state-name", "Values": list(SWEPT_STATES)},
        ]
        ids = list(instance_ids)
        queries = [
            [*filters, {"Name": "instance-id", "Values": ids[start : start + DESCRIBE_INSTANCES_BATCH]}]
            for start in range(0, len(ids), DESCRIBE_INSTANCES_BATCH)
        ] or [filters]

        def fetch() -> list[FleetInstance]:
            found: dict[str, FleetInstance] = {}
            for query in queries:
                for page in client.get_paginator("describe_instances").paginate(Filters=query):  # type: ignore[arg-type]
                    # EC2 filtered them already; the one reading `spillway plan --instances` shares
                    for _, instance in swept_instances(page.get("Reservations", []), self.cluster, region):
                        found[instance.instance_id] = instance
            return [found[i] for i in sorted(found)]

        return _call(f"DescribeInstances({region}, gang attempts of {self.cluster})", fetch)

    def zone_ids_in(self, region: str) -> dict[str, str]:
        """Zone name -> zone id of the region's zones this account may use (``ec2:DescribeAvailabilityZones``,
        one call, no paging): ``us-east-1a`` -> ``use1-az4``. A zone's id names the same zone in every
        account; which name it goes by differs from account to account, and never changes for one. So the
        first answer is kept for the container's life: observe asks every observation, and EC2 is called
        until it has answered once (a zone the account opts into later shows in a new container)."""
        with self._zone_ids_lock:
            kept = self._zone_ids.get(region)
        if kept is not None:
            return dict(kept)
        client = self._clients.ec2(region)

        def fetch() -> dict[str, str]:
            zones = client.describe_availability_zones().get("AvailabilityZones", [])
            return availability_zone_ids(zones)

        answer = _call(f"DescribeAvailabilityZones({region})", fetch)
        with self._zone_ids_lock:
            self._zone_ids[region] = answer
        return dict(answer)

    def subnet_zones(self, region: str, subnet_ids: Sequence[str]) -> dict[str, str]:
        """Subnet id → its Availability Zone (``ec2:DescribeSubnets``), for the gang launch that must
        stay in one zone of a group whose subnets span several."""
        if not subnet_ids:
            return {}
        client = self._clients.ec2(region)

        def fetch() -> dict[str, str]:
            zones: dict[str, str] = {}
            for page in client.get_paginator("describe_subnets").paginate(SubnetIds=list(subnet_ids)):
                for subnet in page.get("Subnets", []):
                    zones[str(subnet["SubnetId"])] = str(subnet["AvailabilityZone"])
            return dict(sorted(zones.items()))

        return _call(f"DescribeSubnets({region}, {len(subnet_ids)} subnet(s))", fetch)


# --- launch settings: what a group's launch template version or configuration says ---------------


@contextmanager
def _tried(
    client: Any, operation: str, what: str, refused: Callable[[str, str, str], AwsError | None]
) -> Iterator[None]:
    """Make, within the block, a call of ``operation`` that changes something, and raise its failure as
    one of ours read with what became of each of its tries (:func:`_watching_tries`): a refusal that
    followed a try whose answer was lost is :class:`AwsUnavailable` (that try may have applied); a call
    none of whose tries reached AWS is ``unsent``; else AWS's refusal as ``refused(what, code,
    message)`` names it, or :func:`map_aws_error`."""
    with _watching_tries(client, operation) as tries:
        try:
            yield
        except SDK_ERRORS as exc:
            raise _tried_error(exc, what, tries, refused) from exc


def _tried_error(
    exc: Exception, what: str, tries: _Tries, refused: Callable[[str, str, str], AwsError | None]
) -> AwsError:
    mapped = map_aws_error(exc, what)
    if tries.lost and not isinstance(mapped, AwsUnavailable):
        return AwsUnavailable(f"{mapped}; after a try whose answer was lost, which may have applied")
    if not isinstance(exc, ClientError):
        # unsent only when the call itself failed so: a try that reached AWS and failed after botocore
        # received its answer (a response checksum, a body it cannot parse) is noted by no needs-retry,
        # and may have applied (AwsUnavailable: map_aws_error)
        unsent = isinstance(exc, _UNSENT) and tries.unsent
        return AwsUnavailable(str(mapped), unsent=True) if unsent else mapped
    err = exc.response.get("Error", {})
    return refused(what, str(err.get("Code", "")), str(err.get("Message", ""))) or mapped


def _set_refused(what: str, code: str, message: str) -> AwsError | None:
    """SetDesiredCapacity refused for the group (gone, or going) or for its bounds."""
    if "not found" in message.lower() or "pending delete" in message.lower():  # gone, or going
        return AsgNotFound(f"{what}: {message}")
    if _out_of_bounds(message):
        return AsgLimitExceeded(f"{what}: {message}")
    return None


def _terminate_refused(what: str, code: str, message: str) -> AwsError | None:
    """TerminateInstanceInAutoScalingGroup refused: the instance in no group ("No managed instance
    found"), or the decrement of a group at its MinSize."""
    lowered = message.lower()
    if "not found" in lowered or "no managed instance" in lowered:
        return InstanceNotFound(f"{what}: {message}")
    if "min size" in lowered or "minsize" in lowered:
        return AsgLimitExceeded(f"{what}: {message}")
    return None


def _attach_refused(group: str, what: str, code: str, message: str) -> AwsError | None:
    """AttachInstances refused above the group's MaxSize, or for a group that does not exist."""
    lowered = message.lower()
    if code == "ValidationError" and "max" in lowered and "size" in lowered:
        return AsgLimitExceeded(f"{what}: {message}")
    if code == "ValidationError" and "not found" in lowered and group in message:
        return AsgNotFound(f"{what}: {message}")
    return None


def _reads_launch_settings(asg: AutoScalingGroup) -> bool:
    """Whether the group's launch template or configuration is read (see
    :meth:`AwsAdapter._with_launch_settings`): not for a group being deleted, nor for a mixed group whose
    overrides (by type or by attributes) replace the template's type."""
    if asg.Status:
        return False
    mixed = asg.MixedInstancesPolicy
    if mixed is not None and mixed.LaunchTemplate and mixed.LaunchTemplate.Overrides:
        return False
    return asg.launch_template is not None or bool(asg.LaunchConfigurationName)


def _with_launch_facts(
    region: str,
    asg: AutoScalingGroup,
    found: LaunchFacts | str | None,
    resolved: dict[str, str] | None = None,
) -> AutoScalingGroup:
    """The group with what was read (a problem when EC2 says it does not exist; nothing when unread) and
    the version numbers its launch templates stand for now (:attr:`AutoScalingGroup.ResolvedLaunchTemplates`)."""
    if resolved:
        asg = asg.model_copy(update={"ResolvedLaunchTemplates": resolved})
    if found is None:
        return asg
    if isinstance(found, str):
        log.warning("%s/%s: %s", region, asg.AutoScalingGroupName, found)
        return asg.model_copy(update={"LaunchSettingsProblem": found})
    # the type it launches now, also for a group whose running instances have another (launched before
    # the template changed): resolve_instance_type takes it before theirs
    update: dict[str, Any] = {"LaunchInstanceType": found.instance_type} if found.instance_type else {}
    if found.efa:  # the EFA interfaces its nodes have: vpc.amazonaws.com/efa of a node at zero
        update["LaunchEfaInterfaces"] = found.efa
    if asg.MixedInstancesPolicy is None:
        update["LaunchMarketType"] = found.market
    return asg.model_copy(update=update) if update else asg


def _template_problem(asg: AutoScalingGroup, version: str, why: str) -> str:
    spec = asg.LaunchTemplate
    if spec is None and asg.MixedInstancesPolicy and asg.MixedInstancesPolicy.LaunchTemplate:
        spec = asg.MixedInstancesPolicy.LaunchTemplate.LaunchTemplateSpecification
    label = (spec.LaunchTemplateName or spec.LaunchTemplateId) if spec is not None else None
    return f"LaunchTemplate: {label} ({version}) not found ({why}){_UNREAD}"


class _Absent(Exception):
    """EC2 answered that what a call names does not exist (a code of :data:`TEMPLATE_NOT_FOUND`)."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


def _asked(what: str, call: Callable[..., Any], kwargs: Mapping[str, Any]) -> Any:
    """``call(**kwargs)``: EC2 saying what it names does not exist raised as :class:`_Absent`, every
    other failure as one of ours."""
    try:
        return call(**kwargs)
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in TEMPLATE_NOT_FOUND:
            raise _Absent(code) from exc
        raise map_aws_error(exc, what) from exc
    except (BotoCoreError, ResponseParserError) as exc:
        raise map_aws_error(exc, what) from exc


def _pages(what: str, call: Callable[..., Any], key: str, **kwargs: Any) -> list[dict[str, Any]]:
    """Every page's ``key`` items of an EC2 Describe call (``NextToken``)."""
    out: list[dict[str, Any]] = []
    ask = dict(kwargs)
    while True:
        page = _asked(what, call, ask)
        out.extend(page.get(key, []))
        if not page.get("NextToken"):
            return out
        ask["NextToken"] = page["NextToken"]


def _each_answered(
    ask: Callable[[list[K]], Mapping[K, V]],
    keys: Sequence[K],
    absent: str,
    *,
    again: bool = True,
    missing: dict[K, str] | None = None,
) -> tuple[dict[K, V], dict[K, str]]:
    """What ``ask`` answers for ``keys`` in as few calls as EC2 allows, and, for each key that does not
    exist, why (EC2's code, else ``absent``). EC2 fails a call whole when one thing it names does not
    exist, without saying which: the keys are then asked one by one. With ``again``, a key left out of an
    answer is asked again with the others left out (an answer cut short without a ``NextToken``), and one
    no call answers does not exist; without (a filter, which leaves out what matches nothing), a key left
    out does not exist. ``missing``, when given, is filled as keys are found not to exist, so a caller
    keeps what it learnt though a later call fails."""
    found: dict[K, V] = {}
    missing = {} if missing is None else missing
    pending = list(keys)
    while pending:
        try:
            answer = ask(pending)
        except _Absent as exc:
            if len(pending) == 1:
                missing[pending[0]] = exc.code
                break
            for key in pending:
                found.update(_each_answered(ask, [key], absent, again=again, missing=missing)[0])
            break
        found.update((k, v) for k, v in answer.items() if k in pending)
        rest = [k for k in pending if k not in found]
        if len(rest) == len(pending) or not again:
            missing.update(dict.fromkeys(rest, absent))
            break
        pending = rest
    return found, missing


def _batches(items: Sequence[T], size: int) -> list[list[T]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def _naming(items: Sequence[str]) -> str:
    return ", ".join(items) if len(items) <= 3 else f"{len(items)} of them"


#: a launch template as a group names it: ("LaunchTemplateId", id) or ("LaunchTemplateName", name)
_TemplateRef = tuple[str, str]


def _reference(spec: Mapping[str, str]) -> _TemplateRef:
    if spec.get("LaunchTemplateId"):
        return ("LaunchTemplateId", spec["LaunchTemplateId"])
    return ("LaunchTemplateName", spec["LaunchTemplateName"])


class _LaunchSettingsReader:
    """One region's launch settings for one observation (see :meth:`AwsAdapter._with_launch_settings`):
    each group's facts, or a problem naming what EC2 says does not exist."""

    def __init__(self, clients: AwsClients, cache: LaunchCache, region: str) -> None:
        self._clients = clients
        self._cache = cache
        self._region = region
        # each template DescribeLaunchTemplates answered for in this observation (or why it does not
        # exist), so that no template is asked for twice
        self._templates: dict[_TemplateRef, LaunchTemplateInfo | str] = {}

    def read(self, groups: Sequence[AutoScalingGroup]) -> dict[str, LaunchFacts | str]:
        templated = [g for g in groups if g.launch_template is not None]
        configured = [g for g in groups if g.launch_template is None and g.LaunchConfigurationName]
        found = self._from_templates(templated) if templated else {}
        if configured:
            found.update(self._from_configurations(configured))
        return found

    def resolved(self, groups: Sequence[AutoScalingGroup]) -> dict[str, dict[str, str]]:
        """For each group, the version numbers the launch templates it names (its own and its overrides')
        stand for now, by :func:`template_key`, as ``lt-0abc@7`` (what its next instance of a type launches
        from: spillway.model.nodecache). Asked before :meth:`read`, so that the templates of every group
        (a mixed group's too, whose settings are not read) go in the one DescribeLaunchTemplates, which
        :meth:`read` then does not repeat. A template that does not exist is left out, as is every
        template of a call that fails otherwise (logged, and asked again by :meth:`read` for the groups
        whose settings it reads, where a failure fails the region as before): only the memory of a
        group's template from its nodes uses this, and without it that memory holds by instance type and
        age, as before."""
        specs = {g.AutoScalingGroupName: g.named_templates() for g in groups}
        try:
            templates = self._resolve({_reference(spec) for named in specs.values() for spec in named})
        except AwsError as exc:
            log.warning("%s: launch template versions not resolved: %s", self._region, exc)
            templates = dict(self._templates)
        out: dict[str, dict[str, str]] = {}
        for group, named in specs.items():
            versions = {}
            for spec in named:
                template = templates.get(_reference(spec))
                if not isinstance(template, LaunchTemplateInfo):
                    continue  # gone (the group's problems say so when its settings are read)
                number = template.version_number(spec["Version"])
                if number is not None:
                    versions[template_key(spec)] = launched_from(template.LaunchTemplateId, str(number))
            if versions:
                out[group] = versions
        return out

    # templates

    def _from_templates(self, groups: Sequence[AutoScalingGroup]) -> dict[str, LaunchFacts | str]:
        specs = {g.AutoScalingGroupName: dict(g.launch_template or {}) for g in groups}
        templates = self._resolve({_reference(spec) for spec in specs.values()})
        out: dict[str, LaunchFacts | str] = {}
        numbered: dict[str, tuple[str, int]] = {}
        for group in groups:
            name, version = group.AutoScalingGroupName, specs[group.AutoScalingGroupName]["Version"]
            template = templates[_reference(specs[name])]
            number = template.version_number(version) if isinstance(template, LaunchTemplateInfo) else None
            if isinstance(template, str):
                out[name] = _template_problem(group, version, template)
            elif number is None:
                out[name] = _template_problem(group, version, "no such version")
            else:
                numbered[name] = (template.LaunchTemplateId, number)
        facts = self._versions(set(numbered.values()))
        for group in groups:
            key = numbered.get(group.AutoScalingGroupName)
            got = facts.get(key) if key is not None else None
            if isinstance(got, str):
                got = _template_problem(group, specs[group.AutoScalingGroupName]["Version"], got)
            if got is not None:
                out[group.AutoScalingGroupName] = got
        return out

    def _resolve(self, refs: set[_TemplateRef]) -> dict[_TemplateRef, LaunchTemplateInfo | str]:
        """Each template as DescribeLaunchTemplates gives it now, or EC2's reason it does not exist (asked
        once per observation)."""
        ids = sorted(v for k, v in refs - self._templates.keys() if k == "LaunchTemplateId")
        names = sorted(v for k, v in refs - self._templates.keys() if k == "LaunchTemplateName")
        if ids:
            self._templates.update({("LaunchTemplateId", i): t for i, t in self._resolve_ids(ids).items()})
        if names:
            self._templates.update(
                {("LaunchTemplateName", n): t for n, t in self._resolve_names(names).items()}
            )
        return {ref: self._templates[ref] for ref in refs}

    def _resolve_ids(self, ids: list[str]) -> dict[str, LaunchTemplateInfo | str]:
        """By id, in batches; an id EC2 said last time does not exist is asked alone, so that it cannot
        fail the batch of the others (EC2 fails a call naming one whole)."""
        suspects = [i for i in ids if self._cache.gone(self._region, i)]
        batches = _batches([i for i in ids if i not in suspects], LAUNCH_TEMPLATES_BATCH)
        out: dict[str, LaunchTemplateInfo | str] = {}
        for chunk in batches + [[i] for i in suspects]:
            missing: dict[str, str] = {}
            try:
                found, _ = _each_answered(
                    self._templates_by_id, chunk, "InvalidLaunchTemplateId.NotFound", missing=missing
                )
            finally:  # what EC2 said is gone is kept though a later lone call of the split failed
                for template_id in missing:
                    self._cache.mark_gone(self._region, template_id, True)
            for template_id in chunk:
                self._cache.mark_gone(self._region, template_id, template_id in missing)
                out[template_id] = found.get(template_id) or missing[template_id]
        return out

    def _resolve_names(self, names: list[str]) -> dict[str, LaunchTemplateInfo | str]:
        """By name, as one filter's values: a name that matches nothing is left out, not an error."""
        out: dict[str, LaunchTemplateInfo | str] = {}
        for chunk in _batches(names, LAUNCH_TEMPLATES_BATCH):
            found, missing = _each_answered(
                self._templates_by_name, chunk, "InvalidLaunchTemplateName.NotFoundException", again=False
            )
            out.update({n: found.get(n) or missing[n] for n in chunk})
        return out

    def _templates_by_id(self, ids: list[str]) -> dict[str, LaunchTemplateInfo]:
        what = f"DescribeLaunchTemplates({self._region}, {_naming(ids)})"
        ec2 = self._clients.ec2(self._region)
        raw = _pages(what, ec2.describe_launch_templates, "LaunchTemplates", LaunchTemplateIds=ids)
        return {
            t.LaunchTemplateId: t
            for t in _call(what, lambda: [LaunchTemplateInfo.model_validate(r) for r in raw])
        }

    def _templates_by_name(self, names: list[str]) -> dict[str, LaunchTemplateInfo]:
        what = f"DescribeLaunchTemplates({self._region}, {_naming(names)})"
        ec2 = self._clients.ec2(self._region)
        raw = _pages(
            what,
            ec2.describe_launch_templates,
            "LaunchTemplates",
            Filters=[{"Name": "launch-template-name", "Values": names}],
            MaxResults=200,
        )
        templates = _call(what, lambda: [LaunchTemplateInfo.model_validate(r) for r in raw])
        return {str(t.LaunchTemplateName): t for t in templates if t.LaunchTemplateName in names}

    def _versions(self, keys: set[tuple[str, int]]) -> dict[tuple[str, int], LaunchFacts | str]:
        """What each (template id, version number) says: from the cache, else one
        DescribeLaunchTemplateVersions per template for its versions not known yet (kept afterwards)."""
        out: dict[tuple[str, int], LaunchFacts | str] = {}
        unknown: dict[str, list[int]] = {}
        due: dict[str, list[int]] = {}
        for template_id, number in sorted(keys):
            key = version_key(self._region, template_id, number)
            known = self._cache.get(key)
            if known is None:
                unknown.setdefault(template_id, []).append(number)
                continue
            out[(template_id, number)] = known
            if self._cache.due(key):
                due.setdefault(template_id, []).append(number)
        for template_id, numbers in due.items():
            out.update(self._recheck(template_id, numbers))
        for template_id, numbers in unknown.items():
            for chunk in _batches(numbers, LAUNCH_VERSIONS_BATCH):
                found, missing = _each_answered(
                    functools.partial(self._versions_of, template_id), chunk, "no such version"
                )
                for number, facts in found.items():
                    self._cache.put(version_key(self._region, template_id, number), facts)
                    out[(template_id, number)] = facts
                out.update({(template_id, number): why for number, why in missing.items()})
        return out

    def _recheck(self, template_id: str, numbers: list[int]) -> dict[tuple[str, int], str]:
        """Ask again whether kept versions still exist (:meth:`LaunchCache.due`): one deleted since
        (EC2: ``InvalidLaunchTemplateId.VersionNotFound``, EC2 API Reference, error codes) is dropped
        from the cache and its group named as for any missing version; the others are kept as read now.
        A re-check that fails otherwise (throttled, refused) fails no read, as what a version says cannot
        have changed, and is pushed back a whole period (:meth:`LaunchCache.postpone`): kept due, it was
        sent again at every observation (every 20 s) into a throttled bucket for as long as EC2
        throttled."""
        missing: dict[int, str] = {}
        try:
            found, _ = _each_answered(
                functools.partial(self._versions_of, template_id), numbers, "no such version", missing=missing
            )
        except AwsError:  # throttled, unavailable, refused: nothing learnt
            found = {}
        for number, facts in found.items():
            self._cache.put(version_key(self._region, template_id, number), facts)
        for number in missing:
            self._cache.forget(version_key(self._region, template_id, number))
        for number in set(numbers) - set(found) - set(missing):
            self._cache.postpone(version_key(self._region, template_id, number))
        return {(template_id, number): why for number, why in missing.items()}

    def _versions_of(self, template_id: str, numbers: list[int]) -> dict[int, LaunchFacts]:
        what = f"DescribeLaunchTemplateVersions({self._region}, {template_id})"
        ec2 = self._clients.ec2(self._region)
        raw = _pages(
            what,
            ec2.describe_launch_template_versions,
            "LaunchTemplateVersions",
            LaunchTemplateId=template_id,
            Versions=[str(n) for n in numbers],
        )
        versions = _call(what, lambda: [LaunchTemplateVersionInfo.model_validate(r) for r in raw])
        return {
            v.VersionNumber: LaunchFacts(v.instance_type, _market(v.spot), v.efa_interfaces)
            for v in versions
            if v.LaunchTemplateId == template_id
        }

    # launch configurations

    def _from_configurations(self, groups: Sequence[AutoScalingGroup]) -> dict[str, LaunchFacts | str]:
        names = sorted({str(g.LaunchConfigurationName) for g in groups})
        facts: dict[str, LaunchFacts] = {}
        for name in names:
            known = self._cache.get(config_key(self._region, name))
            if known is not None:
                facts[name] = known
        for chunk in _batches([n for n in names if n not in facts], LAUNCH_CONFIGURATIONS_BATCH):
            for name, read in self._configurations(chunk).items():
                self._cache.put(config_key(self._region, name), read)
                facts[name] = read
        return {
            g.AutoScalingGroupName: facts.get(str(g.LaunchConfigurationName))
            or f"LaunchConfigurationName: {g.LaunchConfigurationName} not found{_UNREAD}"
            for g in groups
        }

    def _configurations(self, names: list[str]) -> dict[str, LaunchFacts]:
        """DescribeLaunchConfigurations for ``names`` (paginated); a name that does not exist is left out
        of the answer."""
        auto = self._clients.autoscaling(self._region)

        def fetch() -> dict[str, LaunchFacts]:
            out: dict[str, LaunchFacts] = {}
            ask: dict[str, Any] = {"LaunchConfigurationNames": names}
            while True:
                page = auto.describe_launch_configurations(**ask)
                for config in page.get("LaunchConfigurations", []):
                    itype = str(config["InstanceType"]) if config.get("InstanceType") else None
                    out[str(config["LaunchConfigurationName"])] = LaunchFacts(
                        itype, _market(bool(config.get("SpotPrice")))
                    )
                if not page.get("NextToken"):
                    return out
                ask["NextToken"] = page["NextToken"]

        return _call(f"DescribeLaunchConfigurations({self._region}, {_naming(names)})", fetch)


def _hook(doc: Mapping[str, Any]) -> LifecycleHook:
    return lifecycle_hook(doc)


# the StatusCode of an activity that has ended (the others are in progress)
ENDED_ACTIVITY = frozenset({"Successful", "Failed", "Cancelled"})
# The Description of the scaling activity DetachInstances records in the group for each instance it
# detaches (Amazon EC2 Auto Scaling API Reference, DetachInstances: "Detaching EC2 instance: i-...").
DETACHING = "Detaching EC2 instance: {instance}"
UNDONE_ACTIVITY = frozenset({"Failed", "Cancelled"})  # a detach that did not happen: the instance stayed
DETACH_PAGES = 10  # detach_recorded reads at most this many pages of 100 activities


def _scaling_activities(
    client: Any, group: str, page_size: int, max_pages: int | None = None
) -> Iterator[ScalingActivity]:
    """The group's scaling activities as DescribeScalingActivities lists them (those in progress, then
    the others newest first), page after page (``NextToken``) while the caller reads on, at most
    ``max_pages`` pages (None: every page)."""
    token: str | None = None
    pages = 0
    while max_pages is None or pages < max_pages:
        kwargs: dict[str, Any] = {"AutoScalingGroupName": group, "MaxRecords": page_size}
        if token:
            kwargs["NextToken"] = token
        page = client.describe_scaling_activities(**kwargs)
        pages += 1
        yield from (ScalingActivity.model_validate(raw) for raw in page.get("Activities", []))
        token = page.get("NextToken")
        if not token:
            return
