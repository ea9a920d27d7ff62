"""The ``spillway`` command: ``plan`` (offline what-if), ``demo``, ``simulate``.

Bad input exits 2 with one line naming the file and the field; no traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from spillway import __version__
from spillway.errors import InputError

DESCRIPTION = "Spillway, a node autoscaler for Kubernetes on EC2: plan offline, run the demo, replay traces."


def _plan(args: argparse.Namespace) -> int:
    from spillway import inputs
    from spillway.perf import bulk_allocation
    from spillway.planner import plan

    config = inputs.load_config(args.config)
    now = inputs.parse_now(args.now)
    snapshot = inputs.load_cluster(args.cluster, config.cluster or "cluster", now)
    asgs = inputs.load_nodegroups(args.nodegroup, inputs.load_asgs(args.asgs))
    asgs = inputs.load_lifecycle_hooks(
        args.lifecycle_hooks, asgs, inputs.hook_names(args.lifecycle_hook_names)
    )
    activities = inputs.load_activities(args.activities)
    scheduled = inputs.load_scheduled_actions(args.scheduled_actions)
    catalogue = inputs.load_instance_types(args.instance_types)
    warm = inputs.load_warm_pools(args.warm_pool, asgs)
    # a state file a newer build wrote: its unknown fields are ignored, named in one line on stderr
    state = inputs.load_state(
        args.state, lambda line: print(f"spillway plan: {one_line(line)}", file=sys.stderr)
    )
    fleet = inputs.load_instances(args.instances, config.cluster)  # a fleet gang's, outside the groups
    if fleet:
        snapshot = replace(snapshot, fleet_instances=fleet)
    zone_ids = inputs.load_zones(args.zones)  # region -> zone name -> zone id, as observe asks EC2
    groups = inputs.node_groups(
        asgs,
        activities,
        catalogue,
        config,
        scheduled=scheduled,
        warm_pools=warm,
        nodes=snapshot.nodes,
        zone_ids=zone_ids,
    )
    # what a group's tags, actions or pool got wrong and the plan went on without (a tag left out, an
    # action skipped): observe keeps it in the snapshot; here one line each on stderr, the plan printed
    for group in groups:
        tags = (group.atomic_launch_problem, group.consolidation_problem)  # kept apart from problems
        for problem in filter(None, (*tags, *group.problems)):
            line = f"warning: group {group.region}/{group.name}: {problem}"
            print(f"spillway plan: {one_line(line)}", file=sys.stderr)
    with bulk_allocation():
        result = plan(snapshot, groups, config, state, now)
    if args.state_out:
        # Before the plan is printed: a state that cannot be written is an error, not a plan.
        try:
            Path(args.state_out).write_text(json.dumps(result.state.to_wire(), indent=2) + "\n")
        except OSError as exc:
            raise InputError(
                exc.strerror or "cannot be written", field=f"--state-out {args.state_out}"
            ) from None
    print(json.dumps(result.to_dict(), indent=2))
    return 0


def _demo(args: argparse.Namespace) -> int:
    from spillway.local.demo import DemoOptions, run_demo

    chart = Path(args.chart)
    options = DemoOptions.short(chart) if args.quick else DemoOptions(chart=chart)
    if args.no_teams or args.no_night:
        options = replace(options, teams=not args.no_teams, night=not args.no_night)
    result = run_demo(options)
    print(f"\nchart: {result.chart}   the functions' logs: {result.log}   ({result.elapsed:.0f} s)")
    return 0 if result.complete else 1


def _simulate(args: argparse.Namespace) -> int:
    from spillway.sim.command import run

    return run(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spillway", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("plan", help="plan scale actions for a cluster, offline, as the planner Lambda would")
    p.add_argument("--cluster", required=True, metavar="FILE", help="kubectl get nodes,pods,pdb -A -o json")
    p.add_argument(
        "--asgs",
        action="append",
        default=[],
        metavar="FILE",
        help="aws autoscaling describe-auto-scaling-groups (repeatable, one per region)",
    )
    p.add_argument(
        "--activities",
        action="append",
        default=[],
        metavar="FILE",
        help="aws autoscaling describe-scaling-activities (repeatable)",
    )
    p.add_argument(
        "--scheduled-actions",
        action="append",
        default=[],
        metavar="FILE",
        help="aws autoscaling describe-scheduled-actions (repeatable): floors for scale-down, and the "
        "size a group is drained down to ahead of an action that lowers it",
    )
    p.add_argument(
        "--warm-pool",
        action="append",
        default=[],
        metavar="GROUP=FILE",
        help="aws autoscaling describe-warm-pool for GROUP (its name or ARN; repeatable, one per group)",
    )
    p.add_argument(
        "--lifecycle-hooks",
        action="append",
        default=[],
        metavar="GROUP=FILE",
        help="aws autoscaling describe-lifecycle-hooks for GROUP (its name or ARN; repeatable, one per group)",
    )
    p.add_argument(
        "--lifecycle-hook-names",
        metavar="NAMES",
        help="comma list of Spillway's terminate hooks, as the stack's LifecycleHookNames "
        "(default drain-before-terminate)",
    )
    p.add_argument(
        "--nodegroup",
        action="append",
        default=[],
        metavar="FILE",
        help="aws eks describe-nodegroup (repeatable, one per EKS managed node group)",
    )
    p.add_argument(
        "--instances",
        action="append",
        default=[],
        metavar="FILE",
        help="aws ec2 describe-instances (repeatable): a fleet gang's instances, for the gang sweep",
    )
    p.add_argument(
        "--zones",
        action="append",
        default=[],
        metavar="FILE",
        help="aws ec2 describe-availability-zones (repeatable, one per region): the zones' ids",
    )
    p.add_argument(
        "--instance-types",
        metavar="FILE",
        help="aws ec2 describe-instance-types (default: the bundled catalogue)",
    )
    p.add_argument("--config", metavar="FILE", help="planner configuration, YAML or JSON")
    p.add_argument("--state", metavar="FILE", help="planner state, JSON")
    p.add_argument("--state-out", metavar="FILE", help="write the new state here")
    p.add_argument("--now", metavar="ISO-8601", help="the time to plan at (default: now)")
    p.set_defaults(func=_plan)

    d = sub.add_parser("demo", help="show Spillway at work on the embedded local stack")
    d.add_argument(
        "--chart", metavar="FILE", default="out/demo.png", help="the PNG chart (default: %(default)s)"
    )
    d.add_argument("--quick", action="store_true", help="a shorter run (fewer jobs, faster time)")
    d.add_argument("--no-teams", action="store_true", help="skip scene 2, the shared cluster")
    d.add_argument("--no-night", action="store_true", help="skip scene 3, the night")
    d.set_defaults(func=_demo)

    from spillway.sim.command import add_arguments as simulate_arguments

    s = sub.add_parser("simulate", help="replay a workload trace through the planner and reference policies")
    simulate_arguments(s)
    s.set_defaults(func=_simulate)
    return parser


# Every character str.splitlines() breaks at, shown escaped so an error stays one line.
_LINE_BREAKS = str.maketrans({c: repr(c)[1:-1] for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"})


def one_line(message: str) -> str:
    """An error message as one line: a newline inside a JSON key or a file name is shown escaped."""
    return message.translate(_LINE_BREAKS)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except InputError as exc:
        print(f"spillway {args.command}: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (``spillway simulate ... | head -1``): nothing more to say to it.
        # Point stdout at /dev/null so the interpreter's final flush does not fail again.
        _silence_stdout()
        return 1
    return code


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass  # not a real file (captured in tests): nothing will flush into a closed pipe


if __name__ == "__main__":
    sys.exit(main())
