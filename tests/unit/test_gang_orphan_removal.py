"""The scale-down's remove_gang_orphan step (spillway.act.gangsweep) on the Kubernetes API emulator and a
fake EC2, and how a plan's gang orphans reach it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from fakes import FakeCloud, FakeLedger
from moto import mock_aws
from plan_world import NOW

from spillway.act.drain import Drainer, cordon_reason, run_action, summarize
from spillway.act.gangsweep import HOLD, SWEEP_PARTITION
from spillway.act.planning import PlanSettings, execution_requests
from spillway.adapters.kube import KubeClient
from spillway.adapters.state_store import StateStore
from spillway.config import PlannerConfig
from spillway.errors import AwsThrottled, AwsUnavailable, InvalidDrainRequest, KubeUnavailable, StateConflict
from spillway.local import objects
from spillway.local.cfn import create_tables
from spillway.local.kubeapi import KubeApiServer
from spillway.model.drain import Drain
from spillway.model.fleet import TAG_ASG, TAG_ATTEMPT, TAG_CLUSTER, TAG_GANG
from spillway.model.k8s import CORDONED_BY_SPILLWAY, DRAINING_TAINT, GANG_GIVE_BACK
from spillway.planner import ScalingPlan, codes
from spillway.planner.types import GangOrphan

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"
CLUSTER = "prod"
ORPHAN = "i-0a1b2c3d4e5f60718"
ATTEMPT = "spillway-0123456789abcdef0123456789abcdef01234567"


@dataclass
class Rig:
    api: KubeApiServer
    cloud: FakeCloud
    ledger: FakeLedger
    drainer: Drainer
    outcomes: list[str]

    def request(self, **changes: Any) -> dict[str, Any]:
        return {
            "cluster": CLUSTER,
            "plan_id": "p-1",
            "instance_id": ORPHAN,
            "region": "us-east-1",
            "attempt": ATTEMPT,
            "gang": "team-a/train",
            "node": None,
            "reason": "in no Auto Scaling group 61m after its launch",
        } | changes

    def node(self, *pods: dict[str, Any]) -> str:
        name = f"node-{ORPHAN}"
        self.api.add(objects.node(name, instance=ORPHAN, zone="us-east-1a"))
        for pod in pods:
            self.api.add(pod)
        return name


@pytest.fixture
def rig() -> Iterator[Rig]:
    with KubeApiServer() as api:
        kube = KubeClient.for_url(api.url, max_attempts=1, sleep=lambda _: None)
        cloud = FakeCloud(cluster=CLUSTER)
        cloud.add_group("gpu", [], desired=0, min_size=0, max_size=4)
        cloud.ec2[ORPHAN] = {
            "region": "us-east-1",
            "state": "running",
            "tags": {TAG_ATTEMPT: ATTEMPT, TAG_GANG: "team-a/train", TAG_CLUSTER: CLUSTER},
        }
        cloud.dns[ORPHAN] = f"node-{ORPHAN}"  # EKS names the Node after it
        outcomes: list[str] = []
        ledger = FakeLedger()
        drainer = Drainer(
            kube,
            cloud,
            ledger=ledger,
            cluster=CLUSTER,
            regions=["us-east-1", "us-west-2"],
            on_outcome=lambda outcome, _: outcomes.append(outcome),
            clock=lambda: NOW,
        )
        yield Rig(api, cloud, ledger, drainer, outcomes)
        kube.close()


def _terminated(rig: Rig) -> list[tuple[Any, ...]]:
    return rig.cloud.called("terminate_instances")


def test_an_orphan_without_a_node_is_terminated_with_ec2(rig: Rig) -> None:
    line = rig.drainer.remove_gang_orphan(rig.request())

    assert _terminated(rig) == [("us-east-1", (ORPHAN,))]
    assert rig.cloud.ec2[ORPHAN]["state"] == "shutting-down"
    assert (
        line["outcome"] == "gang-orphan-terminated" and line["instance_id"] == ORPHAN and line["node"] is None
    )
    assert rig.outcomes == ["gang-orphan-terminated"]


def test_a_retry_after_the_terminate_finds_it_gone(rig: Rig) -> None:
    rig.drainer.remove_gang_orphan(rig.request())

    again = rig.drainer.remove_gang_orphan(rig.request())

    assert again["outcome"] == "gang-orphan-gone"
    assert _terminated(rig) == [("us-east-1", (ORPHAN,))]


def test_an_instance_attached_since_the_plan_is_left_alone(rig: Rig) -> None:
    rig.cloud.groups[("us-east-1", "gpu")]["Instances"].append(
        {"InstanceId": ORPHAN, "LifecycleState": "InService", "AvailabilityZone": "us-east-1a",
         "HealthStatus": "Healthy"}
    )  # fmt: skip

    line = rig.drainer.remove_gang_orphan(rig.request())

    assert line["outcome"] == "gang-orphan-attached" and "gpu" in line["note"]
    assert _terminated(rig) == []


def test_an_instance_tagged_with_a_group_is_left_alone(rig: Rig) -> None:
    rig.cloud.ec2[ORPHAN]["tags"][TAG_ASG] = "theirs"

    assert rig.drainer.remove_gang_orphan(rig.request())["outcome"] == "gang-orphan-attached"
    assert _terminated(rig) == []


def test_an_instance_no_longer_tagged_for_this_cluster_is_not_touched(rig: Rig) -> None:
    rig.cloud.ec2[ORPHAN]["tags"][TAG_CLUSTER] = "other"

    assert rig.drainer.remove_gang_orphan(rig.request())["outcome"] == "gang-orphan-gone"
    assert _terminated(rig) == []


def test_an_instance_of_another_attempt_is_not_touched(rig: Rig) -> None:
    rig.cloud.ec2[ORPHAN]["tags"][TAG_ATTEMPT] = "spillway-another"

    assert rig.drainer.remove_gang_orphan(rig.request())["outcome"] == "gang-orphan-gone"
    assert _terminated(rig) == []


def test_a_stopped_orphan_is_terminated_too(rig: Rig) -> None:
    rig.cloud.ec2[ORPHAN]["state"] = "stopped"

    assert rig.drainer.remove_gang_orphan(rig.request())["outcome"] == "gang-orphan-terminated"


def test_its_idle_node_is_deleted_with_it(rig: Rig) -> None:
    node = rig.node(objects.pod("agent", node_name=f"node-{ORPHAN}", owner=("DaemonSet", "agent")))

    line = rig.drainer.remove_gang_orphan(rig.request(node=node))

    assert line["outcome"] == "gang-orphan-terminated" and line["node"] == node
    assert _terminated(rig) == [("us-east-1", (ORPHAN,))]
    assert node not in {n["metadata"]["name"] for n in rig.api.list("nodes")}


def test_a_node_that_runs_work_by_now_keeps_its_instance(rig: Rig) -> None:
    node = rig.node(objects.pod("worker-0", node_name=f"node-{ORPHAN}", phase="Running"))

    line = rig.drainer.remove_gang_orphan(rig.request())  # the plan saw no Node yet

    assert (
        line["outcome"] == "gang-orphan-busy" and "default/worker-0" in line["note"] and line["node"] == node
    )
    assert _terminated(rig) == []
    assert rig.outcomes == ["gang-orphan-busy"]


def test_a_pod_stuck_terminating_on_its_node_keeps_nothing(rig: Rig) -> None:
    """As the plan judges it: a pod still listed long after its deletion (its kubelet gone) is no work."""
    rig.node(objects.pod("worker-0", node_name=f"node-{ORPHAN}", phase="Running"))
    stuck = rig.api.get("Pod", "worker-0", "default")
    stuck["metadata"]["deletionTimestamp"] = "2026-11-01T10:00:00Z"  # a day before the drainer's clock
    stuck["metadata"]["finalizers"] = ["example.com/hold"]
    rig.api.update("Pod", stuck)

    assert rig.drainer.remove_gang_orphan(rig.request())["outcome"] == "gang-orphan-terminated"


def test_a_node_the_plan_named_under_another_name_is_checked_too(rig: Rig) -> None:
    rig.cloud.dns[ORPHAN] = "ip-10-0-0-1.ec2.internal"  # the kubelet registered under another name
    node = rig.node(objects.pod("worker-0", node_name=f"node-{ORPHAN}", phase="Running"))

    line = rig.drainer.remove_gang_orphan(rig.request(node=node))

    assert line["outcome"] == "gang-orphan-busy" and _terminated(rig) == []


def _schedulable(rig: Rig, node: str) -> bool:
    obj = rig.api.get("Node", node)
    return not obj["spec"].get("unschedulable") and CORDONED_BY_SPILLWAY not in obj["metadata"].get(
        "annotations", {}
    )


def test_its_node_is_cordoned_before_its_pods_are_read_for_the_last_time(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kube-scheduler may bind a pod to the idle Node at any time; only the cordon stops it (its
    NodeUnschedulable filter), so the last look at the pods comes after it, as a drain's does."""
    node = rig.node()
    seen: list[bool] = []
    read = rig.drainer.kube.pods_on_node

    def pods_on_node(name: str) -> Any:
        seen.append(_schedulable(rig, name))
        return read(name)

    monkeypatch.setattr(rig.drainer.kube, "pods_on_node", pods_on_node)

    assert rig.drainer.remove_gang_orphan(rig.request(node=node))["outcome"] == "gang-orphan-terminated"
    assert seen == [False]


def test_a_busy_orphans_node_is_left_schedulable(rig: Rig) -> None:
    node = rig.node(objects.pod("worker-0", node_name=f"node-{ORPHAN}", phase="Running"))

    assert rig.drainer.remove_gang_orphan(rig.request(node=node))["outcome"] == "gang-orphan-busy"
    assert _schedulable(rig, node)


def test_a_cordon_somebody_else_made_is_left_on_a_busy_orphan(rig: Rig) -> None:
    node = rig.node(objects.pod("worker-0", node_name=f"node-{ORPHAN}", phase="Running"))
    obj = rig.api.get("Node", node)
    obj["spec"]["unschedulable"] = True
    rig.api.update("Node", obj)

    assert rig.drainer.remove_gang_orphan(rig.request(node=node))["outcome"] == "gang-orphan-busy"
    assert rig.api.get("Node", node)["spec"]["unschedulable"] is True


def test_a_busy_orphan_keeps_a_cordon_spillway_wrote_over_the_sweeps_meanwhile(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the sweep reads the pods, another of Spillway's cordons takes the Node over (a drain by
    hand, say). The busy orphan's release took it off by name: it is compare-and-set on the sweep's
    own words, as the give-backs' and the drains' are."""
    node = rig.node(objects.pod("worker-0", node_name=f"node-{ORPHAN}", phase="Running"))
    read = rig.drainer.kube.pods_on_node

    def pods_on_node(name: str) -> Any:
        obj = rig.api.get("Node", name)
        obj["metadata"]["annotations"][CORDONED_BY_SPILLWAY] = "2026-11-02T10:00:00Z drain by-hand: fix disk"
        rig.api.update("Node", obj)
        return read(name)

    monkeypatch.setattr(rig.drainer.kube, "pods_on_node", pods_on_node)

    assert rig.drainer.remove_gang_orphan(rig.request(node=node))["outcome"] == "gang-orphan-busy"
    obj = rig.api.get("Node", node)
    assert (
        obj["spec"]["unschedulable"] is True
        and "by-hand" in obj["metadata"]["annotations"][CORDONED_BY_SPILLWAY]
    )


def _spot_drain(node: str) -> Drain:
    """The drain a Spot interruption warning starts for an instance its group detached (no plan, no group:
    spillway.act.drain._drains_outside_group), as validated."""
    return Drain.model_validate(
        {
            "cluster": CLUSTER,
            "node": node,
            "node_uid": "uid-1",
            "reason": "spot interruption warning w-1",
            "deadline_seconds": 90,
            "poll_seconds": 5,
            "terminate": False,
            "force": True,
            "dry_run": False,
            "instance_id": ORPHAN,
            "group": None,
            "region": "us-east-1",
            "started_at": "2026-11-02T11:59:00Z",
            "deadline_at": "2026-11-02T12:00:30Z",
            "leaving": True,
            "name": f"spot-{ORPHAN}",
        }
    )


def _cordoned_by(rig: Rig, node: str, reason: str, *, taint: bool = True) -> str:
    """Spillway's cordon for ``reason`` on the Node, with a drain's taint, as that step writes them: the
    annotation's value."""
    kube = rig.drainer.kube
    assert kube.cordon(node, reason)
    if taint:
        kube.add_draining_taint(node)
    return rig.api.get("Node", node)["metadata"]["annotations"][CORDONED_BY_SPILLWAY]


def _held_as(rig: Rig, node: str, value: str, *, taint: bool = True) -> bool:
    """The Node is still cordoned with exactly that annotation, and still carries the draining taint
    (``taint``: a drain's cordon; a give-back's has none)."""
    obj = rig.api.get("Node", node)
    taints = {t["key"] for t in obj["spec"].get("taints", [])}
    return (
        obj["spec"].get("unschedulable") is True
        and obj["metadata"]["annotations"].get(CORDONED_BY_SPILLWAY) == value
        and (DRAINING_TAINT in taints) is taint
    )


OTHER_CORDONS = {
    "spot-warning": lambda node: cordon_reason(_spot_drain(node)),
    "plan-drain": lambda node: cordon_reason(
        _spot_drain(node).model_copy(update={"plan_id": "p-0", "name": "scale-down-p-0-1", "reason": "idle"})
    ),
    "give-back": lambda _: f"{GANG_GIVE_BACK} team-a/train (attempt {ATTEMPT})",
}


@pytest.mark.parametrize("holder", sorted(OTHER_CORDONS))
def test_a_busy_orphan_under_another_spillway_cordon_keeps_it_and_its_taint(rig: Rig, holder: str) -> None:
    """A Spot warning's drain is evicting the detached instance's pods (a budget holds some): the sweep
    finds them running. Taking the drain's cordon over and then off as its own would let the evicted
    pods' replacements schedule back onto an instance EC2 takes within two minutes. Any cordon of
    Spillway's but a sweep's is as a person's to the sweep: left as it is."""
    node = rig.node(objects.pod("worker-0", node_name=f"node-{ORPHAN}", phase="Running"))
    drain = holder != "give-back"
    value = _cordoned_by(rig, node, OTHER_CORDONS[holder](node), taint=drain)

    line = rig.drainer.remove_gang_orphan(rig.request(node=node))

    assert line["outcome"] == "gang-orphan-busy" and _terminated(rig) == []
    assert _held_as(rig, node, value, taint=drain)


def test_an_idle_orphan_under_a_drains_cordon_is_terminated_its_cordon_never_taken_over(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As under a person's cordon: no pod keeps it, so the instance goes and its Node is deleted; the
    sweep looked at the pods under the drain's own cordon, never its own words written over it."""
    node = rig.node(objects.pod("agent", node_name=f"node-{ORPHAN}", owner=("DaemonSet", "agent")))
    value = _cordoned_by(rig, node, cordon_reason(_spot_drain(node)))
    seen: list[bool] = []
    read = rig.drainer.kube.pods_on_node

    def pods_on_node(name: str) -> Any:
        seen.append(_held_as(rig, name, value))
        return read(name)

    monkeypatch.setattr(rig.drainer.kube, "pods_on_node", pods_on_node)

    line = rig.drainer.remove_gang_orphan(rig.request(node=node))

    assert line["outcome"] == "gang-orphan-terminated" and _terminated(rig) == [("us-east-1", (ORPHAN,))]
    assert seen == [True]
    assert node not in {n["metadata"]["name"] for n in rig.api.list("nodes")}


def test_a_sweep_that_fails_under_a_drains_cordon_leaves_the_drains_cordon(rig: Rig) -> None:
    node = rig.node()
    value = _cordoned_by(rig, node, cordon_reason(_spot_drain(node)))
    rig.cloud.fail("terminate_instances", AwsThrottled("Rate exceeded"), times=1)

    with pytest.raises(AwsThrottled):
        rig.drainer.remove_gang_orphan(rig.request(node=node))
    assert _held_as(rig, node, value)


@pytest.mark.parametrize("busy", [True, False])
def test_a_dead_sweeps_cordon_is_taken_over_and_released_on_a_busy_orphan(rig: Rig, busy: bool) -> None:
    """An earlier plan's sweep cordoned the Node and its Lambda died before it released it: the next
    sweep takes that cordon as its own, so a busy orphan is left schedulable (the work may grow), and an
    idle one is terminated."""
    pods = [objects.pod("worker-0", node_name=f"node-{ORPHAN}", phase="Running")] if busy else []
    node = rig.node(*pods)
    _cordoned_by(rig, node, f"gang orphan {ORPHAN} (plan p-0)", taint=False)

    line = rig.drainer.remove_gang_orphan(rig.request(node=node))

    if busy:
        assert line["outcome"] == "gang-orphan-busy" and _schedulable(rig, node)
    else:
        assert line["outcome"] == "gang-orphan-terminated" and _terminated(rig) == [("us-east-1", (ORPHAN,))]


@pytest.mark.parametrize("failing", ["pods", "terminate"])
def test_a_sweep_that_fails_after_the_cordon_leaves_the_node_uncordoned(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    node = rig.node()
    if failing == "pods":

        def refuse(name: str) -> Any:
            raise KubeUnavailable("the API server did not answer")

        monkeypatch.setattr(rig.drainer.kube, "pods_on_node", refuse)
    else:
        rig.cloud.fail("terminate_instances", AwsThrottled("Rate exceeded"), times=1)

    with pytest.raises((KubeUnavailable, AwsThrottled)):
        rig.drainer.remove_gang_orphan(rig.request(node=node))
    assert _schedulable(rig, node)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"cluster": "other"}, "cluster"),
        ({"region": "eu-west-1"}, "region"),
        ({"instance_id": "node-1"}, "instance_id"),
        ({"attempt": ""}, "attempt"),
        ({"extra": 1}, "extra"),
    ],
)
def test_a_bad_request_is_refused_naming_the_field_and_nothing_is_terminated(
    rig: Rig, changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidDrainRequest) as caught:
        rig.drainer.remove_gang_orphan(rig.request(**changes))

    assert caught.value.field == field
    assert _terminated(rig) == []


def test_an_aws_error_is_raised_as_ours_for_the_state_machine_to_retry(rig: Rig) -> None:
    rig.cloud.fail("terminate_instances", AwsThrottled("Rate exceeded"), times=1)

    with pytest.raises(AwsThrottled):
        rig.drainer.remove_gang_orphan(rig.request())
    assert rig.drainer.remove_gang_orphan(rig.request())["outcome"] == "gang-orphan-terminated"


def test_the_step_is_an_action_of_the_drain_function_and_its_line_joins_the_summary(rig: Rig) -> None:
    line = run_action(rig.drainer, {"action": "remove_gang_orphan", "request": rig.request()})

    summary = summarize(CLUSTER, "p-1", [{"output": line}])

    (entry,) = summary["drains"]
    assert entry["instance_id"] == ORPHAN and entry["outcome"] == "gang-orphan-terminated"
    assert summary["counts"] == {"gang-orphan-terminated": 1}


def test_the_summary_tells_an_orphan_terminated_from_a_drained_node_terminated(rig: Rig) -> None:
    """A gang orphan's line said ``terminated``, as a drained node's does, and an unregistered instance's
    and an orphan's both ``gone``: a scale-down's counts of ``{"terminated": 2}`` read as two nodes
    drained and terminated where one was an instance that never held a group's node. Its line names the
    outcome as the DrainOutcome metric does, ``gang-orphan-<outcome>``. (Found by review.)"""
    orphan = run_action(rig.drainer, {"action": "remove_gang_orphan", "request": rig.request()})
    drained = {"node": "n-1", "instance_id": "i-0123456789abcdef1", "group": "gpu", "region": "us-east-1",
               "outcome": "terminated"}  # fmt: skip
    gone = {"node": None, "instance_id": "i-0123456789abcdef2", "group": "gpu", "region": "us-east-1",
            "outcome": "gone"}  # fmt: skip

    summary = summarize(CLUSTER, "p-1", [{"output": drained}, {"output": orphan}, {"output": gone}])

    assert summary["counts"] == {"gang-orphan-terminated": 1, "gone": 1, "terminated": 1}
    assert rig.outcomes == ["gang-orphan-terminated"]  # the metric, unchanged


SETTINGS = PlanSettings(
    PlannerConfig(), scale_down_arn="arn:aws:states:us-east-1:123456789012:stateMachine:down"
)


def test_a_plan_sends_the_orphans_it_terminates_through_the_scale_down_and_not_the_busy_ones() -> None:
    swept = GangOrphan(ORPHAN, "us-east-1", "team-a/train", ATTEMPT, None, True, codes.GANG_ORPHAN, "left")
    busy = GangOrphan("i-0fffffffffffffff0", "us-east-1", "team-a/train", ATTEMPT, "n", False,
                      codes.GANG_ORPHAN_BUSY, "runs work")  # fmt: skip

    (request,) = execution_requests(
        CLUSTER, "p-1", "k", ScalingPlan(gang_orphans=(swept, busy)), [], SETTINGS, NOW
    )

    assert request.input["drains"] == [
        {"gang_orphan": True, "instance_id": ORPHAN, "region": "us-east-1", "attempt": ATTEMPT,
         "gang": "team-a/train", "node": None, "reason": "left", "unready_minutes": None},
    ]  # fmt: skip


def test_a_plan_whose_orphans_are_all_busy_starts_no_scale_down() -> None:
    busy = GangOrphan(ORPHAN, "us-east-1", "g", ATTEMPT, "n", False, codes.GANG_ORPHAN_BUSY, "runs work")

    assert execution_requests(CLUSTER, "p-1", "k", ScalingPlan(gang_orphans=(busy,)), [], SETTINGS, NOW) == []


# --- two sweeps of one orphan at once ---------------------------------------------------------
# A plan runs every minute and a scale-down can outlast the next one's start, so two executions can
# sweep the same orphan at the same moment. Each test plays one interleaving on one thread: the first
# sweep (A) runs the second (B) from inside one of its calls.


def _finish(rig: Rig, pod: str) -> None:
    obj = rig.api.get("Pod", pod, "default")
    obj["status"]["phase"] = "Succeeded"
    rig.api.update("Pod", obj)


def test_a_sweep_never_terminates_an_orphan_under_a_pod_another_sweeps_uncordon_let_bind(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cordons and finds the gang's worker running: busy, so A takes its cordon off. Meanwhile B, whose
    cordon answered "ours" too (the Node carried Spillway's cordon already), looked once the worker had
    finished and found the Node idle; between B's look and B's terminate, A's uncordon lands and
    kube-scheduler binds a new pod to the schedulable Node. B terminated the instance under it. One
    sweep of an instance at a time: B finds A's claim and leaves the orphan to A."""
    node = rig.node(objects.pod("worker-0", node_name=f"node-{ORPHAN}", phase="Running"))
    kube, cloud = rig.drainer.kube, rig.cloud
    uncordon, terminate = kube.uncordon, cloud.terminate_instances
    lines: list[dict[str, Any]] = []
    a_uncordoned: list[bool] = []

    def a_uncordons_and_a_pod_binds() -> None:
        a_uncordoned.append(uncordon(node))
        if _schedulable(rig, node):  # kube-scheduler binds to a schedulable Node only
            rig.api.add(objects.pod("worker-1", node_name=node, phase="Running"))

    def b_terminates(region: str, ids: Any) -> Any:
        a_uncordons_and_a_pod_binds()  # lands between B's look at the pods and B's terminate
        return terminate(region, ids)

    def a_takes_its_cordon_off(name: str, **_: Any) -> bool:
        monkeypatch.setattr(kube, "uncordon", uncordon)
        _finish(rig, "worker-0")
        monkeypatch.setattr(cloud, "terminate_instances", b_terminates)
        lines.append(rig.drainer.remove_gang_orphan(rig.request(node=node)))  # B, the next plan's
        if not a_uncordoned:
            a_uncordons_and_a_pod_binds()
        return a_uncordoned[0]

    monkeypatch.setattr(kube, "uncordon", a_takes_its_cordon_off)

    first = rig.drainer.remove_gang_orphan(rig.request(node=node))

    (second,) = lines
    assert first["outcome"] == "gang-orphan-busy"
    assert _terminated(rig) == [], f"terminated under worker-1: B's line {second}"
    assert second["outcome"] == "gang-orphan-held" and ORPHAN in second["note"]
    assert _schedulable(rig, node)  # A's cordon is off, and B made none
    assert rig.outcomes == ["gang-orphan-held", "gang-orphan-busy"]


def test_two_sweeps_of_one_idle_orphan_terminate_it_once(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """B, run while A terminates, cordoned, found the Node idle too and terminated the instance again:
    two ``gang-orphan-terminated`` lines, and DrainOutcome metrics, for one instance."""
    node = rig.node()
    terminate = rig.cloud.terminate_instances
    lines: list[dict[str, Any]] = []

    def a_terminates(region: str, ids: Any) -> Any:
        monkeypatch.setattr(rig.cloud, "terminate_instances", terminate)
        lines.append(rig.drainer.remove_gang_orphan(rig.request(node=node)))  # B
        return terminate(region, ids)

    monkeypatch.setattr(rig.cloud, "terminate_instances", a_terminates)

    first = rig.drainer.remove_gang_orphan(rig.request(node=node))

    assert first["outcome"] == "gang-orphan-terminated"
    assert [line["outcome"] for line in lines] == ["gang-orphan-held"]
    assert _terminated(rig) == [("us-east-1", (ORPHAN,))]
    assert node not in {n["metadata"]["name"] for n in rig.api.list("nodes")}


CLAIM = (SWEEP_PARTITION.format(cluster=CLUSTER), f"gangsweep#us-east-1#{ORPHAN}")
# where a build before SWEEP_PARTITION claimed it: the cluster's own partition
OLDER_CLAIM = (CLUSTER, CLAIM[1])


def test_a_sweep_claims_the_instance_before_its_cordon_and_names_its_plan(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = rig.node()
    held: list[dict[str, object]] = []
    cordon = rig.drainer.kube.cordon

    def cordon_seeing_the_claim(name: str, reason: str = "", **options: Any) -> bool:
        held.append(dict(rig.ledger.claimed[CLAIM]))
        return cordon(name, reason, **options)

    monkeypatch.setattr(rig.drainer.kube, "cordon", cordon_seeing_the_claim)

    rig.drainer.remove_gang_orphan(rig.request(node=node))

    [claim] = held
    assert claim["plan"] == "p-1" and claim["at"] == "2026-11-02T12:00:00Z" and claim["sweep"]
    assert rig.ledger.expiries == {}  # released
    assert rig.ledger.called("claim") == [CLAIM]


@pytest.mark.parametrize("outcome", ["terminated", "gone", "attached", "busy"])
def test_the_claim_is_released_whatever_the_sweep_finds(rig: Rig, outcome: str) -> None:
    node = rig.node(*([objects.pod("worker-0", node_name=f"node-{ORPHAN}", phase="Running")]
                      if outcome == "busy" else []))  # fmt: skip
    if outcome == "gone":
        rig.cloud.ec2[ORPHAN]["tags"][TAG_ATTEMPT] = "spillway-another"
    if outcome == "attached":
        rig.cloud.ec2[ORPHAN]["tags"][TAG_ASG] = "theirs"

    line = rig.drainer.remove_gang_orphan(rig.request(node=node))

    assert line["outcome"] == f"gang-orphan-{outcome}"
    assert CLAIM not in rig.ledger.claimed
    assert rig.ledger.called("release") == [CLAIM]


@pytest.mark.parametrize("failing", ["pods", "terminate"])
def test_the_claim_is_released_after_a_failure_so_the_retry_sweeps(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    node = rig.node()
    if failing == "pods":
        monkeypatch.setattr(rig.drainer.kube, "pods_on_node", _refuse)
    else:
        rig.cloud.fail("terminate_instances", AwsThrottled("Rate exceeded"), times=1)

    with pytest.raises((KubeUnavailable, AwsThrottled)):
        rig.drainer.remove_gang_orphan(rig.request(node=node))
    assert CLAIM not in rig.ledger.claimed
    monkeypatch.undo()

    assert rig.drainer.remove_gang_orphan(rig.request(node=node))["outcome"] == "gang-orphan-terminated"


def _refuse(name: str) -> Any:
    raise KubeUnavailable("the API server did not answer")


def test_a_sweep_finding_the_claim_held_touches_nothing_and_leaves_the_claim(rig: Rig) -> None:
    node = rig.node()
    rig.ledger.claim(*CLAIM, {"plan": "p-0", "at": "2026-11-02T11:59:30Z"}, expires=NOW + HOLD)
    rig.api.clear_requests()

    line = rig.drainer.remove_gang_orphan(rig.request(node=node))

    assert line["outcome"] == "gang-orphan-held" and line["node"] == node
    assert "plan p-0" in line["note"] and "2026-11-02T11:59:30Z" in line["note"]
    assert rig.cloud.calls == [] and rig.api.requests == []  # nothing read, nothing done
    assert rig.ledger.claimed[CLAIM] == {"plan": "p-0", "at": "2026-11-02T11:59:30Z"}  # still the other's
    assert rig.ledger.called("release") == []
    assert rig.outcomes == ["gang-orphan-held"]


def test_a_claim_released_while_it_was_read_is_held_too(rig: Rig) -> None:
    rig.ledger.fail("claim", StateConflict("the claim went away while it was read"), times=1)

    line = rig.drainer.remove_gang_orphan(rig.request())

    assert line["outcome"] == "gang-orphan-held" and _terminated(rig) == []
    assert rig.ledger.called("release") == []


def test_a_claim_past_its_hold_is_a_dead_sweeps_and_is_taken_over(rig: Rig) -> None:
    """Its Lambda died (timed out) before it released the claim, and DynamoDB's TTL deletes an expired
    item only days later: the claim lapses after HOLD, longer than any Lambda invocation."""
    node = rig.node()
    rig.ledger.claim(*CLAIM, {"plan": "p-0", "at": "2026-11-02T11:45:00Z"}, expires=NOW)

    assert rig.drainer.remove_gang_orphan(rig.request(node=node))["outcome"] == "gang-orphan-terminated"
    assert CLAIM not in rig.ledger.claimed


def test_the_claim_is_in_a_partition_of_its_own_not_the_clusters() -> None:
    """The drain function's role may delete items of the sweep partition alone (dynamodb:LeadingKeys),
    not the planner's state, back-offs and markers of the cluster's own partition."""
    assert CLAIM[0] == "prod#gangsweep" and CLAIM[0] != CLUSTER


def test_an_older_builds_live_claim_holds_the_sweep_and_its_own_claim_is_let_go(rig: Rig) -> None:
    """An older build's sweep, still running while the function was updated, claimed the instance in the
    cluster's own partition: this sweep does nothing (held), and gives its own claim back at once."""
    node = rig.node()
    older = {"plan": "p-0", "at": "2026-11-02T11:59:30Z", "sweep": "older"}
    rig.ledger.claim(*OLDER_CLAIM, older, expires=NOW + HOLD)
    rig.api.clear_requests()

    line = rig.drainer.remove_gang_orphan(rig.request(node=node))

    assert line["outcome"] == "gang-orphan-held" and "plan p-0" in line["note"]
    assert rig.cloud.calls == [] and rig.api.requests == []
    assert CLAIM not in rig.ledger.claimed and rig.ledger.claimed[OLDER_CLAIM] == older
    assert rig.ledger.called("release") == [CLAIM]


def test_an_older_builds_claim_past_its_hold_holds_nothing(rig: Rig) -> None:
    node = rig.node()
    rig.ledger.claim(*OLDER_CLAIM, {"plan": "p-0", "at": "2026-11-02T11:45:00Z"}, expires=NOW)

    assert rig.drainer.remove_gang_orphan(rig.request(node=node))["outcome"] == "gang-orphan-terminated"
    assert CLAIM not in rig.ledger.claimed


def test_an_older_builds_claim_that_cannot_be_read_counts_as_held(rig: Rig) -> None:
    rig.ledger.fail("claims", AwsThrottled("Rate exceeded"), times=1)

    line = rig.drainer.remove_gang_orphan(rig.request())

    assert line["outcome"] == "gang-orphan-held" and _terminated(rig) == []
    assert CLAIM not in rig.ledger.claimed


def test_a_claim_taken_over_while_the_sweep_ran_is_left_to_its_new_holder(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep ran past its hold (a slow EC2 answer), its claim lapsed, and another sweep took it over.
    Releasing by name deleted the new holder's claim, and a third sweep could then overlap the second:
    the release deletes only this sweep's own claim."""
    node = rig.node()
    terminate = rig.cloud.terminate_instances
    theirs = {"plan": "p-2", "at": "2026-11-02T12:16:00Z", "sweep": "another"}

    def slow_terminate(region: str, ids: Any) -> Any:
        # the claim lapsed while EC2 answered, and another sweep took it over
        rig.ledger.claim(*CLAIM, theirs, expires=NOW + 2 * HOLD, now=NOW + HOLD)
        return terminate(region, ids)

    monkeypatch.setattr(rig.cloud, "terminate_instances", slow_terminate)

    assert rig.drainer.remove_gang_orphan(rig.request(node=node))["outcome"] == "gang-orphan-terminated"
    assert rig.ledger.claimed[CLAIM] == theirs
    assert rig.ledger.called("release") == [CLAIM]


def test_a_claim_not_released_leaves_the_outcome_as_it_was(rig: Rig) -> None:
    """The release is best effort: the terminate happened, and a retry of the step would only find the
    claim (held) until it lapses."""
    rig.ledger.fail("release", AwsUnavailable("DynamoDB did not answer"), times=1)

    assert rig.drainer.remove_gang_orphan(rig.request())["outcome"] == "gang-orphan-terminated"
    assert _terminated(rig) == [("us-east-1", (ORPHAN,))]


def test_a_sweep_whose_claims_answer_was_lost_knows_the_claim_for_its_own(rig: Rig) -> None:
    """DynamoDB wrote the claim but its answer was lost (a read timeout, a 500: "the operation may or
    may not have succeeded"), so botocore sent the put again, and the repeat found the claim there:
    StateStore.claim answers with the stored claim, not written by this call. That claim is this
    sweep's own: taken for another's, the sweep was ``held`` by itself, and its claim, never released,
    kept every sweep of the orphan (the step's retries, the next plans') ``held`` for HOLD."""
    node = rig.node()
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_tables(TEMPLATE, client, {"StateTable": "state"})
        lost: list[int] = []

        def answer_lost(attempts: int, caught_exception: Exception | None, **_: Any) -> int | None:
            if attempts == 1 and caught_exception is None:
                lost.append(attempts)
                return 0  # the put landed, its answer did not: botocore sends it again
            return None

        client.meta.events.register("needs-retry.dynamodb.PutItem", answer_lost)
        rig.drainer.ledger = StateStore(client, "state")

        line = rig.drainer.remove_gang_orphan(rig.request(node=node))

        assert lost == [1]
        assert line["outcome"] == "gang-orphan-terminated", line
        assert _terminated(rig) == [("us-east-1", (ORPHAN,))]
        assert StateStore(client, "state").claims(CLAIM[0], "gangsweep#") == {}  # released


def _dead_node_with_a_pod_that_never_started(
    rig: Rig, minutes_not_ready: float, status: str = "False"
) -> str:
    from datetime import timedelta

    name = f"node-{ORPHAN}"
    created = NOW - timedelta(minutes=minutes_not_ready)
    node = objects.node(name, instance=ORPHAN, zone="us-east-1a", ready=False, created=created)
    node["status"]["conditions"][0]["status"] = status  # Unknown: the kubelet went silent
    rig.api.add(node)
    rig.api.add(
        objects.pod("worker-0", node_name=name, phase="Pending", tolerations=[{"operator": "Exists"}])
    )
    return name


def test_a_pod_that_never_started_on_a_node_long_not_ready_keeps_nothing(rig: Rig) -> None:
    node = _dead_node_with_a_pod_that_never_started(rig, 25)

    line = rig.drainer.remove_gang_orphan(rig.request(node=node, unready_minutes=20))

    assert line["outcome"] == "gang-orphan-terminated" and _terminated(rig) == [("us-east-1", (ORPHAN,))]


@pytest.mark.parametrize(
    ("minutes_not_ready", "unready_minutes", "status"),
    [(5, 20, "False"), (25, None, "False"), (25, 20, "Unknown")],
)
def test_a_pod_that_never_started_keeps_the_orphan_unless_its_node_is_not_ready_that_long_now(
    rig: Rig, minutes_not_ready: float, unready_minutes: float | None, status: str
) -> None:
    """The Node became NotReady since the plan, the plan (an older build's) said nothing of it, or its
    kubelet went silent (Ready Unknown: the pod's status is stale, it may have started since)."""
    node = _dead_node_with_a_pod_that_never_started(rig, minutes_not_ready, status)
    request = rig.request(node=node) | ({"unready_minutes": unready_minutes} if unready_minutes else {})

    line = rig.drainer.remove_gang_orphan(request)

    assert line["outcome"] == "gang-orphan-busy" and _terminated(rig) == []


def test_a_node_deleted_between_its_cordon_and_its_read_is_taken_for_gone(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its kubelet deregistered, or somebody deleted it, right after the cordon: no kubelet is there, so
    the instance is terminated, as for a Node gone by its cordon (reading it again against the plan's
    unready time raised NodeNotFound and failed the step)."""
    node = _dead_node_with_a_pod_that_never_started(rig, 25)
    kube = rig.drainer.kube
    cordon = kube.cordon

    def cordon_then_gone(name: str, why: str, **options: Any) -> bool:
        out = cordon(name, why, **options)
        kube.delete_node(name)
        return out

    monkeypatch.setattr(kube, "cordon", cordon_then_gone)

    line = rig.drainer.remove_gang_orphan(rig.request(node=node, unready_minutes=20))

    assert line["outcome"] == "gang-orphan-terminated" and _terminated(rig) == [("us-east-1", (ORPHAN,))]
