"""The gang sweep's EC2 read, region by region: a failed one fails no observation, and is counted.

observe reads the instances a fleet-mode gang launch tagged (``aws.fleet_instances``) in every region;
a region whose DescribeInstances fails is left out of that snapshot (the sweep misses it for a tick) and
the observation goes on. That was only a log line: a region whose read kept failing (a role or an SCP
refusing EC2 there, a region not opted in, another tool spending the account's DescribeInstances tokens)
left the sweep blind there for good, its orphans running, paid for, with nothing to alarm on. Each
observation now counts the regions whose read failed (``GangInstanceReadsFailed``, 0 too) and names
them in its log line; the ``gang-sweep-blind`` alarm reads the count.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fakes import FakeCloud, FakeCluster, FakeSnapshots

from spillway.errors import AwsThrottled
from spillway.local import objects as o
from spillway.model.fleet import FleetInstance

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "ml"
INSTANCE = "i-0a1b2c3d4e5f60718"


def observe_app() -> Any:
    spec = importlib.util.spec_from_file_location("observe_gang_reads_app", ROOT / "functions/observe/app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class BlindIn(FakeCloud):
    """A cloud whose gang-instance read is refused in ``blind`` regions, as the adapter refuses it."""

    def __init__(self, *blind: str) -> None:
        super().__init__(cluster=CLUSTER)
        self.blind = set(blind)

    def fleet_instances(self, region: str, instance_ids: Any = ()) -> list[FleetInstance]:
        if region in self.blind:
            raise AwsThrottled(
                f"DescribeInstances({region}, gang attempts of {CLUSTER}): Throttling: Rate exceeded"
            )
        return super().fleet_instances(region, instance_ids)


def run_handler(
    monkeypatch: pytest.MonkeyPatch, cloud: FakeCloud, pods: Sequence[dict[str, Any]] = ()
) -> list[dict[str, Any]]:
    """One observe invocation (one observation: a window of 0) through the real handler, the cluster's
    one node and ``pods``; its EMF documents."""
    from spillway.config import PlannerConfig
    from spillway.observe import ObserveConfig

    app = observe_app()
    cloud.add_group("gpu", [INSTANCE], region="us-east-1", desired=1, max_size=3, instance_type="g5.xlarge")
    kube = FakeCluster([o.node("ip-10-0-1-10.ec2.internal", instance=INSTANCE, zone="us-east-1a")], pods)
    clients = SimpleNamespace(
        config=SimpleNamespace(cluster_name=CLUSTER, observe_window_seconds=0, planner=PlannerConfig()),
        kube=kube,
        aws=cloud,
        snapshots=FakeSnapshots(),
        observe_config=lambda: ObserveConfig(cluster=CLUSTER),
    )
    monkeypatch.setattr(app, "get_clients", lambda: clients)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Spillway")
    out = io.StringIO()
    context = SimpleNamespace(
        function_name=f"spillway-{CLUSTER}-observe",
        memory_limit_in_mb=512,
        invoked_function_arn="",
        aws_request_id="0f6a1b2c-3d4e-5f60-7182-93a4b5c6d7e8",
        get_remaining_time_in_millis=lambda: 60_000,
    )
    with contextlib.redirect_stdout(out):
        app.handler({}, context)
    return [
        json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{") and '"_aws"' in line
    ]


def metric_values(docs: list[dict[str, Any]], name: str) -> list[float]:
    """Every value of ``name`` in the documents, with the dimensions its directive gives it."""
    values: list[float] = []
    for doc in docs:
        for directive in doc["_aws"]["CloudWatchMetrics"]:
            if any(m["Name"] == name for m in directive["Metrics"]):
                assert directive["Namespace"] == "Spillway"
                assert [sorted(d) for d in directive["Dimensions"]] == [["Cluster", "service"]]
                assert (doc["Cluster"], doc["service"]) == (CLUSTER, "spillway")
                value = doc[name]
                values += value if isinstance(value, list) else [value]
    return values


def test_a_region_whose_gang_instance_read_fails_is_counted_and_named_and_fails_no_observation(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    docs = run_handler(monkeypatch, BlindIn("us-west-2"))

    assert metric_values(docs, "GangInstanceReadsFailed") == [1]
    assert metric_values(docs, "SnapshotsWritten") == [1]  # the observation was stored all the same
    observed = [r for r in caplog.records if r.getMessage() == "observed"]
    assert [getattr(r, "gang_reads_failed", None) for r in observed] == [["us-west-2"]]
    failed = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("us-west-2" in m and "Rate exceeded" in m for m in failed), failed


def test_every_region_blind_counts_each_region(monkeypatch: pytest.MonkeyPatch) -> None:
    docs = run_handler(monkeypatch, BlindIn("us-east-1", "us-west-2"))

    assert metric_values(docs, "GangInstanceReadsFailed") == [2]


def test_an_observation_that_read_every_region_counts_zero(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """0, not nothing: the alarm takes the least count of each period, which a healthy observation must
    pull to 0."""
    caplog.set_level(logging.INFO)
    docs = run_handler(monkeypatch, BlindIn())

    assert metric_values(docs, "GangInstanceReadsFailed") == [0]
    observed = [r for r in caplog.records if r.getMessage() == "observed"]
    assert [getattr(r, "gang_reads_failed", None) for r in observed] == [[]]


def test_the_oldest_pending_wait_leaves_out_pods_below_the_expendable_cutoff(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An expendable pod (priority below ``expendable_priority_cutoff``, -10) pending for an hour never
    triggers a scale-up, by design: OldestPendingSeconds (the pending-too-long alarm) counted it and
    paged with nothing to do. A pod at the cutoff still counts. (Found by hunt-state.)"""
    from datetime import UTC, datetime, timedelta

    hour_ago = datetime.now(UTC) - timedelta(hours=1)
    minutes_ago = datetime.now(UTC) - timedelta(minutes=20)
    expendable = [o.pod("filler", created=hour_ago, priority=-100)]
    assert metric_values(run_handler(monkeypatch, BlindIn(), expendable), "OldestPendingSeconds") == [0]
    counted = [*expendable, o.pod("job", created=minutes_ago, priority=-10)]
    [oldest] = metric_values(run_handler(monkeypatch, BlindIn(), counted), "OldestPendingSeconds")
    assert 20 * 60 - 5 < oldest < 20 * 60 + 60
