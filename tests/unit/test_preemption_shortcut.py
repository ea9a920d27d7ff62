"""preemption.one_fits_below: the test place_by_preemption passes every node through before it builds
the node's room gives the answer that room gives, so skipping a node it refuses changes no decision."""

from __future__ import annotations

import random
from dataclasses import replace

from spillway.model.cluster import NodeInfo
from spillway.model.resources import (
    ATTACH_LIMIT_PREFIX,
    EPHEMERAL,
    add_room,
    fit_count,
    unchecked_when_unknown,
)
from spillway.planner.context import Victim, WorkNode
from spillway.planner.preemption import ceiling_of, one_fits_below, room_below

GPU = "nvidia.com/gpu"
ATTACH = ATTACH_LIMIT_PREFIX + "ebs.csi.aws.com"
# checked everywhere (cpu, a GPU), or only where the node reports it (ephemeral storage, attach limits)
NAMES = ("cpu", "memory", GPU, EPHEMERAL, ATTACH)


def _amounts(rng: random.Random, low: int) -> dict[str, int]:
    """Some of the resources, at amounts around one another's (some 0, some negative)."""
    return {name: rng.randint(low, 6) * 500 for name in NAMES if rng.random() < 0.6}


def _node(rng: random.Random) -> WorkNode:
    node = WorkNode(info=NodeInfo(name="n", allocatable={}), group=None, free=_amounts(rng, -2))
    for i in range(rng.randint(0, 4)):
        requests = _amounts(rng, 0)
        node.victims.append(Victim(f"ns/v{i}", rng.choice((-100, -50, -20, 0)), requests, rng.random() < 0.3))
    node.victims.sort(key=lambda v: (v.priority, v.pod))
    return node


def test_one_fits_below_answers_as_the_room_below_does() -> None:
    rng = random.Random(7)
    answers = set()
    for _ in range(20_000):
        node = _node(rng)
        requests = _amounts(rng, -1)
        priority = rng.choice((-60, -30, 0, 10))
        expected = fit_count(requests, room_below(node, priority), 1) > 0
        assert one_fits_below(node, requests, priority) == expected, (node.free, node.victims, requests)
        answers.add(expected)
    assert answers == {True, False}  # both answers were met


def _pool(rng: random.Random) -> list[WorkNode]:
    return [_node(rng) for _ in range(rng.randint(1, 4))]


def _stage_mutates(rng: random.Random, node: WorkNode) -> None:
    """What the scale-up stage does to a node after the ceiling is taken: pods placed in its free room,
    or a preemption (victims' room freed, the preemptors' taken), after which a victim left may have a
    larger share of an attach limit (another user of its volume is gone: Context.share_victims)."""
    requests = {k: v for k, v in _amounts(rng, 0).items() if k in node.free or not unchecked_when_unknown(k)}
    if node.victims and rng.random() < 0.5:
        for victim in rng.sample(node.victims, rng.randint(1, len(node.victims))):
            node.victims.remove(victim)
            add_room(node.free, victim.requests)
        node.victims = [
            replace(v, requests={**v.requests, ATTACH: v.requests.get(ATTACH, 0) + 1000})
            if rng.random() < 0.5
            else v
            for v in node.victims
        ]
    add_room(node.free, requests, -1)


def test_a_pool_whose_ceiling_holds_no_pod_has_no_node_one_fits_on() -> None:
    """ceiling_of: a pool whose ceiling one pod does not fit in is passed over whole by
    place_by_preemption; no node of it may hold one pod with its victims of lower priority gone, for any
    priority, also after the stage places pods on its nodes and preempts there."""
    rng = random.Random(11)
    answers = set()
    for _ in range(5_000):
        nodes = _pool(rng)
        ceiling = ceiling_of(nodes)
        for _ in range(rng.randint(0, 3)):
            _stage_mutates(rng, rng.choice(nodes))
        requests = _amounts(rng, -1)
        priority = rng.choice((-60, -30, 0, 10))
        some_node = any(one_fits_below(n, requests, priority) for n in nodes)
        skipped = fit_count(requests, ceiling, 1) == 0
        assert not (skipped and some_node), (ceiling, [(n.free, n.victims) for n in nodes], requests)
        answers.add((skipped, some_node))
    assert answers == {(True, False), (False, True), (False, False)}  # skipped, and not, were both met
