"""Observe waits for a region's Auto Scaling read by the re-plan's rule: while the snapshot can still be
built and stored within the invocation (spillway.model.calltime, OBSERVE_ROOM_SECONDS).

Its wait had no bound but the observe function's Timeout: a region whose endpoint hung ended every
invocation with no snapshot stored, the other regions' reads lost with it, and every plan stopped once
the last snapshot grew too old, where a region whose read fails is only unread, its groups carried.
"""

from __future__ import annotations

import contextlib
import io
import threading
import time
from collections.abc import Iterator, Mapping
from datetime import datetime
from types import SimpleNamespace
from typing import Any

import pytest
from fakes import FakeCloud, FakeCluster, FakeSnapshots
from plan_world import World
from test_observe_gang_reads import CLUSTER, INSTANCE, observe_app

from spillway.config import PlannerConfig
from spillway.local import objects as o
from spillway.model.calltime import OBSERVE_ROOM_SECONDS, STEP_MARGIN_SECONDS
from spillway.model.nodegroup import NodeGroup
from spillway.observe import ObserveConfig

EAST, WEST = "us-east-1", "us-west-2"


class HungIn(FakeCloud):
    """us-west-2's Auto Scaling endpoint hangs (until ``release``, 3 s at most)."""

    def __init__(self) -> None:
        super().__init__(regions=(EAST, WEST), cluster=CLUSTER)
        self.release = threading.Event()

    def node_groups_in(
        self, region: str, reserve: Mapping[str, int], now: datetime | None = None
    ) -> list[NodeGroup]:
        if region == WEST:
            self.release.wait(timeout=3)
        return super().node_groups_in(region, reserve, now)


@pytest.fixture
def cloud() -> Iterator[HungIn]:
    made = HungIn()
    w = World(regions=(EAST, WEST))
    w.group("gpu-east", "g5.xlarge", region=EAST)
    w.group("gpu-west", "g5.xlarge", region=WEST)
    _, groups, _, _ = w.parsed()
    made.node_groups_by_region = {r: [g for g in groups if g.region == r] for r in (EAST, WEST)}
    yield made
    made.release.set()


def test_a_hung_region_is_unread_and_the_snapshot_stored_within_the_invocation(
    cloud: HungIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = observe_app()
    snapshots = FakeSnapshots()
    kube = FakeCluster([o.node("ip-10-0-1-10.ec2.internal", instance=INSTANCE, zone="us-east-1a")], [])
    clients = SimpleNamespace(
        config=SimpleNamespace(cluster_name=CLUSTER, observe_window_seconds=0, planner=PlannerConfig()),
        kube=kube,
        aws=cloud,
        snapshots=snapshots,
        observe_config=lambda: ObserveConfig(cluster=CLUSTER),
    )
    monkeypatch.setattr(app, "get_clients", lambda: clients)
    started = time.monotonic()
    # the invocation has 1 s left for the regions' reads, past its margin and the snapshot's room
    budget_ms = (STEP_MARGIN_SECONDS + OBSERVE_ROOM_SECONDS + 1.0) * 1000
    context = SimpleNamespace(
        function_name=f"spillway-{CLUSTER}-observe",
        memory_limit_in_mb=512,
        invoked_function_arn="",
        aws_request_id="0f6a1b2c-3d4e-5f60-7182-93a4b5c6d7e8",
        get_remaining_time_in_millis=lambda: int(budget_ms - (time.monotonic() - started) * 1000),
    )

    with contextlib.redirect_stdout(io.StringIO()):
        out: Any = app.handler({}, context)

    assert time.monotonic() - started < 2.5  # the hung read was not waited for (it would end at 3 s)
    assert len(out["written"]) == 1
    stored = snapshots.latest(CLUSTER)
    assert stored is not None
    assert [u.region for u in stored.cluster.regions_unread] == [WEST]
    assert {g.region for g in stored.groups} == {EAST}
    # the next invocation thaws the hung read: cut, it reads nothing more
    cloud.release.set()
    for thread in threading.enumerate():
        if thread.name.startswith("observe"):
            thread.join(timeout=5)
    assert (WEST,) not in cloud.called("node_groups_in")
