"""Nodes still starting (spillway.planner.startup): Ready, but their GPUs not registered yet or a startup
taint still on them. They are capacity launching, so pending pods wait for them instead of opening
another node; past max_node_startup_minutes they are not, and one still not initialized is unready."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from plan_world import NOW, World, pending_codes, scale_up
from pydantic import ValidationError

from spillway.config import PlannerConfig
from spillway.local import objects as o
from spillway.planner import ScalingPlan, codes

CNI = {"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoSchedule"}
PREFIXED = {"key": "startup-taint.cluster-autoscaler.kubernetes.io/disk-setup", "effect": "NoSchedule"}
GPU_TOLERATION_ALL = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _kept(result: ScalingPlan) -> dict[str, tuple[str, str]]:
    return {k.node: (k.code, k.reason) for k in result.kept}


def _joined(w: World, node: str, minutes_ago: float) -> dict[str, Any]:
    item = w.node(node)
    item["metadata"]["creationTimestamp"] = o.iso(NOW - timedelta(minutes=minutes_ago))
    return item


def _tainted_world(taint: dict[str, str], minutes_ago: float = 1) -> tuple[World, str, str]:
    """An m5.2xlarge node that joined ``minutes_ago`` carrying ``taint``, and a pod that does not
    tolerate it."""
    w = World()
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=5)
    _joined(w, node, minutes_ago)["spec"]["taints"] = [taint]
    (pod,) = w.pods("web", 1, cpu="2", memory="4Gi")
    return w, node, pod


def _gpu_world(minutes_ago: float) -> tuple[World, str, str]:
    """A p4d node that joined ``minutes_ago`` and is Ready, its device plugin not registered yet (no
    ``nvidia.com/gpu``), and an 8-GPU job it was launched for."""
    w = World()
    (node,) = w.group("gpu", "p4d.24xlarge", nodes=1, max_size=5, gpu_taint=True)
    status = _joined(w, node, minutes_ago)["status"]
    for key in ("allocatable", "capacity"):
        status[key].pop("nvidia.com/gpu")
    (job,) = w.gpu_pods("train", 1, 8)
    return w, node, job


def test_a_gpu_node_whose_gpus_are_not_registered_yet_is_capacity_launching() -> None:
    w, node, job = _gpu_world(minutes_ago=1)

    result = w.plan()

    assert result.scale_up == ()  # not a second p4d for the one job
    assert pending_codes(result)[job] == codes.FITS_LAUNCHING
    code, reason = _kept(result)[node]
    assert code == codes.STARTING and "nvidia.com/gpu not registered yet" in reason


def test_past_the_start_window_it_is_no_capacity_launching_and_waits_the_unready_time() -> None:
    w, node, job = _gpu_world(minutes_ago=16)

    result = w.plan()

    assert scale_up(result) == {"gpu": (1, 2, [job])}
    code, reason = _kept(result)[node]
    assert code == codes.IDLE_BELOW_THRESHOLD and "nvidia.com/gpu not registered" in reason
    assert (
        "of the 20m needed (Ready but never initialized" in reason and "scale_down_unready_minutes" in reason
    )


def _uninitialized_idle_node(kind: str) -> tuple[World, str]:
    """A managed node, Ready and idle, created at NOW - 16 min that never initialized: its GPUs never
    registered (``gpus``) or a startup taint stayed on (``taint``). No pod is pending."""
    w = World()
    if kind == "gpus":
        (node,) = w.group("gpu", "p4d.24xlarge", nodes=1, max_size=5, gpu_taint=True)
        status = _joined(w, node, 16)["status"]
        for key in ("allocatable", "capacity"):
            status[key].pop("nvidia.com/gpu")
    else:
        (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=5)
        _joined(w, node, 16)["spec"]["taints"] = [PREFIXED]
    return w, node


@pytest.mark.parametrize("kind", ["gpus", "taint"])
def test_a_node_that_never_initializes_goes_once_idle_for_the_unready_time_after_its_start_window(
    kind: str,
) -> None:
    """cluster-autoscaler takes a node with the GPU label and no GPUs, or with a startup taint, as unready
    (FilterOutNodesWithUnreadyResources, FilterOutNodesWithStartupTaints: a copy NotReady since its
    creation), not started while younger than --max-node-startup-time (clusterstate NotStarted, left out
    of scale-down), and removes an unready node once unneeded for --scale-down-unready-time in place of
    --scale-down-unneeded-time (core/scaledown/unneeded unremovableReason), unneeded counted from when
    it became so. So here: starting until 15 min (max_node_startup_minutes), idle from then, drained
    at 35 (15 + scale_down_unready_minutes 20). Before, kept not-ready until 20 min after its creation
    and then idle for scale_down_idle_minutes (10) on top: drained at 30."""
    w, node = _uninitialized_idle_node(kind)
    _joined(w, node, 15)

    plans = {}
    for age in (15, 20, 29, 30, 34, 35):
        plans[age] = result = w.plan(NOW + timedelta(minutes=age - 15))
        w.state = result.state.to_wire()

    for age in (15, 20, 29, 30, 34):
        assert plans[age].drain == (), age
        code, reason = _kept(plans[age])[node]
        assert code == codes.IDLE_BELOW_THRESHOLD, (age, reason)
        assert "of the 20m needed (Ready but never initialized" in reason, (age, reason)
    assert [d.node for d in plans[35].drain] == [node]
    assert plans[35].drain[0].unready_minutes is None  # Ready: its kubelet evicts as any other's
    assert "(threshold 20m (Ready but never initialized" in plans[35].drain[0].reason


@pytest.mark.parametrize("kind", ["gpus", "taint"])
def test_a_node_that_never_initialized_is_a_scale_down_candidate_marked_through_its_unready_time(
    kind: str,
) -> None:
    """cluster-autoscaler gives DeletionCandidateOfClusterAutoscaler to every node its planner holds
    unneeded (static_autoscaler updateSoftDeletionTaints: scaleDownPlanner.UnneededNodes()), an unready
    one too while --scale-down-unready-time runs (core/scaledown/unneeded RemovableAt keeps it there,
    NotUnreadyLongEnough); the copy NotReady since creation FilterOutNodesWithUnreadyResources makes is
    such a node. So the plan marks it while its unready time runs: a pod needing no GPU would otherwise
    land on the one node whose GPUs never came, keep it busy and paid for."""
    w, node = _uninitialized_idle_node(kind)

    result = w.plan()

    assert _kept(result)[node][0] == codes.IDLE_BELOW_THRESHOLD
    (mark,) = result.soft_taint
    assert mark.node == node and mark.add
    assert mark.reason.startswith(
        f"{codes.IDLE_BELOW_THRESHOLD}: idle for 0s of the 20m needed (Ready but never"
    )


def test_a_node_that_never_initialized_but_is_scale_down_disabled_or_not_ready_is_not_marked() -> None:
    """Only a node scale-down would remove once its unready time is out is a candidate: not one
    annotated scale-down-disabled (cluster-autoscaler's eligibility check leaves it out of the unneeded
    nodes), nor a NotReady one, which the node lifecycle controller's NoSchedule taint (not-ready, or
    unreachable for Unknown as here) keeps pods off already."""
    w, node = _uninitialized_idle_node("gpus")
    w.node(node)["metadata"].setdefault("annotations", {})[
        "cluster-autoscaler.kubernetes.io/scale-down-disabled"
    ] = "true"
    (dead,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=5)
    (condition,) = w.node(dead)["status"]["conditions"]
    condition.update(status="Unknown", lastTransitionTime=o.iso(NOW - timedelta(minutes=5)))

    result = w.plan()

    assert _kept(result)[node][0] == codes.SCALE_DOWN_DISABLED
    assert _kept(result)[dead][0] == codes.IDLE_BELOW_THRESHOLD  # its unready time runs, unmarked
    assert result.soft_taint == ()


def test_of_two_idle_nodes_the_one_whose_gpus_never_came_is_drained_first() -> None:
    """Scale-down takes unready candidates first (ScaleDownStage._order: of no use), and a node that
    never initialized is unready as a NotReady one is (cluster-autoscaler judges the NotReady copy
    FilterOutNodesWithUnreadyResources makes of it). With room for one drain, the node whose GPUs never
    registered goes, not the older node that has them. Before, it was ordered with the Ready nodes:
    the working node, the older, was drained and the broken one kept, paid for and unusable for GPU
    pods."""
    w = World()
    broken, working = w.group("gpu", "p4d.24xlarge", nodes=2, max_size=5, gpu_taint=True)
    status = _joined(w, broken, 40)["status"]
    for key in ("allocatable", "capacity"):
        status[key].pop("nvidia.com/gpu")
    _joined(w, working, 120)
    for node in (broken, working):
        w.idle_since(node, 20)  # the unready time, which the broken node waits in place of the idle time

    result = w.plan(max_scale_in_fraction=0.5)  # one node of the two this plan

    assert [d.node for d in result.drain] == [broken]
    assert _kept(result)[working][0] == codes.SCALE_IN_CAP


def test_a_node_that_never_initialized_is_not_in_the_base_of_a_budgets_percentage() -> None:
    """Karpenter's disruption budgets count a NodePool's initialized nodes only (kubernetes-sigs/karpenter
    disruption helpers countBudgetConsumers: ``!node.Initialized()`` is skipped), and a node whose GPUs
    never registered never is. 25 % of the 4 working nodes allows one drain; before, the broken node was
    in the base past the start window, and 25 % of 5 rounded up let two go."""
    w = World()
    broken, *working = w.group("gpu", "p4d.24xlarge", nodes=5, max_size=10, gpu_taint=True)
    status = _joined(w, broken, 40)["status"]
    for key in ("allocatable", "capacity"):
        status[key].pop("nvidia.com/gpu")
    for node in working:
        _joined(w, node, 120)
    for node in (broken, *working):
        w.idle_since(node, 20)

    result = w.plan(max_scale_in_fraction=1.0, disruption_budgets=[{"nodes": "25%"}])

    assert [d.node for d in result.drain] == [broken]
    code, reason = _kept(result)[working[0]]
    assert code == codes.DISRUPTION_BUDGET and "allows 1 of group gpu's 4 node(s)" in reason


@pytest.mark.parametrize("budget", ["50%", "10%"])
def test_a_percentage_budget_does_not_keep_a_group_whose_nodes_never_initialized_for_good(
    budget: str,
) -> None:
    """A group whose AMI lacks the GPU driver: none of its nodes ever initializes, so a percentage's base
    is 0 nodes and allows 0. Karpenter leaves such nodes out of its budgets altogether (helpers.go
    BuildDisruptionBudgetMapping skips ``!node.Initialized()`` in the count and in the disrupting ones;
    a NodeClaim that never registers is deleted by its liveness timeout, nodeclaim/lifecycle/liveness.go,
    with no budget asked), so a budget does not hold back their removal. Before, both were kept
    disruption-budget for good (a budget of 0 that never turns off: not even marked), paid for and of
    no use."""
    w = World()
    broken = w.group("gpu", "p4d.24xlarge", nodes=2, max_size=5, gpu_taint=True)
    (working,) = w.group("cpu", "m5.2xlarge", nodes=1, min_size=1, max_size=5)
    for node in broken:
        status = _joined(w, node, 40)["status"]
        for key in ("allocatable", "capacity"):
            status[key].pop("nvidia.com/gpu")
        w.idle_since(node, 20)  # the unready time, which a node that never initialized waits
    _joined(w, working, 120)

    result = w.plan(max_scale_in_fraction=1.0, disruption_budgets=[{"nodes": budget}])

    assert sorted(d.node for d in result.drain) == sorted(broken)


def test_a_budget_still_holds_back_moving_the_pods_off_a_node_that_never_initialized() -> None:
    """The budget lets an idle node that never initialized go (it disrupts nothing), not a consolidation
    that evicts the pods running there: a budget of 0 (an office-hours freeze) keeps them running, as it
    would on any node; Karpenter never consolidates an uninitialized node at all (helpers.go
    GetCandidates: not a candidate)."""
    w = World(regions=("us-east-1",))
    (broken,) = w.group("gpu", "p4d.24xlarge", nodes=1, max_size=5)
    status = _joined(w, broken, 60)["status"]
    for key in ("allocatable", "capacity"):
        status[key].pop("nvidia.com/gpu")
    (other,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=5)
    _joined(w, other, 120)
    w.pods("web", 1, cpu="1", memory="1Gi", node_name=broken, owner=("ReplicaSet", "web"),
           annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"})  # fmt: skip
    under = {"consolidation": "when-underutilized", "consolidation_utilization_threshold": 1.0}

    free = w.plan(max_scale_in_fraction=1.0, **under)
    frozen = w.plan(max_scale_in_fraction=1.0, disruption_budgets=[{"nodes": "0"}], **under)

    assert [(d.node, d.code) for d in free.drain] == [(broken, codes.CONSOLIDATION)]
    assert frozen.drain == () and _kept(frozen)[broken][0] == codes.DISRUPTION_BUDGET


def test_once_its_gpus_are_registered_the_job_goes_there() -> None:
    w, node, job = _gpu_world(minutes_ago=1)
    status = w.node(node)["status"]
    for key in ("allocatable", "capacity"):
        status[key]["nvidia.com/gpu"] = "8"

    result = w.plan()

    assert result.scale_up == () and {p.pod: p.node for p in result.placements}[job] == node


@pytest.mark.parametrize(
    "taint", [PREFIXED, {**PREFIXED, "key": "ignore-taint.cluster-autoscaler.kubernetes.io/x"}]
)
def test_a_node_with_a_startup_taint_by_prefix_is_starting(taint: dict[str, str]) -> None:
    w, node, pod = _tainted_world(taint)

    result = w.plan()

    assert result.scale_up == () and pending_codes(result)[pod] == codes.FITS_LAUNCHING
    assert taint["key"] in _kept(result)[node][1]


def test_a_taint_named_in_startup_taints_is_one_and_others_are_not() -> None:
    w, _, pod = _tainted_world(CNI)

    assert w.plan(startup_taints=["node.cilium.io/agent-not-ready"]).scale_up == ()
    unlisted = w.plan()  # a taint the pod does not tolerate, not known to go away: a new node
    assert scale_up(unlisted) == {"cpu": (1, 2, [pod])}


def test_template_nodes_drop_startup_and_status_taints_but_keep_the_others() -> None:
    w = World()
    w.group("cpu", "m5.2xlarge", max_size=5)
    w.group("dedicated", "m5.2xlarge", max_size=5)
    for group, taints in (
        (
            "cpu",
            {
                "startup-taint.cluster-autoscaler.kubernetes.io/disk-setup",
                "status-taint.cluster-autoscaler.kubernetes.io/x",
            },
        ),
        ("dedicated", {"dedicated"}),
    ):
        w.groups[group]["Tags"] += [
            {"Key": f"k8s.io/cluster-autoscaler/node-template/taint/{key}", "Value": "true:NoSchedule"}
            for key in sorted(taints)
        ]
    (pod,) = w.pods("web", 1, cpu="2", memory="4Gi")

    result = w.plan()

    assert scale_up(result) == {"cpu": (0, 1, [pod])}  # from zero: its template is what a node keeps


def test_a_starting_node_is_not_unready_and_one_that_never_initializes_is() -> None:
    """Four p4d nodes whose GPUs never registered (a driver the AMI lacks): while young they are
    capacity launching; past the window they count as unready, and their group gets no new nodes."""
    w = World()
    names = w.group("gpu", "p4d.24xlarge", nodes=4, max_size=10, gpu_taint=True)
    w.group("spare", "p4d.24xlarge", region="us-west-2", max_size=10, gpu_taint=True)
    for name in names:
        status = _joined(w, name, 1)["status"]
        for key in ("allocatable", "capacity"):
            status[key].pop("nvidia.com/gpu")
    jobs = w.gpu_pods("train", 5, 8)

    young = w.plan()
    assert young.unhealthy == ()
    assert scale_up(young) == {"gpu": (4, 5, [jobs[4]])}  # four jobs wait for the four starting nodes

    for name in names:
        _joined(w, name, 20)
    old = w.plan()
    assert [u.group for u in old.unhealthy] == [None, "gpu"]
    assert scale_up(old) == {"spare": (0, 5, sorted(jobs))}  # not the group whose GPUs never come
    assert "group gpu is unhealthy: 4 of 4 node(s)" in old.unhealthy[1].reason


def test_startup_taints_are_checked() -> None:
    with pytest.raises(ValidationError, match="startup_taints"):
        PlannerConfig(startup_taints=[""])


def test_the_start_window_is_its_own_setting() -> None:
    """cluster-autoscaler's --max-node-startup-time, apart from --max-node-provision-time: 0 takes every
    Ready node as it is."""
    w, _, job = _gpu_world(minutes_ago=1)

    assert scale_up(w.plan(max_node_startup_minutes=0)) == {"gpu": (1, 2, [job])}
    assert w.plan(max_node_provision_minutes=0.5).scale_up == ()


@pytest.mark.parametrize(
    "taint",
    [
        # the cloud node controller's, until it initializes the node (kubelet --cloud-provider=external)
        {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"},
        # the node lifecycle controller's, for a few seconds after Ready turns True
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
        # the NetworkUnavailable condition's, until the CNI clears it
        {"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"},
    ],
)
def test_a_young_ready_node_still_carrying_a_taint_of_its_start_is_starting(taint: dict[str, str]) -> None:
    """Taints the control plane puts on every new node and lifts once it is set up: Karpenter takes a node
    carrying one as not initialized yet (pkg/scheduling/taints.go KnownEphemeralTaints: not-ready,
    unreachable, uninitialized), cluster-autoscaler as not ready, so still upcoming while young
    (utils/kubernetes/ready.go GetNodeReadiness: not-ready, network-unavailable). A snapshot taken in
    that window saw an ordinary node the job does not tolerate, and launched a second node for it."""
    w, node, pod = _tainted_world(taint)

    result = w.plan()

    assert result.scale_up == () and pending_codes(result)[pod] == codes.FITS_LAUNCHING
    assert taint["key"] in _kept(result)[node][1]
    old, _, pod = _tainted_world(taint, 16)  # past max_node_startup_minutes: ordinary
    assert scale_up(old.plan()) == {"cpu": (1, 2, [pod])}


def test_a_starting_node_has_no_room_for_what_pods_already_bound_there_request() -> None:
    """kube-scheduler binds a pod to a Ready node whose GPUs are not registered yet when its other
    requests fit (a data loader tolerating the GPU taint). The node stays capacity launching, but with
    the room that pod leaves, as Karpenter reckons an uninitialized node (its expected allocatable less
    its pods' requests: state.StateNode.Available): a job that no longer fits there gets a new node,
    not a wait for the device plugin and then a launch."""
    w, node, job = _gpu_world(minutes_ago=1)
    w.pods(
        "loader", 1, cpu="60", memory="100Gi", node_name=node, phase="Running",
        tolerations=[GPU_TOLERATION_ALL],
    )  # fmt: skip

    result = w.plan()

    # 95 cores less the loader's 60 leave 35; the job asks 80
    assert scale_up(result) == {"gpu": (1, 2, [job])}
    # a pod that fits in what the loader leaves still waits for the node
    (small,) = w.gpu_pods("eval", 1, 8, cpu="30", memory="100Gi")
    result = w.plan()
    assert pending_codes(result)[small] == codes.FITS_LAUNCHING
    assert scale_up(result) == {"gpu": (1, 2, [job])}


def test_a_pod_bound_to_a_starting_node_keeps_its_host_port_there() -> None:
    """kube-scheduler's NodePorts keeps a pod asking for a host port off a node whose pod holds it: a
    starting node whose bound pod holds the port has no room for it, whatever room is left."""
    w, node, _ = _gpu_world(minutes_ago=1)
    port = {"containerPort": 9400, "hostPort": 9400, "protocol": "TCP"}
    (exporter,) = w.pods("exporter", 1, node_name=node, phase="Running", tolerations=[GPU_TOLERATION_ALL])
    (pending,) = w.pods("probe", 1, tolerations=[GPU_TOLERATION_ALL])
    for key in (exporter, pending):
        w.pod_item(key)["spec"]["containers"][0]["ports"] = [port]

    result = w.plan()

    assert pending in scale_up(result)["gpu"][2]


def test_a_starting_node_has_the_room_its_kubelet_reports_not_the_templates_estimate() -> None:
    """Karpenter's state node takes an uninitialized node's allocatable from the Node where it reports
    one (StateNode.Allocatable: the expected value only for a resource the Node reports as zero):
    kube-scheduler binds against it. A starting node whose kubelet keeps 90 cores, 60 of them taken by
    a bound loader, has 30 left: a pod asking 32 gets a node of its own, not a wait on the estimate's
    95.69 cores (the device plugin's GPUs, not reported yet, are still the template's)."""
    w, node, job = _gpu_world(minutes_ago=1)
    w.node(node)["status"]["allocatable"]["cpu"] = "90"
    w.pods(
        "loader", 1, cpu="60", memory="100Gi", node_name=node, phase="Running",
        tolerations=[GPU_TOLERATION_ALL],
    )  # fmt: skip
    (eval_pod,) = w.gpu_pods("eval", 1, 8, cpu="32", memory="100Gi")

    result = w.plan()

    assert eval_pod not in pending_codes(result)
    assert scale_up(result) == {"gpu": (1, 3, [eval_pod, job])}
    # 28 cores fit in the 30 the kubelet leaves: the pod waits for the node
    w.pod_item(eval_pod)["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "28"
    result = w.plan()
    assert pending_codes(result)[eval_pod] == codes.FITS_LAUNCHING


def test_a_static_pod_on_a_starting_node_takes_its_room_when_new_nodes_run_none() -> None:
    """kube-scheduler counts a static (mirror) pod's requests on its node as any other pod's. A group
    whose template is an estimate reserves no room for static pods (its new nodes run none it knows
    of): one that the starting node runs takes room the template does not leave out, and 30 cores of
    static pod beside a 30-core loader leave 35 of the node's 95."""
    w, node, job = _gpu_world(minutes_ago=1)
    for name, notes, owner in (
        ("loader", None, ("Job", "job")),
        ("proxy", {"kubernetes.io/config.mirror": "abc"}, ("Node", node)),
    ):
        w.pods(
            name, 1, cpu="30", memory="10Gi", node_name=node, phase="Running", owner=owner,
            annotations=notes, tolerations=[GPU_TOLERATION_ALL],
        )  # fmt: skip
    (eval_pod,) = w.gpu_pods("eval", 1, 8, cpu="40", memory="100Gi")

    result = w.plan()

    assert eval_pod not in pending_codes(result)
    assert scale_up(result) == {"gpu": (1, 3, [eval_pod, job])}


def test_a_starting_node_whose_place_has_no_launching_node_left_does_not_spare_the_next() -> None:
    """Two p4d nodes of a group over zones a and b are starting, each with a 60-core loader bound, and
    the group's desired capacity fell to 1 meanwhile: one node is launching, in zone b (Auto Scaling's
    answer lists that instance first). The zone-a node, first by name, has no launching node of its
    place to stand for; the zone-b node still has the room its loader leaves (35 cores), and the
    80-core job gets a node of its own instead of waiting on an empty p4d that is not there."""
    w = World()
    nodes = w.group(
        "gpu", "p4d.24xlarge", nodes=2, max_size=5, gpu_taint=True, zones=["us-east-1a", "us-east-1b"]
    )
    for node, instance in zip(nodes, w.groups["gpu"]["Instances"], strict=True):
        item = _joined(w, node, minutes_ago=1)
        for key in ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone"):
            item["metadata"]["labels"][key] = instance["AvailabilityZone"]  # as the cloud node controller
        for key in ("allocatable", "capacity"):
            item["status"][key].pop("nvidia.com/gpu")
        w.pods(
            f"loader-{instance['AvailabilityZone']}", 1, cpu="60", memory="100Gi", node_name=node,
            phase="Running", tolerations=[GPU_TOLERATION_ALL],
        )  # fmt: skip
    w.groups["gpu"]["DesiredCapacity"] = 1
    zones = {n: i["AvailabilityZone"] for n, i in zip(nodes, w.groups["gpu"]["Instances"], strict=True)}
    assert zones[min(nodes)] == "us-east-1a"  # the node with no launching node of its place comes first
    (job,) = w.gpu_pods("train", 1, 8)

    result = w.plan()

    assert pending_codes(result).get(job) != codes.FITS_LAUNCHING
    assert job in scale_up(result)["gpu"][2]


def _preempting_on_a_starting_node(job_priority: int) -> tuple[World, str, str]:
    """A starting p4d (GPUs not registered yet) where a 60-core loader of priority 1000 preempted a
    pod and waits for its room (status.nominatedNodeName), and the 80-core job, of ``job_priority``."""
    w, node, job = _gpu_world(minutes_ago=1)
    (loader,) = w.pods("loader", 1, cpu="60", memory="100Gi", priority=1000, tolerations=[GPU_TOLERATION_ALL])
    w.pod_item(loader)["status"]["nominatedNodeName"] = node
    w.pod_item(job)["spec"]["priority"] = job_priority
    return w, loader, job


def test_a_pod_nominated_to_a_starting_node_takes_its_room_from_pods_of_its_priority_or_lower() -> None:
    """kube-scheduler adds the pods nominated to a node of equal or higher priority to it when it
    filters the node for a pod (addGENominatedPods), a starting node as any other: the loader's 60
    cores are not the job's, which gets a p4d of its own instead of waiting on a node it will not fit."""
    w, loader, job = _preempting_on_a_starting_node(job_priority=0)

    result = w.plan()

    assert pending_codes(result)[loader] == codes.NOMINATED
    assert scale_up(result) == {"gpu": (1, 2, [job])}


def test_a_higher_priority_pod_may_take_the_room_of_a_pod_nominated_to_a_starting_node() -> None:
    """kube-scheduler counts a nominated pod only against pods of equal or lower priority: the job of
    priority 2000 takes the starting node's room (the loader preempts again if it must)."""
    w, _, job = _preempting_on_a_starting_node(job_priority=2000)

    result = w.plan()

    assert result.scale_up == () and pending_codes(result)[job] == codes.FITS_LAUNCHING


def test_a_hostname_spread_counts_the_pods_bound_to_a_starting_node() -> None:
    """kube-scheduler's PodTopologySpread counts the pods a node runs that the selector matches, on a
    starting node as on any (podtopologyspread/filtering.go: a node standing more than maxSkew above the
    least loaded fails the filter). The starting node runs a replica, the other node none and is full:
    one more replica there stands at 2 against 0, so the waiting replica needs a node of its own, not
    a wait on the starting one."""
    w = World()
    ready, starting = w.group("cpu", "m5.2xlarge", nodes=2, max_size=5)
    _joined(w, starting, minutes_ago=1)["spec"]["taints"] = [PREFIXED]
    w.pods("fill", 1, cpu="7", memory="8Gi", node_name=ready, phase="Running")
    spread = {
        "maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    replicas = []
    for name, node in (("web-0", starting), ("web-1", None)):
        item = o.pod(
            name, cpu="1", memory="1Gi", node_name=node, owner=("ReplicaSet", "web"), labels={"app": "web"},
            tolerations=[{"key": PREFIXED["key"], "operator": "Exists", "effect": "NoSchedule"}],
        )  # fmt: skip
        item["spec"]["topologySpreadConstraints"] = [spread]
        w.items.append(item)
        replicas.append(f"default/{name}")

    result = w.plan()

    assert pending_codes(result).get(replicas[1]) != codes.FITS_LAUNCHING
    assert scale_up(result) == {"cpu": (2, 3, [replicas[1]])}


def test_a_limited_tenant_takes_the_starting_node_its_pods_fit_whatever_the_first_one_holds() -> None:
    """Both launching nodes of the group are registered and starting, a pod of another namespace bound
    to each: 6 cores on the first by name, 1 on the second. team-a, limited to one node, has two pods
    of 3 cores: the second starting node holds both (one node within its limit); the first holds
    neither. Reckoning every fresh launching node as the first one takes them for none, and team-a got
    a new node while the second starting node sat empty of its pods."""
    w = World()
    nodes = w.group("cpu", "m5.2xlarge", nodes=2, max_size=10)
    tolerate = [{"key": PREFIXED["key"], "operator": "Exists", "effect": "NoSchedule"}]
    for node, cpu in zip(sorted(nodes), ("6", "1"), strict=True):
        _joined(w, node, minutes_ago=1)["spec"]["taints"] = [PREFIXED]
        w.pods(f"setup-{cpu}", 1, namespace="tools", cpu=cpu, memory="1Gi", node_name=node,
               phase="Running", tolerations=tolerate)  # fmt: skip
    pods = w.pods("a", 2, namespace="team-a", cpu="3", memory="2Gi", tolerations=tolerate)

    result = w.plan(tenants={"team-a": {"limits": {"nodes": 1}}})

    assert result.scale_up == ()
    assert [pending_codes(result)[p] for p in pods] == [codes.FITS_LAUNCHING] * 2
