"""Configuration the plan reads by group name: a disruption budget's ``groups`` and a tenant scope's
``node_groups``. A name no managed group has was taken silently, so a typo made a budget or a quota that
never applied; the plan now names the field and the name in its ``problems``, each problem counted
under its own kind."""

from __future__ import annotations

from plan_world import World

from spillway.act.planning import summarize
from spillway.planner import ScalingPlan
from spillway.planner.types import PRIORITY_CONFIGMAP_INVALID, UNKNOWN_GROUP_NAMES

CONFIGURATION = "configuration"


def _world() -> World:
    w = World(regions=("us-east-1", "us-west-2"))
    w.group("general", "m5.2xlarge", max_size=10)
    w.group("gpu-west", "g5.xlarge", max_size=4, region="us-west-2")
    return w


def _unknown(result: ScalingPlan) -> list[tuple[str, str, str]]:
    return [(p.field, p.object, p.reason) for p in result.problems if p.kind == UNKNOWN_GROUP_NAMES]


def test_a_disruption_budget_naming_no_managed_group_is_a_problem_naming_field_and_name() -> None:
    w = _world()
    budgets = [{"nodes": "1", "groups": ["general"]}, {"nodes": "0", "groups": ["gpu-west", "gpu-wset"]}]

    result = w.plan(disruption_budgets=budgets)

    [(field, obj, reason)] = _unknown(result)
    assert (field, obj) == ("disruption_budgets[1].groups", CONFIGURATION)
    assert "'gpu-wset'" in reason and "no managed group" in reason
    assert "'gpu-west'" not in reason  # a group of another region is a managed group all the same
    assert result.to_dict()["problems"][0]["kind"] == UNKNOWN_GROUP_NAMES


def test_a_tenant_scope_naming_no_managed_group_is_a_problem_naming_field_and_name() -> None:
    w = _world()
    tenants = {
        "team-a": {"scopes": [{"node_groups": ["general"], "limits": {"cpu": "64"}}]},
        "team-b": {"scopes": [{"node_groups": ["genral", "gpu-west"], "limits": {"nvidia.com/gpu": "4"}}]},
    }

    result = w.plan(tenants=tenants)

    [(field, obj, reason)] = _unknown(result)
    assert (field, obj) == ("tenants.team-b.scopes[0].node_groups", CONFIGURATION)
    assert "'genral'" in reason


def test_names_every_managed_group_has_are_no_problem() -> None:
    w = _world()
    result = w.plan(
        disruption_budgets=[{"nodes": "10%", "groups": ["general", "gpu-west"]}, {"nodes": "1"}],
        tenants={"team-a": {"scopes": [{"node_groups": ["gpu-west"], "limits": {"cpu": "8"}}]}},
    )
    assert result.problems == ()


def test_each_problem_is_counted_under_its_own_kind() -> None:
    """Every problem of a plan was counted as PriorityConfigMapInvalid: a budget's typo would have
    raised the priority ConfigMap's alarm, whose runbook sends the reader to the wrong ConfigMap."""
    from test_planning import record_metrics

    w = _world()
    typo = summarize(w.plan(disruption_budgets=[{"nodes": "0", "groups": ["genral"]}]), "us-east-1")
    summary = typo.to_dict()

    metrics = record_metrics({"summary": summary})

    assert metrics[PRIORITY_CONFIGMAP_INVALID] == 0.0
    assert metrics[UNKNOWN_GROUP_NAMES] == 1.0
    clean = record_metrics({"summary": summarize(w.plan(), "us-east-1").to_dict()})
    assert clean[UNKNOWN_GROUP_NAMES] == 0.0 and clean[PRIORITY_CONFIGMAP_INVALID] == 0.0
