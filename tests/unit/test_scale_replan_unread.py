"""The overflow re-plan of a scale-up execution when one region's Auto Scaling groups cannot be read.

After a failed launch, ``next_round`` re-plans on the live groups of every region. One region's failed
read (throttled, unavailable, refused) raised out of the step: the execution ended ``ReplanFailed``
and the pods waited for the next plan, though another region could take them. observe stores such a
region unread with its groups carried from their last read (spillway.observe.carried_groups); the
re-plan now reads the groups the same way, from the snapshot it plans on.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from fakes import FakeCluster, FakeLedger, FakeSnapshots, UnreadableCloud
from plan_world import NOW, World

from spillway.act.deadline import NO_DEADLINE, Deadline
from spillway.act.planning import PlanSettings
from spillway.act.scale import ScaleSteps
from spillway.config import PlannerConfig
from spillway.errors import AwsThrottled
from spillway.model.act import StoredState
from spillway.model.cluster import RegionUnread
from spillway.model.snapshot import Snapshot
from spillway.model.state import GroupState, State
from spillway.planner import codes
from spillway.planner.context import iso
from spillway.ports import Cloud

EAST, WEST = "us-east-1", "us-west-2"
REGION = "topology.kubernetes.io/region"


def replan(*failing: str, carried: timedelta | None = None) -> tuple[dict[str, Any], FakeLedger]:
    """Round 1 of a scale-up backed gpu-east off for capacity (two pods pending, gpu-west empty, and
    one pod only us-east-1 may run); the re-plan runs 90 s after the snapshot, with the group reads of
    ``failing`` regions failing. ``carried``: the snapshot had us-east-1 unread already, its groups
    carried from a read that long before the re-plan."""
    w = World(regions=(EAST, WEST))
    w.group("gpu-east", "g5.xlarge", region=EAST)
    w.group("gpu-west", "g5.xlarge", region=WEST)
    w.gpu_pods("train", 2, gpus=1, cpu="2", memory="8Gi")
    w.gpu_pods("pinned", 1, gpus=1, cpu="2", memory="8Gi", node_selector={REGION: EAST})
    cluster, groups, _, _ = w.parsed()
    now = NOW + timedelta(seconds=90)
    if carried is not None:
        cluster = replace(cluster, regions_unread=(RegionUnread(EAST, now - carried, "AwsThrottled: x"),))
        groups = [replace(g, read_at=now - carried) if g.region == EAST else g for g in groups]
    snapshots = FakeSnapshots()
    ref = snapshots.add(Snapshot.build(cluster, groups, NOW))
    cloud = UnreadableCloud(*failing)
    cloud.node_groups_by_region = {
        r: [replace(g, read_at=None) for g in groups if g.region == r] for r in (EAST, WEST)
    }
    steps, ledger = east_backed_off(cloud, snapshots, ref.key, now)
    backed_off = {"group": "gpu-east", "region": EAST, "outcome": "backed_off", "new_nodes": 3}
    out = steps.next_round({"action": "next_round", "cluster": "ml", "plan_id": "p1", "snapshot_key": ref.key,
                            "round": 1, "max_rounds": 3, "rounds": [], "results": [backed_off]})  # fmt: skip
    return out, ledger


def east_backed_off(
    cloud: Cloud, snapshots: FakeSnapshots, key: str, now: datetime, deadline: Deadline = NO_DEADLINE
) -> tuple[ScaleSteps, FakeLedger]:
    """The scale steps of a re-plan at ``now``, and their ledger: the state (version 2) has gpu-east backed
    off for capacity, and the plan's snapshot is ``key``."""
    ledger = FakeLedger()
    east_off = GroupState(group="gpu-east", region=EAST, backoff_until=now + timedelta(minutes=5),
                          reason="us-east-1/gpu-east: We currently do not have sufficient g5.xlarge capacity")  # fmt: skip
    ledger.stored = StoredState(
        state=State(groups={"us-east-1/gpu-east": east_off}), version=2, snapshot_key=key, plan_id="p1"
    )
    settings = PlanSettings(planner=PlannerConfig(cluster="ml", regions=(EAST, WEST)), poll_seconds=1)
    steps = ScaleSteps(kube=FakeCluster(), aws=cloud, ledger=ledger, snapshots=snapshots, settings=settings,
                       clock=lambda: now, deadline=deadline)  # fmt: skip
    return steps, ledger


def pending(ledger: FakeLedger) -> dict[str, tuple[str, str]]:
    """The re-plan's pending pods: pod -> (code, reason)."""
    (record,) = ledger.plans.values()
    return {p["pod"]: (p["code"], p["reason"]) for p in record.plan["pending"]}


def grown(out: dict[str, Any]) -> list[tuple[str, str, int, int]]:
    return [
        (g["region"], g["group"], g.get("from"), g.get("to")) for g in out["groups"] if g.get("grow", True)
    ]


def test_the_replan_overflows_when_the_backed_off_groups_region_cannot_be_read() -> None:
    out, ledger = replan(EAST)

    assert grown(out) == [(WEST, "gpu-west", 0, 2)], out
    assert out["round"] == 2 and out["done"] is False
    assert ledger.stored.state.raises["us-west-2/gpu-west"].to == 2


def test_the_replan_with_the_overflow_region_unread_launches_nothing_there_and_ends() -> None:
    out, ledger = replan(WEST)

    assert out["groups"] == [] and out["done"] is True, out
    assert out["result"] == "re-plan found nothing more to launch"
    assert "us-west-2/gpu-west" not in ledger.stored.state.raises


def test_the_replan_carries_the_snapshots_unread_mark_and_read_time_as_observe_does() -> None:
    """The snapshot had us-east-1 unread already: the re-plan keeps when it was last read and since when
    it is unread; past max_node_provision_minutes (15) from that read its groups are left out, as
    observe leaves them out."""
    out, ledger = replan(EAST, carried=timedelta(minutes=10))

    assert grown(out) == [(WEST, "gpu-west", 0, 2)], out
    code, reason = pending(ledger)["default/pinned-0"]
    assert code == codes.REGION_UNREAD
    read = iso(NOW + timedelta(seconds=90) - timedelta(minutes=10))
    assert f"as read at {read}" in reason and f"since {read}" in reason

    _, ledger = replan(EAST, carried=timedelta(minutes=16))
    assert pending(ledger)["default/pinned-0"][0] != codes.REGION_UNREAD  # no group of us-east-1 left


def test_every_region_unread_still_fails_the_replan() -> None:
    with pytest.raises(AwsThrottled):
        replan(EAST, WEST)
