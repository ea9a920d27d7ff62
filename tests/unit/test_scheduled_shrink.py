"""Scheduled actions that lower a group below the nodes it has: drained first, within the window floors
use (scale_down_idle_minutes), never grown past.

When an action sets a group's DesiredCapacity (or its MaxSize) below the instances it has, Auto Scaling
terminates the instances above it at the action's time, picked by the group's termination policy and
not drained (EC2 Auto Scaling User Guide, "Scheduled scaling": the action sets the group's sizes and
"current capacity must fall within the minimum and maximum capacity that was set by your scheduled
action"; "Use instance scale-in protection": protected instances are not terminated on scale-in)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from plan_world import NOW, World, scale_up
from test_planner_consolidation import VOLCANO_PG, _volcano_gang, elastic_workers
from test_planner_unready import _never_started, _not_ready

from spillway.act.planning import drain_item
from spillway.local import objects as o
from spillway.model.schedule import ScheduledFloor, check_actions
from spillway.planner import ScalingPlan, codes, plan

SOON = NOW + timedelta(minutes=5)  # within the default 10-minute scale_down_idle_minutes
EVENING = ScheduledFloor("evening", desired=2, start=SOON)
MOVABLE = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
PINNED = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"


def planned(world: World, facts: dict[str, Any], **config: Any) -> ScalingPlan:
    snapshot, groups, cfg, state = world.parsed(**config)
    groups = [replace(g, **facts) if g.name == "web" else g for g in groups]
    return plan(snapshot, groups, cfg, state, NOW)


def web(nodes: int = 4, **kwargs: Any) -> tuple[World, list[str]]:
    world = World(regions=("us-east-1",))
    names = sorted(world.group("web", "m5.2xlarge", nodes=nodes, **kwargs))
    return world, names


def replica(world: World, node: str, name: str, annotations: dict[str, str] = MOVABLE) -> str:
    (key,) = world.pods(name, 1, cpu="1500m", memory="1Gi", node_name=node, owner=("ReplicaSet", name),
                        annotations=annotations)  # fmt: skip
    return key


def test_idle_nodes_below_their_idle_time_are_drained_ahead_of_an_action_lowering_desired() -> None:
    """Four nodes idle for two minutes, an action setting DesiredCapacity 2 in five: Auto Scaling would
    terminate two of them at its run; the plan drains two now (their idle timers do not hold them)."""
    world, nodes = web()
    for node in nodes:
        world.idle_since(node, 2)
    result = planned(world, {"scheduled": (EVENING,)})

    assert len(result.drain) == 2
    assert {d.code for d in result.drain} == {codes.SCHEDULED_SHRINK}
    assert "scheduled action evening (once) runs at 2026-11-02T12:05:00Z with DesiredCapacity 2" in (
        result.drain[0].reason
    )
    (shrink,) = result.shrinks
    assert (shrink.group, shrink.size, shrink.drains, shrink.at_risk) == (
        "web",
        2,
        tuple(d.node for d in result.drain),
        (),
    )
    assert result.to_dict()["shrinks"][0]["drains"] == [d.node for d in result.drain]
    # the other two stay, kept by their timers as before
    assert sorted(k.code for k in result.kept) == [codes.IDLE_BELOW_THRESHOLD] * 2


def test_an_action_beyond_the_window_or_one_setting_only_min_size_drains_nothing_ahead() -> None:
    world, nodes = web()
    for node in nodes:
        world.idle_since(node, 2)
    later = ScheduledFloor("evening", desired=2, start=NOW + timedelta(minutes=30))
    lower_min = ScheduledFloor("evening", min_size=0, start=SOON)
    for action in (later, lower_min):
        result = planned(world, {"scheduled": (action,)})
        assert not result.drain and not result.shrinks, action


def test_busy_nodes_whose_pods_may_move_are_drained_ahead_of_an_action_lowering_max_size() -> None:
    """Each node runs one movable replica; MaxSize 2 takes the group to two nodes: two nodes' replicas
    move to the others' room first and their nodes are drained, the pods named in the drain."""
    world, nodes = web()
    pods = [replica(world, node, f"r{i}") for i, node in enumerate(nodes)]
    night = ScheduledFloor("night", max_size=2, start=SOON)
    result = planned(world, {"scheduled": (night,)})

    assert len(result.drain) == 2
    assert all(d.code == codes.SCHEDULED_SHRINK and len(d.pods) == 1 for d in result.drain)
    assert {p for d in result.drain for p in d.pods} <= set(pods)
    assert "with MaxSize 2" in result.drain[0].reason
    assert result.shrinks[0].at_risk == ()


def test_pods_that_must_not_be_disturbed_are_not_drained_and_are_reported_at_risk() -> None:
    world, nodes = web()
    pods = [replica(world, node, f"r{i}", PINNED) for i, node in enumerate(nodes)]
    result = planned(world, {"scheduled": (EVENING,)})

    assert not result.drain
    (shrink,) = result.shrinks
    assert shrink.drains == () and shrink.at_risk == tuple(sorted(pods))
    assert shrink.reason.startswith("scheduled action evening (once) runs at 2026-11-02T12:05:00Z")
    assert shrink.reason.endswith(
        "drains none ahead of it; 2 more of its instances go undrained when it runs (its other nodes are "
        "kept: pod-never on 4 node(s)), with 4 pod(s) at risk on them"
    )


def test_min_size_stops_the_drains_ahead_and_the_rest_is_reported() -> None:
    """The action sets MinSize 0 and DesiredCapacity 0; the group's MinSize is 3 until it runs, and a
    drain's decrement cannot take the group below it: one node is drained, three go undrained."""
    world, nodes = web(min_size=3)
    for node in nodes:
        world.idle_since(node, 2)
    night = ScheduledFloor("night", min_size=0, desired=0, start=SOON)
    result = planned(world, {"scheduled": (night,)})

    assert len(result.drain) == 1
    (shrink,) = result.shrinks
    assert shrink.drains == (result.drain[0].node,) and shrink.at_risk == ()
    assert shrink.reason.endswith(
        "drains 1 node(s) ahead of it; 3 more of its instances go undrained when it runs (its other nodes "
        "are kept: min-size on 3 node(s)), with 0 pod(s) at risk on them"
    )


def test_a_group_with_spillways_terminate_lifecycle_hook_needs_no_drain_ahead() -> None:
    world, nodes = web()
    for node in nodes:
        world.idle_since(node, 2)
    result = planned(world, {"scheduled": (EVENING,), "drain_hooks": ("drain-before-terminate",)})

    assert not result.drain
    (shrink,) = result.shrinks
    assert shrink.drains == () and "no drain ahead" in shrink.reason
    assert "drain-before-terminate" in shrink.reason


def test_a_terminate_hook_holds_the_instances_a_warm_pool_takes_back_on_scale_in_no_drain_ahead() -> None:
    """Spillway's terminate hook on the group, and a warm pool with ``ReuseOnScaleIn``: Auto Scaling
    returns the instances the action scales in to the pool rather than terminating them, and the
    terminate hook holds each in Warmed:Pending:Wait ("Use lifecycle hooks with a warm pool": an
    instance returning to the warm pool pauses there for the EC2_INSTANCE_TERMINATING action), where
    Spillway's lifecycle drain drains it. The plan drained two nodes ahead instead, as for a group
    without the hook: it terminated instances the pool was to keep, and said the hook held none."""
    world, nodes = web()
    for node in nodes:
        world.idle_since(node, 2)
    hook = {"drain_hooks": ("drain-before-terminate",), "reuse_on_scale_in": True}
    result = planned(world, {"scheduled": (EVENING,), **hook})

    assert result.drain == ()
    (shrink,) = result.shrinks
    assert shrink.drains == () and "no drain ahead" in shrink.reason
    assert "drain-before-terminate" in shrink.reason and "returns to its warm pool" in shrink.reason


def test_a_suspended_terminate_process_needs_no_drain_ahead_even_of_a_pending_instance() -> None:
    """With Terminate suspended, the group's scheduled actions run but start no scale-in ("How suspended
    processes affect other processes", Terminate): the run terminates nothing, of any lifecycle state.
    So no node is drained ahead, not even one whose instance a launch hook still holds in Pending:Wait,
    which the per-instance rule of scale-down and the drain step (terminate_holds) would let go: that
    rule is for terminations Spillway asks for, not the group's own scale-in."""
    world, nodes = web(suspended=["Terminate"])
    world.groups["web"]["Instances"][0]["LifecycleState"] = "Pending:Wait"
    for node in nodes:
        world.idle_since(node, 2)
    result = planned(world, {"scheduled": (EVENING,)})

    assert result.drain == () and result.shrinks == ()
    assert {k.code for k in result.kept} == {codes.IDLE_BELOW_THRESHOLD}


def test_instances_protected_from_scale_in_are_not_terminated_by_the_action() -> None:
    """Three of four instances protected: Auto Scaling terminates only the fourth at the run, so one
    node is drained ahead, not two."""
    world, nodes = web()
    for node in nodes:
        world.idle_since(node, 2)
    instances = tuple(i["InstanceId"] for i in world.groups["web"]["Instances"])
    result = planned(world, {"scheduled": (EVENING,), "protected_instances": instances[:3]})

    assert len(result.drain) == 1
    assert result.drain[0].instance_id == instances[3]


def test_scale_up_stops_at_a_max_size_an_action_sets_within_the_window() -> None:
    """Three pods each needing a node of their own; MaxSize 10, but an action sets MaxSize 2 in five
    minutes: a third node launched now would be terminated, pod and all, at its run."""
    world, _ = web(nodes=1)
    world.pods("big", 3, cpu="7", memory="1Gi", owner=("ReplicaSet", "big"))
    night = ScheduledFloor("night", max_size=2, start=SOON)
    result = planned(world, {"scheduled": (night,)})

    # one pod takes the idle node's room, one a new node, the third waits
    assert scale_up(result)["web"][:2] == (1, 2)
    (waiting,) = [p for p in result.pending if p.code == codes.MAX_SIZE]
    assert "web at 2: scheduled action night (once) runs at 2026-11-02T12:05:00Z with MaxSize 2" in (
        waiting.reason
    )
    # an action beyond the window does not hold it
    later = ScheduledFloor("night", max_size=2, start=NOW + timedelta(minutes=30))
    assert scale_up(planned(world, {"scheduled": (later,)}))["web"][:2] == (1, 3)


def test_movable_pods_with_no_room_elsewhere_are_evicted_rather_than_killed_with_the_node() -> None:
    """Two nodes, each full with a movable replica; an action lowers DesiredCapacity to 1: the pod of
    the node drained has no room elsewhere, and waits as a pending pod instead of dying at the run."""
    world, nodes = web(nodes=2)
    for i, node in enumerate(nodes):
        world.pods(f"full{i}", 1, cpu="7", memory="1Gi", node_name=node, owner=("ReplicaSet", f"full{i}"),
                   annotations=MOVABLE)  # fmt: skip
    result = planned(world, {"scheduled": (replace(EVENING, desired=1),)})

    (drain,) = result.drain
    assert drain.code == codes.SCHEDULED_SHRINK and len(drain.pods) == 1
    assert "fit on no other node (evicted, they wait as pending pods rather than die with the node)" in (
        drain.reason
    )


def test_an_action_lowering_desired_or_max_size_below_min_size_is_refused_and_drains_nothing() -> None:
    """DesiredCapacity 2 with no new MinSize on a group of MinSize 3: the group's limits hold when the
    action runs ("Set scaling limits"), a desired capacity outside them is refused (the action must name
    the limits too, "Scheduled scaling"), and the run changes nothing. The plan took the group down to
    its MinSize ahead of it ("DesiredCapacity 2, held by MinSize 3"): it drained a node Auto Scaling
    never terminates. So does a MaxSize 2 alone ("Max bound ... must be greater than or equal to min
    bound"). Neither drains anything now, and the group's problems name them; with a MinSize of its own
    as low the action runs, and it is a ceiling again."""
    world, nodes = web(min_size=3)
    for node in nodes:
        world.idle_since(node, 2)
    cap = ScheduledFloor("cap", max_size=2, start=SOON)
    for action, field in ((EVENING, "DesiredCapacity"), (cap, "MaxSize")):
        result = planned(world, {"scheduled": (action,)})
        assert result.drain == () and result.shrinks == (), field
        assert sorted(k.code for k in result.kept) == [codes.IDLE_BELOW_THRESHOLD] * 4

    _, groups, _, _ = world.parsed()
    (group,) = groups
    assert check_actions([EVENING, cap], group.max_size, group.min_size) == [
        f"ScheduledActions[{a.name}]: {field} 2 is below the group's MinSize 3: Auto Scaling refuses these "
        "sizes when it runs (ValidationError), so the action changes nothing and sets no floor; give it a "
        "MinSize at least as low, or raise its sizes"
        for a, field in ((EVENING, "DesiredCapacity"), (cap, "MaxSize"))
    ]

    result = planned(world, {"scheduled": (replace(EVENING, min_size=2),)})
    assert [s.size for s in result.shrinks] == [2] and len(result.drain) == 1  # MinSize 3 holds until then


def test_a_node_drained_ahead_of_the_action_is_not_uncordoned_for_pending_pods() -> None:
    """Of four nodes, one is being drained by Spillway (a plan's drain ahead of the action that sets
    DesiredCapacity 3 in five minutes); a pod is pending that fits only there. Uncordoned, the node
    would keep the group at four until the action runs, and Auto Scaling would then terminate one node
    undrained (the pod's, maybe): the pod waits for room instead, and the node stays cordoned. Without
    the action the node is reused for the pod, as before."""
    world, nodes = web()
    for i, node in enumerate(nodes[1:]):
        world.pods(f"full{i}", 1, cpu="7", memory="1Gi", node_name=node, owner=("ReplicaSet", f"full{i}"),
                   annotations=PINNED)  # fmt: skip
    world.cordon(nodes[0], by_spillway=True)
    world.state["nodes"][nodes[0]] = {
        "idle_since": (NOW - timedelta(minutes=30)).isoformat(),
        "draining_since": (NOW - timedelta(minutes=1)).isoformat(),
    }
    (pod,) = world.pods("late", 1, cpu="7", memory="1Gi", owner=("ReplicaSet", "late"))
    action = replace(EVENING, desired=3)

    result = planned(world, {"scheduled": (action,)})
    assert not result.uncordon
    assert {p.pod: p.code for p in result.pending}[pod] == codes.MAX_SIZE

    before = planned(world, {})
    assert [u.node for u in before.uncordon] == [nodes[0]]


def test_scale_down_disabled_idle_nodes_stay_in_a_group_whose_consolidation_is_off() -> None:
    """Consolidation off (the group scales in by its schedule) and three of four idle nodes annotated
    scale-down-disabled: the annotation holds ahead of the action as it holds anywhere else, though
    consolidation-off, which the drain ahead waives, is what a scale-down judges first. Only the fourth
    node is drained; the shrink names what keeps the others."""
    world, nodes = web()
    for node in nodes:
        world.idle_since(node, 2)
    for node in nodes[:3]:
        world.node(node)["metadata"]["annotations"][SCALE_DOWN_DISABLED] = "true"
    result = planned(world, {"scheduled": (EVENING,), "consolidation": "off"})

    assert [d.node for d in result.drain] == [nodes[3]]
    (shrink,) = result.shrinks
    assert f"{codes.SCALE_DOWN_DISABLED} on 3 node(s)" in shrink.reason


def test_young_busy_nodes_protected_from_scale_in_are_not_drained_ahead() -> None:
    """Four nodes launched three minutes ago, each with a movable replica; two are protected from
    scale-in. The drain ahead waives a node's youth, but not the protection its youth was judged
    before: TerminateInstanceInAutoScalingGroup would terminate a protected instance, which the action
    itself never does. The two unprotected nodes are drained."""
    world, nodes = web()
    for node in nodes:
        world.node(node)["metadata"]["creationTimestamp"] = "2026-11-02T11:57:00Z"
    for i, node in enumerate(nodes):
        replica(world, node, f"r{i}")
    instances = tuple(i["InstanceId"] for i in world.groups["web"]["Instances"])
    result = planned(world, {"scheduled": (EVENING,), "protected_instances": instances[:2]})

    assert sorted(d.instance_id for d in result.drain) == sorted(instances[2:])
    assert {d.code for d in result.drain} == {codes.SCHEDULED_SHRINK}


def test_a_pod_disruption_budget_spent_by_one_drain_ahead_keeps_the_next_node() -> None:
    """Two replicas of web, one on each of two nodes, spread over hostnames (DoNotSchedule) under a
    PodDisruptionBudget that allows one disruption; the action takes three nodes to one. The first
    drain ahead moves web0 and spends the budget. The second node's replica is one whose topology this
    plan changes, which a drain ahead moves all the same (it is evicted anyway); but that waiver also
    skipped the budget check, so both replicas were planned for eviction at once. The second node waits
    for a later plan (the budget comes back once web0 runs again), its pods reported at risk."""
    world, (a, b, c) = web(nodes=3)
    spread = [
        {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "web"}}}
    ]  # fmt: skip
    replicas = []
    for i, node in enumerate((a, b)):
        (key,) = world.pods(f"web{i}", 1, cpu="1500m", memory="1Gi", node_name=node, owner=("ReplicaSet", "web"),
                            annotations=MOVABLE, labels={"app": "web"})  # fmt: skip
        world.pod_item(key)["spec"]["topologySpreadConstraints"] = spread
        replicas.append(key)
    world.pods(
        "filler", 1, cpu="5", memory="1Gi", node_name=b, owner=("ReplicaSet", "filler"), annotations=MOVABLE
    )
    replica(world, c, "other", PINNED)
    world.items.append(o.pdb("web", "default", {"app": "web"}, max_unavailable=1, disruptions_allowed=1))
    result = planned(world, {"scheduled": (replace(EVENING, desired=1),)})

    (drain,) = result.drain
    assert (drain.node, drain.pods) == (a, (replicas[0],))
    (shrink,) = result.shrinks
    assert replicas[1] in shrink.at_risk


def test_a_make_room_cordon_counts_as_a_node_that_stays_when_a_drained_node_is_reused() -> None:
    """Of four nodes, Spillway drains one ahead of the action that sets DesiredCapacity 3, and a
    make-room drain has another cordoned, emptying it for a pending pod (State.rooms): that node stays
    in the group. A late pod fits only the node drained ahead. Counting both cordons as nodes leaving,
    the plan found the group at two without the drained node and uncordoned it for the late pod: the
    group then kept four nodes, and Auto Scaling terminates one undrained at the action's run."""
    world, nodes = web()
    for i, node in enumerate(nodes[2:]):
        world.pods(f"full{i}", 1, cpu="7", memory="1Gi", node_name=node, owner=("ReplicaSet", f"full{i}"),
                   annotations=PINNED)  # fmt: skip
    claimed = {
        "idle_since": (NOW - timedelta(minutes=30)).isoformat(),
        "draining_since": (NOW - timedelta(minutes=1)).isoformat(),
    }
    for node in nodes[:2]:
        world.cordon(node, by_spillway=True)
        world.state["nodes"][node] = dict(claimed)
    (wanted,) = world.pods("wanted", 1, cpu="7", memory="1Gi", owner=("ReplicaSet", "wanted"))
    world.state["rooms"] = {nodes[1]: {"pods": [wanted], "since": (NOW - timedelta(minutes=1)).isoformat()}}
    (late,) = world.pods("late", 1, cpu="7", memory="1Gi", owner=("ReplicaSet", "late"))

    result = planned(world, {"scheduled": (replace(EVENING, desired=3),)})

    assert not result.uncordon
    codes_of = {p.pod: p.code for p in result.pending}
    assert (codes_of[late], codes_of[wanted]) == (codes.MAX_SIZE, codes.MAKING_ROOM)


def test_an_idle_node_not_ready_drained_ahead_carries_its_unready_time_like_an_ordinary_drain() -> None:
    """One of four idle nodes is NotReady past scale_down_unready_minutes (20) with a pod its kubelet
    never started, which keeps a dead node from nothing. An ordinary scale-down's drain of it carries the
    unready time, so DrainNode lets that pod go with the node (act.drain.dead_node); the drain ahead of
    an action taking the group to two must carry it too. Without it DrainNode reads the pod as workload
    the plan never saw and cancels the drain, and Auto Scaling terminates a node at the action's run
    undrained."""
    world, nodes = web()
    dead = nodes[0]
    _not_ready(world, dead, 25)
    _never_started(world, dead)
    for node in nodes:
        world.idle_since(node, 2)  # below their idle time: only the action drains them now

    result = planned(world, {"scheduled": (EVENING,)})

    drains = {d.node: d for d in result.drain}
    assert len(drains) == 2 and dead in drains
    assert drains[dead].code == codes.SCHEDULED_SHRINK and drains[dead].unready_minutes == 20
    assert "its pods never started: team-a/train-0" in drains[dead].reason
    assert drain_item(drains[dead], {})["unready_minutes"] == 20
    (ready,) = set(drains) - {dead}
    assert drains[ready].unready_minutes is None and "unready_minutes" not in drain_item(drains[ready], {})


def test_an_idle_node_that_never_initialized_is_drained_ahead_rather_than_a_busy_one() -> None:
    """Two nodes: one runs a pod that must not be disturbed, the other is Ready and idle but never
    initialized (a startup taint still on 16 minutes after its creation, past max_node_startup_minutes).
    Scale-down keeps the second until it has been idle for scale_down_unready_minutes (20): its idle
    timer, which the action taking the group to one node overrides. It
    is drained ahead, and nothing is at risk. Kept, it left the action to Auto Scaling's termination
    policy, which may pick the busy node and kill its pod with no drain."""
    world, (busy, stuck) = web(nodes=2)
    replica(world, busy, "r0", PINNED)
    item = world.node(stuck)
    item["metadata"]["creationTimestamp"] = o.iso(NOW - timedelta(minutes=16))
    item["spec"]["taints"] = [
        {"key": "startup-taint.cluster-autoscaler.kubernetes.io/disk", "effect": "NoSchedule"}
    ]

    ordinary = planned(world, {})
    assert {k.node: k.code for k in ordinary.kept}[stuck] == codes.IDLE_BELOW_THRESHOLD  # its unready time

    result = planned(world, {"scheduled": (replace(EVENING, desired=1),)})

    assert [(d.node, d.code, d.unready_minutes) for d in result.drain] == [
        (stuck, codes.SCHEDULED_SHRINK, None)
    ]
    (shrink,) = result.shrinks
    assert shrink.drains == (stuck,) and shrink.at_risk == ()


def test_a_pod_whose_grace_outlasts_the_drain_deadline_is_drained_ahead_rather_than_killed_without_one() -> (
    None
):
    """Consolidation never moves a pod whose terminationGracePeriodSeconds is longer than the drains'
    deadline (the eviction would cut its shutdown short there: grace-past-deadline). Ahead of a
    scheduled action the choice is not between that and leaving it be: Auto Scaling terminates the
    instances above the action's size undrained, its pods with no grace at all. Since f3f5be5 such a
    node was kept (pod-never) and its pods reported at risk; drained ahead, they get the drain's deadline
    to stop, as every pod evicted ahead of an action gets its grace rather than being killed."""
    world, nodes = web()
    pods = [replica(world, node, f"r{i}") for i, node in enumerate(nodes)]
    for key in pods:
        world.pod_item(key)["spec"]["terminationGracePeriodSeconds"] = 3600
    night = ScheduledFloor("night", max_size=2, start=SOON)

    result = planned(world, {"scheduled": (night,)})

    assert len(result.drain) == 2 and all(d.code == codes.SCHEDULED_SHRINK for d in result.drain)
    assert {p for d in result.drain for p in d.pods} < set(pods)
    assert all("cut short at the drain's deadline" in d.reason for d in result.drain)
    assert result.shrinks[0].at_risk == ()


def test_ahead_of_an_action_nodes_whose_pods_move_whole_go_before_those_whose_grace_would_be_cut() -> None:
    """Two nodes run a small replica with an hour's grace (the least used), two a larger one with the
    default grace; MaxSize 2 drains two nodes ahead of the action: the two whose pods move with their
    whole grace, though least-used-first would pick the others, whose pods' shutdown the drain cuts."""
    world, nodes = web()
    cut = []
    for i, node in enumerate(nodes):
        if i < 2:
            (key,) = world.pods(f"ckpt{i}", 1, cpu="500m", memory="1Gi", node_name=node,
                                owner=("ReplicaSet", f"ckpt{i}"), annotations=MOVABLE)  # fmt: skip
            world.pod_item(key)["spec"]["terminationGracePeriodSeconds"] = 3600
            cut.append(node)
        else:
            replica(world, node, f"r{i}")
    night = ScheduledFloor("night", max_size=2, start=SOON)

    result = planned(world, {"scheduled": (night,)})

    assert sorted(d.node for d in result.drain) == sorted(set(nodes) - set(cut))


# one chunk of five CPUs: it fits an idle m5.2xlarge (7910m) and no node running two 2-CPU replicas
ROOM = {"name": "room", "pod": {"cpu": "5", "memory": "1Gi"}, "replicas": 1}


def test_an_idle_node_holding_only_a_buffers_room_is_drained_ahead_rather_than_a_busy_one() -> None:
    """Of four nodes, three run two movable 2-CPU replicas each and the fourth is idle, its free room
    the only room for a configured buffer's chunk; an action sets DesiredCapacity 3 in five minutes.
    The buffer's virtual pod is the lowest of all demand (README "Buffers and limits by the clock"), and
    the action removes a node whatever it holds: the idle node is the one to go. Kept for the buffer
    (code ``buffer``, which the drains ahead did not waive), the plan evicted two real replicas from a
    busy node instead, to keep room for a pod that does not exist."""
    world, (idle, *busy) = web()
    for i, node in enumerate(busy):
        world.pods(f"r{i}", 2, cpu="2", memory="1Gi", node_name=node, owner=("ReplicaSet", f"r{i}"),
                   annotations=MOVABLE)  # fmt: skip
    world.idle_since(idle, 2)
    action = {"scheduled": (replace(EVENING, desired=3),)}
    assert {k.node: k.code for k in planned(world, {}, buffers=[ROOM]).kept}[idle] == codes.BUFFER

    result = planned(world, action, buffers=[ROOM])

    assert [(d.node, d.code, d.pods) for d in result.drain] == [(idle, codes.SCHEDULED_SHRINK, ())]
    (shrink,) = result.shrinks
    assert (shrink.drains, shrink.at_risk) == ((idle,), ())
    # the same plan as without the buffer
    assert [d.node for d in planned(world, action).drain] == [idle]
    # a lasting protection still holds it: its instance protected from scale-in, a busy node goes
    instance = world.node(idle)["spec"]["providerID"].rsplit("/", 1)[1]
    protected = planned(world, {**action, "protected_instances": (instance,)}, buffers=[ROOM])
    assert len(protected.drain) == 1 and protected.drain[0].node != idle
    # the busy node's replicas move into the room the buffer held: the node is kept receiving them
    assert {k.node: k.code for k in protected.kept}[idle] == codes.RECEIVES_MOVED_PODS
    assert f"fit on {idle}" in protected.drain[0].reason


def test_a_busy_node_holding_a_buffers_room_is_drained_ahead_when_its_pods_may_move() -> None:
    """Three busy nodes, an action setting DesiredCapacity 2: two run a pod that must not be disturbed,
    the third a movable replica and, beside it, a buffer's chunk. Only the third can be drained ahead.
    Kept for the buffer's room, nothing was drained and Auto Scaling's termination policy picked the
    node to terminate at the run, undrained: maybe one of the pods that must not be disturbed."""
    world, (holder, *others) = web(nodes=3)
    moved = replica(world, holder, "m0")  # the buffer's chunk goes beside it: busy nodes first, by name
    pinned = [replica(world, node, f"p{i}", PINNED) for i, node in enumerate(others)]
    held = {p.pod: p.node for p in planned(world, {}, buffers=[ROOM]).placements}
    assert held == {"config:room:buffer:0": holder}

    result = planned(world, {"scheduled": (replace(EVENING, desired=2),)}, buffers=[ROOM])

    assert [(d.node, d.code, d.pods) for d in result.drain] == [(holder, codes.SCHEDULED_SHRINK, (moved,))]
    (shrink,) = result.shrinks
    assert shrink.drains == (holder,) and not set(pinned) & set(shrink.at_risk)


def test_of_two_idle_nodes_the_one_not_holding_a_buffers_room_is_drained_ahead() -> None:
    """Two idle nodes, a buffer's chunk in the room of one, an action setting DesiredCapacity 1: the
    other goes, and the buffer keeps its room through the action."""
    world, nodes = web(nodes=2)
    for node in nodes:
        world.idle_since(node, 2)
    (holder,) = {p.node for p in planned(world, {}, buffers=[ROOM]).placements}

    result = planned(world, {"scheduled": (replace(EVENING, desired=1),)}, buffers=[ROOM])

    assert [d.node for d in result.drain] == [n for n in nodes if n != holder]
    assert {k.node: k.code for k in result.kept} == {holder: codes.BUFFER}


def test_expendable_elastic_workers_drained_ahead_are_counted_toward_their_jobs_minimum() -> None:
    """Four workers of an elastic job (2 to 4), priority -100 (below expendable_priority_cutoff), two
    on each of two idle nodes; the action takes three nodes to one. A drain ahead of the action
    evicted an idle node's expendable pods counted against budgets and backoffLimits, not against
    their elastic jobs' minimums (the ordinary idle drain and consolidation count them), so both nodes
    were drained ahead and all four workers of a job whose minimum is 2 evicted in one plan. One node
    goes ahead; the other is kept `elastic-min`, its workers reported at risk."""
    world, (a, b, c) = web(nodes=3)
    for node, names in ((a, ["w-0", "w-1"]), (b, ["w-2", "w-3"])):
        elastic_workers(world, node, names, cpu="3")
        for name in names:
            world.pod_item(f"default/{name}")["spec"]["priority"] = -100  # expendable
        world.idle_since(node, 2)
    replica(world, c, "other", PINNED)

    result = planned(world, {"scheduled": (replace(EVENING, desired=1),)})

    (drain,) = result.drain
    assert drain.node in (a, b) and drain.code == codes.SCHEDULED_SHRINK
    (shrink,) = result.shrinks
    assert "elastic-min on 1 node(s)" in shrink.reason, shrink.reason
    kept_workers = {"default/w-2", "default/w-3"} if drain.node == a else {"default/w-0", "default/w-1"}
    assert {p for p in shrink.at_risk if "/w-" in p} == kept_workers


def test_expendable_volcano_gang_members_drained_ahead_are_counted_toward_min_member() -> None:
    """The same for a Volcano gang at its minMember (4) of preemptable tasks of priority -100, two on
    each of two idle nodes: a drain ahead of the action evicted them uncounted. Neither node goes
    ahead (each would break the gang); both are kept `pod-never`, their tasks reported at risk."""
    world, (a, b, c) = web(nodes=3)
    world.pod_group(VOLCANO_PG, "train", spec={"minMember": 4}, phase="Running")
    for node, names in ((a, ["train-0", "train-1"]), (b, ["train-2", "train-3"])):
        _volcano_gang(world, node, names)
        for name in names:
            world.pod_item(f"default/{name}")["spec"]["priority"] = -100  # expendable
        world.idle_since(node, 2)
    replica(world, c, "other", PINNED)

    result = planned(world, {"scheduled": (replace(EVENING, desired=1),)})

    assert result.drain == ()
    (shrink,) = result.shrinks
    assert "pod-never on 3 node(s)" in shrink.reason, shrink.reason  # c: its pinned pod
    assert {p for p in shrink.at_risk if "/train-" in p} == {f"default/train-{i}" for i in range(4)}


def _moved_onto_the_idle_node() -> tuple[str, str, str, ScalingPlan]:
    """Four nodes of a group that consolidates: one runs a small movable replica, one is idle (for two
    minutes), two are full of pods that must not be disturbed; an action sets DesiredCapacity 2 in five
    minutes. (the first node, the idle one, the replica, the plan)"""
    world, (small, idle, *full) = web()
    moved = replica(world, small, "m0")
    world.idle_since(idle, 2)
    for i, node in enumerate(full):
        world.pods(f"pin{i}", 1, cpu="7", memory="1Gi", node_name=node, owner=("ReplicaSet", f"pin{i}"),
                   annotations=PINNED)  # fmt: skip
    result = planned(world, {"scheduled": (EVENING,)}, consolidation="when-underutilized")
    return small, idle, moved, result


def test_an_idle_node_that_receives_a_consolidations_moved_pods_is_not_drained_ahead() -> None:
    """Of four nodes of a group that consolidates, one runs a small movable replica, one is idle (for two
    minutes) and two are full of pods that must not be disturbed; an action sets DesiredCapacity 2 in
    five minutes. Consolidation drains the first node and moves its replica onto the idle one. That node
    receives moved pods now (README "Consolidation": "A node that receives moved pods is not drained in
    the same plan"): the drain ahead did not see it, took it for an idle node and drained it too, so the
    replica was evicted towards a node being cordoned, and the idle drain would cancel on the replica
    that arrived there."""
    small, idle, moved, result = _moved_onto_the_idle_node()

    (drain,) = result.drain
    assert (drain.node, drain.code, drain.pods) == (small, codes.CONSOLIDATION, (moved,))
    assert f"fit on {idle}" in drain.reason
    assert {k.node: k.code for k in result.kept}[idle] == codes.RECEIVES_MOVED_PODS
    (shrink,) = result.shrinks
    assert shrink.drains == (small,)
    assert "receives-moved-pods on 1 node(s)" in shrink.reason


def test_a_pod_moved_onto_a_node_the_action_may_terminate_is_at_risk() -> None:
    """The plan above: the replica consolidation moves runs, when the action comes, on the idle node it
    moved onto, one of the three Auto Scaling may terminate undrained; the report named the pods those
    nodes ran when the plan was made, the two pinned ones, and not the replica that will be there."""
    _, _, moved, result = _moved_onto_the_idle_node()

    (shrink,) = result.shrinks
    assert shrink.at_risk == (moved, "default/pin0-0", "default/pin1-0")
    assert "with 3 pod(s) at risk on them" in shrink.reason, shrink.reason


def test_an_idle_node_another_groups_drain_ahead_moves_pods_onto_is_not_drained_ahead_of_its_own() -> None:
    """Two groups of two nodes, an action taking each to one: group a's movable replica is moved ahead of
    its action onto group b's idle node; b's own drain ahead took that node for idle and drained it."""
    world = World(regions=("us-east-1",))
    small, pinned_a = sorted(world.group("a", "m5.2xlarge", nodes=2))
    idle, pinned_b = sorted(world.group("b", "m5.2xlarge", nodes=2))
    moved = replica(world, small, "m0")
    world.idle_since(idle, 2)
    for name, node in (("pa", pinned_a), ("pb", pinned_b)):
        world.pods(name, 1, cpu="7", memory="1Gi", node_name=node, owner=("ReplicaSet", name),
                   annotations=PINNED)  # fmt: skip
    snapshot, groups, cfg, state = world.parsed()
    action = replace(EVENING, desired=1)
    result = plan(snapshot, [replace(g, scheduled=(action,)) for g in groups], cfg, state, NOW)

    (drain,) = result.drain
    assert (drain.node, drain.pods) == (small, (moved,)) and f"fit on {idle}" in drain.reason
    assert "receives-moved-pods on 1 node(s)" in result.shrinks[1].reason
