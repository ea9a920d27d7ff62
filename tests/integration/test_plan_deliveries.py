"""The plan function under DynamoDB Streams' delivery, on moto: at least once, in batches, retried.

What is modelled, from AWS's documentation of Lambda's DynamoDB event source mapping (one shard):

* the mapping's filter drops every record but a snapshot's INSERT before batching (template.yaml's
  FilterCriteria); a batch is the next 1..BatchSize records from the checkpoint;
* with ``ReportBatchItemFailures``, an empty ``batchItemFailures`` moves the checkpoint past the batch;
  otherwise Lambda checkpoints at the *lowest* sequence number reported and retries every record from
  there ("Configuring partial batch response with DynamoDB and Lambda", Lambda Developer Guide); an
  identifier that names no record of the batch, or a function error, fails the whole batch;
* an invocation whose response never reached Lambda (a timeout after the work was done) is retried
  whole: records are delivered at least once.

Powertools idempotency runs for real on the template's IdempotencyTable: a record another invocation
holds is an ``INPROGRESS`` item whose ``in_progress_expiration`` (the holder's remaining time, with
``register_lambda_context``) has not passed; a held record past it, or any record past ``expiration``
(``expires_after_seconds``), is taken over by the next delivery, as the library's conditional put does.

The idempotency table may refuse a write (throttled) once where a step says: the ``INPROGRESS`` put
before the plan, or the ``COMPLETED`` update after it acted.

Properties, whatever the deliveries: the handler never raises for a well-formed batch; a batch's
``batchItemFailures`` name exactly the records whose plan failed; each snapshot is committed at most
once, in snapshot order per cluster (an older snapshot than one planned is never acted on, a stale one
never); each execution is created once; every execution a committed plan names is started in the end;
the newest fresh snapshot of the deployment's cluster is the last planned; another cluster's snapshot is
never planned.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import boto3
import pytest
from aws_lambda_powertools.utilities.idempotency.persistence.dynamodb import DynamoDBPersistenceLayer
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from spillway.adapters.sfn import Executions
from spillway.adapters.state_store import StateStore
from spillway.adapters.store import SnapshotStore
from spillway.errors import AwsThrottled, StateConflict
from spillway.local import objects as o
from spillway.local.cfn import create_tables
from spillway.local.rig import SnapshotStream
from spillway.local.stack import LambdaContext, _load_handler
from spillway.model.aws import bundled_instance_types, parse_activities, parse_asgs
from spillway.model.cluster import ClusterSnapshot
from spillway.model.k8s import parse_kube_list
from spillway.model.nodegroup import build_node_groups
from spillway.model.snapshot import Snapshot

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
REGION = "us-east-1"
CLUSTER = "ml"
OTHER = "other"
BATCH_SIZE = 10  # template.yaml: PlanFunctionSnapshots' BatchSize
MAX_AGE = 180  # MAX_SNAPSHOT_AGE_SECONDS
TABLES = {
    "SnapshotsTable": "spillway-snapshots",
    "PlansTable": "spillway-plans",
    "StateTable": "spillway-state",
    "IdempotencyTable": "spillway-idempotency",
}
MACHINES = ("ScaleUp", "ScaleDown", "GangLaunch")
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
PASS = '{"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": true}}}'


def snapshot(cluster: str, pods: int, taken_at: datetime) -> Snapshot:
    """An empty GPU group and ``pods`` pending 1-GPU pods: every plan of it raises the group."""
    group = o.asg(
        "gpu-east", cluster=cluster, instance_type="g5.xlarge", max_size=20,
        taints={"nvidia.com/gpu": "present:NoSchedule"},
        labels={"node.kubernetes.io/instance-type": "g5.xlarge"},
    )  # fmt: skip
    items = [
        o.pod(f"train-{i}", "default", cpu="3", memory="12Gi", gpus=1, tolerations=[GPU_TOLERATION])
        for i in range(pods)
    ]
    objects = parse_kube_list(o.kube_list(items))
    cluster_snapshot = ClusterSnapshot.build(cluster, taken_at, objects.nodes, objects.pods, objects.pdbs)
    groups = build_node_groups(
        parse_asgs(o.asgs_output([group])), parse_activities(o.activities_output([])),
        bundled_instance_types(), {}, cluster,
    )  # fmt: skip
    return Snapshot.build(cluster_snapshot, groups, taken_at)


@dataclass
class Stack:
    """The plan function's AWS side on moto (tables from template.yaml, state machines that are
    created and never run) and its real handler, loaded as the local stack loads it."""

    ddb: Any
    sfn: Any
    stream: SnapshotStream
    handler: Any
    app: Any
    machines: dict[str, str]

    def reset(self) -> None:
        """Empty every table and forget every execution: the next example starts from nothing."""
        from moto.stepfunctions.models import stepfunctions_backends

        for table in TABLES.values():
            keys = [
                k["AttributeName"] for k in self.ddb.describe_table(TableName=table)["Table"]["KeySchema"]
            ]
            for item in self.ddb.scan(TableName=table)["Items"]:
                self.ddb.delete_item(TableName=table, Key={k: item[k] for k in keys})
        for machine in stepfunctions_backends["123456789012"][REGION].state_machines:
            machine.executions.clear()
        self.stream.read()  # past the removals

    def save(self, snap: Snapshot) -> str:
        return SnapshotStore(self.ddb, TABLES["SnapshotsTable"]).save(snap)

    def executions(self) -> list[str]:
        names = []
        for arn in self.machines.values():
            names += [e["name"] for e in self.sfn.list_executions(stateMachineArn=arn)["executions"]]
        return names


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    saved = dict(os.environ)
    with ExitStack() as exit_stack:
        exit_stack.callback(lambda: (os.environ.clear(), os.environ.update(saved)))
        os.environ.update(
            AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION=REGION,
            AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null",
        )  # fmt: skip
        for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
            os.environ.pop(name, None)
        exit_stack.enter_context(mock_aws())
        ddb = boto3.client("dynamodb", region_name=REGION)
        sfn = boto3.client("stepfunctions", region_name=REGION)
        create_tables(TEMPLATE, ddb, TABLES)
        role = "arn:aws:iam::123456789012:role/spillway-local"
        machines = {
            m: sfn.create_state_machine(name=f"spillway-{m}", definition=PASS, roleArn=role)[
                "stateMachineArn"
            ]
            for m in MACHINES
        }
        os.environ.update(
            CLUSTER_NAME=CLUSTER, REGIONS=REGION, CLUSTER_ACCESS="url", KUBE_URL="http://127.0.0.1:9",
            SNAPSHOTS_TABLE=TABLES["SnapshotsTable"], PLANS_TABLE=TABLES["PlansTable"],
            STATE_TABLE=TABLES["StateTable"], IDEMPOTENCY_TABLE=TABLES["IdempotencyTable"],
            SCALE_UP_STATE_MACHINE_ARN=machines["ScaleUp"], SCALE_DOWN_STATE_MACHINE_ARN=machines["ScaleDown"],
            GANG_LAUNCH_STATE_MACHINE_ARN=machines["GangLaunch"], MAX_SNAPSHOT_AGE_SECONDS=str(MAX_AGE),
            POD_EVENTS_MAX_PER_PLAN="0", POWERTOOLS_SERVICE_NAME="spillway",
            POWERTOOLS_METRICS_NAMESPACE="Spillway", POWERTOOLS_TRACE_DISABLED="true",
            POWERTOOLS_LOG_LEVEL="CRITICAL", POWERTOOLS_METRICS_DISABLED="true", AWS_LAMBDA_FUNCTION_NAME="spillway-ml-plan",
        )  # fmt: skip
        handler = _load_handler(ROOT / "functions" / "plan", "app.handler")
        stream = SnapshotStream(TABLES["SnapshotsTable"], REGION)
        yield Stack(ddb, sfn, stream, handler, sys.modules[handler.__module__], machines)


# --- what the example does ---------------------------------------------------------------------

# A step of the event source mapping: deliver the next ``size`` records (of those arrived), and how
# the world behaves around it.
STEP_KINDS = (
    "deliver", "lost_response", "hold", "release", "expire", "fail_start", "fail_commit",
    "fail_record", "fail_record_success",
)  # fmt: skip


@dataclass(frozen=True)
class Step:
    kind: str
    size: int = 1  # records in the batch (deliver, lost_response)
    arrive: int = 0  # records that arrive on the stream before this step
    target: int = 0  # which snapshot the fault or idempotency record is about


@dataclass(frozen=True)
class Scenario:
    ages: tuple[int, ...]  # seconds before now each snapshot of the cluster was taken, in save order
    others: tuple[int, ...]  # which of them another cluster's snapshot follows
    steps: tuple[Step, ...]


steps = st.builds(
    Step,
    kind=st.sampled_from((*STEP_KINDS, "deliver", "deliver")),
    size=st.integers(1, BATCH_SIZE),
    arrive=st.sampled_from([0, 1, 1, 2]),
    target=st.sampled_from([0, 0, 0, 1, 2, 3, 4]),
)
scenarios = st.builds(
    Scenario,
    # mostly fresh, sometimes out of order (an older snapshot saved after a newer), now and then stale
    ages=st.lists(st.sampled_from([5, 10, 20, 30, 40, 400]), min_size=1, max_size=5).map(tuple),
    others=st.lists(st.integers(0, 4), max_size=2, unique=True).map(tuple),
    steps=st.lists(steps, max_size=12).map(tuple),
)


@dataclass
class World:
    """What happened: the mapping's checkpoint, the faults armed, and what the adapters did."""

    records: list[dict[str, Any]]
    refs: list[tuple[str, str]]  # (cluster, key) by snapshot index
    arrived: int = 0
    checkpoint: int = 0
    start_faults: set[tuple[str, str]] = field(default_factory=set)
    commit_faults: set[tuple[str, str]] = field(default_factory=set)
    # the idempotency table refuses a write once: the INPROGRESS put, or the COMPLETED update after
    # the plan ran ("put" or "success")
    record_faults: dict[tuple[str, str], str] = field(default_factory=dict)
    commits: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)
    created: Counter[str] = field(default_factory=Counter)
    raised: list[tuple[tuple[str, str], str]] = field(default_factory=list)  # per plan_once call


def idempotency_key(cluster: str, key: str) -> str:
    """The id Powertools gives the plan function's record (key_prefix "plan", md5 of the sorted ref)."""
    import hashlib
    import json

    data = json.dumps({"cluster": cluster, "snapshot_key": key}, sort_keys=True)
    return f"plan#{hashlib.md5(data.encode()).hexdigest()}"  # Powertools default hash


def hold(stack: Stack, ref: tuple[str, str]) -> None:
    """Another invocation is planning ``ref`` right now (its record INPROGRESS, its time not up)."""
    now = datetime.now(UTC)
    stack.ddb.put_item(
        TableName=TABLES["IdempotencyTable"],
        Item={
            "id": {"S": idempotency_key(*ref)},
            "status": {"S": "INPROGRESS"},
            "expiration": {"N": str(int(now.timestamp()) + 3600)},
            "in_progress_expiration": {"N": str(int((now + timedelta(minutes=1)).timestamp() * 1000))},
        },
    )


def age_record(stack: Stack, ref: tuple[str, str]) -> None:
    """The record's time is up: a held one's holder timed out (``in_progress_expiration``, ms), a
    completed one's ``expiration`` (s) passed. Nothing when there is no record."""
    table, key = TABLES["IdempotencyTable"], {"id": {"S": idempotency_key(*ref)}}
    item = stack.ddb.get_item(TableName=table, Key=key).get("Item")
    if item is None:
        return
    past = datetime.now(UTC) - timedelta(seconds=5)
    held = item["status"]["S"] == "INPROGRESS"
    attribute, value = (
        ("in_progress_expiration", past.timestamp() * 1000) if held else ("expiration", past.timestamp())
    )
    stack.ddb.update_item(
        TableName=table, Key=key, UpdateExpression="SET #a = :v",
        ExpressionAttributeNames={"#a": attribute}, ExpressionAttributeValues={":v": {"N": str(int(value))}},
    )  # fmt: skip


def release(stack: Stack, ref: tuple[str, str]) -> None:
    """The invocation holding ``ref`` failed: Powertools deleted its INPROGRESS record."""
    table, key = TABLES["IdempotencyTable"], {"id": {"S": idempotency_key(*ref)}}
    item = stack.ddb.get_item(TableName=table, Key=key).get("Item")
    if item is not None and item["status"]["S"] == "INPROGRESS":
        stack.ddb.delete_item(TableName=table, Key=key)


def sequence(record: dict[str, Any]) -> str:
    return str(record["dynamodb"]["SequenceNumber"])


def passes_filter(record: dict[str, Any]) -> bool:
    """template.yaml's FilterCriteria: INSERTs whose NewImage.kind is "snapshot"."""
    image = record.get("dynamodb", {}).get("NewImage", {})
    return record.get("eventName") == "INSERT" and image.get("kind", {}).get("S") == "snapshot"


def invoke(stack: Stack, world: World, size: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    batch = world.records[world.checkpoint : min(world.arrived, world.checkpoint + size)]
    world.raised.clear()
    response = stack.handler({"Records": batch}, LambdaContext(function_name="spillway-ml-plan"))
    return batch, response


def advance(world: World, batch: list[dict[str, Any]], response: dict[str, Any]) -> None:
    """Lambda's checkpoint after a batch, as ReportBatchItemFailures documents it for streams."""
    failed = [f.get("itemIdentifier") for f in response.get("batchItemFailures") or []]
    sequences = [sequence(r) for r in batch]
    if not failed:
        world.checkpoint += len(batch)
        return
    assert all(f in sequences for f in failed), (failed, sequences)  # else the whole batch fails
    lowest = min(failed, key=int)
    world.checkpoint += sequences.index(lowest)


# --- the adapters, watched and made to fail once where a step says ---------------------------------


def watched(stack: Stack, world: World) -> ExitStack:
    from moto.stepfunctions.models import StateMachine

    original_start, original_commit = Executions.start, StateStore.commit
    original_create = StateMachine.start_execution
    original_plan_once = stack.app.plan_once
    original_put = DynamoDBPersistenceLayer._put_record
    original_update = DynamoDBPersistenceLayer._update_record

    def start(self: Executions, request: Any) -> Any:
        ref = (str(request.input.get("cluster")), str(request.input.get("snapshot_key")))
        if ref in world.start_faults:
            world.start_faults.discard(ref)
            raise AwsThrottled(f"StartExecution({request.name}): Throttling: Rate exceeded")
        return original_start(self, request)

    def commit(self: StateStore, cluster: str, state: Any, **kw: Any) -> int:
        ref = (cluster, str(kw["snapshot_key"]))
        if ref in world.commit_faults:
            world.commit_faults.discard(ref)
            raise StateConflict(f"{cluster}: lost the race (injected)")
        version = original_commit(self, cluster, state, **kw)
        world.commits.append((*ref, tuple(e["name"] for e in kw.get("executions", ()))))
        return version

    def refuse(fault: str, record: Any) -> None:
        for ref, armed in list(world.record_faults.items()):
            if armed == fault and record.idempotency_key == idempotency_key(*ref):
                del world.record_faults[ref]
                raise ClientError(
                    {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "injected"}},
                    "PutItem" if fault == "put" else "UpdateItem",
                )

    def put_record(self: DynamoDBPersistenceLayer, data_record: Any) -> None:
        refuse("put", data_record)
        original_put(self, data_record=data_record)

    def update_record(self: DynamoDBPersistenceLayer, data_record: Any) -> None:
        refuse("success", data_record)
        original_update(self, data_record=data_record)

    def create(self: Any, *args: Any, **kwargs: Any) -> Any:
        before = len(self.executions)
        execution = original_create(self, *args, **kwargs)
        if len(self.executions) > before:
            world.created[execution.name] += 1
        return execution

    def plan_once(clients: Any, ref: Any, context: Any) -> Any:
        try:
            result = original_plan_once(clients, ref, context)
        except Exception as exc:
            world.raised.append(((ref.cluster, ref.key), type(exc).__name__))
            raise
        world.raised.append(((ref.cluster, ref.key), "ok"))
        return result

    patches = ExitStack()
    patches.enter_context(mock.patch.object(Executions, "start", start))
    patches.enter_context(mock.patch.object(StateStore, "commit", commit))
    patches.enter_context(mock.patch.object(StateMachine, "start_execution", create))
    patches.enter_context(mock.patch.object(stack.app, "plan_once", plan_once))
    patches.enter_context(mock.patch.object(DynamoDBPersistenceLayer, "_put_record", put_record))
    patches.enter_context(mock.patch.object(DynamoDBPersistenceLayer, "_update_record", update_record))
    return patches


def deliver(stack: Stack, world: World, size: int, *, response_lost: bool = False) -> None:
    """One invocation on the next ``size`` arrived records; its response checked, and the checkpoint
    moved as Lambda moves it (not at all when the response never reached Lambda)."""
    if world.checkpoint >= world.arrived:
        return
    batch, response = invoke(stack, world, size)
    by_ref = {_ref(r): sequence(r) for r in batch}
    planned_failed = {by_ref[ref] for ref, outcome in world.raised if outcome not in ("ok", "StaleSnapshot")}
    assert {f["itemIdentifier"] for f in response["batchItemFailures"]} == planned_failed, (
        response,
        world.raised,
    )
    if not response_lost:
        advance(world, batch, response)


def _ref(record: dict[str, Any]) -> tuple[str, str]:
    image = record["dynamodb"]["NewImage"]
    return image["cluster"]["S"], image["taken_at"]["S"]


def play(stack: Stack, world: World, step: Step) -> None:
    world.arrived = min(len(world.records), world.arrived + step.arrive)
    # ``target`` counts back from the newest arrived snapshot of the cluster (what the next delivery
    # plans), so faults and holds meet deliveries often
    arrived = [_ref(r) for r in world.records[: world.arrived] if _ref(r)[0] == CLUSTER]
    ref = (
        arrived[-1 - step.target] if step.target < len(arrived) else world.refs[step.target % len(world.refs)]
    )
    if step.kind == "deliver":
        deliver(stack, world, step.size)
    elif step.kind == "lost_response":
        deliver(stack, world, step.size, response_lost=True)
    elif step.kind == "hold":
        if not any(c[:2] == ref for c in world.commits):  # a holder of a planned one would be answered
            hold(stack, ref)
    elif step.kind == "release":
        release(stack, ref)
    elif step.kind == "expire":
        age_record(stack, ref)
    elif step.kind == "fail_record":
        world.record_faults[ref] = "put"
    elif step.kind == "fail_record_success":
        world.record_faults[ref] = "success"
    elif step.kind == "fail_start":
        world.start_faults.add(ref)
    else:
        world.commit_faults.add(ref)


@settings(
    max_examples=40, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)  # fmt: skip
@given(scenario=scenarios)
# the brief's deliveries, always run: a plan committed whose start failed, retried in a batch that
# also holds a newer snapshot (its executions were never started before the plan started them)
@example(
    Scenario(
        ages=(30, 10),
        others=(),
        steps=(Step("fail_start", arrive=1), Step("deliver"), Step("deliver", size=2, arrive=1)),
    )
)
# the idempotency table refuses the INPROGRESS put (nothing planned: retried), and, for the next
# snapshot, the COMPLETED update after the plan acted (retried once the held record times out: a resume)
@example(
    Scenario(
        ages=(30, 10),
        others=(),
        steps=(
            Step("fail_record", arrive=1, target=0),
            Step("deliver"),
            Step("deliver"),
            Step("fail_record_success", arrive=1),
            Step("deliver"),
            Step("deliver"),
            Step("expire"),
            Step("deliver"),
        ),
    )
)
# a stale snapshot is never acted on, however it fails
@example(Scenario(ages=(400, 10), others=(), steps=(Step("fail_start", arrive=1), Step("deliver"))))
# a response lost after the work (the batch again), then the idempotency record expired (again)
@example(
    Scenario(
        ages=(20, 10),
        others=(1,),
        steps=(Step("lost_response", size=3, arrive=2), Step("expire"), Step("deliver", size=3, arrive=1)),
    )
)
# a delivery while another invocation holds the record, which then times out; a lost commit race
@example(
    Scenario(
        ages=(10, 20),
        others=(),
        steps=(
            Step("hold", arrive=2),
            Step("deliver", size=2),
            Step("expire"),
            Step("fail_commit"),
            Step("deliver", size=2),
            Step("deliver", size=2),
        ),
    )
)
# an older snapshot after a newer one, one at a time, the newer redelivered once expired
@example(
    Scenario(
        ages=(10, 30, 20),
        others=(0, 2),
        steps=(
            Step("deliver", arrive=2),
            Step("deliver", arrive=2),
            Step("expire", target=1),
            Step("deliver", arrive=2),
        ),
    )
)
def test_whatever_the_deliveries_each_snapshot_is_planned_once_and_nothing_is_lost(
    stack: Stack, scenario: Scenario
) -> None:
    stack.reset()
    now = datetime.now(UTC)
    refs, stale = [], set()
    for i, age in enumerate(scenario.ages):
        taken_at = now - timedelta(seconds=age, microseconds=i)
        refs.append((CLUSTER, stack.save(snapshot(CLUSTER, 2 + i, taken_at))))
        if age > MAX_AGE:
            stale.add(refs[-1])
        if i in scenario.others:
            stack.save(snapshot(OTHER, 1, taken_at))
    world = World(records=[r for r in stack.stream.read() if passes_filter(r)], refs=refs)
    with watched(stack, world):
        for step in scenario.steps:
            play(stack, world, step)
        # then the faults are spent, holders time out, and Lambda delivers until the stream is read
        world.start_faults.clear()
        world.commit_faults.clear()
        world.record_faults.clear()
        for ref in refs:
            release(stack, ref)
        world.arrived = len(world.records)
        for _ in range(3 * len(world.records) + 3):
            deliver(stack, world, BATCH_SIZE)
    assert world.checkpoint == len(world.records)

    ours = [c for c in world.commits if c[0] == CLUSTER]
    assert ours == [c for c in world.commits], "another cluster's snapshot was planned"
    keys = [key for _, key, _ in ours]
    assert keys == sorted(set(keys)), f"planned twice or out of order: {keys}"
    assert not stale & {(CLUSTER, k) for k in keys}, "a stale snapshot was acted on"
    fresh = [key for c, key in refs if (c, key) not in stale]
    if fresh:
        assert keys and keys[-1] == max(fresh), "the newest snapshot was not the last planned"
    assert all(n == 1 for n in world.created.values()), world.created
    named = [name for *_, names in ours for name in names]
    assert sorted(named) == sorted(set(named)) and set(named) <= set(stack.executions()), (
        "a committed plan's execution was never started"
    )


def test_another_clusters_snapshot_on_the_stream_is_skipped_not_planned(stack: Stack) -> None:
    """The deployment plans its own cluster (its planner config, state machines and groups); a direct
    request for another cluster is refused, and a stream record of one is skipped: planning it would
    scale another cluster's groups with this cluster's settings."""
    stack.reset()
    now = datetime.now(UTC)
    theirs = stack.save(snapshot(OTHER, 1, now - timedelta(seconds=10)))
    ours = stack.save(snapshot(CLUSTER, 2, now - timedelta(seconds=5)))
    records = [r for r in stack.stream.read() if passes_filter(r)]

    response = stack.handler({"Records": records}, LambdaContext(function_name="spillway-ml-plan"))

    assert response["batchItemFailures"] == []  # retrying cannot make it ours
    by_cluster = {r["cluster"]: r for r in response["results"]}
    assert by_cluster[OTHER]["status"] == "skipped" and CLUSTER in by_cluster[OTHER]["note"]
    assert by_cluster[CLUSTER]["status"] == "acted" and by_cluster[CLUSTER]["snapshot_key"] == ours
    assert stack.ddb.query(
        TableName=TABLES["StateTable"], KeyConditionExpression="#c = :c",
        ExpressionAttributeNames={"#c": "cluster"}, ExpressionAttributeValues={":c": {"S": OTHER}},
    )["Items"] == []  # fmt: skip
    assert all(theirs.replace(":", "").replace("-", "").replace(".", "") not in n for n in stack.executions())
