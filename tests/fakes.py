"""One recording fake per port of :mod:`spillway.ports` (Karpenter's shape): each keeps the contract of
the real adapter over plain data, records every call in ``calls`` and can be told to fail
(``fake.fail("get_node", KubeUnavailable("..."))``). The unit and integration tests use these and no
other stand-ins for the world.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from spillway import cutoff
from spillway.adapters.state_store import Backoff, merge_backoffs
from spillway.errors import (
    AsgLimitExceeded,
    AsgNotFound,
    AwsError,
    AwsThrottled,
    AwsUnavailable,
    InstanceNotFound,
    KubeConflict,
    LifecycleActionNotFound,
    NodeNotFound,
    ObjectNotFound,
    ObjectReplaced,
    PodNotFound,
    SnapshotNotFound,
    StateConflict,
)
from spillway.local import objects
from spillway.local.kubeapi.selectors import labels_match, parse_label_selector
from spillway.model.act import (
    ExecutionRequest,
    PlanRecord,
    SaveResult,
    SnapshotMeta,
    SnapshotRef,
    StartedExecution,
    StoredState,
    format_key,
)
from spillway.model.aws import AutoScalingGroup, CreateFleetResult, FleetRequest, ScalingActivity
from spillway.model.cluster import cordon_begins, cordon_digest, cordoned_for
from spillway.model.drain import LifecycleHook, Placement, ScheduledEvent, scheduled_event
from spillway.model.fleet import SWEPT_STATES, TAG_ASG, TAG_ATTEMPT, TAG_CLUSTER, TAG_GANG, FleetInstance
from spillway.model.k8s import (
    CANDIDATE_TAINT,
    CORDONED_BY_SPILLWAY,
    DRAINING_TAINT,
    EXCLUDE_FROM_LB_LABEL,
    EXCLUDE_FROM_LB_VALUE,
    LB_EXCLUDED_BY_SPILLWAY,
    ConfigMap,
    CSINode,
    DaemonSet,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    SharedObject,
    StorageClass,
    VolumeObject,
    parse_kube_list,
)
from spillway.model.nodegroup import NodeGroup
from spillway.model.priorities import CONFIGMAP_NAME, CONFIGMAP_NAMESPACE
from spillway.model.snapshot import Snapshot
from spillway.model.state import (
    BACKOFFS_PARTITION,
    DRAIN_ENDED_PREFIX,
    DRAINS_PARTITION,
    OWNER_PREFIX,
    SCALE_DOWN_FAILED_PREFIX,
    UNSETTLED_PREFIX,
    State,
    merge_ended_drains,
    merge_scale_down_failures,
    merge_unsettled_raises,
)
from spillway.ports import BeforeCall


@dataclass
class _Failure:
    error: Exception
    times: int | None  # None: every call
    after: int = 0  # for iter_*: items served before it fails


class Recorder:
    """Every call as ``(method, args)``; ``fail(method, error)`` makes that method raise."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.served: dict[str, int] = {}  # items yielded by each iter_* method
        self._failures: dict[str, _Failure] = {}

    def fail(self, method: str, error: Exception, *, times: int | None = None, after: int = 0) -> None:
        if not callable(getattr(self, method, None)):
            raise AttributeError(f"{type(self).__name__} has no method {method!r}")
        self._failures[method] = _Failure(error, times, after)

    def heal(self) -> None:
        self._failures.clear()

    def _call(self, method: str, *args: Any) -> None:
        self.calls.append((method, args))
        failure = self._failures.get(method)
        if failure is None or failure.after:
            return
        self._spend(method, failure)

    def _spend(self, method: str, failure: _Failure) -> None:
        if failure.times is not None:
            failure.times -= 1
            if failure.times <= 0:
                del self._failures[method]
        raise failure.error

    def _iter(self, method: str, items: Sequence[Any], parse: Callable[[Any], Any]) -> Iterator[Any]:
        self._call(method)
        failure = self._failures.get(method)
        for served, item in enumerate(items):
            if failure is not None and served >= failure.after:
                self._spend(method, failure)
            self.served[method] = served + 1
            yield parse(item)

    def called(self, method: str) -> list[tuple[Any, ...]]:
        return [args for name, args in self.calls if name == method]


# --- the cluster -------------------------------------------------------------------------------


def _release_lb_exclusion(obj: dict[str, Any]) -> bool:
    """As the real adapter: the load balancer exclusion label goes only with Spillway's record of it, and
    only with the value Spillway set."""
    meta = obj["metadata"]
    if LB_EXCLUDED_BY_SPILLWAY not in meta.get("annotations", {}):
        return False
    meta["annotations"].pop(LB_EXCLUDED_BY_SPILLWAY)
    if meta.get("labels", {}).get(EXCLUDE_FROM_LB_LABEL) == EXCLUDE_FROM_LB_VALUE:  # else an operator's since
        meta["labels"].pop(EXCLUDE_FROM_LB_LABEL)
    return True


class FakeCluster(Recorder):
    """The Kubernetes API over real-shaped JSON objects (as ``spillway.local.objects`` builds them)."""

    def __init__(
        self,
        nodes: Sequence[dict[str, Any]] = (),
        pods: Sequence[dict[str, Any]] = (),
        pdbs: Sequence[dict[str, Any]] = (),
        custom: Sequence[dict[str, Any]] = (),
    ) -> None:
        super().__init__()
        self.nodes: dict[str, dict[str, Any]] = {n["metadata"]["name"]: n for n in nodes}
        self.pods: list[dict[str, Any]] = list(pods)
        self.pdbs: list[dict[str, Any]] = list(pdbs)
        #: every other object (namespaces, custom resources, pod templates), by its own apiVersion/kind
        self.custom: list[dict[str, Any]] = list(custom)
        #: CRDs "not installed": ``(group, plural)`` whose list answers [] and status patch not found
        self.not_installed: set[tuple[str, str]] = set()
        #: kinds with a scale subresource, as their CRDs declare it: (group, kind) -> (statusReplicasPath,
        #: labelSelectorPath), dotted
        self.scale_paths: dict[tuple[str, str], tuple[str, str]] = {}
        self.events: list[str] = []
        self.posted: list[dict[str, Any]] = []  # every Event as the API would store its fields
        #: the time a cordon's annotation starts with, as the real adapter's clock gives it
        self.clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    def iter_nodes(self) -> Iterator[Node]:
        return self._iter("iter_nodes", list(self.nodes.values()), Node.model_validate)

    def iter_pods(self) -> Iterator[Pod]:
        return self._iter("iter_pods", self.pods, Pod.model_validate)

    def iter_pdbs(self) -> Iterator[PodDisruptionBudget]:
        return self._iter("iter_pdbs", self.pdbs, PodDisruptionBudget.model_validate)

    def iter_shared_objects(self, served: set[str] | None = None) -> Iterator[SharedObject]:
        from spillway.adapters.kube import SHARED_KINDS

        if served is not None:  # every kind is served but those "not installed"
            served.update(k.qualified for k in SHARED_KINDS if (k.group, k.plural) not in self.not_installed)
        shared = [o for o in self.custom if (_group(o), _plural(o)) not in self.not_installed]
        # read by their own calls: volumes, the expander's ConfigMap, ProvisioningRequests (list_custom),
        # ResourceQuotas (list_resource_quotas), DaemonSets (iter_daemonsets)
        shared = [
            o for o in shared
            if o.get("kind") not in (*VOLUME_KINDS, "ConfigMap", "ProvisioningRequest", "ResourceQuota", "DaemonSet")
            and (_group(o), o.get("kind")) not in self.scale_paths  # read through their scale subresource
        ]  # fmt: skip
        return self._iter("iter_shared_objects", shared, _shared_object)

    def iter_volume_objects(self) -> Iterator[VolumeObject]:
        volumes = [o for o in self.custom if o.get("kind") in VOLUME_KINDS]
        return self._iter("iter_volume_objects", volumes, _volume_object)

    def iter_daemonsets(self) -> Iterator[DaemonSet]:
        daemonsets = [o for o in self.custom if o.get("kind") == "DaemonSet"]
        return self._iter("iter_daemonsets", daemonsets, DaemonSet.model_validate)

    def priority_expander(self) -> ConfigMap | None:
        self._call("priority_expander")
        for obj in self.custom:
            meta = obj.get("metadata", {})
            if obj.get("kind") == "ConfigMap" and (meta.get("namespace"), meta.get("name")) == (
                CONFIGMAP_NAMESPACE,
                CONFIGMAP_NAME,
            ):
                return ConfigMap.model_validate(obj)
        return None

    def list_custom(
        self,
        group: str,
        version: str,
        plural: str,
        namespace: str | None = None,
        *,
        served: set[str] | None = None,
    ) -> list[dict[str, Any]]:
        self._call("list_custom", group, version, plural, namespace)
        if (group, plural) in self.not_installed:
            return []
        if served is not None:
            served.add(version)
        return [
            o for o in self.custom
            if _group(o) == group and _plural(o) == plural
            and (namespace is None or o["metadata"].get("namespace") == namespace)
        ]  # fmt: skip

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
    ) -> dict[str, Any]:
        """A merge patch of ``status`` (``None`` removes a key); with ``uid``, the status replaced whole,
        ``ObjectReplaced`` when the stored object has another uid (as KubeClient's JSON patch testing
        it); 409 when the stored object carries ``metadata.annotations["fake/conflict"]``."""
        self._call("patch_custom_status", group, version, plural, namespace, name, status)
        for obj in self.list_custom(group, version, plural, namespace):
            if obj["metadata"]["name"] == name:
                self.calls.pop()  # the lookup above is not the caller's
                if "fake/conflict" in (obj["metadata"].get("annotations") or {}):
                    raise KubeConflict(f"patch status of {plural}.{group} {name}: conflict")
                if uid and obj["metadata"].get("uid") != uid:
                    raise ObjectReplaced(f"patch status of {plural}.{group} {name}: another object")
                obj["status"] = dict(status) if uid else _merge(obj.get("status") or {}, status)
                return obj
        self.calls.pop()
        raise ObjectNotFound(f"patch status of {plural}.{group} {name}: not found")

    def delete_custom(
        self, group: str, version: str, plural: str, namespace: str | None, name: str, *, uid: str = ""
    ) -> None:
        """Remove the object (``ObjectReplaced`` when ``uid`` names another one, as the API's 409)."""
        self._call("delete_custom", group, version, plural, namespace, name, uid)
        for obj in self.list_custom(group, version, plural, namespace):
            if obj["metadata"]["name"] == name:
                self.calls.pop()  # the lookup above is not the caller's
                if uid and obj["metadata"].get("uid") != uid:
                    raise ObjectReplaced(f"delete {plural}.{group} {name}: another object")
                self.custom.remove(obj)
                return
        self.calls.pop()
        raise ObjectNotFound(f"delete {plural}.{group} {name}: not found")

    def list_pod_templates(self, namespace: str | None = None) -> list[dict[str, Any]]:
        self._call("list_pod_templates", namespace)
        return [
            o for o in self.custom
            if o.get("kind") == "PodTemplate" and namespace in (None, o["metadata"].get("namespace"))
        ]  # fmt: skip

    def list_resource_quotas(self, namespace: str) -> list[dict[str, Any]]:
        self._call("list_resource_quotas", namespace)
        return [
            o for o in self.custom
            if o.get("kind") == "ResourceQuota" and o["metadata"].get("namespace") == namespace
        ]  # fmt: skip

    def list_replication_controllers(self, namespace: str | None = None) -> list[dict[str, Any]]:
        self._call("list_replication_controllers", namespace)
        return [
            o for o in self.custom
            if o.get("kind") == "ReplicationController" and namespace in (None, o["metadata"].get("namespace"))
        ]  # fmt: skip

    def get_scale(self, api_group: str, kind: str, namespace: str, name: str) -> dict[str, Any]:
        """The Scale as the API server makes it of a custom resource (a missing path reads 0 or "")."""
        self._call("get_scale", api_group, kind, namespace, name)
        paths = self.scale_paths.get((api_group, kind))
        if paths is None:
            raise ObjectNotFound(f"{kind}.{api_group}: no scale subresource")
        for obj in self.custom:
            meta = obj["metadata"]
            if (_group(obj), obj.get("kind"), meta.get("namespace"), meta["name"]) == (
                api_group,
                kind,
                namespace,
                name,
            ):
                replicas, selector = (_dig(obj, path) for path in paths)
                return {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": name, "namespace": namespace},
                        "status": {"replicas": replicas or 0, "selector": selector or ""}}  # fmt: skip
        raise ObjectNotFound(f"get scale of {kind}.{api_group} {namespace}/{name}: not found")

    def pods_selected(self, namespace: str, label_selector: str) -> list[Pod]:
        self._call("pods_selected", namespace, label_selector)
        query = parse_label_selector(label_selector)
        return [
            Pod.model_validate(p) for p in self.pods
            if p["metadata"].get("namespace") == namespace and labels_match(query, p["metadata"].get("labels"))
        ]  # fmt: skip

    def get_node(self, name: str) -> Node:
        self._call("get_node", name)
        return Node.model_validate(self._node(name))

    def pods_on_node(self, node: str) -> list[Pod]:
        self._call("pods_on_node", node)
        return [Pod.model_validate(p) for p in self.pods if p.get("spec", {}).get("nodeName") == node]

    def read_pod(self, namespace: str, name: str) -> Pod | None:
        self._call("read_pod", namespace, name)
        found = [
            p
            for p in self.pods
            if (p["metadata"].get("namespace"), p["metadata"]["name"]) == (namespace, name)
        ]
        return Pod.model_validate(found[0]) if found else None

    def cordon(
        self,
        node: str,
        reason: str = "",
        *,
        only_if_schedulable: bool = False,
        take_over_only: str | None = None,
        leave_containing: str | None = None,
    ) -> bool:
        self._call("cordon", node, reason)
        obj = self._node(node)
        annotations = obj["metadata"].setdefault("annotations", {})
        if obj["spec"].get("unschedulable") and only_if_schedulable:
            return cordoned_for(annotations.get(CORDONED_BY_SPILLWAY), reason)  # its own, or left
        if obj["spec"].get("unschedulable") and CORDONED_BY_SPILLWAY not in annotations:
            return False  # somebody else's cordon
        if obj["spec"].get("unschedulable") and cordoned_for(annotations[CORDONED_BY_SPILLWAY], reason):
            return True  # as the real one: a retry keeps the first value, time included
        if (
            obj["spec"].get("unschedulable")
            and take_over_only is not None
            and not cordon_begins(annotations[CORDONED_BY_SPILLWAY], take_over_only)
        ):
            return False  # another kind of Spillway's cordon (a drain's): left as it is
        if (
            obj["spec"].get("unschedulable")
            and leave_containing is not None
            and leave_containing in annotations[CORDONED_BY_SPILLWAY].split(" ", 1)[-1]
        ):
            return False  # the same EC2 event's forced drain holds it: left as it is
        obj["spec"]["unschedulable"] = True
        # as the real one: the time, then the latest drain's words
        stamp = self.clock().astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
        annotations[CORDONED_BY_SPILLWAY] = f"{stamp} {reason}".strip()[:256]
        return True

    def uncordon(self, node: str, *, if_reason: str | None = None, if_digest: str | None = None) -> bool:
        self._call("uncordon", node)
        obj = self._node(node)
        annotations = obj["metadata"].setdefault("annotations", {})
        if CORDONED_BY_SPILLWAY not in annotations:
            return False
        if if_reason is not None and not cordoned_for(annotations[CORDONED_BY_SPILLWAY], if_reason):
            return False  # another of Spillway's cordons took the Node over
        if if_digest is not None and cordon_digest(annotations[CORDONED_BY_SPILLWAY]) != if_digest:
            return False  # not the cordon the plan saw
        annotations.pop(CORDONED_BY_SPILLWAY)
        obj["spec"].pop("unschedulable", None)
        # as the real one: the draining taint and the exclusion label Spillway added go in the same patch
        obj["spec"]["taints"] = [t for t in obj["spec"].get("taints", []) if t["key"] != DRAINING_TAINT]
        _release_lb_exclusion(obj)
        return True

    def hand_over(self, node: str, *, if_reason: str) -> bool:
        self._call("hand_over", node)
        obj = self._node(node)
        annotations = obj["metadata"].setdefault("annotations", {})
        ours = annotations.get(CORDONED_BY_SPILLWAY)
        if ours is None or not cordoned_for(ours, if_reason) or not obj["spec"].get("unschedulable"):
            return False
        annotations.pop(CORDONED_BY_SPILLWAY)
        obj["spec"]["taints"] = [t for t in obj["spec"].get("taints", []) if t["key"] != DRAINING_TAINT]
        _release_lb_exclusion(obj)
        return True

    def add_draining_taint(self, node: str, *, exclude_from_load_balancers: bool = False) -> bool:
        self._call("add_draining_taint", node, exclude_from_load_balancers)
        obj = self._node(node)
        if exclude_from_load_balancers:  # as the real one: only a label not there yet, with its record
            meta = obj["metadata"]
            if EXCLUDE_FROM_LB_LABEL not in meta.get("labels", {}):
                meta.setdefault("labels", {})[EXCLUDE_FROM_LB_LABEL] = EXCLUDE_FROM_LB_VALUE
                ours = meta.get("annotations", {}).get(CORDONED_BY_SPILLWAY)
                meta.setdefault("annotations", {})[LB_EXCLUDED_BY_SPILLWAY] = ours or "drain"
        taints = obj["spec"].setdefault("taints", [])
        if any(t["key"] == DRAINING_TAINT for t in taints):
            return False
        taints.append({"key": DRAINING_TAINT, "effect": "NoSchedule"})
        return True

    def remove_draining_taint(self, node: str) -> bool:
        self._call("remove_draining_taint", node)
        if CORDONED_BY_SPILLWAY in self._node(node)["metadata"].get("annotations", {}):
            return False  # the taint of the cordon that holds the Node: its holder lifts both
        spec = self._node(node)["spec"]
        taints = spec.get("taints", [])
        spec["taints"] = [t for t in taints if t["key"] != DRAINING_TAINT]
        released = _release_lb_exclusion(self._node(node))
        return len(taints) != len(spec["taints"]) or released

    def set_candidate_taint(self, node: str, present: bool) -> bool:
        self._call("set_candidate_taint", node, present)
        spec = self._node(node)["spec"]
        taints = spec.get("taints", [])
        others = [t for t in taints if t["key"] != CANDIDATE_TAINT]
        spec["taints"] = (
            [*others, {"key": CANDIDATE_TAINT, "effect": "PreferNoSchedule"}] if present else others
        )
        return spec["taints"] != taints

    def evict(
        self, namespace: str, name: str, grace_period_seconds: int | None = None, *, uid: str = ""
    ) -> None:
        self._call("evict", namespace, name)
        kept = [
            p
            for p in self.pods
            if (p["metadata"].get("namespace"), p["metadata"]["name"]) != (namespace, name)
            or (uid and p["metadata"].get("uid") not in (None, uid))
        ]
        if len(kept) == len(self.pods):
            raise PodNotFound(f"{namespace}/{name}")
        self.pods = kept

    def delete_node(self, name: str) -> bool:
        self._call("delete_node", name)
        return self.nodes.pop(name, None) is not None

    def record_event(
        self, kind: str, name: str, namespace: str | None, reason: str, *args: Any, **kw: Any
    ) -> None:
        self._call("record_event", kind, name, reason)
        self.events.append(f"{reason} {name}")
        message = args[0] if args else kw.get("message", "")
        type_ = args[1] if len(args) > 1 else kw.get("type", "Normal")
        self.posted.append(
            {"kind": kind, "name": name, "namespace": namespace, "reason": reason, "message": message,
             "type": type_, "uid": kw.get("uid"), "api_version": kw.get("api_version", "v1")}
        )  # fmt: skip

    def label_node(self, name: str, labels: Mapping[str, str]) -> bool:
        self._call("label_node", name, dict(labels))
        current = self._node(name)["metadata"].setdefault("labels", {})
        if all(current.get(k) == v for k, v in labels.items()):
            return False
        current.update(labels)
        return True

    def _node(self, name: str) -> dict[str, Any]:
        if name not in self.nodes:
            raise NodeNotFound(f"get node {name}: not found")
        return self.nodes[name]


def _group(obj: dict[str, Any]) -> str:
    return str(obj.get("apiVersion", "")).rpartition("/")[0]


def _plural(obj: dict[str, Any]) -> str:
    return str(obj.get("kind", "")).lower() + "s"  # podgroups, workloads, capacityquotas, ...


# what AwsAdapter.describe_group_launching adds to DescribeAutoScalingGroups' answer (_with_launch_facts)
LAUNCH_FACTS = frozenset(
    {"LaunchInstanceType", "LaunchMarketType", "LaunchSettingsProblem", "ResolvedLaunchTemplates"}
)
VOLUME_KINDS = ("PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode")  # iter_volume_objects


def _volume_object(obj: dict[str, Any]) -> VolumeObject:
    kind = obj.get("kind")
    if kind == "PersistentVolumeClaim":
        return PersistentVolumeClaim.model_validate(obj)
    if kind == "StorageClass":
        return StorageClass.model_validate(obj)
    if kind == "CSINode":
        return CSINode.model_validate(obj)
    return PersistentVolume.model_validate(obj)


def _shared_object(obj: dict[str, Any]) -> SharedObject:
    parsed = parse_kube_list({"kind": "List", "items": [obj]}).others
    if not parsed:
        raise ValueError(f"not a shared-cluster object: {obj.get('apiVersion')} {obj.get('kind')}")
    return parsed[0]  # a batch Job as the adapter reads it (a List gives its Scalable too)


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    out = dict(target)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


# --- the cloud ---------------------------------------------------------------------------------


class FakeCloud(Recorder):
    """Auto Scaling groups (real-shaped JSON) in regions; writes change them as AWS would."""

    def __init__(self, regions: Sequence[str] = ("us-east-1", "us-west-2"), cluster: str = "prod") -> None:
        super().__init__()
        self._regions = tuple(regions)
        self.cluster = cluster
        self.groups: dict[tuple[str, str], dict[str, Any]] = {}
        self.activities: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.dns: dict[str, str] = {}  # instance id -> private DNS name
        self.node_groups_by_region: dict[str, list[NodeGroup]] = {}
        # EC2's view of instances launched by fleets: id -> {"region", "state", "tags"}.
        self.ec2: dict[str, dict[str, Any]] = {}
        self.fleet_capacity: int | None = None  # at most this many per fleet (None: all asked for)
        self.fleet_error = ("InsufficientInstanceCapacity", "We currently do not have sufficient capacity.")
        # a short fleet's Errors as EC2 lists them (CreateFleetError: per override, with its Lifecycle and
        # LaunchTemplateAndOverrides), instead of one fleet_error without an override per missing instance
        self.fleet_errors: list[dict[str, Any]] | None = None
        self.fleet_state = "running"  # the state fleet instances start in
        self.launch_time = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)  # fleet instances' LaunchTime
        # EC2's eventual consistency: the next this many DescribeInstances answers (instance_states)
        # show none of the instances fleets launched, asked for by id or by tag
        self.describe_lag = 0
        self.fleets: list[FleetRequest] = []
        # EC2 remembers a CreateFleet ClientToken: (region, token) -> the request and its answer
        self.fleet_tokens: dict[tuple[str, str], tuple[FleetRequest, CreateFleetResult]] = {}
        self.subnets: dict[str, str] = {}  # subnet id -> its Availability Zone
        self.zones: dict[str, dict[str, str]] = {}  # region -> zone name -> zone id (none unless set)
        self.hooks: dict[tuple[str, str], list[LifecycleHook]] = {}  # (region, group) -> its hooks
        # Terminate lifecycle actions waiting: instance id -> {hook name: action token}.
        self.waiting: dict[str, dict[str, str]] = {}
        self.completed: list[tuple[str, str, str, str]] = []  # (group, hook, instance id, result)
        self.heartbeats: list[tuple[str, str, str]] = []  # (group, hook, instance id)
        # EC2's scheduled events of an instance, as DescribeInstanceStatus lists them (InstanceStatusEvent:
        # Code, Description, NotBefore as a datetime...): instance id -> its events (none unless set)
        self.instance_events: dict[str, list[dict[str, Any]]] = {}

    @property
    def regions(self) -> tuple[str, ...]:
        return self._regions

    def add_group(
        self, name: str, instances: Sequence[str], *, region: str = "us-east-1", **kw: Any
    ) -> dict[str, Any]:
        kw.setdefault("cluster", self.cluster)
        kw.setdefault("desired", len(instances))
        raw = objects.asg(name, region=region, instances=list(instances), **kw)
        self.groups[(region, name)] = raw
        for iid in instances:
            self.dns.setdefault(iid, f"node-{iid}")
        return raw

    def node_groups_in(
        self, region: str, reserve: Mapping[str, int], now: datetime | None = None
    ) -> list[NodeGroup]:
        """As the adapter, whose every AWS call a read given up stops (spillway.cutoff): before the call
        and when its answer comes."""
        cutoff.check(f"node_groups_in({region})")
        self._call("node_groups_in", region)
        groups = list(self.node_groups_by_region.get(region, []))
        cutoff.check(f"the answer of node_groups_in({region})")
        return groups

    def node_groups(self, reserve: Mapping[str, int], now: datetime | None = None) -> list[NodeGroup]:
        self._call("node_groups")
        groups = [g for r in self._regions for g in self.node_groups_by_region.get(r, [])]
        return sorted(groups, key=lambda g: (g.region, g.name))

    def describe_group(self, region: str, group: str) -> AutoScalingGroup:
        """As the adapter: DescribeAutoScalingGroups alone, without what the group's launch template or
        configuration says (Spillway's Launch* fields: :meth:`describe_group_launching`)."""
        self._call("describe_group", region, group)
        raw = {k: v for k, v in self._group(region, group).items() if k not in LAUNCH_FACTS}
        return AutoScalingGroup.model_validate(raw)

    def describe_group_launching(self, region: str, group: str) -> AutoScalingGroup:
        """As describe_group: a group's launch facts (LaunchInstanceType, ...) are in its raw form."""
        self._call("describe_group_launching", region, group)
        return AutoScalingGroup.model_validate(self._group(region, group))

    def describe_activities(
        self, region: str, group: str, now: datetime | None = None
    ) -> list[ScalingActivity]:
        self._call("describe_activities", region, group)
        return [ScalingActivity.model_validate(a) for a in self.activities.get((region, group), [])]

    def detach_recorded(self, region: str, group: str, instance_id: str, since: datetime) -> bool:
        """As the adapter: an activity of the group since ``since`` detaching the instance, not undone."""
        self._call("detach_recorded", region, group, instance_id)
        wanted = f"Detaching EC2 instance: {instance_id}"
        return any(
            a.Description == wanted
            and a.StatusCode not in ("Failed", "Cancelled")
            and (a.StartTime if a.StartTime.tzinfo else a.StartTime.replace(tzinfo=UTC)) >= since
            for a in map(ScalingActivity.model_validate, self.activities.get((region, group), []))
        )

    def placement(self, region: str, instance_id: str) -> Placement | None:
        self._call("placement", region, instance_id)
        for (where, name), raw in self.groups.items():
            for instance in raw["Instances"]:
                if where == region and instance["InstanceId"] == instance_id:
                    return Placement(
                        instance_id,
                        name,
                        str(instance["LifecycleState"]),
                        zone=str(instance.get("AvailabilityZone") or ""),
                        instance_type=str(instance.get("InstanceType") or ""),
                    )
        return None

    def scheduled_events(self, region: str, instance_id: str) -> list[ScheduledEvent]:
        """As DescribeInstanceStatus: the instance's events in :attr:`instance_events`, over ones included."""
        self._call("scheduled_events", region, instance_id)
        return [scheduled_event(e) for e in self.instance_events.get(instance_id, [])]

    def private_dns_names(self, region: str, instance_ids: Sequence[str]) -> dict[str, str]:
        self._call("private_dns_names", region, tuple(instance_ids))
        return {i: self.dns[i] for i in instance_ids if i in self.dns}

    def set_desired_capacity(
        self, region: str, group: str, desired: int, before_call: BeforeCall | None = None
    ) -> int:
        """As the adapter: ``before_call`` before its read of the group and before SetDesiredCapacity."""
        if before_call is not None:
            before_call(f"DescribeAutoScalingGroups({region}, {group})")
            before_call(f"SetDesiredCapacity({region}, {group}, {desired})")
        self._call("set_desired_capacity", region, group, desired)
        raw = self._group(region, group)
        if not raw["MinSize"] <= desired <= raw["MaxSize"]:
            raise AsgLimitExceeded(f"{region}/{group}: desired capacity {desired} outside its limits")
        previous = int(raw["DesiredCapacity"])
        raw["DesiredCapacity"] = desired
        return previous

    def terminate_instance(self, region: str, instance_id: str, decrement: bool = True) -> ScalingActivity:
        self._call("terminate_instance", region, instance_id, decrement)
        placement = self.placement(region, instance_id)
        self.calls.pop()  # the lookup above is not the caller's
        if placement is None:
            raise InstanceNotFound(f"{region}/{instance_id}: no managed instance")
        raw = self._group(region, placement.group)
        live = placement.lifecycle_state in ("InService", "Pending")
        if decrement and live and raw["DesiredCapacity"] - 1 < raw["MinSize"]:
            raise AsgLimitExceeded(  # AWS's ValidationError, as the adapter maps it; nothing is done
                f"TerminateInstanceInAutoScalingGroup({region}, {instance_id}): Currently, desiredSize equals "
                f"minSize ({raw['MinSize']}). Terminating instance without replacement will violate group's "
                "min size constraint. Either set shouldDecrementDesiredCapacity flag to false or lower "
                "group's min size."
            )
        raw["DesiredCapacity"] -= 1 if decrement else 0
        if placement.lifecycle_state.startswith("Terminating"):
            return ScalingActivity.model_validate(self._termination(placement.group, instance_id))
        hooks = [h for h in self.hooks.get((region, placement.group), []) if h.terminating]
        if hooks:  # AWS: the instance waits in Terminating:Wait until every hook's action completes
            self.hold(
                region,
                instance_id,
                {h.name: f"00000000-0000-4000-8000-{len(self.waiting):012d}" for h in hooks},
            )
            return ScalingActivity.model_validate(self._termination(placement.group, instance_id))
        raw["Instances"] = [i for i in raw["Instances"] if i["InstanceId"] != instance_id]
        if instance_id in self.ec2:
            self.ec2[instance_id]["state"] = "shutting-down"
        return ScalingActivity.model_validate(self._termination(placement.group, instance_id))

    @staticmethod
    def _termination(group: str, instance_id: str) -> dict[str, Any]:
        return {
            "ActivityId": f"a-{instance_id}",
            "AutoScalingGroupName": group,
            "Description": f"Terminating EC2 instance: {instance_id}",
            "Cause": "terminated by Spillway",
            "StartTime": "2026-01-01T00:00:00Z",
            "StatusCode": "InProgress",
        }

    # terminate lifecycle hooks ---------------------------------------------------------------------

    def add_hook(
        self,
        group: str,
        name: str = "drain-hook",
        *,
        region: str = "us-east-1",
        heartbeat: int = 300,
        default_result: str = "ABANDON",
    ) -> LifecycleHook:
        hook = LifecycleHook(
            name, "autoscaling:EC2_INSTANCE_TERMINATING", heartbeat, 100 * heartbeat, default_result
        )
        self.hooks.setdefault((region, group), []).append(hook)
        return hook

    def hold(self, region: str, instance_id: str, tokens: Mapping[str, str]) -> None:
        """The group terminates ``instance_id`` and its hooks hold it in Terminating:Wait."""
        for raw in (g for (r, _), g in self.groups.items() if r == region):
            for instance in raw["Instances"]:
                if instance["InstanceId"] == instance_id:
                    instance["LifecycleState"] = "Terminating:Wait"
        self.waiting[instance_id] = dict(tokens)

    def describe_lifecycle_hooks(self, region: str, group: str) -> list[LifecycleHook]:
        self._call("describe_lifecycle_hooks", region, group)
        self._group(region, group)
        return list(self.hooks.get((region, group), []))

    def _action(self, group: str, hook: str, instance_id: str, token: str | None) -> None:
        waiting = self.waiting.get(instance_id, {})
        if hook not in waiting or (token is not None and waiting[hook] != token):
            raise LifecycleActionNotFound(
                f"No active Lifecycle Action found with instance ID {instance_id} ({group}, {hook})"
            )

    def complete_lifecycle_action(
        self,
        region: str,
        group: str,
        hook: str,
        instance_id: str,
        token: str | None = None,
        result: str = "CONTINUE",
    ) -> None:
        self._call("complete_lifecycle_action", region, group, hook, instance_id, token, result)
        self._action(group, hook, instance_id, token)
        self.completed.append((group, hook, instance_id, result))
        del self.waiting[instance_id][hook]
        if not self.waiting[instance_id]:  # every hook done: the instance terminates
            del self.waiting[instance_id]
            raw = self._group(region, group)
            raw["Instances"] = [i for i in raw["Instances"] if i["InstanceId"] != instance_id]

    def record_heartbeat(
        self, region: str, group: str, hook: str, instance_id: str, token: str | None = None
    ) -> None:
        self._call("record_heartbeat", region, group, hook, instance_id, token)
        self._action(group, hook, instance_id, token)
        self.heartbeats.append((group, hook, instance_id))

    def create_fleet_instant(self, region: str, request: FleetRequest) -> CreateFleetResult:
        """Launches ``count`` instances, or ``fleet_capacity`` of them with EC2's errors for the rest
        (what AWS does when MinTargetCapacity is not honoured: what the gang steps must survive).
        A ClientToken used before is EC2's idempotency: the same request gets the first call's answer
        again and launches nothing; other parameters are refused (IdempotentParameterMismatch)."""
        self._call("create_fleet_instant", region, request.count)
        used = self.fleet_tokens.get((region, request.client_token))
        if used is not None:
            if used[0] != request:
                raise AwsError(f"CreateFleet({region}): IdempotentParameterMismatch: client token "
                               f"{request.client_token} was used with other parameters")  # fmt: skip
            return used[1]
        self.fleets.append(request)
        launched = request.count if self.fleet_capacity is None else min(request.count, self.fleet_capacity)
        ids = [f"i-0f{len(self.ec2) + n:015x}" for n in range(launched)]
        for iid in ids:
            self.ec2[iid] = {"region": region, "state": self.fleet_state, "tags": dict(request.tags)}
            self.dns.setdefault(iid, f"node-{iid}")
        code, message = self.fleet_error
        errors = [{"ErrorCode": code, "ErrorMessage": message, "Lifecycle": request.capacity_type}] * (
            request.count - launched
        )
        if self.fleet_errors is not None and launched < request.count:
            errors = [dict(e) for e in self.fleet_errors]
        result = CreateFleetResult.model_validate(
            {
                "FleetId": f"fleet-{len(self.fleets)}",
                "Instances": [{"InstanceIds": [iid], "InstanceType": request.instance_type} for iid in ids],
                "Errors": errors,
            }
        )
        self.fleet_tokens[(region, request.client_token)] = (request, result)
        return result

    def attach_instances(
        self, region: str, group: str, instance_ids: Sequence[str], before_call: BeforeCall | None = None
    ) -> int:
        """As AWS: at most 20 ids a call, each running, desired + attached within MaxSize; as the adapter,
        ``before_call`` before each call."""
        self._call("attach_instances", region, group, tuple(instance_ids))
        raw = self._group(region, group)
        ids = list(instance_ids)
        calls = 0
        for start in range(0, len(ids), 20):
            batch = ids[start : start + 20]
            if before_call is not None:
                before_call(f"AttachInstances({region}, {group}, {len(batch)} instance(s))")
            if raw["DesiredCapacity"] + len(batch) > raw["MaxSize"]:
                raise AsgLimitExceeded(f"{region}/{group}: attaching {len(batch)} would exceed the max size")
            for iid in batch:
                state = self.ec2.get(iid, {}).get("state")
                if state != "running":
                    raise AwsError(f"{region}/{group}: instance {iid} is not running ({state})")
                raw["Instances"].append({"InstanceId": iid, "LifecycleState": "InService",
                                         "AvailabilityZone": f"{region}a", "HealthStatus": "Healthy"})  # fmt: skip
            raw["DesiredCapacity"] += len(batch)
            calls += 1
        return calls

    def terminate_instances(self, region: str, instance_ids: Sequence[str]) -> list[str]:
        """As the adapter: an id EC2 does not know (yet) is AwsUnavailable (InvalidInstanceID.NotFound)."""
        self._call("terminate_instances", region, tuple(instance_ids))
        unknown = [i for i in instance_ids if i not in self.ec2]
        if unknown:
            raise AwsUnavailable(f"TerminateInstances({region}): InvalidInstanceID.NotFound: {unknown[0]}")
        for iid in instance_ids:
            if iid in self.ec2:
                self.ec2[iid]["state"] = "shutting-down"
            for (where, _), raw in self.groups.items():  # a group notices its instance went away
                if where == region:
                    raw["Instances"] = [i for i in raw["Instances"] if i["InstanceId"] != iid]
        return sorted(i for i in instance_ids if i in self.ec2)

    def instance_states(
        self, region: str, instance_ids: Sequence[str] = (), tag: tuple[str, str] | None = None
    ) -> dict[str, str]:
        self._call("instance_states", region, tuple(instance_ids), tag)
        if self.describe_lag > 0:
            self.describe_lag -= 1
            return {}
        return {
            iid: i["state"]
            for iid, i in sorted(self.ec2.items())
            if i["region"] == region
            and (iid in instance_ids or (tag is not None and i["tags"].get(tag[0]) == tag[1]))
        }

    def fleet_instances(self, region: str, instance_ids: Sequence[str] = ()) -> list[FleetInstance]:
        """As the adapter's DescribeInstances: this cluster's, tagged with an attempt, alive or stopped;
        ``launched_at`` of an entry (else :attr:`launch_time`) is its LaunchTime."""
        self._call("fleet_instances", region, tuple(instance_ids))
        out = []
        for iid, i in sorted(self.ec2.items()):
            tags = i["tags"]
            if (i["region"] != region or i["state"] not in SWEPT_STATES or TAG_ATTEMPT not in tags
                    or tags.get(TAG_CLUSTER) != self.cluster or (instance_ids and iid not in instance_ids)):  # fmt: skip
                continue
            out.append(FleetInstance(iid, region, i.get("launched_at", self.launch_time), i["state"],
                                     tags[TAG_ATTEMPT], tags.get(TAG_GANG, ""), tags.get(TAG_ASG)))  # fmt: skip
        return out

    def zone_ids_in(self, region: str) -> dict[str, str]:
        """As DescribeAvailabilityZones: the region's zones' ids, as set in :attr:`zones`."""
        self._call("zone_ids_in", region)
        return dict(self.zones.get(region, {}))

    def subnet_zones(self, region: str, subnet_ids: Sequence[str]) -> dict[str, str]:
        """As DescribeSubnets: an unknown subnet id is an error (InvalidSubnetID.NotFound)."""
        self._call("subnet_zones", region, tuple(subnet_ids))
        unknown = [s for s in subnet_ids if s not in self.subnets]
        if unknown:
            raise AwsError(f"DescribeSubnets({region}): InvalidSubnetID.NotFound: {', '.join(unknown)}")
        return {s: self.subnets[s] for s in sorted(subnet_ids)}

    def running(self) -> list[str]:
        """Instances EC2 runs (or is starting): what a gang must never leave behind half."""
        return sorted(i for i, v in self.ec2.items() if v["state"] in ("pending", "running"))

    def terminated(self) -> list[tuple[Any, ...]]:
        return self.called("terminate_instance")

    def _group(self, region: str, group: str) -> dict[str, Any]:
        if (region, group) not in self.groups:
            raise AsgNotFound(f"{region}/{group}: no such Auto Scaling group")
        return self.groups[(region, group)]


class UnreadableCloud(FakeCloud):
    """A cloud whose group reads (DescribeAutoScalingGroups) fail in ``failing`` regions, throttled past
    the SDK's retries as the adapter raises it."""

    def __init__(self, *failing: str, regions: Sequence[str] = ("us-east-1", "us-west-2")) -> None:
        super().__init__(regions=regions, cluster="ml")
        self.failing = set(failing)

    def _refuse(self, region: str) -> None:
        if region in self.failing:
            raise AwsThrottled(f"DescribeAutoScalingGroups({region}): Throttling: Rate exceeded")

    def node_groups_in(
        self, region: str, reserve: Mapping[str, int], now: datetime | None = None
    ) -> list[NodeGroup]:
        self._refuse(region)
        return super().node_groups_in(region, reserve, now)

    def describe_group(self, region: str, group: str) -> AutoScalingGroup:
        self._refuse(region)
        return super().describe_group(region, group)

    def node_groups(self, reserve: Mapping[str, int], now: datetime | None = None) -> list[NodeGroup]:
        """As the adapter reads every region: region by region (spillway.adapters.aws.AwsAdapter)."""
        groups = [g for region in self.regions for g in self.node_groups_in(region, reserve, now)]
        return sorted(groups, key=lambda g: (g.region, g.name))


def unschedulable_at_terminate(cloud: FakeCloud, kube: FakeCluster) -> dict[str, bool]:
    """Instance id → whether its Node (the one ``cloud.dns`` names, if there is one) was unschedulable
    when the cloud was asked to terminate the instance, filled in as it is asked: an idle Node still
    schedulable then is one kube-scheduler could have bound a pending pod to after the pods were read."""
    seen: dict[str, bool] = {}

    def note(instance_ids: Sequence[str]) -> None:
        for iid in instance_ids:
            node = kube.nodes.get(cloud.dns.get(iid, ""))
            if node is not None:
                seen[iid] = bool(node["spec"].get("unschedulable"))

    one, many = cloud.terminate_instance, cloud.terminate_instances

    def terminate_instance(region: str, instance_id: str, decrement: bool = True) -> ScalingActivity:
        note([instance_id])
        return one(region, instance_id, decrement)

    def terminate_instances(region: str, instance_ids: Sequence[str]) -> list[str]:
        note(instance_ids)
        return many(region, instance_ids)

    cloud.terminate_instance = terminate_instance  # type: ignore[method-assign]
    cloud.terminate_instances = terminate_instances  # type: ignore[method-assign]
    return seen


# --- the store ---------------------------------------------------------------------------------


class FakeSnapshots(Recorder):
    """The snapshots table: snapshots by (cluster, key)."""

    def __init__(self) -> None:
        super().__init__()
        self.items: dict[tuple[str, str], Snapshot] = {}
        self.last_save: SaveResult | None = None

    def add(self, snapshot: Snapshot) -> SnapshotRef:
        key = format_key(snapshot.taken_at)
        self.items[(snapshot.cluster_name, key)] = snapshot
        return SnapshotRef(snapshot.cluster_name, key)

    def save(self, snapshot: Snapshot) -> str:
        self._call("save", snapshot.cluster_name)
        key = self.add(snapshot).key
        self.last_save = SaveResult(key=key, size=1, raw_size=1, chunks=0, items=1, seconds=0.0)
        return key

    def get(self, cluster: str, key: str) -> Snapshot:
        self._call("get", cluster, key)
        try:
            return self.items[(cluster, key)]
        except KeyError:
            raise SnapshotNotFound(f"{cluster}/{key}: no such snapshot") from None

    def latest(self, cluster: str) -> Snapshot | None:
        self._call("latest", cluster)
        keys = sorted(k for c, k in self.items if c == cluster)
        return self.items[(cluster, keys[-1])] if keys else None

    def latest_meta(self, cluster: str) -> SnapshotMeta | None:
        self._call("latest_meta", cluster)
        keys = sorted(k for c, k in self.items if c == cluster)
        if not keys:
            return None
        snap = self.items[(cluster, keys[-1])]
        return SnapshotMeta(cluster, keys[-1], snap.taken_at, snap.fingerprint, 1, 1, 0, 0, 0)


@dataclass
class FakeLedger(Recorder):
    """The state and plans tables: commit checks the version and writes both, or neither."""

    stored: StoredState = field(default_factory=StoredState)
    plans: dict[str, PlanRecord] = field(default_factory=dict)
    backoffs: list[tuple[str, datetime, str]] = field(default_factory=list)
    backoff_nodes: list[int] = field(default_factory=list)  # each put_backoff's ``nodes``, in order
    backoff_now: list[datetime | None] = field(default_factory=list)  # ... and its ``now``
    # ... and its ``region`` (a back-off set by hand has none: keyed by name alone, as older builds wrote)
    backoff_regions: list[str] = field(default_factory=list)
    # ... and its partition, always the back-offs' (one set by hand has none: an older build's, in the
    # cluster's own)
    backoff_partitions: list[str | None] = field(default_factory=list)
    before_commit: Callable[[], None] | None = None  # e.g. another planner committing meanwhile
    commits: int = 0  # commits that succeeded
    claimed: dict[tuple[str, str], dict[str, object]] = field(default_factory=dict)  # (cluster, item)
    expiries: dict[tuple[str, str], datetime] = field(default_factory=dict)  # a claim's ``expires``

    def __post_init__(self) -> None:
        Recorder.__init__(self)

    @property
    def loads(self) -> int:
        return len(self.called("load"))

    def load(
        self, cluster: str, now: datetime | None = None, before_call: Callable[[str], None] | None = None
    ) -> StoredState:
        """As StateStore.load: the back-off items and failed scale-down drains merged into the state;
        ``before_call`` before each of the adapter's Queries (one page each, here)."""
        for partition in (cluster, DRAINS_PARTITION, BACKOFFS_PARTITION):
            if before_call is not None:
                before_call(f"Query state of {partition.format(cluster=cluster)}")
        self._call("load", cluster)
        # in their partition, and a build before's in the cluster's own
        partitions = (cluster, DRAINS_PARTITION.format(cluster=cluster))
        failed = [
            datetime.fromisoformat(str(value["at"]).replace("Z", "+00:00"))
            for (c, item), value in self.claimed.items()
            if c in partitions and item.startswith(SCALE_DOWN_FAILED_PREFIX)
        ]
        ended = [
            (str(value["node"]), datetime.fromisoformat(str(value["planned_at"]).replace("Z", "+00:00")))
            for (c, item), value in self.claimed.items()
            if c in partitions and item.startswith(DRAIN_ENDED_PREFIX)
        ]
        state = merge_ended_drains(merge_scale_down_failures(self.stored.state, failed), ended)
        state = merge_unsettled_raises(state, self._unsettled(cluster))
        if not self.backoffs:
            return (
                self.stored if state is self.stored.state else dataclasses.replace(self.stored, state=state)
            )
        sizes = self.backoff_nodes + [1] * (len(self.backoffs) - len(self.backoff_nodes))  # set by hand
        regions = self.backoff_regions + [""] * (len(self.backoffs) - len(self.backoff_regions))
        # in their partition, and a build before's in the cluster's own: no other cluster's
        read = (None, cluster, BACKOFFS_PARTITION.format(cluster=cluster))
        kept = self.backoff_partitions + [None] * (len(self.backoffs) - len(self.backoff_partitions))
        merged = merge_backoffs(
            state,
            [
                Backoff(g, until, why, region=r, nodes=n)
                for (g, until, why), n, r, p in zip(self.backoffs, sizes, regions, kept, strict=True)
                if p in read
            ],
            now,
        )
        return dataclasses.replace(self.stored, state=merged)

    def _unsettled(self, cluster: str) -> list[tuple[str, str, datetime]]:
        """As StateStore.load reads them: the raises kept unsettled whose owner claimed no instance."""
        mine = {item: value for (c, item), value in self.claimed.items() if c == cluster}
        holders = {value.get("owner") for item, value in mine.items() if item.startswith(OWNER_PREFIX)}
        return [
            (
                item.removeprefix(UNSETTLED_PREFIX),
                str(value["group"]),
                datetime.fromisoformat(str(value["at"]).replace("Z", "+00:00")),
            )
            for item, value in sorted(mine.items())
            if item.startswith(UNSETTLED_PREFIX) and item.removeprefix(UNSETTLED_PREFIX) not in holders
        ]

    def commit(self, cluster: str, state: State, **kw: Any) -> int:
        """As StateStore.commit: ``expected_version``, ``snapshot_key``, ``plan_id``, ``executions``, ``plan``."""
        expected_version, plan = int(kw["expected_version"]), kw.get("plan")
        self._call("commit", cluster, expected_version)
        if self.before_commit is not None:
            hook, self.before_commit = self.before_commit, None
            hook()
        if self.stored.version != expected_version:
            raise StateConflict(f"stored version is {self.stored.version}, not {expected_version}")
        self.stored = StoredState(
            state=state,
            version=expected_version + 1,
            snapshot_key=kw["snapshot_key"],
            plan_id=kw["plan_id"],
            executions=tuple(kw.get("executions", ())),
        )
        if plan is not None:
            self.plans[plan.key] = plan
        self.commits += 1
        return self.stored.version

    def put_backoff(
        self,
        cluster: str,
        group: str,
        until: datetime,
        reason: str,
        *,
        region: str = "",
        nodes: int = 1,
        now: datetime | None = None,
    ) -> bool:
        self._call("put_backoff", cluster, group)
        if not cluster or "#" in cluster:  # as StateStore.put_backoff, which names the partition itself
            raise ValueError(f"put_backoff: cluster must be the cluster's name, got {cluster!r}")
        self.backoff_nodes += [1] * (len(self.backoffs) - len(self.backoff_nodes))  # set by hand
        self.backoff_regions += [""] * (len(self.backoffs) - len(self.backoff_regions))
        self.backoff_partitions += [None] * (len(self.backoffs) - len(self.backoff_partitions))
        self.backoffs.append((group, until, reason))
        self.backoff_partitions.append(BACKOFFS_PARTITION.format(cluster=cluster))
        self.backoff_regions.append(region)
        self.backoff_nodes.append(nodes)
        self.backoff_now.append(now)
        return True

    def save_plan(self, record: PlanRecord) -> None:
        self._call("save_plan", record.key)
        self.plans[record.key] = record

    def load_plan(self, cluster: str, key: str) -> PlanRecord | None:
        self._call("load_plan", cluster, key)
        found = self.plans.get(key)
        return found if found is not None and found.cluster == cluster else None

    def claim(
        self,
        cluster: str,
        item: str,
        value: Mapping[str, object],
        *,
        expires: datetime,
        now: datetime | None = None,
    ) -> tuple[dict[str, object], bool]:
        """As StateStore.claim: with ``now``, a claim expired by then counts as none (a lease)."""
        self._call("claim", cluster, item)
        key = (cluster, item)
        lapsed = now is not None and key in self.expiries and self.expiries[key] <= now
        if key in self.claimed and not lapsed:
            return dict(self.claimed[key]), False
        self.claimed[key] = dict(value)
        self.expiries[key] = expires
        return dict(value), True

    def claim_unless(
        self, cluster: str, item: str, value: Mapping[str, object], *, rival: str, expires: datetime
    ) -> str:
        """As StateStore.claim_unless: ``item`` claimed (through :meth:`claim`, which a test may wrap) only
        while neither it nor ``rival`` is; the one that stands."""
        self._call("claim_unless", cluster, item)
        if (cluster, rival) in self.claimed and (cluster, item) not in self.claimed:
            return rival
        self.claim(cluster, item, value, expires=expires)
        return item

    def release(self, cluster: str, item: str, *, held_as: Mapping[str, object] | None = None) -> bool:
        """As StateStore.release: with ``held_as``, only while the claim holds that value."""
        self._call("release", cluster, item)
        key = (cluster, item)
        if held_as is not None and self.claimed.get(key) != dict(held_as):
            return False
        self.claimed.pop(key, None)
        self.expiries.pop(key, None)
        return True

    def claims(self, cluster: str, prefix: str) -> dict[str, dict[str, object]]:
        self._call("claims", cluster, prefix)
        return {
            i: dict(v) for (c, i), v in sorted(self.claimed.items()) if c == cluster and i.startswith(prefix)
        }


# --- the executions ----------------------------------------------------------------------------


class FakeWorkflows(Recorder):
    """Step Functions: a used name is refused (``started=False``), as Step Functions does."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[ExecutionRequest] = []
        self.names: set[str] = set()

    def start(self, request: ExecutionRequest) -> StartedExecution:
        self._call("start", request.name)
        self.requests.append(request)
        arn = request.state_machine_arn.replace(":stateMachine:", ":execution:", 1) + ":" + request.name
        started = request.name not in self.names
        self.names.add(request.name)
        return StartedExecution(request.kind, request.name, arn, started=started)

    @property
    def started(self) -> list[str]:
        return sorted(self.names)


def _dig(obj: Mapping[str, Any], path: str) -> Any:
    found: Any = obj
    for part in path.strip(".").split("."):
        found = found.get(part) if isinstance(found, Mapping) else None
    return found


def replaced_between_pages(server: Any, kube: Any, times: int = 1) -> str:
    """Between the first page of a pod list (``kube``: a KubeClient on the API emulator ``server``) and
    the next, ``times`` times: the first pod listed is deleted and created again under its name, not
    bound yet (a StatefulSet pod replaced), and etcd compacts the revision the list reads (every
    continue token so far answers 410 Expired). Returns the pod's key."""
    first = kube.list_pods()[0]
    name, namespace = first.metadata.name, first.metadata.namespace or "default"
    real = kube._core.list_pod_for_all_namespaces
    left = [times]

    def listing(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("_continue") and left[0] > 0:
            left[0] -= 1
            server.delete("Pod", name, namespace)
            server.add(objects.pod(name, namespace, cpu="100m", memory="64Mi"))
            server.faults.expire_continue_tokens()
        return real(*args, **kwargs)

    kube._core.list_pod_for_all_namespaces = listing
    return f"{namespace}/{name}"


def refuse(client: Any, operation: str, code: str, status: int) -> list[dict[str, Any]]:
    """Make a boto3 ``client``'s ``operation`` answer an AWS error, as after the SDK's retries; returns
    the parameters of every call it refuses, in order (:func:`calls` sees none of them)."""
    seen: list[dict[str, Any]] = []

    def refused(**params: Any) -> Any:
        seen.append(params)
        raise ClientError(
            {
                "Error": {"Code": code, "Message": f"{code} (injected)"},
                "ResponseMetadata": {"HTTPStatusCode": status},
            },
            operation,
        )

    setattr(client, operation, refused)
    return seen


def calls(client: Any, operation: str) -> list[dict[str, Any]]:
    """The parameters of every ``operation`` a boto3 ``client`` makes from now on, in order."""
    seen: list[dict[str, Any]] = []
    client.meta.events.register(
        f"provide-client-params.*.{operation}", lambda params, **_: seen.append(params)
    )
    return seen
