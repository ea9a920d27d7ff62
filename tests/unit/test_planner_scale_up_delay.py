"""cluster-autoscaler's per-pod scale-up delay, the pod annotation
``cluster-autoscaler.kubernetes.io/pod-scale-up-delay`` (a Go duration): a pending pod younger than it
(its age from ``metadata.creationTimestamp``) triggers no scale-up. cluster-autoscaler leaves it out of
the pods it helps once the pods that fit the cluster are filtered out (core/static_autoscaler.go,
``filterOutYoungPods``; flag ``--new-pod-scale-up-delay``: "Can be increased for individual pods through
annotation 'cluster-autoscaler.kubernetes.io/pod-scale-up-delay'"); a value ``time.ParseDuration``
refuses, or below the flag (0), is logged and ignored."""

from __future__ import annotations

from datetime import timedelta

import pytest
from plan_world import NOW, World, kept_reasons, pending_codes, pending_reasons, scale_up

from spillway.local import objects as o
from spillway.model.cluster import ClusterSnapshot
from spillway.model.snapshot import Snapshot
from spillway.planner import codes, plan

DELAY = "cluster-autoscaler.kubernetes.io/pod-scale-up-delay"


def delayed_world(value: str, age_minutes: float) -> World:
    """An empty group at zero and one pending pod annotated ``value``, created ``age_minutes`` ago."""
    w = World(regions=("us-east-1",))
    w.group("cpu", "m5.2xlarge", nodes=0, max_size=10)
    w.pods("job", 1, annotations={DELAY: value}, created=NOW - timedelta(minutes=age_minutes))
    return w


def test_a_pod_younger_than_its_scale_up_delay_launches_no_node() -> None:
    result = delayed_world("10m", age_minutes=2).plan()
    assert scale_up(result) == {}
    assert pending_codes(result) == {"default/job-0": codes.SCALE_UP_DELAYED}
    reason = pending_reasons(result)["default/job-0"]
    assert DELAY in reason and "8m" in reason  # what is left of the delay


def test_a_pod_older_than_its_scale_up_delay_is_launched_for() -> None:
    result = delayed_world("10m", age_minutes=11).plan()
    assert scale_up(result) == {"cpu": (0, 1, ["default/job-0"])}


@pytest.mark.parametrize("value", ["ten minutes", "-5m", "10", ""])
def test_a_scale_up_delay_cluster_autoscaler_cannot_read_is_ignored(value: str) -> None:
    """time.ParseDuration refuses it (a number needs a unit; an empty string), or it is below the
    flag's 0: cluster-autoscaler logs it and scales up for the pod as for any other."""
    result = delayed_world(value, age_minutes=1).plan()
    assert scale_up(result) == {"cpu": (0, 1, ["default/job-0"])}


def test_a_delayed_pod_still_takes_free_room_and_keeps_the_node_it_fits() -> None:
    """The delay holds back a scale-up only: cluster-autoscaler filters out the pods that fit the
    cluster first, so a delayed pod that fits an idle node is planned there and keeps it."""
    w = World(regions=("us-east-1",))
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    w.idle_since(node, 60)
    w.pods("job", 1, annotations={DELAY: "1h"}, created=NOW - timedelta(minutes=1))
    result = w.plan()
    assert pending_codes(result) == {"default/job-0": codes.FITS_FREE_ROOM}
    assert result.drain == () or all(d.node != node for d in result.drain)
    assert node in kept_reasons(result)


def test_the_delay_survives_the_stored_snapshot() -> None:
    """The plan Lambda plans a snapshot the observe Lambda stored: the delay goes with the pod."""
    w = delayed_world("10m", age_minutes=2)
    snapshot, groups, cfg, state = w.parsed()
    stored = ClusterSnapshot.from_dict(snapshot.to_dict())
    result = plan(stored, groups, cfg, state, NOW)
    assert scale_up(result) == {}
    assert pending_codes(result) == {"default/job-0": codes.SCALE_UP_DELAYED}
    later = plan(stored, groups, cfg, state, NOW + timedelta(minutes=9))
    assert scale_up(later) == {"cpu": (0, 1, ["default/job-0"])}


def test_a_bound_pod_keeps_no_delay_in_the_snapshot() -> None:
    """Only a pending pod's delay can matter; a bound pod's is not stored."""
    pod = o.pod("svc-0", node_name="n1", annotations={DELAY: "10m"})
    w = World(regions=("us-east-1",))
    w.items.append(pod)
    snapshot, *_ = w.parsed()
    (info,) = snapshot.pods
    assert info.scale_up_after is None


def test_pending_too_long_counts_a_delayed_pod_from_the_end_of_its_delay() -> None:
    """The pending-too-long alarm reads how long the oldest pod has waited for a node: a pod that asked
    for none until its delay ended has waited only since then (an hour's delay paged after
    PendingAlarmMinutes, for a wait the pod's owner asked for)."""
    w = World(regions=("us-east-1",))
    w.group("cpu", "m5.2xlarge", nodes=0, max_size=10)
    w.pods("job", 1, annotations={DELAY: "1h"}, created=NOW - timedelta(minutes=40))
    snapshot, *_ = w.parsed()
    assert Snapshot.build(snapshot, (), taken_at=NOW).oldest_pending_seconds() == 0
    later = NOW + timedelta(minutes=25)
    assert Snapshot.build(snapshot, (), taken_at=later).oldest_pending_seconds() == 5 * 60
    w.pods("plain", 1, created=NOW - timedelta(minutes=12))
    snapshot, *_ = w.parsed()
    assert Snapshot.build(snapshot, (), taken_at=NOW).oldest_pending_seconds() == 12 * 60
