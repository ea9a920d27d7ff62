"""Hunt 1: the drain function's re-checks at drain time (failing tests for real bugs found by review)."""

from __future__ import annotations

from test_drain_steps import CLUSTER, NODE, Rig, rig  # noqa: F401  (the fixture)

from spillway.local import objects

PLAN = "20261102T100000Z-abc"


def test_hunt1_a_plans_idle_drain_never_evicts_a_job_pod_bound_after_validation(rig: Rig) -> None:  # noqa: F811
    """A plan drains an idle node (no pods named). Validation finds the node empty; before the cordon
    step a batch Job's pod is bound to it (kube-scheduler prefers the emptiest node; the cordon is the
    next Lambda step, so the window is a state transition, and wider when a retry of the cordon step
    backs off). The idle drain's eviction round then evicted that running Job pod: "no running job is
    ever killed by a scale-down" (README, the product's promise), and the plan saw the node empty, so
    every workload pod on it came after the plan. A consolidation's drain already keeps such a pod
    (``ARRIVED``: left running, the drain times out and gives the node back); a plan's idle drain, whose
    premise is an empty node, must do no less."""
    rig.api.add(objects.daemonset_pod("aws-node-x", NODE))
    drain = rig.validated(plan_id=PLAN, reason="idle 12 min", poll_seconds=5, deadline_seconds=60)
    # bound by name after validation, before the cordon (a plain Job's pod: of no kind known to move)
    rig.api.add(objects.pod("job-0", "team-a", node_name=NODE, owner=("Job", "train")))
    rig.drainer.cordon(drain)

    first = rig.drainer.evict(drain)

    assert first["evicted"] == [], first
    assert rig.api.get("Pod", "job-0", "team-a") is not None
