# ruff: noqa: F811  (the rig fixture of test_drain_steps is imported and taken by name)
"""Loose ends of the eviction round (fix60c).

1. The DaemonSet pods a drain that terminates its node evicts once the rest is gone were evicted
   from one listing, none read again: one marked never to be disturbed (or its node marked) after
   that listing was evicted all the same. They are now read again before each eviction and judged
   as the round's workload pods are (fix59a), with the DaemonSet choice on top.
2. A round that failed after it had evicted pods (the API server gone mid-round, a deadline passed
   while it evicted) raised, and the pods it had evicted were in no round's output: the drain's
   record, its Event and the compensation's note named none of them. Such a round now ends there
   and reports them; the next round meets the failure again (before evicting anything) and raises.

On the rig of test_drain_steps (the Kubernetes API emulator and a fake Auto Scaling)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from test_drain_marked_mid_round import NODE_MARKS, Mark, _mark_pod
from test_drain_steps import NODE, PLAN, Rig, _lambda_error, rig  # noqa: F401 (the fixture)

from spillway.errors import DrainTimeout, KubeAuthError, KubeUnavailable
from spillway.local import objects
from spillway.model.k8s import ENABLE_DS_EVICTION


def _evictions(rig: Rig, namespace: str) -> list[str]:
    return sorted(
        r.path.split("/")[-2]
        for r in rig.api.requests
        if r.method == "POST" and r.path.startswith(f"/api/v1/namespaces/{namespace}/pods/")
        and r.path.endswith("/eviction")
    )  # fmt: skip


def _agents(rig: Rig, *names: str) -> None:
    """DaemonSet pods that opt in to the eviction (enable-ds-eviction "true")."""
    for name in names:
        pod = objects.daemonset_pod(name, NODE, ds=name)
        pod["metadata"].setdefault("annotations", {})[ENABLE_DS_EVICTION] = "true"
        rig.api.add(pod)


AGENT_MARKS = [
    _mark_pod("annotations", "karpenter.sh/do-not-disrupt", "true", "agent-b", "kube-system"),
    _mark_pod(
        "annotations", "cluster-autoscaler.kubernetes.io/safe-to-evict", "false", "agent-b", "kube-system"
    ),
    _mark_pod("annotations", "openai/do-not-drain", "true", "agent-b", "kube-system"),
]


def _after_eviction_of(rig: Rig, name: str, then: Callable[[], None]) -> None:
    """Run ``then`` right after the eviction of the pod ``name``."""
    evict = rig.kube.evict

    def evict_then(
        namespace: str, pod: str, grace_period_seconds: int | None = None, *, uid: str = ""
    ) -> None:
        evict(namespace, pod, grace_period_seconds, uid=uid)
        if pod == name:
            then()

    rig.kube.evict = evict_then  # type: ignore[method-assign]


def _running(rig: Rig, name: str, namespace: str) -> bool:
    pod = rig.api.get("Pod", name, namespace)
    return pod is not None and "deletionTimestamp" not in pod["metadata"]


# 1. DaemonSet pods ------------------------------------------------------------------------------


@pytest.mark.parametrize("mark", AGENT_MARKS, ids=lambda m: m.__name__)
def test_a_daemonset_pod_marked_after_the_listing_is_not_evicted(rig: Rig, mark: Mark) -> None:
    """agent-b is marked right after agent-a's eviction, before its own: it was evicted from the listing
    taken before. Now it is read again first and goes with the instance, as one found marked does."""
    _agents(rig, "agent-a", "agent-b")
    drain = rig.cordoned(reason="by hand")
    _after_eviction_of(rig, "agent-a", lambda: mark(rig))
    rig.api.clear_requests()

    done = rig.drainer.evict(drain)

    assert _evictions(rig, "kube-system") == ["agent-a"], (
        "a DaemonSet pod marked never to be disturbed was evicted"
    )
    assert _running(rig, "agent-b", "kube-system")
    assert done["done"] and done["daemonsets"] == ["kube-system/agent-a"], done
    assert rig.drainer.check(drain)["ready"]  # it goes with the instance


@pytest.mark.parametrize("mark", NODE_MARKS, ids=lambda m: m.__name__)
@pytest.mark.parametrize("request_", [{"reason": "by hand"}, {"plan_id": PLAN, "reason": "idle 12 min"}])
def test_a_node_marked_during_the_daemonset_evictions_stops_them_and_abandons_the_drain(
    rig: Rig, mark: Mark, request_: dict[str, Any]
) -> None:
    """The node annotated do-not-disrupt or scale-down-disabled between two DaemonSet evictions: the
    second went ahead (the node's marks were not read again), and the check after it sent the drain
    back to a round that abandoned it. Now the DaemonSet evictions stop there and the drain is
    abandoned at once, as a workload pod's round is (fix59a)."""
    _agents(rig, "agent-a", "agent-b")
    drain = rig.cordoned(**request_)
    _after_eviction_of(rig, "agent-a", lambda: mark(rig))
    rig.api.clear_requests()

    out = rig.drainer.evict(drain)

    assert _evictions(rig, "kube-system") == ["agent-a"]
    assert _running(rig, "agent-b", "kube-system")
    assert "while it drained" in out.get("abandon", ""), out
    assert out["daemonsets"] == ["kube-system/agent-a"] and out["done"] is False


def test_a_plans_drain_whose_daemonset_pod_is_annotated_do_not_disrupt_mid_eviction_is_abandoned(
    rig: Rig,
) -> None:
    """The planner keeps such a node (pod-never), and a plan's drain abandons it when it finds the pod so
    annotated at a round's start (_pinned): annotated between two DaemonSet evictions, it was evicted."""
    _agents(rig, "agent-a", "agent-b")
    drain = rig.cordoned(plan_id=PLAN, reason="idle 12 min")
    _after_eviction_of(rig, "agent-a", lambda: AGENT_MARKS[0](rig))
    rig.api.clear_requests()

    out = rig.drainer.evict(drain)

    assert _evictions(rig, "kube-system") == ["agent-a"]
    assert "kube-system/agent-b" in out.get("abandon", ""), out


def test_a_forced_drain_evicts_its_daemonset_pods_without_reading_them_again(rig: Rig) -> None:
    _agents(rig, "agent-a", "agent-b")
    drain = rig.cordoned(reason="by hand", force=True)
    _after_eviction_of(rig, "agent-a", lambda: AGENT_MARKS[0](rig))
    rig.api.clear_requests()

    done = rig.drainer.evict(drain)

    assert done["daemonsets"] == ["kube-system/agent-a", "kube-system/agent-b"]
    named = [r for r in rig.api.requests if r.query.get("fieldSelector", "").startswith("metadata.name=")]
    assert named == []


# 2. A round that fails after evicting -----------------------------------------------------------


def _api_down(rig: Rig) -> None:
    def down(*_: Any, **__: Any) -> Any:
        raise KubeUnavailable("list pods: the API server did not answer (connection refused)")

    rig.kube.evict = down  # type: ignore[method-assign]
    rig.kube.pods_on_node = down  # type: ignore[method-assign]
    rig.kube.read_pod = down  # type: ignore[method-assign]


def test_a_round_the_api_server_fails_after_an_eviction_reports_the_pods_it_evicted(rig: Rig) -> None:
    """web-0 is evicted, then the API server stops answering: the round raised KubeUnavailable, and
    web-0 was in no output. Now the round ends there and says so; the next round finds the API still
    gone before it evicts anything and raises, and the drain's record and Event name web-0."""
    for name in ("web-0", "web-1", "web-2"):
        rig.pod(name)
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=300)
    _after_eviction_of(rig, "web-0", lambda: _api_down(rig))

    first = rig.drainer.evict(drain)

    assert first["evicted"] == ["team-a/web-0"] and first["evicted_count"] == 1, first
    assert first["done"] is False and "KubeUnavailable" in first["interrupted"], first
    left = {r["pod"]: r["reason"] for r in first["remaining"]}
    assert left["team-a/web-0"] == "evicted, terminating"
    assert "KubeUnavailable" in left["team-a/web-1"], left

    with pytest.raises(KubeUnavailable):  # the state machine's Retry, then its Catch: Compensate
        rig.drainer.evict(drain, first)

    state = {
        "drain": drain.model_dump(),
        "round": first,
        "error": _lambda_error("KubeUnavailable", "list pods: the API server did not answer"),
        "compensation_error": _lambda_error("KubeUnavailable", "API server down"),
    }
    out = rig.drainer.record(state)

    assert out["outcome"] == "failed" and out["evicted"] == ["team-a/web-0"] and out["evicted_count"] == 1
    event = rig.api.list("Event")[-1]
    assert "team-a/web-0" in event["message"], event["message"]


@pytest.mark.parametrize(
    ("call", "error"),
    [("read_pod", KubeUnavailable("read pod: no answer")), ("evict", KubeAuthError("evict: forbidden"))],
    ids=["read-before-the-eviction", "eviction-refused"],
)
def test_a_round_that_fails_before_any_eviction_still_raises(rig: Rig, call: str, error: Exception) -> None:
    """Nothing evicted, nothing to report: the error goes to the state machine's Retry as before. (An
    eviction whose answer was lost may have landed: reported, not raised: test_drain_lost_answer.)"""
    rig.pod("web-0")
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=300)
    setattr(rig.kube, call, lambda *_, **__: (_ for _ in ()).throw(error))

    with pytest.raises(type(error)):
        rig.drainer.evict(drain)


def test_a_round_that_runs_past_the_deadline_reports_its_evictions_and_the_next_one_times_out(
    rig: Rig,
) -> None:
    """A round that starts before the deadline and evicts past it (each eviction 10 s): it raised
    DrainTimeout at its end for db-0, which a budget holds, and the web-0 it had just evicted (with the
    seconds then left) was named nowhere. Now it reports web-0, and the next round fails the drain."""
    rig.pod("web-0")
    rig.pod("db-0", app="db")
    rig.api.add(objects.pdb("db", "team-a", {"app": "db"}, min_available=1))
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=30)
    evict = rig.kube.evict

    def slow(namespace: str, name: str, grace_period_seconds: int | None = None, *, uid: str = "") -> None:
        evict(namespace, name, grace_period_seconds, uid=uid)
        rig.clock.advance(10)

    rig.kube.evict = slow  # type: ignore[method-assign]
    rig.clock.advance(25)

    last = rig.drainer.evict(drain)

    assert last["evicted"] == ["team-a/web-0"] and last["done"] is False, last
    rig.clock.advance(drain.poll_seconds)
    with pytest.raises(DrainTimeout, match="team-a/db-0"):
        rig.drainer.evict(drain, last)
    assert _running(rig, "db-0", "team-a")


def test_a_forced_drain_past_its_deadline_whose_round_the_api_server_fails_tries_the_rest_again(
    rig: Rig,
) -> None:
    """A forced drain past its deadline is done whatever is left (it terminates with it); a round of it
    that the API server cut off is not: the next round evicts the pods it did not reach."""
    rig.pod("web-0")
    rig.pod("web-1")
    drain = rig.cordoned(force=True, poll_seconds=5, deadline_seconds=30)
    rig.clock.advance(31)
    evict = rig.kube.evict

    def down(*_: Any, **__: Any) -> None:
        raise KubeUnavailable("evict: the API server did not answer")

    _after_eviction_of(rig, "web-0", lambda: setattr(rig.kube, "evict", down))

    first = rig.drainer.evict(drain)

    assert first["evicted"] == ["team-a/web-0"] and first["interrupted"], first
    assert first["done"] is False and first["forced"] is False, first
    rig.kube.evict = evict  # type: ignore[method-assign]
    rig.clock.advance(drain.poll_seconds)
    second = rig.drainer.evict(drain, first)
    assert second["evicted"] == ["team-a/web-0", "team-a/web-1"] and second["done"], second


def test_a_failed_drains_event_names_the_pods_it_evicted(rig: Rig) -> None:
    """A drain that fails after evicting gives its node back with those pods stopped: its Event said
    only the error, so `kubectl describe node` did not tell which pods the drain had stopped."""
    drain = rig.cordoned()
    state = {
        "drain": drain.model_dump(),
        "round": {"rounds": 2, "evicted": ["team-a/web-0", "team-a/web-1"], "evicted_count": 2},
        "error": _lambda_error("DrainTimeout", "Node 'x': 1 pod(s) still there at the deadline"),
        "compensation": {"untainted": True, "uncordoned": True},
    }

    out = rig.drainer.record(state)

    assert out["evicted"] == ["team-a/web-0", "team-a/web-1"]
    event = rig.api.list("Event")[-1]
    assert event["reason"] == "SpillwayDrainTimeout"
    message = event["message"]
    assert "after evicting 2 pod(s)" in message and "team-a/web-1" in message, message


def test_a_failed_drains_event_keeps_its_cause_however_long_the_evicted_pods_names(rig: Rig) -> None:
    """The evicted pods are named before the cause, and an Event's message is cut at 1024 characters:
    ten pods of long names (a namespace and a pod name may each be 63 and 253 characters) pushed the
    cause out of it, so the Event no longer said why the drain failed."""
    drain = rig.cordoned()
    names = [f"{'n' * 63}/{'p' * 200}-{i}" for i in range(12)]
    state = {
        "drain": drain.model_dump(),
        "round": {"rounds": 2, "evicted": names, "evicted_count": len(names)},
        "error": _lambda_error("DrainTimeout", "Node 'x': 1 pod(s) still there at the deadline"),
        "compensation": {"untainted": True, "uncordoned": True},
    }

    rig.drainer.record(state)

    message = rig.api.list("Event")[-1]["message"]
    assert "1 pod(s) still there at the deadline" in message, message
    assert f"after evicting {len(names)} pod(s) ({names[0]}" in message and "more)" in message, message


# 3. A mark put between the last read and the eviction ---------------------------------------------


def _marked_right_after_its_read(rig: Rig, name: str, key: str, value: str) -> None:
    """Mark the pod ``name`` right after the drain reads it again, before its eviction: the window no
    read can close (a resourceVersion precondition would spend its budget: eviction.go)."""
    read = rig.kube.read_pod

    def read_then_mark(namespace: str, pod: str) -> Any:
        found = read(namespace, pod)
        if pod == name:
            obj = rig.api.get("Pod", name, namespace)
            assert obj is not None
            obj["metadata"].setdefault("annotations", {})[key] = value
            rig.api.update("Pod", obj)
        return found

    rig.kube.read_pod = read_then_mark  # type: ignore[method-assign]


def test_a_pod_marked_between_its_last_read_and_its_eviction_is_reported_as_evicted_marked(rig: Rig) -> None:
    """It is evicted (nothing can tell before the API server does), but the round's listing after its
    evictions finds the mark on it: the round names it and an Event on the Node says so, where before
    nothing did and the pod was simply counted evicted."""
    rig.pod("web-0")
    rig.pod("web-1")
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=300)
    _marked_right_after_its_read(rig, "web-1", "karpenter.sh/do-not-disrupt", "true")

    first = rig.drainer.evict(drain)

    assert sorted(first["evicted"]) == ["team-a/web-0", "team-a/web-1"]
    assert first["evicted_marked"] == [
        {"pod": "team-a/web-1", "mark": "annotated karpenter.sh/do-not-disrupt=true"}
    ], first
    event = rig.api.list("Event")[-1]
    assert event["reason"] == "SpillwayEvictedMarked" and event["type"] == "Warning"
    assert "team-a/web-1" in event["message"] and "team-a/web-0" not in event["message"], event["message"]


def test_a_forced_drain_reports_no_marked_pod_it_evicted(rig: Rig) -> None:
    """force evicts marked pods on purpose: nothing to report."""
    rig.pod("web-0")
    pod = rig.api.get("Pod", "web-0", "team-a")
    assert pod is not None
    pod["metadata"].setdefault("annotations", {})["karpenter.sh/do-not-disrupt"] = "true"
    rig.api.update("Pod", pod)
    drain = rig.cordoned(force=True, poll_seconds=5, deadline_seconds=300)

    first = rig.drainer.evict(drain)

    assert first["evicted"] == ["team-a/web-0"] and "evicted_marked" not in first
