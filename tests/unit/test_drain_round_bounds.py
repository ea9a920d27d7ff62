# ruff: noqa: F811  (the rig fixture of test_drain_steps is imported and taken by name)
"""What bounds a drain's rounds (fix61a).

1. A forced drain past its deadline whose every round the API server cuts short after an eviction
   (a pod that tolerates the cordon comes back each round; another pod's eviction fails each time)
   was never done: an interrupted round is not forced, so it polled on until the execution's history
   ran out, the node cordoned and the instance left running. It gets one more round to reach the pods
   it did not, then goes on to terminate as a forced drain past its deadline does.

On the rig of test_drain_steps (the Kubernetes API emulator and a fake Auto Scaling)."""

from __future__ import annotations

from typing import Any

from test_drain_steps import Rig, rig  # noqa: F401 (the fixture)

from spillway.errors import KubeUnavailable


def test_a_forced_drain_past_its_deadline_cut_short_every_round_ends_and_goes_on_to_terminate(
    rig: Rig,
) -> None:
    rig.pod("a-0")  # a replica that tolerates the cordon: its ReplicaSet puts one back each round
    rig.pod("web-1")  # its eviction fails every time (a webhook on pods/eviction answering 5xx)
    drain = rig.cordoned(force=True, poll_seconds=5, deadline_seconds=30)
    rig.clock.advance(31)
    evict = rig.kube.evict
    made = [0]

    def flaky(namespace: str, name: str, grace_period_seconds: int | None = None, *, uid: str = "") -> None:
        if name == "web-1":
            raise KubeUnavailable(f"evict pod {namespace}/{name}: no useful answer after 4 attempts")
        evict(namespace, name, grace_period_seconds, uid=uid)
        made[0] += 1
        rig.pod(f"a-{made[0]}")

    rig.kube.evict = flaky  # type: ignore[method-assign]
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
