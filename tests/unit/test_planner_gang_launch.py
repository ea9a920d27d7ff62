"""Gangs launched atomically: the plan records them in its state, and later plans do not launch them
again while the launch may be under way (fleet instances join the group only once all run)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from plan_world import GPU_TOLERATION, NOW, World, pending_codes, pending_reasons, scale_up

from spillway.local import objects as o
from spillway.model.state import State

BIG = {"cpu": "5", "memory": "4Gi"}  # one per m5.2xlarge
COSCHED = "scheduling.x-k8s.io/v1alpha1"


def tag(w: World, group: str, mode: str) -> None:
    w.groups[group]["Tags"].append(
        {"ResourceId": group, "ResourceType": "auto-scaling-group", "Key": "spillway.io/atomic-launch",
         "Value": mode, "PropagateAtLaunch": False}
    )  # fmt: skip


def gang_world(mode: str = "fleet", **group: object) -> tuple[World, list[str]]:
    w = World()
    w.group("cpu-east", "m5.2xlarge", **group)  # type: ignore[arg-type]
    tag(w, "cpu-east", mode)
    w.pod_group(COSCHED, "train", spec={"minMember": 3})
    pods = w.pods("train", 3, labels={"scheduling.x-k8s.io/pod-group": "train"}, **BIG)
    return w, pods


def in_flight(w: World, result_state: State) -> None:
    w.state = result_state.to_wire()


def test_an_atomic_gang_launch_is_recorded_in_the_state() -> None:
    w, pods = gang_world()

    result = w.plan()

    assert scale_up(result)["cpu-east"] == (0, 3, pods)
    wire = result.state.to_wire()
    assert wire["gangs"] == {
        "default/train": {
            "group": "cpu-east",
            "region": "us-east-1",
            "count": 3,
            "since": "2026-11-02T12:00:00Z",
            "minimum_only": True,  # the three are all its minimum needs
        }
    }
    assert State.model_validate(wire) == result.state  # the wire form loads back


def test_a_gang_on_a_group_without_the_tag_is_not_recorded() -> None:
    w, _ = gang_world(mode="off")

    result = w.plan()

    assert result.scale_up and "gangs" not in result.state.to_wire()


def test_a_gang_being_launched_is_not_launched_again() -> None:
    w, pods = gang_world()
    first = w.plan()
    in_flight(w, first.state)

    later = w.plan(now=NOW + timedelta(minutes=3))

    assert later.scale_up == ()
    assert {pending_codes(later)[p] for p in pods} == {"gang-launching"}
    reason = pending_reasons(later)[pods[0]]
    assert "gang default/train is being launched atomically in cpu-east" in reason
    assert "since 2026-11-02T12:00:00Z" in reason
    assert later.state.gangs["default/train"].since == first.state.gangs["default/train"].since


def test_other_pods_do_not_take_the_launching_capacity_a_gang_holds() -> None:
    # rollback mode: the gang raised the desired capacity to 3, no node is Ready yet
    w, pods = gang_world(mode="rollback", desired=3)
    w.state = {"nodes": {}, "groups": {}, "gangs": {"default/train": {
        "group": "cpu-east", "region": "us-east-1", "count": 3, "since": "2026-11-02T11:58:00Z"}}}  # fmt: skip
    loose = w.pods("web", 1, **BIG)

    result = w.plan()

    assert {pending_codes(result)[p] for p in pods} == {"gang-launching"}
    assert scale_up(result)["cpu-east"] == (3, 4, loose)  # a node of its own, not one of the gang's


def test_the_entry_expires_after_gang_launch_minutes_and_the_gang_is_placed_again() -> None:
    w, pods = gang_world()
    in_flight(w, w.plan().state)

    result = w.plan(now=NOW + timedelta(minutes=16))

    assert scale_up(result)["cpu-east"] == (0, 3, pods)
    assert result.state.gangs["default/train"].since == NOW + timedelta(minutes=16)
    # a shorter window is honoured too
    assert w.plan(now=NOW + timedelta(minutes=6), gang_launch_minutes=5).scale_up


def test_a_backed_off_group_drops_the_entry_and_the_gang_goes_elsewhere() -> None:
    w, pods = gang_world()
    w.group("cpu-west", "m5.2xlarge", region="us-west-2")
    state = w.plan().state.to_wire()
    state["groups"] = {"cpu-east": {"backoff_until": "2026-11-02T12:30:00Z", "reason": "gang failed"}}
    w.state = state

    result = w.plan(now=NOW + timedelta(minutes=2))

    assert scale_up(result) == {"cpu-west": (0, 3, pods)}
    assert "default/train" not in result.state.gangs  # cpu-west is not tagged: no atomic launch


def test_the_entry_is_dropped_once_the_gang_has_no_pending_pod() -> None:
    w, pods = gang_world()
    in_flight(w, w.plan().state)
    for pod in pods:  # scheduled: bound to nodes
        item = w.pod_item(pod)
        item["spec"]["nodeName"] = "somewhere"
        item["status"] = {"phase": "Running"}

    result = w.plan(now=NOW + timedelta(minutes=4))

    assert result.state.gangs == {}


def test_states_written_before_gangs_load() -> None:
    old = {"nodes": {}, "groups": {"g": {"backoff_until": "2026-11-02T12:30:00Z", "reason": "x"}}}
    assert State.model_validate(old).gangs == {}


# --- one zone ----------------------------------------------------------------------------------

ZONE_TOPOLOGY = {"kueue.x-k8s.io/podset-required-topology": "topology.kubernetes.io/zone"}
ZONE_AFFINITY = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"job": "train"}}, "topologyKey": "topology.kubernetes.io/zone"}]}}  # fmt: skip


def zone_world(**pod: object) -> tuple[World, list[str]]:
    """Two single-AZ groups: 1a holds 2 nodes, 1b holds 5; a gang of 3."""
    w = World()
    w.group("east-a", "m5.2xlarge", max_size=2, zones=["us-east-1a"])
    w.group("east-b", "m5.2xlarge", max_size=5, zones=["us-east-1b"])
    w.pod_group(COSCHED, "train", spec={"minMember": 3})
    labels = {"scheduling.x-k8s.io/pod-group": "train", "job": "train"}
    return w, w.pods("train", 3, labels=labels, **BIG, **pod)  # type: ignore[arg-type]


def test_without_a_zone_requirement_a_gang_spreads_over_the_zones_of_its_region() -> None:
    w, _ = zone_world()
    ups = scale_up(w.plan())
    assert {g: up[1] for g, up in ups.items()} == {"east-a": 2, "east-b": 1}


def test_kueue_required_zone_topology_places_the_gang_in_one_zone() -> None:
    w, pods = zone_world(annotations=ZONE_TOPOLOGY)
    assert scale_up(w.plan()) == {"east-b": (0, 3, pods)}


def test_a_required_pod_affinity_on_the_zone_places_the_gang_in_one_zone() -> None:
    w, pods = zone_world(affinity=ZONE_AFFINITY)
    assert scale_up(w.plan()) == {"east-b": (0, 3, pods)}


def test_free_room_counts_only_on_nodes_of_the_zone_tried() -> None:
    w, pods = zone_world(annotations=ZONE_TOPOLOGY)
    [node] = w.group("cpu-1a", "m5.2xlarge", max_size=1, nodes=1, zones=["us-east-1a"])  # label us-east-1a
    result = w.plan()
    # 1a: the free node + 2 new east-a nodes hold the gang whole
    assert scale_up(result) == {"east-a": (0, 2, [p for p in pods if p not in _on(result, node)])}
    assert len(_on(result, node)) == 1


def _on(result: object, node: str) -> list[str]:
    return [p.pod for p in result.placements if p.node == node]  # type: ignore[attr-defined]


def test_a_zone_bound_gang_no_zone_holds_is_refused_with_the_reason() -> None:
    w = World()
    w.group("spread", "m5.2xlarge", max_size=9, zones=["us-east-1a", "us-east-1b"])
    w.group("small-a", "m5.2xlarge", max_size=1, zones=["us-east-1a"])
    w.pod_group(COSCHED, "train", spec={"minMember": 3})
    pods = w.pods(
        "train", 3, labels={"scheduling.x-k8s.io/pod-group": "train"}, annotations=ZONE_TOPOLOGY, **BIG
    )

    result = w.plan()

    assert result.scale_up == ()
    assert {pending_codes(result)[p] for p in pods} == {"gang-no-zone"}
    reason = pending_reasons(result)[pods[0]]
    assert "require one zone" in reason and "in us-east-1/us-east-1a" in reason and "MaxSize 1" in reason


def test_the_zone_requirement_survives_a_snapshot_round_trip() -> None:
    from spillway.model.cluster import ClusterSnapshot

    w, _ = zone_world(annotations=ZONE_TOPOLOGY)
    snapshot, *_ = w.parsed()
    again = ClusterSnapshot.from_dict(snapshot.to_dict())
    assert [p.one_zone for p in again.pods] == [True] * 3
    assert "oz" not in zone_world()[0].parsed()[0].to_dict()["pods"][0]  # old form unchanged


def _gangs(result: object) -> dict[str, tuple[object, ...]]:
    return {s.group: s.gangs for s in result.scale_up}  # type: ignore[attr-defined]


def zone_kept_gang_on_a_three_zone_fleet(w: World) -> list[str]:
    """A fleet-mode gang group of us-east-1a, b and c (AZRebalance suspended, as fleet mode requires) and
    a three-pod gang whose pods ask for one zone; the gang's pods."""
    w.group("fleet", "m5.2xlarge", max_size=9, zones=["us-east-1a", "us-east-1b", "us-east-1c"],
            suspended=["AZRebalance"])  # fmt: skip
    tag(w, "fleet", "fleet")
    w.pod_group(COSCHED, "train", spec={"minMember": 3})
    return w.pods(
        "train", 3, labels={"scheduling.x-k8s.io/pod-group": "train"}, annotations=ZONE_TOPOLOGY, **BIG
    )


def test_a_one_zone_gang_uses_a_fleet_group_spanning_three_zones_and_names_the_zone() -> None:
    w = World()
    pods = zone_kept_gang_on_a_three_zone_fleet(w)

    result = w.plan()

    assert scale_up(result) == {"fleet": (0, 3, pods)}
    [launch] = _gangs(result)["fleet"]
    assert launch.zone == "us-east-1a" and launch.to_dict()["zone"] == "us-east-1a"  # type: ignore[attr-defined]


def test_the_same_group_in_rollback_mode_is_still_not_used_for_a_one_zone_gang() -> None:
    w = World()
    w.group("spread", "m5.2xlarge", max_size=9, zones=["us-east-1a", "us-east-1b", "us-east-1c"])
    tag(w, "spread", "rollback")
    w.pod_group(COSCHED, "train", spec={"minMember": 3})
    pods = w.pods(
        "train", 3, labels={"scheduling.x-k8s.io/pod-group": "train"}, annotations=ZONE_TOPOLOGY, **BIG
    )

    result = w.plan()

    assert result.scale_up == ()
    assert {pending_codes(result)[p] for p in pods} == {"gang-no-zone"}


def test_a_gang_without_a_zone_requirement_on_a_fleet_group_gets_no_zone() -> None:
    w = World()
    w.group("fleet", "m5.2xlarge", max_size=9, zones=["us-east-1a", "us-east-1b"], suspended=["AZRebalance"])
    tag(w, "fleet", "fleet")
    w.pod_group(COSCHED, "train", spec={"minMember": 3})
    w.pods("train", 3, labels={"scheduling.x-k8s.io/pod-group": "train"}, **BIG)

    [launch] = _gangs(w.plan())["fleet"]

    assert launch.zone is None and "zone" not in launch.to_dict()  # type: ignore[attr-defined]


@pytest.mark.parametrize("mode", ["rollback", "fleet"])
def test_a_group_whose_terminate_process_is_suspended_launches_its_gangs_the_ordinary_way(mode: str) -> None:
    """A gang there could not be given back whole: Auto Scaling terminates none of a group's InService
    instances while Terminate is suspended (a rollback gang's members, or a fleet gang's once attached),
    and gang_prepare refuses it. A plan that kept sending the gang there would start a refused gang
    launch every minute and never place it. Read as off, with the reason, as a fleet group that
    rebalances its zones is."""
    w, pods = gang_world(mode)
    w.groups["cpu-east"]["SuspendedProcesses"] = [
        {"ProcessName": "Terminate", "SuspensionReason": "User suspended"}
    ]

    result = w.plan()

    assert scale_up(result) == {"cpu-east": (0, 3, pods)}
    assert "gangs" not in result.state.to_wire()  # no atomic launch
    [group] = [g for g in w.parsed()[1] if g.name == "cpu-east"]
    assert group.atomic_launch == "off"
    assert f"{mode}: us-east-1/cpu-east: its Terminate process is suspended" in group.atomic_launch_problem


def test_a_fleet_group_refused_for_two_processes_names_both() -> None:
    """AZRebalance active over two zones and Terminate suspended: the reason names both, so the owner
    who suspends AZRebalance is not met by the next refusal."""
    w, _ = gang_world("fleet", zones=["us-east-1a", "us-east-1b"])
    w.groups["cpu-east"]["SuspendedProcesses"] = [{"ProcessName": "Terminate", "SuspensionReason": ""}]

    [group] = [g for g in w.parsed()[1] if g.name == "cpu-east"]

    assert group.atomic_launch == "off"
    assert "AZRebalance is not in its SuspendedProcesses" in group.atomic_launch_problem
    assert "its Terminate process is suspended" in group.atomic_launch_problem


def test_a_fleet_group_spanning_zones_that_rebalances_them_launches_its_gangs_the_ordinary_way() -> None:
    """Auto Scaling's AZRebalance (not suspended: every group's default) would terminate the members of
    a gang a fleet packed into one zone, to even the zones out (review r14-4). Such a group is read as
    off, with the reason, as a tag value that is no mode is: its gangs go through the ordinary scale-up,
    and a gang that must run in one zone is not placed on it."""
    w = World()
    w.group("fleet", "m5.2xlarge", max_size=9, zones=["us-east-1a", "us-east-1b"])
    tag(w, "fleet", "fleet")
    w.pod_group(COSCHED, "train", spec={"minMember": 3})
    pods = w.pods("train", 3, labels={"scheduling.x-k8s.io/pod-group": "train"}, **BIG)

    result = w.plan()

    assert scale_up(result) == {"fleet": (0, 3, pods)}
    assert "gangs" not in result.state.to_wire()  # no atomic launch: nothing in flight to wait for
    [group] = [g for g in w.parsed()[1] if g.name == "fleet"]
    assert group.atomic_launch == "off" and "AZRebalance" in group.atomic_launch_problem
    w.pods("one-zone", 3, labels={"scheduling.x-k8s.io/pod-group": "one-zone"}, annotations=ZONE_TOPOLOGY,
           **BIG)  # fmt: skip
    w.pod_group(COSCHED, "one-zone", spec={"minMember": 3})
    assert {pending_codes(w.plan())[f"default/one-zone-{i}"] for i in range(3)} == {"gang-no-zone"}


def test_a_one_zone_gang_is_not_kept_to_a_zone_whose_pool_is_backed_off() -> None:
    """A gang kept to one zone of a fleet group spanning several asks CreateFleet for that zone only:
    unlike a plain raise, its launch can be steered off a pool EC2 just said was out of capacity. An
    earlier gang's fleet (or scale-up) found no on-demand m5.2xlarge in us-east-1a and backed off that
    pool; the group's other zones are open, so the group is not backed off, but the gang must go to
    us-east-1b, not be sent back into the exhausted pool (and fail and be given back again)."""
    w = World()
    pods = zone_kept_gang_on_a_three_zone_fleet(w)
    until = (NOW + timedelta(minutes=10)).isoformat()
    w.state["pools"] = {"on-demand/us-east-1a/m5.2xlarge": {"backoff_until": until, "reason": "gang short"}}

    result = w.plan()

    assert scale_up(result) == {"fleet": (0, 3, pods)}
    [launch] = _gangs(result)["fleet"]
    assert launch.zone == "us-east-1b"  # type: ignore[attr-defined]
    # every zone's pool backed off: the group is, and the gang waits
    w.state["pools"] = {f"on-demand/us-east-1{z}/m5.2xlarge": {"backoff_until": until, "reason": "gang short"}
                        for z in "abc"}  # fmt: skip
    assert scale_up(w.plan()) == {}


def _zone_affinity(operator: str, zone: str) -> dict[str, object]:
    term = {
        "matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": operator, "values": [zone]}]
    }
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


@pytest.mark.parametrize("operator", ["In", "NotIn"])
def test_a_gang_kept_to_one_zone_is_judged_on_that_zone_of_a_fleet_group(operator: str) -> None:
    """The fleet gang's nodes all come up in the zone it is kept to, so its pods' node affinity is
    judged there (kube-scheduler's NodeAffinity reads the zone label the node gets). Pods that need
    us-east-1b were refused every zone (the group's other zones fail them) and waited for good; pods
    that must avoid us-east-1a were sent there (its template has no zone, so NotIn held), a fleet
    launched in us-east-1a whose nodes they never run on, plan after plan."""
    w = World()
    pods = zone_kept_gang_on_a_three_zone_fleet(w)
    for key in pods:
        w.pod_item(key)["spec"]["affinity"] = _zone_affinity(
            operator, "us-east-1" + ("b" if operator == "In" else "a")
        )

    result = w.plan()

    assert scale_up(result) == {"fleet": (0, 3, pods)}, {p: pending_reasons(result).get(p) for p in pods}
    [launch] = _gangs(result)["fleet"]
    assert launch.zone == "us-east-1b"  # type: ignore[attr-defined]


@pytest.mark.parametrize("term", ["podAffinity", "podAntiAffinity", "topologySpreadConstraints"])
def test_a_pod_placed_after_a_gang_kept_to_one_zone_follows_or_avoids_that_zone(term: str) -> None:
    """The fleet gang's nodes come up in the zone it is kept to (us-east-1a), and its pods run there. A
    pod placed after it whose required pod affinity over the zone selects them must run in that zone;
    one whose anti-affinity selects them, or whose zone spread (maxSkew 1) counts them with itself,
    elsewhere (kube-scheduler's InterPodAffinity and PodTopologySpread read the zone of the node each
    pod is bound to). The gang's placements were recorded nowhere for the classes after it: the first
    waited for good (no zone runs the pods it follows), the others were sent to us-east-1a, the first
    zone, where they never run."""
    w = World()
    pods = zone_kept_gang_on_a_three_zone_fleet(w)
    for key in pods:
        w.pod_item(key)["metadata"]["labels"]["app"] = "train"
    w.group("cpu-a", "m5.xlarge", max_size=3, zones=["us-east-1a"])
    w.group("cpu-b", "m5.xlarge", max_size=3, zones=["us-east-1b"])
    selector = {"matchLabels": {"app": "train"}}
    zone = "topology.kubernetes.io/zone"
    (board,) = w.pods("board", 1, cpu="1", memory="1Gi")
    if term == "topologySpreadConstraints":  # it counts itself with them
        w.pod_item(board)["metadata"]["labels"]["app"] = "train"
        constraint = {"maxSkew": 1, "topologyKey": zone, "whenUnsatisfiable": "DoNotSchedule"}
        w.pod_item(board)["spec"][term] = [{**constraint, "labelSelector": selector}]
    else:
        required = [{"labelSelector": selector, "topologyKey": zone}]
        w.pod_item(board)["spec"]["affinity"] = {
            term: {"requiredDuringSchedulingIgnoredDuringExecution": required}
        }

    result = w.plan()

    ups = scale_up(result)
    assert ups["fleet"] == (0, 3, pods)
    assert ups["cpu-a" if term == "podAffinity" else "cpu-b"] == (0, 1, [board]), pending_reasons(result)


# --- a gang kept to one zone against the quotas of zones ------------------------------------------


def test_a_gang_kept_to_one_zone_is_not_held_by_a_full_quota_of_another_zone() -> None:
    """The fleet gang's nodes all land in us-east-1a (CreateFleet is asked for that zone only): a full
    quota on us-east-1c does not cover them, and it was refused for it."""
    w = World()
    pods = zone_kept_gang_on_a_three_zone_fleet(w)
    w.capacity_quota("c-cap", {"nodes": "0"}, match_labels={"topology.kubernetes.io/zone": "us-east-1c"})

    result = w.plan()

    assert scale_up(result) == {"fleet": (0, 3, pods)}, {p: pending_codes(result).get(p) for p in pods}
    [launch] = _gangs(result)["fleet"]
    assert launch.zone == "us-east-1a"  # type: ignore[attr-defined]


def test_a_gang_kept_to_one_zone_counts_against_that_zones_quota() -> None:
    """A quota on us-east-1a with room for two nodes holds the three-node gang there: it goes to
    us-east-1b."""
    w = World()
    pods = zone_kept_gang_on_a_three_zone_fleet(w)
    w.capacity_quota("a-cap", {"nodes": "2"}, match_labels={"topology.kubernetes.io/zone": "us-east-1a"})

    result = w.plan()

    assert scale_up(result) == {"fleet": (0, 3, pods)}
    [launch] = _gangs(result)["fleet"]
    assert launch.zone == "us-east-1b"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "modes", [("fleet", "fleet"), ("fleet", "off"), ("off", "fleet"), ("rollback", "fleet")]
)
def test_a_gang_is_not_split_between_an_atomic_launch_and_another_group(modes: tuple[str, str]) -> None:
    """Scenario: a coscheduling gang of 4 one-node workers; cpu-a (ranked first) has room for 2 only,
    cpu-b for 10, at least one of them tagged ``spillway.io/atomic-launch``. The plan put 2 new nodes in
    each group, so the gang-launch state machine ran two executions of 2 (or one of 2 beside a plain
    raise of 2), each all-or-nothing alone: cpu-a's fleet succeeds, cpu-b's fails for capacity, and two
    paid nodes sit Ready for a gang coscheduling never starts (minMember 4).

    The rule (README "Atomic gang launch": "A gang (a training job's N workers) is useless until all N
    nodes are up, and a half gang holds GPUs for nothing"; the plan's ``gangs`` "says which of the new
    nodes a gang needs all of: launch those together or none"): a gang whose new nodes an atomic launch
    brings gets all of them from that one launch, i.e. from one group, as a best-effort-atomic
    ProvisioningRequest's do (:class:`OneGroup`). cpu-b holds the whole gang: all 4 there."""
    w = World()
    w.group("cpu-a", "m5.2xlarge", max_size=2)
    w.group("cpu-b", "m5.2xlarge", max_size=10)
    tag(w, "cpu-a", modes[0])
    tag(w, "cpu-b", modes[1])
    w.pod_group(COSCHED, "train", spec={"minMember": 4})
    pods = w.pods("train", 4, labels={"scheduling.x-k8s.io/pod-group": "train"}, **BIG)

    result = w.plan()

    assert scale_up(result) == {"cpu-b": (0, 4, pods)}
    (action,) = result.scale_up
    assert [(g.gang, g.nodes) for g in action.gangs] == [("default/train", 4)]


def test_a_gang_no_one_atomic_group_holds_is_not_split_over_two() -> None:
    """Scenario: a gang of 4 one-node workers, two fleet groups with room for 2 each. The plan launched
    2 + 2 as two independent fleets: one failing leaves the other's 2 nodes running for a gang that
    cannot start. Rule as above (README "Atomic gang launch": all its nodes at once or none): no one
    group holds it, so nothing is added and its pods stay pending (``max-size``)."""
    w = World()
    w.group("cpu-a", "m5.2xlarge", max_size=2)
    w.group("cpu-b", "m5.2xlarge", max_size=2)
    tag(w, "cpu-a", "fleet")
    tag(w, "cpu-b", "fleet")
    w.pod_group(COSCHED, "train", spec={"minMember": 4})
    pods = w.pods("train", 4, labels={"scheduling.x-k8s.io/pod-group": "train"}, **BIG)

    result = w.plan()

    assert result.scale_up == ()
    assert {pending_codes(result)[p] for p in pods} == {"max-size"}


def test_a_gang_whose_pods_no_one_group_can_all_run_says_which_pod_the_group_cannot_run() -> None:
    """Scenario: an MPI-style gang, a launcher for the CPU pool (nodeSelector pool=cpu, no GPU
    toleration) and two 4-GPU workers for the GPU pool, tagged ``fleet``. Its new nodes must all come
    from one group (README "Tenants, limits and gangs"), and no group runs both kinds, so nothing is
    launched, as documented. The reason said "every node group that fits is exhausted (cpu=2,...): "
    and nothing more, code ``groups-exhausted``: no group was at MaxSize or backed off, and the user was
    sent looking for one. It now names the group the gang was tried in and why it cannot run the
    launcher, with the code of a pod no group can run."""
    w = World()
    w.group("cpu", "m5.2xlarge", max_size=10, labels={"pool": "cpu"})
    w.group("gpu", "g5.12xlarge", max_size=10, gpu_taint=True, labels={"pool": "gpu"})
    tag(w, "gpu", "fleet")
    w.pod_group(COSCHED, "job", spec={"minMember": 3})
    member = {"scheduling.x-k8s.io/pod-group": "job"}
    pods = w.pods("launcher", 1, labels=member, cpu="2", memory="2Gi", node_selector={"pool": "cpu"})
    pods += w.gpu_pods("worker", 2, 4, labels=member, memory="100Gi", node_selector={"pool": "gpu"})

    result = w.plan()

    assert result.scale_up == ()
    assert {pending_codes(result)[p] for p in pods} == {"no-group-fits"}
    reason = pending_reasons(result)[pods[0]]
    assert "exhausted" not in reason
    assert "in us-east-1/gpu: node group gpu, the one the gang's new nodes come from, can never run" in reason
    assert "nodeSelector pool=cpu does not match" in reason


def test_a_gang_whose_one_group_pod_topology_closes_to_a_pod_says_so_not_that_it_never_runs() -> None:
    """The launcher could run on the GPU group's nodes (it tolerates their taint), but its required pod
    anti-affinity over the zone keeps it out of us-east-1a, where a database pod runs, and so out of
    the fleet group's only zone; the CPU group in us-east-1b runs no GPU worker. Kept to one group,
    the gang launches nothing. Not "can never run" (no-group-fits): the database pod may leave and the
    fleet group run the whole gang, as why_unplaceable says of a pod that pod topology alone keeps off
    every group (pod-topology)."""
    w = World()
    (db_node,) = w.group("misc", "m5.xlarge", nodes=1, max_size=1)
    w.items.append(o.pod("db-0", cpu="100m", memory="100Mi", node_name=db_node, phase="Running",
                         labels={"app": "db"}))  # fmt: skip
    w.group("cpu", "m5.2xlarge", max_size=10, zones=["us-east-1b"])
    w.group("gpu", "g5.12xlarge", max_size=10, gpu_taint=True, zones=["us-east-1a"])
    tag(w, "gpu", "fleet")
    w.pod_group(COSCHED, "job", spec={"minMember": 3})
    member = {"scheduling.x-k8s.io/pod-group": "job"}
    apart = [{"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "topology.kubernetes.io/zone"}]
    pods = w.pods("launcher", 1, labels=member, cpu="2", memory="2Gi", tolerations=[GPU_TOLERATION],
                  affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": apart}})  # fmt: skip
    pods += w.gpu_pods("worker", 2, 4, labels=member, memory="100Gi")

    result = w.plan()

    assert result.scale_up == ()
    assert {pending_codes(result)[p] for p in pods} == {"pod-topology"}, pending_reasons(result)
    reason = pending_reasons(result)[pods[0]]
    assert "node group gpu, the one the gang's new nodes come from, cannot run its pods" in reason
    assert "never" not in reason


def test_a_gang_placed_after_the_pods_it_must_share_a_zone_with_follows_them() -> None:
    """A dataset cache, pending too, must run in us-east-1b (its node selector) and is served first (it
    asks for more CPU). The training gang's pods must share its zone (required pod affinity over the
    zone selecting it, which also keeps the gang to one zone). The cache gets a new node in us-east-1b,
    so the gang's fleet is kept to us-east-1b in the same plan (kube-scheduler runs its pods in the
    zone of the node the cache is bound to, interpodaffinity/filtering.go satisfyPodAffinity). The gang
    was placed without the pods the plan placed before it: its term found no pod anywhere, every zone
    refused it, and it waited a plan and a boot for the cache to run."""
    w = World()
    pods = zone_kept_gang_on_a_three_zone_fleet(w)
    near = [
        {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "topology.kubernetes.io/zone"}
    ]
    for key in pods:
        w.pod_item(key)["spec"]["affinity"] = {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": near}
        }
    w.group("cache-b", "m5.2xlarge", max_size=3, zones=["us-east-1b"])
    (cache,) = w.pods(
        "cache", 1, cpu="7", memory="1Gi", labels={"app": "cache"},
        node_selector={"topology.kubernetes.io/zone": "us-east-1b"},
    )  # fmt: skip

    result = w.plan()

    assert scale_up(result) == {"fleet": (0, 3, pods), "cache-b": (0, 1, [cache])}, pending_reasons(result)
    [launch] = _gangs(result)["fleet"]
    assert launch.zone == "us-east-1b"  # type: ignore[attr-defined]
