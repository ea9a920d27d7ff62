"""The scale-down candidate taint (spillway.planner.softtaint): PreferNoSchedule on nodes kept only by a
timer, lifted from every node that is no longer one."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from plan_world import NOW, World

from spillway.local import objects as o
from spillway.model.k8s import CANDIDATE_TAINT, CORDONED_BY_SPILLWAY
from spillway.planner import ScalingPlan, codes

SOFT = {"key": CANDIDATE_TAINT, "effect": "PreferNoSchedule"}
MOVABLE = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}


def marks(result: ScalingPlan) -> dict[str, bool]:
    return {t.node: t.add for t in result.soft_taint}


def taint(w: World, node: str) -> None:
    w.node(node)["spec"].setdefault("taints", []).append(dict(SOFT))


def test_nodes_idle_below_the_threshold_are_marked_longest_idle_first_within_the_cap() -> None:
    w = World(regions=("us-east-1",))
    nodes = w.group("cpu", "m5.2xlarge", nodes=4, max_size=10)
    for minutes, n in zip((1, 7, 4, 30), nodes, strict=True):
        w.idle_since(n, minutes)

    result = w.plan(max_bulk_soft_taint_count=2, max_scale_in_fraction=0.25)

    assert [d.node for d in result.drain] == [nodes[3]]  # idle 30 minutes: drained, not marked
    assert marks(result) == {nodes[1]: True, nodes[2]: True}  # 7 and 4 minutes; the 1-minute one waits
    (entry,) = [t for t in result.soft_taint if t.node == nodes[1]]
    assert entry.reason.startswith(codes.IDLE_BELOW_THRESHOLD) and "idle for 7m" in entry.reason
    assert result.to_dict()["soft_taint"][0] == {"node": nodes[1], "add": True, "reason": entry.reason}


def test_zero_turns_marking_off_and_a_plan_with_nothing_to_mark_has_no_list() -> None:
    w = World(regions=("us-east-1",))
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    w.idle_since(node, 3)

    assert marks(w.plan()) == {node: True}
    off = w.plan(max_bulk_soft_taint_count=0)
    assert off.soft_taint == () and "soft_taint" not in off.to_dict()


def test_a_marked_node_that_is_already_tainted_is_left_as_it_is() -> None:
    w = World(regions=("us-east-1",))
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    w.idle_since(node, 3)
    taint(w, node)

    assert w.plan().soft_taint == ()


def test_the_taint_is_lifted_from_a_node_a_pod_landed_on_even_with_marking_off() -> None:
    w = World(regions=("us-east-1",))
    busy, pending_target = w.group("cpu", "m5.2xlarge", nodes=2, max_size=10)
    for n in (busy, pending_target):
        taint(w, n)
        w.idle_since(n, 3)
    w.items.append(o.pod("svc-0", cpu="2", memory="2Gi", node_name=busy, owner=("ReplicaSet", "svc")))
    (pod,) = w.pods("job", 1, cpu="2", memory="2Gi", owner=("Job", "job"))  # pending: fits pending_target

    result = w.plan(max_bulk_soft_taint_count=0)

    assert marks(result) == {busy: False, pending_target: False}
    reasons = {t.node: t.reason for t in result.soft_taint}
    assert codes.WORKLOAD in reasons[busy] and codes.PENDING_FITS in reasons[pending_target]
    assert result.scale_up == ()  # the pending pod is expected on the idle node, not on a new one
    assert pod in {p.pod for p in result.placements}


def test_a_group_at_min_size_keeps_its_nodes_unmarked() -> None:
    w = World(regions=("us-east-1",))
    nodes = w.group("cpu", "m5.2xlarge", nodes=3, min_size=2, max_size=10)
    for n in nodes:
        w.idle_since(n, 3)
    taint(w, nodes[2])  # marked earlier: it takes the one place above MinSize

    result = w.plan()

    assert marks(result) == {}
    w.node(nodes[2])["spec"]["taints"] = []
    assert list(marks(w.plan()).values()) == [True]  # one node of three, down to MinSize 2


def test_a_node_this_plan_drains_keeps_whatever_it_has() -> None:
    w = World(regions=("us-east-1",))
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    w.idle_since(node, 30)
    taint(w, node)

    result = w.plan()

    assert [d.node for d in result.drain] == [node] and result.soft_taint == ()


def test_a_consolidation_candidate_waiting_for_consolidation_after_minutes_is_marked() -> None:
    w = World(regions=("us-east-1",))
    a, b = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10))
    for i, n in enumerate((a, b)):
        w.pods(f"web{i}", 1, cpu="1500m", memory="1Gi", node_name=n, owner=("ReplicaSet", f"web{i}"),
               annotations=MOVABLE)  # fmt: skip
    config: dict[str, Any] = {
        "consolidation": "when-underutilized",
        "consolidation_after_minutes": 5,
        "max_scale_in_fraction": 1.0,
    }

    result = w.plan(**config)

    assert result.drain == ()
    assert {k.node: k.code for k in result.kept} == {a: codes.UNDERUTILIZED_NOT_LONG_ENOUGH,
                                                     b: codes.UNDERUTILIZED_NOT_LONG_ENOUGH}  # fmt: skip
    assert marks(result) == {a: True, b: True}
    assert all(t.reason.startswith(codes.UNDERUTILIZED_NOT_LONG_ENOUGH) for t in result.soft_taint)
    assert result.state.underutilized[a].since == NOW


def consolidating(pending: bool = False) -> tuple[World, str, str]:
    """Two busy nodes of a group that consolidates: one runs only movable replicas, the other a pod that
    may not move (a replica with no safe-to-evict); neither's pods fit on the other."""
    w = World(regions=("us-east-1",))
    movable, pinned = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10))
    w.pods(
        "web", 3, cpu="2", memory="1Gi", node_name=movable, owner=("ReplicaSet", "web"), annotations=MOVABLE
    )
    w.pods("db", 1, cpu="6", memory="1Gi", node_name=pinned, owner=("ReplicaSet", "db"))
    if pending:
        w.pods("job", 1, cpu="1", memory="1Gi", owner=("Job", "job"))  # fits both; planned on one
    return w, movable, pinned


def test_a_busy_node_whose_pods_may_all_move_is_marked_when_its_group_consolidates() -> None:
    w, movable, pinned = consolidating()

    result = w.plan(consolidation="when-underutilized")

    assert result.drain == ()
    assert {k.node: k.code for k in result.kept} == {movable: codes.UTILIZED, pinned: codes.UTILIZED}
    assert marks(result) == {movable: True}  # new pods fill the node that must stay first
    (entry,) = result.soft_taint
    assert entry.reason.startswith(f"every pod on it may move ({codes.UTILIZED})")
    assert marks(w.plan()) == {}  # when-empty (the default): busy nodes are never marked


def pinned_by(*started_minutes_ago: float | None, movable_old: int = 0) -> tuple[World, str]:
    """One busy node of a group that consolidates, running a pod that may not move (a replica with no
    safe-to-evict) for each of ``started_minutes_ago`` (None: its kubelet reported no start yet) and
    ``movable_old`` movable replicas that started long ago (the fixture's epoch)."""
    w = World(regions=("us-east-1",))
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    for i, ago in enumerate(started_minutes_ago):
        created = NOW - timedelta(minutes=ago if ago is not None else 1)
        w.pods(f"db{i}", 1, cpu="1", memory="1Gi", node_name=node, owner=("ReplicaSet", f"db{i}"),
               created=created)  # fmt: skip
        if ago is None:
            del w.items[-1]["status"]["startTime"]
    w.pods("web", movable_old, cpu="2", memory="1Gi", node_name=node, owner=("ReplicaSet", "web"),
           annotations=MOVABLE)  # fmt: skip
    return w, node


def test_a_node_pinned_only_by_recent_pods_is_marked_when_its_group_consolidates() -> None:
    # Batch work that has run a short while ends soon more often than work that has run long: a node whose
    # pods that may not move all started under consolidation_recent_pods_minutes (30) ago is the likelier
    # to empty of itself, so new pods go first to nodes pinned by older work. Its old movable pods can be
    # moved off it, so they do not keep the mark away.
    w, node = pinned_by(10, 29, movable_old=2)
    assert {k.node: k.code for k in w.plan(consolidation="when-underutilized").kept} == {node: codes.UTILIZED}
    _assert_marked_for_recent_work(w, node)
    assert marks(w.plan(consolidation="when-underutilized", consolidation_recent_pods_minutes=5)) == {}


def _assert_marked_for_recent_work(w: World, node: str) -> None:
    result = w.plan(consolidation="when-underutilized")

    (kept,) = result.kept
    assert result.drain == () and kept.node == node
    (entry,) = result.soft_taint
    assert (entry.node, entry.add) == (node, True)
    assert entry.reason.startswith(
        f"the pods on it that may not move all started less than 30 minutes ago ({kept.code})"
    )
    assert marks(w.plan(consolidation="when-underutilized", consolidation_recent_pods_minutes=0)) == {}
    assert marks(w.plan()) == {}  # when-empty (the default): busy nodes are never marked


@pytest.mark.parametrize(
    "started",
    [(31,), (10, 45), (None, 45)],
    ids=["older", "one-older", "start-unknown-and-older"],
)
def test_a_node_pinned_by_a_pod_that_is_not_recent_is_not_marked(started: tuple[float | None, ...]) -> None:
    w, node = pinned_by(*started)

    assert marks(w.plan(consolidation="when-underutilized")) == {}
    taint(w, node)  # marked while its pods were recent: lifted once one is older
    (lifted,) = w.plan(consolidation="when-underutilized").soft_taint
    assert (lifted.node, lifted.add) == (node, False)


@pytest.mark.parametrize("started", [(None,), (10, None)], ids=["start-unknown", "one-start-unknown"])
def test_a_pod_whose_kubelet_reported_no_start_yet_counts_as_recent(
    started: tuple[float | None, ...],
) -> None:
    # status.startTime is set when the kubelet admits a pod bound to it, so a bound pod without one is the
    # newest there is. Before, it counted as old: a node pinned only by recent work lost its mark for the
    # plans between a new pod's binding and its admission, and got it back after (an API write each way).
    w, node = pinned_by(*started)
    _assert_marked_for_recent_work(w, node)


def test_a_node_pending_pods_are_planned_onto_is_not_marked_and_a_pinned_one_is_unmarked() -> None:
    w, movable, pinned = consolidating(pending=True)
    taint(w, pinned)  # marked earlier, when all its pods could move

    result = w.plan(consolidation="when-underutilized")

    assert [p.node for p in result.placements] == [movable] and result.scale_up == ()
    assert {k.node: k.code for k in result.kept} == {movable: codes.PENDING_FITS, pinned: codes.UTILIZED}
    assert marks(result) == {pinned: False}  # the planned node is left for the pod; the pinned one lifted


def test_a_node_made_room_on_loses_its_mark_and_the_node_taking_the_moved_pods_is_not_marked() -> None:
    from test_planner_consolidation import UNDER, half_full

    w, (a, b) = half_full()
    for n in (a, b):
        taint(w, n)  # both marked earlier: every pod on them may move
    w.pods("big", 1, cpu="7", memory="1Gi")  # fits a node only once its replicas move

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    ((drain,), up) = (result.drain, result.scale_up)
    assert (drain.node, drain.code, up) == (a, codes.MAKE_ROOM, ())
    assert marks(result) == {a: False, b: False}
    reasons = {t.node: t.reason for t in result.soft_taint}
    assert codes.MAKE_ROOM in reasons[a] and codes.RECEIVES_MOVED_PODS in reasons[b]


@pytest.mark.parametrize("pinned", ["recent-pod", "all-movable"])
@pytest.mark.parametrize("marked", [False, True], ids=["unmarked", "marked-before"])
def test_a_node_a_consolidation_moves_pods_onto_is_not_marked(pinned: str, marked: bool) -> None:
    # The plan drains `light` and expects its replica to run on `busy` (the only room). `busy` is kept
    # (utilized) and would be marked for its pods (all movable, or pinned only by a recent pod), but the
    # mark tells kube-scheduler to put new pods, the moved replica among them, elsewhere first: with a
    # second consolidation in the same plan, the replica can take the room the plan gave the other's pods
    # on an unmarked node, and those wait, or a node launches. Before, `busy` was marked anyway (and an
    # earlier mark stayed), against "no pod this plan moves claims it" (planner.softtaint).
    w = World(regions=("us-east-1",))
    light, busy = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10))
    w.pods("web", 1, cpu="1", memory="1Gi", node_name=light, owner=("ReplicaSet", "web"), annotations=MOVABLE)
    if pinned == "recent-pod":
        w.pods("db", 1, cpu="6", memory="1Gi", node_name=busy, owner=("ReplicaSet", "db"),
               created=NOW - timedelta(minutes=5))  # fmt: skip
    else:
        w.pods(
            "db", 1, cpu="6", memory="1Gi", node_name=busy, owner=("ReplicaSet", "db"), annotations=MOVABLE
        )
    if marked:
        taint(w, busy)

    result = w.plan(consolidation="when-underutilized", max_scale_in_fraction=1.0)

    (drain,) = result.drain
    assert (drain.node, drain.code) == (light, codes.CONSOLIDATION)
    assert {k.node: k.code for k in result.kept} == {busy: codes.UTILIZED}
    assert marks(result) == ({busy: False} if marked else {})
    if marked:
        assert codes.RECEIVES_MOVED_PODS in result.soft_taint[0].reason


def test_an_idle_node_takes_its_groups_last_room_above_min_size_from_a_busy_nodes_mark() -> None:
    # MinSize 2 of 3 nodes: one mark's room. `recent` was marked by an earlier plan (its pod that may not
    # move started 5 minutes ago: it might empty of itself); now `idle` runs its idle timer, and is the
    # node a later plan drains. Its mark keeps new pods off it; without it kube-scheduler's default
    # LeastAllocated sends them to the emptiest node, `idle`, whose timer starts again, and the node stays,
    # paid for, while the pods had room elsewhere. Before, the busy node's mark kept the room (marks that
    # stay went first) and `idle` was not marked for as long as the pod stayed recent (30 minutes).
    w = World(regions=("us-east-1",))
    recent, old, idle = sorted(w.group("cpu", "m5.2xlarge", nodes=3, max_size=10, min_size=2))
    w.pods("db", 1, cpu="6", memory="1Gi", node_name=recent, owner=("ReplicaSet", "db"),
           created=NOW - timedelta(minutes=5))  # fmt: skip
    w.pods("old", 1, cpu="6", memory="1Gi", node_name=old, owner=("ReplicaSet", "old"))
    w.idle_since(idle, 3)
    taint(w, recent)

    result = w.plan(consolidation="when-underutilized")

    assert marks(result) == {recent: False, idle: True}
    reasons = {t.node: t.reason for t in result.soft_taint}
    assert "MinSize 2" in reasons[recent] and codes.IDLE_BELOW_THRESHOLD in reasons[idle]


def test_a_node_kept_only_by_the_scale_in_cap_keeps_its_mark() -> None:
    """Scenario: ten idle nodes of one group, four idle for 30 minutes and marked by earlier plans while
    their timers ran; ``max_scale_in_fraction`` 0.2 lets this plan drain two of them, the other two are
    kept ``scale-in-cap``. They are still scale-down candidates (the next plan drains them: the cap is
    per plan and passes), so they keep the PreferNoSchedule mark; lifting it sends the next pod to them
    (LeastAllocated: the emptiest node) and restarts their idle timers, while the six nodes idle for 0 s
    are marked instead.

    Rule: cluster-autoscaler soft-taints every unneeded node (``scaleDownPlanner.UnneededNodes()``,
    core/static_autoscaler.go, ``UpdateSoftDeletionTaints``); a node it does not delete this loop because
    of ``--max-empty-bulk-delete`` / ``--max-scale-down-parallelism`` is still unneeded and keeps
    ``DeletionCandidateOfClusterAutoscaler``. Spillway's own softtaint docstring: "A node the plan would
    remove but for something that passes gets the taint"."""
    w = World(regions=("us-east-1",))
    nodes = w.group("cpu", "m5.2xlarge", nodes=10, max_size=20)
    for n in nodes[:4]:
        w.idle_since(n, 30)
        taint(w, n)

    result = w.plan(max_scale_in_fraction=0.2)

    drained = {d.node for d in result.drain}
    capped = {k.node for k in result.kept if k.code == codes.SCALE_IN_CAP}
    assert len(drained) == 2 and capped == set(nodes[:4]) - drained
    assert not [t for t in result.soft_taint if t.node in capped]  # still candidates: marks stay
    for n in nodes[:4]:
        w.node(n)["spec"]["taints"] = []
    unmarked = w.plan(max_scale_in_fraction=0.2, max_bulk_soft_taint_count=2)
    assert {t.node for t in unmarked.soft_taint if t.add} == capped  # the longest idle are marked first


def test_a_node_made_room_on_stays_so_an_idle_node_of_its_group_above_min_size_is_marked() -> None:
    """Group cpu has three nodes and MinSize 2: room is made on a (its replicas move to b), and a stays
    for the pending pod; c, idle 3 minutes of the 10, is the one node above MinSize and is marked. The
    make-room drain was counted as a node leaving the group, which left no room above MinSize, so c was
    not marked and new pods went to it first (LeastAllocated), its idle timer starting over each time."""
    w = World(regions=("us-east-1",))
    a, b, c = sorted(w.group("cpu", "m5.2xlarge", nodes=3, min_size=2, max_size=10))
    for node, name in ((a, "one"), (b, "two")):
        w.pods(
            name,
            2,
            cpu="1500m",
            memory="1Gi",
            node_name=node,
            owner=("ReplicaSet", name),
            annotations=MOVABLE,
        )
    w.node(c)["spec"]["taints"] = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
    w.idle_since(c, 3)
    w.pods("big", 1, cpu="7", memory="1Gi")

    result = w.plan(max_scale_in_fraction=1.0, consolidation="when-underutilized")

    assert [(d.node, d.code) for d in result.drain] == [(a, codes.MAKE_ROOM)]
    assert marks(result) == {c: True}


def test_turning_marking_off_lifts_the_marks_earlier_plans_left() -> None:
    """Scenario: earlier plans marked an idle node (its timer still runs) and a busy node of a group that
    consolidates (every pod on it may move); the operator then sets ``max_bulk_soft_taint_count`` to 0
    to stop the marks. Both are still what earlier plans marked, so they kept the taint: the busy one for
    as long as its pods may move, which may be for good, and new pods kept going elsewhere first.

    Rule: cluster-autoscaler with ``--max-bulk-soft-taint-count=0`` removes every
    ``DeletionCandidateOfClusterAutoscaler`` taint (core/static_autoscaler.go, cleanUpIfRequired:
    "Clean old taints if soft taints handling is disabled", taints.CleanAllDeletionCandidates); the
    README's table says 0 marks none."""
    w, movable, _ = consolidating()
    (idle,) = w.group("spare", "m5.2xlarge", nodes=1, max_size=10)
    w.idle_since(idle, 3)
    for n in (movable, idle):
        taint(w, n)

    marked = w.plan(consolidation="when-underutilized")
    assert marks(marked) == {}  # still candidates: the marks stay while marking is on

    result = w.plan(consolidation="when-underutilized", max_bulk_soft_taint_count=0)

    assert marks(result) == {movable: False, idle: False}
    assert all("max_bulk_soft_taint_count" in t.reason for t in result.soft_taint)
    assert result.drain == () and result.scale_up == ()


def test_a_drain_under_way_uses_up_its_groups_room_above_min_size() -> None:
    """Scenario: group cpu has three nodes and MinSize 2; an earlier plan's drain is emptying a (its
    cordon), b has been idle 3 minutes of the 10, c runs a pod. Once a is gone the group is at MinSize
    and b stays whatever its timer says, so it is no scale-down candidate; marked, it sent new pods to c
    first (or to a new node) for the length of the drain and of b's timer, and was lifted only when
    the timer ran out and scale-down kept b at MinSize.

    Rule: scale-down counts the drains under way as nodes leaving their group before it looks at
    MinSize (Scale.limit: ``left = desired - going - removed``), and the README says no more of a group
    is marked than its size above MinSize less the nodes the drains terminate."""
    w = World(regions=("us-east-1",))
    a, b, c = sorted(w.group("cpu", "m5.2xlarge", nodes=3, min_size=2, max_size=10))
    w.cordon(a, by_spillway=True)
    w.idle_since(b, 3)
    w.pods("svc", 1, cpu="1", memory="1Gi", node_name=c, owner=("ReplicaSet", "svc"))

    result = w.plan()

    kept = {k.node: k.code for k in result.kept}
    assert (kept[a], kept[b]) == (codes.DRAINING, codes.IDLE_BELOW_THRESHOLD) and result.drain == ()
    assert marks(result) == {}
    del w.node(a)["metadata"]["annotations"][CORDONED_BY_SPILLWAY]  # somebody else's cordon: a stays
    assert marks(w.plan()) == {b: True}


def test_a_mark_beyond_its_groups_room_above_min_size_is_lifted() -> None:
    """Scenario: an earlier plan marked the busy node of a consolidating group whose every pod may move
    (the group then ran above MinSize); the operator (or a scheduled action) has since raised MinSize to
    the group's size. No plan can remove the node now, but the mark stayed, and for as long as its pods
    may move: new pods went to the other nodes first, and to the marked one only when nothing else fit.

    Rule: the README says no more of a group is marked than its size above MinSize, and a mark on a node
    that is no scale-down candidate any more is lifted without a cap; the marks that stay are the
    longest-waiting, as they are given."""
    w, movable, _ = consolidating()
    taint(w, movable)
    assert marks(w.plan(consolidation="when-underutilized")) == {}  # above MinSize: the mark stays
    w.groups["cpu"]["MinSize"] = 2

    result = w.plan(consolidation="when-underutilized")

    assert marks(result) == {movable: False}
    (entry,) = result.soft_taint
    assert "MinSize 2" in entry.reason


def test_a_pending_pod_that_fits_an_unmarked_node_is_planned_there_and_the_mark_stays() -> None:
    """Scenario: b, idle 3 minutes and marked, comes first by name; a runs a replica and has room for the
    pending pod too. kube-scheduler's TaintToleration score ranks a above b for a pod that does not
    tolerate the candidate taint, so the pod goes to a; the plan put it on b (first fit by name), kept b
    pending-fits and lifted its mark, after which new pods went to b first (LeastAllocated: the emptiest
    node) and its idle timer started over.

    Rule: kube-scheduler's TaintToleration Score counts the PreferNoSchedule taints a pod does not
    tolerate and NormalizeScore reverses it (pkg/scheduler/framework/plugins/tainttoleration), so a node
    without the taint is preferred whenever it fits; the demo scheduler (local/demo.py) ranks so too."""
    w = World(regions=("us-east-1",))
    b, a = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10))
    w.idle_since(b, 3)
    taint(w, b)
    w.pods("svc", 1, cpu="2", memory="1Gi", node_name=a, owner=("ReplicaSet", "svc"))
    (pod,) = w.pods("job", 1, cpu="1", memory="1Gi", owner=("Job", "job"))

    result = w.plan()

    assert [(p.pod, p.node) for p in result.placements] == [(pod, a)] and result.scale_up == ()
    assert marks(result) == {}  # b keeps its mark: its timer runs on
    assert {k.node: k.code for k in result.kept}[b] == codes.IDLE_BELOW_THRESHOLD


def test_a_node_a_passing_disruption_budget_keeps_keeps_its_mark_and_a_lasting_one_lifts_it() -> None:
    """Scenario: four nodes idle 30 minutes, marked by earlier plans while their timers ran; a
    disruption budget of one node at once lets this plan drain one, the other three are kept
    ``disruption-budget``. Later plans drain them one by one as each drain ends, so they are still
    scale-down candidates; their marks were lifted, and the next pods went to them first
    (LeastAllocated: the emptiest nodes), which restarted their idle timers. A budget of nodes 0 in a
    window passes too (the window ends); one of nodes 0 with no window never lets them go, and their
    marks are lifted.

    Rule: the softtaint docstring: a node the plan would remove but for something that passes is
    marked, as the scale-in cap and scale-down's cooldown keep their marks; cluster-autoscaler keeps
    every unneeded node it did not delete this loop marked (UnneededNodes; UpdateSoftDeletionTaints)."""
    w = World(regions=("us-east-1",))
    nodes = w.group("cpu", "m5.2xlarge", nodes=4, max_size=10)
    for n in nodes:
        w.idle_since(n, 30)
        taint(w, n)

    one = w.plan(max_scale_in_fraction=1.0, disruption_budgets=[{"nodes": 1}])

    held = {k.node for k in one.kept if k.code == codes.DISRUPTION_BUDGET}
    assert len(one.drain) == 1 and len(held) == 3
    assert marks(one) == {}  # still candidates: the marks stay
    window = w.plan(
        max_scale_in_fraction=1.0,
        disruption_budgets=[{"nodes": 0, "windows": [{"start": "11:00", "end": "13:00"}]}],
    )
    assert window.drain == () and {k.code for k in window.kept} == {codes.DISRUPTION_BUDGET}
    assert marks(window) == {}  # the window closes at 13:00: the marks stay
    never = w.plan(max_scale_in_fraction=1.0, disruption_budgets=[{"nodes": 0}])
    assert never.drain == () and marks(never) == dict.fromkeys(nodes, False)
    for n in nodes:
        w.node(n)["spec"]["taints"] = []
    unmarked = w.plan(max_scale_in_fraction=1.0, disruption_budgets=[{"nodes": 1}])
    assert {t.node for t in unmarked.soft_taint if t.add} == held


def test_nodes_a_scheduled_min_size_keeps_are_not_marked() -> None:
    """Scenario: Tuesday 07:55 in Berlin; the group's scheduled action raises MinSize to 2 at 08:00,
    within the 10-minute idle threshold; its four nodes have been idle 3 minutes. Scale-down keeps two of
    them once their timers run out (``scheduled-min``: a node drained now would be launched again at
    08:00), yet all four were marked, so new pods went elsewhere first (or to a new node) from two nodes
    that stay, and at the end of their timers the marks of those two were lifted.

    Rule: scale-down treats the MinSize a scheduled action sets within the idle threshold as the group's
    MinSize (groups.scheduled_min, ``limit``); the README says no more of a group is marked than its size
    above MinSize."""
    from dataclasses import replace

    from spillway.model.schedule import ScheduledFloor
    from spillway.planner import plan

    day = ScheduledFloor("day", min_size=2, recurrence="0 8 * * mon-fri", timezone="Europe/Berlin")
    morning = NOW.replace(day=3, hour=6, minute=55)
    w = World(regions=("us-east-1",))
    nodes = w.group("web", "m5.2xlarge", nodes=4)
    for n in nodes:
        w.state["nodes"][n] = {"idle_since": (morning - timedelta(minutes=3)).isoformat()}
    snapshot, groups, config, state = w.parsed()
    groups = [replace(g, scheduled=(day,)) for g in groups]

    result = plan(snapshot, groups, config, state, morning)

    assert result.drain == () and {k.code for k in result.kept} == {codes.IDLE_BELOW_THRESHOLD}
    assert list(marks(result).values()) == [True, True]  # the two above the scheduled MinSize
    for n in nodes:  # idle past the threshold: scale-down drains two and keeps two for 08:00
        w.state["nodes"][n] = {"idle_since": (morning - timedelta(minutes=30)).isoformat()}
    snapshot, _, config, state = w.parsed(max_scale_in_fraction=1.0)
    past = plan(snapshot, groups, config, state, morning)
    assert len(past.drain) == 2 and sorted(k.code for k in past.kept) == [codes.SCHEDULED_MIN] * 2


def test_a_node_make_room_judged_first_keeps_its_mark_for_recent_work() -> None:
    # A pending pod of the group that does not fit beside the node's pods makes make room judge every
    # pod on the node first (Consolidation.moves, kept for the plan); the node's one pod that may not
    # move started 10 minutes ago, so consolidation still marks it for recent work. Before, the mark's
    # judgement read make room's kept moves as "not all movable" and stopped there: the mark was lifted
    # whenever a pending pod of the group was tried against the node.
    w, node = pinned_by(10, movable_old=2)
    w.pods("big", 1, cpu="7", memory="1Gi")

    result = w.plan(consolidation="when-underutilized")

    assert result.drain == () and [s.group for s in result.scale_up] == ["cpu"]
    (entry,) = result.soft_taint
    assert (entry.node, entry.add) == (node, True)
    assert entry.reason.startswith("the pods on it that may not move all started less than 30 minutes ago")
