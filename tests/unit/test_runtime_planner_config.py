"""``PLANNER_CONFIG``: the planner configuration beyond the thresholds (tenants, cluster totals) reaches
the functions as one JSON object; the threshold variables override it; bad values name the variable and
the key."""

from __future__ import annotations

import pytest

from spillway.errors import ConfigurationError
from spillway.runtime import load_runtime_config

BASE = {"CLUSTER_NAME": "ml", "REGIONS": "us-east-1", "SNAPSHOTS_TABLE": "snap", "PLANS_TABLE": "plans",
        "STATE_TABLE": "state"}  # fmt: skip


def test_tenants_and_totals_come_from_planner_config_and_threshold_variables_override_it() -> None:
    config = load_runtime_config(
        {
            **BASE,
            "PLANNER_CONFIG": '{"tenants": {"team-b": {"limits": {"nvidia.com/gpu": 2}}}, "max_nodes_total": 30,'
            ' "scale_down_idle_minutes": 3, "node_reserve": {"cpu": "200m"}}',
            "SCALE_DOWN_IDLE_MINUTES": "0.05",
            "NODE_RESERVE_MEMORY": "2Gi",
        }
    ).planner
    assert config.tenants["team-b"].limits == {"nvidia.com/gpu": "2"}
    assert config.max_nodes_total == 30
    assert config.scale_down_idle_minutes == 0.05  # the variable wins
    assert (config.node_reserve.cpu, config.node_reserve.memory) == ("200m", "2Gi")
    assert (config.cluster, config.regions) == ("ml", ("us-east-1",))


def test_unset_or_empty_planner_config_is_the_defaults() -> None:
    assert load_runtime_config(BASE).planner.tenants == {}
    assert load_runtime_config({**BASE, "PLANNER_CONFIG": "{}"}).planner.max_nodes_total == 0


@pytest.mark.parametrize(
    ("value", "field", "words"),
    [
        ("{tenants", "PLANNER_CONFIG", "not valid JSON"),
        ("[1, 2]", "PLANNER_CONFIG", "a JSON object"),
        ('{"tenant": {}}', "PLANNER_CONFIG tenant", "unknown config key"),
        ('{"tenants": {"b": {"limits": {"cpu": "lots"}}}}', "PLANNER_CONFIG tenants.b.limits", "lots"),
        ('{"max_nodes_total": -1}', "PLANNER_CONFIG max_nodes_total", "greater than or equal to 0"),
        ('{"cluster": "other"}', "PLANNER_CONFIG cluster", "CLUSTER_NAME"),
        (
            '{"node_reserve": {"vm_memory_overhead_percent": 7.5}}',
            "PLANNER_CONFIG node_reserve.vm_memory_overhead_percent",
            "not a fraction",
        ),
    ],
)
def test_a_bad_planner_config_names_the_variable_and_the_key(value: str, field: str, words: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_runtime_config({**BASE, "PLANNER_CONFIG": value})
    assert caught.value.field == field and words in str(caught.value), str(caught.value)


def test_a_bad_threshold_variable_is_still_named_as_itself() -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_runtime_config({**BASE, "PLANNER_CONFIG": '{"scale_down_idle_minutes": 5}',
                             "SCALE_DOWN_IDLE_MINUTES": "-1"})  # fmt: skip
    assert caught.value.field == "SCALE_DOWN_IDLE_MINUTES"
