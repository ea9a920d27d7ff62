"""Models parsed from what the real APIs return."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from fractions import Fraction

import pytest

from spillway.local import objects as o
from spillway.model.aws import AutoScalingGroup, bundled_instance_types, parse_asgs
from spillway.model.cluster import ClusterSnapshot, NodeInfo, PodInfo
from spillway.model.k8s import Node, Pod, parse_kube_list
from spillway.model.nodegroup import (
    build_node_groups,
    build_template,
    is_capacity_failure,
    resolve_instance_type,
)
from spillway.model.quantity import (
    NegativeQuantity,
    QuantityError,
    QuantityOutOfRange,
    parse_quantity,
    to_milli,
)


@pytest.mark.parametrize(
    ("text", "exact"),
    [
        ("500m", Fraction(1, 2)),
        ("16Gi", Fraction(16 * 2**30)),
        ("1e3", Fraction(1000)),
        ("1.5", Fraction(3, 2)),
        ("0.1", Fraction(1, 10)),
        ("2E-3", Fraction(2, 1000)),
        ("100u", Fraction(1, 10_000)),
        ("1k", Fraction(1000)),
        ("1M", Fraction(10**6)),
        (".5", Fraction(1, 2)),
        ("+3", Fraction(3)),
        (4, Fraction(4)),
    ],
)
def test_quantities_parse_exactly(text: str | int, exact: Fraction) -> None:
    assert parse_quantity(text) == exact


def test_milli_values_round_up_like_the_api_server() -> None:
    assert to_milli("1") == 1000
    assert to_milli("100u") == 1  # 0.1 milli rounds up to 1
    assert to_milli("1Ki") == 1024 * 1000


@pytest.mark.parametrize("bad", ["", "1.2.3", "12 Gi", "5mi", "Gi", "1e", "abc"])
def test_bad_quantities_are_rejected(bad: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)


def test_effective_requests_sum_containers_max_init_plus_overhead() -> None:
    raw = o.pod("p", cpu="1", memory="1Gi")
    raw["spec"]["containers"].append(
        {"name": "side", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}
    )
    raw["spec"]["initContainers"] = [
        {"name": "migrate", "resources": {"requests": {"cpu": "2", "memory": "256Mi"}}},
        {"name": "fetch", "resources": {"limits": {"cpu": "1", "memory": "4Gi"}}},  # limits default requests
    ]
    raw["spec"]["overhead"] = {"cpu": "250m", "memory": "120Mi"}
    requests = Pod.model_validate(raw).effective_requests()
    assert requests["cpu"] == 2000 + 250  # init 2 > 1.5 of containers
    assert requests["memory"] == (4 * 2**30 + 120 * 2**20) * 1000  # init limit 4Gi > 1.5Gi


def test_sidecar_init_containers_add_to_the_pod_request() -> None:
    raw = o.pod("p", cpu="1", memory="1Gi")
    raw["spec"]["initContainers"] = [
        {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
        {"name": "setup", "resources": {"requests": {"cpu": "1"}}},
    ]
    # Sidecar runs beside the app: 1 + 0.5; the plain init after it peaks at 0.5 + 1.
    assert Pod.model_validate(raw).effective_requests()["cpu"] == 1500


def test_pod_level_resources_replace_the_containers_cpu_and_memory_only() -> None:
    """Kubernetes 1.34's pod-level resources (beta, on by default): spec.resources sets CPU, memory and
    huge pages for the whole pod; other resources (GPUs) still add up from the containers; overhead
    comes on top. A limit alone is the request, as the API server defaults it."""
    raw = o.pod("p", cpu="100m", memory="128Mi", gpus=1)
    raw["spec"]["resources"] = {"requests": {"cpu": "6"}, "limits": {"memory": "24Gi", "nvidia.com/gpu": "4"}}
    raw["spec"]["overhead"] = {"cpu": "250m"}

    requests = Pod.model_validate(raw).effective_requests()

    assert requests["cpu"] == 6000 + 250
    assert requests["memory"] == 24 * 2**30 * 1000
    assert requests["nvidia.com/gpu"] == 1000  # not a pod-level resource: the container's


def test_a_pod_with_only_pod_level_requests_is_planned_at_its_size() -> None:
    """Its containers ask for nothing: read container by container, it would fit any node's room."""
    from plan_world import World, scale_up

    w = World()
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    w.pods("busy", 1, cpu="6", memory="8Gi", node_name=node)
    raw = o.pod("whole", cpu="0", memory="0")
    raw["spec"]["resources"] = {"requests": {"cpu": "4", "memory": "8Gi"}}
    w.items.append(raw)

    result = w.plan()

    assert scale_up(result) == {"cpu": (1, 2, ["default/whole"])}  # not the 1.9 CPU left on the node


def test_a_pod_that_claims_devices_through_dra_is_neither_placed_nor_scaled_for() -> None:
    """A GPU asked for through a ResourceClaim is no nvidia.com/gpu request: read as a CPU pod, it would
    be planned onto a CPU node's room that kube-scheduler refuses, plan after plan. It is told apart."""
    from plan_world import World, pending_codes

    w = World()
    w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    raw = o.pod("infer", cpu="1", memory="1Gi")
    raw["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    w.items.append(raw)
    snapshot, *_ = w.parsed()
    (pod,) = [p for p in snapshot.pods if p.name == "infer"]

    result = w.plan()

    assert pod.claims_devices and PodInfo.from_dict(pod.to_dict()) == pod
    assert result.scale_up == () and result.placements == ()
    assert pending_codes(result)["default/infer"] == "dynamic-resources"


@pytest.mark.parametrize(
    "owners",
    [
        [],
        [{"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "u1"}],
        [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u2", "controller": True}],
    ],
    ids=["no owner", "an owner that is no controller", "a controller"],
)
def test_a_pod_read_from_the_api_is_the_same_pod_after_a_snapshot_round_trip(
    owners: list[dict[str, object]],
) -> None:
    """The planner reads the snapshot observe stored: a pod must come back as it was read, whoever owns it."""
    raw = o.pod("p", cpu="1", memory="1Gi")
    raw["metadata"]["ownerReferences"] = owners
    pod = PodInfo.from_pod(Pod.model_validate(raw))

    assert PodInfo.from_dict(json.loads(json.dumps(pod.to_dict()))) == pod


def test_a_bound_pod_that_may_tolerate_the_drain_keeps_its_controllers_uid_through_the_snapshot() -> None:
    """A plan's drain names the controller of such a pod (kind, name and uid), so that the drain takes
    the controller's replacement of it as the same workload; the uid tells a controller made again
    under the same name apart. Other pods store none: it would only bloat the snapshot."""
    everything = [{"operator": "Exists"}]
    agent = PodInfo.from_pod(Pod.model_validate(
        o.pod("agent-0", node_name="n1", tolerations=everything, owner=("ReplicaSet", "agent"))))  # fmt: skip
    assert agent.owner_uid == o._uid("ReplicaSet", "default", "agent")
    assert PodInfo.from_dict(json.loads(json.dumps(agent.to_dict()))) == agent

    for raw in (
        o.pod("web-0", node_name="n1", owner=("ReplicaSet", "web")),  # the cordon keeps its replacement away
        o.pod("agent-1", tolerations=everything, owner=("ReplicaSet", "agent")),  # pending: on no node
        o.pod("agent-2", node_name="n1", tolerations=everything, owner=("DaemonSet", "agent")),  # ignored
    ):
        info = PodInfo.from_pod(Pod.model_validate(raw))
        assert (info.owner_uid, "ou" in info.to_dict()) == ("", False), info.name


def test_extended_resources_come_from_limits_and_pending_state_is_read() -> None:
    info = PodInfo.from_pod(Pod.model_validate(o.pod("g", gpus=2, priority=5)))
    assert info.requests["nvidia.com/gpu"] == 2000
    assert info.is_pending_unschedulable()
    assert info.priority == 5 and info.owner_kind == "Job"
    gated = o.pod("gated")
    gated["status"]["conditions"][0]["reason"] = "SchedulingGated"
    assert not PodInfo.from_pod(Pod.model_validate(gated)).is_pending_unschedulable()


def test_node_info_reads_provider_id_readiness_and_cordon_owner() -> None:
    raw = o.node(
        "ip-10-0-0-1.ec2.internal",
        instance="i-0123456789abcdef0",
        unschedulable=True,
        annotations={"spillway.io/cordoned": "x"},
        ready=False,
    )
    info = NodeInfo.from_node(Node.model_validate(raw))
    assert info.instance_id == "i-0123456789abcdef0"
    assert info.unschedulable and info.cordoned_by_spillway and not info.ready
    assert info.allocatable["cpu"] == 7910


def test_snapshot_round_trips_through_plain_dicts() -> None:
    objects = parse_kube_list(
        o.kube_list(
            [
                o.node("n1", instance="i-0aaa"),
                o.daemonset_pod("ds-1", "n1"),
                o.pod(
                    "a",
                    node_name="n1",
                    annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
                ),
                o.pod("b", gpus=1, node_selector={"x": "y"}, tolerations=[{"operator": "Exists"}]),
                o.pdb("pdb", "default", {"app": "a"}, min_available=1),
            ]
        )
    )
    snap = ClusterSnapshot.build("c", o.EPOCH, objects.nodes, objects.pods, objects.pdbs, observe_seconds=1.5)
    again = ClusterSnapshot.from_dict(snap.to_dict())
    assert again == snap


def test_kube_list_errors_name_the_item_and_field() -> None:
    doc = o.kube_list([o.node("n1", instance="i-0aaa"), o.pod("p", cpu="lots")])
    with pytest.raises(ValueError, match=r"items\[1\]\.spec\.containers\.0\.resources\.requests\.cpu"):
        parse_kube_list(doc)


def test_asg_region_comes_from_its_arn() -> None:
    (group,) = parse_asgs(o.asgs_output([o.asg("g", region="eu-west-1")]))
    assert group.region == "eu-west-1"


def test_instance_type_resolution_order_instances_then_overrides_then_tag() -> None:
    with_instances = AutoScalingGroup.model_validate(
        o.asg("a", instance_type="g5.xlarge", instances=["i-01", "i-02"])
    )
    assert resolve_instance_type(with_instances) == "g5.xlarge"
    mixed = AutoScalingGroup.model_validate(o.asg("b", instance_type="m5.xlarge", mixed=True))
    assert resolve_instance_type(mixed) == "m5.xlarge"
    tagged = AutoScalingGroup.model_validate(
        o.asg("c", labels={"node.kubernetes.io/instance-type": "c5.large"})
    )
    assert resolve_instance_type(tagged) == "c5.large"
    bare = AutoScalingGroup.model_validate(o.asg("d"))
    assert resolve_instance_type(bare) is None


def test_template_node_from_instance_type_reserve_and_node_template_tags() -> None:
    group = AutoScalingGroup.model_validate(
        o.asg(
            "gpu",
            region="us-west-2",
            instance_type="g5.12xlarge",
            mixed=True,
            labels={"team": "vision"},
            taints={"nvidia.com/gpu": "present:NoSchedule", "dedicated": "NoExecute"},
            resources={"ephemeral-storage": "200Gi"},
        )
    )
    template = build_template(
        group, "g5.12xlarge", bundled_instance_types(), {"cpu": 200, "memory": 2**30 * 1000}
    )
    assert template is not None
    assert template.allocatable["cpu"] == 48_000 - 200
    assert template.allocatable["memory"] == (196_608 * 2**20 - 2**30) * 1000
    assert template.allocatable["nvidia.com/gpu"] == 4000
    assert template.allocatable["pods"] == 737 * 1000  # EKS: 15 ENIs x (50 - 1) + 2
    assert template.allocatable["ephemeral-storage"] == 200 * 2**30 * 1000
    assert template.labels["team"] == "vision"
    assert template.labels["node.kubernetes.io/instance-type"] == "g5.12xlarge"
    assert template.labels["topology.kubernetes.io/region"] == "us-west-2"
    assert template.labels["topology.kubernetes.io/zone"] == "us-west-2a"
    assert template.labels["kubernetes.io/arch"] == "amd64"
    assert set(template.taints) == {
        ("nvidia.com/gpu", "present", "NoSchedule"),
        ("dedicated", None, "NoExecute"),
    }


def test_catalogue_covers_gpu_and_accelerator_families() -> None:
    cat = bundled_instance_types()
    assert cat["p3.2xlarge"].nvidia_gpus == 1
    assert cat["p4d.24xlarge"].nvidia_gpus == 8
    assert cat["p5.48xlarge"].nvidia_gpus == 8
    assert cat["g6e.xlarge"].nvidia_gpus == 1
    assert cat["trn1.32xlarge"].neuron_devices == 16
    assert cat["inf2.xlarge"].neuron_devices == 1
    assert cat["m7g.large"].architecture == "arm64"


def test_only_groups_tagged_for_the_cluster_are_managed_and_failures_attach() -> None:
    mine = o.asg("mine", cluster="ml", instance_type="m5.large", mixed=True)
    other = o.asg("other", cluster="other", instance_type="m5.large", mixed=True)
    untagged = o.asg("untagged", tagged=False, instance_type="m5.large", mixed=True)
    failure = o.failed_launch(mine, o.EPOCH)
    asgs = parse_asgs(o.asgs_output([mine, other, untagged]))
    from spillway.model.aws import parse_activities

    groups = build_node_groups(
        asgs, parse_activities(o.activities_output([failure])), bundled_instance_types(), {}, "ml"
    )
    assert [g.name for g in groups] == ["mine"]
    assert len(groups[0].launch_failures) == 1


@pytest.mark.parametrize(
    ("message", "capacity"),
    [
        (
            "We currently do not have sufficient p4d.24xlarge capacity in the Availability Zone you requested",
            True,
        ),
        ("Error Code: InsufficientInstanceCapacity", True),
        ("You have requested more vCPU capacity than your current vCPU limit ... VcpuLimitExceeded", True),
        (
            "Your requested instance type (p5.48xlarge) is not supported in your requested Availability Zone. Unsupported",
            True,
        ),
        ("The security group 'sg-123' does not exist", False),
    ],
)
def test_capacity_failures_are_told_from_other_launch_errors(message: str, capacity: bool) -> None:
    assert is_capacity_failure(message) is capacity


def test_oldest_pending_seconds_is_measured_from_the_unschedulable_condition() -> None:
    from datetime import timedelta

    from spillway.model.snapshot import Snapshot

    taken = o.EPOCH + timedelta(minutes=12)
    objects = parse_kube_list(
        o.kube_list(
            [
                o.node("n1", instance="i-0aaa"),
                o.pod("old", created=o.EPOCH),
                o.pod("new", created=o.EPOCH + timedelta(minutes=10)),
                o.pod("bound", node_name="n1", created=o.EPOCH - timedelta(hours=1)),
            ]
        )
    )
    cluster = ClusterSnapshot.build("c", taken, objects.nodes, objects.pods)
    assert Snapshot.build(cluster, (), taken_at=taken).oldest_pending_seconds() == 12 * 60


def test_oldest_pending_seconds_leaves_out_pods_below_the_expendable_cutoff() -> None:
    """A pod below ``expendable_priority_cutoff`` never triggers a scale-up, by design (cluster-autoscaler
    likewise): its wait is no sign of a fault, and the pending-too-long alarm paged for it every minute
    it waited past the threshold, with nothing the runbook could do (its reason is ``expendable``).
    (Found by hunt-state.)"""
    from datetime import timedelta

    from spillway.model.snapshot import Snapshot

    taken = o.EPOCH + timedelta(minutes=30)
    objects = parse_kube_list(
        o.kube_list(
            [
                o.pod("filler", created=o.EPOCH, priority=-100),
                o.pod("at-cutoff", created=o.EPOCH + timedelta(minutes=10), priority=-10),
                o.pod("job", created=o.EPOCH + timedelta(minutes=20)),
            ]
        )
    )
    snapshot = Snapshot.build(
        ClusterSnapshot.build("c", taken, objects.nodes, objects.pods), (), taken_at=taken
    )
    assert snapshot.oldest_pending_seconds() == 30 * 60  # every pod, when no cutoff is given
    assert snapshot.oldest_pending_seconds(expendable_below=-10) == 20 * 60


def test_a_csinode_with_null_lists_is_read_as_the_api_server_writes_it() -> None:
    """storage/v1 CSINodeSpec.drivers and CSINodeDriver.topologyKeys carry no omitempty, so a node no
    driver registered on yet says ``drivers: null``, and a driver without topology ``topologyKeys:
    null``: both are read, and the driver with a count keeps its limit."""
    from spillway.model.k8s import CSINode

    empty = CSINode.model_validate(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSINode",
            "metadata": {"name": "a"},
            "spec": {"drivers": None},
        }
    )
    mixed = CSINode.model_validate(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSINode",
            "metadata": {"name": "b"},
            "spec": {
                "drivers": [
                    {"name": "efs.csi.aws.com", "nodeID": "i-1", "topologyKeys": None},
                    {"name": "ebs.csi.aws.com", "nodeID": "i-1", "allocatable": {"count": 25},
                     "topologyKeys": ["topology.ebs.csi.aws.com/zone"]},
                ]
            },
        }
    )  # fmt: skip
    assert empty.attach_limits() == {}
    assert mixed.attach_limits() == {"ebs.csi.aws.com": 25}


# --- hostile quantities: bounded as Kubernetes bounds them, refused in constant time --------------


@pytest.mark.parametrize(
    "huge", ["1e999999999", "1e10000000", "1e400", "1e19", "8Ei", "9223372036854775808", "1" * 65, 1e400]
)
def test_quantities_past_int64_are_refused_at_once(huge: str | float) -> None:
    started = time.process_time()
    with pytest.raises(QuantityOutOfRange):
        to_milli(huge)
    assert time.process_time() - started < 0.05


def test_the_largest_quantities_kubernetes_holds_still_parse() -> None:
    assert parse_quantity("9223372036854775807") == 2**63 - 1
    assert parse_quantity("7Ei") == 7 * 2**60
    assert to_milli("1e18") == 10**21


def test_values_finer_than_nano_round_up_to_one_nano_without_a_huge_power() -> None:
    started = time.process_time()
    assert parse_quantity("1e-999999999") == Fraction(1, 10**9)
    assert parse_quantity("0.9n") == Fraction(1, 10**9)
    assert to_milli("1e-999999999") == 1
    assert parse_quantity("0e999999999") == 0
    assert time.process_time() - started < 0.05


@pytest.mark.parametrize("negative", ["-16", "-1m", "-0.5Gi", -3])
def test_negative_resource_amounts_are_refused(negative: str | int) -> None:
    with pytest.raises(NegativeQuantity, match="must not be negative"):
        to_milli(negative)


def test_non_ascii_digits_are_not_quantities() -> None:
    with pytest.raises(QuantityError):
        parse_quantity("\u0663")  # ARABIC-INDIC DIGIT THREE: int() would take it, Kubernetes does not


def test_a_pod_with_a_hostile_quantity_names_it_and_keeps_the_rest() -> None:
    raw = o.pod("p", cpu="1e400", memory="1Gi", node_name="n1")
    raw["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "-16"
    pod = Pod.model_validate(raw)
    assert pod.refused == (
        "spec.containers.0.resources.requests.cpu: quantity out of range (larger than 2^63-1): '1e400'",
        "spec.containers.0.resources.requests.nvidia.com/gpu: must not be negative: '-16'",
    )
    assert PodInfo.from_pod(pod).requests == {"memory": 2**30 * 1000}


def test_a_pod_malformed_elsewhere_still_fails_whole() -> None:
    raw = o.pod("p", cpu="1e400")
    raw["spec"]["priority"] = "high"
    with pytest.raises(ValueError, match="priority"):
        Pod.model_validate(raw)


def test_a_node_with_a_hostile_allocatable_offers_none_of_that_resource() -> None:
    raw = o.node("n1", instance="i-0abc", gpus=8)
    raw["status"]["allocatable"]["nvidia.com/gpu"] = "1e10000000"
    node = Node.model_validate_json(json.dumps(raw))
    assert node.refused and "status.allocatable.nvidia.com/gpu" in node.refused[0]
    assert "nvidia.com/gpu" not in NodeInfo.from_node(node).allocatable


def test_a_kube_list_with_a_negative_request_is_refused_naming_the_item() -> None:
    doc = o.kube_list([o.pod("a"), o.pod("b", gpus=1, node_name="n1")])
    doc["items"][1]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "-16"
    with pytest.raises(ValueError, match=r"items\[1\]\.spec\.containers\.0\.resources\.limits"):
        parse_kube_list(doc)


COST = "controller.kubernetes.io/pod-deletion-cost"


@pytest.mark.parametrize(
    "value", ["cheap", "2147483648", "-2147483649", "1_000", "+5", "007", " 5", "", "\u0663"]
)
def test_a_pod_deletion_cost_the_api_server_refuses_is_refused_naming_the_pod_and_annotation(
    value: str,
) -> None:
    """kubernetes/kubernetes pkg/apis/core/validation/validation.go, ValidatePodSpecificAnnotations: the
    value must be a 32-bit integer ("must be a 32bit integer"; helper.GetDeletionCostFromPodAnnotations:
    no "+" nor leading zero, then strconv.ParseInt(value, 10, 32)). It was read with Python's int(),
    which takes "1_000", "+5" and values past int32, else silently as 0, changing the order of victims
    without a word. (Found by review.)"""
    doc = o.kube_list(
        [o.node("n1", instance="i-01"), o.pod("web-0", node_name="n1", annotations={COST: value})]
    )

    with pytest.raises(
        ValueError, match=r"items\[1\]\.metadata\.annotations\.controller\.kubernetes\.io/pod-dele"
    ) as got:
        parse_kube_list(doc)
    assert "32-bit integer" in str(got.value) and "Pod default/web-0" in str(got.value)


@pytest.mark.parametrize(
    ("value", "cost"), [("-2147483648", -(2**31)), ("2147483647", 2**31 - 1), ("0", 0), ("-007", -7)]
)
def test_a_pod_deletion_cost_the_api_server_takes_is_read(value: str, cost: int) -> None:
    pod = Pod.model_validate(o.pod("web-0", node_name="n1", annotations={COST: value}))
    assert (pod.refused, PodInfo.from_pod(pod).deletion_cost) == ((), cost)


def test_two_nodes_with_one_name_are_refused_naming_both() -> None:
    doc = o.kube_list([o.node("n1", instance="i-01"), o.pod("p"), o.node("n1", instance="i-02")])
    with pytest.raises(ValueError, match=r"items\[2\]: Node n1 is also items\[0\]"):
        parse_kube_list(doc)


def test_a_pod_without_namespace_is_the_same_pod_as_in_default() -> None:
    bare = o.pod("p")
    del bare["metadata"]["namespace"]
    with pytest.raises(ValueError, match=r"Pod default/p is also items\[0\]"):
        parse_kube_list(o.kube_list([o.pod("p"), bare]))


def test_a_group_listed_twice_or_an_instance_in_two_groups_is_refused() -> None:
    a = o.asg("a", instances=["i-01"])
    b = o.asg("b", instances=["i-01"])
    with pytest.raises(ValueError, match=r"AutoScalingGroups\[1\]\.AutoScalingGroupARN: .* listed twice"):
        build_node_groups(parse_asgs(o.asgs_output([a, a])), [], bundled_instance_types(), {}, None)
    with pytest.raises(ValueError, match=r"i-01 is in two groups \(also AutoScalingGroups\[0\]"):
        build_node_groups(parse_asgs(o.asgs_output([a, b])), [], bundled_instance_types(), {}, None)


def test_a_deleted_job_pod_without_its_tracking_finalizer_is_read_as_counted_by_its_job() -> None:
    """The job controller removes ``batch.kubernetes.io/job-tracking`` from a pod only once it has counted
    it (status.failed or uncountedTerminatedPods): a deleted pod of a Job without it is counted; with
    it, or not deleted, or of no Job, it is not. The flag survives the snapshot."""
    read = {}
    for case, owner, finalizers, deleted in (
        ("counted", ("Job", "etl"), [], True),
        ("not yet", ("Job", "etl"), ["batch.kubernetes.io/job-tracking"], True),
        ("running", ("Job", "etl"), [], False),
        ("of a ReplicaSet", ("ReplicaSet", "web"), [], True),
    ):
        raw = o.pod("p", cpu="1", memory="1Gi", node_name="n1", owner=owner)
        raw["metadata"]["finalizers"] = finalizers
        if deleted:
            raw["metadata"]["deletionTimestamp"] = "2026-11-02T12:00:00Z"
        pod = PodInfo.from_pod(Pod.model_validate(raw))
        assert PodInfo.from_dict(json.loads(json.dumps(pod.to_dict()))) == pod
        read[case] = pod.job_counted
    assert read == {"counted": True, "not yet": False, "running": False, "of a ReplicaSet": False}


def test_an_unbound_pod_being_deleted_is_counted_neither_pending_nor_unschedulable() -> None:
    """kube-scheduler places no pod being deleted (schedule_one.go, skipPodSchedule), and the planner
    takes none as pending (PodInfo.is_pending_unschedulable); one still listed (a finalizer holds it,
    Kueue's on a group it evicted) keeps the PodScheduled=False it had. observe's PendingPods and
    UnschedulablePods counted it as a pod waiting for a node."""
    from spillway.model.snapshot import Snapshot

    now = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
    waiting = PodInfo.from_pod(Pod.model_validate(o.pod("waiting", cpu="1", memory="1Gi")))
    raw = o.pod("leaving", cpu="1", memory="1Gi")
    raw["metadata"]["deletionTimestamp"] = "2026-11-02T11:59:00Z"
    raw["metadata"]["finalizers"] = ["kueue.x-k8s.io/managed"]
    leaving = PodInfo.from_pod(Pod.model_validate(raw))
    assert leaving.unschedulable and leaving.terminating
    cluster = ClusterSnapshot(cluster="c", taken_at=now, nodes=(), pods=(waiting, leaving))

    counts = Snapshot.build(cluster, [], now).counts()

    assert (counts.pods, counts.pending_pods, counts.unschedulable_pods) == (2, 1, 1)


def test_a_terminating_pods_deletion_timestamp_is_kept_and_stored_only_when_set() -> None:
    """The end of a terminating pod's grace period (metadata.deletionTimestamp) is what a plan judges its
    room by (spillway.planner.disruption.leaves_late); a pod not being deleted stores nothing more."""
    raw = o.pod("p", cpu="1", memory="1Gi", node_name="n1", owner=("ReplicaSet", "web"))
    running = PodInfo.from_pod(Pod.model_validate(raw))
    raw["metadata"]["deletionTimestamp"] = "2026-11-02T13:00:00Z"
    raw["metadata"]["deletionGracePeriodSeconds"] = 3600
    leaving = PodInfo.from_pod(Pod.model_validate(raw))

    assert running.leaves_at is None and "lv" not in running.to_dict()
    assert leaving.leaves_at == datetime(2026, 11, 2, 13, 0, tzinfo=UTC)
    assert leaving.to_dict()["lv"] == "2026-11-02T13:00:00Z"
    assert PodInfo.from_dict(json.loads(json.dumps(leaving.to_dict()))) == leaving


def test_a_bound_pods_termination_grace_period_is_kept_and_stored_only_when_not_the_default() -> None:
    """A drain's eviction gives a pod its spec.terminationGracePeriodSeconds, so long its room stays taken
    (spillway.planner.disruption.evicted_late); the API server's default, 30 s, stores nothing, and
    neither does a pending pod's, which no drain evicts."""
    raw = o.pod("p", cpu="1", memory="1Gi", node_name="n1", owner=("ReplicaSet", "web"))
    unset = PodInfo.from_pod(Pod.model_validate(raw))
    raw["spec"]["terminationGracePeriodSeconds"] = 30
    default = PodInfo.from_pod(Pod.model_validate(raw))
    raw["spec"]["terminationGracePeriodSeconds"] = 3600
    slow = PodInfo.from_pod(Pod.model_validate(raw))
    raw["spec"].pop("nodeName")
    pending = PodInfo.from_pod(Pod.model_validate(raw))

    assert (unset.grace, default.grace, slow.grace, pending.grace) == (30, 30, 3600, 30)
    assert "tgp" not in unset.to_dict() and "tgp" not in default.to_dict() and "tgp" not in pending.to_dict()
    assert slow.to_dict()["tgp"] == 3600
    assert PodInfo.from_dict(json.loads(json.dumps(slow.to_dict()))) == slow
    assert PodInfo.from_dict(json.loads(json.dumps(default.to_dict()))) == default


def test_a_negative_termination_grace_period_reads_as_one_second_as_the_api_server_defaults_it() -> None:
    """Since 1.27 the API server defaults a negative spec.terminationGracePeriodSeconds to 1 (1.22 already
    deleted such a pod with 1 s); an older cluster still returns the negative value. Before, the model
    refused it (ge=0), and one such pod made the whole pod list unreadable."""
    raw = o.pod("p", cpu="1", memory="1Gi", node_name="n1", owner=("ReplicaSet", "web"))
    raw["spec"]["terminationGracePeriodSeconds"] = -5
    pod = Pod.model_validate(raw)

    assert pod.spec.termination_grace_period_seconds == 1
    assert PodInfo.from_pod(pod).grace == 1
    raw["spec"]["terminationGracePeriodSeconds"] = 2**63
    with pytest.raises(ValueError, match="terminationGracePeriodSeconds"):
        Pod.model_validate(raw)


@pytest.mark.parametrize(
    "value",
    [-(2**63) - 1, 2**63, True, "30", 30.0],
    ids=["below-int64", "above-int64", "bool", "string", "float"],
)
def test_a_termination_grace_period_no_api_server_could_return_is_refused_naming_it(value: object) -> None:
    """The field is an int64 the API server decodes strictly: a value outside int64's range, a bool, a
    string or a float is no grace period at all, and is refused naming the field. Only a negative int64
    reads as 1. Before, a value below int64's range read as 1 too: the negative-to-1 rule ran before
    the range was checked, so the lower bound was never seen."""
    raw = o.pod("p", cpu="1", memory="1Gi", node_name="n1", owner=("ReplicaSet", "web"))
    raw["spec"]["terminationGracePeriodSeconds"] = value
    with pytest.raises(ValueError, match="terminationGracePeriodSeconds"):
        Pod.model_validate(raw)
    raw["spec"]["terminationGracePeriodSeconds"] = -(2**63)
    assert Pod.model_validate(raw).spec.termination_grace_period_seconds == 1
