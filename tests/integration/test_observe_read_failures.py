"""What observe makes of a read that fails, through the real client and the local API server.

One rule (README, *What observe reads, and when it fails*): a kind is read as having no objects only
when the API server says the resource does not exist (404: its CRD is not installed). A refusal (403:
the ClusterRole lacks the rule) or no useful answer (5xx, timeouts, after the client's retries) on any
list the plan relies on fails the observation, naming the kind and, for a 403, the RBAC rule to add:
nothing is stored, so the planner keeps the last good snapshot until it is too old, and the observe
errors alarm fires. A snapshot that silently lacks a CapacityQuota, a booked ProvisioningRequest, a
buffer's headroom or a bound volume's zone would be planned on as if it were whole. (Review r15.)
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from fakes import replaced_between_pages

from spillway.adapters.aws import AwsAdapter, AwsClients, AwsSettings
from spillway.adapters.kube import KubeClient
from spillway.errors import KubeAuthError, KubeUnavailable, ObservationFailed
from spillway.local import objects as kobj
from spillway.local.kubeapi import KubeApiServer
from spillway.local.rig import create_group
from spillway.observe import ObserveConfig, observe_once

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
CONFIG = ObserveConfig(cluster="prod")
TEMPLATE = {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}
ZONE = {"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": ["us-west-2a"]}


@pytest.fixture
def aws(moto_aws: None) -> AwsAdapter:
    create_group("general", region="us-east-1", instance_type="m5.large", desired=2, max_size=20,
                 cluster="prod", mixed=False)  # fmt: skip
    return AwsAdapter(AwsClients(("us-east-1",), boto3.Session(), AwsSettings(max_attempts=2)), "prod")


@pytest.fixture
def kubeapi() -> Iterator[KubeApiServer]:
    server = KubeApiServer().start()
    world = kobj.fleet(6, 40, pending=2, region="us-east-1", seed="r15", created=T0)
    for obj in [*world.nodes, *world.pods, *world.pdbs]:
        server.add(obj)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def kube(kubeapi: KubeApiServer) -> KubeClient:
    return KubeClient.for_url(kubeapi.url, page_size=10, sleep=lambda s: None)


def observe(kube: KubeClient, aws: AwsAdapter) -> Any:
    return observe_once(kube, aws, CONFIG, lambda: T0)


def freeze(server: KubeApiServer) -> None:
    server.add({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityQuota",
                "metadata": {"name": "freeze"}, "spec": {"limits": {"resources": {"nodes": "0"}}}})  # fmt: skip


def booked_and_buffered(server: KubeApiServer) -> None:
    """A check-capacity ProvisioningRequest and a CapacityBuffer, both of PodTemplate ml/w."""
    server.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    server.add({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "w", "namespace": "ml"},
                "template": {"spec": TEMPLATE}})  # fmt: skip
    server.add({"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
                "metadata": {"name": "r", "namespace": "ml"},
                "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                         "podSets": [{"podTemplateRef": {"name": "w"}, "count": 2}]}})  # fmt: skip
    server.add({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
                "metadata": {"name": "headroom", "namespace": "ml"},
                "spec": {"podTemplateRef": {"name": "w"}, "replicas": 2}})  # fmt: skip


def stateful_pod_in_us_west_2a(server: KubeApiServer) -> None:
    server.add({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-db-0"},
                "spec": {"capacity": {"storage": "100Gi"}, "accessModes": ["ReadWriteOnce"],
                         "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [ZONE]}]}}}})  # fmt: skip
    server.add({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data-db-0", "namespace": "shop"},
                "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": "pv-db-0",
                         "resources": {"requests": {"storage": "100Gi"}}}})  # fmt: skip
    pod = kobj.pod("db-0", "shop", cpu="500m", memory="1Gi", owner=("StatefulSet", "db"))
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}]
    server.add(pod)


# --- the controls: what each read gives when it is answered -----------------------------------------


def test_control_every_kind_reaches_the_snapshot_when_granted(kubeapi: KubeApiServer, kube: KubeClient,
                                                              aws: AwsAdapter) -> None:  # fmt: skip
    freeze(kubeapi)
    booked_and_buffered(kubeapi)
    stateful_pod_in_us_west_2a(kubeapi)

    cluster = observe(kube, aws).cluster

    assert [q.name for q in cluster.quotas] == ["freeze"]
    assert [r.name for r in cluster.provreqs] == ["r"] and [b.name for b in cluster.buffers] == ["headroom"]
    assert "us-west-2a" in repr({p.key: p for p in cluster.pods}["shop/db-0"].required_terms)


def test_a_cluster_without_the_optional_crds_observes_with_none_of_them(
    kubeapi: KubeApiServer, kube: KubeClient, aws: AwsAdapter
) -> None:
    """404 is the API server saying the resource does not exist: none of it, and observing goes on."""
    kubeapi.optional_resources = []  # no Volcano, Kueue, cluster-autoscaler or Kubeflow CRD

    cluster = observe(kube, aws).cluster

    assert (cluster.quotas, cluster.provreqs, cluster.buffers, cluster.gangs) == ((), (), (), ())
    assert len(cluster.nodes) == 6


# --- 403: the ClusterRole lacks the rule --------------------------------------------------------------


def test_a_forbidden_capacity_quota_list_fails_the_observation_naming_the_rule(
    kubeapi: KubeApiServer, kube: KubeClient, aws: AwsAdapter
) -> None:
    """It was read as "no quota": the planner applied no limit and launched past the 'freeze' quota."""
    freeze(kubeapi)
    kubeapi.faults.fail_next(100, status=403, path_prefix="/apis/autoscaling.x-k8s.io/v1beta1/capacityquotas",
                             method="GET")  # fmt: skip

    with pytest.raises(ObservationFailed) as failed:
        observe(kube, aws)

    assert isinstance(failed.value.__cause__, KubeAuthError)
    message = str(failed.value)
    assert "capacityquotas" in message and "403" in message
    assert '{apiGroups: ["autoscaling.x-k8s.io"], resources: ["capacityquotas"], verbs: ["list"]}' in message


def test_a_forbidden_persistent_volume_list_fails_the_observation(
    kubeapi: KubeApiServer, kube: KubeClient, aws: AwsAdapter
) -> None:
    """It was read as "no volumes": the pod whose claim is bound to a us-west-2a volume was snapshotted
    as able to run in any zone, so a node could be opened (or its node drained) in the wrong one."""
    stateful_pod_in_us_west_2a(kubeapi)
    kubeapi.faults.fail_next(100, status=403, path_prefix="/api/v1/persistentvolumes", method="GET")

    with pytest.raises(ObservationFailed, match=r'resources: \["persistentvolumes"\], verbs: \["list"\]'):
        observe(kube, aws)


# every list observe makes whose answer the plan relies on: (path refused, the rule the error names)
RULES = [
    ("/api/v1/namespaces", '{apiGroups: [""], resources: ["namespaces"], verbs: ["list"]}'),
    ("/apis/scheduling.volcano.sh/v1beta1/podgroups",
     '{apiGroups: ["scheduling.volcano.sh"], resources: ["podgroups"], verbs: ["list"]}'),
    ("/apis/scheduling.x-k8s.io/v1alpha1/podgroups",
     '{apiGroups: ["scheduling.x-k8s.io"], resources: ["podgroups"], verbs: ["list"]}'),
    ("/apis/scheduling.k8s.io/v1alpha1/workloads",
     '{apiGroups: ["scheduling.k8s.io"], resources: ["workloads"], verbs: ["list"]}'),
    ("/apis/batch/v1/jobs", '{apiGroups: ["batch"], resources: ["jobs"], verbs: ["list"]}'),
    ("/apis/kubeflow.org/v1/pytorchjobs", '{apiGroups: ["kubeflow.org"], resources: ["pytorchjobs"], verbs: ["list"]}'),
    ("/apis/kubeflow.org/v1/tfjobs", '{apiGroups: ["kubeflow.org"], resources: ["tfjobs"], verbs: ["list"]}'),
    ("/apis/kubeflow.org/v2beta1/mpijobs", '{apiGroups: ["kubeflow.org"], resources: ["mpijobs"], verbs: ["list"]}'),
    ("/api/v1/persistentvolumeclaims", '{apiGroups: [""], resources: ["persistentvolumeclaims"], verbs: ["list"]}'),
    ("/apis/storage.k8s.io/v1/storageclasses",
     '{apiGroups: ["storage.k8s.io"], resources: ["storageclasses"], verbs: ["list"]}'),
    ("/apis/storage.k8s.io/v1/csinodes",
     '{apiGroups: ["storage.k8s.io"], resources: ["csinodes"], verbs: ["list"]}'),
    ("/apis/storage.k8s.io/v1/volumeattachments",
     '{apiGroups: ["storage.k8s.io"], resources: ["volumeattachments"], verbs: ["list"]}'),
    ("/apis/autoscaling.x-k8s.io/v1/provisioningrequests",
     '{apiGroups: ["autoscaling.x-k8s.io"], resources: ["provisioningrequests"], verbs: ["list"]}'),
    ("/apis/autoscaling.x-k8s.io/v1beta1/capacitybuffers",
     '{apiGroups: ["autoscaling.x-k8s.io"], resources: ["capacitybuffers"], verbs: ["list"]}'),
    ("/api/v1/namespaces/ml/podtemplates", '{apiGroups: [""], resources: ["podtemplates"], verbs: ["list"]}'),
    ("/api/v1/namespaces/ml/resourcequotas", '{apiGroups: [""], resources: ["resourcequotas"], verbs: ["list"]}'),
    ("/api/v1/namespaces/kube-system/configmaps/cluster-autoscaler-priority-expander",
     '{apiGroups: [""], resources: ["configmaps"], resourceNames: ["cluster-autoscaler-priority-expander"], '
     'verbs: ["get"]}'),
    ("/api/v1/pods", '{apiGroups: [""], resources: ["pods"], verbs: ["list"]}'),
    ("/apis/policy/v1/poddisruptionbudgets",
     '{apiGroups: ["policy"], resources: ["poddisruptionbudgets"], verbs: ["list"]}'),
]  # fmt: skip


@pytest.mark.parametrize(("path", "rule"), RULES, ids=[p.rsplit("/", 1)[-1] for p, _ in RULES])
def test_any_read_refused_by_rbac_fails_the_observation_naming_the_rule_to_add(
    kubeapi: KubeApiServer, kube: KubeClient, aws: AwsAdapter, path: str, rule: str
) -> None:
    booked_and_buffered(kubeapi)  # so that the PodTemplates and ResourceQuotas of ml are read too
    kubeapi.faults.fail_next(100, status=403, path_prefix=path, method="GET")

    with pytest.raises(ObservationFailed) as failed:
        observe(kube, aws)

    assert isinstance(failed.value.__cause__, KubeAuthError)
    assert rule in str(failed.value)


# --- 404 on a built-in kind: the server is not answering as an API server does ------------------------

# Lists of kinds every API server serves (core/v1, apps/v1, batch/v1, storage.k8s.io/v1): a 404 there says
# nothing about a CRD (a misrouted proxy, a broken aggregation layer), so it is no reason to read none.
BUILT_IN = [
    "/api/v1/namespaces",
    "/api/v1/persistentvolumeclaims",
    "/api/v1/persistentvolumes",
    "/apis/storage.k8s.io/v1/storageclasses",
    "/apis/storage.k8s.io/v1/csinodes",
    "/apis/storage.k8s.io/v1/volumeattachments",
    "/apis/apps/v1/daemonsets",
    "/apis/batch/v1/jobs",
]


@pytest.mark.parametrize("path", BUILT_IN, ids=[p.rsplit("/", 1)[-1] for p in BUILT_IN])
def test_a_built_in_kind_answering_404_fails_the_observation_rather_than_reading_none(
    kubeapi: KubeApiServer, kube: KubeClient, aws: AwsAdapter, path: str
) -> None:
    """Read as none, no PersistentVolumes freed a pod of its volume's zone, no Namespaces lost the
    tenants' labels (their limits), no DaemonSets misjudged a new node's room, no Jobs made a Job's pods
    that may move look as if they may not."""
    stateful_pod_in_us_west_2a(kubeapi)
    kubeapi.faults.fail_next(100, status=404, path_prefix=path, method="GET")

    with pytest.raises(ObservationFailed) as failed:
        observe(kube, aws)

    assert "404" in str(failed.value) and path.rsplit("/", 1)[-1] in str(failed.value)


# --- no useful answer: 5xx, timeouts, after the client's retries --------------------------------------


@pytest.mark.parametrize(
    "path",
    ["/apis/autoscaling.x-k8s.io/v1/provisioningrequests", "/apis/autoscaling.x-k8s.io/v1beta1/capacitybuffers",
     "/api/v1/namespaces/ml/podtemplates", "/api/v1/namespaces/ml/resourcequotas",
     "/apis/autoscaling.x-k8s.io/v1beta1/capacityquotas", "/api/v1/persistentvolumes",
     "/api/v1/namespaces/kube-system/configmaps/cluster-autoscaler-priority-expander"],
    ids=lambda p: p.rsplit("/", 1)[-1],
)  # fmt: skip
def test_a_list_the_api_server_does_not_answer_fails_the_observation(
    kubeapi: KubeApiServer, kube: KubeClient, aws: AwsAdapter, path: str
) -> None:
    """ProvisioningRequests and CapacityBuffers caught KubeError, the base class: an outage read as
    "none exist", and a booked request's or a buffer's nodes looked idle for that tick."""
    booked_and_buffered(kubeapi)
    kubeapi.faults.fail_next(100, status=503, path_prefix=path, method="GET")

    with pytest.raises(ObservationFailed) as failed:
        observe(kube, aws)

    assert isinstance(failed.value.__cause__, KubeUnavailable)
    assert path.rsplit("/", 1)[-1] in str(failed.value)


# --- 410: a continue token that expired mid-list ----------------------------------------------------


def test_a_list_whose_continue_token_expired_is_observed_again_from_the_start(
    kubeapi: KubeApiServer, kube: KubeClient, aws: AwsAdapter, caplog: pytest.LogCaptureFixture
) -> None:
    """The restarted pod list was merged with the first pass by uid: the replaced pod came out twice,
    bound to its old node and pending (a phantom scale-up beside a node that looks busy). The pages
    read before the expiry are dropped: the snapshot is the second pass's, each pod once. (Review r15-3.)"""
    victim = replaced_between_pages(kubeapi, kube, times=1)

    pods = observe(kube, aws).cluster.pods

    keys = [p.key for p in pods]
    assert len(keys) == len(set(keys)), f"{sorted(k for k in keys if keys.count(k) > 1)} twice"
    (replaced,) = [p for p in pods if p.key == victim]
    assert replaced.node_name is None  # as it is now: pending
    assert any("observing again from the start" in r.getMessage() for r in caplog.records)


def test_a_list_whose_continue_token_keeps_expiring_fails_the_observation(
    kubeapi: KubeApiServer, kube: KubeClient, aws: AwsAdapter
) -> None:
    replaced_between_pages(kubeapi, kube, times=100)

    with pytest.raises(ObservationFailed, match="expired") as failed:
        observe(kube, aws)

    assert isinstance(failed.value.__cause__, KubeUnavailable)
    assert len([r for r in kubeapi.requests if r.path == "/api/v1/pods" and r.status == 410]) == 3


# --- 404 after some pages: the kind stopped being served mid-list -------------------------------------


def test_a_crd_removed_while_its_list_is_paged_is_read_as_absent_not_as_the_pages_before(
    kubeapi: KubeApiServer, kube: KubeClient, aws: AwsAdapter
) -> None:
    """A CRD deleted (or a version no longer served) between two pages of its list: the next page
    answers 404 (Extend the Kubernetes API with CustomResourceDefinitions: the REST path exists while
    the CRD does, each version only while marked served). The pages read before belong to a list that can no longer be finished (Kubernetes API
    concepts, "Retrieving large results sets in chunks": a client that needs a consistent list starts
    again without ``continue``), and a fresh list says the kind does not exist. The observation kept
    the first page's quotas and stored them as the cluster's quotas (10 of 25 quotas, none of which
    exist any more), as if the list had ended there."""
    for index in range(25):
        kubeapi.add({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityQuota",
                     "metadata": {"name": f"q{index:02d}"},
                     "spec": {"limits": {"resources": {"nodes": "100"}}}})  # fmt: skip
    real = kube._custom.list_cluster_custom_object

    def listing(*args: Any, **kwargs: Any) -> Any:
        if "capacityquotas" in args and kwargs.get("_continue"):
            kubeapi.optional_resources = set(kubeapi.optional_resources) - {
                "capacityquotas.autoscaling.x-k8s.io"
            }
        return real(*args, **kwargs)

    kube._custom.list_cluster_custom_object = listing  # type: ignore[method-assign]

    cluster = observe(kube, aws).cluster

    assert [q.name for q in cluster.quotas] == []
    assert len(cluster.nodes) == 6
