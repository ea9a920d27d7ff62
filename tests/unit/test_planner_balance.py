"""balance_similar_node_groups (cluster-autoscaler's --balance-similar-node-groups): a class's new nodes
are spread over the groups of one region that differ only in zone (one group per zone, as for zonal
volumes), smallest first."""

from __future__ import annotations

import pytest
from plan_world import World, scale_up
from pydantic import ValidationError
from test_planner_gang_launch import COSCHED

from spillway.config import PlannerConfig
from spillway.local import objects as o

BALANCE = {"balance_similar_node_groups": True}


def per_zone(
    a: int = 3, b: int = 1, *, b_labels: dict[str, str] | None = None, b_max: int = 10
) -> tuple[World, list[str]]:
    """cpu-a (us-east-1a) with ``a`` full nodes, cpu-b (us-east-1b) with ``b``; four pods that each
    need a node of their own."""
    w = World(regions=("us-east-1",))
    full = w.group("cpu-a", "m5.2xlarge", nodes=a, max_size=10, zones=["us-east-1a"])
    full += w.group("cpu-b", "m5.2xlarge", nodes=b, max_size=b_max, zones=["us-east-1b"], labels=b_labels)
    w.items += [o.pod(f"resident-{i}", cpu="7", memory="8Gi", node_name=n) for i, n in enumerate(full)]
    return w, w.pods("big", 4, cpu="7", memory="8Gi")


def test_new_nodes_go_to_the_smaller_zone_until_the_groups_are_even() -> None:
    w, pods = per_zone()

    result = w.plan(**BALANCE)

    assert {g: (f, t) for g, (f, t, _) in scale_up(result).items()} == {"cpu-a": (3, 4), "cpu-b": (1, 4)}
    assert sorted(p for _, _, placed in scale_up(result).values() for p in placed) == pods


def test_without_balancing_the_first_group_takes_them_all() -> None:
    w, pods = per_zone()

    assert scale_up(w.plan()) == {"cpu-a": (3, 7, pods)}


def test_max_size_holds_and_the_rest_goes_to_the_twin() -> None:
    w, _ = per_zone(b_max=2)

    result = w.plan(**BALANCE)

    assert {g: (f, t) for g, (f, t, _) in scale_up(result).items()} == {"cpu-a": (3, 6), "cpu-b": (1, 2)}


def test_groups_that_differ_in_another_label_are_not_balanced_unless_it_is_ignored() -> None:
    w, pods = per_zone(b_labels={"pool": "blue"})

    assert scale_up(w.plan(**BALANCE)) == {"cpu-a": (3, 7, pods)}
    ignored = w.plan(**BALANCE, balancing_ignore_labels=["pool"])
    assert {g: (f, t) for g, (f, t, _) in scale_up(ignored).items()} == {"cpu-a": (3, 4), "cpu-b": (1, 4)}


def test_the_ignored_labels_are_checked() -> None:
    with pytest.raises(ValidationError, match="balancing_ignore_labels"):
        PlannerConfig(balancing_ignore_labels=[""])


def test_a_gangs_nodes_are_not_spread() -> None:
    """A gang launches together in one group (its atomic launch, its zone)."""
    w, _ = per_zone()
    w.items = [i for i in w.items if not (i["kind"] == "Pod" and i["metadata"]["name"].startswith("big"))]
    w.pod_group(COSCHED, "train", spec={"minMember": 4})
    gang = w.pods("worker", 4, cpu="7", memory="8Gi", labels={"scheduling.x-k8s.io/pod-group": "train"})

    assert scale_up(w.plan(**BALANCE)) == {"cpu-a": (3, 7, gang)}


def test_a_twin_without_a_node_is_balanced_with_one_whose_template_a_node_gave() -> None:
    """cpu-a's template is its nodes' allocatable (30Gi, ephemeral storage), cpu-b's the estimate for the
    type (29317Mi): as cluster-autoscaler's comparator, within 5 % they are the same node."""
    w, _ = per_zone(b=0)

    result = w.plan(**BALANCE)

    assert {g: (f, t) for g, (f, t, _) in scale_up(result).items()} == {"cpu-a": (3, 4), "cpu-b": (0, 3)}


def test_twins_whose_nodes_differ_more_than_the_tolerance_are_not_balanced() -> None:
    w, pods = per_zone(b=1)
    twin = w.node(o.node_name_for(o.instance_id("cpu-b-0"), "us-east-1"))
    for key in ("allocatable", "capacity"):
        twin["status"][key]["memory"] = "24Gi"  # 20 % less than cpu-a's 30Gi

    assert scale_up(w.plan(**BALANCE)) == {"cpu-a": (3, 7, pods)}
