"""spillway.local.objects.fleet: the one cluster generator (tests, bench/observe.py, bench/planner.py)."""

from __future__ import annotations

from collections import Counter

from spillway.config import PlannerConfig
from spillway.local import objects as o
from spillway.model.aws import bundled_instance_types, parse_asgs
from spillway.model.cluster import ClusterSnapshot
from spillway.model.k8s import iter_kube_list
from spillway.model.nodegroup import build_node_groups
from spillway.model.resources import Resources
from spillway.model.state import State
from spillway.planner import plan

GPU_POOL = o.NodeKind(
    "gpu-west", instance_type="g5.12xlarge", cpu="47810m", memory="180Gi", gpus=4, region="us-west-2",
    labels={"pool": "gpu"}, taints={"nvidia.com/gpu": "present:NoSchedule"},
)  # fmt: skip
KINDS = [
    o.NodeKind("cpu-east", labels={"pool": "cpu"}),
    o.NodeKind("cpu-east", labels={"pool": "cpu"}),
    GPU_POOL,
]


def _groups(world: o.Fleet) -> list:  # type: ignore[type-arg]
    asgs = [g for region in world.asgs.values() for g in parse_asgs(o.asgs_output(region))]
    return build_node_groups(asgs, [], bundled_instance_types(), Resources(), "bench")


def test_each_group_holds_exactly_the_instances_of_its_kind_of_nodes() -> None:
    world = o.fleet(30, 100, pending=10, seed="g", kinds=KINDS, cluster_name="bench")

    groups = {g.name: g for g in _groups(world)}
    assert sorted(world.asgs) == ["us-east-1", "us-west-2"]
    assert (groups["cpu-east"].desired, groups["gpu-west"].desired) == (20, 10)
    assert groups["gpu-west"].max_size == 20 and groups["gpu-west"].region == "us-west-2"
    by_instance = {}
    for node in world.nodes:
        by_instance[node["spec"]["providerID"].rsplit("/", 1)[1]] = node
    for group in groups.values():
        members = [by_instance[i] for i in group.instance_ids]
        assert len(members) == group.desired
        assert {n["metadata"]["labels"]["topology.kubernetes.io/region"] for n in members} == {group.region}
    gpu_nodes = [by_instance[i] for i in groups["gpu-west"].instance_ids]
    assert all(n["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
               for n in gpu_nodes)  # fmt: skip
    assert groups["gpu-west"].template is not None
    assert groups["gpu-west"].template.labels.get("pool") == "gpu"


def test_unbound_pods_take_their_shapes_from_the_pending_kinds() -> None:
    shapes = [o.PodKind("3", "5Gi"), o.PodKind("7", "9Gi", gpus=2, node_selector={"pool": "gpu"})]

    world = o.fleet(10, 200, pending=120, seed="p", kinds=KINDS, pending_kinds=shapes)

    unbound = [p for p in world.pods if "nodeName" not in p["spec"]]
    assert len(unbound) == 120
    requests = Counter(
        (
            p["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            p["spec"].get("nodeSelector", {}).get("pool"),
        )
        for p in unbound
    )
    assert set(requests) == {("3", None), ("7", "gpu")}
    gpu_pod = next(p for p in unbound if p["spec"].get("nodeSelector"))
    assert o.GPU_TOLERATION in gpu_pod["spec"]["tolerations"]
    bound = [p for p in world.pods if "nodeName" in p["spec"] and p["metadata"]["namespace"] != "kube-system"]
    assert {p["spec"]["containers"][0]["resources"]["requests"]["cpu"] for p in bound} <= {"500m", "2"}


def test_the_default_kinds_put_a_gpu_node_every_tenth_in_one_group() -> None:
    world = o.fleet(25, 60, seed="d")

    kinds = [n["metadata"]["labels"]["eks.amazonaws.com/nodegroup"] for n in world.nodes]
    assert [i for i, k in enumerate(kinds) if k == "gpu"] == [9, 19]
    assert [(g["AutoScalingGroupName"], g["DesiredCapacity"]) for g in world.asgs["us-east-1"]] == [
        ("general", 23),
        ("gpu", 2),
    ]


def test_the_generated_world_plans_gpu_pods_onto_the_gpu_group() -> None:
    shapes = [o.PodKind("8", "32Gi", gpus=4, node_selector={"pool": "gpu"})]
    world = o.fleet(6, 40, pending=6, seed="w", kinds=KINDS, pending_kinds=shapes, cluster_name="bench")
    snapshot = ClusterSnapshot.from_objects(
        "bench", o.EPOCH, iter_kube_list(o.kube_list(world.kube_objects()))
    )

    result = plan(snapshot, _groups(world), PlannerConfig(cluster="bench", regions=("us-east-1", "us-west-2")),
                  State(), o.EPOCH)  # fmt: skip

    assert [s.group for s in result.scale_up] == ["gpu-west"]
    grow = result.scale_up[0]
    assert (grow.from_size, grow.to_size) == (2, 4)  # the generated MaxSize: twice its 2 nodes
    assert len(grow.pods) == 2
