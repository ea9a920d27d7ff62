"""One simulation: a trace replayed under every policy, side by side, and the report.

:func:`simulate` is what ``spillway simulate`` calls; tests call it directly with small traces.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from spillway.config import PlannerConfig
from spillway.model.resources import CPU, NVIDIA_GPU
from spillway.sim.bounds import Bounds, NodeType, lower_bounds
from spillway.sim.engine import Replay, horizon, replay
from spillway.sim.packers import PackerResult, pack
from spillway.sim.policies import (
    ClusterAutoscalerPolicy,
    Ec2AutoscalerPolicy,
    Policy,
    SpillwayPolicy,
    StaticPolicy,
)
from spillway.sim.prices import ON_DEMAND_USD_PER_HOUR, PRICE_SOURCE
from spillway.sim.progress import ProgressBar
from spillway.sim.report import PolicyResult, measure
from spillway.sim.trace import Job, Trace, build_jobs
from spillway.sim.world import (
    LONGEST_DEADLINE,
    GroupSpec,
    Outage,
    SchedulerConfig,
    SimError,
    World,
    group_template,
    runnable,
    vector,
)

POLICIES = ("spillway", "static", "ec2-autoscaler", "cluster-autoscaler")
DEFAULT_INSTANCE_TYPE = "p3.16xlarge"
DEFAULT_GROUPS = (
    GroupSpec("gpu-us-east-1", "us-east-1", DEFAULT_INSTANCE_TYPE, 0, 1000),
    GroupSpec("gpu-us-west-2", "us-west-2", DEFAULT_INSTANCE_TYPE, 0, 1000),
)


@dataclass(frozen=True)
class SimConfig:
    groups: tuple[GroupSpec, ...] = DEFAULT_GROUPS  # region preference: the order of first appearance
    boot_seconds: int = 120
    interval: int = 60
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    outages: tuple[Outage, ...] = ()  # times in seconds from the trace's first submit
    seed: int = 0
    planner: PlannerConfig = field(default_factory=PlannerConfig)
    policies: tuple[str, ...] = POLICIES
    prices: Mapping[str, float] = field(default_factory=lambda: dict(ON_DEMAND_USD_PER_HOUR))
    movable_fraction: float = 0.0  # share of jobs whose pods are marked safe-to-evict: "true"
    restart_penalty: int = 0  # seconds of progress a job moved (or interrupted) loses
    # None: durations are unknown (no pod has a deadline); else the sigma of the factor exp(|N(0, sigma)|)
    # by which each job's deadline (its pods' activeDeadlineSeconds) exceeds its run time (0: exact)
    duration_noise: float | None = None
    join_failure_rate: float = 0.0  # share of launches whose instance never becomes a node (seeded)
    plugin_seconds: int = 0  # a GPU node is Ready this long before its device plugin registers its GPUs
    drain_seconds: int = 0  # a drained node is cordoned, billed and counted this long before it is terminated
    # more Spillway runs, each with its own planner configuration: (label, config); run as spillway[label]
    variants: tuple[tuple[str, PlannerConfig], ...] = ()
    packers: bool = True  # also replay the ideal First Fit and Best Fit packers


@dataclass(frozen=True)
class Report:
    config: SimConfig
    trace: Trace
    jobs: int
    unrunnable: int  # jobs with a pod no group's node could hold: never started, left out of the bound
    pods: int
    bounds: Bounds
    runs: tuple[Replay, ...]
    results: tuple[PolicyResult, ...]
    wall_seconds: float
    packers: tuple[PackerResult, ...] = ()
    movable_jobs: int = 0
    horizon: int = 0  # where every replay stops at the latest, and waits still running are cut

    def to_dict(self, timing: bool = False) -> dict[str, Any]:
        """The report as JSON-able data; the same seed gives the same data, unless ``timing`` adds wall times."""
        cfg = self.config
        used_types = sorted({g.instance_type for g in cfg.groups})
        out: dict[str, Any] = {
            "trace": {
                "source": self.trace.source,
                "format": self.trace.format,
                "jobs": self.jobs,
                "pods": self.pods,
                "jobs_no_group_can_run": self.unrunnable,
                "first_submit": self.trace.epoch.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            },
            "config": {
                "groups": [
                    {
                        "name": g.name,
                        "region": g.region,
                        "instance_type": g.instance_type,
                        "min": g.min_size,
                        "max": g.max_size,
                        "spot_interruptions_per_hour": g.spot_rate,
                        "price_usd_per_hour": g.price,
                    }
                    for g in cfg.groups
                ],
                "node_boot_seconds": cfg.boot_seconds,
                "interval_seconds": cfg.interval,
                "scheduler_scoring": cfg.scheduler.scoring,
                "score_resources": {name: weight for name, weight in cfg.scheduler.resources},
                "outages": [{"group": o.group, "start": o.start, "end": o.end} for o in cfg.outages],
                "seed": cfg.seed,
                "movable_fraction": cfg.movable_fraction,
                "movable_jobs": self.movable_jobs,
                "restart_penalty_seconds": cfg.restart_penalty,
                "duration_noise": cfg.duration_noise,
                "join_failure_rate": cfg.join_failure_rate,
                "device_plugin_seconds": cfg.plugin_seconds,
                "drain_seconds": cfg.drain_seconds,
                "planner": cfg.planner.model_dump(mode="json"),
                "variants": {label: v.model_dump(mode="json") for label, v in cfg.variants},
            },
            "prices": {
                "source": PRICE_SOURCE,
                "usd_per_hour": {t: cfg.prices[t] for t in used_types if t in cfg.prices},
            },
            "lower_bound": self.bounds.to_dict(),
            # a job still waiting when its replay stopped counts as waiting until then, for every policy
            "waits_censored_at_hours": round(self.horizon / 3600, 3),
            "ideal_packers": {
                p.packer: p.to_dict(self.bounds.step_node_hours, self.bounds.step_cost_usd)
                for p in self.packers
            },
            "policies": [r.to_dict() for r in self.results],
        }
        if timing:
            out["wall_seconds"] = {
                "total": round(self.wall_seconds, 2),
                **{r.policy: round(r.wall_seconds, 2) for r in self.results},
            }
        return out


def aligned_epoch(first_submit: datetime, interval: int) -> datetime:
    """The first submit, rounded down to a tick: ticks fall on multiples of the interval."""
    stamp = int(first_submit.timestamp())
    return datetime.fromtimestamp(stamp - stamp % interval, tz=UTC)


def group_price(group: GroupSpec, prices: Mapping[str, float]) -> float | None:
    """USD an hour of a group's instances: its own price (e.g. Spot), else the type's, else unknown."""
    return group.price if group.price is not None else prices.get(group.instance_type)


def fleet(config: SimConfig) -> list[NodeType]:
    """Every distinct (node type, price) of the groups that may launch a node (MaxSize above 0): what
    the bound and the packers may open."""
    reserve = config.planner.node_reserve.reserve()
    out: dict[tuple[str, float | None], NodeType] = {}
    for g in config.groups:
        if g.max_size <= 0:
            continue
        price = group_price(g, config.prices)
        key = (g.instance_type, price)
        if key not in out:
            out[key] = NodeType(g.instance_type, group_template(g, reserve, "sim").allocatable, price)
        # the groups it stands for: a note names those without a price (another of the type may have one)
        out[key] = replace(out[key], groups=(*out[key].groups, g.name))
    return list(out.values())


def mark_jobs(jobs: Sequence[Job], config: SimConfig) -> list[Job]:
    """Jobs marked movable (exactly round(F x jobs) of them, chosen by the seed) and, with a duration
    noise, given a known upper bound of their duration: the real one times exp(|N(0, sigma)|), at least
    1 (a user sets a deadline generously: it never ends the job early)."""
    count = round(config.movable_fraction * len(jobs))
    chosen = set(random.Random(f"movable/{config.seed}").sample(range(len(jobs)), count)) if count else set()
    noise = random.Random(f"duration-noise/{config.seed}")
    out = []
    for i, job in enumerate(jobs):
        expected = None
        if config.duration_noise is not None:
            expected = _known_bound(job.duration, abs(noise.gauss(0.0, config.duration_noise)))
        if i in chosen or expected is not None:
            job = replace(job, movable=i in chosen, expected=expected)
        out.append(job)
    return out


def _known_bound(duration: int, log_factor: float) -> int:
    """``duration`` grown by ``exp(log_factor)``, rounded up, at least 1 and at most
    :data:`LONGEST_DEADLINE`: a wide noise draws factors past e^709, which no float holds."""
    if log_factor >= math.log(LONGEST_DEADLINE / max(1, duration)):
        return LONGEST_DEADLINE
    return max(1, min(LONGEST_DEADLINE, math.ceil(duration * math.exp(log_factor))))


def make_policy(name: str, config: SimConfig, planner: PlannerConfig, bounds: Bounds) -> Policy:
    if name == "spillway":
        return SpillwayPolicy(planner)
    if name == "static":
        return StaticPolicy(bounds.peak_demand or {})
    if name == "ec2-autoscaler":
        return Ec2AutoscalerPolicy()
    if name == "cluster-autoscaler":
        return ClusterAutoscalerPolicy(config.seed)
    raise SimError(f"unknown policy {name!r} (one of {', '.join(POLICIES)})")


def simulate(config: SimConfig, trace: Trace, progress: bool = False) -> Report:
    started = time.perf_counter()
    if config.interval <= 0 or config.boot_seconds < 0:
        raise SimError("interval must be positive and boot time not negative")
    for name in config.policies:
        if name not in POLICIES:
            raise SimError(f"unknown policy {name!r} (one of {', '.join(POLICIES)})")
    reserve = config.planner.node_reserve.reserve()
    templates = [group_template(g, reserve, "sim") for g in config.groups]
    epoch = aligned_epoch(trace.epoch, config.interval)
    shift = round((trace.epoch - epoch).total_seconds())
    if not 0.0 <= config.movable_fraction <= 1.0:
        raise SimError(f"movable fraction must be between 0 and 1, not {config.movable_fraction}")
    if config.restart_penalty < 0 or (config.duration_noise or 0.0) < 0:
        raise SimError("restart penalty and duration noise must not be negative")
    # each row sized on the groups' node type that can hold it, whatever the groups' order
    room: dict[str, int] = {}  # what the groups hold at once, each at its MaxSize
    for group, template in zip(config.groups, templates, strict=True):
        for resource, value in template.allocatable.items():
            room[resource] = room.get(resource, 0) + value * group.max_size
    # a group of MaxSize 0 never has a node: it sizes no row, and a pod only its type holds is one no
    # group can run (with every group at MaxSize 0 the rows are sized as listed, and none can run)
    launchable = [t for g, t in zip(config.groups, templates, strict=True) if g.max_size > 0]
    built = build_jobs(trace, [t.allocatable for t in launchable or templates], room)
    jobs = mark_jobs(shifted(built, shift), config)
    allocatables = [vector(t.allocatable) for t in launchable]
    unrunnable = sum(1 for j in jobs if not runnable(j, allocatables))
    types = fleet(config)
    runnable_jobs = [j for j in jobs if runnable(j, allocatables)]
    bounds = lower_bounds(runnable_jobs, types)
    packers = (
        tuple(pack(runnable_jobs, types, p) for p in ("first-fit", "best-fit")) if config.packers else ()
    )
    measure_resource = NVIDIA_GPU if any(j.gpus for j in jobs) else CPU
    regions: list[str] = list(config.planner.regions)
    for g in config.groups:
        if g.region not in regions:
            regions.append(g.region)
    planner = config.planner.model_copy(update={"regions": tuple(regions), "cluster": "sim"})
    outages = tuple(replace(o, start=o.start + shift, end=o.end + shift) for o in config.outages)
    bar = ProgressBar(max(bounds.end, 1)) if progress else None
    runs: list[Replay] = []
    variants = [(f"spillway[{label}]", v) for label, v in config.variants]
    for name in [*config.policies, *(label for label, _ in variants)]:
        if name in dict(variants):
            variant = dict(variants)[name]
            policy: Policy = SpillwayPolicy(
                variant.model_copy(update={"regions": planner.regions, "cluster": "sim"}), name
            )
        else:
            policy = make_policy(name, config, planner, bounds)
        world = World(
            config.groups,
            epoch=epoch,
            boot_seconds=config.boot_seconds,
            scheduler=config.scheduler,
            outages=outages,
            reserve=planner.node_reserve.reserve(),
            seed=config.seed,
            track_infos=isinstance(policy, SpillwayPolicy),
            measure=measure_resource,
            restart_penalty=config.restart_penalty,
            join_failure_rate=config.join_failure_rate,
            plugin_seconds=config.plugin_seconds,
            drain_seconds=config.drain_seconds,
        )
        for group in config.groups:
            if group.min_size:
                world.preprovision(group.name, group.min_size)
        if bar is not None:
            bar.begin(name)
        run = replay(jobs, policy, world, config.interval, bar.update if bar is not None else None)
        if bar is not None:
            bar.end(run.end)
        runs.append(run)
    prices = {g.name: group_price(g, config.prices) for g in config.groups}
    results = tuple(measure(run, bounds, prices) for run in runs)
    return Report(
        config=config,
        trace=trace,
        jobs=len(jobs),
        unrunnable=unrunnable,
        pods=sum(len(j.pods) for j in jobs),
        bounds=bounds,
        runs=tuple(runs),
        results=results,
        wall_seconds=time.perf_counter() - started,
        packers=packers,
        movable_jobs=sum(1 for j in jobs if j.movable),
        horizon=horizon(jobs),
    )


def shifted(jobs: Sequence[Job], shift: int) -> list[Job]:
    return [replace(j, submit=j.submit + shift) for j in jobs] if shift else list(jobs)
