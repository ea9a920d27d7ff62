"""Planner benchmark: parse vs plan on generated clusters of 1k, 5k and 10k nodes.

The 5k-node cluster is the issue's reference: 50 groups over 2 regions, 100,000 running pods and
20,000 pending pods in about 200 equivalence classes; the other sizes scale nodes and pods alike.
It prints, per size, the seconds to parse the inputs (JSON text as kubectl and the AWS CLI print it,
into models), the seconds to plan, their ratio, and the peak memory of parse + plan (tracemalloc, in
a second pass so the timings are not slowed by it). Figures, not pass/fail. Each time is printed twice:
wall seconds (``time.perf_counter``) and CPU seconds of this process (``time.process_time``), which a
machine shared with other work leaves steady where wall seconds swing; the ratios and the growth line
are of CPU seconds.

Each size is planned a second time with one running pod in ten expendable (priority below
``expendable_priority_cutoff``, which pending pods of priority 0 may preempt), and that plan time is
printed beside the first with their ratio: every class that free room does not hold then looks for
room by preemption (spillway.planner.preemption), which the plain cluster never does.

Run: `.venv/bin/python bench/planner.py [--sizes 1000,5000,10000]`
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import tracemalloc
from datetime import timedelta
from typing import Any

from spillway.config import PlannerConfig
from spillway.local import objects as o
from spillway.model.aws import bundled_instance_types, parse_asgs
from spillway.model.cluster import ClusterSnapshot
from spillway.model.k8s import iter_kube_list
from spillway.model.nodegroup import build_node_groups
from spillway.model.state import State
from spillway.perf import bulk_allocation
from spillway.planner import codes, plan

NOW = o.EPOCH + timedelta(hours=6)
REGIONS = ("us-east-1", "us-west-2")
# (instance type, allocatable as the kubelet reports it, GPUs)
TYPES = [
    ("m5.4xlarge", "15890m", "60Gi", 0),
    ("c5.4xlarge", "15890m", "28Gi", 0),
    ("r5.2xlarge", "7910m", "60Gi", 0),
    ("g5.12xlarge", "47810m", "180Gi", 4),
    ("p4d.24xlarge", "95", "1100Gi", 8),
]
GROUPS = 50
RUNNING_PER_NODE = 20
PENDING_PER_NODE = 4
EXPENDABLE_EVERY = 10  # the expendable variant: every tenth running pod
EXPENDABLE_PRIORITY = -100  # below expendable_priority_cutoff (-10 by default), below pending pods' 0


def node_kinds() -> list[o.NodeKind]:
    """50 groups over 2 regions and 10 pools; the GPU groups' nodes are tainted."""
    kinds = []
    for gi in range(GROUPS):
        itype, cpu, mem, gpus = TYPES[gi % len(TYPES)]
        pool = f"pool-{gi % 10}"
        kinds.append(
            o.NodeKind(
                f"bench-{pool}-{itype.replace('.', '-')}-{gi}", instance_type=itype, cpu=cpu, memory=mem,
                gpus=gpus, pods="234", region=REGIONS[gi % 2], labels={"spillway.io/pool": pool},
                taints={"nvidia.com/gpu": "present:NoSchedule"} if gpus else {},
            )
        )  # fmt: skip
    return kinds


def pending_kinds() -> list[o.PodKind]:
    """About 200 equivalence classes: CPU, memory, GPUs, and with or without a pool selector."""
    kinds = []
    for cpu in ("250m", "500m", "1", "2", "4"):
        for mem in ("1Gi", "4Gi", "16Gi", "64Gi"):
            for gpus in (0, 1, 4, 8, 0, 2):
                for pool in (None, f"pool-{len(kinds) % 10}"):
                    kinds.append(o.PodKind(cpu, mem, gpus, {"spillway.io/pool": pool} if pool else None))
    return kinds[:200]


def generate(nodes: int, expendable: bool = False) -> tuple[str, list[str]]:
    """kubectl JSON text for the cluster, and AWS CLI JSON text per region
    (:func:`spillway.local.objects.fleet`); with ``expendable``, every tenth running pod at
    EXPENDABLE_PRIORITY."""
    world = o.fleet(
        nodes, nodes * (RUNNING_PER_NODE + PENDING_PER_NODE), pending=nodes * PENDING_PER_NODE,
        region=REGIONS[0], seed="bench", daemonsets=(), pdbs=0, kinds=node_kinds(),
        pending_kinds=pending_kinds(), cluster_name="bench",
    )  # fmt: skip
    if expendable:
        running = [p for p in world.pods if p["spec"].get("nodeName")]
        for pod in running[::EXPENDABLE_EVERY]:
            pod["spec"]["priority"] = EXPENDABLE_PRIORITY
    cluster_text = json.dumps(o.kube_list(world.kube_objects()))
    asg_texts = [json.dumps(o.asgs_output(world.asgs.get(r, []))) for r in REGIONS]
    return cluster_text, asg_texts


def parse(cluster_text: str, asg_texts: list[str], config: PlannerConfig) -> tuple[Any, Any]:
    """What `spillway plan` does with its input files (spillway.inputs), minus the file reads."""
    with bulk_allocation():
        doc = json.loads(cluster_text)
        snapshot = ClusterSnapshot.from_objects("bench", NOW, iter_kube_list(doc, release=True))
        del doc
        asgs = [g for text in asg_texts for g in parse_asgs(json.loads(text))]
        reserve = config.node_reserve.reserve()
        groups = build_node_groups(asgs, [], bundled_instance_types(), reserve, "bench")
    return snapshot, groups


def run_plan(snapshot: Any, groups: Any, config: PlannerConfig) -> Any:
    """What `spillway plan` and the plan Lambda do (spillway.cli, functions/plan)."""
    with bulk_allocation():
        return plan(snapshot, groups, config, State(), NOW)


def measure(nodes: int) -> dict[str, Any]:
    config = PlannerConfig(cluster="bench", regions=REGIONS)
    cluster_text, asg_texts = generate(nodes)
    gc.collect()
    t0, c0 = time.perf_counter(), time.process_time()
    snapshot, groups = parse(cluster_text, asg_texts, config)
    t1, c1 = time.perf_counter(), time.process_time()
    result = run_plan(snapshot, groups, config)
    t2, c2 = time.perf_counter(), time.process_time()
    pending = sum(1 for p in snapshot.pods if p.is_pending_unschedulable())
    del snapshot, groups
    gc.collect()
    tracemalloc.start()
    snapshot, groups = parse(cluster_text, asg_texts, config)
    _, parse_peak = tracemalloc.get_traced_memory()
    resident, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    run_plan(snapshot, groups, config)
    _, plan_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "nodes": nodes,
        "pods": len(snapshot.pods),
        "pending": pending,
        "classes": len({p.scheduling_key() for p in snapshot.pods if p.is_pending_unschedulable()}),
        "input_mb": (len(cluster_text) + sum(map(len, asg_texts))) / 2**20,
        "parse_s": t1 - t0,
        "plan_s": t2 - t1,
        "parse_cpu_s": c1 - c0,
        "plan_cpu_s": c2 - c1,
        "ratio": (c2 - c1) / (c1 - c0),
        "parse_peak_mib": parse_peak / 2**20,
        "snapshot_mib": resident / 2**20,
        "plan_peak_mib": plan_peak / 2**20,
        "scale_up_groups": len(result.scale_up),
        "new_nodes": sum(s.to_size - s.from_size for s in result.scale_up),
    }


def measure_expendable(nodes: int) -> dict[str, Any]:
    """The plan time of the same cluster with one running pod in ten expendable, and how many pending
    pods it plans by preemption."""
    config = PlannerConfig(cluster="bench", regions=REGIONS)
    cluster_text, asg_texts = generate(nodes, expendable=True)
    snapshot, groups = parse(cluster_text, asg_texts, config)
    del cluster_text
    gc.collect()
    t0, c0 = time.perf_counter(), time.process_time()
    result = run_plan(snapshot, groups, config)
    t1, c1 = time.perf_counter(), time.process_time()
    preempting = sum(1 for p in result.pending if p.code == codes.FITS_BY_PREEMPTION)
    return {"plan_s": t1 - t0, "plan_cpu_s": c1 - c0, "preempting": preempting}


def build_parser() -> argparse.ArgumentParser:
    """The script's flags (the README's test reads them from here)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="1000,5000,10000", help="comma-separated node counts")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    rows = []
    header = (
        f"{'nodes':>6} {'pods':>8} {'pending':>8} {'classes':>7} {'input MiB':>9} {'parse wall s':>12} "
        f"{'parse CPU s':>11} {'plan wall s':>11} {'plan CPU s':>10} {'plan/parse':>10} {'peak parse MiB':>14} "
        f"{'snapshot MiB':>12} {'peak plan MiB':>13} {'new nodes':>9} {'exp. plan wall s':>16} "
        f"{'exp. plan CPU s':>15} {'exp./plain':>10} {'preempting':>10}"
    )
    print(header)
    for size in (int(s) for s in args.sizes.split(",")):
        row = measure(size)
        row |= {f"exp_{k}": v for k, v in measure_expendable(size).items()}
        rows.append(row)
        print(
            f"{row['nodes']:>6} {row['pods']:>8} {row['pending']:>8} {row['classes']:>7} {row['input_mb']:>9.0f} "
            f"{row['parse_s']:>12.2f} {row['parse_cpu_s']:>11.2f} {row['plan_s']:>11.2f} {row['plan_cpu_s']:>10.2f} "
            f"{row['ratio']:>10.2f} {row['parse_peak_mib']:>14.0f} {row['snapshot_mib']:>12.0f} "
            f"{row['plan_peak_mib']:>13.0f} {row['new_nodes']:>9} {row['exp_plan_s']:>16.2f} "
            f"{row['exp_plan_cpu_s']:>15.2f} {row['exp_plan_cpu_s'] / row['plan_cpu_s']:>10.2f} "
            f"{row['exp_preempting']:>10}",
            flush=True,
        )
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        growth = (last["plan_cpu_s"] / first["plan_cpu_s"]) / (last["nodes"] / first["nodes"])
        print(f"plan-time growth {first['nodes']}->{last['nodes']} nodes: {growth:.2f}x linear (CPU seconds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
