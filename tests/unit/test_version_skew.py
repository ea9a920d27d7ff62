"""Data a newer build of Spillway stored, read by an older one (a rolled-back deploy; ``sam deploy``
updating the functions one at a time): a field this build does not know is ignored and named once in
a warning, never a refusal; a known field with a bad value is still refused, naming the field."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from examples import EXAMPLE

from spillway.adapters.state_store import StateStore
from spillway.adapters.store import SnapshotStore
from spillway.cli import main
from spillway.errors import SnapshotError, StateCorrupt
from spillway.model.buffer import BufferInfo
from spillway.model.nodegroup import NodeGroup
from spillway.model.state import State
from spillway.model.stored import PATH_LIMIT, PATHS_SHOWN, describe_unknown, load_stored
from spillway.model.windows import TimeWindow

NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
POOL = "spot/us-east-1a/p3.16xlarge"


def newer_state() -> dict[str, Any]:
    """A state as a newer build writes it: known sections with fields added at every depth."""
    return {
        "nodes": {"n1": {"idle_since": "2026-11-02T11:00:00Z", "idle_reason": "empty"}},
        "groups": {"gpu": {"backoff_until": "2026-11-02T12:30:00Z", "reason": "capacity", "zone": "a"}},
        "pools": {
            POOL: {"backoff_until": "2026-11-02T12:30:00Z", "reason": "gang", "nodes": 8, "fleet": "f"}
        },
        "templates": {
            "gpu": {
                "instance_type": "p3.16xlarge",
                "node": "n1",
                "learned_at": "2026-11-02T11:00:00Z",
                "allocatable": {"cpu": 64000, "memory": 1000},
                "taints": [{"key": "gpu", "effect": "NoSchedule", "since": "x"}],
            }
        },
        "leases": {"x": {"holder": "y"}},
    }


UNKNOWN = [
    "nodes.n1.idle_reason",
    "groups.gpu.zone",
    f"pools.{POOL}.fleet",
    "templates.gpu.taints.0.since",
    "leases",
]


class FakeDynamo:
    """Just the Query the state store's load makes, answering the given items."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items

    def query(self, **_: Any) -> dict[str, Any]:
        return {"Items": self.items}


def state_item(wire: dict[str, Any], *, compressed: bool = False) -> dict[str, Any]:
    text = json.dumps(wire)
    body = {"state_z": {"B": zlib.compress(text.encode())}} if compressed else {"state": {"S": text}}
    return {"cluster": {"S": "ml"}, "item": {"S": "state"}, "version": {"N": "7"}, **body}


def load(wire: dict[str, Any], *, compressed: bool = False) -> State:
    client: Any = FakeDynamo([state_item(wire, compressed=compressed)])
    return StateStore(client, "state").load("ml", NOW).state


@pytest.mark.parametrize("compressed", [False, True])
def test_a_state_item_a_newer_build_wrote_loads_and_names_what_it_ignored(
    compressed: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        state = load(newer_state(), compressed=compressed)
    assert state.pools[POOL].nodes == 8 and state.pools[POOL].reason == "gang"
    assert state.nodes["n1"].idle_since == datetime(2026, 11, 2, 11, 0, tzinfo=UTC)
    assert state.templates["gpu"].taints[0].key == "gpu"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings  # named once, in one line
    assert "state of ml" in warnings[0]
    for path in UNKNOWN:
        assert path in warnings[0]
    assert "empty" not in warnings[0] and "holder" not in warnings[0]  # names, never values


def test_a_state_this_build_knows_whole_loads_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    wire = State.model_validate(_known(newer_state())).to_wire()
    with caplog.at_level(logging.WARNING):
        assert load(wire).to_wire() == wire
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest.mark.parametrize(
    ("section", "key", "field", "bad"),
    [
        ("pools", POOL, "nodes", 0),
        ("pools", POOL, "backoff_until", "soon"),
        ("nodes", "n1", "idle_since", "yesterday"),
    ],
)
def test_a_known_field_with_a_bad_value_is_still_refused_naming_it(
    section: str, key: str, field: str, bad: object
) -> None:
    wire = newer_state()
    wire[section][key][field] = bad
    # pydantic quotes a key with a dot in it: pools.`spot/us-east-1a/p3.16xlarge`.nodes
    named = rf"{section}\.`?{re.escape(key)}`?\.{field}\b"
    with pytest.raises(StateCorrupt, match=named):
        load(wire)


def test_a_back_off_item_a_newer_build_wrote_merges_and_names_what_it_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    item = {
        "cluster": {"S": "ml"},
        "item": {"S": f"backoff#pool#{POOL}"},
        "backoff_until": {"S": "2026-11-02T12:30:00Z"},
        "reason": {"S": "gang refused"},
        "region": {"S": "us-east-1"},
        "expires_at": {"N": "1793622600"},
        "nodes": {"N": "8"},
        "fleet_id": {"S": "fleet-0abc"},
    }
    client: Any = FakeDynamo([item])
    with caplog.at_level(logging.WARNING):
        state = StateStore(client, "state").load("ml", NOW).state
    assert state.pools[POOL].nodes == 8 and state.pools[POOL].reason == "gang refused"
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"backoff#pool#{POOL}.fleet_id" in warning and "fleet-0abc" not in warning


def test_the_unknown_fields_are_named_with_a_bounded_length() -> None:
    paths = [f"nodes.{'n' * 300}.x{i}" for i in range(PATHS_SHOWN + 5)]
    line = describe_unknown(paths)
    assert line.endswith("(and 5 more)")
    assert all(len(part) <= PATH_LIMIT for part in line.removesuffix(" (and 5 more)").split(", "))
    assert len(line) < (PATH_LIMIT + 2) * PATHS_SHOWN + 20


def test_load_stored_keeps_what_it_knows_and_lists_the_rest_in_order() -> None:
    state, unknown = load_stored(State, newer_state())
    assert list(unknown) == UNKNOWN
    assert state == State.model_validate(_known(newer_state()))


def _known(wire: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(wire))
    out.pop("leases")
    del out["nodes"]["n1"]["idle_reason"], out["groups"]["gpu"]["zone"], out["pools"][POOL]["fleet"]
    del out["templates"]["gpu"]["taints"][0]["since"]
    return out


def test_the_closed_state_model_itself_still_refuses_an_unknown_field() -> None:
    """Only the storage boundary is tolerant: building a State in Spillway's own code stays strict."""
    with pytest.raises(ValueError, match="leases"):
        State.model_validate(newer_state())


def test_spillway_plan_reads_a_state_file_a_newer_build_wrote_and_warns_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "state.json"
    path.write_text(json.dumps(newer_state()))
    args = list(EXAMPLE)
    args[args.index("--state") + 1] = str(path)
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "scale_up" in json.loads(out)
    assert err.count("\n") == 1 and str(path) in err
    for field in UNKNOWN:
        assert field in err


def test_spillway_plan_still_refuses_a_bad_known_field_in_a_state_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wire = newer_state()
    wire["pools"][POOL]["nodes"] = "eight"
    path = tmp_path / "state.json"
    path.write_text(json.dumps(wire))
    args = list(EXAMPLE)
    args[args.index("--state") + 1] = str(path)
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"pools.{POOL}.nodes" in err


# --- the snapshot: a newer observe writes it, an older planner reads it (sam deploy, one at a time) ---


class FakeSnapshots:
    """Just the PutItem the snapshot store writes with and the GetItem it reads with."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}

    def put_item(self, *, Item: dict[str, Any], **_: Any) -> None:
        self.items[Item["taken_at"]["S"]] = Item

    def get_item(self, *, Key: dict[str, Any], **_: Any) -> dict[str, Any]:
        return {"Item": self.items[Key["taken_at"]["S"]]}


def stored_snapshot(build_snapshot: Any, edit: Callable[[dict[str, Any]], None]) -> tuple[SnapshotStore, str]:
    """A snapshot with a group and a configured buffer with a window, as a newer observe would store
    it after ``edit`` changed its JSON document."""
    buffer = BufferInfo(namespace="", name="warm", replicas=1, windows=(TimeWindow(days=("mon",)),))
    snap = build_snapshot(3, 6, pending=2, groups=[group()])
    snap = dataclasses.replace(snap, cluster=dataclasses.replace(snap.cluster, buffers=(buffer,)))
    doc = snap.to_dict()
    edit(doc)
    blob = zlib.compress(json.dumps(doc).encode())
    client: Any = FakeSnapshots()
    store = SnapshotStore(client, "snapshots")
    key = store.save(snap)
    item = client.items[key]
    item["data"], item["sha256"] = {"B": blob}, {"S": hashlib.sha256(blob).hexdigest()}
    return store, key


def group() -> NodeGroup:
    return NodeGroup(
        name="gpu",
        region="us-east-1",
        min_size=0,
        max_size=10,
        desired=1,
        instance_type="p3.2xlarge",
        template=None,
    )


def add_newer_fields(doc: dict[str, Any]) -> None:
    doc["heartbeat"] = 3
    doc["cluster"]["pods"][1]["preemptor"] = "x"
    doc["cluster"]["nodes"][0]["zone_id"] = "use1-az1"
    doc["cluster"]["buffers"][0]["w"][0]["holidays"] = ["2026-12-25"]
    doc["groups"][0]["lifecycle_hooks"] = ["drain"]


def test_a_snapshot_a_newer_observe_wrote_loads(build_snapshot: Any) -> None:
    """A buffer window's model is closed: a window field a newer observe added refused the whole
    snapshot in an older planner (sam deploy updates the functions one at a time). Unknown keys of the
    other records were always skipped; the window's now are too."""
    store, key = stored_snapshot(build_snapshot, add_newer_fields)
    snap = store.get("cluster", key)
    assert snap.cluster.buffers[0].windows[0].days == ("mon",)
    assert len(snap.cluster.pods) == 6 and snap.groups[0].name == "gpu"


def test_a_known_snapshot_field_with_a_bad_value_is_still_refused_naming_it(build_snapshot: Any) -> None:
    def bad_window(doc: dict[str, Any]) -> None:
        doc["cluster"]["buffers"][0]["w"][0]["days"] = ["someday"]

    store, key = stored_snapshot(build_snapshot, bad_window)
    with pytest.raises(SnapshotError, match="days"):
        store.get("cluster", key)


def test_a_make_room_recorded_by_the_release_before_moved_loads_and_is_written_back_as_it_was(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """State ``rooms`` gained ``moved`` (the pods a make-room drain moves). A room the release before wrote
    has none: it loads with no warning, reads as "the whole node leaves" (``moved`` empty), and is written
    back without the field; a room with ``moved`` keeps it through a load and a write."""
    before = {
        "nodes": {},
        "groups": {},
        "rooms": {"n1": {"pods": ["ml/big-0"], "since": "2026-11-02T11:58:00Z"}},
    }
    with caplog.at_level(logging.WARNING):
        state = load(before)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert state.rooms["n1"].moved == () and state.rooms["n1"].pods == ("ml/big-0",)
    assert state.to_wire()["rooms"] == before["rooms"]

    after = {**before, "rooms": {"n1": {**before["rooms"]["n1"], "moved": ["ml/web-0", "ml/web-1"]}}}
    assert load(after).to_wire()["rooms"] == after["rooms"]
