"""place_by_preemption's pass over pools (a pool whose ceiling holds no pod of the class, or whose shape
the class refuses, is passed over whole) plans as the pass over every node with expendable pods also
where what a class may take differs from node to node within a group: a zone or a rack label on some
nodes only, a host port a victim or a bound pod holds, pod anti-affinity and topology spread over the
hostname and the zone, a node named by field selector, and pending pods nominated to a node (their
room charged by priority while the stage runs)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from plan_world import World
from test_preemption_pools import assert_plans_as_every_node

from spillway.local import objects as o

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def _port(item: dict[str, Any], port: int) -> None:
    item["spec"]["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port, "protocol": "TCP"}]


def _nodes(w: World, rng: random.Random) -> list[str]:
    names: list[str] = []
    for group, itype in (("cpu-a", "m5.2xlarge"), ("cpu-b", "m5.xlarge")):
        for name in w.group(group, itype, nodes=rng.randint(1, 4), max_size=20):
            node = w.node(name)
            labels = node["metadata"]["labels"]
            if rng.random() < 0.5:  # the same group over two zones: one pool per zone
                labels[ZONE] = "us-east-1b"
                node["spec"]["providerID"] = node["spec"]["providerID"].replace("us-east-1a", "us-east-1b")
            if rng.random() < 0.4:
                labels["rack"] = rng.choice(("r1", "r2"))
            names.append(name)
    return names


def _running(w: World, rng: random.Random, names: list[str]) -> None:
    for node in names:
        for i in range(rng.randint(1, 5)):  # nodes mostly full: pending pods meet preemption
            item = o.pod(
                f"run-{node.split('.')[0]}-{i}", cpu=rng.choice(("1", "2", "3")),
                memory=f"{rng.randint(1, 6)}Gi", node_name=node, priority=rng.choice((-100, -50, -20, 0)),
                owner=("ReplicaSet", "bf"), labels={"app": rng.choice(("web", "batch"))},
            )  # fmt: skip
            if rng.random() < 0.15:
                _port(item, 9000)
            w.items.append(item)


def _constraints(rng: random.Random, names: list[str]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    roll = rng.random()
    if roll < 0.15:
        spec["node_selector"] = {"rack": rng.choice(("r1", "r2"))}
    elif roll < 0.25:
        spec["node_selector"] = {ZONE: "us-east-1b"}
    elif roll < 0.35:
        field = {"key": "metadata.name", "operator": "In", "values": rng.sample(names, min(2, len(names)))}
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchFields": [field]}]
                }
            }
        }
    elif roll < 0.5:
        key = rng.choice((HOST, ZONE))
        term = {"labelSelector": {"matchLabels": {"app": rng.choice(("web", "batch"))}}, "topologyKey": key}
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return spec


def _pending(w: World, rng: random.Random, names: list[str]) -> None:
    for k in range(rng.randint(1, 6)):
        spec: dict[str, Any] = {
            "cpu": rng.choice(("250m", "1", "2", "4")),
            "memory": f"{rng.choice((1, 2, 8))}Gi",
            "priority": rng.choice((-60, -30, 0, 0, 10)),
            **_constraints(rng, names),
        }
        app = rng.choice(("web", "batch", f"p{k}"))
        pods = w.pods(f"p{k}", rng.randint(1, 4), labels={"app": app}, **spec)
        spread = rng.random() < 0.2
        port = rng.random() < 0.15
        for name in pods:
            item = w.pod_item(name)
            if spread:
                item["spec"]["topologySpreadConstraints"] = [
                    {
                        "maxSkew": 1, "topologyKey": rng.choice((HOST, ZONE)),
                        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": app}},
                    }
                ]  # fmt: skip
            if port:
                _port(item, 9000)
            if rng.random() < 0.1:
                item["status"]["nominatedNodeName"] = rng.choice(names)


def _world(rng: random.Random) -> World:
    w = World(regions=("us-east-1",))
    names = _nodes(w, rng)
    _running(w, rng, names)
    _pending(w, rng, names)
    return w


@pytest.mark.parametrize("seed", range(4))
def test_the_pools_shortcut_plans_as_every_node_where_nodes_of_a_group_differ(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_plans_as_every_node(_world, random.Random(seed), 25, monkeypatch)
