"""Scheduling predicates with kube-scheduler's semantics."""

from __future__ import annotations

import pytest

from spillway.planner.predicates import (
    affinity_holds,
    preferred_against,
    tolerates,
    untolerated_taint,
    why_not_placeable,
)

LABELS = {"zone": "a", "gen": "5", "gpu": "a10g"}


@pytest.mark.parametrize(
    ("op", "values", "expected"),
    [
        ("In", ("a", "b"), True),
        ("In", ("c",), False),
        ("NotIn", ("c",), True),
        ("NotIn", ("a",), False),
        ("Exists", (), True),
        ("DoesNotExist", (), False),
    ],
)
def test_set_operators(op: str, values: tuple[str, ...], expected: bool) -> None:
    assert affinity_holds(((("zone", op, values, False),),), LABELS, None) is expected


def test_gt_lt_compare_integers_and_fail_on_missing_or_non_numeric_labels() -> None:
    assert affinity_holds(((("gen", "Gt", ("4",), False),),), LABELS, None)
    assert not affinity_holds(((("gen", "Lt", ("5",), False),),), LABELS, None)
    assert not affinity_holds(((("gpu", "Gt", ("1",), False),),), LABELS, None)
    assert not affinity_holds(((("missing", "Lt", ("9",), False),),), LABELS, None)


@pytest.mark.parametrize(
    ("label", "op", "value", "expected"),
    [
        ("50", "Gt", "10", True),
        ("+50", "Gt", "10", True),  # strconv.ParseInt takes a sign and leading zeros
        ("050", "Gt", "9", True),
        ("5_0", "Gt", "10", False),  # a valid label value; ParseInt in base 10 refuses underscores
        ("50", "Gt", "1_0", False),
        ("9223372036854775807", "Gt", "1", True),
        ("9223372036854775808", "Gt", "1", False),  # beyond int64: ParseInt's range error
        ("1", "Lt", "99999999999999999999", False),
        ("1", "Lt", "0" * 61 + "2", True),  # leading zeros: still 2 (63 characters, a label value)
        ("1", "Lt", "9" * 5000, False),  # no int() of 5,000 digits either (Python refuses past 4,300)
    ],
)
def test_gt_lt_read_both_numbers_as_go_parses_them(label: str, op: str, value: str, expected: bool) -> None:
    """kube-scheduler matches node affinity Gt/Lt with k8s.io/apimachinery labels.Requirement.Matches,
    which reads the label and the value with strconv.ParseInt(s, 10, 64): either failing, no match."""
    assert affinity_holds(((("gen", op, (value,), False),),), {"gen": label}, None) is expected


@pytest.mark.parametrize(
    ("op", "values"),
    [
        ("Gt", ("-1",)),  # ParseInt takes it, but a label value starts with a letter or digit
        ("Lt", ("+9",)),
        ("Lt", ("0" * 63 + "9",)),  # 64 characters: longer than a label value may be
        ("Lt", ("0" * 5000 + "9",)),
        ("In", ("5", "five or more")),  # a space: no label value
        ("NotIn", ("-",)),
    ],
)
def test_a_requirement_whose_value_is_no_label_value_makes_its_term_match_no_node(
    op: str, values: tuple[str, ...]
) -> None:
    """kube-scheduler builds each term with labels.NewRequirement, which refuses a value that is not a
    valid label value (IsValidLabelValue) for every operator, Gt and Lt included; the term's parse error
    makes it match nothing (component-helpers nodeaffinity, nodeSelectorTerm.match), while another term
    still may. The API server does not check the values of a pod's node affinity."""
    bad = (("gen", op, values, False),)
    good = (("zone", "In", ("a",), False),)
    assert not affinity_holds((bad,), LABELS, None)
    assert affinity_holds((bad, good), LABELS, None)


def test_terms_are_ored_requirements_anded_and_an_empty_term_matches_nothing() -> None:
    wrong = (("zone", "In", ("b",), False),)
    right = (("zone", "In", ("a",), False), ("gen", "Exists", (), False))
    assert affinity_holds((wrong, right), LABELS, None)
    assert not affinity_holds((wrong,), LABELS, None)
    assert not affinity_holds(((),), LABELS, None)
    assert affinity_holds((), LABELS, None)


def test_match_fields_compare_the_node_name() -> None:
    term = (("metadata.name", "In", ("node-1",), True),)
    assert affinity_holds((term,), {}, "node-1")
    assert not affinity_holds((term,), {}, "node-2")
    assert not affinity_holds((term,), {}, None)  # a template node has no name yet


def test_tolerations() -> None:
    taint = ("nvidia.com/gpu", "present", "NoSchedule")
    assert tolerates(("nvidia.com/gpu", "Exists", None, None), taint)
    assert tolerates(("nvidia.com/gpu", "Equal", "present", "NoSchedule"), taint)
    assert not tolerates(("nvidia.com/gpu", "Equal", "absent", None), taint)
    assert not tolerates(("nvidia.com/gpu", "Exists", None, "NoExecute"), taint)
    assert tolerates((None, "Exists", None, None), taint)
    assert untolerated_taint([], [("soft", None, "PreferNoSchedule")]) is None
    assert untolerated_taint([], [taint]) == taint


def test_preferred_against_counts_only_the_prefer_no_schedule_taints_a_pod_does_not_tolerate() -> None:
    soft, other = (
        ("spillway.io/scale-down-candidate", None, "PreferNoSchedule"),
        ("x", "y", "PreferNoSchedule"),
    )
    hard = ("nvidia.com/gpu", "present", "NoSchedule")
    assert preferred_against([], [soft, other, hard]) == 2
    assert preferred_against([("x", "Equal", "y", None)], [soft, other, hard]) == 1
    assert preferred_against([(None, "Exists", None, None)], [soft, other]) == 0
    assert (
        preferred_against([("spillway.io/scale-down-candidate", "Exists", None, "NoSchedule")], [soft]) == 1
    )


def test_why_not_names_the_first_failing_constraint() -> None:
    assert (
        why_not_placeable((("zone", "b"),), (), (), LABELS, (), None) == "nodeSelector zone=b does not match"
    )
    assert (
        why_not_placeable((), (), (), LABELS, (("d", None, "NoSchedule"),), None)
        == "taint d:NoSchedule not tolerated"
    )
    assert why_not_placeable((("zone", "a"),), (), (), LABELS, (), None) is None


@pytest.mark.parametrize(
    ("operator", "value", "taint_value", "expected"),
    [
        ("Gt", "900", "950", True),  # the taint's value above the toleration's
        ("Gt", "950", "950", False),
        ("Lt", "100", "50", True),  # below it
        ("Lt", "100", "-7", True),
        ("Lt", "100", "150", False),
        ("Gt", "900", "0950", False),  # not canonical: no leading zero, no "+"
        ("Gt", "+900", "950", False),
        ("Gt", "900", "high", False),
        ("Lt", "9223372036854775808", "1", False),  # beyond int64
        ("Lt", "9" * 5000, "1", False),  # a configured buffer's toleration: no int() of 5,000 digits
        ("Gt", "900", None, False),
    ],
)
def test_comparison_tolerations_compare_the_taints_value_with_their_own(
    operator: str, value: str, taint_value: str | None, expected: bool
) -> None:
    """Kubernetes 1.35's Lt and Gt (k8s.io/api core/v1 toleration.go, compareNumericValues)."""
    assert tolerates(("sla", operator, value, "NoSchedule"), ("sla", taint_value, "NoSchedule")) is expected


def test_a_pod_with_a_comparison_toleration_is_read_and_placed_by_it() -> None:
    """A pod the API server took with operator Gt parses (a Literal of Exists and Equal refused it, and
    with it the whole pod list observe reads) and is planned onto the node whose taint it tolerates."""
    from plan_world import World, scale_up

    from spillway.local import objects as o

    w = World(regions=("us-east-1",))
    for name, sla in (("bronze", "500"), ("gold", "950")):
        w.group(name, "m5.2xlarge", max_size=5)
        tag = {"Key": "k8s.io/cluster-autoscaler/node-template/taint/sla", "Value": f"{sla}:NoSchedule"}
        w.groups[name]["Tags"].append({"ResourceId": name, "ResourceType": "auto-scaling-group", **tag})
    pod = o.pod("api-0", cpu="1", memory="1Gi", owner=("ReplicaSet", "api"))
    pod["spec"]["tolerations"].append(
        {"key": "sla", "operator": "Gt", "value": "900", "effect": "NoSchedule"}
    )
    w.items.append(pod)

    assert scale_up(w.plan()) == {"gold": (0, 1, ["default/api-0"])}
