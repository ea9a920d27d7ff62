"""Scale-up end to end: the plan function on a stream record, the real scale_up.asl.json executed by moto,
the scale function in-process, Auto Scaling made AWS-like by CloudSim, Nodes by the kubelet stand-in.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from conftest import ENVIRONMENT, HOME, WEST, Cloud, running
from moto.autoscaling.exceptions import AutoscalingClientError
from moto.autoscaling.models import AutoScalingBackend, autoscaling_backends
from moto.core import DEFAULT_ACCOUNT_ID as ACCOUNT_ID

from spillway.act import planning
from spillway.adapters.aws import AwsAdapter
from spillway.adapters.state_store import StateStore
from spillway.errors import AwsError, AwsThrottled, StaleSnapshot, StateConflict
from spillway.local import cloud as cloud_module
from spillway.local import objects as o
from spillway.local.demo import schedule
from spillway.local.rig import create_group
from spillway.model.k8s import CORDONED_BY_SPILLWAY, DRAINING_TAINT

UNSCHEDULABLE = "node.kubernetes.io/unschedulable"  # the node lifecycle controller's cordon taint


def gpu_cluster(cloud: Cloud, pods: int = 4) -> None:
    """A busy-enough CPU group, GPU groups in both regions (empty), and ``pods`` pending 1-GPU pods."""
    cloud.group("general", instance_type="m5.xlarge", desired=1, gpu=False)
    cloud.group("gpu-east", region=HOME)
    cloud.group("gpu-west", region=WEST)
    cloud.wait_nodes(1)
    cloud.pending_gpu_pods("train", pods)


def history_errors(cloud: Cloud, execution_arn: str) -> list[str]:
    """Errors of failed task attempts: aws-sdk tasks (TaskFailed) and Lambda tasks (LambdaFunctionFailed)."""
    out = []
    for e in cloud.stack.history(execution_arn):
        if e["type"] == "TaskFailed":
            out.append(e["taskFailedEventDetails"]["error"])
        elif e["type"] == "LambdaFunctionFailed":
            out.append(e["lambdaFunctionFailedEventDetails"]["error"])
    return out


@contextmanager
def flaky_set_desired(errors: list[tuple[str, str]]) -> Iterator[list[tuple[str, str]]]:
    """moto's SetDesiredCapacity answers these errors first (one per call), then works (through CloudSim's
    checks and log, so that log holds only the calls that took effect)."""
    original: Callable[..., Any] = AutoScalingBackend.set_desired_capacity
    left = list(errors)

    def flaky(self: Any, group_name: str, desired_capacity: int | None) -> Any:
        if left:
            code, message = left.pop(0)
            raise AutoscalingClientError(code, message)
        return original(self, group_name, desired_capacity)

    with mock.patch.object(AutoScalingBackend, "set_desired_capacity", flaky):
        yield left


def test_a_gpu_burst_grows_the_gpu_group_and_its_nodes_come_up(cloud: Cloud) -> None:
    gpu_cluster(cloud)
    key = cloud.snapshot()

    result = cloud.plan(cloud.stream_event(key))

    [outcome] = result["results"]
    assert outcome["status"] == "acted" and result["batchItemFailures"] == []
    [execution] = cloud.wait_all()
    assert execution["status"] == "SUCCEEDED", execution
    assert execution["name"] == f"up-{outcome['plan_id']}"
    assert cloud.desired("gpu-east") == 4
    assert cloud.desired("gpu-west", WEST) == 0 and cloud.desired("general") == 1
    assert [c.desired for c in cloud.sim.calls_for("gpu-east")] == [4]
    assert len(cloud.kube.list("Node")) == 5
    assert execution["output"]["result"] == "launched" and execution["output"]["round"] == 1


@pytest.mark.parametrize("part", [True, False], ids=["with a part", "started without a part"])
def test_no_capacity_in_the_primary_region_backs_off_and_overflows_in_the_same_execution(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch, part: bool
) -> None:
    """Without a part: while a deploy updates the state machine before the plan function, the older
    function starts executions whose input names no part, and a state naming ``$.part`` would fail them
    (States.Runtime, which no Catch takes). They run as the first part, with the record key and owners
    they had."""
    if not part:
        requests = planning.execution_requests

        def without_part(*args: Any, **kwargs: Any) -> Any:
            made = requests(*args, **kwargs)
            return [replace(r, input={k: v for k, v in r.input.items() if k != "part"}) for r in made]

        monkeypatch.setattr(planning, "execution_requests", without_part)
    gpu_cluster(cloud)
    cloud.sim.capacity_outage("gpu-east", HOME)
    key = cloud.snapshot()

    cloud.plan(cloud.stream_event(key))

    [execution] = cloud.wait_all()
    assert execution["status"] == "SUCCEEDED", execution
    assert len(cloud.executions()) == 1
    # The primary group: asked for 4, got nothing, set back to what runs (0), backed off.
    assert [c.desired for c in cloud.sim.calls_for("gpu-east")] == [4, 0]
    assert cloud.desired("gpu-east") == 0
    backoff = cloud.backoff_item("backoff#us-east-1/gpu-east")
    assert backoff is not None and "do not have sufficient g5.xlarge capacity" in backoff["reason"]["S"]
    assert int(backoff["expires_at"]["N"]) > int(cloud.started_at.timestamp())
    # The secondary region took the burst (through the scale function: another region).
    assert [c.desired for c in cloud.sim.calls_for("gpu-west", WEST)] == [4]
    assert cloud.desired("gpu-west", WEST) == 4
    rounds = execution["output"]["rounds"]
    assert [[g["outcome"] for g in r["groups"]] for r in rounds] == [["backed_off"], ["ready"]]
    replans = [p for p in cloud.plans() if p["kind"]["S"] == "replan"]
    assert len(replans) == 1 and replans[0]["summary"]["M"]["overflow_nodes"]["N"] == "4"
    # ... and its raise is in the state, so a plan on a snapshot read before it landed does not repeat it
    state = cloud.state_item("state")
    assert state is not None and json.loads(state["state"]["S"])["raises"]["us-west-2/gpu-west"]["to"] == 4
    assert ("part" in json.loads(execution["input"])) is part and execution["output"]["part"] == 1
    assert replans[0]["planned_at"]["S"] == f"{key}#replan-2"
    plan_id = execution["name"].removeprefix("up-")
    items = cloud.stack.client("dynamodb").scan(TableName=cloud.stack.tables["StateTable"])["Items"]
    raised = sorted(i["item"]["S"] for i in items if i["item"]["S"].startswith("raise#"))
    assert raised == [f"raise#up-{plan_id}-1-{HOME}-gpu-east", f"raise#up-{plan_id}-2-{WEST}-gpu-west"]


def test_a_launch_short_in_one_zone_keeps_the_other_zones_instance_and_its_pod_lands_there() -> None:
    """gpu-east spans us-east-1a and us-east-1b, and us-east-1a has no g5.xlarge. The plan raises it by
    two for two pods: Auto Scaling starts one in each zone, the us-east-1a launch fails and the
    us-east-1b instance boots (6 s here). The back-off terminated that booting instance with the rest
    of the raise and both pods went west, where cluster-autoscaler keeps it and removes only the
    desired capacity never started. Now it is kept, the one never started is given back, the re-plan
    counts the kept instance as launching and sends only the other pod west: no second launch for its
    pod, which lands on it once it is Ready."""
    with running_slow_boot() as cloud:
        cloud.group("general", instance_type="m5.xlarge", desired=1, gpu=False)
        cloud.group("gpu-east", region=HOME, zone="ab")
        cloud.group("gpu-west", region=WEST)
        cloud.wait_nodes(1)
        cloud.pending_gpu_pods("train", 2)
        cloud.sim.zone_outage("gpu-east", HOME, f"{HOME}a")

        cloud.plan(cloud.stream_event(cloud.snapshot()))

        [execution] = cloud.wait_all()
        assert execution["status"] == "SUCCEEDED", execution
        first, second = execution["output"]["rounds"]
        [east] = first["groups"]
        [kept] = cloud.asg("gpu-east")["Instances"]
        assert kept["AvailabilityZone"] == f"{HOME}b" and kept["LifecycleState"] == "InService"
        assert east["outcome"] == "backed_off" and east["kept"] == [kept["InstanceId"]]
        assert east["terminated"] == []
        # raised once by two; the launch never started in us-east-1a given back, nothing launched again
        assert [c.desired for c in cloud.sim.calls_for("gpu-east")] == [2, 1]
        assert cloud.backoff_item("backoff#pool#on-demand/us-east-1a/g5.xlarge") is not None
        assert [g["outcome"] for g in second["groups"]] == ["ready"]
        assert [c.desired for c in cloud.sim.calls_for("gpu-west", WEST)] == [1]

        cloud.wait_nodes(3, timeout=20.0)
        [kept_node] = [n["metadata"]["name"] for n in cloud.kube.list("Node")
                       if n["spec"].get("providerID", "").endswith(f"/{kept['InstanceId']}")]  # fmt: skip
        bound = dict(schedule(cloud.kube, "2026-12-05T00:00:00Z"))
        assert len(bound) == 2 and kept_node in bound.values(), bound


@contextmanager
def running_slow_boot() -> Iterator[Cloud]:
    """The rig with instances that take 6 s to become Nodes: a back-off finds them still booting."""
    with Cloud(dict(ENVIRONMENT), boot_seconds=6.0, tick=0.1) as rig:
        yield rig
        assert not rig.registrar.errors, rig.registrar.errors


def test_a_raise_refused_at_prepare_launches_what_the_lowered_max_size_allows(cloud: Cloud) -> None:
    """The plan raises gpu-east 0 -> 4 (recorded in the state's raises); before the execution's prepare
    an operator lowers its MaxSize to 3, so AWS would refuse the raise and prepare refuses it, setting
    nothing. The re-plan took the refused raise for three nodes launching (min(4, MaxSize 3)) and sent
    only the fourth pod west, so three pods waited scale_up_claim_minutes for nodes nobody asked for.
    The refused raise now launches nothing: the re-plan raises gpu-east to 3 and sends one pod west."""
    gpu_cluster(cloud)
    key = cloud.snapshot()
    name = f"{cloud.stack.prefix}-ScaleFunction"
    handler, lowered = cloud.stack._handlers[name], []

    def lower_max_first(event: dict[str, Any], context: Any) -> Any:
        if event.get("action") == "prepare" and not lowered:
            lowered.append(True)
            # moto's UpdateAutoScalingGroup drops a MixedInstancesPolicy it is not given again (AWS keeps it)
            autoscaling_backends[ACCOUNT_ID][HOME].autoscaling_groups["gpu-east"].max_size = 3
        return handler(event, context)

    cloud.stack._handlers[name] = lower_max_first
    try:
        cloud.plan(cloud.stream_event(key))
        [execution] = cloud.wait_all()
    finally:
        cloud.stack._handlers[name] = handler

    assert execution["status"] == "SUCCEEDED", execution
    rounds = execution["output"]["rounds"]
    assert [g["outcome"] for g in rounds[0]["groups"]] == ["refused"], rounds
    assert (cloud.desired("gpu-east"), cloud.desired("gpu-west", WEST)) == (3, 1)
    state = json.loads(cloud.state_item("state")["state"]["S"])  # type: ignore[index]
    assert state["raises"]["us-east-1/gpu-east"]["to"] == 3, state["raises"]


def test_the_overflow_replan_goes_on_when_the_backed_off_groups_region_cannot_be_read(cloud: Cloud) -> None:
    """gpu-east has no capacity: round 1 backs it off, and its re-plan reads every region's groups again.
    us-east-1's Auto Scaling reads are throttled past the SDK's retries by then: the re-plan failed
    (``ReplanFailed``), and the pods waited for the next plan though us-west-2 could take them. Now the
    re-plan carries us-east-1's groups from the snapshot, as observe would, and raises gpu-west."""
    gpu_cluster(cloud)
    cloud.sim.capacity_outage("gpu-east", HOME)
    name = f"{cloud.stack.prefix}-ScaleFunction"
    handler, replanning = cloud.stack._handlers[name], threading.Event()
    read = AwsAdapter.node_groups_in

    def replan_with_home_throttled(event: dict[str, Any], context: Any) -> Any:
        if event.get("action") != "next_round":
            return handler(event, context)
        replanning.set()
        try:
            return handler(event, context)
        finally:
            replanning.clear()

    def throttled_at_home(self: AwsAdapter, region: str, reserve: Any, now: Any = None) -> Any:
        if region == HOME and replanning.is_set():
            raise AwsThrottled(f"DescribeAutoScalingGroups({region}): Throttling: Rate exceeded")
        return read(self, region, reserve, now)

    cloud.stack._handlers[name] = replan_with_home_throttled
    try:
        with mock.patch.object(AwsAdapter, "node_groups_in", throttled_at_home):
            cloud.plan(cloud.stream_event(cloud.snapshot()))
            [execution] = cloud.wait_all()
    finally:
        cloud.stack._handlers[name] = handler

    assert execution["status"] == "SUCCEEDED", execution
    rounds = execution["output"]["rounds"]
    assert [[(g["group"], g["outcome"]) for g in r["groups"]] for r in rounds] == [
        [("gpu-east", "backed_off")],
        [("gpu-west", "ready")],
    ], execution["output"]
    assert [c.desired for c in cloud.sim.calls_for("gpu-west", WEST)] == [4]
    assert [c.desired for c in cloud.sim.calls_for("gpu-east")] == [4, 0]  # raised, given back: no more


def test_an_overflow_raise_throttled_past_its_retries_is_raised_again_in_the_next_round() -> None:
    """gpu-east has no capacity: round 1 backs it off and its re-plan raises gpu-west for the four pods.
    Auto Scaling in us-west-2 throttles SetDesiredCapacity past SetDesired's retries, so round 2 ends in
    Errored and nothing was set. Round 2's re-plan took the raise it had recorded for four nodes
    launching in us-west-2 and found nothing more to launch: the execution ended, the pods pending and
    nothing launching anywhere, and the plans after it counted the same nodes for
    scale_up_claim_minutes. Now the raise that never reached Auto Scaling counts for nothing, and
    round 3 raises gpu-west once the throttle is over."""
    with running(AWS_MAX_ATTEMPTS="1") as cloud:  # the SDK's own retries would only lengthen the test
        gpu_cluster(cloud)
        cloud.sim.capacity_outage("gpu-east", HOME)
        name = f"{cloud.stack.prefix}-ScaleFunction"
        handler, throttling = cloud.stack._handlers[name], [True]

        def throttle_over_after_round_two(event: dict[str, Any], context: Any) -> Any:
            if event.get("action") == "next_round" and event.get("round") == 2:
                throttling.clear()
            return handler(event, context)

        original: Callable[..., Any] = AutoScalingBackend.set_desired_capacity

        def throttled_in_the_west(self: Any, group_name: str, desired_capacity: int | None) -> Any:
            if group_name == "gpu-west" and throttling:
                raise AutoscalingClientError("Throttling", "Rate exceeded")
            return original(self, group_name, desired_capacity)

        cloud.stack._handlers[name] = throttle_over_after_round_two
        try:
            with mock.patch.object(AutoScalingBackend, "set_desired_capacity", throttled_in_the_west):
                cloud.plan(cloud.stream_event(cloud.snapshot()))
                [execution] = cloud.wait_all(timeout=240.0)
        finally:
            cloud.stack._handlers[name] = handler

        assert execution["status"] == "SUCCEEDED", execution
        rounds = execution["output"]["rounds"]
        outcomes = [[(g["group"], g["outcome"]) for g in r["groups"]] for r in rounds]
        assert outcomes == [
            [("gpu-east", "backed_off")],
            [("gpu-west", "error")],
            [("gpu-west", "ready")],
        ], execution["output"]
        assert rounds[1]["groups"][0]["error"] == "AwsThrottled"
        assert [c.desired for c in cloud.sim.calls_for("gpu-west", WEST)] == [4]
        assert cloud.desired("gpu-west", WEST) == 4


def pools_cluster(cloud: Cloud, pools: tuple[str, ...], overflow: tuple[str, ...]) -> None:
    """A CPU group in us-east-1 per pool, each with one pending pod only it can take (a node selector on
    its template's label), and one in us-west-2 for each pool of ``overflow``."""
    for pool in pools:
        label = {"k8s.io/cluster-autoscaler/node-template/label/pool": pool}
        create_group(pool, region=HOME, instance_type="m5.large", tags=label)
        if pool in overflow:
            create_group(f"{pool}-west", region=WEST, instance_type="m5.large", tags=label)
        cloud.kube.add(o.pod(f"job-{pool}", "ml", cpu="1", memory="2Gi", node_selector={"pool": pool}))


def test_each_part_of_a_plan_re_plans_its_own_refused_group() -> None:
    """A plan growing six groups starts two executions (a round maps over five), and prepare refuses one
    group in each (its MaxSize lowered to 0 meanwhile). The second part re-planned first and sent its
    pod west; the first part's NextRound then found that re-plan's record (one per plan and round),
    took it for its own re-plan committed with its answer lost, and mapped over the second part's
    group under the second part's owner: the raise read as one already asked, and the first part's pod
    was never sent west. Each part now re-plans (and raises) as its own, through the real ASL."""
    pools = tuple(f"p{i:02d}" for i in range(6))
    name, refused, second_replanned = "", {"p00", "p05"}, threading.Event()
    with running() as cloud:
        pools_cluster(cloud, pools, overflow=("p00", "p05"))
        name = f"{cloud.stack.prefix}-ScaleFunction"
        handler = cloud.stack._handlers[name]

        def refuse_one_in_each(event: dict[str, Any], context: Any) -> Any:
            group = (event.get("group") or {}).get("group")
            if event.get("action") == "prepare" and group in refused:
                if group == "p00":  # the first part's refusal comes once the second part re-planned
                    second_replanned.wait(30)
                refused.discard(group)
                autoscaling_backends[ACCOUNT_ID][HOME].autoscaling_groups[group].max_size = 0
            out = handler(event, context)
            if event.get("action") == "next_round" and any(r["group"] == "p05" for r in event["results"]):
                second_replanned.set()
            return out

        cloud.stack._handlers[name] = refuse_one_in_each
        try:
            cloud.plan(cloud.stream_event(cloud.snapshot()))
            executions = sorted(cloud.wait_all(), key=lambda e: e["name"])
        finally:
            cloud.stack._handlers[name] = handler

        plan_id = executions[0]["name"].removeprefix("up-")
        assert [e["name"] for e in executions] == [f"up-{plan_id}", f"up-{plan_id}-2"]
        inputs = [json.loads(e["input"]) for e in executions]
        assert [[g["group"] for g in i["groups"]] for i in inputs] == [list(pools[:5]), ["p05"]]
        assert all(e["status"] == "SUCCEEDED" for e in executions), executions
        rounds = [[[(g["group"], g["outcome"]) for g in r["groups"]] for r in e["output"]["rounds"]]
                  for e in executions]  # fmt: skip
        assert rounds[1] == [[("p05", "refused")], [("p05-west", "ready")]], rounds
        assert rounds[0][0][0] == ("p00", "refused") and rounds[0][1] == [("p00-west", "ready")], rounds
        assert (cloud.desired("p00-west", WEST), cloud.desired("p05-west", WEST)) == (1, 1)
        keys = {p["planned_at"]["S"] for p in cloud.plans() if p["kind"]["S"] == "replan"}
        assert {k.split("#", 1)[1] for k in keys} == {"replan-2", "replan-2#part-2"}, keys
        assert [i.get("part") for i in inputs] == [1, 2]


def test_a_launch_that_never_becomes_ready_times_out_is_given_back_and_overflows(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gpu-east's instances boot, but their Nodes never turn Ready (a broken AMI, say)."""
    original_node = cloud_module._node

    def broken_kubelet(name: str, instance_id: str, zone: str, region: str, template: Any) -> Any:
        node = original_node(name, instance_id, zone, region, template)
        if region == HOME and template.labels.get("node.kubernetes.io/instance-type") == "g5.xlarge":
            node["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]
        return node

    monkeypatch.setattr(cloud_module, "_node", broken_kubelet)
    # One timeout for both rounds: east's must run out, west's must not. 3 s was too short for west's four
    # Nodes on a loaded machine (CI saw round 2 back off too); east times out whatever the length.
    monkeypatch.setenv("LAUNCH_TIMEOUT_SECONDS", "10")
    gpu_cluster(cloud)

    cloud.plan(cloud.stream_event(cloud.snapshot()))

    [execution] = cloud.wait_all()
    assert execution["status"] == "SUCCEEDED", execution
    first, second = execution["output"]["rounds"]
    [east] = first["groups"]
    assert east["outcome"] == "backed_off" and len(east["terminated"]) == 4
    assert "0 of 4 new node(s) Ready by the launch deadline" in east["reason"]
    # The four instances that never became nodes were terminated (desired 4 -> 0), nothing else.
    assert cloud.desired("gpu-east") == 0 and cloud.desired("general") == 1
    assert cloud.backoff_item("backoff#us-east-1/gpu-east") is not None
    assert [g["outcome"] for g in second["groups"]] == ["ready"]
    assert cloud.desired("gpu-west", WEST) == 4


@pytest.mark.parametrize("region", [HOME, WEST], ids=["home region", "other region"])
def test_throttling_and_activity_in_progress_are_retried_and_capacity_is_set_once(
    cloud: Cloud, region: str
) -> None:
    cloud.group("general", instance_type="m5.xlarge", desired=1, gpu=False)
    cloud.group("gpu", region=region)
    cloud.wait_nodes(1)
    cloud.pending_gpu_pods("train", 3)
    key = cloud.snapshot()
    injected = [
        ("ScalingActivityInProgress", "Scaling activity 1a2b is in progress and blocks this action"),
        ("ScalingActivityInProgress", "Scaling activity 1a2b is in progress and blocks this action"),
        ("Throttling", "Rate exceeded"),
    ]

    with flaky_set_desired(injected) as left:
        cloud.plan(cloud.stream_event(key))
        [execution] = cloud.wait_all()

    assert execution["status"] == "SUCCEEDED", execution
    assert left == []
    assert [c.desired for c in cloud.sim.calls_for("gpu", region)] == [3]  # the one call that took effect
    assert cloud.desired("gpu", region) == 3
    retried = history_errors(cloud, execution["executionArn"])
    # Every region's raise is the scale function's (relative, once): our adapter names both AwsThrottled.
    assert retried.count("AwsThrottled") >= 2, retried


def test_the_same_stream_record_twice_gives_one_plan_and_one_execution(cloud: Cloud) -> None:
    gpu_cluster(cloud, pods=2)
    event = cloud.stream_event(cloud.snapshot())

    first = cloud.plan(event)
    second = cloud.plan(event)

    assert first == second  # the idempotency record answered the second delivery
    assert len([p for p in cloud.plans() if p["kind"]["S"] == "plan"]) == 1
    assert len(cloud.executions()) == 1
    [execution] = cloud.wait_all()
    assert execution["status"] == "SUCCEEDED" and cloud.desired("gpu-east") == 2


def test_of_two_planners_at_once_only_one_acts(cloud: Cloud) -> None:
    gpu_cluster(cloud, pods=2)
    keys = [cloud.snapshot(), cloud.snapshot()]
    both_loaded = threading.Barrier(2)
    original_load = StateStore.load

    def load_together(self: StateStore, cluster: str, now: Any = None) -> Any:
        loaded = original_load(self, cluster, now)
        both_loaded.wait(timeout=20)  # both planners hold version 0 before either commits
        return loaded

    results: dict[str, Any] = {}

    def planner(key: str) -> None:
        try:
            results[key] = cloud.plan({"cluster": "ml", "snapshot_key": key})
        except Exception as exc:
            results[key] = exc

    with serialized_transactions(), mock.patch.object(StateStore, "load", load_together):
        threads = [threading.Thread(target=planner, args=(k,)) for k in keys]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)

    acted = [r for r in results.values() if isinstance(r, dict) and r["status"] == "acted"]
    lost = [r for r in results.values() if isinstance(r, StateConflict)]
    assert len(acted) == 1 and len(lost) == 1, results
    assert len(cloud.executions()) == 1
    assert [p["planned_at"]["S"] for p in cloud.plans()] == [acted[0]["snapshot_key"]]
    [execution] = cloud.wait_all()
    assert execution["status"] == "SUCCEEDED"


def test_a_stale_snapshot_acts_on_nothing(cloud: Cloud) -> None:
    gpu_cluster(cloud)
    key = cloud.snapshot(age=timedelta(minutes=5))

    from_stream = cloud.plan(cloud.stream_event(key))
    with pytest.raises(StaleSnapshot):
        cloud.plan({"cluster": "ml", "snapshot_key": key})

    assert [r["status"] for r in from_stream["results"]] == ["stale"]
    assert from_stream["batchItemFailures"] == []  # retrying cannot freshen it
    assert cloud.plans() == [] and cloud.state_item("state") is None
    assert cloud.executions() == [] and cloud.sim.set_desired_calls == []


@contextmanager
def serialized_transactions() -> Iterator[None]:
    """DynamoDB applies a conditional transaction atomically; moto checks, then writes, unlocked. With
    two threads racing, give moto the lock DynamoDB has."""
    from moto.dynamodb.models import DynamoDBBackend

    original = DynamoDBBackend.transact_write_items
    lock = threading.Lock()

    def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
        with lock:
            return original(self, *args, **kwargs)

    with mock.patch.object(DynamoDBBackend, "transact_write_items", locked):
        yield


def latest_plan(cloud: Cloud) -> dict[str, Any]:
    item = max(cloud.plans(), key=lambda p: p["snapshot_key"]["S"])
    return dict(json.loads(item["plan"]["S"]))


def test_gpu_nodes_waiting_for_their_device_plugin_are_not_launched_again(cloud: Cloud) -> None:
    """The launched GPU nodes are Ready before their device plugin registers nvidia.com/gpu: the next
    plan counts them as capacity launching (code starting), not as nodes with no room, and launches
    nothing more; once the GPUs register, the pods fit on them."""
    cloud.registrar.plugin_seconds = 3600  # until plugins_up()
    gpu_cluster(cloud)
    first = cloud.plan(cloud.stream_event(cloud.snapshot()))["results"][0]
    assert first["summary"]["scale_up_nodes"] == 4, first
    [execution] = cloud.wait_all()
    assert execution["status"] == "SUCCEEDED", execution
    assert len(cloud.kube.list("Node")) == 5
    assert all("nvidia.com/gpu" not in n["status"]["allocatable"] for n in cloud.kube.list("Node"))

    waiting = cloud.plan(cloud.stream_event(cloud.snapshot()))["results"][0]

    assert waiting["summary"]["scale_up_nodes"] == 0, waiting
    record = latest_plan(cloud)
    assert {p["code"] for p in record["pending"]} == {"fits-launching"}
    starting = [k for k in record["kept"] if k["code"] == "starting"]
    assert len(starting) == 4 and all("nvidia.com/gpu not registered yet" in k["reason"] for k in starting)
    assert cloud.desired("gpu-east") == 4

    cloud.registrar.plugins_up()
    ready = cloud.plan(cloud.stream_event(cloud.snapshot()))["results"][0]
    assert ready["summary"]["scale_up_nodes"] == 0, ready
    assert {p["code"] for p in latest_plan(cloud)["pending"]} == {"fits-free-room"}


def test_replicas_that_must_not_share_a_node_get_a_node_each(cloud: Cloud) -> None:
    """A Deployment's replicas repel each other per node (required pod anti-affinity on the hostname):
    one runs, two wait though the running node has room. The snapshot the real observe code takes keeps
    the terms, and the plan opens a node for each waiting replica instead of counting on that room."""
    cloud.group("general", instance_type="m5.xlarge", desired=1, gpu=False)
    (node,) = cloud.wait_nodes(1)
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    for i in range(3):
        cloud.kube.add(o.pod(f"web-{i}", "shop", cpu="250m", memory="256Mi", labels={"app": "web"},
                             owner=("ReplicaSet", "web-7d4f"), affinity=affinity,
                             node_name=node if i == 0 else None))  # fmt: skip

    outcome = cloud.plan(cloud.stream_event(cloud.snapshot()))["results"][0]

    record = latest_plan(cloud)
    assert outcome["summary"]["scale_up_nodes"] == 2, record
    assert [(s["group"], s["from"], s["to"]) for s in record["scale_up"]] == [("general", 1, 3)]
    [execution] = cloud.wait_all()
    assert execution["status"] == "SUCCEEDED", execution
    assert len(cloud.kube.list("Node")) == 3


def test_a_burst_spread_over_zones_gets_new_nodes_in_every_zone_in_one_plan(cloud: Cloud) -> None:
    """Three single-zone groups (4-CPU nodes) run a 2-CPU replica each of a Deployment spread over zones
    (maxSkew 1, DoNotSchedule), beside a filler that leaves no room. Six more replicas wait. The real observe code
    keeps the spread and the zones (from the instances' AZs, through the kubelet stand-in), and one plan
    grows every group by two, as kube-scheduler will fill them, not one group by six."""
    spread = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
               "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]  # fmt: skip
    for zone in "abc":
        cloud.group(f"general-{zone}", instance_type="m5.xlarge", desired=1, gpu=False, zone=zone)
    nodes = cloud.wait_nodes(3)
    for i, node in enumerate(nodes):
        cloud.kube.add(o.pod(f"fill-{i}", "shop", cpu="1", memory="1Gi", owner=("ReplicaSet", "fill-1"),
                             node_name=node))  # fmt: skip
    for i in range(len(nodes) + 6):
        pod = o.pod(f"web-{i}", "shop", cpu="2", memory="256Mi", labels={"app": "web"},
                    owner=("ReplicaSet", "web-7d4f"), node_name=nodes[i] if i < len(nodes) else None)  # fmt: skip
        pod["spec"]["topologySpreadConstraints"] = spread
        cloud.kube.add(pod)

    outcome = cloud.plan(cloud.stream_event(cloud.snapshot()))["results"][0]

    record = latest_plan(cloud)
    grown = sorted((s["group"], s["from"], s["to"]) for s in record["scale_up"])
    assert grown == [(f"general-{zone}", 1, 3) for zone in "abc"], record
    assert outcome["summary"]["scale_up_nodes"] == 6


def test_a_pod_whose_volume_lives_elsewhere_gets_a_node_where_its_volume_is(cloud: Cloud) -> None:
    """A StatefulSet pod's claim is bound to an EBS volume in us-west-2a; the home region's node has
    room. The real observe code reads the claim and the volume, and the plan grows the western group,
    not the room the pod could never use."""
    cloud.group("general", instance_type="m5.xlarge", desired=1, gpu=False)
    cloud.group("general-west", region=WEST, instance_type="m5.xlarge", gpu=False)
    cloud.wait_nodes(1)
    zone = {"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": [f"{WEST}a"]}
    cloud.kube.add({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-db-0"},
                    "spec": {"capacity": {"storage": "100Gi"}, "accessModes": ["ReadWriteOnce"],
                             "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [zone]}]}}}})  # fmt: skip
    cloud.kube.add({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "metadata": {"name": "data-db-0", "namespace": "shop"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": "pv-db-0",
                             "resources": {"requests": {"storage": "100Gi"}}}})  # fmt: skip
    pod = o.pod("db-0", "shop", cpu="500m", memory="1Gi", owner=("StatefulSet", "db"))
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}]
    cloud.kube.add(pod)

    outcome = cloud.plan(cloud.stream_event(cloud.snapshot()))["results"][0]

    record = latest_plan(cloud)
    assert [(s["group"], s["from"], s["to"]) for s in record["scale_up"]] == [("general-west", 0, 1)], record
    assert outcome["summary"]["scale_up_nodes"] == 1


def test_a_pod_whose_claim_binds_at_once_and_is_not_bound_gets_no_node_until_it_is(cloud: Cloud) -> None:
    """kube-scheduler holds a pod whose claim binds Immediately and is not bound ("pod has unbound
    immediate PersistentVolumeClaims"): a node launched for it would never run it. The real observe code
    reads the claim and its StorageClass (the emulator defaults ``volumeBindingMode`` to Immediate, as
    the API server does); the plan launches nothing until the claim is bound, then grows the group."""
    cloud.group("general", instance_type="m5.xlarge", gpu=False)
    cloud.kube.add({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "gp2"},
                    "provisioner": "ebs.csi.aws.com"})  # fmt: skip
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": "data-db-0", "namespace": "shop"},
             "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "gp2",
                      "resources": {"requests": {"storage": "100Gi"}}}}  # fmt: skip
    cloud.kube.add(claim)
    pod = o.pod("db-0", "shop", cpu="500m", memory="1Gi", owner=("StatefulSet", "db"))
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}]
    cloud.kube.add(pod)

    cloud.plan(cloud.stream_event(cloud.snapshot()))
    held = latest_plan(cloud)
    assert held["scale_up"] == [], held
    assert [(p["pod"], p["code"]) for p in held["pending"]] == [("shop/db-0", "volume-unbound")]

    cloud.kube.add({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-db-0"},
                    "spec": {"capacity": {"storage": "100Gi"}, "accessModes": ["ReadWriteOnce"],
                             "storageClassName": "gp2"}})  # fmt: skip
    stored = cloud.kube.get("PersistentVolumeClaim", "data-db-0", "shop")
    assert stored is not None
    stored["spec"]["volumeName"] = "pv-db-0"  # the PV controller bound it
    cloud.kube.update("PersistentVolumeClaim", stored)
    cloud.plan(cloud.stream_event(cloud.snapshot()))
    bound = latest_plan(cloud)
    assert [(s["group"], s["from"], s["to"]) for s in bound["scale_up"]] == [("general", 0, 1)], bound


def test_a_node_its_drain_cordoned_is_uncordoned_for_a_pending_pod_and_nothing_is_launched(
    cloud: Cloud,
) -> None:
    """A plan's drain cordoned the group's one node (the emulator's node lifecycle controller then taints
    it node.kubernetes.io/unschedulable:NoSchedule, as a cluster's does every cordoned node) when a pod
    arrives that fits there: the plan reuses the node, the scale-up uncordons it and launches nothing,
    and once uncordoned the controller takes the taint off, so kube-scheduler may place the pod there."""
    cloud.group("general", instance_type="m5.xlarge", desired=1, gpu=False)
    [drained] = cloud.wait_nodes(1)
    cordon_as_a_drain(cloud, drained)
    assert UNSCHEDULABLE in taint_keys(cloud, drained)
    cloud.kube.add(o.pod("train-0", "ml", cpu="3", memory="12Gi"))

    cloud.plan(cloud.stream_event(cloud.snapshot()))

    plan = latest_plan(cloud)
    assert [u["node"] for u in plan["uncordon"]] == [drained], plan
    assert plan["scale_up"] == [], plan  # the group does not grow
    assert [(p["pod"], p["code"]) for p in plan["pending"]] == [("ml/train-0", "fits-uncordoned")], plan
    [execution] = cloud.wait_all()
    assert execution["status"] == "SUCCEEDED", execution
    assert cloud.desired("general") == 1 and len(cloud.kube.list("Node")) == 1
    uncordoned = cloud.kube.get("Node", drained)
    assert uncordoned is not None and not uncordoned["spec"].get("unschedulable")
    assert CORDONED_BY_SPILLWAY not in uncordoned["metadata"].get("annotations", {})
    assert taint_keys(cloud, drained) == []


def test_a_node_of_a_group_whose_region_cannot_be_read_is_uncordoned_and_nothing_is_backed_off(
    cloud: Cloud,
) -> None:
    """As above, but us-east-1's DescribeAutoScalingGroups is refused (AccessDenied) since the last
    observation that read it: the snapshot has the region unread and ``general`` carried from that read,
    and the plan reuses its cordoned node. The execution's prepare uncordoned it, then read ``general``
    in us-east-1 for a raise there is none of: refused, the iteration ended Errored, and the next round
    backed ``general`` off (as a raise refused for good) and re-planned the same uncordon, round after
    round. Now it uncordons and asks Auto Scaling nothing of a carried group: one round, nothing backed
    off."""
    cloud.group("general", instance_type="m5.xlarge", desired=1, gpu=False)
    [drained] = cloud.wait_nodes(1)
    cloud.snapshot()  # the last read of us-east-1's groups
    cordon_as_a_drain(cloud, drained)
    cloud.kube.add(o.pod("train-0", "ml", cpu="3", memory="12Gi"))
    # as the adapter says it
    refused = AwsError(f"DescribeAutoScalingGroups({HOME}): AccessDenied: not authorized")
    reads = {
        name: getattr(AwsAdapter, name)
        for name in ("node_groups_in", "describe_group", "describe_activities")
    }

    def refusing(name: str) -> Callable[..., Any]:
        def read(self: AwsAdapter, region: str, *args: Any, **kwargs: Any) -> Any:
            if region == HOME:
                raise refused
            return reads[name](self, region, *args, **kwargs)

        return read

    with contextlib.ExitStack() as patches:
        for name in reads:
            patches.enter_context(mock.patch.object(AwsAdapter, name, refusing(name)))
        cloud.plan(cloud.stream_event(cloud.snapshot()))
        [execution] = cloud.wait_all()

    plan = latest_plan(cloud)
    assert [(p["kind"], p["object"]) for p in plan["problems"]] == [("RegionUnread", f"region {HOME}")], plan
    assert [u["node"] for u in plan["uncordon"]] == [drained] and plan["scale_up"] == [], plan
    assert execution["status"] == "SUCCEEDED", execution
    assert execution["output"]["result"] == "launched", execution["output"]
    rounds = execution["output"]["rounds"]
    assert [[(g["group"], g["outcome"]) for g in r["groups"]] for r in rounds] == [[("general", "ready")]]
    assert history_errors(cloud, execution["executionArn"]) == []
    assert cloud.backoff_item("backoff#us-east-1/general") is None
    uncordoned = cloud.kube.get("Node", drained)
    assert uncordoned is not None and not uncordoned["spec"].get("unschedulable")
    assert cloud.desired("general") == 1


def cordon_as_a_drain(cloud: Cloud, name: str) -> None:
    """Cordon and taint the Node as the drain's cordon step writes it."""
    node = cloud.kube.get("Node", name)
    assert node is not None
    node["metadata"].setdefault("annotations", {})[CORDONED_BY_SPILLWAY] = (
        "2026-12-01T08:00:00Z drain dn-1: idle"
    )
    node["spec"]["unschedulable"] = True
    node["spec"]["taints"] = [
        *(node["spec"].get("taints") or []),
        {"key": DRAINING_TAINT, "effect": "NoSchedule"},
    ]
    cloud.kube.update("Node", node)


def taint_keys(cloud: Cloud, node: str) -> list[str]:
    found = cloud.kube.get("Node", node)
    assert found is not None
    return [t["key"] for t in found["spec"].get("taints") or []]


@pytest.mark.parametrize("detaching", [False, True], ids=["pods-use-all", "one-still-detaching"])
def test_a_pod_whose_new_volume_the_node_with_room_cannot_attach_gets_a_node(
    cloud: Cloud, detaching: bool
) -> None:
    """The running node's CSINode lets the EBS CSI driver attach two volumes, and its two pods use two:
    kube-scheduler refuses it a pod with a new EBS volume (NodeVolumeLimits), though CPU and memory are
    free. The real observe code reads the CSINode, the volumes and the claims, and the plan grows the
    group (whose new node, read from the running one, allows two) rather than count on that room.
    ``detaching``: the CSINode allows three, and a VolumeAttachment holds a third volume whose pod is
    gone (kube-scheduler counts it, nodevolumelimits/csi.go getNodeVolumeAttachmentInfo): observe
    lists it, and the plan grows the group all the same."""
    cloud.group("general", instance_type="m5.xlarge", desired=1, gpu=False)
    (node,) = cloud.wait_nodes(1)
    cloud.kube.add({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": node},
                    "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-0123456789abcdef0",
                                          "topologyKeys": ["topology.ebs.csi.aws.com/zone"],
                                          "allocatable": {"count": 3 if detaching else 2}}]}})  # fmt: skip
    if detaching:
        cloud.kube.add({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-gone"},
                        "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                                 "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-gone"}}})  # fmt: skip
        cloud.kube.add({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
                        "metadata": {"name": "csi-gone"},
                        "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node,
                                 "source": {"persistentVolumeName": "pv-gone"}},
                        "status": {"attached": True}})  # fmt: skip
    cloud.kube.add({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "gp3"},
                    "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer"})  # fmt: skip
    for i in range(3):
        claim: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "storageClassName": "gp3",
                                 "resources": {"requests": {"storage": "10Gi"}}}  # fmt: skip
        if i < 2:  # the running pods' claims are bound to the driver's volumes
            cloud.kube.add({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"pv-db-{i}"},
                            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                                     "storageClassName": "gp3",
                                     "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-0{i}"}}})  # fmt: skip
            claim["volumeName"] = f"pv-db-{i}"
        cloud.kube.add({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                        "metadata": {"name": f"data-db-{i}", "namespace": "shop"}, "spec": claim})  # fmt: skip
        pod = o.pod(f"db-{i}", "shop", cpu="100m", memory="128Mi", owner=("StatefulSet", "db"),
                    node_name=node if i < 2 else None)  # fmt: skip
        pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-db-{i}"}}]
        cloud.kube.add(pod)

    outcome = cloud.plan(cloud.stream_event(cloud.snapshot()))["results"][0]

    record = latest_plan(cloud)
    assert [(s["group"], s["from"], s["to"]) for s in record["scale_up"]] == [("general", 1, 2)], record
    assert outcome["summary"]["scale_up_nodes"] == 1
