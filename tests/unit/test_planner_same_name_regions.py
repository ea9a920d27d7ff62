"""Several regions: managed groups of one name in two regions.

An Auto Scaling group's name is unique only within its region (CreateAutoScalingGroup refuses a second
group of one name in one account and region only): per-region stacks often call the GPU group ``gpu``
in both. A group is keyed by (region, name) in the plan, its state and the ledger, so each such group is
planned on its own: its new nodes, Ready nodes, raises, back-offs and MinSize are its own. Before, the
plan keyed by name and refused every such group after the first region's (``refused_groups``,
"rename one of them"), so a cluster spilling over to a second region of the same group name could not.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from plan_world import NOW, World, pending_codes

from spillway.adapters.state_store import Backoff, merge_backoffs
from spillway.model.state import State
from spillway.planner import plan

REGION = "topology.kubernetes.io/region"
EAST, WEST = "us-east-1", "us-west-2"


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


def test_pods_the_primarys_group_at_max_size_cannot_take_go_to_the_group_of_that_name_in_the_next_region() -> (
    None
):
    """Five pending 1-GPU pods; ``gpu`` (g5.xlarge, one GPU a node) in us-east-1 (primary) has room for
    three, ``gpu`` in us-west-2 for four. README (What the planner decides, 4): the primary's group
    first, what does not fit goes on to the next group. So us-east-1's grows 0 -> 3 and us-west-2's
    0 -> 2, each listing its own pods. The plan refused us-west-2's ``gpu`` as a same-named group: two
    pods waited, a region's GPU group empty."""
    w = World()
    twin(w, "gpu", EAST, "g5.xlarge", gpu_taint=True, max_size=3)
    twin(w, "gpu", WEST, "g5.xlarge", gpu_taint=True, max_size=4)
    pods = w.gpu_pods("job", 5, gpus=1, cpu="1", memory="1Gi")

    result = w.plan()

    assert grown(result) == {(EAST, "gpu"): (0, 3, pods[:3]), (WEST, "gpu"): (0, 2, pods[3:])}
    assert result.refused_groups == () and result.pending == ()
    assert [(s.group, s.region) for s in result.scale_up] == [("gpu", EAST), ("gpu", WEST)]


def test_a_back_off_of_one_group_does_not_hold_the_group_of_that_name_in_the_other_region() -> None:
    """us-east-1's ``gpu`` failed to launch for capacity: the scale-up execution backs it off in the
    ledger, naming its region (state_store.merge_backoffs). us-west-2's ``gpu`` is another group, not
    backed off: the pods overflow to it (README: "pending work overflows meanwhile"). And the other way
    round: a back-off of us-west-2's holds nothing back in us-east-1."""
    w = World()
    twin(w, "gpu", EAST, "g5.xlarge", gpu_taint=True, max_size=4)
    twin(w, "gpu", WEST, "g5.xlarge", gpu_taint=True, max_size=4)
    pods = w.gpu_pods("job", 2, gpus=1, cpu="1", memory="1Gi")
    until = NOW + timedelta(minutes=10)
    snapshot, groups, config, _ = w.parsed()

    east_off = merge_backoffs(State(), [Backoff("gpu", until, "ICE in us-east-1", region=EAST)], NOW)
    west_off = merge_backoffs(State(), [Backoff("gpu", until, "ICE in us-west-2", region=WEST)], NOW)

    result = plan(snapshot, groups, config, east_off, NOW)
    assert grown(result) == {(WEST, "gpu"): (0, 2, pods)}
    assert "gpu backed off until" in result.scale_up[0].reason
    assert set(result.state.groups) == {"us-east-1/gpu"}  # the back-off is carried on, its region's
    assert grown(plan(snapshot, groups, config, west_off, NOW)) == {(EAST, "gpu"): (0, 2, pods)}


def test_ready_nodes_are_counted_for_the_group_of_their_own_region() -> None:
    """Two pending 1-GPU pods pinned to us-west-2 (``nodeSelector topology.kubernetes.io/region``);
    us-east-1's ``gpu`` has 2 busy nodes, us-west-2's ``gpu`` is already launching 2 (desired 2, no node
    yet). README: the pods fit the capacity launching in us-west-2 (``fits-launching``); nothing grows.
    Counted by name, us-east-1's Ready nodes were us-west-2's: nothing seemed to be launching there."""
    w = World()
    east = twin(w, "gpu", EAST, "g5.xlarge", gpu_taint=True, max_size=4, nodes=2)
    twin(w, "gpu", WEST, "g5.xlarge", gpu_taint=True, max_size=4, desired=2)
    for i, node in enumerate(east):
        w.gpu_pods(f"busy{i}", 1, gpus=1, cpu="1", memory="1Gi", node_name=node, phase="Running")
    pods = w.gpu_pods("job", 2, gpus=1, cpu="1", memory="1Gi", node_selector={REGION: WEST})

    result = w.plan()

    assert grown(result) == {}
    assert pending_codes(result) == {pod: "fits-launching" for pod in pods}


def test_each_group_of_one_name_keeps_its_own_min_size_when_idle_nodes_are_drained() -> None:
    """``gpu`` in each region: desired 2, MinSize 1, both nodes idle past the threshold. Each group may
    lose one node (2 -> MinSize 1), so the plan drains one in each. Counted by name, the first drain
    left the second group "at MinSize 1" (2 less the other group's drain) and it kept both nodes."""
    w = World()
    east = twin(w, "gpu", EAST, "g5.xlarge", gpu_taint=True, min_size=1, max_size=4, nodes=2)
    west = twin(w, "gpu", WEST, "g5.xlarge", gpu_taint=True, min_size=1, max_size=4, nodes=2)
    for node in (*east, *west):
        w.idle_since(node, 60)

    result = w.plan(max_scale_in_fraction=1.0)

    assert sorted((d.region, d.group) for d in result.drain) == [(EAST, "gpu"), (WEST, "gpu")]
    assert {k.node: k.code for k in result.kept} == {
        node: "min-size" for node in (*east, *west) if node not in {d.node for d in result.drain}
    }


def test_state_written_keyed_by_name_is_read_as_the_first_regions_group_of_that_name() -> None:
    """After the deploy, the state a build keyed by name stored is read as it meant it: it planned only
    the group of the name in the first region of ``regions`` (here us-west-2, listed first), so its
    back-off ``groups.gpu`` holds that group back, and us-east-1's ``gpu`` takes the pods; the next
    state keeps the back-off under that group's key. The old ledger item ``backoff#gpu`` (no ``group``)
    is read the same way."""
    w = World(regions=(WEST, EAST))
    twin(w, "gpu", EAST, "g5.xlarge", gpu_taint=True, max_size=4)
    twin(w, "gpu", WEST, "g5.xlarge", gpu_taint=True, max_size=4)
    pods = w.gpu_pods("job", 2, gpus=1, cpu="1", memory="1Gi")
    until = NOW + timedelta(minutes=10)
    w.state["groups"]["gpu"] = {"backoff_until": until.isoformat(), "reason": "ICE"}  # the old wire form

    result = w.plan()

    assert grown(result) == {(EAST, "gpu"): (0, 2, pods)}
    assert "gpu backed off until" in result.scale_up[0].reason
    ((key, entry),) = result.state.groups.items()
    assert (key, entry.group, entry.region, entry.reason) == ("us-west-2/gpu", "gpu", WEST, "ICE")

    snapshot, groups, config, _ = w.parsed()
    old_item = merge_backoffs(State(), [Backoff("gpu", until, "ICE")], NOW)  # backoff#gpu: no group
    assert grown(plan(snapshot, groups, config, old_item, NOW)) == {(EAST, "gpu"): (0, 2, pods)}


def test_a_raise_stored_keyed_by_name_is_the_first_regions_group_of_that_name() -> None:
    """The older build raised us-east-1's ``gpu`` 0 -> 2 (``raises.gpu``); the snapshot does not show it
    yet. Read as us-east-1's raise, the two pending pods fit its capacity launching; us-west-2's ``gpu``
    launches nothing for them."""
    w = World()
    twin(w, "gpu", EAST, "g5.xlarge", gpu_taint=True, max_size=4)
    twin(w, "gpu", WEST, "g5.xlarge", gpu_taint=True, max_size=4)
    pods = w.gpu_pods("job", 2, gpus=1, cpu="1", memory="1Gi")
    w.state["raises"] = {"gpu": {"to": 2, "since": (NOW - timedelta(minutes=1)).isoformat()}}

    result = w.plan()

    assert grown(result) == {}
    assert pending_codes(result) == {pod: "fits-launching" for pod in pods}
    assert set(result.state.raises) == {"us-east-1/gpu"}


def test_a_disruption_budget_naming_the_group_binds_each_group_of_that_name_on_its_own() -> None:
    """A budget is written by group name (``groups: [gpu]``, at most 1 node at once, README
    ``disruption_budgets``), and binds each group it names (DisruptionBudget: "of each group in
    groups"). ``gpu`` in each region has 3 idle nodes: one drain in each, not one for both, and not
    none for the second because the first's drain was counted as its own."""
    w = World()
    east = twin(w, "gpu", EAST, "g5.xlarge", gpu_taint=True, max_size=4, nodes=3)
    west = twin(w, "gpu", WEST, "g5.xlarge", gpu_taint=True, max_size=4, nodes=3)
    for node in (*east, *west):
        w.idle_since(node, 60)

    result = w.plan(max_scale_in_fraction=1.0, disruption_budgets=[{"nodes": "1", "groups": ["gpu"]}])

    assert sorted((d.region, d.group) for d in result.drain) == [(EAST, "gpu"), (WEST, "gpu")]
    assert {k.code for k in result.kept} == {"disruption-budget"}
