"""Several regions: managed groups of one name in two regions.

An Auto Scaling group's name is unique only within its region: a cluster spanning us-east-1 and
us-west-2 may well call its GPU group ``gpu`` in both. The plan, its state and the ledger key a group by
name (new nodes, Ready nodes, raises, back-offs), so two such groups were planned as one: launching in
both for the same pods, counting one's Ready nodes as the other's, backing both off for one's failure
(found by review). Until groups are keyed by (region, name), the one in the first of ``regions`` is
planned and the others are refused, named in ``refused_groups``: never a wrong plan, and a reason that
says to rename one.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from plan_world import NOW, World, pending_codes

from spillway.adapters.state_store import Backoff, merge_backoffs
from spillway.model.state import State
from spillway.planner import plan

REGION = "topology.kubernetes.io/region"


def twin(w: World, name: str, region: str, itype: str, **kwargs: Any) -> list[str]:
    """A group called ``name`` in ``region`` (World keys its groups by name: stored as name@region)."""
    key = f"{name}@{region}"
    nodes = w.group(key, itype, region=region, **kwargs)
    asg = w.groups[key]
    asg["AutoScalingGroupName"] = name
    asg["AutoScalingGroupARN"] = asg["AutoScalingGroupARN"].replace(
        f"autoScalingGroupName/{key}", f"autoScalingGroupName/{name}"
    )
    for tag in asg.get("Tags", []):
        if tag.get("ResourceId") == key:
            tag["ResourceId"] = name
    return nodes


def grown(result: Any) -> dict[tuple[str, str], tuple[int, int, list[str]]]:
    return {(s.region, s.group): (s.from_size, s.to_size, list(s.pods)) for s in result.scale_up}


def refused(result: Any) -> dict[tuple[str, str], str]:
    return {(r.region, r.group): r.reason for r in result.refused_groups}


def test_of_same_named_groups_in_two_regions_one_class_grows_the_primarys_only() -> None:
    """Two pending 1-GPU pods; a ``gpu`` group of g5.xlarge in us-east-1 (primary) and one of the same
    name in us-west-2, both empty with room. README (What the planner decides, 4): new nodes go to the
    groups ranked by region preference, the primary first; what does not fit goes on to the next group.
    So us-east-1's ``gpu`` grows 0 -> 2 and nothing in us-west-2. The plan keyed its new nodes by group
    name only (Context.new_nodes), so it grew both 0 -> 2, each listing both pods: four GPU nodes
    launched (and paid for) for two pods."""
    w = World()
    twin(w, "gpu", "us-east-1", "g5.xlarge", gpu_taint=True, max_size=4)
    twin(w, "gpu", "us-west-2", "g5.xlarge", gpu_taint=True, max_size=4)
    pods = w.gpu_pods("job", 2, gpus=1, cpu="1", memory="1Gi")

    result = w.plan()

    assert grown(result) == {("us-east-1", "gpu"): (0, 2, pods)}
    assert "same name is in us-east-1" in refused(result)[("us-west-2", "gpu")]
    assert "rename one" in refused(result)[("us-west-2", "gpu")]


def test_pods_pinned_to_the_overflow_region_never_grow_the_home_group_of_that_name() -> None:
    """Two pending 1-GPU pods with ``nodeSelector topology.kubernetes.io/region: us-west-2``; us-east-1's
    ``gpu`` has 2 busy nodes, us-west-2's ``gpu`` is already launching 2 (desired 2, no node yet).
    README: the pods fit the capacity launching in us-west-2 (``fits-launching``), and a pod is never
    placed where it cannot run (its nodeSelector names the region). With different names that is the
    plan; with one name us-east-1's Ready nodes were counted as us-west-2's (Context.ready_in_group is by
    name), so nothing seemed to be launching there, and the plan grew both groups 2 -> 4, us-east-1 for
    pods that cannot run in us-east-1. Now us-west-2's ``gpu`` is refused: nothing grows, and the pods
    wait, their reason naming the refused group."""
    w = World()
    east = twin(w, "gpu", "us-east-1", "g5.xlarge", gpu_taint=True, max_size=4, nodes=2)
    twin(w, "gpu", "us-west-2", "g5.xlarge", gpu_taint=True, max_size=4, desired=2)
    for i, node in enumerate(east):
        w.gpu_pods(f"busy{i}", 1, gpus=1, cpu="1", memory="1Gi", node_name=node, phase="Running")
    pods = w.gpu_pods("job", 2, gpus=1, cpu="1", memory="1Gi", node_selector={REGION: "us-west-2"})

    result = w.plan()

    assert grown(result) == {}
    assert set(pending_codes(result)) == set(pods)
    assert "fits-launching" not in pending_codes(result).values()
    assert ("us-west-2", "gpu") in refused(result) and ("us-east-1", "gpu") not in refused(result)


def test_a_back_off_in_the_primary_launches_nothing_in_the_refused_group_of_that_name() -> None:
    """us-east-1's ``gpu`` failed to launch for capacity: the scale-up execution backs it off in the
    ledger (act.backoff.back_off: item ``backoff#gpu``, region us-east-1), and the plan reads the item
    (state_store.merge_backoffs). README: "pending work overflows meanwhile" (GroupsBackedOff), demand
    spilling into the secondary region. us-west-2's ``gpu`` is another group, not backed off; the plan
    read the back-off by name alone (State.groups, groups.backoff_reason) and held both back: the pods
    stayed ``backed-off`` with an idle GPU region beside them. The limitation stays (the overflow group
    is refused until one is renamed), and is said: the pods are backed off, the other group refused."""
    w = World()
    twin(w, "gpu", "us-east-1", "g5.xlarge", gpu_taint=True, max_size=4)
    twin(w, "gpu", "us-west-2", "g5.xlarge", gpu_taint=True, max_size=4)
    pods = w.gpu_pods("job", 2, gpus=1, cpu="1", memory="1Gi")
    until = NOW + timedelta(minutes=10)
    why = "InsufficientInstanceCapacity in us-east-1"
    state = merge_backoffs(State(), [Backoff("gpu", until, why, region="us-east-1")], NOW)
    snapshot, groups, config, _ = w.parsed()

    result = plan(snapshot, groups, config, state, NOW)

    assert grown(result) == {}
    assert set(pending_codes(result).values()) == {"backed-off"}, pending_codes(result)
    assert set(pending_codes(result)) == set(pods)
    assert "rename one" in refused(result)[("us-west-2", "gpu")]


def test_groups_of_different_names_in_two_regions_are_both_planned() -> None:
    """The refusal is for one name only: ``gpu`` and ``gpu-west`` both scale, the overflow taking what
    the primary backs off."""
    w = World()
    twin(w, "gpu", "us-east-1", "g5.xlarge", gpu_taint=True, max_size=4)
    twin(w, "gpu-west", "us-west-2", "g5.xlarge", gpu_taint=True, max_size=4)
    pods = w.gpu_pods("job", 2, gpus=1, cpu="1", memory="1Gi")
    state = merge_backoffs(
        State(), [Backoff("gpu", NOW + timedelta(minutes=10), "no capacity", region="us-east-1")], NOW
    )
    snapshot, groups, config, _ = w.parsed()

    result = plan(snapshot, groups, config, state, NOW)

    assert grown(result) == {("us-west-2", "gpu-west"): (0, 2, pods)} and refused(result) == {}
