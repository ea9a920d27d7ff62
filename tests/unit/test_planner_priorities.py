"""cluster-autoscaler's priority expander (``expander_priorities``, its ConfigMap's ``priorities`` as
written there): within a region, groups whose names match a regex of the highest priority first."""

from __future__ import annotations

from pathlib import Path

import pytest
from plan_world import World, scale_up

from spillway.config import load_config_file
from spillway.errors import ConfigurationError
from spillway.model.priorities import parse_priorities, priority_of

PRIORITIES = {10: [".*"], 50: ["reserved"]}


def _world(reserved_max: int = 10) -> tuple[World, list[str]]:
    """Two groups alike but for their names: by name alone ``a-general`` comes first."""
    w = World(regions=("us-east-1",))
    w.group("a-general", "m5.2xlarge", max_size=10)
    w.group("b-reserved", "m5.2xlarge", max_size=reserved_max)
    return w, w.pods("web", 3, cpu="5", memory="4Gi")


def test_the_highest_priority_group_gets_the_nodes() -> None:
    w, pods = _world()
    assert set(scale_up(w.plan())) == {"a-general"}  # without priorities: the name decides

    assert scale_up(w.plan(expander_priorities=PRIORITIES)) == {"b-reserved": (0, 3, pods)}


def test_a_lower_priority_or_unmatched_group_takes_what_the_first_cannot() -> None:
    w, _ = _world(reserved_max=1)

    ups = scale_up(w.plan(expander_priorities={50: ["^b-"]}))  # a-general matches nothing

    assert {g: (s[0], s[1]) for g, s in ups.items()} == {"b-reserved": (0, 1), "a-general": (0, 2)}


def test_the_region_preference_comes_first() -> None:
    w = World(regions=("us-east-1", "us-west-2"))
    w.group("home", "m5.2xlarge", max_size=10)
    w.group("west-reserved", "m5.2xlarge", region="us-west-2", max_size=10)
    w.pods("web", 1, cpu="5", memory="4Gi")

    assert set(scale_up(w.plan(expander_priorities={50: ["reserved"]}))) == {"home"}


def test_a_priority_list_that_is_not_a_regex_is_refused_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "spillway.yaml"
    path.write_text("expander_priorities:\n  10: ['(unclosed']\n")
    with pytest.raises(ConfigurationError) as raised:
        load_config_file(path)
    assert raised.value.field == "expander_priorities"
    assert "(unclosed" in str(raised.value)


def test_the_configmaps_yaml_loads_as_written(tmp_path: Path) -> None:
    path = tmp_path / "spillway.yaml"
    path.write_text("expander_priorities:\n  10:\n    - .*t2\\.large.*\n  50:\n    - .*p4d.*\n")
    ranks = load_config_file(path).expander_priorities
    assert priority_of(ranks, "gpu-p4d-east") == 50 and priority_of(ranks, "cpu-t2.large") == 10
    assert priority_of(ranks, "other") is None


# --- cluster-autoscaler's priority expander ConfigMap ---------------------------------------------------


def _config_map(priorities: str, name: str = "cluster-autoscaler-priority-expander") -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "kube-system"},
            "data": {"priorities": priorities}}  # fmt: skip


def test_the_configmap_ranks_the_groups_when_the_configuration_does_not() -> None:
    w, pods = _world()
    w.items.append(_config_map("50:\n  - reserved\n10:\n  - .*\n"))
    snapshot, *_ = w.parsed()

    assert snapshot.expander_priorities == {50: ("reserved",), 10: (".*",)}
    assert type(snapshot).from_dict(snapshot.to_dict()) == snapshot
    assert scale_up(w.plan()) == {"b-reserved": (0, 3, pods)}
    assert set(scale_up(w.plan(expander_priorities={50: ["general"]}))) == {"a-general"}  # config first


def test_another_configmap_is_not_read_and_a_bad_one_names_its_field() -> None:
    w, _ = _world()
    w.items.append(_config_map("50:\n  - reserved\n", name="something-else"))
    assert w.parsed()[0].expander_priorities == {}

    for text, words in (("5: reserved\n", "expected a list"), ("high:\n  - x\n", "not an integer"),
                        ("5:\n  - '(unclosed'\n", "not a regular expression"), ("- a\n", "expected a mapping")):  # fmt: skip
        with pytest.raises(ValueError, match=words):
            parse_priorities(text)
    w.items[-1] = _config_map("5:\n  - '(unclosed'\n")
    with pytest.raises(
        ValueError, match=r"kube-system/cluster-autoscaler-priority-expander data\.priorities"
    ):
        w.parsed()
