"""How Spillway reads a Kubeflow training job's elastic range when fields are unset, against what the
training operator (kubeflow/training-operator v1.7 to v1.9) does with the same stored object.

The operator persists no defaults (its webhooks only validate); its reconciler defaults an in-memory
copy (pkg/apis/kubeflow.org/v1/pytorch_defaults.go, ``SetDefaults_PyTorchJob``: Worker ``replicas`` 1
when unset, then ``setElasticPolicy``: an unset bound takes the other, both unset take the Worker
replicas) and writes ``PET_NNODES=MIN:MAX`` into the workers (pkg/controller.v1/pytorch/elastic.go).
A PaddleJob's elasticPolicy reaches no pod (pkg/controller.v1/paddlepaddle/envvar.go: ``PADDLE_NNODES``
is the total replica count). Each case: the stored object, and the (min, max) the workers really run
with, None for a fixed size.
"""

from __future__ import annotations

from typing import Any

import pytest

from spillway.model.jobs import JobInfo, job_of
from spillway.model.k8s import iter_kube_list


def _job(kind: str, elastic: dict[str, Any] | None, worker: dict[str, Any] | None) -> dict[str, Any]:
    specs = "pytorchReplicaSpecs" if kind == "PyTorchJob" else "paddleReplicaSpecs"
    spec: dict[str, Any] = {specs: {} if worker is None else {"Worker": worker}}
    if elastic is not None:
        spec["elasticPolicy"] = elastic
    return {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": "j", "namespace": "ml"},
            "spec": spec}  # fmt: skip


def _read(raw: dict[str, Any]) -> JobInfo | None:
    [obj] = iter_kube_list({"kind": "List", "items": [raw]})
    return job_of(obj)


CASES = [
    # PyTorchJob: only both bounds set, and apart, make a range
    ("both-bounds", "PyTorchJob", {"minReplicas": 2, "maxReplicas": 8}, {"replicas": 4}, (2, 8)),
    ("both-bounds-replicas-unset", "PyTorchJob", {"minReplicas": 1, "maxReplicas": 4}, {}, (1, 4)),
    # defaulted in memory to MIN=MAX=Worker replicas (4): PET_NNODES=4:4, a fixed size
    ("empty-policy", "PyTorchJob", {}, {"replicas": 4}, None),
    ("only-rendezvous-settings", "PyTorchJob", {"rdzvBackend": "c10d", "maxRestarts": 3}, {"replicas": 4}, None),
    # Worker replicas unset: 1, and so 1:1
    ("empty-policy-replicas-unset", "PyTorchJob", {}, {}, None),
    # one bound: the other takes it (pytorch_defaults.go, setElasticPolicy)
    ("min-only", "PyTorchJob", {"minReplicas": 2}, {"replicas": 4}, None),
    ("max-only", "PyTorchJob", {"maxReplicas": 8}, {"replicas": 2}, None),
    ("min-above-max", "PyTorchJob", {"minReplicas": 4, "maxReplicas": 2}, {"replicas": 4}, None),
    ("no-policy", "PyTorchJob", None, {"replicas": 4}, None),
    # the webhook refuses an elasticPolicy without a Worker (pkg/webhooks/pytorch, validateSpec)
    ("no-worker", "PyTorchJob", {}, None, None),
    # PaddleJob: whatever its policy says, its pods run a fixed PADDLE_NNODES
    ("paddle-both-bounds", "PaddleJob", {"minReplicas": 1, "maxReplicas": 3}, {"replicas": 3}, None),
    ("paddle-empty-policy", "PaddleJob", {}, {"replicas": 3}, None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "elastic", "worker", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_the_range_is_what_the_operator_gives_the_workers(
    kind: str, elastic: dict[str, Any] | None, worker: dict[str, Any] | None, expected: tuple[int, int] | None
) -> None:
    info = _read(_job(kind, elastic, worker))
    got = None if info is None or not info.elastic else (info.elastic_min, info.elastic_max)
    assert got == expected
    if expected is not None:
        assert info is not None and info.key == f"{kind}/ml/j"
