# ruff: noqa: F811  (the rig fixture of test_drain_steps is imported and taken by name)
"""The time one eviction round may take (review59a). A round evicts its pods one after another, and
since fix59a each eviction of a drain without force costs three calls to the API server (the pod and
the Node read again, then the Eviction), where it cost one. The drain function times out at 120 s
(template.yaml, DrainFunction), and a round that runs past it is lost whole: Step Functions catches the
timeout and compensates, the pods evicted so far stopped for nothing and never reported. A round of
500 pods at 80 ms a call took those 120 s. So a round starts no eviction once it has run
``ROUND_SECONDS``: the pods left are the next round's, ``poll_seconds`` later, their reason saying
so. On the rig of test_drain_steps (the Kubernetes API emulator and a fake Auto Scaling), the API
server made slow by advancing the drain's clock at each eviction."""

from __future__ import annotations

from typing import Any

import pytest
from test_drain_steps import Rig, rig  # noqa: F401 (the fixture)

from spillway.act.drain import ROUND_SECONDS

CALL_SECONDS = 3  # each eviction, with its reads, takes this long on the drain's clock


def _slow_evictions(rig: Rig) -> None:
    evict = rig.kube.evict

    def slow(namespace: str, name: str, grace_period_seconds: int | None = None, *, uid: str = "") -> None:
        evict(namespace, name, grace_period_seconds, uid=uid)
        rig.clock.advance(CALL_SECONDS)

    rig.kube.evict = slow  # type: ignore[method-assign]


@pytest.mark.parametrize("force", [False, True], ids=["drain", "forced"])
def test_a_round_starts_no_eviction_past_its_time_and_the_next_round_goes_on(rig: Rig, force: bool) -> None:
    """Thirty pods at 3 s an eviction: the round evicted all thirty in 90 s (500 pods at 80 ms a call
    outran the function's 120 s the same way). Now it stops at its ``ROUND_SECONDS`` (60 s: twenty
    pods), says why of each pod it left, and the next round evicts them."""
    pods = [f"web-{i:02d}" for i in range(30)]
    for name in pods:
        rig.pod(name)
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=900, force=force)
    _slow_evictions(rig)

    first: dict[str, Any] = rig.drainer.evict(drain)

    within = ROUND_SECONDS // CALL_SECONDS
    assert first["evicted_count"] == within, first
    assert first["done"] is False
    left = {r["pod"]: r["reason"] for r in first["remaining"]}
    assert all(f"{ROUND_SECONDS} s" in left[f"team-a/{name}"] for name in pods[within:]), left
    assert first["evicted"] == [f"team-a/{name}" for name in pods[:within]]

    rig.clock.advance(drain.poll_seconds)
    second = rig.drainer.evict(drain, first)

    assert second["evicted_count"] == len(pods), second
    assert sorted(second["evicted"]) == [f"team-a/{name}" for name in pods]
