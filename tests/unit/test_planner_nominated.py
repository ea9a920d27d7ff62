"""Pods waiting for preemption (status.nominatedNodeName), as cluster-autoscaler and kube-scheduler see
them: nominated to a node that exists, a pod is not scaled for; nominated to a node that is gone, it is
an ordinary pending pod."""

from __future__ import annotations

from plan_world import World, pending_codes, scale_up

from spillway.local import objects as o
from spillway.planner import codes


def test_a_pod_nominated_to_a_node_that_is_gone_triggers_scale_up() -> None:
    """cluster-autoscaler's FilterOutExpendableAndSplit: a nomination to a node no longer in the cluster
    (reclaimed, scaled down) is no preemption under way; kube-scheduler does not clear it when a later
    attempt finds nothing to preempt, so the pod would wait for good."""
    w = World(regions=("us-east-1",))
    w.group("cpu", "m5.2xlarge", nodes=0, max_size=5)
    (pod,) = w.pods("train", 1, cpu="2", memory="2Gi", priority=1000)
    w.pod_item(pod)["status"]["nominatedNodeName"] = "ip-10-0-0-1.ec2.internal"  # not in the cluster

    result = w.plan()

    assert pod in scale_up(result).get("cpu", (0, 0, []))[2], pending_codes(result)


def test_a_pod_nominated_to_an_existing_node_is_not_scaled_for() -> None:
    w = World(regions=("us-east-1",))
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=5)
    w.items.append(
        o.pod("low-0", cpu="7", memory="2Gi", node_name=node, priority=-5, owner=("ReplicaSet", "low"))
    )
    (pod,) = w.pods("train", 1, cpu="2", memory="2Gi", priority=1000)
    w.pod_item(pod)["status"]["nominatedNodeName"] = node

    result = w.plan()

    assert pending_codes(result)[pod] == codes.NOMINATED
    assert result.scale_up == ()
