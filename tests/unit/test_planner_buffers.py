"""Capacity by the clock: buffers (configured, and CapacityBuffers of the cluster) held as virtual pods,
and tenant limits with time windows; a simulated week walks across the 2026-03-29 DST change."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from plan_world import NOW, SHAPES, World, pending_codes, scale_up

from spillway.local import objects as o
from spillway.model.cluster import ClusterSnapshot
from spillway.model.k8s import SCALE_DOWN_DISABLED
from spillway.planner import ScalingPlan
from spillway.planner.buffers import buffer_classes
from spillway.planner.context import Context

BERLIN = ZoneInfo("Europe/Berlin")
BIG = {"cpu": "5", "memory": "4Gi"}  # one per m5.2xlarge (7910m)
WEEKDAYS = ["mon", "tue", "wed", "thu", "fri"]
SERVING = {
    "name": "serving",
    "pod": {"cpu": "5", "memory": "4Gi"},
    "replicas": 6,
    "windows": [{"days": WEEKDAYS, "start": "08:00", "end": "20:00", "timezone": "Europe/Berlin"}],
}
ALWAYS = {k: v for k, v in SERVING.items() if k != "windows"}  # no windows: always on


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def kept_codes(result: ScalingPlan) -> dict[str, str]:
    return {k.node: k.code for k in result.kept}


class Cluster:
    """A world whose plans are carried out at once: new nodes join Ready, drained nodes go away."""

    def __init__(self, max_size: int = 10) -> None:
        self.w = World()
        self.w.group("cpu", "m5.2xlarge", max_size=max_size)
        self.count = 0

    def nodes(self) -> list[str]:
        return sorted(i["metadata"]["name"] for i in self.w.items if i["kind"] == "Node")

    def step(self, now: datetime, **config: Any) -> ScalingPlan:
        result = self.w.plan(now, **config)
        group = self.w.groups["cpu"]
        for action in result.scale_up:
            for _ in range(action.to_size - action.from_size):
                self.count += 1
                iid = o.instance_id(f"cpu-new-{self.count}")
                group["Instances"].append(
                    {**group["Instances"][0], "InstanceId": iid} if group["Instances"] else _instance(iid)
                )
                group["DesiredCapacity"] += 1
                self.w.node_for("cpu", iid, "m5.2xlarge", created=now)
        for drain in result.drain:
            group["Instances"] = [i for i in group["Instances"] if i["InstanceId"] != drain.instance_id]
            group["DesiredCapacity"] -= 1
            self.w.items = [
                i for i in self.w.items if not (i["kind"] == "Node" and i["metadata"]["name"] == drain.node)
            ]
        self.w.state = result.state.to_wire()
        return result


def _instance(iid: str) -> dict[str, Any]:
    return {
        "InstanceId": iid,
        "InstanceType": "m5.2xlarge",
        "AvailabilityZone": "us-east-1a",
        "LifecycleState": "InService",
        "HealthStatus": "Healthy",
        "ProtectedFromScaleIn": False,
        "LaunchTemplate": {"LaunchTemplateId": "lt-0", "LaunchTemplateName": "lt", "Version": "1"},
    }


def test_a_weekday_berlin_buffer_opens_at_eight_keeps_its_nodes_and_lets_go_after_twenty_across_dst() -> None:
    cluster = Cluster()
    opened: list[datetime] = []  # local times the buffer opened nodes
    drained: list[datetime] = []
    sizes: dict[datetime, int] = {}
    now = at("2026-03-23T00:00:00+00:00")  # Monday; CET (UTC+1) until Sunday 29 March 01:00 UTC
    while now < at("2026-04-01T00:00:00+00:00"):
        result = cluster.step(now, buffers=[SERVING], max_scale_in_fraction=1.0)
        local = now.astimezone(BERLIN)
        if result.scale_up:
            opened.append(local)
            assert "capacity buffer config:serving (6 virtual pod(s))" in result.scale_up[0].reason
            assert result.scale_up[0].pods == ()  # virtual pods are no pending pods
        if result.drain:
            drained.append(local)
        assert not [p for p in result.pending if "buffer" in p.pod]
        sizes[local] = len(cluster.nodes())
        now += timedelta(minutes=30)

    # Opened at 08:00 local every weekday: 07:00 UTC in winter time, 06:00 UTC after the change.
    assert [t.strftime("%a %d %H:%M") for t in opened] == [
        "Mon 23 08:00", "Tue 24 08:00", "Wed 25 08:00", "Thu 26 08:00", "Fri 27 08:00",
        "Mon 30 08:00", "Tue 31 08:00",
    ]  # fmt: skip
    assert {t.astimezone(BERLIN).utcoffset() for t in opened[:5]} == {timedelta(hours=1)}
    assert {t.utcoffset() for t in opened[5:]} == {timedelta(hours=2)}
    # Kept all day (08:00 to 20:00: six nodes), released after 20:00 (idle 10 minutes, then drained).
    for local, size in sizes.items():
        if local.strftime("%a") in ("Sat", "Sun"):
            assert size == 0, local
        elif 8 <= local.hour < 20:
            assert size == 6, local
        elif local.hour >= 21 or local.hour < 8:
            assert size == 0, local
    assert {t.strftime("%H:%M") for t in drained} == {"20:30"}


def test_kept_nodes_holding_buffer_room_say_buffer_and_others_drain() -> None:
    w = World()
    nodes = w.group("cpu", "m5.2xlarge", nodes=3, max_size=10)
    for node in nodes:
        w.idle_since(node, 60)
    buffer = {**ALWAYS, "replicas": 2}

    result = w.plan(buffers=[buffer])

    assert not result.scale_up
    codes = kept_codes(result)
    holding = sorted(n for n, c in codes.items() if c == "buffer")
    assert len(holding) == 2
    assert [d.node for d in result.drain] == sorted(set(nodes) - set(holding))
    assert "holds room for capacity buffer config:serving (1 pod(s))" in next(
        k.reason for k in result.kept if k.node == holding[0]
    )
    # Without the buffer all three are idle and may go (the scale-in cap allows one per plan).
    assert not any(c == "buffer" for c in kept_codes(w.plan()).values())


def test_a_buffer_never_takes_room_from_a_real_pending_pod() -> None:
    w = World()
    nodes = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    # a real pod of the lowest priority that still scales (above the cutoff -10)
    pods = w.pods("web", 1, priority=-5, **BIG)
    buffer = {**ALWAYS, "replicas": 1, "pod": {"cpu": "5", "memory": "4Gi"}}

    result = w.plan(buffers=[buffer])

    assert pending_codes(result) == {pods[0]: "fits-free-room"}
    assert {p.pod: p.node for p in result.placements}[pods[0]] == nodes[0]
    # the buffer opens a node of its own rather than take the real pod's room
    assert scale_up(result)["cpu"][:2] == (1, 2)
    assert "capacity buffer config:serving" in result.scale_up[0].reason
    assert "1 pending pod(s)" not in result.scale_up[0].reason


def test_a_buffer_outside_its_window_is_nothing() -> None:
    w = World()
    nodes = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    w.idle_since(nodes[0], 60)
    night = at("2026-11-02T22:00:00+00:00")  # Monday 23:00 in Berlin

    result = w.plan(night, buffers=[SERVING])

    assert not result.scale_up
    assert [d.node for d in result.drain] == nodes
    day = w.plan(at("2026-11-02T09:00:00+00:00"), buffers=[SERVING])  # Monday 10:00 in Berlin
    assert scale_up(day)["cpu"][:2] == (1, 6)  # five more: one of the six fits on the idle node
    assert kept_codes(day)[nodes[0]] == "buffer"


def pod_template(w: World, namespace: str, template: str = "tpl") -> None:
    w.items.append(
        {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": template, "namespace": namespace},
            "template": {
                "spec": {
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}]
                }
            },
        }
    )


def capacity_buffer(w: World, name: str, namespace: str, spec: dict[str, Any]) -> None:
    w.items.append(
        {
            "apiVersion": "autoscaling.x-k8s.io/v1beta1",
            "kind": "CapacityBuffer",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }
    )


def test_a_capacity_buffer_of_the_cluster_opens_nodes_for_its_replicas() -> None:
    w = World()
    w.group("cpu", "m5.2xlarge", max_size=10)
    pod_template(w, "web")
    capacity_buffer(w, "web-headroom", "web", {"podTemplateRef": {"name": "tpl"}, "replicas": 5})

    result = w.plan()

    # 3 CPUs each: two per m5.2xlarge node, so five virtual pods need three nodes
    assert scale_up(result)["cpu"][:2] == (0, 3)
    assert "capacity buffer web/web-headroom (5 virtual pod(s))" in result.scale_up[0].reason
    assert result.pending == ()


def test_capacity_buffer_limits_cap_its_replicas_and_other_strategies_are_left_alone() -> None:
    w = World()
    w.group("cpu", "m5.2xlarge", max_size=10)
    pod_template(w, "web")
    capacity_buffer(
        w, "capped", "web", {"podTemplateRef": {"name": "tpl"}, "replicas": 10, "limits": {"cpu": "6"}}
    )
    capacity_buffer(
        w, "other", "web", {"podTemplateRef": {"name": "tpl"}, "replicas": 4,
                            "provisioningStrategy": "example.com/other"},
    )  # fmt: skip

    result = w.plan()

    assert scale_up(result)["cpu"][:2] == (0, 1)  # 6 CPUs: two chunks of 3, one node
    assert "web/capped (2 virtual pod(s))" in result.scale_up[0].reason
    assert "web/other" not in result.scale_up[0].reason


def test_a_night_training_limit_replaces_the_day_limit_across_dst() -> None:
    tenants = {
        "train": {
            "limits": {"nvidia.com/gpu": 16},
            "schedule": [
                {
                    "windows": [{"start": "20:00", "end": "07:00", "timezone": "Europe/Berlin"}],
                    "limits": {"nvidia.com/gpu": 64},
                }
            ],
        }
    }

    def opened(now: datetime) -> int:
        w = World()
        w.group("gpu", "p4d.24xlarge", max_size=20, gpu_taint=True)
        w.namespace("train")
        w.gpu_pods("job", 10, 8, namespace="train")
        result = w.plan(now, tenants=tenants)
        up = scale_up(result).get("gpu")
        return up[1] - up[0] if up else 0

    assert opened(at("2026-03-24T11:00:00+00:00")) == 2  # Tuesday 12:00 CET: 16 GPUs
    assert opened(at("2026-03-24T21:00:00+00:00")) == 8  # Tuesday 22:00 CET: 64 GPUs
    assert opened(at("2026-03-25T05:30:00+00:00")) == 8  # Wednesday 06:30 CET: still night
    assert opened(at("2026-03-25T06:30:00+00:00")) == 2  # Wednesday 07:30 CET: day again
    # 18:30 UTC is 19:30 in Berlin before the change (day), 20:30 after it (night).
    assert opened(at("2026-03-28T18:30:00+00:00")) == 2
    assert opened(at("2026-03-29T18:30:00+00:00")) == 8
    # 05:30 UTC is 06:30 before (night), 07:30 after (day).
    assert opened(at("2026-03-28T05:30:00+00:00")) == 8
    assert opened(at("2026-03-30T05:30:00+00:00")) == 2


def test_under_a_binding_limit_the_real_pod_gets_the_last_node_and_the_buffer_none() -> None:
    w = World()
    w.group("cpu", "m5.2xlarge", max_size=10)
    pods = w.pods("web", 1, priority=-5, **BIG)
    buffer = {**ALWAYS, "replicas": 2}

    result = w.plan(buffers=[buffer], max_nodes_total=1)

    assert scale_up(result)["cpu"] == (0, 1, pods)  # the one node the total allows is the real pod's
    assert "capacity buffer" not in result.scale_up[0].reason
    assert result.pending == ()  # the buffer's pods held by the limit are not reported


def test_a_capacity_buffer_in_a_limited_tenants_namespace_is_charged_to_the_tenant() -> None:
    w = World()
    w.group("cpu", "m5.2xlarge", max_size=10)
    w.namespace("web")
    pod_template(w, "web")
    capacity_buffer(w, "headroom", "web", {"podTemplateRef": {"name": "tpl"}, "replicas": 8})

    result = w.plan(tenants={"web": {"limits": {"nodes": 2}}})

    assert scale_up(result)["cpu"][:2] == (0, 2)  # 8 pods would need 4 nodes; the tenant may add 2
    assert result.scale_up[0].tenants == (("web", 2),)


def test_a_buffer_takes_the_spare_room_of_a_busy_node_before_an_idle_one() -> None:
    w = World()
    nodes = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10))
    for node in nodes:
        w.idle_since(node, 60)
    # the node that sorts last runs a small pod; the buffer fits beside it
    w.pods("api", 1, node_name=nodes[1], owner=("ReplicaSet", "api-1"), cpu="1")
    buffer = {**ALWAYS, "replicas": 1}

    result = w.plan(buffers=[buffer])

    assert kept_codes(result)[nodes[1]] == "workload"
    assert [d.node for d in result.drain] == [nodes[0]]  # the idle node goes: the buffer is held beside
    assert {p.pod: p.node for p in result.placements}["config:serving:buffer:0"] == nodes[1]


def test_a_buffer_larger_than_the_cluster_could_ever_hold_is_planned_as_what_fits() -> None:
    """A million chunks (replicas is an int32: up to two billion) in a group of at most ten nodes that
    hold two each: twenty virtual pods are planned, not a million (one per chunk, in every plan, until
    the Lambda ran out of memory). (Found by review.)"""
    w = World()
    w.group("cpu", "m5.2xlarge", max_size=10)
    pod_template(w, "web")
    capacity_buffer(w, "huge", "web", {"podTemplateRef": {"name": "tpl"}, "replicas": 10**6})

    snapshot, groups, config, state = w.parsed()
    (chunks,) = buffer_classes(Context(snapshot, groups, config, state, NOW))
    assert len(chunks.pods) == 20

    result = w.plan()

    assert scale_up(result)["cpu"][:2] == (0, 10)
    assert "capacity buffer web/huge (20 virtual pod(s))" in result.scale_up[0].reason


def _two_idle_nodes(home: str, other_region: str) -> tuple[World, str, str]:
    """An idle node of group ``home*`` (MinSize 1 in us-east-1 when ``other_region`` is us-east-1)
    and one of group ``other`` in ``other_region``, named so the second sorts first."""
    for i in range(50):
        w = World()
        (stays,) = w.group(f"{home}{i}", "m5.2xlarge", nodes=1, min_size=int(other_region == "us-east-1"))
        (goes,) = w.group("other", "m5.2xlarge", region=other_region, nodes=1)
        if goes < stays:
            for node in (stays, goes):
                w.idle_since(node, 60)
            return w, stays, goes
    raise AssertionError("no name order found")


def test_a_buffer_holds_room_on_the_idle_node_scale_down_keeps_anyway() -> None:
    """Two idle nodes: one its group's MinSize keeps, one that may go. The buffer's room goes on the
    first, and the second is drained; held on the second (first by name), it kept both. Likewise an
    idle node of the home region is used before one of an overflow region, which then goes home.
    (Found by review.)"""
    buffer = {"name": "serving", "pod": {"cpu": "4", "memory": "4Gi"}, "replicas": 1}
    for home, other_region in (("base", "us-east-1"), ("east", "us-west-2")):
        w, stays, goes = _two_idle_nodes(home, other_region)

        result = w.plan(buffers=[buffer], max_scale_in_fraction=1.0)

        assert [d.node for d in result.drain] == [goes]
        assert kept_codes(result)[stays] == "buffer"


def _instance_of(w: World, node: str) -> dict[str, Any]:
    iid = w.node(node)["spec"]["providerID"].rsplit("/", 1)[1]
    return next(i for i in w.groups["cpu"]["Instances"] if i["InstanceId"] == iid)


def _remove_from_group(w: World, node: str) -> None:
    w.groups["cpu"]["Instances"].remove(_instance_of(w, node))
    w.groups["cpu"]["DesiredCapacity"] -= 1
    w.items = [i for i in w.items if i["metadata"]["name"] != node]


@pytest.mark.parametrize("keep", ["unmanaged", "annotated", "protected"])
def test_a_buffer_holds_room_on_an_idle_node_scale_down_never_removes_before_one_it_would(keep: str) -> None:
    """An idle node Spillway never drains (not in a managed group; annotated scale-down-disabled; its
    instance protected from scale-in) stays whatever the buffer does, so the buffer's room goes there,
    and the idle node of a group above its MinSize is drained. Held on the latter (first by name, or
    of a group before no group), the buffer kept a node paid for only to hold room the other had."""
    buffer = {"name": "serving", "pod": {"cpu": "4", "memory": "4Gi"}, "replicas": 1}
    w = World(regions=("us-east-1",))
    goes, other = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10))
    if keep == "unmanaged":  # a node of no group, e.g. a static group without the discovery tags
        iid = o.instance_id("static-0")
        stays = o.node_name_for(iid)
        w.items.append(o.node(stays, instance=iid, **SHAPES["m5.2xlarge"]))
        _remove_from_group(w, other)
    else:
        stays = other  # sorts after the node that may go
        if keep == "annotated":
            w.node(stays)["metadata"]["annotations"][SCALE_DOWN_DISABLED] = "true"
        else:
            _instance_of(w, stays)["ProtectedFromScaleIn"] = True
    for node in (goes, stays):
        w.idle_since(node, 60)

    result = w.plan(buffers=[buffer], max_scale_in_fraction=1.0)

    assert {p.pod: p.node for p in result.placements}["config:serving:buffer:0"] == stays
    assert [d.node for d in result.drain] == [goes]
    assert not result.scale_up


def test_a_buffer_of_a_one_per_node_deployment_holds_room_on_as_many_nodes_as_chunks() -> None:
    """The Deployment's replicas repel each other per node; a buffer of three of its replicas holds a
    node each, as three more replicas would take. Its chunks ignored the template's anti-affinity and
    shared one node, where only one more replica could run. (Found by review.)"""
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    w = World(regions=("us-east-1",))
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    w.items.append(o.pod("web-0", "web", cpu="1", memory="1Gi", node_name=node, labels={"app": "web"},
                         affinity=anti, owner=("ReplicaSet", "web-1")))  # fmt: skip
    template = {"metadata": {"labels": {"app": "web"}}, "spec": {"affinity": anti, "containers": [
        {"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}  # fmt: skip
    w.items.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "web"},
                    "spec": {"replicas": 1, "template": template}})  # fmt: skip
    capacity_buffer(w, "headroom", "web", {"scalableRef": {"apiGroup": "apps", "kind": "Deployment",
                                                          "name": "web"}, "replicas": 3})  # fmt: skip

    result = w.plan()

    # the running replica's node takes none (its replica repels them): three new nodes, one chunk each
    assert scale_up(result)["cpu"][:2] == (1, 4)
    on = [p.node for p in result.placements if ":buffer:" in p.pod]
    assert len(on) == 3 and len(set(on)) == 3 and node not in on


def test_a_buffer_no_node_or_group_could_hold_plans_nothing_and_the_plan_goes_on() -> None:
    """A buffer of GPU chunks in a cluster of CPU nodes only: not one chunk fits any node or group, so
    the buffer is no class at all. It was a class of no pods, and sorting the demand read its first pod:
    every plan failed with an IndexError while the buffer was open. (Found by review: input fuzzing.)"""
    w = World()
    (node,) = w.group("cpu", "m5.2xlarge", nodes=1)
    gpu = {"name": "gpu", "pod": {"nvidia.com/gpu": "1"}, "replicas": 2}

    snapshot, groups, config, state = w.parsed(buffers=[gpu])
    assert buffer_classes(Context(snapshot, groups, config, state, NOW)) == []

    result = w.plan(buffers=[gpu])

    assert not result.scale_up
    assert pending_codes(result) == {}
    assert node in kept_codes(result)


def test_a_buffer_of_small_chunks_is_bounded_by_the_nodes_pod_slots() -> None:
    """Chunks so small that a node's pod slots bind first (an m5.2xlarge takes 58 pods, EKS's
    max-pods for it: 4 ENIs x (15 - 1) + 2; its CPU would take 791 chunks of 10m): the bound counts a
    chunk's slot in the same milli-units as the node's ``pods`` (1000 a pod), so a group of at most ten
    holds 580, not the 7910 its CPU alone would give (the slot counted as 1 of 58000)."""
    w = World()
    w.group("cpu", "m5.2xlarge", max_size=10)
    tiny = {"name": "tiny", "pod": {"cpu": "10m", "memory": "16Mi"}, "replicas": 10**6}

    snapshot, groups, config, state = w.parsed(buffers=[tiny])
    (chunks,) = buffer_classes(Context(snapshot, groups, config, state, NOW))
    assert len(chunks.pods) == 10 * 58

    result = w.plan(buffers=[tiny])

    assert scale_up(result)["cpu"][:2] == (0, 10)
    assert "(580 virtual pod(s))" in result.scale_up[0].reason


def _prioritised_template(w: World, namespace: str, priority: int) -> None:
    """A PodTemplate whose spec states ``priority``: the Priority admission plugin resolves a class only
    for Pods, so a template's fake pods carry exactly the priority it writes (none: 0)."""
    pod_template(w, namespace)
    w.items[-1]["template"]["spec"]["priority"] = priority


@pytest.mark.parametrize(("priority", "launched"), [(-11, 0), (-10, 3)])
def test_a_capacity_buffer_of_expendable_pods_launches_and_holds_nothing(
    priority: int, launched: int
) -> None:
    """cluster-autoscaler prepends its buffer pod injector to the default pod list processors, whose
    FilterOutExpendablePodListProcessor drops every pod of a priority below
    --expendable-pods-priority-cutoff (-10) before scale-up: a buffer of such fake pods opens no node
    and holds no room. At the cutoff itself it is served."""
    w = World()
    w.group("cpu", "m5.2xlarge", max_size=10)
    (idle,) = w.group("spare", "m5.2xlarge", nodes=1, max_size=1)
    _prioritised_template(w, "batch", priority)
    capacity_buffer(w, "scavenger", "batch", {"podTemplateRef": {"name": "tpl"}, "replicas": 8})

    result = w.plan()

    # two 3-CPU chunks per m5.2xlarge: the idle node holds two, the other six need three new nodes
    assert scale_up(result).get("cpu", (0, 0))[1] == launched
    assert (kept_codes(result).get(idle) == "buffer") == (launched > 0)
    assert any(":buffer:" in p.pod for p in result.placements) == (launched > 0)


def test_a_capacity_buffer_in_namespace_config_and_a_configured_buffer_of_its_name_are_two_buffers() -> None:
    """A namespace may be named ``config``: its CapacityBuffer ``serving`` and the configuration's
    buffer ``serving`` are two buffers, each holding its own chunks, not one key replacing the other."""
    w = World()
    w.group("cpu", "m5.2xlarge", max_size=10)
    pod_template(w, "config")  # 3 CPUs: two per node
    capacity_buffer(w, "serving", "config", {"podTemplateRef": {"name": "tpl"}, "replicas": 2})
    configured = {"name": "serving", "pod": {"cpu": "5", "memory": "4Gi"}, "replicas": 2}  # one per node

    snapshot, groups, config, state = w.parsed(buffers=[configured])
    classes = buffer_classes(Context(snapshot, groups, config, state, NOW))
    pods = [p for cls in classes for p in cls.pods]
    assert len(pods) == len(set(pods)) == 4

    result = w.plan(buffers=[configured])

    # the configured buffer's two 5-CPU chunks take a node each, leaving 2.9 CPUs: the CapacityBuffer's
    # two 3-CPU chunks need a node of their own
    assert scale_up(result)["cpu"][:2] == (0, 3)
    reason = result.scale_up[0].reason
    assert "capacity buffer config/serving (2 virtual pod(s))" in reason
    assert "capacity buffer config:serving (2 virtual pod(s))" in reason
    assert len({p.pod for p in result.placements if ":buffer:" in p.pod}) == 4


@pytest.mark.parametrize(("priority", "launched"), [(None, 3), (0, 0)])
def test_a_capacity_buffer_whose_template_sets_no_priority_is_never_expendable(
    priority: int | None, launched: int
) -> None:
    """cluster-autoscaler's expendable filter drops a pod only when its spec.priority is set and below
    --expendable-pods-priority-cutoff (core/utils FilterOutExpendableAndSplit: ``pod.Spec.Priority !=
    nil && ...``), and a buffer's fake pods are its PodTemplate copied (makeFakePods, GetPodFromTemplate),
    which admission never gave a priority. So with a cutoff above 0 a buffer whose template sets no
    priority is still served; one whose template writes 0 is not."""
    w = World()
    w.group("cpu", "m5.2xlarge", max_size=10)
    (idle,) = w.group("spare", "m5.2xlarge", nodes=1, max_size=1)
    if priority is None:
        pod_template(w, "batch")
        assert "priority" not in w.items[-1]["template"]["spec"]
    else:
        _prioritised_template(w, "batch", priority)
    capacity_buffer(w, "warm", "batch", {"podTemplateRef": {"name": "tpl"}, "replicas": 8})

    result = w.plan(expendable_priority_cutoff=1)

    assert scale_up(result).get("cpu", (0, 0))[1] == launched
    assert (kept_codes(result).get(idle) == "buffer") == (launched > 0)
    # the stored snapshot, which the plan function reads, keeps it so
    snapshot = w.parsed(expendable_priority_cutoff=1)[0]
    stored = ClusterSnapshot.from_dict(snapshot.to_dict())
    assert [b.expendable(1) for b in stored.buffers] == [launched == 0]
