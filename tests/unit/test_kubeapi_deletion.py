"""The local API emulator's graceful deletion of a Pod (spillway.local.kubeapi.deletion), against the
real API server's pod strategy (kubernetes/kubernetes pkg/registry/core/pod/strategy.go,
CheckGracefulDelete)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from spillway.local.kubeapi.deletion import plan

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)


def _pod(grace: int | None, node: str | None = "node-a", phase: str = "Running") -> dict[str, object]:
    spec: dict[str, object] = {"containers": [{"name": "c", "image": "busybox"}]}
    if node is not None:
        spec["nodeName"] = node
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"metadata": {"name": "p", "namespace": "default"}, "spec": spec, "status": {"phase": phase}}


@pytest.mark.parametrize("grace", [-1, -30])
def test_a_pod_whose_own_grace_period_is_negative_is_deleted_with_one_second(grace: int) -> None:
    # CheckGracefulDelete takes the pod's terminationGracePeriodSeconds when the delete gives none, and
    # turns a negative period into 1 whichever it came from (an API server before 1.27 stored a
    # negative value as sent). The emulator turned only the delete options' negative period into 1:
    # the pod's own -30 marked it deleted 30 s in the past with deletionGracePeriodSeconds -30.
    deletion = plan(_pod(grace), {}, NOW)

    meta = deletion.pod["metadata"]
    assert (deletion.remove, deletion.grace, meta["deletionGracePeriodSeconds"]) == (False, 1, 1)
    assert meta["deletionTimestamp"] == (NOW + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize(
    ("pod", "grace"),
    [
        (_pod(-5, node=None), 0),  # not scheduled: deleted at once
        (_pod(-5, phase="Succeeded"), 0),  # already terminated: deleted at once
        (_pod(45), 45),
        (_pod(None), 0),  # no period (the defaults always set one): at once, as the strategy reads nil
    ],
    ids=["unscheduled", "terminated", "positive", "none"],
)
def test_the_grace_period_of_a_delete_without_options_is_the_pods_own(
    pod: dict[str, object], grace: int
) -> None:
    deletion = plan(pod, {}, NOW)

    assert (deletion.grace, deletion.remove) == (grace, grace == 0)


@pytest.mark.parametrize(("grace", "read"), [(-1, 1), (-3600, 1), (0, 0), (45, 45)])
def test_a_pod_written_with_a_negative_grace_period_reads_back_with_one_second(grace: int, read: int) -> None:
    # Since 1.27 the API server converts a Pod's negative spec.terminationGracePeriodSeconds to 1
    # (kubernetes#115606, Convert_v1_Pod_To_core_Pod: Pods only, not the pod templates of other kinds),
    # on every decode, so no Pod is ever returned with one. The emulator kept -1 as sent.
    from spillway.local.kubeapi.pods import with_defaults

    assert with_defaults(_pod(grace))["spec"]["terminationGracePeriodSeconds"] == read
