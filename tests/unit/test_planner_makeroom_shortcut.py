"""Make room passes over a host whose pods fit nowhere without a trial (Consolidation._out_of_reach):
the shortcut says "does not fit" only where the trial (Consolidation._fit) would, launching nodes
included, so the plans are the ones trying every host gives.

Built like test_planner_makeroom: m5.2xlarge nodes (7910m CPU) running replicas that may move; ``big``
pods (7 CPU) fit no node that runs anything.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from plan_world import GPU_TOLERATION, World
from test_planner_consolidation import UNDER, half_full, replicas

from spillway.planner import codes
from spillway.planner.consolidation import Candidate, Consolidation


def _big_replicas(count: int, *, launching: bool) -> tuple[World, list[str]]:
    """``count`` cpu nodes each running one replica of 5 CPUs (2910m left: no other cpu node takes
    one); with ``launching``, a group "spare" whose nodes carry the GPU taint (the replicas tolerate
    it, ``big`` pods do not), one node busy with 7 CPUs and a second launching (an earlier plan's),
    empty: the one place a replica fits."""
    w = World(regions=("us-east-1",))
    nodes = sorted(w.group("cpu", "m5.2xlarge", nodes=count, max_size=10))
    for i, n in enumerate(nodes):
        replicas(w, n, f"web{i}", 1, cpu="5", tolerations=[GPU_TOLERATION])
    if launching:
        (spare,) = w.group("spare", "m5.2xlarge", nodes=1, max_size=10, gpu_taint=True)
        w.groups["spare"]["DesiredCapacity"] = 2  # a second node is launching
        w.pods("busy", 1, cpu="7", memory="8Gi", node_name=spare, tolerations=[GPU_TOLERATION])
    return w, nodes


def test_room_is_made_when_the_moved_pods_fit_only_on_a_launching_node() -> None:
    w, nodes = _big_replicas(2, launching=True)
    (big,) = w.pods("big", 1, cpu="7", memory="1Gi")

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    (drain,) = result.drain
    assert (drain.code, drain.terminate) == (codes.MAKE_ROOM, False) and drain.node in nodes
    assert {p.pod: p.node for p in result.placements}[big] == drain.node
    assert all(s.group != "cpu" for s in result.scale_up)  # no new cpu node for big


WORLDS: dict[str, Callable[[], World]] = {
    "room elsewhere": lambda: half_full()[0],
    "room on a launching node only": lambda: _big_replicas(2, launching=True)[0],
    "no room elsewhere": lambda: _big_replicas(2, launching=False)[0],
    "many hosts, room on none": lambda: _big_replicas(5, launching=False)[0],
    # each pod fits somewhere alone, not both: the trial's answer
    "room for one pod of two": lambda: half_full(cpu="2500m")[0],
}


@pytest.mark.parametrize("world", sorted(WORLDS))
def test_the_shortcut_says_out_of_reach_only_where_the_trial_fails(
    world: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = Consolidation._out_of_reach
    answers: list[bool] = []

    def checked(self: Consolidation, candidate: Candidate) -> bool:
        out = real(self, candidate)
        if out:  # the long way: a trial, which puts back whatever it took when it fails
            assert self._fit(candidate, make_room=True) is None
        answers.append(out)
        return out

    monkeypatch.setattr(Consolidation, "_out_of_reach", checked)
    w = WORLDS[world]()
    w.pods("big", 2, cpu="7", memory="1Gi")

    w.plan(max_scale_in_fraction=1.0, **UNDER)

    # the first host tried: passed over without a trial where its pod fits nowhere (on a launching
    # node it does; once the first swap takes that node, the second host's pod fits nowhere)
    assert answers and answers[0] == (world in ("no room elsewhere", "many hosts, room on none"))
