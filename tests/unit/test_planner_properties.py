"""Properties of the planner on random clusters (hypothesis).

Profiles (``HYPOTHESIS_PROFILE``): ``ci`` (default) is derandomized, so CI runs the same examples every
time; ``nightly`` is random and runs 20 times as many; ``dev`` is random with the CI count.
"""

from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plan_world import GPU_TOLERATION, NOW, World

from spillway.local import objects as o
from spillway.model.k8s import DRAINING_TAINT
from spillway.model.resources import PODS, add_into
from spillway.planner import codes, plan

settings.register_profile(
    "ci", max_examples=150, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "nightly", max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.register_profile(
    "dev", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
PROFILE = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
SCALE_IN_FRACTION = 0.5
GPU_TAINT_KEY = GPU_TOLERATION["key"]

TYPES = ["m5.xlarge", "m5.2xlarge", "g5.xlarge", "g5.12xlarge", "p4d.24xlarge"]
REGIONS = ["us-east-1", "us-west-2"]

group_st = st.fixed_dictionaries(
    {
        "type": st.sampled_from(TYPES),
        "region": st.sampled_from(REGIONS),
        "min": st.integers(0, 2),
        "extra_max": st.integers(0, 6),
        "nodes": st.integers(0, 4),
        "booting": st.integers(0, 2),
        "taint": st.booleans(),
        "label": st.sampled_from([None, "a", "b"]),
        "flags": st.lists(st.sampled_from(["spillway", "human", "notready", "disabled"]), max_size=4),
    }
)
pending_st = st.fixed_dictionaries(
    {
        "count": st.integers(1, 12),
        "cpu": st.sampled_from(["100m", "500m", "1", "2", "3500m", "7", "30", "90"]),
        "memory": st.sampled_from(["256Mi", "1Gi", "4Gi", "16Gi", "100Gi", "900Gi"]),
        "gpus": st.sampled_from([0, 0, 1, 2, 4, 8]),
        "tolerate": st.booleans(),
        "label": st.sampled_from([None, "a", "b"]),
        "priority": st.sampled_from([0, 0, 100, -100]),
    }
)
bound_st = st.lists(
    st.tuples(st.integers(0, 30), st.sampled_from(["250m", "1", "2"]), st.sampled_from(["512Mi", "2Gi"])),
    max_size=12,
)


def build(groups: list[dict[str, Any]], pendings: list[dict[str, Any]], bound: list[Any], idle: int) -> World:
    w = World()
    all_nodes: list[str] = []
    for gi, g in enumerate(groups):
        name = f"g{gi}-{g['type'].replace('.', '-')}"
        labels = {"team": g["label"]} if g["label"] else None
        nodes = w.group(
            name,
            g["type"],
            region=g["region"],
            min_size=min(g["min"], g["nodes"]),
            max_size=g["nodes"] + g["booting"] + g["extra_max"],
            nodes=g["nodes"],
            desired=g["nodes"] + g["booting"],
            gpu_taint=g["taint"],
            labels=labels,
        )
        for flag, node in zip(g["flags"], nodes, strict=False):
            if flag in ("spillway", "human"):
                w.cordon(node, by_spillway=flag == "spillway")
            elif flag == "notready":
                w.node(node)["status"]["conditions"][0]["status"] = "False"
            else:
                w.node(node)["metadata"]["annotations"][
                    "cluster-autoscaler.kubernetes.io/scale-down-disabled"
                ] = "true"
        all_nodes += nodes
    for node in all_nodes:
        w.idle_since(node, idle)
    for i, (slot, cpu, memory) in enumerate(bound):
        if all_nodes:
            w.items.append(
                o.pod(f"run-{i}", cpu=cpu, memory=memory, node_name=all_nodes[slot % len(all_nodes)])
            )
    for pi, p in enumerate(pendings):
        kwargs: dict[str, Any] = {
            "cpu": p["cpu"],
            "memory": p["memory"],
            "gpus": p["gpus"],
            "priority": p["priority"],
        }
        if p["tolerate"]:
            kwargs["tolerations"] = [GPU_TOLERATION]
        if p["label"]:
            kwargs["node_selector"] = {"team": p["label"]}
        w.pods(f"p{pi}", p["count"], **kwargs)
    return w


@settings(PROFILE)
@given(
    groups=st.lists(group_st, min_size=1, max_size=4),
    pendings=st.lists(pending_st, max_size=5),
    bound=bound_st,
    idle=st.sampled_from([0, 5, 30]),
)
def test_plans_respect_limits_never_drain_work_and_never_overcommit(
    groups: list[dict[str, Any]], pendings: list[dict[str, Any]], bound: list[Any], idle: int
) -> None:
    w = build(groups, pendings, bound, idle)
    snapshot, node_groups, config, state = w.parsed(max_scale_in_fraction=SCALE_IN_FRACTION)
    result = plan(snapshot, node_groups, config, state, NOW)
    by_name = {g.name: g for g in node_groups}

    # Group limits: never above MaxSize, never below MinSize.
    for s in result.scale_up:
        g = by_name[s.group]
        assert g.min_size <= s.from_size == g.desired < s.to_size <= g.max_size
    drained_per_group: dict[str, int] = defaultdict(int)
    for d in result.drain:
        drained_per_group[d.group] += 1
    for name, count in drained_per_group.items():
        assert by_name[name].desired - count >= by_name[name].min_size

    # No drained node holds a workload pod; drains are Ready nodes, or nodes NotReady for at least
    # scale_down_unready_minutes.
    nodes = {n.name: n for n in snapshot.nodes}
    workload = {p.node_name for p in snapshot.pods if p.node_name and p.is_workload}
    unready = timedelta(minutes=config.scale_down_unready_minutes)
    for d in result.drain:
        assert d.node not in workload
        info = nodes[d.node]
        since = info.ready_changed_at or info.created_at
        assert info.ready or (since is not None and NOW - since >= unready)

    # Every node has exactly one verdict; every pending pod exactly one outcome.
    verdicts = [k.node for k in result.kept] + [d.node for d in result.drain]
    assert sorted(verdicts) == sorted(nodes)
    pending = sorted(p.key for p in snapshot.pods if p.is_pending_unschedulable())
    outcomes = [p.pod for p in result.pending] + [p for s in result.scale_up for p in s.pods]
    assert sorted(outcomes) == pending

    # Replaying placements never over-commits a node, existing or new.
    requests = {p.key: p.requests for p in snapshot.pods}
    load: dict[str, dict[str, int]] = defaultdict(dict)
    for placement in result.placements:
        add_into(load[placement.node], requests[placement.pod])
        add_into(load[placement.node], {PODS: 1000})
    used: dict[str, dict[str, int]] = defaultdict(dict)
    for p in snapshot.pods:
        if p.node_name and not p.terminal:
            add_into(used[p.node_name], p.requests)
            add_into(used[p.node_name], {PODS: 1000})
    new_ids: dict[str, set[str]] = defaultdict(set)
    for node_id, extra in load.items():
        if node_id in nodes:
            capacity = nodes[node_id].allocatable
            total = dict(used[node_id])
        else:
            group_name, _, kind = node_id.partition("/")
            template = by_name[group_name].template
            assert template is not None
            capacity, total = template.allocatable, {}
            if kind.startswith("new-"):
                new_ids[group_name].add(node_id)
        add_into(total, extra)
        for resource, amount in total.items():
            if resource == "ephemeral-storage":
                continue
            assert amount <= capacity.get(resource, 0), (node_id, resource)
    for s in result.scale_up:
        assert len(new_ids[s.group]) <= s.to_size - s.from_size

    check_taints_and_selectors(w, result, by_name)
    check_scale_in_cap(result, by_name)
    check_cordons(snapshot, result)
    check_codes(result)

    # Deterministic.
    again = plan(snapshot, node_groups, config, state, NOW)
    assert json.dumps(again.to_dict()) == json.dumps(result.to_dict())


def _node_constraints(w: World) -> dict[str, tuple[set[str], dict[str, str]]]:
    """Per node as generated: taint keys (Spillway's draining taint left out: uncordoning lifts it), labels."""
    out = {}
    for item in w.items:
        if item["kind"] == "Node":
            taints = {t["key"] for t in item["spec"].get("taints", [])} - {DRAINING_TAINT}
            out[item["metadata"]["name"]] = (taints, dict(item["metadata"].get("labels", {})))
    return out


def check_taints_and_selectors(w: World, result: Any, by_name: dict[str, Any]) -> None:
    """A pod goes only where its tolerations and node selector allow: existing, launching or new nodes."""
    pods = {
        f"{i['metadata'].get('namespace', 'default')}/{i['metadata']['name']}": i["spec"]
        for i in w.items
        if i["kind"] == "Pod"
    }
    nodes = _node_constraints(w)
    for placement in result.placements:
        if placement.node in nodes:
            taints, labels = nodes[placement.node]
        else:
            template = by_name[placement.group.name].template
            taints, labels = {t[0] for t in template.taints}, dict(template.labels)
        spec = pods[placement.pod]
        tolerated = {t["key"] for t in spec.get("tolerations", [])}
        assert taints <= tolerated, (placement, taints)
        for key, value in spec.get("nodeSelector", {}).items():
            assert labels.get(key) == value, (placement, key)
    for s in result.scale_up:
        if any(t[0] == GPU_TAINT_KEY for t in by_name[s.group].template.taints):
            for pod in s.pods:
                assert GPU_TAINT_KEY in {t["key"] for t in pods[pod].get("tolerations", [])}, (s.group, pod)


def check_scale_in_cap(result: Any, by_name: dict[str, Any]) -> None:
    """At most max_scale_in_fraction of a group per plan (at least one node), with the rest kept for it."""
    drained: dict[str, int] = defaultdict(int)
    for d in result.drain:
        drained[d.group] += 1
    for name, count in drained.items():
        assert count <= max(1, math.floor(SCALE_IN_FRACTION * by_name[name].desired)), (name, count)


def check_cordons(snapshot: Any, result: Any) -> None:
    """Cordoned nodes are never drained again; a human's cordon is never lifted; disabled nodes stay."""
    nodes = {n.name: n for n in snapshot.nodes}
    for d in result.drain:
        info = nodes[d.node]
        assert not info.unschedulable, d.node
        assert not info.scale_down_disabled, d.node
    for u in result.uncordon:
        assert nodes[u.node].cordoned_by_spillway, u.node
    human = {n.name for n in snapshot.nodes if n.unschedulable and not n.cordoned_by_spillway}
    assert not human & {p.node for p in result.placements}
    kept = {k.node: k.code for k in result.kept}
    for name in human:
        allowed = {codes.UNMANAGED, codes.CLUSTER_UNHEALTHY, codes.NOT_READY, codes.WORKLOAD}
        assert kept[name] in allowed | {codes.CORDONED_BY_OTHERS}, name


def check_codes(result: Any) -> None:
    assert all(k.code in codes.KEPT_CODES for k in result.kept)
    assert all(p.code in codes.PENDING_CODES for p in result.pending)
