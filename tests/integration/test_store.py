"""Snapshots through DynamoDB (moto): one item or chunks, never half a snapshot, TTL on every item."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from spillway.adapters.store import CHUNK_SUFFIX, SnapshotStore
from spillway.errors import SnapshotError, SnapshotNotFound
from spillway.model.act import format_key
from spillway.model.nodegroup import LaunchFailure, NodeGroup, TemplateNode
from spillway.model.snapshot import Snapshot, fingerprint

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def group(name: str = "gpu", region: str = "us-east-1", desired: int = 1) -> NodeGroup:
    return NodeGroup(
        name=name,
        region=region,
        arn=f"arn:aws:autoscaling:{region}:123456789012:autoScalingGroup:uuid:autoScalingGroupName/{name}",
        min_size=0,
        max_size=8,
        desired=desired,
        instance_type="g5.xlarge",
        template=TemplateNode(
            allocatable={"cpu": 3900, "memory": 15 * 2**30 * 1000, "nvidia.com/gpu": 1000, "pods": 58000},
            labels={"node.kubernetes.io/instance-type": "g5.xlarge"},
            taints=(("nvidia.com/gpu", "present", "NoSchedule"),),
        ),
        zones=(f"{region}a",),
        instance_ids=("i-0123456789abcdef0",),
        launch_failures=(LaunchFailure(at=T0, message="InsufficientInstanceCapacity"),),
    )


def at(snapshot: Snapshot, when: datetime) -> Snapshot:
    return replace(snapshot, taken_at=when, cluster=replace(snapshot.cluster, taken_at=when))


def scan(dynamodb: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table}
    while True:
        page = dynamodb.scan(**kwargs)
        items += page["Items"]
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


@pytest.fixture
def store(dynamodb: Any, tables: dict[str, str]) -> SnapshotStore:
    return SnapshotStore(dynamodb, tables["SnapshotsTable"], ttl=timedelta(hours=6))


# --- template → tables ------------------------------------------------------------------------------


def test_tables_come_from_the_template(dynamodb: Any, tables: dict[str, str]) -> None:
    snap = dynamodb.describe_table(TableName=tables["SnapshotsTable"])["Table"]

    assert [(k["AttributeName"], k["KeyType"]) for k in snap["KeySchema"]] == [
        ("cluster", "HASH"),
        ("taken_at", "RANGE"),
    ]
    assert snap["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert snap["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
    assert snap["SSEDescription"]["Status"] == "ENABLED"
    for table in tables.values():
        ttl = dynamodb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
        assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expires_at"}
        backups = dynamodb.describe_continuous_backups(TableName=table)["ContinuousBackupsDescription"]
        assert backups["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"] == "ENABLED"


# --- round trips ------------------------------------------------------------------------------------


def test_small_snapshot_round_trips_as_one_item(
    store: SnapshotStore, dynamodb: Any, build_snapshot: Any
) -> None:
    snapshot = build_snapshot(5, 50, pending=4, groups=[group(), group("cpu", "us-west-2", 3)])

    key = store.save(snapshot)

    assert key == "2026-03-02T09:00:00.000000Z"
    assert store.last_save is not None and store.last_save.chunks == 0 and store.last_save.items == 1
    items = scan(dynamodb, store.table)
    assert len(items) == 1 and "data" in items[0]
    loaded = store.latest("prod")
    assert loaded == snapshot
    assert loaded.to_dict() == snapshot.to_dict()
    assert store.get("prod", key) == snapshot


def test_large_snapshot_is_chunked_and_round_trips(
    dynamodb: Any, tables: dict[str, str], big_snapshot: Snapshot
) -> None:
    store = SnapshotStore(dynamodb, tables["SnapshotsTable"], chunk_bytes=100_000)

    key = store.save(big_snapshot)

    saved = store.last_save
    assert saved is not None and saved.chunks > 1
    items = scan(dynamodb, store.table)
    chunks = [i for i in items if i["cluster"]["S"] == "prod" + CHUNK_SUFFIX]
    manifests = [i for i in items if i["cluster"]["S"] == "prod"]
    assert len(chunks) == saved.chunks and len(manifests) == 1
    assert "data" not in manifests[0]
    assert all(len(c["data"]["B"]) <= 100_000 for c in chunks)
    assert store.latest("prod") == big_snapshot
    assert store.get("prod", key).cluster.pods == big_snapshot.cluster.pods


def test_default_chunks_stay_under_the_item_limit(
    store: SnapshotStore, dynamodb: Any, big_snapshot: Snapshot
) -> None:
    store.save(big_snapshot)

    assert store.last_save is not None
    assert store.last_save.size / len(big_snapshot.cluster.pods) < 40  # bytes per pod, compressed
    for item in scan(dynamodb, store.table):
        assert len(item.get("data", {}).get("B", b"")) <= 350_000


def test_every_item_has_a_ttl(dynamodb: Any, tables: dict[str, str], big_snapshot: Snapshot) -> None:
    store = SnapshotStore(dynamodb, tables["SnapshotsTable"], ttl=timedelta(hours=6), chunk_bytes=50_000)
    store.save(big_snapshot)
    store.save(at(big_snapshot, T0 + timedelta(minutes=1)))

    expires = int((T0 + timedelta(hours=6)).timestamp())
    for item in scan(dynamodb, store.table):
        value = int(item["expires_at"]["N"])
        if item["kind"]["S"] == "snapshot":
            assert value in (expires, expires + 60)
        else:  # chunks outlive their manifest a little, never the other way round
            assert expires < value <= expires + 60 + 3600


def test_latest_is_the_newest_and_meta_skips_the_data(store: SnapshotStore, build_snapshot: Any) -> None:
    base = build_snapshot(3, 20)
    for minutes in (0, 2, 1):
        store.save(at(base, T0 + timedelta(minutes=minutes)))

    latest = store.latest("prod")
    meta = store.latest_meta("prod")

    assert latest is not None and latest.taken_at == T0 + timedelta(minutes=2)
    assert meta is not None and meta.key == format_key(T0 + timedelta(minutes=2))
    assert meta.fingerprint == base.fingerprint and meta.pods == 20 and meta.nodes == 3
    assert store.latest("other") is None and store.latest_meta("other") is None


def test_get_unknown_key(store: SnapshotStore) -> None:
    with pytest.raises(SnapshotNotFound):
        store.get("prod", format_key(T0))


def test_a_missing_chunk_is_a_snapshot_error(
    dynamodb: Any, tables: dict[str, str], big_snapshot: Snapshot
) -> None:
    store = SnapshotStore(dynamodb, tables["SnapshotsTable"], chunk_bytes=100_000)
    store.save(big_snapshot)
    chunk = next(i for i in scan(dynamodb, store.table) if i["kind"]["S"] == "chunk")
    dynamodb.delete_item(
        TableName=store.table, Key={"cluster": chunk["cluster"], "taken_at": chunk["taken_at"]}
    )

    with pytest.raises(SnapshotError, match=r"1 of .* chunks missing"):
        store.latest("prod")


def test_a_failed_chunk_read_is_a_snapshot_error(
    dynamodb: Any, tables: dict[str, str], big_snapshot: Snapshot
) -> None:
    from botocore.exceptions import ClientError

    store = SnapshotStore(dynamodb, tables["SnapshotsTable"], chunk_bytes=100_000)
    store.save(big_snapshot)
    real_query = dynamodb.query

    def flaky(**kwargs: Any) -> Any:
        if kwargs["ExpressionAttributeValues"][":c"]["S"].endswith(CHUNK_SUFFIX):
            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "boom"}}, "Query")
        return real_query(**kwargs)

    store.client = type("Flaky", (), {"query": staticmethod(flaky)})()  # type: ignore[assignment]

    with pytest.raises(SnapshotError, match="chunks of prod") as caught:
        store.latest("prod")
    assert isinstance(caught.value.__cause__, ClientError)


def test_a_writer_that_dies_before_the_manifest_leaves_the_previous_snapshot(
    dynamodb: Any, tables: dict[str, str], big_snapshot: Snapshot, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SnapshotStore(dynamodb, tables["SnapshotsTable"], chunk_bytes=100_000)
    store.save(big_snapshot)
    real_put = store._put

    def die_on_manifest(item: dict[str, Any], new: bool = False) -> None:
        if new:
            raise RuntimeError("Lambda timed out")
        real_put(item, new)

    monkeypatch.setattr(store, "_put", die_on_manifest)
    with pytest.raises(RuntimeError):
        store.save(at(big_snapshot, T0 + timedelta(minutes=1)))

    latest = store.latest("prod")
    assert latest is not None and latest.taken_at == T0


def test_a_reader_racing_a_writer_never_sees_half_a_snapshot(
    dynamodb: Any, tables: dict[str, str], build_snapshot: Any
) -> None:
    base = build_snapshot(300, 3_000, pending=20)
    writer_store = SnapshotStore(dynamodb, tables["SnapshotsTable"], chunk_bytes=4_000)
    reader_store = SnapshotStore(dynamodb, tables["SnapshotsTable"])
    writer_store.save(base)
    assert writer_store.last_save is not None and writer_store.last_save.chunks >= 10
    done = threading.Event()
    errors: list[BaseException] = []
    seen: set[datetime] = set()

    def writer() -> None:
        try:
            for i in range(1, 9):
                writer_store.save(at(base, T0 + timedelta(seconds=20 * i)))
        except BaseException as exc:
            errors.append(exc)
        finally:
            done.set()

    def reader() -> None:
        try:
            while not done.is_set():
                got = reader_store.latest("prod")
                assert got is not None
                assert got.cluster.pods == base.cluster.pods
                assert got.fingerprint == fingerprint(got.cluster, got.groups)
                seen.add(got.taken_at)
        except BaseException as exc:
            errors.append(exc)
            done.set()

    threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)

    assert not errors, errors
    assert len(seen) >= 2  # the reader did read while the writer was writing


# --- fingerprint ------------------------------------------------------------------------------------


def test_fingerprint_ignores_time_and_order(build_snapshot: Any) -> None:
    one = build_snapshot(10, 100, pending=5, groups=[group(), group("cpu", "us-west-2")])
    later = at(one, T0 + timedelta(hours=1))
    shuffled = replace(
        one.cluster,
        pods=tuple(reversed(one.cluster.pods)),
        nodes=tuple(reversed(one.cluster.nodes)),
        observe_seconds=9.0,
    )

    assert fingerprint(later.cluster, later.groups) == one.fingerprint
    assert fingerprint(shuffled, reversed(one.groups)) == one.fingerprint


def test_fingerprint_follows_demand_nodes_and_groups(build_snapshot: Any) -> None:
    one = build_snapshot(10, 100, pending=5, groups=[group()])
    cluster = one.cluster
    pending = next(p for p in cluster.pods if p.node_name is None)
    node = cluster.nodes[0]
    bound = next(p for p in cluster.pods if p.node_name == node.name and not p.daemonset)

    variants = {
        "new pending pod": replace(cluster, pods=(*cluster.pods, replace(pending, name="another"))),
        "bigger request": replace(
            cluster,
            pods=tuple(replace(p, requests={"cpu": 64000}) if p is pending else p for p in cluster.pods),
        ),
        "cordoned": replace(cluster, nodes=(replace(node, unschedulable=True), *cluster.nodes[1:])),
        "not ready": replace(cluster, nodes=(replace(node, ready=False), *cluster.nodes[1:])),
        "pod finished": replace(
            cluster, pods=tuple(replace(p, phase="Succeeded") if p is bound else p for p in cluster.pods)
        ),
        # what else the planner reads (found by review: a nomination cleared waited for the heartbeat)
        "nominated": replace(
            cluster, pods=tuple(replace(p, nominated="n-1") if p is pending else p for p in cluster.pods)
        ),
        "gang": replace(
            cluster, pods=tuple(replace(p, gang="default/g") if p is pending else p for p in cluster.pods)
        ),
        "being deleted": replace(cluster, nodes=(replace(node, deleting=True), *cluster.nodes[1:])),
        "do-not-disrupt": replace(cluster, nodes=(replace(node, do_not_disrupt=True), *cluster.nodes[1:])),
    }
    prints = {name: fingerprint(c, one.groups) for name, c in variants.items()}
    prints["desired"] = fingerprint(cluster, [group(desired=2)])
    prints["launch failure"] = fingerprint(cluster, [replace(group(), launch_failures=())])
    prints["warm pool"] = fingerprint(cluster, [replace(group(), warm_instances=2)])

    assert one.fingerprint not in prints.values()
    assert len(set(prints.values())) == len(prints)


def test_streamed_json_equals_to_dict(build_snapshot: Any) -> None:
    import json

    snapshot = build_snapshot(7, 60, pending=3, groups=[group()])

    streamed = "".join(snapshot.iter_json(batch=7))

    assert json.loads(streamed) == json.loads(json.dumps(snapshot.to_dict()))
    assert Snapshot.from_dict(json.loads(streamed)) == snapshot


def test_throttling_is_aws_throttled_as_in_every_other_store(
    dynamodb: Any, tables: dict[str, str], big_snapshot: Snapshot
) -> None:
    from botocore.exceptions import ClientError

    from spillway.errors import AwsThrottled

    store = SnapshotStore(dynamodb, tables["SnapshotsTable"])

    def throttled(**kwargs: Any) -> Any:
        raise ClientError(
            {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}}, "Query"
        )

    store.client = type("Throttled", (), {"query": staticmethod(throttled)})()  # type: ignore[assignment]

    with pytest.raises(AwsThrottled, match="ProvisionedThroughputExceededException"):
        store.latest("prod")


class _AnswerLost:
    """The DynamoDB client as botocore behaves when a write's answer is lost (a read timeout, a 500
    after the write landed): it sends the same request again, and the answer the caller gets is the
    second attempt's."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def put_item(self, **kwargs: Any) -> Any:
        if "ConditionExpression" in kwargs:
            self._client.put_item(**kwargs)  # landed; its answer never came back
        return self._client.put_item(**kwargs)


def test_a_manifest_whose_answer_was_lost_and_was_sent_again_is_saved(
    dynamodb: Any, tables: dict[str, str], build_snapshot: Any
) -> None:
    store = SnapshotStore(_AnswerLost(dynamodb), tables["SnapshotsTable"])  # type: ignore[arg-type]
    snapshot = build_snapshot(3, 12, pending=2)

    key = store.save(snapshot)

    assert key == format_key(T0) and store.last_save is not None
    assert store.latest("prod") == snapshot


def test_a_snapshot_key_another_writer_took_is_still_refused(
    dynamodb: Any, tables: dict[str, str], build_snapshot: Any
) -> None:
    store = SnapshotStore(dynamodb, tables["SnapshotsTable"])
    theirs = build_snapshot(3, 12, pending=2)
    store.save(theirs)

    with pytest.raises(SnapshotError, match="ConditionalCheckFailed"):
        store.save(build_snapshot(3, 12, pending=5))
    assert store.latest("prod") == theirs


@pytest.mark.parametrize(("attribute", "inline"), [("write_id", False), ("data", True), ("sha256", True)])
def test_a_manifest_missing_an_attribute_is_a_snapshot_error_naming_it(
    dynamodb: Any, tables: dict[str, str], build_snapshot: Any, attribute: str, inline: bool
) -> None:
    """A damaged manifest (an attribute removed by hand, a partial copy between tables) is refused as
    SnapshotError naming the attribute, the error the plan function reports as a batch item failure
    and the scale-up's re-plan retries; a chunked manifest without ``write_id`` raised KeyError
    instead (one without ``data`` or ``sha256`` was already refused so)."""
    chunk_bytes = 380_000 if inline else 1_000
    store = SnapshotStore(dynamodb, tables["SnapshotsTable"], chunk_bytes=chunk_bytes)
    key = store.save(build_snapshot(30, 300, pending=2))
    assert (store.last_save is not None) and (store.last_save.chunks == 0) == inline
    dynamodb.update_item(
        TableName=tables["SnapshotsTable"],
        Key={"cluster": {"S": "prod"}, "taken_at": {"S": key}},
        UpdateExpression="REMOVE #a",
        ExpressionAttributeNames={"#a": attribute},
    )

    with pytest.raises(SnapshotError, match=attribute):
        store.get("prod", key)
