"""Snapshots in DynamoDB: compressed, chunked past the item size limit, never read half-written.

Key schema of the ``snapshots`` table (partition key ``cluster``, sort key ``taken_at``, both strings)::

    complete snapshot   cluster = "<cluster>"          taken_at = "2025-06-01T12:00:00.123456Z"
                        kind = "snapshot", fingerprint, codec, size, raw_size, sha256, chunks,
                        write_id, pods, nodes, pending, groups, observe_seconds, expires_at,
                        data (binary, only when chunks = 0)
    chunk               cluster = "<cluster>#chunks"   taken_at = "<taken_at>#<write_id>#0000"
                        kind = "chunk", data (binary), expires_at

``taken_at`` is always UTC with six fraction digits, so its string order is time order. Chunks live in
their own partition and are written first; the snapshot item (the manifest) is written last and carries
the SHA-256 of the whole blob. A reader looks only at the ``<cluster>`` partition, so
``latest(cluster)`` is one ``Query`` (``ScanIndexForward=False``, ``Limit=1``) and never meets a
snapshot whose chunks are not all there. Stream consumers filter on ``kind = "snapshot"``. The
manifest is written only where no snapshot has its key; one found there with this save's ``write_id``
is this save's own write, whose answer was lost and which botocore sent again: saved, not refused.

Every item carries ``expires_at`` (epoch seconds, the table's TTL attribute); chunks expire a little
after their manifest so a manifest never outlives its chunks.

**Version skew.** While ``sam deploy`` updates the functions one at a time, a new observe's snapshot is
planned by an old planner, and an old observe's by a new one; so the reader is the tolerant side both
ways. A key the snapshot's records were written without reads as what it meant before it existed (each
``from_dict`` defaults it so); a key this build does not know is ignored (the parsers read records key
by key); a known key with a bad value is still a :class:`~spillway.errors.SnapshotError` naming it. The
planner never writes a snapshot back, so nothing is lost. A change that older readers must not misread bumps the format ``v``
(:data:`~spillway.model.snapshot.FORMAT_VERSION`), which they refuse (the next observation, by the
build then deployed, is planned again).
"""

from __future__ import annotations

import hashlib
import json
import lzma
import re
import time
import uuid
import zlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from botocore.exceptions import ClientError

from spillway.adapters.aws import SDK_ERRORS, map_aws_error
from spillway.errors import AwsThrottled, AwsUnavailable, InputError, SnapshotError, SnapshotNotFound
from spillway.model.act import (
    CLUSTER_PATTERN,
    SNAPSHOT_KEY_PATTERN,
    SaveResult,
    SnapshotMeta,
    SnapshotRef,
    format_key,
    parse_key,
)
from spillway.model.snapshot import Snapshot

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

T = TypeVar("T")

Codec = Literal["zlib", "lzma"]
KIND_SNAPSHOT = "snapshot"
KIND_CHUNK = "chunk"
CHUNK_SUFFIX = "#chunks"
_CLUSTER = re.compile(CLUSTER_PATTERN.strip("^$"))
_SNAPSHOT_KEY = re.compile(SNAPSHOT_KEY_PATTERN.strip("^$"))
# DynamoDB items stop at 400 KB (names and values together); stay well below.
DEFAULT_CHUNK_BYTES = 350_000
CHUNK_TTL_GRACE = timedelta(hours=1)
# Measured on 50,000 realistic pods: zlib 6 → 19 bytes/pod in 0.2 s; zlib 9 → 18 in 0.7 s;
# lzma 6 → 12 in 4.6 s. zlib 6 meets the 40 bytes/pod target at a twentieth of lzma's time.
ZLIB_LEVEL = 6
LZMA_PRESET = 6
_META_ATTRS = (
    "cluster",
    "taken_at",
    "kind",
    "fingerprint",
    "codec",
    "size",
    "raw_size",
    "chunks",
    "pods",
    "nodes",
    "pending",
    "expires_at",
)


def encode(snapshot: Snapshot, codec: Codec) -> tuple[bytes, int]:
    """Compressed compact JSON of the snapshot, and the size of that JSON, streamed piece by piece
    through the compressor so the whole JSON text never sits in memory."""
    compressor = _compressor(codec)
    out: list[bytes] = []
    raw_size = 0
    for piece in snapshot.iter_json():
        data = piece.encode()
        raw_size += len(data)
        out.append(compressor.compress(data))
    out.append(compressor.flush())
    return b"".join(out), raw_size


def _compressor(codec: Codec) -> Any:
    if codec == "lzma":
        return lzma.LZMACompressor(format=lzma.FORMAT_XZ, preset=LZMA_PRESET)
    if codec == "zlib":
        return zlib.compressobj(ZLIB_LEVEL)
    raise ValueError(f"codec: unknown {codec!r}")


def decompress(blob: bytes, codec: str) -> bytes:
    if codec == "lzma":
        return lzma.decompress(blob)
    if codec == "zlib":
        return zlib.decompress(blob)
    raise SnapshotError(f"codec: unknown {codec!r}")


class SnapshotStore:
    """Save and read :class:`Snapshot` s in the snapshots table."""

    def __init__(
        self,
        client: DynamoDBClient,
        table: str,
        *,
        ttl: timedelta = timedelta(days=1),
        codec: Codec = "zlib",
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    ) -> None:
        if not 1_000 <= chunk_bytes <= 380_000:
            raise ValueError("chunk_bytes: must be between 1000 and 380000 (DynamoDB items stop at 400 KB)")
        self.client = client
        self.table = table
        self.ttl = ttl
        self.codec: Codec = codec
        self.chunk_bytes = chunk_bytes
        self.last_save: SaveResult | None = None

    # --- writing -------------------------------------------------------------------------------

    def save(self, snapshot: Snapshot) -> str:
        """Store ``snapshot``; returns its key (the ``taken_at`` sort key). Chunks first, manifest last."""
        started = time.perf_counter()
        cluster = snapshot.cluster_name
        key = format_key(snapshot.taken_at)
        blob, raw_size = encode(snapshot, self.codec)
        expires = int((snapshot.taken_at + self.ttl).timestamp())
        write_id = uuid.uuid4().hex[:12]
        pieces = (
            [blob[i : i + self.chunk_bytes] for i in range(0, len(blob), self.chunk_bytes)]
            if len(blob) > self.chunk_bytes
            else []
        )
        chunk_expires = str(expires + int(CHUNK_TTL_GRACE.total_seconds()))
        for index, piece in enumerate(pieces):
            item = {
                "cluster": {"S": cluster + CHUNK_SUFFIX},
                "taken_at": {"S": _chunk_key(key, write_id, index)},
                "kind": {"S": KIND_CHUNK},
                "data": {"B": piece},
                "expires_at": {"N": chunk_expires},
            }
            self._guard(f"PutItem chunk {index} of {cluster}/{key}", partial(self._put, item))
        counts = snapshot.counts()
        manifest: dict[str, Any] = {
            "cluster": {"S": cluster},
            "taken_at": {"S": key},
            "kind": {"S": KIND_SNAPSHOT},
            "fingerprint": {"S": snapshot.fingerprint},
            "codec": {"S": self.codec},
            "size": {"N": str(len(blob))},
            "raw_size": {"N": str(raw_size)},
            "sha256": {"S": hashlib.sha256(blob).hexdigest()},
            "chunks": {"N": str(len(pieces))},
            "write_id": {"S": write_id},
            "pods": {"N": str(counts.pods)},
            "nodes": {"N": str(counts.nodes)},
            "pending": {"N": str(counts.pending_pods)},
            "groups": {"N": str(len(snapshot.groups))},
            "observe_seconds": {"N": repr(round(snapshot.observe_seconds, 3))},
            "expires_at": {"N": str(expires)},
        }
        if not pieces:
            manifest["data"] = {"B": blob}
        self._guard(f"PutItem snapshot {cluster}/{key}", partial(self._put_manifest, manifest))
        self.last_save = SaveResult(
            key=key,
            size=len(blob),
            raw_size=raw_size,
            chunks=len(pieces),
            items=len(pieces) + 1,
            seconds=time.perf_counter() - started,
        )
        return key

    def _put(self, item: dict[str, Any], new: bool = False) -> None:
        if new:
            self.client.put_item(
                TableName=self.table,
                Item=item,
                ConditionExpression="attribute_not_exists(#k)",
                ExpressionAttributeNames={"#k": "taken_at"},
            )
        else:
            self.client.put_item(TableName=self.table, Item=item)

    def _put_manifest(self, item: dict[str, Any]) -> None:
        """The manifest, on the condition that no snapshot has its key. botocore sends a request again
        when its answer was lost (a read timeout, a 500: DynamoDB may have written the item), and then
        the condition fails on the item the first attempt wrote: the stored manifest carrying this
        save's ``write_id`` is that write, landed, not another writer's."""
        try:
            self._put(item, new=True)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            stored = self.client.get_item(
                TableName=self.table,
                Key={"cluster": item["cluster"], "taken_at": item["taken_at"]},
                ConsistentRead=True,
                ProjectionExpression="#w",
                ExpressionAttributeNames={"#w": "write_id"},
            ).get("Item")
            if (stored or {}).get("write_id") != item["write_id"]:
                raise

    # --- reading -------------------------------------------------------------------------------

    def latest(self, cluster: str) -> Snapshot | None:
        """The newest complete snapshot of ``cluster``, or None when there is none."""
        items = self._query_latest(cluster, projection=None)
        return self._load(items[0]) if items else None

    def latest_meta(self, cluster: str) -> SnapshotMeta | None:
        """The newest snapshot's manifest, without its data (a cheap read for change detection)."""
        items = self._query_latest(cluster, projection=_META_ATTRS)
        return _meta(items[0]) if items else None

    def get(self, cluster: str, key: str) -> Snapshot:
        """The snapshot stored under ``key``; :class:`SnapshotNotFound` when there is none."""
        resp = self._guard(
            f"GetItem snapshot {cluster}/{key}",
            lambda: self.client.get_item(
                TableName=self.table,
                Key={"cluster": {"S": cluster}, "taken_at": {"S": key}},
                ConsistentRead=True,
            ),
        )
        item = resp.get("Item")
        if not item:
            raise SnapshotNotFound(f"{cluster}/{key}: no such snapshot")
        return self._load(item)

    def _query_latest(self, cluster: str, projection: tuple[str, ...] | None) -> list[dict[str, Any]]:
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "#c = :c",
            "ExpressionAttributeNames": {"#c": "cluster"},
            "ExpressionAttributeValues": {":c": {"S": cluster}},
            "ScanIndexForward": False,
            "Limit": 1,
            "ConsistentRead": True,
        }
        if projection:
            names = {f"#a{i}": name for i, name in enumerate(projection)}
            kwargs["ProjectionExpression"] = ",".join(names)
            kwargs["ExpressionAttributeNames"] = {**names, "#c": "cluster"}
        resp = self._guard(f"Query latest snapshot of {cluster}", lambda: self.client.query(**kwargs))
        return list(resp.get("Items", []))

    def _load(self, item: dict[str, Any]) -> Snapshot:
        cluster = item["cluster"]["S"]
        key = item["taken_at"]["S"]
        where = f"{cluster}/{key}"
        try:
            chunks = int(item["chunks"]["N"])
            codec = item["codec"]["S"]
            digest = item["sha256"]["S"]
            write_id = item["write_id"]["S"] if chunks else ""
        except (KeyError, ValueError) as exc:
            raise SnapshotError(f"{where}: malformed snapshot item ({exc})") from exc
        if chunks == 0:
            if "data" not in item:
                raise SnapshotError(f"{where}: snapshot item has no data")
            blob = bytes(item["data"]["B"])
        else:
            blob = self._read_chunks(cluster, key, write_id, chunks)
        if hashlib.sha256(blob).hexdigest() != digest:
            raise SnapshotError(f"{where}: data does not match its checksum")
        try:
            return Snapshot.from_dict(json.loads(decompress(blob, codec)))
        except SnapshotError:
            raise
        except (zlib.error, lzma.LZMAError, ValueError, KeyError, TypeError) as exc:
            raise SnapshotError(f"{where}: cannot decode snapshot ({type(exc).__name__}: {exc})") from exc

    def _read_chunks(self, cluster: str, key: str, write_id: str, count: int) -> bytes:
        prefix = f"{key}#{write_id}#"
        parts: dict[str, bytes] = {}
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "#c = :c AND begins_with(#t, :p)",
            "ExpressionAttributeNames": {"#c": "cluster", "#t": "taken_at"},
            "ExpressionAttributeValues": {":c": {"S": cluster + CHUNK_SUFFIX}, ":p": {"S": prefix}},
            "ConsistentRead": True,
        }
        what = f"Query chunks of {cluster}/{key}"
        while True:
            resp = self._guard(what, lambda: self.client.query(**kwargs))
            for chunk in resp.get("Items", []):
                parts[chunk["taken_at"]["S"]] = bytes(chunk["data"]["B"])
            last = resp.get("LastEvaluatedKey")
            if not last:
                break
            kwargs["ExclusiveStartKey"] = last
        expected = [_chunk_key(key, write_id, i) for i in range(count)]
        missing = [k for k in expected if k not in parts]
        if missing:
            raise SnapshotError(f"{cluster}/{key}: {len(missing)} of {count} chunks missing")
        return b"".join(parts[k] for k in expected)

    @staticmethod
    def _guard(what: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except SDK_ERRORS as exc:
            # Throttling and an unanswering endpoint are named as by every other store and adapter
            # (AwsThrottled, AwsUnavailable: transient); anything else is this store's SnapshotError.
            mapped = map_aws_error(exc, what)
            if isinstance(mapped, AwsThrottled | AwsUnavailable):
                raise mapped from exc
            raise SnapshotError(str(mapped)) from exc


def _chunk_key(key: str, write_id: str, index: int) -> str:
    return f"{key}#{write_id}#{index:04d}"


def _meta(item: dict[str, Any]) -> SnapshotMeta:
    def num(name: str) -> int:
        return int(item[name]["N"]) if name in item else 0

    key = item["taken_at"]["S"]
    taken_at = parse_key(key)
    return SnapshotMeta(
        cluster=item["cluster"]["S"],
        key=key,
        taken_at=taken_at,
        fingerprint=item.get("fingerprint", {}).get("S", ""),
        size=num("size"),
        raw_size=num("raw_size"),
        chunks=num("chunks"),
        pods=num("pods"),
        nodes=num("nodes"),
    )


def snapshot_inserts(records: Any) -> list[tuple[SnapshotRef, str]]:
    """From a batch of the snapshots table's stream records: the newest complete snapshot INSERT per
    cluster (chunk items, removals and modifications are not snapshots), with its record's sequence
    number (what a batch item failure names). A batch that is not what DynamoDB Streams sends (the
    record format of the DynamoDB Streams API's ``Record``/``StreamRecord``: ``eventName``,
    ``dynamodb.NewImage`` of typed attributes such as ``{"S": "..."}``, ``dynamodb.SequenceNumber``, a
    string of digits) is refused whole with :class:`InputError` naming the field
    (``Records.0.dynamodb.NewImage.taken_at``) before anything is planned."""
    if not isinstance(records, list):
        raise InputError(f"must be a list of stream records, got {type(records).__name__}", field="Records")
    newest: dict[str, tuple[SnapshotRef, str]] = {}
    for index, record in enumerate(records):
        found = _inserted_snapshot(record, f"Records.{index}")
        if found is None:
            continue
        ref = found[0]
        if ref.cluster not in newest or ref.key > newest[ref.cluster][0].key:
            newest[ref.cluster] = found
    return [newest[c] for c in sorted(newest)]


_SEQUENCE = re.compile(r"[0-9]{1,40}")
_EVENT_NAMES = ("INSERT", "MODIFY", "REMOVE")  # DynamoDB Streams' Record.eventName


def _inserted_snapshot(record: Any, where: str) -> tuple[SnapshotRef, str] | None:
    """A complete snapshot's INSERT as (ref, sequence number); None for anything else."""
    if not isinstance(record, dict):
        raise InputError(f"must be a stream record (an object), got {type(record).__name__}", field=where)
    name = record.get("eventName")
    if name not in _EVENT_NAMES:
        raise InputError(f"must be one of {', '.join(_EVENT_NAMES)}, got {str(name)[:80]!r}",
                         field=f"{where}.eventName")  # fmt: skip
    if name != "INSERT":
        return None
    data = record.get("dynamodb")
    if not isinstance(data, dict):
        raise InputError("must be the record's StreamRecord (an object)", field=f"{where}.dynamodb")
    # the table streams NEW_IMAGE, and the mapping's filter passes only records whose NewImage is a snapshot
    image = data.get("NewImage")
    at = f"{where}.dynamodb.NewImage"
    if not isinstance(image, dict):
        raise InputError("must be the new item (an object)", field=at)
    cluster, key = _string(image, "cluster", at), _string(image, "taken_at", at)
    if _string(image, "kind", at, KIND_SNAPSHOT) != KIND_SNAPSHOT or cluster.endswith(CHUNK_SUFFIX):
        return None
    if not _CLUSTER.fullmatch(cluster):
        raise InputError(f"not a cluster name: {cluster[:80]!r}", field=f"{at}.cluster")
    if not _SNAPSHOT_KEY.fullmatch(key):
        raise InputError(f"not a snapshot key such as {format_key(datetime(2026, 1, 1, tzinfo=UTC))}: "
                         f"{key[:80]!r}", field=f"{at}.taken_at")  # fmt: skip
    sequence = data.get("SequenceNumber")
    if not isinstance(sequence, str) or not _SEQUENCE.fullmatch(sequence):
        raise InputError(
            f"not a sequence number: {str(sequence)[:80]!r}", field=f"{where}.dynamodb.SequenceNumber"
        )
    return SnapshotRef(cluster, key), sequence


def _string(image: dict[str, Any], name: str, at: str, default: str | None = None) -> str:
    """A string attribute of a stream record's item (``{"S": "..."}``); ``default`` when absent."""
    attribute = image.get(name)
    if attribute is None and default is not None:
        return default
    if not isinstance(attribute, dict) or set(attribute) != {"S"} or not isinstance(attribute["S"], str):
        raise InputError(
            f'must be a string attribute {{"S": "..."}}, got {json.dumps(attribute, default=str)[:80]}',
            field=f"{at}.{name}",
        )
    return attribute["S"]
