"""Scale-down waits after its own past actions (spillway.planner.cooldown): cluster-autoscaler's
--scale-down-delay-after-delete and --scale-down-delay-after-failure, as
``scale_down_delay_after_delete_minutes`` and ``scale_down_delay_after_failure_minutes``."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from plan_world import NOW, World
from test_planner_consolidation import UNDER, half_full

from spillway.config import load_config_file
from spillway.errors import ConfigurationError
from spillway.model.state import Since
from spillway.planner import ScalingPlan, codes


def kept(result: ScalingPlan) -> dict[str, tuple[str, str]]:
    return {k.node: (k.code, k.reason) for k in result.kept}


def idle_group(nodes: int = 4) -> tuple[World, list[str]]:
    w = World(regions=("us-east-1",))
    names = w.group("cpu", "m5.2xlarge", nodes=nodes, max_size=10)
    for n in names:
        w.idle_since(n, 30)
    return w, names


def test_after_a_plan_removes_a_node_the_next_removal_waits_for_the_delete_delay() -> None:
    w, names = idle_group()
    config = {"max_scale_in_fraction": 0.25, "scale_down_delay_after_delete_minutes": 5}

    first = w.plan(**config)
    (drained,) = [d.node for d in first.drain]
    assert first.state.scale_down["deleted"] == Since(since=NOW)

    w.state = first.state.to_wire()
    soon = w.plan(now=NOW + timedelta(minutes=2), **config)
    assert soon.drain == ()
    others = [n for n in names if n != drained]
    for name in others:
        code, reason = kept(soon)[name]
        assert code == codes.SCALE_DOWN_COOLDOWN
        assert "a plan drained a node to remove it 2m" in reason
        assert "scale_down_delay_after_delete_minutes" in reason
    assert soon.state.scale_down["deleted"] == Since(since=NOW)  # carried while it lasts
    # kept only until a later plan: marked for the scheduler, as cluster-autoscaler does in its cooldown
    assert {t.node for t in soon.soft_taint if t.add} == set(others)

    w.state = soon.state.to_wire()
    later = w.plan(now=NOW + timedelta(minutes=5), **config)
    assert len(later.drain) == 1 and later.drain[0].node in others
    assert later.state.scale_down["deleted"] == Since(since=NOW + timedelta(minutes=5))


def test_without_a_delete_delay_every_plan_may_remove_and_the_state_keeps_no_mark() -> None:
    w, _ = idle_group()

    first = w.plan(max_scale_in_fraction=0.25)
    assert len(first.drain) == 1 and first.state.scale_down == {}
    assert "scale_down" not in first.state.to_wire()

    w.state = first.state.to_wire()
    assert len(w.plan(now=NOW + timedelta(minutes=1), max_scale_in_fraction=0.25).drain) == 1


def test_a_failed_scale_down_drain_holds_scale_down_for_three_minutes_by_default() -> None:
    w, names = idle_group(2)
    w.state["scale_down"] = {"failed": {"since": (NOW - timedelta(minutes=2)).isoformat()}}

    held = w.plan(max_scale_in_fraction=1.0)

    assert held.drain == ()
    for name in names:
        code, reason = kept(held)[name]
        assert code == codes.SCALE_DOWN_COOLDOWN
        assert "scale-down drain failed 2m" in reason and "scale_down_delay_after_failure_minutes" in reason
    assert "failed" in held.state.scale_down  # still waiting: carried

    w.state = held.state.to_wire()
    after = w.plan(now=NOW + timedelta(minutes=1), max_scale_in_fraction=1.0)
    assert len(after.drain) == 2 and "failed" not in after.state.scale_down
    assert len(w.plan(max_scale_in_fraction=1.0, scale_down_delay_after_failure_minutes=0).drain) == 2


def test_the_later_of_two_waits_is_the_one_named() -> None:
    w, (name, *_) = idle_group(2)
    w.state["scale_down"] = {
        "deleted": {"since": (NOW - timedelta(minutes=1)).isoformat()},
        "failed": {"since": (NOW - timedelta(minutes=1)).isoformat()},
    }

    result = w.plan(scale_down_delay_after_delete_minutes=10)

    assert "scale_down_delay_after_delete_minutes" in kept(result)[name][1]
    assert "waits 9m" in kept(result)[name][1]


def test_a_consolidation_waits_too_but_its_candidate_timer_goes_on() -> None:
    w, (a, _) = half_full()
    w.state["scale_down"] = {"failed": {"since": (NOW - timedelta(minutes=1)).isoformat()}}

    held = w.plan(max_scale_in_fraction=1.0, **UNDER)

    assert held.drain == ()
    assert kept(held)[a][0] == codes.SCALE_DOWN_COOLDOWN
    assert set(held.state.underutilized) >= {a}  # still a candidate, since this plan

    w.state = held.state.to_wire()
    after = w.plan(now=NOW + timedelta(minutes=2), max_scale_in_fraction=1.0, **UNDER)
    assert [d.node for d in after.drain] == [a] and after.drain[0].code == codes.CONSOLIDATION


@pytest.mark.parametrize(
    "text, field",
    [
        ("scale_down_delay_after_delete_minutes: -1\n", "scale_down_delay_after_delete_minutes"),
        ("scale_down_delay_after_failure_minutes: .nan\n", "scale_down_delay_after_failure_minutes"),
        ("scale_down_delay_after_failure_minutes: soon\n", "scale_down_delay_after_failure_minutes"),
    ],
)
def test_a_bad_delay_is_refused_naming_it(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "spillway.yaml"
    path.write_text(text)
    with pytest.raises(ConfigurationError) as raised:
        load_config_file(path)
    assert raised.value.field == field and "unknown config key" not in str(raised.value)
