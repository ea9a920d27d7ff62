"""One region's failed Auto Scaling read must not stop scaling in the others.

observe reads every region's groups in parallel. A region whose read failed (throttled, unavailable,
refused) failed the whole observation: nothing was stored, so a throttled or broken secondary region
stopped every scale-up and scale-down of the primary one, the opposite of spilling over. Now the
region is marked unread in the snapshot (since when, and why), its groups are carried from the last
snapshot that read them, flagged, while that read is younger than ``max_node_provision_minutes``
(after which a launch counts as failed anyway), and the planner neither grows nor shrinks a carried
group while counting what it still launches. Only when every region fails does the observation fail.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fakes import FakeCloud, FakeCluster, FakeSnapshots
from plan_world import NOW, World, kept_reasons, pending_codes, pending_reasons, scale_up

from spillway.errors import AwsThrottled, AwsUnavailable, ObservationFailed
from spillway.local import objects as o
from spillway.model.cluster import ClusterSnapshot, RegionUnread
from spillway.model.fleet import FleetInstance
from spillway.model.nodegroup import NodeGroup
from spillway.model.schedule import ScheduledFloor
from spillway.model.snapshot import Snapshot, fingerprint
from spillway.model.state import State
from spillway.observe import ObserveConfig, observe_once, run_observe
from spillway.planner import codes, plan
from spillway.planner.types import REGION_UNREAD

T0 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
CLUSTER = "ml"
EAST, WEST = "us-east-1", "us-west-2"
CONFIG = ObserveConfig(cluster=CLUSTER, interval_seconds=20, heartbeat_minutes=5, carry_unread_minutes=15)
THROTTLED = "DescribeAutoScalingGroups(us-west-2): Throttling: Rate exceeded"


class Failing(FakeCloud):
    """A cloud whose group read fails in ``failing`` regions, as the adapter raises it."""

    def __init__(self, *failing: str) -> None:
        super().__init__(regions=(EAST, WEST), cluster=CLUSTER)
        self.failing = set(failing)
        self.node_groups_by_region = {
            EAST: [NodeGroup("east", EAST, 0, 10, 1, "m5.2xlarge", None, instance_ids=("i-0e",))],
            WEST: [NodeGroup("west", WEST, 0, 10, 3, "m5.2xlarge", None, instance_ids=("i-0w",))],
        }

    def node_groups_in(self, region: str, reserve: Any, now: datetime | None = None) -> list[NodeGroup]:
        if region in self.failing:
            raise AwsThrottled(f"DescribeAutoScalingGroups({region}): Throttling: Rate exceeded")
        return super().node_groups_in(region, reserve, now)


class Clock:
    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def kube() -> FakeCluster:
    return FakeCluster([o.node("ip-10-0-1-10.ec2.internal", instance="i-0e", zone="us-east-1a")], [])


def previous(store: FakeSnapshots, taken_at: datetime, unread: tuple[RegionUnread, ...] = ()) -> Snapshot:
    """A stored snapshot that read both regions at ``taken_at`` (or carried what ``unread`` names)."""
    cloud = Failing()
    snap = observe_once(kube(), cloud, CONFIG, lambda: taken_at)
    if unread:
        snap = Snapshot.build(replace(snap.cluster, regions_unread=unread), snap.groups, taken_at)
    store.add(snap)
    return snap


def observe(cloud: FakeCloud, store: FakeSnapshots, now: datetime = T0) -> Snapshot:
    clock = Clock(now)
    run = run_observe(kube(), cloud, store, CONFIG, clock, clock.sleep, now)  # one observation
    (observation,) = run.observations
    return observation.snapshot


# --- observe -------------------------------------------------------------------------------------------


def test_a_region_whose_groups_cannot_be_read_is_stored_unread_with_its_groups_carried() -> None:
    store = FakeSnapshots()
    before = previous(store, T0 - timedelta(minutes=2))

    snap = observe(Failing(WEST), store)

    assert store.items[(CLUSTER, max(k for _, k in store.items))] is snap  # stored, not failed
    (unread,) = snap.cluster.regions_unread
    assert (unread.region, unread.since) == (WEST, T0)
    assert unread.error == f"AwsThrottled: {THROTTLED}"
    groups = {g.name: g for g in snap.groups}
    assert groups["east"].read_at is None  # read now
    assert groups["west"].read_at == before.taken_at  # carried, flagged with when it was read
    assert groups["west"].desired == 3 and groups["west"].instance_ids == ("i-0w",)


def test_the_unread_time_and_the_read_time_are_carried_from_snapshot_to_snapshot() -> None:
    store = FakeSnapshots()
    first = T0 - timedelta(minutes=1)
    previous(store, T0 - timedelta(minutes=10))  # the last read of us-west-2
    carried = observe(Failing(WEST), store, first)
    assert carried.cluster.regions_unread[0].since == first

    snap = observe(Failing(WEST), store)

    assert snap.cluster.regions_unread[0].since == first
    assert {g.name: g.read_at for g in snap.groups} == {"east": None, "west": T0 - timedelta(minutes=10)}


def test_a_regions_groups_last_read_longer_ago_than_the_bound_are_left_out() -> None:
    store = FakeSnapshots()
    previous(store, T0 - timedelta(minutes=15))  # max_node_provision_minutes ago: a launch failed by now

    snap = observe(Failing(WEST), store)

    assert [g.name for g in snap.groups] == ["east"]
    assert [u.region for u in snap.cluster.regions_unread] == [WEST]


def test_a_group_is_carried_for_its_own_node_provision_time() -> None:
    """A group's ``maxnodeprovisiontime`` autoscaling-options tag is its max_node_provision_minutes: the
    plans count a launch of it as coming that long. Carried for the configuration's 15 minutes only, a
    GPU group tagged 30 was left out while its launch still booted, within its time, and the pods it was
    raised for were launched for in another region; one tagged 5 was carried, its raise counted, long
    after a launch of it had failed. Each is now carried for its own time."""
    store = FakeSnapshots()
    cloud = Failing()
    west = cloud.node_groups_by_region[WEST][0]
    cloud.node_groups_by_region[WEST] = [
        replace(west, options=(("max_node_provision_minutes", 30.0),)),
        replace(west, name="west-quick", options=(("max_node_provision_minutes", 5.0),)),
        replace(west, name="west-plain"),
    ]
    store.add(observe_once(kube(), cloud, CONFIG, lambda: T0 - timedelta(minutes=20)))
    cloud.failing = {WEST}

    snap = observe(cloud, store)

    assert [g.name for g in snap.groups] == ["east", "west"]  # 20 minutes after the read: only the 30's

    store = FakeSnapshots()
    cloud.failing = set()
    store.add(observe_once(kube(), cloud, CONFIG, lambda: T0 - timedelta(minutes=6)))
    cloud.failing = {WEST}

    assert [g.name for g in observe(cloud, store).groups] == ["east", "west", "west-plain"]


def test_a_region_unread_with_nothing_stored_before_carries_no_group() -> None:
    snap = observe(Failing(WEST), FakeSnapshots())

    assert [g.name for g in snap.groups] == ["east"]
    assert [u.region for u in snap.cluster.regions_unread] == [WEST]


def test_every_region_failing_still_fails_the_observation_and_stores_nothing() -> None:
    store = FakeSnapshots()
    previous(store, T0 - timedelta(minutes=1))
    stored = dict(store.items)

    with pytest.raises(ObservationFailed) as caught:
        observe(Failing(EAST, WEST), store)

    assert isinstance(caught.value.__cause__, AwsThrottled)
    assert store.items == stored


def test_a_region_read_again_is_read_and_no_longer_unread() -> None:
    store = FakeSnapshots()
    previous(store, T0 - timedelta(minutes=3), (RegionUnread(WEST, T0 - timedelta(minutes=5), "x"),))

    snap = observe(Failing(), store)

    assert snap.cluster.regions_unread == ()
    assert all(g.read_at is None for g in snap.groups)


def test_the_gang_instances_of_an_unread_region_are_left_out_of_the_sweep() -> None:
    """Its groups' members are a carried, older list: an instance attached since would look like an
    orphan to the gang sweep, which would terminate it."""
    cloud = Failing(WEST)
    cloud.fleet_instances = lambda region, ids=(): [  # type: ignore[method-assign]
        FleetInstance("i-0f", region, T0, "running", "a1", "train")
    ]
    snap = observe(cloud, FakeSnapshots())

    assert [i.region for i in snap.cluster.fleet_instances] == [EAST]
    assert snap.cluster.fleet_unread == (WEST,)


def test_a_kubernetes_failure_still_fails_the_observation() -> None:
    failing = kube()
    failing.fail("iter_nodes", AwsUnavailable("x"))  # any error: the Kubernetes side is unchanged
    clock = Clock()
    with pytest.raises(ObservationFailed):
        run_observe(failing, Failing(WEST), FakeSnapshots(), CONFIG, clock, clock.sleep, T0)


def test_the_unread_marks_survive_the_store_and_older_snapshots_read_as_all_read() -> None:
    store = FakeSnapshots()
    previous(store, T0 - timedelta(minutes=2))
    snap = observe(Failing(WEST), store)

    back = Snapshot.from_dict(json.loads("".join(snap.iter_json())))  # as the store writes it

    assert back.cluster.regions_unread == snap.cluster.regions_unread
    assert [g.read_at for g in back.groups] == [g.read_at for g in snap.groups]
    old = snap.to_dict()
    old["cluster"].pop("regions_unread")
    for g in old["groups"]:
        g.pop("read_at", None)
    older = Snapshot.from_dict(old)
    assert older.cluster.regions_unread == () and all(g.read_at is None for g in older.groups)


def test_an_unread_region_changes_the_fingerprint() -> None:
    store = FakeSnapshots()
    read = previous(store, T0 - timedelta(minutes=2))
    snap = observe(Failing(WEST), store)

    assert snap.fingerprint != read.fingerprint


def test_an_unread_mark_alone_changes_the_fingerprint_and_its_words_do_not() -> None:
    """A region with no group to carry (none managed there, or none read within the bound) looks the
    same read and unread but for the mark: the plan must see it (RegionUnread); the error's words and
    since when change no decision."""
    snap = observe(Failing(), FakeSnapshots())
    unread = replace(snap.cluster, regions_unread=(RegionUnread(WEST, T0, "AwsThrottled: a"),))
    again = replace(
        snap.cluster, regions_unread=(RegionUnread(WEST, T0 + timedelta(minutes=1), "AwsError: b"),)
    )

    assert fingerprint(unread, snap.groups) != fingerprint(snap.cluster, snap.groups)
    assert fingerprint(again, snap.groups) == fingerprint(unread, snap.groups)


# --- the planner -----------------------------------------------------------------------------------------


def world() -> World:
    """Primary us-east-1 (group ``east``), overflow us-west-2 (group ``west``), both m5.2xlarge."""
    w = World(cluster=CLUSTER, regions=(EAST, WEST))
    w.group("east", "m5.2xlarge", region=EAST, nodes=1)
    w.group("west", "m5.2xlarge", region=WEST, nodes=1)
    for node in list(w.items):
        w.items.append(o.pod(f"busy-{node['metadata']['name']}", "default", cpu="7", memory="1Gi",
                             node_name=node["metadata"]["name"], phase="Running"))  # fmt: skip
    return w


def unread_plan(
    w: World,
    region: str,
    *,
    carried: bool = True,
    read_at: datetime = NOW - timedelta(minutes=4),
    **config: Any,
) -> Any:
    """Plan with ``region`` unread since 3 minutes ago: its groups carried (read at ``read_at``, 4 minutes
    ago unless given) or left out."""
    snapshot, groups, cfg, state = w.parsed(**config)
    mark = RegionUnread(
        region, NOW - timedelta(minutes=3), f"AwsThrottled: DescribeAutoScalingGroups({region})"
    )
    snapshot = replace(snapshot, regions_unread=(mark,))
    groups = [
        replace(g, read_at=read_at) if g.region == region else g
        for g in groups
        if carried or g.region != region
    ]
    return plan(snapshot, groups, cfg, state, NOW)


def test_pods_spill_over_to_the_healthy_region_when_the_primary_is_unread() -> None:
    w = world()
    pods = w.pods("web", 2, cpu="3")

    result = unread_plan(w, EAST)

    assert set(scale_up(result)) == {"west"}
    assert sorted(scale_up(result)["west"][2]) == sorted(pods)


def test_an_unread_group_is_never_scaled_up_and_the_pod_says_why() -> None:
    w = world()
    (pod,) = w.pods("only-east", 1, cpu="3", node_selector={"topology.kubernetes.io/region": EAST})

    result = unread_plan(w, EAST)

    assert scale_up(result) == {}
    assert pending_codes(result)[pod] == codes.REGION_UNREAD
    assert "us-east-1" in pending_reasons(result)[pod] and "not read" in pending_reasons(result)[pod]


def test_capacity_an_unread_group_launches_holds_its_pods_and_nothing_launches_twice() -> None:
    w = world()
    w.add_instance("east", register=False)  # desired 2, one instance booting: one node coming
    (pod,) = w.pods("web", 1, cpu="3")

    result = unread_plan(w, EAST)

    assert scale_up(result) == {}
    assert pending_codes(result)[pod] == codes.FITS_LAUNCHING


def test_a_launch_of_an_unread_group_no_node_joined_is_not_removed_nor_backed_off_nor_counted() -> None:
    """Past max_node_provision_minutes such a launch is no capacity coming, as for a group read; but
    the plan removes nothing and backs nothing off on a carried picture."""
    w = world()
    iid = w.add_instance("east", register=False)
    w.state["joining"] = {iid: {"since": (NOW - timedelta(minutes=20)).isoformat()}}
    (pod,) = w.pods("web", 1, cpu="3")
    read = w.plan()
    assert [u.instance_id for u in read.unregistered] == [iid]  # read, it is removed

    result = unread_plan(w, EAST)

    assert result.unregistered == ()
    assert "us-east-1/east" not in result.state.groups and "east" not in result.state.groups
    assert scale_up(result)["west"][2] == [pod]  # not held by the launch that never joined


def test_an_idle_node_of_an_unread_group_is_never_drained() -> None:
    w = world()
    node = w.group("spare", "m5.xlarge", region=EAST, nodes=1)[0]
    w.idle_since(node, 600)
    assert [d.node for d in w.plan().drain] == [node]  # read, it would go

    result = unread_plan(w, EAST)

    assert result.drain == ()
    kept = {k.node: k for k in result.kept}[node]
    assert kept.code == codes.REGION_UNREAD
    assert "us-east-1" in kept.reason


def test_a_node_of_an_unread_region_whose_group_is_left_out_is_never_drained() -> None:
    w = world()
    node = w.group("spare", "m5.xlarge", region=EAST, nodes=1)[0]
    w.idle_since(node, 600)

    result = unread_plan(w, EAST, carried=False)

    assert result.drain == ()
    assert {k.node: k.code for k in result.kept}[node] == codes.REGION_UNREAD  # not just "unmanaged"
    assert "us-east-1 were not read" in kept_reasons(result)[node]


def test_the_plan_names_the_unread_region_as_a_problem() -> None:
    result = unread_plan(world(), WEST)

    (problem,) = [p for p in result.problems if p.kind == REGION_UNREAD]
    assert problem.object == f"region {WEST}"
    assert "AwsThrottled" in problem.reason and "not scaled" in problem.reason


def test_a_snapshot_without_unread_regions_plans_as_before() -> None:
    w = world()
    pods = w.pods("web", 2, cpu="3")
    snapshot, groups, cfg, state = w.parsed()
    result = plan(snapshot, groups, cfg, state, NOW)

    assert set(scale_up(result)) == {"east"} and sorted(scale_up(result)["east"][2]) == sorted(pods)
    assert not [p for p in result.problems if p.kind == REGION_UNREAD]
    assert isinstance(snapshot, ClusterSnapshot) and isinstance(state, State)


def test_no_node_of_an_unread_group_is_drained_ahead_of_a_scheduled_action() -> None:
    """A scheduled action lowering the group in five minutes: read, the plan drains two nodes ahead of
    it; carried, Auto Scaling's own run is all that happens (the plan cannot tell it has not run)."""
    w = World(cluster=CLUSTER, regions=(EAST, WEST))
    nodes = w.group("east", "m5.2xlarge", region=EAST, nodes=4)
    for node in nodes:
        w.idle_since(node, 2)
    evening = ScheduledFloor("evening", desired=2, start=NOW + timedelta(minutes=5))
    snapshot, groups, cfg, state = w.parsed()
    read = [replace(g, scheduled=(evening,)) for g in groups]
    assert len(plan(snapshot, read, cfg, state, NOW).drain) == 2

    carried = [replace(g, read_at=NOW - timedelta(minutes=4)) for g in read]
    result = plan(snapshot, carried, cfg, state, NOW)

    assert result.drain == () and result.shrinks == ()
    assert {k.code for k in result.kept} == {codes.REGION_UNREAD}


# --- the observe function ---------------------------------------------------------------------------------


def test_the_observe_function_counts_the_unread_regions_and_names_them(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from test_observe_gang_reads import metric_values, run_handler

    caplog.set_level(logging.INFO)
    docs = run_handler(monkeypatch, Failing(WEST))

    assert metric_values(docs, "RegionReadsFailed") == [1]
    assert metric_values(docs, "SnapshotsWritten") == [1]
    observed = [r for r in caplog.records if r.getMessage() == "observed"]
    assert [getattr(r, "region_reads_failed", None) for r in observed] == [[WEST]]
    failed = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any(WEST in m and "Rate exceeded" in m for m in failed), failed


def test_an_observation_that_read_every_region_counts_zero_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    """0, not nothing: the alarm takes the least count of each period."""
    from test_observe_gang_reads import metric_values, run_handler

    assert metric_values(run_handler(monkeypatch, Failing()), "RegionReadsFailed") == [0]


def test_a_raise_planned_after_the_carried_read_holds_its_pods_past_the_claim_window() -> None:
    """The plan of the last snapshot that read us-east-1 raised east (desired 1 as read) to 2 for a pod;
    then the region's reads failed. A read group's snapshot shows the raise once it lands, and its
    launching node holds the pod until it joins (or max_node_provision_minutes pass); the carried read
    never can show it. The raise's entry ended with scale_up_claim_minutes (5), while the group is
    carried for 15: the pod got a second node in us-west-2 with the first still booting. Now a raise the
    carried read could not show counts while the group is carried."""
    w = world()
    (pod,) = w.pods("web", 1, cpu="3")
    raised = NOW - timedelta(minutes=6)
    w.state["raises"] = {
        "us-east-1/east": {"to": 2, "since": raised.isoformat(), "group": "east", "region": EAST}
    }

    result = unread_plan(w, EAST, read_at=raised - timedelta(seconds=30))

    assert scale_up(result) == {}
    assert pending_codes(result)[pod] == codes.FITS_LAUNCHING
    assert result.state.raises["us-east-1/east"].to == 2  # kept while the group is carried
    # one the read saw past its window (it never landed) ends as for a group read: the pod goes west
    stale = unread_plan(w, EAST, read_at=raised + timedelta(minutes=5))
    assert scale_up(stale)["west"][2] == [pod] and "us-east-1/east" not in stale.state.raises


def test_a_node_a_raise_after_the_carried_read_brought_is_no_longer_counted_as_coming() -> None:
    """east was read at desired 1; the plan after that read raised it to 2 (State.raises, counted while
    east is carried), and that node has joined and runs a pod. The carried read does not list its
    instance, so the Node is in no group, and east's launching capacity (desired 2 less 1 Ready node
    of it) still counted it as coming: a pod that needs a new node waited on it, launched nowhere,
    until the region was read again or the carry ended. A Ready node of the region in no group that
    registered after the read, of a type the group launches, is now that launch joined."""
    w = world()
    name = w.add_instance("east", register=True)  # the raise's node, joined a minute ago
    w.items.append(o.pod("busy-new", "default", cpu="7", memory="1Gi", node_name=name, phase="Running"))
    (pod,) = w.pods("web", 1, cpu="7")  # needs a new node
    iid = w.groups["east"]["Instances"][-1]["InstanceId"]
    w.groups["east"]["Instances"].pop()  # as the carried read (4 minutes ago) listed them: desired 1
    w.groups["east"]["DesiredCapacity"] -= 1
    raised = NOW - timedelta(minutes=3, seconds=50)
    w.state["raises"] = {
        "us-east-1/east": {"to": 2, "since": raised.isoformat(), "group": "east", "region": EAST}
    }

    result = unread_plan(w, EAST)

    assert scale_up(result) == {"west": (1, 2, [pod])}
    assert {k.node: k.code for k in result.kept}[name] == codes.REGION_UNREAD  # in no group: not drained
    assert iid not in {u.instance_id for u in result.unregistered}


def test_a_node_of_a_refused_group_is_not_taken_for_a_carried_groups_launch() -> None:
    """A Node of an instance some group lists (here one Spillway refuses to scale, carried too) is that
    group's, whatever its type and age: it is no launch of another carried group, whose raise still
    counts as coming and holds the pod it was made for."""
    w = world()
    (pod,) = w.pods("web", 1, cpu="3")
    w.group("odd", "m5.2xlarge", region=EAST, nodes=0)
    name = w.add_instance("odd", register=True)  # registered a minute ago, after the carried read
    w.items.append(o.pod("busy-odd", "default", cpu="7", memory="1Gi", node_name=name, phase="Running"))
    raised = NOW - timedelta(minutes=3, seconds=50)
    w.state["raises"] = {
        "us-east-1/east": {"to": 2, "since": raised.isoformat(), "group": "east", "region": EAST}
    }
    snapshot, groups, cfg, state = w.parsed()
    mark = RegionUnread(EAST, NOW - timedelta(minutes=3), "AwsThrottled: x")
    groups = [
        replace(
            g, read_at=NOW - timedelta(minutes=4), refusal="not scaled: a test" if g.name == "odd" else ""
        )
        if g.region == EAST
        else g
        for g in groups
    ]

    result = plan(replace(snapshot, regions_unread=(mark,)), groups, cfg, state, NOW)

    assert scale_up(result) == {}
    assert pending_codes(result)[pod] == codes.FITS_LAUNCHING


def _raised_east_and_a_stranger_joined(labels: dict[str, str], zone: str = "us-east-1a") -> tuple[World, str]:
    """east (us-east-1a only) was read at desired 1 and raised to 2 after that read for ``web-0``; a busy
    m5.2xlarge Node in no group, of us-east-1 (in ``zone``, with ``labels``), registered a minute ago."""
    w = world()
    (pod,) = w.pods("web", 1, cpu="3")
    iid = o.instance_id("stranger")
    name = o.node_name_for(iid)
    w.items.append(o.node(name, instance=iid, zone=zone, labels=labels, created=NOW - timedelta(minutes=1)))
    w.items.append(o.pod("busy-stranger", "default", cpu="7", memory="1Gi", node_name=name, phase="Running"))
    raised = NOW - timedelta(minutes=3, seconds=50)
    w.state["raises"] = {
        "us-east-1/east": {"to": 2, "since": raised.isoformat(), "group": "east", "region": EAST}
    }
    return w, pod


@pytest.mark.parametrize(
    ("labels", "zone"),
    [
        ({"karpenter.sh/nodepool": "default"}, "us-east-1a"),  # Karpenter's: it launches in no group
        ({"karpenter.sh/provisioner-name": "default"}, "us-east-1a"),  # ... before v1beta1
        ({"eks.amazonaws.com/nodegroup": "system"}, "us-east-1a"),  # another EKS managed node group's
        ({}, "us-east-1b"),  # a zone east does not launch in
    ],
    ids=["karpenter", "karpenter-provisioner", "other-eks-nodegroup", "other-zone"],
)
def test_a_node_no_launch_of_the_carried_group_can_be_is_not_taken_for_its_raise_joined(
    labels: dict[str, str], zone: str
) -> None:
    """The raise east's carried read cannot show still boots. A Node in no group of its region and type,
    registered since the read, was taken for that launch joined, so the pod it was raised for got a
    second node in us-west-2; but a Node Karpenter launched (``karpenter.sh/nodepool``, Karpenter's own
    label: it launches by CreateFleet, into no Auto Scaling group), one of another EKS managed node group
    (``eks.amazonaws.com/nodegroup``, which EKS puts on its nodes), or one in a zone the group does not
    span (Auto Scaling launches only in the group's AvailabilityZones) is no launch of east's."""
    w, pod = _raised_east_and_a_stranger_joined(labels, zone)

    result = unread_plan(w, EAST)

    assert scale_up(result) == {}
    assert pending_codes(result)[pod] == codes.FITS_LAUNCHING


def test_a_node_of_the_carried_eks_node_group_is_taken_for_its_launch_joined() -> None:
    """The same Node labelled as east's own EKS managed node group (its template carries the label) is
    east's launch joined: the pod needs a new node, which goes west."""
    w, pod = _raised_east_and_a_stranger_joined({"eks.amazonaws.com/nodegroup": "east-ng"})
    w.groups["east"]["Tags"].append(
        {
            "ResourceId": "east",
            "ResourceType": "auto-scaling-group",
            "Key": "k8s.io/cluster-autoscaler/node-template/label/eks.amazonaws.com/nodegroup",
            "Value": "east-ng",
            "PropagateAtLaunch": True,
        }
    )

    result = unread_plan(w, EAST)

    assert scale_up(result) == {"west": (1, 2, [pod])}


def _label_easts_nodes(w: World, labels: dict[str, str]) -> None:
    """Put ``labels`` on east's own Nodes (as eksctl's self-managed node groups' kubelets register them)."""
    own = {i["InstanceId"] for i in w.groups["east"]["Instances"]}
    for item in w.items:
        if item["kind"] == "Node" and item["spec"]["providerID"].rsplit("/", 1)[-1] in own:
            item["metadata"]["labels"].update(labels)


@pytest.mark.parametrize(("stranger", "east_launched"), [("legacy", False), ("east-ng", True)])
def test_a_node_whose_labels_contradict_the_carried_groups_is_not_taken_for_its_launch(
    stranger: str, east_launched: bool
) -> None:
    """east's Nodes all carry ``alpha.eksctl.io/nodegroup-name: east-ng`` (its template takes it from
    them). A Node in no group of its region, zone and type, registered since the read, labelled as
    another self-managed node group's (``legacy``: an Auto Scaling group Spillway does not manage, whose
    instances no read lists) was taken for east's raise joined, and the pod the raise was for got a
    second node in us-west-2 with the raise still booting. A Node labelled as east's own still is."""
    w, pod = _raised_east_and_a_stranger_joined({"alpha.eksctl.io/nodegroup-name": stranger})
    _label_easts_nodes(w, {"alpha.eksctl.io/nodegroup-name": "east-ng"})

    result = unread_plan(w, EAST)

    if east_launched:
        assert scale_up(result) == {"west": (1, 2, [pod])}
    else:
        assert scale_up(result) == {}
        assert pending_codes(result)[pod] == codes.FITS_LAUNCHING


def test_an_unsettled_raise_of_a_carried_group_holds_its_pods_only_for_the_claim_window() -> None:
    """As above, east raised to 2 six minutes ago after its read, then the region's reads failed; but the
    scale-up kept that raise unsettled (SetDesiredCapacity's answer lost, AWS may never have applied it:
    spillway.act.claims), which the state store reads from the ledger into ``RaiseState.unsettled``. A
    read group's snapshot would show within scale_up_claim_minutes (5) whether it landed; the carried read
    cannot, and the pod waited on a raise that may not exist for as long as east was carried (15). It is
    judged as a read group's now: past the claim window, the pod is launched for in us-west-2. Within it,
    the raise still holds the pod, so a raise that did land is not launched for twice meanwhile."""
    w = world()
    (pod,) = w.pods("web", 1, cpu="3")
    for minutes, held in ((6, False), (4, True)):
        raised = NOW - timedelta(minutes=minutes)
        _raised_unsettled(w, raised)

        result = unread_plan(w, EAST, read_at=raised - timedelta(seconds=30))

        _held_or_sent_west(result, pod, held)


def _raised_unsettled(w: World, raised: datetime) -> None:
    """east raised to 2 at ``raised``, the raise kept unsettled (``RaiseState.unsettled``)."""
    w.state["raises"] = {
        "us-east-1/east": {
            "to": 2, "since": raised.isoformat(), "group": "east", "region": EAST, "unsettled": True,
        }
    }  # fmt: skip


def _held_or_sent_west(result: Any, pod: str, held: bool) -> None:
    """``pod`` waits on east's raise (still counted), or goes to a new node in us-west-2 (the raise ended)."""
    if held:
        assert scale_up(result) == {}
        assert pending_codes(result)[pod] == codes.FITS_LAUNCHING
        assert result.state.raises["us-east-1/east"].to == 2
    else:
        assert scale_up(result)["west"][2] == [pod]
        assert "us-east-1/east" not in result.state.raises


@pytest.mark.parametrize(
    ("registered_after_raise", "held"),
    [(timedelta(minutes=2), True), (timedelta(seconds=-20), False), (None, False)],
    ids=["registered-since-the-raise", "registered-before-the-raise", "none-registered"],
)
def test_an_unsettled_raise_whose_node_registered_holds_its_pods_while_the_group_is_carried(
    registered_after_raise: timedelta | None, held: bool
) -> None:
    """east raised to 2 six minutes ago after its read, kept unsettled (its answer lost), the region unread
    since: past scale_up_claim_minutes its pod got a node in us-west-2 although the raise had landed and
    its Node, registered four minutes ago, was not Ready yet (a GPU node's driver, the CNI): two nodes for
    one pod. cluster-autoscaler counts such a Node (registered, not started) among a group's upcoming
    nodes, and a scale-up as upcoming until max-node-provision-time; a Node that may be the group's launch
    (in no group, of its region, zone and type), registered since the raise, says the raise landed: it
    counts as a settled one does, while east is carried. A Node registered before the raise says
    nothing of it, and with none the raise holds its pods only for the claim window, as before."""
    w = world()
    (pod,) = w.pods("web", 1, cpu="3")
    raised = NOW - timedelta(minutes=6)
    if registered_after_raise is not None:
        iid = o.instance_id("booting")
        w.items.append(
            o.node(o.node_name_for(iid), instance=iid, ready=False, created=raised + registered_after_raise)
        )
    _raised_unsettled(w, raised)

    result = unread_plan(w, EAST, read_at=raised - timedelta(seconds=30))

    _held_or_sent_west(result, pod, held)


def test_a_node_a_refused_group_lists_says_nothing_of_an_unsettled_raise() -> None:
    """As above, but the Node registered since the raise is of an instance a group Spillway refuses to
    manage (same region, zone and type) listed at the read: that group's node, not east's launch. It says
    nothing of east's raise, which holds its pod only for the claim window."""
    w = world()
    w.group("legacy", "m5.2xlarge", region=EAST)
    (pod,) = w.pods("web", 1, cpu="3")
    raised = NOW - timedelta(minutes=6)
    iid = o.instance_id("legacy-booting")
    w.items.append(
        o.node(o.node_name_for(iid), instance=iid, ready=False, created=raised + timedelta(minutes=2))
    )
    _raised_unsettled(w, raised)
    snapshot, groups, cfg, state = w.parsed()
    mark = RegionUnread(EAST, NOW - timedelta(minutes=3), f"AwsThrottled: DescribeAutoScalingGroups({EAST})")
    read = raised - timedelta(seconds=30)
    groups = [
        replace(g, read_at=read, refusal="not managed", instance_ids=(iid,))
        if g.name == "legacy"
        else replace(g, read_at=read)
        if g.region == EAST
        else g
        for g in groups
    ]

    result = plan(replace(snapshot, regions_unread=(mark,)), groups, cfg, state, NOW)

    _held_or_sent_west(result, pod, held=False)


@pytest.mark.parametrize(
    ("key", "read", "joined"),
    [
        # gpu-feature-discovery writes the time it labelled the node (unless --no-timestamp)
        ("nvidia.com/gfd.timestamp", "1764930000", "1765100000"),
        # node-feature-discovery's kernel, after the launch template's AMI moved on
        (
            "feature.node.kubernetes.io/kernel-version.full",
            "6.1.141-155.222.amzn2023.x86_64",
            "6.1.147-172.266.amzn2023.x86_64",
        ),
        ("eks.amazonaws.com/nodegroup-image", "ami-0aaa1111", "ami-0bbb2222"),  # the AMI a bootstrap labels
        ("node.kubernetes.io/lifecycle", "normal", "spot"),  # read from IMDS at boot: a mixed group's varies
    ],
    ids=["gfd-timestamp", "nfd-kernel", "nodegroup-image", "lifecycle"],
)
def test_a_label_that_describes_one_node_does_not_keep_the_groups_launch_from_being_taken(
    key: str, read: str, joined: str
) -> None:
    """east had one Node at its read, so its template holds every label of that Node but those naming
    one node; some of them describe what the node runs or how it was bought, not who launched it: a
    discovery agent's (GFD's labelling time, NFD's kernel), the AMI, the purchase option. east's raise's
    Node joined with another value of such a label: it is east's launch all the same, taken for it
    joined, as a Node carrying none of them is; it was refused, and east's raise stayed capacity coming
    beside the Node that holds it for as long as east is carried."""
    w, pod = _raised_east_and_a_stranger_joined({key: joined})
    _label_easts_nodes(w, {key: read})

    result = unread_plan(w, EAST)

    assert scale_up(result) == {"west": (1, 2, [pod])}
