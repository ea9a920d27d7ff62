"""Backing off what a failed launch found without capacity: its group, and each pool EC2 named short.

One mechanism for every path that learns a pool (a capacity type of an instance type in a zone) has no
capacity: a scale-up's ``backoff`` (:mod:`spillway.act.scale`) and a Spot interruption
(:mod:`spillway.act.interrupt`) write the same items, ``backoff#<group>`` and
``backoff#pool#<capacity type>/<zone>/<instance type>`` (:data:`~spillway.model.state.POOL_PREFIX`,
:func:`~spillway.model.state.pool_key`), which the plans read back as ``State.groups`` and
``State.pools``: every group that may launch from a backed-off pool weighs it, not only the one that
failed.

Which pool a failure names is read from what EC2 said, by one rule (:mod:`spillway.model.launcherror`):
a shortage of capacity names a pool; a full quota is the account's and a refused setting the group's, so
they name none. An Auto Scaling group's failed launch activity is read by :func:`failed_pool`. Pure but
for :func:`back_off`, which writes through the :class:`~spillway.ports.Ledger` port.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime

from spillway.model.aws import AutoScalingGroup
from spillway.model.launcherror import launch_error_kind
from spillway.model.nodegroup import CapacityType, override_types, resolve_instance_type
from spillway.model.state import POOL_PREFIX, pool_key
from spillway.ports import Ledger

#: (capacity type, zone, instance type): one pool, as :func:`~spillway.model.state.pool_key` keys it
Pool = tuple[CapacityType, str, str]

# EC2's words for an instance type it has no on-demand capacity of in a zone (InsufficientInstanceCapacity)
_NO_CAPACITY_IN_ZONE = re.compile(
    r"do not have sufficient (?P<type>[\w.-]+) capacity in the Availability Zone you requested \((?P<zone>[\w-]+)\)"
)
_SPOT = re.compile(r"\bspot\b", re.IGNORECASE)


def failed_pool(message: str, asg: AutoScalingGroup) -> Pool | None:
    """The pool (capacity type, zone, instance type) a failed launch of ``asg`` found without capacity,
    or None when the message does not say so or leaves the pool unknown. Spot when it speaks of Spot
    ("Could not launch Spot Instances. InsufficientInstanceCapacity - There is no Spot capacity ..."),
    else on-demand. EC2 names the type and zone of an on-demand shortage; otherwise the pool is known
    only for a group of one instance type in one zone. Capacity is what a gang's fleet calls it too
    (:func:`~spillway.model.launcherror.launch_error_kind`: InsufficientInstanceCapacity,
    UnfulfillableCapacity, ...); quotas (VcpuLimitExceeded, ...) are the account's, not a pool's, and
    a settings error the group's: None."""
    if launch_error_kind(message) != "capacity":
        return None
    kind: CapacityType = "spot" if _SPOT.search(message) else "on-demand"
    named = _NO_CAPACITY_IN_ZONE.search(message)
    if named is not None:
        return kind, named["zone"], named["type"]
    types = override_types(asg) or tuple(t for t in (resolve_instance_type(asg),) if t)
    if len(types) == 1 and len(asg.AvailabilityZones) == 1:
        return kind, asg.AvailabilityZones[0], types[0]
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
) -> list[str]:
    """Back ``group`` off (none when None) and each of ``pools`` until ``until``, for ``reason``, in the
    state table; the items' names (``<group>``, ``pool#<capacity type>/<zone>/<instance type>``). A later
    back-off already stored is kept (:meth:`~spillway.ports.Ledger.put_backoff`)."""
    names = ([group] if group is not None else []) + [POOL_PREFIX + pool_key(*pool) for pool in pools]
    for name in names:
        ledger.put_backoff(cluster, name, until, reason, region=region)
    return names
