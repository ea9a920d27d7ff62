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


def test_a_priority_below_minus_one_ranks_a_group_as_none_matching_it() -> None:
    """cluster-autoscaler's priority filter (kubernetes/autoscaler cluster-autoscaler/expander/priority/
    priority.go, ``BestOptions``) starts its best priority at -1 and skips every priority below the best
    so far: a group whose highest matching priority is -2 or lower is never preferred, to a group no
    regex matches nor to another such group; -1 still counts. Its readme asks for positive values, but
    Spillway reads the same ConfigMap, so it ranks such groups as it would."""
    w, pods = _world()
    # by name alone a-general comes first; a priority of -5 for b-reserved changes nothing
    assert set(scale_up(w.plan(expander_priorities={-5: ["^b-"]}))) == {"a-general"}
    assert set(scale_up(w.plan(expander_priorities={-5: ["^b-"], -9: ["^a-"]}))) == {"a-general"}
    # -1 is a priority cluster-autoscaler honours: above a group none matches, below 0
    assert scale_up(w.plan(expander_priorities={-1: ["^b-"]})) == {"b-reserved": (0, 3, pods)}
    assert set(scale_up(w.plan(expander_priorities={-1: ["^a-"], 0: ["^b-"]}))) == {"b-reserved"}
    assert priority_of({-2: ("b",), -1: ("x",)}, "b-reserved") is None
    assert priority_of({-2: ("b",), 3: ("reserved",)}, "b-reserved") == 3


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


CONFIGMAP = "ConfigMap kube-system/cluster-autoscaler-priority-expander"


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"priorities": "5:\n  - '(unclosed'\n"}, "priority 5, pattern 0: '(unclosed'"),  # Go: regexp.Compile
        ({"priorities": "50: [reserved\n"}, "not YAML"),  # yaml.Unmarshal
        ({"priority": "50:\n  - reserved\n"}, "no priorities key"),  # reloadConfigMap: !found
        ({"priorities": ""}, "empty"),  # parsePrioritiesYAMLString: prioritiesYAML == ""
        # no map of priorities (yaml.Unmarshal into map[int][]string fails); PyYAML's recursive composer
        # raised RecursionError out of the snapshot (observe and spillway plan failed for everybody)
        ({"priorities": "[" * 5000 + "]" * 5000}, "nested too deeply"),
    ],
)
def test_a_configmap_cluster_autoscaler_cannot_read_ranks_no_group_and_the_plan_names_it(
    data: dict[str, str], words: str
) -> None:
    """cluster-autoscaler's priority filter returns every option to the next expander when its ConfigMap
    cannot be read (BestOptions: ``if err != nil { return expansionOptions }``, since #5246 in 1.26,
    back-ported to 1.24 and 1.25): the plan ranks the groups as without priorities and names the
    ConfigMap, its field and why, once, as a problem of the plan."""
    w, pods = _world()
    w.items.append({**_config_map(""), "data": data})
    snapshot, *_ = w.parsed()
    assert snapshot.expander_priorities == {} and words in snapshot.expander_problem
    assert type(snapshot).from_dict(snapshot.to_dict()) == snapshot

    result = w.plan()

    assert scale_up(result) == {"a-general": (0, 3, pods)}  # by name: no priorities
    (problem,) = result.problems
    assert (problem.object, problem.field) == (CONFIGMAP, "data.priorities")
    assert words in problem.reason and "without priorities" in problem.reason
    assert result.to_dict()["problems"] == [problem.to_dict()]
    assert w.plan(expander_priorities={50: ["general"]}).problems == ()  # the configuration's rank


def test_a_configmap_of_no_priorities_is_read_as_none_without_a_problem() -> None:
    """yaml.v2 reads a document of only whitespace or ``null`` as an empty map, no error: no priorities,
    so every option goes on (no group matched), and nothing is wrong with the ConfigMap."""
    for text in ("  \n", "# none yet\n", "~\n", "{}"):
        w, _ = _world()
        w.items.append(_config_map(text))
        snapshot, *_ = w.parsed()
        assert (snapshot.expander_priorities, snapshot.expander_problem) == ({}, "")
        assert w.plan().problems == ()


def test_the_problem_is_summarized_and_counted_as_cluster_autoscaler_names_its_event() -> None:
    from test_planning import record_metrics

    from spillway.act.planning import summarize

    w, _ = _world()
    w.items.append(_config_map("5:\n  - '(unclosed'\n"))
    summary = summarize(w.plan(), "us-east-1").to_dict()
    assert summary["priority_configmap_invalid"] == 1
    assert record_metrics({"summary": summary})["PriorityConfigMapInvalid"] == 1.0
    clean = summarize(_world()[0].plan(), "us-east-1").to_dict()
    assert record_metrics({"summary": clean})["PriorityConfigMapInvalid"] == 0.0


def test_a_configmap_turning_unreadable_is_news_to_plan_on() -> None:
    """The snapshot's fingerprint (a plan is skipped when it is unchanged) changes when the ConfigMap
    turns unreadable though the priorities stay none: the next plan names the problem."""
    from dataclasses import replace

    from spillway.model.snapshot import fingerprint

    w, _ = _world()
    snapshot, groups, *_ = w.parsed()
    unreadable = replace(snapshot, expander_problem="empty")
    assert fingerprint(unreadable, groups) != fingerprint(snapshot, groups)
    assert fingerprint(replace(unreadable, expander_problem=""), groups) == fingerprint(snapshot, groups)
