"""The simulator asks Spillway to plan at the ticks where production's plan would change.

Production plans on every stored snapshot, and observe stores one whenever the fingerprint changes, which
counts each node's bound pods and their requests (spillway.model.snapshot.fingerprint, _bound_pods): a pod
starting on a busy node is such a change. A consolidating plan judges busy nodes by their pods (the
scale-down candidate taint marks a busy node whose every pod may move: spillway.planner.softtaint), so
the replay must wake it then too, as it already does when room frees on a busy node. The plan also
changes when a timer's edge passes though nothing happens: an idle node leaving its launch delay is then
kept by its idle timer alone, and marked; a drain's claim on its node lapses."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sim_world import gpu_world

from spillway.config import PlannerConfig
from spillway.model.state import NodeState, RoomState, State
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


def _gpu_world(config: PlannerConfig, scoring: str, *, max_size: int) -> World:
    """One p3.16xlarge group (0 to ``max_size`` nodes) booting in 120 s, scheduled with ``scoring``."""
    return World(
        (GroupSpec("gpu", "us-east-1", "p3.16xlarge", 0, max_size),),
        epoch=datetime(2026, 1, 1, tzinfo=UTC),
        boot_seconds=120,
        scheduler=SchedulerConfig(scoring),
        reserve=config.node_reserve.reserve(),
        cluster="sim",
        track_infos=True,  # what SpillwayPolicy reads, as sim.run sets it
    )


@pytest.mark.parametrize(("recent", "lifted"), [(0, 3000), (30, 3000 + 1800)])
def test_a_pod_that_may_not_move_starting_on_a_marked_node_lifts_its_mark_when_it_is_no_longer_recent(
    recent: int, lifted: int
) -> None:
    # t=0: a movable 1-GPU job arrives; a node is launched, Ready at 120, where it starts. The node's
    # every pod may move, so the consolidating plan marks it (PreferNoSchedule candidate taint). At
    # 3000 a 1-GPU job that may not move arrives and starts there at once (the only node: the taint
    # only prefers). The node's pods no longer all may move, and its mark stays only while the pod that
    # may not move is recent (consolidation_recent_pods_minutes, planner.softtaint): with 0 the plan
    # at the tick of 3000 lifts it, with 30 the plan at 4800, though nothing happens in the world then.
    # Before, nothing woke the plan until the first job ended at 36,120, and for those nine hours the
    # scheduler steered arrivals away from a node that production would have unmarked.
    config = PlannerConfig(
        cluster="sim",
        consolidation="when-underutilized",
        scale_down_idle_minutes=5,
        scale_down_delay_after_launch_minutes=5,
        consolidation_recent_pods_minutes=recent,
    )
    world = _gpu_world(config, "most-allocated", max_size=10)
    policy = Recording(config)
    jobs = [
        Job(0, "movable", "ml", 0, HOURS_10, 0, (one_gpu(),), movable=True),
        Job(1, "stays", "ml", 3000, HOURS_10, 0, (one_gpu(),), movable=False),
    ]
    replay(jobs, policy, world, INTERVAL)
    assert policy.taints[0] == (120, True)
    assert policy.taints[1] == (lifted, False)


def test_an_idle_node_is_marked_once_its_launch_delay_ends_though_its_idle_timer_runs_on() -> None:
    # Default configuration: 10 idle minutes, 10 minutes after launch before scale-down. A 1-GPU job
    # arrives at 0; its node is launched, Ready (joined) at 120; the job runs 120-300. From 300 the node
    # is idle. Until 720 (joined + 10 min) its youth keeps it (launch delay), which is not marked; from
    # 720 only the idle timer keeps it (idle-below-threshold), which is: the plan at 720 marks it, and
    # the plan at 900 (idle + 10 min) drains it. Before, the replay woke the plan only when the node
    # could go (the later of the two, 900), so the node was never marked: arrivals in between landed on
    # it (least-allocated scoring puts them on the emptiest node) and its idle timer started again.
    config = PlannerConfig(cluster="sim")
    world = _gpu_world(config, "least-allocated", max_size=10)
    policy = Recording(config)
    jobs = [
        Job(0, "short", "ml", 0, 180, 0, (one_gpu(),)),
        Job(1, "later", "ml", 5000, 600, 0, (one_gpu(),)),  # keeps the replay going
    ]
    replay(jobs, policy, world, INTERVAL)
    assert policy.taints[0] == (720, True)
    assert world.counters.nodes_terminated >= 1


def test_marks_past_the_cap_of_one_plan_are_set_by_the_next_plan_a_tick_later() -> None:
    # Thirteen Ready nodes at 0 (no launch delay), and a 1-GPU job arriving at 0 that runs on one of
    # them for 10 hours. The plan at 0 finds twelve idle nodes kept by their idle timer (10 minutes):
    # it marks ten, max_bulk_soft_taint_count's cap. Its marks change the Nodes, so production's next
    # snapshot differs and the next plan, a minute later, marks the other two. Before, a plan whose
    # only acts were marks woke nothing: the next plan was the idle timer's at 600, which drained them
    # all, so two idle nodes went unmarked for the ten minutes.
    config = PlannerConfig(cluster="sim", scale_down_delay_after_launch_minutes=0)
    world = _gpu_world(config, "most-allocated", max_size=20)
    world.preprovision("gpu", 13)
    policy = Recording(config)
    replay([Job(0, "long", "ml", 0, HOURS_10, 0, (one_gpu(),))], policy, world, INTERVAL)
    marked = [t for t, present in policy.taints if present]
    assert config.max_bulk_soft_taint_count == 10
    assert marked == [0] * 10 + [60] * 2


@pytest.mark.parametrize("claim", ["drain", "room"])
def test_a_drain_s_claim_lapsing_wakes_the_plan(claim: str) -> None:
    # A plan's drain claims its node for drain_claim_minutes (20) from draining_since (planner.scaledown:
    # claimed_at), and a make room holds its node for its pods as long from the room's since
    # (planner.makeroom: _still_draining). When the claim lapses the plan may mark, drain or give the
    # node again, though nothing in the world changed: production's plan, running each minute, sees
    # it then. At 900, of a claim from 600 (the node idle since 0, its own timers long past), the next
    # wakeup is 600 + 1200. Before, no wakeup: the plan waited for an unrelated event.
    config = PlannerConfig(cluster="sim")
    world = gpu_world(1)
    node = next(iter(world.nodes))
    policy = SpillwayPolicy(config)
    since = world.at(600)
    if claim == "drain":
        policy.state = State(nodes={node: NodeState(idle_since=world.at(0), draining_since=since)})
    else:
        policy.state = State(rooms={node: RoomState(pods=("ml/job-1-0",), since=since)})
    world.t = 900
    assert policy.wakeup(world) == 600 + 20 * 60
