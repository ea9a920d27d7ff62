"""Shared fixtures: fake AWS credentials (never a real account), moto, Auto Scaling groups in moto
(:func:`spillway.local.rig.create_group`) and Kubernetes JSON (:mod:`spillway.local.objects`, the one
builder: objects shaped as the API server returns them, so parsing them runs the same code as real input).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from spillway.local import objects as o

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "template.yaml"
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _fake_aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs with fake credentials and no profile, so nothing can reach a real account."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SECURITY_TOKEN", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")


@pytest.fixture(autouse=True)
def _empty_metric_buffer() -> None:
    """Every test starts with no metric buffered. Powertools keeps one metric set per process, shared by
    every ``Metrics`` instance, and with ``POWERTOOLS_METRICS_DISABLED`` its flush leaves the set as it
    was: a test that runs handlers with metrics disabled would hand its metrics to the next test's first
    flush (a Lambda process only ever runs one function, so this is a test-suite concern)."""
    observability = sys.modules.get("spillway.observability")
    if observability is not None:
        observability.metrics.clear_metrics()
        observability.metrics.clear_default_dimensions()


@pytest.fixture
def moto_aws() -> Iterator[None]:
    from moto import mock_aws

    with mock_aws():
        yield


@pytest.fixture(scope="module")
def module_moto() -> Iterator[None]:
    """One moto for a whole module, with fake credentials (mocks do not nest: an inner one would share
    the outer's backends); for fuzz tests that build their world once."""
    from moto import mock_aws

    with pytest.MonkeyPatch.context() as env, mock_aws():
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            env.setenv(name, "testing")
        yield


@pytest.fixture
def dynamodb(moto_aws: None) -> Any:
    import boto3

    return boto3.client("dynamodb", region_name="us-east-1")


@pytest.fixture
def tables(dynamodb: Any) -> dict[str, str]:
    """The three tables created from template.yaml's own definitions; logical id → table name."""
    from spillway.local.cfn import create_tables

    names = {
        "SnapshotsTable": "spillway-snapshots",
        "PlansTable": "spillway-plans",
        "StateTable": "spillway-state",
    }
    create_tables(TEMPLATE, dynamodb, names)
    return names


# --- Auto Scaling groups in moto -------------------------------------------------------------------

CLUSTER = "prod"


def make_asg(
    region: str,
    name: str,
    *,
    instance_type: str = "m5.large",
    desired: int = 1,
    min_size: int = 0,
    max_size: int = 10,
    cluster: str | None = CLUSTER,
    enabled: bool = True,
    tags: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """An Auto Scaling group with a launch template, tagged for ``cluster`` the cluster-autoscaler way
    (:func:`spillway.local.rig.create_group`, with this suite's defaults)."""
    from spillway.local.rig import create_group

    return create_group(
        name, region=region, instance_type=instance_type, desired=desired, min_size=min_size, max_size=max_size,
        cluster=cluster, enabled=enabled, tags=tags, mixed=False,
    )  # fmt: skip


@pytest.fixture(name="make_asg")
def make_asg_fixture(moto_aws: None) -> Any:
    return make_asg


@pytest.fixture
def two_regions(moto_aws: None) -> dict[str, dict[str, Any]]:
    """us-east-1: general (m5.large) and gpu (g5.xlarge) for "prod", an untagged group, a "staging"
    group; us-west-2: p3 (p3.2xlarge, which moto does not know) for "prod". Name → group."""
    return {
        "general": make_asg("us-east-1", "general", instance_type="m5.large", desired=2, max_size=20),
        "gpu": make_asg(
            "us-east-1",
            "gpu",
            instance_type="g5.xlarge",
            desired=1,
            max_size=8,
            tags={"k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu": "present:NoSchedule"},
        ),
        "untagged": make_asg("us-east-1", "untagged", enabled=False, cluster=None),
        "staging": make_asg("us-east-1", "staging-general", cluster="staging"),
        "p3": make_asg("us-west-2", "p3", instance_type="p3.2xlarge", desired=1, max_size=4),
    }


# --- Kubernetes JSON: spillway.local.objects, dated T0 ------------------------------------------------


def generate_cluster(
    nodes: int, pods: int, *, pending: int = 0, region: str = "us-east-1", seed: str = "c"
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The Kubernetes objects of :func:`spillway.local.objects.fleet`, created at this suite's ``T0``."""
    world = o.fleet(nodes, pods, pending=pending, region=region, seed=seed, created=T0)
    return world.nodes, world.pods, world.pdbs


class KubeObjects:
    """The builders of :mod:`spillway.local.objects` as a fixture, objects created at ``T0``."""

    node = functools.partial(o.node, created=T0)
    pod = functools.partial(o.pod, created=T0)
    daemonset_pod = functools.partial(o.daemonset_pod, created=T0)
    daemonset = staticmethod(o.daemonset)
    pdb = staticmethod(o.pdb)
    cluster = staticmethod(generate_cluster)
    instance_id = staticmethod(o.instance_id)
    node_name_for = staticmethod(o.node_name_for)


@pytest.fixture
def kobj() -> type[KubeObjects]:
    return KubeObjects


def build_snapshot(
    nodes: int,
    pods: int,
    *,
    pending: int = 0,
    taken_at: datetime = T0,
    cluster: str = CLUSTER,
    groups: Sequence[Any] = (),
) -> Any:
    """A :class:`~spillway.model.snapshot.Snapshot` of a generated cluster, parsed as observe parses it."""
    from spillway.model.cluster import ClusterSnapshot
    from spillway.model.k8s import Node, Pod, PodDisruptionBudget
    from spillway.model.snapshot import Snapshot

    node_objs, pod_objs, pdb_objs = generate_cluster(nodes, pods, pending=pending)
    snapshot = ClusterSnapshot.build(
        cluster,
        taken_at,
        (Node.model_validate(n) for n in node_objs),
        (Pod.model_validate(p) for p in pod_objs),
        (PodDisruptionBudget.model_validate(p) for p in pdb_objs),
    )
    return Snapshot.build(snapshot, groups, taken_at, 1.5)


@pytest.fixture(scope="session")
def big_snapshot() -> Any:
    """20,000 pods on 2,000 nodes (built once per session: parsing takes a few seconds)."""
    return build_snapshot(2_000, 20_000, pending=150)


@pytest.fixture(name="build_snapshot")
def build_snapshot_fixture() -> Any:
    return build_snapshot
