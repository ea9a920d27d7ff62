"""Backing off what a failed launch found without capacity: its group, and each pool EC2 named short.

One mechanism for every path that learns a pool (a capacity type of an instance type in a zone) has no
capacity: a scale-up's ``backoff`` (:mod:`spillway.act.scale`), a gang's give-back
(:mod:`spillway.act.gang`) and a Spot interruption (:mod:`spillway.act.interrupt`) write the same
items, ``backoff#<region>/<group>`` (naming its group and region) and
``backoff#pool#<capacity type>/<zone>/<instance type>`` (:data:`~spillway.model.state.POOL_PREFIX`,
:func:`~spillway.model.state.pool_key`), which the plans read back as ``State.groups`` and
``State.pools``: every group that may launch from a backed-off pool weighs it, not only the one that
failed. A pool's item says how many nodes EC2 refused at once (``nodes``,
:class:`~spillway.model.state.PoolState`): a gang's instant fleet asked for its whole count or nothing,
so its refusal holds back only gangs as big; a group's failed launch (its raise takes what there is)
and a Spot interruption say EC2 had none (1), which holds back every launch.

Which pool a failure names is read from what EC2 said, by one rule (:mod:`spillway.model.launcherror`):
a shortage of capacity names a pool; a full quota is the account's and a refused setting the group's, so
they name none. An Auto Scaling group's failed launch activity is read by :func:`failed_pool`, a gang's
instant fleet's per-override errors by :func:`fleet_pools`. Pure but for :func:`back_off`, which writes
through the :class:`~spillway.ports.Ledger` port.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from spillway.model.aws import INSTANCE_TYPE_FORM, ZONE_FORM, AutoScalingGroup, CreateFleetError, FleetRequest
from spillway.model.launcherror import launch_error_kind
from spillway.model.nodegroup import CapacityType, override_types, resolve_instance_type
from spillway.model.state import POOL_PREFIX, pool_key
from spillway.ports import Ledger

#: (capacity type, zone, instance type): one pool, as :func:`~spillway.model.state.pool_key` keys it
Pool = tuple[CapacityType, str, str]

# EC2's words for an instance type it has no on-demand capacity of in a zone (InsufficientInstanceCapacity),
# and for one the zone does not offer (Unsupported: "Your requested instance type (g4dn.xlarge) is not
# supported in your requested Availability Zone (ca-central-1d)"); each names the type and the zone
_NO_CAPACITY_IN_ZONE = re.compile(
    r"do not have sufficient (?P<type>[\w.-]+) capacity in the Availability Zone you requested \((?P<zone>[\w-]+)\)"
    r"|requested instance type \((?P<utype>[\w.-]+)\) is not supported in your requested Availability Zone "
    r"\((?P<uzone>[\w-]+)\)"
)
_SPOT = re.compile(r"\bspot\b", re.IGNORECASE)
# CreateFleetError.Lifecycle values that are a pool Spillway keys; the others (capacity-block,
# interruptible-capacity-reservation, ...) are reserved capacity, not a pool other groups launch from
_LIFECYCLES: dict[str, CapacityType] = {"spot": "spot", "on-demand": "on-demand"}


def failed_pool(message: str, asg: AutoScalingGroup) -> Pool | None:
    """The pool (capacity type, zone, instance type) a failed launch of ``asg`` found without capacity,
    or None when the message does not say so or leaves the pool unknown. Spot when it speaks of Spot
    ("Could not launch Spot Instances. InsufficientInstanceCapacity - There is no Spot capacity ..."),
    else on-demand. EC2 names the type and zone of an on-demand shortage, and of a type the zone does
    not offer (Unsupported); otherwise the pool is known
    only for a group of one instance type in one zone. Capacity is what a gang's fleet calls it too
    (:func:`~spillway.model.launcherror.launch_error_kind`: InsufficientInstanceCapacity,
    UnfulfillableCapacity, ...); quotas (VcpuLimitExceeded, ...) are the account's, not a pool's, and
    a settings error the group's: None."""
    if launch_error_kind(message) != "capacity":
        return None
    kind: CapacityType = "spot" if _SPOT.search(message) else "on-demand"
    named = _NO_CAPACITY_IN_ZONE.search(message)
    if named is not None:
        return kind, named["zone"] or named["uzone"], named["type"] or named["utype"]
    types = override_types(asg) or tuple(t for t in (resolve_instance_type(asg),) if t)
    if len(types) == 1 and len(asg.AvailabilityZones) == 1:
        return kind, asg.AvailabilityZones[0], types[0]
    return None


def _short(error: CreateFleetError) -> bool:
    """An error of a fleet's for capacity (its code: a quota or a setting names no pool)."""
    return bool(error.ErrorCode) and launch_error_kind(error.ErrorCode) == "capacity"


def needs_subnet_zones(errors: Sequence[CreateFleetError], request: FleetRequest) -> bool:
    """Whether :func:`fleet_pools` needs the zones of ``request``'s subnets: the fleet asked by subnet,
    and an error for capacity names no AvailabilityZone (its override names the subnet, or nothing)."""
    return bool(request.subnets) and any(
        _short(e) and not (e.override is not None and e.override.AvailabilityZone) for e in errors
    )


def fleet_pools(
    errors: Sequence[CreateFleetError], request: FleetRequest, subnet_zones: Mapping[str, str]
) -> list[Pool]:
    """The pools an instant fleet's ``errors`` name short of capacity (CreateFleetError: one per override
    EC2 could not launch), sorted, each once. For each error whose code is capacity's: the capacity type
    is its ``Lifecycle`` (else the one the fleet asked for; a Lifecycle that is no pool, a Capacity
    Block's, names none), the zone its override's ``AvailabilityZone``, else its ``SubnetId``'s
    (``subnet_zones``: subnet → zone, as DescribeSubnets answers), the instance type its override's,
    else the fleet's. An error that names no zone (no override, or one naming neither) is of the fleet's
    one zone when it could launch in only one (a gang kept to a zone); of a fleet over several, its zone
    is unknown and it names no pool, as a scale-up's failure naming no zone of a group spanning several
    names none. Quota and settings errors name none."""
    places = {subnet_zones.get(s) for s in request.subnets} if request.subnets else set(request.zones)
    only = next(iter(places)) if len(places) == 1 else None
    pools = {pool for e in errors if _short(e) and (pool := _error_pool(e, request, subnet_zones, only))}
    return sorted(pools)


def _error_pool(
    error: CreateFleetError, request: FleetRequest, subnet_zones: Mapping[str, str], only: str | None
) -> Pool | None:
    """The pool one error of a fleet's names (:func:`fleet_pools`); ``only``: the fleet's one zone, if
    it had one. None when it names no pool Spillway keys, or one of a form a pool key cannot take (EC2's
    answer is not trusted to be one)."""
    kind = _LIFECYCLES.get(error.Lifecycle or request.capacity_type)
    override = error.override
    named = (override.AvailabilityZone or subnet_zones.get(override.SubnetId or "")) if override else None
    zone = named or only or ""
    instance_type = (override.InstanceType if override else None) or request.instance_type or ""
    if kind and re.fullmatch(ZONE_FORM, zone) and re.fullmatch(INSTANCE_TYPE_FORM, instance_type):
        return kind, zone, instance_type
    return None


def back_off(
    ledger: Ledger,
    cluster: str,
    group: str | None,
    until: datetime,
    reason: str,
    *,
    region: str,
    pools: Iterable[Pool] = (),
    nodes: int = 1,
    now: datetime | None = None,
) -> list[str]:
    """Back ``group`` off (none when None) and each of ``pools`` until ``until``, for ``reason``, in the
    state table (the group's in ``region``); the items' names (``<group>``, ``pool#<capacity type>/<zone>/
    <instance type>``). The
    pools' ``nodes``: how many nodes EC2 refused at once (a gang's instant fleet: its size; 1, EC2 had
    none: a group's failed launch, a Spot interruption); the group's own back-off has none. A stronger
    or later back-off already stored is kept, but for one over by ``now``
    (:meth:`~spillway.ports.Ledger.put_backoff`, which writes them in the cluster's back-offs'
    partition, :data:`~spillway.model.state.BACKOFFS_PARTITION`, read by the state's load beside its own)."""
    names = [group] if group is not None else []
    sizes = [1] * len(names)
    for pool in pools:
        names.append(POOL_PREFIX + pool_key(*pool))
        sizes.append(nodes)
    for name, size in zip(names, sizes, strict=True):
        ledger.put_backoff(cluster, name, until, reason, region=region, nodes=size, now=now)
    return names
