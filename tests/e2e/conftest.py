"""End-to-end rig: :class:`spillway.local.Rig`, the same stack ``spillway demo`` runs on (template.yaml on
moto with CloudSim, the Kubernetes API emulator and kubelets). The real plan and scale handlers answer
the Lambda tasks; moto executes the real ASL. Waits come from the execution input, so the tests pass
small ones.

Two regions: us-east-1 (the stack's own, primary) and us-west-2. Groups are tagged for cluster ``ml``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from spillway.local import objects as o
from spillway.local.rig import CLUSTER, GPU_TOLERATION, HOME, REGIONS, WEST, Rig

__all__ = ["CLUSTER", "HOME", "REGIONS", "WEST", "Cloud", "running"]

ENVIRONMENT = {
    "CLUSTER_ACCESS": "url",
    "SCALE_UP_POLL_SECONDS": "1",
    "LAUNCH_TIMEOUT_SECONDS": "20",
    "MAX_SNAPSHOT_AGE_SECONDS": "180",
    "POWERTOOLS_METRICS_NAMESPACE": "Spillway",
    "POWERTOOLS_TRACE_DISABLED": "true",
}


class Cloud(Rig):
    """The running rig, and the pods these tests submit."""

    def pending_gpu_pods(self, prefix: str, count: int) -> list[str]:
        for i in range(count):
            self.kube.add(
                o.pod(f"{prefix}-{i}", "ml", cpu="3", memory="12Gi", gpus=1, tolerations=[GPU_TOLERATION])
            )
        return [f"ml/{prefix}-{i}" for i in range(count)]

    def web_behind_budget(self, node: str) -> None:
        """Three replicas of a web Deployment on ``node`` under a PodDisruptionBudget that lets one go at a
        time (minAvailable 2): a drain's evictions meet 429s between the kubelet's confirmations."""
        for i in range(3):
            self.kube.add(
                o.pod(f"web-{i}", "team-a", node_name=node, labels={"app": "web"},
                      owner=("ReplicaSet", "web-5d9c"), cpu="100m", memory="128Mi")
            )  # fmt: skip
        self.kube.add(o.pdb("web", "team-a", {"app": "web"}, min_available=2))


@contextmanager
def running(**overrides: str) -> Iterator[Cloud]:
    """The rig, its functions' environment ENVIRONMENT with ``overrides``; on the way out, the kubelet
    stand-ins must have had no error."""
    with Cloud({**ENVIRONMENT, **overrides}, boot_seconds=0.3, tick=0.1) as rig:
        yield rig
        assert not rig.registrar.errors, rig.registrar.errors


@pytest.fixture
def cloud() -> Iterator[Cloud]:
    with running() as rig:
        yield rig
