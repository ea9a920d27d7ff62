"""Too many unready nodes (spillway.planner.health): cluster-autoscaler's --ok-total-unready-count and
--max-total-unready-percentage. An unhealthy cluster drains nothing; an unhealthy group gets no new nodes."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from plan_world import NOW, World, pending_codes, pending_reasons, scale_up
from pydantic import ValidationError

from spillway.config import PlannerConfig
from spillway.local import objects as o
from spillway.planner import ScalingPlan, codes, plan


def _not_ready(w: World, node: str, minutes_ago: float = 60) -> None:
    """The node's kubelet stopped reporting ``minutes_ago``."""
    (condition,) = w.node(node)["status"]["conditions"]
    condition.update(
        status="Unknown",
        reason="NodeStatusUnknown",
        lastTransitionTime=(NOW - timedelta(minutes=minutes_ago)).isoformat().replace("+00:00", "Z"),
    )


def _kept(result: ScalingPlan) -> dict[str, tuple[str, str]]:
    return {k.node: (k.code, k.reason) for k in result.kept}


def _cluster(nodes: int, dead: int) -> tuple[World, list[str]]:
    """One group of ``nodes`` idle nodes (idle an hour), the first ``dead`` of them NotReady an hour."""
    w = World()
    names = w.group("cpu", "m5.2xlarge", nodes=nodes, max_size=nodes + 5)
    for name in names:
        w.idle_since(name, 60)
    for name in names[:dead]:
        _not_ready(w, name)
    return w, names


def test_unready_nodes_within_the_ok_count_leave_the_cluster_healthy() -> None:
    w, names = _cluster(4, 3)  # 75 % unready, but only 3: at ok_total_unready_count

    result = w.plan(max_scale_in_fraction=1.0)

    assert result.unhealthy == ()
    assert {d.node for d in result.drain} == set(names)  # the idle unready ones and the idle Ready one


def test_more_unready_than_both_thresholds_drains_nothing_and_says_why() -> None:
    w, _ = _cluster(8, 4)  # 4 > 3 and 4 > 45 % of 8

    result = w.plan(max_scale_in_fraction=1.0)

    assert result.drain == ()
    verdict, group = result.unhealthy  # the cluster's, then its one group's
    assert (verdict.group, verdict.unready, verdict.nodes) == (None, 4, 8)
    assert (group.group, group.unready, group.nodes) == ("cpu", 4, 8)
    assert (
        "ok_total_unready_count 3" in verdict.reason and "max_total_unready_percentage 45%" in verdict.reason
    )
    assert {code for code, _ in _kept(result).values()} == {codes.CLUSTER_UNHEALTHY}
    assert result.state.nodes == {}  # idle times start again: no burst of drains once it recovers
    assert result.to_dict()["unhealthy"][0]["unready"] == 4


def test_the_percentage_is_of_all_nodes_and_is_a_setting() -> None:
    w, _ = _cluster(9, 4)  # 4 of 9 is 44 %: not above 45 %

    assert w.plan(max_scale_in_fraction=1.0).unhealthy == ()
    assert w.plan(max_scale_in_fraction=1.0, max_total_unready_percentage=40).drain == ()
    assert w.plan(max_scale_in_fraction=1.0, ok_total_unready_count=5, max_total_unready_percentage=40).drain


def test_idle_times_start_again_once_the_cluster_recovers() -> None:
    w, names = _cluster(8, 4)
    held = w.plan(max_scale_in_fraction=1.0)
    w.state = held.state.to_wire()
    for name in names[:4]:
        (condition,) = w.node(name)["status"]["conditions"]
        condition.update(status="True", reason="KubeletReady")

    later = w.plan(NOW + timedelta(minutes=2), max_scale_in_fraction=1.0)

    assert later.unhealthy == () and later.drain == ()
    assert {code for code, _ in _kept(later).values()} == {codes.IDLE_BELOW_THRESHOLD}


def test_nodes_still_starting_and_nodes_being_drained_are_not_counted() -> None:
    w, names = _cluster(4, 0)
    for _ in range(4):  # registered five minutes ago, not Ready yet: starting, not unready
        iid = w.add_instance("cpu", register=False)
        w.node_for("cpu", iid, "m5.2xlarge", ready=False, created=NOW - timedelta(minutes=5))
    for name in names[:2]:  # Spillway drains these; their kubelets are gone
        _not_ready(w, name)
        w.cordon(name, by_spillway=True)

    assert w.plan().unhealthy == ()


def test_a_young_node_that_was_ready_counts_at_once() -> None:
    """Still starting means never Ready yet: a node Ready once and lost since is unready, however young."""
    w, _ = _cluster(4, 0)
    young = []
    for _ in range(4):
        iid = w.add_instance("cpu", register=False)
        young.append(w.node_for("cpu", iid, "m5.2xlarge", created=NOW - timedelta(minutes=5)))
    for name in young:
        _not_ready(w, name, minutes_ago=1)

    (cluster, group) = w.plan().unhealthy

    assert (cluster.unready, cluster.nodes, group.group) == (4, 8, "cpu")


def test_instances_that_never_joined_count_and_are_still_removed() -> None:
    w, _ = _cluster(2, 0)
    overdue = [w.add_instance("cpu", register=False) for _ in range(4)]
    w.state["joining"] = {iid: {"since": (NOW - timedelta(minutes=20)).isoformat()} for iid in overdue}

    result = w.plan(max_scale_in_fraction=1.0)

    assert [(u.group, u.unready, u.nodes) for u in result.unhealthy] == [(None, 4, 2), ("cpu", 4, 2)]
    assert sorted(u.instance_id for u in result.unregistered) == sorted(overdue)  # no pod can come back
    assert result.drain == ()  # the two idle Ready nodes stay


def test_an_unhealthy_cluster_moves_no_pod() -> None:
    w, names = _cluster(8, 4)
    for name in names[4:6]:  # two light nodes whose pods may move, and room elsewhere
        w.items.append(
            o.pod(
                f"light-{name}",
                cpu="500m",
                memory="1Gi",
                node_name=name,
                owner=("ReplicaSet", "web-1"),
                annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"},
            )
        )
    config = {"consolidation": "when-underutilized", "max_scale_in_fraction": 1.0}
    healthy = w.plan(ok_total_unready_count=10, **config)
    assert any(d.code == codes.CONSOLIDATION for d in healthy.drain)  # the rule would move them

    assert w.plan(**config).drain == ()


def test_an_unhealthy_group_gets_no_new_nodes_and_its_pods_go_elsewhere() -> None:
    w = World()
    east = w.group("east", "m5.2xlarge", nodes=4, max_size=10)
    west = w.group("west", "m5.2xlarge", region="us-west-2", nodes=6, max_size=10)
    for name in east:  # a network fault in us-east-1: 4 of 10 nodes, 40 % of the cluster
        _not_ready(w, name)
    for name in west:
        w.items.append(o.pod(f"resident-{name}", cpu="7", memory="8Gi", node_name=name))
    pods = w.pods("batch", 2, cpu="6", memory="8Gi")

    result = w.plan()

    assert [u.group for u in result.unhealthy] == ["east"]  # the cluster is healthy
    assert scale_up(result) == {"west": (6, 8, sorted(pods))}  # the primary region is skipped

    for name in west[:2]:  # now the cluster is unhealthy too (6 of 10): scale-up in west goes on
        _not_ready(w, name)
    worse = w.plan()
    assert [u.group for u in worse.unhealthy] == [None, "east"]
    assert scale_up(worse) == {"west": (6, 8, sorted(pods))}


def test_pods_only_an_unhealthy_group_can_run_wait_and_say_why() -> None:
    w = World()
    east = w.group("east", "m5.2xlarge", nodes=4, max_size=10)
    w.group("west", "m5.2xlarge", region="us-west-2", nodes=6, max_size=10)
    for name in east:
        _not_ready(w, name)
    (pod,) = w.pods(
        "pinned", 1, cpu="6", memory="8Gi", node_selector={"topology.kubernetes.io/region": "us-east-1"}
    )

    result = w.plan()

    assert result.scale_up == ()
    assert pending_codes(result)[pod] == codes.BACKED_OFF
    assert "group east is unhealthy: 4 of 4 node(s) unready" in pending_reasons(result)[pod]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("ok_total_unready_count", -1),
        ("max_total_unready_percentage", 101),
        ("max_total_unready_percentage", -1),
    ],
)
def test_the_thresholds_are_checked(field: str, value: float) -> None:
    with pytest.raises(ValidationError, match=field):
        PlannerConfig(**{field: value})


@pytest.mark.parametrize(("joined_minutes_ago", "unhealthy"), [(5, False), (60, True)])
def test_gpu_labelled_nodes_of_no_managed_group_whose_gpus_never_came_count_as_unready(
    joined_minutes_ago: float, unhealthy: bool
) -> None:
    """cluster-autoscaler takes a Ready node with its GPU label and no GPUs in allocatable as unready,
    of an autoscaled group or not, while they are missing (FilterOutNodesWithUnreadyResources); its
    cluster state counts the node as not started for --max-node-startup-time after its creation, then
    as unready in the cluster's total. Spillway's start rule reads a managed group's template: a node of
    no managed group is judged by the GPU label alone."""
    w, _ = _cluster(4, 0)
    for i in range(4):  # self-managed GPU nodes whose device plugin never registered their GPUs
        w.items.append(
            o.node(
                f"ip-10-0-9-{i}.ec2.internal",
                instance=f"i-0selfmanaged{i}",
                labels={"k8s.amazonaws.com/accelerator": "nvidia-a10g"},
                created=NOW - timedelta(minutes=joined_minutes_ago),
            )
        )

    result = w.plan(max_scale_in_fraction=1.0)

    if unhealthy:  # 4 of 8 nodes: above 3 and 45 %
        (verdict,) = result.unhealthy
        assert (verdict.group, verdict.unready, verdict.nodes) == (None, 4, 8)
        assert result.drain == ()
    else:  # still starting: not counted, and the idle nodes go
        assert result.unhealthy == ()
        assert len(result.drain) == 4


def test_nodes_of_warm_pool_instances_are_not_unready_nodes_of_the_cluster() -> None:
    """An instance launched into a warm pool runs its user data before it stops, and a bootstrap that
    does not check its lifecycle state registers a Node, which then stays NotReady while the instance
    sits stopped in the pool (kops had to keep kubelet from starting there: kubernetes/kops PR 11216,
    issue 16871). Such an instance is outside the group's capacity by design, not a sign of an outage:
    counted, a pool of four made the cluster "unhealthy" (alarmed) and no idle node was drained."""
    w, names = _cluster(4, 0)
    pooled = [o.instance_id(f"cpu-warm-{i}") for i in range(4)]
    for iid in pooled:  # their Nodes registered at warm-up; the group does not list the instances
        _not_ready(w, w.node_for("cpu", iid, "m5.2xlarge"), minutes_ago=600)
    snapshot, groups, cfg, state = w.parsed(max_scale_in_fraction=1.0)
    groups = [replace(g, pooled_instances=tuple(pooled)) for g in groups]

    result = plan(snapshot, groups, cfg, state, NOW)

    assert result.unhealthy == ()
    assert {d.node for d in result.drain} == set(names)


def test_the_nodes_of_stopped_warm_pool_instances_hold_no_room_under_the_cluster_totals() -> None:
    """A pooled instance stopped in its warm pool is no capacity: drawn into its group it becomes the
    node a raise adds, which the totals charge then. Charged as a node meanwhile too, its NotReady Node
    left the pods pending under max_nodes_total though the raise would draw that very instance."""
    w, _ = _cluster(2, 0)
    w.pods("web", 3, cpu="7")  # two fit on the idle nodes, the third needs a new one
    pooled = [o.instance_id("cpu-warm-0")]
    _not_ready(w, w.node_for("cpu", pooled[0], "m5.2xlarge"), minutes_ago=600)
    snapshot, groups, cfg, state = w.parsed(max_nodes_total=3)
    groups = [replace(g, pooled_instances=tuple(pooled), warm_instances=1) for g in groups]

    result = plan(snapshot, groups, cfg, state, NOW)

    assert [(s.group, s.from_size, s.to_size) for s in result.scale_up] == [("cpu", 2, 3)]


def test_the_ready_node_of_an_instance_stopping_in_its_warm_pool_holds_no_room_under_the_totals() -> None:
    """An instance a scale-in returned to its Stopped pool, its Node still Ready (node-monitor-grace-period
    has not passed): no capacity, as once it is NotReady. Charged as a node, it left the pod that needs
    a third node pending under max_nodes_total, though the raise would draw that very instance."""
    w, _ = _cluster(2, 0)
    w.pods("web", 3, cpu="7")
    iid = o.instance_id("cpu-warm-0")
    w.node_for("cpu", iid, "m5.2xlarge")  # Ready, idle
    snapshot, groups, cfg, state = w.parsed(max_nodes_total=3)
    groups = [
        replace(
            g,
            pooled_instances=(iid,),
            pooled_states=((iid, "Warmed:Stopped"),),
            warm_pool_state="Stopped",
            warm_instances=1,
            reuse_on_scale_in=True,
        )
        for g in groups
    ]

    result = plan(snapshot, groups, cfg, state, NOW)

    assert [(s.group, s.from_size, s.to_size) for s in result.scale_up] == [("cpu", 2, 3)]


def _drawn_world(pooled: bool) -> tuple[World, str, str]:
    """Two busy nodes, a pending pod that needs a third, and a warm-pool instance whose Node registered
    at warm-up ten hours ago and has been NotReady since it stopped: in the pool (``pooled``), or drawn
    into the group by the raise for the pod (Pending, desired 3)."""
    w = World()
    names = w.group("cpu", "m5.2xlarge", nodes=2, max_size=10)
    for i, name in enumerate(names):
        w.pods(f"busy{i}", 1, cpu="7", node_name=name)
    (web,) = w.pods("web", 1, cpu="7")
    iid = o.instance_id("cpu-warm-0")
    node = w.node_for("cpu", iid, "m5.2xlarge", created=NOW - timedelta(minutes=600))
    _not_ready(w, node, minutes_ago=590)
    if not pooled:
        group = w.groups["cpu"]
        group["Instances"].append({**group["Instances"][0], "InstanceId": iid, "LifecycleState": "Pending"})
        group["DesiredCapacity"] += 1
    return w, iid, web


def _plan_of_the_draw() -> ScalingPlan:
    """The plan that raises the group for the pod while its warm pool holds the instance, which the
    raise draws."""
    w, iid, _ = _drawn_world(pooled=True)
    snapshot, groups, cfg, state = w.parsed()
    groups = [replace(g, pooled_instances=(iid,), warm_instances=1) for g in groups]
    return plan(snapshot, groups, cfg, state, NOW)


def _plan_after_the_draw(w: World, first: ScalingPlan) -> ScalingPlan:
    """The next plan, a minute after the draw's, on ``w`` (the drawn instance in its group) with the
    state the draw's plan left."""
    w.state = first.state.to_wire()
    snapshot, groups, cfg, state = w.parsed()
    return plan(snapshot, groups, cfg, state, NOW + timedelta(minutes=1))


def test_an_instance_drawn_from_the_warm_pool_is_capacity_launching_though_its_node_is_old() -> None:
    """The first plan raises the group for the pod, which draws the warm instance; the next sees it in
    the group, starting, with the NotReady Node it registered at warm-up. Judged by that Node's age it
    was no longer capacity coming (registered more than max_node_startup_minutes ago), and the plan
    launched a fourth node for the pod the drawn instance was raised for."""
    first = _plan_of_the_draw()
    assert [(s.group, s.from_size, s.to_size) for s in first.scale_up] == [("cpu", 2, 3)]

    w, _, web = _drawn_world(pooled=False)
    second = _plan_after_the_draw(w, first)

    assert second.scale_up == ()
    assert pending_codes(second)[web] == codes.FITS_LAUNCHING
    assert second.unhealthy == ()
    snapshot, groups, cfg, _ = w.parsed()
    later = NOW + timedelta(minutes=1 + cfg.max_node_startup_minutes)
    still = plan(snapshot, groups, cfg, second.state, later)
    assert [(s.group, s.from_size, s.to_size) for s in still.scale_up] == [("cpu", 3, 4)]  # never came


def test_a_drawn_instance_ready_with_its_unreachable_taint_still_on_is_starting() -> None:
    """The node lifecycle controller taints a Node node.kubernetes.io/unreachable (NoSchedule and
    NoExecute) when its kubelet stops reporting, as it does when a warm instance stops, and lifts the
    taint a moment after the kubelet reports Ready again. A plan whose snapshot caught the drawn
    instance's Node Ready with the taint still on judged it by its creation at warm-up: neither
    starting nor launching, but an ordinary node the pod does not tolerate, and launched a fourth node
    for the pod the draw was for."""
    first = _plan_of_the_draw()

    w, iid, web = _drawn_world(pooled=False)
    node = next(i for i in w.items if i["kind"] == "Node" and i["spec"]["providerID"].endswith(iid))
    (condition,) = node["status"]["conditions"]
    condition.update(status="True", reason="KubeletReady", lastTransitionTime="2026-11-02T12:00:50Z")
    node["spec"]["taints"] = [
        {"key": "node.kubernetes.io/unreachable", "effect": effect} for effect in ("NoSchedule", "NoExecute")
    ]
    second = _plan_after_the_draw(w, first)

    assert second.scale_up == ()
    assert pending_codes(second)[web] == codes.FITS_LAUNCHING
    # the next plan still knows the draw while the taint is on
    assert iid in second.state.joining
