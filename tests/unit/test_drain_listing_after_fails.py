# ruff: noqa: F811  (the rig fixture of test_drain_steps is imported and taken by name)
"""A round whose listing after its evictions fails (review60c).

fix60c: "A call that fails once a round has evicted pods ... ends the round there: it reports the
pods it evicted" (README). But the round's last call, the listing of the node's pods after its
evictions (to tell what is left), still raised: the error took every pod the round had evicted with
it, named by no output, record or Event, as before fix60c. Now it ends the round as any other call
does: the round reports its evictions (``interrupted``) and the next round, listing again, goes on
or raises. On the rig of test_drain_steps."""

from __future__ import annotations

from typing import Any

import pytest
from test_drain_round_loose_ends import _after_eviction_of
from test_drain_steps import Rig, rig  # noqa: F401 (the fixture)

from spillway.errors import KubeUnavailable


def _listing_down(rig: Rig) -> None:
    def down(*_: Any, **__: Any) -> Any:
        raise KubeUnavailable("list pods: the API server did not answer (connection refused)")

    rig.kube.pods_on_node = down  # type: ignore[method-assign]


def test_a_round_whose_listing_after_its_evictions_fails_reports_the_pods_it_evicted(rig: Rig) -> None:
    rig.pod("web-0")
    rig.pod("web-1")
    drain = rig.cordoned(poll_seconds=5, deadline_seconds=300)
    listing = rig.kube.pods_on_node
    _after_eviction_of(rig, "web-1", lambda: _listing_down(rig))

    first = rig.drainer.evict(drain)

    assert first["evicted"] == ["team-a/web-0", "team-a/web-1"] and first["evicted_count"] == 2, first
    assert first["done"] is False and "KubeUnavailable" in first["interrupted"], first
    assert "evicted_marked" not in first
    with pytest.raises(KubeUnavailable):  # still down: the state machine's Retry, then its Catch
        rig.drainer.evict(drain, first)
    rig.kube.pods_on_node = listing  # type: ignore[method-assign]
    rig.api.delete("Pod", "web-0", "team-a")  # their kubelet confirms the evictions
    rig.api.delete("Pod", "web-1", "team-a")
    rig.clock.advance(drain.poll_seconds)
    second = rig.drainer.evict(drain, first)
    assert second["done"] and second["evicted_count"] == 2, second
