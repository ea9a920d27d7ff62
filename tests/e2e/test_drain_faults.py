"""Drains that die half-way (issue 10), end to end on the rig: moto executes the real DrainNode ASL, the
real handlers answer its Lambda tasks, Kubernetes is the API emulator. Each test injects one fault where
it hurts and asserts what is left of the node, the instance and the group:

* the drain Lambda times out right after it terminated the instance (AWS ran it; Step Functions only
  sees ``Sandbox.Timedout``): the instance is terminated once, the Node deleted, never uncordoned;
* Auto Scaling throttles the terminate: retried, terminated once, desired capacity decremented once;
* the Kubernetes API goes down while the drain compensates, or the execution is stopped mid-drain: the
  node keeps Spillway's marks until a plan past ``orphaned_drain_minutes`` restores it (it runs pods)
  or finishes the drain (it is idle);
* a rejected request that carries a ``drain`` object posts no Event and touches nothing;
* a leaving drain whose group reached its MinSize meanwhile (AWS refuses the decrement) terminates
  without decrementing, never giving the node back;
* of two drains of one node with the same reason (a scheduled change's, then its forced one), the
  first stops as ``superseded`` (a success) once the second took the node over, leaving the second's
  cordon: each cordon names its execution.

Step Functions' Retry waits are real sleeps in moto; :func:`fast_retries` shortens them (the attempts
and their order stay the ASL's) so that each test runs in seconds.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from conftest import CLUSTER, HOME, WEST, Cloud

from spillway.act.drain import DRAIN_COUNTED_KEPT
from spillway.local import objects
from spillway.model.drain import MAX_EXECUTION_SECONDS

WRITES = ("POST", "PUT", "PATCH", "DELETE")
DRAINING = "spillway.io/draining"
CORDONED = "spillway.io/cordoned"
RETRY_SPEEDUP = 0.05  # Step Functions' Retry waits, shortened this much


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto sleeps each Retry's (jittered) interval for real: sleep a twentieth of it."""
    from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl

    class _Time:
        @staticmethod
        def sleep(seconds: float) -> None:
            time.sleep(seconds * RETRY_SPEEDUP)

    monkeypatch.setattr(retrier_decl, "time", _Time)


# --- helpers ------------------------------------------------------------------------------------


def nodes_of(cloud: Cloud, group: str, region: str = HOME) -> list[tuple[str, str]]:
    """(node, instance) of each registered instance of the group, by node name."""
    ids = {i["InstanceId"] for i in cloud.asg(group, region)["Instances"]}
    return sorted((name, iid) for iid, name in dict(cloud.registrar.registered).items() if iid in ids)


def add_pod(cloud: Cloud, name: str, node: str, **kw: Any) -> None:
    cloud.kube.add(
        objects.pod(
            name, "team-a", node_name=node, labels={"app": name}, owner=("ReplicaSet", f"{name}-5d9c"),
            cpu="100m", memory="128Mi", **kw,
        )
    )  # fmt: skip


def events_for(cloud: Cloud, node: str) -> list[dict[str, Any]]:
    return [e for e in cloud.kube.list("Event") if e["involvedObject"]["name"] == node]


def marks(node: Mapping[str, Any] | None) -> tuple[bool, bool, bool]:
    """(cordoned, Spillway's annotation, draining taint) of a Node object."""
    assert node is not None
    return (
        bool(node["spec"].get("unschedulable")),
        CORDONED in node["metadata"].get("annotations", {}),
        any(t["key"] == DRAINING for t in node["spec"].get("taints") or []),
    )


def terminate_results(cloud: Cloud) -> list[Any]:
    """What each terminate the drain function ran answered (None for a call that raised before)."""
    return [c.result for c in cloud.stack.calls("DrainFunction") if c.event.get("action") == "terminate"]


def reclaim(cloud: Cloud, node: str, instance: str, region: str) -> None:
    """Another terminates the instance (EC2's reclaim, another drain of it) and its Node goes."""
    boto3.client("autoscaling", region_name=region).terminate_instance_in_auto_scaling_group(
        InstanceId=instance, ShouldDecrementDesiredCapacity=True
    )
    boto3.client("ec2", region_name=region).terminate_instances(InstanceIds=[instance])
    cloud.kube.delete("Node", node)


def leaving_drain(cloud: Cloud, node: str) -> dict[str, Any]:
    """A forced drain of a leaving instance (a Spot warning's) through the real state machine."""
    return cloud.stack.run(
        "DrainNodeStateMachine",
        {"cluster": CLUSTER, "node": node, "poll_seconds": 1, "deadline_seconds": 10, "force": True,
         "leaving": True},
        timeout=60,
    )  # fmt: skip


def wait_for(condition: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)


@contextmanager
def throttled_terminates(times: int) -> Iterator[list[str]]:
    """Auto Scaling answers the next ``times`` TerminateInstanceInAutoScalingGroup calls ``Throttling``
    (nothing done), as AWS does past the API's rate; yields the instances it let through."""
    from moto.autoscaling import models
    from moto.autoscaling.exceptions import AutoscalingClientError

    backend = models.AutoScalingBackend
    original = backend.terminate_instance
    left, done = [times], []

    def terminate(self: Any, instance_id: str, should_decrement: bool) -> Any:
        if left[0] > 0:
            left[0] -= 1
            raise AutoscalingClientError("Throttling", "Rate exceeded")
        done.append(instance_id)
        return original(self, instance_id, should_decrement)

    backend.terminate_instance = terminate  # type: ignore[method-assign]
    try:
        yield done
    finally:
        backend.terminate_instance = original  # type: ignore[method-assign]


@contextmanager
def before_action(cloud: Cloud, action: str, do: Callable[[], None]) -> Iterator[None]:
    """Run ``do`` the moment the drain function is first called with ``action`` (before it runs)."""
    name = f"{cloud.stack.prefix}-DrainFunction"
    handler = cloud.stack._handlers[name]
    fired = [False]

    def wrapped(event: dict[str, Any], context: Any) -> Any:
        if event.get("action") == action and not fired[0]:
            fired[0] = True
            do()
        return handler(event, context)

    cloud.stack._handlers[name] = wrapped
    try:
        yield
    finally:
        cloud.stack._handlers[name] = handler


def job_arrives(cloud: Cloud, node: str) -> None:
    """A plain Job's pod bound to ``node`` by name: work no plan judged (no kind known to move)."""
    cloud.kube.add(objects.pod("job-0", "team-a", node_name=node, owner=("Job", "train"), cpu="100m",
                               memory="128Mi"))  # fmt: skip


def planner_env(**variables: str) -> None:
    """The plan Lambda's configuration for this test (the rig puts the environment back on exit)."""
    os.environ.update({"ORPHANED_DRAIN_MINUTES": "0.01", "DRAIN_DEADLINE_SECONDS": "20",
                       "DRAIN_POLL_SECONDS": "1", **variables})  # fmt: skip


def plan_now(cloud: Cloud) -> Any:
    """A plan on a fresh snapshot, through the rig (stream → PlanFunction); its executions finished."""
    outcome = cloud.plan(cloud.stream_event(cloud.snapshot()))
    cloud.wait_all(timeout=40)
    return outcome


def assert_reconciled(cloud: Cloud, node: str, instance: str, *, busy: bool) -> None:
    """A busy orphan restored (no marks, its pod still Running, an Event saying it was restored); an
    idle one drained again and terminated (group decremented, Node gone)."""
    if busy:
        assert marks(cloud.kube.get("Node", node)) == (False, False, False)
        pod = cloud.kube.get("Pod", "job-0", "team-a")
        assert pod is not None and pod["status"]["phase"] == "Running"
        restored = [e for e in events_for(cloud, node) if e.get("reason") == "SpillwayUncordoned"]
        assert restored and "orphaned-drain-restored" in restored[-1]["message"], restored
        assert cloud.desired("general") == 1
        assert instance in cloud.instances()
    else:
        assert cloud.desired("general") == 0
        assert instance not in cloud.instances()
        wait_for(lambda: cloud.kube.get("Node", node) is None, what=f"Node {node} removed")
        [down] = [e for m, e in cloud.all_executions() if m == "ScaleDownStateMachine"]
        out = cloud.stack.wait(down["executionArn"])["output"]
        [line] = out["drains"]
        assert line["outcome"] == "terminated" and line["node"] == node, out


def drain_quickly(cloud: Cloud, node: str) -> dict[str, Any]:
    """A DrainNode execution of ``node`` polling each second, with a 10-second deadline."""
    return cloud.stack.run(
        "DrainNodeStateMachine", {"cluster": CLUSTER, "node": node, "poll_seconds": 1, "deadline_seconds": 10},
        timeout=40,
    )  # fmt: skip


# --- 1. a Lambda timeout right after a successful terminate -------------------------------------


@pytest.mark.parametrize("timeouts", [1, 4], ids=["retried", "every-attempt-then-compensated"])
def test_a_terminate_that_times_out_after_terminating_ends_terminated_not_uncordoned(
    cloud: Cloud, timeouts: int
) -> None:
    """The drain function terminates (in any region; here the other one). The first call terminates
    and times out; the retry finds the instance gone (``AlreadyTerminating``). With every
    attempt timing out, CompensateTerminate asks Auto Scaling, finds it gone, and deletes the Node."""
    cloud.group("west", region=WEST, instance_type="m5.large", desired=2, gpu=False)
    cloud.wait_nodes(2)
    (node, instance), _ = nodes_of(cloud, "west", WEST)
    cloud.stack.faults.time_out_after(
        "DrainFunction", when=lambda event: event.get("action") == "terminate", times=timeouts
    )

    result = drain_quickly(cloud, node)

    assert result["status"] == "SUCCEEDED", result
    out = result["output"]
    assert out["outcome"] == "terminated" and out["instance_id"] == instance
    assert "pods left running" not in str(out) and "uncordoned" not in str(out)
    calls = terminate_results(cloud)
    assert len(calls) == min(timeouts + 1, 4)  # one retry after one timeout; four attempts at most
    assert [c["status"] for c in calls[1:]] == ["AlreadyTerminating"] * (len(calls) - 1)
    assert calls[0]["activity_id"]  # the first call terminated it (its answer was lost)
    assert cloud.desired("west", WEST) == 1  # decremented once
    assert instance not in cloud.instances()
    uncordons = [c for c in cloud.stack.calls("DrainFunction") if c.event.get("action") == "uncordon"]
    assert all(c.result.get("instance_gone") for c in uncordons)  # never undid the drain's marks
    assert len(uncordons) == (1 if timeouts == 4 else 0)
    wait_for(lambda: cloud.kube.get("Node", node) is None, what=f"Node {node} removed")


# --- 2. throttling on terminate -----------------------------------------------------------------


@pytest.mark.parametrize("region", [HOME, WEST], ids=["home-region", "other-region"])
def test_a_throttled_terminate_is_retried_and_decrements_the_group_once(cloud: Cloud, region: str) -> None:
    """In every region the drain function terminates: its SDK allowed one attempt, it raises
    ``AwsThrottled``, which the state retries."""
    os.environ["AWS_MAX_ATTEMPTS"] = "1"
    cloud.group("general", region=region, instance_type="m5.large", desired=2, gpu=False)
    cloud.wait_nodes(2)
    (node, instance), _ = nodes_of(cloud, "general", region)

    with throttled_terminates(2) as terminated:
        result = cloud.stack.run(
            "DrainNodeStateMachine",
            {"cluster": CLUSTER, "node": node, "poll_seconds": 1, "deadline_seconds": 10},
            timeout=40,
        )

    assert result["status"] == "SUCCEEDED", result
    assert result["output"]["outcome"] == "terminated"
    assert terminated == [instance]  # two throttled attempts, then exactly one termination
    assert cloud.desired("general", region) == 1
    assert instance not in cloud.instances()
    history = [e["type"] for e in cloud.stack.history(result["executionArn"])]
    assert history.count("LambdaFunctionFailed") >= 2  # retried
    assert "TaskFailed" not in history  # no aws-sdk task terminates


# --- 3 and 4. drains that die with Spillway's marks on the node; the planner reconciles them --------


def one_node_group(cloud: Cloud) -> tuple[str, str]:
    """A one-node group whose node runs a job no drain may evict (``do-not-disrupt``)."""
    cloud.group("general", instance_type="m5.large", desired=1, gpu=False)
    cloud.wait_nodes(1)
    [(node, instance)] = nodes_of(cloud, "general")
    add_pod(cloud, "job-0", node, annotations={"karpenter.sh/do-not-disrupt": "true"})
    return node, instance


def finish_job_if_idle(cloud: Cloud, *, busy: bool) -> None:
    if not busy:
        cloud.kube.delete("Pod", "job-0", "team-a")  # the job ended: the node is idle now


@pytest.mark.parametrize("busy", [True, False], ids=["busy-restored", "idle-finished"])
def test_api_down_during_the_compensation_leaves_marks_the_next_plan_reconciles(
    cloud: Cloud, busy: bool
) -> None:
    node, instance = one_node_group(cloud)

    def api_down() -> None:
        cloud.kube.faults.fail_next(10**6, status=503)

    with before_action(cloud, "uncordon", api_down):
        result = cloud.stack.run(
            "DrainNodeStateMachine",
            {"cluster": CLUSTER, "node": node, "poll_seconds": 1, "deadline_seconds": 2},
            timeout=60,
        )

    assert result["status"] == "FAILED" and result["error"] == "DrainTimeout", result
    assert "undoing the cordon failed too" in result["cause"]
    cloud.kube.faults.clear()  # the API is back
    assert marks(cloud.kube.get("Node", node)) == (True, True, True)  # left as the drain made it
    assert cloud.desired("general") == 1 and instance in cloud.instances()

    finish_job_if_idle(cloud, busy=busy)
    planner_env(SCALE_DOWN_IDLE_MINUTES="0", SCALE_DOWN_DELAY_AFTER_LAUNCH_MINUTES="0")
    plan_now(cloud)

    assert_reconciled(cloud, node, instance, busy=busy)


def test_a_drain_the_api_server_fails_after_an_eviction_names_the_pod_it_evicted(cloud: Cloud) -> None:
    """The API server answers a-0's eviction, then refuses b-0's for good (503 past the client's
    retries). The round raised KubeUnavailable and took a-0 with it: the failed drain's record and its
    Event named no pod, though a-0 was stopped and the node given back. Through the real state machine
    the round reports a-0, the next round fails before evicting anything (Retry, then Catch:
    Compensate, RecordFailure), and the record and the Event name a-0."""
    cloud.group("general", instance_type="m5.large", desired=1, gpu=False)
    cloud.wait_nodes(1)
    [(node, instance)] = nodes_of(cloud, "general")
    add_pod(cloud, "a-0", node)
    add_pod(cloud, "b-0", node)
    cloud.kube.faults.fail_next(10**6, status=503, path_prefix="/api/v1/namespaces/team-a/pods/b-0/eviction")

    result = cloud.stack.run(
        "DrainNodeStateMachine",
        {"cluster": CLUSTER, "node": node, "poll_seconds": 1, "deadline_seconds": 120},
        timeout=90,
    )
    cloud.kube.faults.clear()

    assert result["status"] == "FAILED" and result["error"] == "KubeUnavailable", result
    pod = cloud.kube.get("Pod", "b-0", "team-a")
    assert pod is not None and not pod["metadata"].get("deletionTimestamp")
    assert marks(cloud.kube.get("Node", node)) == (False, False, False)  # given back
    assert cloud.desired("general") == 1 and instance in cloud.instances()
    [failed] = [e for e in events_for(cloud, node) if e.get("reason") == "SpillwayDrainFailed"]
    assert "after evicting 1 pod(s) (team-a/a-0)" in failed["message"], failed["message"]


@pytest.mark.parametrize("busy", [True, False], ids=["busy-restored", "idle-finished"])
def test_a_drain_stopped_between_eviction_rounds_is_reconciled_by_the_next_plan(
    cloud: Cloud, busy: bool
) -> None:
    node, instance = one_node_group(cloud)
    arn = cloud.stack.start(
        "DrainNodeStateMachine", {"cluster": CLUSTER, "node": node, "poll_seconds": 1, "deadline_seconds": 30}
    )
    wait_for(
        lambda: any(c.event.get("action") == "evict" and c.result for c in cloud.stack.calls("DrainFunction")),
        what="an eviction round",
    )  # fmt: skip
    cloud.stack.client("stepfunctions").stop_execution(executionArn=arn, error="Operator", cause="stopped")
    assert cloud.stack.wait(arn)["status"] == "ABORTED"
    time.sleep(1.5)  # longer than a WaitForPods: a stopped execution takes no further step
    assert marks(cloud.kube.get("Node", node)) == (True, True, True)
    assert not [
        c for c in cloud.stack.calls("DrainFunction") if c.event.get("action") in ("uncordon", "record")
    ]

    finish_job_if_idle(cloud, busy=busy)
    planner_env(SCALE_DOWN_IDLE_MINUTES="0", SCALE_DOWN_DELAY_AFTER_LAUNCH_MINUTES="0")
    plan_now(cloud)

    assert_reconciled(cloud, node, instance, busy=busy)


def test_an_orphan_younger_than_the_bound_is_left_to_its_drain(cloud: Cloud) -> None:
    """The bound matters: a stopped drain's node is not touched by a plan before orphaned_drain_minutes."""
    node, _ = one_node_group(cloud)
    arn = cloud.stack.start(
        "DrainNodeStateMachine", {"cluster": CLUSTER, "node": node, "poll_seconds": 1, "deadline_seconds": 30}
    )
    wait_for(lambda: marks(cloud.kube.get("Node", node)) == (True, True, True), what="the cordon")
    cloud.stack.client("stepfunctions").stop_execution(executionArn=arn)
    cloud.stack.wait(arn)

    planner_env(ORPHANED_DRAIN_MINUTES="60")
    plan_now(cloud)

    assert marks(cloud.kube.get("Node", node)) == (True, True, True)
    assert not [m for m, _ in cloud.all_executions() if m != "DrainNodeStateMachine"]


# --- 5. a rejected request posts nothing ----------------------------------------------------------


def test_a_rejected_request_carrying_a_drain_object_posts_no_event_and_touches_nothing(cloud: Cloud) -> None:
    cloud.group("general", instance_type="m5.large", desired=2, gpu=False)
    cloud.wait_nodes(2)
    (node, _), _ = nodes_of(cloud, "general")
    drain = cloud.stack.invoke(
        "DrainFunction", {"action": "validate", "request": {"cluster": CLUSTER, "node": node}}
    )["drain"]  # a complete, valid drain object, as a step's input carries it
    cloud.kube.clear_requests()

    result = cloud.stack.run(
        "DrainNodeStateMachine", {"cluster": CLUSTER, "node": node, "drain": drain}, timeout=20
    )

    assert result["status"] == "FAILED" and result["error"] == "InvalidDrainRequest", result
    assert result["cause"].startswith("drain:"), result["cause"]
    assert events_for(cloud, node) == []
    assert [f"{r.method} {r.path}" for r in cloud.kube.requests if r.method in WRITES] == []
    assert marks(cloud.kube.get("Node", node)) == (False, False, False)
    assert cloud.desired("general") == 2


@pytest.mark.parametrize(
    ("region", "when"),
    [(HOME, "evict"), (WEST, "evict"), (HOME, "cordon")],
    ids=["home-region", "other-region", "before-the-cordon"],  # a leaving drain terminates by the function
)
def test_a_leaving_drain_whose_node_goes_ends_gone_not_counted_terminated_again(
    cloud: Cloud, capsys: pytest.CaptureFixture[str], region: str, when: str
) -> None:
    """EC2 reclaimed the instance, or another drain of it terminated it and deleted its Node: a drain
    of an instance leaving anyway succeeds through the real state machine, where it failed (and raised
    the drain alarm). (Found by review, for the cordon step.) It terminated nothing, so it is recorded
    ``gone``, not ``terminated``: the drain that terminated the instance counted it ``terminated``
    already, and DrainOutcome counted the node twice."""
    cloud.group("g", region=region, instance_type="m5.large", desired=2, gpu=False)
    cloud.wait_nodes(2)
    (node, instance), _ = nodes_of(cloud, "g", region)

    with before_action(cloud, when, lambda: reclaim(cloud, node, instance, region)):
        result = leaving_drain(cloud, node)

    assert result["status"] == "SUCCEEDED", result
    assert result["output"]["outcome"] == "gone", result["output"]
    [answer] = terminate_results(cloud)
    assert answer["status"] == "AlreadyTerminating" and answer["by_another"] is True, answer
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    assert [(m["Outcome"], m["DrainOutcome"]) for m in lines if "DrainOutcome" in m] == [("gone", [1.0])]


def abandoned_at_first_round(
    cloud: Cloud, node: str, instance: str, plan: Mapping[str, Any], before_evict: Callable[[], None]
) -> dict[str, Any]:
    """Run a plan's drain of ``node`` (group ``g`` of two) through the real state machine, doing
    ``before_evict`` before its first eviction round; assert the round abandoned it: the execution
    succeeds ``cancelled`` with nothing evicted, the node uncordoned and untainted, the instance kept at
    the same desired capacity, and a SpillwayDrainCancelled Event. The output, for the caller's own
    checks."""
    with before_action(cloud, "evict", before_evict):
        result = cloud.stack.run(
            "DrainNodeStateMachine",
            {"cluster": CLUSTER, "node": node, "poll_seconds": 1, "deadline_seconds": 60, **plan},
            timeout=40,
        )
    assert result["status"] == "SUCCEEDED", result
    out: dict[str, Any] = result["output"]
    assert out["outcome"] == "cancelled", out
    assert out["evicted_count"] == 0, out  # abandoned at its first round: the plan's pods were not evicted
    assert marks(cloud.kube.get("Node", node)) == (False, False, False)
    assert instance in cloud.instances() and cloud.desired("g") == 2
    assert [e for e in events_for(cloud, node) if e.get("reason") == "SpillwayDrainCancelled"]
    return out


@pytest.mark.parametrize("consolidation", [False, True], ids=["idle", "consolidation"])
def test_a_plans_drain_abandons_its_node_to_a_pod_bound_after_the_plan_and_succeeds_cancelled(
    cloud: Cloud, consolidation: bool
) -> None:
    """A Job's pod is bound to the node between the plan's validation and its first eviction round. An
    idle node's drain evicted it (a running job killed by a scale-down); a consolidation kept it and held
    the node cordoned to the deadline, then failed as a timeout. Through the real state machine the
    drain is abandoned at that round: the pod runs, the node is uncordoned and kept, nothing is
    terminated, and the execution succeeds ``cancelled`` (no failure for the alarms)."""
    cloud.group("g", instance_type="m5.large", desired=2, gpu=False)
    cloud.wait_nodes(2)
    (node, instance), _ = nodes_of(cloud, "g")
    plan = {"plan_id": "20261102T100000Z-abc", "reason": "idle 12 min"}
    if consolidation:
        add_pod(cloud, "web-0", node, annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"})
        plan |= {"consolidation": True, "pods": ["team-a/web-0"]}

    out = abandoned_at_first_round(cloud, node, instance, plan, lambda: job_arrives(cloud, node))

    assert "team-a/job-0" in out["note"], out
    assert cloud.kube.get("Pod", "job-0", "team-a") is not None


def test_a_consolidation_whose_node_is_annotated_do_not_disrupt_while_it_drains_gives_it_back_cancelled(
    cloud: Cloud,
) -> None:
    """The node is annotated karpenter.sh/do-not-disrupt=true after the drain's validation and cordon:
    the round evicted the planned pod all the same, and the node was terminated. Through the real state
    machine the round abandons: the pod runs, the node is uncordoned and kept, nothing terminated, and
    the execution succeeds ``cancelled``, its note naming the annotation."""
    cloud.group("g", instance_type="m5.large", desired=2, gpu=False)
    cloud.wait_nodes(2)
    (node, instance), _ = nodes_of(cloud, "g")
    add_pod(cloud, "web-0", node, annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"})
    plan = {"plan_id": "20261102T100000Z-abc", "reason": "consolidation", "consolidation": True,
            "pods": ["team-a/web-0"]}  # fmt: skip

    def annotate() -> None:
        raw = cloud.kube.get("Node", node)
        assert raw is not None
        raw["metadata"].setdefault("annotations", {})["karpenter.sh/do-not-disrupt"] = "true"
        cloud.kube.update("Node", raw)

    out = abandoned_at_first_round(cloud, node, instance, plan, annotate)

    assert "karpenter.sh/do-not-disrupt=true" in out["note"], out
    web = cloud.kube.get("Pod", "web-0", "team-a")
    assert web is not None and not web["metadata"].get("deletionTimestamp")


@pytest.mark.parametrize("by_hand", [False, True], ids=["plans", "by-hand"])
def test_a_pod_that_comes_after_the_check_keeps_the_node_from_the_terminate_step(
    cloud: Cloud, by_hand: bool
) -> None:
    """The check before terminating found the node empty; then a pod marked never to be disturbed was
    bound to it by name (spec.nodeName skips the cordon and the taint) before the terminate step ran. The
    step terminated the instance with the pod on it. Through the real state machine it terminates
    nothing and the drain goes back to its rounds: a plan's is abandoned (``cancelled``), one by hand
    waits for the pod to its deadline and fails as a timeout; either way the node is given back,
    uncordoned, its instance and the pod still there."""
    cloud.group("g", instance_type="m5.large", desired=2, gpu=False)
    cloud.wait_nodes(2)
    (node, instance), _ = nodes_of(cloud, "g")
    plan = {} if by_hand else {"plan_id": "20261102T100000Z-abc", "reason": "idle 12 min"}

    def arrives() -> None:
        add_pod(cloud, "train-0", node, annotations={"karpenter.sh/do-not-disrupt": "true"})

    with before_action(cloud, "terminate", arrives):
        result = cloud.stack.run(
            "DrainNodeStateMachine",
            {"cluster": CLUSTER, "node": node, "poll_seconds": 1, "deadline_seconds": 5, **plan},
            timeout=40,
        )

    if by_hand:
        assert result["status"] == "FAILED" and result["error"] == "DrainTimeout", result
        assert "train-0" in result["cause"], result
    else:
        assert result["status"] == "SUCCEEDED" and result["output"]["outcome"] == "cancelled", result
        assert "team-a/train-0" in result["output"]["note"], result
    [answer] = terminate_results(cloud)
    assert answer["status"] == "NotTerminated" and answer["ready"] is False, answer
    assert instance in cloud.instances() and cloud.desired("g") == 2
    assert marks(cloud.kube.get("Node", node)) == (False, False, False)
    pod = cloud.kube.get("Pod", "train-0", "team-a")
    assert pod is not None and not pod["metadata"].get("deletionTimestamp")


def test_a_terminate_step_whose_check_met_an_api_outage_still_tells_an_instance_another_terminated(
    cloud: Cloud, capsys: pytest.CaptureFixture[str]
) -> None:
    """The terminate step's own check met the Kubernetes API down (503s) and raised before any
    TerminateInstanceInAutoScalingGroup; meanwhile EC2 reclaimed the instance (its Node deleted). The state
    retried the step, whose ``$$.State.RetryCount`` (1) said an earlier attempt of this drain might
    have terminated it: the drain was recorded ``terminated`` (DrainOutcome counting a termination this
    drain never made) instead of ``gone``. A check that cannot be made terminates nothing and sends the
    drain back to its rounds, so the step's retries count only attempts that may have called AWS."""
    cloud.group("g", instance_type="m5.large", desired=2, gpu=False)
    cloud.wait_nodes(2)
    (node, instance), _ = nodes_of(cloud, "g")
    name = f"{cloud.stack.prefix}-DrainFunction"
    handler = cloud.stack._handlers[name]
    fired = [False]

    def api_down_then_reclaimed(event: dict[str, Any], context: Any) -> Any:
        if event.get("action") != "terminate" or fired[0]:
            return handler(event, context)
        fired[0] = True
        cloud.kube.faults.fail_next(10**6, status=503)
        try:
            return handler(event, context)
        finally:
            cloud.kube.faults.clear()  # the API is back; EC2 took the instance meanwhile
            reclaim(cloud, node, instance, HOME)

    cloud.stack._handlers[name] = api_down_then_reclaimed
    try:
        result = leaving_drain(cloud, node)
    finally:
        cloud.stack._handlers[name] = handler

    assert result["status"] == "SUCCEEDED", result
    assert result["output"]["outcome"] == "gone", result["output"]
    first, answer = terminate_results(cloud)
    assert first["status"] == "NotTerminated" and first["ready"] is False, first
    assert answer["status"] == "AlreadyTerminating" and answer["by_another"] is True, answer
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    assert [(m["Outcome"], m["DrainOutcome"]) for m in lines if "DrainOutcome" in m] == [("gone", [1.0])]


def test_an_abandoned_drain_whose_give_back_fails_fails_for_the_alarm_instead_of_succeeding(
    cloud: Cloud,
) -> None:
    """A plan's idle drain finds a Job's pod bound after the plan and abandons; the Kubernetes API is
    down while GiveBack uncordons. The node keeps Spillway's cordon, annotation and draining taint, and
    with the default ``orphaned_drain_minutes`` (1620) no plan restores it for 27 hours. Every other
    drain whose compensation fails ends FAILED (``drain-node-failures``; before this change the same race
    ended ``DrainTimeout`` and its compensation failure was alarmed). The abandoned drain instead
    SUCCEEDED ``cancelled``, counted with the benign cancellations: the node sits cordoned, its free room
    lost, and no alarm says so (the kubectl commands that undo it are only in the output's note).
    Expected: the execution fails (``DrainCancelled``, outcome cancelled) with the failed compensation
    in its cause, as a failed compensation does everywhere else."""
    cloud.group("g", instance_type="m5.large", desired=2, gpu=False)
    cloud.wait_nodes(2)
    (node, instance), _ = nodes_of(cloud, "g")

    def api_down() -> None:
        cloud.kube.faults.fail_next(10**6, status=503)

    with (
        before_action(cloud, "evict", lambda: job_arrives(cloud, node)),
        before_action(cloud, "uncordon", api_down),
    ):
        result = cloud.stack.run(
            "DrainNodeStateMachine",
            {"cluster": CLUSTER, "node": node, "poll_seconds": 1, "deadline_seconds": 60,
             "plan_id": "20261102T100000Z-abc", "reason": "idle 12 min"},
            timeout=60,
        )  # fmt: skip
    cloud.kube.faults.clear()  # the API is back

    assert marks(cloud.kube.get("Node", node)) == (True, True, True)  # given back: not
    assert result["status"] == "FAILED", result
    assert result["error"] == "DrainCancelled" and "undoing the cordon failed too" in result["cause"], result
    assert "team-a/job-0" in result["cause"], result
    assert instance in cloud.instances()  # nothing terminated


@pytest.mark.parametrize("region", [HOME, WEST], ids=["home", "other-region"])
@pytest.mark.parametrize("spot", [False, True], ids=["plan-or-hand", "spot-warning"])
def test_a_drain_whose_instance_is_detached_before_terminate_terminates_nothing_and_keeps_the_node(
    cloud: Cloud, region: str, spot: bool
) -> None:
    """DetachInstances takes the drained instance out of its group after the eviction: the terminate
    step took "no longer in the group" for "terminated", recorded the drain terminated and deleted the
    Node of an instance EC2 still ran (a paid instance no Node stood for; its kubelet's updates then
    fail). Through the real state machine, on moto's DetachInstances, nothing is terminated and the
    Node stays: a drain by hand (or a plan's) is cancelled and its node uncordoned; a Spot warning's
    ends drained outside the group, its node left cordoned for EC2's reclaim."""
    cloud.group("g", region=region, instance_type="m5.large", desired=2, gpu=False)
    cloud.wait_nodes(2)
    (node, instance), (_, other) = nodes_of(cloud, "g", region)
    autoscaling = boto3.client("autoscaling", region_name=region)
    warning = {"force": True, "leaving": True, "notice": "interruption", "instance_id": instance,
               "reason": "interruption notice e2e"}  # fmt: skip

    def detach() -> None:
        autoscaling.detach_instances(
            InstanceIds=[instance], AutoScalingGroupName="g", ShouldDecrementDesiredCapacity=True
        )

    with before_action(cloud, "terminate", detach):
        result = cloud.stack.run(
            "DrainNodeStateMachine",
            {"cluster": CLUSTER, "node": node, "poll_seconds": 1, "deadline_seconds": 10,
             **(warning if spot else {})},
            timeout=40,
        )  # fmt: skip

    if spot:
        assert result["status"] == "SUCCEEDED", result
        out = result["output"]
        assert out["outcome"] == "drained" and out["outside_group"] is True, out
        assert "left Auto Scaling group g during the drain" in out["note"], out
        assert marks(cloud.kube.get("Node", node))[0], "the node stays cordoned for EC2's reclaim"
    else:
        assert result["status"] == "FAILED" and result["error"] == "DrainCancelled", result
        assert "left Auto Scaling group g during the drain" in result["cause"], result["cause"]
        assert marks(cloud.kube.get("Node", node)) == (False, False, False)  # given back, uncordoned
    assert [r for r in terminate_results(cloud) if r and r.get("activity_id")] == []  # none terminated
    assert [i["InstanceId"] for i in cloud.asg("g", region)["Instances"]] == [other]
    [[described]] = [r["Instances"] for r in boto3.client("ec2", region_name=region).describe_instances(
        InstanceIds=[instance])["Reservations"]]  # fmt: skip
    assert described["State"]["Name"] == "running"  # EC2 still runs it
    assert cloud.kube.get("Node", node) is not None


@pytest.mark.parametrize("region", [HOME, WEST], ids=["home", "other-region"])
def test_a_leaving_drain_that_meets_min_size_at_terminate_terminates_without_decrementing(
    cloud: Cloud, region: str
) -> None:
    """Spot reclaims two instances of a group one above its MinSize: the other warning's drain
    terminated its instance after this drain was validated, so AWS refuses this one's decrement (CloudSim
    refuses as AWS does). The drain terminates without decrementing, the group launches the replacement
    it needs, and the node is never given back to the scheduler; it failed and uncordoned the node EC2
    was reclaiming. (Found by review.)"""
    cloud.group("g", region=region, instance_type="m5.large", desired=2, gpu=False)
    autoscaling = boto3.client("autoscaling", region_name=region)
    autoscaling.update_auto_scaling_group(AutoScalingGroupName="g", MinSize=1)
    cloud.wait_nodes(2)
    (node, instance), (_, other) = nodes_of(cloud, "g", region)

    def other_drain_terminates() -> None:
        autoscaling.terminate_instance_in_auto_scaling_group(
            InstanceId=other, ShouldDecrementDesiredCapacity=True
        )

    with before_action(cloud, "check", other_drain_terminates):
        result = cloud.stack.run(
            "DrainNodeStateMachine",
            {"cluster": CLUSTER, "node": node, "poll_seconds": 1, "deadline_seconds": 10, "force": True,
             "leaving": True, "reason": "spot interruption warning"},
            timeout=40,
        )  # fmt: skip

    assert result["status"] == "SUCCEEDED", result
    out = result["output"]
    assert out["outcome"] == "terminated" and "without decrementing" in out["terminated"]["note"], out
    assert not [c for c in cloud.stack.calls("DrainFunction") if c.event.get("action") == "uncordon"]
    assert instance not in cloud.instances() and other not in cloud.instances()
    assert cloud.desired("g", region) == 1  # MinSize: the group replaces the reclaimed instance
    wait_for(lambda: cloud.kube.get("Node", node) is None, what=f"Node {node} removed")


def test_a_scheduled_changes_first_drain_ends_superseded_leaving_the_seconds_cordon(cloud: Cloud) -> None:
    """A scheduled change's drain without force, then the forced one AWS Health's update starts (same
    reason, an execution of its own; a budget holds both, and the forced one terminates at its
    deadline). The first once met its deadline and its compensation uncordoned the node under the
    forced drain; since each cordon names its execution it left the second's cordon, but still failed
    with DrainTimeout, raising the drain alarm for a normal hand-over. It now stops at its next round,
    undoing nothing, and succeeds as ``superseded``. (Found by review.)"""
    cloud.group("g", instance_type="m5.large", desired=2, gpu=False)
    cloud.wait_nodes(2)
    (node, instance), _ = nodes_of(cloud, "g")
    add_pod(cloud, "web-0", node)
    cloud.kube.add(objects.pdb("web-0", "team-a", {"app": "web-0"}, min_available=1))  # both drains wait
    change = {"cluster": CLUSTER, "node": node, "poll_seconds": 1, "leaving": True,
              "reason": "scheduled change arn:aws:health:us-east-1::event/EC2/X/abc"}  # fmt: skip
    # the first's deadline is far off: it must still be draining when the second cordons, however slow
    # the machine is to start the second; it stops at its next round after that, not at its deadline
    first = cloud.stack.start("DrainNodeStateMachine", {**change, "deadline_seconds": 60}, name="sched-abc")
    wait_for(
        lambda: marks(cloud.kube.get("Node", node)) == (True, True, True), timeout=30, what="the first cordon"
    )
    second = cloud.stack.start(
        "DrainNodeStateMachine", {**change, "deadline_seconds": 12, "force": True}, name="sched-abc-force"
    )

    def both_cordoned() -> bool:
        done = [c.result for c in cloud.stack.calls("DrainFunction") if c.event.get("action") == "cordon"]
        return len(done) == 2 and all(done)

    wait_for(both_cordoned, timeout=30, what="the second cordon")

    handed_over = cloud.stack.wait(first, timeout=90)
    left = cloud.kube.get("Node", node)
    forced = cloud.stack.wait(second, timeout=30)

    assert handed_over["status"] == "SUCCEEDED", handed_over
    out = handed_over["output"]
    assert out["outcome"] == "superseded" and "sched-abc-force" in out["note"], out
    undone = [c for c in cloud.stack.calls("DrainFunction") if c.event.get("action") == "uncordon"]
    assert undone == []  # no compensation: the forced drain holds the node
    assert marks(left) == (True, True, True)  # the forced drain's cordon and taint stayed
    assert " held drain sched-abc-force: scheduled change " in left["metadata"]["annotations"][CORDONED]
    assert "SpillwayDrainSuperseded" in [e["reason"] for e in events_for(cloud, node)]
    assert forced["status"] == "SUCCEEDED" and forced["output"]["outcome"] == "terminated", forced
    assert instance not in cloud.instances()


# --- the record step fails for good -----------------------------------------------------------------


class Throttled(Exception):
    """Lambda refusing to run the function (its concurrency spent), as a state machine's Retry and
    Catch name it."""

    error_type = "Lambda.TooManyRequestsException"


def drain_outcomes(cloud: Cloud, capsys: pytest.CaptureFixture[str], outcome: str) -> tuple[float, float]:
    """DrainOutcome under ``outcome`` as each path counts it: the drain function's EMF lines since the
    last call (CloudWatch reads them from its log), and all that reached CloudWatch's PutMetricData."""
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    emf = sum(sum(m["DrainOutcome"]) for m in lines if "DrainOutcome" in m and m.get("Outcome") == outcome)
    now = datetime.now(UTC)
    dimensions = {"service": "spillway", "Cluster": CLUSTER, "Outcome": outcome}
    stats = cloud.stack.client("cloudwatch").get_metric_statistics(
        Namespace="Spillway", MetricName="DrainOutcome", Statistics=["Sum"], Period=3600,
        Dimensions=[{"Name": k, "Value": v} for k, v in dimensions.items()],
        StartTime=now - timedelta(hours=1), EndTime=now + timedelta(hours=1),
    )  # fmt: skip
    return emf, sum(point["Sum"] for point in stats["Datapoints"])


def counted_mark(cloud: Cloud, execution: str, *, expires: bool = True) -> Any:
    """The value of the mark that ``execution``'s DrainOutcome was counted, None when there is none.
    The mark expires (DynamoDB's TTL) some 15 days on, as the drain function's own mark does, when the
    validation answered (``expires``): its clock gave the time, which JSONPath has none of."""
    item = (
        cloud.stack.client("dynamodb")
        .get_item(
            TableName=cloud.stack.tables["StateTable"],
            Key={"cluster": {"S": f"{CLUSTER}#drain-counted"}, "item": {"S": execution}},
        )
        .get("Item")
    )
    if item is None:
        return None
    if not expires:
        assert "expires_at" not in item, item
    else:  # validation's clock (real time here, as the drain function's) + the longest execution + 15 days
        ahead = int(item["expires_at"]["N"]) - time.time()
        kept = DRAIN_COUNTED_KEPT.total_seconds()
        assert kept < ahead <= kept + MAX_EXECUTION_SECONDS, item
    return json.loads(item["value"]["S"])


@pytest.mark.parametrize(
    ("extra", "outcome"),
    [
        ({}, "terminated"),
        ({"terminate": False}, "drained"),
        ({"terminate": False, "uncordon": True}, "released"),
    ],
    ids=["terminated", "drained", "released"],
)
def test_a_drain_whose_record_step_is_throttled_for_good_succeeds_and_is_still_counted(
    cloud: Cloud, capsys: pytest.CaptureFixture[str], extra: dict[str, Any], outcome: str
) -> None:
    """The record step (the drain function: the Event, the DrainOutcome metric) throttled through its
    retries: its Catch ended the execution as a success, rightly (the node is drained), but nothing
    counted the drain, so the dashboard and the drain alarms missed it. The state machine now counts
    it itself (aws-sdk:cloudwatch:putMetricData, the metric and dimensions of the function's EMF line:
    AWS Step Functions Developer Guide, "AWS SDK service integrations"; CloudWatch API Reference,
    PutMetricData). A successful record step counts it once, through the function only."""
    cloud.group("general", instance_type="m5.large", desired=2, gpu=False)
    cloud.wait_nodes(2)
    (node, _), (other, _) = nodes_of(cloud, "general")
    payload = {"cluster": CLUSTER, "poll_seconds": 1, "deadline_seconds": 10, **extra}
    capsys.readouterr()
    cloud.stack.faults.fail_next(
        "DrainFunction",
        Throttled("Rate exceeded"),
        times=4,
        when=lambda event: event.get("action") == "record",
    )

    result = cloud.stack.run("DrainNodeStateMachine", {**payload, "node": node}, timeout=40)

    assert result["status"] == "SUCCEEDED", result
    assert result["output"]["outcome"] == outcome
    assert "recording the outcome failed" in result["output"]["note"]
    assert drain_outcomes(cloud, capsys, outcome) == (0, 1)  # no EMF line: the function never ran
    # marked counted first, as the function marks it: a record step run later (a redrive) counts nothing
    assert counted_mark(cloud, result["executionArn"]) == {"by": "DrainNode", "outcome": outcome}

    # recorded as usual: counted once, by the function
    result = cloud.stack.run("DrainNodeStateMachine", {**payload, "node": other}, timeout=40)
    assert (result["status"], result["output"]["outcome"]) == ("SUCCEEDED", outcome)
    assert drain_outcomes(cloud, capsys, outcome) == (1, 1)  # the PutMetricData total is unchanged


class ServiceError(Exception):
    """A Lambda service error of the invoke (a 500), which the record step retries."""

    error_type = "Lambda.ServiceException"


@pytest.mark.parametrize("outcome", ["terminated", "released"])
def test_a_record_step_whose_answer_was_lost_and_that_ran_again_counts_the_drain_once(
    cloud: Cloud, capsys: pytest.CaptureFixture[str], outcome: str
) -> None:
    """The record step ran to the end (its Event, the ended mark, DrainOutcome's EMF line) and Lambda
    answered a service error: the Retry ran it again and the drain was counted twice. The first run
    now marks the execution counted; the second finds the mark and counts nothing more. Its Event,
    named by the execution, is refused as already there: one on the Node."""
    cloud.group("general", instance_type="m5.large", desired=1, gpu=False)
    cloud.wait_nodes(1)
    ((node, _),) = nodes_of(cloud, "general")
    extra = {"terminate": False, "uncordon": True} if outcome == "released" else {}
    capsys.readouterr()
    cloud.stack.faults.answer_after(
        "DrainFunction", ServiceError("Service error"), when=lambda event: event.get("action") == "record"
    )

    result = cloud.stack.run(
        "DrainNodeStateMachine",
        {"cluster": CLUSTER, "node": node, "poll_seconds": 1, "deadline_seconds": 10, **extra},
        timeout=40,
    )

    assert (result["status"], result["output"]["outcome"]) == ("SUCCEEDED", outcome), result
    runs = [c for c in cloud.stack.calls("DrainFunction") if c.event.get("action") == "record"]
    assert [c.error for c in runs] == ["Lambda.ServiceException", None]  # it ran twice
    assert drain_outcomes(cloud, capsys, outcome) == (1, 0)  # counted once, by the first run
    ended = [e["reason"] for e in events_for(cloud, node) if e["reason"] != "SpillwayDraining"]
    assert ended == ["SpillwayReleased" if outcome == "released" else "SpillwayDrained"]  # one Event too


@pytest.mark.parametrize("outcome", ["terminated", "timeout"])
def test_a_record_step_that_counted_and_then_failed_for_good_is_counted_once(
    cloud: Cloud, capsys: pytest.CaptureFixture[str], outcome: str
) -> None:
    """The record step's first run counted the drain (its EMF line, its mark) and lost its answer (a
    Lambda service error), and every retry lost its answer too: the Catch's fallback counted the drain a
    second time with PutMetricData. The fallback now first writes the same mark, conditionally
    (Step Functions' DynamoDB PutItem with attribute_not_exists): the function's mark is there, the put
    fails with DynamoDB.ConditionalCheckFailedException, and the fallback counts nothing."""
    cloud.group("general", instance_type="m5.large", desired=1, gpu=False)
    cloud.wait_nodes(1)
    ((node, _),) = nodes_of(cloud, "general")
    payload = {"cluster": CLUSTER, "node": node, "poll_seconds": 1, "deadline_seconds": 10}
    if outcome == "timeout":  # a pod only force evicts: a drain without force times out
        add_pod(cloud, "job-0", node, annotations={"karpenter.sh/do-not-disrupt": "true"})
        payload["deadline_seconds"] = 2
    capsys.readouterr()
    cloud.stack.faults.answer_after(
        "DrainFunction",
        ServiceError("Service error"),
        times=4,
        when=lambda event: event.get("action") == "record",
    )

    result = cloud.stack.run("DrainNodeStateMachine", payload, timeout=40)

    assert result["status"] == ("SUCCEEDED" if outcome == "terminated" else "FAILED"), result
    runs = [c for c in cloud.stack.calls("DrainFunction") if c.event.get("action") == "record"]
    assert [c.error for c in runs] == ["Lambda.ServiceException"] * 4  # failed for good
    assert drain_outcomes(cloud, capsys, outcome) == (1, 0)  # by the function's first run only


class Broken(Exception):
    """An error of the drain function no Retry of the cordon names (a bug, say): the drain fails."""


@pytest.mark.parametrize("outcome", ["timeout", "rejected", "failed"])
def test_a_failed_drain_whose_record_step_is_throttled_for_good_still_fails_and_is_counted(
    cloud: Cloud, capsys: pytest.CaptureFixture[str], outcome: str
) -> None:
    """The record step of a failed drain (RecordFailure; RecordRejection for a refused request)
    throttled through its retries: the execution failed as caught, rightly, but nothing counted the
    failure in DrainOutcome, so the drain-timeout alarm (Outcome=timeout) and the dashboard missed it.
    The state machine now counts it itself under the outcome the drain function gives the error
    (DrainTimeout → timeout, InvalidDrainRequest → rejected, any other → failed), as the successes'
    fallbacks do (AWS Step Functions Developer Guide, "AWS SDK service integrations"; CloudWatch API
    Reference, PutMetricData). The drain still fails with its own error, after its compensation."""
    cloud.group("general", instance_type="m5.large", desired=2, gpu=False)
    cloud.wait_nodes(2)
    (node, instance), (other, _) = nodes_of(cloud, "general")
    for i, name in enumerate((node, other)):  # a pod only force evicts: a drain without force times out
        add_pod(cloud, f"job-{i}", name, annotations={"karpenter.sh/do-not-disrupt": "true"})
    payload = {"cluster": CLUSTER, "poll_seconds": 1, "deadline_seconds": 2}
    error = {"timeout": "DrainTimeout", "rejected": "InvalidDrainRequest", "failed": "Broken"}[outcome]
    capsys.readouterr()
    if outcome == "failed":
        cloud.stack.faults.fail_next(
            "DrainFunction", Broken("no cordon"), times=2, when=lambda event: event.get("action") == "cordon"
        )
    cloud.stack.faults.fail_next(
        "DrainFunction",
        Throttled("Rate exceeded"),
        times=4,
        when=lambda event: event.get("action") == "record",
    )
    target = "ip-10-9-9-9.ec2.internal" if outcome == "rejected" else node

    result = cloud.stack.run("DrainNodeStateMachine", {**payload, "node": target}, timeout=40)

    assert result["status"] == "FAILED" and result["error"] == error, result
    assert drain_outcomes(cloud, capsys, outcome) == (0, 1)  # no EMF line: the function never ran
    mark = counted_mark(cloud, result["executionArn"], expires=outcome != "rejected")  # no validation answer
    assert mark == {"by": "DrainNode", "outcome": outcome}
    assert marks(cloud.kube.get("Node", node)) == (False, False, False)  # compensated (or never touched)
    assert instance in {i["InstanceId"] for i in cloud.asg("general")["Instances"]}

    # recorded as usual: counted once, by the function
    result = cloud.stack.run(
        "DrainNodeStateMachine",
        {**payload, "node": "ip-10-9-9-8.ec2.internal" if outcome == "rejected" else other},
    )
    assert (result["status"], result["error"]) == ("FAILED", error), result
    assert drain_outcomes(cloud, capsys, outcome) == (1, 1)  # the PutMetricData total is unchanged


def test_a_drain_whose_terminate_answer_was_lost_and_whose_record_step_failed_for_good_still_succeeds(
    cloud: Cloud, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every terminate attempt timed out after the first had terminated the instance, so
    CompensateTerminate found it gone and the drain went on as terminated, with no terminate result
    in its state; then the record step throttled through its retries. The fallback Pass state read
    that missing result: a Parameters path that selects nothing is a runtime error, which no Catch,
    not even States.ALL, can catch (AWS Step Functions Developer Guide, "Handling errors in Step
    Functions workflows": States.Runtime), so the execution failed for a node that was drained and an
    instance that was gone. It succeeds, terminated, like the other fallbacks."""
    cloud.group("west", region=WEST, instance_type="m5.large", desired=2, gpu=False)
    cloud.wait_nodes(2)
    (node, instance), _ = nodes_of(cloud, "west", WEST)
    cloud.stack.faults.time_out_after(
        "DrainFunction", when=lambda event: event.get("action") == "terminate", times=4
    )
    cloud.stack.faults.fail_next(
        "DrainFunction",
        Throttled("Rate exceeded"),
        times=4,
        when=lambda event: event.get("action") == "record",
    )
    capsys.readouterr()

    result = drain_quickly(cloud, node)

    assert result["status"] == "SUCCEEDED", result
    out = result["output"]
    assert (out["outcome"], out["node"], out["instance_id"]) == ("terminated", node, instance)
    assert "recording the outcome failed" in out["note"]
    assert instance not in cloud.instances()
    assert drain_outcomes(cloud, capsys, "terminated") == (0, 1)  # counted by the state machine
