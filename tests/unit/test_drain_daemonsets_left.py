# ruff: noqa: F811  (the rig fixture of test_drain_steps is imported and taken by name)
"""The DaemonSet pods a round leaves for the next (review60c).

fix60c evicts a drain's DaemonSet pods through the round's own loop (:meth:`Drainer._evict_round`),
which stops at a throttled eviction and at the round's time (``ROUND_SECONDS``), leaving the pods it
did not reach to the next round. But the round that evicts DaemonSet pods is the last: the drain goes
on to terminate, and no round came back for them. A DaemonSet pod the API server throttled, and every
one after it, or past the round's time, went with the instance, named nowhere; before fix60c each one
was tried (a throttled one skipped, the rest evicted). cluster-autoscaler tries every DaemonSet pod,
each retried until its MaxPodEvictionTime (core/scaledown/actuation/drain.go, ``evictPod`` in a
goroutine per pod), and Karpenter queues every one and waits for them (terminator.go, ``Evict``). And
the DaemonSet evictions had a ``ROUND_SECONDS`` of their own after the round's: one invocation could
run two of them, past the drain function's 120 s. Now they share the round's time, and those it leaves
(its time spent, the server throttling) are the next round's, the drain not done until then; a pod the
DaemonSet made since (a new name) is not among them. On the rig of test_drain_steps."""

from __future__ import annotations

from typing import Any

from test_drain_round_loose_ends import _agents, _evictions
from test_drain_steps import NODE, Rig, rig  # noqa: F401 (the fixture)

from spillway.act.drain import ROUND_SECONDS
from spillway.local import objects

CALL_SECONDS = 3  # each eviction, with its reads, takes this long on the drain's clock


def _slow_evictions(rig: Rig, *, confirmed: bool = False) -> None:
    """Each eviction takes CALL_SECONDS on the drain's clock; ``confirmed``: a workload pod's kubelet
    confirms it at once (the pod is gone from the next listing)."""
    evict = rig.kube.evict

    def slow(namespace: str, name: str, grace_period_seconds: int | None = None, *, uid: str = "") -> None:
        evict(namespace, name, grace_period_seconds, uid=uid)
        rig.clock.advance(CALL_SECONDS)
        if confirmed and namespace == "team-a":
            rig.api.delete("Pod", name, namespace)

    rig.kube.evict = slow  # type: ignore[method-assign]


def _until_done(rig: Rig, drain: Any, first: dict[str, Any], rounds: int = 5) -> dict[str, Any]:
    out = first
    for _ in range(rounds):
        if out["done"] or "abandon" in out:
            return out
        rig.clock.advance(drain.poll_seconds)
        out = rig.drainer.evict(drain, out)
    return out


def test_a_throttled_daemonset_eviction_leaves_the_rest_to_the_next_round_not_to_the_instance(
    rig: Rig,
) -> None:
    """API Priority and Fairness answers agent-a's eviction 429: the round stopped there (the server
    asks to slow down) and the drain went on to terminate, agent-b and agent-c never tried."""
    _agents(rig, "agent-a", "agent-b", "agent-c")
    drain = rig.cordoned(reason="by hand", poll_seconds=5, deadline_seconds=300)
    rig.api.faults.fail_next(1, 429, "/api/v1/namespaces/kube-system/pods/agent-a/eviction")
    rig.api.clear_requests()

    first = rig.drainer.evict(drain)

    assert first["done"] is False, "the drain went on to terminate with DaemonSet pods never tried"
    assert first["daemonsets_left"] == [f"kube-system/agent-{c}" for c in "abc"], first
    done = _until_done(rig, drain, first)
    assert done["done"] and sorted(done["daemonsets"]) == [f"kube-system/agent-{c}" for c in "abc"], done
    # agent-a throttled, then evicted; each evicted once
    assert _evictions(rig, "kube-system") == ["agent-a", "agent-a", "agent-b", "agent-c"]
    assert rig.drainer.check(drain)["ready"]


def test_daemonset_pods_past_the_rounds_time_are_evicted_by_the_next_round(rig: Rig) -> None:
    """Thirty agents at 3 s an eviction: the round evicted twenty in its 60 s and the drain went on to
    terminate with the last ten never tried. The next round evicts them, and not the pod the
    DaemonSet made since in place of one evicted (a new name: it goes with the instance)."""
    names = [f"agent-{i:02d}" for i in range(30)]
    _agents(rig, *names)
    drain = rig.cordoned(reason="by hand", poll_seconds=5, deadline_seconds=900)
    _slow_evictions(rig)

    first = rig.drainer.evict(drain)

    within = ROUND_SECONDS // CALL_SECONDS
    assert len(first["daemonsets"]) == within, first
    assert first["done"] is False and first["daemonsets_left"] == [f"kube-system/{n}" for n in names[within:]]
    rig.api.add(objects.daemonset_pod("agent-00-x7k2p", NODE, ds="agent-00"))  # its DaemonSet's new pod
    rig.api.clear_requests()
    done = _until_done(rig, drain, first)
    assert done["done"] and sorted(done["daemonsets"]) == [f"kube-system/{n}" for n in names], done
    assert _evictions(rig, "kube-system") == names[within:]
    assert "daemonsets_left" not in done


def test_a_rounds_daemonset_evictions_share_its_time(rig: Rig) -> None:
    """Twenty workload pods took the round's 60 s, their kubelet confirming each at once, and the
    DaemonSet evictions then ran 60 s of their own: one invocation of 120 s, the drain function's
    timeout, where the round is lost whole and compensated. They are the next round's instead."""
    for i in range(ROUND_SECONDS // CALL_SECONDS):
        rig.pod(f"web-{i:02d}")
    _agents(rig, *(f"agent-{i:02d}" for i in range(5)))
    drain = rig.cordoned(reason="by hand", poll_seconds=5, deadline_seconds=900)
    _slow_evictions(rig, confirmed=True)
    began = rig.clock()

    first = rig.drainer.evict(drain)

    spent = (rig.clock() - began).total_seconds()
    assert spent <= ROUND_SECONDS + CALL_SECONDS, f"one round ran {spent} s"
    assert first["evicted_count"] == ROUND_SECONDS // CALL_SECONDS and first["done"] is False, first
    done = _until_done(rig, drain, first)
    assert done["done"] and len(done["daemonsets"]) == 5, done
