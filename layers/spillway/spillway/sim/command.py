"""``spillway simulate``: arguments, and the run behind them.

Kept apart from ``spillway.cli`` so that only this subcommand's arguments live here; the heavy modules
are imported when the command runs, not when the parser is built.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from spillway.errors import InputError
from spillway.model.utc import aware

if TYPE_CHECKING:
    from spillway.config import PlannerConfig
    from spillway.sim.run import Report
    from spillway.sim.trace import Trace
    from spillway.sim.world import GroupSpec, Outage

_DURATION = re.compile(r"^(?P<n>\d+(?:\.\d+)?)(?P<unit>[smhd]?)$", re.ASCII)
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", metavar="TRACE", help="a Philly CSV (as in ../shared/traces/) or a generic CSV")
    p.add_argument("--format", choices=("auto", "philly", "generic"), default="auto", help="trace format")
    p.add_argument("--limit", type=int, metavar="N", help="replay only the first N jobs (by submit time)")
    p.add_argument(
        "--instance-type",
        default=None,
        metavar="TYPE",
        help="node type of the default groups (default p3.16xlarge: 8 GPUs a node)",
    )
    p.add_argument(
        "--group",
        action="append",
        default=[],
        metavar="NAME:REGION[:TYPE[:MIN:MAX]][:spot=RATE/h][:price=USD]",
        help="a node group (repeatable; the first region is the primary). spot=RATE/h: Spot instances "
        "taken back at RATE interruptions per instance-hour; price=USD: its price per hour over the "
        "table (e.g. the Spot price). Default: gpu-us-east-1 and gpu-us-west-2, MinSize 0, MaxSize --max-nodes",
    )
    p.add_argument("--max-nodes", type=int, default=1000, metavar="N", help="MaxSize of the default groups")
    p.add_argument("--node-boot-seconds", type=int, default=120, metavar="S", help="launch to Ready (120)")
    p.add_argument("--interval", type=int, default=60, metavar="S", help="seconds between decisions (60)")
    p.add_argument(
        "--scheduler-scoring",
        choices=("least-allocated", "most-allocated"),
        default="least-allocated",
        help="kube-scheduler NodeResourcesFit scoring strategy (least-allocated, its default; "
        "most-allocated, the bin-packing profile batch clusters should use)",
    )
    p.add_argument(
        "--score-resources",
        default="cpu=1,memory=1",
        metavar="R=W,...",
        help="resources and weights the score uses (kube-scheduler's default: cpu=1,memory=1)",
    )
    p.add_argument(
        "--outage",
        action="append",
        default=[],
        metavar="GROUP=START/END",
        help="launches in GROUP fail from START to END: seconds or 90m/36h/2d from the first submit, or "
        "ISO-8601 times (repeatable)",
    )
    p.add_argument(
        "--policies",
        default="spillway,static,ec2-autoscaler,cluster-autoscaler",
        metavar="LIST",
        help="policies to compare, comma-separated",
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help="Spillway planner configuration, YAML or JSON, as for `spillway plan` (tenant limits: a "
        "tenant is a namespace, vc-<cluster> for Philly's virtual clusters)",
    )
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="LABEL=FILE",
        help="one more Spillway run, spillway[LABEL], with the planner configuration in FILE (repeatable; "
        "e.g. buffers of several sizes for --pareto)",
    )
    p.add_argument(
        "--movable-fraction",
        type=float,
        default=0.0,
        metavar="F",
        help='share of jobs (chosen by the seed) whose pods are marked safe-to-evict: "true" (0)',
    )
    p.add_argument(
        "--restart-penalty",
        type=float,
        default=0.0,
        metavar="MINUTES",
        help="progress a job loses when a drain or a Spot interruption restarts it elsewhere (0)",
    )
    p.add_argument(
        "--duration-noise",
        type=float,
        default=None,
        metavar="SIGMA",
        help="durations are known: each started pod gets activeDeadlineSeconds = its remaining run time "
        "x exp(|N(0, SIGMA)|), seeded (0: exact); consolidation keeps nodes whose pods end soon "
        "(default: unknown, no deadlines)",
    )
    p.add_argument(
        "--join-failure-rate",
        type=float,
        default=0.0,
        metavar="P",
        help="share of launches whose instance never becomes a node (a broken bootstrap), seeded: it stays "
        "in its group, paid for, until a policy removes it (0)",
    )
    p.add_argument(
        "--device-plugin-seconds",
        type=int,
        default=0,
        metavar="S",
        help="a GPU node is Ready S seconds before its device plugin registers its GPUs: the autoscaler "
        "sees it without GPUs, the scheduler places nothing on it (0)",
    )
    p.add_argument(
        "--drain-seconds",
        type=int,
        default=0,
        metavar="S",
        help="a drain takes S seconds: from the drain the node is cordoned and its evicted pods are back "
        "in the queue, and it is billed and counted until its instance is terminated S seconds later, "
        "for every policy (0: instant)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice (0)")
    p.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="TYPE=USD",
        help="on-demand price per hour of a node type, over the bundled table (repeatable)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--chart", metavar="FILE", help="write a PNG chart of demand, capacity and the bound")
    p.add_argument(
        "--pareto", metavar="FILE", help="write a chart of cost against GPU-weighted p90 pending, every run"
    )
    progress = p.add_mutually_exclusive_group()
    progress.add_argument("--progress", dest="progress", action="store_true", default=None)
    progress.add_argument("--no-progress", dest="progress", action="store_false")


def _int_field(text: str, what: str, spec: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"{what} is not an integer: {text!r}", field=f"--group {spec}") from None
    if value < 0:
        raise InputError(f"{what} must not be negative", field=f"--group {spec}")
    return value


def parse_groups(specs: list[str], instance_type: str | None, max_nodes: int) -> tuple[GroupSpec, ...]:
    from spillway.sim.run import DEFAULT_GROUPS, DEFAULT_INSTANCE_TYPE
    from spillway.sim.world import GroupSpec

    itype = instance_type or DEFAULT_INSTANCE_TYPE
    if not specs:
        return tuple(GroupSpec(g.name, g.region, itype, 0, max_nodes) for g in DEFAULT_GROUPS)
    groups = []
    for spec in specs:
        parts = spec.split(":")
        options = {}
        while len(parts) > 2 and "=" in parts[-1]:
            key, _, value = parts.pop().partition("=")
            if key not in ("spot", "price") or key in options:
                raise InputError(
                    f"unknown or repeated option {key!r} (spot=RATE/h, price=USD)", field=f"--group {spec}"
                )
            options[key] = value
        if len(parts) not in (2, 3, 5) or not all(parts[:2]):
            raise InputError(
                "expected NAME:REGION[:TYPE[:MIN:MAX]][:spot=RATE/h][:price=USD]", field=f"--group {spec}"
            )
        name, region = parts[0], parts[1]
        gtype = parts[2] if len(parts) >= 3 and parts[2] else itype
        low, high = (0, max_nodes)
        if len(parts) == 5:
            low = _int_field(parts[3], "MIN", spec)
            high = _int_field(parts[4], "MAX", spec)
            if low > high:
                raise InputError("MIN is above MAX", field=f"--group {spec}")
        rate = _rate(options["spot"], spec) if "spot" in options else 0.0
        price = _usd(options["price"], spec) if "price" in options else None
        groups.append(GroupSpec(name, region, gtype, low, high, rate, price))
    return tuple(groups)


def _rate(text: str, spec: str) -> float:
    """``0.05/h`` or ``0.05``: interruptions per instance-hour; ``1.2/d``: per instance-day."""
    number, _, unit = text.partition("/")
    scale = {"": 1.0, "h": 1.0, "d": 1 / 24}.get(unit)
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if scale is None or not math.isfinite(value) or value < 0:
        raise InputError(
            f"spot rate is not RATE/h (interruptions per instance-hour): {text!r}", field=f"--group {spec}"
        )
    return value * scale


def _usd(text: str, spec: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0:
        raise InputError(f"price is not USD an hour: {text!r}", field=f"--group {spec}")
    return value


def parse_variants(specs: list[str]) -> tuple[tuple[str, PlannerConfig], ...]:
    """``LABEL=FILE``: a planner configuration file per extra Spillway run, labels unique."""
    from spillway.config import load_config_file

    out: list[tuple[str, PlannerConfig]] = []
    for spec in specs:
        label, sep, path = spec.partition("=")
        if not sep or not label or not path or any(c in label for c in "[],"):
            raise InputError(
                "expected LABEL=FILE (a label without brackets or commas)", field=f"--variant {spec}"
            )
        if label in {seen for seen, _ in out}:
            raise InputError(f"label {label!r} is used twice", field=f"--variant {spec}")
        out.append((label, load_config_file(path)))  # ConfigurationError names the file and the field
    return tuple(out)


def write_pareto_chart(path: str, report: Report, trace_name: str) -> None:
    try:
        from spillway.sim.chart import write_pareto
    except ImportError:
        raise InputError("needs matplotlib: pip install 'spillway[sim]'", field="--pareto") from None
    cfg = report.config
    title = (
        f"{trace_name}: cost against waiting, {cfg.boot_seconds} s boot, {cfg.interval} s interval, "
        f"{cfg.movable_fraction:.0%} movable"
    )
    try:
        write_pareto(path, report.results, report.bounds, report.packers, title)
    except OSError as exc:
        raise InputError(exc.strerror or "cannot be written", field=f"--pareto {path}") from None


def parse_when(text: str, first_submit: datetime, spec: str) -> int:
    """Seconds from the first submit: ``5400``, ``90m``, ``36h``, ``2d`` or an ISO-8601 time."""
    match = _DURATION.match(text.strip())
    if match:
        seconds = float(match["n"]) * _UNITS[match["unit"]]
        if math.isfinite(seconds):  # 400 digits make an infinite float, which round() cannot convert
            return round(seconds)
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"not a time: {text!r} (seconds, 90m, 36h, 2d, or ISO-8601)", field=f"--outage {spec}"
        ) from None
    # without an offset: UTC, as a submit time without one (spillway.model.utc.aware), whatever the
    # offset the trace's own times carry
    return round((aware(when) - first_submit) / timedelta(seconds=1))


def parse_outages(specs: list[str], trace: Trace, groups: tuple[GroupSpec, ...]) -> tuple[Outage, ...]:
    from spillway.sim.world import Outage

    names = {g.name for g in groups}
    outages = []
    for spec in specs:
        group, sep, window = spec.partition("=")
        start_text, slash, end_text = window.partition("/")
        if not sep or not slash or not group:
            raise InputError("expected GROUP=START/END", field=f"--outage {spec}")
        if group not in names:
            raise InputError(
                f"no group {group!r} (groups: {', '.join(sorted(names))})", field=f"--outage {spec}"
            )
        start = parse_when(start_text, trace.epoch, spec)
        end = parse_when(end_text, trace.epoch, spec)
        if end <= start:
            raise InputError("END must be after START", field=f"--outage {spec}")
        outages.append(Outage(group, start, end))
    return tuple(outages)


def parse_weights(text: str) -> tuple[tuple[str, int], ...]:
    out = []
    for item in text.split(","):
        name, sep, weight = item.strip().partition("=")
        try:
            value = int(weight) if sep else 1
        except ValueError:
            raise InputError(f"weight is not an integer: {item!r}", field="--score-resources") from None
        if not name or value <= 0:
            raise InputError(
                f"expected RESOURCE=WEIGHT with a positive weight: {item!r}", field="--score-resources"
            )
        out.append((name, value))
    return tuple(out)


def parse_prices(specs: list[str]) -> dict[str, float]:
    out = {}
    for spec in specs:
        itype, sep, usd = spec.partition("=")
        try:
            value = float(usd)
        except ValueError:
            value = -1.0
        if not sep or not itype or not math.isfinite(value) or value < 0:
            raise InputError("expected TYPE=USD (a price per hour, not negative)", field=f"--price {spec}")
        out[itype] = value
    return out


# What --chart may name: formats matplotlib writes without extra packages. A name without one of these
# would have matplotlib append ".png" to it (``--chart /tmp`` wrote ``/tmp.png``).
CHART_FORMATS = (".png", ".svg", ".pdf")


def check_arguments(args: argparse.Namespace) -> None:
    """Refuse unusable arguments before the replay starts, each with an error naming the option."""
    _seconds(args.interval, "--interval", above_zero=True)
    _seconds(args.node_boot_seconds, "--node-boot-seconds")
    if args.limit is not None and args.limit <= 0:
        raise InputError(f"must be a positive number of jobs, not {args.limit}", field="--limit")
    if args.max_nodes <= 0:
        raise InputError(f"must be a positive number of nodes, not {args.max_nodes}", field="--max-nodes")
    if not any(p.strip() for p in args.policies.split(",")):
        raise InputError("names no policy (e.g. spillway,static)", field="--policies")
    if args.chart:
        check_chart_path(args.chart, "--chart")
    if args.pareto:
        check_chart_path(args.pareto, "--pareto")
    if not 0.0 <= args.movable_fraction <= 1.0:
        raise InputError(f"must be between 0 and 1, not {args.movable_fraction}", field="--movable-fraction")
    _seconds(args.restart_penalty, "--restart-penalty", unit="minutes")
    if not math.isfinite(args.restart_penalty * 60):  # counted in seconds: 1e308 minutes are inf
        raise InputError(
            f"more minutes than seconds can count: {args.restart_penalty}", field="--restart-penalty"
        )
    if args.duration_noise is not None:
        _seconds(args.duration_noise, "--duration-noise", unit="(a standard deviation)")
    _seconds(args.device_plugin_seconds, "--device-plugin-seconds")
    _seconds(args.drain_seconds, "--drain-seconds")
    if not 0.0 <= args.join_failure_rate < 1.0:
        raise InputError(
            f"must be at least 0 and below 1, not {args.join_failure_rate}", field="--join-failure-rate"
        )


def _seconds(value: float, option: str, *, above_zero: bool = False, unit: str = "seconds") -> None:
    """A finite number of 0 or more (above 0 with ``above_zero``): ``inf`` or ``nan`` would replay
    forever or compare false everywhere."""
    if math.isfinite(value) and (value > 0 if above_zero else value >= 0):
        return
    least = "above 0" if above_zero else "0 or more"
    raise InputError(f"must be a finite number {least}, {unit}, not {value}", field=option)


def check_chart_path(text: str, option: str = "--chart") -> None:
    """The chart's file must be writable where it is named, with a format we write, before the replay."""
    path = Path(text)
    if path.is_dir() or text.endswith(("/", os.sep)):
        raise InputError("is a directory; name the chart file (e.g. out/chart.png)", field=f"{option} {text}")
    if path.suffix.lower() not in CHART_FORMATS:
        raise InputError(
            f"unknown chart format {path.suffix or '(none)'!r}: name a {', '.join(CHART_FORMATS)} file",
            field=f"{option} {text}",
        )
    parent = path.parent
    if not parent.is_dir():
        raise InputError(f"no directory {str(parent)!r} to write the chart in", field=f"{option} {text}")
    if not os.access(parent, os.W_OK):
        raise InputError(f"directory {str(parent)!r} is not writable", field=f"{option} {text}")


def run(args: argparse.Namespace) -> int:
    from spillway.config import PlannerConfig, load_config_file
    from spillway.sim.prices import ON_DEMAND_USD_PER_HOUR
    from spillway.sim.report import format_table, format_tenants
    from spillway.sim.run import SimConfig, simulate
    from spillway.sim.trace import read_trace
    from spillway.sim.world import SchedulerConfig, SimError

    check_arguments(args)
    planner = PlannerConfig()
    if args.config:
        planner = load_config_file(args.config)  # ConfigurationError (an InputError) names the field
    try:
        trace = read_trace(args.trace, args.format, args.limit)
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", source=args.trace) from None
    except csv.Error as exc:
        raise InputError(f"not a usable CSV file: {exc}", source=args.trace) from None
    if not trace.rows:
        raise InputError("no jobs in the trace", source=args.trace)
    groups = parse_groups(args.group, args.instance_type, args.max_nodes)
    variants = parse_variants(args.variant)
    prices = dict(ON_DEMAND_USD_PER_HOUR)
    prices.update(parse_prices(args.price))
    config = SimConfig(
        groups=groups,
        boot_seconds=args.node_boot_seconds,
        interval=args.interval,
        scheduler=SchedulerConfig(args.scheduler_scoring, parse_weights(args.score_resources)),
        outages=parse_outages(args.outage, trace, groups),
        seed=args.seed,
        planner=planner,
        policies=tuple(p.strip() for p in args.policies.split(",") if p.strip()),
        prices=prices,
        movable_fraction=args.movable_fraction,
        restart_penalty=round(args.restart_penalty * 60),
        duration_noise=args.duration_noise,
        join_failure_rate=args.join_failure_rate,
        plugin_seconds=args.device_plugin_seconds,
        drain_seconds=args.drain_seconds,
        variants=variants,
    )
    show_progress = sys.stderr.isatty() if args.progress is None else args.progress
    try:
        report = simulate(config, trace, progress=show_progress)
    except SimError as exc:
        raise InputError(str(exc)) from None
    if args.pareto:
        write_pareto_chart(args.pareto, report, Path(args.trace).name)
    if args.chart:
        try:
            from spillway.sim.chart import write_chart
        except ImportError:
            raise InputError("needs matplotlib: pip install 'spillway[sim]'", field="--chart") from None

        scoring = config.scheduler.scoring
        types = "/".join(dict.fromkeys(g.instance_type for g in groups))  # every group's, not the first's
        title = (
            f"{Path(args.trace).name}: {report.jobs:,} jobs, {types}, "
            f"{scoring} scoring, {config.boot_seconds} s boot, {config.interval} s interval"
        )
        try:
            write_chart(args.chart, report.bounds, report.runs, title)
        except OSError as exc:
            raise InputError(exc.strerror or "cannot be written", field=f"--chart {args.chart}") from None
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        times = ", ".join(f"{r.policy} {r.wall_seconds:.1f} s" for r in report.results)
        print(f"replayed in {report.wall_seconds:.1f} s ({times})", file=sys.stderr)
    else:
        print(
            f"{args.trace}: {report.jobs:,} jobs ({report.pods:,} pods), {len(groups)} group(s) of "
            f"{', '.join(sorted({g.instance_type for g in groups}))}, {config.scheduler.scoring} scoring, "
            f"{config.boot_seconds} s boot, {config.interval} s interval, seed {config.seed}\n"
        )
        print(format_table(report.results, report.bounds, packers=report.packers))
        for result in report.results:
            charged = any(t.node_hours is not None for t in result.tenants.values())
            if charged and (len(result.tenants) > 1 or planner.tenants):
                print()
                print(format_tenants(result))
        print(f"\nreplayed in {report.wall_seconds:.1f} s")
    return 0
