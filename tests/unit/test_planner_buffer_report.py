"""The plan says, per active buffer, what it holds and what it could not: a buffer no node or group can
hold (a node_selector typo, GPUs where no group has any) or one held in part (MaxSize, a tenant limit)
was silent before, its virtual pods dropped from ``pending``. (Found by an adversarial test.)"""

from __future__ import annotations

from typing import Any

from plan_world import World
from test_planner_buffers import capacity_buffer, pod_template

from spillway.config import BufferConfig
from spillway.planner import ScalingPlan
from spillway.planner.buffers import configured

BIG = {"cpu": "5", "memory": "4Gi"}  # one chunk per m5.2xlarge (7910m)


def serving(replicas: int = 6, **pod: Any) -> dict[str, Any]:
    return {"name": "serving", "pod": {**BIG, **pod}, "replicas": replicas}


def report(result: ScalingPlan) -> list[dict[str, Any]]:
    return result.to_dict().get("buffers", [])


def test_a_buffer_whose_node_selector_no_group_has_is_reported_short_with_no_group_fits() -> None:
    w = World()
    w.group("cpu", "m5.2xlarge", max_size=10, labels={"pool": "serving"})

    result = w.plan(buffers=[serving(node_selector={"pool": "servng"})])  # the typo

    assert not result.scale_up
    assert result.pending == ()  # virtual pods are still no pending pods
    (entry,) = report(result)
    assert {k: entry[k] for k in ("buffer", "replicas", "held", "launching", "short", "code")} == {
        "buffer": "config:serving",
        "replicas": 6,
        "held": 0,
        "launching": 0,
        "short": 6,
        "code": "no-group-fits",
    }
    assert entry["reason"].startswith("6 of 6 chunk(s) have no room (0 held on existing nodes")
    assert "6 no-group-fits: " in entry["reason"]


def test_a_buffer_of_gpus_where_no_group_has_any_is_reported_short_though_it_plans_no_chunk() -> None:
    w = World()
    w.group("cpu", "m5.2xlarge", nodes=1)

    result = w.plan(buffers=[{"name": "gpu", "pod": {"nvidia.com/gpu": "1"}, "replicas": 2}])

    (entry,) = report(result)
    assert (entry["buffer"], entry["held"], entry["launching"], entry["short"]) == ("config:gpu", 0, 0, 2)
    assert entry["code"] == "no-group-fits"
    assert (
        "no group's template node has room for one chunk and no node's free room has either"
        in entry["reason"]
    )


def test_a_buffer_held_in_part_says_what_it_holds_where_and_why_the_rest_is_short() -> None:
    """Six chunks of one node each, one idle node, a group of MaxSize 4: one held on the node, three on
    new nodes, two short at MaxSize (past what the cluster could ever hold: never planned)."""
    w = World()
    w.group("cpu", "m5.2xlarge", nodes=1, max_size=4)

    result = w.plan(buffers=[serving()])

    assert result.scale_up[0].to_size == 4
    (entry,) = report(result)
    assert (entry["held"], entry["launching"], entry["short"], entry["code"]) == (1, 3, 2, "max-size")
    assert "(1 held on existing nodes, 3 on capacity launching or launched by this plan)" in entry["reason"]


def test_a_capacity_buffer_a_tenant_limit_holds_back_is_reported_short_with_the_limit_code() -> None:
    w = World()
    w.group("cpu", "m5.2xlarge", max_size=10)
    w.namespace("web")
    pod_template(w, "web")  # 3 CPUs: two chunks per node
    capacity_buffer(w, "headroom", "web", {"podTemplateRef": {"name": "tpl"}, "replicas": 8})

    result = w.plan(tenants={"web": {"limits": {"nodes": 2}}})

    (entry,) = report(result)
    assert (entry["buffer"], entry["replicas"], entry["launching"], entry["short"]) == (
        "web/headroom",
        8,
        4,
        4,
    )
    assert entry["code"] == "tenant-limit"
    assert "4 tenant-limit: " in entry["reason"]


def test_chunks_past_what_the_cluster_could_hold_are_short_for_what_held_the_last_planned_one() -> None:
    """Eight chunks of a node each, a group of MaxSize 5, max_nodes_total 3: five planned (the room
    bound), three launched, two held by the limit; the three never planned are held by it too."""
    w = World()
    w.group("cpu", "m5.2xlarge", max_size=5)

    result = w.plan(buffers=[serving(8)], max_nodes_total=3)

    (entry,) = report(result)
    assert (entry["launching"], entry["short"], entry["code"]) == (3, 5, "cluster-limit")
    assert "5 cluster-limit: " in entry["reason"]


def test_the_short_chunks_code_is_the_one_most_of_them_got_and_the_reason_names_each_first_seen() -> None:
    from spillway.planner.buffers import _hold  # in here: the other tests run against a build without it

    info = configured(BufferConfig.model_validate(serving(7)))
    why = [
        ("max-size", "a", 1),
        ("tenant-limit", "b", 1),
        ("tenant-limit", "c", 1),
        ("max-size", "d", 1),
        ("x", "e", 1),
    ]

    hold = _hold(info, 1, 1, why)

    assert (hold.short, hold.code) == (5, "max-size")  # two each: the first seen wins the tie
    assert hold.reason.endswith(": 2 max-size: a; 2 tenant-limit: b; 1 x: e")


def test_a_buffer_wholly_held_has_no_code_and_no_buffer_means_no_section() -> None:
    w = World()
    nodes = w.group("cpu", "m5.2xlarge", nodes=2)
    for node in nodes:
        w.idle_since(node, 60)

    result = w.plan(buffers=[serving(2)])

    assert report(result) == [
        {
            "buffer": "config:serving",
            "replicas": 2,
            "held": 2,
            "launching": 0,
            "short": 0,
            "code": None,
            "reason": "all 2 chunk(s) have room: 2 held on existing nodes, 0 on capacity launching or launched "
            "by this plan",
        }
    ]
    assert "buffers" not in w.plan().to_dict()
    closed = {**serving(2), "windows": [{"days": ["sun"], "start": "00:00", "end": "00:01"}]}
    assert "buffers" not in w.plan(buffers=[closed]).to_dict()  # NOW is no Sunday midnight: not active


def test_a_buffer_whose_only_group_is_backed_off_is_reported_short_with_backed_off() -> None:
    w = World()
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1)
    w.idle_since(node, 60)
    w.state["groups"] = {
        "us-east-1/cpu": {
            "group": "cpu",
            "region": "us-east-1",
            "backoff_until": "2026-11-02T12:30:00Z",
            "reason": "x",
        }
    }

    result = w.plan(buffers=[serving(3)])

    assert not result.scale_up
    (entry,) = report(result)
    assert (entry["held"], entry["launching"], entry["short"], entry["code"]) == (1, 0, 2, "backed-off")


def test_a_buffer_of_two_billion_chunks_no_group_can_hold_is_counted_not_listed() -> None:
    """replicas is an int32: the chunks past what the cluster could hold are counted, never one entry
    each (two billion of them took the plan past the Lambda's memory)."""
    w = World()
    w.group("cpu", "m5.2xlarge", max_size=2)

    result = w.plan(buffers=[serving(2**31 - 1, node_selector={"pool": "servng"})])

    (entry,) = report(result)
    assert (entry["short"], entry["code"]) == (2**31 - 1, "no-group-fits")
    assert entry["reason"].startswith(f"{2**31 - 1} of {2**31 - 1} chunk(s) have no room")


def test_a_chunk_whose_node_the_plan_drains_is_short_with_the_drains_code_not_held() -> None:
    """A scheduled action drains the idle node whose free room held the buffer's one chunk (the buffer's
    room is the lowest of all demand: test_scheduled_shrink). The report said ``held`` 1, short 0, for
    room the same plan takes away; the chunk is short, with the drain's code and its node named."""
    from dataclasses import replace

    from test_scheduled_shrink import EVENING, MOVABLE, ROOM, planned, web

    world, (idle, *busy) = web()
    for i, node in enumerate(busy):
        world.pods(f"r{i}", 2, cpu="2", memory="1Gi", node_name=node, owner=("ReplicaSet", f"r{i}"),
                   annotations=MOVABLE)  # fmt: skip
    world.idle_since(idle, 2)
    assert report(planned(world, {}, buffers=[ROOM]))[0]["held"] == 1  # without the action: held

    result = planned(world, {"scheduled": (replace(EVENING, desired=3),)}, buffers=[ROOM])

    assert [d.node for d in result.drain] == [idle]
    (entry,) = report(result)
    assert (entry["held"], entry["launching"], entry["short"], entry["code"]) == (0, 0, 1, "scheduled-shrink")
    assert f"1 scheduled-shrink: its room on {idle} goes with the node: the plan drains it" in entry["reason"]


def test_chunks_past_the_bound_take_the_last_planned_chunks_code_only_when_that_one_is_short() -> None:
    """Of two planned chunks the first is short (a tenant limit) and the last held: the three past the
    room bound are short for the bound's reason (max-size), not for the first chunk's limit, as the
    README says. They were counted as the last short chunk's: ``tenant-limit`` 4, its code."""
    from types import SimpleNamespace

    from spillway.planner.buffers import _tally, virtual_pod

    info = configured(BufferConfig.model_validate(serving(5)))
    first, last = virtual_pod(info, 0), virtual_pod(info, 1)
    ctx: Any = SimpleNamespace(nodes={"n1": object()}, buffer_left={first: ("tenant-limit", "limit")})

    hold = _tally(ctx, (info, 2, ("max-size", "past the bound")), {last: "n1"}, {})

    assert (hold.held, hold.launching, hold.short, hold.code) == (1, 0, 4, "max-size")
    assert hold.reason.endswith(": 3 max-size: past the bound; 1 tenant-limit: limit")
