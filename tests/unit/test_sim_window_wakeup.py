"""The simulator asks Spillway to plan at the config's window edges, though nothing in the world changes.

A buffer that opens at 02:00 while the cluster sits idle is acted on at 02:00 (within one interval), not
at the next unrelated event (here the only job's end, hours later)."""

from __future__ import annotations

from datetime import UTC, datetime

from spillway.config import PlannerConfig
from spillway.sim.engine import replay
from spillway.sim.policies import SpillwayPolicy
from spillway.sim.trace import Job
from spillway.sim.world import GroupSpec, SchedulerConfig, World

EPOCH = datetime(2026, 11, 2, tzinfo=UTC)  # a Monday, 00:00 UTC
INTERVAL = 60
OPENS, CLOSES = 2 * 3600, 4 * 3600  # the buffer's window, 02:00-04:00 UTC
JOB_SECONDS = 10 * 3600
# A whole p3.16xlarge: eight GPUs' shares of its template (sim.trace.gpu_share: 7.9 CPU, 56 GiB a GPU).
GPU_NODE_JOB = {"cpu": 7900 * 8, "memory": 56 * 2**30 * 1000 * 8, "nvidia.com/gpu": 8000, "pods": 1000}


class Recording(SpillwayPolicy):
    """Spillway, noting the group's desired capacity after each decision."""

    def __init__(self, config: PlannerConfig) -> None:
        super().__init__(config)
        self.log: list[tuple[int, int]] = []

    def decide(self, world: World) -> None:
        super().decide(world)
        self.log.append((world.t, world.groups["gpu-east"].desired))


def run(buffer_window: dict[str, object]) -> Recording:
    config = PlannerConfig(
        cluster="sim",
        scale_down_idle_minutes=5,
        buffers=[{"name": "serving", "pod": {"cpu": "1", "nvidia.com/gpu": "1"}, "replicas": 1,
                  "windows": [buffer_window]}],
    )  # fmt: skip
    world = World(
        (GroupSpec("gpu-east", "us-east-1", "p3.16xlarge", 0, 10),),
        epoch=EPOCH,
        boot_seconds=120,
        scheduler=SchedulerConfig("most-allocated"),
        reserve=config.node_reserve.reserve(),
        seed=0,
        cluster="sim",
        track_infos=True,  # what SpillwayPolicy reads, as sim.run sets it
    )
    policy = Recording(config)
    replay([Job(1, "job-1", "ml", 0, JOB_SECONDS, 0, (GPU_NODE_JOB,))], policy, world, INTERVAL)
    return policy


def first_time_desired(policy: Recording, desired: int, after: int = 0) -> int:
    return next(t for t, d in policy.log if d == desired and t >= after)


def test_a_buffer_opening_while_the_world_is_idle_is_acted_on_at_its_edge() -> None:
    policy = run({"start": "02:00", "end": "04:00"})
    assert first_time_desired(policy, 1) == 0  # the job's node, at once
    # the buffer's node: launched at the window's opening, though nothing else happened then
    launched = first_time_desired(policy, 2)
    assert OPENS <= launched < OPENS + INTERVAL
    # and given back after it closes (idle for scale_down_idle_minutes), long before the job ends
    back = first_time_desired(policy, 1, after=launched)
    assert CLOSES <= back <= CLOSES + 5 * 60 + INTERVAL
    assert back < JOB_SECONDS


def test_an_edge_in_a_named_zone_is_its_utc_instant() -> None:
    policy = run({"start": "03:00", "end": "05:00", "timezone": "Europe/Berlin"})  # UTC+1 in November
    assert OPENS <= first_time_desired(policy, 2) < OPENS + INTERVAL
