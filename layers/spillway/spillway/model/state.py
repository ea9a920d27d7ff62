"""The planner's memory between ticks: when each node went idle, which groups are backed off, and
which pod Events the plan function posted last (the act layer's event ledger, not the planner's).

A group is keyed by its region and name (:class:`~spillway.model.groupkey.GroupKey`: an Auto Scaling
group's name is unique only in its region), and its entries in ``groups``, ``raises`` and ``templates``
name it. Builds before keyed them by name alone, naming no ``group``: :func:`keyed_by_region` reads
such an entry as the group of its name in the first region of ``regions`` that has one (the only one
those builds planned), and a ``gangs`` entry without a region the same way.

Wire form (state file and state table item)::

    {"nodes": {"<node>": {"idle_since": ISO, "draining_since": ISO (optional)}},
     "groups": {"<region>/<asg>": {"group": "<asg>", "region": "...", "backoff_until": ISO,
                                   "reason": "..."}},
     "events": {"<ns>/<pod>" | "CapacityBuffer:<ns>/<buffer>": {"fingerprint": "...",
                "posted_at": ISO}},                                           (only when not empty)
     "gangs": {"<ns>/<gang>": {"group": "<asg>", "region": "...", "count": N, "since": ISO}},
                                                                              (only when not empty)
     "raises": {"<region>/<asg>": {"group": "<asg>", "region": "...", "to": N, "since": ISO,
                                   "owner": "up-<plan>[-<part>]-<round>-<region>-<asg>" (optional)}},
                                                                              (only when not empty)
     "pools": {"<capacity type>/<zone>/<instance type>": {"backoff_until": ISO, "reason": "...",
                                                          "nodes": N (only when over 1)}},
                                                                              (only when not empty)
     "bookings": {"<ns>/<request>": {"uid": "...", "nodes": ["<node>", ...]}},  (only when not empty)
     "templates": {"<region>/<asg>": {"region": "...", "group": "<asg>", "instance_type": "...",
                             "instance_types": [...],
                             "node": "<node>", "learned_at": ISO, "allocatable": {...},
                             "capacity": {...}, "labels": {...},
                             "launched_from": "lt-0abc@7"}},                  (only when not empty)
     "scale_down": {"deleted" | "failed": {"since": ISO}},                    (only when not empty)
     "ended_drains": {"<node>": {"since": ISO}}}                              (only when not empty)

``ended_drains`` are the nodes whose plan's drain ended without removing them (failed, timed out,
cancelled or rejected: the node given back uncordoned, its remaining pods running; or a make-room drain
released, its moved pods evicted, the node uncordoned and kept), each with the time
of the plan whose claim that drain was (its ``planned_at``, whole seconds), not the time it ended. The
drain writes an item of the state table per plan and node (:data:`DRAIN_ENDED_PREFIX`, in
:data:`DRAINS_PARTITION`), which the state
store merges in at load (:func:`merge_ended_drains`, the latest plan per node); the planner never
writes it back (a step that commits the state it loaded, the scale function's, may; the items are
merged in again at every load). A node's claim (``draining_since``) made by that plan, the same time
to the second, evicts nothing more, so it spends no PodDisruptionBudget allowance; the claim still
keeps the node from another drain until it lapses. A claim of any other plan (a newer one, made
before the old drain ended, whose own drain is still to run) is not matched, whatever the clocks say.
States without it load unchanged.

``pools`` back off one capacity pool: a capacity type (``spot`` or ``on-demand``), an instance type, a
zone (a Spot interruption backs off the Spot pool, a launch that failed for capacity the pool of the
capacity type that failed; on-demand capacity of the type in the zone is another pool than Spot, as
Karpenter keys its unavailable offerings by capacity type, instance type and zone). The planner
skips a group only when every pool it may launch from is backed off, and otherwise notes it in the
scale-up reason (a group cannot be pinned to a zone or type through SetDesiredCapacity). ``nodes`` is
how many nodes EC2 refused at once (:class:`PoolState`): a gang's fleet writes its size, and such a
back-off holds back only gangs of that many nodes or more; without it (1) every launch. Use
:func:`pool_key`. A key of the older form ``<zone>/<instance type>`` (written before pools had a capacity
type, only ever by Spot interruptions) is read as the Spot pool (:func:`normalize_pool_key`).

``gangs`` are the gangs a plan launched atomically (a GangLaunch execution): in fleet mode their
instances are not in the group until attached, so later plans would see nothing launching and launch
the gang again. The planner writes an entry when it plans the launch and drops it when the gang has no
pending pod left, when ``gang_launch_minutes`` have passed, or when the group is backed off. States
written before gangs existed load unchanged.

``raises`` are the desired capacities recent plans (and overflow re-plans) raised groups to. A
scale-up raises a group by its own count relative to the live value (so it composes with gangs growing
the same group); a later plan whose snapshot was taken before that raise landed would otherwise see the
same pods with nothing launching and add them again. While an entry is younger than
``scale_up_claim_minutes``, its group is not backed off and the snapshot shows a lower desired capacity,
the planner takes the group's desired capacity to be the entry's (the difference is capacity launching).
States without it load unchanged. ``owner`` names the scale-up that raises the group for the entry (the
plan's or re-plan's act writes it): the load marks the entry unsettled for that owner's lost raise alone.

``bookings`` are the nodes each ProvisioningRequest's capacity was booked on when it became
``Provisioned=True`` (the request's ``metadata.uid`` tells a request made again under the name from the
one booked). While the booking holds, a pod the scheduler binds in its room only takes that room; the
request is ``CapacityRevoked`` only when one of these nodes is gone and its pods fit nowhere else (Kueue
reads the condition as nodes deleted and deactivates the workload). The planner writes an entry while
the booking holds and drops it when the booking ends. States without it load unchanged: a booking
with no entry (made before it existed) is never revoked; it expires or is consumed.

``templates`` are the groups' template nodes learned from a node of their own (cluster-autoscaler's
node info cache: spillway.model.nodecache): what the node that stood for the group last reported
(allocatable and capacity in milli-units, as snapshots store templates; the labels and taints the group's
nodes shared), for the group's type (a mixed group's: its template type and its overrides), and when. A
group none of whose nodes stands for it now takes its template from its entry while the entry is
younger than ``node_info_cache_minutes`` and, when both are known, the group launches from what that
node was launched from (``launched_from``: a launch template's id and version number, or ``lc:`` and a
launch configuration's name). States without it load unchanged: nothing is remembered yet; an entry
without ``launched_from`` (written before it was kept, or learned from a node whose instance did not say)
is checked by type and age alone.

The planner never reads or writes ``events``: it returns a state without them, and the plan cycle
(:mod:`spillway.act.events`) puts the new ledger in before the state is committed.

The models are closed (``extra="forbid"``): Spillway's own code cannot build a state with a misspelt
field. A state a newer build stored is read through :func:`spillway.model.stored.load_stored`, which
leaves out (and names) the fields this build does not know; what dropping each costs when this build
commits the state again is in :mod:`spillway.adapters.state_store`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from spillway.model.groupkey import GroupKey
from spillway.model.options import MAX_MINUTES
from spillway.model.utc import aware

_NUMBER_TEXT = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")


def _iso_only(value: Any) -> Any:
    """A time of the state is an ISO 8601 string (as :meth:`State.to_wire` writes every one) or a
    datetime. Pydantic takes a number, or a string of one, for seconds (or milliseconds) since 1970:
    ``{"since": 5}`` in a ``--state`` file was a node idle since 1970, silently. Refused, the field named."""
    if isinstance(value, bool | int | float) or (isinstance(value, str) and _NUMBER_TEXT.fullmatch(value)):
        raise ValueError(
            f"expected an ISO 8601 date and time (2026-12-07T06:00:00Z), not the number {value!r}"[:160]
        )
    return value


# The latest time a plan takes for its now (``spillway plan --now``: spillway.inputs.parse_now, which
# reads it from here): from there a plan reaches ahead by its longest setting (ten years,
# spillway.model.options.MAX_MINUTES), so the times it writes in the state end before LATEST_TIME,
# and a later plan adding as much to one stays inside the years datetime holds. A time at or past it
# (9999-12-31, in an item written by hand or by a bug) stopped every plan with an OverflowError
# (planner.cooldown adding the scale-down delay to it).
LATEST_NOW = datetime(9000, 1, 1, tzinfo=UTC)  # excluded
LATEST_TIME = LATEST_NOW + timedelta(minutes=MAX_MINUTES)


def usable_time(value: datetime) -> datetime:
    """``value`` when it is before :data:`LATEST_TIME`; else ValueError saying so."""
    if aware(value) >= LATEST_TIME:
        raise ValueError(
            f"{value.isoformat()} is past {LATEST_TIME.isoformat()}: no delay can be added to it"
        )
    return value


# every time the state holds: refusing numbers (_iso_only) and times no delay can be added to
IsoTime = Annotated[datetime, BeforeValidator(_iso_only), AfterValidator(usable_time)]


class NodeState(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    idle_since: IsoTime
    # Set when a plan drains the node: until the drain has cordoned it (or the claim lapses) later
    # plans must not drain it again.
    draining_since: IsoTime | None = None


class BackoffState(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    backoff_until: IsoTime
    reason: str = ""


class GroupState(BackoffState):
    """A group's back-off. ``group`` and ``region`` name the group (its key is
    ``GroupKey(region, group).stored``); an entry without ``group`` was written keyed by name alone
    (:func:`keyed_by_region`)."""

    group: str = ""
    region: str = ""


class PoolState(BackoffState):
    """A pool's back-off: until when, why, and how many nodes EC2 refused at once (``nodes``). A gang's
    instant fleet asks for all its nodes or none (MinTargetCapacity): its refusal says EC2 had not that
    many at once, so it holds back only launches of as many nodes or more, all at once (gangs); 1, the
    default (a failed scale-up, a Spot interruption, every entry written before the field): EC2 had
    none, which holds back every launch. Where two back-offs meet on one pool, :func:`stronger_backoff`
    keeps one."""

    nodes: int = Field(default=1, ge=1, strict=True)

    def holds_back(self, nodes: int) -> bool:
        """Whether it holds back a launch of ``nodes`` all at once (1: any launch but a gang's)."""
        return self.nodes <= nodes


def stronger_backoff(stored: PoolState, new: PoolState, now: datetime | None = None) -> PoolState:
    """The one of two back-offs of one pool to keep: the stronger evidence (fewer nodes: it holds back
    every launch the other does, and more) while it lasts, whichever expires first; at equal strength
    the later expiry, as before ``nodes``. One over by ``now`` (None: not known) is no evidence any
    more and gives way to one still lasting. A weaker back-off that outlasts a stronger one loses the
    rest of its window: one entry per pool holds one back-off, and that costs at most a gang's instant
    fleet asked for too early (refused at once, all or nothing, and backed off again), where keeping
    the weaker would send ordinary launches into a pool EC2 had nothing in."""
    if now is not None:
        live_stored, live_new = aware(stored.backoff_until) > now, aware(new.backoff_until) > now
        if live_stored != live_new:
            return stored if live_stored else new
    if stored.nodes != new.nodes:
        return stored if stored.nodes < new.nodes else new
    return new if aware(stored.backoff_until) < aware(new.backoff_until) else stored


POOL_PREFIX = "pool#"  # a back-off stored under this "group" name is a pool: State.pools
POOL_CAPACITY_TYPES = ("spot", "on-demand")  # the capacity types a pool key names (NodeGroup's)


def pool_key(capacity_type: str, zone: str, instance_type: str) -> str:
    """The ``pools`` key of one capacity type of one instance type in one zone."""
    return f"{capacity_type}/{zone}/{instance_type}"


def normalize_pool_key(key: str) -> str:
    """``key`` in the current form: an older ``<zone>/<type>`` key is the Spot pool (only Spot
    interruptions wrote those). Raises ``ValueError`` naming the key when it is neither form."""
    parts = key.split("/")
    if len(parts) == 2 and all(parts):
        return pool_key("spot", *parts)
    if len(parts) == 3 and parts[0] in POOL_CAPACITY_TYPES and parts[1] and parts[2]:
        return key
    raise ValueError(
        f"key {key!r} is not <capacity type>/<zone>/<instance type> with a capacity type of "
        f"{' | '.join(POOL_CAPACITY_TYPES)} (nor an older <zone>/<instance type>)"
    )


class EventMark(BaseModel):
    """The last Event posted on a pod: what it said (a fingerprint of reason, code and target) and when."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    fingerprint: str = Field(min_length=1, max_length=64)
    posted_at: IsoTime


class GangState(BaseModel):
    """A gang launch under way: which group, how many nodes, since when; ``minimum_only`` when it is for
    no more pods than the gang needed to start (once they run, nothing of it is coming for the rest)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    group: str = Field(min_length=1)
    region: str = ""
    count: int = Field(ge=1)
    since: IsoTime
    minimum_only: bool = False

    @property
    def key(self) -> GroupKey:
        """The group's key (``region`` is "" only in an entry older than regions: :func:`keyed_by_region`)."""
        return GroupKey(self.region, self.group)


class RaiseState(BaseModel):
    """A plan raised this group's desired capacity to ``to`` at ``since``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    to: int = Field(ge=0)
    since: IsoTime
    group: str = ""  # the group's name and region; "" for an entry keyed by name alone (keyed_by_region)
    region: str = ""
    # the scale-up kept this raise unsettled (its answer lost, AWS may never have applied it) and no
    # instance was claimed for it: read from the ledger at load (merge_unsettled_raises), never stored
    unsettled: bool = False
    # the ledger owner of the scale-up that raises the group for this entry (:func:`scale_up_owner`), which
    # the plan (or re-plan) that made it names; "" when none does (an older entry, a gang's raise alone)
    owner: str = ""


# State.scale_down's keys: a plan removed a node; a plan's scale-down drain failed
ScaleDownMark = Literal["deleted", "failed"]
# The state table's items of failed scale-down drains, one per drain (spillway.act.drain.Drainer.record:
# a claim whose value holds ``at``), merged into ``State.scale_down["failed"]`` at load
SCALE_DOWN_FAILED_PREFIX = "scaledown-failed#"
# The state table's items of plan's drains that ended keeping their node (spillway.act.drain.Drainer.record:
# a claim whose value holds ``node``, ``planned_at``, the plan's time, and ``at``, when it ended), merged
# into ``State.ended_drains`` at load
DRAIN_ENDED_PREFIX = "drain-ended#"
# The ledger's items of a scale-up's raise kept unsettled (``unsettled#<owner>``, its claim value's ``group``
# the group's key and ``at`` when) and of the instances each owner claimed (``owner#<region>#<instance>``,
# the value's ``owner``), written by spillway.act.claims; read at load into ``RaiseState.unsettled``
UNSETTLED_PREFIX = "unsettled#"
OWNER_PREFIX = "owner#"
SCALE_UP_OWNER_PREFIX = "up-"  # a scale-up's owner (scale_up_owner); a gang's is its attempt, "spillway-..."
# ... both in this partition of the state table, beside the cluster's own, so that the drain function's
# role may write them and nothing of the cluster's partition (the planner's state item: IAM has no
# condition on a sort key). Builds before wrote them in the cluster's own partition, where the state
# store still reads them (one such build's, rolled back to, too); they expire a day after they were written.
DRAINS_PARTITION = "{cluster}#drains"
# The back-offs' items (``backoff#...``: a scale-up's, a gang's, a Spot notice's), in this partition beside
# the cluster's own, so that the interrupt function's role, which writes them, may write nothing of the
# cluster's partition (a put on the state item's key would replace the planner's state). Builds before
# wrote them in the cluster's own, where the state store still reads them while they last.
BACKOFFS_PARTITION = "{cluster}#backoffs"


class Since(BaseModel):
    """When a condition that a timer waits on started (a busy node found underutilized)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    since: IsoTime


class ShrinkState(BaseModel):
    """A consolidation shrank this elastic job by ``workers`` at ``since`` (planner.shrinks)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    workers: int = Field(ge=1)
    since: IsoTime


class RoomState(BaseModel):
    """A make-room drain gives this node to ``pods`` (planned at ``since``): later plans wait for it.
    ``moved``: the pods the drain evicts to make the room, the only ones that leave the node (empty in a
    state written before they were recorded: the whole node is then taken as leaving)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    pods: tuple[str, ...] = Field(min_length=1)
    since: IsoTime
    moved: tuple[str, ...] = ()


class BookingState(BaseModel):
    """The nodes a ProvisioningRequest (``uid``) was booked on."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    uid: str = ""
    nodes: tuple[str, ...] = Field(min_length=1)


Quantity = Annotated[int, Field(ge=0, strict=True)]  # milli-units


class LearnedTaint(BaseModel):
    """A taint every node of a group registered with (spillway.model.livetemplate.group_taints), in
    Kubernetes' own form."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    key: str = Field(min_length=1)
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class LearnedTemplate(BaseModel):
    """What the node that last stood for a group's template reported, and when
    (spillway.model.nodecache)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    region: str = ""
    group: str = ""  # the group's name; "" for an entry keyed by name alone (keyed_by_region)
    instance_type: str = Field(min_length=1)
    instance_types: tuple[str, ...] = ()  # a mixed group's overrides, else empty
    node: str = Field(min_length=1)
    learned_at: IsoTime
    allocatable: dict[str, Quantity]
    capacity: dict[str, Quantity] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)
    taints: tuple[LearnedTaint, ...] = ()  # the taints the group's nodes shared (states before: none)
    # what the node's instance was launched from (NodeGroup.instance_sources); "" when not known
    launched_from: str = Field(default="", pattern=r"^$|^lc:.+$|^[^@\s]+@[1-9][0-9]*$")

    @field_validator("allocatable")
    @classmethod
    def _reports_cpu_and_memory(cls, allocatable: dict[str, int]) -> dict[str, int]:
        """Only a node reporting both stands for its group (spillway.model.livetemplate)."""
        missing = [name for name in ("cpu", "memory") if allocatable.get(name, 0) <= 0]
        if missing:
            raise ValueError(f"has no {' nor '.join(missing)} (a node that stood for its group reports both)")
        return allocatable


class State(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    nodes: dict[str, NodeState] = Field(default_factory=dict)
    groups: dict[str, GroupState] = Field(default_factory=dict)
    events: dict[str, EventMark] = Field(default_factory=dict)
    gangs: dict[str, GangState] = Field(default_factory=dict)
    raises: dict[str, RaiseState] = Field(default_factory=dict)
    pools: dict[str, PoolState] = Field(default_factory=dict)  # pool_key(capacity, zone, type) -> back-off
    # busy nodes a consolidation could drain, since when (consolidation_after_minutes waits on it)
    underutilized: dict[str, Since] = Field(default_factory=dict)
    # nodes a make-room drain is emptying for pending pods (planner.makeroom), by node name
    rooms: dict[str, RoomState] = Field(default_factory=dict)
    # instances of managed groups no Node has joined for yet, since when, and those in a warm pool, last
    # seen there when (planner.joins)
    joining: dict[str, Since] = Field(default_factory=dict)
    # elastic jobs a consolidation shrank, by job key (planner.shrinks)
    shrunk: dict[str, ShrinkState] = Field(default_factory=dict)
    # the nodes of each ProvisioningRequest booking that holds, by request key (planner.provreq)
    bookings: dict[str, BookingState] = Field(default_factory=dict)
    # each group's template learned from a node of its own, by group name (spillway.model.nodecache)
    templates: dict[str, LearnedTemplate] = Field(default_factory=dict)
    # when scale-down last removed a node (``deleted``: a plan drained one to terminate it) and when a
    # plan's scale-down drain last failed (``failed``: written by the drain, merged in at load); later
    # plans wait scale_down_delay_after_delete_minutes / _after_failure_minutes after them
    scale_down: dict[ScaleDownMark, Since] = Field(default_factory=dict)
    # nodes whose plan's drain ended keeping them (failed, timed out, cancelled, rejected), with the time of
    # that plan (its claim's): written by the drain, merged in at load (merge_ended_drains); the node's
    # claim made at that time spends no PDB allowance
    ended_drains: dict[str, Since] = Field(default_factory=dict)

    @field_validator("pools")
    @classmethod
    def _current_pool_keys(cls, pools: dict[str, PoolState]) -> dict[str, PoolState]:
        """Older keys in the current form (where two forms name one pool, :func:`stronger_backoff`
        keeps one: an older key is EC2 had none, and of two such the later wins)."""
        out: dict[str, PoolState] = {}
        for key, entry in pools.items():
            name = normalize_pool_key(key)
            out[name] = entry if name not in out else stronger_backoff(out[name], entry)
        return out

    def to_wire(self) -> dict[str, dict[str, dict[str, Any]]]:
        """The JSON form, keys sorted, times in UTC with ``Z``."""

        def iso(value: datetime) -> str:
            return value.isoformat().replace("+00:00", "Z")

        def backoff(v: BackoffState) -> dict[str, Any]:
            return {"backoff_until": iso(v.backoff_until), "reason": v.reason}

        def group(v: GroupState) -> dict[str, Any]:
            return backoff(v) | named(v)

        def pool(v: PoolState) -> dict[str, Any]:  # ``nodes`` only when it says more than "none"
            return backoff(v) | ({"nodes": v.nodes} if v.nodes > 1 else {})

        def raised(v: RaiseState) -> dict[str, Any]:  # ``owner`` only when named
            return {"to": v.to, "since": iso(v.since)} | named(v) | ({"owner": v.owner} if v.owner else {})

        def room(v: RoomState) -> dict[str, Any]:  # ``moved`` only when recorded
            return {"pods": list(v.pods), "since": iso(v.since)} | (
                {"moved": list(v.moved)} if v.moved else {}
            )

        def gang(v: GangState) -> dict[str, Any]:
            out = {"group": v.group, "region": v.region, "count": v.count, "since": iso(v.since)}
            return out | ({"minimum_only": True} if v.minimum_only else {})

        wire: dict[str, dict[str, dict[str, Any]]] = {
            "nodes": {
                k: {"idle_since": iso(v.idle_since)}
                | ({"draining_since": iso(v.draining_since)} if v.draining_since else {})
                for k, v in sorted(self.nodes.items())
            },
            "groups": {k: group(v) for k, v in sorted(self.groups.items())},
        }
        optional: dict[str, tuple[Mapping[str, Any], Callable[[Any], dict[str, Any]]]] = {
            "events": (self.events, lambda v: {"fingerprint": v.fingerprint, "posted_at": iso(v.posted_at)}),
            "pools": (self.pools, pool),
            "gangs": (self.gangs, gang),
            "rooms": (self.rooms, room),
            "underutilized": (self.underutilized, lambda v: {"since": iso(v.since)}),
            "joining": (self.joining, lambda v: {"since": iso(v.since)}),
            "shrunk": (self.shrunk, lambda v: {"workers": v.workers, "since": iso(v.since)}),
            "raises": (self.raises, raised),
            "bookings": (self.bookings, lambda v: {"uid": v.uid, "nodes": list(v.nodes)}),
            "templates": (self.templates, lambda v: learned(v, iso(v.learned_at))),
            "scale_down": (
                {str(k): v for k, v in self.scale_down.items()},
                lambda v: {"since": iso(v.since)},
            ),
            "ended_drains": (self.ended_drains, lambda v: {"since": iso(v.since)}),
        }
        for key, (entries, form) in optional.items():
            if entries:  # a section only when it has entries, so older states read exactly as before
                wire[key] = {k: form(v) for k, v in sorted(entries.items())}
        return wire


def named(entry: GroupState | RaiseState) -> dict[str, Any]:
    """The group an entry is of, when it names one (an entry keyed by name alone names none)."""
    return {"group": entry.group, "region": entry.region} if entry.group else {}


def learned(entry: LearnedTemplate, learned_at: str) -> dict[str, Any]:
    """A ``templates`` entry's wire form: keys sorted, empty optional parts left out."""
    out: dict[str, Any] = {
        "region": entry.region,
        **({"group": entry.group} if entry.group else {}),
        "instance_type": entry.instance_type,
        "node": entry.node,
        "learned_at": learned_at,
        "allocatable": dict(sorted(entry.allocatable.items())),
    }
    if entry.instance_types:
        out["instance_types"] = list(entry.instance_types)
    if entry.capacity:
        out["capacity"] = dict(sorted(entry.capacity.items()))
    if entry.labels:
        out["labels"] = dict(sorted(entry.labels.items()))
    if entry.taints:
        out["taints"] = [t.model_dump(exclude_none=True) for t in entry.taints]
    if entry.launched_from:
        out["launched_from"] = entry.launched_from
    return out


_Keyed = TypeVar("_Keyed", GroupState, RaiseState, LearnedTemplate)


def keyed_by_region(state: State, first_region: Mapping[str, str]) -> State:
    """``state`` with every entry of ``groups``, ``raises`` and ``templates`` under its group's key
    (:attr:`GroupKey.stored <spillway.model.groupkey.GroupKey.stored>`) and naming its group. Builds
    before groups were keyed by region wrote these keyed by name alone, with no ``group``: such an entry
    is of the group of that name in the first region of ``regions`` that has one (``first_region``:
    name -> that region), the only group of the name those builds planned (they refused the others); a
    template entry is of the group of its name in the region it names (its node was there, and only a
    group there could use it). An entry whose name no group has now is left as it was (a later plan
    finds its group, or it expires). Where two entries meet on one group the later back-off wins, else
    the entry that was keyed already."""

    def rekey(entries: Mapping[str, _Keyed], wins: Callable[[_Keyed, _Keyed], bool]) -> dict[str, _Keyed]:
        out: dict[str, _Keyed] = {}
        for key, entry in sorted(entries.items(), key=lambda item: not item[1].group):  # keyed ones first
            if not entry.group:
                region = (entry.region if isinstance(entry, LearnedTemplate) else "") or first_region.get(key)
                if region is None:
                    out.setdefault(key, entry)
                    continue
                entry = entry.model_copy(update={"group": key, "region": region})
                key = GroupKey(region, key).stored
            if key not in out or wins(entry, out[key]):
                out[key] = entry
        return dict(sorted(out.items()))

    def later(new: GroupState, old: GroupState) -> bool:
        return aware(new.backoff_until) > aware(old.backoff_until)

    gangs = {  # an entry from before gangs named their region: of the group the plan then launched in
        gang: entry.model_copy(update={"region": first_region[entry.group]})
        if not entry.region and entry.group in first_region
        else entry
        for gang, entry in state.gangs.items()
    }
    return state.model_copy(
        update={
            "gangs": gangs,
            "groups": rekey(state.groups, later),
            "raises": rekey(state.raises, lambda new, old: False),
            "templates": rekey(state.templates, lambda new, old: False),
        }
    )


def merge_scale_down_failures(state: State, times: Iterable[datetime]) -> State:
    """``state`` with the latest of ``times`` (failed scale-down drains) as its ``scale_down["failed"]``
    when that is later than the one it holds."""
    latest = max((aware(t) for t in times), default=None)
    current = state.scale_down.get("failed")
    if latest is None or (current is not None and aware(current.since) >= latest):
        return state
    marks: dict[ScaleDownMark, Since] = {**state.scale_down, "failed": Since(since=latest)}
    return state.model_copy(update={"scale_down": dict(sorted(marks.items()))})


def scale_up_execution(plan_id: object, part: object = 1) -> str:
    """The name of the scale-up execution of part ``part`` of plan ``plan_id``'s scale-up: ``up-<plan>``
    for the first, ``up-<plan>-2``, ``up-<plan>-3``, ... for the parts of a plan growing more groups than
    a round holds (:func:`spillway.act.planning.execution_requests`)."""
    name = f"{SCALE_UP_OWNER_PREFIX}{plan_id}"
    return name if part == 1 else f"{name}-{part}"


def scale_up_owner(plan_id: object, round_: object, region: str, group: str, part: object = 1) -> str:
    """The ledger owner of a scale-up's raise of one group in one round (spillway.act.claims.Owner), as
    the scale-up names it: its execution's name (:func:`scale_up_execution`), the round, the region and
    the group: ``up-<plan>-<round>-<region>-<group>`` for the first part (and an execution started
    without a part), ``up-<plan>-<part>-<round>-<region>-<group>`` for the others, at most 200
    characters. Two parts of one plan may raise one group in one round (their re-plans both overflow
    to it): one owner for both, the second's raise read as a retry of the first's and was never made.
    A region's name starts with a letter, so no part's owner is another round's of the first part."""
    return f"{scale_up_execution(plan_id, part)}-{round_}-{region}-{group}"[:200]


def _kept_for(entry: RaiseState, owner: str, at: datetime) -> bool:
    """Whether ``owner``'s raise kept unsettled at ``at`` (of the entry's group) is ``entry``'s: its own
    owner when the entry names one and ``owner`` is a scale-up's (another scale-up's raise of the group,
    an earlier plan's or round's, is not the entry's); else one kept at or after the entry's ``since``."""
    if entry.owner and owner.startswith(SCALE_UP_OWNER_PREFIX):
        return owner == entry.owner
    return aware(at) >= aware(entry.since)


def merge_unsettled_raises(state: State, unsettled: Iterable[tuple[str, str, datetime]]) -> State:
    """``state`` with each raise entry marked ``unsettled`` when ``unsettled`` (the owner, the group's key
    and the time of a raise kept unsettled with no instance claimed for it) holds the entry's raise
    (:func:`_kept_for`)."""
    raises = dict(state.raises)
    for owner, key, at in unsettled:
        entry = raises.get(key)
        if entry is not None and not entry.unsettled and _kept_for(entry, owner, at):
            raises[key] = entry.model_copy(update={"unsettled": True})
    if raises == state.raises:
        return state
    return state.model_copy(update={"raises": raises})


def merge_ended_drains(state: State, ended: Iterable[tuple[str, datetime]]) -> State:
    """``state`` with each node of ``ended`` (node, the time of the plan whose drain of it ended keeping
    it) in its ``ended_drains``, at the latest of its times and of the one it holds: a node's claims
    come one after another, so only the latest plan's can be the claim a plan still counts."""
    marks = dict(state.ended_drains)
    for node, at in ended:
        current = marks.get(node)
        if current is None or aware(current.since) < aware(at):
            marks[node] = Since(since=aware(at))
    if marks == state.ended_drains:
        return state
    return state.model_copy(update={"ended_drains": dict(sorted(marks.items()))})
