"""Shared fixtures: fake AWS credentials (never a real account), moto, and builders of Kubernetes JSON.

The builders make objects shaped as the API server returns them (``metadata``/``spec``/``status``,
owner references, the tolerations the DaemonSet controller adds, ``PodScheduled=False/Unschedulable``
on pending pods), so parsing them runs the same code as real input.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from spillway.local.objects import instance_id, node_name_for

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "template.yaml"
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # what Kubernetes' generateName uses


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


@pytest.fixture
def moto_aws() -> Iterator[None]:
    from moto import mock_aws

    with mock_aws():
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


# --- Kubernetes JSON builders ----------------------------------------------------------------------


def iso(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _digest(*parts: str) -> str:
    return hashlib.sha1("/".join(parts).encode()).hexdigest()


def uid(*parts: str) -> str:
    h = _digest(*parts)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def suffix(*parts: str, length: int = 5) -> str:
    """A generateName-style suffix, deterministic for ``parts``."""
    n = int(_digest(*parts)[:16], 16)
    out = []
    for _ in range(length):
        n, r = divmod(n, len(_SUFFIX_ALPHABET))
        out.append(_SUFFIX_ALPHABET[r])
    return "".join(out)


def kube_node(
    name: str,
    *,
    instance: str,
    zone: str = "us-east-1a",
    instance_type: str = "m5.2xlarge",
    cpu: str = "7910m",
    memory: str = "30310Mi",
    pods: str = "58",
    gpus: int = 0,
    group: str = "general",
    ready: bool = True,
    unschedulable: bool = False,
    taints: Sequence[Mapping[str, str]] = (),
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "95491281146"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    spec: dict[str, Any] = {"providerID": f"aws:///{zone}/{instance}"}
    if unschedulable:
        spec["unschedulable"] = True
    all_taints = [dict(t) for t in taints]
    if unschedulable:
        all_taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    if all_taints:
        spec["taints"] = all_taints
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": uid("node", name),
            "resourceVersion": "1042",
            "creationTimestamp": iso(T0),
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/instance-type": instance_type,
                "beta.kubernetes.io/os": "linux",
                "eks.amazonaws.com/nodegroup": group,
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": instance_type,
                "topology.kubernetes.io/region": zone[:-1],
                "topology.kubernetes.io/zone": zone,
            },
            "annotations": {
                "alpha.kubernetes.io/provided-node-ip": "10.0.0.1",
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                **(annotations or {}),
            },
        },
        "spec": spec,
        "status": {
            "capacity": {**allocatable, "cpu": str(int(cpu.rstrip("m")) // 1000 + 1)},
            "allocatable": allocatable,
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure"},
                {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID"},
                {
                    "type": "Ready",
                    "status": "True" if ready else "Unknown",
                    "reason": "KubeletReady" if ready else "NodeStatusUnknown",
                    "lastTransitionTime": iso(T0),
                },
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.31.2-eks-7f9249a",
                "containerRuntimeVersion": "containerd://1.7",
            },
        },
    }


_DEFAULT_TOLERATIONS = [
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
]


def kube_pod(
    name: str,
    namespace: str = "default",
    *,
    cpu: str = "1",
    memory: str = "2Gi",
    gpus: int = 0,
    node_name: str | None = None,
    phase: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    priority: int = 0,
    owner: tuple[str, str] | None = ("Job", "job"),
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A pod; an unbound one carries ``PodScheduled=False/Unschedulable`` as the scheduler sets it."""
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid("pod", namespace, name),
        "resourceVersion": "20417",
        "creationTimestamp": iso(T0),
        "labels": dict(labels or {"app": name.rsplit("-", 1)[0]}),
    }
    if annotations:
        meta["annotations"] = dict(annotations)
    if owner is not None:
        kind, owner_name = owner
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1" if kind in ("DaemonSet", "ReplicaSet", "StatefulSet") else "batch/v1",
                "kind": kind,
                "name": owner_name,
                "uid": uid(kind, namespace, owner_name),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:2026.03",
                "resources": resources,
                "env": [{"name": "EPOCHS", "value": "10"}],
                "volumeMounts": [
                    {"name": "kube-api-access", "mountPath": "/var/run/secrets", "readOnly": True}
                ],
            }
        ],
        "restartPolicy": "Never" if owner and owner[0] == "Job" else "Always",
        "schedulerName": "default-scheduler",
        "serviceAccountName": "default",
        "priority": priority,
        "tolerations": [*_DEFAULT_TOLERATIONS, *(dict(t) for t in tolerations)],
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if node_name is None:
        status: dict[str, Any] = {
            "phase": phase or "Pending",
            "qosClass": "Burstable",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/3 nodes are available: 3 Insufficient cpu.",
                    "lastTransitionTime": iso(T0),
                }
            ],
        }
    else:
        spec["nodeName"] = node_name
        status = {
            "phase": phase or "Running",
            "qosClass": "Burstable",
            "hostIP": "10.0.0.1",
            "podIP": "10.0.1.1",
            "startTime": iso(T0),
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": iso(T0)},
                {"type": "Initialized", "status": "True", "lastTransitionTime": iso(T0)},
                {"type": "Ready", "status": "True", "lastTransitionTime": iso(T0)},
            ],
        }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def kube_daemonset_pod(node_name: str, ds: str = "aws-node") -> dict[str, Any]:
    """A DaemonSet pod pinned to its node the way the DaemonSet controller pins it."""
    obj = kube_pod(
        f"{ds}-{suffix(ds, node_name)}",
        "kube-system",
        cpu="25m",
        memory="64Mi",
        node_name=node_name,
        owner=("DaemonSet", ds),
        labels={"k8s-app": ds},
    )
    obj["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
                ]
            }
        }
    }
    obj["spec"]["tolerations"] += [
        {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
    ]
    return obj


def kube_pdb(name: str, namespace: str, match_labels: Mapping[str, str], allowed: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace, "uid": uid("pdb", namespace, name)},
        "spec": {"selector": {"matchLabels": dict(match_labels)}, "maxUnavailable": 1},
        "status": {
            "disruptionsAllowed": allowed,
            "currentHealthy": 3,
            "desiredHealthy": 2,
            "expectedPods": 3,
        },
    }


def generate_cluster(
    nodes: int, pods: int, *, pending: int = 0, region: str = "us-east-1", seed: str = "c"
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Nodes, pods (two DaemonSet pods per node, the rest job pods spread over the nodes, ``pending``
    of them unbound), and a few PDBs: a realistic mix, deterministic for a seed."""
    zones = [f"{region}a", f"{region}b", f"{region}c"]
    node_objs = []
    taken: set[str] = set()
    for i in range(nodes):
        inst = instance_id(f"{seed}-{region}-{i}")
        while node_name_for(inst, region) in taken:  # 24-bit private IPs collide now and then
            inst = instance_id(inst)
        taken.add(node_name_for(inst, region))
        gpu = i % 10 == 9
        node_objs.append(
            kube_node(
                node_name_for(inst, region),
                instance=inst,
                zone=zones[i % 3],
                instance_type="g5.2xlarge" if gpu else "m5.2xlarge",
                gpus=1 if gpu else 0,
                group="gpu" if gpu else "general",
            )
        )
    names = [n["metadata"]["name"] for n in node_objs]
    pod_objs: list[dict[str, Any]] = []
    for name in names:
        if len(pod_objs) + 2 > pods - pending:
            break
        pod_objs.append(kube_daemonset_pod(name, "aws-node"))
        pod_objs.append(kube_daemonset_pod(name, "kube-proxy"))
    job = 0
    bound_target = pods - pending
    while len(pod_objs) < pods:
        ns = f"team-{job % 7}"
        job_name = f"train-{_digest(seed, str(job))[:6]}"
        width = 1 + job % 12
        for k in range(width):
            if len(pod_objs) >= pods:
                break
            bound = len(pod_objs) < bound_target
            node_name = names[(job * 7 + k) % len(names)] if bound and names else None
            gpu_job = job % 5 == 4
            pod_objs.append(
                kube_pod(
                    f"{job_name}-{suffix(seed, job_name, str(k))}",
                    ns,
                    cpu="2" if gpu_job else "500m",
                    memory="8Gi" if gpu_job else "1Gi",
                    gpus=1 if gpu_job else 0,
                    node_name=node_name,
                    owner=("Job", job_name),
                    labels={"job-name": job_name, "team": ns},
                    tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
                    if gpu_job
                    else (),
                )
            )
        job += 1
    pdbs = [kube_pdb(f"pdb-{i}", f"team-{i}", {"team": f"team-{i}"}) for i in range(3)]
    seen: set[tuple[str, str]] = set()
    for obj in pod_objs:  # a suffix clash gets another draw, as generateName does
        meta = obj["metadata"]
        while (meta["namespace"], meta["name"]) in seen:
            meta["name"] = meta["name"].rsplit("-", 1)[0] + "-" + suffix(meta["name"])
        seen.add((meta["namespace"], meta["name"]))
    return node_objs, pod_objs, pdbs


class KubeObjects:
    """The builders, as a fixture (test modules need not import this conftest)."""

    node = staticmethod(kube_node)
    pod = staticmethod(kube_pod)
    daemonset_pod = staticmethod(kube_daemonset_pod)
    pdb = staticmethod(kube_pdb)
    cluster = staticmethod(generate_cluster)
    instance_id = staticmethod(instance_id)
    node_name_for = staticmethod(node_name_for)


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
