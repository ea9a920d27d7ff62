"""Reading what real tools print (kubectl, the AWS CLI) from files, with errors that name file and field."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from spillway.config import PlannerConfig, load_config_file
from spillway.errors import InputError
from spillway.model import provreq
from spillway.model.aws import (
    NODEGROUP_UNREAD_EFFECT,
    AutoScalingGroup,
    EksNodegroup,
    InstanceTypeInfo,
    NodegroupRead,
    ScalingActivity,
    ScheduledAction,
    WarmPool,
    availability_zone_ids,
    bundled_instance_types,
    parse_activities,
    parse_asgs,
    parse_instance_types,
    parse_scheduled_actions,
    wanted_nodegroups,
    with_managed_nodegroups,
)
from spillway.model.cluster import ClusterSnapshot, NodeInfo
from spillway.model.drain import (
    DEFAULT_LIFECYCLE_HOOKS,
    HOOK_NAME_PATTERN,
    LifecycleHook,
    drain_hooks,
    lifecycle_hook,
)
from spillway.model.fleet import FleetInstance, swept_instances
from spillway.model.k8s import iter_kube_list
from spillway.model.livetemplate import with_live_templates
from spillway.model.nodegroup import (
    NodeGroup,
    build_node_groups,
    check_unique,
    managed_taints,
    with_warm_node_problems,
    with_zone_ids,
)
from spillway.model.schedule import Cron, zone_of
from spillway.model.state import LATEST_NOW, State
from spillway.model.stored import load_stored, warn_unknown
from spillway.model.utc import aware
from spillway.perf import bulk_allocation

T = TypeVar("T")


def _validation_field(exc: ValidationError, prefix: str) -> tuple[str, str]:
    err = exc.errors()[0]
    loc = prefix
    for part in err["loc"]:
        loc += f"[{part}]" if isinstance(part, int) else (f".{part}" if loc else str(part))
    return loc or "top level", err["msg"]


def read_json(path: str | Path) -> Any:
    """A JSON file's document; InputError naming the file for anything unreadable or not plain JSON."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(exc.strerror or "cannot be read", source=source) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", source=source) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", source=source
        ) from None
    except RecursionError:
        raise InputError("not usable JSON: nested too deeply", source=source) from None
    except ValueError as exc:  # an integer of more digits than Python converts (4300)
        raise InputError(f"not usable JSON: {exc}", source=source) from None


def _parse(path: str | Path, key: str, parser: Callable[[Any], T]) -> T:
    doc = read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get(key), list):
        raise InputError("missing or not a list", source=str(path), field=key)
    try:
        return parser(doc)
    except ValidationError as exc:
        # The parsers validate item by item; find which item failed to name it.
        for index, item in enumerate(doc[key]):
            try:
                parser({key: [item]})
            except ValidationError as item_exc:
                field, msg = _validation_field(item_exc, f"{key}[{index}]")
                raise InputError(msg, source=str(path), field=field) from None
        field, msg = _validation_field(exc, key)
        raise InputError(msg, source=str(path), field=field) from None
    except ValueError as exc:
        raise InputError(str(exc), source=str(path)) from None


def load_cluster(path: str | Path, cluster: str, taken_at: datetime) -> ClusterSnapshot:
    """The snapshot of a kubectl List. A List holds no API discovery, so the snapshot does not say that
    coscheduling's PodGroup kind is served (``coscheduling_served`` False): a pod labelled for a
    PodGroup the List does not hold is planned as any, as before observe recorded the kind."""
    doc = read_json(path)
    provreqs = provreq.from_list(doc)  # before the List's items are released as they are parsed
    try:
        with bulk_allocation():
            objects = iter_kube_list(doc, release=True)
            return ClusterSnapshot.from_objects(cluster, taken_at, objects, provreqs=provreqs)
    except ValueError as exc:
        field, _, msg = str(exc).partition(": ")
        raise InputError(msg or field, source=str(path), field=field if msg else None) from None


def load_asgs(paths: Sequence[str | Path]) -> list[AutoScalingGroup]:
    groups: list[AutoScalingGroup] = []
    places: list[str] = []
    for path in paths:
        parsed = _parse(path, "AutoScalingGroups", parse_asgs)
        for index, group in enumerate(parsed):
            try:
                group.region  # noqa: B018 - validates the ARN
            except ValueError as exc:
                raise InputError(
                    str(exc).split(": ", 1)[1],
                    source=str(path),
                    field=f"AutoScalingGroups[{index}].AutoScalingGroupARN",
                ) from None
            if group.MinSize > group.MaxSize or not group.MinSize <= group.DesiredCapacity <= group.MaxSize:
                raise InputError(
                    f"MinSize {group.MinSize} <= DesiredCapacity {group.DesiredCapacity} <= MaxSize {group.MaxSize} does not hold",
                    source=str(path),
                    field=f"AutoScalingGroups[{index}].DesiredCapacity",
                )
        groups.extend(parsed)
        places.extend(f"{path} AutoScalingGroups[{index}]" for index in range(len(parsed)))
    try:
        check_unique(groups, places)
    except ValueError as exc:
        place, _, msg = str(exc).partition(": ")
        source, _, rest = place.rpartition(" AutoScalingGroups[")
        raise InputError(msg, source=source, field=f"AutoScalingGroups[{rest}") from None
    return groups


def load_activities(paths: Sequence[str | Path]) -> list[ScalingActivity]:
    out: list[ScalingActivity] = []
    for path in paths:
        out.extend(_parse(path, "Activities", parse_activities))
    return out


def load_scheduled_actions(paths: Sequence[str | Path]) -> list[ScheduledAction]:
    """``aws autoscaling describe-scheduled-actions`` outputs. A Recurrence or TimeZone that cannot be
    read is refused here, naming the field (observe keeps it as a problem of the group instead)."""
    out: list[ScheduledAction] = []
    for path in paths:
        parsed = _parse(path, "ScheduledUpdateGroupActions", parse_scheduled_actions)
        for index, action in enumerate(parsed):
            where = f"ScheduledUpdateGroupActions[{index}]"
            try:
                if action.Recurrence:
                    Cron.parse(action.Recurrence)
            except ValueError as exc:
                raise InputError(str(exc), source=str(path), field=f"{where}.Recurrence") from None
            try:
                zone_of(action.TimeZone)
            except ValueError as exc:
                raise InputError(str(exc), source=str(path), field=f"{where}.TimeZone") from None
        out.extend(parsed)
    return out


def load_warm_pools(specs: Sequence[str], asgs: Sequence[AutoScalingGroup]) -> dict[str, WarmPool]:
    """``--warm-pool GROUP=FILE``: ``aws autoscaling describe-warm-pool --auto-scaling-group-name GROUP``
    outputs, by the ARN of the group of ``asgs`` that GROUP names (its name, or its ARN when groups of
    that name are in several regions). The output does not name its group: the option does."""
    return {arn: _parse_warm_pool(path) for arn, path in _files_by_group(specs, asgs, "--warm-pool").items()}


def _files_by_group(specs: Sequence[str], asgs: Sequence[AutoScalingGroup], option: str) -> dict[str, str]:
    """The files of an ``option GROUP=FILE`` given once per group, by the ARN of the group of ``asgs``
    GROUP names (its name, or its ARN when groups of that name are in several regions); an unknown or
    ambiguous GROUP, or a group given twice, is an :class:`InputError` naming it."""
    by_key: dict[str, list[str]] = {}
    for asg in asgs:
        by_key.setdefault(asg.AutoScalingGroupName, []).append(asg.AutoScalingGroupARN)
        by_key.setdefault(asg.AutoScalingGroupARN, []).append(asg.AutoScalingGroupARN)
    files: dict[str, str] = {}
    for spec in specs:
        group, path = _split_group_spec(spec, by_key, option)
        arns = by_key.get(group, [])
        where = f"{option} {group}"
        if not arns:
            raise InputError("names no group of --asgs (GROUP=FILE: a group's name or ARN)", field=where)
        if len(arns) > 1:
            raise InputError(f"{len(arns)} groups of --asgs have that name: give its ARN", field=where)
        if arns[0] in files:
            raise InputError("given twice", field=where)
        files[arns[0]] = path
    return files


def _split_group_spec(spec: str, known: Mapping[str, object], option: str = "--warm-pool") -> tuple[str, str]:
    """``GROUP=FILE``, at the ``=`` after which GROUP is a known group (names and paths may hold ``=``)."""
    if "=" not in spec:
        raise InputError(f"{spec!r} is not GROUP=FILE", field=option)
    for at in (i for i, ch in enumerate(spec) if ch == "="):
        if spec[:at] in known:
            return spec[:at], spec[at + 1 :]
    group, _, path = spec.partition("=")
    return group, path


def _parse_warm_pool(path: str) -> WarmPool:
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise InputError("not a describe-warm-pool output (a JSON object)", source=path, field="top level")
    if not isinstance(doc.get("Instances", []), list):
        raise InputError("not a list", source=path, field="Instances")
    try:
        return WarmPool.model_validate(doc)
    except ValidationError as exc:
        field, msg = _validation_field(exc, "")
        raise InputError(msg, source=path, field=field) from None


def load_lifecycle_hooks(
    specs: Sequence[str], asgs: Sequence[AutoScalingGroup], owned: Sequence[str]
) -> list[AutoScalingGroup]:
    """``--lifecycle-hooks GROUP=FILE``: ``aws autoscaling describe-lifecycle-hooks
    --auto-scaling-group-name GROUP`` outputs, given to the groups of ``asgs`` as observe gives them
    what DescribeLifecycleHooks answers: :attr:`AutoScalingGroup.DrainHooks`, the terminate hooks
    among them that are Spillway's (``owned``, ``--lifecycle-hook-names``; :func:`drain_hooks`). A group
    with one is not flagged for AZRebalance (:func:`~spillway.model.nodegroup.rebalance_problem`); a
    group no file gives is flagged as observe flags a group whose hooks it could not read. GROUP is a
    group's name, or its ARN when groups of that name are in several regions; an unknown or ambiguous
    GROUP, a group given twice or an output that cannot be read is an :class:`InputError` naming it."""
    files = _files_by_group(specs, asgs, "--lifecycle-hooks")
    given = {arn: drain_hooks(_parse_lifecycle_hooks(path), owned) for arn, path in files.items()}
    return [
        g.model_copy(update={"DrainHooks": given[g.AutoScalingGroupARN]})
        if g.AutoScalingGroupARN in given
        else g
        for g in asgs
    ]


def hook_names(text: str | None) -> tuple[str, ...]:
    """``--lifecycle-hook-names``: a comma list of hook names, as the stack's ``LifecycleHookNames``
    gives LIFECYCLE_HOOK_NAMES (:data:`DEFAULT_LIFECYCLE_HOOKS` when not given)."""
    if text is None:
        return DEFAULT_LIFECYCLE_HOOKS
    names = tuple(n.strip() for n in text.split(","))
    for name in names:
        if not re.fullmatch(HOOK_NAME_PATTERN, name) or len(name) > 255:
            raise InputError(
                f"{name!r} is no lifecycle hook name (1 to 255 of A-Z a-z 0-9 - _ /)",
                field="--lifecycle-hook-names",
            )
    return names


def _parse_lifecycle_hooks(path: str) -> list[LifecycleHook]:
    doc = read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("LifecycleHooks"), list):
        raise InputError("not a describe-lifecycle-hooks output (an object with a list)", source=path,
                         field="LifecycleHooks")  # fmt: skip
    hooks = []
    for i, hook in enumerate(doc["LifecycleHooks"]):
        for key in ("LifecycleHookName", "LifecycleTransition"):
            if not isinstance(hook, dict) or not isinstance(hook.get(key), str):
                raise InputError("required, a string", source=path, field=f"LifecycleHooks[{i}].{key}")
        hooks.append(lifecycle_hook(hook))
    return hooks


def load_nodegroups(paths: Sequence[str], asgs: Sequence[AutoScalingGroup]) -> list[AutoScalingGroup]:
    """``--nodegroup FILE``: ``aws eks describe-nodegroup`` outputs, given to the groups of ``asgs`` as
    observe gives them what DescribeNodegroup answers: matched by their ``eks:cluster-name`` and
    ``eks:nodegroup-name`` tags in the region the node group's ARN names, and attached by the same code
    (:func:`~spillway.model.aws.with_managed_nodegroups`). A group of a node group no file gives keeps
    its tags' template and its problems say so, as observe's when DescribeNodegroup is refused. A file
    that cannot be read, a taint effect the EKS API does not have, a node group no group of ``asgs`` is
    tagged with, or one given twice is an :class:`InputError` naming the file and the field."""
    tagged = {(g.region, *g.eks_nodegroup) for g in asgs if g.eks_nodegroup is not None}
    given: dict[tuple[str, str, str], tuple[EksNodegroup, str]] = {}
    for path in paths:
        nodegroup, region = _parse_nodegroup(path)
        key = (region, nodegroup.clusterName, nodegroup.nodegroupName)
        where = {"source": path, "field": "nodegroup.nodegroupName"}
        if key not in tagged:
            raise InputError(
                f"no group of --asgs in {region} is tagged eks:cluster-name={key[1]} and "
                f"eks:nodegroup-name={key[2]}",
                **where,
            )
        if key in given:
            raise InputError(
                f"node group {key[1]}/{key[2]} in {region} is given twice (also {given[key][1]})", **where
            )
        given[key] = (nodegroup, path)
    attached: dict[str, AutoScalingGroup] = {}
    for region in dict.fromkeys(g.region for g in asgs):
        of_region = [g for g in asgs if g.region == region]
        read: dict[tuple[str, str], NodegroupRead] = {}
        for cluster, name in wanted_nodegroups(of_region):
            found = given.get((region, cluster, name))
            read[(cluster, name)] = (
                found[0]
                if found
                else f"DescribeNodegroup({cluster}, {name}): no --nodegroup file gives it: {NODEGROUP_UNREAD_EFFECT}"
            )
        attached.update((g.AutoScalingGroupARN, g) for g in with_managed_nodegroups(of_region, read))
    return [attached[g.AutoScalingGroupARN] for g in asgs]


def _parse_nodegroup(path: str) -> tuple[EksNodegroup, str]:
    """One ``aws eks describe-nodegroup`` output: the node group and the region its ARN names."""
    doc = read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("nodegroup"), dict):
        raise InputError(
            "missing or not an object (aws eks describe-nodegroup output)", source=path, field="nodegroup"
        )
    try:
        nodegroup = EksNodegroup.model_validate(doc["nodegroup"])
    except ValidationError as exc:
        field, msg = _validation_field(exc, "nodegroup")
        raise InputError(msg, source=path, field=field) from None
    arn = nodegroup.nodegroupArn
    if arn is None:
        raise InputError(
            "Field required (its region is the node group's)", source=path, field="nodegroup.nodegroupArn"
        )
    parts = arn.split(":")
    if len(parts) < 6 or parts[2] != "eks" or not parts[3] or not parts[5].startswith("nodegroup/"):
        raise InputError(f"not an EKS node group ARN: {arn}", source=path, field="nodegroup.nodegroupArn")
    try:
        managed_taints(nodegroup)  # observe refuses the group; an output EKS cannot print is refused here
    except ValueError as exc:
        place, _, msg = str(exc).partition(": ")
        field = "nodegroup" + place[len(f"ManagedNodegroup({nodegroup.nodegroupName})") :]
        raise InputError(msg, source=path, field=field) from None
    return nodegroup, parts[3]


def load_instances(paths: Sequence[str], cluster: str | None) -> tuple[FleetInstance, ...]:
    """``--instances FILE``: ``aws ec2 describe-instances`` outputs (``Reservations[].Instances[]``), of
    which the instances observe's DescribeInstances returns: tagged ``spillway.io/cluster=<cluster>`` and
    ``spillway.io/gang-attempt``, pending to stopped (the same reading: :func:`swept_instances`), each in
    the region its ``Placement.AvailabilityZone`` is in. They need the cluster's name, as observe's read
    does: another cluster's would be listed as this one's orphans. A file or instance that cannot be
    read, or an instance listed twice, is an :class:`InputError` naming the file and the field."""
    if not paths:
        return ()
    if not cluster:
        raise InputError(
            "only the instances tagged spillway.io/cluster=<cluster> are this cluster's: give `cluster` "
            "in --config",
            field="--instances",
        )
    found: dict[str, tuple[FleetInstance, str]] = {}
    for path in paths:
        doc = read_json(path)
        if not isinstance(doc, dict):
            raise InputError(
                "not a describe-instances output (a JSON object)", source=path, field="top level"
            )
        try:
            for where, instance in swept_instances(doc.get("Reservations"), cluster):
                if instance.instance_id in found:
                    raise InputError(
                        f"instance {instance.instance_id} is listed twice (also {found[instance.instance_id][1]})",
                        source=path,
                        field=f"{where}.InstanceId",
                    )
                found[instance.instance_id] = (instance, f"{path} {where}")
        except ValueError as exc:
            field, _, msg = str(exc).partition(": ")
            raise InputError(msg, source=path, field=field) from None
    return tuple(sorted((i for i, _ in found.values()), key=lambda i: (i.region, i.instance_id)))


ZONE_FIELDS = ("ZoneName", "ZoneId", "RegionName")  # what --zones needs of each zone


def load_zones(paths: Sequence[str]) -> dict[str, dict[str, str]]:
    """``--zones FILE``: ``aws ec2 describe-availability-zones`` outputs, as region -> zone name -> zone
    id, each region's read as observe reads its DescribeAvailabilityZones answer
    (:func:`~spillway.model.aws.availability_zone_ids`). Each zone's region is its ``RegionName`` (one
    file is one region's answer; several regions' zones in one file are read as several answers). A file
    that is no such output, a zone without its ``ZoneName``, ``ZoneId`` or ``RegionName``, a zone listed
    twice, or a region given by two files is an :class:`InputError` naming the file and the field."""
    answers: dict[str, list[Mapping[str, Any]]] = {}
    given: dict[str, str] = {}  # region -> the file that gave it
    for index, path in enumerate(paths):
        if path in paths[:index]:  # its regions would be given twice, by one file named twice
            raise InputError("the same file given twice", source=path, field="--zones")
        doc = read_json(path)
        if not isinstance(doc, dict):
            raise InputError(
                "not a describe-availability-zones output (a JSON object)", source=path, field="top level"
            )
        zones = doc.get("AvailabilityZones")
        if not isinstance(zones, list):
            raise InputError(
                "missing or not a list (aws ec2 describe-availability-zones output)",
                source=path,
                field="AvailabilityZones",
            )
        names: dict[tuple[str, str], int] = {}
        for index, raw in enumerate(zones):
            where = f"AvailabilityZones[{index}]"
            if not isinstance(raw, dict):
                raise InputError("not an object", source=path, field=where)
            for key in ZONE_FIELDS:
                value = raw.get(key)
                if value is None:
                    raise InputError("Field required", source=path, field=f"{where}.{key}")
                if not isinstance(value, str) or not value:
                    raise InputError(f"not a name: {value!r}"[:100], source=path, field=f"{where}.{key}")
            region, name = raw["RegionName"], raw["ZoneName"]
            if given.get(region, path) != path:
                raise InputError(
                    f"region {region} is given twice (also {given[region]})",
                    source=path,
                    field=f"{where}.RegionName",
                )
            if (region, name) in names:
                raise InputError(
                    f"zone {name} is listed twice (also AvailabilityZones[{names[(region, name)]}])",
                    source=path,
                    field=f"{where}.ZoneName",
                )
            given[region] = path
            names[(region, name)] = index
            answers.setdefault(region, []).append(raw)
    return {region: availability_zone_ids(zones) for region, zones in answers.items()}


def load_instance_types(path: str | Path | None) -> dict[str, InstanceTypeInfo]:
    catalogue = dict(bundled_instance_types())
    if path is not None:
        catalogue.update(_parse(path, "InstanceTypes", parse_instance_types))
    return catalogue


def load_state(path: str | Path | None, warn: Callable[[str], None] | None = None) -> State:
    """A state file Spillway wrote (``--state-out``, or a state item's ``state``): as the state table
    is read (:func:`spillway.model.stored.load_stored`), a field this build does not know (a newer
    build wrote it) is ignored and named through ``warn`` (the CLI: one line on stderr); a known field
    with a bad value is an InputError naming file and field."""
    if path is None:
        return State()
    doc = read_json(path)
    try:
        state, unknown = load_stored(State, doc)
    except ValidationError as exc:
        field, msg = _validation_field(exc, "")
        raise InputError(msg, source=str(path), field=field) from None
    warn_unknown(f"warning: {path}", unknown, warn)
    return state


def load_config(path: str | Path | None) -> PlannerConfig:
    """The planner configuration (defaults without a file); ConfigurationError names file and field."""
    if path is None:
        return PlannerConfig()
    return load_config_file(path)


# The times ``--now`` takes. A plan reaches back and ahead of its time by the configuration's durations
# (settings of up to ten years: spillway.model.options.MAX_MINUTES) and its schedules' runs, in datetime
# arithmetic that stops at years 1 and 9999: ``--now 0001-01-01T00:00:00Z`` crashed (OverflowError in
# ``now - max_node_provision_minutes``), and so did a plan near 9999-12-31 that backed a group off. From
# the Unix epoch, before every timestamp a cluster's objects and AWS's answers carry, to the year 9000,
# every such reach stays in range.
EARLIEST_NOW = datetime(1970, 1, 1, tzinfo=UTC)
# LATEST_NOW (excluded): spillway.model.state's, where the state's own times end ten years later


def parse_now(value: str | None) -> datetime:
    if value is None:
        return datetime.now(UTC)
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"not an ISO-8601 time: {value!r}", field="--now") from None
    parsed = aware(parsed)
    if not EARLIEST_NOW <= parsed < LATEST_NOW:
        raise InputError(
            f"{value!r} is outside the times a plan can be made at: from {EARLIEST_NOW:%Y-%m-%dT%H:%M:%SZ} to "
            f"before {LATEST_NOW:%Y-%m-%dT%H:%M:%SZ} (a plan reaches years back and ahead of its time)",
            field="--now",
        )
    return parsed


def node_groups(
    asgs: Sequence[AutoScalingGroup],
    activities: Sequence[ScalingActivity],
    catalogue: dict[str, InstanceTypeInfo],
    config: PlannerConfig,
    source: str = "--asgs",
    scheduled: Sequence[ScheduledAction] = (),
    warm_pools: Mapping[str, WarmPool] | None = None,
    nodes: Iterable[NodeInfo] = (),
    zone_ids: Mapping[str, Mapping[str, str]] | None = None,
) -> list[NodeGroup]:
    """The managed groups, each with its zones' ids of ``zone_ids`` (region -> zone name -> zone id:
    ``--zones``) and its template corrected from a node of its own among ``nodes`` (the cluster
    file's), as the observe Lambda does (with_zone_ids, then spillway.model.livetemplate)."""
    try:
        groups = build_node_groups(
            asgs,
            activities,
            catalogue,
            config.node_reserve.reserve(),
            config.cluster,
            scheduled=scheduled,
            warm_pools=warm_pools,
        )
    except ValueError as exc:
        field, _, msg = str(exc).partition(": ")
        raise InputError(msg or field, source=source, field=field if msg else None) from None
    nodes = tuple(nodes)
    return with_warm_node_problems(with_live_templates(with_zone_ids(groups, zone_ids or {}), nodes), nodes)
