"""Plans in DynamoDB: every decision, with its reasons and the snapshot it came from (audit, replay).

Key schema of the ``plans`` table (partition key ``cluster``, sort key ``planned_at``, both strings)::

    plan of a tick     cluster = "<cluster>"   planned_at = "<snapshot key>"
    overflow re-plan   cluster = "<cluster>"   planned_at = "<snapshot key of the plan>#replan-<round>"
                                                  (+ "#part-<part>" for a scale-up's parts after the first)

    plan_id, kind ("plan" | "replan"), snapshot_key (the snapshot planned on), fingerprint, created_at,
    state_version, executions (names), summary (map of counts), acts (bool), expires_at (TTL, 30 days),
    plan (the plan contract as JSON text) or plan_z (the same, zlib-compressed, when large); a re-plan's
    groups (JSON text: the groups its round of the scale-up execution maps over)

The snapshot key is the snapshot's ``taken_at`` (fixed-width UTC), so a cluster's plans sort in time.
A tick's plan is written in the same transaction as the state it claims (see
:mod:`spillway.adapters.state_store`): there is a plan item exactly when the planner acted on it.

**Version skew.** Plan records are read (audit, replay) attribute by attribute: one a newer build added
is ignored, and the plan itself is kept as the JSON it was written as, never validated against this
build's plan contract, so a record of any build reads.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from spillway.adapters.aws import SDK_ERRORS, map_aws_error
from spillway.model.act import PlanRecord
from spillway.model.cluster import format_time, parse_time
from spillway.model.utc import aware

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

DEFAULT_TTL = timedelta(days=30)
# Plain JSON text up to this size (readable with the AWS CLI); compressed beyond it.
PLAIN_LIMIT = 64 * 1024
# DynamoDB items stop at 400 KB; past this the per-pod and per-node detail is dropped.
COMPRESSED_LIMIT = 300 * 1024


class PlanStore:
    def __init__(self, client: DynamoDBClient, table: str, *, ttl: timedelta = DEFAULT_TTL) -> None:
        self.client = client
        self.table = table
        self.ttl = ttl

    def item(self, record: PlanRecord) -> dict[str, Any]:
        """The DynamoDB item (attribute-value form)."""
        created = aware(record.created_at)
        item: dict[str, Any] = {
            "cluster": {"S": record.cluster},
            "planned_at": {"S": record.key},
            "plan_id": {"S": record.plan_id},
            "kind": {"S": record.kind},
            "snapshot_key": {"S": record.snapshot_key},
            "fingerprint": {"S": record.fingerprint},
            "created_at": {"S": format_time(created.astimezone(UTC)) or ""},
            "state_version": {"N": str(record.state_version)},
            "acts": {"BOOL": record.acts},
            "summary": {"M": {k: {"N": str(v)} for k, v in sorted(record.summary.items())}},
            "expires_at": {"N": str(int((created + self.ttl).timestamp()))},
        }
        if record.executions:
            item["executions"] = {"L": [{"S": name} for name in record.executions]}
        if record.groups is not None:  # a re-plan's round: never slimmed, its retry maps over them
            item["groups"] = {"S": json.dumps(list(record.groups), separators=(",", ":"), sort_keys=True)}
        text = json.dumps(record.plan, separators=(",", ":"), ensure_ascii=False)
        if len(text.encode()) <= PLAIN_LIMIT:
            item["plan"] = {"S": text}
            return item
        blob = zlib.compress(text.encode(), 6)
        if len(blob) > COMPRESSED_LIMIT:
            blob = _slimmed(record.plan, len(blob))
            item["truncated"] = {"BOOL": True}
        item["plan_z"] = {"B": blob}
        return item

    def put_request(self, record: PlanRecord) -> dict[str, Any]:
        """The record as one ``TransactItems`` entry (written together with the state)."""
        return {"Put": {"TableName": self.table, "Item": self.item(record)}}

    def save(self, record: PlanRecord) -> None:
        what = f"PutItem plan {record.cluster}/{record.key}"
        try:
            self.client.put_item(TableName=self.table, Item=self.item(record))
        except SDK_ERRORS as exc:
            raise map_aws_error(exc, what) from exc

    def get(self, cluster: str, key: str) -> PlanRecord | None:
        what = f"GetItem plan {cluster}/{key}"
        try:
            resp = self.client.get_item(
                TableName=self.table,
                Key={"cluster": {"S": cluster}, "planned_at": {"S": key}},
                ConsistentRead=True,
            )
        except SDK_ERRORS as exc:
            raise map_aws_error(exc, what) from exc
        item = resp.get("Item")
        return _record(item) if item else None

    def list(self, cluster: str, limit: int = 50) -> list[PlanRecord]:
        """The cluster's newest plans first (re-plans included)."""
        what = f"Query plans of {cluster}"
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "#c = :c",
            "ExpressionAttributeNames": {"#c": "cluster"},
            "ExpressionAttributeValues": {":c": {"S": cluster}},
            "ScanIndexForward": False,
            "Limit": limit,
        }
        try:
            resp = self.client.query(**kwargs)
        except SDK_ERRORS as exc:
            raise map_aws_error(exc, what) from exc
        return [_record(i) for i in resp.get("Items", [])]


def _slimmed(plan: Mapping[str, Any], size: int) -> bytes:
    """The plan compressed without its per-pod and per-node detail, cut until it fits
    :data:`COMPRESSED_LIMIT`: first ``pending`` and ``kept``; then the pods each entry of every list names
    (a burst's ``scale_up`` names every pod it launches for), their count kept; last, every list but its
    length. The record is an audit copy: one DynamoDB refuses (400 KB) would fail the state's commit."""
    slim: dict[str, Any] = {k: v for k, v in plan.items() if k not in ("pending", "kept")}
    slim["truncated"] = f"pending and kept left out: {size} bytes compressed"
    blob = zlib.compress(json.dumps(slim, separators=(",", ":")).encode(), 6)
    if len(blob) > COMPRESSED_LIMIT:
        for key, value in list(slim.items()):
            if isinstance(value, list):
                slim[key] = [_without_pods(e) for e in value]
        slim["truncated"] += "; the pods each entry names left out (pods_count)"
        blob = zlib.compress(json.dumps(slim, separators=(",", ":")).encode(), 6)
    if len(blob) > COMPRESSED_LIMIT:
        slim = {
            k: (f"{len(v)} entries left out" if isinstance(v, list) and v else v) for k, v in slim.items()
        }
        slim["truncated"] += "; every list left out"
        blob = zlib.compress(json.dumps(slim, separators=(",", ":")).encode(), 6)
    return blob


def _without_pods(entry: Any) -> Any:
    if isinstance(entry, dict) and isinstance(entry.get("pods"), list):
        return {**{k: v for k, v in entry.items() if k != "pods"}, "pods_count": len(entry["pods"])}
    return entry


def _record(item: Mapping[str, Any]) -> PlanRecord:
    if "plan" in item:
        plan = json.loads(item["plan"]["S"])
    else:
        plan = json.loads(zlib.decompress(bytes(item["plan_z"]["B"])))
    created = parse_time(item["created_at"]["S"]) or datetime.fromtimestamp(0, UTC)
    return PlanRecord(
        cluster=item["cluster"]["S"],
        plan_id=item["plan_id"]["S"],
        snapshot_key=item["snapshot_key"]["S"],
        fingerprint=item.get("fingerprint", {}).get("S", ""),
        created_at=created,
        plan=plan,
        kind=item.get("kind", {}).get("S", "plan"),
        sort_key=item["planned_at"]["S"],
        state_version=int(item.get("state_version", {}).get("N", "0")),
        executions=tuple(e["S"] for e in item.get("executions", {}).get("L", [])),
        summary={k: int(v["N"]) for k, v in item.get("summary", {}).get("M", {}).items()},
        groups=tuple(json.loads(item["groups"]["S"])) if "groups" in item else None,
    )
