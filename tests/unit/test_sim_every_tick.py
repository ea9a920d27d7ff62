"""The replay plans only at ticks where production's plan would change (sim.engine, SpillwayPolicy.wakeup);
a replay that plans at every tick must come out the same, act for act.

Production plans on every stored snapshot and at least on its heartbeat, so a timer of the plan that
runs out while nothing happens in the world is seen within a tick. Each test here replays one small
world twice, event-driven and with a plan at every tick, and compares what the plans did and when."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spillway.config import PlannerConfig
from spillway.model.k8s import CANDIDATE_TAINT
from spillway.sim import engine
from spillway.sim.engine import replay
from spillway.sim.policies import SpillwayPolicy
from spillway.sim.trace import Job
from spillway.sim.world import GroupSpec, Outage, SchedulerConfig, World

GIB = 2**30 * 1000
INTERVAL = 60
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
# A whole p3.16xlarge: eight GPUs' shares of its template (sim.trace.gpu_share: 7.9 CPU, 56 GiB a GPU).
WHOLE_NODE = {"cpu": 7900 * 8, "memory": 56 * GIB * 8, "nvidia.com/gpu": 8000, "pods": 1000}

Act = tuple[int, tuple[tuple[str, int], ...], tuple[str, ...]]
Seen = tuple[tuple[tuple[str, int], ...], tuple[str, ...]]


class Recording(SpillwayPolicy):
    """Spillway, noting after each plan that changed something the groups' desired capacities and the
    nodes it drained (cordoned), each plan whose raise a capacity outage refused, and each change of the
    Nodes that carry the scale-down candidate taint; ``every_tick`` plans at every tick, whatever its
    timers say."""

    def __init__(self, config: PlannerConfig, every_tick: bool) -> None:
        super().__init__(config)
        self.every_tick = every_tick
        self.acts: list[Act] = []
        self.refused: list[int] = []
        self.marked: list[tuple[int, tuple[str, ...]]] = [(0, ())]

    def _seen(self, world: World) -> Seen:
        """The groups' desired capacities, and the instances that run uncordoned."""
        desired = tuple((name, g.desired) for name, g in sorted(world.groups.items()))
        nodes = (n for g in world.groups.values() for n in g.instances.values())
        return desired, tuple(sorted(n.name for n in nodes if not n.cordoned))

    def decide(self, world: World) -> None:
        before, failed = self._seen(world), world.counters.failed_launch_calls
        super().decide(world)
        after = self._seen(world)
        if after != before:  # what the plan raised, and the nodes it drained
            self.acts.append((world.t, after[0], tuple(n for n in before[1] if n not in after[1])))
        if world.counters.failed_launch_calls > failed:
            self.refused.append(world.t)
        infos = world.snapshot().nodes  # what the API holds, and the next plan reads
        marked = tuple(sorted(n.name for n in infos if any(t[0] == CANDIDATE_TAINT for t in n.taints)))
        if marked != self.marked[-1][1]:
            self.marked.append((world.t, marked))

    def wakeup(self, world: World) -> int | None:
        return world.t + INTERVAL if self.every_tick else super().wakeup(world)


def _replay(
    every_tick: bool,
    jobs: list[Job],
    config: PlannerConfig,
    groups: tuple[GroupSpec, ...] = (GroupSpec("gpu", "us-east-1", "p3.16xlarge", 0, 10),),
    **world: object,
) -> Recording:
    sim = World(
        groups,
        epoch=EPOCH,
        boot_seconds=120,
        scheduler=SchedulerConfig("most-allocated"),
        reserve=config.node_reserve.reserve(),
        cluster="sim",
        track_infos=True,  # what SpillwayPolicy reads, as sim.run sets it
        **world,  # type: ignore[arg-type]
    )
    policy = Recording(config, every_tick)
    replay(jobs, policy, sim, INTERVAL)
    return policy


def _late_gpu_replays(monkeypatch: pytest.MonkeyPatch) -> tuple[Recording, Recording]:
    """One 8-GPU job at 0 whose node's device plugin comes 2400 s after the node registers, replayed
    event-driven and with a plan at every tick (the replay cut to an hour past the job's end)."""
    monkeypatch.setattr(engine, "HORIZON_SLACK", 3600)
    config = PlannerConfig(cluster="sim")
    jobs = [Job(0, "job", "ml", 0, 3600, 0, (WHOLE_NODE,))]
    return _replay(False, jobs, config, plugin_seconds=2400), _replay(True, jobs, config, plugin_seconds=2400)


def test_a_node_whose_gpus_are_late_past_the_unready_time_is_drained_when_every_tick_would_drain_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An 8-GPU job at 0; its node registers at 120 without GPUs, which its device plugin adds 2400 s
    # later. Past the start window (15 min, at 1020) the plan launches another node for the job, and
    # the first is unready and idle: its idle timer starts, and it waits the unready time (20 min) in
    # place of the idle time, as cluster-autoscaler removes an unready node unneeded for
    # --scale-down-unready-time: a plan at every tick drains it at 2220. Nothing happens in the world
    # then; the replay wakes the plan at the end of the start window and at the timer's end, which
    # World.nodes (Ready nodes only) does not hold. Every node goes so before its GPUs come: the job
    # never starts, and the replay ends at its horizon (cut to an hour past the job's end here).
    driven, every = _late_gpu_replays(monkeypatch)

    first = next(act for act in every.acts if act[2])
    assert first[0] == 2220 and first[2] == ("ip-10-0-0-1.us-east-1.compute.internal",)
    assert driven.acts == every.acts


def test_a_node_whose_gpus_are_late_carries_the_candidate_taint_the_plan_gives_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The world of the test above: the node registers at 120 without GPUs. Past the start window (1020)
    # the plan keeps it idle, its unready time running, and marks it as a scale-down candidate
    # (planner.softtaint); its Node carries the mark from then until it is drained at 2220, as the
    # API's would, in both replays (the node launched at 1020 for the job, as late, is marked from the
    # end of its own start window, 2040). Before,
    # World.set_candidate_taint looked the node up among the nodes whose GPUs had registered only and
    # dropped the mark: the snapshot never showed it, and each plan asked for it again.
    driven, every = _late_gpu_replays(monkeypatch)

    late = "ip-10-0-0-1.us-east-1.compute.internal"
    second = "ip-10-0-0-2.us-east-1.compute.internal"
    assert every.marked[:4] == [(0, ()), (1020, (late,)), (2040, (late, second)), (2220, (second,))]
    assert driven.marked == every.marked


def test_a_group_backed_off_for_a_failed_launch_is_tried_again_when_every_tick_would_try_it() -> None:
    # Launches fail in both regions' groups until 2400 (a capacity outage). An 8-GPU job at 0: the plan
    # raises the primary, whose launch fails (the plan at 0), then the other region's, which fails too
    # (60); each group is skipped for launch_failure_backoff_minutes (15) from its failure, and tried
    # again when that runs out, though nothing happens in the world (SpillwayPolicy.wakeup: each
    # failure's end): 900 and 960, 1800 and 1860, then at 2700 the primary's raise succeeds. Checked
    # against a plan at every tick: the same refused raises, the same raises and drains at the same
    # ticks.
    config = PlannerConfig(cluster="sim", regions=["us-east-1", "us-west-2"])
    east = GroupSpec("east", "us-east-1", "p3.16xlarge", 0, 10)
    west = GroupSpec("west", "us-west-2", "p3.16xlarge", 0, 10)
    outages = (Outage("east", 0, 2400), Outage("west", 0, 2400))
    jobs = [
        Job(0, "first", "ml", 0, 3600, 0, (WHOLE_NODE,)),
        Job(1, "second", "ml", 3000, 600, 0, (WHOLE_NODE,)),
    ]

    driven = _replay(False, jobs, config, (east, west), outages=outages)
    every = _replay(True, jobs, config, (east, west), outages=outages)

    assert every.refused == [0, 60, 900, 960, 1800, 1860]
    assert every.acts[0] == (2700, (("east", 1), ("west", 0)), ())
    assert (driven.refused, driven.acts) == (every.refused, every.acts)


def test_a_mark_for_recent_pods_is_lifted_when_every_tick_would_lift_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A 1-GPU job that may not move, alone on its node of a consolidating group: the node is marked once
    # the job runs (its pods that may not move all started less than consolidation_recent_pods_minutes,
    # 30, ago: planner.softtaint), and the mark is lifted when the job turns 30 minutes old, though
    # nothing happens in the world then. A plan at every tick lifts it at that tick; the replay wakes for
    # it (SpillwayPolicy.wakeup), else the mark stayed until the job ended.
    monkeypatch.setattr(engine, "HORIZON_SLACK", 3600)
    config = PlannerConfig(cluster="sim", consolidation="when-underutilized")
    one_gpu = {resource: amount // 8 for resource, amount in WHOLE_NODE.items()} | {"pods": 1000}
    jobs = [Job(0, "job", "ml", 0, 3 * 3600, 0, (one_gpu,))]

    driven, every = _replay(False, jobs, config), _replay(True, jobs, config)

    node = "ip-10-0-0-1.us-east-1.compute.internal"
    assert every.marked[:3] == [(0, ()), (120, (node,)), (120 + 1800, ())]
    assert driven.marked == every.marked


def test_a_mark_for_a_movable_pod_the_planner_may_not_move_is_lifted_when_every_tick_would_lift_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The world of the test above, but the job is marked movable (safe-to-evict: "true") and the drains'
    # deadline is 20 s: its pods' grace period (30 s, the default) is longer, so the planner may not move
    # them (planner.disruption.cut_short: grace-past-deadline) and marks the node for its recent pods,
    # lifting the mark when the job turns 30 minutes old. The replay's wake-ups for recent pods must
    # follow the planner's judgement, not the job's movable flag alone: skipping every movable job, it
    # slept through the lift and the mark stayed until the job ended.
    monkeypatch.setattr(engine, "HORIZON_SLACK", 3600)
    config = PlannerConfig(cluster="sim", consolidation="when-underutilized", drain_deadline_seconds=20)
    one_gpu = {resource: amount // 8 for resource, amount in WHOLE_NODE.items()} | {"pods": 1000}
    jobs = [Job(0, "job", "ml", 0, 3 * 3600, 0, (one_gpu,), movable=True)]

    driven, every = _replay(False, jobs, config), _replay(True, jobs, config)

    node = "ip-10-0-0-1.us-east-1.compute.internal"
    assert every.marked[:3] == [(0, ()), (120, (node,)), (120 + 1800, ())]
    assert driven.marked == every.marked
