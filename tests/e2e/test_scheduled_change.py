"""A scheduled change's forced drain end to end on the rig: moto executes the real DrainNode ASL, the
real drain function answers its Lambda tasks, Kubernetes is the API emulator.

The interrupt function starts it with the AWS Health notice, days before the change, with
``not_before`` a day before the change's start less the margin (spillway.act.interrupt.forced_later):
the execution waits (its Wait state), touching nothing, then validates the node as it is and drains it
with force, so that a PodDisruptionBudget that held the drain without force cannot leave pods on the
instance when EC2 retires it. Here the wait is seconds, not days."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from conftest import CLUSTER, Cloud
from test_drain_faults import wait_for

from spillway.act.drain import COUNTED_EXPIRES_AT, DRAIN_COUNTED_KEPT, WAIT_SLACK_SECONDS
from spillway.adapters.aws import AwsAdapter
from spillway.local import objects
from spillway.model.drain import MAX_EXECUTION_SECONDS, ScheduledEvent

CORDONED = "spillway.io/cordoned"


def forced_retirement_drain(
    instance: str, node: str, not_before: datetime, start: datetime
) -> dict[str, Any]:
    """The forced drain an instance retirement starting at ``start`` gets, waiting until ``not_before``
    (as the interrupt function asks for it: act.interrupt.forced_later), with a short deadline."""
    return {
        "cluster": CLUSTER, "node": node, "instance_id": instance, "region": "us-east-1", "force": True,
        "leaving": True, "notice": "scheduled", "deadline_seconds": 4, "poll_seconds": 1,
        "reason": "scheduled change arn:aws:health:us-east-1::event/EC2/X/abc",
        "not_before": not_before.isoformat().replace("+00:00", "Z"),
        "scheduled_start": start.isoformat().replace("+00:00", "Z"), "event_code": "instance-retirement",
    }  # fmt: skip


def node_with_a_pod_held(cloud: Cloud) -> tuple[str, str]:
    """Group g of two nodes; the first runs web-0, whose budget never allows an eviction. Its instance
    and node."""
    cloud.group("g", instance_type="m5.large", desired=2, gpu=False)
    cloud.wait_nodes(2)
    instance, node = sorted(dict(cloud.registrar.registered).items())[0]
    owner = ("ReplicaSet", "web-5d9c")
    cloud.kube.add(objects.pod("web-0", "team-a", node_name=node, labels={"app": "web-0"}, owner=owner))
    cloud.kube.add(objects.pdb("web-0", "team-a", {"app": "web-0"}, min_available=1))
    return instance, node


def test_a_forced_drain_not_before_a_later_time_waits_untouched_then_drains_past_a_budget(
    cloud: Cloud,
) -> None:
    instance, node = node_with_a_pod_held(cloud)  # only the deadline's force takes the pod off
    # seconds ahead: the rig takes a few to start the execution on a loaded machine
    not_before = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=15)
    request = {
        "cluster": CLUSTER, "node": node, "instance_id": instance, "force": True, "leaving": True,
        "notice": "scheduled", "deadline_seconds": 4, "poll_seconds": 1,
        "reason": "scheduled change arn:aws:health:us-east-1::event/EC2/X/abc",
        "not_before": not_before.isoformat().replace("+00:00", "Z"),
    }  # fmt: skip
    arn = cloud.stack.start("DrainNodeStateMachine", request, name=f"scheduled-{instance}-abc-force")

    def validated() -> bool:
        calls = cloud.stack.calls("DrainFunction")
        return bool(calls) and calls[0].result is not None

    wait_for(validated, timeout=30, what="the first validation's answer")
    time.sleep(1)
    seen_at, waiting = datetime.now(UTC), cloud.kube.get("Node", node)
    assert seen_at < not_before  # still waiting: nothing was touched
    assert not waiting["spec"].get("unschedulable")
    assert CORDONED not in (waiting["metadata"].get("annotations") or {})
    [first] = cloud.stack.calls("DrainFunction")
    assert first.result["waiting"] == {"until": request["not_before"], "request": request}
    # and, as every validation answers, when a mark of the execution's count may expire (26 h + 15 days on)
    expires = int(first.result[COUNTED_EXPIRES_AT]) - seen_at.timestamp()
    assert set(first.result) == {"waiting", COUNTED_EXPIRES_AT}
    assert MAX_EXECUTION_SECONDS + DRAIN_COUNTED_KEPT.total_seconds() - 60 < expires
    assert expires <= MAX_EXECUTION_SECONDS + DRAIN_COUNTED_KEPT.total_seconds()

    wait_for(
        lambda: bool((cloud.kube.get("Node", node) or {}).get("spec", {}).get("unschedulable")),
        timeout=30,
        what="the cordon after not_before",
    )
    cordoned_at = datetime.now(UTC)
    result = cloud.stack.wait(arn, timeout=60)

    # moto's Wait waits the whole seconds to the timestamp (up to one short of it; AWS's ends at it), and
    # the drain goes on within WAIT_SLACK_SECONDS of it
    assert cordoned_at >= not_before - timedelta(seconds=WAIT_SLACK_SECONDS)
    assert result["status"] == "SUCCEEDED", result
    assert result["output"]["outcome"] == "terminated", result["output"]
    actions = [c.event.get("action") for c in cloud.stack.calls("DrainFunction")]
    assert actions[:3] == ["validate", "validate", "cordon"] and "uncordon" not in actions
    assert instance not in cloud.instances()


def test_a_forced_drain_for_a_change_ec2_no_longer_lists_wakes_and_ends_cancelled_untouched(
    cloud: Cloud,
) -> None:
    """The change the drain waited for is gone from EC2 by then (canceled, or completed by a stop and
    start): moto lists the instance's status with no scheduled event at all (it models none), which is
    what EC2 answers a week after an event completed. After its wait the drain reads that
    (DescribeInstanceStatus, through the real adapter) and ends ``cancelled``, a success, the node never
    cordoned and its pod, which a budget holds, still running; before, it drained and deleted the pod
    at its deadline."""
    instance, node = node_with_a_pod_held(cloud)
    not_before = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=8)
    start = not_before + timedelta(days=1, seconds=300)
    request = forced_retirement_drain(instance, node, not_before, start)
    arn = cloud.stack.start("DrainNodeStateMachine", request, name=f"scheduled-{instance}-abc-force")
    result = cloud.stack.wait(arn, timeout=60)

    assert result["status"] == "SUCCEEDED", result
    assert result["output"]["outcome"] == "cancelled", result["output"]
    actions = [c.event.get("action") for c in cloud.stack.calls("DrainFunction")]
    assert "cordon" not in actions and "terminate" not in actions
    after = cloud.kube.get("Node", node)
    assert not after["spec"].get("unschedulable") and CORDONED not in (
        after["metadata"].get("annotations") or {}
    )
    assert cloud.kube.get("Pod", "web-0", "team-a") is not None
    assert instance in cloud.instances()


def test_two_forced_drains_following_one_event_drain_and_terminate_the_node_once(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The forced drain of a change's old start (which followed the move) and the one AWS Health's
    update started for the new start wake together and follow the same EC2 event. Both drained to the
    same deadline and both terminated; then the later cordon took the node over, which a drain already
    past its last check never saw (both terminated, under load). Now the first to cordon drains, the
    other's cordon leaves it and that one stops ``superseded``, and the instance is terminated once.
    moto lists no scheduled event, so the adapter's DescribeInstanceStatus answer is the event itself
    here."""
    instance, node = node_with_a_pod_held(cloud)
    not_before = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=10)
    start = not_before + timedelta(days=1, seconds=300)
    event = ScheduledEvent(
        "instance-event-0d59937288b749b32", "instance-retirement", "degraded hardware", start
    )
    monkeypatch.setattr(AwsAdapter, "scheduled_events", lambda self, region, instance_id: [event])
    # a deadline the second execution's wake-up cannot overrun on a loaded machine: one that woke after
    # the first had terminated the instance and deleted its Node would find nothing to stand by for
    request = {**forced_retirement_drain(instance, node, not_before, start), "deadline_seconds": 12}
    arns = [
        cloud.stack.start("DrainNodeStateMachine", request, name=f"scheduled-{instance}-{digest}-force")
        for digest in ("1111111111", "2222222222")
    ]
    results = [cloud.stack.wait(arn, timeout=90) for arn in arns]

    assert [r["status"] for r in results] == ["SUCCEEDED", "SUCCEEDED"], results
    assert sorted(r["output"]["outcome"] for r in results) == ["superseded", "terminated"], results
    actions = [c.event.get("action") for c in cloud.stack.calls("DrainFunction")]
    assert actions.count("terminate") == 1 and "uncordon" not in actions
    cordons = [c.result for c in cloud.stack.calls("DrainFunction") if c.event.get("action") == "cordon"]
    assert sorted(c is not None and c["cordoned"] for c in cordons) == [False, True], cordons
    assert instance not in cloud.instances()


def test_a_forced_drain_standing_by_for_one_of_the_same_event_drains_when_that_one_is_stopped(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Of two forced drains following one EC2 event, the one that found the other holding the node
    stopped ``superseded`` at once, so when the other then ended without draining (stopped here, as an
    operator or a redeploy stops it; a failure leaves its cordon too) the pod stayed on the instance for
    EC2 to retire it with. Now the second to cordon leaves the first's cordon on the node and stands by
    while the first's execution runs (DescribeExecution on moto), then takes the node over and drains
    and terminates it."""
    instance, node = node_with_a_pod_held(cloud)
    not_before = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=5)
    start = not_before + timedelta(days=1, seconds=300)
    event = ScheduledEvent(
        "instance-event-0d59937288b749b32", "instance-retirement", "degraded hardware", start
    )
    monkeypatch.setattr(AwsAdapter, "scheduled_events", lambda self, region, instance_id: [event])
    first_name, second_name = (f"scheduled-{instance}-{d}-force" for d in ("1111111111", "2222222222"))
    first = cloud.stack.start(
        "DrainNodeStateMachine",
        {**forced_retirement_drain(instance, node, not_before, start), "deadline_seconds": 120},
        name=first_name,
    )

    def cordoned_by(name: str) -> bool:
        annotations = (cloud.kube.get("Node", node) or {}).get("metadata", {}).get("annotations") or {}
        return f"drain {name} for " in annotations.get(CORDONED, "")

    def standing_by() -> bool:
        return any(
            str(c.event.get("execution", "")).endswith(f":{second_name}")
            and first_name in str((c.result or {}).get("standing_by"))
            for c in cloud.stack.calls("DrainFunction")
            if c.event.get("action") == "evict"
        )

    wait_for(lambda: cordoned_by(first_name), timeout=30, what="the first drain's cordon")
    now = datetime.now(UTC).replace(microsecond=0)
    second = cloud.stack.start(
        "DrainNodeStateMachine",
        {**forced_retirement_drain(instance, node, now, start), "deadline_seconds": 15},
        name=second_name,
    )
    wait_for(standing_by, timeout=30, what="the second drain standing by")
    assert cordoned_by(first_name)
    cloud.stack.client("stepfunctions").stop_execution(executionArn=first)
    result = cloud.stack.wait(second, timeout=90)

    assert cloud.stack.wait(first, timeout=10)["status"] == "ABORTED"
    assert result["status"] == "SUCCEEDED", result
    assert result["output"]["outcome"] == "terminated", result["output"]
    assert instance not in cloud.instances()
