"""Who owns what in an Auto Scaling group that several executions grow at once.

A scale-up and any number of rollback-mode gangs may raise one group at the same time. Each must add
only its own capacity and give back only its own, whatever the order of their steps:

* :func:`raise_once` raises the desired capacity by the execution's own count *relative to the live
  value read at raise time*, exactly once per owner: a marker item (``raise#<owner>``, a conditional put
  in the state table) records the desired capacity before and after, and when it was written; a retried
  step finds it and does not raise again. A raise refused gives its marker back, so the retry raises.
  One whose outcome is unknown (a timeout, a 5xx: AWS may have applied it) is settled at once
  (:func:`_landed`): the group's desired capacity is read again and compared with the raise's ``after``
  plus what other owners' markers of the group, written since this one, raised; at or above, the raise
  landed and is a success; below, the marker is given back and the retry raises relative to the live
  value; a read that fails too keeps the marker (a raise lost is found by the launch's verification;
  one applied twice is paid for).
* :func:`own_instances` attributes new instances: the group's instances are interchangeable when they
  launch, so each execution claims (``owner#<region>#<instance>``, conditional put, first wins) new
  instances nobody claimed, up to the count it raised. An instance belongs to exactly one execution.
* :func:`give_back_undelivered` lowers the desired capacity by the capacity an execution raised but
  never launched, relative to the live value, never below MinSize, and never below the instances the
  group runs (lowering further would make Auto Scaling terminate somebody's running instance).

The one window left is Auto Scaling's own: SetDesiredCapacity has no compare-and-set, so two raises
whose describe and set interleave within milliseconds can still lose one increment.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from spillway.errors import AsgLimitExceeded, AwsUnavailable, SpillwayError
from spillway.model.cluster import format_time, parse_time
from spillway.model.nodegroup import LIVE_STATES
from spillway.ports import Cloud, Ledger

RAISE_PREFIX = "raise#"
OWNER_PREFIX = "owner#"
KEEP = timedelta(days=2)  # claims expire (TTL) long after any execution that made them


@dataclass(frozen=True, slots=True)
class Owner:
    """One execution's identity in one group: the raise marker and instance claims are keyed by it."""

    ledger: Ledger
    cluster: str
    region: str
    group: str
    owner: str

    def raised(self) -> int:
        """What this owner's raise added (0 when it never raised)."""
        marker = self.ledger.claims(self.cluster, RAISE_PREFIX + self.owner).get(RAISE_PREFIX + self.owner)
        return int(marker.get("count", 0)) if marker else 0  # type: ignore[call-overload]


def raise_once(aws: Cloud, owner: Owner, count: int, now: datetime) -> dict[str, Any]:
    """Raise ``owner.group`` by ``count`` relative to its live desired capacity, once per owner.

    :class:`AsgLimitExceeded` (nothing raised) when the live value + count is above MaxSize."""
    where = f"{owner.region}/{owner.group}"
    asg = aws.describe_group(owner.region, owner.group)
    before, after = asg.DesiredCapacity, asg.DesiredCapacity + count
    item = RAISE_PREFIX + owner.owner
    marker, created = owner.ledger.claim(
        owner.cluster, item,
        {"before": before, "after": after, "count": count, "group": where, "at": format_time(now)},
        expires=now + KEEP,
    )  # fmt: skip
    if not created:  # a retry: the raise happened (or is this very call's twin); never twice
        return {"status": "raised", "again": True, **marker}
    if after > asg.MaxSize:
        owner.ledger.release(owner.cluster, item)
        raise AsgLimitExceeded(
            f"{where}: desired capacity {before} + {count} is above MaxSize {asg.MaxSize}; not raised"
        )
    try:
        aws.set_desired_capacity(owner.region, owner.group, after)
    except AwsUnavailable:
        landed = _landed(aws, owner, after, now)
        if landed:  # AWS applied it; only the answer was lost
            return {"status": "raised", "again": False, "before": before, "after": after, "count": count}
        if landed is False:  # not raised: the retry raises on the live value
            owner.ledger.release(owner.cluster, item)
        raise
    except SpillwayError:
        owner.ledger.release(owner.cluster, item)  # not raised: the retry must raise
        raise
    return {"status": "raised", "again": False, "before": before, "after": after, "count": count}


def _landed(aws: Cloud, owner: Owner, after: int, since: datetime) -> bool | None:
    """Whether the raise to ``after`` whose marker was written at ``since``, and whose answer was lost,
    landed; None when the group or the markers cannot be read.

    The rule: it landed when the group's desired capacity, read now, is at least ``after`` plus the
    counts of the other owners' raise markers of the group written at ``since`` or later. Those owners
    raised relative to the live value, which holds this raise if it landed; an owner's raise alone may
    lift the group past ``after`` (the scale-up's 1 -> 3 lost, a gang's 1 -> 4 since), and is not
    taken for this one. Markers written earlier were in the value this raise started from. The group
    is read before the markers, so a raise the value holds has its marker among them. A marker whose
    raise is not applied yet (its owner between claim and SetDesiredCapacity) counts all the same:
    this raise is then retried and may be made twice, within the window that SetDesiredCapacity's
    lack of compare-and-set leaves open anyway."""
    where = f"{owner.region}/{owner.group}"
    mine = RAISE_PREFIX + owner.owner
    try:
        desired = aws.describe_group(owner.region, owner.group).DesiredCapacity
        markers = owner.ledger.claims(owner.cluster, RAISE_PREFIX)
    except SpillwayError:
        return None
    since_mine = sum(
        int(str(value.get("count", 0)))
        for item, value in markers.items()
        if item != mine and value.get("group") == where and _written_since(value.get("at"), since)
    )
    return desired >= after + since_mine


def _written_since(at: object, since: datetime) -> bool:
    """A marker's ``at`` is ``since`` or later; a marker without one (written before markers said when)
    is older."""
    when = parse_time(at) if isinstance(at, str) and at else None
    return when is not None and _utc(when) >= _utc(since)


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def own_instances(owner: Owner, candidates: Iterable[str], limit: int, now: datetime) -> list[str]:
    """The live instances this owner holds among ``candidates`` (the group's live instances that are
    new to it), claiming unclaimed ones until it holds ``limit``."""
    live = sorted(set(candidates))
    prefix = f"{OWNER_PREFIX}{owner.region}#"
    claimed = {item.removeprefix(prefix): str(v.get("owner")) for item, v in
               owner.ledger.claims(owner.cluster, prefix).items()}  # fmt: skip
    mine = [i for i in live if claimed.get(i) == owner.owner]
    for iid in live:
        if len(mine) >= limit:
            break
        if iid in claimed:
            continue
        value, _ = owner.ledger.claim(owner.cluster, prefix + iid, {"owner": owner.owner}, expires=now + KEEP)
        if value.get("owner") == owner.owner:
            mine.append(iid)
    return sorted(mine)


def give_back_undelivered(aws: Cloud, owner: Owner, undelivered: int) -> int | None:
    """Lower the desired capacity by ``undelivered`` relative to the live value (never below MinSize
    nor below the instances running). Returns the new desired capacity, or None when left as it was."""
    if undelivered <= 0:
        return None
    asg = aws.describe_group(owner.region, owner.group)
    live = sum(1 for i in asg.Instances if i.LifecycleState in LIVE_STATES)
    target = max(asg.MinSize, live, asg.DesiredCapacity - undelivered)
    if target >= asg.DesiredCapacity:
        return None
    aws.set_desired_capacity(owner.region, owner.group, target)
    return target
