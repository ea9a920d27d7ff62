"""Consolidation: a busy node is drained only when its pods fit elsewhere, and each refusal says why.

Every scenario is built from kubectl / AWS CLI objects (``plan_world``). The cluster is a group of
m5.2xlarge nodes (7910m CPU, 30Gi allocatable) whose pods are ReplicaSet replicas annotated
``safe-to-evict=true`` unless a test says otherwise.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from plan_world import NOW, World

from spillway.config import load_config_file
from spillway.errors import ConfigurationError
from spillway.local import objects as o
from spillway.planner import ScalingPlan, codes

UNDER: dict[str, Any] = {"consolidation": "when-underutilized"}


MOVABLE = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}


def replicas(w: World, node: str, prefix: str, count: int, cpu: str = "1500m", **kw: Any) -> list[str]:
    kw.setdefault("annotations", MOVABLE)
    return w.pods(prefix, count, cpu=cpu, memory="1Gi", node_name=node, owner=("ReplicaSet", prefix), **kw)


def half_full(count: int = 2, cpu: str = "1500m") -> tuple[World, list[str]]:
    """``count`` nodes, each running two replicas of ``cpu``."""
    w = World(regions=("us-east-1",))
    nodes = sorted(w.group("cpu", "m5.2xlarge", nodes=count, max_size=10))  # the planner's order
    for i, n in enumerate(nodes):
        replicas(w, n, f"web{i}", 2, cpu=cpu)
        w.items.append(o.daemonset_pod(f"aws-node-{i}", n))  # ignored: a DaemonSet pod never moves
    return w, nodes


def tag(w: World, group: str, key: str, value: str) -> None:
    w.groups[group]["Tags"].append(
        {"ResourceId": group, "ResourceType": "auto-scaling-group", "Key": key, "Value": value,
         "PropagateAtLaunch": True}
    )  # fmt: skip


def kept(result: ScalingPlan) -> dict[str, tuple[str, str]]:
    return {k.node: (k.code, k.reason) for k in result.kept}


def test_two_half_empty_nodes_become_one_the_drain_lists_the_pods_it_moves() -> None:
    w, (a, b) = half_full()

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    (drain,) = result.drain
    assert drain.node == a and drain.code == codes.CONSOLIDATION
    assert drain.pods == ("default/web0-0", "default/web0-1")  # not the DaemonSet pod
    assert w.node(a)["spec"]["providerID"].endswith("/" + drain.instance_id)
    assert f"fit on {b}" in drain.reason
    assert drain.to_dict()["code"] == "consolidation" and drain.to_dict()["pods"] == list(drain.pods)
    assert kept(result)[b][0] == codes.RECEIVES_MOVED_PODS
    assert result.state.nodes[a].draining_since == NOW  # later plans leave it to its drain
    # Every node is accounted for exactly once.
    assert sorted([*kept(result), drain.node]) == [a, b]


def test_a_recent_consolidation_owns_its_node_until_the_drain_cordons_it() -> None:
    w, (a, b) = half_full()
    w.state["nodes"][a] = {
        "idle_since": NOW.isoformat(),
        "draining_since": (NOW - timedelta(minutes=2)).isoformat(),
    }

    result = w.plan(now=NOW + timedelta(minutes=1), max_scale_in_fraction=1.0, **UNDER)

    assert kept(result)[a][0] == codes.DRAIN_PLANNED
    assert result.state.nodes[a].draining_since is not None
    assert [d.node for d in result.drain] == [b]  # a's claim does not keep b from consolidating onto a


def test_empty_nodes_only_by_default_busy_nodes_are_kept_as_workload() -> None:
    w, (a, b) = half_full()

    result = w.plan(max_scale_in_fraction=1.0)

    assert result.drain == ()
    assert kept(result)[a][0] == kept(result)[b][0] == codes.WORKLOAD


def test_a_group_tag_opts_in_without_the_cluster_default() -> None:
    w, (a, _) = half_full()
    tag(w, "cpu", "spillway.io/consolidation", "when-underutilized")

    assert [d.node for d in w.plan(max_scale_in_fraction=1.0).drain] == [a]


def test_consolidation_off_keeps_even_an_empty_node_and_a_bad_tag_means_off() -> None:
    w = World(regions=("us-east-1",))
    (idle,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=3)
    w.idle_since(idle, 60)
    (other,) = w.group("gpu", "m5.2xlarge", nodes=1, max_size=3)
    w.idle_since(other, 60)
    tag(w, "cpu", "spillway.io/consolidation", "yes")

    result = w.plan(max_scale_in_fraction=1.0)

    code, reason = kept(result)[idle]
    assert code == codes.CONSOLIDATION_OFF and "'yes' is not one of" in reason
    assert [d.node for d in result.drain] == [other]
    assert [d.node for d in w.plan(consolidation="off").drain] == []


def test_refused_when_a_pod_must_not_be_disturbed_the_other_node_still_consolidates_onto_it() -> None:
    w, (a, b) = half_full()
    w.pod_item("default/web0-0")["metadata"].setdefault("annotations", {})["karpenter.sh/do-not-disrupt"] = (
        "true"
    )

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    code, reason = kept(result)[a]
    assert code == codes.POD_NEVER and "default/web0-0" in reason
    assert [d.node for d in result.drain] == [b]


def test_refused_when_a_replica_of_no_kind_known_to_tolerate_a_move_runs_there() -> None:
    w, (a, b) = half_full()
    del w.pod_item("default/web0-1")["metadata"]["annotations"][
        "cluster-autoscaler.kubernetes.io/safe-to-evict"
    ]

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    code, reason = kept(result)[a]
    assert code == codes.POD_NEVER and "default/web0-1" in reason and "no kind known" in reason
    assert [d.node for d in result.drain] == [b]


def test_refused_when_a_pod_disruption_budget_allows_nothing_now() -> None:
    w, (a, _) = half_full()
    budget = o.pdb("web0", "default", {"app": "web0"}, min_available=2, disruptions_allowed=0)
    w.items.append(budget)
    for key in ("default/web0-0", "default/web0-1"):
        w.pod_item(key)["metadata"].setdefault("labels", {})["app"] = "web0"

    code, reason = kept(w.plan(max_scale_in_fraction=1.0, **UNDER))[a]
    assert code == codes.POD_NEVER and "PodDisruptionBudget" in reason

    budget["status"]["disruptionsAllowed"] = 1  # one at a time: the drain's rounds take them in turn
    assert [d.node for d in w.plan(max_scale_in_fraction=1.0, **UNDER).drain] == [a]


def elastic_workers(w: World, node: str, names: list[str]) -> None:
    """Workers of PyTorchJob ``train`` (elastic, 2 to 4 workers: ``PET_NNODES``)."""
    for name in names:
        item = o.pod(name, cpu="1", memory="1Gi", node_name=node, owner=("PyTorchJob", "train"),
                     labels={"training.kubeflow.org/job-name": "train",
                             "training.kubeflow.org/replica-type": "worker"})  # fmt: skip
        item["spec"]["containers"][0]["env"] = [{"name": "PET_NNODES", "value": "2:4"}]
        w.items.append(item)


def test_elastic_jobs_shrink_to_their_minimum_never_below() -> None:
    w = World(regions=("us-east-1",))
    a, b, c = sorted(w.group("cpu", "m5.2xlarge", nodes=3, max_size=10))
    elastic_workers(w, a, ["w-0", "w-1"])  # 3 workers, minimum 2: the job may lose one
    elastic_workers(w, b, ["w-2"])
    replicas(w, c, "big", 1, cpu="7")  # room for nobody

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    code, reason = kept(result)[a]
    assert code == codes.ELASTIC_MIN and "/default/train" in reason and "may lose 1" in reason
    (drain,) = result.drain
    assert drain.node == b and drain.pods == ("default/w-2",)
    assert "gives up 1 worker" in drain.reason
    assert kept(result)[c][0] == codes.DOES_NOT_FIT


def test_refused_when_a_bare_pod_nothing_would_recreate_runs_there() -> None:
    w, (a, _) = half_full()
    w.items.append(o.pod("bare", cpu="100m", memory="100Mi", node_name=a, owner=None))

    assert kept(w.plan(max_scale_in_fraction=1.0, **UNDER))[a][0] == codes.POD_NEVER


def test_refused_when_the_pods_do_not_fit_the_rest_of_the_cluster() -> None:
    w, (a, b) = half_full(cpu="2500m")  # 5 CPU per node: 10 do not fit in 7.9

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    assert result.drain == ()
    assert kept(result)[a][0] == kept(result)[b][0] == codes.DOES_NOT_FIT


def test_never_counts_the_room_of_a_node_this_plan_drains() -> None:
    w, (a, b) = half_full(cpu="2")  # 4 CPU per node: a's pods do not fit in b's 3.9 left
    idle = w.node_for("cpu", o.instance_id("cpu-idle"), "m5.2xlarge")
    w.groups["cpu"]["Instances"].append(
        {**w.groups["cpu"]["Instances"][0], "InstanceId": o.instance_id("cpu-idle")}
    )
    w.groups["cpu"]["DesiredCapacity"] += 1
    w.idle_since(idle, 60)

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    assert [(d.node, d.code) for d in result.drain] == [(idle, "")]  # drained as empty, holds nothing
    assert kept(result)[a][0] == kept(result)[b][0] == codes.DOES_NOT_FIT


def test_refused_when_the_saving_does_not_outlast_the_restart_cost() -> None:
    w, (a, _) = half_full()

    result = w.plan(max_scale_in_fraction=1.0, consolidation_horizon_minutes=3, **UNDER)

    code, reason = kept(result)[a]
    assert code == codes.SAVING_TOO_SMALL
    assert "3.8 node-minutes" in reason  # 10 min x 3 of 7.91 CPU
    # A cheaper restart makes the same move worth it.
    assert len(w.plan(max_scale_in_fraction=1.0, consolidation_horizon_minutes=3,
                      consolidation_restart_minutes=5, **UNDER).drain) == 1  # fmt: skip


def test_refused_in_a_group_this_plan_grows() -> None:
    w, (a, b) = half_full()
    w.pods("big", 1, cpu="7", memory="1Gi")  # fits no existing node: a new cpu node

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    assert [s.group for s in result.scale_up] == ["cpu"]
    assert result.drain == ()
    assert kept(result)[a][0] == kept(result)[b][0] == codes.LAUNCHING_THIS_PLAN


def test_refused_when_a_pending_pod_is_planned_onto_it() -> None:
    w, (a, b) = half_full()
    w.pods("small", 1, cpu="4", memory="1Gi")

    result = w.plan(max_scale_in_fraction=1.0, **UNDER)

    assert result.scale_up == ()
    assert kept(result)[a][0] == codes.PENDING_FITS  # the pending pod goes to the first node with room
    assert kept(result)[b][0] == codes.DOES_NOT_FIT  # 3 + 4 CPU on a: b's 3 more do not fit


def test_refused_by_a_disruption_budget_of_zero() -> None:
    w, (a, _) = half_full()

    result = w.plan(max_scale_in_fraction=1.0, disruption_budgets=[{"nodes": 0}], **UNDER)

    assert result.drain == ()
    code, reason = kept(result)[a]
    assert code == codes.DISRUPTION_BUDGET and "nodes 0" in reason


def test_a_budget_binds_only_inside_its_window_in_its_time_zone() -> None:
    w, (a, _) = half_full()
    night = [{"nodes": 0, "windows": [{"start": "22:00", "end": "06:00", "timezone": "Europe/Berlin"}]}]

    noon = w.plan(max_scale_in_fraction=1.0, disruption_budgets=night, **UNDER)
    late = w.plan(now=NOW.replace(hour=22), max_scale_in_fraction=1.0, disruption_budgets=night, **UNDER)

    assert len(noon.drain) == 1  # 13:00 in Berlin
    assert late.drain == () and kept(late)[a][0] == codes.DISRUPTION_BUDGET  # 23:00 in Berlin


def test_the_most_restrictive_budget_binds_and_percentages_round_up_as_karpenter() -> None:
    w = World(regions=("us-east-1",))
    nodes = w.group("cpu", "m5.2xlarge", nodes=5, max_size=10)
    for n in nodes:
        w.idle_since(n, 60)
    budgets = [{"nodes": "30%"}, {"nodes": 4}, {"nodes": 0, "groups": ["other"]}]

    result = w.plan(max_scale_in_fraction=1.0, disruption_budgets=budgets)

    assert len(result.drain) == 2  # 30% of 5 is 1.5, rounded up; the budget of "other" does not apply
    assert sum(c == codes.DISRUPTION_BUDGET for c, _ in kept(result).values()) == 3


def test_nodes_spillway_drains_already_count_against_the_budget() -> None:
    w, (a, b, _) = half_full(count=3)
    w.cordon(b, by_spillway=True)  # a drain under way

    result = w.plan(max_scale_in_fraction=1.0, disruption_budgets=[{"nodes": 1}], **UNDER)

    assert result.drain == ()
    assert kept(result)[a][0] == codes.DISRUPTION_BUDGET


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("consolidation: sometimes\n", "consolidation"),
        ("disruption_budgets: [{nodes: '150%'}]\n", "disruption_budgets.0.nodes"),
        (
            "disruption_budgets: [{nodes: 2, windows: [{start: '25:00'}]}]\n",
            "disruption_budgets.0.windows.0.start",
        ),
        ("disruption_budgets: [{nodes: 2, group: [a]}]\n", "disruption_budgets.0.group"),
        ("consolidation_restart_minutes: -1\n", "consolidation_restart_minutes"),
        ("consolidation_horizon_minutes: 0\n", "consolidation_horizon_minutes"),
    ],
)
def test_bad_consolidation_settings_name_the_key(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "spillway.yaml"
    path.write_text(text)
    with pytest.raises(ConfigurationError) as raised:
        load_config_file(path)
    assert raised.value.field == field
