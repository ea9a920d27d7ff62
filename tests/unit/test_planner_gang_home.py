"""A gang whose members already run in one region (or zone) gets the rest there, or nothing.

Some members of a gang that has not started run already (recreated workers, members that took room
that came free); the rest used to be placed in the most preferred region that held them, so one
training job ran over two regions. The rest now go where the running members are; when that region
(or, for a gang kept to one zone, that zone) cannot hold them, nothing is added elsewhere and the
reason says so."""

from __future__ import annotations

from datetime import timedelta

import pytest
from plan_world import World, pending_codes, pending_reasons, scale_up
from test_planner_gang_launch import ZONE_TOPOLOGY
from test_planner_gangs import BIG, CONVENTIONS, COSCHED, VOLCANO

from spillway.act.planning import oldest_unheld_pending_seconds, summarize
from spillway.local import objects as o
from spillway.model.snapshot import Snapshot
from spillway.planner import codes


def _podgroup(w: World, convention: str) -> None:
    """Gang ``train`` of minimum 4, as ``convention`` declares it (Kueue: the pods state it)."""
    if convention == "coscheduling":
        w.pod_group(COSCHED, "train", spec={"minMember": 4})
    elif convention == "volcano":
        w.pod_group(VOLCANO, "train", spec={"minMember": 4}, phase="Running")
    elif convention == "workload":
        w.workload("train", "default", [{"name": "workers", "policy": {"gang": {"minCount": 4}}}])
    elif convention == "podgroup-v1alpha2":
        w.pod_group(
            "scheduling.k8s.io/v1alpha2", "train", spec={"schedulingPolicy": {"gang": {"minCount": 4}}}
        )


def two_regions(
    convention: str = "coscheduling", *, west_max: int = 10, pending: int = 2, **pod: object
) -> tuple[World, list[str]]:
    """us-east-1 (preferred) has an empty group with room for ten; us-west-2 runs two members of gang
    ``train`` (minimum 4) on its two nodes; ``pending`` more wait. Returns the pending members."""
    w = World()
    w.group("cpu-east", "m5.2xlarge", max_size=10)
    nodes = w.group("cpu-west", "m5.2xlarge", region="us-west-2", nodes=2, max_size=west_max)
    _podgroup(w, convention)
    running = [w.pods(f"train-run{i}", 1, node_name=node, **BIG, **pod)[0] for i, node in enumerate(nodes)]
    more = w.pods("train-more", pending, **BIG, **pod)  # type: ignore[arg-type]
    for key in running + more:
        w.join_gang(key, convention)
    return w, more


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_the_rest_of_a_gang_goes_to_the_region_its_running_members_are_in(convention: str) -> None:
    w, more = two_regions(convention)

    result = w.plan()

    # before: cpu-east (the preferred region) got two nodes and the job ran over two regions
    assert scale_up(result) == {"cpu-west": (2, 4, more)}
    assert result.scale_up[0].gangs[0].gang.startswith("default/train")  # a Workload's: .../workers


def test_a_gang_whose_running_members_region_is_full_adds_nothing_elsewhere_and_says_why() -> None:
    w, more = two_regions(west_max=2)

    result = w.plan()

    assert result.scale_up == ()  # before: two nodes in cpu-east
    # its own code (before: max-size, as any pod's): the gang waits for its region alone
    assert {pending_codes(result)[p] for p in more} == {codes.GANG_HOME_FULL}
    reason = pending_reasons(result)[more[0]]
    assert reason.startswith("gang default/train (2 pods) cannot be placed whole, so nothing is added")
    assert "its running members are in us-west-2, so the rest are placed there only" in reason
    assert "in us-west-2: " in reason and "MaxSize 2" in reason


def test_a_gang_cut_to_its_minimum_starts_where_its_running_members_are() -> None:
    # four pending, two needed to start; us-west-2 has room for two: the two it needs go there, not
    # all four to us-east-1
    w, more = two_regions(west_max=4, pending=4)

    result = w.plan()

    assert scale_up(result) == {"cpu-west": (2, 4, more[:2])}
    # the other two are kept to us-west-2 too (us-east-1 has room): gang-home-full, the region named, as
    # once the gang runs (before: max-size, and no word of the region)
    assert {pending_codes(result)[p] for p in more[2:]} == {codes.GANG_HOME_FULL}
    reason = pending_reasons(result)[more[2]]
    assert "starts with the 2 pod(s) it still needs of its 4" in reason
    assert "its running members are in us-west-2, so the rest are placed there only" in reason, reason


def test_a_gang_with_a_member_nominated_to_a_node_goes_to_that_nodes_region() -> None:
    # no member bound: one preempted on a us-west-2 node and waits there (status.nominatedNodeName);
    # its room there counts as running, and so does its region
    w = World()
    w.group("cpu-east", "m5.2xlarge", max_size=10)
    (node,) = w.group("cpu-west", "m5.2xlarge", region="us-west-2", nodes=1, max_size=10)
    w.pod_group(COSCHED, "train", spec={"minMember": 3})
    labels = {"scheduling.x-k8s.io/pod-group": "train"}
    (waiting,) = w.pods("train-nominated", 1, labels=labels, **BIG)
    w.pod_item(waiting)["status"]["nominatedNodeName"] = node
    more = w.pods("train-more", 2, labels=labels, **BIG)

    result = w.plan()

    assert scale_up(result) == {"cpu-west": (1, 3, more)}


def _zoned_nodes(w: World, nodes: list[str], zone: str) -> None:
    for name in nodes:
        labels = w.node(name)["metadata"]["labels"]
        for key, value in list(labels.items()):
            if value.startswith("us-east-1") and value != "us-east-1":
                labels[key] = zone


def test_a_one_zone_gang_gets_the_rest_in_the_zone_its_running_members_are_in() -> None:
    # Kueue's podset-required-topology on the zone: two members run in us-east-1b, the zone after
    # us-east-1a in order; before, the rest went to us-east-1a and the gang ran over two zones
    w = World()
    w.group("east-a", "m5.2xlarge", max_size=5, zones=["us-east-1a"])
    nodes = w.group("east-b", "m5.2xlarge", nodes=2, max_size=5, zones=["us-east-1b"])
    _zoned_nodes(w, nodes, "us-east-1b")
    w.pod_group(COSCHED, "train", spec={"minMember": 4})
    labels = {"scheduling.x-k8s.io/pod-group": "train"}
    for i, node in enumerate(nodes):
        w.pods(f"train-run{i}", 1, node_name=node, labels=labels, annotations=ZONE_TOPOLOGY, **BIG)
    more = w.pods("train-more", 2, labels=labels, annotations=ZONE_TOPOLOGY, **BIG)

    assert scale_up(w.plan()) == {"east-b": (2, 4, more)}

    w.groups["east-b"]["MaxSize"] = 2  # its zone full: nothing in us-east-1a either
    result = w.plan()
    assert result.scale_up == ()
    assert {pending_codes(result)[p] for p in more} == {codes.GANG_NO_ZONE}
    assert "its running members are in us-east-1b" in pending_reasons(result)[more[0]]


def test_a_gang_with_no_member_running_still_goes_to_the_preferred_region() -> None:
    w = World()
    w.group("cpu-east", "m5.2xlarge", max_size=10)
    w.group("cpu-west", "m5.2xlarge", region="us-west-2", nodes=2, max_size=10)
    w.pod_group(COSCHED, "train", spec={"minMember": 2})
    pods = w.pods("train", 2, labels={"scheduling.x-k8s.io/pod-group": "train"}, **BIG)

    assert scale_up(w.plan()) == {"cpu-east": (0, 2, pods)}


def test_members_on_nodes_a_drain_takes_away_do_not_keep_the_rest_in_their_region() -> None:
    # Spillway drains both us-west-2 nodes (cordoned, tainted spillway.io/draining): the two members
    # there are evicted, so their region is no home; the rest go to the preferred us-east-1, where the
    # evicted members follow them once recreated
    w, more = two_regions()
    for name in _west_nodes(w):
        w.cordon(name, by_spillway=True)

    result = w.plan()

    assert scale_up(result)["cpu-east"] == (0, 2, more)  # before: cpu-west grew for them


@pytest.mark.parametrize("leaving", ["deleting", "not-ready"])
def test_members_on_nodes_out_of_service_do_not_keep_the_rest_in_their_region(leaving: str) -> None:
    w, more = two_regions()
    for name in _west_nodes(w):
        node = w.node(name)
        if leaving == "deleting":
            node["metadata"]["deletionTimestamp"] = "2026-11-02T11:59:00Z"
        else:
            ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
            ready["status"] = "False"

    result = w.plan()

    assert scale_up(result)["cpu-east"] == (0, 2, more)  # before: cpu-west grew for them


def test_members_on_a_drain_cordon_no_drain_owns_still_keep_the_rest_in_their_region() -> None:
    # an orphaned cordon (older than orphaned_drain_minutes, no plan claims its drain) is restored: the
    # members stay where they are, and so does the rest
    w, more = two_regions()
    for name in _west_nodes(w):
        w.cordon(name, by_spillway=True)

    result = w.plan(orphaned_drain_minutes=30)

    assert scale_up(result) == {"cpu-west": (2, 4, more)}


def _west_nodes(w: World) -> list[str]:
    return [
        i["metadata"]["name"]
        for i in w.items
        if i["kind"] == "Node" and i["metadata"]["labels"].get("topology.kubernetes.io/region") == "us-west-2"
    ]


def started_gang(*, west_max: int = 10) -> tuple[World, list[str]]:
    """Gang ``train`` of minimum 2 runs: its two members on us-west-2's two nodes; two more members
    (beyond the minimum: an elastic job's) wait; us-east-1 is preferred and has room for ten."""
    w = World()
    w.group("cpu-east", "m5.2xlarge", max_size=10)
    nodes = w.group("cpu-west", "m5.2xlarge", region="us-west-2", nodes=2, max_size=west_max)
    w.pod_group(COSCHED, "train", spec={"minMember": 2})
    labels = {"scheduling.x-k8s.io/pod-group": "train"}
    for i, node in enumerate(nodes):
        w.pods(f"train-run{i}", 1, node_name=node, labels=labels, **BIG)
    return w, w.pods("train-more", 2, labels=labels, **BIG)


def test_members_beyond_the_minimum_of_a_started_gang_go_to_its_region() -> None:
    w, more = started_gang()

    result = w.plan()

    assert scale_up(result) == {"cpu-west": (2, 4, more)}  # before: cpu-east, the job over two regions


def test_members_beyond_the_minimum_wait_when_the_gangs_region_is_full_and_say_why() -> None:
    w, more = started_gang(west_max=2)

    result = w.plan()

    assert result.scale_up == ()  # before: two nodes in cpu-east
    # its own code (before: max-size, as any pod's): the members wait for their gang's region alone
    assert {pending_codes(result)[p] for p in more} == {codes.GANG_HOME_FULL}
    reason = pending_reasons(result)[more[0]]
    assert reason.endswith(
        "its gang default/train runs in us-west-2, so its pending members are placed there only (a gang "
        "is not split over regions)"
    )


def test_members_beyond_the_minimum_of_a_gang_running_on_leaving_nodes_go_anywhere() -> None:
    w, more = started_gang()
    for name in _west_nodes(w):
        w.cordon(name, by_spillway=True)

    assert scale_up(w.plan()) == {"cpu-east": (0, 2, more)}


# --- a gang already over several regions; members on nodes of unknown region -----------------------


def three_regions(*, minimum: int, eu_max: int = 10) -> tuple[World, list[str]]:
    """Gang ``train`` of ``minimum``: one member runs in us-west-2 (preferred to eu-west-1), two in
    eu-west-1; two more wait. us-east-1, the most preferred, has an empty group with room for ten."""
    w = World()
    w.group("cpu-east", "m5.2xlarge", max_size=10)
    (west,) = w.group("cpu-west", "m5.2xlarge", region="us-west-2", nodes=1, max_size=10)
    eu = w.group("cpu-eu", "m5.2xlarge", region="eu-west-1", nodes=2, max_size=eu_max)
    w.pod_group(COSCHED, "train", spec={"minMember": minimum})
    labels = {"scheduling.x-k8s.io/pod-group": "train"}
    for i, node in enumerate([west, *eu]):
        w.pods(f"train-run{i}", 1, node_name=node, labels=labels, **BIG)
    return w, w.pods("train-more", 2, labels=labels, **BIG)


def test_members_of_a_started_gang_over_two_regions_go_to_the_one_with_most_members_not_a_third() -> None:
    w, more = three_regions(minimum=3)

    result = w.plan()

    assert scale_up(result) == {"cpu-eu": (2, 4, more)}  # before: cpu-east, a third region


def test_members_of_a_started_gang_over_two_regions_go_to_the_other_when_the_first_is_full() -> None:
    w, more = three_regions(minimum=3, eu_max=2)

    assert scale_up(w.plan()) == {"cpu-west": (1, 3, more)}  # before: cpu-east


def test_members_of_a_started_gang_wait_when_every_region_it_runs_in_is_full_with_a_code_of_their_own() -> (
    None
):
    w, more = three_regions(minimum=3, eu_max=2)
    w.groups["cpu-west"]["MaxSize"] = 1

    result = w.plan()

    assert result.scale_up == ()
    assert {pending_codes(result)[p] for p in more} == {codes.GANG_HOME_FULL}
    assert pending_reasons(result)[more[0]].endswith(
        "its gang default/train runs in eu-west-1, us-west-2 (most members first), so its pending members are "
        "placed there only (a gang is not split further)"
    )


def test_the_rest_of_a_gang_over_two_regions_goes_to_the_one_with_most_members_first() -> None:
    w, more = three_regions(minimum=5)  # not started: three of five run

    result = w.plan()

    assert scale_up(result) == {"cpu-eu": (2, 4, more)}  # before: cpu-west, preferred among the two


def _unknown_region_node(w: World, name: str) -> str:
    """A Node of no managed group whose labels name no region (its zone label too is gone)."""
    w.items.append(o.node(name, instance=o.instance_id(name), zone="us-east-1a"))
    labels = w.node(name)["metadata"]["labels"]
    del labels["topology.kubernetes.io/region"], labels["topology.kubernetes.io/zone"]
    return name


def test_members_of_a_started_gang_on_nodes_of_unknown_region_get_no_node_in_any_region() -> None:
    # two members run on a node no group holds and no label places; us-east-1 has room: new nodes
    # there could split the job, so nothing is added and the code says why
    w, more = started_gang()
    for i in range(2):
        w.pod_item(f"default/train-run{i}-0")["spec"]["nodeName"] = _unknown_region_node(w, f"onprem-{i}")

    result = w.plan()

    assert result.scale_up == ()  # before: cpu-east grew for them
    assert {pending_codes(result)[p] for p in more} == {codes.GANG_HOME_UNKNOWN}
    assert (
        "its gang default/train runs only on nodes whose region is unknown"
        in pending_reasons(result)[more[0]]
    )


def test_a_member_of_known_region_keeps_the_rest_there_beside_one_of_unknown_region() -> None:
    w, more = started_gang()
    w.pod_item("default/train-run1-0")["spec"]["nodeName"] = _unknown_region_node(w, "onprem-1")

    # one takes the room the moved member left on a us-west-2 node, the other a new node there
    assert scale_up(w.plan()) == {"cpu-west": (2, 3, more[1:])}


def test_the_rest_of_a_gang_whose_members_run_on_nodes_of_unknown_region_only_is_placed_in_no_region() -> (
    None
):
    w, more = two_regions()
    for i in range(2):
        w.pod_item(f"default/train-run{i}-0")["spec"]["nodeName"] = _unknown_region_node(w, f"onprem-{i}")

    result = w.plan()

    assert result.scale_up == ()  # before: cpu-east grew for them
    assert {pending_codes(result)[p] for p in more} == {codes.GANG_HOME_UNKNOWN}
    assert "its running members are only on nodes whose region is unknown" in pending_reasons(result)[more[0]]


def test_the_rest_of_a_gang_whose_members_run_on_nodes_of_unknown_region_takes_free_room_there() -> None:
    """Its members run on two nodes of unknown region, and two more such nodes are empty: the rest take
    that free room (no new node anywhere), as a started gang's members do and as kube-scheduler binds
    them. Before, the gang got no place at all (gang-home-unknown) however much room its nodes had,
    though its members could wait there forever."""
    w, more = two_regions()
    for i in range(2):
        w.pod_item(f"default/train-run{i}-0")["spec"]["nodeName"] = _unknown_region_node(w, f"onprem-{i}")
    free = [_unknown_region_node(w, f"onprem-{i}") for i in (2, 3)]

    result = w.plan()

    assert result.scale_up == ()
    assert {p.pod: p.node for p in result.placements if p.pod in more} == dict(zip(more, free, strict=True))
    assert {pending_codes(result)[p] for p in more} == {codes.FITS_FREE_ROOM}


def test_members_of_a_started_gang_on_nodes_of_unknown_region_take_free_room_there() -> None:
    w, more = started_gang()
    for i in range(2):
        w.pod_item(f"default/train-run{i}-0")["spec"]["nodeName"] = _unknown_region_node(w, f"onprem-{i}")
    free = [_unknown_region_node(w, f"onprem-{i}") for i in (2, 3)]

    result = w.plan()

    assert result.scale_up == ()
    assert {p.pod: p.node for p in result.placements if p.pod in more} == dict(zip(more, free, strict=True))


def test_in_a_cluster_of_one_region_a_gang_with_running_members_at_max_size_says_max_size() -> None:
    """gang-home-full says the gang is kept to the region(s) it runs in; with one region nothing keeps
    it anywhere, so its members held by MaxSize say max-size, as a started gang's do
    (:func:`home_regions` is empty there), and GangPodsHeldAtHome does not count them. Before, the
    gang that had not started said gang-home-full."""
    w = World(regions=("us-east-1",))
    nodes = w.group("cpu-east", "m5.2xlarge", nodes=2, max_size=2)
    w.pod_group(COSCHED, "train", spec={"minMember": 4})
    labels = {"scheduling.x-k8s.io/pod-group": "train"}
    for i, node in enumerate(nodes):
        w.pods(f"train-run{i}", 1, node_name=node, labels=labels, **BIG)
    more = w.pods("train-more", 2, labels=labels, **BIG)

    result = w.plan()

    assert result.scale_up == ()
    assert {pending_codes(result)[p] for p in more} == {codes.MAX_SIZE}


def test_the_rest_of_a_gang_over_two_full_regions_wait_with_a_reason_that_does_not_deny_the_split() -> None:
    """The gang already runs over two regions: its reason names them, most members first, and says it is
    not split further (before: "a gang is not split over regions or zones", of a gang that is)."""
    w, more = three_regions(minimum=5, eu_max=2)  # not started: three of five run
    w.groups["cpu-west"]["MaxSize"] = 1

    result = w.plan()

    assert result.scale_up == ()
    assert {pending_codes(result)[p] for p in more} == {codes.GANG_HOME_FULL}
    reason = pending_reasons(result)[more[0]]
    assert (
        "its running members are in eu-west-1, us-west-2 (most members first), so the rest are placed there "
        "only (a gang is not split further); in eu-west-1: "
    ) in reason, reason


def test_members_held_by_a_gang_on_nodes_of_unknown_region_are_counted_and_alarmed() -> None:
    """Nothing ends their wait but room on such nodes, a member in a known region, or none running; so
    they must show: GangPodsHeldAtHome counts them, and pending-too-long reads their wait (they are not
    held by a limit, whose own alarm is held-by-limits): the runbook names the code under that alarm."""
    w, more = started_gang()
    for i in range(2):
        w.pod_item(f"default/train-run{i}-0")["spec"]["nodeName"] = _unknown_region_node(w, f"onprem-{i}")
    cluster, groups, cfg, _ = w.parsed()
    result = w.plan()
    assert {pending_codes(result)[p] for p in more} == {codes.GANG_HOME_UNKNOWN}

    later = Snapshot.build(cluster, groups, taken_at=cluster.taken_at + timedelta(hours=2))
    waited = later.oldest_pending_seconds(cfg.expendable_priority_cutoff)
    assert waited >= 2 * 3600
    assert oldest_unheld_pending_seconds(result, later, cfg) == waited
    assert summarize(result, "us-east-1").gang_home_held == len(more)
