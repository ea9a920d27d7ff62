"""A pool back-off remembers how many nodes EC2 refused at once (``nodes``): a gang's instant fleet asks
for all of its nodes or none (MinTargetCapacity), so its refusal says EC2 had not that many at once, not
that it had none. It holds back launches that ask as much all at once (gangs of as many nodes or more),
not a one-node raise of another group, nor a smaller gang. A back-off without ``nodes`` (a failed
scale-up, a Spot interruption, any item written before the field) is "EC2 had none": it holds back
everything, as before."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from plan_world import NOW, World, pending_codes, pending_reasons, scale_up

from spillway.errors import InputError
from spillway.inputs import load_state

BIG = {"cpu": "5", "memory": "4Gi"}  # one per m5.2xlarge
COSCHED = "scheduling.x-k8s.io/v1alpha1"
POOL = "on-demand/us-east-1a/m5.2xlarge"
UNTIL = (NOW + timedelta(minutes=10)).isoformat()


def refused(nodes: int | None) -> dict[str, Any]:
    """The pool's back-off, as the state holds it: written by a gang of ``nodes`` (None: no field)."""
    entry: dict[str, Any] = {
        "backoff_until": UNTIL,
        "reason": "gang default/big: InsufficientInstanceCapacity",
    }
    return {POOL: entry | ({"nodes": nodes} if nodes is not None else {})}


def fleet_group(w: World, name: str, max_size: int = 70, **group: Any) -> None:
    """A fleet-mode gang group of m5.2xlarge (``group``: more of World.group's arguments, e.g. zones)."""
    w.group(name, "m5.2xlarge", max_size=max_size, **group)
    w.groups[name]["Tags"].append(
        {"ResourceId": name, "ResourceType": "auto-scaling-group", "Key": "spillway.io/atomic-launch",
         "Value": "fleet", "PropagateAtLaunch": False}
    )  # fmt: skip


def gang(w: World, name: str, size: int) -> list[str]:
    w.pod_group(COSCHED, name, spec={"minMember": size})
    return w.pods(name, size, labels={"scheduling.x-k8s.io/pod-group": name}, **BIG)


def test_a_big_gangs_refusal_does_not_hold_back_a_one_node_scale_up_of_another_group_in_the_pool() -> None:
    """EC2 could not give a 64-node gang 64 at once in us-east-1a: that says nothing of one node, which
    an Auto Scaling group's raise takes if there is one. Before, the back-off skipped every group of
    m5.2xlarge there (or spilled it to the secondary region) though EC2 would have given a node."""
    w = World()
    w.group("web", "m5.2xlarge")
    pods = w.pods("web", 1, **BIG)
    w.state["pools"] = refused(64)

    result = w.plan()

    assert scale_up(result) == {"web": (0, 1, pods)}, [p.reason for p in result.pending]
    # it is no evidence about this launch, so the reason does not offer it as one
    assert "backed off" not in result.scale_up[0].reason
    assert result.state.pools[POOL].nodes == 64  # kept for the gangs it holds back


def test_a_big_gangs_refusal_does_not_hold_back_a_smaller_gang() -> None:
    w = World()
    fleet_group(w, "fleet")
    pods = gang(w, "small", 8)
    w.state["pools"] = refused(64)

    result = w.plan()

    assert scale_up(result) == {"fleet": (0, 8, sorted(pods))}, [p.reason for p in result.pending]
    assert "backed off" not in result.scale_up[0].reason


def test_a_gangs_refusal_holds_back_a_gang_as_big_or_bigger() -> None:
    w = World()
    fleet_group(w, "fleet")
    pods = gang(w, "big", 64)
    w.state["pools"] = refused(64)

    result = w.plan()

    assert scale_up(result) == {}
    assert {pending_codes(result)[p] for p in pods} == {"backed-off"}
    reason = pending_reasons(result)[pods[0]]
    assert "on-demand m5.2xlarge in us-east-1a backed off" in reason
    assert "64" in reason, reason
    # a refusal of 32 at once holds back 64 at once too
    w.state["pools"] = refused(32)
    assert scale_up(w.plan()) == {}


def test_a_big_gang_held_back_from_a_pool_goes_to_another_group_that_launches_elsewhere() -> None:
    w = World()
    fleet_group(w, "fleet-a")
    fleet_group(w, "fleet-b", zones=["us-east-1b"])
    pods = gang(w, "big", 64)
    w.state["pools"] = refused(64)

    result = w.plan()

    assert scale_up(result) == {"fleet-b": (0, 64, sorted(pods))}, [p.reason for p in result.pending][:1]


def test_a_back_off_without_nodes_holds_back_every_launch_as_before() -> None:
    """An item written before the field, a failed scale-up, a Spot interruption: EC2 had none to give."""
    w = World()
    w.group("web", "m5.2xlarge")
    web = w.pods("web", 1, **BIG)
    fleet_group(w, "fleet")
    small = gang(w, "small", 8)
    w.state["pools"] = refused(None)

    result = w.plan()

    assert scale_up(result) == {}
    assert {pending_codes(result)[p] for p in [*web, *small]} == {"backed-off"}
    assert result.state.pools[POOL].nodes == 1
    assert "nodes" not in result.state.to_wire()["pools"][POOL]  # the wire form of before
    w.state["pools"] = refused(1)
    assert scale_up(w.plan()) == {}


def test_a_state_file_gives_a_pools_nodes_and_one_that_is_no_count_is_refused_naming_it(
    tmp_path: Path,
) -> None:
    """``spillway plan --state``: what the state table's items load as, ``nodes`` and all."""
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"pools": refused(64)}))
    assert load_state(path).pools[POOL].nodes == 64
    path.write_text(json.dumps({"pools": refused(0)}))
    with pytest.raises(InputError) as err:
        load_state(path)
    assert str(err.value) == f"{path}: pools.{POOL}.nodes: Input should be greater than or equal to 1"


ZONE_TOPOLOGY = {"kueue.x-k8s.io/podset-required-topology": "topology.kubernetes.io/zone"}


@pytest.mark.parametrize(("size", "zone"), [(64, "us-east-1b"), (8, "us-east-1a")])
def test_a_gang_kept_to_one_zone_skips_a_zone_held_back_for_gangs_as_big(size: int, zone: str) -> None:
    """Its fleet asks for one zone's subnets: a 64-node gang goes to us-east-1b, past the pool that
    refused 64 at once; an 8-node gang is kept to us-east-1a as if nothing were backed off."""
    w = World()
    fleet_group(w, "fleet", zones=["us-east-1a", "us-east-1b"], suspended=["AZRebalance"])
    w.pod_group(COSCHED, "train", spec={"minMember": size})
    labels = {"scheduling.x-k8s.io/pod-group": "train"}
    pods = w.pods("train", size, labels=labels, annotations=ZONE_TOPOLOGY, **BIG)
    w.state["pools"] = refused(64)

    result = w.plan()

    assert scale_up(result) == {"fleet": (0, size, sorted(pods))}, [p.reason for p in result.pending][:1]
    [launch] = result.scale_up[0].gangs
    assert launch.zone == zone


def test_a_gang_launching_where_some_pools_are_held_back_for_it_says_so_in_its_groups_reason() -> None:
    """A fleet over two zones cannot be steered off one (its zone is EC2's pick): it launches, and the
    reason names the pool held back for gangs as big, as a raise's reason names pools backed off."""
    w = World()
    fleet_group(w, "fleet", zones=["us-east-1a", "us-east-1b"], suspended=["AZRebalance"])
    pods = gang(w, "big", 64)
    w.state["pools"] = refused(64)

    result = w.plan()

    assert scale_up(result) == {"fleet": (0, 64, sorted(pods))}
    assert "on-demand m5.2xlarge in us-east-1a backed off for gangs of 64 nodes or more" in (
        result.scale_up[0].reason
    )
