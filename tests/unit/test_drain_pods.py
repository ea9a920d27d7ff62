# ruff: noqa: F811  (the rig fixture of test_drain_steps is imported and taken by name)
"""What a drain does with the pods it finds (review r25): the grace period it gives an evicted pod,
pods a DaemonSet-like controller marks as DaemonSet pods, and pods with local storage. On the rig of
test_drain_steps (the Kubernetes API emulator, which deletes pods gracefully, and a fake Auto Scaling)."""

from __future__ import annotations

from typing import Any

from test_drain_steps import NODE, Rig, rig  # noqa: F401 (the fixture)

from spillway.act.drain import classify
from spillway.local import objects
from spillway.model.k8s import DAEMONSET_POD, Pod


def evictions(rig: Rig, name: str) -> list[Any]:
    return [r for r in rig.api.requests if r.method == "POST" and r.path.endswith(f"/pods/{name}/eviction")]


# --- pods a DaemonSet-like controller marks as DaemonSet pods -------------------------------------


def custom_daemonset_pod(value: str = "true") -> dict[str, Any]:
    """A pod of Datadog's ExtendedDaemonSet, which tolerates the cordon as a DaemonSet's pods do."""
    raw = objects.pod(
        "datadog-agent-x7k2p",
        "monitoring",
        node_name=NODE,
        labels={"app": "datadog-agent"},
        owner=("ExtendedDaemonSetReplicaSet", "datadog-agent-6f8d"),
        annotations={DAEMONSET_POD: value},
        tolerations=[{"operator": "Exists"}],
    )
    raw["metadata"]["ownerReferences"][0]["apiVersion"] = "datadoghq.com/v1alpha1"
    return raw


def test_a_pod_annotated_daemonset_pod_is_left_alone_as_a_daemonset_pod(rig: Rig) -> None:
    """cluster-autoscaler takes a pod annotated ``cluster-autoscaler.kubernetes.io/daemonset-pod:
    "true"`` as a DaemonSet's (utils/pod IsDaemonSetPod); evicted, its controller would put it straight
    back on the cordoned node, round after round, until the drain timed out and was undone."""
    judged = classify(Pod.model_validate(custom_daemonset_pod()), force=False)
    assert (judged.action, judged.reason.startswith(f"annotated {DAEMONSET_POD}=true")) == ("ignore", True)

    rig.api.add(custom_daemonset_pod())
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=60)
    first = rig.drainer.evict(drain)
    assert evictions(rig, "datadog-agent-x7k2p") == []
    assert first["done"] is True


def test_only_the_value_true_marks_a_daemonset_pod_as_cluster_autoscaler_compares_it() -> None:
    for value in ("True", "1", "yes", ""):
        assert classify(Pod.model_validate(custom_daemonset_pod(value)), force=False).action == "evict", value
