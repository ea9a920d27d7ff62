"""The simulator asks a consolidating Spillway to plan when a pod starts on a node that is already busy.

Production plans on every stored snapshot, and observe stores one whenever the fingerprint changes, which
counts each node's bound pods and their requests (spillway.model.snapshot.fingerprint, _bound_pods): a pod
starting on a busy node is such a change. A consolidating plan judges busy nodes by their pods (the
scale-down candidate taint marks a busy node whose every pod may move: spillway.planner.softtaint), so
the replay must wake it then too, as it already does when room frees on a busy node."""

from __future__ import annotations

from datetime import UTC, datetime

from spillway.config import PlannerConfig
from spillway.sim.engine import replay
from spillway.sim.policies import SpillwayPolicy
from spillway.sim.trace import Job
from spillway.sim.world import GroupSpec, SchedulerConfig, World

GIB = 2**30 * 1000
INTERVAL = 60
HOURS_10 = 36000


def one_gpu() -> dict[str, int]:
    """A 1-GPU pod with its share of a p3.16xlarge (sim.trace.gpu_share: 7.9 CPU, 56 GiB)."""
    return {"cpu": 7900, "memory": 56 * GIB, "nvidia.com/gpu": 1000, "pods": 1000}


class Recording(SpillwayPolicy):
    """Spillway, noting each candidate taint the world sets or lifts, with its time."""

    def __init__(self, config: PlannerConfig) -> None:
        super().__init__(config)
        self.taints: list[tuple[int, bool]] = []

    def decide(self, world: World) -> None:
        before = {name: node.candidate for name, node in world.nodes.items()}
        super().decide(world)
        for name, node in world.nodes.items():
            if before.get(name, False) != node.candidate:
                self.taints.append((world.t, node.candidate))


def test_a_pod_that_may_not_move_starting_on_a_marked_node_lifts_its_mark_at_the_next_tick() -> None:
    # t=0: a movable 1-GPU job arrives; a node is launched, Ready at 120, where it starts. The node's
    # every pod may move, so the consolidating plan marks it (PreferNoSchedule candidate taint). At
    # 3000 a 1-GPU job that may not move arrives and starts there at once (the only node: the taint
    # only prefers). The node's pods no longer all may move: the plan at the tick of 3000 lifts the
    # mark. Before, nothing woke the plan until the first job ended at 36,120, and for those nine hours
    # the scheduler steered arrivals away from a node that production would have unmarked in a minute.
    config = PlannerConfig(
        cluster="sim",
        consolidation="when-underutilized",
        scale_down_idle_minutes=5,
        scale_down_delay_after_launch_minutes=5,
    )
    world = World(
        (GroupSpec("gpu", "us-east-1", "p3.16xlarge", 0, 10),),
        epoch=datetime(2026, 1, 1, tzinfo=UTC),
        boot_seconds=120,
        scheduler=SchedulerConfig("most-allocated"),
        reserve=config.node_reserve.reserve(),
        cluster="sim",
        track_infos=True,  # what SpillwayPolicy reads, as sim.run sets it
    )
    policy = Recording(config)
    jobs = [
        Job(0, "movable", "ml", 0, HOURS_10, 0, (one_gpu(),), movable=True),
        Job(1, "stays", "ml", 3000, HOURS_10, 0, (one_gpu(),), movable=False),
    ]
    replay(jobs, policy, world, INTERVAL)
    assert policy.taints[0] == (120, True)
    assert policy.taints[1] == (3000, False)
