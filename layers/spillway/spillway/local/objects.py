"""Builders for realistic API objects: Kubernetes JSON as ``kubectl -o json`` prints it, and AWS CLI JSON.

Used by the tests, the benchmarks, the example files in ``events/`` and the local stack. Every object
has the shape the real API returns (``metadata``/``spec``/``status``; ``AutoScalingGroupARN`` ...), so
parsing them exercises the same code paths as real input.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

ACCOUNT = "123456789012"
EPOCH = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def iso(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _uid(*parts: str) -> str:
    h = hashlib.sha1("/".join(parts).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def instance_id(seed: str) -> str:
    return "i-0" + hashlib.sha1(seed.encode()).hexdigest()[:16]


def node_name_for(instance: str, region: str = "us-east-1") -> str:
    """EKS node names are the instance's private DNS name."""
    n = int(instance[2:10], 16)
    suffix = "ec2.internal" if region == "us-east-1" else f"{region}.compute.internal"
    return f"ip-10-{(n >> 16) & 255}-{(n >> 8) & 255}-{n & 255}.{suffix}"


def node(
    name: str,
    *,
    instance: str,
    zone: str = "us-east-1a",
    instance_type: str = "m5.2xlarge",
    cpu: str = "7910m",
    memory: str = "30Gi",
    pods: str = "58",
    gpus: int = 0,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    ready: bool = True,
    unschedulable: bool = False,
    annotations: Mapping[str, str] | None = None,
    created: datetime = EPOCH,
    capacity: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Node as ``kubectl get node -o json`` prints it. Its ``status.capacity`` is its allocatable but for
    the resources ``capacity`` gives (a real node's cpu and memory capacity are above its allocatable:
    the kubelet's reserves and eviction threshold)."""
    region = zone[:-1]
    allocatable: dict[str, str] = {
        "cpu": cpu,
        "memory": memory,
        "pods": pods,
        "ephemeral-storage": "95551679124",
    }
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    all_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": instance_type,
        "beta.kubernetes.io/instance-type": instance_type,
        "topology.kubernetes.io/region": region,
        "topology.kubernetes.io/zone": zone,
        **(labels or {}),
    }
    spec: dict[str, Any] = {"providerID": f"aws:///{zone}/{instance}"}
    if unschedulable:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": _uid("node", name),
            "resourceVersion": "1",
            "creationTimestamp": iso(created),
            "labels": all_labels,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", **(annotations or {})},
        },
        "spec": spec,
        "status": {
            "allocatable": allocatable,
            "capacity": {**allocatable, **(capacity or {})},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "reason": "KubeletReady" if ready else "KubeletNotReady",
                    "lastTransitionTime": iso(created),
                }
            ],
        },
    }


def pod(
    name: str,
    namespace: str = "default",
    *,
    cpu: str = "1",
    memory: str = "2Gi",
    gpus: int = 0,
    node_name: str | None = None,
    phase: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    affinity: Mapping[str, Any] | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    priority: int | None = None,
    owner: tuple[str, str] | None = ("Job", "job"),
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    init_containers: Sequence[Mapping[str, Any]] = (),
    created: datetime = EPOCH,
) -> dict[str, Any]:
    """A pod; unbound pods get ``PodScheduled=False/Unschedulable`` as the scheduler sets it."""
    requests: dict[str, str] = {"cpu": cpu, "memory": memory}
    limits: dict[str, str] = {}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)  # extended resources: limit only, request defaults to it
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": _uid("pod", namespace, name),
        "resourceVersion": "1",
        "creationTimestamp": iso(created),
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
                "uid": _uid(kind, namespace, owner_name),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    container: dict[str, Any] = {"name": "main", "image": "public.ecr.aws/docker/library/busybox:1.36"}
    container["resources"] = {"requests": requests, **({"limits": limits} if limits else {})}
    spec: dict[str, Any] = {
        "containers": [container],
        "restartPolicy": "Never" if owner and owner[0] == "Job" else "Always",
        "schedulerName": "default-scheduler",
        "priority": priority if priority is not None else 0,
        "tolerations": [
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
            *[dict(t) for t in tolerations],
        ],
    }
    if init_containers:
        spec["initContainers"] = [dict(c) for c in init_containers]
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if affinity:
        spec["affinity"] = dict(affinity)
    status: dict[str, Any]
    if node_name is None:
        spec_status_phase = phase or "Pending"
        status = {
            "phase": spec_status_phase,
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/3 nodes are available: 3 Insufficient cpu.",
                    "lastTransitionTime": iso(created),
                }
            ],
        }
    else:
        spec["nodeName"] = node_name
        status = {
            "phase": phase or "Running",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": iso(created)},
                {"type": "Ready", "status": "True", "lastTransitionTime": iso(created)},
            ],
            "startTime": iso(created),
        }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def daemonset_pod(
    name: str,
    node_name: str,
    *,
    ds: str = "aws-node",
    cpu: str = "25m",
    memory: str = "64Mi",
    labels: Mapping[str, str] | None = None,
    created: datetime = EPOCH,
) -> dict[str, Any]:
    """A DaemonSet pod pinned to its node the way the DaemonSet controller pins it."""
    obj = pod(
        name, "kube-system", cpu=cpu, memory=memory, node_name=node_name, owner=("DaemonSet", ds), labels=labels,
        created=created,
    )  # fmt: skip
    obj["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
                ]
            }
        }
    }
    obj["spec"]["tolerations"].append({"operator": "Exists"})
    return obj


def daemonset(
    name: str,
    namespace: str = "kube-system",
    *,
    cpu: str = "25m",
    memory: str = "64Mi",
    node_selector: Mapping[str, str] | None = None,
    affinity: Mapping[str, Any] | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    priority_class: str | None = None,
    host_network: bool = False,
) -> dict[str, Any]:
    """An apps/v1 DaemonSet as ``kubectl get daemonsets -o json`` prints it: its pod template is what its
    controller makes for each node (before it pins the pod there: :func:`daemonset_pod`)."""
    labels = {"app.kubernetes.io/name": name}
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": name,
                "image": "public.ecr.aws/docker/library/busybox:1.36",
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ],
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "terminationGracePeriodSeconds": 30,
    }
    optional = (
        ("nodeSelector", dict(node_selector or {})),
        ("affinity", dict(affinity or {})),
        ("tolerations", [dict(t) for t in tolerations]),
        ("priorityClassName", priority_class),
        ("hostNetwork", host_network),
    )
    spec.update((key, value) for key, value in optional if value)
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": _uid("DaemonSet", namespace, name),
            "resourceVersion": "1",
            "generation": 1,
            "creationTimestamp": iso(EPOCH),
            "labels": dict(labels),
        },
        "spec": {
            "selector": {"matchLabels": dict(labels)},
            "template": {"metadata": {"labels": dict(labels)}, "spec": spec},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
            "revisionHistoryLimit": 10,
        },
        "status": {"currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": 0,
                   "numberReady": 0, "observedGeneration": 1},
    }  # fmt: skip


def pdb(
    name: str,
    namespace: str,
    match_labels: Mapping[str, str],
    *,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    disruptions_allowed: int = 0,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"matchLabels": dict(match_labels)}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": _uid("pdb", namespace, name),
            "resourceVersion": "1",
        },
        "spec": spec,
        "status": {
            "disruptionsAllowed": disruptions_allowed,
            "currentHealthy": 0,
            "desiredHealthy": 0,
            "expectedPods": 0,
        },
    }


def kube_list(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``kubectl get nodes,pods,pdb -A -o json`` output."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": list(items)}


def asg(
    name: str,
    *,
    region: str = "us-east-1",
    cluster: str = "ml",
    min_size: int = 0,
    max_size: int = 10,
    desired: int = 0,
    instance_type: str = "m5.2xlarge",
    instances: Sequence[str] = (),
    zones: Sequence[str] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Mapping[str, str] | None = None,
    resources: Mapping[str, str] | None = None,
    mixed: bool = False,
    tagged: bool = True,
    instance_states: Mapping[str, str] | None = None,
    suspended: Sequence[str] = (),
) -> dict[str, Any]:
    """One group as ``aws autoscaling describe-auto-scaling-groups`` prints it; ``suspended``: the
    scaling processes suspended on it (``AZRebalance``, ...)."""
    zones = list(zones or [f"{region}a"])
    arn = f"arn:aws:autoscaling:{region}:{ACCOUNT}:autoScalingGroup:{_uid('asg', region, name)}:autoScalingGroupName/{name}"
    tags: list[dict[str, Any]] = []

    def tag(key: str, value: str) -> None:
        tags.append(
            {
                "ResourceId": name,
                "ResourceType": "auto-scaling-group",
                "Key": key,
                "Value": value,
                "PropagateAtLaunch": True,
            }
        )

    if tagged:
        tag("k8s.io/cluster-autoscaler/enabled", "true")
        tag(f"k8s.io/cluster-autoscaler/{cluster}", "owned")
    for k, v in (labels or {}).items():
        tag(f"k8s.io/cluster-autoscaler/node-template/label/{k}", v)
    for k, v in (taints or {}).items():
        tag(f"k8s.io/cluster-autoscaler/node-template/taint/{k}", v)
    for k, v in (resources or {}).items():
        tag(f"k8s.io/cluster-autoscaler/node-template/resources/{k}", v)
    lt = {
        "LaunchTemplateId": "lt-0" + hashlib.sha1(name.encode()).hexdigest()[:16],
        "LaunchTemplateName": name,
        "Version": "$Latest",
    }
    group: dict[str, Any] = {
        "AutoScalingGroupName": name,
        "AutoScalingGroupARN": arn,
        "MinSize": min_size,
        "MaxSize": max_size,
        "DesiredCapacity": desired,
        "DefaultCooldown": 300,
        "AvailabilityZones": zones,
        "HealthCheckType": "EC2",
        "HealthCheckGracePeriod": 300,
        "CreatedTime": "2026-10-01T08:00:00.000000+00:00",
        "Instances": [
            {
                "InstanceId": iid,
                "InstanceType": instance_type,
                "AvailabilityZone": zones[i % len(zones)],
                "LifecycleState": (instance_states or {}).get(iid, "InService"),
                "HealthStatus": "Healthy",
                # the version it was launched with, a number: the group's $Latest when it launched
                "LaunchTemplate": {**lt, "Version": "1"},
                "ProtectedFromScaleIn": False,
            }
            for i, iid in enumerate(instances)
        ],
        "Tags": tags,
        "SuspendedProcesses": [
            {"ProcessName": p, "SuspensionReason": "User suspended at 2026-10-01T08:00:00Z"}
            for p in suspended
        ],
        "TerminationPolicies": ["Default"],
        "NewInstancesProtectedFromScaleIn": False,
        "ServiceLinkedRoleARN": f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling",
    }
    if mixed:
        group["MixedInstancesPolicy"] = {
            "LaunchTemplate": {
                "LaunchTemplateSpecification": lt,
                "Overrides": [{"InstanceType": instance_type}],
            },
            "InstancesDistribution": {"OnDemandBaseCapacity": 0, "OnDemandPercentageAboveBaseCapacity": 100},
        }
    else:
        group["LaunchTemplate"] = lt
    return group


def asgs_output(groups: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {"AutoScalingGroups": list(groups)}


# EC2's words for launches that fail for the group's own settings, not capacity (as Auto Scaling's
# scaling activities word them: StatusMessage)
MISSING_AMI = "The image id '[ami-0123456789abcdef0]' does not exist. Launching EC2 instance failed."
SUBNET_FULL = (
    "There are not enough free addresses in subnet 'subnet-0abc' to satisfy the requested number of "
    "instances. Launching EC2 instance failed."
)


def failed_launch(
    group: Mapping[str, Any], at: datetime, instance_type: str = "p4d.24xlarge", message: str | None = None
) -> dict[str, Any]:
    """A ``describe-scaling-activities`` entry for a launch EC2 refused for lack of capacity, or with
    ``message`` (its StatusMessage: :data:`MISSING_AMI`, ...)."""
    az = group["AvailabilityZones"][0]
    reason = message or (
        f"We currently do not have sufficient {instance_type} capacity in the Availability Zone you requested "
        f"({az}). Launching EC2 instance failed."
    )
    if message is None:
        message = (
            f"We currently do not have sufficient {instance_type} capacity in the Availability Zone you "
            f"requested ({az}). Our system will be working on provisioning additional capacity. (Service: "
            "AmazonEC2; Status Code: 500; Error Code: InsufficientInstanceCapacity)"
        )
    return {
        "ActivityId": _uid("act", group["AutoScalingGroupName"], iso(at)),
        "AutoScalingGroupName": group["AutoScalingGroupName"],
        "AutoScalingGroupARN": group["AutoScalingGroupARN"],
        "Description": f"Launching a new EC2 instance.  Status Reason: {reason}",
        "Cause": f"At {iso(at)} an instance was started in response to a difference between desired and actual capacity, "
        "increasing the capacity from 2 to 4.",
        "StartTime": iso(at),
        "EndTime": iso(at),
        "StatusCode": "Failed",
        "StatusMessage": message,
        "Progress": 100,
        "Details": "{}",
    }


def launched(group: Mapping[str, Any], instance_id: str, at: datetime) -> dict[str, Any]:
    """A ``describe-scaling-activities`` entry for a launch of ``instance_id`` that succeeded, started at
    ``at`` (StatusCode Successful; its Description names the instance)."""
    return {
        "ActivityId": _uid("act", group["AutoScalingGroupName"], instance_id, iso(at)),
        "AutoScalingGroupName": group["AutoScalingGroupName"],
        "AutoScalingGroupARN": group["AutoScalingGroupARN"],
        "Description": f"Launching a new EC2 instance: {instance_id}",
        "Cause": f"At {iso(at)} an instance was started in response to a difference between desired and actual capacity, "
        "increasing the capacity from 0 to 2.",
        "StartTime": iso(at),
        "EndTime": iso(at + timedelta(seconds=30)),
        "StatusCode": "Successful",
        "Progress": 100,
        "Details": "{}",
    }


def activities_output(activities: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {"Activities": list(activities)}


# --- generated clusters ----------------------------------------------------------------------------

_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # what Kubernetes' generateName uses
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def suffix(*parts: str, length: int = 5) -> str:
    """A generateName-style suffix, deterministic for ``parts``."""
    n = int(hashlib.sha1("/".join(parts).encode()).hexdigest()[:16], 16)
    out = []
    for _ in range(length):
        n, r = divmod(n, len(_SUFFIX_ALPHABET))
        out.append(_SUFFIX_ALPHABET[r])
    return "".join(out)


@dataclass(frozen=True, slots=True)
class NodeKind:
    """The nodes of one generated group, and its Auto Scaling group (named ``group``).

    ``region`` "" is the cluster's region; ``labels`` None is ``eks.amazonaws.com/nodegroup: group``;
    ``taints`` are in the ASG tag form (``{"nvidia.com/gpu": "present:NoSchedule"}``).
    """

    group: str
    instance_type: str = "m5.2xlarge"
    cpu: str = "7910m"
    memory: str = "30310Mi"
    gpus: int = 0
    pods: str = "58"
    region: str = ""
    labels: Mapping[str, str] | None = None
    taints: Mapping[str, str] = field(default_factory=dict)

    def node_labels(self) -> dict[str, str]:
        return dict(self.labels) if self.labels is not None else {"eks.amazonaws.com/nodegroup": self.group}

    def node_taints(self) -> list[dict[str, str]]:
        out = []
        for key, value_effect in self.taints.items():
            value, _, effect = value_effect.rpartition(":")
            out.append({"key": key, "value": value, "effect": effect})
        return out


@dataclass(frozen=True, slots=True)
class PodKind:
    """The shape of a generated pending pod (GPU pods tolerate the GPU taint)."""

    cpu: str
    memory: str
    gpus: int = 0
    node_selector: Mapping[str, str] | None = None


# Every tenth node a g5.2xlarge with one GPU, the others m5.2xlarge.
DEFAULT_KINDS: tuple[NodeKind, ...] = (
    *[NodeKind("general")] * 9,
    NodeKind("gpu", instance_type="g5.2xlarge", gpus=1),
)


@dataclass(frozen=True, slots=True)
class Fleet:
    """A generated cluster: Kubernetes objects as the API server returns them, and per region its
    groups as ``describe-auto-scaling-groups`` prints them."""

    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    pdbs: list[dict[str, Any]]
    asgs: dict[str, list[dict[str, Any]]]

    def kube_objects(self) -> list[dict[str, Any]]:
        return [*self.nodes, *self.pods, *self.pdbs]


def fleet(
    nodes: int,
    pods: int,
    *,
    pending: int = 0,
    region: str = "us-east-1",
    seed: str = "c",
    daemonsets: Sequence[str] = ("aws-node", "kube-proxy"),
    pdbs: int = 3,
    created: datetime = EPOCH,
    kinds: Sequence[NodeKind] = DEFAULT_KINDS,
    pending_kinds: Sequence[PodKind] = (),
    cluster_name: str = "ml",
) -> Fleet:
    """The generated cluster, deterministic for ``seed``: ``nodes`` nodes over three zones of their
    region, node ``i`` of ``kinds[i % len(kinds)]``; one Auto Scaling group per kind holding its nodes
    (desired = its nodes, MaxSize twice that); ``pods`` pods (one per DaemonSet in ``daemonsets`` on
    each node while room lasts, the rest pods of Jobs of 1 to 12 pods spread over the nodes, ``pending``
    of them unbound, every fifth Job a GPU one; an unbound pod takes its Job's shape from
    ``pending_kinds`` when given) and ``pdbs`` PodDisruptionBudgets."""
    node_objs = _generated_nodes(nodes, region, seed, created, kinds)
    names = [n["metadata"]["name"] for n in node_objs]
    pod_objs: list[dict[str, Any]] = []
    for name in names:
        if len(pod_objs) + len(daemonsets) > pods - pending:
            break
        for ds in daemonsets:
            pod_objs.append(_generated_daemonset_pod(name, ds, created))
    job = 0
    while len(pod_objs) < pods:
        _generated_job(pod_objs, job, pods, pods - pending, names, seed, created, pending_kinds)
        job += 1
    seen: set[tuple[str, str]] = set()
    for obj in pod_objs:  # a suffix clash gets another draw, as generateName does
        meta = obj["metadata"]
        while (meta["namespace"], meta["name"]) in seen:
            meta["name"] = meta["name"].rsplit("-", 1)[0] + "-" + suffix(meta["name"])
        seen.add((meta["namespace"], meta["name"]))
    budgets = [pdb(f"pdb-{i}", f"team-{i}", {"team": f"team-{i}"}, max_unavailable=1, disruptions_allowed=1)
               for i in range(pdbs)]  # fmt: skip
    asgs = _generated_asgs(node_objs, region, kinds, cluster_name)
    return Fleet(node_objs, pod_objs, budgets, asgs)


def _generated_nodes(
    count: int, region: str, seed: str, created: datetime, kinds: Sequence[NodeKind]
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    taken: set[str] = set()
    for i in range(count):
        kind = kinds[i % len(kinds)]
        where = kind.region or region
        inst = instance_id(f"{seed}-{where}-{i}")
        while node_name_for(inst, where) in taken:  # 24-bit private IPs collide now and then
            inst = instance_id(inst)
        taken.add(node_name_for(inst, where))
        out.append(
            node(
                node_name_for(inst, where), instance=inst, zone=f"{where}{'abc'[i % 3]}",
                instance_type=kind.instance_type, cpu=kind.cpu, memory=kind.memory, pods=kind.pods,
                gpus=kind.gpus, labels=kind.node_labels(), taints=kind.node_taints(), created=created,
            )
        )  # fmt: skip
    return out


def _generated_asgs(
    node_objs: Sequence[Mapping[str, Any]], region: str, kinds: Sequence[NodeKind], cluster_name: str
) -> dict[str, list[dict[str, Any]]]:
    """One group per kind's ``group`` (in the order of ``kinds``), holding the instances of its nodes."""
    by_group = {kind.group: kind for kind in reversed(kinds)}  # the first kind of a group describes it
    members: dict[str, list[str]] = {kind.group: [] for kind in kinds}
    for i, obj in enumerate(node_objs):
        members[kinds[i % len(kinds)].group].append(obj["spec"]["providerID"].rsplit("/", 1)[1])
    out: dict[str, list[dict[str, Any]]] = {}
    for group, instances in members.items():
        kind = by_group[group]
        where = kind.region or region
        out.setdefault(where, []).append(
            asg(
                group, region=where, cluster=cluster_name, min_size=0, max_size=2 * len(instances),
                desired=len(instances), instance_type=kind.instance_type, instances=instances,
                zones=[f"{where}a", f"{where}b", f"{where}c"], labels=kind.node_labels(), taints=kind.taints,
            )
        )  # fmt: skip
    return out


def _generated_daemonset_pod(node_name: str, ds: str, created: datetime) -> dict[str, Any]:
    return daemonset_pod(
        f"{ds}-{suffix(ds, node_name)}", node_name, ds=ds, labels={"k8s-app": ds}, created=created
    )


def _generated_job(
    out: list[dict[str, Any]], job: int, limit: int, bound_target: int, names: Sequence[str], seed: str,
    created: datetime, pending_kinds: Sequence[PodKind] = (),
) -> None:  # fmt: skip
    """Append the pods of Job number ``job`` (until ``limit`` pods in all; bound while fewer than
    ``bound_target``; an unbound one shaped by a kind drawn from ``pending_kinds`` when given)."""
    ns = f"team-{job % 7}"
    job_name = f"train-{hashlib.sha1('/'.join((seed, str(job))).encode()).hexdigest()[:6]}"
    gpu_job = job % 5 == 4
    shape = PodKind("2", "8Gi", 1) if gpu_job else PodKind("500m", "1Gi")
    for k in range(1 + job % 12):
        if len(out) >= limit:
            return
        bound = len(out) < bound_target
        if not bound and pending_kinds:
            shape = pending_kinds[int(job_name[6:], 16) % len(pending_kinds)]
        out.append(
            pod(
                f"{job_name}-{suffix(seed, job_name, str(k))}", ns, cpu=shape.cpu, memory=shape.memory,
                gpus=shape.gpus, node_name=names[(job * 7 + k) % len(names)] if bound and names else None,
                owner=("Job", job_name), labels={"job-name": job_name, "team": ns},
                tolerations=[GPU_TOLERATION] if shape.gpus else (), node_selector=shape.node_selector,
                created=created,
            )
        )  # fmt: skip
