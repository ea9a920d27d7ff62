# ruff: noqa: F811  (the rig fixture of test_drain_steps is imported and taken by name)
"""A protection that arrives during an eviction round (fix59a). A round lists the node's pods once and
then evicts them one by one; a pod (or the node) marked never to be disturbed after the listing was
evicted all the same. Each eviction now reads its pod again, and the node's marks, just before it, and
judges them with the round's own predicate. On the rig of test_drain_steps (the Kubernetes API emulator
and a fake Auto Scaling)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from test_drain_steps import NODE, PLAN, Rig, rig  # noqa: F401 (the fixture)

from spillway.errors import DrainTimeout

Mark = Callable[[Rig], None]


def evictions(rig: Rig, name: str) -> list[Any]:
    return [r for r in rig.api.requests if r.method == "POST" and r.path.endswith(f"/pods/{name}/eviction")]


def _mark_pod(field: str, key: str, value: str, name: str = "web-1", namespace: str = "team-a") -> Mark:
    def mark(rig: Rig) -> None:
        pod = rig.api.get("Pod", name, namespace)
        assert pod is not None
        pod["metadata"].setdefault(field, {})[key] = value
        rig.api.update("Pod", pod)

    mark.__name__ = f"{key}={value}"
    return mark


def _mark_node(key: str) -> Mark:
    def mark(rig: Rig) -> None:
        node = rig.node()
        node["metadata"].setdefault("annotations", {})[key] = "true"
        rig.api.update("Node", node)

    mark.__name__ = f"node {key}=true"
    return mark


POD_MARKS = [
    _mark_pod("annotations", "karpenter.sh/do-not-disrupt", "true"),
    _mark_pod("annotations", "cluster-autoscaler.kubernetes.io/safe-to-evict", "false"),
    _mark_pod("annotations", "openai/do-not-drain", "true"),
    _mark_pod("labels", "openai/do-not-drain", "1"),
]
NODE_MARKS = [
    _mark_node("karpenter.sh/do-not-disrupt"),
    _mark_node("cluster-autoscaler.kubernetes.io/scale-down-disabled"),
]
CONSOLIDATION = {"plan_id": PLAN, "consolidation": True, "pods": ["team-a/web-0", "team-a/web-1"]}


def _marked_after_first_eviction(rig: Rig, mark: Mark) -> None:
    """Put ``mark`` on the cluster right after the round's first eviction (web-0's): web-1 was listed
    unmarked, and its own eviction comes next."""
    evict = rig.kube.evict

    def evict_then_mark(
        namespace: str, name: str, grace_period_seconds: int | None = None, *, uid: str = ""
    ) -> None:
        evict(namespace, name, grace_period_seconds, uid=uid)
        if name == "web-0":
            mark(rig)

    rig.kube.evict = evict_then_mark  # type: ignore[method-assign]


def _still_running(rig: Rig, name: str) -> bool:
    pod = rig.api.get("Pod", name, "team-a")
    return pod is not None and "deletionTimestamp" not in pod["metadata"]


@pytest.mark.parametrize("mark", POD_MARKS, ids=lambda m: m.__name__)
def test_a_drain_by_hand_keeps_a_pod_marked_after_the_round_listed_it(rig: Rig, mark: Mark) -> None:
    """The mark came after the listing and before the pod's eviction: the round evicted it. Now it is
    kept as a pod found so marked at the round's start is: the others go, it stays, named with why, and
    the drain by hand waits for it to its deadline, where it fails and gives the node back."""
    rig.pod("web-0")
    rig.pod("web-1")
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=30)
    _marked_after_first_eviction(rig, mark)

    first = rig.drainer.evict(drain)

    assert evictions(rig, "web-1") == [], "a pod marked never to be disturbed was evicted"
    assert _still_running(rig, "web-1")
    assert first["evicted"] == ["team-a/web-0"] and "abandon" not in first, first
    left = {r["pod"]: r["reason"] for r in first["remaining"]}
    assert left["team-a/web-1"] not in ("", "not evicted yet", "evicted, terminating"), left
    rig.clock.advance(30)
    with pytest.raises(DrainTimeout, match="team-a/web-1"):
        rig.drainer.evict(drain, first)
    assert _still_running(rig, "web-1")


@pytest.mark.parametrize("mark", POD_MARKS, ids=lambda m: m.__name__)
def test_a_plans_drain_one_of_whose_pods_is_marked_mid_round_is_abandoned_there(rig: Rig, mark: Mark) -> None:
    """A plan's drain that finds a pod it moves marked at a round's start is abandoned: nothing more
    evicted, the node given back. Marked mid-round, the pod was evicted and the drain went on. Now the
    round stops at that pod, as its start would have: the pods it evicted before stay evicted (they
    were moved), the marked one runs on."""
    rig.pod("web-0")
    rig.pod("web-1")
    drain = rig.cordoned(**CONSOLIDATION, poll_seconds=5, deadline_seconds=300)
    _marked_after_first_eviction(rig, mark)

    first = rig.drainer.evict(drain)

    assert evictions(rig, "web-1") == [], "a pod marked never to be disturbed was evicted"
    assert _still_running(rig, "web-1")
    assert "team-a/web-1 may no longer be evicted" in first.get("abandon", ""), first
    assert first["evicted"] == ["team-a/web-0"] and first["evicted_count"] == 1
    assert first["done"] is False


@pytest.mark.parametrize("mark", NODE_MARKS, ids=lambda m: m.__name__)
@pytest.mark.parametrize("request_", [{}, CONSOLIDATION], ids=["by-hand", "consolidation"])
def test_a_node_marked_mid_round_stops_the_round_before_its_next_eviction(
    rig: Rig, mark: Mark, request_: dict[str, Any]
) -> None:
    """A node annotated karpenter.sh/do-not-disrupt or scale-down-disabled while a drain without force
    runs stops that drain at its next round; annotated mid-round, the round evicted the rest first."""
    rig.pod("web-0")
    rig.pod("web-1")
    drain = rig.cordoned(**request_, poll_seconds=5, deadline_seconds=300)
    _marked_after_first_eviction(rig, mark)

    first = rig.drainer.evict(drain)

    assert evictions(rig, "web-1") == [] and _still_running(rig, "web-1")
    assert "while it drained" in first.get("abandon", ""), first
    assert first["evicted"] == ["team-a/web-0"] and first["evicted_count"] == 1


def test_a_forced_drain_evicts_a_pod_marked_mid_round_and_reads_nothing_again(rig: Rig) -> None:
    """force evicts marked pods and takes a marked node: it reads nothing again before an eviction."""
    rig.pod("web-0")
    rig.pod("web-1")
    drain = rig.cordoned(force=True, poll_seconds=5, deadline_seconds=300)
    _marked_after_first_eviction(rig, POD_MARKS[0])
    rig.api.clear_requests()

    first = rig.drainer.evict(drain)

    assert sorted(first["evicted"]) == ["team-a/web-0", "team-a/web-1"]
    reads = [r.path for r in rig.api.requests if r.method == "GET" and "/namespaces/team-a/pods" in r.path]
    assert reads == [], reads


def test_each_eviction_costs_one_read_of_its_pod_and_one_of_the_node(rig: Rig) -> None:
    """The calls a round adds: before each eviction one list of the pod's namespace by its name (the API
    server reads that one key; the drain's RBAC lists pods and gets none) and one get of the Node."""
    rig.pod("web-0")
    rig.pod("web-1")
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=300)
    rig.api.clear_requests()

    first = rig.drainer.evict(drain)

    assert sorted(first["evicted"]) == ["team-a/web-0", "team-a/web-1"]
    named = [
        r.query.get("fieldSelector")
        for r in rig.api.requests
        if (r.method, r.path) == ("GET", "/api/v1/namespaces/team-a/pods")
    ]
    assert named == ["metadata.name=web-0", "metadata.name=web-1"], named
    node_gets = [r for r in rig.api.requests if (r.method, r.path) == ("GET", f"/api/v1/nodes/{NODE}")]
    assert len(node_gets) == 1 + 2  # the round's own, then one before each eviction
