"""A group's template learned from a node of its own outlives the node: a group at zero plans with what
its last node showed, as cluster-autoscaler's node info cache keeps it (spillway.model.nodecache),
until the entry expires, the group's type changes or the group is gone.

The worlds are built as `kubectl` and the AWS CLI print them and parsed as `spillway plan` parses them
(plan_world); the state goes from plan to plan through its wire form, as the state table stores it."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from plan_world import NOW, World, pending_codes, pending_reasons, scale_up

from spillway.errors import InputError
from spillway.inputs import load_state
from spillway.local import objects as o
from spillway.model.snapshot import Snapshot
from spillway.model.state import State
from spillway.planner import ScalingPlan, codes

MIB = 2**20 * 1000  # the planner's milli-units
GIB = 1024 * MIB
EPHEMERAL = 95551679124 * 1000  # what plan_world's nodes report (about 89Gi)
WEEK = timedelta(days=7)


def asks(world: World, pod: str, **requests: str) -> None:
    """Pod ``pod`` requests ``requests`` besides its cpu and memory (``ephemeral_storage``: ...)."""
    resources = world.pod_item(pod)["spec"]["containers"][0]["resources"]["requests"]
    resources.update({name.replace("_", "-"): value for name, value in requests.items()})


def world_with(nodes: int, *, instance_type: str = "m5.2xlarge", **group: Any) -> tuple[World, list[str]]:
    world = World()
    names = world.group("g", instance_type, nodes=nodes, **group)
    return world, names


def later(world: World, earlier: ScalingPlan) -> None:
    """``world`` plans on the state ``earlier`` left, as the state table hands it on."""
    world.state = json.loads(json.dumps(earlier.state.to_wire()))


def learned_from_a_node() -> tuple[ScalingPlan, str]:
    """A plan of the group with one Ready node, and that node."""
    world, (node,) = world_with(1)
    return world.plan(), node


# --- the loop the memory ends ---------------------------------------------------------------------------


def test_a_group_at_zero_refuses_a_pod_its_last_node_could_not_run_instead_of_launching_again() -> None:
    world, (node,) = world_with(1)
    (pod,) = world.pods("scratch", 1, cpu="1", memory="1Gi")
    asks(world, pod, ephemeral_storage="200Gi")  # more than the 89Gi the group's nodes have
    first = world.plan()
    # the node was drained as idle: the group is at zero, the pod still pending
    at_zero, _ = world_with(0)
    at_zero.pods("scratch", 1, cpu="1", memory="1Gi")
    asks(at_zero, pod, ephemeral_storage="200Gi")
    later(at_zero, first)

    second = at_zero.plan(NOW + timedelta(minutes=20))

    assert pending_codes(first)[pod] == codes.NO_GROUP_FITS
    assert first.state.templates["us-east-1/g"].node == node
    assert first.state.templates["us-east-1/g"].allocatable["ephemeral-storage"] == EPHEMERAL
    assert scale_up(second) == {}  # the estimate knows no ephemeral storage and would launch
    assert pending_codes(second)[pod] == codes.NO_GROUP_FITS
    reason = pending_reasons(second)[pod]
    assert "too little ephemeral-storage" in reason
    assert f"as {node} showed at 2026-11-02T12:00:00Z" in reason
    assert (
        second.state.templates["us-east-1/g"] == first.state.templates["us-east-1/g"]
    )  # kept, not relearned


def test_the_memory_of_a_real_node_lets_a_group_at_zero_run_a_pod_the_estimate_refuses() -> None:
    # the m5.2xlarge estimate is 29317Mi; its real node offered 30Gi
    first, node = learned_from_a_node()
    forgetful, _ = world_with(0)
    (pod,) = forgetful.pods("big", 1, cpu="1", memory="30000Mi")
    remembering, _ = world_with(0)
    remembering.pods("big", 1, cpu="1", memory="30000Mi")
    later(remembering, first)

    without = forgetful.plan(NOW + timedelta(hours=1))
    with_memory = remembering.plan(NOW + timedelta(hours=1))

    assert pending_codes(without)[pod] == codes.NO_GROUP_FITS
    assert scale_up(with_memory) == {"g": (0, 1, [pod])}
    assert f"a node's shape as {node} showed at 2026-11-02T12:00:00Z" in with_memory.scale_up[0].reason


def test_each_plan_with_a_node_relearns_the_entry() -> None:
    first, node = learned_from_a_node()
    world, _ = world_with(1)
    later(world, first)

    second = world.plan(NOW + timedelta(hours=3))

    assert first.state.templates["us-east-1/g"].learned_at == NOW
    assert second.state.templates["us-east-1/g"].learned_at == NOW + timedelta(hours=3)
    assert second.state.templates["us-east-1/g"].node == node


def test_a_group_whose_nodes_do_not_stand_for_it_uses_the_entry() -> None:
    """A node somebody else cordoned says nothing of the group: the last one that did still does."""
    first, node = learned_from_a_node()
    world, (cordoned,) = world_with(1)
    world.cordon(cordoned, by_spillway=False)
    (pod,) = world.pods("big", 1, cpu="1", memory="30000Mi")
    later(world, first)

    second = world.plan(NOW + timedelta(hours=1))

    assert scale_up(second) == {"g": (1, 2, [pod])}
    assert second.state.templates["us-east-1/g"].learned_at == NOW  # not relearned from the cordoned node
    assert second.state.templates["us-east-1/g"].node == node


# --- when the memory no longer holds ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("age", "config", "remembered"),
    [
        (WEEK - timedelta(minutes=1), {}, True),
        (WEEK, {}, False),  # a week by default
        (WEEK * 4, {"node_info_cache_minutes": 60 * 24 * 30}, True),
        (timedelta(minutes=1), {"node_info_cache_minutes": 0}, False),  # 0: nothing remembered
    ],
)
def test_an_entry_expires(age: timedelta, config: dict[str, Any], remembered: bool) -> None:
    first, _ = learned_from_a_node()
    world, _ = world_with(0)
    (pod,) = world.pods("big", 1, cpu="1", memory="30000Mi")
    later(world, first)

    result = world.plan(NOW + age, **config)

    assert (scale_up(result) == {"g": (0, 1, [pod])}) is remembered
    assert ("us-east-1/g" in result.state.templates) is remembered


def test_nothing_is_learned_with_the_memory_off() -> None:
    world, _ = world_with(1)

    assert world.plan(node_info_cache_minutes=0).state.templates == {}


def test_a_new_instance_type_forgets_the_old_nodes() -> None:
    # an m5.xlarge estimate fits no 200Gi scratch pod's group either way; the 89Gi m5.2xlarge node
    # must not refuse it for a group that now launches another type
    first, _ = learned_from_a_node()
    world, _ = world_with(0, instance_type="m5.xlarge")
    (pod,) = world.pods("scratch", 1, cpu="1", memory="1Gi")
    asks(world, pod, ephemeral_storage="200Gi")
    later(world, first)

    result = world.plan(NOW + timedelta(minutes=20))

    assert scale_up(result) == {"g": (0, 1, [pod])}  # the estimate's: ephemeral storage unknown
    assert result.state.templates == {}


def test_a_mixed_group_whose_overrides_changed_forgets_its_old_nodes() -> None:
    def mixed(nodes: int, *extra: str) -> World:
        world = World()
        world.group("g", "m5.xlarge", mixed=True, nodes=nodes)
        overrides = world.groups["g"]["MixedInstancesPolicy"]["LaunchTemplate"]["Overrides"]
        overrides.extend({"InstanceType": t} for t in extra)
        return world

    first = mixed(1, "m5.2xlarge").plan()
    same, changed = mixed(0, "m5.2xlarge"), mixed(0, "m5.2xlarge", "m5.4xlarge")
    for world in (same, changed):
        later(world, first)

    assert first.state.templates["us-east-1/g"].instance_types == ("m5.xlarge", "m5.2xlarge")
    assert "us-east-1/g" in same.plan(NOW + timedelta(hours=1)).state.templates
    assert changed.plan(NOW + timedelta(hours=1)).state.templates == {}


def test_a_resources_tag_still_wins_over_the_remembered_node() -> None:
    first, _ = learned_from_a_node()
    world, _ = world_with(0, resources={"ephemeral-storage": "300Gi"})
    (pod,) = world.pods("scratch", 1, cpu="1", memory="30000Mi")  # fits the node's 30Gi, not the estimate
    asks(world, pod, ephemeral_storage="200Gi")  # fits the tag's 300Gi, not the node's 89Gi
    later(world, first)

    result = world.plan(NOW + timedelta(hours=1))

    assert scale_up(result) == {"g": (0, 1, [pod])}


def test_the_entry_of_a_group_gone_is_dropped() -> None:
    first, _ = learned_from_a_node()
    world = World()
    world.group("other", "m5.2xlarge")
    later(world, first)

    assert world.plan(NOW + timedelta(minutes=5)).state.templates == {}


# --- the state's wire form ------------------------------------------------------------------------------


def test_the_entry_round_trips_through_the_state_wire_form() -> None:
    first, node = learned_from_a_node()
    wire = json.loads(json.dumps(first.state.to_wire()))

    entry = wire["templates"]["us-east-1/g"]
    assert entry["node"] == node and entry["learned_at"] == "2026-11-02T12:00:00Z"
    assert entry["instance_type"] == "m5.2xlarge" and entry["region"] == "us-east-1"
    assert entry["allocatable"]["memory"] == 30 * GIB
    assert entry["capacity"]["memory"] == 31 * GIB
    assert entry["labels"]["node.kubernetes.io/instance-type"] == "m5.2xlarge"
    assert "kubernetes.io/hostname" not in entry["labels"]
    assert State.model_validate(wire) == first.state


def test_a_state_stored_before_templates_loads_and_writes_as_before() -> None:
    old = {"nodes": {"n1": {"idle_since": "2026-11-02T11:00:00Z"}}, "groups": {}}

    state = State.model_validate(old)

    assert state.templates == {}
    assert state.to_wire() == old


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda e: e["allocatable"].pop("cpu"), "templates.us-east-1/g.allocatable"),
        (lambda e: e["allocatable"].update(memory="30Gi"), "templates.us-east-1/g.allocatable.memory"),
        (lambda e: e.pop("learned_at"), "templates.us-east-1/g.learned_at"),
        (lambda e: e.update(instance_type=""), "templates.us-east-1/g.instance_type"),
    ],
)
def test_a_bad_entry_is_refused_naming_its_field(change: Any, field: str, tmp_path: Path) -> None:
    first, _ = learned_from_a_node()
    wire = first.state.to_wire()
    change(wire["templates"]["us-east-1/g"])
    path = tmp_path / "state.json"
    path.write_text(json.dumps(wire))

    with pytest.raises(InputError) as raised:
        load_state(path)

    assert field in str(raised.value)


def test_a_naive_learned_at_reads_as_utc() -> None:
    first, _ = learned_from_a_node()
    wire = first.state.to_wire()
    wire["templates"]["us-east-1/g"]["learned_at"] = "2026-11-02T12:00:00"
    world, _ = world_with(0)
    (pod,) = world.pods("big", 1, cpu="1", memory="30000Mi")
    world.state = wire

    assert scale_up(world.plan(NOW + timedelta(days=6))) == {"g": (0, 1, [pod])}
    assert State.model_validate(wire).templates["us-east-1/g"].learned_at == datetime(2026, 11, 2, 12)


# --- what the remembered node was launched from ---------------------------------------------------------


def launching(world: World, version: str) -> str:
    """Group ``g`` of ``world`` names its launch template's version ``version`` (its instances were
    launched with it); returns the template's id."""
    group = world.groups["g"]
    group["LaunchTemplate"]["Version"] = version
    for instance in group["Instances"]:
        instance["LaunchTemplate"]["Version"] = version
    return str(group["LaunchTemplate"]["LaunchTemplateId"])


def learned_at_version(version: str) -> tuple[ScalingPlan, str, str]:
    """A plan of the group with one Ready node launched from version ``version``: the plan, the node and
    the launch template's id."""
    world, (node,) = world_with(1)
    template = launching(world, version)
    return world.plan(), node, template


def test_the_entry_keeps_the_launch_template_version_its_node_was_launched_from() -> None:
    first, node, template = learned_at_version("7")

    entry = first.state.templates["us-east-1/g"]
    assert (entry.node, entry.launched_from) == (node, f"{template}@7")
    assert (
        json.loads(json.dumps(first.state.to_wire()))["templates"]["us-east-1/g"]["launched_from"]
        == f"{template}@7"
    )
    assert State.model_validate(first.state.to_wire()) == first.state


def test_a_new_launch_template_version_at_zero_plans_on_the_estimate_and_says_why() -> None:
    # the old nodes had 89Gi of ephemeral storage; version 8 has a bigger root volume (the estimate knows
    # none, so the pod is launched for): the old node's shape must not keep the pod pending for a week
    first, node, template = learned_at_version("7")
    results = {}
    for version in ("7", "8"):
        world, _ = world_with(0)
        launching(world, version)
        (pod,) = world.pods("scratch", 1, cpu="1", memory="1Gi")
        asks(world, pod, ephemeral_storage="200Gi")
        later(world, first)
        results[version] = world.plan(NOW + timedelta(minutes=20))

    same, changed = results["7"], results["8"]
    assert pending_codes(same)[pod] == codes.NO_GROUP_FITS  # same version: the memory holds
    assert "us-east-1/g" in same.state.templates
    assert scale_up(changed) == {"g": (0, 1, [pod])}
    assert (
        f"launch template {template} is now version 8; the shape remembered from {node} was launched "
        "from version 7"
    ) in changed.scale_up[0].reason
    assert changed.state.templates == {}  # dropped


def test_a_pod_the_estimate_refuses_after_a_new_version_is_told_why_the_node_shape_was_not_used() -> None:
    first, node, template = learned_at_version("7")
    world, _ = world_with(0)
    launching(world, "8")
    (pod,) = world.pods("big", 1, cpu="1", memory="30000Mi")  # fits the old node's 30Gi, not the estimate
    later(world, first)

    result = world.plan(NOW + timedelta(hours=1))

    assert pending_codes(result)[pod] == codes.NO_GROUP_FITS
    reason = pending_reasons(result)[pod]
    assert "too little memory" in reason
    assert f"launch template {template} is now version 8" in reason
    assert f"the shape remembered from {node} was launched from version 7" in reason


def test_a_launch_configuration_replaced_by_a_launch_template_forgets_the_old_nodes() -> None:
    def with_configuration(world: World) -> None:
        group = world.groups["g"]
        del group["LaunchTemplate"]
        group["LaunchConfigurationName"] = "nodes-v1"
        for instance in group["Instances"]:
            del instance["LaunchTemplate"]
            instance["LaunchConfigurationName"] = "nodes-v1"

    world, (node,) = world_with(1)
    with_configuration(world)
    first = world.plan()
    at_zero, _ = world_with(0)
    template = launching(at_zero, "3")
    (pod,) = at_zero.pods("big", 1, cpu="1", memory="30000Mi")
    later(at_zero, first)

    result = at_zero.plan(NOW + timedelta(hours=1))

    assert first.state.templates["us-east-1/g"].launched_from == "lc:nodes-v1"
    assert pending_codes(result)[pod] == codes.NO_GROUP_FITS
    assert (
        f"the group launches from launch template {template} version 3 now; the shape remembered from "
        f"{node} was launched from launch configuration nodes-v1"
    ) in pending_reasons(result)[pod]


@pytest.mark.parametrize(
    "unknown",
    [
        "group",  # $Latest, not resolved: `spillway plan` input from describe-auto-scaling-groups alone
        "entry",  # learned before the entry kept what its node was launched from
    ],
)
def test_when_either_side_is_not_known_type_and_age_decide_as_before(unknown: str) -> None:
    first, _, _ = learned_at_version("7")
    wire = first.state.to_wire()
    world, _ = world_with(0)
    if unknown == "group":
        launching(world, "$Latest")
    else:
        launching(world, "8")
        del wire["templates"]["us-east-1/g"]["launched_from"]
    (pod,) = world.pods("big", 1, cpu="1", memory="30000Mi")
    world.state = json.loads(json.dumps(wire))

    result = world.plan(NOW + timedelta(hours=1))

    assert scale_up(result) == {"g": (0, 1, [pod])}  # the remembered 30Gi
    assert "us-east-1/g" in result.state.templates


def test_a_resolved_default_version_is_what_the_group_launches_from() -> None:
    """The adapter resolves ``$Default`` (DescribeLaunchTemplates) into the group it hands on."""
    first, _, template = learned_at_version("7")
    world, _ = world_with(0)
    launching(world, "$Default")
    world.groups["g"]["ResolvedLaunchTemplates"] = {f"{template}@$Default": f"{template}@8"}
    (pod,) = world.pods("big", 1, cpu="1", memory="30000Mi")
    later(world, first)

    result = world.plan(NOW + timedelta(hours=1))

    assert pending_codes(result)[pod] == codes.NO_GROUP_FITS
    assert f"launch template {template} is now version 8" in pending_reasons(result)[pod]


def test_an_overrides_own_launch_template_is_what_its_type_launches_from() -> None:
    world = World()
    world.group("g", "m5.xlarge", mixed=True)
    policy = world.groups["g"]["MixedInstancesPolicy"]["LaunchTemplate"]
    policy["LaunchTemplateSpecification"]["Version"] = "4"
    own = {"LaunchTemplateId": "lt-0arm", "Version": "$Default"}
    policy["Overrides"] = [{"InstanceType": "m5.xlarge", "LaunchTemplateSpecification": own}]
    world.groups["g"]["ResolvedLaunchTemplates"] = {"lt-0arm@$Default": "lt-0arm@2"}
    _, groups, _, _ = world.parsed()

    assert [g.launch_source for g in groups] == ["lt-0arm@2"]


def test_a_bad_launched_from_is_refused_naming_its_field(tmp_path: Path) -> None:
    first, _, _ = learned_at_version("7")
    wire = first.state.to_wire()
    wire["templates"]["us-east-1/g"]["launched_from"] = "lt-0abc@$Latest"
    path = tmp_path / "state.json"
    path.write_text(json.dumps(wire))

    with pytest.raises(InputError) as raised:
        load_state(path)

    assert "templates.us-east-1/g.launched_from" in str(raised.value)


def test_the_stored_snapshot_keeps_what_the_group_and_its_instances_launch_from() -> None:
    world, _ = world_with(2)
    template = launching(world, "7")
    snapshot, groups, _, _ = world.parsed()
    stored = Snapshot.build(snapshot, groups, NOW)

    loaded = Snapshot.from_dict(json.loads(json.dumps(stored.to_dict())))

    (group,) = loaded.groups
    assert group.launch_source == f"{template}@7"
    assert dict(group.instance_sources) == dict.fromkeys(group.instance_ids, f"{template}@7")
    assert loaded.groups == stored.groups


def test_a_snapshot_stored_before_launch_sources_loads_without_them() -> None:
    world, _ = world_with(1)
    launching(world, "7")
    snapshot, groups, _, _ = world.parsed()
    wire = Snapshot.build(snapshot, groups, NOW).to_dict()
    for group in wire["groups"]:
        group.pop("launch_source")
        group.pop("instance_sources")

    (group,) = Snapshot.from_dict(wire).groups

    assert (group.launch_source, group.instance_sources) == ("", ())


def test_a_node_of_another_group_with_the_remembered_name_lends_its_daemonsets_to_nobody() -> None:
    """EC2 reuses private IPs, so a new node of another group may carry the name of the node a group at
    zero remembers; the DaemonSets that other node runs are not the group's next node's."""
    first, node = learned_from_a_node()
    world, _ = world_with(0)
    (other,) = world.group("other", "m5.2xlarge", nodes=1, max_size=1, labels={"team": "other"})
    world.node(other)["metadata"]["name"] = node  # the reused name
    world.items.append(o.daemonset("agent", cpu="6", memory="1Gi", node_selector={"team": "other"}))
    world.items.append(o.daemonset_pod("agent-x", node, ds="agent", cpu="6", memory="1Gi"))
    (pod,) = world.pods("job", 1, cpu="4", memory="4Gi")
    later(world, first)

    result = world.plan(NOW + timedelta(hours=1))

    assert scale_up(result) == {"g": (0, 1, [pod])}  # g's next node runs no "agent": 4 cores fit


def test_a_group_at_zero_keeps_the_taint_its_nodes_registered_with() -> None:
    """A taint the kubelet registers with (user data, no tag) is part of the group's template while a
    node stands for it (spillway.model.livetemplate.group_taints); remembered with the shape, a pod that
    does not tolerate it still gets no node once the group is at zero, and one that does gets one."""
    taint = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}
    world = World()
    (node,) = world.group("g", "m5.2xlarge", nodes=1)
    world.node(node)["spec"].setdefault("taints", []).append(dict(taint))
    first = world.plan()
    at_zero, _ = world_with(0)
    (web,) = at_zero.pods("web", 1, cpu="1", memory="1Gi")
    (batch,) = at_zero.pods("batch", 1, cpu="1", memory="1Gi")
    at_zero.pod_item(batch)["spec"]["tolerations"] = [
        {"key": "dedicated", "operator": "Equal", "value": "batch"}
    ]
    later(at_zero, first)

    second = at_zero.plan(NOW + timedelta(hours=1))

    assert [t.model_dump() for t in first.state.templates["us-east-1/g"].taints] == [taint]
    assert scale_up(second) == {"g": (0, 1, [batch])}
    assert pending_codes(second)[web] == codes.NO_GROUP_FITS
    assert json.loads(json.dumps(second.state.to_wire()))["templates"]["us-east-1/g"]["taints"] == [taint]


def test_a_group_at_zero_remembered_from_windows_nodes_keeps_their_os_and_any_spread_key() -> None:
    """The memory keeps the labels the group's nodes shared: their operating system wins over the
    template's linux guess, as a live node's does. Which keys they carried with differing values (a
    labeller's rack) it does not keep, so a spread over such a key does not refuse the group."""
    rack = "example.com/rack"
    world, nodes = world_with(2)
    for node, value in zip(nodes, ("r1", "r2"), strict=True):
        labels = world.node(node)["metadata"]["labels"]
        labels.update({"kubernetes.io/os": "windows", "beta.kubernetes.io/os": "windows", rack: value})
    first = world.plan()
    at_zero, _ = world_with(0)
    (iis,) = at_zero.pods("iis", 1, cpu="1", memory="1Gi", node_selector={"kubernetes.io/os": "windows"})
    spread = {"maxSkew": 1, "topologyKey": rack, "whenUnsatisfiable": "DoNotSchedule"}
    at_zero.pod_item(iis)["spec"]["topologySpreadConstraints"] = [
        {**spread, "labelSelector": {"matchLabels": {"app": "iis"}}}
    ]
    later(at_zero, first)

    second = at_zero.plan(NOW + timedelta(minutes=20))

    assert first.state.templates["us-east-1/g"].labels["kubernetes.io/os"] == "windows"
    assert scale_up(second) == {"g": (0, 1, [iis])}
