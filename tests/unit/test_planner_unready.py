"""NotReady nodes and scale-down: cluster-autoscaler's --scale-down-unready-time (scale_down_unready_minutes)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from plan_world import NOW, World

from spillway.act.planning import drain_item
from spillway.local import objects as o
from spillway.model.cluster import NodeInfo, PodInfo
from spillway.model.k8s import Node, Pod
from spillway.planner import ScalingPlan, codes
from spillway.planner.disruption import NEVER_STARTED as NEVER_STARTED_WHY
from spillway.planner.disruption import dead as dead_node


def _kept(result: ScalingPlan) -> dict[str, tuple[str, str]]:
    return {k.node: (k.code, k.reason) for k in result.kept}


def _not_ready(w: World, node: str, minutes_ago: float, status: str = "False") -> None:
    """The node's Ready condition turned False ``minutes_ago`` (the kubelet reports it not ready), or
    ``Unknown`` (the node controller's: the kubelet stopped reporting)."""
    item = w.node(node)
    (condition,) = item["status"]["conditions"]
    condition.update(
        status=status,
        reason="KubeletNotReady" if status == "False" else "NodeStatusUnknown",
        lastTransitionTime=(NOW - timedelta(minutes=minutes_ago)).isoformat().replace("+00:00", "Z"),
    )


def _world() -> tuple[World, str, str]:
    w = World()
    dead, spare = w.group("cpu", "m5.2xlarge", nodes=2, max_size=5)
    return w, dead, spare


def test_a_not_ready_node_waits_the_unready_time_idle_however_long_it_has_been_not_ready() -> None:
    """The unready time runs from when the node became idle (cluster-autoscaler's unneeded-since), not
    from its Ready condition's change: NotReady for a minute, idle for 19, it is kept by its timer."""
    w, dead, _ = _world()
    _not_ready(w, dead, 1)
    w.idle_since(dead, 19)

    result = w.plan()

    code, reason = _kept(result)[dead]
    assert code == codes.IDLE_BELOW_THRESHOLD
    assert reason == "idle for 19m of the 20m needed (not Ready: scale_down_unready_minutes)"
    assert result.drain == ()
    w.idle_since(dead, 20)
    assert [d.node for d in w.plan().drain] == [dead]


def test_an_idle_node_not_ready_past_the_unready_time_is_drained_first() -> None:
    w, dead, spare = _world()
    _not_ready(w, dead, 20)
    w.idle_since(dead, 60)
    w.idle_since(spare, 60)

    result = w.plan(max_scale_in_fraction=0.5)  # one node of the two this plan

    assert [d.node for d in result.drain] == [dead]  # of two idle nodes, the NotReady one goes
    assert _kept(result)[spare][0] == codes.SCALE_IN_CAP


def test_its_idle_timer_starts_when_it_is_judged() -> None:
    w, dead, _ = _world()
    _not_ready(w, dead, 25)

    first = w.plan()
    assert first.drain == () and _kept(first)[dead][0] == codes.IDLE_BELOW_THRESHOLD
    w.state = first.state.to_wire()

    assert _kept(w.plan(NOW + timedelta(minutes=19)))[dead][0] == codes.IDLE_BELOW_THRESHOLD
    assert [d.node for d in w.plan(NOW + timedelta(minutes=20)).drain] == [dead]


def test_a_not_ready_node_with_workload_pods_stays_and_is_not_consolidated() -> None:
    w, dead, _ = _world()
    _not_ready(w, dead, 120)
    w.items.append(o.pod("job-0", cpu="1", memory="1Gi", node_name=dead, owner=("Job", "job")))

    result = w.plan(consolidation="when-underutilized")

    code, reason = _kept(result)[dead]
    assert code == codes.NOT_READY and "runs 1 workload pod(s)" in reason  # no kubelet to evict it
    assert result.drain == ()


def test_a_node_that_never_became_ready_counts_from_its_creation() -> None:
    w = World()
    w.group("cpu", "m5.2xlarge", nodes=1, max_size=5)
    iid = w.add_instance("cpu", register=False)
    node = w.node_for("cpu", iid, "m5.2xlarge", ready=False, created=NOW - timedelta(minutes=45))
    del w.node(node)["status"]["conditions"][0]["lastTransitionTime"]
    w.idle_since(node, 30)

    result = w.plan()

    assert [d.node for d in result.drain] == [node]


def test_the_unready_time_is_a_setting() -> None:
    w, dead, _ = _world()
    _not_ready(w, dead, 30)
    w.idle_since(dead, 45)

    assert _kept(w.plan(scale_down_unready_minutes=60))[dead][0] == codes.IDLE_BELOW_THRESHOLD
    assert [d.node for d in w.plan(scale_down_unready_minutes=30).drain] == [dead]


def test_a_not_ready_nodes_transition_time_survives_the_snapshot() -> None:
    item = o.node("ip-10-0-0-1.ec2.internal", instance="i-0123456789abcdef0", ready=False, created=NOW)
    info = NodeInfo.from_node(Node.model_validate(item))

    assert info.ready_changed_at == NOW
    assert NodeInfo.from_dict(info.to_dict()) == info
    ready = NodeInfo.from_node(Node.model_validate({**item, "status": {**item["status"], "conditions": []}}))
    assert ready.ready_changed_at is None


def test_a_dead_node_whose_only_workload_is_stuck_terminating_is_drained() -> None:
    """The node controller evicted the pod when the kubelet went away; with no kubelet to finish it, the
    pod stays Terminating: cluster-autoscaler's long-terminating pods, which hold nothing up."""
    w, dead, _ = _world()
    _not_ready(w, dead, 30)
    pod = o.pod("job-0", cpu="1", memory="1Gi", node_name=dead, owner=("Job", "job"))
    pod["metadata"]["deletionTimestamp"] = (NOW - timedelta(minutes=25)).isoformat().replace("+00:00", "Z")
    w.items.append(pod)
    w.idle_since(dead, 20)

    assert [d.node for d in w.plan().drain] == [dead]
    pod["metadata"]["deletionTimestamp"] = (NOW - timedelta(seconds=30)).isoformat().replace("+00:00", "Z")
    assert _kept(w.plan())[dead][0] == codes.NOT_READY  # still within its grace period: waited for


# --- disruption budgets count the nodes out of service, as Karpenter's ----------------------------


def test_a_not_ready_node_uses_a_budget_of_one_but_may_itself_be_removed() -> None:
    """Karpenter's allowed disruptions are the budget less the nodes NotReady or being deleted: with one
    node dead, a budget of one drains no healthy idle node. The dead node's own removal adds no node out
    of service, so it goes (once past the unready time), and only it. (Found by review.)"""
    w = World()
    dead, busy, idle = w.group("cpu", "m5.2xlarge", nodes=3, max_size=5)
    w.items.append(o.pod("job-0", cpu="1", memory="1Gi", node_name=busy, owner=("Job", "job")))
    w.items.append(o.pod("job-1", cpu="1", memory="1Gi", node_name=dead, owner=("Job", "job")))
    _not_ready(w, dead, 5)
    w.idle_since(idle, 60)
    budget = {"max_scale_in_fraction": 1.0, "disruption_budgets": [{"nodes": 1}]}

    held = w.plan(**budget)
    unbudgeted = w.plan(max_scale_in_fraction=1.0)
    w.items.pop()  # the dead node's pod is gone, and it has been NotReady for long
    _not_ready(w, dead, 60)
    w.idle_since(dead, 60)
    removed = w.plan(**budget)

    assert held.drain == ()
    code, reason = _kept(held)[idle]
    assert code == codes.DISRUPTION_BUDGET and "1 NotReady or being deleted" in reason
    assert [d.node for d in unbudgeted.drain] == [idle]
    assert [d.node for d in removed.drain] == [dead]  # first: NotReady; then the budget is used
    assert _kept(removed)[idle][0] == codes.DISRUPTION_BUDGET


def test_two_dead_nodes_both_go_under_a_budget_of_one_and_no_healthy_one_with_them() -> None:
    """Two idle nodes of a group dead past the unready time, under a budget of one (what Karpenter's
    default 10 % gives a group of up to ten). Each is out of service already, so removing it adds no
    disruption: each goes, and the idle healthy node stays. Karpenter removes a node NotReady past its
    toleration by node repair, which deletes its NodeClaim without asking the budgets (only the 20 %
    unhealthy breaker, which "Too many unready nodes" is here): kubernetes-sigs/karpenter
    pkg/controllers/node/health/controller.go. Before, each was refused for the other one being out
    ("1 NotReady or being deleted"), plan after plan: both kept for good, paid for."""
    w = World()
    dead, other, busy, idle = w.group("cpu", "m5.2xlarge", nodes=4, max_size=5)
    w.items.append(o.pod("job-0", cpu="1", memory="1Gi", node_name=busy, owner=("Job", "job")))
    for node in (dead, other):
        _not_ready(w, node, 60)
        w.idle_since(node, 60)
    w.idle_since(idle, 60)

    result = w.plan(max_scale_in_fraction=1.0, disruption_budgets=[{"nodes": 1}])

    assert sorted(d.node for d in result.drain) == sorted([dead, other])
    assert _kept(result)[idle][0] == codes.DISRUPTION_BUDGET


def test_a_freeze_still_keeps_an_idle_node_that_went_not_ready_a_minute_ago() -> None:
    """A budget of 0 (a freeze: pre-warmed idle nodes kept for an event) holds an idle node whose
    kubelet stopped reporting a minute ago (a kubelet restart, a network blip): it may come back Ready,
    and it is not dead yet. Karpenter counts it as disrupting in its budgets and deletes it outside them
    only once NotReady past its repair toleration (kubernetes-sigs/karpenter
    pkg/controllers/node/health/controller.go Reconcile: the condition's lastTransitionTime plus the
    toleration, 30 minutes by default). Before, any NotReady node's idle drain passed every budget:
    the freeze removed a node idle for an hour as soon as it missed one heartbeat. Past
    scale_down_unready_minutes NotReady it is dead and goes."""
    w = World()
    flapped, busy = w.group("cpu", "m5.2xlarge", nodes=2, max_size=5)
    w.items.append(o.pod("job-0", cpu="1", memory="1Gi", node_name=busy, owner=("Job", "job")))
    w.idle_since(flapped, 60)
    _not_ready(w, flapped, 1, status="Unknown")
    freeze = {"max_scale_in_fraction": 1.0, "disruption_budgets": [{"nodes": 0}]}

    held = w.plan(**freeze)
    _not_ready(w, flapped, 20, status="Unknown")
    dead = w.plan(**freeze)

    assert held.drain == ()
    assert _kept(held)[flapped][0] == codes.DISRUPTION_BUDGET
    assert [d.node for d in dead.drain] == [flapped]


def test_a_node_somebody_deletes_uses_the_budget() -> None:
    """``kubectl delete node`` (or another controller) sets the Node's deletionTimestamp: a node out."""
    w = World()
    going, busy, idle = w.group("cpu", "m5.2xlarge", nodes=3, max_size=5)
    for node in (going, busy):
        w.items.append(o.pod(f"job-{node}", cpu="1", memory="1Gi", node_name=node, owner=("Job", "job")))
    w.node(going)["metadata"]["deletionTimestamp"] = (NOW - timedelta(minutes=2)).isoformat()
    w.idle_since(idle, 60)

    result = w.plan(max_scale_in_fraction=1.0, disruption_budgets=[{"nodes": 1}])

    assert result.drain == () and _kept(result)[idle][0] == codes.DISRUPTION_BUDGET
    assert NodeInfo.from_dict(NodeInfo.from_node(Node.model_validate(w.node(going))).to_dict()).deleting


def test_a_dead_node_removed_is_not_counted_twice_against_the_budget() -> None:
    """A budget of two: the dead empty node and a healthy idle one both go. The dead node's drain
    counted once as this plan's and once more as out of service, so the idle one was kept. (Found by
    review.)"""
    w = World()
    dead, busy, idle = w.group("cpu", "m5.2xlarge", nodes=3, max_size=5)
    w.items.append(o.pod("job-0", cpu="1", memory="1Gi", node_name=busy, owner=("Job", "job")))
    _not_ready(w, dead, 60)
    w.idle_since(dead, 60)
    w.idle_since(idle, 60)

    result = w.plan(max_scale_in_fraction=1.0, disruption_budgets=[{"nodes": 2}])

    assert sorted(d.node for d in result.drain) == sorted([dead, idle])


def _ten_idle_and(starting: str) -> tuple[World, list[str], str]:
    """Ten idle Ready nodes, and one more that joined a minute ago and is not initialized yet:
    ``registering`` (NotReady, never Ready) or ``tainted`` (Ready, a startup taint still on)."""
    w = World()
    nodes = w.group("cpu", "m5.2xlarge", nodes=10, max_size=20)
    for node in nodes:
        w.idle_since(node, 60)
    new = w.add_instance("cpu", register=True, ready=starting != "registering")
    if starting == "tainted":
        taint = {"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoSchedule"}
        w.node(new)["spec"]["taints"] = [taint]
    return w, nodes, new


@pytest.mark.parametrize("starting", ["registering", "tainted"])
def test_a_node_not_initialized_yet_is_not_in_the_base_of_a_percentage_budget(starting: str) -> None:
    """Karpenter takes a budget's percentage of the NodePool's initialized nodes only: a node launched
    or registered and not initialized yet is left out, so that a replacement still starting does not
    round the budget up (kubernetes-sigs/karpenter pkg/controllers/disruption/helpers.go,
    BuildDisruptionBudgetMapping: ``!node.Initialized()`` is skipped before ``numNodes`` counts it).
    10% of the ten nodes in service allows one drain; with the starting node counted, 10% of eleven
    rounded up allowed two."""
    w, nodes, new = _ten_idle_and(starting)

    result = w.plan(
        max_scale_in_fraction=1.0,
        startup_taints=["node.cilium.io/agent-not-ready"],
        disruption_budgets=[{"nodes": "10%"}],
    )

    assert len(result.drain) == 1 and result.drain[0].node in nodes
    held = [reason for code, reason in _kept(result).values() if code == codes.DISRUPTION_BUDGET]
    assert len(held) == 9 and all("allows 1 of group cpu's 10 node(s)" in reason for reason in held)
    assert _kept(result)[new][0] != codes.DISRUPTION_BUDGET


# --- pods that never started on a node long NotReady ------------------------------------------------

EVERYTHING = [{"operator": "Exists"}]  # a GPU training spec's tolerations: the not-ready taint too


def _never_started(w: World, node: str, name: str = "train-0", **kw: object) -> dict[str, object]:
    """A pod kube-scheduler bound to ``node`` that its kubelet never ran: Pending, its container only
    waiting. It has a startTime: the kubelet writes one before it finds the network not ready."""
    pod = o.pod(name, "team-a", node_name=node, phase="Pending", tolerations=EVERYTHING, **kw)  # type: ignore[arg-type]
    pod["status"]["containerStatuses"] = [
        {
            "name": "main",
            "ready": False,
            "restartCount": 0,
            "state": {"waiting": {"reason": "ContainerCreating"}},
        }
    ]
    w.items.append(pod)
    return pod


def test_a_node_not_ready_past_the_unready_time_whose_pods_never_started_is_drained() -> None:
    """Kept for its pod, the instance would be paid for forever and the pod never run: removing the
    Node is what frees it (the pod garbage collector deletes it with the Node, its Job makes another)."""
    w, dead, _ = _world()
    _not_ready(w, dead, 25)
    _never_started(w, dead)
    w.idle_since(dead, 30)

    result = w.plan()

    (drain,) = result.drain
    assert drain.node == dead and drain.code == codes.NEVER_STARTED
    assert "not Ready for 25m" in drain.reason and "its pods never started: team-a/train-0" in drain.reason
    assert drain.unready_minutes == 20


def test_the_drain_reason_promises_no_controller_to_a_bare_pod_that_never_started() -> None:
    """A bare pod has none: the pod garbage collector deletes it with the Node, and nothing makes it
    again; the reason and the pod's verdict say so, not that a controller recreates it."""
    w, dead, _ = _world()
    _not_ready(w, dead, 25)
    _never_started(w, dead, "bare-0", owner=None)
    w.idle_since(dead, 30)

    (drain,) = w.plan().drain

    assert "controllers recreate them elsewhere" not in drain.reason
    assert "the pod garbage collector deletes them with the Node" in drain.reason
    assert "their controllers, if any, recreate them" in drain.reason
    assert "its controller, if any, recreates it" in NEVER_STARTED_WHY


def test_a_dead_node_with_expendable_pods_too_is_drained_for_its_pods_that_never_started() -> None:
    """What made it removable is its pods that never started (its expendable pods keep no node): the
    code says so, and its drain still evicts the expendable pods it names, as an expendable-pods one."""
    w, dead, _ = _world()
    _not_ready(w, dead, 25)
    _never_started(w, dead)
    w.items.append(
        o.pod("low-0", "team-a", node_name=dead, phase="Running", priority=-100, owner=("ReplicaSet", "rs"))
    )
    w.idle_since(dead, 30)

    (drain,) = w.plan().drain

    assert drain.code == codes.NEVER_STARTED and drain.pods == ("team-a/low-0",)
    assert "its pods never started: team-a/train-0" in drain.reason and "1 expendable pod(s)" in drain.reason
    item = drain_item(drain, {})
    assert (
        item["consolidation"] is True and item["pods"] == ["team-a/low-0"] and item["unready_minutes"] == 20
    )


def test_its_idle_timer_starts_once_its_pods_count_as_never_started() -> None:
    w, dead, _ = _world()
    _not_ready(w, dead, 25)
    _never_started(w, dead)

    assert _kept(w.plan())[dead][0] == codes.IDLE_BELOW_THRESHOLD  # judged like an idle unready node


def test_a_pod_that_never_started_on_a_node_not_ready_for_a_moment_keeps_it() -> None:
    """A Ready node that goes NotReady for a moment while a freshly bound pod pulls its image must not
    lose it: that pod is Pending too."""
    w, dead, _ = _world()
    _not_ready(w, dead, 5)
    _never_started(w, dead)
    w.idle_since(dead, 60)

    result = w.plan()

    assert _kept(result)[dead][0] == codes.NOT_READY and result.drain == ()


@pytest.mark.parametrize(
    "started",
    [
        {"phase": "Running"},
        # Pending while its init container runs: it started
        {"initContainerStatuses": [{"name": "fetch", "restartCount": 0, "state": {"running": {}}}]},
        {
            "containerStatuses": [
                {"name": "main", "restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
            ]
        },
    ],
)
def test_a_pod_that_started_keeps_a_node_not_ready_past_the_unready_time(started: dict[str, object]) -> None:
    w, dead, _ = _world()
    _not_ready(w, dead, 25)
    pod = _never_started(w, dead)
    pod["status"].update(started)  # type: ignore[attr-defined]
    w.idle_since(dead, 60)

    result = w.plan()

    code, reason = _kept(result)[dead]
    assert code == codes.NOT_READY and "runs 1 workload pod(s)" in reason and result.drain == ()


def test_a_host_network_pod_that_has_not_started_keeps_a_node_not_ready_for_its_network() -> None:
    """The kubelet starts a pod on the host network while the network plugin is not ready (SyncPod: "If
    the network plugin is not ready, only start the pod if it uses the host network"): Pending on a
    node NotReady for its CNI, it is pulling its image, about to run, not stuck."""
    w, dead, _ = _world()
    _not_ready(w, dead, 35)
    pod = _never_started(w, dead, "nccl-0")
    pod["spec"]["hostNetwork"] = True  # type: ignore[index]
    w.idle_since(dead, 60)

    result = w.plan()

    assert _kept(result)[dead][0] == codes.NOT_READY and result.drain == ()


def test_a_pod_that_never_started_keeps_a_node_whose_kubelet_went_silent() -> None:
    """Ready ``Unknown`` (NodeStatusUnknown): the kubelet stopped reporting, so the pod statuses are the
    last it sent; partitioned, it may have started the pod since. Only a kubelet that reports its node
    not ready (Ready ``False``) vouches for what its pods are."""
    w, dead, _ = _world()
    _not_ready(w, dead, 25, status="Unknown")
    _never_started(w, dead)
    w.idle_since(dead, 60)

    result = w.plan()

    code, reason = _kept(result)[dead]
    assert code == codes.NOT_READY and "runs 1 workload pod(s)" in reason and result.drain == ()


def test_whether_the_kubelet_reports_its_node_not_ready_survives_the_snapshot() -> None:
    """Stored only when true; a snapshot written before it reads as not reported: the never-started
    rule does not apply to its nodes."""
    w, dead, _ = _world()
    _not_ready(w, dead, 25)
    info = NodeInfo.from_node(Node.model_validate(w.node(dead)))
    assert info.kubelet_not_ready and NodeInfo.from_dict(info.to_dict()) == info
    written_before = NodeInfo.from_dict({k: v for k, v in info.to_dict().items() if k != "knr"})
    assert not written_before.kubelet_not_ready and not dead_node(written_before, NOW, timedelta(minutes=20))
    _not_ready(w, dead, 25, status="Unknown")
    assert not NodeInfo.from_node(Node.model_validate(w.node(dead))).kubelet_not_ready


def test_a_ready_node_with_a_pod_that_has_not_started_yet_is_busy() -> None:
    w, node, _ = _world()
    _never_started(w, node)
    w.idle_since(node, 60)

    assert _kept(w.plan())[node][0] == codes.WORKLOAD


def test_whether_a_pod_never_started_survives_the_snapshot_and_an_older_one_reads_as_started() -> None:
    _, dead, _ = _world()
    pod = o.pod("train-0", node_name=dead, phase="Pending")
    info = PodInfo.from_pod(Pod.model_validate(pod))
    assert info.unstarted and PodInfo.from_dict(info.to_dict()) == info
    written_before = {k: v for k, v in info.to_dict().items() if k != "nst"}
    assert not PodInfo.from_dict(written_before).unstarted  # judged as it was then: work


def test_a_node_still_registering_is_not_drained_while_the_plan_counts_it_as_launching() -> None:
    """Scenario: a GPU group whose nodes take long to start (``max_node_startup_minutes`` 45); a node
    registered 35 minutes ago has never been Ready (its Ready condition set at registration), and a
    pending pod fits the group. The plan counts the node as capacity launching (``fits-launching``:
    the pod waits for it, nothing new is launched) and, being past ``scale_down_unready_minutes`` (20)
    and idle for 12 minutes, drains it in the same plan: the pod then waits on capacity the plan itself
    terminates.

    Rule: a registered node not Ready yet is launching while it is younger than
    ``max_node_startup_minutes`` (spillway.planner.joins and startup docstrings; cluster-autoscaler's
    ``--max-node-startup-time``: such a node is "not started", upcoming capacity, not unready), and the
    health count and the disruption budgets leave it out as still registering
    (:func:`spillway.planner.health.registering`). Scale-down keeps it until that window ends, as it keeps
    a Ready node still starting (``starting``)."""
    w = World(regions=("us-east-1",))
    (busy,) = w.group("gpu", "g5.xlarge", nodes=1, max_size=20, gpu_taint=True)
    w.gpu_pods("run", 1, 1, node_name=busy, cpu="2", memory="8Gi")
    iid = w.add_instance("gpu", register=False)
    late = w.node_for(
        "gpu", iid, "g5.xlarge", gpu_taint=True, ready=False, created=NOW - timedelta(minutes=35)
    )
    w.idle_since(late, 12)
    (pod,) = w.gpu_pods("want", 1, 1, cpu="2", memory="8Gi")

    result = w.plan(max_node_startup_minutes=45, max_scale_in_fraction=1.0)

    assert {p.pod: p.code for p in result.pending} == {pod: codes.FITS_LAUNCHING}
    assert result.drain == ()
    assert _kept(result)[late][0] == codes.NOT_READY


def _timeline(w: World, node: str, at: dict[float, str | None]) -> dict[float, ScalingPlan]:
    """Plan at each minute of ``at`` (after NOW), the state carried; before each plan set the node's
    Ready condition as ``at`` says: None Ready (since NOW), else not Ready ("False") since that many
    minutes after NOW (``"False@2"``)."""
    plans = {}
    for minute, ready in sorted(at.items()):
        (condition,) = w.node(node)["status"]["conditions"]
        if ready is None:
            condition.update(status="True", reason="KubeletReady", lastTransitionTime=o.iso(NOW))
        else:
            status, since = ready.split("@")
            condition.update(
                status=status,
                reason="KubeletNotReady",
                lastTransitionTime=o.iso(NOW + timedelta(minutes=float(since))),
            )
        plans[minute] = result = w.plan(NOW + timedelta(minutes=minute))
        w.state = result.state.to_wire()
    return plans


def _busy_spare(w: World, spare: str) -> None:
    w.items.append(o.pod("web-0", cpu="1", memory="1Gi", node_name=spare, owner=("ReplicaSet", "web")))


def test_an_idle_node_whose_kubelet_stops_goes_once_idle_for_the_unready_time() -> None:
    """cluster-autoscaler keeps the time a node became unneeded while it stays so (core/scaledown/unneeded
    Nodes.Update) and removes a node that is not Ready once that time is ScaleDownUnreadyTime old, in
    place of ScaleDownUnneededTime (unremovableReason): how long it has been NotReady does not count,
    nor does the unneeded time come on top. An idle node whose kubelet stops 2 minutes into its idle
    time goes 20 minutes after it became idle. Before, the NotReady node was kept not-ready (in use,
    its idle timer dropped) for 20 minutes after its Ready condition changed, then idle for 10 more:
    drained 30 minutes after its kubelet stopped."""
    w, dead, spare = _world()
    _busy_spare(w, spare)

    plans = _timeline(w, dead, {0: None, 2: "False@2", 10: "False@2", 19: "False@2", 20: "False@2"})

    assert _kept(plans[0])[dead][0] == codes.IDLE_BELOW_THRESHOLD
    for minute in (2, 10, 19):
        assert plans[minute].drain == (), minute
        code, reason = _kept(plans[minute])[dead]
        assert code == codes.IDLE_BELOW_THRESHOLD and f"idle for {minute}m of the 20m needed" in reason
        assert "scale_down_unready_minutes" in reason
    (drain,) = plans[20].drain
    assert drain.node == dead and drain.unready_minutes == 20 and "threshold 20m" in drain.reason


def test_a_node_not_ready_for_a_while_and_ready_again_goes_on_its_idle_time_counted_throughout() -> None:
    """cluster-autoscaler judges readiness as it is now: a node unneeded throughout, NotReady for part of
    it and Ready again, goes once unneeded for ScaleDownUnneededTime from when it became unneeded.
    Before, the minutes NotReady dropped its idle timer: drained 10 minutes after it was Ready again."""
    w, dead, spare = _world()
    _busy_spare(w, spare)

    plans = _timeline(w, dead, {0: None, 3: "False@3", 6: "False@3", 8: None, 10: None})

    for minute in (3, 6, 8):
        assert plans[minute].drain == () and _kept(plans[minute])[dead][0] == codes.IDLE_BELOW_THRESHOLD
    (drain,) = plans[10].drain
    assert drain.node == dead and drain.unready_minutes is None


def test_a_node_that_never_becomes_ready_goes_the_unready_time_after_its_start_window() -> None:
    """cluster-autoscaler takes a node not Ready and younger than --max-node-startup-time as not started
    (clusterstate updateReadinessStats: NotStarted), upcoming capacity it leaves out of scale-down
    (static_autoscaler: registered upcoming nodes subtracted from the candidates); past it, unready and
    unneeded from then on, removed --scale-down-unready-time later: 15 + 20 = 35 minutes after it
    registered. Before, 30 (kept 20 minutes from its creation, then idle 10)."""
    w = World()
    (spare,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=5)
    _busy_spare(w, spare)
    iid = w.add_instance("cpu", register=False)
    node = w.node_for("cpu", iid, "m5.2xlarge", ready=False, created=NOW)

    plans = _timeline(w, node, dict.fromkeys((14, 15, 20, 30, 34, 35), "False@0"))

    assert _kept(plans[14])[node][0] == codes.NOT_READY  # still registering
    for minute in (15, 20, 30, 34):
        assert plans[minute].drain == (), minute
        assert _kept(plans[minute])[node][0] == codes.IDLE_BELOW_THRESHOLD, minute
    assert [d.node for d in plans[35].drain] == [node]


def _never_ready_with_a_pod_that_never_started() -> tuple[World, str]:
    """A CPU group whose one busy node stays, and a second Node, registered now, that never becomes
    Ready, with a pod bound to it that never started."""
    w = World()
    (spare,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=5)
    _busy_spare(w, spare)
    iid = w.add_instance("cpu", register=False)
    node = w.node_for("cpu", iid, "m5.2xlarge", ready=False, created=NOW)
    _never_started(w, node)
    return w, node


def test_a_node_that_never_becomes_ready_with_a_pod_that_never_started_goes_at_the_same_time() -> None:
    """Its pod (one tolerating everything, bound to the Node that never became Ready) is work only until
    the Node has been NotReady for scale_down_unready_minutes (a kubelet that missed a heartbeat while
    the pod pulls its image), but cluster-autoscaler counts the node unneeded from the end of its start
    window all the same (the pod may move): drained 35 minutes after it registered, as without the pod.
    Before, 30; counted only once the pod stopped being work, it would be 40."""
    w, node = _never_ready_with_a_pod_that_never_started()

    plans = _timeline(w, node, dict.fromkeys((15, 19, 20, 30, 34, 35), "False@0"))

    for minute in (15, 19):
        assert plans[minute].drain == () and _kept(plans[minute])[node][0] == codes.NOT_READY, minute
    for minute in (20, 30, 34):
        assert plans[minute].drain == (), minute
        assert _kept(plans[minute])[node][0] == codes.IDLE_BELOW_THRESHOLD, minute
    (drain,) = plans[35].drain
    assert drain.node == node and drain.code == codes.NEVER_STARTED


def test_a_pod_that_never_started_starts_no_idle_timer_on_a_node_still_registering() -> None:
    """While a Node that never became Ready is inside its start window it is capacity launching, which
    cluster-autoscaler leaves out of scale-down (clusterstate NotStarted), pod or no pod: its idle timer
    starts at the end of the window, so with plans every few minutes from its registration it still goes
    35 minutes after it registered, as without the pod. Before, the pod bound to it started the idle
    timer at the first plan, and the node went 20 minutes after it registered."""
    w, node = _never_ready_with_a_pod_that_never_started()

    plans = _timeline(w, node, dict.fromkeys((1, 5, 10, 14, 15, 20, 25, 30, 34, 35), "False@0"))

    for minute in (1, 5, 10, 14):
        assert plans[minute].drain == () and _kept(plans[minute])[node][0] == codes.NOT_READY, minute
        assert node not in plans[minute].state.nodes, minute
    for minute in (20, 25, 30, 34):
        assert plans[minute].drain == (), minute
        assert _kept(plans[minute])[node][0] == codes.IDLE_BELOW_THRESHOLD, minute
    (drain,) = plans[35].drain
    assert drain.node == node and drain.code == codes.NEVER_STARTED


@pytest.mark.parametrize("busy", [False, True], ids=["idle", "running-a-pod-that-never-started"])
def test_a_node_never_ready_past_its_start_window_is_not_in_the_base_of_a_budgets_percentage(
    busy: bool,
) -> None:
    """Karpenter takes a budget's percentage of the initialized nodes only, and a node that has never
    been Ready never initialized, however long ago it registered. Past max_node_startup_minutes it was
    counted all the same, and as a node out of service taking one of the drains: 10% of the eleven nodes
    rounded up to two, where the ten in service allow one (Karpenter's BuildDisruptionBudgetMapping skips
    an uninitialized node in the count and in the disrupting ones alike)."""
    w, nodes, new = _ten_idle_and("registering")
    w.node(new)["metadata"]["creationTimestamp"] = o.iso(NOW - timedelta(minutes=17))
    _not_ready(w, new, 17)  # set at registration: never Ready
    if busy:  # kept, running a pod its kubelet never ran (not NotReady for the unready time yet)
        _never_started(w, new)

    result = w.plan(max_scale_in_fraction=1.0, disruption_budgets=[{"nodes": "10%"}])

    assert len([d for d in result.drain if d.node in nodes]) == 1
    held = [reason for code, reason in _kept(result).values() if code == codes.DISRUPTION_BUDGET]
    assert len(held) == 9 and all("allows 1 of group cpu's 10 node(s)" in reason for reason in held)


@pytest.mark.parametrize("starting", ["registering", "tainted"])
def test_a_node_not_initialized_that_is_being_deleted_takes_none_of_a_budgets_disruptions(
    starting: str,
) -> None:
    """Karpenter's BuildDisruptionBudgetMapping skips a node not initialized before it counts the nodes
    being deleted or NotReady (``allowed - disrupting``), so one being deleted by another hand while it
    was still starting (NotReady, or Ready with a startup taint) takes none of the budget's disruptions:
    a budget of two nodes drains two of the ten idle ones beside it. (README, Consolidation: the nodes
    being deleted by anyone that count are the initialized ones.)"""
    w, nodes, new = _ten_idle_and(starting)
    w.node(new)["metadata"]["deletionTimestamp"] = o.iso(NOW - timedelta(seconds=30))

    result = w.plan(
        max_scale_in_fraction=1.0,
        startup_taints=["node.cilium.io/agent-not-ready"],
        disruption_budgets=[{"nodes": "2"}],
    )

    assert len([d for d in result.drain if d.node in nodes]) == 2
    held = [reason for code, reason in _kept(result).values() if code == codes.DISRUPTION_BUDGET]
    assert len(held) == 8 and not any("out of service" in reason for reason in held)
