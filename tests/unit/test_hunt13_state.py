"""hunt13: the state table's items under concurrency and redelivery (claims, markers, leases)."""

from __future__ import annotations

from typing import Any

import pytest
from test_shared_group import UP, World

from spillway.errors import AwsUnavailable


def test_hunt13_a_retried_raise_is_not_taken_as_asked_by_another_groups_set_marker() -> None:
    """A plan scales up two groups of one region whose names share a prefix, ``gpu`` and ``gpu-a``: their
    owners are ``up-p-1-1-us-east-1-gpu`` and ``up-p-1-1-us-east-1-gpu-a``. gpu-a's raise is answered
    (``set#up-p-1-1-us-east-1-gpu-a``). gpu's marker PutItem lands but its answer is lost (README,
    *Sharing a group*: "a retry that finds the marker without it (the marker's own write answered with an
    error, failing the step before the raise) settles it as a lost answer is settled: raised now if it
    never applied"). The retry must raise gpu. The ledger's ``claims(cluster, prefix)`` is a Query with
    ``begins_with`` on the sort key (DynamoDB Developer Guide, "Key condition expressions for Query":
    begins_with matches every key starting with the prefix), so ``_asked`` reading
    ``set#up-p-1-1-us-east-1-gpu`` also finds gpu-a's ``set#`` item and takes gpu's raise as asked: gpu is
    never raised, its scale-up waits for nodes nobody launches and backs the group off."""
    w = World()
    w.cloud.add_group("gpu-a", ["i-0aaa0000000000000"], max_size=10, instance_type="g5.xlarge")
    up_a = {**UP, "group": {**UP["group"], "group": "gpu-a"}}
    prep_a = w.up.prepare(up_a)
    prep = w.up.prepare(UP)
    w.up.set_desired({**up_a, "prep": prep_a})
    assert w.cloud.groups[("us-east-1", "gpu-a")]["DesiredCapacity"] == 3

    real = w.ledger.claim
    lost: list[str] = []

    def claim(cluster: str, item: str, value: Any, **kw: Any) -> Any:
        got = real(cluster, item, value, **kw)
        if item == "raise#" + prep["owner"] and not lost:  # landed, answer lost: the step fails
            lost.append(item)
            raise AwsUnavailable(f"PutItem {item}: connection reset")
        return got

    w.ledger.claim = claim  # type: ignore[method-assign]
    with pytest.raises(AwsUnavailable):
        w.up.set_desired({**UP, "prep": prep})
    assert w.desired == 1  # nothing asked of Auto Scaling yet

    out = w.up.set_desired({**UP, "prep": prep})  # Step Functions retries the step

    assert w.desired == 3, out  # raised now: it never applied
