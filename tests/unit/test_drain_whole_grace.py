# ruff: noqa: F811  (the rig fixture of test_drain_steps is imported and taken by name)
"""A pod a plan moves at a cost (``whole_grace``: a consolidation's, a make room's) is evicted with its
whole terminationGracePeriodSeconds or not at all. The drain's deadline runs from its start, and each
eviction gives no more grace than the time left, so a replica a PodDisruptionBudget held for a while was
evicted with what was left and SIGKILLed mid-checkpoint: a move to save cost became a killed job. Such
a drain now gives up as at its deadline (the node given back, the pod running); a drain whose instance
goes anyway (a Spot notice's, one ahead of a scheduled action) still cuts. On the rig of
test_drain_steps (the Kubernetes API emulator and a fake Auto Scaling)."""

from __future__ import annotations

from typing import Any

import pytest
from test_drain_steps import CLUSTER, NODE, Rig, rig  # noqa: F401 (the fixture)

from spillway.act.drain import parse_request
from spillway.errors import DrainTimeout, InvalidDrainRequest
from spillway.local import objects

PLAN = "20261102T100000Z-abc"
TRAIN = "team-a/train-0"


def grace_pod(rig: Rig, name: str, grace: int, *, app: str = "train", priority: int = 0) -> None:
    raw = objects.pod(
        name, "team-a", node_name=NODE, labels={"app": app}, owner=("ReplicaSet", f"{app}-5d9c")
    )
    raw["spec"]["terminationGracePeriodSeconds"] = grace
    raw["spec"]["priority"] = priority
    rig.api.add(raw)


def blocked_by_budget(rig: Rig, app: str = "train") -> None:
    """A budget that allows no disruption of the app's one pod (minAvailable 1), until deleted."""
    rig.api.add(objects.pdb(app, "team-a", {"app": app}, min_available=1))


def lift_budget(rig: Rig, app: str = "train") -> None:
    rig.api.delete("PodDisruptionBudget", app, "team-a")


@pytest.fixture
def graces(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[int]]:
    """Every eviction the drain asks for, by pod: the grace it gives."""
    asked: dict[str, list[int]] = {}
    evict = rig.kube.evict

    def recording(namespace: str, name: str, **kw: Any) -> None:
        asked.setdefault(f"{namespace}/{name}", []).append(kw["grace_period_seconds"])
        evict(namespace, name, **kw)

    monkeypatch.setattr(rig.kube, "evict", recording)
    return asked


def consolidation(**more: Any) -> dict[str, Any]:
    """A plan's consolidation of the node moving train-0 at a cost, as act.planning.drain_item writes it."""
    return {"plan_id": PLAN, "consolidation": True, "pods": [TRAIN], "whole_grace": [TRAIN],
            "deadline_seconds": 900, "poll_seconds": 15, **more}  # fmt: skip


def lifted_after(rig: Rig, request: dict[str, Any], seconds: int) -> dict[str, Any]:
    """train-0 (600 s of grace) behind a budget that allows no disruption, drained by ``request``: the
    first round is held, the budget lifted ``seconds`` later, and the second round's outcome."""
    grace_pod(rig, "train-0", 600)
    blocked_by_budget(rig)
    drain = rig.cordoned(**request)
    first = rig.drainer.evict(drain)
    rig.clock.advance(seconds)
    lift_budget(rig)
    return rig.drainer.evict(drain, first)


def running(rig: Rig, name: str) -> bool:
    pod = rig.api.get("Pod", name, "team-a")
    return pod is not None and not pod["metadata"].get("deletionTimestamp")


def test_a_consolidation_gives_up_rather_than_evict_a_pod_it_moves_with_a_shortened_grace(
    rig: Rig, graces: dict[str, list[int]]
) -> None:
    """The brief's case: deadline 900 s, a replica with 600 s of grace behind a budget that blocks for
    400 s. It was evicted 400 s in with 500 s, and killed 100 s into its checkpoint. While 600 s are left
    the drain keeps asking with the whole 600; once fewer are, it gives up: DrainTimeout naming the pod,
    its grace and the seconds left, and the compensation gives the node back, the pod running."""
    grace_pod(rig, "train-0", 600)
    blocked_by_budget(rig)
    drain = rig.cordoned(**consolidation())

    first = rig.drainer.evict(drain)
    assert first["blocked"] == [TRAIN] and first["done"] is False
    rig.clock.advance(300)  # 600 s left: still the whole grace
    second = rig.drainer.evict(drain, first)
    assert second["blocked"] == [TRAIN]
    rig.clock.advance(1)  # 599 s left
    with pytest.raises(DrainTimeout) as caught:
        rig.drainer.evict(drain, second)

    words = str(caught.value)
    assert TRAIN in words and "terminationGracePeriodSeconds 600" in words and "only 599 s" in words
    assert "a PodDisruptionBudget allows no disruption now" in words  # why it is still there
    assert graces == {TRAIN: [600, 600]}  # never asked with less than its whole grace
    undone = rig.drainer.uncordon(drain)
    assert undone["uncordoned"] is True and not rig.node()["spec"].get("unschedulable")
    assert running(rig, "train-0")


def test_the_same_budget_lifted_in_time_lets_the_pod_go_with_its_whole_grace(
    rig: Rig, graces: dict[str, list[int]]
) -> None:
    second = lifted_after(rig, consolidation(), 300)

    assert second["evicted"] == [TRAIN] and graces == {TRAIN: [600, 600]}


def test_a_pod_whose_grace_equals_the_deadline_makes_the_consolidation_give_up_at_its_first_round(
    rig: Rig, graces: dict[str, list[int]]
) -> None:
    """grace == deadline: evicted 2 s after the drain's start it got 898 s of its 900."""
    grace_pod(rig, "train-0", 900)
    drain = rig.validated(**consolidation())
    rig.clock.advance(2)  # the cordon step
    rig.drainer.cordon(drain)

    with pytest.raises(DrainTimeout, match=r"terminationGracePeriodSeconds 900 and only 898 s"):
        rig.drainer.evict(drain)
    assert graces == {} and running(rig, "train-0")


@pytest.mark.parametrize(
    "request_",
    [
        # a Spot notice's: the instance goes whatever the drain does, what is left of the grace beats none
        {"leaving": True, "notice": "rebalance", "deadline_seconds": 900, "poll_seconds": 15},
        # a scheduled-shrink drain names its pods without whole_grace (act.planning.drain_item): Auto
        # Scaling terminates the node undrained when the action runs; so does an older build's consolidation
        consolidation(whole_grace=[]),
    ],
    ids=["spot-notice", "ahead-of-a-scheduled-action"],
)
def test_a_drain_without_whole_grace_still_cuts_the_grace_to_the_time_left(
    rig: Rig, graces: dict[str, list[int]], request_: dict[str, Any]
) -> None:
    """A budget holds train-0 400 s of the 900: it is evicted then with the 500 s left of its 600."""
    second = lifted_after(rig, request_, 400)

    assert second["evicted"] == [TRAIN] and graces == {TRAIN: [600, 500]}


def test_an_expendable_pod_the_consolidation_evicts_is_still_cut_and_the_drain_goes_on(
    rig: Rig, graces: dict[str, list[int]]
) -> None:
    """The plan moves web-0 at a cost (whole_grace) and kills the expendable batch-0 at will (named, not
    in whole_grace): a budget holding batch-0 past its grace's time does not make the drain give up."""
    grace_pod(rig, "web-0", 30, app="web")
    grace_pod(rig, "batch-0", 600, app="batch", priority=-100)
    blocked_by_budget(rig, "batch")
    drain = rig.cordoned(
        **consolidation(pods=["team-a/web-0", "team-a/batch-0"], whole_grace=["team-a/web-0"])
    )
    first = rig.drainer.evict(drain)
    assert first["evicted"] == ["team-a/web-0"] and first["blocked"] == ["team-a/batch-0"]
    rig.clock.advance(400)
    lift_budget(rig, "batch")

    second = rig.drainer.evict(drain, first)

    assert second["evicted"] == ["team-a/web-0", "team-a/batch-0"]
    assert graces == {"team-a/web-0": [30], "team-a/batch-0": [600, 500]}


def test_a_make_room_gives_up_the_same_way_its_node_staying_in_service(
    rig: Rig, graces: dict[str, list[int]]
) -> None:
    grace_pod(rig, "train-0", 100)
    blocked_by_budget(rig)
    drain = rig.cordoned(**consolidation(terminate=False, uncordon=True))
    first = rig.drainer.evict(drain)
    rig.clock.advance(801)  # 99 s left

    with pytest.raises(
        DrainTimeout, match=r"team-a/train-0 has terminationGracePeriodSeconds 100 and only 99 s"
    ):
        rig.drainer.evict(drain, first)
    assert rig.drainer.uncordon(drain)["uncordoned"] is True and running(rig, "train-0")


@pytest.mark.parametrize(
    ("request_", "words"),
    [
        (consolidation(whole_grace=["team-a/other-0"]), "team-a/other-0 is not among them"),
        (consolidation(leaving=True), "not with leaving"),
    ],
)
def test_whole_grace_names_pods_the_drain_moves_and_never_comes_with_leaving(
    request_: dict[str, Any], words: str
) -> None:
    with pytest.raises(InvalidDrainRequest, match=words) as caught:
        parse_request({"cluster": CLUSTER, "node": NODE, **request_})
    assert caught.value.field == "whole_grace"


def test_a_critical_pod_moved_at_a_cost_waits_for_the_others_and_then_may_have_too_little_left(
    rig: Rig, graces: dict[str, list[int]]
) -> None:
    """The sequence the planner now judges (spillway.planner.disruption.waits_for_others): deadline 90 s,
    a 30 s pod and a 30 s critical pod, each 30 + 60 within 90. The first round, 45 s in (the cordon step
    and the round's own start), evicts web-0 and holds coredns-0 until web-0 is gone; 30 s later 15 s are
    left, less than coredns-0's grace: the drain gives up, web-0 moved for nothing."""
    rig.api.kubelet_exit_delay = 10**6  # each pod terminating until its grace is over
    grace_pod(rig, "web-0", 30, app="web")
    grace_pod(rig, "coredns-0", 30, app="coredns", priority=2_000_000_000)
    both = ["team-a/web-0", "team-a/coredns-0"]
    drain = rig.cordoned(**consolidation(pods=both, whole_grace=both, deadline_seconds=90))
    rig.clock.advance(45)
    first = rig.drainer.evict(drain)
    assert first["evicted"] == ["team-a/web-0"] and graces == {"team-a/web-0": [30]}
    rig.clock.advance(31)  # web-0's grace is over: gone

    with pytest.raises(
        DrainTimeout, match=r"team-a/coredns-0 has terminationGracePeriodSeconds 30 and only 14 s"
    ):
        rig.drainer.evict(drain, first)
    assert rig.api.get("Pod", "web-0", "team-a") is None and running(rig, "coredns-0")
