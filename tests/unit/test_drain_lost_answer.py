# ruff: noqa: F811  (the rig fixture of test_drain_steps is imported and taken by name)
"""An eviction the API server applied whose answer the client lost (fix61f).

The answer of an eviction may be cut (the invocation's time left ran out: ``KubeClient.within``) or lost
(a timeout past the client's retries) after the API server applied it. The round ended ``interrupted``
and named the pod nowhere; the next round found it terminating and, rightly, evicted it no more, so it
was in no ``evicted`` list, record or Event of the drain. Now the round carries such a pod (name and
uid) as ``unconfirmed``, and the next round counts it evicted when the pod of that uid is terminating or
gone, and evicts it as any pod when it is found running (the eviction never landed).

On the rig of test_drain_steps (the Kubernetes API emulator and a fake Auto Scaling)."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

import pytest
from test_drain_round_bounds import _drainer_of_invocation, _invocation_ending_in
from test_drain_steps import NODE, Rig, rig  # noqa: F401 (the fixture)

from spillway.act.drain import ENABLE_DS_EVICTION
from spillway.errors import DrainTimeout, KubeUnavailable
from spillway.local import objects
from spillway.model.calltime import STEP_MARGIN_SECONDS

SLOW = 3.0  # seconds the API server takes over web-1's eviction before it applies it


def _answer_lost(rig: Rig, name: str, *, applied: bool = True) -> None:
    """The eviction of pod ``name`` is applied by the API server (unless not ``applied``: lost on the
    way there) and its answer is lost: the client raises as a bound client out of time does. The pods
    evicted stay terminating (their kubelet slow to confirm), so that the next round finds the mark the
    API server put on an evicted pod (``DisruptionTarget``, reason ``EvictionByEvictionAPI``)."""
    rig.api.kubelet_exit_delay = 3600
    evict = rig.kube.evict
    lost = [False]

    def cut(namespace: str, pod: str, grace_period_seconds: int | None = None, *, uid: str = "") -> None:
        if pod != name or lost[0]:
            return evict(namespace, pod, grace_period_seconds, uid=uid)
        lost[0] = True
        if applied:
            evict(namespace, pod, grace_period_seconds, uid=uid)
        raise KubeUnavailable(
            f"evict pod {namespace}/{pod}: no useful answer after 1 attempts "
            "(last: its answer still coming when the time ran out)"
        )

    rig.kube.evict = cut  # type: ignore[method-assign]


def _terminating(rig: Rig, name: str) -> bool:
    pod = rig.api.get("Pod", name, "team-a")
    return pod is not None and "deletionTimestamp" in pod["metadata"]


def _rounds(rig: Rig, drain: Any, n: int, previous: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    out = []
    for _ in range(n):
        previous = rig.drainer.evict(drain, previous)
        out.append(previous)
        rig.clock.advance(drain.poll_seconds)
    return out


def test_an_eviction_applied_whose_answer_was_lost_is_counted_evicted_by_the_next_round(rig: Rig) -> None:
    rig.pod("web-0")
    rig.pod("web-1")
    drain = rig.cordoned()
    _answer_lost(rig, "web-1")

    first, second = _rounds(rig, drain, 2)

    assert first["interrupted"], first
    assert first["evicted"] == ["team-a/web-0"], first
    assert [u["pod"] for u in first["unconfirmed"]] == ["team-a/web-1"], first
    assert second["evicted"] == ["team-a/web-0", "team-a/web-1"], second
    assert second["evicted_count"] == 2 and "unconfirmed" not in second, second
    evictions = [r.path for r in rig.api.requests if r.path.endswith("/eviction")]
    # not evicted again: its budget is not charged twice
    assert sum("web-1" in p for p in evictions) == 1, evictions


def test_a_first_eviction_whose_answer_was_lost_is_reported_not_raised(rig: Rig) -> None:
    """Before, a round whose first eviction failed raised for the Retry: a lost answer may have evicted
    the pod, and raised it was in no output. Now the round reports it and the next counts it."""
    rig.pod("web-0")
    drain = rig.cordoned()
    _answer_lost(rig, "web-0")

    first, second = _rounds(rig, drain, 2)

    assert first["interrupted"] and first["evicted"] == [] and first["evicted_count"] == 0, first
    assert [u["pod"] for u in first["unconfirmed"]] == ["team-a/web-0"], first
    assert second["evicted"] == ["team-a/web-0"] and second["evicted_count"] == 1, second


def test_a_pod_gone_since_its_lost_answer_is_named_evicted_or_deleted(rig: Rig) -> None:
    """Gone, the pod took its conditions with it: this drain's eviction may have stopped it, or another
    hand deleted it; nothing tells which. Before, it was counted evicted by this drain."""
    rig.pod("web-0")
    rig.pod("web-1")
    drain = rig.cordoned()
    _answer_lost(rig, "web-1")
    [first] = _rounds(rig, drain, 1)
    rig.api.delete("Pod", "web-1", "team-a")  # its kubelet confirmed the deletion

    [second] = _rounds(rig, drain, 1, first)

    assert second["evicted"] == ["team-a/web-0"] and second["evicted_count"] == 1, second
    assert second["evicted_or_deleted"] == ["team-a/web-1"] and "unconfirmed" not in second, second


def _deleted_by_another_hand(rig: Rig, name: str) -> None:
    """``kubectl delete pod``: a graceful deletion, no eviction (no ``DisruptionTarget`` written)."""
    request = urllib.request.Request(
        f"{rig.api.url}/api/v1/namespaces/team-a/pods/{name}",
        data=json.dumps({"gracePeriodSeconds": 30}).encode(),
        method="DELETE",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request) as answer:
        assert answer.status == 200


def test_a_pod_deleted_by_another_hand_after_a_lost_answer_is_not_counted_evicted(rig: Rig) -> None:
    """web-1's eviction never reached the API server; somebody deleted web-1 meanwhile. The next round
    finds it terminating, as an eviction leaves it, but without the mark the API server writes on a pod
    it evicts: it counted it evicted by this drain. Now it is named evicted or deleted, not counted."""
    rig.pod("web-0")
    rig.pod("web-1")
    drain = rig.cordoned()
    _answer_lost(rig, "web-1", applied=False)
    [first] = _rounds(rig, drain, 1)
    _deleted_by_another_hand(rig, "web-1")
    assert _terminating(rig, "web-1")

    [second] = _rounds(rig, drain, 1, first)

    assert second["evicted"] == ["team-a/web-0"] and second["evicted_count"] == 1, second
    assert second["evicted_or_deleted"] == ["team-a/web-1"], second


def test_a_pod_found_running_after_a_lost_eviction_is_evicted_again_and_counted_once(rig: Rig) -> None:
    rig.pod("web-0")
    rig.pod("web-1")
    drain = rig.cordoned()
    _answer_lost(rig, "web-1", applied=False)

    [first] = _rounds(rig, drain, 1)
    assert first["interrupted"] and not _terminating(rig, "web-1"), first
    [second] = _rounds(rig, drain, 1, first)

    assert second["evicted"] == ["team-a/web-0", "team-a/web-1"] and second["evicted_count"] == 2, second
    assert "unconfirmed" not in second, second


def test_a_pod_made_again_under_the_name_is_another_pod(rig: Rig) -> None:
    """The pod of the lost answer is gone and its controller made another under its name on the node:
    the one sent for is named evicted or deleted (gone, nothing tells which), the new one is evicted as
    any pod, and counted."""
    rig.pod("web-0")
    rig.pod("web-1")
    drain = rig.cordoned()
    _answer_lost(rig, "web-1")
    [first] = _rounds(rig, drain, 1)
    rig.api.delete("Pod", "web-1", "team-a")
    again = objects.pod(
        "web-1", "team-a", node_name=drain.node, labels={"app": "web"}, owner=("ReplicaSet", "web-5d9c")
    )
    again["metadata"]["uid"] = "made-again"
    rig.api.add(again)

    [second] = _rounds(rig, drain, 1, first)

    assert second["evicted"] == ["team-a/web-0", "team-a/web-1"] and second["evicted_count"] == 2, second
    assert second["evicted_or_deleted"] == ["team-a/web-1"], second  # the one sent for, gone


def _failed_with_api_down(drain: Any, last: dict[str, Any]) -> dict[str, Any]:
    """A drain's state at its record step: the API server down after its round ``last``."""
    return {
        "drain": drain.model_dump(),
        "round": last,
        "error": {"Error": "KubeUnavailable", "Cause": "list pods: no useful answer after 4 attempts"},
        "compensation": {"untainted": True, "uncordoned": True},
    }


def test_a_drain_that_fails_before_a_round_looks_names_the_lost_answers_in_its_record_and_event(
    rig: Rig,
) -> None:
    """The drain fails before any round could look at the pod (its deadline, the API server down): its
    record and Event name the eviction whose answer was lost, which may have stopped the pod."""
    rig.pod("web-0")
    rig.pod("web-1")
    drain = rig.cordoned()
    _answer_lost(rig, "web-1")
    [last] = _rounds(rig, drain, 1)
    out = rig.drainer.record(_failed_with_api_down(drain, last))

    assert out["evicted"] == ["team-a/web-0"] and out["unconfirmed"] == ["team-a/web-1"], out
    message = [e["message"] for e in rig.api.list("Event")][-1]
    assert "after evicting 1 pod(s) (team-a/web-0)" in message, message
    assert "1 eviction(s) whose answer was lost (team-a/web-1)" in message, message


def test_a_bound_clients_eviction_cut_at_the_time_left_and_applied_is_counted_by_the_next_round(
    rig: Rig,
) -> None:
    """The real path: the drain function's client, bound by the invocation's time (Clients.drainer),
    gives up on web-1's eviction while the API server still works on it; the server applies it after
    the client left. The next round, in the next invocation, counts it evicted and evicts it no more."""
    rig.pod("web-0")
    rig.pod("web-1")
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=300)
    path = "/api/v1/namespaces/team-a/pods/web-1/eviction"
    rig.api.faults.delay(SLOW, path)
    drainer = _drainer_of_invocation(rig, _invocation_ending_in(STEP_MARGIN_SECONDS + 2))

    first = drainer.evict(drain)
    assert first["evicted"] == ["team-a/web-0"] and "KubeUnavailable" in first["interrupted"], first
    assert [u["pod"] for u in first["unconfirmed"]] == ["team-a/web-1"], first
    landed = time.monotonic() + SLOW + 5
    while not _terminating(rig, "web-1") and time.monotonic() < landed:
        time.sleep(0.1)  # the server applies the eviction after its delay, the client long gone
    assert _terminating(rig, "web-1")
    rig.api.faults.delay(0)
    rig.api.clear_requests()

    second = _drainer_of_invocation(rig, _invocation_ending_in(60)).evict(drain, first)

    assert second["evicted"] == ["team-a/web-0", "team-a/web-1"] and second["evicted_count"] == 2, second
    assert not [r.path for r in rig.api.requests if r.path == path], "evicted again"


def test_an_eviction_that_fails_for_good_is_raised_at_its_second_try(rig: Rig) -> None:
    """web-1's evictions fail every time, never applied (a webhook on pods/eviction answering 503 past
    the retries). The first round reports it unconfirmed; the next finds it running and, its eviction
    failing again with nothing evicted, raises for the Retry and Catch as before, instead of reporting
    it again each round until the deadline."""
    rig.pod("web-0")
    rig.pod("web-1")
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=300)
    evict = rig.kube.evict

    def refused(namespace: str, pod: str, grace_period_seconds: int | None = None, *, uid: str = "") -> None:
        if pod == "web-1":
            raise KubeUnavailable(
                f"evict pod {namespace}/{pod}: no useful answer after 4 attempts (last: 503)"
            )
        evict(namespace, pod, grace_period_seconds, uid=uid)

    rig.kube.evict = refused  # type: ignore[method-assign]
    [first] = _rounds(rig, drain, 1)
    assert [u["pod"] for u in first["unconfirmed"]] == ["team-a/web-1"], first

    with pytest.raises(KubeUnavailable):
        rig.drainer.evict(drain, first)


def _not_sent_for(rig: Rig, name: str) -> None:
    """The drain's client bound by an invocation's time (``KubeClient.within``) that runs out right
    before pod ``name``'s eviction: the pod and node reads before it pass, the eviction then has less
    than ``LEAST_ATTEMPT_SECONDS`` to start and is not sent at all."""
    left = [60.0]
    bound = rig.kube.within(lambda: left[0])
    read_pod, get_node = bound.read_pod, bound.get_node
    armed = [False]

    def read(namespace: str, pod: str) -> Any:
        armed[0] = pod == name
        return read_pod(namespace, pod)

    def node(node_name: str) -> Any:
        answer = get_node(node_name)
        if armed[0]:
            left[0] = 0.5  # the invocation's time for calls all but spent: the eviction is not sent
        return answer

    bound.read_pod, bound.get_node = read, node  # type: ignore[method-assign]
    rig.drainer.kube = bound


def test_an_eviction_not_sent_for_lack_of_time_is_not_reported_as_a_lost_answer(rig: Rig) -> None:
    """An eviction the bound client never sent (too little of the invocation's time to start it) cannot
    have been applied: the pod is not evicted yet (``interrupted``), not named as an eviction whose answer
    was lost (in ``unconfirmed``, then in a failed drain's record and Event)."""
    rig.pod("web-0")
    rig.pod("web-1")
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=300)
    _not_sent_for(rig, "web-1")

    first = rig.drainer.evict(drain)

    assert first["evicted"] == ["team-a/web-0"] and "not sent" in first["interrupted"], first
    assert "unconfirmed" not in first, first
    [why] = [r["reason"] for r in first["remaining"] if r["pod"] == "team-a/web-1"]
    assert why.startswith("not evicted yet"), why


def test_a_first_eviction_not_sent_for_lack_of_time_is_raised_for_the_retry(rig: Rig) -> None:
    """Nothing evicted and nothing sent: nothing to report, and a Retry (a new invocation, its whole time)
    does better than a round each ``poll_seconds``; raised as before fix61f."""
    rig.pod("web-0")
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=300)
    _not_sent_for(rig, "web-0")

    with pytest.raises(KubeUnavailable, match="not sent"):
        rig.drainer.evict(drain)


def _agents(rig: Rig, *names: str) -> None:
    """DaemonSet pods that opt in to the eviction (enable-ds-eviction "true") on the drained node."""
    for name in names:
        pod = objects.daemonset_pod(name, NODE, ds=name)
        pod["metadata"].setdefault("annotations", {})[ENABLE_DS_EVICTION] = "true"
        rig.api.add(pod)


def _agent_terminating(rig: Rig, name: str) -> bool:
    pod = rig.api.get("Pod", name, "kube-system")
    return pod is not None and "deletionTimestamp" in pod["metadata"]


def test_a_daemonset_eviction_whose_answer_was_lost_is_counted_by_the_next_round(rig: Rig) -> None:
    """agent-a's eviction is applied and its answer lost. Before, the round named it nowhere: not in
    ``daemonsets``, not in ``unconfirmed``, and the drain, done, went on to terminate: no round looked
    at it again, and no record named it. Now it is unconfirmed, the drain not done until the next round,
    which finds it terminating and counts it among the DaemonSet pods evicted, evicting it no more."""
    _agents(rig, "agent-a", "agent-b")
    drain = rig.cordoned(reason="by hand", poll_seconds=5, deadline_seconds=300)
    _answer_lost(rig, "agent-a")

    first = rig.drainer.evict(drain)

    assert first["done"] is False, "the drain went on with the lost answer never looked at"
    assert [u["pod"] for u in first["unconfirmed"]] == ["kube-system/agent-a"], first
    assert _agent_terminating(rig, "agent-a")
    rig.clock.advance(drain.poll_seconds)
    second = rig.drainer.evict(drain, first)
    assert second["done"] and "unconfirmed" not in second, second
    assert sorted(second["daemonsets"]) == ["kube-system/agent-a", "kube-system/agent-b"], second
    evictions = [r.path for r in rig.api.requests if r.path.endswith("/eviction")]
    assert sum("agent-a" in p for p in evictions) == 1, evictions


def test_a_daemonset_eviction_lost_and_never_applied_is_sent_again(rig: Rig) -> None:
    _agents(rig, "agent-a")
    drain = rig.cordoned(reason="by hand", poll_seconds=5, deadline_seconds=300)
    _answer_lost(rig, "agent-a", applied=False)

    first = rig.drainer.evict(drain)
    assert first["done"] is False and not _agent_terminating(rig, "agent-a"), first
    rig.clock.advance(drain.poll_seconds)
    second = rig.drainer.evict(drain, first)

    assert second["done"] and second["daemonsets"] == ["kube-system/agent-a"], second
    assert "unconfirmed" not in second and _agent_terminating(rig, "agent-a"), second


def test_a_failed_drain_names_a_daemonset_eviction_whose_answer_was_lost(rig: Rig) -> None:
    _agents(rig, "agent-a")
    drain = rig.cordoned(reason="by hand", poll_seconds=5, deadline_seconds=300)
    _answer_lost(rig, "agent-a")
    last = rig.drainer.evict(drain)
    out = rig.drainer.record(_failed_with_api_down(drain, last))

    assert out["unconfirmed"] == ["kube-system/agent-a"], out
    message = [e["message"] for e in rig.api.list("Event")][-1]
    assert "1 eviction(s) whose answer was lost (kube-system/agent-a)" in message, message


def _held_and_lost(rig: Rig) -> Any:
    """db-0, which a budget holds, and web-1, whose eviction is applied and its answer lost: the first
    round blocks the one and leaves the other unconfirmed."""
    rig.pod("db-0", app="db")
    rig.api.add(objects.pdb("db", "team-a", {"app": "db"}, min_available=1))
    rig.pod("web-1")
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=30)
    _answer_lost(rig, "web-1")
    first = rig.drainer.evict(drain)
    assert [u["pod"] for u in first["unconfirmed"]] == ["team-a/web-1"], first
    return drain, first


def test_a_round_at_the_deadline_that_learns_a_lost_answer_landed_reports_it_before_timing_out(
    rig: Rig,
) -> None:
    """The round after the lost answer comes past the deadline with db-0 still held: it raised
    DrainTimeout, and what it had learnt (web-1 evicted) died with its output: the record, reading the
    round before, named web-1 an eviction whose answer was lost. Now that round reports web-1 evicted,
    and the next one times out, so the record counts it."""
    drain, first = _held_and_lost(rig)
    rig.clock.advance(31)

    second = rig.drainer.evict(drain, first)

    # gone by now (its grace ended at the deadline): evicted by this drain or deleted by another hand
    assert second["evicted_or_deleted"] == ["team-a/web-1"] and "unconfirmed" not in second, second
    assert second["done"] is False, second
    rig.clock.advance(drain.poll_seconds)
    with pytest.raises(DrainTimeout, match="team-a/db-0") as caught:
        rig.drainer.evict(drain, second)
    state = {
        "drain": drain.model_dump(),
        "round": second,
        "error": {"Error": "DrainTimeout", "Cause": str(caught.value)},
        "compensation": {"untainted": True, "uncordoned": True},
    }
    out = rig.drainer.record(state)
    assert out["evicted_or_deleted"] == ["team-a/web-1"] and "unconfirmed" not in out, out
    message = [e["message"] for e in rig.api.list("Event")][-1]
    assert "after 1 pod(s) evicted or deleted by another hand (team-a/web-1)" in message, message


def test_a_round_that_learns_a_lost_answer_landed_reports_it_before_an_api_error(rig: Rig) -> None:
    """The same before the deadline, db-0's eviction now failing (the API server down): the round,
    having evicted nothing itself, raised the error and took web-1's confirmation with it; now it ends
    ``interrupted``, reporting web-1, and the next round raises the error if it is still there."""
    drain, first = _held_and_lost(rig)
    evict = rig.kube.evict

    def down(namespace: str, pod: str, grace_period_seconds: int | None = None, *, uid: str = "") -> None:
        if pod == "db-0":
            raise KubeUnavailable("evict pod team-a/db-0: connection refused", sent=False)
        evict(namespace, pod, grace_period_seconds, uid=uid)

    rig.kube.evict = down  # type: ignore[method-assign]
    rig.clock.advance(drain.poll_seconds)

    second = rig.drainer.evict(drain, first)

    assert second["evicted"] == ["team-a/web-1"] and "unconfirmed" not in second, second
    assert "connection refused" in second["interrupted"] and second["done"] is False, second
    rig.clock.advance(drain.poll_seconds)
    with pytest.raises(KubeUnavailable, match="connection refused"):
        rig.drainer.evict(drain, second)


def test_a_forced_drains_success_event_names_an_eviction_whose_answer_was_lost(rig: Rig) -> None:
    """A forced drain past its deadline whose rounds were cut short twice goes on to terminate with a
    pod still unconfirmed: its record named it, its Event ("evicted 1 pod(s), terminated ...") did not,
    so `kubectl describe node` said nothing of a pod the drain may have stopped."""
    drain = rig.cordoned(force=True)
    last = {
        "rounds": 2,
        "evicted": ["team-a/web-0"],
        "evicted_count": 1,
        "done": True,
        "forced": True,
        "unconfirmed": [{"pod": "team-a/web-2", "uid": "u-2"}],
    }
    state = {"drain": drain.model_dump(), "round": last, "terminated": {"activity_id": "a-1"}}

    out = rig.drainer.record(state, "terminated")

    assert out["unconfirmed"] == ["team-a/web-2"], out
    message = [e["message"] for e in rig.api.list("Event")][-1]
    assert "evicted 1 pod(s), and 1 eviction(s) whose answer was lost (team-a/web-2)" in message, message


def test_an_eviction_the_api_server_refused_503_is_not_taken_for_a_lost_answer(rig: Rig) -> None:
    """The API server answered web-1's eviction 503 "apiserver is shutting down" on every attempt: it
    served none (it writes that answer before any handler runs), so the pod is not evicted yet, not
    ``unconfirmed`` (which a failed drain's record names as possibly stopped)."""
    rig.pod("web-0")
    rig.pod("web-1")
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=300)
    path = "/api/v1/namespaces/team-a/pods/web-1/eviction"
    rig.api.faults.fail_next(1, 503, path, message="apiserver is shutting down")

    first = rig.drainer.evict(drain)

    assert first["evicted"] == ["team-a/web-0"] and "503" in first["interrupted"], first
    assert "unconfirmed" not in first, first


def test_a_node_whose_eviction_lost_its_answer_is_occupied_for_its_daemonset_pods(rig: Rig) -> None:
    """web-0's eviction is applied, its answer lost, and the pod is gone by the next round: evicted or
    deleted by another hand, not counted evicted. The node had a pod to drain all the same, so its
    DaemonSet pods go as an occupied node's do (cluster-autoscaler's default: evicted), not as an empty
    node's (kept). Before, the round read the node's state from ``evicted_count`` alone, 0 here."""
    rig.pod("web-0")
    rig.api.add(objects.daemonset_pod("agent-a", NODE, ds="agent-a"))  # no opt-in: the default decides
    drain = rig.cordoned(reason="by hand", poll_seconds=5, deadline_seconds=300)
    _answer_lost(rig, "web-0")
    first = rig.drainer.evict(drain)
    rig.api.delete("Pod", "web-0", "team-a")  # its kubelet confirmed the deletion
    rig.clock.advance(drain.poll_seconds)

    second = rig.drainer.evict(drain, first)

    assert second["evicted_or_deleted"] == ["team-a/web-0"] and second["evicted_count"] == 0, second
    assert second["done"] and second["daemonsets"] == ["kube-system/agent-a"], second
