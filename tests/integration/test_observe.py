"""Observing: both sides into one snapshot, stored on change or heartbeat, nothing stored on failure."""

from __future__ import annotations

import importlib.util
import json
import logging
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from fakes import FakeCloud, FakeCluster, calls, refuse

from spillway.adapters.aws import AwsAdapter, AwsClients, AwsSettings
from spillway.adapters.store import SnapshotStore
from spillway.clients import build_clients
from spillway.errors import (
    AwsThrottled,
    ConfigurationError,
    KubeAuthError,
    KubeUnavailable,
    ObservationFailed,
)
from spillway.model.fleet import TAG_ATTEMPT, TAG_CLUSTER, TAG_GANG
from spillway.model.snapshot import Snapshot
from spillway.observe import ObserveConfig, deadline_for, observe_once, run_observe
from spillway.runtime import load_runtime_config

REPO = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
CONFIG = ObserveConfig(cluster="prod", interval_seconds=20, heartbeat_minutes=5)


@dataclass
class FakeTime:
    """A clock that only moves when slept on; ``at`` runs callbacks once their time has come."""

    now: datetime = T0
    slept: list[float] = field(default_factory=list)
    events: list[tuple[datetime, Callable[[], None]]] = field(default_factory=list)

    def clock(self) -> datetime:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += timedelta(seconds=seconds)
        for when, action in list(self.events):
            if when <= self.now:
                self.events.remove((when, action))
                action()

    def at(self, when: datetime, action: Callable[[], None]) -> None:
        self.events.append((when, action))


@pytest.fixture
def kube(kobj: Any) -> FakeCluster:
    nodes, pods, pdbs = kobj.cluster(12, 120, pending=3)
    pods.append(
        kobj.pod("done-job-abcde", "team-1", node_name=nodes[0]["metadata"]["name"], phase="Succeeded")
    )
    return FakeCluster(nodes, pods, pdbs)


@pytest.fixture
def aws(two_regions: Any) -> AwsAdapter:
    clients = AwsClients(("us-east-1", "us-west-2"), boto3.Session(), AwsSettings(max_attempts=2))
    return AwsAdapter(clients, "prod")


@pytest.fixture
def store(dynamodb: Any, tables: dict[str, str]) -> SnapshotStore:
    return SnapshotStore(dynamodb, tables["SnapshotsTable"])


def kubeflow_worker(
    kobj: Any, name: str, host: str, kind: str, job: str, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    """A worker pod of Kubeflow job ``kind``/``job`` in namespace ml on ``host``, as the training
    operator makes it: owned by the job (kubeflow.org/v1) and labelled with its name and replica type."""
    worker: dict[str, Any] = kobj.pod(
        name, "ml", node_name=host, owner=(kind, job), cpu="100m", annotations=annotations,
        labels={"training.kubeflow.org/job-name": job, "training.kubeflow.org/replica-type": "worker"},
    )  # fmt: skip
    worker["metadata"]["ownerReferences"][0]["apiVersion"] = "kubeflow.org/v1"
    return worker


def stored_items(store: SnapshotStore) -> list[dict[str, Any]]:
    return list(store.client.scan(TableName=store.table)["Items"])


# --- one observation --------------------------------------------------------------------------------


def test_observe_once_joins_kubernetes_and_both_regions(kube: FakeCluster, aws: AwsAdapter) -> None:
    snapshot = observe_once(kube, aws, CONFIG, lambda: T0)

    cluster = snapshot.cluster
    assert snapshot.taken_at == cluster.taken_at == T0
    assert len(cluster.nodes) == 12 and len(cluster.pdbs) == 3
    assert len(cluster.pods) == 120  # the Succeeded pod is dropped
    assert sum(1 for p in cluster.pods if p.is_pending_unschedulable()) == 3
    assert [(g.region, g.name) for g in snapshot.groups] == [
        ("us-east-1", "general"),
        ("us-east-1", "gpu"),
        ("us-west-2", "p3"),
    ]
    assert snapshot.observe_seconds > 0
    assert snapshot.counts().pending_pods == 3


def test_the_gang_attempts_instances_of_this_cluster_are_read_from_ec2_in_every_region(
    kube: FakeCluster, aws: AwsAdapter
) -> None:
    ec2 = boto3.client("ec2", region_name="us-west-2")
    image = ec2.describe_images()["Images"][0]["ImageId"]

    def run(tags: dict[str, str]) -> str:
        spec = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
        reservation = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, InstanceType="m5.large",
                                        TagSpecifications=spec)  # fmt: skip
        return str(reservation["Instances"][0]["InstanceId"])

    ours = run({TAG_ATTEMPT: "spillway-abc", TAG_GANG: "team-a/train", TAG_CLUSTER: "prod"})
    run({TAG_ATTEMPT: "spillway-def", TAG_CLUSTER: "staging"})  # another cluster's
    run({TAG_CLUSTER: "prod"})  # no gang attempt
    ended = run({TAG_ATTEMPT: "spillway-ghi", TAG_CLUSTER: "prod"})
    ec2.terminate_instances(InstanceIds=[ended])

    snapshot = observe_once(kube, aws, CONFIG, lambda: T0)

    (found,) = snapshot.cluster.fleet_instances
    assert (found.instance_id, found.region, found.attempt, found.gang, found.group) == (
        ours,
        "us-west-2",
        "spillway-abc",
        "team-a/train",
        None,
    )
    assert found.launched_at.tzinfo is not None and found.state in ("pending", "running")
    again = Snapshot.from_dict(json.loads(json.dumps(snapshot.to_dict())))
    assert again.cluster.fleet_instances == snapshot.cluster.fleet_instances


def test_a_region_whose_gang_instances_cannot_be_read_fails_no_observation(
    kube: FakeCluster, aws: AwsAdapter, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """DescribeInstances of the gang attempts, throttled (or refused) in one region, failed the whole
    observation: no snapshot, so no scale-up or scale-down anywhere, for a housekeeping read whose only
    use is the gang sweep. That region's fleet is left out of this snapshot (its orphans are swept a
    tick later), the other regions' are kept, and the failure is logged. (Found by review.)"""
    ec2 = boto3.client("ec2", region_name="us-east-1")
    image = ec2.describe_images()["Images"][0]["ImageId"]
    spec = [{"ResourceType": "instance", "Tags": [{"Key": TAG_ATTEMPT, "Value": "spillway-abc"},
                                                  {"Key": TAG_CLUSTER, "Value": "prod"}]}]  # fmt: skip
    ours = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, InstanceType="m5.large",
                             TagSpecifications=spec)["Instances"][0]["InstanceId"]  # fmt: skip
    read = aws.fleet_instances

    def throttled_in_oregon(region: str, instance_ids: Any = ()) -> Any:
        if region == "us-west-2":
            raise AwsThrottled(
                "DescribeInstances(us-west-2, gang attempts of prod): Throttling: Rate exceeded"
            )
        return read(region, instance_ids)

    monkeypatch.setattr(aws, "fleet_instances", throttled_in_oregon)

    snapshot = observe_once(kube, aws, CONFIG, lambda: T0)

    assert [i.instance_id for i in snapshot.cluster.fleet_instances] == [ours]
    assert {g.region for g in snapshot.groups} == {"us-east-1", "us-west-2"}
    # named in the snapshot (the observe function counts it: GangInstanceReadsFailed), and kept when stored
    assert snapshot.cluster.fleet_unread == ("us-west-2",)
    assert Snapshot.from_dict(json.loads(json.dumps(snapshot.to_dict()))).cluster.fleet_unread == (
        "us-west-2",
    )
    assert any("us-west-2" in r.getMessage() and "Rate exceeded" in r.getMessage() for r in caplog.records)


def test_each_groups_zones_carry_the_ids_ec2_names_them(kube: FakeCluster, aws: AwsAdapter) -> None:
    """A quota on a zone id must count a group's new nodes in a zone where no node has registered yet:
    observe reads which id each zone is from EC2 (moto: us-east-1a is use1-az6, us-west-2a usw2-az2),
    once per region, and each group keeps its zones' ids, in the stored snapshot too."""
    seen = [calls(aws._clients.ec2(r), "DescribeAvailabilityZones") for r in aws.regions]

    snapshot = observe_once(kube, aws, CONFIG, lambda: T0)

    assert {(g.name, g.zone_ids) for g in snapshot.groups} == {
        ("general", (("us-east-1a", "use1-az6"),)),
        ("gpu", (("us-east-1a", "use1-az6"),)),
        ("p3", (("us-west-2a", "usw2-az2"),)),
    }
    assert [len(made) for made in seen] == [1, 1]
    stored = Snapshot.from_dict(json.loads(json.dumps(snapshot.to_dict())))
    assert [g.zone_ids for g in stored.groups] == [g.zone_ids for g in snapshot.groups]


def test_a_region_whose_zone_ids_ec2_refuses_fails_no_observation(
    kube: FakeCluster, aws: AwsAdapter, caplog: pytest.LogCaptureFixture
) -> None:
    """The ids only sharpen how quotas on a zone id count new nodes (without them the planner learns a
    zone's id from its nodes, as it did before it read them): a role without
    ec2:DescribeAvailabilityZones, or a throttled call, leaves that region's groups without ids, warned,
    and the observation goes on."""
    refuse(aws._clients.ec2("us-west-2"), "describe_availability_zones", "UnauthorizedOperation", 403)

    snapshot = observe_once(kube, aws, CONFIG, lambda: T0)

    assert {g.name: g.zone_ids for g in snapshot.groups} == {
        "general": (("us-east-1a", "use1-az6"),),
        "gpu": (("us-east-1a", "use1-az6"),),
        "p3": (),
    }
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("us-west-2" in m and "UnauthorizedOperation" in m for m in warned), warned


def test_terminal_pods_are_kept_when_asked(kube: FakeCluster, aws: AwsAdapter) -> None:
    keep = CONFIG.model_copy(update={"keep_terminal_pods": True})

    snapshot = observe_once(kube, aws, keep, lambda: T0)

    assert len(snapshot.cluster.pods) == 121


def test_a_gangs_succeeded_members_are_kept_as_counts_and_their_pods_dropped(
    kobj: Any, aws: AwsAdapter
) -> None:
    """Volcano counts a gang's Succeeded members toward its minimum, so the planner must know them; the
    pods themselves are dropped as every finished pod is, and a finished gang leaves nothing."""
    nodes, pods, pdbs = kobj.cluster(2, 4)
    volcano = {"scheduling.k8s.io/group-name": "train"}
    for i, (phase, task) in enumerate([("Succeeded", "worker"), ("Succeeded", "worker"), ("Failed", "ps")]):
        done = kobj.pod(f"train-done{i}", "ml", phase=phase, node_name=nodes[0]["metadata"]["name"])
        done["metadata"]["annotations"] = {**volcano, "volcano.sh/task-spec": task}
        pods.append(done)
    waiting = kobj.pod("train-wait", "ml")
    waiting["metadata"]["annotations"] = {**volcano, "volcano.sh/task-spec": "worker"}
    old = kobj.pod("old-done", "ml", phase="Succeeded")
    old["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "old"}
    pods += [waiting, old]

    snapshot = observe_once(FakeCluster(nodes, pods, pdbs), aws, CONFIG, lambda: T0)

    assert snapshot.cluster.gang_succeeded == {"ml/train": {"worker": 2}}
    assert not any(p.terminal for p in snapshot.cluster.pods)
    assert len(snapshot.cluster.pods) == 5


def test_api_down_stores_nothing_and_raises(kube: FakeCluster, aws: AwsAdapter, store: SnapshotStore) -> None:
    kube.fail("iter_nodes", KubeUnavailable("list: GET /api/v1/nodes: connection refused (4 attempts)"))
    time = FakeTime()

    with pytest.raises(ObservationFailed, match="KubeUnavailable") as caught:
        run_observe(kube, aws, store, CONFIG, time.clock, time.sleep, T0 + timedelta(seconds=50))

    assert isinstance(caught.value.__cause__, KubeUnavailable)
    assert stored_items(store) == []


def test_api_failing_mid_list_stores_nothing(
    kube: FakeCluster, aws: AwsAdapter, store: SnapshotStore
) -> None:
    # two pages of pods arrive, then the server goes away
    kube.fail("iter_pods", KubeUnavailable("list pods: 503 Service Unavailable (4 attempts)"), after=100)
    time = FakeTime()

    with pytest.raises(ObservationFailed):
        run_observe(kube, aws, store, CONFIG, time.clock, time.sleep, T0 + timedelta(seconds=50))

    assert kube.served["iter_pods"] == 100
    assert stored_items(store) == []


def test_aws_failure_stores_nothing(kube: FakeCluster, store: SnapshotStore) -> None:
    time = FakeTime()
    throttled = FakeCloud(("us-east-1",))
    throttled.fail(
        "node_groups_in", AwsThrottled("DescribeAutoScalingGroups(us-east-1): Throttling: Rate exceeded")
    )

    with pytest.raises(ObservationFailed) as caught:
        run_observe(kube, throttled, store, CONFIG, time.clock, time.sleep, T0 + timedelta(seconds=50))

    assert isinstance(caught.value.__cause__, AwsThrottled)
    assert stored_items(store) == []


def test_one_regions_failed_group_read_stores_the_other_regions(
    kube: FakeCluster, store: SnapshotStore
) -> None:
    """A throttled secondary region failed the whole observation: nothing stored, so the primary
    region's scale-ups and scale-downs stopped too. Now the snapshot is stored with the healthy region's
    groups (the failed one marked unread: tests/unit/test_region_unread.py)."""
    time = FakeTime()
    cloud = FakeCloud(("us-east-1", "us-west-2"))
    cloud.node_groups_by_region = {"us-east-1": [], "us-west-2": []}
    read = cloud.node_groups_in

    def throttled_in_oregon(region: str, reserve: Any, now: Any = None) -> Any:
        if region == "us-west-2":
            raise AwsThrottled("DescribeAutoScalingGroups(us-west-2): Throttling: Rate exceeded")
        return read(region, reserve, now)

    cloud.node_groups_in = throttled_in_oregon  # type: ignore[method-assign]

    run = run_observe(kube, cloud, store, CONFIG, time.clock, time.sleep, T0)

    assert [o.written for o in run.observations] == [True]
    assert len(stored_items(store)) > 0


# --- a run of observations --------------------------------------------------------------------------


def test_an_unchanged_cluster_writes_nothing_until_the_heartbeat(
    kube: FakeCluster, aws: AwsAdapter, store: SnapshotStore
) -> None:
    time = FakeTime()

    run = run_observe(kube, aws, store, CONFIG, time.clock, time.sleep, T0 + timedelta(minutes=6))

    assert len(run.observations) == 18  # every 20 s for 6 minutes
    assert [(o.snapshot.taken_at - T0, o.reason) for o in run.written] == [
        (timedelta(0), "first"),
        (timedelta(minutes=5), "heartbeat"),
    ]
    assert {o.reason for o in run.observations if not o.written} == {"unchanged"}
    assert len(stored_items(store)) == 2
    assert time.slept and all(s == pytest.approx(20) for s in time.slept)


def test_a_new_pending_pod_is_stored_within_one_interval(
    kube: FakeCluster, aws: AwsAdapter, store: SnapshotStore, kobj: Any
) -> None:
    time = FakeTime()
    appeared = T0 + timedelta(seconds=25)
    time.at(appeared, lambda: kube.pods.append(kobj.pod("urgent-train-x7k2p", "team-2", cpu="4")))

    run = run_observe(kube, aws, store, CONFIG, time.clock, time.sleep, T0 + timedelta(seconds=59))

    assert [o.reason for o in run.observations] == ["first", "unchanged", "changed"]
    changed = run.written[-1]
    assert changed.snapshot.taken_at - appeared <= timedelta(seconds=20)
    latest = store.latest("prod")
    assert latest is not None and any(p.name == "urgent-train-x7k2p" for p in latest.cluster.pods)


def test_a_cordoned_node_or_grown_group_counts_as_a_change(
    kube: FakeCluster, aws: AwsAdapter, store: SnapshotStore
) -> None:
    time = FakeTime()

    def cordon() -> None:
        list(kube.nodes.values())[3]["spec"]["unschedulable"] = True

    def grow() -> None:
        aws.set_desired_capacity("us-west-2", "p3", 2)

    time.at(T0 + timedelta(seconds=10), cordon)
    time.at(T0 + timedelta(seconds=30), grow)

    run = run_observe(kube, aws, store, CONFIG, time.clock, time.sleep, T0 + timedelta(seconds=59))

    assert [o.reason for o in run.observations] == ["first", "changed", "changed"]


def test_the_next_invocation_continues_from_what_is_stored(
    kube: FakeCluster, aws: AwsAdapter, store: SnapshotStore
) -> None:
    time = FakeTime()
    first = run_observe(kube, aws, store, CONFIG, time.clock, time.sleep, T0 + timedelta(seconds=50))
    time.now = T0 + timedelta(minutes=1)
    second = run_observe(kube, aws, store, CONFIG, time.clock, time.sleep, time.now + timedelta(seconds=50))
    time.now = T0 + timedelta(minutes=5, seconds=1)
    third = run_observe(kube, aws, store, CONFIG, time.clock, time.sleep, time.now)

    assert [o.reason for o in first.observations] == ["first", "unchanged", "unchanged"]
    assert [o.reason for o in second.observations] == ["unchanged"] * 3
    assert [o.reason for o in third.observations] == ["heartbeat"]


def test_no_observation_starts_that_would_end_past_the_deadline_when_one_outlasts_the_interval(
    kube: FakeCluster, aws: AwsAdapter, store: SnapshotStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An observation that takes longer than the interval (30 s against 20: a large cluster, a slow API
    server) is followed at once, not at its interval's end: the next one ends 30 s after this one,
    and starts only if that is before the deadline (80 s: OBSERVE_WINDOW_SECONDS=80 in a 90 s Lambda)."""
    import spillway.observe as observe_module

    time = FakeTime()
    real_observe_once = observe_module.observe_once
    ended: list[datetime] = []

    def slow(*args: Any) -> Snapshot:
        snapshot = real_observe_once(*args)
        time.now += timedelta(seconds=30)
        ended.append(time.now)
        return replace(snapshot, observe_seconds=30.0)

    monkeypatch.setattr(observe_module, "observe_once", slow)
    deadline = T0 + timedelta(seconds=80)

    run = run_observe(kube, aws, store, CONFIG, time.clock, time.sleep, deadline)

    assert ended and all(end <= deadline for end in ended), [end - T0 for end in ended]
    assert len(run.observations) == 2  # 0-30 s and 30-60 s; a third would end at 90 s


def test_deadline_leaves_room_before_the_lambda_timeout() -> None:
    assert deadline_for(T0, 50) == T0 + timedelta(seconds=50)
    assert deadline_for(T0, 50, remaining_ms=30_000) == T0 + timedelta(seconds=25)
    assert deadline_for(T0, 50, remaining_ms=1_000) == T0


# --- with the real Kubernetes client and the local API server ---------------------------------------


@pytest.fixture
def kubeapi(kobj: Any) -> Iterator[Any]:
    server_module = pytest.importorskip("spillway.local.kubeapi")
    server = server_module.KubeApiServer().start()
    nodes, pods, pdbs = kobj.cluster(20, 200, pending=5)
    for obj in [*nodes, *pods, *pdbs]:
        server.add(obj)
    try:
        yield server
    finally:
        server.stop()


def test_observes_through_the_kubernetes_client(kubeapi: Any, aws: AwsAdapter) -> None:
    from spillway.adapters.kube import KubeClient

    kube = KubeClient.for_url(kubeapi.url, page_size=30)

    snapshot = observe_once(kube, aws, CONFIG, lambda: T0)

    assert len(snapshot.cluster.nodes) == 20
    assert len(snapshot.cluster.pods) == 200
    assert snapshot.counts().unschedulable_pods == 5
    assert len(snapshot.groups) == 3


def test_a_namespace_selector_is_matched_against_the_namespaces_observe_lists(
    kubeapi: Any, kobj: Any, aws: AwsAdapter
) -> None:
    """Through the client: the emulator labels each namespace with its name, as the API server does,
    and observe matches a pod anti-affinity term's namespaceSelector with those labels."""
    from spillway.adapters.kube import KubeClient
    from spillway.local import objects as o

    kubeapi.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}})
    kubeapi.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-c"}})
    node = kubeapi.list("Node")[0]["metadata"]["name"]
    for namespace in ("team-b", "team-c"):
        kubeapi.add(
            o.pod("web-0", namespace, cpu="100m", memory="64Mi", labels={"app": "web"}, node_name=node)
        )
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname",
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-b"}}}  # fmt: skip
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    kubeapi.add(o.pod("web-1", "default", cpu="100m", memory="64Mi", affinity=affinity))

    snapshot = observe_once(KubeClient.for_url(kubeapi.url, page_size=30), aws, CONFIG, lambda: T0)

    pods = {p.key: p for p in snapshot.cluster.pods}
    ((term_id, _),) = pods["default/web-1"].anti_own
    assert term_id in pods["team-b/web-0"].selected_by
    assert term_id not in pods["team-c/web-0"].selected_by


def test_the_priority_expander_configmap_is_read_through_the_client(kubeapi: Any, aws: AwsAdapter) -> None:
    """cluster-autoscaler's priority expander ConfigMap (kube-system) reaches the snapshot; a bad one is
    warned about and ignored whole, as cluster-autoscaler drops it; none is none."""
    from spillway.adapters.kube import KubeClient

    kube = KubeClient.for_url(kubeapi.url, page_size=30)
    assert observe_once(kube, aws, CONFIG, lambda: T0).cluster.expander_priorities == {}

    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "cluster-autoscaler-priority-expander", "namespace": "kube-system"},
          "data": {"priorities": "10:\n  - .*\n50:\n  - .*p4d.*\n"}}  # fmt: skip
    kubeapi.add(cm)
    snapshot = observe_once(kube, aws, CONFIG, lambda: T0)
    assert snapshot.cluster.expander_priorities == {10: (".*",), 50: (".*p4d.*",)}

    kubeapi.delete("ConfigMap", "cluster-autoscaler-priority-expander", "kube-system")
    kubeapi.add({**cm, "data": {"priorities": "50: p4d"}})
    cluster = observe_once(kube, aws, CONFIG, lambda: T0).cluster
    assert cluster.expander_priorities == {} and "priority 50: expected a list" in cluster.expander_problem


def test_a_priority_expander_configmap_cluster_autoscaler_refuses_is_ignored_whole(
    kubeapi: Any, aws: AwsAdapter, caplog: pytest.LogCaptureFixture
) -> None:
    """A priority yaml.v2 cannot read as an int (``.inf``, a boolean) or a regex Go's regexp refuses
    (lookahead) drops the whole ConfigMap, as cluster-autoscaler drops it, and the warning names the
    entry; the observation goes on."""
    from spillway.adapters.kube import KubeClient

    kube = KubeClient.for_url(kubeapi.url, page_size=30)
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "cluster-autoscaler-priority-expander", "namespace": "kube-system"}}  # fmt: skip
    for text, named in ((".inf:\n  - x\n50:\n  - p4d\n", "priority inf"),
                        ("true:\n  - x\n50:\n  - p4d\n", "priority True"),
                        ("50:\n  - p4d\n10:\n  - ok\n  - (?=gpu)\n", "priority 10, pattern 1")):  # fmt: skip
        kubeapi.add({**cm, "data": {"priorities": text}})
        caplog.clear()
        cluster = observe_once(kube, aws, CONFIG, lambda: T0).cluster
        assert cluster.expander_priorities == {} and cluster.expander_problem.startswith(named)
        assert named in caplog.text and "ignored" in caplog.text
        assert "cluster-autoscaler-priority-expander data.priorities" in caplog.text
        kubeapi.delete("ConfigMap", "cluster-autoscaler-priority-expander", "kube-system")


def test_the_daemonsets_are_read_through_the_client_into_the_snapshot(
    kubeapi: Any, kobj: Any, aws: AwsAdapter
) -> None:
    """What a fresh node of a group without a node runs is judged by the DaemonSets' templates: observe
    lists them (apps/v1) and the snapshot keeps each one's pod as its controller would make it."""
    from spillway.adapters.kube import KubeClient

    kube = KubeClient.for_url(kubeapi.url, page_size=30)
    assert observe_once(kube, aws, CONFIG, lambda: T0).cluster.daemonsets == ()
    gpu = {"nvidia.com/gpu.present": "true"}
    kubeapi.add(kobj.daemonset("dcgm-exporter", "gpu-operator", cpu="1", memory="1Gi", node_selector=gpu))
    kubeapi.add(kobj.daemonset("aws-node", host_network=True))

    snapshot = observe_once(kube, aws, CONFIG, lambda: T0)

    dcgm, node = snapshot.cluster.daemonsets
    assert (dcgm.key, node.key) == ("gpu-operator/dcgm-exporter", "kube-system/aws-node")
    assert dcgm.node_selector == (("nvidia.com/gpu.present", "true"),) and dcgm.requests["cpu"] == 1000
    assert ("node.kubernetes.io/network-unavailable", "Exists", None, "NoSchedule") in node.tolerations


def test_kubernetes_api_down_through_the_client(kubeapi: Any, aws: AwsAdapter, store: SnapshotStore) -> None:
    from spillway.adapters.kube import KubeClient

    kube = KubeClient.for_url(kubeapi.url, page_size=30, max_attempts=2, sleep=lambda s: None)
    kubeapi.faults.fail_next(10, 503, "/api/v1/pods")
    time = FakeTime()

    with pytest.raises(ObservationFailed) as caught:
        run_observe(kube, aws, store, CONFIG, time.clock, time.sleep, T0 + timedelta(seconds=50))

    assert isinstance(caught.value.__cause__, KubeUnavailable)
    assert stored_items(store) == []


# --- the shared-cluster objects, live -----------------------------------------------------------------


def shared_cluster(server: Any, kobj: Any, *, quota_nodes: str | None) -> list[str]:
    """A tenant namespace with pending pods, a Volcano gang not yet Inqueue and, when given, a
    CapacityQuota on every node; returns the pending pods' keys."""
    server.add(
        {"kind": "Namespace", "metadata": {"name": "vision", "labels": {"spillway.io/tenant": "research"}}}
    )
    server.add({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "train", "namespace": "vision"},
                "spec": {"minMember": 4, "minResources": {"cpu": "4"}}, "status": {"phase": "Pending"}})  # fmt: skip
    if quota_nodes is not None:
        server.add({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityQuota",
                    "metadata": {"name": "freeze"}, "spec": {"limits": {"resources": {"nodes": quota_nodes}}}})  # fmt: skip
    keys = []
    for i in range(3):
        # only the "general" group (m5.large) offers this: no existing node has room for them
        selector = {"node.kubernetes.io/instance-type": "m5.large"}
        server.add(kobj.pod(f"resnet-{i}", "vision", cpu="1", memory="1Gi", node_selector=selector))
        keys.append(f"vision/resnet-{i}")
    return keys


def plan_of(snapshot: Any) -> Any:
    from spillway.config import PlannerConfig
    from spillway.model.state import State
    from spillway.planner import plan

    config = PlannerConfig(cluster="prod", regions=("us-east-1", "us-west-2"))
    return plan(snapshot.cluster, snapshot.groups, config, State(), T0)


@pytest.mark.parametrize("quota", [None, "0"], ids=["no-quota", "quota-of-no-node"])
def test_a_live_snapshot_carries_tenants_gangs_and_quotas_into_the_plan(
    kubeapi: Any, kobj: Any, aws: AwsAdapter, quota: str | None
) -> None:
    from spillway.adapters.kube import KubeClient

    pending = shared_cluster(kubeapi, kobj, quota_nodes=quota)
    kube = KubeClient.for_url(kubeapi.url, page_size=30)

    snapshot = observe_once(kube, aws, CONFIG, lambda: T0)

    cluster = snapshot.cluster
    assert cluster.tenant("vision") == "research"
    (gang,) = cluster.gangs
    assert (gang.key, gang.source, gang.min_member, gang.pending) == ("vision/train", "volcano", 4, True)
    result = plan_of(snapshot)
    codes = {p.pod: p.code for p in result.pending}
    if quota is None:
        assert not cluster.quotas
        assert result.scale_up  # the pending pods open nodes
    else:
        assert [q.name for q in cluster.quotas] == ["freeze"]
        assert not result.scale_up  # the quota allows no node: nothing opens
        # what launching capacity cannot hold waits on the quota
        assert "capacity-quota" in {codes[p] for p in pending}


def test_volcanos_own_podgroups_are_read_through_the_client_as_their_pods_demand(
    kubeapi: Any, aws: AwsAdapter
) -> None:
    """Volcano's controllers write a PodGroup's minResources as ResourceQuota usage
    (util.GetPodQuotaUsage: count/pods, pods, requests.* and limits.* beside the plain names). Observed
    live and stored, a Volcano Job's Pending group is demand of its pods' requests, and the group its
    podgroup controller made for a ReplicaSet now scaled to zero is no demand at all, nor is the group
    LeaderWorkerSet made for a replica whose leader Pod (its controller owner) is gone."""
    from spillway.adapters.kube import KubeClient

    usage = {"count/pods": "2", "pods": "2", "cpu": "4", "requests.cpu": "4", "limits.cpu": "8",
             "memory": "8Gi", "requests.memory": "8Gi", "limits.memory": "8Gi"}  # fmt: skip
    job_uid, rs_uid = "0b9e3c1a-5d2f-4e6a-9b7c-1d2e3f4a5b6c", "7c6b5a4f-3e2d-4c1b-8a9f-0e1d2c3b4a59"
    kubeapi.add({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                 "metadata": {"name": f"train-{job_uid}", "namespace": "vision", "ownerReferences": [
                     {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train",
                      "uid": job_uid, "controller": True}]},
                 "spec": {"minMember": 2, "minResources": usage}, "status": {"phase": "Pending"}})  # fmt: skip
    kubeapi.add({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                 "metadata": {"name": f"podgroup-{rs_uid}", "namespace": "vision", "ownerReferences": [
                     {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d4f", "uid": rs_uid,
                      "controller": True}]},
                 "spec": {"minMember": 1, "minResources": usage}, "status": {"phase": "Pending"}})  # fmt: skip
    # LeaderWorkerSet's group for one replica: controlled by the replica's leader Pod, just deleted
    kubeapi.add({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                 "metadata": {"name": "infer-0-5d8f7c9b", "namespace": "vision", "ownerReferences": [
                     {"apiVersion": "v1", "kind": "Pod", "name": "infer-0", "uid": job_uid[::-1],
                      "controller": True, "blockOwnerDeletion": True}]},
                 "spec": {"minMember": 2, "minResources": usage}, "status": {"phase": "Pending"}})  # fmt: skip
    kube = KubeClient.for_url(kubeapi.url, page_size=30)

    snapshot = Snapshot.from_dict(observe_once(kube, aws, CONFIG, lambda: T0).to_dict())

    gangs = {g.key: g for g in snapshot.cluster.gangs}
    assert not gangs["vision/infer-0-5d8f7c9b"].pending
    job = gangs[f"vision/train-{job_uid}"]
    assert job.min_resources == {"cpu": 4000, "memory": 8 * 2**30 * 1000} and job.pending
    assert not gangs[f"vision/podgroup-{rs_uid}"].pending
    result = plan_of(snapshot)
    # the emulated cluster has room for both: placed there (not "no node group can ever run" them)
    codes = {p.pod: p.code for p in result.pending if p.pod.startswith("vision/")}
    assert codes == {f"vision/train-{job_uid}[{i}]": "fits-free-room" for i in range(2)}
    assert not [p for s in result.scale_up for p in s.pods if p.startswith("vision/")]


def test_capacity_quotas_of_a_crd_serving_v1alpha1_alone_hold_as_v1beta1_ones(
    kubeapi: Any, kobj: Any, aws: AwsAdapter
) -> None:
    """cluster-autoscaler first published the CapacityQuota CRD with v1alpha1 alone (kubernetes/
    autoscaler cluster-autoscaler/apis/config/crd/autoscaling.x-k8s.io_capacityquotas.yaml: one version,
    served and stored; v1beta1 came later). Observe listed v1beta1 only, got 404, logged the kind as not
    installed and planned as if there were no quota: a quota of no node let the pods open nodes. It
    now reads v1alpha1 when v1beta1 is not served, as it reads CapacityBuffers. That first v1alpha1
    status has no field (capacityquota_types.go: "TODO"): the usage written through v1alpha1 is pruned
    and the stored status stays empty."""
    from spillway.adapters.kube import KubeClient

    kubeapi.optional_resources = [
        *(r for r in kubeapi.optional_resources if r != "capacityquotas.autoscaling.x-k8s.io"),
        "capacityquotas.autoscaling.x-k8s.io/v1alpha1",
    ]
    pending = shared_cluster(kubeapi, kobj, quota_nodes=None)
    kubeapi.add({"apiVersion": "autoscaling.x-k8s.io/v1alpha1", "kind": "CapacityQuota",
                 "metadata": {"name": "freeze"}, "spec": {"limits": {"resources": {"nodes": "0"}}}})  # fmt: skip
    kube = KubeClient.for_url(kubeapi.url, page_size=30)

    snapshot = observe_once(kube, aws, CONFIG, lambda: T0)

    assert [(q.name, q.limits) for q in snapshot.cluster.quotas] == [("freeze", {"nodes": 0})]
    result = plan_of(snapshot)
    assert not result.scale_up
    assert "capacity-quota" in {p.code for p in result.pending if p.pod in pending}
    stored = kubeapi.get("capacityquotas.autoscaling.x-k8s.io/v1alpha1", "freeze")
    assert stored is not None and not stored.get("status")
    patches = [r.path for r in kubeapi.requests if r.method == "PATCH" and "capacityquotas" in r.path]
    assert patches == ["/apis/autoscaling.x-k8s.io/v1alpha1/capacityquotas/freeze/status"]


def test_capacity_quotas_read_through_v1alpha1_get_their_usage_written_through_it(
    kubeapi: Any, kobj: Any, aws: AwsAdapter
) -> None:
    """cluster-autoscaler's later v1alpha1 CapacityQuota (its CRD still serving v1alpha1 alone) declares
    status.used and conditions, and its own quota controller writes the usage through v1alpha1
    (resourcequotas/capacityquota/controller.go). Observe read such quotas and wrote nothing, as if
    every v1alpha1 status had no field: ``kubectl get cq`` showed no usage. It now writes the usage
    through the version the quota was read with."""
    from spillway.adapters.kube import KubeClient

    kubeapi.optional_resources = [
        *(r for r in kubeapi.optional_resources if r != "capacityquotas.autoscaling.x-k8s.io"),
        "capacityquotas.autoscaling.x-k8s.io/v1alpha1+status",
    ]
    shared_cluster(kubeapi, kobj, quota_nodes=None)
    kubeapi.add({"apiVersion": "autoscaling.x-k8s.io/v1alpha1", "kind": "CapacityQuota",
                 "metadata": {"name": "wide"}, "spec": {"limits": {"resources": {"nodes": "100"}}}})  # fmt: skip
    kube = KubeClient.for_url(kubeapi.url, page_size=30)

    snapshot = observe_once(kube, aws, CONFIG, lambda: T0)

    [quota] = snapshot.cluster.quotas
    stored = kubeapi.get("capacityquotas.autoscaling.x-k8s.io/v1alpha1+status", "wide")
    assert stored is not None and stored["apiVersion"] == "autoscaling.x-k8s.io/v1alpha1"
    assert stored["status"]["used"]["resources"] == {"nodes": str(quota.used["nodes"] // 1000)}
    assert quota.used["nodes"] > 0


def test_a_capacity_quota_its_valid_condition_calls_invalid_is_read_and_not_enforced(
    kubeapi: Any, kobj: Any, aws: AwsAdapter
) -> None:
    """cluster-autoscaler enforces a CapacityQuota only while ``status.conditions`` holds
    ``cluster-autoscaler.kubernetes.io/valid`` True (v1beta1 capacityquota_types.go). Read through the
    client from the CRD's status, such a condition False for the quota's current generation now leaves
    the quota unenforced (the pods open nodes) and its status unwritten; before, the condition was
    dropped on reading and a quota of no node held every pod back."""
    from spillway.adapters.kube import KubeClient

    pending = shared_cluster(kubeapi, kobj, quota_nodes=None)
    kubeapi.add({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityQuota",
                 "metadata": {"name": "freeze", "generation": 1},
                 "spec": {"limits": {"resources": {"nodes": "0"}}},
                 "status": {"conditions": [{"type": "cluster-autoscaler.kubernetes.io/valid", "status": "False",
                                            "reason": "ValidationFailed", "message": "selector rejected",
                                            "observedGeneration": 1,
                                            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})  # fmt: skip
    kube = KubeClient.for_url(kubeapi.url, page_size=30)

    snapshot = Snapshot.from_dict(observe_once(kube, aws, CONFIG, lambda: T0).to_dict())

    [quota] = snapshot.cluster.quotas
    assert quota.invalid.startswith("status.conditions cluster-autoscaler.kubernetes.io/valid=False")
    result = plan_of(snapshot)
    assert result.scale_up
    assert "capacity-quota" not in {p.code for p in result.pending if p.pod in pending}
    assert not [r for r in kubeapi.requests if r.method == "PATCH" and "capacityquotas" in r.path]


def test_provisioning_requests_of_a_crd_serving_v1beta1_alone_are_read_and_answered(
    kubeapi: Any, kobj: Any, aws: AwsAdapter
) -> None:
    """cluster-autoscaler's ProvisioningRequest CRD served v1beta1 alone before v1 came (kubernetes/
    autoscaler cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1beta1/types.go:
    prerelease-lifecycle introduced 1.29.0; v1 is a later package, and the CRD of today serves both, v1
    the storage version, v1beta1 deprecated); Kueue builds its admission check against that version.
    Observe listed v1 only, got 404, read the kind as not installed: no request booked, none given
    a condition, and Kueue's check waited for Provisioned forever. It now reads v1beta1 when v1 is not
    served, as it reads CapacityBuffers, and the plan's status goes back through the version read."""
    from spillway.act.planning import write_provisioning
    from spillway.adapters.kube import KubeClient

    kubeapi.optional_resources = [
        *(r for r in kubeapi.optional_resources if r != "provisioningrequests.autoscaling.x-k8s.io"),
        "provisioningrequests.autoscaling.x-k8s.io/v1beta1",
    ]
    kubeapi.add({"kind": "Namespace", "metadata": {"name": "ml"}})
    kubeapi.add({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "w", "namespace": "ml"},
                 "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}})  # fmt: skip
    kubeapi.add({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "ProvisioningRequest",
                 "metadata": {"name": "r", "namespace": "ml"},
                 "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                          "podSets": [{"podTemplateRef": {"name": "w"}, "count": 1}]}})  # fmt: skip
    kube = KubeClient.for_url(kubeapi.url, page_size=30)

    snapshot = observe_once(kube, aws, CONFIG, lambda: T0)

    [request] = snapshot.cluster.provreqs
    assert (request.key, request.version, request.count) == ("ml/r", "v1beta1", 1)
    result = plan_of(snapshot)
    [update] = [u for u in result.provisioning if u.key == "ml/r"]
    assert update.version == "v1beta1"
    written = write_provisioning(lambda: kube, result.provisioning)
    assert written is not None and (written["written"], written["failed"], written.get("gone", 0)) == (
        1,
        0,
        0,
    )
    stored = kubeapi.get("provisioningrequests.autoscaling.x-k8s.io/v1beta1", "r", "ml")
    assert stored is not None
    assert {c["type"] for c in stored["status"]["conditions"]} >= {"Accepted"}
    patched = [r.path for r in kubeapi.requests if r.method == "PATCH" and "provisioningrequests" in r.path]
    assert patched == ["/apis/autoscaling.x-k8s.io/v1beta1/namespaces/ml/provisioningrequests/r/status"]


@pytest.mark.parametrize(
    ("crd", "resource", "served", "field"),
    [
        ("provisioningrequests.autoscaling.x-k8s.io", "provisioningrequests", "v1", "provreqs"),
        ("capacitybuffers.autoscaling.x-k8s.io", "capacitybuffers", "v1beta1", "buffers"),
    ],
    ids=["provisioningrequest-v1", "capacitybuffer-v1beta1"],
)
def test_a_served_newer_version_listing_nothing_is_the_answer_and_the_deprecated_one_is_not_listed(
    kubeapi: Any, kobj: Any, aws: AwsAdapter, crd: str, resource: str, served: str, field: str
) -> None:
    """Today's ProvisioningRequest CRD serves v1 (stored) and v1beta1, and cluster-autoscaler's
    CapacityBuffer CRD v1beta1 (stored) and v1alpha1; the older version of each is ``deprecated: true``
    with a deprecationWarning, over the same objects (kubernetes/autoscaler cluster-autoscaler/apis/
    config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml, ..._capacitybuffers.yaml; the emulator
    serves both versions of each). Observe fell back to the older version whenever the newer one listed
    nothing, not only when it was not served: on a cluster with no such object (most of the time, for
    most clusters) every observation also listed the deprecated version, answered with a Warning, for an
    answer that can only be empty. A served newer version that lists nothing is now the answer."""
    from spillway.adapters.kube import KubeClient

    assert crd in kubeapi.optional_resources  # both versions served
    shared_cluster(kubeapi, kobj, quota_nodes="0")
    kube = KubeClient.for_url(kubeapi.url, page_size=30)

    snapshot = observe_once(kube, aws, CONFIG, lambda: T0)

    assert getattr(snapshot.cluster, field) == ()
    listed = [r.path for r in kubeapi.requests if r.method == "GET" and f"/{resource}" in r.path]
    assert listed and all(p.startswith(f"/apis/autoscaling.x-k8s.io/{served}/") for p in listed), listed


def test_a_cluster_without_the_crds_still_observes(kubeapi: Any, kobj: Any, aws: AwsAdapter) -> None:
    from spillway.adapters.kube import KubeClient

    shared_cluster(kubeapi, kobj, quota_nodes="0")
    kubeapi.optional_resources = []  # no CRD installed, no alpha API switched on
    kube = KubeClient.for_url(kubeapi.url, page_size=30)

    snapshot = observe_once(kube, aws, CONFIG, lambda: T0)

    assert snapshot.cluster.tenant("vision") == "research"  # namespaces are always there
    assert snapshot.cluster.gangs == () and snapshot.cluster.quotas == ()
    assert len(snapshot.cluster.nodes) == 20


@pytest.mark.parametrize("installed", [True, False], ids=["crd-installed", "crd-absent"])
def test_the_snapshot_says_whether_coscheduling_podgroups_are_served(
    kubeapi: Any, kobj: Any, aws: AwsAdapter, installed: bool
) -> None:
    """A pod labelled for a coscheduling PodGroup its namespace does not hold: with the CRD installed
    coscheduling's Permit would deny it on any node, so no node is launched for it; without the CRD
    coscheduling cannot run and the pod is ordinary demand."""
    from spillway.adapters.kube import KubeClient

    crd = "podgroups.scheduling.x-k8s.io"
    kubeapi.optional_resources = [r for r in kubeapi.optional_resources if installed or r != crd]
    selector = {"node.kubernetes.io/instance-type": "m5.large"}  # no existing node has room
    label = {"scheduling.x-k8s.io/pod-group": "train"}
    kubeapi.add(kobj.pod("worker-0", "vision", cpu="1", memory="1Gi", node_selector=selector, labels=label))
    kube = KubeClient.for_url(kubeapi.url, page_size=30)

    snapshot = observe_once(kube, aws, CONFIG, lambda: T0)

    assert snapshot.cluster.coscheduling_served is installed
    result = plan_of(snapshot)
    pending = {p.pod: p for p in result.pending}
    # placed: on a node this plan launches, or on capacity a group is launching already
    placed = {pod for up in result.scale_up for pod in up.pods}
    placed |= {p.pod for p in result.pending if p.code in ("fits-launching", "fits-free-room")}
    if installed:
        assert "vision/worker-0" not in placed
        assert pending["vision/worker-0"].code == "gang-incomplete"
        assert "PodGroup vision/train" in pending["vision/worker-0"].reason
    else:
        assert "vision/worker-0" in placed


def test_a_podgroup_volcano_made_for_pods_not_yet_annotated_is_theirs_through_client_and_store(
    kubeapi: Any, kobj: Any, aws: AwsAdapter, store: SnapshotStore
) -> None:
    """Volcano's podgroup controller creates a normal pod's PodGroup (``podgroup-<uid>`` of the pod's
    controller owner, else of the pod, owned as the pod is, else by it) before it annotates the pod
    (volcano-sh/volcano pkg/controllers/podgroup/pg_controller_handler.go). Observed in between, through
    the client, stored and loaded, the pods are the groups' members: the plan launches for them once,
    not for them and again for pod-less groups."""
    from spillway.adapters.kube import KubeClient

    selector = {"node.kubernetes.io/instance-type": "m5.large"}  # no existing node has room

    def volcano_pod(name: str, owner: tuple[str, str] | None) -> dict[str, Any]:
        pod = kobj.pod(name, "vision", cpu="1", memory="1Gi", node_selector=selector, owner=owner)
        pod["spec"]["schedulerName"] = "volcano"
        return dict(kubeapi.add(pod))  # the server gives it its uid

    solo = volcano_pod("solo", None)
    web = [volcano_pod(f"web-{i}", ("ReplicaSet", "web-5d4f")) for i in range(2)]
    groups = {}
    for pod, size in ((solo, 1), (web[0], 2)):
        meta = pod["metadata"]
        controller = next((r for r in meta.get("ownerReferences", ()) if r.get("controller")), None)
        uid = controller["uid"] if controller else meta["uid"]
        owners = meta["ownerReferences"] if controller else [
            {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"], "controller": True,
             "blockOwnerDeletion": True}
        ]  # fmt: skip
        metadata = {"name": f"podgroup-{uid}", "namespace": "vision", "ownerReferences": owners}
        kubeapi.add({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": metadata,
                     "spec": {"minMember": size, "minResources": {"cpu": str(size), "memory": f"{size}Gi"}},
                     "status": {"phase": "Pending"}})  # fmt: skip
        groups[meta["name"]] = f"vision/podgroup-{uid}"
        stored = kubeapi.get("podgroups.scheduling.volcano.sh", f"podgroup-{uid}", "vision")
        assert stored["metadata"]["ownerReferences"] == owners  # metadata is no CRD schema's to prune

    store.save(observe_once(KubeClient.for_url(kubeapi.url, page_size=30), aws, CONFIG, lambda: T0))
    snapshot = store.latest("prod")

    assert snapshot is not None
    members = {p.name: p.gang for p in snapshot.cluster.pods if p.namespace == "vision"}
    assert members == {"solo": groups["solo"], "web-0": groups["web-0"], "web-1": groups["web-0"]}
    result = plan_of(snapshot)
    # placed: on a node this plan launches, or on capacity a group is launching already
    placed = {pod for up in result.scale_up for pod in up.pods}
    placed |= {p.pod for p in result.pending if p.code in ("fits-launching", "fits-free-room")}
    assert {"vision/solo", "vision/web-0", "vision/web-1"} <= placed
    pod_less = [p for p in placed | {p.pod for p in result.pending} if p.startswith("vision/podgroup-")]
    assert pod_less == []  # no demand without pods beside them


def test_shared_objects_change_the_fingerprint(kube: FakeCluster, aws: AwsAdapter) -> None:
    before = observe_once(kube, aws, CONFIG, lambda: T0)
    kube.custom.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                        "metadata": {"name": "g", "namespace": "team-1"},
                        "spec": {"minMember": 2}, "status": {"phase": "Pending"}})  # fmt: skip

    after = observe_once(kube, aws, CONFIG, lambda: T0)

    assert [g.key for g in after.cluster.gangs] == ["team-1/g"]
    assert after.fingerprint != before.fingerprint


def test_a_live_snapshot_says_which_pods_consolidation_may_move(
    kubeapi: Any, kobj: Any, aws: AwsAdapter
) -> None:
    """Jobs, budgets and the pods' own words arrive through the client into the snapshot's stored form,
    and assess_move decides on them."""
    from spillway.adapters.kube import KubeClient
    from spillway.model.cluster import ClusterSnapshot
    from spillway.planner import codes
    from spillway.planner.disruption import assess_move, elastic_room

    host = kobj.cluster(1, 0)[0][0]["metadata"]["name"]
    kubeapi.add({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "bert", "namespace": "ml"},
                 "spec": {"elasticPolicy": {"minReplicas": 2, "maxReplicas": 8},
                          "pytorchReplicaSpecs": {"Worker": {"replicas": 3, "template": {}}}}})  # fmt: skip
    for i in range(3):
        worker = kobj.pod(f"bert-worker-{i}", "ml", node_name=host, owner=("PyTorchJob", "bert"), cpu="100m",
                          labels={"training.kubeflow.org/job-name": "bert",
                                  "training.kubeflow.org/replica-type": "worker"})  # fmt: skip
        worker["metadata"]["ownerReferences"][0]["apiVersion"] = "kubeflow.org/v1"
        kubeapi.add(worker)
    kubeapi.add({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "etl", "namespace": "ml"},
                 "spec": {"podFailurePolicy": {"rules": [{"action": "Ignore",
                                                          "onPodConditions": [{"type": "DisruptionTarget"}]}]},
                          "template": {"spec": {"restartPolicy": "Never",
                                                "containers": [{"name": "c", "image": "x"}]}}}})  # fmt: skip
    kubeapi.add(kobj.pod("etl-x1", "ml", node_name=host, owner=("Job", "etl"), cpu="100m",
                         labels={"batch.kubernetes.io/job-name": "etl", "app": "etl"}))  # fmt: skip
    kubeapi.add(kobj.pod("db-0", "ml", node_name=host, owner=("StatefulSet", "db"), cpu="100m", labels={"app": "db"},
                         annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}))  # fmt: skip
    kubeapi.add({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "db", "namespace": "ml"},
                 "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "db"}}}})  # fmt: skip
    kube = KubeClient.for_url(kubeapi.url, page_size=30)

    cluster = ClusterSnapshot.from_dict(observe_once(kube, aws, CONFIG, lambda: T0).cluster.to_dict())

    jobs = cluster.jobs_by_key()
    assert set(jobs) == {"PyTorchJob/ml/bert", "Job/ml/etl"}
    pods = {p.name: p for p in cluster.pods if p.namespace == "ml"}
    moves = {name: assess_move(p, None, cluster.pdb_allowance(p), T0, -10, jobs) for name, p in pods.items()}
    assert {n: m.code for n, m in moves.items()} == {
        "bert-worker-0": codes.POD_ELASTIC, "bert-worker-1": codes.POD_ELASTIC, "bert-worker-2": codes.POD_ELASTIC,
        "etl-x1": codes.POD_DISRUPTION_TOLERATED,
        "db-0": codes.POD_PDB_ALLOWS_NONE,  # safe-to-evict=true, but its budget allows no disruption
    }  # fmt: skip
    assert elastic_room(cluster.pods, jobs) == {"PyTorchJob/ml/bert": 1}


def test_elastic_jobs_created_through_the_api_are_read_as_their_crds_store_them(
    kubeapi: Any, kobj: Any, aws: AwsAdapter
) -> None:
    """Jobs written over the wire as users write them (a full pod template, fields the CRD does not
    declare) are stored as the training operator's CRDs store them, pruned, and still read: the
    disruption predicate gets the elastic range. One whose range is of a wrong type is refused (422),
    so it is never stored and its workers are judged by the pods alone."""
    from kubernetes.client import CustomObjectsApi
    from kubernetes.client.exceptions import ApiException

    from spillway.adapters.kube import KubeClient
    from spillway.model.cluster import ClusterSnapshot
    from spillway.planner import codes
    from spillway.planner.disruption import assess_move, elastic_room

    host = kobj.cluster(1, 0)[0][0]["metadata"]["name"]
    kubeapi.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    template = {"metadata": {"labels": {"app": "bert"}, "annotations": {"sidecar.istio.io/inject": "false"}},
                "spec": {"containers": [{"name": "pytorch", "image": "ghcr.io/example/bert:1",
                                         "command": ["torchrun", "train.py"], "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
                                         "resources": {"limits": {"nvidia.com/gpu": 1}}, "shmSize": "8Gi"}],
                         "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}  # fmt: skip
    with kubeapi.api_client() as client:
        custom = CustomObjectsApi(client)
        made = custom.create_namespaced_custom_object("kubeflow.org", "v1", "ml", "pytorchjobs", {
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "bert", "namespace": "ml"},
            "spec": {"elasticPolicy": {"minReplicas": 2, "maxReplicas": 8, "rdzvBackend": "c10d", "maxRestarts": 3,
                                       "scaleOutPolicy": "eager"},
                     "pytorchReplicaSpecs": {"Worker": {"replicas": 3, "restartPolicy": "OnFailure", "template": template,
                                                        "gpusPerReplica": 1}},
                     "runPolicy": {"cleanPodPolicy": "None"}}})  # fmt: skip
        with pytest.raises(ApiException) as refused:
            custom.create_namespaced_custom_object("kubeflow.org", "v1", "ml", "paddlejobs", {
                "apiVersion": "kubeflow.org/v1", "kind": "PaddleJob", "metadata": {"name": "ernie", "namespace": "ml"},
                "spec": {"elasticPolicy": {"minReplicas": "1", "maxReplicas": 3},
                         "paddleReplicaSpecs": {"Worker": {"replicas": 2, "template": template}}}})  # fmt: skip
    assert refused.value.status == 422 and "spec.elasticPolicy.minReplicas" in refused.value.body
    assert made["spec"]["elasticPolicy"] == {
        "minReplicas": 2,
        "maxReplicas": 8,
        "rdzvBackend": "c10d",
        "maxRestarts": 3,
    }
    worker_spec = made["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert (
        "gpusPerReplica" not in worker_spec
        and "shmSize" not in worker_spec["template"]["spec"]["containers"][0]
    )
    for job, kind, count in (("bert", "PyTorchJob", 3), ("ernie", "PaddleJob", 2)):
        for i in range(count):
            kubeapi.add(kubeflow_worker(kobj, f"{job}-worker-{i}", host, kind, job))
    kube = KubeClient.for_url(kubeapi.url, page_size=30)

    cluster = ClusterSnapshot.from_dict(observe_once(kube, aws, CONFIG, lambda: T0).cluster.to_dict())

    jobs = cluster.jobs_by_key()
    assert set(jobs) == {"PyTorchJob/ml/bert"}
    pods = {p.name: p for p in cluster.pods if p.namespace == "ml"}
    moves = {
        name: assess_move(p, None, cluster.pdb_allowance(p), T0, -10, jobs).code for name, p in pods.items()
    }
    assert {n: c for n, c in moves.items() if n.startswith("bert")} == dict.fromkeys(
        ("bert-worker-0", "bert-worker-1", "bert-worker-2"), codes.POD_ELASTIC
    )
    assert codes.POD_ELASTIC not in {c for n, c in moves.items() if n.startswith("ernie")}
    assert elastic_room(cluster.pods, jobs) == {"PyTorchJob/ml/bert": 1}


def test_observe_reads_jobs_the_operator_defaults_in_memory_as_its_controller_does(
    kubeapi: Any, kobj: Any, aws: AwsAdapter
) -> None:
    """Jobs stored without the training operator's defaults (it persists none: spillway.local.kubeapi.crds)
    are read as its reconciler defaults them: an elasticPolicy without bounds, or with one, is a fixed
    size (PET_NNODES N:N); bounds with the Worker replicas unset are a range; a PaddleJob's range reaches
    no pod (PADDLE_NNODES is its total replicas), so none of its workers moves as elastic."""
    from kubernetes.client import CustomObjectsApi

    from spillway.adapters.kube import KubeClient
    from spillway.model.cluster import ClusterSnapshot
    from spillway.planner import codes
    from spillway.planner.disruption import assess_move, elastic_room

    host = kobj.cluster(1, 0)[0][0]["metadata"]["name"]
    kubeapi.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    template = {"spec": {"containers": [{"name": "c", "image": "ghcr.io/example/train:1"}]}}
    written = {  # name → kind, elasticPolicy, Worker replicas (None: unset), the env the operator gives a worker
        "nobounds": ("PyTorchJob", {"rdzvBackend": "c10d"}, 3, {"PET_NNODES": "3:3"}),
        "minonly": ("PyTorchJob", {"minReplicas": 2}, 3, {"PET_NNODES": "2:2"}),
        "unsized": ("PyTorchJob", {"minReplicas": 1, "maxReplicas": 4, "maxRestarts": 3}, None,
                    {"PET_NNODES": "1:4", "PET_MAX_RESTARTS": "3"}),
        "ernie": ("PaddleJob", {"minReplicas": 1, "maxReplicas": 3}, 3,
                  {"PADDLE_NNODES": "3", "PADDLE_MASTER": "ernie-worker-0:36543"}),
    }  # fmt: skip
    with kubeapi.api_client() as client:
        custom = CustomObjectsApi(client)
        for name, (kind, policy, replicas, _) in written.items():
            worker: dict[str, Any] = {"template": template} | (
                {} if replicas is None else {"replicas": replicas}
            )
            specs = "pytorchReplicaSpecs" if kind == "PyTorchJob" else "paddleReplicaSpecs"
            custom.create_namespaced_custom_object("kubeflow.org", "v1", "ml", kind.lower() + "s", {
                "apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": name, "namespace": "ml"},
                "spec": {"elasticPolicy": policy, specs: {"Worker": worker}}})  # fmt: skip
    for name, (kind, _, replicas, env) in written.items():
        for i in range(replicas or 1):
            pod = kobj.pod(f"{name}-worker-{i}", "ml", node_name=host, owner=(kind, name), cpu="100m",
                           labels={"training.kubeflow.org/job-name": name,
                                   "training.kubeflow.org/replica-type": "worker"})  # fmt: skip
            pod["metadata"]["ownerReferences"][0]["apiVersion"] = "kubeflow.org/v1"
            pod["spec"]["containers"][0]["env"] = [{"name": k, "value": v} for k, v in env.items()]
            kubeapi.add(pod)
    kube = KubeClient.for_url(kubeapi.url, page_size=30)

    cluster = ClusterSnapshot.from_dict(observe_once(kube, aws, CONFIG, lambda: T0).cluster.to_dict())

    jobs = cluster.jobs_by_key()
    assert {k: (j.elastic_min, j.elastic_max) for k, j in jobs.items()} == {"PyTorchJob/ml/unsized": (1, 4)}
    elastic = {p.name for p in cluster.pods if p.namespace == "ml"
               if assess_move(p, None, cluster.pdb_allowance(p), T0, -10, jobs).code == codes.POD_ELASTIC}  # fmt: skip
    assert elastic == {"unsized-worker-0"}
    # the one worker of the unsized job (Worker replicas 1) is at its minimum: nothing to give up
    assert elastic_room(cluster.pods, jobs) == {"PyTorchJob/ml/unsized": 0}


def test_a_percentage_budget_over_elastic_workers_lets_spillway_move_them_until_it_refuses(
    kubeapi: Any, kobj: Any, aws: AwsAdapter
) -> None:
    """A PDB of maxUnavailable 50% over an elastic PyTorchJob's 4 workers: the disruption controller counts
    the job's scale subresource (its Worker replicas, as the training operator's CRD declares it), so
    observe reads 2 disruptions allowed and the planner may move the workers; the drain's evictions take
    two, the third is refused (429, EvictionBlocked), and the next observation shows the budget spent."""
    from kubernetes.client import CustomObjectsApi, PolicyV1Api

    from spillway.adapters.kube import KubeClient
    from spillway.errors import EvictionBlocked
    from spillway.model.cluster import ClusterSnapshot
    from spillway.planner import codes
    from spillway.planner.disruption import assess_move, elastic_room

    host = kobj.cluster(1, 0)[0][0]["metadata"]["name"]
    kubeapi.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    workers = {"training.kubeflow.org/job-name": "bert", "training.kubeflow.org/replica-type": "worker"}
    template = {"spec": {"containers": [{"name": "pytorch", "image": "ghcr.io/example/bert:1"}]}}
    with kubeapi.api_client() as client:
        made = CustomObjectsApi(client).create_namespaced_custom_object("kubeflow.org", "v1", "ml", "pytorchjobs", {
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "bert", "namespace": "ml"},
            "spec": {"elasticPolicy": {"minReplicas": 2, "maxReplicas": 8},
                     "pytorchReplicaSpecs": {"Worker": {"replicas": 4, "template": template}}}})  # fmt: skip
        PolicyV1Api(client).create_namespaced_pod_disruption_budget("ml", {
            "metadata": {"name": "bert-workers"},
            "spec": {"maxUnavailable": "50%", "selector": {"matchLabels": workers}}})  # fmt: skip
    for i in range(4):
        worker = kobj.pod(f"bert-worker-{i}", "ml", node_name=host, owner=("PyTorchJob", "bert"), cpu="100m",
                          labels=workers)  # fmt: skip
        worker["metadata"]["ownerReferences"][0] |= {
            "apiVersion": "kubeflow.org/v1",
            "uid": made["metadata"]["uid"],
        }
        kubeapi.add(worker)
    kube = KubeClient.for_url(kubeapi.url, page_size=30)

    def moves() -> tuple[dict[str, str], int]:
        """The move verdict of each worker not terminating, and the job's elastic room."""
        cluster = ClusterSnapshot.from_dict(observe_once(kube, aws, CONFIG, lambda: T0).cluster.to_dict())
        jobs = cluster.jobs_by_key()
        pods = [p for p in cluster.pods if p.namespace == "ml" and not p.terminating]
        verdicts = {p.name: assess_move(p, None, cluster.pdb_allowance(p), T0, -10, jobs).code for p in pods}
        return verdicts, elastic_room(cluster.pods, jobs)["PyTorchJob/ml/bert"]

    budget = next(p for p in kube.list_pdbs() if p.metadata.name == "bert-workers")
    assert (budget.status.expected_pods, budget.status.disruptions_allowed) == (4, 2)
    assert moves() == ({f"bert-worker-{i}": codes.POD_ELASTIC for i in range(4)}, 2)

    kube.evict("ml", "bert-worker-0")
    kube.evict("ml", "bert-worker-1")
    with pytest.raises(EvictionBlocked, match=r"evict pod ml/bert-worker-2.*disruption budget"):
        kube.evict("ml", "bert-worker-2")
    assert moves() == ({f"bert-worker-{i}": codes.POD_PDB_ALLOWS_NONE for i in (2, 3)}, 0)


def test_deadlines_arrive_through_the_client_and_the_store_into_what_the_planner_knows(
    kubeapi: Any, kobj: Any, aws: AwsAdapter, store: SnapshotStore
) -> None:
    """A pod's and a running Job's activeDeadlineSeconds (with their start times) survive the client, the
    snapshot and its compressed stored form; the planner reads the tighter one."""
    from spillway.adapters.kube import KubeClient
    from spillway.planner.durations import remaining_seconds

    host = kobj.cluster(1, 0)[0][0]["metadata"]["name"]
    started = (T0 - timedelta(minutes=30)).isoformat().replace("+00:00", "Z")
    kubeapi.add({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "etl", "namespace": "ml"},
                 "spec": {"activeDeadlineSeconds": 2400,
                          "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}},
                 "status": {"startTime": started}})  # fmt: skip
    job_pod = kobj.pod("etl-x1", "ml", node_name=host, owner=("Job", "etl"), cpu="100m",
                       labels={"batch.kubernetes.io/job-name": "etl"})  # fmt: skip
    job_pod["spec"]["activeDeadlineSeconds"] = 3600
    job_pod["status"]["startTime"] = started
    kubeapi.add(job_pod)
    kube = KubeClient.for_url(kubeapi.url, page_size=30)

    store.save(observe_once(kube, aws, CONFIG, lambda: T0))
    stored = store.latest("prod")

    assert stored is not None
    cluster = stored.cluster
    [pod] = [p for p in cluster.pods if p.name == "etl-x1"]
    assert (pod.active_deadline, pod.started_at) == (3600, T0 - timedelta(minutes=30))
    job = cluster.jobs_by_key()["Job/ml/etl"]
    assert (job.active_deadline, job.started_at) == (2400, T0 - timedelta(minutes=30))
    assert remaining_seconds(pod, cluster.jobs_by_key(), T0) == 600  # the Job's: 40 - 30 minutes


# --- CapacityQuota status.used ---------------------------------------------------------------------


def quota_obj(
    name: str, limits: dict[str, str], match_labels: dict[str, str] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"limits": {"resources": limits}}
    if match_labels:
        spec["selector"] = {"matchLabels": match_labels}
    return {"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityQuota", "metadata": {"name": name},
            "spec": spec}  # fmt: skip


def test_quota_status_used_is_written_once_and_only_when_it_changes(
    kubeapi: Any, aws: AwsAdapter, store: SnapshotStore
) -> None:
    from spillway.adapters.kube import KubeClient

    gpu = {"node.kubernetes.io/instance-type": "g5.2xlarge"}
    kubeapi.add(quota_obj("gpu-cap", {"nvidia.com/gpu": "16", "nodes": "4", "memory": "1Ti"}, gpu))
    kubeapi.add({**quota_obj("all", {"cpu": "1000"}), "status": {"used": {"resources": {"pods": "3"}}}})
    kube = KubeClient.for_url(kubeapi.url, page_size=30)
    gpu_nodes = [n for n in kubeapi.list("nodes") if n["metadata"]["labels"].get("node.kubernetes.io/instance-type") == "g5.2xlarge"]  # fmt: skip
    gpus = sum(int(n["status"]["allocatable"]["nvidia.com/gpu"]) for n in gpu_nodes)
    kubeapi.clear_requests()
    time = FakeTime()

    run = run_observe(kube, aws, store, CONFIG, time.clock, time.sleep, T0 + timedelta(seconds=50))

    assert len(run.observations) == 3
    patches = [r for r in kubeapi.requests if r.method == "PATCH"]
    assert sorted(r.path for r in patches) == [  # one per quota, the first time only
        "/apis/autoscaling.x-k8s.io/v1beta1/capacityquotas/all/status",
        "/apis/autoscaling.x-k8s.io/v1beta1/capacityquotas/gpu-cap/status",
    ]
    used = kubeapi.get("capacityquotas", "gpu-cap")["status"]["used"]["resources"]
    assert set(used) == {"nvidia.com/gpu", "nodes", "memory"}
    assert (used["nvidia.com/gpu"], used["nodes"]) == (str(gpus), str(len(gpu_nodes)))
    assert used["memory"].endswith(("Gi", "Mi", "Ki")) or used["memory"].isdigit()
    everything = kubeapi.get("capacityquotas", "all")["status"]["used"]["resources"]
    assert list(everything) == ["cpu"]  # the stale "pods" the limits do not name is removed
    (quota,) = [q for q in run.observations[-1].snapshot.cluster.quotas if q.name == "gpu-cap"]
    assert quota.used["nodes"] == 1000 * len(gpu_nodes)

    # a new matching node changes the usage: written again at the next observation
    new = dict(gpu_nodes[0], metadata={**gpu_nodes[0]["metadata"], "name": "gpu-extra", "uid": None})
    kubeapi.add(new)
    kubeapi.clear_requests()
    observe_once(kube, aws, CONFIG, lambda: T0)
    assert len([r for r in kubeapi.requests if r.method == "PATCH"]) == 2  # both quotas select it
    assert kubeapi.get("capacityquotas", "gpu-cap")["status"]["used"]["resources"]["nodes"] == str(
        len(gpu_nodes) + 1
    )


def test_a_failed_quota_status_write_does_not_fail_observe(
    kube: FakeCluster, aws: AwsAdapter, caplog: pytest.LogCaptureFixture
) -> None:
    kube.custom.append(quota_obj("q", {"nodes": "100"}))
    kube.fail("patch_custom_status", KubeAuthError("patch status of capacityquotas: HTTP 403 Forbidden"))

    snapshot = observe_once(kube, aws, CONFIG, lambda: T0)

    assert snapshot.cluster.quotas[0].used == {"nodes": 12_000}
    assert any("CapacityQuota q" in r.getMessage() and "403" in r.getMessage() for r in caplog.records)
    kube.heal()
    observe_once(kube, aws, CONFIG, lambda: T0)
    assert kube.custom[0]["status"] == {"used": {"resources": {"nodes": "12"}}}


def buffer_objs(version: str = "v1alpha1") -> list[dict[str, Any]]:
    template = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}
    return [
        {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "web", "namespace": "shop"},
         "template": {"spec": template}},
        {"apiVersion": f"autoscaling.x-k8s.io/{version}", "kind": "CapacityBuffer",
         "metadata": {"name": "headroom", "namespace": "shop"},
         "spec": {"podTemplateRef": {"name": "web"}, "replicas": 2}},
    ]  # fmt: skip


def test_capacity_buffers_are_read_with_their_template_and_their_status_written_once(
    kube: FakeCluster, aws: AwsAdapter
) -> None:
    kube.custom.extend(buffer_objs())

    snapshot = observe_once(kube, aws, CONFIG, lambda: T0)

    [info] = snapshot.cluster.buffers
    assert (info.key, info.replicas, info.template) == ("shop/headroom", 2, "web")
    assert info.pod is not None and info.pod.requests["cpu"] == 2000
    status = kube.custom[1]["status"]
    assert status["replicas"] == 2 and status["conditions"][0]["type"] == "ReadyForProvisioning"
    writes = [c for c in kube.calls if c[0] == "patch_custom_status"]
    observe_once(kube, aws, CONFIG, lambda: T0 + timedelta(minutes=1))
    assert [c for c in kube.calls if c[0] == "patch_custom_status"] == writes  # unchanged: not written again


def web_pod(name: str, created: str, cpu: str, node: str | None = None) -> dict[str, Any]:
    """A pod of namespace ``web`` labelled ``app=web``: Running on ``node``, else Pending."""
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "web", "labels": {"app": "web"}, "creationTimestamp": created},
            "spec": spec, "status": {"phase": "Running" if node else "Pending"}}  # fmt: skip


def scalable_buffer(
    name: str, ref: tuple[str, str, str], namespace: str = "web", **spec: Any
) -> dict[str, Any]:
    """A CapacityBuffer whose ``scalableRef`` is (apiGroup, kind, name), with the rest of ``spec``."""
    group, kind, target = ref
    return {"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"scalableRef": {"apiGroup": group, "kind": kind, "name": target}, **spec}}  # fmt: skip


def test_capacity_buffers_of_a_job_and_a_replication_controller_read_them_where_they_live(
    kube: FakeCluster, aws: AwsAdapter
) -> None:
    template = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    kube.custom.extend([
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "ml"},
         "spec": {"parallelism": 8, "template": template}},
        {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "old", "namespace": "web"},
         "spec": {"replicas": 4, "template": template}},
        {"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
         "metadata": {"name": "of-job", "namespace": "ml"},
         "spec": {"scalableRef": {"apiGroup": "batch", "kind": "Job", "name": "train"}, "percentage": 25}},
        {"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
         "metadata": {"name": "of-rc", "namespace": "web"},
         "spec": {"scalableRef": {"kind": "ReplicationController", "name": "old"}, "percentage": 50}},
    ])  # fmt: skip

    snapshot = observe_once(kube, aws, CONFIG, lambda: T0)

    assert {(b.key, b.problem, b.replicas) for b in snapshot.cluster.buffers} == {
        ("ml/of-job", "", 2),  # 25 % of parallelism 8
        ("web/of-rc", "", 2),  # 50 % of 4 replicas
    }
    assert ("list_custom", ("batch", "v1", "jobs", "ml")) in kube.calls  # only where a buffer names one
    assert ("list_replication_controllers", ("web",)) in kube.calls


def test_a_capacity_buffer_of_a_deployment_takes_its_most_recent_pods_shape(
    kube: FakeCluster, aws: AwsAdapter
) -> None:
    """cluster-autoscaler prefers a live pod for every scalableRef (scalable_objects_translator.go
    resolveSpecAndReplicas): a Deployment whose template requests nothing, its pods given 500m by the
    namespace's LimitRange, holds chunks of 500m, and a percentage is of its status.replicas. The pods
    are found by the Deployment's own selector (what its Scale's status.selector says), so no
    ``deployments/scale`` grant is needed; a Job has no scale subresource and keeps its template."""
    bare = {"spec": {"containers": [{"name": "c"}]}, "metadata": {"labels": {"app": "web"}}}
    selector = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["batch"]}],
    }
    kube.pods.extend([web_pod("web-a", "2026-01-01T00:00:00Z", "250m", node="n1"),
                      web_pod("web-b", "2026-01-02T00:00:00Z", "500m", node="n1")])  # fmt: skip
    kube.custom.extend([
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "web"},
         "spec": {"replicas": 12, "selector": selector, "template": bare}, "status": {"replicas": 8}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "web"},
         "spec": {"parallelism": 4, "selector": {"matchLabels": {"app": "web"}},
                  "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}},
        scalable_buffer("of-web", ("apps", "Deployment", "web"), percentage=25),
        scalable_buffer("of-job", ("batch", "Job", "train"), percentage=50),
    ])  # fmt: skip

    snapshot = observe_once(kube, aws, CONFIG, lambda: T0)

    of_job, of_web = sorted(snapshot.cluster.buffers, key=lambda b: b.name)
    assert (of_web.key, of_web.problem, of_web.replicas) == ("web/of-web", "", 2)  # 25 % of status.replicas 8
    assert of_web.pod is not None and of_web.pod.requests["cpu"] == 500  # the newest pod's
    assert of_web.pod.node_name is None
    assert ("pods_selected", ("web", "app=web,tier notin (batch)")) in kube.calls
    assert (of_job.problem, of_job.replicas) == ("", 2)  # its template and spec.parallelism
    assert of_job.pod is not None and of_job.pod.requests["cpu"] == 1000
    assert len([c for c in kube.calls if c[0] == "pods_selected"]) == 1  # not for the Job


def test_a_scalable_refs_api_group_decides_what_observe_reads_as_cluster_autoscaler_maps_it(
    kube: FakeCluster, aws: AwsAdapter
) -> None:
    """cluster-autoscaler finds a live pod through the Scale of the ref's group and kind as discovery
    maps them (capacitybuffer/client GetScaleObject): a ReplicationController named in group ``""``
    takes its newest pod, one named in ``"core"`` (its template resolver's key) only its template, so
    observe lists no pod for it. A Deployment named without ``apiGroup`` is in the core group, which
    serves none: the buffer is not ready, its status naming the field, and no Scale is asked for."""
    template = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                "metadata": {"labels": {"app": "web"}}}  # fmt: skip
    kube.pods.append(web_pod("old-1", "2026-01-02T00:00:00Z", "3", node="n1"))
    kube.custom.extend([
        {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "old", "namespace": "web"},
         "spec": {"replicas": 4, "selector": {"app": "web"}, "template": template}, "status": {"replicas": 4}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "web"},
         "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": template}},
        scalable_buffer("as-empty", ("", "ReplicationController", "old"), replicas=1),
        scalable_buffer("as-core", ("core", "ReplicationController", "old"), replicas=1),
        scalable_buffer("no-group", ("", "Deployment", "web"), replicas=1),
    ])  # fmt: skip

    snapshot = observe_once(kube, aws, CONFIG, lambda: T0)

    found = {b.name: b for b in snapshot.cluster.buffers}
    assert found["as-empty"].pod is not None and found["as-empty"].pod.requests["cpu"] == 3000  # the pod's
    assert found["as-core"].pod is not None and found["as-core"].pod.requests["cpu"] == 1000  # the template's
    assert found["no-group"].problem.startswith('spec.scalableRef.apiGroup: "" is the core API group')
    assert [c for c in kube.calls if c[0] == "pods_selected"] == [("pods_selected", ("web", "app=web"))]
    assert not [c for c in kube.calls if c[0] == "get_scale"]


def test_a_capacity_buffer_of_a_custom_kind_reads_its_scale_and_its_most_recent_pod(
    kube: FakeCluster, aws: AwsAdapter
) -> None:
    """cluster-autoscaler's scale resolver: the Scale's status.selector finds the pods, the most recent
    one is the chunk, the Scale's status.replicas the count a percentage is of."""
    kube.scale_paths[("argoproj.io", "Rollout")] = (".status.HPAReplicas", ".status.selector")
    kube.pods.extend(
        [web_pod("old", "2026-01-01T00:00:00Z", "1"), web_pod("new", "2026-01-02T00:00:00Z", "3")]
    )
    kube.custom.extend([
        {"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "metadata": {"name": "web", "namespace": "web"},
         "spec": {"replicas": 10}, "status": {"HPAReplicas": 8, "selector": "app=web"}},
        scalable_buffer("of-rollout", ("argoproj.io", "Rollout", "web"), percentage=25),
        scalable_buffer("of-missing", ("argoproj.io", "Rollout", "gone"), replicas=1),
    ])  # fmt: skip

    snapshot = observe_once(kube, aws, CONFIG, lambda: T0)

    served, missing = sorted(snapshot.cluster.buffers, key=lambda b: b.name, reverse=True)
    assert (served.key, served.problem, served.replicas) == ("web/of-rollout", "", 2)  # 25 % of 8
    assert served.pod is not None and served.pod.requests["cpu"] == 3000  # the newer pod
    assert ("pods_selected", ("web", "app=web")) in kube.calls
    assert missing.key == "web/of-missing" and "not found" in missing.problem


def test_a_custom_kinds_scale_refused_is_its_buffers_problem_but_no_answer_fails_the_observation(
    kube: FakeCluster, aws: AwsAdapter
) -> None:
    """A scalableRef may name any kind, and a ClusterRole grants `<plural>/scale` kind by kind: a refusal
    is the buffer's problem (its status says why), so that a tenant's buffer cannot stop the cluster's
    observation. An outage is no answer about the buffer: read as "not ready", the nodes holding its
    headroom would look idle for that tick. (Review r15.)"""
    kube.custom.append(
        {"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
         "metadata": {"name": "of-rollout", "namespace": "web"},
         "spec": {"scalableRef": {"apiGroup": "argoproj.io", "kind": "Rollout", "name": "web"}, "replicas": 1}}
    )  # fmt: skip
    kube.fail("get_scale", KubeAuthError("get scale of rollouts.argoproj.io web/web: HTTP 403 Forbidden"))

    (refused,) = observe_once(kube, aws, CONFIG, lambda: T0).cluster.buffers
    assert "403" in refused.problem

    kube.fail("get_scale", KubeUnavailable("get scale of rollouts.argoproj.io web/web: no useful answer"))
    with pytest.raises(ObservationFailed, match="no useful answer"):
        observe_once(kube, aws, CONFIG, lambda: T0)


def test_capacity_buffers_refused_by_rbac_fail_the_observation(kube: FakeCluster, aws: AwsAdapter) -> None:
    """Read as none, the buffers' headroom vanished from the plan and the nodes holding it looked idle
    (review r15); a cluster without the CRD has none (the list answers 404: FakeCluster.not_installed)."""
    kube.custom.extend(buffer_objs("v1beta1"))
    kube.fail("list_custom", KubeAuthError("list capacitybuffers: HTTP 403 Forbidden"))

    with pytest.raises(ObservationFailed, match="capacitybuffers: HTTP 403"):
        observe_once(kube, aws, CONFIG, lambda: T0)

    kube.heal()
    kube.not_installed.add(("autoscaling.x-k8s.io", "capacitybuffers"))
    assert observe_once(kube, aws, CONFIG, lambda: T0).cluster.buffers == ()


def resource_quota(namespace: str, hard: dict[str, str], used: dict[str, str]) -> dict[str, Any]:
    """A core ResourceQuota as the API serves it once the quota controller wrote its status."""
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "compute", "namespace": namespace},
            "spec": {"hard": hard}, "status": {"hard": hard, "used": used}}  # fmt: skip


def test_a_capacity_buffer_is_cut_to_what_its_namespaces_resource_quota_leaves(
    kube: FakeCluster, aws: AwsAdapter
) -> None:
    objs = buffer_objs("v1beta1")
    objs[1]["spec"]["replicas"] = 4  # chunks of 2 CPUs
    kube.custom.extend([*objs, resource_quota("shop", {"requests.cpu": "10"}, {"requests.cpu": "5"}),
                        resource_quota("other", {"requests.cpu": "0"}, {})])  # fmt: skip

    snapshot = observe_once(kube, aws, CONFIG, lambda: T0)

    [info] = snapshot.cluster.buffers  # what the planner holds: the cut number of chunks
    assert info.replicas == 2
    status = objs[1]["status"]
    limited = next(c for c in status["conditions"] if c["type"] == "LimitedByQuotas")
    assert (status["replicas"], limited["status"], limited["reason"], limited["message"]) == (
        2,
        "True",
        "ResourceQuotasAllocated",
        "Buffer replicas limited from 4 to 2 due to quotas: compute",
    )
    assert [c[1] for c in kube.calls if c[0] == "list_resource_quotas"] == [
        ("shop",)
    ]  # only where buffers are


def test_resource_quotas_refused_by_rbac_fail_the_observation(kube: FakeCluster, aws: AwsAdapter) -> None:
    """Uncut, the buffers held more than the namespace's quota lets them (review r15); nothing is
    stored and no buffer status is written."""
    kube.custom.extend([*buffer_objs("v1beta1"), resource_quota("shop", {"cpu": "1"}, {})])
    kube.fail("list_resource_quotas", KubeAuthError("list resourcequotas: HTTP 403 Forbidden"))

    with pytest.raises(ObservationFailed, match="resourcequotas: HTTP 403"):
        observe_once(kube, aws, CONFIG, lambda: T0)

    assert not kube.called("patch_custom_status")


def test_a_capacity_buffer_is_cut_by_its_resource_quota_over_the_wire(kubeapi: Any, aws: AwsAdapter) -> None:
    """The quota as the API serves it (status written by the quota controller), the buffer's status
    written back through the status subresource: replicas cut, LimitedByQuotas True."""
    from spillway.adapters.kube import KubeClient

    kubeapi.add({"kind": "Namespace", "metadata": {"name": "shop"}})
    objs = buffer_objs("v1beta1")
    objs[1]["spec"]["replicas"] = 5
    for obj in [*objs, resource_quota("shop", {"cpu": "20", "requests.cpu": "7"}, {"requests.cpu": "1"})]:
        kubeapi.add(obj)
    kube = KubeClient.for_url(kubeapi.url)

    snapshot = observe_once(kube, aws, CONFIG, lambda: T0)

    assert [b.replicas for b in snapshot.cluster.buffers] == [3]  # (7 - 1) // 2
    status = kubeapi.get("capacitybuffers", "headroom", "shop")["status"]
    limited = next(c for c in status["conditions"] if c["type"] == "LimitedByQuotas")
    assert (status["replicas"], limited["status"], limited["message"]) == (
        3,
        "True",
        "Buffer replicas limited from 5 to 3 due to quotas: compute",
    )
    assert any(r.path.startswith("/api/v1/namespaces/shop/resourcequotas") for r in kubeapi.requests)


def test_provisioning_requests_pods_get_the_pod_topology_of_their_template(
    kube: FakeCluster, aws: AwsAdapter
) -> None:
    """A request's pods repel each other per node (their template's anti-affinity selects them): the
    snapshot's pod set carries that term as its own and as one that selects it, matched in the same
    pass as the cluster's pods and a buffer's chunks."""
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "worker"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    kube.custom.extend(buffer_objs())
    kube.custom.extend([
        {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "w", "namespace": "ml"},
         "template": {"metadata": {"labels": {"app": "worker"}},
                      "spec": {"affinity": anti, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}},
        {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
         "metadata": {"name": "r", "namespace": "ml"},
         "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                  "podSets": [{"podTemplateRef": {"name": "w"}, "count": 2}]}},
    ])  # fmt: skip

    snapshot = observe_once(kube, aws, CONFIG, lambda: T0)

    [request] = snapshot.cluster.provreqs
    pod = request.pod_sets[0].pod
    assert pod is not None and len(pod.anti_own) == 1
    assert pod.anti_own[0][0] in pod.selected_by
    assert snapshot.cluster.buffers[0].pod is not None  # the buffer is still read beside it


# --- the Lambda handler and its configuration ------------------------------------------------------

ENV = {
    "CLUSTER_NAME": "prod",
    "REGIONS": "us-east-1, us-west-2",
    "SNAPSHOTS_TABLE": "spillway-snapshots",
    "PLANS_TABLE": "spillway-plans",
    "STATE_TABLE": "spillway-state",
}


def load_app() -> ModuleType:
    spec = importlib.util.spec_from_file_location("observe_app", REPO / "functions" / "observe" / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being defined
    spec.loader.exec_module(module)
    return module


@dataclass
class LambdaContext:
    remaining_ms: int = 90_000  # the observe function's Timeout (template.yaml)
    function_name: str = "spillway-observe"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:spillway-observe"
    aws_request_id: str = "5b1c1d36-0f35-4c8f-9d0e-1d2e3f4a5b6c"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def emf_metrics(output: str) -> dict[str, list[float]]:
    values: dict[str, list[float]] = {}
    for line in output.splitlines():
        if '"_aws"' not in line:
            continue
        doc = json.loads(line)
        for directive in doc["_aws"]["CloudWatchMetrics"]:
            for metric in directive["Metrics"]:
                value = doc[metric["Name"]]
                values.setdefault(metric["Name"], []).extend(value if isinstance(value, list) else [value])
    return values


def test_handler_observes_stores_and_emits_metrics(
    kube: FakeCluster,
    aws: AwsAdapter,
    store: SnapshotStore,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OBSERVE_WINDOW_SECONDS", "0")  # one observation
    app = load_app()
    config = load_runtime_config()
    wired = replace(build_clients(config), aws=aws, snapshots=store, _kube=kube)
    monkeypatch.setattr(app, "get_clients", lambda: wired)

    result = app.handler({"source": "aws.scheduler"}, LambdaContext())

    assert result["observations"] == 1 and len(result["written"]) == 1
    assert result["pending_pods"] == 3 and result["nodes"] == 12
    metrics = emf_metrics(capsys.readouterr().out)
    assert metrics["PendingPods"] == [3]
    assert metrics["UnschedulablePods"] == [3]
    assert metrics["Nodes"] == [12]
    assert metrics["NotReadyNodes"] == [0]
    assert metrics["SnapshotBytes"][0] > 0
    assert metrics["ObserveSeconds"][0] > 0


def test_handler_failure_raises_observation_failed(
    kube: FakeCluster, aws: AwsAdapter, store: SnapshotStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    app = load_app()
    config = load_runtime_config()
    kube.fail("iter_nodes", KubeUnavailable("list: GET /api/v1/nodes: connection refused (4 attempts)"))
    wired = replace(build_clients(config), aws=aws, snapshots=store, _kube=kube)
    monkeypatch.setattr(app, "get_clients", lambda: wired)

    with pytest.raises(ObservationFailed):
        app.handler({}, LambdaContext())
    assert stored_items(store) == []


def test_importing_the_handler_needs_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)

    app = load_app()

    assert not [name for name in vars(app) if name.startswith("_services")]  # the wiring is spillway.clients


def test_runtime_config_from_environment() -> None:
    config = load_runtime_config(
        {**ENV, "HEARTBEAT_MINUTES": "2", "SCALE_DOWN_IDLE_MINUTES": "15", "NODE_RESERVE_MEMORY": "2Gi",
         "ORPHANED_DRAIN_MINUTES": "0.05", "EXPENDABLE_PRIORITY_CUTOFF": "-5"}
    )  # fmt: skip

    assert config.regions == ("us-east-1", "us-west-2") and config.primary_region == "us-east-1"
    assert config.cluster_access == "eks"
    assert config.heartbeat_minutes == 2
    assert config.planner.scale_down_idle_minutes == 15
    assert config.planner.orphaned_drain_minutes == 0.05
    assert config.planner.cluster == "prod"
    assert config.observe_config().node_reserve.memory == "2Gi"
    # the cutoff a CapacityBuffer's status is judged by is the planner's
    assert config.observe_config().expendable_priority_cutoff == -5


@pytest.mark.parametrize(
    ("change", "variable"),
    [
        ({"CLUSTER_NAME": ""}, "CLUSTER_NAME"),
        ({"REGIONS": " "}, "REGIONS"),
        ({"REGIONS": "us-east-1,US_WEST"}, "REGIONS"),
        ({"CLUSTER_ACCESS": "secret"}, "KUBECONFIG_SECRET_ID"),
        ({"CLUSTER_ACCESS": "url"}, "KUBE_URL"),
        ({"CLUSTER_ACCESS": "ssh"}, "CLUSTER_ACCESS"),
        ({"SCALE_UP_MAX_ROUNDS": "0"}, "SCALE_UP_MAX_ROUNDS"),
        ({"OBSERVE_INTERVAL_SECONDS": "soon"}, "OBSERVE_INTERVAL_SECONDS"),
        ({"SCALE_DOWN_IDLE_MINUTES": "-1"}, "SCALE_DOWN_IDLE_MINUTES"),
        ({"NODE_RESERVE_CPU": "lots"}, "NODE_RESERVE_CPU"),
        ({"ORPHANED_DRAIN_MINUTES": "0"}, "ORPHANED_DRAIN_MINUTES"),  # greater than 0
    ],
)
def test_bad_configuration_names_the_variable(change: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigurationError, match=f"^{variable}: "):
        load_runtime_config({**ENV, **change})


def test_a_volcano_podgroups_priority_class_is_read_through_the_client_and_kept_in_the_store(
    kubeapi: Any, kobj: Any, aws: AwsAdapter, store: SnapshotStore
) -> None:
    """Volcano orders a job by the value of the PriorityClass its PodGroup names. Observe lists the
    PriorityClasses (the API server's own among them) beside the PodGroups, and the value reaches the
    planner through the stored snapshot; a PodGroup naming none stands at the global default class's
    value, as in Volcano's cache."""
    from spillway.adapters.kube import KubeClient

    kubeapi.add({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                 "metadata": {"name": "train-high"}, "value": 1000})  # fmt: skip
    kubeapi.add({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                 "metadata": {"name": "standard"}, "value": 100, "globalDefault": True})  # fmt: skip
    for name, spec in (("train", {"priorityClassName": "train-high"}), ("plain", {})):
        kubeapi.add({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                     "metadata": {"name": name, "namespace": "vision"},
                     "spec": {"minMember": 2, **spec}, "status": {"phase": "Inqueue"}})  # fmt: skip

    store.save(observe_once(KubeClient.for_url(kubeapi.url, page_size=30), aws, CONFIG, lambda: T0))
    snapshot = store.latest("prod")

    assert snapshot is not None
    priorities = {g.key: g.priority for g in snapshot.cluster.gangs}
    assert priorities == {"vision/train": 1000, "vision/plain": 100}


def test_tfjobs_xgboostjobs_and_jaxjobs_written_over_the_wire_keep_their_pods_from_moves(
    kubeapi: Any, kobj: Any, aws: AwsAdapter
) -> None:
    """TFJobs, XGBoostJobs and JAXJobs, as their CRDs store them (pruned, the operator's Never default not
    written), are read for the replica types whose evicted pod fails the job (spillway.model.jobs): a
    safe-to-evict pod of such a type is ends-job, of any other it moves. A TFJob whose
    enableDynamicWorker is of a wrong type is refused (422), never stored: its workers move on their
    opt-in alone, as for a job never read."""
    from kubernetes.client import CustomObjectsApi
    from kubernetes.client.exceptions import ApiException

    from spillway.adapters.kube import KubeClient
    from spillway.model.cluster import ClusterSnapshot
    from spillway.planner import codes
    from spillway.planner.disruption import assess_move

    host = kobj.cluster(1, 0)[0][0]["metadata"]["name"]
    kubeapi.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    template = {"spec": {"containers": [{"name": "c", "image": "ghcr.io/example/train:1"}]}}

    def job(kind: str, name: str, specs: str, workers: dict[str, Any], **spec: Any) -> dict[str, Any]:
        return {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": name, "namespace": "ml"},
                "spec": {specs: {"Worker": {"replicas": 1, "template": template, **workers}}, **spec}}  # fmt: skip

    with kubeapi.api_client() as client:
        custom = CustomObjectsApi(client)
        for plural, body in (
            ("tfjobs", job("TFJob", "mnist", "tfReplicaSpecs", {"restartPolicy": "OnFailure"}, gpusPerJob=1)),
            ("tfjobs", job("TFJob", "dyn", "tfReplicaSpecs", {}, enableDynamicWorker=True)),
            ("xgboostjobs", job("XGBoostJob", "boost", "xgbReplicaSpecs", {"restartPolicy": "ExitCode"})),
            ("jaxjobs", job("JAXJob", "jax", "jaxReplicaSpecs", {})),
        ):
            custom.create_namespaced_custom_object("kubeflow.org", "v1", "ml", plural, body)
        with pytest.raises(ApiException) as refused:
            custom.create_namespaced_custom_object(
                "kubeflow.org",
                "v1",
                "ml",
                "tfjobs",
                job("TFJob", "typo", "tfReplicaSpecs", {}, enableDynamicWorker="yes"),
            )
        stored = custom.get_namespaced_custom_object("kubeflow.org", "v1", "ml", "tfjobs", "mnist")
    assert refused.value.status == 422 and "spec.enableDynamicWorker" in refused.value.body
    assert "gpusPerJob" not in stored["spec"]
    for job_name, kind in (
        ("mnist", "TFJob"),
        ("dyn", "TFJob"),
        ("boost", "XGBoostJob"),
        ("jax", "JAXJob"),
        ("typo", "TFJob"),
    ):
        kubeapi.add(
            kubeflow_worker(
                kobj, f"{job_name}-worker-0", host, kind, job_name,
                annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"},
            )
        )  # fmt: skip
    kube = KubeClient.for_url(kubeapi.url, page_size=30)

    cluster = ClusterSnapshot.from_dict(observe_once(kube, aws, CONFIG, lambda: T0).cluster.to_dict())

    jobs = cluster.jobs_by_key()
    assert {k: sorted(j.fail_roles) for k, j in jobs.items()} == {
        "TFJob/ml/mnist": ["worker"],
        "JAXJob/ml/jax": ["worker"],
    }
    moves = {
        p.name: assess_move(p, None, None, T0, -10, jobs).code for p in cluster.pods if p.namespace == "ml"
    }
    assert moves == {
        "mnist-worker-0": codes.POD_ENDS_JOB,  # a TFJob fails on any evicted replica, OnFailure too
        "dyn-worker-0": codes.POD_SAFE_TO_EVICT,  # but for a Worker under enableDynamicWorker
        "boost-worker-0": codes.POD_SAFE_TO_EVICT,  # an XGBoostJob restarts only under ExitCode
        "jax-worker-0": codes.POD_ENDS_JOB,  # a JAXJob's default is Never
        "typo-worker-0": codes.POD_SAFE_TO_EVICT,  # never stored
    }


@pytest.mark.parametrize(
    ("version", "operator"),
    [("v2beta1", "mpi-operator"), ("v1", "mpijob-controller")],
    ids=["mpi-operator", "training-operator"],
)
def test_a_worker_a_succeeded_mpijob_read_over_the_wire_leaves_running_moves_and_a_running_ones_does_not(
    kubeapi: Any, kobj: Any, aws: AwsAdapter, version: str, operator: str
) -> None:
    """Two MPIJobs written as kubectl writes them (kubeflow/mpi-operator's kubeflow.org/v2beta1, or, on a
    cluster with the training operator's MPIJob CRD instead, kubeflow.org/v1, which observe reads once
    v2beta1 answers 404), their conditions then written through /status as the operator writes them: one
    Running, one Succeeded. Observe lists them and keeps the finished one (snapshot key "fin"), so the
    safe-to-evict worker the Succeeded job leaves running (cleanPodPolicy None) moves on its opt-in; the
    Running job's worker is still ends-job (its launcher's mpirun spans it)."""
    from kubernetes.client import CustomObjectsApi

    from spillway.adapters.kube import KubeClient
    from spillway.model.cluster import ClusterSnapshot
    from spillway.planner import codes
    from spillway.planner.disruption import assess_move

    if version == "v1":  # the training operator's CRD, of the same name, in place of the mpi-operator's
        kubeapi.optional_resources = [
            *(r for r in kubeapi.optional_resources if r != "mpijobs.kubeflow.org"),
            "mpijobs.kubeflow.org/v1",
        ]
    host = kobj.cluster(1, 0)[0][0]["metadata"]["name"]
    kubeapi.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    template = {"spec": {"containers": [{"name": "c", "image": "mpioperator/mpi-pi:openmpi"}]}}
    at = "2026-01-01T00:00:00Z"

    def condition(kind: str, status: str = "True") -> dict[str, Any]:
        return {"type": kind, "status": status, "reason": f"MPIJob{kind}", "lastTransitionTime": at,
                "lastUpdateTime": at}  # fmt: skip

    finished = {"conditions": [condition("Created"), condition("Running", "False"), condition("Succeeded")],
                "startTime": at, "completionTime": at}  # fmt: skip
    with kubeapi.api_client() as client:
        custom = CustomObjectsApi(client)
        for name, status in (
            ("done", finished),
            ("train", {"conditions": [condition("Created"), condition("Running")]}),
        ):
            custom.create_namespaced_custom_object("kubeflow.org", version, "ml", "mpijobs", {
                "apiVersion": f"kubeflow.org/{version}", "kind": "MPIJob", "metadata": {"name": name, "namespace": "ml"},
                "spec": {"runPolicy": {"cleanPodPolicy": "None"},
                         "mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": template},
                                             "Worker": {"replicas": 1, "template": template}}}})  # fmt: skip
            custom.patch_namespaced_custom_object_status(
                "kubeflow.org", version, "ml", "mpijobs", name, {"status": status}
            )
    for job_name in ("done", "train"):
        worker = kubeflow_worker(
            kobj, f"{job_name}-worker-0", host, "MPIJob", job_name,
            annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"},
        )  # fmt: skip
        worker["metadata"]["ownerReferences"][0]["apiVersion"] = f"kubeflow.org/{version}"
        worker["metadata"]["labels"]["training.kubeflow.org/operator-name"] = operator
        kubeapi.add(worker)
    kube = KubeClient.for_url(kubeapi.url, page_size=30)

    cluster = ClusterSnapshot.from_dict(observe_once(kube, aws, CONFIG, lambda: T0).cluster.to_dict())

    jobs = cluster.jobs_by_key()
    assert {k: j.finished for k, j in jobs.items()} == {"MPIJob/ml/done": True}
    moves = {
        p.name: assess_move(p, None, None, T0, -10, jobs).code for p in cluster.pods if p.namespace == "ml"
    }
    assert moves == {"done-worker-0": codes.POD_SAFE_TO_EVICT, "train-worker-0": codes.POD_ENDS_JOB}
