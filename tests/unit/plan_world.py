"""A small world for planner scenarios: groups, nodes and pods as the real APIs print them.

Everything is built with ``spillway.local.objects`` (kubectl / AWS CLI JSON) and parsed with the same
parsers ``spillway plan`` uses, so scenarios exercise the real input path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from spillway.config import PlannerConfig
from spillway.local import objects as o
from spillway.model.aws import bundled_instance_types, parse_activities, parse_asgs
from spillway.model.cluster import ClusterSnapshot
from spillway.model.k8s import CORDONED_BY_SPILLWAY, parse_kube_list
from spillway.model.livetemplate import with_live_templates
from spillway.model.nodegroup import NodeGroup, build_node_groups
from spillway.model.state import State
from spillway.planner import ScalingPlan, plan

NOW = datetime.fromisoformat("2026-11-02T12:00:00+00:00")
GPU_TAINT = {"nvidia.com/gpu": "present:NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}

# Allocatable of real nodes, roughly what the kubelet reports on EKS, and their capacity: every vCPU,
# and the memory the kernel leaves (below the type's nominal memory, above allocatable by the kubelet's
# kube-reserved and eviction threshold).
SHAPES: dict[str, dict[str, Any]] = {
    "m5.2xlarge": {"cpu": "7910m", "memory": "30Gi", "pods": "58", "capacity": {"cpu": "8", "memory": "31Gi"}},
    "m5.xlarge": {"cpu": "3920m", "memory": "14Gi", "pods": "58", "capacity": {"cpu": "4", "memory": "15Gi"}},
    "g5.xlarge": {
        "cpu": "3920m", "memory": "14Gi", "pods": "58", "gpus": 1, "capacity": {"cpu": "4", "memory": "15Gi"}
    },
    "g5.12xlarge": {
        "cpu": "47810m", "memory": "180Gi", "pods": "234", "gpus": 4, "capacity": {"cpu": "48", "memory": "183Gi"}
    },
    "p4d.24xlarge": {
        "cpu": "95", "memory": "1100Gi", "pods": "737", "gpus": 8, "capacity": {"cpu": "96", "memory": "1110Gi"}
    },
    # 488 GiB less Karpenter's measured 7.8 GiB VM overhead (its capacity), less kube-reserved (255Mi +
    # 11Mi x 234 pods) and 100Mi
    "p3.16xlarge": {
        "cpu": "63770m", "memory": "500527104Ki", "pods": "234", "gpus": 8,
        "capacity": {"cpu": "64", "memory": "503526400Ki"},
    },
}  # fmt: skip


# Spillway's cordon as a plan's drain writes it: the time, then spillway.act.drain.cordon_reason
PLAN_DRAIN_WORDS = "drain dn-20261102T110000Z-a1b2: a plan's scale-down"
PLAN_DRAIN_CORDON = f"2026-11-02T11:00:00Z {PLAN_DRAIN_WORDS}"


@dataclass
class World:
    cluster: str = "ml"
    regions: tuple[str, ...] = ("us-east-1", "us-west-2")
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    items: list[dict[str, Any]] = field(default_factory=list)
    activities: list[dict[str, Any]] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=lambda: {"nodes": {}, "groups": {}})

    def group(
        self,
        name: str,
        instance_type: str,
        *,
        region: str = "us-east-1",
        min_size: int = 0,
        max_size: int = 10,
        nodes: int = 0,
        desired: int | None = None,
        gpu_taint: bool = False,
        labels: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """A managed group with ``nodes`` Ready nodes; returns the node names."""
        instances = [o.instance_id(f"{name}-{i}") for i in range(nodes)]
        self.groups[name] = o.asg(
            name,
            region=region,
            cluster=self.cluster,
            min_size=min_size,
            max_size=max_size,
            desired=nodes if desired is None else desired,
            instance_type=instance_type,
            instances=instances,
            taints=GPU_TAINT if gpu_taint else None,
            labels={"node.kubernetes.io/instance-type": instance_type, **(labels or {})},
            **kwargs,
        )
        names = []
        for iid in instances:
            names.append(self.node_for(name, iid, instance_type, gpu_taint=gpu_taint, labels=labels))
        return names

    def node_for(
        self,
        group: str,
        iid: str,
        instance_type: str,
        *,
        gpu_taint: bool = False,
        labels: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> str:
        region = self.groups[group]["AutoScalingGroupARN"].split(":")[3]
        name = o.node_name_for(iid, region)
        taints = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}] if gpu_taint else []
        self.items.append(
            o.node(
                name,
                instance=iid,
                zone=f"{region}a",
                instance_type=instance_type,
                labels=labels,
                taints=taints + kwargs.pop("taints", []),
                **SHAPES[instance_type],
                **kwargs,
            )
        )
        return name

    def add_instance(self, group: str, *, register: bool, ready: bool = True) -> str:
        """One more instance in the group (desired +1); registered as a Node or still booting."""
        g = self.groups[group]
        itype = g["Instances"][0]["InstanceType"] if g["Instances"] else "m5.2xlarge"
        iid = o.instance_id(f"{group}-extra-{len(g['Instances'])}")
        g["Instances"].append(
            {
                **(g["Instances"][0] if g["Instances"] else {}),
                "InstanceId": iid,
                "LifecycleState": "InService",
                "InstanceType": itype,
            }
        )
        g["DesiredCapacity"] += 1
        if register:  # it joined a minute ago
            return self.node_for(group, iid, itype, ready=ready, created=NOW - timedelta(minutes=1))
        return iid

    def node(self, name: str) -> dict[str, Any]:
        return next(i for i in self.items if i["kind"] == "Node" and i["metadata"]["name"] == name)

    def cordon(self, name: str, *, by_spillway: bool) -> None:
        node = self.node(name)
        node["spec"]["unschedulable"] = True
        if by_spillway:
            node["metadata"]["annotations"][CORDONED_BY_SPILLWAY] = PLAN_DRAIN_CORDON
            node["spec"].setdefault("taints", []).append(
                {"key": "spillway.io/draining", "effect": "NoSchedule"}
            )

    def pods(self, prefix: str, count: int, **kwargs: Any) -> list[str]:
        names = []
        for i in range(count):
            namespace = kwargs.get("namespace", "default")
            p = o.pod(f"{prefix}-{i}", namespace, **{k: v for k, v in kwargs.items() if k != "namespace"})
            self.items.append(p)
            names.append(f"{p['metadata']['namespace']}/{p['metadata']['name']}")
        return names

    def gpu_pods(self, prefix: str, count: int, gpus: int, **kwargs: Any) -> list[str]:
        cpu = kwargs.pop("cpu", str(max(1, gpus * 10)))
        memory = kwargs.pop("memory", f"{gpus * 100}Gi")
        return self.pods(
            prefix, count, gpus=gpus, cpu=cpu, memory=memory, tolerations=[GPU_TOLERATION], **kwargs
        )

    def idle_since(self, node: str, minutes_ago: float) -> None:
        self.state["nodes"][node] = {"idle_since": (NOW - timedelta(minutes=minutes_ago)).isoformat()}

    def launch_failure(self, group: str, minutes_ago: float, message: str | None = None) -> None:
        """A launch of ``group`` that failed for capacity ``minutes_ago``, or with ``message``."""
        at = NOW - timedelta(minutes=minutes_ago)
        self.activities.append(o.failed_launch(self.groups[group], at, message=message))

    # -- the shared cluster: namespaces, pod groups, quotas (as kubectl prints them) --

    def namespace(self, name: str, tenant: str | None = None) -> None:
        labels = {"kubernetes.io/metadata.name": name, **({"spillway.io/tenant": tenant} if tenant else {})}
        self.items.append(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
        )

    def pod_group(
        self,
        api_version: str,
        name: str,
        namespace: str = "default",
        *,
        spec: dict[str, Any],
        phase: str | None = None,
    ) -> None:
        item: dict[str, Any] = {
            "apiVersion": api_version,
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }
        if phase is not None:
            item["status"] = {"phase": phase}
        self.items.append(item)

    def workload(self, name: str, namespace: str, groups: list[dict[str, Any]]) -> None:
        self.items.append(
            {
                "apiVersion": "scheduling.k8s.io/v1alpha1",
                "kind": "Workload",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"podGroups": groups},
            }
        )

    def capacity_quota(
        self, name: str, resources: dict[str, Any], match_labels: dict[str, str] | None = None
    ) -> None:
        spec: dict[str, Any] = {"limits": {"resources": resources}}
        if match_labels:
            spec["selector"] = {"matchLabels": match_labels}
        self.items.append(
            {
                "apiVersion": "autoscaling.x-k8s.io/v1beta1",
                "kind": "CapacityQuota",
                "metadata": {"name": name},
                "spec": spec,
            }
        )

    def pod_item(self, key: str) -> dict[str, Any]:
        namespace, name = key.split("/")
        return next(
            i
            for i in self.items
            if i["kind"] == "Pod"
            and i["metadata"]["name"] == name
            and i["metadata"]["namespace"] == namespace
        )

    def join_gang(self, key: str, convention: str, task: str | None = None, gang: str = "train") -> None:
        """Make pod ``key`` a member of gang ``gang`` as one convention marks it: ``volcano``,
        ``coscheduling``, ``workload`` (pod group ``workers``), ``podgroup-v1alpha2``, or ``kueue`` (an
        admitted plain pod group of 4); ``task``: its Volcano task."""
        item = self.pod_item(key)
        meta, spec = item["metadata"], item["spec"]
        notes = meta.setdefault("annotations", {})
        if convention == "volcano":
            notes["scheduling.k8s.io/group-name"] = gang
        elif convention == "coscheduling":
            meta["labels"]["scheduling.x-k8s.io/pod-group"] = gang
        elif convention == "workload":
            spec["workloadRef"] = {"name": gang, "podGroup": "workers"}
        elif convention == "podgroup-v1alpha2":
            spec["schedulingGroup"] = {"podGroupName": gang}
        else:
            assert convention == "kueue", convention
            meta["labels"]["kueue.x-k8s.io/pod-group-name"] = gang
            notes["kueue.x-k8s.io/pod-group-total-count"] = "4"
        if task is not None:
            notes["volcano.sh/task-spec"] = task

    # -- parse and plan --

    def parsed(self, **config: Any) -> tuple[ClusterSnapshot, list[NodeGroup], PlannerConfig, State]:
        cfg = PlannerConfig(cluster=self.cluster, regions=self.regions, **config)
        objects = parse_kube_list(o.kube_list(self.items))
        snapshot = ClusterSnapshot.build(
            self.cluster, NOW, objects.nodes, objects.pods, objects.pdbs, others=objects.others
        )
        asgs = parse_asgs(o.asgs_output(list(self.groups.values())))
        acts = parse_activities(o.activities_output(self.activities))
        groups = build_node_groups(
            asgs, acts, bundled_instance_types(), cfg.node_reserve.reserve(), self.cluster
        )
        # as `spillway plan` and the observe Lambda: a group's own node corrects its template
        return snapshot, with_live_templates(groups, snapshot.nodes), cfg, State.model_validate(self.state)

    def plan(self, now: datetime = NOW, **config: Any) -> ScalingPlan:
        snapshot, groups, cfg, state = self.parsed(**config)
        return plan(snapshot, groups, cfg, state, now)


def scale_up(result: ScalingPlan) -> dict[str, tuple[int, int, list[str]]]:
    return {s.group: (s.from_size, s.to_size, list(s.pods)) for s in result.scale_up}


def pending_codes(result: ScalingPlan) -> dict[str, str]:
    return {p.pod: p.code for p in result.pending}


def pending_reasons(result: ScalingPlan) -> dict[str, str]:
    return {p.pod: p.reason for p in result.pending}


def kept_reasons(result: ScalingPlan) -> dict[str, str]:
    return {k.node: k.reason for k in result.kept}
