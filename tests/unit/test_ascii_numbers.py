"""Numbers in what users and the cluster write are ASCII digits, as the real readers take them (Go's
strconv for Kubernetes, cluster-autoscaler and Karpenter; robfig/cron; RFC 6901 JSON Pointer). Python's
``str.isdigit`` and ``\\d`` also take other scripts' digits ("\u0661\u0662", which ``int`` reads as 12) and
superscripts ("²", which ``int`` refuses)."""

from __future__ import annotations

import pytest

from spillway.local.kubeapi.disruption import check_int_or_percent
from spillway.local.kubeapi.patch import PatchError, json_patch
from spillway.local.kubeapi.selectors import parse_label_selector
from spillway.local.kubeapi.status import KubeApiError
from spillway.model.quantity import is_digits


@pytest.mark.parametrize(
    ("text", "digits"),
    [
        ("0", True),
        ("120", True),
        ("", False),
        ("\u0661\u0662", False),
        ("\u00b2", False),
        ("1\u00b2", False),
        ("-1", False),
    ],
)
def test_only_ascii_digits_are_digits(text: str, digits: bool) -> None:
    assert is_digits(text) is digits


def test_a_budget_percent_in_other_digits_is_refused_as_the_api_server_refuses_it() -> None:
    assert check_int_or_percent("50%") is None
    assert check_int_or_percent("\u0665\u0660%") is not None


def test_a_json_patch_index_in_other_digits_is_refused() -> None:
    doc = {"a": [1, 2]}
    assert json_patch(doc, [{"op": "replace", "path": "/a/1", "value": 3}]) == {"a": [1, 3]}
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "replace", "path": "/a/\u0661", "value": 3}])


def test_a_label_selector_comparison_with_other_digits_is_a_bad_request() -> None:
    parse_label_selector("rank>1")
    with pytest.raises(KubeApiError):
        parse_label_selector("rank>\u0661")
