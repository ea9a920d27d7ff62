"""A simulated world of one GPU group with nodes already running, for the simulator's unit tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from spillway.sim.world import GroupSpec, SchedulerConfig, World

GPU = GroupSpec("gpu", "us-east-1", "p3.16xlarge", 0, 10)
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def gpu_world(
    nodes: int, *, group: GroupSpec = GPU, scoring: str = "most-allocated", **options: Any
) -> World:
    """``nodes`` Ready nodes of ``group`` (8-GPU p3.16xlarge by default), 120 s boots; ``options`` go
    to :class:`World` (``restart_penalty``, ``drain_seconds``, ``seed``, ...)."""
    world = World((group,), epoch=EPOCH, boot_seconds=120, scheduler=SchedulerConfig(scoring), **options)
    world.preprovision(group.name, nodes)
    return world
