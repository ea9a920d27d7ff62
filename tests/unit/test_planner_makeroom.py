"""Make room: a pending pod takes an underutilized node whose pods move, instead of a new node.

Built like test_planner_consolidation: m5.2xlarge nodes (7910m CPU) running ReplicaSet replicas annotated
``safe-to-evict=true`` unless a test says otherwise; ``big`` pods (7 CPU) fit no node that runs anything.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from plan_world import NOW, World
from test_planner_consolidation import UNDER, elastic_workers, fluentd_shy, half_full, kept, replicas
from test_planner_gang_launch import COSCHED

from spillway.planner import codes


def test_a_pending_pod_takes_a_node_whose_pods_move_instead_of_a_new_node() -> None:
    w, (a, b) = half_full()
    (big,) = w.pods("big", 1, cpu="7", memory="1Gi")

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    assert result.scale_up == ()  # no launch
    (drain,) = result.drain
    assert (drain.node, drain.code, drain.terminate) == (a, codes.MAKE_ROOM, False)
    assert drain.pods == ("default/web0-0", "default/web0-1")  # not the DaemonSet pod
    assert drain.to_dict()["terminate"] is False
    assert {p.pod: p.node for p in result.placements}[big] == a
    assert drain.reason.startswith(f"{codes.MAKE_ROOM}: its 2 pod(s) fit on {b}")
    assert kept(result)[b][0] == codes.RECEIVES_MOVED_PODS  # never drained while it takes a's pods


def test_without_consolidation_the_pending_pod_gets_a_new_node() -> None:
    w, _ = half_full()
    w.pods("big", 1, cpu="7", memory="1Gi")

    result = w.plan(max_scale_in_fraction=1.0)  # when-empty: running pods are never moved

    assert [(s.group, s.to_size - s.from_size) for s in result.scale_up] == [("cpu", 1)]
    assert result.drain == ()


def test_pods_that_may_not_move_are_never_moved_to_make_room() -> None:
    w = World(regions=("us-east-1",))
    a, b = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10))
    replicas(w, a, "web0", 2, annotations={})  # a ReplicaSet replica not marked safe to evict
    replicas(w, b, "web1", 2)
    w.pods("big", 1, cpu="7", memory="1Gi")

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    # b's pods may move, onto a: b makes room; a's never move.
    assert [(d.node, d.code) for d in result.drain] == [(b, codes.MAKE_ROOM)]
    assert result.scale_up == ()
    w2 = World(regions=("us-east-1",))
    nodes = sorted(w2.group("cpu", "m5.2xlarge", nodes=2, max_size=10))
    for i, n in enumerate(nodes):
        replicas(w2, n, f"web{i}", 2, annotations={})
    w2.pods("big", 1, cpu="7", memory="1Gi")
    result = w2.plan(max_scale_in_fraction=1.0, **UNDER)
    assert result.drain == () and len(result.scale_up) == 1


def test_no_room_elsewhere_means_a_new_node() -> None:
    w, _ = half_full(cpu="2500m")  # 5 of 7.9 CPU on each: neither's pods fit on the other
    w.pods("big", 1, cpu="7", memory="1Gi")

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    assert result.drain == ()
    assert [(s.group, s.to_size - s.from_size) for s in result.scale_up] == [("cpu", 1)]


def test_a_disruption_budget_of_zero_forbids_making_room() -> None:
    w, _ = half_full()
    w.pods("big", 1, cpu="7", memory="1Gi")

    result = w.plan(max_scale_in_fraction=1.0, disruption_budgets=[{"nodes": 0}], **UNDER)

    assert result.drain == () and len(result.scale_up) == 1


def test_an_unhealthy_cluster_makes_no_room() -> None:
    """Four nodes of another group lost their kubelets: the cluster is unhealthy (spillway.planner.health),
    so no pod is moved; the healthy group still gets its new node."""
    w, _ = half_full()
    for name in w.group("broken", "m5.2xlarge", nodes=4):
        (condition,) = w.node(name)["status"]["conditions"]
        condition.update(status="Unknown", lastTransitionTime="2026-11-02T11:00:00Z")
    w.pods("big", 1, cpu="7", memory="1Gi")

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    assert result.drain == ()
    assert [(s.group, s.to_size - s.from_size) for s in result.scale_up] == [("cpu", 1)]


GANG = {"scheduling.x-k8s.io/pod-group": "train"}


def _gang(w: World, workers: int) -> list[str]:
    w.pod_group(COSCHED, "train", spec={"minMember": workers})
    return w.pods("big", workers, cpu="7", memory="1Gi", labels=GANG)


def _fleet(w: World) -> None:
    w.groups["cpu"]["Tags"].append(
        {"ResourceId": "cpu", "ResourceType": "auto-scaling-group", "Key": "spillway.io/atomic-launch",
         "Value": "fleet", "PropagateAtLaunch": False}
    )  # fmt: skip


def test_a_gang_gets_room_on_busy_nodes_for_all_of_its_workers_instead_of_new_nodes() -> None:
    w, nodes = half_full(count=4)  # 3 of 7.9 CPU on each: two nodes' pods fit on the other two
    workers = _gang(w, 2)

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    assert result.scale_up == ()
    rooms = {d.node for d in result.drain if d.code == codes.MAKE_ROOM}
    assert len(rooms) == 2
    on = {p.pod: p.node for p in result.placements}
    assert {on[p] for p in workers} == rooms  # one worker per node given
    assert {p.pod: p.code for p in result.pending}.keys() >= set(workers)
    assert all(p.code == codes.MAKING_ROOM for p in result.pending if p.pod in workers)
    for survivor in set(nodes) - rooms:
        assert kept(result)[survivor][0] == codes.RECEIVES_MOVED_PODS
    assert sorted(result.state.rooms) == sorted(rooms)


def test_room_for_part_of_a_gang_launches_the_rest_and_the_atomic_launch_counts_only_the_rest() -> None:
    w, (a, _) = half_full()  # room for one 7-CPU worker (the other node takes a's pods), not for two
    _fleet(w)
    workers = _gang(w, 2)

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    # the swap saves a node whether or not the gang starts sooner: one node is given, one launched
    assert [(d.node, d.code) for d in result.drain] == [(a, codes.MAKE_ROOM)]
    (action,) = result.scale_up
    assert (action.group, action.to_size - action.from_size) == ("cpu", 1)
    ((gang, nodes, pods),) = [(g.gang, g.nodes, g.pods) for g in action.gangs]
    assert (gang, nodes) == ("default/train", 1) and len(pods) == 1
    on = {p.pod: p.node for p in result.placements}
    assert sorted(on[p] == a for p in workers) == [False, True]
    assert result.state.gangs["default/train"].count == 1  # the fleet launches one instance, not two


def test_a_disruption_budget_limits_how_much_of_a_gang_gets_room() -> None:
    w, _ = half_full(count=4)
    _gang(w, 2)

    result = w.plan(max_scale_in_fraction=1.0, disruption_budgets=[{"nodes": 1}], **UNDER)

    assert [d.code for d in result.drain] == [codes.MAKE_ROOM]
    assert [(s.group, s.to_size - s.from_size) for s in result.scale_up] == [("cpu", 1)]


def test_a_gang_given_room_is_not_recorded_as_launching_and_later_plans_wait_for_its_room() -> None:
    w, _ = half_full(count=4)
    _fleet(w)
    workers = _gang(w, 2)

    first = w.plan(max_scale_in_fraction=1.0, **UNDER)
    assert first.scale_up == () and first.state.gangs == {}
    rooms = {d.node for d in first.drain}

    w.state = first.state.to_wire()
    for node in rooms:  # the drains cordoned them; the evicted pods are still terminating
        w.cordon(node, by_spillway=True)
    second = w.plan(NOW + timedelta(minutes=1), max_scale_in_fraction=1.0, **UNDER)

    assert second.scale_up == () and not rooms & {d.node for d in second.drain}
    assert {p.pod: p.code for p in second.pending if p.pod in workers} == dict.fromkeys(
        workers, codes.MAKING_ROOM
    )


def test_each_swap_removes_one_launch_and_the_moves_never_land_on_a_swapped_node() -> None:
    w, nodes = half_full(count=4)
    bigs = w.pods("big", 3, cpu="7", memory="1Gi")

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    swapped = {d.node for d in result.drain if d.code == codes.MAKE_ROOM}
    launched = sum(s.to_size - s.from_size for s in result.scale_up)
    assert len(swapped) + launched == 3  # every big pod has a node
    assert len(swapped) == 2  # four nodes of 3 CPU: two take the other two's pods
    on = {p.pod: p.node for p in result.placements}
    assert {on[b] for b in bigs} >= swapped
    survivors = set(nodes) - swapped
    assert all(kept(result)[n][0] != codes.MAKE_ROOM for n in survivors)


def test_only_the_pods_that_cover_what_the_node_lacks_move_and_the_others_stay() -> None:
    w = World(regions=("us-east-1",))
    a, b, c = sorted(w.group("cpu", "m5.2xlarge", nodes=3, max_size=10))
    replicas(w, a, "keep", 1, cpu="1", annotations={})  # may not move: it stays
    replicas(w, a, "small", 1, cpu="500m")
    replicas(w, a, "mid", 1, cpu="2500m")
    replicas(w, a, "large", 1, cpu="3")
    replicas(w, b, "full", 2, cpu="3", annotations={})  # b and c run pods that may not move
    replicas(w, c, "big", 1, cpu="5", annotations={})  # c: 2.9 CPU free, room for a's 2.5
    (pod,) = w.pods("half", 1, cpu="3", memory="1Gi")  # a has 0.9 free: lacks 2.1 CPU

    # a is 7 of 7.9 CPU used, above the default threshold (0.5): make room ignores it, moving only part
    result = w.plan(max_scale_in_fraction=1.0, consolidation="when-underutilized")

    assert result.scale_up == ()
    (drain,) = result.drain
    assert (drain.node, drain.code) == (a, codes.MAKE_ROOM)
    assert drain.pods == ("default/mid-0",)  # the smallest pod that covers the lack alone
    assert {p.pod: p.node for p in result.placements}[pod] == a
    assert f"its 1 pod(s) fit on {c}" in drain.reason


def test_later_plans_wait_for_the_room_being_made_instead_of_scaling_again() -> None:
    w, (a, _) = half_full()
    (big,) = w.pods("big", 1, cpu="7", memory="1Gi")
    first = w.plan(max_scale_in_fraction=1.0, **UNDER)
    assert [d.code for d in first.drain] == [codes.MAKE_ROOM]
    assert {p.pod: p.code for p in first.pending}[big] == codes.MAKING_ROOM
    assert first.state.rooms[a].pods == (big,)
    moved = ["default/web0-0", "default/web0-1"]  # the pods it evicts: only they leave a (leaving_pods)
    assert first.state.to_wire()["rooms"][a] == {
        "pods": [big],
        "since": "2026-11-02T12:00:00Z",
        "moved": moved,
    }

    # A minute on: the drain has cordoned a and evicted its pods, which are still terminating; big waits.
    w.state = first.state.to_wire()
    w.cordon(a, by_spillway=True)
    for item in w.items:
        if item["kind"] == "Pod" and item["metadata"]["name"].startswith("web0-"):
            item["metadata"]["deletionTimestamp"] = "2026-11-02T12:00:30Z"
    second = w.plan(NOW + timedelta(minutes=1), max_scale_in_fraction=1.0, **UNDER)

    assert second.scale_up == () and second.drain == ()
    assert {p.pod: p.node for p in second.placements}[big] == a
    assert {p.pod: p.code for p in second.pending}[big] == codes.MAKING_ROOM
    assert second.state.rooms[a].pods == (big,) and second.state.rooms[a].since == NOW

    # The claim lapses after drain_claim_minutes (20): the pod still pending is scaled for again.
    w.state = second.state.to_wire()
    late = w.plan(NOW + timedelta(minutes=20), max_scale_in_fraction=1.0, **UNDER)
    assert big in {p for s in late.scale_up for p in s.pods}
    assert late.state.rooms == {}


def test_once_the_node_is_released_a_pod_still_pending_is_planned_as_any_other() -> None:
    w, (a, _) = half_full()
    (big,) = w.pods("big", 1, cpu="7", memory="1Gi")
    first = w.plan(max_scale_in_fraction=1.0, **UNDER)
    w.state = first.state.to_wire()
    # a is released (not cordoned) but another pod took its room: big is not held there, it gets a node
    for item in w.items:
        if item["kind"] == "Pod" and item["metadata"]["name"].startswith("web0-"):
            item["spec"]["nodeName"] = "elsewhere"
    w.pods("thief", 1, cpu="7", memory="1Gi", node_name=a)

    second = w.plan(NOW + timedelta(minutes=1), max_scale_in_fraction=1.0, **UNDER)

    assert big in {p for s in second.scale_up for p in s.pods}
    assert second.state.rooms == {}


def _emptied_for(w: World, node: str, moved_to: str) -> None:
    """The make-room drain has evicted node's replicas and their ReplicaSet's new pods run on
    ``moved_to``: the node is empty, still cordoned by the drain, which has not released it yet."""
    w.cordon(node, by_spillway=True)
    for item in w.items:
        if item["kind"] == "Pod" and item["metadata"]["name"].startswith("web0-"):
            item["spec"]["nodeName"] = moved_to


def test_a_node_emptied_for_a_pod_is_not_given_to_another_pending_pod_while_its_room_is_held() -> None:
    """a was emptied for big (7 CPU of its 7.9) and is still cordoned by the make-room drain; another
    7-CPU pod arrives. The room is big's: the other pod gets a new node, a is neither uncordoned for it
    nor given to it. Before, the plan uncordoned a for the newcomer as if big were not coming, so one of
    the two stayed pending with no node launched for it."""
    w, (a, b) = half_full()
    (big,) = w.pods("big", 1, cpu="7", memory="1Gi")
    first = w.plan(max_scale_in_fraction=1.0, **UNDER)
    assert first.state.rooms[a].pods == (big,)
    w.state = first.state.to_wire()
    _emptied_for(w, a, b)
    (other,) = w.pods("other", 1, cpu="7", memory="1Gi")

    second = w.plan(NOW + timedelta(minutes=1), max_scale_in_fraction=1.0, **UNDER)

    assert second.uncordon == ()
    on = {p.pod: p.node for p in second.placements}
    assert on[big] == a and on[other] != a
    assert other in {p for s in second.scale_up for p in s.pods}
    assert {p.pod: p.code for p in second.pending}[big] == codes.MAKING_ROOM
    assert second.state.rooms[a].pods == (big,)


def test_what_a_held_room_leaves_free_on_its_node_is_still_given_to_other_pods() -> None:
    """The hold charges its node only what its own pods take: a 7-CPU pod waits for a, and a small pod
    that fits beside it is placed there (a uncordoned for it) rather than on a new node."""
    w, (a, b) = half_full()
    (big,) = w.pods("big", 1, cpu="7", memory="1Gi")
    first = w.plan(max_scale_in_fraction=1.0, **UNDER)
    w.state = first.state.to_wire()
    _emptied_for(w, a, b)
    w.pods("fill", 1, cpu="4", memory="1Gi", node_name=b, owner=("ReplicaSet", "fill"))  # b has no room
    (small,) = w.pods("small", 1, cpu="500m", memory="1Gi")

    second = w.plan(NOW + timedelta(minutes=1), max_scale_in_fraction=1.0, **UNDER)

    on = {p.pod: p.node for p in second.placements}
    assert on[big] == a and on[small] == a
    assert second.scale_up == ()


def test_a_held_room_whose_pod_is_gone_or_bound_elsewhere_is_released() -> None:
    """big was deleted (or bound elsewhere) while a was emptied for it: the room is nobody's, a is given
    back to the next pending pod (uncordoned for it) and the state forgets the room."""
    w, (a, b) = half_full()
    (big,) = w.pods("big", 1, cpu="7", memory="1Gi")
    first = w.plan(max_scale_in_fraction=1.0, **UNDER)
    w.state = first.state.to_wire()
    _emptied_for(w, a, b)
    w.items.remove(w.pod_item(big))
    (other,) = w.pods("other", 1, cpu="7", memory="1Gi")

    second = w.plan(NOW + timedelta(minutes=1), max_scale_in_fraction=1.0, **UNDER)

    assert [u.node for u in second.uncordon] == [a]
    assert {p.pod: p.node for p in second.placements}[other] == a
    assert second.scale_up == () and second.state.rooms == {}


def _guarded(w: World, node: str) -> None:
    """A pod that may not move, which the ``picky`` pods' anti-affinity keeps them away from."""
    w.pods("guard", 1, cpu="100m", memory="1Gi", node_name=node, labels={"app": "guard"},
           owner=("ReplicaSet", "guard"))  # fmt: skip


GUARD_AFFINITY = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "guard"}}, "topologyKey": "kubernetes.io/hostname"}
]}}  # fmt: skip
NO_HDD = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "disk", "operator": "NotIn", "values": ["hdd"]}]}
]}}}  # fmt: skip


@pytest.mark.parametrize("rule", ["pod anti-affinity", "node label"])
def test_room_is_made_only_on_a_node_the_pending_pod_may_run_on(rule: str) -> None:
    """Node a is the cheaper move (one replica of 1.5 CPU, against b's two), but kube-scheduler would
    never bind the pending pod there: a runs a pod its anti-affinity repels, or carries a label (its
    kubelet set it, the template has none) its node affinity rules out. b makes room instead."""
    w = World(regions=("us-east-1",))
    a, b = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10))
    replicas(w, a, "one", 1)
    replicas(w, b, "two", 2)
    if rule == "pod anti-affinity":
        _guarded(w, a)
    else:
        w.node(a)["metadata"]["labels"]["disk"] = "hdd"
    affinity = GUARD_AFFINITY if rule == "pod anti-affinity" else NO_HDD
    (picky,) = w.pods("picky", 1, cpu="7", memory="1Gi", affinity=affinity)

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    (drain,) = result.drain
    assert (drain.node, drain.code) == (b, codes.MAKE_ROOM)
    assert {p.pod: p.node for p in result.placements}[picky] == b


def test_a_gang_kept_to_one_zone_gets_room_in_that_zone_only() -> None:
    w = World(regions=("us-east-1",))
    nodes = sorted(w.group("cpu", "m5.2xlarge", nodes=4, max_size=10, zones=["us-east-1a", "us-east-1b"],
                           suspended=["AZRebalance"]))  # fleet mode on several zones needs it  # fmt: skip
    _fleet(w)
    for i, n in enumerate(nodes):  # by name: a, b, a, b (the cheapest two are in different zones)
        w.node(n)["metadata"]["labels"]["topology.kubernetes.io/zone"] = "us-east-1" + "ab"[i % 2]
        replicas(w, n, f"web{i}", 2, cpu="3500m")  # they fit on no other node of the group
    w.group("spare", "g5.12xlarge", nodes=1)  # where the moved pods go (48 CPU)
    w.pod_group(COSCHED, "train", spec={"minMember": 2})
    zone_bound = {"kueue.x-k8s.io/podset-required-topology": "topology.kubernetes.io/zone"}
    only_cpu = {"node.kubernetes.io/instance-type": "m5.2xlarge"}  # not the spare node
    workers = w.pods(
        "big", 2, cpu="7", memory="1Gi", labels=GANG, annotations=zone_bound, node_selector=only_cpu
    )

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    assert result.scale_up == ()
    rooms = {d.node for d in result.drain if d.code == codes.MAKE_ROOM}
    zones = {w.node(n)["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in rooms}
    assert len(rooms) == 2 and len(zones) == 1
    assert {p.node for p in result.placements if p.pod in workers} == rooms


def test_a_pod_nominated_elsewhere_is_not_held_for_the_room_being_made() -> None:
    """While the make-room drain empties a (cordoned, its pods terminating), kube-scheduler may preempt
    elsewhere for the pod and nominate it to b (status.nominatedNodeName). The nomination is charged
    first: b's room is the pod's (kept pending-fits), so the hold on a no longer places it there too.
    Before, the plan put it on both: making-room on a, and charged to b."""
    w, (a, b) = half_full()
    (big,) = w.pods("big", 1, cpu="7", memory="1Gi")
    first = w.plan(max_scale_in_fraction=1.0, **UNDER)
    assert first.state.rooms[a].pods == (big,)
    w.state = first.state.to_wire()
    w.cordon(a, by_spillway=True)
    for item in w.items:
        if item["kind"] == "Pod" and item["metadata"]["name"].startswith(("web0-", "web1-")):
            item["metadata"]["deletionTimestamp"] = "2026-11-02T12:00:30Z"  # a's, and b's preempted
    w.pod_item(big)["status"]["nominatedNodeName"] = b

    second = w.plan(NOW + timedelta(minutes=1), max_scale_in_fraction=1.0, **UNDER)

    assert {p.pod: p.code for p in second.pending}[big] == codes.NOMINATED
    assert big not in {p.pod for p in second.placements if p.node == a}
    assert second.state.rooms == {}
    assert kept(second)[b][0] == codes.PENDING_FITS


def test_a_gang_whose_min_resources_count_its_new_nodes_keeps_them() -> None:
    # coscheduling admits the gang only while the whole cluster's free room, its own pods not counted,
    # covers its PodGroup's minResources (planner.minresources). Four nodes with 4.9 CPU free each and
    # two new nodes for the 7-CPU workers cover 30 CPU; making room on two busy nodes instead launches
    # nothing, and the cluster would have 19.6 CPU: the workers would wait for good. The gang keeps its
    # new nodes.
    w, _ = half_full(count=4)
    w.pod_group(COSCHED, "train", spec={"minMember": 2, "minResources": {"cpu": "30"}})
    workers = w.pods("big", 2, cpu="7", memory="1Gi", labels=GANG)

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    assert [d.code for d in result.drain if d.code == codes.MAKE_ROOM] == []
    (action,) = result.scale_up
    assert (action.group, action.to_size - action.from_size) == ("cpu", 2)
    assert [(g.gang, g.nodes, sorted(g.pods)) for g in action.gangs] == [
        ("default/train", 2, sorted(workers))
    ]
    # without minResources the same gang gets room on busy nodes (the test above)
    w2, _ = half_full(count=4)
    _gang(w2, 2)
    assert w2.plan(max_scale_in_fraction=1.0, **UNDER).scale_up == ()


def test_no_room_is_made_by_moving_pods_onto_a_launching_node_whose_daemonset_they_repel() -> None:
    """The cpu nodes' replicas must not share a node with fluentd (required pod anti-affinity over
    hostnames), which runs on the logged group's nodes; a logged node is launching (too small for the
    pending pod). Room on a cpu node would send one of its replicas to that launching node, where
    fluentd's pod is bound first and kube-scheduler's InterPodAffinity refuses the replica: the
    pending pod gets a new node instead, as it would without the launching node."""
    w, _ = fluentd_shy(logged_type="m5.xlarge", busy_cpu="3")
    w.pods("big", 1, cpu="7", memory="1Gi")

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    assert result.drain == ()
    assert [(s.group, s.to_size - s.from_size) for s in result.scale_up] == [("cpu", 1)]


def test_a_make_room_drain_keeps_its_node_so_it_does_not_hold_an_idle_node_at_min_size() -> None:
    """Group cpu has three nodes and MinSize 2: a and b run replicas, c (tainted, so neither the pending
    pod nor a's replicas go there) has been idle an hour. Room is made on a for the pending pod, and a
    stays; c's drain leaves the group at two. The make-room drain was counted as a node gone, so c was
    kept at `min-size` and paid for, idle, until a later plan."""
    w = World(regions=("us-east-1",))
    a, b, c = sorted(w.group("cpu", "m5.2xlarge", nodes=3, min_size=2, max_size=10))
    replicas(w, a, "one", 2)
    replicas(w, b, "two", 2)
    w.node(c)["spec"]["taints"] = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
    w.idle_since(c, 60)
    w.pods("big", 1, cpu="7", memory="1Gi")

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    drains = {d.node: (d.code, d.terminate) for d in result.drain}
    assert drains[a] == (codes.MAKE_ROOM, False)
    assert drains[c][1] is True and c not in kept(result)
    # the scale-in cap counts terminations only as well: one node of three at 0.34
    capped = w.plan(max_scale_in_fraction=0.34, **UNDER)
    assert {d.node for d in capped.drain} == {a, c}


@pytest.mark.parametrize(
    ("min_size", "floor"), [(2, {}), (0, {"cores_total": "16:1000"})], ids=["min-size", "cluster-min"]
)
def test_a_node_whose_room_is_still_being_made_does_not_hold_an_idle_node_at_a_minimum(
    min_size: int, floor: dict[str, str]
) -> None:
    """The same group a plan later: the make-room drain has cordoned a and its replicas are still
    terminating; c is now idle past scale_down_idle_minutes. a stays in the group (the drain uncordons
    it for the pending pod), so c's drain leaves two nodes: MinSize 2, or the 16 cores of cores_total's
    minimum. Spillway's cordon on a was read as a drain taking a away, so c was kept at `min-size` (or
    `cluster-min`) for as long as the room was being made (up to drain_claim_minutes)."""
    w = World(regions=("us-east-1",))
    a, b, c = sorted(w.group("cpu", "m5.2xlarge", nodes=3, min_size=min_size, max_size=10))
    replicas(w, a, "one", 2)
    replicas(w, b, "two", 2)
    w.node(c)["spec"]["taints"] = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
    w.idle_since(c, 5)
    (big,) = w.pods("big", 1, cpu="7", memory="1Gi")
    first = w.plan(max_scale_in_fraction=1.0, **UNDER, **floor)
    assert [(d.node, d.code) for d in first.drain] == [(a, codes.MAKE_ROOM)]
    assert kept(first)[c][0] == codes.IDLE_BELOW_THRESHOLD

    w.state = first.state.to_wire()
    w.cordon(a, by_spillway=True)
    for item in w.items:
        if item["kind"] == "Pod" and item["metadata"]["name"].startswith("one-"):
            item["metadata"]["deletionTimestamp"] = (NOW + timedelta(minutes=6)).isoformat()
    second = w.plan(NOW + timedelta(minutes=6), max_scale_in_fraction=1.0, **UNDER, **floor)

    assert [(d.node, d.terminate) for d in second.drain] == [(c, True)]
    assert {p.pod: p.code for p in second.pending}[big] == codes.MAKING_ROOM


def test_a_pending_pod_with_a_new_volume_takes_room_made_on_a_node_without_an_attach_limit() -> None:
    """The big pod's claim is a new EBS volume, and no node has a CSINode count for the driver: kube-
    scheduler's NodeVolumeLimits then sets no limit (nodevolumelimits/csi.go, Filter: a driver the node
    gives no limit for is not checked), so the volume is no room the moved pods must give back. Counted
    as lacking there, no move covered it and the pod got a new node instead."""
    w, (a, _) = half_full()
    w.items += [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "gp3"},
            "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data-big", "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "gp3"},
        },
    ]
    (big,) = w.pods("big", 1, cpu="7", memory="1Gi")
    pod = next(i for i in w.items if i.get("kind") == "Pod" and i["metadata"]["name"] == "big-0")
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data-big"}}]

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    assert result.scale_up == ()
    assert [(d.node, d.code) for d in result.drain] == [(a, codes.MAKE_ROOM)]
    assert {p.pod: p.node for p in result.placements}[big] == a


def _full_with_terminating(grace: int) -> tuple[World, str, str]:
    """Node a runs one 6-CPU replica, deleted a few seconds ago with a grace period of ``grace`` seconds
    (the API server set its deletionTimestamp to the end of that grace); node b runs a 6-CPU replica that
    may not move; a 6-CPU pod is pending. Returns the world, a and the pending pod."""
    w = World(regions=("us-east-1",))
    a, b = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10))
    (leaving,) = replicas(w, a, "old", 1, cpu="6")
    meta = w.pod_item(leaving)["metadata"]
    meta["deletionTimestamp"] = (NOW + timedelta(seconds=grace - 5)).isoformat().replace("+00:00", "Z")
    meta["deletionGracePeriodSeconds"] = grace
    w.pod_item(leaving)["spec"]["terminationGracePeriodSeconds"] = grace
    replicas(w, b, "busy", 1, cpu="6", annotations={})
    (pending,) = w.pods("new", 1, cpu="6", memory="1Gi")
    return w, a, pending


def test_a_pod_terminating_for_seconds_more_gives_its_room_instead_of_a_new_node() -> None:
    """Its grace period ends long before a new node could be Ready: the pending pod waits for its room."""
    w, a, pending = _full_with_terminating(grace=30)

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    assert result.scale_up == ()
    assert [(d.node, d.code, d.pods) for d in result.drain] == [(a, codes.MAKE_ROOM, ("default/old-0",))]
    assert {p.pod: p.node for p in result.placements}[pending] == a


def test_a_pod_terminating_for_an_hour_more_is_not_waited_for_the_pending_pod_gets_a_new_node() -> None:
    """A checkpointing pod deleted with terminationGracePeriodSeconds 3600 keeps its room for an hour: the
    kubelet honours the grace its deletionTimestamp ends, and the drain evicts nothing of it. A make-room
    drain waiting for it timed out at its deadline, gave the node back and failed, while the pending pod
    was held making-room for drain_claim_minutes instead of getting a node."""
    w, _, pending = _full_with_terminating(grace=3600)

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    assert result.drain == ()
    assert [(s.group, s.to_size - s.from_size) for s in result.scale_up] == [("cpu", 1)]
    assert "/new-" in {p.pod: p.node for p in result.placements}[pending]
    assert result.state.rooms == {}


def _full_with_grace(grace: int) -> tuple[World, str, str]:
    """Node a runs a 4-CPU replica whose spec.terminationGracePeriodSeconds is ``grace`` (a checkpoint in
    its preStop hook) and a 1.5-CPU one that may not move; node b runs a 3.5-CPU replica that may not
    move, with room for the 4-CPU one; a 6-CPU pod is pending, which fits a once the 4-CPU replica has
    left it. Returns the world, a and the pending pod."""
    w = World(regions=("us-east-1",))
    a, b = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10))
    (slow,) = replicas(w, a, "ckpt", 1, cpu="4")
    w.pod_item(slow)["spec"]["terminationGracePeriodSeconds"] = grace
    replicas(w, a, "pinned", 1, annotations={})
    replicas(w, b, "busy", 1, cpu="3500m", annotations={})
    (pending,) = w.pods("new", 1, cpu="6", memory="1Gi")
    return w, a, pending


@pytest.mark.parametrize("grace", [30, 120])
def test_a_pod_whose_grace_ends_before_a_new_node_is_ready_is_moved_to_make_room(grace: int) -> None:
    """The drain's eviction gives it its terminationGracePeriodSeconds: gone within 2 minutes."""
    w, a, pending = _full_with_grace(grace)

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    assert result.scale_up == ()
    assert [(d.node, d.code, d.pods) for d in result.drain] == [(a, codes.MAKE_ROOM, ("default/ckpt-0",))]
    assert {p.pod: p.node for p in result.placements}[pending] == a


@pytest.mark.parametrize("grace", [121, 3600])
def test_a_pod_with_a_long_grace_period_is_not_moved_to_make_room_the_pending_pod_gets_a_new_node(
    grace: int,
) -> None:
    """The drain's eviction gives the pod its terminationGracePeriodSeconds (DeleteOptions.gracePeriodSeconds,
    capped only by the drain's deadline, 900 s by default): a checkpointing pod with an hour keeps its
    room up to the deadline, while the pending pod was held making-room instead of getting a node Ready
    in about 2 minutes."""
    w, _, pending = _full_with_grace(grace)

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    assert result.drain == ()
    assert [(s.group, s.to_size - s.from_size) for s in result.scale_up] == [("cpu", 1)]
    assert "/new-" in {p.pod: p.node for p in result.placements}[pending]
    assert result.state.rooms == {}


def test_under_a_drain_deadline_shorter_than_two_minutes_a_terminating_pod_must_leave_within_the_deadline() -> (
    None
):
    """A pod terminating for 90 s more is leaving soon enough for a drain with the default deadline
    (900 s), not for one with DRAIN_DEADLINE_SECONDS 60: that drain waits for it (no drain shortens a
    grace already running) and times out before it is gone, giving the node back while the pending pod
    was held making-room. The plan launches instead."""
    outcomes = {}
    for deadline in (900, 60):
        w, a, _ = _full_with_terminating(grace=95)

        result = w.plan(max_scale_in_fraction=1.0, drain_deadline_seconds=deadline, **UNDER)

        outcomes[deadline] = ([(d.node, d.code) for d in result.drain], len(result.scale_up))
    assert outcomes == {900: ([(a, codes.MAKE_ROOM)], 0), 60: ([], 1)}, outcomes


def test_under_a_drain_deadline_shorter_than_two_minutes_a_pod_with_a_long_grace_is_not_cut_short() -> None:
    """The drain's eviction gives a pod no more grace than the seconds left before its deadline: under
    DRAIN_DEADLINE_SECONDS 100 a pod whose terminationGracePeriodSeconds is an hour would be gone within
    two minutes, killed mid-checkpoint. Make room moved it so; no plan moves such a pod now
    (grace-past-deadline), and the pending pod gets a new node. A grace that fits the deadline with the
    drain's margin (GRACE_MARGIN_SECONDS, 60 s) is moved as before."""
    outcomes = {}
    for grace in (3600, 40):
        w, a, _ = _full_with_grace(grace)

        result = w.plan(max_scale_in_fraction=1.0, drain_deadline_seconds=100, **UNDER)

        outcomes[grace] = ([(d.node, d.code, d.pods) for d in result.drain], len(result.scale_up))
    assert outcomes == {3600: ([], 1), 40: ([(a, codes.MAKE_ROOM, ("default/ckpt-0",))], 0)}, outcomes


@pytest.mark.parametrize(
    "mark",
    [{}, {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}, {"volcano.sh/preemptable": "true"}],
    ids=["elastic", "safe-to-evict", "preemptable"],
)
def test_make_room_moves_no_worker_its_elastic_job_cannot_lose_whatever_opts_it_in(
    mark: dict[str, str],
) -> None:
    """a runs both workers of an elastic job at its minimum (2); a pending pod fits a once one worker
    moves to b, which has room for the worker but not for the pod. Shrunk or moved on an opt-in
    (safe-to-evict, Volcano preemptable: Candidate.members), the worker leaves its job below its
    minimum, so the plan launches instead. With the opt-in, make room moved it (the opt-in rule matched
    before the elastic one and no minimum was counted)."""
    w = World(regions=("us-east-1",))
    a, b = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10))
    elastic_workers(w, a, ["w-0", "w-1"], cpu="3")
    for item in w.items:
        if item["kind"] == "Pod" and item["metadata"]["name"].startswith("w-"):
            item["metadata"].setdefault("annotations", {}).update(mark)
    replicas(w, b, "stay", 1, cpu="4", annotations={})  # may not move; b keeps room for one worker
    (pod,) = w.pods("wide", 1, cpu="4500m", memory="1Gi")

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    assert result.drain == ()
    assert [s.pods for s in result.scale_up] == [(pod,)]
