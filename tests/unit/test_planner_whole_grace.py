"""The plan's side of "a pod moved at a cost gets its whole grace": which pods a drain must not cut
(``whole_grace``: a consolidation's and a make room's pods moved at a cost, none of a drain ahead of a
scheduled action, no expendable pod), the margin ``cut_short`` keeps between a pod's grace and the
drains' deadline (a grace equal to the deadline made every such drain give up), and the plan problem that
says when the deadline is too short for any ordinary pod to move."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from plan_world import World
from test_planner_consolidation import UNDER, half_full, replicas, tag
from test_planner_makeroom import _full_with_grace
from test_planning import record_metrics
from test_scheduled_shrink import SOON, planned, replica, web

from spillway.act.planning import drain_item, summarize
from spillway.local import objects
from spillway.model.cluster import PodInfo
from spillway.model.k8s import Pod
from spillway.model.schedule import ScheduledFloor
from spillway.planner import codes
from spillway.planner.disruption import GRACE_MARGIN_SECONDS, assess_move, cut_short, waits_for_others
from spillway.planner.types import DRAIN_DEADLINE_TOO_SHORT

NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
SAFE = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}


def info(grace: int, priority: int = 0, name: str = "ckpt-0") -> PodInfo:
    raw = objects.pod(name, "ml", node_name="ip-10-0-0-1.ec2.internal", owner=("ReplicaSet", "ckpt-5d9c"),
                      annotations=SAFE)  # fmt: skip
    raw["spec"]["terminationGracePeriodSeconds"] = grace
    raw["spec"]["priority"] = priority
    return PodInfo.from_pod(Pod.model_validate(raw))


# --- the margin -------------------------------------------------------------------------------------


def test_the_margin_is_what_a_drain_spends_before_it_evicts() -> None:
    assert GRACE_MARGIN_SECONDS == 60  # 45 s to the first round, one 15 s poll for a budget


def test_a_grace_fits_the_deadline_only_with_the_margin_to_spare() -> None:
    """Under the default 900 s deadline 840 s of grace is moved and 841 s is not; 900 s, which the old
    bound let through, made its drain give up at the first round (898 s left)."""
    assert cut_short(info(840), 900) is None
    assert "terminationGracePeriodSeconds 841 plus 60 s" in (cut_short(info(841), 900) or "")
    assert cut_short(info(900), 900) is not None
    moves = {g: assess_move(info(g), None, None, NOW, -10, deadline=900).code for g in (840, 841)}
    assert moves == {840: codes.POD_SAFE_TO_EVICT, 841: codes.POD_GRACE_PAST_DEADLINE}


def test_an_expendable_pod_has_no_margin_to_keep_it_is_killed_at_will() -> None:
    assert assess_move(info(900, priority=-100), None, None, NOW, -10, deadline=900).movable


# --- which pods a drain must not cut --------------------------------------------------------------------


def test_a_consolidation_asks_the_whole_grace_for_the_pods_it_moves_at_a_cost_and_no_expendable_one() -> None:
    w = World(regions=("us-east-1",))
    a, b = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10))
    replicas(w, a, "web", 1, cpu="1000m")
    w.pods("filler", 2, cpu="2000m", memory="1Gi", node_name=a, owner=("ReplicaSet", "filler"), priority=-100)
    replicas(w, b, "api", 1, cpu="4500m")

    result = w.plan(max_scale_in_fraction=1.0, consolidation="when-underutilized")

    (drain,) = result.drain
    assert drain.code == codes.CONSOLIDATION and len(drain.pods) == 3
    assert drain.whole_grace == ("default/web-0",)
    item = drain_item(drain, {})
    assert (item["consolidation"], item["whole_grace"]) == (True, ["default/web-0"])
    assert "whole_grace" not in drain.to_dict()  # the plan's contract reads as before


def test_a_make_room_asks_the_whole_grace_too() -> None:
    w, node, _ = _full_with_grace(40)

    result = w.plan(max_scale_in_fraction=1.0, drain_deadline_seconds=100, **UNDER)

    (drain,) = result.drain
    item = drain_item(drain, {})
    assert (drain.node, drain.code, item["uncordon"]) == (node, codes.MAKE_ROOM, True)
    assert item["whole_grace"] == ["default/ckpt-0"]


def test_a_drain_ahead_of_a_scheduled_action_asks_none_the_action_gives_no_grace_at_all() -> None:
    world, nodes = web()
    for i, node in enumerate(nodes):
        replica(world, node, f"r{i}")

    result = planned(world, {"scheduled": (ScheduledFloor("night", max_size=2, start=SOON),)})

    assert result.drain and all(d.code == codes.SCHEDULED_SHRINK and d.pods for d in result.drain)
    assert all(d.whole_grace == () and "whole_grace" not in drain_item(d, {}) for d in result.drain)


# --- a deadline too short for any ordinary pod ----------------------------------------------------------


def _problems(deadline: float, **config: Any) -> list[tuple[str, str, str]]:
    w, _ = half_full()
    result = w.plan(max_scale_in_fraction=1.0, drain_deadline_seconds=deadline, **config)
    return [(p.object, p.field, p.reason) for p in result.problems if p.kind == DRAIN_DEADLINE_TOO_SHORT]


def test_a_deadline_too_short_for_the_default_grace_is_a_problem_of_the_plan() -> None:
    """89 s cannot give 30 s of grace after the drain's 60 s: consolidation moved no ordinary pod, every
    busy node kept grace-past-deadline, and nothing said the configuration was why."""
    [(obj, field, reason)] = _problems(89, **UNDER)
    assert (obj, field) == ("configuration", "drain_deadline_seconds")
    assert "89 s (DRAIN_DEADLINE_SECONDS)" in reason and "in cpu" in reason and "at least 90 s" in reason
    assert _problems(90, **UNDER) == []


def test_no_problem_where_no_group_consolidates_when_underutilized() -> None:
    assert _problems(89) == []  # when-empty (the default) moves no pod at a cost


def _tagged_problems(value: str, **config: Any) -> int:
    w, _ = half_full()
    tag(w, "cpu", "spillway.io/consolidation", value)
    result = w.plan(max_scale_in_fraction=1.0, drain_deadline_seconds=89, **config)
    return sum(p.kind == DRAIN_DEADLINE_TOO_SHORT for p in result.problems)


def test_the_problem_reads_a_groups_own_mode_as_consolidation_does() -> None:
    """A group's spillway.io/consolidation tag decides over the configuration (consolidation.group_mode)."""
    assert _tagged_problems("when-underutilized") == 1
    assert _tagged_problems("off", **UNDER) == 0


def test_the_problem_is_counted_under_its_own_kind() -> None:
    w, _ = half_full()
    short = summarize(w.plan(drain_deadline_seconds=60, **UNDER), "us-east-1").to_dict()
    assert record_metrics({"summary": short})[DRAIN_DEADLINE_TOO_SHORT] == 1.0
    clean = summarize(w.plan(**UNDER), "us-east-1").to_dict()
    assert record_metrics({"summary": clean})[DRAIN_DEADLINE_TOO_SHORT] == 0.0


# --- a critical pod waits for the others ----------------------------------------------------------------

CRITICAL = 2_000_000_000  # system-cluster-critical's value (Kubernetes' SystemCriticalPriority)
WAITS = "evicted only once the node's other pods are gone"


def _critical_beside(grace: int, critical_grace: int, other_priority: int = 0) -> tuple[World, str]:
    """Two nodes: one runs a 500m replica of ``grace`` (none when 0) and a movable critical one (as
    CoreDNS) of ``critical_grace``, both fitting on the other, which runs 4000m that may not move."""
    w = World(regions=("us-east-1",))
    a, b = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10))
    pods = (("web", other_priority, grace), ("dns", CRITICAL, critical_grace))
    for name, priority, seconds in pods if grace else pods[1:]:
        replicas(w, a, name, 1, cpu="500m", priority=priority)
        w.items[-1]["spec"]["terminationGracePeriodSeconds"] = seconds
    replicas(w, b, "api", 1, cpu="4000m", annotations={})  # of no kind known to move: b stays
    return w, a


def _judged(
    deadline: float, grace: int = 30, critical_grace: int = 30, other_priority: int = 0
) -> tuple[str, str]:
    w, node = _critical_beside(grace, critical_grace, other_priority)
    result = w.plan(max_scale_in_fraction=1.0, drain_deadline_seconds=deadline, **UNDER)
    if any(d.node == node for d in result.drain):
        return "drained", ""
    (kept,) = [k for k in result.kept if k.node == node]
    return "kept", kept.reason


def test_a_critical_pod_moved_at_a_cost_needs_the_others_grace_before_its_own() -> None:
    """The drain evicts a critical pod only once the others are gone (spillway.act.drain): at 90 s each
    pod's 30 s + 60 s fitted, the drain moved web, waited its 30 s, then had less than dns's 30 s left and
    gave up, web moved for nothing. It needs 30 + 30 + 60 = 120 s."""
    verdict, reason = _judged(119)
    assert verdict == "kept" and WAITS in reason
    assert (
        "up to 30 s after its drain evicts them (default/web-0's terminationGracePeriodSeconds 30)" in reason
    )
    assert "runs default/dns-0" in reason and "deadline (119 s" in reason
    assert _judged(120) == ("drained", "")


def test_the_wait_is_the_other_pods_grace_an_expendable_ones_too() -> None:
    assert _judged(219, grace=100, critical_grace=60)[1].count(WAITS) == 1
    assert _judged(220, grace=100, critical_grace=60) == ("drained", "")
    # an expendable pod moves free, but the drain still waits for it to go before the critical one
    assert _judged(389, grace=300, other_priority=-100)[1].count(WAITS) == 1
    assert _judged(390, grace=300, other_priority=-100) == ("drained", "")


def test_a_critical_pod_alone_waits_for_nobody() -> None:
    assert _judged(90, grace=0) == ("drained", "")
    verdict, reason = _judged(89, grace=0)
    assert (
        verdict == "kept" and "terminationGracePeriodSeconds 30 plus 60 s" in reason and WAITS not in reason
    )


def _moves(*pods: PodInfo, deadline: float = 120) -> dict[str, str]:
    judged = [(p, assess_move(p, None, None, NOW, -10, deadline=deadline)) for p in pods]
    return {p.key: m.code for p, m in waits_for_others(judged, NOW, deadline)}


def test_a_terminating_pod_is_waited_for_until_its_deletion_timestamp() -> None:
    """The drain holds the critical pod while the other is terminating too: 40 s more of it and 30 s of
    grace need 130 s; 30 s more fit 120 s."""
    dns = info(30, CRITICAL, "dns-0")
    leaving = replace(info(30, name="old-0"), terminating=True, leaves_at=NOW + timedelta(seconds=40))
    assert _moves(dns, leaving)["ml/dns-0"] == codes.POD_GRACE_PAST_DEADLINE
    assert (
        _moves(dns, replace(leaving, leaves_at=NOW + timedelta(seconds=30)))["ml/dns-0"]
        == codes.POD_SAFE_TO_EVICT
    )


def test_critical_is_the_drains_definition_system_node_critical_too() -> None:
    """The planner reads the drain's definition (spillway.model.cluster.is_critical): system-node-critical
    (1000 above) waits too; the highest priority a user's class may have does not."""
    other = info(30, name="web-0")
    assert (
        _moves(info(30, CRITICAL + 1000, "dns-0"), other, deadline=119)["ml/dns-0"]
        == codes.POD_GRACE_PAST_DEADLINE
    )
    assert _moves(info(30, 1_000_000_000, "dns-0"), other, deadline=90)["ml/dns-0"] == codes.POD_SAFE_TO_EVICT
    # two critical pods wait for the others, not for each other
    assert set(_moves(info(30, CRITICAL, "dns-0"), info(30, CRITICAL, "csi-0"), deadline=90).values()) == {
        codes.POD_SAFE_TO_EVICT
    }


def test_no_deadline_no_wait_a_drain_ahead_of_an_action_cuts_the_grace() -> None:
    judged = [
        (p, assess_move(p, None, None, NOW, -10))
        for p in (info(30, CRITICAL, "dns-0"), info(900, name="w-0"))
    ]
    assert waits_for_others(judged, NOW, None) == judged


def _room_beside_a_pod_that_stays(stays_grace: int) -> tuple[World, str, str]:
    """Node a runs a 4-CPU critical replica (safe-to-evict: CoreDNS) of 30 s grace and a 1.5-CPU one of
    ``stays_grace`` that may not move; node b has room for the critical one; a 6-CPU pod is pending,
    which fits a once the critical replica has left it."""
    w = World(regions=("us-east-1",))
    a, b = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10))
    (dns,) = replicas(w, a, "dns", 1, cpu="4", priority=CRITICAL)
    w.pod_item(dns)["spec"]["terminationGracePeriodSeconds"] = 30
    (stays,) = replicas(w, a, "pinned", 1, annotations={})
    w.pod_item(stays)["spec"]["terminationGracePeriodSeconds"] = stays_grace
    replicas(w, b, "busy", 1, cpu="3500m", annotations={})
    (pending,) = w.pods("new", 1, cpu="6", memory="1Gi")
    return w, a, pending


def test_a_make_room_waits_only_for_the_pods_it_moves_not_for_those_that_stay() -> None:
    """A make room's drain evicts the pods it names and leaves the others running (act.drain
    _only_expected: they stay, as the node does), so it evicts the critical pod at once: 30 s + 60 s fit
    a 100 s deadline. Judged with the 60 s of the pod that stays as a wait, the critical pod was refused
    (grace-past-deadline) and the plan launched a node for the pending pod instead."""
    w, a, pending = _room_beside_a_pod_that_stays(60)

    result = w.plan(max_scale_in_fraction=1.0, drain_deadline_seconds=100, **UNDER)

    assert result.scale_up == ()
    assert [(d.node, d.code, d.pods) for d in result.drain] == [(a, codes.MAKE_ROOM, ("default/dns-0",))]
    assert {p.pod: p.node for p in result.placements}[pending] == a


def _room_with_a_critical_pod_and_another(other_grace: int) -> tuple[World, str]:
    """Node a runs a 3-CPU critical replica of 30 s grace, a 2-CPU movable one of ``other_grace`` and a
    1.5-CPU one that may not move; a 6-CPU pending pod fits a only once both movable ones have left."""
    w = World(regions=("us-east-1",))
    a, b = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10))
    (dns,) = replicas(w, a, "dns", 1, cpu="3", priority=CRITICAL)
    w.pod_item(dns)["spec"]["terminationGracePeriodSeconds"] = 30
    (web,) = replicas(w, a, "web", 1, cpu="2")
    w.pod_item(web)["spec"]["terminationGracePeriodSeconds"] = other_grace
    replicas(w, a, "pinned", 1, annotations={})
    replicas(w, b, "busy", 1, cpu="2500m", annotations={})
    w.pods("new", 1, cpu="6", memory="1Gi")
    return w, a


def test_a_make_room_still_waits_for_the_other_pods_it_moves() -> None:
    """Both movable pods must go: the drain evicts web, waits for it, then dns. 10 s + 30 s + 60 s fit
    100 s; 30 s + 30 s + 60 s do not (web's own 30 s + 60 s do), and without dns the room is too small:
    a new node."""
    w, a = _room_with_a_critical_pod_and_another(10)
    result = w.plan(max_scale_in_fraction=1.0, drain_deadline_seconds=100, **UNDER)
    assert [(d.node, d.code, d.pods) for d in result.drain] == [
        (a, codes.MAKE_ROOM, ("default/dns-0", "default/web-0"))
    ]

    w, a = _room_with_a_critical_pod_and_another(30)
    result = w.plan(max_scale_in_fraction=1.0, drain_deadline_seconds=100, **UNDER)
    assert result.drain == () and result.scale_up


def test_a_make_room_does_not_move_a_critical_pod_whose_room_comes_after_a_new_nodes() -> None:
    """Make room moves no pod whose room comes later than a new node's (2 minutes: evicted_late). Each of
    web's and dns's 100 s passed alone, but the drain evicts dns only once web is gone: its room comes
    after 200 s, and the pending pod, which needs both, waited longer than for a new node. It gets one."""
    w, a = _room_with_a_critical_pod_and_another(100)
    w.pod_item("default/dns-0")["spec"]["terminationGracePeriodSeconds"] = 100

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    assert result.drain == () and result.scale_up

    w, a = _room_with_a_critical_pod_and_another(60)
    w.pod_item("default/dns-0")["spec"]["terminationGracePeriodSeconds"] = 60
    result = w.plan(max_scale_in_fraction=1.0, **UNDER)
    assert [(d.node, d.code) for d in result.drain] == [(a, codes.MAKE_ROOM)] and not result.scale_up
