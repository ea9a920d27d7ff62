"""hunt4: scale-up findings, each a scenario the planner got wrong."""

from __future__ import annotations

from plan_world import World, pending_reasons, scale_up

from spillway.local import objects as o


def test_daemonset_ephemeral_storage_does_not_make_an_unknown_estimate_negative() -> None:
    """Scenario: group ``cpu`` at zero (its template is the m5.2xlarge estimate, which knows no
    ephemeral storage: no ``node-template/resources/ephemeral-storage`` tag, no node), a DaemonSet
    whose pod requests 1Gi of ephemeral storage, and a pending pod requesting 2Gi of it.

    The rule (README, *templates*: "an estimate knows none without a `resources` tag"; model.resources
    ``UNCHECKED_WHEN_UNKNOWN``): a resource the template does not know is not checked, every kubelet
    reports ephemeral storage. The DaemonSet's overhead was subtracted from the unknown amount, leaving
    the template -1Gi, so the pod was refused as ``no-group-fits`` ("too little ephemeral-storage") and
    never got a node, though the same pod without the DaemonSet gets one."""
    w = World()
    w.group("cpu", "m5.2xlarge")
    ds = o.daemonset("logs")
    ds["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["ephemeral-storage"] = "1Gi"
    w.items.append(ds)
    [pod] = w.pods("app", 1)
    w.pod_item(pod)["spec"]["containers"][0]["resources"]["requests"]["ephemeral-storage"] = "2Gi"
    result = w.plan()
    assert scale_up(result) == {"cpu": (0, 1, [pod])}, pending_reasons(result)
