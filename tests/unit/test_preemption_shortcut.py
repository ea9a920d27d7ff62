"""preemption.one_fits_below: the test place_by_preemption passes every node through before it builds
the node's room gives the answer that room gives, so skipping a node it refuses changes no decision."""

from __future__ import annotations

import random

from spillway.model.cluster import NodeInfo
from spillway.model.resources import ATTACH_LIMIT_PREFIX, EPHEMERAL, fit_count
from spillway.planner.context import Victim, WorkNode
from spillway.planner.preemption import one_fits_below, room_below

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
