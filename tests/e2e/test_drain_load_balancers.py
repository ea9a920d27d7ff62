# ruff: noqa: F811  (the world fixture of test_drain is imported and taken by name)
"""DrainNode end to end (the real ASL, the drain Lambda's real handler, the API emulator): a drain
that terminates its node labels it ``node.kubernetes.io/exclude-from-external-load-balancers`` before
its first eviction, so load balancers deregister it while its pods leave; a drain that fails or is
cancelled gives the node back as it was, its labels and annotations included, and an operator's label
stays."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest
from conftest import CLUSTER
from test_drain import FAST, ReplicaSetController, World, world  # noqa: F401 (the fixture)

from spillway.act.drain import Drainer
from spillway.local import objects
from spillway.model.k8s import EXCLUDE_FROM_LB_LABEL, LB_EXCLUDED_BY_SPILLWAY


def _metadata(world: World, node: str) -> tuple[dict[str, Any], dict[str, Any], bool, list[Any]]:
    found = world.node(node)
    assert found is not None
    meta, spec = found["metadata"], found["spec"]
    return (
        copy.deepcopy(meta.get("labels") or {}),
        copy.deepcopy(meta.get("annotations") or {}),
        bool(spec.get("unschedulable")),
        copy.deepcopy(spec.get("taints") or []),
    )


def test_a_terminating_drain_labels_its_node_out_of_load_balancers_before_the_first_eviction(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    node, spare = world.nodes["general"][0], world.nodes["general"][1]
    world.pod("web-0", node, app="web")
    seen: list[dict[str, Any]] = []  # the node as each evict step finds it, before it evicts anything
    evict = Drainer.evict

    def watched(self: Drainer, drain: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        found = world.node(node)
        evicted = [r for r in world.api.requests if r.path.endswith("/eviction")]
        seen.append({"node": copy.deepcopy(found), "evictions": len(evicted)})
        return evict(self, drain, *args, **kwargs)

    monkeypatch.setattr(Drainer, "evict", watched)
    with ReplicaSetController(world.api, "web", 1, spare):
        result = world.drain({"cluster": CLUSTER, "node": node, "reason": "idle", **FAST})

    assert result["status"] == "SUCCEEDED", result
    assert result["output"]["outcome"] == "terminated"
    first = seen[0]
    assert first["evictions"] == 0
    assert first["node"]["metadata"]["labels"][EXCLUDE_FROM_LB_LABEL] == "true"
    assert LB_EXCLUDED_BY_SPILLWAY in first["node"]["metadata"]["annotations"]
    assert world.node(node) is None


def _uncordon_once_tainted(world: World, node: str, stop: threading.Event) -> None:
    """A person runs ``kubectl uncordon`` (spec.unschedulable alone) once the drain has tainted the node,
    in the patch that labels it."""
    while not stop.wait(0.05):
        found = world.node(node)
        if found and any(t["key"] == "spillway.io/draining" for t in found["spec"].get("taints") or []):
            found["spec"]["unschedulable"] = False
            world.api.update("Node", found)
            return


@pytest.mark.parametrize("operator_label", [None, ""], ids=["unlabelled", "labelled by an operator"])
@pytest.mark.parametrize("how", ["timeout", "cancelled"])
def test_a_drain_that_fails_or_is_cancelled_leaves_the_node_as_it_was(
    world: World, how: str, operator_label: str | None
) -> None:
    node = world.nodes["general"][0]
    if operator_label is not None:
        found = world.node(node)
        assert found is not None
        found["metadata"].setdefault("labels", {})[EXCLUDE_FROM_LB_LABEL] = operator_label
        world.api.update("Node", found)
    world.pod("db-0", node, app="db")
    world.api.add(objects.pdb("db", "team-a", {"app": "db"}, min_available=1))  # never disruptable
    labels, annotations, _, taints = _metadata(world, node)

    stop = threading.Event()
    person = threading.Thread(target=_uncordon_once_tainted, args=(world, node, stop), daemon=True)
    if how == "cancelled":
        person.start()
    try:
        result = world.drain({"cluster": CLUSTER, "node": node, "poll_seconds": 1, "deadline_seconds": 3})
    finally:
        stop.set()
        if person.is_alive():
            person.join(timeout=5)

    assert result["status"] == "FAILED", result
    assert result["error"] == ("DrainTimeout" if how == "timeout" else "DrainCancelled"), result
    after = _metadata(world, node)
    assert after == (labels, annotations, False, taints)
    assert world.api.get("Pod", "db-0", "team-a")["status"]["phase"] == "Running"
