"""A zone spread within one plan, on random clusters (hypothesis; profiles as in
``test_planner_properties``): whatever the zones run (a zone may have no node yet), how far each zone's
group may grow and how many replicas wait, the plan leaves every zone it puts replicas in within ``maxSkew`` of the least loaded
zone (so kube-scheduler can bind each of them), and when no group is short of room every replica gets
a place."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from plan_world import World
from test_planner_properties import PROFILE
from test_planner_topology import ZONE, spread, spread_replica

from spillway.local import objects as o

zone_st = st.fixed_dictionaries(
    {
        "node": st.booleans(),  # the zone has a (full) node; without one it is no domain until one joins
        "running": st.integers(0, 4),  # replicas running on that node
        "grow": st.integers(0, 6),  # how many nodes its group may still add
    }
)


def _world(zones: list[dict[str, Any]], pending: int, skew: int) -> tuple[World, list[str]]:
    w = World(regions=("us-east-1",))
    for i, zone in enumerate(zones):
        name = f"us-east-1{'abcd'[i]}"
        nodes = w.group(
            f"cpu-{i}", "m5.2xlarge", nodes=int(zone["node"]), max_size=1 + zone["grow"], zones=[name]
        )
        for node in nodes:
            w.node(node)["metadata"]["labels"][ZONE] = name
            for r in range(zone["running"]):
                item = spread_replica(f"web-{i}-{r}", node)
                item["spec"]["topologySpreadConstraints"] = spread(skew=skew)
                w.items.append(item)
            w.pods(f"fill-{i}", 1, cpu="8", memory="1Gi", node_name=node)
    names = []
    for p in range(pending):
        item = spread_replica(f"new-{p}")
        item["spec"]["topologySpreadConstraints"] = spread(skew=skew)
        item["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"  # two per new node
        w.items.append(item)
        names.append(f"default/new-{p}")
    return w, names


@settings(PROFILE)
@given(
    zones=st.lists(zone_st, min_size=2, max_size=4),
    pending=st.integers(1, 24),
    skew=st.integers(1, 2),
)
def test_a_plan_keeps_every_zone_it_fills_within_max_skew(
    zones: list[dict[str, Any]], pending: int, skew: int
) -> None:
    w, names = _world(zones, pending, skew)

    result = w.plan()

    zone_of = {f"cpu-{i}": i for i in range(len(zones))}
    final = [z["running"] if z["node"] else 0 for z in zones]
    placed = [0] * len(zones)
    for p in result.placements:
        assert p.pod in names and p.group is not None
        placed[zone_of[p.group.name]] += 1
    for i in range(len(zones)):
        final[i] += placed[i]
    # the domains once the plan's nodes join: zones with a node, and zones the plan opens one in
    least = min(final[i] for i, z in enumerate(zones) if z["node"] or placed[i])
    for i, count in enumerate(placed):
        if count:
            assert final[i] - least <= skew, (final, placed)
    for s in result.scale_up:
        assert s.to_size <= 1 + zones[zone_of[s.group]]["grow"]  # MaxSize
    if all(z["grow"] * 2 >= pending for z in zones):
        assert len(result.placements) == pending, (final, placed)


def _binds_one_at_a_time(counts: list[int], placed: list[int], skew: int) -> bool:
    """Whether kube-scheduler, binding the pods one at a time, can reach ``counts + placed``: each bind
    needs its node at most ``skew`` above the least loaded node once it holds the pod (the least loaded
    first is the order that can reach any reachable end)."""
    now, want = list(counts), [c + p for c, p in zip(counts, placed, strict=True)]
    while now != want:
        open_ = [i for i in range(len(now)) if now[i] < want[i] and now[i] + 1 - min(now) <= skew]
        if not open_:
            return False
        now[min(open_, key=lambda i: now[i])] += 1
    return True


@settings(PROFILE)
@given(
    counts=st.lists(st.integers(0, 3), min_size=1, max_size=5),
    pending=st.integers(1, 12),
    skew=st.integers(1, 2),
)
def test_a_hostname_spread_uses_existing_room_as_kube_scheduler_can_bind_it(
    counts: list[int], pending: int, skew: int
) -> None:
    """Replicas spread over nodes: the plan puts on existing nodes only what kube-scheduler can bind
    there one pod at a time, and launches no node while an existing node could still take one."""
    w = World(regions=("us-east-1",))
    nodes = sorted(w.group("cpu", "m5.2xlarge", nodes=len(counts), max_size=50))
    spread = [{"maxSkew": skew, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "web"}}}]  # fmt: skip

    def replica(name: str, node: str | None) -> dict[str, Any]:
        item = o.pod(name, cpu="100m", memory="64Mi", node_name=node, owner=("ReplicaSet", "web-1"),
                     labels={"app": "web"})  # fmt: skip
        item["spec"]["topologySpreadConstraints"] = spread
        return item

    for node, count in zip(nodes, counts, strict=True):
        w.items += [replica(f"run-{node[:12]}-{i}", node) for i in range(count)]
    w.items += [replica(f"new-{i}", None) for i in range(pending)]

    result = w.plan()

    placed = [sum(p.node == node for p in result.placements) for node in nodes]
    assert _binds_one_at_a_time(counts, placed, skew)
    launched = sum(s.to_size - s.from_size for s in result.scale_up)
    if launched:  # no existing node could take one more
        end = [c + p for c, p in zip(counts, placed, strict=True)]
        assert all(e + 1 - min(end) > skew for e in end)
