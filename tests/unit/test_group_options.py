"""cluster-autoscaler's per-group autoscaling options (``k8s.io/cluster-autoscaler/node-template/
autoscaling-options/<option>`` tags on an Auto Scaling group): each overrides, for that group's nodes,
the planner setting that plays the flag's part (spillway.model.options)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from plan_world import NOW, World
from test_planner_consolidation import kept, replicas, tag
from test_planner_unready import _not_ready

from spillway.config import PlannerConfig
from spillway.local import objects as o
from spillway.model.nodegroup import NodeGroup
from spillway.model.options import TAG_OPTIONS, parse_duration_minutes, parse_options
from spillway.planner import codes

# --- reading the tags ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "minutes"),
    [
        ("10m0s", 10),
        ("1h30m", 90),
        ("90s", 1.5),
        ("300ms", 0.005),
        ("0", 0),
        ("1.5h", 90),
        ("2m30.5s", 2.5 + 0.5 / 60),
    ],
)
def test_go_durations(text: str, minutes: float) -> None:
    assert parse_duration_minutes(text) == pytest.approx(minutes)


@pytest.mark.parametrize("text", ["10", "m", "", "-1m", "10 m", "1d", "5mm"])
def test_what_is_not_a_go_duration_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration_minutes(text)


def test_each_option_sets_the_settings_it_overrides_and_a_bad_one_is_named() -> None:
    tags = {
        TAG_OPTIONS + "scaledownutilizationthreshold": "0.7",
        TAG_OPTIONS + "scaledownunneededtime": "2m0s",
        TAG_OPTIONS + "ignoredaemonsetsutilization": "true",
        TAG_OPTIONS + "scaledownunreadytime": "soon",
        TAG_OPTIONS + "scaledowngpuutilizationthreshold": "1.5",
        TAG_OPTIONS + "maxnodeprovisiontime": "0s",
        TAG_OPTIONS + "scaledowndelay": "5m",
        "k8s.io/cluster-autoscaler/enabled": "true",
    }

    options, problems = parse_options(tags)

    assert dict(options) == {
        "consolidation_utilization_threshold": 0.7,
        "scale_down_idle_minutes": 2.0,
        "consolidation_after_minutes": 2.0,
        "ignore_daemonsets_utilization": True,
    }
    assert len(problems) == 4
    joined = "\n".join(problems)
    assert f"Tags[{TAG_OPTIONS}scaledownunreadytime]: 'soon' is not a duration" in joined
    assert "scaledowngpuutilizationthreshold]: '1.5' is not between 0 and 1" in joined
    assert "maxnodeprovisiontime]: '0s' is not above 0" in joined
    assert "scaledowndelay]: not an autoscaling option Spillway reads" in joined


def test_a_group_keeps_its_options_and_problems_through_its_wire_form() -> None:
    w = World()
    w.group("cpu", "m5.2xlarge", max_size=5)
    tag(w, "cpu", TAG_OPTIONS + "scaledownunneededtime", "3m")
    tag(w, "cpu", TAG_OPTIONS + "scaledownunreadytime", "later")
    _, (group, *_), *_ = w.parsed()

    assert group.options == (("consolidation_after_minutes", 3.0), ("scale_down_idle_minutes", 3.0))
    assert any("scaledownunreadytime" in p for p in group.problems)
    assert NodeGroup.from_dict(group.to_dict()) == group
    assert "options" not in NodeGroup.from_dict({**group.to_dict(), "options": {}}).to_dict()


def test_options_override_the_configuration() -> None:
    config = PlannerConfig(scale_down_idle_minutes=10)
    assert config.with_options(()) is config
    assert config.with_options((("scale_down_idle_minutes", 2.0),)).scale_down_idle_minutes == 2.0


# --- what the planner does with them -------------------------------------------------------------


def _two_idle_groups() -> tuple[World, str, str]:
    """An idle node in ``fast`` (tagged scaledownunneededtime 2m) and one in ``slow`` (the config's
    10 minutes), both idle for 3 minutes."""
    w = World()
    (fast,) = w.group("fast", "m5.2xlarge", nodes=1, max_size=5)
    (slow,) = w.group("slow", "m5.2xlarge", nodes=1, max_size=5)
    tag(w, "fast", TAG_OPTIONS + "scaledownunneededtime", "2m0s")
    for node in (fast, slow):
        w.idle_since(node, 3)
    return w, fast, slow


def test_a_groups_unneeded_time_decides_when_its_idle_nodes_go() -> None:
    w, fast, slow = _two_idle_groups()

    result = w.plan(max_scale_in_fraction=1.0)

    assert [d.node for d in result.drain] == [fast]
    assert "threshold 2m" in result.drain[0].reason
    code, reason = kept(result)[slow]
    assert code == codes.IDLE_BELOW_THRESHOLD and "of the 10m needed" in reason


def test_a_groups_unready_time_decides_when_its_not_ready_nodes_are_judged() -> None:
    w = World()
    (dead,) = w.group("cpu", "m5.2xlarge", nodes=1, max_size=5)
    _not_ready(w, dead, 60)
    w.idle_since(dead, 6)
    # idle for 20 minutes by default, NotReady however long
    assert kept(w.plan(max_scale_in_fraction=1.0))[dead][0] == codes.IDLE_BELOW_THRESHOLD

    tag(w, "cpu", TAG_OPTIONS + "scaledownunreadytime", "5m")
    assert [d.node for d in w.plan(max_scale_in_fraction=1.0).drain] == [dead]


def _busy(**tags: str) -> tuple[World, str]:
    """Two nodes of a consolidating group: ``a`` runs 4.5 of 7.9 CPU in pods that may move (57 %), ``b``
    has room for them."""
    w = World(regions=("us-east-1",))
    a, b = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10))
    replicas(w, a, "web", 3)
    replicas(w, b, "small", 1, cpu="500m", annotations={})  # may not move: b is never the candidate
    for option, value in tags.items():
        tag(w, "cpu", TAG_OPTIONS + option, value)
    return w, a


def test_a_groups_utilization_threshold_decides_which_busy_nodes_are_consolidated() -> None:
    config = {"consolidation": "when-underutilized", "max_scale_in_fraction": 1.0}
    w, a = _busy()
    assert kept(w.plan(**config))[a][0] == codes.UTILIZED  # 57 % > 0.5

    w, a = _busy(scaledownutilizationthreshold="0.6")
    assert [(d.node, d.code) for d in w.plan(**config).drain] == [(a, codes.CONSOLIDATION)]


def test_daemonset_requests_count_unless_the_group_ignores_them() -> None:
    config = {"consolidation": "when-underutilized", "max_scale_in_fraction": 1.0}
    for ignore, expected in (("false", codes.UTILIZED), ("true", None)):
        w = World(regions=("us-east-1",))
        a, _ = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10))
        replicas(w, a, "web", 2)  # 3 CPU: 38 %
        agent = o.daemonset_pod("agent-a", a)
        agent["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1500m", "memory": "1Gi"}}
        w.items.append(agent)  # with it: 57 %
        tag(w, "cpu", TAG_OPTIONS + "ignoredaemonsetsutilization", ignore)
        result = w.plan(**config)
        if expected is None:
            assert a in {d.node for d in result.drain}
        else:
            assert kept(result)[a][0] == expected


def test_ignored_daemonset_requests_leave_the_allocatable_too() -> None:
    """cluster-autoscaler's ``--ignore-daemonsets-utilization`` takes DaemonSet pods' requests out of
    both sides: out of the pods' requests and out of the node's allocatable
    (simulator/utilization/info.go, CalculateUtilizationOfResource: requests / (allocatable - DaemonSet
    requests); kubernetes/autoscaler#3641). A pod of 3.5 CPU beside a 1.5-CPU agent on a node of 7.91:
    3.5 / 6.41 = 55 %, not underutilized; counted against the whole node (44 %) it was consolidated."""
    config = {"consolidation": "when-underutilized", "max_scale_in_fraction": 1.0}
    w = World(regions=("us-east-1",))
    a, _ = sorted(w.group("cpu", "m5.2xlarge", nodes=2, max_size=10))
    replicas(w, a, "web", 1, cpu="3500m")
    agent = o.daemonset_pod("agent-a", a)
    agent["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1500m", "memory": "1Gi"}}
    w.items.append(agent)
    tag(w, "cpu", TAG_OPTIONS + "ignoredaemonsetsutilization", "true")
    result = w.plan(**config)

    assert result.drain == ()
    code, reason = kept(result)[a]
    assert code == codes.UTILIZED and "requests use 55% of its cpu" in reason, reason
    # at 0.6 it is underutilized, and moves
    assert [d.node for d in w.plan(**config, consolidation_utilization_threshold=0.6).drain] == [a]


def test_a_gpu_node_is_judged_by_its_gpus_when_the_group_says_how() -> None:
    """A p4d whose CPU is mostly requested (dominant share above 0.5) runs 2 of 8 GPUs: by the GPU
    threshold it is underutilized."""
    config = {"consolidation": "when-underutilized", "max_scale_in_fraction": 1.0}
    results = {}
    for threshold in (None, "0.5"):
        w = World(regions=("us-east-1",))
        a, _ = sorted(w.group("gpu", "p4d.24xlarge", nodes=2, max_size=10, gpu_taint=True))
        w.gpu_pods("train", 2, 1, cpu="30", memory="100Gi", node_name=a, owner=("ReplicaSet", "train"),
                   annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"})  # fmt: skip
        if threshold is not None:
            tag(w, "gpu", TAG_OPTIONS + "scaledowngpuutilizationthreshold", threshold)
        results[threshold] = w.plan(**config)
    code, reason = kept(results[None])[a]
    assert code == codes.UTILIZED and "of its cpu" in reason
    assert a in {d.node for d in results["0.5"].drain}


def test_a_groups_provision_time_decides_when_a_launch_that_never_joined_is_given_up() -> None:
    w = World()
    w.group("cpu", "m5.2xlarge", nodes=1, max_size=10)
    tag(w, "cpu", TAG_OPTIONS + "maxnodeprovisiontime", "5m")
    iid = w.add_instance("cpu", register=False)
    w.state = w.plan().state.to_wire()

    result = w.plan(NOW + timedelta(minutes=5))

    assert [u.instance_id for u in result.unregistered] == [iid]  # not after the config's 15 minutes
