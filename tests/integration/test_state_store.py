"""State, plans and executions on moto, with the tables built from template.yaml's own definitions."""

from __future__ import annotations

import json
import logging
import random
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from spillway.act.backoff import back_off
from spillway.adapters.plans_store import PlanStore
from spillway.adapters.sfn import Executions
from spillway.adapters.state_store import PLAIN_STATE_LIMIT, StateStore, first_start
from spillway.config import PlannerConfig
from spillway.errors import InputError, StateConflict, StateTooLarge
from spillway.local.cfn import create_tables
from spillway.model.act import ExecutionRequest, PlanRecord, iso, replan_key
from spillway.model.cluster import ClusterSnapshot
from spillway.model.nodegroup import NodeGroup
from spillway.model.state import EventMark, GroupState, NodeState, Since, State, keyed_by_region
from spillway.planner import plan
from spillway.planner.context import first_regions

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"
NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
KEY = "2026-11-02T12:00:00.000000Z"


@pytest.fixture
def ddb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_tables(TEMPLATE, client, {"StateTable": "state", "PlansTable": "plans"})
        yield client


@pytest.fixture
def plans(ddb: Any) -> PlanStore:
    return PlanStore(ddb, "plans")


@pytest.fixture
def store(ddb: Any, plans: PlanStore) -> StateStore:
    return StateStore(ddb, "state", plans=plans)


def record(key: str = KEY, **kw: Any) -> PlanRecord:
    base: dict[str, Any] = {
        "cluster": "ml",
        "plan_id": "p1",
        "snapshot_key": key,
        "fingerprint": "f" * 64,
        "created_at": NOW,
        "plan": {"scale_up": [{"group": "gpu", "reason": "3 pending pods"}], "drain": [], "pending": []},
        "executions": ("up-p1",),
        "summary": {"scale_up_nodes": 3},
    }
    base.update(kw)
    return PlanRecord(**base)


def commit(store: StateStore, version: int, state: State | None = None, key: str = KEY, **kw: Any) -> int:
    return store.commit(
        "ml",
        state or State(),
        expected_version=version,
        snapshot_key=key,
        plan_id="p1",
        executions=[{"kind": "scale_up", "name": "up-p1"}],
        now=NOW,
        **kw,
    )


def test_an_empty_cluster_loads_as_version_zero(store: StateStore) -> None:
    loaded = store.load("ml")
    assert (loaded.version, loaded.snapshot_key, loaded.state) == (0, None, State())


def test_the_load_names_each_query_before_it_is_sent_and_sends_none_it_refused(
    store: StateStore, ddb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step counts the load's calls as they are (next_round: each only with time for the commit)."""
    sent: list[str] = []
    query = ddb.query
    monkeypatch.setattr(
        ddb, "query", lambda **kw: sent.append(kw["ExpressionAttributeValues"][":c"]["S"]) or query(**kw)
    )
    named: list[str] = []

    store.load("ml", NOW, before_call=named.append)

    assert named == ["Query state of ml", "Query state of ml#drains", "Query state of ml#backoffs"] and sent == [
        "ml", "ml#drains", "ml#backoffs"]  # fmt: skip

    def refuse_backoffs(what: str) -> None:
        if what.endswith("#backoffs"):
            raise StateConflict(what)

    sent.clear()
    with pytest.raises(StateConflict):
        store.load("ml", NOW, before_call=refuse_backoffs)
    assert sent == ["ml", "ml#drains"]


def test_commit_writes_the_state_and_the_plan_together_and_versions_them(
    store: StateStore, plans: PlanStore
) -> None:
    state = State(nodes={"n1": NodeState(idle_since=NOW - timedelta(minutes=3))})
    assert commit(store, 0, state, plan=record()) == 1

    loaded = store.load("ml")
    assert loaded.version == 1 and loaded.state == state
    assert loaded.snapshot_key == KEY and loaded.plan_id == "p1"
    assert loaded.executions == ({"kind": "scale_up", "name": "up-p1"},)
    got = plans.get("ml", KEY)
    assert got is not None and got.plan == record().plan and got.executions == ("up-p1",)
    assert got.summary == {"scale_up_nodes": 3} and got.acts
    assert commit(store, 1, key="2026-11-02T12:00:20.000000Z") == 2


def test_a_stale_version_conflicts_and_writes_neither_state_nor_plan(
    store: StateStore, plans: PlanStore
) -> None:
    commit(store, 0, plan=record())
    later = "2026-11-02T12:00:20.000000Z"

    with pytest.raises(StateConflict, match="another planner committed first"):
        commit(store, 0, key=later, plan=record(later))  # loaded version 0, but 1 is stored
    with pytest.raises(StateConflict):
        commit(store, 0, key=later)  # the first write of a cluster is conditional too

    assert store.load("ml").snapshot_key == KEY
    assert plans.get("ml", later) is None


def test_plan_items_expire_after_thirty_days_and_big_plans_are_compressed(ddb: Any, plans: PlanStore) -> None:
    pending = [
        {"pod": f"team/job-{i}", "reason": "every node group that fits is exhausted " * 3}
        for i in range(4000)
    ]
    plans.save(record(plan={"scale_up": [], "pending": pending}))
    item = ddb.get_item(TableName="plans", Key={"cluster": {"S": "ml"}, "planned_at": {"S": KEY}})["Item"]
    assert int(item["expires_at"]["N"]) == int((NOW + timedelta(days=30)).timestamp())
    assert "plan_z" in item and "plan" not in item
    got = plans.get("ml", KEY)
    assert got is not None and got.plan["pending"] == pending and not got.acts


def test_replans_sort_after_their_plan(plans: PlanStore) -> None:
    plans.save(record())
    plans.save(record(kind="replan", sort_key=replan_key(KEY, 2), snapshot_key="2026-11-02T12:01:00.000000Z"))
    newest_first = plans.list("ml")
    assert [(p.kind, p.key) for p in newest_first] == [("replan", f"{KEY}#replan-2"), ("plan", KEY)]


def test_a_replans_record_committed_with_the_state_is_read_back_with_its_rounds_groups(
    store: StateStore,
) -> None:
    """The overflow re-plan's retry looks up the record its own transaction wrote (the state's commit
    and the plan item in one TransactWriteItems) and maps over the groups in it, even when the plan's
    own detail is too big to keep (the groups are an attribute of their own, never slimmed)."""
    key = replan_key(KEY, 2)
    groups = ({"group": "gpu-west", "region": "us-west-2", "from": 0, "to": 3, "grow": True, "uncordon": []},)
    pending = [{"pod": f"team/job-{i}", "reason": f"{i:08x} " * 40} for i in range(60000)]
    replan = record(kind="replan", sort_key=key, plan={"pending": pending}, groups=groups)
    assert store.load_plan("ml", key) is None  # not committed yet

    commit(store, 0, plan=replan)

    got = store.load_plan("ml", key)
    assert got is not None and got.groups == groups and got.plan_id == "p1"
    later = "2026-11-02T12:00:20.000000Z"
    commit(store, 1, plan=record(later), key=later)
    tick = store.load_plan("ml", later)
    assert tick is not None and tick.groups is None  # a tick's plan carries none


def test_backoffs_merge_into_the_state_and_only_ever_extend(store: StateStore, ddb: Any) -> None:
    key = "us-east-1/gpu"
    old = GroupState(backoff_until=NOW + timedelta(minutes=5), reason="old", group="gpu", region="us-east-1")
    commit(store, 0, State(groups={key: old}))
    until = NOW + timedelta(minutes=15)

    assert store.put_backoff("ml", "gpu", until, "InsufficientInstanceCapacity", region="us-east-1")
    assert not store.put_backoff("ml", "gpu", NOW + timedelta(minutes=1), "shorter", region="us-east-1")
    assert store.put_backoff("ml", "cpu", NOW + timedelta(minutes=2), "timeout", region="us-east-1")

    loaded = store.load("ml")
    assert loaded.version == 1  # back-offs never touch the planner's version
    assert loaded.state.groups[key] == GroupState(
        backoff_until=until, reason="InsufficientInstanceCapacity", group="gpu", region="us-east-1"
    )
    assert loaded.state.groups["us-east-1/cpu"].reason == "timeout"
    item = ddb.get_item(
        TableName="state", Key={"cluster": {"S": "ml#backoffs"}, "item": {"S": f"backoff#{key}"}}
    )["Item"]
    assert int(item["expires_at"]["N"]) == int(until.timestamp())  # TTL: gone when the window ends
    assert (item["group"]["S"], item["region"]["S"]) == ("gpu", "us-east-1")
    assert [(b.region, b.group) for b in store.backoffs("ml")] == [("us-east-1", "cpu"), ("us-east-1", "gpu")]


def test_a_group_of_one_name_backs_off_in_its_own_region_only(store: StateStore) -> None:
    """An Auto Scaling group's name is unique only in its region: a back-off of ``gpu`` in us-east-1 is
    one item, ``gpu`` in us-west-2 another; the item was ``backoff#gpu`` for both, so the shorter second
    back-off was refused by the first's condition and the merged state held one entry for both."""
    east, west = NOW + timedelta(minutes=15), NOW + timedelta(minutes=5)
    assert store.put_backoff("ml", "gpu", east, "ICE east", region="us-east-1")
    assert store.put_backoff("ml", "gpu", west, "ICE west", region="us-west-2")

    groups = store.load("ml").state.groups
    assert {k: (v.group, v.region, v.backoff_until) for k, v in groups.items()} == {
        "us-east-1/gpu": ("gpu", "us-east-1", east),
        "us-west-2/gpu": ("gpu", "us-west-2", west),
    }


def test_a_back_off_item_keyed_by_name_is_read_as_the_group_of_the_region_it_names(
    store: StateStore, ddb: Any
) -> None:
    """Builds before groups were keyed by region wrote ``backoff#gpu`` with the group's own region in
    ``region`` (scale-up's back-off, the gang's give-back and a Spot interruption's: the last backs off
    any managed group, the us-east-1 twin the old plan refused too). That region says whose it is: the
    us-east-1 group's, not the first region's, which would be held back for its twin's failure while
    the twin, now planned, launched again into it."""
    ddb.put_item(TableName="state", Item={"cluster": {"S": "ml"}, "item": {"S": "backoff#gpu"},
                                          "backoff_until": {"S": "2026-11-02T12:15:00Z"}, "reason": {"S": "ICE"},
                                          "region": {"S": "us-east-1"}, "expires_at": {"N": "1793621700"}})  # fmt: skip
    groups = [NodeGroup("gpu", region, 0, 4, 0, "g5.xlarge", None) for region in ("us-east-1", "us-west-2")]
    config = PlannerConfig(cluster="ml", regions=("us-west-2", "us-east-1"))

    state = keyed_by_region(store.load("ml", NOW).state, first_regions(config, groups))

    assert {k: (v.group, v.region, v.reason) for k, v in state.groups.items()} == {
        "us-east-1/gpu": ("gpu", "us-east-1", "ICE")
    }


@pytest.mark.parametrize("until", [None, {"S": "next tuesday"}, {"N": "1793621700"}])
def test_a_back_off_item_whose_time_cannot_be_read_is_skipped_naming_it_and_the_others_hold(
    store: StateStore, ddb: Any, caplog: pytest.LogCaptureFixture, until: dict[str, str] | None
) -> None:
    """A back-off is advice (merge_backoffs skips one whose pool key nobody can read): an item whose
    ``backoff_until`` is missing or no ISO time (written by hand, damaged) is left out with a warning
    naming the item and the field, and the state and the other back-offs load. It raised KeyError or
    ValueError from StateStore.load, so every plan and every re-plan failed, naming no field, until
    the item's TTL removed it (never, without an ``expires_at``); the item itself is left as it is."""
    commit(store, 0, State(nodes={"n1": NodeState(idle_since=NOW)}))
    assert store.put_backoff("ml", "cpu", NOW + timedelta(minutes=5), "ICE", region="us-east-1")
    bad: dict[str, Any] = {"cluster": {"S": "ml"}, "item": {"S": "backoff#us-east-1/gpu"}, "reason": {"S": "x"},
                           "group": {"S": "gpu"}, "region": {"S": "us-east-1"}}  # fmt: skip
    if until is not None:
        bad["backoff_until"] = until
    ddb.put_item(TableName="state", Item=bad)

    with caplog.at_level(logging.WARNING, logger="spillway.adapters.state_store"):
        loaded = store.load("ml", NOW)

    assert loaded.version == 1 and set(loaded.state.nodes) == {"n1"}
    assert set(loaded.state.groups) == {"us-east-1/cpu"}
    assert "backoff#us-east-1/gpu" in caplog.text and "backoff_until" in caplog.text
    key = {"cluster": {"S": "ml"}, "item": {"S": "backoff#us-east-1/gpu"}}
    assert ddb.get_item(TableName="state", Key=key)["Item"] == bad


@pytest.mark.parametrize(
    ("key", "fields", "named"),
    [
        ("backoff#us-east-1/", {"group": {"S": ""}, "region": {"S": "us-east-1"}}, "group"),
        ("backoff#", {}, "group"),
        ("backoff#gpu", {"group": {"S": "gpu"}, "region": {"S": "not a region!"}}, "region"),
        ("backoff#gpu", {"region": {"S": "US-EAST-1"}}, "region"),
    ],
)
def test_a_back_off_item_naming_no_group_or_no_region_is_skipped_naming_it(
    store: StateStore,
    ddb: Any,
    caplog: pytest.LogCaptureFixture,
    key: str,
    fields: dict[str, Any],
    named: str,
) -> None:
    """A back-off item with an empty ``group`` (or key) or a ``region`` that is no AWS region loaded as
    group keys "" or "not a region!/gpu", backing off a group nobody has, silently. It is now skipped with
    a warning naming the item and the field, as one whose time cannot be read; the rest load."""
    commit(store, 0, State(nodes={"n1": NodeState(idle_since=NOW)}))
    assert store.put_backoff("ml", "cpu", NOW + timedelta(minutes=5), "ICE", region="us-east-1")
    bad: dict[str, Any] = {"cluster": {"S": "ml"}, "item": {"S": key}, "reason": {"S": "x"},
                           "backoff_until": {"S": iso(NOW + timedelta(minutes=5))}, **fields}  # fmt: skip
    ddb.put_item(TableName="state", Item=bad)

    with caplog.at_level(logging.WARNING, logger="spillway.adapters.state_store"):
        loaded = store.load("ml", NOW)

    assert set(loaded.state.groups) == {"us-east-1/cpu"} and set(loaded.state.pools) == set()
    assert f"back-off item {key}:" in caplog.text and named in caplog.text


def test_a_large_state_is_stored_compressed(store: StateStore, ddb: Any) -> None:
    nodes = {f"ip-10-0-{i // 250}-{i % 250}.ec2.internal": NodeState(idle_since=NOW) for i in range(8000)}
    commit(store, 0, State(nodes=nodes))
    item = ddb.get_item(TableName="state", Key={"cluster": {"S": "ml"}, "item": {"S": "state"}})["Item"]
    assert "state_z" in item and "state" not in item
    assert store.load("ml").state.nodes == nodes


def test_a_large_state_and_a_large_scale_down_commit_together(store: StateStore, ddb: Any) -> None:
    """The state was compressed only past 256 KB of its own, while the same item carries the plan's
    executions (a scale-down names every pod it moves) uncompressed: together over DynamoDB's 400 KB,
    the commit failed every tick and nothing was planned at all. Both are compressed once their sum is
    large, and read back as they were. (Found by review.)"""
    events = {f"team-{i // 100:03d}/job-{i:05d}-worker-abcdefgh": EventMark(fingerprint="0123456789abcdef",
              posted_at=NOW) for i in range(2000)}  # fmt: skip
    nodes = {f"ip-10-{i // 250}-{i % 250}-17.ec2.internal": NodeState(idle_since=NOW) for i in range(400)}
    state = State(nodes=nodes, events=events)
    assert len(json.dumps(state.to_wire(), separators=(",", ":"))) <= PLAIN_STATE_LIMIT  # plain on its own
    drains = [{"node": f"ip-10-9-{i}-17.ec2.internal", "reason": "consolidation: " + "x" * 200,
               "pods": [f"team-{i:03d}/worker-{j:03d}-abcdefgh" for j in range(25)]} for i in range(120)]  # fmt: skip
    down = {
        "kind": "scale_down",
        "name": "down-p1",
        "input": {"cluster": "ml", "plan_id": "p1", "drains": drains},
    }

    store.commit("ml", state, expected_version=0, snapshot_key=KEY, plan_id="p1", executions=[down], now=NOW,
                 plan=record())  # fmt: skip

    loaded = store.load("ml")
    assert loaded.version == 1 and loaded.state == state and loaded.executions == (down,)
    item = ddb.get_item(TableName="state", Key={"cluster": {"S": "ml"}, "item": {"S": "state"}})["Item"]
    assert "executions_z" in item and "state_z" in item


def _succeeding_machine(sfn: Any, name: str) -> str:
    """A state machine that succeeds at once, in moto: its ARN."""
    definition = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}})
    machine = sfn.create_state_machine(
        name=name, definition=definition, roleArn="arn:aws:iam::123456789012:role/x"
    )
    return str(machine["stateMachineArn"])


def test_starting_an_execution_twice_under_one_name_is_not_an_error() -> None:
    with mock_aws():
        sfn = boto3.client("stepfunctions", region_name="us-east-1")
        arn = _succeeding_machine(sfn, "up")
        executions = Executions(sfn)
        request = ExecutionRequest("scale_up", arn, "up-20261102T120000000000Z-1a2b3c4d", {"cluster": "ml"})

        first = executions.start(request)
        second = executions.start(ExecutionRequest("scale_up", arn, request.name, {"cluster": "other"}))

        assert first.started and not second.started and first.arn == second.arn
        assert len(sfn.list_executions(stateMachineArn=arn)["executions"]) == 1
        with pytest.raises(InputError, match="execution name"):
            executions.start(ExecutionRequest("scale_up", arn, "up/with:bad chars", {}))


def test_a_second_start_with_the_same_name_and_input_is_a_duplicate_though_aws_answers_success() -> None:
    """Step Functions answers a StartExecution of a running execution's name and identical input with
    success and that execution's ARN and startDate (StartExecution is idempotent for STANDARD
    workflows; moto answers the same way). It was reported started=True, so the interrupt function
    counted a duplicate notice's drain in InterruptDrainsStarted, not InterruptDuplicates. Its startDate
    before the call tells it apart now; a first start within CLOCK_SKEW of the call is still started."""
    with mock_aws():
        sfn = boto3.client("stepfunctions", region_name="us-east-1")
        arn = _succeeding_machine(sfn, "drain")
        request = ExecutionRequest("drain", arn, "drain-spot-i-0abc-1", {"node": "ip-10-0-0-1"})
        first = Executions(sfn).start(request)
        answered = sfn.start_execution(stateMachineArn=arn, name=request.name, input='{"node":"ip-10-0-0-1"}')
        assert answered["executionArn"] == first.arn  # AWS's idempotent success, as moto gives it

        later = datetime.now(UTC) + timedelta(minutes=1)
        again = Executions(sfn, clock=lambda: later).start(request)

        assert first.started and not again.started and again.arn == first.arn
        assert len(sfn.list_executions(stateMachineArn=arn)["executions"]) == 1


def test_a_duplicate_start_within_clock_skew_of_the_first_is_a_duplicate(store: StateStore, ddb: Any) -> None:
    """A second start of a running execution (same name, same input: a notice delivered twice, a plan
    invocation retried) within CLOCK_SKEW of the first got Step Functions' idempotent success with the
    first's startDate, which is no earlier than the call by more than the skew: it was reported
    started, and the interrupt function counted InterruptDrainsStarted twice and answered drain_started
    twice. The first caller to report the start now writes a mark named by the execution's ARN (the
    state table's partition <cluster>#started); a caller that finds another's mark reports a duplicate."""
    with mock_aws():
        sfn = boto3.client("stepfunctions", region_name="us-east-1")
        arn = _succeeding_machine(sfn, "drain")
        request = ExecutionRequest("drain", arn, "drain-spot-i-0abc-1", {"node": "ip-10-0-0-1"})

        first = Executions(sfn, first=first_start(store, "ml")).start(request)
        again = Executions(sfn, first=first_start(store, "ml")).start(request)  # another invocation

        assert first.started and not again.started and again.arn == first.arn
        assert len(sfn.list_executions(stateMachineArn=arn)["executions"]) == 1
        assert set(store.claims("ml#started", "")) == {first.arn}
        assert store.load("ml").version == 0  # apart from the cluster's own items


def test_a_claim_is_written_once_and_a_second_claim_gets_the_first(store: StateStore, ddb: Any) -> None:
    expires = NOW + timedelta(days=2)
    first = store.claim("ml", "raise#up-p1", {"before": 1, "after": 3, "count": 2}, expires=expires)
    again = store.claim("ml", "raise#up-p1", {"before": 3, "after": 5, "count": 2}, expires=expires)
    other = store.claim("ml", "owner#us-east-1#i-1", {"owner": "up-p1"}, expires=expires)

    assert first == ({"before": 1, "after": 3, "count": 2}, True)
    assert again == ({"before": 1, "after": 3, "count": 2}, False)  # the retry raises nothing more
    assert other[1] and store.claims("ml", "owner#") == {"owner#us-east-1#i-1": {"owner": "up-p1"}}
    item = ddb.get_item(TableName="state", Key={"cluster": {"S": "ml"}, "item": {"S": "raise#up-p1"}})["Item"]
    assert int(item["expires_at"]["N"]) == int(expires.timestamp())  # the table's TTL removes it
    assert store.load("ml").version == 0  # claims are not the planner's state

    store.release("ml", "raise#up-p1")
    assert store.claim("ml", "raise#up-p1", {"count": 4}, expires=expires) == ({"count": 4}, True)


def test_a_claim_unless_its_rival_is_written_only_while_neither_is_there(store: StateStore) -> None:
    """A raise's verdict (act/claims.py _settle): set# or unsettled#, whichever is written first, alone.
    One TransactWriteItems (a conditional Put and a ConditionCheck of the rival, DynamoDB API Reference),
    so a plan and a step settling one marker at once leave one verdict; the loser is told the winner."""
    expires = NOW + timedelta(days=2)
    first = store.claim_unless("ml", "set#up-p1", {"group": "g"}, rival="unsettled#up-p1", expires=expires)
    lost = store.claim_unless("ml", "unsettled#up-p1", {"group": "g"}, rival="set#up-p1", expires=expires)
    again = store.claim_unless("ml", "set#up-p1", {"group": "h"}, rival="unsettled#up-p1", expires=expires)

    assert (first, lost, again) == ("set#up-p1", "set#up-p1", "set#up-p1")
    assert store.claims("ml", "unsettled#") == {}
    assert store.claims("ml", "set#") == {"set#up-p1": {"group": "g"}}  # never overwritten
    other = store.claim_unless("ml", "unsettled#up-p2", {}, rival="set#up-p2", expires=expires)
    assert other == "unsettled#up-p2" and "unsettled#up-p2" in store.claims("ml", "unsettled#")


def test_a_lease_claim_overwrites_one_past_its_expiry_and_no_other(store: StateStore) -> None:
    """A gang sweep's claim (spillway.act.gangsweep) is a lease: DynamoDB's TTL deletes an expired item
    only some time later, so a claim past its expiry counts as none for a claim made with ``now``. A
    claim without ``now`` (a raise marker) never overwrites one, expired or not."""
    item = "gangsweep#us-east-1#i-1"
    first = store.claim("ml", item, {"plan": "p1"}, expires=NOW + timedelta(minutes=15), now=NOW)
    held = store.claim(
        "ml", item, {"plan": "p2"}, expires=NOW + timedelta(minutes=16), now=NOW + timedelta(minutes=1)
    )
    marker = store.claim("ml", item, {"plan": "p3"}, expires=NOW + timedelta(days=2))
    lapsed = store.claim(
        "ml", item, {"plan": "p4"}, expires=NOW + timedelta(minutes=30), now=NOW + timedelta(minutes=15)
    )

    assert first == ({"plan": "p1"}, True)
    assert held == ({"plan": "p1"}, False) and marker == ({"plan": "p1"}, False)
    assert lapsed == ({"plan": "p4"}, True)
    assert store.claims("ml", "gangsweep#") == {item: {"plan": "p4"}}


def test_a_holders_release_deletes_only_its_own_claim(store: StateStore) -> None:
    """A lease's holder lets go of the claim only while it still holds it: one taken over after it
    lapsed is the new holder's (spillway.act.gangsweep)."""
    item = "gangsweep#us-east-1#i-1"
    mine = {"plan": "p1", "sweep": "a"}
    store.claim("ml", item, mine, expires=NOW + timedelta(minutes=15), now=NOW)
    theirs = {"plan": "p2", "sweep": "b"}
    later = NOW + timedelta(minutes=15)
    assert store.claim("ml", item, theirs, expires=later + timedelta(minutes=15), now=later)[1]

    assert store.release("ml", item, held_as=mine) is False
    assert store.claims("ml", "gangsweep#") == {item: theirs}
    assert store.release("ml", item, held_as=theirs) is True
    assert store.claims("ml", "gangsweep#") == {}
    assert store.release("ml", item, held_as=theirs) is False  # gone already (a resent delete)


def test_a_state_over_dynamodbs_item_limit_even_compressed_is_refused_naming_its_size_and_parts(
    store: StateStore, ddb: Any
) -> None:
    """Compressed, the item still passed 400 KB: PutItem's ValidationException came back as a bare
    AwsError, naming neither the size nor what made the state big, and every plan failed on it. The store
    measures the item as DynamoDB does and refuses it first, naming both; nothing is written, and the
    stored state is left as it was. (Review r15.)"""
    rng = random.Random(15)
    nodes = {
        f"{rng.getrandbits(256):064x}": NodeState(idle_since=NOW) for _ in range(14_000)
    }  # incompressible
    events = {f"team/{i}": EventMark(fingerprint="0123456789abcdef", posted_at=NOW) for i in range(50)}
    calls: list[str] = []
    ddb.meta.events.register("before-call.dynamodb.*", lambda model, **_: calls.append(model.name))
    commit(store, 0)
    calls.clear()

    with pytest.raises(StateTooLarge) as refused:
        commit(store, 1, State(nodes=nodes, events=events), plan=record())

    message = str(refused.value)
    assert "state of ml" in message and "400 KB" in message
    size = int(re.search(r"is ([\d,]+) bytes", message).group(1).replace(",", ""))  # type: ignore[union-attr]
    assert size > 400 * 1024
    assert message.index("state.nodes (14000 entries") < message.index("state.events (50 entries")
    assert calls == [], "refused before any call to DynamoDB"
    assert store.load("ml").version == 1 and store.load("ml").state == State()


def test_a_large_state_that_fits_once_compressed_is_still_written(store: StateStore) -> None:
    """The limit is DynamoDB's, on the item as stored: 1.2 MB of state JSON that compresses well fits."""
    nodes = {f"ip-10-{i // 250}-{i % 250}-17.ec2.internal": NodeState(idle_since=NOW) for i in range(20_000)}
    assert len(json.dumps(State(nodes=nodes).to_wire())) > 1_000_000

    commit(store, 0, State(nodes=nodes))

    assert store.load("ml").state.nodes == nodes


def test_a_state_a_newer_build_wrote_loads_is_planned_on_and_is_rewritten_without_what_it_did_not_know(
    store: StateStore, ddb: Any, build_snapshot: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A deploy rolled back to this build: the state item a newer build committed has fields this one
    does not know, nested in its entries. The planner loads it, plans, and commits; the commit drops
    what it did not know (each is safe to lose: the adapter's docstring) and keeps what it knew."""
    snapshot = build_snapshot(4, 8, pending=2, taken_at=NOW)
    node = snapshot.cluster.nodes[0].name
    pool = "spot/us-east-1a/p3.16xlarge"
    until = "2026-11-02T12:30:00Z"
    wire = {
        "nodes": {node: {"idle_since": "2026-11-02T11:50:00Z", "idle_reason": "empty"}},
        "groups": {},
        "pools": {
            pool: {"backoff_until": until, "reason": "gang refused", "nodes": 8, "fleet_id": "fleet-1"}
        },
        "leases": {"observe": {"holder": "newer"}},
    }
    ddb.put_item(
        TableName="state",
        Item={
            "cluster": {"S": "ml"},
            "item": {"S": "state"},
            "version": {"N": "41"},
            "state": {"S": json.dumps(wire)},
            "executions": {"S": "[]"},
        },
    )
    with caplog.at_level(logging.WARNING):
        loaded = store.load("ml", NOW)
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    for path in (f"nodes.{node}.idle_reason", f"pools.{pool}.fleet_id", "leases"):
        assert path in warning
    assert loaded.version == 41 and loaded.state.pools[pool].nodes == 8

    result = plan(snapshot.cluster, list(snapshot.groups), PlannerConfig(), loaded.state, NOW)
    assert result.state.pools[pool].nodes == 8  # a live back-off the plan kept
    assert commit(store, 41, result.state) == 42

    caplog.clear()
    with caplog.at_level(logging.WARNING):
        again = store.load("ml", NOW)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []  # rewritten without them
    assert again.version == 42 and again.state.pools[pool] == loaded.state.pools[pool]
    stored = json.loads(
        ddb.get_item(TableName="state", Key={"cluster": {"S": "ml"}, "item": {"S": "state"}})["Item"][
            "state"
        ]["S"]
    )
    assert "leases" not in stored and "fleet_id" not in json.dumps(stored)


# --- the plan record committed with the state stays within DynamoDB's 400 KB item limit -------------


def test_a_plan_of_a_large_burst_is_committed_with_its_record_cut_to_fit(ddb: Any) -> None:
    """A burst of 120,000 pending pods (Job pods ``ns/job-0001-x7k2q``) placed on new nodes of three
    groups: the plan's ``scale_up`` entries name every pod. PlanStore compresses the plan and, past 300 KB,
    drops ``pending`` and ``kept`` ("past this the per-pod and per-node detail is dropped"), but never
    checks that what is left fits: the ``scale_up`` pod lists alone compress to over 400 KB here. DynamoDB
    refuses an item over 400 KB ("The maximum item size in DynamoDB is 400 KB", Developer Guide, "Quotas:
    Items"; in a TransactWriteItems the whole transaction is cancelled), so the state commit, which
    carries the record, fails on every plan while the burst is pending: the one moment scaling matters.
    The record is an audit copy; it must be cut further, never stop the commit."""
    rnd = random.Random(13)
    alpha = "bcdfghjklmnpqrstvwxz2456789"
    pods = [f"team-{i % 7}/job-{i // 500:04d}-{''.join(rnd.choices(alpha, k=5))}" for i in range(120_000)]
    plan = {
        "scale_up": [
            {
                "group": f"g{g}",
                "region": "us-east-1",
                "from": 0,
                "to": 4000,
                "pods": pods[g::3],
                "reason": "x",
            }
            for g in range(3)
        ],
        "uncordon": [],
        "drain": [],
        "pending": [{"pod": p, "code": "new-node", "reason": "placed on a new node"} for p in pods],
        "kept": [],
    }
    record = PlanRecord(cluster="ml", plan_id="p1", snapshot_key=KEY, fingerprint="f" * 64,
                        created_at=NOW, plan=plan, executions=("up-p1",))  # fmt: skip
    store = StateStore(ddb, "state", plans=PlanStore(ddb, "plans"))

    version = store.commit(
        "ml", State(), expected_version=0, snapshot_key=KEY, plan_id="p1", now=NOW, plan=record
    )

    assert version == 1
    assert PlanStore(ddb, "plans").get("ml", KEY) is not None


def test_state_and_back_off_items_keyed_by_name_are_read_as_the_first_regions_group(
    store: StateStore, ddb: Any
) -> None:
    """What the build before stored, keyed by a group's name alone: the state item's ``groups``,
    ``raises`` and ``templates`` entries and a ``backoff#gpu`` item (with its region, no ``group``).
    That build planned only the group of the name in the first region of ``regions`` (it refused the
    others), so each is read as that group's, here us-west-2's (listed first); a template entry as the
    group's of its own region. Committed again, each is under its group's key and names it."""
    old = {
        "nodes": {},
        "groups": {"gpu": {"backoff_until": "2026-11-02T12:05:00Z", "reason": "from the state"}},
        "raises": {"gpu": {"to": 3, "since": "2026-11-02T11:59:00Z"}},
        "templates": {
            "gpu": {"region": "us-west-2", "instance_type": "g5.xlarge", "node": "ip-10-1-0-5.us-west-2.compute.internal",
                    "learned_at": "2026-11-02T11:00:00Z", "allocatable": {"cpu": 3920, "memory": 15032385536000}},
        },
    }  # fmt: skip
    ddb.put_item(TableName="state", Item={"cluster": {"S": "ml"}, "item": {"S": "state"},
                                          "version": {"N": "7"}, "state": {"S": json.dumps(old)}})  # fmt: skip
    ddb.put_item(TableName="state", Item={"cluster": {"S": "ml"}, "item": {"S": "backoff#gpu"},
                                          "backoff_until": {"S": "2026-11-02T12:15:00Z"}, "reason": {"S": "ICE"},
                                          "region": {"S": "us-west-2"}, "expires_at": {"N": "1793621700"}})  # fmt: skip
    groups = [NodeGroup("gpu", region, 0, 4, 0, "g5.xlarge", None) for region in ("us-east-1", "us-west-2")]
    config = PlannerConfig(cluster="ml", regions=("us-west-2", "us-east-1"))

    loaded = store.load("ml", NOW)
    state = keyed_by_region(loaded.state, first_regions(config, groups))

    west = "us-west-2/gpu"
    assert set(state.groups) == set(state.raises) == set(state.templates) == {west}
    assert (state.groups[west].group, state.groups[west].region) == ("gpu", "us-west-2")
    assert (state.groups[west].reason, state.groups[west].backoff_until) == (
        "ICE",
        NOW + timedelta(minutes=15),
    )
    assert (state.raises[west].group, state.raises[west].region, state.raises[west].to) == (
        "gpu",
        "us-west-2",
        3,
    )
    assert state.templates[west].group == "gpu"
    commit(store, 7, state)
    wire = json.loads(ddb.get_item(TableName="state", Key={"cluster": {"S": "ml"}, "item": {"S": "state"}})
                      ["Item"]["state"]["S"])  # fmt: skip
    assert {section: list(wire[section]) for section in ("groups", "raises", "templates")} == {
        "groups": [west],
        "raises": [west],
        "templates": [west],
    }
    assert wire["raises"][west] == {
        "to": 3,
        "since": "2026-11-02T11:59:00Z",
        "group": "gpu",
        "region": "us-west-2",
    }


def test_failed_scale_down_drains_merge_into_the_state_the_latest_winning(
    store: StateStore, ddb: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A failed plan drain writes a claim item per drain (spillway.act.drain.Drainer.record); each load
    takes the latest into ``scale_down["failed"]``, so plans wait scale_down_delay_after_failure_minutes.
    One whose time cannot be read is skipped naming it, and the rest load."""
    earlier = State(scale_down={"failed": Since(since=NOW - timedelta(minutes=30))})
    commit(store, 0, earlier)
    for name, minutes_ago in (("dn-a", 5), ("dn-b", 1)):
        at = (NOW - timedelta(minutes=minutes_ago)).isoformat().replace("+00:00", "Z")
        store.claim(
            "ml", f"scaledown-failed#{name}", {"at": at, "node": name}, expires=NOW + timedelta(days=1)
        )
    store.claim("ml", "scaledown-failed#dn-c", {"at": "soon"}, expires=NOW + timedelta(days=1))

    with caplog.at_level(logging.WARNING, logger="spillway.adapters.state_store"):
        loaded = store.load("ml", NOW)

    assert loaded.version == 1
    assert loaded.state.scale_down == {"failed": Since(since=NOW - timedelta(minutes=1))}
    assert "scaledown-failed#dn-c" in caplog.text
    # an older failure item does not take the state's later mark back
    later = State(scale_down={"failed": Since(since=NOW + timedelta(minutes=1))})
    commit(store, 1, later)
    assert store.load("ml", NOW).state.scale_down == later.scale_down


def test_ended_drains_merge_into_the_state_per_node_the_latest_winning(
    store: StateStore, caplog: pytest.LogCaptureFixture
) -> None:
    """A plan's drain that ended keeping its node writes a claim item per plan and node
    (spillway.act.drain.Drainer._note_ended); each load puts each node's latest plan time (the claim
    it ended, ``planned_at``; not ``at``, when it ended) into ``ended_drains``, where the planner stops
    counting that claim's evictions against PodDisruptionBudgets. One whose node or plan time cannot
    be read is skipped naming it, and the rest load."""
    commit(store, 0, State())
    for plan_id, node, minutes_ago in (("p1", "ip-a", 25), ("p2", "ip-a", 1), ("p1", "ip-b", 3)):
        planned = (NOW - timedelta(minutes=minutes_ago)).isoformat().replace("+00:00", "Z")
        value = {"at": iso(NOW), "node": node, "planned_at": planned}
        store.claim("ml", f"drain-ended#{plan_id}#{node}", value, expires=NOW + timedelta(days=1))
    for plan_id, value in (("p3", {"at": iso(NOW), "node": "ip-c", "planned_at": "soon"}),
                           ("p4", {"at": iso(NOW), "node": "ip-d"})):  # fmt: skip
        store.claim("ml", f"drain-ended#{plan_id}#{value['node']}", value, expires=NOW + timedelta(days=1))

    with caplog.at_level(logging.WARNING, logger="spillway.adapters.state_store"):
        loaded = store.load("ml", NOW)

    assert loaded.state.ended_drains == {
        "ip-a": Since(since=NOW - timedelta(minutes=1)),
        "ip-b": Since(since=NOW - timedelta(minutes=3)),
    }
    assert "drain-ended#p3#ip-c" in caplog.text and "drain-ended#p4#ip-d" in caplog.text
    assert loaded.state.scale_down == {}  # an ended drain is no failure to wait after


def test_the_drains_records_load_from_their_partition_and_an_older_builds_from_the_clusters(
    store: StateStore,
) -> None:
    """The drain function writes its records in ``<cluster>#drains`` (so that its role may write
    nothing of the cluster's own partition, the planner's state item's); a build before wrote them in
    the cluster's own, where they last a day: both are merged. Nothing else is read from the drains'
    partition: an item there named as the state is not the state."""
    commit(store, 0, State())
    day = NOW + timedelta(days=1)
    planned = iso(NOW - timedelta(minutes=4))
    store.claim("ml#drains", "scaledown-failed#dn-new", {"at": iso(NOW - timedelta(minutes=2))}, expires=day)
    store.claim("ml", "scaledown-failed#dn-old", {"at": iso(NOW - timedelta(minutes=9))}, expires=day)
    store.claim(
        "ml#drains",
        "drain-ended#p2#ip-a",
        {"at": iso(NOW), "node": "ip-a", "planned_at": planned},
        expires=day,
    )
    older = {"at": iso(NOW), "node": "ip-b", "planned_at": iso(NOW - timedelta(minutes=6))}
    store.claim("ml", "drain-ended#p1#ip-b", older, expires=day)
    store.claim("ml#drains", "state", {"at": iso(NOW)}, expires=day)

    loaded = store.load("ml", NOW)

    assert loaded.version == 1
    assert loaded.state.scale_down == {"failed": Since(since=NOW - timedelta(minutes=2))}
    assert loaded.state.ended_drains == {
        "ip-a": Since(since=NOW - timedelta(minutes=4)),
        "ip-b": Since(since=NOW - timedelta(minutes=6)),
    }


def _older_builds_backoff(ddb: Any, item: str, until: datetime, reason: str, **extra: dict[str, str]) -> None:
    """A back-off item as builds before this partition wrote it: in the cluster's own partition."""
    ddb.put_item(TableName="state", Item={
        "cluster": {"S": "ml"}, "item": {"S": item}, "backoff_until": {"S": iso(until)},
        "reason": {"S": reason}, "region": {"S": "us-east-1"}, "expires_at": {"N": str(int(until.timestamp()))},
        **extra,
    })  # fmt: skip


def _partitions_of_backoffs(ddb: Any) -> dict[str, str]:
    """Every back-off item of the table (a scan: any partition), and the partition it is in."""
    items = ddb.scan(TableName="state")["Items"]
    return {i["item"]["S"]: i["cluster"]["S"] for i in items if i["item"]["S"].startswith("backoff#")}


def test_back_offs_go_to_their_own_partition_and_an_older_builds_still_load(
    store: StateStore, ddb: Any
) -> None:
    """Back-offs (a scale-up's, a gang's, a Spot notice's: ``back_off``) are written in
    ``<cluster>#backoffs``, so that the interrupt function's role may write nothing in the cluster's own
    partition, where a put on the state item's key would replace the planner's state (IAM cannot limit
    a sort key). A build before wrote them in the cluster's own: both are merged while they last, and
    nothing but back-offs is read from the new partition."""
    commit(store, 0, State())
    later = NOW + timedelta(minutes=15)
    names = back_off(store, "ml", "gpu", later, "InsufficientInstanceCapacity", region="us-east-1",
                     pools=[("spot", "us-east-1a", "g5.xlarge")])  # fmt: skip
    _older_builds_backoff(ddb, "backoff#us-east-1/cpu", NOW + timedelta(minutes=9), "an older build's",
                          group={"S": "cpu"})  # fmt: skip
    ddb.put_item(TableName="state", Item={"cluster": {"S": "ml#backoffs"}, "item": {"S": "state"},
                                          "version": {"N": "7"}, "state": {"S": "{}"}})  # fmt: skip

    own = ddb.query(TableName="state", KeyConditionExpression="#c = :c", ExpressionAttributeNames={"#c": "cluster"},
                    ExpressionAttributeValues={":c": {"S": "ml"}})["Items"]  # fmt: skip
    loaded = store.load("ml", NOW)

    assert names == ["gpu", "pool#spot/us-east-1a/g5.xlarge"]
    assert sorted(i["item"]["S"] for i in own) == ["backoff#us-east-1/cpu", "state"]
    assert loaded.version == 1
    assert sorted(loaded.state.groups) == ["us-east-1/cpu", "us-east-1/gpu"]
    assert loaded.state.groups["us-east-1/gpu"].backoff_until == later
    assert sorted(loaded.state.pools) == ["spot/us-east-1a/g5.xlarge"]
    assert sorted((b.region, b.group) for b in store.backoffs("ml")) == [
        ("us-east-1", "cpu"), ("us-east-1", "gpu"), ("us-east-1", "pool#spot/us-east-1a/g5.xlarge")
    ]  # fmt: skip


def test_the_store_writes_every_back_off_in_the_back_offs_partition_whoever_calls_it(
    store: StateStore, ddb: Any
) -> None:
    """The store, given the cluster, puts a back-off in ``<cluster>#backoffs`` itself: a caller that
    hands it the cluster (as every caller does) cannot write one in the cluster's own partition, where
    the interrupt function's role may not write and a put on the state item's key would replace the
    planner's state. A partition handed to it instead of the cluster is refused, naming the field:
    the item would land in a partition no load reads."""
    until = NOW + timedelta(minutes=15)
    assert store.put_backoff("ml", "gpu", until, "InsufficientInstanceCapacity", region="us-east-1")
    assert store.put_backoff("ml", "pool#spot/us-east-1a/g5.xlarge", until, "interrupted", region="us-east-1")
    back_off(store, "ml", "cpu", until, "AwsError", region="us-west-2",
             pools=[("on-demand", "us-west-2a", "m5.large")])  # fmt: skip

    for partition in ("ml#backoffs", "", "ml#drains"):
        with pytest.raises(ValueError, match="cluster"):
            store.put_backoff(partition, "gpu", until, "misrouted", region="us-east-1")

    assert _partitions_of_backoffs(ddb) == {
        "backoff#us-east-1/gpu": "ml#backoffs",
        "backoff#pool#spot/us-east-1a/g5.xlarge": "ml#backoffs",
        "backoff#us-west-2/cpu": "ml#backoffs",
        "backoff#pool#on-demand/us-west-2a/m5.large": "ml#backoffs",
    }
    assert sorted(store.load("ml", NOW).state.groups) == ["us-east-1/gpu", "us-west-2/cpu"]


def test_a_back_off_in_either_partition_is_not_shortened_or_weakened_by_one_in_the_other(
    store: StateStore, ddb: Any
) -> None:
    """An older build's back-off (in the cluster's own partition) and a new one of the same group or pool
    (in ``<cluster>#backoffs``) are two items: the put's condition sees only its own partition, so the
    load keeps what the condition keeps within one. Of a group's two, the later ``backoff_until`` wins
    whichever partition holds it; of a pool's, the stronger (fewer ``nodes``) while it lasts."""
    longer, shorter = NOW + timedelta(minutes=15), NOW + timedelta(minutes=5)
    _older_builds_backoff(ddb, "backoff#us-east-1/gpu", longer, "older build, longer", group={"S": "gpu"})
    _older_builds_backoff(ddb, "backoff#us-east-1/cpu", shorter, "older build, shorter", group={"S": "cpu"})
    _older_builds_backoff(ddb, "backoff#pool#spot/us-east-1a/g5.xlarge", shorter, "EC2 had none")
    assert store.put_backoff("ml", "gpu", shorter, "new, shorter", region="us-east-1", now=NOW)
    assert store.put_backoff("ml", "cpu", longer, "new, longer", region="us-east-1", now=NOW)
    assert store.put_backoff("ml", "pool#spot/us-east-1a/g5.xlarge", longer, "gang of 8", region="us-east-1",
                             nodes=8, now=NOW)  # fmt: skip

    state = store.load("ml", NOW).state
    assert {k: (g.backoff_until, g.reason) for k, g in state.groups.items()} == {
        "us-east-1/cpu": (longer, "new, longer"),
        "us-east-1/gpu": (longer, "older build, longer"),
    }
    pool = state.pools["spot/us-east-1a/g5.xlarge"]
    assert (pool.nodes, pool.backoff_until) == (1, shorter)
    # once the stronger one is over, the weaker one still lasting holds
    later = store.load("ml", shorter + timedelta(seconds=1)).state.pools["spot/us-east-1a/g5.xlarge"]
    assert (later.nodes, later.backoff_until) == (8, longer)


FAR = "9999-12-31T23:59:59Z"  # reads as a time; the planner adds its delays to it


def put_item(ddb: Any, item: str, **attributes: dict[str, str]) -> None:
    ddb.put_item(TableName="state", Item={"cluster": {"S": "ml"}, "item": {"S": item}, **attributes})


def claim(value: dict[str, Any]) -> dict[str, str]:
    return {"S": json.dumps(value)}


def test_an_item_whose_time_no_delay_can_be_added_to_is_skipped_naming_it(
    ddb: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A failed scale-down drain's item at 9999-12-31: load took it in as the state's
    ``scale_down.failed``, and every plan then failed (OverflowError adding the scale-down delay to it,
    in planner.cooldown) until the item's TTL, a day later. The same for an ended drain's
    ``planned_at`` and a back-off's ``backoff_until``. Each is now skipped and named; the good items
    beside them load."""
    put_item(ddb, "scaledown-failed#bad", value=claim({"at": FAR}))
    put_item(ddb, "scaledown-failed#good", value=claim({"at": "2026-11-02T11:00:00Z"}))
    put_item(ddb, "drain-ended#p1#node-a", value=claim({"node": "node-a", "planned_at": FAR}))
    put_item(ddb, "backoff#gpu", group={"S": "gpu"}, region={"S": "us-east-1"}, backoff_until={"S": FAR})
    caplog.set_level(logging.WARNING)

    state = StateStore(ddb, "state").load("ml", NOW).state

    assert state.scale_down["failed"].since == datetime(2026, 11, 2, 11, 0, tzinfo=UTC)
    assert state.ended_drains == {} and state.groups == {}
    warned = "\n".join(r.getMessage() for r in caplog.records)
    for item in ("scaledown-failed#bad", "drain-ended#p1#node-a", "backoff#gpu"):
        assert item in warned, item
    # and the plan goes on (it overflowed in planner.cooldown before)
    plan(ClusterSnapshot(cluster="ml", taken_at=NOW, nodes=(), pods=()), [], PlannerConfig(), state, NOW)


def test_a_raise_the_scale_up_kept_unsettled_loads_marked_unless_an_instance_was_claimed_for_it(
    store: StateStore, caplog: pytest.LogCaptureFixture
) -> None:
    """spillway.act.claims keeps a raise whose answer was lost, and which it cannot settle, as
    ``unsettled#<owner>`` (the group's key, when); the instances its verify finds launched for it are
    ``owner#<region>#<instance>`` claims naming the owner. Each load marks the state's raise entry of
    that group ``unsettled`` (the planner then judges a carried group's raise as a read group's) when
    such a raise was kept at or after the entry's time and its owner claimed no instance (one claimed
    says it applied). An older one, another group's or one that cannot be read marks nothing."""
    raised = NOW - timedelta(minutes=3)
    entry = {"to": 2, "since": raised.isoformat(), "group": "east", "region": "us-east-1"}
    commit(
        store,
        0,
        State.model_validate({"raises": {"us-east-1/east": entry, "us-east-1/west": {**entry, "group": "west"},
                                         "us-east-1/gpu": {**entry, "group": "gpu"}}}),
    )  # fmt: skip
    expires = NOW + timedelta(days=2)
    store.claim("ml", "unsettled#up-1-east", {"group": "us-east-1/east", "at": iso(NOW)}, expires=expires)
    store.claim("ml", "unsettled#up-0-west", {"group": "us-east-1/west", "at": iso(raised - timedelta(minutes=1))},
                expires=expires)  # fmt: skip
    store.claim("ml", "unsettled#up-1-gpu", {"group": "us-east-1/gpu", "at": iso(NOW)}, expires=expires)
    store.claim("ml", "owner#us-east-1#i-0123", {"owner": "up-1-gpu"}, expires=expires)  # it applied
    store.claim("ml", "unsettled#up-2-east", {"group": "us-east-1/east"}, expires=expires)

    with caplog.at_level(logging.WARNING, logger="spillway.adapters.state_store"):
        loaded = store.load("ml", NOW)

    assert {k: v.unsettled for k, v in loaded.state.raises.items()} == {
        "us-east-1/east": True,
        "us-east-1/gpu": False,
        "us-east-1/west": False,
    }
    assert "unsettled#up-2-east" in caplog.text
    assert "unsettled" not in json.dumps(loaded.state.to_wire())  # never stored


def test_a_raise_entry_naming_its_owner_is_marked_unsettled_by_that_owners_raise_alone(
    store: StateStore,
) -> None:
    """An entry that names its scale-up's owner (``RaiseState.owner``, written with the state) is marked
    ``unsettled`` by that owner's ``unsettled#<owner>`` alone: another scale-up's raise of the group kept
    unsettled after the entry's time (an earlier plan's round, retried late) is not its raise. A gang's
    (its owner an attempt, which no entry names) still marks it by time."""
    raised = NOW - timedelta(minutes=3)
    entry = {"to": 2, "since": raised.isoformat(), "region": "us-east-1"}
    own = {"cpu": "up-p2-1-us-east-1-cpu", "gpu": "up-p2-1-us-east-1-gpu", "mem": "up-p2-1-us-east-1-mem"}
    commit(store, 0, State.model_validate(
        {"raises": {f"us-east-1/{g}": {**entry, "group": g, "owner": o} for g, o in own.items()}}
    ))  # fmt: skip
    expires = NOW + timedelta(days=2)
    store.claim(
        "ml", "unsettled#up-p1-2-us-east-1-cpu", {"group": "us-east-1/cpu", "at": iso(NOW)}, expires=expires
    )
    store.claim(
        "ml", "unsettled#up-p2-1-us-east-1-gpu", {"group": "us-east-1/gpu", "at": iso(NOW)}, expires=expires
    )
    store.claim("ml", "unsettled#spillway-0a1b", {"group": "us-east-1/mem", "at": iso(NOW)}, expires=expires)

    loaded = store.load("ml", NOW)

    assert {k: v.unsettled for k, v in loaded.state.raises.items()} == {
        "us-east-1/cpu": False,
        "us-east-1/gpu": True,
        "us-east-1/mem": True,
    }
    assert loaded.state.raises["us-east-1/cpu"].owner == "up-p2-1-us-east-1-cpu"  # stored and read back
