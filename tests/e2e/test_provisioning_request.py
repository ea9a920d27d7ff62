"""ProvisioningRequests end to end, as Kueue's ProvisioningRequest admission check drives them.

The objects are created through the official kubernetes client exactly as Kueue's provisioning
controller creates them: the request first, named ``<workload>-<admission check>-<attempt>``, owned by
the Workload, with the ProvisioningRequestConfig's class and parameters and one pod set per workload
pod set; then its PodTemplates ``ppt-<request>-<pod set>``, owned by the request, holding the pod set's
template (GPU limits copied to requests). Once Kueue admits, the job's pods carry
``autoscaling.x-k8s.io/consume-provisioning-request: <request>`` and
``autoscaling.x-k8s.io/provisioning-class-name: <class>``, and, with ``podSetUpdates``, the node
selector taken from ``status.provisioningClassDetails``.

Each test drives the real observe code and the real PlanFunction on moto + the API emulator (the
GangLaunch state machine executed by moto), and reads every verdict back from the API, where Kueue
reads it. The plan function's clock is moved forward (its ``datetime``), not slept on, for the
booking's ten minutes.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

import pytest
from conftest import HOME, Cloud
from kubernetes import client as k8s

from spillway.adapters.kube import KubeClient
from spillway.local import objects as o
from spillway.local.rig import GPU_TOLERATION, create_group

GROUP, VERSION, PLURAL = "autoscaling.x-k8s.io", "v1", "provisioningrequests"
CHECK = "check-capacity.autoscaling.x-k8s.io"
ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CONSUME = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS = "autoscaling.x-k8s.io/provisioning-class-name"
LABEL = "spillway.io/provisioning-request"
NS = "ml"


class Clock:
    """The plan function's clock: real time plus ``offset``."""

    def __init__(self) -> None:
        self.offset = timedelta(0)


@pytest.fixture
def clock(cloud: Cloud, monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    shifted = Clock()

    class ShiftedDatetime(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return datetime.now(tz) + shifted.offset

    monkeypatch.setattr(sys.modules["spillway_fn_plan_app"], "datetime", ShiftedDatetime)
    monkeypatch.setenv("GANG_POLL_SECONDS", "1")  # a new environment: the next plan builds new clients
    monkeypatch.setenv("GANG_DEADLINE_SECONDS", "30")
    yield shifted


class Kueue:
    """What Kueue's provisioning admission check writes, through the official client."""

    def __init__(self, cloud: Cloud) -> None:
        self.api = cloud.kube.api_client()
        self.custom = k8s.CustomObjectsApi(self.api)
        self.core = k8s.CoreV1Api(self.api)
        if cloud.kube.get("Namespace", NS) is None:
            self.core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=NS)))

    def request(
        self, workload: str, check: str, class_name: str, pod_sets: dict[str, tuple[k8s.V1PodSpec, int]],
        parameters: dict[str, str] | None = None, templates: bool = True,
    ) -> str:  # fmt: skip
        """Create the request of attempt 1 and (unless not ``templates``) its PodTemplates; returns the
        request's name."""
        name = f"{workload}-{check}-1"
        owner = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload", "name": workload,
                 "uid": f"uid-{workload}", "controller": True, "blockOwnerDeletion": True}  # fmt: skip
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ProvisioningRequest",
            "metadata": {"name": name, "namespace": NS, "ownerReferences": [owner]},
            "spec": {
                "provisioningClassName": class_name,
                "parameters": dict(parameters or {}),
                "podSets": [
                    {"podTemplateRef": {"name": f"ppt-{name}-{ps}"}, "count": count}
                    for ps, (_, count) in pod_sets.items()
                ],
            },
        }
        created: dict[str, Any] = self.custom.create_namespaced_custom_object(
            GROUP, VERSION, NS, PLURAL, body
        )  # type: ignore[assignment]
        for ps, (spec, _) in pod_sets.items() if templates else ():
            template = k8s.V1PodTemplate(
                metadata=k8s.V1ObjectMeta(
                    name=f"ppt-{name}-{ps}", namespace=NS,
                    owner_references=[k8s.V1OwnerReference(
                        api_version=f"{GROUP}/{VERSION}", kind="ProvisioningRequest", name=name,
                        uid=created["metadata"]["uid"], controller=True, block_owner_deletion=True)],
                ),
                template=k8s.V1PodTemplateSpec(
                    metadata=k8s.V1ObjectMeta(labels={"kueue.x-k8s.io/podset": ps}), spec=spec
                ),
            )  # fmt: skip
            self.core.create_namespaced_pod_template(NS, template)
        return name

    def read(self, name: str) -> dict[str, Any]:
        obj: dict[str, Any] = self.custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)  # type: ignore[assignment]
        return obj

    def conditions(self, name: str) -> dict[str, tuple[str, str]]:
        status = self.read(name).get("status") or {}
        return {c["type"]: (c["status"], c["reason"]) for c in status.get("conditions") or []}

    def condition(self, name: str, type_: str) -> dict[str, Any]:
        status = self.read(name).get("status") or {}
        found: dict[str, Any] = next(c for c in status["conditions"] if c["type"] == type_)
        return found


def pod_spec(cpu: str, gpus: int = 0) -> k8s.V1PodSpec:
    requests = {"cpu": cpu, "memory": "1Gi"}
    limits: dict[str, str] = {}
    tolerations = None
    if gpus:  # Kueue copies limits to requests where a request is missing
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(gpus)
        tolerations = [k8s.V1Toleration(**GPU_TOLERATION)]
    container = k8s.V1Container(
        name="main", image="trainer:1", resources=k8s.V1ResourceRequirements(requests=requests, limits=limits)
    )
    return k8s.V1PodSpec(containers=[container], restart_policy="Never", tolerations=tolerations)


def admitted_pods(
    cloud: Cloud, request: str, class_name: str, count: int, cpu: str, gpus: int = 0,
    node_selector: dict[str, str] | None = None,
) -> list[str]:  # fmt: skip
    """The job's pods once Kueue admitted the workload: annotated as consuming the request."""
    annotations = {CONSUME: request, CLASS: class_name}
    tolerations = [GPU_TOLERATION] if gpus else []
    for i in range(count):
        cloud.kube.add(o.pod(f"{request}-pod-{i}", NS, cpu=cpu, memory="1Gi", gpus=gpus, annotations=annotations,
                             tolerations=tolerations, node_selector=node_selector))  # fmt: skip
    return [f"{request}-pod-{i}" for i in range(count)]


def cycle(cloud: Cloud, clock: Clock) -> dict[str, Any]:
    """Observe (dated by the plan's clock) and plan that snapshot; the plan's outcome."""
    key = cloud.snapshot(age=-clock.offset)
    [outcome] = cloud.plan(cloud.stream_event(key))["results"]
    assert outcome["status"] in ("acted", "idle"), outcome
    result: dict[str, Any] = outcome
    return result


def started(cloud: Cloud) -> list[str]:
    return sorted(e["name"] for _, e in cloud.all_executions())


def general_group(cloud: Cloud) -> str:
    create_group("general", region=HOME, instance_type="m5.xlarge", desired=1, min_size=1,
                 cluster=cloud.cluster)  # fmt: skip
    [node] = cloud.wait_nodes(1)
    return node


def test_check_capacity_books_is_consumed_expires_and_never_launches(cloud: Cloud, clock: Clock) -> None:
    node = general_group(cloud)
    kueue = Kueue(cloud)
    fits = kueue.request("job-etl-1a2b3", "spillway-check", CHECK, {"main": (pod_spec("1"), 2)})

    cycle(cloud, clock)
    assert kueue.conditions(fits) == {
        "Accepted": ("True", "Accepted"),
        "Provisioned": ("True", "CapacityIsFound"),
    }

    # Kueue admits: the pods consume the request. They are not demand (the booking is theirs): no
    # scale-up, although the booked room leaves no room for them beside it.
    pods = admitted_pods(cloud, fits, CHECK, 2, cpu="1")
    cycle(cloud, clock)
    assert started(cloud) == []
    assert "BookingExpired" not in kueue.conditions(fits)

    for pod in pods:  # the scheduler binds them: the booking is used
        cloud.kube.bind(pod, node, NS)
    cycle(cloud, clock)
    assert kueue.conditions(fits)["BookingExpired"] == ("True", "CapacityBookingConsumed")

    # A second request books what is left; nobody comes; ten minutes later the booking is released.
    held = kueue.request("job-etl-4c5d6", "spillway-check", CHECK, {"main": (pod_spec("1"), 1)})
    cycle(cloud, clock)
    provisioned = kueue.condition(held, "Provisioned")
    assert (provisioned["status"], provisioned["reason"]) == ("True", "CapacityIsFound")
    clock.offset = timedelta(minutes=10, seconds=30)
    cycle(cloud, clock)
    assert kueue.conditions(held)["BookingExpired"] == ("True", "CapacityReservationTimeExpired")
    assert kueue.condition(held, "Provisioned")["lastTransitionTime"] == provisioned["lastTransitionTime"]

    # One that does not fit what exists is told so and launches nothing: check-capacity never does.
    big = kueue.request("job-etl-7e8f9", "spillway-check", CHECK, {"main": (pod_spec("3"), 2)})
    cycle(cloud, clock)
    assert kueue.conditions(big)["Provisioned"] == ("False", "CapacityIsNotFound")
    assert started(cloud) == []
    assert cloud.desired("general") == 1


def test_best_effort_atomic_launches_a_labelled_gang_once_and_provisions_on_it(
    cloud: Cloud, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The gang launch stops between "all nodes Ready" and labelling them, until the test lets it go.
    reached, release = threading.Event(), threading.Event()
    label_node = KubeClient.label_node

    def held_label(self: KubeClient, name: str, labels: Mapping[str, str]) -> bool:
        reached.set()
        release.wait(60)
        return label_node(self, name, labels)

    monkeypatch.setattr(KubeClient, "label_node", held_label)
    general_group(cloud)
    create_group("gang-east", region=HOME, instance_type="g5.xlarge", max_size=8, cluster=cloud.cluster,
                 gpu=True, tags={"spillway.io/atomic-launch": "fleet"})  # fmt: skip
    kueue = Kueue(cloud)
    name = kueue.request("job-train-9a8b7", "spillway-atomic", ATOMIC, {"main": (pod_spec("3", gpus=1), 3)},
                         parameters={"ValidUntilSeconds": "3600"})  # fmt: skip

    first = cycle(cloud, clock)
    assert kueue.conditions(name) == {
        "Accepted": ("True", "Accepted"),
        "Provisioned": ("False", "CapacityIsLaunching"),
    }
    [gang] = cloud.executions("GangLaunchStateMachine")
    assert gang["name"].startswith(f"gang-{first['plan_id']}-")
    assert cloud.executions("ScaleUpStateMachine") == []

    # Plans while the fleet is launched (it joins the group only once all run): not launched again,
    # and the request stays launching (not failed).
    cycle(cloud, clock)
    assert kueue.conditions(name)["Provisioned"] == ("False", "CapacityIsLaunching")
    assert "Failed" not in kueue.conditions(name)

    # All its nodes are Ready and not labelled yet: their free room does not provision the request
    # (Kueue would admit with no label to pin the pods to them).
    assert reached.wait(60)
    cycle(cloud, clock)
    assert kueue.conditions(name)["Provisioned"] == ("False", "CapacityIsLaunching")
    assert "provisioningClassDetails" not in kueue.read(name)["status"]
    release.set()

    finished = [e for e in cloud.wait_all(timeout=90) if e["name"].startswith("gang-")]
    assert [e["status"] for e in finished] == ["SUCCEEDED"], finished
    nodes = finished[0]["output"]["nodes"]
    assert len(nodes) == 3
    value = f"{NS}.{name}"
    labelled = [n for n in cloud.kube.list("Node") if n["metadata"]["labels"].get(LABEL) == value]
    assert sorted(n["metadata"]["name"] for n in labelled) == sorted(nodes)

    cycle(cloud, clock)
    assert kueue.conditions(name)["Provisioned"] == ("True", "CapacityIsProvisioned")
    details = kueue.read(name)["status"]["provisioningClassDetails"]
    assert details == {"NodeSelectorKey": LABEL, "NodeSelectorValue": value}

    # Kueue admits with podSetUpdates: the pods are pinned to the request's nodes by that label.
    pods = admitted_pods(
        cloud, name, ATOMIC, 3, cpu="3", gpus=1, node_selector={LABEL: details["NodeSelectorValue"]}
    )
    cycle(cloud, clock)
    assert len(cloud.executions("GangLaunchStateMachine")) == 1  # not scaled for twice
    assert cloud.executions("ScaleUpStateMachine") == []
    for pod, node in zip(pods, sorted(nodes), strict=True):
        cloud.kube.bind(pod, node, NS)
    cycle(cloud, clock)
    assert kueue.conditions(name)["BookingExpired"] == ("True", "CapacityBookingConsumed")
    assert cloud.asg("gang-east")["DesiredCapacity"] == 3


def test_a_request_that_can_never_fit_fails_and_a_gone_node_revokes_a_booking(
    cloud: Cloud, clock: Clock
) -> None:
    node = general_group(cloud)
    create_group("gang-east", region=HOME, instance_type="g5.xlarge", max_size=4, cluster=cloud.cluster,
                 gpu=True, tags={"spillway.io/atomic-launch": "fleet"})  # fmt: skip
    kueue = Kueue(cloud)
    never = kueue.request("job-huge-0a0b0", "spillway-atomic", ATOMIC, {"main": (pod_spec("3", gpus=1), 6)})
    booked = kueue.request("job-small-1c1d1", "spillway-check", CHECK, {"main": (pod_spec("2"), 1)})
    # seen between the request and its PodTemplates (Kueue creates them in that order)
    orphan = kueue.request(
        "job-lost-3e3f3", "spillway-check", CHECK, {"main": (pod_spec("1"), 1)}, templates=False
    )

    cycle(cloud, clock)
    assert kueue.conditions(orphan) == {}  # young: its templates may come yet
    conditions = kueue.conditions(never)
    assert conditions["Failed"] == ("True", "CapacityCannotBeProvisioned")
    assert "max" in kueue.condition(never, "Failed")["message"].lower()
    assert kueue.conditions(booked)["Provisioned"] == ("True", "CapacityIsFound")
    assert started(cloud) == []

    # a pod that consumes nothing is bound in the booked room (kube-scheduler knows no booking): the
    # room is taken, the node is there; Kueue would deactivate the workload on CapacityRevoked
    cloud.kube.add(o.pod("intruder", NS, cpu="2", memory="1Gi"))
    cloud.kube.bind("intruder", node, NS)
    cycle(cloud, clock)
    assert "CapacityRevoked" not in kueue.conditions(booked)

    cloud.kube.delete("Node", node)  # the booked node is gone before its pods came
    cycle(cloud, clock)
    assert kueue.conditions(booked)["CapacityRevoked"] == ("True", "BookedCapacityGone")
    assert kueue.conditions(never)["Failed"][0] == "True"  # ended: left alone
    assert [e for e in started(cloud) if e.startswith("gang-")] == []

    clock.offset = timedelta(minutes=2)  # they never came
    cycle(cloud, clock)
    assert kueue.conditions(orphan) == {"Failed": ("True", "FailedToCreatePods")}
    assert "not found" in kueue.condition(orphan, "Failed")["message"]
