"""place_by_preemption passes over a pool of nodes with expendable pods whole when its ceiling holds no
pod of the class or the class's constraints rule its shape out: on random clusters the plan is the one
a pass over every node gives."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from plan_world import GPU_TOLERATION, World

from spillway.local import objects as o
from spillway.planner import codes, preemption, scaleup
from spillway.planner.classes import PodClass
from spillway.planner.context import Context, WorkNode
from spillway.planner.preemption import VictimPool

TYPES = (("cpu-a", "m5.2xlarge", False), ("cpu-b", "m5.xlarge", False), ("gpu", "g5.12xlarge", True))


def every_node(ctx: Context, cls: PodClass, pools: Any, where: Any) -> None:
    """The pass before the pools' shortcut: each node with victims in turn."""
    if not cls.preempts:
        return
    victims: VictimPool
    for victims in pools:
        node: WorkNode
        for node in victims.nodes:
            if not cls.remaining:
                return
            if where(node):
                preemption._place_on(ctx, cls, victims.pool, node)


def _world(rng: random.Random) -> World:
    w = World(regions=("us-east-1",))
    for name, itype, gpu in TYPES:
        for pool in ("a", "b"):
            nodes = w.group(
                f"{name}-{pool}", itype, nodes=rng.randint(0, 3), max_size=20, gpu_taint=gpu,
                labels={"team": pool},
            )  # fmt: skip
            for node in nodes:
                for i in range(rng.randint(0, 4)):
                    cpu = rng.choice(("500m", "1", "2", "3"))
                    priority = rng.choice((-100, -50, -20, 0))
                    w.items.append(
                        o.pod(
                            f"run-{node.split('.')[0]}-{i}", cpu=cpu, memory=f"{rng.randint(1, 6)}Gi", node_name=node,
                            priority=priority, owner=("ReplicaSet", "bf"),
                            tolerations=[GPU_TOLERATION] if gpu else (),
                        )
                    )  # fmt: skip
    for k in range(rng.randint(1, 6)):
        spec: dict[str, Any] = {
            "cpu": rng.choice(("250m", "1", "2", "4")),
            "memory": f"{rng.choice((1, 2, 8))}Gi",
            "priority": rng.choice((-60, -30, 0, 0, 10)),
        }
        if rng.random() < 0.3:
            spec["node_selector"] = {"team": rng.choice(("a", "b"))}
        if rng.random() < 0.3:
            spec |= {"gpus": rng.choice((1, 2)), "tolerations": [GPU_TOLERATION]}
        names = w.pods(f"p{k}", rng.randint(1, 4), **spec)
        if rng.random() < 0.2:
            for name in names:
                w.pod_item(name)["spec"]["preemptionPolicy"] = "Never"
    return w


def assert_plans_as_every_node(
    worlds: Callable[[random.Random], World], rng: random.Random, count: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each of ``count`` worlds is planned with the pools' shortcut and with the pass over every node
    (:func:`every_node`): the plans are the same, and some pod among them fits by preemption."""
    preempting = 0
    for _ in range(count):
        w = worlds(rng)
        fast = w.plan()
        with monkeypatch.context() as m:
            m.setattr(scaleup, "place_by_preemption", every_node)
            slow = w.plan()
        assert fast.to_dict() == slow.to_dict()
        preempting += sum(1 for p in fast.pending if p.code == codes.FITS_BY_PREEMPTION)
    assert preempting > 0  # the worlds meet preemption


@pytest.mark.parametrize("seed", range(4))
def test_the_pools_shortcut_plans_as_a_pass_over_every_node(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_plans_as_every_node(_world, random.Random(seed), 15, monkeypatch)
