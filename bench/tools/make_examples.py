"""Writes the example inputs in events/ (what `make demo` plans until the local stack exists).

A two-region ML cluster "ml": CPU and GPU groups in us-east-1 (primary) and us-west-2. A burst of
8-GPU training jobs arrives; the primary GPU group can add three nodes before MaxSize, so the rest
spills over to us-west-2. Run: `.venv/bin/python bench/tools/make_examples.py`.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from spillway.local import objects as o

EVENTS = Path(__file__).resolve().parents[2] / "events"
GPU_TAINT = {"nvidia.com/gpu": "present:NoSchedule"}


def main() -> None:
    t0 = o.EPOCH
    cpu_e = [o.instance_id(f"cpu-east-{i}") for i in range(3)]
    gpu_e = [o.instance_id("gpu-east-0")]
    gpu_w = [o.instance_id("gpu-west-0")]
    groups_east = [
        o.asg("ml-cpu-east", min_size=1, max_size=10, desired=3, instance_type="m5.2xlarge", instances=cpu_e),
        o.asg(
            "ml-gpu-east",
            min_size=0,
            max_size=4,
            desired=1,
            instance_type="p4d.24xlarge",
            instances=gpu_e,
            labels={"spillway.io/accelerator": "nvidia"},
            taints=GPU_TAINT,
        ),
    ]
    groups_west = [
        o.asg(
            "ml-cpu-west", region="us-west-2", min_size=0, max_size=10, desired=0, instance_type="m5.2xlarge"
        ),
        o.asg(
            "ml-gpu-west",
            region="us-west-2",
            min_size=0,
            max_size=8,
            desired=1,
            instance_type="p4d.24xlarge",
            instances=gpu_w,
            labels={"spillway.io/accelerator": "nvidia"},
            taints=GPU_TAINT,
        ),
    ]
    items = []
    names = {}
    for iid in cpu_e:
        names[iid] = o.node_name_for(iid)
        items.append(o.node(names[iid], instance=iid, instance_type="m5.2xlarge"))
    gpu_node_args = {
        "instance_type": "p4d.24xlarge",
        "cpu": "95",
        "memory": "1100Gi",
        "pods": "737",
        "gpus": 8,
        "labels": {"spillway.io/accelerator": "nvidia"},
        "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
    }
    ge = o.node_name_for(gpu_e[0])
    gw = o.node_name_for(gpu_w[0], "us-west-2")
    items.append(o.node(ge, instance=gpu_e[0], **gpu_node_args))
    items.append(
        o.node(gw, instance=gpu_w[0], zone="us-west-2a", **gpu_node_args, created=t0 - timedelta(hours=3))
    )
    for name in [*names.values(), ge, gw]:
        items.append(o.daemonset_pod(f"aws-node-{name[3:14]}", name))
    # Work already running: services on the CPU nodes, one 8-GPU job in the primary region.
    for i, iid in enumerate(cpu_e[:2]):
        for j in range(3):
            items.append(
                o.pod(
                    f"api-{i}{j}",
                    "serving",
                    cpu="2",
                    memory="6Gi",
                    node_name=names[iid],
                    owner=("ReplicaSet", "api-7d9f"),
                )
            )
    items.append(
        o.pod(
            "train-llm-0",
            "research",
            cpu="90",
            memory="900Gi",
            gpus=8,
            node_name=ge,
            tolerations=[o.GPU_TOLERATION],
            owner=("Job", "train-llm"),
        )
    )
    # The burst: six 8-GPU jobs, four 1-GPU notebooks, one pod nothing can run, one expendable pod.
    for i in range(6):
        items.append(
            o.pod(
                f"sweep-{i}",
                "research",
                cpu="90",
                memory="900Gi",
                gpus=8,
                tolerations=[o.GPU_TOLERATION],
                node_selector={"spillway.io/accelerator": "nvidia"},
                owner=("Job", f"sweep-{i}"),
                priority=1000,
            )
        )
    for i in range(4):
        items.append(
            o.pod(
                f"notebook-{i}",
                "research",
                cpu="8",
                memory="60Gi",
                gpus=1,
                tolerations=[o.GPU_TOLERATION],
                owner=("Job", f"nb-{i}"),
            )
        )
    items.append(
        o.pod(
            "too-big-0",
            "research",
            cpu="8",
            memory="64Gi",
            gpus=16,
            tolerations=[o.GPU_TOLERATION],
            owner=("Job", "too-big"),
        )
    )
    items.append(
        o.pod("backfill-0", "batch", cpu="4", memory="8Gi", priority=-100, owner=("Job", "backfill"))
    )
    items.append(o.pdb("api", "serving", {"app": "api"}, min_available=4, disruptions_allowed=2))

    files = {
        "example-cluster.json": o.kube_list(items),
        "example-asgs-us-east-1.json": o.asgs_output(groups_east),
        "example-asgs-us-west-2.json": o.asgs_output(groups_west),
        "example-activities.json": o.activities_output([]),
        "example-state.json": {
            "nodes": {names[cpu_e[2]]: {"idle_since": "2026-11-02T09:30:00Z"}},
            "groups": {},
        },
    }
    for name, doc in files.items():
        (EVENTS / name).write_text(json.dumps(doc, indent=1) + "\n")
    (EVENTS / "example-config.yaml").write_text(
        "# Planner configuration for the example cluster (spillway plan --config).\n"
        "cluster: ml\n"
        "regions: [us-east-1, us-west-2]   # primary first\n"
        "scale_down_idle_minutes: 10\n"
        "scale_down_delay_after_launch_minutes: 10\n"
        "max_scale_in_fraction: 0.1\n"
        "launch_failure_backoff_minutes: 15\n"
        "expendable_priority_cutoff: -10\n"
        "node_reserve: {cpu: 100m, memory: 1Gi}\n"
    )


if __name__ == "__main__":
    main()
