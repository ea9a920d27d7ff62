"""The planner's state in DynamoDB, written under optimistic locking so that one planner acts at a time.

Key schema of the ``state`` table (partition key ``cluster``, sort key ``item``, both strings)::

    planner state     item = "state"             state (the State wire JSON), version (N), snapshot_key,
                                                 plan_id, executions (JSON), updated_at; when state and
                                                 executions together are large, state_z and
                                                 executions_z (zlib) instead: one item is at most 400 KB,
                                                 and one still over it compressed is refused before the
                                                 write (StateTooLarge, naming its size and biggest parts)
    group back-off    item = "backoff#<region>/<group>"   group, region, backoff_until (ISO, UTC, Z),
                                                 reason, expires_at (N, epoch seconds: the table's
                                                 TTL); an item "backoff#<group>" without ``group``
                                                 was written keyed by name alone (below)
    pool back-off     item = "backoff#pool#<capacity type>/<zone>/<type>"   the same attributes (a Spot
                                                 interruption backs off the spot pool, a launch failed
                                                 for capacity the pool that had none), and nodes (N,
                                                 only when over 1: a gang's fleet refused that many
                                                 at once; without it EC2 had none); an older
                                                 "backoff#pool#<zone>/<type>" is the spot pool;
                                                 both in the partition <cluster>#backoffs, so that
                                                 the interrupt function may write nothing of the
                                                 cluster's partition; builds before wrote them
                                                 there, where load still reads them
    claim             item = "raise#<owner>",    value (JSON), expires_at (N: TTL)
                      "unsettled#<owner>",
                      "owner#<region>#<id>",
                      "gangsweep#<region>#<id>" (in the partition <cluster>#gangsweep: its own, so
                                                 that the drain function may delete it and nothing of
                                                 the cluster's partition; builds before wrote it there),
                      "scaledown-failed#<drain>" (value {"at", "node"}: a plan's scale-down drain that
                                                 failed, merged into State.scale_down["failed"] at load),
                      "drain-ended#<plan>#<node>" (value {"at", "node", "planned_at"}: a plan's drain
                                                 that ended keeping its node, merged into
                                                 State.ended_drains at load; these two in the
                                                 partition <cluster>#drains, so that the drain function
                                                 may write nothing of the cluster's partition; builds
                                                 before wrote them there, where load still reads them)

**Claims** (:meth:`StateStore.claim`) are written once and never overwritten (``attribute_not_exists``):
a raise marker makes an execution's relative capacity raise happen once however often Step Functions
retries the step (an ``unsettled#<owner>`` claim beside it says the raise's answer was lost and
nobody can tell whether it applied), and an instance claim says which execution an instance of a shared group belongs to
(:mod:`spillway.act.claims`). A ``gangsweep#`` claim is a lease: one sweep of a gang orphan at a time
holds it for the length of its step (:mod:`spillway.act.gangsweep`), and one past its ``expires_at``
(its holder's Lambda died) is overwritten by the next.

**Claiming a tick.** :meth:`StateStore.commit` writes the new state with ``version = old + 1`` on the
condition that the stored version is still the one loaded (``attribute_not_exists`` for the first), in
one transaction with the plan record: two planners that loaded the same state cannot both commit; the
loser gets :class:`~spillway.errors.StateConflict` and must start nothing. The item also remembers which
snapshot was planned and which executions that plan starts, so a planner that failed after committing
can resume (start the same, deterministically named, executions again) instead of planning twice.

**Back-offs** are separate items written by the scale-up execution and the Spot notices (not by the
planner), in their own partition (:data:`~spillway.model.state.BACKOFFS_PARTITION`), so a back-off never
races the planner's version, and a role that writes them cannot replace the planner's state. Each expires (TTL) when its window ends. :meth:`load` merges them
into ``State.groups`` (the later ``backoff_until`` wins), or ``State.pools`` for a ``pool#`` name (an
older key without a capacity type is the spot pool: :func:`~spillway.model.state.normalize_pool_key`).
A group's item is keyed by its region and name (an Auto Scaling group's name is unique only in its
region); builds before wrote ``backoff#<group>`` with no ``group`` attribute but with the group's own
region, which is merged as that region's group of the name (the old plan read it as the group it
planned, but a Spot interruption backed off any managed group, the twin that plan refused too); one
without a region is merged keyed by name alone, for the plan to read as the group of that name in the
first region that has one (:func:`~spillway.model.state.keyed_by_region`). Such a build reading a
new item takes ``<region>/<group>`` for a group name no group has: it ignores it.
Two back-offs of one pool, in the item (:meth:`StateStore.put_backoff`'s condition) as in the merge,
keep the stronger evidence while it lasts (fewer ``nodes``), else the later
(:func:`~spillway.model.state.stronger_backoff`). An item whose ``backoff_until`` is missing or no ISO
time, whose group is empty or whose ``region`` is no AWS region, is skipped with a warning naming it and the field (advice nobody can read, as a pool key in no
known form), left in the table. A reader that predates pools merges those as a group
no group is named like: it ignores them; one that predates capacity types in pool keys finds no pool
under the keys it looks up: it ignores them too; one that predates ``nodes`` ignores the attribute and
holds the pool back for every launch, as it did.

**Version skew.** The reader is the tolerant side: every build reads what a newer build wrote (a
deploy rolled back; ``sam deploy`` updating the functions one at a time), and the writer writes only
what it knows. In the state item a field this build does not know, at any depth (a section, a field of
an entry such as ``pools.<pool>.nodes``), is left out and named in one warning
(:func:`~spillway.model.stored.load_stored`); a known field with a bad value is still
:class:`~spillway.errors.StateCorrupt` naming it. A back-off item's or a claim's attributes are read one
by one: one it does not know is ignored (a back-off's named in the same way). The older build then
commits the state without what it ignored. That is safe for every field there is, because each field's
absence means what the state meant before the field existed: the older build plans as it did before
the newer one ran, and what is lost is at most work done again or later:

* ``pools`` (and ``groups``): the back-off items themselves are separate and merged in at every load
  until they expire, so the state's copy is rebuilt; ``nodes`` dropped is 1 (EC2 had none), which holds
  the pool back for every launch: stronger, not weaker.
* ``underutilized``, ``joining``: the timer starts again (a consolidation, an unregistered instance's
  removal come later); ``bookings``: a booking without an entry is never revoked.
* ``raises``, ``gangs``, ``rooms``, ``shrunk``, a node's ``draining_since``: a claim forgotten, so a later
  plan may ask again for what is already coming (nodes for the same pods, room made again) or start a
  second drain of a node whose first has not cordoned it yet, as builds before these claims did; the
  surplus nodes are scaled down as idle.
* ``templates`` (or a part of an entry such as ``taints``, ``launched_from``): the group's template comes
  from its Auto Scaling group again, or is checked by type and age alone, as before it was learned.
* ``events``: a pod may be told again what it was already told.
* ``scale_down``: scale-down does not wait after a removal (a failure item is merged in again at load).
* ``ended_drains``: a copy of the ``drain-ended#`` items, merged in again at every load; a build before
  it reads none of them, and an ended drain's claim spends PodDisruptionBudget allowance until it lapses.

The drains' records (``scaledown-failed#``, ``drain-ended#``) moved from the cluster's own partition to
``<cluster>#drains``, the back-offs to ``<cluster>#backoffs``; :meth:`StateStore.load` reads both
partitions of each, so the items a build before wrote count while they last. A build rolled back to
one before reads only the cluster's own partition: a drain that failed or ended after the upgrade is
unknown to it, with the cost above (no wait after that failure, an ended drain's claim spending until it
lapses), and so is a back-off written after it (a launch may be tried once more where one just failed).
"""

from __future__ import annotations

import json
import logging
import re
import uuid
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from spillway.adapters.aws import SDK_ERRORS, map_aws_error
from spillway.adapters.plans_store import PlanStore
from spillway.errors import AwsThrottled, SpillwayError, StateConflict, StateCorrupt, StateTooLarge
from spillway.model.act import PlanRecord, StoredState, iso
from spillway.model.aws import REGION_FORM
from spillway.model.groupkey import GroupKey
from spillway.model.state import (
    BACKOFFS_PARTITION,
    DRAIN_ENDED_PREFIX,
    DRAINS_PARTITION,
    LATEST_TIME,
    OWNER_PREFIX,
    POOL_PREFIX,
    SCALE_DOWN_FAILED_PREFIX,
    UNSETTLED_PREFIX,
    GroupState,
    PoolState,
    State,
    merge_ended_drains,
    merge_scale_down_failures,
    merge_unsettled_raises,
    normalize_pool_key,
    stronger_backoff,
    usable_time,
)
from spillway.model.stored import load_stored, warn_unknown
from spillway.model.utc import aware
from spillway.observability import redact

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

STATE_ITEM = "state"
BACKOFF_PREFIX = "backoff#"
PLAIN_STATE_LIMIT = 256 * 1024
# DynamoDB's limit on one item: attribute names and values together, as item_size measures them
ITEM_LIMIT = 400 * 1024
CONDITION_FAILED = "ConditionalCheckFailed"
# a TransactWriteItems cancelled because another transaction was writing one of its items at that moment
# (DynamoDB API Reference, TransactionCanceledException): nothing was written, as for a lost race
TRANSACTION_CONFLICT = "TransactionConflict"
# ... or for capacity: nothing was written, the call may be made again (botocore retries neither)
TRANSACTION_THROTTLED = frozenset({"ThrottlingError", "ProvisionedThroughputExceeded"})
# what a back-off item holds (put_backoff); another attribute is a newer build's, ignored
_REGION = re.compile(REGION_FORM)  # a back-off item's region, as the rest of the code reads one
BACKOFF_ATTRIBUTES = frozenset(
    {"cluster", "item", "group", "backoff_until", "reason", "region", "expires_at", "nodes"}
)


def _parse(value: str) -> datetime:
    """An item's ISO time; ValueError when it is none, or one the state cannot hold (``usable_time``: no
    delay can be added to it), so that each reader skips the item and names it."""
    return usable_time(datetime.fromisoformat(value.replace("Z", "+00:00")))


@dataclass(frozen=True, slots=True)
class Backoff:
    group: str  # a group's name, or ``pool#`` and a pool's key
    until: datetime
    reason: str
    region: str = ""  # a group's; "" for an item keyed by the group's name alone (an older build's)
    nodes: int = 1  # a pool's: how many nodes EC2 refused at once (PoolState.nodes)


def merge_backoffs(state: State, backoffs: Sequence[Backoff], now: datetime | None = None) -> State:
    """``state`` with each back-off item applied: of a group's two, the later ``backoff_until`` wins; of
    a pool's, :func:`~spillway.model.state.stronger_backoff` (``now``: one over by then gives way). A
    pool item whose key names no pool is skipped with a warning: a back-off is advice, and one nobody
    can read costs at most a launch in that pool, where refusing the state would stop every plan."""
    if not backoffs:
        return state
    groups = dict(state.groups)
    pools = dict(state.pools)
    for b in backoffs:
        into, name = (
            (pools, b.group[len(POOL_PREFIX) :]) if b.group.startswith(POOL_PREFIX) else (groups, b.group)
        )
        if into is pools:
            try:
                name = normalize_pool_key(name)
            except ValueError as exc:  # advice nobody can read: skipped, not a state that stops every plan
                log.warning("back-off item %s skipped: %s", b.group[:200], exc)
                continue
        current = into.get(name)
        until = aware(b.until)
        if into is pools:
            new = PoolState(backoff_until=until, reason=b.reason, nodes=b.nodes)
            pools[name] = new if current is None else stronger_backoff(pools[name], new, now)
            continue
        if b.region:  # keyed by region and name; else by name alone, which the plan maps to a region
            name = GroupKey(b.region, b.group).stored
            current = groups.get(name)
        if current is None or aware(current.backoff_until) < until:
            groups[name] = GroupState(
                backoff_until=until, reason=b.reason, group=b.group if b.region else "", region=b.region
            )
    # model_copy keeps every other part of the state (the pod-event ledger) as it was stored
    return state.model_copy(
        update={
            "nodes": dict(state.nodes),
            "groups": dict(sorted(groups.items())),
            "pools": dict(sorted(pools.items())),
        }
    )


# The state table's partition, beside the cluster's own (which every plan's load reads whole), of the
# marks that an execution's start was reported (first_start): one item per execution, named by its ARN.
STARTED_PARTITION = "{cluster}#started"
# How long a mark is kept: far past CLOCK_SKEW (spillway.adapters.sfn), the only window in which the
# mark, not the answer's startDate, tells a duplicate start from the first
STARTED_KEPT = timedelta(hours=1)


def first_start(
    store: StateStore, cluster: str, clock: Callable[[], datetime] | None = None
) -> Callable[[str], bool]:
    """``Executions``' ``first``: whether this caller is the first to report the execution ``arn``
    started. It claims the execution's mark with a token of its own (a put botocore sent again is still
    its own: :meth:`StateStore.claim`); a mark with another token is another caller's, whose start this
    one duplicates. A mark that cannot be written reports a start all the same, as before the mark: a
    rare start counted twice is better than an execution started after a plan's commit failing it."""
    now_of = clock or (lambda: datetime.now(UTC))

    def first(arn: str) -> bool:
        token, now = uuid.uuid4().hex, now_of()
        try:
            stored, _ = store.claim(
                STARTED_PARTITION.format(cluster=cluster),
                arn,
                {"token": token, "at": iso(now)},
                expires=now + STARTED_KEPT,
            )
        except SpillwayError as exc:
            log.warning("start of %s reported without its mark: %s", arn, exc)
            return True
        return stored.get("token") == token

    return first


def _epoch(value: datetime) -> int:
    """Epoch seconds, as the table's TTL attribute ``expires_at`` holds them."""
    return int(aware(value).timestamp())


class StateStore:
    def __init__(self, client: DynamoDBClient, table: str, *, plans: PlanStore | None = None) -> None:
        self.client = client
        self.table = table
        self.plans = plans

    # --- reading -------------------------------------------------------------------------------

    def load(
        self, cluster: str, now: datetime | None = None, before_call: Callable[[str], None] | None = None
    ) -> StoredState:
        """The state with every back-off merged in (consistent read); an empty state at version 0.
        ``now``: a pool's back-off over by then gives way to one still lasting (:func:`merge_backoffs`).
        Three Queries at least (the cluster's partition, its drains' and its back-offs'), one call per
        page: ``before_call`` is called with each one's name before it is sent, and may raise (a step's
        deadline: that query is not sent)."""
        items = self._items(cluster, before_call=before_call)
        # the drains' records and the back-offs in their partitions, and those a build before wrote in
        # the cluster's own
        drains = self._items(DRAINS_PARTITION.format(cluster=cluster), before_call=before_call)
        failures, ended = _drain_records([*drains, *items])
        backoff_items = self._items(
            BACKOFFS_PARTITION.format(cluster=cluster), prefix=BACKOFF_PREFIX, before_call=before_call
        )
        stored = next((_stored(i) for i in items if i["item"]["S"] == STATE_ITEM), StoredState())
        backoffs: list[Backoff] = []
        unknown: list[str] = []  # back-off attributes a newer build added: ignored, named once
        for item in [*backoff_items, *items]:
            name = item["item"]["S"]
            if name.startswith(BACKOFF_PREFIX):
                try:
                    backoffs.append(_backoff(item))
                except StateCorrupt as exc:  # advice nobody can read: skipped, as merge_backoffs does
                    log.warning("%s; skipped (the item is left as it is)", exc)
                    continue
                unknown.extend(f"{name}.{a}" for a in sorted(set(item) - BACKOFF_ATTRIBUTES))
        warn_unknown(f"back-off items of {cluster}", unknown, log.warning)
        state = merge_scale_down_failures(merge_backoffs(stored.state, backoffs, now), failures)
        state = merge_unsettled_raises(merge_ended_drains(state, ended), _unsettled_raises(items))
        return StoredState(
            state=state,
            version=stored.version,
            snapshot_key=stored.snapshot_key,
            plan_id=stored.plan_id,
            executions=stored.executions,
        )

    def backoffs(self, cluster: str) -> list[Backoff]:
        """The back-off items, in their partition and those a build before wrote in the cluster's own."""
        partition = BACKOFFS_PARTITION.format(cluster=cluster)
        items = [*self._items(partition, prefix=BACKOFF_PREFIX), *self._items(cluster, prefix=BACKOFF_PREFIX)]
        return [_backoff(i) for i in items]

    def _items(
        self, cluster: str, prefix: str | None = None, before_call: Callable[[str], None] | None = None
    ) -> list[dict[str, Any]]:
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "#c = :c",
            "ExpressionAttributeNames": {"#c": "cluster"},
            "ExpressionAttributeValues": {":c": {"S": cluster}},
            "ConsistentRead": True,
        }
        if prefix:
            kwargs["KeyConditionExpression"] += " AND begins_with(#i, :p)"
            kwargs["ExpressionAttributeNames"]["#i"] = "item"
            kwargs["ExpressionAttributeValues"][":p"] = {"S": prefix}
        out: list[dict[str, Any]] = []
        while True:
            if before_call is not None:
                before_call(f"Query state of {cluster}")
            try:
                resp = self.client.query(**kwargs)
            except SDK_ERRORS as exc:
                raise map_aws_error(exc, f"Query state of {cluster}") from exc
            out.extend(resp.get("Items", []))
            last = resp.get("LastEvaluatedKey")
            if not last:
                return out
            kwargs["ExclusiveStartKey"] = last

    # --- writing -------------------------------------------------------------------------------

    def commit(
        self,
        cluster: str,
        state: State,
        *,
        expected_version: int,
        snapshot_key: str,
        plan_id: str,
        executions: Sequence[Mapping[str, Any]] = (),
        now: datetime,
        plan: PlanRecord | None = None,
    ) -> int:
        """Write ``state`` as version ``expected_version + 1`` if the stored version is still
        ``expected_version``, together with ``plan`` (one transaction). Returns the new version;
        :class:`StateConflict` when another planner committed first."""
        version = expected_version + 1
        item = self._state_item(cluster, state, version, snapshot_key, plan_id, executions, now)
        condition: dict[str, Any]
        if expected_version == 0:
            condition = {
                "ConditionExpression": "attribute_not_exists(#i)",
                "ExpressionAttributeNames": {"#i": "item"},
            }
        else:
            condition = {
                "ConditionExpression": "#v = :v",
                "ExpressionAttributeNames": {"#v": "version"},
                "ExpressionAttributeValues": {":v": {"N": str(expected_version)}},
            }
        what = f"commit state of {cluster} (version {expected_version} -> {version})"
        try:
            if plan is None:
                self.client.put_item(TableName=self.table, Item=item, **condition)
            else:
                if self.plans is None:
                    raise ValueError("StateStore needs a PlanStore to commit a plan with the state")
                items: list[Any] = [
                    {"Put": {"TableName": self.table, "Item": item, **condition}},
                    self.plans.put_request(plan),
                ]
                self.client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if _condition_failed(exc):
                raise StateConflict(
                    f"{what}: another planner committed first (the stored version is no longer "
                    f"{expected_version}); this one starts nothing"
                ) from exc
            cancelled = _cancelled_for(exc)
            if TRANSACTION_CONFLICT in cancelled:
                raise StateConflict(
                    f"{what}: another transaction was writing the state at the same moment (TransactionConflict): "
                    "nothing was written; this one starts nothing"
                ) from exc
            if cancelled & TRANSACTION_THROTTLED:
                raise AwsThrottled(f"{what}: TransactionCanceledException: {sorted(cancelled)}") from exc
            raise map_aws_error(exc, what) from exc
        except SDK_ERRORS as exc:
            raise map_aws_error(exc, what) from exc
        return version

    def _state_item(
        self,
        cluster: str,
        state: State,
        version: int,
        snapshot_key: str,
        plan_id: str,
        executions: Sequence[Mapping[str, Any]],
        now: datetime,
    ) -> dict[str, Any]:
        item: dict[str, Any] = {
            "cluster": {"S": cluster},
            "item": {"S": STATE_ITEM},
            "version": {"N": str(version)},
            "snapshot_key": {"S": snapshot_key},
            "plan_id": {"S": plan_id},
            "updated_at": {"S": iso(now)},
        }
        text = json.dumps(state.to_wire(), separators=(",", ":")).encode()
        started = json.dumps(list(executions), separators=(",", ":"), sort_keys=True).encode()
        # DynamoDB refuses an item over 400 KB: state and executions are compressed together once
        # their sum would pass the limit (the executions of a large scale-down are big too)
        if len(text) + len(started) <= PLAIN_STATE_LIMIT:
            item["state"] = {"S": text.decode()}
            item["executions"] = {"S": started.decode()}
        else:
            item["state_z"] = {"B": zlib.compress(text, 6)}
            item["executions_z"] = {"B": zlib.compress(started, 6)}
        size = item_size(item)
        if size > ITEM_LIMIT:
            raise StateTooLarge(
                f"state of {cluster}: the state item is {size:,} bytes even compressed, over DynamoDB's "
                f"400 KB item limit ({ITEM_LIMIT:,} bytes), so it is not written (the stored state stays as "
                f"it was); its biggest parts, as JSON: {_biggest_parts(state, executions)}"
            )
        return item

    def save_plan(self, record: PlanRecord) -> None:
        """A plan record on its own (an overflow re-plan that raises nothing: it changes no state)."""
        if self.plans is None:
            raise ValueError("StateStore needs a PlanStore to save a plan")
        self.plans.save(record)

    def load_plan(self, cluster: str, key: str) -> PlanRecord | None:
        """The plan record under ``key`` (a consistent read), None when there is none: an overflow
        re-plan's retry looks for the record its own commit wrote (:meth:`commit` writes it in the state's
        transaction, so it is there exactly when that commit landed)."""
        if self.plans is None:
            raise ValueError("StateStore needs a PlanStore to read a plan")
        return self.plans.get(cluster, key)

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
        """Back the group (or ``pool#`` pool) off until ``until`` (the item expires then). False,
        changing nothing, when a later back-off is already stored; for a pool, when one stronger
        (fewer ``nodes``: how many EC2 refused at once) or as strong and later is, but for one over by
        ``now`` (:func:`~spillway.model.state.stronger_backoff`, as a condition: one item per pool).
        One over by ``now`` already (a notice handled late) is no evidence: not written, as
        :func:`~spillway.model.state.stronger_backoff` keeps a live one over it (the condition, which
        prefers fewer nodes whatever their expiry, would let it replace a gang's live back-off).

        The item goes to the cluster's back-offs' partition (:data:`~spillway.model.state.BACKOFFS_PARTITION`),
        which the store names itself from ``cluster``: no caller can put one in the cluster's own
        partition (the state item's) or in another. ``ValueError`` naming ``cluster`` when it is no
        cluster's name (empty, or a partition already: one with ``#``), as no load would read the item."""
        if not cluster or "#" in cluster:
            raise ValueError(
                f"put_backoff: cluster must be the cluster's name (its back-offs' partition is named from it), "
                f"got {cluster[:80]!r}"
            )
        if now is not None and aware(until) <= aware(now):
            return False
        pool = group.startswith(POOL_PREFIX)
        partition = BACKOFFS_PARTITION.format(cluster=cluster)
        item = {
            "cluster": {"S": partition},
            "item": {"S": BACKOFF_PREFIX + (group if pool else GroupKey(region, group).stored)},
            **({} if pool else {"group": {"S": group}}),
            "backoff_until": {"S": iso(until)},
            "reason": {"S": redact(reason)[:1000]},  # an error's text, kept till the back-off ends
            "region": {"S": region},
            "expires_at": {"N": str(int(aware(until).timestamp()))},
        }
        if nodes > 1:  # without it EC2 had none: the items of before, which older readers take as such
            item["nodes"] = {"N": str(nodes)}
        try:
            self.client.put_item(TableName=self.table, Item=item, **_backoff_condition(until, nodes, now))
        except ClientError as exc:
            if _condition_failed(exc):
                return False
            raise map_aws_error(exc, f"PutItem back-off of {cluster}/{group}") from exc
        except SDK_ERRORS as exc:
            raise map_aws_error(exc, f"PutItem back-off of {cluster}/{group}") from exc
        return True

    # --- claims ---------------------------------------------------------------------------------

    def claim(
        self,
        cluster: str,
        item: str,
        value: Mapping[str, object],
        *,
        expires: datetime,
        now: datetime | None = None,
    ) -> tuple[dict[str, object], bool]:
        """Write ``value`` under ``item`` unless the item exists. Returns the stored value and whether
        this call wrote it (False: an earlier claim stands, returned as it was stored). False too when
        this call's own put landed but its answer was lost and botocore sent it again: the stored value
        then is ``value``, so a caller tells its own claim by the value (an owner, a token), not the flag.

        With ``now`` the claim is a lease: one whose ``expires`` is at or before ``now`` counts as none
        and is overwritten (its holder is gone; DynamoDB's TTL deletes an expired item only some time
        later, often days). Without it a claim stands until it is released or deleted."""
        what = f"claim {cluster}/{item}"
        record = _claim_record(cluster, item, value, expires)
        condition: dict[str, Any] = {
            "ConditionExpression": "attribute_not_exists(#i)",
            "ExpressionAttributeNames": {"#i": "item"},
        }
        if now is not None:
            condition = {
                "ConditionExpression": "attribute_not_exists(#i) OR #e <= :now",
                "ExpressionAttributeNames": {"#i": "item", "#e": "expires_at"},
                "ExpressionAttributeValues": {":now": {"N": str(_epoch(now))}},
            }
        try:
            self.client.put_item(TableName=self.table, Item=record, **condition)
            return dict(value), True
        except ClientError as exc:
            if not _condition_failed(exc):
                raise map_aws_error(exc, what) from exc
        except SDK_ERRORS as exc:
            raise map_aws_error(exc, what) from exc
        got = self._claim_item(cluster, item, what)
        if got is None:  # released between the put and the read: the caller tries again
            raise StateConflict(f"{what}: the claim went away while it was read")
        return _claim_value(got), False

    def _claim_item(self, cluster: str, item: str, what: str) -> dict[str, Any] | None:
        """The claim ``item`` as stored (a consistent read), None when there is none."""
        try:
            got = self.client.get_item(
                TableName=self.table,
                Key={"cluster": {"S": cluster}, "item": {"S": item}},
                ConsistentRead=True,
            )
        except SDK_ERRORS as exc:
            raise map_aws_error(exc, what) from exc
        return dict(got["Item"]) if "Item" in got else None

    def claim_unless(
        self, cluster: str, item: str, value: Mapping[str, object], *, rival: str, expires: datetime
    ) -> str:
        """Write ``value`` under ``item`` only while neither ``item`` nor ``rival`` exists: one
        TransactWriteItems, a Put conditional on its own item's absence and a ConditionCheck of the
        rival's (two items of one partition; the transaction applies both or neither). Returns the one of
        the two that stands: ``item`` when written, or when it was there already (written by another, or
        by this call's own try whose answer was lost: botocore sends the transaction again with the same
        ClientRequestToken, which DynamoDB answers as applied within ten minutes), else ``rival``. A
        transaction cancelled for a conflict with another one on these items, or for capacity, wrote
        nothing: :class:`AwsThrottled`, for the caller's retry."""
        what = f"claim {cluster}/{item} unless {rival}"
        absent: dict[str, Any] = {
            "ConditionExpression": "attribute_not_exists(#i)",
            "ExpressionAttributeNames": {"#i": "item"},
        }
        record = _claim_record(cluster, item, value, expires)
        key = {"cluster": {"S": cluster}, "item": {"S": rival}}
        items: list[Any] = [
            {"Put": {"TableName": self.table, "Item": record, **absent}},
            {"ConditionCheck": {"TableName": self.table, "Key": key, **absent}},
        ]
        try:
            self.client.transact_write_items(TransactItems=items)
            return item
        except ClientError as exc:
            if not _condition_failed(exc):
                cancelled = _cancelled_for(exc)
                if TRANSACTION_CONFLICT in cancelled or cancelled & TRANSACTION_THROTTLED:
                    raise AwsThrottled(f"{what}: TransactionCanceledException: {sorted(cancelled)}") from exc
                raise map_aws_error(exc, what) from exc
        except SDK_ERRORS as exc:
            raise map_aws_error(exc, what) from exc
        # one of the two conditions failed: which item is there (a verdict is never released)
        return item if self._claim_item(cluster, item, what) is not None else rival

    def release(self, cluster: str, item: str, *, held_as: Mapping[str, object] | None = None) -> bool:
        """Delete a claim (a raise that did not happen gives its marker back). With ``held_as``, only
        while the stored value is that one (a lease's holder letting go of its own claim: one another
        holder took over after it lapsed stays), and then whether this call deleted it: False when the
        claim held another value, or was gone already (a delete whose answer was lost and that botocore
        sent again finds none). Without it, True whether or not there was a claim (DeleteItem does not
        say)."""
        what = f"release {cluster}/{item}"
        condition: dict[str, Any] = {}
        if held_as is not None:
            condition = {
                "ConditionExpression": "#v = :v",
                "ExpressionAttributeNames": {"#v": "value"},
                "ExpressionAttributeValues": {":v": {"S": _claim_json(held_as)}},
            }
        try:
            self.client.delete_item(
                TableName=self.table, Key={"cluster": {"S": cluster}, "item": {"S": item}}, **condition
            )
        except ClientError as exc:
            if held_as is not None and _condition_failed(exc):
                return False
            raise map_aws_error(exc, what) from exc
        except SDK_ERRORS as exc:
            raise map_aws_error(exc, what) from exc
        return True

    def claims(self, cluster: str, prefix: str) -> dict[str, dict[str, object]]:
        """Every claim whose item starts with ``prefix``: item -> value."""
        return {i["item"]["S"]: _claim_value(i) for i in self._items(cluster, prefix=prefix)}


def _claim_record(cluster: str, item: str, value: Mapping[str, object], expires: datetime) -> dict[str, Any]:
    """A claim's item as it is put: its value as JSON, its expiry for the table's TTL."""
    return {
        "cluster": {"S": cluster},
        "item": {"S": item},
        "value": {"S": _claim_json(value)},
        "expires_at": {"N": str(_epoch(expires))},
    }


def _failed_at(item: Mapping[str, Any]) -> list[datetime]:
    """When a failed scale-down drain's item says it failed (its claim value's ``at``); none, with a
    warning naming the item, when that is no ISO time: a wait nobody can read costs at most a drain."""
    try:
        at = _claim_value(item).get("at")
        if isinstance(at, str):
            return [aware(_parse(at))]
    except (StateCorrupt, ValueError):
        pass
    log.warning(
        "scale-down failure item %s skipped: value.at is no ISO time before %d",
        str(item["item"]["S"])[:200],
        LATEST_TIME.year,
    )
    return []


def _ended(item: Mapping[str, Any]) -> list[tuple[str, datetime]]:
    """The node an ended drain's item names and the time of the plan whose claim that drain was (its
    claim value's ``node`` and ``planned_at``; ``at``, when it ended, matches no claim: a newer plan may
    have claimed the node before an older drain ended); none, with a warning naming the item, when they
    are not a name and an ISO time: the claim then spends until it lapses, as before."""
    try:
        value = _claim_value(item)
        node, planned = value.get("node"), value.get("planned_at")
        if isinstance(node, str) and node and isinstance(planned, str):
            return [(node, aware(_parse(planned)))]
    except (StateCorrupt, ValueError):
        pass
    log.warning(
        "ended drain item %s skipped: value.node or value.planned_at unreadable", str(item["item"]["S"])[:200]
    )
    return []


def _unsettled_raises(items: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, datetime]]:
    """The raises a scale-up kept unsettled (``unsettled#<owner>``: the owner, the group's key and when)
    whose owner claimed no instance of its group (``owner#<region>#<instance>``): an instance claimed for
    it says the raise applied. A value that cannot be read is skipped with a warning (the raise counts as
    before)."""
    kept: dict[str, tuple[str, datetime]] = {}
    holders: set[object] = set()
    for item in items:
        name = item["item"]["S"]
        try:
            if name.startswith(OWNER_PREFIX):
                holders.add(_claim_value(item).get("owner"))
            elif name.startswith(UNSETTLED_PREFIX):
                kept[name.removeprefix(UNSETTLED_PREFIX)] = _kept_unsettled(item)
        except (StateCorrupt, ValueError) as exc:
            log.warning("raise ledger item %s skipped: %s", str(name)[:200], exc)
    return [(owner, *raised) for owner, raised in sorted(kept.items()) if owner not in holders]


def _kept_unsettled(item: Mapping[str, Any]) -> tuple[str, datetime]:
    """An ``unsettled#<owner>`` item's group key and time; ValueError when they cannot be read."""
    value = _claim_value(item)
    group, at = value.get("group"), value.get("at")
    if not isinstance(group, str) or not isinstance(at, str):
        raise ValueError("value.group or value.at unreadable")
    return group, aware(_parse(at))


def _drain_records(items: Sequence[Mapping[str, Any]]) -> tuple[list[datetime], list[tuple[str, datetime]]]:
    """The times of the failed scale-down drains (State.scale_down) and the plans' drains that ended
    keeping their node (State.ended_drains) among ``items``; any other item is not theirs."""
    failures: list[datetime] = []
    ended: list[tuple[str, datetime]] = []
    for item in items:
        name = item["item"]["S"]
        if name.startswith(SCALE_DOWN_FAILED_PREFIX):
            failures.extend(_failed_at(item))
        elif name.startswith(DRAIN_ENDED_PREFIX):
            ended.extend(_ended(item))
    return failures, ended


def _claim_json(value: Mapping[str, object]) -> str:
    """A claim's value as the item stores it (and a holder's release compares it): compact, keys sorted."""
    return json.dumps(dict(value), separators=(",", ":"), sort_keys=True)


def _claim_value(item: Mapping[str, Any]) -> dict[str, object]:
    try:
        value = json.loads(item["value"]["S"])
    except (KeyError, TypeError, ValueError) as exc:
        raise StateCorrupt(f"claim {item.get('item')}: malformed ({type(exc).__name__})") from exc
    if not isinstance(value, dict):
        raise StateCorrupt(f"claim {item.get('item')}: not an object")
    return value


def item_size(item: Mapping[str, Mapping[str, Any]]) -> int:
    """An item's size as DynamoDB counts it against its 400 KB limit ("Item sizes and formats"): each
    attribute's name (UTF-8 bytes) plus its value: a string's UTF-8 bytes, a binary's raw bytes, a
    number's significant digits, two to a byte, plus one. The state item holds only those three types."""
    total = 0
    for name, value in item.items():
        total += len(name.encode())
        if "S" in value:
            total += len(str(value["S"]).encode())
        elif "B" in value:
            total += len(bytes(value["B"]))
        elif "N" in value:
            digits = str(value["N"]).lstrip("-").replace(".", "").strip("0")
            total += (len(digits) + 1) // 2 + 1
        else:
            raise ValueError(f"item_size: attribute {name} is of a type the state item does not use")
    return total


def _biggest_parts(state: State, executions: Sequence[Mapping[str, Any]]) -> str:
    """The three largest parts of a state item, by their JSON size: ``state.nodes (14000 entries,
    1,050,000 bytes)``, ..."""
    parts = [(f"state.{key}", len(value), len(_compact(value))) for key, value in state.to_wire().items()]
    parts.append(("executions", len(executions), len(_compact(list(executions)))))
    parts.sort(key=lambda p: (-p[2], p[0]))
    return ", ".join(f"{name} ({count} entries, {size:,} bytes)" for name, count, size in parts[:3])


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


def _cancelled_for(exc: ClientError) -> set[str]:
    """The reasons a TransactWriteItems was cancelled for (``CancellationReasons``' codes, ``None`` left
    out); none for another error."""
    if str(exc.response.get("Error", {}).get("Code", "")) != "TransactionCanceledException":
        return set()
    reasons = exc.response.get("CancellationReasons") or []
    return {str(r.get("Code")) for r in reasons if r.get("Code") not in (None, "None")}


def _condition_failed(exc: ClientError) -> bool:
    err = exc.response.get("Error", {})
    code = str(err.get("Code", ""))
    if code == "ConditionalCheckFailedException":
        return True
    if code == "TransactionCanceledException":
        reasons = exc.response.get("CancellationReasons") or []
        if any(r.get("Code") == CONDITION_FAILED for r in reasons):
            return True
        return CONDITION_FAILED in str(err.get("Message", ""))
    return False


def _stored(item: Mapping[str, Any]) -> StoredState:
    cluster = item["cluster"]["S"]
    try:
        if "state" in item:
            wire = json.loads(item["state"]["S"])
        elif "state_z" in item:
            wire = json.loads(zlib.decompress(bytes(item["state_z"]["B"])))
        else:
            wire = {}
        state, unknown = load_stored(State, wire)
        warn_unknown(f"state of {cluster}", unknown, log.warning)
        if "executions_z" in item:
            executions = json.loads(zlib.decompress(bytes(item["executions_z"]["B"])))
        else:
            executions = json.loads(item.get("executions", {}).get("S", "[]"))
        return StoredState(
            state=state,
            version=int(item["version"]["N"]),
            snapshot_key=item.get("snapshot_key", {}).get("S"),
            plan_id=item.get("plan_id", {}).get("S"),
            executions=tuple(executions),
        )
    except (ValueError, KeyError, TypeError, zlib.error) as exc:
        raise StateCorrupt(f"state of {cluster}: malformed state item ({type(exc).__name__}: {exc})") from exc


def _backoff_condition(until: datetime, nodes: int, now: datetime | None) -> dict[str, Any]:
    """When a back-off replaces the stored one (:func:`~spillway.model.state.stronger_backoff`): none
    stored; one over by ``now``; one weaker (more ``nodes``; none stored is 1); one as strong or weaker
    expiring earlier. ISO UTC strings of one fixed format compare as times."""
    values: dict[str, Any] = {":u": {"S": iso(until)}, ":n": {"N": str(nodes)}}
    # a stored item without nodes is 1: as strong or weaker than any, weaker than none
    as_strong = "#u < :u" if nodes <= 1 else "(#u < :u AND #n >= :n)"
    condition = f"attribute_not_exists(#u) OR #n > :n OR {as_strong}"
    if now is not None:
        condition += " OR #u <= :now"
        values[":now"] = {"S": iso(now)}
    return {
        "ConditionExpression": condition,
        "ExpressionAttributeNames": {"#u": "backoff_until", "#n": "nodes"},
        "ExpressionAttributeValues": values,
    }


def _backoff(item: Mapping[str, Any]) -> Backoff:
    """A back-off item read: a group's names its group and region; one without ``group`` (a pool's, or
    a group's written keyed by name alone) is named by its key. Every build wrote the group's own region
    in ``region`` (a Spot interruption's back-off of a group the plan then refused too), so a group's
    item keyed by name alone is of the group of that region; one without a region is read as the first
    region's group of the name (:func:`~spillway.model.state.keyed_by_region`)."""
    key = item["item"]["S"].removeprefix(BACKOFF_PREFIX)
    named = item.get("group", {}).get("S")
    group = named if named is not None else key
    region = item.get("region", {}).get("S", "")
    if not group or (region and not _REGION.fullmatch(region)):
        field = "group" if not group else "region"
        shown = json.dumps(item.get(field), default=str)[:80]
        raise StateCorrupt(
            f"back-off item {item['item']['S'][:200]}: {field} must be "
            f"{'a group name' if not group else 'an AWS region (us-east-1)'}, got {shown}"
        )
    return Backoff(
        group=group,
        until=_backoff_until(item),
        reason=item.get("reason", {}).get("S", ""),
        region=region,
        nodes=_nodes(item),
    )


def _backoff_until(item: Mapping[str, Any]) -> datetime:
    """A back-off item's ``backoff_until`` (an ISO time string); :class:`StateCorrupt` naming the item
    and the field when it is missing or no such time."""
    raw = (item.get("backoff_until") or {}).get("S")
    try:
        if isinstance(raw, str):
            return _parse(raw)
    except ValueError:
        pass
    shown = json.dumps(item.get("backoff_until"), default=str)[:80]
    raise StateCorrupt(
        f"back-off item {item['item']['S'][:200]}: backoff_until must be an ISO time string before "
        f'{LATEST_TIME.year} ({{"S": "2026-01-01T00:00:00Z"}}), got {shown}'
    )


def _nodes(item: Mapping[str, Any]) -> int:
    """A pool item's ``nodes``; 1 (EC2 had none: holds back every launch, as before the attribute) when
    it has none, or one that is no count, with a warning: a back-off is advice (:func:`merge_backoffs`)."""
    raw = item.get("nodes", {}).get("N")
    if raw is None:
        return 1
    try:
        nodes = int(raw)
    except ValueError:
        nodes = 0
    if nodes < 1:
        log.warning(
            "back-off item %s: nodes %r is no count of nodes; read as 1", item["item"]["S"][:200], raw[:20]
        )
        return 1
    return nodes
