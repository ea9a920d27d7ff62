"""Interruption notices (spillway.act.interrupt and functions/interrupt): parsing each event type from
the samples in events/ (shaped as AWS documents them), mapping an instance to our Node through the latest
snapshot, the drain each notice asks for, deterministic execution names, back-offs, and what the handler
does with an event Spillway does not act on (dropped, counted), a malformed notice (reported failed, so it
reaches the dead-letter queue) and a failure that may pass (retried)."""

from __future__ import annotations

import copy
import json
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeCloud, FakeLedger, FakeSnapshots, FakeWorkflows

from spillway.act.interrupt import (
    JOIN_RETRY_SECONDS,
    OWN_DRAIN_SNAPSHOT_SECONDS,
    Interrupter,
    InterruptSettings,
    IrrelevantNotice,
    MalformedNotice,
    Notice,
    drain_plan,
    execution_name,
    parse_notice,
)
from spillway.errors import AwsThrottled, NodeNotObserved, SnapshotNotFound
from spillway.model.cluster import ClusterSnapshot, NodeInfo, PodInfo
from spillway.model.history import drain_refusal
from spillway.model.nodegroup import NodeGroup
from spillway.model.snapshot import Snapshot

ROOT = Path(__file__).resolve().parents[2]
INSTANCE = "i-0b662ef9931388ba0"
WARNED_AT = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:spillway-prod-drain-node"


def sample(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((ROOT / "events" / name).read_text())
    return doc


def body(doc: dict[str, Any]) -> str:
    return json.dumps(doc)


def group(
    name: str, itype: str, zones: tuple[str, ...], instances: tuple[str, ...] = (), **kw: Any
) -> NodeGroup:
    """A group of the snapshot; Spot when its name starts with ``spot`` (else on-demand)."""
    return NodeGroup(
        name=name, region="us-east-1", min_size=kw.get("min_size", 0), max_size=10,
        desired=kw.get("desired", len(instances)), instance_type=itype, template=None, zones=zones,
        instance_ids=instances, capacity_type="spot" if name.startswith("spot") else "on-demand",
    )  # fmt: skip


def world(*, desired: int = 2, min_size: int = 0) -> Snapshot:
    node = NodeInfo(
        name="ip-10-0-1-7.ec2.internal",
        allocatable={"cpu": 4000},
        labels={"node.kubernetes.io/instance-type": "g5.xlarge", "topology.kubernetes.io/zone": "us-east-1a"},
        provider_id=f"aws:///us-east-1a/{INSTANCE}",
    )
    other = NodeInfo(
        name="ip-10-0-1-8.ec2.internal", allocatable={}, provider_id="aws:///us-east-1b/i-0aaaaaaaaaaaaaaa1"
    )
    groups = [
        group("spot-a", "g5.xlarge", ("us-east-1a",), (INSTANCE,), desired=desired, min_size=min_size),
        group("spot-a2", "g5.xlarge", ("us-east-1a",)),  # same type, same only zone: backed off too
        group("spot-ab", "g5.xlarge", ("us-east-1a", "us-east-1b")),  # can launch elsewhere: left alone
        group("other-type", "g5.2xlarge", ("us-east-1a",)),
        # on-demand, same type, same only zone: another pool than the interrupted Spot one
        group("od-a", "g5.xlarge", ("us-east-1a",)),
    ]
    cluster = ClusterSnapshot(cluster="prod", taken_at=WARNED_AT, nodes=(node, other), pods=())
    return Snapshot.build(cluster, groups, WARNED_AT)


class Rig:
    def __init__(
        self, snapshot: Snapshot | None = None, now: datetime = WARNED_AT + timedelta(seconds=10)
    ) -> None:
        self.snapshots = FakeSnapshots()
        if snapshot is not None:
            self.snapshots.add(snapshot)
        self.workflows = FakeWorkflows()
        self.ledger = FakeLedger()
        self.metrics: list[tuple[str, float]] = []
        self.now = now
        self.cloud: FakeCloud | None = None

    def interrupter(self) -> Interrupter:
        return Interrupter(
            snapshots=self.snapshots, workflows=self.workflows, ledger=self.ledger, cluster="prod",
            regions=("us-east-1", "us-west-2"), drain_node_arn=ARN, clock=lambda: self.now,
            metric=lambda name, value: self.metrics.append((name, value)), cloud=self.cloud,
        )  # fmt: skip

    def handle(self, doc: dict[str, Any]) -> list[dict[str, Any]]:
        return self.interrupter().handle(parse_notice(body(doc)))

    def counted(self, name: str) -> float:
        return sum(v for n, v in self.metrics if n == name)


# --- parsing each sample ---------------------------------------------------------------------------


def test_each_documented_event_parses_to_its_kind_and_instance() -> None:
    kinds = {
        "interrupt-spot-warning.json": "interruption",
        "interrupt-rebalance.json": "rebalance",
        "interrupt-state-change.json": "state_change",
        "interrupt-health-scheduled.json": "scheduled",
        "interrupt-lifecycle-terminate.json": "lifecycle",
    }
    for name, kind in kinds.items():
        notice = parse_notice(body(sample(name)))
        assert (notice.kind, notice.instance_ids, notice.region) == (kind, (INSTANCE,), "us-east-1"), name


def test_a_health_event_keeps_its_rfc1123_start_time_and_arn() -> None:
    notice = parse_notice(body(sample("interrupt-health-scheduled.json")))
    assert notice.start == datetime(2026, 3, 4, 9, 0, tzinfo=UTC)
    assert "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED" in notice.code


def backup_copy() -> dict[str, Any]:
    """The sample scheduled change as AWS Health also delivers it to its backup Region (US West
    (Oregon) backs up every other Region of the aws partition): ``region`` is where it was delivered,
    ``detail.eventRegion`` where the instance is."""
    doc = copy.deepcopy(sample("interrupt-health-scheduled.json"))
    doc["region"], doc["id"] = "us-west-2", "backup-copy-event-id"
    doc["detail"]["backupEvent"] = True
    return doc


def test_a_health_event_is_about_its_event_region_not_the_region_it_was_delivered_to() -> None:
    """AWS Health user guide, "Reference: AWS Health events Amazon EventBridge schema": the event's
    ``region`` is the Region the notification was delivered to, not the impacted one, which is
    ``detail.eventRegion``; and "Creating EventBridge rules for AWS Region coverage": every event is
    delivered to its Region and to a backup Region. The backup copy reached the queue (the home rule, or a
    forwarder, does not filter on region) and was read as a notice of an instance in the backup Region:
    dropped (not_our_node, or other_region), so a lost primary copy left the node undrained. It is now
    the same notice as the primary: the same execution, started once."""
    primary = parse_notice(body(sample("interrupt-health-scheduled.json")))
    backup = parse_notice(body(backup_copy()))
    assert backup.region == primary.region == "us-east-1"
    assert execution_name(backup, INSTANCE) == execution_name(primary, INSTANCE)

    rig = Rig(world(), now=datetime(2026, 3, 2, 9, 0, 10, tzinfo=UTC))
    [first] = rig.handle(backup_copy())  # the backup copy comes first: it drains
    [second] = rig.handle(sample("interrupt-health-scheduled.json"))
    assert (first["outcome"], second["outcome"]) == ("drain_started", "duplicate")
    assert len(rig.workflows.names) == 2  # the drain now and the forced one of the last day, each once
    assert {r.input["region"] for r in rig.workflows.requests} == {"us-east-1"}


@pytest.mark.parametrize("value", ["global", "", 7, "us-east-1\n"])
def test_a_health_event_whose_event_region_is_not_a_region_is_malformed(value: Any) -> None:
    doc = backup_copy()
    doc["detail"]["eventRegion"] = value
    with pytest.raises(MalformedNotice) as err:
        parse_notice(body(doc))
    assert err.value.field == "detail.eventRegion"


def test_a_health_event_without_an_event_region_is_about_the_region_it_came_to() -> None:
    doc = copy.deepcopy(sample("interrupt-health-scheduled.json"))
    del doc["detail"]["eventRegion"]
    assert parse_notice(body(doc)).region == "us-east-1"


def test_the_sqs_sample_carries_the_spot_warning_as_its_body() -> None:
    record = sample("interrupt-sqs.json")["Records"][0]
    assert parse_notice(record["body"]).kind == "interruption"


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.pop("detail"), "detail"),
        (lambda d: d["detail"].update({"instance-id": "not-an-instance"}), "detail.instance-id"),
        (lambda d: d.update({"time": "yesterday"}), "time"),
        (lambda d: d.update({"region": "Mars"}), "region"),
        (lambda d: d.update({"source": 7}), "source"),
    ],
)
def test_a_malformed_warning_names_its_field(mutate: Any, field: str) -> None:
    doc = copy.deepcopy(sample("interrupt-spot-warning.json"))
    mutate(doc)
    with pytest.raises(MalformedNotice) as err:
        parse_notice(body(doc))
    assert err.value.field == field


@pytest.mark.parametrize(
    ("sample_name", "mutate", "field"),
    [
        ("interrupt-spot-warning.json", lambda d: d.update(region="us-east-1\n"), "region"),
        ("interrupt-spot-warning.json", lambda d: d.update(region="us-east-\u0661"), "region"),
        ("interrupt-spot-warning.json", lambda d: d["detail"].update({"instance-id": INSTANCE + "\n"}),
         "detail.instance-id"),
        # EC2's ids are i- and 8 or 17 hex digits (the form the scale-up steps' input check holds too)
        ("interrupt-spot-warning.json", lambda d: d["detail"].update({"instance-id": "i-0123456789ab"}),
         "detail.instance-id"),
        ("interrupt-lifecycle-terminate.json",
         lambda d: d["detail"].update(LifecycleActionToken="87654321-4321-4321-4321-210987654321\n"),
         "detail.LifecycleActionToken"),
    ],
)  # fmt: skip
def test_an_identifier_is_read_whole_and_in_ascii(sample_name: str, mutate: Any, field: str) -> None:
    """A region with a trailing newline or an Arabic-Indic digit passed the region pattern (``$`` matches
    before a final newline, ``\\d`` any Unicode digit), so a Spot warning was dropped as another region's
    (InterruptIgnored) instead of being reported malformed, on its way to the alarmed dead-letter queue;
    an instance id so written was dropped as no Node's. EC2 and EventBridge write them in ASCII. (Found
    by fuzzing.)"""
    doc = copy.deepcopy(sample(sample_name))
    mutate(doc)
    with pytest.raises(MalformedNotice) as err:
        parse_notice(body(doc))
    assert err.value.field == field


def test_not_json_and_a_lifecycle_action_without_its_hook_are_malformed() -> None:
    with pytest.raises(MalformedNotice) as err:
        parse_notice("{not json")
    assert err.value.field == "body"
    doc = copy.deepcopy(sample("interrupt-lifecycle-terminate.json"))
    del doc["detail"]["LifecycleHookName"]
    with pytest.raises(MalformedNotice) as err:
        parse_notice(body(doc))
    assert err.value.field == "detail.LifecycleHookName"


@pytest.mark.parametrize(
    ("sample_name", "mutate", "field"),
    [
        ("interrupt-spot-warning.json", lambda d: d.update({"detail-type": "EC2 Fleet Error"}), "detail-type"),
        ("interrupt-health-scheduled.json", lambda d: d["detail"].update(eventTypeCategory="issue"),
         "detail.eventTypeCategory"),
        ("interrupt-health-scheduled.json", lambda d: d["detail"].update(service="RDS"),
         "detail.eventTypeCategory"),
        ("interrupt-health-scheduled.json", lambda d: d["detail"].update(statusCode="closed"),
         "detail.statusCode"),
        ("interrupt-health-scheduled.json",
         lambda d: d["detail"].update(affectedEntities=[{"entityValue": "h-0123456789abcdef0"}]),
         "detail.affectedEntities"),
        ("interrupt-lifecycle-terminate.json",
         lambda d: d["detail"].update(LifecycleTransition="autoscaling:EC2_INSTANCE_LAUNCHING"),
         "detail.LifecycleTransition"),
    ],
)  # fmt: skip
def test_an_event_spillway_does_not_act_on_is_irrelevant_not_malformed(
    sample_name: str, mutate: Any, field: str
) -> None:
    """Another kind of event, or a Health event that is over: nothing was missed, so it is dropped (the
    handler counts it), unlike a notice Spillway acts on that it cannot read (MalformedNotice)."""
    doc = copy.deepcopy(sample(sample_name))
    mutate(doc)
    with pytest.raises(IrrelevantNotice) as err:
        parse_notice(body(doc))
    assert err.value.field == field and not isinstance(err.value, MalformedNotice)


# --- the drain each notice asks for -----------------------------------------------------------------


def test_the_interruption_deadline_counts_from_the_warning_not_from_delivery() -> None:
    notice = parse_notice(body(sample("interrupt-spot-warning.json")))
    settings = InterruptSettings()
    assert drain_plan(notice, WARNED_AT + timedelta(seconds=30), settings).deadline_seconds == 60  # type: ignore[union-attr]
    late = drain_plan(notice, WARNED_AT + timedelta(minutes=5), settings)
    assert late is not None and late.deadline_seconds == 0 and late.force


def test_a_rebalance_drains_longer_and_without_force() -> None:
    plan = drain_plan(parse_notice(body(sample("interrupt-rebalance.json"))), WARNED_AT, InterruptSettings())
    assert plan is not None and (plan.deadline_seconds, plan.force) == (600, False)


def test_a_scheduled_change_ends_its_drain_a_margin_before_the_start_and_keeps_rounds_bounded() -> None:
    notice = parse_notice(body(sample("interrupt-health-scheduled.json")))
    soon = drain_plan(notice, datetime(2026, 3, 4, 8, 0, tzinfo=UTC), InterruptSettings())
    assert soon is not None and (soon.deadline_seconds, soon.force) == (3600 - 300, True)
    far = drain_plan(notice, datetime(2026, 2, 1, tzinfo=UTC), InterruptSettings())
    assert far is not None and (far.deadline_seconds, far.force) == (86_400, False)
    assert drain_refusal(far.deadline_seconds, far.poll_seconds) is None  # the drain accepts it


def test_execution_names_are_deterministic_and_valid() -> None:
    notice = parse_notice(body(sample("interrupt-spot-warning.json")))
    assert execution_name(notice, INSTANCE) == f"interrupt-{INSTANCE}"
    health = parse_notice(body(sample("interrupt-health-scheduled.json")))
    name = execution_name(health, INSTANCE)
    assert name == execution_name(health, INSTANCE) and len(name) <= 80 and name.startswith("scheduled-")
    forced = execution_name(health, INSTANCE, forced=True)
    assert forced != name and len(forced) <= 80 and forced == execution_name(health, INSTANCE, forced=True)


def test_an_update_of_a_scheduled_change_within_a_day_names_the_forced_drain_already_waiting() -> None:
    """Three days out the change gets a one-day drain without force; a PDB may make it time out and
    undo its cordon. AWS Health sends the event's updates under the same ARN: the one that comes two
    hours before the change was a duplicate of the first execution's name, so the forced drain never
    started and the instance was retired with its pods. (Found by review.) The first notice now starts
    the forced drain too, waiting for the last day: the update names that execution (a duplicate)."""
    early = Rig(world(), now=datetime(2026, 3, 1, 9, 0, tzinfo=UTC))  # the sample's start: 4 Mar 09:00
    doc = sample("interrupt-health-scheduled.json")
    [first] = early.handle(doc)
    update = copy.deepcopy(doc)
    update["id"], update["time"] = "another-event-id", "2026-03-04T07:00:00Z"
    update["detail"]["lastUpdatedTime"] = "Wed, 04 Mar 2026 07:00:00 GMT"
    early.now = datetime(2026, 3, 4, 7, 0, tzinfo=UTC)
    [second] = early.handle(update)
    [again] = early.handle(update)  # the update delivered twice

    assert (first["outcome"], second["outcome"], again["outcome"]) == (
        "drain_started",
        "duplicate",
        "duplicate",
    )
    assert first["forced_execution"] == second["execution"] == again["execution"]
    assert {r.name: (r.input["force"], r.input["notice"]) for r in early.workflows.requests} == {
        execution_name(parse_notice(body(doc)), INSTANCE): (False, "scheduled"),
        execution_name(parse_notice(body(doc)), INSTANCE, forced=True): (True, "scheduled"),
    }


def test_a_scheduled_change_days_out_also_starts_a_forced_drain_that_waits_for_its_last_day() -> None:
    """Two weeks before an instance retirement (EC2 user guide, "Scheduled events for your instances":
    the instance is stopped or terminated at the event's start) the change got only a one-day drain
    without force. A PodDisruptionBudget that blocked it timed it out, the node was uncordoned, and no
    forced drain came unless AWS Health sent an update in the last day, which it need not: the pods ran
    on until AWS retired the instance under them. aws-node-termination-handler drains at once
    (sqsevent/scheduled-change-event.go) and Karpenter deletes the NodeClaim at once (interruption
    controller, actionForMessage: ScheduledChangeKind is CordonAndDrain); the drain without force still
    starts now, and the forced one is started with it, waiting (not_before) until a day before the
    change's start less the margin, its deadline that end."""
    rig = Rig(world(), now=datetime(2026, 2, 18, 9, 0, tzinfo=UTC))  # the sample's start: 4 Mar 09:00
    doc = sample("interrupt-health-scheduled.json")
    [out] = rig.handle(doc)
    now, later = rig.workflows.requests
    notice = parse_notice(body(doc))

    assert out["outcome"] == "drain_started" and out["deadline_seconds"] == 86_400
    assert (now.input["force"], now.input["deadline_seconds"]) == (
        False,
        86_400,
    ) and "not_before" not in now.input
    assert now.name == execution_name(notice, INSTANCE)
    assert later.name == execution_name(notice, INSTANCE, forced=True) != now.name
    assert (later.input["force"], later.input["notice"], later.input["leaving"]) == (True, "scheduled", True)
    # a day before 4 Mar 08:55 (the start less SCHEDULED_MARGIN_SECONDS), the drain's longest deadline
    assert (later.input["not_before"], later.input["deadline_seconds"]) == ("2026-03-03T08:55:00Z", 86_400)
    assert drain_refusal(later.input["deadline_seconds"], later.input["poll_seconds"]) is None
    assert out["forced_execution"].endswith(f":execution:spillway-prod-drain-node:{later.name}")
    assert out["forced_from"] == "2026-03-03T08:55:00Z"


def test_the_forced_drain_waiting_for_a_change_names_the_change_it_waits_for() -> None:
    """Once its wait is over the forced drain asks EC2 whether the change still stands (a change AWS
    canceled, or one a stop and start completed, must not drain; one the customer moved later must wait
    again): its request names the change's start as AWS Health announced it and EC2's event code for
    the Health event type (AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED: instance-retirement). The drain
    without force, which starts now, has neither."""
    rig = Rig(world(), now=datetime(2026, 2, 18, 9, 0, tzinfo=UTC))
    doc = sample("interrupt-health-scheduled.json")
    rig.handle(doc)
    now, later = rig.workflows.requests

    assert (later.input["scheduled_start"], later.input["event_code"]) == (
        "2026-03-04T09:00:00Z",
        "instance-retirement",
    )
    assert later.input["instance_id"] == INSTANCE and later.input["region"] == "us-east-1"
    assert "scheduled_start" not in now.input and "event_code" not in now.input

    other = copy.deepcopy(doc)
    other["detail"]["eventTypeCode"] = "AWS_EC2_PERSISTENT_INSTANCE_POWER_MAINTENANCE_SCHEDULED"
    other["detail"]["eventArn"] = "arn:aws:health:us-east-1::event/EC2/power/abc"
    fresh = Rig(world(), now=datetime(2026, 2, 18, 9, 0, tzinfo=UTC))
    fresh.handle(other)
    forced = fresh.workflows.requests[1].input
    assert forced["scheduled_start"] == "2026-03-04T09:00:00Z" and "event_code" not in forced


def test_an_update_moving_a_scheduled_change_earlier_starts_a_forced_drain_for_the_new_start() -> None:
    """An event rescheduled to an earlier start (EC2 user guide, "Reschedule a scheduled event") comes
    again under its ARN: the forced drain waiting for the old start's last day would begin after the new
    start, so the update's forced drain, named after its start too, is started beside it; the update
    that only repeats the start is a duplicate."""
    rig = Rig(world(), now=datetime(2026, 2, 18, 9, 0, tzinfo=UTC))
    doc = sample("interrupt-health-scheduled.json")
    [first] = rig.handle(doc)
    moved = copy.deepcopy(doc)
    moved["id"], moved["time"] = "another-event-id", "2026-02-19T09:00:00Z"
    moved["detail"]["startTime"] = "Sat, 28 Feb 2026 09:00:00 GMT"
    rig.now = datetime(2026, 2, 19, 9, 0, tzinfo=UTC)
    [second] = rig.handle(moved)
    [again] = rig.handle(doc)

    assert second["forced_execution"] != first["forced_execution"] == again["forced_execution"]
    assert (second["forced_from"], first["forced_from"]) == ("2026-02-27T08:55:00Z", "2026-03-03T08:55:00Z")
    assert rig.counted("InterruptDrainsStarted") == 3  # the drain now, and one forced drain per start


def test_a_scheduled_change_within_a_day_starts_only_its_forced_drain() -> None:
    rig = Rig(world(), now=datetime(2026, 3, 3, 9, 0, tzinfo=UTC))  # a day before 4 Mar 09:00
    [out] = rig.handle(sample("interrupt-health-scheduled.json"))
    [request] = rig.workflows.requests
    assert (request.input["force"], request.input["deadline_seconds"]) == (True, 86_400 - 300)
    assert "not_before" not in request.input and "forced_execution" not in out


def test_the_forced_drain_a_change_within_a_day_starts_names_the_change_as_the_waiting_one_does() -> None:
    """A change moved earlier into its last day (EC2 ModifyInstanceEventStartTime) and announced again
    starts a forced drain at once, while the forced drain of the old start, woken on its last day,
    reads EC2's events, finds the same event starting earlier and drains to the same end. The one
    started within the day read no event: its request named no change, so its cordon named no event,
    and the two drained side by side and both terminated. Now it names the change as the waiting one
    does, reads EC2's events when it starts, and its cordon names the event it follows."""
    rig = Rig(world(), now=datetime(2026, 3, 3, 9, 0, tzinfo=UTC))  # a day before 4 Mar 09:00
    rig.handle(sample("interrupt-health-scheduled.json"))
    [request] = rig.workflows.requests
    assert (request.input["scheduled_start"], request.input["event_code"]) == (
        "2026-03-04T09:00:00Z",
        "instance-retirement",
    )
    assert "not_before" not in request.input


# --- acting on the cluster -------------------------------------------------------------------------


def test_a_spot_warning_starts_one_forced_drain_of_our_node_and_backs_off_its_type_in_its_zone() -> None:
    rig = Rig(world())
    [out] = rig.handle(sample("interrupt-spot-warning.json"))
    assert out["outcome"] == "drain_started"
    [request] = rig.workflows.requests
    assert request.name == f"interrupt-{INSTANCE}" and request.state_machine_arn == ARN
    assert request.input == {
        "cluster": "prod", "node": "ip-10-0-1-7.ec2.internal", "instance_id": INSTANCE, "region": "us-east-1",
        "group": "spot-a", "reason": "spot interruption warning 1e5527d7-bb36-4607-3370-4164db56a40e",
        "deadline_seconds": 80, "poll_seconds": 5, "force": True, "terminate": True,
        "leaving": True, "notice": "interruption",
        "deadline_by": "2026-03-02T09:31:30Z",  # the warning's time + 90 s, however late the drain starts
    }  # fmt: skip
    # the Spot pool of the type in its zone (State.pools: the planner weighs spot-ab's other zone), and
    # the Spot groups that launch nothing else; not od-a: EC2 reclaiming Spot capacity says nothing of
    # on-demand capacity (Karpenter's unavailable offerings are keyed by capacity type, type and zone)
    assert sorted(g for g, _, _ in rig.ledger.backoffs) == [
        "pool#spot/us-east-1a/g5.xlarge", "spot-a", "spot-a2"
    ]  # fmt: skip
    assert {until for _, until, _ in rig.ledger.backoffs} == {WARNED_AT + timedelta(minutes=15)}
    assert rig.counted("SpotGroupsBackedOff") == 2


def test_a_spot_warning_handled_late_gives_the_store_its_clock_to_judge_its_back_off_over() -> None:
    """A warning handled late (the queue keeps a notice for a day while the function fails or its mapping
    is off; a redrive from the dead-letter queue is refused, the runbook drains by hand) backs its pool
    off until its time + 15 minutes, over by now: without the clock the store took it for EC2 having
    none and let it replace a gang's live back-off of the pool (fewer nodes: "stronger"), sending big
    gangs back into a pool that had just refused them. Every back-off it writes carries ``now``."""
    rig = Rig(world(), now=WARNED_AT + timedelta(hours=1))
    rig.handle(sample("interrupt-spot-warning.json"))
    assert len(rig.ledger.backoffs) == 3
    assert rig.ledger.backoff_now == [rig.now] * 3


def test_the_same_message_twice_starts_nothing_new() -> None:
    rig = Rig(world())
    rig.handle(sample("interrupt-spot-warning.json"))
    [again] = rig.handle(sample("interrupt-spot-warning.json"))
    assert again["outcome"] == "duplicate" and len(rig.workflows.names) == 1
    assert rig.counted("InterruptDuplicates") == 1


def test_a_group_at_its_minimum_is_left_to_the_drain_to_judge_when_it_starts() -> None:
    """The snapshot may be a minute old: the drain judges MinSize from the group as it is when it starts
    (``leaving``: at MinSize it drains without terminating; test_drain_steps)."""
    rig = Rig(world(desired=1, min_size=1))
    rig.handle(sample("interrupt-spot-warning.json"))
    request = rig.workflows.requests[0].input
    assert (request["terminate"], request["leaving"]) == (True, True)


def test_a_rebalance_recommendation_spillway_terminates_for_backs_off_its_spot_pool() -> None:
    """EC2 user guide, "EC2 instance rebalance recommendations": the instance is at elevated risk of
    interruption, and the work is to move to instances "not at an elevated risk". In a group without
    Capacity Rebalancing Spillway drains and terminates the instance, and the planner launches room for
    its pods; with no back-off it launched into the same at-risk pool, whose new instance could get a
    recommendation of its own (evictions again and again). The Spot pool of the type in its zone is
    backed off now, as for a Spot warning and for as long (INTERRUPTION_BACKOFF_MINUTES, 15, from the
    notice's time: longer than the recommendation's drain, 10 minutes, during which its pods are evicted
    and launched for), with the Spot groups that launch nothing else; on-demand capacity is not."""
    rig = Rig(world())
    [out] = rig.handle(sample("interrupt-rebalance.json"))
    [request] = rig.workflows.requests
    assert out["outcome"] == "drain_started" and request.name == f"rebalance-{INSTANCE}"
    # without force, and named a notice's: a node its operator protected is left alone (test_drain_steps)
    assert (request.input["force"], request.input["notice"], request.input["terminate"]) == (
        False, "rebalance", True
    )  # fmt: skip
    assert sorted(g for g, _, _ in rig.ledger.backoffs) == [
        "pool#spot/us-east-1a/g5.xlarge", "spot-a", "spot-a2"
    ]  # fmt: skip
    recommended_at = parse_notice(body(sample("interrupt-rebalance.json"))).time
    assert {until for _, until, _ in rig.ledger.backoffs} == {recommended_at + timedelta(minutes=15)}
    assert all("rebalance recommendation" in reason for _, _, reason in rig.ledger.backoffs)
    assert out["backed_off"]


def test_a_rebalance_recommendation_its_group_replaces_for_backs_nothing_off() -> None:
    """With Capacity Rebalancing the group launches the replacement itself and Spillway terminates
    nothing (test_asg_own_replacements): no back-off, as before."""
    snapshot = world()
    snapshot = replace(snapshot, groups=tuple(
        replace(g, capacity_rebalance=True) if g.name == "spot-a" else g for g in snapshot.groups
    ))  # fmt: skip
    rig = Rig(snapshot)
    [out] = rig.handle(sample("interrupt-rebalance.json"))
    assert out["group_replaces"] is True and rig.ledger.backoffs == [] and "backed_off" not in out


def test_an_instance_that_is_not_our_node_is_ignored() -> None:
    rig = Rig(world())
    doc = copy.deepcopy(sample("interrupt-spot-warning.json"))
    doc["detail"]["instance-id"] = "i-0fffffffffffffff0"
    [out] = rig.handle(doc)
    assert out["outcome"] == "not_our_node" and rig.workflows.requests == [] and rig.ledger.backoffs == []
    assert rig.counted("InterruptIgnored") == 1


def joining(at: datetime, *, tagged: bool = True) -> tuple[Rig, dict[str, Any]]:
    """A Spot warning of an instance of a group (tagged for the cluster or not) that backs no Node of the
    snapshot, handled at ``at``."""
    rig = Rig(world(), now=at)
    rig.cloud = FakeCloud(cluster="prod")
    rig.cloud.add_group("spot-new", ["i-0ccccccccccccccc1"], tagged=tagged)
    doc = copy.deepcopy(sample("interrupt-spot-warning.json"))
    doc["detail"]["instance-id"] = "i-0ccccccccccccccc1"
    return rig, doc


def test_a_spot_warning_of_an_instance_of_ours_not_yet_in_the_snapshot_is_tried_again() -> None:
    """The snapshot is up to 20 s old: a Node that joined since is not in it, and dropping its warning as
    not_our_node left its pods to die with the instance. AWS puts the instance in a group tagged for
    the cluster (no Kubernetes call): the record fails, so SQS hands it over again with a later
    snapshot, while the warning's deadline runs; after it, or in another group, it is dropped."""
    rig, doc = joining(WARNED_AT + timedelta(seconds=10))
    with pytest.raises(NodeNotObserved):
        rig.handle(doc)
    assert rig.workflows.requests == []  # its pool is backed off at once (the next test)

    late, doc = joining(WARNED_AT + timedelta(seconds=90))  # the deadline has passed: nothing to win
    assert late.handle(doc)[0]["outcome"] == "not_our_node"
    theirs, doc = joining(WARNED_AT + timedelta(seconds=10), tagged=False)
    assert theirs.handle(doc)[0]["outcome"] == "not_our_node"


def test_a_spot_warning_of_an_instance_of_ours_with_no_node_yet_backs_off_its_pool_at_once() -> None:
    """A Spot pool short of capacity takes back instances soon after launch, often before their Node
    joins. The warning still says the pool (Spot, type, zone) is being reclaimed, so it is backed off
    as for a Node's instance: Karpenter's interruption controller marks the offering unavailable for a
    NodeClaim found by its providerID, which it has from launch, before the Node registers
    (aws/karpenter-provider-aws pkg/controllers/interruption/controller.go, handleNodeClaim). Spillway
    backed off nothing until a snapshot showed the Node, and nothing at all when none did before the
    deadline, so the group's replacement and the planner's next launches went to the same pool. The
    type and zone are AWS's (DescribeAutoScalingInstances: InstanceType, AvailabilityZone)."""
    fresh = "i-0ccccccccccccccc1"
    expected = {"pool#spot/us-east-1a/g5.xlarge", "spot-a", "spot-a2"}  # as for a Node's instance

    rig, doc = joining(WARNED_AT + timedelta(seconds=10))
    assert rig.cloud is not None
    rig.cloud.add_group("spot-new", [fresh], instance_type="g5.xlarge", zones=["us-east-1a"])
    with pytest.raises(NodeNotObserved):  # tried again for its Node, as before
        rig.handle(doc)
    assert {g for g, _, _ in rig.ledger.backoffs} == expected
    assert {until for _, until, _ in rig.ledger.backoffs} == {WARNED_AT + timedelta(minutes=15)}
    assert rig.workflows.requests == []

    late, doc = joining(WARNED_AT + timedelta(seconds=90))  # past the deadline: dropped, still backed off
    assert late.cloud is not None
    late.cloud.add_group("spot-new", [fresh], instance_type="g5.xlarge", zones=["us-east-1a"])
    [out] = late.handle(doc)
    assert out["outcome"] == "not_our_node" and late.workflows.requests == []
    assert {g for g, _, _ in late.ledger.backoffs} == expected

    theirs, doc = joining(WARNED_AT + timedelta(seconds=10), tagged=False)  # not the cluster's group
    assert theirs.cloud is not None
    theirs.cloud.add_group("spot-new", [fresh], instance_type="g5.xlarge", tagged=False)
    assert theirs.handle(doc)[0]["outcome"] == "not_our_node" and theirs.ledger.backoffs == []


def test_a_rebalance_recommendation_of_an_instance_with_no_node_backs_nothing_off() -> None:
    """Only the warning says the pool is being reclaimed; a recommendation says it may be."""
    doc, sent = of_joining("interrupt-rebalance.json")
    rig, _ = joining(sent + timedelta(seconds=30))
    assert rig.cloud is not None
    rig.cloud.add_group("spot-new", ["i-0ccccccccccccccc1"], instance_type="g5.xlarge")
    with pytest.raises(NodeNotObserved):
        rig.handle(doc)
    assert rig.ledger.backoffs == []


def of_joining(name: str, **detail: Any) -> tuple[dict[str, Any], datetime]:
    """Sample ``name`` about the joining instance (see :func:`joining`), and the event's time."""
    doc: dict[str, Any] = json.loads(json.dumps(sample(name)).replace(INSTANCE, "i-0ccccccccccccccc1"))
    doc["detail"].update(detail)
    return doc, datetime.fromisoformat(doc["time"].replace("Z", "+00:00"))


@pytest.mark.parametrize("name", ["interrupt-rebalance.json", "interrupt-health-scheduled.json"])
def test_a_rebalance_or_scheduled_notice_of_an_instance_of_ours_not_yet_in_the_snapshot_is_tried_again(
    name: str,
) -> None:
    """EC2 user guide, "EC2 instance rebalance recommendations"
    (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/rebalance-recommendations.html): the signal may
    come well before the two-minute warning, or with it, and events are emitted on a best-effort basis
    (none is sent again); AWS Health scheduled changes (retirement, maintenance) come days ahead. A
    just-launched node of ours that joined after the snapshot had its Spot warning tried again, but its
    recommendation or retirement notice dropped as not_our_node: no drain until the interruption itself.
    Both are now tried again like the warning, while the drain they ask for still has time and at most
    JOIN_RETRY_SECONDS after the notice (inside the queue's redrive), then dropped."""
    doc, sent = of_joining(name)
    rig, _ = joining(sent + timedelta(seconds=30))
    with pytest.raises(NodeNotObserved):
        rig.handle(doc)
    assert rig.workflows.requests == []

    late, _ = joining(sent + timedelta(seconds=JOIN_RETRY_SECONDS))
    assert late.handle(doc)[0]["outcome"] == "not_our_node"
    theirs, _ = joining(sent + timedelta(seconds=30), tagged=False)
    assert theirs.handle(doc)[0]["outcome"] == "not_our_node"


def test_a_scheduled_change_about_to_start_is_not_tried_again_past_its_drain_window() -> None:
    """The change starts 60 s after SCHEDULED_MARGIN_SECONDS from the notice: a drain started later has
    no time left before it, so the notice is tried again only within those 60 s."""
    doc, sent = of_joining("interrupt-health-scheduled.json")
    start = sent + timedelta(seconds=InterruptSettings().scheduled_margin_seconds + 60)
    doc["detail"]["startTime"] = start.strftime("%a, %d %b %Y %H:%M:%S GMT")
    rig, _ = joining(sent + timedelta(seconds=30))
    with pytest.raises(NodeNotObserved):
        rig.handle(doc)
    late, _ = joining(sent + timedelta(seconds=60))
    assert late.handle(doc)[0]["outcome"] == "not_our_node"


def test_a_notice_from_a_region_we_do_not_manage_is_ignored() -> None:
    rig = Rig(world())
    doc = copy.deepcopy(sample("interrupt-spot-warning.json"))
    doc["region"] = "eu-west-1"
    [out] = rig.handle(doc)
    assert out["outcome"] == "other_region" and rig.workflows.requests == []


def test_a_node_of_no_known_group_is_drained_only_when_aws_puts_it_in_a_group_of_ours() -> None:
    """The other Node's instance is in no group of the snapshot. In a group not tagged for the cluster
    (or in none) its drain would be refused by validation: a failed execution and a drain alarm for a
    node Spillway does not own. In a group of ours (launched since the snapshot) it is drained. (Found by
    review.)"""
    other = "i-0aaaaaaaaaaaaaaa1"
    doc = copy.deepcopy(sample("interrupt-spot-warning.json"))
    doc["detail"]["instance-id"] = other
    outcomes = {}
    for case in ("untagged", "no group", "ours"):
        rig = Rig(world())
        rig.cloud = FakeCloud(cluster="prod")
        if case != "no group":
            rig.cloud.add_group(
                "karpenter-ish" if case == "untagged" else "new", [other], tagged=case == "ours"
            )
        [out] = rig.handle(doc)
        outcomes[case] = (out["outcome"], len(rig.workflows.requests))

    assert outcomes == {
        "untagged": ("not_managed", 0),
        "no group": ("not_managed", 0),
        "ours": ("drain_started", 1),
    }
    # the request names the group AWS put it in, as it names the snapshot's: the drain checks that group
    # (and, should the instance be detached from it before the drain starts, that it detached it)
    [request] = rig.workflows.requests
    assert request.input["group"] == "new"


def test_a_node_already_shutting_down_has_nothing_to_drain() -> None:
    rig = Rig(world())
    [out] = rig.handle(sample("interrupt-state-change.json"))
    assert out["outcome"] == "gone_undrained" and rig.workflows.requests == []
    assert rig.counted("InstanceGoneUndrained") == 1
    running = copy.deepcopy(sample("interrupt-state-change.json"))
    running["detail"]["state"] = "running"
    assert rig.handle(running)[0]["outcome"] == "ignored"


def test_a_node_spillway_drained_is_not_counted_gone_undrained() -> None:
    """Every drain's own terminate sends a shutting-down event while the snapshot still shows the
    cordoned Node: counting those made the metric say nothing about missed interruptions."""
    snapshot = world()
    node = replace(snapshot.cluster.nodes[0], unschedulable=True, cordoned_by_spillway=True)
    rig = Rig(replace(snapshot, cluster=replace(snapshot.cluster, nodes=(node, *snapshot.cluster.nodes[1:]))))

    [out] = rig.handle(sample("interrupt-state-change.json"))

    assert out["outcome"] == "ignored" and rig.counted("InstanceGoneUndrained") == 0


@pytest.mark.parametrize("state", ["stopping", "stopped"])
def test_an_instance_stopping_under_a_node_is_counted_gone_undrained(state: str) -> None:
    """EC2 user guide, "EC2 Instance State-change Notification" (detail.state: pending, running, stopping,
    stopped, shutting-down, terminated); aws-node-termination-handler's queue mode drains on stopping and
    stopped as on shutting-down and terminated (pkg/monitor/sqsevent/ec2-state-change-event.go). A Node
    whose instance stops (by hand, or an AWS Health stop nobody drained) loses its pods as one whose
    instance terminates: InstanceGoneUndrained said nothing of it. (Found by review.)"""
    rig = Rig(world())
    doc = copy.deepcopy(sample("interrupt-state-change.json"))
    doc["detail"]["state"] = state
    [out] = rig.handle(doc)
    assert out["outcome"] == "gone_undrained" and rig.counted("InstanceGoneUndrained") == 1, out
    assert rig.workflows.requests == []


LIFECYCLE_AT = datetime(2026, 3, 2, 9, 31, tzinfo=UTC)  # the sample's time
TOKEN = "87654321-4321-4321-4321-210987654321"


def hooked(heartbeat: int = 300, *, now: datetime = LIFECYCLE_AT + timedelta(seconds=60)) -> Rig:
    rig = Rig(world(), now=now)
    rig.cloud = FakeCloud(cluster="prod")
    rig.cloud.add_group("spot-gpu", [INSTANCE], desired=1)
    rig.cloud.add_hook("spot-gpu", "drain-before-terminate", heartbeat=heartbeat)
    return rig


def test_a_terminate_lifecycle_action_starts_a_drain_that_completes_it_inside_the_heartbeat_timeout() -> None:
    rig = hooked(heartbeat=300)
    [out] = rig.handle(sample("interrupt-lifecycle-terminate.json"))
    assert out["outcome"] == "drain_started" and out["hook"] == "drain-before-terminate"
    # 300 s heartbeat timeout, 60 s since the event, 30 s margin for the last steps
    assert out["deadline_seconds"] == 210
    [request] = rig.workflows.requests
    assert request.name.startswith(f"lifecycle-{INSTANCE}-") and len(request.name) <= 80
    assert request.input["lifecycle"] == {
        "hook": "drain-before-terminate",
        "token": TOKEN,
        "heartbeat_seconds": 300,
    }
    assert (request.input["group"], request.input["terminate"], request.input["force"]) == (
        "spot-gpu",
        False,
        True,
    )
    assert request.input["deadline_seconds"] == 210
    assert rig.counted("LifecycleActionSeen") == 1 and rig.counted("InterruptDrainsStarted") == 1
    assert rig.cloud is not None and rig.cloud.completed == []  # the drain completes it, not this function
    # A long heartbeat timeout: the drain takes at most lifecycle_deadline_seconds (600).
    assert (
        hooked(heartbeat=7200).handle(sample("interrupt-lifecycle-terminate.json"))[0]["deadline_seconds"]
        == 600
    )
    # Past the timeout already: a drain of one round (deadline 0), forced, still completes the action.
    late = hooked(heartbeat=60, now=LIFECYCLE_AT + timedelta(seconds=120))
    assert late.handle(sample("interrupt-lifecycle-terminate.json"))[0]["deadline_seconds"] == 0


@pytest.mark.parametrize(("poll", "heartbeat"), [(30, 60), (60, 30), (15, 44)])
def test_a_lifecycle_drain_polls_often_enough_for_the_hooks_heartbeats(poll: int, heartbeat: int) -> None:
    """A lifecycle drain records a heartbeat with an eviction round, so the drain refuses a poll longer
    than a third of the hook's HeartbeatTimeout (spillway.act.drain._heartbeat_refusal). Both settings
    are valid alone: INTERRUPT_POLL_SECONDS up to 60, a HeartbeatTimeout from 30 s (EC2 Auto Scaling
    API Reference, PutLifecycleHook). The request took the configured poll as it was, and the drain
    refused it: the execution failed, nothing was evicted, and the pods died with the instance at the
    hook's timeout. The poll is now kept within the third."""
    from spillway.act.drain import parse_request

    rig = hooked(heartbeat=heartbeat, now=LIFECYCLE_AT + timedelta(seconds=1))
    interrupter = replace(rig.interrupter(), settings=InterruptSettings(poll_seconds=poll))
    [out] = interrupter.handle(parse_notice(body(sample("interrupt-lifecycle-terminate.json"))))
    assert out["outcome"] == "drain_started"
    [request] = rig.workflows.requests
    assert 1 <= request.input["poll_seconds"] <= heartbeat // 3
    parse_request(request.input)  # the drain takes it


def warm_pool_termination(rig: Rig) -> dict[str, Any]:
    """The rig's warm-pool instance waiting in Warmed:Terminating:Wait, and its lifecycle event (Origin
    WarmPool, as "Warm pool example events and patterns" shows it)."""
    assert rig.cloud is not None
    [instance] = rig.cloud.groups[("us-east-1", "spot-gpu")]["Instances"]
    instance["LifecycleState"] = "Warmed:Terminating:Wait"
    event = copy.deepcopy(sample("interrupt-lifecycle-terminate.json"))
    event["detail"].update(Origin="WarmPool", Destination="EC2")
    return event


def test_a_warm_pool_instance_with_a_node_the_pool_terminates_gets_a_lifecycle_drain() -> None:
    """A Warmed:Running pool instance whose kubelet joined the cluster has a Node; when the pool
    terminates it (Warmed:Terminating:Wait, the event's Origin WarmPool), its pods are drained as any
    terminated instance's, the drain completing the action."""
    rig = hooked()
    [out] = rig.handle(warm_pool_termination(rig))
    assert out["outcome"] == "drain_started", out
    [request] = rig.workflows.requests
    assert request.input["lifecycle"]["token"] == TOKEN and request.input["terminate"] is False


NODE = "ip-10-0-1-7.ec2.internal"


def pod(name: str, **kw: Any) -> PodInfo:
    fields: dict[str, Any] = {"node_name": NODE, "phase": "Running", "owner_kind": "ReplicaSet"}
    return PodInfo(namespace="team-a", name=name, requests={"cpu": 100}, **{**fields, **kw})


def draining(*pods: PodInfo) -> Rig:
    """A hooked group terminating INSTANCE, whose Node a Spillway drain cordoned and runs ``pods``."""
    rig = hooked()
    snapshot = world()
    node = replace(snapshot.cluster.nodes[0], unschedulable=True, cordoned_by_spillway=True)
    cluster = replace(snapshot.cluster, nodes=(node, *snapshot.cluster.nodes[1:]), pods=pods)
    rig.snapshots = FakeSnapshots()
    rig.snapshots.add(replace(snapshot, cluster=cluster))
    return rig


def test_a_lifecycle_action_on_a_node_a_spillway_drain_emptied_is_completed_at_once() -> None:
    """A scale-down's own terminate: its evictions came first, so the node runs nothing to evict when
    the event arrives (DaemonSet pods, finished ones, one still terminating after its eviction, and
    other nodes' pods do not count). No drain starts; the action is completed at once, by its token:
    the emptying drain may complete only its own hooks, or be a lifecycle drain for another hook of the
    group, and this hook's action would wait out its HeartbeatTimeout, the instance lingering, billed.
    Nothing is left on the node to protect."""
    rig = draining(
        pod("agent-x", owner_kind="DaemonSet", daemonset=True),
        pod("job-1", phase="Succeeded"),
        pod("web-0", terminating=True),
        pod("web-9", node_name="ip-10-0-1-8.ec2.internal"),
    )
    assert rig.cloud is not None
    rig.cloud.hold("us-east-1", INSTANCE, {"drain-before-terminate": TOKEN, "other-hook": str(uuid.uuid4())})
    [out] = rig.handle(sample("interrupt-lifecycle-terminate.json"))
    assert out["outcome"] == "own_drain" and out["completed"] is True and rig.workflows.requests == []
    assert rig.cloud.completed == [("spot-gpu", "drain-before-terminate", INSTANCE, "CONTINUE")]
    assert ("complete_lifecycle_action", ("us-east-1", "spot-gpu", "drain-before-terminate", INSTANCE,
            TOKEN, "CONTINUE")) in rig.cloud.calls  # fmt: skip
    assert rig.cloud.waiting[INSTANCE] == {"other-hook": rig.cloud.waiting[INSTANCE]["other-hook"]}


def test_a_lifecycle_action_an_emptying_drain_completed_already_is_no_error() -> None:
    """The emptying drain's own terminate completed every hook by instance id before the event came:
    no action waits for the token (LifecycleActionNotFound), which is the end wanted."""
    rig = draining(pod("agent-x", owner_kind="DaemonSet", daemonset=True))
    [out] = rig.handle(sample("interrupt-lifecycle-terminate.json"))
    assert out["outcome"] == "own_drain" and out["completed"] is False
    assert "no longer waits" in out["note"] and rig.workflows.requests == []


def test_an_emptied_node_in_an_old_snapshot_is_left_to_a_lifecycle_drain() -> None:
    """The snapshot shows the node cordoned by a Spillway drain and empty, but it is older than
    OWN_DRAIN_SNAPSHOT_SECONDS at the notice's time: the node may have been uncordoned since (a failed
    drain's compensation) and taken pods again, so the action is not completed on its word; the
    lifecycle drain, which reads the cluster as it is, starts instead."""
    rig = draining()
    stored = rig.snapshots.latest("prod")
    assert stored is not None
    old = stored.cluster.taken_at - timedelta(seconds=OWN_DRAIN_SNAPSHOT_SECONDS + 1)
    rig.snapshots = FakeSnapshots()
    rig.snapshots.add(replace(stored, cluster=replace(stored.cluster, taken_at=old)))
    [out] = rig.handle(sample("interrupt-lifecycle-terminate.json"))
    assert out["outcome"] == "drain_started" and out["taken_over"] is True
    assert rig.cloud is not None and rig.cloud.completed == []
    [request] = rig.workflows.requests
    assert request.input["lifecycle"]["token"] == TOKEN


@pytest.mark.parametrize(
    "busy",
    [
        pod("web-0"),  # a scale-down's or a rebalance recommendation's drain still evicting
        pod("train-0", do_not_disrupt=True),  # kept by a drain without force: only force evicts it
    ],
)
def test_a_lifecycle_action_on_a_node_a_spillway_drain_is_still_evicting_starts_its_own_drain(
    busy: PodInfo,
) -> None:
    """The group terminates a node another Spillway drain is still emptying (capacity rebalancing's
    replacement after the recommendation, AZ rebalancing, an instance refresh, a scale-in). That drain
    holds no action token: it records no heartbeats (the hook's DefaultResult would terminate the
    instance under its pods when HeartbeatTimeout runs out), and a drain without force that times out
    would uncordon a node the group is terminating. The lifecycle drain starts anyway and takes the
    node over."""
    rig = draining(busy)
    [out] = rig.handle(sample("interrupt-lifecycle-terminate.json"))
    assert out["outcome"] == "drain_started" and out["taken_over"] is True
    [request] = rig.workflows.requests
    assert request.input["lifecycle"]["token"] == TOKEN and request.input["force"] is True
    assert request.input["terminate"] is False and request.input["group"] == "spot-gpu"


@pytest.mark.parametrize("instance", ["i-0aaaaaaaaaaaaaaa1", INSTANCE])
def test_a_lifecycle_action_of_a_group_not_ours_starts_no_drain(instance: str) -> None:
    """Auto Scaling user guide, "EC2 Instance-terminate Lifecycle Action" (detail names the
    AutoScalingGroupName; the rule takes every group of the account). A hook of a group not tagged for
    the cluster (a self-managed group with its own termination handler) whose instance is a Node of the
    cluster started a forced lifecycle drain that validation refuses: a failed execution and a drain
    alarm on every scale-in of a group Spillway does not own. Judged by the group the action names,
    whether the snapshot knows the node in no group (the first Node) or in one of its own (the
    instance has moved since). (Found by review.)"""
    rig = Rig(world())
    rig.cloud = FakeCloud(cluster="prod")
    rig.cloud.add_group("not-spillways", [instance], tagged=False)
    rig.cloud.add_hook("not-spillways", "drain-before-terminate", heartbeat=300)
    doc = copy.deepcopy(sample("interrupt-lifecycle-terminate.json"))
    doc["detail"].update(EC2InstanceId=instance, AutoScalingGroupName="not-spillways")
    [out] = rig.handle(doc)
    assert (out["outcome"], rig.workflows.requests) == ("not_managed", []), out
    assert rig.cloud.completed == [] and rig.counted("InterruptIgnored") == 1
    assert rig.counted("LifecycleActionSeen") == 0


def another_teams_hook(rig: Rig) -> dict[str, Any]:
    """The same group also has a log-shipping team's terminate hook, and its action's event arrives."""
    assert rig.cloud is not None
    rig.cloud.add_hook("spot-gpu", "ship-logs", heartbeat=900)
    rig.cloud.hold("us-east-1", INSTANCE, {"drain-before-terminate": TOKEN, "ship-logs": OTHER_TOKEN})
    doc = copy.deepcopy(sample("interrupt-lifecycle-terminate.json"))
    doc["detail"].update(LifecycleHookName="ship-logs", LifecycleActionToken=OTHER_TOKEN)
    return doc


OTHER_TOKEN = "11111111-2222-4333-8444-555555555555"


@pytest.mark.parametrize("scene", ["busy", "emptied"])
def test_another_teams_lifecycle_hook_on_our_group_is_left_to_its_owner(scene: str) -> None:
    """Auto Scaling user guide, "Amazon EC2 Auto Scaling lifecycle hooks" and "Complete a lifecycle
    action" (https://docs.aws.amazon.com/autoscaling/ec2/userguide/completing-lifecycle-hooks.html): every
    hook of a group sends its own "EC2 Instance-terminate Lifecycle Action" event (detail.LifecycleHookName,
    LifecycleActionToken), and CompleteLifecycleAction with CONTINUE ends that hook's wait: the instance
    goes on to termination once every hook's action is done. The rule takes every hook of the account,
    so Spillway drained for, and completed, a log-shipping hook on one of its groups, cutting its owner's
    action short. Only hooks named in LIFECYCLE_HOOK_NAMES (default drain-before-terminate) are
    Spillway's; another starts no drain and is never completed, with a note naming it."""
    rig = hooked() if scene == "busy" else draining(pod("agent-x", owner_kind="DaemonSet", daemonset=True))
    doc = another_teams_hook(rig)
    assert rig.cloud is not None
    [out] = rig.handle(doc)
    assert (out["outcome"], rig.workflows.requests, rig.cloud.completed) == ("not_our_hook", [], []), out
    assert out["hook"] == "ship-logs" and "drain-before-terminate" in out["note"]
    assert rig.cloud.waiting[INSTANCE]["ship-logs"] == OTHER_TOKEN  # its owner completes it
    assert rig.counted("InterruptIgnored") == 1 and rig.counted("LifecycleActionSeen") == 0


def test_a_configured_hook_name_is_spillways_and_the_default_one_then_is_not() -> None:
    """An existing setup whose hook has another name keeps working by naming it (LifecycleHookNames)."""
    rig = hooked()
    doc = another_teams_hook(rig)
    mine = rig.interrupter()
    mine.settings = replace(mine.settings, lifecycle_hooks=("ship-logs", "k8s-drain"))
    [out] = mine.handle(parse_notice(body(doc)))
    assert out["outcome"] == "drain_started" and out["hook"] == "ship-logs"
    [request] = rig.workflows.requests
    assert request.input["lifecycle"]["hook"] == "ship-logs"
    [default] = mine.handle(parse_notice(body(sample("interrupt-lifecycle-terminate.json"))))
    assert default["outcome"] == "not_our_hook"


HOOK = "drain-before-terminate"


def nodeless(taken_at: datetime, *, now: datetime = LIFECYCLE_AT + timedelta(seconds=45), **kw: Any) -> Rig:
    """INSTANCE backs no Node (it never joined, or its Node was deleted) in a snapshot taken at
    ``taken_at``, and its group terminates it: Spillway's hook holds it in Terminating:Wait."""
    snapshot = world()
    cluster = replace(snapshot.cluster, taken_at=taken_at, nodes=snapshot.cluster.nodes[1:])
    rig = Rig(replace(snapshot, cluster=cluster), now=now)
    rig.cloud = FakeCloud(cluster="prod")
    rig.cloud.add_group("spot-gpu", [INSTANCE], desired=1, **kw)
    rig.cloud.add_hook("spot-gpu", HOOK, heartbeat=300)
    rig.cloud.hold("us-east-1", INSTANCE, {HOOK: TOKEN})
    return rig


def test_a_lifecycle_action_of_an_instance_with_no_node_is_completed_at_once() -> None:
    """Auto Scaling API Reference, CompleteLifecycleAction, and user guide "Complete a lifecycle action":
    the instance waits in Terminating:Wait until the action is completed or the hook's HeartbeatTimeout
    passes. An instance that never joined the cluster (or whose Node is gone) has nothing to drain, yet
    the notice was ignored (not_our_node) and the instance waited, billed, for the whole timeout
    (aws-node-termination-handler issue #575; its queue processor completes CONTINUE when the node is
    not found only with delete-sqs-msg-if-node-not-found). A snapshot taken after the notice shows no
    Node for it, AWS says the action waits: completed CONTINUE by its token, outcome no_node."""
    rig = nodeless(LIFECYCLE_AT + timedelta(seconds=20))
    [out] = rig.handle(sample("interrupt-lifecycle-terminate.json"))
    assert (out["outcome"], out["completed"], out["hook"]) == ("no_node", True, HOOK), out
    assert rig.workflows.requests == []
    assert rig.cloud is not None and rig.cloud.completed == [("spot-gpu", HOOK, INSTANCE, "CONTINUE")]
    assert rig.cloud.called("complete_lifecycle_action") == [
        ("us-east-1", "spot-gpu", HOOK, INSTANCE, TOKEN, "CONTINUE")
    ]
    assert rig.counted("LifecycleNoNode") == 1 and rig.counted("LifecycleActionsCompleted") == 1
    assert rig.counted("InterruptIgnored") == 0
    assert INSTANCE not in rig.cloud.waiting  # the group goes on terminating it


def test_a_node_not_yet_in_an_older_snapshot_is_not_taken_for_an_absent_one() -> None:
    """The order of events: the instance entered Terminating:Wait at the notice's time; a snapshot
    taken before it may miss a Node that joined since (observe writes one every 20 s), pods and all.
    So the action is not completed on its word: the notice is tried again (NodeNotObserved, back after
    the queue's visibility timeout), and the later snapshot that shows the Node starts the ordinary
    lifecycle drain, which evicts before it completes the action."""
    rig = nodeless(LIFECYCLE_AT - timedelta(seconds=5))
    with pytest.raises(NodeNotObserved):
        rig.handle(sample("interrupt-lifecycle-terminate.json"))
    assert rig.cloud is not None and rig.cloud.completed == [] and rig.workflows.requests == []
    later = world()  # the Node joined (it has pods): observe's next snapshot, after the notice
    rig.snapshots.add(
        replace(later, cluster=replace(later.cluster, taken_at=LIFECYCLE_AT + timedelta(seconds=15)))
    )
    [out] = rig.handle(sample("interrupt-lifecycle-terminate.json"))
    assert out["outcome"] == "drain_started" and rig.cloud.completed == []
    [request] = rig.workflows.requests
    assert request.input["lifecycle"]["token"] == TOKEN and request.input["node"] == NODE
    # No snapshot since the notice for JOIN_RETRY_SECONDS (observe failing): dropped, not completed.
    stale = nodeless(
        LIFECYCLE_AT - timedelta(seconds=5), now=LIFECYCLE_AT + timedelta(seconds=JOIN_RETRY_SECONDS)
    )
    [out] = stale.handle(sample("interrupt-lifecycle-terminate.json"))
    assert (out["outcome"], out["completed"]) == ("no_node", False) and "no snapshot" in out["note"]
    assert stale.cloud is not None and stale.cloud.completed == []


def test_a_nodeless_instance_of_a_group_not_ours_is_left_alone() -> None:
    """Another cluster's Spillway may own a hook of the same name (the default one) on its own groups, in
    the same account and region: its instance backs no Node of this cluster, but has one in that
    cluster. Only a group tagged for this cluster is completed."""
    rig = nodeless(LIFECYCLE_AT + timedelta(seconds=20), tagged=False)
    [out] = rig.handle(sample("interrupt-lifecycle-terminate.json"))
    assert out["outcome"] == "not_our_node" and rig.counted("InterruptIgnored") == 1
    assert (
        rig.cloud is not None
        and rig.cloud.completed == []
        and rig.cloud.called("complete_lifecycle_action") == []
    )


def test_a_nodeless_instance_whose_action_no_longer_waits_is_left_as_it_is() -> None:
    """Spillway's own drain completed the action and deleted the Node before the event came (the
    instance is terminated, or still held by another team's hook): nothing is completed again."""
    gone = nodeless(LIFECYCLE_AT + timedelta(seconds=20))
    assert gone.cloud is not None
    gone.cloud.groups[("us-east-1", "spot-gpu")]["Instances"] = []
    [out] = gone.handle(sample("interrupt-lifecycle-terminate.json"))
    assert (out["outcome"], out["completed"]) == ("no_node", False) and "no Auto Scaling group" in out["note"]
    assert gone.cloud.called("complete_lifecycle_action") == []
    held = nodeless(LIFECYCLE_AT + timedelta(seconds=20))
    assert held.cloud is not None
    held.cloud.hold(
        "us-east-1", INSTANCE, {"ship-logs": OTHER_TOKEN}
    )  # ours is done; the log shipper's waits
    [out] = held.handle(sample("interrupt-lifecycle-terminate.json"))
    assert (out["outcome"], out["completed"]) == ("no_node", False) and "no longer waits" in out["note"]
    assert held.cloud.completed == [] and held.cloud.waiting[INSTANCE] == {"ship-logs": OTHER_TOKEN}


def test_a_lifecycle_action_of_a_group_deleted_since_starts_no_drain() -> None:
    rig = hooked()
    assert rig.cloud is not None
    del rig.cloud.groups[("us-east-1", "spot-gpu")]
    [out] = rig.handle(sample("interrupt-lifecycle-terminate.json"))
    assert out["outcome"] == "not_managed" and rig.workflows.requests == []


def test_a_lifecycle_action_whose_hook_is_gone_starts_nothing() -> None:
    rig = hooked()
    assert rig.cloud is not None
    rig.cloud.hooks.clear()
    [out] = rig.handle(sample("interrupt-lifecycle-terminate.json"))
    assert out["outcome"] == "hook_gone" and rig.workflows.requests == []


def test_a_lifecycle_action_is_only_logged_without_a_cloud_to_read_its_hook() -> None:
    rig = Rig(world())
    [out] = rig.handle(sample("interrupt-lifecycle-terminate.json"))
    assert out["outcome"] == "hook_governs" and out["hook"] == "drain-before-terminate"
    assert rig.workflows.requests == []


@pytest.mark.parametrize("token", [None, "", "not-a-uuid", 42])
def test_a_lifecycle_action_without_a_token_is_malformed(token: Any) -> None:
    doc = copy.deepcopy(sample("interrupt-lifecycle-terminate.json"))
    if token is None:
        del doc["detail"]["LifecycleActionToken"]
    else:
        doc["detail"]["LifecycleActionToken"] = token
    with pytest.raises(MalformedNotice) as err:
        parse_notice(body(doc))
    assert err.value.field == "detail.LifecycleActionToken"


def test_a_scheduled_retirement_drains_under_a_name_of_that_event() -> None:
    rig = Rig(world(), now=datetime(2026, 3, 4, 8, 0, tzinfo=UTC))
    [out] = rig.handle(sample("interrupt-health-scheduled.json"))
    assert out["outcome"] == "drain_started" and out["deadline_seconds"] == 3300
    assert rig.workflows.requests[0].name.startswith(f"scheduled-{INSTANCE}-")


def test_no_snapshot_yet_is_a_failure_that_may_pass() -> None:
    rig = Rig(None)
    with pytest.raises(SnapshotNotFound):
        rig.handle(sample("interrupt-spot-warning.json"))


# --- the handler: partial batch failures -------------------------------------------------------------


def sqs_event(*bodies: str) -> dict[str, Any]:
    template = sample("interrupt-sqs.json")["Records"][0]
    return {"Records": [{**template, "messageId": f"m-{i}", "body": b} for i, b in enumerate(bodies)]}


def run_batch(rig: Rig, monkeypatch: pytest.MonkeyPatch, *bodies: str) -> tuple[set[str], list[str]]:
    """The interrupt function's record handler over one SQS batch: the ids reported failed, and the
    metrics the handler counted itself."""
    import importlib.util

    from aws_lambda_powertools.utilities.batch import process_partial_response

    spec = importlib.util.spec_from_file_location("interrupt_app", ROOT / "functions/interrupt/app.py")
    assert spec and spec.loader
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    counted: list[str] = []
    monkeypatch.setattr(app, "add_count", lambda name, value: counted.append(name))
    interrupter = rig.interrupter()
    result = process_partial_response(
        event=sqs_event(*bodies),
        record_handler=lambda record: app.handle_record(interrupter, record),
        processor=app.processor,
    )
    return {f["itemIdentifier"] for f in result["batchItemFailures"]}, counted


def test_the_handler_drops_what_it_does_not_act_on_and_reports_malformed_and_retryable_failures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rig = Rig(world())
    rig.workflows.fail("start", AwsThrottled("StartExecution throttled"), times=1)
    fleet = copy.deepcopy(sample("interrupt-spot-warning.json"))
    fleet["detail-type"] = "EC2 Fleet Error"
    failed, counted = run_batch(
        rig,
        monkeypatch,
        "{broken",
        body(sample("interrupt-spot-warning.json")),
        body(sample("interrupt-rebalance.json")),
        body(fleet),
    )
    # m-0 malformed: reported (to the DLQ); m-1 throttled: retried; m-2 fine; m-3 not ours to act on.
    assert failed == {"m-0", "m-1"}
    assert sorted(counted) == ["InterruptIgnored", "InterruptMalformed"]


def test_a_spot_warning_whose_backoff_cannot_be_written_starts_its_drain_first() -> None:
    """The drain is what saves the pods in the two minutes; the back-off is bookkeeping for later
    launches. The back-off was written first, so a state table that throttled or refused the put (as
    the role's attribute list once did for every group back-off) failed the record before its drain
    started: the drain came a visibility timeout (40 s of the 90) later, or never, the warning ending
    in the dead-letter queue. Now the drain starts, the failure still fails the record, and its retry
    (a duplicate start) writes the back-off."""
    rig = Rig(world())
    rig.ledger.fail("put_backoff", AwsThrottled("PutItem throttled"), times=1)
    with pytest.raises(AwsThrottled):
        rig.handle(sample("interrupt-spot-warning.json"))
    assert rig.workflows.names == {f"interrupt-{INSTANCE}"}
    [again] = rig.handle(sample("interrupt-spot-warning.json"))  # the message, back after its timeout
    assert again["outcome"] == "duplicate"
    assert set(again["backed_off"]) == {"pool#spot/us-east-1a/g5.xlarge", "spot-a", "spot-a2"}


def test_a_malformed_notice_is_not_lost_silently(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lambda guide, partial batch responses (only the messages listed in batchItemFailures return, the
    others are deleted) and SQS redrive (after maxReceiveCount receives, the dead-letter queue). A real
    Spot warning Spillway fails to parse (a new field shape, an id format) was deleted with one log
    line: nothing reached interrupt-dlq, the only alarmed path. Now it is reported failed, so it goes to
    the DLQ without holding up the batch's other messages. (Found by review.)"""
    broken = copy.deepcopy(sample("interrupt-spot-warning.json"))
    broken["detail"]["instance-id"] = "i-XYZ"
    rig = Rig(world())
    failed, counted = run_batch(rig, monkeypatch, body(broken), body(sample("interrupt-rebalance.json")))
    assert failed == {"m-0"}, "a malformed Spot warning was deleted: no DLQ, no alarm"
    assert counted == ["InterruptMalformed"] and len(rig.workflows.requests) == 1


@pytest.mark.parametrize(
    "when",
    [
        "2026-03-02",  # a date: read as midnight, the warning's deadline long past
        "2026-03-02T09:30:00",  # no zone: read as UTC
        "Mon, 02 Mar 2026 09:30:00 GMT",  # RFC 1123: AWS Health's startTime, never EventBridge's time
        "2026-03-02T09:30:00Z\n",
        "2026-13-02T09:30:00Z",
    ],
)
def test_an_event_time_is_rfc_3339_with_its_zone(when: str) -> None:
    """EventBridge writes ``time`` in RFC 3339 (PutEvents: Time; the AWS Health EventBridge schema:
    yyyy-mm-ddThh:mm:ssZ). A date alone, a time without zone or an RFC 1123 date was read as some time
    and counted a Spot warning's two minutes from it. (Found by fuzzing.)"""
    doc = copy.deepcopy(sample("interrupt-spot-warning.json"))
    doc["time"] = when
    with pytest.raises(MalformedNotice) as err:
        parse_notice(body(doc))
    assert err.value.field == "time"


@pytest.mark.parametrize("when", ["2026-03-02T11:30:10Z", "9999-12-31T23:59:59Z"])
def test_a_notice_from_the_future_starts_no_drain_and_backs_off_nothing(
    monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """A Spot warning's ``time`` hours ahead of the function's clock made a forced drain with a deadline
    of hours (EC2 reclaims the instance two minutes after the warning) and backed its Spot pool off
    until then; one in year 9999 raised OverflowError computing the back-off. No notice comes from the
    future: it is malformed (field ``time``), reported failed towards the dead-letter queue, and
    nothing is started or written. (Found by fuzzing.)"""
    rig = Rig(world())
    doc = copy.deepcopy(sample("interrupt-spot-warning.json"))
    doc["time"] = when  # the clock: 09:30:10
    failed, counted = run_batch(rig, monkeypatch, body(doc), body(sample("interrupt-rebalance.json")))
    assert failed == {"m-0"} and counted == ["InterruptMalformed"]
    assert [r.name for r in rig.workflows.requests] == [f"rebalance-{INSTANCE}"]
    # the recommendation's own back-offs (its drain terminates: a group without Capacity Rebalancing)
    reasons = [reason for _, _, reason in rig.ledger.backoffs]
    assert reasons and all(r.startswith("rebalance recommendation") for r in reasons), (
        "a back-off was written for a notice from the future"
    )


@pytest.mark.parametrize(
    "start",
    [
        "2026-03-04",  # a date alone: read as midnight UTC, the drain's deadline hours early
        "2026-03-04T09:00:00",  # no zone: read as UTC
        "2026-03-04T09:00:00Z",  # EventBridge's `time` form: never a Health event's startTime
        "Wed, 04 Mar 2026 09:00:00",  # RFC 1123 without its zone: read as UTC
        "Wed, 04 Mar 2026 09:00:00 +0100",  # a numeric zone: AWS writes GMT
        "Wed, 04 Mar 2026 09:00:00 EST",
        "4 Mar 2026 09:00:00 GMT",  # no day name
        "Wed, 4 Mar 2026 09:00:00 GMT",  # one-digit day
        "Wed, 04 Mar 26 09:00:00 GMT",  # two-digit year
        "Wed, 04 Mar 2026 09:00 GMT",  # no seconds
        "wed, 04 mar 2026 09:00:00 gmt",
        "Wed, 04 Mar 2026 09:00:00 GMT\n",
        "Wed, \u0660\u0664 Mar 2026 09:00:00 GMT",  # Arabic-Indic digits
        "Wed, 31 Feb 2026 09:00:00 GMT",
        "Wed, 04 Mar 2026 24:00:00 GMT",
        "Wed, 04 Mar 0000 09:00:00 GMT",
        1772614800,  # the Health API's epoch seconds: never in an EventBridge event
        None,
        ["Wed, 04 Mar 2026 09:00:00 GMT"],
    ],
)
def test_a_health_start_time_is_the_gmt_form_aws_health_sends(start: Any) -> None:
    """AWS Health's EventBridge events write ``detail.startTime`` (and endTime, lastUpdatedTime) as an
    HTTP date in GMT, "Wed, 16 Aug 2023 23:18:51 GMT" (the AWS Health user guide's EventBridge schema
    samples; aws-node-termination-handler's scheduled-change example); the Health API itself returns
    epoch seconds. Any other form was read as some time: a date alone as midnight UTC, a zoneless
    time as UTC, so the drain before the change got a deadline hours off. Refused, naming the field,
    towards the dead-letter queue."""
    doc = copy.deepcopy(sample("interrupt-health-scheduled.json"))
    doc["detail"]["startTime"] = start
    with pytest.raises(MalformedNotice) as err:
        parse_notice(body(doc))
    assert err.value.field == "detail.startTime"


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        ("Wed, 04 Mar 2026 09:00:00 GMT", datetime(2026, 3, 4, 9, tzinfo=UTC)),
        ("Sat, 05 Jun 2021 19:00:00 GMT", datetime(2021, 6, 5, 19, tzinfo=UTC)),
        # the day name is not checked against the date: AWS's own samples carry mismatched ones
        # (aws-node-termination-handler's "Sat, 05 Jun 2016", a Sunday), as Go's time.Parse ignores it
        ("Sat, 05 Jun 2016 15:10:09 GMT", datetime(2016, 6, 5, 15, 10, 9, tzinfo=UTC)),
        ("Mon, 29 Feb 2028 23:59:59 GMT", datetime(2028, 2, 29, 23, 59, 59, tzinfo=UTC)),
    ],
)
def test_a_health_start_time_in_gmt_is_read_in_utc(start: str, expected: datetime) -> None:
    doc = copy.deepcopy(sample("interrupt-health-scheduled.json"))
    doc["detail"]["startTime"] = start
    notice = parse_notice(body(doc))
    assert notice.start == expected and notice.start.utcoffset() == timedelta(0)


def test_a_notice_a_little_ahead_of_the_clock_is_read() -> None:
    """Clocks differ by a few seconds: within MAX_CLOCK_SKEW_SECONDS a notice is read as usual."""
    doc = copy.deepcopy(sample("interrupt-spot-warning.json"))
    notice = parse_notice(body(doc), now=WARNED_AT - timedelta(seconds=30))
    assert notice.time == WARNED_AT


def test_a_closed_health_event_does_not_force_drain_a_node_that_survived_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """AWS Health user guide, "Reference: AWS Health events Amazon EventBridge schema" (detail.statusCode:
    upcoming, open or closed; an event's updates share its eventArn) and the Health API's
    EventStatusCode. A reboot is sent again as closed once done: its startTime is past, so the drain
    had deadline 0 and force, under a "-force" name no earlier drain had taken when no update came
    within the day, and force-drained a healthy rebooted node. Now it is dropped and counted, like
    other events Spillway does not act on. (Found by review.)"""
    doc = copy.deepcopy(sample("interrupt-health-scheduled.json"))
    doc["detail"].update(
        eventTypeCode="AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED",
        eventArn="arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED/x1",
        startTime="Sun, 01 Mar 2026 09:00:00 GMT",
        endTime="Sun, 01 Mar 2026 11:00:00 GMT",
        statusCode="closed",
    )
    rig = Rig(world())
    failed, counted = run_batch(rig, monkeypatch, body(doc))
    assert rig.workflows.requests == [], "a closed (finished) change started a drain"
    assert (failed, counted) == (set(), ["InterruptIgnored"])
    doc["detail"]["statusCode"] = "open"  # the same event while it runs still drains
    assert Rig(world()).handle(doc)[0]["outcome"] == "drain_started"


def test_notice_is_plain_data() -> None:
    notice = Notice(
        kind="rebalance", event_id="x", region="us-east-1", time=WARNED_AT, instance_ids=(INSTANCE,)
    )
    assert execution_name(notice, INSTANCE) == f"rebalance-{INSTANCE}"


# --- the template's wiring -------------------------------------------------------------------------


def test_only_the_instance_states_the_function_acts_on_reach_the_queue_here_and_from_other_regions() -> None:
    """EC2 sends an EC2 Instance State-change Notification for every transition of every instance of the
    region (pending, running, stopping, stopped, shutting-down, terminated: EC2 user guide, "EC2 instance
    state change events"); the rule took them all, so each launch of any instance invoked the function
    twice for nothing. The home rules and the forwarder's match the same events."""
    from spillway.act.interrupt import GONE_STATES
    from spillway.local.cfn import load_template

    def patterns(path: Path) -> list[dict[str, Any]]:
        res = load_template(path)["Resources"]
        return sorted(
            (
                v["Properties"]["EventPattern"]
                for v in res.values()
                if isinstance(v, dict) and v.get("Type") == "AWS::Events::Rule"
            ),
            key=lambda p: json.dumps(p, sort_keys=True),
        )

    home = patterns(ROOT / "template.yaml")
    assert home == patterns(ROOT / "deploy" / "spot-forwarder.yaml")
    states = [p for p in home if "EC2 Instance State-change Notification" in p["detail-type"]]
    assert [p["detail-type"] for p in states] == [["EC2 Instance State-change Notification"]]
    assert set(states[0]["detail"]["state"]) == GONE_STATES


@pytest.mark.parametrize("template", ["template.yaml", "deploy/spot-forwarder.yaml"])
def test_every_rule_takes_only_the_stacks_own_accounts_events(template: str) -> None:
    """A default bus whose resource policy admits other accounts (an organization's shared bus) puts
    their events on it too; the rules name the account, so another account's Spot warning or lifecycle
    action neither reaches the queue nor costs the function a snapshot lookup. Forwarded events keep the
    account they were raised in (EventBridge delivers the event itself to the target bus)."""
    from spillway.local.cfn import load_template

    res = load_template(ROOT / template)["Resources"]
    rules = {k: v for k, v in res.items() if isinstance(v, dict) and v.get("Type") == "AWS::Events::Rule"}
    assert len(rules) == 4
    for name, rule in rules.items():
        assert rule["Properties"]["EventPattern"]["account"] == [{"Ref": "AWS::AccountId"}], name


def role_policies(res: dict[str, Any], function: str) -> list[Any]:
    """The policies of the role the template writes for a function: the managed ones it attaches, then
    each inline policy's document (a SAM function's Policies, as it were)."""
    role = res[f"{function}Role"]["Properties"]
    return list(role.get("ManagedPolicyArns") or []) + [
        p["PolicyDocument"] for p in role.get("Policies") or []
    ]


def test_the_template_routes_every_notice_to_an_encrypted_queue_only_its_rules_may_write() -> None:
    from spillway.local.cfn import load_template

    res = load_template(ROOT / "template.yaml")["Resources"]
    rules = {k: v for k, v in res.items() if isinstance(v, dict) and v.get("Type") == "AWS::Events::Rule"}
    routed = set()
    for rule in rules.values():
        pattern = rule["Properties"]["EventPattern"]
        assert rule["Properties"]["Targets"] == [
            {"Id": "interrupt-queue", "Arn": {"Fn::GetAtt": ["InterruptQueue", "Arn"]}}
        ]
        assert "region" not in pattern  # forwarded events of the other regions match too
        routed |= {(source, dt) for source in pattern["source"] for dt in pattern["detail-type"]}
    from spillway.act.interrupt import KINDS

    assert routed == set(KINDS)
    queue = res["InterruptQueue"]["Properties"]
    assert queue["SqsManagedSseEnabled"] is True
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {
        "Fn::GetAtt": ["InterruptDeadLetterQueue", "Arn"]
    }
    # the rules may send; everyone else is refused (test_template_contract: an explicit Deny)
    statement, refusal = res["InterruptQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == refusal["Action"] == "sqs:SendMessage"
    assert {a["Fn::GetAtt"][0] for a in statement["Condition"]["ArnEquals"]["aws:SourceArn"]} == set(rules)
    assert {a["Fn::GetAtt"][0] for a in refusal["Condition"]["ArnNotEquals"]["aws:SourceArn"]} == set(rules)
    policies = role_policies(res, "InterruptFunction")
    mapping = res["InterruptFunctionNotices"]["Properties"]
    assert mapping["FunctionName"] == {"Ref": "InterruptFunction"}
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": ["InterruptQueue", "Arn"]}
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    statements = [s for p in policies if isinstance(p, dict) and "Statement" in p for s in p["Statement"]]
    assert {s["Sid"]: s["Action"] for s in statements} == {
        "ReadSnapshots": ["dynamodb:GetItem", "dynamodb:Query"],  # the latest snapshot: is the Node ours?
        "PutItemsOfBackoffAttributesOnly": "dynamodb:PutItem",
        # the mark that it reported a drain's start (first_start): a claim, read back when taken
        "ClaimStartMarksOnly": "dynamodb:PutItem",
        "ReadStartMarksOnly": "dynamodb:GetItem",
        "StartDrainNodeOnly": "states:StartExecution",
        "ReadLifecycleHooks": "autoscaling:DescribeLifecycleHooks",  # a hook's HeartbeatTimeout
        # a Node of no group the snapshot knows: is it in a group tagged for the cluster?
        "ReadInstanceGroups": [
            "autoscaling:DescribeAutoScalingInstances",
            "autoscaling:DescribeAutoScalingGroups",
        ],
        # what Lambda's poller does with its queue, on that queue alone
        "PollTheInterruptQueueOnly": ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"],
        "WriteItsLogGroupOnly": ["logs:CreateLogStream", "logs:PutLogEvents"],  # its own log group alone
    }
    marks = {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [{"Fn::Sub": "${ClusterName}#started"}]}}
    by_sid = {s["Sid"]: s for s in statements}
    assert by_sid["ReadStartMarksOnly"]["Condition"] == marks  # only its own partition of marks
    claim = by_sid["ClaimStartMarksOnly"]["Condition"]["ForAllValues:StringEquals"]
    assert claim == {
        **marks["ForAllValues:StringEquals"],
        "dynamodb:Attributes": ["cluster", "expires_at", "item", "value"],
    }
    assert "ClusterAccessPolicy" not in json.dumps(policies)  # no Kubernetes access
    alarm = res["InterruptDeadLetterAlarm"]["Properties"]
    assert alarm["Dimensions"][0]["Value"] == {"Fn::GetAtt": ["InterruptDeadLetterQueue", "QueueName"]}


def test_the_interrupt_and_drain_functions_share_the_hooks_spillway_owns() -> None:
    """One stack parameter names Spillway's terminate hooks for both functions that complete actions
    (the interrupt function on an emptied node, the drain after its evictions or its own terminate);
    its default is the hook the README tells users to create."""
    from spillway.local.cfn import load_template
    from spillway.model.drain import DEFAULT_LIFECYCLE_HOOKS

    template = load_template(ROOT / "template.yaml")
    parameter = template["Parameters"]["LifecycleHookNames"]
    assert parameter["Type"] == "CommaDelimitedList"
    assert tuple(parameter["Default"].split(",")) == DEFAULT_LIFECYCLE_HOOKS == ("drain-before-terminate",)
    for fn in ("InterruptFunction", "DrainFunction"):
        variables = template["Resources"][fn]["Properties"]["Environment"]["Variables"]
        assert variables["LIFECYCLE_HOOK_NAMES"] == {"Fn::Join": [",", {"Ref": "LifecycleHookNames"}]}, fn


@pytest.mark.parametrize(
    ("value", "hooks"),
    [
        (None, ("drain-before-terminate",)),
        (" k8s-drain, drain-before-terminate ", ("k8s-drain", "drain-before-terminate")),
    ],
)
def test_lifecycle_hook_names_are_a_comma_list_defaulting_to_the_documented_hook(
    value: str | None, hooks: tuple[str, ...]
) -> None:
    from spillway.runtime import load_runtime_config

    env = {"CLUSTER_NAME": "prod", "REGIONS": "us-east-1", "SNAPSHOTS_TABLE": "snap", "PLANS_TABLE": "plans",
           "STATE_TABLE": "state", **({"LIFECYCLE_HOOK_NAMES": value} if value is not None else {})}  # fmt: skip
    assert load_runtime_config(env).lifecycle_hook_names == hooks


@pytest.mark.parametrize("value", ["bad hook!", ",", "x" * 256])
def test_a_bad_lifecycle_hook_name_is_refused_naming_the_variable(value: str) -> None:
    from spillway.errors import ConfigurationError
    from spillway.runtime import load_runtime_config

    env = {"CLUSTER_NAME": "prod", "REGIONS": "us-east-1", "SNAPSHOTS_TABLE": "snap", "PLANS_TABLE": "plans",
           "STATE_TABLE": "state", "LIFECYCLE_HOOK_NAMES": value}  # fmt: skip
    with pytest.raises(ConfigurationError) as err:
        load_runtime_config(env)
    assert err.value.field == "LIFECYCLE_HOOK_NAMES"


def test_a_failed_notice_comes_back_inside_a_spot_warnings_drain_window() -> None:
    """Lambda guide, "Creating and configuring an Amazon SQS event source mapping" (a failed message,
    listed in batchItemFailures or not, is visible again only when the queue's visibility timeout runs
    out; Lambda refuses a mapping whose function timeout exceeds it); EC2 user guide, Spot interruption
    notices (the instance goes two minutes after the warning). At 180 s, a warning whose StartExecution
    or back-off was throttled once came back after its instance was gone. (Found by review.)"""
    from spillway.local.cfn import load_template

    res = load_template(ROOT / "template.yaml")["Resources"]
    queue = res["InterruptQueue"]["Properties"]
    visibility = int(queue["VisibilityTimeout"])
    receives = int(queue["RedrivePolicy"]["maxReceiveCount"])
    fn = res["InterruptFunction"]["Properties"]
    deadline = int(fn["Environment"]["Variables"]["INTERRUPTION_DEADLINE_SECONDS"])
    retried = max(deadline, JOIN_RETRY_SECONDS)  # a notice of a Node not observed yet is tried this long
    assert int(fn["Timeout"]) <= visibility, "Lambda refuses the event source mapping"
    # two more tries inside the drain's window, not one after the instance is gone
    assert 2 * visibility <= deadline, f"a failed Spot warning comes back after {visibility} s"
    # a notice tried again for a Node not yet observed (every try while its window runs, and the one
    # that drops it) never reaches the DLQ; a passing failure (Lambda's own throttling costs receives
    # too) has a few minutes; a poison message reaches the DLQ within ten
    assert receives >= max(5, retried // visibility + 2) and receives * visibility <= 600


class RecordingDynamoDB:
    def __init__(self) -> None:
        self.puts: list[dict[str, Any]] = []

    def put_item(self, **request: Any) -> dict[str, Any]:
        self.puts.append(request)
        return {}


@pytest.mark.parametrize("function", ["InterruptFunction", "ScaleFunction"])
def test_the_roles_that_put_back_offs_may_put_only_items_of_the_attributes_a_backoff_has(
    function: str,
) -> None:
    """Every item of the state table has the cluster's partition key, so dynamodb:LeadingKeys pinned to the
    cluster restricts nothing, and IAM has no condition key on a sort key's value (DynamoDB Developer
    Guide, "Using IAM policy conditions for fine-grained access control"): which items the role may write
    cannot be limited. What it writes can: dynamodb:Attributes, every top-level attribute of the request,
    limited to those of a back-off as the store writes it, keys and condition included. It cannot write a
    planner state, a claim or a raise marker; it can still replace any item with a back-off's attributes.
    So the store puts them in their own partition, ``<cluster>#backoffs``, the only one that statement
    grants, in the interrupt function's role and in the scale function's (a scale-up's, a gang's)."""
    from spillway.adapters.state_store import StateStore
    from spillway.local.cfn import load_template

    client = RecordingDynamoDB()
    for backed_off in ("pool#spot/us-east-1a/g5.xlarge", "spot-a"):  # a pool's item, and a group's
        StateStore(client, "state").put_backoff(  # type: ignore[arg-type]
            "ml",
            backed_off,
            WARNED_AT,
            "interrupted",
            region="us-east-1",
            now=WARNED_AT - timedelta(seconds=10),  # as the interrupt function puts it: with its clock
        )
    written = {
        name
        for request in client.puts
        for name in [*request["Item"], *request.get("ExpressionAttributeNames", {}).values()]
    }

    res = load_template(ROOT / "template.yaml")["Resources"]
    policies = role_policies(res, function)
    [statement] = [
        s
        for p in policies
        if isinstance(p, dict)
        for s in p.get("Statement", [])
        if s.get("Sid") == "PutItemsOfBackoffAttributesOnly"
    ]
    assert statement["Action"] == "dynamodb:PutItem"
    assert statement["Resource"] == {"Fn::GetAtt": ["StateTable", "Arn"]}
    assert statement["Condition"]["ForAllValues:StringEquals"]["dynamodb:Attributes"] == sorted(written)
    assert statement["Condition"]["ForAllValues:StringEquals"]["dynamodb:LeadingKeys"] == [
        {"Fn::Sub": "${ClusterName}#backoffs"}
    ]
    assert {request["Item"]["cluster"]["S"] for request in client.puts} == {"ml#backoffs"}


def test_the_interrupt_role_may_put_every_backoff_a_spot_warning_writes() -> None:
    """A Spot warning backs off its pool and the Spot groups that launch only its type in its zone
    (spot-a, spot-a2), through the state store as deployed. A group's back-off item names its group
    (attribute ``group``, since groups are keyed by region and name), which the role's
    dynamodb:Attributes list left out: on AWS every such PutItem was denied (for PutItem the condition
    holds the item's attribute names, AWS Knowledge Center "dynamodb-table-restrict-attributes"), the
    record failed before its drain was started, and after maxReceiveCount tries the warning sat in the
    dead-letter queue, its node never drained."""
    from spillway.adapters.state_store import StateStore
    from spillway.local.cfn import load_template

    client = RecordingDynamoDB()
    rig = Rig(world())
    interrupter = replace(rig.interrupter(), ledger=StateStore(client, "state"))  # type: ignore[arg-type]
    [out] = interrupter.handle(parse_notice(body(sample("interrupt-spot-warning.json"))))
    assert out["outcome"] == "drain_started"
    assert set(out["backed_off"]) == {"pool#spot/us-east-1a/g5.xlarge", "spot-a", "spot-a2"}

    res = load_template(ROOT / "template.yaml")["Resources"]
    [statement] = [
        s
        for p in role_policies(res, "InterruptFunction")
        if isinstance(p, dict)
        for s in p.get("Statement", [])
        if s.get("Sid") == "PutItemsOfBackoffAttributesOnly"
    ]
    allowed = set(statement["Condition"]["ForAllValues:StringEquals"]["dynamodb:Attributes"])
    assert len(client.puts) == 3
    for request in client.puts:
        written = set(request["Item"]) | set(request.get("ExpressionAttributeNames", {}).values())
        assert written <= allowed, f"{request['Item']['item']['S']}: IAM denies {sorted(written - allowed)}"


def test_a_mixed_group_in_the_zone_is_covered_by_the_type_zone_backoff_not_backed_off_whole() -> None:
    snapshot = world()
    mixed = replace(
        group("mixed-a", "g5.xlarge", ("us-east-1a",)), instance_types=("g5.xlarge", "g5.2xlarge")
    )
    snapshot = replace(snapshot, groups=(*snapshot.groups, mixed))
    rig = Rig(snapshot)
    rig.handle(sample("interrupt-spot-warning.json"))
    backed = sorted(g for g, _, _ in rig.ledger.backoffs)
    assert "mixed-a" not in backed and "pool#spot/us-east-1a/g5.xlarge" in backed


def test_only_the_drain_and_interrupt_functions_complete_lifecycle_actions_on_the_clusters_groups() -> None:
    """The drain function completes and heartbeats; the interrupt function only completes (an action
    on a node a Spillway drain emptied), on the same groups."""
    from spillway.local.cfn import load_template

    res = load_template(ROOT / "template.yaml")["Resources"]
    _, _, policies = res["Fn::ForEach::ClusterGroups"]
    complete = policies["InterruptLifecyclePolicy&{Cluster}"]["Properties"]
    assert complete["Roles"] == [{"Ref": "InterruptFunctionRole"}]
    [only] = complete["PolicyDocument"]["Statement"]
    assert only["Action"] == "autoscaling:CompleteLifecycleAction"
    policy = policies["AsgLifecyclePolicy&{Cluster}"]["Properties"]
    assert policy["Roles"] == [{"Ref": "DrainFunctionRole"}]
    assert (only["Resource"], only["Condition"]) == (
        policy["PolicyDocument"]["Statement"][0]["Resource"],
        policy["PolicyDocument"]["Statement"][0]["Condition"],
    )
    [statement] = policy["PolicyDocument"]["Statement"]
    assert sorted(statement["Action"]) == [
        "autoscaling:CompleteLifecycleAction",
        "autoscaling:RecordLifecycleActionHeartbeat",
    ]
    assert statement["Condition"] == {
        "Null": {
            "autoscaling:ResourceTag/k8s.io/cluster-autoscaler/enabled": "false",
            "autoscaling:ResourceTag/k8s.io/cluster-autoscaler/${Cluster}": "false",
        }
    }
    drain_reads = [
        a
        for p in role_policies(res, "DrainFunction")
        if isinstance(p, dict)
        for s in p.get("Statement", [])
        for a in s["Action"]
    ]
    assert "autoscaling:DescribeLifecycleHooks" in drain_reads  # the drain's own terminations read the hooks
    granted = json.dumps({k: v for k, v in res.items() if k != "Fn::ForEach::ClusterGroups"})
    assert "CompleteLifecycleAction" not in granted and "RecordLifecycleActionHeartbeat" not in granted


def test_a_warm_pool_instance_terminated_with_no_node_is_completed_at_once() -> None:
    """Scenario: a group with a warm pool and Spillway's terminate hook terminates one of its warm
    instances (the pool shrinks, an instance refresh replaces it, a warm instance fails its health
    check). It never joined the cluster, so no Node backs it: the action is Spillway's to complete
    at once (no_node), as for a Node-less in-service instance.

    AWS documentation: "Warm pool example events and patterns" (EC2 Auto Scaling User Guide): with
    lifecycle hooks, Auto Scaling sends an event "when an instance transitions into a wait state",
    and a lifecycle event's ``Origin`` may be ``WarmPool``; the API Reference's
    AutoScalingInstanceDetails.LifecycleState (what DescribeAutoScalingInstances returns) lists
    ``Warmed:Terminating:Wait`` beside ``Terminating:Wait``. Spillway read only ``Terminating:Wait``
    as a waiting action, so it said "no action waits" and left the warm instance held for the hook's
    whole HeartbeatTimeout."""
    rig = nodeless(LIFECYCLE_AT + timedelta(seconds=20))
    [out] = rig.handle(warm_pool_termination(rig))
    assert (out["outcome"], out.get("completed")) == ("no_node", True), out
    assert rig.cloud is not None and rig.cloud.completed == [("spot-gpu", HOOK, INSTANCE, "CONTINUE")]


def test_an_instance_its_warm_pool_takes_back_on_scale_in_with_no_node_is_completed_at_once() -> None:
    """A warm pool with ``ReuseOnScaleIn``: the group returns an instance it scales in to the pool and
    Spillway's terminate hook holds it in ``Warmed:Pending:Wait`` (EC2 Auto Scaling User Guide, "Use
    lifecycle hooks with a warm pool"). With no Node to drain the action is completed at once, as for
    any other; it was left to the hook's timeout ("no action waits"), holding the scale-in that long."""
    rig = nodeless(LIFECYCLE_AT + timedelta(seconds=20))
    assert rig.cloud is not None
    [instance] = rig.cloud.groups[("us-east-1", "spot-gpu")]["Instances"]
    instance["LifecycleState"] = "Warmed:Pending:Wait"
    event = copy.deepcopy(sample("interrupt-lifecycle-terminate.json"))
    event["detail"].update(Origin="AutoScalingGroup", Destination="WarmPool")

    [out] = rig.handle(event)

    assert (out["outcome"], out.get("completed")) == ("no_node", True), out
    assert rig.cloud.completed == [("spot-gpu", HOOK, INSTANCE, "CONTINUE")]


def load_app() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("interrupt_app_batch", ROOT / "functions/interrupt/app.py")
    assert spec and spec.loader
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    return app


def test_a_notice_waiting_for_observes_next_snapshot_is_retried_without_failing_the_invocation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A notice whose Node is not in the snapshot yet (a Spot warning or rebalance recommendation of an
    instance that joined since, a lifecycle action of a Node-less instance judged on a snapshot older
    than it) is tried again every visibility timeout (40 s) for up to JOIN_RETRY_SECONDS (240 s): a
    wait, by design, not a fault. A lone such record failed the whole batch, so the batch utility
    raised (BatchProcessingError) and Lambda counted an Error on every try: four to six of them over
    up to 240 s cross a five-minute boundary most of the time, and interrupt-errors (two of three
    periods) paged for a routine rebalance of a just-launched node. Now the record is reported in
    batchItemFailures (SQS brings it back) and the invocation succeeds; a batch whose every record
    failed for another reason (here, malformed) still raises, as before."""
    from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

    app = load_app()
    said: list[str] = []
    monkeypatch.setattr(app.logger, "info", lambda message, **kw: said.append(message))
    rig, doc = joining(WARNED_AT + timedelta(seconds=10))
    response = app.process_batch(rig.interrupter(), sqs_event(body(doc)))
    assert response == {"batchItemFailures": [{"itemIdentifier": "m-0"}]}
    assert rig.workflows.requests == []
    assert any("waits for a later snapshot" in m for m in said)  # no error's traceback: the log says so

    rig, doc = joining(WARNED_AT + timedelta(seconds=10))
    with pytest.raises(BatchProcessingError):  # a real failure among them: the invocation fails
        app.process_batch(rig.interrupter(), sqs_event(body(doc), "{broken"))


def test_an_ebs_backed_instance_retirement_names_ec2s_instance_retirement_event() -> None:
    """AWS Health announces the retirement of an instance whose root device is an EBS volume (every EKS
    node's) as AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED (AWS Health user guide, "Running
    operations on EC2 instances automatically in response to events in AWS Health"), and EC2 lists it
    as an ``instance-retirement`` event. Its forced drain must name that code: without one it followed
    whichever of the instance's live events starts first, so a system reboot EC2 scheduled before the
    retirement cut the drain's deadline to the reboot's start."""
    doc = sample("interrupt-health-scheduled.json")
    doc["detail"]["eventTypeCode"] = "AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED"
    doc["detail"]["eventArn"] = (
        "arn:aws:health:us-east-1::event/EC2/AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED/abc"
    )
    rig = Rig(world(), now=datetime(2026, 2, 18, 9, 0, tzinfo=UTC))
    rig.handle(doc)
    forced = rig.workflows.requests[1].input

    assert (forced["scheduled_start"], forced["event_code"]) == (
        "2026-03-04T09:00:00Z",
        "instance-retirement",
    )
