"""Who owns what in an Auto Scaling group that several executions grow at once.

A scale-up and any number of gangs may raise one group at the same time. Each must add only its own
capacity and give back only its own, whatever the order of their steps:

* :func:`raise_once` raises the desired capacity by the execution's own count *relative to the live
  value read at raise time*, exactly once per owner: a marker item (``raise#<owner>``, a conditional put
  in the state table) records the desired capacity before and after, and when it was written; a retried
  step finds it and does not raise again. A raise refused gives its marker back, so the retry raises.
  The marker is written before SetDesiredCapacity is asked, so a marker alone does not say the raise was
  asked for (the marker's own answer may have been lost, failing the step before the raise): once the
  raise is answered (or settled as landed) a second item says so (``set#<owner>``), and a retry that
  finds a marker without it, nor unsettled, settles it as a lost answer is settled (:func:`_landed`).
  A fleet-mode gang raises by AttachInstances (Auto Scaling adds the instances attached to the desired
  capacity) and writes its marker too, before attaching (:func:`mark_attach`).
* A raise whose answer was lost (a timeout, a 5xx: AWS may have applied it) is settled at once only when
  that is unambiguous (:func:`_landed`; a group read back where it started may be a read older than the
  raise, so the raise is asked again at its own value: :func:`_ask`); otherwise its marker is kept and
  marked unsettled
  (``unsettled#<owner>``): never raised twice, and what follows is safe. An unsettled owner claims only
  instances no other owner of its window still waits for (:func:`own_instances`), gives back no capacity
  (it may never have added any), and a scale-up that ends short of its count is not a launch failure
  (:meth:`spillway.act.scale.ScaleSteps.verify`): the next plan sees the pods still pending.
* :func:`own_instances` attributes new instances: the group's instances are interchangeable when they
  launch, so each execution claims (``owner#<region>#<instance>``, conditional put, first wins) new
  instances nobody claimed, up to the count it raised. An instance belongs to exactly one execution.
  An execution's new instances are those its ``prepare`` did not see (``before``), which its raise
  marker keeps (``existing``); so an instance launched for an earlier raise but already there when a
  later execution prepared is new to the earlier owner only. Each owner claims first the instances the
  fewest other owners still waiting could claim: otherwise the earlier owner could take one launched
  for the later, leave its own to nobody, and the later would end short and back its group off.
* The group launches instances of its own too: a replacement for one it took out of service (a failed
  health check, a Spot interruption, an instance refresh, rebalancing), keeping the desired capacity
  (:func:`~spillway.model.nodegroup.replacement_launches` reads them from the launch activities; once
  seen, one is recorded, ``replacement#<region>#<instance>``, for the checks after its activity is no
  longer among those read). None is claimed as an owner's launch: it adds nothing for the pods an owner raised for, and an owner's
  back-off would terminate (with a decrement) the replacement of somebody's node. An owner that lost one
  of its own claimed instances meanwhile claims a replacement in its place (``replaces``), counted once.
  Launches an owner claims at most its count, ever: one it lost is no room to take another owner's
  launch (which its give-back would then terminate), but a scale-up's check takes, in its place, a
  launch no other owner waits for (the group's relaunch of an instance EC2 ended reads as a raise's).
* :func:`give_back_undelivered` lowers the desired capacity by the capacity an execution raised but
  never launched, relative to the live value, never below MinSize, and never below the instances the
  group runs (lowering further would make Auto Scaling terminate somebody's running instance).

The one window left is Auto Scaling's own: SetDesiredCapacity has no compare-and-set, so two raises
whose describe and set interleave within milliseconds can still lose one increment.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

from spillway.act.deadline import NO_DEADLINE, Deadline
from spillway.errors import AsgLimitExceeded, AwsThrottled, AwsUnavailable, SpillwayError
from spillway.model.calltime import MARKED_CALLS, SCALE_FUNCTION_TIMEOUT_SECONDS
from spillway.model.cluster import format_time, parse_time
from spillway.model.nodegroup import LIVE_STATES
from spillway.model.state import OWNER_PREFIX, UNSETTLED_PREFIX  # the plan's load reads them too
from spillway.model.utc import aware
from spillway.ports import Cloud, Ledger

log = logging.getLogger(__name__)

RAISE_PREFIX = "raise#"
SET_PREFIX = "set#"  # the raise was answered by Auto Scaling (or settled as landed): not only marked
REPLACES = "replaces"  # an instance claim's flag: claimed in place of one of the owner's own it lost
# an instance a step found the group launched as a replacement (``replacement#<region>#<instance>``): its
# launch activity drops out of the activities read (the newest ended ones of a window) long before it ends
REPLACEMENT_PREFIX = "replacement#"
GIVEBACK_PREFIX = "giveback#"  # an owner's undelivered capacity was given back (or asked to be): once
KEEP = timedelta(days=2)  # claims expire (TTL) long after any execution that made them
# No Lambda invocation runs longer than 15 minutes, so an owner's raise happens within this of the time
# its marker names (its step's clock, read before it read the group): raises closer than this to one
# another may have interleaved.
WINDOW = timedelta(minutes=15)
# The longest the step that writes a raise marker (SetDesired, RaiseDesired) runs from the time its marker
# names (its invocation's clock, read before the marker), its retries included: each of those Task states
# retries AwsThrottled and AwsUnavailable up to 6 times and Lambda's own errors up to 3 times
# (statemachines/), each retry a new invocation of the scale function, stopped at its Timeout, after its
# retrier's wait (at most 1+2+4+8+16+20 s and 1+2+4 s). A retry asks a bare marker's raise again
# (:func:`_retried`), so only a marker still bare past this was left by a step that ended
# (:func:`settle_abandoned`): settled sooner, the retry found it settled and asked nothing.
MARKER_STEP_TRIES = 1 + 6 + 3
MARKER_STEP = timedelta(seconds=MARKER_STEP_TRIES * SCALE_FUNCTION_TIMEOUT_SECONDS + (51 + 7))


@dataclass(frozen=True, slots=True)
class Owner:
    """One execution's identity in one group: the raise marker and instance claims are keyed by it."""

    ledger: Ledger
    cluster: str
    region: str
    group: str
    owner: str

    @property
    def where(self) -> str:
        return f"{self.region}/{self.group}"

    def raised(self) -> int:
        """What this owner's raise added (0 when it never raised)."""
        marker = self.ledger.claims(self.cluster, RAISE_PREFIX + self.owner).get(RAISE_PREFIX + self.owner)
        return int(marker.get("count", 0)) if marker else 0  # type: ignore[call-overload]

    def held(self) -> int:
        """How many of the group's instances this owner ever claimed as launched for it
        (:func:`own_instances`), running or since terminated: what its raise delivered, however often a
        back-off was retried meanwhile. A replacement it claimed in place of one it lost is not counted
        again: that capacity was counted with the instance lost."""
        return sum(1 for replaces in self.claimed().values() if not replaces)

    def claimed(self) -> dict[str, bool]:
        """The instances this owner ever claimed (:func:`own_instances`), running or since terminated:
        instance id -> whether it was claimed as the replacement of one it lost."""
        prefix = f"{OWNER_PREFIX}{self.region}#"
        return {
            item.removeprefix(prefix): bool(v.get(REPLACES))
            for item, v in self.ledger.claims(self.cluster, prefix).items()
            if v.get("owner") == self.owner
        }

    def unsettled(self) -> bool:
        """Whether this owner's raise was kept without knowing if AWS applied it (:func:`raise_once`)."""
        item = UNSETTLED_PREFIX + self.owner
        return item in self.ledger.claims(self.cluster, item)


def raise_once(
    aws: Cloud,
    owner: Owner,
    count: int,
    now: datetime,
    existing: Iterable[str] | None = None,
    deadline: Deadline = NO_DEADLINE,
) -> dict[str, Any]:
    """Raise ``owner.group`` by ``count`` relative to its live desired capacity, once per owner.
    ``existing``: the instances that are not new to this owner (its ``prepare``'s ``before``), kept in the
    marker for the other owners' claims (:func:`own_instances`).

    :class:`AsgLimitExceeded` (nothing raised) when the live value + count is above MaxSize. When the
    answer is lost and :func:`_landed` cannot tell, the marker is kept and marked unsettled, and the
    error goes on: the step's retry finds the marker and raises nothing. The adapter says lost
    (:class:`AwsUnavailable`) also for a refusal that followed a try whose answer was lost, which may have
    applied; and says when no try reached AWS (``unsent``): the marker then goes, and the retry raises.

    Within the step's ``deadline``, every call up to SetDesiredCapacity starts only when it ends in time,
    and, once the marker is written, with time left to give the marker back
    (:data:`~spillway.model.calltime.MARKED_CALLS`): a raise not asked for want of time is ``unsent``
    (:class:`AwsUnavailable`), its marker given back, and the retry raises; never a marker left by a
    step the function's timeout stopped before it asked."""
    where = owner.where
    deadline.require(1, f"DescribeAutoScalingGroups({where})")
    asg = aws.describe_group(owner.region, owner.group)
    before, after = asg.DesiredCapacity, asg.DesiredCapacity + count
    item = RAISE_PREFIX + owner.owner
    # ``token`` tells this call's own marker from an earlier try's: a PutItem whose answer was lost is
    # sent again by botocore and finds the item it wrote itself (the claim answers not ``created``)
    value: dict[str, Any] = {"before": before, "after": after, "count": count, "group": where,
                             "at": format_time(now), "token": uuid4().hex}  # fmt: skip
    if existing is not None:
        value["existing"] = sorted(set(existing))
    deadline.require(MARKED_CALLS, f"the raise marker of {where}")  # written only with time to give it back
    marker, created = owner.ledger.claim(owner.cluster, item, value, expires=now + KEEP)
    if not created and marker.get("token") != value["token"]:  # a retry: never twice
        return _retried(aws, owner, marker, now, deadline)
    if after > asg.MaxSize:
        owner.ledger.release(owner.cluster, item)
        raise AsgLimitExceeded(
            f"{where}: desired capacity {before} + {count} is above MaxSize {asg.MaxSize}; not raised"
        )
    return _ask(aws, owner, (before, after, count), now, deadline)


def _ask(
    aws: Cloud,
    owner: Owner,
    raise_: tuple[int, int, int],
    now: datetime,
    deadline: Deadline,
    again: bool = False,
) -> dict[str, Any]:
    """Ask SetDesiredCapacity for the marked raise (``before``, ``after``, ``count``), ``again`` when an
    ask of it before may have applied; settle the marker by what AWS answers.

    A lost answer (:class:`AwsUnavailable`) read back at the raise's value landed. Read back where it
    started, it proves nothing: DescribeAutoScalingGroups may answer from before the update (AWS
    documents its EC2 API as eventually consistent, and states no bound for Auto Scaling's reads), so the
    raise is asked once more, at the same value: SetDesiredCapacity sets an absolute value, which asked
    again after it applied changes nothing (releasing the marker instead let the retry raise on a fresh
    read, a second time). Another owner's raise in the window makes it ambiguous before that (its
    marker is read first); one whose marker, read and set all fall between that read and the ask again
    is Auto Scaling's own window (no compare-and-set, as between any two raises). An ask again that
    fails, as any other ambiguity, keeps the marker unsettled. A first ask refused, or none of whose
    tries reached AWS, applied nothing: its marker goes; an ask again none of whose tries reached AWS
    (one the step had no time left for, typically after a lost answer that spent its tries' timeouts),
    or refused for now (:class:`AwsThrottled`: a throttle, ResourceContention, a scaling activity in
    progress; none of its tries lost), applied nothing either and leaves the marker as it was, for the
    step's retry to settle (:func:`_retried`): kept unsettled, the raise was never made."""
    before, after, count = raise_
    raised = {"status": "raised", "again": False, "before": before, "after": after, "count": count}
    try:
        aws.set_desired_capacity(owner.region, owner.group, after, before_call=deadline.before(MARKED_CALLS))
    except AwsUnavailable as exc:
        if exc.unsent and not again:  # it never reached AWS: not raised, the retry raises
            owner.ledger.release(owner.cluster, RAISE_PREFIX + owner.owner)
            raise
        if exc.unsent:  # the ask again never reached AWS (no time left for it): the retry asks again
            raise
        landed = _landed(aws, owner, before, after, now, deadline)
        if landed:  # AWS applied it; only the answer was lost
            _mark_asked(owner, now, deadline)
            return raised
        if landed is False and not again:  # still where it started, as far as this read can tell
            return _ask(aws, owner, raise_, now, deadline, again=True)
        _keep_unsettled(owner, now, deadline)  # applied or not, nobody can tell: kept (never twice)
        raise
    except AwsThrottled:  # refused for now, nothing applied: as an ask again never sent, the retry asks
        if not again:  # (the first ask: not raised, the retry raises)
            owner.ledger.release(owner.cluster, RAISE_PREFIX + owner.owner)
        raise
    except SpillwayError:
        if again:  # refused, but the ask before may have applied
            _keep_unsettled(owner, now, deadline)
        else:  # not raised: the retry must raise
            owner.ledger.release(owner.cluster, RAISE_PREFIX + owner.owner)
        raise
    _mark_asked(owner, now, deadline)
    return raised


def _retried(
    aws: Cloud, owner: Owner, marker: Mapping[str, object], now: datetime, deadline: Deadline
) -> dict[str, Any]:
    """A retried step that found ``owner``'s raise marker written by a try before it. Answered, settled or
    kept unsettled: nothing more. Else (the marker's write, or the step, failed before or while the raise
    was asked) it is settled as a lost answer is (:func:`_landed`): landed, recorded as asked; still where
    it started (which a stale read may say of a raise that applied), asked again at the marker's own
    value (:func:`_ask`), never on a fresh read of the group; ambiguous, kept unsettled."""
    said = {k: v for k, v in marker.items() if k not in ("existing", "token")}
    if _asked(owner):
        return {"status": "raised", "again": True, **said}
    landed = _marker_landed(aws, owner, marker, now, deadline)
    if landed is False:
        raise_ = (
            int(str(marker.get("before"))),
            int(str(marker.get("after"))),
            int(str(marker.get("count"))),
        )
        return _ask(aws, owner, raise_, now, deadline, again=True)
    if landed:
        _mark_asked(owner, now, deadline)
    else:
        _keep_unsettled(owner, now, deadline)
    return {"status": "raised", "again": True, **said}


def _marker_landed(
    aws: Cloud, owner: Owner, marker: Mapping[str, object], now: datetime, deadline: Deadline
) -> bool | None:
    """:func:`_landed` for the raise ``marker`` records (dated by it, else ``now``)."""
    raw = marker.get("at")
    at = parse_time(raw) if isinstance(raw, str) and raw else None
    before, after = int(str(marker.get("before"))), int(str(marker.get("after")))
    return _landed(aws, owner, before, after, at or now, deadline)


def settle_unanswered(aws: Cloud, owner: Owner, now: datetime, deadline: Deadline = NO_DEADLINE) -> None:
    """Settle, before a give-back reads it, ``owner``'s raise marker that no step answered, settled or
    kept unsettled: one left for the step's retry to ask again (an ask again none of whose tries
    reached AWS: :func:`_ask`) when every retry failed before it reached the marker (the group could
    not be read). Its raise may never have applied: read as made, its count given back came off the
    live value, another owner's capacity. Landed (:func:`_landed`), it is recorded as asked (and given
    back); else it is kept unsettled, and nothing of it is given back. An attach's marker
    (:func:`mark_attach`) is left as it is. Also a scale-up's whose SetDesired ended in error
    (:meth:`spillway.act.scale.ScaleSteps.next_round`): bare, it read as a settled owner's raise still
    waiting for its instances. Its calls are made within ``deadline`` as the raise's are."""
    item = RAISE_PREFIX + owner.owner
    marker = owner.ledger.claims(owner.cluster, item).get(item)
    if not marker or marker.get("by") or _asked(owner):
        return
    if _marker_landed(aws, owner, marker, now, deadline):
        _mark_asked(owner, now, deadline)
    else:
        _keep_unsettled(owner, now, deadline)


def _keep_unsettled(owner: Owner, now: datetime, deadline: Deadline) -> bool:
    """Mark ``owner``'s raise unsettled: kept, never raised again, and no capacity given back for it. Only
    when the write ends within ``deadline`` (:func:`_after_lost`): else the marker is left bare, which
    the step's retry (or, when none comes, :func:`settle_unanswered`) settles. Only while the marker is
    bare (:func:`_settle`): whether the raise stands unsettled (False: another's ``set#`` came first)."""
    _after_lost(deadline, 1, f"the unsettled mark of {owner.where}")
    return _settle(owner, UNSETTLED_PREFIX, SET_PREFIX, now)


def _mark_asked(owner: Owner, now: datetime, deadline: Deadline) -> bool:
    """Record that ``owner``'s raise was answered (or settled as landed). Best effort: without it a retry
    settles the marker as a lost answer (:func:`_retried`), never raising twice. So it is not written
    when the write would not end within ``deadline``: after a lost answer, the read-back (held to two
    calls, :func:`_landed`) may leave less than one, and a write Lambda's timeout cut failed the step
    ``Sandbox.Timedout``, which its state machine does not retry. Only while the marker is bare
    (:func:`_settle`): whether the raise stands as asked (False: another's ``unsettled#`` came first)."""
    if not deadline.fits(1):
        log.info("%s: the record that raise %s was asked is not written: no time left for it", owner.where,
                 owner.owner)  # fmt: skip
        return True
    with suppress(SpillwayError):
        return _settle(owner, SET_PREFIX, UNSETTLED_PREFIX, now)
    return True


def _settle(owner: Owner, verdict: str, other: str, now: datetime) -> bool:
    """Write ``owner``'s ``verdict`` (``set#`` or ``unsettled#``) only while neither it nor the ``other``
    is written (:meth:`~spillway.ports.Ledger.claim_unless`): a plan's :func:`settle_abandoned` and a
    step's settling (NextRound's or GiveBack's :func:`settle_unanswered`, a retry) may judge one bare
    marker at once, on reads of different times, and only the first verdict stands. Whether it did."""
    standing = owner.ledger.claim_unless(owner.cluster, verdict + owner.owner,
                                         {"group": owner.where, "at": format_time(now)},
                                         rival=other + owner.owner, expires=now + KEEP)  # fmt: skip
    return standing == verdict + owner.owner


def _asked(owner: Owner) -> bool:
    """Whether ``owner``'s raise was answered, settled as landed, or kept unsettled: a retry raises nothing."""
    # claims() reads every item starting with the prefix: an owner whose id extends this one's (group
    # gpu-a beside gpu in one plan) is another's, so the item is looked up exactly
    item = SET_PREFIX + owner.owner
    return item in owner.ledger.claims(owner.cluster, item) or owner.unsettled()


def mark_attach(owner: Owner, desired: int, count: int, now: datetime) -> None:
    """Record, before AttachInstances, that a fleet-mode gang raises the group by the ``count`` instances
    it attaches (Auto Scaling adds them to the desired capacity, ``desired`` when read): a marker as
    :func:`raise_once` writes, once per owner, so a lost raise of another owner meanwhile is not settled
    on it (:func:`_landed`)."""
    owner.ledger.claim(
        owner.cluster, RAISE_PREFIX + owner.owner,
        {"before": desired, "after": desired + count, "count": count, "group": owner.where,
         "at": format_time(now), "by": "AttachInstances"},
        expires=now + KEEP,
    )  # fmt: skip


def _after_lost(deadline: Deadline, calls: int, what: str) -> None:
    """:meth:`Deadline.require` for a call made after a raise whose answer was lost (its read-back, its
    settling write): :class:`AwsUnavailable`, never ``unsent`` (the raise did reach AWS, and its marker
    stays, for the step's retry to settle), when it would not end before the invocation does. Lambda
    stops a function at its Timeout mid-call, which these steps do not retry (``Sandbox.Timedout``)."""
    try:
        deadline.require(calls, what)
    except AwsUnavailable as exc:
        raise AwsUnavailable(f"{exc}; the raise's answer was lost and its marker is kept") from exc


def _landed(
    aws: Cloud, owner: Owner, before: int, after: int, at: datetime, deadline: Deadline = NO_DEADLINE
) -> bool | None:
    """Whether the raise from ``before`` to ``after`` whose marker is dated ``at``, and whose answer was
    lost, landed: True or False only when that is unambiguous, else None (the marker is kept).

    The rule: when another owner's raise marker of the group is dated within :data:`WINDOW` of ``at``
    (before or after it), the outcome is ambiguous: that owner may have raised on a value with or without
    this raise, and its own raise may or may not have applied (a marker is written before its raise, and
    one whose outcome is unknown is kept), so no arithmetic on the two values tells them apart. Alone in
    the window, the raise landed when the group is at ``after``, and False when it reads ``before``:
    no proof that it did not land, as the read may be older than the raise (:func:`_ask` asks it
    again at its own value rather than raise anew); any other value (the group moved by something that writes no marker: a drain's
    terminate with decrement, a give-back, a hand) is ambiguous too. A group or markers that cannot be
    read are ambiguous. Both reads are made only when they end within the step's ``deadline``, as its
    first ask (:func:`_after_lost`): no time left is no ambiguity, and the marker is left as it is."""
    _after_lost(deadline, 2, f"DescribeAutoScalingGroups({owner.where}) and its raise markers, read back")
    try:
        desired = aws.describe_group(owner.region, owner.group).DesiredCapacity
        markers = owner.ledger.claims(owner.cluster, RAISE_PREFIX)
    except SpillwayError:
        return None
    return _verdict(owner, (before, after), at, desired, markers)


def _verdict(
    owner: Owner,
    raise_: tuple[int, int],
    at: datetime,
    desired: int,
    markers: Mapping[str, Mapping[str, object]],
) -> bool | None:
    """:func:`_landed`'s rule for the raise (``before``, ``after``) marked at ``at``, on the group's
    ``desired`` capacity as read and the group's raise ``markers``."""
    if any(_in_window(value, at) for _, value in _others(owner, markers)):
        return None
    before, after = raise_
    return True if desired == after else False if desired == before else None


def settle_abandoned(
    ledger: Ledger, cluster: str, reads: Mapping[str, tuple[int, datetime]], now: datetime
) -> dict[str, str]:
    """Settle every raise marker left bare by a step that ended: ``raised`` or ``unsettled``, by owner.

    A marker is bare (no ``set#``, no ``unsettled#``) while its step asks: the step settles it, or leaves
    it to the step's retry (an ask again refused for now or not sent, no time left to read back), and
    the scale-up's NextRound or the gang's GiveBack settles one no retry did
    (:func:`settle_unanswered`). When none of those comes (their retries spent, the execution stopped or
    timed out) it stayed bare for its two days, and every other owner of its window read it as a settled
    raise still waiting for its instances (:func:`_awaited`): an unsettled owner left them unclaimed
    (a rollback gang's verify ended ``timeout`` with its instances launched, and was given back and
    its group backed off), a scale-up's check refilled none of its own lost instances there.

    ``reads``: each group's desired capacity (its key, ``<region>/<name>``) and when it was read (a
    plan's snapshot, observe's reads). A marker whose step may still have been running at the read (its
    time plus :data:`MARKER_STEP` later than the read) is left for its step; an attach's (``by``, not asked of
    SetDesiredCapacity) is left as it is. Else it is judged as a lost answer is (:func:`_landed`), on that
    read: at the raise's value and alone in its window, it landed and is recorded asked (its nodes are
    coming); else it is kept unsettled (never raised again, no capacity given back, awaited by no other
    owner), dated when the raise was marked, so the plans judge its state entry as such. One of a
    group no read names is left as it is. The verdict is written only while the marker is still bare
    (:func:`_settle`): one a step wrote since this read it stands, and is the one returned. A verdict
    it could not write (its transaction cancelled for a conflict with the step's, a throttle) ends its
    settling with that error, never returned as written: the plan logs it, and the next plan finds the
    step's verdict or judges again. A step retried after all finds it settled and asks nothing
    more; if its raise never applied, the plans send its pods elsewhere once ``scale_up_claim_minutes``
    pass, as for any unsettled raise."""
    markers = ledger.claims(cluster, RAISE_PREFIX)
    done = {*ledger.claims(cluster, SET_PREFIX), *ledger.claims(cluster, UNSETTLED_PREFIX)}
    settled: dict[str, str] = {}
    for item, value in sorted(markers.items()):
        name = item.removeprefix(RAISE_PREFIX)
        at = _bare_since(value, name, done)
        read = reads.get(str(value.get("group")))
        if at is None or read is None or aware(read[1]) < at + MARKER_STEP:
            continue  # answered, settled, an attach's; or its step may still be asking
        region, group = str(value.get("group")).split("/", 1)
        owner = Owner(ledger, cluster, region, group, name)
        before, after = int(str(value.get("before"))), int(str(value.get("after")))
        landed = _verdict(owner, (before, after), at, read[0], markers)
        if landed:  # written only while still bare: else the verdict a step wrote meanwhile stands
            landed = _settle(owner, SET_PREFIX, UNSETTLED_PREFIX, now)  # not _mark_asked: never suppressed
        else:
            landed = not _keep_unsettled(owner, at, NO_DEADLINE)
        settled[name] = "raised" if landed else "unsettled"
    return settled


def _bare_since(marker: Mapping[str, object], name: str, done: Collection[str]) -> datetime | None:
    """When the raise ``marker`` of owner ``name`` was marked, if no step answered, settled or kept it
    (``done``: the ``set#`` and ``unsettled#`` items) and it is SetDesiredCapacity's (not an attach's);
    else, or when it names no time or group, None."""
    raw, where = marker.get("at"), str(marker.get("group") or "")
    if marker.get("by") or "/" not in where or not isinstance(raw, str) or not raw:
        return None
    if SET_PREFIX + name in done or UNSETTLED_PREFIX + name in done:
        return None
    try:
        when = parse_time(raw)
    except ValueError:
        return None
    return aware(when) if when is not None else None


def _others(
    owner: Owner, markers: Mapping[str, Mapping[str, object]]
) -> Iterable[tuple[str, Mapping[str, object]]]:
    """The other owners' raise markers of ``owner``'s group: (owner id, marker)."""
    mine = RAISE_PREFIX + owner.owner
    for item, value in markers.items():
        if item != mine and value.get("group") == owner.where:
            yield item.removeprefix(RAISE_PREFIX), value


def _in_window(marker: Mapping[str, object], at: datetime | None) -> bool:
    """A marker dated within :data:`WINDOW` of ``at`` (or later); every marker when ``at`` is unknown. A
    marker without a date (written before markers said when) is older."""
    if at is None:
        return True
    raw = marker.get("at")
    when = parse_time(raw) if isinstance(raw, str) and raw else None
    return when is not None and aware(when) >= aware(at) - WINDOW


def own_instances(
    owner: Owner,
    candidates: Iterable[str],
    limit: int,
    now: datetime,
    replacements: Collection[str] = frozenset(),
    replacing: bool = False,
    refill: bool = False,
) -> list[str]:
    """The live instances this owner holds among ``candidates`` (the group's live instances that are
    new to it), claiming unclaimed ones until it holds ``limit``. An unsettled owner (its raise may never
    have applied) leaves as many unclaimed instances as the other, settled, owners of its window still
    wait for: it never takes one of theirs.

    ``replacements`` (:func:`~spillway.model.nodegroup.replacement_launches`) were launched by the group
    for an instance it took out of service, without a raise: none is claimed as an owner's launch. With
    ``replacing`` (a check, before anything of the owner's was terminated by it) an owner that lost
    some of the instances it claimed claims as many replacements, first: the capacity it added lives on
    there. (Which instance a replacement replaces, AWS does not say: one for another's lost instance may
    be taken while this owner's own is still coming; never more than it lost.) Launches it claims at
    most ``limit``, ever: one it lost leaves no room for another's launch, which would be terminated
    with its back-off or leave the other owner short. But with ``refill`` too (a scale-up's check: it
    terminates nothing) it claims, for those it lost, launches no other owner of its window waits for
    (:func:`_awaited`): the group's relaunch of one EC2 ended reads as a raise's launch in its activity
    ("a difference between desired and actual capacity"), and it carries this owner's capacity."""
    live = sorted(set(candidates))
    prefix = f"{OWNER_PREFIX}{owner.region}#"
    claims = owner.ledger.claims(owner.cluster, prefix)
    claimed = {item.removeprefix(prefix): str(v.get("owner")) for item, v in claims.items()}
    replacements = _replacements(owner, live, replacements, now)
    mine = [i for i in live if claimed.get(i) == owner.owner]
    if replacing:
        spare = [i for i in live if i in replacements and i not in claimed]
        mine += _claim_replacements(owner, live, spare, limit - len(mine), now)
    # never more launches than it raised, those it lost included: one lost (being replaced, or taken off
    # the desired capacity) or terminated by a first try of a back-off is no room for another's launch
    room = min(limit - len(mine), limit - _launched(owner, claims.values()))
    unclaimed = [i for i in live if i not in replacements and i not in claimed]
    mine += _claim_launches(owner, unclaimed, claimed, room, now)
    if refill:
        mine += _refill(owner, [i for i in unclaimed if i not in mine], claimed, limit - len(mine), now)
    return sorted(mine)


def _refill(
    owner: Owner, unclaimed: list[str], claimed: Mapping[str, str], short: int, now: datetime
) -> list[str]:
    """Claim up to ``short`` of the ``unclaimed`` launches for ``owner``, leaving as many as the other
    owners of its window still wait for (:func:`_awaited`), those they could claim last."""
    if short <= 0 or not unclaimed:
        return []
    spare = min(short, len(unclaimed) - _awaited(owner, claimed))
    got: list[str] = []
    for iid in _claim_order(owner, unclaimed, claimed) if spare > 0 else []:
        if len(got) >= spare:
            break
        if _claim(owner, f"{OWNER_PREFIX}{owner.region}#{iid}", now):
            got.append(iid)
    return got


def _launched(owner: Owner, claims: Iterable[Mapping[str, object]]) -> int:
    """How many instances ``owner`` ever claimed as its launches (not as replacements), of ``claims``."""
    return sum(1 for v in claims if v.get("owner") == owner.owner and not v.get(REPLACES))


def _replacements(owner: Owner, live: Collection[str], found: Collection[str], now: datetime) -> set[str]:
    """The group's replacements: those ``found`` in its launch activities now, recorded for the later
    checks once seen among the ``live`` candidates, and those any step recorded before."""
    prefix = f"{REPLACEMENT_PREFIX}{owner.region}#"
    known = {item.removeprefix(prefix) for item in owner.ledger.claims(owner.cluster, prefix)}
    for iid in sorted(set(found).intersection(live) - known):
        owner.ledger.claim(owner.cluster, prefix + iid, {"group": owner.where}, expires=now + KEEP)
    return known | set(found)


def _claim_launches(
    owner: Owner, unclaimed: list[str], claimed: Mapping[str, str], room: int, now: datetime
) -> list[str]:
    """Claim up to ``room`` of the ``unclaimed`` launches for ``owner``; an unsettled owner leaves as many
    as the other owners of its window still wait for (:func:`_awaited`)."""
    if room <= 0:
        return []
    if owner.unsettled():
        room = min(room, len(unclaimed) - _awaited(owner, claimed))
    got: list[str] = []
    # the order matters only when there are more to claim than room: else every one is claimed anyway,
    # and the markers (each with its owner's ``existing``) are not read
    for iid in _claim_order(owner, unclaimed, claimed) if len(unclaimed) > room else unclaimed:
        if len(got) >= room:
            break
        if _claim(owner, f"{OWNER_PREFIX}{owner.region}#{iid}", now):
            got.append(iid)
    return got


def _claim_replacements(
    owner: Owner, live: Collection[str], spare: Iterable[str], room: int, now: datetime
) -> list[str]:
    """Claim, among the unclaimed replacements ``spare``, as many as ``owner`` lost of its own launches
    (claimed, no longer among the ``live``) less the replacements it already runs, at most ``room``."""
    if room <= 0:
        return []
    held, live = owner.claimed(), set(live)
    lost = sum(1 for i, r in held.items() if not r and i not in live)
    lost -= sum(1 for i, r in held.items() if r and i in live)
    got: list[str] = []
    for iid in spare:
        if min(room, lost) - len(got) <= 0:
            break
        if _claim(owner, f"{OWNER_PREFIX}{owner.region}#{iid}", now, replaces=True):
            got.append(iid)
    return got


def _claim(owner: Owner, item: str, now: datetime, replaces: bool = False) -> bool:
    """Claim ``item`` for ``owner`` (conditional put, first wins): whether it is the owner's now."""
    claim: dict[str, object] = {"owner": owner.owner, **({REPLACES: True} if replaces else {})}
    value, _ = owner.ledger.claim(owner.cluster, item, claim, expires=now + KEEP)
    return value.get("owner") == owner.owner


def _claim_order(owner: Owner, unclaimed: list[str], claimed: Mapping[str, str]) -> list[str]:
    """``unclaimed`` in the order to claim them: first those the fewest other owners of the group that
    still wait for instances could claim (an owner whose marker keeps ``existing`` cannot claim those; one
    whose marker does not could claim any), then by id. Only owners of ``owner``'s window are read: an
    older one prepared before this owner, so it could claim every candidate and changes no order, and
    markers live two days."""
    markers = owner.ledger.claims(owner.cluster, RAISE_PREFIX)
    at = _marked_at(owner, markers)
    held = Counter(claimed.values())
    waiting: list[set[str] | None] = []
    for other, value in _others(owner, markers):
        if int(str(value.get("count", 0))) > held[other] and _in_window(value, at):
            existing = value.get("existing")
            waiting.append({str(i) for i in existing} if isinstance(existing, list) else None)
    if not waiting:
        return unclaimed
    return sorted(unclaimed, key=lambda i: (sum(1 for ex in waiting if ex is None or i not in ex), i))


def _marked_at(owner: Owner, markers: Mapping[str, Mapping[str, object]]) -> datetime | None:
    """When ``owner``'s raise marker says it raised; None without one (every marker is then in its window)."""
    raw = (markers.get(RAISE_PREFIX + owner.owner) or {}).get("at")
    return parse_time(raw) if isinstance(raw, str) and raw else None


def _awaited(owner: Owner, claimed: Mapping[str, str]) -> int:
    """The instances the other owners of ``owner``'s window whose raises are settled still wait for: each
    one's count less the instances it holds (``claimed``: instance -> owner)."""
    markers = owner.ledger.claims(owner.cluster, RAISE_PREFIX)
    unsettled = {
        i.removeprefix(UNSETTLED_PREFIX) for i in owner.ledger.claims(owner.cluster, UNSETTLED_PREFIX)
    }
    at = _marked_at(owner, markers)
    held = Counter(claimed.values())
    return sum(
        max(0, int(str(value.get("count", 0))) - held[other])
        for other, value in _others(owner, markers)
        if other not in unsettled and _in_window(value, at)
    )


def give_back_undelivered(
    aws: Cloud,
    owner: Owner,
    undelivered: int,
    now: datetime | None = None,
    deadline: Deadline = NO_DEADLINE,
) -> int | None:
    """Lower the desired capacity by ``undelivered`` relative to the live value (never below MinSize
    nor below the instances running). Returns the new desired capacity, or None when left as it was.
    Right while the group's Terminate process is suspended too: never below the instances running, the
    decrement asks Auto Scaling to terminate nothing, only to launch less. Once per owner: a retry
    gives back nothing more once a give-back was asked (``giveback#<owner>``), even if its answer was lost.
    Within the step's ``deadline`` as a raise is (:func:`raise_once`): a give-back not asked for want of
    time gives its marker back, and the retry gives back."""
    if undelivered <= 0:
        return None
    deadline.require(1, f"DescribeAutoScalingGroups({owner.where})")
    asg = aws.describe_group(owner.region, owner.group)
    live = sum(1 for i in asg.Instances if i.LifecycleState in LIVE_STATES)
    target = max(asg.MinSize, live, asg.DesiredCapacity - undelivered)
    if target >= asg.DesiredCapacity:
        return None
    # once per owner, as a raise: a retried back-off whose give-back was applied (its answer lost, or a
    # later call failed) would take the same capacity off the live value again, another owner's
    item = GIVEBACK_PREFIX + owner.owner
    now = now or datetime.now(UTC)
    mine = {"group": owner.where, "before": asg.DesiredCapacity, "after": target, "at": format_time(now),
            "token": uuid4().hex}  # fmt: skip
    deadline.require(MARKED_CALLS, f"the give-back marker of {owner.where}")
    stored, created = owner.ledger.claim(owner.cluster, item, mine, expires=now + KEEP)
    if not created and stored.get("token") != mine["token"]:  # not its own put sent again: a try before
        return None
    try:
        aws.set_desired_capacity(owner.region, owner.group, target, before_call=deadline.before(MARKED_CALLS))
    except AwsUnavailable as exc:
        if exc.unsent:  # it never reached AWS: the retry gives it back
            owner.ledger.release(owner.cluster, item)
        raise  # else it may have applied: kept, never given back twice
    except SpillwayError:
        owner.ledger.release(owner.cluster, item)  # refused: nothing given back, the retry gives it back
        raise
    return target
