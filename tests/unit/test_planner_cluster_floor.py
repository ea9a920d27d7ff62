"""The minimums of the cluster totals (``cores_total``, ``memory_total``, ``gpu_total``: cluster-autoscaler's
``--cores-total``, ``--memory-total``, ``--gpu-total`` ``<min>:<max>``): scale-down removes no node that
would leave the cluster below one, as cluster-autoscaler's scale-down resource limits keep such a node
(``MinimalResourceLimitExceeded``). Cores and memory are the nodes' ``status.capacity`` (an m5.2xlarge
has 8 cores and 31Gi), GPUs their allocatable, by kind.
"""

from __future__ import annotations

from typing import Any

from plan_world import World
from test_planner_consolidation import UNDER, half_full

from spillway.model.k8s import CANDIDATE_TAINT
from spillway.planner import ScalingPlan, codes

ALL_AT_ONCE: dict[str, Any] = {"max_scale_in_fraction": 1.0}


def idle_cpu_nodes(count: int) -> tuple[World, list[str]]:
    w = World(regions=("us-east-1",))
    nodes = w.group("cpu", "m5.2xlarge", nodes=count, max_size=10)
    for n in nodes:
        w.idle_since(n, 60)
    return w, nodes


def kept_at_floor(result: ScalingPlan) -> dict[str, str]:
    return {k.node: k.reason for k in result.kept if k.code == codes.CLUSTER_MIN}


def test_idle_nodes_are_removed_down_to_the_cores_minimum_and_no_further() -> None:
    w, nodes = idle_cpu_nodes(5)  # 40 cores

    result = w.plan(cores_total="24:1000", **ALL_AT_ONCE)

    assert len(result.drain) == 2  # 40 -> 24 cores
    held = kept_at_floor(result)
    assert len(held) == 3 and set(held) | {d.node for d in result.drain} == set(nodes)
    assert next(iter(held.values())) == (
        "removing it would take the cluster below cluster cores_total minimum cpu=24 (cpu=24 now, cpu=8 on "
        "this node)"
    )
    # The minimum is what binds: with a minimum of 0 (only a maximum) every idle node goes.
    assert len(w.plan(cores_total="0:1000", **ALL_AT_ONCE).drain) == 5


def test_memory_minimum_is_in_gib_of_capacity() -> None:
    w, _ = idle_cpu_nodes(4)  # 4 x 31Gi = 124Gi

    assert len(w.plan(memory_total="62:1000", **ALL_AT_ONCE).drain) == 2
    assert len(w.plan(memory_total="63:1000", **ALL_AT_ONCE).drain) == 1


def test_a_gpu_minimum_of_one_kind_keeps_gpu_nodes_of_that_kind_only() -> None:
    w = World(regions=("us-east-1",))
    accelerator = {"k8s.amazonaws.com/accelerator": "nvidia-a10g"}
    gpu = w.group("gpu", "g5.12xlarge", nodes=3, max_size=10, labels=accelerator)  # 4 GPUs each
    cpu = w.group("cpu", "m5.2xlarge", nodes=2, max_size=10)
    for n in gpu + cpu:
        w.idle_since(n, 60)

    result = w.plan(gpu_total=["nvidia-a10g:8:64"], **ALL_AT_ONCE)

    drained = {d.node for d in result.drain}
    assert set(cpu) <= drained  # no GPU of that kind: the minimum does not hold them
    assert len(drained & set(gpu)) == 1 and len(kept_at_floor(result)) == 2
    assert "cluster gpu_total nvidia-a10g minimum gpus=8" in next(iter(kept_at_floor(result).values()))
    # Another kind's minimum holds none of these nodes.
    assert len(w.plan(gpu_total=["nvidia-h100:8:64"], **ALL_AT_ONCE).drain) == 5


def test_nodes_already_draining_do_not_count_toward_the_total() -> None:
    w, nodes = idle_cpu_nodes(3)  # 24 cores, one of them being drained by Spillway already
    w.cordon(nodes[0], by_spillway=True)
    w.state["nodes"][nodes[0]]["draining_since"] = w.state["nodes"][nodes[0]]["idle_since"]

    result = w.plan(cores_total="8:1000", **ALL_AT_ONCE)

    # 16 cores counted: one of the other two may go, the last is held
    assert len([d for d in result.drain if d.node != nodes[0]]) == 1
    assert len(kept_at_floor(result)) == 1


def test_a_consolidation_drain_is_held_by_the_minimum_too() -> None:
    w, (a, b) = half_full()  # two m5.2xlarge nodes: 16 cores

    assert [d.code for d in w.plan(**ALL_AT_ONCE, **UNDER).drain] == [codes.CONSOLIDATION]
    held = w.plan(cores_total="16:1000", **ALL_AT_ONCE, **UNDER)

    assert held.drain == ()
    assert set(kept_at_floor(held)) == {a, b}  # each would leave 8 cores


def test_nodes_the_minimum_will_keep_are_not_marked_as_scale_down_candidates() -> None:
    w, nodes = idle_cpu_nodes(5)  # 40 cores, all idle 3 minutes: below the idle threshold
    for n in nodes:
        w.idle_since(n, 3)

    marked = {t.node for t in w.plan(cores_total="24:1000", **ALL_AT_ONCE).soft_taint if t.add}

    # 40 -> 24 cores: only two may ever go, so only two are marked (the longest idle, then by name)
    assert len(marked) == 2
    for n in nodes:
        w.idle_since(n, 60)
    later = w.plan(cores_total="24:1000", **ALL_AT_ONCE)
    assert {d.node for d in later.drain} == marked  # the marked ones are those the plan removes
    # an already marked node that stays marked spends the room: with one of them marked, one more
    w.node(nodes[4])["spec"]["taints"] = [{"key": CANDIDATE_TAINT, "effect": "PreferNoSchedule"}]
    for n in nodes:
        w.idle_since(n, 3)
    again = {t.node for t in w.plan(cores_total="24:1000", **ALL_AT_ONCE).soft_taint if t.add}
    assert len(again) == 1 and nodes[4] not in again


def test_a_node_its_group_is_terminating_does_not_count_toward_the_total() -> None:
    """An instance its group terminates (a scale-in by somebody else, a health check replacement) is
    ``Terminating`` and cannot be put back into service (EC2 Auto Scaling User Guide, "Amazon EC2 Auto
    Scaling instance lifecycle"); a terminate lifecycle hook keeps its Node Ready meanwhile. Counted in
    the total, it let the plan drain a node the minimum needs once the group's own termination ends:
    cluster-autoscaler's total leaves out the nodes on their way out as well."""
    w, nodes = idle_cpu_nodes(3)  # 24 cores, the group terminating one of them itself
    w.groups["cpu"]["Instances"][0]["LifecycleState"] = "Terminating:Wait"
    w.groups["cpu"]["DesiredCapacity"] = 2

    result = w.plan(cores_total="8:1000", **ALL_AT_ONCE)

    assert len(result.drain) == 1 and nodes[0] not in {d.node for d in result.drain}  # 16 -> 8 cores
    assert len(kept_at_floor(result)) == 1
