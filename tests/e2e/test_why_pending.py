"""Why is my pod pending? The plan function tells the pod, and `kubectl describe pod` shows it.

The real observe code and plan handler on the rig; the Events are read back from the API emulator
the way kubectl describe pod asks for them: a field selector on the pod's name, namespace, kind and uid.
"""

from __future__ import annotations

from typing import Any

from conftest import HOME, Cloud
from kubernetes.client.api.core_v1_api import CoreV1Api

from spillway.adapters.kube import KubeClient
from spillway.local import objects as o


def described_events(cloud: Cloud, namespace: str, name: str) -> list[dict[str, Any]]:
    """The Events `kubectl describe pod` lists for the pod (its field selector, as kubectl builds it)."""
    pod = cloud.kube.get("Pod", name, namespace)
    assert pod is not None
    selector = (
        f"involvedObject.name={name},involvedObject.namespace={namespace},"
        f"involvedObject.kind=Pod,involvedObject.uid={pod['metadata']['uid']}"
    )
    kube = KubeClient.for_url(cloud.kube.url)
    try:
        answer = CoreV1Api(kube.api_client).list_namespaced_event(namespace, field_selector=selector)
    finally:
        kube.close()
    return [kube.api_client.sanitize_for_serialization(e) for e in answer.items]


def test_after_a_plan_each_pending_pod_has_an_event_saying_why(cloud: Cloud) -> None:
    cloud.group("general", instance_type="m5.xlarge", desired=1, gpu=False)
    cloud.group("gpu-east", region=HOME, max_size=8)
    cloud.wait_nodes(1)
    cloud.pending_gpu_pods("train", 2)
    cloud.kube.add(o.pod("huge-0", "ml", cpu="500", memory="2Gi"))  # no group's node is that large
    key = cloud.snapshot()

    result = cloud.plan(cloud.stream_event(key))

    [outcome] = result["results"]
    assert outcome["status"] == "acted" and outcome["events"]["posted"] == 3, outcome
    [triggered] = described_events(cloud, "ml", "train-0")
    assert triggered["reason"] == "TriggeredScaleUp" and triggered["type"] == "Normal"
    assert triggered["message"] == "pod triggered scale-up: [{gpu-east (us-east-1) 0->2 (max: 8)}]"
    assert triggered["source"]["component"] == "spillway" and triggered["count"] == 1
    [why_not] = described_events(cloud, "ml", "huge-0")
    assert why_not["reason"] == "NotTriggerScaleUp"
    assert why_not["message"].endswith("(code: no-group-fits)")

    # the next plan, the pods still pending: nobody is told the same thing twice
    cloud.wait_all()
    again = cloud.plan(cloud.stream_event(cloud.snapshot()))
    assert again["results"][0]["status"] in ("acted", "idle"), again
    assert len(described_events(cloud, "ml", "huge-0")) == 1


def test_a_pod_that_fits_once_a_backfill_pod_is_preempted_hears_where_and_nothing_launches(
    cloud: Cloud,
) -> None:
    """The emulator's Priority admission gives both pods preemptionPolicy PreemptLowerPriority; observe
    reads it and the backfill pod's priority, and the plan sends nothing to launch for the pod kube-scheduler
    is to make room for by preemption."""
    cloud.group("general", instance_type="m5.xlarge", desired=1, gpu=False)
    [node] = cloud.wait_nodes(1)
    cloud.kube.add(
        o.pod(
            "backfill-0",
            "ml",
            cpu="3",
            memory="2Gi",
            node_name=node,
            priority=-100,
            owner=("ReplicaSet", "bf"),
        )
    )
    cloud.kube.add(o.pod("train-0", "ml", cpu="3", memory="4Gi"))  # an m5.xlarge has under 4 CPUs

    result = cloud.plan(cloud.stream_event(cloud.snapshot()))

    [outcome] = result["results"]
    assert outcome["events"]["posted"] == 1, outcome
    [told] = described_events(cloud, "ml", "train-0")
    assert told["reason"] == "NotTriggerScaleUp", told
    assert told["message"].endswith("(code: fits-by-preemption)")
    assert node in told["message"] and "ml/backfill-0" in told["message"]
    assert cloud.desired("general") == 1
