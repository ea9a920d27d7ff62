# ruff: noqa: F811  (the rig fixture of test_drain_steps is imported and taken by name)
"""What bounds a drain's rounds (fix61a).

1. A forced drain past its deadline whose every round the API server cuts short after an eviction
   (a pod that tolerates the cordon comes back each round; another pod's eviction fails each time)
   was never done: an interrupted round is not forced, so it polled on until the execution's history
   ran out, the node cordoned and the instance left running. It gets one more round to reach the pods
   it did not, then goes on to terminate as a forced drain past its deadline does.
2. The DaemonSet pods a drain evicted once the rest was gone were in no record, Event or failure
   note, and a round that abandoned the drain after them dropped them from its output.
3. ``evicted_marked`` matched the listing after the evictions by name: a pod made again under the
   name of one evicted (a StatefulSet's) was reported as evicted while marked.
4. A round whose call hangs (a slow API server, the client's retries and timeouts) ran the drain
   function into its timeout, where Lambda stops it and the round's evictions are in no output: every
   Kubernetes call of a step now ends by the invocation's time left, less what the step needs after.

On the rig of test_drain_steps (the Kubernetes API emulator and a fake Auto Scaling)."""

from __future__ import annotations

import contextlib
import json
import time
from types import SimpleNamespace
from typing import Any

import pytest
from test_drain_round_loose_ends import _after_eviction_of
from test_drain_steps import CLUSTER, Rig, rig  # noqa: F401 (the fixture)

from spillway.adapters.kube import KubeClient
from spillway.clients import Clients
from spillway.config import PlannerConfig
from spillway.errors import KubeUnavailable
from spillway.model.calltime import STEP_MARGIN_SECONDS


def _every_round_cut_short(rig: Rig) -> None:
    """web-1's eviction fails every time (a webhook on pods/eviction answering 5xx), and each other pod
    evicted is put back (a replica that tolerates the cordon): every round evicts a pod, then is cut."""
    evict = rig.kube.evict
    made = [0]

    def flaky(namespace: str, name: str, grace_period_seconds: int | None = None, *, uid: str = "") -> None:
        if name == "web-1":
            raise KubeUnavailable(f"evict pod {namespace}/{name}: no useful answer after 4 attempts")
        evict(namespace, name, grace_period_seconds, uid=uid)
        made[0] += 1
        rig.pod(f"a-{made[0]}")

    rig.kube.evict = flaky  # type: ignore[method-assign]


def test_a_forced_drain_past_its_deadline_cut_short_every_round_ends_and_goes_on_to_terminate(
    rig: Rig,
) -> None:
    rig.pod("a-0")  # a replica that tolerates the cordon: its ReplicaSet puts one back each round
    rig.pod("web-1")  # its eviction fails every time (a webhook on pods/eviction answering 5xx)
    drain = rig.cordoned(force=True, poll_seconds=5, deadline_seconds=30)
    rig.clock.advance(31)
    _every_round_cut_short(rig)
    rounds: list[dict[str, Any]] = []
    previous: dict[str, Any] | None = None
    for _ in range(6):
        previous = rig.drainer.evict(drain, previous)
        rounds.append(previous)
        if previous["done"]:
            break
        rig.clock.advance(drain.poll_seconds)

    assert rounds[0]["interrupted"] and rounds[0]["done"] is False, rounds[0]
    assert len(rounds) == 2, [r.get("interrupted") for r in rounds]
    last = rounds[-1]
    assert last["done"] is True and last["forced"] is True, last
    assert "team-a/web-1" in {r["pod"] for r in last["remaining"]}, last
    check = rig.drainer.check(drain)
    assert check["ready"] is True and check["forced"] is True, check


def test_a_forced_drain_cut_short_before_its_deadline_gets_one_more_round_past_it(rig: Rig) -> None:
    """A round cut short before the deadline is no round past it: the first round past the deadline cut
    short too went on to terminate at once, its pods not reached going with the instance, where the
    drain promises one more round to evict them (a flaky API server cuts the rounds before the deadline
    as well as after it)."""
    rig.pod("a-0")
    rig.pod("web-1")
    drain = rig.cordoned(force=True, poll_seconds=5, deadline_seconds=30)
    _every_round_cut_short(rig)
    before = rig.drainer.evict(drain)
    assert before["interrupted"] and before["done"] is False, before
    rig.clock.advance(31)

    first_past = rig.drainer.evict(drain, before)
    assert first_past["interrupted"] and first_past["done"] is False, first_past
    rig.clock.advance(drain.poll_seconds)
    second_past = rig.drainer.evict(drain, first_past)
    assert second_past["done"] is True and second_past["forced"] is True, second_past


# 2. The DaemonSet pods a drain evicted are in its record ------------------------------------------


def _events(rig: Rig) -> list[str]:
    return [e["message"] for e in rig.api.list("Event")]


def _ended(drain: Any, rounds: int, agents: list[str], **state: Any) -> dict[str, Any]:
    """A drain's state at its record step: its last round evicted web-0 and the DaemonSet pods ``agents``."""
    evicted = {"rounds": rounds, "evicted": ["team-a/web-0"], "evicted_count": 1, "daemonsets": agents}
    return {"drain": drain.model_dump(), "round": evicted, **state}


def test_a_terminated_drains_record_and_event_name_the_daemonset_pods_it_evicted(rig: Rig) -> None:
    drain = rig.cordoned()
    agents = ["kube-system/agent-a", "kube-system/agent-b"]
    state = _ended(drain, 2, agents, terminated={"activity_id": "a-1", "status": "InProgress"})

    out = rig.drainer.record(state, "terminated")

    assert out["daemonsets"] == ["kube-system/agent-a", "kube-system/agent-b"], out
    assert "evicted 1 pod(s) and 2 DaemonSet pod(s)" in _events(rig)[-1], _events(rig)


def test_a_failed_drains_event_names_the_daemonset_pods_it_evicted(rig: Rig) -> None:
    drain = rig.cordoned()
    state = _ended(
        drain,
        3,
        ["kube-system/agent-a"],
        error={"Error": "DrainTimeout", "Cause": "Node 'x': 1 pod(s) still there at the deadline"},
        compensation={"untainted": True, "uncordoned": True},
    )

    out = rig.drainer.record(state)

    assert out["outcome"] == "timeout" and out["daemonsets"] == ["kube-system/agent-a"], out
    message = _events(rig)[-1]
    assert "after evicting 2 pod(s) (team-a/web-0, kube-system/agent-a)" in message, message


def test_a_round_that_abandons_after_the_daemonset_evictions_keeps_them_for_the_record(rig: Rig) -> None:
    """The DaemonSet round was done, a pod came to the node before the terminate step, and the next
    round abandoned the plan's drain: its output dropped the DaemonSet pods evicted, and the record of
    the cancelled drain named none of them."""
    drain = rig.cordoned(plan_id="plan-1", planned_at="2026-01-01T00:00:00Z")  # a node it saw idle
    previous = {"rounds": 1, "evicted": [], "evicted_count": 0, "daemonsets": ["kube-system/agent-a"]}
    rig.pod("late-0", app="late")  # work the plan did not see

    out = rig.drainer.evict(drain, previous)

    assert out.get("abandon") and out["daemonsets"] == ["kube-system/agent-a"], out
    record = rig.drainer.record({"drain": drain.model_dump(), "round": out,
                                 "compensation": {"uncordoned": True}}, "cancelled")  # fmt: skip
    assert record["daemonsets"] == ["kube-system/agent-a"], record
    assert "evicting 0 pod(s) and 1 DaemonSet pod(s)" in _events(rig)[-1], _events(rig)


# 3. evicted_marked: the pod evicted, by uid ------------------------------------------------------


def test_a_pod_made_again_under_the_name_of_one_evicted_is_not_reported_as_evicted_marked(rig: Rig) -> None:
    """web-1 is evicted and gone at once; its controller makes web-1 again (a StatefulSet's ordinal
    name) on the node, which it tolerates, its template marked do-not-disrupt since. The listing after
    the evictions matched by name and reported the new pod, never evicted, as evicted while marked (a
    Warning Event on the Node); it is another pod (another uid), and nothing evicted is marked."""
    rig.pod("web-0")
    rig.pod("web-1")
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=300)

    def made_again() -> None:
        rig.api.delete("Pod", "web-1", "team-a")
        rig.pod("web-1", annotations={"karpenter.sh/do-not-disrupt": "true"})
        again = rig.api.get("Pod", "web-1", "team-a")
        assert again is not None
        again["metadata"]["uid"] = "made-again-0001"
        rig.api.update("Pod", again)

    _after_eviction_of(rig, "web-1", made_again)

    first = rig.drainer.evict(drain)

    assert sorted(first["evicted"]) == ["team-a/web-0", "team-a/web-1"], first
    assert "evicted_marked" not in first, first["evicted_marked"]
    assert not [e for e in rig.api.list("Event") if e["reason"] == "SpillwayEvictedMarked"]


# 4. A round ends, and says what it evicted, within its invocation's time ---------------------------

SLOW = 8.0  # seconds the API server takes to answer the slow call: more than the invocation has left


def _invocation_ending_in(seconds: float) -> Any:
    """A Lambda context's get_remaining_time_in_millis, ``seconds`` from now."""
    end = time.monotonic() + seconds
    return lambda: max(0, int((end - time.monotonic()) * 1000))


def _drainer_of_invocation(rig: Rig, remaining_ms: Any) -> Any:
    """The drain steps as the drain function builds them for one invocation (Clients.drainer)."""
    config = SimpleNamespace(cluster_name=CLUSTER, regions=("us-east-1", "us-west-2"),
                             lifecycle_hook_names=(), planner=PlannerConfig())  # fmt: skip
    aws_clients = SimpleNamespace(settings=SimpleNamespace(worst_call_seconds=lambda: 49.0))
    executions = SimpleNamespace(status=lambda arn: "RUNNING")
    clients = Clients(
        config, None, aws_clients, rig.cloud, None, None, None, None, executions, _kube=rig.kube
    )  # type: ignore[arg-type]
    drainer = clients.drainer(lambda *_: None, remaining_ms)
    drainer.clock = rig.clock
    drainer.ledger = rig.drainer.ledger
    return drainer


def test_a_round_whose_eviction_hangs_ends_within_the_invocation_and_names_the_pods_it_evicted(
    rig: Rig,
) -> None:
    """web-1's eviction is answered after 8 s (the API server slow; the client would wait up to 21 s
    for it, then try again three times). The invocation has 3 s left after its margin: Lambda would
    stop it in the call, and web-0, evicted already, would be in no output, record or Event. Now the
    call ends with the invocation's time (less the margin), and the round reports web-0."""
    rig.pod("web-0")
    rig.pod("web-1")
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=300)
    rig.api.faults.delay(SLOW, "/api/v1/namespaces/team-a/pods/web-1/eviction")
    invocation = STEP_MARGIN_SECONDS + 3
    drainer = _drainer_of_invocation(rig, _invocation_ending_in(invocation))

    began = time.monotonic()
    first = drainer.evict(drain)
    took = time.monotonic() - began

    assert took < invocation - STEP_MARGIN_SECONDS + 1, took
    assert first["evicted"] == ["team-a/web-0"] and first["done"] is False, first
    assert "KubeUnavailable: evict pod team-a/web-1" in first["interrupted"], first
    rig.api.faults.delay(0)


def test_a_bound_client_starts_no_attempt_and_no_wait_past_the_time_left(rig: Rig) -> None:
    """The adapter alone: four attempts of a slow read, and the waits between them, end by the time left."""
    kube = KubeClient.for_url(rig.api.url, max_attempts=4, request_timeout=10, max_retry_after=30)
    rig.api.faults.delay(SLOW, "/api/v1/nodes")
    end = time.monotonic() + 2.0
    bound = kube.within(lambda: end - time.monotonic())

    began = time.monotonic()
    with pytest.raises(KubeUnavailable, match="left"):
        bound.get_node("ip-10-0-1-10.ec2.internal")
    assert time.monotonic() - began < 3.0
    rig.api.faults.delay(0)
    assert kube.get_node("ip-10-0-1-10.ec2.internal").metadata.name == "ip-10-0-1-10.ec2.internal"
    kube.close()


def _trickling_server(body: bytes, every: float) -> tuple[str, Any]:
    """An HTTP server answering any request 200 with ``body`` (its whole Content-Length announced), one
    byte every ``every`` seconds: a server (or a proxy before it) that is slow within the answer."""
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            conn.sendall(head.encode())
            for byte in body:
                if stop.wait(every):
                    return
                with contextlib.suppress(OSError):
                    conn.sendall(bytes([byte]))

    threading.Thread(target=serve, daemon=True).start()

    def close() -> None:
        stop.set()
        listener.close()

    return f"http://127.0.0.1:{listener.getsockname()[1]}", close


def test_a_bound_clients_answer_trickling_in_within_one_chunk_is_dropped_at_the_time_left() -> None:
    """The answer is read a chunk at a time and the time left checked between, but one read of 64 KiB
    waits for 64 KiB or the answer's end, each socket read given the whole time left: a Node of 60
    bytes sent a byte every 0.2 s held a call with 1.5 s left for 12 s. Each read now takes what one
    socket read has (urllib3's read1), so the call ends by the time left."""
    body = json.dumps({"kind": "Node", "apiVersion": "v1", "metadata": {"name": "ip-10-0-1-10"}}).encode()
    url, close = _trickling_server(body, every=0.2)
    kube = KubeClient.for_url(url, max_attempts=1, request_timeout=10)
    end = time.monotonic() + 1.5
    began = time.monotonic()
    try:
        with pytest.raises(KubeUnavailable):
            kube.within(lambda: end - time.monotonic()).get_node("ip-10-0-1-10")
        took = time.monotonic() - began
    finally:
        close()
        kube.close()
    assert took < 2.5, took
