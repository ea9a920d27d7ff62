"""Benchmark: observe a 5,000-node, 50,000-pod cluster and store the snapshot.

The cluster is served by the local Kubernetes API emulator in a *separate process* (so its copy of the
objects does not count against the observer's memory) and read through the real ``KubeClient``; the
Auto Scaling groups (two regions) and the DynamoDB table live in moto, in this process.

Prints figures, never pass/fail: seconds (wall, ``time.perf_counter``, and CPU of the process doing
the work, ``time.process_time``: the observer's in this one, the emulator's fill in its own; on a
machine shared with other work CPU seconds hold steady where wall seconds swing), compressed snapshot bytes per 1,000 pods, DynamoDB items
written, peak memory (tracemalloc's peak of Python allocations, and the process's ru_maxrss). Targets:
under 256 MB, and under 40 bytes per pod compressed.

    .venv/bin/python bench/observe.py [--nodes 5000] [--pods 50000] [--codec zlib|lzma]
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import os
import resource
import time
import tracemalloc
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CLUSTER = "bench"
MB = 2**20


def generate(nodes: int, pods: int, pending: int) -> list[dict[str, Any]]:
    """The generated cluster of :func:`spillway.local.objects.fleet`: three DaemonSet pods per node
    (aws-node, kube-proxy, node-exporter), Job pods spread over the nodes, ``pending`` unbound, a PDB for
    each of seven teams."""
    from spillway.local import objects as o

    world = o.fleet(
        nodes, pods, pending=pending, seed="bench", daemonsets=("aws-node", "kube-proxy", "node-exporter"), pdbs=7
    )  # fmt: skip
    return world.kube_objects()


def serve(conn: Connection, nodes: int, pods: int, pending: int) -> None:
    """Child process: fill the emulator, report its URL, serve until told to stop."""
    from spillway.local.kubeapi import KubeApiServer

    started, cpu = time.perf_counter(), time.process_time()
    server = KubeApiServer()
    try:
        for obj in generate(nodes, pods, pending):
            server.add(obj)
        gc.collect()
        server.start()
    except Exception as exc:
        conn.send((None, f"{type(exc).__name__}: {exc}"))
        raise
    conn.send((server.url, (time.perf_counter() - started, time.process_time() - cpu)))
    conn.recv()
    server.stop()


def _status(field: str) -> float:
    """``VmRSS``/``VmHWM`` of this process from /proc, in MB (0 where /proc is not there)."""
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return 0.0
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def reset_peak_rss() -> bool:
    """Linux ≥ 4.0: make the peak RSS (VmHWM) the current RSS, to measure one phase's peak."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def import_baseline(conn: Connection) -> None:
    """Child process: RSS after importing what the observe Lambda imports (no moto), in MB."""
    import boto3

    import spillway.adapters.kube
    import spillway.observe  # noqa: F401

    boto3.client("dynamodb", region_name="us-east-1")
    boto3.client("autoscaling", region_name="us-east-1")
    conn.send(_status("VmRSS"))


def setup_aws(regions: tuple[str, ...]) -> None:
    import boto3

    from spillway.local.cfn import create_tables
    from spillway.local.rig import create_group

    for region in regions:
        for name, itype, desired in (
            ("cpu", "m5.2xlarge", 40),
            ("gpu", "g5.12xlarge", 8),
            ("spot", "m5.4xlarge", 10),
        ):
            create_group(
                f"{name}-{region}", region=region, instance_type=itype, desired=desired, max_size=500,
                cluster=CLUSTER, mixed=False,
            )  # fmt: skip
    create_tables(
        REPO / "template.yaml",
        boto3.client("dynamodb", region_name=regions[0]),
        {"SnapshotsTable": "snapshots"},
    )


def build_parser() -> argparse.ArgumentParser:
    """The script's flags (the README's test reads them from here)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5_000)
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--pending", type=int, default=500)
    parser.add_argument("--page-size", type=int, default=500)
    parser.add_argument("--codec", choices=("zlib", "lzma"), default="zlib")
    return parser


def main() -> None:
    args = build_parser().parse_args()
    for var, value in (
        ("AWS_ACCESS_KEY_ID", "bench"),
        ("AWS_SECRET_ACCESS_KEY", "bench"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ):
        os.environ[var] = value

    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    probe = ctx.Process(target=import_baseline, args=(there,))
    probe.start()
    lambda_baseline = here.recv()
    probe.join()
    parent, child = ctx.Pipe()
    server = ctx.Process(target=serve, args=(child, args.nodes, args.pods, args.pending), daemon=True)
    server.start()
    url, fill_seconds = parent.recv()
    if url is None:
        raise SystemExit(f"the emulator process failed: {fill_seconds}")
    print(
        f"emulator: {args.nodes} nodes, {args.pods} pods loaded in {fill_seconds[0]:.1f} s wall, "
        f"{fill_seconds[1]:.1f} s CPU (separate process)"
    )

    import boto3
    from moto import mock_aws

    from spillway.adapters.aws import AwsAdapter, AwsClients
    from spillway.adapters.kube import KubeClient
    from spillway.adapters.store import SnapshotStore
    from spillway.observe import ObserveConfig, observe_once

    regions = ("us-east-1", "us-west-2")
    config = ObserveConfig(cluster=CLUSTER)
    with mock_aws():
        setup_aws(regions)
        kube = KubeClient.for_url(url, page_size=args.page_size, request_timeout=60)
        aws = AwsAdapter(AwsClients(regions, boto3.Session()), CLUSTER)
        store = SnapshotStore(boto3.client("dynamodb", region_name=regions[0]), "snapshots", codec=args.codec)

        def clock() -> datetime:
            return datetime.now(UTC)

        aws.node_groups_in(regions[0], {}, clock())  # warm the instance-type cache, as a warm container has
        gc.collect()
        baseline = _status("VmRSS")
        can_reset = reset_peak_rss()

        # Pass 1, timed (tracemalloc slows allocation down, so it is off here), with the peak RSS of
        # each phase (VmHWM reset before it).
        t, c = time.perf_counter(), time.process_time()
        snapshot = observe_once(kube, aws, config, clock)
        observe_seconds = time.perf_counter() - t, time.process_time() - c
        t, c = time.perf_counter(), time.process_time()
        store.save(snapshot)
        save_seconds = time.perf_counter() - t, time.process_time() - c
        saved = store.last_save
        assert saved is not None
        counts = snapshot.counts()
        observe_hwm = _status("VmHWM") if can_reset else 0.0
        del snapshot
        gc.collect()
        load_base = _status("VmRSS")
        reset_peak_rss()
        t, c = time.perf_counter(), time.process_time()
        loaded = store.latest(CLUSTER)
        load_seconds = time.perf_counter() - t, time.process_time() - c
        load_hwm = _status("VmHWM") if can_reset else 0.0
        assert loaded is not None and len(loaded.cluster.pods) == counts.pods
        groups = len(loaded.groups)
        del loaded
        gc.collect()
        rss_untraced = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

        # Pass 2, the same work under tracemalloc for the peak of Python allocations.
        tracemalloc.start()
        snapshot = observe_once(kube, aws, config, clock)
        store.save(snapshot)
        _, observe_peak = tracemalloc.get_traced_memory()
        del snapshot
        gc.collect()
        tracemalloc.reset_peak()
        store.latest(CLUSTER)
        _, load_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()

    parent.send("stop")
    server.join(timeout=10)

    pods = counts.pods
    print(f"snapshot: {counts.nodes} nodes, {pods} pods ({counts.pending_pods} pending), {groups} groups")
    print("                                          wall s    CPU s")
    print(f"observe (Kubernetes + 2 regions of AWS):  {observe_seconds[0]:7.2f}  {observe_seconds[1]:7.2f}")
    print(
        f"encode + compress + save:                 {save_seconds[0]:7.2f}  {save_seconds[1]:7.2f}  (codec {args.codec})"
    )
    print(f"latest() read back + decode (plan side):  {load_seconds[0]:7.2f}  {load_seconds[1]:7.2f}")
    print(f"JSON bytes per pod (uncompressed):        {saved.raw_size / pods:7.1f}")
    print(
        f"stored bytes per 1,000 pods (compressed): {saved.size / pods * 1000:7.0f}  ({saved.size / pods:.1f} per pod)"
    )
    print(
        f"snapshot size compressed:                 {saved.size / MB:7.2f} MB in {saved.items} DynamoDB items "
        f"({saved.chunks} chunks + manifest)"
    )
    print(f"tracemalloc peak, observe + save:         {observe_peak / MB:7.1f} MB")
    print(f"tracemalloc peak, latest():               {load_peak / MB:7.1f} MB")
    print(
        f"ru_maxrss (process peak, no tracemalloc): {rss_untraced:7.1f} MB  (includes moto's ~180 MB EC2 backend)"
    )
    if observe_hwm:
        print(
            f"peak RSS, observe + save:                 {observe_hwm:7.1f} MB  = {baseline:.1f} MB before "
            f"(Python, boto3, kubernetes, moto) + {observe_hwm - baseline:.1f} MB"
        )
        print(
            f"peak RSS, latest():                       {load_hwm:7.1f} MB  = {load_base:.1f} MB before "
            f"+ {load_hwm - load_base:.1f} MB"
        )
    growth = max(observe_peak / MB, observe_hwm - baseline if observe_hwm else 0.0)
    print(
        f"observe Lambda estimate (no moto):        {lambda_baseline + growth:7.1f} MB  = "
        f"{lambda_baseline:.1f} MB after imports (fresh process) + {growth:.1f} MB observing "
        f"(the larger of tracemalloc peak and RSS growth)"
    )


if __name__ == "__main__":
    main()
